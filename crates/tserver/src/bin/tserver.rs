//! The `tserver` binary: parses the command line and runs it (see `tserver::cli::main`).

/// mimalloc rather than the system allocator: a chat turn makes some three hundred short-lived
/// allocations across the runtime's threads, and glibc's malloc spent about a third of the
/// turn's instructions on them (docs/PERFORMANCE.md). Built without transparent huge
/// pages (`no_thp`): with them, 10,000 idle connections held 19 KiB each instead of 11.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<std::process::ExitCode> {
    tserver::cli::main()
}
