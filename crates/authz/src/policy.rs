//! Tool access policies: who may use a server, a group or one tool, independent of roles.
//!
//! A policy lives at `{scope}/{target_id}`: `provider/<server_id>` (`mcp_server` is an alias of
//! `provider`), `group/<group_id>`, or `tool/<server_or_group_id>__<tool>`. It holds a deny list
//! and an allow list of principal patterns. Deny wins; a non-empty allow list admits only the
//! principals it names; an empty policy admits everyone. A call must be admitted by every
//! policy on its [`AccessPath`]: the tool's, the server's and, through a group, the group's.

use std::collections::HashSet;
use std::fmt;

use mcpgw_core::{ServerId, bounded_for_message};
use serde::{Serialize, Serializer};

use crate::decision::DenyReason;
use crate::error::AuthError;
use crate::principal::{Principal, PrincipalPattern};

/// The most patterns one list of a policy may hold.
pub const POLICY_LIST_MAX_LEN: usize = 1000;
/// The longest tool name a policy may name, in bytes.
pub const TOOL_NAME_MAX_BYTES: usize = 256;
/// What separates a server or group id from a tool name in a tool's target (`math__add`).
pub const TOOL_NAME_SEPARATOR: &str = "__";

/// What a policy is attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PolicyScope {
    /// One MCP server, by id (`provider`, alias `mcp_server`).
    Provider,
    /// One group, by id.
    Group,
    /// One tool of a server or group, as `{id}__{tool}`.
    Tool,
}

impl PolicyScope {
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "provider" | "mcp_server" => Some(PolicyScope::Provider),
            "group" => Some(PolicyScope::Group),
            "tool" => Some(PolicyScope::Tool),
            _ => None,
        }
    }

    /// The canonical name (`provider` for both spellings).
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyScope::Provider => "provider",
            PolicyScope::Group => "group",
            PolicyScope::Tool => "tool",
        }
    }
}

impl fmt::Display for PolicyScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a policy lives: `{scope}/{target_id}`, always with the canonical scope name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PolicyAddress {
    scope: PolicyScope,
    target: String,
}

impl PolicyAddress {
    /// Parses the two path segments of `/api/auth/policies/{scope}/{target_id}`.
    pub fn parse(scope: &str, target_id: &str) -> Result<Self, AuthError> {
        let invalid = |problem: String| AuthError::InvalidPolicy {
            address: bounded_for_message(&format!("{scope}/{target_id}")),
            problem,
        };
        let Some(parsed_scope) = PolicyScope::parse(scope) else {
            return Err(invalid(
                "the scope is `provider` (or `mcp_server`), `group` or `tool`".to_owned(),
            ));
        };
        match parsed_scope {
            PolicyScope::Provider | PolicyScope::Group => {
                let id = ServerId::parse(target_id).map_err(|error| invalid(error.to_string()))?;
                Ok(Self {
                    scope: parsed_scope,
                    target: id.as_str().to_owned(),
                })
            }
            PolicyScope::Tool => {
                // Ids never contain `__`, so the first `__` ends the id; the tool name may
                // hold more.
                let Some((id, tool)) = target_id.split_once(TOOL_NAME_SEPARATOR) else {
                    return Err(invalid(
                        "a tool is named `{server_or_group_id}__{tool}`, e.g. math__add".to_owned(),
                    ));
                };
                let id = ServerId::parse(id).map_err(|error| invalid(error.to_string()))?;
                Self::tool(&id, tool).map_err(|problem| invalid(problem.to_owned()))
            }
        }
    }

    pub fn provider(server: &ServerId) -> Self {
        Self {
            scope: PolicyScope::Provider,
            target: server.as_str().to_owned(),
        }
    }

    pub fn group(group: &ServerId) -> Self {
        Self {
            scope: PolicyScope::Group,
            target: group.as_str().to_owned(),
        }
    }

    /// The tool `tool` of the server or group `owner`. The tool name must be non-empty, at most
    /// 256 bytes, without whitespace, control characters or `/`.
    pub fn tool(owner: &ServerId, tool: &str) -> Result<Self, &'static str> {
        if tool.is_empty() {
            return Err("the tool name after `__` is empty");
        }
        if tool.len() > TOOL_NAME_MAX_BYTES {
            return Err("the tool name is longer than 256 bytes");
        }
        if tool
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '/')
        {
            return Err("the tool name contains whitespace, a control character or `/`");
        }
        Ok(Self {
            scope: PolicyScope::Tool,
            target: format!("{owner}{TOOL_NAME_SEPARATOR}{tool}"),
        })
    }

    pub fn scope(&self) -> PolicyScope {
        self.scope
    }

    pub fn target_id(&self) -> &str {
        &self.target
    }
}

