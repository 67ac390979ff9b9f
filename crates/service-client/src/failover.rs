//! `FailoverClient`: one logical connection over several TServer nodes (or HAProxy addresses).
//! When its node goes away it connects to the next address that answers, logs in again and
//! renews every subscription there, while calls wait for it.
//!
//! What moves and what does not (docs/DECISIONS.md, "Client failover"):
//! - A call that was sent when the connection broke may or may not have taken effect. Calls
//!   that change nothing (ping, reads, tool lists, subscribe, login) are sent again on the new
//!   connection; calls that may change something (chat, writes, tool calls, acknowledgements)
//!   fail with [`ClientError::ConnectionLost`]: the application decides whether to repeat them.
//!   A call the node refused unrun because it is shutting down is sent again, whatever it is.
//!   Calls made after the break wait for the new connection (within their call timeout).
//! - A chat transcript belongs to its connection (the spec), so the first chat turn after a
//!   failover starts a fresh one.
//! - A renewed subscription delivers the new node's current readings (and alarm states) as one
//!   [`TagUpdate`], so a panel redraws everything it shows from values no older than the move.
//! - A close the server explains (no login in time, a protocol error) is not a node going
//!   away: the client ends with that reason instead of trying the next address. A node
//!   shutting down (`SHUTTING_DOWN`) or full (`BUSY`) is moved away from. A refused login
//!   closes its connection as the protocol says; the client connects again and the
//!   application may log in again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tserver_proto::v1::{
    AlarmsReply, AlarmsRequest, BrowseReply, CallToolReply, ChatReply, ErrorCode, SubscribeReply,
    SubscribeRequest, TagHistoryReply, TagHistoryRequest, TagReading, TagUpdate, TagValuesAtReply, TagWrite,
    TagWriteResult, ToolInfo,
};

use crate::client::ChatStream;
use crate::{Client, ClientError, ClientOptions, CloseReason, Envelope, LoginInfo};

/// The longest pause between two rounds of reconnect attempts while no address answers.
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// The first such pause.
const FIRST_BACKOFF: Duration = Duration::from_millis(50);

/// A client that fails over between server addresses. Clones share the connection.
#[derive(Debug, Clone)]
pub struct FailoverClient {
    state: Arc<State>,
}

/// Where the logical connection is.
#[derive(Debug, Clone)]
enum Link {
    /// Connected to `addrs[addr]`; `generation` counts the connections made (1 for the first).
    Up {
        client: Client,
        addr: usize,
        generation: u64,
    },
    /// The connection of `generation` broke; the next is being looked for.
    Down { generation: u64, last_error: String },
    /// Ended for good: the server said why it closed, or every address refused the login.
    Ended(CloseReason),
}

/// A login to repeat on the next node. The password stays in this process's memory for as
/// long as the client lives: that is what logging in again without asking the operator takes.
#[derive(Clone)]
struct Login {
    user_name: String,
    password: String,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("user_name", &self.user_name)
            .finish_non_exhaustive()
    }
}

/// A subscription to renew on the next node.
#[derive(Debug)]
struct Renewable {
    request: SubscribeRequest,
    /// The application's end of the updates; it outlives every connection.
    updates: mpsc::UnboundedSender<TagUpdate>,
    /// The subscription's id on the current connection (its Subscribe call's).
    server_id: u64,
}

#[derive(Debug)]
struct State {
    addrs: Vec<String>,
    options: ClientOptions,
    login: Mutex<Option<Login>>,
    link: watch::Sender<Link>,
    subscriptions: Mutex<HashMap<u64, Renewable>>,
    next_subscription: AtomicU64,
    /// Held while subscriptions are made or renewed, so a subscribe racing a failover is
    /// renewed exactly once.
    renewing: tokio::sync::Mutex<()>,
    /// Cancelled when the last handle goes: the supervising task stops.
    dropped: CancellationToken,
}

impl Drop for State {
    fn drop(&mut self) {
        self.dropped.cancel();
    }
}

