//! `GET /api/system`: uptime, version, and the summary of servers and tool calls.

use std::sync::Arc;

use actix_web::test::{self, TestRequest};
use mcpgw_core::{DomainEvent, EventSink, ServerId, Timestamp};
use mcpgw_gateway::{CallStats, EventBus};
use mcpgw_http_actix::{ApiState, HttpSettings, install_metrics_recorder};
use mcpgw_testkit::fakes::FakeBehaviour;
use serde_json::json;

use crate::support::{TEST_VERSION, harness, send};

fn subprocess_body(id: &str) -> serde_json::Value {
    json!({"mcp_server_id": id, "mode": "subprocess", "command": ["x"]})
}

#[actix_web::test]
async fn reports_uptime_version_and_servers_by_state_before_any_call() {
    let harness = harness();
    harness
        .launcher
        .set_behaviour("runs", FakeBehaviour::default());
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    for id in ["stays-cold", "runs"] {
        let request = TestRequest::post()
            .uri("/api/mcp_servers")
            .set_json(subprocess_body(id))
            .to_request();
        assert_eq!(test::call_service(&app, request).await.status(), 201);
    }
    let start = TestRequest::post()
        .uri("/api/mcp_servers/runs/start")
        .to_request();
    assert_eq!(test::call_service(&app, start).await.status(), 200);

    let (status, body) = send(&app, TestRequest::get().uri("/api/system").to_request()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["version"], TEST_VERSION);
    let uptime = body["uptime_seconds"].as_f64().expect("a number");
    assert!(uptime >= 0.0, "{uptime}");
    assert_eq!(
        body["metrics"],
        json!({
            "servers_by_state": {"cold": 1, "initializing": 0, "ready": 1, "degraded": 0, "dead": 0},
            "servers_total": 2,
            "groups_total": 0,
            "tools_total": 0,
            "tool_calls": 0,
            "tool_failures": 0,
            "tool_errors": 0,
            "success_rate": null,
            "p50_ms": null,
            "p99_ms": null,
        })
    );
}

fn completed(duration_ms: f64, is_error: bool) -> DomainEvent {
    DomainEvent::ToolInvocationCompleted {
        mcp_server_id: ServerId::parse("math").unwrap(),
        tool: "add".to_owned(),
        duration_ms,
        is_error,
        principal: None,
        trace_id: None,
        span_id: None,
    }
}

#[actix_web::test]
async fn tool_calls_failures_and_percentiles_follow_the_invocation_events() {
    let harness = harness();
    let stats = Arc::new(CallStats::new());
    let bus = EventBus::new(16);
    bus.add_observer(stats.clone());
    let gateway = harness.gateway.clone().with_call_stats(stats);
    let state = ApiState::new(
        gateway,
        install_metrics_recorder().unwrap(),
        HttpSettings::default(),
    );
    let app = test::init_service(mcpgw_http_actix::app(state)).await;
    let at = Timestamp::from_unix_micros(0);
    for duration in [10.0, 20.0, 30.0] {
        bus.publish(at, completed(duration, false));
    }
    bus.publish(at, completed(40.0, true));
    bus.publish(
        at,
        DomainEvent::ToolInvocationFailed {
            mcp_server_id: ServerId::parse("math").unwrap(),
            tool: "add".to_owned(),
            duration_ms: 1000.0,
            error_kind: "timeout",
            error: "the call took too long".to_owned(),
            principal: None,
            trace_id: None,
            span_id: None,
        },
    );
    // Not an invocation: must not count.
    bus.publish(
        at,
        DomainEvent::McpServerRemoved {
            mcp_server_id: ServerId::parse("math").unwrap(),
        },
    );

    let (status, body) = send(&app, TestRequest::get().uri("/api/system").to_request()).await;
    assert_eq!(status, 200, "{body}");
    let metrics = &body["metrics"];
    assert_eq!(metrics["tool_calls"], 5);
    assert_eq!(metrics["tool_failures"], 1);
    assert_eq!(metrics["tool_errors"], 1);
    assert_eq!(metrics["success_rate"], 0.8);
    assert_eq!(metrics["p50_ms"], 30.0);
    assert_eq!(metrics["p99_ms"], 1000.0);
}

