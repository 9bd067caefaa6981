//! The testkit's suites of the ports the application crate implements: the stdio and composite
//! launchers and their process sessions (on real fixture server processes), the event bus and
//! its observers, and the catalogue and authorizing front ends.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_config::ToolNames;
use mcpgw_core::{
    Caller, EventSink, LaunchSpec, ManagerSettings, McpFrontend, McpSession, ServerId,
    ServerLauncher, ServerManager, ServerSpec, Tool,
};
use mcpgw_fixtures::fixture::fixture_server_binary;
use mcpgw_gateway::authz::{RandomnessError, SecretSource};
use mcpgw_gateway::{
    AuthService, AuthSettings, AuthorizedFrontend, CompositeLauncher, EventBus, StdioLauncher,
    ToolCatalog,
};
use mcpgw_mcp_rmcp::{RemoteLauncher, RmcpStdioConnector, StdioConnectorSettings};
use mcpgw_runner_process::{ProcessRunner, ProcessRunnerSettings};
use mcpgw_testkit::auth_store::InMemoryAuthStore;
use mcpgw_testkit::clock::FakeClock;
use mcpgw_testkit::fakes::{FakeBehaviour, FakeLauncher, RecordingEventSink, TokioSpawner};
use mcpgw_testkit::mcp_frontend_suite::McpFrontendFixture;
use mcpgw_testkit::mcp_session_suite::McpSessionFixture;
use mcpgw_testkit::server_launcher_suite::ServerLauncherFixture;

fn id(raw: &str) -> ServerId {
    ServerId::parse(raw).unwrap()
}

// ----- launchers and their sessions ---------------------------------------------------------

/// The stdio launcher on the process runner and the rmcp connector. A server that does not
/// answer `initialize` fails its launch within two seconds.
fn stdio_launcher() -> StdioLauncher {
    StdioLauncher::new(
        Arc::new(ProcessRunner::new(ProcessRunnerSettings::default())),
        Arc::new(RmcpStdioConnector::new(
            StdioConnectorSettings::default().with_initialize_timeout(Duration::from_secs(2)),
        )),
        Duration::from_secs(2),
    )
}

fn shell(script: &str, arguments: &[&str]) -> ServerSpec {
    let mut command = vec!["sh".to_owned(), "-c".to_owned(), script.to_owned()];
    command.extend(arguments.iter().map(|argument| (*argument).to_owned()));
    ServerSpec::subprocess(id("contract"), command)
}

/// The fixture server, paging its tools by two, behind a shell that prints its process id.
fn fixture_server() -> ServerSpec {
    let binary = fixture_server_binary();
    shell(
        "echo $$ >&2; exec \"$0\" --page-size 2",
        &[binary.to_str().expect("a UTF-8 path")],
    )
}

/// A server that starts another process, prints both ids and never answers `initialize`.
fn silent_server() -> ServerSpec {
    shell(
        "sleep 1000 & echo $! >&2; echo $$ >&2; exec sleep 1000",
        &[],
    )
}

fn container() -> ServerSpec {
    let mut spec = ServerSpec::subprocess(id("contract"), vec!["unused".to_owned()]);
    spec.launch = LaunchSpec::Docker {
        image: "mcpgw/none".to_owned(),
        args: Vec::new(),
        env: BTreeMap::new(),
        network: "none".to_owned(),
        memory: None,
        cpus: None,
        read_only: true,
        volumes: Vec::new(),
        engine: Default::default(),
    };
    spec
}

struct StdioLaunches;

impl ServerLauncherFixture for StdioLaunches {
    fn launcher(&self) -> Arc<dyn ServerLauncher> {
        Arc::new(stdio_launcher())
    }

    fn working(&self) -> ServerSpec {
        fixture_server()
    }

    fn failing(&self) -> ServerSpec {
        silent_server()
    }

