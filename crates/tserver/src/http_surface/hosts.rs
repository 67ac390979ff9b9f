//! The host names the server is reached by, checked on every browser request before anything
//! else: against DNS rebinding, a hostile page whose own name now resolves to this server sends
//! an `Origin` and a `Host` that agree with each other, so only a `Host` this server knows it
//! answers to (the loopback names, its bound address, `--http-allow-host`) lets a browser in.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::{StatusCode, header};

use super::browser_login::refusal;

/// The names (each optionally with a port) a request's `Host` may carry.
#[derive(Debug, Clone)]
pub(super) struct AllowedHosts(Arc<[Allowed]>);

/// One allowed name, any port or one.
#[derive(Debug)]
struct Allowed {
    name: String,
    port: Option<u16>,
}

/// A `Host` value split into its name (brackets of an IPv6 address taken off) and port.
fn split(host: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = host.strip_prefix('[') {
        let (name, after) = rest.split_once(']')?;
        return match after {
            "" => Some((name, None)),
            _ => Some((name, Some(after.strip_prefix(':')?.parse().ok()?))),
        };
    }
    match host.rsplit_once(':') {
        // More than one colon without brackets: a bare IPv6 address, as the allow-list may
        // write one.
        Some((name, _)) if name.contains(':') => Some((host, None)),
        Some((name, port)) => Some((name, Some(port.parse().ok()?))),
        None => Some((host, None)),
    }
}

impl AllowedHosts {
    /// The allow-list from its entries (`name`, `name:port`, `[v6]:port` or a bare IPv6
    /// address); an entry that cannot be read allows nothing.
    pub(super) fn new(entries: &[String]) -> Self {
        Self(
            entries
                .iter()
                .filter_map(|entry| split(entry))
                .map(|(name, port)| Allowed {
                    name: name.to_ascii_lowercase(),
                    port,
                })
                .collect(),
        )
    }

    /// Whether a `Host` header's value names this server. Exact names only, ignoring ASCII
    /// case: `localhost.` (a fully qualified spelling any resolver may rebind) is not
    /// `localhost`.
    pub(super) fn allows(&self, host: &str) -> bool {
        let Some((name, port)) = split(host) else {
            return false;
        };
        self.0.iter().any(|allowed| {
            allowed.name.eq_ignore_ascii_case(name) && allowed.port.is_none_or(|wanted| Some(wanted) == port)
        })
    }
}

/// Refuses (421 Misdirected Request) a request whose `Host` is missing or not one this server
/// is reached by, naming the option that adds a name.
pub(super) async fn known_host(
    State(allowed): State<AllowedHosts>,
    request: Request,
    next: Next,
) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok());
    if host.is_some_and(|host| allowed.allows(host)) {
        return next.run(request).await;
    }
    refusal(
        StatusCode::MISDIRECTED_REQUEST,
        "refused: this server is not reached by that host name (the request's Host); \
         a name it should answer to is added with tserver serve --http-allow-host NAME",
    )
}

#[cfg(test)]
mod tests {
    use super::AllowedHosts;

    #[test]
    fn only_the_names_the_server_is_reached_by_are_allowed() {
        let allowed = AllowedHosts::new(&[
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
            "panel.plant.example:8443".to_owned(),
        ]);
        for host in [
            "localhost:8080",
            "LOCALHOST:8080",
            "127.0.0.1:1",
            "127.0.0.1",
            "[::1]:8080",
            "panel.plant.example:8443",
        ] {
            assert!(allowed.allows(host), "{host}");
        }
        for host in [
            "evil.example:8080",
            "10.9.8.7:8080",
            "localhost.:8080",
            "localhost.",
            "127.0.0.1.nip.io:8080",
            "panel.plant.example:8080",
            "panel.plant.example",
            "[::1",
            "localhost:port",
            "",
        ] {
            assert!(!allowed.allows(host), "{host}");
        }
    }
}
