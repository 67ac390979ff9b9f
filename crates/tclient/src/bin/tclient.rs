//! The `tclient` binary: parses the command line and runs it (see `tclient::cli`).

fn main() -> anyhow::Result<()> {
    tclient::cli::main()
}
