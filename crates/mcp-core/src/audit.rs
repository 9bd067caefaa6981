//! Audit export: which domain events are security events, the record a security information
//! system receives for each, and the port that ships records out of the gateway.
//!
//! # The security events
//!
//! [`SECURITY_EVENT_TYPES`] is what the gateway exports when the configuration names no event
//! types of its own. It holds every event that records a security decision or a change of who
//! may do what:
//!
//! - refusals: `AuthenticationFailed` (a credential refused), `AuthorizationDenied` (a
//!   permission or a tool policy refused);
//! - who holds which credential: `ApiKeyCreated`, `ApiKeyRevoked`;
//! - what roles grant and who holds them: `RoleCreated`, `RoleUpdated`, `RoleDeleted`,
//!   `RoleAssigned`, `RoleRevoked`;
//! - who may call which tool: `ToolPolicySet`, `ToolPolicyCleared`, and the curated endpoints,
//!   each with its own access rules: `EndpointCreated`, `EndpointUpdated`, `EndpointDeleted`;
//! - what may run: `DiscoveryServerApproved`, `DiscoveryServerRejected` (an operator's decision
//!   on a discovered server);
//! - which tool definitions are trusted: `ToolsPinned` (pinned as first listed),
//!   `ToolDefinitionChanged` (a definition differs from its pin, and whether it is withheld),
//!   `ToolPinApproved`, `ToolPinRejected`, `ToolPinsReset`;
//! - the configuration: `ConfigurationReloaded`, `ConfigurationReloadFailed`.
//!
//! Left out, and available by naming them in the configuration: the successes
//! (`AuthenticationSucceeded`, `AuthorizationGranted`: one per request), tool invocations, the
//! lifecycle of servers and groups, discovery sources and scans (a source only proposes: nothing
//! it finds runs before an approval), and tool name collisions. Local users of the web console
//! are made and changed by the command line, which publishes no event, so they have none here.
//!
//! # What a record holds
//!
//! An [`AuditRecord`] is the event as it was published (the same JSON object the event log and
//! the event stream hold) with its type, id, time in RFC 3339 and a [`AuditSeverity`] beside
//! it. Events never carry a credential: API keys appear by their id, principals by name,
//! refusals by their reason; the tests of this module fail when an event of the security set
//! gains a field that could hold one.

use async_trait::async_trait;
use serde::{Serialize, Serializer};

use crate::error::ErrorKind;
use crate::events::{DomainEvent, EVENT_TYPES, PublishedEvent};

/// The event types exported when the configuration names none (see the module documentation).
pub const SECURITY_EVENT_TYPES: [&str; 23] = [
    "AuthenticationFailed",
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
    "EndpointCreated",
    "EndpointUpdated",
    "EndpointDeleted",
    "DiscoveryServerApproved",
    "DiscoveryServerRejected",
    "ToolsPinned",
    "ToolDefinitionChanged",
    "ToolPinApproved",
    "ToolPinRejected",
    "ToolPinsReset",
    "ConfigurationReloaded",
    "ConfigurationReloadFailed",
];

/// The event type named `name`, as the static string events carry; `None` for a name that is
/// no event type.
pub fn event_type_named(name: &str) -> Option<&'static str> {
    EVENT_TYPES.iter().copied().find(|known| *known == name)
}

/// How much a record matters to whoever reads the audit trail, from least to most. Syslog
/// carries it as the message's severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum AuditSeverity {
    /// Normal operation: a success, a list pinned as first seen, a server started.
    Info,
    /// A deliberate change of who may do what, or of what is trusted: a key made or revoked, a
    /// role assigned, a policy set, a pin approved, the configuration reloaded.
    Notice,
    /// A refusal or a failure: a credential refused, a permission denied, a reload refused, a
    /// tool definition withheld because it changed under the gateway.
    Warning,
}

