//! ListProposals: the proposals waiting for a person's decision, for any logged-in client (a
//! panel's pending list, `tclient proposals list`).

use std::time::SystemTime;

use tserver_proto::v1::{ListProposalsReply, server_frame};

use super::to_proto::proposal;
use plant::Runtime;

pub(crate) fn apply(runtime: &Runtime) -> server_frame::Body {
    let proposals = runtime.proposals().pending(SystemTime::now());
    server_frame::Body::ListProposals(ListProposalsReply {
        proposals: proposals.iter().map(proposal).collect(),
    })
}
