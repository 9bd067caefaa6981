//! A configuration as it may be shown: secrets replaced by a mask.
//!
//! What counts as a secret is decided by place and by name, because a value cannot tell: every
//! value of a server's `env` and `headers`; in `auth`, values whose key names a secret; in a
//! discovery source's `config` and a registered mode's `settings`, everything under a key that
//! names a secret; the password of a
//! URL's user information; a command-line argument that follows or carries a secret-named flag
//! (`--token x`, `--api-key=x`); and any value that a `${VAR}` reference with a secret-looking
//! name put there. When in doubt the value is masked: showing too little is harmless, showing a
//! credential is not.

use std::collections::BTreeSet;

use serde_yaml::Value;

use crate::expand::VariableReference;
use crate::schema::GatewayConfig;

/// What a secret value is shown as.
pub const SECRET_MASK: &str = "***";

/// `config` as JSON with every secret replaced by [`SECRET_MASK`].
///
/// The shape is the schema's own (as exported), without the parser's bookkeeping (variable
/// references, warnings). Booleans and nulls are never secrets and are kept; any other secret
/// value, strings, numbers and whole subtrees alike, becomes the string `"***"`.
pub fn sanitized(config: &GatewayConfig) -> serde_json::Value {
    let mut tree = schema_tree(config);
    mask_secrets(&mut tree, config.variable_references(), &mut |_, _| false);
    serde_json::to_value(&tree).unwrap_or_else(|_| serde_json::Value::Object(Default::default()))
}

/// One server definition (an `mcp_servers` entry, as JSON: a REST body, a discovered
/// candidate) with its secrets masked by the rules of [`sanitized`].
pub fn sanitized_definition(
    definition: &serde_json::Map<String, serde_json::Value>,
) -> serde_json::Map<String, serde_json::Value> {
    masked_in_place(definition, &["mcp_servers", "server"])
}

/// A registered launch mode's settings (a server's `settings`) with their secrets masked by the
/// rules of [`sanitized`].
pub fn sanitized_launch_settings(
    settings: &serde_json::Map<String, serde_json::Value>,
) -> serde_json::Map<String, serde_json::Value> {
    masked_in_place(settings, &["mcp_servers", "server", "settings"])
}

/// A discovery source's settings with their secrets masked by the rules of [`sanitized`].
pub fn sanitized_source_settings(
    settings: &serde_json::Map<String, serde_json::Value>,
) -> serde_json::Map<String, serde_json::Value> {
    masked_in_place(settings, &["discovery", "sources", "[0]", "config"])
}

/// Masks `node` as if it stood at `place` in a configuration (a `[0]` step is a sequence).
fn masked_in_place(
    node: &serde_json::Map<String, serde_json::Value>,
    place: &[&str],
) -> serde_json::Map<String, serde_json::Value> {
    let mut tree = serde_yaml::to_value(node).unwrap_or(Value::Mapping(Default::default()));
    for step in place.iter().rev() {
        tree = if *step == "[0]" {
            Value::Sequence(vec![tree])
        } else {
            let mut mapping = serde_yaml::Mapping::new();
            mapping.insert(Value::String((*step).to_owned()), tree);
            Value::Mapping(mapping)
        };
    }
    mask_secrets(&mut tree, &[], &mut |_, _| false);
    for step in place {
        tree = match (tree, *step) {
            (Value::Sequence(mut items), "[0]") if !items.is_empty() => items.swap_remove(0),
            (Value::Mapping(mut mapping), key) => mapping
                .remove(key)
                .unwrap_or(Value::Mapping(Default::default())),
            _ => Value::Mapping(Default::default()),
        };
    }
    match serde_json::to_value(&tree) {
        Ok(serde_json::Value::Object(masked)) => masked,
        _ => serde_json::Map::new(),
    }
}

/// The shortest value [`redact_secrets`] looks for: shorter ones would mask ordinary words
/// and numbers all over a text, and are no secret worth the name.
pub const MIN_REDACTED_LENGTH: usize = 4;

