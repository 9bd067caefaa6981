//! [`RunningGateway`]: a built gateway, its background tasks, and the ways to serve it.

use std::future::Future;
use std::io::Write as _;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use mcpgw_config::GatewayConfig;
use mcpgw_core::{Clock, EventLog, McpFrontend};
use mcpgw_gateway::authz::{AuthStore, RateLimiter};
use mcpgw_gateway::{
    AuthService, ConfigService, DiscoveryService, Environment, EventBus, Gateway, GroupService,
    ToolCatalog, ToolListKeeper,
};
use mcpgw_store_sqlite::SqliteEventLog;
use tokio::task::JoinHandle;

use crate::{StartError, settings};

/// How often health checks, idle reaping and restarts are considered.
const MAINTENANCE_PERIOD: Duration = Duration::from_secs(1);
/// How often idle rate-limit buckets are forgotten.
const BUCKET_EVICTION_PERIOD: Duration = Duration::from_secs(5);
/// How often API keys, roles, role assignments and tool policies are read again from the auth
/// store, for what another process (`auth create-key`, `auth create-user --role`) wrote while
/// the gateway runs. What is made over the API is in memory at once.
const KEY_REFRESH_PERIOD: Duration = Duration::from_secs(5);
/// How often the Prometheus histograms are trimmed.
const METRICS_UPKEEP_PERIOD: Duration = Duration::from_secs(5);

/// A default event log, closed at shutdown so that what it queued is written.
pub(crate) enum ClosingEventLog {
    Sqlite(Arc<SqliteEventLog>),
    Postgres(Arc<mcpgw_store_postgres::PostgresEventLog>),
}

/// Everything the gateway is made of, before it loads and starts.
pub(crate) struct Parts {
    pub(crate) config: GatewayConfig,
    pub(crate) environment: Environment,
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) gateway: Gateway,
    pub(crate) catalog: Arc<ToolCatalog>,
    pub(crate) tool_lists: Arc<ToolListKeeper>,
    /// The pin ledger, reviewed by the catalogue once loaded.
    pub(crate) tool_pins: Arc<mcpgw_gateway::ToolPins>,
    pub(crate) endpoints: Arc<mcpgw_gateway::EndpointService>,
    pub(crate) frontend: Arc<dyn McpFrontend>,
    pub(crate) groups: Arc<GroupService>,
    pub(crate) events: Arc<EventBus>,
    pub(crate) auth: Arc<AuthService>,
    pub(crate) auth_store: Arc<dyn AuthStore>,
    pub(crate) event_log: Arc<dyn EventLog>,
    /// The default event log, which is closed (its writer ended) at shutdown.
    pub(crate) closing_event_log: Option<ClosingEventLog>,
    /// The secret every replica shares (`cluster.secret_file`, `MCP_CLUSTER_SECRET` or
    /// `MCP_REQUEST_STATE_SECRET`), if one is given.
    pub(crate) fleet_secret: Option<String>,
    /// This gateway's place in its fleet, when it shares a PostgreSQL store.
    pub(crate) replica: Option<crate::cluster::Replica>,
    pub(crate) rate_limiter: Arc<dyn RateLimiter>,
    pub(crate) discovery: Option<Arc<DiscoveryService>>,
    pub(crate) config_service: Arc<ConfigService>,
    /// The web console's sessions and single sign-on, shared by every listener; `None` when
    /// `console.enabled` is false.
    pub(crate) console: Option<mcpgw_http_actix::Console>,
    /// The audit exporter, when there are audit sinks; closed (its queues written and its
    /// sinks flushed, within a bounded time) at shutdown.
    pub(crate) audit: Option<mcpgw_gateway::audit::AuditExporter>,
}

