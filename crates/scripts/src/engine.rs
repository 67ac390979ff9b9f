//! The sandboxed engine: one Rhai [`Engine`] with the host's API registered, no `eval`, no
//! closures or currying, no file modules (only the solution's classes import), print and debug
//! into the host's log, and limits on every run, the wall-clock one and a stop checked as the
//! script runs, the model's calls counted per run and per script.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use rhai::{AST, Dynamic, Engine, EvalAltResult, Module, ModuleResolver, Position, Scope, Shared};
use serde_json::Value;

use crate::host::{HostError, ScriptHost};

/// Operations between two looks at the clock and the stop (a look costs a clock read).
const CLOCK_EVERY: u64 = 1024;

/// The window of [`ScriptLimits::model_calls_per_minute`].
const MODEL_WINDOW: Duration = Duration::from_secs(60);

/// Why a run was terminated, as the value Rhai carries in `ErrorTerminated` (never catchable).
const PAST_WALL_CLOCK: &str = "wall-clock limit";
const STOPPING: &str = "stopping";
const MODEL_CALLS_PER_RUN: &str = "model calls per run";
const MODEL_CALLS_PER_MINUTE: &str = "model calls per minute";

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
    /// Nesting of a value handed to the host (a tag's value, a query): arrays and maps within
    /// each other.
    pub max_value_depth: usize,
    /// Wall-clock time, not counting time spent waiting for the model (`ai_execute`).
    pub wall_clock: Duration,
    /// Model calls (`ai_execute` and `ai_execute_async`) one run may make.
    pub max_model_calls: u32,
    /// Model calls one script may make in a minute, over all its runs.
    pub model_calls_per_minute: u32,
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
            max_value_depth: 32,
            wall_clock: Duration::from_secs(5),
            max_model_calls: 10,
            model_calls_per_minute: 60,
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
    /// Past [`ScriptLimits::max_model_calls`] in this run.
    #[error("stopped: more than {0} model calls in one run")]
    TooManyModelCalls(u32),
    /// Past [`ScriptLimits::model_calls_per_minute`] for this script.
    #[error("stopped: the script asked the model more than {0} times in a minute")]
    ModelCallsTooFast(u32),
    /// The server is stopping (or this node no longer runs the scripts).
    #[error("stopped: the server is stopping")]
    Stopped,
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
    model_calls: u32,
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
                model_calls: 0,
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

/// Counts a model call of the running script against its run's allowance; the name of the
/// allowance it is past, if it is.
fn count_model_call(max_per_run: u32) -> Result<(), &'static str> {
    RUN.with(|run| {
        let mut run = run.borrow_mut();
        let Some(state) = run.as_mut() else {
            return Ok(());
        };
        state.model_calls = state.model_calls.saturating_add(1);
        if state.model_calls > max_per_run {
            Err(MODEL_CALLS_PER_RUN)
        } else {
            Ok(())
        }
    })
}

/// Ends the run: `why` is one of the terminations [`ScriptEngine::run_error`] tells apart.
fn terminate(why: &'static str) -> Box<EvalAltResult> {
    EvalAltResult::ErrorTerminated(Dynamic::from(why), Position::NONE).into()
}

/// What a model call must pass: the run's and the script's allowances, and no stop.
#[derive(Debug)]
struct ModelCallGate {
    per_run: u32,
    per_minute: u32,
    windows: ModelWindows,
    stop: Stop,
}

impl ModelCallGate {
    /// Counts a call of the running script, or ends the run.
    fn admit(&self) -> Result<(), Box<EvalAltResult>> {
        self.still_running()?;
        count_model_call(self.per_run).map_err(terminate)?;
        if !self.windows.admit(&current_script(), self.per_minute) {
            return Err(terminate(MODEL_CALLS_PER_MINUTE));
        }
        Ok(())
    }

    /// Ends the run when the engine is stopping (a model call the stop cut short answers, and
    /// the script must not go on with it).
    fn still_running(&self) -> Result<(), Box<EvalAltResult>> {
        if self.stop.is_set() {
            return Err(terminate(STOPPING));
        }
        Ok(())
    }
}

/// Whether runs must end: [`ScriptEngine::stop`] was called, or the host says it is stopping
/// (seen by the run the moment the host sees it, with no task in between to pass it on).
#[derive(Clone, Default)]
struct Stop {
    flag: Arc<AtomicBool>,
    host: Option<Arc<dyn ScriptHost>>,
}

impl Stop {
    fn is_set(&self) -> bool {
        self.flag.load(Ordering::Relaxed) || self.host.as_ref().is_some_and(|host| host.stopping())
    }
}

impl std::fmt::Debug for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stop")
            .field("set", &self.is_set())
            .finish_non_exhaustive()
    }
}

/// Each script's model calls in its current one-minute window.
#[derive(Debug, Default)]
struct ModelWindows(Mutex<HashMap<String, (Instant, u32)>>);

impl ModelWindows {
    /// Counts one call of `script`; false past `per_minute` in its window.
    fn admit(&self, script: &str, per_minute: u32) -> bool {
        let now = Instant::now();
        let mut windows = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(window) = windows.get_mut(script) {
            if now.duration_since(window.0) >= MODEL_WINDOW {
                *window = (now, 0);
            }
            window.1 = window.1.saturating_add(1);
            return window.1 <= per_minute;
        }
        windows.insert(script.to_owned(), (now, 1));
        per_minute >= 1
    }
}

