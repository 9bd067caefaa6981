//! Probes, the OpenAPI document, the Swagger UI and `/metrics`.

use std::collections::BTreeSet;

use actix_web::http::Method;
use actix_web::test::{self, TestRequest};
use serde_json::json;

use crate::support::{TEST_VERSION, assert_envelope, harness, json_of, send};

/// Every route the adapter mounts, as (method, path template). The OpenAPI document must list
/// exactly these, and the application must answer each of them.
const MOUNTED_ROUTES: &[(&str, &str)] = &[
    ("GET", "/api/mcp_servers"),
    ("POST", "/api/mcp_servers"),
    ("GET", "/api/mcp_servers/{id}"),
    ("PUT", "/api/mcp_servers/{id}"),
    ("DELETE", "/api/mcp_servers/{id}"),
    ("POST", "/api/mcp_servers/{id}/start"),
    ("POST", "/api/mcp_servers/{id}/stop"),
    ("GET", "/api/mcp_servers/{id}/tools"),
    ("GET", "/api/mcp_servers/{id}/tools/history"),
    ("GET", "/api/mcp_servers/{id}/health"),
    ("GET", "/api/mcp_servers/{id}/logs"),
    ("GET", "/api/tool_pins"),
    ("GET", "/api/tool_pins/{id}"),
    ("DELETE", "/api/tool_pins/{id}"),
    ("POST", "/api/tool_pins/{id}/approve"),
    ("POST", "/api/tool_pins/{id}/reject"),
    ("GET", "/api/groups"),
    ("POST", "/api/groups"),
    ("GET", "/api/groups/{id}"),
    ("PUT", "/api/groups/{id}"),
    ("DELETE", "/api/groups/{id}"),
    ("POST", "/api/groups/{id}/rebalance"),
    ("POST", "/api/groups/{id}/members"),
    ("DELETE", "/api/groups/{id}/members/{member_id}"),
    ("GET", "/api/endpoints"),
    ("POST", "/api/endpoints"),
    ("GET", "/api/endpoints/{name}"),
    ("PUT", "/api/endpoints/{name}"),
    ("DELETE", "/api/endpoints/{name}"),
    ("POST", "/api/auth/keys"),
    ("GET", "/api/auth/keys"),
    ("DELETE", "/api/auth/keys/{key_id}"),
    ("GET", "/api/auth/roles"),
    ("POST", "/api/auth/roles"),
    ("GET", "/api/auth/roles/all"),
    ("POST", "/api/auth/roles/assign"),
    ("DELETE", "/api/auth/roles/revoke"),
    ("GET", "/api/auth/roles/{role_name}"),
    ("DELETE", "/api/auth/roles/{role_name}"),
    ("PATCH", "/api/auth/roles/{role_name}"),
    ("GET", "/api/auth/principals"),
    ("GET", "/api/auth/principals/roles"),
    ("GET", "/api/auth/permissions"),
    ("POST", "/api/auth/check-permission"),
    // One route, `/api/auth/policies/{scope}/{target_id}`, documented once per scope because
    // the targets it takes depend on the scope.
    ("GET", "/api/auth/policies/provider/{target_id}"),
    ("POST", "/api/auth/policies/provider/{target_id}"),
    ("DELETE", "/api/auth/policies/provider/{target_id}"),
    ("GET", "/api/auth/policies/mcp_server/{target_id}"),
    ("POST", "/api/auth/policies/mcp_server/{target_id}"),
    ("DELETE", "/api/auth/policies/mcp_server/{target_id}"),
    ("GET", "/api/auth/policies/group/{target_id}"),
    ("POST", "/api/auth/policies/group/{target_id}"),
    ("DELETE", "/api/auth/policies/group/{target_id}"),
    ("GET", "/api/auth/policies/tool/{target_id}"),
    ("POST", "/api/auth/policies/tool/{target_id}"),
    ("DELETE", "/api/auth/policies/tool/{target_id}"),
    ("GET", "/api/discovery/sources"),
    ("POST", "/api/discovery/sources"),
    ("PUT", "/api/discovery/sources/{id}"),
    ("DELETE", "/api/discovery/sources/{id}"),
    ("POST", "/api/discovery/sources/{id}/scan"),
    ("PUT", "/api/discovery/sources/{id}/enable"),
    ("GET", "/api/discovery/pending"),
    ("GET", "/api/discovery/quarantined"),
    ("POST", "/api/discovery/approve/{name}"),
    ("POST", "/api/discovery/reject/{name}"),
    ("GET", "/api/config"),
    ("POST", "/api/config/reload"),
    ("POST", "/api/config/export"),
    ("POST", "/api/config/backup"),
    ("GET", "/api/config/diff"),
    ("GET", "/api/ws/events"),
    ("GET", "/api/system"),
    ("GET", "/api/system/replicas"),
    ("GET", "/mcp"),
    ("POST", "/mcp"),
    ("DELETE", "/mcp"),
    ("GET", "/mcp/v/{name}"),
    ("POST", "/mcp/v/{name}"),
    ("DELETE", "/mcp/v/{name}"),
    ("GET", "/api/openapi.json"),
    ("GET", "/docs"),
    ("GET", "/health/live"),
    ("GET", "/health/startup"),
    ("GET", "/health/ready"),
    ("GET", "/metrics"),
    ("GET", "/.well-known/oauth-protected-resource"),
    ("GET", "/.well-known/oauth-protected-resource/mcp"),
];