impl Parts {
    /// Loads the servers and groups of the configuration and the stores, the discovery
    /// sources, the auth records and the kept tool lists.
    pub(crate) async fn load(&self) -> Result<(), StartError> {
        // First: every list the catalogue serves is reviewed against the pins, and a ledger
        // read in part would pin afresh what an operator rejected, so a store that cannot be
        // read stops the start.
        let pins = self.tool_pins.load().await.map_err(|error| {
            StartError::new(format!("cannot read the tool pin ledger: {error}"))
        })?;
        tracing::debug!(pins, "tool pin ledger loaded");
        for warning in self.config.warnings() {
            tracing::warn!(%warning, "the configuration has a suspicious setting");
        }
        self.catalog.set_tool_pins(self.tool_pins.clone());
        let manager = self.gateway.servers();
        for spec in self.config.server_specs() {
            manager.register(spec).await.map_err(|error| {
                StartError::new(format!("cannot register a configured mcp server: {error}"))
            })?;
        }
        let restored = manager.restore_from_repository().await.map_err(|error| {
            StartError::new(format!(
                "cannot load the mcp servers saved in the store: {error}"
            ))
        })?;
        tracing::info!(
            configured = self.config.mcp_servers.len(),
            restored,
            "mcp servers registered"
        );
        // After the servers, since groups name servers as members.
        for definition in self.config.groups() {
            let cannot = |error: &dyn std::fmt::Display| {
                StartError::new(format!(
                    "cannot register the configured group `{}`: {error}",
                    definition.id
                ))
            };
            let spec =
                mcpgw_gateway::group_spec_from_config(&definition).map_err(|e| cannot(&e))?;
            self.groups
                .create(spec, mcpgw_core::ServerOrigin::Config)
                .await
                .map_err(|e| cannot(&e))?;
        }
        let restored = self
            .groups
            .restore_from_repository()
            .await
            .map_err(|error| {
                StartError::new(format!(
                    "cannot load the groups saved in the store: {error}"
                ))
            })?;
        tracing::info!(
            configured = self.config.groups().len(),
            restored,
            "groups registered"
        );
        // The file's curated endpoints, then those created over the API.
        self.endpoints
            .apply_config(self.config.to_endpoint_specs())
            .map_err(|error| StartError::new(format!("endpoints: {error}")))?;
        let restored = self
            .endpoints
            .restore_from_repository()
            .await
            .map_err(|error| {
                StartError::new(format!(
                    "cannot load the curated endpoints saved in the store: {error}"
                ))
            })?;
        tracing::debug!(restored, "curated endpoints registered");
        // After the servers: those approved from discovery before are among them.
        if let (Some(discovery), Some(section)) = (&self.discovery, &self.config.discovery) {
            discovery
                .load(mcpgw_gateway::discovery_sources_from_config(section))
                .await
                .map_err(|error| StartError::new(format!("discovery: {error}")))?;
        }
        self.auth
            .load()
            .await
            .map_err(|error| StartError::new(format!("cannot load the auth store: {error}")))?;
        // Tool lists learned before the restart are served again where the server's
        // definition is unchanged; the others are probed. A store that cannot be read only
        // costs probes.
        match self.tool_lists.restore().await {
            Ok(report) => tracing::info!(
                restored = report.restored,
                not_served = report.not_served,
                forgotten = report.forgotten,
                "kept tool lists loaded"
            ),
            Err(error) => {
                tracing::warn!(%error, "the kept tool lists could not be read; servers are probed instead");
            }
        }
        // Servers whose tools are still unknown are started once, in the background, to
        // learn them.
        self.catalog.set_probing(self.config.probe_tools);
        self.catalog.probe_unknown_tools();
        Ok(())
    }
}

/// A built gateway: its servers registered, its background work running, nothing listening
/// yet. Serve it over HTTP ([`serve_http`](Self::serve_http)) or stdio
/// ([`serve_stdio`](Self::serve_stdio)), or mount [`http_state`](Self::http_state) in an
/// actix-web application of one's own; end it with [`shutdown`](Self::shutdown), which stops
/// every managed server.
pub struct RunningGateway {
    parts: Parts,
    /// In a fleet: every replica's events in the shared log's order, for the event streams.
    fleet_events: Option<tokio::sync::broadcast::Sender<Arc<mcpgw_http_actix::FleetEvent>>>,
    /// Ended first at shutdown: nothing new may start while servers stop.
    tasks: Vec<JoinHandle<()>>,
    /// Ended last: they write what the shutdown itself changes.
    late_tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for RunningGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningGateway")
            .field("tasks", &self.tasks.len())
            .finish_non_exhaustive()
    }
}

