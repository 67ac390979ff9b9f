//! Where runs run: threads of their own with a stack deep enough for the deepest value the
//! limits let a script build, so no script, however its values nest, overflows a stack.
//!
//! Rhai drops, clones, sizes and prints a value by recursion, one frame per level of nesting.
//! Scripts cannot capture closures or curry (`no_closure`, `curry` disabled), so values nest
//! only through arrays and maps, and Rhai counts every nested item against
//! [`ScriptLimits::max_array_len`](crate::ScriptLimits) and `max_map_len`: a value nests at
//! most `max_array_len + max_map_len` levels (110,000 by default). Measured on x86-64, a level
//! costs at most about 2.4 KiB of stack unoptimized and 640 bytes optimized (70 MiB for the
//! deepest value), so an optimized build gives a run 256 MiB and an unoptimized one (tests)
//! 512 MiB: twice what each needs at least. The stack is address space: only as much is touched
//! as a run goes deep, and it is returned when the run's thread ends.

use std::io;
use std::thread::JoinHandle;

/// The stack of every thread a run runs on.
pub const RUN_STACK_BYTES: usize = if cfg!(debug_assertions) {
    512 * 1024 * 1024
} else {
    256 * 1024 * 1024
};

/// Runs `work` on a new thread named `name` with [`RUN_STACK_BYTES`] of stack.
///
/// # Errors
/// The system refused a thread (out of threads or address space).
pub fn spawn_run_thread<T, F>(name: &str, work: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    std::thread::Builder::new()
        .name(name.to_owned())
        .stack_size(RUN_STACK_BYTES)
        .spawn(work)
}
