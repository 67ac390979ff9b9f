//! The `tserver` binary: parses the command line and runs it (see `tserver::cli`).

use std::io::{IsTerminal, Write};

use anyhow::Context;
use clap::Parser;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;
use tserver::cli::{Cli, Command};

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();

    match &cli.command {
        Command::Serve(args) => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("cannot start the async runtime")?;
            runtime.block_on(async {
                let shutdown = CancellationToken::new();
                tokio::spawn(cancel_on_signal(shutdown.clone()));
                tserver::cli::serve(args, shutdown).await
            })
        }
        Command::AiExecute { solution, query } => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start the async runtime")?;
            let envelope = runtime.block_on(tserver::cli::ai_execute(solution, query))?;
            println!("{envelope}");
            Ok(())
        }
        command => {
            let prompt = match command {
                Command::Users { .. } => Some("password"),
                Command::Secrets { .. } => Some("secret value"),
                _ => None,
            };
            if let Some(what) = prompt
                && std::io::stdin().is_terminal()
            {
                eprint!("{what} (echoed; pipe it in to avoid that): ");
                std::io::stderr().flush()?;
            }
            tserver::cli::run_admin(
                command,
                &mut std::io::stdin().lock(),
                &mut std::io::stdout().lock(),
            )
        }
    }
}

/// Cancels `shutdown` on the first SIGINT (Ctrl-C) or SIGTERM.
async fn cancel_on_signal(shutdown: CancellationToken) {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("SIGINT received"),
        () = terminate => tracing::info!("SIGTERM received"),
    }
    shutdown.cancel();
}
