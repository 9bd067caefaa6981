//! Failure counting and restart backoff: pure policy, driven by the clock the caller passes in.

use std::time::Duration;

use crate::time::MonoTime;

/// Exponential restart backoff: `base * 2^(failures - 1)`, capped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffPolicy {
    pub base: Duration,
    pub cap: Duration,
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(60),
        }
    }
}

impl BackoffPolicy {
    /// The wait before the next start after `consecutive_failures` failures in a row.
    pub fn delay_after(&self, consecutive_failures: u32) -> Duration {
        if consecutive_failures == 0 {
            return Duration::ZERO;
        }
        let exponent = (consecutive_failures - 1).min(31);
        self.base.saturating_mul(1u32 << exponent).min(self.cap)
    }
}

/// Counts consecutive failures of one server. Transport failures, failed starts, crashes and
/// failed health checks count; any success resets the count. Tool errors (a JSON-RPC error or an
/// `isError` result) are not failures of the server and are never recorded here.
#[derive(Debug, Clone)]
pub struct FailureTracker {
    consecutive: u32,
    limit: u32,
    last_failure_at: Option<MonoTime>,
    backoff: BackoffPolicy,
}

impl FailureTracker {
    pub fn new(limit: u32, backoff: BackoffPolicy) -> Self {
        Self {
            consecutive: 0,
            limit: limit.max(1),
            last_failure_at: None,
            backoff,
        }
    }

    pub fn consecutive(&self) -> u32 {
        self.consecutive
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }

    pub fn set_limit(&mut self, limit: u32) {
        self.limit = limit.max(1);
    }

    /// Records a failure and tells whether the limit is now reached.
    pub fn record_failure(&mut self, now: MonoTime) -> bool {
        self.consecutive = self.consecutive.saturating_add(1);
        self.last_failure_at = Some(now);
        self.limit_reached()
    }

    pub fn record_success(&mut self) {
        self.consecutive = 0;
        self.last_failure_at = None;
    }

    pub fn limit_reached(&self) -> bool {
        self.consecutive >= self.limit
    }

    /// When the next start may happen; `None` when nothing holds it back.
    pub fn next_start_at(&self) -> Option<MonoTime> {
        let last = self.last_failure_at?;
        Some(last.plus(self.backoff.delay_after(self.consecutive)))
    }

    /// How long a start must still wait at `now`; zero when it may go ahead.
    pub fn wait_before_start(&self, now: MonoTime) -> Duration {
        self.next_start_at()
            .map_or(Duration::ZERO, |at| at.saturating_since(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: u64) -> MonoTime {
        MonoTime::from_duration(Duration::from_secs(seconds))
    }

    #[test]
    fn backoff_doubles_and_caps_at_sixty_seconds() {
        let policy = BackoffPolicy::default();
        let delays: Vec<u64> = (0..10).map(|n| policy.delay_after(n).as_secs()).collect();
        assert_eq!(delays, [0, 1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(policy.delay_after(u32::MAX), Duration::from_secs(60));
    }

    #[test]
    fn the_limit_is_reached_after_consecutive_failures_and_a_success_resets() {
        let mut tracker = FailureTracker::new(3, BackoffPolicy::default());
        assert!(!tracker.record_failure(at(1)));
        assert!(!tracker.record_failure(at(2)));
        tracker.record_success();
        assert_eq!(tracker.consecutive(), 0);
        assert!(!tracker.record_failure(at(3)));
        assert!(!tracker.record_failure(at(4)));
        assert!(tracker.record_failure(at(5)));
        assert!(tracker.limit_reached());
    }

    #[test]
    fn the_wait_before_a_start_follows_the_last_failure() {
        let mut tracker = FailureTracker::new(5, BackoffPolicy::default());
        assert_eq!(tracker.wait_before_start(at(0)), Duration::ZERO);
        tracker.record_failure(at(10));
        tracker.record_failure(at(10));
        // Two failures: 2 s after the last one.
        assert_eq!(tracker.wait_before_start(at(10)), Duration::from_secs(2));
        assert_eq!(tracker.wait_before_start(at(11)), Duration::from_secs(1));
        assert_eq!(tracker.wait_before_start(at(12)), Duration::ZERO);
        tracker.record_success();
        assert_eq!(tracker.next_start_at(), None);
    }

    #[test]
    fn a_limit_of_zero_is_treated_as_one() {
        let mut tracker = FailureTracker::new(0, BackoffPolicy::default());
        assert!(tracker.record_failure(at(0)));
    }
}