    fn unsupported(&self) -> ServerSpec {
        let mut spec = fixture_server();
        spec.launch = LaunchSpec::Remote {
            endpoint: "http://127.0.0.1:1/mcp".to_owned(),
            headers: BTreeMap::new(),
            token_exchange: None,
        };
        spec
    }
}

mod stdio_launcher {
    mcpgw_testkit::server_launcher_contract_suite!(super::StdioLaunches);
}

/// The composite launcher as the bundled server wires it: local processes to the stdio
/// launcher, remote servers to the remote launcher, containers to nobody.
struct CompositeLaunches;

impl ServerLauncherFixture for CompositeLaunches {
    fn launcher(&self) -> Arc<dyn ServerLauncher> {
        Arc::new(
            CompositeLauncher::new()
                .with_mode("subprocess", Arc::new(stdio_launcher()))
                .with_mode("remote", Arc::new(RemoteLauncher::default())),
        )
    }

    fn working(&self) -> ServerSpec {
        fixture_server()
    }

    fn failing(&self) -> ServerSpec {
        silent_server()
    }

    fn unsupported(&self) -> ServerSpec {
        container()
    }
}

mod composite_launcher {
    mcpgw_testkit::server_launcher_contract_suite!(super::CompositeLaunches);
}

/// Process sessions: what the stdio launcher hands back for the fixture server.
struct ProcessSessions;

#[async_trait]
impl McpSessionFixture for ProcessSessions {
    async fn connect(&self) -> Arc<dyn McpSession> {
        let spec = fixture_server();
        let logs = Arc::new(mcpgw_core::LogBuffer::new(
            spec.id.clone(),
            Arc::new(FakeClock::new()),
        ));
        stdio_launcher()
            .launch(&spec, logs)
            .await
            .expect("the fixture server starts")
            .session
    }
}

mod process_session {
    mcpgw_testkit::mcp_session_contract_suite!(super::ProcessSessions);
    mcpgw_testkit::mcp_session_relay_suite!(super::ProcessSessions);
}

// ----- the event bus and its observers ------------------------------------------------------

mod event_bus {
    mcpgw_testkit::event_sink_contract_suite!(|observers| {
        let bus = mcpgw_gateway::EventBus::new(16);
        for observer in observers {
            bus.add_observer(observer);
        }
        bus
    });
}

fn manager() -> ServerManager {
    ServerManager::new(
        Arc::new(FakeLauncher::new()),
        Arc::new(FakeClock::new()),
        Arc::new(RecordingEventSink::default()) as Arc<dyn EventSink>,
        Arc::new(TokioSpawner),
        None,
        ManagerSettings::default(),
    )
}

mod metrics_observer {
    mcpgw_testkit::event_observer_contract_suite!(std::sync::Arc::new(
        mcpgw_gateway::EventMetrics::new()
    ));
}

mod call_stats_observer {
    mcpgw_testkit::event_observer_contract_suite!(std::sync::Arc::new(
        mcpgw_gateway::CallStats::new()
    ));
}

mod catalog_observer {
    mcpgw_testkit::event_observer_contract_suite!(
        mcpgw_gateway::ToolCatalog::new(super::manager(), mcpgw_config::ToolNames::prefixed())
            .observer()
    );
}

mod group_observer {
    mcpgw_testkit::event_observer_contract_suite!(
        std::sync::Arc::new(mcpgw_gateway::GroupService::new(
            super::manager(),
            std::sync::Arc::new(mcpgw_testkit::fakes::RecordingEventSink::default()),
        ))
        .observer()
    );
}

mod tool_list_observer {
    mcpgw_testkit::event_observer_contract_suite!(
        mcpgw_gateway::ToolListKeeper::new(
            super::manager(),
            std::sync::Arc::new(mcpgw_testkit::tool_list_store_suite::InMemoryToolListStore::new()),
        )
        .observer()
    );
}

// ----- the front ends -----------------------------------------------------------------------

