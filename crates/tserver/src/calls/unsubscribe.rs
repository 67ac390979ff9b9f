//! Unsubscribe: stops one of this connection's subscriptions; the reply says whether it ran.

use tserver_proto::v1::{UnsubscribeReply, UnsubscribeRequest, server_frame};

use super::subscribe::Subscriptions;

pub(crate) fn apply(request: &UnsubscribeRequest, subscriptions: &mut Subscriptions) -> server_frame::Body {
    let unsubscribed = subscriptions.unsubscribe(request.subscription);
    server_frame::Body::Unsubscribe(UnsubscribeReply { unsubscribed })
}
