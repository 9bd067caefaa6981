//! What the domain counts for the gateway's metrics, without knowing how they are exported:
//! messages relayed between upstream servers and clients mid-call (by kind and outcome), the
//! MCP client sessions open now (by protocol version) and the `subscriptions/listen` streams
//! open now, and the time health checks take.
//!
//! Counts are process-wide atomics: cheap to move (a relay or a session opening is one atomic
//! add, never an allocation), and read whole when the metrics are scraped. Health check times
//! are samples, so they go to the `metrics` facade as they happen (a health check is rare: one
//! per server per interval).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::id::ServerId;

/// The histogram of health check (ping) times, by server and result (`passed`, `failed`).
pub const HEALTH_CHECK_DURATION_SECONDS: &str = "mcpgw_health_check_duration_seconds";

/// Records the time one health check of `server` took, from the ping to its answer (or to the
/// health check timeout).
pub fn health_check_timed(server: &ServerId, passed: bool, took: Duration) {
    metrics::histogram!(
        HEALTH_CHECK_DURATION_SECONDS,
        "mcp_server_id" => server.as_str().to_owned(),
        "result" => if passed { "passed" } else { "failed" },
    )
    .record(took.as_secs_f64());
}

// ----- relays -------------------------------------------------------------------------------

/// What an upstream server sent its client mid-call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RelayKind {
    /// `sampling/createMessage`.
    Sampling,
    /// `elicitation/create`, in either mode.
    Elicitation,
    /// `roots/list`.
    Roots,
    /// `notifications/message` (a log message).
    Logging,
    /// Any other method (none today: the gateway's upstream client takes no other request).
    Other,
}

impl RelayKind {
    pub const ALL: [RelayKind; 5] = [
        RelayKind::Sampling,
        RelayKind::Elicitation,
        RelayKind::Roots,
        RelayKind::Logging,
        RelayKind::Other,
    ];

    /// The kind of a message by its method.
    pub fn of(method: &str) -> Self {
        match method {
            "sampling/createMessage" => RelayKind::Sampling,
            "elicitation/create" => RelayKind::Elicitation,
            "roots/list" => RelayKind::Roots,
            "notifications/message" => RelayKind::Logging,
            _ => RelayKind::Other,
        }
    }

    /// The `kind` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RelayKind::Sampling => "sampling",
            RelayKind::Elicitation => "elicitation",
            RelayKind::Roots => "roots",
            RelayKind::Logging => "logging",
            RelayKind::Other => "other",
        }
    }

    /// Whether the kind is a notification (no answer comes back), rather than a request.
    pub fn is_notification(self) -> bool {
        self == RelayKind::Logging
    }

    /// The outcomes messages of this kind can have.
    pub fn outcomes(self) -> &'static [RelayOutcome] {
        if self.is_notification() {
            &[RelayOutcome::Relayed, RelayOutcome::NoClient]
        } else {
            &[
                RelayOutcome::Answered,
                RelayOutcome::ClientError,
                RelayOutcome::Refused,
                RelayOutcome::NoClient,
            ]
        }
    }
}

/// How a relayed message ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RelayOutcome {
    /// A request the client answered with a result, passed back to the upstream.
    Answered,
    /// A request the client answered with an error, passed back to the upstream.
    ClientError,
    /// A request the gateway answered "method not found" for the client, which did not declare
    /// the capability it needs (or whose call cannot be asked anything).
    Refused,
    /// A message with no client to go to: no call in flight, the call ended before the client
    /// answered, or several clients' calls in flight on a transport that cannot tell them
    /// apart. Requests are answered with an error; log messages are dropped.
    NoClient,
    /// A notification put on its call's stream to the client.
    Relayed,
}

impl RelayOutcome {
    const COUNT: usize = 5;

    /// The `outcome` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RelayOutcome::Answered => "answered",
            RelayOutcome::ClientError => "client_error",
            RelayOutcome::Refused => "refused",
            RelayOutcome::NoClient => "no_client",
            RelayOutcome::Relayed => "relayed",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Relays counted by kind and outcome.
#[derive(Debug)]
pub struct RelayCounts {
    counts: [[AtomicU64; RelayOutcome::COUNT]; RelayKind::ALL.len()],
}

impl Default for RelayCounts {
    fn default() -> Self {
        Self::new()
    }
}

/// One line of [`RelayCounts::read`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayCount {
    pub kind: RelayKind,
    pub outcome: RelayOutcome,
    pub count: u64,
}

