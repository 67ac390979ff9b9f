//! The client's real address behind a proxy: `TrustedProxies` (`serve --trusted-proxy CIDR`),
//! the PROXY protocol header (v1 and v2, parsed by `ppp`) a trusted proxy sends first on the
//! framed port, and `Forwarded` / `X-Forwarded-For` on the HTTP surface.
//!
//! Only a trusted proxy is believed: a connection from a trusted address must start with a
//! PROXY header (or it is closed), and a header from anyone else is never read as one (it is
//! the start of a frame far too large, so the connection is closed saying why). The address a
//! header names is what the login throttle counts, the logs show and the audit records.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use ipnet::IpNet;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// The addresses whose PROXY headers and forwarding headers are believed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// Proxies in these networks.
    pub fn new(networks: Vec<IpNet>) -> Self {
        Self(networks)
    }

    /// Whether `address` is a trusted proxy (an IPv4 address mapped into IPv6 counts as
    /// itself).
    pub fn contains(&self, address: IpAddr) -> bool {
        let address = address.to_canonical();
        self.0.iter().any(|network| network.contains(&address))
    }

    /// Whether no proxy is trusted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A network in `--trusted-proxy`: `CIDR` or a single address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrustedNetwork(pub IpNet);

impl FromStr for TrustedNetwork {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        text.parse::<IpNet>()
            .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
            .map(Self)
            .map_err(|_| {
                format!("{text:?} is neither a network (10.0.0.0/24, fd00::/64) nor an address (10.0.0.5)")
            })
    }
}

/// Why a trusted proxy's connection was closed before its client spoke.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProxyHeaderError {
    /// The connection did not start with a PROXY header.
    #[error(
        "no PROXY protocol header from a trusted proxy (send-proxy-v2 on HAProxy's server line; \
         or remove the address from --trusted-proxy)"
    )]
    Missing,
    /// It started like one, but is not a valid one.
    #[error("a malformed PROXY protocol header: {0}")]
    Malformed(String),
    /// The socket failed or closed before the header was whole.
    #[error("the connection ended before its PROXY protocol header: {0}")]
    Io(#[from] std::io::Error),
}

/// The v2 header's signature (its first 12 bytes).
const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";

/// A v1 header's longest form, line end included (the protocol's own bound).
const V1_MAX: usize = 107;

/// The first four bytes of a PROXY header (either version), read as a frame's length prefix:
/// how the framed port recognises one from an address it does not trust.
pub(crate) fn is_proxy_header_start(prefix: usize) -> bool {
    let prefix = u32::try_from(prefix).unwrap_or(0).to_be_bytes();
    prefix == *b"PROX" || prefix == V2_SIGNATURE[..4]
}

/// Reads the PROXY header a trusted proxy sends before anything else, and no byte past it.
/// `Some(client)` for a proxied connection; `None` for the proxy's own (v2 `LOCAL`, v1
/// `UNKNOWN`, or an address family other than TCP over IP), which keeps the proxy's address.
pub(crate) async fn read_header(socket: &mut TcpStream) -> Result<Option<SocketAddr>, ProxyHeaderError> {
    let mut header = vec![0u8; 5];
    socket.read_exact(&mut header).await?;
    if header == *b"PROXY" {
        // A text line: read to its end, byte by byte, so no byte of the client's is taken.
        while !header.ends_with(b"\r\n") {
            if header.len() >= V1_MAX {
                return Err(ProxyHeaderError::Malformed(format!(
                    "a v1 line longer than {V1_MAX} bytes"
                )));
            }
            header.push(socket.read_u8().await?);
        }
        return match ppp::v1::Header::try_from(header.as_slice()) {
            Ok(parsed) => Ok(match parsed.addresses {
                ppp::v1::Addresses::Tcp4(ip) => Some(SocketAddr::from((ip.source_address, ip.source_port))),
                ppp::v1::Addresses::Tcp6(ip) => Some(SocketAddr::from((ip.source_address, ip.source_port))),
                ppp::v1::Addresses::Unknown => None,
            }),
            Err(error) => Err(ProxyHeaderError::Malformed(format!("v1: {error}"))),
        };
    }
    if header[..] != V2_SIGNATURE[..5] {
        return Err(ProxyHeaderError::Missing);
    }
    // Signature, version and command, family and protocol, then the length of what follows.
    header.resize(16, 0);
    socket.read_exact(&mut header[5..]).await?;
    let length = usize::from(u16::from_be_bytes([header[14], header[15]]));
    header.resize(16 + length, 0);
    socket.read_exact(&mut header[16..]).await?;
    match ppp::v2::Header::try_from(header.as_slice()) {
        Ok(parsed) => Ok(match (parsed.command, parsed.addresses) {
            (ppp::v2::Command::Proxy, ppp::v2::Addresses::IPv4(ip)) => {
                Some(SocketAddr::from((ip.source_address, ip.source_port)))
            }
            (ppp::v2::Command::Proxy, ppp::v2::Addresses::IPv6(ip)) => {
                Some(SocketAddr::from((ip.source_address, ip.source_port)))
            }
            _ => None,
        }),
        Err(error) => Err(ProxyHeaderError::Malformed(format!("v2: {error}"))),
    }
}

