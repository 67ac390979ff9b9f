//! One loaded solution: its database, live plant (object model, historian, simulator), tool
//! catalog and Local AI service, plus the in-process script API (`TK`) that server scripts use.

use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use localai::secrets::SecretValue;
use localai::settings::{ModelOptions, SettingsRow};
use localai::tools::{RegistrationError, ToolCatalog, ToolDefinition, ToolError};
use localai::{LocalAi, StoreRead};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::historian::Historian;
use crate::objects::ObjectModel;
use crate::plant::{Plant, PlantLibrary, PlantReader};
use crate::proposals::{Proposal, ProposalBoard, ProposalState, settled_note};
use crate::simulator::Simulator;
use crate::tools::{RESERVED_PREFIX, runtime_catalog};
use plant_model::{AlarmEventKind, TagValue};
use store::{
    AuditLog, Leadership, RuntimeSettings, SCRIPTS_LEADER, SolutionAtStart, SolutionError, SolutionLocation,
    Store,
};

/// How often the simulator moves the plant.
const SIMULATOR_TICK: Duration = Duration::from_secs(1);

/// How often a node on a shared database checks its leadership (and tries to take it).
const LEADERSHIP_CHECK: Duration = Duration::from_millis(500);

/// How often queued history is written to the database: a crash loses at most this much of
/// it (a flush journals its samples in one row; see `store`'s history journal).
const HISTORY_FLUSH_EVERY: Duration = Duration::from_secs(1);

/// A solution loaded into the process. Cheap to clone; clones share everything.
#[derive(Debug, Clone)]
pub struct Runtime {
    store: Arc<Store>,
    settings: RuntimeSettings,
    plant: Plant,
    simulator: Simulator,
    tools: Arc<ToolCatalog>,
    local_ai: LocalAi,
    /// The plant model revision loaded (or last tried); an import bumps the stored one.
    plant_revision: Arc<AtomicI64>,
    /// Where writes and acknowledgements are audited, committed together.
    audit: AuditLog,
    /// What the MQTT sources have done.
    sources: crate::sources::Sources,
    /// On a database several nodes share: whether this one leads (runs the scripts and stores
    /// what every node sees alike), campaigned for from the first time it matters. Unused for a file, whose one
    /// server always leads.
    leadership: Arc<OnceLock<Option<Leadership>>>,
    /// The last alarm event (`AlarmHistory.Id`) looked at for other nodes' acts on alarms
    /// (acknowledgements, shelving, service); negative before the first look.
    acts_seen: Arc<AtomicI64>,
    /// The actions proposed for operators to decide.
    proposals: Arc<ProposalBoard>,
    /// `ShelvingMaxHours` in seconds, followed live.
    shelving_max_secs: Arc<AtomicU64>,
    /// The notifications being served, restarted when an import changes them.
    notifications: Arc<tokio::sync::Mutex<crate::notifications::Serving>>,
}

impl Runtime {
    /// Opens the solution file (upgrading an older schema) and loads its plant and tools.
    pub fn open(path: &Path) -> Result<Self, SolutionError> {
        let store = Store::open_file(path)?;
        let at_start = store.at_start_blocking()?;
        Self::assemble(Arc::new(store), at_start)
    }

    /// Opens the solution at `location` (a file, or a PostgreSQL database given tserver's
    /// schema if it has none) and loads its plant and tools.
    #[crate::compiled_once]
    pub async fn open_at(location: &SolutionLocation) -> Result<Self, SolutionError> {
        let store = Store::open(location).await?;
        let at_start = store.at_start().await?;
        Self::assemble(Arc::new(store), at_start)
    }