/// Every value of `config` that [`sanitized`] hides, whole: what a text derived from the
/// configuration file (a diff, a log line) must not show.
pub fn secret_values(config: &GatewayConfig) -> Vec<String> {
    fn collect(original: &serde_json::Value, shown: &serde_json::Value, into: &mut Vec<String>) {
        match (original, shown) {
            (serde_json::Value::Object(original), serde_json::Value::Object(shown)) => {
                for (key, value) in original {
                    if let Some(shown_value) = shown.get(key) {
                        collect(value, shown_value, into);
                    }
                }
            }
            (serde_json::Value::Array(original), serde_json::Value::Array(shown)) => {
                for (value, shown_value) in original.iter().zip(shown) {
                    collect(value, shown_value, into);
                }
            }
            (serde_json::Value::String(original), serde_json::Value::String(shown))
                if original != shown =>
            {
                into.push(original.clone());
            }
            // A number under a secret-looking key is hidden too, as text.
            (serde_json::Value::Number(original), serde_json::Value::String(_)) => {
                into.push(original.to_string());
            }
            _ => {}
        }
    }
    let original = serde_json::to_value(schema_tree(config)).unwrap_or_default();
    let mut secrets = Vec::new();
    collect(&original, &sanitized(config), &mut secrets);
    secrets.sort_unstable();
    secrets.dedup();
    secrets
}

/// `text` with every occurrence of each of `secrets` (at least [`MIN_REDACTED_LENGTH`] long)
/// replaced by [`SECRET_MASK`], the longest first so that a secret containing another is
/// hidden whole.
pub fn redact_secrets(text: &str, secrets: &[String]) -> String {
    let mut ordered: Vec<&String> = secrets
        .iter()
        .filter(|secret| secret.chars().count() >= MIN_REDACTED_LENGTH)
        .collect();
    ordered.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
    let mut redacted = text.to_owned();
    for secret in ordered {
        if redacted.contains(secret.as_str()) {
            redacted = redacted.replace(secret.as_str(), SECRET_MASK);
        }
    }
    redacted
}

/// The configuration as a YAML tree, keys in the schema's order (`mcp_servers` first).
pub(crate) fn schema_tree(config: &GatewayConfig) -> Value {
    // The schema has string keys and finite numbers only, so it always serializes.
    serde_yaml::to_value(config).unwrap_or(Value::Mapping(Default::default()))
}

/// One step of the path from the root of the tree to a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    Key(String),
    Index(usize),
}

/// Renders a path the way [`VariableReference::path`] does: `mcp_servers.api.command[1]`.
pub(crate) fn render_path(path: &[Step]) -> String {
    let mut rendered = String::new();
    for step in path {
        match step {
            Step::Key(key) => {
                if !rendered.is_empty() {
                    rendered.push('.');
                }
                rendered.push_str(key);
            }
            Step::Index(index) => rendered.push_str(&format!("[{index}]")),
        }
    }
    rendered
}

/// Replaces every secret in `tree` (a serialized [`GatewayConfig`]) by [`SECRET_MASK`].
///
/// `take_leaf` sees each scalar first, with its rendered path, and answers whether it dealt with
/// the value itself (the exporter writes references back this way); a leaf it took is left
/// alone.
pub(crate) fn mask_secrets(
    tree: &mut Value,
    references: &[VariableReference],
    take_leaf: &mut dyn FnMut(&str, &mut Value) -> bool,
) {
    let secret_reference_paths: BTreeSet<&str> = references
        .iter()
        .filter(|reference| looks_secret(&reference.name))
        .map(|reference| reference.path.as_str())
        .collect();
    let mut masker = Masker {
        secret_reference_paths,
        take_leaf,
    };
    masker.visit(tree, &mut Vec::new(), false);
}

struct Masker<'references, 'hook> {
    secret_reference_paths: BTreeSet<&'references str>,
    take_leaf: &'hook mut dyn FnMut(&str, &mut Value) -> bool,
}

impl Masker<'_, '_> {
    fn visit(&mut self, value: &mut Value, path: &mut Vec<Step>, under_secret: bool) {
        let rendered = render_path(path);
        let secret = under_secret
            || secret_by_place(path)
            || self.secret_reference_paths.contains(rendered.as_str());
        match value {
            Value::Mapping(mapping) => {
                for (key, child) in mapping.iter_mut() {
                    let key = match key {
                        Value::String(key) => key.clone(),
                        other => serde_yaml::to_string(other)
                            .unwrap_or_default()
                            .trim_end()
                            .to_owned(),
                    };
                    path.push(Step::Key(key));
                    self.visit(child, path, secret);
                    path.pop();
                }
            }
            Value::Sequence(items) => {
                let flags_before = if is_command_line(path) {
                    mask_secret_flags(items)
                } else {
                    vec![false; items.len()]
                };
                for (index, item) in items.iter_mut().enumerate() {
                    path.push(Step::Index(index));
                    self.visit(item, path, secret || flags_before[index]);
                    path.pop();
                }
            }
            Value::Tagged(tagged) => self.visit(&mut tagged.value, path, secret),
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {
                if (self.take_leaf)(&rendered, value) {
                    return;
                }
                if secret && matches!(value, Value::Number(_) | Value::String(_)) {
                    *value = Value::String(SECRET_MASK.to_owned());
                } else if let Value::String(text) = value
                    && let Some(masked) = mask_url_password(text)
                {
                    *text = masked;
                }
            }
        }
    }
}

