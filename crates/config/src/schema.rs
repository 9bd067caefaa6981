//! The configuration schema, serde-first: these types are what the YAML file (and a REST body)
//! says, before defaults that depend on a server's mode are applied. They serialize back to
//! the same shape, which is how a configuration is exported.

use std::collections::BTreeMap;

use std::time::Duration;

use mcpgw_core::{EventRetention, TokenExchange, Tool};
use serde::{Deserialize, Serialize};

use crate::de;
use crate::error::ConfigWarning;
use crate::expand::VariableReference;

/// A whole configuration file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a mapping of configuration sections such as mcp_servers, auth and rate_limit"
)]
pub struct GatewayConfig {
    /// Servers and groups by id; ids of both share one namespace.
    #[serde(default, deserialize_with = "de::unique_map")]
    pub mcp_servers: BTreeMap<String, ServerDefinition>,
    /// Curated endpoints by name: selections of tools from any servers and groups, each
    /// served at `/mcp/v/{name}` with its own access rules.
    #[serde(
        default,
        deserialize_with = "de::unique_map",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub endpoints: BTreeMap<String, crate::endpoints::EndpointDefinition>,
    /// Absent means discovery is off (and every `/api/discovery/*` answers 404).
    #[serde(
        default,
        deserialize_with = "de::present_section",
        skip_serializing_if = "Option::is_none"
    )]
    pub discovery: Option<DiscoveryConfig>,
    #[serde(default, deserialize_with = "de::null_as_default")]
    pub auth: AuthConfig,
    /// The web console under `/ui/`.
    #[serde(default, deserialize_with = "de::null_as_default")]
    pub console: ConsoleConfig,
    #[serde(default, deserialize_with = "de::null_as_default")]
    pub rate_limit: RateLimitConfig,
    #[serde(default, deserialize_with = "de::null_as_default")]
    pub event_log: EventLogConfig,
    /// Security events exported to audit sinks (files, syslog) as they happen; nothing is
    /// exported without sinks.
    #[serde(
        default,
        deserialize_with = "de::null_as_default",
        skip_serializing_if = "crate::audit::AuditConfig::is_default"
    )]
    pub audit: crate::audit::AuditConfig,
    /// OpenTelemetry traces exported over OTLP (off by default; the `OTEL_*` variables win).
    #[serde(
        default,
        deserialize_with = "de::null_as_default",
        skip_serializing_if = "crate::telemetry::TelemetryConfig::is_default"
    )]
    pub telemetry: crate::telemetry::TelemetryConfig,
    /// Where the gateway keeps its state. Absent (or empty): SQLite files under the data
    /// directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreConfig>,
    /// How replicas sharing one store work together.
    #[serde(default, deserialize_with = "de::null_as_default")]
    pub cluster: ClusterConfig,
    /// How servers' tools are pinned where their own definition says nothing (`off`, `warn`,
    /// `enforce`, or `{mode, approve_first}`); `off` by default.
    #[serde(default, skip_serializing_if = "is_default_pinning")]
    pub tool_pinning: mcpgw_core::ToolPinning,
    /// How aggregated tools and prompts are named on `/mcp`.
    #[serde(default)]
    pub tool_names: ToolNames,
    /// How long a tool call may take before the gateway answers a timeout.
    #[serde(default = "default_tool_timeout_s")]
    pub tool_timeout_s: u64,
    #[serde(default, deserialize_with = "de::null_as_default")]
    pub config_reload: ConfigReloadConfig,
    #[serde(default, deserialize_with = "de::null_as_default")]
    pub mcp_endpoint: McpEndpointConfig,
    /// `Host` header values the HTTP front answers on every route besides the loopback names
    /// and addresses (and, on a non-loopback listener, address literals): the names clients
    /// reach the gateway by, `gateway.example.com` (any port) or `gateway.example.com:8443`
    /// (that port only). `"*"` accepts any host (only behind a proxy that checks it). Use
    /// [`GatewayConfig::allowed_hosts`] to read it together with its older spelling.
    #[serde(
        default,
        deserialize_with = "de::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub allowed_hosts: Vec<String>,
    /// Start servers that declare no `tools` once, in the background, to learn their tools for
    /// the aggregated list (they are stopped again right after).
    #[serde(default = "default_true")]
    pub probe_tools: bool,
    /// How many servers are probed at once (1..64, default 4). Each probe is a start and a
    /// stop: more at once learn a large fleet's tools sooner and load the machine more.
    #[serde(default = "default_probe_concurrency")]
    pub probe_concurrency: u64,
    #[serde(skip)]
    pub(crate) variable_references: Vec<VariableReference>,
    #[serde(skip)]
    pub(crate) warnings: Vec<ConfigWarning>,
}

impl GatewayConfig {
    pub const DEFAULT_TOOL_TIMEOUT_S: u64 = 60;
    pub const DEFAULT_PROBE_CONCURRENCY: u64 = 4;

