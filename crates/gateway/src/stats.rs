//! Counts and latencies of tool calls, fed from the event stream, for the system summary.

use std::collections::VecDeque;
use std::sync::Mutex;

use mcpgw_core::{DomainEvent, EventObserver, PublishedEvent};

/// How many of the most recent call durations the percentiles are computed over.
pub const CALL_DURATION_WINDOW: usize = 10_000;

/// Counts every tool invocation the gateway finishes and keeps the durations of the most recent
/// ones. Register it on the event bus as an observer; memory stays bounded by the window.
///
/// A call *fails* when it produced no answer (`ToolInvocationFailed`: transport or protocol
/// failure, timeout, unavailable server). A tool that answers with `isError` is a successful
/// call that carries a tool-level error: it is counted in `tool_errors`, not in `failures`,
/// as the invocation history records it.
#[derive(Debug)]
pub struct CallStats {
    window: usize,
    inner: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    calls: u64,
    failures: u64,
    tool_errors: u64,
    durations_ms: VecDeque<f64>,
}

/// What [`CallStats`] knows at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct CallStatsSnapshot {
    /// Every finished tool call since start-up, failed ones included.
    pub calls: u64,
    /// Calls that produced no answer.
    pub failures: u64,
    /// Calls whose tool answered with a tool-level error (`isError`).
    pub tool_errors: u64,
    /// The share of calls that did not fail, from 0 to 1; `None` before the first call.
    pub success_rate: Option<f64>,
    /// The median duration of the most recent calls, in milliseconds; `None` before the first.
    pub p50_ms: Option<f64>,
    /// The 99th percentile duration of the most recent calls, in milliseconds.
    pub p99_ms: Option<f64>,
}

impl Default for CallStats {
    fn default() -> Self {
        Self::new()
    }
}

impl CallStats {
    /// Keeps the durations of the last [`CALL_DURATION_WINDOW`] calls.
    pub fn new() -> Self {
        Self::with_window(CALL_DURATION_WINDOW)
    }

    /// Keeps the durations of the last `window` calls (at least one).
    pub fn with_window(window: usize) -> Self {
        Self {
            window: window.max(1),
            inner: Mutex::new(Counts::default()),
        }
    }

    /// Counts one finished call.
    pub fn record(&self, duration_ms: f64, failed: bool, tool_error: bool) {
        let mut counts = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        counts.calls += 1;
        if failed {
            counts.failures += 1;
        }
        if tool_error {
            counts.tool_errors += 1;
        }
        if counts.durations_ms.len() == self.window {
            counts.durations_ms.pop_front();
        }
        // A duration that is not a number (never produced by the manager) would poison the
        // ordering; it counts as zero.
        let duration_ms = if duration_ms.is_finite() {
            duration_ms.max(0.0)
        } else {
            0.0
        };
        counts.durations_ms.push_back(duration_ms);
    }

    pub fn snapshot(&self) -> CallStatsSnapshot {
        let (calls, failures, tool_errors, mut durations) = {
            let counts = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            (
                counts.calls,
                counts.failures,
                counts.tool_errors,
                counts.durations_ms.iter().copied().collect::<Vec<f64>>(),
            )
        };
        durations.sort_by(f64::total_cmp);
        #[allow(clippy::cast_precision_loss)]
        let success_rate = (calls > 0).then(|| (calls - failures) as f64 / calls as f64);
        CallStatsSnapshot {
            calls,
            failures,
            tool_errors,
            success_rate,
            p50_ms: percentile(&durations, 50),
            p99_ms: percentile(&durations, 99),
        }
    }
}

/// The nearest-rank percentile of sorted values: the smallest value that at least `percent`
/// per cent of the values do not exceed.
fn percentile(sorted: &[f64], percent: usize) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (sorted.len() * percent).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

