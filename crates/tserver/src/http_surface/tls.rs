//! HTTPS for the HTTP surface: the TCP listener's certificate offered with HTTP's ALPN. Each
//! connection does its handshake in its own task, on its seat and within the header timeout
//! (`connections.rs`), so a slow or silent client never holds up the others' accepts.

use std::sync::Arc;

use tserver_tls::rustls;

/// The TCP listener's TLS configuration, speaking HTTP/1.1 by ALPN (the TCP listener's speaks
/// no ALPN; HTTP clients ask for it).
pub(super) fn http_config(config: &Arc<rustls::ServerConfig>) -> Arc<rustls::ServerConfig> {
    let mut http_config = rustls::ServerConfig::clone(config);
    http_config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(http_config)
}
