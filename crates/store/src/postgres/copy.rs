//! `tserver solution copy FROM TO`: a whole solution moved between a SQLite file and a
//! PostgreSQL database, in either direction, into a destination that holds no solution yet.
//!
//! Table by table, column by column as the two schemas spell them (`TABLES`), in one
//! transaction on the destination, so a failed copy leaves nothing half-written. What is
//! carried: settings, users (password hashes as they are), the plant model and definitions
//! and its documents, history, alarm events, the audit trail, secrets (still encrypted: the
//! destination needs the same key), API tokens (digests), scripts and their run records. What
//! is not: what a running server reports about itself (MQTT source reports), run requests
//! waiting for one, and login failures; they belong to the node, not the solution.

use rusqlite::types::{Value as SqliteValue, ValueRef};
use sqlx::Row;

use super::settings_lease::SettingsRevocation;
use super::{PgStore, PostgresUrl};
use crate::{SolutionDb, SolutionError, SolutionLocation};

/// How a column's values are carried between the backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// INTEGER (both).
    Int,
    /// REAL / DOUBLE PRECISION.
    Real,
    /// TEXT.
    Text,
    /// BLOB / BYTEA.
    Blob,
    /// ISO-8601 text in SQLite, TIMESTAMPTZ in PostgreSQL.
    Time,
}

/// One table: its name and columns (SQLite's name, PostgreSQL's name, kind), in an order that
/// satisfies the foreign keys; `identity` when PostgreSQL generates its `Id`.
struct Table {
    name: &'static str,
    columns: &'static [(&'static str, &'static str, Kind)],
    identity: bool,
}

use Kind::{Blob, Int, Real, Text, Time};

