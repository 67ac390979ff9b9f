//! The calls of the framed protocol (`proto/tserver.proto`): a [`Call`] parsed from a client
//! frame, and one module per call that owns the call's logic and the state it keeps on a
//! connection. [`CallState::apply`] says what the session does next: reply now, reply later
//! (the call's work runs beside the connection), or close. Adding a call is one module here
//! and one arm in [`Call`].

mod acknowledge_alarm;
mod alarm_report;
mod alarms;
mod audit;
pub(crate) mod audit_bounds;
mod browse;
mod call_tool;
mod cancel;
mod chat;
mod chat_clear;
mod chat_streams;
pub(crate) mod context;
mod decide_proposal;
mod handle_alarm;
mod hello;
mod historian;
mod list_proposals;
mod list_tools;
mod logout;
mod overview;
mod ping;
mod read_tags;
mod subscribe;
mod tag_history;
mod tag_values_at;
pub(crate) mod to_proto;
mod unsubscribe;
mod write_tags;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tserver_proto::v1::{
    AcknowledgeAlarmRequest, AlarmReportRequest, AlarmsRequest, BrowseRequest, CallToolRequest, Cancel,
    ChatRequest, ClientFrame, DecideProposalRequest, ErrorCode, HandleAlarmRequest, Hello, OverviewRequest,
    Ping, ReadTagsRequest, ServerFrame, SubscribeRequest, TagHistoryRequest, TagValuesAtRequest,
    UnsubscribeRequest, WriteTagsRequest, client_frame, server_frame,
};

use self::cancel::Cancellable;
use self::chat_streams::ChatStreams;
use self::context::ConnectionContext;
use self::hello::LoginLog;
use self::subscribe::Subscriptions;
use self::to_proto::CallError;
use crate::auth::Authenticator;
use plant::Runtime;

/// One call of a client frame, its request parsed.
#[derive(Debug)]
#[expect(
    clippy::enum_variant_names,
    reason = "the variants are the wire's call names, CallTool among them"
)]
pub(crate) enum Call {
    Hello(Hello),
    Ping(Ping),
    Logout,
    ReadTags(ReadTagsRequest),
    Chat(ChatRequest),
    WriteTags(WriteTagsRequest),
    AcknowledgeAlarm(AcknowledgeAlarmRequest),
    Subscribe(SubscribeRequest),
    Unsubscribe(UnsubscribeRequest),
    Cancel(Cancel),
    ListTools,
    CallTool(CallToolRequest),
    Browse(BrowseRequest),
    TagHistory(TagHistoryRequest),
    Alarms(AlarmsRequest),
    ChatClear,
    ListProposals,
    DecideProposal(DecideProposalRequest),
    TagValuesAt(TagValuesAtRequest),
    HandleAlarm(HandleAlarmRequest),
    AlarmReport(AlarmReportRequest),
    Overview(OverviewRequest),
}

/// Every name [`Call::kind`] gives, the labels calls are counted under.
pub(crate) const CALL_KINDS: [&str; 22] = [
    "hello",
    "ping",
    "logout",
    "read_tags",
    "chat",
    "write_tags",
    "acknowledge_alarm",
    "subscribe",
    "unsubscribe",
    "cancel",
    "list_tools",
    "call_tool",
    "browse",
    "tag_history",
    "alarms",
    "chat_clear",
    "list_proposals",
    "decide_proposal",
    "tag_values_at",
    "handle_alarm",
    "alarm_report",
    "overview",
];

impl Call {
    /// The call of `frame` and its id; `Err` (an `unknown_call` reply) for a frame without a
    /// body this server knows.
    pub(crate) fn parse(frame: ClientFrame) -> (u64, Result<Self, CallError>) {
        let call = match frame.body {
            Some(body) => Ok(Self::from(body)),
            None => Err(CallError::new(
                ErrorCode::UnknownCall,
                "unknown call: the frame has no body this server knows",
            )),
        };
        (frame.call_id, call)
    }

