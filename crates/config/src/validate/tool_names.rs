//! The checks of `tool_names`: its own settings, and what they ask of the servers and groups
//! under `mcp_servers` (ids without the separator, one prefix per owner, no two predefined
//! tools listed under one name).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use mcpgw_core::ServerId;

use super::Findings;
use crate::error::ConfigErrorKind;
use crate::path::KeyPath;
use crate::schema::{GatewayConfig, ServerMode, ToolNames, ToolPrefix};

pub(crate) fn validate_tool_names(config: &GatewayConfig, findings: &mut Findings) {
    let names = &config.tool_names;
    let path = KeyPath::root().key("tool_names");
    let separator_ok = validate_separator(names, &path, findings);
    findings.range(
        path.key("max_length"),
        names.max_length,
        ToolNames::MAX_LENGTH,
    );
    validate_prefixes(names, separator_ok, &path, findings);
    if !separator_ok {
        // Every other check splits or joins names with the separator.
        return;
    }
    let servers_path = KeyPath::root().key("mcp_servers");
    for id in config.mcp_servers.keys() {
        // An id that is no id at all is reported as that.
        if ServerId::parse(id).is_ok() && id.contains(names.separator.as_str()) {
            findings.error(
                ConfigErrorKind::InvalidValue,
                servers_path.key(id.as_str()),
                format!(
                    "id `{id}` contains `{}`, which separates prefixes from tool names \
                     (tool_names.separator); rename it or choose another separator",
                    names.separator
                ),
            );
        }
    }
    validate_distinct_prefixes(config, &servers_path, findings);
    validate_predefined_names(config, &servers_path, findings);
}

/// 1 to 4 characters, each `_`, `-` or `.`; answers whether it is one.
fn validate_separator(names: &ToolNames, path: &KeyPath, findings: &mut Findings) -> bool {
    let separator = &names.separator;
    let length = separator.chars().count();
    let valid = (1..=ToolNames::MAX_SEPARATOR_LENGTH).contains(&length)
        && separator
            .chars()
            .all(|character| ToolNames::SEPARATOR_CHARACTERS.contains(&character));
    if !valid {
        findings.error(
            ConfigErrorKind::InvalidValue,
            path.key("separator"),
            format!(
                "`{}` is not a separator; write 1 to {} characters, each `_`, `-` or `.` (the \
                 default is `{}`)",
                mcpgw_core::bounded_for_message(separator),
                ToolNames::MAX_SEPARATOR_LENGTH,
                ToolNames::DEFAULT_SEPARATOR
            ),
        );
    }
    valid
}

/// `prefixes` only with `prefix: custom`; each prefix an id-like word without the separator,
/// written for an id-like key, and no prefix written for two ids.
fn validate_prefixes(
    names: &ToolNames,
    separator_ok: bool,
    path: &KeyPath,
    findings: &mut Findings,
) {
    if names.prefixes.is_empty() {
        return;
    }
    let prefixes_path = path.key("prefixes");
    if names.prefix != ToolPrefix::Custom {
        findings.error(
            ConfigErrorKind::InvalidValue,
            prefixes_path,
            format!(
                "`prefixes` is used only with `prefix: custom` (here `prefix: {}`); set \
                 `prefix: custom` or remove `prefixes`",
                names.prefix.as_str()
            ),
        );
        return;
    }
    let mut owners: BTreeMap<&str, &str> = BTreeMap::new();
    for (id, prefix) in &names.prefixes {
        let entry_path = prefixes_path.key(id.as_str());
        if let Err(error) = ServerId::parse(id) {
            findings.error(
                ConfigErrorKind::InvalidValue,
                entry_path,
                format!("{error}; the keys of `prefixes` are server or group ids"),
            );
            continue;
        }
        let well_formed = (1..=ServerId::MAX_LEN).contains(&prefix.len())
            && prefix
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-');
        if !well_formed {
            findings.error(
                ConfigErrorKind::InvalidValue,
                entry_path,
                format!(
                    "`{}` is not a prefix; prefixes match ^[A-Za-z0-9_-]{{1,64}}$",
                    mcpgw_core::bounded_for_message(prefix)
                ),
            );
            continue;
        }
        if separator_ok && prefix.contains(names.separator.as_str()) {
            findings.error(
                ConfigErrorKind::InvalidValue,
                entry_path,
                format!(
                    "prefix `{prefix}` contains `{}`, which separates prefixes from tool names \
                     (tool_names.separator); choose a prefix without it",
                    names.separator
                ),
            );
            continue;
        }
        if let Some(first) = owners.insert(prefix.as_str(), id.as_str()) {
            findings.error(
                ConfigErrorKind::DuplicateKey,
                entry_path,
                format!("`{first}` and `{id}` both have the prefix `{prefix}`; give each its own"),
            );
        }
    }
}

