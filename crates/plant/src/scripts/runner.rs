//! The script runner of a serving tserver: loads the solution's scripts, fires their triggers
//! (`startup`, `every:`, `tag:`, `alarm:`), runs each run on a run thread (its stack sized for
//! the deepest value a script may build), answers `ai_execute_async` calls, takes up changed
//! scripts within a second, records every run, and at shutdown stops every run under way.
//!
//! A script runs at most once at a time. A trigger that fires while its script runs waits as
//! the one pending run; a later one replaces it and the replaced one is counted as skipped, so
//! triggers faster than the script never pile up.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use solution_scripts::{Ast, Entry, RunError, RunThreads, ScriptEngine, ScriptLimits, Trigger};
use tokio::sync::{Semaphore, mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::host::{AsyncAiCall, RuntimeScriptHost, envelope_value};
use super::targets::unreachable_target;
use crate::log_text::{LogBudget, MessageText};
use crate::objects::ObjectModel;
use crate::plant::PlantReader;
use crate::runtime::Runtime;
use store::{ScriptRun, ScriptTally, SolutionError, StoredScript};

/// How often the solution is looked at for changed scripts.
const RELOAD_EVERY: Duration = Duration::from_secs(1);

/// How often run records are written to the solution.
const RECORD_EVERY: Duration = Duration::from_secs(2);

/// How long a run thread waits for the next run before it ends: a script fired every few
/// seconds keeps its thread, and a burst's threads are gone soon after it.
const RUN_THREAD_KEEP: Duration = Duration::from_secs(10);

/// `ai_execute_async` calls waiting to be asked, and asked at once.
const ASYNC_CALLS_WAITING: usize = 64;
const ASYNC_CALLS_AT_ONCE: usize = 16;

/// What a run starts from.
#[derive(Debug, Clone)]
enum Job {
    /// The top level, with its event.
    Main(Value),
    /// A function (an `ai_execute_async` callback) with its argument.
    Function(String, Value),
}

/// One script's runs: whether one is under way and the one waiting.
#[derive(Debug, Default)]
struct Slot {
    running: bool,
    pending: Option<Job>,
}

/// A loaded script.
struct Loaded {
    stored: StoredScript,
    ast: Arc<Ast>,
    slot: Arc<Mutex<Slot>>,
}

/// Runs and skipped triggers not yet written to the solution, by script.
type Unrecorded = HashMap<String, ScriptTally>;

/// What the runner's tasks share.
struct Shared {
    engine: ScriptEngine,
    /// The loaded scripts, by lower-case name.
    scripts: Mutex<HashMap<String, Arc<Loaded>>>,
    unrecorded: Mutex<Unrecorded>,
    /// Each script's allowance of "run stopped" warnings (a script failing every 100 ms must
    /// not fill the log; `status` has every failure).
    warnings: Mutex<HashMap<String, LogBudget>>,
    /// All scripts' allowance of those warnings together (many scripts failing at once must
    /// not fill it either).
    all_warnings: Mutex<LogBudget>,
    /// `ai_execute_async` calls made and not yet handed to their callbacks (the host counts
    /// one up as it is made, the answering task down once its callback is fired).
    outstanding: Arc<AtomicUsize>,
    /// The runs, each holding a token until it ends.
    runs: TaskTracker,
    /// The threads they run on.
    threads: RunThreads,
}

impl Shared {
    /// The runner's shared state with its host on `runtime`, its runs counted in
    /// `runs`, and where the host's `ai_execute_async` calls arrive. At `stop`, every run under
    /// way ends and no other starts.
    fn new(
        runtime: &Runtime,
        runs: &TaskTracker,
        stop: &CancellationToken,
    ) -> (Arc<Self>, mpsc::Receiver<AsyncAiCall>) {
        let (async_calls, asked) = mpsc::channel(ASYNC_CALLS_WAITING);
        let outstanding = Arc::new(AtomicUsize::new(0));
        let host = RuntimeScriptHost::new(
            runtime.clone(),
            tokio::runtime::Handle::current(),
            async_calls,
            Arc::clone(&outstanding),
            stop.clone(),
        );
        let shared = Arc::new(Self {
            engine: ScriptEngine::new(Arc::new(host), ScriptLimits::default()),
            scripts: Mutex::default(),
            unrecorded: Mutex::default(),
            warnings: Mutex::default(),
            all_warnings: Mutex::new(LogBudget::new("the scripts' failed runs")),
            outstanding,
            runs: runs.clone(),
            threads: RunThreads::new("script-run", RUN_THREAD_KEEP),
        });
        (shared, asked)
    }

    /// Whether `name` has no run under way or waiting, and no callback to come.
    fn idle(&self, name: &str) -> bool {
        let quiet = self.loaded(name).is_none_or(|loaded| {
            let slot = loaded.slot.lock().unwrap_or_else(PoisonError::into_inner);
            !slot.running && slot.pending.is_none()
        });
        // Read after the slot: a callback is fired (its slot busy) before it is counted down.
        quiet && self.outstanding.load(Ordering::Acquire) == 0
    }

    fn may_warn(&self, name: &str) -> bool {
        self.warnings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(name.to_owned())
            .or_insert_with(|| LogBudget::new("a script's failed runs"))
            .allow()
            && self
                .all_warnings
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .allow()
    }

    fn loaded(&self, name: &str) -> Option<Arc<Loaded>> {
        self.scripts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&name.to_lowercase())
            .cloned()
    }

    fn skipped(&self, name: &str) {
        let mut unrecorded = self.unrecorded.lock().unwrap_or_else(PoisonError::into_inner);
        unrecorded.entry(name.to_owned()).or_default().skipped += 1;
    }

    fn ran(&self, name: &str, run: ScriptRun) {
        let mut unrecorded = self.unrecorded.lock().unwrap_or_else(PoisonError::into_inner);
        let tally = unrecorded.entry(name.to_owned()).or_default();
        tally.runs += 1;
        tally.failures += u64::from(run.outcome != "ok");
        tally.last = Some(run);
    }
}