const TABLES: &[Table] = &[
    Table {
        name: "RuntimeSettings",
        columns: &[("Key", "Key", Text), ("Value", "Value", Text)],
        identity: false,
    },
    Table {
        name: "Users",
        columns: &[
            ("Name", "Name", Text),
            ("PasswordHash", "PasswordHash", Text),
            ("CreatedAt", "CreatedAt", Time),
            ("Role", "Role", Text),
        ],
        identity: false,
    },
    Table {
        name: "Tags",
        columns: &[
            ("Name", "Name", Text),
            ("Path", "Path", Text),
            ("Type", "Type", Text),
            ("Units", "Units", Text),
            ("Description", "Description", Text),
            ("RangeLow", "RangeLow", Real),
            ("RangeHigh", "RangeHigh", Real),
            ("InitialValue", "InitialValue", Text),
            ("Writable", "Writable", Int),
            ("History", "History", Int),
            ("HistoryDeadband", "HistoryDeadband", Real),
            ("Source", "Source", Text),
            ("Proposable", "Proposable", Int),
            ("AllowedValues", "AllowedValues", Text),
            ("HistoryCompression", "HistoryCompression", Text),
            ("HistoryMaxInterval", "HistoryMaxInterval", Int),
            ("HistoryRetentionHours", "HistoryRetentionHours", Int),
            ("Signed", "Signed", Int),
            ("Witness", "Witness", Int),
            ("Display", "Display", Text),
        ],
        identity: false,
    },
    Table {
        name: "AlarmDefinitions",
        columns: &[
            ("Name", "Name", Text),
            ("Tag", "Tag", Text),
            ("Condition", "Condition", Text),
            ("LimitValue", "LimitValue", Real),
            ("Setpoint", "Setpoint", Real),
            ("ActiveWhen", "ActiveWhen", Int),
            ("Deadband", "Deadband", Real),
            ("Priority", "Priority", Int),
            ("Message", "Message", Text),
            ("Cause", "Cause", Text),
            ("Consequence", "Consequence", Text),
            ("Response", "Response", Text),
            ("TimeToRespond", "TimeToRespond", Int),
            ("Signed", "Signed", Int),
            ("OnDelay", "OnDelay", Int),
            ("OffDelay", "OffDelay", Int),
            ("SuppressWhen", "SuppressWhen", Text),
        ],
        identity: false,
    },
    Table {
        name: "Simulation",
        columns: &[
            ("Tag", "Tag", Text),
            ("Amplitude", "Amplitude", Real),
            ("PeriodSeconds", "PeriodSeconds", Real),
            ("Phase", "Phase", Real),
            ("Noise", "Noise", Real),
        ],
        identity: false,
    },
    Table {
        name: "Folders",
        columns: &[("Path", "Path", Text), ("Description", "Description", Text)],
        identity: false,
    },
    Table {
        name: "PlantModel",
        columns: &[
            ("Id", "Id", Int),
            ("Json", "Json", Text),
            ("Revision", "Revision", Int),
            ("SourceName", "SourceName", Text),
            ("ImportedAt", "ImportedAt", Time),
        ],
        identity: false,
    },
    Table {
        name: "PlantDocuments",
        columns: &[
            ("Path", "Path", Text),
            ("Title", "Title", Text),
            ("Text", "Text", Text),
            ("Scope", "Scope", Text),
        ],
        identity: false,
    },
    Table {
        name: "HistoryTags",
        columns: &[("Id", "Id", Int), ("Name", "Name", Text)],
        identity: true,
    },
    Table {
        name: "HistoryBlocks",
        columns: &[
            ("Id", "Id", Int),
            ("Tag", "Tag", Int),
            ("Kind", "Kind", Text),
            ("First", "First", Int),
            ("Last", "Last", Int),
            ("Count", "Count", Int),
            ("FirstValue", "FirstValue", Real),
            ("LastValue", "LastValue", Real),
            ("MinAt", "MinAt", Int),
            ("MinTime", "MinTime", Int),
            ("MinValue", "MinValue", Real),
            ("MaxAt", "MaxAt", Int),
            ("MaxTime", "MaxTime", Int),
            ("MaxValue", "MaxValue", Real),
            ("Sum", "Sum", Real),
            ("Exact", "Exact", Int),
            ("Sealed", "Sealed", Int),
            ("Data", "Data", Blob),
        ],
        identity: true,
    },
    Table {
        name: "HistoryJournal",
        columns: &[
            ("Id", "Id", Int),
            ("Time", "Time", Int),
            ("Samples", "Samples", Int),
            ("Data", "Data", Blob),
        ],
        identity: true,
    },
    Table {
        name: "AlarmHistory",
        columns: &[
            ("Id", "Id", Int),
            ("Time", "Time", Int),
            ("Alarm", "Alarm", Text),
            ("Tag", "Tag", Text),
            ("Condition", "Condition", Text),
            ("Event", "Event", Text),
            ("Value", "Value", Real),
            ("Priority", "Priority", Int),
            ("Message", "Message", Text),
            ("UserName", "UserName", Text),
            ("Reason", "Reason", Text),
            ("Until", "Until", Int),
        ],
        identity: true,
    },
    Table {
        name: "AlarmHandling",
        columns: &[
            ("Alarm", "Alarm", Text),
            ("Kind", "Kind", Text),
            ("UserName", "UserName", Text),
            ("Reason", "Reason", Text),
            ("Since", "Since", Int),
            ("Until", "Until", Int),
        ],
        identity: false,
    },
    Table {
        name: "Audit",
        columns: &[
            ("Id", "Id", Int),
            ("Time", "Time", Int),
            ("UserName", "UserName", Text),
            ("Connection", "Connection", Text),
            ("Peer", "Peer", Text),
            ("Action", "Action", Text),
            ("Target", "Target", Text),
            ("OldValue", "OldValue", Text),
            ("NewValue", "NewValue", Text),
            ("Outcome", "Outcome", Text),
            ("Signatures", "Signatures", Text),
            ("PrevHash", "PrevHash", Blob),
            ("Hash", "Hash", Blob),
        ],
        identity: true,
    },
    Table {
        name: "AuditCheckpoint",
        columns: &[
            ("Id", "Id", Int),
            ("Time", "Time", Int),
            ("ThroughId", "ThroughId", Int),
            ("Hash", "Hash", Blob),
            ("Pruned", "Pruned", Int),
            ("Signature", "Signature", Blob),
        ],
        identity: true,
    },
    Table {
        name: "Secrets",
        columns: &[
            ("Name", "Name", Text),
            ("Nonce", "Nonce", Blob),
            ("Ciphertext", "Ciphertext", Blob),
            ("UpdatedAt", "UpdatedAt", Time),
        ],
        identity: false,
    },
    Table {
        name: "ApiTokens",
        columns: &[
            ("Id", "Id", Text),
            ("Name", "Name", Text),
            ("User", "UserName", Text),
            ("Digest", "Digest", Text),
            ("CreatedAt", "CreatedAt", Int),
            ("ExpiresAt", "ExpiresAt", Int),
        ],
        identity: false,
    },
    Table {
        name: "Scripts",
        columns: &[
            ("Name", "Name", Text),
            ("Trigger", "Trigger", Text),
            ("Source", "Source", Text),
            ("Enabled", "Enabled", Int),
            ("UpdatedAt", "UpdatedAt", Int),
        ],
        identity: false,
    },
    Table {
        name: "ScriptRuns",
        columns: &[
            ("Name", "Name", Text),
            ("Runs", "Runs", Int),
            ("Failures", "Failures", Int),
            ("Skipped", "Skipped", Int),
            ("LastRunAt", "LastRunAt", Int),
            ("LastMicros", "LastMicros", Int),
            ("LastOutcome", "LastOutcome", Text),
            ("LastError", "LastError", Text),
        ],
        identity: false,
    },
];

