//! HTTPS for the HTTP surface: an axum [`Listener`] whose connections arrive after their TLS
//! handshake, each handshake done in a task of its own so a slow or silent client never holds
//! up the others' accepts.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::serve::Listener;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tserver_proto::{Transport, rustls};

/// How long a client has to finish its handshake.
const HANDSHAKE_LIMIT: Duration = Duration::from_secs(10);

/// Handshakes in progress at once; past it, accepting waits (the kernel's backlog holds the
/// rest), so a flood of silent connections costs a bounded number of tasks.
const HANDSHAKES_AT_ONCE: usize = 256;

/// TLS connections, handshaken, ready for HTTP.
#[derive(Debug)]
pub(super) struct TlsListener {
    ready: mpsc::Receiver<(Transport, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Starts accepting on `listener` until `shutdown` (or until this listener is dropped).
    pub(super) fn new(
        listener: TcpListener,
        config: &Arc<rustls::ServerConfig>,
        shutdown: CancellationToken,
    ) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        // The TCP listener's configuration speaks no ALPN; HTTP clients ask for it.
        let mut http_config = rustls::ServerConfig::clone(config);
        http_config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(http_config);
        let (sender, ready) = mpsc::channel(64);
        tokio::spawn(accept_loop(listener, config, sender, shutdown));
        Ok(Self { ready, local })
    }
}

async fn accept_loop(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
    ready: mpsc::Sender<(Transport, SocketAddr)>,
    shutdown: CancellationToken,
) {
    let handshakes = Arc::new(Semaphore::new(HANDSHAKES_AT_ONCE));
    loop {
        let Ok(permit) = Arc::clone(&handshakes).acquire_owned().await else {
            return;
        };
        let accepted = tokio::select! {
            () = shutdown.cancelled() => return,
            () = ready.closed() => return,
            accepted = listener.accept() => accepted,
        };
        let (socket, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors and the like: wait, as axum's own listener does.
                tracing::debug!(%error, "cannot accept an HTTPS connection");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if let Err(error) = socket.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        let config = Arc::clone(&config);
        let ready = ready.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match tokio::time::timeout(HANDSHAKE_LIMIT, tserver_proto::accept(&config, socket)).await {
                Ok(Ok(transport)) => {
                    // The server has stopped when nobody receives: the connection just closes.
                    let _ = ready.send((transport, peer)).await;
                }
                Ok(Err(error)) => tracing::debug!(%error, %peer, "HTTPS handshake failed"),
                Err(_) => tracing::debug!(%peer, "HTTPS handshake not finished in time"),
            }
        });
    }
}

impl Listener for TlsListener {
    type Io = Transport;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accept loop ended (shutdown): nothing will come again, and axum's graceful
            // shutdown is already under way.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
