//! Authentication and authorization of every request under `/api/` and of `/mcp`.
//!
//! With an [`AuthService`] that is enabled, a request to a protected path must carry a
//! credential (the API-key header, `Authorization: Bearer`, or `?api_key=` on the event
//! WebSocket, which browsers cannot give headers; or, on the event WebSocket only, the web
//! console's session cookie), unless anonymous access is on. A REST
//! request then needs the permission its route maps to (`Permission::for_rest_route`). A request
//! that no permission maps never reaches a handler: an authenticated caller, whatever its
//! roles, gets 404 `NotFoundError` for a path no route serves and 405 `MethodNotAllowedError`
//! (with `Allow`) for a method the permissions do not map on a path they do (the API
//! description, which every authenticated caller may read, lists the routes anyway); a route
//! that is served but that no permission opens is denied, whoever asks. `/mcp` and every curated
//! endpoint `/mcp/v/{name}` need only authentication here: what an MCP client may list and call
//! is decided per tool by the front end (`AuthorizedFrontend`), which gets the caller through
//! the request's extensions (and, on a curated endpoint, whether the endpoint admits it).
//!
//! Probes, `/metrics`, the documentation page and CORS preflight requests (`OPTIONS`) are never
//! checked. Answers: 401 `AuthenticationError` with `WWW-Authenticate`, 403 `AccessDeniedError`,
//! 429 `RateLimitExceeded` with `Retry-After` while the client's address is locked out after
//! repeated failures, each with its fixed message in the API's error envelope.

use mcpgw_core::trace::{Span, SpanKind, keys};
use std::net::IpAddr;

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{HttpMessage as _, HttpResponse, ResponseError as _, web};
use mcpgw_gateway::authz::{AuthError, Decision, DenyReason, Identity, Permission};
use mcpgw_gateway::core::SubjectToken;
use mcpgw_gateway::{AuthService, AuthServiceError, Credentials, caller_of};

use crate::error::{ApiError, ErrorEnvelope, names};
use crate::oauth;
use crate::state::ApiState;
use crate::{EVENTS_WS_PATH, OPENAPI_PATH, is_mcp_path};

/// Network ranges whose `X-Forwarded-For` is believed when finding a client's address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<(IpAddr, u8)>);

impl TrustedProxies {
    /// Parses `10.0.0.0/8`, `192.168.1.7`, `::1`, `fd00::/8`; the error names the entry.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, String> {
        let mut ranges = Vec::new();
        for entry in entries {
            let entry = entry.as_ref().trim();
            let (address, bits) = match entry.split_once('/') {
                Some((address, bits)) => (address, Some(bits)),
                None => (entry, None),
            };
            let address: IpAddr = address.parse().map_err(|_| {
                format!("trusted proxy `{entry}` is not an IP address or a CIDR range")
            })?;
            let max = if address.is_ipv4() { 32 } else { 128 };
            let bits = match bits {
                None => max,
                Some(bits) => bits
                    .parse::<u8>()
                    .ok()
                    .filter(|bits| *bits <= max)
                    .ok_or_else(|| {
                        format!("trusted proxy `{entry}` has a prefix length outside 0..={max}")
                    })?,
            };
            ranges.push((address, bits));
        }
        Ok(Self(ranges))
    }

    pub fn contains(&self, address: IpAddr) -> bool {
        let address = canonical(address);
        self.0
            .iter()
            .any(|(network, bits)| match (canonical(*network), address) {
                (IpAddr::V4(network), IpAddr::V4(address)) => {
                    prefix_matches(&network.octets(), &address.octets(), *bits)
                }
                (IpAddr::V6(network), IpAddr::V6(address)) => {
                    prefix_matches(&network.octets(), &address.octets(), *bits)
                }
                _ => false,
            })
    }

    /// The client of a request from `peer`: the peer itself, unless it is a trusted proxy;
    /// then the nearest address in `X-Forwarded-For` (read from the right) that is not one.
    pub fn client_address(
        &self,
        peer: Option<IpAddr>,
        forwarded_for: Option<&str>,
    ) -> Option<IpAddr> {
        let peer = peer?;
        if !self.contains(peer) {
            return Some(peer);
        }
        let Some(forwarded_for) = forwarded_for else {
            return Some(peer);
        };
        let mut client = peer;
        for hop in forwarded_for.rsplit(',') {
            let Ok(address) = hop.trim().parse::<IpAddr>() else {
                // A hop that is not an address cannot be believed, nor anything left of it.
                break;
            };
            client = address;
            if !self.contains(address) {
                break;
            }
        }
        Some(client)
    }
}

fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

