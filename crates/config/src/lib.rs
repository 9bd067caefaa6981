//! The mcpgw configuration: the YAML schema, and parsing and validating it from text.
//!
//! [`parse`] turns the text of a configuration file into a [`GatewayConfig`]: it expands
//! `${VAR}` references from an environment it is given, deserializes with unknown keys refused
//! (with a "did you mean" suggestion), validates ranges, modes and references, and reports every
//! problem with the source's name, line, column and key path. [`server_definition_from_json`]
//! applies the same rules to one server definition that arrived as JSON, so that the REST API
//! and the file can never disagree about what a valid server is.
//!
//! This crate must never do I/O: it reads no files and no environment variables (the caller
//! passes the text and a lookup function), so it can be used and tested anywhere.
//!
//! # Example
//!
//! ```rust
//! let text = "\
//! mcp_servers:
//!   math:
//!     mode: subprocess
//!     command: [python3, -m, math_server]
//!     env: {API_TOKEN: \"${MATH_TOKEN}\"}
//! ";
//! // The caller decides where `${VAR}` values come from; here, a fixed table.
//! let env = |name: &str| (name == "MATH_TOKEN").then(|| "s3cret".to_owned());
//! let config = mcpgw_config::parse("gateway.yaml", text, &env)?;
//! let math = &config.mcp_servers["math"];
//! assert_eq!(math.env.as_ref().expect("env is set")["API_TOKEN"], "s3cret");
//!
//! // A misspelt key is refused with its place and the nearest valid key.
//! let misspelt = "mcp_servers:\n  math:\n    mode: subprocess\n    comand: [python3]\n";
//! let errors = mcpgw_config::parse("gateway.yaml", misspelt, &env).unwrap_err();
//! assert_eq!(
//!     errors.to_string(),
//!     "gateway.yaml:4:5: mcp_servers.math.comand: unknown key `comand`; did you mean `command`?"
//! );
//! # Ok::<(), mcpgw_config::ConfigErrors>(())
//! ```

mod audit;
mod changes;
mod convert;
mod de;
mod endpoints;
mod error;
mod expand;
mod export;
mod file;
mod locate;
mod path;
mod sanitize;
mod schema;
mod suggest;
mod telemetry;
mod text_diff;
mod validate;

use mcpgw_core::{ServerId, ServerOrigin, ServerSpec};

pub use audit::{
    AuditConfig, AuditSinkConfig, FileAuditSinkConfig, OtlpAuditSinkConfig, SYSLOG_FACILITIES,
    SyslogAuditSinkConfig, syslog_facility_code,
};
pub use changes::{ConfigChanges, SectionChanges, changes, no_changes};
pub use convert::{DEFAULT_DOCKER_NETWORK, DEFAULT_DOCKER_READ_ONLY, GroupDefinition, GroupMember};
pub use endpoints::{
    EndpointDefinition, EndpointToolDefinition, endpoint_definition_from_json,
    endpoint_spec_from_body,
};
pub use error::{ConfigError, ConfigErrorKind, ConfigErrors, ConfigWarning};
pub use expand::VariableReference;
pub use export::export_yaml;
pub use file::{ConfigFile, ConfigFileError};
pub use sanitize::{
    MIN_REDACTED_LENGTH, SECRET_MASK, redact_secrets, sanitized, sanitized_definition,
    sanitized_launch_settings, sanitized_source_settings, secret_values,
};
pub use schema::{
    ApiKeyConfig, AuthConfig, ClusterConfig, ConfigReloadConfig, ConsoleConfig, ConsoleSsoConfig,
    ContainerRuntime, DiscoveryConfig, DiscoveryMode, DiscoverySourceConfig, EventLogConfig,
    GatewayConfig, GroupMemberDefinition, GroupStrategy, IssuerConfig, McpEndpointConfig,
    OAuthConfig, OidcConfig, OpaConfig, RateLimitBackend, RateLimitConfig, RateLimitOnUnavailable,
    RedisRateLimitConfig, RoleAssignmentConfig, ServerDefinition, ServerMode, StoreConfig,
    ToolNameConflict, ToolNames, ToolPrefix,
};
pub use telemetry::{MetricsConfig, OtlpProtocol, SamplerName, TelemetryConfig, TracesConfig};
pub use text_diff::unified_diff;
pub use validate::{HEALTH_CHECK_INTERVAL_S, IDLE_TTL_S, MAX_CONSECUTIVE_FAILURES};

use locate::{KeyLocator, Position};
use path::{KeyPath, PathSegment};
use suggest::describe_serde_message;
use validate::Finding;

