//! The gateway facade.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mcpgw_core::{
    Clock, EventLog, InMemoryInvocationHistory, InvocationHistory, McpFrontend, MonoTime,
    ServerManager,
};

/// Facts about the running gateway that the API reports.
#[derive(Debug, Clone)]
pub struct GatewayInfo {
    pub version: String,
    /// Where the configuration came from, when it came from a file.
    pub config_path: Option<String>,
}

/// The facade over the gateway's use cases. Cheap to clone.
#[derive(Clone)]
pub struct Gateway {
    servers: ServerManager,
    info: Arc<GatewayInfo>,
    clock: Arc<dyn Clock>,
    started: MonoTime,
    startup_complete: Arc<AtomicBool>,
    shutting_down: Arc<AtomicBool>,
    history: Arc<dyn InvocationHistory>,
    frontend: Option<Arc<dyn McpFrontend>>,
    tool_catalog: Option<Arc<crate::ToolCatalog>>,
    groups: Option<Arc<crate::GroupService>>,
    call_stats: Option<Arc<crate::CallStats>>,
    event_log: Option<Arc<dyn EventLog>>,
    discovery: Option<Arc<crate::DiscoveryService>>,
    config: Option<Arc<crate::ConfigService>>,
    fleet: Option<Arc<crate::Fleet>>,
    tool_pins: Option<Arc<crate::ToolPins>>,
    endpoints: Option<Arc<crate::EndpointService>>,
    tool_names: Arc<mcpgw_config::ToolNames>,
}

