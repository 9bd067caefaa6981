//! Liveness, startup and readiness probes. They never need credentials and are never rate
//! limited, so an orchestrator can always ask.

use std::collections::BTreeMap;

use actix_web::{HttpResponse, web};
use mcpgw_core::ServerState;

use crate::dto::{LivenessStatus, NotReadyStatus, ReadinessStatus, ServerCounts, StartupStatus};
use crate::state::ApiState;

/// The process answers: it is alive.
#[utoipa::path(
    get,
    path = "/health/live",
    tag = "probes",
    operation_id = "liveness_probe",
    responses((status = 200, description = "Alive", body = LivenessStatus))
)]
pub(crate) async fn live() -> HttpResponse {
    HttpResponse::Ok().json(LivenessStatus {
        status: "alive".to_owned(),
    })
}

/// Start-up is complete once the configuration is loaded and the stores are open.
#[utoipa::path(
    get,
    path = "/health/startup",
    tag = "probes",
    operation_id = "startup_probe",
    responses(
        (status = 200, description = "Started", body = StartupStatus),
        (status = 503, description = "Still starting", body = StartupStatus),
    )
)]
pub(crate) async fn startup(state: web::Data<ApiState>) -> HttpResponse {
    if state.gateway().startup_complete() {
        HttpResponse::Ok().json(StartupStatus {
            status: "started".to_owned(),
        })
    } else {
        HttpResponse::ServiceUnavailable().json(StartupStatus {
            status: "starting".to_owned(),
        })
    }
}

/// Ready to take traffic: started up and not shutting down. Servers that are not running do
/// not make the gateway unready, because they start on demand.
#[utoipa::path(
    get,
    path = "/health/ready",
    tag = "probes",
    operation_id = "readiness_probe",
    responses(
        (status = 200, description = "Ready, with the servers counted by state", body = ReadinessStatus),
        (status = 503, description = "Still starting or shutting down", body = NotReadyStatus),
    )
)]
pub(crate) async fn ready(state: web::Data<ApiState>) -> HttpResponse {
    let gateway = state.gateway();
    if gateway.ready() {
        return HttpResponse::Ok().json(ReadinessStatus {
            status: "ready".to_owned(),
            mcp_servers: server_counts(&state),
        });
    }
    let reason = if gateway.shutting_down() {
        "the gateway is shutting down"
    } else {
        "the gateway is still starting"
    };
    HttpResponse::ServiceUnavailable().json(NotReadyStatus {
        status: "not_ready".to_owned(),
        reason: reason.to_owned(),
    })
}

/// How many servers are in each state, every state present.
pub(crate) fn count_by_state(state: &ApiState) -> BTreeMap<ServerState, usize> {
    let mut counts: BTreeMap<ServerState, usize> = ServerState::ALL
        .into_iter()
        .map(|server_state| (server_state, 0))
        .collect();
    for snapshot in state.gateway().servers().list(None) {
        *counts.entry(snapshot.state).or_default() += 1;
    }
    counts
}

fn server_counts(state: &ApiState) -> ServerCounts {
    let counts = count_by_state(state);
    ServerCounts {
        total: counts.values().sum(),
        by_state: counts
            .into_iter()
            .map(|(server_state, count)| (server_state.as_str().to_owned(), count))
            .collect(),
    }
}
