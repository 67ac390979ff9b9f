//! The overview displays of a 10,000-tag plant in a real headless Chromium: 100 equipment of 100
//! tags in 10 areas, every number moved by the simulator once a second. Measured: navigation to
//! the plant overview's first live value (the page's own User Timing mark); how busy the page's
//! main thread stays while every tag changes (Chromium's `TaskDuration`, on the plant overview
//! and on an area's display); and a trend of a year of one-second samples, from the click on
//! its window to its line drawn (the page's own measure).

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use anyhow::bail;
use plant_model::{Quality, TagValue};
use serde_json::{Value, json};
use store::{HistoryLimits, PendingSample, Store};
use tserver_tests::chromium::{Browser, Chromedriver};

use super::harness::{fresh_solution, serve};
use super::panel_load::{log_in, mark_ms};
use super::report::{Results, median};
use super::verdicts::{self, Verdicts};
use crate::processes::free_port;

/// The shape of the run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OverviewPlan {
    /// Loads of the plant overview measured (after one that logs in).
    pub(crate) loads: usize,
    /// Seconds the main thread is watched on each display.
    pub(crate) live_seconds: f64,
    /// Seconds of one-second history behind the trended tag (a year in the full run).
    pub(crate) trend_seconds: i64,
    /// Draws of the trend measured.
    pub(crate) trend_draws: usize,
}

const AREAS: usize = 10;
const UNITS_PER_AREA: usize = 10;
/// Numbers per equipment; with its run signal, its mode and three flags, 100 tags.
const NUMBERS: usize = 95;
/// The tag whose year of history the trend draws: the first equipment's key value.
const TRENDED: &str = "Unit001.M00";
/// The panel's marks (overview.js, trend.js).
const OVERVIEW_VALUE_MARK: &str = "tserver:overview-first-live-value";
const TREND_DRAWN: &str = "tserver:trend-drawn";
const PATIENCE: Duration = Duration::from_secs(30);
/// The window button of a year (index.html).
const YEAR_WINDOW: &str = "#trend-windows [data-window=\"31536000000\"]";
const HOUR_WINDOW: &str = "#trend-windows [data-window=\"3600000\"]";

/// The plant: a type of 100 member tags (its first two numbers key values with alarms), placed
/// 100 times in 10 areas.
pub(super) fn plant() -> String {
    let mut text = String::from("[plant]\nname = \"Overview bench\"\n\n");
    for area in 1..=AREAS {
        text.push_str(&format!(
            "[[folders]]\npath = \"Plant/Area{area:02}\"\ndescription = \"Process area {area}\"\n\n"
        ));
    }
    text.push_str("[[types]]\nname = \"Unit\"\n\n");
    for index in 0..NUMBERS {
        let display = match index {
            0 => "\ndisplay = { key = true, order = 1 }",
            1 => "\ndisplay = { key = true, order = 2 }",
            _ => "",
        };
        text.push_str(&format!(
            "[[types.tags]]\nname = \"M{index:02}\"\ntype = \"number\"\nunit = \"%\"\nmin = 0.0\nmax = 100.0\n\
             initial = 50.0\nhistory = false\nsimulate = {{ amplitude = 20.0, period = {}.0, noise = 0.5 }}{display}\n\n",
            60 + index
        ));
    }
    text.push_str(
        "[[types.tags]]\nname = \"Running\"\ntype = \"bool\"\ninitial = true\n\n\
         [[types.tags]]\nname = \"Mode\"\ntype = \"string\"\nvalues = [\"Auto\", \"Manual\"]\ninitial = \"Auto\"\n\
         display = { normal_state = \"Auto\" }\n\n",
    );
    for flag in 0..3 {
        text.push_str(&format!(
            "[[types.tags]]\nname = \"Flag{flag}\"\ntype = \"bool\"\ninitial = false\n\n"
        ));
    }
    text.push_str(
        "[[types.alarms]]\nname = \"M00.Hi\"\ntag = \"M00\"\ncondition = \"Hi\"\nlimit = 85.0\npriority = 700\n\n\
         [[types.alarms]]\nname = \"M00.Lo\"\ntag = \"M00\"\ncondition = \"Lo\"\nlimit = 15.0\npriority = 500\n\n\
         [[types.alarms]]\nname = \"M01.HiHi\"\ntag = \"M01\"\ncondition = \"HiHi\"\nlimit = 95.0\npriority = 900\n\n",
    );
    for unit in 1..=AREAS * UNITS_PER_AREA {
        let area = (unit - 1) / UNITS_PER_AREA + 1;
        text.push_str(&format!(
            "[[equipment]]\nname = \"Unit{unit:03}\"\ntype = \"Unit\"\npath = \"Plant/Area{area:02}/Unit{unit:03}\"\n\n"
        ));
    }
    // The trended tag records its history (the others need none here).
    text.replace(
        "[[types.tags]]\nname = \"M00\"\ntype = \"number\"\nunit = \"%\"\nmin = 0.0\nmax = 100.0\n\
         initial = 50.0\nhistory = false",
        "[[types.tags]]\nname = \"M00\"\ntype = \"number\"\nunit = \"%\"\nmin = 0.0\nmax = 100.0\n\
         initial = 50.0\nhistory = true",
    )
}