/// The `SolutionSettings` row (one row in both, updated rather than inserted).
const SETTINGS: Table = Table {
    name: "SolutionSettings",
    columns: &[
        ("ModelEnabled", "ModelEnabled", Int),
        ("ModelSettings", "ModelSettings", Text),
        ("ModelOptions", "ModelOptions", Int),
    ],
    identity: false,
};

/// One value on its way.
#[derive(Debug, Clone, PartialEq)]
enum Cell {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

/// What a copy carried: rows per table, in copy order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyReport {
    /// `(table, rows)`.
    pub tables: Vec<(&'static str, usize)>,
    /// Whether the solution holds secrets (the destination needs the same key to read them).
    pub has_secrets: bool,
}

/// Copies the solution at `from` into `to`, which must hold no solution yet (a file that does
/// not exist, a database without tserver's schema). Between a file and a database only: a file
/// is copied as a file, a database with `pg_dump`.
#[crate::compiled_once]
pub async fn copy_solution(
    from: &SolutionLocation,
    to: &SolutionLocation,
) -> Result<CopyReport, SolutionError> {
    match (from, to) {
        (SolutionLocation::File(path), SolutionLocation::Postgres(url)) => {
            let source = SolutionDb::open(path)?;
            let rows = read_sqlite(&source)?;
            write_postgres(url, &rows).await
        }
        (SolutionLocation::Postgres(url), SolutionLocation::File(path)) => {
            let rows = read_postgres(url).await?;
            write_sqlite(path, &rows)
        }
        _ => Err(SolutionError::Location {
            location: format!("{from} -> {to}"),
            reason: "copy moves a solution between a file and a PostgreSQL database; copy a file as a file, a database with pg_dump".to_owned(),
        }),
    }
}

/// Every table's rows, settings first.
type Rows = Vec<(&'static Table, Vec<Vec<Cell>>)>;

fn all_tables() -> impl Iterator<Item = &'static Table> {
    std::iter::once(&SETTINGS).chain(TABLES.iter())
}

fn read_sqlite(source: &SolutionDb) -> Result<Rows, SolutionError> {
    let mut rows = Rows::new();
    for table in all_tables() {
        let columns = sqlite_names(table);
        let select = format!("SELECT {} FROM {} ORDER BY rowid", columns.join(", "), table.name);
        let read = source.read(|connection| {
            let mut statement = connection.prepare(&select)?;
            let mapped = statement.query_map([], |row| {
                (0..table.columns.len())
                    .map(|index| Ok(cell_of_sqlite(row.get_ref(index)?)))
                    .collect::<rusqlite::Result<Vec<Cell>>>()
            })?;
            mapped.collect::<rusqlite::Result<Vec<Vec<Cell>>>>()
        })?;
        rows.push((table, read));
    }
    Ok(rows)
}

/// The table's columns as SQLite spells them, quoted (`Trigger` and `User` are keywords there).
fn sqlite_names(table: &Table) -> Vec<String> {
    table
        .columns
        .iter()
        .map(|(sqlite, _, _)| format!("\"{sqlite}\""))
        .collect()
}

fn cell_of_sqlite(value: ValueRef<'_>) -> Cell {
    match value {
        ValueRef::Null => Cell::Null,
        ValueRef::Integer(integer) => Cell::Int(integer),
        ValueRef::Real(real) => Cell::Real(real),
        ValueRef::Text(text) => Cell::Text(String::from_utf8_lossy(text).into_owned()),
        ValueRef::Blob(blob) => Cell::Blob(blob.to_vec()),
    }
}

/// The destination database must have no tserver schema yet; it gets this build's, then the
/// rows, all in one transaction after the schema.
async fn write_postgres(url: &PostgresUrl, rows: &Rows) -> Result<CopyReport, SolutionError> {
    if PgStore::has_schema(url).await? {
        return Err(SolutionError::Location {
            location: url.to_string(),
            reason: "the database holds a solution already; copy into an empty database".to_owned(),
        });
    }
    let store = PgStore::open(url).await?;
    // A node may serve the new schema already: the settings row is written as any writer does.
    let mut revocation = SettingsRevocation::acquire(&store).await?;
    let mut transaction = sqlx::Connection::begin(revocation.connection())
        .await
        .map_err(|error| store.error(error))?;
    let mut report = CopyReport::default();
    for (table, table_rows) in rows {
        let placeholders: Vec<String> = table
            .columns
            .iter()
            .enumerate()
            .map(|(index, (_, _, kind))| format!("${}::{}", index + 1, pg_type(*kind)))
            .collect();
        let names: Vec<String> = table
            .columns
            .iter()
            .map(|(_, postgres, _)| (*postgres).to_owned())
            .collect();
        let overriding = if table.identity {
            "OVERRIDING SYSTEM VALUE "
        } else {
            ""
        };
        let statement = write_statement(table, &names, &placeholders, overriding);
        if table.name == "HistoryBlocks" {
            let firsts = table_rows.iter().filter_map(|row| match row.get(3) {
                Some(Cell::Int(first)) => Some(*first),
                _ => None,
            });
            store.create_partitions(&mut transaction, firsts).await?;
        }
        for row in table_rows {
            let mut query = sqlx::query(&statement);
            for (cell, (_, _, kind)) in row.iter().zip(table.columns) {
                query = bind_postgres(query, cell, *kind);
            }
            query.execute(&mut *transaction).await.map_err(|error| {
                let mut error = store.error(error);
                if let SolutionError::Postgres { reason, .. } = &mut error {
                    *reason = format!("copying {}: {reason}", table.name);
                }
                error
            })?;
        }
        if table.identity {
            // The next generated Id follows the copied ones.
            let restart = format!(
                "SELECT setval(pg_get_serial_sequence('{0}', 'id'), COALESCE((SELECT max(Id) FROM {0}), 0) + 1, false)",
                table.name
            );
            sqlx::query(&restart)
                .execute(&mut *transaction)
                .await
                .map_err(|error| store.error(error))?;
        }
        report.has_secrets |= table.name == "Secrets" && !table_rows.is_empty();
        report.tables.push((table.name, table_rows.len()));
    }
    transaction.commit().await.map_err(|error| store.error(error))?;
    revocation.release().await.map_err(|error| store.error(error))?;
    // The planner's statistics of the tables just filled, as after any bulk load: the first
    // queries plan with them rather than with the empty tables' (and autovacuum's own pass,
    // which would replan every statement on the history's partitions, is not due).
    sqlx::query("ANALYZE")
        .execute(&store.pool)
        .await
        .map_err(|error| store.error(error))?;
    Ok(report)
}

/// The statement that writes one row of `table`: an UPDATE of the settings' one row, else an
/// INSERT (`overriding`: PostgreSQL's clause for keeping copied identity ids).
fn write_statement(table: &Table, names: &[String], placeholders: &[String], overriding: &str) -> String {
    if table.name == SETTINGS.name {
        let assignments: Vec<String> = names
            .iter()
            .zip(placeholders)
            .map(|(name, placeholder)| format!("{name} = {placeholder}"))
            .collect();
        format!("UPDATE SolutionSettings SET {}", assignments.join(", "))
    } else {
        format!(
            "INSERT INTO {} ({}) {overriding}VALUES ({})",
            table.name,
            names.join(", "),
            placeholders.join(", ")
        )
    }
}

fn pg_type(kind: Kind) -> &'static str {
    match kind {
        Int => "bigint",
        Real => "float8",
        Text => "text",
        Blob => "bytea",
        Time => "timestamptz",
    }
}