impl FailoverClient {
    /// Connects to the first of `addrs` that answers (without logging in). The error, when
    /// none does, names every address and why each failed.
    pub async fn connect<A: AsRef<str>>(addrs: &[A], options: ClientOptions) -> Result<Self, ClientError> {
        let addrs: Vec<String> = addrs.iter().map(|addr| addr.as_ref().to_owned()).collect();
        if addrs.is_empty() {
            return Err(ClientError::NoAddress);
        }
        let mut failures = Vec::new();
        for (index, addr) in addrs.iter().enumerate() {
            match Client::connect(addr.as_str(), options.clone()).await {
                Ok(client) => {
                    let closed = client.closed_signal();
                    let (link, _) = watch::channel(Link::Up {
                        client,
                        addr: index,
                        generation: 1,
                    });
                    let state = Arc::new(State {
                        addrs,
                        options,
                        login: Mutex::new(None),
                        link,
                        subscriptions: Mutex::new(HashMap::new()),
                        next_subscription: AtomicU64::new(1),
                        renewing: tokio::sync::Mutex::new(()),
                        dropped: CancellationToken::new(),
                    });
                    tokio::spawn(supervise(
                        Arc::downgrade(&state),
                        state.dropped.clone(),
                        closed,
                        index,
                        1,
                    ));
                    return Ok(Self { state });
                }
                Err(error) => failures.push(format!("{addr}: {error}")),
            }
        }
        Err(ClientError::Unreachable {
            tried: failures.join("; "),
        })
    }

    /// The address connected to now, if any.
    pub fn current_addr(&self) -> Option<&str> {
        match &*self.state.link.borrow() {
            Link::Up { addr, .. } => self.state.addrs.get(*addr).map(String::as_str),
            Link::Down { .. } | Link::Ended(_) => None,
        }
    }

    /// How many times the connection has moved (or been made again) since it was opened.
    pub fn failovers(&self) -> u64 {
        match &*self.state.link.borrow() {
            Link::Up { generation, .. } => generation - 1,
            Link::Down { generation, .. } => *generation,
            Link::Ended(_) => 0,
        }
    }

    /// Logs in, and again on every node moved to.
    #[crate::compiled_once]
    pub async fn login(&self, user_name: &str, password: &str) -> Result<LoginInfo, ClientError> {
        let info = self
            .run(Repeat::Yes, |client| async move {
                client.login(user_name, password).await
            })
            .await?;
        *lock(&self.state.login) = Some(Login {
            user_name: user_name.to_owned(),
            password: password.to_owned(),
        });
        Ok(info)
    }

    /// Logs out; the next node moved to is not logged in to.
    #[crate::compiled_once]
    pub async fn logout(&self) -> Result<(), ClientError> {
        *lock(&self.state.login) = None;
        self.run(Repeat::No, |client| async move { client.logout().await })
            .await
    }

    /// Round trip of a Ping.
    #[crate::compiled_once]
    pub async fn ping(&self) -> Result<Duration, ClientError> {
        self.run(Repeat::Yes, |client| async move { client.ping().await })
            .await
    }

    /// One chat turn; the envelope JSON as the server sent it.
    #[crate::compiled_once]
    pub async fn chat(&self, query: &str) -> Result<String, ClientError> {
        Ok(self.chat_reply(query).await?.reply_json)
    }

    /// One chat turn, the envelope parsed.
    #[crate::compiled_once]
    pub async fn chat_envelope(&self, query: &str) -> Result<Envelope, ClientError> {
        Ok(Envelope::from_json(&self.chat(query).await?)?)
    }

    /// One chat turn as the server sent it (see [`Client::chat_reply`]).
    #[crate::compiled_once]
    pub async fn chat_reply(&self, query: &str) -> Result<ChatReply, ClientError> {
        self.run(Repeat::No, |client| async move { client.chat_reply(query).await })
            .await
    }

    /// A streamed chat turn on the current connection (see [`Client::chat_stream`]); a
    /// failover while it streams ends it with [`ClientError::ConnectionLost`].
    #[crate::compiled_once]
    pub async fn chat_stream(&self, query: &str) -> Result<ChatStream, ClientError> {
        self.run(
            Repeat::No,
            |client| async move { client.chat_stream(query).await },
        )
        .await
    }

    /// The runtime tools this login may call now.
    #[crate::compiled_once]
    pub async fn list_tools(&self) -> Result<Vec<ToolInfo>, ClientError> {
        self.run(Repeat::Yes, |client| async move { client.list_tools().await })
            .await
    }

