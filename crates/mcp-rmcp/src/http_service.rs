//! The gateway's MCP endpoint over Streamable HTTP, as a plain function of `http` types.
//!
//! [`streamable_http_handler`] wraps rmcp's `StreamableHttpService` around
//! [`GatewayMcpServer`], so that an HTTP adapter (actix-web, say) can mount it at `/mcp` with
//! nothing but `http`, `http-body` and `bytes`: it never sees rmcp. Both protocol eras are
//! served on the one path: `initialize`-era clients (2025-06-18, 2025-11-25) get sessions
//! (`Mcp-Session-Id`, a GET stream, DELETE), 2026-07-28 clients are served statelessly.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use mcpgw_core::McpFrontend;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::direct::{DirectCalls, HostPolicy};
use crate::server::{GatewayMcpServer, McpServerSettings};

/// The body of every answer: a complete body for JSON answers and errors, an unending stream of
/// Server-Sent Events for SSE answers. It never fails.
pub type McpHttpBody = BoxBody<Bytes, Infallible>;

/// Answers one HTTP request to the MCP endpoint. The request body is passed whole; the answer's
/// body may stream for as long as the client stays connected.
pub type McpHttpHandler = Arc<
    dyn Fn(http::Request<Bytes>) -> BoxFuture<'static, http::Response<McpHttpBody>> + Send + Sync,
>;

/// Host names always accepted in the `Host` header, with any port: the endpoint is reachable
/// from this machine whatever else is configured.
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// How the Streamable HTTP endpoint behaves.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct McpHttpSettings {
    /// `Host` header values accepted besides [`LOOPBACK_HOSTS`]: the names clients use to reach
    /// the gateway (`gateway.example.com` matches any port, `gateway.example.com:8443` only that
    /// port). Default none. Checking the host is what stops DNS-rebinding attacks from a
    /// browser; the entry `*` turns the check off (only behind a proxy that checks `Host`).
    pub public_hosts: Vec<String>,
    /// Browser origins allowed besides the same origin: `https://app.example.com` (default port
    /// of the scheme), `https://app.example.com:8443`, `http://localhost:*` (any port), `null`,
    /// or `*` (any origin). Default none. Requests without an `Origin` (command-line clients,
    /// SDKs) and same-origin requests (the `Origin` names the `Host` the request was sent to)
    /// are always accepted; any other `Origin` is answered 403.
    pub allowed_origins: Vec<String>,
    /// How often an idle SSE stream carries a keep-alive comment, so that proxies do not cut
    /// it. Default 15 s; `None` sends none.
    pub sse_keep_alive: Option<Duration>,
    /// Whether `initialize`-era clients get sessions (`Mcp-Session-Id`, GET stream, DELETE).
    /// Default true; without it they are served statelessly and get no server-initiated
    /// notifications. 2026-07-28 clients are stateless either way.
    pub legacy_sessions: bool,
    /// A session that sees no request for this long is closed; its client must `initialize`
    /// again (it gets 404 for the old session id). Default 30 min (rmcp's own default, 5 min,
    /// drops desktop clients left idle for a coffee). `None` keeps sessions until DELETE or
    /// shutdown.
    pub session_idle_timeout: Option<Duration>,
    /// Largest accepted request body; larger ones are answered 413. Default 4 MiB. The HTTP
    /// adapter must accept at least this much before calling the handler.
    pub max_request_body_bytes: usize,
    /// Whether stateless requests whose answer is ready before anything else was sent are
    /// answered `application/json` instead of an SSE stream. Default true (cheaper, and proxies
    /// handle it better); a call that reports progress still streams.
    pub json_responses: bool,
    /// Cancelling this token ends every session and open stream: for graceful shutdown, since
    /// GET streams otherwise stay open for as long as clients keep them.
    pub shutdown: CancellationToken,
    /// What the MCP server itself does (page sizes).
    pub server: McpServerSettings,
}

impl Default for McpHttpSettings {
    fn default() -> Self {
        Self {
            public_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            sse_keep_alive: Some(Duration::from_secs(15)),
            legacy_sessions: true,
            session_idle_timeout: Some(Duration::from_secs(30 * 60)),
            max_request_body_bytes: 4 * 1024 * 1024,
            json_responses: true,
            shutdown: CancellationToken::new(),
            server: McpServerSettings::default(),
        }
    }
}

impl McpHttpSettings {
    #[must_use]
    pub fn with_public_hosts(mut self, hosts: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.public_hosts = hosts.into_iter().map(Into::into).collect();
        self
    }

    #[must_use]
    pub fn with_allowed_origins(
        mut self,
        origins: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.allowed_origins = origins.into_iter().map(Into::into).collect();
        self
    }

    #[must_use]
    pub fn with_sse_keep_alive(mut self, interval: Option<Duration>) -> Self {
        self.sse_keep_alive = interval;
        self
    }

