//! `Client`: one multiplexed connection to a TServer.
//!
//! A background task owns the socket. Calls hand it frames over a channel and wait on a
//! one-shot slot keyed by call id; the task routes each reply to its slot. When the connection
//! ends, every waiting call learns why.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;
use tserver_proto::v1::{
    AcknowledgeAlarmRequest, AlarmReportReply, AlarmReportRequest, AlarmsReply, AlarmsRequest, BrowseReply,
    BrowseRequest, CallToolReply, CallToolRequest, Cancel, ChatClear, ChatClearReply, ChatReply, ChatRequest,
    ClientFrame, DecideProposalReply, DecideProposalRequest, Decision, ErrorCode, HandleAlarmReply,
    HandleAlarmRequest, Hello, ListProposalsReply, ListProposalsRequest, ListToolsRequest, Logout,
    OverviewReply, OverviewRequest, Ping, ReadTagsRequest, ServerFrame, Signature, SubscribeReply,
    SubscribeRequest, TagHistoryReply, TagHistoryRequest, TagReading, TagUpdate, TagValuesAtReply,
    TagValuesAtRequest, TagWrite, TagWriteResult, ToolInfo, UnsubscribeRequest, WriteTagsRequest, chat_event,
    client_frame, server_frame,
};
use tserver_proto::{DEFAULT_MAX_FRAME, Decoded, FrameCodec, FrameError, PROTOCOL_VERSION, Transport};
use tserver_tls::rustls;

use crate::{ClientError, CloseReason, Envelope};

/// Connection options with their defaults.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// How long connecting may take. Default 5 s.
    pub connect_timeout: Duration,
    /// How long a call waits for its reply. Default 90 s, above the Local AI budget of 60 s.
    pub call_timeout: Duration,
    /// Largest frame accepted from the server. Default 1 MiB.
    pub max_frame: usize,
    /// The client name sent in Hello, for the server's logs.
    pub client_name: String,
    /// Speak TLS, trusting these roots. Default: plain TCP.
    pub tls: Option<ClientTls>,
}

/// How a client speaks TLS.
#[derive(Debug, Clone)]
pub struct ClientTls {
    /// The roots to trust (see [`tserver_tls::client_config`] to load a CA file).
    pub config: Arc<rustls::ClientConfig>,
    /// The name the server's certificate must carry. Default: the host part of the address
    /// connected to (a DNS name or an IP address).
    pub server_name: Option<String>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(5),
            call_timeout: Duration::from_secs(90),
            max_frame: DEFAULT_MAX_FRAME,
            client_name: format!("service-client {}", env!("CARGO_PKG_VERSION")),
            tls: None,
        }
    }
}

/// What a successful login returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginInfo {
    /// The server's product version.
    pub server_version: String,
    /// The user name as the server stores it.
    pub user_name: String,
}

/// What waits for a call's frames.
#[derive(Debug)]
struct Waiter {
    /// Where the one answer goes.
    reply: oneshot::Sender<ServerFrame>,
    /// Where a streamed chat turn's progress goes until its answer arrives. Unbounded, so the
    /// connection's reader never waits for one caller: it holds at most one turn's progress.
    progress: Option<mpsc::UnboundedSender<chat_event::Event>>,
}

type Pending = Mutex<HashMap<u64, Waiter>>;

/// Where each subscription's updates go, by its call id.
type Subscribed = Mutex<HashMap<u64, mpsc::UnboundedSender<TagUpdate>>>;

#[derive(Debug)]
struct Shared {
    pending: Pending,
    subscribed: Subscribed,
    next_call_id: AtomicU64,
    close_reason: OnceLock<CloseReason>,
    /// Cancelled once the connection has ended and every waiting call has been told.
    closed: CancellationToken,
    client_name: String,
}

/// A connection to a TServer. Clones share the connection.
#[derive(Debug, Clone)]
pub struct Client {
    /// Requests to the connection task. Only handles hold senders, so the task ends (and the
    /// socket closes) when the last handle is dropped.
    outgoing: mpsc::Sender<ClientFrame>,
    shared: Arc<Shared>,
    call_timeout: Duration,
}

