//! The client library TServer display clients use.
//!
//! One [`Client`] is one multiplexed connection: it can be cloned and used from many tasks at
//! once, every call carries its own id, and replies are matched to calls as they arrive, in
//! whatever order the server finishes them.
//!
//! A complete program is `examples/chat.rs` (`cargo run -p service-client --example chat`).
//!
//! ```no_run
//! use service_client::{Client, ClientOptions};
//!
//! # async fn demo() -> Result<(), service_client::ClientError> {
//! let client = Client::connect("127.0.0.1:3101", ClientOptions::default()).await?;
//! client.login("guest", "").await?;
//! let envelope = client.chat_envelope("What is wrong with Pump 1?").await?;
//! println!("{} ({:?}, {} ms)", envelope.text, envelope.status, envelope.latency_ms);
//! let readings = client.read_tags(&["Pump1.MotorCurrent"]).await?;
//! println!("{readings:?}");
//! # Ok(())
//! # }
//! ```

/// Boxes a public `async fn`'s future, so its body, and every future it awaits, compiles once,
/// here, rather than again in each crate that awaits it: rustc builds an `async fn`'s body where
/// its future is polled, so unboxed, a leaf crate compiled the whole async tree beneath it
/// (docs/DECISIONS.md, "Futures boxed at crate boundaries").
pub(crate) use async_recursion::async_recursion as compiled_once;

mod client;
mod error;
mod failover;

pub use ai_envelope::{Envelope, Status, ToolStatus, ToolTraceEntry};
pub use client::{ChatStream, Client, ClientOptions, ClientTls, LoginInfo, PendingCall, TagSubscription};
pub use error::{ClientError, CloseReason};
pub use failover::{FailoverClient, FailoverSubscription};
pub use tserver_proto::v1::{
    AlarmCount, AlarmDetail, AlarmHandlingChange, AlarmHistoryEvent, AlarmReportReply, AlarmReportRequest,
    AlarmState, AlarmsReply, AlarmsRequest, BrowseReply, CallToolReply, ChatReply, DecideProposalReply,
    Decision, ErrorCode, HandleAlarmReply, HandleAlarmRequest, HandlingCount, HistoryCursor, HistoryInterval,
    HistorySample, HistoryShape, HistoryStateTime, ListProposalsReply, PlantNode, PlantNodeKind, Proposal,
    ProposalState, ProposedShelving, ProposedWrite, Signature, SignatureMeaning, SubscribeReply,
    SubscribeRequest, TagHistoryReply, TagHistoryRequest, TagReading, TagUpdate, TagValueAt,
    TagValuesAtReply, TagWrite, TagWriteResult, TokenUsage, ToolFinished, ToolInfo, ToolStarted,
    Value as ProposedValueMessage, WriteOutcome, chat_event::Event as ChatEvent,
    history_sample::Value as HistoryValue, history_state_time::Value as StateValue,
    proposal::Action as ProposedAction, tag_reading::Value as TagValue, tag_write::Value as WriteValue,
    value::Kind as ProposedValue,
};
