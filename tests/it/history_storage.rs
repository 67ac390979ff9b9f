//! The historian's storage against a real server process: a `kill -9` during ingestion loses
//! at most what was not yet flushed and never what was stored, and the restarted server reads
//! and goes on with the same history.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use plant_model::{TagType, TagValue};
use service_client::{Client, ClientOptions, TagWrite, WriteOutcome, WriteValue};

use crate::operator_writes::solution_with_writable_tags;
use crate::support::{ServerProcess, Solution};

/// How long after its write a sample may still be only in memory: the flush interval (1 s)
/// and the time one flush may take on a busy machine.
const UNFLUSHED: Duration = Duration::from_millis(1500);

/// The notes `Tank1.OperatorNote`'s history holds, oldest first, read from the file.
fn stored_notes(solution: &Solution) -> Vec<String> {
    let store = store::Store::open_file(&solution.path).expect("the file opens");
    let page = store
        .tag_history_blocking(
            "Tank1.OperatorNote",
            TagType::String,
            (UNIX_EPOCH, SystemTime::now() + Duration::from_secs(3600)),
            usize::MAX,
        )
        .expect("its history reads");
    page.samples
        .into_iter()
        .filter_map(|sample| match sample.value {
            TagValue::Text(text) if text.starts_with("note-") => Some(text.to_string()),
            _ => None,
        })
        .collect()
}

async fn guest(server: &ServerProcess) -> Client {
    let client = Client::connect(server.addr, ClientOptions::default())
        .await
        .expect("connects");
    client.login("guest", "").await.expect("logs in");
    client
}

async fn write_note(client: &Client, note: &str) {
    let results = client
        .write_tags(vec![TagWrite {
            name: "Tank1.OperatorNote".to_owned(),
            value: Some(WriteValue::Text(note.to_owned())),
        }])
        .await
        .expect("answered");
    assert_eq!(results[0].outcome(), WriteOutcome::Written, "{results:?}");
}

#[tokio::test]
async fn a_server_killed_during_ingestion_loses_at_most_the_last_flush_and_nothing_stored() {
    let solution = solution_with_writable_tags();
    let server = ServerProcess::start(&solution.path, &[], &[]);
    let client = guest(&server).await;
    // Notes written for three seconds (at most 300), each acknowledged before the next.
    let started = Instant::now();
    let mut acknowledged: Vec<(String, Instant)> = Vec::new();
    while started.elapsed() < Duration::from_secs(3) && acknowledged.len() < 300 {
        let note = format!("note-{}", acknowledged.len());
        write_note(&client, &note).await;
        acknowledged.push((note, Instant::now()));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let killed_at = Instant::now();
    drop(client);
    drop(server); // SIGKILL: no shutdown, no last flush.

    let kept = stored_notes(&solution);
    let written: Vec<String> = acknowledged.iter().map(|(note, _)| note.clone()).collect();
    assert_eq!(
        kept,
        written[..kept.len()],
        "what is kept is what was written, in order"
    );
    let flushed = acknowledged
        .iter()
        .filter(|(_, at)| killed_at.duration_since(*at) > UNFLUSHED)
        .count();
    assert!(
        kept.len() >= flushed,
        "{} of the {flushed} notes written more than {UNFLUSHED:?} before the kill are kept",
        kept.len()
    );

    // A restarted server reads the same history and adds to it.
    let server = ServerProcess::start(&solution.path, &[], &[]);
    let client = guest(&server).await;
    write_note(&client, "note-after").await;
    let history = client
        .tag_history(service_client::TagHistoryRequest {
            name: "Tank1.OperatorNote".to_owned(),
            max_samples: 10_000,
            ..Default::default()
        })
        .await
        .expect("answered");
    let served: Vec<&str> = history
        .samples
        .iter()
        .filter_map(|sample| match &sample.value {
            Some(service_client::HistoryValue::Text(text)) => Some(text.as_str()),
            _ => None,
        })
        .filter(|text| text.starts_with("note-"))
        .collect();
    let mut expected: Vec<&str> = kept.iter().map(String::as_str).collect();
    expected.push("note-after");
    assert_eq!(served, expected);
}
