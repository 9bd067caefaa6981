//! The HTTP adapter of mcpgw: the REST API under `/api/`, the MCP endpoint at `/mcp`, the probes
//! under `/health/`, Prometheus metrics at `/metrics`, the OpenAPI document and its Swagger UI, on
//! actix-web.
//!
//! It turns HTTP requests into calls of the application facade ([`mcpgw_gateway::Gateway`])
//! and the answers into the API's JSON shapes, which live here and nowhere else. Server
//! definitions in request bodies go through the configuration crate, so the API and the file
//! obey one set of rules. Every error, actix's own included, answers the API's error envelope
//! `{"error", "message", "status_code"}`. `/mcp` is a mount point only: the MCP protocol is served
//! by a [`McpHttpHandler`] that the composition root hands in, built on standard `http` types, so
//! this crate knows no MCP library.
//!
//! Every route but the probes is guarded against web pages in the operator's browser: the `Host`
//! must name the gateway ([`AllowedHosts`]), a foreign `Origin` may not change anything, open
//! the event stream or call `/mcp`, and `/api/` bodies must be declared JSON. `/mcp` relies on
//! these checks: the MCP handler makes none of its own.
//!
//! It must never hold business rules (they belong to the domain crates), never know another
//! adapter, never panic or answer 500 on bad input, and never label a metric with unbounded
//! caller input.
//!
//! Use [`build_server`] to run the bundled server, [`app`] for an in-process `App` (tests), or
//! [`service`] to mount the whole gateway, its checks included, in an embedder's own actix
//! application. [`configure`] mounts the bare routes, without any check: only for an embedder
//! who puts equivalent middleware in front of them.
//!
//! # Example
//!
//! The whole API in process, over a gateway whose servers are fakes (from `mcpgw-testkit`):
//!
//! ```rust
//! use std::sync::Arc;
//!
//! use actix_web::test;
//! use mcpgw_core::{ManagerSettings, NullEventSink, ServerManager};
//! use mcpgw_gateway::{Gateway, GatewayInfo, TokioClock, TokioSpawner};
//! use mcpgw_http_actix::{ApiState, HttpSettings, app, install_metrics_recorder};
//! use mcpgw_testkit::fakes::FakeLauncher;
//! use serde_json::json;
//!
//! # #[actix_web::main]
//! # async fn main() {
//! let manager = ServerManager::new(
//!     Arc::new(FakeLauncher::new()),
//!     Arc::new(TokioClock::default()),
//!     Arc::new(NullEventSink),
//!     Arc::new(TokioSpawner::current()),
//!     None,
//!     ManagerSettings::default(),
//! );
//! let gateway = Gateway::new(
//!     manager,
//!     GatewayInfo { version: "1.0.0".into(), config_path: None },
//! );
//! gateway.mark_startup_complete();
//! let metrics = install_metrics_recorder().expect("no other metrics recorder");
//! let api = test::init_service(app(ApiState::new(gateway, metrics, HttpSettings::default()))).await;
//!
//! let create = test::TestRequest::post()
//!     .uri("/api/mcp_servers")
//!     .set_json(json!({"mcp_server_id": "math", "mode": "subprocess", "command": ["math-server"]}))
//!     .to_request();
//! let created: serde_json::Value = test::call_and_read_body_json(&api, create).await;
//! assert_eq!(created, json!({"mcp_server_id": "math", "created": true}));
//!
//! let missing = test::TestRequest::get().uri("/api/mcp_servers/nope").to_request();
//! let response = test::call_service(&api, missing).await;
//! assert_eq!(response.status(), 404);
//! # }
//! ```

mod auth_api;
mod authn;
mod config_api;
mod console;
mod cors;
mod definition;
mod discovery;
pub mod dto;
mod endpoints_api;
mod error;
mod groups;
mod guard;
mod limits;
mod mcp_endpoint;
mod oauth;
mod openapi;
mod probes;
mod rate_limit;
mod servers;
mod state;
mod system;
mod telemetry;
mod tool_pins;
mod trace_spans;
mod ws;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::{App, HttpRequest, HttpServer, Resource, web};