impl RunningGateway {
    pub(crate) fn start(parts: Parts) -> Self {
        let _entered = parts.runtime.enter();
        let mut tasks = Vec::new();
        // Alone, the gateway does all of its work; in a fleet, discovery scans and event-log
        // compaction run on the replica that holds their lease.
        if parts.replica.is_none()
            && let Some(discovery) = &parts.discovery
        {
            discovery.start_scanning();
        }
        if let Some(watch) = parts.config_service.spawn_watch() {
            tasks.push(watch);
        }
        tasks.push(spawn_reload_on_hangup(parts.config_service.clone()));
        tasks.push(mcpgw_gateway::spawn_maintenance(
            parts.gateway.servers().clone(),
            MAINTENANCE_PERIOD,
        ));
        tasks.push(parts.groups.spawn_recovery(MAINTENANCE_PERIOD));
        if parts.config.auth.enabled {
            tasks.push(spawn_auth_refresh(
                parts.auth_store.clone(),
                parts.auth.clone(),
            ));
        }
        tasks.push(mcpgw_gateway::spawn_rate_limit_eviction(
            parts.rate_limiter.clone(),
            BUCKET_EVICTION_PERIOD,
        ));
        match &parts.replica {
            None => tasks.push(tokio::spawn(mcpgw_gateway::run_event_log_compaction(
                parts.event_log.clone(),
                parts.config.event_log.retention(),
                parts.clock.clone(),
                parts.config.event_log.compaction_interval(),
            ))),
            Some(replica) => {
                tasks.push(crate::cluster::spawn_heartbeat(
                    replica,
                    crate::cluster::LeasedWork {
                        discovery: parts.discovery.clone(),
                        event_log: parts.event_log.clone(),
                        retention: parts.config.event_log.retention(),
                        clock: parts.clock.clone(),
                        compaction_interval: parts.config.event_log.compaction_interval(),
                    },
                ));
                tasks.push(crate::cluster::spawn_followers(
                    replica,
                    crate::cluster::Followers {
                        manager: parts.gateway.servers().clone(),
                        groups: parts.groups.clone(),
                        auth: parts.auth.clone(),
                        auth_store: parts.auth_store.clone(),
                        tool_lists: parts.tool_lists.clone(),
                        tool_pins: parts.tool_pins.clone(),
                        endpoints: parts.endpoints.clone(),
                    },
                ));
            }
        }
        let mut fleet_events = None;
        if let (Some(replica), Some(ClosingEventLog::Postgres(log))) =
            (&parts.replica, &parts.closing_event_log)
        {
            let (task, feed) = crate::cluster::spawn_event_feed(replica, log.clone());
            tasks.push(task);
            fleet_events = Some(feed);
        }
        let late_tasks = vec![
            tokio::spawn(parts.catalog.clone().run_change_notifier()),
            tokio::spawn(parts.tool_lists.clone().run()),
            tokio::spawn(parts.tool_pins.clone().run()),
        ];
        Self {
            parts,
            fleet_events,
            tasks,
            late_tasks,
        }
    }

    /// The application facade: servers, groups, history, configuration, discovery.
    pub fn gateway(&self) -> &Gateway {
        &self.parts.gateway
    }

    /// The configuration the gateway started with.
    pub fn config(&self) -> &GatewayConfig {
        &self.parts.config
    }

    /// Every server's and group's tools as one MCP server, filtered by the caller's
    /// permissions and counted against rate limits: what `/mcp` serves.
    pub fn frontend(&self) -> Arc<dyn McpFrontend> {
        self.parts.frontend.clone()
    }

    /// The same tools without authorization: what stdio serves to the process that launched
    /// the gateway.
    pub fn catalog(&self) -> Arc<ToolCatalog> {
        self.parts.catalog.clone()
    }

    /// The domain events, to observe or stream.
    pub fn events(&self) -> Arc<EventBus> {
        self.parts.events.clone()
    }

    /// Authentication, authorization and their management.
    pub fn auth(&self) -> Arc<AuthService> {
        self.parts.auth.clone()
    }

