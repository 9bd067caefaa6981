//! [`GatewayBuilder`]: the one place that knows the order in which the gateway is put together.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::data_dir::OpeningDataDir;
use crate::running::{ClosingEventLog, Parts, RunningGateway};
use crate::{StartError, docker, settings};
use mcpgw_config::GatewayConfig;
use mcpgw_core::{
    Clock, EventLog, EventSink, LaunchMode, ManagerSettings, McpFrontend, ServerLauncher,
    ServerManager, ServerRepository, ToolListStore,
};
use mcpgw_gateway::authz::{
    AuthStore, PolicyDecider, RateLimitFailMode, RateLimiter, TokenVerifier, UserStore,
};
use mcpgw_gateway::discovery_domain::{DiscoverySourceFactory, DiscoveryStore};
use mcpgw_gateway::groups_domain::GroupRepository;
use mcpgw_gateway::{
    AuthService, AuthSettings, AuthorizedFrontend, CallStats, CompositeLauncher,
    CompositeSourceFactory, ConfigService, DiscoveryService, DiscoverySettings, Environment,
    EventBus, Fleet, FleetSettings, Gateway, GatewayInfo, GroupService, StdioLauncher, TokioClock,
    TokioSpawner, ToolCatalog, ToolListKeeper, ToolPins,
};
use mcpgw_runner_docker::{DockerRunner, DockerRunnerSettings};

/// How long a stopping server gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Puts a gateway together: the default adapters (SQLite under the data directory, local
/// processes, containers, remote servers, rmcp, OIDC, OPA, token buckets), each replaceable
/// with a `with_*` method, wired in the one order that works; then loads what the
/// configuration and the stores hold and starts the background work.
///
/// ```
/// use mcpgw_server::GatewayBuilder;
///
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let data = tempfile::tempdir()?;
/// let running = GatewayBuilder::new(Default::default())
///     .data_dir(data.path())
///     .build()
///     .await?;
/// assert!(running.gateway().servers().list(None).is_empty());
/// // Every managed server is stopped, the event log written out.
/// running.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub struct GatewayBuilder {
    config: GatewayConfig,
    config_file: Option<PathBuf>,
    /// The file's text as it was parsed, when the builder read the file itself.
    config_text: Option<String>,
    data_dir: PathBuf,
    environment: Environment,
    version: String,
    clock: Option<Arc<dyn Clock>>,
    server_repository: Option<Arc<dyn ServerRepository>>,
    group_repository: Option<Arc<dyn GroupRepository>>,
    auth_store: Option<Arc<dyn AuthStore>>,
    user_store: Option<Arc<dyn UserStore>>,
    discovery_store: Option<Arc<dyn DiscoveryStore>>,
    tool_list_store: Option<Arc<dyn ToolListStore>>,
    tool_pin_store: Option<Arc<dyn mcpgw_core::ToolPinStore>>,
    endpoint_repository: Option<Arc<dyn mcpgw_core::EndpointRepository>>,
    event_log: Option<Arc<dyn EventLog>>,
    launcher: Option<Arc<dyn ServerLauncher>>,
    rate_limiter: Option<Arc<dyn RateLimiter>>,
    discovery_sources: Arc<dyn DiscoverySourceFactory>,
    launch_modes: Vec<(LaunchMode, Arc<dyn ServerLauncher>)>,
    token_verifier: Option<Arc<dyn TokenVerifier>>,
    policy_decider: Option<Arc<dyn PolicyDecider>>,
    observers: Vec<Arc<dyn mcpgw_core::EventObserver>>,
    audit_sinks: Vec<Arc<dyn mcpgw_core::audit::AuditSink>>,
    opening: Option<OpeningDataDir>,
}

impl std::fmt::Debug for GatewayBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayBuilder")
            .field("config_file", &self.config_file)
            .field("data_dir", &self.data_dir)
            .finish_non_exhaustive()
    }
}

