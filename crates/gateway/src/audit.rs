//! [`AuditExporter`]: security events shipped to audit sinks (files, syslog, log collectors) as
//! they happen, off the path of the request that caused them.
//!
//! The exporter is an observer of the event bus. For each published event of the chosen types
//! it puts the event in the bounded queue of every sink, without waiting (a full queue drops the
//! event for that sink and counts it), so a slow or stuck sink never slows a call. One task per
//! sink takes what is queued, in order, makes the [`AuditRecord`]s and writes them in batches
//! through the [`AuditSink`] port; a failed write is tried again a few times with a growing
//! pause, then its records are dropped and counted. [`AuditExporter::close`] lets every sink
//! write what is queued and flush, within a bounded time.
//!
//! Only the events this gateway publishes reach its bus: in a fleet, the other replicas' events
//! arrive through the shared event log's feed (for the event streams), never on the bus, so each
//! event is exported once, by the replica that published it, and its record names that replica.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use mcpgw_core::audit::{
    AuditRecord, AuditSink, AuditSinkError, SECURITY_EVENT_TYPES, event_type_named,
};
use mcpgw_core::{EventObserver, PublishedEvent};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Records written by a sink, by sink (`sink` is the sink's name).
pub const AUDIT_RECORDS_WRITTEN_TOTAL: &str = "mcpgw_audit_records_written_total";
/// Records a sink lost: its queue was full, its writes kept failing, or it had not written
/// them when the gateway stopped.
pub const AUDIT_RECORDS_DROPPED_TOTAL: &str = "mcpgw_audit_records_dropped_total";

/// How the exporter queues, batches and retries.
#[derive(Debug, Clone)]
pub struct AuditSettings {
    /// Records each sink may have waiting before new ones are dropped for it.
    pub queue_size: usize,
    /// The event types exported: the security set ([`SECURITY_EVENT_TYPES`]) by default.
    pub event_types: Vec<&'static str>,
    /// This gateway's replica id in a fleet, carried by every record.
    pub replica: Option<String>,
    /// The most records handed to a sink in one write.
    pub batch_size: usize,
    /// How long one write may take before it counts as failed.
    pub write_timeout: Duration,
    /// How often a failed write is tried again before its records are dropped.
    pub retries: u32,
    /// The pause before the first retry; it doubles with each retry.
    pub retry_backoff: Duration,
    /// How long [`AuditExporter::close`] waits for the sinks to write what is queued and flush.
    pub close_timeout: Duration,
}

impl AuditSettings {
    pub const DEFAULT_QUEUE_SIZE: usize = 10_000;
    pub const DEFAULT_BATCH_SIZE: usize = 500;
    pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(10);
    pub const DEFAULT_RETRIES: u32 = 3;
    pub const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_millis(250);
    pub const DEFAULT_CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

    /// These settings, exporting the events of the types `names` instead. A name that is no
    /// event type is refused, naming it.
    pub fn with_event_types<'a>(
        mut self,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, UnknownEventType> {
        let mut types = Vec::new();
        for name in names {
            let known = event_type_named(name).ok_or_else(|| UnknownEventType(name.to_owned()))?;
            if !types.contains(&known) {
                types.push(known);
            }
        }
        self.event_types = types;
        Ok(self)
    }
}

impl Default for AuditSettings {
    fn default() -> Self {
        Self {
            queue_size: Self::DEFAULT_QUEUE_SIZE,
            event_types: SECURITY_EVENT_TYPES.to_vec(),
            replica: None,
            batch_size: Self::DEFAULT_BATCH_SIZE,
            write_timeout: Self::DEFAULT_WRITE_TIMEOUT,
            retries: Self::DEFAULT_RETRIES,
            retry_backoff: Self::DEFAULT_RETRY_BACKOFF,
            close_timeout: Self::DEFAULT_CLOSE_TIMEOUT,
        }
    }
}

/// An event type name that no event has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not an event type; name types as the event stream does (AuthenticationFailed, \
     ApiKeyCreated, ...)"
)]
pub struct UnknownEventType(pub String);

