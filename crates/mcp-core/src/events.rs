//! Domain events: every state change and every tool invocation is one.

use serde::Serialize;

use crate::id::ServerId;
use crate::state::ServerState;
use crate::time::Timestamp;

/// What happened. Serialized with `event_type` as the tag and the fields beside it; the sink
/// adds `event_id` and `occurred_at`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event_type")]
#[non_exhaustive]
pub enum DomainEvent {
    McpServerRegistered {
        mcp_server_id: ServerId,
        mode: &'static str,
        origin: &'static str,
    },
    McpServerUpdated {
        mcp_server_id: ServerId,
        restart_required: bool,
    },
    McpServerRemoved {
        mcp_server_id: ServerId,
    },
    McpServerStateChanged {
        mcp_server_id: ServerId,
        from: ServerState,
        to: ServerState,
        reason: String,
    },
    McpServerStarted {
        mcp_server_id: ServerId,
        duration_ms: u64,
        tool_count: usize,
    },
    McpServerStartFailed {
        mcp_server_id: ServerId,
        error: String,
        consecutive_failures: u32,
    },
    McpServerStopped {
        mcp_server_id: ServerId,
        reason: &'static str,
    },
    McpServerCrashed {
        mcp_server_id: ServerId,
        exit: String,
        consecutive_failures: u32,
    },
    /// The server's tool list changed (it announced it, or a restart listed other tools).
    McpServerToolsChanged {
        mcp_server_id: ServerId,
        tool_count: usize,
    },
    HealthCheckFailed {
        mcp_server_id: ServerId,
        error: String,
        consecutive_failures: u32,
    },
    ToolInvocationCompleted {
        mcp_server_id: ServerId,
        tool: String,
        duration_ms: f64,
        is_error: bool,
        principal: Option<String>,
    },
    ToolInvocationFailed {
        mcp_server_id: ServerId,
        tool: String,
        duration_ms: f64,
        error_kind: &'static str,
        error: String,
        principal: Option<String>,
    },
}

impl DomainEvent {
    pub fn event_type(&self) -> &'static str {
        match self {
            DomainEvent::McpServerRegistered { .. } => "McpServerRegistered",
            DomainEvent::McpServerUpdated { .. } => "McpServerUpdated",
            DomainEvent::McpServerRemoved { .. } => "McpServerRemoved",
            DomainEvent::McpServerStateChanged { .. } => "McpServerStateChanged",
            DomainEvent::McpServerStarted { .. } => "McpServerStarted",
            DomainEvent::McpServerStartFailed { .. } => "McpServerStartFailed",
            DomainEvent::McpServerStopped { .. } => "McpServerStopped",
            DomainEvent::McpServerCrashed { .. } => "McpServerCrashed",
            DomainEvent::McpServerToolsChanged { .. } => "McpServerToolsChanged",
            DomainEvent::HealthCheckFailed { .. } => "HealthCheckFailed",
            DomainEvent::ToolInvocationCompleted { .. } => "ToolInvocationCompleted",
            DomainEvent::ToolInvocationFailed { .. } => "ToolInvocationFailed",
        }
    }

    /// The server the event concerns.
    pub fn mcp_server_id(&self) -> Option<&ServerId> {
        match self {
            DomainEvent::McpServerRegistered { mcp_server_id, .. }
            | DomainEvent::McpServerUpdated { mcp_server_id, .. }
            | DomainEvent::McpServerRemoved { mcp_server_id }
            | DomainEvent::McpServerStateChanged { mcp_server_id, .. }
            | DomainEvent::McpServerStarted { mcp_server_id, .. }
            | DomainEvent::McpServerStartFailed { mcp_server_id, .. }
            | DomainEvent::McpServerStopped { mcp_server_id, .. }
            | DomainEvent::McpServerCrashed { mcp_server_id, .. }
            | DomainEvent::McpServerToolsChanged { mcp_server_id, .. }
            | DomainEvent::HealthCheckFailed { mcp_server_id, .. }
            | DomainEvent::ToolInvocationCompleted { mcp_server_id, .. }
            | DomainEvent::ToolInvocationFailed { mcp_server_id, .. } => Some(mcp_server_id),
        }
    }
}

/// A domain event with the identity and time the gateway gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishedEvent {
    /// Increasing within one gateway process.
    pub event_id: u64,
    pub occurred_at: Timestamp,
    pub event: DomainEvent,
}

/// Sees every published event, in order, with its id. Called inline by the publisher: it must
/// be quick and must not call back into the code that published (locks may be held).
pub trait EventObserver: Send + Sync {
    fn observe(&self, event: &PublishedEvent);
}

/// Where domain events go. Publishing must not block on slow consumers: a sink buffers or drops
/// for them, never the domain.
pub trait EventSink: Send + Sync {
    fn publish(&self, occurred_at: Timestamp, event: DomainEvent);
}

/// A sink that forgets every event.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullEventSink;

impl EventSink for NullEventSink {
    fn publish(&self, _occurred_at: Timestamp, _event: DomainEvent) {}
}
