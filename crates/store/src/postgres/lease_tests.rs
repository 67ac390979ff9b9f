//! The settings lease against the machine's real PostgreSQL (127.0.0.1:5432, trust), each
//! test in a database of its own: a change made through one node is what another node's next
//! read sees while both answer from their copies, a writer waits for a lease nobody gives up
//! until it runs out, a node that lost its listener reads at every call, and a change of the
//! settings row that bypasses the writer lock is refused.

use std::time::{Duration, Instant};

use sqlx::Connection;

use super::settings_lease::WRITER_LOCK;
use super::{PgStore, PostgresUrl};
use crate::SettingKey;
use crate::test_database::TestDatabase;

/// A store on the test's database, serving (holding the settings lease).
async fn serving_node(database: &TestDatabase) -> PgStore {
    let url = PostgresUrl::parse(&database.url()).expect("a valid URL");
    let store = PgStore::open(&url).await.expect("opens");
    store.hold_settings_lease();
    store
}

/// Reads the settings on `store` until its reads are answered from its copy (bounded).
async fn until_kept(store: &PgStore, kept: bool) {
    let give_up = Instant::now() + Duration::from_secs(20);
    loop {
        store.settings_row().await.expect("the settings row");
        if store.settings_kept() == kept {
            return;
        }
        assert!(
            Instant::now() < give_up,
            "the node's copy was never {}",
            if kept { "kept" } else { "dropped" }
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn connection(database: &TestDatabase) -> sqlx::PgConnection {
    sqlx::PgConnection::connect(&database.url())
        .await
        .expect("connects")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_through_one_node_is_what_another_nodes_next_read_sees_while_both_keep_copies() {
    let database = TestDatabase::create().await;
    let (one, two) = (serving_node(&database).await, serving_node(&database).await);
    for (round, enabled) in [true, false, true, false].into_iter().enumerate() {
        until_kept(&one, true).await;
        until_kept(&two, true).await;
        let (writer, reader) = if round % 2 == 0 {
            (&one, &two)
        } else {
            (&two, &one)
        };
        writer
            .set_setting(&SettingKey::ModelEnabled, if enabled { "on" } else { "off" })
            .await
            .expect("set");
        for node in [reader, writer] {
            let row = node.settings_row().await.expect("the settings row");
            assert_eq!(row.model_enabled, enabled, "round {round}");
        }
    }
    // A key of the settings document, through the copy as well.
    until_kept(&two, true).await;
    one.set_setting(&SettingKey::parse("URL").expect("a key"), "http://127.0.0.1:9/v1")
        .await
        .expect("set");
    let row = two.settings_row().await.expect("the settings row");
    assert!(
        row.model_settings
            .as_deref()
            .is_some_and(|json| json.contains("http://127.0.0.1:9/v1")),
        "{row:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_waits_for_a_lease_nobody_gives_up_until_it_runs_out() {
    let database = TestDatabase::create().await;
    let store = serving_node(&database).await;
    let mut watcher = connection(&database).await;
    // A node that took a lease and then hung: it never acknowledges.
    sqlx::query(
        "INSERT INTO SettingsCaches (Node, LeaseUntil, Invalidated)
         VALUES ('a hung node', clock_timestamp() + interval '3 seconds', 0)",
    )
    .execute(&mut watcher)
    .await
    .expect("a lease");
    let writing = tokio::spawn(async move {
        store
            .set_setting(&SettingKey::ModelEnabled, "on")
            .await
            .expect("set");
        store
    });
    // While the lease lasts, the change is not committed (one statement: the lease is checked
    // on the clock after the snapshot the row is read in).
    loop {
        let (lasts, enabled): (bool, i32) = sqlx::query_as(
            "SELECT LeaseUntil > clock_timestamp(), ModelEnabled
             FROM SettingsCaches, SolutionSettings WHERE Node = 'a hung node'",
        )
        .fetch_one(&mut watcher)
        .await
        .expect("read");
        if !lasts {
            break;
        }
        assert_eq!(
            enabled, 0,
            "the change committed while a lease it did not revoke lasted"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let store = writing.await.expect("the writer");
    assert!(store.settings_row().await.expect("read").model_enabled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_lost_its_listener_reads_at_every_call_until_it_listens_again() {
    let database = TestDatabase::create().await;
    let store = serving_node(&database).await;
    until_kept(&store, true).await;
    // From the machine's `test` database: a database cannot refuse its own connections.
    let mut admin = sqlx::PgConnection::connect("postgres://postgres@127.0.0.1:5432/test")
        .await
        .expect("connects");
    let name = database.name();
    // No new connection may come in, so the listener cannot come back until allowed.
    sqlx::raw_sql(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS false"))
        .execute(&mut admin)
        .await
        .expect("connections refused");
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = $1 AND query LIKE 'LISTEN%'",
    )
    .bind(name)
    .execute(&mut admin)
    .await
    .expect("the listener is cut off");
    until_kept(&store, false).await;
    for _ in 0..5 {
        let before = store.settings_queries();
        store.settings_row().await.expect("read on the held connection");
        assert_eq!(store.settings_queries(), before + 1, "a query for the call");
        assert!(!store.settings_kept());
    }
    sqlx::raw_sql(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true"))
        .execute(&mut admin)
        .await
        .expect("connections allowed");
    until_kept(&store, true).await;
}

#[tokio::test]
async fn a_change_of_the_settings_row_without_the_writer_lock_is_refused() {
    let database = TestDatabase::create().await;
    let _store = serving_node(&database).await;
    let mut raw = connection(&database).await;
    for change in [
        "UPDATE SolutionSettings SET ModelEnabled = 1",
        "DELETE FROM SolutionSettings",
        "INSERT INTO SolutionSettings DEFAULT VALUES",
    ] {
        let refused = sqlx::query(change).execute(&mut raw).await.expect_err("refused");
        let said = refused.to_string();
        assert!(
            said.contains("SolutionSettings is changed only through tserver"),
            "{change}: {said}"
        );
    }
    // Holding the writer lock, the change goes through: the trigger names the lock writers take.
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(WRITER_LOCK)
        .execute(&mut raw)
        .await
        .expect("locked");
    sqlx::query("UPDATE SolutionSettings SET ModelEnabled = 1")
        .execute(&mut raw)
        .await
        .expect("a change under the lock");
}
