//! The contract of [`EventLog`], as tests that every implementation must pass, and an
//! in-memory implementation for tests of the code that uses the port.
//!
//! An adapter crate runs the whole suite against its own log with one line in its tests:
//!
//! ```text
//! mcpgw_testkit::event_log_contract_suite!(open_my_log());
//! ```
//!
//! Each case is also a public `async fn` taking `&dyn EventLog`, for callers that need to run
//! one case by hand. What only one implementation can get wrong (surviving a reopen, a store
//! that refuses a compaction halfway, a full write queue) is tested next to it.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_core::{
    CompactionReport, DomainEvent, EventLog, EventLogError, EventLogStats, EventObserver,
    EventRetention, HistoryPage, InMemoryInvocationHistory, InvocationHistory, InvocationRecord,
    PublishedEvent, RepositoryError, ServerId, Timestamp,
};

use crate::repository_suite::RepositoryWithGuard;

/// Expands to one `#[tokio::test]` per case of the [`EventLog`] contract, each running against
/// a fresh, empty log made by evaluating `$make_log` inside the test (it may `.await`). Wrap a
/// log that needs a temporary directory kept alive in [`RepositoryWithGuard`].
///
/// The tests use `#[tokio::test(flavor = "multi_thread")]`, so the invoking crate needs `tokio`
/// with the `macros`, `rt` and `rt-multi-thread` features among its dev-dependencies. Invoke
/// it in a module of its own: the tests are named after the cases.
#[macro_export]
macro_rules! event_log_contract_suite {
    ($make_log:expr $(,)?) => {
        $crate::__event_log_contract_case!($make_log, a_new_log_is_empty);
        $crate::__event_log_contract_case!($make_log, events_keep_their_ids_and_order);
        $crate::__event_log_contract_case!($make_log, observed_events_are_read_without_a_flush);
        $crate::__event_log_contract_case!($make_log, flush_makes_every_observed_event_count);
        $crate::__event_log_contract_case!($make_log, history_pages_match_the_in_memory_history);
        $crate::__event_log_contract_case!(
            $make_log,
            history_answers_an_unknown_server_with_nothing
        );
        $crate::__event_log_contract_case!($make_log, retention_by_age_is_exact);
        $crate::__event_log_contract_case!($make_log, retention_by_count_keeps_exactly_the_newest);
        $crate::__event_log_contract_case!($make_log, both_bounds_apply_together);
        $crate::__event_log_contract_case!($make_log, without_bounds_nothing_is_removed);
        $crate::__event_log_contract_case!($make_log, compaction_never_lowers_the_last_event_id);
        $crate::__event_log_contract_case!($make_log, compacted_invocations_leave_the_history);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __event_log_contract_case {
    ($make_log:expr, $case:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            let log = $make_log;
            $crate::event_log::$case(&log).await;
        }
    };
}

impl<L: EventLog, G: Send + Sync> EventObserver for RepositoryWithGuard<L, G> {
    fn observe(&self, event: &PublishedEvent) {
        self.repository.observe(event);
    }
}

#[async_trait]
impl<L: EventLog, G: Send + Sync> InvocationHistory for RepositoryWithGuard<L, G> {
    async fn page(
        &self,
        server: &ServerId,
        limit: usize,
        before: Option<u64>,
    ) -> Result<HistoryPage, RepositoryError> {
        self.repository.page(server, limit, before).await
    }
}

#[async_trait]
impl<L: EventLog, G: Send + Sync> EventLog for RepositoryWithGuard<L, G> {
    async fn flush(&self) -> Result<(), EventLogError> {
        self.repository.flush().await
    }
    async fn last_event_id(&self) -> Result<u64, EventLogError> {
        self.repository.last_event_id().await
    }
    async fn compact(
        &self,
        retention: EventRetention,
        now: Timestamp,
    ) -> Result<CompactionReport, EventLogError> {
        self.repository.compact(retention, now).await
    }
    async fn stats(&self) -> Result<EventLogStats, EventLogError> {
        self.repository.stats().await
    }
}

/// An [`EventLog`] in memory: what a test of the code that uses the port gives it. Nothing is
/// queued, so `flush` has nothing to do.
///
/// [`fail_next_compaction`](Self::fail_next_compaction) makes the next `compact` fail, for
/// tests of what the caller does then.
#[derive(Default)]
pub struct InMemoryEventLog {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    events: Vec<PublishedEvent>,
    last_event_id: u64,
    next_compaction_failure: Option<String>,
    compactions: u64,
}

impl InMemoryEventLog {
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the next `compact` return [`EventLogError::Compaction`] with `message` and remove
    /// nothing; the compactions after it succeed again.
    pub fn fail_next_compaction(&self, message: impl Into<String>) {
        lock(&self.state).next_compaction_failure = Some(message.into());
    }

    /// How many times `compact` was called, failed ones included.
    pub fn compactions(&self) -> u64 {
        lock(&self.state).compactions
    }

    /// Every stored event, oldest first.
    pub fn events(&self) -> Vec<PublishedEvent> {
        lock(&self.state).events.clone()
    }
}

/// A panic in one test must not turn every later use of a shared fake into a second panic.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl EventObserver for InMemoryEventLog {
    fn observe(&self, event: &PublishedEvent) {
        let mut state = lock(&self.state);
        state.last_event_id = state.last_event_id.max(event.event_id);
        state.events.push(event.clone());
    }
}

