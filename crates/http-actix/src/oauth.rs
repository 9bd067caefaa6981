//! The gateway as an OAuth 2.1 resource server for MCP clients that follow the MCP
//! authorization flow.
//!
//! Such a client calls `/mcp` without a token and gets 401 with a challenge that names the
//! gateway's protected resource metadata (RFC 9728): `WWW-Authenticate: Bearer
//! resource_metadata="…/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"`. The
//! metadata names the resource (the canonical URI of `/mcp`) and the authorization servers
//! whose tokens the gateway accepts; the client registers with one of them, runs the
//! authorization code flow with PKCE for that resource (RFC 8707) and comes back with a token
//! whose audience is the resource. A token whose scopes do not cover tool use gets 403 with
//! `error="insufficient_scope"`, which tells the client which scope to ask for.
//!
//! The resource is `auth.oauth.resource` when configured. Otherwise it is the URL the request
//! was addressed to: its `Host` header (which the Host check has already admitted, so a
//! DNS-rebinding page cannot choose it) and `/mcp`, over HTTPS when the listener has TLS, or
//! when a trusted proxy says so in `X-Forwarded-Proto`. `X-Forwarded-Host` is never believed:
//! it would let a caller choose the audience its token is checked against.
//!
//! The metadata document is public (it names nothing secret) and readable cross-origin
//! (`Access-Control-Allow-Origin: *`, without credentials), so that MCP clients running in a
//! browser can discover where to sign in; it changes nothing, so a foreign page gains nothing.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, ResponseError as _, web};
use mcpgw_gateway::AuthService;
use mcpgw_gateway::authz::TOOLS_SCOPE;
use serde::Serialize;

use crate::MCP_PATH;
use crate::error::{ApiError, names};
use crate::state::ApiState;

/// The well-known path of protected resource metadata (RFC 9728 §3).
pub const PROTECTED_RESOURCE_METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// The same, for the resource `/mcp` (the path-suffixed form, RFC 9728 §3.1).
pub const MCP_PROTECTED_RESOURCE_METADATA_PATH: &str = "/.well-known/oauth-protected-resource/mcp";

/// The protected resource metadata document (RFC 9728 §2).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ProtectedResourceMetadata {
    /// The canonical URI of the MCP endpoint: the audience tokens must name.
    pub resource: String,
    /// The issuers whose access tokens are accepted.
    pub authorization_servers: Vec<String>,
    /// The scopes the gateway reads (`mcp:tools:<id>` is a family, not listed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scopes_supported: Vec<String>,
    /// Tokens come in the `Authorization` header only.
    pub bearer_methods_supported: Vec<&'static str>,
    pub resource_name: &'static str,
}

/// Whether bearer tokens from authorization servers are accepted at all: auth is on and some
/// issuer is trusted.
fn oauth_of(state: &ApiState) -> Option<&AuthService> {
    state
        .auth()
        .map(AsRef::as_ref)
        .filter(|auth| auth.is_enabled() && auth.accepts_bearer_tokens())
}

/// The canonical URI of the MCP endpoint for this request: the configured one, else the URL the
/// request was addressed to.
pub(crate) fn resource_of(request: &HttpRequest, state: &ApiState, auth: &AuthService) -> String {
    if let Some(resource) = &auth.settings().resource {
        return resource.clone();
    }
    format!("{}{MCP_PATH}", origin_of(request, state))
}

/// The origin (`scheme://host[:port]`, the host lowercased) the request was addressed to: its
/// `Host`, and `https` when the listener serves TLS or a trusted proxy says so in
/// `X-Forwarded-Proto`.
pub(crate) fn origin_of(request: &HttpRequest, state: &ApiState) -> String {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(ToString::to_string))
        .unwrap_or_else(|| request.app_config().host().to_owned());
    let scheme = if is_https(request, state) {
        "https"
    } else {
        "http"
    };
    format!("{scheme}://{}", host.to_ascii_lowercase())
}

/// Whether the browser reached the gateway over TLS: the listener's own, or a trusted proxy's
/// (`X-Forwarded-Proto: https` from an address of `auth.trusted_proxies`).
pub(crate) fn is_https(request: &HttpRequest, state: &ApiState) -> bool {
    let forwarded_https = request.peer_addr().is_some_and(|peer| {
        state.trusted_proxies().contains(peer.ip())
            && request
                .headers()
                .get("x-forwarded-proto")
                .and_then(|value| value.to_str().ok())
                .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"))
    });
    request.app_config().secure() || forwarded_https
}

/// Where the metadata of `resource` lives: the well-known path between its authority and its
/// path (RFC 9728 §3.1).
pub(crate) fn metadata_url_of(resource: &str) -> String {
    let (scheme, rest) = resource.split_once("://").unwrap_or(("https", resource));
    let (authority, path) = match rest.find('/') {
        Some(slash) => rest.split_at(slash),
        None => (rest, ""),
    };
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let path = path.trim_end_matches('/');
    format!("{scheme}://{authority}{PROTECTED_RESOURCE_METADATA_PATH}{path}")
}