impl Client {
    /// Connects (without logging in).
    pub async fn connect(
        addr: impl ToSocketAddrs + std::fmt::Display,
        options: ClientOptions,
    ) -> Result<Self, ClientError> {
        let socket = match tokio::time::timeout(options.connect_timeout, TcpStream::connect(&addr)).await {
            Ok(Ok(socket)) => socket,
            Ok(Err(source)) => {
                return Err(ClientError::Connect {
                    addr: addr.to_string(),
                    source,
                });
            }
            Err(_) => {
                return Err(ClientError::ConnectTimeout {
                    addr: addr.to_string(),
                    after: options.connect_timeout,
                });
            }
        };
        let _ = socket.set_nodelay(true);
        let transport = match &options.tls {
            None => Transport::Plain(socket),
            Some(tls) => {
                let addr = addr.to_string();
                let name = tls
                    .server_name
                    .clone()
                    .unwrap_or_else(|| host_of(&addr).to_owned());
                let server_name_text = name.clone();
                let name = tserver_tls::server_name(&name).map_err(|error| ClientError::Tls {
                    addr: addr.clone(),
                    reason: error.to_string(),
                })?;
                let handshake = tserver_proto::connect(&tls.config, name, socket);
                match tokio::time::timeout(options.connect_timeout, handshake).await {
                    Ok(Ok(transport)) => transport,
                    Ok(Err(error)) => {
                        return Err(ClientError::Tls {
                            reason: tserver_tls::handshake_failure(&error, &server_name_text),
                            addr,
                        });
                    }
                    Err(_) => {
                        return Err(ClientError::ConnectTimeout {
                            addr,
                            after: options.connect_timeout,
                        });
                    }
                }
            }
        };
        let framed = Framed::new(
            transport,
            FrameCodec::<ServerFrame, ClientFrame>::new(options.max_frame),
        );
        let (outgoing, requests) = mpsc::channel(256);
        let shared = Arc::new(Shared {
            pending: Mutex::new(HashMap::new()),
            subscribed: Mutex::new(HashMap::new()),
            next_call_id: AtomicU64::new(1),
            close_reason: OnceLock::new(),
            closed: CancellationToken::new(),
            client_name: options.client_name,
        });
        tokio::spawn(drive(framed, requests, Arc::clone(&shared)));
        Ok(Self {
            outgoing,
            shared,
            call_timeout: options.call_timeout,
        })
    }

    /// A handle on the same connection whose calls wait at most `timeout`.
    pub fn with_call_timeout(&self, timeout: Duration) -> Self {
        Self {
            outgoing: self.outgoing.clone(),
            shared: Arc::clone(&self.shared),
            call_timeout: timeout,
        }
    }

    /// Logs in (Hello). A refusal closes the connection on the server side.
    #[crate::compiled_once]
    pub async fn login(&self, user_name: &str, password: &str) -> Result<LoginInfo, ClientError> {
        let hello = Hello {
            protocol_version: PROTOCOL_VERSION,
            client_name: self.shared.client_name.clone(),
            user_name: user_name.to_owned(),
            password: password.to_owned(),
        };
        match self.call(client_frame::Body::Hello(hello)).await {
            Ok(server_frame::Body::Hello(reply)) => Ok(LoginInfo {
                server_version: reply.server_version,
                user_name: reply.user_name,
            }),
            Ok(_) => Err(ClientError::UnexpectedReply {
                expected: "HelloReply",
            }),
            Err(ClientError::Server {
                code: ErrorCode::LoginFailed,
                message,
            }) => Err(ClientError::LoginRefused { message }),
            Err(error) => Err(error),
        }
    }

    /// Logs out; the connection stays open for another login.
    #[crate::compiled_once]
    pub async fn logout(&self) -> Result<(), ClientError> {
        match self.call(client_frame::Body::Logout(Logout {})).await? {
            server_frame::Body::Logout(_) => Ok(()),
            _ => Err(ClientError::UnexpectedReply {
                expected: "LogoutReply",
            }),
        }
    }

    /// Round trip of a Ping.
    #[crate::compiled_once]
    pub async fn ping(&self) -> Result<Duration, ClientError> {
        let started = Instant::now();
        let nonce = self.shared.next_call_id.load(Ordering::Relaxed);
        match self.call(client_frame::Body::Ping(Ping { nonce })).await? {
            server_frame::Body::Pong(pong) if pong.nonce == nonce => Ok(started.elapsed()),
            _ => Err(ClientError::UnexpectedReply {
                expected: "Pong with the same nonce",
            }),
        }
    }

    /// One chat turn; returns the reply envelope JSON exactly as the server sent it.
    #[crate::compiled_once]
    pub async fn chat(&self, query: &str) -> Result<String, ClientError> {
        Ok(self.chat_reply(query).await?.reply_json)
    }

    /// One chat turn, with the envelope parsed (all five fields required).
    #[crate::compiled_once]
    pub async fn chat_envelope(&self, query: &str) -> Result<Envelope, ClientError> {
        Ok(Envelope::from_json(&self.chat(query).await?)?)
    }

