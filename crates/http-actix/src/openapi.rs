//! The OpenAPI document of every route, and the Swagger UI that shows it (served from assets
//! compiled into the binary, so it works offline).

use std::sync::{Arc, LazyLock, OnceLock};

use actix_web::{HttpRequest, HttpResponse, web};
use utoipa::OpenApi;
use utoipa_swagger_ui::Config;

use crate::error::{ApiError, ErrorEnvelope};
use crate::{
    auth_api, config_api, discovery, dto, endpoints_api, groups, mcp_endpoint, probes, servers,
    system, telemetry, ws,
};

pub const OPENAPI_PATH: &str = "/api/openapi.json";
pub const DOCS_PATH: &str = "/docs";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "mcpgw",
        description = "The REST API of the mcpgw MCP server gateway.\n\n\
            Every error answers the envelope `{\"error\", \"message\", \"status_code\"}` \
            (schema `ErrorEnvelope`), also when no route matches (404 `NotFoundError`), a route \
            is called with a method it does not accept (405 `MethodNotAllowedError`, with \
            `Allow`), or a body is larger than the limit (413 `PayloadTooLargeError`). Request \
            bodies under `/api/` must be sent with `Content-Type: application/json` (415 \
            `UnsupportedMediaTypeError` otherwise). Every route but the probes answers 421 \
            `MisdirectedRequestError` when the `Host` header does not name the gateway (a \
            loopback name, an address of a non-loopback listener, or a name in `allowed_hosts`), \
            and a request that changes anything, a WebSocket upgrade or a request to `/mcp` \
            answers 403 `ForbiddenOriginError` when its `Origin` is neither the gateway's own \
            nor one of `MCP_CORS_ORIGINS`; requests without an `Origin` are not affected. \
            Collections answer with and without a trailing slash. `/mcp` is the MCP Streamable \
            HTTP endpoint; what it answers beyond its own 404, 405 and 413 follows the MCP \
            specification.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    paths(
        servers::list_servers,
        servers::create_server,
        servers::get_server,
        servers::update_server,
        servers::delete_server,
        servers::start_server,
        servers::stop_server,
        servers::server_tools,
        servers::server_health,
        servers::server_logs,
        servers::tool_history,
        groups::list_groups,
        groups::create_group,
        groups::get_group,
        groups::update_group,
        groups::delete_group,
        groups::rebalance_group,
        groups::add_member,
        groups::remove_member,
        endpoints_api::list_endpoints,
        endpoints_api::create_endpoint,
        endpoints_api::get_endpoint,
        endpoints_api::update_endpoint,
        endpoints_api::delete_endpoint,
        auth_api::create_key,
        auth_api::list_keys,
        auth_api::revoke_key,
        auth_api::list_roles,
        auth_api::create_role,
        auth_api::list_all_roles,
        auth_api::assign_role,
        auth_api::revoke_role,
        auth_api::get_role,
        auth_api::update_role,
        auth_api::delete_role,
        auth_api::list_principals,
        auth_api::principal_roles,
        auth_api::list_permissions,
        auth_api::check_permission,
        auth_api::get_policy,
        auth_api::set_policy,
        auth_api::delete_policy,
        discovery::list_sources,
        discovery::create_source,
        discovery::update_source,
        discovery::delete_source,
        discovery::scan_source,
        discovery::enable_source,
        discovery::list_pending,
        discovery::list_quarantined,
        discovery::approve,
        discovery::reject,
        config_api::get_config,
        config_api::reload_config,
        config_api::export_config,
        config_api::backup_config,
        config_api::diff_config,
        crate::tool_pins::list_tool_pins,
        crate::tool_pins::get_tool_pins,
        crate::tool_pins::approve_tool_pins,
        crate::tool_pins::reject_tool_pins,
        crate::tool_pins::reset_tool_pins,
        ws::events_socket,
        system::system_info,
        system::replicas,
        mcp_endpoint::open_stream,
        mcp_endpoint::send_message,
        mcp_endpoint::end_session,
        mcp_endpoint::curated_open_stream,
        mcp_endpoint::curated_send_message,
        mcp_endpoint::curated_end_session,
        probes::live,
        probes::startup,
        probes::ready,
        telemetry::metrics_text,
        crate::oauth::protected_resource_metadata,
        crate::oauth::protected_resource_metadata_root,
        openapi_json,
        docs_page,
    ),
    components(schemas(
        ErrorEnvelope,
        dto::McpTool,
        dto::McpServerId,
        dto::DiscoverySourceId,
        dto::ApiKeyId,
        dto::RoleNameParam,
        dto::PolicyToolTarget,
        dto::PrincipalParam,
        crate::tool_pins::PinStatusFilter,
    )),
    tags(
        (name = "mcp_servers", description = "Managed MCP servers: definitions, lifecycle, tools, health and logs"),
        (name = "groups", description = "Load-balanced groups of MCP servers: strategy, members, rotation and state. Group ids and server ids share one namespace; a gateway composed without groups answers 404 on every group route"),
        (name = "endpoints", description = "Curated endpoints: named selections of tools from any servers and groups, each served at `/mcp/v/{name}` with its own access rules and optional per-tool names, titles, descriptions and annotations. Endpoints of the configuration file are read-only here. A gateway composed without curated endpoints answers 404 on every endpoint route"),
        (name = "auth", description = "Auth management: API keys, roles, role assignments, principals, permissions and tool access policies. A gateway composed without an auth service answers 404 on every auth route"),
        (name = "discovery", description = "Discovery sources (a container engine, a directory of definitions) and the MCP servers they found: pending approval, rejected, or quarantined with the reason. A gateway without a `discovery:` block answers 404 on every discovery route"),
        (name = "config", description = "The running configuration with secrets masked, reloading the configuration file without a restart (an invalid file changes nothing), exporting it as YAML, rotating backups next to the file, and the file's difference from what runs. A gateway composed without a configuration service answers 404 on every configuration route"),
        (name = "tool_pins", description = "The pin ledger: what each server's tools looked like when they were trusted (pinned on first use, or approved), what the server reports now with a diff, and the operators' approvals and rejections. With `tool_pinning: enforce`, a changed or new tool is neither listed nor callable until approved"),
        (name = "events", description = "The WebSocket stream of domain events, filtered by event type and server"),
        (name = "mcp", description = "The MCP Streamable HTTP endpoint: every tool of every server the caller may use, as `{server_id}__{tool}`"),
        (name = "probes", description = "Liveness, startup and readiness probes; no credentials, never rate limited"),
        (name = "observability", description = "Prometheus metrics"),
        (name = "system", description = "The running gateway: uptime, version, and a summary of its servers, tools and tool calls"),
        (name = "docs", description = "This document and its Swagger UI"),
    )
)]
pub struct ApiDoc;

