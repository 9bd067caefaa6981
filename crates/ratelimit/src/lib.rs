//! Token buckets per caller, the bundled implementation of mcpgw's [`RateLimiter`] port.
//!
//! Each bucket is a lock-free token bucket of the `ratelimit` crate; this crate adds what that
//! crate leaves out: one bucket per key, kept in a sharded map, and eviction of idle buckets.
//! A bucket idle for the policy's refill time is full again, so forgetting it changes no
//! answer: memory is bounded by the callers seen within that time (about 150 bytes each).
//!
//! It must never block on I/O, never hold a shard's lock for longer than one map operation, and
//! never keep a bucket for a key it was not asked about.
//!
//! # Example
//!
//! With a clock that moves only when told to:
//!
//! ```rust
//! use std::time::Duration;
//!
//! use mcpgw_authz::{RateLimitCaller, RateLimitKey, RateLimitPolicy, RateLimitScope, RateLimiter as _};
//! use mcpgw_ratelimit::{ManualClock, TokenBuckets};
//!
//! let clock = ManualClock::new();
//! let policy = RateLimitPolicy { requests_per_second: 1.0, burst: 2 };
//! let buckets = TokenBuckets::with_clock(policy, clock.clone());
//! let alice = RateLimitCaller::Principal("user:alice".into());
//! let key = RateLimitKey { scope: RateLimitScope::Rest, caller: &alice, tool: None };
//!
//! // A burst of two, then a refusal that says when to come back.
//! assert!(buckets.check(&key).allowed);
//! assert!(buckets.check(&key).allowed);
//! let refused = buckets.check(&key);
//! assert!(!refused.allowed);
//! assert_eq!(refused.retry_after_seconds(), 1);
//!
//! clock.advance(Duration::from_secs(1));
//! assert!(buckets.check(&key).allowed);
//! ```

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use mcpgw_authz::{RateLimitDecision, RateLimitKey, RateLimitPolicy, RateLimiter};
use ratelimit::{Ratelimiter, TryWaitError};

/// A monotonic clock shared by every bucket: readings are durations since one fixed point.
pub trait BucketClock: ratelimit::Clock + Clone + Send + Sync + 'static {}

impl<C: ratelimit::Clock + Clone + Send + Sync + 'static> BucketClock for C {}

/// The process's monotonic clock, read since the first use of any `ProcessClock`. Zero-sized,
/// so buckets pay nothing for holding it.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessClock;

impl ratelimit::Clock for ProcessClock {
    fn elapsed(&self) -> Duration {
        static EPOCH: OnceLock<Instant> = OnceLock::new();
        EPOCH.get_or_init(Instant::now).elapsed()
    }
}

/// A clock that moves only when told to, for tests and simulations.
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn advance(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.0.fetch_add(nanos, Ordering::SeqCst);
    }
}

impl ratelimit::Clock for ManualClock {
    fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::SeqCst))
    }
}

/// Rates are kept as tokens per this period, so that fractional rates (0.5 per second) are
/// whole numbers: thousandths of a request per second.
const RATE_PERIOD: Duration = Duration::from_secs(1000);
const SHARDS: usize = 64;

struct Bucket<C: BucketClock> {
    tokens: Ratelimiter<C>,
    last_seen: Duration,
}

/// One shard of the bucket map.
type Shard<C> = Mutex<HashMap<Box<str>, Bucket<C>>>;

/// [`RateLimiter`] over one token bucket per key.
pub struct TokenBuckets<C: BucketClock = ProcessClock> {
    policy: RateLimitPolicy,
    rate_per_period: u64,
    idle_after: Duration,
    clock: C,
    hasher: RandomState,
    shards: Box<[Shard<C>]>,
}

impl<C: BucketClock> std::fmt::Debug for TokenBuckets<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenBuckets")
            .field("policy", &self.policy)
            .field("tracked", &self.tracked())
            .finish()
    }
}

impl TokenBuckets<ProcessClock> {
    pub fn new(policy: RateLimitPolicy) -> Self {
        Self::with_clock(policy, ProcessClock)
    }
}

