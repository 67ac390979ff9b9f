//! The live plant of a TServer solution and everything that moves it.
//!
//! - [`Runtime`] is one loaded solution: its store, its live [`Plant`] (object model and
//!   historian), the simulator, the MQTT/Sparkplug sources, the runtime tools and the Local AI
//!   service. The server and the scripts both act through it.
//! - [`objects`] is the object model, [`historian`] the history queue, [`simulator`] the
//!   simulated motion, [`tools`] the assistant's runtime tools, [`documents`] the plant's
//!   documents as ranked passages, [`scripts`] the host that runs the solution's scripts,
//!   [`tag_writes`] the checked write every writer goes through, [`proposals`] the actions
//!   proposed for an operator to decide.
//!
//! Invariants: this crate opens no listening socket and knows no protobuf (the wire is
//! `tserver`'s); it holds no SQL (every statement is the `store` crate's); a value, an alarm or
//! the history changes only through a holder of the plant's [`WriteCapability`], which only
//! [`Plant`] holds, so the assistant's tools, given a [`PlantReader`], cannot write by type.

/// Boxes a public `async fn`'s future, so its body, and every future it awaits, compiles once,
/// here, rather than again in each crate that awaits it: rustc builds an `async fn`'s body where
/// its future is polled, so unboxed, a leaf crate compiled the whole async tree beneath it
/// (docs/DECISIONS.md, "Futures boxed at crate boundaries").
pub(crate) use async_recursion::async_recursion as compiled_once;

pub mod actions;
pub mod alarm_report;
pub mod documents;
pub mod historian;
pub mod log_text;
pub mod objects;
pub mod overview;
pub mod prompts;
pub mod proposals;
pub mod resources;
pub mod scripts;
pub mod simulator;
pub mod tag_writes;
pub mod telemetry;
pub mod tools;

mod key_index;
mod notifications;
mod plant;
mod runtime;
mod sources;

pub use plant::{
    AlarmFlood, BatchWritten, Instance, Plant, PlantLibrary, PlantReader, TagWrite, WriteCapability,
};
pub use runtime::{ModelStandIn, Runtime, Toolkit, ToolsClosed};
pub use sources::{
    BrowsedNode, OpcUaAccess, OpcUaAccessError, PresentedCertificate, SKELETON_MAX_VARIABLES, Skeleton,
    SourceCounts, SourceStatus, TrustedCertificate,
};