pub use authn::{TrustedProxies, identity_of};
pub use console::{CONSOLE_PATH, Console, SESSION_COOKIE};
pub use cors::{CORS_ALL_METHODS, CORS_EXPOSED_HEADERS, CORS_MAX_AGE_SECONDS, CorsSettings};
pub use error::{
    ApiError, ErrorEnvelope, names as error_names, route_not_found, status_and_name_of,
};
pub use guard::{AllowedHosts, McpOrigins};
pub use mcp_endpoint::{
    CURATED_PATH_PREFIX, EndpointHandlers, MCP_ALLOWED_METHODS, MCP_PATH, McpHttpHandler,
    McpResponseBody, is_mcp_path,
};
pub use oauth::{
    MCP_PROTECTED_RESOURCE_METADATA_PATH, PROTECTED_RESOURCE_METADATA_PATH,
    ProtectedResourceMetadata,
};
pub use openapi::{ApiDoc, DOCS_PATH, OPENAPI_PATH, openapi_document, openapi_document_with_modes};
pub use rate_limit::{RATE_LIMIT_LIMIT_HEADER, RATE_LIMIT_REMAINING_HEADER};
pub use servers::{DEFAULT_HISTORY_LIMIT, DEFAULT_LOG_LINES, MAX_HISTORY_LIMIT, MAX_LOG_LINES};
pub use state::{ApiState, HttpSettings};
pub use telemetry::{
    BUILD_INFO, HTTP_REQUEST_DURATION_SECONDS, HTTP_REQUESTS_TOTAL, MCP_SERVERS, RequestMetrics,
    RequestMetricsMiddleware, UNMATCHED_ROUTE, UPTIME_SECONDS, install_metrics_recorder,
    run_metrics_upkeep,
};
pub use ws::{
    EVENTS_WS_PATH, EventStreams, FleetEvent, KeepAlive, MAX_CLIENT_FRAME_BYTES,
    MAX_CLIENT_MESSAGE_BURST, MAX_CLIENT_MESSAGES_PER_SECOND,
};

/// Builds resources that share the API's request handling: the state, the body limit, the
/// envelope for bad paths and queries, and a 405 envelope (with `Allow`) for other methods.
struct Mounter {
    state: web::Data<ApiState>,
    openapi: web::Data<openapi::OpenApiJson>,
    max_body_bytes: usize,
}

impl Mounter {
    fn resource(&self, resource: Resource, allow: &'static str) -> Resource {
        resource
            .app_data(self.state.clone())
            .app_data(self.openapi.clone())
            .app_data(web::PayloadConfig::new(self.max_body_bytes))
            .app_data(web::QueryConfig::default().error_handler(|error, _| {
                ApiError::validation(format!("the query string is invalid: {error}")).into()
            }))
            .app_data(web::PathConfig::default().error_handler(|_, request| {
                ApiError::route_not_found(request.method().as_str(), request.path()).into()
            }))
            .default_service(web::to(move |request: HttpRequest| async move {
                ApiError::method_not_allowed(request.method().as_str(), request.path(), allow)
            }))
    }

    /// `/mcp`: the handler's three methods and `OPTIONS` when there is a handler, else a 404 for
    /// every method (without reading the body).
    fn mcp_resource(&self) -> Resource {
        let resource = self.resource(web::resource(MCP_PATH), MCP_ALLOWED_METHODS);
        if self.state.mcp_handler().is_none() {
            return resource.default_service(web::to(mcp_endpoint::endpoint_not_enabled));
        }
        resource
            .route(web::get().to(mcp_endpoint::open_stream))
            .route(web::post().to(mcp_endpoint::send_message))
            .route(web::delete().to(mcp_endpoint::end_session))
            .route(
                web::route()
                    .method(Method::OPTIONS)
                    .to(mcp_endpoint::options),
            )
    }
}

