//! Admin operations on a solution file: settings get/set/unset and user management.
//!
//! They work while a server runs on the same file: each write is one short transaction, and
//! key-by-key `ModelSettings` edits are read-modify-write inside `BEGIN IMMEDIATE`, so two
//! editors never lose each other's keys and unknown keys always survive.

use std::fmt;
use std::time::Duration;

use argon2::password_hash::{PasswordHasher, SaltString, rand_core::OsRng};
use rusqlite::{OptionalExtension, TransactionBehavior, params};
use solution_settings::{ModelSettings, SettingIssue, SettingsDocument, SettingsRow, editing_issues, keys};

use super::{Role, SolutionDb, SolutionError, UserRecord};

/// A key the `settings` admin command understands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingKey {
    /// The `ModelEnabled` column.
    ModelEnabled,
    /// The `ModelOptions` column.
    ModelOptions,
    /// The whole `ModelSettings` column.
    ModelSettings,
    /// One key inside `ModelSettings` (`URL`, `Name`, ... or `ModelSettings.<AnyKey>`).
    ModelSettingsKey(String),
    /// A runtime setting of the `RuntimeSettings` table.
    Runtime(RuntimeKey),
}

/// The keys of the `RuntimeSettings` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeKey {
    /// Whether the simulator moves the plant (`true`/`false`; default off, on in demos).
    SimulatorEnabled,
    /// How long the historian keeps samples and alarm events, in whole hours (default 168).
    HistoryRetentionHours,
    /// How long the audit trail keeps its rows, in whole days (default 365).
    AuditRetentionDays,
    /// The most bytes the history's blocks may take, 0 for no bound (the default); past it the
    /// oldest blocks are deleted.
    HistoryMaxBytes,
    /// Whether approving a proposal takes the approver's electronic signature (`true`/`false`;
    /// default off): the password entered again and the meaning stated.
    SignedApprovals,
    /// The longest an operator may shelve an alarm for, in whole hours (default 24).
    ShelvingMaxHours,
    /// More alarms than this within 10 minutes is a flood (default 10, EEMUA 191's).
    AlarmFloodCount,
}

impl RuntimeKey {
    /// Every key, in `settings show` order.
    pub const ALL: [Self; 7] = [
        Self::SimulatorEnabled,
        Self::HistoryRetentionHours,
        Self::AuditRetentionDays,
        Self::HistoryMaxBytes,
        Self::SignedApprovals,
        Self::ShelvingMaxHours,
        Self::AlarmFloodCount,
    ];

    /// The key as stored and typed.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SimulatorEnabled => "SimulatorEnabled",
            Self::HistoryRetentionHours => "HistoryRetentionHours",
            Self::AuditRetentionDays => "AuditRetentionDays",
            Self::HistoryMaxBytes => "HistoryMaxBytes",
            Self::SignedApprovals => "SignedApprovals",
            Self::ShelvingMaxHours => "ShelvingMaxHours",
            Self::AlarmFloodCount => "AlarmFloodCount",
        }
    }

    /// Checks a value, returning it as stored.
    fn canonical(self, value: &str) -> Result<String, SolutionError> {
        let invalid = |reason: String| SolutionError::InvalidValue {
            key: self.as_str().to_owned(),
            reason,
        };
        match self {
            Self::SimulatorEnabled | Self::SignedApprovals => parse_bool(value)
                .map(|on| on.to_string())
                .ok_or_else(|| invalid(format!("{value:?} is not true/false, on/off, yes/no or 1/0"))),
            Self::HistoryRetentionHours => match value.trim().parse::<u32>() {
                Ok(hours) if (1..=MAX_RETENTION_HOURS).contains(&hours) => Ok(hours.to_string()),
                _ => Err(invalid(format!(
                    "{value:?} is not a whole number of hours from 1 to {MAX_RETENTION_HOURS}"
                ))),
            },
            Self::ShelvingMaxHours => match value.trim().parse::<u32>() {
                Ok(hours) if (1..=MAX_SHELVING_HOURS).contains(&hours) => Ok(hours.to_string()),
                _ => Err(invalid(format!(
                    "{value:?} is not a whole number of hours from 1 to {MAX_SHELVING_HOURS}"
                ))),
            },
            Self::AlarmFloodCount => match value.trim().parse::<u32>() {
                Ok(count) if (1..=MAX_FLOOD_COUNT).contains(&count) => Ok(count.to_string()),
                _ => Err(invalid(format!(
                    "{value:?} is not a whole number of alarms from 1 to {MAX_FLOOD_COUNT}"
                ))),
            },
            Self::AuditRetentionDays => match value.trim().parse::<u32>() {
                Ok(days) if (1..=MAX_AUDIT_RETENTION_DAYS).contains(&days) => Ok(days.to_string()),
                _ => Err(invalid(format!(
                    "{value:?} is not a whole number of days from 1 to {MAX_AUDIT_RETENTION_DAYS}"
                ))),
            },
            Self::HistoryMaxBytes => match value.trim().parse::<u64>() {
                Ok(bytes) if bytes == 0 || bytes >= MIN_HISTORY_BYTES => Ok(bytes.to_string()),
                _ => Err(invalid(format!(
                    "{value:?} is not 0 (no bound) or a whole number of bytes from {MIN_HISTORY_BYTES}"
                ))),
            },
        }
    }
}

