//! A PostgreSQL database of a test's own on the machine's PostgreSQL (127.0.0.1:5432, trust),
//! shared by the store's own tests and the integration suite (feature `test-database`).

use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::Connection;

/// The machine's PostgreSQL, as the admin account the tests create databases with.
const ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// A database of this test's own, dropped (with its connections) when the test ends.
#[derive(Debug)]
pub struct TestDatabase {
    name: String,
}

impl TestDatabase {
    /// Creates an empty database with a name no other test (in this or another process) uses.
    ///
    /// # Panics
    /// When the machine's PostgreSQL does not answer, naming what to install and start: a test
    /// never skips because PostgreSQL is missing.
    pub async fn create() -> Self {
        static CREATED: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let name = format!(
            "tserver_test_{}_{nanos}_{}",
            std::process::id(),
            CREATED.fetch_add(1, Ordering::Relaxed)
        );
        let mut admin = sqlx::PgConnection::connect(ADMIN_URL)
            .await
            .unwrap_or_else(|error| {
                panic!(
                    "PostgreSQL must listen on 127.0.0.1:5432 with trust authentication for postgres \
                 (Debian: apt-get install -y postgresql, then start it): {error}"
                )
            });
        sqlx::raw_sql(&format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await
            .expect("creates the test database");
        Self { name }
    }

    /// The database's name, unique to this test.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The database's URL, as `serve` and the admin commands take it.
    #[must_use]
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:5432/{}", self.name)
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let name = self.name.clone();
        // Drop runs outside any runtime's async context: a thread of its own with a small one.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async {
                if let Ok(mut admin) = sqlx::PgConnection::connect(ADMIN_URL).await {
                    let _ = sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .execute(&mut admin)
                        .await;
                }
            });
        });
        let _ = dropped.join();
    }
}
