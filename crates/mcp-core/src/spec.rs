//! What the gateway needs to know to run one MCP server.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

use crate::id::ServerId;
use crate::launch_mode::{LaunchModeError, check_custom_mode_name};
use crate::tool::Tool;

/// How a server is reached.
///
/// Its serde form is an object tagged by `mode`, with the fields of the variant beside it:
/// `{"mode": "subprocess", "command": [...], "env": {...}, "cwd": null}`. A mode registered by
/// an embedder has its settings under `settings`: `{"mode": "in_process", "settings": {...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
#[non_exhaustive]
pub enum LaunchSpec {
    /// A local process speaking MCP over stdin/stdout.
    Subprocess {
        command: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<String>,
    },
    /// A container speaking MCP over its stdin/stdout.
    Docker {
        image: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        network: String,
        memory: Option<String>,
        cpus: Option<String>,
        read_only: bool,
        volumes: Vec<String>,
        /// Which container engine runs it; absent in the serde form for the default engine.
        #[serde(skip_serializing_if = "ContainerEngine::is_default")]
        engine: ContainerEngine,
    },
    /// A server reached over MCP Streamable HTTP.
    Remote {
        endpoint: String,
        headers: BTreeMap<String, String>,
        /// Calls carry a token of the server's own, exchanged for the caller's (RFC 8693).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token_exchange: Option<TokenExchange>,
    },
    /// A mode registered by whoever assembled the gateway (see
    /// [`LaunchMode`](crate::LaunchMode)): its launcher reads the settings. Its serde form
    /// names its own `mode`.
    #[serde(untagged)]
    Custom(CustomLaunch),
}

/// The built-in launches as they are read: [`LaunchSpec`]'s deserializer looks at `mode`
/// first, so that a built-in mode's errors name its fields and any other mode is a custom one.
#[derive(Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
enum BuiltInLaunch {
    Subprocess {
        command: Vec<String>,
        #[serde(default)]
        env: BTreeMap<String, String>,
        #[serde(default)]
        cwd: Option<String>,
    },
    Docker {
        image: String,
        #[serde(default)]
        args: Vec<String>,
        #[serde(default)]
        env: BTreeMap<String, String>,
        network: String,
        #[serde(default)]
        memory: Option<String>,
        #[serde(default)]
        cpus: Option<String>,
        read_only: bool,
        #[serde(default)]
        volumes: Vec<String>,
        #[serde(default)]
        engine: ContainerEngine,
    },
    Remote {
        endpoint: String,
        #[serde(default)]
        headers: BTreeMap<String, String>,
        #[serde(default)]
        token_exchange: Option<TokenExchange>,
    },
}

/// How a remote server gets a token for each caller: the gateway exchanges the caller's access
/// token at the authorization server's token endpoint (OAuth 2.0 Token Exchange, RFC 8693) for
/// one whose audience is the server, as the client `client_id`. Requests the gateway makes on
/// its own behalf (initialize, tool lists, health checks) carry a token of the client itself
/// (the client credentials grant). The caller's token is never sent to the server.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenExchange {
    pub token_endpoint: String,
    pub client_id: String,
    pub client_secret: String,
    /// How the client authenticates at the token endpoint.
    #[serde(default)]
    pub client_auth: ClientAuth,
    /// The `resource` asked for (RFC 8707); `None`: the server's endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// The `audience` asked for, for authorization servers that name targets that way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// The `scope` asked for; `None` asks for none (the server's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl std::fmt::Debug for TokenExchange {
    /// Never shows the client secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenExchange")
            .field("token_endpoint", &self.token_endpoint)
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .field("client_auth", &self.client_auth)
            .field("resource", &self.resource)
            .field("audience", &self.audience)
            .field("scope", &self.scope)
            .finish()
    }
}

/// How a client authenticates at a token endpoint (RFC 6749 §2.3.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientAuth {
    /// HTTP Basic with the client id and secret (every authorization server takes it).
    #[default]
    ClientSecretBasic,
    /// The id and secret as form fields.
    ClientSecretPost,
}

impl ClientAuth {
    pub fn as_str(self) -> &'static str {
        match self {
            ClientAuth::ClientSecretBasic => "client_secret_basic",
            ClientAuth::ClientSecretPost => "client_secret_post",
        }
    }
}