impl AuditSeverity {
    /// The severity in lowercase, as records spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditSeverity::Info => "info",
            AuditSeverity::Notice => "notice",
            AuditSeverity::Warning => "warning",
        }
    }

    /// The severity of `event`.
    pub fn of(event: &DomainEvent) -> Self {
        match event {
            DomainEvent::AuthenticationFailed { .. }
            | DomainEvent::AuthorizationDenied { .. }
            | DomainEvent::ConfigurationReloadFailed { .. }
            | DomainEvent::ToolDefinitionChanged { withheld: true, .. }
            | DomainEvent::McpServerStartFailed { .. }
            | DomainEvent::McpServerCrashed { .. }
            | DomainEvent::HealthCheckFailed { .. }
            | DomainEvent::ToolInvocationFailed { .. }
            | DomainEvent::DiscoveryScanFailed { .. } => AuditSeverity::Warning,
            DomainEvent::ApiKeyCreated { .. }
            | DomainEvent::ApiKeyRevoked { .. }
            | DomainEvent::RoleCreated { .. }
            | DomainEvent::RoleUpdated { .. }
            | DomainEvent::RoleDeleted { .. }
            | DomainEvent::RoleAssigned { .. }
            | DomainEvent::RoleRevoked { .. }
            | DomainEvent::ToolPolicySet { .. }
            | DomainEvent::ToolPolicyCleared { .. }
            | DomainEvent::EndpointCreated { .. }
            | DomainEvent::EndpointUpdated { .. }
            | DomainEvent::EndpointDeleted { .. }
            | DomainEvent::DiscoveryServerApproved { .. }
            | DomainEvent::DiscoveryServerRejected { .. }
            | DomainEvent::ToolDefinitionChanged { .. }
            | DomainEvent::ToolPinApproved { .. }
            | DomainEvent::ToolPinRejected { .. }
            | DomainEvent::ToolPinsReset { .. }
            | DomainEvent::ConfigurationReloaded { .. } => AuditSeverity::Notice,
            _ => AuditSeverity::Info,
        }
    }
}

impl std::fmt::Display for AuditSeverity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for AuditSeverity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One exported event. Serialized as one JSON object:
///
/// ```json
/// {"event_type": "ApiKeyRevoked", "event_id": "42", "occurred_at": "2026-03-01T09:30:00.000000Z",
///  "severity": "notice", "replica": null,
///  "event": {"event_type": "ApiKeyRevoked", "key_id": "k1", "event_id": "42",
///            "occurred_at": "2026-03-01T09:30:00.000000"}}
/// ```
///
/// `event_id` is a string, as in the event stream and the tool history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditRecord {
    /// `ApiKeyCreated`, `AuthorizationDenied`, ...
    pub event_type: String,
    /// The id the gateway gave the event: increasing, within one replica.
    #[serde(serialize_with = "as_text")]
    pub event_id: u64,
    /// When the event was published, in RFC 3339 in UTC with microseconds:
    /// `2026-03-01T09:30:00.123456Z`.
    pub occurred_at: String,
    pub severity: AuditSeverity,
    /// The replica that published the event, when the gateway is one of a fleet.
    pub replica: Option<String>,
    /// The event as it was published: its fields with `event_type`, `event_id` and
    /// `occurred_at` (as the event stream shows them).
    pub event: serde_json::Map<String, serde_json::Value>,
}

fn as_text<S: Serializer>(value: &u64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(value)
}

impl AuditRecord {
    /// The record of `published`, as published by `replica` (when known).
    pub fn from_published(published: &PublishedEvent, replica: Option<&str>) -> Self {
        let event = match serde_json::to_value(published) {
            Ok(serde_json::Value::Object(fields)) => fields,
            // A published event is a struct with string keys and always serializes to an
            // object; should that ever change, the record still says what and when.
            _ => {
                let mut fields = serde_json::Map::new();
                fields.insert("event_type".to_owned(), published.event.event_type().into());
                fields
            }
        };
        Self {
            event_type: published.event.event_type().to_owned(),
            event_id: published.event_id,
            occurred_at: format!("{}Z", published.occurred_at),
            severity: AuditSeverity::of(&published.event),
            replica: replica.map(str::to_owned),
            event,
        }
    }