impl RelayCounts {
    pub const fn new() -> Self {
        Self {
            counts: [const { [const { AtomicU64::new(0) }; RelayOutcome::COUNT] };
                RelayKind::ALL.len()],
        }
    }

    /// The counts of the whole process: what the gateway's relays add to.
    pub fn global() -> &'static RelayCounts {
        static GLOBAL: RelayCounts = RelayCounts::new();
        &GLOBAL
    }

    /// Counts one message of `method` that ended with `outcome`.
    pub fn add(&self, method: &str, outcome: RelayOutcome) {
        let kind = RelayKind::of(method);
        self.counts[kind as usize][outcome.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Every count of a kind and an outcome it can have, zeros included (so that every series
    /// exists from the start), except the `other` kind while it is all zeros.
    pub fn read(&self) -> Vec<RelayCount> {
        let mut read = Vec::new();
        for kind in RelayKind::ALL {
            let row: Vec<RelayCount> = kind
                .outcomes()
                .iter()
                .map(|&outcome| RelayCount {
                    kind,
                    outcome,
                    count: self.counts[kind as usize][outcome.index()].load(Ordering::Relaxed),
                })
                .collect();
            if kind == RelayKind::Other && row.iter().all(|line| line.count == 0) {
                continue;
            }
            read.extend(row);
        }
        read
    }

    /// The count of one kind and outcome.
    pub fn get(&self, kind: RelayKind, outcome: RelayOutcome) -> u64 {
        self.counts[kind as usize][outcome.index()].load(Ordering::Relaxed)
    }
}

// ----- client sessions ----------------------------------------------------------------------

/// How many distinct protocol versions are counted apart; sessions of any further version are
/// counted under [`OTHER_PROTOCOL_VERSION`]. Versions come from the set the protocol adapter
/// negotiates, a handful, so this bound is never reached in practice.
pub const MAX_PROTOCOL_VERSIONS: usize = 16;

/// The protocol version label of sessions beyond [`MAX_PROTOCOL_VERSIONS`].
pub const OTHER_PROTOCOL_VERSION: &str = "other";

/// The MCP client sessions open now: sessions of the `initialize` era by the protocol version
/// they negotiated, and `subscriptions/listen` streams (the 2026-07-28 era has no sessions;
/// an open listen stream is the one thing of its clients that lasts).
#[derive(Debug, Default)]
pub struct ClientSessions {
    /// Versions in the order first seen, each with its count of open sessions. Changed when a
    /// session opens or closes, never per request.
    versions: Mutex<Vec<(Arc<str>, Arc<AtomicU64>)>>,
    listen_streams: Arc<AtomicU64>,
}

/// Counts one session while it lives.
#[derive(Debug)]
#[must_use = "the session counts only while this is held"]
pub struct OpenSession {
    count: Arc<AtomicU64>,
}

impl Drop for OpenSession {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The read of [`ClientSessions`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientSessionCounts {
    /// `initialize`-era sessions open now, by negotiated protocol version; every version seen
    /// since the start is listed, with 0 once its sessions are gone.
    pub by_protocol_version: Vec<(Arc<str>, u64)>,
    /// `subscriptions/listen` streams open now.
    pub listen_streams: u64,
}

impl ClientSessions {
    pub fn new() -> Self {
        Self::default()
    }

    /// The sessions of the whole process: what the gateway's MCP endpoints count in.
    pub fn global() -> &'static ClientSessions {
        static GLOBAL: std::sync::LazyLock<ClientSessions> =
            std::sync::LazyLock::new(ClientSessions::new);
        &GLOBAL
    }

    /// Counts a session of the `initialize` era that negotiated `protocol_version`, until the
    /// returned guard is dropped (when the session ends).
    pub fn open_session(&self, protocol_version: &str) -> OpenSession {
        let count = {
            let mut versions = self.versions.lock().unwrap_or_else(PoisonError::into_inner);
            let known = versions
                .iter()
                .find(|(version, _)| &**version == protocol_version)
                .map(|(_, count)| Arc::clone(count));
            match known {
                Some(count) => count,
                None => {
                    let label = if versions.len() < MAX_PROTOCOL_VERSIONS {
                        protocol_version
                    } else {
                        OTHER_PROTOCOL_VERSION
                    };
                    match versions.iter().find(|(version, _)| &**version == label) {
                        Some((_, count)) => Arc::clone(count),
                        None => {
                            let count = Arc::new(AtomicU64::new(0));
                            versions.push((Arc::from(label), Arc::clone(&count)));
                            count
                        }
                    }
                }
            }
        };
        count.fetch_add(1, Ordering::AcqRel);
        OpenSession { count }
    }

    /// Counts an open `subscriptions/listen` stream until the guard is dropped.
    pub fn open_listen_stream(&self) -> OpenSession {
        self.listen_streams.fetch_add(1, Ordering::AcqRel);
        OpenSession {
            count: Arc::clone(&self.listen_streams),
        }
    }

    pub fn read(&self) -> ClientSessionCounts {
        let versions = self.versions.lock().unwrap_or_else(PoisonError::into_inner);
        ClientSessionCounts {
            by_protocol_version: versions
                .iter()
                .map(|(version, count)| (Arc::clone(version), count.load(Ordering::Acquire)))
                .collect(),
            listen_streams: self.listen_streams.load(Ordering::Acquire),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relays_are_counted_by_the_kind_of_their_method_and_their_outcome() {
        let counts = RelayCounts::new();
        counts.add("sampling/createMessage", RelayOutcome::Answered);
        counts.add("sampling/createMessage", RelayOutcome::Answered);
        counts.add("elicitation/create", RelayOutcome::Refused);
        counts.add("notifications/message", RelayOutcome::NoClient);
        assert_eq!(counts.get(RelayKind::Sampling, RelayOutcome::Answered), 2);
        assert_eq!(counts.get(RelayKind::Elicitation, RelayOutcome::Refused), 1);
        assert_eq!(counts.get(RelayKind::Logging, RelayOutcome::NoClient), 1);

        // Every possible line is read, zeros included; `other` only once it counted something.
        let read = counts.read();
        assert_eq!(read.len(), 3 * 4 + 2, "{read:?}");
        assert!(read.iter().all(|line| line.kind != RelayKind::Other));
        assert!(read.iter().any(|line| line.kind == RelayKind::Roots
            && line.outcome == RelayOutcome::NoClient
            && line.count == 0));
        // Bad input tried: a method no client is ever asked.
        counts.add("tools/call", RelayOutcome::Refused);
        let read = counts.read();
        assert_eq!(read.len(), 4 * 4 + 2);
        assert!(read.contains(&RelayCount {
            kind: RelayKind::Other,
            outcome: RelayOutcome::Refused,
            count: 1,
        }));
    }

    #[test]
    fn sessions_count_while_they_are_open() {
        let sessions = ClientSessions::new();
        let first = sessions.open_session("2025-06-18");
        let second = sessions.open_session("2025-11-25");
        let third = sessions.open_session("2025-11-25");
        let listen = sessions.open_listen_stream();
        let read = sessions.read();
        assert_eq!(
            read.by_protocol_version,
            [(Arc::from("2025-06-18"), 1), (Arc::from("2025-11-25"), 2)]
        );
        assert_eq!(read.listen_streams, 1);
        drop((first, third, listen));
        let read = sessions.read();
        assert_eq!(
            read.by_protocol_version,
            [(Arc::from("2025-06-18"), 0), (Arc::from("2025-11-25"), 1)],
            "a version whose sessions ended stays, at 0"
        );
        assert_eq!(read.listen_streams, 0);
        drop(second);
    }

    #[test]
    fn protocol_versions_beyond_the_bound_are_counted_together() {
        // Bad input tried: more distinct versions than the bound (a protocol adapter that
        // passed on whatever a client claimed).
        let sessions = ClientSessions::new();
        let open: Vec<OpenSession> = (0..MAX_PROTOCOL_VERSIONS + 3)
            .map(|n| sessions.open_session(&format!("v{n}")))
            .collect();
        let read = sessions.read();
        assert_eq!(read.by_protocol_version.len(), MAX_PROTOCOL_VERSIONS + 1);
        assert_eq!(
            read.by_protocol_version.last(),
            Some(&(Arc::from(OTHER_PROTOCOL_VERSION), 3))
        );
        drop(open);
        assert!(
            sessions
                .read()
                .by_protocol_version
                .iter()
                .all(|(_, count)| *count == 0)
        );
    }
}
