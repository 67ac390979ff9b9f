//! Browser-like WebSocket subscribers held under changing tags: many `/ws` clients each
//! subscribed to the same bench tags while one writer changes all of them ten times a second;
//! judges that every subscriber is fed throughout and tserver's memory per subscriber.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use serde_json::{Value, json};
use tserver_proto::v1::{
    SubscribeRequest, TagWrite, WriteTagsRequest, client_frame, server_frame, tag_write,
};

use super::harness::Bench;
use super::plant_bench::BENCH_FOLDER;
use super::report::{Results, median};
use super::verdicts::{self, Verdicts};
use super::websocket_client::Socket;
use crate::processes::{measuring_side, rss_bytes};

/// The hold is cut into this many equal windows; a subscriber is fed throughout when each
/// window brought it at least one update.
const WINDOWS: usize = 5;

/// How many WebSockets open and subscribe at once (a crowd of panels starting, not a flood).
const OPENING_AT_ONCE: usize = 32;

/// The shape of a run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SubscriberPlan {
    pub(crate) subscribers: usize,
    /// Bench tags each subscribes to, all written 10 times a second.
    pub(crate) tags: usize,
    /// Seconds the subscribers are held while the tags change.
    pub(crate) seconds: f64,
}

/// Runs the plan against the bench's tserver (HTTP surface at `http_addr`) and judges it.
pub(crate) fn judge(
    bench: &Bench,
    http_addr: &str,
    plan: SubscriberPlan,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let SubscriberPlan {
        subscribers,
        tags,
        seconds,
    } = plan;
    let report = measuring_side(
        &bench.tool("xtask"),
        "websocket-bench",
        &[
            "subscribe",
            http_addr,
            &bench.tserver_pid.to_string(),
            &subscribers.to_string(),
            &tags.to_string(),
            &seconds.to_string(),
        ],
    )?;
    let fed = report["fedWindowShare"].as_f64().unwrap_or(0.0);
    let held = report["held"].as_u64().unwrap_or(0);
    let per_subscriber = report["perSubscriberKiB"].as_f64().unwrap_or(f64::NAN);
    eprintln!(
        "{:<28} {held} held, {:.0} readings/s each (median, of {} changed), {:.0}% of windows fed, skipped {}, {per_subscriber:.1} KiB each",
        format!("tserver /ws subscribers x{subscribers}"),
        report["readingsPerSubscriberPerSecond"]["median"]
            .as_f64()
            .unwrap_or(0.0),
        tags * 10,
        fed * 100.0,
        report["skipped"],
    );
    let what = format!("{subscribers} WebSocket subscribers x {tags} tags changing 10/s");
    verdicts.judge(
        format!("{what}: fed throughout"),
        format!(
            "{held} held, {:.0}% of {WINDOWS} windows fed, {:.0} (min {:.0}) readings/s each, {} skipped",
            fed * 100.0,
            report["readingsPerSubscriberPerSecond"]["median"]
                .as_f64()
                .unwrap_or(0.0),
            report["readingsPerSubscriberPerSecond"]["min"]
                .as_f64()
                .unwrap_or(0.0),
            report["skipped"],
        ),
        verdicts::WEBSOCKET_FED,
        fed,
        held == subscribers as u64 && report["writeErrors"].as_u64() == Some(0),
    );
    let growth = report["lastOverSecondWindow"].as_f64().unwrap_or(f64::NAN);
    let settling_windows = report["settling"]["windowMedians"].as_array().map_or(0, Vec::len);
    let settled = if report["settling"]["settled"].as_bool() == Some(true) {
        format!("the writes alone settled in {settling_windows} windows")
    } else {
        format!("the writes alone still growing after {settling_windows} windows")
    };
    verdicts.judge(
        format!("{what}: memory bounded"),
        format!("growth in the last window {growth:.2}x the second's (medians; {settled})"),
        verdicts::WEBSOCKET_BOUNDED,
        growth,
        held == subscribers as u64,
    );
    verdicts.judge(
        format!("{what}: memory"),
        format!("{per_subscriber:.1} KiB each"),
        verdicts::WEBSOCKET_MEMORY,
        per_subscriber,
        held == subscribers as u64,
    );
    results.insert("WebSocket subscribers", report);
    Ok(())
}

