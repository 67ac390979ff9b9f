//! Sparkplug B as a host application reads it: the payload types (compiled from
//! `proto/sparkplug_b.proto`), its topics, and a [`SparkplugDecoder`] that follows each edge
//! node's births, aliases, sequence numbers and deaths, and says when to ask for a rebirth.
//!
//! Nothing here does I/O: the caller reads MQTT messages and publishes what the decoder asks
//! for ([`rebirth_request`], [`write_command`]).

mod command;
mod decoder;
pub mod edge;
mod topic;
mod value;

pub use command::{REBIRTH_METRIC, rebirth_request, write_command};
pub use decoder::{
    DecodeError, Decoded, Liveness, MAX_DEVICES, MAX_NODES, MAX_PAYLOAD_BYTES, Metric, MetricProblem,
    REBIRTH_PAUSE, RebirthReason, SparkplugDecoder, Target,
};
pub use topic::{MessageKind, NAMESPACE, Topic, TopicError};
pub use value::MetricValue;

/// The payload types of package `org.eclipse.tahu.protobuf`.
#[expect(missing_docs, reason = "generated from the Sparkplug schema")]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/org.eclipse.tahu.protobuf.rs"));
}
