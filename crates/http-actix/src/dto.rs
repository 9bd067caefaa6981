//! The wire formats of the REST API. They live here, in the adapter, and are built from the
//! domain's types; nothing in the domain knows these shapes.

use std::collections::BTreeMap;

use mcpgw_core::{ContainerEngine, LaunchSpec, ServerSnapshot, ServerState, Tool, ToolSource};
use mcpgw_gateway::groups_domain::{GroupState, GroupStrategy};
use mcpgw_gateway::{GroupView, MemberView};
use serde::Serialize;
use utoipa::ToSchema;

mod requests;

pub use requests::{
    AddGroupMemberRequest, ApiKeyId, CheckPermissionRequest, CreateApiKeyRequest,
    CreateGroupRequest, CreateRoleRequest, CreateServerRequest, McpServerId, PolicyToolTarget,
    PrincipalParam, RoleAssignmentRequest, RoleNameParam, SetPolicyRequest, UpdateGroupRequest,
    UpdateRoleRequest, UpdateServerRequest,
};
pub(crate) use requests::{
    DiscoveryEnableRequest, DiscoverySourceId, DiscoverySourceRequest, DiscoverySourceUpdate,
    registered_mode_variant,
};

/// A server's lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum StateName {
    Cold,
    Initializing,
    Ready,
    Degraded,
    Dead,
}

impl From<ServerState> for StateName {
    fn from(state: ServerState) -> Self {
        match state {
            ServerState::Cold => StateName::Cold,
            ServerState::Initializing => StateName::Initializing,
            ServerState::Ready => StateName::Ready,
            ServerState::Degraded => StateName::Degraded,
            ServerState::Dead => StateName::Dead,
        }
    }
}

/// How a server is run: `subprocess`, `docker`, `remote`, or a mode the gateway's embedder
/// registered. (`group` is a mode of the configuration file, but groups are served by
/// `/api/groups`, not here.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(example = "subprocess")]
#[serde(transparent)]
pub struct ModeName(pub String);

impl ModeName {
    fn of(launch: &LaunchSpec) -> Self {
        Self(launch.mode().to_owned())
    }
}

/// Where a server's definition came from: `config` servers change only with the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OriginName {
    Config,
    Api,
    Discovery,
}

impl OriginName {
    fn of(origin: &mcpgw_core::ServerOrigin) -> Self {
        match origin {
            mcpgw_core::ServerOrigin::Config => OriginName::Config,
            mcpgw_core::ServerOrigin::Api => OriginName::Api,
            mcpgw_core::ServerOrigin::Discovery { .. } => OriginName::Discovery,
        }
    }
}

/// Where a tool list came from: `live` from the running (or last running) server,
/// `predefined` from the server's definition before its first start, `stored` listed by the
/// server under the same definition before the gateway's last restart (and kept since),
/// `unknown` when none of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ToolSourceName {
    Live,
    Predefined,
    Stored,
    Unknown,
}

impl From<ToolSource> for ToolSourceName {
    fn from(source: ToolSource) -> Self {
        match source {
            ToolSource::Live => ToolSourceName::Live,
            ToolSource::Predefined => ToolSourceName::Predefined,
            ToolSource::Stored => ToolSourceName::Stored,
            ToolSource::Unknown => ToolSourceName::Unknown,
        }
    }
}

/// An MCP `Tool` object, exactly as the upstream server describes it, with its own
/// (unprefixed) name. Documentation only: tools pass through as the MCP JSON.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpTool {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A JSON Schema object describing the tool's arguments.
    #[schema(value_type = Object)]
    pub input_schema: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub output_schema: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub annotations: Option<serde_json::Value>,
}

/// One server in the list.
#[derive(Debug, Serialize, ToSchema)]
pub struct ServerSummary {
    pub mcp_server_id: String,
    pub state: StateName,
    pub mode: ModeName,
    pub description: Option<String>,
    pub origin: OriginName,
    /// How many tools the server has (live or predefined; 0 when unknown).
    pub tool_count: usize,
    pub consecutive_failures: u32,
}

