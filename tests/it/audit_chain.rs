//! The audit trail as a hash chain, on a solution file and on PostgreSQL: `tserver audit
//! verify` passes on an untouched trail and names the first row changed, removed or inserted
//! behind the server's back; pruning leaves a signed checkpoint the rest verifies from; two
//! nodes appending at once never fork the chain, nor does a node whose head was pruned away.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use sqlx::Connection as _;
use store::test_database::TestDatabase;
use store::{AuditAction, AuditEntry, AuditLog, SolutionLocation, Store};

use crate::support::{ServerProcess, Solution, admin, try_admin};

/// An entry recorded at `time`.
fn entry(n: usize, time: SystemTime) -> AuditEntry {
    AuditEntry {
        time,
        user: "ops".to_owned(),
        connection: "chain-test".to_owned(),
        peer: "local".to_owned(),
        action: AuditAction::Write,
        target: "Pump1.Mode".to_owned(),
        old_value: Some("\"Auto\"".to_owned()),
        new_value: Some(format!("\"Manual {n}\"")),
        outcome: "ok".to_owned(),
        signatures: None,
    }
}

/// Records `count` entries, each in a call of its own, at `time`.
async fn record(store: &Arc<Store>, count: usize, time: SystemTime) {
    let audit = AuditLog::start(Arc::clone(store), Duration::from_secs(3650 * 86_400)).expect("starts");
    for n in 0..count {
        audit.record(vec![entry(n, time)]).await.expect("recorded");
    }
}

/// `tserver audit LOCATION verify`: what it printed, or its error.
fn verify(location: &str) -> Result<String, String> {
    try_admin(&["audit", location, "verify"], "").map_err(|error| format!("{error:#}"))
}

fn refused(location: &str) -> String {
    verify(location).expect_err("the tampered trail does not verify")
}

#[tokio::test]
async fn a_row_changed_removed_or_inserted_in_the_file_is_named() {
    let solution = Solution::empty();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let store = Arc::new(Store::open_file(&solution.path).expect("opens"));
    record(&store, 5, SystemTime::now()).await;
    let verified = verify(&path).expect("verifies");
    assert!(
        verified.starts_with("the audit trail verifies: 5 rows, from its start\nnewest row 5, hash "),
        "{verified}"
    );

    let file = rusqlite::Connection::open(&solution.path).expect("opens the file");
    let run = |sql: &str| file.execute_batch(sql).expect("tampers");
    run("UPDATE Audit SET Outcome = 'refused' WHERE Id = 3");
    assert!(
        refused(&path).contains("row 3 was changed after it was recorded"),
        "{}",
        refused(&path)
    );
    run("UPDATE Audit SET Outcome = 'ok' WHERE Id = 3");
    verify(&path).expect("verifies again once undone");

    run("CREATE TABLE Kept AS SELECT * FROM Audit WHERE Id = 3; DELETE FROM Audit WHERE Id = 3");
    assert!(
        refused(&path).contains("rows were removed between row 2 and row 4"),
        "{}",
        refused(&path)
    );
    run("INSERT INTO Audit SELECT * FROM Kept; DROP TABLE Kept");
    verify(&path).expect("verifies again once put back");

    run(
        "INSERT INTO Audit (Time, UserName, Connection, Peer, Action, Target, OldValue, NewValue, Outcome)
         SELECT Time, 'mallory', Connection, Peer, Action, Target, OldValue, NewValue, Outcome FROM Audit WHERE Id = 5",
    );
    assert!(
        refused(&path).contains("row 6, the newest, was changed or added"),
        "{}",
        refused(&path)
    );
    // The server's next row links past the one put in: now it shows as inserted.
    record(&store, 1, SystemTime::now()).await;
    assert!(
        refused(&path).contains("row 6 was inserted"),
        "{}",
        refused(&path)
    );
}