#[actix_web::test]
async fn probes_follow_startup_and_shutdown() {
    let harness = crate::support::harness();
    // The harness completes start-up; a fresh gateway has not. Build one that has not.
    let not_started = {
        let launcher = std::sync::Arc::new(mcpgw_testkit::fakes::FakeLauncher::new());
        let manager = mcpgw_core::ServerManager::new(
            launcher,
            std::sync::Arc::new(mcpgw_gateway::TokioClock::default()),
            std::sync::Arc::new(mcpgw_testkit::fakes::RecordingEventSink::default()),
            std::sync::Arc::new(mcpgw_gateway::TokioSpawner::current()),
            None,
            mcpgw_core::ManagerSettings::default(),
        );
        mcpgw_gateway::Gateway::new(
            manager,
            mcpgw_gateway::GatewayInfo {
                version: TEST_VERSION.into(),
                config_path: None,
            },
        )
    };
    let state = mcpgw_http_actix::ApiState::new(
        not_started.clone(),
        harness.state.metrics().clone(),
        mcpgw_http_actix::HttpSettings::default(),
    );
    let app = test::init_service(mcpgw_http_actix::app(state)).await;
    let probe = |path: &'static str| TestRequest::get().uri(path).to_request();

    // Before start-up completes: alive, starting, not ready.
    let (status, body) = send(&app, probe("/health/live")).await;
    assert_eq!((status.as_u16(), body), (200, json!({"status": "alive"})));
    let (status, body) = send(&app, probe("/health/startup")).await;
    assert_eq!(
        (status.as_u16(), body),
        (503, json!({"status": "starting"}))
    );
    let (status, body) = send(&app, probe("/health/ready")).await;
    assert_eq!(status, 503);
    assert_eq!(body["status"], "not_ready");
    assert!(
        body["reason"].as_str().unwrap().contains("starting"),
        "{body}"
    );

    // After: started and ready, with every state counted.
    not_started.mark_startup_complete();
    let (status, body) = send(&app, probe("/health/startup")).await;
    assert_eq!((status.as_u16(), body), (200, json!({"status": "started"})));
    let (status, body) = send(&app, probe("/health/ready")).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"status": "ready", "mcp_servers": {"total": 0, "by_state":
            {"cold": 0, "initializing": 0, "ready": 0, "degraded": 0, "dead": 0}}})
    );

    // Shutting down: still alive and started, no longer ready.
    not_started.mark_shutting_down();
    let (status, _) = send(&app, probe("/health/live")).await;
    assert_eq!(status, 200);
    let (status, _) = send(&app, probe("/health/startup")).await;
    assert_eq!(status, 200);
    let (status, body) = send(&app, probe("/health/ready")).await;
    assert_eq!(status, 503);
    assert_eq!(body["status"], "not_ready");
    assert!(
        body["reason"].as_str().unwrap().contains("shutting down"),
        "{body}"
    );
}

#[actix_web::test]
async fn readiness_counts_servers_by_state() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    for id in ["a", "b"] {
        let create = TestRequest::post()
            .uri("/api/mcp_servers")
            .set_json(json!({"mcp_server_id": id, "mode": "subprocess", "command": ["x"]}))
            .to_request();
        assert_eq!(test::call_service(&app, create).await.status(), 201);
    }
    let start = TestRequest::post()
        .uri("/api/mcp_servers/a/start")
        .to_request();
    assert_eq!(test::call_service(&app, start).await.status(), 200);
    let (status, body) = send(&app, TestRequest::get().uri("/health/ready").to_request()).await;
    assert_eq!(status, 200);
    assert_eq!(body["mcp_servers"]["total"], 2);
    assert_eq!(body["mcp_servers"]["by_state"]["ready"], 1);
    assert_eq!(body["mcp_servers"]["by_state"]["cold"], 1);
    assert_eq!(body["mcp_servers"]["by_state"]["dead"], 0);
}

