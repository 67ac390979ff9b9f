//! What only the PostgreSQL backend shows, against the machine's real PostgreSQL
//! (127.0.0.1:5432, trust, database `test`), each test in a database of its own: the schema
//! version it creates once however many nodes open it together, an older schema upgraded as
//! it opens, and failed logins counted across nodes on the database's clock.

use std::time::Duration;

use sqlx::Connection;

use super::{MIGRATIONS, PG_SCHEMA_VERSION, PgStore, PostgresUrl};
use crate::test_database::TestDatabase;
use crate::{Role, SolutionError};

#[tokio::test]
async fn a_new_database_gets_the_schema_once_however_many_open_it_at_once() {
    let database = TestDatabase::create().await;
    let url = PostgresUrl::parse(&database.url()).expect("a valid URL");
    // Four nodes starting together: one migrates under the advisory lock, the others wait and
    // find it done (without the lock, the second CREATE TABLE would fail).
    let opening = (0..4).map(|_| PgStore::open(&url));
    let stores = futures::future::join_all(opening).await;
    let stores: Vec<PgStore> = stores
        .into_iter()
        .map(|store| store.expect("every node opens"))
        .collect();
    for store in &stores {
        assert_eq!(
            store.schema_version().await.expect("a version"),
            PG_SCHEMA_VERSION
        );
    }
    let settings = stores[0].settings_row().await.expect("the settings row");
    assert!(!settings.model_enabled);
    assert_eq!((settings.model_settings, settings.model_options), (None, 0));

    // Users: names are unique regardless of case, and found regardless of case.
    stores[0]
        .add_user("Operator1", Some("correct horse"), Role::Operator)
        .await
        .expect("added");
    let taken = stores[1].add_user("OPERATOR1", None, Role::Viewer).await;
    assert!(matches!(taken, Err(SolutionError::UserExists(_))), "{taken:?}");
    let found = stores[2].user("operator1").await.expect("read").expect("found");
    assert_eq!((found.name.as_str(), found.role), ("Operator1", Role::Operator));
    assert!(
        found
            .password_hash
            .is_some_and(|hash| hash.starts_with("$argon2") && !hash.contains("correct horse"))
    );
    let invalid = stores[0].add_user("two words", None, Role::Viewer).await;
    assert!(
        matches!(invalid, Err(SolutionError::InvalidUserName(_))),
        "{invalid:?}"
    );
    assert!(stores[3].user("nobody").await.expect("read").is_none());
}

#[tokio::test]
async fn a_version_3_database_keeps_its_alarms_and_gains_their_response_when_it_opens() {
    let database = TestDatabase::create().await;
    let mut connection = sqlx::PgConnection::connect(&database.url())
        .await
        .expect("connects");
    let version_3 = format!(
        "{}
         CREATE TABLE SchemaVersion (Version BIGINT NOT NULL);
         INSERT INTO SchemaVersion (Version) VALUES (3);
         INSERT INTO Tags (Name, Path, Type) VALUES ('T', 'P/T', 'number');
         INSERT INTO AlarmDefinitions (Name, Tag, Condition, LimitValue, Priority, Message)
         VALUES ('T.Hi', 'T', 'Hi', 80, 700, 'T high');",
        MIGRATIONS[..3].concat()
    );
    sqlx::raw_sql(&version_3)
        .execute(&mut connection)
        .await
        .expect("a database of schema 3");
    let url = PostgresUrl::parse(&database.url()).expect("a valid URL");
    let store = PgStore::open(&url).await.expect("opens and upgrades");
    assert_eq!(
        store.schema_version().await.expect("a version"),
        PG_SCHEMA_VERSION
    );
    let alarms = store.plant_definitions().await.expect("reads").alarms;
    let alarm = &alarms[0];
    assert_eq!(
        (alarm.name.as_str(), alarm.limit, alarm.message.as_str()),
        ("T.Hi", Some(80.0), "T high")
    );
    assert_eq!(
        (alarm.response.as_str(), alarm.time_to_respond),
        ("", None),
        "no response until an import gives one"
    );
    assert!(
        !alarm.signed,
        "acknowledged without a signature until an import says otherwise"
    );
    assert_eq!(
        (alarm.on_delay, alarm.off_delay),
        (0, 0),
        "no delays until an import gives them"
    );
}

