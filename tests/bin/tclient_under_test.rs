//! The `tclient` program, built inside the test package so tests can run it as a separate
//! process, for instance with its standard error on a terminal.

fn main() -> anyhow::Result<()> {
    tclient::cli::main()
}
