//! "Did you mean" suggestions, and the translation of serde's messages into the crate's own
//! wording and error kinds.

use crate::error::ConfigErrorKind;

/// The optimal string alignment distance: insertions, deletions, substitutions and swaps of two
/// neighbours each cost 1, so that `comamnd` is one step from `command`.
pub(crate) fn edit_distance(left: &str, right: &str) -> usize {
    let left: Vec<char> = left.chars().collect();
    let right: Vec<char> = right.chars().collect();
    let width = right.len() + 1;
    let mut table = vec![0usize; (left.len() + 1) * width];
    for (row, cell) in table.iter_mut().step_by(width).enumerate() {
        *cell = row;
    }
    for (column, cell) in table.iter_mut().take(width).enumerate() {
        *cell = column;
    }
    for row in 1..=left.len() {
        for column in 1..=right.len() {
            let substitution = usize::from(left[row - 1] != right[column - 1]);
            let mut best = (table[(row - 1) * width + column] + 1)
                .min(table[row * width + column - 1] + 1)
                .min(table[(row - 1) * width + column - 1] + substitution);
            if row > 1
                && column > 1
                && left[row - 1] == right[column - 2]
                && left[row - 2] == right[column - 1]
            {
                best = best.min(table[(row - 2) * width + column - 2] + 1);
            }
            table[row * width + column] = best;
        }
    }
    table[left.len() * width + right.len()]
}

/// The candidate closest to `word`, if one is close enough to be a plausible typo: a third of
/// the word's length (at least one edit), a different case, or a prefix (`idle_ttl`).
pub(crate) fn nearest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let lowered = word.to_lowercase();
    let limit = (word.chars().count().max(3)) / 3;
    let mut best: Option<(usize, &'a str)> = None;
    for candidate in candidates {
        if candidate == word {
            continue;
        }
        let candidate_lowered = candidate.to_lowercase();
        let distance = if candidate_lowered == lowered {
            0
        } else {
            let distance = edit_distance(&lowered, &candidate_lowered);
            let is_prefix = lowered.len() >= 3
                && (candidate_lowered.starts_with(&lowered)
                    || lowered.starts_with(&candidate_lowered));
            if distance <= limit {
                distance
            } else if is_prefix {
                limit + 1
            } else {
                continue;
            }
        };
        if best.is_none_or(|(best_distance, _)| distance < best_distance) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

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
    fn edit_distance_counts_typos() {
        for (left, right, distance) in [
            ("", "", 0),
            ("command", "command", 0),
            ("comand", "command", 1),
            ("comamnd", "command", 1),
            ("cmomand", "command", 1),
            ("kitten", "sitting", 3),
            ("", "abc", 3),
            ("abc", "", 3),
        ] {
            assert_eq!(edit_distance(left, right), distance, "{left} / {right}");
        }
    }

    #[test]
    fn nearest_suggests_only_plausible_typos() {
        let keys = [
            "mode",
            "command",
            "env",
            "idle_ttl_s",
            "health_check_interval_s",
            "endpoint",
        ];
        assert_eq!(nearest("comand", keys), Some("command"));
        assert_eq!(nearest("Command", keys), Some("command"));
        assert_eq!(nearest("idle_ttl", keys), Some("idle_ttl_s"));
        assert_eq!(nearest("mdoe", keys), Some("mode"));
        assert_eq!(nearest("envs", keys), Some("env"));
        assert_eq!(nearest("zzzzzz", keys), None);
        assert_eq!(nearest("url", keys), None);
    }

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
