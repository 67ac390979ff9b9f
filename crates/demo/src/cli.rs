//! The `tserver-demo` command line: its options and what it prints, for the binary (and the
//! tests, which run it as a process as a user would).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::session::{ANY_PLANT_QUESTIONS, DEFAULT_QUESTIONS, OLLAMA_DEFAULT};
use crate::{DemoEval, DemoOptions, run};
use anyhow::Context;
use clap::Parser;

/// Create a demo plant, start tserver, and chat with its Local AI assistant.
///
/// Uses a real model when one is reachable (the URL given, or a local Ollama); otherwise the
/// built-in demo model, which is rule-based and says so in every answer.
#[derive(Debug, Parser)]
#[command(name = "tserver-demo", version, about)]
struct Args {
    /// Keep chatting after the scripted questions (reads questions from standard input).
    #[arg(short, long)]
    interactive: bool,
    /// An OpenAI-compatible chat-completions URL to use (Ollama, llama.cpp, vLLM...).
    #[arg(long)]
    model_url: Option<String>,
    /// The model name to send (default: qwen2.5:7b-instruct, or the first model Ollama has).
    #[arg(long)]
    model_name: Option<String>,
    /// Where to look for Ollama when no --model-url is given.
    #[arg(long, default_value = OLLAMA_DEFAULT)]
    ollama_url: String,
    /// Use the built-in demo model even when a real one is reachable.
    #[arg(long)]
    builtin_model: bool,
    /// Create the demo solution here and keep it (default: a temporary file). A solution that
    /// exists there is served as it is, with the model above held in memory (its own settings
    /// are not changed): the assistant on your own plant, without a GPU.
    #[arg(long)]
    solution: Option<PathBuf>,
    /// The user the chat logs in as; its password comes from TSERVER_DEMO_PASSWORD, or is
    /// asked for (without echo) on a terminal.
    #[arg(long, default_value = "guest")]
    user: String,
    /// A question to ask instead of the built-in ones (repeatable).
    #[arg(short, long = "question")]
    questions: Vec<String>,
    /// Where to serve the operator panel (a browser page) while the demo runs.
    #[arg(long, default_value = "127.0.0.1:0")]
    panel: std::net::SocketAddr,
    /// Serve no operator panel.
    #[arg(long)]
    no_panel: bool,
    /// Instead of chatting, evaluate the model on a questions file (docs/EVAL.md; default: the
    /// demo plant's, examples/eval/demo.toml) and print the table. Exit status 0: every case
    /// passed, 1: one did not, 2: the file does not read.
    #[arg(long, value_name = "FILE")]
    eval: Option<Option<PathBuf>>,
    /// With --eval: runs of each case, instead of the file's.
    #[arg(long, requires = "eval", value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: Option<u32>,
}

/// Parses the command line and runs the demo; the exit status says how an evaluation went.
pub fn main() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    // Warnings only unless RUST_LOG says otherwise, and the libraries tserver keeps quiet
    // (the OPC UA client's own chatter) quiet here too.
    let rust_log = std::env::var("RUST_LOG")
        .ok()
        .filter(|spec| !spec.trim().is_empty());
    tracing_subscriber::fmt()
        .with_env_filter(tserver::cli::log_filter(Some(
            rust_log.as_deref().unwrap_or("warn"),
        )))
        .with_writer(std::io::stderr)
        .init();
    let existing = args.solution.as_ref().is_some_and(|path| path.exists());
    let password = match std::env::var("TSERVER_DEMO_PASSWORD") {
        Ok(password) => password,
        Err(_) if args.user != "guest" && std::io::stdin().is_terminal() => {
            rpassword::prompt_password(format!("password of {}: ", args.user))
                .context("cannot read the password")?
        }
        Err(_) => String::new(),
    };
    let questions = if args.questions.is_empty() {
        if existing {
            ANY_PLANT_QUESTIONS
        } else {
            DEFAULT_QUESTIONS
        }
        .iter()
        .map(|&question| question.to_owned())
        .collect()
    } else {
        args.questions
    };
    let eval = match &args.eval {
        None => None,
        Some(None) => Some(DemoEval {
            runs: args.runs,
            ..DemoEval::default()
        }),
        Some(Some(file)) => Some(DemoEval {
            file: file.display().to_string(),
            text: match tserver::user_files::read_text_file(
                file,
                &file.display().to_string(),
                "a questions file",
                tserver::eval::MAX_QUESTIONS_FILE_BYTES,
            ) {
                Ok(text) => text,
                Err(error) => {
                    eprintln!("error: {error:#}");
                    return Ok(ExitCode::from(2));
                }
            },
            runs: args.runs,
        }),
    };
    let options = DemoOptions {
        model_url: args.model_url,
        model_name: args.model_name,
        ollama_url: args.ollama_url,
        builtin_model: args.builtin_model,
        solution: args.solution,
        user: args.user,
        password,
        questions,
        interactive: args.interactive,
        stream: std::io::stdout().is_terminal(),
        panel: (!args.no_panel).then_some(args.panel),
        eval,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let interactive = options.interactive && std::io::stdin().is_terminal();
    let report = match runtime.block_on(run(
        &options,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
    )) {
        Ok(report) => report,
        Err(error) if error.is::<tserver::eval::QuestionsErrors>() => {
            eprintln!("error: {error}");
            return Ok(ExitCode::from(2));
        }
        Err(error) => return Err(error),
    };
    if let Some(eval) = &report.eval {
        return Ok(if eval.passed {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    if report.builtin_model && !interactive {
        println!(
            "Answers above came from the built-in rule-based demo model through real tool calls. \
             Point at a real model with --model-url, or run Ollama; add --interactive to keep asking."
        );
    }
    Ok(ExitCode::SUCCESS)
}