impl EventObserver for CallStats {
    fn observe(&self, published: &PublishedEvent) {
        match &published.event {
            DomainEvent::ToolInvocationCompleted {
                duration_ms,
                is_error,
                ..
            } => self.record(*duration_ms, false, *is_error),
            DomainEvent::ToolInvocationFailed { duration_ms, .. } => {
                self.record(*duration_ms, true, false);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use mcpgw_core::{ServerId, Timestamp};

    use super::*;

    fn published(event: DomainEvent) -> PublishedEvent {
        PublishedEvent {
            event_id: 1,
            occurred_at: Timestamp::from_unix_micros(0),
            event,
        }
    }

    fn completed(duration_ms: f64, is_error: bool) -> PublishedEvent {
        published(DomainEvent::ToolInvocationCompleted {
            mcp_server_id: ServerId::parse("a").unwrap(),
            tool: "echo".to_owned(),
            duration_ms,
            is_error,
            principal: None,
            trace_id: None,
            span_id: None,
        })
    }

    fn failed(duration_ms: f64) -> PublishedEvent {
        published(DomainEvent::ToolInvocationFailed {
            mcp_server_id: ServerId::parse("a").unwrap(),
            tool: "echo".to_owned(),
            duration_ms,
            error_kind: "timeout",
            error: "too slow".to_owned(),
            principal: None,
            trace_id: None,
            span_id: None,
        })
    }

    #[test]
    fn before_any_call_there_are_no_rates_or_percentiles() {
        let snapshot = CallStats::new().snapshot();
        assert_eq!(snapshot.calls, 0);
        assert_eq!(snapshot.failures, 0);
        assert_eq!(snapshot.success_rate, None);
        assert_eq!(snapshot.p50_ms, None);
        assert_eq!(snapshot.p99_ms, None);
    }

    #[test]
    fn invocation_events_are_counted_and_other_events_ignored() {
        let stats = CallStats::new();
        stats.observe(&completed(10.0, false));
        stats.observe(&completed(20.0, true));
        stats.observe(&failed(30.0));
        stats.observe(&failed(40.0));
        stats.observe(&published(DomainEvent::McpServerRemoved {
            mcp_server_id: ServerId::parse("a").unwrap(),
        }));
        let snapshot = stats.snapshot();
        assert_eq!(snapshot.calls, 4);
        assert_eq!(snapshot.failures, 2);
        assert_eq!(snapshot.tool_errors, 1);
        assert_eq!(snapshot.success_rate, Some(0.5));
        assert_eq!(snapshot.p50_ms, Some(20.0));
        assert_eq!(snapshot.p99_ms, Some(40.0));
    }

    #[test]
    fn percentiles_are_nearest_rank_over_the_recorded_durations() {
        let stats = CallStats::new();
        // 1..=100 in a scrambled order: the percentiles must not depend on arrival order.
        for step in 0..100_u32 {
            stats.record(f64::from((step * 37) % 100 + 1), false, false);
        }
        let snapshot = stats.snapshot();
        assert_eq!(snapshot.p50_ms, Some(50.0));
        assert_eq!(snapshot.p99_ms, Some(99.0));
        assert_eq!(snapshot.success_rate, Some(1.0));
    }

    #[test]
    fn only_the_most_recent_durations_are_kept_but_every_call_is_counted() {
        let stats = CallStats::with_window(3);
        for duration in [1000.0, 1000.0, 1.0, 2.0, 3.0] {
            stats.record(duration, false, false);
        }
        let snapshot = stats.snapshot();
        assert_eq!(snapshot.calls, 5);
        // The two slow calls fell out of the window.
        assert_eq!(snapshot.p99_ms, Some(3.0));
        assert_eq!(snapshot.p50_ms, Some(2.0));
        assert_eq!(stats.inner.lock().unwrap().durations_ms.len(), 3);
    }

    #[test]
    fn a_duration_that_is_not_a_number_counts_as_zero() {
        // Bad input: NaN and a negative duration must not break the ordering.
        let stats = CallStats::new();
        stats.record(f64::NAN, false, false);
        stats.record(-5.0, false, false);
        stats.record(7.0, false, false);
        let snapshot = stats.snapshot();
        assert_eq!(snapshot.p50_ms, Some(0.0));
        assert_eq!(snapshot.p99_ms, Some(7.0));
    }
}
