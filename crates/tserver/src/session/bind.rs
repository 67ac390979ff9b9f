//! `listen`: a TCP listener with a backlog deep enough for a plant's panels all connecting at
//! once (after a server restart or a network blip), where the standard library's 128 would
//! drop SYNs and make clients retry for seconds.

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpSocket};

/// Connections the kernel may queue before they are accepted; the kernel caps it at
/// `net.core.somaxconn` (4,096 on current Linux).
pub const LISTEN_BACKLOG: u32 = 4096;

/// Listens on `address` with [`LISTEN_BACKLOG`] (the address may be reused at once after a
/// restart, as the standard library's listeners may).
pub fn listen(address: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if address.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_BACKLOG)
}