/// The measuring side's arguments.
#[derive(Debug)]
pub(crate) struct Hold {
    pub(crate) http_addr: String,
    pub(crate) tserver_pid: u32,
    pub(crate) subscribers: usize,
    pub(crate) tags: usize,
    pub(crate) duration: Duration,
}

/// What one subscriber received during the hold.
#[derive(Debug, Default)]
struct Fed {
    readings: u64,
    skipped: u64,
    /// Updates in each window.
    windows: [u64; WINDOWS],
    /// Whether it stayed connected and subscribed to the end.
    held: bool,
}

/// Writes every tag 10 times a second for a settling hold with no subscriber, then opens and
/// subscribes the subscribers, writes for the hold while they read, and reports what they got
/// and tserver's memory.
pub(crate) async fn hold(hold: &Hold) -> anyhow::Result<Value> {
    let names: Vec<String> = (0..hold.tags)
        .map(|index| format!("{BENCH_FOLDER}.T{index:04}"))
        .collect();
    let mut writer = Writer::open(&hold.http_addr, &names, hold.tserver_pid).await?;
    let unsettled = rss_bytes(hold.tserver_pid).context("tserver's memory is unreadable")?;
    let settling = writer.settle(hold.duration / WINDOWS as u32).await;
    let baseline = rss_bytes(hold.tserver_pid).context("tserver's memory is unreadable")?;
    let opened: Vec<anyhow::Result<Socket>> = futures::stream::iter(0..hold.subscribers)
        .map(|_| subscribe(&hold.http_addr, &names))
        .buffer_unordered(OPENING_AT_ONCE)
        .collect()
        .await;
    let sockets = opened.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    let subscribed = rss_bytes(hold.tserver_pid).unwrap_or(0);
    let start = Instant::now();
    let until = start + hold.duration;
    let readers: Vec<_> = sockets
        .into_iter()
        .map(|socket| tokio::spawn(read_updates(socket, start, until, hold.duration)))
        .collect();
    let (samples, write_errors) = writer.write_until((start, until)).await;
    let mut fed = Vec::with_capacity(readers.len());
    for reader in readers {
        fed.push(reader.await.context("a subscriber's task failed")?);
    }
    let end = rss_bytes(hold.tserver_pid).unwrap_or(0);
    let peak = samples.peak().max(subscribed).max(end);
    // Memory that keeps growing once every subscriber is fed is a backlog, not a bound. Every
    // subscriber is fed by the end of the first window, so the second window is the load's
    // steady state; a backlog grows from it to the last window. Each window's median, not its
    // peak: the write buffers of 500 sockets fill and drain in step, and one sample caught
    // while they are full is a moment, not a trend (the peak is judged per subscriber).
    let window_growth = samples.median_growth(baseline);
    let backlog_growth = last_over_second(&window_growth);
    let seconds = hold.duration.as_secs_f64();
    let rates = || fed.iter().map(|one| one.readings as f64 / seconds);
    let windows_fed: usize = fed
        .iter()
        .map(|one| one.windows.iter().filter(|&&updates| updates > 0).count())
        .sum();
    Ok(json!({
        "subscribers": hold.subscribers,
        "tags": hold.tags,
        "seconds": seconds,
        "held": fed.iter().filter(|one| one.held).count(),
        "fedWindowShare": windows_fed as f64 / (WINDOWS * fed.len().max(1)) as f64,
        "readingsPerSubscriberPerSecond": {
            "min": rates().fold(f64::INFINITY, f64::min),
            "median": median(rates()),
            "changed": hold.tags as f64 * 10.0,
        },
        "skipped": fed.iter().map(|one| one.skipped).sum::<u64>(),
        "writeErrors": settling.errors + write_errors,
        "settling": {"windowMedians": settling.medians, "settled": settling.settled},
        "tserverBytes": {"beforeSettling": unsettled, "baseline": baseline, "subscribed": subscribed, "firstWindowPeak": samples.first_window_peak(), "peak": peak, "end": end,
                         "windowMedianGrowth": window_growth},
        "lastOverSecondWindow": backlog_growth,
        "perSubscriberKiB": peak.saturating_sub(baseline) as f64 / hold.subscribers.max(1) as f64 / 1024.0,
    }))
}

