//! Fuzz target: both Local AI paths' readers of an LLM response body (any bytes).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    localai::fuzzing::llm_response(body);
});