/// Binds `cell` as its column's kind, NULL included: a statement is prepared once per table, so
/// every row must give each parameter the same type.
fn bind_postgres<'q>(
    query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    cell: &Cell,
    kind: Kind,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    match kind {
        Int => query.bind(match cell {
            Cell::Int(integer) => Some(*integer),
            #[expect(
                clippy::cast_possible_truncation,
                reason = "a whole number SQLite kept as real"
            )]
            Cell::Real(real) => Some(*real as i64),
            Cell::Text(text) => text.trim().parse().ok(),
            Cell::Null | Cell::Blob(_) => None,
        }),
        Real => query.bind(match cell {
            Cell::Real(real) => Some(*real),
            #[expect(clippy::cast_precision_loss, reason = "a number SQLite kept as integer")]
            Cell::Int(integer) => Some(*integer as f64),
            Cell::Text(text) => text.trim().parse().ok(),
            Cell::Null | Cell::Blob(_) => None,
        }),
        Text | Time => query.bind(match cell {
            Cell::Text(text) => Some(text.clone()),
            Cell::Int(integer) => Some(integer.to_string()),
            Cell::Real(real) => Some(real.to_string()),
            Cell::Blob(blob) => Some(String::from_utf8_lossy(blob).into_owned()),
            Cell::Null => None,
        }),
        Blob => query.bind(match cell {
            Cell::Blob(blob) => Some(blob.clone()),
            Cell::Text(text) => Some(text.clone().into_bytes()),
            Cell::Null | Cell::Int(_) | Cell::Real(_) => None,
        }),
    }
}