impl LaunchSpec {
    /// The names of the built-in modes; `group` is taken too (by groups).
    pub const BUILT_IN_MODES: [&'static str; 3] = ["subprocess", "docker", "remote"];

    /// The `mode` name the API and the configuration use.
    pub fn mode(&self) -> &str {
        match self {
            LaunchSpec::Subprocess { .. } => "subprocess",
            LaunchSpec::Docker { .. } => "docker",
            LaunchSpec::Remote { .. } => "remote",
            LaunchSpec::Custom(custom) => custom.mode(),
        }
    }

    /// Whether the server may write to the log buffer its launcher is handed: every mode but
    /// `remote`, which has no stderr to capture.
    pub fn captures_stderr(&self) -> bool {
        !matches!(self, LaunchSpec::Remote { .. })
    }
}

impl From<BuiltInLaunch> for LaunchSpec {
    fn from(launch: BuiltInLaunch) -> Self {
        match launch {
            BuiltInLaunch::Subprocess { command, env, cwd } => {
                LaunchSpec::Subprocess { command, env, cwd }
            }
            BuiltInLaunch::Docker {
                image,
                args,
                env,
                network,
                memory,
                cpus,
                read_only,
                volumes,
                engine,
            } => LaunchSpec::Docker {
                image,
                args,
                env,
                network,
                memory,
                cpus,
                read_only,
                volumes,
                engine,
            },
            BuiltInLaunch::Remote {
                endpoint,
                headers,
                token_exchange,
            } => LaunchSpec::Remote {
                endpoint,
                headers,
                token_exchange,
            },
        }
    }
}

impl<'de> Deserialize<'de> for LaunchSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let mut object = Map::<String, Value>::deserialize(deserializer)?;
        let mode = match object.get("mode") {
            Some(Value::String(mode)) => mode.clone(),
            Some(_) => return Err(D::Error::custom("`mode` must be a string")),
            None => return Err(D::Error::missing_field("mode")),
        };
        if LaunchSpec::BUILT_IN_MODES.contains(&mode.as_str()) {
            return serde_json::from_value::<BuiltInLaunch>(Value::Object(object))
                .map(LaunchSpec::from)
                .map_err(D::Error::custom);
        }
        let settings = match object.remove("settings") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(settings)) => settings,
            Some(_) => return Err(D::Error::custom("`settings` must be an object")),
        };
        CustomLaunch::new(mode, settings)
            .map(LaunchSpec::Custom)
            .map_err(D::Error::custom)
    }
}

/// The launch of a server whose mode was registered from outside: the mode's name and the
/// settings its launcher reads (an object, checked by the mode when the definition is made).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CustomLaunch {
    mode: String,
    settings: Map<String, Value>,
}

impl CustomLaunch {
    /// A launch in mode `mode`; refused when `mode` is not a valid name for a registered mode
    /// (see [`LaunchMode::new`](crate::LaunchMode::new)), built-in names included.
    pub fn new(
        mode: impl Into<String>,
        settings: Map<String, Value>,
    ) -> Result<Self, LaunchModeError> {
        let mode = mode.into();
        check_custom_mode_name(&mode)?;
        Ok(Self { mode, settings })
    }

    pub fn mode(&self) -> &str {
        &self.mode
    }

    pub fn settings(&self) -> &Map<String, Value> {
        &self.settings
    }
}

/// Which container engine runs a docker-mode server.
///
/// Serde form: `"default"`, `{"host": "unix:///run/docker.sock"}`, `"docker_cli"` or
/// `"podman_cli"`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "EngineForm", into = "EngineForm")]
#[non_exhaustive]
pub enum ContainerEngine {
    /// The gateway's default engine: the Engine API that `DOCKER_HOST` names (or
    /// `/var/run/docker.sock`), else a `docker` or `podman` CLI found on `PATH`.
    #[default]
    Default,
    /// The Docker Engine API at this address (`unix:///path/to/socket`, or a bare socket path).
    /// A server approved from a docker discovery source runs on that source's engine.
    Host(String),
    /// This command-line client, which runs the container as a child process.
    Cli(ContainerCli),
}

impl ContainerEngine {
    /// Whether this is the gateway's default engine.
    pub fn is_default(&self) -> bool {
        matches!(self, ContainerEngine::Default)
    }
}

