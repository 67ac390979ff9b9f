//! What the OPC UA source and the commands that look at its server share: the client (its
//! identity and certificate folder), the endpoint a source asks for, opening a session, and
//! status codes in words.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use opcua::client::transport::TcpConnector;
use opcua::client::{Client, ClientBuilder, ClientEndpoint, IdentityToken, Session, SessionEventLoop};
use opcua::crypto::SecurityPolicy;
use opcua::types::{MessageSecurityMode, StatusCode};
use plant_model::SourceSpec;

/// How long finding the server's endpoint and opening a session may take.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// The largest message the client takes from a server, told to it at connect (the library's
/// default, 320 KiB in 5 chunks, is smaller than what a plant's PLC sends: the first values of
/// 10,000 monitored nodes in one publish response, or 12,000 references in one browse).
const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The chunks one message may come in: the largest message in chunks of the library's 64 KiB.
const MAX_CHUNKS: usize = MAX_MESSAGE_BYTES / 65_535 + 1;

/// The most elements of one array the client decodes; the message size bounds what they hold.
const MAX_ARRAY_LENGTH: usize = 1_000_000;

/// The client of source `spec`: its application certificate and key (made on first use) and
/// the servers' certificates it trusts live in `pki_dir`; a server certificate not in its
/// `trusted/` folder is refused (and left in `rejected/`).
pub(super) fn client_builder(spec: &SourceSpec, pki_dir: &Path) -> ClientBuilder {
    // The endpoint it connects to, named in the client's configuration as well: a client
    // configured with none logs a warning each time it is built.
    let (policy, mode) = security_of(spec);
    let mut endpoint = ClientEndpoint::new(spec.url.as_str());
    endpoint.security_policy = policy.to_str().to_owned();
    endpoint.security_mode = mode.into();
    ClientBuilder::new()
        .endpoint(spec.name.as_str(), endpoint)
        .application_name("TServer")
        .application_uri(format!("urn:tserver:opcua-source:{}", spec.name))
        .product_uri("urn:tserver")
        .pki_dir(pki_dir)
        .create_sample_keypair(true)
        .trust_server_certs(false)
        .session_name(format!("tserver {}", spec.name))
        .max_message_size(MAX_MESSAGE_BYTES)
        .max_chunk_count(MAX_CHUNKS)
        .max_array_length(MAX_ARRAY_LENGTH)
}

/// Builds the client `builder` describes.
pub(super) fn build(builder: ClientBuilder) -> Result<Client, String> {
    builder
        .client()
        .map_err(|errors| format!("cannot set up the OPC UA client: {}", errors.join("; ")))
}

/// The policy and mode `spec` asks for.
pub(super) fn security_of(spec: &SourceSpec) -> (SecurityPolicy, MessageSecurityMode) {
    match (spec.security.as_str(), spec.mode.as_str()) {
        ("Basic256Sha256", "Sign") => (SecurityPolicy::Basic256Sha256, MessageSecurityMode::Sign),
        ("Basic256Sha256", _) => (
            SecurityPolicy::Basic256Sha256,
            MessageSecurityMode::SignAndEncrypt,
        ),
        _ => (SecurityPolicy::None, MessageSecurityMode::None),
    }
}

/// Opens a session with the endpoint of `spec` (its policy and mode), signed in as its user
/// with `password`, or anonymously without one. The session is up once its event loop runs.
pub(super) async fn open_session(
    client: &mut Client,
    spec: &SourceSpec,
    password: Option<&str>,
) -> Result<(Arc<Session>, SessionEventLoop<TcpConnector>), String> {
    let identity = match password {
        Some(password) if !spec.username.is_empty() => {
            IdentityToken::new_user_name(spec.username.clone(), password.to_owned())
        }
        _ => IdentityToken::new_anonymous(),
    };
    let (policy, mode) = security_of(spec);
    let endpoint = (spec.url.as_str(), policy.to_str(), mode);
    match tokio::time::timeout(
        CONNECT_TIMEOUT,
        client.connect_to_matching_endpoint(endpoint, identity),
    )
    .await
    {
        Ok(Ok(pair)) => Ok(pair),
        Ok(Err(error)) => Err(format!("cannot open a session with {}: {error}", spec.url)),
        Err(_) => Err(format!(
            "{} did not open a session within {CONNECT_TIMEOUT:?}",
            spec.url
        )),
    }
}

/// Whether `status` says the server's certificate is not trusted here.
pub(super) fn is_untrusted(status: StatusCode) -> bool {
    // A certificate refused once waits in `rejected/`, and is refused from there after.
    status == StatusCode::BadCertificateUntrusted || status == StatusCode::BadSecurityChecksFailed
}

/// What to do about a server certificate this source does not trust.
pub(super) fn untrusted_advice(spec: &SourceSpec, pki_dir: &Path) -> String {
    format!(
        "the certificate of {} is not trusted: check it and trust it with `tserver sources \
         <solution> trust {}`, or copy it into {}",
        spec.url,
        spec.name,
        pki_dir.join("trusted").display()
    )
}

/// A status code in words: its name and what it means.
pub(super) fn words(status: StatusCode) -> String {
    let sub = status.sub_code();
    format!("{} ({})", sub.name(), sub.description())
}
