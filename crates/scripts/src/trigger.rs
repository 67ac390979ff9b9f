//! When a script runs: `startup`, `every:<duration>`, `tag:<name>`, `alarm:<name>` or
//! `alarm:*`, or `class` (a module other scripts import, never run by itself).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The shortest `every:` period; faster schedules would be a busy loop.
pub const MIN_PERIOD: Duration = Duration::from_millis(100);

/// When a script runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// Once, when the server starts (and when the script is added or changed).
    Startup,
    /// Every period, from when the server starts.
    Every(Duration),
    /// When the named tag's value changes.
    Tag(String),
    /// When the named alarm (its tag's dotted name and condition, as listed) becomes active;
    /// `None` for any alarm (`alarm:*`).
    Alarm(Option<String>),
    /// A module of functions for other scripts (`import "Name" as n;`).
    Class,
}

/// A trigger that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TriggerError {
    /// Not one of the kinds.
    #[error(
        "unknown trigger {0:?}: use startup, every:<duration> (e.g. every:5s), tag:<name>, alarm:<name>, alarm:* or class"
    )]
    Unknown(String),
    /// `every:` with a period that does not parse.
    #[error("every:{text}: {reason} (write a duration such as 500ms, 5s or 1m)")]
    Period {
        /// The text after `every:`.
        text: String,
        /// Why it is refused.
        reason: String,
    },
    /// `every:` faster than [`MIN_PERIOD`].
    #[error("every:{0}: the shortest period is 100ms")]
    TooFast(String),
    /// `tag:` or `alarm:` without a name.
    #[error("{0}: a name is needed after the colon")]
    MissingName(String),
}

impl FromStr for Trigger {
    type Err = TriggerError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        let named = |prefix: &str, rest: &str| -> Result<String, TriggerError> {
            let name = rest.trim();
            if name.is_empty() {
                return Err(TriggerError::MissingName(prefix.to_owned()));
            }
            Ok(name.to_owned())
        };
        match text.split_once(':') {
            None if text == "startup" => Ok(Self::Startup),
            None if text == "class" => Ok(Self::Class),
            Some(("every", period)) => {
                let period = period.trim();
                let parsed = humantime::parse_duration(period).map_err(|error| TriggerError::Period {
                    text: period.to_owned(),
                    reason: error.to_string(),
                })?;
                if parsed < MIN_PERIOD {
                    return Err(TriggerError::TooFast(period.to_owned()));
                }
                Ok(Self::Every(parsed))
            }
            Some(("tag", name)) => Ok(Self::Tag(named("tag", name)?)),
            Some(("alarm", name)) if name.trim() == "*" => Ok(Self::Alarm(None)),
            Some(("alarm", name)) => Ok(Self::Alarm(Some(named("alarm", name)?))),
            _ => Err(TriggerError::Unknown(text.to_owned())),
        }
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Startup => f.write_str("startup"),
            Self::Every(period) => write!(f, "every:{}", humantime::format_duration(*period)),
            Self::Tag(name) => write!(f, "tag:{name}"),
            Self::Alarm(None) => f.write_str("alarm:*"),
            Self::Alarm(Some(name)) => write!(f, "alarm:{name}"),
            Self::Class => f.write_str("class"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_and_writes_back_the_same() {
        for text in [
            "startup",
            "every:5s",
            "every:1m 30s",
            "tag:Tank1.Level",
            "alarm:*",
            "alarm:Tank1.Level Hi",
            "class",
        ] {
            let trigger: Trigger = text.parse().expect(text);
            assert_eq!(trigger.to_string().parse::<Trigger>(), Ok(trigger), "{text}");
        }
        assert_eq!(
            "every:250ms".parse(),
            Ok(Trigger::Every(Duration::from_millis(250)))
        );
    }

    #[test]
    fn bad_triggers_say_what_is_wrong() {
        assert!(matches!(
            "hourly".parse::<Trigger>(),
            Err(TriggerError::Unknown(_))
        ));
        assert!(matches!(
            "every:soon".parse::<Trigger>(),
            Err(TriggerError::Period { .. })
        ));
        assert!(matches!(
            "every:1ms".parse::<Trigger>(),
            Err(TriggerError::TooFast(_))
        ));
        assert!(matches!(
            "tag: ".parse::<Trigger>(),
            Err(TriggerError::MissingName(_))
        ));
        let message = "every:soon".parse::<Trigger>().expect_err("refused").to_string();
        assert!(message.contains("5s"), "{message}");
    }
}