/// Parses and validates the text of a configuration file.
///
/// `source_name` is how errors name the source (usually the file's path); `env` looks up the
/// variables that `${VAR}` references name. An empty text, or one with only comments, is a valid
/// empty configuration.
pub fn parse(
    source_name: &str,
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<GatewayConfig, ConfigErrors> {
    parse_with(source_name, text, env, &ParseOptions::default())
}

/// What a configuration may name beyond the schema's own words: the types of discovery source
/// the gateway can build, and the launch modes registered besides the built-in ones. The
/// defaults are the bundled gateway's (`docker` and `filesystem` sources, no registered mode).
#[derive(Debug, Clone)]
pub struct ParseOptions {
    /// The `type`s a discovery source may have; another is an error that suggests the nearest.
    pub discovery_source_types: Vec<String>,
    /// The modes a server may have besides `subprocess`, `docker`, `remote` and `group`; each
    /// checks the `settings` of the definitions in its mode.
    pub launch_modes: Vec<mcpgw_core::LaunchMode>,
}

impl Default for ParseOptions {
    fn default() -> Self {
        Self {
            discovery_source_types: DiscoverySourceConfig::KNOWN_TYPES
                .iter()
                .map(|name| (*name).to_owned())
                .collect(),
            launch_modes: Vec::new(),
        }
    }
}

impl ParseOptions {
    /// Options whose discovery source types are `types` (a factory's `source_types`).
    pub fn with_discovery_source_types<'a>(types: impl IntoIterator<Item = &'a str>) -> Self {
        Self {
            discovery_source_types: types.into_iter().map(str::to_owned).collect(),
            ..Self::default()
        }
    }

    /// These options, with `modes` registered besides the built-in ones.
    #[must_use]
    pub fn with_launch_modes(
        mut self,
        modes: impl IntoIterator<Item = mcpgw_core::LaunchMode>,
    ) -> Self {
        self.launch_modes.extend(modes);
        self
    }
}

/// [`parse`], with what `options` allows beyond the schema.
pub fn parse_with(
    source_name: &str,
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
    options: &ParseOptions,
) -> Result<GatewayConfig, ConfigErrors> {
    let expanded = match expand::expand(text, env) {
        Ok(expanded) => expanded,
        Err(problems) => {
            let locator = KeyLocator::new(text);
            let errors = problems
                .into_iter()
                .map(|problem| ConfigError {
                    kind: problem.kind,
                    source_name: source_name.to_owned(),
                    line: Some(problem.line),
                    column: Some(problem.column),
                    path: locator
                        .path_at(Position {
                            line: problem.line,
                            column: problem.column,
                        })
                        .to_string(),
                    message: problem.message,
                })
                .collect();
            return Err(ConfigErrors::new(errors));
        }
    };

    // Positions are only needed to report an error or a warning: the text is scanned for them
    // then, not on every load (for a large file the scan costs a third of the parse).
    let locator = std::cell::OnceCell::new();
    let locator = || locator.get_or_init(|| KeyLocator::new(&expanded.text));
    let deserializer = serde_yaml::Deserializer::from_str(&expanded.text);
    let parsed: Option<GatewayConfig> = serde_path_to_error::deserialize(deserializer)
        .map_err(|error| ConfigErrors::new(vec![yaml_error(source_name, error, locator())]))?;
    let mut config = parsed.unwrap_or_default();

    let findings = validate::validate_config(&config, options);
    let located = |finding: Finding| {
        let position = locator().locate(&finding.path);
        ConfigError {
            kind: finding.kind,
            source_name: source_name.to_owned(),
            line: position.map(|position| position.line),
            column: position.map(|position| position.column),
            path: finding.path.to_string(),
            message: finding.message,
        }
    };
    if !findings.errors.is_empty() {
        return Err(ConfigErrors::new(
            findings.errors.into_iter().map(located).collect(),
        ));
    }
    config.warnings = findings
        .warnings
        .into_iter()
        .map(|finding| {
            let error = located(finding);
            ConfigWarning {
                source_name: error.source_name,
                line: error.line,
                column: error.column,
                path: error.path,
                message: error.message,
            }
        })
        .collect();
    if !expanded.references.is_empty() {
        // Reference positions are positions in the text as written.
        let written = KeyLocator::new(text);
        config.variable_references = expanded
            .references
            .into_iter()
            .map(|mut reference| {
                reference.path = written
                    .path_at(Position {
                        line: reference.line,
                        column: reference.column,
                    })
                    .to_string();
                reference
            })
            .collect();
    }
    Ok(config)
}

impl GatewayConfig {
    /// Where `${VAR}` references were expanded, in text order.
    pub fn variable_references(&self) -> &[VariableReference] {
        &self.variable_references
    }

