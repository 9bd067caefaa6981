//! Domain events: every state change and every tool invocation is one.

use serde::Serialize;

use crate::id::ServerId;
use crate::state::ServerState;
use crate::time::Timestamp;
use crate::trace::{SpanId, TraceId};

/// What happened. Serialized with `event_type` as the tag and the fields beside it; the sink
/// adds `event_id` and `occurred_at`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event_type")]
#[non_exhaustive]
pub enum DomainEvent {
    McpServerRegistered {
        mcp_server_id: ServerId,
        mode: String,
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
        /// The trace of a sampled call (32 hex digits), so that an operator can go from the
        /// event to the trace; absent when the call was not traced or not sampled.
        #[serde(skip_serializing_if = "Option::is_none")]
        trace_id: Option<TraceId>,
        /// The gateway's span of the upstream call in that trace (16 hex digits).
        #[serde(skip_serializing_if = "Option::is_none")]
        span_id: Option<SpanId>,
    },
    ToolInvocationFailed {
        mcp_server_id: ServerId,
        tool: String,
        duration_ms: f64,
        error_kind: &'static str,
        error: String,
        principal: Option<String>,
        /// As in `ToolInvocationCompleted`.
        #[serde(skip_serializing_if = "Option::is_none")]
        trace_id: Option<TraceId>,
        /// As in `ToolInvocationCompleted`.
        #[serde(skip_serializing_if = "Option::is_none")]
        span_id: Option<SpanId>,
    },
    /// A group was created (from the configuration file or over the API).
    GroupCreated {
        group_id: ServerId,
        /// The strategy's name (`round_robin`, ...).
        strategy: &'static str,
        /// `config` or `api`.
        origin: &'static str,
    },
    /// A group's strategy, `min_healthy`, description or member list changed.
    GroupUpdated {
        group_id: ServerId,
    },
    GroupDeleted {
        group_id: ServerId,
    },
    GroupMemberAdded {
        group_id: ServerId,
        mcp_server_id: ServerId,
    },
    /// A member left the group (removed over the API, or its server was removed).
    GroupMemberRemoved {
        group_id: ServerId,
        mcp_server_id: ServerId,
    },
    /// A member entered or left rotation (whether calls may be routed to it).
    GroupMemberHealthChanged {
        group_id: ServerId,
        mcp_server_id: ServerId,
        in_rotation: bool,
        /// Why, in snake case: `transport_failure`, `server_degraded`, `server_ready`, ...
        reason: &'static str,
    },
    /// The group's state moved between `healthy`, `partial` and `unavailable`.
    GroupStateChanged {
        group_id: ServerId,
        from: &'static str,
        to: &'static str,
    },
    /// A request's credential was accepted. `credential` is `api_key`, `bearer` or `none`
    /// (anonymous); the credential itself is never part of an event.
    AuthenticationSucceeded {
        principal: String,
        credential: &'static str,
        client: Option<String>,
    },
    /// A request's credential was refused; `reason` says why (unknown, revoked, expired key,
    /// bad token, ...), for operators only: the client saw the generic message.
    AuthenticationFailed {
        credential: &'static str,
        reason: String,
        client: Option<String>,
    },
    AuthorizationGranted {
        principal: String,
        permission: String,
        granted_by_role: String,
    },
    AuthorizationDenied {
        principal: String,
        permission: String,
        reason: String,
    },
    ApiKeyCreated {
        key_id: String,
        principal: String,
        name: String,
    },
    ApiKeyRevoked {
        key_id: String,
    },
    RoleCreated {
        role: String,
    },
    RoleUpdated {
        role: String,
    },
    RoleDeleted {
        role: String,
    },
    RoleAssigned {
        principal: String,
        role: String,
        scope: String,
    },
    RoleRevoked {
        principal: String,
        role: String,
        scope: String,
    },
    /// A tool access policy (`{scope}/{target_id}`) was set or replaced.
    ToolPolicySet {
        policy: String,
    },
    ToolPolicyCleared {
        policy: String,
    },
    /// A discovery source was registered (over the API; sources of the configuration file are
    /// there from the start).
    DiscoverySourceAdded {
        source_id: String,
        source_type: String,
        mode: &'static str,
    },
    DiscoverySourceUpdated {
        source_id: String,
    },
    DiscoverySourceRemoved {
        source_id: String,
    },
    DiscoverySourceEnabled {
        source_id: String,
        enabled: bool,
    },
    /// A scan finished; the counts are what the source holds after it.
    DiscoveryScanCompleted {
        source_id: String,
        found: usize,
        pending: usize,
        quarantined: usize,
    },
    /// A source could not be read (its engine unreachable, its directory missing); nothing it
    /// had found was changed.
    DiscoveryScanFailed {
        source_id: String,
        error: String,
    },
    /// A candidate waits for approval: new, or an approved server whose definition changed.
    DiscoveryServerPending {
        name: String,
        source_id: String,
    },
    DiscoveryServerQuarantined {
        name: String,
        source_id: String,
        reason: String,
    },
    DiscoveryServerApproved {
        mcp_server_id: ServerId,
        source_id: String,
    },
    DiscoveryServerRejected {
        name: String,
        source_id: String,
    },
    /// An authoritative source no longer sees a server it had added, past the grace period:
    /// the server is removed.
    DiscoveryServerWithdrawn {
        mcp_server_id: ServerId,
        source_id: String,
    },
    /// The configuration file was applied: what changed, by id. `trigger` is `api`, `signal`
    /// (SIGHUP) or `watch` (the file changed).
    ConfigurationReloaded {
        trigger: &'static str,
        added: Vec<String>,
        removed: Vec<String>,
        updated: Vec<String>,
        /// Top-level sections that changed but take effect only at the next start.
        restart_required: Vec<String>,
    },
    /// A reload was refused (the file could not be read, or is invalid); nothing changed.
    ConfigurationReloadFailed {
        trigger: &'static str,
        error: String,
    },
    /// A server's (or group's) tools were pinned as it first listed them (trust on first use).
    ToolsPinned {
        mcp_server_id: ServerId,
        tools: Vec<String>,
    },
    /// A server (or group) reports a tool whose definition differs from its pin (`change`
    /// `changed`), or one with no pin (`added`); `withheld` when it is not served until an
    /// operator approves it.
    ToolDefinitionChanged {
        mcp_server_id: ServerId,
        tool: String,
        change: &'static str,
        pinned_digest: Option<String>,
        observed_digest: String,
        withheld: bool,
    },
    /// An operator approved a tool's observed definition: it is the pin now.
    ToolPinApproved {
        mcp_server_id: ServerId,
        tool: String,
        digest: String,
        approved_by: String,
    },
    /// An operator rejected a tool's observed definition: it stays withheld.
    ToolPinRejected {
        mcp_server_id: ServerId,
        tool: String,
        digest: String,
        rejected_by: String,
    },
    /// An operator forgot a server's (or group's) pins: its next list is pinned afresh.
    ToolPinsReset {
        mcp_server_id: ServerId,
        reset_by: String,
    },
    /// A curated endpoint was created (over the API, or by a reload of the file).
    EndpointCreated {
        endpoint: String,
        origin: &'static str,
    },
    EndpointUpdated {
        endpoint: String,
    },
    EndpointDeleted {
        endpoint: String,
    },
    /// Two tools would be listed under one name; `tool` of `mcp_server_id` is not listed, the
    /// tool of `listed_from` keeps the name.
    ToolNameCollision {
        mcp_server_id: ServerId,
        tool: String,
        name: String,
        listed_from: String,
    },
}

