//! `GET /api/system`: how long the gateway has run, its version, and a summary of what it
//! serves and how its tool calls go.

use actix_web::{HttpMessage as _, HttpRequest, HttpResponse, web};
use mcpgw_core::{Caller, ServerState};
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::ErrorEnvelope;
use crate::state::ApiState;

/// The running gateway and a summary of its metrics.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(example = json!({
    "uptime_seconds": 3600.5,
    "version": "0.1.0",
    "metrics": {
        "servers_by_state": {"cold": 2, "initializing": 0, "ready": 3, "degraded": 0, "dead": 1},
        "servers_total": 6,
        "groups_total": 1,
        "tools_total": 42,
        "tool_calls": 1200,
        "tool_failures": 6,
        "tool_errors": 10,
        "success_rate": 0.995,
        "p50_ms": 12.5,
        "p99_ms": 480.0
    }
}))]
pub(crate) struct SystemInfo {
    /// Seconds since the gateway started.
    pub uptime_seconds: f64,
    /// The gateway's version.
    pub version: String,
    pub metrics: SystemMetrics,
}

/// Servers, groups, tools and tool calls.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct SystemMetrics {
    pub servers_by_state: ServersByState,
    /// Every registered MCP server.
    pub servers_total: usize,
    /// Every group (0 when groups are not enabled).
    pub groups_total: usize,
    /// The tools the caller may see on `/mcp`, groups' tools included.
    pub tools_total: usize,
    /// Tool calls finished since start-up, failed ones included.
    pub tool_calls: u64,
    /// Tool calls that produced no answer (transport or protocol failure, timeout, unavailable
    /// server).
    pub tool_failures: u64,
    /// Tool calls whose tool answered with a tool-level error (`isError`); they are not failures.
    pub tool_errors: u64,
    /// `(tool_calls - tool_failures) / tool_calls`, from 0 to 1; `null` before the first call.
    pub success_rate: Option<f64>,
    /// The median duration of the last 10,000 tool calls, in milliseconds; `null` before the
    /// first call.
    pub p50_ms: Option<f64>,
    /// The 99th percentile duration of the last 10,000 tool calls, in milliseconds; `null`
    /// before the first call.
    pub p99_ms: Option<f64>,
}

/// How many registered servers are in each state.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub(crate) struct ServersByState {
    pub cold: usize,
    pub initializing: usize,
    pub ready: usize,
    pub degraded: usize,
    pub dead: usize,
}

impl ServersByState {
    fn count(&mut self, state: ServerState) {
        let slot = match state {
            ServerState::Cold => &mut self.cold,
            ServerState::Initializing => &mut self.initializing,
            ServerState::Ready => &mut self.ready,
            ServerState::Degraded => &mut self.degraded,
            ServerState::Dead => &mut self.dead,
        };
        *slot += 1;
    }
}

/// Uptime, version, and a summary of the servers, tools and tool calls.
#[utoipa::path(
    get,
    path = "/api/system",
    tag = "system",
    operation_id = "system_info",
    responses(
        (status = 200, description = "The running gateway and a summary of its metrics", body = SystemInfo),
        (status = 401, description = "Authentication is on and the request has no valid credentials", body = ErrorEnvelope),
        (status = 403, description = "The caller lacks `metrics:read`", body = ErrorEnvelope),
    )
)]
pub(crate) async fn system_info(state: web::Data<ApiState>, request: HttpRequest) -> HttpResponse {
    let gateway = state.gateway();
    let snapshots = gateway.servers().list(None);
    let mut servers_by_state = ServersByState::default();
    for snapshot in &snapshots {
        servers_by_state.count(snapshot.state);
    }
    // With authentication on, the caller's own view of the catalogue; otherwise every tool.
    let caller = request
        .extensions()
        .get::<Caller>()
        .cloned()
        .unwrap_or_default();
    let tools_total = gateway
        .frontend()
        .map_or(0, |frontend| frontend.tools(&caller).len());
    let calls = gateway.call_stats().map(|stats| stats.snapshot());
    HttpResponse::Ok().json(SystemInfo {
        uptime_seconds: gateway.uptime().as_secs_f64(),
        version: gateway.info().version.clone(),
        metrics: SystemMetrics {
            servers_by_state,
            servers_total: snapshots.len(),
            groups_total: gateway.groups().map_or(0, |groups| groups.list().len()),
            tools_total,
            tool_calls: calls.as_ref().map_or(0, |calls| calls.calls),
            tool_failures: calls.as_ref().map_or(0, |calls| calls.failures),
            tool_errors: calls.as_ref().map_or(0, |calls| calls.tool_errors),
            success_rate: calls.as_ref().and_then(|calls| calls.success_rate),
            p50_ms: calls.as_ref().and_then(|calls| calls.p50_ms),
            p99_ms: calls.as_ref().and_then(|calls| calls.p99_ms),
        },
    })
}