fn method_of(name: &str) -> Method {
    Method::from_bytes(name.as_bytes()).unwrap()
}

#[actix_web::test]
async fn the_openapi_document_is_3_1_and_lists_exactly_the_mounted_routes() {
    let harness = harness();
    // With a handler that answers 202, so that `/mcp` answers like every other route.
    let handler: mcpgw_http_actix::McpHttpHandler = std::sync::Arc::new(|_request| {
        Box::pin(async {
            let body = http_body_util::BodyExt::boxed_unsync(http_body_util::Empty::new());
            http::Response::builder().status(202).body(body).unwrap()
        })
    });
    // And with an event bus, so that `/api/ws/events` accepts a handshake.
    let events =
        mcpgw_http_actix::EventStreams::new(std::sync::Arc::new(mcpgw_gateway::EventBus::new(16)));
    let app = test::init_service(mcpgw_http_actix::app(
        harness
            .state
            .clone()
            .with_mcp_handler(handler)
            .with_events(events),
    ))
    .await;
    let response = test::call_service(
        &app,
        TestRequest::get().uri("/api/openapi.json").to_request(),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers().get("content-type").unwrap(),
        "application/json"
    );
    let document = json_of(response).await;
    assert!(
        document["openapi"].as_str().unwrap().starts_with("3.1."),
        "{}",
        document["openapi"]
    );
    assert_eq!(document["info"]["version"], TEST_VERSION);

    let documented: BTreeSet<(String, String)> = document["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object().unwrap().keys().filter_map(move |key| {
                let method = key.to_uppercase();
                ["GET", "POST", "PUT", "DELETE", "PATCH"]
                    .contains(&method.as_str())
                    .then(|| (method, path.clone()))
            })
        })
        .collect();
    let mounted: BTreeSet<(String, String)> = MOUNTED_ROUTES
        .iter()
        .map(|(method, path)| ((*method).to_owned(), (*path).to_owned()))
        .collect();
    assert_eq!(documented, mounted);

    // The error envelope is a component, and every route under /api/ documents it.
    let envelope = &document["components"]["schemas"]["ErrorEnvelope"];
    assert_eq!(
        envelope["required"],
        json!(["error", "message", "status_code"])
    );
    for (method, path) in MOUNTED_ROUTES
        .iter()
        .filter(|(_, path)| path.contains("{id}"))
    {
        let responses = &document["paths"][path][method.to_lowercase()]["responses"];
        let not_found = &responses["404"]["content"]["application/json"]["schema"]["$ref"];
        assert_eq!(
            not_found, "#/components/schemas/ErrorEnvelope",
            "{method} {path}"
        );
    }
    let create = &document["paths"]["/api/mcp_servers"]["post"]["responses"];
    let statuses: BTreeSet<&str> = create
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    // Its own answers, those every operation that takes credentials may give (401, 403, 429,
    // 500, and 503 while the identity provider is unreachable), the request limits' (408 and
    // 413 for its body, 431 for headers), and the checks against web pages' (421 for a foreign
    // Host, 403 for a foreign Origin, 415 for a body not declared JSON).
    assert_eq!(
        statuses,
        BTreeSet::from([
            "201", "401", "403", "408", "409", "413", "415", "421", "422", "429", "431", "500",
            "503"
        ])
    );
    // Every operation documents the request limits in the envelope: 431 everywhere, 408 and 413
    // wherever a body is taken.
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in
            item.as_object().unwrap().iter().filter(|(key, _)| {
                ["get", "put", "post", "delete", "patch"].contains(&key.as_str())
            })
        {
            let responses = &operation["responses"];
            let mut limits = vec!["431"];
            if operation.get("requestBody").is_some() {
                limits.extend(["408", "413"]);
            }
            for status in limits {
                assert_eq!(
                    responses[status]["content"]["application/json"]["schema"]["$ref"],
                    "#/components/schemas/ErrorEnvelope",
                    "{method} {path}: {status}"
                );
            }
        }
    }
    // Every REST operation documents the rate limit: the 429 with its headers, and the
    // X-RateLimit headers on its successes.
    for (method, path) in MOUNTED_ROUTES
        .iter()
        .filter(|(_, path)| path.starts_with("/api/"))
    {
        let responses = &document["paths"][path][method.to_lowercase()]["responses"];
        let too_many = &responses["429"];
        assert_eq!(
            too_many["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/ErrorEnvelope",
            "{method} {path}"
        );
        for header in ["Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining"] {
            assert!(
                too_many["headers"][header].is_object(),
                "{method} {path}: 429 without {header}"
            );
        }
        let success = responses
            .as_object()
            .unwrap()
            .iter()
            // The event stream's success is the 101 of the WebSocket upgrade.
            .find(|(status, _)| status.starts_with('2') || status.as_str() == "101")
            .map(|(_, response)| response)
            .unwrap_or_else(|| panic!("{method} {path} documents no success"));
        assert!(
            success["headers"]["X-RateLimit-Remaining"].is_object(),
            "{method} {path}: {success}"
        );
    }

    let create_group = &document["paths"]["/api/groups"]["post"]["responses"];
    let statuses: BTreeSet<&str> = create_group
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        statuses,
        BTreeSet::from([
            "201", "401", "403", "404", "408", "409", "413", "415", "421", "422", "429", "431",
            "500", "503"
        ])
    );
    for schema in [
        "GroupDetails",
        "GroupList",
        "CreateGroupRequest",
        "AddGroupMemberRequest",
    ] {
        assert!(
            document["components"]["schemas"][schema].is_object(),
            "{schema} is documented"
        );
    }

    // The application answers every documented route (with a real id where there is one).
    // This gateway has no groups, so the group routes answer their 404; a test with groups
    // enabled calls each of them.
    let create = TestRequest::post()
        .uri("/api/mcp_servers")
        .set_json(json!({"mcp_server_id": "doc", "mode": "subprocess", "command": ["x"]}))
        .to_request();
    assert_eq!(test::call_service(&app, create).await.status(), 201);
    for (method, path) in MOUNTED_ROUTES {
        // Deleting first would make the later routes 404; delete is answered last below.
        if *method == "DELETE" {
            continue;
        }
        let uri = path.replace("{id}", "doc").replace("{member_id}", "doc");
        let mut request = TestRequest::default().method(method_of(method)).uri(&uri);
        if path.starts_with("/api/groups") {
            let response = test::call_service(&app, request.to_request()).await;
            let message = assert_envelope(response, 404, "NotFoundError").await;
            assert!(message.contains("groups are not enabled"), "{method} {uri}");
            continue;
        }
        // Nor an auth service: every auth route answers its 404 (tests/api/auth.rs calls each
        // of them with one).
        if path.starts_with("/api/auth") {
            let response = test::call_service(&app, request.to_request()).await;
            let message = assert_envelope(response, 404, "NotFoundError").await;
            assert!(message.contains("auth is not enabled"), "{method} {uri}");
            continue;
        }
        // Nor a trusted authorization server: no protected resource metadata to publish.
        if path.starts_with("/.well-known/oauth-protected-resource") {
            let response = test::call_service(&app, request.to_request()).await;
            let message = assert_envelope(response, 404, "NotFoundError").await;
            assert!(
                message.contains("trusts no authorization server"),
                "{method} {uri}"
            );
            continue;
        }
        // Nor discovery: every discovery route answers its 404 (tests/api/discovery.rs calls
        // each of them with a discovery service).
        if path.starts_with("/api/discovery") {
            let response = test::call_service(&app, request.to_request()).await;
            let message = assert_envelope(response, 404, "NotFoundError").await;
            assert!(
                message.contains("discovery is not configured"),
                "{method} {uri}"
            );
            continue;
        }
        // Nor curated endpoints to serve: `/mcp/v/{name}` answers the 404 of an unknown name
        // (tests/endpoints.rs serves one end to end).
        if path.starts_with("/mcp/v/") {
            let response = test::call_service(&app, request.to_request()).await;
            let message = assert_envelope(response, 404, "NotFoundError").await;
            assert!(
                message.contains("no curated endpoint is named"),
                "{method} {uri}"
            );
            continue;
        }
        // Nor a pin ledger: every ledger route answers its 404.
        if path.starts_with("/api/tool_pins") {
            let response = test::call_service(&app, request.to_request()).await;
            let message = assert_envelope(response, 404, "NotFoundError").await;
            assert!(
                message.contains("tool pinning is not part of this gateway"),
                "{method} {uri}"
            );
            continue;
        }
        // Nor curated endpoints: every endpoint route answers its 404 (tests/api/endpoints.rs
        // calls each of them with an endpoint service).
        if path.starts_with("/api/endpoints") {
            let response = test::call_service(&app, request.to_request()).await;
            let message = assert_envelope(response, 404, "NotFoundError").await;
            assert!(
                message.contains("curated endpoints are not enabled"),
                "{method} {uri}"
            );
            continue;
        }
        // Nor a configuration service: every configuration route answers its 404
        // (tests/api/config.rs calls each of them with one).
        if path.starts_with("/api/config") {
            let response = test::call_service(&app, request.to_request()).await;
            let message = assert_envelope(response, 404, "NotFoundError").await;
            assert!(
                message.contains("configuration management is not enabled"),
                "{method} {uri}"
            );
            continue;
        }
        if *method == "PUT" {
            request = request.set_json(json!({"mode": "subprocess", "command": ["x"]}));
        }
        if *path == "/api/ws/events" {
            let handshake = request
                .insert_header(("upgrade", "websocket"))
                .insert_header(("connection", "upgrade"))
                .insert_header(("sec-websocket-version", "13"))
                .insert_header(("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="));
            let status = test::call_service(&app, handshake.to_request())
                .await
                .status();
            assert_eq!(status, 101, "{method} {uri}");
            continue;
        }
        if *method == "POST" && *path == "/api/mcp_servers" {
            request = request
                .set_json(json!({"mcp_server_id": "doc2", "mode": "subprocess", "command": ["x"]}));
        }
        let status = test::call_service(&app, request.to_request())
            .await
            .status();
        assert!(status.is_success(), "{method} {uri} answered {status}");
    }
    let delete = TestRequest::delete()
        .uri("/api/mcp_servers/doc")
        .to_request();
    assert_eq!(test::call_service(&app, delete).await.status(), 200);
}

