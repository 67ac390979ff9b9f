//! `tserver settings`: read or change the Local AI and runtime settings (a running server
//! follows them).

use clap::Subcommand;

use store::{RuntimeKey, SettingKey, SolutionLocation, Store};

/// `tserver settings` actions. KEY is `ModelEnabled`, `ModelOptions`, `ModelSettings`, one of
/// the ModelSettings keys `URL`, `Name`, `Authorization`, `Headers`, `Info`, `TimeoutSeconds`,
/// or `ModelSettings.<Key>` for any other key.
#[derive(Debug, Subcommand)]
pub enum SettingsAction {
    /// Print a setting's effective value.
    Get {
        /// The key.
        key: String,
    },
    /// Change a setting. ModelSettings keys are edited in place; other keys are kept.
    Set {
        /// The key.
        key: String,
        /// The value (`ModelOptions` accepts `158` or `0x9e`; `ModelSettings` a JSON object or NULL).
        /// A value starting with `-` is a value too, so `-1` reaches the check that refuses it.
        #[arg(allow_hyphen_values = true)]
        value: String,
    },
    /// Return a setting to its default.
    Unset {
        /// The key.
        key: String,
    },
    /// Print the three columns.
    Show,
}

/// `tserver settings`, on either backend; returns what it prints.
pub(super) async fn settings_command(
    solution: &SolutionLocation,
    action: &SettingsAction,
) -> anyhow::Result<String> {
    use std::fmt::Write as _;
    let store = Store::open(solution).await?;
    let mut lines = String::new();
    match action {
        SettingsAction::Get { key } => writeln!(lines, "{}", store.setting(&SettingKey::parse(key)?).await?)?,
        SettingsAction::Set { key, value } => {
            let key = SettingKey::parse(key)?;
            store.set_setting(&key, value).await?;
            write_when_seen(&mut lines, &store, &key).await?;
        }
        SettingsAction::Unset { key } => {
            let key = SettingKey::parse(key)?;
            store.unset_setting(&key).await?;
            write_when_seen(&mut lines, &store, &key).await?;
        }
        SettingsAction::Show => {
            for key in [
                SettingKey::ModelEnabled,
                SettingKey::ModelOptions,
                SettingKey::ModelSettings,
            ] {
                writeln!(lines, "{key:?} = {}", store.setting(&key).await?)?;
            }
            for key in RuntimeKey::ALL {
                let value = store.setting(&SettingKey::Runtime(key)).await?;
                writeln!(lines, "{} = {value}", key.as_str())?;
            }
            for issue in store.settings_issues().await? {
                writeln!(lines, "warning: {issue}")?;
            }
        }
    }
    Ok(lines)
}

/// For a runtime setting, its value now and when a running server uses it. The Local AI
/// settings print nothing: every call reads them.
async fn write_when_seen(lines: &mut String, store: &Store, key: &SettingKey) -> anyhow::Result<()> {
    use std::fmt::Write as _;
    let SettingKey::Runtime(runtime_key) = key else {
        return Ok(());
    };
    let value = store.setting(key).await?;
    let when = match runtime_key {
        RuntimeKey::SimulatorEnabled => {
            "a running server follows it within a second (one started with `--simulator on|off` keeps that)"
        }
        RuntimeKey::HistoryRetentionHours => {
            "a running server follows it within a second, pruning by it at its next history flush"
        }
        RuntimeKey::AuditRetentionDays => {
            "a running server follows it within a second, pruning by it at its next prune (the first audited action an hour or more after the last)"
        }
        RuntimeKey::HistoryMaxBytes => {
            "a running server follows it within a second, deleting the oldest history blocks past it at its next history checkpoint (within a minute)"
        }
        RuntimeKey::SignedApprovals => {
            "a running server follows it from the next decision on a proposal: approving one takes the approver's password and the meaning of the signature"
        }
        RuntimeKey::ShelvingMaxHours => {
            "a running server follows it from the next shelving: alarms shelved already keep their time"
        }
        RuntimeKey::AlarmFloodCount => {
            "a running server follows it within a second: more alarms than this within 10 minutes is a flood"
        }
    };
    writeln!(lines, "{} = {value}: {when}", runtime_key.as_str())?;
    Ok(())
}