    /// The `Host` names the HTTP front answers besides loopback: `allowed_hosts` and its older
    /// spelling `mcp_endpoint.allowed_hosts` together, each name once.
    pub fn allowed_hosts(&self) -> Vec<String> {
        let mut hosts: Vec<String> = Vec::new();
        for host in self
            .allowed_hosts
            .iter()
            .chain(&self.mcp_endpoint.allowed_hosts)
        {
            if !hosts.contains(host) {
                hosts.push(host.clone());
            }
        }
        hosts
    }
}

fn default_probe_concurrency() -> u64 {
    GatewayConfig::DEFAULT_PROBE_CONCURRENCY
}

fn is_default_pinning(pinning: &mcpgw_core::ToolPinning) -> bool {
    *pinning == mcpgw_core::ToolPinning::OFF
}

fn default_true() -> bool {
    true
}

fn default_tool_timeout_s() -> u64 {
    GatewayConfig::DEFAULT_TOOL_TIMEOUT_S
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            mcp_servers: BTreeMap::new(),
            endpoints: BTreeMap::new(),
            discovery: None,
            auth: AuthConfig::default(),
            console: ConsoleConfig::default(),
            rate_limit: RateLimitConfig::default(),
            event_log: EventLogConfig::default(),
            audit: crate::audit::AuditConfig::default(),
            telemetry: crate::telemetry::TelemetryConfig::default(),
            store: None,
            cluster: ClusterConfig::default(),
            tool_pinning: mcpgw_core::ToolPinning::OFF,
            tool_names: ToolNames::default(),
            tool_timeout_s: GatewayConfig::DEFAULT_TOOL_TIMEOUT_S,
            config_reload: ConfigReloadConfig::default(),
            mcp_endpoint: McpEndpointConfig::default(),
            allowed_hosts: Vec::new(),
            probe_tools: true,
            probe_concurrency: GatewayConfig::DEFAULT_PROBE_CONCURRENCY,
            variable_references: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

/// Two configurations are equal when they configure the same thing; where the values came
/// from (variable references) and what was warned about do not count.
impl PartialEq for GatewayConfig {
    fn eq(&self, other: &Self) -> bool {
        self.mcp_servers == other.mcp_servers
            && self.endpoints == other.endpoints
            && self.discovery == other.discovery
            && self.auth == other.auth
            && self.rate_limit == other.rate_limit
            && self.event_log == other.event_log
            && self.audit == other.audit
            && self.telemetry == other.telemetry
            && self.store == other.store
            && self.cluster == other.cluster
            && self.tool_pinning == other.tool_pinning
            && self.tool_names == other.tool_names
            && self.tool_timeout_s == other.tool_timeout_s
            && self.probe_concurrency == other.probe_concurrency
            && self.config_reload == other.config_reload
    }
}

/// How a server is run: the `mode` key.
///
/// Besides the built-in modes, a definition may name a mode registered by whoever assembled
/// the gateway ([`ServerMode::Registered`]); it is valid only when the [`crate::ParseOptions`]
/// it is read with know that mode.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ServerMode {
    Subprocess,
    Docker,
    Remote,
    Group,
    /// A mode of one's own, with its settings under the `settings` key.
    Registered(String),
}

impl ServerMode {
    /// The built-in modes.
    pub const ALL: [ServerMode; 4] = [
        ServerMode::Subprocess,
        ServerMode::Docker,
        ServerMode::Remote,
        ServerMode::Group,
    ];

    pub fn as_str(&self) -> &str {
        match self {
            ServerMode::Subprocess => "subprocess",
            ServerMode::Docker => "docker",
            ServerMode::Remote => "remote",
            ServerMode::Group => "group",
            ServerMode::Registered(name) => name,
        }
    }

    /// The mode named `name`: a built-in one, or else a registered one.
    pub fn from_name(name: &str) -> Self {
        Self::ALL
            .into_iter()
            .find(|mode| mode.as_str() == name)
            .unwrap_or_else(|| ServerMode::Registered(name.to_owned()))
    }
}

impl std::fmt::Display for ServerMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ServerMode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ServerMode {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        Ok(Self::from_name(&name))
    }
}

/// How a group picks a member for each call: the groups domain's own type, so that a
/// configured strategy is the one the groups run.
pub use mcpgw_groups::GroupStrategy;

/// Which container CLI runs a docker-mode server when the Engine API is not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContainerRuntime {
    Docker,
    Podman,
}

/// One server (or group) as written under `mcp_servers`.
///
/// Every key of every mode is here, all optional, so that a key that belongs to another mode is
/// reported as exactly that (and not as an unknown key); defaults are applied when the
/// definition becomes a [`mcpgw_core::ServerSpec`] or a [`crate::GroupDefinition`], so an
/// exported definition says only what its author said.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a server definition mapping with a `mode` key"
)]
pub struct ServerDefinition {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ServerMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,