/// The document, with the running gateway's version.
pub fn openapi_document(version: &str) -> utoipa::openapi::OpenApi {
    openapi_document_with_modes(version, &[])
}

/// The document of a gateway that registered `launch_modes` besides the built-in ones: the
/// server bodies take each of them, with its `settings`.
pub fn openapi_document_with_modes(
    version: &str,
    launch_modes: &[&str],
) -> utoipa::openapi::OpenApi {
    let mut document = ApiDoc::openapi();
    declare_launch_modes(&mut document, launch_modes);
    version.clone_into(&mut document.info.version);
    split_policy_scopes(&mut document);
    declare_security(&mut document);
    declare_rate_limits(&mut document);
    declare_auth_failures(&mut document);
    declare_request_limits(&mut document);
    declare_browser_checks(&mut document);
    document
}

/// Adds a variant per registered launch mode to the bodies that define a server.
fn declare_launch_modes(document: &mut utoipa::openapi::OpenApi, launch_modes: &[&str]) {
    use utoipa::openapi::{RefOr, Schema};
    let Some(components) = document.components.as_mut() else {
        return;
    };
    for (name, creating) in [
        ("CreateServerRequest", true),
        ("UpdateServerRequest", false),
    ] {
        if let Some(RefOr::T(Schema::AnyOf(any_of))) = components.schemas.get_mut(name) {
            for mode in launch_modes {
                any_of
                    .items
                    .push(RefOr::T(crate::dto::registered_mode_variant(
                        mode, creating,
                    )));
            }
        }
    }
}

