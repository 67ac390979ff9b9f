//! Fuzz target: `localai::fuzzing::model_settings` on arbitrary UTF-8 text.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    localai::fuzzing::model_settings(text);
});
