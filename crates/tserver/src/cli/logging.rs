//! How `tserver` logs: the line format (text or JSON) and the filter (`RUST_LOG`, with rmcp's
//! and async-opcua's own lines off unless named).

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{EnvFilter, Layer};

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One line of text per event, with its spans' fields before it.
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, the event's fields (`message`
    /// among them) and `spans`, the fields of each span it happened in.
    Json,
}

/// The layer that writes log lines in `format` to `writer` (text with ANSI colours when
/// `ansi`). The server and the tests that check logs for secrets build it the same way.
pub fn log_layer<S, W>(format: LogFormat, writer: W, ansi: bool) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(writer)
            .with_ansi(ansi)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .with_writer(writer)
            .boxed(),
    }
}

/// Libraries whose own lines are off unless `RUST_LOG` names them (a directive starting with
/// the name on the left), and the log targets each covers.
///
/// rmcp logs what MCP clients send whole (their `clientInfo`, method names, request ids,
/// notifications) at info, warn and error, and session ids at info; the HTTP surface logs what
/// an operator needs of MCP itself, bounded. async-opcua logs every failed reconnect and
/// refused certificate of every session, many a second while a server is away; the OPC UA
/// source logs what an operator needs of it, at most once a minute.
const QUIET_LIBRARIES: &[(&str, &[&str])] = &[
    ("rmcp", &["rmcp"]),
    (
        "opcua",
        &[
            "opcua_client",
            "opcua_core",
            "opcua_crypto",
            "opcua_types",
            "opcua_nodes",
        ],
    ),
];

/// The log filter: `RUST_LOG` (default `info`), with the [`QUIET_LIBRARIES`] off unless
/// `RUST_LOG` names them.
pub fn log_filter(rust_log: Option<&str>) -> EnvFilter {
    let spec = rust_log.filter(|spec| !spec.trim().is_empty()).unwrap_or("info");
    let mut filter = EnvFilter::try_new(spec).unwrap_or_else(|_| EnvFilter::new("info"));
    for (name, targets) in QUIET_LIBRARIES {
        let named = spec
            .split(',')
            .any(|directive| directive.trim_start().starts_with(name));
        if named {
            continue;
        }
        for target in *targets {
            if let Ok(off) = format!("{target}=off").parse() {
                filter = filter.add_directive(off);
            }
        }
    }
    filter
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::{Context, SubscriberExt};

    use super::*;

    /// Records the target and level of every event it is shown.
    struct Seen(Arc<Mutex<Vec<String>>>);

    impl<S: tracing::Subscriber> Layer<S> for Seen {
        fn on_event(&self, event: &tracing::Event<'_>, _context: Context<'_, S>) {
            let metadata = event.metadata();
            self.0
                .lock()
                .expect("lock")
                .push(format!("{} {}", metadata.target(), metadata.level()));
        }
    }

    /// The events of rmcp and of tserver that [`log_filter`] lets through for `rust_log`.
    fn passed(rust_log: Option<&str>) -> Vec<String> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry()
            .with(log_filter(rust_log))
            .with(Seen(Arc::clone(&seen)));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "rmcp::service", "Service initialized as server");
            tracing::error!(target: "rmcp::transport::streamable_http_server", "Failed to serve session");
            tracing::warn!(target: "opcua_client::session::event_loop", "Failed to connect to server");
            tracing::info!(target: "tserver::server", "listening");
            tracing::debug!(target: "tserver::server", "details");
        });
        // The subscriber, and the layer's handle with it, is gone once `with_default` returns.
        Arc::try_unwrap(seen)
            .expect("the only handle left")
            .into_inner()
            .expect("lock")
    }

    #[test]
    fn rmcp_and_opcua_log_nothing_unless_rust_log_names_them() {
        assert_eq!(passed(None), ["tserver::server INFO"]);
        assert_eq!(passed(Some("info")), ["tserver::server INFO"]);
        assert_eq!(
            passed(Some("debug")),
            ["tserver::server INFO", "tserver::server DEBUG"],
            "not even at debug"
        );
        assert_eq!(
            passed(Some("info,rmcp=error")),
            [
                "rmcp::transport::streamable_http_server ERROR",
                "tserver::server INFO"
            ],
            "an operator naming rmcp gets what they named"
        );
        assert_eq!(
            passed(Some("info,opcua=warn")),
            ["opcua_client::session::event_loop WARN", "tserver::server INFO"],
            "naming opcua lets every async-opcua crate speak"
        );
    }
}
