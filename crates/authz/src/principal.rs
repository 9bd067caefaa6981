//! Principals (who asks) and principal patterns (whom a policy names).

use std::fmt;

use mcpgw_core::bounded_for_message;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest principal name accepted, in bytes. Subjects of identity providers are far
/// shorter; the bound keeps hostile input out of stores and logs.
pub const PRINCIPAL_NAME_MAX_BYTES: usize = 256;

/// The name of the principal that a request without credentials gets when anonymous access is
/// allowed: `user:anonymous`.
pub const ANONYMOUS_USER_NAME: &str = "anonymous";

/// What a principal is. The kind is the part before the first `:`.
///
/// Variants are declared in the alphabetical order of their names, so that principals sort as
/// their strings do (as a store's `ORDER BY` would).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PrincipalKind {
    /// A group of people (`group:ops`); identity providers report group membership.
    Group,
    /// A machine client (`service:ci`).
    Service,
    /// A person (`user:alice`), including `user:anonymous`.
    User,
}

impl PrincipalKind {
    pub const ALL: [PrincipalKind; 3] = [
        PrincipalKind::Group,
        PrincipalKind::Service,
        PrincipalKind::User,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PrincipalKind::User => "user",
            PrincipalKind::Group => "group",
            PrincipalKind::Service => "service",
        }
    }

    fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == raw)
    }
}

impl fmt::Display for PrincipalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a string is not a principal (or not a principal pattern).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PrincipalError {
    #[error("principal must not be empty; write it as user:<name>, group:<name> or service:<name>")]
    Empty,
    #[error("principal `{0}` has no kind; write it as user:{0}, group:{0} or service:{0}")]
    MissingKind(String),
    #[error(
        "principal `{principal}` has the unknown kind `{kind}`; the kinds are user, group and \
         service (lowercase)"
    )]
    UnknownKind { principal: String, kind: String },
    #[error("principal `{0}` has an empty name after the `:`")]
    EmptyName(String),
    #[error("principal `{0}` has a name longer than 256 bytes")]
    TooLong(String),
    #[error("principal `{0}` contains a control character")]
    ControlCharacter(String),
    #[error("principal `{0}` starts or ends with whitespace; remove it")]
    SurroundingWhitespace(String),
    #[error(
        "`{0}` names no single principal: `*` is only for policy patterns (`*`, `user:*`, \
         `group:*`, `service:*`)"
    )]
    Wildcard(String),
    #[error(
        "pattern `{0}` is not supported: `*` must be the whole pattern (`*`) or the whole name \
         (`service:*`); prefixes such as `user:al*` are not"
    )]
    PartialWildcard(String),
}

/// Who asks: `user:<name>`, `group:<name>` or `service:<name>`.
///
/// Names are case-sensitive and may hold any character but control characters (identity
/// providers use e-mail addresses, `auth0|123`, `/org/team` or `Domain Users`); they never
/// contain `*`, which only patterns use, and never start or end with whitespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Principal {
    kind: PrincipalKind,
    name: String,
}

impl Principal {
    /// Parses `kind:name`.
    pub fn parse(raw: &str) -> Result<Self, PrincipalError> {
        if raw == "*" {
            return Err(PrincipalError::Wildcard(raw.to_owned()));
        }
        let (kind, name) = split_kind(raw)?;
        if name.contains('*') {
            return Err(if name == "*" {
                PrincipalError::Wildcard(bounded_for_message(raw))
            } else {
                PrincipalError::PartialWildcard(bounded_for_message(raw))
            });
        }
        Ok(Self {
            kind,
            name: name.to_owned(),
        })
    }

    /// A principal of `kind` named `name`, validated as [`Principal::parse`] would.
    pub fn new(kind: PrincipalKind, name: &str) -> Result<Self, PrincipalError> {
        Self::parse(&format!("{kind}:{name}"))
    }