impl fmt::Display for PolicyAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.scope, self.target)
    }
}

impl Serialize for PolicyAddress {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A tool access policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolAccessPolicy {
    address: PolicyAddress,
    allow_list: Vec<PrincipalPattern>,
    deny_list: Vec<PrincipalPattern>,
}

impl ToolAccessPolicy {
    /// A policy from patterns already parsed (as a store loads it); repeated patterns are kept
    /// once, in their first position.
    pub fn new(
        address: PolicyAddress,
        allow_list: Vec<PrincipalPattern>,
        deny_list: Vec<PrincipalPattern>,
    ) -> Result<Self, AuthError> {
        for (list, field) in [(&allow_list, "allow_list"), (&deny_list, "deny_list")] {
            if list.len() > POLICY_LIST_MAX_LEN {
                return Err(AuthError::InvalidPolicy {
                    address: address.to_string(),
                    problem: format!(
                        "{field} holds {} patterns, more than {POLICY_LIST_MAX_LEN}; use group \
                         principals",
                        list.len()
                    ),
                });
            }
        }
        Ok(Self {
            address,
            allow_list: dedup(allow_list),
            deny_list: dedup(deny_list),
        })
    }

    /// A policy from the raw `allow_list` and `deny_list` of a request; a bad pattern is
    /// refused, naming its list and position.
    pub fn parse(
        address: PolicyAddress,
        allow_list: &[String],
        deny_list: &[String],
    ) -> Result<Self, AuthError> {
        let parse_list =
            |field: &str, raw: &[String]| -> Result<Vec<PrincipalPattern>, AuthError> {
                raw.iter()
                    .enumerate()
                    .map(|(index, pattern)| {
                        PrincipalPattern::parse(pattern).map_err(|error| AuthError::InvalidPolicy {
                            address: address.to_string(),
                            problem: format!("{field}[{index}]: {error}"),
                        })
                    })
                    .collect()
            };
        let allow = parse_list("allow_list", allow_list)?;
        let deny = parse_list("deny_list", deny_list)?;
        Self::new(address, allow, deny)
    }

    pub fn address(&self) -> &PolicyAddress {
        &self.address
    }

    pub fn allow_list(&self) -> &[PrincipalPattern] {
        &self.allow_list
    }

    pub fn deny_list(&self) -> &[PrincipalPattern] {
        &self.deny_list
    }

    /// Whether this policy admits `principal` (member of `groups`): a matching deny pattern
    /// refuses, whatever the allow list says; a non-empty allow list refuses whoever it does
    /// not name.
    pub fn admits(&self, principal: &Principal, groups: &[Principal]) -> Result<(), DenyReason> {
        if let Some(pattern) = self
            .deny_list
            .iter()
            .find(|pattern| pattern.matches(principal, groups))
        {
            return Err(DenyReason::DeniedByPolicy {
                principal: principal.clone(),
                policy: self.address.clone(),
                pattern: pattern.clone(),
            });
        }
        if !self.allow_list.is_empty()
            && !self
                .allow_list
                .iter()
                .any(|pattern| pattern.matches(principal, groups))
        {
            return Err(DenyReason::NotInAllowList {
                principal: principal.clone(),
                policy: self.address.clone(),
            });
        }
        Ok(())
    }
}

fn dedup(patterns: Vec<PrincipalPattern>) -> Vec<PrincipalPattern> {
    let mut seen = HashSet::new();
    patterns
        .into_iter()
        .filter(|pattern| seen.insert(pattern.clone()))
        .collect()
}

/// The policies a tool call or listing must pass, most specific first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessPath(Vec<PolicyAddress>);

impl AccessPath {
    /// A tool of a server: `tool/{server}__{tool}`, then `provider/{server}`.
    pub fn server_tool(server: &ServerId, tool: &str) -> Result<Self, AuthError> {
        Ok(Self(vec![
            tool_address(server, tool)?,
            PolicyAddress::provider(server),
        ]))
    }

    /// A tool of a group: `tool/{group}__{tool}` and `group/{group}`, and when the member that
    /// serves the call is known, that server's `tool/{member}__{tool}` and
    /// `provider/{member}` as well. Listing a group's tools happens before any member is picked,
    /// so it passes `None`; the call then passes the member the strategy chose.
    pub fn group_tool(
        group: &ServerId,
        tool: &str,
        member: Option<&ServerId>,
    ) -> Result<Self, AuthError> {
        let mut addresses = vec![tool_address(group, tool)?, PolicyAddress::group(group)];
        if let Some(member) = member {
            addresses.push(tool_address(member, tool)?);
            addresses.push(PolicyAddress::provider(member));
        }
        Ok(Self(addresses))
    }

