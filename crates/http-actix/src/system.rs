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
