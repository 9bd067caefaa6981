//! The production clock and task spawner, on tokio.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use futures::future::BoxFuture;
use mcpgw_core::{Clock, MonoTime, ServerManager, TaskSpawner, Timestamp};

/// The system clock: `Instant` for schedules, `SystemTime` for records, tokio's timer to sleep.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    origin: Instant,
}

impl Default for TokioClock {
    fn default() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

#[async_trait]
impl Clock for TokioClock {
    fn now(&self) -> MonoTime {
        MonoTime::from_duration(self.origin.elapsed())
    }

    fn wall(&self) -> Timestamp {
        let micros = match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(since) => i64::try_from(since.as_micros()).unwrap_or(i64::MAX),
            Err(before) => -i64::try_from(before.duration().as_micros()).unwrap_or(i64::MAX),
        };
        Timestamp::from_unix_micros(micros)
    }

    async fn sleep(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }
}

/// Spawns background tasks on the current tokio runtime.
#[derive(Debug, Clone)]
pub struct TokioSpawner {
    handle: tokio::runtime::Handle,
}

impl TokioSpawner {
    /// Uses the runtime of the calling context; panics outside a tokio runtime, like
    /// `tokio::spawn` does.
    pub fn current() -> Self {
        Self {
            handle: tokio::runtime::Handle::current(),
        }
    }

    pub fn new(handle: tokio::runtime::Handle) -> Self {
        Self { handle }
    }
}

impl TaskSpawner for TokioSpawner {
    fn spawn(&self, task: BoxFuture<'static, ()>) {
        self.handle.spawn(task);
    }
}

/// Runs the manager's upkeep (health checks, idle reaping, restarts) every `period` until the
/// returned handle is aborted. Idle reaping must be checked at least every 5 s.
pub fn spawn_maintenance(manager: ServerManager, period: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            manager.run_maintenance().await;
        }
    })
}

/// Forgets idle rate-limit buckets every `period` (docs/operations.md says they are checked
/// every 5 s), so memory follows the callers seen recently, not every caller ever seen.
pub fn spawn_rate_limit_eviction(
    limiter: std::sync::Arc<dyn mcpgw_authz::RateLimiter>,
    period: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let evicted = limiter.evict_idle();
            if evicted > 0 {
                tracing::debug!(
                    evicted,
                    tracked = limiter.tracked(),
                    "idle rate-limit buckets forgotten"
                );
            }
        }
    })
}

/// The operating system's random source for API keys, read from `/dev/urandom` (which never
/// blocks once the system has booted).
#[derive(Debug, Default, Clone, Copy)]
pub struct OsSecrets;

impl mcpgw_authz::SecretSource for OsSecrets {
    fn fill(&self, destination: &mut [u8]) -> Result<(), mcpgw_authz::RandomnessError> {
        use std::io::Read as _;
        std::fs::File::open("/dev/urandom")
            .and_then(|mut source| source.read_exact(destination))
            .map_err(|error| {
                mcpgw_authz::RandomnessError(format!(
                    "cannot read random bytes from /dev/urandom: {error}"
                ))
            })
    }
}