#[tokio::test]
async fn the_sources_the_tags_they_feed_and_the_equipment_are_read_without_the_rest() {
    let database = TestDatabase::create().await;
    let url = PostgresUrl::parse(&database.url()).expect("a valid URL");
    let store = PgStore::open(&url).await.expect("opens");
    let never_imported = store.plant_sources().await.expect("reads");
    assert!(never_imported.sources.is_empty() && never_imported.tags.is_empty());
    assert!(store.plant_equipment().await.expect("reads").is_empty());
    let model = plant_model::read(
        crate::plant::PLANT_WITH_SOURCES,
        plant_model::Format::Toml,
        "t.toml",
    )
    .expect("valid");
    store
        .import_plant(&model, &[], "t.toml", false)
        .await
        .expect("imports");
    crate::plant::assert_sources_read(&store.plant_sources().await.expect("reads"), &model);
    assert_eq!(store.plant_equipment().await.expect("reads"), model.equipment);
}

#[tokio::test]
async fn failed_logins_count_across_nodes_on_the_database_clock() {
    use std::net::IpAddr;
    let database = TestDatabase::create().await;
    let url = PostgresUrl::parse(&database.url()).expect("a valid URL");
    let (node_a, node_b) = (
        PgStore::open(&url).await.expect("opens"),
        PgStore::open(&url).await.expect("opens"),
    );
    let config = crate::LoginThrottleConfig {
        free_failures: 2,
        first_lockout: Duration::from_secs(10),
        max_lockout: Duration::from_secs(35),
        forget_after: Duration::from_millis(400),
        max_tracked: 100,
    };
    let (peer, other): (IpAddr, IpAddr) = ([192, 0, 2, 7].into(), [192, 0, 2, 8].into());
    // Failures on either node count together: the second (on the other node) locks.
    assert_eq!(
        node_a
            .record_login_failure(peer, Some("ada"), &config)
            .await
            .expect("counted"),
        (1, None)
    );
    assert_eq!(node_a.login_lockout(peer).await.expect("read"), None);
    let (count, lockout) = node_b
        .record_login_failure(peer, Some("ada"), &config)
        .await
        .expect("counted");
    assert_eq!((count, lockout), (2, Some(Duration::from_secs(10))));
    let wait = node_a
        .login_lockout(peer)
        .await
        .expect("read")
        .expect("locked on node A too");
    assert!(
        wait > Duration::from_secs(9) && wait <= Duration::from_secs(10),
        "{wait:?}"
    );
    assert_eq!(
        node_b
            .record_login_failure(peer, Some("ada"), &config)
            .await
            .expect("counted"),
        (3, Some(Duration::from_secs(20)))
    );
    assert_eq!(
        node_b.login_lockout(other).await.expect("read"),
        None,
        "per address"
    );

    // Another user's success leaves the record; the user whose failures they all were wipes
    // it, on either node, everywhere.
    node_a.clear_login_failures(peer, "guest").await.expect("cleared");
    assert!(node_b.login_lockout(peer).await.expect("read").is_some());
    node_a.clear_login_failures(peer, "ada").await.expect("cleared");
    assert_eq!(node_b.login_lockout(peer).await.expect("read"), None);
    // Failures for two users: neither one's success clears them.
    node_a
        .record_login_failure(peer, Some("ada"), &config)
        .await
        .expect("counted");
    node_b
        .record_login_failure(peer, Some("boss"), &config)
        .await
        .expect("counted");
    node_a.clear_login_failures(peer, "ada").await.expect("cleared");
    assert!(node_b.login_lockout(peer).await.expect("read").is_some());

    // A quiet spell longer than forget_after starts the count again.
    assert_eq!(
        node_a
            .record_login_failure(other, Some("ada"), &config)
            .await
            .expect("counted"),
        (1, None)
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        node_b
            .record_login_failure(other, Some("ada"), &config)
            .await
            .expect("counted"),
        (1, None)
    );
}

