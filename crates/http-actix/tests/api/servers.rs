//! The happy paths and shapes of `/api/mcp_servers`, its validation and the logs rules.

use std::time::Duration;

use actix_web::test::{self, TestRequest};
use mcpgw_core::{LaunchError, ServerId, ServerOrigin, ServerSpec, Tool};
use mcpgw_testkit::fakes::FakeBehaviour;
use serde_json::{Value, json};

use crate::support::{assert_envelope, harness, send};

fn subprocess_body(id: &str) -> Value {
    json!({
        "mcp_server_id": id,
        "mode": "subprocess",
        "command": ["python3", "-m", "math_server"],
        "env": {"API_TOKEN": "s3cret-value", "REGION": "eu"},
        "description": "adds numbers",
        "idle_ttl_s": 120,
    })
}

#[actix_web::test]
async fn create_answers_201_with_exactly_the_id_and_created() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let request = TestRequest::post()
        .uri("/api/mcp_servers")
        .set_json(subprocess_body("math"))
        .to_request();
    let (status, body) = send(&app, request).await;
    assert_eq!(status, 201);
    assert_eq!(body, json!({"mcp_server_id": "math", "created": true}));
    let snapshot = harness
        .gateway
        .servers()
        .snapshot(&ServerId::parse("math").unwrap())
        .unwrap();
    assert_eq!(snapshot.spec.origin, ServerOrigin::Api);
    assert_eq!(snapshot.spec.idle_ttl, Duration::from_secs(120));
}

#[actix_web::test]
async fn create_needs_a_body_declared_json() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    // Bad input: a form content type with a JSON body (what `curl -d` sends without `-H`), and
    // a JSON body without a content type.
    let request = TestRequest::post()
        .uri("/api/mcp_servers")
        .insert_header(("content-type", "application/x-www-form-urlencoded"))
        .set_payload(subprocess_body("curl-made").to_string())
        .to_request();
    let message = assert_envelope(
        test::call_service(&app, request).await,
        415,
        "UnsupportedMediaTypeError",
    )
    .await;
    assert!(
        message.contains("Content-Type: application/json"),
        "{message}"
    );
    let request = TestRequest::post()
        .uri("/api/mcp_servers")
        .set_payload(subprocess_body("no-type").to_string())
        .to_request();
    assert_envelope(
        test::call_service(&app, request).await,
        415,
        "UnsupportedMediaTypeError",
    )
    .await;
    assert!(harness.gateway.servers().list(None).is_empty());
    // JSON with a charset parameter.
    let request = TestRequest::post()
        .uri("/api/mcp_servers")
        .insert_header(("content-type", "application/json; charset=utf-8"))
        .set_payload(subprocess_body("typed").to_string())
        .to_request();
    let (status, body) = send(&app, request).await;
    assert_eq!(status, 201, "{body}");
}

#[actix_web::test]
async fn a_duplicate_create_answers_409_already_exists() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    for expected in [201, 409] {
        let request = TestRequest::post()
            .uri("/api/mcp_servers")
            .set_json(subprocess_body("twice"))
            .to_request();
        let response = test::call_service(&app, request).await;
        if expected == 201 {
            assert_eq!(response.status(), 201);
        } else {
            let message = assert_envelope(response, 409, "McpServerAlreadyExistsError").await;
            assert!(message.contains("`twice` already exists"), "{message}");
        }
    }
}

#[actix_web::test]
async fn list_shows_every_server_with_its_summary_fields() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    for id in ["beta", "alpha"] {
        let request = TestRequest::post()
            .uri("/api/mcp_servers")
            .set_json(subprocess_body(id))
            .to_request();
        assert_eq!(test::call_service(&app, request).await.status(), 201);
    }
    let (status, body) = send(
        &app,
        TestRequest::get().uri("/api/mcp_servers").to_request(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        body["mcp_servers"][0],
        json!({
            "mcp_server_id": "alpha",
            "state": "cold",
            "mode": "subprocess",
            "description": "adds numbers",
            "origin": "api",
            "tool_count": 0,
            "consecutive_failures": 0,
        })
    );
    assert_eq!(body["mcp_servers"][1]["mcp_server_id"], "beta");
    assert_eq!(body["mcp_servers"].as_array().unwrap().len(), 2);
}