    /// One chat turn as the server sent it: the envelope JSON and, when the turn reached the
    /// model server, the tokens it cost there.
    #[crate::compiled_once]
    pub async fn chat_reply(&self, query: &str) -> Result<ChatReply, ClientError> {
        let request = ChatRequest {
            query_json: query.to_owned(),
            stream: false,
        };
        match self.call(client_frame::Body::Chat(request)).await? {
            server_frame::Body::Chat(reply) => Ok(*reply),
            _ => Err(ClientError::UnexpectedReply {
                expected: "ChatReply",
            }),
        }
    }

    /// The runtime tools this login may call now (see TOOLS in `proto/tserver.proto`).
    #[crate::compiled_once]
    pub async fn list_tools(&self) -> Result<Vec<ToolInfo>, ClientError> {
        match self
            .call(client_frame::Body::ListTools(ListToolsRequest {}))
            .await?
        {
            server_frame::Body::ListTools(reply) => Ok(reply.tools),
            _ => Err(ClientError::UnexpectedReply {
                expected: "ListToolsReply",
            }),
        }
    }

    /// Runs one runtime tool with `arguments` (a JSON object); the reply holds the canonical
    /// content a model would read, and whether it is a failure.
    #[crate::compiled_once]
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: &serde_json::Value,
    ) -> Result<CallToolReply, ClientError> {
        let request = CallToolRequest {
            name: name.to_owned(),
            arguments_json: arguments.to_string(),
        };
        match self.call(client_frame::Body::CallTool(request)).await? {
            server_frame::Body::CallTool(reply) => Ok(reply),
            _ => Err(ClientError::UnexpectedReply {
                expected: "CallToolReply",
            }),
        }
    }

    /// Current values of tags, one reading per name in order.
    #[crate::compiled_once]
    pub async fn read_tags(&self, names: &[&str]) -> Result<Vec<TagReading>, ClientError> {
        let request = ReadTagsRequest {
            names: names.iter().map(|name| (*name).to_owned()).collect(),
        };
        match self.call(client_frame::Body::ReadTags(request)).await? {
            server_frame::Body::ReadTags(reply) => Ok(reply.readings),
            _ => Err(ClientError::UnexpectedReply {
                expected: "ReadTagsReply",
            }),
        }
    }

    /// Writes tag values (an operator's or admin's login); one result per write, in order,
    /// each empty or saying why that write was refused. A viewer gets
    /// [`ClientError::Server`] with `PermissionDenied`.
    #[crate::compiled_once]
    pub async fn write_tags(&self, writes: Vec<TagWrite>) -> Result<Vec<TagWriteResult>, ClientError> {
        self.write_tags_signed(writes, Vec::new()).await
    }

    /// As [`Self::write_tags`], with the electronic signatures the written tags take (the
    /// writer's own; for a witnessed tag, another operator's too). Without them the server
    /// answers [`ClientError::Server`] with `SignatureRequired`, saying which it takes.
    #[crate::compiled_once]
    pub async fn write_tags_signed(
        &self,
        writes: Vec<TagWrite>,
        signatures: Vec<Signature>,
    ) -> Result<Vec<TagWriteResult>, ClientError> {
        match self
            .call(client_frame::Body::WriteTags(WriteTagsRequest {
                writes,
                signatures,
            }))
            .await?
        {
            server_frame::Body::WriteTags(reply) => Ok(reply.results),
            _ => Err(ClientError::UnexpectedReply {
                expected: "WriteTagsReply",
            }),
        }
    }

    /// Acknowledges an alarm; `false` when it had nothing to acknowledge.
    #[crate::compiled_once]
    pub async fn acknowledge_alarm(&self, alarm: &str) -> Result<bool, ClientError> {
        self.acknowledge_alarm_signed(alarm, Vec::new()).await
    }

    /// As [`Self::acknowledge_alarm`], with the acknowledger's electronic signature an alarm
    /// marked `signed` takes. Without it the server answers [`ClientError::Server`] with
    /// `SignatureRequired`.
    #[crate::compiled_once]
    pub async fn acknowledge_alarm_signed(
        &self,
        alarm: &str,
        signatures: Vec<Signature>,
    ) -> Result<bool, ClientError> {
        let request = AcknowledgeAlarmRequest {
            alarm: alarm.to_owned(),
            signatures,
        };
        match self.call(client_frame::Body::AcknowledgeAlarm(request)).await? {
            server_frame::Body::AcknowledgeAlarm(reply) => Ok(reply.acknowledged),
            _ => Err(ClientError::UnexpectedReply {
                expected: "AcknowledgeAlarmReply",
            }),
        }
    }

    /// Shelves or unshelves an alarm, or takes it out of or back into service (see
    /// `HandleAlarmRequest` in `proto/tserver.proto`): whether it changed anything, and until
    /// when a shelving lasts. A shelving or removal of an alarm marked `signed` without its
    /// signature is [`ClientError::Server`] with `SignatureRequired`.
    #[crate::compiled_once]
    pub async fn handle_alarm(&self, request: HandleAlarmRequest) -> Result<HandleAlarmReply, ClientError> {
        match self.call(client_frame::Body::HandleAlarm(request)).await? {
            server_frame::Body::HandleAlarm(reply) => Ok(reply),
            _ => Err(ClientError::UnexpectedReply {
                expected: "HandleAlarmReply",
            }),
        }
    }

    /// How the alarm system performed over a window of the alarm history (see
    /// `AlarmReportRequest` in `proto/tserver.proto`); any role.
    #[crate::compiled_once]
    pub async fn alarm_report(&self, request: AlarmReportRequest) -> Result<AlarmReportReply, ClientError> {
        match self.call(client_frame::Body::AlarmReport(request)).await? {
            server_frame::Body::AlarmReport(reply) => Ok(*reply),
            _ => Err(ClientError::UnexpectedReply {
                expected: "AlarmReportReply",
            }),
        }
    }

    /// A display generated from the plant model: the plant overview (`""`: a tile per area)
    /// or a folder's display (a tile per equipment), as `OverviewRequest` in
    /// `proto/tserver.proto` says; any role. A path that is no folder is
    /// [`ClientError::Server`] with `InvalidArgument`.
    #[crate::compiled_once]
    pub async fn overview(&self, folder: &str) -> Result<OverviewReply, ClientError> {
        let request = OverviewRequest {
            folder: folder.to_owned(),
        };
        match self.call(client_frame::Body::Overview(request)).await? {
            server_frame::Body::Overview(reply) => Ok(reply),
            _ => Err(ClientError::UnexpectedReply {
                expected: "OverviewReply",
            }),
        }
    }

    /// The direct children of a UNS folder (`""` for the root): its folders, then its tags
    /// with units, type, writability and range. An unknown folder is [`ClientError::Server`]
    /// with `InvalidArgument`.
    #[crate::compiled_once]
    pub async fn browse(&self, folder: &str) -> Result<BrowseReply, ClientError> {
        let request = BrowseRequest {
            folder: folder.to_owned(),
        };
        match self.call(client_frame::Body::Browse(request)).await? {
            server_frame::Body::Browse(reply) => Ok(reply),
            _ => Err(ClientError::UnexpectedReply {
                expected: "BrowseReply",
            }),
        }
    }

    /// A tag's recorded history over a window: a trend, a raw page or aggregates per interval
    /// (see `TagHistoryRequest` in `proto/tserver.proto` for the shapes, defaults and caps).
    #[crate::compiled_once]
    pub async fn tag_history(&self, request: TagHistoryRequest) -> Result<TagHistoryReply, ClientError> {
        match self.call(client_frame::Body::TagHistory(request)).await? {
            server_frame::Body::TagHistory(reply) => Ok(*reply),
            _ => Err(ClientError::UnexpectedReply {
                expected: "TagHistoryReply",
            }),
        }
    }

    /// What the named tags were at a past instant (`at_ms` 0: now): each one's last recorded
    /// sample at or before it, in the order named (see `TagValuesAtRequest` in
    /// `proto/tserver.proto` for the caps).
    #[crate::compiled_once]
    pub async fn tag_values_at(&self, names: &[String], at_ms: i64) -> Result<TagValuesAtReply, ClientError> {
        let request = TagValuesAtRequest {
            names: names.to_vec(),
            at_ms,
        };
        match self.call(client_frame::Body::TagValuesAt(request)).await? {
            server_frame::Body::TagValuesAt(reply) => Ok(reply),
            _ => Err(ClientError::UnexpectedReply {
                expected: "TagValuesAtReply",
            }),
        }
    }

    /// The alarms not normal with their details, most urgent first, and the alarm history
    /// when the request asks for it.
    #[crate::compiled_once]
    pub async fn alarms(&self, request: AlarmsRequest) -> Result<AlarmsReply, ClientError> {
        match self.call(client_frame::Body::Alarms(request)).await? {
            server_frame::Body::Alarms(reply) => Ok(*reply),
            _ => Err(ClientError::UnexpectedReply {
                expected: "AlarmsReply",
            }),
        }
    }

    /// Empties this connection's chat transcript: the next turn starts a fresh conversation.
    /// `true` when it held anything.
    #[crate::compiled_once]
    pub async fn chat_clear(&self) -> Result<bool, ClientError> {
        match self.call(client_frame::Body::ChatClear(ChatClear {})).await? {
            server_frame::Body::ChatClear(ChatClearReply { cleared }) => Ok(cleared),
            _ => Err(ClientError::UnexpectedReply {
                expected: "ChatClearReply",
            }),
        }
    }

    /// The proposals waiting for a person's decision, oldest first (as many as fit a frame;
    /// `left_out` counts the rest).
    #[crate::compiled_once]
    pub async fn list_proposals(&self) -> Result<ListProposalsReply, ClientError> {
        match self
            .call(client_frame::Body::ListProposals(ListProposalsRequest {}))
            .await?
        {
            server_frame::Body::ListProposals(reply) => Ok(reply),
            _ => Err(ClientError::UnexpectedReply {
                expected: "ListProposalsReply",
            }),
        }
    }

    /// Approves (`decision` [`Decision::Approve`]) or declines a proposal, with a comment told
    /// to its proposer. The reply holds the proposal as it now stands and, for an approved
    /// write, where the write went. A viewer gets [`ClientError::Server`] with
    /// `PermissionDenied`; a proposal decided already, expired or unknown, `InvalidArgument`.
    #[crate::compiled_once]
    pub async fn decide_proposal(
        &self,
        id: &str,
        decision: Decision,
        comment: &str,
    ) -> Result<DecideProposalReply, ClientError> {
        self.decide_proposal_signed(id, decision, comment, Vec::new())
            .await
    }

    /// As [`Self::decide_proposal`], with the electronic signatures an approval takes (the
    /// approver's when the solution asks for signed approvals, and what the proposed tag's
    /// write takes).
    #[crate::compiled_once]
    pub async fn decide_proposal_signed(
        &self,
        id: &str,
        decision: Decision,
        comment: &str,
        signatures: Vec<Signature>,
    ) -> Result<DecideProposalReply, ClientError> {
        let request = DecideProposalRequest {
            id: id.to_owned(),
            decision: decision.into(),
            comment: comment.to_owned(),
            signatures,
        };
        match self.call(client_frame::Body::DecideProposal(request)).await? {
            server_frame::Body::DecideProposal(reply) => Ok(reply),
            _ => Err(ClientError::UnexpectedReply {
                expected: "DecideProposalReply",
            }),
        }
    }

    /// Subscribes to tag changes: the reply holds every tag's current reading, then
    /// [`TagSubscription::next_update`] gives each change the server sends (merged, at most
    /// `max_rate` a second). Updates the application has not read yet are held in memory.
    #[crate::compiled_once]
    pub async fn subscribe(&self, request: SubscribeRequest) -> Result<TagSubscription, ClientError> {
        let (sender, updates) = mpsc::unbounded_channel();
        let (call_id, initial) = self.subscribe_into(request, sender).await?;
        Ok(TagSubscription {
            call_id,
            initial,
            updates,
            client: self.clone(),
        })
    }

    /// Subscribes with the updates going to `updates`; returns the subscription's id and its
    /// initial readings.
    pub(crate) async fn subscribe_into(
        &self,
        request: SubscribeRequest,
        updates: mpsc::UnboundedSender<TagUpdate>,
    ) -> Result<(u64, SubscribeReply), ClientError> {
        let call_id = self.shared.next_call_id.fetch_add(1, Ordering::Relaxed);
        // Registered before the call goes out: the first update may follow the reply at once.
        lock_subscribed(&self.shared.subscribed).insert(call_id, updates);
        let (slot, reply) = oneshot::channel();
        self.pending().insert(
            call_id,
            Waiter {
                reply: slot,
                progress: None,
            },
        );
        let frame = ClientFrame {
            call_id,
            body: Some(client_frame::Body::Subscribe(request)),
        };
        let pending = PendingCall {
            call_id,
            reply,
            client: self.clone(),
        };
        let answer = if self.outgoing.send(frame).await.is_err() {
            self.pending().remove(&call_id);
            Err(self.lost())
        } else {
            pending.reply().await
        };
        match answer {
            Ok(server_frame::Body::Subscribe(initial)) => Ok((call_id, initial)),
            other => {
                lock_subscribed(&self.shared.subscribed).remove(&call_id);
                match other {
                    Err(error) => Err(error),
                    Ok(_) => Err(ClientError::UnexpectedReply {
                        expected: "SubscribeReply",
                    }),
                }
            }
        }
    }

    /// Stops the subscription `id` of this connection; whether the server still had it.
    pub(crate) async fn unsubscribe_id(&self, id: u64) -> Result<bool, ClientError> {
        lock_subscribed(&self.shared.subscribed).remove(&id);
        match self
            .call(client_frame::Body::Unsubscribe(UnsubscribeRequest {
                subscription: id,
            }))
            .await?
        {
            server_frame::Body::Unsubscribe(reply) => Ok(reply.unsubscribed),
            _ => Err(ClientError::UnexpectedReply {
                expected: "UnsubscribeReply",
            }),
        }
    }

    /// Sends a chat turn without waiting for its reply, so it can be cancelled
    /// ([`cancel`](Self::cancel) with its [`PendingCall::call_id`]) while it runs.
    #[crate::compiled_once]
    pub async fn send_chat(&self, query: &str) -> Result<PendingCall, ClientError> {
        let request = ChatRequest {
            query_json: query.to_owned(),
            stream: false,
        };
        self.send(client_frame::Body::Chat(request), None).await
    }

    /// Sends a chat turn that streams: its progress (answer text as the model writes it, tool
    /// dispatches as they start and finish) comes from [`ChatStream::next_event`], then its
    /// reply, the same as [`chat_reply`](Self::chat_reply) would give, from
    /// [`ChatStream::reply`]. It can be cancelled with [`cancel`](Self::cancel) and
    /// [`ChatStream::call_id`].
    #[crate::compiled_once]
    pub async fn chat_stream(&self, query: &str) -> Result<ChatStream, ClientError> {
        let request = ChatRequest {
            query_json: query.to_owned(),
            stream: true,
        };
        let (progress, events) = mpsc::unbounded_channel();
        let pending = self
            .send(client_frame::Body::Chat(request), Some(progress))
            .await?;
        Ok(ChatStream {
            deadline: tokio::time::Instant::now() + self.call_timeout,
            events,
            pending,
        })
    }

    /// Asks the server to stop a call of this connection still in flight (a chat turn sent
    /// with [`send_chat`](Self::send_chat)); that call is still answered, its envelope saying
    /// it was cancelled. Returns whether the call was in flight.
    #[crate::compiled_once]
    pub async fn cancel(&self, call_id: u64) -> Result<bool, ClientError> {
        match self
            .call(client_frame::Body::Cancel(Cancel {
                target_call_id: call_id,
            }))
            .await?
        {
            server_frame::Body::Cancel(reply) => Ok(reply.cancelled),
            _ => Err(ClientError::UnexpectedReply {
                expected: "CancelReply",
            }),
        }
    }

    /// Sends any call and returns the reply body; protocol errors become
    /// [`ClientError::Server`].
    #[crate::compiled_once]
    pub async fn call(&self, body: client_frame::Body) -> Result<server_frame::Body, ClientError> {
        self.send(body, None).await?.reply().await
    }

    /// Sends a call; its reply is awaited with [`PendingCall::reply`], and its progress, if
    /// it streams, goes to `progress`.
    async fn send(
        &self,
        body: client_frame::Body,
        progress: Option<mpsc::UnboundedSender<chat_event::Event>>,
    ) -> Result<PendingCall, ClientError> {
        let call_id = self.shared.next_call_id.fetch_add(1, Ordering::Relaxed);
        let (slot, reply) = oneshot::channel();
        self.pending().insert(
            call_id,
            Waiter {
                reply: slot,
                progress,
            },
        );
        let frame = ClientFrame {
            call_id,
            body: Some(body),
        };
        if self.outgoing.send(frame).await.is_err() {
            self.pending().remove(&call_id);
            return Err(self.lost());
        }
        Ok(PendingCall {
            call_id,
            reply,
            client: self.clone(),
        })
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Waiter>> {
        lock(&self.shared.pending)
    }

    fn lost(&self) -> ClientError {
        ClientError::ConnectionLost {
            reason: self.close_reason().unwrap_or(CloseReason::ServerClosed),
        }
    }

    /// Why the connection ended, if it has.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.shared.close_reason.get().cloned()
    }

    /// Waits until the connection has ended ([`close_reason`](Self::close_reason) then says
    /// why).
    #[crate::compiled_once]
    pub async fn closed(&self) {
        self.shared.closed.cancelled().await;
    }

    /// Cancelled when the connection ends; holding it does not keep the connection open.
    pub(crate) fn closed_signal(&self) -> CancellationToken {
        self.shared.closed.clone()
    }
}