#[tokio::test]
async fn a_browser_login_ends_on_every_node_at_logout_idle_time_and_any_change_to_its_user() {
    use std::time::SystemTime;
    let database = TestDatabase::create().await;
    let url = PostgresUrl::parse(&database.url()).expect("a valid URL");
    let one = PgStore::open(&url).await.expect("opens");
    let two = PgStore::open(&url).await.expect("opens");
    one.add_user("Ada", Some("pw"), Role::Operator)
        .await
        .expect("added");
    let rules = crate::BrowserLoginRules {
        per_user: 2,
        ..crate::BrowserLoginRules::default()
    };
    let idle = rules.idle;
    let now = SystemTime::now();
    let valid = |store: &PgStore, token: String, at: SystemTime| {
        let store = store.clone();
        async move {
            store
                .browser_session(&token, &rules, at)
                .await
                .expect("read")
                .is_some()
        }
    };

    let token = one
        .create_browser_session("ada", &rules, now)
        .await
        .expect("created");
    assert!(valid(&two, token.clone(), now).await, "another node verifies it");
    two.revoke_browser_session(&token).await.expect("revoked");
    assert!(!valid(&one, token, now).await);

    let token = one
        .create_browser_session("Ada", &rules, now)
        .await
        .expect("created");
    assert!(!valid(&two, token.clone(), now + idle + Duration::from_secs(1)).await);
    assert!(!valid(&one, token, now).await, "deleted once seen expired");

    // Past the lifetime however much it is used; past the cap the oldest ends.
    let token = one
        .create_browser_session("Ada", &rules, now)
        .await
        .expect("created");
    assert!(!valid(&two, token, now + rules.lifetime + Duration::from_secs(1)).await);
    let oldest = one
        .create_browser_session("Ada", &rules, now)
        .await
        .expect("created");
    let later = now + Duration::from_secs(1);
    let mut newer = Vec::new();
    for node in [&one, &two] {
        newer.push(
            node.create_browser_session("Ada", &rules, later)
                .await
                .expect("created"),
        );
    }
    assert!(!valid(&one, oldest, later).await, "the oldest ended past the cap");
    for token in newer {
        assert!(valid(&two, token, later).await);
    }

    for change in 0..3 {
        let token = one
            .create_browser_session("Ada", &rules, now)
            .await
            .expect("created");
        match change {
            0 => two.set_password("ada", Some("new")).await.expect("set"),
            1 => two.set_role("ada", Role::Viewer).await.expect("set"),
            _ => two.remove_user("ada").await.expect("removed"),
        }
        assert!(!valid(&one, token, now).await, "change {change}");
    }
}

#[tokio::test]
async fn a_version_8_database_keeps_its_history_in_blocks_when_it_opens() {
    use plant_model::{TagType, TagValue};
    let database = TestDatabase::create().await;
    let mut connection = sqlx::PgConnection::connect(&database.url())
        .await
        .expect("connects");
    let version_8 = format!(
        "{}
         CREATE TABLE SchemaVersion (Version BIGINT NOT NULL);
         INSERT INTO SchemaVersion (Version) VALUES (8);
         INSERT INTO Tags (Name, Path, Type) VALUES ('Pump.Running', 'P/Running', 'bool');
         INSERT INTO TagHistory (Tag, Time, Value, Quality)
         SELECT 'Tank.Level', 1800000000000 + n * 1000, to_jsonb(round((n % 97) / 10.0, 1)), 192
         FROM generate_series(0, 2499) AS n;
         INSERT INTO TagHistory (Tag, Time, Value, Quality)
         SELECT 'Pump.Running', 1800000000000 + n * 60000, to_jsonb(n % 2), CASE WHEN n = 7 THEN 0 ELSE 192 END
         FROM generate_series(0, 39) AS n;",
        MIGRATIONS[..8].concat()
    );
    sqlx::raw_sql(&version_8)
        .execute(&mut connection)
        .await
        .expect("a database of schema 8");
    let url = PostgresUrl::parse(&database.url()).expect("a valid URL");
    let store = PgStore::open(&url).await.expect("opens and upgrades");
    let legacy: bool = sqlx::query_scalar("SELECT to_regclass('taghistory') IS NOT NULL")
        .fetch_one(&mut connection)
        .await
        .expect("asks");
    assert!(!legacy, "the row table is dropped once folded");
    let everything = (i64::MIN, i64::MAX);
    let level = store
        .tag_history("Tank.Level", TagType::Number, everything, usize::MAX)
        .await
        .expect("reads");
    assert_eq!(level.total, 2_500);
    for (n, sample) in (0..).zip(&level.samples) {
        assert_eq!(
            crate::history::unix_millis(sample.time),
            1_800_000_000_000 + n * 1000
        );
        assert_eq!(sample.value, TagValue::Number((n % 97) as f64 / 10.0));
    }
    let running = store
        .tag_history("Pump.Running", TagType::Bool, everything, usize::MAX)
        .await
        .expect("reads");
    let states: Vec<(bool, u8)> = running
        .samples
        .iter()
        .map(|sample| (sample.value == TagValue::Bool(true), sample.quality.0))
        .collect();
    let expected: Vec<(bool, u8)> = (0..40)
        .map(|n| (n % 2 == 1, if n == 7 { 0 } else { 192 }))
        .collect();
    assert_eq!(states, expected);
    // Blocks sit in weekly partitions, and a 100-bucket trend of the level still holds its
    // smallest and largest values.
    let partitions: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM pg_inherits WHERE inhparent = 'historyblocks'::regclass")
            .fetch_one(&mut connection)
            .await
            .expect("counts");
    assert_eq!(partitions, 1);
    let trend = store
        .tag_history("Tank.Level", TagType::Number, everything, 400)
        .await
        .expect("reads");
    assert!(trend.samples.len() <= 400);
    assert!(
        trend
            .samples
            .iter()
            .any(|sample| sample.value == TagValue::Number(9.6))
    );
    assert!(
        trend
            .samples
            .iter()
            .any(|sample| sample.value == TagValue::Number(0.0))
    );
}

