//! ListProposals: the proposals waiting for a person's decision, for any logged-in client (a
//! panel's pending list, `tclient proposals list`).

use std::time::SystemTime;

use tserver_proto::v1::{ListProposalsReply, server_frame};

use prost::Message;

use super::to_proto::proposal_within;
use plant::Runtime;

/// The pending proposals, oldest first, as many as fit in `room` bytes.
pub(crate) fn apply(runtime: &Runtime, room: usize) -> server_frame::Body {
    let pending = runtime.proposals().pending(SystemTime::now());
    let mut reply = ListProposalsReply::default();
    for (index, proposed) in pending.iter().enumerate() {
        // The tag and the room a left-out count takes stay free.
        let left = room.saturating_sub(reply.encoded_len() + 16);
        let proposal = proposal_within(proposed, left.saturating_sub(8));
        if proposal.encoded_len() + 8 > left {
            reply.left_out = u32::try_from(pending.len() - index).unwrap_or(u32::MAX);
            break;
        }
        reply.proposals.push(proposal);
    }
    server_frame::Body::ListProposals(reply)
}
