//! The `tserver` binary: parses the command line and runs it (see `tserver::cli::main`).

fn main() -> anyhow::Result<()> {
    tserver::cli::main()
}
