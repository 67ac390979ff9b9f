//! The sandboxed engine: one Rhai [`Engine`] with the host's API registered, no `eval`, no
//! file modules (only the solution's classes import), print and debug into the host's log,
//! and limits on every run, the wall-clock one checked as the script runs.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use rhai::{AST, Dynamic, Engine, EvalAltResult, Module, ModuleResolver, Position, Scope, Shared};
use serde_json::Value;

use crate::host::{HostError, ScriptHost};

/// Operations between two looks at the clock (a look costs a clock read).
const CLOCK_EVERY: u64 = 1024;

/// What one run may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptLimits {
    /// Rhai operations (about one expression node each).
    pub max_operations: u64,
    /// Nested function calls.
    pub max_call_levels: usize,
    /// Nesting of expressions and statements.
    pub max_expr_depth: usize,
    /// Bytes of one string.
    pub max_string_bytes: usize,
    /// Items of one array.
    pub max_array_len: usize,
    /// Entries of one map.
    pub max_map_len: usize,
    /// Wall-clock time, not counting time spent waiting for the model (`ai_execute`).
    pub wall_clock: Duration,
}

impl Default for ScriptLimits {
    fn default() -> Self {
        Self {
            max_operations: 1_000_000,
            max_call_levels: 32,
            max_expr_depth: 64,
            max_string_bytes: 1024 * 1024,
            max_array_len: 100_000,
            max_map_len: 10_000,
            wall_clock: Duration::from_secs(5),
        }
    }
}

/// A script that does not compile: where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct CompileError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// Rhai's description.
    pub message: String,
}

/// Why a run stopped before its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// Past [`ScriptLimits::max_operations`] (an endless loop, usually).
    #[error("stopped after {0} operations, the most one run may take")]
    TooManyOperations(u64),
    /// Past [`ScriptLimits::wall_clock`].
    #[error("stopped after {0:?} of running time, the most one run may take")]
    TimedOut(Duration),
    /// Calls nested past [`ScriptLimits::max_call_levels`] (runaway recursion, usually).
    #[error("stopped: calls nested deeper than {0} levels")]
    TooDeep(usize),
    /// A string, array or map past its size limit.
    #[error("stopped: {0} grew past its limit")]
    TooLarge(String),
    /// The function the trigger names is not in the script.
    #[error("the script has no function {0}")]
    NoFunction(String),
    /// The script failed (a thrown value, a type error, a failed host call not caught).
    #[error("line {line}: {message}")]
    Failed {
        /// 1-based line, 0 when unknown.
        line: usize,
        /// What went wrong.
        message: String,
    },
}

/// How one run went.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// Wall-clock time of the run.
    pub duration: Duration,
    /// Its end.
    pub result: Result<(), RunError>,
}

/// Where a run starts.
#[derive(Debug, Clone, Copy)]
pub enum Entry<'a> {
    /// The script's top level, with what fired it as the constant `event` (a map: `trigger`,
    /// and the tag or alarm for those triggers).
    Main(&'a Value),
    /// One of its functions, with one argument (an alarm, an AI reply envelope).
    Function(&'a str, &'a Value),
}

/// The run under way on this thread: whose it is and when it must stop.
struct RunState {
    script: String,
    deadline: Instant,
}

thread_local! {
    static RUN: RefCell<Option<RunState>> = const { RefCell::new(None) };
}

/// The running script's name ("" outside a run).
fn current_script() -> String {
    RUN.with(|run| {
        run.borrow()
            .as_ref()
            .map(|state| state.script.clone())
            .unwrap_or_default()
    })
}

/// Sets this thread's run for the guard's life.
struct RunGuard;

impl RunGuard {
    fn enter(script: &str, wall_clock: Duration) -> Self {
        RUN.with(|run| {
            *run.borrow_mut() = Some(RunState {
                script: script.to_owned(),
                deadline: Instant::now() + wall_clock,
            });
        });
        Self
    }
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        RUN.with(|run| *run.borrow_mut() = None);
    }
}

