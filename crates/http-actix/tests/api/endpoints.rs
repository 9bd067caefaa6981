//! `/api/endpoints`: curated endpoints created, listed, read with the tools they serve, replaced
//! and deleted; the 404, 409 and 422 answers; a gateway without curated endpoints; and the
//! permissions of the routes, with `/mcp/v/{name}` authenticated like `/mcp`.

use std::sync::Arc;

use actix_web::http::Method;
use actix_web::test::{self, TestRequest};
use mcpgw_config::ToolNames;
use mcpgw_core::{EndpointName, EndpointSpec, ManagerSettings, ServerManager, ServerOrigin};
use mcpgw_gateway::authz::RoleAssignment;
use mcpgw_gateway::{
    AuthService, AuthSettings, EndpointService, EventBus, Gateway, GatewayInfo, TokioClock,
    TokioSpawner, ToolCatalog,
};
use mcpgw_http_actix::{ApiState, HttpSettings, app, install_metrics_recorder};
use mcpgw_testkit::fakes::{FakeLauncher, RecordingEventSink};
use serde_json::{Value, json};

use crate::support::{ScriptedSecrets, TEST_VERSION, assert_envelope, harness, send};

/// A gateway over fakes with curated endpoints resolved against a real catalogue.
struct EndpointHarness {
    state: ApiState,
    endpoints: Arc<EndpointService>,
}

fn endpoint_harness() -> EndpointHarness {
    let events = Arc::new(EventBus::new(1024));
    let clock = Arc::new(TokioClock::default());
    let manager = ServerManager::new(
        Arc::new(FakeLauncher::new()),
        clock.clone(),
        events.clone(),
        Arc::new(TokioSpawner::current()),
        None,
        ManagerSettings::default(),
    );
    let catalog = ToolCatalog::new(manager.clone(), ToolNames::prefixed());
    events.add_observer(catalog.observer());
    let endpoints = Arc::new(EndpointService::new(
        Arc::new(RecordingEventSink::default()),
        clock,
    ));
    endpoints.set_catalog(catalog);
    let gateway = Gateway::new(
        manager,
        GatewayInfo {
            version: TEST_VERSION.to_owned(),
            config_path: None,
        },
    )
    .with_endpoints(endpoints.clone());
    gateway.mark_startup_complete();
    let metrics = install_metrics_recorder().expect("the metrics recorder installs");
    EndpointHarness {
        state: ApiState::new(gateway, metrics, HttpSettings::default()),
        endpoints,
    }
}

fn request(method: Method, uri: &str, body: Option<&Value>) -> actix_http::Request {
    let builder = TestRequest::default().method(method).uri(uri);
    match body {
        Some(body) => builder.set_json(body).to_request(),
        None => builder.to_request(),
    }
}

/// A server whose tools are declared, so the catalogue lists them before it ever runs.
fn server(id: &str, tools: &[&str]) -> Value {
    let tools: Vec<Value> = tools
        .iter()
        .map(|name| json!({"name": name, "inputSchema": {"type": "object"}}))
        .collect();
    json!({"mcp_server_id": id, "mode": "subprocess", "command": [id], "tools": tools})
}

