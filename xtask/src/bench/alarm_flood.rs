//! An alarm flood on a 10,000-tag plant: 1,000 alarms activating within 10 s from the field (an
//! MQTT broker), then clearing together. Measured: each activation from its publication to its
//! row in the operator panel's alarm list and to the flood banner counting it (in a real headless
//! Chromium, by the page's own clock); every transition in the alarm history; the notifications
//! the flood made (a local webhook and the broker); and tserver's CPU while it lasted.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use plant_model::AlarmEventKind;
use serde_json::{Value, json};
use service_client::{Client, ClientOptions, SubscribeRequest};
use store::Store;
use tserver_tests::chromium::Chromedriver;
use tserver_tests::mosquitto::{Mosquitto, Publisher};

use super::harness::{fresh_solution, serve};
use super::latencies::Latencies;
use super::panel_load::log_in;
use super::report::Results;
use super::verdicts::{self, Verdicts};
use crate::processes::{cpu_time, free_port};

/// The shape of the run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FloodPlan {
    /// Alarms that activate (at most 1,000: ten on each of the 100 equipment).
    pub(crate) alarms: usize,
    /// Seconds over which they activate, evenly spread.
    pub(crate) seconds: f64,
}

const UNITS: usize = 100;
const TAGS_PER_UNIT: usize = 100;
const ALARMS_PER_UNIT: usize = 10;
/// The topic root of the field's broker.
const ROOT: &str = "Flood";
const NORMAL: &str = "50";
const HIGH: &str = "95";
/// Annunciated activations within 10 minutes beyond which the alarms are in flood (the default).
const FLOOD_COUNT: usize = 10;
const PATIENCE: Duration = Duration::from_secs(60);

fn tag(unit: usize, index: usize) -> String {
    format!("Unit{unit:03}.T{index:02}")
}

fn topic(unit: usize, index: usize) -> String {
    let area = (unit - 1) / 10 + 1;
    format!("{ROOT}/Plant/Area{area:02}/Unit{unit:03}/T{index:02}")
}

/// The alarmed tags in the order they activate: the first of every equipment, then the second…,
/// so the flood crosses the whole plant.
fn alarmed(alarms: usize) -> Vec<(usize, usize)> {
    (0..ALARMS_PER_UNIT)
        .flat_map(|index| (1..=UNITS).map(move |unit| (unit, index)))
        .take(alarms)
        .collect()
}

/// An alarm's priority by its place in the flood: 5% high, 15% medium, 80% low (EEMUA 191's mix).
fn priority(place: usize) -> u32 {
    match place % 20 {
        0 => 900,
        1..=3 => 600,
        _ => 300,
    }
}

/// The plant: 100 equipment of 100 tags read from the broker, `alarms` of them with a Hi alarm,
/// and both kinds of notification of their activations and clears.
fn plant(broker: &str, webhook: &str, alarms: usize) -> String {
    let mut text = format!(
        "[plant]\nname = \"Flood bench\"\n\n\
         [[sources]]\nname = \"field\"\nurl = \"{broker}\"\nroot = \"{ROOT}\"\n\n\
         [[notifications]]\nname = \"control-room\"\nwebhook = \"{webhook}\"\nevents = [\"active\", \"cleared\"]\n\n\
         [[notifications]]\nname = \"uns\"\nmqtt = \"field\"\nevents = [\"active\", \"cleared\"]\n\n"
    );
    let places: HashMap<(usize, usize), usize> = alarmed(alarms)
        .into_iter()
        .enumerate()
        .map(|(place, tag)| (tag, place))
        .collect();
    for unit in 1..=UNITS {
        let area = (unit - 1) / 10 + 1;
        for index in 0..TAGS_PER_UNIT {
            let name = tag(unit, index);
            text.push_str(&format!(
                "[[tags]]\nname = \"{name}\"\npath = \"Plant/Area{area:02}/Unit{unit:03}/T{index:02}\"\n\
                 type = \"number\"\nunit = \"%\"\nhistory = false\nsource = {{ broker = \"field\" }}\n\n"
            ));
            if let Some(place) = places.get(&(unit, index)) {
                text.push_str(&format!(
                    "[[alarms]]\nname = \"{name}.Hi\"\ntag = \"{name}\"\ncondition = \"Hi\"\nlimit = 90.0\n\
                     priority = {}\nmessage = \"Unit {unit} T{index:02} high\"\n\n",
                    priority(*place)
                ));
            }
        }
    }
    text
}

