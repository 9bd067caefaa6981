//! The testkit's suites of the ports this crate implements: the stdio connector against the
//! testkit's scripted server, its sessions against that server and against the fixture server
//! as a process, and the remote launcher and its sessions against the fixture server over
//! Streamable HTTP; and what a session does for a server that lacks a capability.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use mcpgw_core::{
    ByteStreams, LaunchSpec, McpSession, ServerId, ServerLauncher, ServerOutput, ServerSpec,
    StdioConnector,
};
use mcpgw_fixtures::fixture::{FIXTURE_LISTENING_PREFIX, fixture_server_binary};
use mcpgw_mcp_rmcp::{RemoteLauncher, RmcpStdioConnector};
use mcpgw_testkit::mcp_session_suite::McpSessionFixture;
use mcpgw_testkit::scripted_server::{ScriptedOptions, ScriptedServer};
use mcpgw_testkit::server_launcher_suite::ServerLauncherFixture;
use tokio::io::AsyncBufReadExt as _;
use tokio::process::{Child, Command};

fn server_id() -> ServerId {
    ServerId::parse("contract").unwrap()
}

mod connector {
    mcpgw_testkit::stdio_connector_contract_suite!(mcpgw_mcp_rmcp::RmcpStdioConnector::default());
}

/// Sessions of the stdio connector to the testkit's scripted server.
struct ScriptedSessions {
    servers: Mutex<Vec<ScriptedServer>>,
}

#[async_trait]
impl McpSessionFixture for ScriptedSessions {
    async fn connect(&self) -> Arc<dyn McpSession> {
        let (streams, server) = ScriptedServer::start(ScriptedOptions::default());
        self.servers.lock().unwrap().push(server);
        RmcpStdioConnector::default()
            .connect(&server_id(), streams)
            .await
            .expect("the scripted server completes the handshake")
    }
}

mod scripted_session {
    mcpgw_testkit::mcp_session_contract_suite!(super::ScriptedSessions {
        servers: std::sync::Mutex::default(),
    });
}

/// Sessions of the stdio connector to fixture server processes, which live as long as the
/// fixture.
#[derive(Default)]
struct FixtureProcesses {
    children: Mutex<Vec<Child>>,
}

impl FixtureProcesses {
    fn command(args: &[&str]) -> Command {
        let mut command = Command::new(fixture_server_binary());
        command.args(args).kill_on_drop(true);
        command
    }

    fn keep(&self, child: Child) {
        self.children.lock().unwrap().push(child);
    }
}

#[async_trait]
impl McpSessionFixture for FixtureProcesses {
    async fn connect(&self) -> Arc<dyn McpSession> {
        let mut child = Self::command(&["--page-size", "2"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the fixture server starts");
        let streams = ByteStreams {
            to_server: Box::pin(child.stdin.take().unwrap()),
            from_server: ServerOutput::Pipe(child.stdout.take().unwrap().into_owned_fd().unwrap()),
        };
        self.keep(child);
        RmcpStdioConnector::default()
            .connect(&server_id(), streams)
            .await
            .expect("the fixture server completes the handshake")
    }
}

mod stdio_session {
    mcpgw_testkit::mcp_session_contract_suite!(super::FixtureProcesses::default());
    mcpgw_testkit::mcp_session_relay_suite!(super::FixtureProcesses::default());
}

/// Starts a fixture server over Streamable HTTP and answers its endpoint.
async fn http_fixture(processes: &FixtureProcesses) -> String {
    let mut child = FixtureProcesses::command(&["--http", "0", "--page-size", "2"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the fixture server starts");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    processes.keep(child);
    let endpoint = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(endpoint) = line.strip_prefix(FIXTURE_LISTENING_PREFIX) {
                return endpoint.to_owned();
            }
        }
        panic!("the fixture server ended before it listened");
    })
    .await
    .expect("the fixture server listens in time");
    // Keep reading, so the fixture never blocks on a full stderr.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    endpoint
}

fn remote(endpoint: String) -> ServerSpec {
    let mut spec = ServerSpec::subprocess(server_id(), vec!["unused".to_owned()]);
    spec.launch = LaunchSpec::Remote {
        endpoint,
        headers: BTreeMap::new(),
        token_exchange: None,
    };
    spec
}

/// Remote sessions, each to a fixture server of its own over Streamable HTTP.
#[derive(Default)]
struct RemoteSessions {
    processes: FixtureProcesses,
}

#[async_trait]
impl McpSessionFixture for RemoteSessions {
    async fn connect(&self) -> Arc<dyn McpSession> {
        let endpoint = http_fixture(&self.processes).await;
        RemoteLauncher::default()
            .connect_session(&server_id(), &endpoint, &BTreeMap::new())
            .await
            .map(|session| Arc::new(session) as Arc<dyn McpSession>)
            .expect("the fixture server completes the handshake over http")
    }
}

mod remote_session {
    mcpgw_testkit::mcp_session_contract_suite!(super::RemoteSessions::default());
    mcpgw_testkit::mcp_session_relay_suite!(super::RemoteSessions::default());
}

/// The remote launcher, with one fixture server over Streamable HTTP to launch.
struct RemoteLaunches {
    endpoint: String,
    _processes: FixtureProcesses,
}

impl RemoteLaunches {
    async fn new() -> Self {
        let processes = FixtureProcesses::default();
        let endpoint = http_fixture(&processes).await;
        Self {
            endpoint,
            _processes: processes,
        }
    }
}

impl ServerLauncherFixture for RemoteLaunches {
    fn launcher(&self) -> Arc<dyn ServerLauncher> {
        Arc::new(RemoteLauncher::default())
    }

    fn working(&self) -> ServerSpec {
        remote(self.endpoint.clone())
    }

    fn failing(&self) -> ServerSpec {
        // Port 1 on the loopback refuses connections.
        remote("http://127.0.0.1:1/mcp".to_owned())
    }

    fn unsupported(&self) -> ServerSpec {
        ServerSpec::subprocess(server_id(), vec!["true".to_owned()])
    }
}

mod remote_launcher {
    mcpgw_testkit::server_launcher_contract_suite!(super::RemoteLaunches::new().await);
}

/// A server that declares no completions or subscriptions is not asked for them: the session
/// answers an empty completion itself, and refuses a subscription, where asking would only
/// earn "method not found".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_completions_or_subscriptions_is_not_asked_for_them() {
    let (streams, server) = ScriptedServer::start(ScriptedOptions::default());
    let session = RmcpStdioConnector::default()
        .connect(&server_id(), streams)
        .await
        .expect("the scripted server completes the handshake");
    let answer = session
        .complete(serde_json::json!({
            "ref": {"type": "ref/prompt", "name": "anything"},
            "argument": {"name": "a", "value": ""},
        }))
        .await
        .unwrap();
    assert_eq!(answer, mcpgw_core::empty_completion());
    session.ping().await.unwrap();
    assert!(
        !server
            .methods()
            .iter()
            .any(|method| method == "completion/complete"),
        "{:?}",
        server.methods()
    );
    session.close().await;
}
