//! The runtime object model: the live tags a display panel reads and the assistant's tools see.
//!
//! Definitions come from the solution's `Tags` table at startup; current values live in memory.
//! A read is a hash-map lookup plus an atomic load (`ArcSwap`), so readers never wait for a
//! writer and never touch the database.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use arc_swap::ArcSwap;

use crate::solution::{SolutionDb, SolutionError};

/// The data type of a tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagKind {
    /// A floating-point measurement.
    Number,
    /// A whole number (counters, states).
    Integer,
    /// A digital signal.
    Bool,
    /// Free text.
    Text,
}

impl TagKind {
    fn parse(text: &str) -> Option<Self> {
        match text {
            "number" => Some(Self::Number),
            "integer" => Some(Self::Integer),
            "bool" => Some(Self::Bool),
            "text" => Some(Self::Text),
            _ => None,
        }
    }
}

/// A tag value.
#[derive(Debug, Clone, PartialEq)]
pub enum TagValue {
    /// A [`TagKind::Number`] value.
    Number(f64),
    /// A [`TagKind::Integer`] value.
    Integer(i64),
    /// A [`TagKind::Bool`] value.
    Bool(bool),
    /// A [`TagKind::Text`] value.
    Text(Arc<str>),
}

impl TagValue {
    /// Parses text as a value of `kind`.
    pub fn parse(kind: TagKind, text: &str) -> Option<Self> {
        let text = text.trim();
        match kind {
            TagKind::Number => text
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .map(Self::Number),
            TagKind::Integer => text.parse().ok().map(Self::Integer),
            TagKind::Bool => match text.to_ascii_lowercase().as_str() {
                "true" | "1" | "on" => Some(Self::Bool(true)),
                "false" | "0" | "off" => Some(Self::Bool(false)),
                _ => None,
            },
            TagKind::Text => Some(Self::Text(Arc::from(text))),
        }
    }

    /// The zero value of a kind, held by a tag that has no value yet (with Bad quality).
    pub fn zero(kind: TagKind) -> Self {
        match kind {
            TagKind::Number => Self::Number(0.0),
            TagKind::Integer => Self::Integer(0),
            TagKind::Bool => Self::Bool(false),
            TagKind::Text => Self::Text(Arc::from("")),
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

/// A value with its quality and the time it was taken.
#[derive(Debug, Clone, PartialEq)]
pub struct TagSample {
    /// The value.
    pub value: TagValue,
    /// Its quality.
    pub quality: Quality,
    /// When it was taken.
    pub timestamp: SystemTime,
}

/// How a tag is defined in the solution.
#[derive(Debug, Clone, PartialEq)]
pub struct TagDefinition {
    /// The dotted name operators type, e.g. `Pump1.MotorCurrent`.
    pub name: String,
    /// The UNS path, e.g. `Plant/Area1/Pump1/MotorCurrent`.
    pub path: String,
    /// The data type.
    pub kind: TagKind,
    /// Engineering units, possibly empty.
    pub units: String,
    /// What the tag measures.
    pub description: String,
    /// The lower end of the normal range, if defined.
    pub range_low: Option<f64>,
    /// The upper end of the normal range, if defined.
    pub range_high: Option<f64>,
}

/// One live tag.
#[derive(Debug)]
pub struct Tag {
    definition: TagDefinition,
    current: ArcSwap<TagSample>,
}

impl Tag {
    /// The definition.
    pub fn definition(&self) -> &TagDefinition {
        &self.definition
    }

    /// The current sample, without blocking any writer.
    pub fn current(&self) -> Arc<TagSample> {
        self.current.load_full()
    }
}

/// Why a write was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WriteError {
    /// No such tag.
    #[error("unknown tag {0:?}")]
    UnknownTag(String),
    /// The value's type does not match the tag's.
    #[error("tag {name:?} holds {expected:?} values")]
    WrongType {
        /// The tag.
        name: String,
        /// Its kind.
        expected: TagKind,
    },
}

/// Every live tag of a solution, addressable by dotted name or by UNS path.
#[derive(Debug, Default)]
pub struct ObjectModel {
    by_name: HashMap<String, Arc<Tag>>,
    by_path: HashMap<String, Arc<Tag>>,
}

impl ObjectModel {
    /// Loads the tag definitions of a solution; each starts at its initial value (Good) or,
    /// without one, at zero with Bad quality.
    pub fn load(db: &SolutionDb) -> Result<Self, SolutionError> {
        let rows = db.read(|connection| {
            connection
                .prepare(
                    "SELECT Name, Path, Type, Units, Description, RangeLow, RangeHigh, InitialValue
                     FROM Tags ORDER BY Path",
                )?
                .query_map([], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, String>(3)?,
                        row.get::<_, String>(4)?,
                        row.get::<_, Option<f64>>(5)?,
                        row.get::<_, Option<f64>>(6)?,
                        row.get::<_, Option<String>>(7)?,
                    ))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        let now = SystemTime::now();
        let mut model = Self::default();
        for (name, path, kind, units, description, range_low, range_high, initial) in rows {
            let kind = TagKind::parse(&kind).ok_or_else(|| SolutionError::InvalidTag {
                name: name.clone(),
                reason: format!("unknown type {kind:?}"),
            })?;
            let sample = match initial.as_deref().map(|text| TagValue::parse(kind, text)) {
                Some(Some(value)) => TagSample {
                    value,
                    quality: Quality::GOOD,
                    timestamp: now,
                },
                Some(None) => {
                    return Err(SolutionError::InvalidTag {
                        name,
                        reason: format!("initial value is not a {kind:?}"),
                    });
                }
                None => TagSample {
                    value: TagValue::zero(kind),
                    quality: Quality::BAD,
                    timestamp: now,
                },
            };
            model.insert(
                TagDefinition {
                    name,
                    path,
                    kind,
                    units,
                    description,
                    range_low,
                    range_high,
                },
                sample,
            );
        }
        Ok(model)
    }

    /// Adds a tag (used by `load` and by tests that build a plant in memory).
    pub fn insert(&mut self, definition: TagDefinition, sample: TagSample) {
        let tag = Arc::new(Tag {
            current: ArcSwap::from_pointee(sample),
            definition,
        });
        self.by_path.insert(tag.definition.path.clone(), Arc::clone(&tag));
        self.by_name.insert(tag.definition.name.clone(), tag);
    }

    /// The tag with that dotted name or UNS path.
    pub fn tag(&self, name_or_path: &str) -> Option<&Arc<Tag>> {
        self.by_name
            .get(name_or_path)
            .or_else(|| self.by_path.get(name_or_path))
    }

    /// The number of tags.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether the model has no tags.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Sets a tag's value. Readers see either the old or the new sample, never a mix.
    pub fn write(&self, name_or_path: &str, value: TagValue, quality: Quality) -> Result<(), WriteError> {
        let tag = self
            .tag(name_or_path)
            .ok_or_else(|| WriteError::UnknownTag(name_or_path.to_owned()))?;
        let matches = matches!(
            (&value, tag.definition.kind),
            (TagValue::Number(_), TagKind::Number)
                | (TagValue::Integer(_), TagKind::Integer)
                | (TagValue::Bool(_), TagKind::Bool)
                | (TagValue::Text(_), TagKind::Text)
        );
        if !matches {
            return Err(WriteError::WrongType {
                name: tag.definition.name.clone(),
                expected: tag.definition.kind,
            });
        }
        tag.current.store(Arc::new(TagSample {
            value,
            quality,
            timestamp: SystemTime::now(),
        }));
        Ok(())
    }
}