    /// Legal but suspicious settings, for the caller to log.
    pub fn warnings(&self) -> &[ConfigWarning] {
        &self.warnings
    }
}

/// Validates one server (or group) definition that arrived as JSON, with exactly the rules and
/// defaults of the configuration file, scalars included: like the file's YAML, a number or a
/// boolean where a string belongs (`"env": {"PORT": 8080}`) is read as its text. This suits
/// definitions that were YAML before they became JSON (a discovered definitions file, a
/// container's labels); a request body is read by [`server_spec_from_body`], which takes every
/// value only in its own JSON type.
///
/// `id` is the server's id (from the path or the body); an `mcp_server_id` key in the body is
/// accepted when it equals `id`. Errors have no line, and their path is the key's path in the
/// body (`idle_ttl_s`, `members[0].id`). The members of a group are checked only against the
/// group itself (not itself, not twice): whether they exist is the caller's registry's business.
/// `options` say which registered launch modes a definition may name.
pub fn server_definition_from_json(
    id: &str,
    body: serde_json::Value,
    options: &ParseOptions,
) -> Result<ServerDefinition, ConfigErrors> {
    definition_from_json(id, body, "mcp_server_id", None, options)
}

/// Like [`server_definition_from_json`], for a body that must describe a server: answers the
/// [`ServerSpec`] with defaults applied, and refuses mode `group`.
pub fn server_spec_from_json(
    id: &str,
    body: serde_json::Value,
    origin: ServerOrigin,
    options: &ParseOptions,
) -> Result<ServerSpec, ConfigErrors> {
    spec_from_definition(id, server_definition_from_json(id, body, options)?, origin)
}

/// Like [`server_spec_from_json`], for a request body: every value must have its field's JSON
/// type, so a number or a boolean where a string belongs (`"command": ["python3", 7]`) is an
/// error that names the field (`command[1]`) instead of being read as its text.
pub fn server_spec_from_body(
    id: &str,
    body: serde_json::Value,
    origin: ServerOrigin,
    options: &ParseOptions,
) -> Result<ServerSpec, ConfigErrors> {
    let definition =
        de::with_typed_strings(|| definition_from_json(id, body, "mcp_server_id", None, options))?;
    spec_from_definition(id, definition, origin)
}

fn spec_from_definition(
    id: &str,
    definition: ServerDefinition,
    origin: ServerOrigin,
) -> Result<ServerSpec, ConfigErrors> {
    let server_id = ServerId::parse(id).map_err(|error| json_errors(vec![id_finding(&error)]))?;
    definition.to_server_spec(server_id, origin).ok_or_else(|| {
        json_errors(vec![Finding {
            kind: ConfigErrorKind::InvalidValue,
            path: KeyPath::root().key("mode"),
            message: "mode `group` defines a group, not a server; create groups with \
                      POST /api/groups"
                .to_owned(),
        }])
    })
}

/// Validates a group that arrived as a request body (`{group_id?, strategy, min_healthy,
/// members, description}`; `mode` may be left out), with the rules and defaults of the file,
/// and every value only in its field's JSON type (as [`server_spec_from_body`]).
pub fn group_definition_from_json(
    id: &str,
    body: serde_json::Value,
) -> Result<GroupDefinition, ConfigErrors> {
    let definition = de::with_typed_strings(|| {
        definition_from_json(
            id,
            body,
            "group_id",
            Some(ServerMode::Group),
            &ParseOptions::default(),
        )
    })?;
    let group_id = ServerId::parse(id).map_err(|error| json_errors(vec![id_finding(&error)]))?;
    definition.to_group_definition(group_id).ok_or_else(|| {
        json_errors(vec![Finding {
            kind: ConfigErrorKind::InvalidValue,
            path: KeyPath::root().key("mode"),
            message: "a group's mode is `group`; leave `mode` out".to_owned(),
        }])
    })
}

