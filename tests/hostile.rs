//! Hostile clients: connections that misbehave in the six ways a trusted server must shrug
//! off, from 127.0.0.2 so a login lockout they earn never hits well-behaved clients on
//! 127.0.0.1.

use std::net::SocketAddr;
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

/// Starts `count` hostile clients on a thread of their own at the lowest OS priority (in a
/// plant the attackers are other machines; sharing the cores here, they yield to everything
/// else, so what well-behaved clients feel is the server). They stop at `until`; join the
/// handle to wait for them.
pub fn spawn(addr: SocketAddr, count: usize, until: Instant) -> std::io::Result<JoinHandle<()>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .on_thread_start(lower_priority)
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("hostile".to_owned())
        .spawn(move || {
            runtime.block_on(async move {
                let clients: Vec<_> = (0..count)
                    .map(|index| tokio::spawn(attack(addr, index, until)))
                    .collect();
                for client in clients {
                    let _ = client.await;
                }
            });
        })
}

fn lower_priority() {
    #[cfg(target_os = "linux")]
    let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 19);
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

/// One hostile client: the same misbehaviour again and again until `until`.
pub async fn attack(addr: SocketAddr, index: usize, until: Instant) {
    for _ in 0..RECONNECTS {
        if Instant::now() >= until {
            return;
        }
        let Some(mut socket) = connect(addr).await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let _ = match index % KINDS {
            // Never says Hello; holds the connection open.
            0 => Ok(()),
            // Junk: a plausible length, then bytes that are no protobuf.
            1 => {
                socket
                    .write_all(&[0, 0, 0, 40, 0xff, 0xff, 0xff, 0x0f, 0x80, 0x80, 0x80])
                    .await
            }
            // Declares a 1 GiB frame and sends a little of it.
            2 => {
                let mut bytes = (1u32 << 30).to_be_bytes().to_vec();
                bytes.extend([0u8; 16 * 1024]);
                socket.write_all(&bytes).await
            }
            // One byte a second of a real Hello.
            3 => {
                for byte in hello("guest", "") {
                    if Instant::now() >= until || socket.write_all(&[byte]).await.is_err() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Ok(())
            }
            // A ping flood before login.
            4 => {
                let flood = frame(client_frame::Body::Ping(Ping { nonce: 7 })).repeat(500);
                socket.write_all(&flood).await
            }
            // Password guessing.
            _ => socket.write_all(&hello("operator", "guess")).await,
        };
        drain(&mut socket, until).await;
        tokio::time::sleep(reconnect_pause(index)).await;
    }
}
