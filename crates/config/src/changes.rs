//! What differs between two configurations.

use crate::schema::GatewayConfig;

/// How the entries of one section (servers, or groups) differ, by id, each list sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SectionChanges {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Present in both with another definition.
    pub updated: Vec<String>,
    pub unchanged: Vec<String>,
}

/// What a reload from `old` to `new` would change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigChanges {
    /// `mcp_servers` entries that are servers (not groups).
    pub servers: SectionChanges,
    /// `mcp_servers` entries of mode `group`.
    pub groups: SectionChanges,
    /// Top-level sections other than `mcp_servers` that differ (`auth`, `rate_limit`, ...):
    /// they take effect at the next start.
    pub restart_required: Vec<String>,
}

/// What differs between `old` and `new`.
pub fn changes(old: &GatewayConfig, new: &GatewayConfig) -> ConfigChanges {
    let _ = (old, new);
    todo!("written with the reload capability")
}