/// Every `event_type` a [`DomainEvent`] can have, for validating subscription filters.
pub const EVENT_TYPES: [&str; 54] = [
    "McpServerRegistered",
    "McpServerUpdated",
    "McpServerRemoved",
    "McpServerStateChanged",
    "McpServerStarted",
    "McpServerStartFailed",
    "McpServerStopped",
    "McpServerCrashed",
    "McpServerToolsChanged",
    "HealthCheckFailed",
    "ToolInvocationCompleted",
    "ToolInvocationFailed",
    "GroupCreated",
    "GroupUpdated",
    "GroupDeleted",
    "GroupMemberAdded",
    "GroupMemberRemoved",
    "GroupMemberHealthChanged",
    "GroupStateChanged",
    "AuthenticationSucceeded",
    "AuthenticationFailed",
    "AuthorizationGranted",
    "AuthorizationDenied",
    "ApiKeyCreated",
    "ApiKeyRevoked",
    "RoleCreated",
    "RoleUpdated",
    "RoleDeleted",
    "RoleAssigned",
    "RoleRevoked",
    "ToolPolicySet",
    "ToolPolicyCleared",
    "DiscoverySourceAdded",
    "DiscoverySourceUpdated",
    "DiscoverySourceRemoved",
    "DiscoverySourceEnabled",
    "DiscoveryScanCompleted",
    "DiscoveryScanFailed",
    "DiscoveryServerPending",
    "DiscoveryServerQuarantined",
    "DiscoveryServerApproved",
    "DiscoveryServerRejected",
    "DiscoveryServerWithdrawn",
    "ConfigurationReloaded",
    "ConfigurationReloadFailed",
    "ToolsPinned",
    "ToolDefinitionChanged",
    "ToolPinApproved",
    "ToolPinRejected",
    "ToolPinsReset",
    "ToolNameCollision",
    "EndpointCreated",
    "EndpointUpdated",
    "EndpointDeleted",
];

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
            DomainEvent::GroupCreated { .. } => "GroupCreated",
            DomainEvent::GroupUpdated { .. } => "GroupUpdated",
            DomainEvent::GroupDeleted { .. } => "GroupDeleted",
            DomainEvent::GroupMemberAdded { .. } => "GroupMemberAdded",
            DomainEvent::GroupMemberRemoved { .. } => "GroupMemberRemoved",
            DomainEvent::GroupMemberHealthChanged { .. } => "GroupMemberHealthChanged",
            DomainEvent::GroupStateChanged { .. } => "GroupStateChanged",
            DomainEvent::AuthenticationSucceeded { .. } => "AuthenticationSucceeded",
            DomainEvent::AuthenticationFailed { .. } => "AuthenticationFailed",
            DomainEvent::AuthorizationGranted { .. } => "AuthorizationGranted",
            DomainEvent::AuthorizationDenied { .. } => "AuthorizationDenied",
            DomainEvent::ApiKeyCreated { .. } => "ApiKeyCreated",
            DomainEvent::ApiKeyRevoked { .. } => "ApiKeyRevoked",
            DomainEvent::RoleCreated { .. } => "RoleCreated",
            DomainEvent::RoleUpdated { .. } => "RoleUpdated",
            DomainEvent::RoleDeleted { .. } => "RoleDeleted",
            DomainEvent::RoleAssigned { .. } => "RoleAssigned",
            DomainEvent::RoleRevoked { .. } => "RoleRevoked",
            DomainEvent::ToolPolicySet { .. } => "ToolPolicySet",
            DomainEvent::ToolPolicyCleared { .. } => "ToolPolicyCleared",
            DomainEvent::DiscoverySourceAdded { .. } => "DiscoverySourceAdded",
            DomainEvent::DiscoverySourceUpdated { .. } => "DiscoverySourceUpdated",
            DomainEvent::DiscoverySourceRemoved { .. } => "DiscoverySourceRemoved",
            DomainEvent::DiscoverySourceEnabled { .. } => "DiscoverySourceEnabled",
            DomainEvent::DiscoveryScanCompleted { .. } => "DiscoveryScanCompleted",
            DomainEvent::DiscoveryScanFailed { .. } => "DiscoveryScanFailed",
            DomainEvent::DiscoveryServerPending { .. } => "DiscoveryServerPending",
            DomainEvent::DiscoveryServerQuarantined { .. } => "DiscoveryServerQuarantined",
            DomainEvent::DiscoveryServerApproved { .. } => "DiscoveryServerApproved",
            DomainEvent::DiscoveryServerRejected { .. } => "DiscoveryServerRejected",
            DomainEvent::DiscoveryServerWithdrawn { .. } => "DiscoveryServerWithdrawn",
            DomainEvent::ConfigurationReloaded { .. } => "ConfigurationReloaded",
            DomainEvent::ConfigurationReloadFailed { .. } => "ConfigurationReloadFailed",
            DomainEvent::ToolsPinned { .. } => "ToolsPinned",
            DomainEvent::ToolDefinitionChanged { .. } => "ToolDefinitionChanged",
            DomainEvent::ToolPinApproved { .. } => "ToolPinApproved",
            DomainEvent::ToolPinRejected { .. } => "ToolPinRejected",
            DomainEvent::ToolPinsReset { .. } => "ToolPinsReset",
            DomainEvent::ToolNameCollision { .. } => "ToolNameCollision",
            DomainEvent::EndpointCreated { .. } => "EndpointCreated",
            DomainEvent::EndpointUpdated { .. } => "EndpointUpdated",
            DomainEvent::EndpointDeleted { .. } => "EndpointDeleted",
        }
    }

    /// The server the event concerns: for a group member's event the member; `None` for an
    /// event about a whole group.
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
            | DomainEvent::ToolInvocationFailed { mcp_server_id, .. }
            | DomainEvent::GroupMemberAdded { mcp_server_id, .. }
            | DomainEvent::GroupMemberRemoved { mcp_server_id, .. }
            | DomainEvent::GroupMemberHealthChanged { mcp_server_id, .. }
            | DomainEvent::DiscoveryServerApproved { mcp_server_id, .. }
            | DomainEvent::DiscoveryServerWithdrawn { mcp_server_id, .. }
            | DomainEvent::ToolsPinned { mcp_server_id, .. }
            | DomainEvent::ToolDefinitionChanged { mcp_server_id, .. }
            | DomainEvent::ToolPinApproved { mcp_server_id, .. }
            | DomainEvent::ToolPinRejected { mcp_server_id, .. }
            | DomainEvent::ToolPinsReset { mcp_server_id, .. }
            | DomainEvent::ToolNameCollision { mcp_server_id, .. } => Some(mcp_server_id),
            DomainEvent::GroupCreated { .. }
            | DomainEvent::GroupUpdated { .. }
            | DomainEvent::GroupDeleted { .. }
            | DomainEvent::GroupStateChanged { .. }
            | DomainEvent::AuthenticationSucceeded { .. }
            | DomainEvent::AuthenticationFailed { .. }
            | DomainEvent::AuthorizationGranted { .. }
            | DomainEvent::AuthorizationDenied { .. }
            | DomainEvent::ApiKeyCreated { .. }
            | DomainEvent::ApiKeyRevoked { .. }
            | DomainEvent::RoleCreated { .. }
            | DomainEvent::RoleUpdated { .. }
            | DomainEvent::RoleDeleted { .. }
            | DomainEvent::RoleAssigned { .. }
            | DomainEvent::RoleRevoked { .. }
            | DomainEvent::ToolPolicySet { .. }
            | DomainEvent::ToolPolicyCleared { .. }
            | DomainEvent::DiscoverySourceAdded { .. }
            | DomainEvent::DiscoverySourceUpdated { .. }
            | DomainEvent::DiscoverySourceRemoved { .. }
            | DomainEvent::DiscoverySourceEnabled { .. }
            | DomainEvent::DiscoveryScanCompleted { .. }
            | DomainEvent::DiscoveryScanFailed { .. }
            | DomainEvent::DiscoveryServerPending { .. }
            | DomainEvent::DiscoveryServerQuarantined { .. }
            | DomainEvent::DiscoveryServerRejected { .. }
            | DomainEvent::ConfigurationReloaded { .. }
            | DomainEvent::ConfigurationReloadFailed { .. }
            | DomainEvent::EndpointCreated { .. }
            | DomainEvent::EndpointUpdated { .. }
            | DomainEvent::EndpointDeleted { .. } => None,
        }
    }

    /// The group the event concerns, for group events.
    pub fn group_id(&self) -> Option<&ServerId> {
        match self {
            DomainEvent::GroupCreated { group_id, .. }
            | DomainEvent::GroupUpdated { group_id }
            | DomainEvent::GroupDeleted { group_id }
            | DomainEvent::GroupMemberAdded { group_id, .. }
            | DomainEvent::GroupMemberRemoved { group_id, .. }
            | DomainEvent::GroupMemberHealthChanged { group_id, .. }
            | DomainEvent::GroupStateChanged { group_id, .. } => Some(group_id),
            _ => None,
        }
    }
}