/// Ten years: longer retention is a data-warehouse job, not a runtime historian's.
const MAX_RETENTION_HOURS: u32 = 87_600;

/// Ten years of audit, as for the history; a site keeping more exports it first
/// (`tserver audit PATH export`).
const MAX_AUDIT_RETENTION_DAYS: u32 = 3_650;

/// The smallest bound on the history's bytes: one MiB (a bound below a few blocks a tag would
/// delete what was just stored).
const MIN_HISTORY_BYTES: u64 = 1 << 20;

/// The longest `ShelvingMaxHours` may allow: 30 days (an alarm gone longer is out of service,
/// not shelved).
const MAX_SHELVING_HOURS: u32 = 720;

/// The most `AlarmFloodCount` may say: past it a plant is never in a flood.
const MAX_FLOOD_COUNT: u32 = 100_000;

/// More alarms than this in 10 minutes is a flood when `AlarmFloodCount` is not set (EEMUA 191).
const DEFAULT_FLOOD_COUNT: u32 = 10;

/// How long an alarm may be shelved for when `ShelvingMaxHours` is not set: a day.
const DEFAULT_SHELVING_HOURS: u64 = 24;

/// The audit's retention when none is set: a year.
const DEFAULT_AUDIT_RETENTION_DAYS: u64 = 365;

/// The runtime settings of a solution, defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeSettings {
    /// Whether the simulator runs.
    pub simulator_enabled: bool,
    /// How long history is kept.
    pub history_retention: Duration,
    /// How long the audit trail is kept.
    pub audit_retention: Duration,
    /// The most bytes the history's blocks may take, none for no bound.
    pub history_max_bytes: Option<u64>,
    /// Whether approving a proposal takes the approver's electronic signature.
    pub signed_approvals: bool,
    /// The longest an alarm may be shelved for.
    pub shelving_max: Duration,
    /// More alarms than this within 10 minutes is a flood.
    pub alarm_flood_count: u32,
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        Self {
            simulator_enabled: false,
            history_retention: Duration::from_secs(168 * 3600),
            audit_retention: Duration::from_secs(DEFAULT_AUDIT_RETENTION_DAYS * 86_400),
            history_max_bytes: None,
            signed_approvals: false,
            shelving_max: Duration::from_secs(DEFAULT_SHELVING_HOURS * 3600),
            alarm_flood_count: DEFAULT_FLOOD_COUNT,
        }
    }
}

impl SettingKey {
    /// Parses `ModelEnabled`, `ModelOptions`, `ModelSettings`, a known `ModelSettings` key
    /// (`URL`, `Name`, `Authorization`, `Headers`, `Info`, `TimeoutSeconds`),
    /// `ModelSettings.<Key>` for any other key, or a [`RuntimeKey`].
    pub fn parse(text: &str) -> Result<Self, SolutionError> {
        match text {
            "ModelEnabled" => Ok(Self::ModelEnabled),
            "ModelOptions" => Ok(Self::ModelOptions),
            "ModelSettings" => Ok(Self::ModelSettings),
            _ if let Some(key) = RuntimeKey::ALL.into_iter().find(|key| key.as_str() == text) => {
                Ok(Self::Runtime(key))
            }
            _ => {
                let key = text.strip_prefix("ModelSettings.").unwrap_or(text);
                if key.is_empty() || !(text.starts_with("ModelSettings.") || keys::ALL.contains(&key)) {
                    return Err(SolutionError::UnknownKey(text.to_owned()));
                }
                Ok(Self::ModelSettingsKey(key.to_owned()))
            }
        }
    }
}