/// Whether `value` nests arrays and maps at most `levels` deep (an array of numbers is one
/// level). Recurses at most `levels + 1` frames, however deep the value goes.
fn nests_within(value: &Dynamic, levels: usize) -> bool {
    if let Ok(array) = value.as_array_ref() {
        levels > 0 && array.iter().all(|item| nests_within(item, levels - 1))
    } else if let Ok(map) = value.as_map_ref() {
        levels > 0 && map.values().all(|item| nests_within(item, levels - 1))
    } else {
        true
    }
}

/// A Rhai engine with the sandbox's settings and limits, and no host API.
fn sandboxed(limits: &ScriptLimits, stop: Stop) -> Engine {
    let mut engine = Engine::new();
    engine.disable_symbol("eval");
    // A curried function holds copies of its arguments, which no size limit counts: currying
    // a function with itself doubles it each time.
    engine.disable_symbol("curry");
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
    engine.on_progress(move |operations| {
        if operations % CLOCK_EVERY != 0 {
            return None;
        }
        if stop.is_set() {
            return Some(Dynamic::from(STOPPING));
        }
        let late = RUN.with(|run| {
            run.borrow()
                .as_ref()
                .is_some_and(|state| Instant::now() > state.deadline)
        });
        late.then(|| Dynamic::from(PAST_WALL_CLOCK))
    });
    engine
}

/// Compiles `source` with the sandbox's syntax (no `eval`): for checking a script before it
/// is stored.
pub fn compile_check(source: &str) -> Result<(), CompileError> {
    compile_with(&sandboxed(&ScriptLimits::default(), Stop::default()), source).map(drop)
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

/// A script's value as the host takes it, refused when it nests deeper than `max_depth` (the
/// host's JSON is read and dropped on threads with ordinary stacks).
fn from_script(value: &Dynamic, max_depth: usize) -> Result<Value, Box<EvalAltResult>> {
    if !nests_within(value, max_depth) {
        return Err(EvalAltResult::ErrorDataTooLarge(
            format!("a value handed to the host nested deeper than {max_depth} levels"),
            Position::NONE,
        )
        .into());
    }
    rhai::serde::from_dynamic(value)
}

/// The engine scripts run in, with the host's API.
pub struct ScriptEngine {
    engine: Engine,
    classes: Classes,
    limits: ScriptLimits,
    /// Once set: every run under way ends at its next look, and no new one starts.
    stop: Stop,
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
        let stop = Stop {
            flag: Arc::default(),
            host: Some(Arc::clone(&host)),
        };
        let mut engine = sandboxed(&limits, stop.clone());
        let depth = limits.max_value_depth;
        let model_calls = Arc::new(ModelCallGate {
            per_run: limits.max_model_calls,
            per_minute: limits.model_calls_per_minute,
            windows: ModelWindows::default(),
            stop: stop.clone(),
        });
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
        let written = Arc::clone(&model_calls);
        engine.register_fn(
            "write_tag",
            move |name: &str, value: Dynamic| -> Result<(), Box<EvalAltResult>> {
                let value = from_script(&value, depth)?;
                written.still_running()?;
                let asked = Instant::now();
                let outcome = api.write_tag(&current_script(), name, value);
                // Waiting for the field's acknowledgement is the write's, not the script's.
                extend_deadline(asked.elapsed());
                outcome.map_err(thrown)
            },
        );
        let api = Arc::clone(&host);
        engine.register_fn(
            "propose_write",
            move |name: &str, value: Dynamic, reason: &str| -> Result<String, Box<EvalAltResult>> {
                let value = from_script(&value, depth)?;
                api.propose_write(&current_script(), name, value, reason)
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
        let gate = Arc::clone(&model_calls);
        engine.register_fn(
            "ai_execute",
            move |query: Dynamic| -> Result<Dynamic, Box<EvalAltResult>> {
                let query = from_script(&query, depth)?;
                gate.admit()?;
                let asked = Instant::now();
                let envelope = api.ai_execute(query);
                // Waiting for the model is the AI budget's, not the script's running time.
                extend_deadline(asked.elapsed());
                gate.still_running()?;
                to_script(&envelope)
            },
        );
        let api = host;
        let gate = model_calls;
        engine.register_fn(
            "ai_execute_async",
            move |query: Dynamic, callback: &str| -> Result<(), Box<EvalAltResult>> {
                let query = from_script(&query, depth)?;
                gate.admit()?;
                api.ai_execute_async(&current_script(), query, callback)
                    .map_err(thrown)
            },
        );
        Self {
            engine,
            classes,
            limits,
            stop,
        }
    }

    /// Ends every run under way at its next look (within [`CLOCK_EVERY`] operations, or when
    /// the host call it waits on returns) and every run started after, as
    /// [`RunError::Stopped`]. For a server's shutdown; there is no undoing it.
    pub fn stop(&self) {
        self.stop.flag.store(true, Ordering::Relaxed);
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
        if self.stop.is_set() {
            return RunOutcome {
                duration: Duration::ZERO,
                result: Err(RunError::Stopped),
            };
        }
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
            EvalAltResult::ErrorTerminated(why, _) => match why.into_immutable_string().as_deref() {
                Ok(STOPPING) => RunError::Stopped,
                Ok(MODEL_CALLS_PER_RUN) => RunError::TooManyModelCalls(self.limits.max_model_calls),
                Ok(MODEL_CALLS_PER_MINUTE) => RunError::ModelCallsTooFast(self.limits.model_calls_per_minute),
                _ => RunError::TimedOut(self.limits.wall_clock),
            },
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
        fn propose_write(
            &self,
            script: &str,
            name: &str,
            value: Value,
            reason: &str,
        ) -> Result<String, HostError> {
            self.log
                .lock()
                .expect("lock")
                .push((script.to_owned(), format!("proposed {name} = {value}: {reason}")));
            Ok("p-000000000001".to_owned())
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