    /// The record as one line of JSON, without a line break.
    pub fn to_json_line(&self) -> String {
        // Strings, numbers and maps with string keys: serialization cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Why a sink could not write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuditSinkError {
    /// The destination cannot be reached or written now (a closed socket, a full disk); the
    /// same records may be written later.
    #[error("{0}")]
    Unavailable(String),
    /// The sink's settings or the records are such that writing can never succeed (an address
    /// that is not one, a message too large for the transport); retrying does not help.
    #[error("{0}")]
    Invalid(String),
}

impl AuditSinkError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            AuditSinkError::Unavailable(_) => ErrorKind::Unavailable,
            AuditSinkError::Invalid(_) => ErrorKind::Invalid,
        }
    }

    /// Whether writing the same records again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, AuditSinkError::Unavailable(_))
    }
}

/// Where audit records go: a file, a syslog daemon, a log collector.
///
/// Contract for implementors:
/// - `name` is short, stable and the same for the sink's whole life: metrics carry it as a
///   label value and logs name the sink by it.
/// - `write` delivers the records of one batch in their order, after those of every earlier
///   batch whose `write` returned `Ok`; an empty batch delivers nothing and succeeds. It is
///   called by one task at a time, never concurrently with itself or with `flush`.
/// - An `Err` means the batch may not have been delivered (or was delivered in part); the
///   caller may hand the same batch again. A sink that holds a connection drops it on failure
///   and makes a new one on the next call. No failure panics.
/// - The call may be cancelled (the caller gives up after a deadline): the sink stays usable,
///   and a record half sent is never completed by the next call as if nothing had happened (a
///   connection in the middle of a message is dropped, not reused).
/// - `flush` returns once everything written so far is as durable as the destination makes it
///   (synced to disk, handed to the kernel); the caller flushes at shutdown.
#[async_trait]
pub trait AuditSink: Send + Sync {
    fn name(&self) -> &str;
    async fn write(&self, records: &[AuditRecord]) -> Result<(), AuditSinkError>;
    async fn flush(&self) -> Result<(), AuditSinkError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::id::ServerId;
    use crate::time::Timestamp;

    fn id(raw: &str) -> ServerId {
        ServerId::parse(raw).unwrap()
    }

    /// One event of every type in the security set, each field filled.
    fn security_samples() -> Vec<DomainEvent> {
        vec![
            DomainEvent::AuthenticationFailed {
                credential: "api_key",
                reason: "unknown key".into(),
                client: Some("203.0.113.9".into()),
            },
            DomainEvent::AuthorizationDenied {
                principal: "user:bob".into(),
                permission: "tools:call".into(),
                reason: "a tool policy denies user:bob".into(),
            },
            DomainEvent::ApiKeyCreated {
                key_id: "k1".into(),
                principal: "user:carol".into(),
                name: "laptop".into(),
            },
            DomainEvent::ApiKeyRevoked {
                key_id: "k1".into(),
            },
            DomainEvent::RoleCreated {
                role: "auditor".into(),
            },
            DomainEvent::RoleUpdated {
                role: "auditor".into(),
            },
            DomainEvent::RoleDeleted {
                role: "auditor".into(),
            },
            DomainEvent::RoleAssigned {
                principal: "user:carol".into(),
                role: "auditor".into(),
                scope: "global".into(),
            },
            DomainEvent::RoleRevoked {
                principal: "user:carol".into(),
                role: "auditor".into(),
                scope: "global".into(),
            },
            DomainEvent::ToolPolicySet {
                policy: "tool/demo__add".into(),
            },
            DomainEvent::ToolPolicyCleared {
                policy: "tool/demo__add".into(),
            },
            DomainEvent::EndpointCreated {
                endpoint: "support".into(),
                origin: "api",
            },
            DomainEvent::EndpointUpdated {
                endpoint: "support".into(),
            },
            DomainEvent::EndpointDeleted {
                endpoint: "support".into(),
            },
            DomainEvent::DiscoveryServerApproved {
                mcp_server_id: id("found"),
                source_id: "dir".into(),
            },
            DomainEvent::DiscoveryServerRejected {
                name: "found".into(),
                source_id: "dir".into(),
            },
            DomainEvent::ToolsPinned {
                mcp_server_id: id("demo"),
                tools: vec!["echo".into()],
            },
            DomainEvent::ToolDefinitionChanged {
                mcp_server_id: id("demo"),
                tool: "echo".into(),
                change: "changed",
                pinned_digest: Some("ab".into()),
                observed_digest: "cd".into(),
                withheld: true,
            },
            DomainEvent::ToolPinApproved {
                mcp_server_id: id("demo"),
                tool: "echo".into(),
                digest: "cd".into(),
                approved_by: "user:root".into(),
            },
            DomainEvent::ToolPinRejected {
                mcp_server_id: id("demo"),
                tool: "echo".into(),
                digest: "cd".into(),
                rejected_by: "user:root".into(),
            },
            DomainEvent::ToolPinsReset {
                mcp_server_id: id("demo"),
                reset_by: "user:root".into(),
            },
            DomainEvent::ConfigurationReloaded {
                trigger: "api",
                added: vec!["a".into()],
                removed: vec![],
                updated: vec![],
                restart_required: vec!["audit".into()],
            },
            DomainEvent::ConfigurationReloadFailed {
                trigger: "signal",
                error: "gateway.yaml:3:1: unknown key".into(),
            },
        ]
    }