/// A settings value as `settings get` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingValue {
    /// A column or key with a value.
    Text(String),
    /// A NULL column.
    Null,
}

impl fmt::Display for SettingValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Text(text) => f.write_str(text),
            Self::Null => f.write_str("NULL"),
        }
    }
}

impl SolutionDb {
    /// The runtime settings, defaults applied for absent keys. A stored value that does not
    /// parse (hand-edited) is an error naming the key rather than a silent default.
    pub(crate) fn runtime_settings(&self) -> Result<RuntimeSettings, SolutionError> {
        RuntimeSettings::from_stored(|key| self.runtime_value(key))
    }

    fn runtime_value(&self, key: RuntimeKey) -> Result<Option<String>, SolutionError> {
        self.read(|connection| {
            connection
                .prepare_cached("SELECT Value FROM RuntimeSettings WHERE Key = ?1")?
                .query_row([key.as_str()], |row| row.get(0))
                .optional()
        })
    }

    /// Reads one setting. A `ModelSettings` key reads its effective value, i.e. the default
    /// when the key is absent or invalid.
    pub(crate) fn setting(&self, key: &SettingKey) -> Result<SettingValue, SolutionError> {
        let runtime = match key {
            SettingKey::Runtime(_) => self.runtime_settings()?,
            _ => RuntimeSettings::default(),
        };
        setting_value(key, &self.settings_row()?, &runtime)
    }

    /// Writes one setting (see [`SettingKey`]). For `ModelSettings`, `NULL` clears the column.
    pub(crate) fn set_setting(&self, key: &SettingKey, value: &str) -> Result<(), SolutionError> {
        self.write_setting(key, |stored| plan_set(key, value, stored))
    }

    /// What is wrong with the stored `ModelSettings`: each value not used as it is, and each
    /// value every call would fail on (`settings show` prints them).
    pub(crate) fn settings_issues(&self) -> Result<Vec<SettingIssue>, SolutionError> {
        Ok(editing_issues(self.settings_row()?.model_settings.as_deref()))
    }

    /// Returns a setting to its default: `ModelEnabled` off, `ModelOptions` 0, `ModelSettings`
    /// NULL, one `ModelSettings` key removed (other keys kept), or a runtime key removed.
    pub(crate) fn unset_setting(&self, key: &SettingKey) -> Result<(), SolutionError> {
        self.write_setting(key, |stored| plan_unset(key, stored))
    }

    /// One settings change in a `BEGIN IMMEDIATE` transaction: the stored `ModelSettings`
    /// read (when the change edits it key by key), the change worked out, then written.
    fn write_setting(
        &self,
        key: &SettingKey,
        plan: impl FnOnce(Option<&str>) -> Result<SettingsWrite, SolutionError>,
    ) -> Result<(), SolutionError> {
        let mut connection = self.writer()?;
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let stored = if key.edits_stored_document() {
            stored_model_settings(&transaction)?
        } else {
            None
        };
        match plan(stored.as_deref())? {
            SettingsWrite::Runtime(key, Some(value)) => {
                transaction.execute(
                    "INSERT INTO RuntimeSettings (Key, Value) VALUES (?1, ?2)
                     ON CONFLICT (Key) DO UPDATE SET Value = excluded.Value",
                    [key.as_str(), &value],
                )?;
            }
            SettingsWrite::Runtime(key, None) => {
                transaction.execute("DELETE FROM RuntimeSettings WHERE Key = ?1", [key.as_str()])?;
            }
            SettingsWrite::ModelEnabled(enabled) => {
                transaction.execute(
                    "UPDATE SolutionSettings SET ModelEnabled = ?1",
                    [i64::from(enabled)],
                )?;
            }
            SettingsWrite::ModelOptions(bits) => {
                transaction.execute("UPDATE SolutionSettings SET ModelOptions = ?1", [i64::from(bits)])?;
            }
            SettingsWrite::ModelSettings(column) => {
                transaction.execute("UPDATE SolutionSettings SET ModelSettings = ?1", [column])?;
            }
        }
        transaction.commit()?;
        Ok(())
    }