/// What the webhook was sent: requests, and events counted by kind from each batch's summary.
#[derive(Debug, Default)]
struct Received {
    requests: usize,
    events: HashMap<String, u64>,
    dropped: u64,
}

/// A local webhook that accepts every batch and counts what it says.
async fn webhook() -> anyhow::Result<(String, Arc<Mutex<Received>>)> {
    let received = Arc::new(Mutex::new(Received::default()));
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post({
            let received = Arc::clone(&received);
            move |body: axum::Json<Value>| async move {
                if let Ok(mut received) = received.lock() {
                    received.requests += 1;
                    received.dropped += body["dropped"].as_u64().unwrap_or(0);
                    for (kind, count) in body["summary"].as_object().into_iter().flatten() {
                        *received.events.entry(kind.clone()).or_default() += count.as_u64().unwrap_or(0);
                    }
                }
                axum::http::StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/hook", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((url, received))
}

fn epoch_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(f64::NAN, |since| since.as_secs_f64() * 1_000.0)
}

/// Builds the plant, serves it, floods it and judges what followed.
pub(crate) fn judge(
    bin: &Path,
    out_dir: &Path,
    plan: FloodPlan,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let report = runtime.block_on(flood(bin, out_dir, plan))?;
    let ms = |what: &str, quantile: &str| {
        report[what][quantile]
            .as_f64()
            .map_or(f64::NAN, |us| us / 1_000.0)
    };
    let list_p99 = ms("list", "p99Us");
    let banner_p99 = ms("banner", "p99Us");
    let missing_rows = report["missingRows"].as_u64().unwrap_or(u64::MAX);
    let recorded = report["recorded"].as_u64().unwrap_or(0);
    let expected = 2 * plan.alarms as u64;
    let cpu = report["cpu"]["shareOfCore"].as_f64().unwrap_or(f64::NAN);
    let posts = report["webhook"]["requests"].as_u64().unwrap_or(0);
    let notified = report["webhook"]["active"].as_u64() == Some(plan.alarms as u64)
        && report["webhook"]["cleared"].as_u64() == Some(plan.alarms as u64)
        && report["webhook"]["dropped"].as_u64() == Some(0);
    // The clear's batch counts as a second of its own.
    let posts_per_second = posts as f64 / (report["floodSeconds"].as_f64().unwrap_or(f64::NAN) + 1.0);
    eprintln!(
        "{:<28} list p99 {list_p99:.0} ms, banner p99 {banner_p99:.0} ms (the wire's p99 {:.0} ms, the page \
         {:.0}% busy), {recorded} of {expected} recorded, {posts} webhook POSTs, tserver {:.0}% of a core",
        "alarm flood",
        ms("wire", "p99Us"),
        report["pageBusy"].as_f64().unwrap_or(f64::NAN) * 100.0,
        cpu * 100.0
    );
    let what = format!("{} alarms in {} s, 10,000 tags", plan.alarms, plan.seconds);
    verdicts.judge(
        format!("Alarm flood ({what}): activation to its row in the panel, p99"),
        format!(
            "{list_p99:.0} ms (p50 {:.0}, max {:.0}; {missing_rows} rows missing)",
            ms("list", "p50Us"),
            ms("list", "maxUs")
        ),
        verdicts::FLOOD_PANEL,
        list_p99,
        missing_rows == 0,
    );
    verdicts.judge(
        "Alarm flood: activation to the flood banner counting it, p99".to_owned(),
        format!(
            "{banner_p99:.0} ms (p50 {:.0}; the banner counted {})",
            ms("banner", "p50Us"),
            report["bannerCounted"]
        ),
        verdicts::FLOOD_PANEL,
        banner_p99,
        true,
    );
    verdicts.judge(
        "Alarm flood: transitions in the alarm history, tserver CPU".to_owned(),
        format!(
            "{recorded} of {expected}; {:.0}% of a core over {:.1} s",
            cpu * 100.0,
            report["cpu"]["seconds"].as_f64().unwrap_or(f64::NAN)
        ),
        verdicts::FLOOD_RECORDED,
        expected.abs_diff(recorded) as f64,
        true,
    );
    verdicts.judge(
        "Alarm flood and its clear: webhook POSTs a second".to_owned(),
        format!(
            "{posts_per_second:.1} ({posts} for {expected} events{}; MQTT: {} messages)",
            if notified {
                ", each once"
            } else {
                ", NOT each once"
            },
            report["mqtt"]["messages"]
        ),
        verdicts::FLOOD_NOTIFICATIONS,
        posts_per_second,
        notified,
    );
    results.insert("Alarm flood on a 10,000-tag plant", report);
    Ok(())
}

async fn flood(bin: &Path, out_dir: &Path, plan: FloodPlan) -> anyhow::Result<Value> {
    let broker = Mosquitto::start();
    let (hook_url, received) = webhook().await?;
    let solution = fresh_solution(
        bin,
        out_dir,
        "flood",
        Some(&plant(&broker.url(), &hook_url, plan.alarms)),
    )?;
    // Every tag's value retained at normal before the server starts, as a live plant's are.
    let field = Publisher::connect(broker.port).await;
    for unit in 1..=UNITS {
        for index in 0..TAGS_PER_UNIT {
            field.publish(&topic(unit, index), NORMAL, true).await;
        }
    }
    let mut notified = Publisher::connect(broker.port).await;
    notified.subscribe(&format!("{ROOT}/alarms/#")).await;

    let addr = format!("127.0.0.1:{}", free_port()?);
    let http = format!("127.0.0.1:{}", free_port()?);
    let log = std::fs::File::create(out_dir.join("tserver-flood.log"))?;
    let server = serve(bin, &solution, &addr, &http, &[], log)?;
    let client = Client::connect(addr.as_str(), ClientOptions::default()).await?;
    client.login("guest", "").await?;
    let last = alarmed(plan.alarms)
        .last()
        .copied()
        .context("no alarms to flood")?;
    let last_tag = tag(last.0, last.1);
    let (reader, last_tag) = (&client, last_tag.as_str());
    wait_for("the field's values", move || async move {
        let readings = reader.read_tags(&[last_tag]).await.ok()?;
        readings.first()?.value.as_ref().map(|_| ())
    })
    .await?;

    let driver = Chromedriver::start();
    let browser = driver.browser(1280, 800).await;
    let page = format!("http://{http}/");
    browser.open(&page).await;
    log_in(&browser).await?;
    browser.open(&page).await;
    browser.click("#tab-alarms").await;
    browser
        .wait_text("#alarm-count", "the calm before", |text| {
            text == "No active alarms"
        })
        .await;
    browser.run(WATCH, vec![]).await;
    // The server's part: when each alarm's activation reaches a client of the framed protocol.
    let mut states = client
        .subscribe(SubscribeRequest {
            folder: "Plant".to_owned(),
            alarms: true,
            alarms_only: true,
            ..SubscribeRequest::default()
        })
        .await?;
    let on_the_wire = tokio::spawn(async move {
        let mut first: HashMap<String, f64> = HashMap::new();
        while let Some(update) = states.next_update().await {
            let now = epoch_ms();
            for alarm in update.alarms {
                if alarm.state == "active" {
                    first.entry(alarm.name).or_insert(now);
                }
            }
        }
        first
    });
    let busy_before = browser.main_thread_seconds().await;

    // The flood: each alarmed tag goes high at its moment, spread over the plan's seconds.
    let order = alarmed(plan.alarms);
    let spacing = Duration::from_secs_f64(plan.seconds / plan.alarms as f64);
    let cpu_before = cpu_time(server.pid()).context("tserver's CPU time")?;
    let started = Instant::now();
    let started_ms = SystemTime::now();
    let mut published = Vec::with_capacity(order.len());
    for (place, (unit, index)) in order.iter().enumerate() {
        tokio::time::sleep_until((started + spacing * u32::try_from(place)?).into()).await;
        published.push(epoch_ms());
        field.publish(&topic(*unit, *index), HIGH, true).await;
    }
    let flood_seconds = started.elapsed().as_secs_f64();
    // Seen when every row is in the list and the banner counts every activation.
    let alarms = plan.alarms;
    let watching = &browser;
    wait_for("the panel to show the whole flood", move || async move {
        let seen = watching
            .run(
                "return [window.tserverFlood.seen.size, window.tserverFlood.counted];",
                vec![],
            )
            .await;
        (seen[0].as_u64()? >= alarms as u64 && seen[1].as_u64()? >= alarms as u64).then_some(())
    })
    .await?;
    let shown = started.elapsed().as_secs_f64();
    let cpu_after = cpu_time(server.pid()).context("tserver's CPU time")?;
    let page_busy = (browser.main_thread_seconds().await - busy_before) / shown;

    let watched = browser
        .run(
            "return {seen: [...window.tserverFlood.seen], banner: window.tserverFlood.banner};",
            vec![],
        )
        .await;
    let screenshot = browser.screenshot("bench-alarm-flood").await;

    // The clear: every alarm back to normal at once, as when a trip is reset.
    for (unit, index) in &order {
        field.publish(&topic(*unit, *index), NORMAL, true).await;
    }
    browser
        .wait_text("#alarm-count", "the list after the clear", |text| {
            !text.contains("active alarm") || text.starts_with("No active alarms")
        })
        .await;
    let history = Store::open_file(&solution)?;
    let expected = 2 * plan.alarms;
    let mut recorded = 0;
    let _ = wait_for("every transition in the alarm history", || {
        recorded = count_transitions(&history, started_ms);
        std::future::ready((recorded >= expected).then_some(()))
    })
    .await;
    let _ = wait_for("the webhook to be sent every event", || {
        let done = received.lock().is_ok_and(|received| {
            received.events.get("active").copied().unwrap_or(0) >= alarms as u64
                && received.events.get("cleared").copied().unwrap_or(0) >= alarms as u64
        });
        std::future::ready(done.then_some(()))
    })
    .await;
    let mqtt = notified.received_so_far().await;
    browser.close().await;
    drop(client);
    drop(server);
    let wire_first = on_the_wire.await?;

    let names: Vec<String> = order
        .iter()
        .map(|(unit, index)| format!("{}.Hi", tag(*unit, *index)))
        .collect();
    let (list, missing) = list_latencies(&watched["seen"], &names, &published);
    let wire: Vec<f64> = names
        .iter()
        .zip(&published)
        .filter_map(|(name, at)| wire_first.get(name).map(|seen| seen - at))
        .collect();
    let banner = banner_latencies(&watched["banner"], &published);
    let cpu = (cpu_after - cpu_before).total();
    let received = received
        .lock()
        .map_err(|_| anyhow::anyhow!("the webhook's count was poisoned"))?;
    let mqtt_events: u64 = mqtt
        .iter()
        .map(|(topic, payload)| {
            if topic == &format!("{ROOT}/alarms") {
                serde_json::from_slice::<Value>(payload)
                    .ok()
                    .and_then(|batch| batch["count"].as_u64())
                    .unwrap_or(0)
            } else {
                1
            }
        })
        .sum();
    Ok(json!({
        "tags": UNITS * TAGS_PER_UNIT,
        "alarms": plan.alarms,
        "floodSeconds": flood_seconds,
        "list": summary(&list),
        "missingRows": missing,
        "banner": summary(&banner),
        "wire": summary(&wire),
        "pageBusy": page_busy,
        "bannerCounted": watched["banner"].as_array().and_then(|counts| counts.last()).map(|last| last[0].clone()),
        "recorded": recorded,
        "cpu": {"seconds": shown, "cpuSeconds": cpu, "shareOfCore": cpu / shown},
        "webhook": {
            "requests": received.requests,
            "active": received.events.get("active").copied().unwrap_or(0),
            "cleared": received.events.get("cleared").copied().unwrap_or(0),
            "dropped": received.dropped,
        },
        "mqtt": {"messages": mqtt.len(), "events": mqtt_events},
        "screenshot": screenshot.display().to_string(),
    }))
}

/// Records, in the page, when each alarm's row first appears in the list and when the flood
/// banner first counts each number, by the page's clock (the machine's, as the bench's).
const WATCH: &str = "
    const seen = new Map();
    const banner = [];
    window.tserverFlood = { seen, banner, counted: 0 };
    new MutationObserver((records) => {
      const now = Date.now();
      for (const record of records) for (const node of record.addedNodes) {
        const name = node.dataset?.alarm;
        if (name && !seen.has(name)) seen.set(name, now);
      }
    }).observe(document.getElementById('alarm-rows'), { childList: true, subtree: true });
    const flood = document.getElementById('alarm-flood');
    new MutationObserver(() => {
      const count = Number(/^Alarm flood: (\\d+) alarms/.exec(flood.textContent)?.[1] ?? 0);
      if (count > window.tserverFlood.counted) {
        banner.push([count, Date.now()]);
        window.tserverFlood.counted = count;
      }
    }).observe(flood, { childList: true, characterData: true, subtree: true });
";

/// Milliseconds from each alarm's publication to its row, and how many rows never came.
fn list_latencies(seen: &Value, names: &[String], published: &[f64]) -> (Vec<f64>, usize) {
    let seen: HashMap<&str, f64> = seen
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|pair| Some((pair[0].as_str()?, pair[1].as_f64()?)))
        .collect();
    let latencies: Vec<f64> = names
        .iter()
        .zip(published)
        .filter_map(|(name, at)| seen.get(name.as_str()).map(|shown| shown - at))
        .collect();
    let missing = names.len() - latencies.len();
    (latencies, missing)
}

/// Milliseconds from the publication of each activation that makes or grows the flood to the
/// banner's first count of at least it.
fn banner_latencies(banner: &Value, published: &[f64]) -> Vec<f64> {
    let counts: Vec<(usize, f64)> = banner
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|pair| Some((usize::try_from(pair[0].as_u64()?).ok()?, pair[1].as_f64()?)))
        .collect();
    published
        .iter()
        .enumerate()
        .skip(FLOOD_COUNT)
        .filter_map(|(place, at)| {
            counts
                .iter()
                .find(|(count, _)| *count > place)
                .map(|(_, shown)| shown - at)
        })
        .collect()
}