impl From<&ServerSnapshot> for ServerSummary {
    fn from(snapshot: &ServerSnapshot) -> Self {
        Self {
            mcp_server_id: snapshot.id().to_string(),
            state: snapshot.state.into(),
            mode: ModeName::of(&snapshot.spec.launch),
            description: snapshot.spec.description.clone(),
            origin: OriginName::of(&snapshot.spec.origin),
            tool_count: snapshot.tool_count,
            consecutive_failures: snapshot.consecutive_failures,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ServerList {
    pub mcp_servers: Vec<ServerSummary>,
}

/// The health of one server. Timestamps are UTC without an offset, with microseconds
/// (`2026-11-21T14:03:07.123456`).
#[derive(Debug, Serialize, ToSchema)]
pub struct HealthStatus {
    pub mcp_server_id: String,
    pub state: StateName,
    /// True exactly when the state is `ready`.
    pub healthy: bool,
    pub consecutive_failures: u32,
    pub max_consecutive_failures: u32,
    /// The last start failure, crash or failed health check, cleared by a successful start.
    pub last_error: Option<String>,
    #[schema(example = "2026-11-21T14:03:07.123456")]
    pub last_health_check_at: Option<String>,
    pub last_health_check_ok: Option<bool>,
    /// How long an automatic restart still waits because of the restart backoff.
    pub restart_backoff_remaining_ms: u64,
    #[schema(example = "2026-11-21T14:03:07.123456")]
    pub started_at: Option<String>,
    #[schema(example = "2026-11-21T14:03:07.123456")]
    pub last_used_at: Option<String>,
    pub in_flight_calls: usize,
    pub total_starts: u64,
}

impl From<&ServerSnapshot> for HealthStatus {
    fn from(snapshot: &ServerSnapshot) -> Self {
        Self {
            mcp_server_id: snapshot.id().to_string(),
            state: snapshot.state.into(),
            healthy: snapshot.state == ServerState::Ready,
            consecutive_failures: snapshot.consecutive_failures,
            max_consecutive_failures: snapshot.spec.max_consecutive_failures,
            last_error: snapshot.last_error.clone(),
            last_health_check_at: snapshot.last_health_check_at.map(|at| at.to_string()),
            last_health_check_ok: snapshot.last_health_check_ok,
            restart_backoff_remaining_ms: u64::try_from(
                snapshot.restart_backoff_remaining.as_millis(),
            )
            .unwrap_or(u64::MAX),
            started_at: snapshot.started_at.map(|at| at.to_string()),
            last_used_at: snapshot.last_used_at.map(|at| at.to_string()),
            in_flight_calls: snapshot.in_flight_calls,
            total_starts: snapshot.total_starts,
        }
    }
}

/// What a secret-bearing map shows: its keys, each value replaced by `"***"`.
fn masked(values: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    values
        .keys()
        .map(|key| (key.clone(), "***".to_owned()))
        .collect()
}

/// The launch fields of a `subprocess` server.
#[derive(Debug, Serialize, ToSchema)]
pub struct SubprocessLaunch {
    pub command: Vec<String>,
    /// Variable names with every value shown as `"***"`.
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
}

/// The launch fields of a `docker` server.
#[derive(Debug, Serialize, ToSchema)]
pub struct DockerLaunch {
    pub image: String,
    pub args: Vec<String>,
    /// Variable names with every value shown as `"***"`.
    pub env: BTreeMap<String, String>,
    pub network: String,
    pub memory: Option<String>,
    pub cpus: Option<String>,
    pub read_only: bool,
    pub volumes: Vec<String>,
    /// `docker` or `podman` when a command-line client runs the container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<&'static str>,
    /// The Engine API the container runs on, when it is not the gateway's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub docker_host: Option<String>,
}

/// The launch fields of a `remote` server.
#[derive(Debug, Serialize, ToSchema)]
pub struct RemoteLaunch {
    pub endpoint: String,
    /// Header names with every value shown as `"***"`.
    pub headers: BTreeMap<String, String>,
    /// How calls get a token of the server's own for each caller, when configured; the client
    /// secret shown as `"***"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_exchange: Option<TokenExchangeView>,
}

/// A remote server's token exchange settings, secret masked.
#[derive(Debug, Serialize, ToSchema)]
pub struct TokenExchangeView {
    pub token_endpoint: String,
    pub client_id: String,
    /// Always `"***"`.
    pub client_secret: String,
    /// `client_secret_basic` or `client_secret_post`.
    pub client_auth: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// The launch fields of a server in a mode the gateway's embedder registered.
#[derive(Debug, Serialize, ToSchema)]
pub struct RegisteredLaunch {
    /// The mode's settings; values under keys that name a secret (`token`, `password`, ...)
    /// are shown as `"***"`.
    #[schema(value_type = Object)]
    pub settings: serde_json::Map<String, serde_json::Value>,
}

/// The fields of the server's mode.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum LaunchDetails {
    Subprocess(SubprocessLaunch),
    Docker(DockerLaunch),
    Remote(RemoteLaunch),
    Registered(RegisteredLaunch),
}

impl LaunchDetails {
    fn of(launch: &LaunchSpec) -> Self {
        match launch {
            LaunchSpec::Subprocess { command, env, cwd } => {
                LaunchDetails::Subprocess(SubprocessLaunch {
                    command: command.clone(),
                    env: masked(env),
                    cwd: cwd.clone(),
                })
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
            } => LaunchDetails::Docker(DockerLaunch {
                image: image.clone(),
                args: args.clone(),
                env: masked(env),
                network: network.clone(),
                memory: memory.clone(),
                cpus: cpus.clone(),
                read_only: *read_only,
                volumes: volumes.clone(),
                runtime: match engine {
                    ContainerEngine::Cli(cli) => Some(cli.program()),
                    _ => None,
                },
                docker_host: match engine {
                    ContainerEngine::Host(host) => Some(host.clone()),
                    _ => None,
                },
            }),
            LaunchSpec::Remote {
                endpoint,
                headers,
                token_exchange,
            } => LaunchDetails::Remote(RemoteLaunch {
                endpoint: endpoint.clone(),
                headers: masked(headers),
                token_exchange: token_exchange.as_ref().map(|exchange| TokenExchangeView {
                    token_endpoint: exchange.token_endpoint.clone(),
                    client_id: exchange.client_id.clone(),
                    client_secret: mcpgw_config::SECRET_MASK.to_owned(),
                    client_auth: exchange.client_auth.as_str().to_owned(),
                    resource: exchange.resource.clone(),
                    audience: exchange.audience.clone(),
                    scope: exchange.scope.clone(),
                }),
            }),
            LaunchSpec::Custom(custom) => LaunchDetails::Registered(RegisteredLaunch {
                settings: mcpgw_config::sanitized_launch_settings(custom.settings()),
            }),
            // A launch kind added later shows no launch fields rather than guessing them.
            _ => LaunchDetails::Registered(RegisteredLaunch {
                settings: serde_json::Map::new(),
            }),
        }
    }
}

/// Everything about one server: its definition (secrets masked), its tools and its health.
#[derive(Debug, Serialize, ToSchema)]
pub struct ServerDetails {
    pub mcp_server_id: String,
    pub state: StateName,
    pub mode: ModeName,
    pub description: Option<String>,
    pub origin: OriginName,
    pub idle_ttl_s: u64,
    pub health_check_interval_s: u64,
    pub max_consecutive_failures: u32,
    #[serde(flatten)]
    pub launch: LaunchDetails,
    /// The server's tools with their own (unprefixed) names.
    #[schema(value_type = Vec<McpTool>)]
    pub tools: Vec<Tool>,
    pub tool_source: ToolSourceName,
    pub health: HealthStatus,
}

impl ServerDetails {
    pub fn new(snapshot: &ServerSnapshot, tools: Vec<Tool>, tool_source: ToolSource) -> Self {
        let spec = &snapshot.spec;
        Self {
            mcp_server_id: spec.id.to_string(),
            state: snapshot.state.into(),
            mode: ModeName::of(&spec.launch),
            description: spec.description.clone(),
            origin: OriginName::of(&spec.origin),
            idle_ttl_s: spec.idle_ttl.as_secs(),
            health_check_interval_s: spec.health_check_interval.as_secs(),
            max_consecutive_failures: spec.max_consecutive_failures,
            launch: LaunchDetails::of(&spec.launch),
            tools,
            tool_source: tool_source.into(),
            health: HealthStatus::from(snapshot),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ServerCreated {
    pub mcp_server_id: String,
    /// Always true.
    pub created: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ServerDeleted {
    pub mcp_server_id: String,
    /// Always true.
    pub deleted: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ServerTools {
    pub mcp_server_id: String,
    #[schema(value_type = Vec<McpTool>)]
    pub tools: Vec<Tool>,
    pub source: ToolSourceName,
    /// When the server listed these tools (UTC, no offset): its last start or change
    /// announcement for `live`, the time the kept list was written for `stored`; null for
    /// `predefined` and `unknown`.
    #[schema(value_type = Option<String>, example = "2026-11-21T14:03:07.123456")]
    pub learned_at: Option<String>,
}

/// One captured stderr line.
#[derive(Debug, Serialize, ToSchema)]
pub struct LogEntry {
    /// UTC, without an offset, with microseconds.
    #[schema(example = "2026-11-21T14:03:07.123456")]
    pub timestamp: String,
    /// The line's text: UTF-8 with invalid bytes replaced, at most 8192 bytes (a longer line is
    /// cut and ends with `...`).
    pub line: String,
    pub mcp_server_id: String,
    /// Always `stderr`.
    #[schema(example = "stderr")]
    pub stream: String,
}

impl From<mcpgw_core::LogLine> for LogEntry {
    fn from(line: mcpgw_core::LogLine) -> Self {
        Self {
            timestamp: line.timestamp.to_string(),
            line: line.line,
            mcp_server_id: line.mcp_server_id.to_string(),
            stream: line.stream.to_owned(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ServerLogs {
    /// The most recent lines, oldest first.
    pub logs: Vec<LogEntry>,
    pub mcp_server_id: String,
    /// How many lines `logs` holds.
    pub count: usize,
}

/// One finished tool call.
#[derive(Debug, Serialize, ToSchema)]
pub struct InvocationEntry {
    /// The invocation's event id, as a string because a store may choose other ids; entries
    /// are ordered by it.
    #[schema(example = "1042")]
    pub event_id: String,
    /// The tool's own (unprefixed) name.
    pub tool: String,
    /// When the call finished: UTC, without an offset, with microseconds.
    #[schema(example = "2026-11-21T14:03:07.123456")]
    pub occurred_at: String,
    pub duration_ms: f64,
    /// The call got an answer from the server. A tool that answered with an error result
    /// (`isError`) still succeeded, with `is_error` true.
    pub success: bool,
    pub is_error: bool,
    /// Why the call failed, when it did and the reason is known (such as `timeout`).
    pub error_kind: Option<String>,
    /// Who called, when known (`user:alice`).
    pub principal: Option<String>,
}

impl From<mcpgw_core::InvocationRecord> for InvocationEntry {
    fn from(record: mcpgw_core::InvocationRecord) -> Self {
        Self {
            event_id: record.event_id.to_string(),
            tool: record.tool,
            occurred_at: record.occurred_at.to_string(),
            duration_ms: record.duration_ms,
            success: record.success,
            is_error: record.is_error,
            error_kind: record.error_kind,
            principal: record.principal,
        }
    }
}

/// A page of a server's tool invocation history.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolHistory {
    pub mcp_server_id: String,
    /// Newest first.
    pub history: Vec<InvocationEntry>,
    /// Pass it as `cursor` for the next (older) page; null on the last page.
    #[schema(example = "1001")]
    pub next_cursor: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LivenessStatus {
    #[schema(example = "alive")]
    pub status: String,
}

/// `started` once start-up is complete, `starting` before.
#[derive(Debug, Serialize, ToSchema)]
pub struct StartupStatus {
    #[schema(example = "started")]
    pub status: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ServerCounts {
    pub total: usize,
    /// Every state, with 0 where no server is in it.
    #[schema(example = json!({"cold": 2, "initializing": 0, "ready": 1, "degraded": 0, "dead": 0}))]
    pub by_state: BTreeMap<String, usize>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReadinessStatus {
    #[schema(example = "ready")]
    pub status: String,
    pub mcp_servers: ServerCounts,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct NotReadyStatus {
    #[schema(example = "not_ready")]
    pub status: String,
    #[schema(example = "the gateway is shutting down")]
    pub reason: String,
}

/// How a group picks the member that takes the next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StrategyName {
    /// Members in turn.
    RoundRobin,
    /// Smooth weighted round robin: deterministic; weights 3:1 give exactly 3 of every 4 calls
    /// to the first member.
    WeightedRoundRobin,
    /// The member with the fewest calls in flight.
    LeastConnections,
    /// A random member, drawn with probability weight / total weight.
    Random,
    /// The lowest `priority` number first, the next one only when it is out of rotation.
    Priority,
}

impl From<GroupStrategy> for StrategyName {
    fn from(strategy: GroupStrategy) -> Self {
        match strategy {
            GroupStrategy::RoundRobin => StrategyName::RoundRobin,
            GroupStrategy::WeightedRoundRobin => StrategyName::WeightedRoundRobin,
            GroupStrategy::LeastConnections => StrategyName::LeastConnections,
            GroupStrategy::Random => StrategyName::Random,
            GroupStrategy::Priority => StrategyName::Priority,
        }
    }
}

/// Whether a group can take calls: `healthy` with at least `min_healthy` members in rotation,
/// `partial` with at least one, `unavailable` with none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum GroupStateName {
    Healthy,
    Partial,
    Unavailable,
}

impl From<GroupState> for GroupStateName {
    fn from(state: GroupState) -> Self {
        match state {
            GroupState::Healthy => GroupStateName::Healthy,
            GroupState::Partial => GroupStateName::Partial,
            GroupState::Unavailable => GroupStateName::Unavailable,
        }
    }
}

/// One member of a group.
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupMemberDetails {
    /// The member server's id.
    pub id: String,
    pub weight: u32,
    pub priority: u32,
    /// The member server's lifecycle state; null if the server is gone.
    pub state: Option<StateName>,
    /// Whether the strategy may pick this member. A member leaves rotation after failing a
    /// health check or a call for a transport reason, and returns when it is healthy again.
    pub in_rotation: bool,
    /// Calls routed to this member through the group and not finished yet.
    pub in_flight: u32,
}

impl From<&MemberView> for GroupMemberDetails {
    fn from(member: &MemberView) -> Self {
        Self {
            id: member.id.to_string(),
            weight: member.weight,
            priority: member.priority,
            state: member.state.map(StateName::from),
            in_rotation: member.in_rotation,
            in_flight: member.in_flight,
        }
    }
}

/// Everything about one group.
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupDetails {
    #[schema(example = "pool")]
    pub group_id: String,
    pub description: Option<String>,
    pub strategy: StrategyName,
    /// Members in rotation needed for the group to be `healthy`.
    pub min_healthy: u32,
    pub state: GroupStateName,
    /// `config` for groups of the configuration file (changed only with the file), `api` for
    /// groups created over REST.
    pub origin: OriginName,
    /// How many members are in rotation now.
    pub members_in_rotation: usize,
    /// In the order the strategies go through them.
    pub members: Vec<GroupMemberDetails>,
}

impl From<&GroupView> for GroupDetails {
    fn from(group: &GroupView) -> Self {
        Self {
            group_id: group.group_id.to_string(),
            description: group.description.clone(),
            strategy: group.strategy.into(),
            min_healthy: group.min_healthy,
            state: group.state.into(),
            origin: if group.origin == "config" {
                OriginName::Config
            } else {
                OriginName::Api
            },
            members_in_rotation: group
                .members
                .iter()
                .filter(|member| member.in_rotation)
                .count(),
            members: group.members.iter().map(GroupMemberDetails::from).collect(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct GroupList {
    /// Every group, sorted by id.
    pub groups: Vec<GroupDetails>,
}

/// The answer to a create: the new group's details and `created: true`.
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupCreated {
    #[serde(flatten)]
    pub group: GroupDetails,
    /// Always true.
    pub created: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct GroupDeleted {
    pub group_id: String,
    /// Always true.
    pub deleted: bool,
}

// ----- auth management (`/api/auth/*`) ---------------------------------------------------------

use mcpgw_gateway::authz::{Endpoint, PermissionInfo, PrincipalSummary, Role, ToolAccessPolicy};
use mcpgw_gateway::{ApiKeySummary, HeldRole};

/// A key just created: the only answer that ever carries the raw key. Both spellings of the
/// answer are served at once: `key` and `raw_key` hold the same value, and so do `principal`
/// and `principal_id`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKeyCreated {
    pub key_id: String,
    /// The raw key (`mcp_...`). It is shown here once and never again.
    pub key: String,
    /// The same value as `key`.
    pub raw_key: String,
    pub principal: String,
    /// The same value as `principal`.
    pub principal_id: String,
    pub name: String,
    /// A role the key itself carries, on top of the principal's assigned roles.
    pub role: Option<String>,
    /// The key's first characters, as listings show them.
    pub prefix: String,
    pub created_at: String,
    /// When the key stops working; `null` for a key that never expires.
    pub expires_at: Option<String>,
}

/// A key as listings show it: never the raw key, never its hash.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKeyView {
    pub key_id: String,
    pub name: String,
    pub principal: String,
    /// The same value as `principal`.
    pub principal_id: String,
    pub role: Option<String>,
    /// The key's first characters, to tell keys apart.
    pub prefix: String,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub revoked_at: Option<String>,
    /// `active`, `expired` or `revoked` at the time of the answer.
    #[schema(example = "active")]
    pub status: String,
}

impl From<&ApiKeySummary> for ApiKeyView {
    fn from(key: &ApiKeySummary) -> Self {
        Self {
            key_id: key.key_id.to_string(),
            name: key.name.clone(),
            principal: key.principal.to_string(),
            principal_id: key.principal.to_string(),
            role: key.role.as_ref().map(ToString::to_string),
            prefix: key.prefix.clone(),
            created_at: key.created_at.to_string(),
            expires_at: key.expires_at.map(|at| at.to_string()),
            revoked_at: key.revoked_at.map(|at| at.to_string()),
            status: key.status.to_owned(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKeyList {
    /// Every key, revoked and expired ones included, oldest first.
    pub keys: Vec<ApiKeyView>,
}

/// A role: built in or custom.
#[derive(Debug, Serialize, ToSchema)]
pub struct RoleView {
    pub name: String,
    pub description: String,
    /// What the role grants as given: `*`, `resource:*` or `resource:action`.
    pub permissions: Vec<String>,
    /// Every permission of the catalogue the role grants, wildcards expanded.
    pub effective_permissions: Vec<String>,
    /// Built-in roles cannot be changed or deleted.
    pub built_in: bool,
}

impl From<&Role> for RoleView {
    fn from(role: &Role) -> Self {
        Self {
            name: role.name().to_string(),
            description: role.description().to_owned(),
            permissions: role.permissions().iter().map(ToString::to_string).collect(),
            effective_permissions: role
                .effective_permissions()
                .map(|permission| permission.as_str().to_owned())
                .collect(),
            built_in: role.is_built_in(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RoleList {
    pub roles: Vec<RoleView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RoleDeleted {
    pub name: String,
    pub deleted: bool,
}

/// An assignment as assign answers it, in both spellings (`principal`/`principal_id`,
/// `role`/`role_name`).
#[derive(Debug, Serialize, ToSchema)]
pub struct RoleAssigned {
    pub principal: String,
    /// The same value as `principal`.
    pub principal_id: String,
    pub role: String,
    /// The same value as `role`.
    pub role_name: String,
    /// `global` or `tenant:<tenant_id>`.
    pub scope: String,
    /// `false` when the principal already held the role in this scope (nothing changed).
    pub created: bool,
}

/// An assignment as revoke answers it.
#[derive(Debug, Serialize, ToSchema)]
pub struct RoleRevoked {
    pub principal: String,
    pub principal_id: String,
    pub role: String,
    pub role_name: String,
    pub scope: String,
    pub revoked: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ScopedRole {
    pub role: String,
    pub scope: String,
}

/// A principal the gateway knows of: it holds a role or a key.
#[derive(Debug, Serialize, ToSchema)]
pub struct PrincipalView {
    pub principal: String,
    pub principal_id: String,
    pub roles: Vec<ScopedRole>,
    /// Its keys that can be used now.
    pub active_keys: usize,
    /// All its keys, revoked and expired ones included.
    pub total_keys: usize,
}

impl From<&PrincipalSummary> for PrincipalView {
    fn from(summary: &PrincipalSummary) -> Self {
        Self {
            principal: summary.principal.to_string(),
            principal_id: summary.principal.to_string(),
            roles: summary
                .roles
                .iter()
                .map(|(role, scope)| ScopedRole {
                    role: role.to_string(),
                    scope: scope.to_string(),
                })
                .collect(),
            active_keys: summary.active_keys,
            total_keys: summary.total_keys,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PrincipalList {
    pub principals: Vec<PrincipalView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct HeldRoleView {
    pub role: String,
    pub scope: String,
    /// `true` for an `auth.role_assignments` entry of the configuration file (not revocable
    /// over the API).
    pub from_config: bool,
}

impl From<&HeldRole> for HeldRoleView {
    fn from(held: &HeldRole) -> Self {
        Self {
            role: held.role.to_string(),
            scope: held.scope.to_string(),
            from_config: held.from_config,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PrincipalRoles {
    pub principal: String,
    pub principal_id: String,
    /// Sorted by role, then scope.
    pub roles: Vec<HeldRoleView>,
}

/// One permission of the catalogue.
#[derive(Debug, Serialize, ToSchema)]
pub struct PermissionView {
    /// `resource:action`.
    #[schema(example = "mcp_server:read")]
    pub name: String,
    pub resource: String,
    pub action: String,
    pub description: String,
    /// What the permission opens: `METHOD /path` for REST routes, `MCP method` for MCP methods.
    pub endpoints: Vec<String>,
}

impl From<&PermissionInfo> for PermissionView {
    fn from(info: &PermissionInfo) -> Self {
        Self {
            name: info.name.to_owned(),
            resource: info.permission.resource().as_str().to_owned(),
            action: info.permission.action().to_owned(),
            description: info.description.to_owned(),
            endpoints: info.endpoints.iter().map(Endpoint::to_string).collect(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PermissionList {
    pub permissions: Vec<PermissionView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PermissionCheckResult {
    pub principal: String,
    pub permission: String,
    pub allowed: bool,
    /// The first role (built-in roles in their fixed order, then custom roles by name) that
    /// grants the permission; `null` when none does.
    pub granted_by_role: Option<String>,
}

/// A tool access policy.
#[derive(Debug, Serialize, ToSchema)]
pub struct PolicyView {
    /// `provider` (also for the `mcp_server` alias), `group` or `tool`.
    pub scope: String,
    pub target_id: String,
    /// Principal patterns admitted; empty admits everyone the deny list does not refuse.
    pub allow_list: Vec<String>,
    /// Principal patterns refused; deny wins over allow.
    pub deny_list: Vec<String>,
}

impl From<&ToolAccessPolicy> for PolicyView {
    fn from(policy: &ToolAccessPolicy) -> Self {
        Self {
            scope: policy.address().scope().as_str().to_owned(),
            target_id: policy.address().target_id().to_owned(),
            allow_list: policy
                .allow_list()
                .iter()
                .map(ToString::to_string)
                .collect(),
            deny_list: policy.deny_list().iter().map(ToString::to_string).collect(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PolicyDeleted {
    pub scope: String,
    pub target_id: String,
    pub deleted: bool,
}
