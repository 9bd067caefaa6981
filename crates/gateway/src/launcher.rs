//! Launchers composed from lower-level ports.

use std::sync::Arc;

use async_trait::async_trait;
use mcpgw_core::{
    CallContext, ExitStatusInfo, LaunchError, LaunchedServer, LogBuffer, McpSession,
    ProcessControl, ProcessSpawner, ServerLauncher, ServerSpec, SessionError, StdioConnector, Tool,
    ToolCall, ToolCallOutcome,
};
use serde_json::{Map, Value};

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
            return Err(LaunchError::UnsupportedMode(spec.launch.mode()));
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

    async fn list_prompts(&self) -> Result<Vec<Value>, SessionError> {
        self.session.list_prompts().await
    }

    async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<Value, SessionError> {
        self.session.get_prompt(name, arguments).await
    }

    async fn list_resources(&self) -> Result<Vec<Value>, SessionError> {
        self.session.list_resources().await
    }

    async fn list_resource_templates(&self) -> Result<Vec<Value>, SessionError> {
        self.session.list_resource_templates().await
    }

    async fn read_resource(&self, uri: &str) -> Result<Value, SessionError> {
        self.session.read_resource(uri).await
    }

    async fn close(&self) {
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

/// Says whether a launcher takes a server.
pub type LaunchFilter = fn(&ServerSpec) -> bool;

/// Dispatches each launch to the first launcher that accepts its mode.
pub struct CompositeLauncher {
    launchers: Vec<(LaunchFilter, Arc<dyn ServerLauncher>)>,
}

impl Default for CompositeLauncher {
    fn default() -> Self {
        Self::new()
    }
}

impl CompositeLauncher {
    pub fn new() -> Self {
        Self {
            launchers: Vec::new(),
        }
    }

    /// Adds a launcher for the specs `accepts` says yes to.
    #[must_use]
    pub fn with(mut self, accepts: LaunchFilter, launcher: Arc<dyn ServerLauncher>) -> Self {
        self.launchers.push((accepts, launcher));
        self
    }
}

#[async_trait]
impl ServerLauncher for CompositeLauncher {
    async fn launch(
        &self,
        spec: &ServerSpec,
        logs: Arc<LogBuffer>,
    ) -> Result<LaunchedServer, LaunchError> {
        match self.launchers.iter().find(|(accepts, _)| accepts(spec)) {
            Some((_, launcher)) => launcher.launch(spec, logs).await,
            None => Err(LaunchError::UnsupportedMode(spec.launch.mode())),
        }
    }
}
