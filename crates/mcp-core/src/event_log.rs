//! The persistent record of domain events, and the port that stores it.
//!
//! Every published event is appended to the log (the log is an [`EventObserver`] of the event
//! bus). Retention (a maximum age and a maximum count) is applied by compaction, which the
//! application runs periodically. The tool invocation history reads from the log, so it
//! survives restarts, and the event bus continues numbering after the log's last id.

use std::time::Duration;

use async_trait::async_trait;

use crate::error::ErrorKind;
use crate::events::EventObserver;
use crate::history::InvocationHistory;
use crate::time::Timestamp;

/// How much of the log is kept. `None` on either bound means that bound does not apply; with
/// both `None` nothing is ever removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EventRetention {
    /// Events older than this (by `occurred_at`) are removed.
    pub max_age: Option<Duration>,
    /// Only the newest this many events are kept.
    pub max_events: Option<u64>,
}

impl EventRetention {
    /// Seven days and one million events: a week of audit trail on a busy gateway, in a few
    /// hundred MiB at most.
    pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
    pub const DEFAULT_MAX_EVENTS: u64 = 1_000_000;
}

/// What one compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CompactionReport {
    /// Events removed because retention no longer keeps them.
    pub removed: u64,
    /// Events in the log afterwards.
    pub remaining: u64,
}

/// The size of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EventLogStats {
    /// Events stored (written; appends still buffered are not counted).
    pub events: u64,
    /// The smallest and largest stored event ids; `None` when the log is empty.
    pub oldest_event_id: Option<u64>,
    pub newest_event_id: Option<u64>,
    /// Events that could not be written (the store failed, or the write queue stayed full):
    /// lost, and reported, never silently.
    pub dropped: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EventLogError {
    /// Compaction failed; nothing was removed (retention is applied all or nothing).
    #[error("compacting the event log failed, nothing was removed: {0}")]
    Compaction(String),
    /// The log could not be read or written.
    #[error("the event log failed: {0}")]
    Storage(String),
}

impl EventLogError {
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Internal
    }

    /// The name of the error in API answers (`CompactionError`, `EventLogError`).
    pub fn name(&self) -> &'static str {
        match self {
            EventLogError::Compaction(_) => "CompactionError",
            EventLogError::Storage(_) => "EventLogError",
        }
    }
}

/// Durable, ordered storage of published events.
///
/// Contract for implementors:
/// - `observe` (from [`EventObserver`]) appends the event. It never blocks on I/O for long: a
///   persistent store queues the event and writes it in the background, in `event_id` order.
/// - `flush` returns once every event observed before the call is durable.
/// - `last_event_id` is the largest id ever appended (0 for a new log), so that a restarted
///   gateway numbers new events after it; compaction never lowers it.
/// - `compact` removes exactly the events `retention` no longer keeps (older than `now -
///   max_age`, or beyond the newest `max_events`), all or nothing: on error nothing is removed
///   and the error is [`EventLogError::Compaction`].
/// - The [`InvocationHistory`] it implements answers from the stored tool invocation events,
///   after flushing, so a call made before the read is in the answer.
#[async_trait]
pub trait EventLog: EventObserver + InvocationHistory {
    async fn flush(&self) -> Result<(), EventLogError>;
    async fn last_event_id(&self) -> Result<u64, EventLogError>;
    async fn compact(
        &self,
        retention: EventRetention,
        now: Timestamp,
    ) -> Result<CompactionReport, EventLogError>;
    async fn stats(&self) -> Result<EventLogStats, EventLogError>;
}
