//! What a solution's model settings are: the `SolutionSettings` row ([`SettingsRow`]), the
//! `ModelSettings` document parsed with its defaults ([`ModelSettings`]) and edited key by key
//! ([`SettingsDocument`]), the `ModelOptions` bits ([`ModelOptions`]), the Authorization and
//! Headers formats ([`headers`]) and secret values ([`SecretValue`]).
//!
//! The Local AI paths read these settings and the store keeps them; neither needs the other to
//! know what they are. So this crate knows nothing of HTTP calls, SQL, the chat loop or an
//! async runtime.

pub mod defaults;
mod document;
mod editing;
pub mod headers;
pub mod keys;
mod model_settings;
mod options;
mod row;
mod secret_value;

pub use document::{SettingsDocument, SettingsEditError};
pub use editing::editing_issues;
pub use model_settings::{ModelSettings, SettingIssue};
pub use options::ModelOptions;
pub use row::SettingsRow;
pub use secret_value::{SecretValue, TOKEN_PREFIX};
