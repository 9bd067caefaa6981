//! Wiring of the adapters into a running gateway.

use std::io::Write as _;
use std::net::TcpListener;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use mcpgw_config::GatewayConfig;
use mcpgw_core::{
    Clock, DomainEvent, EventLog, EventObserver, EventSink, LaunchSpec, ManagerSettings,
    McpFrontend, PublishedEvent, ServerLauncher, ServerManager, ServerRepository, ServerSpec,
    WeakServerManager,
};
use mcpgw_gateway::groups_domain::GroupRepository;
use mcpgw_gateway::{
    AuthService, AuthSettings, AuthorizedFrontend, CallStats, CompositeLauncher,
    CompositeSourceFactory, ConfigService, DiscoveryService, DiscoverySettings, EventBus, Gateway,
    GatewayInfo, GroupService, StdioLauncher, TokioClock, TokioSpawner, ToolCatalog,
    ToolListKeeper,
};
use mcpgw_runner_docker::{DockerRunner, DockerRunnerSettings};

use crate::cli::Cli;

/// How long a stopping server gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(3);
/// How often health checks, idle reaping and restarts are considered.
const MAINTENANCE_PERIOD: Duration = Duration::from_secs(1);
/// How often idle rate-limit buckets are forgotten.
const BUCKET_EVICTION_PERIOD: Duration = Duration::from_secs(5);

/// Everything the gateway is made of, before it starts serving.
struct Assembled {
    gateway: Gateway,
    catalog: Arc<ToolCatalog>,
    tool_lists: Arc<ToolListKeeper>,
    frontend: Arc<dyn McpFrontend>,
    groups: Arc<GroupService>,
    events: Arc<EventBus>,
    auth: Arc<AuthService>,
    store: Arc<mcpgw_store_sqlite::SqliteStore>,
    event_log: Arc<mcpgw_store_sqlite::SqliteEventLog>,
    rate_limiter: Arc<dyn mcpgw_gateway::authz::RateLimiter>,
    discovery: Option<Arc<DiscoveryService>>,
    config_service: Arc<ConfigService>,
}

/// How often API keys are read again from the database, for keys that another process (the
/// `auth create-key` command) wrote while the gateway runs. Keys made over the API are in
/// memory at once.
const KEY_RELOAD_PERIOD: Duration = Duration::from_secs(5);

fn spawn_key_reload(store: Arc<mcpgw_store_sqlite::SqliteStore>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(KEY_RELOAD_PERIOD);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            ticker.tick().await;
            if let Err(error) = store.reload_api_keys().await {
                tracing::warn!(%error, "could not read the API keys again from the store");
            }
        }
    })
}