/// Whether the node at `path` is a secret because of where it sits in the schema.
fn secret_by_place(path: &[Step]) -> bool {
    let keys: Vec<Option<&str>> = path
        .iter()
        .map(|step| match step {
            Step::Key(key) => Some(key.as_str()),
            Step::Index(_) => None,
        })
        .collect();
    match keys.as_slice() {
        [Some("mcp_servers"), Some(_), Some("env" | "headers"), ..] => true,
        [Some("telemetry"), Some("traces"), Some("headers"), ..] => true,
        [Some("audit"), Some("sinks"), None, Some("headers"), ..] => true,
        [
            Some("mcp_servers"),
            Some(_),
            Some("token_exchange"),
            Some("client_secret"),
        ] => true,
        // A registered mode's settings: like a discovery source's, by the names of the keys.
        [Some("mcp_servers"), Some(_), Some("settings"), rest @ ..] => rest
            .iter()
            .any(|key| key.is_some_and(|key| looks_secret(key) || looks_secret_setting(key))),
        [Some("console"), Some("sso"), Some("client_secret")] => true,
        // `api_key` is the section that configures API keys, not a key.
        [Some("auth"), .., Some(key)] => *key != "api_key" && looks_secret_setting(key),
        [
            Some("discovery"),
            Some("sources"),
            None,
            Some("config"),
            rest @ ..,
        ] => rest
            .iter()
            .any(|key| key.is_some_and(|key| looks_secret(key) || looks_secret_setting(key))),
        _ => false,
    }
}

fn is_command_line(path: &[Step]) -> bool {
    matches!(
        path,
        [Step::Key(section), Step::Key(_), Step::Key(list)]
            if section == "mcp_servers" && (list == "command" || list == "args")
    )
}

/// Masks `--flag=value` arguments of secret-named flags in place, and answers which items follow
/// a bare secret-named flag (`--token value`), for the caller to mask.
fn mask_secret_flags(items: &mut [Value]) -> Vec<bool> {
    let mut follows_secret_flag = vec![false; items.len()];
    for (index, item) in items.iter_mut().enumerate() {
        let Value::String(argument) = item else {
            continue;
        };
        let Some(flag) = argument.strip_prefix('-') else {
            continue;
        };
        let flag = flag.trim_start_matches('-');
        match flag.split_once('=') {
            Some((name, _)) if looks_secret(name) => {
                let prefix_length = argument.len() - flag.len() + name.len() + 1;
                argument.truncate(prefix_length);
                argument.push_str(SECRET_MASK);
            }
            Some(_) => {}
            None if looks_secret(flag) => {
                if let Some(next) = follows_secret_flag.get_mut(index + 1) {
                    *next = true;
                }
            }
            None => {}
        }
    }
    follows_secret_flag
}

/// `scheme://user:password@host/...` with the password masked, when the text is such a URL.
fn mask_url_password(text: &str) -> Option<String> {
    let authority_start = text.find("://")? + 3;
    let authority_length = text[authority_start..]
        .find(['/', '?', '#'])
        .unwrap_or(text.len() - authority_start);
    let authority = &text[authority_start..authority_start + authority_length];
    let user_information = &authority[..authority.rfind('@')?];
    let password_start = authority_start + user_information.find(':')? + 1;
    let password_end = authority_start + user_information.len();
    if password_start == password_end {
        return None;
    }
    Some(format!(
        "{}{SECRET_MASK}{}",
        &text[..password_start],
        &text[password_end..]
    ))
}

/// Whether a variable, flag or source setting name suggests a secret (`API_TOKEN`,
/// `db-password`, `client_secret`, `private_key`, `auth_header`).
pub(crate) fn looks_secret(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    looks_secret_setting(&name)
        || ["auth", "header", "key"]
            .iter()
            .any(|word| name.contains(word))
}

/// The narrower test for the `auth` section, where every key is about authentication and
/// `header_name` names a header rather than holding one.
fn looks_secret_setting(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "token",
        "secret",
        "passw",
        "pwd",
        "credential",
        "private",
        "cookie",
        "session",
        "signing",
    ]
    .iter()
    .any(|word| name.contains(word))
        || name.ends_with("key")
        || name.contains("key_")
}
