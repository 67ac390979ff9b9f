//! Solution scripts in the process: the script API answered by the runtime (`host.rs`), and
//! the runner that fires their triggers in a serving tserver (`runner.rs`, one entry:
//! `Runtime::start_scripts`, defined there; [`run_once`] runs one script when nobody serves
//! the solution). Invariants: a script never runs on an async worker; a script never runs
//! twice at once; no SQL here.

mod host;
mod runner;
mod targets;

pub use runner::{ScriptRuns, run_once};
pub use targets::unreachable_in;