/// Fires `job` for the script `name`: runs it now on a run thread, or leaves it as the
/// pending run (replacing, and counting as skipped, the one there).
fn fire(shared: &Arc<Shared>, name: &str, job: Job) {
    if let Some((loaded, job)) = claim(shared, name, job) {
        start_runs(shared, loaded, job, |_| {});
    }
}

/// Runs `job` of the claimed `loaded`, then its pending runs, on a run thread;
/// `first` gets the first run. Without a thread, the run is recorded as failed and the script
/// freed for its next trigger.
fn start_runs(
    shared: &Arc<Shared>,
    loaded: Arc<Loaded>,
    job: Job,
    first: impl FnOnce(ScriptRun) + Send + 'static,
) {
    let token = shared.runs.token();
    let on_thread = Arc::clone(shared);
    let claimed = Arc::clone(&loaded);
    let started = shared.threads.spawn(move || {
        let _counted = token;
        first(run_until_idle(&on_thread, claimed, job));
    });
    if let Err(error) = started {
        let mut slot = loaded.slot.lock().unwrap_or_else(PoisonError::into_inner);
        slot.running = false;
        slot.pending = None;
        drop(slot);
        let name = &loaded.stored.name;
        if shared.may_warn(name) {
            tracing::warn!(script = %name, %error, "no thread for a script run");
        }
        shared.ran(
            name,
            ScriptRun {
                started_at: SystemTime::now(),
                duration: Duration::ZERO,
                outcome: "failed".to_owned(),
                error: Some(format!("no thread for the run: {error}")),
            },
        );
    }
}

/// Runs `work` on a run thread (never an async worker: a class's top level is a script's run
/// like any other) and waits for it; `None` when no thread could be had.
async fn on_run_thread<T: Send + 'static>(
    threads: &RunThreads,
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (done, result) = oneshot::channel();
    let started = threads.spawn(move || {
        // The waiter may be gone (shutdown): nobody wants the result then.
        let _ = done.send(work());
    });
    if let Err(error) = started {
        tracing::warn!(%error, "no thread to load the scripts on");
        return None;
    }
    result.await.ok()
}

