//! Fuzz target: a solution script's source and trigger on arbitrary text. Whatever the text, a
//! source compiles or is refused at a line inside it, and one that compiles runs to its end or
//! is stopped by a limit; a trigger reads and prints back to itself, or is refused. No panic.
#![no_main]

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use solution_scripts::{Entry, HostError, ScriptEngine, ScriptHost, ScriptLimits, Trigger, spawn_run_thread};

/// A plant where nothing changes and the model always answers the same.
struct StillPlant;

impl ScriptHost for StillPlant {
    fn read_tag(&self, name: &str) -> Result<Value, HostError> {
        Ok(json!({"tag": name, "value": 1.5, "quality": "good"}))
    }

    fn write_tag(&self, _script: &str, _name: &str, _value: Value) -> Result<(), HostError> {
        Ok(())
    }

    fn active_alarms(&self) -> Result<Value, HostError> {
        Ok(json!([]))
    }

    fn tag_history(&self, _name: &str, _minutes: u64) -> Result<Value, HostError> {
        Ok(json!({"samples": [], "min": null, "max": null, "mean": null}))
    }

    fn log(&self, _script: &str, _message: &str) {}

    fn ai_execute(&self, _query: Value) -> Value {
        json!({"status": "ok", "text": "noted"})
    }

    fn ai_execute_async(&self, _script: &str, _query: Value, _callback: &str) -> Result<(), HostError> {
        Ok(())
    }
}

/// Tighter limits than a server's, so each input runs in well under a millisecond or two.
static ENGINE: LazyLock<ScriptEngine> = LazyLock::new(|| {
    let limits = ScriptLimits {
        max_operations: 10_000,
        wall_clock: Duration::from_millis(200),
        ..ScriptLimits::default()
    };
    ScriptEngine::new(Arc::new(StillPlant), limits)
});

fuzz_target!(|text: &str| {
    match ENGINE.compile(text) {
        Ok(ast) => {
            // On a run thread, as a server runs it: its stack holds the deepest value a script
            // may build.
            let outcome = spawn_run_thread("fuzz-run", move || {
                ENGINE.run("Fuzz", &ast, Entry::Main(&json!({"trigger": "run"})))
            })
            .expect("a run thread")
            .join()
            .expect("no panic in a run");
            assert!(outcome.duration < Duration::from_secs(5), "a run outlived its limits");
        }
        Err(error) => {
            // Rhai ends a line at `\n` or at a lone `\r` (old Mac files): counting both, and
            // `\r\n` twice, bounds its line numbers from above.
            let lines = text.matches(['\n', '\r']).count() + 1;
            assert!(error.line <= lines, "an error outside the text: {error:?}");
        }
    }
    if let Ok(trigger) = text.parse::<Trigger>() {
        assert_eq!(trigger.to_string().parse::<Trigger>(), Ok(trigger), "{text:?}");
    }
});