/// `seconds` of one-second samples of the trended tag, ending now, written a day at a time.
fn write_history(path: &Path, seconds: i64) -> anyhow::Result<()> {
    let store = Store::open_file(path)?;
    let name: std::sync::Arc<str> = std::sync::Arc::from(TRENDED);
    let now = SystemTime::now();
    let start = now - Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
    let mut second = 0i64;
    while second < seconds {
        let day: Vec<PendingSample> = (second..(second + 86_400).min(seconds))
            .map(|at| PendingSample {
                tag: std::sync::Arc::clone(&name),
                time: start + Duration::from_secs(u64::try_from(at).unwrap_or(0)),
                value: TagValue::Number(
                    ((50.0 + 25.0 * (at as f64 * std::f64::consts::TAU / 3_600.0).sin()) * 100.0).round()
                        / 100.0,
                ),
                quality: Quality::GOOD,
            })
            .collect();
        store.write_history_blocking(&day, &[], &HistoryLimits::NONE)?;
        second += 86_400;
    }
    store.checkpoint_history_blocking(&HistoryLimits::NONE)?;
    Ok(())
}

/// Builds the solution, serves it with the simulator on, and measures it in Chromium.
pub(crate) fn judge(
    bin: &Path,
    out_dir: &Path,
    plan: OverviewPlan,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let solution = fresh_solution(bin, out_dir, "overview", Some(&plant()))?;
    write_history(&solution, plan.trend_seconds)?;
    let addr = format!("127.0.0.1:{}", free_port()?);
    let http = format!("127.0.0.1:{}", free_port()?);
    let log = std::fs::File::create(out_dir.join("tserver-overview.log"))?;
    let server = serve(bin, &solution, &addr, &http, &["--simulator", "on"], log)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(measure(&http, plan));
    drop(server);
    let report = report?;
    let first = report["firstLiveValueMs"]["median"].as_f64().unwrap_or(f64::NAN);
    let busy = report["mainThreadBusy"]["worst"].as_f64().unwrap_or(f64::NAN);
    let trend = report["yearTrendMs"]["median"].as_f64().unwrap_or(f64::NAN);
    eprintln!(
        "{:<28} first live value {first:.0} ms, main thread {:.1}% busy, a year's trend {trend:.0} ms",
        "overview of 10,000 tags",
        busy * 100.0
    );
    verdicts.judge(
        "Overview of a 10,000-tag plant (100 equipment): load to first live value, p50".to_owned(),
        format!(
            "{first:.0} ms (of {} loads, max {:.0} ms)",
            plan.loads,
            report["firstLiveValueMs"]["max"].as_f64().unwrap_or(f64::NAN)
        ),
        verdicts::OVERVIEW_FIRST_VALUE,
        first,
        true,
    );
    verdicts.judge(
        "Overview, every tag changing once a second: the page's main thread busy".to_owned(),
        format!(
            "{:.1}% on the plant overview, {:.1}% on an area's display (Chromium's TaskDuration over {} s)",
            report["mainThreadBusy"]["plant"].as_f64().unwrap_or(f64::NAN) * 100.0,
            report["mainThreadBusy"]["area"].as_f64().unwrap_or(f64::NAN) * 100.0,
            plan.live_seconds
        ),
        verdicts::OVERVIEW_MAIN_THREAD,
        busy * 100.0,
        true,
    );
    verdicts.judge(
        "Trend of a year of one-second samples: click to line drawn, p50".to_owned(),
        format!(
            "{trend:.0} ms (of {} draws, {} samples behind it)",
            plan.trend_draws, plan.trend_seconds
        ),
        verdicts::YEAR_TREND,
        trend,
        true,
    );
    results.insert("Overview of a 10,000-tag plant in Chromium", report);
    Ok(())
}

