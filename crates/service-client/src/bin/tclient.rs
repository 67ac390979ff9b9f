//! The `tclient` binary: parses the command line and runs it (see `service_client::cli`).

fn main() -> anyhow::Result<()> {
    service_client::cli::main()
}
