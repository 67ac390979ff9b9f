//! The main job end to end: a demo solution, a running `tserver`, a model, and a chat.
//!
//! Everything runs in this one process but talks as separate programs do: the server listens
//! on a loopback TCP port, the chat goes through the display-client library over that socket,
//! and the model is reached over HTTP, exactly as it would be in a plant.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use scripted_llm::ScriptedLlm;
use service_client::{ClientOptions, Envelope, FailoverClient};
use store::{SettingKey, Store};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tserver::{Runtime, Server, ServerConfig};

use crate::model::{DemoModel, MODEL_NAME};

/// Ollama's default address, probed when no model URL is given.
pub const OLLAMA_DEFAULT: &str = "http://localhost:11434";

/// The spec's default model name, preferred when Ollama has it.
pub const DEFAULT_MODEL_NAME: &str = "qwen2.5:7b-instruct";

/// How long the Ollama probe may take before the built-in model is used.
const PROBE_TIMEOUT: Duration = Duration::from_millis(800);

/// The questions asked when none are given: one per kind of tool.
pub const DEFAULT_QUESTIONS: &[&str] = &[
    "What is wrong with Pump 1?",
    "Which alarms are active?",
    "What is the level of Tank 2?",
    "How did Tank1.Level trend over the last hour?",
    "What equipment is there?",
];

/// The demo plant's questions file (`examples/eval/demo.toml`), evaluated by `--eval` when no
/// other file is given.
pub const DEMO_EVAL_QUESTIONS: &str = include_str!("../../../examples/eval/demo.toml");

/// The questions asked of an existing solution when none are given: they fit any plant.
pub const ANY_PLANT_QUESTIONS: &[&str] = &["What equipment is there?", "Which alarms are active?"];

/// What the demo should do.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// A chat-completions URL to use instead of probing Ollama.
    pub model_url: Option<String>,
    /// The model name to send (default: Ollama's choice, or the spec's default).
    pub model_name: Option<String>,
    /// Where Ollama is probed when no URL is given.
    pub ollama_url: String,
    /// Use the built-in demo model even if a real one is reachable.
    pub builtin_model: bool,
    /// Where to create the demo solution (kept afterwards); a temporary file otherwise. A
    /// solution that exists there is served as it is, with the chosen model held in memory
    /// (its own settings are not changed), so a user can try the assistant on their plant.
    pub solution: Option<PathBuf>,
    /// Who the chat logs in as (the demo's passwordless `guest` unless told).
    pub user: String,
    /// That user's password.
    pub password: String,
    /// The questions to ask, in order.
    pub questions: Vec<String>,
    /// After the questions, read more from the input until an empty line or end of input.
    pub interactive: bool,
    /// Print each answer as it arrives (for a terminal) rather than when it is whole.
    pub stream: bool,
    /// Where to serve the operator panel (tserver's HTTP surface) while the demo runs; `None`
    /// for no panel. Loopback by default.
    pub panel: Option<SocketAddr>,
    /// Evaluate the model on a questions file instead of chatting (`tserver eval` in process).
    pub eval: Option<DemoEval>,
}

/// A questions file to evaluate the demo's model on (docs/EVAL.md).
#[derive(Debug, Clone)]
pub struct DemoEval {
    /// The file's name, for errors.
    pub file: String,
    /// Its text.
    pub text: String,
    /// Runs of each case, instead of the file's.
    pub runs: Option<u32>,
}

impl Default for DemoEval {
    /// The demo plant's own questions.
    fn default() -> Self {
        Self {
            file: "examples/eval/demo.toml".to_owned(),
            text: DEMO_EVAL_QUESTIONS.to_owned(),
            runs: None,
        }
    }
}

impl Default for DemoOptions {
    fn default() -> Self {
        Self {
            model_url: None,
            model_name: None,
            ollama_url: OLLAMA_DEFAULT.to_owned(),
            builtin_model: false,
            solution: None,
            user: "guest".to_owned(),
            password: String::new(),
            questions: DEFAULT_QUESTIONS
                .iter()
                .map(|&question| question.to_owned())
                .collect(),
            interactive: false,
            stream: false,
            panel: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            eval: None,
        }
    }
}