    /// The name the call is counted under.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::Hello(_) => "hello",
            Self::Ping(_) => "ping",
            Self::Logout => "logout",
            Self::ReadTags(_) => "read_tags",
            Self::Chat(_) => "chat",
            Self::WriteTags(_) => "write_tags",
            Self::AcknowledgeAlarm(_) => "acknowledge_alarm",
            Self::Subscribe(_) => "subscribe",
            Self::Unsubscribe(_) => "unsubscribe",
            Self::Cancel(_) => "cancel",
            Self::ListTools => "list_tools",
            Self::CallTool(_) => "call_tool",
            Self::Browse(_) => "browse",
            Self::TagHistory(_) => "tag_history",
            Self::Alarms(_) => "alarms",
            Self::ChatClear => "chat_clear",
            Self::ListProposals => "list_proposals",
            Self::DecideProposal(_) => "decide_proposal",
            Self::TagValuesAt(_) => "tag_values_at",
            Self::HandleAlarm(_) => "handle_alarm",
            Self::AlarmReport(_) => "alarm_report",
            Self::Overview(_) => "overview",
        }
    }

    /// Whether the call logs a connection in (the one call taken before a login).
    pub(crate) fn is_hello(&self) -> bool {
        matches!(self, Self::Hello(_))
    }
}

impl From<client_frame::Body> for Call {
    fn from(body: client_frame::Body) -> Self {
        use client_frame::Body;
        match body {
            Body::Hello(hello) => Self::Hello(hello),
            Body::Ping(ping) => Self::Ping(ping),
            Body::Logout(_) => Self::Logout,
            Body::ReadTags(request) => Self::ReadTags(request),
            Body::Chat(request) => Self::Chat(request),
            Body::WriteTags(request) => Self::WriteTags(request),
            Body::AcknowledgeAlarm(request) => Self::AcknowledgeAlarm(request),
            Body::Subscribe(request) => Self::Subscribe(request),
            Body::Unsubscribe(request) => Self::Unsubscribe(request),
            Body::Cancel(request) => Self::Cancel(request),
            Body::ListTools(_) => Self::ListTools,
            Body::CallTool(request) => Self::CallTool(request),
            Body::Browse(request) => Self::Browse(request),
            Body::TagHistory(request) => Self::TagHistory(request),
            Body::Alarms(request) => Self::Alarms(request),
            Body::TagValuesAt(request) => Self::TagValuesAt(request),
            Body::ChatClear(_) => Self::ChatClear,
            Body::ListProposals(_) => Self::ListProposals,
            Body::DecideProposal(request) => Self::DecideProposal(request),
            Body::HandleAlarm(request) => Self::HandleAlarm(request),
            Body::AlarmReport(request) => Self::AlarmReport(request),
            Body::Overview(request) => Self::Overview(request),
        }
    }
}

/// The work of a call that runs beside the connection; it ends with the call's reply.
pub(crate) type Work = Pin<Box<dyn Future<Output = server_frame::Body> + Send>>;

/// What the session does with a call.
pub(crate) enum Apply {
    /// Reply now.
    Now(server_frame::Body),
    /// Reply when `work` ends; `cancel`, when given, lets a Cancel stop it.
    Later {
        work: Work,
        cancel: Option<CancellationToken>,
    },
    /// The connection logged in: reply now (counted as a login, not as a call), and give the
    /// connection the limits of a logged-in one.
    LoggedIn(server_frame::Body),
    /// The connection logged out: give it the limits of one not logged in, then reply.
    LoggedOut(server_frame::Body),
    /// Reply, then close the connection (a refused login).
    Close(server_frame::Body),
}

impl Apply {
    /// The reply now of a call that fails at once, or the work of one that goes on beside the
    /// connection: the shape of every call that acts on the plant.
    fn later<F>(checked: Result<F, CallError>) -> Self
    where
        F: Future<Output = server_frame::Body> + Send + 'static,
    {
        match checked {
            Ok(work) => Self::Later {
                work: Box::pin(work),
                cancel: None,
            },
            Err(error) => Self::Now(error.into_body()),
        }
    }
}

/// What a call may reach beyond its connection's state: the server's runtime and login
/// verifier, and the end of the connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallScope<'a> {
    pub(crate) runtime: &'a Runtime,
    pub(crate) auth: &'a Authenticator,
    /// Cancelled when the connection ends: what a subscription stops with.
    pub(crate) connection_ended: &'a CancellationToken,
}

