//! `xtask websocket-bench ...`, the WebSocket side of `cargo xtask bench`: a call load or
//! subscribers held under changing tags, against tserver's `/ws`. It runs as its own process,
//! built in the bench's profile like `tclient`, and prints one JSON report on standard output.

use std::time::Duration;

use anyhow::{Context, bail};

use super::websocket_client::{Load, LoadCall};
use super::websocket_subscribers::{self, Hold};

/// `xtask websocket-bench load|subscribe ...`: prints a JSON report.
pub(crate) fn measure(args: &[String]) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let report = match args {
        [kind, http_addr, scenario, connections, count, seconds, warmup] if kind == "load" => {
            let load = Load {
                scenario: match scenario.as_str() {
                    "ping" => LoadCall::Ping,
                    query => LoadCall::Chat(query.to_owned()),
                },
                connections: connections.parse().context("CONNECTIONS")?,
                count: count.parse().context("COUNT")?,
                duration: Duration::try_from_secs_f64(seconds.parse().context("SECONDS")?)?,
                warmup: Duration::try_from_secs_f64(warmup.parse().context("WARMUP")?)?,
            };
            runtime.block_on(load.run(http_addr))?
        }
        [kind, http_addr, pid, subscribers, tags, seconds] if kind == "subscribe" => {
            runtime.block_on(websocket_subscribers::hold(&Hold {
                http_addr: http_addr.clone(),
                tserver_pid: pid.parse().context("PID")?,
                subscribers: subscribers.parse().context("SUBSCRIBERS")?,
                tags: tags.parse().context("TAGS")?,
                duration: Duration::try_from_secs_f64(seconds.parse().context("SECONDS")?)?,
            }))?
        }
        _ => bail!(
            "usage: xtask websocket-bench load HTTP_ADDR ping|QUERY CONNECTIONS COUNT SECONDS WARMUP_SECONDS \
             | subscribe HTTP_ADDR TSERVER_PID SUBSCRIBERS TAGS SECONDS"
        ),
    };
    println!("{report}");
    Ok(())
}