    /// subprocess: the program and its arguments; docker: a synonym of `args`.
    #[serde(
        default,
        deserialize_with = "de::optional_string_list",
        skip_serializing_if = "Option::is_none"
    )]
    pub command: Option<Vec<String>>,
    /// subprocess and docker: extra environment variables.
    #[serde(
        default,
        deserialize_with = "de::optional_string_map",
        skip_serializing_if = "Option::is_none"
    )]
    pub env: Option<BTreeMap<String, String>>,
    /// subprocess: the working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_ttl_s: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check_interval_s: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_consecutive_failures: Option<u32>,
    /// Tools listed before the first start.
    #[serde(
        default,
        deserialize_with = "de::optional_tools",
        skip_serializing_if = "Option::is_none"
    )]
    pub tools: Option<Vec<Tool>>,

    /// docker: the image to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// docker: what follows the image on `docker run` (replaces the image's command).
    #[serde(
        default,
        deserialize_with = "de::optional_string_list",
        skip_serializing_if = "Option::is_none"
    )]
    pub args: Option<Vec<String>>,
    /// docker: the container network; `none` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// docker: a memory limit such as `512m`.
    #[serde(
        default,
        deserialize_with = "de::optional_string_like",
        skip_serializing_if = "Option::is_none"
    )]
    pub memory: Option<String>,
    /// docker: a CPU limit such as `"1.5"`; a number is kept as its text.
    #[serde(
        default,
        deserialize_with = "de::optional_string_like",
        skip_serializing_if = "Option::is_none"
    )]
    pub cpus: Option<String>,
    /// docker: a read-only root filesystem; true when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// docker: volume mounts in `docker run -v` syntax.
    #[serde(
        default,
        deserialize_with = "de::optional_string_list",
        skip_serializing_if = "Option::is_none"
    )]
    pub volumes: Option<Vec<String>>,
    /// docker: run through this CLI instead of the Engine API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<ContainerRuntime>,
    /// docker: the Engine API to run on (`unix:///run/podman/podman.sock`, or a socket path);
    /// the gateway's default engine when absent. A server approved from a docker discovery
    /// source has its source's socket here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker_host: Option<String>,

    /// subprocess, docker, remote: the `_meta` key under which each tool call carries the
    /// calling principal (`com.example/caller`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller_meta: Option<String>,
    /// subprocess, docker, remote: how this server's tools are pinned (`off`, `warn`,
    /// `enforce`, or `{mode, approve_first}`); the top-level `tool_pinning` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_pinning: Option<mcpgw_core::ToolPinning>,

    /// remote: the MCP Streamable HTTP endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// remote: headers sent with every request (authorization, ...).
    #[serde(
        default,
        deserialize_with = "de::optional_string_map",
        skip_serializing_if = "Option::is_none"
    )]
    pub headers: Option<BTreeMap<String, String>>,
    /// remote: calls carry a token of the server's own, exchanged for the caller's access
    /// token at the authorization server (RFC 8693).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_exchange: Option<TokenExchange>,

    /// a registered mode: the settings its launcher reads, checked by the mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<serde_json::Map<String, serde_json::Value>>,

    /// group: how a member is chosen; `round_robin` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<GroupStrategy>,
    /// group: members in rotation needed for the group to be healthy; 1 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_healthy: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<Vec<GroupMemberDefinition>>,
}

/// One member of a group as written in the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupMemberDefinition {
    /// The member server's id (`member_id` is accepted, as in the REST member-add body).
    #[serde(alias = "member_id")]
    pub id: String,
    /// Share of calls under weighted strategies; 1 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// Order under the `priority` strategy, lowest first; 0 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
}

/// The `discovery` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DiscoveryConfig {
    pub refresh_interval_s: u64,
    #[serde(deserialize_with = "de::null_as_default")]
    pub sources: Vec<DiscoverySourceConfig>,
}

impl DiscoveryConfig {
    pub const DEFAULT_REFRESH_INTERVAL_S: u64 = 30;

    /// Every source with its id: the `id` given in the file, else `{type}-{index}`.
    pub fn sources_with_ids(&self) -> impl Iterator<Item = (String, &DiscoverySourceConfig)> {
        self.sources
            .iter()
            .enumerate()
            .map(|(index, source)| (source.source_id(index), source))
    }
}

impl Default for DiscoveryConfig {
    fn default() -> Self {
        Self {
            refresh_interval_s: Self::DEFAULT_REFRESH_INTERVAL_S,
            sources: Vec::new(),
        }
    }
}

/// One discovery source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoverySourceConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `docker` or `filesystem` (`source_type` is accepted, as in the REST body).
    #[serde(rename = "type", alias = "source_type")]
    pub source_type: String,
    #[serde(default)]
    pub mode: DiscoveryMode,
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    /// Source-specific settings, such as `socket_path` for docker.
    #[serde(default, deserialize_with = "de::null_as_default")]
    pub config: serde_json::Map<String, serde_json::Value>,
}

impl DiscoverySourceConfig {
    /// The source types this crate validates; the gateway has an adapter for each.
    pub const KNOWN_TYPES: [&'static str; 2] = ["docker", "filesystem"];

    /// The id given in the file, else `{type}-{index}` where `index` is the source's position.
    pub fn source_id(&self, index: usize) -> String {
        self.id
            .clone()
            .unwrap_or_else(|| format!("{}-{index}", self.source_type))
    }
}

fn enabled_by_default() -> bool {
    true
}

/// Whether a discovery source only adds servers or also removes the ones that disappeared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiscoveryMode {
    #[default]
    Additive,
    Authoritative,
}

