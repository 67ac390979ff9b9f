//! The main job in one command (`cargo run -p tserver-demo`): it creates a demo solution,
//! starts `tserver` on a loopback port, picks a model and holds a chat whose answers come from
//! tool calls against the live demo plant.
//!
//! - [`model`] is the built-in demo model: rule-based, OpenAI-compatible, and honest about it.
//! - [`session`] wires solution, server, model and client together.
//! - [`cli`] is the command line.

pub mod cli;
pub mod model;
pub mod session;

pub use model::DemoModel;
pub use session::{DemoEval, DemoOptions, DemoReport, run};
