//! Launchers composed from lower-level ports.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures::FutureExt as _;
use mcpgw_core::{
    CallContext, ExitStatusInfo, LaunchError, LaunchedServer, LogBuffer, McpSession,
    ProcessControl, ProcessSpawner, ServerLauncher, ServerSpec, SessionError, StdioConnector, Tool,
    ToolCall, ToolCallOutcome,
};
use serde_json::{Map, Value};

/// How long closing the session of a process that already exited waits for the protocol
/// session to notice the end (its stdout closed) by itself. Children of the process that keep
/// the pipe open would hold it back forever, hence the bound.
const PROTOCOL_END_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// Launches stdio servers: a [`ProcessSpawner`] starts the process (or container), a
/// [`StdioConnector`] speaks MCP over its stdin/stdout. Closing the session ends the process
/// (its whole process group), and the session counts as closed when either the protocol or the
/// process ends.
pub struct StdioLauncher {
    spawner: Arc<dyn ProcessSpawner>,
    connector: Arc<dyn StdioConnector>,
    stop_grace: std::time::Duration,
}

impl StdioLauncher {
    pub fn new(
        spawner: Arc<dyn ProcessSpawner>,
        connector: Arc<dyn StdioConnector>,
        stop_grace: std::time::Duration,
    ) -> Self {
        Self {
            spawner,
            connector,
            stop_grace,
        }
    }
}

#[async_trait]
impl ServerLauncher for StdioLauncher {
    async fn launch(
        &self,
        spec: &ServerSpec,
        logs: Arc<LogBuffer>,
    ) -> Result<LaunchedServer, LaunchError> {
        if !self.spawner.supports(&spec.launch) {
            return Err(LaunchError::UnsupportedMode(spec.launch.mode().to_owned()));
        }
        let spawned = self.spawner.spawn(&spec.id, &spec.launch, logs).await?;
        let control = spawned.control;
        let connected = {
            let connect = self.connector.connect(&spec.id, spawned.streams);
            let exited = control.exited();
            tokio::pin!(connect);
            tokio::pin!(exited);
            tokio::select! {
                connected = &mut connect => connected,
                // A server that exits during the handshake fails the start at once, with its
                // exit status, instead of waiting for the handshake to time out.
                exit = &mut exited => Err(LaunchError::ExitedDuringStart { exit }),
            }
        };
        match connected {
            Ok(session) => Ok(LaunchedServer {
                session: Arc::new(ProcessSession {
                    session,
                    control,
                    stop_grace: self.stop_grace,
                }),
            }),
            Err(error) => {
                control.terminate(self.stop_grace).await;
                Err(error)
            }
        }
    }
}

/// An MCP session bound to the process that serves it.
struct ProcessSession {
    session: Arc<dyn McpSession>,
    control: Arc<dyn ProcessControl>,
    stop_grace: std::time::Duration,
}

#[async_trait]
impl McpSession for ProcessSession {
    async fn list_tools(&self) -> Result<Vec<Tool>, SessionError> {
        self.session.list_tools().await
    }

    async fn call_tool(
        &self,
        call: ToolCall,
        ctx: CallContext,
    ) -> Result<ToolCallOutcome, SessionError> {
        self.session.call_tool(call, ctx).await
    }

    async fn ping(&self) -> Result<(), SessionError> {
        self.session.ping().await
    }