#[tokio::test]
async fn history_past_its_byte_bound_loses_its_oldest_blocks_first() {
    use plant_model::{Quality, TagType, TagValue};

    use crate::{HistoryLimits, PendingSample};
    let database = TestDatabase::create().await;
    let url = PostgresUrl::parse(&database.url()).expect("a valid URL");
    let store = PgStore::open(&url).await.expect("opens");
    let tag: std::sync::Arc<str> = std::sync::Arc::from("Noisy");
    let start = 1_800_000_000_000_i64;
    // Forty blocks of readings without a pattern, so each block's data is about as large.
    let samples: Vec<PendingSample> = (0..40 * 1024_i64)
        .map(|second| PendingSample {
            tag: std::sync::Arc::clone(&tag),
            time: crate::history::from_unix_millis(start + second * 1000),
            value: TagValue::Number((second.wrapping_mul(2_654_435_761) % 1_000_003) as f64 / 7.0),
            quality: Quality::GOOD,
        })
        .collect();
    store
        .write_history(&samples, &[], &HistoryLimits::NONE)
        .await
        .expect("journals");
    store
        .checkpoint_history(&HistoryLimits::NONE)
        .await
        .expect("folds");
    let held = || async {
        sqlx::query_scalar::<_, i64>(crate::history::HISTORY_BYTES)
            .fetch_one(&store.pool)
            .await
            .expect("sums")
    };
    let bound = u64::try_from(held().await / 2).expect("positive");
    store
        .checkpoint_history(&HistoryLimits {
            keep_after: std::time::UNIX_EPOCH,
            max_bytes: Some(bound),
            own: Vec::new(),
        })
        .await
        .expect("prunes");
    let after = u64::try_from(held().await).expect("positive");
    assert!(after <= bound, "{after} bytes kept past the bound {bound}");
    assert!(
        after * 10 >= bound * 9,
        "only what was past the bound goes: {after} of {bound}"
    );
    let page = store
        .tag_history("Noisy", TagType::Number, (i64::MIN, i64::MAX), usize::MAX)
        .await
        .expect("reads");
    let times: Vec<i64> = page
        .samples
        .iter()
        .map(|sample| crate::history::unix_millis(sample.time))
        .collect();
    assert_eq!(
        times.last(),
        Some(&(start + (40 * 1024 - 1) * 1000)),
        "the newest is kept"
    );
    assert!(
        times.first().is_some_and(|first| *first > start),
        "the oldest went first"
    );
    assert!(
        times.windows(2).all(|pair| pair[1] - pair[0] == 1000),
        "what is kept has no holes"
    );
}

#[tokio::test]
async fn every_kind_of_alarm_event_is_recorded_and_read_back() {
    let database = TestDatabase::create().await;
    let url = PostgresUrl::parse(&database.url()).expect("a valid URL");
    let store = PgStore::open(&url).await.expect("opens");
    let start = 1_800_000_000_000;
    let events = crate::history::one_event_of_each_kind(start);
    store
        .write_history(&[], &events, &crate::HistoryLimits::NONE)
        .await
        .expect("records every kind");
    let page = store
        .alarm_history(None, (start, start + 1000), 100)
        .await
        .expect("reads");
    let mut read: Vec<_> = page.events.iter().map(|event| event.kind).collect();
    read.reverse();
    assert_eq!(read, plant_model::AlarmEventKind::ALL);
}
