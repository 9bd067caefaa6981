//! Wiring of the adapters into a running gateway.

use std::io::Write as _;
use std::net::TcpListener;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use mcpgw_core::{
    Clock, EventSink, LaunchSpec, ManagerSettings, ServerLauncher, ServerManager, ServerRepository,
    ServerSpec,
};
use mcpgw_gateway::{
    CompositeLauncher, EventBus, Gateway, GatewayInfo, StdioLauncher, TokioClock, TokioSpawner,
};

use crate::cli::Cli;

/// How long a stopping server gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(3);
/// How often health checks, idle reaping and restarts are considered.
const MAINTENANCE_PERIOD: Duration = Duration::from_secs(1);

pub fn serve(cli: &Cli) -> anyhow::Result<ExitCode> {
    if !cli.http {
        anyhow::bail!(
            "serving MCP over stdio is not available in this version; start with --http to serve \
             the REST API"
        );
    }
    let (config, config_path) = crate::cli::startup_config(cli)?;

    // The domain's background work (starts, health checks, upstream I/O) runs on its own
    // runtime, so request handling on the HTTP workers never competes with it for a thread.
    let core_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("mcpgw-core")
        .enable_all()
        .build()
        .context("cannot start the runtime")?;

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
    let events = Arc::new(EventBus::new(4096));
    let launcher = build_launcher();
    let settings = ManagerSettings {
        call_timeout: Duration::from_secs(config.tool_timeout_s),
        ..ManagerSettings::default()
    };
    let manager = ServerManager::new(
        launcher,
        clock,
        events.clone() as Arc<dyn EventSink>,
        Arc::new(TokioSpawner::new(core_runtime.handle().clone())),
        Some(store.clone() as Arc<dyn ServerRepository>),
        settings,
    );

    let gateway = Gateway::new(
        manager.clone(),
        GatewayInfo {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            config_path: config_path.as_ref().map(|path| path.display().to_string()),
        },
    );

    core_runtime.block_on(async {
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
        anyhow::Ok(())
    })?;
    let maintenance = {
        let _entered = core_runtime.enter();
        mcpgw_gateway::spawn_maintenance(manager.clone(), MAINTENANCE_PERIOD)
    };

    let listener = TcpListener::bind((cli.host.as_str(), cli.port))
        .with_context(|| format!("cannot listen on {}:{}", cli.host, cli.port))?;
    let address = listener
        .local_addr()
        .context("cannot read the bound address")?;

    let metrics = mcpgw_http_actix::install_metrics_recorder()
        .map_err(|error| anyhow::anyhow!("cannot install the metrics recorder: {error}"))?;
    let http_settings = mcpgw_http_actix::HttpSettings::default();
    let state =
        mcpgw_http_actix::ApiState::new(gateway.clone(), metrics.clone(), http_settings.clone());

    let outcome = actix_web::rt::System::new().block_on(async {
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
    });

    maintenance.abort();
    // Every managed server is stopped before the process ends, so nothing is left behind.
    core_runtime.block_on(gateway.shutdown());
    core_runtime.shutdown_timeout(Duration::from_secs(1));
    outcome?;
    Ok(ExitCode::SUCCESS)
}

fn build_launcher() -> Arc<dyn ServerLauncher> {
    let processes = Arc::new(mcpgw_runner_process::ProcessRunner::new(
        mcpgw_runner_process::ProcessRunnerSettings::default(),
    ));
    let connector = Arc::new(mcpgw_mcp_rmcp::RmcpStdioConnector::new(
        mcpgw_mcp_rmcp::StdioConnectorSettings::default(),
    ));
    let stdio = Arc::new(StdioLauncher::new(processes, connector, STOP_GRACE));
    fn is_subprocess(spec: &ServerSpec) -> bool {
        matches!(spec.launch, LaunchSpec::Subprocess { .. })
    }
    Arc::new(CompositeLauncher::new().with(is_subprocess, stdio))
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
