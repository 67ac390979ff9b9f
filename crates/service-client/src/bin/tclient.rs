//! The `tclient` binary: parses the command line and runs it (see `service_client::cli`).

use std::io::IsTerminal;

use anyhow::Context;
use clap::Parser;
use service_client::cli::Cli;

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let interactive = std::io::stdin().is_terminal();
    runtime.block_on(service_client::cli::run(
        &cli,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
        interactive,
    ))
}