/// The route of tool access policies, `{scope}/{target_id}`.
const POLICY_PATH: &str = "/api/auth/policies/{scope}/{target_id}";

/// The tool access policy route is one route, but the targets it takes depend on the scope (a
/// server or group id, or `{id}__{tool}`), and a document cannot relate two path parameters: it
/// is documented as one path per scope, each taking exactly the targets of its scope.
fn split_policy_scopes(document: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::{Ref, RefOr};
    let Some(template) = document.paths.paths.remove(POLICY_PATH) else {
        return;
    };
    let id = "McpServerId";
    let tool = "PolicyToolTarget";
    for (scope, target, target_description) in [
        ("provider", id, "The mcp server's id"),
        (
            "mcp_server",
            id,
            "The mcp server's id (`mcp_server` is an alias of `provider`)",
        ),
        ("group", id, "The group's id"),
        ("tool", tool, "The tool: `{server_or_group_id}__{tool}`"),
    ] {
        let mut item = template.clone();
        for operation in [&mut item.get, &mut item.post, &mut item.delete]
            .into_iter()
            .flatten()
        {
            if let Some(operation_id) = &mut operation.operation_id {
                operation_id.push('_');
                operation_id.push_str(scope);
            }
            for parameter in operation.parameters.iter_mut().flatten() {
                if let RefOr::T(parameter) = parameter
                    && parameter.name == "target_id"
                {
                    parameter.schema = Some(RefOr::Ref(Ref::from_schema_name(target)));
                    parameter.description = Some(target_description.to_owned());
                }
            }
            if let Some(parameters) = &mut operation.parameters {
                parameters.retain(
                    |parameter| !matches!(parameter, RefOr::T(parameter) if parameter.name == "scope"),
                );
            }
        }
        document
            .paths
            .paths
            .insert(POLICY_PATH.replace("{scope}", scope), item);
    }
}

/// An answer in the error envelope.
fn envelope_response(description: &str) -> utoipa::openapi::ResponseBuilder {
    use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
    ResponseBuilder::new().description(description).content(
        "application/json",
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name("ErrorEnvelope")))
            .build(),
    )
}

/// What the authentication middleware (`authn.rs`) and the error mapping can answer on every
/// operation that takes credentials, whatever the route: a client generated from this document
/// must be ready for them. Answers a route documents itself (a 403 naming its permission, a 503
/// of its own) are kept.
fn declare_auth_failures(document: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::header::HeaderBuilder;
    use utoipa::openapi::{ObjectBuilder, Type};
    let unauthenticated = envelope_response(
        "Authentication is on and the request carries no valid credential (AuthenticationError: \
         `No valid credentials provided` or `Invalid API key`)",
    )
    .header(
        "WWW-Authenticate",
        HeaderBuilder::new()
            .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
            .description(Some(
                "An `ApiKey` challenge naming the key header, and `Bearer` when tokens are \
                 configured",
            ))
            .build(),
    )
    .build();
    let denied = envelope_response(
        "Authentication is on and the caller's roles do not grant the permission this route \
         maps to (AccessDeniedError)",
    )
    .build();
    let issuer_down = envelope_response(
        "Bearer tokens are configured and the identity provider cannot be reached to check one \
         (ServiceUnavailableError)",
    )
    .build();
    let locked_out = envelope_response(
        "Authentication is on and this client address is locked out after repeated refused \
         credentials; retry after `Retry-After` seconds (RateLimitExceeded)",
    )
    .header(
        "Retry-After",
        HeaderBuilder::new()
            .schema(Some(ObjectBuilder::new().schema_type(Type::Integer)))
            .description(Some("Seconds until the lock ends"))
            .build(),
    )
    .build();
    let internal = envelope_response(
        "An unexpected failure inside the gateway; the message is generic and the detail is only \
         in the gateway's log (InternalServerError)",
    )
    .build();
    for (path, item) in &mut document.paths.paths {
        // `/mcp`, the curated endpoints and this document need authentication only, no
        // permission (`docs/auth.md`); a curated endpoint documents its own 403.
        let needs_permission = !is_mcp_document_path(path) && path.as_str() != OPENAPI_PATH;
        for operation in [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ]
        .into_iter()
        .flatten()
        .filter(|operation| operation.security.is_some())
        {
            let responses = &mut operation.responses.responses;
            responses.insert("401".to_owned(), unauthenticated.clone().into());
            if needs_permission {
                responses
                    .entry("403".to_owned())
                    .or_insert_with(|| denied.clone().into());
            }
            // Under `/api/` the rate limit's 429 is already there and covers the lockout too.
            responses
                .entry("429".to_owned())
                .or_insert_with(|| locked_out.clone().into());
            responses
                .entry("500".to_owned())
                .or_insert_with(|| internal.clone().into());
            responses
                .entry("503".to_owned())
                .or_insert_with(|| issuer_down.clone().into());
        }
    }
}

