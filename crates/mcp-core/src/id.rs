//! Server identifiers.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

/// The identifier of a managed MCP server (and, later, of a group: both share one namespace).
///
/// It matches `^[A-Za-z0-9_-]{1,64}$` and never contains `__`, because `__` separates the server
/// id from the tool name in aggregated tool names (`{server}__{tool}`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct ServerId(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("id must not be empty")]
    Empty,
    #[error("id `{0}` is longer than 64 characters")]
    TooLong(String),
    #[error("id `{0}` may contain only letters, digits, `_` and `-`")]
    InvalidCharacter(String),
    #[error("id `{0}` must not contain `__`, which separates server ids from tool names")]
    DoubleUnderscore(String),
}

impl ServerId {
    pub const MAX_LEN: usize = 64;

    pub fn parse(raw: &str) -> Result<Self, IdError> {
        if raw.is_empty() {
            return Err(IdError::Empty);
        }
        if raw.len() > Self::MAX_LEN {
            return Err(IdError::TooLong(bounded_for_message(raw)));
        }
        if !raw
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
        {
            return Err(IdError::InvalidCharacter(bounded_for_message(raw)));
        }
        if raw.contains("__") {
            return Err(IdError::DoubleUnderscore(raw.to_owned()));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Caller input as it may appear in an error message: at most 80 characters, with `...` when
/// cut, so hostile input cannot blow up messages or logs, and with control characters escaped
/// (`\r`, `\n`, `\u{0}`), so that a quoted value never carries a line break into a message, a
/// log line or a client's display.
pub fn bounded_for_message(raw: &str) -> String {
    let mut bounded = String::with_capacity(raw.len().min(80));
    let mut taken = 0;
    for character in raw.chars().take(80) {
        taken += character.len_utf8();
        if character.is_control() {
            bounded.extend(character.escape_default());
        } else {
            bounded.push(character);
        }
    }
    if taken < raw.len() {
        bounded.push_str("...");
    }
    bounded
}

impl fmt::Display for ServerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for ServerId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for ServerId {
    type Err = IdError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        Self::parse(raw)
    }
}

impl<'de> Deserialize<'de> for ServerId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_alphabet() {
        for good in [
            "math",
            "a",
            "A-b_c-9",
            &"x".repeat(64),
            "under_score",
            "-lead",
        ] {
            assert_eq!(ServerId::parse(good).unwrap().as_str(), good);
        }
    }

    #[test]
    fn rejects_everything_else_with_a_reason() {
        assert_eq!(ServerId::parse(""), Err(IdError::Empty));
        assert!(matches!(
            ServerId::parse(&"x".repeat(65)),
            Err(IdError::TooLong(_))
        ));
        for bad in ["a b", "a/b", "../etc", "a.b", "ünï", "a\nb", "a:b"] {
            assert!(
                matches!(ServerId::parse(bad), Err(IdError::InvalidCharacter(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            ServerId::parse("a__b"),
            Err(IdError::DoubleUnderscore(_))
        ));
    }

    #[test]
    fn quoted_input_is_cut_and_its_control_characters_escaped() {
        assert_eq!(bounded_for_message("plain"), "plain");
        assert_eq!(
            bounded_for_message("a\r\nb\u{0}c\td\u{1b}"),
            "a\\r\\nb\\u{0}c\\td\\u{1b}"
        );
        // Printable non-ASCII text is quoted as it is.
        assert_eq!(bounded_for_message("ünï €"), "ünï €");
        let long = "é".repeat(100);
        assert_eq!(bounded_for_message(&long), format!("{}...", "é".repeat(80)));
        assert_eq!(bounded_for_message(&"x".repeat(80)), "x".repeat(80));
        let cut = bounded_for_message(&"\n".repeat(200));
        assert_eq!(cut, format!("{}...", "\\n".repeat(80)));
    }

    #[test]
    fn an_id_error_never_carries_a_line_break() {
        let error = ServerId::parse("a\r\nX-Injected: 1").unwrap_err();
        let message = error.to_string();
        assert!(
            !message.contains('\r') && !message.contains('\n'),
            "{message}"
        );
        assert!(message.contains("a\\r\\nX-Injected: 1"), "{message}");
    }
}