    /// `user:anonymous`, the principal of requests without credentials when anonymous access is
    /// allowed. It holds only the roles assigned to it.
    pub fn anonymous() -> Self {
        Self {
            kind: PrincipalKind::User,
            name: ANONYMOUS_USER_NAME.to_owned(),
        }
    }

    /// `group:<name>`, as the groups claim of a token reports membership.
    pub fn group(name: &str) -> Result<Self, PrincipalError> {
        Self::new(PrincipalKind::Group, name)
    }

    pub fn kind(&self) -> PrincipalKind {
        self.kind
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn is_anonymous(&self) -> bool {
        self.kind == PrincipalKind::User && self.name == ANONYMOUS_USER_NAME
    }
}

/// Splits `kind:name` and checks everything but wildcards, which principals and patterns treat
/// differently.
fn split_kind(raw: &str) -> Result<(PrincipalKind, &str), PrincipalError> {
    if raw.is_empty() {
        return Err(PrincipalError::Empty);
    }
    if raw.chars().any(char::is_control) {
        return Err(PrincipalError::ControlCharacter(bounded_for_message(
            &raw.replace(char::is_control, "?"),
        )));
    }
    if raw.trim() != raw {
        return Err(PrincipalError::SurroundingWhitespace(bounded_for_message(
            raw,
        )));
    }
    let Some((kind, name)) = raw.split_once(':') else {
        return Err(PrincipalError::MissingKind(bounded_for_message(raw)));
    };
    let Some(kind) = PrincipalKind::parse(kind) else {
        return Err(PrincipalError::UnknownKind {
            principal: bounded_for_message(raw),
            kind: bounded_for_message(kind),
        });
    };
    if name.is_empty() {
        return Err(PrincipalError::EmptyName(bounded_for_message(raw)));
    }
    if name.trim() != name {
        return Err(PrincipalError::SurroundingWhitespace(bounded_for_message(
            raw,
        )));
    }
    if name.len() > PRINCIPAL_NAME_MAX_BYTES {
        return Err(PrincipalError::TooLong(bounded_for_message(raw)));
    }
    Ok((kind, name))
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.name)
    }
}

impl std::str::FromStr for Principal {
    type Err = PrincipalError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        Self::parse(raw)
    }
}

impl Serialize for Principal {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Principal {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

/// Whom a tool access policy names: `*` (every principal, anonymous included), `user:*`,
/// `group:*`, `service:*` (every principal of a kind), or one principal.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PrincipalPattern {
    Everyone,
    AnyOfKind(PrincipalKind),
    Exactly(Principal),
}

impl PrincipalPattern {
    pub fn parse(raw: &str) -> Result<Self, PrincipalError> {
        if raw == "*" {
            return Ok(PrincipalPattern::Everyone);
        }
        let (kind, name) = split_kind(raw)?;
        if name == "*" {
            return Ok(PrincipalPattern::AnyOfKind(kind));
        }
        Principal::parse(raw).map(PrincipalPattern::Exactly)
    }

    /// Whether the pattern names `principal` itself or one of the `groups` it belongs to
    /// (`group:<g>` principals).
    pub fn matches(&self, principal: &Principal, groups: &[Principal]) -> bool {
        match self {
            PrincipalPattern::Everyone => true,
            PrincipalPattern::AnyOfKind(kind) => {
                principal.kind() == *kind || (*kind == PrincipalKind::Group && !groups.is_empty())
            }
            PrincipalPattern::Exactly(named) => {
                named == principal || groups.iter().any(|group| group == named)
            }
        }
    }
}

impl fmt::Display for PrincipalPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrincipalPattern::Everyone => f.write_str("*"),
            PrincipalPattern::AnyOfKind(kind) => write!(f, "{kind}:*"),
            PrincipalPattern::Exactly(principal) => principal.fmt(f),
        }
    }
}

impl std::str::FromStr for PrincipalPattern {
    type Err = PrincipalError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        Self::parse(raw)
    }
}

