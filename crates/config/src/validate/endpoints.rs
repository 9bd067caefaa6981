//! The checks of `endpoints`: each endpoint's name, its entries (ids, tool names, overrides
//! only on one tool, no two entries served under one name), its principal patterns, and, in a
//! file, whether the servers it names are declared there.

use std::collections::BTreeMap;

use mcpgw_authz::PrincipalPattern;
use mcpgw_core::{EndpointName, ServerId};

use super::Findings;
use crate::endpoints::{EndpointDefinition, EndpointToolDefinition};
use crate::error::ConfigErrorKind;
use crate::path::KeyPath;
use crate::schema::GatewayConfig;

/// The longest name an entry may give its tool.
pub(crate) const MAX_TOOL_NAME_LENGTH: usize = 128;

pub(crate) fn validate_endpoints(config: &GatewayConfig, findings: &mut Findings) {
    let endpoints_path = KeyPath::root().key("endpoints");
    for (name, definition) in &config.endpoints {
        let path = endpoints_path.key(name.as_str());
        if let Err(error) = EndpointName::parse(name) {
            findings.error(
                ConfigErrorKind::InvalidValue,
                path.clone(),
                error.to_string(),
            );
        }
        validate_endpoint(definition, &path, findings);
        for (index, entry) in definition.tools.iter().enumerate() {
            // An id that is no id at all is reported as that.
            if ServerId::parse(&entry.server).is_ok()
                && !config.mcp_servers.contains_key(&entry.server)
            {
                findings.warning(
                    path.key("tools").index(index).key("server"),
                    format!(
                        "`{}` is not a server or group of this file; the entry selects nothing \
                         until one with this id is created over the API",
                        entry.server
                    ),
                );
            }
        }
    }
}

/// Everything about one endpoint's definition that needs nothing else; `path` is where it
/// stands (`endpoints.support` in a file, the root in a request body).
pub(crate) fn validate_endpoint(
    definition: &EndpointDefinition,
    path: &KeyPath,
    findings: &mut Findings,
) {
    let tools_path = path.key("tools");
    if definition.tools.is_empty() {
        findings.error(
            ConfigErrorKind::MissingKey,
            tools_path.clone(),
            "an endpoint serves at least one entry: list servers or groups (`- server: tickets`) \
             or single tools (`- {server: math, tool: add}`)",
        );
    }
    // Override name to the first entry that gives it.
    let mut served_as: BTreeMap<&str, KeyPath> = BTreeMap::new();
    for (index, entry) in definition.tools.iter().enumerate() {
        let entry_path = tools_path.index(index);
        validate_entry(entry, &entry_path, findings);
        if let Some(name) = entry.name.as_deref().filter(|_| entry.tool.is_some()) {
            match served_as.get(name) {
                Some(first) => findings.error(
                    ConfigErrorKind::DuplicateKey,
                    entry_path.key("name"),
                    format!(
                        "{first} and {entry_path} would both be served as \"{}\"; give one of \
                         them another `name`",
                        mcpgw_core::bounded_for_message(name)
                    ),
                ),
                None => {
                    served_as.insert(name, entry_path);
                }
            }
        }
    }
    for (key, patterns) in [("allow", &definition.allow), ("deny", &definition.deny)] {
        for (index, pattern) in patterns.iter().enumerate() {
            if let Err(error) = PrincipalPattern::parse(pattern) {
                findings.error(
                    ConfigErrorKind::InvalidValue,
                    path.key(key).index(index),
                    format!(
                        "{error}; write a principal (user:alice, group:support, service:ci), all \
                         of a kind (user:*) or everyone (*)"
                    ),
                );
            }
        }
    }
}

fn validate_entry(entry: &EndpointToolDefinition, path: &KeyPath, findings: &mut Findings) {
    if let Err(error) = ServerId::parse(&entry.server) {
        findings.error(
            ConfigErrorKind::InvalidValue,
            path.key("server"),
            format!("{error}; ids match ^[A-Za-z0-9_-]{{1,64}}$ without `__`"),
        );
    }
    match &entry.tool {
        Some(tool) if tool.trim().is_empty() => findings.error(
            ConfigErrorKind::InvalidValue,
            path.key("tool"),
            format!(
                "a tool name must not be empty; leave `tool` out to select every tool of `{}`",
                mcpgw_core::bounded_for_message(&entry.server)
            ),
        ),
        Some(_) => {}
        None => {
            if let Some((key, _)) = entry.override_keys().into_iter().find(|(_, given)| *given) {
                findings.error(
                    ConfigErrorKind::InvalidValue,
                    path.key(key),
                    "name/title/description/annotations need `tool`: they override one tool",
                );
            }
        }
    }
    if let Some(name) = &entry.name
        && !is_tool_name(name)
    {
        findings.error(
            ConfigErrorKind::InvalidValue,
            path.key("name"),
            format!(
                "`{}` is not a tool name: use 1 to {MAX_TOOL_NAME_LENGTH} letters, digits, `_`, \
                 `-` or `.`",
                mcpgw_core::bounded_for_message(name)
            ),
        );
    }
    if entry
        .annotations
        .as_ref()
        .is_some_and(|annotations| !annotations.is_object())
    {
        findings.error(
            ConfigErrorKind::InvalidValue,
            path.key("annotations"),
            "must be an object of tool annotations, such as {readOnlyHint: true}",
        );
    }
}

/// `^[A-Za-z0-9_.-]{1,128}$`.
fn is_tool_name(name: &str) -> bool {
    (1..=MAX_TOOL_NAME_LENGTH).contains(&name.len())
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.'))
}