/// A call sent and not yet answered. Its call timeout starts at [`PendingCall::reply`]. Dropped
/// unanswered, the call goes on at the server and its reply is discarded on arrival; when every
/// handle of the connection is gone with replies still due, the connection closes with a reset,
/// which tells the server to stop the calls (see the proto's half-close rule).
#[derive(Debug)]
pub struct PendingCall {
    /// The call's id, as [`Client::cancel`] takes it.
    pub call_id: u64,
    reply: oneshot::Receiver<ServerFrame>,
    client: Client,
}

impl PendingCall {
    /// Waits for the reply body (within the client's call timeout); protocol errors become
    /// [`ClientError::Server`].
    #[crate::compiled_once]
    pub async fn reply(self) -> Result<server_frame::Body, ClientError> {
        let deadline = tokio::time::Instant::now() + self.client.call_timeout;
        self.reply_by(deadline).await
    }

    /// Waits for the reply body until `deadline`.
    async fn reply_by(self, deadline: tokio::time::Instant) -> Result<server_frame::Body, ClientError> {
        let Self {
            call_id,
            reply,
            client,
        } = self;
        let frame = match tokio::time::timeout_at(deadline, reply).await {
            Ok(Ok(frame)) => frame,
            Ok(Err(_)) => return Err(client.lost()),
            Err(_) => {
                client.pending().remove(&call_id);
                return Err(ClientError::Timeout {
                    after: client.call_timeout,
                });
            }
        };
        match frame.body {
            Some(server_frame::Body::Error(error)) => Err(ClientError::Server {
                code: ErrorCode::try_from(error.code).unwrap_or(ErrorCode::Unspecified),
                message: error.message,
            }),
            Some(body) => Ok(body),
            None => Err(ClientError::UnexpectedReply {
                expected: "a reply body",
            }),
        }
    }
}

