//! Curated endpoints: named selections of tools from any servers and groups, each served at an
//! MCP endpoint of its own (`/mcp/v/{name}`) with its own access rules and, optionally, its own
//! names, titles, descriptions and annotations for the tools it picks.
//!
//! The default endpoint `/mcp` stays "every tool the caller may use"; a curated endpoint hands a
//! team or an agent a slice of it. What a caller may do through one is never more than through
//! `/mcp`: the endpoint's rules come on top of the caller's permissions and the tool access
//! policies.

use std::fmt;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::id::ServerId;
use crate::ports::RepositoryError;
use crate::spec::ServerOrigin;

/// The name of a curated endpoint: `^[A-Za-z0-9_-]{1,64}$`, the last segment of its path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct EndpointName(String);

/// Why a string is not an endpoint name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not an endpoint name: use 1 to 64 letters, digits, `_` or `-` (it is the last segment of the endpoint's path /mcp/v/NAME)"
)]
pub struct EndpointNameError(pub String);

impl EndpointName {
    pub const MAX_LENGTH: usize = 64;

    pub fn parse(raw: &str) -> Result<Self, EndpointNameError> {
        let valid = !raw.is_empty()
            && raw.len() <= Self::MAX_LENGTH
            && raw
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-');
        if valid {
            Ok(Self(raw.to_owned()))
        } else {
            Err(EndpointNameError(crate::bounded_for_message(raw)))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EndpointName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Maps keyed by name are looked up with the `&str` of a request path, without a copy.
impl std::borrow::Borrow<str> for EndpointName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for EndpointName {
    type Error = EndpointNameError;

    fn try_from(raw: String) -> Result<Self, Self::Error> {
        Self::parse(&raw)
    }
}

impl From<EndpointName> for String {
    fn from(name: EndpointName) -> Self {
        name.0
    }
}

/// One entry of an endpoint's selection: every tool of a server or group, or one tool with
/// optional overrides of what clients see.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSelector {
    /// The server's or group's id.
    pub server: ServerId,
    /// The tool's own (upstream) name; `None` selects every tool of `server`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The name clients see on this endpoint, instead of the one it has on `/mcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Replaces the tool's annotations (an MCP `ToolAnnotations` object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
}

impl ToolSelector {
    /// Whether this entry overrides anything the tool shows.
    pub fn overrides(&self) -> bool {
        self.name.is_some()
            || self.title.is_some()
            || self.description.is_some()
            || self.annotations.is_some()
    }
}

/// A curated endpoint's definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndpointSpec {
    pub name: EndpointName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The tools it serves, in order; a tool selected twice is served once, as its first entry
    /// says.
    pub tools: Vec<ToolSelector>,
    /// Principal patterns (`user:alice`, `group:support`, `service:*`, `*`) that may use the
    /// endpoint; empty: every caller who may use `/mcp`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// Principal patterns that may not, whatever `allow` says.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
    /// `tools/list` answers the tool search meta-tool alone, and every selected tool stays
    /// callable by name: for selections too large for a model's context.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tool_search: bool,
    pub origin: ServerOrigin,
}

/// Durable storage of the curated endpoints created at run time (over REST or by an embedder),
/// so that they survive a restart. Endpoints of the configuration file are not stored here.
///
/// What every implementation guarantees: `save_endpoint` is an upsert by name, durable when it
/// returns, and every field round-trips exactly; `delete_endpoint` of an unknown name is not an
/// error; `load_endpoints` answers every endpoint saved and not deleted, in any order.
#[async_trait]
pub trait EndpointRepository: Send + Sync {
    async fn save_endpoint(&self, spec: &EndpointSpec) -> Result<(), RepositoryError>;
    async fn delete_endpoint(&self, name: &EndpointName) -> Result<(), RepositoryError>;
    async fn load_endpoints(&self) -> Result<Vec<EndpointSpec>, RepositoryError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_names_are_path_segments() {
        for good in ["support", "a", "team_1-b", &"x".repeat(64)] {
            assert_eq!(EndpointName::parse(good).unwrap().as_str(), good);
        }
        // Bad input: empty, too long, a slash, a dot, a space, a non-ASCII letter.
        for bad in ["", &"x".repeat(65), "a/b", "a.b", "a b", "é"] {
            let error = EndpointName::parse(bad).unwrap_err();
            assert!(error.to_string().contains("1 to 64"), "{error}");
        }
    }

    #[test]
    fn a_spec_round_trips_as_json() {
        let spec = EndpointSpec {
            name: EndpointName::parse("support").unwrap(),
            description: Some("for the support agents".into()),
            tools: vec![
                ToolSelector {
                    server: ServerId::parse("tickets").unwrap(),
                    tool: None,
                    name: None,
                    title: None,
                    description: None,
                    annotations: None,
                },
                ToolSelector {
                    server: ServerId::parse("math").unwrap(),
                    tool: Some("add".into()),
                    name: Some("sum".into()),
                    title: Some("Sum".into()),
                    description: Some("Adds.".into()),
                    annotations: Some(serde_json::json!({"readOnlyHint": true})),
                },
            ],
            allow: vec!["group:support".into()],
            deny: vec!["user:mallory".into()],
            tool_search: true,
            origin: ServerOrigin::Api,
        };
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(json["name"], "support");
        let back: EndpointSpec = serde_json::from_value(json).unwrap();
        assert_eq!(back, spec);
        assert!(back.tools[1].overrides() && !back.tools[0].overrides());
        let bad = serde_json::from_value::<EndpointSpec>(serde_json::json!({
            "name": "a/b", "tools": [], "origin": {"kind": "api"}
        }));
        assert!(bad.is_err());
    }
}