pub fn serve(cli: &Cli) -> anyhow::Result<ExitCode> {
    let (config, config_path) = crate::cli::startup_config(cli)?;
    if cli.http {
        refuse_any_origin_on_an_open_listener_without_auth(cli, &config)?;
        refuse_open_listener_without_auth(cli, &config)?;
    }

    // The domain's background work (starts, health checks, upstream I/O) runs on its own
    // runtime, so request handling on the HTTP workers never competes with it for a thread.
    let core_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(thread_count("MCP_CORE_THREADS", 2))
        .thread_name("mcpgw-core")
        .enable_all()
        .build()
        .context("cannot start the runtime")?;

    if cli.http {
        // Before anything runs, so that the starts and events of the boot count too.
        mcpgw_http_actix::install_metrics_recorder()
            .map_err(|error| anyhow::anyhow!("cannot install the metrics recorder: {error}"))?;
    }
    let assembled = assemble(cli, &config, config_path, core_runtime.handle())?;
    core_runtime.block_on(async {
        register_servers(&assembled.gateway, &config).await?;
        register_groups(&assembled.groups, &config).await?;
        // After the servers: those approved from discovery before are among them.
        if let (Some(discovery), Some(section)) = (&assembled.discovery, &config.discovery) {
            discovery
                .load(mcpgw_gateway::discovery_sources_from_config(section))
                .await
                .map_err(|error| anyhow::anyhow!("discovery: {error}"))?;
        }
        assembled
            .auth
            .load()
            .await
            .map_err(|error| anyhow::anyhow!("cannot load the auth store: {error}"))?;
        // Tool lists learned before the restart are served again where the server's definition
        // is unchanged; the others are probed. A store that cannot be read only costs probes.
        match assembled.tool_lists.restore().await {
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
        // Servers whose tools are still unknown are started once, in the background, to learn
        // them.
        assembled.catalog.set_probing(config.probe_tools);
        assembled.catalog.probe_unknown_tools();
        anyhow::Ok(())
    })?;
    let mut config_tasks = Vec::new();
    let (maintenance, group_recovery, key_reload, bucket_eviction, compaction) = {
        let _entered = core_runtime.enter();
        if let Some(discovery) = &assembled.discovery {
            discovery.start_scanning();
        }
        if let Some(watch) = assembled.config_service.spawn_watch() {
            config_tasks.push(watch);
        }
        config_tasks.push(spawn_reload_on_hangup(assembled.config_service.clone()));
        (
            mcpgw_gateway::spawn_maintenance(
                assembled.gateway.servers().clone(),
                MAINTENANCE_PERIOD,
            ),
            assembled.groups.spawn_recovery(MAINTENANCE_PERIOD),
            config
                .auth
                .enabled
                .then(|| spawn_key_reload(assembled.store.clone())),
            mcpgw_gateway::spawn_rate_limit_eviction(
                assembled.rate_limiter.clone(),
                BUCKET_EVICTION_PERIOD,
            ),
            tokio::spawn(mcpgw_gateway::run_event_log_compaction(
                assembled.event_log.clone(),
                config.event_log.retention(),
                assembled.gateway.servers().clock().clone(),
                config.event_log.compaction_interval(),
            )),
        )
    };

    let outcome = if cli.http {
        serve_http(cli, &config, &assembled)
    } else {
        core_runtime.block_on(serve_stdio(&assembled))
    };

    maintenance.abort();
    for task in config_tasks {
        task.abort();
    }
    group_recovery.abort();
    bucket_eviction.abort();
    compaction.abort();
    if let Some(key_reload) = key_reload {
        key_reload.abort();
    }
    // Every managed server is stopped before the process ends, so nothing is left behind.
    core_runtime.block_on(async {
        assembled.gateway.shutdown().await;
        // Tool lists learned since the last write are kept for the next start.
        assembled.tool_lists.flush().await;
        // The stop events of the shutdown are the log's last entries: write them before exiting.
        if let Err(error) = assembled.event_log.close().await {
            tracing::error!(%error, "the event log could not be written out at shutdown");
        }
    });
    core_runtime.shutdown_timeout(Duration::from_secs(1));
    outcome?;
    Ok(ExitCode::SUCCESS)
}

fn assemble(
    cli: &Cli,
    config: &GatewayConfig,
    config_path: Option<std::path::PathBuf>,
    runtime: &tokio::runtime::Handle,
) -> anyhow::Result<Assembled> {
    std::fs::create_dir_all(&cli.data_dir).with_context(|| {
        format!(
            "cannot create the data directory {}",
            cli.data_dir.display()
        )
    })?;
    let database = cli.data_dir.join("mcpgw.db");
    let store = Arc::new(
        mcpgw_store_sqlite::SqliteStore::open(&database)
            .with_context(|| format!("cannot open the store {}", database.display()))?,
    );

    let clock: Arc<dyn Clock> = Arc::new(TokioClock::default());
    // No engine is looked for until a docker-mode server exists (see `LeftoverSweep`).
    let docker = Arc::new(DockerRunner::new(DockerRunnerSettings::new(instance_id(
        &cli.data_dir,
    )?)));
    // Every event is kept in the persistent log (its own file, so that its writes never wait
    // on the store's), and ids continue after the last one it holds.
    let event_log_path = cli.data_dir.join("events.db");
    let event_log = Arc::new(
        mcpgw_store_sqlite::SqliteEventLog::open(&event_log_path)
            .with_context(|| format!("cannot open the event log {}", event_log_path.display()))?,
    );
    let last_event_id = runtime
        .block_on(event_log.last_event_id())
        .map_err(|error| anyhow::anyhow!("cannot read the event log: {error}"))?;
    let events =
        Arc::new(EventBus::new(EventBus::DEFAULT_CAPACITY).continuing_after(last_event_id));
    events.add_observer(event_log.clone());
    let auth = Arc::new(build_auth(
        config,
        store.clone(),
        events.clone(),
        clock.clone(),
    )?);
    let settings = ManagerSettings {
        call_timeout: Duration::from_secs(config.tool_timeout_s),
        ..ManagerSettings::default()
    };
    let manager = ServerManager::new(
        build_launcher(docker.clone()),
        clock.clone(),
        events.clone() as Arc<dyn EventSink>,
        Arc::new(TokioSpawner::new(runtime.clone())),
        Some(store.clone() as Arc<dyn ServerRepository>),
        settings,
    );
    events.add_observer(Arc::new(LeftoverSweep {
        servers: manager.downgrade(),
        runner: docker,
        runtime: runtime.clone(),
    }));

    let groups = Arc::new(
        GroupService::new(manager.clone(), events.clone() as Arc<dyn EventSink>)
            .with_repository(store.clone() as Arc<dyn GroupRepository>),
    );
    events.add_observer(groups.observer());

    let catalog = ToolCatalog::with_groups(manager.clone(), config.tool_names, groups.clone());
    // No probe before the kept tool lists are restored (see `serve`): a server whose list is
    // kept must not be started to learn it again.
    catalog.set_probing(false);
    catalog.set_probe_concurrency(
        usize::try_from(config.probe_concurrency)
            .unwrap_or(mcpgw_gateway::DEFAULT_PROBE_CONCURRENCY),
    );
    events.add_observer(catalog.observer());
    runtime.spawn(catalog.clone().run_change_notifier());
    let tool_lists = ToolListKeeper::new(
        manager.clone(),
        Arc::new(mcpgw_store_sqlite::SqliteToolListStore::new(
            (*store).clone(),
        )),
    );
    events.add_observer(tool_lists.observer());
    runtime.spawn(tool_lists.clone().run());
    let call_stats = Arc::new(CallStats::new());
    events.add_observer(call_stats.clone());
    events.add_observer(Arc::new(mcpgw_gateway::EventMetrics::new()));
    let rate_limiter: Arc<dyn mcpgw_gateway::authz::RateLimiter> = Arc::new(
        mcpgw_ratelimit::TokenBuckets::new(rate_limit_policy(config)?),
    );
    // Over HTTP, what a caller may list and call follows its permissions and the tool access
    // policies (a no-op while auth is off), and tool calls count against rate limits.
    let frontend: Arc<dyn McpFrontend> =
        AuthorizedFrontend::with_rate_limiter(catalog.clone(), auth.clone(), rate_limiter.clone());

    let gateway = Gateway::new(
        manager,
        GatewayInfo {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            config_path: config_path.as_ref().map(|path| path.display().to_string()),
        },
    )
    .with_event_log(event_log.clone())
    .with_call_stats(call_stats)
    .with_frontend(frontend.clone())
    .with_groups(groups.clone());
    // Without a `discovery` block there is no discovery at all (its API answers 404).
    let discovery = config.discovery.as_ref().map(|section| {
        let factory = discovery_source_factory();
        Arc::new(
            DiscoveryService::new(
                gateway.servers().clone(),
                Arc::new(factory),
                events.clone() as Arc<dyn EventSink>,
                DiscoverySettings {
                    refresh_interval: Duration::from_secs(section.refresh_interval_s),
                },
            )
            .with_store(Arc::new(mcpgw_store_sqlite::SqliteDiscoveryStore::new(
                (*store).clone(),
            )))
            .with_groups(groups.clone()),
        )
    });
    let gateway = match &discovery {
        Some(discovery) => gateway.with_discovery(discovery.clone()),
        None => gateway,
    };
    // Configuration management: the running configuration, and reload, backup and diff against
    // the file it came from (those answer 409 when the gateway started without one).
    let environment: mcpgw_gateway::Environment = Arc::new(|name| std::env::var(name).ok());
    let mut config_service = ConfigService::new(
        gateway.servers().clone(),
        events.clone() as Arc<dyn EventSink>,
        environment,
        config.clone(),
    )
    .with_groups(groups.clone());
    if let Some(path) = &config_path {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the configuration file {}", path.display()))?;
        config_service = config_service.with_file(
            Arc::new(mcpgw_config_file::FileConfig::new(path.clone())),
            text,
        );
    }
    let config_service = Arc::new(config_service);
    let gateway = gateway.with_config(config_service.clone());
    Ok(Assembled {
        gateway,
        catalog,
        tool_lists,
        frontend,
        groups,
        events,
        auth,
        store,
        event_log,
        rate_limiter,
        discovery,
        config_service,
    })
}

/// The discovery source types of the bundled server: `docker` and `filesystem`.
pub(crate) fn discovery_source_factory() -> CompositeSourceFactory {
    CompositeSourceFactory::new()
        .with(Arc::new(mcpgw_runner_docker::DockerSourceFactory))
        .with(Arc::new(
            mcpgw_discovery_files::FilesystemSourceFactory::new(),
        ))
}

/// Whether every address `--host` resolves to is a loopback address. A name that does not
/// resolve counts as open.
fn listens_on_loopback_only(cli: &Cli) -> bool {
    std::net::ToSocketAddrs::to_socket_addrs(&(cli.host.as_str(), cli.port))
        .map(|mut addresses| addresses.all(|address| address.ip().is_loopback()))
        .unwrap_or(false)
}

/// `MCP_CORS_ORIGINS=*` lets every web page read and change what it can reach. With
/// authentication off on a non-loopback address that is anyone's gateway from any page, so the
/// combination is refused, `--unsafe-no-auth` or not; on loopback the operator's own browser is
/// the only one, and it is logged as a warning.
fn refuse_any_origin_on_an_open_listener_without_auth(
    cli: &Cli,
    config: &GatewayConfig,
) -> anyhow::Result<()> {
    // A value that does not parse stops the start later, with its own message.
    let any_origin = non_empty_variable("MCP_CORS_ORIGINS").is_some_and(|origins| {
        mcpgw_http_actix::CorsSettings::parse(&origins, None, None)
            .is_ok_and(|cors| cors.allows_any_origin())
    });
    if !any_origin || config.auth.enabled {
        return Ok(());
    }
    if listens_on_loopback_only(cli) {
        tracing::warn!(
            "MCP_CORS_ORIGINS=* with authentication off: every web page this machine's browsers \
             show can drive the gateway; list the origins that need it instead"
        );
        return Ok(());
    }
    anyhow::bail!(
        "refusing MCP_CORS_ORIGINS=* on {} with authentication off: any web page anywhere could \
         start, stop and call every MCP server; list the origins that need access in \
         MCP_CORS_ORIGINS, or turn authentication on (auth.enabled: true)",
        cli.host
    )
}

/// With authentication off, the gateway listens only where nobody else can reach it (a
/// loopback address) unless the operator says `--unsafe-no-auth`: an open gateway lets anyone
/// who reaches it start, stop and call every MCP server. A host name counts as loopback only
/// when every address it resolves to is.
fn refuse_open_listener_without_auth(cli: &Cli, config: &GatewayConfig) -> anyhow::Result<()> {
    if config.auth.enabled || listens_on_loopback_only(cli) {
        return Ok(());
    }
    if cli.unsafe_no_auth {
        tracing::warn!(
            host = %cli.host,
            "listening on a non-loopback address with authentication off (--unsafe-no-auth): \
             anyone who reaches this address can start, stop and call every MCP server"
        );
        return Ok(());
    }
    anyhow::bail!(
        "refusing to listen on {} with authentication off: anyone who reaches it could start, \
         stop and call every MCP server; turn authentication on (auth.enabled: true), listen on \
         127.0.0.1, or pass --unsafe-no-auth (MCP_UNSAFE_NO_AUTH=1) to do it anyway",
        cli.host
    )
}

/// Reloads the configuration file on SIGHUP, as daemons do; the outcome is logged and
/// published as an event like any reload. Without a file, the signal only says so in the log.
fn spawn_reload_on_hangup(config: Arc<ConfigService>) -> tokio::task::JoinHandle<()> {
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

/// This gateway's instance id, the owner label of the containers it runs: kept in the data
/// directory, so that a gateway restarted on the same data finds (and removes) the containers
/// a killed predecessor left, and two gateways with their own data never touch each other's.
fn instance_id(data_dir: &std::path::Path) -> anyhow::Result<String> {
    use mcpgw_gateway::authz::SecretSource as _;
    let path = data_dir.join("instance_id");
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let id = text.trim();
            let valid = (8..=64).contains(&id.len())
                && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
            anyhow::ensure!(
                valid,
                "{} does not hold an instance id (8 to 64 letters, digits or `-`); delete it \
                 and a new one is made",
                path.display()
            );
            Ok(id.to_owned())
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let mut bytes = [0_u8; 8];
            mcpgw_gateway::OsSecrets
                .fill(&mut bytes)
                .map_err(|error| anyhow::anyhow!("cannot make an instance id: {error}"))?;
            let id: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
            std::fs::write(&path, format!("{id}\n"))
                .with_context(|| format!("cannot write the instance id to {}", path.display()))?;
            Ok(id)
        }
        Err(error) => {
            Err(error).with_context(|| format!("cannot read the instance id {}", path.display()))
        }
    }
}