impl DiscoveryMode {
    pub fn as_str(self) -> &'static str {
        match self {
            DiscoveryMode::Additive => "additive",
            DiscoveryMode::Authoritative => "authoritative",
        }
    }
}

/// The `store` section: a PostgreSQL database that several replicas share, instead of the SQLite
/// files under the data directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// `postgres://user@host:port/database` (a password in it is masked wherever the
    /// configuration is shown; prefer `password_file` or `${VAR}`).
    pub url: String,
    /// A file holding the password (a mounted secret); its content, without a trailing newline,
    /// wins over a password in the URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_file: Option<String>,
    /// Connections this replica opens at most (1..=100, default 8).
    #[serde(default = "default_store_max_connections")]
    pub max_connections: u64,
}

impl StoreConfig {
    pub const DEFAULT_MAX_CONNECTIONS: u64 = 8;
}

fn default_store_max_connections() -> u64 {
    StoreConfig::DEFAULT_MAX_CONNECTIONS
}

/// The `cluster` section: how replicas that share a PostgreSQL store see each other. Without a
/// `store` section only `secret_file` matters (a lone gateway has no fleet).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// This replica's name in the fleet view and the event log; default the host name (a
    /// pod's name on Kubernetes), else the data directory's instance id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica_id: Option<String>,
    /// How often a replica records that it is alive and what its servers are doing (1..=60,
    /// default 5).
    pub heartbeat_interval_s: u64,
    /// How long work that must run once (discovery scans, event-log compaction, the
    /// configuration file watch) stays with a replica that stopped renewing it (3..=300,
    /// default 15, more than the heartbeat interval).
    pub lease_s: u64,
    /// How often every shared record is read again, whatever notifications said (1..=3600,
    /// default 30): what heals a notification lost with a dropped connection.
    pub resync_interval_s: u64,
    /// A file holding the fleet's shared secret (at least 32 characters): it signs MCP session
    /// ids and input-required request states so that any replica resumes them. The
    /// `MCP_CLUSTER_SECRET` environment variable may give it instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_file: Option<String>,
}

impl ClusterConfig {
    pub const DEFAULT_HEARTBEAT_INTERVAL_S: u64 = 5;
    pub const DEFAULT_LEASE_S: u64 = 15;
    pub const DEFAULT_RESYNC_INTERVAL_S: u64 = 30;
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            replica_id: None,
            heartbeat_interval_s: Self::DEFAULT_HEARTBEAT_INTERVAL_S,
            lease_s: Self::DEFAULT_LEASE_S,
            resync_interval_s: Self::DEFAULT_RESYNC_INTERVAL_S,
            secret_file: None,
        }
    }
}

/// The `console` section: the web console under `/ui/`, its sessions, and single sign-on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConsoleConfig {
    /// Serve the console (default true). Off: every `/ui/` path answers 404.
    pub enabled: bool,
    /// A session not used for this many minutes ends (1..=1440, default 30).
    pub session_idle_minutes: u64,
    /// A session ends this many hours after signing in, however busy (1..=168, default 12).
    pub session_max_hours: u64,
    /// Single sign-on with an OpenID provider (authorization code with PKCE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sso: Option<ConsoleSsoConfig>,
}

impl ConsoleConfig {
    pub const DEFAULT_SESSION_IDLE_MINUTES: u64 = 30;
    pub const DEFAULT_SESSION_MAX_HOURS: u64 = 12;
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            session_idle_minutes: Self::DEFAULT_SESSION_IDLE_MINUTES,
            session_max_hours: Self::DEFAULT_SESSION_MAX_HOURS,
            sso: None,
        }
    }
}

/// `console.sso`: the console as a client (relying party) of an OpenID provider. Claims are read
/// as bearer tokens of the same issuer are (its entry in `auth.oauth.issuers`, or `auth.oidc`),
/// so a person has the same principal and groups either way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsoleSsoConfig {
    /// The provider's issuer identifier; its metadata is discovered from it.
    pub issuer: String,
    /// The console's client id, registered with the provider.
    pub client_id: String,
    /// The client secret; absent for a public client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// Where the provider sends browsers back, as registered with it
    /// (`https://gw.example.com/ui/login/sso/callback`). Absent: the address each browser
    /// reached the gateway at, plus `/ui/login/sso/callback`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
    /// Scopes asked for besides `openid` (say `profile`, or the one that adds a groups claim).
    #[serde(default, deserialize_with = "de::null_as_default")]
    pub scopes: Vec<String>,
}

