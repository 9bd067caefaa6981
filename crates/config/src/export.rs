//! A configuration written back as YAML.
//!
//! The export must load again to the same state, so values that came from `${VAR}` references
//! are written back as those references where the recorded reference says enough to rebuild
//! the text, every literal `${` is escaped as `$${` (else loading it would expand it), and
//! secrets that cannot be written as a reference are masked as they are for display.

use std::collections::BTreeMap;

use serde_yaml::Value;

use crate::expand::VariableReference;
use crate::sanitize::{mask_secrets, schema_tree};
use crate::schema::GatewayConfig;

/// `config` as YAML that [`crate::parse`] accepts.
///
/// Keys come in the schema's order (`mcp_servers` first), and what the schema leaves out when it
/// is absent stays out. Loading the text with the environment the configuration was parsed
/// with gives an equal configuration, except for secrets written as `***`:
///
/// - A value that came from references that all fell back to their defaults
///   (`${REGION:-eu}`, `"https://${HOST:-localhost}/mcp"`) is written as the reference text,
///   literal parts included; the loaded value is the same because the same environment makes
///   the same references fall back again.
/// - A value that came from a reference whose variable was set is written as it is, or as
///   `***` when it is a secret (a server's `env` and `headers` values, values of
///   secret-looking variables, and everything else [`crate::sanitized`] masks).
///   [`VariableReference`] records the variable but not the scalar it sat in, so it is unknown
///   whether the reference was the whole value (`${TOKEN}`) or a part of it
///   (`Bearer ${TOKEN}`), and writing `${TOKEN}` back could silently load another value.
/// - Any other secret value is `***`.
pub fn export_yaml(config: &GatewayConfig) -> String {
    let mut tree = schema_tree(config);
    let mut references_by_path: BTreeMap<&str, Vec<&VariableReference>> = BTreeMap::new();
    for reference in config.variable_references() {
        references_by_path
            .entry(reference.path.as_str())
            .or_default()
            .push(reference);
    }

    // References are put in after serializing, so that serde_yaml cannot quote them its own
    // way; until then a placeholder that occurs nowhere else holds their place.
    let plain = serde_yaml::to_string(&tree).unwrap_or_default();
    let mut placeholder_prefix = String::from("mcpgw_reference_");
    while plain.contains(&placeholder_prefix) {
        placeholder_prefix.push('z');
    }
    let mut written: Vec<String> = Vec::new();
    mask_secrets(
        &mut tree,
        config.variable_references(),
        &mut |path, value| {
            let Some(text) = references_by_path
                .get(path)
                .and_then(|references| reference_text(value, references))
            else {
                return false;
            };
            *value = Value::String(placeholder(&placeholder_prefix, written.len()));
            written.push(text);
            true
        },
    );
    escape_references(&mut tree);

    let mut yaml = serde_yaml::to_string(&tree).unwrap_or_default();
    for (index, text) in written.iter().enumerate() {
        yaml = yaml.replacen(&placeholder(&placeholder_prefix, index), text, 1);
    }
    yaml
}

/// The terminating `x` keeps placeholder 1 from matching the start of placeholder 10.
fn placeholder(prefix: &str, index: usize) -> String {
    format!("{prefix}{index}x")
}

/// The YAML text that expands to `value` again from `references` (the references at its path,
/// in text order): each reference is found in the value by what it expanded to, and written
/// back as it was written (`${NAME}` or `${NAME:-default}`), the text around them as literals.
/// `None` when the value cannot be rebuilt so (a reference's text is not where it should be,
/// or a default holds characters that mean something else inside double quotes).
fn reference_text(value: &Value, references: &[&VariableReference]) -> Option<String> {
    // A default is written into the text as it is; inside the double quotes this writes, these
    // characters would mean something else than where the operator wrote them.
    if references.iter().any(|reference| {
        reference.default.as_deref().is_some_and(|default| {
            default.contains(['"', '\\', '$']) || default.chars().any(char::is_control)
        })
    }) {
        return None;
    }
    let written_reference = |reference: &VariableReference| match &reference.default {
        Some(default) => format!("${{{}:-{default}}}", reference.name),
        None => format!("${{{}}}", reference.name),
    };
    match value {
        Value::String(text) => {
            // Any split of the value around the expansions expands back to the same text.
            let mut written = String::from('"');
            let mut rest = text.as_str();
            for reference in references {
                let at = rest.find(reference.expanded.as_str())?;
                written.push_str(&double_quoted_literal(&rest[..at]));
                written.push_str(&written_reference(reference));
                rest = &rest[at + reference.expanded.len()..];
            }
            written.push_str(&double_quoted_literal(rest));
            written.push('"');
            Some(written)
        }
        Value::Number(_) | Value::Bool(_) => match references {
            [reference] if scalar_text(value) == reference.expanded => {
                Some(written_reference(reference))
            }
            _ => None,
        },
        _ => None,
    }
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::Number(number) => number.to_string(),
        Value::Bool(flag) => flag.to_string(),
        _ => String::new(),
    }
}

/// Literal text for inside double quotes; `$` is written as the escape `\x24` so that it can
/// never join a following reference into a `$${` escape.
fn double_quoted_literal(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '$' => escaped.push_str("\\x24"),
            '\n' => escaped.push_str("\\n"),
            '\r' => escaped.push_str("\\r"),
            '\t' => escaped.push_str("\\t"),
            control if control.is_control() => {
                escaped.push_str(&format!("\\u{:04x}", u32::from(control)));
            }
            other => escaped.push(other),
        }
    }
    escaped
}

/// Writes every literal `${` in keys and values as `$${`, which loading turns back into `${`.
fn escape_references(value: &mut Value) {
    match value {
        Value::String(text) => {
            if text.contains("${") {
                *text = text.replace("${", "$${");
            }
        }
        Value::Sequence(items) => items.iter_mut().for_each(escape_references),
        Value::Mapping(mapping) => {
            let entries = std::mem::take(mapping);
            for (mut key, mut child) in entries {
                escape_references(&mut key);
                escape_references(&mut child);
                mapping.insert(key, child);
            }
        }
        Value::Tagged(tagged) => escape_references(&mut tagged.value),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}