/// What one sink did so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditSinkStats {
    /// The sink's name as metrics label it (made unique among the exporter's sinks).
    pub name: String,
    /// Records waiting for the sink, or being written.
    pub queued: u64,
    pub written: u64,
    pub dropped: u64,
}

/// The counts of one sink, shared by the publishing side and the sink's task.
struct SinkState {
    name: String,
    queued: AtomicU64,
    written: AtomicU64,
    dropped: AtomicU64,
}

impl SinkState {
    fn count_written(&self, records: u64) {
        self.queued.fetch_sub(records, Ordering::Relaxed);
        self.written.fetch_add(records, Ordering::Relaxed);
        metrics::counter!(AUDIT_RECORDS_WRITTEN_TOTAL, "sink" => self.name.clone())
            .increment(records);
    }

    fn count_dropped(&self, records: u64) {
        self.dropped.fetch_add(records, Ordering::Relaxed);
        metrics::counter!(AUDIT_RECORDS_DROPPED_TOTAL, "sink" => self.name.clone())
            .increment(records);
    }

    fn stats(&self) -> AuditSinkStats {
        AuditSinkStats {
            name: self.name.clone(),
            queued: self.queued.load(Ordering::Relaxed),
            written: self.written.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }
}

struct Queue {
    sender: mpsc::Sender<Arc<PublishedEvent>>,
    state: Arc<SinkState>,
}

struct Shared {
    event_types: HashSet<&'static str>,
    /// Emptied by [`AuditExporter::close`]: the senders go, and each task ends once it has
    /// written what its queue still holds.
    queues: RwLock<Vec<Queue>>,
}

/// Ships the chosen events to every sink (see the module documentation). Made with
/// [`AuditExporter::start`], attached to the bus with [`AuditExporter::observer`], ended with
/// [`AuditExporter::close`].
pub struct AuditExporter {
    shared: Arc<Shared>,
    sinks: Vec<Arc<SinkState>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    close_timeout: Duration,
}

impl std::fmt::Debug for AuditExporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditExporter")
            .field("sinks", &self.stats())
            .finish_non_exhaustive()
    }
}

impl AuditExporter {
    /// Starts one task per sink on the current tokio runtime. Two sinks of the same name are
    /// told apart by a suffix (`syslog`, `syslog-2`) in metrics and logs.
    pub fn start(sinks: Vec<Arc<dyn AuditSink>>, settings: AuditSettings) -> Self {
        describe_metrics();
        let settings = Arc::new(settings);
        let mut queues = Vec::new();
        let mut states = Vec::new();
        let mut tasks = Vec::new();
        let mut names: Vec<String> = Vec::new();
        for sink in sinks {
            let name = unique_name(sink.name(), &names);
            names.push(name.clone());
            let state = Arc::new(SinkState {
                name,
                queued: AtomicU64::new(0),
                written: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
            });
            // Present from the start, so that a scrape shows zero rather than nothing.
            metrics::counter!(AUDIT_RECORDS_WRITTEN_TOTAL, "sink" => state.name.clone())
                .increment(0);
            metrics::counter!(AUDIT_RECORDS_DROPPED_TOTAL, "sink" => state.name.clone())
                .increment(0);
            let (sender, receiver) = mpsc::channel(settings.queue_size.max(1));
            tasks.push(tokio::spawn(run_sink(
                sink,
                receiver,
                state.clone(),
                settings.clone(),
            )));
            queues.push(Queue {
                sender,
                state: state.clone(),
            });
            states.push(state);
        }
        Self {
            shared: Arc::new(Shared {
                event_types: settings.event_types.iter().copied().collect(),
                queues: RwLock::new(queues),
            }),
            sinks: states,
            tasks: Mutex::new(tasks),
            close_timeout: settings.close_timeout,
        }
    }

    /// The observer to add to the event bus.
    pub fn observer(&self) -> Arc<dyn EventObserver> {
        Arc::new(AuditObserver(self.shared.clone()))
    }

    /// What each sink did so far, in the order the sinks were given.
    pub fn stats(&self) -> Vec<AuditSinkStats> {
        self.sinks.iter().map(|state| state.stats()).collect()
    }

