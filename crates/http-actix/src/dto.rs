//! The wire formats of the REST API. They live here, in the adapter, and are built from the
//! domain's types; nothing in the domain knows these shapes.

use std::collections::BTreeMap;

use mcpgw_core::{LaunchSpec, ServerSnapshot, ServerState, Tool, ToolSource};
use mcpgw_gateway::groups_domain::{GroupState, GroupStrategy};
use mcpgw_gateway::{GroupView, MemberView};
use serde::Serialize;
use utoipa::ToSchema;

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

/// How a server is run. (`group` is a mode of the configuration file, but groups are served by
/// `/api/groups`, not here.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ModeName {
    Subprocess,
    Docker,
    Remote,
}

impl ModeName {
    fn of(launch: &LaunchSpec) -> Self {
        match launch {
            LaunchSpec::Docker { .. } => ModeName::Docker,
            LaunchSpec::Remote { .. } => ModeName::Remote,
            // A launch mode added later shows as the closest thing the API knows.
            _ => ModeName::Subprocess,
        }
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
/// `predefined` from the server's definition before its first start, `unknown` when neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ToolSourceName {
    Live,
    Predefined,
    Unknown,
}

impl From<ToolSource> for ToolSourceName {
    fn from(source: ToolSource) -> Self {
        match source {
            ToolSource::Live => ToolSourceName::Live,
            ToolSource::Predefined => ToolSourceName::Predefined,
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
}

/// The launch fields of a `remote` server.
#[derive(Debug, Serialize, ToSchema)]
pub struct RemoteLaunch {
    pub endpoint: String,
    /// Header names with every value shown as `"***"`.
    pub headers: BTreeMap<String, String>,
}

/// The fields of the server's mode.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum LaunchDetails {
    Subprocess(SubprocessLaunch),
    Docker(DockerLaunch),
    Remote(RemoteLaunch),
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
            } => LaunchDetails::Docker(DockerLaunch {
                image: image.clone(),
                args: args.clone(),
                env: masked(env),
                network: network.clone(),
                memory: memory.clone(),
                cpus: cpus.clone(),
                read_only: *read_only,
                volumes: volumes.clone(),
            }),
            LaunchSpec::Remote { endpoint, headers } => LaunchDetails::Remote(RemoteLaunch {
                endpoint: endpoint.clone(),
                headers: masked(headers),
            }),
            // A launch mode added later shows no launch fields rather than guessing them.
            _ => LaunchDetails::Subprocess(SubprocessLaunch {
                command: Vec::new(),
                env: BTreeMap::new(),
                cwd: None,
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

/// The launch and health fields of a server definition, exactly as in the configuration file's
/// `mcp_servers` entries. Which fields apply depends on `mode`; a field of another mode, an
/// unknown field or a value out of range answers 422.
#[derive(Debug, Serialize, ToSchema)]
pub struct ServerDefinitionFields {
    /// `subprocess`, `docker` or `remote` (required). Groups are created with
    /// `POST /api/groups`.
    pub mode: ModeName,
    pub description: Option<String>,
    /// subprocess: the program and its arguments. docker: a synonym of `args`.
    #[schema(example = json!(["python3", "-m", "math_server"]))]
    pub command: Option<Vec<String>>,
    /// subprocess and docker: extra environment variables (`${VAR}` is expanded).
    pub env: Option<BTreeMap<String, String>>,
    /// subprocess: the working directory.
    pub cwd: Option<String>,
    /// Seconds a ready server may stay unused before it is stopped; 1 to 86400, default 300.
    #[schema(minimum = 1, maximum = 86400)]
    pub idle_ttl_s: Option<u64>,
    /// Seconds between health checks of a ready server; 5 to 3600, default 60.
    #[schema(minimum = 5, maximum = 3600)]
    pub health_check_interval_s: Option<u64>,
    /// Consecutive failures that make the server degraded; 1 to 100, default 3.
    #[schema(minimum = 1, maximum = 100)]
    pub max_consecutive_failures: Option<u32>,
    /// Tools to list before the server's first start.
    pub tools: Option<Vec<McpTool>>,
    /// docker: the image to run (required for docker).
    pub image: Option<String>,
    /// docker: what follows the image on `docker run`.
    pub args: Option<Vec<String>>,
    /// docker: the container network, default `none`.
    pub network: Option<String>,
    /// docker: a memory limit such as `512m`.
    pub memory: Option<String>,
    /// docker: a CPU limit such as `"1.0"`.
    pub cpus: Option<String>,
    /// docker: read-only root filesystem, default true.
    pub read_only: Option<bool>,
    /// docker: volume mounts in `docker run -v` syntax.
    pub volumes: Option<Vec<String>>,
    /// docker: run through this CLI (`docker` or `podman`) instead of the Engine API.
    pub runtime: Option<String>,
    /// remote: the MCP Streamable HTTP endpoint.
    #[schema(example = "https://host.example/mcp")]
    pub endpoint: Option<String>,
    /// remote: headers sent with every request (`${VAR}` is expanded).
    pub headers: Option<BTreeMap<String, String>>,
}

/// The body of `POST /api/mcp_servers`.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreateServerRequest {
    /// The new server's id: `^[A-Za-z0-9_-]{1,64}$` without `__`.
    #[schema(example = "math", pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub mcp_server_id: String,
    #[serde(flatten)]
    pub definition: ServerDefinitionFields,
}

/// The body of `PUT /api/mcp_servers/{id}`: the whole new definition.
#[derive(Debug, Serialize, ToSchema)]
pub struct UpdateServerRequest {
    /// Optional; when present it must equal the id in the path.
    pub mcp_server_id: Option<String>,
    #[serde(flatten)]
    pub definition: ServerDefinitionFields,
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

/// A member in a create or update body (`member_id` is accepted for `id`).
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupMemberFields {
    /// A registered mcp server (not a group).
    #[schema(example = "math")]
    pub id: String,
    /// Share of the calls under `weighted_round_robin` and `random`; at least 1, default 1.
    #[schema(minimum = 1)]
    pub weight: Option<u32>,
    /// Order under `priority`, lowest first; default 0.
    pub priority: Option<u32>,
}

/// The body of `POST /api/groups`. Unknown fields answer 422.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreateGroupRequest {
    /// The new group's id: `^[A-Za-z0-9_-]{1,64}$` without `__`, used by no server and no
    /// other group.
    #[schema(example = "pool", pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub group_id: String,
    /// Default `round_robin`.
    pub strategy: Option<StrategyName>,
    /// At least 1, default 1. When `members` are given it may not exceed their number; a group
    /// created without members may name the count it will need once they are added.
    #[schema(minimum = 1)]
    pub min_healthy: Option<u32>,
    pub description: Option<String>,
    /// The members, each a registered mcp server listed once.
    pub members: Option<Vec<GroupMemberFields>>,
}

/// The body of `PUT /api/groups/{id}`: only the fields present change.
#[derive(Debug, Serialize, ToSchema)]
pub struct UpdateGroupRequest {
    /// Optional; when present it must equal the id in the path.
    pub group_id: Option<String>,
    pub strategy: Option<StrategyName>,
    /// At least 1; raising it above the number of members answers 422.
    #[schema(minimum = 1)]
    pub min_healthy: Option<u32>,
    /// `null` clears the description.
    pub description: Option<String>,
    /// Replaces the whole member list.
    pub members: Option<Vec<GroupMemberFields>>,
}

/// The body of `POST /api/groups/{id}/members` (`id` is accepted for `member_id`).
#[derive(Debug, Serialize, ToSchema)]
pub struct AddGroupMemberRequest {
    /// A registered mcp server that is not yet a member.
    #[schema(example = "math")]
    pub member_id: String,
    /// At least 1, default 1.
    #[schema(minimum = 1)]
    pub weight: Option<u32>,
    /// Default 0.
    pub priority: Option<u32>,
}
