//! Curated endpoints as the configuration writes them: the `endpoints` section, name to
//! definition, and one definition that arrived as a request body. Both are judged by the same
//! rules (`validate::endpoints`) and become the domain's [`EndpointSpec`].

use mcpgw_core::{EndpointName, EndpointSpec, ServerId, ServerOrigin, ToolSelector};
use serde::{Deserialize, Serialize};

use crate::de;
use crate::error::{ConfigErrorKind, ConfigErrors};
use crate::path::KeyPath;
use crate::schema::GatewayConfig;
use crate::validate::{self, Finding};

/// One curated endpoint as written under `endpoints` (its name is the key).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an endpoint definition mapping with a `tools` list"
)]
pub struct EndpointDefinition {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// What it serves, in order: every tool of a server or group, or one tool of it.
    #[serde(default, deserialize_with = "de::null_as_default")]
    pub tools: Vec<EndpointToolDefinition>,
    /// Principal patterns that may use it; empty: every caller who may use `/mcp`.
    #[serde(
        default,
        deserialize_with = "de::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub allow: Vec<String>,
    /// Principal patterns that may not, whatever `allow` says.
    #[serde(
        default,
        deserialize_with = "de::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub deny: Vec<String>,
    /// `tools/list` answers the tool search meta-tool alone; every selected tool stays
    /// callable by name.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tool_search: bool,
}

/// One entry of an endpoint's `tools`: a server or group (every tool of it), or one of its
/// tools by its own name with optional overrides of what clients see.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a mapping with `server` and optionally `tool`"
)]
pub struct EndpointToolDefinition {
    /// The server's or group's id.
    #[serde(deserialize_with = "string_like")]
    pub server: String,
    /// The tool's own (upstream) name; absent: every tool of `server`.
    #[serde(
        default,
        deserialize_with = "de::optional_string_like",
        skip_serializing_if = "Option::is_none"
    )]
    pub tool: Option<String>,
    /// The name the tool is served under on this endpoint.
    #[serde(
        default,
        deserialize_with = "de::optional_string_like",
        skip_serializing_if = "Option::is_none"
    )]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Replaces the tool's annotations (an MCP `ToolAnnotations` object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<serde_json::Value>,
}

/// An id written as a YAML number (`server: 2024`) is its text, as `mcp_servers` keys are.
fn string_like<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    de::StringLike::deserialize(deserializer).map(|value| value.0)
}

impl EndpointToolDefinition {
    /// The keys that override what clients see of one tool, with whether each is given.
    pub(crate) fn override_keys(&self) -> [(&'static str, bool); 4] {
        [
            ("name", self.name.is_some()),
            ("title", self.title.is_some()),
            ("description", self.description.is_some()),
            ("annotations", self.annotations.is_some()),
        ]
    }

    fn to_selector(&self) -> Option<ToolSelector> {
        Some(ToolSelector {
            server: ServerId::parse(&self.server).ok()?,
            tool: self.tool.clone(),
            name: self.name.clone(),
            title: self.title.clone(),
            description: self.description.clone(),
            annotations: self.annotations.clone(),
        })
    }

    fn from_selector(selector: &ToolSelector) -> Self {
        Self {
            server: selector.server.to_string(),
            tool: selector.tool.clone(),
            name: selector.name.clone(),
            title: selector.title.clone(),
            description: selector.description.clone(),
            annotations: selector.annotations.clone(),
        }
    }
}

impl EndpointDefinition {
    /// The endpoint this definition describes. Meant for definitions that passed validation:
    /// an entry whose `server` is not a valid id is left out here, not reported.
    pub fn to_endpoint_spec(&self, name: EndpointName, origin: ServerOrigin) -> EndpointSpec {
        EndpointSpec {
            name,
            description: self.description.clone(),
            tools: self
                .tools
                .iter()
                .filter_map(EndpointToolDefinition::to_selector)
                .collect(),
            allow: self.allow.clone(),
            deny: self.deny.clone(),
            tool_search: self.tool_search,
            origin,
        }
    }

    /// The definition that yields `spec` again (its name and origin aside), for export.
    pub fn from_endpoint_spec(spec: &EndpointSpec) -> Self {
        Self {
            description: spec.description.clone(),
            tools: spec
                .tools
                .iter()
                .map(EndpointToolDefinition::from_selector)
                .collect(),
            allow: spec.allow.clone(),
            deny: spec.deny.clone(),
            tool_search: spec.tool_search,
        }
    }
}

impl GatewayConfig {
    /// Every curated endpoint of the file, with origin [`ServerOrigin::Config`], ordered by
    /// name.
    pub fn to_endpoint_specs(&self) -> Vec<EndpointSpec> {
        self.endpoints
            .iter()
            .filter_map(|(name, definition)| {
                let name = EndpointName::parse(name).ok()?;
                Some(definition.to_endpoint_spec(name, ServerOrigin::Config))
            })
            .collect()
    }
}

/// The key of a request body that names the endpoint.
const NAME_KEY: &str = "name";

/// Validates one endpoint definition that arrived as a request body, with exactly the rules of
/// the configuration file's `endpoints` entries, every value only in its own JSON type (`7`
/// where a string belongs is an error, not its text).
///
/// `name` is the endpoint's name (from the path or the body); a `name` key in the body is
/// accepted when it equals it. Errors have no line, and their path is the key's path in the
/// body (`tools[1].name`). Whether the servers named exist is not checked: one may be created
/// later, and until then the entry selects nothing.
pub fn endpoint_definition_from_json(
    name: &str,
    mut body: serde_json::Value,
) -> Result<EndpointDefinition, ConfigErrors> {
    let mut findings = Vec::new();
    if let Some(object) = body.as_object_mut()
        && let Some(body_name) = object.remove(NAME_KEY)
        && body_name.as_str() != Some(name)
    {
        findings.push(Finding {
            kind: ConfigErrorKind::InvalidValue,
            path: KeyPath::root().key(NAME_KEY),
            message: format!(
                "{} does not match the endpoint's name `{}`; leave it out or make them equal",
                mcpgw_core::bounded_for_message(&body_name.to_string()),
                mcpgw_core::bounded_for_message(name)
            ),
        });
    }
    if let Err(error) = EndpointName::parse(name) {
        findings.push(Finding {
            kind: ConfigErrorKind::InvalidValue,
            path: KeyPath::root().key(NAME_KEY),
            message: error.to_string(),
        });
    }
    let definition: EndpointDefinition =
        match de::with_typed_strings(|| serde_path_to_error::deserialize(body)) {
            Ok(definition) => definition,
            Err(error) => {
                findings.push(crate::json_finding(error));
                return Err(crate::json_errors(findings));
            }
        };
    let mut validation = validate::Findings::default();
    validate::endpoints::validate_endpoint(&definition, &KeyPath::root(), &mut validation);
    findings.extend(validation.errors);
    if findings.is_empty() {
        Ok(definition)
    } else {
        Err(crate::json_errors(findings))
    }
}

/// [`endpoint_definition_from_json`], answering the endpoint it describes with `origin`.
pub fn endpoint_spec_from_body(
    name: &str,
    body: serde_json::Value,
    origin: ServerOrigin,
) -> Result<EndpointSpec, ConfigErrors> {
    let definition = endpoint_definition_from_json(name, body)?;
    let name = EndpointName::parse(name).map_err(|error| {
        crate::json_errors(vec![Finding {
            kind: ConfigErrorKind::InvalidValue,
            path: KeyPath::root().key(NAME_KEY),
            message: error.to_string(),
        }])
    })?;
    Ok(definition.to_endpoint_spec(name, origin))
}