    fn assemble(store: Arc<Store>, at_start: SolutionAtStart) -> Result<Self, SolutionError> {
        let SolutionAtStart {
            settings,
            plant_revision: revision,
            definitions,
            documents,
            equipment,
            prompts,
            alarm_record,
            alarm_handling,
        } = at_start;
        let definitions = &definitions;
        let objects = ObjectModel::from_definitions(definitions)?;
        // Alarms take up where the last server left them (tripped, acknowledged, shelved, out
        // of service), then the plant judges each against its tag's value now.
        objects.restore_alarm_states(&alarm_record);
        objects.restore_alarm_handling(&alarm_handling);
        let objects = Arc::new(objects);
        let historian = Arc::new(Historian::new(Arc::clone(&store), settings.history_retention));
        historian.set_max_bytes(settings.history_max_bytes);
        let plant = Plant::new(objects, historian);
        plant.set_alarm_flood_count(settings.alarm_flood_count);
        plant.index_library(documents, equipment, prompts);
        let simulator = Simulator::new(plant.clone(), definitions)?;
        let proposals = Arc::new(ProposalBoard::default());
        let tools = Arc::new(runtime_catalog(&plant.reader(), &proposals));
        let view = SolutionView {
            store: Arc::clone(&store),
            stand_in: None,
            plant: plant.reader(),
            tools: Arc::clone(&tools),
        };
        let local_ai = LocalAi::new(Arc::new(view));
        let audit = AuditLog::start(Arc::clone(&store), settings.audit_retention).map_err(|source| {
            SolutionError::Thread {
                what: "audit writer",
                source,
            }
        })?;
        let shelving_max_secs = settings.shelving_max.as_secs();
        Ok(Self {
            store,
            settings,
            plant,
            simulator,
            tools,
            local_ai,
            plant_revision: Arc::new(AtomicI64::new(revision)),
            audit,
            sources: crate::sources::Sources::default(),
            leadership: Arc::default(),
            acts_seen: Arc::new(AtomicI64::new(-1)),
            shelving_max_secs: Arc::new(AtomicU64::new(shelving_max_secs)),
            notifications: Arc::default(),
            proposals,
        })
    }

    /// This node's leadership on a shared database (campaigning from the first call); `None`
    /// for a file, whose one server always leads.
    fn leadership_campaign(&self) -> Option<&Leadership> {
        self.leadership
            .get_or_init(|| self.store.campaign(SCRIPTS_LEADER, LEADERSHIP_CHECK))
            .as_ref()
    }

    /// Whether this node does what must be done once (run the scripts, store the history every
    /// node sees alike): always for a file; on a shared database, while it holds the leadership.
    pub fn leads(&self) -> bool {
        self.leadership_campaign().is_none_or(Leadership::is_leader)
    }

    /// Told each time this node starts or stops leading; `None` for a file (it always leads).
    pub(crate) fn leadership(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        self.leadership_campaign().map(Leadership::watch)
    }

    /// Where the solution is kept.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Connects the plant file's MQTT sources, each in a task of its own until `shutdown`;
    /// returns how many it started. Call once, when serving starts.
    #[crate::compiled_once]
    pub async fn start_sources(&self, shutdown: &CancellationToken) -> Result<usize, SolutionError> {
        self.sources.start(&self.store, &self.plant, shutdown).await
    }

    /// Starts the plant file's notifications, each sending until `shutdown` what this node
    /// records while it leads, and restarted when a plant import changes them; returns how
    /// many started. Call once, when serving starts.
    #[crate::compiled_once]
    pub async fn start_notifications(&self, shutdown: &CancellationToken) -> Result<usize, SolutionError> {
        let mut serving = self.notifications.lock().await;
        serving.serve(shutdown);
        serving.follow(&self.store, &self.plant.reader()).await
    }

    /// Each MQTT source's connection state and counts.
    pub fn source_statuses(&self) -> Vec<crate::sources::SourceStatus> {
        self.sources.statuses()
    }

    /// Each running source's counts of values read, to be watched without a lock (a plant
    /// import that changes the sources starts new ones, counted afresh).
    pub fn source_counts(&self) -> Vec<Arc<crate::sources::SourceCounts>> {
        self.sources.counts()
    }

    /// The field sources, which carry writes out to the field.
    pub(crate) fn sources(&self) -> &crate::sources::Sources {
        &self.sources
    }

    /// The actions proposed for operators to decide (ModelOptions 0x40).
    pub fn proposals(&self) -> &Arc<ProposalBoard> {
        &self.proposals
    }

    /// Tells the chat turn after `proposal`'s what became of it, when a chat turn made it.
    pub fn proposal_settled(&self, proposal: &Proposal) {
        if let (localai::tools::ToolCaller::ChatTurn { connection, .. }, false) = (
            &proposal.proposer,
            matches!(proposal.state, ProposalState::Pending | ProposalState::Deciding),
        ) {
            self.local_ai.tell_next_turn(*connection, &settled_note(proposal));
        }
    }

    /// Expires the proposals past their lifetime at `now`, telling their turns (the background
    /// work does, every second).
    pub fn expire_proposals(&self, now: SystemTime) {
        for expired in self.proposals.expire(now) {
            self.proposal_settled(&expired);
        }
    }