#[actix_web::test]
async fn the_swagger_ui_is_served_offline_at_docs_with_and_without_the_slash() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    for uri in ["/docs", "/docs/"] {
        let response = test::call_service(&app, TestRequest::get().uri(uri).to_request()).await;
        assert_eq!(response.status(), 200, "{uri}");
        let content_type = response
            .headers()
            .get("content-type")
            .unwrap()
            .to_str()
            .unwrap();
        assert!(
            content_type.starts_with("text/html"),
            "{uri}: {content_type}"
        );
        let page = String::from_utf8(test::read_body(response).await.to_vec()).unwrap();
        assert!(page.contains("swagger-ui"), "{uri}");
        assert!(
            page.contains("<base href=\"/docs/\">"),
            "{uri}: relative assets resolve under /docs/"
        );
    }
    // The assets the page loads are compiled in, and the initializer points at our document.
    for asset in ["/docs/swagger-ui.css", "/docs/swagger-ui-bundle.js"] {
        let response = test::call_service(&app, TestRequest::get().uri(asset).to_request()).await;
        assert_eq!(response.status(), 200, "{asset}");
    }
    let response = test::call_service(
        &app,
        TestRequest::get()
            .uri("/docs/swagger-initializer.js")
            .to_request(),
    )
    .await;
    assert_eq!(response.status(), 200);
    let script = String::from_utf8(test::read_body(response).await.to_vec()).unwrap();
    assert!(script.contains("/api/openapi.json"), "{script}");
    // A file that is not there answers the 404 envelope.
    let response = test::call_service(
        &app,
        TestRequest::get().uri("/docs/nothing.js").to_request(),
    )
    .await;
    assert_envelope(response, 404, "NotFoundError").await;
}