/// What the request limits (`limits.rs`, and the body limits of the handlers) answer before a
/// route's own code runs, on every route: 431 for headers over the header limit on every
/// operation, and on every operation that takes a body, 408 for a body that does not arrive
/// within the body timeout and 413 for one over the body limit. A client generated from this
/// document must be ready for them; descriptions a route gives itself are kept.
fn declare_request_limits(document: &mut utoipa::openapi::OpenApi) {
    let slow_body = envelope_response(
        "The body did not arrive within the body timeout, counted from the end of the request's \
         head; the connection is closed after this answer (RequestTimeoutError)",
    )
    .build();
    let large_body = envelope_response(
        "The body is larger than the body limit of this route (PayloadTooLargeError)",
    )
    .build();
    let large_headers = envelope_response(
        "The request's header names and values together exceed the header limit \
         (RequestHeaderFieldsTooLargeError)",
    )
    .build();
    for operation in operations(document, |_| true) {
        let takes_body = operation.request_body.is_some();
        let responses = &mut operation.responses.responses;
        if takes_body {
            responses
                .entry("408".to_owned())
                .or_insert_with(|| slow_body.clone().into());
            responses
                .entry("413".to_owned())
                .or_insert_with(|| large_body.clone().into());
        }
        responses
            .entry("431".to_owned())
            .or_insert_with(|| large_headers.clone().into());
    }
}

/// What the checks against hostile web pages (`guard.rs`) answer before a route's own code runs:
/// 421 on every operation but the probes, 403 `ForbiddenOriginError` on the operations whose
/// `Origin` is checked (every method but `GET`, the event stream's upgrade and `/mcp`), and 415
/// on every `/api/` operation but `GET`. A 403 a route documents already (a permission) gets the
/// origin refusal added to its description.
fn declare_browser_checks(document: &mut utoipa::openapi::OpenApi) {
    let misdirected = envelope_response(
        "The Host header does not name the gateway: not a loopback name or address, not an \
         address of a non-loopback listener, not a name in `allowed_hosts` \
         (MisdirectedRequestError)",
    )
    .build();
    const FOREIGN_ORIGIN: &str = "the request carries an `Origin` that is neither the \
        gateway's own nor one of `MCP_CORS_ORIGINS` (ForbiddenOriginError)";
    let foreign_origin = envelope_response(&format!(
        "A web page on another site sent it: {FOREIGN_ORIGIN}"
    ))
    .build();
    let unsupported = envelope_response(
        "The request has a body that is not declared `Content-Type: application/json`, or \
         declares another type (UnsupportedMediaTypeError)",
    )
    .build();
    for (path, item) in &mut document.paths.paths {
        if path.starts_with("/health/") {
            continue;
        }
        let origin_checked_get =
            is_mcp_document_path(path) || path.as_str() == crate::EVENTS_WS_PATH;
        let under_api = path.starts_with("/api/");
        for (is_get, operation) in [
            (true, &mut item.get),
            (false, &mut item.put),
            (false, &mut item.post),
            (false, &mut item.delete),
            (false, &mut item.patch),
        ] {
            let Some(operation) = operation else { continue };
            let responses = &mut operation.responses.responses;
            responses
                .entry("421".to_owned())
                .or_insert_with(|| misdirected.clone().into());
            if !is_get || origin_checked_get {
                match responses.get_mut("403") {
                    Some(utoipa::openapi::RefOr::T(denied)) => {
                        denied.description = format!("{}; or {FOREIGN_ORIGIN}", denied.description);
                    }
                    Some(utoipa::openapi::RefOr::Ref(_)) => {}
                    None => {
                        responses.insert("403".to_owned(), foreign_origin.clone().into());
                    }
                }
            }
            if under_api && !is_get {
                responses
                    .entry("415".to_owned())
                    .or_insert_with(|| unsupported.clone().into());
            }
        }
    }
}