impl GatewayBuilder {
    /// A gateway that runs `config`, with every default adapter, its data under `./data`,
    /// and the process environment for `${VAR}`, rate-limit and CORS overrides.
    pub fn new(config: GatewayConfig) -> Self {
        Self {
            config,
            config_file: None,
            config_text: None,
            data_dir: PathBuf::from("./data"),
            environment: crate::process_environment(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            clock: None,
            server_repository: None,
            group_repository: None,
            auth_store: None,
            user_store: None,
            discovery_store: None,
            tool_list_store: None,
            tool_pin_store: None,
            endpoint_repository: None,
            event_log: None,
            launcher: None,
            rate_limiter: None,
            discovery_sources: Arc::new(default_discovery_sources()),
            launch_modes: Vec::new(),
            token_verifier: None,
            policy_decider: None,
            observers: Vec::new(),
            audit_sinks: Vec::new(),
            opening: None,
        }
    }

    /// The configuration the gateway will run.
    pub fn configuration(&self) -> &GatewayConfig {
        &self.config
    }

    /// A gateway that runs the configuration file at `path` (validated as
    /// [`crate::load_config_file`] does, `${VAR}` from `environment`), and can reload, back up
    /// and compare it later. Without `path`, `./gateway.yaml` when it exists, else an empty
    /// configuration, as the bundled server starts. A file that names launch modes or
    /// discovery source types of one's own is read with [`GatewayBuilder::read_config_file`]
    /// after they are registered.
    pub fn for_config_file(
        path: Option<&std::path::Path>,
        environment: Environment,
    ) -> Result<Self, StartError> {
        let builder = Self::new(GatewayConfig::default()).environment(environment);
        match crate::default_config_path(path) {
            None => Ok(builder),
            Some(path) => builder.read_config_file(path),
        }
    }

    /// Reads the configuration file at `path` (`${VAR}` from the builder's environment) with
    /// the launch modes and discovery source types registered so far, and runs it: register
    /// them first. Reload, backup and diff work on the file later. The error names the file,
    /// and every line and key at fault.
    pub fn read_config_file(self, path: impl Into<PathBuf>) -> Result<Self, StartError> {
        let path = path.into();
        let modes: Vec<LaunchMode> = self
            .launch_modes
            .iter()
            .map(|(mode, _)| mode.clone())
            .collect();
        let (config, text) = crate::config_file::read_config_file(
            &path,
            &self.environment,
            self.discovery_sources.as_ref(),
            &modes,
        )
        .map_err(|error| StartError::new(format!("the gateway cannot start: {error}")))?;
        let mut builder = Self { config, ..self }.config_file(path);
        builder.config_text = Some(text);
        Ok(builder)
    }

    /// The file the configuration came from: reload, backup, diff and the file watcher work
    /// on it. Without it those answer that there is no file.
    pub fn config_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.config_file = Some(path.into());
        // The text to compare against is read at build time, unless this path was just read.
        self.config_text = None;
        self
    }