/// Removes the containers that an earlier run of this instance left behind (a gateway killed
/// outright cannot remove its own), as soon as a docker-mode server exists: one in the
/// configuration file or restored from the store at start, one created over the API, by a
/// reload or by a discovery approval later. Only the engine that server runs on is contacted,
/// once; a gateway without docker-mode servers never looks for an engine. The runner itself
/// also sweeps an engine before its first container there, so nothing this run starts can be
/// taken for a leftover.
struct LeftoverSweep {
    /// Weak: the manager's event sink holds this observer.
    servers: WeakServerManager,
    runner: Arc<DockerRunner>,
    runtime: tokio::runtime::Handle,
}

impl EventObserver for LeftoverSweep {
    fn observe(&self, event: &PublishedEvent) {
        let id = match &event.event {
            DomainEvent::McpServerRegistered {
                mcp_server_id,
                mode,
                ..
            } if *mode == "docker" => mcp_server_id,
            DomainEvent::McpServerUpdated { mcp_server_id, .. } => mcp_server_id,
            _ => return,
        };
        // Observers run while the manager publishes; it is asked for the spec afterwards.
        let Some(servers) = self.servers.upgrade() else {
            return;
        };
        let runner = self.runner.clone();
        let id = id.clone();
        self.runtime.spawn(async move {
            let Ok(server) = servers.snapshot(&id) else {
                return;
            };
            if let LaunchSpec::Docker { engine, .. } = &server.spec.launch {
                // A failure is logged by the runner, and tried again at the server's start.
                let _ = runner.remove_leftovers(engine).await;
            }
        });
    }
}

