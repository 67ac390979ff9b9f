//! TLS from PEM files for every part of TServer that speaks TLS (the server, its clients, the
//! plant's MQTT sources), so they load certificates and report failures alike: the
//! configurations, the client's check of the server's certificate, and one sentence for each
//! way a handshake fails. No sockets here: `tserver-proto` runs the handshake over its
//! `Transport`.
//!
//! TLS uses rustls with the `ring` provider, chosen explicitly rather than through a
//! process-wide default, so nothing depends on which other crate installed a provider first.
//!
//! The client's CA file may hold a private CA (the server's chain is checked up to it, as
//! webpki checks it) or the server's own certificate, pinned: a certificate the server
//! presents byte for byte as it is in the file is trusted as itself, its name and validity
//! checked but not its CA flag, because openssl's default self-signed certificate (`openssl req
//! -x509 ...`) carries `CA:TRUE` and webpki refuses a CA as an end entity.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// rustls as this crate uses it, so every TLS user names the same version.
pub use rustls;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{WebPkiServerVerifier, verify_server_name};
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use x509_cert::Certificate;
use x509_cert::der::Decode;

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
    /// The CA file's certificates could not make a certificate check.
    #[error("the CA certificates cannot check a server: {0}")]
    Verifier(#[from] rustls::client::VerifierBuilderError),
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

/// A client TLS configuration trusting the certificates in the PEM file `ca`: a private CA
/// (the server's chain is checked up to it) or the server's own certificate (pinned).
pub fn client_config(ca: &Path) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let pinned = certificates(ca)?;
    let mut roots = rustls::RootCertStore::empty();
    for certificate in &pinned {
        roots.add(certificate.clone())?;
    }
    let check = ServerCertificateCheck {
        webpki: WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider()).build()?,
        pinned,
    };
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(check))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The client's check of a server's certificate: webpki's chain check against the CA file's
/// certificates, or, for a certificate that is byte for byte one of them, that certificate's
/// name and validity period (see the module's note on `CA:TRUE`).
#[derive(Debug)]
struct ServerCertificateCheck {
    webpki: Arc<WebPkiServerVerifier>,
    pinned: Vec<CertificateDer<'static>>,
}

impl ServerCertificateCheck {
    fn check_pinned(
        end_entity: &CertificateDer<'_>,
        name: &ServerName<'_>,
        now: UnixTime,
    ) -> Result<(), rustls::Error> {
        let parsed = ParsedCertificate::try_from(end_entity)?;
        verify_server_name(&parsed, name)?;
        let certificate = Certificate::from_der(end_entity.as_ref())
            .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
        let validity = certificate.tbs_certificate.validity;
        let (not_before, not_after) = (
            UnixTime::since_unix_epoch(validity.not_before.to_unix_duration()),
            UnixTime::since_unix_epoch(validity.not_after.to_unix_duration()),
        );
        if now < not_before {
            return Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidYetContext {
                    time: now,
                    not_before,
                },
            ));
        }
        if now > not_after {
            return Err(rustls::Error::InvalidCertificate(
                CertificateError::ExpiredContext { time: now, not_after },
            ));
        }
        Ok(())
    }
}

impl ServerCertVerifier for ServerCertificateCheck {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .webpki
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Ok(verified) => Ok(verified),
            Err(_)
                if self
                    .pinned
                    .iter()
                    .any(|pinned| pinned.as_ref() == end_entity.as_ref()) =>
            {
                Self::check_pinned(end_entity, server_name, now).map(|()| ServerCertVerified::assertion())
            }
            Err(error) => Err(error),
        }
    }

    // The handshake's signatures prove the server holds the certificate's key, pinned or not.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// Parses the name a server's certificate must carry: a DNS name or an IP address.
pub fn server_name(name: &str) -> Result<ServerName<'static>, TlsError> {
    ServerName::try_from(name.to_owned()).map_err(|_| TlsError::ServerName(name.to_owned()))
}

/// What a failed client handshake means and what to do, in one sentence: `error` is what
/// the handshake (`tserver_proto::connect`) returned for the server name `name`.
pub fn handshake_failure(error: &io::Error, name: &str) -> String {
    let rustls_error = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    match rustls_error {
        Some(rustls::Error::InvalidCertificate(problem)) => certificate_problem(problem, name),
        Some(rustls::Error::InvalidMessage(_)) => not_tls(),
        Some(other) => format!("the TLS handshake failed: {other}"),
        None => match error.kind() {
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted => not_tls(),
            _ => format!("the TLS handshake failed: {error}"),
        },
    }
}

fn not_tls() -> String {
    "the server does not speak TLS on this port (it answered the TLS hello with something else): connect without a CA file, or to its TLS port".to_owned()
}

fn certificate_problem(problem: &CertificateError, name: &str) -> String {
    match problem {
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            "the server's certificate has expired: give the server a new one (tserver tls create makes a CA and a server certificate)".to_owned()
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "the server's certificate is not valid yet: check the clocks of both machines, or give the server a certificate valid now".to_owned()
        }
        CertificateError::NotValidForName => format!(
            "the server's certificate is not made out to {name:?}: connect by a name it carries, or give one as the TLS server name (tclient --tls-name)"
        ),
        CertificateError::NotValidForNameContext { presented, .. } if presented.is_empty() => {
            "the server's certificate names no host: add subjectAltName (openssl req ... -addext \
             \"subjectAltName=DNS:localhost,IP:127.0.0.1\", or `tserver tls create --host NAME`)"
                .to_owned()
        }
        CertificateError::NotValidForNameContext { presented, .. } => format!(
            "the server's certificate is not made out to {name:?} but to {}: connect by one of those names, or give one as the TLS server name (tclient --tls-name)",
            presented.iter().map(|name| bare_name(name)).collect::<Vec<_>>().join(", ")
        ),
        CertificateError::Other(other)
            if matches!(other.0.downcast_ref::<webpki::Error>(), Some(webpki::Error::CaUsedAsEndEntity)) =>
        {
            "the server's certificate is a CA certificate (as openssl's default self-signed one is) and not in the CA file: give that very certificate as the CA file".to_owned()
        }
        CertificateError::UnknownIssuer | CertificateError::BadSignature => {
            "the server's certificate is not signed by a certificate in the CA file: give the CA that signed it, or the server's own certificate".to_owned()
        }
        other => format!("the server's certificate was refused: {other}"),
    }
}

/// A name as rustls presents it (`DnsName("localhost")`, `IpAddress(127.0.0.1)`), bare.
fn bare_name(presented: &str) -> &str {
    ["DnsName(\"", "IpAddress(", "UriName(\""]
        .iter()
        .find_map(|prefix| presented.strip_prefix(prefix))
        .map_or(presented, |inner| {
            inner.trim_end_matches(')').trim_end_matches('"')
        })
}