/// The client of an HTTP request from `peer`: when `peer` is a trusted proxy, the nearest
/// address that is not one in `Forwarded` (else `X-Forwarded-For`), walking from the last
/// hop back; otherwise `peer` itself, whatever the headers say.
pub(crate) fn forwarded_client(trusted: &TrustedProxies, peer: IpAddr, headers: &http::HeaderMap) -> IpAddr {
    if !trusted.contains(peer) {
        return peer;
    }
    let chain = |name: http::header::HeaderName, parse: fn(&str) -> Option<Vec<Option<IpAddr>>>| {
        let values: Vec<&str> = headers
            .get_all(name)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .collect();
        if values.is_empty() {
            return None;
        }
        // Several header lines are one list, in order.
        parse(&values.join(","))
    };
    let hops = chain(http::header::FORWARDED, |text| {
        forwarded_header_value::ForwardedHeaderValue::from_forwarded(&for_parameters(text))
            .ok()
            .map(|value| value.iter().map(|stanza| stanza.forwarded_for_ip()).collect())
    })
    .or_else(|| {
        chain(http::header::HeaderName::from_static("x-forwarded-for"), |text| {
            forwarded_header_value::ForwardedHeaderValue::from_x_forwarded_for(text)
                .ok()
                .map(|value| value.iter().map(|stanza| stanza.forwarded_for_ip()).collect())
        })
    });
    let Some(hops) = hops else {
        return peer;
    };
    let mut client = peer;
    for hop in hops.into_iter().rev() {
        // A hop without an address (obfuscated, `unknown`) ends what can be known.
        let Some(hop) = hop else { break };
        client = hop;
        if !trusted.contains(hop) {
            break;
        }
    }
    client
}

/// The `for=` parameters of a `Forwarded` value, stanza by stanza: the only ones read, and the
/// parser slices a quoted `host=` without checking its length (`host="` would panic).
fn for_parameters(forwarded: &str) -> String {
    forwarded
        .split(',')
        .map(|stanza| {
            stanza
                .split(';')
                .filter(|part| {
                    part.trim_start()
                        .get(..4)
                        .is_some_and(|key| key.eq_ignore_ascii_case("for="))
                })
                .collect::<Vec<_>>()
                .join(";")
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forwarded_value_of_any_shape_is_read_without_a_panic() {
        let proxies = trusted(&["127.0.0.1"]);
        let proxy: IpAddr = "127.0.0.1".parse().expect("an address");
        for value in ["host=\"", "for=\"", "for=[", "for=\"[\";host=\"", ";;,,"] {
            let client = forwarded_client(&proxies, proxy, &headers(&[("forwarded", value)]));
            assert_eq!(client, proxy, "{value}");
        }
        let named = forwarded_client(
            &proxies,
            proxy,
            &headers(&[("forwarded", "host=\"\";for=10.0.0.9;proto=https")]),
        );
        assert_eq!(named, "10.0.0.9".parse::<IpAddr>().expect("an address"));
    }

    fn trusted(networks: &[&str]) -> TrustedProxies {
        TrustedProxies::new(
            networks
                .iter()
                .map(|text| text.parse::<TrustedNetwork>().expect("a network").0)
                .collect(),
        )
    }

    fn headers(pairs: &[(&'static str, &str)]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().expect("a header value"));
        }
        map
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn networks_and_single_addresses_are_accepted_and_mistakes_named() {
        let proxies = trusted(&["10.0.0.0/24", "192.0.2.7", "fd00::/64"]);
        assert!(proxies.contains(ip("10.0.0.200")));
        assert!(proxies.contains(ip("192.0.2.7")));
        assert!(
            proxies.contains(ip("::ffff:192.0.2.7")),
            "a mapped address is itself"
        );
        assert!(!proxies.contains(ip("192.0.2.8")));
        assert!(proxies.contains(ip("fd00::1")));
        let error = "10.0.0/33".parse::<TrustedNetwork>().expect_err("refused");
        assert!(error.contains("\"10.0.0/33\""), "{error}");
    }

    #[test]
    fn forwarding_headers_are_believed_only_from_a_trusted_proxy_and_skip_trusted_hops() {
        let proxies = trusted(&["10.0.0.0/24"]);
        let forwarded = headers(&[("x-forwarded-for", "203.0.113.9, 198.51.100.4, 10.0.0.3")]);
        assert_eq!(
            forwarded_client(&proxies, ip("10.0.0.1"), &forwarded),
            ip("198.51.100.4"),
            "the nearest untrusted hop: a client cannot forge what lies behind its own proxy"
        );
        assert_eq!(
            forwarded_client(&proxies, ip("192.0.2.1"), &forwarded),
            ip("192.0.2.1")
        );
        let rfc = headers(&[(
            "forwarded",
            "for=192.0.2.60;proto=http, for=\"[2001:db8::1]:4711\"",
        )]);
        assert_eq!(
            forwarded_client(&proxies, ip("10.0.0.1"), &rfc),
            ip("2001:db8::1")
        );
        assert_eq!(
            forwarded_client(&proxies, ip("10.0.0.1"), &headers(&[])),
            ip("10.0.0.1"),
            "no header: the proxy's own request"
        );
        let garbage = headers(&[("x-forwarded-for", "not an address")]);
        assert_eq!(
            forwarded_client(&proxies, ip("10.0.0.1"), &garbage),
            ip("10.0.0.1")
        );
    }

    #[test]
    fn both_header_versions_start_like_no_frame_a_client_would_send() {
        assert!(is_proxy_header_start(u32::from_be_bytes(*b"PROX") as usize));
        assert!(is_proxy_header_start(u32::from_be_bytes(*b"\r\n\r\n") as usize));
        assert!(!is_proxy_header_start(40));
    }
}