fn prefix_matches(network: &[u8], address: &[u8], bits: u8) -> bool {
    let full = usize::from(bits / 8);
    let rest = bits % 8;
    if network[..full] != address[..full] {
        return false;
    }
    if rest == 0 {
        return true;
    }
    let mask = 0xff_u8 << (8 - rest);
    (network[full] & mask) == (address[full] & mask)
}

/// What a protected path asks of an authenticated caller.
enum Requirement {
    /// A REST route's permission.
    Permission(Permission),
    /// Authentication alone: `/mcp` and `/mcp/v/{name}` (the front end decides per tool) and
    /// the API description.
    Authenticated,
    /// A method and path under `/api/` that no permission maps: never served.
    Unmapped,
}

fn requirement(method: &str, path: &str) -> Option<Requirement> {
    if method == "OPTIONS" {
        return None;
    }
    if is_mcp_path(path) || path == OPENAPI_PATH {
        return Some(Requirement::Authenticated);
    }
    if !path.starts_with("/api/") {
        return None;
    }
    Some(match Permission::for_rest_route(method, path) {
        Some(permission) => Requirement::Permission(permission),
        None => Requirement::Unmapped,
    })
}

/// The actix middleware (mount with `actix_web::middleware::from_fn`).
pub async fn authenticate(
    request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody + 'static>>, actix_web::Error> {
    let Some(state) = request.app_data::<web::Data<ApiState>>().cloned() else {
        return Ok(crate::guard::unmounted(request).map_into_right_body());
    };
    let Some(auth) = state.auth().filter(|auth| auth.is_enabled()).cloned() else {
        return next
            .call(request)
            .await
            .map(ServiceResponse::map_into_left_body);
    };
    let Some(needed) = requirement(request.method().as_str(), request.path()) else {
        return next
            .call(request)
            .await
            .map(ServiceResponse::map_into_left_body);
    };

    let credentials = credentials_of(&request, &auth, &state);
    // Kept only when it is what authenticated the request: remote servers configured for
    // token exchange get a token of their own for it (API keys win over tokens).
    let subject_token = auth
        .authenticating_token(&credentials)
        .map(SubjectToken::new);
    let client = state.client_address(request.request());
    // The console's pages open the event stream with their session cookie; the `Origin` check
    // in front has already refused every other site's page.
    let console_identity = if credentials.is_empty() && request.path() == EVENTS_WS_PATH {
        crate::console::session_identity(request.request(), &state).await
    } else {
        None
    };
    let identity = match console_identity {
        Some(identity) => identity,
        None => {
            let mut span = Span::start_in_scope("authenticate", SpanKind::Internal);
            match auth.authenticate(credentials, client).await {
                Ok(identity) => {
                    if span.is_recording() {
                        span.set_attribute(keys::PRINCIPAL, identity.principal.to_string());
                    }
                    identity
                }
                Err(error) => {
                    span.set_error("authentication_failed", &error.to_string());
                    let response = refusal(&auth, &error, request.request(), &state);
                    return Ok(request.into_response(response).map_into_right_body());
                }
            }
        }
    };
    match needed {
        Requirement::Authenticated => {
            // An access token held to scopes that cover no tool use cannot do anything at
            // `/mcp` (or a curated endpoint): the client is told which scope to ask for instead.
            if is_mcp_path(request.path())
                && identity
                    .scope_limit
                    .as_ref()
                    .is_some_and(|limit| !limit.covers_any_tool_use(auth.authorizer().roles()))
                && let Decision::Deny { reason } =
                    auth.authorize(&identity, Permission::ToolList, None).await
            {
                let response = denied_for(&reason, request.request(), &state);
                return Ok(request.into_response(response).map_into_right_body());
            }
        }
        Requirement::Unmapped => {
            let response = unmapped(&request);
            return Ok(request.into_response(response).map_into_right_body());
        }
        Requirement::Permission(permission) => {
            let mut span = Span::start_in_scope("authorize", SpanKind::Internal);
            let decision = auth.authorize(&identity, permission, None).await;
            if span.is_recording() {
                span.set_attribute(keys::AUTHZ_PERMISSION, permission.to_string());
                let allowed = matches!(decision, Decision::Allow { .. });
                span.set_attribute(keys::AUTHZ_DECISION, if allowed { "allow" } else { "deny" });
            }
            span.end();
            if let Decision::Deny { reason } = decision {
                let response = denied_for(&reason, request.request(), &state);
                return Ok(request.into_response(response).map_into_right_body());
            }
        }
    }
    let mut caller = caller_of(&identity);
    caller.address = client;
    caller.subject_token = subject_token;
    request.extensions_mut().insert(caller);
    request.extensions_mut().insert(identity);
    next.call(request)
        .await
        .map(ServiceResponse::map_into_left_body)
}