    /// Where the default stores keep their files (`mcpgw.db`, `events.db`) and the gateway
    /// its instance id; made when missing.
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = dir.into();
        self.opening = None;
        self
    }

    /// Stores data under the directory `opening` opens (as [`GatewayBuilder::data_dir`]), and
    /// uses the databases it has been opening meanwhile for the ports not replaced.
    pub fn opening_data_dir(mut self, opening: OpeningDataDir) -> Self {
        self.data_dir = opening.dir().to_owned();
        self.opening = Some(opening);
        self
    }

    /// Where variables come from: `${VAR}` in reloaded files, `MCP_RATE_LIMIT_RPS`,
    /// `MCP_RATE_LIMIT_BURST`, `MCP_CORS_*`, `MCP_HTTP_WORKERS`. The process environment by
    /// default.
    pub fn environment(mut self, environment: Environment) -> Self {
        self.environment = environment;
        self
    }

    /// The version `/api/system` and the OpenAPI document report; this crate's by default.
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// Replaces the clock (tokio's by default).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Replaces where servers created over the API are kept (SQLite by default).
    pub fn with_server_repository(mut self, repository: Arc<dyn ServerRepository>) -> Self {
        self.server_repository = Some(repository);
        self
    }

    /// Replaces where groups created over the API are kept (SQLite by default).
    pub fn with_group_repository(mut self, repository: Arc<dyn GroupRepository>) -> Self {
        self.group_repository = Some(repository);
        self
    }

    /// Replaces where API keys, custom roles, assignments and tool policies are kept (SQLite by
    /// default).
    pub fn with_auth_store(mut self, store: Arc<dyn AuthStore>) -> Self {
        self.auth_store = Some(store);
        self
    }

    /// Replaces where local users (name and password hash) are kept: SQLite by default, next
    /// to the keys; with the auth store replaced and no user store given, there are no local
    /// users.
    pub fn with_user_store(mut self, store: Arc<dyn UserStore>) -> Self {
        self.user_store = Some(store);
        self
    }

    /// Replaces where discovery keeps approvals and rejections (SQLite by default).
    pub fn with_discovery_store(mut self, store: Arc<dyn DiscoveryStore>) -> Self {
        self.discovery_store = Some(store);
        self
    }

    /// Replaces where learned tool lists are kept across restarts (SQLite by default).
    pub fn with_tool_list_store(mut self, store: Arc<dyn ToolListStore>) -> Self {
        self.tool_list_store = Some(store);
        self
    }

    /// Replaces where the tool pin ledger is kept (SQLite by default).
    pub fn with_tool_pin_store(mut self, store: Arc<dyn mcpgw_core::ToolPinStore>) -> Self {
        self.tool_pin_store = Some(store);
        self
    }

    /// Replaces where the curated endpoints created over the API are kept (SQLite by default).
    pub fn with_endpoint_repository(
        mut self,
        repository: Arc<dyn mcpgw_core::EndpointRepository>,
    ) -> Self {
        self.endpoint_repository = Some(repository);
        self
    }

    /// Replaces the persistent event log (SQLite in its own file by default). It observes
    /// every event, answers the history and the event queries, and is compacted as the
    /// `event_log` section says.
    pub fn with_event_log(mut self, log: Arc<dyn EventLog>) -> Self {
        self.event_log = Some(log);
        self
    }

    /// Replaces how servers are launched. The default runs `subprocess` servers as local
    /// processes, `docker` servers as containers, and connects to `remote` servers.
    pub fn with_launcher(mut self, launcher: Arc<dyn ServerLauncher>) -> Self {
        self.launcher = Some(launcher);
        self
    }

    /// Replaces the rate limiter (token buckets, as the `rate_limit` section and the
    /// environment say, by default).
    pub fn with_rate_limiter(mut self, limiter: Arc<dyn RateLimiter>) -> Self {
        self.rate_limiter = Some(limiter);
        self
    }

    /// Replaces the discovery source types (`docker` and `filesystem` by default). The
    /// configuration file ([`GatewayBuilder::read_config_file`], called after this), reloads
    /// and sources added over the API accept the factory's types.
    pub fn with_discovery_sources(mut self, sources: Arc<dyn DiscoverySourceFactory>) -> Self {
        self.discovery_sources = sources;
        self
    }

    /// Registers a launch mode besides `subprocess`, `docker` and `remote`: definitions with
    /// `mode: <its name>` (from the file, over REST, from discovery) are accepted when `mode`'s
    /// check passes their `settings`, and `launcher` starts them. Register before
    /// [`GatewayBuilder::read_config_file`]. Registering a name again replaces the earlier one.
    pub fn with_launch_mode(mut self, mode: LaunchMode, launcher: Arc<dyn ServerLauncher>) -> Self {
        self.launch_modes
            .retain(|(known, _)| known.name() != mode.name());
        self.launch_modes.push((mode, launcher));
        self
    }

    /// What definitions may name beyond the schema: the discovery source types and launch
    /// modes registered so far.
    pub fn parse_options(&self) -> mcpgw_config::ParseOptions {
        let modes = self.launch_modes.iter().map(|(mode, _)| mode.clone());
        mcpgw_config::ParseOptions::with_discovery_source_types(
            self.discovery_sources.source_types(),
        )
        .with_launch_modes(modes)
    }

    /// Replaces the bearer-token verifier (OIDC, when `auth.oidc.enabled`, by default).
    pub fn with_token_verifier(mut self, verifier: Arc<dyn TokenVerifier>) -> Self {
        self.token_verifier = Some(verifier);
        self
    }

    /// Replaces the external policy engine (OPA, when `auth.opa.enabled`, by default).
    pub fn with_policy_decider(mut self, decider: Arc<dyn PolicyDecider>) -> Self {
        self.policy_decider = Some(decider);
        self
    }

    /// Adds an observer of every domain event, after the gateway's own.
    pub fn with_observer(mut self, observer: Arc<dyn mcpgw_core::EventObserver>) -> Self {
        self.observers.push(observer);
        self
    }

    /// Adds a sink of audit records, besides those of the `audit` section: it receives the same
    /// events (the section's `event_types`, the security events by default) through a queue
    /// of its own, and is flushed at shutdown.
    pub fn with_audit_sink(mut self, sink: Arc<dyn mcpgw_core::audit::AuditSink>) -> Self {
        self.audit_sinks.push(sink);
        self
    }

    /// Puts the gateway together on the current tokio runtime, loads the servers, groups,
    /// discovery sources and auth records of the configuration and the stores, and starts the
    /// background work (health checks, idle reaping, restarts, group recovery, discovery
    /// scans, the file watcher, rate-limit bucket eviction, event-log compaction). Nothing
    /// listens yet: serve it with [`RunningGateway::serve_http`] or
    /// [`RunningGateway::serve_stdio`], or mount [`RunningGateway::http_state`] in an
    /// application of one's own. Stop it with [`RunningGateway::shutdown`].
    ///
    /// The tasks run on the runtime this is called on; it should be a multi-threaded one
    /// (the bundled server gives the gateway a runtime of its own, apart from the HTTP
    /// workers).
    pub async fn build(self) -> Result<RunningGateway, StartError> {
        let parts = self.assemble().await?;
        parts.load().await?;
        Ok(RunningGateway::start(parts))
    }

    async fn assemble(self) -> Result<Parts, StartError> {
        let runtime = tokio::runtime::Handle::current();
        let parse_options = self.parse_options();
        let config = self.config;
        let data_dir = self.data_dir;
        // The event log is opened on a thread of its own while the store opens here (each
        // waits on the disk for milliseconds), unless the bundled server started both before it
        // read the configuration. A file whose ports are all replaced is not opened at all.
        let mut opening = match self.opening {
            Some(opening) => opening,
            None => OpeningDataDir::start_with(
                data_dir.clone(),
                false,
                self.event_log.is_none() && config.store.is_none(),
            )?,
        };
        opening.hand_over();
        // With a `store` section every default store is the shared PostgreSQL database, and
        // this gateway is one replica of the fleet that shares it.
        let shared = match &config.store {
            Some(section) => {
                opening.discard_databases();
                let store = crate::cluster::connect(section).await?;
                let replica_id = crate::cluster::replica_id(&config.cluster, &data_dir)?;
                Some((store, replica_id))
            }
            None => None,
        };
        let shared_store = shared.as_ref().map(|(store, _)| store.clone());

        let clock: Arc<dyn Clock> = self
            .clock
            .unwrap_or_else(|| Arc::new(TokioClock::default()));
        let default_auth_store = self.auth_store.is_none();
        let auth_store: Arc<dyn AuthStore> = match (self.auth_store, &shared_store) {
            (Some(store), _) => store,
            (None, Some(shared)) => Arc::new(shared.clone()),
            (None, None) => Arc::new(opening.store()?),
        };
        let user_store: Option<Arc<dyn UserStore>> = match (self.user_store, &shared_store) {
            (Some(store), _) => Some(store),
            (None, Some(shared)) if default_auth_store => Some(Arc::new(shared.clone())),
            (None, None) if default_auth_store => Some(Arc::new(opening.store()?)),
            (None, _) => None,
        };
        // Every event is kept in the persistent log (its own file, so that its writes never
        // wait on the store's, or the shared database), and ids continue after the last one it
        // holds.
        let (event_log, closing_event_log): (Arc<dyn EventLog>, Option<ClosingEventLog>) =
            match (self.event_log, &shared) {
                (Some(log), _) => (log, None),
                (None, Some((store, replica_id))) => {
                    let log = Arc::new(
                        mcpgw_store_postgres::PostgresEventLog::open(store, replica_id.clone())
                            .await
                            .map_err(|error| {
                                StartError::new(format!(
                                    "cannot open the event log in the shared store: {error}"
                                ))
                            })?,
                    );
                    (log.clone(), Some(ClosingEventLog::Postgres(log)))
                }
                (None, None) => {
                    let log = Arc::new(opening.event_log()?);
                    (log.clone(), Some(ClosingEventLog::Sqlite(log)))
                }
            };
        let last_event_id = event_log
            .last_event_id()
            .await
            .map_err(|error| StartError::new(format!("cannot read the event log: {error}")))?;
        let events =
            Arc::new(EventBus::new(EventBus::DEFAULT_CAPACITY).continuing_after(last_event_id));
        events.add_observer(event_log.clone());
        // Security events go to the audit sinks as they happen. Only this gateway's own events
        // reach its bus (other replicas' come through the shared log's feed), so in a fleet
        // each event is exported once, by the replica that published it.
        let audit = crate::audit::start(
            &config,
            self.audit_sinks,
            shared.as_ref().map(|(_, replica_id)| replica_id.clone()),
            &self.environment,
        )?;
        if let Some(exporter) = &audit {
            events.add_observer(exporter.observer());
        }

        let auth = build_auth(
            &config,
            auth_store.clone(),
            events.clone(),
            clock.clone(),
            self.token_verifier,
            self.policy_decider,
        )?;
        let auth = Arc::new(match user_store {
            Some(users) => auth.with_user_store(users),
            None => auth,
        });

        let (launcher, docker_runner) = match self.launcher {
            Some(launcher) => (CompositeLauncher::new().otherwise(launcher), None),
            None => {
                let runner = Arc::new(DockerRunner::new(DockerRunnerSettings::new(
                    crate::instance_id(&data_dir)?,
                )));
                (default_launcher(runner.clone()), Some(runner))
            }
        };
        // Registered modes go through the same dispatch by name as the built-in ones.
        let launcher = self
            .launch_modes
            .into_iter()
            .fold(launcher, |launcher, (mode, mode_launcher)| {
                launcher.with_mode(mode.name(), mode_launcher)
            });
        let server_repository: Arc<dyn ServerRepository> =
            match (self.server_repository, &shared_store) {
                (Some(repository), _) => repository,
                (None, Some(shared)) => Arc::new(shared.clone()),
                (None, None) => Arc::new(opening.store()?),
            };
        let manager = ServerManager::new(
            Arc::new(launcher),
            clock.clone(),
            events.clone() as Arc<dyn EventSink>,
            Arc::new(TokioSpawner::new(runtime.clone())),
            Some(server_repository),
            ManagerSettings {
                call_timeout: Duration::from_secs(config.tool_timeout_s),
                ..ManagerSettings::default()
            },
        );
        // No engine is looked for until a docker-mode server exists.
        if let Some(runner) = docker_runner {
            events.add_observer(Arc::new(docker::LeftoverSweep {
                servers: manager.downgrade(),
                runner,
                runtime: runtime.clone(),
            }));
        }

        let group_repository: Arc<dyn GroupRepository> =
            match (self.group_repository, &shared_store) {
                (Some(repository), _) => repository,
                (None, Some(shared)) => Arc::new(shared.clone()),
                (None, None) => Arc::new(opening.store()?),
            };
        let groups = Arc::new(
            GroupService::new(manager.clone(), events.clone() as Arc<dyn EventSink>)
                .with_repository(group_repository),
        );
        events.add_observer(groups.observer());

        let catalog =
            ToolCatalog::with_groups(manager.clone(), config.tool_names.clone(), groups.clone());
        // Tool names two owners would share are told on the bus.
        catalog.set_events(events.clone() as Arc<dyn EventSink>);
        // No probe before the kept tool lists are restored (see `Parts::load`): a server whose
        // list is kept must not be started to learn it again.
        catalog.set_probing(false);
        catalog.set_probe_concurrency(
            usize::try_from(config.probe_concurrency)
                .unwrap_or(mcpgw_gateway::DEFAULT_PROBE_CONCURRENCY),
        );
        events.add_observer(catalog.observer());
        let tool_list_store: Arc<dyn ToolListStore> = match (self.tool_list_store, &shared_store) {
            (Some(store), _) => store,
            (None, Some(shared)) => Arc::new(mcpgw_store_postgres::PostgresToolListStore::new(
                shared.clone(),
            )),
            (None, None) => Arc::new(mcpgw_store_sqlite::SqliteToolListStore::new(
                opening.store()?,
            )),
        };
        let tool_lists = ToolListKeeper::new(manager.clone(), tool_list_store);
        events.add_observer(tool_lists.observer());
        let tool_pin_store: Arc<dyn mcpgw_core::ToolPinStore> =
            match (self.tool_pin_store, &shared_store) {
                (Some(store), _) => store,
                (None, Some(shared)) => Arc::new(mcpgw_store_postgres::PostgresToolPinStore::new(
                    shared.clone(),
                )),
                (None, None) => Arc::new(mcpgw_store_sqlite::SqliteToolPinStore::new(
                    opening.store()?,
                )),
            };
        let endpoint_repository: Arc<dyn mcpgw_core::EndpointRepository> =
            match (self.endpoint_repository, &shared_store) {
                (Some(repository), _) => repository,
                (None, Some(shared)) => Arc::new(
                    mcpgw_store_postgres::PostgresEndpointRepository::new(shared.clone()),
                ),
                (None, None) => Arc::new(mcpgw_store_sqlite::SqliteEndpointRepository::new(
                    opening.store()?,
                )),
            };
        let endpoints = Arc::new(
            mcpgw_gateway::EndpointService::new(
                events.clone() as Arc<dyn EventSink>,
                clock.clone(),
            )
            .with_repository(endpoint_repository),
        );
        endpoints.set_catalog(catalog.clone());
        // Set on the catalogue once the ledger is loaded (see `Parts::load`): a review against
        // an empty ledger would pin every list afresh.
        let tool_pins = ToolPins::new(
            tool_pin_store,
            events.clone() as Arc<dyn EventSink>,
            clock.clone(),
            config.tool_pinning,
        );
        let call_stats = Arc::new(CallStats::new());
        events.add_observer(call_stats.clone());
        events.add_observer(Arc::new(
            mcpgw_gateway::EventMetrics::new().with_max_tool_labels(
                usize::try_from(config.telemetry.metrics.max_tool_labels).unwrap_or(usize::MAX),
            ),
        ));
        for observer in self.observers {
            events.add_observer(observer);
        }
        let rate_limiter: Arc<dyn RateLimiter> = match self.rate_limiter {
            Some(limiter) => limiter,
            None => {
                let policy = settings::rate_limit_policy(&config, &self.environment)?;
                match config.rate_limit.redis_backend() {
                    // One limit for the whole fleet, kept in Redis.
                    Some(redis) if policy.is_enabled() => {
                        let settings = mcpgw_ratelimit_redis::RedisSettings {
                            url: redis.url.clone(),
                            timeout: redis.timeout(),
                            on_unavailable: if redis.fails_closed() {
                                RateLimitFailMode::Closed
                            } else {
                                RateLimitFailMode::Open
                            },
                        };
                        Arc::new(
                            mcpgw_ratelimit_redis::RedisRateLimiter::connect(settings, policy)
                                .await
                                .map_err(|error| {
                                    StartError::new(format!("rate_limit.redis: {error}"))
                                })?,
                        )
                    }
                    _ => Arc::new(mcpgw_ratelimit::TokenBuckets::new(policy)),
                }
            }
        };
        // Over HTTP, what a caller may list and call follows its permissions and the tool
        // access policies (a no-op while auth is off), and tool calls count against rate
        // limits.
        let frontend: Arc<dyn McpFrontend> = AuthorizedFrontend::with_rate_limiter(
            catalog.clone(),
            auth.clone(),
            rate_limiter.clone(),
        );

        let replica = shared.map(|(store, replica_id)| crate::cluster::Replica {
            fleet: Arc::new(Fleet::new(
                FleetSettings {
                    replica_id,
                    version: self.version.clone(),
                    heartbeat_interval: Duration::from_secs(config.cluster.heartbeat_interval_s),
                    lease_ttl: Duration::from_secs(config.cluster.lease_s),
                },
                clock.wall(),
                Arc::new(store.clone()),
                manager.clone(),
            )),
            store,
            resync_interval: Duration::from_secs(config.cluster.resync_interval_s),
        });
        let gateway = Gateway::new(
            manager,
            GatewayInfo {
                version: self.version,
                config_path: self
                    .config_file
                    .as_ref()
                    .map(|path| path.display().to_string()),
            },
        )
        .with_event_log(event_log.clone())
        .with_call_stats(call_stats)
        .with_frontend(frontend.clone())
        .with_tool_catalog(catalog.clone())
        .with_groups(groups.clone())
        .with_tool_names(config.tool_names.clone())
        .with_tool_pins(tool_pins.clone())
        .with_endpoints(endpoints.clone());
        let gateway = match &replica {
            Some(replica) => gateway.with_fleet(replica.fleet.clone()),
            None => gateway,
        };
        let sources = self.discovery_sources;
        // Without a `discovery` block there is no discovery at all (its API answers 404).
        let discovery = match &config.discovery {
            None => None,
            Some(section) => {
                let sources = Arc::clone(&sources);
                let discovery_store: Arc<dyn DiscoveryStore> =
                    match (self.discovery_store, &shared_store) {
                        (Some(store), _) => store,
                        (None, Some(shared)) => Arc::new(
                            mcpgw_store_postgres::PostgresDiscoveryStore::new(shared.clone()),
                        ),
                        (None, None) => Arc::new(mcpgw_store_sqlite::SqliteDiscoveryStore::new(
                            opening.store()?,
                        )),
                    };
                Some(Arc::new(
                    DiscoveryService::new(
                        gateway.servers().clone(),
                        sources,
                        events.clone() as Arc<dyn EventSink>,
                        DiscoverySettings {
                            refresh_interval: Duration::from_secs(section.refresh_interval_s),
                        },
                    )
                    .with_store(discovery_store)
                    .with_groups(groups.clone())
                    .with_parse_options(parse_options.clone()),
                ))
            }
        };
        let gateway = match &discovery {
            Some(discovery) => gateway.with_discovery(discovery.clone()),
            None => gateway,
        };
        // Configuration management: the running configuration, and reload, backup and diff
        // against the file it came from (those answer 409 without one).
        let mut config_service = ConfigService::new(
            gateway.servers().clone(),
            events.clone() as Arc<dyn EventSink>,
            self.environment.clone(),
            config.clone(),
        )
        .with_groups(groups.clone())
        .with_endpoints(endpoints.clone())
        // A reloaded file and REST bodies may name the source types and launch modes this
        // gateway can build.
        .with_parse_options(parse_options);
        if let Some(path) = &self.config_file {
            let text = match self.config_text {
                Some(text) => text,
                None => std::fs::read_to_string(path).map_err(|error| {
                    StartError::new(format!(
                        "cannot read the configuration file {}: {error}",
                        path.display()
                    ))
                })?,
            };
            config_service = config_service.with_file(
                Arc::new(mcpgw_config_file::FileConfig::new(path.clone())),
                text,
            );
        }
        let config_service = Arc::new(config_service);
        let gateway = gateway.with_config(config_service.clone());
        let console = console(&config, clock.clone())?;
        let fleet_secret = settings::fleet_secret(&config, &self.environment)?;
        Ok(Parts {
            console,
            config,
            environment: self.environment,
            runtime,
            clock,
            gateway,
            catalog,
            tool_lists,
            tool_pins,
            endpoints,
            frontend,
            groups,
            events,
            auth,
            auth_store,
            event_log,
            closing_event_log,
            replica,
            fleet_secret,
            rate_limiter,
            discovery,
            config_service,
            audit,
        })
    }
}