/// How many invocations per server the default in-memory history keeps.
pub const DEFAULT_HISTORY_PER_SERVER: usize = 1000;

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    pub fn new(servers: ServerManager, info: GatewayInfo) -> Self {
        let clock = Arc::clone(servers.clock());
        let started = clock.now();
        Self {
            servers,
            info: Arc::new(info),
            clock,
            started,
            startup_complete: Arc::new(AtomicBool::new(false)),
            shutting_down: Arc::new(AtomicBool::new(false)),
            history: Arc::new(InMemoryInvocationHistory::new(DEFAULT_HISTORY_PER_SERVER)),
            frontend: None,
            tool_catalog: None,
            groups: None,
            call_stats: None,
            event_log: None,
            discovery: None,
            config: None,
            fleet: None,
            tool_pins: None,
            endpoints: None,
            tool_names: Arc::default(),
        }
    }

    /// Names tools as `names` says (the catalogue's own setting): servers and groups created
    /// while the gateway runs are checked against it (see [`Gateway::check_new_owner`]). The
    /// default is `tool_names: prefixed`.
    #[must_use]
    pub fn with_tool_names(mut self, names: mcpgw_config::ToolNames) -> Self {
        self.tool_names = Arc::new(names);
        self
    }

    pub fn tool_names(&self) -> &mcpgw_config::ToolNames {
        &self.tool_names
    }

    /// Whether a server or group `id` may be created next to the servers and groups there are,
    /// as far as tool names go: its id must not contain the separator, and its tools' prefix
    /// must be no other owner's (nor a custom prefix written for another id). Whether the id
    /// itself is free is the registry's business.
    pub fn check_new_owner(
        &self,
        id: &mcpgw_core::ServerId,
    ) -> Result<(), mcpgw_config::ToolNameConflict> {
        let servers = self.servers.list(None);
        let groups = self
            .groups
            .as_ref()
            .map(|groups| groups.ids())
            .unwrap_or_default();
        let owners = servers
            .iter()
            .map(|server| server.id().as_str())
            .chain(groups.iter().map(mcpgw_core::ServerId::as_str));
        self.tool_names.check_new_owner(id.as_str(), owners)
    }

    /// Makes this gateway one replica of a fleet that shares its store: the fleet view and
    /// leases. Without it the gateway is alone and does all of its work itself.
    #[must_use]
    pub fn with_fleet(mut self, fleet: Arc<crate::Fleet>) -> Self {
        self.fleet = Some(fleet);
        self
    }

    pub fn fleet(&self) -> Option<&Arc<crate::Fleet>> {
        self.fleet.as_ref()
    }

    /// Turns the pin ledger's management on (set the same ledger on the catalogue with
    /// [`crate::ToolCatalog::set_tool_pins`]). Without it the ledger API answers 404.
    #[must_use]
    pub fn with_tool_pins(mut self, pins: Arc<crate::ToolPins>) -> Self {
        self.tool_pins = Some(pins);
        self
    }

    pub fn tool_pins(&self) -> Option<&Arc<crate::ToolPins>> {
        self.tool_pins.as_ref()
    }

    /// Turns curated endpoints on: their management and their MCP endpoints. Without it the
    /// endpoint API answers 404.
    #[must_use]
    pub fn with_endpoints(mut self, endpoints: Arc<crate::EndpointService>) -> Self {
        self.endpoints = Some(endpoints);
        self
    }

    pub fn endpoints(&self) -> Option<&Arc<crate::EndpointService>> {
        self.endpoints.as_ref()
    }

    /// Turns configuration management on: the running configuration, reload, export, backup
    /// and diff. Without it the configuration API answers 404.
    #[must_use]
    pub fn with_config(mut self, config: Arc<crate::ConfigService>) -> Self {
        self.config = Some(config);
        self
    }

    pub fn config(&self) -> Option<&Arc<crate::ConfigService>> {
        self.config.as_ref()
    }

    /// Turns discovery on (the configuration has a `discovery` block); without it every
    /// discovery use case is absent and the API answers 404.
    #[must_use]
    pub fn with_discovery(mut self, discovery: Arc<crate::DiscoveryService>) -> Self {
        self.discovery = Some(discovery);
        self
    }

    pub fn discovery(&self) -> Option<&Arc<crate::DiscoveryService>> {
        self.discovery.as_ref()
    }

    /// Uses `history` for the tool invocation history (the default keeps the most recent
    /// invocations of each server in memory). Add it to the event bus as an observer
    /// too, so that it sees every invocation.
    #[must_use]
    pub fn with_history(mut self, history: Arc<dyn InvocationHistory>) -> Self {
        self.history = history;
        self
    }

    /// Keeps the persistent event log `log` (register it on the event bus as an observer, and
    /// number the bus's events after [`EventLog::last_event_id`]). The tool invocation history
    /// then reads from it, so it survives restarts.
    #[must_use]
    pub fn with_event_log(mut self, log: Arc<dyn EventLog>) -> Self {
        self.history = log.clone();
        self.event_log = Some(log);
        self
    }

    /// The persistent event log, when the composition keeps one.
    pub fn event_log(&self) -> Option<&Arc<dyn EventLog>> {
        self.event_log.as_ref()
    }

    /// Sets the MCP front end (the aggregated catalogue) that protocol adapters serve.
    #[must_use]
    pub fn with_frontend(mut self, frontend: Arc<dyn McpFrontend>) -> Self {
        self.frontend = Some(frontend);
        self
    }

    /// Sets the catalogue behind the MCP front end, so that a decision can be explained by the
    /// same routing and access paths a call follows ([`crate::ToolCatalog::resolve`]).
    pub fn with_tool_catalog(mut self, catalog: Arc<crate::ToolCatalog>) -> Self {
        self.tool_catalog = Some(catalog);
        self
    }

    /// Sets the groups (load-balanced groups of servers) that the API manages.
    #[must_use]
    pub fn with_groups(mut self, groups: Arc<crate::GroupService>) -> Self {
        self.groups = Some(groups);
        self
    }

    /// Reports tool call counts and latencies from `stats` (register it on the event bus as an
    /// observer so that it sees every invocation).
    #[must_use]
    pub fn with_call_stats(mut self, stats: Arc<crate::CallStats>) -> Self {
        self.call_stats = Some(stats);
        self
    }

    /// The tool call counts and latencies, when the composition keeps them.
    pub fn call_stats(&self) -> Option<&Arc<crate::CallStats>> {
        self.call_stats.as_ref()
    }

    /// The groups, when the composition enabled them.
    pub fn groups(&self) -> Option<&Arc<crate::GroupService>> {
        self.groups.as_ref()
    }

    pub fn history(&self) -> &Arc<dyn InvocationHistory> {
        &self.history
    }

    /// The catalogue behind the MCP front end, when one was set.
    pub fn tool_catalog(&self) -> Option<&Arc<crate::ToolCatalog>> {
        self.tool_catalog.as_ref()
    }

    pub fn frontend(&self) -> Option<&Arc<dyn McpFrontend>> {
        self.frontend.as_ref()
    }

    pub fn servers(&self) -> &ServerManager {
        &self.servers
    }

    pub fn info(&self) -> &GatewayInfo {
        &self.info
    }

    pub fn uptime(&self) -> Duration {
        self.clock.now().saturating_since(self.started)
    }

    /// Marks the end of start-up: the configuration is loaded and the stores are open.
    pub fn mark_startup_complete(&self) {
        self.startup_complete.store(true, Ordering::Release);
    }

    pub fn startup_complete(&self) -> bool {
        self.startup_complete.load(Ordering::Acquire)
    }

    /// Marks the start of shutdown: readiness turns false so load balancers stop sending.
    pub fn mark_shutting_down(&self) {
        self.shutting_down.store(true, Ordering::Release);
    }

    pub fn shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// Ready to take traffic: started up and not shutting down.
    pub fn ready(&self) -> bool {
        self.startup_complete() && !self.shutting_down()
    }

    /// Stops every managed server; call once the listeners are closed.
    pub async fn shutdown(&self) {
        self.mark_shutting_down();
        self.servers.shutdown().await;
    }
}