/// A live subscription (see [`Client::subscribe`]). Dropping it leaves the server sending
/// until [`unsubscribe`](Self::unsubscribe) or the connection closes (updates are then
/// discarded on arrival).
#[derive(Debug)]
pub struct TagSubscription {
    call_id: u64,
    initial: SubscribeReply,
    updates: mpsc::UnboundedReceiver<TagUpdate>,
    client: Client,
}

impl TagSubscription {
    /// The subscription's id (its Subscribe call's).
    pub fn id(&self) -> u64 {
        self.call_id
    }

    /// The readings (and alarm states) when it started.
    pub fn initial(&self) -> &SubscribeReply {
        &self.initial
    }

    /// The next update; `None` once the connection has ended.
    #[crate::compiled_once]
    pub async fn next_update(&mut self) -> Option<TagUpdate> {
        self.updates.recv().await
    }

    /// Stops the subscription; whether the server still had it.
    #[crate::compiled_once]
    pub async fn unsubscribe(self) -> Result<bool, ClientError> {
        self.client.unsubscribe_id(self.call_id).await
    }
}

/// The updates as a stream (what [`TagSubscription::next_update`] gives, one by one).
impl futures::Stream for TagSubscription {
    type Item = TagUpdate;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<TagUpdate>> {
        self.updates.poll_recv(context)
    }
}