async fn with_servers<S, B>(app: &S)
where
    S: actix_web::dev::Service<
            actix_http::Request,
            Response = actix_web::dev::ServiceResponse<B>,
            Error = actix_web::Error,
        >,
    B: actix_web::body::MessageBody,
{
    for (id, tools) in [("math", &["add", "mul"][..]), ("tickets", &["open"][..])] {
        let (status, body) = send(
            app,
            request(Method::POST, "/api/mcp_servers", Some(&server(id, tools))),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
}

fn support() -> Value {
    json!({
        "name": "support",
        "description": "Tools for the support agents",
        "tools": [
            {"server": "tickets"},
            {"server": "math", "tool": "add", "name": "sum", "title": "Sum",
             "description": "Adds two numbers.", "annotations": {"readOnlyHint": true}},
        ],
        "allow": ["group:support", "user:alice"],
        "deny": ["user:mallory"],
    })
}

/// An endpoint of the configuration file, applied as a start or a reload applies it.
fn from_the_file(endpoints: &EndpointService, name: &str) {
    endpoints
        .apply_config(vec![EndpointSpec {
            name: EndpointName::parse(name).unwrap(),
            description: None,
            tools: vec![mcpgw_core::ToolSelector {
                server: mcpgw_core::ServerId::parse("math").unwrap(),
                tool: None,
                name: None,
                title: None,
                description: None,
                annotations: None,
            }],
            allow: vec![],
            deny: vec![],
            tool_search: false,
            origin: ServerOrigin::Config,
        }])
        .unwrap();
}

#[actix_web::test]
async fn an_endpoint_is_created_listed_read_replaced_and_deleted() {
    let h = endpoint_harness();
    let app = test::init_service(app(h.state.clone())).await;
    with_servers(&app).await;

    let (status, created) = send(
        &app,
        request(Method::POST, "/api/endpoints", Some(&support())),
    )
    .await;
    assert_eq!(
        (status.as_u16(), &created),
        (201, &json!({"name": "support", "created": true}))
    );
    assert_eq!(
        h.endpoints.get("support").unwrap().origin,
        ServerOrigin::Api
    );

    let (status, listed) = send(&app, request(Method::GET, "/api/endpoints", None)).await;
    assert_eq!(status, 200);
    assert_eq!(
        listed,
        json!({"endpoints": [{
            "name": "support",
            "description": "Tools for the support agents",
            "origin": "api",
            "path": "/mcp/v/support",
            "tool_search": false,
            "tool_count": 2,
        }]})
    );

    let (status, read) = send(&app, request(Method::GET, "/api/endpoints/support", None)).await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(read["name"], "support");
    assert_eq!(read["origin"], "api");
    assert_eq!(read["path"], "/mcp/v/support");
    assert_eq!(read["selection"], support()["tools"]);
    assert_eq!(read["allow"], json!(["group:support", "user:alice"]));
    assert_eq!(read["deny"], json!(["user:mallory"]));
    assert_eq!(read["tool_search"], false);
    assert_eq!(
        read["tools"],
        json!([
            {"name": "tickets__open", "server": "tickets", "tool": "open",
             "catalog_name": "tickets__open",
             "definition": {"name": "tickets__open", "inputSchema": {"type": "object"}}},
            {"name": "sum", "server": "math", "tool": "add", "catalog_name": "math__add",
             "definition": {"name": "sum", "title": "Sum", "description": "Adds two numbers.",
                            "inputSchema": {"type": "object"},
                            "annotations": {"readOnlyHint": true}}},
        ]),
        "{read}"
    );

    // A replace takes the whole definition; the name may be left out.
    let (status, replaced) = send(
        &app,
        request(
            Method::PUT,
            "/api/endpoints/support",
            Some(&json!({"tools": [{"server": "math"}], "tool_search": true})),
        ),
    )
    .await;
    assert_eq!(status, 200, "{replaced}");
    let (_, read) = send(&app, request(Method::GET, "/api/endpoints/support", None)).await;
    assert_eq!(replaced, read, "PUT answers what GET shows");
    assert_eq!(replaced["description"], Value::Null);
    assert_eq!(replaced["selection"], json!([{"server": "math"}]));
    assert_eq!(replaced["allow"], json!([]));
    assert_eq!(replaced["tool_search"], true);
    let names: Vec<&str> = replaced["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["math__add", "math__mul"]);

    let (status, deleted) = send(
        &app,
        request(Method::DELETE, "/api/endpoints/support", None),
    )
    .await;
    assert_eq!(
        (status.as_u16(), &deleted),
        (200, &json!({"name": "support", "deleted": true}))
    );
    assert!(h.endpoints.get("support").is_none());
    let (_, listed) = send(&app, request(Method::GET, "/api/endpoints/", None)).await;
    assert_eq!(listed, json!({"endpoints": []}));
}

#[actix_web::test]
async fn a_server_created_later_fills_an_endpoint_that_named_it() {
    let h = endpoint_harness();
    let app = test::init_service(app(h.state.clone())).await;
    let (status, body) = send(
        &app,
        request(
            Method::POST,
            "/api/endpoints",
            Some(&json!({"name": "later", "tools": [{"server": "math"}]})),
        ),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (_, read) = send(&app, request(Method::GET, "/api/endpoints/later", None)).await;
    assert_eq!(read["tools"], json!([]));
    with_servers(&app).await;
    let (_, listed) = send(&app, request(Method::GET, "/api/endpoints", None)).await;
    assert_eq!(listed["endpoints"][0]["tool_count"], 2, "{listed}");
}

#[actix_web::test]
async fn unknown_names_answer_404() {
    let h = endpoint_harness();
    let app = test::init_service(app(h.state.clone())).await;
    // Bad input: a name no endpoint has, and one that cannot be a name at all.
    for name in ["nobody", "a.b"] {
        let uri = format!("/api/endpoints/{name}");
        for (method, body) in [
            (Method::GET, None),
            (Method::PUT, Some(json!({"tools": [{"server": "math"}]}))),
            (Method::DELETE, None),
        ] {
            let response =
                test::call_service(&app, request(method.clone(), &uri, body.as_ref())).await;
            let message = assert_envelope(response, 404, "NotFoundError").await;
            assert!(
                message.contains("GET /api/endpoints"),
                "{method} {uri}: {message}"
            );
        }
    }
}

#[actix_web::test]
async fn a_taken_name_answers_409() {
    let h = endpoint_harness();
    let app = test::init_service(app(h.state.clone())).await;
    let (status, _) = send(
        &app,
        request(Method::POST, "/api/endpoints", Some(&support())),
    )
    .await;
    assert_eq!(status, 201);
    // Bad input: the same name again.
    let response = test::call_service(
        &app,
        request(Method::POST, "/api/endpoints", Some(&support())),
    )
    .await;
    let message = assert_envelope(response, 409, "ConflictError").await;
    assert!(message.contains("exists already"), "{message}");
    // And the name of an endpoint of the file.
    from_the_file(&h.endpoints, "filed");
    let response = test::call_service(
        &app,
        request(
            Method::POST,
            "/api/endpoints",
            Some(&json!({"name": "filed", "tools": [{"server": "math"}]})),
        ),
    )
    .await;
    assert_envelope(response, 409, "ConflictError").await;
}

#[actix_web::test]
async fn endpoints_of_the_file_are_read_here_and_changed_in_the_file() {
    let h = endpoint_harness();
    let app = test::init_service(app(h.state.clone())).await;
    with_servers(&app).await;
    from_the_file(&h.endpoints, "filed");
    let (status, read) = send(&app, request(Method::GET, "/api/endpoints/filed", None)).await;
    assert_eq!(status, 200);
    assert_eq!(read["origin"], "config");
    assert_eq!(read["tools"].as_array().unwrap().len(), 2, "{read}");
    // Bad input: a replace (even an invalid one) and a delete of the file's endpoint.
    for (method, body) in [
        (Method::PUT, Some(json!({"tools": [{"server": "tickets"}]}))),
        (Method::PUT, Some(json!({"tools": []}))),
        (Method::DELETE, None),
    ] {
        let response = test::call_service(
            &app,
            request(method.clone(), "/api/endpoints/filed", body.as_ref()),
        )
        .await;
        let message = assert_envelope(response, 409, "ConflictError").await;
        assert!(
            message.contains("configuration file"),
            "{method}: {message}"
        );
    }
    assert_eq!(
        h.endpoints.get("filed").unwrap().origin,
        ServerOrigin::Config
    );
}

#[actix_web::test]
async fn invalid_bodies_answer_422_with_the_configuration_rules() {
    let h = endpoint_harness();
    let app = test::init_service(app(h.state.clone())).await;
    let (status, _) = send(
        &app,
        request(Method::POST, "/api/endpoints", Some(&support())),
    )
    .await;
    assert_eq!(status, 201);
    let cases: Vec<(Method, &str, Value, &str)> = vec![
        // No name.
        (
            Method::POST,
            "/api/endpoints",
            json!({"tools": [{"server": "math"}]}),
            "name: is required",
        ),
        // A name that is no path segment.
        (
            Method::POST,
            "/api/endpoints",
            json!({"name": "a/b", "tools": [{"server": "math"}]}),
            "name: `a/b` is not an endpoint name",
        ),
        // No entry.
        (
            Method::POST,
            "/api/endpoints",
            json!({"name": "e", "tools": []}),
            "tools: an endpoint serves at least one entry",
        ),
        // An override without `tool`.
        (
            Method::POST,
            "/api/endpoints",
            json!({"name": "e", "tools": [{"server": "math", "name": "sum"}]}),
            "tools[0].name: name/title/description/annotations need `tool`",
        ),
        // Two entries served under one name.
        (
            Method::POST,
            "/api/endpoints",
            json!({"name": "e", "tools": [
                {"server": "math", "tool": "add", "name": "sum"},
                {"server": "tickets", "tool": "add", "name": "sum"}]}),
            "tools[0] and tools[1] would both be served as \"sum\"",
        ),
        // A bad principal pattern.
        (
            Method::POST,
            "/api/endpoints",
            json!({"name": "e", "tools": [{"server": "math"}], "allow": ["alice"]}),
            "allow[0]: principal `alice` has no kind",
        ),
        // A misspelt key.
        (
            Method::POST,
            "/api/endpoints",
            json!({"name": "e", "tools": [{"server": "math"}], "tool_serach": true}),
            "did you mean `tool_search`?",
        ),
        // A replace whose body names another endpoint.
        (
            Method::PUT,
            "/api/endpoints/support",
            json!({"name": "other", "tools": [{"server": "math"}]}),
            "does not match the endpoint's name `support`",
        ),
        // A replace without entries.
        (
            Method::PUT,
            "/api/endpoints/support",
            json!({"description": "x"}),
            "tools: an endpoint serves at least one entry",
        ),
    ];
    for (method, uri, body, expected) in cases {
        let response = test::call_service(&app, request(method.clone(), uri, Some(&body))).await;
        let message = assert_envelope(response, 422, "ValidationError").await;
        assert!(
            message.contains(expected),
            "{method} {uri} {body}: {message}"
        );
    }
    // Nothing was created, and the endpoint that was replaced badly is as it was.
    assert_eq!(h.endpoints.list().len(), 1);
    assert_eq!(
        h.endpoints.get("support").unwrap().tools.len(),
        2,
        "a refused replace changed the endpoint"
    );
}

#[actix_web::test]
async fn a_gateway_without_curated_endpoints_answers_404_on_every_route() {
    let app = test::init_service(app(harness().state)).await;
    for (method, uri) in [
        (Method::GET, "/api/endpoints"),
        (Method::POST, "/api/endpoints"),
        (Method::GET, "/api/endpoints/support"),
        (Method::PUT, "/api/endpoints/support"),
        (Method::DELETE, "/api/endpoints/support"),
        (Method::PATCH, "/api/endpoints/support"),
    ] {
        let body = (method != Method::GET && method != Method::DELETE).then(support);
        let response = test::call_service(&app, request(method.clone(), uri, body.as_ref())).await;
        let message = assert_envelope(response, 404, "NotFoundError").await;
        assert!(
            message.contains("curated endpoints are not enabled"),
            "{method} {uri}: {message}"
        );
    }
}

/// The API with authentication on, the anonymous caller holding `role` (or no role, and no
/// anonymous access, when `None`).
async fn with_auth(h: &EndpointHarness, role: Option<&str>) -> ApiState {
    let settings = AuthSettings {
        enabled: true,
        allow_anonymous: role.is_some(),
        static_assignments: role
            .map(|role| vec![RoleAssignment::parse("user:anonymous", role, None).unwrap()])
            .unwrap_or_default(),
        ..AuthSettings::default()
    };
    let auth = Arc::new(AuthService::new(
        settings,
        Arc::new(mcpgw_testkit::auth_store::InMemoryAuthStore::new()),
        Arc::new(RecordingEventSink::default()),
        Arc::new(mcpgw_testkit::clock::FakeClock::new()),
        Arc::new(ScriptedSecrets::default()),
    ));
    auth.load().await.expect("an empty store loads");
    h.state.clone().with_auth(auth)
}

#[actix_web::test]
async fn each_route_needs_its_endpoint_permission() {
    let h = endpoint_harness();
    from_the_file(&h.endpoints, "filed");
    // (role, may list and read, may create, update and delete)
    for (role, reads, manages) in [
        ("admin", true, true),
        ("operator", true, true),
        ("viewer", true, false),
        ("developer", false, false),
        ("auditor", false, false),
    ] {
        let app = test::init_service(app(with_auth(&h, Some(role)).await)).await;
        for (method, uri, body, needs_manage) in [
            (Method::GET, "/api/endpoints", None, false),
            (Method::GET, "/api/endpoints/filed", None, false),
            (
                Method::POST,
                "/api/endpoints",
                Some(json!({"name": format!("by-{role}"), "tools": [{"server": "math"}]})),
                true,
            ),
            (
                Method::PUT,
                "/api/endpoints/filed",
                Some(json!({"tools": [{"server": "math"}]})),
                true,
            ),
            (Method::DELETE, "/api/endpoints/filed", None, true),
        ] {
            let allowed = if needs_manage { manages } else { reads };
            let response =
                test::call_service(&app, request(method.clone(), uri, body.as_ref())).await;
            let status = response.status().as_u16();
            if allowed {
                // Past the permission check: an answer of the route itself (the file's
                // endpoint refuses a replace and a delete).
                assert!(
                    [200, 201, 409].contains(&status),
                    "{role} {method} {uri}: {status}"
                );
            } else {
                assert_envelope(response, 403, "AccessDeniedError").await;
            }
        }
    }
}

#[actix_web::test]
async fn curated_mcp_endpoints_need_authentication_like_mcp() {
    let h = endpoint_harness();
    from_the_file(&h.endpoints, "filed");
    let app = test::init_service(app(with_auth(&h, None).await)).await;
    // Bad input: MCP requests without a credential, to `/mcp` and to a curated endpoint.
    for uri in ["/mcp", "/mcp/v/filed", "/mcp/v/nobody"] {
        for method in [Method::GET, Method::POST, Method::DELETE] {
            let request = TestRequest::default()
                .method(method.clone())
                .uri(uri)
                .insert_header(("content-type", "application/json"))
                .insert_header(("accept", "application/json, text/event-stream"))
                .set_payload(r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}"#)
                .to_request();
            let response = test::call_service(&app, request).await;
            assert!(
                response.headers().contains_key("www-authenticate"),
                "{method} {uri}"
            );
            assert_envelope(response, 401, "AuthenticationError").await;
        }
    }
}
