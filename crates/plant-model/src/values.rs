//! The plant's value vocabulary: what a tag holds ([`TagValue`], [`Quality`]) and what an alarm
//! did ([`AlarmEvent`]), shared by the live plant, the store that records them and the tools
//! that report them.

use std::sync::Arc;
use std::time::SystemTime;

use crate::{Condition, TagType};

/// A tag value.
#[derive(Debug, Clone, PartialEq)]
pub enum TagValue {
    /// A [`TagType::Number`] value.
    Number(f64),
    /// A [`TagType::Integer`] value.
    Integer(i64),
    /// A [`TagType::Bool`] value.
    Bool(bool),
    /// A [`TagType::String`] value.
    Text(Arc<str>),
}

impl TagValue {
    /// The value as a `suppress_when` compares it: an integer is a number.
    pub fn operand(&self) -> crate::Operand {
        match self {
            Self::Number(number) => crate::Operand::Number(*number),
            // Compared as alarms compare them: as f64.
            Self::Integer(number) => crate::Operand::Number(*number as f64),
            Self::Bool(value) => crate::Operand::Bool(*value),
            Self::Text(text) => crate::Operand::Text(text.to_string()),
        }
    }

    /// Parses text as a value of `kind`.
    pub fn parse(kind: TagType, text: &str) -> Option<Self> {
        let text = text.trim();
        match kind {
            TagType::Number => text
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .map(Self::Number),
            TagType::Integer => text.parse().ok().map(Self::Integer),
            TagType::Bool => match text.to_ascii_lowercase().as_str() {
                "true" | "1" | "on" => Some(Self::Bool(true)),
                "false" | "0" | "off" => Some(Self::Bool(false)),
                _ => None,
            },
            TagType::String => Some(Self::Text(Arc::from(text))),
        }
    }

    /// The value as a number, for alarms and statistics (`None` for text).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Self::Number(value) => Some(*value),
            // Plant integers (counters, states) are far below 2^53, where f64 is exact.
            Self::Integer(value) => Some(*value as f64),
            Self::Bool(value) => Some(f64::from(u8::from(*value))),
            Self::Text(_) => None,
        }
    }

    /// The value as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Self::Number(value) => serde_json::json!(value),
            Self::Integer(value) => serde_json::json!(value),
            Self::Bool(value) => serde_json::json!(value),
            Self::Text(value) => serde_json::json!(&**value),
        }
    }

    /// Whether the value is of `kind`.
    pub fn is(&self, kind: TagType) -> bool {
        matches!(
            (self, kind),
            (Self::Number(_), TagType::Number)
                | (Self::Integer(_), TagType::Integer)
                | (Self::Bool(_), TagType::Bool)
                | (Self::Text(_), TagType::String)
        )
    }

    /// The zero value of a kind, held by a tag that has no value yet (with Bad quality).
    pub fn zero(kind: TagType) -> Self {
        match kind {
            TagType::Number => Self::Number(0.0),
            TagType::Integer => Self::Integer(0),
            TagType::Bool => Self::Bool(false),
            TagType::String => Self::Text(Arc::from("")),
        }
    }
}

/// OPC quality of a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quality(pub u8);

impl Quality {
    /// 192: the value is good.
    pub const GOOD: Self = Self(192);
    /// 64: the value may be wrong.
    pub const UNCERTAIN: Self = Self(64);
    /// 0: the value is not usable.
    pub const BAD: Self = Self(0);

    /// `Good`, `Uncertain` or `Bad`, as the assistant's tools report it.
    pub fn label(self) -> &'static str {
        match self.0 {
            192..=255 => "Good",
            64..=191 => "Uncertain",
            _ => "Bad",
        }
    }
}

/// What happened to an alarm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlarmEventKind {
    /// The condition tripped.
    Active,
    /// An operator acknowledged it.
    Acknowledged,
    /// The condition cleared.
    Cleared,
    /// An operator shelved it.
    Shelved,
    /// An operator unshelved it.
    Unshelved,
    /// Its shelving ran out.
    ShelvingExpired,
    /// An admin took it out of service.
    OutOfService,
    /// An admin put it back in service.
    InService,
    /// Its `suppress_when` began to hold: suppressed by design.
    Suppressed,
    /// Its `suppress_when` stopped holding.
    Unsuppressed,
}

impl AlarmEventKind {
    /// Every kind, in the order of the alarm's life.
    pub const ALL: [Self; 10] = [
        Self::Active,
        Self::Acknowledged,
        Self::Cleared,
        Self::Shelved,
        Self::Unshelved,
        Self::ShelvingExpired,
        Self::OutOfService,
        Self::InService,
        Self::Suppressed,
        Self::Unsuppressed,
    ];

    /// The stored name (`Active`, `Acknowledged`, `Cleared`, `Shelved`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "Active",
            Self::Acknowledged => "Acknowledged",
            Self::Cleared => "Cleared",
            Self::Shelved => "Shelved",
            Self::Unshelved => "Unshelved",
            Self::ShelvingExpired => "ShelvingExpired",
            Self::OutOfService => "OutOfService",
            Self::InService => "InService",
            Self::Suppressed => "Suppressed",
            Self::Unsuppressed => "Unsuppressed",
        }
    }

    /// The kind of a stored name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// Whether it comes of a person's act on the alarm (an acknowledgement, a shelving and its
    /// running out, a change of service), not of the plant's values (a trip, a clearing, a
    /// suppression by design): each node records its
    /// own, the leading node the rest.
    pub fn is_act(self) -> bool {
        !matches!(
            self,
            Self::Active | Self::Cleared | Self::Suppressed | Self::Unsuppressed
        )
    }
}

/// One alarm transition, as the alarm history records it.
#[derive(Debug, Clone, PartialEq)]
pub struct AlarmEvent {
    /// When it happened.
    pub time: SystemTime,
    /// The alarm's name.
    pub alarm: String,
    /// The tag it watches.
    pub tag: String,
    /// Its condition.
    pub condition: Condition,
    /// What happened.
    pub kind: AlarmEventKind,
    /// The tag value at the time (none for an acknowledgement).
    pub value: Option<f64>,
    /// The alarm's priority.
    pub priority: u32,
    /// The alarm's message.
    pub message: String,
    /// Who acknowledged, shelved, unshelved or changed its service (for a shelving that ran
    /// out, who had shelved it).
    pub user: Option<String>,
    /// Why it was shelved or taken out of service.
    pub reason: Option<String>,
    /// Until when it is shelved (a shelving).
    pub until: Option<SystemTime>,
}
