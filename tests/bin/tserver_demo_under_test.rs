//! The `tserver-demo` program, built inside the test package so tests can run the README's
//! demo commands as a separate process, as a user does.

fn main() -> anyhow::Result<std::process::ExitCode> {
    tserver_demo::cli::main()
}
