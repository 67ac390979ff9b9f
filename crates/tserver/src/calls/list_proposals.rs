//! ListProposals: the proposals waiting for a person's decision, for any logged-in client (a
//! panel's pending list, `tclient proposals list`).

use std::time::SystemTime;

use tserver_proto::v1::{ListProposalsReply, server_frame};

use super::to_proto::proposals_within;
use plant::Runtime;

/// The pending proposals, oldest first, as many as fit in `room` bytes.
pub(crate) fn apply(runtime: &Runtime, room: usize) -> server_frame::Body {
    let pending = runtime.proposals().pending(SystemTime::now());
    // The room a left-out count takes stays free.
    let (proposals, left_out) = proposals_within(&pending, room.saturating_sub(16));
    server_frame::Body::ListProposals(ListProposalsReply {
        proposals,
        left_out: u32::try_from(left_out).unwrap_or(u32::MAX),
    })
}
