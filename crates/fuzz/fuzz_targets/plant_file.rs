//! Fuzz target: the plant file reader on arbitrary text, as TOML and as JSON. Whatever the
//! text, it is read or refused with at least one error at a place inside it; what is read
//! exports to TOML that reads back to the same model.
#![no_main]

use libfuzzer_sys::fuzz_target;
use plant_model::{Format, read};

fuzz_target!(|text: &str| {
    for format in [Format::Toml, Format::Json] {
        match read(text, format, "fuzz") {
            Ok(model) => {
                let exported = model.to_toml().expect("a model read exports");
                let again = read(&exported, Format::Toml, "exported").expect("an export reads back");
                assert_eq!(again, model, "export then import changed the model");
            }
            Err(errors) => {
                assert!(!errors.errors.is_empty(), "refused without a reason");
                let lines = text.lines().count().max(1) + 1;
                for error in &errors.errors {
                    assert!(error.line >= 1 && error.line <= lines, "an error outside the text: {error}");
                }
            }
        }
    }
});
