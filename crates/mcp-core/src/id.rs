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
/// cut, so hostile input cannot blow up messages or logs.
pub fn bounded_for_message(raw: &str) -> String {
    let mut bounded: String = raw.chars().take(80).collect();
    if bounded.len() < raw.len() {
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
}