/// The rate-limit policy: the `rate_limit` section, with `MCP_RATE_LIMIT_RPS` and
/// `MCP_RATE_LIMIT_BURST` winning over it. A value that is not a number stops the start with
/// the reason rather than running with limits nobody asked for.
fn rate_limit_policy(
    config: &GatewayConfig,
) -> anyhow::Result<mcpgw_gateway::authz::RateLimitPolicy> {
    let mut policy = mcpgw_gateway::authz::RateLimitPolicy {
        requests_per_second: config.rate_limit.rps,
        burst: config.rate_limit.burst,
    };
    if let Some(raw) = non_empty_variable("MCP_RATE_LIMIT_RPS") {
        policy.requests_per_second = raw
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|rps| rps.is_finite() && *rps >= 0.0)
            .with_context(|| {
                format!(
                    "MCP_RATE_LIMIT_RPS must be a number of requests per second, 0 or more \
                     (0 turns rate limiting off), got `{raw}`"
                )
            })?;
    }
    if let Some(raw) = non_empty_variable("MCP_RATE_LIMIT_BURST") {
        policy.burst = raw
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|burst| *burst >= 1)
            .with_context(|| {
                format!("MCP_RATE_LIMIT_BURST must be a whole number, 1 or more, got `{raw}`")
            })?;
    }
    if policy.is_enabled() {
        tracing::info!(
            rps = policy.requests_per_second,
            burst = policy.burst,
            "rate limiting is on"
        );
    } else {
        tracing::info!("rate limiting is off");
    }
    Ok(policy)
}

