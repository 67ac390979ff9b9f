//! `Session`: one client connection's state machine, from accept to close.
//!
//! The session owns the connection and runs one loop over four events: a frame from the
//! client, the end of a call in flight, the connection's deadline (login or idle), and server
//! shutdown. Quick calls (Hello, Ping, Logout, ReadTags) are answered inline; Chat (and the
//! other calls that wait on something) runs beside the loop, in the connection's own task, so
//! many turns can be in flight, each holding its in-flight permit until its reply is queued,
//! so the count of calls in flight is exact.
//!
//! Why not a task per call: handing a reply from another task back to the connection's task
//! wakes it while tokio's LIFO slot holds the model connection's task (woken by the reply's
//! last body read), so the scheduler also woke the idle worker thread for every turn, which
//! then found nothing to do and slept again (docs/DECISIONS.md).

use std::panic::AssertUnwindSafe;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use tserver_proto::v1::{ClientFrame, ErrorCode, ServerFrame, server_frame};
use tserver_proto::{Decoded, FrameError};

use super::connection::{Connection, WriteError};
use super::shared::Shared;
use super::waiting::Seat;
use super::websocket_quota::{AddressTicket, UserTicket, WebSocketQuotaRefusal};
use crate::auth::{LoginStanding, UserFingerprints};
use crate::calls::to_proto::{CallError, error_frame, reply};
use crate::calls::{self, Apply, Call, CallState, Work};
use crate::telemetry::OpenConnection;

/// How long last words (an error frame before a close) may take to send.
const FINAL_WRITE_LIMIT: Duration = Duration::from_secs(1);

/// How long a closing connection keeps reading (and dropping) input so its last frames are
/// not destroyed by a reset.
const CLOSE_LINGER: Duration = Duration::from_secs(1);

/// The reply of a call that ran beside the loop, with the permit it held.
#[derive(Debug)]
struct CallReply {
    frame: ServerFrame,
    _permit: OwnedSemaphorePermit,
}

/// Why the loop ended.
#[derive(Debug)]
enum Close {
    /// The client closed its side.
    ClientClosed,
    /// Reading or writing failed.
    Transport(String),
    /// A frame's length prefix exceeded the limit.
    FrameTooLarge(FrameError),
    /// Hello failed; its error reply has been queued.
    LoginFailed,
    /// No Hello within the login deadline.
    LoginDeadline,
    /// More frames than allowed before logging in.
    TooChattyBeforeLogin,
    /// Logged out while every seat for connections not logged in is taken by one saying Hello.
    NoLoginSlot,
    /// A newcomer took this connection's seat: it had not said Hello and waited longest.
    Evicted,
    /// Nothing happened for the idle timeout.
    Idle,
    /// The logged-in user was removed, or its password changed, by an admin.
    LoginRevoked(LoginStanding),
    /// Shutdown finished draining this connection's calls.
    Drained,
    /// The shutdown grace period ran out.
    HardStop,
}

/// A call in flight: its work, then its reply.
type CallInFlight = Pin<Box<dyn Future<Output = CallReply> + Send>>;

/// Completes when this connection's waiting-room seat was taken; pending while logged in.
async fn seat_evicted(seat: &Option<Seat>) {
    match seat {
        Some(seat) => seat.evicted().await,
        None => std::future::pending().await,
    }
}

/// Waits for the users table to change, and hands the receiver back for the next wait with
/// whether the table can still change.
async fn users_changed(
    mut users: tokio::sync::watch::Receiver<Arc<UserFingerprints>>,
) -> (tokio::sync::watch::Receiver<Arc<UserFingerprints>>, bool) {
    let open = users.changed().await.is_ok();
    (users, open)
}

/// Completes when a browser login ended on this server, or when the recheck period passed
/// (the login may have ended on another node, or reached its lifetime); hands the receiver
/// back for the next wait.
async fn browser_login_may_have_ended(
    mut logouts: tokio::sync::watch::Receiver<u64>,
) -> tokio::sync::watch::Receiver<u64> {
    let period = crate::auth::BROWSER_LOGIN_RECHECK;
    if let Ok(Err(_)) = tokio::time::timeout(period, logouts.changed()).await {
        // The sender is gone (the server is stopping): only the period is left to wait for.
        tokio::time::sleep(period).await;
    }
    logouts
}