    /// Stops taking events, lets every sink write what is queued and flush, and waits for that
    /// at most the settings' `close_timeout`. What a sink has not written by then is dropped and
    /// counted. Later events are not exported; closing again does nothing.
    pub async fn close(&self) {
        std::mem::take(
            &mut *self
                .shared
                .queues
                .write()
                .unwrap_or_else(PoisonError::into_inner),
        );
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
        let deadline = tokio::time::Instant::now() + self.close_timeout;
        for mut task in tasks {
            if tokio::time::timeout_at(deadline, &mut task).await.is_err() {
                task.abort();
            }
        }
        for state in &self.sinks {
            let left = state.queued.swap(0, Ordering::Relaxed);
            if left > 0 {
                state.count_dropped(left);
                tracing::warn!(
                    sink = %state.name,
                    records = left,
                    "audit records still queued at shutdown were dropped: the sink did not \
                     write them in time"
                );
            }
        }
    }
}

/// `name`, or `name-2`, `name-3`, ... when `taken` has it already.
fn unique_name(name: &str, taken: &[String]) -> String {
    let base = if name.is_empty() { "sink" } else { name };
    if !taken.iter().any(|known| known == base) {
        return base.to_owned();
    }
    (2..)
        .map(|n| format!("{base}-{n}"))
        .find(|candidate| !taken.contains(candidate))
        .unwrap_or_else(|| base.to_owned())
}

fn describe_metrics() {
    metrics::describe_counter!(
        AUDIT_RECORDS_WRITTEN_TOTAL,
        "Audit records a sink wrote, by sink."
    );
    metrics::describe_counter!(
        AUDIT_RECORDS_DROPPED_TOTAL,
        "Audit records a sink lost (its queue was full, its writes kept failing, or it had not \
         written them at shutdown), by sink."
    );
}

struct AuditObserver(Arc<Shared>);

impl EventObserver for AuditObserver {
    /// Never waits: a sink whose queue is full loses the event, counted.
    fn observe(&self, published: &PublishedEvent) {
        if !self.0.event_types.contains(published.event.event_type()) {
            return;
        }
        let queues = self.0.queues.read().unwrap_or_else(PoisonError::into_inner);
        if queues.is_empty() {
            return;
        }
        let event = Arc::new(published.clone());
        for queue in queues.iter() {
            queue.state.queued.fetch_add(1, Ordering::Relaxed);
            if queue.sender.try_send(event.clone()).is_err() {
                queue.state.queued.fetch_sub(1, Ordering::Relaxed);
                queue.state.count_dropped(1);
            }
        }
    }
}

/// One sink's task: batches of what is queued, in order, until the queue is closed and empty;
/// then a flush.
async fn run_sink(
    sink: Arc<dyn AuditSink>,
    mut receiver: mpsc::Receiver<Arc<PublishedEvent>>,
    state: Arc<SinkState>,
    settings: Arc<AuditSettings>,
) {
    let mut writer = Writer {
        sink: sink.as_ref(),
        state: &state,
        settings: &settings,
        failing: false,
        dropped_seen: 0,
    };
    let batch_size = settings.batch_size.max(1);
    let mut batch = Vec::with_capacity(batch_size.min(1024));
    while let Some(first) = receiver.recv().await {
        let replica = settings.replica.as_deref();
        batch.push(AuditRecord::from_published(&first, replica));
        while batch.len() < batch_size {
            match receiver.try_recv() {
                Ok(next) => batch.push(AuditRecord::from_published(&next, replica)),
                Err(_) => break,
            }
        }
        writer.deliver(&batch).await;
        batch.clear();
    }
    match tokio::time::timeout(settings.write_timeout, sink.flush()).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => {
            tracing::warn!(sink = %state.name, %error, "the audit sink could not flush");
        }
        Err(_) => tracing::warn!(
            sink = %state.name,
            timeout = ?settings.write_timeout,
            "the audit sink did not flush in time"
        ),
    }
}

struct Writer<'a> {
    sink: &'a dyn AuditSink,
    state: &'a SinkState,
    settings: &'a AuditSettings,
    /// Whether the last write failed, so that a failing sink is logged when it starts and
    /// stops failing, not at every batch.
    failing: bool,
    /// The drops already reported in the log.
    dropped_seen: u64,
}