/// The value of the sample `name{labels}` in a Prometheus text page, if present.
fn sample(page: &str, name_and_labels: &str) -> Option<f64> {
    page.lines().find_map(|line| {
        line.strip_prefix(name_and_labels)?
            .strip_prefix(' ')?
            .parse()
            .ok()
    })
}

#[actix_web::test]
async fn metrics_count_requests_by_route_template_and_report_the_gateway() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let create = TestRequest::post()
        .uri("/api/mcp_servers")
        .set_json(json!({"mcp_server_id": "metered-one", "mode": "subprocess", "command": ["x"]}))
        .to_request();
    assert_eq!(test::call_service(&app, create).await.status(), 201);
    for _ in 0..3 {
        let request = TestRequest::get()
            .uri("/api/mcp_servers/metered-one")
            .to_request();
        assert_eq!(test::call_service(&app, request).await.status(), 200);
    }
    let unknown = TestRequest::get()
        .uri("/metrics-probe-unmatched-path")
        .to_request();
    assert_eq!(test::call_service(&app, unknown).await.status(), 404);
    let odd_method = TestRequest::default()
        .method(Method::from_bytes(b"FROBNICATE").unwrap())
        .uri("/api/mcp_servers/metered-one")
        .to_request();
    assert_eq!(test::call_service(&app, odd_method).await.status(), 405);

    let response = test::call_service(&app, TestRequest::get().uri("/metrics").to_request()).await;
    assert_eq!(response.status(), 200);
    let content_type = response
        .headers()
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let page = String::from_utf8(test::read_body(response).await.to_vec()).unwrap();

    // Requests are labelled by the route template, never by the raw id or path. (Other tests in
    // this process share the recorder, so counts are at least what this test sent.)
    let by_template = sample(
        &page,
        r#"mcpgw_http_requests_total{method="GET",route="/api/mcp_servers/{id}",status="200"}"#,
    );
    assert!(by_template.is_some_and(|count| count >= 3.0), "{page}");
    assert!(
        !page.contains("/api/mcp_servers/metered-one"),
        "a raw path became a route label:\n{page}"
    );
    assert!(
        !page.contains("metrics-probe-unmatched-path"),
        "a raw path became a label:\n{page}"
    );
    assert!(
        sample(
            &page,
            r#"mcpgw_http_requests_total{method="GET",route="unmatched",status="404"}"#
        )
        .is_some(),
        "{page}"
    );
    assert!(
        !page.contains("FROBNICATE"),
        "a raw method became a label:\n{page}"
    );
    assert!(
        sample(
            &page,
            r#"mcpgw_http_requests_total{method="other",route="/api/mcp_servers/{id}",status="405"}"#
        )
        .is_some(),
        "{page}"
    );
    assert!(
        page.contains(r#"mcpgw_http_request_duration_seconds_bucket{method="GET",route="/api/mcp_servers/{id}",le="0.005"}"#),
        "the duration renders as a histogram with explicit buckets:\n{page}"
    );

    assert_eq!(
        sample(
            &page,
            &format!(r#"mcpgw_build_info{{version="{TEST_VERSION}"}}"#)
        ),
        Some(1.0)
    );
    for state in ["cold", "initializing", "ready", "degraded", "dead"] {
        assert!(
            sample(&page, &format!(r#"mcpgw_mcp_servers{{state="{state}"}}"#)).is_some(),
            "state {state} is missing:\n{page}"
        );
    }
    assert!(
        sample(&page, "mcpgw_uptime_seconds").is_some_and(|uptime| uptime >= 0.0),
        "{page}"
    );
}

#[actix_web::test]
async fn the_server_gauge_is_computed_from_the_manager_at_scrape_time() {
    // Its own process-wide gauge is shared with other tests, so this one checks the value right
    // after it changed its own gateway, scraping twice in a row.
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    for id in ["g1", "g2", "g3"] {
        let create = TestRequest::post()
            .uri("/api/mcp_servers")
            .set_json(json!({"mcp_server_id": id, "mode": "subprocess", "command": ["x"]}))
            .to_request();
        assert_eq!(test::call_service(&app, create).await.status(), 201);
    }
    let start = TestRequest::post()
        .uri("/api/mcp_servers/g1/start")
        .to_request();
    assert_eq!(test::call_service(&app, start).await.status(), 200);
    // Another test may scrape its own gateway in between; retry until this gateway's numbers are
    // the ones rendered (bounded, no sleeping).
    let mut last_page = String::new();
    for _ in 0..50 {
        let response =
            test::call_service(&app, TestRequest::get().uri("/metrics").to_request()).await;
        last_page = String::from_utf8(test::read_body(response).await.to_vec()).unwrap();
        let ready = sample(&last_page, r#"mcpgw_mcp_servers{state="ready"}"#);
        let cold = sample(&last_page, r#"mcpgw_mcp_servers{state="cold"}"#);
        if ready == Some(1.0) && cold == Some(2.0) {
            return;
        }
        actix_web::rt::task::yield_now().await;
    }
    panic!("the gauge never showed 1 ready and 2 cold:\n{last_page}");
}