/// The discovery source types of the bundled server: `docker` (the Docker Engine API) and
/// `filesystem` (a directory of YAML definitions).
pub fn default_discovery_sources() -> CompositeSourceFactory {
    CompositeSourceFactory::new()
        .with(Arc::new(mcpgw_runner_docker::DockerSourceFactory))
        .with(Arc::new(
            mcpgw_discovery_files::FilesystemSourceFactory::new(),
        ))
}

/// The launcher of the bundled server: local processes for `subprocess`, containers on
/// `runner` for `docker` (both speaking MCP over stdio through rmcp), and Streamable HTTP for
/// `remote`.
fn default_launcher(runner: Arc<DockerRunner>) -> CompositeLauncher {
    let processes = Arc::new(mcpgw_runner_process::ProcessRunner::new(
        mcpgw_runner_process::ProcessRunnerSettings::default(),
    ));
    let connector = Arc::new(mcpgw_mcp_rmcp::RmcpStdioConnector::new(
        mcpgw_mcp_rmcp::StdioConnectorSettings::default(),
    ));
    let stdio = Arc::new(StdioLauncher::new(processes, connector.clone(), STOP_GRACE));
    let containers = Arc::new(StdioLauncher::new(
        runner as Arc<dyn mcpgw_core::ProcessSpawner>,
        connector,
        STOP_GRACE,
    ));
    let remote = Arc::new(mcpgw_mcp_rmcp::RemoteLauncher::new(
        mcpgw_mcp_rmcp::RemoteSettings::default(),
    ));
    CompositeLauncher::new()
        .with_mode("subprocess", stdio)
        .with_mode("docker", containers)
        .with_mode("remote", remote)
}