#[async_trait]
impl InvocationHistory for InMemoryEventLog {
    async fn page(
        &self,
        server: &ServerId,
        limit: usize,
        before: Option<u64>,
    ) -> Result<HistoryPage, RepositoryError> {
        let state = lock(&self.state);
        let mut older = state
            .events
            .iter()
            .rev()
            .filter(|event| before.is_none_or(|cursor| event.event_id < cursor))
            .filter_map(InvocationRecord::from_event)
            .filter(|record| &record.mcp_server_id == server);
        let entries: Vec<InvocationRecord> = older.by_ref().take(limit).collect();
        let next_cursor = match (older.next(), entries.last()) {
            (Some(_), Some(last)) => Some(last.event_id),
            _ => None,
        };
        Ok(HistoryPage {
            entries,
            next_cursor,
        })
    }
}

#[async_trait]
impl EventLog for InMemoryEventLog {
    async fn flush(&self) -> Result<(), EventLogError> {
        Ok(())
    }

    async fn last_event_id(&self) -> Result<u64, EventLogError> {
        Ok(lock(&self.state).last_event_id)
    }

    async fn compact(
        &self,
        retention: EventRetention,
        now: Timestamp,
    ) -> Result<CompactionReport, EventLogError> {
        let mut state = lock(&self.state);
        state.compactions += 1;
        if let Some(message) = state.next_compaction_failure.take() {
            return Err(EventLogError::Compaction(message));
        }
        let before = state.events.len();
        if let Some(max_age) = retention.max_age {
            let age = i64::try_from(max_age.as_micros()).unwrap_or(i64::MAX);
            let cutoff = now.unix_micros().saturating_sub(age);
            state
                .events
                .retain(|event| event.occurred_at.unix_micros() >= cutoff);
        }
        if let Some(max_events) = retention.max_events {
            let keep = usize::try_from(max_events).unwrap_or(usize::MAX);
            let excess = state.events.len().saturating_sub(keep);
            state.events.drain(..excess);
        }
        Ok(CompactionReport {
            removed: (before - state.events.len()) as u64,
            remaining: state.events.len() as u64,
        })
    }

    async fn stats(&self) -> Result<EventLogStats, EventLogError> {
        let state = lock(&self.state);
        Ok(EventLogStats {
            events: state.events.len() as u64,
            oldest_event_id: state.events.first().map(|event| event.event_id),
            newest_event_id: state.events.last().map(|event| event.event_id),
            dropped: 0,
        })
    }
}

// --- sample events ---

/// The wall time the samples start at: 2026-11-21T14:03:07 UTC.
pub const SAMPLE_EPOCH_MICROS: i64 = 1_795_269_787_000_000;

fn server_id(raw: &str) -> ServerId {
    ServerId::parse(raw).unwrap_or_else(|error| panic!("test id `{raw}` is invalid: {error}"))
}

/// `seconds` after [`SAMPLE_EPOCH_MICROS`].
pub fn sample_time(seconds: i64) -> Timestamp {
    Timestamp::from_unix_micros(SAMPLE_EPOCH_MICROS + seconds * 1_000_000)
}

/// A completed call of `tool` on `server`, with a duration that only an exact float encoding
/// keeps and text a careless encoder would mangle; every fifth one was traced.
pub fn sample_completed(event_id: u64, server: &str, seconds: i64) -> PublishedEvent {
    PublishedEvent {
        event_id,
        occurred_at: sample_time(seconds),
        event: DomainEvent::ToolInvocationCompleted {
            mcp_server_id: server_id(server),
            tool: "add \"numbers\" ✓".to_owned(),
            duration_ms: 0.1 + 0.2 + event_id as f64,
            is_error: event_id.is_multiple_of(3),
            principal: event_id
                .is_multiple_of(2)
                .then(|| format!("user:{event_id}")),
            trace_id: event_id
                .is_multiple_of(5)
                .then_some(mcpgw_core::trace::TraceId([0xa5; 16])),
            span_id: event_id
                .is_multiple_of(5)
                .then_some(mcpgw_core::trace::SpanId([0x5a; 8])),
        },
    }
}