/// A catalogue over fake servers: `math` has `echo`, and a server registered later has `other`.
struct CatalogFrontend {
    manager: ServerManager,
    catalog: Arc<ToolCatalog>,
    /// What the suite runs against: the catalogue, or the authorizing front end over it.
    frontend: Arc<dyn McpFrontend>,
    caller: Caller,
    outsider: Option<Caller>,
}

fn with_tools(raw: &str, tools: &[&str]) -> ServerSpec {
    ServerSpec {
        predefined_tools: tools.iter().map(|name| Tool::new(*name)).collect(),
        ..ServerSpec::subprocess(id(raw), vec!["x".into()])
    }
}

impl CatalogFrontend {
    async fn catalog() -> Self {
        let launcher = Arc::new(FakeLauncher::new());
        for (server, tools) in [("math", ["echo"]), ("later", ["other"])] {
            launcher.set_behaviour(
                server,
                FakeBehaviour {
                    tools: tools.iter().map(|name| Tool::new(*name)).collect(),
                    ..FakeBehaviour::default()
                },
            );
        }
        let bus = Arc::new(EventBus::new(64));
        let manager = ServerManager::new(
            launcher,
            Arc::new(FakeClock::new()),
            bus.clone() as Arc<dyn EventSink>,
            Arc::new(TokioSpawner),
            None,
            ManagerSettings::default(),
        );
        let catalog = ToolCatalog::new(manager.clone(), ToolNames::prefixed());
        bus.add_observer(catalog.observer());
        tokio::spawn(catalog.clone().run_change_notifier());
        manager
            .register(with_tools("math", &["echo"]))
            .await
            .unwrap();
        Self {
            manager,
            frontend: catalog.clone(),
            catalog,
            caller: Caller::default(),
            outsider: None,
        }
    }

    /// The authorizing front end over the catalogue: `user:alice` is a developer and may use
    /// every tool, `user:nobody` has no role.
    async fn authorizing() -> Self {
        let mut fixture = Self::catalog().await;
        let auth = AuthService::new(
            AuthSettings {
                enabled: true,
                ..AuthSettings::default()
            },
            Arc::new(InMemoryAuthStore::new()),
            Arc::new(RecordingEventSink::default()),
            Arc::new(FakeClock::new()),
            Arc::new(CountingSecrets::default()),
        );
        auth.load().await.unwrap();
        auth.assign_role("user:alice", "developer", None)
            .await
            .unwrap();
        fixture.frontend = AuthorizedFrontend::new(fixture.catalog.clone(), Arc::new(auth));
        fixture.caller = Caller::principal("user:alice");
        fixture.outsider = Some(Caller::principal("user:nobody"));
        fixture
    }
}

#[async_trait]
impl McpFrontendFixture for CatalogFrontend {
    fn frontend(&self) -> Arc<dyn McpFrontend> {
        self.frontend.clone()
    }

    fn caller(&self) -> Caller {
        self.caller.clone()
    }

    fn echo_tool(&self) -> String {
        "math__echo".to_owned()
    }

    fn outsider(&self) -> Option<Caller> {
        self.outsider.clone()
    }

    async fn change_tools(&self) {
        self.manager
            .register(with_tools("later", &["other"]))
            .await
            .unwrap();
    }
}

/// Fills buffers with a running byte; enough for the auth service's ids here.
#[derive(Default)]
struct CountingSecrets(std::sync::atomic::AtomicU8);

impl SecretSource for CountingSecrets {
    fn fill(&self, destination: &mut [u8]) -> Result<(), RandomnessError> {
        let start = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        for (index, byte) in destination.iter_mut().enumerate() {
            *byte = start.wrapping_add(u8::try_from(index % 256).unwrap_or_default());
        }
        Ok(())
    }
}

mod catalog_frontend {
    mcpgw_testkit::mcp_frontend_contract_suite!(super::CatalogFrontend::catalog().await);
}

mod authorizing_frontend {
    mcpgw_testkit::mcp_frontend_contract_suite!(super::CatalogFrontend::authorizing().await);
}
