//! The operator panel's page: `/` (index.html) and `/panel/<asset>` (its stylesheet, icon and
//! JavaScript modules), embedded in the binary, so serving it needs no files and no build
//! step. It is mounted beside the health checks, outside the bearer-token layer: the page
//! itself holds nothing of the plant; everything it shows comes over `/ws` after a login.
//!
//! Every response, 404s included, carries the panel's strict Content-Security-Policy (no
//! inline script or style, nothing from another origin), `X-Content-Type-Options: nosniff`
//! and `Referrer-Policy: no-referrer`. Assets are answered with an `ETag` (a hash of their
//! bytes) and `Cache-Control: no-cache`, so a browser revalidates and a new binary's page is
//! never mixed with an old one's scripts.

use std::sync::LazyLock;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

/// The panel's Content-Security-Policy. `connect-src 'self'` covers the same-origin
/// WebSocket; the trend's CSV is a `blob:` download, which is a navigation the policy does
/// not govern, so nothing beyond the panel's own origin is allowed.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// One embedded file: its path under `/panel/`, its content type and bytes.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";

macro_rules! asset {
    ($path:literal, $content_type:expr) => {
        Asset {
            path: $path,
            content_type: $content_type,
            bytes: include_bytes!(concat!("assets/", $path)),
        }
    };
}

/// Every file of the page; `index.html` is also `/`.
const ASSETS: &[Asset] = &[
    asset!("index.html", HTML),
    asset!("panel.css", "text/css; charset=utf-8"),
    asset!("favicon.svg", "image/svg+xml"),
    asset!("js/main.js", JS),
    asset!("js/connection.js", JS),
    asset!("js/dom.js", JS),
    asset!("js/format.js", JS),
    asset!("js/alarms.js", JS),
    asset!("js/alarm_dialog.js", JS),
    asset!("js/alarm_kpis.js", JS),
    asset!("js/overview.js", JS),
    asset!("js/plant.js", JS),
    asset!("js/writes.js", JS),
    asset!("js/trend.js", JS),
    asset!("js/tag_detail.js", JS),
    asset!("js/assistant.js", JS),
    asset!("js/proposals.js", JS),
];

/// Each asset's `ETag`, in [`ASSETS`] order: the first 16 bytes of its SHA-256, quoted.
static ETAGS: LazyLock<Vec<HeaderValue>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|asset| {
            let digest = Sha256::digest(asset.bytes);
            let tag = format!("\"{}\"", hex_of(&digest[..16]));
            HeaderValue::from_str(&tag).unwrap_or(HeaderValue::from_static("\"panel\""))
        })
        .collect()
});

fn hex_of(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut text, byte| {
        let _ = write!(text, "{byte:02x}");
        text
    })
}

/// The page's routes, ready to merge into the HTTP surface.
pub(crate) fn routes() -> Router {
    Router::new()
        .route(
            "/",
            get(|headers: HeaderMap| async move { serve("index.html", &headers) }),
        )
        .route(
            "/panel/{*asset}",
            get(|Path(asset): Path<String>, headers: HeaderMap| async move { serve(&asset, &headers) }),
        )
}

fn serve(path: &str, request: &HeaderMap) -> Response {
    let Some(index) = ASSETS.iter().position(|asset| asset.path == path) else {
        return with_policy(
            (
                StatusCode::NOT_FOUND,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "no such file in the operator panel\n",
            )
                .into_response(),
        );
    };
    let asset = &ASSETS[index];
    let etag = ETAGS[index].clone();
    let fresh = request.get(header::IF_NONE_MATCH).is_some_and(|wanted| {
        wanted
            .as_bytes()
            .split(|b| *b == b',')
            .any(|tag| tag.trim_ascii() == etag.as_bytes())
    });
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, asset.content_type)], asset.bytes).into_response()
    };
    let headers = response.headers_mut();
    headers.insert(header::ETAG, etag);
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    with_policy(response)
}

/// The headers every panel response carries.
fn with_policy(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Everything the page loads, uncompressed: the budget `cargo xtask bench` reports against.
    #[test]
    fn the_page_weighs_less_than_its_budget() {
        let weight: usize = ASSETS.iter().map(|asset| asset.bytes.len()).sum();
        assert!(weight <= 200 * 1024, "{weight} bytes");
    }

    #[test]
    fn no_page_file_holds_inline_script_or_style() {
        for asset in ASSETS.iter().filter(|asset| asset.path.ends_with(".html")) {
            let text = std::str::from_utf8(asset.bytes).expect("utf-8");
            for script in text.split("<script").skip(1) {
                let tag = &script[..script.find('>').expect("a closed tag")];
                assert!(
                    tag.contains("src="),
                    "{}: an inline script: <script{tag}>",
                    asset.path
                );
            }
            assert!(!text.contains("style="), "{}: a style attribute", asset.path);
            assert!(!text.contains("<style"), "{}: an inline stylesheet", asset.path);
            for attribute in text.split(" on").skip(1) {
                let name_end = attribute
                    .find(|c: char| !c.is_ascii_lowercase())
                    .unwrap_or(attribute.len());
                assert!(
                    name_end == 0 || !attribute[name_end..].starts_with('='),
                    "{}: an inline handler: on{}",
                    asset.path,
                    &attribute[..name_end]
                );
            }
        }
    }

    #[test]
    fn every_module_the_page_imports_is_served() {
        for asset in ASSETS.iter().filter(|asset| asset.path.ends_with(".js")) {
            let text = std::str::from_utf8(asset.bytes).expect("utf-8");
            for import in text.split("from './").skip(1) {
                let name = &import[..import.find('\'').expect("a closed string")];
                let path = format!("js/{name}");
                assert!(
                    ASSETS.iter().any(|served| served.path == path),
                    "{} imports {path}, which is not served",
                    asset.path
                );
            }
        }
    }
}