#[actix_web::test]
async fn collections_answer_with_and_without_a_trailing_slash_without_redirects() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let request = TestRequest::post()
        .uri("/api/mcp_servers/")
        .set_json(subprocess_body("slash"))
        .to_request();
    let (status, body) = send(&app, request).await;
    assert_eq!(
        (status.as_u16(), body["created"].clone()),
        (201, json!(true))
    );
    for uri in [
        "/api/mcp_servers",
        "/api/mcp_servers/",
        "/api/mcp_servers/?state=cold",
    ] {
        let (status, body) = send(&app, TestRequest::get().uri(uri).to_request()).await;
        assert_eq!(status, 200, "{uri}");
        assert_eq!(body["mcp_servers"][0]["mcp_server_id"], "slash", "{uri}");
    }
}

#[actix_web::test]
async fn the_state_filter_accepts_the_five_states_and_refuses_others_with_422() {
    let harness = harness();
    harness
        .launcher
        .set_behaviour("will-run", FakeBehaviour::default());
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    for id in ["stays-cold", "will-run"] {
        let request = TestRequest::post()
            .uri("/api/mcp_servers")
            .set_json(subprocess_body(id))
            .to_request();
        assert_eq!(test::call_service(&app, request).await.status(), 201);
    }
    let start = TestRequest::post()
        .uri("/api/mcp_servers/will-run/start")
        .to_request();
    assert_eq!(test::call_service(&app, start).await.status(), 200);

    let ids_in = |body: &Value| -> Vec<String> {
        body["mcp_servers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|server| server["mcp_server_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let expected: [(&str, &[&str]); 5] = [
        ("cold", &["stays-cold"]),
        ("ready", &["will-run"]),
        ("initializing", &[]),
        ("degraded", &[]),
        ("dead", &[]),
    ];
    for (state, ids) in expected {
        let uri = format!("/api/mcp_servers?state={state}");
        let (status, body) = send(&app, TestRequest::get().uri(&uri).to_request()).await;
        assert_eq!(status, 200, "{uri}");
        assert_eq!(ids_in(&body), ids, "{uri}");
    }
    // Bad filters: an unknown name, the wrong case, an empty value, hostile text.
    for bad in ["running", "READY", "", "%3Cscript%3E"] {
        let uri = format!("/api/mcp_servers?state={bad}");
        let response = test::call_service(&app, TestRequest::get().uri(&uri).to_request()).await;
        let message = assert_envelope(response, 422, "ValidationError").await;
        assert!(
            message.starts_with("state: must be one of cold, initializing"),
            "{message}"
        );
    }
}

#[actix_web::test]
async fn details_show_the_definition_with_secrets_masked_tools_and_health() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let request = TestRequest::post()
        .uri("/api/mcp_servers")
        .set_json(subprocess_body("math"))
        .to_request();
    assert_eq!(test::call_service(&app, request).await.status(), 201);

    let response = test::call_service(
        &app,
        TestRequest::get().uri("/api/mcp_servers/math").to_request(),
    )
    .await;
    assert_eq!(response.status(), 200);
    let raw = test::read_body(response).await;
    let text = String::from_utf8_lossy(&raw);
    assert!(
        !text.contains("s3cret-value"),
        "an env value leaked: {text}"
    );
    let body: Value = serde_json::from_slice(&raw).unwrap();
    assert_eq!(body["mcp_server_id"], "math");
    assert_eq!(body["state"], "cold");
    assert_eq!(body["mode"], "subprocess");
    assert_eq!(body["origin"], "api");
    assert_eq!(body["description"], "adds numbers");
    assert_eq!(body["idle_ttl_s"], 120);
    assert_eq!(body["health_check_interval_s"], 60);
    assert_eq!(body["max_consecutive_failures"], 3);
    assert_eq!(body["command"], json!(["python3", "-m", "math_server"]));
    assert_eq!(body["env"], json!({"API_TOKEN": "***", "REGION": "***"}));
    assert_eq!(body["cwd"], Value::Null);
    assert_eq!(body["tools"], json!([]));
    assert_eq!(body["tool_source"], "unknown");
    assert_eq!(body["health"]["state"], "cold");
    assert_eq!(body["health"]["healthy"], false);
    assert_eq!(body["health"]["mcp_server_id"], "math");
}

#[actix_web::test]
async fn remote_and_docker_details_show_their_own_fields() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let remote = json!({
        "mcp_server_id": "api",
        "mode": "remote",
        "endpoint": "https://host.example/mcp",
        "headers": {"Authorization": "Bearer top-secret"},
    });
    let docker = json!({
        "mcp_server_id": "box",
        "mode": "docker",
        "image": "repo/img:tag",
        "args": ["--stdio"],
        "env": {"KEY": "hidden-value"},
        "memory": "512m",
    });
    for body in [remote, docker] {
        let request = TestRequest::post()
            .uri("/api/mcp_servers")
            .set_json(body)
            .to_request();
        let (status, body) = send(&app, request).await;
        assert_eq!(status, 201, "{body}");
    }
    let (_, api) = send(
        &app,
        TestRequest::get().uri("/api/mcp_servers/api").to_request(),
    )
    .await;
    assert_eq!(api["mode"], "remote");
    assert_eq!(api["endpoint"], "https://host.example/mcp");
    assert_eq!(api["headers"], json!({"Authorization": "***"}));
    assert!(api.get("command").is_none(), "{api}");

    let (_, boxed) = send(
        &app,
        TestRequest::get().uri("/api/mcp_servers/box").to_request(),
    )
    .await;
    assert_eq!(boxed["mode"], "docker");
    assert_eq!(boxed["image"], "repo/img:tag");
    assert_eq!(boxed["args"], json!(["--stdio"]));
    assert_eq!(boxed["env"], json!({"KEY": "***"}));
    assert_eq!(boxed["network"], "none");
    assert_eq!(boxed["memory"], "512m");
    assert_eq!(boxed["read_only"], true);
    assert_eq!(boxed["volumes"], json!([]));
}