/// What one connection's calls keep between its frames.
#[derive(Debug)]
pub(crate) struct CallState {
    /// Who is on the other end, and its login now.
    pub(crate) context: ConnectionContext,
    /// How its logins show in the log.
    pub(crate) login_log: LoginLog,
    /// The streamed chat turns in flight, and their progress on its way out.
    pub(crate) chat_streams: ChatStreams,
    /// The calls in flight a Cancel can stop.
    cancellable: Cancellable,
    /// The live tag subscriptions, and their update frames on their way out.
    pub(crate) subscriptions: Subscriptions,
    /// The chat turns asked on the connection so far (a turn's number is the count with it).
    chat_turns: u64,
}

impl CallState {
    pub(crate) fn new(context: ConnectionContext, max_frame: usize, runtime: &Runtime) -> Self {
        Self {
            context,
            login_log: LoginLog::new(),
            chat_streams: ChatStreams::new(max_frame, Arc::clone(runtime.proposals())),
            cancellable: Cancellable::default(),
            subscriptions: Subscriptions::default(),
            chat_turns: 0,
        }
    }

    /// Whether the connection is logged in.
    pub(crate) fn logged_in(&self) -> bool {
        self.context.login.is_some()
    }

    /// Applies `call`, numbered `call_id`, of a logged-in connection (or a Hello).
    pub(crate) async fn apply(&mut self, call_id: u64, call: Call, scope: CallScope<'_>) -> Apply {
        let runtime = scope.runtime;
        match call {
            // Boxed: a login's future is large and rare, and every call's future would carry
            // room for it.
            Call::Hello(hello) => {
                let login = hello::apply(&hello, &mut self.context, &mut self.login_log, scope.auth);
                match Box::pin(login).await {
                    Ok(body) => Apply::LoggedIn(body),
                    Err(error) => Apply::Close(error.into_body()),
                }
            }
            Call::Logout => Apply::LoggedOut(logout::apply(&mut self.context, &mut self.login_log)),
            Call::Ping(ping) => Apply::Now(ping::apply(ping)),
            Call::ReadTags(request) => Apply::Now(
                read_tags::apply(&request, &runtime.objects()).unwrap_or_else(CallError::into_body),
            ),
            Call::Chat(request) => self.chat(call_id, &request, runtime),
            Call::WriteTags(request) => Apply::later(write_tags::apply(request, &self.context, runtime)),
            Call::AcknowledgeAlarm(request) => {
                Apply::later(acknowledge_alarm::apply(request, &self.context, runtime))
            }
            Call::Subscribe(request) => Apply::Now(
                self.subscriptions
                    .subscribe(
                        call_id,
                        request,
                        &runtime.plant().reader(),
                        runtime.proposals(),
                        scope.connection_ended,
                    )
                    .unwrap_or_else(CallError::into_body),
            ),
            Call::Unsubscribe(request) => Apply::Now(unsubscribe::apply(&request, &mut self.subscriptions)),
            Call::Cancel(request) => Apply::Now(cancel::apply(&request, &self.cancellable)),
            Call::ListTools => Apply::Now(
                list_tools::apply(runtime)
                    .await
                    .unwrap_or_else(CallError::into_body),
            ),
            Call::CallTool(request) => Apply::later(Ok(call_tool::apply(request, &self.context, runtime))),
            Call::Browse(request) => Apply::Now(
                browse::apply(&request, &runtime.plant().reader().objects())
                    .unwrap_or_else(CallError::into_body),
            ),
            Call::TagHistory(request) => Apply::later(tag_history::apply(&request, runtime)),
            Call::TagValuesAt(request) => Apply::later(tag_values_at::apply(&request, runtime)),
            Call::Alarms(request) => {
                Apply::later(alarms::apply(&request, runtime, self.chat_streams.frame_room()))
            }
            Call::ChatClear => Apply::later(Ok(chat_clear::apply(&self.context, runtime))),
            Call::ListProposals => Apply::Now(list_proposals::apply(runtime, self.chat_streams.frame_room())),
            Call::HandleAlarm(request) => Apply::later(handle_alarm::apply(request, &self.context, runtime)),
            Call::AlarmReport(request) => Apply::later(alarm_report::apply(&request, runtime)),
            Call::Overview(request) => Apply::Now(
                overview::apply(&request, &runtime.plant().reader().objects())
                    .unwrap_or_else(CallError::into_body),
            ),
            Call::DecideProposal(request) => {
                Apply::later(decide_proposal::apply(request, &self.context, runtime))
            }
        }
    }