/// The replicas of the fleet that shares this gateway's store, each as its latest heartbeat
/// says; a gateway alone is a fleet of one.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(example = json!({
    "replica_id": "mcpgw-0",
    "shared_store": true,
    "replicas": [{
        "replica_id": "mcpgw-0",
        "version": "0.1.0",
        "this_replica": true,
        "alive": true,
        "started_at": "2026-11-27T09:00:00.000000",
        "last_heartbeat_at": "2026-11-27T10:00:03.250000",
        "heartbeat_age_seconds": 1.2,
        "leases": ["discovery", "event-log-compaction"],
        "servers": [{"mcp_server_id": "math", "state": "ready"}]
    }]
}))]
pub(crate) struct FleetView {
    /// The replica that answered.
    pub replica_id: String,
    /// Whether replicas share a store (PostgreSQL); `false` for a gateway on its own files.
    pub shared_store: bool,
    /// Every replica, by id.
    pub replicas: Vec<ReplicaView>,
}

/// One replica's latest heartbeat.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct ReplicaView {
    pub replica_id: String,
    pub version: String,
    /// Whether this is the replica that answered.
    pub this_replica: bool,
    /// Whether its heartbeat is recent (it missed fewer than three).
    pub alive: bool,
    /// When the replica started (UTC).
    pub started_at: String,
    /// When its latest heartbeat was recorded (UTC, the store's clock).
    pub last_heartbeat_at: String,
    pub heartbeat_age_seconds: f64,
    /// The work that runs on one replica only and that this one holds: `discovery`,
    /// `event-log-compaction`.
    pub leases: Vec<String>,
    /// The state of each server on that replica (servers run per replica).
    pub servers: Vec<ReplicaServerView>,
}

/// A server's state on one replica.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct ReplicaServerView {
    pub mcp_server_id: String,
    pub state: String,
}

/// The fleet: each replica's heartbeat, the leases it holds and its servers' states.
#[utoipa::path(
    get,
    path = "/api/system/replicas",
    tag = "system",
    operation_id = "system_replicas",
    responses(
        (status = 200, description = "Every replica of the fleet", body = FleetView),
        (status = 401, description = "Authentication is on and the request has no valid credentials", body = ErrorEnvelope),
        (status = 403, description = "The caller lacks `metrics:read`", body = ErrorEnvelope),
        (status = 503, description = "The shared store cannot be read", body = ErrorEnvelope),
    )
)]
pub(crate) async fn replicas(state: web::Data<ApiState>) -> HttpResponse {
    let gateway = state.gateway();
    let Some(fleet) = gateway.fleet() else {
        let servers = gateway
            .servers()
            .list(None)
            .into_iter()
            .map(|snapshot| ReplicaServerView {
                mcp_server_id: snapshot.spec.id.to_string(),
                state: snapshot.state.as_str().to_owned(),
            })
            .collect();
        let now = gateway.servers().clock().wall();
        let uptime = i64::try_from(gateway.uptime().as_micros()).unwrap_or(i64::MAX);
        let started_at =
            mcpgw_core::Timestamp::from_unix_micros(now.unix_micros().saturating_sub(uptime));
        let replica_id = "local".to_owned();
        return HttpResponse::Ok().json(FleetView {
            replica_id: replica_id.clone(),
            shared_store: false,
            replicas: vec![ReplicaView {
                replica_id,
                version: gateway.info().version.clone(),
                this_replica: true,
                alive: true,
                started_at: started_at.to_string(),
                last_heartbeat_at: now.to_string(),
                heartbeat_age_seconds: 0.0,
                leases: Vec::new(),
                servers,
            }],
        });
    };
    match fleet.replicas().await {
        Ok(replicas) => HttpResponse::Ok().json(FleetView {
            replica_id: fleet.replica_id().to_owned(),
            shared_store: true,
            replicas: replicas
                .into_iter()
                .map(|status| ReplicaView {
                    this_replica: status.heartbeat.replica_id == fleet.replica_id(),
                    alive: fleet.is_alive(status.heartbeat_age),
                    replica_id: status.heartbeat.replica_id,
                    version: status.heartbeat.version,
                    started_at: status.heartbeat.started_at.to_string(),
                    last_heartbeat_at: status.last_heartbeat_at.to_string(),
                    heartbeat_age_seconds: status.heartbeat_age.as_secs_f64(),
                    leases: status.leases,
                    servers: status
                        .heartbeat
                        .servers
                        .into_iter()
                        .map(|(id, state)| ReplicaServerView {
                            mcp_server_id: id.to_string(),
                            state: state.as_str().to_owned(),
                        })
                        .collect(),
                })
                .collect(),
        }),
        Err(error) => {
            tracing::warn!(%error, "the fleet view could not be read from the store");
            actix_web::ResponseError::error_response(&crate::error::ApiError::new(
                actix_web::http::StatusCode::SERVICE_UNAVAILABLE,
                "StoreUnavailableError",
                "the shared store cannot be read right now; try again",
            ))
        }
    }
}