/// The model the demo talks to.
#[derive(Debug)]
enum Model {
    /// A URL the user gave.
    Given { url: String, name: String },
    /// A local Ollama that answered the probe.
    Ollama { url: String, name: String },
    /// The built-in rule-based model, served on a loopback port for the demo's lifetime.
    BuiltIn { server: ScriptedLlm, why: String },
}

impl Model {
    fn url(&self) -> String {
        match self {
            Self::Given { url, .. } | Self::Ollama { url, .. } => url.clone(),
            Self::BuiltIn { server, .. } => server.url(),
        }
    }

    fn name(&self) -> &str {
        match self {
            Self::Given { name, .. } | Self::Ollama { name, .. } => name,
            Self::BuiltIn { .. } => MODEL_NAME,
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Given { url, name } => format!("{name} at {url} (given on the command line)"),
            Self::Ollama { url, name } => format!("{name} at {url} (local Ollama)"),
            Self::BuiltIn { server, why } => format!(
                "built-in demo model at {} (rule-based, not an LLM; {why})",
                server.url()
            ),
        }
    }
}

/// What one demo run did, for tests and the closing line.
#[derive(Debug, Default)]
pub struct DemoReport {
    /// Every envelope received, in order.
    pub envelopes: Vec<Envelope>,
    /// Whether the built-in model answered.
    pub builtin_model: bool,
    /// The evaluation, when one was asked for instead of the chat.
    pub eval: Option<tserver::eval::EvalReport>,
}