/// Marks `name` running and hands back the script with `job` to run now; or, when a run is
/// under way, leaves `job` as the pending run (replacing, and counting as skipped, the one
/// there).
fn claim(shared: &Shared, name: &str, job: Job) -> Option<(Arc<Loaded>, Job)> {
    let loaded = shared.loaded(name)?;
    let mut slot = loaded.slot.lock().unwrap_or_else(PoisonError::into_inner);
    if slot.running {
        if slot.pending.replace(job).is_some() {
            shared.skipped(&loaded.stored.name);
        }
        return None;
    }
    slot.running = true;
    drop(slot);
    Some((loaded, job))
}

/// Runs `job`, then the pending runs as they come (each with the script as loaded then, so a
/// change reaches the next run), then marks the script idle. Returns the first run.
fn run_until_idle(shared: &Shared, mut loaded: Arc<Loaded>, job: Job) -> ScriptRun {
    let first = run_job(shared, &loaded, &job);
    shared.ran(&loaded.stored.name, first.clone());
    loop {
        let mut slot = loaded.slot.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(next) = slot.pending.take() else {
            slot.running = false;
            return first;
        };
        drop(slot);
        if let Some(current) = shared.loaded(&loaded.stored.name) {
            loaded = current;
        }
        let run = run_job(shared, &loaded, &next);
        shared.ran(&loaded.stored.name, run);
    }
}

/// Runs `job` of `loaded` on this thread and says how it went (the caller records it).
fn run_job(shared: &Shared, loaded: &Loaded, job: &Job) -> ScriptRun {
    let name = &loaded.stored.name;
    let started_at = SystemTime::now();
    tracing::debug!(script = %name, "script run starts");
    let outcome = match job {
        Job::Main(event) => shared.engine.run(name, &loaded.ast, Entry::Main(event)),
        Job::Function(function, argument) => {
            shared
                .engine
                .run(name, &loaded.ast, Entry::Function(function, argument))
        }
    };
    match &outcome.result {
        // A run cut short because the server stops is the stop, not a fault of the script.
        Err(RunError::Stopped) => {
            tracing::info!(script = %name, "script run stopped with the server");
        }
        Err(error) if shared.may_warn(name) => {
            // The message may carry what the script threw, of any size: cut.
            tracing::warn!(script = %name, error = %MessageText(&error.to_string()), "script run stopped");
        }
        _ => {}
    }
    let label = outcome_label(outcome.result.as_ref().err());
    metrics::counter!(crate::telemetry::SCRIPT_RUNS, "outcome" => label).increment(1);
    ScriptRun {
        started_at,
        duration: outcome.duration,
        outcome: label.to_owned(),
        error: outcome.result.err().map(|error| error.to_string()),
    }
}

/// The recorded name of how a run ended.
fn outcome_label(error: Option<&RunError>) -> &'static str {
    match error {
        None => "ok",
        Some(RunError::TooManyOperations(_)) => "operations",
        Some(RunError::TimedOut(_)) => "timeout",
        Some(RunError::TooDeep(_)) => "depth",
        Some(RunError::TooLarge(_)) => "size",
        Some(RunError::NoFunction(_)) => "no-function",
        Some(RunError::TooManyModelCalls(_) | RunError::ModelCallsTooFast(_)) => "model-calls",
        Some(RunError::Stopped) => "stopped",
        Some(RunError::Failed { .. }) => "failed",
    }
}

/// The runs of a server's scripts, to wait for at shutdown.
#[derive(Debug, Clone)]
pub struct ScriptRuns(TaskTracker);

impl ScriptRuns {
    /// Waits, at most `within`, until every run has ended (the shutdown stops them: a run ends
    /// at its next look at the stop, or when the host call it waits on returns); whether they
    /// all did.
    #[crate::compiled_once]
    pub async fn ended(&self, within: Duration) -> bool {
        self.0.close();
        tokio::time::timeout(within, self.0.wait()).await.is_ok()
    }
}

