//! An OPC UA source's server reached from outside the running source, for the commands an
//! engineer sets a source up with: trusting the server's certificate, and (in
//! `opcua_browse`) browsing what it offers.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use localai::secrets::SecretValue;
use opcua::client::Session;
use opcua::crypto::{CertificateStore, X509};
use opcua::types::{EndpointDescription, StatusCode};
use plant_model::{SourceKind, SourceSpec};
use store::Store;

use super::opcua_client::{self, CONNECT_TIMEOUT, is_untrusted, security_of, untrusted_advice, words};
use super::{opcua_pki_dir, password_of};

/// Why a command could not reach or use an OPC UA source's server. Each names the source,
/// server, node or file concerned.
#[derive(Debug, thiserror::Error)]
pub enum OpcUaAccessError {
    /// The plant file declares no source of that name.
    #[error("the plant has no source named {0:?} (its sources: {1})")]
    NoSuchSource(String, String),
    /// The source is a broker or a device.
    #[error("source {0:?} is not an OPC UA server: its url is {1}")]
    NotOpcUa(String, String),
    /// The source's password names a secret that cannot be had.
    #[error("source {0:?}: {1}")]
    Password(String, String),
    /// The solution could not be read.
    #[error("cannot read the solution: {0}")]
    Store(#[from] store::SolutionError),
    /// No session or no answer from the server's url.
    #[error("cannot reach {0}: {1}")]
    Unreachable(String, String),
    /// The server's certificate is not trusted (the message says what to do).
    #[error("{0}")]
    Untrusted(String),
    /// The server presents no certificate for the source's security.
    #[error("{0} offers no certificate for {1}")]
    NoCertificate(String, String),
    /// The certificate is not the one the engineer expected.
    #[error("the certificate {url} presents has thumbprint {actual}, not {expected}; nothing was trusted")]
    ThumbprintMismatch {
        /// The server's url.
        url: String,
        /// The thumbprint asked for.
        expected: String,
        /// The thumbprint presented.
        actual: String,
    },
    /// The certificate folder could not be written.
    #[error("{0}: {1}")]
    Pki(PathBuf, String),
    /// A node id that does not parse, or a node the server does not know.
    #[error("node {0:?}: {1}")]
    Node(String, String),
    /// The server failed a request.
    #[error("{0} did not answer: {1}")]
    Service(String, String),
}

/// A certificate a server presents, before anyone trusts it.
pub struct PresentedCertificate {
    /// Its subject, e.g. `CN=PLC 1, O=...`.
    pub subject: String,
    /// Its SHA-1 thumbprint in hex, as OPC UA tools show it.
    pub thumbprint: String,
    /// When it starts to be valid, as an RFC 3339 time.
    pub valid_from: String,
    /// When it stops being valid.
    pub valid_until: String,
    certificate: X509,
}

impl std::fmt::Debug for PresentedCertificate {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PresentedCertificate")
            .field("subject", &self.subject)
            .field("thumbprint", &self.thumbprint)
            .finish_non_exhaustive()
    }
}

/// What reaching the server of one OPC UA source takes: its spec, its password (the secret's
/// value, which `Debug` never shows) and the folder of certificates the running source uses.
#[derive(Debug)]
pub struct OpcUaAccess {
    pub(super) spec: SourceSpec,
    pub(super) password: Option<SecretValue>,
    pub(super) pki_dir: PathBuf,
}

/// A server certificate now trusted.
#[derive(Debug, Clone)]
pub struct TrustedCertificate {
    /// Its subject, e.g. `CN=PLC 1, O=...`.
    pub subject: String,
    /// Its SHA-1 thumbprint in hex, as OPC UA tools show it.
    pub thumbprint: String,
    /// When it starts to be valid, as an RFC 3339 time.
    pub valid_from: String,
    /// When it stops being valid.
    pub valid_until: String,
    /// Where it is kept.
    pub path: PathBuf,
    /// Whether it was trusted already.
    pub already: bool,
    /// The source's own certificate, for the server to trust in turn.
    pub own_certificate: PathBuf,
}