/// Two entries of `mcp_servers` may not be listed with one prefix: an entry whose id is
/// another entry's custom prefix is refused.
fn validate_distinct_prefixes(
    config: &GatewayConfig,
    servers_path: &KeyPath,
    findings: &mut Findings,
) {
    let names = &config.tool_names;
    if names.prefix != ToolPrefix::Custom {
        // With `id`, prefixes are the ids, which are distinct keys; with `none` there are none.
        return;
    }
    let mut owner_of: HashMap<&str, &str> = HashMap::new();
    for id in config.mcp_servers.keys() {
        let Some(prefix) = names.prefix_of(id) else {
            continue;
        };
        match owner_of.get(prefix) {
            // Two ids written with one prefix are reported at `prefixes`.
            Some(first)
                if names.prefixes.contains_key(*first) && names.prefixes.contains_key(id) => {}
            Some(first) => {
                // Reported at the entry that uses its id as the prefix.
                let (custom, plain) = if names.prefixes.contains_key(*first) {
                    (*first, id.as_str())
                } else {
                    (id.as_str(), *first)
                };
                findings.error(
                    ConfigErrorKind::InvalidValue,
                    servers_path.key(plain),
                    format!(
                        "the tools of `{plain}` and `{custom}` would both be listed with the \
                         prefix `{prefix}` (`{custom}`'s entry in tool_names.prefixes); rename \
                         `{plain}` or give `{custom}` another prefix"
                    ),
                );
            }
            None => {
                owner_of.insert(prefix, id);
            }
        }
    }
}

/// One predefined tool as it would be listed.
struct Listed<'a> {
    id: &'a str,
    index: usize,
    tool: &'a str,
}

/// No two predefined tools may be listed under one name. Groups list their members' tools
/// (which the file does not predefine for them), and members are not listed on their own,
/// so only the entries that are neither count.
fn validate_predefined_names(
    config: &GatewayConfig,
    servers_path: &KeyPath,
    findings: &mut Findings,
) {
    let names = &config.tool_names;
    let members: BTreeSet<&str> = config
        .mcp_servers
        .values()
        .filter(|definition| definition.mode == Some(ServerMode::Group))
        .flat_map(|definition| definition.members.iter().flatten())
        .map(|member| member.id.as_str())
        .collect();
    let listed_entries: Vec<(&str, Vec<&str>)> = config
        .mcp_servers
        .iter()
        .filter(|(id, definition)| {
            definition.mode != Some(ServerMode::Group) && !members.contains(id.as_str())
        })
        .filter_map(|(id, definition)| {
            let tools = definition.tools.as_ref()?;
            Some((
                id.as_str(),
                tools.iter().map(|tool| tool.name.as_str()).collect(),
            ))
        })
        .collect();
    // How many entries expose each name, for `unique_bare`.
    let mut exposed_by: HashMap<&str, BTreeSet<&str>> = HashMap::new();
    for (id, tools) in &listed_entries {
        for tool in tools {
            exposed_by.entry(tool).or_default().insert(id);
        }
    }
    let advice = if names.prefix == ToolPrefix::None {
        "rename one of them, or prefix tool names (tool_names.prefix: id)"
    } else {
        "rename one of them"
    };
    let mut taken: HashMap<String, Listed<'_>> = HashMap::new();
    for (id, tools) in &listed_entries {
        for (index, tool) in tools.iter().enumerate() {
            if tool.trim().is_empty() {
                continue;
            }
            let bare =
                names.lists_unique_bare() && exposed_by.get(tool).map(BTreeSet::len) == Some(1);
            let name = if bare {
                (*tool).to_owned()
            } else {
                names.prefixed_name(id, tool)
            };
            let listed = Listed { id, index, tool };
            match taken.get(&name) {
                // The same entry listing a tool twice is reported with its tools.
                Some(first) if first.id == *id => {}
                Some(first) => {
                    let path = servers_path.key(*id).key("tools").index(index);
                    let shortened = if u64::try_from(name.chars().count())
                        .is_ok_and(|length| length > names.max_length)
                    {
                        format!(" (before shortening to {} characters)", names.max_length)
                    } else {
                        String::new()
                    };
                    findings.error(
                        ConfigErrorKind::InvalidValue,
                        path,
                        format!(
                            "mcp_servers.{}.tools[{}] {:?} and mcp_servers.{id}.tools[{index}] \
                             {tool:?} would both be listed as {name:?}{shortened}; {advice}",
                            first.id, first.index, first.tool
                        ),
                    );
                }
                None => {
                    taken.insert(name, listed);
                }
            }
        }
    }
}