#[actix_web::test]
async fn predefined_tools_are_listed_before_the_first_start_without_starting() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let mut body = subprocess_body("declared");
    body["tools"] =
        json!([{"name": "add", "description": "adds", "inputSchema": {"type": "object"}}]);
    let request = TestRequest::post()
        .uri("/api/mcp_servers")
        .set_json(body)
        .to_request();
    let (status, created) = send(&app, request).await;
    assert_eq!(status, 201, "{created}");

    let uri = "/api/mcp_servers/declared/tools";
    let (status, tools) = send(&app, TestRequest::get().uri(uri).to_request()).await;
    assert_eq!(status, 200);
    assert_eq!(
        tools,
        json!({
            "mcp_server_id": "declared",
            "tools": [{"name": "add", "description": "adds", "inputSchema": {"type": "object"}}],
            "source": "predefined",
            "learned_at": null,
        })
    );
    assert_eq!(
        harness.launcher.launches(),
        0,
        "listing tools must not start the server"
    );
}

#[actix_web::test]
async fn start_and_stop_answer_the_details_and_tools_become_live() {
    let harness = harness();
    harness.launcher.set_behaviour(
        "runner",
        FakeBehaviour {
            tools: vec![
                Tool::new("echo").with_description("echoes"),
                Tool::new("shout"),
            ],
            ..FakeBehaviour::default()
        },
    );
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let request = TestRequest::post()
        .uri("/api/mcp_servers")
        .set_json(subprocess_body("runner"))
        .to_request();
    assert_eq!(test::call_service(&app, request).await.status(), 201);
    let (_, tools) = send(
        &app,
        TestRequest::get()
            .uri("/api/mcp_servers/runner/tools")
            .to_request(),
    )
    .await;
    assert_eq!(tools["source"], "unknown");

    let start = TestRequest::post()
        .uri("/api/mcp_servers/runner/start")
        .to_request();
    let (status, started) = send(&app, start).await;
    assert_eq!(status, 200, "{started}");
    assert_eq!(started["state"], "ready");
    assert_eq!(started["tool_source"], "live");
    assert_eq!(started["tools"][0]["name"], "echo");
    assert_eq!(started["tools"][1]["name"], "shout");
    assert_eq!(started["health"]["healthy"], true);
    assert_eq!(started["health"]["total_starts"], 1);
    assert!(started["health"]["started_at"].is_string());

    let (_, tools) = send(
        &app,
        TestRequest::get()
            .uri("/api/mcp_servers/runner/tools")
            .to_request(),
    )
    .await;
    assert_eq!(tools["source"], "live");
    assert_eq!(tools["tools"].as_array().unwrap().len(), 2);

    let stop = TestRequest::post()
        .uri("/api/mcp_servers/runner/stop")
        .to_request();
    let (status, stopped) = send(&app, stop).await;
    assert_eq!(status, 200);
    assert_eq!(stopped["state"], "cold");
    assert!(harness.launcher.session("runner").unwrap().is_closed());
}