/// Scripts start from the runtime, but their runner is here: the runtime itself knows nothing
/// of scripts.
impl Runtime {
    /// Starts the solution's scripts (their triggers, runs on run threads, run records),
    /// taking up changed scripts within a second, until `shutdown`, which stops every run
    /// under way; when it returns, the scripts are loaded and their triggers armed. Call once,
    /// when serving starts; wait for the runs to end with [`ScriptRuns::ended`].
    #[crate::compiled_once]
    pub async fn start_scripts(&self, shutdown: &CancellationToken) -> ScriptRuns {
        start(self, shutdown).await
    }
}

/// Starts the runner, its scripts loaded and their triggers armed when this returns; it stops
/// at `shutdown`, which also stops every run under way.
async fn start(runtime: &Runtime, shutdown: &CancellationToken) -> ScriptRuns {
    let runs = TaskTracker::new();
    let Some(mut leading) = runtime.leadership() else {
        start_here(runtime, &runs, shutdown).await;
        return ScriptRuns(runs);
    };
    // Several nodes on one database: the scripts run on the leading node only, from when it
    // leads (its `startup` scripts then) until it no longer does.
    let runtime = runtime.clone();
    let shutdown = shutdown.clone();
    let tracked = runs.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                led = leading.wait_for(|leads| *leads) => if led.is_err() { return },
            }
            tracing::info!("this node leads: it runs the solution's scripts");
            let term = shutdown.child_token();
            start_here(&runtime, &tracked, &term).await;
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = leading.wait_for(|leads| !*leads) => {}
            }
            tracing::warn!("this node no longer leads: its scripts stop");
            term.cancel();
        }
    });
    ScriptRuns(runs)
}

/// Runs the solution's scripts in this process until `shutdown`; returns once they are
/// loaded and their triggers armed.
async fn start_here(runtime: &Runtime, runs: &TaskTracker, shutdown: &CancellationToken) {
    let (shared, asked) = Shared::new(runtime, runs, shutdown);
    let mut loader = Loader {
        runtime: runtime.clone(),
        shared: Arc::clone(&shared),
        loaded: None,
        generation: shutdown.child_token(),
    };
    loader.reload(shutdown).await;
    tokio::spawn(loader.run(shutdown.clone()));
    tokio::spawn(answer_async_calls(
        runtime.clone(),
        Arc::clone(&shared),
        asked,
        shutdown.clone(),
    ));
    tokio::spawn(record_runs(runtime.clone(), shared, shutdown.clone()));
}

/// How often a run outside a server is looked at for its end.
const RUN_ONCE_POLL: Duration = Duration::from_millis(5);

/// Runs the script `name` once in this process, outside any server: the solution's classes
/// loaded, its top level run with `event.trigger == "run"`, then the callbacks of the
/// `ai_execute_async` calls it made as their answers come. Its runs are recorded in the
/// solution as a server's are; returns the first run and the tally of all.
#[crate::compiled_once]
pub async fn run_once(runtime: &Runtime, name: &str) -> Result<(ScriptRun, ScriptTally), SolutionError> {
    let stored = runtime.store().scripts().await?;
    let script = stored
        .iter()
        .find(|script| script.name.eq_ignore_ascii_case(name))
        .cloned()
        .ok_or_else(|| SolutionError::Script(format!("no script named {name:?}")))?;
    if script.trigger == Trigger::Class {
        return Err(SolutionError::Script(format!(
            "{} is a class: it runs when a script imports it, not by itself",
            script.name
        )));
    }
    let answering = CancellationToken::new();
    let (shared, asked) = Shared::new(runtime, &TaskTracker::new(), &answering);
    let mut loaded: Vec<StoredScript> = stored
        .into_iter()
        .filter(|stored| stored.trigger == Trigger::Class)
        .collect();
    loaded.push(script.clone());
    if !load_on_run_thread(&shared, loaded, Vec::new()).await {
        return Err(SolutionError::Script(format!(
            "{} did not load: no thread for the scripts",
            script.name
        )));
    }
    tokio::spawn(answer_async_calls(
        runtime.clone(),
        Arc::clone(&shared),
        asked,
        answering.clone(),
    ));
    let (loaded, job) = claim(&shared, &script.name, Job::Main(json!({"trigger": "run"})))
        .ok_or_else(|| SolutionError::Script(format!("{} did not load", script.name)))?;
    let (done, first) = oneshot::channel();
    start_runs(&shared, loaded, job, move |run| {
        // Nobody waits only when this call was dropped: the run is recorded all the same.
        let _ = done.send(run);
    });
    let first = match first.await {
        Ok(first) => first,
        // No thread for the run: it was recorded as failed with why.
        Err(_) => shared
            .unrecorded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&script.name)
            .and_then(|tally| tally.last.clone())
            .ok_or_else(|| SolutionError::Script(format!("the run of {} stopped", script.name)))?,
    };
    // Each callback is bounded by the model's timeout and the limits.
    while !shared.idle(&script.name) {
        tokio::time::sleep(RUN_ONCE_POLL).await;
    }
    answering.cancel();
    let tally = shared
        .unrecorded
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&script.name)
        .unwrap_or_default();
    let rows = vec![(script.name.clone(), tally.clone())];
    runtime.store().record_script_runs(rows).await?;
    Ok((first, tally))
}

