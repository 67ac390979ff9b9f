//! The master gates, applied in the spec's fixed order at the entry of each path.

use ai_envelope::Envelope;

use crate::settings::{ModelOptions, SettingsRow};

/// The warning of gate 1, naming the `ModelEnabled` kill-switch.
pub const MODEL_ENABLED_OFF: &str = "Local AI master kill-switch (ModelEnabled) is off: \
     `tserver settings PATH set ModelEnabled true` turns it on (with `set URL ...` naming the model).";

/// The warning of gate 2 (chat path only), naming bit 0x02.
pub const RUNTIME_MCP_OFF: &str = "Local AI tool surface (ModelOptions bit 0x02, EnableRuntimeMCP) is off; chat requires it: \
     `tserver settings PATH set ModelOptions 0x9e` turns it on with the UNS, alarm and history \
     tools and per-connection chat history.";

/// Gate 1, shared by both paths: `ModelEnabled` off short-circuits with `disabled`.
pub fn model_enabled(row: &SettingsRow) -> Result<(), Envelope> {
    if row.model_enabled {
        Ok(())
    } else {
        Err(Envelope::disabled(MODEL_ENABLED_OFF))
    }
}

/// Gate 2, chat path only: the master tool-surface bit 0x02.
pub fn runtime_mcp(options: ModelOptions) -> Result<(), Envelope> {
    if options.contains(ModelOptions::ENABLE_RUNTIME_MCP) {
        Ok(())
    } else {
        Err(Envelope::disabled(RUNTIME_MCP_OFF))
    }
}