#[actix_web::test]
async fn a_failed_start_answers_503_with_the_launch_error() {
    let harness = harness();
    harness.launcher.set_behaviour(
        "broken",
        FakeBehaviour {
            launch_error: Some(LaunchError::CommandNotFound {
                command: "no-such-binary".into(),
            }),
            ..FakeBehaviour::default()
        },
    );
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let request = TestRequest::post()
        .uri("/api/mcp_servers")
        .set_json(subprocess_body("broken"))
        .to_request();
    assert_eq!(test::call_service(&app, request).await.status(), 201);
    let response = test::call_service(
        &app,
        TestRequest::post()
            .uri("/api/mcp_servers/broken/start")
            .to_request(),
    )
    .await;
    let message = assert_envelope(response, 503, "McpServerUnavailableError").await;
    assert!(
        message.contains("`no-such-binary` was not found"),
        "{message}"
    );

    let (_, health) = send(
        &app,
        TestRequest::get()
            .uri("/api/mcp_servers/broken/health")
            .to_request(),
    )
    .await;
    assert_eq!(health["state"], "dead");
    assert_eq!(health["consecutive_failures"], 1);
    assert!(
        health["last_error"]
            .as_str()
            .unwrap()
            .contains("no-such-binary"),
        "{health}"
    );
}

#[actix_web::test]
async fn health_has_every_documented_field() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let request = TestRequest::post()
        .uri("/api/mcp_servers")
        .set_json(subprocess_body("h"))
        .to_request();
    assert_eq!(test::call_service(&app, request).await.status(), 201);
    let (status, health) = send(
        &app,
        TestRequest::get()
            .uri("/api/mcp_servers/h/health")
            .to_request(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        health,
        json!({
            "mcp_server_id": "h",
            "state": "cold",
            "healthy": false,
            "consecutive_failures": 0,
            "max_consecutive_failures": 3,
            "last_error": null,
            "last_health_check_at": null,
            "last_health_check_ok": null,
            "restart_backoff_remaining_ms": 0,
            "started_at": null,
            "last_used_at": null,
            "in_flight_calls": 0,
            "total_starts": 0,
        })
    );
}

#[actix_web::test]
async fn update_replaces_the_definition_and_answers_the_details() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let request = TestRequest::post()
        .uri("/api/mcp_servers")
        .set_json(subprocess_body("upd"))
        .to_request();
    assert_eq!(test::call_service(&app, request).await.status(), 201);

    // Without `mcp_server_id` in the body.
    let put = TestRequest::put()
        .uri("/api/mcp_servers/upd")
        .set_json(json!({"mode": "subprocess", "command": ["node", "server.js"], "idle_ttl_s": 30}))
        .to_request();
    let (status, details) = send(&app, put).await;
    assert_eq!(status, 200, "{details}");
    assert_eq!(details["command"], json!(["node", "server.js"]));
    assert_eq!(details["idle_ttl_s"], 30);
    assert_eq!(details["description"], Value::Null);
    assert_eq!(details["origin"], "api");

    // With the same id in the body.
    let mut body = subprocess_body("upd");
    body["description"] = json!("changed");
    let put = TestRequest::put()
        .uri("/api/mcp_servers/upd")
        .set_json(body)
        .to_request();
    let (status, details) = send(&app, put).await;
    assert_eq!(status, 200, "{details}");
    assert_eq!(details["description"], "changed");
}

#[actix_web::test]
async fn update_refuses_a_different_body_id_with_422() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let request = TestRequest::post()
        .uri("/api/mcp_servers")
        .set_json(subprocess_body("keep"))
        .to_request();
    assert_eq!(test::call_service(&app, request).await.status(), 201);
    let put = TestRequest::put()
        .uri("/api/mcp_servers/keep")
        .set_json(subprocess_body("renamed"))
        .to_request();
    let message =
        assert_envelope(test::call_service(&app, put).await, 422, "ValidationError").await;
    assert!(
        message.contains("mcp_server_id") && message.contains("renamed"),
        "{message}"
    );
    // The bad body changed nothing.
    let (_, details) = send(
        &app,
        TestRequest::get().uri("/api/mcp_servers/keep").to_request(),
    )
    .await;
    assert_eq!(details["idle_ttl_s"], 120);
}