/// The serde form of [`ContainerEngine`]: one flat name per client.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum EngineForm {
    Default,
    Host(String),
    DockerCli,
    PodmanCli,
}

impl From<EngineForm> for ContainerEngine {
    fn from(form: EngineForm) -> Self {
        match form {
            EngineForm::Default => ContainerEngine::Default,
            EngineForm::Host(host) => ContainerEngine::Host(host),
            EngineForm::DockerCli => ContainerEngine::Cli(ContainerCli::Docker),
            EngineForm::PodmanCli => ContainerEngine::Cli(ContainerCli::Podman),
        }
    }
}

impl From<ContainerEngine> for EngineForm {
    fn from(engine: ContainerEngine) -> Self {
        match engine {
            ContainerEngine::Default => EngineForm::Default,
            ContainerEngine::Host(host) => EngineForm::Host(host),
            ContainerEngine::Cli(ContainerCli::Docker) => EngineForm::DockerCli,
            ContainerEngine::Cli(ContainerCli::Podman) => EngineForm::PodmanCli,
        }
    }
}

/// The container command-line clients the gateway knows how to drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContainerCli {
    Docker,
    Podman,
}

impl ContainerCli {
    /// The program's name, as found on `PATH`.
    pub fn program(self) -> &'static str {
        match self {
            ContainerCli::Docker => "docker",
            ContainerCli::Podman => "podman",
        }
    }
}

/// Where a server's definition came from; it decides who may change it.
///
/// Serde form: `{"kind": "config"}`, `{"kind": "api"}`, or
/// `{"kind": "discovery", "source_id": "docker-0"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ServerOrigin {
    /// Declared in the configuration file: changed by editing the file, not over REST.
    Config,
    /// Created over the REST API (or by an embedder): persisted in the server repository.
    Api,
    /// Approved from a discovery source.
    Discovery { source_id: String },
}

impl ServerOrigin {
    pub fn as_str(&self) -> &'static str {
        match self {
            ServerOrigin::Config => "config",
            ServerOrigin::Api => "api",
            ServerOrigin::Discovery { .. } => "discovery",
        }
    }
}

/// The full definition of one managed MCP server.
///
/// Its serde form is the one form of a definition that stores and other adapters keep and
/// exchange, and every field round-trips exactly: the launch is a [`LaunchSpec`] object under
/// `launch`, durations are serde's `{"secs", "nanos"}`. It is a file format: fields may be
/// added with a default, never renamed or removed, and unknown fields are ignored, so that
/// definitions kept by another version of the gateway still load.
///
/// ```
/// use mcpgw_core::{ServerId, ServerSpec};
///
/// let spec = ServerSpec::subprocess(ServerId::parse("math").unwrap(), vec!["math-server".into()]);
/// let json = serde_json::to_value(&spec).unwrap();
/// assert_eq!(json["launch"]["mode"], "subprocess");
/// assert_eq!(json["idle_ttl"]["secs"], 300);
/// assert_eq!(serde_json::from_value::<ServerSpec>(json).unwrap(), spec);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerSpec {
    pub id: ServerId,
    #[serde(default)]
    pub description: Option<String>,
    pub launch: LaunchSpec,
    pub idle_ttl: Duration,
    pub health_check_interval: Duration,
    pub max_consecutive_failures: u32,
    /// Tools listed before the first start, so clients see them without starting the server.
    #[serde(default)]
    pub predefined_tools: Vec<Tool>,
    pub origin: ServerOrigin,
    /// The `_meta` key under which each tool call carries the calling principal
    /// (`user:alice`), for servers that act per user without OAuth of their own; `None`: no
    /// principal is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// One pointer wide (`Arc<String>`): it travels with every call of the server.
    pub caller_meta: Option<Arc<String>>,
    /// How this server's tools are pinned (see [`crate::pins`]); `None`: the gateway's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_pinning: Option<crate::pins::ToolPinning>,
}

impl ServerSpec {
    pub const DEFAULT_IDLE_TTL: Duration = Duration::from_secs(300);
    pub const DEFAULT_HEALTH_CHECK_INTERVAL: Duration = Duration::from_secs(60);
    pub const DEFAULT_MAX_CONSECUTIVE_FAILURES: u32 = 3;

