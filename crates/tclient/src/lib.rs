//! The `tclient` command line on top of the `service-client` library: ping, chat, tags, alarms
//! and tools against a running TServer, the bundled load client (`tclient bench`) and the MCP
//! stdio bridge (`tclient mcp`). Display clients depend on `service-client` alone.

pub mod alarm_handling;
pub mod alarm_report;
pub mod bench;
pub mod cli;
pub mod history_views;
pub mod plant_views;
pub mod proposals;
pub mod signing;

mod mcp_bridge;
mod terminal;
