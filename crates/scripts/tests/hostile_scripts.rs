//! Scripts built to take the process down (values nested past any ordinary stack, closures
//! chained, functions curried with themselves, the model called in a loop), each run as a
//! server runs it, on a run thread: each must end as a recorded run, never as a crash.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rhai::{Dynamic, Map};
use serde_json::{Value, json};
use solution_scripts::{
    Entry, HostError, RunError, ScriptEngine, ScriptHost, ScriptLimits, compile_check, spawn_run_thread,
};

/// A host that counts the model calls and keeps what was written.
#[derive(Debug, Default)]
struct CountingHost {
    model_calls: AtomicUsize,
    written: Mutex<Vec<Value>>,
    /// How long each `ai_execute` takes.
    model_wait: Duration,
}

impl ScriptHost for CountingHost {
    fn read_tag(&self, name: &str) -> Result<Value, HostError> {
        Ok(json!({"tag": name, "value": 1.0, "quality": "Good"}))
    }
    fn write_tag(&self, _script: &str, _name: &str, value: Value) -> Result<(), HostError> {
        self.written.lock().expect("lock").push(value);
        Ok(())
    }
    fn active_alarms(&self) -> Result<Value, HostError> {
        Ok(json!([]))
    }
    fn tag_history(&self, _name: &str, _minutes: u64) -> Result<Value, HostError> {
        Ok(json!({"samples": []}))
    }
    fn log(&self, _script: &str, _message: &str) {}
    fn ai_execute(&self, _query: Value) -> Value {
        std::thread::sleep(self.model_wait);
        self.model_calls.fetch_add(1, Ordering::Relaxed);
        json!({"status": "ok", "text": "fine"})
    }
    fn ai_execute_async(&self, _script: &str, _query: Value, _callback: &str) -> Result<(), HostError> {
        self.model_calls.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

fn engine(limits: ScriptLimits) -> (Arc<CountingHost>, Arc<ScriptEngine>) {
    engine_on(CountingHost::default(), limits)
}

fn engine_on(host: CountingHost, limits: ScriptLimits) -> (Arc<CountingHost>, Arc<ScriptEngine>) {
    let host = Arc::new(host);
    let engine = ScriptEngine::new(Arc::clone(&host) as Arc<dyn ScriptHost>, limits);
    (host, Arc::new(engine))
}

/// Runs `source`'s top level on a run thread, as a server does.
fn run_on_run_thread(engine: &Arc<ScriptEngine>, source: &str) -> Result<(), RunError> {
    let ast = engine.compile(source).expect("compiles");
    let engine = Arc::clone(engine);
    spawn_run_thread("script-test", move || {
        engine
            .run("Hostile", &ast, Entry::Main(&json!({"trigger": "run"})))
            .result
    })
    .expect("a run thread")
    .join()
    .expect("the run thread ends without a panic")
}

/// Stopped for a size (the value's limit) or the wall clock (Rhai measures a value at every
/// change, so a deep one grows slowly and a slow machine may reach the clock first).
fn stopped_by_a_limit(outcome: &Result<(), RunError>) -> bool {
    matches!(outcome, Err(RunError::TooLarge(_) | RunError::TimedOut(_)))
}

#[test]
fn maps_nested_past_any_ordinary_stack_end_the_run_not_the_process() {
    let (_, engine) = engine(ScriptLimits::default());
    let outcome = run_on_run_thread(&engine, "let m = #{}; for i in 0..20000 { m = #{a: m}; }");
    assert!(stopped_by_a_limit(&outcome), "{outcome:?}");
}

#[test]
fn arrays_nested_until_a_limit_end_the_run_not_the_process() {
    let (_, engine) = engine(ScriptLimits::default());
    let outcome = run_on_run_thread(&engine, "let a = []; loop { a = [a]; }");
    assert!(stopped_by_a_limit(&outcome), "{outcome:?}");
    let outcome = run_on_run_thread(&engine, "let m = #{}; loop { m.inner = [m, m.len()]; }");
    assert!(stopped_by_a_limit(&outcome), "{outcome:?}");
}

#[test]
fn a_deep_value_printed_or_compared_ends_cleanly() {
    let small = ScriptLimits {
        max_array_len: 2_000,
        ..ScriptLimits::default()
    };
    let (_, engine) = engine(small);
    let outcome = run_on_run_thread(
        &engine,
        "let a = []; for i in 0..1990 { a = [a]; } let b = a; print(a); let s = a.to_string(); a == b;",
    );
    assert_eq!(outcome, Ok(()));
}

#[test]
fn closures_cannot_capture_so_a_chain_of_them_nests_nothing() {
    let (_, engine) = engine(ScriptLimits::default());
    // The chain that overflowed: each closure captured the one before. Without captures, each
    // is a plain function pointer and `g` is not in its scope.
    let outcome = run_on_run_thread(
        &engine,
        "let f = || 0; for i in 0..100000 { let g = f; f = || g.call() + 1; }",
    );
    assert!(
        matches!(
            &outcome,
            Ok(()) | Err(RunError::TooManyOperations(_) | RunError::TimedOut(_))
        ),
        "{outcome:?}"
    );
    let called = run_on_run_thread(&engine, "let g = || 1; let f = || g.call(); f.call();");
    assert!(
        matches!(&called, Err(RunError::Failed { message, .. }) if message.contains('g')),
        "a closure sees no variable of its surroundings: {called:?}"
    );
}

#[test]
fn currying_is_not_available() {
    let error = compile_check("let f = Fn(\"x\"); for i in 0..64 { f = curry(f, f); }")
        .expect_err("curry is refused");
    assert!(error.message.contains("curry"), "{error}");
    assert!(compile_check("let f = Fn(\"x\"); f = f.curry(f);").is_err());
}

#[test]
fn a_value_too_deep_for_the_host_is_refused_before_it_leaves_the_script() {
    let (host, engine) = engine(ScriptLimits::default());
    let outcome = run_on_run_thread(
        &engine,
        "let a = 1; for i in 0..40 { a = [a]; } write_tag(\"Tank1.Note\", a);",
    );
    assert!(
        matches!(&outcome, Err(RunError::TooLarge(what)) if what.contains("32 levels")),
        "{outcome:?}"
    );
    let outcome = run_on_run_thread(
        &engine,
        "let q = #{}; for i in 0..40 { q = #{user: q}; } ai_execute(q);",
    );
    assert!(matches!(&outcome, Err(RunError::TooLarge(_))), "{outcome:?}");
    assert_eq!(host.model_calls.load(Ordering::Relaxed), 0);
    // Within the depth, values leave as they are.
    run_on_run_thread(&engine, "write_tag(\"Tank1.Note\", [[1, 2], #{a: [3]}]);").expect("written");
    assert_eq!(
        host.written.lock().expect("lock").last(),
        Some(&json!([[1, 2], {"a": [3]}]))
    );
}

#[test]
fn the_deepest_value_the_limits_allow_is_cloned_printed_and_dropped_on_a_run_thread() {
    let limits = ScriptLimits::default();
    let depth = limits.max_array_len + limits.max_map_len;
    let printed = spawn_run_thread("script-test", move || {
        // Maps cost the most stack per level: every level a map.
        let mut value = Dynamic::UNIT;
        for _ in 0..depth {
            let mut map = Map::new();
            map.insert("a".into(), value);
            value = Dynamic::from_map(map);
        }
        let copy = value.clone();
        let printed = format!("{copy:?}").len();
        drop(copy);
        drop(value);
        printed
    })
    .expect("a run thread")
    .join()
    .expect("the run thread ends without a panic");
    assert!(printed > depth, "{printed}");
}

#[test]
fn a_script_asking_the_model_in_a_loop_is_stopped_at_the_run_allowance() {
    let (host, engine) = engine(ScriptLimits::default());
    let outcome = run_on_run_thread(&engine, "loop { ai_execute(\"x\"); }");
    assert_eq!(outcome, Err(RunError::TooManyModelCalls(10)));
    assert_eq!(host.model_calls.load(Ordering::Relaxed), 10);
    // Catching does not help: the stop is not an error a script may catch.
    let outcome = run_on_run_thread(
        &engine,
        "loop { try { ai_execute_async(\"x\", \"f\"); } catch {} }",
    );
    assert_eq!(outcome, Err(RunError::TooManyModelCalls(10)));
    assert_eq!(host.model_calls.load(Ordering::Relaxed), 20);
}

#[test]
fn a_script_asking_the_model_in_every_run_is_stopped_at_the_minute_allowance() {
    let limits = ScriptLimits {
        model_calls_per_minute: 25,
        ..ScriptLimits::default()
    };
    let (host, engine) = engine(limits);
    let outcomes: Vec<_> = (0..4)
        .map(|_| run_on_run_thread(&engine, "for i in 0..10 { ai_execute(\"x\"); }"))
        .collect();
    assert_eq!(
        outcomes,
        vec![
            Ok(()),
            Ok(()),
            Err(RunError::ModelCallsTooFast(25)),
            Err(RunError::ModelCallsTooFast(25))
        ]
    );
    assert_eq!(host.model_calls.load(Ordering::Relaxed), 25);
}

#[test]
fn a_stop_ends_the_runs_under_way_and_refuses_new_ones() {
    let slow_model = CountingHost {
        model_wait: Duration::from_millis(20),
        ..CountingHost::default()
    };
    let limits = ScriptLimits {
        max_operations: 0,
        wall_clock: Duration::from_secs(600),
        ..ScriptLimits::default()
    };
    let (_, engine) = engine_on(slow_model, limits);
    let ast = engine.compile("loop { }").expect("compiles");
    let running = {
        let engine = Arc::clone(&engine);
        spawn_run_thread("script-test", move || {
            engine
                .run("Spin", &ast, Entry::Main(&json!({"trigger": "run"})))
                .result
        })
        .expect("a run thread")
    };
    // The run is under way (or about to be): either way the stop ends it.
    std::thread::sleep(Duration::from_millis(50));
    engine.stop();
    assert_eq!(running.join().expect("no panic"), Err(RunError::Stopped));
    assert_eq!(
        run_on_run_thread(&engine, "let x = 1;"),
        Err(RunError::Stopped),
        "no run starts after the stop"
    );
}