/// The `auth` section: `enabled`, `allow_anonymous`, `api_key`, `oidc`, `opa` and
/// `role_assignments`, plus `trusted_proxies` and `oauth` (the gateway as an OAuth 2.1
/// resource server for MCP clients).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    pub enabled: bool,
    pub allow_anonymous: bool,
    #[serde(deserialize_with = "de::null_as_default")]
    pub api_key: ApiKeyConfig,
    #[serde(deserialize_with = "de::null_as_default")]
    pub oidc: OidcConfig,
    #[serde(deserialize_with = "de::null_as_default")]
    pub oauth: OAuthConfig,
    #[serde(deserialize_with = "de::null_as_default")]
    pub opa: OpaConfig,
    #[serde(deserialize_with = "de::null_as_default")]
    pub role_assignments: Vec<RoleAssignmentConfig>,
    /// Network ranges (`10.0.0.0/8`, `::1`) whose forwarding headers are believed when finding
    /// a client's address.
    #[serde(deserialize_with = "de::null_as_default")]
    pub trusted_proxies: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiKeyConfig {
    pub enabled: bool,
    pub header_name: String,
}

impl Default for ApiKeyConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            header_name: "X-API-Key".to_owned(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OidcConfig {
    pub enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// Discovered from the issuer when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwks_uri: Option<String>,
    pub subject_claim: String,
    pub groups_claim: String,
    pub tenant_claim: String,
}

impl Default for OidcConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            issuer: None,
            audience: None,
            jwks_uri: None,
            subject_claim: "sub".to_owned(),
            groups_claim: "groups".to_owned(),
            tenant_claim: "tenant_id".to_owned(),
        }
    }
}

/// `auth.oauth`: what MCP clients that follow the MCP authorization flow need. The gateway
/// publishes its protected resource metadata (RFC 9728) naming `resource` and the issuers, and
/// accepts access tokens of those issuers that were minted for `resource` (RFC 8707), held to
/// their scopes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OAuthConfig {
    /// The canonical URI of the gateway's MCP endpoint as clients reach it
    /// (`https://mcp.example.com/mcp`). Absent: the URL each request was addressed to (its
    /// `Host` and `/mcp`), which is right unless a proxy rewrites the host or the scheme.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// The authorization servers whose access tokens are accepted.
    #[serde(deserialize_with = "de::null_as_default")]
    pub issuers: Vec<IssuerConfig>,
}

/// One trusted authorization server of `auth.oauth.issuers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssuerConfig {
    /// The issuer identifier, compared exactly with a token's `iss`; also the base of metadata
    /// discovery.
    pub issuer: String,
    /// The audience its tokens must name; absent: `auth.oauth.resource` (or the URL the
    /// request was addressed to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// Discovered from the issuer's metadata when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_uri: Option<String>,
    #[serde(default = "default_subject_claim")]
    pub subject_claim: String,
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
    #[serde(default = "default_tenant_claim")]
    pub tenant_claim: String,
    /// The claim that lists the granted scopes: `scope` (a space-separated string) by default;
    /// `scp` (an array) for issuers that use it.
    #[serde(default = "default_scope_claim")]
    pub scope_claim: String,
    /// Seconds of clock difference allowed when judging `exp` and `nbf` (0..=300).
    #[serde(default = "default_clock_skew_s")]
    pub clock_skew_s: u64,
    /// Scopes of this issuer that stand for a role (`mcp:ops: operator`), besides the
    /// built-in `mcp:tools`, `mcp:tools:<id>` and `mcp:admin`.
    #[serde(default, deserialize_with = "de::null_as_default")]
    pub scopes: BTreeMap<String, String>,
}

fn default_subject_claim() -> String {
    "sub".to_owned()
}

fn default_groups_claim() -> String {
    "groups".to_owned()
}

fn default_tenant_claim() -> String {
    "tenant_id".to_owned()
}

fn default_clock_skew_s() -> u64 {
    30
}

fn default_scope_claim() -> String {
    "scope".to_owned()
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OpaConfig {
    pub enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_path: Option<String>,
}

/// A static role assignment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleAssignmentConfig {
    /// `user:<id>`, `group:<id>`, `service:<id>`.
    pub principal: String,
    pub role: String,
    /// `global` or `tenant:<tenant_id>`; `global` when absent.
    #[serde(default = "global_scope")]
    pub scope: String,
}

fn global_scope() -> String {
    "global".to_owned()
}

/// The `rate_limit` section; the environment (`MCP_RATE_LIMIT_RPS`, `MCP_RATE_LIMIT_BURST`) wins
/// over it, which the binary applies.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateLimitConfig {
    /// Steady requests per second; 0 turns limiting off.
    pub rps: f64,
    pub burst: u32,
    /// Where the buckets are kept: `local` (in each replica, the default) or `redis` (one limit
    /// for the whole fleet; `redis` says where).
    #[serde(skip_serializing_if = "RateLimitBackend::is_local")]
    pub backend: RateLimitBackend,
    /// The Redis of `backend: redis`; required then, and read only then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis: Option<RedisRateLimitConfig>,
}

impl RateLimitConfig {
    /// The Redis to keep the buckets in, when `backend` is `redis`.
    pub fn redis_backend(&self) -> Option<&RedisRateLimitConfig> {
        match self.backend {
            RateLimitBackend::Local => None,
            RateLimitBackend::Redis => self.redis.as_ref(),
        }
    }
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self {
            rps: 10.0,
            burst: 20,
            backend: RateLimitBackend::Local,
            redis: None,
        }
    }
}

