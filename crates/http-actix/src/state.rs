//! What every handler shares: the gateway facade, the metrics handle, the HTTP settings and the
//! MCP endpoint's handler.

use std::time::Duration;

use mcpgw_gateway::Gateway;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::mcp_endpoint::McpHttpHandler;

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
    /// How long an idle keep-alive connection stays open.
    pub keep_alive: Duration,
}

impl HttpSettings {
    pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
    pub const DEFAULT_MAX_MCP_BODY_BYTES: usize = 4 * 1024 * 1024;
    pub const DEFAULT_WORKERS: usize = 2;
    pub const DEFAULT_SHUTDOWN_TIMEOUT_S: u64 = 30;
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            max_body_bytes: Self::DEFAULT_MAX_BODY_BYTES,
            max_mcp_body_bytes: Self::DEFAULT_MAX_MCP_BODY_BYTES,
            workers: Self::DEFAULT_WORKERS,
            shutdown_timeout_s: Self::DEFAULT_SHUTDOWN_TIMEOUT_S,
            client_request_timeout: Duration::from_secs(5),
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
}

impl std::fmt::Debug for ApiState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiState")
            .field("gateway", &self.gateway)
            .field("settings", &self.settings)
            .field("mcp_endpoint_enabled", &self.mcp_handler.is_some())
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
        }
    }

    /// Serves `/mcp` with `handler` (the MCP protocol adapter's Streamable HTTP service). Without
    /// one, `/mcp` answers 404. Set it before the routes are mounted: [`crate::configure`] reads
    /// it once.
    #[must_use]
    pub fn with_mcp_handler(mut self, handler: McpHttpHandler) -> Self {
        self.mcp_handler = Some(handler);
        self
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
