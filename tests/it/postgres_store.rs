//! The PostgreSQL solution store against the machine's real PostgreSQL (127.0.0.1:5432, trust,
//! database `test`): each test in a database of its own, created and dropped here. The URL's
//! password never shows, an unreachable server is a clear error naming the store, and a store
//! whose server restarts (one of the test's own) recovers by itself.

use std::sync::Arc;
use std::time::Duration;

use sqlx::Connection;
use store::test_database::TestDatabase;
use store::{AuditAction, AuditEntry, AuditLog, PostgresUrl, SolutionError, SolutionLocation, Store};
use tserver_tests::postgres::PrivatePostgres;

#[tokio::test]
async fn a_database_of_a_newer_schema_is_refused_untouched() {
    let database = TestDatabase::create().await;
    let url = PostgresUrl::parse(&database.url()).expect("a valid URL");
    let store = Store::open(&SolutionLocation::Postgres(url.clone()))
        .await
        .expect("opens");
    let mut connection = sqlx::PgConnection::connect(&database.url())
        .await
        .expect("connects");
    sqlx::raw_sql("UPDATE SchemaVersion SET Version = 99")
        .execute(&mut connection)
        .await
        .expect("updated");
    drop(store);
    let refused = Store::open(&SolutionLocation::Postgres(url.clone())).await;
    match refused {
        Err(error @ SolutionError::PgSchemaVersion { found: 99, .. }) => {
            let said = error.to_string();
            assert!(said.contains(database.name()) && said.contains("99"), "{said}");
        }
        other => panic!("expected a schema version refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn an_unreachable_store_is_a_clear_error_that_never_shows_the_password() {
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port");
    let url =
        PostgresUrl::parse(&format!("postgres://tserver:Sup3rSecret@{free}/plant")).expect("a valid URL");
    assert_eq!(url.to_string(), format!("postgres://tserver:***@{free}/plant"));
    assert!(!format!("{url:?}").contains("Sup3rSecret"));
    let started = std::time::Instant::now();
    let error = Store::open(&SolutionLocation::Postgres(url.clone()))
        .await
        .expect_err("nothing listens there");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "fails in bounded time"
    );
    let said = error.to_string();
    assert!(
        said.contains("PostgreSQL") && said.contains(&free.to_string()),
        "{said}"
    );
    assert!(!said.contains("Sup3rSecret"), "{said}");

    let bad = PostgresUrl::parse("postgres://tserver:Sup3rSecret@db:notaport/plant");
    let said = bad.expect_err("a bad port").to_string();
    assert!(
        said.contains("postgres://tserver:***@db:notaport/plant"),
        "{said}"
    );
    assert!(!said.contains("Sup3rSecret"), "{said}");
}

/// A PostgreSQL server of the test's own with a database `plant`, and that database's URL.
pub(crate) async fn private_server_with_a_database() -> (PrivatePostgres, PostgresUrl) {
    let server = tokio::task::spawn_blocking(PrivatePostgres::start)
        .await
        .expect("started");
    let mut admin = sqlx::PgConnection::connect(&server.url("postgres"))
        .await
        .expect("connects");
    sqlx::raw_sql("CREATE DATABASE plant")
        .execute(&mut admin)
        .await
        .expect("creates the database");
    let url = PostgresUrl::parse(&server.url("plant")).expect("a valid URL");
    (server, url)
}

/// The server stopped (off the async workers: it waits for the process).
pub(crate) async fn stopped(mut server: PrivatePostgres) -> PrivatePostgres {
    tokio::task::spawn_blocking(move || {
        server.stop();
        server
    })
    .await
    .expect("stopped")
}

/// The server started again on its port.
pub(crate) async fn resumed(mut server: PrivatePostgres) -> PrivatePostgres {
    tokio::task::spawn_blocking(move || {
        server.resume();
        server
    })
    .await
    .expect("restarted")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_postgres_is_down_calls_fail_naming_the_store_and_the_store_recovers_by_itself() {
    let (server, url) = private_server_with_a_database().await;
    let store = Store::open(&SolutionLocation::Postgres(url.clone()))
        .await
        .expect("opens");
    store.settings_row().await.expect("read while up");

    let server = stopped(server).await;
    let started = std::time::Instant::now();
    let down = store.settings_row().await.expect_err("the server is down");
    // The pool's 2 s to get a connection, and then some for a slow machine: never a hang.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let said = down.to_string();
    assert!(
        said.starts_with("solution store (PostgreSQL at postgres://postgres@127.0.0.1:"),
        "{said}"
    );

    let server = resumed(server).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match store.settings_row().await {
            Ok(settings) => {
                assert!(!settings.model_enabled);
                break;
            }
            Err(_) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("the store did not recover within 10 s: {error}"),
        }
    }
    drop(store);
    tokio::task::spawn_blocking(move || drop(server))
        .await
        .expect("stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_appends_go_on_across_a_database_restart_each_recorded_once() {
    let (server, url) = private_server_with_a_database().await;
    let store = Arc::new(
        Store::open(&SolutionLocation::Postgres(url.clone()))
            .await
            .expect("opens"),
    );
    let audit = AuditLog::start(Arc::clone(&store), Duration::from_secs(86_400)).expect("starts");
    let entry = |target: &str| AuditEntry {
        time: std::time::SystemTime::now(),
        user: "ops".to_owned(),
        connection: "restart-test".to_owned(),
        peer: "local".to_owned(),
        action: AuditAction::Write,
        target: target.to_owned(),
        old_value: None,
        new_value: Some("1".to_owned()),
        outcome: "ok".to_owned(),
        signatures: None,
    };
    audit
        .record(vec![entry("Before")])
        .await
        .expect("recorded while up");
    // The connection the appends keep is closed by the restart: the next append opens another.
    let server = resumed(stopped(server).await).await;
    audit
        .record(vec![entry("After")])
        .await
        .expect("recorded after the restart");
    let targets: Vec<String> = store
        .audit(None, 10)
        .await
        .expect("reads")
        .into_iter()
        .map(|entry| entry.target)
        .collect();
    assert_eq!(targets, ["Before", "After"]);
    drop(audit);
    drop(store);
    tokio::task::spawn_blocking(move || drop(server))
        .await
        .expect("stopped");
}

/// Every row of every table of a SQLite solution, table by table, in row order.
fn sqlite_rows(path: &std::path::Path) -> Vec<(String, Vec<Vec<rusqlite::types::Value>>)> {
    let connection = rusqlite::Connection::open(path).expect("opens");
    let tables: Vec<String> = connection
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .expect("prepares")
        .query_map([], |row| row.get(0))
        .expect("lists")
        .collect::<Result<_, _>>()
        .expect("names");
    tables
        .into_iter()
        .map(|table| {
            let mut statement = connection
                .prepare(&format!("SELECT * FROM \"{table}\" ORDER BY rowid"))
                .expect("prepares");
            let columns = statement.column_count();
            let rows = statement
                .query_map([], |row| {
                    (0..columns)
                        .map(|index| row.get::<_, rusqlite::types::Value>(index))
                        .collect()
                })
                .expect("reads")
                .collect::<Result<Vec<Vec<_>>, _>>()
                .expect("rows");
            (table, rows)
        })
        .collect()
}

#[tokio::test]
async fn a_solution_copied_into_postgres_and_back_keeps_every_row_and_its_secrets_readable() {
    let database = TestDatabase::create().await;
    let solution = crate::support::Solution::demo();
    let path = solution.path.to_str().expect("utf-8");
    crate::support::admin(&["secrets", path, "set", "ModelKey"], "s3cret-value\n");
    crate::support::admin(
        &["users", path, "add", "operator1", "--role", "operator"],
        "a password\n",
    );
    crate::support::admin(
        &["tokens", path, "create", "--user", "guest", "--name", "grafana"],
        "",
    );
    crate::support::admin(&["settings", path, "set", "URL", "http://127.0.0.1:9/v1"], "");

    let copied = crate::support::admin(&["solution", "copy", path, &database.url()], "");
    assert!(
        copied.contains("HistoryBlocks: ") && copied.contains("Users: 2 rows"),
        "{copied}"
    );
    assert!(
        copied.contains("every server of postgres://postgres@127.0.0.1:5432/"),
        "says the key must come along: {copied}"
    );
    // Into a database that holds a solution already: refused, nothing touched.
    let again =
        crate::support::try_admin(&["solution", "copy", path, &database.url()], "").expect_err("refused");
    assert!(again.to_string().contains("holds a solution already"), "{again}");

    // And back into a new file, by the real command line, with the key in the environment as
    // the nodes would have it.
    let key = std::fs::read_to_string(store::key_file(&solution.path)).expect("the key file");
    let back = solution.path.with_file_name("back.db");
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_tserver-under-test"))
        .args(["solution", "copy", &database.url()])
        .arg(&back)
        .env(store::KEY_ENV, key.trim())
        .output()
        .await
        .expect("tserver runs");
    assert!(output.status.success(), "{output:?}");

    let (before, after) = (sqlite_rows(&solution.path), sqlite_rows(&back));
    let carried = |rows: &[(String, Vec<Vec<rusqlite::types::Value>>)]| {
        rows.iter()
            // What a running server reports or waits for is the node's, not the solution's.
            .filter(|(table, _)| !["SourceReports", "ScriptRunRequests"].contains(&table.as_str()))
            .cloned()
            .collect::<Vec<_>>()
    };
    let (before, after) = (carried(&before), carried(&after));
    assert_eq!(
        before.iter().map(|(table, _)| table.as_str()).collect::<Vec<_>>(),
        after.iter().map(|(table, _)| table.as_str()).collect::<Vec<_>>()
    );
    for ((table, rows), (_, copied_rows)) in before.iter().zip(&after) {
        assert_eq!(rows, copied_rows, "table {table} differs after the round trip");
    }
    assert!(
        before
            .iter()
            .any(|(table, rows)| table == "HistoryBlocks" && !rows.is_empty())
    );
    let secret = Store::open_file(&back)
        .expect("opens")
        .secret("ModelKey")
        .await
        .expect("decrypts with the key the copy wrote")
        .expect("present");
    assert_eq!(secret.expose(), "s3cret-value");
}

#[tokio::test]
async fn settings_and_users_admin_commands_work_on_a_postgres_solution_as_on_a_file() {
    let database = TestDatabase::create().await;
    let url = database.url();
    let file = crate::support::Solution::empty();
    let path = file.path.to_str().expect("utf-8");
    let (admin, try_admin) = (crate::support::admin, crate::support::try_admin);
    // The same commands on both: the same answers.
    for solution in [path, url.as_str()] {
        admin(
            &["settings", solution, "set", "URL", "http://127.0.0.1:11434/v1"],
            "",
        );
        admin(&["settings", solution, "set", "ModelOptions", "0xffffffff"], "");
        admin(&["settings", solution, "set", "ModelEnabled", "on"], "");
        admin(&["settings", solution, "set", "HistoryRetentionHours", "48"], "");
        admin(&["settings", solution, "set", "ModelSettings.Custom", "kept"], "");
        admin(&["settings", solution, "unset", "ModelSettings.Custom"], "");
        let refused =
            try_admin(&["settings", solution, "set", "TimeoutSeconds", "-3"], "").expect_err("refused");
        assert!(
            refused.to_string().contains("refused, nothing changed"),
            "{refused}"
        );
        admin(
            &["users", solution, "add", "Operator1", "--role", "operator"],
            "pw one\n",
        );
        admin(&["users", solution, "add", "viewer1", "--no-password"], "");
        admin(&["users", solution, "role", "viewer1", "admin"], "");
        admin(&["users", solution, "passwd", "OPERATOR1"], "pw two\n");
        let taken = try_admin(&["users", solution, "add", "operator1"], "x\n").expect_err("taken");
        assert!(taken.to_string().contains("already exists"), "{taken}");
        let unknown = try_admin(&["users", solution, "remove", "nobody"], "").expect_err("unknown");
        assert!(unknown.to_string().contains("no user named"), "{unknown}");
    }
    assert_eq!(
        admin(&["settings", path, "show"], ""),
        admin(&["settings", &url, "show"], ""),
        "settings show reads alike"
    );
    assert_eq!(
        admin(&["users", path, "list"], ""),
        admin(&["users", &url, "list"], "")
    );
    assert_eq!(
        admin(&["settings", &url, "get", "ModelOptions"], ""),
        "0xffffffff\n"
    );
    assert_eq!(
        admin(&["users", &url, "list"], ""),
        "Operator1 operator\nviewer1 admin (passwordless)\n"
    );
    // The solution may be given as `--solution` too, on any admin command; not both ways.
    assert_eq!(
        admin(&["users", "--solution", &url, "list"], ""),
        admin(&["users", &url, "list"], "")
    );
    assert_eq!(
        admin(&["settings", "--solution", path, "get", "ModelOptions"], ""),
        "0xffffffff\n"
    );
    let both = try_admin(&["users", path, "--solution", &url, "list"], "").expect_err("refused");
    assert!(both.to_string().contains("cannot be used with"), "{both}");

    // The password stored is a hash of the new one, never the text.
    let store = Store::open(&SolutionLocation::Postgres(
        PostgresUrl::parse(&url).expect("valid"),
    ))
    .await
    .expect("opens");
    let hash = store
        .user("operator1")
        .await
        .expect("read")
        .and_then(|user| user.password_hash)
        .expect("a hash");
    assert!(hash.starts_with("$argon2") && !hash.contains("pw two"));
}

/// Waits (at most 5 s) until `count` nodes lead; how long that took.
async fn until_leaders(nodes: &[store::Leadership], count: usize) -> Duration {
    let started = std::time::Instant::now();
    loop {
        let leading = nodes.iter().filter(|node| node.is_leader()).count();
        if leading == count {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{leading} nodes lead, not {count}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_one_node_leads_and_another_takes_over_when_it_goes_or_the_database_restarts() {
    use store::{Leadership, SCRIPTS_LEADER};
    let (server, url) = private_server_with_a_database().await;
    let interval = Duration::from_millis(100);
    let mut nodes: Vec<Leadership> = (0..3)
        .map(|_| Leadership::campaign(&url, SCRIPTS_LEADER, interval))
        .collect();
    until_leaders(&nodes, 1).await;
    // And it stays one: sampled for a second.
    for _ in 0..20 {
        assert_eq!(nodes.iter().filter(|node| node.is_leader()).count(), 1);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The leader goes (its connection closes with it): another takes over.
    let leader = nodes.iter().position(Leadership::is_leader).expect("a leader");
    drop(nodes.remove(leader));
    let took = until_leaders(&nodes, 1).await;
    assert!(took < Duration::from_secs(2), "taken over after {took:?}");

    // The database restarts: nobody leads while it is away, one leads once it is back.
    let server = stopped(server).await;
    until_leaders(&nodes, 0).await;
    let server = resumed(server).await;
    until_leaders(&nodes, 1).await;
    drop(nodes);
    tokio::task::spawn_blocking(move || drop(server))
        .await
        .expect("stopped");
}

/// `tserver ARGS` as a process, with `env` (and no password from the environment or
/// `~/.pgpass` unless given): its success, standard output and standard error.
async fn tserver_process(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let home = tempfile::tempdir().expect("an empty home");
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_tserver-under-test"))
        .args(args)
        .env_remove("PGPASSWORD")
        .env("HOME", home.path())
        .envs(env.iter().copied())
        .output()
        .await
        .expect("tserver runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_password_may_come_from_the_environment_and_never_shows() {
    const PASSWORD: &str = "Env-Pa55-7781";
    let server = tokio::task::spawn_blocking(|| PrivatePostgres::start_with_password(PASSWORD))
        .await
        .expect("started");
    let url = server.url("postgres");
    let solution = crate::support::Solution::empty();
    let path = solution.path.to_str().expect("utf-8");

    // No password anywhere: refused by the server, said plainly, naming the store.
    let (ok, _, said) = tserver_process(&["users", &url, "list"], &[]).await;
    assert!(!ok);
    assert!(
        said.contains("solution store (PostgreSQL at postgres://postgres@127.0.0.1:"),
        "{said}"
    );

    // From the environment, as psql takes it.
    let (ok, copied, said) =
        tserver_process(&["solution", "copy", path, &url], &[("PGPASSWORD", PASSWORD)]).await;
    assert!(ok, "{said}");
    let (ok, listed, _) = tserver_process(&["users", &url, "list"], &[("PGPASSWORD", PASSWORD)]).await;
    assert!(ok && listed.is_empty(), "{listed}");

    // In the URL: it works, and whatever is printed shows *** instead.
    let with_password = url.replace("postgres@", &format!("postgres:{PASSWORD}@"));
    let (ok, added, _) = tserver_process(&["users", &with_password, "add", "op", "--no-password"], &[]).await;
    assert!(ok && added.starts_with("added user op"), "{added}");
    let (ok, _, refused) = tserver_process(&["users", &with_password, "remove", "nobody"], &[]).await;
    assert!(!ok && refused.contains("no user named"), "{refused}");
    let wrong = url.replace("postgres@", "postgres:not-it@");
    let (ok, _, denied) = tserver_process(&["users", &wrong, "list"], &[]).await;
    assert!(
        !ok && denied.contains("postgres://postgres:***@127.0.0.1:"),
        "{denied}"
    );
    // As a credential the service manager gives (systemd's LoadCredential=), named in the URL.
    let credentials = tempfile::tempdir().expect("a credentials directory");
    std::fs::write(credentials.path().join("DbPass"), format!("{PASSWORD}\n")).expect("writes");
    let with_token = url.replace("postgres@", "postgres:/secret:DbPass@");
    let directory = credentials.path().to_str().expect("utf-8");
    let (ok, listed, _) = tserver_process(
        &["users", &with_token, "list"],
        &[("CREDENTIALS_DIRECTORY", directory)],
    )
    .await;
    assert!(ok && listed == "op viewer (passwordless)\n", "{listed}");
    let (ok, _, unset) = tserver_process(&["users", &with_token, "list"], &[]).await;
    assert!(
        !ok && unset.contains("CREDENTIALS_DIRECTORY is not set"),
        "{unset}"
    );
    assert!(
        unset.contains("postgres://postgres:/secret:DbPass@127.0.0.1:"),
        "{unset}"
    );
    for printed in [&copied, &added, &refused, &denied, &said, &listed, &unset] {
        assert!(
            !printed.contains(PASSWORD) && !printed.contains("not-it"),
            "{printed}"
        );
    }
    tokio::task::spawn_blocking(move || drop(server))
        .await
        .expect("stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plant_tokens_scripts_and_sources_admin_commands_work_on_a_postgres_solution_as_on_a_file() {
    let database = TestDatabase::create().await;
    let url = database.url();
    let (admin, try_admin) = (crate::support::admin, crate::support::try_admin);
    let keys = tempfile::tempdir().expect("a directory");
    let key_file = keys.path().join("plant.key");
    let created = admin(
        &[
            "init",
            &url,
            "--demo",
            "--key-file",
            key_file.to_str().expect("utf-8"),
        ],
        "",
    );
    assert!(
        created.starts_with(&format!(
            "created demo solution {url}\nmade a secrets key in {} (owner-only)",
            key_file.display()
        )),
        "{created}"
    );
    let again = try_admin(&["init", &url], "").expect_err("refused");
    assert!(again.to_string().contains("holds a solution already"), "{again}");
    let file = crate::support::Solution::demo();
    let path = file.path.to_str().expect("utf-8");
    let plant = file.path.with_file_name("writable.toml");
    let mut model = plant_model::read(
        &admin(&["plant", path, "export"], ""),
        plant_model::Format::Toml,
        "demo",
    )
    .expect("reads");
    model.tags.retain(|tag| tag.name != "Motor1.Temperature");
    model.alarms.retain(|alarm| alarm.tag != "Motor1.Temperature");
    for tag in &mut model.tags {
        tag.writable |= tag.name == "Pump1.Mode";
        tag.proposable |= tag.name == "Pump1.Mode";
    }
    std::fs::write(&plant, model.to_toml().expect("toml")).expect("writes");
    let plant = plant.to_str().expect("utf-8");
    let script = file.path.with_file_name("tick.rhai");
    std::fs::write(&script, "log(\"tick\");\n").expect("writes");
    let script = script.to_str().expect("utf-8");

    // The same commands on both: the same answers.
    let mut said = Vec::new();
    for solution in [path, url.as_str()] {
        let mut answers = vec![
            admin(&["plant", solution, "show"], ""),
            admin(&["plant", solution, "import", plant, "--dry-run"], ""),
            admin(&["plant", solution, "show"], ""),
            admin(&["plant", solution, "import", plant], ""),
            admin(&["plant", solution, "import", plant], ""),
            admin(&["plant", solution, "show"], ""),
            admin(&["plant", solution, "export"], ""),
            // How many samples the seeding kept depends on the second it ran (compression):
            // both say how many they deleted, of the same tag.
            {
                let purged = admin(&["plant", solution, "purge-history", "Motor1.Temperature"], "");
                let count: String = purged
                    .chars()
                    .skip("deleted ".len())
                    .take_while(char::is_ascii_digit)
                    .collect();
                assert!(count.parse::<u32>().is_ok_and(|count| count > 0), "{purged}");
                purged.replacen(&count, "N", 1)
            },
            try_admin(&["plant", solution, "purge-history", "Pump1.Mode"], "")
                .expect_err("still in the plant")
                .to_string(),
            admin(
                &[
                    "scripts",
                    solution,
                    "add",
                    "Tick",
                    "--file",
                    script,
                    "--trigger",
                    "every:5s",
                ],
                "",
            ),
            admin(&["scripts", solution, "disable", "tick"], ""),
            admin(&["scripts", solution, "list"], ""),
            admin(&["scripts", solution, "show", "TICK"], ""),
            admin(&["scripts", solution, "status"], ""),
            try_admin(
                &[
                    "scripts",
                    solution,
                    "add",
                    "tick",
                    "--file",
                    script,
                    "--trigger",
                    "startup",
                ],
                "",
            )
            .expect_err("taken")
            .to_string(),
            admin(&["scripts", solution, "remove", "Tick"], ""),
            admin(&["sources", solution, "list"], ""),
            admin(&["sources", solution, "status"], ""),
            admin(&["tokens", solution, "list"], ""),
        ];
        let text = admin(
            &["tokens", solution, "create", "--user", "guest", "--name", "panel"],
            "",
        );
        answers.push(
            admin(&["tokens", solution, "revoke", "panel"], "").replace(text.get(4..16).unwrap_or(""), "ID"),
        );
        answers.push(admin(&["tokens", solution, "list"], ""));
        said.push(answers);
    }
    assert_eq!(said[0], said[1], "a file and a database answer alike");
    let on_database = &said[1];
    assert!(
        on_database[1].ends_with("nothing changed (dry run)\n"),
        "{}",
        on_database[1]
    );
    assert_eq!(on_database[0], on_database[2], "a dry run changes nothing");
    assert!(
        on_database[3].contains("Motor1.Temperature")
            && on_database[3].ends_with(&format!("imported {plant}\n")),
        "{}",
        on_database[3]
    );
    assert!(on_database[4].starts_with("no changes"), "{}", on_database[4]);
    assert!(
        on_database[5].starts_with("Demo") || on_database[5].contains("revision 2:"),
        "{}",
        on_database[5]
    );
    assert!(
        on_database[8].contains("still in the plant"),
        "{}",
        on_database[8]
    );
    assert_eq!(
        on_database[11],
        "TankNote  alarm:Tank1.Level.Hi  enabled\nTick  every:5s  disabled\n"
    );
    assert!(on_database[14].contains("exists already"), "{}", on_database[14]);
    assert!(on_database[17].starts_with("no reports"), "{}", on_database[17]);
    assert_eq!(on_database[19], "revoked token ID of guest\n");
    assert!(
        on_database[7].starts_with("deleted ") && !on_database[7].starts_with("deleted 0 "),
        "{}",
        on_database[7]
    );

    // A token made on the database acts as its user until revoked.
    let store = Store::open(&SolutionLocation::Postgres(
        PostgresUrl::parse(&url).expect("valid"),
    ))
    .await
    .expect("opens");
    // Both keep which tags are proposable, as the runtime loads them.
    let on_file = Store::open(&SolutionLocation::File(file.path.clone()))
        .await
        .expect("opens");
    for store in [&on_file, &store] {
        let proposable: Vec<String> = store
            .plant_definitions()
            .await
            .expect("reads")
            .tags
            .into_iter()
            .filter(|tag| tag.proposable)
            .map(|tag| tag.name)
            .collect();
        assert_eq!(proposable, ["Pump1.Mode"]);
        // And each alarm's response, as the runtime loads it.
        let definitions = store.plant_definitions().await.expect("reads");
        // And a text tag's set of values.
        let mode = definitions
            .tags
            .iter()
            .find(|tag| tag.name == "Pump1.Mode")
            .expect("in the demo");
        assert_eq!(mode.values, ["Auto", "Manual", "Off"]);
        let pressure = definitions
            .alarms
            .iter()
            .find(|alarm| alarm.name == "Pump1.DischargePressure.Lo")
            .expect("in the demo");
        assert_eq!(
            pressure
                .suppress_when
                .as_ref()
                .map(ToString::to_string)
                .as_deref(),
            Some("Pump1.Running == false"),
            "an alarm's suppression by design"
        );
        let tank = definitions
            .alarms
            .iter()
            .find(|alarm| alarm.name == "Tank1.Level.LoLo")
            .expect("in the demo");
        assert_eq!(
            (
                tank.consequence.as_str(),
                tank.response.as_str(),
                tank.time_to_respond
            ),
            (
                "Pump 1 runs dry and its seal fails",
                "Stop Pump 1 and Pump 2, then check the Tank 1 inlet",
                Some(120)
            )
        );
    }
    let text = admin(&["tokens", &url, "create", "--user", "GUEST"], "");
    let user = store
        .verify_token(text.trim())
        .await
        .expect("reads")
        .expect("valid");
    assert_eq!(user.user, "guest");
    admin(&["tokens", &url, "revoke", &user.token_id], "");
    assert_eq!(
        store.verify_token(text.trim()).await.expect("reads"),
        Err(store::TokenRefusal::Invalid)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_on_postgres_keeps_an_acknowledged_alarm_acknowledged() {
    use crate::plant_file::{BOILER, alarm_states};
    use crate::support::{TestServer, admin};
    let database = TestDatabase::create().await;
    let url = database.url();
    admin(&["init", &url, "--demo"], "");
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("boiler.toml");
    std::fs::write(&file, BOILER).expect("writes");
    admin(&["plant", &url, "import", file.to_str().expect("utf-8")], "");

    let flush = |server: &TestServer| {
        let historian = std::sync::Arc::clone(server.runtime.plant().historian());
        tokio::task::spawn_blocking(move || historian.flush().expect("flushes"))
    };
    let server = TestServer::start_at(&url, tserver::ServerConfig::default()).await;
    let client = server.guest().await;
    assert_eq!(
        alarm_states(&client, "Plant/Boiler").await["Boiler.Temp.Hi"],
        "active"
    );
    assert!(
        client
            .acknowledge_alarm("Boiler.Temp.Hi")
            .await
            .expect("acknowledges")
    );
    flush(&server).await.expect("flushed");
    drop(client);
    server.stop().await;

    let server = TestServer::start_at(&url, tserver::ServerConfig::default()).await;
    let client = server.guest().await;
    assert_eq!(
        alarm_states(&client, "Plant/Boiler").await["Boiler.Temp.Hi"],
        "acknowledged"
    );
    drop(client);
    server.stop().await;
}

/// `tserver ARGS` as a process in `directory`, with `env` and none of the secrets key from
/// this environment: its success, standard output and standard error.
async fn tserver_in(
    directory: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (bool, String, String) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_tserver-under-test"))
        .args(args)
        .current_dir(directory)
        .env_remove("TSERVER_SECRETS_KEY")
        .env("RUST_LOG", "info")
        .envs(env.iter().copied())
        .output()
        .await
        .expect("tserver runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `tserver secrets URL set K` with a value on standard input and `key` as the secrets key:
/// its success, standard output and standard error.
async fn secrets_set(url: &str, key: Option<&str>) -> (bool, String, String) {
    let (url, key) = (url.to_owned(), key.map(str::to_owned));
    tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_tserver-under-test"));
        command
            .args(["secrets", &url, "set", "K"])
            .env_remove("TSERVER_SECRETS_KEY")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        if let Some(key) = key {
            command.env("TSERVER_SECRETS_KEY", key);
        }
        let mut child = command.spawn().expect("tserver runs");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(b"value\n")
            .expect("written");
        let output = child.wait_with_output().expect("ends");
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    })
    .await
    .expect("the run")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_of_a_database_makes_a_secrets_key_and_says_where_and_admin_commands_print_no_notices() {
    let database = TestDatabase::create().await;
    let url = database.url();
    let name = url.rsplit('/').next().expect("a database name").to_owned();
    let directory = tempfile::tempdir().expect("a directory");
    let key_path = directory.path().join(format!("{name}.key"));

    let (ok, said, logged) = tserver_in(directory.path(), &["init", &url], &[]).await;
    assert!(ok, "{said}{logged}");
    assert!(
        said.contains(&format!(
            "made a secrets key in {} (owner-only)",
            key_path.display()
        )),
        "{said}"
    );
    assert!(said.contains("export TSERVER_SECRETS_KEY=$(cat "), "{said}");
    let key = std::fs::read_to_string(&key_path).expect("the key file");
    assert!(key.trim().len() == 64 && key.trim().chars().all(|c| c.is_ascii_hexdigit()));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key_path)
            .expect("metadata")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "owner-only");
    }
    assert!(!logged.to_lowercase().contains("notice"), "{logged}");

    // Every later command opens (and checks the schema of) the database again: no NOTICE.
    let (ok, _, logged) = tserver_in(directory.path(), &["users", &url, "list"], &[]).await;
    assert!(ok);
    assert!(logged.is_empty(), "nothing on standard error: {logged}");

    // Without the key a secret is refused, saying how to get one; with it, stored.
    let (ok, _, refused) = secrets_set(&url, None).await;
    assert!(!ok);
    assert!(
        refused.contains("TSERVER_SECRETS_KEY") && refused.contains("openssl rand -hex 32"),
        "{refused}"
    );
    let (ok, _, said) = secrets_set(&url, Some(key.trim())).await;
    assert!(ok, "{said}");

    // Init again on the same database is refused; the key file stays.
    let (ok, said, _) = tserver_in(directory.path(), &["init", &url], &[]).await;
    assert!(!ok, "the database holds a solution already: {said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_port_is_named_with_the_systems_reason() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        listener.local_addr().expect("address").port()
    };
    let url = format!("postgres://postgres@127.0.0.1:{port}/plant");
    let directory = tempfile::tempdir().expect("a directory");
    let (ok, _, said) = tserver_in(directory.path(), &["users", &url, "list"], &[]).await;
    assert!(!ok);
    assert!(
        said.contains(&format!("cannot connect to 127.0.0.1:{port}")),
        "{said}"
    );
    assert!(said.to_lowercase().contains("connection refused"), "{said}");
    assert!(!said.contains("pool timed out"), "{said}");
}

#[tokio::test]
async fn the_audit_on_postgres_is_exported_and_pruned_past_its_retention_as_a_files_is() {
    use crate::support::{TestServer, admin};
    let database = TestDatabase::create().await;
    let url = database.url();
    admin(&["init", &url, "--demo"], "");
    let server = TestServer::start_at(&url, tserver::ServerConfig::default()).await;
    let client = server.guest().await;
    for mode in ["Manual", "Auto"] {
        client
            .write_tags(vec![service_client::TagWrite {
                name: "Pump1.Mode".to_owned(),
                value: Some(service_client::WriteValue::Text(mode.into())),
            }])
            .await
            .expect("answered");
    }
    drop(client);
    server.stop().await;
    let mut connection = sqlx::PgConnection::connect(&url).await.expect("connects");
    let aged =
        sqlx::query("UPDATE Audit SET Time = Time - 40 * 86400000::bigint WHERE NewValue = '\"Manual\"'")
            .execute(&mut connection)
            .await
            .expect("ages the row")
            .rows_affected();
    assert_eq!(aged, 1);
    drop(connection);

    let exported = admin(&["audit", &url, "export", "--format", "jsonl"], "");
    assert_eq!(exported.lines().count(), 2, "{exported}");
    admin(&["settings", &url, "set", "AuditRetentionDays", "30"], "");
    let server = TestServer::start_at(&url, tserver::ServerConfig::default()).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let audit = admin(&["audit", &url], "");
        if audit.lines().count() == 1 {
            assert!(audit.ends_with(" \"Manual\" -> \"Auto\": ok\n"), "{audit}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never pruned: {audit}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.stop().await;
}