#[actix_web::test]
async fn put_and_delete_of_a_config_declared_server_answer_409() {
    let harness = harness();
    let declared = ServerSpec {
        origin: ServerOrigin::Config,
        ..ServerSpec::subprocess(ServerId::parse("from-file").unwrap(), vec!["true".into()])
    };
    harness.gateway.servers().register(declared).await.unwrap();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;

    let put = TestRequest::put()
        .uri("/api/mcp_servers/from-file")
        .set_json(json!({"mode": "subprocess", "command": ["other"]}))
        .to_request();
    let message = assert_envelope(test::call_service(&app, put).await, 409, "ConflictError").await;
    assert!(message.contains("configuration file"), "{message}");

    let delete = TestRequest::delete()
        .uri("/api/mcp_servers/from-file")
        .to_request();
    let message =
        assert_envelope(test::call_service(&app, delete).await, 409, "ConflictError").await;
    assert!(message.contains("configuration file"), "{message}");

    // Declared servers can still be started and stopped over REST.
    let start = TestRequest::post()
        .uri("/api/mcp_servers/from-file/start")
        .to_request();
    let (status, details) = send(&app, start).await;
    assert_eq!(
        (status.as_u16(), details["origin"].clone()),
        (200, json!("config"))
    );
}

#[actix_web::test]
async fn delete_stops_the_server_and_removes_it() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let request = TestRequest::post()
        .uri("/api/mcp_servers")
        .set_json(subprocess_body("gone"))
        .to_request();
    assert_eq!(test::call_service(&app, request).await.status(), 201);
    let start = TestRequest::post()
        .uri("/api/mcp_servers/gone/start")
        .to_request();
    assert_eq!(test::call_service(&app, start).await.status(), 200);

    let delete = TestRequest::delete()
        .uri("/api/mcp_servers/gone")
        .to_request();
    let (status, body) = send(&app, delete).await;
    assert_eq!(status, 200);
    assert_eq!(body, json!({"mcp_server_id": "gone", "deleted": true}));
    assert!(
        harness.launcher.session("gone").unwrap().is_closed(),
        "delete stops it first"
    );
    let response = test::call_service(
        &app,
        TestRequest::get().uri("/api/mcp_servers/gone").to_request(),
    )
    .await;
    assert_envelope(response, 404, "McpServerNotFoundError").await;
}

/// Registers `id`, makes its fake write `lines` stderr lines at launch, and starts it.
async fn server_with_logs<S, B>(harness: &crate::support::Harness, app: &S, id: &str, lines: usize)
where
    S: actix_web::dev::Service<
            actix_http::Request,
            Response = actix_web::dev::ServiceResponse<B>,
            Error = actix_web::Error,
        >,
    B: actix_web::body::MessageBody,
{
    harness.launcher.set_behaviour(
        id,
        FakeBehaviour {
            stderr_at_launch: (1..=lines).map(|n| format!("line {n}")).collect(),
            ..FakeBehaviour::default()
        },
    );
    let request = TestRequest::post()
        .uri("/api/mcp_servers")
        .set_json(subprocess_body(id))
        .to_request();
    assert_eq!(test::call_service(app, request).await.status(), 201);
    let start = TestRequest::post()
        .uri(&format!("/api/mcp_servers/{id}/start"))
        .to_request();
    assert_eq!(test::call_service(app, start).await.status(), 200);
}

#[actix_web::test]
async fn logs_serve_the_most_recent_lines_oldest_first_with_the_documented_limits() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    // 1200 lines written; the ring keeps the last 1000 (lines 201..=1200).
    server_with_logs(&harness, &app, "chatty", 1200).await;

    // (query, expected count); the last line is always the newest.
    let cases = [
        ("", 100),
        ("?lines=1", 1),
        ("?lines=1000", 1000),
        ("?lines=1500", 1000),
        ("?lines=99999999999999999999999", 1000),
    ];
    for (query, expected) in cases {
        let uri = format!("/api/mcp_servers/chatty/logs{query}");
        let (status, body) = send(&app, TestRequest::get().uri(&uri).to_request()).await;
        assert_eq!(status, 200, "{uri}: {body}");
        assert_eq!(body["mcp_server_id"], "chatty", "{uri}");
        assert_eq!(body["count"], expected, "{uri}");
        let logs = body["logs"].as_array().unwrap();
        assert_eq!(logs.len(), expected, "{uri}");
        assert_eq!(logs.last().unwrap()["line"], "line 1200", "{uri}");
        let first = 1200 - expected + 1;
        assert_eq!(
            logs[0]["line"],
            format!("line {first}"),
            "{uri}: oldest first"
        );
    }

    let (_, body) = send(
        &app,
        TestRequest::get()
            .uri("/api/mcp_servers/chatty/logs?lines=1")
            .to_request(),
    )
    .await;
    let entry = &body["logs"][0];
    assert_eq!(entry.as_object().unwrap().len(), 4, "{entry}");
    assert_eq!(entry["mcp_server_id"], "chatty");
    assert_eq!(entry["stream"], "stderr");
    let timestamp = entry["timestamp"].as_str().unwrap();
    // `2026-11-21T14:03:07.123456`: no offset, microseconds.
    assert_eq!(timestamp.len(), 26, "{timestamp}");
    assert_eq!(&timestamp[10..11], "T");
    assert_eq!(&timestamp[19..20], ".");
}