    /// A subprocess server with every default; convenient for embedders and tests.
    pub fn subprocess(id: ServerId, command: Vec<String>) -> Self {
        Self {
            id,
            description: None,
            launch: LaunchSpec::Subprocess {
                command,
                env: BTreeMap::new(),
                cwd: None,
            },
            idle_ttl: Self::DEFAULT_IDLE_TTL,
            health_check_interval: Self::DEFAULT_HEALTH_CHECK_INTERVAL,
            max_consecutive_failures: Self::DEFAULT_MAX_CONSECUTIVE_FAILURES,
            predefined_tools: Vec::new(),
            origin: ServerOrigin::Api,
            caller_meta: None,
            tool_pinning: None,
        }
    }

    pub fn mode(&self) -> &str {
        self.launch.mode()
    }

    /// Whether a change from `self` to `other` needs a restart to take effect.
    pub fn launch_differs(&self, other: &ServerSpec) -> bool {
        self.launch != other.launch
    }

    /// A stable digest of what decides which tools the server lists: its launch, every field
    /// of it (mode, command or image and arguments, environment, working directory, container
    /// settings and engine, endpoint and headers). Two definitions have the same digest exactly
    /// when [`ServerSpec::launch_differs`] says they do not differ; the id, description,
    /// timings, failure limit, declared tools and origin do not count.
    ///
    /// It is 64 lowercase hexadecimal digits (SHA-256 over a length-prefixed encoding of the
    /// fields), the same on every platform and in every build, so a tool list kept with it
    /// can be matched against the definition of a later run.
    pub fn tool_list_digest(&self) -> String {
        self.launch.digest()
    }
}

impl LaunchSpec {
    /// See [`ServerSpec::tool_list_digest`].
    pub fn digest(&self) -> String {
        let mut encoder = DigestEncoder::new();
        match self {
            LaunchSpec::Subprocess { command, env, cwd } => {
                encoder.text("subprocess");
                encoder.list(command);
                encoder.map(env);
                encoder.optional(cwd.as_deref());
            }
            LaunchSpec::Docker {
                image,
                args,
                env,
                network,
                memory,
                cpus,
                read_only,
                volumes,
                engine,
            } => {
                encoder.text("docker");
                encoder.text(image);
                encoder.list(args);
                encoder.map(env);
                encoder.text(network);
                encoder.optional(memory.as_deref());
                encoder.optional(cpus.as_deref());
                encoder.text(if *read_only { "read-only" } else { "writable" });
                encoder.list(volumes);
                match engine {
                    ContainerEngine::Default => encoder.text("default"),
                    ContainerEngine::Host(host) => {
                        encoder.text("host");
                        encoder.text(host);
                    }
                    ContainerEngine::Cli(cli) => {
                        encoder.text("cli");
                        encoder.text(cli.program());
                    }
                }
            }
            LaunchSpec::Remote {
                endpoint,
                headers,
                token_exchange,
            } => {
                encoder.text("remote");
                encoder.text(endpoint);
                encoder.map(headers);
                // Only when set, so that the digests of servers without it stay as they were.
                if let Some(exchange) = token_exchange {
                    encoder.text("token_exchange");
                    encoder.text(&exchange.token_endpoint);
                    encoder.text(&exchange.client_id);
                    encoder.text(&exchange.client_secret);
                    encoder.text(exchange.client_auth.as_str());
                    for value in [&exchange.resource, &exchange.audience, &exchange.scope] {
                        encoder.text(value.as_deref().unwrap_or(""));
                    }
                }
            }
            LaunchSpec::Custom(custom) => {
                encoder.text("custom");
                encoder.text(custom.mode());
                encoder.object(custom.settings());
            }
        }
        encoder.finish()
    }
}

/// Feeds values to SHA-256 so that different values can never encode to the same bytes: every
/// text is preceded by its length, every list and map by its number of entries.
struct DigestEncoder(Sha256);

impl DigestEncoder {
    /// The encoding's version comes first, so that a different encoding can never collide.
    fn new() -> Self {
        let mut encoder = Self(Sha256::new());
        encoder.text("mcpgw tool list digest 1");
        encoder
    }

    fn count(&mut self, count: usize) {
        self.0.update((count as u64).to_be_bytes());
    }

    fn text(&mut self, text: &str) {
        self.count(text.len());
        self.0.update(text.as_bytes());
    }

