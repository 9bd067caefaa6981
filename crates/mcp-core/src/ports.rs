//! The ports of the MCP server domain: what adapters implement so the domain can run servers,
//! talk MCP to them and remember them.
//!
//! Launching is split in two so that process handling and protocol handling stay apart:
//! a [`ProcessSpawner`] starts something that speaks MCP over a pair of byte streams (a local
//! process, a container), and a [`StdioConnector`] runs the MCP client protocol over such
//! streams. The application layer combines the two into a [`ServerLauncher`]; an embedder may
//! instead implement [`ServerLauncher`] directly (for in-process servers, say).

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::error::ErrorKind;
use crate::id::ServerId;
use crate::logs::LogBuffer;
use crate::spec::{LaunchSpec, ServerSpec};
use crate::time::Timestamp;
use crate::tool::{CallContext, Tool, ToolCall, ToolCallOutcome};

/// Why a session operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionErrorKind {
    /// The connection to the server broke, or the server exited. Counts against its health.
    Transport,
    /// The server answered with a JSON-RPC error. The server is fine; the request was not.
    Protocol { code: i32 },
    /// No answer within the allowed time. Counts against its health.
    Timeout,
    /// The caller cancelled the request.
    Cancelled,
    /// The session was closed by the gateway.
    Closed,
}

impl SessionErrorKind {
    pub fn counts_against_health(self) -> bool {
        matches!(
            self,
            SessionErrorKind::Transport | SessionErrorKind::Timeout
        )
    }

    pub fn error_kind(self) -> ErrorKind {
        match self {
            SessionErrorKind::Transport | SessionErrorKind::Closed => ErrorKind::Unavailable,
            SessionErrorKind::Protocol { .. } => ErrorKind::Invalid,
            SessionErrorKind::Timeout => ErrorKind::Timeout,
            SessionErrorKind::Cancelled => ErrorKind::Conflict,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SessionErrorKind::Transport => "transport",
            SessionErrorKind::Protocol { .. } => "protocol",
            SessionErrorKind::Timeout => "timeout",
            SessionErrorKind::Cancelled => "cancelled",
            SessionErrorKind::Closed => "closed",
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct SessionError {
    pub kind: SessionErrorKind,
    pub message: String,
    /// The `data` of an upstream's JSON-RPC error, passed on to the client as it was.
    pub data: Option<Value>,
}

impl SessionError {
    pub fn new(kind: SessionErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            data: None,
        }
    }

    #[must_use]
    pub fn with_data(mut self, data: Option<Value>) -> Self {
        self.data = data;
        self
    }

    pub fn transport(message: impl Into<String>) -> Self {
        Self::new(SessionErrorKind::Transport, message)
    }

    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(SessionErrorKind::Timeout, message)
    }
}

/// An initialized MCP client session with one upstream server.
///
/// Contract for implementors:
/// - `list_tools` follows pagination to the end and returns every tool.
/// - A JSON-RPC error from the server is [`SessionErrorKind::Protocol`]; a broken pipe, an exited
///   process or an unparseable stream is [`SessionErrorKind::Transport`].
/// - `call_tool` honours `ctx.cancellation` (the upstream request is cancelled, and the call
///   fails with [`SessionErrorKind::Cancelled`]) and relays progress to `ctx.progress`.
/// - `close` ends the session and everything it owns (the process, the container), and is
///   idempotent. Requests after it fail at once with [`SessionErrorKind::Closed`].
/// - `closed` completes once the session can no longer serve requests, for whatever reason.
/// - A server that dies fails the requests waiting on it at once, with
///   [`SessionErrorKind::Transport`], instead of leaving them to wait for an answer that cannot
///   come; the session has ended then, and later requests fail too.
#[async_trait]
pub trait McpSession: Send + Sync {
    async fn list_tools(&self) -> Result<Vec<Tool>, SessionError>;
    async fn call_tool(
        &self,
        call: ToolCall,
        ctx: CallContext,
    ) -> Result<ToolCallOutcome, SessionError>;
    async fn ping(&self) -> Result<(), SessionError>;
    async fn close(&self);
    async fn closed(&self) -> ExitStatusInfo;