fn definition_from_json(
    id: &str,
    mut body: serde_json::Value,
    id_key: &str,
    implied_mode: Option<ServerMode>,
    options: &ParseOptions,
) -> Result<ServerDefinition, ConfigErrors> {
    let mut findings = Vec::new();
    if let Some(object) = body.as_object_mut() {
        if let Some(body_id) = object.remove(id_key)
            && body_id.as_str() != Some(id)
        {
            findings.push(Finding {
                kind: ConfigErrorKind::InvalidValue,
                path: KeyPath::root().key(id_key),
                message: format!(
                    "{body_id} does not match the id `{id}`; leave it out or make them equal"
                ),
            });
        }
        if let Some(mode) = implied_mode {
            object.entry("mode").or_insert_with(|| mode.as_str().into());
        }
    }
    let definition: ServerDefinition = match serde_path_to_error::deserialize(body) {
        Ok(definition) => definition,
        Err(error) => {
            findings.push(json_finding(error));
            return Err(json_errors(findings));
        }
    };
    if let Err(error) = ServerId::parse(id) {
        findings.push(Finding {
            path: KeyPath::root().key(id_key),
            ..id_finding(&error)
        });
    }
    let mut validation = validate::Findings::default();
    validate::validate_server(
        id,
        &definition,
        &KeyPath::root(),
        &options.launch_modes,
        &mut validation,
    );
    findings.extend(validation.errors);
    if findings.is_empty() {
        Ok(definition)
    } else {
        Err(json_errors(findings))
    }
}

fn id_finding(error: &mcpgw_core::IdError) -> Finding {
    Finding {
        kind: ConfigErrorKind::InvalidValue,
        path: KeyPath::root().key("mcp_server_id"),
        message: format!("{error}; ids match ^[A-Za-z0-9_-]{{1,64}}$ without `__`"),
    }
}

fn json_errors(findings: Vec<Finding>) -> ConfigErrors {
    ConfigErrors::new(
        findings
            .into_iter()
            .map(|finding| ConfigError {
                kind: finding.kind,
                source_name: String::new(),
                line: None,
                column: None,
                path: finding.path.to_string(),
                message: finding.message,
            })
            .collect(),
    )
}

fn json_finding(error: serde_path_to_error::Error<serde_json::Error>) -> Finding {
    let path = key_path(error.path());
    let message = strip_path_prefix(&error.inner().to_string(), &path);
    let described = describe_serde_message(&message);
    let path = with_key(path, described.key.as_deref());
    Finding {
        kind: described.kind,
        path,
        message: described.message,
    }
}

fn yaml_error(
    source_name: &str,
    error: serde_path_to_error::Error<serde_yaml::Error>,
    locator: &KeyLocator,
) -> ConfigError {
    let path = key_path(error.path());
    let inner = error.into_inner();
    let location = inner.location();
    let mut message = inner.to_string();
    if let Some(location) = &location {
        let suffix = format!(" at line {} column {}", location.line(), location.column());
        message = message.replacen(&suffix, "", 1);
    }
    let message = strip_path_prefix(&message, &path);
    let described = describe_serde_message(&message);
    let path = with_key(path, described.key.as_deref());
    // A repeated key is reported where it is repeated; serde_yaml points at its mapping.
    let position = if described.kind == ConfigErrorKind::DuplicateKey {
        locator.locate_occurrence(&path, 1)
    } else {
        location
            .map(|location| Position {
                line: location.line(),
                column: location.column(),
            })
            .or_else(|| locator.locate(&path))
    };
    ConfigError {
        kind: described.kind,
        source_name: source_name.to_owned(),
        line: position.map(|position| position.line),
        column: position.map(|position| position.column),
        path: path.to_string(),
        message: described.message,
    }
}

/// serde_path_to_error's path, without the segments it could not name.
fn key_path(path: &serde_path_to_error::Path) -> KeyPath {
    let mut key_path = KeyPath::root();
    for segment in path.iter() {
        match segment {
            serde_path_to_error::Segment::Map { key } => {
                key_path.push(PathSegment::Key(key.clone()))
            }
            serde_path_to_error::Segment::Seq { index } => {
                key_path.push(PathSegment::Index(*index))
            }
            serde_path_to_error::Segment::Enum { .. } | serde_path_to_error::Segment::Unknown => {
                break;
            }
        }
    }
    key_path
}

/// The path extended by the key a message is about, unless the path already ends with it.
fn with_key(path: KeyPath, key: Option<&str>) -> KeyPath {
    match key {
        Some(key) if path.segments().last() != Some(&PathSegment::Key(key.to_owned())) => {
            path.key(key)
        }
        _ => path,
    }
}

/// serde_yaml starts its messages with its own rendering of the path (of the value, or of the
/// mapping for key errors); the error's path is reported separately.
fn strip_path_prefix(message: &str, path: &KeyPath) -> String {
    let mut candidate = path.clone();
    loop {
        if !candidate.is_root()
            && let Some(rest) = message.strip_prefix(&format!("{candidate}: "))
        {
            return rest.to_owned();
        }
        if candidate.pop().is_none() {
            return message.to_owned();
        }
    }
}

#[cfg(test)]
mod endpoints_tests;
#[cfg(test)]
mod management_tests;
#[cfg(test)]
mod registered_mode_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tool_names_tests;
