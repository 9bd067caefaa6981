//! Liveness, startup and readiness probes. They never need credentials and are never rate
//! limited, so an orchestrator can always ask.
//!
//! A rate limiter whose buckets are in a store shared by the fleet (Redis) shows in the
//! readiness answer as `rate_limit: {backend, up, on_unavailable}`. Its store being down makes
//! the replica unready (503) only when the limiter fails closed: such a replica refuses every
//! limited request until the store is back, so traffic is better sent to replicas that reach
//! it. A limiter that fails open keeps serving without its store (limits are then not
//! enforced), so the replica stays ready, and the answer says the store is down. Which one to
//! choose is the operator's call between availability and strict limits; the readiness probe
//! only follows it. Buckets in this process have no store, and the answer has no `rate_limit`.

use std::collections::BTreeMap;

use actix_web::{HttpResponse, web};
use mcpgw_core::ServerState;
use mcpgw_gateway::authz::RateLimitBackendStatus;
use serde::Serialize;
use utoipa::ToSchema;

use crate::dto::{LivenessStatus, NotReadyStatus, ReadinessStatus, ServerCounts, StartupStatus};
use crate::state::ApiState;

/// The store behind the rate limiter, when its buckets are shared by the fleet.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RateLimitBackendHealth {
    /// The store: `redis`.
    #[schema(example = "redis")]
    backend: String,
    /// Whether it answered the last time the gateway asked it (it is asked every second).
    up: bool,
    /// What limited requests get while it does not answer: `open` (admitted) or `closed`
    /// (refused with 429 and `Retry-After: 1`; the replica is then not ready).
    #[schema(example = "open")]
    on_unavailable: String,
}

impl From<RateLimitBackendStatus> for RateLimitBackendHealth {
    fn from(status: RateLimitBackendStatus) -> Self {
        Self {
            backend: status.backend.to_owned(),
            up: status.up,
            on_unavailable: status.on_unavailable.as_str().to_owned(),
        }
    }
}

/// Ready, with the servers counted by state, and the rate limiter's store when it has one.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ReadinessReport {
    #[serde(flatten)]
    readiness: ReadinessStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    rate_limit: Option<RateLimitBackendHealth>,
}

/// Not ready, with the reason, and the rate limiter's store when it has one.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct NotReadyReport {
    #[serde(flatten)]
    not_ready: NotReadyStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    rate_limit: Option<RateLimitBackendHealth>,
}

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

