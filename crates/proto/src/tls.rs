//! TLS over the framed transport: accepting and connecting a `Transport` with a configuration
//! from `tserver-tls`, and telling a TLS record from a frame length.

use std::io;
use std::sync::Arc;

use tokio::net::TcpStream;
use tserver_tls::rustls;
use tserver_tls::rustls::pki_types::ServerName;

use crate::Transport;

/// TLS-accepts `socket` as a server.
pub async fn accept(config: &Arc<rustls::ServerConfig>, socket: TcpStream) -> io::Result<Transport> {
    let stream = tokio_rustls::TlsAcceptor::from(Arc::clone(config))
        .accept(socket)
        .await?;
    Ok(Transport::Tls(Box::new(stream.into())))
}

/// TLS-connects over `socket` as a client, checking the certificate against `name`.
pub async fn connect(
    config: &Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
    socket: TcpStream,
) -> io::Result<Transport> {
    let stream = tokio_rustls::TlsConnector::from(Arc::clone(config))
        .connect(name, socket)
        .await?;
    Ok(Transport::Tls(Box::new(stream.into())))
}

/// Whether a frame length, as four bytes read from the wire, is the start of a TLS record
/// (handshake or alert, TLS 1.0 to 1.3): a plain client reading a TLS server's bytes.
pub fn is_tls_record_start(length: usize) -> bool {
    let bytes = u32::try_from(length).unwrap_or(u32::MAX).to_be_bytes();
    matches!(bytes[0], 0x15 | 0x16) && bytes[1] == 0x03 && bytes[2] <= 0x04
}