/// `samples`, `p50Us`, `p99Us` and `maxUs` of latencies in milliseconds.
fn summary(latencies: &[f64]) -> Value {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "milliseconds of a bench run, never negative, as nanoseconds"
    )]
    let nanos = |ms: &f64| (ms.max(0.0) * 1e6) as u64;
    latencies.iter().map(nanos).collect::<Latencies>().to_json()
}

/// The activations and clears the alarm history holds since `since`.
fn count_transitions(history: &Store, since: SystemTime) -> usize {
    let window = (
        since - Duration::from_secs(1),
        SystemTime::now() + Duration::from_secs(1),
    );
    history
        .alarm_history_blocking(None, window, 10_000)
        .map(|page| {
            page.events
                .iter()
                .filter(|event| matches!(event.kind, AlarmEventKind::Active | AlarmEventKind::Cleared))
                .count()
        })
        .unwrap_or(0)
}

/// Polls `probe` every 20 ms until it answers, within [`PATIENCE`].
async fn wait_for<F, Fut>(what: &str, mut probe: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<()>>,
{
    let deadline = Instant::now() + PATIENCE;
    loop {
        if probe().await.is_some() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("waited {PATIENCE:?} for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flood_crosses_the_plant_with_eemua_s_priority_mix() {
        let order = alarmed(1_000);
        assert_eq!(order.len(), 1_000);
        assert_eq!(order[..2], [(1, 0), (2, 0)]);
        let high = (0..1_000).filter(|place| priority(*place) == 900).count();
        let medium = (0..1_000).filter(|place| priority(*place) == 600).count();
        assert_eq!((high, medium), (50, 150));
    }

    #[test]
    fn the_banner_s_lag_is_read_from_its_first_count_reaching_each_activation() {
        let published: Vec<f64> = (0..13).map(|place| 1_000.0 * place as f64).collect();
        // The banner counted 11 at 10.5 s, then 13 at 12.2 s.
        let banner = json!([[11, 10_500.0], [13, 12_200.0]]);
        assert_eq!(banner_latencies(&banner, &published), vec![500.0, 1_200.0, 200.0]);
    }
}