impl Writer<'_> {
    /// Writes `batch`, trying again after a failure that may pass; counts it written or
    /// dropped.
    async fn deliver(&mut self, batch: &[mcpgw_core::audit::AuditRecord]) {
        let records = u64::try_from(batch.len()).unwrap_or(u64::MAX);
        let mut pause = self.settings.retry_backoff;
        let mut attempt = 0;
        loop {
            let outcome =
                match tokio::time::timeout(self.settings.write_timeout, self.sink.write(batch))
                    .await
                {
                    Ok(outcome) => outcome,
                    Err(_) => Err(AuditSinkError::Unavailable(format!(
                        "the write did not finish within {:?}",
                        self.settings.write_timeout
                    ))),
                };
            match outcome {
                Ok(()) => {
                    self.state.count_written(records);
                    if self.failing {
                        self.failing = false;
                        tracing::info!(sink = %self.state.name, "the audit sink writes again");
                    }
                    self.report_drops();
                    return;
                }
                Err(error) => {
                    if !self.failing {
                        self.failing = true;
                        tracing::warn!(
                            sink = %self.state.name,
                            %error,
                            "the audit sink cannot write; its records queue up and are dropped \
                             when its queue is full or the retries run out"
                        );
                    }
                    if error.is_retryable() && attempt < self.settings.retries {
                        attempt += 1;
                        tokio::time::sleep(pause).await;
                        pause = pause.saturating_mul(2);
                        continue;
                    }
                    self.state.queued.fetch_sub(records, Ordering::Relaxed);
                    self.state.count_dropped(records);
                    self.report_drops();
                    return;
                }
            }
        }
    }

    /// Logs the drops since the last report (the publishing side only counts them).
    fn report_drops(&mut self) {
        let dropped = self.state.dropped.load(Ordering::Relaxed);
        if dropped > self.dropped_seen {
            tracing::warn!(
                sink = %self.state.name,
                dropped = dropped - self.dropped_seen,
                total = dropped,
                "audit records were dropped for this sink"
            );
            self.dropped_seen = dropped;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::Instant;

    use async_trait::async_trait;
    use mcpgw_core::{DomainEvent, EventSink, ServerId, Timestamp};

    use super::*;
    use crate::EventBus;

    /// Keeps every batch it is given; fails the first `failures` writes; waits on `gate` (when
    /// closed) before answering.
    #[derive(Default)]
    struct TestSink {
        batches: Mutex<Vec<Vec<AuditRecord>>>,
        failures: AtomicUsize,
        invalid: bool,
        gate: Option<Arc<tokio::sync::Semaphore>>,
        flushed: AtomicUsize,
    }

    impl TestSink {
        fn records(&self) -> Vec<AuditRecord> {
            self.batches.lock().unwrap().concat()
        }

        fn ids(&self) -> Vec<u64> {
            self.records()
                .iter()
                .map(|record| record.event_id)
                .collect()
        }
    }

    #[async_trait]
    impl AuditSink for TestSink {
        fn name(&self) -> &str {
            "test"
        }

        async fn write(&self, records: &[AuditRecord]) -> Result<(), AuditSinkError> {
            if let Some(gate) = &self.gate {
                let _permit = gate.acquire().await;
            }
            if self
                .failures
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                    left.checked_sub(1)
                })
                .is_ok()
            {
                return Err(if self.invalid {
                    AuditSinkError::Invalid("cannot ever".into())
                } else {
                    AuditSinkError::Unavailable("refused".into())
                });
            }
            self.batches.lock().unwrap().push(records.to_vec());
            Ok(())
        }

        async fn flush(&self) -> Result<(), AuditSinkError> {
            self.flushed.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }

    fn quick(settings: AuditSettings) -> AuditSettings {
        AuditSettings {
            retry_backoff: Duration::from_millis(5),
            ..settings
        }
    }

    fn key_revoked(bus: &EventBus, key: &str) {
        bus.publish(
            Timestamp::from_unix_micros(0),
            DomainEvent::ApiKeyRevoked { key_id: key.into() },
        );
    }

    fn server_removed(bus: &EventBus) {
        bus.publish(
            Timestamp::from_unix_micros(0),
            DomainEvent::McpServerRemoved {
                mcp_server_id: ServerId::parse("demo").unwrap(),
            },
        );
    }

    async fn eventually(what: &str, check: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !check() {
            assert!(Instant::now() < deadline, "not within 10 s: {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn security_events_reach_every_sink_in_order_and_others_do_not() {
        let bus = EventBus::new(64);
        let first = Arc::new(TestSink::default());
        let second = Arc::new(TestSink::default());
        let exporter = AuditExporter::start(
            vec![first.clone(), second.clone()],
            AuditSettings {
                replica: Some("gw-a".into()),
                ..quick(AuditSettings::default())
            },
        );
        bus.add_observer(exporter.observer());
        for n in 0..50 {
            key_revoked(&bus, &format!("k{n}"));
            server_removed(&bus);
        }
        exporter.close().await;
        for sink in [&first, &second] {
            let records = sink.records();
            assert_eq!(records.len(), 50, "only the security events");
            let keys: Vec<String> = records
                .iter()
                .map(|record| record.event["key_id"].as_str().unwrap().to_owned())
                .collect();
            let expected: Vec<String> = (0..50).map(|n| format!("k{n}")).collect();
            assert_eq!(keys, expected, "in the order they were published");
            assert!(records.iter().all(|record| {
                record.event_type == "ApiKeyRevoked" && record.replica.as_deref() == Some("gw-a")
            }));
            assert_eq!(sink.flushed.load(Ordering::Relaxed), 1, "flushed at close");
        }
        let stats = exporter.stats();
        assert_eq!(
            stats.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["test", "test-2"]
        );
        assert!(
            stats
                .iter()
                .all(|s| s.written == 50 && s.dropped == 0 && s.queued == 0)
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stuck_sink_loses_what_overflows_its_queue_and_slows_nothing() {
        let bus = EventBus::new(64);
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let stuck = Arc::new(TestSink {
            gate: Some(gate.clone()),
            ..TestSink::default()
        });
        let healthy = Arc::new(TestSink::default());
        let exporter = AuditExporter::start(
            vec![stuck.clone(), healthy.clone()],
            AuditSettings {
                queue_size: 4,
                ..quick(AuditSettings::default())
            },
        );
        bus.add_observer(exporter.observer());
        let started = Instant::now();
        for n in 0..1000 {
            key_revoked(&bus, &format!("k{n}"));
            // The healthy sink's queue is as small: let it keep up.
            if n % 4 == 3 {
                let target = (n + 1) as u64;
                eventually("the healthy sink keeps up", || {
                    exporter.stats()[1].written >= target
                })
                .await;
            }
        }
        let publishing = started.elapsed();
        assert!(
            publishing < Duration::from_secs(5),
            "publishing waited for the stuck sink: {publishing:?}"
        );
        let stats = exporter.stats();
        // The stuck sink holds the batch it is writing (what it found queued when it started)
        // and four more in its queue: at most eight.
        assert_eq!(stats[0].written, 0);
        assert!(stats[0].dropped >= 992, "{stats:?}");
        assert_eq!(stats[0].dropped + stats[0].queued, 1000, "{stats:?}");
        assert_eq!(stats[1].written, 1000);
        assert_eq!(stats[1].dropped, 0);
        // Released, it writes what it held, in order.
        gate.add_permits(1000);
        exporter.close().await;
        let ids = stuck.ids();
        assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "{ids:?}");
        assert_eq!(
            exporter.stats()[0].written + exporter.stats()[0].dropped,
            1000
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_write_is_tried_again_and_written_once() {
        let bus = EventBus::new(64);
        let sink = Arc::new(TestSink {
            failures: AtomicUsize::new(2),
            ..TestSink::default()
        });
        let exporter = AuditExporter::start(vec![sink.clone()], quick(AuditSettings::default()));
        bus.add_observer(exporter.observer());
        for n in 0..3 {
            key_revoked(&bus, &format!("k{n}"));
        }
        eventually("written after two failures", || {
            exporter.stats()[0].written == 3
        })
        .await;
        exporter.close().await;
        assert_eq!(sink.records().len(), 3, "each record once");
        assert_eq!(exporter.stats()[0].dropped, 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn records_are_dropped_when_the_retries_run_out_or_cannot_help() {
        // Bad input: a sink that always refuses, and one whose refusal no retry can change.
        for invalid in [false, true] {
            let bus = EventBus::new(64);
            let sink = Arc::new(TestSink {
                failures: AtomicUsize::new(usize::MAX),
                invalid,
                ..TestSink::default()
            });
            let exporter =
                AuditExporter::start(vec![sink.clone()], quick(AuditSettings::default()));
            bus.add_observer(exporter.observer());
            key_revoked(&bus, "k1");
            eventually("dropped after the retries", || {
                exporter.stats()[0].dropped == 1
            })
            .await;
            exporter.close().await;
            let stats = &exporter.stats()[0];
            assert_eq!((stats.written, stats.queued, stats.dropped), (0, 0, 1));
            let attempts_left = sink.failures.load(Ordering::Relaxed);
            let attempts = usize::MAX - attempts_left;
            let expected = if invalid { 1 } else { 4 };
            assert_eq!(attempts, expected, "invalid: {invalid}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn close_gives_up_on_a_stuck_sink_within_its_bound_and_counts_the_rest() {
        let bus = EventBus::new(64);
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let stuck = Arc::new(TestSink {
            gate: Some(gate),
            ..TestSink::default()
        });
        let exporter = AuditExporter::start(
            vec![stuck],
            AuditSettings {
                close_timeout: Duration::from_millis(200),
                ..quick(AuditSettings::default())
            },
        );
        bus.add_observer(exporter.observer());
        for n in 0..10 {
            key_revoked(&bus, &format!("k{n}"));
        }
        let started = Instant::now();
        exporter.close().await;
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        let stats = &exporter.stats()[0];
        assert_eq!((stats.written, stats.queued, stats.dropped), (0, 0, 10));
        // Closed: later events are not taken, nor counted.
        key_revoked(&bus, "late");
        assert_eq!(exporter.stats()[0].dropped, 10);
        exporter.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_that_never_ends_counts_as_failed_after_the_timeout() {
        let bus = EventBus::new(64);
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let stuck = Arc::new(TestSink {
            gate: Some(gate),
            ..TestSink::default()
        });
        let exporter = AuditExporter::start(
            vec![stuck],
            AuditSettings {
                write_timeout: Duration::from_millis(20),
                retries: 1,
                ..quick(AuditSettings::default())
            },
        );
        bus.add_observer(exporter.observer());
        key_revoked(&bus, "k1");
        eventually("dropped after the timeouts", || {
            exporter.stats()[0].dropped == 1
        })
        .await;
        exporter.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn chosen_event_types_replace_the_security_set() {
        let bus = EventBus::new(64);
        let sink = Arc::new(TestSink::default());
        let settings = quick(AuditSettings::default())
            .with_event_types(["McpServerRemoved", "McpServerRemoved"])
            .unwrap();
        assert_eq!(settings.event_types, ["McpServerRemoved"]);
        let exporter = AuditExporter::start(vec![sink.clone()], settings);
        bus.add_observer(exporter.observer());
        key_revoked(&bus, "k1");
        server_removed(&bus);
        exporter.close().await;
        let types: Vec<String> = sink.records().into_iter().map(|r| r.event_type).collect();
        assert_eq!(types, ["McpServerRemoved"]);
    }

    #[test]
    fn unknown_event_types_are_refused_by_name() {
        // Bad input: a misspelt type.
        let error = AuditSettings::default()
            .with_event_types(["ApiKeyCreated", "ApiKeyCreatd"])
            .unwrap_err();
        assert_eq!(error, UnknownEventType("ApiKeyCreatd".into()));
        assert!(error.to_string().contains("`ApiKeyCreatd`"));
    }

    #[test]
    fn sink_names_are_made_unique() {
        let taken = vec!["file".to_owned(), "file-2".to_owned()];
        assert_eq!(unique_name("file", &taken), "file-3");
        assert_eq!(unique_name("syslog", &taken), "syslog");
        assert_eq!(unique_name("", &[]), "sink");
    }
}