/// A failed call on `server`.
pub fn sample_failed(event_id: u64, server: &str, seconds: i64) -> PublishedEvent {
    PublishedEvent {
        event_id,
        occurred_at: sample_time(seconds),
        event: DomainEvent::ToolInvocationFailed {
            mcp_server_id: server_id(server),
            tool: "divide".to_owned(),
            duration_ms: 12.5,
            error_kind: "timeout",
            error: "the call took\nlonger than 5 s".to_owned(),
            principal: Some("key:ops".to_owned()),
            trace_id: None,
            span_id: None,
        },
    }
}

/// An event that is not a tool invocation, about `server`.
pub fn sample_state_event(event_id: u64, server: &str, seconds: i64) -> PublishedEvent {
    PublishedEvent {
        event_id,
        occurred_at: sample_time(seconds),
        event: DomainEvent::McpServerStopped {
            mcp_server_id: server_id(server),
            reason: "idle",
        },
    }
}

/// An event about no server at all.
pub fn sample_unrelated_event(event_id: u64, seconds: i64) -> PublishedEvent {
    PublishedEvent {
        event_id,
        occurred_at: sample_time(seconds),
        event: DomainEvent::RoleCreated {
            role: "support".to_owned(),
        },
    }
}

/// A mixed stream: events `first..first + count`, one per second from `first`, cycling
/// through completed and failed calls on `math` and `text`, state changes and unrelated events.
pub fn sample_stream(first: u64, count: u64) -> Vec<PublishedEvent> {
    (first..first + count)
        .map(|event_id| {
            let seconds = event_id as i64;
            match event_id % 6 {
                0 | 3 => sample_completed(event_id, "math", seconds),
                1 => sample_failed(event_id, "math", seconds),
                2 => sample_completed(event_id, "text", seconds),
                4 => sample_state_event(event_id, "math", seconds),
                _ => sample_unrelated_event(event_id, seconds),
            }
        })
        .collect()
}

fn observe_all(log: &dyn EventLog, events: &[PublishedEvent]) {
    for event in events {
        log.observe(event);
    }
}

async fn stats(log: &dyn EventLog) -> EventLogStats {
    log.stats()
        .await
        .unwrap_or_else(|error| panic!("stats failed: {error}"))
}

async fn compact(
    log: &dyn EventLog,
    retention: EventRetention,
    now: Timestamp,
) -> CompactionReport {
    log.compact(retention, now)
        .await
        .unwrap_or_else(|error| panic!("compaction failed: {error}"))
}

/// Every event id of `server`'s history, newest first, read in pages of `limit`.
async fn history_ids(log: &dyn EventLog, server: &str, limit: usize) -> Vec<u64> {
    let server = server_id(server);
    let mut ids = Vec::new();
    let mut before = None;
    loop {
        let page = log.page(&server, limit, before).await.unwrap();
        ids.extend(page.entries.iter().map(|record| record.event_id));
        match page.next_cursor {
            Some(cursor) => before = Some(cursor),
            None => return ids,
        }
    }
}

// --- the cases ---

pub async fn a_new_log_is_empty(log: &dyn EventLog) {
    assert_eq!(log.last_event_id().await.unwrap(), 0);
    assert_eq!(stats(log).await, EventLogStats::default());
    let page = log.page(&server_id("math"), 10, None).await.unwrap();
    assert_eq!(
        page,
        HistoryPage {
            entries: Vec::new(),
            next_cursor: None
        }
    );
    // Compacting nothing is fine and removes nothing.
    let report = compact(
        log,
        EventRetention {
            max_age: Some(Duration::from_secs(1)),
            max_events: Some(0),
        },
        sample_time(0),
    )
    .await;
    assert_eq!(report, CompactionReport::default());
}

pub async fn events_keep_their_ids_and_order(log: &dyn EventLog) {
    // Ids need not start at 1 (a restarted gateway continues after the last one) nor be
    // contiguous (an event the log dropped leaves a gap).
    let mut events = sample_stream(41, 30);
    events.retain(|event| event.event_id != 50);
    observe_all(log, &events);
    log.flush().await.unwrap();
    assert_eq!(
        stats(log).await,
        EventLogStats {
            events: 29,
            oldest_event_id: Some(41),
            newest_event_id: Some(70),
            dropped: 0,
        }
    );
    assert_eq!(log.last_event_id().await.unwrap(), 70);
    let expected: Vec<u64> = events
        .iter()
        .rev()
        .filter_map(InvocationRecord::from_event)
        .filter(|record| record.mcp_server_id.as_str() == "math")
        .map(|record| record.event_id)
        .collect();
    assert_eq!(history_ids(log, "math", 4).await, expected);
}