    fn optional(&mut self, text: Option<&str>) {
        match text {
            None => self.count(0),
            Some(text) => {
                self.count(1);
                self.text(text);
            }
        }
    }

    fn list(&mut self, items: &[String]) {
        self.count(items.len());
        for item in items {
            self.text(item);
        }
    }

    /// A `BTreeMap` iterates in key order, so equal maps always encode alike.
    fn map(&mut self, map: &BTreeMap<String, String>) {
        self.count(map.len());
        for (key, value) in map {
            self.text(key);
            self.text(value);
        }
    }

    /// A JSON object, keys in sorted order whatever order the map keeps, so that equal
    /// settings always encode alike.
    fn object(&mut self, object: &Map<String, Value>) {
        let mut keys: Vec<&String> = object.keys().collect();
        keys.sort_unstable();
        self.count(keys.len());
        for key in keys {
            self.text(key);
            self.value(&object[key.as_str()]);
        }
    }

    /// A JSON value, its kind first.
    fn value(&mut self, value: &Value) {
        match value {
            Value::Null => self.text("null"),
            Value::Bool(flag) => self.text(if *flag { "true" } else { "false" }),
            Value::Number(number) => {
                self.text("number");
                self.text(&number.to_string());
            }
            Value::String(text) => {
                self.text("string");
                self.text(text);
            }
            Value::Array(items) => {
                self.text("array");
                self.count(items.len());
                items.iter().for_each(|item| self.value(item));
            }
            Value::Object(object) => {
                self.text("object");
                self.object(object);
            }
        }
    }

    fn finish(self) -> String {
        let digest: [u8; 32] = self.0.finalize().into();
        let mut hex = String::with_capacity(64);
        for byte in digest {
            hex.push(char::from(HEX_DIGITS[usize::from(byte >> 4)]));
            hex.push(char::from(HEX_DIGITS[usize::from(byte & 0x0f)]));
        }
        hex
    }
}

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

#[cfg(test)]
mod tests {
    use super::*;

    /// One definition of each launch, engine and origin, with every optional field set.
    fn every_kind_of_definition() -> Vec<ServerSpec> {
        let env: BTreeMap<String, String> = [("KEY".to_owned(), "value".to_owned())].into();
        let mut tool = Tool::new("add");
        tool.description = Some("adds".to_owned());
        tool.output_schema = Some(serde_json::json!({"type": "object"}));
        let base = |name: &str, launch: LaunchSpec, origin: ServerOrigin| ServerSpec {
            id: id(name),
            description: Some(format!("the {name} server")),
            launch,
            idle_ttl: Duration::from_secs(7),
            health_check_interval: Duration::from_secs(11),
            max_consecutive_failures: 5,
            predefined_tools: vec![tool.clone()],
            origin,
            caller_meta: Some(Arc::new("com.example/caller".to_owned())),
            tool_pinning: None,
        };
        let docker = |engine: ContainerEngine| LaunchSpec::Docker {
            image: "repo/image:tag".to_owned(),
            args: vec!["--flag".to_owned()],
            env: env.clone(),
            network: "none".to_owned(),
            memory: Some("512m".to_owned()),
            cpus: Some("1.5".to_owned()),
            read_only: false,
            volumes: vec!["/a:/b:ro".to_owned()],
            engine,
        };
        vec![
            base(
                "local",
                subprocess(&["python3", "-m", "x"], &[("KEY", "value")], Some("/srv")),
                ServerOrigin::Config,
            ),
            base("boxed", docker(ContainerEngine::Default), ServerOrigin::Api),
            base(
                "hosted",
                docker(ContainerEngine::Host("unix:///run/docker.sock".to_owned())),
                ServerOrigin::Discovery {
                    source_id: "docker-0".to_owned(),
                },
            ),
            base(
                "podded",
                docker(ContainerEngine::Cli(ContainerCli::Podman)),
                ServerOrigin::Api,
            ),
            base(
                "far",
                LaunchSpec::Remote {
                    endpoint: "https://example.com/mcp".to_owned(),
                    headers: env.clone(),
                    token_exchange: None,
                },
                ServerOrigin::Api,
            ),
            base(
                "inside",
                custom("in_process", in_process_settings()),
                ServerOrigin::Config,
            ),
        ]
    }