/// The reply of the next call in flight to end; pending while none is in flight.
///
/// Every call is polled at each wake: they are few (at most the in-flight cap), and
/// `FuturesUnordered` wakes its task again whenever it has polled all of its futures, which
/// tokio takes for a yield and answers by waking an idle worker to look for work.
fn next_reply(calls: &mut Vec<CallInFlight>) -> impl Future<Output = CallReply> + '_ {
    std::future::poll_fn(move |cx| {
        for index in 0..calls.len() {
            if let Poll::Ready(reply) = calls[index].as_mut().poll(cx) {
                drop(calls.swap_remove(index));
                return Poll::Ready(reply);
            }
        }
        Poll::Pending
    })
}

/// The permits a new connection was admitted with.
#[derive(Debug)]
pub(crate) struct Slots {
    /// Its slot under the connection cap.
    pub(crate) connection: OwnedSemaphorePermit,
    /// Its seat among the connections not logged in.
    pub(crate) seat: Seat,
    /// A WebSocket's place among the WebSockets (none on TCP).
    pub(crate) websocket: Option<AddressTicket>,
    /// Its count among the open connections.
    pub(crate) open: OpenConnection,
}

pub(crate) struct Session {
    shared: Arc<Shared>,
    connection: Connection,
    /// What the connection's calls keep: who is logged in, the chat turns streaming, the
    /// subscriptions.
    calls: CallState,
    /// One permit per call in flight; its size is the in-flight cap.
    in_flight: Arc<Semaphore>,
    /// The calls in flight, polled by this connection's loop.
    ongoing_calls: Vec<CallInFlight>,
    /// Graceful shutdown of the server: stop taking calls, finish those in flight.
    shutdown: CancellationToken,
    /// Cancelled when this connection ends, or at the end of the server's grace period (a
    /// child of its hard stop): stop now.
    ended: CancellationToken,
    draining: bool,
    last_activity: Instant,
    login_deadline: Instant,
    /// Set when login state changes, so the deadline timer is re-armed.
    deadline_moved: bool,
    /// The client shut its sending side while calls were in flight: their replies are still
    /// delivered, then the connection closes.
    half_closed: bool,
    /// Frames received since the connection opened or logged out, while not logged in.
    frames_before_login: u32,
    /// This connection's seat among those not logged in; `None` once logged in.
    seat: Option<Seat>,
    /// The `Users` table, sent again when it changes: the login is checked against it.
    users: tokio::sync::watch::Receiver<Arc<UserFingerprints>>,
    /// Holds this connection's slot under the connection cap until the session is dropped.
    _connection_permit: OwnedSemaphorePermit,
    /// Counts this connection among the open ones until the session is dropped.
    _open: OpenConnection,
    /// A WebSocket's place among the WebSockets, from its address (none on TCP).
    websocket: Option<AddressTicket>,
    /// A logged-in WebSocket's place among its user's.
    websocket_user: Option<UserTicket>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("context", &self.calls.context)
            .finish_non_exhaustive()
    }
}

impl Session {
    pub(crate) fn new(
        shared: Arc<Shared>,
        connection: Connection,
        calls: CallState,
        shutdown: CancellationToken,
        hard_stop: &CancellationToken,
        slots: Slots,
    ) -> Self {
        let cap = shared.config.max_calls_in_flight;
        let now = Instant::now();
        let login_deadline = now + shared.config.login_timeout;
        Self {
            connection,
            calls,
            in_flight: Arc::new(Semaphore::new(cap)),
            ongoing_calls: Vec::new(),
            shutdown,
            ended: hard_stop.child_token(),
            draining: false,
            last_activity: now,
            login_deadline,
            deadline_moved: false,
            half_closed: false,
            frames_before_login: 0,
            seat: Some(slots.seat),
            users: shared.auth.users(),
            _connection_permit: slots.connection,
            _open: slots.open,
            websocket: slots.websocket,
            websocket_user: None,
            shared,
        }
    }