impl OpcUaAccess {
    /// The OPC UA source `name` of the solution in `store`.
    #[crate::compiled_once]
    pub async fn of(store: &Store, name: &str) -> Result<Self, OpcUaAccessError> {
        let model = store.plant_model().await?;
        let Some(spec) = model.sources.iter().find(|source| source.name == name) else {
            let known: Vec<&str> = model.sources.iter().map(|source| source.name.as_str()).collect();
            let known = if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            };
            return Err(OpcUaAccessError::NoSuchSource(name.to_owned(), known));
        };
        if spec.kind() != SourceKind::OpcUa {
            return Err(OpcUaAccessError::NotOpcUa(name.to_owned(), spec.url.clone()));
        }
        let password = password_of(store, spec)
            .await
            .map_err(|reason| OpcUaAccessError::Password(name.to_owned(), reason))?;
        Ok(Self {
            spec: spec.clone(),
            password,
            pki_dir: opcua_pki_dir(store),
        })
    }

    /// The source's server url.
    pub fn url(&self) -> &str {
        &self.spec.url
    }

    /// The certificate the server presents for the source's security, as an unauthenticated
    /// GetEndpoints returns it: what an engineer confirms before trusting it.
    #[crate::compiled_once]
    pub async fn presented(&self) -> Result<PresentedCertificate, OpcUaAccessError> {
        // One try: an engineer at a terminal wants to hear at once that the server is away.
        let client = opcua_client::build(
            opcua_client::client_builder(&self.spec, &self.pki_dir).session_retry_limit(0),
        )
        .map_err(|reason| self.unreachable(reason))?;
        let endpoints = tokio::time::timeout(
            CONNECT_TIMEOUT,
            client.get_server_endpoints_from_url(self.spec.url.as_str()),
        )
        .await
        .map_err(|_| self.unreachable(format!("no answer within {CONNECT_TIMEOUT:?}")))?
        .map_err(|error| self.unreachable(error.to_string()))?;
        let endpoint = self.endpoint_with_certificate(&endpoints)?;
        let certificate = X509::from_byte_string(&endpoint.server_certificate)
            .map_err(|error| self.service_failed(format!("its certificate does not read: {error}")))?;
        let time = |time: std::time::SystemTime| humantime::format_rfc3339_seconds(time).to_string();
        let unknown = |_| "?".to_owned();
        Ok(PresentedCertificate {
            subject: certificate.subject_name(),
            thumbprint: certificate.thumbprint().as_hex_string(),
            valid_from: certificate
                .not_before()
                .map_or_else(unknown, |from| time(from.into())),
            valid_until: certificate
                .not_after()
                .map_or_else(unknown, |until| time(until.into())),
            certificate,
        })
    }

    /// Trusts the certificate the server presents if its SHA-1 thumbprint is `expected` (hex,
    /// in any case, with or without separators): the way to trust one without a person to look
    /// at it.
    #[crate::compiled_once]
    pub async fn trust(&self, expected: &str) -> Result<TrustedCertificate, OpcUaAccessError> {
        let presented = self.presented().await?;
        self.trust_presented(&presented, expected)
    }

    /// Trusts `presented` (what [`presented`](Self::presented) showed a person) if its
    /// thumbprint is `expected`, so the source's secured sessions with the server open.
    pub fn trust_presented(
        &self,
        presented: &PresentedCertificate,
        expected: &str,
    ) -> Result<TrustedCertificate, OpcUaAccessError> {
        let wanted: String = expected
            .chars()
            .filter(char::is_ascii_hexdigit)
            .collect::<String>()
            .to_ascii_uppercase();
        if wanted != presented.thumbprint.to_ascii_uppercase() {
            return Err(OpcUaAccessError::ThumbprintMismatch {
                url: self.spec.url.clone(),
                expected: expected.to_owned(),
                actual: presented.thumbprint.clone(),
            });
        }
        let certificate = &presented.certificate;
        let file_name = CertificateStore::cert_file_name(certificate);
        let path = self.pki_dir.join("trusted").join(&file_name);
        let already = path.exists();
        let der = certificate
            .to_der()
            .map_err(|error| OpcUaAccessError::Pki(path.clone(), error.to_string()))?;
        write_trusted(&path, &der)?;
        let rejected = self.pki_dir.join("rejected").join(&file_name);
        if rejected.exists() {
            std::fs::remove_file(&rejected)
                .map_err(|error| OpcUaAccessError::Pki(rejected.clone(), error.to_string()))?;
        }
        Ok(TrustedCertificate {
            subject: presented.subject.clone(),
            thumbprint: presented.thumbprint.clone(),
            valid_from: presented.valid_from.clone(),
            valid_until: presented.valid_until.clone(),
            path,
            already,
            own_certificate: self.pki_dir.join("own").join("cert.der"),
        })
    }

    /// The endpoint whose certificate the source checks.
    fn endpoint_with_certificate<'a>(
        &self,
        endpoints: &'a [EndpointDescription],
    ) -> Result<&'a EndpointDescription, OpcUaAccessError> {
        let (policy, mode) = security_of(&self.spec);
        let with_certificate =
            |endpoint: &&EndpointDescription| !endpoint.server_certificate.is_null_or_empty();
        endpoints
            .iter()
            .filter(with_certificate)
            .find(|endpoint| {
                endpoint.security_policy_uri.as_ref() == policy.to_uri() && endpoint.security_mode == mode
            })
            .or_else(|| {
                // A source without security checks no certificate; trust the one the server
                // presents elsewhere, for when it turns security on.
                (self.spec.security.is_empty() || self.spec.security == "None")
                    .then(|| endpoints.iter().find(with_certificate))
                    .flatten()
            })
            .ok_or_else(|| {
                OpcUaAccessError::NoCertificate(self.spec.url.clone(), format!("{policy} {mode:?}"))
            })
    }

    /// Runs `work` in a session of its own with the server, as the source signs in.
    pub(super) async fn with_session<T>(
        &self,
        work: impl AsyncFnOnce(&Arc<Session>) -> Result<T, OpcUaAccessError>,
    ) -> Result<T, OpcUaAccessError> {
        let mut client = opcua_client::build(
            opcua_client::client_builder(&self.spec, &self.pki_dir).session_retry_limit(0),
        )
        .map_err(|reason| self.unreachable(reason))?;
        let (session, event_loop) = opcua_client::open_session(
            &mut client,
            &self.spec,
            self.password.as_ref().map(SecretValue::expose),
        )
        .await
        .map_err(|reason| self.unreachable(reason))?;
        let mut running = event_loop.spawn();
        let up = tokio::select! {
            ended = &mut running => Err(self.refused(ended.unwrap_or(StatusCode::BadUnexpectedError))),
            up = tokio::time::timeout(CONNECT_TIMEOUT, session.wait_for_connection()) => match up {
                Ok(true) => Ok(()),
                Ok(false) => Err(self.unreachable("the session did not come up".to_owned())),
                Err(_) => Err(self.unreachable(format!("the session did not come up within {CONNECT_TIMEOUT:?}"))),
            },
        };
        let result = match up {
            Ok(()) => work(&session).await,
            Err(error) => Err(error),
        };
        let _ = tokio::time::timeout(Duration::from_secs(2), session.disconnect()).await;
        running.abort();
        result
    }

    fn refused(&self, status: StatusCode) -> OpcUaAccessError {
        if is_untrusted(status) {
            OpcUaAccessError::Untrusted(untrusted_advice(&self.spec, &self.pki_dir))
        } else {
            self.unreachable(words(status))
        }
    }

    pub(super) fn unreachable(&self, reason: String) -> OpcUaAccessError {
        OpcUaAccessError::Unreachable(self.spec.url.clone(), reason)
    }

    pub(super) fn service_failed(&self, reason: impl std::fmt::Display) -> OpcUaAccessError {
        OpcUaAccessError::Service(self.spec.url.clone(), reason.to_string())
    }
}

/// Writes a trusted certificate's DER to `path`, making its folder.
fn write_trusted(path: &Path, der: &[u8]) -> Result<(), OpcUaAccessError> {
    let failed = |error: std::io::Error| OpcUaAccessError::Pki(path.to_owned(), error.to_string());
    if let Some(folder) = path.parent() {
        std::fs::create_dir_all(folder).map_err(failed)?;
    }
    std::fs::write(path, der).map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_password() {
        let access = OpcUaAccess {
            spec: SourceSpec {
                username: "operator".to_owned(),
                password: "/secret:PlcPassword".to_owned(),
                ..SourceSpec::new("plc", "opc.tcp://127.0.0.1:4840")
            },
            password: Some(SecretValue::new("hunter2-the-password".to_owned())),
            pki_dir: PathBuf::from("pki"),
        };
        let shown = format!("{access:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("redacted"), "{shown}");
    }
}