/// The keys of the `rate_limit` section as written, before the check across them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RateLimitFields {
    rps: f64,
    burst: u32,
    backend: RateLimitBackend,
    redis: Option<RedisRateLimitConfig>,
}

impl Default for RateLimitFields {
    fn default() -> Self {
        let RateLimitConfig {
            rps,
            burst,
            backend,
            redis,
        } = RateLimitConfig::default();
        Self {
            rps,
            burst,
            backend,
            redis,
        }
    }
}

impl<'de> Deserialize<'de> for RateLimitConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let RateLimitFields {
            rps,
            burst,
            backend,
            redis,
        } = RateLimitFields::deserialize(deserializer)?;
        if backend == RateLimitBackend::Redis && redis.is_none() {
            return Err(serde::de::Error::missing_field("redis"));
        }
        Ok(Self {
            rps,
            burst,
            backend,
            redis,
        })
    }
}

/// Where rate-limit buckets are kept: the `rate_limit.backend` key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RateLimitBackend {
    /// In each replica's memory: behind N replicas a caller gets up to N times the rate.
    #[default]
    Local,
    /// In Redis, shared by every replica that names the same one: one limit for the fleet.
    Redis,
}

impl RateLimitBackend {
    pub fn is_local(&self) -> bool {
        *self == RateLimitBackend::Local
    }
}

/// What rate-limited requests get while Redis does not answer: `rate_limit.redis.on_unavailable`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RateLimitOnUnavailable {
    /// Admitted: an outage of Redis never stops traffic, and limits do not hold meanwhile.
    #[default]
    Open,
    /// Refused with 429 and `Retry-After: 1`; the replica's readiness probe answers 503.
    Closed,
}

/// `rate_limit.redis`: the Redis that keeps the fleet's buckets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisRateLimitConfig {
    /// `redis://[[user]:password@]host[:port][/database]`, or `redis+unix:///path` /
    /// `unix:///path`. Give the password as `${VAR}`; it is masked wherever the configuration
    /// is shown.
    #[serde(deserialize_with = "redis_url")]
    pub url: String,
    /// How long one request may wait for Redis before it is decided without it, in
    /// milliseconds (1..=60000, default 50).
    #[serde(
        default = "default_redis_timeout_ms",
        deserialize_with = "redis_timeout_ms"
    )]
    pub timeout_ms: u64,
    /// `open` (default) or `closed`.
    #[serde(default)]
    pub on_unavailable: RateLimitOnUnavailable,
}

impl RedisRateLimitConfig {
    pub const DEFAULT_TIMEOUT_MS: u64 = 50;
    pub const MAX_TIMEOUT_MS: u64 = 60_000;

    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// Whether requests are refused while Redis does not answer (`on_unavailable: closed`).
    pub fn fails_closed(&self) -> bool {
        self.on_unavailable == RateLimitOnUnavailable::Closed
    }
}

fn default_redis_timeout_ms() -> u64 {
    RedisRateLimitConfig::DEFAULT_TIMEOUT_MS
}

/// The schemes of the Redis URLs the gateway can use, as an error names them.
const REDIS_URL_FORMS: &str =
    "redis://[[user]:password@]host[:port][/database], redis+unix:///path or unix:///path";

/// A Redis URL: one of the schemes the gateway can use, with something after it. The value is
/// never repeated in an error: it may hold a password.
fn redis_url<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    use serde::de::{Error, Unexpected};
    let url = String::deserialize(deserializer)?;
    match url.split_once("://") {
        Some(("redis" | "redis+unix" | "unix", rest)) if !rest.is_empty() => Ok(url),
        Some(("rediss", _)) => Err(D::Error::invalid_value(
            Unexpected::Other("a TLS URL (rediss://), which is not supported"),
            &REDIS_URL_FORMS,
        )),
        _ => Err(D::Error::invalid_value(
            Unexpected::Other("a text that is no Redis URL"),
            &REDIS_URL_FORMS,
        )),
    }
}

fn redis_timeout_ms<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    use serde::de::{Error, Unexpected};
    let milliseconds = u64::deserialize(deserializer)?;
    if (1..=RedisRateLimitConfig::MAX_TIMEOUT_MS).contains(&milliseconds) {
        Ok(milliseconds)
    } else {
        Err(D::Error::invalid_value(
            Unexpected::Unsigned(milliseconds),
            &"a number of milliseconds from 1 to 60000",
        ))
    }
}

/// The `event_log` section: how much of the persistent event log is kept, and how often
/// compaction applies it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EventLogConfig {
    /// Events older than this many days are removed; 0 keeps them whatever their age.
    pub max_age_days: u64,
    /// Only the newest this many events are kept; 0 keeps them however many there are.
    pub max_events: u64,
    /// Seconds between two compactions.
    pub compaction_interval_s: u64,
}

impl EventLogConfig {
    pub const DEFAULT_MAX_AGE_DAYS: u64 = 7;
    pub const DEFAULT_MAX_EVENTS: u64 = 1_000_000;
    pub const DEFAULT_COMPACTION_INTERVAL_S: u64 = 60;