    fn in_process_settings() -> Map<String, Value> {
        let serde_json::Value::Object(settings) = serde_json::json!({
            "greeting": "hello",
            "limits": {"calls": 3, "ratio": 0.5, "strict": true, "tags": ["a", null]},
        }) else {
            unreachable!()
        };
        settings
    }

    fn custom(mode: &str, settings: Map<String, Value>) -> LaunchSpec {
        LaunchSpec::Custom(CustomLaunch::new(mode, settings).unwrap())
    }

    #[test]
    fn the_serde_form_of_a_definition_round_trips_every_field() {
        for spec in every_kind_of_definition() {
            let json = serde_json::to_string(&spec).unwrap();
            let back: ServerSpec = serde_json::from_str(&json).unwrap();
            assert_eq!(back, spec, "{json}");
            assert_eq!(back.tool_list_digest(), spec.tool_list_digest());
        }
    }

    #[test]
    fn the_serde_form_names_the_mode_engine_origin_and_seconds() {
        let forms: Vec<serde_json::Value> = every_kind_of_definition()
            .iter()
            .map(|spec| serde_json::to_value(spec).unwrap())
            .collect();
        assert_eq!(forms[0]["launch"]["mode"], "subprocess");
        assert_eq!(forms[0]["origin"], serde_json::json!({"kind": "config"}));
        assert_eq!(
            forms[0]["idle_ttl"],
            serde_json::json!({"secs": 7, "nanos": 0})
        );
        assert_eq!(
            forms[0]["health_check_interval"],
            serde_json::json!({"secs": 11, "nanos": 0})
        );
        // The default engine is left out.
        assert!(forms[1]["launch"].get("engine").is_none());
        assert_eq!(
            forms[2]["launch"]["engine"],
            serde_json::json!({"host": "unix:///run/docker.sock"})
        );
        assert_eq!(
            forms[2]["origin"],
            serde_json::json!({"kind": "discovery", "source_id": "docker-0"})
        );
        assert_eq!(forms[3]["launch"]["engine"], "podman_cli");
        assert_eq!(forms[4]["launch"]["mode"], "remote");
        assert_eq!(
            forms[5]["launch"],
            serde_json::json!({"mode": "in_process", "settings": in_process_settings()})
        );
    }

    #[test]
    fn a_mode_nobody_registered_still_loads_as_a_custom_launch() {
        // A definition stored while a mode was registered loads when it no longer is: the
        // launcher refuses to start it, but the definition is not lost.
        let form = serde_json::json!({"mode": "firecracker"});
        let launch: LaunchSpec = serde_json::from_value(form).unwrap();
        assert_eq!(launch.mode(), "firecracker");
        let LaunchSpec::Custom(custom) = &launch else {
            panic!("{launch:?}")
        };
        assert!(custom.settings().is_empty());
        // Bad input: a built-in name given as a custom launch, and settings that are no object.
        assert_eq!(
            CustomLaunch::new("docker", Map::new()),
            Err(LaunchModeError::BuiltIn("docker".into()))
        );
        let error = serde_json::from_value::<LaunchSpec>(
            serde_json::json!({"mode": "firecracker", "settings": [1]}),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("`settings` must be an object"), "{error}");
    }

    #[test]
    fn settings_count_in_the_digest_whatever_their_order() {
        let settings = in_process_settings();
        let mut reversed = Map::new();
        for (key, value) in settings.iter().rev() {
            reversed.insert(key.clone(), value.clone());
        }
        assert_eq!(
            custom("in_process", settings.clone()).digest(),
            custom("in_process", reversed).digest()
        );
        let mut changed = settings.clone();
        changed["limits"]["tags"][1] = Value::from("b");
        let variants = [
            custom("in_process", settings.clone()),
            custom("in_process", changed),
            custom("in_process_2", settings),
            custom("in_process", Map::new()),
        ];
        let digests: std::collections::BTreeSet<String> =
            variants.iter().map(LaunchSpec::digest).collect();
        assert_eq!(digests.len(), variants.len());
        // The string "1" and the number 1 are different settings.
        let text = custom(
            "x",
            [("n".to_owned(), Value::from("1"))].into_iter().collect(),
        );
        let number = custom(
            "x",
            [("n".to_owned(), Value::from(1))].into_iter().collect(),
        );
        assert_ne!(text.digest(), number.digest());
    }

