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
            | DomainEvent::HealthCheckFailed { mcp_server_id, .. }
            | DomainEvent::ToolInvocationCompleted { mcp_server_id, .. }
            | DomainEvent::ToolInvocationFailed { mcp_server_id, .. } => Some(mcp_server_id),
        }
    }
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