/// A WebSocket subscribed to `names` at the default rate, its initial readings read.
async fn subscribe(http_addr: &str, names: &[String]) -> anyhow::Result<Socket> {
    let mut socket = Socket::open(http_addr).await?;
    let request = client_frame::Body::Subscribe(SubscribeRequest {
        names: names.to_vec(),
        ..SubscribeRequest::default()
    });
    match socket.call(request).await? {
        Some(server_frame::Body::Subscribe(_)) => Ok(socket),
        other => bail!("Subscribe was answered with {other:?}"),
    }
}

/// Counts a subscriber's updates until `until`, by window of the hold.
async fn read_updates(mut socket: Socket, start: Instant, until: Instant, duration: Duration) -> Fed {
    let mut fed = Fed::default();
    let window = duration / WINDOWS as u32;
    loop {
        let now = Instant::now();
        if now >= until {
            fed.held = true;
            return fed;
        }
        match socket.receive_within(until - now).await {
            Ok(Some(Some(frame))) => {
                if let Some(server_frame::Body::TagUpdate(update)) = frame.body {
                    let index = (start.elapsed().as_nanos() / window.as_nanos().max(1)) as usize;
                    if let Some(count) = fed.windows.get_mut(index) {
                        *count += 1;
                    }
                    fed.readings += update.readings.len() as u64;
                    fed.skipped += update.skipped;
                }
            }
            Ok(None) => {}
            Ok(Some(None)) | Err(_) => return fed,
        }
    }
}

/// tserver's resident memory sampled at each write of the hold, by window.
#[derive(Debug)]
struct MemorySamples {
    windows: [Vec<u64>; WINDOWS],
}

impl MemorySamples {
    /// The highest sample of the hold.
    fn peak(&self) -> u64 {
        self.windows.iter().flatten().copied().max().unwrap_or(0)
    }

    /// The highest sample of the first window.
    fn first_window_peak(&self) -> u64 {
        self.windows[0].iter().copied().max().unwrap_or(0)
    }

    /// The median of every sample.
    fn median(&self) -> f64 {
        median(self.windows.iter().flatten().map(|&rss| rss as f64))
    }

    /// Each window's median sample, in bytes over `baseline`.
    fn median_growth(&self, baseline: u64) -> Vec<f64> {
        self.windows
            .iter()
            .map(|samples| median(samples.iter().map(|&rss| rss.saturating_sub(baseline) as f64)))
            .collect()
    }
}

/// Whether the last two of `medians` each stayed within [`SETTLED_GROWTH_BYTES`] of the one
/// before.
fn has_settled(medians: &[f64]) -> bool {
    medians.len() >= 3
        && medians[medians.len() - 3..]
            .windows(2)
            .all(|pair| pair[1] - pair[0] <= SETTLED_GROWTH_BYTES)
}

/// The last window's growth over the second window's, of each window's [`median_growth`].
///
/// [`median_growth`]: MemorySamples::median_growth
fn last_over_second(window_growth: &[f64]) -> f64 {
    window_growth[WINDOWS - 1] / window_growth[1].max(1.0)
}

/// How much a window's median memory may exceed the one before while the writes settle: a
/// tenth of what the memory-bounded row allows the subscribers to grow in a window of the hold
/// (about 24 MB each time by 10% over three windows).
const SETTLED_GROWTH_BYTES: f64 = 80_000.0;

/// The most windows the writes settle for before the subscribers come anyway (a minute at the
/// full plan's 2-second windows); the report says whether they settled.
const MOST_SETTLING_WINDOWS: usize = 30;

/// The writes with no subscriber before the hold: each window's median memory, whether two
/// windows in a row stayed within [`SETTLED_GROWTH_BYTES`] of the one before, and the writes
/// that failed.
struct Settling {
    medians: Vec<f64>,
    settled: bool,
    errors: u64,
}

/// The WebSocket that writes the bench tags, each write a new value of every tag.
struct Writer<'a> {
    socket: Socket,
    names: &'a [String],
    tserver_pid: u32,
    /// The value of the last write.
    value: f64,
}