#[tokio::test]
async fn a_pruned_file_trail_verifies_from_its_signed_checkpoint() {
    let solution = Solution::empty();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let store = Arc::new(Store::open_file(&solution.path).expect("opens"));
    let old = SystemTime::now() - Duration::from_secs(40 * 86_400);
    record(&store, 3, old).await;
    record(&store, 3, SystemTime::now()).await;
    let pruned = store
        .prune_audit_blocking(SystemTime::now() - Duration::from_secs(30 * 86_400))
        .expect("prunes");
    assert_eq!(pruned, 3);
    let verified = verify(&path).expect("verifies");
    assert!(
        verified.starts_with(
            "the audit trail verifies: 3 rows, from the signed checkpoint pruning left (through row 3)\n"
        ),
        "{verified}"
    );
    record(&store, 2, SystemTime::now()).await;
    assert!(
        verify(&path)
            .expect("verifies")
            .starts_with("the audit trail verifies: 5 rows")
    );

    let file = rusqlite::Connection::open(&solution.path).expect("opens the file");
    file.execute_batch("DELETE FROM Audit WHERE Id = 4")
        .expect("removes the first row kept");
    assert!(
        refused(&path).contains("row 5 does not link to the checkpoint left by pruning (through row 3)"),
        "{}",
        refused(&path)
    );
    // A checkpoint moved to cover the gap is not the one the server signed.
    file.execute_batch(
        "UPDATE AuditCheckpoint SET ThroughId = 4, Hash = (SELECT PrevHash FROM Audit WHERE Id = 5)",
    )
    .expect("forges the checkpoint");
    assert!(
        refused(&path).contains("(through row 4) is not signed with this solution's secrets key"),
        "{}",
        refused(&path)
    );
}

/// A demo database on PostgreSQL and its store.
async fn postgres() -> (TestDatabase, String, Arc<Store>) {
    let database = TestDatabase::create().await;
    let url = database.url();
    admin(&["init", &url], "");
    let store = node(&url).await;
    (database, url, store)
}

/// A store of the solution at `url`, as one node opens it.
async fn node(url: &str) -> Arc<Store> {
    Arc::new(
        Store::open(&SolutionLocation::parse(url).expect("a location"))
            .await
            .expect("opens"),
    )
}

#[tokio::test]
async fn a_row_changed_removed_or_inserted_in_the_database_is_named() {
    let (_database, url, store) = postgres().await;
    record(&store, 5, SystemTime::now()).await;
    assert!(
        verify(&url)
            .expect("verifies")
            .starts_with("the audit trail verifies: 5 rows")
    );
    let mut connection = sqlx::PgConnection::connect(&url).await.expect("connects");
    let first: i64 = sqlx::query_scalar("SELECT MIN(Id) FROM Audit")
        .fetch_one(&mut connection)
        .await
        .expect("ids");
    let (second, third, fourth) = (first + 1, first + 2, first + 3);
    let mut run = async |sql: String| {
        sqlx::raw_sql(&sql)
            .execute(&mut connection)
            .await
            .expect("tampers");
    };
    run(format!(
        "UPDATE Audit SET NewValue = '\"Off\"' WHERE Id = {third}"
    ))
    .await;
    assert!(
        refused(&url).contains(&format!("row {third} was changed")),
        "{}",
        refused(&url)
    );
    run(format!(
        "UPDATE Audit SET NewValue = '\"Manual 2\"' WHERE Id = {third}"
    ))
    .await;
    verify(&url).expect("verifies again once undone");

    run(format!(
        "CREATE TABLE Kept AS SELECT * FROM Audit WHERE Id = {third}; DELETE FROM Audit WHERE Id = {third}"
    ))
    .await;
    assert!(
        refused(&url).contains(&format!(
            "rows were removed between row {second} and row {fourth}"
        )),
        "{}",
        refused(&url)
    );
    run("INSERT INTO Audit OVERRIDING SYSTEM VALUE SELECT * FROM Kept; DROP TABLE Kept".to_owned()).await;
    verify(&url).expect("verifies again once put back");

    run(
        "INSERT INTO Audit (Time, UserName, Connection, Peer, Action, Target, OldValue, NewValue, Outcome)
         SELECT Time, 'mallory', Connection, Peer, Action, Target, OldValue, NewValue, Outcome
         FROM Audit ORDER BY Id DESC LIMIT 1"
            .to_owned(),
    )
    .await;
    record(&store, 1, SystemTime::now()).await;
    let inserted = first + 5;
    assert!(
        refused(&url).contains(&format!("row {inserted} was inserted")),
        "{}",
        refused(&url)
    );
}

