//! The historian's answers from a real SQLite file and a real PostgreSQL database alike: raw
//! pages that lose and repeat no sample (a late one, two in one millisecond and the journal's
//! included), trends and aggregates per interval opened by the value before the window, and
//! aggregates that agree with the samples.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use plant_model::{Quality, TagType, TagValue};
use store::test_database::TestDatabase;
use store::{HistoryInterval, HistoryLimits, HistorySample, PendingSample, SolutionLocation, Store};

use crate::support::Solution;

fn at(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms.unsigned_abs())
}

fn pending(tag: &Arc<str>, ms: i64, value: TagValue) -> PendingSample {
    PendingSample {
        tag: Arc::clone(tag),
        time: at(ms),
        value,
        quality: Quality::GOOD,
    }
}

/// Journals `samples` and folds them into blocks, keeping everything.
fn stored_in_blocks(store: &Store, samples: &[PendingSample]) {
    store
        .write_history_blocking(samples, &[], &HistoryLimits::NONE)
        .expect("journals");
    store
        .checkpoint_history_blocking(&HistoryLimits::NONE)
        .expect("folds");
}

/// `Line.Flow` reads its own time in seconds, once a second for 3,000 s, but for a late
/// spike at 500.5 s (stored after the rest) and two readings at 2,000 s; its last 20 seconds
/// stay in the journal. `Pump.Running` turns every 10 s for 1,000 s.
fn record(store: &Store) {
    let flow: Arc<str> = Arc::from("Line.Flow");
    let running: Arc<str> = Arc::from("Pump.Running");
    let mut samples: Vec<PendingSample> = (0..3_000_i64)
        .map(|second| pending(&flow, second * 1000, TagValue::Number(second as f64)))
        .collect();
    samples.insert(2_001, pending(&flow, 2_000_000, TagValue::Number(-1.0)));
    samples.extend((0..100_i64).map(|step| pending(&running, step * 10_000, TagValue::Bool(step % 2 == 0))));
    stored_in_blocks(store, &samples);
    let later = [
        pending(&flow, 500_500, TagValue::Number(9_999.0)),
        // The journal's, left unfolded.
    ]
    .into_iter()
    .chain((3_000..3_020_i64).map(|second| pending(&flow, second * 1000, TagValue::Number(second as f64))))
    .collect::<Vec<_>>();
    // The late spike, in a block of its own.
    stored_in_blocks(store, &later[..1]);
    store
        .write_history_blocking(&later[1..], &[], &HistoryLimits::NONE)
        .expect("journals");
}

/// Every page of `Line.Flow` in `window`, `limit` at a time.
fn every_page(store: &Store, window: (SystemTime, SystemTime), limit: usize) -> (Vec<HistorySample>, usize) {
    let (mut samples, mut pages, mut after) = (Vec::new(), 0, None);
    loop {
        let page = store
            .raw_history_blocking("Line.Flow", TagType::Number, window, after, limit)
            .expect("a page reads");
        assert!(page.samples.len() <= limit);
        pages += 1;
        samples.extend(page.samples.iter().cloned());
        match page.next(page.samples.len()) {
            Some(next) => after = Some(next),
            None => return (samples, pages),
        }
        assert!(pages < 1_000, "paging ends");
    }
}

fn check(store: &Store) -> Vec<HistoryInterval> {
    record(store);
    // Raw: every sample of the window, in time order, once, the spike in place.
    let window = (at(100_000), at(3_010_000));
    let (read, pages) = every_page(store, window, 97);
    let seconds: Vec<f64> = read
        .iter()
        .map(|sample| match sample.value {
            TagValue::Number(value) => value,
            ref other => panic!("a number, not {other:?}"),
        })
        .collect();
    let mut expected: Vec<f64> = (100..=3_010).map(f64::from).collect();
    expected.insert(401, 9_999.0);
    let doubled = expected
        .iter()
        .position(|value| *value == 2_000.0)
        .expect("2000 s");
    expected.insert(doubled + 1, -1.0);
    assert_eq!(seconds, expected);
    assert_eq!(pages, expected.len().div_ceil(97));
    assert!(read.windows(2).all(|pair| pair[0].time <= pair[1].time));

    // Aggregates per minute from 100.5 s: each opens with the line from 100 s.
    let window = (at(100_500), at(3_000_499));
    let intervals = store
        .history_intervals_blocking(
            "Line.Flow",
            TagType::Number,
            window,
            Duration::from_secs(60),
            at(3_020_000),
        )
        .expect("intervals read");
    assert_eq!(intervals.len(), 49);
    let first = &intervals[0];
    assert_eq!(first.count, 60, "101 s to 160 s");
    assert_eq!(first.good, Duration::from_secs(60));
    let average = first.average.expect("an average");
    assert!((average - 130.5).abs() < 1e-9, "{average}");
    assert_eq!(first.min.as_ref().map(|sample| sample.time), Some(at(101_000)));
    let spike = intervals
        .iter()
        .find(|interval| {
            interval
                .max
                .as_ref()
                .is_some_and(|max| max.value == TagValue::Number(9_999.0))
        })
        .expect("the spike's interval");
    assert_eq!(spike.count, 61);
    // The line t (490.5 on average over 460.5-520.5 s) and the two sides of the spike over
    // 500-501 s, 4,749.25 above it.
    let spike_average = spike.average.expect("an average");
    assert!(
        (spike_average - (490.5 + 4_749.25 / 60.0)).abs() < 1e-9,
        "{spike_average}"
    );

    let running = store
        .history_intervals_blocking(
            "Pump.Running",
            TagType::Bool,
            (at(0), at(999_999)),
            Duration::from_secs(100),
            at(3_020_000),
        )
        .expect("intervals read");
    assert_eq!(running.len(), 10);
    for interval in &running {
        assert_eq!(
            interval.states,
            vec![
                (TagValue::Bool(true), Duration::from_secs(50)),
                (TagValue::Bool(false), Duration::from_secs(50))
            ]
        );
        assert_eq!(interval.average, Some(0.5));
        assert_eq!(interval.count, 10);
    }
    openings(store);
    retention(store);
    intervals
}