/// Loads the scripts, and again whenever they change; each load arms their triggers anew.
struct Loader {
    runtime: Runtime,
    shared: Arc<Shared>,
    loaded: Option<Vec<StoredScript>>,
    /// Ends the triggers of the current load.
    generation: CancellationToken,
}

impl Loader {
    async fn run(mut self, shutdown: CancellationToken) {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + RELOAD_EVERY, RELOAD_EVERY);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = ticks.tick() => self.reload(&shutdown).await,
            }
        }
    }

    /// Reads the scripts; installs them when they differ from those loaded; then runs those
    /// `tserver scripts run` asked for.
    async fn reload(&mut self, shutdown: &CancellationToken) {
        let store = self.runtime.store();
        let read = async {
            Ok::<_, SolutionError>((store.scripts().await?, store.take_script_run_requests().await?))
        };
        let (stored, requested) = match read.await {
            Ok(read) => read,
            Err(error) => {
                tracing::warn!(%error, "cannot read the solution's scripts");
                return;
            }
        };
        if self.loaded.as_ref() != Some(&stored) {
            self.generation.cancel();
            self.generation = shutdown.child_token();
            let earlier = self.loaded.take().unwrap_or_default();
            if !load_on_run_thread(&self.shared, stored.clone(), earlier.clone()).await {
                // Nothing loaded: nothing armed, and the next look tries again.
                return;
            }
            arm(&self.runtime, &self.shared, &stored, &earlier, &self.generation);
            self.loaded = Some(stored);
        }
        for name in requested {
            fire(&self.shared, &name, Job::Main(json!({"trigger": "run"})));
        }
    }
}

/// [`load`] on a run thread (a class's top level runs as it loads); whether it ran.
async fn load_on_run_thread(
    shared: &Arc<Shared>,
    stored: Vec<StoredScript>,
    earlier: Vec<StoredScript>,
) -> bool {
    let on_thread = Arc::clone(shared);
    on_run_thread(&shared.threads, move || load(&on_thread, &stored, &earlier))
        .await
        .is_some()
}