async fn read_postgres(url: &PostgresUrl) -> Result<Rows, SolutionError> {
    if !PgStore::has_schema(url).await? {
        return Err(SolutionError::Location {
            location: url.to_string(),
            reason: "the database holds no tserver solution".to_owned(),
        });
    }
    let store = PgStore::open(url).await?;
    let mut rows = Rows::new();
    for table in all_tables() {
        let columns: Vec<String> = table
            .columns
            .iter()
            .map(|(_, postgres, kind)| match kind {
                Time => {
                    format!("to_char({postgres} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')")
                }
                Int => format!("{postgres}::bigint"),
                Real | Text | Blob => (*postgres).to_owned(),
            })
            .collect();
        let order = if table.identity { " ORDER BY Id" } else { "" };
        let select = format!("SELECT {} FROM {}{order}", columns.join(", "), table.name);
        let fetched = sqlx::query(&select)
            .fetch_all(&store.pool)
            .await
            .map_err(|error| store.error(error))?;
        let mut table_rows = Vec::with_capacity(fetched.len());
        for row in fetched {
            let mut cells = Vec::with_capacity(table.columns.len());
            for (index, (_, _, kind)) in table.columns.iter().enumerate() {
                let cell = match kind {
                    Int => row
                        .try_get::<Option<i64>, _>(index)
                        .map(|value| value.map_or(Cell::Null, Cell::Int)),
                    Real => row
                        .try_get::<Option<f64>, _>(index)
                        .map(|value| value.map_or(Cell::Null, Cell::Real)),
                    Text | Time => row
                        .try_get::<Option<String>, _>(index)
                        .map(|value| value.map_or(Cell::Null, Cell::Text)),
                    Blob => row
                        .try_get::<Option<Vec<u8>>, _>(index)
                        .map(|value| value.map_or(Cell::Null, Cell::Blob)),
                }
                .map_err(|error| store.error(error))?;
                cells.push(cell);
            }
            table_rows.push(cells);
        }
        rows.push((table, table_rows));
    }
    Ok(rows)
}

/// The destination file must not exist; it is created with this build's schema, then filled
/// in one transaction. Secrets come with the key of `TSERVER_SECRETS_KEY`, written to the new
/// file's key file (a database keeps no key).
fn write_sqlite(path: &std::path::Path, rows: &Rows) -> Result<CopyReport, SolutionError> {
    if path.exists() {
        return Err(SolutionError::AlreadyExists(path.to_owned()));
    }
    let has_secrets = rows
        .iter()
        .any(|(table, table_rows)| table.name == "Secrets" && !table_rows.is_empty());
    if has_secrets {
        crate::secrets::write_key_file_from_env(path)?;
    }
    SolutionDb::create(path, false)?;
    let db = SolutionDb::open(path)?;
    let mut connection = db.writer()?;
    let transaction = connection.transaction()?;
    let mut report = CopyReport {
        has_secrets,
        ..CopyReport::default()
    };
    for (table, table_rows) in rows {
        let names = sqlite_names(table);
        let placeholders: Vec<String> = (1..=names.len()).map(|index| format!("?{index}")).collect();
        let statement = write_statement(table, &names, &placeholders, "");
        let mut insert = transaction.prepare(&statement)?;
        for row in table_rows {
            let values: Vec<SqliteValue> = row
                .iter()
                .map(|cell| match cell {
                    Cell::Null => SqliteValue::Null,
                    Cell::Int(integer) => SqliteValue::Integer(*integer),
                    Cell::Real(real) => SqliteValue::Real(*real),
                    Cell::Text(text) => SqliteValue::Text(text.clone()),
                    Cell::Blob(blob) => SqliteValue::Blob(blob.clone()),
                })
                .collect();
            insert.execute(rusqlite::params_from_iter(values))?;
        }
        report.tables.push((table.name, table_rows.len()));
    }
    transaction.commit()?;
    Ok(report)
}