/// The bearer-token verifier of the `auth` section: one verifier per trusted issuer
/// (`auth.oauth.issuers`, then `auth.oidc` when enabled), or none.
fn token_verifier(
    section: &mcpgw_config::AuthConfig,
) -> Result<Option<Arc<dyn TokenVerifier>>, StartError> {
    let mut verifiers = Vec::new();
    for (index, issuer) in section.oauth.issuers.iter().enumerate() {
        let mut settings = mcpgw_oidc::OidcSettings::for_resource(issuer.issuer.clone());
        settings.audience.clone_from(&issuer.audience);
        settings.jwks_uri.clone_from(&issuer.jwks_uri);
        settings.subject_claim.clone_from(&issuer.subject_claim);
        settings.groups_claim.clone_from(&issuer.groups_claim);
        settings.tenant_claim.clone_from(&issuer.tenant_claim);
        settings.scope_claim.clone_from(&issuer.scope_claim);
        settings.leeway = std::time::Duration::from_secs(issuer.clock_skew_s);
        let mut scopes = mcpgw_gateway::authz::ScopeMap::new();
        for (scope, role) in &issuer.scopes {
            let role = mcpgw_gateway::authz::RoleName::parse(role).map_err(|error| {
                StartError::new(format!(
                    "auth.oauth.issuers[{index}].scopes.{scope}: {error}"
                ))
            })?;
            scopes = scopes.with_role(scope.clone(), role);
        }
        settings.scopes = Some(scopes);
        let verifier = mcpgw_oidc::OidcVerifier::new(settings)
            .map_err(|error| StartError::new(format!("auth.oauth.issuers[{index}]: {error}")))?;
        verifiers.push(verifier);
    }
    if section.oidc.enabled {
        let issuer = required(&section.oidc.issuer, "auth.oidc.issuer", "auth.oidc")?;
        let audience = required(&section.oidc.audience, "auth.oidc.audience", "auth.oidc")?;
        let mut oidc = mcpgw_oidc::OidcSettings::new(issuer, audience);
        oidc.jwks_uri.clone_from(&section.oidc.jwks_uri);
        oidc.subject_claim.clone_from(&section.oidc.subject_claim);
        oidc.groups_claim.clone_from(&section.oidc.groups_claim);
        oidc.tenant_claim.clone_from(&section.oidc.tenant_claim);
        let verifier = mcpgw_oidc::OidcVerifier::new(oidc)
            .map_err(|error| StartError::new(format!("auth.oidc: {error}")))?;
        verifiers.push(verifier);
    }
    Ok(match verifiers.len() {
        0 => None,
        1 => verifiers
            .pop()
            .map(|verifier| Arc::new(verifier) as Arc<dyn TokenVerifier>),
        _ => Some(Arc::new(
            mcpgw_oidc::IssuerSet::new(verifiers)
                .map_err(|error| StartError::new(format!("auth: {error}")))?,
        )),
    })
}