#[actix_web::test]
async fn logs_refuse_lines_below_one_or_not_integers_with_422() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    server_with_logs(&harness, &app, "quiet", 3).await;
    // Zero, negative, letters, a fraction, empty, an exponent.
    for bad in ["0", "-1", "abc", "1.5", "", "1e3"] {
        let uri = format!("/api/mcp_servers/quiet/logs?lines={bad}");
        let response = test::call_service(&app, TestRequest::get().uri(&uri).to_request()).await;
        let message = assert_envelope(response, 422, "ValidationError").await;
        assert!(
            message.starts_with("lines: must be an integer from 1 to 1000"),
            "{message}"
        );
    }
}

#[actix_web::test]
async fn logs_of_a_never_started_server_are_empty_and_of_an_unknown_one_404() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let request = TestRequest::post()
        .uri("/api/mcp_servers")
        .set_json(subprocess_body("idle"))
        .to_request();
    assert_eq!(test::call_service(&app, request).await.status(), 201);
    let (status, body) = send(
        &app,
        TestRequest::get()
            .uri("/api/mcp_servers/idle/logs")
            .to_request(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"logs": [], "mcp_server_id": "idle", "count": 0})
    );

    let response = test::call_service(
        &app,
        TestRequest::get()
            .uri("/api/mcp_servers/nobody/logs?lines=5")
            .to_request(),
    )
    .await;
    assert_envelope(response, 404, "McpServerNotFoundError").await;
}

#[actix_web::test]
async fn the_tools_answer_says_where_the_list_came_from_and_when_it_was_learned() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let manager = harness.gateway.servers();
    for raw in ["kept", "runner"] {
        let request = TestRequest::post()
            .uri("/api/mcp_servers")
            .set_json(subprocess_body(raw))
            .to_request();
        assert_eq!(test::call_service(&app, request).await.status(), 201);
    }
    let tools = |raw: &'static str| {
        let app = &app;
        async move {
            let (status, body) = send(
                app,
                TestRequest::get()
                    .uri(&format!("/api/mcp_servers/{raw}/tools"))
                    .to_request(),
            )
            .await;
            assert_eq!(status, 200, "{body}");
            body
        }
    };
    let unknown = tools("kept").await;
    assert_eq!(unknown["source"], "unknown");
    assert_eq!(unknown["learned_at"], Value::Null);

    // A list the server gave under this definition before a restart.
    let kept = mcpgw_core::StoredToolList {
        server_id: ServerId::parse("kept").unwrap(),
        definition_digest: manager
            .snapshot(&ServerId::parse("kept").unwrap())
            .unwrap()
            .spec
            .tool_list_digest(),
        tools: vec![Tool::new("add").with_description("adds")],
        learned_at: mcpgw_core::Timestamp::from_unix_micros(1_795_269_787_123_456),
    };
    assert!(manager.restore_tools(&kept).unwrap());
    let stored = tools("kept").await;
    assert_eq!(stored["source"], "stored");
    assert_eq!(stored["learned_at"], "2026-11-21T14:03:07.123456");
    assert_eq!(
        stored["tools"],
        json!([{"name": "add", "description": "adds", "inputSchema": {"type": "object"}}])
    );
    let (_, details) = send(
        &app,
        TestRequest::get().uri("/api/mcp_servers/kept").to_request(),
    )
    .await;
    assert_eq!(details["tool_source"], "stored");
    assert_eq!(details["tools"], stored["tools"]);

    // A server that ran: when it listed them.
    let start = TestRequest::post()
        .uri("/api/mcp_servers/runner/start")
        .to_request();
    assert_eq!(send(&app, start).await.0, 200);
    let live = tools("runner").await;
    assert_eq!(live["source"], "live");
    let learned_at = live["learned_at"].as_str().unwrap();
    assert_eq!(
        learned_at.len(),
        "2026-11-21T14:03:07.123456".len(),
        "{learned_at}"
    );
    assert!(learned_at.as_bytes()[10] == b'T' && !learned_at.ends_with('Z'));
}
