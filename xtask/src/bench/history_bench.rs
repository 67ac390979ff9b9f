//! The history scenario of `cargo xtask bench` (`--only history`): the historian's ingestion
//! and queries, each beside what it is judged against in the same run.
//!
//! - Sustained ingestion: tserver serving 10,000 simulated tags that change every second
//!   (noisy sines recorded within a deviation above their noise, integer steps), its CPU over
//!   the run as a share of one core.
//! - Burst ingestion, in this process: the same kind of samples, second by second, through the
//!   store's history writer (journal, checkpoints, blocks), beside a bare batched insert of the
//!   same samples as indexed rows (the row-per-sample table the historian kept before blocks)
//!   into a file of the same settings; and the bytes a sample takes at rest (a day of a hundred
//!   tags), with the recorder's compression on and off.
//! - Queries: a year of one-second samples of one tag read as a 1,000-bucket trend, beside the
//!   row table queried the same way; 1,000 tags at a past instant; an hour of raw samples; and
//!   the same three on PostgreSQL (the files copied by `tserver solution copy`).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use plant::historian::TagRecorder;
use plant::objects::TagSample;
use plant_model::{Compression, DEFAULT_MAX_INTERVAL, HistoryRule, Quality, TagType, TagValue};
use serde_json::{Value, json};
use store::{HistoryLimits, PendingSample, RowTable, Store, file_bytes};
use tserver_tests::postgres::PrivatePostgres;

use super::report::Results;
use super::verdicts::{self, Verdicts};
use crate::processes::{cpu_seconds, free_port, measuring_side, run_quietly};

/// The shape of the history runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HistoryPlan {
    /// Tags changing once a second, in the sustained and burst runs.
    pub(crate) tags: usize,
    /// Seconds the sustained run's CPU is measured over (after a warm-up of a third of it).
    pub(crate) sustained_seconds: u64,
    /// Seconds of every tag's samples the burst writes.
    pub(crate) burst_seconds: u64,
    /// Tags, and seconds of their samples, the bytes a sample takes at rest are measured on.
    pub(crate) storage_tags: usize,
    pub(crate) storage_seconds: u64,
    /// Seconds of one-second samples of the trend's tag (a year in the full run).
    pub(crate) trend_seconds: i64,
    /// Tags of the instant query, and seconds of their one-second history.
    pub(crate) instant_tags: usize,
    pub(crate) instant_seconds: i64,
    /// Queries timed per row.
    pub(crate) queries: usize,
}

/// Where every generated history starts: 2026-01-01T00:00:00Z.
const START_MS: i64 = 1_767_225_600_000;

/// The deviation a noisy sine is recorded within: a little above its noise (±0.5).
const DEVIATION: f64 = 0.6;

/// The reading of number tag `tag` at `second`: a sine with its own period and phase plus
/// noise of at most ±0.5, as a transmitter gives it (two decimals).
fn reading(tag: usize, second: i64) -> f64 {
    let period = 300.0 + (tag % 600) as f64;
    let phase = (tag % 17) as f64 * 0.37;
    let hashed = (second
        .wrapping_mul(2_654_435_761)
        .wrapping_add(tag as i64 * 40_503))
    .rem_euclid(1000);
    let noise = hashed as f64 / 1000.0 - 0.5;
    (((50.0 + 20.0 * (second as f64 * std::f64::consts::TAU / period + phase).sin() + noise) * 100.0).round())
        / 100.0
}

/// Tag `tag`'s sample at `second`: four in five are noisy sines, the rest counters stepping
/// every ten seconds.
fn sample_of(tag: usize, second: i64) -> TagValue {
    if tag % 5 == 4 {
        TagValue::Integer(second / 10 + tag as i64)
    } else {
        TagValue::Number(reading(tag, second))
    }
}

fn tag_name(tag: usize) -> String {
    format!("Hist.T{tag:05}")
}