/// A domain event with the identity and time the gateway gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishedEvent {
    /// Increasing, and continuing across restarts when an event log keeps the last one.
    pub event_id: u64,
    pub occurred_at: Timestamp,
    pub event: DomainEvent,
}

/// A published event serializes as the record clients and the event log see:
/// `{"event_type", "event_id", "occurred_at", ...fields}`, the id as a string (as in the tool
/// history) and the time as [`Timestamp`] displays it.
impl Serialize for PublishedEvent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Record<'a> {
            #[serde(flatten)]
            event: &'a DomainEvent,
            event_id: String,
            occurred_at: String,
        }
        Record {
            event: &self.event,
            event_id: self.event_id.to_string(),
            occurred_at: self.occurred_at.to_string(),
        }
        .serialize(serializer)
    }
}

/// Sees every published event, in order, with its id. Called inline by the publisher: it must
/// be quick and must not call back into the code that published (locks may be held). It takes
/// events of every type, about servers and groups it never heard of too, and may be called
/// from any thread, inside a tokio runtime or outside one, and from several threads at once.
pub trait EventObserver: Send + Sync {
    fn observe(&self, event: &PublishedEvent);
}

/// Where domain events go. Publishing must not block on slow consumers: a sink buffers or drops
/// for them, never the domain.
///
/// Every observer of a sink sees every published event once, in the order it was published
/// (each thread's order, when several threads publish at once), with the time it was
/// published at and an id of its own that increases from one event to the next.
pub trait EventSink: Send + Sync {
    fn publish(&self, occurred_at: Timestamp, event: DomainEvent);
}