    /// The state of the HTTP adapter for a listener bound to `address`: the REST API, `/mcp`,
    /// the event stream, authentication, rate limits, CORS from the environment, and the
    /// `Host` names that reach it. Mount it with [`mcpgw_http_actix::app`] or
    /// [`mcpgw_http_actix::configure`], or let [`serve_http`](Self::serve_http) do it.
    pub fn http_state(
        &self,
        address: SocketAddr,
    ) -> Result<mcpgw_http_actix::ApiState, StartError> {
        let parts = &self.parts;
        let config = &parts.config;
        let metrics = mcpgw_http_actix::install_metrics_recorder().map_err(crate::metrics_error)?;
        let http_settings = self.http_settings();
        let state = mcpgw_http_actix::ApiState::new(parts.gateway.clone(), metrics, http_settings)
            .with_mcp_handler(mcp_http_handler(
                config,
                parts.fleet_secret.clone(),
                parts.frontend.clone(),
            ))
            .with_endpoint_handlers(endpoint_handlers(
                config,
                parts.fleet_secret.clone(),
                parts.frontend.clone(),
                parts.endpoints.clone(),
                parts.runtime.clone(),
            ))
            .with_auth(parts.auth.clone())
            .with_trusted_proxies(
                mcpgw_http_actix::TrustedProxies::parse(&config.auth.trusted_proxies)
                    .map_err(|error| StartError::new(format!("auth.trusted_proxies: {error}")))?,
            );
        let state = match settings::cors_settings(&parts.environment)? {
            Some(cors) => state.with_cors(cors),
            None => state,
        };
        Ok(state
            .with_allowed_hosts(
                mcpgw_http_actix::AllowedHosts::new(address.ip(), &config.allowed_hosts())
                    .map_err(|error| StartError::new(error.to_string()))?,
            )
            .with_mcp_origins(
                mcpgw_http_actix::McpOrigins::parse(&config.mcp_endpoint.allowed_origins)
                    .map_err(|error| StartError::new(error.to_string()))?,
            )
            .with_events({
                let streams = mcpgw_http_actix::EventStreams::new(parts.events.clone());
                match &self.fleet_events {
                    Some(feed) => streams.with_fleet_feed(feed.clone()),
                    None => streams,
                }
            })
            .with_rate_limiter(parts.rate_limiter.clone()))
        .map(|state| match &parts.console {
            Some(console) => state.with_console(console.clone()),
            None => state.without_console(),
        })
    }

    /// The HTTP server's settings: the defaults, with `MCP_HTTP_WORKERS` workers.
    fn http_settings(&self) -> mcpgw_http_actix::HttpSettings {
        mcpgw_http_actix::HttpSettings {
            workers: settings::thread_count(
                &self.parts.environment,
                "MCP_HTTP_WORKERS",
                mcpgw_http_actix::HttpSettings::DEFAULT_WORKERS,
            ),
            ..mcpgw_http_actix::HttpSettings::default()
        }
    }

    /// Serves HTTP on `listener` from the calling thread until SIGTERM or SIGINT, then drains
    /// the requests in flight. Prints `listening on http://ADDRESS` on stderr once it
    /// accepts. The HTTP server ending on its own is an error.
    pub fn serve_http(&self, listener: TcpListener) -> Result<(), StartError> {
        self.serve_http_until(listener, async {
            let signal = wait_for_shutdown_signal().await;
            tracing::info!(signal, "shutting down");
        })
    }

    /// As [`serve_http`](Self::serve_http), until `stop` completes instead of a signal.
    pub fn serve_http_until(
        &self,
        listener: TcpListener,
        stop: impl Future<Output = ()>,
    ) -> Result<(), StartError> {
        let address = listener
            .local_addr()
            .map_err(|error| StartError::new(format!("cannot read the bound address: {error}")))?;
        let state = self.http_state(address)?;
        let metrics = state.metrics().clone();
        let event_streams = state.event_streams().cloned();
        let http_settings = state.settings().clone();
        let gateway = &self.parts.gateway;
        actix_web::rt::System::new().block_on(async {
            let server = mcpgw_http_actix::build_server(state, listener, &http_settings).map_err(
                |error| StartError::new(format!("cannot start the HTTP server: {error}")),
            )?;
            let handle = server.handle();
            let upkeep = actix_web::rt::spawn(mcpgw_http_actix::run_metrics_upkeep(
                metrics,
                METRICS_UPKEEP_PERIOD,
            ));
            gateway.mark_startup_complete();
            // A closed stderr must not stop the gateway, so the write's error is ignored.
            let _ = writeln!(std::io::stderr(), "listening on http://{address}");
            let mut served = actix_web::rt::spawn(server);
            let outcome = tokio::select! {
                () = stop => {
                    gateway.mark_shutting_down();
                    if let Some(streams) = &event_streams {
                        streams.close_all();
                    }
                    handle.stop(true).await;
                    let _ = served.await;
                    Ok(())
                }
                // The HTTP server ending on its own is a failure: the gateway stops rather
                // than linger without a listener.
                ended = &mut served => {
                    gateway.mark_shutting_down();
                    Err(StartError::new(match ended {
                        Ok(Ok(())) => "the HTTP server stopped unexpectedly".to_owned(),
                        Ok(Err(error)) => format!("the HTTP server failed: {error}"),
                        Err(error) => format!("the HTTP server task failed: {error}"),
                    }))
                }
            };
            upkeep.abort();
            outcome
        })
    }