    #[must_use]
    pub fn with_legacy_sessions(mut self, enabled: bool) -> Self {
        self.legacy_sessions = enabled;
        self
    }

    #[must_use]
    pub fn with_session_idle_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.session_idle_timeout = timeout;
        self
    }

    #[must_use]
    pub fn with_max_request_body_bytes(mut self, bytes: usize) -> Self {
        self.max_request_body_bytes = bytes;
        self
    }

    #[must_use]
    pub fn with_json_responses(mut self, enabled: bool) -> Self {
        self.json_responses = enabled;
        self
    }

    #[must_use]
    pub fn with_shutdown(mut self, shutdown: CancellationToken) -> Self {
        self.shutdown = shutdown;
        self
    }

    #[must_use]
    pub fn with_server(mut self, server: McpServerSettings) -> Self {
        self.server = server;
        self
    }

    /// The `Host` values accepted: the loopback names, the public hosts, or `*` for any.
    fn accepted_hosts(&self) -> Vec<String> {
        if self.public_hosts.iter().any(|host| host.trim() == "*") {
            return vec!["*".to_owned()];
        }
        LOOPBACK_HOSTS
            .iter()
            .map(|host| (*host).to_owned())
            .chain(self.public_hosts.iter().cloned())
            .collect()
    }

    fn rmcp_config(&self) -> StreamableHttpServerConfig {
        let config = StreamableHttpServerConfig::default()
            .with_sse_keep_alive(self.sse_keep_alive)
            .with_legacy_session_mode(self.legacy_sessions)
            .with_json_response(self.json_responses)
            .with_max_request_body_bytes(self.max_request_body_bytes)
            .with_cancellation_token(self.shutdown.clone())
            // Origins are checked by `OriginPolicy`, which also knows the same origin.
            .disable_allowed_origins();
        let hosts = self.accepted_hosts();
        if hosts.iter().any(|host| host == "*") {
            config.disable_allowed_hosts()
        } else {
            // Never empty: rmcp reads an empty list as "any host".
            config.with_allowed_hosts(hosts)
        }
    }
}

/// Builds the handler for the MCP endpoint.
///
/// Call it inside a tokio runtime: rmcp spawns a task per session and per streaming request.
/// The caller's identity is read from a [`mcpgw_core::Caller`] in the request's extensions
/// (see [`crate::caller_from_extensions`]).
pub fn streamable_http_handler(
    frontend: Arc<dyn McpFrontend>,
    settings: McpHttpSettings,
) -> McpHttpHandler {
    let prototype = GatewayMcpServer::new(Arc::clone(&frontend), settings.server.clone());
    let mut sessions = LocalSessionManager::default();
    // Idle sessions are closed by `DirectCalls`, which sees every request of a session; rmcp
    // does not see the calls answered on the direct path.
    sessions.session_config.keep_alive = None;
    let sessions = Arc::new(sessions);
    let service = StreamableHttpService::new(
        move || Ok(prototype.for_new_connection()),
        Arc::clone(&sessions),
        settings.rmcp_config(),
    );
    let direct = DirectCalls::new(
        frontend,
        sessions,
        HostPolicy::new(settings.accepted_hosts().iter().map(String::as_str)),
        settings.shutdown.clone(),
        settings.session_idle_timeout,
        settings.max_request_body_bytes,
    );
    let origins = Arc::new(OriginPolicy::new(&settings.allowed_origins));
    Arc::new(move |request: http::Request<Bytes>| {
        let service = service.clone();
        let origins = Arc::clone(&origins);
        let direct = Arc::clone(&direct);
        Box::pin(async move {
            direct.ensure_idle_sweeper();
            if !origins.admits(request.headers()) {
                tracing::warn!(
                    origin = ?request.headers().get(http::header::ORIGIN),
                    "rejected an mcp request from a cross-site origin"
                );
                return forbidden(
                    "Forbidden: Origin header is not allowed; add the origin to the gateway's \
                     allowed origins",
                );
            }
            if let Some(response) = direct.try_answer(&request).await {
                return response;
            }
            let method = request.method().clone();
            let session = request
                .headers()
                .get("mcp-session-id")
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned);
            let response = service.handle(request.map(Full::new)).await;
            direct.after_forwarded(&method, session.as_deref(), &response);
            response
        })
    })
}

fn forbidden(message: &'static str) -> http::Response<McpHttpBody> {
    let mut response =
        http::Response::new(Full::new(Bytes::from_static(message.as_bytes())).boxed());
    *response.status_mut() = http::StatusCode::FORBIDDEN;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: Option<u16>,
}

impl Origin {
    /// `scheme://host[:port]`; a port of `*` parses as `None` with `any_port`.
    fn parse(text: &str) -> Option<(Self, bool)> {
        let (text, any_port) = match text.strip_suffix(":*") {
            Some(rest) => (rest, true),
            None => (text, false),
        };
        let uri: http::Uri = text.parse().ok()?;
        let scheme = uri.scheme_str()?.to_ascii_lowercase();
        let host = normalize_host(uri.host()?);
        let port = uri.port_u16().or(default_port(&scheme));
        Some((Self { scheme, host, port }, any_port))
    }
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" | "ws" => Some(80),
        "https" | "wss" => Some(443),
        _ => None,
    }
}