/// Mounts every route of the API on `cfg`, and sets the envelope 404 as the application's
/// default service (an embedder that wants its own calls `App::default_service` afterwards).
///
/// The routes come bare: no `Host`, `Origin` or content-type check, no authentication, no
/// rate limit. [`service`] mounts them with all of those; use this only behind equivalent
/// middleware of one's own.
///
/// Routes are mounted as plain resources, not in an `/api` scope, so an embedder can add its
/// own routes under `/api/` next to these. Wrap the whole `App` with [`RequestMetrics`] to count
/// requests; [`app`] does. Never wrap it with `Compress`: `/mcp` streams server-sent events,
/// which a compressor would hold back.
pub fn configure(cfg: &mut web::ServiceConfig, state: ApiState) {
    let mounter = Mounter {
        openapi: web::Data::new(openapi::OpenApiJson::new(
            &state.gateway().info().version,
            definition::definition_rules(state.gateway())
                .launch_modes
                .iter()
                .map(|mode| mode.name().to_owned())
                .collect(),
            std::sync::Arc::clone(state.openapi_document()),
        )),
        max_body_bytes: state.settings().max_body_bytes,
        state: web::Data::new(state),
    };
    // `/mcp` first: the router and the request metrics' route label try resources in this
    // order, and the data plane's requests should not pay for matching every `/api` pattern.
    cfg.service(mounter.mcp_resource())
        .service(
            mounter
                .resource(web::resource("/mcp/v/{name}"), MCP_ALLOWED_METHODS)
                .route(web::get().to(mcp_endpoint::curated_open_stream))
                .route(web::post().to(mcp_endpoint::curated_send_message))
                .route(web::delete().to(mcp_endpoint::curated_end_session))
                .route(
                    web::route()
                        .method(Method::OPTIONS)
                        .to(mcp_endpoint::options),
                ),
        )
        .service(
            mounter
                .resource(
                    web::resource(["/api/mcp_servers", "/api/mcp_servers/"]),
                    "GET, POST",
                )
                .route(web::get().to(servers::list_servers))
                .route(web::post().to(servers::create_server)),
        )
        .service(
            mounter
                .resource(web::resource("/api/mcp_servers/{id}"), "GET, PUT, DELETE")
                .route(web::get().to(servers::get_server))
                .route(web::put().to(servers::update_server))
                .route(web::delete().to(servers::delete_server)),
        )
        .service(
            mounter
                .resource(web::resource("/api/mcp_servers/{id}/start"), "POST")
                .route(web::post().to(servers::start_server)),
        )
        .service(
            mounter
                .resource(web::resource("/api/mcp_servers/{id}/stop"), "POST")
                .route(web::post().to(servers::stop_server)),
        )
        .service(
            mounter
                .resource(web::resource("/api/mcp_servers/{id}/tools"), "GET")
                .route(web::get().to(servers::server_tools)),
        )
        .service(
            mounter
                .resource(web::resource("/api/mcp_servers/{id}/tools/history"), "GET")
                .route(web::get().to(servers::tool_history)),
        )
        .service(
            mounter
                .resource(web::resource("/api/mcp_servers/{id}/health"), "GET")
                .route(web::get().to(servers::server_health)),
        )
        .service(
            mounter
                .resource(web::resource("/api/mcp_servers/{id}/logs"), "GET")
                .route(web::get().to(servers::server_logs)),
        )
        .service(
            mounter
                .resource(web::resource(["/api/groups", "/api/groups/"]), "GET, POST")
                .route(web::get().to(groups::list_groups))
                .route(web::post().to(groups::create_group)),
        )
        .service(
            mounter
                .resource(web::resource("/api/groups/{id}"), "GET, PUT, DELETE")
                .route(web::get().to(groups::get_group))
                .route(web::put().to(groups::update_group))
                .route(web::delete().to(groups::delete_group)),
        )
        .service(
            mounter
                .resource(web::resource("/api/groups/{id}/rebalance"), "POST")
                .route(web::post().to(groups::rebalance_group)),
        )
        .service(
            mounter
                .resource(
                    web::resource(["/api/groups/{id}/members", "/api/groups/{id}/members/"]),
                    "POST",
                )
                .route(web::post().to(groups::add_member)),
        )
        .service(
            mounter
                .resource(
                    web::resource("/api/groups/{id}/members/{member_id}"),
                    "DELETE",
                )
                .route(web::delete().to(groups::remove_member)),
        )
        .service(
            mounter
                .resource(web::resource("/api/system"), "GET")
                .route(web::get().to(system::system_info)),
        )
        .service(
            mounter
                .resource(web::resource("/api/system/replicas"), "GET")
                .route(web::get().to(system::replicas)),
        )
        .service(
            mounter
                .resource(web::resource(EVENTS_WS_PATH), "GET")
                .route(web::get().to(ws::events_socket)),
        )
        .service(
            mounter
                .resource(web::resource(OPENAPI_PATH), "GET")
                .route(web::get().to(openapi::openapi_json)),
        )
        .service(
            mounter
                .resource(web::resource([DOCS_PATH, "/docs/"]), "GET")
                .route(web::get().to(openapi::docs_page)),
        )
        .service(
            mounter
                .resource(web::resource("/docs/{tail:.+}"), "GET")
                .route(web::get().to(openapi::docs_asset)),
        )
        .service(
            mounter
                .resource(web::resource("/health/live"), "GET")
                .route(web::get().to(probes::live)),
        )
        .service(
            mounter
                .resource(web::resource("/health/startup"), "GET")
                .route(web::get().to(probes::startup)),
        )
        .service(
            mounter
                .resource(web::resource("/health/ready"), "GET")
                .route(web::get().to(probes::ready)),
        )
        .service(
            mounter
                .resource(web::resource("/metrics"), "GET")
                .route(web::get().to(telemetry::metrics_text)),
        )
        .service(
            mounter
                .resource(
                    web::resource(oauth::MCP_PROTECTED_RESOURCE_METADATA_PATH),
                    "GET",
                )
                .route(web::get().to(oauth::protected_resource_metadata)),
        )
        .service(
            mounter
                .resource(
                    web::resource(oauth::PROTECTED_RESOURCE_METADATA_PATH),
                    "GET",
                )
                .route(web::get().to(oauth::protected_resource_metadata_root)),
        )
        .configure(|cfg| auth_api::mount(cfg, &mounter))
        .configure(|cfg| discovery::mount(cfg, &mounter))
        .configure(|cfg| endpoints_api::mount(cfg, &mounter))
        .configure(|cfg| config_api::mount(cfg, &mounter))
        .configure(|cfg| tool_pins::mount(cfg, &mounter))
        .configure(|cfg| console::mount(cfg, &mounter.state))
        .default_service(web::to(route_not_found));
}