/// Every REST operation may answer 429 when its caller's bucket is empty (`docs/operations.md`),
/// with `Retry-After`; its answers carry `X-RateLimit-Limit` and `X-RateLimit-Remaining` while
/// rate limiting is on.
fn declare_rate_limits(document: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::header::HeaderBuilder;
    use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder, Type};
    let integer_header = |description: &str| {
        HeaderBuilder::new()
            .schema(Some(
                utoipa::openapi::ObjectBuilder::new().schema_type(Type::Integer),
            ))
            .description(Some(description))
            .build()
    };
    let limit = integer_header("The capacity of the caller's bucket (the burst)");
    let remaining = integer_header("Whole requests left in the caller's bucket; 0 on a 429");
    let too_many = ResponseBuilder::new()
        .description("The caller's rate limit is exceeded; retry after `Retry-After` seconds")
        .header(
            "Retry-After",
            integer_header("Seconds until a request will be let through"),
        )
        .header("X-RateLimit-Limit", limit.clone())
        .header("X-RateLimit-Remaining", remaining.clone())
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorEnvelope")))
                .build(),
        )
        .build();
    for operation in operations(document, |path| path.starts_with("/api/")) {
        for (status, response) in &mut operation.responses.responses {
            let success = status.starts_with('2') || status == "101";
            if let (true, utoipa::openapi::RefOr::T(response)) = (success, response) {
                response
                    .headers
                    .insert("X-RateLimit-Limit".to_owned(), limit.clone().into());
                response
                    .headers
                    .insert("X-RateLimit-Remaining".to_owned(), remaining.clone().into());
            }
        }
        operation
            .responses
            .responses
            .entry("429".to_owned())
            .or_insert_with(|| too_many.clone().into());
    }
}

/// The credentials of `/api/*` and `/mcp` when auth is enabled (`docs/auth.md`): an API key in
/// `X-API-Key` (the default header name) or a bearer JWT. Probes, metrics and the docs page
/// need none.
fn declare_security(document: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::security::{
        ApiKey, ApiKeyValue, Http, HttpAuthScheme, SecurityRequirement, SecurityScheme,
    };
    let components = document.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "api_key",
        SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("X-API-Key"))),
    );
    let mut bearer = Http::new(HttpAuthScheme::Bearer);
    bearer.bearer_format = Some("JWT".to_owned());
    components.add_security_scheme("bearer", SecurityScheme::Http(bearer));
    let requirements = vec![
        SecurityRequirement::new("api_key", Vec::<String>::new()),
        SecurityRequirement::new("bearer", Vec::<String>::new()),
    ];
    for operation in operations(document, |path| {
        path.starts_with("/api/") || is_mcp_document_path(path)
    }) {
        operation.security = Some(requirements.clone());
    }
}

/// How the document names the curated endpoints' path.
const CURATED_DOCUMENT_PATH: &str = "/mcp/v/{name}";

/// Whether a path of the document is an MCP endpoint: `/mcp` or the curated endpoints'.
fn is_mcp_document_path(path: &str) -> bool {
    path == crate::MCP_PATH || path == CURATED_DOCUMENT_PATH
}

/// Every operation of the paths that `include` accepts.
fn operations(
    document: &mut utoipa::openapi::OpenApi,
    include: impl Fn(&str) -> bool,
) -> impl Iterator<Item = &mut utoipa::openapi::path::Operation> {
    document
        .paths
        .paths
        .iter_mut()
        .filter(move |(path, _)| include(path))
        .flat_map(|(_, item)| {
            [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ]
        })
        .flatten()
}