    /// Field names of the security events that are known to hold no credential: ids, names,
    /// kinds of credential, reasons and digests of tool definitions.
    const FIELDS_WITHOUT_SECRETS: &[&str] = &[
        "event_type",
        "event_id",
        "occurred_at",
        "credential",
        "reason",
        "client",
        "principal",
        "permission",
        "key_id",
        "name",
        "role",
        "scope",
        "policy",
        "endpoint",
        "origin",
        "mcp_server_id",
        "source_id",
        "tools",
        "tool",
        "change",
        "pinned_digest",
        "observed_digest",
        "withheld",
        "digest",
        "approved_by",
        "rejected_by",
        "reset_by",
        "trigger",
        "added",
        "removed",
        "updated",
        "restart_required",
        "error",
        // The trace a call belongs to: random ids, no credential.
        "trace_id",
        "span_id",
    ];

    fn looks_like_a_secret(field: &str) -> bool {
        let field = field.to_ascii_lowercase();
        [
            "password", "secret", "token", "raw", "hash", "bearer", "cookie",
        ]
        .iter()
        .any(|word| field.contains(word))
            || field == "key"
            || field.ends_with("_key")
            || field == "api_key"
    }

    #[test]
    fn the_samples_cover_the_security_set_exactly() {
        let sampled: BTreeSet<&str> = security_samples()
            .iter()
            .map(DomainEvent::event_type)
            .collect();
        let set: BTreeSet<&str> = SECURITY_EVENT_TYPES.into_iter().collect();
        assert_eq!(sampled, set);
        assert_eq!(set.len(), SECURITY_EVENT_TYPES.len(), "listed once each");
        for name in SECURITY_EVENT_TYPES {
            assert_eq!(
                event_type_named(name),
                Some(name),
                "{name} is an event type"
            );
        }
    }

    /// Every field of every security event is one known to hold no credential, and none is
    /// named like one. An event of the set that gains a field (a key, a token, a password
    /// hash) fails here until the field is reviewed and listed.
    #[test]
    fn no_security_event_has_a_field_that_could_hold_a_secret() {
        for event in security_samples() {
            let published = PublishedEvent {
                event_id: 7,
                occurred_at: Timestamp::from_unix_micros(0),
                event,
            };
            let record = AuditRecord::from_published(&published, None);
            for field in record.event.keys() {
                assert!(
                    !looks_like_a_secret(field),
                    "{} has the field `{field}`, named like a credential",
                    record.event_type
                );
                assert!(
                    FIELDS_WITHOUT_SECRETS.contains(&field.as_str()),
                    "{} has the field `{field}`, which is not known to hold no secret: check \
                     that it never holds a key, password or token, then list it",
                    record.event_type
                );
            }
        }
    }