/// Compiles `stored` and makes them the loaded scripts and classes, in place of `earlier`.
fn load(shared: &Shared, stored: &[StoredScript], earlier: &[StoredScript]) {
    let is_class = |script: &StoredScript| script.trigger == Trigger::Class;
    // A class gone is gone before the others load: none of them may still import it.
    for gone in earlier
        .iter()
        .filter(|old| is_class(old) && !stored.iter().any(|new| new.name == old.name && is_class(new)))
    {
        shared.engine.remove_class(&gone.name);
    }
    let mut scripts = HashMap::new();
    let mut classes = Vec::new();
    for script in stored {
        let ast = match shared.engine.compile(&script.source) {
            Ok(ast) => Arc::new(ast),
            Err(error) => {
                tracing::warn!(script = %script.name, error = %MessageText(&error.to_string()), "script does not compile; not loaded");
                continue;
            }
        };
        if is_class(script) {
            classes.push((script.name.as_str(), ast));
            continue;
        }
        // A script keeps its slot across loads, so a run under way still guards the next.
        let slot = shared
            .loaded(&script.name)
            .map_or_else(Arc::default, |previous| Arc::clone(&previous.slot));
        scripts.insert(
            script.name.to_lowercase(),
            Arc::new(Loaded {
                stored: script.clone(),
                ast,
                slot,
            }),
        );
    }
    let failed = shared
        .engine
        .set_classes(classes.iter().map(|(name, ast)| (*name, ast.as_ref())));
    for (name, error) in failed {
        tracing::warn!(script = %name, error = %MessageText(&error.to_string()), "class did not load");
    }
    *shared.scripts.lock().unwrap_or_else(PoisonError::into_inner) = scripts;
}

/// Starts the triggers of the enabled scripts of `stored` until `generation` ends; runs the
/// `startup` scripts not in `earlier` as they are.
fn arm(
    runtime: &Runtime,
    shared: &Arc<Shared>,
    stored: &[StoredScript],
    earlier: &[StoredScript],
    generation: &CancellationToken,
) {
    let mut watched = Vec::new();
    for script in stored.iter().filter(|script| script.enabled) {
        match &script.trigger {
            Trigger::Startup => {
                if !earlier.contains(script) {
                    fire(shared, &script.name, Job::Main(json!({"trigger": "startup"})));
                }
            }
            Trigger::Every(period) => {
                tokio::spawn(every(
                    Arc::clone(shared),
                    script.name.clone(),
                    *period,
                    generation.clone(),
                ));
            }
            Trigger::Tag(_) | Trigger::Alarm(_) => watched.push(script.clone()),
            Trigger::Class => {}
        }
    }
    if !watched.is_empty() {
        let plant = runtime.plant().reader();
        warn_unreachable(&watched, &plant.objects());
        // Subscribed before the first look, so no change between the two is missed.
        let changes = plant.changes();
        let mut watch = PlantWatch::new(watched);
        watch.look(&plant.objects(), shared, false);
        tokio::spawn(watch_plant(
            plant,
            Arc::clone(shared),
            watch,
            changes,
            generation.clone(),
        ));
    }
}

/// Says in the log which of `watched` can never fire on the plant loaded (an import removed
/// what it names; `scripts status` says so too).
fn warn_unreachable(watched: &[StoredScript], objects: &ObjectModel) {
    for script in watched {
        let tags = || objects.tags().map(|tag| tag.definition().name.as_str());
        let alarms = || {
            objects.alarms().iter().map(|alarm| {
                let definition = alarm.definition();
                (definition.name.as_str(), definition.tag.as_str())
            })
        };
        if let Some(why) = unreachable_target(&script.trigger, tags, alarms) {
            tracing::warn!(script = %script.name, "{why}");
        }
    }
}

/// Fires `name` every `period` until the load ends.
async fn every(shared: Arc<Shared>, name: String, period: Duration, generation: CancellationToken) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            () = generation.cancelled() => return,
            _ = ticks.tick() => fire(&shared, &name, Job::Main(json!({"trigger": "every"}))),
        }
    }
}

/// What one `tag:` or `alarm:` script saw at the last look.
#[derive(Debug, Default)]
struct Seen {
    /// Its tag's version.
    version: Option<u64>,
    /// When each of its alarms last became active, by alarm name.
    activations: HashMap<String, Option<SystemTime>>,
}

/// The `tag:` and `alarm:` scripts of one load, each with what it saw last. A look runs at
/// every plant change, so it allocates only for an alarm it has not seen before.
struct PlantWatch {
    scripts: Vec<(StoredScript, Seen)>,
}

impl PlantWatch {
    fn new(scripts: Vec<StoredScript>) -> Self {
        Self {
            scripts: scripts
                .into_iter()
                .map(|script| (script, Seen::default()))
                .collect(),
        }
    }

