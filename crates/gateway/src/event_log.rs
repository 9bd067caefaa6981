//! Keeping the persistent event log within its retention: the periodic compaction, and the
//! metrics and log lines that report on the log's health.
//!
//! A failed compaction removed nothing (the port promises all or nothing), so the task logs it
//! and tries again at the next period; it never stops. Events the log had to drop (its store
//! failed or its write queue stayed full) are only counted by the log itself: this task turns
//! the count into the `mcpgw_event_log_dropped_total` counter and a warning when it grows.

use std::sync::Arc;
use std::time::Duration;

use mcpgw_core::{
    Clock, CompactionReport, EventLog, EventLogError, EventLogStats, EventRetention, Timestamp,
};

use crate::metrics::{EVENT_LOG_COMPACTIONS_TOTAL, EVENT_LOG_DROPPED_TOTAL, EVENT_LOG_EVENTS};

/// The shortest period the compaction runs at: a zero period would spin.
pub const MIN_COMPACTION_PERIOD: Duration = Duration::from_secs(1);

/// Compacts `log` to `retention` at once and then every `period` (at least
/// [`MIN_COMPACTION_PERIOD`]) on `clock`, forever: spawn it, and abort the task to stop it.
pub async fn run_event_log_compaction(
    log: Arc<dyn EventLog>,
    retention: EventRetention,
    clock: Arc<dyn Clock>,
    period: Duration,
) {
    let period = period.max(MIN_COMPACTION_PERIOD);
    let mut dropped_reported = 0;
    loop {
        let outcome = compact_once(log.as_ref(), retention, clock.wall()).await;
        dropped_reported = report(&outcome, dropped_reported);
        clock.sleep(period).await;
    }
}

/// What one round found: the compaction's result and the log's size afterwards.
struct Outcome {
    compaction: Result<CompactionReport, EventLogError>,
    stats: Result<EventLogStats, EventLogError>,
}

async fn compact_once(log: &dyn EventLog, retention: EventRetention, now: Timestamp) -> Outcome {
    let compaction = log.compact(retention, now).await;
    let stats = log.stats().await;
    Outcome { compaction, stats }
}