/// Wraps `$target` (an `App` or a `Scope`) in the gateway's middleware, innermost first: rate
/// limits inside authentication, the Origin and content-type checks outside authentication
/// (nothing a foreign page sends reaches a handler or costs a credential check), CORS outside
/// those (so that a 401, 403 or 415 carries CORS headers too and preflights need no
/// credentials), the Host check outside CORS (a preflight under a foreign name is refused too),
/// the request limits outside everything (header size, body timeout, WebSocket frame size: see
/// [`HttpSettings`]), and request metrics around all of it.
macro_rules! wrap_in_guards {
    ($target:expr) => {
        $target
            // Inside authentication: the REST bucket is the authenticated caller's.
            .wrap(actix_web::middleware::from_fn(rate_limit::limit_rate))
            .wrap(actix_web::middleware::from_fn(authn::authenticate))
            .wrap(actix_web::middleware::from_fn(guard::check_request))
            .wrap(actix_web::middleware::from_fn(cors::cors))
            .wrap(actix_web::middleware::from_fn(guard::check_host))
            // Outside everything: nothing reads a header or a body before the limits.
            .wrap(actix_web::middleware::from_fn(limits::limit_request))
            .wrap(RequestMetrics)
            // Outermost: the request's span covers all of its handling.
            .wrap(actix_web::middleware::from_fn(trace_spans::trace_request))
    };
}

