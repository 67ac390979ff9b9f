//! Hostile clients: connections that misbehave in the six ways a trusted server must shrug
//! off, from 127.0.0.2 so a login lockout they earn never hits well-behaved clients on
//! 127.0.0.1.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tserver_proto::PROTOCOL_VERSION;
use tserver_proto::v1::{ClientFrame, Hello, Ping, client_frame};

/// The kinds of misbehaviour; hostile client `index` does kind `index % KINDS`.
pub const KINDS: usize = 6;

/// Connections one hostile client opens at most.
const RECONNECTS: usize = 10_000;

/// Names of the kinds, by number, for reports.
pub const KIND_NAMES: [&str; KINDS] = [
    "silent",
    "junk frame",
    "1 GiB frame",
    "slow Hello",
    "ping flood",
    "password guessing",
];

/// Starts `count` hostile clients on a thread of their own that runs only when a core is idle
/// (in a plant the attackers are other machines; sharing the cores here, they must not delay
/// the processes being measured, so what well-behaved clients feel is the server). Client
/// `index` does kind `index % KINDS`, or every client the one kind `only` names. They stop at
/// `until`; join the handle for the number of connections they opened, which shows the attack
/// kept its pace.
pub fn spawn(
    addr: SocketAddr,
    count: usize,
    only: Option<usize>,
    until: Instant,
) -> std::io::Result<JoinHandle<u64>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .on_thread_start(yield_to_everything)
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("hostile".to_owned())
        .spawn(move || {
            runtime.block_on(async move {
                let payloads = Arc::new(Payloads::new());
                let clients: Vec<_> = (0..count)
                    .map(|index| {
                        let kind = only.unwrap_or(index) % KINDS;
                        tokio::spawn(attack(addr, index, kind, Arc::clone(&payloads), until))
                    })
                    .collect();
                let mut connections = 0;
                for client in clients {
                    connections += client.await.unwrap_or(0);
                }
                connections
            })
        })
}

/// Puts the calling thread in Linux's idle scheduling class (`chrt --idle`, which an
/// unprivileged process may do), where any other runnable thread preempts it at once; nice 19
/// where `chrt` is missing. At nice 19 a runnable attacker still kept a waking server or model
/// thread waiting for up to its time slice.
fn yield_to_everything() {
    #[cfg(target_os = "linux")]
    {
        let thread = rustix::thread::gettid();
        let idle = std::process::Command::new("chrt")
            .args(["--idle", "--pid", "0", &thread.as_raw_nonzero().to_string()])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !idle {
            let _ = rustix::process::setpriority_process(Some(thread), 19);
        }
    }
}

/// The pause before a hostile client reconnects: about a second, spread so the clients do not
/// move in lockstep. A tight reconnect loop is a connection flood, which belongs to the
/// firewall (docs/LIMITS.md).
fn reconnect_pause(index: usize) -> Duration {
    Duration::from_millis(500 + (index as u64 * 397) % 1000)
}

async fn connect(addr: SocketAddr) -> Option<TcpStream> {
    let socket = TcpSocket::new_v4().ok()?;
    socket.bind("127.0.0.2:0".parse().ok()?).ok()?;
    socket.connect(addr).await.ok()
}

/// One frame as the wire carries it: a 4-byte big-endian length, then the message.
fn frame(body: client_frame::Body) -> Vec<u8> {
    let bytes = ClientFrame {
        call_id: 1,
        body: Some(body),
    }
    .encode_to_vec();
    let mut framed = u32::try_from(bytes.len())
        .unwrap_or(u32::MAX)
        .to_be_bytes()
        .to_vec();
    framed.extend(bytes);
    framed
}

/// What the hostile clients send, made once: building a 16 KiB frame per connection would
/// spend the attackers' CPU (a debug build's, in the bench) on the cores the server shares.
#[derive(Debug)]
struct Payloads {
    junk: Vec<u8>,
    huge_frame_start: Vec<u8>,
    slow_hello: Vec<u8>,
    ping_flood: Vec<u8>,
    guess: Vec<u8>,
}

impl Payloads {
    /// Every kind's bytes.
    fn new() -> Self {
        let mut huge_frame_start = (1u32 << 30).to_be_bytes().to_vec();
        huge_frame_start.resize(huge_frame_start.len() + 16 * 1024, 0);
        Self {
            junk: vec![0, 0, 0, 40, 0xff, 0xff, 0xff, 0x0f, 0x80, 0x80, 0x80],
            huge_frame_start,
            slow_hello: hello("guest", ""),
            ping_flood: frame(client_frame::Body::Ping(Ping { nonce: 7 })).repeat(500),
            guess: hello("operator", "guess"),
        }
    }
}

fn hello(user: &str, password: &str) -> Vec<u8> {
    frame(client_frame::Body::Hello(Hello {
        protocol_version: PROTOCOL_VERSION,
        client_name: "hostile".to_owned(),
        user_name: user.to_owned(),
        password: password.to_owned(),
    }))
}

/// Reads until the server closes (or `until`), dropping what arrives.
async fn drain(socket: &mut TcpStream, until: Instant) {
    let mut scratch = [0u8; 4096];
    let deadline = tokio::time::Instant::from_std(until);
    while let Ok(Ok(read)) = tokio::time::timeout_at(deadline, socket.read(&mut scratch)).await {
        if read == 0 {
            break;
        }
    }
}

/// One hostile client: misbehaviour `kind` again and again until `until`.
/// Returns the connections it opened.
async fn attack(addr: SocketAddr, index: usize, kind: usize, payloads: Arc<Payloads>, until: Instant) -> u64 {
    let mut connections = 0;
    for _ in 0..RECONNECTS {
        if Instant::now() >= until {
            break;
        }
        let Some(mut socket) = connect(addr).await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        connections += 1;
        let _ = match kind {
            // Never says Hello; holds the connection open.
            0 => Ok(()),
            // Junk: a plausible length, then bytes that are no protobuf.
            1 => socket.write_all(&payloads.junk).await,
            // Declares a 1 GiB frame and sends a little of it.
            2 => socket.write_all(&payloads.huge_frame_start).await,
            // One byte a second of a real Hello.
            3 => {
                for byte in &payloads.slow_hello {
                    if Instant::now() >= until || socket.write_all(std::slice::from_ref(byte)).await.is_err()
                    {
                        break;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Ok(())
            }
            // A ping flood before login.
            4 => socket.write_all(&payloads.ping_flood).await,
            // Password guessing.
            _ => socket.write_all(&payloads.guess).await,
        };
        drain(&mut socket, until).await;
        tokio::time::sleep(reconnect_pause(index)).await;
    }
    connections
}