#[tokio::test]
async fn two_nodes_appending_at_once_keep_one_chain() {
    let (_database, url, one) = postgres().await;
    let two = node(&url).await;
    let now = SystemTime::now();
    let appending = |store: Arc<Store>| async move {
        let audit = AuditLog::start(store, Duration::from_secs(86_400)).expect("starts");
        let calls = (0..40).map(|n| audit.record(vec![entry(n, now), entry(n + 100, now)]));
        for recorded in futures::future::join_all(calls).await {
            recorded.expect("recorded");
        }
    };
    tokio::join!(appending(Arc::clone(&one)), appending(two));
    let verified = verify(&url).expect("one chain, unforked");
    assert!(
        verified.starts_with("the audit trail verifies: 160 rows, from its start\n"),
        "{verified}"
    );
}

#[tokio::test]
async fn a_node_whose_known_head_was_pruned_away_links_to_the_checkpoint() {
    let (_database, url, one) = postgres().await;
    let two = node(&url).await;
    let old = SystemTime::now() - Duration::from_secs(40 * 86_400);
    // `one` knows the head it appended; `two` appends after it; pruning then removes them all,
    // so no row is left that follows the head `one` knows.
    record(&one, 1, old).await;
    record(&two, 2, old).await;
    let pruner = Arc::clone(&two);
    let pruned = tokio::task::spawn_blocking(move || {
        pruner.prune_audit_blocking(SystemTime::now() - Duration::from_secs(30 * 86_400))
    })
    .await
    .expect("runs")
    .expect("prunes");
    assert_eq!(pruned, 3);
    record(&one, 1, SystemTime::now()).await;
    let mut connection = sqlx::PgConnection::connect(&url).await.expect("connects");
    let links: Vec<Vec<u8>> = sqlx::query_scalar("SELECT PrevHash FROM Audit")
        .fetch_all(&mut connection)
        .await
        .expect("reads");
    let checkpoint: Vec<u8> =
        sqlx::query_scalar("SELECT Hash FROM AuditCheckpoint ORDER BY ThroughId DESC LIMIT 1")
            .fetch_one(&mut connection)
            .await
            .expect("a checkpoint");
    assert_eq!(links, [checkpoint], "the new row follows the newest pruned row");
}

#[tokio::test]
async fn a_pruned_database_trail_verifies_from_its_signed_checkpoint() {
    let (_database, url, store) = postgres().await;
    let key = "5a".repeat(32);
    record(&store, 3, SystemTime::now() - Duration::from_secs(40 * 86_400)).await;
    record(&store, 2, SystemTime::now()).await;
    admin(&["settings", &url, "set", "AuditRetentionDays", "30"], "");
    // A node prunes when it starts, signing the checkpoint with the nodes' key.
    let node = ServerProcess::start(std::path::Path::new(&url), &[], &[(store::KEY_ENV, key.as_str())]);
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while store.audit(None, 100).await.expect("reads").len() != 2 {
        assert!(std::time::Instant::now() < deadline, "never pruned");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(node);
    let verify_with = |key: Option<&str>| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_tserver-under-test"));
        command.args(["audit", &url, "verify"]).env_remove(store::KEY_ENV);
        if let Some(key) = key {
            command.env(store::KEY_ENV, key);
        }
        let done = command.output().expect("runs");
        (
            done.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&done.stdout),
                String::from_utf8_lossy(&done.stderr)
            ),
        )
    };
    let (verified, said) = verify_with(Some(&key));
    assert!(verified, "{said}");
    assert!(
        said.contains("2 rows, from the signed checkpoint pruning left"),
        "{said}"
    );
    let (verified, said) = verify_with(Some(&"77".repeat(32)));
    assert!(
        !verified && said.contains("is not signed with this solution's secrets key"),
        "{said}"
    );
    let (verified, said) = verify_with(None);
    assert!(!verified && said.contains("cannot be checked"), "{said}");
}
