//! The `tserver-demo` binary: the product's main job on a fresh machine (see the README and
//! `tserver_demo::cli`).

fn main() -> anyhow::Result<std::process::ExitCode> {
    tserver_demo::cli::main()
}