    #[test]
    fn a_malformed_serde_form_is_refused_with_the_reason() {
        let good = serde_json::to_value(&every_kind_of_definition()[0]).unwrap();
        let with = |path: &[&str], value: serde_json::Value| {
            let mut form = good.clone();
            let mut place = &mut form;
            for key in &path[..path.len() - 1] {
                place = &mut place[*key];
            }
            place[path[path.len() - 1]] = value;
            form
        };
        // Bad input: a mode that is no valid name, a built-in mode without its required
        // field, an id with `__`, negative seconds, a command that is not a list, an unknown
        // origin, an unknown engine.
        let cases = [
            (with(&["launch", "mode"], "Tele port".into()), "Tele port"),
            (with(&["launch", "mode"], "remote".into()), "endpoint"),
            (with(&["id"], "a__b".into()), "__"),
            (with(&["idle_ttl", "secs"], (-1).into()), "-1"),
            (with(&["launch", "command"], "python3".into()), "sequence"),
            (with(&["origin", "kind"], "elsewhere".into()), "elsewhere"),
        ];
        for (form, named) in cases {
            let error = serde_json::from_value::<ServerSpec>(form.clone())
                .expect_err(&form.to_string())
                .to_string();
            assert!(error.contains(named), "{error} does not name {named}");
        }
        let mut docker = serde_json::to_value(&every_kind_of_definition()[1]).unwrap();
        docker["launch"]["engine"] = "kubernetes".into();
        let error = serde_json::from_value::<ServerSpec>(docker)
            .unwrap_err()
            .to_string();
        assert!(error.contains("kubernetes"), "{error}");
    }

    fn id(raw: &str) -> ServerId {
        ServerId::parse(raw).unwrap()
    }

    fn subprocess(command: &[&str], env: &[(&str, &str)], cwd: Option<&str>) -> LaunchSpec {
        LaunchSpec::Subprocess {
            command: command.iter().map(|part| (*part).to_owned()).collect(),
            env: env
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect(),
            cwd: cwd.map(str::to_owned),
        }
    }

    fn docker() -> LaunchSpec {
        LaunchSpec::Docker {
            image: "repo/img:1".into(),
            args: vec!["--stdio".into()],
            env: BTreeMap::from([("TOKEN".into(), "t".into())]),
            network: "none".into(),
            memory: Some("512m".into()),
            cpus: None,
            read_only: true,
            volumes: vec!["/data:/data:ro".into()],
            engine: ContainerEngine::Default,
        }
    }

    #[test]
    fn the_digest_is_sha256_over_the_documented_encoding() {
        // Worked out apart from this code (Python's hashlib over the same length-prefixed
        // bytes), so that a change of the encoding, which would make every kept tool list
        // stale at the next start, cannot slip in unnoticed.
        let launch = subprocess(&["python3", "-m", "math"], &[("A", "1")], None);
        assert_eq!(
            launch.digest(),
            "65641f42998cdbed693e65b2be432c4db271d8527ebddc1f3d8ee1327649e5e5"
        );
        let remote = LaunchSpec::Remote {
            endpoint: "https://h/mcp".into(),
            headers: BTreeMap::from([("Authorization".into(), "Bearer x".into())]),
            token_exchange: None,
        };
        assert_eq!(
            remote.digest(),
            "7f650f6f7b4897fb7da54581fd776c381fab8e64ba2dd66a22fcec1c3458089c"
        );
    }

    #[test]
    fn only_the_launch_counts() {
        let spec = ServerSpec::subprocess(id("math"), vec!["m".into()]);
        let other = ServerSpec {
            id: id("other"),
            description: Some("described".into()),
            idle_ttl: Duration::from_secs(1),
            health_check_interval: Duration::from_secs(5),
            max_consecutive_failures: 9,
            predefined_tools: vec![Tool::new("declared")],
            origin: ServerOrigin::Config,
            ..spec.clone()
        };
        assert_eq!(spec.tool_list_digest(), other.tool_list_digest());
        assert_eq!(spec.tool_list_digest().len(), 64);
        assert!(
            spec.tool_list_digest()
                .bytes()
                .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
        );
    }