    fn chat(&mut self, call_id: u64, request: &ChatRequest, runtime: &Runtime) -> Apply {
        let login = match self.context.logged_in() {
            Ok(login) => login,
            Err(refusal) => return Apply::Now(refusal.into_body()),
        };
        self.chat_turns += 1;
        let caller = localai::ChatCaller {
            client_guid: self.context.guid,
            user_name: Arc::clone(&login.name),
            turn: self.chat_turns,
        };
        match chat::apply(call_id, request, caller, runtime, &mut self.chat_streams) {
            chat::ChatCall::Answered(body) => Apply::Now(body),
            chat::ChatCall::Running { turn, cancel } => Apply::Later {
                work: Box::pin(turn),
                cancel: Some(cancel),
            },
        }
    }

    /// Call `call_id`'s work was put in flight; `cancel` stops it.
    pub(crate) fn started(&mut self, call_id: u64, cancel: CancellationToken) {
        self.cancellable.insert(call_id, cancel);
    }

    /// Call `call_id`'s work was refused (too many calls in flight): it streams nothing.
    pub(crate) fn refused(&mut self, call_id: u64) {
        self.chat_streams.close(call_id);
    }

    /// Call `call_id` has answered: the frames of its last progress, to go out just before
    /// its reply.
    pub(crate) fn finished(&mut self, call_id: u64) -> Vec<ServerFrame> {
        self.cancellable.remove(call_id);
        self.chat_streams.close(call_id)
    }
}

#[cfg(test)]
mod tests {
    use tserver_proto::v1::{
        AcknowledgeAlarmRequest, AlarmReportRequest, AlarmsRequest, BrowseRequest, CallToolRequest, Cancel,
        ChatClear, ChatRequest, DecideProposalRequest, HandleAlarmRequest, Hello, ListProposalsRequest,
        ListToolsRequest, Logout, OverviewRequest, Ping, ReadTagsRequest, SubscribeRequest,
        TagHistoryRequest, TagValuesAtRequest, UnsubscribeRequest, WriteTagsRequest, client_frame::Body,
    };

    use super::{CALL_KINDS, Call};

    #[test]
    fn every_call_kind_is_listed_for_its_counter() {
        let bodies = [
            Body::Hello(Hello::default()),
            Body::Ping(Ping::default()),
            Body::Logout(Logout::default()),
            Body::ReadTags(ReadTagsRequest::default()),
            Body::Chat(ChatRequest::default()),
            Body::WriteTags(WriteTagsRequest::default()),
            Body::AcknowledgeAlarm(AcknowledgeAlarmRequest::default()),
            Body::Subscribe(SubscribeRequest::default()),
            Body::Unsubscribe(UnsubscribeRequest::default()),
            Body::Cancel(Cancel::default()),
            Body::ListTools(ListToolsRequest::default()),
            Body::CallTool(CallToolRequest::default()),
            Body::Browse(BrowseRequest::default()),
            Body::TagHistory(TagHistoryRequest::default()),
            Body::Alarms(AlarmsRequest::default()),
            Body::ChatClear(ChatClear::default()),
            Body::ListProposals(ListProposalsRequest::default()),
            Body::DecideProposal(DecideProposalRequest::default()),
            Body::TagValuesAt(TagValuesAtRequest::default()),
            Body::HandleAlarm(HandleAlarmRequest::default()),
            Body::AlarmReport(AlarmReportRequest::default()),
            Body::Overview(OverviewRequest::default()),
        ];
        let kinds: Vec<&str> = bodies.into_iter().map(|body| Call::from(body).kind()).collect();
        assert_eq!(kinds, CALL_KINDS);
    }
}