    /// Adds a user with a role. `password` `None` makes a passwordless user.
    pub(crate) fn add_user(
        &self,
        name: &str,
        password: Option<&str>,
        role: Role,
    ) -> Result<(), SolutionError> {
        validate_user_name(name)?;
        let hash = password.map(hash_password).transpose()?;
        let connection = self.writer()?;
        match connection.execute(
            "INSERT INTO Users (Name, PasswordHash, Role) VALUES (?1, ?2, ?3)",
            params![name, hash, role.as_str()],
        ) {
            Ok(_) => Ok(()),
            Err(rusqlite::Error::SqliteFailure(error, _))
                if error.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                Err(SolutionError::UserExists(name.to_owned()))
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Replaces a user's password (`None`: passwordless).
    pub(crate) fn set_password(&self, name: &str, password: Option<&str>) -> Result<(), SolutionError> {
        let hash = password.map(hash_password).transpose()?;
        let mut connection = self.writer()?;
        let transaction = connection.transaction()?;
        let changed = transaction.execute(
            "UPDATE Users SET PasswordHash = ?2 WHERE Name = ?1",
            params![name, hash],
        )?;
        end_browser_sessions(&transaction, name)?;
        transaction.commit()?;
        known_user(name, changed > 0)
    }

    /// Changes a user's role (its sessions end: they were granted the old one).
    pub(crate) fn set_role(&self, name: &str, role: Role) -> Result<(), SolutionError> {
        let mut connection = self.writer()?;
        let transaction = connection.transaction()?;
        let changed = transaction.execute(
            "UPDATE Users SET Role = ?2 WHERE Name = ?1",
            params![name, role.as_str()],
        )?;
        end_browser_sessions(&transaction, name)?;
        transaction.commit()?;
        known_user(name, changed > 0)
    }

    /// Removes a user.
    pub(crate) fn remove_user(&self, name: &str) -> Result<(), SolutionError> {
        let mut connection = self.writer()?;
        let transaction = connection.transaction()?;
        let changed = transaction.execute("DELETE FROM Users WHERE Name = ?1", [name])?;
        end_browser_sessions(&transaction, name)?;
        transaction.commit()?;
        known_user(name, changed > 0)
    }

    /// Every user, by name.
    pub(crate) fn users(&self) -> Result<Vec<UserRecord>, SolutionError> {
        self.read(|connection| {
            connection
                .prepare("SELECT Name, PasswordHash, Role FROM Users ORDER BY Name")?
                .query_map([], |row| {
                    Ok(UserRecord {
                        name: row.get(0)?,
                        password_hash: row.get(1)?,
                        role: super::role_of_stored(&row.get::<_, String>(2)?),
                    })
                })?
                .collect()
        })
    }
}

/// Ends every browser login of user `name`: they were granted with its old credentials.
fn end_browser_sessions(transaction: &rusqlite::Transaction<'_>, name: &str) -> Result<(), SolutionError> {
    transaction.execute("DELETE FROM BrowserSessions WHERE User = ?1", [name])?;
    Ok(())
}

impl RuntimeSettings {
    /// The settings from what `stored` gives for each key (`None`: absent, the default).
    pub(super) fn from_stored(
        mut stored: impl FnMut(RuntimeKey) -> Result<Option<String>, SolutionError>,
    ) -> Result<Self, SolutionError> {
        let mut settings = Self::default();
        for key in RuntimeKey::ALL {
            let Some(stored) = stored(key)? else {
                continue;
            };
            let value = key.canonical(&stored)?;
            match key {
                RuntimeKey::SimulatorEnabled => settings.simulator_enabled = value == "true",
                RuntimeKey::HistoryRetentionHours => {
                    let hours: u64 = value.parse().unwrap_or(168);
                    settings.history_retention = Duration::from_secs(hours * 3600);
                }
                RuntimeKey::AuditRetentionDays => {
                    let days: u64 = value.parse().unwrap_or(DEFAULT_AUDIT_RETENTION_DAYS);
                    settings.audit_retention = Duration::from_secs(days * 86_400);
                }
                RuntimeKey::HistoryMaxBytes => {
                    settings.history_max_bytes = value.parse().ok().filter(|bytes| *bytes > 0);
                }
                RuntimeKey::SignedApprovals => settings.signed_approvals = value == "true",
                RuntimeKey::ShelvingMaxHours => {
                    let hours: u64 = value.parse().unwrap_or(DEFAULT_SHELVING_HOURS);
                    settings.shelving_max = Duration::from_secs(hours * 3600);
                }
                RuntimeKey::AlarmFloodCount => {
                    settings.alarm_flood_count = value.parse().unwrap_or(DEFAULT_FLOOD_COUNT);
                }
            }
        }
        Ok(settings)
    }
}

impl SettingKey {
    /// Whether working out a change of this key needs the stored `ModelSettings` column (it
    /// edits one key of it).
    pub(super) fn edits_stored_document(&self) -> bool {
        matches!(self, Self::ModelSettingsKey(_))
    }
}

/// What a settings change writes, worked out the same for either backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum SettingsWrite {
    /// A runtime key set (`Some`, as stored) or removed.
    Runtime(RuntimeKey, Option<String>),
    /// The `ModelEnabled` column.
    ModelEnabled(bool),
    /// The `ModelOptions` column.
    ModelOptions(u32),
    /// The whole `ModelSettings` column (`None`: NULL).
    ModelSettings(Option<String>),
}

/// One setting's value, from the settings row and the runtime settings. A `ModelSettings` key
/// reads its effective value (the default when absent or invalid).
pub(super) fn setting_value(
    key: &SettingKey,
    row: &SettingsRow,
    runtime: &RuntimeSettings,
) -> Result<SettingValue, SolutionError> {
    Ok(match key {
        SettingKey::Runtime(key) => SettingValue::Text(match key {
            RuntimeKey::SimulatorEnabled => runtime.simulator_enabled.to_string(),
            RuntimeKey::HistoryRetentionHours => (runtime.history_retention.as_secs() / 3600).to_string(),
            RuntimeKey::AuditRetentionDays => (runtime.audit_retention.as_secs() / 86_400).to_string(),
            RuntimeKey::HistoryMaxBytes => runtime.history_max_bytes.unwrap_or(0).to_string(),
            RuntimeKey::SignedApprovals => runtime.signed_approvals.to_string(),
            RuntimeKey::ShelvingMaxHours => (runtime.shelving_max.as_secs() / 3600).to_string(),
            RuntimeKey::AlarmFloodCount => runtime.alarm_flood_count.to_string(),
        }),
        SettingKey::ModelEnabled => SettingValue::Text(row.model_enabled.to_string()),
        SettingKey::ModelOptions => SettingValue::Text(format!("{:#04x}", row.model_options)),
        SettingKey::ModelSettings => row
            .model_settings
            .clone()
            .map_or(SettingValue::Null, SettingValue::Text),
        SettingKey::ModelSettingsKey(name) => {
            let effective = ModelSettings::parse(row.model_settings.as_deref());
            match name.as_str() {
                keys::URL => SettingValue::Text(effective.url),
                keys::NAME => SettingValue::Text(effective.name),
                keys::AUTHORIZATION => SettingValue::Text(effective.authorization),
                keys::HEADERS => SettingValue::Text(effective.headers),
                keys::INFO => SettingValue::Text(effective.info),
                keys::TIMEOUT_SECONDS => SettingValue::Text(effective.timeout.as_secs_f64().to_string()),
                keys::MAX_TOOL_DISPATCHES => SettingValue::Text(effective.max_tool_dispatches.to_string()),
                keys::MAX_HISTORY_MESSAGES => SettingValue::Text(effective.max_history_messages.to_string()),
                other => SettingsDocument::from_column(row.model_settings.as_deref())?
                    .get(other)
                    .map_or(SettingValue::Null, |value| match value {
                        serde_json::Value::String(text) => SettingValue::Text(text.clone()),
                        value => SettingValue::Text(value.to_string()),
                    }),
            }
        }
    })
}

/// Works out `settings set KEY VALUE`; `stored` is the `ModelSettings` column when the key
/// edits it ([`SettingKey::edits_stored_document`]).
pub(super) fn plan_set(
    key: &SettingKey,
    value: &str,
    stored: Option<&str>,
) -> Result<SettingsWrite, SolutionError> {
    Ok(match key {
        SettingKey::Runtime(key) => SettingsWrite::Runtime(*key, Some(key.canonical(value)?)),
        SettingKey::ModelEnabled => {
            SettingsWrite::ModelEnabled(parse_bool(value).ok_or_else(|| SolutionError::InvalidValue {
                key: "ModelEnabled".into(),
                reason: format!("{value:?} is not true/false, on/off, yes/no or 1/0"),
            })?)
        }
        SettingKey::ModelOptions => {
            SettingsWrite::ModelOptions(parse_bits(value).ok_or_else(|| SolutionError::InvalidValue {
                key: "ModelOptions".into(),
                reason: format!("{value:?} is not a 32-bit mask such as 158 or 0x9e"),
            })?)
        }
        SettingKey::ModelSettings => {
            SettingsWrite::ModelSettings(if value.trim().eq_ignore_ascii_case("null") {
                None
            } else {
                let column = SettingsDocument::from_user_json(value)?.to_json();
                refuse_issues(editing_issues(Some(&column)))?;
                Some(column)
            })
        }
        SettingKey::ModelSettingsKey(name) => {
            let mut document = SettingsDocument::from_column(stored)?;
            document.set_text(name, value);
            let column = document.to_json();
            // Only this key's problems: others already stored are `settings show`'s to report.
            refuse_issues(
                editing_issues(Some(&column))
                    .into_iter()
                    .filter(|issue| issue.key == name.as_str())
                    .collect(),
            )?;
            SettingsWrite::ModelSettings(Some(column))
        }
    })
}

/// Works out `settings unset KEY` (see [`plan_set`] for `stored`).
pub(super) fn plan_unset(key: &SettingKey, stored: Option<&str>) -> Result<SettingsWrite, SolutionError> {
    Ok(match key {
        SettingKey::Runtime(key) => SettingsWrite::Runtime(*key, None),
        SettingKey::ModelEnabled => SettingsWrite::ModelEnabled(false),
        SettingKey::ModelOptions => SettingsWrite::ModelOptions(0),
        SettingKey::ModelSettings => SettingsWrite::ModelSettings(None),
        SettingKey::ModelSettingsKey(name) => {
            let mut document = SettingsDocument::from_column(stored)?;
            document.remove(name);
            SettingsWrite::ModelSettings(Some(document.to_json()))
        }
    })
}

/// `Ok` when a change to user `name` found its row, else the user is unknown.
pub(super) fn known_user(name: &str, found: bool) -> Result<(), SolutionError> {
    if !found {
        return Err(SolutionError::UnknownUser(name.to_owned()));
    }
    Ok(())
}

/// Refuses a settings change that would not be used as given.
fn refuse_issues(issues: Vec<SettingIssue>) -> Result<(), SolutionError> {
    if issues.is_empty() {
        return Ok(());
    }
    let issues: Vec<String> = issues.iter().map(SettingIssue::to_string).collect();
    Err(SolutionError::RefusedSettings(issues.join("; ")))
}

fn stored_model_settings(transaction: &rusqlite::Transaction<'_>) -> Result<Option<String>, SolutionError> {
    Ok(transaction
        .query_row("SELECT ModelSettings FROM SolutionSettings LIMIT 1", [], |row| {
            row.get::<_, Option<String>>(0)
        })
        .optional()?
        .flatten())
}

/// Hashes a password as an argon2id PHC string with a random salt.
pub fn hash_password(password: &str) -> Result<String, SolutionError> {
    let salt = SaltString::generate(&mut OsRng);
    argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|error| SolutionError::PasswordHash(error.to_string()))
}