    /// The audit trail of writes and acknowledgements.
    pub fn audit_log(&self) -> &AuditLog {
        &self.audit
    }

    /// The longest an alarm may be shelved for now (`ShelvingMaxHours`, followed live).
    pub fn shelving_max(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.shelving_max_secs.load(Ordering::Relaxed))
    }

    /// The runtime settings read when the solution was opened.
    pub fn settings(&self) -> &RuntimeSettings {
        &self.settings
    }

    /// The live plant: object model and historian.
    pub fn plant(&self) -> &Plant {
        &self.plant
    }

    /// The live object model, as it is now.
    pub fn objects(&self) -> Arc<ObjectModel> {
        self.plant.objects()
    }

    /// The plant simulator (it only runs when [`run_background`](Self::run_background) is
    /// told to simulate; tests step it directly).
    pub fn simulator(&self) -> &Simulator {
        &self.simulator
    }

    /// Every tool the assistant may be offered: the runtime tools and the custom tools
    /// registered so far.
    pub fn tools(&self) -> &Arc<ToolCatalog> {
        &self.tools
    }

    /// Registers a custom tool (ModelOptions 0x20), offered to the model from the next chat
    /// turn on. Names are 1 to 64 letters, digits, `_` or `-`, unique, and may not start with
    /// `runtime_` (the runtime's own tools). The handler's arguments have been validated
    /// against `parameters` (a JSON schema) before it runs.
    pub fn register_custom_tool<F, Fut>(
        &self,
        name: &str,
        description: &str,
        parameters: Value,
        handler: F,
    ) -> Result<(), RegistrationError>
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        if name.starts_with(RESERVED_PREFIX) {
            return Err(RegistrationError::Reserved(name.to_owned()));
        }
        self.tools.register(ToolDefinition::new(
            name,
            ModelOptions::CUSTOM_TOOLS,
            description,
            parameters,
            handler,
        ))
    }

    /// Fills the historian with what the simulator would have recorded over the `span` before
    /// now, one step `every`: how a new demo solution starts with history to look at. The
    /// alarms the replay left listed are acknowledged (as `demo`), so a server starting on the
    /// new solution, which takes its alarms up from the history, starts calm.
    pub fn seed_history(&self, span: Duration, every: Duration) -> Result<usize, SolutionError> {
        let now = SystemTime::now();
        let from = now.checked_sub(span).unwrap_or(SystemTime::UNIX_EPOCH);
        self.simulator.replay(from, now, every);
        for alarm in self.plant.objects().alarms() {
            if alarm.status().state != crate::objects::AlarmState::Normal {
                self.plant.acknowledge_replayed(&alarm.definition().name, "demo");
            }
        }
        self.plant.historian().checkpoint()
    }

    /// Moves the simulated tags to the clock's values at once when the simulator runs
    /// (`simulator` pins it, as [`Self::run_background_with`] takes it): called before the
    /// plant is served or asked about, so nothing reads the plant file's initial values between
    /// the start and the background's first tick (an answer read then and judged after the
    /// tick would differ by the whole motion).
    pub fn simulate_now(&self, simulator: Option<bool>) {
        if simulator.unwrap_or(self.settings.simulator_enabled) {
            self.simulator.step(SystemTime::now());
        }
    }

    /// The runtime's background work until `shutdown`: the simulator's ticks (when `simulate`)
    /// and the historian's periodic flush, with a last flush on the way out so that no
    /// recorded sample is lost.
    #[crate::compiled_once]
    pub async fn run_background(&self, simulate: bool, shutdown: CancellationToken) {
        self.run_background_with(Some(simulate), shutdown).await;
    }

    /// As [`Self::run_background`], following the stored runtime settings while it runs:
    /// `SimulatorEnabled` (unless `simulator` pins it, as `serve --simulator` does),
    /// `HistoryRetentionHours` and `AuditRetentionDays`, read at each tick, so `tserver settings
    /// ... set` is seen within about a second.
    #[crate::compiled_once]
    pub async fn run_background_with(&self, simulator: Option<bool>, shutdown: CancellationToken) {
        let mut simulate = simulator.unwrap_or(self.settings.simulator_enabled);
        let mut tick = tokio::time::interval(SIMULATOR_TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut next_flush = tokio::time::Instant::now() + HISTORY_FLUSH_EVERY;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                _ = tick.tick() => {}
            }
            if let Some(reason) = self.store.check_file() {
                tracing::error!(
                    %reason,
                    queued = self.plant.historian().queued(),
                    "solution file lost: history is held in memory, nothing more is written; restart tserver"
                );
            }
            self.reload_plant_if_imported().await;
            self.expire_proposals(SystemTime::now());
            self.plant.settle_alarm_delays(SystemTime::now());
            self.expire_shelvings(SystemTime::now()).await;
            let leads = self.leads();
            self.plant.historian().set_records_shared(leads);
            self.take_acts_made_elsewhere().await;
            match self.store.runtime_settings().await {
                Ok(settings) => {
                    self.plant.historian().set_retention(settings.history_retention);
                    self.plant.historian().set_max_bytes(settings.history_max_bytes);
                    self.audit.set_retention(settings.audit_retention);
                    self.shelving_max_secs
                        .store(settings.shelving_max.as_secs(), Ordering::Relaxed);
                    self.plant.set_alarm_flood_count(settings.alarm_flood_count);
                    if simulator.is_none() && settings.simulator_enabled != simulate {
                        simulate = settings.simulator_enabled;
                        tracing::info!(simulator = simulate, "SimulatorEnabled changed");
                    }
                }
                Err(error) => tracing::debug!(%error, "cannot read the runtime settings"),
            }
            // Every node simulates: the values are a function of the clock, the same on every
            // node, as a broker's would be; the leader alone stores them (`records_shared`).
            if simulate {
                self.simulator.step(SystemTime::now());
            }
            if tokio::time::Instant::now() >= next_flush {
                self.flush_history().await;
                next_flush = tokio::time::Instant::now() + HISTORY_FLUSH_EVERY;
            }
        }
        self.flush_history().await;
        if let Some(reason) = self.store.lost() {
            tracing::error!(
                %reason,
                lost_rows = self.plant.historian().queued(),
                "history recorded since the solution file was lost is not saved"
            );
        }
    }

    /// Loads the plant anew when an import changed it since it was loaded: tags and alarms that
    /// stay keep their live values and states, new ones start at their initial values, removed
    /// ones are gone (readers holding the old model finish with it). Returns whether it did.
    /// A definition that does not load leaves the running plant as it was, said once.
    #[crate::compiled_once]
    pub async fn reload_plant_if_imported(&self) -> bool {
        let stored = match self.store.plant_revision().await {
            Ok(stored) => stored,
            Err(error) => {
                tracing::debug!(%error, "cannot read the plant revision");
                return false;
            }
        };
        let loaded = self.plant_revision.swap(stored, Ordering::Relaxed);
        if stored == loaded {
            return false;
        }
        let reloaded = self.store.plant_definitions().await.and_then(|definitions| {
            let objects = ObjectModel::from_definitions(&definitions)?;
            self.simulator.reload(&definitions)?;
            Ok((objects, definitions))
        });
        let library = if reloaded.is_ok() {
            self.load_library().await
        } else {
            None
        };
        match reloaded {
            Ok((objects, definitions)) => {
                self.plant.replace_objects(objects);
                if let Some(library) = library {
                    self.plant.replace_library(library);
                }
                self.sources.restart_if_changed(&self.store, &self.plant).await;
                if let Err(error) = self
                    .notifications
                    .lock()
                    .await
                    .follow(&self.store, &self.plant.reader())
                    .await
                {
                    tracing::error!(%error, "cannot read the plant's notifications; the running ones stay");
                }
                tracing::info!(
                    revision = stored,
                    tags = definitions.tags.len(),
                    alarms = definitions.alarms.len(),
                    "plant reloaded after an import"
                );
                true
            }
            Err(error) => {
                tracing::error!(revision = stored, %error, "the imported plant does not load; the running plant is unchanged");
                false
            }
        }
    }

    /// The stored documents indexed for search (off the async workers: a large library takes a
    /// while to cut and index), or `None`, said, when they cannot be read.
    async fn load_library(&self) -> Option<PlantLibrary> {
        let read = async {
            let documents = self.store.plant_documents().await?;
            let equipment = self.store.plant_equipment().await?;
            let prompts = self.store.plant_prompts().await?;
            Ok::<_, SolutionError>((documents, equipment, prompts))
        };
        let (documents, equipment, prompts) = match read.await {
            Ok(read) => read,
            Err(error) => {
                tracing::error!(%error, "the plant's documents cannot be read; the running server keeps those it has");
                return None;
            }
        };
        tokio::task::spawn_blocking(move || PlantLibrary::new(documents, &equipment, &prompts))
            .await
            .inspect_err(|error| tracing::error!(%error, "indexing the plant's documents failed"))
            .ok()
    }

    /// On a database several nodes share: applies to the live alarms the acts the other nodes
    /// recorded since the last look (as soon as their historian flushed them), so an alarm
    /// acknowledged, shelved or taken out of service on one node is so on all.
    async fn take_acts_made_elsewhere(&self) {
        let after = self.acts_seen.load(Ordering::Relaxed);
        let after = (after >= 0).then_some(after);
        match self.store.alarm_acts_since(after).await {
            Ok((last, recorded)) => {
                for event in recorded {
                    // This node's own are already applied: nothing changes again.
                    if event.kind == AlarmEventKind::Acknowledged {
                        let user = event.user.as_deref().unwrap_or_default();
                        self.plant.acknowledged_elsewhere(&event.alarm, user, event.time);
                    } else {
                        self.plant.handled_elsewhere(&event);
                    }
                }
                self.acts_seen.store(last, Ordering::Relaxed);
            }
            Err(error) => tracing::debug!(%error, "cannot read the alarm acts made on other nodes"),
        }
    }

    async fn flush_history(&self) {
        self.plant.record_loaded_values();
        let historian = Arc::clone(self.plant.historian());
        match tokio::task::spawn_blocking(move || historian.flush()).await {
            Ok(Ok(_)) => {}
            // Said once when it was noticed, and again at shutdown.
            Ok(Err(SolutionError::FileLost(_))) => {}
            Ok(Err(error)) => tracing::warn!(%error, "history flush failed; rows stay queued"),
            Err(error) => tracing::error!(%error, "history flush panicked"),
        }
    }

    /// Why the solution file was lost while this runtime served it (removed, or replaced by
    /// another file), if it was: the runtime is then not ready, and writes nothing more.
    pub fn solution_lost(&self) -> Option<&str> {
        self.store.lost()
    }

    /// The Local AI service of this solution (hooks attach here).
    pub fn local_ai(&self) -> &LocalAi {
        &self.local_ai
    }

    /// The runtime tools clients may use now (MCP, the framed ListTools/CallTool): the gates
    /// are read afresh at every call, as a chat turn reads them.
    #[crate::compiled_once]
    pub async fn offered_tools(&self) -> Result<Arc<[ToolDefinition]>, ToolsClosed> {
        let options = self.store.settings_row().await?.options();
        if !options.contains(ModelOptions::ENABLE_RUNTIME_MCP) {
            return Err(ToolsClosed::Disabled);
        }
        Ok(self.tools.offered(options))
    }

    /// Runs one tool call for `caller` (a client, an MCP session), as a chat turn's dispatch
    /// runs it: an unknown or unoffered tool and bad arguments are tool failures, not errors of
    /// the call.
    #[crate::compiled_once]
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        caller: localai::tools::ToolCaller,
    ) -> Result<Result<Value, ToolError>, ToolsClosed> {
        let offered = self.offered_tools().await?;
        Ok(match offered.iter().find(|tool| tool.name() == name) {
            Some(tool) => {
                let started = std::time::Instant::now();
                let outcome = tool.call(arguments, caller, localai::tools::TOOL_TIMEOUT).await;
                // The tool's own name (from the catalog), never the caller's text.
                localai::telemetry::tool_ran(tool.name(), "client", outcome.is_ok(), started.elapsed());
                // A client reads a proposal's id in its result.
                outcome.map(|output| output.result)
            }
            None => Err(localai::tools::unknown_tool(&offered)),
        })
    }

    /// The script toolkit (`TK`) for scripts running in this process.
    pub fn toolkit(&self) -> Toolkit {
        Toolkit {
            local_ai: self.local_ai.clone(),
        }
    }
}