#[actix_web::test]
async fn other_methods_answer_405_with_allow() {
    // Bad input: a write method on a read-only route.
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let response =
        test::call_service(&app, TestRequest::post().uri("/api/system").to_request()).await;
    assert_eq!(response.status(), 405);
    assert_eq!(response.headers().get("allow").unwrap(), "GET");
}

#[actix_web::test]
async fn the_document_describes_the_summary() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let (_, document) = send(
        &app,
        TestRequest::get().uri("/api/openapi.json").to_request(),
    )
    .await;
    let operation = &document["paths"]["/api/system"]["get"];
    assert_eq!(operation["tags"], json!(["system"]));
    let schemas = &document["components"]["schemas"];
    let metrics = schemas["SystemMetrics"]["properties"]
        .as_object()
        .expect("SystemMetrics is documented");
    for field in [
        "servers_by_state",
        "tool_calls",
        "tool_failures",
        "success_rate",
        "p50_ms",
        "p99_ms",
    ] {
        assert!(metrics.contains_key(field), "{field}");
    }
    assert!(schemas["ServersByState"]["properties"]["degraded"].is_object());
}

#[actix_web::test]
async fn a_lone_gateway_is_a_fleet_of_one() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let request = TestRequest::post()
        .uri("/api/mcp_servers")
        .set_json(subprocess_body("math"))
        .to_request();
    assert_eq!(test::call_service(&app, request).await.status(), 201);
    let (status, body) = send(
        &app,
        TestRequest::get().uri("/api/system/replicas").to_request(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["replica_id"], "local");
    assert_eq!(body["shared_store"], false);
    let replicas = body["replicas"].as_array().unwrap();
    assert_eq!(replicas.len(), 1);
    assert_eq!(replicas[0]["this_replica"], true);
    assert_eq!(replicas[0]["alive"], true);
    assert_eq!(replicas[0]["leases"], json!([]));
    assert_eq!(
        replicas[0]["servers"],
        json!([{"mcp_server_id": "math", "state": "cold"}])
    );
}

#[actix_web::test]
async fn the_fleet_view_shows_every_replica_and_its_leases() {
    use mcpgw_core::FleetStore as _;
    use mcpgw_gateway::{Fleet, FleetSettings, LEASE_DISCOVERY};
    use mcpgw_testkit::fleet_store_suite::{InMemoryFleetStore, sample_heartbeat};

    let harness = harness();
    let store = InMemoryFleetStore::new();
    let settings = FleetSettings {
        replica_id: "gw-a".to_owned(),
        version: TEST_VERSION.to_owned(),
        heartbeat_interval: std::time::Duration::from_secs(5),
        lease_ttl: std::time::Duration::from_secs(15),
    };
    let fleet = Arc::new(Fleet::new(
        settings,
        Timestamp::from_unix_micros(0),
        Arc::new(store.clone()),
        harness.gateway.servers().clone(),
    ));
    fleet.heartbeat().await.unwrap();
    assert!(fleet.renew(LEASE_DISCOVERY).await);
    store
        .heartbeat(&sample_heartbeat(
            "gw-b",
            &[("math", mcpgw_core::ServerState::Ready)],
        ))
        .await
        .unwrap();
    let gateway = harness.gateway.clone().with_fleet(fleet);
    let state = ApiState::new(
        gateway,
        install_metrics_recorder().unwrap(),
        HttpSettings::default(),
    );
    let app = test::init_service(mcpgw_http_actix::app(state)).await;
    let (status, body) = send(
        &app,
        TestRequest::get().uri("/api/system/replicas").to_request(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["replica_id"], "gw-a");
    assert_eq!(body["shared_store"], true);
    let replicas = body["replicas"].as_array().unwrap();
    let ids: Vec<&str> = replicas
        .iter()
        .map(|replica| replica["replica_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["gw-a", "gw-b"]);
    assert_eq!(replicas[0]["this_replica"], true);
    assert_eq!(replicas[0]["leases"], json!(["discovery"]));
    assert_eq!(replicas[1]["this_replica"], false);
    assert_eq!(replicas[1]["alive"], true);
    assert_eq!(
        replicas[1]["servers"],
        json!([{"mcp_server_id": "math", "state": "ready"}])
    );

    // Bad input: a write method on the read-only route.
    let response = test::call_service(
        &app,
        TestRequest::post().uri("/api/system/replicas").to_request(),
    )
    .await;
    assert_eq!(response.status(), 405);
}