    #[test]
    fn every_launch_field_changes_the_digest() {
        let base = docker();
        let LaunchSpec::Docker {
            image,
            args,
            env,
            network,
            memory,
            cpus,
            read_only,
            volumes,
            engine,
        } = base.clone()
        else {
            unreachable!()
        };
        let changed = [
            LaunchSpec::Docker {
                image: "repo/img:2".into(),
                args: args.clone(),
                env: env.clone(),
                network: network.clone(),
                memory: memory.clone(),
                cpus: cpus.clone(),
                read_only,
                volumes: volumes.clone(),
                engine: engine.clone(),
            },
            LaunchSpec::Docker {
                image: image.clone(),
                args: vec![],
                env: env.clone(),
                network: network.clone(),
                memory: memory.clone(),
                cpus: cpus.clone(),
                read_only,
                volumes: volumes.clone(),
                engine: engine.clone(),
            },
            LaunchSpec::Docker {
                image: image.clone(),
                args: args.clone(),
                env: BTreeMap::from([("TOKEN".into(), "other".into())]),
                network: network.clone(),
                memory: memory.clone(),
                cpus: cpus.clone(),
                read_only,
                volumes: volumes.clone(),
                engine: engine.clone(),
            },
            LaunchSpec::Docker {
                image: image.clone(),
                args: args.clone(),
                env: env.clone(),
                network: "bridge".into(),
                memory: memory.clone(),
                cpus: cpus.clone(),
                read_only,
                volumes: volumes.clone(),
                engine: engine.clone(),
            },
            LaunchSpec::Docker {
                image: image.clone(),
                args: args.clone(),
                env: env.clone(),
                network: network.clone(),
                memory: None,
                cpus: cpus.clone(),
                read_only,
                volumes: volumes.clone(),
                engine: engine.clone(),
            },
            LaunchSpec::Docker {
                image: image.clone(),
                args: args.clone(),
                env: env.clone(),
                network: network.clone(),
                memory: memory.clone(),
                cpus: Some("1.0".into()),
                read_only,
                volumes: volumes.clone(),
                engine: engine.clone(),
            },
            LaunchSpec::Docker {
                image: image.clone(),
                args: args.clone(),
                env: env.clone(),
                network: network.clone(),
                memory: memory.clone(),
                cpus: cpus.clone(),
                read_only: false,
                volumes: volumes.clone(),
                engine: engine.clone(),
            },
            LaunchSpec::Docker {
                image: image.clone(),
                args: args.clone(),
                env: env.clone(),
                network: network.clone(),
                memory: memory.clone(),
                cpus: cpus.clone(),
                read_only,
                volumes: vec![],
                engine: engine.clone(),
            },
            LaunchSpec::Docker {
                image: image.clone(),
                args: args.clone(),
                env: env.clone(),
                network: network.clone(),
                memory: memory.clone(),
                cpus: cpus.clone(),
                read_only,
                volumes: volumes.clone(),
                engine: ContainerEngine::Cli(ContainerCli::Podman),
            },
            LaunchSpec::Docker {
                image,
                args,
                env,
                network,
                memory,
                cpus,
                read_only,
                volumes,
                engine: ContainerEngine::Host("unix:///run/podman.sock".into()),
            },
        ];
        let mut digests = std::collections::BTreeSet::from([base.digest()]);
        for launch in &changed {
            assert!(digests.insert(launch.digest()), "{launch:?}");
        }
        assert_eq!(
            base.digest(),
            docker().digest(),
            "the same launch, the same digest"
        );
    }

    #[test]
    fn values_that_would_run_together_stay_apart() {
        let pairs = [
            (
                subprocess(&["a b"], &[], None),
                subprocess(&["a", "b"], &[], None),
            ),
            (
                subprocess(&["x"], &[("a", "bc")], None),
                subprocess(&["x"], &[("ab", "c")], None),
            ),
            (
                subprocess(&["x"], &[], None),
                subprocess(&["x"], &[], Some("")),
            ),
            (
                subprocess(&["x", ""], &[], None),
                subprocess(&["x"], &[("", "")], None),
            ),
            (
                LaunchSpec::Remote {
                    endpoint: "https://h/mcp".into(),
                    headers: BTreeMap::new(),
                    token_exchange: None,
                },
                LaunchSpec::Remote {
                    endpoint: "https://h/mcp2".into(),
                    headers: BTreeMap::new(),
                    token_exchange: None,
                },
            ),
        ];
        for (left, right) in pairs {
            assert_ne!(left.digest(), right.digest(), "{left:?} vs {right:?}");
        }
    }
}