/// Why the runtime tools are not offered to clients now.
#[derive(Debug, thiserror::Error)]
pub enum ToolsClosed {
    /// ModelOptions bit 0x02 (EnableRuntimeMCP) is off.
    #[error(
        "the runtime tools are off for clients: the solution's ModelOptions bit 0x02 (EnableRuntimeMCP) is not set; \
         `tserver settings PATH set ModelOptions 0x9e` sets it, with the UNS, alarm and history tools"
    )]
    Disabled,
    /// The settings could not be read.
    #[error("cannot read the solution's settings: {0}")]
    Settings(#[from] SolutionError),
}

/// The in-process script API: what `TK.*` is to a server script.
#[derive(Debug, Clone)]
pub struct Toolkit {
    local_ai: LocalAi,
}

impl Toolkit {
    /// `TK.AIExecute(query)`: one atomic Local AI call, waiting for the envelope JSON.
    /// Safe from a plain thread, from `spawn_blocking` and from inside an async worker.
    pub fn ai_execute(&self, query: &str) -> String {
        self.local_ai.execute_atomic_blocking(query)
    }

    /// `TK.AIExecuteAsync(query)`: the same call for async scripts.
    #[crate::compiled_once]
    pub async fn ai_execute_async(&self, query: &str) -> String {
        self.local_ai.execute_atomic(query).await
    }
}