/// Authentication and authorization as the `auth` section says: API keys and the rest in
/// `store`, bearer tokens from an OIDC issuer, an OPA policy engine; a verifier or decider
/// handed to the builder wins over the section's.
fn build_auth(
    config: &GatewayConfig,
    store: Arc<dyn AuthStore>,
    events: Arc<EventBus>,
    clock: Arc<dyn Clock>,
    verifier: Option<Arc<dyn TokenVerifier>>,
    decider: Option<Arc<dyn PolicyDecider>>,
) -> Result<AuthService, StartError> {
    let section = &config.auth;
    let settings = AuthSettings::from_config(section)
        .map_err(|error| StartError::new(format!("the auth section is invalid: {error}")))?;
    let mut auth = AuthService::new(
        settings,
        store,
        events as Arc<dyn EventSink>,
        clock,
        Arc::new(mcpgw_gateway::OsSecrets),
    );
    let verifier = match verifier {
        Some(verifier) => Some(verifier),
        None if section.enabled => token_verifier(section)?,
        None => None,
    };
    if let Some(verifier) = verifier {
        auth = auth.with_token_verifier(verifier);
    }
    let decider = match decider {
        Some(decider) => Some(decider),
        None if section.enabled && section.opa.enabled => {
            let url = required(&section.opa.url, "auth.opa.url", "auth.opa")?;
            let path = required(&section.opa.policy_path, "auth.opa.policy_path", "auth.opa")?;
            let decider =
                mcpgw_policy_opa::OpaDecider::new(&mcpgw_policy_opa::OpaSettings::new(url, path))
                    .map_err(|error| StartError::new(format!("auth.opa: {error}")))?;
            Some(Arc::new(decider) as Arc<dyn PolicyDecider>)
        }
        None => None,
    };
    if let Some(decider) = decider {
        auth = auth.with_policy_decider(decider);
    }
    Ok(auth)
}