/// The methods a REST route may be called with, in the order `Allow` lists them.
const REST_METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/// What an authenticated caller gets for a method and path no permission maps, without the
/// request reaching a handler: 404 when no route serves the path, 405 with the methods the
/// permissions map there, and a denial for a route that is served but that no permission opens.
fn unmapped(request: &ServiceRequest) -> HttpResponse {
    let method = request.method().as_str();
    let path = request.path();
    if request.match_pattern().is_none() {
        return ApiError::route_not_found(method, path).error_response();
    }
    let allowed: Vec<&str> = REST_METHODS
        .into_iter()
        .filter(|candidate| Permission::for_rest_route(candidate, path).is_some())
        .collect();
    if !allowed.is_empty() {
        return ApiError::method_not_allowed(method, path, allowed.join(", ")).error_response();
    }
    tracing::info!(
        method,
        path,
        "denied a request to a route that no permission opens"
    );
    denied()
}

fn credentials_of(request: &ServiceRequest, auth: &AuthService, state: &ApiState) -> Credentials {
    let header_value = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let mut api_key = header_value(&auth.settings().api_key_header);
    if api_key.is_none() && request.path() == EVENTS_WS_PATH {
        api_key = web::Query::<std::collections::HashMap<String, String>>::from_query(
            request.query_string(),
        )
        .ok()
        .and_then(|query| query.get("api_key").cloned());
    }
    let bearer = header_value(header::AUTHORIZATION.as_str()).and_then(|value| {
        let (scheme, token) = value.split_once(' ')?;
        scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| token.trim().to_owned())
    });
    // The audience a token must name, worked out only when there is a token to check.
    let resource = bearer
        .as_ref()
        .map(|_| oauth::resource_of(request.request(), state, auth));
    Credentials {
        api_key,
        bearer,
        resource,
    }
}

fn respond(
    status: StatusCode,
    name: &str,
    message: String,
) -> (actix_web::HttpResponseBuilder, ErrorEnvelope) {
    let body = ErrorEnvelope {
        error: name.to_owned(),
        message,
        status_code: status.as_u16(),
    };
    (HttpResponse::build(status), body)
}

fn denied() -> HttpResponse {
    let (mut builder, body) = respond(
        StatusCode::FORBIDDEN,
        names::ACCESS_DENIED,
        "Access denied".to_owned(),
    );
    builder.json(body)
}

/// 403 for a denial; one for want of an access token's scope also says which scope would do
/// (`WWW-Authenticate: Bearer error="insufficient_scope"`), so a client can ask for it.
fn denied_for(
    reason: &DenyReason,
    request: &actix_web::HttpRequest,
    state: &ApiState,
) -> HttpResponse {
    let mut response = denied();
    if let DenyReason::OutsideTokenScope { needed, .. } = reason
        && let Some(challenge) = oauth::insufficient_scope_challenge(request, state, needed)
    {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, challenge);
    }
    response
}

fn refusal(
    auth: &AuthService,
    error: &AuthServiceError,
    request: &actix_web::HttpRequest,
    state: &ApiState,
) -> HttpResponse {
    if let AuthServiceError::LockedOut { retry_after_secs } = error {
        let (mut builder, body) = respond(
            StatusCode::TOO_MANY_REQUESTS,
            names::RATE_LIMIT_EXCEEDED,
            format!(
                "too many failed authentication attempts from this address; retry after \
                 {retry_after_secs} s"
            ),
        );
        builder.insert_header((header::RETRY_AFTER, retry_after_secs.to_string()));
        return builder.json(body);
    }
    let (status, name, message) = match error.as_auth_error() {
        Some(
            auth_error @ (AuthError::NoCredentials
            | AuthError::InvalidApiKey { .. }
            | AuthError::InvalidToken { .. }),
        ) => (
            StatusCode::UNAUTHORIZED,
            names::AUTHENTICATION,
            auth_error.to_string(),
        ),
        _ if error.kind() == mcpgw_gateway::core::ErrorKind::Unavailable => (
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailableError",
            "the identity provider cannot be reached to check the token; retry shortly".to_owned(),
        ),
        _ => {
            tracing::error!(%error, "authentication failed inside the gateway");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                names::INTERNAL,
                "internal error; see the gateway's log".to_owned(),
            )
        }
    };
    let (mut builder, body) = respond(status, name, message);
    if status == StatusCode::UNAUTHORIZED {
        let mut challenges = Vec::new();
        if auth.settings().api_key_enabled {
            challenges.push(format!(
                "ApiKey realm=\"mcpgw\", header=\"{}\"",
                auth.settings().api_key_header
            ));
        }
        if auth.accepts_bearer_tokens() {
            challenges.push(
                oauth::bearer_challenge(request, state)
                    .unwrap_or_else(|| "Bearer realm=\"mcpgw\"".to_owned()),
            );
        }
        if challenges.is_empty() {
            challenges.push("ApiKey realm=\"mcpgw\"".to_owned());
        }
        if let Ok(value) = HeaderValue::from_str(&challenges.join(", ")) {
            builder.insert_header((header::WWW_AUTHENTICATE, value));
        }
    }
    builder.json(body)
}