    /// Serves the connection until it closes, then releases everything it held.
    ///
    /// An `async move` block rather than an `async fn`: an `async fn` taking `mut self` keeps
    /// the session twice in its future (the argument, and the `mut` binding it is moved into),
    /// and this future is each connection's task, idle or not, for as long as it is open.
    #[expect(
        clippy::manual_async_fn,
        reason = "an async fn would hold the session twice in every connection's task"
    )]
    pub(crate) fn run(mut self) -> impl Future<Output = ()> {
        async move {
            // The server runs this inside the connection's span.
            self.calls.login_log.connection_span = tracing::Span::current();
            let close = self.serve().await;
            // The calls still in flight stop here: nobody will read their replies.
            self.ongoing_calls = Vec::new();
            self.ended.cancel();
            self.shared
                .runtime
                .local_ai()
                .connection_closed(self.calls.context.guid);
            // Proposals never outlive the connection that asked for them.
            self.shared
                .runtime
                .proposals()
                .connection_closed(self.calls.context.guid);
            let last_words = self.last_words(&close);
            // Whatever is still queued (a refused login's reply, the last replies of a drain) goes
            // out first, then the reason for closing, each bounded so a stalled client cannot hold us.
            let _ = tokio::time::timeout(FINAL_WRITE_LIMIT, self.connection.flush()).await;
            if let Some((code, message)) = last_words {
                self.connection
                    .send_final(error_frame(0, code, message), FINAL_WRITE_LIMIT)
                    .await;
            }
            if !matches!(close, Close::ClientClosed | Close::Transport(_)) {
                self.connection.close_gracefully(CLOSE_LINGER).await;
            }
            match &close {
                Close::Transport(error) => tracing::debug!(%error, "connection failed"),
                close => tracing::debug!(reason = ?close, "connection closed"),
            }
        }
    }

    /// What the client is told when the connection closes for `close`, if anything.
    fn last_words(&self, close: &Close) -> Option<(ErrorCode, String)> {
        match close {
            Close::FrameTooLarge(FrameError::TooLarge { len, .. })
                if tserver_proto::is_tls_record_start(*len) =>
            {
                // Routine for a misconfigured panel, not news: debug, and said to the client.
                tracing::debug!("a client spoke TLS to this plain port");
                Some((
                    ErrorCode::FrameTooLarge,
                    "this port speaks plain TCP, not TLS: connect without a CA file, or to the TLS port"
                        .to_owned(),
                ))
            }
            Close::FrameTooLarge(FrameError::TooLarge { len, .. })
                if crate::proxy::is_proxy_header_start(*len) =>
            {
                // Only a trusted proxy's header is read as one: from anyone else it is refused.
                if self.shared.proxy_refusal_may_log() {
                    tracing::warn!(
                        "a PROXY protocol header from an address not given as --trusted-proxy; closing"
                    );
                }
                Some((
                    ErrorCode::FrameTooLarge,
                    "a PROXY protocol header is accepted only from a trusted proxy (tserver serve --trusted-proxy)"
                        .to_owned(),
                ))
            }
            Close::FrameTooLarge(error) => Some((ErrorCode::FrameTooLarge, error.to_string())),
            Close::LoginDeadline => Some((
                ErrorCode::Unauthenticated,
                format!("no Hello within {:?}; closing", self.shared.config.login_timeout),
            )),
            Close::Drained | Close::HardStop => {
                Some((ErrorCode::ShuttingDown, "the server is shutting down".to_owned()))
            }
            Close::TooChattyBeforeLogin => Some((
                ErrorCode::Unauthenticated,
                format!(
                    "more than {} frames before logging in; closing",
                    self.shared.config.max_frames_before_login
                ),
            )),
            Close::Evicted => Some((
                ErrorCode::Busy,
                format!(
                    "too many connections waiting to log in (limit {}); the longest silent one is closed",
                    self.shared.config.max_unauthenticated
                ),
            )),
            Close::NoLoginSlot => Some((
                ErrorCode::Busy,
                format!(
                    "too many connections waiting to log in (limit {}); closing",
                    self.shared.config.max_unauthenticated
                ),
            )),
            Close::LoginRevoked(standing) => Some((
                ErrorCode::Unauthenticated,
                match standing {
                    LoginStanding::Removed => "the user was removed; closing",
                    LoginStanding::BrowserLoginEnded => {
                        "the browser login ended (logged out, or past its lifetime); log in again"
                    }
                    _ => "the user's password or role was changed; log in again",
                }
                .to_owned(),
            )),
            Close::LoginFailed | Close::ClientClosed | Close::Transport(_) | Close::Idle => None,
        }
    }

    async fn serve(&mut self) -> Close {
        let mut deadline = pin!(sleep_until(self.next_deadline()));
        // Made once and polled again on every turn of the loop: a fresh `cancelled()` or
        // `changed()` each turn would register with (and leave) its token's or channel's
        // waiter list at every frame. The hard stop is watched through `ended`, this
        // connection's child of it (cancelled by nothing else while this loop runs), because a
        // poll locks its token: a child's lock is this connection's alone, where the server's
        // is taken by every connection on every core.
        let mut hard_stop = pin!(self.ended.clone().cancelled_owned());
        let mut shutdown = pin!(self.shutdown.clone().cancelled_owned());
        let mut users_change = pin!(users_changed(self.users.clone()));
        let mut users_open = true;
        let mut browser_check = pin!(browser_login_may_have_ended(self.shared.auth.browser_logouts()));
        loop {
            if self.draining && self.calls_in_flight() == 0 {
                // Calls that already arrived are answered too, so none goes unanswered.
                while let Some(frame) = self.connection.take_buffered_frame() {
                    let call_id = match frame {
                        Decoded::Message(frame) => frame.call_id,
                        Decoded::Malformed(_) => 0,
                    };
                    let refusal =
                        error_frame(call_id, ErrorCode::ShuttingDown, "the server is shutting down");
                    if self.queue(refusal).await.is_err() {
                        break;
                    }
                }
                return Close::Drained;
            }
            if self.half_closed && self.calls_in_flight() == 0 {
                return Close::ClientClosed;
            }
            tokio::select! {
                biased;
                () = &mut hard_stop => return Close::HardStop,
                () = seat_evicted(&self.seat) => return Close::Evicted,
                () = &mut shutdown, if !self.draining => {
                    self.draining = true;
                }
                (mut receiver, open) = &mut users_change, if users_open && self.calls.logged_in() => {
                    users_open = open;
                    let users = Arc::clone(&receiver.borrow_and_update());
                    users_change.set(users_changed(receiver));
                    if let Some(login) = &self.calls.context.login {
                        let standing = self.shared.auth.recheck(login, &users).await;
                        if standing != LoginStanding::Valid {
                            tracing::info!(?standing, "login revoked by an admin change");
                            return Close::LoginRevoked(standing);
                        }
                    }
                }
                receiver = &mut browser_check, if self.calls.context.by_browser => {
                    browser_check.set(browser_login_may_have_ended(receiver));
                    if let Some(token) = &self.calls.context.browser
                        && let Ok(None) = self.shared.auth.browser_login(token).await
                    {
                        tracing::info!("login ended with the browser login it was made with");
                        return Close::LoginRevoked(LoginStanding::BrowserLoginEnded);
                    }
                }
                reply = next_reply(&mut self.ongoing_calls) => {
                    // Boxed: the largest await of this loop, and an idle connection should
                    // not carry room for it (per-connection memory).
                    if let Err(error) = Box::pin(self.write_replies(reply)).await {
                        return Close::Transport(error.to_string());
                    }
                }
                () = self.calls.chat_streams.ready() => {
                    if let Err(error) = self.write_progress().await {
                        return Close::Transport(error.to_string());
                    }
                }
                Some(update) = self.calls.subscriptions.next_frame() => {
                    self.last_activity = Instant::now();
                    // `update`'s turn passes back to its subscription once it is written.
                    if let Err(error) = self.answer(update.frame).await {
                        return Close::Transport(error.to_string());
                    }
                }
                frame = self.connection.read_frame() => {
                    self.last_activity = Instant::now();
                    if !self.calls.logged_in() && matches!(frame, Some(Ok(_))) {
                        // Before login a client gets a handful of frames, whatever they are.
                        self.frames_before_login += 1;
                        if self.frames_before_login > self.shared.config.max_frames_before_login {
                            return Close::TooChattyBeforeLogin;
                        }
                    }
                    let result = match frame {
                        // A client that only shut its sending side still gets every reply
                        // (the proto's rule); one that is gone shows up as a reset.
                        None if self.calls_in_flight() > 0 => {
                            self.half_closed = true;
                            Ok(())
                        }
                        None => return Close::ClientClosed,
                        Some(Err(error @ FrameError::TooLarge { .. })) => return Close::FrameTooLarge(error),
                        Some(Err(FrameError::Io(error))) => return Close::Transport(error.to_string()),
                        Some(Ok(Decoded::Malformed(error))) => {
                            let message = format!("the frame is not a valid ClientFrame: {error}");
                            self.answer(error_frame(0, ErrorCode::MalformedFrame, message)).await
                        }
                        Some(Ok(Decoded::Message(frame))) => {
                            let span = self.calls.login_log.span.clone();
                            // Boxed: the dispatch of any call is a large future, and an idle
                            // connection should not carry room for it (per-connection memory).
                            match Box::pin(self.dispatch(frame)).instrument(span).await {
                                Ok(Some(close)) => return close,
                                Ok(None) => Ok(()),
                                Err(error) => Err(error),
                            }
                        }
                    };
                    if let Err(error) = result {
                        return Close::Transport(error.to_string());
                    }
                }
                () = &mut deadline => {
                    let now = Instant::now();
                    if !self.calls.logged_in() && now >= self.login_deadline {
                        return Close::LoginDeadline;
                    }
                    if self.calls_in_flight() == 0 && now >= self.last_activity + self.shared.config.idle_timeout {
                        return Close::Idle;
                    }
                    self.deadline_moved = true;
                }
            }
            if std::mem::take(&mut self.deadline_moved) {
                deadline.as_mut().reset(self.next_deadline());
            }
        }
    }

    /// Handles one call. Returns `Some` when the connection must close.
    async fn dispatch(&mut self, frame: ClientFrame) -> Result<Option<Close>, WriteError> {
        let (call_id, call) = Call::parse(frame);
        let call = match call {
            Ok(call) => call,
            Err(unknown) => {
                self.answer(reply(call_id, unknown.into_body())).await?;
                return Ok(None);
            }
        };
        if self.draining {
            self.answer(error_frame(
                call_id,
                ErrorCode::ShuttingDown,
                "the server is shutting down",
            ))
            .await?;
            return Ok(None);
        }
        if call.is_hello() {
            // Saying Hello keeps the connection's seat while its login is checked.
            if let Some(seat) = &self.seat {
                seat.hello_received();
            }
        } else if !self.calls.logged_in() {
            self.answer(error_frame(
                call_id,
                ErrorCode::Unauthenticated,
                "log in with Hello first",
            ))
            .await?;
            return Ok(None);
        }
        let kind = call.kind();
        let scope = calls::CallScope {
            runtime: &self.shared.runtime,
            auth: &self.shared.auth,
            connection_ended: &self.ended,
        };
        match self.calls.apply(call_id, call, scope).await {
            Apply::Now(body) => self.answer_call(kind, call_id, body).await?,
            Apply::Later { work, cancel } => match self.start_call(call_id, kind, work) {
                Ok(()) => {
                    if let Some(cancel) = cancel {
                        self.calls.started(call_id, cancel);
                    }
                }
                Err(busy) => {
                    if cancel.is_some() {
                        self.calls.refused(call_id);
                    }
                    self.answer(busy).await?;
                }
            },
            Apply::LoggedIn(body) => {
                if let Err(refused) = self.websocket_logged_in() {
                    self.queue(error_frame(call_id, ErrorCode::Busy, refused.to_string()))
                        .await?;
                    return Ok(Some(Close::LoginFailed));
                }
                self.deadline_moved = true;
                self.seat = None;
                self.connection.set_max_frame(self.shared.config.max_frame);
                self.answer(reply(call_id, body)).await?;
            }
            Apply::LoggedOut(body) => {
                self.websocket_user = None;
                self.frames_before_login = 0;
                self.login_deadline = Instant::now() + self.shared.config.login_timeout;
                self.deadline_moved = true;
                self.connection
                    .set_max_frame(self.shared.config.login_frame_limit());
                self.answer_call(kind, call_id, body).await?;
                match self.shared.waiting.enter() {
                    Some(seat) => self.seat = Some(seat),
                    None => return Ok(Some(Close::NoLoginSlot)),
                }
            }
            Apply::Close(body) => {
                self.queue(reply(call_id, body)).await?;
                return Ok(Some(Close::LoginFailed));
            }
        }
        Ok(None)
    }

    /// A WebSocket that just logged in takes its place among its user's WebSockets (the one of
    /// a previous login given back first); a TCP connection has nothing to take.
    fn websocket_logged_in(&mut self) -> Result<(), WebSocketQuotaRefusal> {
        if self.websocket.is_none() {
            return Ok(());
        }
        self.websocket_user = None;
        if let Some(login) = &self.calls.context.login {
            self.websocket_user = Some(self.shared.websockets.log_in(&login.name)?);
        }
        Ok(())
    }

    /// Puts `work` in flight as call `call_id`, or gives back the `busy` refusal to answer.
    /// Not async: `work` (a large future for some calls) comes boxed and is never held in
    /// the connection's own future, which stays small for every call. When the connection
    /// ends, its calls in flight are dropped unfinished (the client is gone or the server
    /// stopped).
    fn start_call(&mut self, call_id: u64, call: &'static str, work: Work) -> Result<(), ServerFrame> {
        let Ok(permit) = Arc::clone(&self.in_flight).try_acquire_owned() else {
            let message = format!(
                "too many calls in flight on this connection (limit {})",
                self.shared.config.max_calls_in_flight
            );
            return Err(error_frame(call_id, ErrorCode::Busy, message));
        };
        // At info level, so every line a call logs (at any level) carries its call id.
        let span = tracing::info_span!("call", call_id, call);
        let call = async move {
            // A panic stays this call's: it answers `internal`, and the connection and its
            // other calls go on (as they did when each call was a task of its own).
            let body = match AssertUnwindSafe(work).catch_unwind().await {
                Ok(body) => body,
                Err(_) => {
                    tracing::error!("the call panicked");
                    CallError::new(ErrorCode::Internal, "internal error: the call panicked").into_body()
                }
            };
            crate::telemetry::count_call(call, &body);
            CallReply {
                frame: reply(call_id, body),
                _permit: permit,
            }
        };
        self.ongoing_calls.push(Box::pin(call.instrument(span)));
        Ok(())
    }

    /// Answers call `call_id` (a `kind` call) with `body` at once, counting it.
    async fn answer_call(
        &mut self,
        kind: &'static str,
        call_id: u64,
        body: server_frame::Body,
    ) -> Result<(), WriteError> {
        crate::telemetry::count_call(kind, &body);
        self.answer(reply(call_id, body)).await
    }

    /// Queues an inline answer and flushes unless more input is already waiting.
    async fn answer(&mut self, frame: ServerFrame) -> Result<(), WriteError> {
        self.queue(frame).await?;
        self.connection.flush_unless_more_input().await
    }

    /// Writes a call's reply plus those of any others that end meanwhile, then flushes once. A
    /// streamed turn's last progress goes out just before its reply.
    async fn write_replies(&mut self, first: CallReply) -> Result<(), WriteError> {
        self.queue_reply(first).await?;
        while let Poll::Ready(next) = futures::poll!(next_reply(&mut self.ongoing_calls)) {
            self.queue_reply(next).await?;
        }
        self.last_activity = Instant::now();
        self.connection.flush_unless_more_input().await
    }

    async fn queue_reply(&mut self, reply: CallReply) -> Result<(), WriteError> {
        for progress in self.calls.finished(reply.frame.call_id) {
            self.queue(progress).await?;
        }
        self.queue(reply.frame).await
    }

    /// Buffers a frame for writing. A reply too large for one frame is replaced by an
    /// `internal` error for the same call, so the client still gets exactly one answer.
    async fn queue(&mut self, frame: ServerFrame) -> Result<(), WriteError> {
        let call_id = frame.call_id;
        match self.connection.queue(frame).await {
            Err(WriteError::Frame(FrameError::TooLarge { len, max })) => {
                let message = format!("the reply of {len} bytes exceeds the frame limit of {max} bytes");
                self.connection
                    .queue(error_frame(call_id, ErrorCode::Internal, message))
                    .await
            }
            other => other,
        }
    }

    /// Writes the progress frames due, then flushes once.
    async fn write_progress(&mut self) -> Result<(), WriteError> {
        let frames = self.calls.chat_streams.due_frames(Instant::now());
        if frames.is_empty() {
            return Ok(());
        }
        for frame in frames {
            self.queue(frame).await?;
        }
        self.last_activity = Instant::now();
        self.connection.flush_unless_more_input().await
    }

    fn calls_in_flight(&self) -> usize {
        self.shared.config.max_calls_in_flight - self.in_flight.available_permits()
    }

    fn next_deadline(&self) -> Instant {
        let idle = if self.calls_in_flight() > 0 {
            Instant::now() + self.shared.config.idle_timeout
        } else {
            self.last_activity + self.shared.config.idle_timeout
        };
        if self.calls.logged_in() {
            idle
        } else {
            idle.min(self.login_deadline)
        }
    }
}
