// The one WebSocket to /ws: canonical-JSON frames, call ids, replies matched by callId,
// reconnect with back-off, Hello again and the panel's subscriptions again by themselves.

/** A call the server refused: its error code (e.g. "ERROR_CODE_PERMISSION_DENIED") and words. */
export class CallError extends Error {
  constructor(code, message) {
    super(message || code);
    this.code = code;
  }
}

const BACKOFF_MS = [500, 1000, 2000, 4000, 8000];
const PING_EVERY_MS = 60000;

/** The body field name of a frame: its one member other than callId. */
function bodyOf(frame) {
  for (const key of Object.keys(frame)) {
    if (key !== 'callId') return [key, frame[key]];
  }
  return ['', {}];
}

export class Connection {
  /**
   * @param {object} handlers onState(state, detail), onLoggedOut(reason), onReady(isReconnect)
   */
  constructor(handlers) {
    this.handlers = handlers;
    this.socket = null;
    this.nextId = 1;
    this.pending = new Map(); // callId -> {resolve, reject, onEvent}
    this.streams = new Map(); // callId -> listener of frames after the reply (subscriptions)
    this.attempt = 0;
    this.wanted = false;
    this.everReady = false;
    this.timer = null;
    this.pinger = null;
  }

  /** Opens the socket (and keeps it open) until close(). */
  open() {
    this.wanted = true;
    this.connect();
  }

  close() {
    this.wanted = false;
    clearTimeout(this.timer);
    clearInterval(this.pinger);
    if (this.socket) this.socket.close(1000, 'logged out');
    this.socket = null;
  }

  connect() {
    const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const socket = new WebSocket(`${scheme}//${location.host}/ws`);
    this.socket = socket;
    socket.addEventListener('open', () => this.hello(socket));
    socket.addEventListener('message', (event) => this.receive(event.data));
    socket.addEventListener('close', () => this.lost(socket));
  }

  async hello(socket) {
    try {
      const reply = await this.call({ hello: { protocolVersion: 1, clientName: 'panel' } });
      if (socket !== this.socket) return;
      this.attempt = 0;
      const again = this.everReady;
      this.everReady = true;
      clearInterval(this.pinger);
      this.pinger = setInterval(() => {
        this.call({ ping: { nonce: String(Date.now()) } }).catch(() => {});
      }, PING_EVERY_MS);
      this.handlers.onState('online', again);
      this.handlers.onReady(again, reply);
    } catch (error) {
      if (error.code === 'ERROR_CODE_UNAUTHENTICATED' || error.code === 'ERROR_CODE_LOGIN_FAILED') {
        this.close();
        this.handlers.onLoggedOut(error.message);
      }
      // Anything else: the socket closes or is closed, and lost() tries again.
    }
  }

  lost(socket) {
    if (socket !== this.socket) return;
    clearInterval(this.pinger);
    this.socket = null;
    for (const [, waiting] of this.pending) waiting.reject(new CallError('CONNECTION_LOST', 'the connection was lost'));
    this.pending.clear();
    this.streams.clear();
    if (!this.wanted) return;
    const delay = BACKOFF_MS[Math.min(this.attempt, BACKOFF_MS.length - 1)];
    this.attempt += 1;
    this.handlers.onState(this.everReady ? 'lost' : 'connecting', delay);
    this.timer = setTimeout(() => {
      if (this.wanted) this.connect();
    }, delay * (0.8 + Math.random() * 0.4));
  }

  receive(text) {
    let frame;
    try {
      frame = JSON.parse(text);
    } catch {
      return;
    }
    const id = String(frame.callId ?? '0');
    const [kind, body] = bodyOf(frame);
    if (id === '0') {
      if (kind === 'error') this.connectionError(body);
      return;
    }
    const waiting = this.pending.get(id);
    if (waiting) {
      if (kind === 'chatProgress') {
        waiting.onEvent?.(body);
        return;
      }
      this.pending.delete(id);
      if (kind === 'error') waiting.reject(new CallError(body.code, body.message));
      else waiting.resolve(body);
      return;
    }
    this.streams.get(id)?.(kind, body);
  }

  connectionError(body) {
    if (body.code === 'ERROR_CODE_UNAUTHENTICATED') {
      this.close();
      this.handlers.onLoggedOut(body.message);
    } else {
      this.handlers.onState('error', body.message || body.code);
    }
  }

  /**
   * Sends one call; resolves with the reply body (the member of the ServerFrame's oneof).
   * `onEvent` gets ChatProgress bodies of a streamed chat; `onStream` gets (kind, body) of
   * frames that follow the reply (TagUpdate of a subscription).
   */
  call(body, { onEvent, onStream } = {}) {
    const socket = this.socket;
    if (!socket || socket.readyState !== WebSocket.OPEN) {
      return Promise.reject(new CallError('CONNECTION_LOST', 'not connected to the server'));
    }
    const callId = String(this.nextId++);
    return new Promise((resolve, reject) => {
      this.pending.set(callId, { resolve, reject, onEvent });
      if (onStream) this.streams.set(callId, onStream);
      socket.send(JSON.stringify({ callId, ...body }));
    }).finally(() => {
      if (!onStream) this.streams.delete(callId);
    }).then((reply) => (onStream ? { callId, reply } : reply));
  }

  /** The id the next call will carry (a chat turn's, to cancel it). */
  peekId() {
    return String(this.nextId);
  }

  endStream(callId) {
    this.streams.delete(callId);
  }

  /** Stops the subscription made by call `callId` (if any): its frames are no longer read,
   * and the server is told (a lost connection has ended it already). */
  unsubscribe(callId) {
    if (!callId) return;
    this.endStream(callId);
    this.call({ unsubscribe: { subscription: callId } }).catch(() => {});
  }
}
