//! The `ModelOptions` column: the bits that open the tool surface and the chat history.

/// The `ModelOptions` bitmask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModelOptions(u32);

impl ModelOptions {
    /// 0x02 EnableRuntimeMCP: the master tool-surface bit; the chat path needs it.
    pub const ENABLE_RUNTIME_MCP: u32 = 0x02;
    /// 0x04: tag value, browse, search, describe and list tools.
    pub const UNS_TOOLS: u32 = 0x04;
    /// 0x08: active alarm and alarm history tools.
    pub const ALARM_TOOLS: u32 = 0x08;
    /// 0x10: tag history tool.
    pub const HISTORIAN_TOOLS: u32 = 0x10;
    /// 0x20: tools the solution registers.
    pub const CUSTOM_TOOLS: u32 = 0x20;
    /// 0x40: proposal tools, off by default: the model may propose a write or an alarm
    /// acknowledgement for an operator to approve; a proposal acts on nothing.
    pub const PROPOSALS: u32 = 0x40;
    /// 0x80 EnableChatHistory: chat turns use the per-connection transcript cache.
    pub const CHAT_HISTORY: u32 = 0x80;

    /// Wraps raw bits.
    pub const fn new(bits: u32) -> Self {
        Self(bits)
    }

    /// Reads the integer column. Only the low 32 bits carry meaning; a negative or larger
    /// value keeps its low bits rather than failing.
    pub fn from_column(value: i64) -> Self {
        Self((value & 0xFFFF_FFFF) as u32)
    }

    /// The raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether every bit of `mask` is set.
    pub const fn contains(self, mask: u32) -> bool {
        self.0 & mask == mask
    }

    /// Whether a tool category is offered: the master bit AND the category bit.
    pub const fn offers(self, category: u32) -> bool {
        self.contains(Self::ENABLE_RUNTIME_MCP) && self.contains(category)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_gate_categories_on_the_master_bit() {
        let only_uns = ModelOptions::new(ModelOptions::UNS_TOOLS);
        assert!(!only_uns.offers(ModelOptions::UNS_TOOLS));
        let with_master = ModelOptions::new(ModelOptions::UNS_TOOLS | ModelOptions::ENABLE_RUNTIME_MCP);
        assert!(with_master.offers(ModelOptions::UNS_TOOLS));
        assert!(!with_master.offers(ModelOptions::ALARM_TOOLS));
        assert_eq!(ModelOptions::from_column(-1).bits(), u32::MAX);
    }
}
