//! The raw `SolutionSettings` row: the three columns as the host stores them.

use crate::{ModelOptions, ModelSettings};

/// The raw `SolutionSettings` row as the host stores it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SettingsRow {
    /// `ModelEnabled`: the master kill-switch of both paths.
    pub model_enabled: bool,
    /// `ModelSettings`: the endpoint JSON, or NULL.
    pub model_settings: Option<String>,
    /// `ModelOptions`: the tool-surface bitmask.
    pub model_options: i64,
}

impl SettingsRow {
    /// The parsed `ModelOptions` bits.
    pub fn options(&self) -> ModelOptions {
        ModelOptions::from_column(self.model_options)
    }

    /// The parsed `ModelSettings`, with defaults for whatever is missing or invalid.
    pub fn model_settings(&self) -> ModelSettings {
        ModelSettings::parse(self.model_settings.as_deref())
    }
}
