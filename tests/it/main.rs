//! Integration tests of the whole workspace: real servers on 127.0.0.1:0, real clients, real
//! SQLite solution files. One binary, one module per area.

mod admin;
mod architecture;
mod atomic;
mod chat;
mod chat_gate;
mod demo;
mod envelope_limit;
mod failover;
mod fault_matrix;
mod http_limits;
mod log_bounds;
mod login_limits;
mod mcp;
mod mqtt_sources;
mod operations;
mod operator_writes;
mod plant;
mod plant_file;
mod postgres_store;
mod properties;
mod protocol;
mod proxy_protocol;
mod runtime_tools;
mod scripts;
mod secrets_in_logs;
mod several_nodes;
mod solution_file;
mod sparkplug_sources;
mod streaming;
mod subscriptions;
mod support;
mod tclient;
mod tidy;
mod tls;
mod tool_calls;