/// Ready to take traffic: started up, not shutting down, and not refusing every limited request
/// because the rate limiter's store is down and it fails closed. Servers that are not running
/// do not make the gateway unready, because they start on demand.
#[utoipa::path(
    get,
    path = "/health/ready",
    tag = "probes",
    operation_id = "readiness_probe",
    responses(
        (status = 200, description = "Ready, with the servers counted by state, and the rate limiter's shared store (`rate_limit`) when it has one: a store that is down while the limiter fails open leaves the gateway ready", body = ReadinessReport),
        (status = 503, description = "Still starting, shutting down, or the rate limiter's shared store is down and the limiter fails closed", body = NotReadyReport),
    )
)]
pub(crate) async fn ready(state: web::Data<ApiState>) -> HttpResponse {
    let gateway = state.gateway();
    let store = state
        .rate_limiter()
        .and_then(|limiter| limiter.backend_status());
    let reason = if gateway.shutting_down() {
        Some("the gateway is shutting down".to_owned())
    } else if !gateway.ready() {
        Some("the gateway is still starting".to_owned())
    } else {
        store.filter(RateLimitBackendStatus::refuses_traffic).map(|status| {
            format!(
                "the rate limiter's {} store does not answer and it fails closed: every limited \
                 request is refused",
                status.backend
            )
        })
    };
    let rate_limit = store.map(RateLimitBackendHealth::from);
    match reason {
        None => HttpResponse::Ok().json(ReadinessReport {
            readiness: ReadinessStatus {
                status: "ready".to_owned(),
                mcp_servers: server_counts(&state),
            },
            rate_limit,
        }),
        Some(reason) => HttpResponse::ServiceUnavailable().json(NotReadyReport {
            not_ready: NotReadyStatus {
                status: "not_ready".to_owned(),
                reason,
            },
            rate_limit,
        }),
    }
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use actix_web::body::MessageBody as _;
    use actix_web::web;
    use mcpgw_gateway::authz::{RateLimitBackendStatus, RateLimitFailMode, RateLimiter};
    use mcpgw_testkit::clock::FakeClock;
    use mcpgw_testkit::rate_limiter_suite::InMemoryRateLimiter;
    use serde_json::{Value, json};

    use super::ready;
    use crate::rate_limit::store_fake::{POLICY, StoreLimiter, state_with};
    use crate::state::ApiState;

    async fn readiness(state: ApiState) -> (u16, Value) {
        let response = ready(web::Data::new(state)).await;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .try_into_bytes()
            .unwrap_or_else(|_| panic!("a whole body"));
        (status, serde_json::from_slice(&body).expect("JSON"))
    }

    fn store(up: bool, on_unavailable: RateLimitFailMode) -> Arc<dyn RateLimiter> {
        StoreLimiter::new(
            [],
            Some(RateLimitBackendStatus {
                backend: "redis",
                up,
                on_unavailable,
            }),
        )
    }

    const NO_SERVERS: &str = r#"{"total": 0, "by_state":
        {"cold": 0, "initializing": 0, "ready": 0, "degraded": 0, "dead": 0}}"#;

    #[actix_web::test]
    async fn buckets_in_this_process_add_nothing_to_the_answer() {
        let servers: Value = serde_json::from_str(NO_SERVERS).unwrap();
        let in_memory: Arc<dyn RateLimiter> =
            Arc::new(InMemoryRateLimiter::new(POLICY, Arc::new(FakeClock::new())));
        for limiter in [None, Some(in_memory)] {
            let (status, body) = readiness(state_with(limiter)).await;
            assert_eq!(status, 200);
            assert_eq!(body, json!({"status": "ready", "mcp_servers": servers}));
        }
    }

    #[actix_web::test]
    async fn a_store_that_answers_is_shown_and_the_gateway_is_ready() {
        let (status, body) =
            readiness(state_with(Some(store(true, RateLimitFailMode::Closed)))).await;
        assert_eq!(status, 200);
        assert_eq!(body["status"], "ready");
        assert_eq!(body["mcp_servers"]["total"], 0);
        assert_eq!(
            body["rate_limit"],
            json!({"backend": "redis", "up": true, "on_unavailable": "closed"})
        );
    }

    #[actix_web::test]
    async fn a_store_that_is_down_leaves_a_limiter_that_fails_open_ready() {
        let (status, body) =
            readiness(state_with(Some(store(false, RateLimitFailMode::Open)))).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["status"], "ready");
        assert_eq!(
            body["rate_limit"],
            json!({"backend": "redis", "up": false, "on_unavailable": "open"})
        );
    }

    #[actix_web::test]
    async fn a_store_that_is_down_makes_a_limiter_that_fails_closed_unready() {
        let (status, body) =
            readiness(state_with(Some(store(false, RateLimitFailMode::Closed)))).await;
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["status"], "not_ready");
        assert_eq!(
            body["reason"],
            "the rate limiter's redis store does not answer and it fails closed: every limited \
             request is refused"
        );
        assert_eq!(
            body["rate_limit"],
            json!({"backend": "redis", "up": false, "on_unavailable": "closed"})
        );
        assert!(body.get("mcp_servers").is_none(), "{body}");
    }

    #[actix_web::test]
    async fn shutting_down_is_the_reason_even_with_the_store_down() {
        let state = state_with(Some(store(false, RateLimitFailMode::Closed)));
        state.gateway().mark_shutting_down();
        let (status, body) = readiness(state).await;
        assert_eq!(status, 503);
        assert_eq!(body["reason"], "the gateway is shutting down");
        assert_eq!(body["rate_limit"]["up"], false);
    }

    #[test]
    fn the_document_describes_the_store_in_both_answers() {
        let document = serde_json::to_value(crate::openapi::openapi_document("0.0.0-test"))
            .expect("the document serializes");
        let schemas = &document["components"]["schemas"];
        let health = &schemas["RateLimitBackendHealth"]["properties"];
        for field in ["backend", "up", "on_unavailable"] {
            assert!(health.get(field).is_some(), "{field}: {health}");
        }
        let responses = &document["paths"]["/health/ready"]["get"]["responses"];
        for (code, schema) in [("200", "ReadinessReport"), ("503", "NotReadyReport")] {
            let reference = &responses[code]["content"]["application/json"]["schema"]["$ref"];
            assert_eq!(
                reference,
                &json!(format!("#/components/schemas/{schema}")),
                "{code}"
            );
            let text = schemas[schema].to_string();
            assert!(text.contains("rate_limit"), "{schema}: {text}");
        }
    }
}
