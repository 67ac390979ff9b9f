//! The operator panel in a real headless Chromium (the tests' chromedriver harness): how long a
//! logged-in page takes from navigation to its first live value drawn, and how much the page
//! weighs as the browser loaded it.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use tserver_proto::v1::{TagWrite, WriteTagsRequest, client_frame, server_frame, tag_write};
use tserver_tests::chromium::{Browser, Chromedriver, PANEL_PC};

use super::plant_bench::BENCH_FOLDER;
use super::report::{Results, median};
use super::verdicts::{self, Verdicts};
use super::websocket_client::Socket;

/// The User Timing mark the panel sets when it first draws a live value (plant.js).
const FIRST_VALUE_MARK: &str = "tserver:first-live-value";

/// Longest one load may take to show its first value before the run fails.
const PATIENCE: Duration = Duration::from_secs(15);

/// Loads the panel `loads` times (after one load that logs in) and judges the median time to
/// the first live value and the page's weight.
pub(crate) fn judge(
    http_addr: &str,
    (loads, bench_tags): (usize, usize),
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(measure(http_addr, loads, bench_tags))?;
    let first_value = report["firstLiveValueMs"]["median"].as_f64().unwrap_or(f64::NAN);
    let weight = report["pageKiB"].as_f64().unwrap_or(f64::NAN);
    eprintln!(
        "{:<28} first live value {first_value:.0} ms (median of {loads}, max {:.0}), page {weight:.1} KiB",
        "panel in Chromium",
        report["firstLiveValueMs"]["max"].as_f64().unwrap_or(f64::NAN),
    );
    verdicts.judge(
        "Operator panel: page load to first live value, p50".to_owned(),
        format!(
            "{first_value:.0} ms (of {loads} loads, max {:.0} ms)",
            report["firstLiveValueMs"]["max"].as_f64().unwrap_or(f64::NAN)
        ),
        verdicts::PANEL_FIRST_VALUE,
        first_value,
        true,
    );
    verdicts.judge(
        "Operator panel: page weight, uncompressed".to_owned(),
        format!("{weight:.1} KiB in {} files", report["pageFiles"]),
        verdicts::PANEL_WEIGHT,
        weight,
        true,
    );
    results.insert("Operator panel in Chromium", report);
    Ok(())
}

/// Gives the bench tags a value (the page opens on a folder of them), logs a browser in, then
/// loads the page `loads` times reading the mark of each.
async fn measure(http_addr: &str, loads: usize, bench_tags: usize) -> anyhow::Result<Value> {
    write_bench_tags(http_addr, bench_tags).await?;
    let driver = Chromedriver::start();
    let (width, height) = PANEL_PC;
    let browser = driver.browser(width, height).await;
    let page = format!("http://{http_addr}/");
    browser.open(&page).await;
    let (weight, files) = page_weight(&browser).await?;
    log_in(&browser).await?;
    let mut times = Vec::with_capacity(loads);
    for _ in 0..loads {
        browser.open(&page).await;
        times.push(first_value_ms(&browser).await?);
    }
    browser.close().await;
    Ok(json!({
        "loads": loads,
        "firstLiveValueMs": {
            "median": median(times.iter().copied()),
            "min": times.iter().copied().fold(f64::INFINITY, f64::min),
            "max": times.iter().copied().fold(0.0, f64::max),
        },
        "pageKiB": weight as f64 / 1024.0,
        "pageFiles": files,
    }))
}

/// Writes a value to every bench tag, as many in a call as a call takes.
async fn write_bench_tags(http_addr: &str, bench_tags: usize) -> anyhow::Result<()> {
    /// The most writes one WriteTags call takes (docs/LIMITS.md).
    const WRITES_PER_CALL: usize = 1_000;
    let mut socket = Socket::open(http_addr).await?;
    let names: Vec<String> = (0..bench_tags)
        .map(|index| format!("{BENCH_FOLDER}.T{index:04}"))
        .collect();
    for chunk in names.chunks(WRITES_PER_CALL) {
        let writes = chunk
            .iter()
            .map(|name| TagWrite {
                name: name.clone(),
                value: Some(tag_write::Value::Number(1.0)),
            })
            .collect();
        match socket
            .call(client_frame::Body::WriteTags(WriteTagsRequest {
                writes,
                signatures: Vec::new(),
            }))
            .await?
        {
            Some(server_frame::Body::WriteTags(reply)) => {
                if let Some(refused) = reply.results.iter().find(|result| !result.error.is_empty()) {
                    bail!("the bench tags were not written: {}", refused.error);
                }
            }
            other => bail!("WriteTags was answered with {other:?}"),
        }
    }
    Ok(())
}

/// The bytes the document and every file it loaded decoded to (not the login API's answers),
/// and how many files that was.
async fn page_weight(browser: &Browser) -> anyhow::Result<(u64, u64)> {
    let entries = browser
        .run(
            "return [performance.getEntriesByType('navigation')[0], ...performance.getEntriesByType('resource')]
                .filter((entry) => entry.initiatorType !== 'fetch' && entry.initiatorType !== 'xmlhttprequest')
                .map((entry) => entry.decodedBodySize);",
            vec![],
        )
        .await;
    let sizes: Vec<u64> = entries
        .as_array()
        .context("the page's resource timings are not a list")?
        .iter()
        .map(|size| size.as_u64().context("a resource timing without its size"))
        .collect::<anyhow::Result<_>>()?;
    Ok((sizes.iter().sum(), sizes.len() as u64))
}

/// Logs the page in as the bench's passwordless guest through the login API, as the login
/// form does; the session cookie then logs in every later load.
pub(super) async fn log_in(browser: &Browser) -> anyhow::Result<()> {
    let status = browser
        .run_async(
            "const done = arguments[0];
             fetch('/api/login', {method: 'POST', headers: {'Content-Type': 'application/json'},
                 body: JSON.stringify({user: 'guest', password: ''}), credentials: 'same-origin'})
               .then((response) => done(response.status), (error) => done(String(error)));",
            vec![],
        )
        .await;
    if status != json!(200) {
        bail!("the browser login was answered with {status}");
    }
    Ok(())
}

/// Milliseconds from the navigation's start to the panel's first-value mark, once it is set.
async fn first_value_ms(browser: &Browser) -> anyhow::Result<f64> {
    mark_ms(browser, FIRST_VALUE_MARK, PATIENCE).await
}

/// Milliseconds from the navigation's start to the page's User Timing mark `name`, once the
/// page sets it (within `patience`).
pub(super) async fn mark_ms(browser: &Browser, name: &str, patience: Duration) -> anyhow::Result<f64> {
    let deadline = Instant::now() + patience;
    loop {
        let mark = browser
            .run(
                "const mark = performance.getEntriesByName(arguments[0])[0]; return mark ? mark.startTime : null;",
                vec![json!(name)],
            )
            .await;
        if let Some(ms) = mark.as_f64() {
            return Ok(ms);
        }
        if Instant::now() > deadline {
            bail!("the page set no {name} within {patience:?} of loading");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