/// The serialized document, made on the first request for it and shared by every worker
/// (through the [`crate::ApiState`] they are all cloned from).
///
/// Building it allocates about 12 MB for a moment (utoipa's objects, cloned per route). Built
/// when the routes are mounted, as it once was, every HTTP worker paid that at start-up, and the
/// allocator kept the freed memory in the worker's arena: about 8.5 MiB of resident memory per
/// worker for a document most gateways never serve.
#[derive(Debug, Clone)]
pub(crate) struct OpenApiJson {
    version: String,
    launch_modes: Vec<String>,
    made: Arc<OnceLock<web::Bytes>>,
}

impl OpenApiJson {
    pub(crate) fn new(
        version: &str,
        launch_modes: Vec<String>,
        made: Arc<OnceLock<web::Bytes>>,
    ) -> Self {
        Self {
            version: version.to_owned(),
            launch_modes,
            made,
        }
    }

    /// The serialized document, made now if no request asked for it yet.
    pub(crate) fn bytes(&self) -> web::Bytes {
        self.made
            .get_or_init(|| serialize(&self.version, &self.launch_modes))
            .clone()
    }
}

fn serialize(version: &str, launch_modes: &[String]) -> web::Bytes {
    let modes: Vec<&str> = launch_modes.iter().map(String::as_str).collect();
    let document = openapi_document_with_modes(version, &modes);
    // Serializing a document of plain maps and strings cannot fail; an empty object keeps the
    // route answering JSON if it ever did.
    let json = serde_json::to_vec(&document).unwrap_or_else(|error| {
        tracing::error!(%error, "the OpenAPI document could not be serialized");
        b"{}".to_vec()
    });
    web::Bytes::from(json)
}

/// This document.
#[utoipa::path(
    get,
    path = "/api/openapi.json",
    tag = "docs",
    operation_id = "openapi_document",
    responses((status = 200, description = "The OpenAPI 3.1 document", content_type = "application/json", body = Object))
)]
pub(crate) async fn openapi_json(document: web::Data<OpenApiJson>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(document.bytes())
}

static SWAGGER_CONFIG: LazyLock<Arc<Config<'static>>> =
    LazyLock::new(|| Arc::new(Config::new([OPENAPI_PATH])));

fn swagger_file(tail: &str, request: &HttpRequest) -> HttpResponse {
    match utoipa_swagger_ui::serve(tail, Arc::clone(&SWAGGER_CONFIG)) {
        Ok(Some(file)) => {
            let mut bytes = file.bytes.into_owned();
            if file.content_type.starts_with("text/html") {
                // The page's assets are relative (`./swagger-ui.css`); a base makes them resolve
                // under /docs/ also when the page is asked for as `/docs` without the slash.
                bytes = with_docs_base(&bytes);
            }
            let mut response = HttpResponse::Ok();
            if file.gzpipped {
                response.insert_header((
                    actix_web::http::header::CONTENT_ENCODING,
                    actix_web::http::header::ContentEncoding::Gzip,
                ));
            }
            response.content_type(file.content_type).body(bytes)
        }
        Ok(None) => actix_web::ResponseError::error_response(&ApiError::route_not_found(
            request.method().as_str(),
            request.path(),
        )),
        Err(error) => actix_web::ResponseError::error_response(&ApiError::internal(&error)),
    }
}

fn with_docs_base(html: &[u8]) -> Vec<u8> {
    let html = String::from_utf8_lossy(html);
    match html.find("<head>") {
        Some(position) => {
            let insert_at = position + "<head>".len();
            let mut page = String::with_capacity(html.len() + 32);
            page.push_str(&html[..insert_at]);
            page.push_str("<base href=\"/docs/\">");
            page.push_str(&html[insert_at..]);
            page.into_bytes()
        }
        None => html.into_owned().into_bytes(),
    }
}

/// The Swagger UI of this document.
#[utoipa::path(
    get,
    path = "/docs",
    tag = "docs",
    operation_id = "swagger_ui",
    responses((status = 200, description = "The Swagger UI page", content_type = "text/html", body = String))
)]
pub(crate) async fn docs_page(request: HttpRequest) -> HttpResponse {
    swagger_file("index.html", &request)
}