/// What Local AI sees of the solution: settings and secrets from the store, tag values
/// from the live object model, and the tool catalog.
#[derive(Debug)]
struct SolutionView {
    store: Arc<Store>,
    /// The model used instead of the solution's, when this process was given one.
    stand_in: Option<Arc<ModelStandIn>>,
    /// Local AI reads tag values (`{Tag.X}`); it never writes.
    plant: PlantReader,
    tools: Arc<ToolCatalog>,
}

/// A store failure as Local AI reports it.
fn for_local_ai(error: SolutionError) -> localai::SolutionError {
    localai::SolutionError(error.to_string())
}

/// A model this process uses instead of the solution's, held in memory and never stored: how
/// `tserver-demo --solution EXISTING` lets a user try the assistant on their own plant with the
/// built-in rule-based model. Local AI is on for it, its `ModelSettings` are only these (no
/// header or secret of the solution's own endpoint reaches it), and a solution whose runtime
/// tools are off gets the demo's tool bits (0x9e) so there is something to try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelStandIn {
    /// The chat-completions URL.
    pub url: String,
    /// The model name sent.
    pub name: String,
}

impl ModelStandIn {
    /// The demo's `ModelOptions`: the runtime tools (UNS, alarms, history) and chat history.
    const OPTIONS: i64 = 0x9e;

