//! The MCP server domain of mcpgw.
//!
//! This crate holds what a managed MCP server *is*: its identifier, its launch specification,
//! the five-state lifecycle (`cold`, `initializing`, `ready`, `degraded`, `dead`) with its legal
//! transitions, consecutive-failure counting and restart backoff, the health-check and idle-reap
//! schedule, the tool catalogue, the stderr ring buffer and the domain events. The
//! [`ServerManager`] orchestrates all of it through ports ([`ServerLauncher`], [`McpSession`],
//! [`Clock`], [`EventSink`], [`ServerRepository`]). The [`ToolListStore`] port keeps the tool
//! lists servers listed, so that a restart can serve them again
//! ([`ServerManager::restore_tools`]) instead of starting each server to ask.
//!
//! It must never do I/O itself: no sockets, files, processes, runtimes or databases. Time comes
//! from the [`Clock`] port and everything that touches the outside world comes through a port,
//! so the whole lifecycle can be tested with fakes and a fake clock, without sleeping.
//!
//! # Example
//!
//! A manager over in-memory fakes of its ports (from `mcpgw-testkit`): registering a server
//! starts nothing, and the first tool call starts it.
//!
//! ```rust
//! use std::sync::Arc;
//!
//! use mcpgw_core::{
//!     CallContext, ManagerSettings, NullEventSink, ServerId, ServerManager, ServerSpec,
//!     ServerState, ToolCall,
//! };
//! use mcpgw_testkit::clock::FakeClock;
//! use mcpgw_testkit::fakes::{FakeLauncher, TokioSpawner};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), mcpgw_core::CoreError> {
//! let manager = ServerManager::new(
//!     Arc::new(FakeLauncher::new()), // the bundled server launches processes and containers
//!     Arc::new(FakeClock::new()),
//!     Arc::new(NullEventSink),
//!     Arc::new(TokioSpawner),
//!     None, // no repository: servers created at run time are not kept
//!     ManagerSettings::default(),
//! );
//! let id = ServerId::parse("demo").expect("a valid id");
//! manager
//!     .register(ServerSpec::subprocess(id.clone(), vec!["demo-server".into()]))
//!     .await?;
//! assert_eq!(manager.snapshot(&id)?.state, ServerState::Cold);
//!
//! let call = ToolCall {
//!     name: "echo".into(),
//!     arguments: json!({"text": "hi"}).as_object().cloned(),
//! };
//! let outcome = manager.call_tool(&id, call, CallContext::default()).await?;
//! assert_eq!(outcome.result["content"][0]["text"], "hi");
//! assert_eq!(manager.snapshot(&id)?.state, ServerState::Ready);
//! manager.shutdown().await;
//! # Ok(())
//! # }
//! ```

pub mod audit;
pub mod census;
pub mod endpoints;
pub mod error;
pub mod event_log;
pub mod events;
pub mod fleet;
pub mod frontend;
mod health;
pub mod history;
pub mod id;
pub mod launch_mode;
pub mod logs;
pub mod manager;
pub mod pins;
pub mod ports;
pub mod relay;
pub mod spec;
pub mod state;
pub mod suggest;
pub mod task;
pub mod time;
pub mod tool;
pub mod trace;

pub use endpoints::{
    EndpointName, EndpointNameError, EndpointRepository, EndpointSpec, ToolSelector,
};
pub use error::{CoreError, ErrorKind};
pub use event_log::{CompactionReport, EventLog, EventLogError, EventLogStats, EventRetention};
pub use events::{
    DomainEvent, EVENT_TYPES, EventObserver, EventSink, NullEventSink, PublishedEvent,
};
pub use fleet::{FleetStore, ReplicaHeartbeat, ReplicaStatus};
pub use frontend::{
    Caller, CallerScopes, FrontendError, FrontendErrorKind, ListChanges, McpFrontend,
    ResourceSubscription, SubjectToken, empty_completion,
};
pub use health::{BackoffPolicy, FailureTracker};
pub use history::{HistoryPage, InMemoryInvocationHistory, InvocationHistory, InvocationRecord};
pub use id::{IdError, ServerId, bounded_for_message};
pub use launch_mode::{LaunchMode, LaunchModeError, SettingsError};
pub use logs::{
    LOG_LINE_KEPT_BYTES, LOG_LINE_MAX_BYTES, LOG_RING_CAPACITY, LogBuffer, LogLine,
    LogLineSplitter, sanitize_log_line,
};
pub use manager::{
    ManagerSettings, ResyncReport, ServerManager, ServerSnapshot, ToolList, ToolSource,
    WeakServerManager,
};
pub use pins::{
    ObservedTool, PinChange, PinDecisionError, PinMode, PinReview, PinStatus, PinnedTool, ToolPin,
    ToolPinStore, ToolPinning, approve_pin, changed_fields, reject_pin, review_tools,
    stored::{decode_observed, decode_pinned, encode_observed, encode_pinned},
    tool_digest,
};
pub use ports::{
    ByteStreams, ExitStatusInfo, LaunchError, LaunchedServer, McpSession, ProcessControl,
    ProcessSpawner, RepositoryError, ServerLauncher, ServerOutput, ServerRepository, SessionError,
    SessionErrorKind, SpawnedProcess, StdioConnector, StoredToolList, TaskSpawner, ToolListStore,
};
pub use relay::{
    CallTicket, ClientRelay, LOG_LEVELS, RelayCapabilities, RelayError, RelayRoutes, RelaySession,
    Relayed, log_severity,
};
pub use spec::{
    ClientAuth, ContainerCli, ContainerEngine, CustomLaunch, LaunchSpec, ServerOrigin, ServerSpec,
    TokenExchange,
};
pub use state::{ServerState, TransitionError};
pub use task::{
    TASK_METHODS, TASK_RESULT, TASKS_EXTENSION, scope_task, scoped_id, split_scoped_id,
};
pub use time::{Clock, MonoTime, Timestamp};
pub use tool::{
    CallContext, INPUT_REQUIRED, InputRound, ProgressUpdate, Tool, ToolCall, ToolCallOutcome,
    is_input_required,
};