/// The Swagger UI's assets.
pub(crate) async fn docs_asset(request: HttpRequest, tail: web::Path<String>) -> HttpResponse {
    swagger_file(&tail, &request)
}

#[cfg(test)]
mod tests {
    #[test]
    fn registered_launch_modes_are_server_bodies_with_settings() {
        let document =
            serde_json::to_value(openapi_document_with_modes("test", &["in_process"])).unwrap();
        let plain = serde_json::to_value(openapi_document("test")).unwrap();
        for (name, creating) in [
            ("CreateServerRequest", true),
            ("UpdateServerRequest", false),
        ] {
            let variants = document["components"]["schemas"][name]["anyOf"]
                .as_array()
                .unwrap();
            let built_in = plain["components"]["schemas"][name]["anyOf"]
                .as_array()
                .unwrap();
            assert_eq!(variants.len(), built_in.len() + 1, "{name}");
            let registered = variants.last().unwrap();
            assert_eq!(registered["title"], "in_process");
            assert_eq!(
                registered["properties"]["mode"]["enum"],
                serde_json::json!(["in_process"])
            );
            assert!(
                registered["properties"]["settings"].is_object(),
                "{registered}"
            );
            assert_eq!(registered["additionalProperties"], false, "{registered}");
            let required = registered["required"].as_array().unwrap();
            assert_eq!(
                required.contains(&serde_json::json!("mcp_server_id")),
                creating,
                "{name}: {required:?}"
            );
        }
    }

    use super::*;