    /// The retention compaction applies: a bound of 0 is no bound.
    pub fn retention(&self) -> EventRetention {
        EventRetention {
            max_age: (self.max_age_days > 0)
                .then(|| Duration::from_secs(self.max_age_days.saturating_mul(86_400))),
            max_events: (self.max_events > 0).then_some(self.max_events),
        }
    }

    pub fn compaction_interval(&self) -> Duration {
        Duration::from_secs(self.compaction_interval_s)
    }
}

impl Default for EventLogConfig {
    fn default() -> Self {
        Self {
            max_age_days: Self::DEFAULT_MAX_AGE_DAYS,
            max_events: Self::DEFAULT_MAX_EVENTS,
            compaction_interval_s: Self::DEFAULT_COMPACTION_INTERVAL_S,
        }
    }
}

/// How aggregated tools (and prompts) are named on `/mcp`: the `tool_names` key.
///
/// It is written either as one word, `prefixed` (the default: every name is
/// `{server_or_group_id}__{tool}`) or `bare` (the same, except that a name only one server or
/// group exposes is listed as it is), or as a mapping of the settings below. The two words are
/// shorthands: `prefixed` is `{prefix: id}` and `bare` is `{prefix: id, unique_bare: true}`,
/// with every other setting at its default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolNames {
    /// What separates a prefix from the upstream's own name: 1 to 4 characters, each `_`, `-`
    /// or `.`. No server or group id may contain it.
    pub separator: String,
    /// What a name is prefixed with.
    pub prefix: ToolPrefix,
    /// With [`ToolPrefix::Custom`]: the prefix of each server or group id listed here; ids not
    /// listed use their id.
    pub prefixes: BTreeMap<String, String>,
    /// With [`ToolPrefix::Id`] or [`ToolPrefix::Custom`]: a name only one server or group
    /// exposes is listed without its prefix.
    pub unique_bare: bool,
    /// The longest name listed, in characters (32 to 128); longer ones are shortened.
    pub max_length: u64,
}

/// What a listed tool name starts with: the `tool_names.prefix` key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolPrefix {
    /// The id of the server or group that owns the tool.
    #[default]
    Id,
    /// The owner's entry in `tool_names.prefixes`, else its id.
    Custom,
    /// Nothing: every tool is listed under its own name, and two tools with one name collide.
    None,
}

impl ToolPrefix {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolPrefix::Id => "id",
            ToolPrefix::Custom => "custom",
            ToolPrefix::None => "none",
        }
    }
}

impl ToolNames {
    pub const DEFAULT_SEPARATOR: &'static str = "__";
    pub const DEFAULT_MAX_LENGTH: u64 = 64;
    /// The range of `max_length`: (minimum, maximum), both allowed.
    pub const MAX_LENGTH: (u64, u64) = (32, 128);
    /// The characters a separator is made of.
    pub const SEPARATOR_CHARACTERS: [char; 3] = ['_', '-', '.'];
    /// The longest separator, in characters.
    pub const MAX_SEPARATOR_LENGTH: usize = 4;

    /// `tool_names: prefixed`, the default: every name is `{id}__{tool}`.
    pub fn prefixed() -> Self {
        Self {
            separator: Self::DEFAULT_SEPARATOR.to_owned(),
            prefix: ToolPrefix::Id,
            prefixes: BTreeMap::new(),
            unique_bare: false,
            max_length: Self::DEFAULT_MAX_LENGTH,
        }
    }

    /// `tool_names: bare`: `prefixed`, except that a name only one server or group exposes is
    /// listed as it is.
    pub fn bare() -> Self {
        Self {
            unique_bare: true,
            ..Self::prefixed()
        }
    }

    /// The prefix of the tools of server or group `id`: its custom prefix or its id; `None`
    /// when names are not prefixed.
    pub fn prefix_of<'a>(&'a self, id: &'a str) -> Option<&'a str> {
        match self.prefix {
            ToolPrefix::None => None,
            ToolPrefix::Id => Some(id),
            ToolPrefix::Custom => Some(self.prefixes.get(id).map_or(id, String::as_str)),
        }
    }

    /// The name `name` of server or group `id` is listed under when it is prefixed, before any
    /// shortening: `{prefix}{separator}{name}`, or `name` itself when names are not prefixed.
    pub fn prefixed_name(&self, id: &str, name: &str) -> String {
        match self.prefix_of(id) {
            Some(prefix) => format!("{prefix}{}{name}", self.separator),
            None => name.to_owned(),
        }
    }

    /// Whether a name only one server or group exposes is listed without its prefix.
    pub fn lists_unique_bare(&self) -> bool {
        self.unique_bare && self.prefix != ToolPrefix::None
    }