/// Moves this thread's deadline later by `waited` (time the host spent on the model).
fn extend_deadline(waited: Duration) {
    RUN.with(|run| {
        if let Some(state) = run.borrow_mut().as_mut() {
            state.deadline += waited;
        }
    });
}

/// The solution's classes, importable by name.
#[derive(Debug, Default, Clone)]
struct Classes(Arc<RwLock<HashMap<String, Shared<Module>>>>);

impl ModuleResolver for Classes {
    fn resolve(
        &self,
        _engine: &Engine,
        _source: Option<&str>,
        path: &str,
        position: Position,
    ) -> Result<Shared<Module>, Box<EvalAltResult>> {
        let classes = self.0.read().unwrap_or_else(PoisonError::into_inner);
        classes
            .get(path)
            .cloned()
            .ok_or_else(|| EvalAltResult::ErrorModuleNotFound(path.to_owned(), position).into())
    }
}

/// A Rhai engine with the sandbox's settings and limits, and no host API.
fn sandboxed(limits: &ScriptLimits) -> Engine {
    let mut engine = Engine::new();
    engine.disable_symbol("eval");
    engine.set_max_operations(limits.max_operations);
    engine.set_max_call_levels(limits.max_call_levels);
    engine.set_max_expr_depths(limits.max_expr_depth, limits.max_expr_depth);
    engine.set_max_string_size(limits.max_string_bytes);
    engine.set_max_array_size(limits.max_array_len);
    engine.set_max_map_size(limits.max_map_len);
    // Without a resolver of ours, `import` would read files.
    engine.set_module_resolver(rhai::module_resolvers::DummyModuleResolver::new());
    engine.on_print(|_| {});
    engine.on_debug(|_, _, _| {});
    engine.on_progress(|operations| {
        if operations % CLOCK_EVERY != 0 {
            return None;
        }
        let late = RUN.with(|run| {
            run.borrow()
                .as_ref()
                .is_some_and(|state| Instant::now() > state.deadline)
        });
        late.then(|| Dynamic::from("wall-clock limit"))
    });
    engine
}

/// Compiles `source` with the sandbox's syntax (no `eval`): for checking a script before it
/// is stored.
pub fn compile_check(source: &str) -> Result<(), CompileError> {
    compile_with(&sandboxed(&ScriptLimits::default()), source).map(drop)
}

fn compile_with(engine: &Engine, source: &str) -> Result<AST, CompileError> {
    engine.compile(source).map_err(|error| CompileError {
        line: error.1.line().unwrap_or(0),
        column: error.1.position().unwrap_or(0),
        message: error.0.to_string(),
    })
}

/// Turns a host error into a Rhai error the script may catch.
fn thrown(error: HostError) -> Box<EvalAltResult> {
    EvalAltResult::ErrorRuntime(error.0.into(), Position::NONE).into()
}

fn to_script(value: &Value) -> Result<Dynamic, Box<EvalAltResult>> {
    rhai::serde::to_dynamic(value)
}

fn from_script(value: &Dynamic) -> Result<Value, Box<EvalAltResult>> {
    rhai::serde::from_dynamic(value)
}

/// The engine scripts run in, with the host's API.
pub struct ScriptEngine {
    engine: Engine,
    classes: Classes,
    limits: ScriptLimits,
}

