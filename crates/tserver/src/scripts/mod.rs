//! Solution scripts in the server: the admin commands that store them (`tserver scripts`).
//! Running them on their triggers comes with the script runner.

mod admin;

pub use admin::{ScriptsAction, scripts_command};