/// The web console of the `console` section: in-memory sessions of the configured lifetimes,
/// and single sign-on through `console.sso`, whose claims are read as the same issuer's bearer
/// tokens are (its `auth.oauth.issuers` entry, else `auth.oidc` when it names the issuer).
fn console(
    config: &GatewayConfig,
    clock: Arc<dyn Clock>,
) -> Result<Option<mcpgw_http_actix::Console>, StartError> {
    let section = &config.console;
    if !section.enabled {
        return Ok(None);
    }
    let sessions = mcpgw_gateway::ConsoleSessions::new(
        mcpgw_gateway::SessionSettings {
            idle: std::time::Duration::from_secs(section.session_idle_minutes * 60),
            absolute: std::time::Duration::from_secs(section.session_max_hours * 3600),
            ..mcpgw_gateway::SessionSettings::default()
        },
        clock,
        Arc::new(mcpgw_gateway::OsSecrets),
    );
    let console = mcpgw_http_actix::Console::new(sessions);
    let Some(sso) = &section.sso else {
        return Ok(Some(console));
    };
    let same_issuer =
        |issuer: &str| issuer.trim_end_matches('/') == sso.issuer.trim_end_matches('/');
    let (subject_claim, groups_claim, tenant_claim) = match config
        .auth
        .oauth
        .issuers
        .iter()
        .find(|issuer| same_issuer(&issuer.issuer))
    {
        Some(issuer) => (
            issuer.subject_claim.clone(),
            issuer.groups_claim.clone(),
            issuer.tenant_claim.clone(),
        ),
        None => {
            let oidc = &config.auth.oidc;
            (
                oidc.subject_claim.clone(),
                oidc.groups_claim.clone(),
                oidc.tenant_claim.clone(),
            )
        }
    };
    let provider = mcpgw_oidc::OidcSignIn::new(mcpgw_oidc::SignInSettings {
        issuer: sso.issuer.clone(),
        client_id: sso.client_id.clone(),
        client_secret: sso.client_secret.clone(),
        scopes: sso.scopes.clone(),
        subject_claim,
        groups_claim,
        tenant_claim,
    })
    .map_err(|error| StartError::new(format!("console.sso: {error}")))?;
    Ok(Some(console.with_sign_in(
        Arc::new(provider),
        sso.redirect_uri.clone(),
    )))
}

/// The value of a setting that `section` needs once enabled.
fn required(value: &Option<String>, key: &str, section: &str) -> Result<String, StartError> {
    value
        .clone()
        .ok_or_else(|| StartError::new(format!("{key} is required when {section}.enabled is true")))
}
