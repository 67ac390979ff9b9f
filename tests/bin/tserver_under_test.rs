//! The `tserver` program, built inside the test package so tests can run it as a separate
//! process (Cargo tells integration tests where their own package's binaries are, no others).

fn main() -> anyhow::Result<std::process::ExitCode> {
    tserver::cli::main()
}