impl<C: BucketClock> TokenBuckets<C> {
    /// Buckets as `policy` says, timed by `clock`. Rates below 0.001 per second count as 0.001.
    pub fn with_clock(policy: RateLimitPolicy, clock: C) -> Self {
        let rate_per_period = if policy.is_enabled() {
            // Saturating float-to-int conversion: absurd rates become u64::MAX, never wrap.
            ((policy.requests_per_second * RATE_PERIOD.as_secs_f64()).round() as u64).max(1)
        } else {
            0
        };
        Self {
            idle_after: policy.refill_time(),
            policy,
            rate_per_period,
            clock,
            hasher: RandomState::new(),
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }

    fn shard(&self, key: &str) -> &Shard<C> {
        let index = self.hasher.hash_one(key) as usize % self.shards.len();
        &self.shards[index]
    }

    fn new_bucket(&self, now: Duration) -> Bucket<C> {
        let burst = u64::from(self.policy.burst);
        let tokens = ratelimit::Builder::with_clock(self.rate_per_period, self.clock.clone())
            .period(RATE_PERIOD)
            .max_tokens(burst)
            .initial_available(burst)
            .build()
            // The policy is enabled here, so burst ≥ 1 = initial ≤ max and the period is set.
            .unwrap_or_else(|_| unreachable!("an enabled policy always builds a bucket"));
        Bucket {
            tokens,
            last_seen: now,
        }
    }
}

impl<C: BucketClock> TokenBuckets<C> {
    /// Takes a token from the bucket of `key`, making a full one for a key not seen recently.
    fn check_key(&self, key: &str) -> RateLimitDecision {
        let now = ratelimit::Clock::elapsed(&self.clock);
        let mut shard = self
            .shard(key)
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let bucket = match shard.get_mut(key) {
            Some(bucket) => bucket,
            None => shard
                .entry(Box::from(key))
                .or_insert_with(|| self.new_bucket(now)),
        };
        bucket.last_seen = now;
        let limit = self.policy.burst;
        match bucket.tokens.try_wait() {
            Ok(()) => RateLimitDecision {
                allowed: true,
                limit,
                remaining: clamp_u32(bucket.tokens.available()),
                retry_after: Duration::ZERO,
            },
            Err(TryWaitError::Insufficient(wait)) => RateLimitDecision {
                allowed: false,
                limit,
                remaining: 0,
                retry_after: wait,
            },
            // The bucket holds `burst` ≥ 1 tokens, so one token never exceeds it; answer a
            // full refill if the crate ever says so.
            Err(_) => RateLimitDecision {
                allowed: false,
                limit,
                remaining: 0,
                retry_after: self.idle_after,
            },
        }
    }
}

thread_local! {
    /// The key of the bucket being checked, built here so that a check allocates nothing for
    /// a key already known.
    static KEY_BUFFER: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

fn clamp_u32(value: u64) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

impl<C: BucketClock> RateLimiter for TokenBuckets<C> {
    fn policy(&self) -> RateLimitPolicy {
        self.policy
    }

    fn check(&self, key: &RateLimitKey<'_>) -> RateLimitDecision {
        if self.rate_per_period == 0 {
            return RateLimitDecision::UNLIMITED;
        }
        KEY_BUFFER.with_borrow_mut(|buffer| {
            buffer.clear();
            key.write_bucket_key(buffer);
            self.check_key(buffer)
        })
    }

    fn evict_idle(&self) -> usize {
        if self.rate_per_period == 0 {
            return 0;
        }
        let now = ratelimit::Clock::elapsed(&self.clock);
        let mut evicted = 0;
        for shard in &*self.shards {
            let mut shard = shard
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let before = shard.len();
            shard.retain(|_, bucket| now.saturating_sub(bucket.last_seen) < self.idle_after);
            evicted += before - shard.len();
            if shard.capacity() > 64 && shard.len() < shard.capacity() / 4 {
                shard.shrink_to_fit();
            }
        }
        evicted
    }

    fn tracked(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                shard
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .len()
            })
            .sum()
    }
}

#[cfg(test)]
mod tests;
