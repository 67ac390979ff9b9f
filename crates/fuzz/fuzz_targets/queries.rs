//! Fuzz target: `localai::fuzzing::queries` on arbitrary UTF-8 text.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    localai::fuzzing::queries(text);
});