    /// Whether the session has ended (what `closed` waits for) already. A request that failed
    /// because its session ended is part of that end, which the manager counts once, as a
    /// crash, instead of once per request that was in flight.
    fn has_ended(&self) -> bool {
        false
    }

    /// A counter that moves each time the upstream announces that its tool list changed
    /// (`notifications/tools/list_changed`); `None` when the session cannot tell.
    fn tool_list_changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }

    /// Counters that move each time the upstream announces that its prompts or its resources
    /// changed; `None` when the session cannot tell.
    fn list_changes(&self) -> Option<tokio::sync::watch::Receiver<crate::frontend::ListChanges>> {
        None
    }

    /// The upstream's prompts, as MCP `Prompt` objects, pagination followed to the end.
    async fn list_prompts(&self) -> Result<Vec<Value>, SessionError> {
        Ok(Vec::new())
    }

    /// `prompts/get`: the MCP `GetPromptResult` as JSON, or an `InputRequiredResult` when
    /// `ctx.input` says the caller speaks the 2026-07-28 era (see [`crate::InputRound`]).
    /// What the server asks mid-request goes to `ctx.relay`, as for a tool call.
    async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
        ctx: CallContext,
    ) -> Result<Value, SessionError> {
        let _ = (arguments, ctx);
        Err(SessionError::new(
            SessionErrorKind::Protocol { code: -32602 },
            format!("unknown prompt: {name}"),
        ))
    }

    /// The upstream's resources, as MCP `Resource` objects, pagination followed to the end.
    async fn list_resources(&self) -> Result<Vec<Value>, SessionError> {
        Ok(Vec::new())
    }

    /// The upstream's resource templates, as MCP `ResourceTemplate` objects.
    async fn list_resource_templates(&self) -> Result<Vec<Value>, SessionError> {
        Ok(Vec::new())
    }

    /// `resources/read`: the MCP `ReadResourceResult` as JSON, or an `InputRequiredResult`, as
    /// for [`McpSession::get_prompt`].
    async fn read_resource(&self, uri: &str, ctx: CallContext) -> Result<Value, SessionError> {
        let _ = ctx;
        Err(SessionError::new(
            SessionErrorKind::Protocol { code: -32002 },
            format!("resource not found: {uri}"),
        ))
    }

    /// `completion/complete` with `params` as MCP's `CompleteRequestParams` JSON (`ref`,
    /// `argument`, `context`): the MCP `CompleteResult` as JSON. A server that offers no
    /// completions answers an empty completion, as this default does.
    async fn complete(&self, params: Value) -> Result<Value, SessionError> {
        let _ = params;
        Ok(crate::frontend::empty_completion())
    }

    /// Whether the server offers tasks (it declared the tasks extension) in a way this session
    /// can reach; `false` in this default.
    fn offers_tasks(&self) -> bool {
        false
    }

    /// `tasks/get`, `tasks/update` or `tasks/cancel` (`method`) of one of the server's tasks,
    /// with `params` as the client wrote them but for `taskId`, which is the server's own:
    /// the result as JSON. A session that cannot carry requests of the 2026-07-28 era, where
    /// tasks live, answers [`SessionErrorKind::Protocol`] -32601, as this default does.
    async fn task_request(&self, method: &str, params: Value) -> Result<Value, SessionError> {
        let _ = params;
        Err(SessionError::new(
            SessionErrorKind::Protocol { code: -32601 },
            format!("the server serves no tasks (asked {method})"),
        ))
    }

    /// `logging/setLevel`: asks the server to send log messages at `level` (an RFC 5424 name)
    /// and above. A server that does not declare the `logging` capability is not asked, as in
    /// this default.
    async fn set_logging_level(&self, level: &str) -> Result<(), SessionError> {
        let _ = level;
        Ok(())
    }

    /// `resources/subscribe`: asks the server to announce each change of `uri`; the
    /// announcements arrive on [`McpSession::resource_updates`]. A server that offers no
    /// subscriptions is refused with [`SessionErrorKind::Protocol`] -32601 without being
    /// asked, as this default does.
    async fn subscribe_resource(&self, uri: &str) -> Result<(), SessionError> {
        Err(SessionError::new(
            SessionErrorKind::Protocol { code: -32601 },
            format!("the server offers no resource subscriptions (asked for {uri})"),
        ))
    }

    /// `resources/unsubscribe`.
    async fn unsubscribe_resource(&self, uri: &str) -> Result<(), SessionError> {
        let _ = uri;
        Ok(())
    }

    /// The URIs the server announces with `notifications/resources/updated`, as they arrive,
    /// for every subscription of the session; `None` when the session cannot tell. The
    /// receiver ends when the session does.
    fn resource_updates(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        None
    }
}