fn at(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// The `q`-quantile of `durations` (sorted here), in milliseconds.
fn quantile(durations: &mut [Duration], q: f64) -> f64 {
    durations.sort_unstable();
    let index = ((durations.len() as f64 * q).ceil() as usize).clamp(1, durations.len().max(1)) - 1;
    durations
        .get(index)
        .map_or(f64::NAN, |duration| duration.as_secs_f64() * 1000.0)
}

/// A new empty solution file at `path` (any stale one removed first).
fn new_solution(tserver: &Path, path: &Path) -> anyhow::Result<()> {
    for suffix in ["", ".key", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    run_quietly(tserver, &["init", path.to_str().context("a UTF-8 path")?])
}

/// The samples of every tag at one second, each `value(tag, second)`.
fn second_of(
    names: &[std::sync::Arc<str>],
    second: i64,
    value: fn(usize, i64) -> TagValue,
) -> Vec<PendingSample> {
    names
        .iter()
        .enumerate()
        .map(|(tag, name)| PendingSample {
            tag: std::sync::Arc::clone(name),
            time: at(START_MS + second * 1000),
            value: value(tag, second),
            quality: Quality::GOOD,
        })
        .collect()
}

/// What the burst run measured.
struct Burst {
    samples: u64,
    stored_per_second: f64,
    compressed_per_second: f64,
    rows_per_second: f64,
    bytes_per_sample: f64,
    compressed_bytes_per_sample: f64,
    row_bytes_per_sample: f64,
}

/// Writes `seconds` of every tag's samples through the store (each tag's kept by `recorders`
/// when given), one flush a second and a checkpoint at the end: samples offered per second of
/// the run and bytes the file grew by per sample offered.
fn ingest(
    store: &Store,
    path: &Path,
    names: &[std::sync::Arc<str>],
    seconds: u64,
    mut recorders: Option<&mut Vec<Option<TagRecorder>>>,
) -> anyhow::Result<(f64, f64)> {
    let before = file_bytes(path)?;
    let started = Instant::now();
    for second in 0..i64::try_from(seconds)? {
        let offered = second_of(names, second, sample_of);
        let kept = match recorders.as_deref_mut() {
            None => offered,
            Some(recorders) => {
                let mut kept = Vec::new();
                for (tag, sample) in offered.into_iter().enumerate() {
                    let taken = TagSample {
                        value: sample.value.clone(),
                        quality: sample.quality,
                        timestamp: sample.time,
                    };
                    let rule = HistoryRule {
                        deadband: if tag % 5 == 4 { 0.0 } else { DEVIATION },
                        compression: Compression::SwingingDoor,
                        max_interval: DEFAULT_MAX_INTERVAL,
                        retention_hours: None,
                    };
                    let stored = match &mut recorders[tag] {
                        Some(recorder) => recorder.take(&taken, &rule),
                        slot @ None => {
                            *slot = Some(TagRecorder::new(&taken));
                            vec![taken]
                        }
                    };
                    kept.extend(stored.into_iter().map(|stored| PendingSample {
                        tag: std::sync::Arc::clone(&sample.tag),
                        time: stored.timestamp,
                        value: stored.value,
                        quality: stored.quality,
                    }));
                }
                kept
            }
        };
        store.write_history_blocking(&kept, &[], &HistoryLimits::NONE)?;
    }
    store.checkpoint_history_blocking(&HistoryLimits::NONE)?;
    let elapsed = started.elapsed().as_secs_f64();
    let offered = (names.len() as u64 * seconds) as f64;
    let grown = file_bytes(path)? - before;
    Ok((offered / elapsed, grown as f64 / offered))
}

fn burst(tserver: &Path, out_dir: &Path, plan: HistoryPlan) -> anyhow::Result<Burst> {
    let names: Vec<std::sync::Arc<str>> = (0..plan.tags)
        .map(|tag| std::sync::Arc::from(tag_name(tag)))
        .collect();
    let stored_path = out_dir.join("history-burst.db");
    new_solution(tserver, &stored_path)?;
    let store = Store::open_file(&stored_path)?;
    let (stored_per_second, _) = ingest(&store, &stored_path, &names, plan.burst_seconds, None)?;
    drop(store);

    let compressed_path = out_dir.join("history-compressed.db");
    new_solution(tserver, &compressed_path)?;
    let store = Store::open_file(&compressed_path)?;
    let mut recorders: Vec<Option<TagRecorder>> = (0..plan.tags).map(|_| None).collect();
    let (compressed_per_second, _) = ingest(
        &store,
        &compressed_path,
        &names,
        plan.burst_seconds,
        Some(&mut recorders),
    )?;
    drop(store);

    // What a sample takes at rest: fewer tags over a day each, so each tag's tail (its newest
    // samples, fewer than a block, kept plainly) is a small part of what it stores.
    let day_names: Vec<std::sync::Arc<str>> = names.iter().take(plan.storage_tags).cloned().collect();
    let mut at_rest = [0.0; 2];
    for (compressed, bytes) in [false, true].into_iter().zip(&mut at_rest) {
        let path = out_dir.join("history-at-rest.db");
        new_solution(tserver, &path)?;
        let store = Store::open_file(&path)?;
        let mut recorders: Vec<Option<TagRecorder>> = (0..plan.storage_tags).map(|_| None).collect();
        let recorders = compressed.then_some(&mut recorders);
        *bytes = ingest(&store, &path, &day_names, plan.storage_seconds, recorders)?.1;
    }
    let [bytes_per_sample, compressed_bytes_per_sample] = at_rest;

    let rows_path = out_dir.join("history-rows.db");
    let mut rows = RowTable::create(&rows_path)?;
    let before = file_bytes(&rows_path)?;
    let started = Instant::now();
    for second in 0..i64::try_from(plan.burst_seconds)? {
        rows.insert(&second_of(&names, second, sample_of))?;
    }
    let rows_per_second = (plan.tags as u64 * plan.burst_seconds) as f64 / started.elapsed().as_secs_f64();
    let row_bytes_per_sample =
        (file_bytes(&rows_path)? - before) as f64 / (plan.tags as u64 * plan.burst_seconds) as f64;
    Ok(Burst {
        samples: plan.tags as u64 * plan.burst_seconds,
        stored_per_second,
        compressed_per_second,
        rows_per_second,
        bytes_per_sample,
        compressed_bytes_per_sample,
        row_bytes_per_sample,
    })
}

/// The plant of the sustained run: `tags` simulated tags, four in five noisy sines recorded
/// within a deviation above their noise, the rest integers stepping between a few levels.
fn simulated_plant(tags: usize) -> String {
    let mut text = String::new();
    for tag in 0..tags {
        let (name, path) = (tag_name(tag), format!("Hist/T{tag:05}"));
        let period = 300 + tag % 600;
        if tag % 5 == 4 {
            text.push_str(&format!(
                "[[tags]]\nname = \"{name}\"\npath = \"{path}\"\ntype = \"integer\"\ninitial = 5\n\
                 simulate = {{ amplitude = 3, period = {period} }}\n\n"
            ));
        } else {
            text.push_str(&format!(
                "[[tags]]\nname = \"{name}\"\npath = \"{path}\"\ntype = \"number\"\ninitial = 50.0\n\
                 history = {{ deadband = {DEVIATION} }}\nsimulate = {{ amplitude = 20, period = {period}, noise = 0.5 }}\n\n"
            ));
        }
    }
    text
}

/// tserver serving the simulated plant: its CPU over the measured seconds, as a share of one
/// core, and the samples its history holds of one tag (proof it recorded).
fn sustained(tserver: &Path, out_dir: &Path, plan: HistoryPlan) -> anyhow::Result<(f64, usize)> {
    let solution = out_dir.join("history-sustained.db");
    new_solution(tserver, &solution)?;
    let plant = out_dir.join("history-plant.toml");
    std::fs::write(&plant, simulated_plant(plan.tags))?;
    let path = solution.to_str().context("a UTF-8 path")?;
    run_quietly(
        tserver,
        &["plant", path, "import", plant.to_str().context("a UTF-8 path")?],
    )?;
    let addr = format!("127.0.0.1:{}", free_port()?);
    let mut child = Command::new(tserver)
        .args([
            "serve",
            "--solution",
            path,
            "--listen",
            &addr,
            "--simulator",
            "on",
        ])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(out_dir.join("tserver-history.log"))?)
        .spawn()
        .context("cannot run tserver serve")?;
    let measured = (|| {
        std::thread::sleep(Duration::from_secs(plan.sustained_seconds / 3 + 1));
        let (cpu_before, wall_before) = (
            cpu_seconds(child.id()).context("tserver's CPU time")?,
            Instant::now(),
        );
        std::thread::sleep(Duration::from_secs(plan.sustained_seconds));
        let cpu = cpu_seconds(child.id()).context("tserver's CPU time")? - cpu_before;
        Ok::<_, anyhow::Error>(cpu / wall_before.elapsed().as_secs_f64())
    })();
    let _ = child.kill();
    let _ = child.wait();
    let share = measured?;
    let store = Store::open_file(&solution)?;
    let recorded = store
        .tag_history_blocking(&tag_name(0), TagType::Number, (UNIX_EPOCH, SystemTime::now()), 1)?
        .total;
    if recorded == 0 {
        bail!("the sustained run recorded nothing of {}", tag_name(0));
    }
    Ok((share, recorded))
}

/// `seconds` of one-second samples of the trend's tag, a day at a time.
fn trend_days(seconds: i64) -> impl Iterator<Item = Vec<PendingSample>> {
    let name: std::sync::Arc<str> = std::sync::Arc::from(tag_name(0));
    (0..seconds).step_by(86_400).map(move |from| {
        (from..(from + 86_400).min(seconds))
            .map(|second| PendingSample {
                tag: std::sync::Arc::clone(&name),
                time: at(START_MS + second * 1000),
                value: TagValue::Number(reading(0, second)),
                quality: Quality::GOOD,
            })
            .collect()
    })
}

/// A solution file holding the trend's `seconds` of samples, as blocks.
fn trend_file(tserver: &Path, path: &Path, seconds: i64) -> anyhow::Result<()> {
    new_solution(tserver, path)?;
    let store = Store::open_file(path)?;
    for day in trend_days(seconds) {
        store.write_history_blocking(&day, &[], &HistoryLimits::NONE)?;
    }
    store.checkpoint_history_blocking(&HistoryLimits::NONE)?;
    Ok(())
}

/// The row table holding the same samples.
fn trend_rows(path: &Path, seconds: i64) -> anyhow::Result<RowTable> {
    let mut table = RowTable::create(path)?;
    for day in trend_days(seconds) {
        table.insert(&day)?;
    }
    Ok(table)
}

/// Waits until what was written reaches the disk, so a timed read does not share the disk
/// with the write-back of gigabytes written just before.
fn settle() -> anyhow::Result<()> {
    run_quietly(Path::new("sync"), &[])
}

/// A file holding `seconds` of one-second samples of `tags` tags, as blocks.
fn instant_file(tserver: &Path, path: &Path, tags: usize, seconds: i64) -> anyhow::Result<()> {
    new_solution(tserver, path)?;
    let store = Store::open_file(path)?;
    let names: Vec<std::sync::Arc<str>> = (0..tags).map(|tag| std::sync::Arc::from(tag_name(tag))).collect();
    for second in 0..seconds {
        let samples = second_of(&names, second, |tag, second| {
            TagValue::Number(reading(tag, second))
        });
        store.write_history_blocking(&samples, &[], &HistoryLimits::NONE)?;
    }
    store.checkpoint_history_blocking(&HistoryLimits::NONE)?;
    Ok(())
}

/// The p99 (ms) of `queries` runs of `query` after a few untimed, which says what is wrong
/// with an answer.
fn p99(queries: usize, mut query: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<f64> {
    // Untimed first, as a served query finds the file in the page cache and each of a
    // database's pooled connections with the statement prepared (the store takes them in
    // turn: a query alone takes each once in a few).
    for _ in 0..WARM_UP_QUERIES {
        query()?;
    }
    let mut durations = Vec::with_capacity(queries);
    for _ in 0..queries {
        let started = Instant::now();
        query()?;
        durations.push(started.elapsed());
    }
    Ok(quantile(&mut durations, 0.99))
}

/// Queries run untimed before a query's timed runs.
const WARM_UP_QUERIES: usize = 4;

/// The trend tag's `seconds` of history as a 1,000-bucket trend (4,000 samples at most).
fn trend_p99(store: &Store, seconds: i64, queries: usize) -> anyhow::Result<f64> {
    let window = (at(START_MS), at(START_MS + seconds * 1000 - 1));
    p99(queries, || {
        let page = store.tag_history_blocking(&tag_name(0), TagType::Number, window, 4_000)?;
        if page.total != usize::try_from(seconds)? || page.samples.len() > 4_000 {
            bail!(
                "the trend read {} of {seconds} samples into {}",
                page.total,
                page.samples.len()
            );
        }
        Ok(())
    })
}

/// The second hour of the trend tag's history, raw (3,600 samples).
fn raw_hour_p99(store: &Store, queries: usize) -> anyhow::Result<f64> {
    let hour = (at(START_MS + 3_600_000), at(START_MS + 7_200_000 - 1));
    p99(queries, || {
        let page = store.tag_history_blocking(&tag_name(0), TagType::Number, hour, 10_000)?;
        if page.samples.len() != 3_600 {
            bail!("the raw hour read {} samples", page.samples.len());
        }
        Ok(())
    })
}

/// `tags` tags' values halfway through their `seconds` of history.
fn instant_p99(store: &Store, tags: usize, seconds: i64, queries: usize) -> anyhow::Result<f64> {
    let names: Vec<String> = (0..tags).map(tag_name).collect();
    let tags: Vec<(&str, TagType)> = names
        .iter()
        .map(|name| (name.as_str(), TagType::Number))
        .collect();
    let instant = at(START_MS + seconds * 500 + 250);
    p99(queries, || {
        let values = store.values_at_blocking(&tags, instant)?;
        if values.iter().any(Option::is_none) {
            bail!("a tag had no value at the instant");
        }
        Ok(())
    })
}

/// Runs the scenario with the build in `bin`, its files in `out_dir`: its measuring side is
/// that build's `xtask history-bench`, so the store's writes and queries timed in process run
/// optimised, as users deploy them.
pub(crate) fn run(bin: &Path, out_dir: &Path, plan: HistoryPlan) -> anyhow::Result<Value> {
    let numbers = [
        plan.tags.to_string(),
        plan.sustained_seconds.to_string(),
        plan.burst_seconds.to_string(),
        plan.storage_tags.to_string(),
        plan.storage_seconds.to_string(),
        plan.trend_seconds.to_string(),
        plan.instant_tags.to_string(),
        plan.instant_seconds.to_string(),
        plan.queries.to_string(),
    ];
    let mut args = vec![
        bin.to_str().context("a UTF-8 build path")?,
        out_dir.to_str().context("a UTF-8 bench path")?,
    ];
    args.extend(numbers.iter().map(String::as_str));
    measuring_side(&bin.join("xtask"), "history-bench", &args)
}

/// `xtask history-bench BIN OUT_DIR TAGS SUSTAINED_S BURST_S STORAGE_TAGS STORAGE_S TREND_S
/// INSTANT_TAGS INSTANT_S QUERIES`: the measuring side; prints a JSON report.
pub(crate) fn measure(args: &[String]) -> anyhow::Result<()> {
    let [bin, out_dir, numbers @ ..] = args else {
        bail!(
            "usage: xtask history-bench BIN OUT_DIR TAGS SUSTAINED_S BURST_S STORAGE_TAGS STORAGE_S TREND_S INSTANT_TAGS INSTANT_S QUERIES"
        );
    };
    let number = |index: usize| -> anyhow::Result<u64> {
        let text = numbers
            .get(index)
            .with_context(|| format!("history-bench: argument {} is missing", index + 3))?;
        text.parse()
            .with_context(|| format!("history-bench: {text:?} is not a whole number"))
    };
    let plan = HistoryPlan {
        tags: usize::try_from(number(0)?)?,
        sustained_seconds: number(1)?,
        burst_seconds: number(2)?,
        storage_tags: usize::try_from(number(3)?)?,
        storage_seconds: number(4)?,
        trend_seconds: i64::try_from(number(5)?)?,
        instant_tags: usize::try_from(number(6)?)?,
        instant_seconds: i64::try_from(number(7)?)?,
        queries: usize::try_from(number(8)?)?,
    };
    let report = run_here(Path::new(bin), Path::new(out_dir), plan)?;
    println!("{report}");
    Ok(())
}

/// The scenario, measured in this process.
fn run_here(bin: &Path, out_dir: &Path, plan: HistoryPlan) -> anyhow::Result<Value> {
    let tserver = bin.join("tserver");
    let (cpu_share, recorded) = sustained(&tserver, out_dir, plan)?;
    let burst = burst(&tserver, out_dir, plan)?;

    let (blocks, rows) = (
        out_dir.join("history-trend.db"),
        out_dir.join("history-trend-rows.db"),
    );
    trend_file(&tserver, &blocks, plan.trend_seconds)?;
    let instants = out_dir.join("history-instants.db");
    instant_file(&tserver, &instants, plan.instant_tags, plan.instant_seconds)?;
    settle()?;
    let queries = plan.queries;
    let (trend_store, instant_store) = (Store::open_file(&blocks)?, Store::open_file(&instants)?);
    let trend_ms = trend_p99(&trend_store, plan.trend_seconds, queries)?;
    let raw_ms = raw_hour_p99(&trend_store, queries)?;
    let instant_ms = instant_p99(&instant_store, plan.instant_tags, plan.instant_seconds, queries)?;

    // The row table is written after the blocks are read, so neither is timed beside the
    // other's write-back.
    let table = trend_rows(&rows, plan.trend_seconds)?;
    settle()?;
    let window = (START_MS, START_MS + plan.trend_seconds * 1000 - 1);
    let mut row_runs = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let kept = table.trend(&tag_name(0), window, 1_000)?;
        row_runs.push(started.elapsed());
        if kept == 0 {
            bail!("the row table's trend read nothing");
        }
    }
    let row_fastest = quantile(&mut row_runs, 0.0);

    // PostgreSQL: both files copied by `tserver solution copy`, each into a database of its own.
    let postgres = PrivatePostgres::start();
    let (trend_url, instants_url) = (postgres.url("postgres"), postgres.url("instants"));
    run_quietly(
        Path::new("psql"),
        &[&trend_url, "-q", "-c", "CREATE DATABASE instants"],
    )?;
    run_quietly(
        &tserver,
        &[
            "solution",
            "copy",
            blocks.to_str().context("a UTF-8 path")?,
            &trend_url,
        ],
    )?;
    run_quietly(
        &tserver,
        &[
            "solution",
            "copy",
            instants.to_str().context("a UTF-8 path")?,
            &instants_url,
        ],
    )?;
    // The copies' pages written out before the queries, as `settle` does for the files, so a
    // checkpoint of them is not timed beside a query.
    run_quietly(Path::new("psql"), &[&trend_url, "-q", "-c", "CHECKPOINT"])?;
    settle()?;
    let runtime = tokio::runtime::Runtime::new()?;
    let open = |url: &str| -> anyhow::Result<Store> {
        Ok(runtime.block_on(Store::open(&store::SolutionLocation::parse(url)?))?)
    };
    let (trend_database, instants_database) = (open(&trend_url)?, open(&instants_url)?);
    let pg_trend_ms = trend_p99(&trend_database, plan.trend_seconds, queries)?;
    let pg_raw_ms = raw_hour_p99(&trend_database, queries)?;
    let pg_instant_ms = instant_p99(
        &instants_database,
        plan.instant_tags,
        plan.instant_seconds,
        queries,
    )?;
    drop((trend_database, instants_database));
    drop(runtime);
    drop(postgres);

    Ok(json!({
        "tags": plan.tags,
        "sustainedCpuShare": cpu_share,
        "sustainedRecordedOfOneTag": recorded,
        "burstSamples": burst.samples,
        "burstStoredPerSecond": burst.stored_per_second,
        "burstCompressedPerSecond": burst.compressed_per_second,
        "burstRowsPerSecond": burst.rows_per_second,
        "burstRatio": burst.stored_per_second / burst.rows_per_second,
        "bytesPerSample": burst.bytes_per_sample,
        "compressedBytesPerSample": burst.compressed_bytes_per_sample,
        "rowBytesPerSample": burst.row_bytes_per_sample,
        "trendSamples": plan.trend_seconds,
        "trendP99Ms": trend_ms,
        "rowTrendFastestMs": row_fastest,
        "trendSpeedup": row_fastest / trend_ms,
        "instantTags": plan.instant_tags,
        "instantP99Ms": instant_ms,
        "rawHourP99Ms": raw_ms,
        "postgres": {
            "trendP99Ms": pg_trend_ms,
            "instantP99Ms": pg_instant_ms,
            "rawHourP99Ms": pg_raw_ms,
            "trendRatio": pg_trend_ms / trend_ms,
            "trendSpeedup": row_fastest / pg_trend_ms,
            "instantRatio": pg_instant_ms / instant_ms,
            "rawHourRatio": pg_raw_ms / raw_ms,
        },
    }))
}

/// Runs the scenario and judges its rows.
pub(crate) fn judge(
    bin: &Path,
    out_dir: &Path,
    plan: HistoryPlan,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let history = run(bin, out_dir, plan)?;
    let number = |key: &str| history[key].as_f64().unwrap_or(f64::NAN);
    let tags = plan.tags;
    verdicts.judge(
        format!("history: {tags} tags changing each second, tserver CPU"),
        format!("{:.1}% of a core", number("sustainedCpuShare") * 100.0),
        verdicts::HISTORY_CPU,
        number("sustainedCpuShare"),
        true,
    );
    verdicts.judge(
        "history: burst ingestion vs bare indexed row insert".to_owned(),
        format!(
            "{:.0} vs {:.0} samples/s = {:.2}x",
            number("burstStoredPerSecond"),
            number("burstRowsPerSecond"),
            number("burstRatio")
        ),
        verdicts::HISTORY_BURST,
        number("burstRatio"),
        true,
    );
    verdicts.judge(
        "history: bytes per sample, compression on".to_owned(),
        format!(
            "{:.2} B (off {:.2} B, rows {:.1} B)",
            number("compressedBytesPerSample"),
            number("bytesPerSample"),
            number("rowBytesPerSample")
        ),
        verdicts::HISTORY_BYTES,
        number("compressedBytesPerSample"),
        true,
    );
    let samples = plan.trend_seconds;
    verdicts.judge(
        format!("history: {samples} samples as 1,000 M4 buckets, p99"),
        format!("{:.1} ms", number("trendP99Ms")),
        verdicts::HISTORY_TREND_P99,
        number("trendP99Ms"),
        true,
    );
    verdicts.judge(
        "history: that trend vs the row table's fastest".to_owned(),
        format!(
            "{:.0} ms / {:.1} ms = {:.0}x",
            number("rowTrendFastestMs"),
            number("trendP99Ms"),
            number("trendSpeedup")
        ),
        verdicts::HISTORY_TREND_SPEEDUP,
        number("trendSpeedup"),
        true,
    );
    verdicts.judge(
        format!("history: {} tags at a past instant, p99", plan.instant_tags),
        format!("{:.1} ms", number("instantP99Ms")),
        verdicts::HISTORY_INSTANT_P99,
        number("instantP99Ms"),
        true,
    );
    verdicts.judge(
        "history on PostgreSQL: its trend vs the row table's fastest".to_owned(),
        format!(
            "{:.0} ms / {:.1} ms = {:.0}x",
            number("rowTrendFastestMs"),
            history["postgres"]["trendP99Ms"].as_f64().unwrap_or(f64::NAN),
            history["postgres"]["trendSpeedup"].as_f64().unwrap_or(f64::NAN)
        ),
        verdicts::HISTORY_TREND_SPEEDUP,
        history["postgres"]["trendSpeedup"].as_f64().unwrap_or(f64::NAN),
        true,
    );
    for (key, what) in [
        ("trendRatio", "trend"),
        ("instantRatio", "instant"),
        ("rawHourRatio", "raw hour"),
    ] {
        let ratio = history["postgres"][key].as_f64().unwrap_or(f64::NAN);
        verdicts.judge(
            format!("history on PostgreSQL vs SQLite: {what} p99"),
            format!("{ratio:.2}x"),
            verdicts::HISTORY_POSTGRES,
            ratio,
            true,
        );
    }
    results.insert("history", history);
    Ok(())
}