async fn measure(http: &str, plan: OverviewPlan) -> anyhow::Result<Value> {
    let driver = Chromedriver::start();
    let browser = driver.browser(1280, 800).await;
    let page = format!("http://{http}/");
    browser.open(&page).await;
    log_in(&browser).await?;
    let mut loads = Vec::with_capacity(plan.loads);
    for _ in 0..plan.loads.max(1) {
        browser.open(&page).await;
        loads.push(mark_ms(&browser, OVERVIEW_VALUE_MARK, PATIENCE).await?);
    }
    // The plant overview, then an area's display, each watched while every tag changes.
    let plant = busy_share(&browser, plan.live_seconds).await;
    browser
        .click("#overview-tiles .tile:first-child .tile-title button")
        .await;
    browser
        .wait_text("#overview-title", "an area's display", |title| title == "Area01")
        .await;
    let area = busy_share(&browser, plan.live_seconds).await;
    // The trended tag's detail, then its year, drawn again and again.
    browser
        .click(&format!(
            "#overview-tiles tr[data-tag=\"{TRENDED}\"] .point-label"
        ))
        .await;
    browser.wait_visible("#trend-chart svg polyline").await;
    let mut trends = Vec::with_capacity(plan.trend_draws);
    for _ in 0..plan.trend_draws.max(1) {
        for (window, kept) in [(HOUR_WINDOW, false), (YEAR_WINDOW, true)] {
            let before = measures(&browser).await;
            browser.click(window).await;
            let drawn = next_measure(&browser, before).await?;
            if kept {
                trends.push(drawn);
            }
        }
    }
    browser.close().await;
    Ok(json!({
        "tags": AREAS * UNITS_PER_AREA * 100,
        "equipment": AREAS * UNITS_PER_AREA,
        "firstLiveValueMs": {
            "median": median(loads.iter().copied()),
            "max": loads.iter().copied().fold(0.0, f64::max),
        },
        "mainThreadBusy": {"plant": plant, "area": area, "worst": plant.max(area)},
        "yearTrendMs": {
            "median": median(trends.iter().copied()),
            "max": trends.iter().copied().fold(0.0, f64::max),
        },
        "trendSamples": plan.trend_seconds,
    }))
}

/// The share of `seconds` the page's main thread spent in tasks.
async fn busy_share(browser: &Browser, seconds: f64) -> f64 {
    let before = browser.main_thread_seconds().await;
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    let after = browser.main_thread_seconds().await;
    (after - before) / started.elapsed().as_secs_f64()
}

/// How many trend measures the page has made.
async fn measures(browser: &Browser) -> usize {
    browser
        .run(
            "return performance.getEntriesByName(arguments[0]).length;",
            vec![json!(TREND_DRAWN)],
        )
        .await
        .as_u64()
        .and_then(|count| usize::try_from(count).ok())
        .unwrap_or(0)
}

/// The duration of the trend measure after the first `before`, once the page makes it.
async fn next_measure(browser: &Browser, before: usize) -> anyhow::Result<f64> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let measured = browser
            .run(
                "const all = performance.getEntriesByName(arguments[0]); return all.length > arguments[1] ? all[arguments[1]].duration : null;",
                vec![json!(TREND_DRAWN), json!(before)],
            )
            .await;
        if let Some(ms) = measured.as_f64() {
            return Ok(ms);
        }
        if Instant::now() > deadline {
            bail!("the year's trend was not drawn within {PATIENCE:?}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