    /// Serves MCP over stdin and stdout until the client closes stdin or a signal arrives.
    /// Stdio has no credentials: the process that launched the gateway is trusted with every
    /// tool, as with any local MCP server.
    pub async fn serve_stdio(&self) -> Result<(), StartError> {
        self.parts.gateway.mark_startup_complete();
        let served = mcpgw_mcp_rmcp::serve_stdio(
            self.parts.catalog.clone(),
            mcpgw_mcp_rmcp::McpServerSettings::default(),
        );
        tokio::select! {
            result = served => {
                result.map_err(|error| StartError::new(format!("serving MCP over stdio failed: {error}")))?;
                tracing::info!("the MCP client closed stdin; shutting down");
            }
            signal = wait_for_shutdown_signal() => {
                tracing::info!(signal, "shutting down");
            }
        }
        self.parts.gateway.mark_shutting_down();
        Ok(())
    }

    /// Serves the curated endpoint `name` over stdin and stdout, as
    /// [`serve_stdio`](Self::serve_stdio) serves every tool. An unknown name is an error.
    pub async fn serve_stdio_endpoint(&self, name: &str) -> Result<(), StartError> {
        if !self.parts.endpoints.contains(name) {
            let known: Vec<String> = self
                .parts
                .endpoints
                .list()
                .iter()
                .map(|spec| spec.name.to_string())
                .collect();
            return Err(StartError::new(format!(
                "--endpoint {name}: no curated endpoint has that name (the configuration and the \
                 store have: {})",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            )));
        }
        self.parts.gateway.mark_startup_complete();
        let frontend = mcpgw_gateway::EndpointFrontend::new(
            name,
            self.parts.endpoints.clone(),
            self.parts.catalog.clone(),
        );
        let served =
            mcpgw_mcp_rmcp::serve_stdio(frontend, mcpgw_mcp_rmcp::McpServerSettings::default());
        tokio::select! {
            result = served => {
                result.map_err(|error| StartError::new(format!("serving MCP over stdio failed: {error}")))?;
                tracing::info!("the MCP client closed stdin; shutting down");
            }
            signal = wait_for_shutdown_signal() => {
                tracing::info!(signal, "shutting down");
            }
        }
        self.parts.gateway.mark_shutting_down();
        Ok(())
    }

    /// Ends the background work, stops every managed server (their processes and containers
    /// included), keeps the tool lists learned since the last write, and writes out the event
    /// log, whose last entries are the stops.
    pub async fn shutdown(self) {
        for task in &self.tasks {
            task.abort();
        }
        let parts = &self.parts;
        if let Some(discovery) = &parts.discovery {
            discovery.stop_scanning();
        }
        parts.gateway.shutdown().await;
        parts.tool_lists.flush().await;
        parts.tool_pins.flush().await;
        if let Some(audit) = &parts.audit {
            audit.close().await;
        }
        let written = match &parts.closing_event_log {
            Some(ClosingEventLog::Sqlite(log)) => log.close().await,
            Some(ClosingEventLog::Postgres(log)) => log.close().await,
            None => parts.event_log.flush().await,
        };
        // Last: another replica takes the leases at once rather than after they expire.
        if let Some(replica) = &parts.replica {
            replica.fleet.leave().await;
        }
        if let Err(error) = written {
            tracing::error!(%error, "the event log could not be written out at shutdown");
        }
        for task in &self.late_tasks {
            task.abort();
        }
    }
}

