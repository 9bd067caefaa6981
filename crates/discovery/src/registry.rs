//! The registry: what every candidate became, and the rules that move it.

use std::collections::BTreeMap;

use mcpgw_core::{ServerId, ServerSpec, Timestamp};
use serde_json::{Map, Value};

use crate::source::{DiscoveredCandidate, SourceDefinition};
use crate::store::Rejection;

/// A candidate waiting for an operator's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingServer {
    pub name: String,
    pub source_id: String,
    /// The server's mode (`docker`, `remote`, ...).
    pub mode: String,
    pub discovered_at: Timestamp,
    /// The definition, as the source reported it.
    pub definition: Map<String, Value>,
    /// Whether approving it replaces a server approved earlier with another definition.
    pub replaces_approved: bool,
}

/// A candidate that failed validation.
#[derive(Debug, Clone, PartialEq)]
pub struct QuarantinedServer {
    pub name: String,
    pub source_id: String,
    pub reason: String,
    pub quarantined_at: Timestamp,
}

/// What a scan changed, for the caller to carry out and report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScanOutcome {
    /// Candidates the source reported.
    pub found: usize,
    /// The source's pending candidates after the scan.
    pub pending: usize,
    /// The source's quarantined candidates after the scan.
    pub quarantined: usize,
    /// Names that became pending in this scan (new, or changed since approval or rejection).
    pub newly_pending: Vec<String>,
    /// Names quarantined in this scan (new, or with another reason), with the reason.
    pub newly_quarantined: Vec<(String, String)>,
    /// Servers the source withdrew (authoritative, gone for longer than the grace period):
    /// the caller removes them.
    pub withdrawn: Vec<ServerId>,
}

/// An approval to carry out: register (or replace) this server, then confirm it with
/// [`DiscoveryRegistry::confirm_approval`].
#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    pub spec: ServerSpec,
    pub source_id: String,
    /// A server approved earlier from the same source runs under this id: replace it.
    pub replaces_approved: bool,
}

#[derive(Debug, Clone)]
struct PendingEntry {
    server: PendingServer,
    spec: ServerSpec,
}

#[derive(Debug, Clone)]
struct ApprovedEntry {
    source_id: String,
    spec: ServerSpec,
    /// When the source was first seen without it; cleared when it comes back.
    missing_since: Option<Timestamp>,
}

/// Everything discovery knows, as plain data: no I/O, no clock.
#[derive(Debug, Default)]
pub struct DiscoveryRegistry {
    pending: BTreeMap<String, PendingEntry>,
    quarantined: BTreeMap<String, QuarantinedServer>,
    rejected: BTreeMap<(String, String), Rejection>,
    approved: BTreeMap<ServerId, ApprovedEntry>,
}

impl DiscoveryRegistry {
    pub fn new() -> Self {
        Self::default()
    }
}

// The placeholder keeps the unused types referenced until the rules land.
#[allow(dead_code)]
fn _uses(_: DiscoveredCandidate, _: SourceDefinition) {}
