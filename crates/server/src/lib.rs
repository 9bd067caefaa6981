//! The mcpgw gateway assembled from its default adapters, for the bundled server and for
//! services that embed the gateway.
//!
//! [`GatewayBuilder`] owns the wiring: which adapter implements which port, the order in which
//! the parts are made and observe each other, what is loaded at start, and which background
//! tasks run. Every port has a `with_*` method that replaces its default adapter, so "the
//! gateway, but with my store" is one line. [`RunningGateway`] is the result: serve it over
//! HTTP or stdio, or mount its HTTP state in an actix-web application of one's own, and end it
//! with one `shutdown().await`.
//!
//! The default adapters: SQLite under the data directory (servers, groups, auth, discovery
//! decisions, tool lists; the event log in a file of its own), local processes and containers
//! for stdio servers, rmcp for the protocol, Streamable HTTP for remote servers, OIDC for
//! bearer tokens, OPA as the external policy engine, token buckets for rate limits, Docker and
//! directory discovery sources.
//!
//! It reads the environment only through the [`Environment`](mcpgw_gateway::Environment)
//! handed to the builder (the process environment by default): `MCP_RATE_LIMIT_RPS`,
//! `MCP_RATE_LIMIT_BURST`, `MCP_CORS_ORIGINS`, `MCP_CORS_METHODS`, `MCP_CORS_HEADERS`,
//! `MCP_HTTP_WORKERS`, `MCP_CLUSTER_SECRET` and its older name `MCP_REQUEST_STATE_SECRET` (the
//! fleet's secret, which signs MCP session ids and input-required request states), and `${VAR}`
//! in the configuration file. The auth commands and the shared store also read the files the
//! configuration names (`store.password_file`, `cluster.secret_file`).

mod audit;
mod builder;
mod cluster;
mod config_file;
mod data_dir;
mod docker;
pub mod keys;
mod running;
mod settings;
mod store_location;
pub mod users;

pub use builder::{GatewayBuilder, default_discovery_sources};
pub use config_file::{default_config_path, load_config_file};
pub use data_dir::OpeningDataDir;
pub use docker::instance_id;
pub use running::{RunningGateway, wait_for_shutdown_signal};
pub use settings::{Listen, thread_count};
pub use store_location::StoreLocation;

pub use mcpgw_config as config;
pub use mcpgw_gateway as gateway;
pub use mcpgw_http_actix as http;

/// The process environment, as the builder reads it by default.
pub fn process_environment() -> mcpgw_gateway::Environment {
    std::sync::Arc::new(|name| std::env::var(name).ok())
}

/// Why the gateway could not start: the message names the file, setting or variable at fault.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StartError(String);

impl StartError {
    /// A start error that says `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// Installs the Prometheus recorder that `/metrics` reads, once per process; later calls
/// answer the same handle. Call it before [`GatewayBuilder::build`] so that the starts and
/// events of the boot are counted too.
pub fn install_metrics() -> Result<(), StartError> {
    mcpgw_http_actix::install_metrics_recorder()
        .map(drop)
        .map_err(metrics_error)
}

/// Starts exporting traces as the configuration's `telemetry.traces` and the `OTEL_*`
/// variables say, installing the gateway's tracer; `None` when tracing is off. Call it from
/// within the runtime that serves the gateway (gRPC export runs on it), before the gateway is
/// built so that its first starts are traced too, and end it with
/// [`mcpgw_otel::Tracing::shutdown`] after the gateway stopped, which exports what is queued.
pub fn start_tracing(
    config: &mcpgw_config::GatewayConfig,
    environment: &mcpgw_gateway::Environment,
) -> Result<Option<mcpgw_otel::Tracing>, StartError> {
    let settings =
        mcpgw_otel::TraceSettings::resolve(&config.telemetry.traces, &|name| environment(name))
            .map_err(|error| StartError::new(format!("cannot start tracing: {error}")))?;
    let tracing = mcpgw_otel::start(settings)
        .map_err(|error| StartError::new(format!("cannot start tracing: {error}")))?;
    if let Some(tracing) = &tracing {
        let settings = tracing.settings();
        tracing::info!(
            endpoint = %settings.endpoint,
            protocol = settings.protocol.as_str(),
            sampler = ?settings.sampler,
            ratio = settings.ratio,
            "exporting traces over OTLP"
        );
    }
    Ok(tracing)
}

pub(crate) fn metrics_error(error: impl std::fmt::Display) -> StartError {
    StartError::new(format!("cannot install the metrics recorder: {error}"))
}

/// The runtime the bundled server gives the gateway's own work (starts, health checks,
/// upstream I/O), apart from the HTTP workers so that request handling never waits for a
/// thread: `MCP_CORE_THREADS` threads (2 by default) named `mcpgw-core`.
pub fn core_runtime(
    environment: &mcpgw_gateway::Environment,
) -> Result<tokio::runtime::Runtime, StartError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(thread_count(environment, "MCP_CORE_THREADS", 2))
        .thread_name("mcpgw-core")
        .enable_all()
        .build()
        .map_err(|error| StartError::new(format!("cannot start the runtime: {error}")))
}

/// Limits glibc's allocator to two arenas, as the bundled server does first thing in `main`.
///
/// glibc's allocator gives each thread that allocates an arena of its own (up to eight per
/// core), and an arena keeps the memory it once held. The gateway's threads mostly wait; two
/// arenas serve them, and small allocations go through each thread's cache without taking an
/// arena's lock at all. An operator can still choose otherwise with `MALLOC_ARENA_MAX`.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn limit_allocator_arenas() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: `mallopt` only sets a parameter of the allocator. It is called first thing
        // in `main`, before any other thread exists.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn limit_allocator_arenas() {}