fn non_empty_variable(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .filter(|value| !value.trim().is_empty())
}

/// Authentication and authorization as the `auth` section says: API keys in the store, bearer
/// tokens from an OIDC issuer, an OPA policy engine.
fn build_auth(
    config: &GatewayConfig,
    store: Arc<mcpgw_store_sqlite::SqliteStore>,
    events: Arc<EventBus>,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<AuthService> {
    let section = &config.auth;
    let settings = AuthSettings::from_config(section)
        .map_err(|error| anyhow::anyhow!("the auth section is invalid: {error}"))?;
    let mut auth = AuthService::new(
        settings,
        store as Arc<dyn mcpgw_gateway::authz::AuthStore>,
        events as Arc<dyn EventSink>,
        clock,
        Arc::new(mcpgw_gateway::OsSecrets),
    );
    if section.enabled && section.oidc.enabled {
        let issuer = section
            .oidc
            .issuer
            .clone()
            .context("auth.oidc.issuer is required when auth.oidc.enabled is true")?;
        let audience = section
            .oidc
            .audience
            .clone()
            .context("auth.oidc.audience is required when auth.oidc.enabled is true")?;
        let mut oidc = mcpgw_oidc::OidcSettings::new(issuer, audience);
        oidc.jwks_uri.clone_from(&section.oidc.jwks_uri);
        oidc.subject_claim.clone_from(&section.oidc.subject_claim);
        oidc.groups_claim.clone_from(&section.oidc.groups_claim);
        oidc.tenant_claim.clone_from(&section.oidc.tenant_claim);
        let verifier = mcpgw_oidc::OidcVerifier::new(oidc)
            .map_err(|error| anyhow::anyhow!("auth.oidc: {error}"))?;
        auth = auth.with_token_verifier(Arc::new(verifier));
    }
    if section.enabled && section.opa.enabled {
        let url = section
            .opa
            .url
            .clone()
            .context("auth.opa.url is required when auth.opa.enabled is true")?;
        let path = section
            .opa
            .policy_path
            .clone()
            .context("auth.opa.policy_path is required when auth.opa.enabled is true")?;
        let decider =
            mcpgw_policy_opa::OpaDecider::new(&mcpgw_policy_opa::OpaSettings::new(url, path))
                .map_err(|error| anyhow::anyhow!("auth.opa: {error}"))?;
        auth = auth.with_policy_decider(Arc::new(decider));
    }
    Ok(auth)
}

async fn register_servers(gateway: &Gateway, config: &GatewayConfig) -> anyhow::Result<()> {
    let manager = gateway.servers();
    for spec in config.server_specs() {
        manager
            .register(spec)
            .await
            .context("cannot register a configured mcp server")?;
    }
    let restored = manager
        .restore_from_repository()
        .await
        .context("cannot load the mcp servers saved in the store")?;
    tracing::info!(
        configured = config.mcp_servers.len(),
        restored,
        "mcp servers registered"
    );
    Ok(())
}

/// The groups of the configuration file, then those created over the API before a restart.
/// Runs after the servers are registered, since groups name servers as members.
async fn register_groups(groups: &GroupService, config: &GatewayConfig) -> anyhow::Result<()> {
    for definition in config.groups() {
        let spec = mcpgw_gateway::group_spec_from_config(&definition)
            .with_context(|| format!("cannot register the configured group `{}`", definition.id))?;
        groups
            .create(spec, mcpgw_core::ServerOrigin::Config)
            .await
            .with_context(|| format!("cannot register the configured group `{}`", definition.id))?;
    }
    let restored = groups
        .restore_from_repository()
        .await
        .context("cannot load the groups saved in the store")?;
    tracing::info!(
        configured = config.groups().len(),
        restored,
        "groups registered"
    );
    Ok(())
}

fn build_launcher(docker: Arc<DockerRunner>) -> Arc<dyn ServerLauncher> {
    let processes = Arc::new(mcpgw_runner_process::ProcessRunner::new(
        mcpgw_runner_process::ProcessRunnerSettings::default(),
    ));
    let connector = Arc::new(mcpgw_mcp_rmcp::RmcpStdioConnector::new(
        mcpgw_mcp_rmcp::StdioConnectorSettings::default(),
    ));
    let stdio = Arc::new(StdioLauncher::new(processes, connector.clone(), STOP_GRACE));
    let containers = Arc::new(StdioLauncher::new(
        docker as Arc<dyn mcpgw_core::ProcessSpawner>,
        connector,
        STOP_GRACE,
    ));
    let remote = Arc::new(mcpgw_mcp_rmcp::RemoteLauncher::new(
        mcpgw_mcp_rmcp::RemoteSettings::default(),
    ));
    fn is_subprocess(spec: &ServerSpec) -> bool {
        matches!(spec.launch, LaunchSpec::Subprocess { .. })
    }
    fn is_remote(spec: &ServerSpec) -> bool {
        matches!(spec.launch, LaunchSpec::Remote { .. })
    }
    fn is_docker(spec: &ServerSpec) -> bool {
        matches!(spec.launch, LaunchSpec::Docker { .. })
    }
    Arc::new(
        CompositeLauncher::new()
            .with(is_subprocess, stdio)
            .with(is_docker, containers)
            .with(is_remote, remote),
    )
}

/// The MCP endpoint's handler from the rmcp adapter, in the HTTP adapter's types.
fn mcp_http_handler(
    config: &GatewayConfig,
    frontend: Arc<dyn McpFrontend>,
) -> mcpgw_http_actix::McpHttpHandler {
    use http_body_util::BodyExt as _;
    let endpoint = &config.mcp_endpoint;
    // `Host` and `Origin` are checked by the HTTP adapter, for `/mcp` as for every route.
    let settings = mcpgw_mcp_rmcp::McpHttpSettings::default().with_sse_keep_alive(
        Some(Duration::from_secs(endpoint.sse_keep_alive_s)).filter(|d| !d.is_zero()),
    );
    let handler = mcpgw_mcp_rmcp::streamable_http_handler(frontend, settings);
    Arc::new(move |request| {
        let answer = handler(request);
        Box::pin(async move { answer.await.map(|body| body.boxed_unsync()) })
    })
}

fn serve_http(cli: &Cli, config: &GatewayConfig, assembled: &Assembled) -> anyhow::Result<()> {
    let gateway = &assembled.gateway;
    let listener = TcpListener::bind((cli.host.as_str(), cli.port))
        .with_context(|| format!("cannot listen on {}:{}", cli.host, cli.port))?;
    let address = listener
        .local_addr()
        .context("cannot read the bound address")?;

    // Installed at the start of `serve`; this answers the same handle.
    let metrics = mcpgw_http_actix::install_metrics_recorder()
        .map_err(|error| anyhow::anyhow!("cannot install the metrics recorder: {error}"))?;
    let http_settings = mcpgw_http_actix::HttpSettings {
        workers: thread_count(
            "MCP_HTTP_WORKERS",
            mcpgw_http_actix::HttpSettings::DEFAULT_WORKERS,
        ),
        ..mcpgw_http_actix::HttpSettings::default()
    };
    let state =
        mcpgw_http_actix::ApiState::new(gateway.clone(), metrics.clone(), http_settings.clone())
            .with_mcp_handler(mcp_http_handler(config, assembled.frontend.clone()))
            .with_auth(assembled.auth.clone())
            .with_trusted_proxies(
                mcpgw_http_actix::TrustedProxies::parse(&config.auth.trusted_proxies)
                    .map_err(|error| anyhow::anyhow!("auth.trusted_proxies: {error}"))?,
            );
    let state = match cors_settings()? {
        Some(cors) => state.with_cors(cors),
        None => state,
    };
    let state = state
        .with_allowed_hosts(
            mcpgw_http_actix::AllowedHosts::new(address.ip(), &config.allowed_hosts())
                .map_err(|error| anyhow::anyhow!("{error}"))?,
        )
        .with_mcp_origins(
            mcpgw_http_actix::McpOrigins::parse(&config.mcp_endpoint.allowed_origins)
                .map_err(|error| anyhow::anyhow!("{error}"))?,
        );
    let event_streams = mcpgw_http_actix::EventStreams::new(assembled.events.clone());
    let state = state
        .with_events(event_streams.clone())
        .with_rate_limiter(assembled.rate_limiter.clone());

    actix_web::rt::System::new().block_on(async {
        let server = mcpgw_http_actix::build_server(state, listener, &http_settings)
            .context("cannot start the HTTP server")?;
        let handle = server.handle();
        let upkeep = actix_web::rt::spawn(mcpgw_http_actix::run_metrics_upkeep(
            metrics,
            Duration::from_secs(5),
        ));
        gateway.mark_startup_complete();
        // A closed stderr must not stop the gateway, so the write's error is ignored.
        let _ = writeln!(std::io::stderr(), "listening on http://{address}");
        let mut served = actix_web::rt::spawn(server);
        let outcome = tokio::select! {
            signal = wait_for_shutdown_signal() => {
                tracing::info!(signal, "shutting down");
                gateway.mark_shutting_down();
                event_streams.close_all();
                handle.stop(true).await;
                let _ = served.await;
                anyhow::Ok(())
            }
            // The HTTP server ending on its own is a failure: the gateway stops rather than
            // linger without a listener.
            ended = &mut served => {
                gateway.mark_shutting_down();
                match ended {
                    Ok(Ok(())) => anyhow::bail!("the HTTP server stopped unexpectedly"),
                    Ok(Err(error)) => Err(error).context("the HTTP server failed"),
                    Err(error) => anyhow::bail!("the HTTP server task failed: {error}"),
                }
            }
        };
        upkeep.abort();
        outcome
    })
}

/// Serves MCP over stdin/stdout until the client closes stdin or a signal arrives.
async fn serve_stdio(assembled: &Assembled) -> anyhow::Result<()> {
    assembled.gateway.mark_startup_complete();
    // Stdio has no credentials: the process that launched the gateway is trusted with every
    // tool, as with any local MCP server.
    let served = mcpgw_mcp_rmcp::serve_stdio(
        assembled.catalog.clone(),
        mcpgw_mcp_rmcp::McpServerSettings::default(),
    );
    tokio::select! {
        result = served => {
            result.context("serving MCP over stdio failed")?;
            tracing::info!("the MCP client closed stdin; shutting down");
        }
        signal = wait_for_shutdown_signal() => {
            tracing::info!(signal, "shutting down");
        }
    }
    assembled.gateway.mark_shutting_down();
    Ok(())
}

/// CORS from `MCP_CORS_ORIGINS`, `MCP_CORS_METHODS` and `MCP_CORS_HEADERS`; off while
/// `MCP_CORS_ORIGINS` is unset or empty. A bad value stops the start with the reason.
fn cors_settings() -> anyhow::Result<Option<mcpgw_http_actix::CorsSettings>> {
    let Some(origins) = non_empty_variable("MCP_CORS_ORIGINS") else {
        return Ok(None);
    };
    let methods = non_empty_variable("MCP_CORS_METHODS");
    let headers = non_empty_variable("MCP_CORS_HEADERS");
    let settings =
        mcpgw_http_actix::CorsSettings::parse(&origins, methods.as_deref(), headers.as_deref())
            .map_err(|error| anyhow::anyhow!("invalid CORS settings: {error}"))?;
    tracing::info!(origins = %origins, "CORS is on");
    Ok(Some(settings))
}

/// A thread count from the environment (a positive integer), else `default`.
fn thread_count(variable: &str, default: usize) -> usize {
    match std::env::var(variable) {
        Ok(raw) => match raw.trim().parse::<usize>() {
            Ok(count) if count > 0 => count,
            _ => {
                tracing::warn!(variable, value = %raw, default, "not a positive integer; using the default");
                default
            }
        },
        Err(_) => default,
    }
}

async fn wait_for_shutdown_signal() -> &'static str {
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