/// The identity a handler's request was authenticated as, when authentication is on.
pub fn identity_of(request: &actix_web::HttpRequest) -> Option<Identity> {
    request.extensions().get::<Identity>().cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(raw: &str) -> IpAddr {
        raw.parse().unwrap()
    }

    #[test]
    fn ranges_match_by_prefix_and_mapped_addresses_count_as_ipv4() {
        let trusted = TrustedProxies::parse(&["10.0.0.0/8", "192.168.1.7", "fd00::/8"]).unwrap();
        assert!(trusted.contains(ip("10.200.3.4")));
        assert!(!trusted.contains(ip("11.0.0.1")));
        assert!(trusted.contains(ip("192.168.1.7")));
        assert!(!trusted.contains(ip("192.168.1.8")));
        assert!(trusted.contains(ip("fd12::1")));
        assert!(trusted.contains(ip("::ffff:10.1.2.3")));
        assert!(!TrustedProxies::default().contains(ip("127.0.0.1")));
    }

    #[test]
    fn bad_entries_are_named() {
        // Bad input: not an address, a prefix longer than the address.
        let error = TrustedProxies::parse(&["10.0.0.0/33"]).unwrap_err();
        assert!(error.contains("10.0.0.0/33"), "{error}");
        let error = TrustedProxies::parse(&["proxy.local"]).unwrap_err();
        assert!(error.contains("proxy.local"), "{error}");
    }

    #[test]
    fn forwarded_addresses_are_believed_only_from_trusted_proxies() {
        let trusted = TrustedProxies::parse(&["10.0.0.0/8"]).unwrap();
        let header = Some("203.0.113.9, 10.0.0.2");
        // From a trusted proxy: the nearest untrusted hop.
        assert_eq!(
            trusted.client_address(Some(ip("10.0.0.1")), header),
            Some(ip("203.0.113.9"))
        );
        // From anyone else the header is ignored: it could be forged.
        assert_eq!(
            trusted.client_address(Some(ip("198.51.100.1")), header),
            Some(ip("198.51.100.1"))
        );
        // A forged entry left of the real client is not believed.
        assert_eq!(
            trusted.client_address(Some(ip("10.0.0.1")), Some("1.2.3.4, 203.0.113.9")),
            Some(ip("203.0.113.9"))
        );
        // Garbage stops the walk at the last address that parsed.
        assert_eq!(
            trusted.client_address(Some(ip("10.0.0.1")), Some("not-an-ip")),
            Some(ip("10.0.0.1"))
        );
    }

    #[test]
    fn protected_paths_and_their_requirements() {
        assert!(requirement("GET", "/health/ready").is_none());
        assert!(requirement("GET", "/metrics").is_none());
        assert!(requirement("GET", "/docs").is_none());
        assert!(requirement("OPTIONS", "/api/mcp_servers").is_none());
        assert!(matches!(
            requirement("POST", "/mcp"),
            Some(Requirement::Authenticated)
        ));
        // A curated endpoint needs what `/mcp` needs, whatever its name, on every MCP method.
        for method in ["GET", "POST", "DELETE"] {
            for path in ["/mcp/v/support", "/mcp/v/a-b_1"] {
                assert!(
                    matches!(requirement(method, path), Some(Requirement::Authenticated)),
                    "{method} {path}"
                );
            }
        }
        assert!(requirement("OPTIONS", "/mcp/v/support").is_none());
        // Not curated endpoints: no name, or more than one segment after `/mcp/v/`.
        for path in ["/mcp/v/", "/mcp/v", "/mcp/v/a/b"] {
            assert!(requirement("POST", path).is_none(), "{path}");
        }
        assert!(matches!(
            requirement("GET", "/api/mcp_servers"),
            Some(Requirement::Permission(Permission::McpServerList))
        ));
        assert!(matches!(
            requirement("GET", "/api/no_such_thing"),
            Some(Requirement::Unmapped)
        ));
    }
}