    /// Why a server or group `id` cannot join `owners` (the ids of the servers and groups there
    /// are, itself left out) under these names: its id contains the separator, or its prefix
    /// is another owner's (that owner's custom prefix is its id, or its own custom prefix is
    /// that owner's id or custom prefix). A custom prefix is reserved for the id it is written
    /// for even while that id does not exist.
    pub fn check_new_owner<'a>(
        &self,
        id: &str,
        owners: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), ToolNameConflict> {
        if id.contains(self.separator.as_str()) {
            return Err(ToolNameConflict::SeparatorInId {
                id: id.to_owned(),
                separator: self.separator.clone(),
            });
        }
        let Some(prefix) = self.prefix_of(id) else {
            return Ok(());
        };
        let taken = |other: &str| ToolNameConflict::PrefixTaken {
            id: id.to_owned(),
            other: other.to_owned(),
            prefix: prefix.to_owned(),
        };
        if self.prefix == ToolPrefix::Custom
            && let Some((other, _)) = self
                .prefixes
                .iter()
                .find(|(other, custom)| other.as_str() != id && custom.as_str() == prefix)
        {
            return Err(taken(other));
        }
        for other in owners {
            if other != id && self.prefix_of(other) == Some(prefix) {
                return Err(taken(other));
            }
        }
        Ok(())
    }
}

impl Default for ToolNames {
    fn default() -> Self {
        Self::prefixed()
    }
}

/// Why a server or group cannot be added under the tool names in effect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolNameConflict {
    /// The id contains the separator of tool names.
    #[error(
        "id `{id}` contains `{separator}`, which separates prefixes from tool names \
         (tool_names.separator); choose an id without it"
    )]
    SeparatorInId { id: String, separator: String },
    /// The owner's prefix is another owner's.
    #[error(
        "the tools of `{id}` would be listed with the prefix `{prefix}`, which `{other}` has; \
         choose another id, or another prefix in tool_names.prefixes"
    )]
    PrefixTaken {
        id: String,
        other: String,
        prefix: String,
    },
}

impl Serialize for ToolNames {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        // The shorthands are written as they were (and as most files say them).
        if *self == Self::prefixed() {
            return serializer.serialize_str("prefixed");
        }
        if *self == Self::bare() {
            return serializer.serialize_str("bare");
        }
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("separator", &self.separator)?;
        map.serialize_entry("prefix", &self.prefix)?;
        if !self.prefixes.is_empty() {
            map.serialize_entry("prefixes", &self.prefixes)?;
        }
        map.serialize_entry("unique_bare", &self.unique_bare)?;
        map.serialize_entry("max_length", &self.max_length)?;
        map.end()
    }
}

/// The keys of the `tool_names` mapping as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct ToolNamesFields {
    separator: String,
    prefix: ToolPrefix,
    #[serde(deserialize_with = "de::null_as_default")]
    prefixes: BTreeMap<String, String>,
    unique_bare: bool,
    max_length: u64,
}

impl Default for ToolNamesFields {
    fn default() -> Self {
        let ToolNames {
            separator,
            prefix,
            prefixes,
            unique_bare,
            max_length,
        } = ToolNames::default();
        Self {
            separator,
            prefix,
            prefixes,
            unique_bare,
            max_length,
        }
    }
}

impl<'de> Deserialize<'de> for ToolNames {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ToolNamesVisitor;

        impl<'de> serde::de::Visitor<'de> for ToolNamesVisitor {
            type Value = ToolNames;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("`prefixed`, `bare` or a mapping of tool naming settings")
            }

            fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<ToolNames, E> {
                match value {
                    "prefixed" => Ok(ToolNames::prefixed()),
                    "bare" => Ok(ToolNames::bare()),
                    other => Err(E::unknown_variant(other, &["prefixed", "bare"])),
                }
            }

            fn visit_unit<E: serde::de::Error>(self) -> Result<ToolNames, E> {
                Ok(ToolNames::default())
            }

            fn visit_none<E: serde::de::Error>(self) -> Result<ToolNames, E> {
                Ok(ToolNames::default())
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<ToolNames, A::Error> {
                let ToolNamesFields {
                    separator,
                    prefix,
                    prefixes,
                    unique_bare,
                    max_length,
                } = ToolNamesFields::deserialize(serde::de::value::MapAccessDeserializer::new(
                    map,
                ))?;
                Ok(ToolNames {
                    separator,
                    prefix,
                    prefixes,
                    unique_bare,
                    max_length,
                })
            }
        }

        deserializer.deserialize_any(ToolNamesVisitor)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConfigReloadConfig {
    /// Reload when the file changes on disk.
    pub watch: bool,
}

/// The MCP endpoint (`/mcp`) as clients reach it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpEndpointConfig {
    /// The older spelling of the top-level `allowed_hosts`, which it joins: the names count on
    /// every route, not only on `/mcp`.
    pub allowed_hosts: Vec<String>,
    /// Browser `Origin`s `/mcp` accepts besides the gateway's own and those of
    /// `MCP_CORS_ORIGINS` (requests without an `Origin`, as CLI clients send, always pass):
    /// `https://app.example.com`, `http://localhost:*` (any port), `null`, or `"*"` (any).
    pub allowed_origins: Vec<String>,
    /// Seconds between keep-alive comments on idle SSE streams, so proxies keep them open.
    pub sse_keep_alive_s: u64,
}

impl Default for McpEndpointConfig {
    fn default() -> Self {
        Self {
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            sse_keep_alive_s: 15,
        }
    }
}
