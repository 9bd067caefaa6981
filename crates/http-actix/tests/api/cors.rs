//! CORS: preflights answered before authentication and routing, and the headers of actual
//! requests, only from allowed origins and only when CORS is configured.

use actix_web::test::{self, TestRequest};
use mcpgw_http_actix::{CORS_EXPOSED_HEADERS, CorsSettings};

use crate::support::{assert_envelope, harness};

const ALLOWED: &str = "https://app.example.com";

fn cors_app_state(settings: CorsSettings) -> mcpgw_http_actix::ApiState {
    harness().state.with_cors(settings)
}

fn preflight(origin: &str, method: &str) -> TestRequest {
    TestRequest::default()
        .method(actix_web::http::Method::OPTIONS)
        .uri("/api/mcp_servers")
        .insert_header(("origin", origin))
        .insert_header(("access-control-request-method", method))
}

fn header<'a>(
    response: &'a actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>,
    name: &str,
) -> Option<&'a str> {
    response
        .headers()
        .get(name)
        .map(|value| value.to_str().unwrap())
}

#[actix_web::test]
async fn a_preflight_from_an_allowed_origin_answers_204_with_what_it_may_do() {
    let settings = CorsSettings::parse(ALLOWED, None, None).unwrap();
    let app = test::init_service(mcpgw_http_actix::app(cors_app_state(settings))).await;
    let request = preflight(ALLOWED, "POST")
        .insert_header(("access-control-request-headers", "content-type, x-api-key"))
        .to_request();
    let response = test::call_service(&app, request).await;
    assert_eq!(response.status(), 204);
    assert_eq!(
        header(&response, "access-control-allow-origin"),
        Some(ALLOWED)
    );
    assert_eq!(header(&response, "vary"), Some("Origin"));
    assert_eq!(
        header(&response, "access-control-allow-methods"),
        Some("GET, POST, PUT, PATCH, DELETE, OPTIONS")
    );
    // `*` echoes the requested headers.
    assert_eq!(
        header(&response, "access-control-allow-headers"),
        Some("content-type, x-api-key")
    );
    assert_eq!(header(&response, "access-control-max-age"), Some("600"));
}

#[actix_web::test]
async fn a_preflight_from_a_refused_origin_answers_403_without_cors_headers() {
    let settings = CorsSettings::parse(ALLOWED, None, None).unwrap();
    let app = test::init_service(mcpgw_http_actix::app(cors_app_state(settings))).await;
    // Bad input: a look-alike origin.
    let response = test::call_service(
        &app,
        preflight("https://app.example.com.evil.test", "GET").to_request(),
    )
    .await;
    assert!(header(&response, "access-control-allow-origin").is_none());
    assert!(header(&response, "access-control-allow-methods").is_none());
    let message = assert_envelope(response, 403, "AccessDeniedError").await;
    assert!(message.contains("MCP_CORS_ORIGINS"), "{message}");
}

#[actix_web::test]
async fn a_preflight_for_a_method_not_listed_answers_403() {
    let settings = CorsSettings::parse(ALLOWED, Some("GET"), Some("X-API-Key")).unwrap();
    let app = test::init_service(mcpgw_http_actix::app(cors_app_state(settings))).await;
    let response = test::call_service(&app, preflight(ALLOWED, "DELETE").to_request()).await;
    let message = assert_envelope(response, 403, "AccessDeniedError").await;
    assert!(message.contains("DELETE"), "{message}");
    let response = test::call_service(&app, preflight(ALLOWED, "GET").to_request()).await;
    assert_eq!(response.status(), 204);
    assert_eq!(
        header(&response, "access-control-allow-methods"),
        Some("GET")
    );
    assert_eq!(
        header(&response, "access-control-allow-headers"),
        Some("x-api-key")
    );
}

#[actix_web::test]
async fn actual_requests_from_an_allowed_origin_carry_the_cors_headers() {
    let settings =
        CorsSettings::parse(&format!("http://other.test, {ALLOWED}"), None, None).unwrap();
    let app = test::init_service(mcpgw_http_actix::app(cors_app_state(settings))).await;
    let request = TestRequest::get()
        .uri("/api/mcp_servers")
        .insert_header(("origin", ALLOWED))
        .to_request();
    let response = test::call_service(&app, request).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "access-control-allow-origin"),
        Some(ALLOWED)
    );
    assert_eq!(header(&response, "vary"), Some("Origin"));
    assert_eq!(
        header(&response, "access-control-expose-headers"),
        Some(CORS_EXPOSED_HEADERS)
    );
    // Error answers too: the browser must be able to read the envelope.
    let request = TestRequest::get()
        .uri("/api/mcp_servers/missing")
        .insert_header(("origin", ALLOWED))
        .to_request();
    let response = test::call_service(&app, request).await;
    assert_eq!(response.status(), 404);
    assert_eq!(
        header(&response, "access-control-allow-origin"),
        Some(ALLOWED)
    );

    // Another origin is served, without CORS headers: the browser withholds the answer.
    let request = TestRequest::get()
        .uri("/api/mcp_servers")
        .insert_header(("origin", "https://evil.test"))
        .to_request();
    let response = test::call_service(&app, request).await;
    assert_eq!(response.status(), 200);
    assert!(header(&response, "access-control-allow-origin").is_none());
    assert!(header(&response, "access-control-expose-headers").is_none());
}

#[actix_web::test]
async fn without_settings_no_response_carries_cors_headers() {
    let app = test::init_service(mcpgw_http_actix::app(harness().state)).await;
    let response = test::call_service(&app, preflight(ALLOWED, "GET").to_request()).await;
    // The preflight reaches the route, which does not accept OPTIONS.
    assert_eq!(response.status(), 405);
    assert!(
        response
            .headers()
            .keys()
            .all(|name| !name.as_str().starts_with("access-control-")),
        "{:?}",
        response.headers()
    );
    let request = TestRequest::get()
        .uri("/api/mcp_servers")
        .insert_header(("origin", ALLOWED))
        .to_request();
    let response = test::call_service(&app, request).await;
    assert_eq!(response.status(), 200);
    assert!(header(&response, "access-control-allow-origin").is_none());
}