    fn applied_to(&self, row: SettingsRow) -> SettingsRow {
        let tools_on = row
            .options()
            .contains(localai::settings::ModelOptions::ENABLE_RUNTIME_MCP);
        SettingsRow {
            model_enabled: true,
            model_settings: Some(
                serde_json::Value::Object(serde_json::Map::from_iter([
                    (localai::settings::keys::URL.to_owned(), self.url.clone().into()),
                    (localai::settings::keys::NAME.to_owned(), self.name.clone().into()),
                ]))
                .to_string(),
            ),
            model_options: if tools_on {
                row.model_options
            } else {
                Self::OPTIONS
            },
        }
    }
}

impl Runtime {
    /// This runtime, its Local AI asking `stand_in` instead of the solution's model (the
    /// solution's settings are not changed). Call before serving: the Local AI service is
    /// made anew.
    #[must_use]
    pub fn with_model_stand_in(mut self, stand_in: ModelStandIn) -> Self {
        let view = SolutionView {
            store: Arc::clone(&self.store),
            stand_in: Some(Arc::new(stand_in)),
            plant: self.plant.reader(),
            tools: Arc::clone(&self.tools),
        };
        self.local_ai = LocalAi::new(Arc::new(view));
        self
    }
}

impl localai::Solution for SolutionView {
    fn settings(&self) -> StoreRead<SettingsRow> {
        let stand_in = self.stand_in.clone();
        let apply = move |row: SettingsRow| match &stand_in {
            Some(stand_in) => stand_in.applied_to(row),
            None => row,
        };
        let store = Arc::clone(&self.store);
        Box::pin(async move { store.settings_row().await.map(apply).map_err(for_local_ai) })
    }

    fn secret(&self, name: &str) -> StoreRead<Option<SecretValue>> {
        let (store, name) = (Arc::clone(&self.store), name.to_owned());
        Box::pin(async move { store.secret(&name).await.map_err(for_local_ai) })
    }

    fn tag_text(&self, name: &str) -> Option<String> {
        let sample = self.plant.objects().tag(name)?.current();
        Some(match &sample.value {
            TagValue::Number(value) => value.to_string(),
            TagValue::Integer(value) => value.to_string(),
            TagValue::Bool(value) => value.to_string(),
            TagValue::Text(value) => value.to_string(),
        })
    }

    fn tools(&self) -> &ToolCatalog {
        &self.tools
    }
}