    /// A whole server, without a tool (its provider policy alone).
    pub fn server(server: &ServerId) -> Self {
        Self(vec![PolicyAddress::provider(server)])
    }

    pub fn addresses(&self) -> &[PolicyAddress] {
        &self.0
    }
}

fn tool_address(owner: &ServerId, tool: &str) -> Result<PolicyAddress, AuthError> {
    PolicyAddress::tool(owner, tool).map_err(|problem| AuthError::InvalidPolicy {
        address: bounded_for_message(&format!("tool/{owner}{TOOL_NAME_SEPARATOR}{tool}")),
        problem: problem.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use mcpgw_core::ErrorKind;

    use super::*;

    fn principal(raw: &str) -> Principal {
        Principal::parse(raw).unwrap()
    }

    fn strings(raw: &[&str]) -> Vec<String> {
        raw.iter().map(|s| (*s).to_owned()).collect()
    }

    fn policy(allow: &[&str], deny: &[&str]) -> ToolAccessPolicy {
        ToolAccessPolicy::parse(
            PolicyAddress::parse("tool", "math__add").unwrap(),
            &strings(allow),
            &strings(deny),
        )
        .unwrap()
    }

    #[test]
    fn addresses_parse_each_scope_and_the_alias() {
        let table = [
            ("provider", "math", "provider/math"),
            ("mcp_server", "math", "provider/math"),
            ("group", "pool", "group/pool"),
            ("tool", "math__add", "tool/math__add"),
            // Everything after the first `__` is the tool name, `__` included.
            ("tool", "math__add__v2", "tool/math__add__v2"),
            ("tool", "math__files.read-all", "tool/math__files.read-all"),
        ];
        for (scope, target, expected) in table {
            let address = PolicyAddress::parse(scope, target).unwrap();
            assert_eq!(address.to_string(), expected, "{scope}/{target}");
        }
        let alias = PolicyAddress::parse("mcp_server", "math").unwrap();
        assert_eq!(alias, PolicyAddress::parse("provider", "math").unwrap());
        assert_eq!(alias.scope(), PolicyScope::Provider);
        assert_eq!(alias.target_id(), "math");
    }

    #[test]
    fn bad_addresses_are_invalid_input_with_a_reason() {
        let table = [
            ("server", "math", "the scope is"),
            ("Provider", "math", "the scope is"),
            ("", "math", "the scope is"),
            ("provider", "", "must not be empty"),
            ("provider", "a b", "may contain only"),
            ("provider", "a__b", "must not contain `__`"),
            ("group", "../x", "may contain only"),
            ("tool", "math", "a tool is named"),
            ("tool", "math__", "the tool name after `__` is empty"),
            ("tool", "__add", "must not be empty"),
            ("tool", "ma th__add", "may contain only"),
            ("tool", "math__a b", "whitespace"),
            (
                "tool",
                "math__a/b",
                "whitespace, a control character or `/`",
            ),
        ];
        for (scope, target, fragment) in table {
            let error = PolicyAddress::parse(scope, target).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Invalid, "{scope}/{target}");
            let message = error.to_string();
            assert!(message.contains(fragment), "{scope}/{target}: {message}");
        }
        let long_tool = format!("math__{}", "t".repeat(TOOL_NAME_MAX_BYTES + 1));
        assert!(PolicyAddress::parse("tool", &long_tool).is_err());
    }

    #[test]
    fn deny_wins_and_a_non_empty_allow_list_admits_only_its_principals() {
        let alice = principal("user:alice");
        let bob = principal("user:bob");
        let ci = principal("service:ci");
        let ops = [principal("group:ops")];
        let contractors = [principal("group:contractors")];
        let none: [Principal; 0] = [];

        enum Expect {
            Admit,
            Denied(&'static str),
            NotAllowed,
        }
        use Expect::*;
        /// (allow_list, deny_list, principal, groups, expected)
        type PolicyCase<'a> = (
            &'a [&'a str],
            &'a [&'a str],
            &'a Principal,
            &'a [Principal],
            Expect,
        );
        let table: &[PolicyCase<'_>] = &[
            // An empty policy admits everyone.
            (&[], &[], &alice, &none, Admit),
            (&[], &[], &Principal::anonymous(), &none, Admit),
            // A deny list alone refuses only whom it names.
            (&[], &["user:bob"], &alice, &none, Admit),
            (&[], &["user:bob"], &bob, &none, Denied("user:bob")),
            (
                &[],
                &["group:contractors"],
                &alice,
                &contractors,
                Denied("group:contractors"),
            ),
            (&[], &["service:*"], &ci, &none, Denied("service:*")),
            (&[], &["service:*"], &alice, &none, Admit),
            (&[], &["*"], &alice, &ops, Denied("*")),
            // An allow list alone admits only whom it names.
            (&["user:alice"], &[], &alice, &none, Admit),
            (&["user:alice"], &[], &bob, &none, NotAllowed),
            (&["group:ops"], &[], &alice, &ops, Admit),
            (&["group:ops"], &[], &alice, &contractors, NotAllowed),
            (
                &["group:ops"],
                &[],
                &Principal::anonymous(),
                &none,
                NotAllowed,
            ),
            (&["user:*"], &[], &alice, &none, Admit),
            (&["user:*"], &[], &ci, &none, NotAllowed),
            (&["*"], &[], &ci, &none, Admit),
            // Deny wins over allow, whichever pattern names the principal.
            (
                &["user:alice"],
                &["user:alice"],
                &alice,
                &none,
                Denied("user:alice"),
            ),
            (&["*"], &["user:bob"], &bob, &none, Denied("user:bob")),
            (&["*"], &["user:bob"], &alice, &none, Admit),
            (
                &["group:ops"],
                &["group:contractors"],
                &alice,
                &[principal("group:ops"), principal("group:contractors")],
                Denied("group:contractors"),
            ),
            (
                &["user:alice"],
                &["group:*"],
                &alice,
                &ops,
                Denied("group:*"),
            ),
            (&["user:alice"], &["group:*"], &alice, &none, Admit),
        ];
        for (allow, deny, who, groups, expected) in table {
            let verdict = policy(allow, deny).admits(who, groups);
            let case = format!("allow {allow:?} deny {deny:?} for {who} in {groups:?}");
            match (expected, verdict) {
                (Admit, Ok(())) => {}
                (
                    Denied(pattern),
                    Err(DenyReason::DeniedByPolicy {
                        pattern: found,
                        policy,
                        principal,
                    }),
                ) => {
                    assert_eq!(found.to_string(), *pattern, "{case}");
                    assert_eq!(policy.to_string(), "tool/math__add", "{case}");
                    assert_eq!(&principal, *who, "{case}");
                }
                (NotAllowed, Err(DenyReason::NotInAllowList { policy, .. })) => {
                    assert_eq!(policy.to_string(), "tool/math__add", "{case}");
                }
                (_, verdict) => panic!("{case}: unexpected {verdict:?}"),
            }
        }
    }