pub async fn observed_events_are_read_without_a_flush(log: &dyn EventLog) {
    for event_id in 1..=200 {
        log.observe(&sample_completed(event_id, "math", 0));
        if event_id % 50 == 0 {
            // The port flushes before reading: the call just observed is in the answer.
            let page = log.page(&server_id("math"), 1, None).await.unwrap();
            assert_eq!(page.entries.len(), 1);
            assert_eq!(page.entries[0].event_id, event_id);
            assert_eq!(log.last_event_id().await.unwrap(), event_id);
        }
    }
}

pub async fn flush_makes_every_observed_event_count(log: &dyn EventLog) {
    observe_all(log, &sample_stream(1, 5_000));
    log.flush().await.unwrap();
    let counted = stats(log).await;
    assert_eq!(counted.events, 5_000);
    assert_eq!(counted.newest_event_id, Some(5_000));
    assert_eq!(counted.dropped, 0);
    // Flushing with nothing queued returns too.
    log.flush().await.unwrap();
    assert_eq!(stats(log).await.events, 5_000);
}

pub async fn history_pages_match_the_in_memory_history(log: &dyn EventLog) {
    let events = sample_stream(1, 120);
    let reference = InMemoryInvocationHistory::new(10_000);
    for event in &events {
        reference.observe(event);
    }
    observe_all(log, &events);
    let mut cursors: Vec<Option<u64>> = vec![None, Some(0), Some(1), Some(u64::MAX)];
    // Every id as a cursor, invocation or not, and one past the end.
    cursors.extend((1..=121).map(Some));
    for server in ["math", "text", "nobody"] {
        let server = server_id(server);
        for limit in [0, 1, 2, 5, 7, 40, 1_000] {
            for before in &cursors {
                let expected = reference.page(&server, limit, *before).await.unwrap();
                let page = log.page(&server, limit, *before).await.unwrap();
                assert_eq!(
                    page, expected,
                    "server {server}, limit {limit}, before {before:?}"
                );
            }
        }
    }
}

pub async fn history_answers_an_unknown_server_with_nothing(log: &dyn EventLog) {
    observe_all(log, &sample_stream(1, 12));
    let page = log.page(&server_id("absent"), 10, None).await.unwrap();
    assert!(page.entries.is_empty());
    assert_eq!(page.next_cursor, None);
    // State changes of a server are events, not invocations.
    log.observe(&sample_state_event(13, "quiet", 13));
    let page = log.page(&server_id("quiet"), 10, None).await.unwrap();
    assert!(page.entries.is_empty());
}

pub async fn retention_by_age_is_exact(log: &dyn EventLog) {
    // Event `i` happened at second `i`.
    observe_all(log, &sample_stream(1, 10));
    let retention = EventRetention {
        max_age: Some(Duration::from_secs(5)),
        max_events: None,
    };
    // At second 9 the cutoff is second 4: events 1 to 3 are older, event 4 is exactly as old
    // as allowed and stays.
    let report = compact(log, retention, sample_time(9)).await;
    assert_eq!(
        report,
        CompactionReport {
            removed: 3,
            remaining: 7
        }
    );
    let left = stats(log).await;
    assert_eq!(left.oldest_event_id, Some(4));
    assert_eq!(left.newest_event_id, Some(10));
    // A microsecond later event 4 is too old.
    let later = Timestamp::from_unix_micros(sample_time(9).unix_micros() + 1);
    let report = compact(log, retention, later).await;
    assert_eq!(
        report,
        CompactionReport {
            removed: 1,
            remaining: 6
        }
    );
    assert_eq!(stats(log).await.oldest_event_id, Some(5));
}

