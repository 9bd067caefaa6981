//! "Did you mean" suggestions, and the translation of serde's messages into the crate's own
//! wording and error kinds.

use crate::error::ConfigErrorKind;

pub(crate) use mcpgw_core::suggest::nearest;

/// `a`, `b` and `c`.
pub(crate) fn quoted_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| format!("`{item}`")).collect();
    match quoted.as_slice() {
        [] => String::new(),
        [only] => only.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// A serde error message in the crate's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DescribedError {
    pub(crate) kind: ConfigErrorKind,
    pub(crate) message: String,
    /// A key the message is about that the error's path does not name yet (a missing or
    /// repeated key is reported at its mapping).
    pub(crate) key: Option<String>,
}

/// Rewrites serde's messages: unknown keys and values get a suggestion, Rust type names become
/// words, and every message gets a kind.
pub(crate) fn describe_serde_message(message: &str) -> DescribedError {
    let quoted = backticked(message);
    let described = |kind, message: String, key: Option<&str>| DescribedError {
        kind,
        message,
        key: key.map(str::to_owned),
    };
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let key = rest.split('`').next().unwrap_or_default();
        let valid: Vec<&str> = quoted.iter().skip(1).copied().collect();
        let advice = match nearest(key, valid.iter().copied()) {
            Some(suggestion) => format!("did you mean `{suggestion}`?"),
            None if valid.is_empty() => "this mapping takes no keys".to_owned(),
            None => format!("valid keys are {}", quoted_list(&valid)),
        };
        return described(
            ConfigErrorKind::UnknownKey,
            format!("unknown key `{key}`; {advice}"),
            Some(key),
        );
    }
    if let Some(rest) = message.strip_prefix("unknown variant `") {
        let value = rest.split('`').next().unwrap_or_default();
        let valid: Vec<&str> = quoted.iter().skip(1).copied().collect();
        let advice = match nearest(value, valid.iter().copied()) {
            Some(suggestion) => format!("did you mean `{suggestion}`?"),
            None => format!("expected {}", quoted_list(&valid)),
        };
        return described(
            ConfigErrorKind::InvalidValue,
            format!("unknown value `{value}`; {advice}"),
            None,
        );
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let key = rest.split('`').next().unwrap_or_default();
        return described(
            ConfigErrorKind::MissingKey,
            format!("missing key `{key}`; add it"),
            None,
        );
    }
    for prefix in ["duplicate field `", "duplicate key `"] {
        if let Some(rest) = message.strip_prefix(prefix) {
            let key = rest.split('`').next().unwrap_or_default();
            return described(
                ConfigErrorKind::DuplicateKey,
                format!("duplicate key `{key}`; each key may appear once in a mapping"),
                Some(key),
            );
        }
    }
    if message.starts_with("invalid type: ")
        || message.starts_with("invalid value: ")
        || message.starts_with("invalid length ")
    {
        return described(ConfigErrorKind::WrongType, plain_type_names(message), None);
    }
    described(
        ConfigErrorKind::Syntax,
        format!("{message}; check the indentation and quoting around this line"),
        None,
    )
}

fn plain_type_names(message: &str) -> String {
    let mut text = message.to_owned();
    for (rust, words) in [
        ("expected u64", "expected a whole number of 0 or more"),
        ("expected u32", "expected a whole number of 0 or more"),
        ("expected u16", "expected a whole number of 0 or more"),
        ("expected u8", "expected a whole number of 0 or more"),
        ("expected i64", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected a sequence", "expected a list"),
        ("expected a map", "expected a mapping"),
        ("unit value", "an empty value"),
    ] {
        text = replace_whole_words(&text, rust, words);
    }
    text
}

/// Replaces `from` where it is not part of a longer word (`expected a map`, not
/// `expected a mapping`).
fn replace_whole_words(text: &str, from: &str, to: &str) -> String {
    let mut replaced = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(from) {
        let end = start + from.len();
        let continues_word = rest[end..]
            .chars()
            .next()
            .is_some_and(|next| next.is_alphanumeric() || next == '_');
        replaced.push_str(&rest[..start]);
        replaced.push_str(if continues_word { from } else { to });
        rest = &rest[end..];
    }
    replaced.push_str(rest);
    replaced
}

fn backticked(message: &str) -> Vec<&str> {
    message.split('`').skip(1).step_by(2).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_get_a_suggestion_or_the_valid_keys() {
        let described = describe_serde_message(
            "unknown field `comand`, expected one of `mode`, `command`, `env`",
        );
        assert_eq!(described.kind, ConfigErrorKind::UnknownKey);
        assert_eq!(
            described.message,
            "unknown key `comand`; did you mean `command`?"
        );
        assert_eq!(described.key.as_deref(), Some("comand"));
        let described = describe_serde_message("unknown field `xyz`, expected `watch`");
        assert_eq!(
            described.message,
            "unknown key `xyz`; valid keys are `watch`"
        );
        let described =
            describe_serde_message("unknown field `xyz`, expected one of `a1`, `b2`, `c3`");
        assert_eq!(
            described.message,
            "unknown key `xyz`; valid keys are `a1`, `b2` or `c3`"
        );
    }

    #[test]
    fn unknown_values_get_a_suggestion() {
        let described = describe_serde_message(
            "unknown variant `subproces`, expected one of `subprocess`, `docker`, `remote`, `group`",
        );
        assert_eq!(described.kind, ConfigErrorKind::InvalidValue);
        assert_eq!(
            described.message,
            "unknown value `subproces`; did you mean `subprocess`?"
        );
        let described =
            describe_serde_message("unknown variant `x`, expected `prefixed` or `bare`");
        assert_eq!(
            described.message,
            "unknown value `x`; expected `prefixed` or `bare`"
        );
    }

    #[test]
    fn type_errors_use_words() {
        let described = describe_serde_message("invalid type: string \"abc\", expected u64");
        assert_eq!(described.kind, ConfigErrorKind::WrongType);
        assert_eq!(
            described.message,
            "invalid type: string \"abc\", expected a whole number of 0 or more"
        );
        let described = describe_serde_message("invalid type: sequence, expected a map");
        assert_eq!(
            described.message,
            "invalid type: sequence, expected a mapping"
        );
        let described =
            describe_serde_message("invalid type: string, expected a mapping of things");
        assert_eq!(
            described.message,
            "invalid type: string, expected a mapping of things"
        );
        let described = describe_serde_message("did not find expected key");
        assert_eq!(described.kind, ConfigErrorKind::Syntax);
        assert_eq!(
            described.message,
            "did not find expected key; check the indentation and quoting around this line"
        );
        assert_eq!(
            describe_serde_message("missing field `id`").message,
            "missing key `id`; add it"
        );
    }
}