pub(super) fn validate_user_name(name: &str) -> Result<(), SolutionError> {
    let valid = (1..=64).contains(&name.chars().count())
        && name.chars().all(|c| !c.is_whitespace() && !c.is_control());
    if valid {
        Ok(())
    } else {
        Err(SolutionError::InvalidUserName(name.to_owned()))
    }
}

/// `true`/`false`, `on`/`off`, `yes`/`no` or `1`/`0`, in any case.
pub fn parse_bool(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "on" | "yes" => Some(true),
        "false" | "0" | "off" | "no" => Some(false),
        _ => None,
    }
}

fn parse_bits(text: &str) -> Option<u32> {
    let text = text.trim();
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_keys() {
        assert_eq!(
            SettingKey::parse("URL").ok(),
            Some(SettingKey::ModelSettingsKey("URL".into()))
        );
        assert_eq!(
            SettingKey::parse("ModelSettings.Provider").ok(),
            Some(SettingKey::ModelSettingsKey("Provider".into()))
        );
        assert!(matches!(
            SettingKey::parse("Provider"),
            Err(SolutionError::UnknownKey(_))
        ));
        assert!(matches!(
            SettingKey::parse("ModelSettings."),
            Err(SolutionError::UnknownKey(_))
        ));
    }

    #[test]
    fn parses_values() {
        assert_eq!(parse_bits("0x9E"), Some(0x9e));
        assert_eq!(parse_bits("158"), Some(158));
        assert_eq!(parse_bits("-1"), None);
        assert_eq!(parse_bool(" On "), Some(true));
        assert_eq!(parse_bool("maybe"), None);
    }

    #[test]
    fn rejects_bad_user_names() {
        assert!(validate_user_name("operator").is_ok());
        assert!(validate_user_name("").is_err());
        assert!(validate_user_name("two words").is_err());
        assert!(validate_user_name(&"x".repeat(65)).is_err());
    }
}