    fn tool_list_changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.session.tool_list_changes()
    }

    fn list_changes(&self) -> Option<tokio::sync::watch::Receiver<mcpgw_core::ListChanges>> {
        self.session.list_changes()
    }

    fn offers_tasks(&self) -> bool {
        self.session.offers_tasks()
    }

    async fn list_prompts(&self) -> Result<Vec<Value>, SessionError> {
        self.session.list_prompts().await
    }

    async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
        ctx: CallContext,
    ) -> Result<Value, SessionError> {
        self.session.get_prompt(name, arguments, ctx).await
    }

    async fn list_resources(&self) -> Result<Vec<Value>, SessionError> {
        self.session.list_resources().await
    }

    async fn task_request(&self, method: &str, params: Value) -> Result<Value, SessionError> {
        self.session.task_request(method, params).await
    }

    async fn list_resource_templates(&self) -> Result<Vec<Value>, SessionError> {
        self.session.list_resource_templates().await
    }

    async fn read_resource(&self, uri: &str, ctx: CallContext) -> Result<Value, SessionError> {
        self.session.read_resource(uri, ctx).await
    }

    async fn complete(&self, params: Value) -> Result<Value, SessionError> {
        self.session.complete(params).await
    }

    async fn subscribe_resource(&self, uri: &str) -> Result<(), SessionError> {
        self.session.subscribe_resource(uri).await
    }

    async fn unsubscribe_resource(&self, uri: &str) -> Result<(), SessionError> {
        self.session.unsubscribe_resource(uri).await
    }

    async fn set_logging_level(&self, level: &str) -> Result<(), SessionError> {
        self.session.set_logging_level(level).await
    }

    fn resource_updates(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        self.session.resource_updates()
    }

    fn has_ended(&self) -> bool {
        self.session.has_ended() || self.control.exited().now_or_never().is_some()
    }

    async fn close(&self) {
        // A process that exited by itself (a crash) has closed its stdout: let the protocol
        // session see that end first, so that requests still waiting on it fail as the server's
        // failure and not as requests the gateway gave up on.
        if self.control.exited().now_or_never().is_some() {
            let _ = tokio::time::timeout(PROTOCOL_END_GRACE, self.session.closed()).await;
        }
        // Closing stdin first lets a well-behaved server exit on its own; the process group is
        // then signalled, and killed once the grace period has passed.
        self.session.close().await;
        self.control.terminate(self.stop_grace).await;
    }

    async fn closed(&self) -> ExitStatusInfo {
        let protocol = self.session.closed();
        let process = self.control.exited();
        tokio::pin!(protocol);
        tokio::pin!(process);
        tokio::select! {
            exit = &mut process => exit,
            protocol_end = &mut protocol => {
                // The process usually follows its stdout within moments; prefer its status,
                // which says more (the exit code or signal).
                match tokio::time::timeout(std::time::Duration::from_millis(500), process).await {
                    Ok(exit) => exit,
                    Err(_) => protocol_end,
                }
            }
        }
    }
}

/// Dispatches each launch to the launcher registered for its mode (`spec.launch.mode()`),
/// built-in and registered modes alike. A mode without a launcher of its own goes to the
/// fallback, when there is one, and is refused with [`LaunchError::UnsupportedMode`] otherwise.
#[derive(Default)]
pub struct CompositeLauncher {
    by_mode: HashMap<String, Arc<dyn ServerLauncher>>,
    fallback: Option<Arc<dyn ServerLauncher>>,
}

impl CompositeLauncher {
    pub fn new() -> Self {
        Self::default()
    }

    /// Launches servers of mode `mode` with `launcher` (replacing an earlier one for it).
    #[must_use]
    pub fn with_mode(mut self, mode: impl Into<String>, launcher: Arc<dyn ServerLauncher>) -> Self {
        self.by_mode.insert(mode.into(), launcher);
        self
    }

    /// Launches servers of every mode without a launcher of its own with `launcher`.
    #[must_use]
    pub fn otherwise(mut self, launcher: Arc<dyn ServerLauncher>) -> Self {
        self.fallback = Some(launcher);
        self
    }

    /// The modes with a launcher of their own, sorted.
    pub fn modes(&self) -> Vec<&str> {
        let mut modes: Vec<&str> = self.by_mode.keys().map(String::as_str).collect();
        modes.sort_unstable();
        modes
    }
}

impl std::fmt::Debug for CompositeLauncher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompositeLauncher")
            .field("modes", &self.modes())
            .field("fallback", &self.fallback.is_some())
            .finish()
    }
}

