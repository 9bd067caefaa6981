//! What requests never reach a handler: a foreign `Host`, a foreign `Origin` on a request that
//! changes something, a body that is not declared JSON; and, with authentication on, a method
//! and path that no permission maps.

use std::sync::Arc;

use actix_web::test::{self, TestRequest};
use actix_web::{HttpResponse, web};
use mcpgw_gateway::authz::RoleAssignment;
use mcpgw_gateway::{AuthService, AuthSettings};
use mcpgw_http_actix::{AllowedHosts, ApiState};

use crate::support::{ScriptedSecrets, assert_envelope, harness};

/// The API with authentication on, every caller the anonymous principal with `role`, and one
/// more route under `/api/` that no permission maps (as an embedder might add).
async fn anonymous_as(
    role: &str,
) -> impl actix_web::dev::Service<
    actix_http::Request,
    Response = actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>,
    Error = actix_web::Error,
> {
    let settings = AuthSettings {
        enabled: true,
        allow_anonymous: true,
        static_assignments: vec![RoleAssignment::parse("user:anonymous", role, None).unwrap()],
        ..AuthSettings::default()
    };
    let auth = Arc::new(AuthService::new(
        settings,
        Arc::new(mcpgw_testkit::auth_store::InMemoryAuthStore::new()),
        Arc::new(mcpgw_testkit::fakes::RecordingEventSink::default()),
        Arc::new(mcpgw_testkit::clock::FakeClock::new()),
        Arc::new(ScriptedSecrets::default()),
    ));
    auth.load().await.expect("an empty store loads");
    let state: ApiState = harness().state.with_auth(auth);
    test::init_service(mcpgw_http_actix::app(state).route(
        "/api/embedded",
        web::get().to(|| async { HttpResponse::Ok().finish() }),
    ))
    .await
}

#[actix_web::test]
async fn routes_no_permission_maps_answer_404_or_405_and_served_ones_stay_denied() {
    for role in ["admin", "viewer"] {
        let app = anonymous_as(role).await;
        // A guess at a route: no route serves the path.
        let request = TestRequest::get()
            .uri("/api/auth/principals/user:admin/roles")
            .to_request();
        let message = assert_envelope(
            test::call_service(&app, request).await,
            404,
            "NotFoundError",
        )
        .await;
        assert!(message.contains("/api/openapi.json"), "{message}");
        // A route called with a method it does not take.
        let request = TestRequest::patch()
            .uri("/api/mcp_servers/x")
            .insert_header(("content-type", "application/json"))
            .set_payload("{}")
            .to_request();
        let response = test::call_service(&app, request).await;
        assert_eq!(
            response.headers().get("allow").unwrap(),
            "GET, PUT, DELETE",
            "{role}"
        );
        assert_envelope(response, 405, "MethodNotAllowedError").await;
        // A route that is served but that no permission opens is never run.
        let request = TestRequest::get().uri("/api/embedded").to_request();
        assert_envelope(
            test::call_service(&app, request).await,
            403,
            "AccessDeniedError",
        )
        .await;
    }
}

#[actix_web::test]
async fn the_checks_run_before_authentication() {
    let app = anonymous_as("viewer").await;
    // Bad input: a rebinding page's Host, a foreign page's POST, a text/plain body. None of
    // them needs a credential to be refused, and none reaches the permission check.
    let request = TestRequest::get()
        .uri("/api/mcp_servers")
        .insert_header(("host", "evil.example:8000"))
        .to_request();
    assert_envelope(
        test::call_service(&app, request).await,
        421,
        "MisdirectedRequestError",
    )
    .await;
    let request = TestRequest::post()
        .uri("/api/mcp_servers")
        .insert_header(("host", "localhost:8000"))
        .insert_header(("origin", "https://evil.example"))
        .insert_header(("content-type", "application/json"))
        .set_payload("{}")
        .to_request();
    assert_envelope(
        test::call_service(&app, request).await,
        403,
        "ForbiddenOriginError",
    )
    .await;
    let request = TestRequest::post()
        .uri("/api/mcp_servers")
        .insert_header(("content-type", "text/plain"))
        .set_payload("{}")
        .to_request();
    assert_envelope(
        test::call_service(&app, request).await,
        415,
        "UnsupportedMediaTypeError",
    )
    .await;
}

#[actix_web::test]
async fn an_embedder_names_its_hosts_and_the_listener_decides_about_addresses() {
    let hosts = AllowedHosts::new([0, 0, 0, 0].into(), &["gw.example.com:8443"]).unwrap();
    let app = test::init_service(mcpgw_http_actix::app(
        harness().state.with_allowed_hosts(hosts),
    ))
    .await;
    for (host, status) in [
        ("gw.example.com:8443", 200),
        ("10.0.0.7:8000", 200),
        ("localhost", 200),
        // Bad input: another port of a port-bound name, an unlisted name.
        ("gw.example.com:8000", 421),
        ("evil.example", 421),
    ] {
        let request = TestRequest::get()
            .uri("/api/mcp_servers")
            .insert_header(("host", host))
            .to_request();
        let response = test::call_service(&app, request).await;
        assert_eq!(response.status(), status, "{host}");
    }
}

#[actix_web::test]
async fn reads_are_never_refused_for_their_content_type() {
    let app = test::init_service(mcpgw_http_actix::app(harness().state)).await;
    // A client that sets a text type on every request, reads included.
    let request = TestRequest::get()
        .uri("/api/mcp_servers")
        .insert_header(("content-type", "text/plain"))
        .to_request();
    assert_eq!(test::call_service(&app, request).await.status(), 200);
    // The same type on a change is refused.
    let request = TestRequest::delete()
        .uri("/api/mcp_servers/x")
        .insert_header(("content-type", "text/plain"))
        .to_request();
    assert_envelope(
        test::call_service(&app, request).await,
        415,
        "UnsupportedMediaTypeError",
    )
    .await;
}
