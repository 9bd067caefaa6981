//! The application layer of mcpgw: the facade that embedders and the bundled server call.
//!
//! It composes the domain crates through their ports: [`Gateway`] owns the server manager and
//! what the whole gateway knows about itself (uptime, readiness); [`StdioLauncher`] turns a
//! process spawner plus an MCP connector into a launcher; [`TokioClock`] and [`TokioSpawner`]
//! are the production clock and task spawner; [`spawn_maintenance`] drives health checks,
//! idle reaping and restarts. [`GroupService`] runs the load-balanced groups: their
//! definitions, the routing of calls through a group's strategy, and the rotation that
//! follows the members' health; [`ToolCatalog`] lists a group's tools in place of its members'.
//! [`AuthService`] authenticates requests, authorizes them against roles, tool access policies
//! and an optional external policy engine, and runs the auth management use cases.
//! [`CallStats`] counts tool calls and keeps their recent latencies for the system summary.
//! [`DiscoveryService`] runs discovery: its sources, their periodic and on-change scans, and
//! the approval and rejection of what they find.
//! [`ConfigService`] reloads the configuration file into the running gateway (applying only
//! what changed), shows, exports, backs up and compares the configuration.
//! [`ConsoleSessions`] holds the web console's signed-in browsers.
//! [`ToolListKeeper`] keeps the tool lists servers listed, so that a restart serves them
//! instead of starting every server that declares no tools.
//! [`naming`] says under which names the catalogue lists tools and prompts (`tool_names`):
//! prefixes, bare names, the shortening of long names and their collisions.
//!
//! It must never know a concrete adapter: no HTTP framework, no database, no process or
//! protocol library. Adapters are handed in as `Arc<dyn Port>` by whoever composes the gateway
//! (`mcpgw-server`'s `GatewayBuilder` does it with the default adapters).
//!
//! # Example
//!
//! The facade over a server manager whose launcher is a fake (from `mcpgw-testkit`):
//!
//! ```rust
//! use std::sync::Arc;
//!
//! use mcpgw_core::{ManagerSettings, NullEventSink, ServerId, ServerManager, ServerSpec};
//! use mcpgw_gateway::{Gateway, GatewayInfo, TokioClock, TokioSpawner};
//! use mcpgw_testkit::fakes::FakeLauncher;
//!
//! # #[tokio::main(flavor = "current_thread")]
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
//! let math = ServerSpec::subprocess(ServerId::parse("math").unwrap(), vec!["math-server".into()]);
//! gateway.servers().register(math).await.unwrap();
//! assert_eq!(gateway.servers().list(None).len(), 1);
//! // Stops every server it started.
//! gateway.shutdown().await;
//! # }
//! ```

pub mod audit;
mod auth;
mod authorizing;
mod catalog;
mod config_service;
mod console_sessions;
mod discovery;
mod endpoint_frontend;
mod endpoints;
mod event_log;
mod events;
mod fleet;
mod gateway;
mod groups;
mod launcher;
pub mod metrics;
pub mod naming;
mod passwords;
mod runtime;
mod stats;
mod token_cache;
mod tool_lists;
mod tool_pins;

pub use self::metrics::EventMetrics;
pub use auth::{
    ApiKeySummary, AuthService, AuthServiceError, AuthSettings, CreateKeyRequest, Credentials,
    DEFAULT_API_KEY_HEADER, HeldRole, LockoutPolicy, POLICY_DECIDER_DEADLINE, PermissionCheckView,
    UserSummary,
};
pub use authorizing::{AuthorizedFrontend, caller_of, identity_of};
pub use catalog::{DEFAULT_PROBE_CONCURRENCY, NAME_SEPARATOR, ResolvedTool, ToolCatalog};
pub use config_service::{
    ConfigDiffView, ConfigService, ConfigServiceError, Environment, ReloadReport, ReloadTrigger,
    WATCH_DEBOUNCE,
};
pub use console_sessions::{
    ConsoleSession, ConsoleSessions, OpenedSession, PENDING_SIGN_IN_LIFETIME, SessionError,
    SessionSettings, SignInMethod,
};
pub use discovery::{
    ApprovalView, CompositeSourceFactory, DiscoveryService, DiscoverySettings, RejectionView,
    ScanReport, SourceRequest, SourceView, discovery_sources_from_config,
};
pub use endpoint_frontend::{
    EndpointFrontend, FIND_TOOLS, find_tools_definition, search as search_tools,
};
pub use endpoints::{EndpointError, EndpointService, EndpointTool, Resolved};
pub use event_log::{MIN_COMPACTION_PERIOD, run_event_log_compaction};
pub use events::EventBus;
pub use fleet::{Fleet, FleetSettings, LEASE_DISCOVERY, LEASE_EVENT_LOG_COMPACTION};
pub use gateway::{DEFAULT_HISTORY_PER_SERVER, Gateway, GatewayInfo};
pub use groups::{
    GroupService, GroupServiceError, GroupUpdate, GroupView, MemberView, SeededRandom,
    group_spec_from_config,
};
pub use launcher::{CompositeLauncher, StdioLauncher};
pub use naming::ToolNaming;
pub use passwords::{
    PASSWORD_HASH_MAX_ITERATIONS, PASSWORD_HASH_MAX_MEMORY_KIB, PASSWORD_HASH_MAX_PARALLELISM,
    PasswordHashing,
};
pub use runtime::{
    OsSecrets, TokioClock, TokioSpawner, spawn_maintenance, spawn_rate_limit_eviction,
};
pub use stats::{CALL_DURATION_WINDOW, CallStats, CallStatsSnapshot};
pub use tool_lists::{RestoreReport, ToolListKeeper};
pub use tool_pins::{PinVerdict, ToolPinError, ToolPinView, ToolPins};

pub use mcpgw_authz as authz;
pub use mcpgw_config as config;
pub use mcpgw_core as core;
pub use mcpgw_discovery as discovery_domain;
pub use mcpgw_groups as groups_domain;
