//! In-memory fakes of the MCP server ports, with knobs to make them misbehave.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::future::BoxFuture;
use mcpgw_core::{
    CallContext, DomainEvent, EventSink, ExitStatusInfo, LaunchError, LaunchedServer, LogBuffer,
    McpSession, ServerId, ServerLauncher, ServerSpec, SessionError, SessionErrorKind, TaskSpawner,
    Timestamp, Tool, ToolCall, ToolCallOutcome,
};
use serde_json::json;
use tokio::sync::{Notify, watch};

/// Hands background tasks to the ambient tokio runtime.
#[derive(Debug, Default, Clone, Copy)]
pub struct TokioSpawner;

impl TaskSpawner for TokioSpawner {
    fn spawn(&self, task: BoxFuture<'static, ()>) {
        tokio::spawn(task);
    }
}

/// Records every published event, in order.
#[derive(Default)]
pub struct RecordingEventSink {
    events: Mutex<Vec<(Timestamp, DomainEvent)>>,
}

impl RecordingEventSink {
    pub fn events(&self) -> Vec<DomainEvent> {
        self.lock().iter().map(|(_, event)| event.clone()).collect()
    }

    pub fn event_types(&self) -> Vec<&'static str> {
        self.lock()
            .iter()
            .map(|(_, event)| event.event_type())
            .collect()
    }

    /// The `(from, to)` pairs of every state change, in order.
    pub fn transitions(&self) -> Vec<(String, String)> {
        self.lock()
            .iter()
            .filter_map(|(_, event)| match event {
                DomainEvent::McpServerStateChanged { from, to, .. } => {
                    Some((from.to_string(), to.to_string()))
                }
                _ => None,
            })
            .collect()
    }

    pub fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Timestamp, DomainEvent)>> {
        self.events
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl EventSink for RecordingEventSink {
    fn publish(&self, occurred_at: Timestamp, event: DomainEvent) {
        self.lock().push((occurred_at, event));
    }
}

/// What a fake server does. Change it between starts through [`FakeLauncher::behaviour`].
#[derive(Clone)]
pub struct FakeBehaviour {
    pub tools: Vec<Tool>,
    /// When set, every launch fails with this error.
    pub launch_error: Option<LaunchError>,
    /// When set, launches wait until it is notified (to hold a start in `initializing`).
    pub launch_gate: Option<Arc<Notify>>,
    /// Stderr lines the fake "writes" at launch.
    pub stderr_at_launch: Vec<String>,
}

impl Default for FakeBehaviour {
    fn default() -> Self {
        Self {
            tools: vec![Tool::new("echo").with_description("echoes its text")],
            launch_error: None,
            launch_gate: None,
            stderr_at_launch: Vec::new(),
        }
    }
}

/// A launcher whose servers are in-memory [`FakeSession`]s.
#[derive(Default)]
pub struct FakeLauncher {
    behaviours: Mutex<HashMap<String, FakeBehaviour>>,
    sessions: Mutex<HashMap<String, Vec<Arc<FakeSession>>>>,
    launches: AtomicUsize,
}

impl FakeLauncher {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets what the server `id` does on its next launches.
    pub fn set_behaviour(&self, id: &str, behaviour: FakeBehaviour) {
        self.behaviours
            .lock()
            .unwrap()
            .insert(id.to_owned(), behaviour);
    }

    pub fn behaviour(&self, id: &str) -> FakeBehaviour {
        self.behaviours
            .lock()
            .unwrap()
            .get(id)
            .cloned()
            .unwrap_or_default()
    }

    /// How many launches were attempted, over all servers.
    pub fn launches(&self) -> usize {
        self.launches.load(Ordering::SeqCst)
    }

    /// The most recent session of server `id`.
    pub fn session(&self, id: &str) -> Option<Arc<FakeSession>> {
        self.sessions
            .lock()
            .unwrap()
            .get(id)
            .and_then(|all| all.last().cloned())
    }

    /// Every session ever launched for `id`, oldest first.
    pub fn sessions(&self, id: &str) -> Vec<Arc<FakeSession>> {
        self.sessions
            .lock()
            .unwrap()
            .get(id)
            .cloned()
            .unwrap_or_default()
    }
}

#[async_trait]
impl ServerLauncher for FakeLauncher {
    async fn launch(
        &self,
        spec: &ServerSpec,
        logs: Arc<LogBuffer>,
    ) -> Result<LaunchedServer, LaunchError> {
        self.launches.fetch_add(1, Ordering::SeqCst);
        let behaviour = self.behaviour(spec.id.as_str());
        if let Some(gate) = &behaviour.launch_gate {
            gate.notified().await;
        }
        for line in &behaviour.stderr_at_launch {
            logs.push_raw(line.as_bytes());
        }
        if let Some(error) = behaviour.launch_error {
            return Err(error);
        }
        let session = Arc::new(FakeSession::new(spec.id.clone(), behaviour.tools));
        self.sessions
            .lock()
            .unwrap()
            .entry(spec.id.as_str().to_owned())
            .or_default()
            .push(Arc::clone(&session));
        Ok(LaunchedServer { session })
    }
}

/// An in-memory MCP session. Tools answer by name:
/// - `echo` returns its `text` argument;
/// - `tool_error` returns an `isError` result;
/// - `protocol_error` fails with a JSON-RPC error;
/// - `transport_error` fails as if the connection broke (without closing the session);
/// - `hang` never answers until cancelled.
/// - `wait_for_crash` fails as a transport failure once the session ended.
///
/// Every other name is a JSON-RPC "unknown tool" error.
pub struct FakeSession {
    pub server_id: ServerId,
    tools: Vec<Tool>,
    healthy: AtomicBool,
    closed: watch::Sender<Option<ExitStatusInfo>>,
    calls: Mutex<Vec<ToolCall>>,
    pings: AtomicUsize,
    closes: AtomicUsize,
}

impl FakeSession {
    pub fn new(server_id: ServerId, tools: Vec<Tool>) -> Self {
        Self {
            server_id,
            tools,
            healthy: AtomicBool::new(true),
            closed: watch::channel(None).0,
            calls: Mutex::new(Vec::new()),
            pings: AtomicUsize::new(0),
            closes: AtomicUsize::new(0),
        }
    }

    /// Makes pings fail (`false`) or succeed (`true`).
    pub fn set_healthy(&self, healthy: bool) {
        self.healthy.store(healthy, Ordering::SeqCst);
    }

    /// Ends the session as a crash would.
    pub fn crash(&self, description: &str) {
        self.closed.send_replace(Some(ExitStatusInfo {
            code: Some(1),
            signal: None,
            description: description.to_owned(),
        }));
    }

    pub fn is_closed(&self) -> bool {
        self.closed.borrow().is_some()
    }

    pub fn calls(&self) -> Vec<ToolCall> {
        self.calls.lock().unwrap().clone()
    }

    pub fn pings(&self) -> usize {
        self.pings.load(Ordering::SeqCst)
    }

    /// How many times `close` was called.
    pub fn closes(&self) -> usize {
        self.closes.load(Ordering::SeqCst)
    }

    fn ensure_open(&self) -> Result<(), SessionError> {
        if self.is_closed() {
            Err(SessionError::transport("the session is closed"))
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl McpSession for FakeSession {
    async fn list_tools(&self) -> Result<Vec<Tool>, SessionError> {
        self.ensure_open()?;
        Ok(self.tools.clone())
    }

    async fn call_tool(
        &self,
        call: ToolCall,
        ctx: CallContext,
    ) -> Result<ToolCallOutcome, SessionError> {
        self.ensure_open()?;
        self.calls.lock().unwrap().push(call.clone());
        let text = |text: &str| json!({"content": [{"type": "text", "text": text}]});
        match call.name.as_str() {
            "echo" => {
                let argument = call
                    .arguments
                    .as_ref()
                    .and_then(|arguments| arguments.get("text"))
                    .and_then(|text| text.as_str())
                    .unwrap_or_default()
                    .to_owned();
                Ok(ToolCallOutcome {
                    result: text(&argument),
                    is_error: false,
                })
            }
            "tool_error" => Ok(ToolCallOutcome {
                result: json!({"content": [{"type": "text", "text": "it failed"}], "isError": true}),
                is_error: true,
            }),
            "protocol_error" => Err(SessionError::new(
                SessionErrorKind::Protocol { code: -32603 },
                "internal error in the tool",
            )),
            "transport_error" => Err(SessionError::transport("connection reset")),
            "hang" => {
                ctx.cancellation.cancelled().await;
                Err(SessionError::new(SessionErrorKind::Cancelled, "cancelled"))
            }
            "wait_for_crash" => {
                let _ = self.closed().await;
                Err(SessionError::transport(
                    "the connection ended before the answer",
                ))
            }
            other => Err(SessionError::new(
                SessionErrorKind::Protocol { code: -32602 },
                format!("unknown tool: {other}"),
            )),
        }
    }

    async fn ping(&self) -> Result<(), SessionError> {
        self.pings.fetch_add(1, Ordering::SeqCst);
        self.ensure_open()?;
        if self.healthy.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(SessionError::transport("no answer to ping"))
        }
    }

    async fn close(&self) {
        self.closes.fetch_add(1, Ordering::SeqCst);
        self.closed.send_if_modified(|state| {
            if state.is_none() {
                *state = Some(ExitStatusInfo {
                    code: None,
                    signal: None,
                    description: "closed by the gateway".to_owned(),
                });
                true
            } else {
                false
            }
        });
    }

    fn has_ended(&self) -> bool {
        self.is_closed()
    }

    async fn closed(&self) -> ExitStatusInfo {
        let mut receiver = self.closed.subscribe();
        loop {
            if let Some(exit) = receiver.borrow_and_update().clone() {
                return exit;
            }
            if receiver.changed().await.is_err() {
                return ExitStatusInfo::default();
            }
        }
    }
}
