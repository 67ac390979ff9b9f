//! Solution scripts in the server: the admin commands that store them (`tserver scripts`),
//! the script API answered by the runtime (`host.rs`), and the runner that fires their
//! triggers in a serving tserver (`runner.rs`, one entry: `start`; `run_once` serves `tserver
//! scripts run` when nobody serves the solution). Invariants: a script never
//! runs on an async worker; a script never runs twice at once; no SQL here.

mod admin;
mod host;
mod runner;
mod targets;

pub(crate) use admin::stranded_by;
pub use admin::{ScriptsAction, scripts_command};
pub use runner::ScriptRuns;
pub(crate) use runner::start;