/// How a server or its session ended, as far as it is known.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExitStatusInfo {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub description: String,
}

impl std::fmt::Display for ExitStatusInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.description)
    }
}

#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    #[error("the command `{command}` was not found; check the path and that it is installed")]
    CommandNotFound { command: String },
    #[error("the command `{command}` could not be run: {reason}")]
    SpawnFailed { command: String, reason: String },
    #[error("the server exited during start ({exit}); its stderr is in the logs")]
    ExitedDuringStart { exit: ExitStatusInfo },
    #[error("the server did not complete MCP initialization: {0}")]
    Handshake(String),
    #[error("the server did not become ready within {0:?}")]
    Timeout(Duration),
    #[error("mode `{0}` is not supported by this gateway's launchers")]
    UnsupportedMode(String),
    #[error("{0}")]
    Other(String),
}

/// A started server: its session, ready for requests.
pub struct LaunchedServer {
    pub session: Arc<dyn McpSession>,
}

impl std::fmt::Debug for LaunchedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchedServer").finish_non_exhaustive()
    }
}

/// Starts a server and hands back an initialized session.
///
/// `logs` receives the server's stderr when the mode has one. A launcher that returns an error
/// must have cleaned up everything it started. A spec of a mode the launcher does not take is
/// refused with [`LaunchError::UnsupportedMode`], before anything is started. Closing the
/// session of a launched server ends it and stops whatever the launch started (see
/// [`McpSession::close`]).
#[async_trait]
pub trait ServerLauncher: Send + Sync {
    async fn launch(
        &self,
        spec: &ServerSpec,
        logs: Arc<LogBuffer>,
    ) -> Result<LaunchedServer, LaunchError>;
}

/// The two byte streams a stdio MCP server talks over.
pub struct ByteStreams {
    /// What the gateway writes: the server's stdin.
    pub to_server: Pin<Box<dyn AsyncWrite + Send>>,
    /// What the gateway reads: the server's stdout.
    pub from_server: ServerOutput,
}

/// What a stdio server writes to, as the gateway reads it.
///
/// A spawner that holds the read end of a pipe (a child's stdout) hands over the descriptor
/// itself: a connector can then read it from whichever thread serves the calls, so that the
/// answer to a call wakes the thread waiting for it and no other. Anything else is a stream.
pub enum ServerOutput {
    /// Any byte stream.
    Stream(Pin<Box<dyn AsyncRead + Send>>),
    /// The read end of a pipe, in non-blocking mode or not.
    #[cfg(unix)]
    Pipe(std::os::fd::OwnedFd),
}

impl ServerOutput {
    /// A stream of any kind.
    pub fn stream(reader: impl AsyncRead + Send + 'static) -> Self {
        Self::Stream(Box::pin(reader))
    }
}

impl std::fmt::Debug for ServerOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stream(_) => f.write_str("ServerOutput::Stream"),
            #[cfg(unix)]
            Self::Pipe(fd) => f.debug_tuple("ServerOutput::Pipe").field(fd).finish(),
        }
    }
}

impl std::fmt::Debug for ByteStreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ByteStreams").finish_non_exhaustive()
    }
}

/// Control over a spawned process (or container).
#[async_trait]
pub trait ProcessControl: Send + Sync {
    /// The OS process id, where there is one.
    fn pid(&self) -> Option<u32>;
    /// Ends the process and everything it started: a polite signal first, a forced kill once
    /// `grace` has passed. Idempotent; returns once nothing is left running.
    async fn terminate(&self, grace: Duration);
    /// Completes when the process has exited.
    async fn exited(&self) -> ExitStatusInfo;
}

