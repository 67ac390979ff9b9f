//! `Transport`: the byte stream under the frames (plain TCP or TLS), and TLS set up from PEM
//! files, shared so the server and its clients load certificates and report failures alike.
//!
//! TLS uses rustls with the `ring` provider, chosen explicitly rather than through a
//! process-wide default, so nothing depends on which other crate installed a provider first.

use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A connection's byte stream: plain TCP, or TLS over TCP.
#[derive(Debug)]
pub enum Transport {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP (either side). Boxed: the TLS state is large and most sockets are plain.
    Tls(Box<tokio_rustls::TlsStream<TcpStream>>),
}

impl Transport {
    /// The TCP socket underneath.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Self::Plain(socket) => socket,
            Self::Tls(stream) => stream.get_ref().0,
        }
    }
}

impl AsyncRead for Transport {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(socket) => Pin::new(socket).poll_read(cx, buf),
            Self::Tls(stream) => Pin::new(stream.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(socket) => Pin::new(socket).poll_write(cx, buf),
            Self::Tls(stream) => Pin::new(stream.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(socket) => Pin::new(socket).poll_flush(cx),
            Self::Tls(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(socket) => Pin::new(socket).poll_shutdown(cx),
            Self::Tls(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(socket) => Pin::new(socket).poll_write_vectored(cx, bufs),
            Self::Tls(stream) => Pin::new(stream.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(socket) => socket.is_write_vectored(),
            Self::Tls(stream) => stream.is_write_vectored(),
        }
    }
}

/// Why TLS could not be set up. Messages name files, never their contents.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A PEM file held no item of the kind needed, or a malformed one.
    #[error("{path} holds no usable {wanted}: {reason}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What was looked for ("PEM certificate", "PEM private key").
        wanted: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// rustls refused the certificates or key (for example a key that does not match).
    #[error("TLS configuration refused: {0}")]
    Config(#[from] rustls::Error),
    /// The name to check the server's certificate against is not a DNS name or IP address.
    #[error("{0:?} is not a valid TLS server name")]
    ServerName(String),
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem_error = |reason: String| TlsError::Pem {
        path: path.to_owned(),
        wanted: "PEM certificate",
        reason,
    };
    let certificates = CertificateDer::pem_slice_iter(&read(path)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| pem_error(error.to_string()))?;
    if certificates.is_empty() {
        return Err(pem_error("no CERTIFICATE block".to_owned()));
    }
    Ok(certificates)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server TLS configuration from a PEM certificate chain and a PEM private key (PKCS#8,
/// PKCS#1 or SEC1).
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let chain = certificates(cert)?;
    let key = PrivateKeyDer::from_pem_slice(&read(key)?).map_err(|error| TlsError::Pem {
        path: key.to_owned(),
        wanted: "PEM private key",
        reason: error.to_string(),
    })?;
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    Ok(Arc::new(config))
}

/// A client TLS configuration trusting the certificates in the PEM file `ca` (a private CA, or
/// the server's self-signed certificate).
pub fn client_config(ca: &Path) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for certificate in certificates(ca)? {
        roots.add(certificate)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Parses the name a server's certificate must carry: a DNS name or an IP address.
pub fn server_name(name: &str) -> Result<ServerName<'static>, TlsError> {
    ServerName::try_from(name.to_owned()).map_err(|_| TlsError::ServerName(name.to_owned()))
}

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