/// The Bearer challenge of a 401 when authorization servers are trusted: where the metadata
/// is, and the scope a client needs to use `/mcp`. `None` when no issuer is trusted.
pub(crate) fn bearer_challenge(request: &HttpRequest, state: &ApiState) -> Option<String> {
    let (auth, metadata_url) = metadata_of_request(request, state)?;
    let mut challenge = format!("Bearer realm=\"mcpgw\", resource_metadata=\"{metadata_url}\"");
    if !auth.scopes_supported().is_empty() {
        challenge.push_str(&format!(", scope=\"{TOOLS_SCOPE}\""));
    }
    Some(challenge)
}

/// The challenge of a 403 for a token whose scopes do not cover what was asked: the scope that
/// would (RFC 6750 §3.1).
pub(crate) fn insufficient_scope_challenge(
    request: &HttpRequest,
    state: &ApiState,
    needed: &str,
) -> Option<HeaderValue> {
    let (_, metadata_url) = metadata_of_request(request, state)?;
    HeaderValue::from_str(&format!(
        "Bearer realm=\"mcpgw\", error=\"insufficient_scope\", scope=\"{needed}\", \
         resource_metadata=\"{metadata_url}\""
    ))
    .ok()
}

/// The auth service and where the metadata of this request's resource lives, when bearer
/// tokens from authorization servers are accepted.
fn metadata_of_request<'a>(
    request: &HttpRequest,
    state: &'a ApiState,
) -> Option<(&'a AuthService, String)> {
    let auth = oauth_of(state)?;
    let resource = resource_of(request, state, auth);
    Some((auth, metadata_url_of(&resource)))
}

/// `GET /.well-known/oauth-protected-resource`: the same document as under the path-suffixed
/// address, for clients that look at the root.
#[utoipa::path(
    get,
    path = "/.well-known/oauth-protected-resource",
    tag = "auth",
    operation_id = "protected_resource_metadata_root",
    security(()),
    responses(
        (status = 200, description = "The protected resource metadata (RFC 9728)", body = ProtectedResourceMetadata),
        (status = 404, description = "No authorization server is trusted (`auth.oauth.issuers`, `auth.oidc`)", body = crate::error::ErrorEnvelope),
    )
)]
pub(crate) async fn protected_resource_metadata_root(
    request: HttpRequest,
    state: web::Data<ApiState>,
) -> HttpResponse {
    protected_resource_metadata(request, state).await
}

/// `GET /.well-known/oauth-protected-resource/mcp`: the protected resource metadata of the MCP
/// endpoint; 404 when no authorization server is trusted.
#[utoipa::path(
    get,
    path = "/.well-known/oauth-protected-resource/mcp",
    tag = "auth",
    operation_id = "protected_resource_metadata",
    security(()),
    responses(
        (status = 200, description = "The protected resource metadata (RFC 9728)", body = ProtectedResourceMetadata),
        (status = 404, description = "No authorization server is trusted (`auth.oauth.issuers`, `auth.oidc`)", body = crate::error::ErrorEnvelope),
    )
)]
pub(crate) async fn protected_resource_metadata(
    request: HttpRequest,
    state: web::Data<ApiState>,
) -> HttpResponse {
    let Some(auth) = oauth_of(&state) else {
        return ApiError::new(
            StatusCode::NOT_FOUND,
            names::NOT_FOUND,
            "this gateway trusts no authorization server, so it publishes no protected \
             resource metadata: list one under auth.oauth.issuers (with auth.enabled: true)",
        )
        .error_response();
    };
    let metadata = ProtectedResourceMetadata {
        resource: resource_of(&request, &state, auth),
        authorization_servers: auth.authorization_servers(),
        scopes_supported: auth.scopes_supported(),
        bearer_methods_supported: vec!["header"],
        resource_name: "mcpgw",
    };
    HttpResponse::Ok()
        .insert_header((header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .json(metadata)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_url_puts_the_well_known_path_between_authority_and_path() {
        assert_eq!(
            metadata_url_of("http://127.0.0.1:8000/mcp"),
            "http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_url_of("https://gw.example.com/tenant-a/mcp/"),
            "https://gw.example.com/.well-known/oauth-protected-resource/tenant-a/mcp"
        );
        assert_eq!(
            metadata_url_of("https://gw.example.com"),
            "https://gw.example.com/.well-known/oauth-protected-resource"
        );
        // A query is not part of the metadata's address.
        assert_eq!(
            metadata_url_of("https://gw.example.com/mcp?x=1"),
            "https://gw.example.com/.well-known/oauth-protected-resource/mcp"
        );
    }
}