/// Something started that speaks MCP over stdio.
pub struct SpawnedProcess {
    pub streams: ByteStreams,
    pub control: Arc<dyn ProcessControl>,
}

impl std::fmt::Debug for SpawnedProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpawnedProcess")
            .field("pid", &self.control.pid())
            .finish()
    }
}

/// Starts processes for the launch modes it supports, with stderr captured into `logs`.
#[async_trait]
pub trait ProcessSpawner: Send + Sync {
    fn supports(&self, launch: &LaunchSpec) -> bool;
    async fn spawn(
        &self,
        server_id: &ServerId,
        launch: &LaunchSpec,
        logs: Arc<LogBuffer>,
    ) -> Result<SpawnedProcess, LaunchError>;
}

/// Runs the MCP client protocol (initialize, then requests) over a pair of byte streams.
///
/// `connect` answers once the handshake is done: `initialize` answered, then
/// `notifications/initialized` sent, before any request. A server that closes its stdout
/// before it answers `initialize` is a [`LaunchError::Handshake`]. The session handed back
/// keeps the code of a JSON-RPC error, tells the server of a cancelled call with
/// `notifications/cancelled` for its request id, ends when the server's stdout closes (failing
/// the requests in flight at once, as [`SessionErrorKind::Transport`]), and closes the
/// server's stdin when it is closed, which is how a stdio server is asked to finish.
#[async_trait]
pub trait StdioConnector: Send + Sync {
    async fn connect(
        &self,
        server_id: &ServerId,
        streams: ByteStreams,
    ) -> Result<Arc<dyn McpSession>, LaunchError>;
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct RepositoryError(pub String);

/// Durable storage of the servers created at run time (over REST or by an embedder), so that
/// they survive a restart. Servers declared in the configuration file are not stored here.
///
/// Contract: `save` is an upsert and is durable when it returns; `delete` of an unknown id is
/// not an error; `load_all` returns every saved server.
#[async_trait]
pub trait ServerRepository: Send + Sync {
    async fn save(&self, spec: &ServerSpec) -> Result<(), RepositoryError>;
    async fn delete(&self, id: &ServerId) -> Result<(), RepositoryError>;
    async fn load_all(&self) -> Result<Vec<ServerSpec>, RepositoryError>;
}

/// A server's tool list as the gateway learned it from the server, kept so that after a restart
/// the gateway can list the server's tools without starting it again.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredToolList {
    pub server_id: ServerId,
    /// [`ServerSpec::tool_list_digest`] of the definition the list was learned under. A list
    /// is served again only while the server's definition has this digest.
    pub definition_digest: String,
    /// The tools as the server listed them (MCP `Tool` objects, unprefixed names).
    pub tools: Vec<Tool>,
    /// When the gateway learned the list.
    pub learned_at: Timestamp,
}

/// Durable storage of the tool lists the gateway learned, one per server id, so that a restart
/// does not have to start every server that declares no tools to list them again.
///
/// What every implementation guarantees:
/// - `save_tool_lists` keeps every list given, each replacing whatever was kept for its server
///   id (a later list of the same id in one call wins); all of them or none, durable when it
///   returns. Every field round-trips exactly: tools with their nested schemas, the digest, and
///   `learned_at` to the microsecond.
/// - `delete_tool_lists` forgets the lists of the ids given; an id with no list is not an error.
/// - `load_tool_lists` answers every list kept and not deleted, in any order. The lists are a
///   cache: one that can no longer be read back is left out (with a warning in the log) rather
///   than failing the others, and its server is simply probed again.
#[async_trait]
pub trait ToolListStore: Send + Sync {
    async fn load_tool_lists(&self) -> Result<Vec<StoredToolList>, RepositoryError>;
    async fn save_tool_lists(&self, lists: &[StoredToolList]) -> Result<(), RepositoryError>;
    async fn delete_tool_lists(&self, ids: &[ServerId]) -> Result<(), RepositoryError>;
}

/// Runs background work (a start that must finish even if its first caller gives up, crash
/// watchers, health checks). The bundled server hands these to tokio; tests may too.
pub trait TaskSpawner: Send + Sync {
    fn spawn(&self, task: futures::future::BoxFuture<'static, ()>);
}