    /// Looks at the plant: with `fire_changes`, fires the scripts whose tag changed or whose
    /// alarm tripped since the last look (even if it cleared again since); without, only notes
    /// how things are (the first look: what was so before the load is not news).
    fn look(&mut self, objects: &ObjectModel, shared: &Arc<Shared>, fire_changes: bool) {
        for (script, seen) in &mut self.scripts {
            match &script.trigger {
                Trigger::Tag(name) => {
                    let Some(tag) = objects.tag(name) else { continue };
                    let version = tag.version();
                    if seen.version.replace(version) != Some(version) && fire_changes {
                        let sample = tag.current();
                        let event = json!({"trigger": "tag", "tag": tag.definition().name,
                            "value": sample.value.to_json(), "quality": sample.quality.label()});
                        fire(shared, &script.name, Job::Main(event));
                    }
                }
                Trigger::Alarm(wanted) => {
                    for alarm in objects.alarms() {
                        let definition = alarm.definition();
                        let matches = wanted.as_ref().is_none_or(|wanted| {
                            wanted.eq_ignore_ascii_case(&definition.name)
                                || wanted.eq_ignore_ascii_case(&definition.tag)
                        });
                        if !matches {
                            continue;
                        }
                        let status = alarm.status();
                        let since = status.active_since;
                        let before = match seen.activations.get_mut(definition.name.as_str()) {
                            Some(last) => Some(std::mem::replace(last, since)),
                            None => seen.activations.insert(definition.name.clone(), since),
                        };
                        if fire_changes && since.is_some() && before != Some(since) {
                            let event = json!({"trigger": "alarm", "alarm": definition.name, "tag": definition.tag,
                                "condition": definition.condition.name(), "priority": definition.priority,
                                "message": definition.message, "value": status.trip_value});
                            fire(shared, &script.name, Job::Main(event));
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// Looks at the plant whenever it changes, until the load ends.
async fn watch_plant(
    plant: PlantReader,
    shared: Arc<Shared>,
    mut watch: PlantWatch,
    mut changes: watch::Receiver<u64>,
    generation: CancellationToken,
) {
    loop {
        tokio::select! {
            () = generation.cancelled() => return,
            changed = changes.changed() => if changed.is_err() { return },
        }
        changes.borrow_and_update();
        watch.look(&plant.objects(), &shared, true);
    }
}

/// Asks the model for each `ai_execute_async` call and runs its callback with the envelope.
async fn answer_async_calls(
    runtime: Runtime,
    shared: Arc<Shared>,
    mut asked: mpsc::Receiver<AsyncAiCall>,
    shutdown: CancellationToken,
) {
    let at_once = Arc::new(Semaphore::new(ASYNC_CALLS_AT_ONCE));
    loop {
        let call = tokio::select! {
            () = shutdown.cancelled() => return,
            call = asked.recv() => match call { Some(call) => call, None => return },
        };
        let Ok(permit) = Arc::clone(&at_once).acquire_owned().await else {
            return;
        };
        let toolkit = runtime.toolkit();
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let envelope = envelope_value(&toolkit.ai_execute_async(&call.query).await);
            drop(permit);
            fire(&shared, &call.script, Job::Function(call.callback, envelope));
            shared.outstanding.fetch_sub(1, Ordering::Release);
        });
    }
}

/// Writes the run records every few seconds, and once more at shutdown.
async fn record_runs(runtime: Runtime, shared: Arc<Shared>, shutdown: CancellationToken) {
    let mut ticks = tokio::time::interval(RECORD_EVERY);
    loop {
        let stopping = tokio::select! {
            () = shutdown.cancelled() => true,
            _ = ticks.tick() => false,
        };
        let unrecorded =
            std::mem::take(&mut *shared.unrecorded.lock().unwrap_or_else(PoisonError::into_inner));
        if !unrecorded.is_empty() {
            let rows: Vec<_> = unrecorded.into_iter().collect();
            if let Err(error) = runtime.store().record_script_runs(rows).await {
                tracing::warn!(%error, "cannot record script runs");
            }
        }
        if stopping {
            return;
        }
    }
}