/// The whole application: every route, the envelope 404, and the gateway's middleware (see
/// [`service`] for what it checks). Which hosts and origins pass is set on the state
/// ([`ApiState::with_allowed_hosts`], [`ApiState::with_cors`], [`ApiState::with_mcp_origins`]).
pub fn app(
    state: ApiState,
) -> App<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    wrap_in_guards!(
        App::new()
            // The authentication middleware reads the state before routing.
            .app_data(web::Data::new(state.clone()))
            .configure(|cfg| configure(cfg, state))
    )
}

/// The whole gateway as one service to mount in an actix-web application of one's own, next
/// to its own routes: every route of [`app`], with the same checks in front of them (the
/// `Host` names the gateway, a foreign `Origin` changes nothing, `/api/` bodies are JSON,
/// authentication and permissions, rate limits, request limits, request metrics).
///
/// The service answers every path the application's earlier services did not (unknown ones
/// with the envelope 404), so register the application's own routes first. The checks apply
/// to the gateway's routes only; the application's own routes are its business.
pub fn service(state: ApiState) -> impl actix_web::dev::HttpServiceFactory {
    let provided = ProvideState::new(web::Data::new(state.clone()));
    wrap_in_guards!(web::scope("").configure(|cfg| configure(cfg, state))).wrap(provided)
}

/// Makes the state visible to the middleware of [`service`], which reads it before the scope's
/// own data is attached.
struct ProvideState(std::rc::Rc<actix_web::dev::Extensions>);

impl ProvideState {
    fn new(state: web::Data<ApiState>) -> Self {
        let mut container = actix_web::dev::Extensions::new();
        container.insert(state);
        Self(std::rc::Rc::new(container))
    }
}

impl<S, B> actix_web::dev::Transform<S, ServiceRequest> for ProvideState
where
    S: actix_web::dev::Service<
            ServiceRequest,
            Response = ServiceResponse<B>,
            Error = actix_web::Error,
        >,
{
    type Response = ServiceResponse<B>;
    type Error = actix_web::Error;
    type Transform = ProvideStateService<S>;
    type InitError = ();
    type Future = std::future::Ready<Result<Self::Transform, ()>>;

    fn new_transform(&self, service: S) -> Self::Future {
        std::future::ready(Ok(ProvideStateService {
            service,
            container: std::rc::Rc::clone(&self.0),
        }))
    }
}

struct ProvideStateService<S> {
    service: S,
    container: std::rc::Rc<actix_web::dev::Extensions>,
}

impl<S, B> actix_web::dev::Service<ServiceRequest> for ProvideStateService<S>
where
    S: actix_web::dev::Service<
            ServiceRequest,
            Response = ServiceResponse<B>,
            Error = actix_web::Error,
        >,
{
    type Response = ServiceResponse<B>;
    type Error = actix_web::Error;
    type Future = S::Future;

    actix_web::dev::forward_ready!(service);

    fn call(&self, mut request: ServiceRequest) -> Self::Future {
        request.add_data_container(std::rc::Rc::clone(&self.container));
        self.service.call(request)
    }
}

/// The bundled HTTP server on `listener`. It does not handle signals: the host stops it with
/// `server.handle().stop(true)`, which drains requests in flight for up to
/// `settings.shutdown_timeout_s`.
pub fn build_server(
    state: ApiState,
    listener: std::net::TcpListener,
    settings: &HttpSettings,
) -> std::io::Result<actix_web::dev::Server> {
    let server = HttpServer::new(move || app(state.clone()))
        .workers(settings.workers.max(1))
        // Without it, chunked and streamed answers wait for Nagle's delay on keep-alive
        // connections.
        .tcp_nodelay(true)
        // A client that closes its side has left: the answer it was waiting for (an MCP event
        // stream above all) is dropped at once, rather than at the next write that fails. HTTP
        // clients do not half-close to mark the end of a request; hyper refuses it by default too.
        .h1_allow_half_closed(false)
        .disable_signals()
        .shutdown_timeout(settings.shutdown_timeout_s)
        .client_request_timeout(settings.client_request_timeout)
        .keep_alive(settings.keep_alive)
        .listen(listener)?
        .run();
    Ok(server)
}