impl Serialize for PrincipalPattern {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PrincipalPattern {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_kind_and_keeps_the_name_verbatim() {
        for (raw, kind, name) in [
            ("user:alice", PrincipalKind::User, "alice"),
            ("group:ops", PrincipalKind::Group, "ops"),
            ("service:ci-runner", PrincipalKind::Service, "ci-runner"),
            ("user:anonymous", PrincipalKind::User, "anonymous"),
            // Identity-provider subjects: e-mail, pipes, slashes, inner spaces, a `:` in the name.
            (
                "user:alice@example.com",
                PrincipalKind::User,
                "alice@example.com",
            ),
            ("user:auth0|5f1c", PrincipalKind::User, "auth0|5f1c"),
            ("group:/org/team", PrincipalKind::Group, "/org/team"),
            ("group:Domain Users", PrincipalKind::Group, "Domain Users"),
            ("service:urn:svc:1", PrincipalKind::Service, "urn:svc:1"),
            ("user:Zoë", PrincipalKind::User, "Zoë"),
        ] {
            let principal = Principal::parse(raw).unwrap_or_else(|error| panic!("{raw}: {error}"));
            assert_eq!(principal.kind(), kind, "{raw}");
            assert_eq!(principal.name(), name, "{raw}");
            assert_eq!(principal.to_string(), raw);
        }
        assert!(Principal::parse("user:anonymous").unwrap().is_anonymous());
        assert_eq!(Principal::anonymous().to_string(), "user:anonymous");
        assert!(
            !Principal::parse("service:anonymous")
                .unwrap()
                .is_anonymous()
        );
    }

    #[test]
    fn refuses_malformed_principals_with_a_reason_each() {
        let long = format!("user:{}", "a".repeat(PRINCIPAL_NAME_MAX_BYTES + 1));
        type IsExpected = fn(&PrincipalError) -> bool;
        let cases: &[(&str, IsExpected)] = &[
            ("", |e| matches!(e, PrincipalError::Empty)),
            ("alice", |e| matches!(e, PrincipalError::MissingKind(_))),
            ("User:alice", |e| {
                matches!(e, PrincipalError::UnknownKind { .. })
            }),
            ("role:admin", |e| {
                matches!(e, PrincipalError::UnknownKind { .. })
            }),
            (":alice", |e| {
                matches!(e, PrincipalError::UnknownKind { .. })
            }),
            ("user:", |e| matches!(e, PrincipalError::EmptyName(_))),
            (&long, |e| matches!(e, PrincipalError::TooLong(_))),
            ("user:al\nice", |e| {
                matches!(e, PrincipalError::ControlCharacter(_))
            }),
            ("user:\u{0}", |e| {
                matches!(e, PrincipalError::ControlCharacter(_))
            }),
            (" user:alice", |e| {
                matches!(e, PrincipalError::SurroundingWhitespace(_))
            }),
            ("user: alice", |e| {
                matches!(e, PrincipalError::SurroundingWhitespace(_))
            }),
            ("user:alice ", |e| {
                matches!(e, PrincipalError::SurroundingWhitespace(_))
            }),
            ("*", |e| matches!(e, PrincipalError::Wildcard(_))),
            ("user:*", |e| matches!(e, PrincipalError::Wildcard(_))),
            ("user:al*", |e| {
                matches!(e, PrincipalError::PartialWildcard(_))
            }),
        ];
        for (raw, expected) in cases {
            let error = Principal::parse(raw).expect_err(raw);
            assert!(expected(&error), "{raw:?} gave {error:?}");
            let message = error.to_string();
            assert!(!message.ends_with('.'), "{message}");
            assert!(message.len() < 300, "messages stay bounded: {message}");
        }
    }

    #[test]
    fn error_messages_say_how_to_write_a_principal() {
        assert_eq!(
            Principal::parse("alice").unwrap_err().to_string(),
            "principal `alice` has no kind; write it as user:alice, group:alice or service:alice"
        );
        assert!(
            Principal::parse("User:alice")
                .unwrap_err()
                .to_string()
                .contains("the kinds are user, group and service (lowercase)")
        );
        // A hostile, huge input is cut in the message.
        let huge = format!("x{}", "y".repeat(10_000));
        assert!(Principal::parse(&huge).unwrap_err().to_string().len() < 400);
    }

