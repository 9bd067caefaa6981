//! What every handler shares: the gateway facade, the metrics handle, the HTTP settings and the
//! MCP endpoint's handler.

use std::sync::Arc;
use std::time::Duration;

use mcpgw_gateway::authz::RateLimiter;
use mcpgw_gateway::{AuthService, Gateway};
use metrics_exporter_prometheus::PrometheusHandle;

use crate::authn::TrustedProxies;
use crate::cors::CorsSettings;
use crate::guard::{AllowedHosts, McpOrigins};
use crate::mcp_endpoint::McpHttpHandler;
use crate::ws::EventStreams;

/// Knobs of the HTTP server and of request handling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSettings {
    /// The largest request body the REST API accepts; a larger one answers 413.
    pub max_body_bytes: usize,
    /// The largest request body `/mcp` accepts (one JSON-RPC message or batch); a larger one
    /// answers 413.
    pub max_mcp_body_bytes: usize,
    /// How many actix worker threads serve requests.
    pub workers: usize,
    /// How long a graceful stop waits for requests in flight before dropping them.
    pub shutdown_timeout_s: u64,
    /// How long a client may take to send a request's head before the connection is dropped.
    pub client_request_timeout: Duration,
    /// How long a client may take to send a request's body, counted from the end of its head; a
    /// slower body answers 408 `RequestTimeoutError` and the connection is closed. WebSocket
    /// streams are not bodies and are not timed.
    pub client_body_timeout: Duration,
    /// The most bytes of header names and values a request may carry; more answers 431
    /// `RequestHeaderFieldsTooLargeError`. (Below the HTTP parser's own hard limits of 128 KiB
    /// per request head and 96 headers, past which it answers a bare 431 and closes.)
    pub max_header_bytes: usize,
    /// How long an idle keep-alive connection stays open.
    pub keep_alive: Duration,
}

impl HttpSettings {
    pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
    pub const DEFAULT_MAX_MCP_BODY_BYTES: usize = 4 * 1024 * 1024;
    pub const DEFAULT_WORKERS: usize = 2;
    pub const DEFAULT_SHUTDOWN_TIMEOUT_S: u64 = 30;
    pub const DEFAULT_CLIENT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
    pub const DEFAULT_CLIENT_BODY_TIMEOUT: Duration = Duration::from_secs(10);
    pub const DEFAULT_MAX_HEADER_BYTES: usize = 32 * 1024;
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            max_body_bytes: Self::DEFAULT_MAX_BODY_BYTES,
            max_mcp_body_bytes: Self::DEFAULT_MAX_MCP_BODY_BYTES,
            workers: Self::DEFAULT_WORKERS,
            shutdown_timeout_s: Self::DEFAULT_SHUTDOWN_TIMEOUT_S,
            client_request_timeout: Self::DEFAULT_CLIENT_REQUEST_TIMEOUT,
            client_body_timeout: Self::DEFAULT_CLIENT_BODY_TIMEOUT,
            max_header_bytes: Self::DEFAULT_MAX_HEADER_BYTES,
            keep_alive: Duration::from_secs(5),
        }
    }
}

/// The state handed to every handler. Cheap to clone.
#[derive(Clone)]
pub struct ApiState {
    gateway: Gateway,
    metrics: PrometheusHandle,
    settings: HttpSettings,
    mcp_handler: Option<McpHttpHandler>,
    endpoint_handlers: Option<crate::mcp_endpoint::EndpointHandlers>,
    event_streams: Option<EventStreams>,
    auth: Option<Arc<AuthService>>,
    trusted_proxies: TrustedProxies,
    cors: Option<CorsSettings>,
    allowed_hosts: AllowedHosts,
    mcp_origins: McpOrigins,
    console: Option<crate::console::Console>,
    rate_limiter: Option<Arc<dyn RateLimiter>>,
    /// The serialized OpenAPI document, once a request asked for it; one for all workers.
    openapi: Arc<std::sync::OnceLock<actix_web::web::Bytes>>,
}

impl std::fmt::Debug for ApiState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiState")
            .field("gateway", &self.gateway)
            .field("settings", &self.settings)
            .field("mcp_endpoint_enabled", &self.mcp_handler.is_some())
            .field("event_streams", &self.event_streams)
            .field("cors", &self.cors)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("mcp_origins", &self.mcp_origins)
            .finish_non_exhaustive()
    }
}

impl ApiState {
    /// `metrics` is the handle [`crate::install_metrics_recorder`] returned.
    pub fn new(gateway: Gateway, metrics: PrometheusHandle, settings: HttpSettings) -> Self {
        Self {
            gateway,
            metrics,
            settings,
            mcp_handler: None,
            endpoint_handlers: None,
            event_streams: None,
            auth: None,
            trusted_proxies: TrustedProxies::default(),
            cors: None,
            allowed_hosts: AllowedHosts::default(),
            mcp_origins: McpOrigins::default(),
            console: Some(crate::console::Console::with_default_sessions()),
            rate_limiter: None,
            openapi: Arc::default(),
        }
    }

    /// Serves the web console under `/ui/` with `console` (its sessions, and single sign-on when
    /// configured). A new state serves it with in-memory sessions of the default lifetimes.
    #[must_use]
    pub fn with_console(mut self, console: crate::console::Console) -> Self {
        self.console = Some(console);
        self
    }

    /// Turns the web console off: `/ui/` answers 404.
    #[must_use]
    pub fn without_console(mut self) -> Self {
        self.console = None;
        self
    }