pub(crate) fn normalize_host(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

/// Which browser origins may call the endpoint: no `Origin`, the same origin, or a listed one.
#[derive(Debug)]
struct OriginPolicy {
    any: bool,
    null: bool,
    listed: Vec<(Origin, bool)>,
}

impl OriginPolicy {
    fn new(allowed: &[String]) -> Self {
        let mut policy = Self {
            any: false,
            null: false,
            listed: Vec::new(),
        };
        for entry in allowed.iter().map(|entry| entry.trim()) {
            match entry {
                "*" => policy.any = true,
                "null" => policy.null = true,
                _ => match Origin::parse(entry) {
                    Some(origin) => policy.listed.push(origin),
                    None => tracing::warn!(
                        origin = entry,
                        "ignoring an allowed origin that is not scheme://host[:port]"
                    ),
                },
            }
        }
        policy
    }

    fn admits(&self, headers: &http::HeaderMap) -> bool {
        let Some(origin) = headers.get(http::header::ORIGIN) else {
            return true;
        };
        if self.any {
            return true;
        }
        let Ok(origin) = origin.to_str() else {
            return false;
        };
        let origin = origin.trim();
        if origin == "null" {
            return self.null;
        }
        let Some((origin, _)) = Origin::parse(origin) else {
            return false;
        };
        if is_same_origin(&origin, headers) {
            return true;
        }
        self.listed.iter().any(|(allowed, any_port)| {
            allowed.scheme == origin.scheme
                && allowed.host == origin.host
                && (*any_port || allowed.port == origin.port)
        })
    }
}

/// The page that sent the request was served by the host the request went to. The `Host`
/// header itself is checked against the allowed hosts by rmcp, which is what makes trusting it
/// here safe against DNS rebinding.
fn is_same_origin(origin: &Origin, headers: &http::HeaderMap) -> bool {
    let Some(host) = headers
        .get(http::header::HOST)
        .and_then(|host| host.to_str().ok())
        .and_then(|host| host.parse::<http::uri::Authority>().ok())
    else {
        return false;
    };
    normalize_host(host.host()) == origin.host
        && host.port_u16().or(default_port(&origin.scheme)) == origin.port
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(host: &str, origin: Option<&str>) -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::HOST, host.parse().unwrap());
        if let Some(origin) = origin {
            headers.insert(http::header::ORIGIN, origin.parse().unwrap());
        }
        headers
    }

    #[test]
    fn requests_without_an_origin_are_admitted() {
        assert!(OriginPolicy::new(&[]).admits(&headers("127.0.0.1:8000", None)));
    }

    #[test]
    fn the_same_origin_is_admitted_and_others_are_not() {
        let policy = OriginPolicy::new(&[]);
        assert!(policy.admits(&headers("localhost:8000", Some("http://localhost:8000"))));
        assert!(policy.admits(&headers("gw.example.com", Some("https://gw.example.com"))));
        assert!(!policy.admits(&headers("localhost:8000", Some("http://localhost:9000"))));
        assert!(!policy.admits(&headers("localhost:8000", Some("https://evil.example"))));
        assert!(!policy.admits(&headers("localhost:8000", Some("null"))));
    }

    #[test]
    fn listed_origins_match_scheme_host_and_port() {
        let policy = OriginPolicy::new(&[
            "https://app.example.com".to_owned(),
            "http://localhost:*".to_owned(),
            "null".to_owned(),
        ]);
        let host = "gw:8000";
        assert!(policy.admits(&headers(host, Some("https://app.example.com"))));
        assert!(policy.admits(&headers(host, Some("https://app.example.com:443"))));
        assert!(!policy.admits(&headers(host, Some("https://app.example.com:8443"))));
        assert!(!policy.admits(&headers(host, Some("http://app.example.com"))));
        assert!(policy.admits(&headers(host, Some("http://localhost:5173"))));
        assert!(policy.admits(&headers(host, Some("null"))));
    }

    #[test]
    fn a_star_admits_every_origin() {
        let policy = OriginPolicy::new(&["*".to_owned()]);
        assert!(policy.admits(&headers("gw", Some("https://anything.example"))));
    }

    #[test]
    fn loopback_hosts_are_always_allowed_and_star_disables_the_check() {
        let config = McpHttpSettings::default()
            .with_public_hosts(["gw.example.com"])
            .rmcp_config();
        assert_eq!(
            config.allowed_hosts,
            ["localhost", "127.0.0.1", "::1", "gw.example.com"]
        );
        let config = McpHttpSettings::default()
            .with_public_hosts(["*"])
            .rmcp_config();
        assert!(config.allowed_hosts.is_empty());
    }
}