impl<'a> Writer<'a> {
    async fn open(http_addr: &str, names: &'a [String], tserver_pid: u32) -> anyhow::Result<Self> {
        Ok(Self {
            socket: Socket::open(http_addr).await?,
            names,
            tserver_pid,
            value: 0.0,
        })
    }

    /// Writes as in the hold, with no subscriber, until tserver's memory stops growing. The
    /// writes cost memory of their own that grows for a while and then stays: each write's audit
    /// row and history samples go through the store, whose page cache fills to its size. Settled
    /// first, so what grows in the hold is what the subscribers hold, not the writes.
    async fn settle(&mut self, window: Duration) -> Settling {
        let mut settling = Settling {
            medians: Vec::new(),
            settled: false,
            errors: 0,
        };
        while !settling.settled && settling.medians.len() < MOST_SETTLING_WINDOWS {
            let start = Instant::now();
            let (samples, errors) = self.write_until((start, start + window)).await;
            settling.errors += errors;
            settling.medians.push(samples.median());
            settling.settled = has_settled(&settling.medians);
        }
        settling
    }

    /// Writes every tag 10 times a second from `start` until `until`, sampling tserver's
    /// memory after each write: the samples by window, and the writes that failed.
    async fn write_until(&mut self, (start, until): (Instant, Instant)) -> (MemorySamples, u64) {
        let window = (until - start) / WINDOWS as u32;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let mut samples = MemorySamples {
            windows: std::array::from_fn(|_| Vec::new()),
        };
        let mut errors = 0;
        while Instant::now() < until {
            tick.tick().await;
            self.value += 1.0;
            let writes = self
                .names
                .iter()
                .map(|name| TagWrite {
                    name: name.clone(),
                    value: Some(tag_write::Value::Number(self.value)),
                })
                .collect();
            match self
                .socket
                .call(client_frame::Body::WriteTags(WriteTagsRequest {
                    writes,
                    signatures: Vec::new(),
                }))
                .await
            {
                Ok(Some(server_frame::Body::WriteTags(reply)))
                    if reply.results.iter().all(|result| result.error.is_empty()) => {}
                _ => errors += 1,
            }
            let now = rss_bytes(self.tserver_pid).unwrap_or(0);
            let index = (start.elapsed().as_nanos() / window.as_nanos().max(1)) as usize;
            samples.windows[index.min(WINDOWS - 1)].push(now);
        }
        (samples, errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples of `per_window` each, the n-th of the hold at `rss(n)`.
    fn sampled(per_window: usize, rss: impl Fn(usize) -> u64) -> MemorySamples {
        MemorySamples {
            windows: std::array::from_fn(|window| {
                (0..per_window)
                    .map(|index| rss(window * per_window + index))
                    .collect()
            }),
        }
    }

    #[test]
    fn writes_settle_when_two_windows_in_a_row_stop_growing() {
        let filling = [100e6, 101e6, 101.5e6, 101.55e6];
        assert!(!has_settled(&filling[..2]));
        assert!(!has_settled(&filling[..3]), "still growing by 0.5 MB a window");
        assert!(!has_settled(&[100e6, 100e6]), "two windows are one step");
        assert!(has_settled(&[101.5e6, 101.55e6, 101.54e6]));
        assert!(has_settled(&[100e6, 101e6, 101.05e6, 101.08e6]));
    }

    #[test]
    fn a_backlog_growing_through_the_hold_is_judged_unbounded() {
        let growing = sampled(20, |n| 100_000_000 + n as u64 * 200_000);
        assert!(last_over_second(&growing.median_growth(100_000_000)) > 2.0);
    }

    #[test]
    fn a_bound_with_a_moment_of_full_write_buffers_is_judged_bounded() {
        // Steady at 25 MB over the baseline from the second window on, with one sample at 35.
        let mut bound = sampled(20, |n| {
            if n < 10 {
                100_000_000 + 1_400_000 * n as u64
            } else {
                125_000_000
            }
        });
        bound.windows[WINDOWS - 1][7] = 135_000_000;
        assert!(last_over_second(&bound.median_growth(100_000_000)) <= 1.1);
        assert_eq!(bound.peak(), 135_000_000);
    }
}
