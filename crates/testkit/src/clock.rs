//! A clock whose time moves only when the test says so.

use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_core::{Clock, MonoTime, Timestamp};
use tokio::sync::oneshot;

struct FakeTime {
    elapsed: Duration,
    sleepers: Vec<(Duration, oneshot::Sender<()>)>,
}

/// A fake [`Clock`]: `now()` and `wall()` advance only through [`FakeClock::advance`], which
/// also wakes every `sleep` whose deadline has passed.
pub struct FakeClock {
    wall_origin_micros: i64,
    time: Mutex<FakeTime>,
}

impl Default for FakeClock {
    fn default() -> Self {
        // 2026-11-21T14:03:07.000000 UTC: a fixed, recognisable wall time.
        Self::starting_at(1_795_269_787_000_000)
    }
}

impl FakeClock {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn starting_at(wall_origin_micros: i64) -> Self {
        Self {
            wall_origin_micros,
            time: Mutex::new(FakeTime {
                elapsed: Duration::ZERO,
                sleepers: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FakeTime> {
        self.time
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Moves time forward and wakes the sleepers that are due.
    pub fn advance(&self, by: Duration) {
        let due = {
            let mut time = self.lock();
            time.elapsed += by;
            let now = time.elapsed;
            let (due, waiting): (Vec<_>, Vec<_>) = time
                .sleepers
                .drain(..)
                .partition(|(deadline, _)| *deadline <= now);
            time.sleepers = waiting;
            due
        };
        for (_, waker) in due {
            let _ = waker.send(());
        }
    }

    /// How many `sleep` calls are waiting for time to move.
    pub fn sleepers(&self) -> usize {
        let mut time = self.lock();
        time.sleepers.retain(|(_, waker)| !waker.is_closed());
        time.sleepers.len()
    }
}

#[async_trait]
impl Clock for FakeClock {
    fn now(&self) -> MonoTime {
        MonoTime::from_duration(self.lock().elapsed)
    }

    fn wall(&self) -> Timestamp {
        let elapsed = i64::try_from(self.lock().elapsed.as_micros()).unwrap_or(i64::MAX);
        Timestamp::from_unix_micros(self.wall_origin_micros.saturating_add(elapsed))
    }

    async fn sleep(&self, duration: Duration) {
        let receiver = {
            let mut time = self.lock();
            if duration.is_zero() {
                return;
            }
            let (sender, receiver) = oneshot::channel();
            let deadline = time.elapsed + duration;
            time.sleepers.push((deadline, sender));
            receiver
        };
        let _ = receiver.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sleepers_wake_only_when_time_passes_their_deadline() {
        let clock = std::sync::Arc::new(FakeClock::new());
        let sleeper = {
            let clock = clock.clone();
            tokio::spawn(async move { clock.sleep(Duration::from_secs(5)).await })
        };
        while clock.sleepers() == 0 {
            tokio::task::yield_now().await;
        }
        clock.advance(Duration::from_secs(4));
        tokio::task::yield_now().await;
        assert!(!sleeper.is_finished());
        clock.advance(Duration::from_secs(1));
        sleeper.await.unwrap();
        assert_eq!(clock.now().as_duration(), Duration::from_secs(5));
        assert_eq!(clock.wall().to_string(), "2026-11-21T14:03:12.000000");
    }
}