    #[test]
    fn patterns_parse_wildcards_and_single_principals() {
        assert_eq!(PrincipalPattern::parse("*"), Ok(PrincipalPattern::Everyone));
        for kind in PrincipalKind::ALL {
            assert_eq!(
                PrincipalPattern::parse(&format!("{kind}:*")),
                Ok(PrincipalPattern::AnyOfKind(kind))
            );
        }
        assert_eq!(
            PrincipalPattern::parse("group:ops"),
            Ok(PrincipalPattern::Exactly(
                Principal::parse("group:ops").unwrap()
            ))
        );
        for pattern in ["*", "user:*", "group:ops", "service:ci"] {
            assert_eq!(
                PrincipalPattern::parse(pattern).unwrap().to_string(),
                pattern
            );
        }
        // Bad patterns: partial wildcards, wildcard kinds, no kind, empty.
        for bad in ["user:al*", "*:alice", "**", "alice", "", "user:"] {
            assert!(PrincipalPattern::parse(bad).is_err(), "{bad}");
        }
        assert!(matches!(
            PrincipalPattern::parse("user:al*"),
            Err(PrincipalError::PartialWildcard(_))
        ));
    }

    #[test]
    fn patterns_match_the_principal_or_its_groups() {
        let alice = Principal::parse("user:alice").unwrap();
        let ci = Principal::parse("service:ci").unwrap();
        let ops = Principal::parse("group:ops").unwrap();
        let alice_groups = [ops.clone()];
        let pattern = |raw: &str| PrincipalPattern::parse(raw).unwrap();

        // (pattern, principal, groups, matches)
        let table: &[(&str, &Principal, &[Principal], bool)] = &[
            ("*", &alice, &[], true),
            ("*", &Principal::anonymous(), &[], true),
            ("user:*", &alice, &[], true),
            ("user:*", &Principal::anonymous(), &[], true),
            ("user:*", &ci, &[], false),
            ("service:*", &ci, &[], true),
            ("service:*", &alice, &alice_groups, false),
            ("group:*", &alice, &alice_groups, true),
            ("group:*", &alice, &[], false),
            ("user:alice", &alice, &[], true),
            ("user:alice", &ci, &[], false),
            ("user:Alice", &alice, &[], false),
            ("group:ops", &alice, &alice_groups, true),
            ("group:ops", &alice, &[], false),
            ("group:dev", &alice, &alice_groups, false),
            // A group principal asking for itself (a key issued to a group).
            ("group:ops", &ops, &[], true),
        ];
        for (raw, principal, groups, expected) in table {
            assert_eq!(
                pattern(raw).matches(principal, groups),
                *expected,
                "{raw} against {principal} in {groups:?}"
            );
        }
    }

    #[test]
    fn principals_sort_as_their_strings_do() {
        let mut raw = vec![
            "user:bob",
            "service:ci",
            "group:ops",
            "user:alice",
            "group:dev",
        ];
        let mut parsed: Vec<Principal> = raw.iter().map(|p| Principal::parse(p).unwrap()).collect();
        raw.sort_unstable();
        parsed.sort();
        let rendered: Vec<String> = parsed.iter().map(ToString::to_string).collect();
        assert_eq!(rendered, raw);
    }

    #[test]
    fn principals_and_patterns_travel_as_strings() {
        let principal: Principal = serde_json::from_str("\"service:ci\"").unwrap();
        assert_eq!(serde_json::to_string(&principal).unwrap(), "\"service:ci\"");
        let error = serde_json::from_str::<Principal>("\"ci\"").unwrap_err();
        assert!(error.to_string().contains("has no kind"), "{error}");
        let pattern: PrincipalPattern = serde_json::from_str("\"service:*\"").unwrap();
        assert_eq!(serde_json::to_string(&pattern).unwrap(), "\"service:*\"");
    }
}