/// Logs and records `outcome`; answers the dropped count now reported.
fn report(outcome: &Outcome, dropped_reported: u64) -> u64 {
    let result = match &outcome.compaction {
        Ok(compaction) => {
            if compaction.removed > 0 {
                tracing::debug!(
                    removed = compaction.removed,
                    remaining = compaction.remaining,
                    "event log compacted"
                );
            }
            "ok"
        }
        Err(error) => {
            tracing::error!(
                error = %error,
                error_name = error.name(),
                "event log compaction failed and will be retried at the next period; check the \
                 disk and the event log file under the data directory"
            );
            "error"
        }
    };
    metrics::counter!(EVENT_LOG_COMPACTIONS_TOTAL, "result" => result).increment(1);
    match &outcome.stats {
        Ok(stats) => {
            metrics::gauge!(EVENT_LOG_EVENTS).set(stats.events as f64);
            metrics::counter!(EVENT_LOG_DROPPED_TOTAL).absolute(stats.dropped);
            if stats.dropped > dropped_reported {
                tracing::warn!(
                    dropped = stats.dropped - dropped_reported,
                    dropped_total = stats.dropped,
                    "events could not be written to the event log and are lost; check the disk \
                     under the data directory and the errors logged before"
                );
            }
            dropped_reported.max(stats.dropped)
        }
        Err(error) => {
            if let Ok(compaction) = &outcome.compaction {
                metrics::gauge!(EVENT_LOG_EVENTS).set(compaction.remaining as f64);
            }
            tracing::warn!(error = %error, "the event log's size could not be read");
            dropped_reported
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, Ordering};

    use mcpgw_core::EventObserver;
    use mcpgw_testkit::clock::FakeClock;
    use mcpgw_testkit::event_log::{InMemoryEventLog, SAMPLE_EPOCH_MICROS, sample_stream};
    use metrics::{
        Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit,
    };

    use super::*;

    type Series = (String, BTreeMap<String, String>);

    /// Keeps counters and gauges (as `f64` bits) in memory.
    #[derive(Default)]
    struct MemoryRecorder {
        values: Mutex<HashMap<Series, Arc<AtomicU64>>>,
    }

    impl MemoryRecorder {
        fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<u64> {
            let series = (
                name.to_owned(),
                labels
                    .iter()
                    .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                    .collect(),
            );
            self.values
                .lock()
                .unwrap()
                .get(&series)
                .map(|value| value.load(Ordering::Relaxed))
        }

        fn gauge(&self, name: &str) -> Option<f64> {
            self.value(name, &[]).map(f64::from_bits)
        }

        fn register(&self, key: &Key) -> Arc<AtomicU64> {
            let series = (
                key.name().to_owned(),
                key.labels()
                    .map(|label| (label.key().to_owned(), label.value().to_owned()))
                    .collect(),
            );
            self.values
                .lock()
                .unwrap()
                .entry(series)
                .or_default()
                .clone()
        }
    }

    impl Recorder for MemoryRecorder {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            Counter::from_arc(self.register(key))
        }

        fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::from_arc(self.register(key))
        }

        fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::noop()
        }
    }

    fn seconds_after_epoch(seconds: i64) -> Timestamp {
        Timestamp::from_unix_micros(SAMPLE_EPOCH_MICROS + seconds * 1_000_000)
    }

    /// Lets the spawned compaction task run until it waits on the clock again.
    async fn settle(clock: &FakeClock, log: &InMemoryEventLog, compactions: u64) {
        for _ in 0..1_000 {
            if log.compactions() == compactions && clock.sleepers() == 1 {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!(
            "the task did not reach compaction {compactions} (it made {})",
            log.compactions()
        );
    }

    fn stored_ids(log: &InMemoryEventLog) -> Vec<u64> {
        log.events().iter().map(|event| event.event_id).collect()
    }

    #[tokio::test]
    async fn compacts_at_once_then_every_period_at_the_clock_time() {
        let log = Arc::new(InMemoryEventLog::new());
        // Event `i` happened `i` seconds after the epoch; the clock starts at second 10.
        for event in sample_stream(1, 10) {
            log.observe(&event);
        }
        let clock = Arc::new(FakeClock::starting_at(
            seconds_after_epoch(10).unix_micros(),
        ));
        let retention = EventRetention {
            max_age: Some(Duration::from_secs(5)),
            max_events: Some(100),
        };
        let task = tokio::spawn(run_event_log_compaction(
            log.clone(),
            retention,
            clock.clone(),
            Duration::from_secs(2),
        ));
        settle(&clock, &log, 1).await;
        assert_eq!(stored_ids(&log), [5, 6, 7, 8, 9, 10]);

        clock.advance(Duration::from_secs(1));
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert_eq!(log.compactions(), 1, "compacted before the period passed");

        clock.advance(Duration::from_secs(1));
        settle(&clock, &log, 2).await;
        assert_eq!(stored_ids(&log), [7, 8, 9, 10]);
        task.abort();
    }

    #[tokio::test]
    async fn a_failed_compaction_is_retried_at_the_next_period() {
        let log = Arc::new(InMemoryEventLog::new());
        for event in sample_stream(1, 10) {
            log.observe(&event);
        }
        log.fail_next_compaction("disk full");
        let clock = Arc::new(FakeClock::starting_at(seconds_after_epoch(0).unix_micros()));
        let retention = EventRetention {
            max_age: None,
            max_events: Some(3),
        };
        // A zero period is raised to the minimum instead of spinning.
        let task = tokio::spawn(run_event_log_compaction(
            log.clone(),
            retention,
            clock.clone(),
            Duration::ZERO,
        ));
        settle(&clock, &log, 1).await;
        assert_eq!(
            log.events().len(),
            10,
            "the failed compaction removed events"
        );
        clock.advance(MIN_COMPACTION_PERIOD);
        settle(&clock, &log, 2).await;
        assert_eq!(stored_ids(&log), [8, 9, 10]);
        task.abort();
    }

    #[tokio::test]
    async fn each_round_records_its_result_the_size_and_the_dropped_count() {
        let log = InMemoryEventLog::new();
        for event in sample_stream(1, 10) {
            log.observe(&event);
        }
        let retention = EventRetention {
            max_age: None,
            max_events: Some(4),
        };
        let ok = compact_once(&log, retention, seconds_after_epoch(0)).await;
        log.fail_next_compaction("disk full");
        let failed = compact_once(&log, retention, seconds_after_epoch(0)).await;
        assert!(matches!(
            failed.compaction,
            Err(EventLogError::Compaction(_))
        ));

        let recorder = MemoryRecorder::default();
        metrics::with_local_recorder(&recorder, || {
            assert_eq!(report(&ok, 0), 0);
            assert_eq!(report(&failed, 0), 0);
            // A log that reports drops: the counter follows its total, never goes back.
            let dropping = Outcome {
                compaction: Ok(CompactionReport {
                    removed: 0,
                    remaining: 4,
                }),
                stats: Ok(EventLogStats {
                    events: 4,
                    oldest_event_id: Some(7),
                    newest_event_id: Some(10),
                    dropped: 12,
                }),
            };
            assert_eq!(report(&dropping, 0), 12);
            assert_eq!(report(&dropping, 12), 12);
        });
        assert_eq!(
            recorder.value(EVENT_LOG_COMPACTIONS_TOTAL, &[("result", "ok")]),
            Some(3)
        );
        assert_eq!(
            recorder.value(EVENT_LOG_COMPACTIONS_TOTAL, &[("result", "error")]),
            Some(1)
        );
        assert_eq!(recorder.gauge(EVENT_LOG_EVENTS), Some(4.0));
        assert_eq!(recorder.value(EVENT_LOG_DROPPED_TOTAL, &[]), Some(12));
    }
}
