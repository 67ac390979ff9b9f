//! Solution scripts: Rhai compiled and run in a sandbox, each run bounded in operations, call
//! depth, sizes and wall-clock time, seeing the plant only through a [`ScriptHost`].
//!
//! This crate knows nothing of tserver, SQL or async: the host (tserver's `scripts` module)
//! stores the sources, decides when a trigger fires, and runs each script on a run thread
//! ([`RunThreads`]: a stack for the deepest value a script may build), where a host call
//! such as `ai_execute` may block without stalling any async worker.
//! Invariants: a script never reaches a file, a process or the network except through the
//! host; a run never outlives its limits; an error never panics the caller.

mod engine;
mod host;
mod thread;
mod trigger;

pub use engine::{CompileError, Entry, RunError, RunOutcome, ScriptEngine, ScriptLimits, compile_check};
pub use host::{HostError, ScriptHost};
/// A compiled script.
pub use rhai::AST as Ast;
pub use thread::{RUN_STACK_BYTES, RunThreads, spawn_run_thread};
pub use trigger::{MIN_PERIOD, Trigger, TriggerError};