    #[test]
    fn policy_lists_are_validated_and_deduplicated() {
        let address = PolicyAddress::parse("provider", "math").unwrap();
        let error =
            ToolAccessPolicy::parse(address.clone(), &strings(&["user:alice", "alice"]), &[])
                .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Invalid);
        assert!(
            error.to_string().starts_with(
                "tool access policy `provider/math` is not valid: allow_list[1]: principal \
                 `alice` has no kind"
            ),
            "{error}"
        );
        let error =
            ToolAccessPolicy::parse(address.clone(), &[], &strings(&["user:al*"])).unwrap_err();
        assert!(error.to_string().contains("deny_list[0]"), "{error}");

        let too_many = vec!["user:x".to_owned(); POLICY_LIST_MAX_LEN + 1];
        assert_eq!(
            ToolAccessPolicy::parse(address.clone(), &too_many, &[])
                .unwrap_err()
                .kind(),
            ErrorKind::Invalid
        );

        let policy = ToolAccessPolicy::parse(
            address,
            &strings(&["user:alice", "group:ops", "user:alice"]),
            &strings(&["*", "*"]),
        )
        .unwrap();
        let allow: Vec<String> = policy
            .allow_list()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(allow, ["user:alice", "group:ops"]);
        assert_eq!(policy.deny_list().len(), 1);
    }

    #[test]
    fn access_paths_name_the_tool_the_server_and_the_group() {
        let math = ServerId::parse("math").unwrap();
        let pool = ServerId::parse("pool").unwrap();
        let names = |path: AccessPath| -> Vec<String> {
            path.addresses().iter().map(ToString::to_string).collect()
        };
        assert_eq!(
            names(AccessPath::server_tool(&math, "add").unwrap()),
            ["tool/math__add", "provider/math"]
        );
        assert_eq!(
            names(AccessPath::group_tool(&pool, "add", None).unwrap()),
            ["tool/pool__add", "group/pool"]
        );
        assert_eq!(
            names(AccessPath::group_tool(&pool, "add", Some(&math)).unwrap()),
            [
                "tool/pool__add",
                "group/pool",
                "tool/math__add",
                "provider/math"
            ]
        );
        assert_eq!(names(AccessPath::server(&math)), ["provider/math"]);
        assert_eq!(
            AccessPath::server_tool(&math, "").unwrap_err().kind(),
            ErrorKind::Invalid
        );
    }
}