pub async fn retention_by_count_keeps_exactly_the_newest(log: &dyn EventLog) {
    observe_all(log, &sample_stream(1, 10));
    let keep = |max_events| EventRetention {
        max_age: None,
        max_events: Some(max_events),
    };
    let report = compact(log, keep(3), sample_time(0)).await;
    assert_eq!(
        report,
        CompactionReport {
            removed: 7,
            remaining: 3
        }
    );
    assert_eq!(stats(log).await.oldest_event_id, Some(8));
    // Within the bound: nothing more goes.
    for max_events in [3, 4, 1_000] {
        let report = compact(log, keep(max_events), sample_time(0)).await;
        assert_eq!(
            report,
            CompactionReport {
                removed: 0,
                remaining: 3
            }
        );
    }
    let report = compact(log, keep(1), sample_time(0)).await;
    assert_eq!(
        report,
        CompactionReport {
            removed: 2,
            remaining: 1
        }
    );
    assert_eq!(stats(log).await.oldest_event_id, Some(10));
    let report = compact(log, keep(0), sample_time(0)).await;
    assert_eq!(
        report,
        CompactionReport {
            removed: 1,
            remaining: 0
        }
    );
    let left = stats(log).await;
    assert_eq!((left.events, left.oldest_event_id), (0, None));
}

pub async fn both_bounds_apply_together(log: &dyn EventLog) {
    observe_all(log, &sample_stream(1, 20));
    // Age alone would keep 11..=20 (cutoff second 11), count alone 16..=20.
    let report = compact(
        log,
        EventRetention {
            max_age: Some(Duration::from_secs(9)),
            max_events: Some(5),
        },
        sample_time(20),
    )
    .await;
    assert_eq!(
        report,
        CompactionReport {
            removed: 15,
            remaining: 5
        }
    );
    assert_eq!(stats(log).await.oldest_event_id, Some(16));
    // Now the age bound is the tighter one.
    let report = compact(
        log,
        EventRetention {
            max_age: Some(Duration::from_secs(2)),
            max_events: Some(5),
        },
        sample_time(20),
    )
    .await;
    assert_eq!(
        report,
        CompactionReport {
            removed: 2,
            remaining: 3
        }
    );
    assert_eq!(stats(log).await.oldest_event_id, Some(18));
}

pub async fn without_bounds_nothing_is_removed(log: &dyn EventLog) {
    observe_all(log, &sample_stream(1, 50));
    let report = compact(log, EventRetention::default(), sample_time(1_000_000)).await;
    assert_eq!(
        report,
        CompactionReport {
            removed: 0,
            remaining: 50
        }
    );
    // The defaults keep a week and a million events: yesterday's events stay.
    let report = compact(
        log,
        EventRetention {
            max_age: Some(EventRetention::DEFAULT_MAX_AGE),
            max_events: Some(EventRetention::DEFAULT_MAX_EVENTS),
        },
        sample_time(86_400),
    )
    .await;
    assert_eq!(report.removed, 0);
}

pub async fn compaction_never_lowers_the_last_event_id(log: &dyn EventLog) {
    observe_all(log, &sample_stream(1, 30));
    let everything = EventRetention {
        max_age: None,
        max_events: Some(0),
    };
    assert_eq!(compact(log, everything, sample_time(0)).await.removed, 30);
    assert_eq!(log.last_event_id().await.unwrap(), 30);
    // Numbering continues after it, and the new events are stored as usual.
    observe_all(log, &sample_stream(31, 3));
    assert_eq!(log.last_event_id().await.unwrap(), 33);
    let left = stats(log).await;
    assert_eq!(
        (left.events, left.oldest_event_id, left.newest_event_id),
        (3, Some(31), Some(33))
    );
}

pub async fn compacted_invocations_leave_the_history(log: &dyn EventLog) {
    observe_all(log, &sample_stream(1, 24));
    let before = history_ids(log, "math", 3).await;
    compact(
        log,
        EventRetention {
            max_age: None,
            max_events: Some(12),
        },
        sample_time(0),
    )
    .await;
    let after = history_ids(log, "math", 3).await;
    let expected: Vec<u64> = before.into_iter().filter(|id| *id > 12).collect();
    assert_eq!(after, expected);
    assert!(!after.is_empty());
}

#[cfg(test)]
mod tests {
    use super::*;

    mod contract {
        crate::event_log_contract_suite!(super::InMemoryEventLog::new());
    }

    #[tokio::test]
    async fn a_failed_compaction_removes_nothing_and_the_next_one_works() {
        let log = InMemoryEventLog::new();
        observe_all(&log, &sample_stream(1, 10));
        log.fail_next_compaction("disk full");
        let everything = EventRetention {
            max_age: None,
            max_events: Some(0),
        };
        let error = log.compact(everything, sample_time(0)).await.unwrap_err();
        assert_eq!(error, EventLogError::Compaction("disk full".to_owned()));
        assert_eq!(error.name(), "CompactionError");
        assert_eq!(log.events().len(), 10);
        assert_eq!(
            log.compact(everything, sample_time(0))
                .await
                .unwrap()
                .removed,
            10
        );
        assert_eq!(log.compactions(), 2);
    }
}