/// The MCP endpoint's handler from the rmcp adapter, in the HTTP adapter's types. `secret` is
/// the fleet's shared secret ([`crate::settings::fleet_secret`]), which signs session ids and
/// input-required request states so that every replica resumes them.
fn mcp_http_handler(
    config: &GatewayConfig,
    secret: Option<String>,
    frontend: Arc<dyn McpFrontend>,
) -> mcpgw_http_actix::McpHttpHandler {
    use http_body_util::BodyExt as _;
    let endpoint = &config.mcp_endpoint;
    // `Host` and `Origin` are checked by the HTTP adapter, for `/mcp` as for every route.
    let settings = mcpgw_mcp_rmcp::McpHttpSettings::default()
        .with_sse_keep_alive(
            Some(Duration::from_secs(endpoint.sse_keep_alive_s)).filter(|d| !d.is_zero()),
        )
        .with_server(
            mcpgw_mcp_rmcp::McpServerSettings::default().with_request_state_secret(secret),
        );
    let handler = mcpgw_mcp_rmcp::streamable_http_handler(frontend, settings);
    Arc::new(move |request| {
        let answer = handler(request);
        // The HTTP adapter polls this future in a request handler, which actix runs as a task
        // of its worker's `LocalSet`: the stdio links may bring their readers into that set.
        Box::pin(mcpgw_mcp_rmcp::on_local_set(async move {
            answer.await.map(|body| body.boxed_unsync())
        }))
    })
}

/// The handlers of the curated endpoints: one per endpoint, made on its first request (an
/// [`mcpgw_gateway::EndpointFrontend`] in front of `frontend`, with sessions of its own) and kept.
/// A name that is no endpoint gets none; the HTTP adapter has already answered 404 for one that
/// was deleted, so a kept handler is answered without looking the name up again.
fn endpoint_handlers(
    config: &GatewayConfig,
    secret: Option<String>,
    frontend: Arc<dyn McpFrontend>,
    endpoints: Arc<mcpgw_gateway::EndpointService>,
    runtime: tokio::runtime::Handle,
) -> mcpgw_http_actix::EndpointHandlers {
    let config = config.clone();
    let made: std::sync::Mutex<
        std::collections::HashMap<String, mcpgw_http_actix::McpHttpHandler>,
    > = std::sync::Mutex::default();
    Arc::new(move |name: &str| {
        let mut made = made
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(handler) = made.get(name) {
            return Some(handler.clone());
        }
        // Only a name that is an endpoint gets a handler, so made-up names cannot grow the map.
        if !endpoints.contains(name) {
            return None;
        }
        // The front end follows changes in a task of the gateway's runtime, not of the HTTP
        // worker that happened to ask first.
        let _entered = runtime.enter();
        let curated =
            mcpgw_gateway::EndpointFrontend::new(name, endpoints.clone(), frontend.clone());
        let handler = mcp_http_handler(&config, secret.clone(), curated);
        made.insert(name.to_owned(), handler.clone());
        Some(handler)
    })
}

fn spawn_auth_refresh(store: Arc<dyn AuthStore>, auth: Arc<AuthService>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(KEY_REFRESH_PERIOD);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            ticker.tick().await;
            if let Err(error) = store.refresh_keys().await {
                tracing::warn!(%error, "could not read the API keys again from the store");
            }
            if let Err(error) = auth.refresh().await {
                tracing::warn!(%error, "could not read the roles and policies again from the store");
            }
        }
    })
}

/// Reloads the configuration file on SIGHUP, as daemons do; the outcome is logged and
/// published as an event like any reload. Without a file, the signal only says so in the log.
fn spawn_reload_on_hangup(config: Arc<ConfigService>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut hangups =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
                Ok(hangups) => hangups,
                Err(error) => {
                    tracing::warn!(%error, "cannot listen for SIGHUP; reload over the API instead");
                    return;
                }
            };
        while hangups.recv().await.is_some() {
            match config.reload(mcpgw_gateway::ReloadTrigger::Signal).await {
                Ok(report) => tracing::info!(
                    added = ?report.added,
                    removed = ?report.removed,
                    updated = ?report.updated,
                    "configuration reloaded on SIGHUP"
                ),
                Err(error) => tracing::warn!(%error, "configuration reload on SIGHUP refused"),
            }
        }
    })
}

/// SIGTERM or SIGINT, by name.
pub async fn wait_for_shutdown_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = match signal(SignalKind::terminate()) {
        Ok(stream) => stream,
        Err(error) => {
            tracing::error!(%error, "cannot listen for SIGTERM");
            let _ = tokio::signal::ctrl_c().await;
            return "SIGINT";
        }
    };
    tokio::select! {
        _ = terminate.recv() => "SIGTERM",
        _ = tokio::signal::ctrl_c() => "SIGINT",
    }
}