    pub fn console(&self) -> Option<&crate::console::Console> {
        self.console.as_ref()
    }

    pub(crate) fn openapi_document(&self) -> &Arc<std::sync::OnceLock<actix_web::web::Bytes>> {
        &self.openapi
    }

    /// Serves `/mcp` with `handler` (the MCP protocol adapter's Streamable HTTP service). Without
    /// one, `/mcp` answers 404. Set it before the routes are mounted: [`crate::configure`] reads
    /// it once.
    #[must_use]
    pub fn with_mcp_handler(mut self, handler: McpHttpHandler) -> Self {
        self.mcp_handler = Some(handler);
        self
    }

    /// Serves each curated endpoint at `/mcp/v/{name}` with the handler `handlers` gives for its
    /// name (see [`crate::mcp_endpoint::EndpointHandlers`]). Without them, or without
    /// endpoints on the gateway, those paths answer 404.
    #[must_use]
    pub fn with_endpoint_handlers(
        mut self,
        handlers: crate::mcp_endpoint::EndpointHandlers,
    ) -> Self {
        self.endpoint_handlers = Some(handlers);
        self
    }

    pub fn endpoint_handlers(&self) -> Option<&crate::mcp_endpoint::EndpointHandlers> {
        self.endpoint_handlers.as_ref()
    }

    /// Serves the WebSocket stream of domain events at `/api/ws/events` from `streams`. Without
    /// them, that route answers 404. Keep a clone of `streams` to close them on shutdown
    /// ([`EventStreams::close_all`]).
    #[must_use]
    pub fn with_events(mut self, streams: EventStreams) -> Self {
        self.event_streams = Some(streams);
        self
    }

    /// Authenticates and authorizes requests with `auth`, and serves the auth management API
    /// from it. Without it, authentication is off and `/api/auth/*` answers 404.
    #[must_use]
    pub fn with_auth(mut self, auth: Arc<AuthService>) -> Self {
        self.auth = Some(auth);
        self
    }

    /// Believes `X-Forwarded-For` from these proxies when finding a client's address (for the
    /// lockout after failed authentication). Default: none.
    #[must_use]
    pub fn with_trusted_proxies(mut self, proxies: TrustedProxies) -> Self {
        self.trusted_proxies = proxies;
        self
    }

    /// Answers cross-origin requests as `cors` says (see [`CorsSettings`]), and admits requests
    /// from its origins past the origin check. Without it, CORS is off: no response carries a
    /// CORS header, preflights reach the routes, and only the gateway's own pages (and clients
    /// that send no `Origin`) may change anything.
    #[must_use]
    pub fn with_cors(mut self, cors: CorsSettings) -> Self {
        self.cors = Some(cors);
        self
    }

    /// Answers requests whose `Host` names one of `hosts` (see [`AllowedHosts`]); any other
    /// answers 421 `MisdirectedRequestError`. Default: a loopback listener's, so only
    /// `localhost` and loopback addresses.
    #[must_use]
    pub fn with_allowed_hosts(mut self, hosts: AllowedHosts) -> Self {
        self.allowed_hosts = hosts;
        self
    }

    /// Admits browser requests to `/mcp` from `origins` too, besides the gateway's own origin and
    /// the CORS origins. Default: none.
    #[must_use]
    pub fn with_mcp_origins(mut self, origins: McpOrigins) -> Self {
        self.mcp_origins = origins;
        self
    }

    pub fn allowed_hosts(&self) -> &AllowedHosts {
        &self.allowed_hosts
    }

    pub fn mcp_origins(&self) -> &McpOrigins {
        &self.mcp_origins
    }

    /// Limits REST requests per caller with `limiter` (and answers 429 `RateLimitExceeded` over
    /// the limit). Tool calls over `/mcp` are limited by the front end, never here. Without it,
    /// nothing is limited.
    #[must_use]
    pub fn with_rate_limiter(mut self, limiter: Arc<dyn RateLimiter>) -> Self {
        self.rate_limiter = Some(limiter);
        self
    }

    pub fn rate_limiter(&self) -> Option<&Arc<dyn RateLimiter>> {
        self.rate_limiter.as_ref()
    }

    pub fn cors(&self) -> Option<&CorsSettings> {
        self.cors.as_ref()
    }

    pub fn trusted_proxies(&self) -> &TrustedProxies {
        &self.trusted_proxies
    }

    /// The client's address as the API sees it: the TCP peer, or the forwarded address when
    /// the peer is a trusted proxy. Lockouts and rate limits of anonymous callers key on it.
    pub fn client_address(&self, request: &actix_web::HttpRequest) -> Option<std::net::IpAddr> {
        self.trusted_proxies.client_address(
            request.peer_addr().map(|peer| peer.ip()),
            request
                .headers()
                .get("x-forwarded-for")
                .and_then(|value| value.to_str().ok()),
        )
    }

    pub fn auth(&self) -> Option<&Arc<AuthService>> {
        self.auth.as_ref()
    }

    pub fn event_streams(&self) -> Option<&EventStreams> {
        self.event_streams.as_ref()
    }

    pub fn mcp_handler(&self) -> Option<&McpHttpHandler> {
        self.mcp_handler.as_ref()
    }

    pub fn gateway(&self) -> &Gateway {
        &self.gateway
    }

    pub fn metrics(&self) -> &PrometheusHandle {
        &self.metrics
    }

    pub fn settings(&self) -> &HttpSettings {
        &self.settings
    }
}