fn lock_subscribed(
    subscribed: &Subscribed,
) -> std::sync::MutexGuard<'_, HashMap<u64, mpsc::UnboundedSender<TagUpdate>>> {
    subscribed
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A streamed chat turn in flight (see [`Client::chat_stream`]). Its call timeout counts from
/// when it was sent. Dropped, it is as a dropped [`PendingCall`].
#[derive(Debug)]
pub struct ChatStream {
    deadline: tokio::time::Instant,
    events: mpsc::UnboundedReceiver<chat_event::Event>,
    pending: PendingCall,
}

impl ChatStream {
    /// The call's id, as [`Client::cancel`] takes it.
    pub fn call_id(&self) -> u64 {
        self.pending.call_id
    }

    /// The turn's next progress event; `None` once the turn has been answered (or the call
    /// timed out, or the connection ended): then [`reply`](Self::reply) says how it ended.
    #[crate::compiled_once]
    pub async fn next_event(&mut self) -> Option<chat_event::Event> {
        tokio::time::timeout_at(self.deadline, self.events.recv())
            .await
            .ok()
            .flatten()
    }

    /// The turn's reply, once its progress has been read or is no longer wanted.
    #[crate::compiled_once]
    pub async fn reply(self) -> Result<ChatReply, ClientError> {
        match self.pending.reply_by(self.deadline).await? {
            server_frame::Body::Chat(reply) => Ok(*reply),
            _ => Err(ClientError::UnexpectedReply {
                expected: "ChatReply",
            }),
        }
    }
}