impl std::fmt::Debug for ScriptEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptEngine")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl ScriptEngine {
    /// An engine whose scripts reach the plant through `host`.
    pub fn new(host: Arc<dyn ScriptHost>, limits: ScriptLimits) -> Self {
        let mut engine = sandboxed(&limits);
        let classes = Classes::default();
        engine.set_module_resolver(classes.clone());
        {
            let host = Arc::clone(&host);
            engine.on_print(move |message| host.log(&current_script(), message));
        }
        let api = Arc::clone(&host);
        engine.register_fn(
            "read_tag",
            move |name: &str| -> Result<Dynamic, Box<EvalAltResult>> {
                to_script(&api.read_tag(name).map_err(thrown)?)
            },
        );
        let api = Arc::clone(&host);
        engine.register_fn(
            "write_tag",
            move |name: &str, value: Dynamic| -> Result<(), Box<EvalAltResult>> {
                api.write_tag(&current_script(), name, from_script(&value)?)
                    .map_err(thrown)
            },
        );
        let api = Arc::clone(&host);
        engine.register_fn("active_alarms", move || -> Result<Dynamic, Box<EvalAltResult>> {
            to_script(&api.active_alarms().map_err(thrown)?)
        });
        let api = Arc::clone(&host);
        engine.register_fn(
            "tag_history",
            move |name: &str, minutes: i64| -> Result<Dynamic, Box<EvalAltResult>> {
                let minutes = u64::try_from(minutes)
                    .map_err(|_| thrown(HostError("minutes must be positive".into())))?;
                to_script(&api.tag_history(name, minutes).map_err(thrown)?)
            },
        );
        let api = Arc::clone(&host);
        engine.register_fn("log", move |message: &str| api.log(&current_script(), message));
        engine.register_fn("now", || -> String {
            humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
        });
        let api = Arc::clone(&host);
        engine.register_fn(
            "ai_execute",
            move |query: Dynamic| -> Result<Dynamic, Box<EvalAltResult>> {
                let query = from_script(&query)?;
                let asked = Instant::now();
                let envelope = api.ai_execute(query);
                // Waiting for the model is the AI budget's, not the script's running time.
                extend_deadline(asked.elapsed());
                to_script(&envelope)
            },
        );
        let api = host;
        engine.register_fn(
            "ai_execute_async",
            move |query: Dynamic, callback: &str| -> Result<(), Box<EvalAltResult>> {
                api.ai_execute_async(&current_script(), from_script(&query)?, callback)
                    .map_err(thrown)
            },
        );
        Self {
            engine,
            classes,
            limits,
        }
    }

    /// The limits every run has.
    pub fn limits(&self) -> &ScriptLimits {
        &self.limits
    }

    /// Compiles a script.
    pub fn compile(&self, source: &str) -> Result<AST, CompileError> {
        compile_with(&self.engine, source)
    }

    /// Makes `ast` importable as `name` (replacing an earlier version); its top level runs
    /// now, under the same limits as any run.
    pub fn set_class(&self, name: &str, ast: &AST) -> Result<(), RunError> {
        self.load_class(name, ast)
            .map_err(|error| self.run_error(*error, None))
    }

    fn load_class(&self, name: &str, ast: &AST) -> Result<(), Box<EvalAltResult>> {
        let _run = RunGuard::enter(name, self.limits.wall_clock);
        let module = Module::eval_ast_as_new(Scope::new(), ast, &self.engine)?;
        self.classes
            .0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_owned(), Shared::new(module));
        Ok(())
    }

    /// [`set_class`](Self::set_class) for each of `classes`, those another imports first
    /// whatever their order (a class's imports resolve as it loads); returns those that did
    /// not load, each with why: its own failure, or an import of a class that did not load or
    /// that imports it back.
    pub fn set_classes<'a>(
        &self,
        classes: impl IntoIterator<Item = (&'a str, &'a AST)>,
    ) -> Vec<(String, RunError)> {
        let mut waiting: Vec<(&str, &AST)> = classes.into_iter().collect();
        let mut failed = Vec::new();
        // Each round loads at least one class more, or ends.
        loop {
            let mut loaded_some = false;
            let mut unresolved = Vec::new();
            for (name, ast) in waiting {
                match self.load_class(name, ast) {
                    Ok(()) => loaded_some = true,
                    Err(error) if matches!(*error, EvalAltResult::ErrorModuleNotFound(..)) => {
                        unresolved.push((name, ast, error));
                    }
                    Err(error) => failed.push((name.to_owned(), self.run_error(*error, None))),
                }
            }
            if unresolved.is_empty() || !loaded_some {
                failed.extend(
                    unresolved
                        .into_iter()
                        .map(|(name, _, error)| (name.to_owned(), self.run_error(*error, None))),
                );
                return failed;
            }
            waiting = unresolved.into_iter().map(|(name, ast, _)| (name, ast)).collect();
        }
    }

    /// Forgets the class `name`.
    pub fn remove_class(&self, name: &str) {
        self.classes
            .0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name);
    }

    /// Runs `script` (compiled as `ast`) from `entry` on this thread, within the limits.
    pub fn run(&self, script: &str, ast: &AST, entry: Entry<'_>) -> RunOutcome {
        let started = Instant::now();
        let _run = RunGuard::enter(script, self.limits.wall_clock);
        let mut scope = Scope::new();
        let result = match entry {
            Entry::Main(event) => to_script(event).and_then(|event| {
                scope.push_constant("event", event);
                self.engine.run_ast_with_scope(&mut scope, ast)
            }),
            Entry::Function(function, argument) => to_script(argument).and_then(|argument| {
                // Only the function: the top level ran when the script was triggered.
                let options = rhai::CallFnOptions::new().eval_ast(false).rewind_scope(true);
                self.engine
                    .call_fn_with_options::<Dynamic>(options, &mut scope, ast, function, (argument,))
                    .map(drop)
            }),
        };
        let function = match entry {
            Entry::Main(_) => None,
            Entry::Function(function, _) => Some(function),
        };
        RunOutcome {
            duration: started.elapsed(),
            result: result.map_err(|error| self.run_error(*error, function)),
        }
    }

    fn run_error(&self, error: EvalAltResult, function: Option<&str>) -> RunError {
        match error {
            EvalAltResult::ErrorTooManyOperations(_) => {
                RunError::TooManyOperations(self.limits.max_operations)
            }
            EvalAltResult::ErrorTerminated(_, _) => RunError::TimedOut(self.limits.wall_clock),
            EvalAltResult::ErrorStackOverflow(_) => RunError::TooDeep(self.limits.max_call_levels),
            EvalAltResult::ErrorDataTooLarge(what, _) => RunError::TooLarge(what),
            EvalAltResult::ErrorFunctionNotFound(signature, _)
                if function.is_some_and(|name| signature.starts_with(name)) =>
            {
                RunError::NoFunction(function.unwrap_or_default().to_owned())
            }
            other => RunError::Failed {
                line: other.position().line().unwrap_or(0),
                message: other.to_string(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;

    /// A host with one tag store, recording what scripts did.
    #[derive(Default)]
    struct RecordingHost {
        tags: Mutex<HashMap<String, Value>>,
        log: Mutex<Vec<(String, String)>>,
        model_wait: Duration,
        asked: Mutex<Vec<Value>>,
    }

    impl ScriptHost for RecordingHost {
        fn read_tag(&self, name: &str) -> Result<Value, HostError> {
            let tags = self.tags.lock().expect("lock");
            let value = tags
                .get(name)
                .ok_or_else(|| HostError(format!("no tag {name}")))?;
            Ok(json!({"name": name, "value": value, "quality": "Good"}))
        }
        fn write_tag(&self, script: &str, name: &str, value: Value) -> Result<(), HostError> {
            self.log
                .lock()
                .expect("lock")
                .push((script.to_owned(), format!("wrote {name}")));
            self.tags.lock().expect("lock").insert(name.to_owned(), value);
            Ok(())
        }
        fn active_alarms(&self) -> Result<Value, HostError> {
            Ok(json!([{"tag": "Tank1.Level", "condition": "Hi"}]))
        }
        fn tag_history(&self, name: &str, minutes: u64) -> Result<Value, HostError> {
            Ok(json!({"tag": name, "minutes": minutes, "samples": []}))
        }
        fn log(&self, script: &str, message: &str) {
            self.log
                .lock()
                .expect("lock")
                .push((script.to_owned(), message.to_owned()));
        }
        fn ai_execute(&self, query: Value) -> Value {
            std::thread::sleep(self.model_wait);
            self.asked.lock().expect("lock").push(query);
            json!({"status": "ok", "reply": "Level is high."})
        }
        fn ai_execute_async(&self, _script: &str, query: Value, callback: &str) -> Result<(), HostError> {
            self.asked
                .lock()
                .expect("lock")
                .push(json!({"query": query, "callback": callback}));
            Ok(())
        }
    }

    fn engine_with(host: RecordingHost, limits: ScriptLimits) -> (Arc<RecordingHost>, ScriptEngine) {
        let host = Arc::new(host);
        let engine = ScriptEngine::new(Arc::clone(&host) as Arc<dyn ScriptHost>, limits);
        (host, engine)
    }

    fn run(engine: &ScriptEngine, source: &str) -> Result<(), RunError> {
        let ast = engine.compile(source).expect("compiles");
        engine
            .run("test", &ast, Entry::Main(&json!({"trigger": "startup"})))
            .result
    }

    #[test]
    fn a_syntax_error_names_its_line_and_column() {
        let error = compile_check("let x = 1;\nlet y = (2 + ;\n").expect_err("refused");
        assert_eq!(error.line, 2, "{error}");
        assert!(error.column > 0, "{error}");
        assert!(compile_check("eval(\"1\")").is_err(), "eval is not available");
    }

    #[test]
    fn scripts_read_and_write_tags_log_and_ask_the_model() {
        let host = RecordingHost::default();
        host.tags
            .lock()
            .expect("lock")
            .insert("Tank1.Level".into(), json!(91.5));
        let (host, engine) = engine_with(host, ScriptLimits::default());
        run(
            &engine,
            r#"
            let level = read_tag("Tank1.Level");
            if level.value > 90.0 && level.quality == "Good" {
                let reply = ai_execute(#{ system: "Be brief.", user: "Level " + level.value });
                write_tag("Tank1.Note", reply.reply);
            }
            print("done at " + now());
            ai_execute_async("later", "on_reply");
            "#,
        )
        .expect("runs");
        assert_eq!(
            host.tags.lock().expect("lock")["Tank1.Note"],
            json!("Level is high.")
        );
        let asked = host.asked.lock().expect("lock").clone();
        assert_eq!(asked[0], json!({"system": "Be brief.", "user": "Level 91.5"}));
        assert_eq!(asked[1], json!({"query": "later", "callback": "on_reply"}));
        let log = host.log.lock().expect("lock").clone();
        assert!(
            log.iter()
                .any(|(script, line)| script == "test" && line.starts_with("done at 20")),
            "{log:?}"
        );
    }

    #[test]
    fn a_failed_host_call_is_an_error_the_script_may_catch() {
        let (_, engine) = engine_with(RecordingHost::default(), ScriptLimits::default());
        let error = run(&engine, "let x = 1;\nread_tag(\"Nope\");").expect_err("fails");
        assert!(
            matches!(&error, RunError::Failed { line: 2, message } if message.contains("no tag Nope")),
            "{error}"
        );
        run(
            &engine,
            "try { read_tag(\"Nope\"); } catch (e) { log(\"caught \" + e); }",
        )
        .expect("caught");
        let thrown = run(&engine, "\n\nthrow \"bad\";").expect_err("thrown");
        assert!(matches!(thrown, RunError::Failed { line: 3, .. }), "{thrown}");
    }

    #[test]
    fn runaway_scripts_are_stopped_with_their_reason() {
        let (_, engine) = engine_with(RecordingHost::default(), ScriptLimits::default());
        assert_eq!(
            run(&engine, "loop { }"),
            Err(RunError::TooManyOperations(1_000_000))
        );
        assert_eq!(
            run(&engine, "fn f(n) { f(n + 1) } f(0);"),
            Err(RunError::TooDeep(32))
        );
        assert!(matches!(
            run(&engine, "let s = \"x\"; loop { s += s; }"),
            Err(RunError::TooLarge(_))
        ));
        // (Rhai measures an array at every change, so a long one is slow to grow: a small
        // limit keeps the test short.)
        let small = ScriptLimits {
            max_array_len: 1_000,
            ..ScriptLimits::default()
        };
        let (_, engine_small) = engine_with(RecordingHost::default(), small);
        let grown = run(&engine_small, "let a = []; loop { a.push(1); }");
        assert!(matches!(grown, Err(RunError::TooLarge(_))), "{grown:?}");

        let slow = ScriptLimits {
            max_operations: 0,
            wall_clock: Duration::from_millis(50),
            ..ScriptLimits::default()
        };
        let (_, engine) = engine_with(RecordingHost::default(), slow);
        assert_eq!(
            run(&engine, "loop { }"),
            Err(RunError::TimedOut(Duration::from_millis(50)))
        );
    }

    #[test]
    fn waiting_for_the_model_does_not_count_against_the_running_time() {
        let host = RecordingHost {
            model_wait: Duration::from_millis(120),
            ..RecordingHost::default()
        };
        let limits = ScriptLimits {
            wall_clock: Duration::from_millis(100),
            ..ScriptLimits::default()
        };
        let (_, engine) = engine_with(host, limits);
        run(
            &engine,
            "let r = ai_execute(\"hi\"); let x = 0; while x < 1000 { x += 1; }",
        )
        .expect("not stopped");
    }

    #[test]
    fn scripts_import_the_solutions_classes_and_nothing_else() {
        let (host, engine) = engine_with(RecordingHost::default(), ScriptLimits::default());
        let class = engine.compile("fn double(x) { x * 2 }").expect("compiles");
        engine.set_class("Util", &class).expect("loads");
        run(
            &engine,
            "import \"Util\" as util; write_tag(\"X\", util::double(21));",
        )
        .expect("runs");
        assert_eq!(host.tags.lock().expect("lock")["X"], json!(42));
        let error = run(&engine, "import \"/etc/passwd\" as p;").expect_err("no files");
        assert!(
            matches!(&error, RunError::Failed { message, .. } if message.contains("/etc/passwd")),
            "{error}"
        );
        engine.remove_class("Util");
        assert!(run(&engine, "import \"Util\" as util;").is_err());
    }

    #[test]
    fn classes_load_after_the_classes_they_import_whatever_their_order() {
        let (host, engine) = engine_with(RecordingHost::default(), ScriptLimits::default());
        let sources = [
            (
                "App",
                "import \"Mid\" as mid;\nfn triple_double(x) { mid::triple(x) * 2 }",
            ),
            (
                "Mid",
                "import \"Base\" as base;\nfn triple(x) { base::one() * x * 3 }",
            ),
            ("Base", "fn one() { 1 }"),
            ("Broken", "throw \"no\";"),
            ("Ping", "import \"Pong\" as pong;"),
            ("Pong", "import \"Ping\" as ping;"),
            ("Orphan", "import \"Missing\" as missing;"),
        ];
        let asts: Vec<_> = sources
            .iter()
            .map(|(name, source)| (*name, engine.compile(source).expect("compiles")))
            .collect();
        let mut failed = engine.set_classes(asts.iter().map(|(name, ast)| (*name, ast)));
        failed.sort_by(|a, b| a.0.cmp(&b.0));
        let names: Vec<&str> = failed.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["Broken", "Orphan", "Ping", "Pong"], "{failed:?}");
        assert!(
            matches!(&failed[1].1, RunError::Failed { message, .. } if message.contains("Missing")),
            "{failed:?}"
        );
        run(
            &engine,
            "import \"App\" as app; write_tag(\"X\", app::triple_double(7));",
        )
        .expect("runs");
        assert_eq!(host.tags.lock().expect("lock")["X"], json!(42));
    }

    #[test]
    fn a_trigger_may_name_a_function_which_gets_its_argument() {
        let (host, engine) = engine_with(RecordingHost::default(), ScriptLimits::default());
        let ast = engine
            .compile("write_tag(\"Top\", 1);\nfn on_alarm(alarm) { write_tag(\"Last\", alarm.tag); }")
            .expect("compiles");
        let alarm = json!({"tag": "Tank1.Level"});
        let outcome = engine.run("test", &ast, Entry::Function("on_alarm", &alarm));
        assert_eq!(outcome.result, Ok(()));
        assert_eq!(host.tags.lock().expect("lock")["Last"], json!("Tank1.Level"));
        assert!(
            !host.tags.lock().expect("lock").contains_key("Top"),
            "the function alone ran"
        );
        let missing = engine.run("test", &ast, Entry::Function("on_reply", &alarm));
        assert_eq!(missing.result, Err(RunError::NoFunction("on_reply".into())));
    }
}