/// A sink that forgets every event.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullEventSink;

impl EventSink for NullEventSink {
    fn publish(&self, _occurred_at: Timestamp, _event: DomainEvent) {}
}

#[cfg(test)]
mod tests {

    #[test]
    fn event_types_lists_every_variant_once() {
        let samples = [
            DomainEvent::AuthenticationFailed {
                credential: "api_key",
                reason: "revoked".into(),
                client: None,
            },
            DomainEvent::RoleAssigned {
                principal: "user:a".into(),
                role: "viewer".into(),
                scope: "global".into(),
            },
            DomainEvent::ToolPolicyCleared {
                policy: "tool/a__b".into(),
            },
        ];
        for sample in samples {
            assert!(EVENT_TYPES.contains(&sample.event_type()));
        }
        let mut unique = EVENT_TYPES.to_vec();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), EVENT_TYPES.len());
    }

    use super::*;

    fn id(raw: &str) -> ServerId {
        ServerId::parse(raw).unwrap()
    }

    #[test]
    fn a_sampled_calls_trace_is_serialized_and_an_untraced_call_has_none() {
        let server = ServerId::parse("math").unwrap();
        let traced = DomainEvent::ToolInvocationCompleted {
            mcp_server_id: server.clone(),
            tool: "add".into(),
            duration_ms: 1.5,
            is_error: false,
            principal: None,
            trace_id: Some(TraceId([0x4b; 16])),
            span_id: Some(SpanId([0x0f; 8])),
        };
        let json = serde_json::to_value(&traced).unwrap();
        assert_eq!(json["trace_id"], "4b".repeat(16));
        assert_eq!(json["span_id"], "0f".repeat(8));
        let untraced = DomainEvent::ToolInvocationFailed {
            mcp_server_id: server,
            tool: "add".into(),
            duration_ms: 1.5,
            error_kind: "timeout",
            error: "no answer".into(),
            principal: None,
            trace_id: None,
            span_id: None,
        };
        let json = serde_json::to_value(&untraced).unwrap();
        let fields = json.as_object().unwrap();
        assert!(
            !fields.contains_key("trace_id") && !fields.contains_key("span_id"),
            "{json}"
        );
    }

    #[test]
    fn group_events_serialize_with_their_type_and_plain_fields() {
        let event = DomainEvent::GroupMemberHealthChanged {
            group_id: id("pool"),
            mcp_server_id: id("math"),
            in_rotation: false,
            reason: "transport_failure",
        };
        assert_eq!(
            serde_json::to_value(&event).unwrap(),
            serde_json::json!({
                "event_type": "GroupMemberHealthChanged",
                "group_id": "pool",
                "mcp_server_id": "math",
                "in_rotation": false,
                "reason": "transport_failure",
            })
        );
        let state = DomainEvent::GroupStateChanged {
            group_id: id("pool"),
            from: "healthy",
            to: "partial",
        };
        assert_eq!(
            serde_json::to_value(&state).unwrap(),
            serde_json::json!({"event_type": "GroupStateChanged", "group_id": "pool",
                               "from": "healthy", "to": "partial"})
        );
    }

    #[test]
    fn member_events_name_the_member_and_group_events_the_group() {
        let member = DomainEvent::GroupMemberAdded {
            group_id: id("pool"),
            mcp_server_id: id("math"),
        };
        assert_eq!(member.event_type(), "GroupMemberAdded");
        assert_eq!(member.mcp_server_id(), Some(&id("math")));
        assert_eq!(member.group_id(), Some(&id("pool")));

        let whole = DomainEvent::GroupCreated {
            group_id: id("pool"),
            strategy: "round_robin",
            origin: "api",
        };
        assert_eq!(whole.event_type(), "GroupCreated");
        assert_eq!(whole.mcp_server_id(), None);
        assert_eq!(whole.group_id(), Some(&id("pool")));

        let server = DomainEvent::McpServerRemoved {
            mcp_server_id: id("math"),
        };
        assert_eq!(server.group_id(), None);
    }
}