/// Runs the demo, writing a readable transcript to `output` and reading interactive questions
/// from `input`.
pub async fn run(
    options: &DemoOptions,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> anyhow::Result<DemoReport> {
    let scratch;
    let solution = match &options.solution {
        Some(path) => path.clone(),
        None => {
            scratch = tempfile::tempdir().context("cannot create a temporary directory")?;
            scratch.path().join("demo.db")
        }
    };
    let existing = solution.exists();
    if !existing {
        create_solution(&solution)?;
    }
    let model = choose_model(options).await?;
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .context("cannot listen on a loopback port")?;
    let addr = listener.local_addr()?;
    // The demo serves its solution as `tserver serve` would: one server at a time on it, and
    // admin commands (`scripts run`) find it there. An existing solution's settings also stay
    // as they are (the model is held in memory only).
    let _lock = store::ServeLock::acquire(&solution, &addr.to_string())?;
    let runtime = if existing {
        Runtime::open(&solution)
            .with_context(|| format!("cannot open {}", solution.display()))?
            .with_model_stand_in(plant::ModelStandIn {
                url: model.url(),
                name: model.name().to_owned(),
            })
    } else {
        configure_model(&solution, &model).await?;
        Runtime::open(&solution).with_context(|| format!("cannot open {}", solution.display()))?
    };
    let simulate = !existing || runtime.settings().simulator_enabled;
    writeln!(output, "TServer Local AI demo")?;
    writeln!(
        output,
        "  solution  {} ({} tags, {} alarms, simulator {})",
        solution.display(),
        runtime.objects().len(),
        runtime.objects().alarms().len(),
        if simulate { "on" } else { "off" }
    )?;
    writeln!(output, "  tserver   listening on {addr}")?;
    writeln!(output, "  model     {}", model.describe())?;
    if existing {
        writeln!(
            output,
            "            for this run only: the solution's own model settings are not changed"
        )?;
    }

    let shutdown = CancellationToken::new();
    if existing {
        runtime
            .start_sources(&shutdown)
            .await
            .context("cannot start the plant's MQTT sources")?;
        runtime
            .start_notifications(&shutdown)
            .await
            .context("cannot start the plant's notifications")?;
    }
    // The demo's script (TankNote) writes an operator note when Tank 1 runs high.
    runtime.start_scripts(&shutdown).await;
    let server = Server::new(runtime.clone(), ServerConfig::default())?;
    let panel = serve_panel(options.panel, &runtime, &server, &shutdown).await?;
    if let Some(address) = panel {
        writeln!(output, "  panel     http://{address}/ (the operator panel)")?;
        writeln!(
            output,
            "            log in as {}; served while the demo runs, --interactive keeps it running",
            options.user
        )?;
    }
    // The demo's own solution always simulates; an existing one follows its setting.
    let pinned = (!existing).then_some(true);
    runtime.simulate_now(pinned);
    let serving = tokio::spawn(server.run(listener, shutdown.clone()));
    let background = tokio::spawn({
        let (runtime, shutdown) = (runtime.clone(), shutdown.clone());
        async move { runtime.run_background_with(pinned, shutdown).await }
    });

    let chat = match &options.eval {
        Some(eval) => evaluate(&runtime, eval, &options.user, &model, output).await,
        None => chat(addr, options, &model, input, output).await,
    };
    shutdown.cancel();
    serving.await.context("the server task failed")?;
    background.await.context("the background task failed")?;
    if let Model::BuiltIn { server, .. } = model {
        server.stop().await;
    }
    chat
}

/// Serves tserver's HTTP surface (the operator panel) at `address` until `shutdown`; returns
/// the address it listens on.
async fn serve_panel(
    address: Option<SocketAddr>,
    runtime: &Runtime,
    server: &Server,
    shutdown: &CancellationToken,
) -> anyhow::Result<Option<SocketAddr>> {
    let Some(address) = address else {
        return Ok(None);
    };
    let listener = tserver::listen(address)
        .with_context(|| format!("cannot listen for the operator panel on {address}"))?;
    let bound = listener.local_addr()?;
    let config = tserver::http_surface::HttpConfig {
        accepting: Some(server.accepting()),
        sessions: Some(server.websocket_sessions()),
        ..tserver::http_surface::HttpConfig::default()
    };
    let (runtime, shutdown) = (runtime.clone(), shutdown.clone());
    tokio::spawn(async move {
        if let Err(error) = tserver::http_surface::serve(listener, runtime, config, shutdown).await {
            tracing::error!(%error, "the operator panel stopped");
        }
    });
    Ok(Some(bound))
}

async fn chat(
    addr: std::net::SocketAddr,
    options: &DemoOptions,
    model: &Model,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> anyhow::Result<DemoReport> {
    let client = FailoverClient::connect(
        &[addr.to_string()],
        ClientOptions {
            client_name: format!("tserver-demo {}", env!("CARGO_PKG_VERSION")),
            ..ClientOptions::default()
        },
    )
    .await?;
    client.login(&options.user, &options.password).await?;
    writeln!(output, "  logged in as {}\n", options.user)?;
    let mut report = DemoReport {
        builtin_model: matches!(model, Model::BuiltIn { .. }),
        ..DemoReport::default()
    };
    for question in &options.questions {
        writeln!(output, "you> {question}")?;
        ask(&client, question, options, &mut report, input, output).await?;
    }
    if options.interactive {
        let more = tclient::cli::chat_interactively(&client, input, output, options.stream).await?;
        report.envelopes.extend(more);
    }
    Ok(report)
}

/// Evaluates the model on `eval`'s questions against the live demo plant and prints the table;
/// a questions file that does not read is the error ([`tserver::eval::QuestionsErrors`]).
async fn evaluate(
    runtime: &Runtime,
    eval: &DemoEval,
    user: &str,
    model: &Model,
    output: &mut dyn Write,
) -> anyhow::Result<DemoReport> {
    let questions = tserver::eval::read_questions(&eval.text, &eval.file, runtime)?;
    let runs = eval.runs.unwrap_or(questions.runs);
    writeln!(
        output,
        "  eval      {} ({} cases, {runs} run(s) each)\n",
        eval.file,
        questions.cases.len()
    )?;
    output.flush()?;
    let mut report = tserver::eval::evaluate(runtime, &questions, runs, user, &mut |case, record| {
        // Progress beside the report, which is written whole at the end.
        eprintln!(
            "{} run {}/{runs}: {}",
            case.name,
            record.run,
            if record.passed { "pass" } else { "fail" }
        );
    })
    .await;
    report.model = Some(model.describe());
    write!(output, "{}", report.to_table())?;
    Ok(DemoReport {
        envelopes: Vec::new(),
        builtin_model: matches!(model, Model::BuiltIn { .. }),
        eval: Some(report),
    })
}

/// One scripted question: the answer as it comes, then each proposal the turn made, asked
/// about at the terminal when the demo is interactive (as `tclient repl` does).
async fn ask(
    client: &FailoverClient,
    question: &str,
    options: &DemoOptions,
    report: &mut DemoReport,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    let (envelope, proposals) = if options.stream {
        tclient::cli::chat_streamed_with_proposals(client, question, output).await?
    } else {
        let reply = client.chat_reply(question).await?;
        let envelope = Envelope::from_json(&reply.reply_json)
            .with_context(|| format!("the server sent an invalid envelope: {}", reply.reply_json))?;
        tclient::cli::write_readable(&envelope, output)?;
        (envelope, reply.proposals)
    };
    if options.interactive {
        tclient::proposals::decide_at_the_terminal(client, &proposals, input, output, true).await?;
    } else {
        for proposal in &proposals {
            writeln!(
                output,
                "  [proposal] {} (withdrawn when the demo ends; --interactive asks you to approve it)",
                tclient::proposals::describe(proposal)
            )?;
        }
    }
    writeln!(output)?;
    output.flush()?;
    report.envelopes.push(envelope);
    Ok(())
}

/// Creates the demo solution (plant, alarms, two hours of history, a passwordless guest).
fn create_solution(path: &Path) -> anyhow::Result<()> {
    let command = tserver::cli::Command::Init {
        solution: store::SolutionLocation::File(path.to_owned()).into(),
        demo: true,
        key_file: None,
    };
    tserver::cli::run_admin(&command, &mut std::io::empty(), &mut std::io::sink())
}

/// Points the solution at the chosen model and turns Local AI on. The demo plant already opens
/// the tool bits; the stored defaults of a solution are not touched otherwise.
async fn configure_model(path: &Path, model: &Model) -> anyhow::Result<()> {
    let store = Store::open_file(path)?;
    store.set_setting(&SettingKey::ModelEnabled, "true").await?;
    store
        .set_setting(&SettingKey::parse("URL")?, &model.url())
        .await?;
    store
        .set_setting(&SettingKey::parse("Name")?, model.name())
        .await?;
    Ok(())
}

async fn choose_model(options: &DemoOptions) -> anyhow::Result<Model> {
    if let Some(url) = &options.model_url {
        let name = options
            .model_name
            .clone()
            .unwrap_or_else(|| DEFAULT_MODEL_NAME.to_owned());
        return Ok(Model::Given {
            url: url.clone(),
            name,
        });
    }
    let why = if options.builtin_model {
        "chosen with --builtin-model".to_owned()
    } else {
        match probe_ollama(&options.ollama_url, options.model_name.as_deref()).await {
            Ok(name) => {
                let url = format!("{}/v1/chat/completions", options.ollama_url.trim_end_matches('/'));
                return Ok(Model::Ollama { url, name });
            }
            Err(why) => why,
        }
    };
    let server = ScriptedLlm::start_with(DemoModel)
        .await
        .context("cannot start the built-in demo model")?;
    Ok(Model::BuiltIn { server, why })
}

/// Asks Ollama which models it has; returns the one to use, or why none can be.
async fn probe_ollama(base: &str, wanted: Option<&str>) -> Result<String, String> {
    let url = format!("{}/api/tags", base.trim_end_matches('/'));
    let http = reqwest::Client::builder()
        .timeout(PROBE_TIMEOUT)
        .build()
        .map_err(|error| format!("cannot build an HTTP client: {error}"))?;
    let reply = http
        .get(&url)
        .send()
        .await
        .map_err(|_| format!("no Ollama answered at {base}"))?;
    if !reply.status().is_success() {
        return Err(format!("{base} answered {} to {url}", reply.status()));
    }
    let body: serde_json::Value = reply
        .json()
        .await
        .map_err(|_| format!("{base} did not answer like Ollama"))?;
    let names: Vec<&str> = body["models"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|model| model["name"].as_str())
        .collect();
    let preferred = wanted.unwrap_or(DEFAULT_MODEL_NAME);
    if names.contains(&preferred) {
        return Ok(preferred.to_owned());
    }
    match (wanted, names.first()) {
        (Some(wanted), _) => Err(format!("Ollama at {base} has no model {wanted}")),
        (None, Some(first)) => Ok((*first).to_owned()),
        (None, None) => Err(format!("Ollama at {base} has no models pulled")),
    }
}
