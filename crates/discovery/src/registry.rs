//! The registry: what every candidate became, and the rules that move it.

use std::collections::BTreeMap;

use mcpgw_core::{ServerId, ServerOrigin, ServerSpec, Timestamp};
use serde_json::{Map, Value};

use crate::error::DiscoveryError;
use crate::source::{DiscoveredCandidate, SourceDefinition};
use crate::store::Rejection;
use mcpgw_config::DiscoveryMode;

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
    /// Rejections that no longer hold because the candidate came back with another
    /// definition: the caller forgets them in its store too.
    pub rejections_cleared: Vec<(String, String)>,
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
    /// Keyed by (source, name): two sources may each hold a broken candidate of one name.
    quarantined: BTreeMap<(String, String), QuarantinedServer>,
    rejected: BTreeMap<(String, String), Rejection>,
    approved: BTreeMap<ServerId, ApprovedEntry>,
    /// The rules candidates are read with: which registered launch modes they may name.
    definition_rules: mcpgw_config::ParseOptions,
}

impl DiscoveryRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Candidates may name the launch modes `options` register (none by default).
    pub fn set_definition_rules(&mut self, options: mcpgw_config::ParseOptions) {
        self.definition_rules = options;
    }

    /// Remembers a rejection read back from the store.
    pub fn restore_rejection(&mut self, rejection: Rejection) {
        self.rejected.insert(
            (rejection.source_id.clone(), rejection.name.clone()),
            rejection,
        );
    }

    /// Remembers a server approved before (read back from the server repository), so that
    /// scans compare against it and authoritative sources can withdraw it.
    pub fn restore_approved(&mut self, source_id: &str, spec: ServerSpec) {
        self.approved.insert(
            spec.id.clone(),
            ApprovedEntry {
                source_id: source_id.to_owned(),
                spec,
                missing_since: None,
            },
        );
    }

    /// Applies what `source` reported. `is_taken` says whether a server or group of that id
    /// exists that this source did not approve (declared in the file, created over the API,
    /// approved from another source); such a candidate is quarantined rather than allowed to
    /// shadow it.
    pub fn apply_scan(
        &mut self,
        source: &SourceDefinition,
        candidates: Vec<DiscoveredCandidate>,
        now: Timestamp,
        is_taken: &dyn Fn(&ServerId) -> bool,
    ) -> ScanOutcome {
        let source_id = source.source_id.as_str();
        let mut outcome = ScanOutcome {
            found: candidates.len(),
            ..ScanOutcome::default()
        };
        let mut seen_pending = Vec::new();
        let mut seen_quarantined = Vec::new();
        let mut seen_approved = Vec::new();

        for candidate in candidates {
            let name = candidate.name.clone();
            let verdict = self.judge(source_id, candidate, is_taken, &seen_pending);
            match verdict {
                Verdict::Quarantine(reason) => {
                    seen_quarantined.push(name.clone());
                    // A name this scan already made pending keeps that entry; the duplicate
                    // is the one quarantined.
                    if !seen_pending.contains(&name) {
                        self.drop_pending_of(source_id, &name);
                    }
                    let key = (source_id.to_owned(), name.clone());
                    let unchanged = self
                        .quarantined
                        .get(&key)
                        .is_some_and(|entry| entry.reason == reason);
                    if !unchanged {
                        outcome
                            .newly_quarantined
                            .push((name.clone(), reason.clone()));
                        self.quarantined.insert(
                            key,
                            QuarantinedServer {
                                name,
                                source_id: source_id.to_owned(),
                                reason,
                                quarantined_at: now,
                            },
                        );
                    }
                }
                Verdict::Approved { id } => {
                    seen_approved.push(id);
                    self.drop_pending_of(source_id, &name);
                }
                Verdict::Rejected => {
                    self.drop_pending_of(source_id, &name);
                }
                Verdict::Pending {
                    spec,
                    definition,
                    replaces_approved,
                    approved_id,
                } => {
                    if let Some(id) = approved_id {
                        seen_approved.push(id);
                    }
                    if let Some(cleared) =
                        self.clear_outdated_rejection(source_id, &name, &definition)
                    {
                        outcome.rejections_cleared.push(cleared);
                    }
                    seen_pending.push(name.clone());
                    let unchanged = self.pending.get(&name).is_some_and(|entry| {
                        entry.server.source_id == source_id && entry.server.definition == definition
                    });
                    if !unchanged {
                        outcome.newly_pending.push(name.clone());
                        self.pending.insert(
                            name.clone(),
                            PendingEntry {
                                server: PendingServer {
                                    name,
                                    source_id: source_id.to_owned(),
                                    mode: spec.mode().to_owned(),
                                    discovered_at: now,
                                    definition,
                                    replaces_approved,
                                },
                                spec,
                            },
                        );
                    }
                }
            }
        }

        // What the source no longer reports leaves pending and quarantine at once.
        self.pending.retain(|name, entry| {
            entry.server.source_id != source_id || seen_pending.contains(name)
        });
        self.quarantined
            .retain(|(owner, name), _| owner != source_id || seen_quarantined.contains(name));
        outcome.withdrawn = self.withdraw_missing(source, &seen_approved, now);

        outcome.pending = self
            .pending
            .values()
            .filter(|entry| entry.server.source_id == source_id)
            .count();
        outcome.quarantined = self
            .quarantined
            .keys()
            .filter(|(owner, _)| owner == source_id)
            .count();
        outcome
    }

    fn judge(
        &self,
        source_id: &str,
        candidate: DiscoveredCandidate,
        is_taken: &dyn Fn(&ServerId) -> bool,
        seen_pending: &[String],
    ) -> Verdict {
        let name = candidate.name;
        let definition = match candidate.definition {
            Ok(definition) => definition,
            Err(reason) => return Verdict::Quarantine(reason),
        };
        let id = match ServerId::parse(&name) {
            Ok(id) => id,
            Err(error) => {
                return Verdict::Quarantine(format!(
                    "`{name}` is not a valid mcp server id ({error}); name it with the label \
                     mcp.gateway.name or the file's key"
                ));
            }
        };
        let origin = ServerOrigin::Discovery {
            source_id: source_id.to_owned(),
        };
        let spec = match mcpgw_config::server_spec_from_json(
            &name,
            Value::Object(definition.clone()),
            origin,
            &self.definition_rules,
        ) {
            Ok(spec) => spec,
            Err(errors) => return Verdict::Quarantine(describe_config_errors(&errors)),
        };
        if seen_pending.contains(&name) {
            return Verdict::Quarantine(format!(
                "`{name}` is discovered twice by this source; give each a distinct name"
            ));
        }
        let approved_here = self
            .approved
            .get(&id)
            .filter(|entry| entry.source_id == source_id);
        if approved_here.is_none() {
            if is_taken(&id) {
                return Verdict::Quarantine(format!(
                    "an mcp server or group `{name}` already exists; give the discovered one \
                     another name (the label mcp.gateway.name, or the file's key)"
                ));
            }
            if let Some(other) = self
                .pending
                .get(&name)
                .filter(|entry| entry.server.source_id != source_id)
            {
                return Verdict::Quarantine(format!(
                    "`{name}` is also discovered by source `{}`; give one of them another name",
                    other.server.source_id
                ));
            }
        }
        if let Some(approved) = approved_here
            && approved.spec == spec
        {
            return Verdict::Approved { id };
        }
        if self
            .rejected
            .get(&(source_id.to_owned(), name.clone()))
            .is_some_and(|rejection| rejection.definition == definition)
        {
            return match approved_here {
                Some(_) => Verdict::Approved { id },
                None => Verdict::Rejected,
            };
        }
        Verdict::Pending {
            spec,
            definition,
            replaces_approved: approved_here.is_some(),
            approved_id: approved_here.map(|_| id),
        }
    }

    fn drop_pending_of(&mut self, source_id: &str, name: &str) {
        if self
            .pending
            .get(name)
            .is_some_and(|entry| entry.server.source_id == source_id)
        {
            self.pending.remove(name);
        }
    }

    fn clear_outdated_rejection(
        &mut self,
        source_id: &str,
        name: &str,
        definition: &Map<String, Value>,
    ) -> Option<(String, String)> {
        let key = (source_id.to_owned(), name.to_owned());
        let outdated = self
            .rejected
            .get(&key)
            .is_some_and(|rejection| &rejection.definition != definition);
        if outdated {
            self.rejected.remove(&key);
            return Some(key);
        }
        None
    }

    fn withdraw_missing(
        &mut self,
        source: &SourceDefinition,
        seen: &[ServerId],
        now: Timestamp,
    ) -> Vec<ServerId> {
        let grace = i64::try_from(source.removal_grace().as_micros()).unwrap_or(i64::MAX);
        let mut withdrawn = Vec::new();
        for (id, entry) in &mut self.approved {
            if entry.source_id != source.source_id {
                continue;
            }
            if seen.contains(id) {
                entry.missing_since = None;
                continue;
            }
            if source.mode != DiscoveryMode::Authoritative {
                continue;
            }
            let since = *entry.missing_since.get_or_insert(now);
            if now.unix_micros().saturating_sub(since.unix_micros()) >= grace {
                withdrawn.push(id.clone());
            }
        }
        for id in &withdrawn {
            self.approved.remove(id);
        }
        withdrawn
    }

    /// The candidates waiting for a decision, by name.
    pub fn pending(&self) -> Vec<PendingServer> {
        self.pending
            .values()
            .map(|entry| entry.server.clone())
            .collect()
    }

    /// How many candidates are pending and how many quarantined, without copying them.
    pub fn counts(&self) -> (usize, usize) {
        (self.pending.len(), self.quarantined.len())
    }

    /// The candidates that failed validation, by name.
    pub fn quarantined(&self) -> Vec<QuarantinedServer> {
        let mut quarantined: Vec<QuarantinedServer> = self.quarantined.values().cloned().collect();
        quarantined.sort_by(|a, b| a.name.cmp(&b.name).then(a.source_id.cmp(&b.source_id)));
        quarantined
    }

    /// What approving the pending `name` means; nothing changes until
    /// [`DiscoveryRegistry::confirm_approval`], so a registration that fails leaves it pending.
    pub fn approval(&self, name: &str) -> Result<Approval, DiscoveryError> {
        let entry = self
            .pending
            .get(name)
            .ok_or_else(|| DiscoveryError::CandidateNotFound(name.to_owned()))?;
        Ok(Approval {
            spec: entry.spec.clone(),
            source_id: entry.server.source_id.clone(),
            replaces_approved: entry.server.replaces_approved,
        })
    }

    /// Records that `approval` was carried out: the server runs, and scans compare against it.
    pub fn confirm_approval(&mut self, approval: &Approval) {
        let name = approval.spec.id.as_str().to_owned();
        self.pending.remove(&name);
        self.rejected.remove(&(approval.source_id.clone(), name));
        self.approved.insert(
            approval.spec.id.clone(),
            ApprovedEntry {
                source_id: approval.source_id.clone(),
                spec: approval.spec.clone(),
                missing_since: None,
            },
        );
    }

    /// Rejects the pending `name`: it leaves pending, and stays out until its definition
    /// changes. Answers the rejection for the caller to store.
    pub fn reject(&mut self, name: &str, now: Timestamp) -> Result<Rejection, DiscoveryError> {
        let entry = self
            .pending
            .remove(name)
            .ok_or_else(|| DiscoveryError::CandidateNotFound(name.to_owned()))?;
        let rejection = Rejection {
            source_id: entry.server.source_id.clone(),
            name: name.to_owned(),
            definition: entry.server.definition,
            rejected_at: now,
        };
        self.restore_rejection(rejection.clone());
        Ok(rejection)
    }

    /// Forgets what `source_id` found (pending, quarantined, rejected); servers it approved
    /// stay, as ordinary servers no source withdraws. Answers the rejections dropped.
    pub fn forget_source(&mut self, source_id: &str) -> Vec<(String, String)> {
        self.pending
            .retain(|_, entry| entry.server.source_id != source_id);
        self.quarantined.retain(|(owner, _), _| owner != source_id);
        self.approved
            .retain(|_, entry| entry.source_id != source_id);
        let dropped: Vec<(String, String)> = self
            .rejected
            .keys()
            .filter(|(owner, _)| owner == source_id)
            .cloned()
            .collect();
        for key in &dropped {
            self.rejected.remove(key);
        }
        dropped
    }

    /// Forgets an approved server that was removed by other means (deleted over the API): a
    /// later scan that still finds it offers it as pending again.
    pub fn forget_server(&mut self, id: &ServerId) {
        self.approved.remove(id);
    }

    /// Forgets approved servers that no longer exist (deleted over the API), so that a later
    /// scan that still finds them offers them as pending again.
    pub fn retain_approved(&mut self, exists: &dyn Fn(&ServerId) -> bool) {
        self.approved.retain(|id, _| exists(id));
    }

    /// Whether `id` runs because this registry approved it.
    pub fn is_approved(&self, id: &ServerId) -> bool {
        self.approved.contains_key(id)
    }
}

enum Verdict {
    Quarantine(String),
    /// Approved before with this very definition: nothing to do.
    Approved {
        id: ServerId,
    },
    /// Rejected before with this very definition: stays out.
    Rejected,
    Pending {
        spec: ServerSpec,
        definition: Map<String, Value>,
        replaces_approved: bool,
        approved_id: Option<ServerId>,
    },
}

/// One line an operator can act on, from the configuration rules' findings.
fn describe_config_errors(errors: &mcpgw_config::ConfigErrors) -> String {
    errors
        .errors()
        .iter()
        .map(|error| {
            if error.path.is_empty() {
                error.message.clone()
            } else {
                format!("{}: {}", error.path, error.message)
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}