/// The value a trend's window opens with: the tag's last sample before it, from a block's
/// summary, a block's data, the late spike's block or the journal; none before the first.
fn openings(store: &Store) {
    let opening = |tag: &str, kind: TagType, from: i64, to: i64| {
        let page = store
            .tag_history_blocking(tag, kind, (at(from), at(to)), 400)
            .expect("a trend reads");
        page.opening.map(|sample| (sample.time, sample.value))
    };
    let flow = |from: i64| opening("Line.Flow", TagType::Number, from, from + 100_000);
    assert_eq!(flow(100_500), Some((at(100_000), TagValue::Number(100.0))));
    assert_eq!(flow(500_700), Some((at(500_500), TagValue::Number(9_999.0))));
    assert_eq!(flow(3_010_500), Some((at(3_010_000), TagValue::Number(3_010.0))));
    assert_eq!(flow(0), None, "nothing before the first sample");
    // Long after the last sample, a window without samples still opens with it.
    let quiet = store
        .tag_history_blocking("Line.Flow", TagType::Number, (at(9_000_000), at(9_500_000)), 400)
        .expect("a trend reads");
    assert_eq!(quiet.total, 0);
    assert_eq!(
        quiet.opening.map(|sample| sample.value),
        Some(TagValue::Number(3_019.0))
    );
    assert_eq!(
        opening("Pump.Running", TagType::Bool, 15_000, 30_000),
        Some((at(10_000), TagValue::Bool(false)))
    );
}

/// How many samples of `tag` (a number tag) are kept.
fn kept(store: &Store, tag: &str) -> usize {
    store
        .tag_history_blocking(tag, TagType::Number, (UNIX_EPOCH, at(i64::MAX / 2)), 4)
        .expect("reads")
        .total
}

/// A tag with a retention of its own keeps its blocks past the solution's, and loses them
/// before it when its own is shorter; every other tag goes by the solution's.
fn retention(store: &Store) {
    let (default, own): (Arc<str>, Arc<str>) = (Arc::from("Old.Default"), Arc::from("Old.Own"));
    let samples: Vec<PendingSample> = (0..2_048_i64)
        .flat_map(|second| {
            let time = 5_000_000 + second * 1000;
            [
                pending(&default, time, TagValue::Number((second % 17) as f64)),
                pending(&own, time, TagValue::Number((second % 13) as f64)),
            ]
        })
        .collect();
    stored_in_blocks(store, &samples);
    let longer = HistoryLimits {
        keep_after: at(10_000_000),
        max_bytes: None,
        own: vec![(Arc::clone(&own), UNIX_EPOCH)],
    };
    // A flush prunes by the solution's retention, a checkpoint by the tags' own.
    store.write_history_blocking(&[], &[], &longer).expect("prunes");
    store.checkpoint_history_blocking(&longer).expect("prunes");
    assert_eq!(kept(store, "Old.Default"), 0, "past the solution's retention");
    assert_eq!(kept(store, "Old.Own"), 2_048, "within its own");
    let shorter = HistoryLimits {
        keep_after: UNIX_EPOCH,
        max_bytes: None,
        own: vec![(Arc::clone(&own), at(10_000_000))],
    };
    store.checkpoint_history_blocking(&shorter).expect("prunes");
    assert_eq!(kept(store, "Old.Own"), 0, "past its own retention");
}

#[tokio::test]
async fn raw_pages_and_aggregates_answer_alike_from_a_file_and_a_database() {
    let solution = Solution::empty();
    let on_file = Store::open_file(&solution.path).expect("opens");
    let database = TestDatabase::create().await;
    let location = SolutionLocation::parse(&database.url()).expect("a location");
    let on_postgres = Store::open(&location).await.expect("opens");
    let from_file = tokio::task::spawn_blocking(move || check(&on_file))
        .await
        .expect("the file answers");
    let from_postgres = tokio::task::spawn_blocking(move || check(&on_postgres))
        .await
        .expect("the database answers");
    assert_eq!(from_file, from_postgres);
}