    /// Runs one runtime tool (see [`Client::call_tool`]); not repeated on another node.
    #[crate::compiled_once]
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: &serde_json::Value,
    ) -> Result<CallToolReply, ClientError> {
        self.run(Repeat::No, |client| async move {
            client.call_tool(name, arguments).await
        })
        .await
    }

    /// Current values of tags, one reading per name in order.
    #[crate::compiled_once]
    pub async fn read_tags(&self, names: &[&str]) -> Result<Vec<TagReading>, ClientError> {
        self.run(Repeat::Yes, |client| async move { client.read_tags(names).await })
            .await
    }

    /// Writes tag values (see [`Client::write_tags`]); not repeated on another node.
    #[crate::compiled_once]
    pub async fn write_tags(&self, writes: Vec<TagWrite>) -> Result<Vec<TagWriteResult>, ClientError> {
        self.write_tags_signed(writes, Vec::new()).await
    }

    /// As [`Client::write_tags_signed`]; not repeated on another node.
    #[crate::compiled_once]
    pub async fn write_tags_signed(
        &self,
        writes: Vec<TagWrite>,
        signatures: Vec<crate::Signature>,
    ) -> Result<Vec<TagWriteResult>, ClientError> {
        self.run(Repeat::No, |client| {
            let (writes, signatures) = (writes.clone(), signatures.clone());
            async move { client.write_tags_signed(writes, signatures).await }
        })
        .await
    }

    /// The proposals waiting for a decision on the node connected to (proposals live on the
    /// node that took them, as their connection does).
    #[crate::compiled_once]
    pub async fn list_proposals(&self) -> Result<crate::ListProposalsReply, ClientError> {
        self.run(Repeat::Yes, |client| async move { client.list_proposals().await })
            .await
    }

    /// Decides a proposal (see [`Client::decide_proposal`]); not repeated on another node.
    #[crate::compiled_once]
    pub async fn decide_proposal(
        &self,
        id: &str,
        decision: crate::Decision,
        comment: &str,
    ) -> Result<crate::DecideProposalReply, ClientError> {
        self.decide_proposal_signed(id, decision, comment, Vec::new())
            .await
    }

    /// As [`Client::decide_proposal_signed`]; not repeated on another node.
    #[crate::compiled_once]
    pub async fn decide_proposal_signed(
        &self,
        id: &str,
        decision: crate::Decision,
        comment: &str,
        signatures: Vec<crate::Signature>,
    ) -> Result<crate::DecideProposalReply, ClientError> {
        self.run(Repeat::No, |client| {
            let signatures = signatures.clone();
            async move {
                client
                    .decide_proposal_signed(id, decision, comment, signatures)
                    .await
            }
        })
        .await
    }

    /// Acknowledges an alarm; not repeated on another node.
    #[crate::compiled_once]
    pub async fn acknowledge_alarm(&self, alarm: &str) -> Result<bool, ClientError> {
        self.acknowledge_alarm_signed(alarm, Vec::new()).await
    }

    /// Acknowledges an alarm with the acknowledger's signature (see
    /// [`Client::acknowledge_alarm_signed`]); not repeated on another node.
    #[crate::compiled_once]
    pub async fn acknowledge_alarm_signed(
        &self,
        alarm: &str,
        signatures: Vec<crate::Signature>,
    ) -> Result<bool, ClientError> {
        self.run(Repeat::No, |client| {
            let signatures = signatures.clone();
            async move { client.acknowledge_alarm_signed(alarm, signatures).await }
        })
        .await
    }

    /// Changes how an alarm is handled (see [`Client::handle_alarm`]); not repeated on another
    /// node.
    #[crate::compiled_once]
    pub async fn handle_alarm(
        &self,
        request: crate::HandleAlarmRequest,
    ) -> Result<crate::HandleAlarmReply, ClientError> {
        self.run(Repeat::No, |client| {
            let request = request.clone();
            async move { client.handle_alarm(request).await }
        })
        .await
    }

    /// How the alarm system performed over a window (see [`Client::alarm_report`]).
    #[crate::compiled_once]
    pub async fn alarm_report(
        &self,
        request: crate::AlarmReportRequest,
    ) -> Result<crate::AlarmReportReply, ClientError> {
        self.run(
            Repeat::Yes,
            |client| async move { client.alarm_report(request).await },
        )
        .await
    }

    /// The direct children of a UNS folder (see [`Client::browse`]).
    #[crate::compiled_once]
    pub async fn browse(&self, folder: &str) -> Result<BrowseReply, ClientError> {
        self.run(Repeat::Yes, |client| async move { client.browse(folder).await })
            .await
    }

    /// A tag's recorded history over a window (see [`Client::tag_history`]).
    #[crate::compiled_once]
    pub async fn tag_history(&self, request: TagHistoryRequest) -> Result<TagHistoryReply, ClientError> {
        self.run(Repeat::Yes, |client| {
            let request = request.clone();
            async move { client.tag_history(request).await }
        })
        .await
    }

    /// What the named tags were at a past instant (see [`Client::tag_values_at`]).
    #[crate::compiled_once]
    pub async fn tag_values_at(&self, names: &[String], at_ms: i64) -> Result<TagValuesAtReply, ClientError> {
        self.run(Repeat::Yes, |client| async move {
            client.tag_values_at(names, at_ms).await
        })
        .await
    }

    /// The alarms not normal, and the history when asked (see [`Client::alarms`]).
    #[crate::compiled_once]
    pub async fn alarms(&self, request: AlarmsRequest) -> Result<AlarmsReply, ClientError> {
        self.run(Repeat::Yes, |client| async move { client.alarms(request).await })
            .await
    }

    /// Empties the chat transcript of the current connection (see [`Client::chat_clear`]).
    /// A connection to another node starts with an empty one anyway.
    #[crate::compiled_once]
    pub async fn chat_clear(&self) -> Result<bool, ClientError> {
        self.run(Repeat::Yes, |client| async move { client.chat_clear().await })
            .await
    }

    /// Subscribes to tag changes; the subscription is renewed on every node moved to.
    #[crate::compiled_once]
    pub async fn subscribe(&self, request: SubscribeRequest) -> Result<FailoverSubscription, ClientError> {
        let (sender, updates) = mpsc::unbounded_channel();
        let mut after = 0;
        let mut repeated = false;
        loop {
            let (client, generation) = self.connected(after).await?;
            let renewing = self.state.renewing.lock().await;
            if !self.is_current(generation) {
                // It moved while this waited: subscribe on the new connection.
                drop(renewing);
                after = generation;
                continue;
            }
            match client.subscribe_into(request.clone(), sender.clone()).await {
                Ok((server_id, initial)) => {
                    let id = self.state.next_subscription.fetch_add(1, Ordering::Relaxed);
                    lock(&self.state.subscriptions).insert(
                        id,
                        Renewable {
                            request,
                            updates: sender,
                            server_id,
                        },
                    );
                    return Ok(FailoverSubscription {
                        id,
                        initial,
                        updates,
                        client: self.clone(),
                    });
                }
                Err(error) if !repeated && repeatable(&error, Repeat::Yes) => {
                    drop(renewing);
                    repeated = true;
                    after = generation;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// The current connection, waiting for one while the client fails over (within the call
    /// timeout). For calls this type does not wrap; they do not move with the client.
    #[crate::compiled_once]
    pub async fn client(&self) -> Result<Client, ClientError> {
        Ok(self.connected(0).await?.0)
    }

    /// Runs `call` on the current connection; when the node refused it because it is shutting
    /// down, or the connection broke under a call that changes nothing (`Repeat::Yes`), once
    /// more on the next connection.
    async fn run<T, F>(&self, repeat: Repeat, call: impl Fn(Client) -> F) -> Result<T, ClientError>
    where
        F: Future<Output = Result<T, ClientError>>,
    {
        let (client, generation) = self.connected(0).await?;
        match call(client).await {
            Err(error) if repeatable(&error, repeat) => {
                let (client, _) = self.connected(generation).await?;
                call(client).await
            }
            other => other,
        }
    }

    fn is_current(&self, generation: u64) -> bool {
        matches!(&*self.state.link.borrow(), Link::Up { generation: current, .. } if *current == generation)
    }

    /// Waits (within the call timeout) for a connection newer than `after`.
    async fn connected(&self, after: u64) -> Result<(Client, u64), ClientError> {
        let mut link = self.state.link.subscribe();
        let ready = |link: &Link| match link {
            Link::Up { generation, .. } => *generation > after,
            Link::Down { .. } => false,
            Link::Ended(_) => true,
        };
        let waited = tokio::time::timeout(self.state.options.call_timeout, link.wait_for(ready)).await;
        match waited {
            Ok(Ok(link)) => match &*link {
                Link::Up {
                    client, generation, ..
                } => Ok((client.clone(), *generation)),
                Link::Ended(reason) => Err(ClientError::ConnectionLost {
                    reason: reason.clone(),
                }),
                Link::Down { .. } => Err(self.unreachable()),
            },
            // The sender lives in the state this handle holds: it cannot be gone.
            Ok(Err(_)) => Err(ClientError::ConnectionLost {
                reason: CloseReason::ClientClosed,
            }),
            Err(_) => Err(self.unreachable()),
        }
    }

    fn unreachable(&self) -> ClientError {
        let last = match &*self.state.link.borrow() {
            Link::Down { last_error, .. } => last_error.clone(),
            Link::Up { .. } | Link::Ended(_) => "a newer connection was not made in time".to_owned(),
        };
        ClientError::Unreachable {
            tried: format!("{} (last: {last})", self.state.addrs.join(", ")),
        }
    }
}

/// Whether a call may be sent again on another node after the connection broke under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Repeat {
    Yes,
    No,
}

/// Whether a call that failed with `error` may be sent on the next connection: the node refused
/// it unrun because it is shutting down, or the connection broke under a call that changes
/// nothing.
fn repeatable(error: &ClientError, repeat: Repeat) -> bool {
    match error {
        ClientError::Server {
            code: ErrorCode::ShuttingDown,
            ..
        } => true,
        ClientError::ConnectionLost { reason } => repeat == Repeat::Yes && moves_on(reason),
        _ => false,
    }
}

/// Whether a connection that ended for `reason` is a node going away (move on), rather than a
/// close the server explained or the client made.
fn moves_on(reason: &CloseReason) -> bool {
    match reason {
        CloseReason::ServerClosed | CloseReason::Transport(_) => true,
        CloseReason::Server { code, .. } => matches!(code, ErrorCode::ShuttingDown | ErrorCode::Busy),
        CloseReason::ClientClosed | CloseReason::Protocol(_) => false,
    }
}

/// Watches the connection and, when its node goes away, makes the next one: tries each address
/// once in turn (starting after the one that went away), then pauses (50 ms doubling to 2 s)
/// and tries again, until one answers or every handle is gone.
async fn supervise(
    state: Weak<State>,
    dropped: CancellationToken,
    mut closed: CancellationToken,
    mut addr: usize,
    mut generation: u64,
) {
    loop {
        tokio::select! {
            () = dropped.cancelled() => return,
            () = closed.cancelled() => {}
        }
        let Some(strong) = state.upgrade() else { return };
        let reason = match &*strong.link.borrow() {
            Link::Up { client, .. } => client.close_reason().unwrap_or(CloseReason::ServerClosed),
            Link::Down { .. } | Link::Ended(_) => CloseReason::ServerClosed,
        };
        if !moves_on(&reason) {
            end(&strong, reason);
            return;
        }
        tracing::info!(addr = %strong.addrs[addr], %reason, "connection lost; failing over");
        strong.link.send_replace(Link::Down {
            generation,
            last_error: reason.to_string(),
        });
        drop(strong);
        let mut backoff = FIRST_BACKOFF;
        loop {
            let Some(strong) = state.upgrade() else { return };
            match reconnect(&strong, addr + 1, generation + 1).await {
                Ok(Reconnected::Up { index, signal }) => {
                    addr = index;
                    generation += 1;
                    closed = signal;
                    break;
                }
                Ok(Reconnected::Refused(reason)) => {
                    end(&strong, reason);
                    return;
                }
                Err(last_error) => {
                    strong.link.send_replace(Link::Down {
                        generation,
                        last_error,
                    });
                }
            }
            drop(strong);
            tokio::select! {
                () = dropped.cancelled() => return,
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}

/// Ends the client: calls get `reason`, subscriptions end.
fn end(state: &State, reason: CloseReason) {
    state.link.send_replace(Link::Ended(reason));
    lock(&state.subscriptions).clear();
}

/// What one round over the addresses gave.
enum Reconnected {
    /// Connected, logged in and subscribed again at `addrs[index]`.
    Up { index: usize, signal: CancellationToken },
    /// Every address answered and refused the login: nothing to move to.
    Refused(CloseReason),
}

/// One round: each address once, starting at `start`; the connection found becomes
/// `generation`. `Err` holds why the last address failed.
async fn reconnect(state: &State, start: usize, generation: u64) -> Result<Reconnected, String> {
    let count = state.addrs.len();
    let mut last_error = String::new();
    let mut refusals = 0;
    for offset in 0..count {
        let index = (start + offset) % count;
        let addr = &state.addrs[index];
        let client = match Client::connect(addr.as_str(), state.options.clone()).await {
            Ok(client) => client,
            Err(error) => {
                last_error = format!("{addr}: {error}");
                continue;
            }
        };
        let login = lock(&state.login).clone();
        if let Some(login) = login {
            match client.login(&login.user_name, &login.password).await {
                Ok(_) => {}
                Err(error) => {
                    if error.server_code().is_some_and(|code| {
                        matches!(code, ErrorCode::LoginFailed | ErrorCode::LoginThrottled)
                    }) {
                        refusals += 1;
                    }
                    last_error = format!("{addr}: {error}");
                    continue;
                }
            }
        }
        let renewing = state.renewing.lock().await;
        if let Err(error) = renew_subscriptions(state, &client).await {
            last_error = format!("{addr}: {error}");
            continue;
        }
        let signal = client.closed_signal();
        state.link.send_replace(Link::Up {
            client,
            addr: index,
            generation,
        });
        drop(renewing);
        tracing::info!(%addr, generation, "connected again");
        return Ok(Reconnected::Up { index, signal });
    }
    if refusals == count {
        return Ok(Reconnected::Refused(CloseReason::Server {
            code: ErrorCode::LoginFailed,
            message: format!("every server refused the login again ({last_error})"),
        }));
    }
    Err(last_error)
}

/// Subscribes again on `client` for every subscription the application still reads; each
/// gets the new node's current readings as one update.
async fn renew_subscriptions(state: &State, client: &Client) -> Result<(), ClientError> {
    let renewable: Vec<(u64, SubscribeRequest, mpsc::UnboundedSender<TagUpdate>)> = {
        let mut subscriptions = lock(&state.subscriptions);
        // A subscription dropped without unsubscribing is not renewed.
        subscriptions.retain(|_, renewable| !renewable.updates.is_closed());
        subscriptions
            .iter()
            .map(|(id, renewable)| (*id, renewable.request.clone(), renewable.updates.clone()))
            .collect()
    };
    for (id, request, updates) in renewable {
        let watches_proposals = request.proposals;
        let (server_id, initial) = client.subscribe_into(request, updates.clone()).await?;
        let _ = updates.send(TagUpdate {
            readings: initial.readings,
            skipped: 0,
            alarms: initial.alarms,
            // Another node keeps other proposals.
            proposals_changed: watches_proposals,
        });
        if let Some(renewable) = lock(&state.subscriptions).get_mut(&id) {
            renewable.server_id = server_id;
        }
    }
    Ok(())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Each guarded value is replaced or edited in one step: a poisoned lock is still whole.
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A subscription that moves with its [`FailoverClient`]: after a failover its next update
/// holds every tag's reading on the new node.
#[derive(Debug)]
pub struct FailoverSubscription {
    id: u64,
    initial: SubscribeReply,
    updates: mpsc::UnboundedReceiver<TagUpdate>,
    client: FailoverClient,
}

impl FailoverSubscription {
    /// The readings (and alarm states) when it started.
    pub fn initial(&self) -> &SubscribeReply {
        &self.initial
    }

    /// The next update; `None` once the client has ended.
    #[crate::compiled_once]
    pub async fn next_update(&mut self) -> Option<TagUpdate> {
        self.updates.recv().await
    }

    /// Stops the subscription; whether the server still had it.
    #[crate::compiled_once]
    pub async fn unsubscribe(self) -> Result<bool, ClientError> {
        let renewable = lock(&self.client.state.subscriptions).remove(&self.id);
        let Some(renewable) = renewable else {
            return Ok(false);
        };
        let server_id = renewable.server_id;
        self.client
            .run(Repeat::No, |client| async move {
                client.unsubscribe_id(server_id).await
            })
            .await
    }
}

/// The updates as a stream (what [`FailoverSubscription::next_update`] gives, one by one).
impl futures::Stream for FailoverSubscription {
    type Item = TagUpdate;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<TagUpdate>> {
        self.updates.poll_recv(context)
    }
}
