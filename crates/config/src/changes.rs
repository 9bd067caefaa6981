//! What differs between two configurations.
//!
//! A reload applies server, group and curated endpoint changes one id (or name) at a time, so
//! those are classified by id; every other section is applied only at the next start, so it is
//! enough to name it.

use std::collections::{BTreeMap, BTreeSet};

use crate::schema::{GatewayConfig, ServerDefinition, ServerMode};

/// How the entries of one section (servers, groups, or endpoints) differ, by id or name, each
/// list sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SectionChanges {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Present in both with another definition.
    pub updated: Vec<String>,
    pub unchanged: Vec<String>,
}

impl SectionChanges {
    /// Whether anything was added, removed or updated.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.updated.is_empty()
    }
}

/// What a reload from `old` to `new` would change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigChanges {
    /// `mcp_servers` entries that are servers (not groups).
    pub servers: SectionChanges,
    /// `mcp_servers` entries of mode `group`.
    pub groups: SectionChanges,
    /// `endpoints` entries, by name.
    pub endpoints: SectionChanges,
    /// Top-level sections other than `mcp_servers` and `endpoints` that differ (`auth`,
    /// `rate_limit`, ...): they take effect at the next start.
    pub restart_required: Vec<String>,
}

impl ConfigChanges {
    /// Whether the two configurations configure the same thing.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
            && self.groups.is_empty()
            && self.endpoints.is_empty()
            && self.restart_required.is_empty()
    }
}

/// What differs between `old` and `new`.
///
/// An id whose definition turned from a server into a group (or back) is removed from one
/// section and added to the other, since the registry holds them apart. Sections are compared
/// by their serialized values, so every top-level key counts, including those that
/// [`GatewayConfig`]'s equality leaves out; a section written out with its default values
/// equals the section left out.
pub fn changes(old: &GatewayConfig, new: &GatewayConfig) -> ConfigChanges {
    let (old_servers, old_groups) = split_by_kind(&old.mcp_servers);
    let (new_servers, new_groups) = split_by_kind(&new.mcp_servers);
    ConfigChanges {
        servers: section_changes(&old_servers, &new_servers),
        groups: section_changes(&old_groups, &new_groups),
        endpoints: section_changes(&by_name(&old.endpoints), &by_name(&new.endpoints)),
        restart_required: differing_sections(old, new),
    }
}

/// What [`changes`] answers for `config` against itself, without comparing anything: every
/// server and group unchanged. For when the file's text is the running one's, which parses to
/// the same configuration.
pub fn no_changes(config: &GatewayConfig) -> ConfigChanges {
    let (servers, groups) = split_by_kind(&config.mcp_servers);
    let unchanged = |definitions: Definitions<'_>| SectionChanges {
        unchanged: definitions.keys().map(|id| (*id).to_owned()).collect(),
        ..SectionChanges::default()
    };
    ConfigChanges {
        servers: unchanged(servers),
        groups: unchanged(groups),
        endpoints: SectionChanges {
            unchanged: config.endpoints.keys().cloned().collect(),
            ..SectionChanges::default()
        },
        restart_required: Vec::new(),
    }
}

type Definitions<'config> = BTreeMap<&'config str, &'config ServerDefinition>;

fn by_name<V>(entries: &BTreeMap<String, V>) -> BTreeMap<&str, &V> {
    entries
        .iter()
        .map(|(name, entry)| (name.as_str(), entry))
        .collect()
}

fn split_by_kind(
    definitions: &BTreeMap<String, ServerDefinition>,
) -> (Definitions<'_>, Definitions<'_>) {
    definitions
        .iter()
        .map(|(id, definition)| (id.as_str(), definition))
        .partition(|(_, definition)| definition.mode != Some(ServerMode::Group))
}

fn section_changes<V: PartialEq>(
    old: &BTreeMap<&str, &V>,
    new: &BTreeMap<&str, &V>,
) -> SectionChanges {
    let mut changes = SectionChanges::default();
    // BTreeMap iteration is ordered, so every list comes out sorted.
    for (id, old_definition) in old {
        match new.get(id) {
            None => changes.removed.push((*id).to_owned()),
            Some(new_definition) if new_definition != old_definition => {
                changes.updated.push((*id).to_owned())
            }
            Some(_) => changes.unchanged.push((*id).to_owned()),
        }
    }
    changes.added = new
        .keys()
        .filter(|id| !old.contains_key(*id))
        .map(|id| (*id).to_owned())
        .collect();
    changes
}

/// The top-level sections a reload applies (entry by entry, in [`ConfigChanges`]' lists).
const APPLIED_BY_RELOAD: [&str; 2] = ["mcp_servers", "endpoints"];

fn differing_sections(old: &GatewayConfig, new: &GatewayConfig) -> Vec<String> {
    let old = sections(old);
    let new = sections(new);
    let names: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    names
        .into_iter()
        .filter(|name| {
            !APPLIED_BY_RELOAD.contains(&name.as_str()) && old.get(*name) != new.get(*name)
        })
        .cloned()
        .collect()
}

fn sections(config: &GatewayConfig) -> serde_json::Map<String, serde_json::Value> {
    match serde_json::to_value(config) {
        Ok(serde_json::Value::Object(sections)) => sections,
        // The schema is a struct with string keys: it always serializes to an object.
        _ => serde_json::Map::new(),
    }
}