    #[test]
    fn the_mcp_endpoint_declares_every_status_it_answers() {
        let document = serde_json::to_value(openapi_document("test")).unwrap();
        let declared = |method: &str| -> Vec<String> {
            document["paths"]["/mcp"][method]["responses"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect()
        };
        // The MCP layer's own answers: a malformed message or header (400), an unknown session
        // (404), a missing `Accept` (406), a body that is not JSON (415), a stateless request
        // for a stream or a session (405).
        for (method, statuses) in [
            ("get", &["200", "400", "404", "405", "406"][..]),
            (
                "post",
                &["200", "202", "400", "404", "406", "413", "415"][..],
            ),
            ("delete", &["204", "400", "404", "405"][..]),
        ] {
            let declared = declared(method);
            for status in statuses {
                assert!(
                    declared.iter().any(|have| have == status),
                    "{method} /mcp does not declare {status}: {declared:?}"
                );
            }
        }
        // A session ends with 204, never 202 or 200.
        let ended = declared("delete");
        assert!(
            !ended
                .iter()
                .any(|status| status == "202" || status == "200")
        );
    }

    #[test]
    fn the_checks_against_web_pages_are_declared_where_they_answer() {
        let document = serde_json::to_value(openapi_document("test")).unwrap();
        let envelope = "#/components/schemas/ErrorEnvelope";
        let paths = document["paths"].as_object().unwrap();
        let mut checked = 0;
        for (path, item) in paths {
            for (method, operation) in item.as_object().unwrap() {
                let responses = &operation["responses"];
                let probe = path.starts_with("/health/");
                assert_eq!(
                    responses.get("421").is_none(),
                    probe,
                    "421 of {method} {path}"
                );
                let origin_checked =
                    method != "get" || is_mcp_document_path(path) || path == crate::EVENTS_WS_PATH;
                let forbidden = responses["403"]["description"].as_str().unwrap_or_default();
                assert_eq!(
                    forbidden.contains("ForbiddenOriginError"),
                    origin_checked && !probe,
                    "403 of {method} {path}: {forbidden}"
                );
                let typed = path.starts_with("/api/") && method != "get";
                // `/mcp` refuses a body that is not JSON itself, in the MCP layer's own words.
                let mcp_typed = path == crate::MCP_PATH && method == "post";
                assert_eq!(
                    responses.get("415").is_some(),
                    typed || mcp_typed,
                    "415 of {method} {path}"
                );
                for status in ["421", "415"] {
                    if mcp_typed && status == "415" {
                        continue;
                    }
                    if let Some(answer) = responses.get(status) {
                        assert_eq!(
                            answer["content"]["application/json"]["schema"]["$ref"], envelope,
                            "{status} of {method} {path}"
                        );
                    }
                }
                checked += 1;
            }
        }
        assert!(checked > 60, "only {checked} operations");
        // A route's own 403 keeps what it said and adds the origin refusal.
        let create_key =
            document["paths"]["/api/auth/keys"]["post"]["responses"]["403"]["description"]
                .as_str()
                .unwrap();
        assert!(
            create_key.contains("permission") || create_key.contains("admin"),
            "{create_key}"
        );
    }

    #[test]
    fn protected_operations_declare_the_api_key_and_bearer_credentials() {
        let document = serde_json::to_value(openapi_document("test")).unwrap();
        let schemes = &document["components"]["securitySchemes"];
        assert_eq!(schemes["api_key"]["type"], "apiKey");
        assert_eq!(schemes["api_key"]["in"], "header");
        assert_eq!(schemes["api_key"]["name"], "X-API-Key");
        assert_eq!(schemes["bearer"]["scheme"], "bearer");
        let listed = &document["paths"]["/api/mcp_servers"]["get"]["security"];
        assert_eq!(
            listed,
            &serde_json::json!([{"api_key": []}, {"bearer": []}])
        );
        assert!(document["paths"]["/mcp"]["post"]["security"].is_array());
        assert!(
            document["paths"]["/health/live"]["get"]
                .get("security")
                .is_none()
        );
    }

    #[test]
    fn every_operation_that_takes_credentials_documents_the_auth_failures() {
        let document = serde_json::to_value(openapi_document("test")).unwrap();
        let envelope = "#/components/schemas/ErrorEnvelope";
        let mut checked = 0;
        for (path, item) in document["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let responses = &operation["responses"];
                if operation.get("security").is_none() {
                    assert!(responses.get("401").is_none(), "{method} {path}");
                    continue;
                }
                checked += 1;
                let unauthenticated = &responses["401"];
                assert_eq!(
                    unauthenticated["content"]["application/json"]["schema"]["$ref"], envelope,
                    "{method} {path}"
                );
                assert!(
                    unauthenticated["headers"]["WWW-Authenticate"].is_object(),
                    "{method} {path}"
                );
                for status in ["429", "500", "503"] {
                    assert_eq!(
                        responses[status]["content"]["application/json"]["schema"]["$ref"],
                        envelope,
                        "{status} of {method} {path}"
                    );
                }
                // `/mcp` and this document need no permission: `/mcp` answers 403 only to a
                // foreign origin, and this document never.
                let needs_permission = !is_mcp_document_path(path) && path != OPENAPI_PATH;
                let forbidden = responses
                    .get("403")
                    .map(|answer| answer["description"].as_str().unwrap().to_owned());
                if needs_permission {
                    assert!(forbidden.is_some(), "{method} {path}");
                } else if path == CURATED_DOCUMENT_PATH {
                    assert!(
                        forbidden.is_some_and(|text| !text.contains("permission")
                            && text.contains("AccessDeniedError")
                            && text.contains("ForbiddenOriginError")),
                        "{method} {path}"
                    );
                } else if path == crate::MCP_PATH {
                    assert!(
                        forbidden.is_some_and(|text| !text.contains("permission")
                            && text.contains("ForbiddenOriginError")),
                        "{method} {path}"
                    );
                } else {
                    assert!(forbidden.is_none(), "{method} {path}");
                }
            }
        }
        assert!(checked > 50, "only {checked} operations take credentials");
        // A route's own description of a status is kept.
        assert!(
            document["paths"]["/api/config"]["get"]["responses"]["403"]["description"]
                .as_str()
                .unwrap()
                .contains("config:read")
        );
        // `/mcp` is outside the REST rate limit, but a locked-out address gets a 429 there too.
        assert!(
            document["paths"]["/mcp"]["post"]["responses"]["429"]["headers"]["Retry-After"]
                .is_object()
        );
    }
}