    #[test]
    fn the_secret_check_catches_fields_named_like_credentials() {
        for field in [
            "raw_key",
            "api_key",
            "key",
            "password",
            "client_secret",
            "access_token",
            "key_hash",
        ] {
            assert!(looks_like_a_secret(field), "{field}");
        }
        for field in FIELDS_WITHOUT_SECRETS {
            assert!(!looks_like_a_secret(field), "{field}");
        }
    }

    #[test]
    fn a_record_holds_the_published_event_with_its_time_in_rfc_3339() {
        let published = PublishedEvent {
            event_id: 42,
            // 2026-03-01T09:30:00.123456 UTC
            occurred_at: Timestamp::from_unix_micros(1_772_357_400_123_456),
            event: DomainEvent::ApiKeyRevoked {
                key_id: "k1".into(),
            },
        };
        let record = AuditRecord::from_published(&published, Some("gw-a"));
        assert_eq!(record.occurred_at, "2026-03-01T09:30:00.123456Z");
        assert_eq!(record.severity, AuditSeverity::Notice);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&record.to_json_line()).unwrap(),
            serde_json::json!({
                "event_type": "ApiKeyRevoked",
                "event_id": "42",
                "occurred_at": "2026-03-01T09:30:00.123456Z",
                "severity": "notice",
                "replica": "gw-a",
                "event": {
                    "event_type": "ApiKeyRevoked",
                    "key_id": "k1",
                    "event_id": "42",
                    "occurred_at": "2026-03-01T09:30:00.123456",
                },
            })
        );
        assert!(!record.to_json_line().contains('\n'));
    }

    #[test]
    fn failures_and_denials_are_warnings_and_changes_notices() {
        let samples = security_samples();
        let severity = |event_type: &str| {
            let event = samples
                .iter()
                .find(|event| event.event_type() == event_type)
                .unwrap();
            AuditSeverity::of(event)
        };
        for warning in [
            "AuthenticationFailed",
            "AuthorizationDenied",
            "ConfigurationReloadFailed",
            "ToolDefinitionChanged",
        ] {
            assert_eq!(severity(warning), AuditSeverity::Warning, "{warning}");
        }
        for notice in [
            "ApiKeyCreated",
            "RoleAssigned",
            "ToolPolicySet",
            "ToolPinsReset",
        ] {
            assert_eq!(severity(notice), AuditSeverity::Notice, "{notice}");
        }
        assert_eq!(severity("ToolsPinned"), AuditSeverity::Info);
        let shown = DomainEvent::ToolDefinitionChanged {
            mcp_server_id: id("demo"),
            tool: "echo".into(),
            change: "added",
            pinned_digest: None,
            observed_digest: "cd".into(),
            withheld: false,
        };
        assert_eq!(AuditSeverity::of(&shown), AuditSeverity::Notice);
        assert!(AuditSeverity::Info < AuditSeverity::Notice);
        assert!(AuditSeverity::Notice < AuditSeverity::Warning);
    }

    #[test]
    fn unknown_event_type_names_are_none() {
        // Bad input: a misspelt type, a different case, an empty name.
        for name in ["ApiKeyCreate", "apikeycreated", ""] {
            assert_eq!(event_type_named(name), None, "{name}");
        }
    }

    #[test]
    fn only_unavailable_sinks_are_worth_a_retry() {
        assert!(AuditSinkError::Unavailable("refused".into()).is_retryable());
        assert!(!AuditSinkError::Invalid("too large".into()).is_retryable());
        assert_eq!(
            AuditSinkError::Invalid("x".into()).kind(),
            ErrorKind::Invalid
        );
    }
}