/// The host part of `host:port`, `[v6]:port` or a bare host.
fn host_of(addr: &str) -> &str {
    let host = match addr.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) && !host.is_empty() => host,
        _ => addr,
    };
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// Locks the pending map; a panic while holding it cannot leave it inconsistent (single
/// inserts and removes), so a poisoned lock is used as is.
fn lock(pending: &Pending) -> std::sync::MutexGuard<'_, HashMap<u64, Waiter>> {
    pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Owns the socket: writes requests, routes replies, and records why the connection ended.
async fn drive(
    mut framed: Framed<Transport, FrameCodec<ServerFrame, ClientFrame>>,
    mut requests: mpsc::Receiver<ClientFrame>,
    shared: Arc<Shared>,
) {
    let mut connection_error = None;
    let reason = loop {
        tokio::select! {
            request = requests.recv() => {
                // Every client handle is gone: close the socket.
                let Some(request) = request else { break CloseReason::ClientClosed };
                let mut result = framed.feed(request).await;
                while result.is_ok() {
                    match requests.try_recv() {
                        Ok(next) => result = framed.feed(next).await,
                        Err(_) => break,
                    }
                }
                if let Err(error) = match result {
                    Ok(()) => framed.flush().await,
                    Err(error) => Err(error),
                } {
                    break CloseReason::Transport(error.to_string());
                }
            }
            incoming = framed.next() => match incoming {
                Some(Ok(Decoded::Message(frame))) if frame.call_id == 0 => {
                    // A connection-level error: the server says why it is about to close.
                    if let Some(server_frame::Body::Error(error)) = frame.body {
                        connection_error = Some(CloseReason::Server {
                            code: ErrorCode::try_from(error.code).unwrap_or(ErrorCode::Unspecified),
                            message: error.message,
                        });
                    }
                }
                Some(Ok(Decoded::Message(ServerFrame {
                    call_id,
                    body: Some(server_frame::Body::TagUpdate(update)),
                }))) => {
                    if let Some(updates) = lock_subscribed(&shared.subscribed).get(&call_id) {
                        let _ = updates.send(update);
                    }
                }
                Some(Ok(Decoded::Message(ServerFrame {
                    call_id,
                    body: Some(server_frame::Body::ChatProgress(progress)),
                }))) => {
                    if let Some(Waiter { progress: Some(events), .. }) = lock(&shared.pending).get(&call_id) {
                        for event in progress.events.into_iter().filter_map(|event| event.event) {
                            let _ = events.send(event);
                        }
                    }
                }
                Some(Ok(Decoded::Message(frame))) => {
                    // The waiter goes, and with it the progress sender: its stream ends.
                    if let Some(waiter) = lock(&shared.pending).remove(&frame.call_id) {
                        let _ = waiter.reply.send(frame);
                    }
                }
                Some(Ok(Decoded::Malformed(error))) => break CloseReason::Protocol(error.to_string()),
                Some(Err(FrameError::TooLarge { len, .. })) if tserver_proto::is_tls_record_start(len) => {
                    break CloseReason::Protocol(
                        "the server speaks TLS on this port: connect with its CA file or certificate (tclient --tls-ca FILE)".to_owned(),
                    );
                }
                Some(Err(error)) => break CloseReason::Transport(error.to_string()),
                None => break CloseReason::ServerClosed,
            }
        }
    };
    if matches!(reason, CloseReason::ClientClosed) && !lock(&shared.pending).is_empty() {
        // Every handle is gone with calls unanswered: nobody waits for their replies. A plain
        // close would look like a half-close to the server, which answers the calls it has
        // (the proto's rule); a reset tells it at once to stop spending model time on them.
        let _ = framed.get_ref().tcp().set_zero_linger();
    }
    // When the server said why it closed, that is the reason, whatever the socket did after.
    let _ = shared.close_reason.set(connection_error.unwrap_or(reason));
    // Refuse new requests first, then fail the waiting ones, so no call is left waiting.
    requests.close();
    lock(&shared.pending).clear();
    // Subscribers see the end: their streams return `None`.
    lock_subscribed(&shared.subscribed).clear();
    shared.closed.cancel();
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn the_host_of_an_address_is_what_a_certificate_names() {
        assert_eq!(host_of("127.0.0.1:3101"), "127.0.0.1");
        assert_eq!(host_of("[::1]:3101"), "::1");
        assert_eq!(host_of("plant-server:3101"), "plant-server");
        assert_eq!(host_of("plant-server"), "plant-server");
    }
}