#[async_trait]
impl ServerLauncher for CompositeLauncher {
    async fn launch(
        &self,
        spec: &ServerSpec,
        logs: Arc<LogBuffer>,
    ) -> Result<LaunchedServer, LaunchError> {
        match self
            .by_mode
            .get(spec.launch.mode())
            .or(self.fallback.as_ref())
        {
            Some(launcher) => launcher.launch(spec, logs).await,
            None => Err(LaunchError::UnsupportedMode(spec.launch.mode().to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use async_trait::async_trait;
    use mcpgw_core::{
        ByteStreams, CallContext, ExitStatusInfo, LaunchError, LaunchSpec, LogBuffer, McpSession,
        ProcessControl, ProcessSpawner, ServerId, ServerLauncher, ServerOutput, ServerSpec,
        SessionError, SpawnedProcess, StdioConnector, Tool, ToolCall, ToolCallOutcome,
    };
    use mcpgw_testkit::clock::FakeClock;
    use tokio::sync::watch;

    use super::StdioLauncher;

    fn ended(description: &str) -> Option<ExitStatusInfo> {
        Some(ExitStatusInfo {
            description: description.to_owned(),
            ..ExitStatusInfo::default()
        })
    }

    async fn wait_ended(receiver: &watch::Sender<Option<ExitStatusInfo>>) -> ExitStatusInfo {
        let mut receiver = receiver.subscribe();
        let exit = receiver.wait_for(Option::is_some).await.unwrap();
        exit.clone().unwrap_or_default()
    }

    /// A process that exits when told to, or when terminated.
    struct Process {
        exit: watch::Sender<Option<ExitStatusInfo>>,
    }

    #[async_trait]
    impl ProcessControl for Process {
        fn pid(&self) -> Option<u32> {
            None
        }

        async fn terminate(&self, _grace: Duration) {
            self.exit.send_if_modified(|exit| {
                let changed = exit.is_none();
                if changed {
                    *exit = ended("terminated");
                }
                changed
            });
        }

        async fn exited(&self) -> ExitStatusInfo {
            wait_ended(&self.exit).await
        }
    }

    struct Spawner {
        process: Arc<Process>,
    }

    #[async_trait]
    impl ProcessSpawner for Spawner {
        fn supports(&self, _launch: &LaunchSpec) -> bool {
            true
        }

        async fn spawn(
            &self,
            _server_id: &ServerId,
            _launch: &LaunchSpec,
            _logs: Arc<LogBuffer>,
        ) -> Result<SpawnedProcess, LaunchError> {
            Ok(SpawnedProcess {
                streams: ByteStreams {
                    to_server: Box::pin(tokio::io::sink()),
                    from_server: ServerOutput::stream(tokio::io::empty()),
                },
                control: self.process.clone(),
            })
        }
    }

    /// A protocol session that notes whether it had ended by itself when it was closed.
    struct Protocol {
        end: watch::Sender<Option<ExitStatusInfo>>,
        ended_before_close: Mutex<Option<bool>>,
    }

    #[async_trait]
    impl McpSession for Protocol {
        async fn list_tools(&self) -> Result<Vec<Tool>, SessionError> {
            Ok(Vec::new())
        }

        async fn call_tool(
            &self,
            _call: ToolCall,
            _ctx: CallContext,
        ) -> Result<ToolCallOutcome, SessionError> {
            Err(SessionError::transport("not used"))
        }

        async fn ping(&self) -> Result<(), SessionError> {
            Ok(())
        }

        fn has_ended(&self) -> bool {
            self.end.borrow().is_some()
        }

        async fn close(&self) {
            let already = self.has_ended();
            self.ended_before_close
                .lock()
                .unwrap()
                .get_or_insert(already);
            self.end.send_if_modified(|end| {
                let changed = end.is_none();
                if changed {
                    *end = ended("closed by the gateway");
                }
                changed
            });
        }

        async fn closed(&self) -> ExitStatusInfo {
            wait_ended(&self.end).await
        }
    }

    struct Connector {
        protocol: Arc<Protocol>,
    }

    #[async_trait]
    impl StdioConnector for Connector {
        async fn connect(
            &self,
            _server_id: &ServerId,
            _streams: ByteStreams,
        ) -> Result<Arc<dyn McpSession>, LaunchError> {
            Ok(self.protocol.clone())
        }
    }

    async fn launched() -> (Arc<dyn McpSession>, Arc<Process>, Arc<Protocol>) {
        let process = Arc::new(Process {
            exit: watch::channel(None).0,
        });
        let protocol = Arc::new(Protocol {
            end: watch::channel(None).0,
            ended_before_close: Mutex::new(None),
        });
        let launcher = StdioLauncher::new(
            Arc::new(Spawner {
                process: process.clone(),
            }),
            Arc::new(Connector {
                protocol: protocol.clone(),
            }),
            Duration::from_secs(1),
        );
        let id = ServerId::parse("s").unwrap();
        let logs = Arc::new(LogBuffer::new(id.clone(), Arc::new(FakeClock::new())));
        let spec = ServerSpec::subprocess(id, vec!["server".to_owned()]);
        let session = launcher.launch(&spec, logs).await.unwrap().session;
        (session, process, protocol)
    }

    #[tokio::test]
    async fn a_crashed_process_lets_its_protocol_session_end_by_itself_before_the_close() {
        let (session, process, protocol) = launched().await;
        assert!(!session.has_ended());
        process.exit.send_replace(ended("exited with code 1"));
        // The process is gone: the session has ended, even before the protocol noticed.
        assert!(session.has_ended());
        let noticed = Arc::new(AtomicBool::new(false));
        let protocol_end = {
            let protocol = protocol.clone();
            let noticed = noticed.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                noticed.store(true, Ordering::SeqCst);
                protocol
                    .end
                    .send_replace(ended("the server closed the connection"));
            })
        };
        session.close().await;
        protocol_end.await.unwrap();
        assert!(noticed.load(Ordering::SeqCst));
        assert_eq!(
            *protocol.ended_before_close.lock().unwrap(),
            Some(true),
            "the protocol session ended by itself before it was closed"
        );
    }

    #[tokio::test]
    async fn closing_a_running_server_closes_its_protocol_session_at_once() {
        let (session, process, protocol) = launched().await;
        session.close().await;
        assert_eq!(*protocol.ended_before_close.lock().unwrap(), Some(false));
        assert!(
            process.exit.borrow().is_some(),
            "the process was terminated"
        );
    }

    /// A launcher that refuses every launch with its own name, so a test sees who was asked.
    struct Named(&'static str);

    #[async_trait]
    impl ServerLauncher for Named {
        async fn launch(
            &self,
            _spec: &ServerSpec,
            _logs: Arc<LogBuffer>,
        ) -> Result<mcpgw_core::LaunchedServer, LaunchError> {
            Err(LaunchError::Other(self.0.to_owned()))
        }
    }

    async fn who_launches(launcher: &super::CompositeLauncher, launch: LaunchSpec) -> String {
        let mut spec = ServerSpec::subprocess(ServerId::parse("s").unwrap(), vec!["x".into()]);
        spec.launch = launch;
        let logs = Arc::new(LogBuffer::new(spec.id.clone(), Arc::new(FakeClock::new())));
        match launcher.launch(&spec, logs).await {
            Err(LaunchError::Other(name)) => name,
            Err(other) => other.to_string(),
            Ok(_) => panic!("the fake launchers never launch"),
        }
    }

    #[tokio::test]
    async fn the_composite_launcher_picks_by_mode_name_built_in_and_registered_alike() {
        let custom = |mode: &str| {
            LaunchSpec::Custom(mcpgw_core::CustomLaunch::new(mode, Default::default()).unwrap())
        };
        let remote = LaunchSpec::Remote {
            endpoint: "http://127.0.0.1:1/mcp".into(),
            headers: Default::default(),
            token_exchange: None,
        };
        let launcher = super::CompositeLauncher::new()
            .with_mode("subprocess", Arc::new(Named("processes")))
            .with_mode("in_process", Arc::new(Named("in process")));
        assert_eq!(launcher.modes(), ["in_process", "subprocess"]);
        let subprocess = LaunchSpec::Subprocess {
            command: vec!["x".into()],
            env: Default::default(),
            cwd: None,
        };
        assert_eq!(
            who_launches(&launcher, subprocess.clone()).await,
            "processes"
        );
        assert_eq!(
            who_launches(&launcher, custom("in_process")).await,
            "in process"
        );
        // A mode nobody registered is refused with its name.
        assert_eq!(
            who_launches(&launcher, custom("firecracker")).await,
            "mode `firecracker` is not supported by this gateway's launchers"
        );
        assert_eq!(
            who_launches(&launcher, remote.clone()).await,
            "mode `remote` is not supported by this gateway's launchers"
        );
        // With a fallback, every other mode goes there; registered modes keep their launcher.
        let launcher = launcher.otherwise(Arc::new(Named("everything else")));
        assert_eq!(who_launches(&launcher, remote).await, "everything else");
        assert_eq!(
            who_launches(&launcher, custom("firecracker")).await,
            "everything else"
        );
        assert_eq!(who_launches(&launcher, subprocess).await, "processes");
    }
}
