//! What every [`RateLimiter`] promises, as tests that every implementation must pass, and
//! [`InMemoryRateLimiter`], a plain implementation on the [`Clock`] port for tests of the code
//! that uses the port.
//!
//! An adapter crate runs the whole suite against its own limiter with one line in its tests:
//!
//! ```text
//! mcpgw_testkit::rate_limiter_contract_suite!(|policy| async move {
//!     let clock = MyManualClock::new();
//!     ClockedLimiter::new(MyLimiter::with_clock(policy, clock.clone()), move |by| clock.advance(by))
//! });
//! ```
//!
//! Buckets refill with time, so the suite needs a limiter whose clock it can move: it asks for
//! one per case through a factory that takes the [`RateLimitPolicy`] of the case and answers,
//! possibly after connecting somewhere, a [`ClockedLimiter`]: the limiter together with the hand
//! that moves its clock. Nothing in the suite sleeps. Each case is also a public `async fn`
//! taking that factory, for callers that need to run one case by hand.
//!
//! The cases ask through [`RateLimiter::admit`], as the gateway does, so that a limiter that
//! decides in memory ([`Admission::Now`](mcpgw_authz::Admission::Now)) and one that asks a
//! store shared by several replicas ([`Admission::Later`](mcpgw_authz::Admission::Later)) are
//! held to the same answers. Each case runs in a tokio runtime of two worker threads (made by
//! the suite: the invoking crate needs no tokio of its own). The cases check what the port's
//! documentation promises:
//! - a new key starts with a full bucket of `burst` tokens; each allowed request takes one and
//!   answers the whole tokens left, every answer names `burst` as the limit;
//! - a refused request takes nothing, answers `remaining` 0 and how long until the next token is
//!   back: waiting that long (to the millisecond the decision is reported in) lets the next
//!   request through, waiting a millisecond less does not;
//! - tokens come back at the policy's steady rate, fractional rates included, and a bucket never
//!   holds more than `burst`;
//! - every scope, caller and tool has a bucket of its own, and there is one bucket per key asked
//!   about, none for any other;
//! - a bucket not seen for [`RateLimitPolicy::refill_time`] is full again, and one seen within
//!   that time keeps its level, whether or not it was forgotten meanwhile;
//! - for buckets held in this process ([`ClockedLimiter::new`]), `tracked` counts exactly them
//!   and `evict_idle` forgets exactly those not seen for the refill time; a limiter whose
//!   buckets live in a store ([`ClockedLimiter::with_buckets_in_a_store`]) holds none, and both
//!   answer 0 whatever it was asked;
//! - with a policy that is not enabled every answer is [`RateLimitDecision::UNLIMITED`], at
//!   once, and no bucket is kept;
//! - concurrent requests never take a token twice.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use mcpgw_authz::{
    RateLimitCaller, RateLimitDecision, RateLimitKey, RateLimitPolicy, RateLimitScope, RateLimiter,
};
use mcpgw_core::{Clock, MonoTime};

/// Expands to one `#[test]` per case of the [`RateLimiter`] contract. `$make_limiter` is a
/// closure (or function) from the case's [`RateLimitPolicy`] to a future of a fresh
/// [`ClockedLimiter`] (an `async move` block; `std::future::ready(..)` for a limiter made at
/// once); every case calls it at least once and moves time only through the limiter's hand.
///
/// The test functions are named after the cases and defined in the invoking module: to run the
/// suite against two implementations in one crate, invoke it in two modules.
#[macro_export]
macro_rules! rate_limiter_contract_suite {
    ($make_limiter:expr $(,)?) => {
        $crate::__rate_limiter_contract_case!($make_limiter, a_new_key_starts_with_a_full_bucket);
        $crate::__rate_limiter_contract_case!($make_limiter, a_refused_check_takes_nothing);
        $crate::__rate_limiter_contract_case!($make_limiter, tokens_come_back_at_the_steady_rate);
        $crate::__rate_limiter_contract_case!(
            $make_limiter,
            a_bucket_never_holds_more_than_the_burst
        );
        $crate::__rate_limiter_contract_case!(
            $make_limiter,
            retry_after_is_the_wait_for_the_next_token
        );
        $crate::__rate_limiter_contract_case!($make_limiter, fractional_rates_are_honoured);
        $crate::__rate_limiter_contract_case!(
            $make_limiter,
            a_policy_that_is_off_limits_nothing_and_keeps_nothing
        );
        $crate::__rate_limiter_contract_case!(
            $make_limiter,
            every_scope_caller_and_tool_has_its_own_bucket
        );
        $crate::__rate_limiter_contract_case!(
            $make_limiter,
            one_bucket_is_kept_per_key_asked_about
        );
        $crate::__rate_limiter_contract_case!(
            $make_limiter,
            buckets_idle_for_the_refill_time_are_evicted
        );
        $crate::__rate_limiter_contract_case!(
            $make_limiter,
            eviction_keeps_buckets_seen_within_the_refill_time
        );
        $crate::__rate_limiter_contract_case!(
            $make_limiter,
            concurrent_checks_take_each_token_once
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __rate_limiter_contract_case {
    ($make_limiter:expr, $case:ident) => {
        #[test]
        fn $case() {
            let make = $crate::rate_limiter_suite::factory($make_limiter);
            $crate::rate_limiter_suite::runtime()
                .block_on($crate::rate_limiter_suite::$case(&make));
        }
    };
}

/// A limiter under test and the hand that moves the clock its buckets read.
pub struct ClockedLimiter {
    limiter: Arc<dyn RateLimiter>,
    advance: Box<dyn Fn(Duration) + Send + Sync>,
    buckets_in_process: bool,
}

impl ClockedLimiter {
    /// A limiter that holds its buckets in this process. `advance(by)` must move the limiter's
    /// clock forward by exactly `by`.
    pub fn new(
        limiter: impl RateLimiter + 'static,
        advance: impl Fn(Duration) + Send + Sync + 'static,
    ) -> Self {
        Self {
            limiter: Arc::new(limiter),
            advance: Box::new(advance),
            buckets_in_process: true,
        }
    }

    /// The same limiter, declared to keep its buckets in a store that forgets idle ones by
    /// itself: the suite then expects `tracked` and `evict_idle` to answer 0 throughout.
    #[must_use]
    pub fn with_buckets_in_a_store(mut self) -> Self {
        self.buckets_in_process = false;
        self
    }

    pub fn limiter(&self) -> &dyn RateLimiter {
        self.limiter.as_ref()
    }

    /// The limiter, for tasks of its own.
    pub fn shared(&self) -> Arc<dyn RateLimiter> {
        self.limiter.clone()
    }

    pub fn advance(&self, by: Duration) {
        (self.advance)(by);
    }

    /// What `tracked` answers when `in_process` buckets are live: that many for a limiter that
    /// holds them, none for one whose store holds them.
    pub fn expected_held(&self, in_process: usize) -> usize {
        if self.buckets_in_process {
            in_process
        } else {
            0
        }
    }
}

/// A limiter being made, as a factory answers it.
pub type LimiterFuture = Pin<Box<dyn Future<Output = ClockedLimiter>>>;

/// What the suite is given: a fresh limiter with its clock, for a policy.
pub type MakeLimiter<'a> = &'a dyn Fn(RateLimitPolicy) -> LimiterFuture;

/// `make` as the cases take it (the macro does this for each case).
pub fn factory<F, Made>(make: F) -> impl Fn(RateLimitPolicy) -> LimiterFuture
where
    F: Fn(RateLimitPolicy) -> Made,
    Made: Future<Output = ClockedLimiter> + 'static,
{
    move |policy| Box::pin(make(policy))
}

/// The runtime each case of the suite runs in: two worker threads, timers and I/O on.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|error| panic!("cannot build a tokio runtime for the suite: {error}"))
}

/// A [`RateLimiter`] in memory, timed by any [`Clock`] (the test kit's
/// [`FakeClock`](crate::clock::FakeClock) in tests): one token bucket per key in a map behind a
/// lock, in exact integer arithmetic. It is what a test of the code that uses the port gives it
/// when the bundled adapter is not at hand; it passes the suite.
pub struct InMemoryRateLimiter {
    policy: RateLimitPolicy,
    /// The steady rate in millionths of a request per second; 0 when the policy is off.
    micro_rate: u128,
    clock: Arc<dyn Clock>,
    buckets: Mutex<HashMap<String, FakeBucket>>,
}

/// A bucket's level is counted in units of 10⁻¹⁵ token: one nanosecond at one millionth of a
/// request per second adds exactly one, so refills and waits are exact.
const UNITS_PER_TOKEN: u128 = 1_000_000_000_000_000;

struct FakeBucket {
    level: u128,
    updated: MonoTime,
}

impl InMemoryRateLimiter {
    pub fn new(policy: RateLimitPolicy, clock: Arc<dyn Clock>) -> Self {
        let micro_rate = if policy.is_enabled() {
            // A saturating conversion: absurd rates become huge, never wrap.
            ((policy.requests_per_second * 1_000_000.0).round() as u128).max(1)
        } else {
            0
        };
        Self {
            policy,
            micro_rate,
            clock,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    fn buckets(&self) -> MutexGuard<'_, HashMap<String, FakeBucket>> {
        self.buckets
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn capacity(&self) -> u128 {
        u128::from(self.policy.burst) * UNITS_PER_TOKEN
    }
}

impl RateLimiter for InMemoryRateLimiter {
    fn policy(&self) -> RateLimitPolicy {
        self.policy
    }

    fn check(&self, key: &RateLimitKey<'_>) -> RateLimitDecision {
        if self.micro_rate == 0 {
            return RateLimitDecision::UNLIMITED;
        }
        let mut name = String::new();
        key.write_bucket_key(&mut name);
        let now = self.clock.now();
        let capacity = self.capacity();
        let mut buckets = self.buckets();
        let bucket = buckets.entry(name).or_insert(FakeBucket {
            level: capacity,
            updated: now,
        });
        let elapsed = u128::from(
            u64::try_from(now.saturating_since(bucket.updated).as_nanos()).unwrap_or(u64::MAX),
        );
        bucket.level = bucket
            .level
            .saturating_add(elapsed.saturating_mul(self.micro_rate))
            .min(capacity);
        bucket.updated = now;
        let limit = self.policy.burst;
        if bucket.level >= UNITS_PER_TOKEN {
            bucket.level -= UNITS_PER_TOKEN;
            RateLimitDecision {
                allowed: true,
                limit,
                remaining: u32::try_from(bucket.level / UNITS_PER_TOKEN).unwrap_or(u32::MAX),
                retry_after: Duration::ZERO,
            }
        } else {
            let wait = (UNITS_PER_TOKEN - bucket.level).div_ceil(self.micro_rate);
            RateLimitDecision {
                allowed: false,
                limit,
                remaining: 0,
                retry_after: Duration::from_nanos(u64::try_from(wait).unwrap_or(u64::MAX)),
            }
        }
    }

    fn evict_idle(&self) -> usize {
        let idle_after = self.policy.refill_time();
        let now = self.clock.now();
        let mut buckets = self.buckets();
        let before = buckets.len();
        buckets.retain(|_, bucket| now.saturating_since(bucket.updated) < idle_after);
        before - buckets.len()
    }

    fn tracked(&self) -> usize {
        self.buckets().len()
    }
}

// ----- helpers ------------------------------------------------------------------------------

fn policy(requests_per_second: f64, burst: u32) -> RateLimitPolicy {
    RateLimitPolicy {
        requests_per_second,
        burst,
    }
}

fn principal(name: &str) -> RateLimitCaller {
    RateLimitCaller::Principal(name.to_owned())
}

fn rest(caller: &RateLimitCaller) -> RateLimitKey<'_> {
    RateLimitKey {
        scope: RateLimitScope::Rest,
        caller,
        tool: None,
    }
}

fn tool_call<'a>(caller: &'a RateLimitCaller, tool: &'a str) -> RateLimitKey<'a> {
    RateLimitKey {
        scope: RateLimitScope::ToolCall,
        caller,
        tool: Some(tool),
    }
}

/// The limiter's decision for `key`, asked as the gateway asks it.
async fn admit(limiter: &dyn RateLimiter, key: &RateLimitKey<'_>) -> RateLimitDecision {
    limiter.admit(key).decision().await
}

/// Asks about `key` until it is refused (at most `bound` times) and answers how many were
/// allowed and the refusal.
async fn drain(
    limiter: &dyn RateLimiter,
    key: &RateLimitKey<'_>,
    bound: u32,
) -> (u32, RateLimitDecision) {
    for allowed in 0..=bound {
        let decision = admit(limiter, key).await;
        if !decision.allowed {
            return (allowed, decision);
        }
    }
    panic!("{key:?} was still allowed after {bound} checks");
}

fn assert_refused(decision: RateLimitDecision, limit: u32, context: &str) {
    assert!(
        !decision.allowed,
        "{context}: expected a refusal, got {decision:?}"
    );
    assert_eq!(decision.remaining, 0, "{context}: {decision:?}");
    assert_eq!(decision.limit, limit, "{context}: {decision:?}");
    assert!(
        decision.retry_after > Duration::ZERO,
        "{context}: a refusal says how long to wait: {decision:?}"
    );
}

// ----- the cases ----------------------------------------------------------------------------

pub async fn a_new_key_starts_with_a_full_bucket(make: MakeLimiter<'_>) {
    let under_test = make(policy(1.0, 5)).await;
    let limiter = under_test.limiter();
    assert_eq!(limiter.policy(), policy(1.0, 5));
    let alice = principal("user:alice");
    let mut remaining = Vec::new();
    for index in 0..5 {
        let decision = admit(limiter, &rest(&alice)).await;
        assert!(
            decision.allowed,
            "check {index} of a full bucket: {decision:?}"
        );
        assert_eq!(decision.limit, 5, "the limit is the burst: {decision:?}");
        remaining.push(decision.remaining);
    }
    assert_eq!(
        remaining,
        [4, 3, 2, 1, 0],
        "whole tokens left after each check"
    );
    assert_refused(admit(limiter, &rest(&alice)).await, 5, "the sixth check");
}

pub async fn a_refused_check_takes_nothing(make: MakeLimiter<'_>) {
    let under_test = make(policy(1.0, 3)).await;
    let limiter = under_test.limiter();
    let alice = principal("user:alice");
    assert_eq!(drain(limiter, &rest(&alice), 3).await.0, 3);
    for index in 0..100 {
        assert_refused(
            admit(limiter, &rest(&alice)).await,
            3,
            &format!("refusal {index}"),
        );
    }
    // A second later exactly one token is back, as if no refused check had been made.
    under_test.advance(Duration::from_secs(1));
    let decision = admit(limiter, &rest(&alice)).await;
    assert!(decision.allowed, "{decision:?}");
    assert_eq!(decision.remaining, 0);
    assert_refused(
        admit(limiter, &rest(&alice)).await,
        3,
        "after the one token",
    );
}

pub async fn tokens_come_back_at_the_steady_rate(make: MakeLimiter<'_>) {
    let under_test = make(policy(4.0, 8)).await;
    let limiter = under_test.limiter();
    let alice = principal("user:alice");
    assert_eq!(drain(limiter, &rest(&alice), 8).await.0, 8);

    // Four per second: after one second, four tokens.
    under_test.advance(Duration::from_secs(1));
    let mut remaining = Vec::new();
    for _ in 0..4 {
        let decision = admit(limiter, &rest(&alice)).await;
        assert!(decision.allowed, "{decision:?}");
        remaining.push(decision.remaining);
    }
    assert_eq!(remaining, [3, 2, 1, 0]);
    assert_refused(
        admit(limiter, &rest(&alice)).await,
        8,
        "after the four tokens of a second",
    );

    // Parts of a token add up: two eighths of a second make one token, one eighth none.
    under_test.advance(Duration::from_millis(125));
    assert_refused(admit(limiter, &rest(&alice)).await, 8, "half a token");
    under_test.advance(Duration::from_millis(125));
    assert!(
        admit(limiter, &rest(&alice)).await.allowed,
        "two halves make a token"
    );
    assert_refused(admit(limiter, &rest(&alice)).await, 8, "after that token");

    // Remaining counts whole tokens: 2.5 tokens back, one taken, 1.5 left.
    under_test.advance(Duration::from_millis(625));
    let decision = admit(limiter, &rest(&alice)).await;
    assert!(decision.allowed, "{decision:?}");
    assert_eq!(decision.remaining, 1, "1.5 tokens left: {decision:?}");
}

pub async fn a_bucket_never_holds_more_than_the_burst(make: MakeLimiter<'_>) {
    let under_test = make(policy(10.0, 3)).await;
    let limiter = under_test.limiter();
    let alice = principal("user:alice");
    // A quiet hour before the first check gives a new key no more than the burst...
    under_test.advance(Duration::from_secs(3600));
    assert_eq!(drain(limiter, &rest(&alice), 1_000).await.0, 3);
    // ... and neither does a quiet hour after it was drained.
    under_test.advance(Duration::from_secs(3600));
    let first = admit(limiter, &rest(&alice)).await;
    assert!(first.allowed);
    assert_eq!(
        first.remaining, 2,
        "a full bucket holds the burst: {first:?}"
    );
    assert_eq!(drain(limiter, &rest(&alice), 1_000).await.0, 2);
}

pub async fn retry_after_is_the_wait_for_the_next_token(make: MakeLimiter<'_>) {
    // Two per second: a drained bucket has its next token in exactly half a second.
    let under_test = make(policy(2.0, 2)).await;
    let limiter = under_test.limiter();
    let alice = principal("user:alice");
    let (_, refused) = drain(limiter, &rest(&alice), 2).await;
    assert!(
        refused.retry_after <= Duration::from_millis(500)
            && refused.retry_after > Duration::from_millis(499),
        "the wait for one token at 2 per second is half a second, got {:?}",
        refused.retry_after
    );
    assert_eq!(refused.retry_after_seconds(), 1);

    // Part of the wait has passed: the answer is what is left of it.
    under_test.advance(Duration::from_millis(200));
    let refused = admit(limiter, &rest(&alice)).await;
    assert_refused(refused, 2, "200 ms into the wait");
    assert!(
        refused.retry_after <= Duration::from_millis(300)
            && refused.retry_after > Duration::from_millis(299),
        "300 ms of the wait are left, got {:?}",
        refused.retry_after
    );

    // A millisecond short of the announced wait is still too early...
    under_test.advance(refused.retry_after - Duration::from_millis(1));
    let early = admit(limiter, &rest(&alice)).await;
    assert_refused(early, 2, "a millisecond early");
    assert!(early.retry_after <= Duration::from_millis(1), "{early:?}");
    // ... and waiting it out, to the millisecond it is reported in, lets the request through.
    under_test.advance(Duration::from_millis(early.retry_after_millis()));
    assert!(
        admit(limiter, &rest(&alice)).await.allowed,
        "the announced wait is enough"
    );

    // The same at a rate whose token interval is no whole number of nanoseconds: the wait is
    // reported in whole milliseconds (`retryAfterMs`) or seconds (`Retry-After`), and a client
    // that waits that long is let through.
    let under_test = make(policy(3.0, 1)).await;
    let limiter = under_test.limiter();
    let (_, refused) = drain(limiter, &rest(&alice), 1).await;
    assert!(
        refused.retry_after <= Duration::from_nanos(333_333_334)
            && refused.retry_after > Duration::from_millis(333),
        "a third of a second, got {:?}",
        refused.retry_after
    );
    under_test.advance(refused.retry_after - Duration::from_millis(1));
    let early = admit(limiter, &rest(&alice)).await;
    assert_refused(early, 1, "a millisecond early at 3 per second");
    under_test.advance(Duration::from_millis(early.retry_after_millis()));
    let decision = admit(limiter, &rest(&alice)).await;
    assert!(
        decision.allowed,
        "the announced wait is enough at 3 per second: {decision:?}"
    );
}

pub async fn fractional_rates_are_honoured(make: MakeLimiter<'_>) {
    // Half a request per second: one every two seconds.
    let under_test = make(policy(0.5, 1)).await;
    let limiter = under_test.limiter();
    let alice = principal("user:alice");
    let (allowed, refused) = drain(limiter, &rest(&alice), 1).await;
    assert_eq!(allowed, 1);
    assert!(
        refused.retry_after <= Duration::from_secs(2)
            && refused.retry_after > Duration::from_millis(1999),
        "{refused:?}"
    );
    assert_eq!(refused.retry_after_seconds(), 2);
    under_test.advance(Duration::from_millis(1990));
    assert_refused(
        admit(limiter, &rest(&alice)).await,
        1,
        "10 ms before the token is back",
    );
    under_test.advance(Duration::from_millis(10));
    assert!(admit(limiter, &rest(&alice)).await.allowed);
    assert_refused(admit(limiter, &rest(&alice)).await, 1, "right after it");
}

pub async fn a_policy_that_is_off_limits_nothing_and_keeps_nothing(make: MakeLimiter<'_>) {
    let callers = [
        principal("user:alice"),
        RateLimitCaller::Address(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7))),
        RateLimitCaller::Unknown,
    ];
    // No rate, a negative rate, no burst: each turns limiting off.
    for off in [policy(0.0, 20), policy(-1.0, 20), policy(5.0, 0)] {
        assert!(!off.is_enabled());
        let under_test = make(off).await;
        let limiter = under_test.limiter();
        assert_eq!(limiter.policy(), off);
        for round in 0..300 {
            for caller in &callers {
                for key in [rest(caller), tool_call(caller, "math__add")] {
                    assert_eq!(
                        admit(limiter, &key).await,
                        RateLimitDecision::UNLIMITED,
                        "{off:?}, round {round}, {key:?}"
                    );
                }
            }
            under_test.advance(Duration::from_millis(10));
        }
        assert_eq!(limiter.tracked(), 0, "{off:?} keeps no bucket");
        assert_eq!(limiter.evict_idle(), 0, "{off:?} has nothing to evict");
        assert_eq!(
            limiter.backend_status().filter(|status| !status.up),
            None,
            "{off:?} asked no store, so none can be down"
        );
    }
}

pub async fn every_scope_caller_and_tool_has_its_own_bucket(make: MakeLimiter<'_>) {
    let under_test = make(policy(1.0, 2)).await;
    let limiter = under_test.limiter();
    let alice = principal("user:alice");
    let bob = principal("user:bob");
    let v4 = RateLimitCaller::Address(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)));
    // A principal named like an address is not that address.
    let named_like_v4 = principal("10.0.0.7");
    let v6 = RateLimitCaller::Address(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 7)));
    let unknown = RateLimitCaller::Unknown;
    let keys = [
        rest(&alice),
        tool_call(&alice, "math__add"),
        tool_call(&alice, "math__mul"),
        rest(&bob),
        tool_call(&bob, "math__add"),
        rest(&v4),
        rest(&named_like_v4),
        tool_call(&v4, "math__add"),
        rest(&v6),
        rest(&unknown),
        tool_call(&unknown, "math__add"),
    ];
    // Draining each key in turn leaves every later one full.
    for key in &keys {
        let (allowed, refused) = drain(limiter, key, 2).await;
        assert_eq!(
            allowed, 2,
            "{key:?} starts full whatever was drained before it"
        );
        assert_refused(refused, 2, &format!("{key:?} drained"));
    }
    assert_eq!(limiter.tracked(), under_test.expected_held(keys.len()));
    // A second later each has exactly its own one token back.
    under_test.advance(Duration::from_secs(1));
    for key in &keys {
        assert!(admit(limiter, key).await.allowed, "{key:?}");
        assert_refused(
            admit(limiter, key).await,
            2,
            &format!("{key:?} after one token"),
        );
    }
}

pub async fn one_bucket_is_kept_per_key_asked_about(make: MakeLimiter<'_>) {
    let under_test = make(policy(100.0, 50)).await;
    let limiter = under_test.limiter();
    assert_eq!(limiter.tracked(), 0, "a new limiter holds no bucket");
    let alice = principal("user:alice");
    let bob = principal("user:bob");
    for _ in 0..20 {
        admit(limiter, &rest(&alice)).await;
        admit(limiter, &tool_call(&alice, "math__add")).await;
    }
    assert_eq!(
        limiter.tracked(),
        under_test.expected_held(2),
        "repeated checks of a key share its bucket"
    );
    admit(limiter, &rest(&bob)).await;
    assert_eq!(limiter.tracked(), under_test.expected_held(3));
    // Asking nothing about a key makes nothing for it, also as time passes.
    under_test.advance(Duration::from_millis(100));
    assert_eq!(limiter.tracked(), under_test.expected_held(3));
    // Each key kept its own level: alice's REST bucket had 30 of its 50 left and got 10 back
    // in the 100 ms, bob's is full again.
    let decision = admit(limiter, &rest(&alice)).await;
    assert_eq!(decision.remaining, 39, "{decision:?}");
    let decision = admit(limiter, &rest(&bob)).await;
    assert_eq!(decision.remaining, 49, "{decision:?}");
}

pub async fn buckets_idle_for_the_refill_time_are_evicted(make: MakeLimiter<'_>) {
    // Ten per second, bursts of 20: a bucket refills in two seconds.
    let refilling = policy(10.0, 20);
    assert_eq!(refilling.refill_time(), Duration::from_secs(2));
    let under_test = make(refilling).await;
    let limiter = under_test.limiter();
    let drained = principal("user:alice");
    let touched = principal("user:bob");
    assert_eq!(drain(limiter, &rest(&drained), 20).await.0, 20);
    assert!(admit(limiter, &rest(&touched)).await.allowed);
    assert_eq!(limiter.tracked(), under_test.expected_held(2));

    under_test.advance(Duration::from_millis(1999));
    assert_eq!(
        limiter.evict_idle(),
        0,
        "nothing has been idle for two seconds yet"
    );
    assert_eq!(limiter.tracked(), under_test.expected_held(2));
    under_test.advance(Duration::from_millis(1));
    assert_eq!(
        limiter.evict_idle(),
        under_test.expected_held(2),
        "both have been idle for the refill time"
    );
    assert_eq!(limiter.tracked(), 0);
    assert_eq!(limiter.evict_idle(), 0, "nothing is left to evict");

    // The evicted caller comes back to a full bucket, as it would have found its own.
    let (allowed, _) = drain(limiter, &rest(&drained), 20).await;
    assert_eq!(allowed, 20);
    assert_eq!(limiter.tracked(), under_test.expected_held(1));
}

pub async fn eviction_keeps_buckets_seen_within_the_refill_time(make: MakeLimiter<'_>) {
    // Ten per second, bursts of 20: a bucket refills in two seconds.
    let under_test = make(policy(10.0, 20)).await;
    let limiter = under_test.limiter();
    let busy = principal("user:alice");
    let idle = principal("user:bob");
    assert_eq!(drain(limiter, &rest(&busy), 20).await.0, 20);
    assert!(admit(limiter, &rest(&idle)).await.allowed);

    // A second later the busy caller takes the ten tokens that came back.
    under_test.advance(Duration::from_secs(1));
    assert_eq!(drain(limiter, &rest(&busy), 20).await.0, 10);

    // 1.1 s after that the idle caller has been away for 2.1 s and goes; the busy one was
    // seen 1.1 s ago and stays, with the 11 tokens it has earned since, not a fresh 20.
    under_test.advance(Duration::from_millis(1100));
    assert_eq!(
        limiter.evict_idle(),
        under_test.expected_held(1),
        "only the idle bucket goes"
    );
    assert_eq!(limiter.tracked(), under_test.expected_held(1));
    let (allowed, _) = drain(limiter, &rest(&busy), 20).await;
    assert_eq!(allowed, 11, "the busy caller's bucket was kept as it was");
}

pub async fn concurrent_checks_take_each_token_once(make: MakeLimiter<'_>) {
    // The clock stands still: exactly the burst is handed out, however the requests interleave
    // (four tasks on two worker threads).
    let under_test = make(policy(1.0, 64)).await;
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let limiter = under_test.shared();
            tokio::spawn(async move {
                let alice = principal("user:alice");
                let mut allowed = 0_usize;
                for _ in 0..100 {
                    if admit(limiter.as_ref(), &rest(&alice)).await.allowed {
                        allowed += 1;
                    }
                }
                allowed
            })
        })
        .collect();
    let mut allowed = 0;
    for task in tasks {
        allowed += task
            .await
            .unwrap_or_else(|error| panic!("a task of requests failed: {error}"));
    }
    assert_eq!(allowed, 64);
    assert_eq!(under_test.limiter().tracked(), under_test.expected_held(1));
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use mcpgw_authz::{Admission, RateLimiter as _};

    use super::{ClockedLimiter, InMemoryRateLimiter};
    use crate::clock::FakeClock;

    mod contract {
        crate::rate_limiter_contract_suite!(|policy| {
            let clock = std::sync::Arc::new(crate::clock::FakeClock::new());
            let limiter = super::InMemoryRateLimiter::new(policy, clock.clone());
            std::future::ready(super::ClockedLimiter::new(limiter, move |by| {
                clock.advance(by)
            }))
        });
    }

    #[test]
    fn the_fake_reads_the_clock_it_is_given() {
        let clock = Arc::new(FakeClock::new());
        let under_test = ClockedLimiter::new(
            InMemoryRateLimiter::new(super::policy(1.0, 1), clock.clone()),
            {
                let clock = clock.clone();
                move |by| clock.advance(by)
            },
        );
        let alice = super::principal("user:alice");
        assert!(under_test.limiter().check(&super::rest(&alice)).allowed);
        assert!(!under_test.limiter().check(&super::rest(&alice)).allowed);
        // Time moved on the clock itself, not through the hand, counts too.
        clock.advance(std::time::Duration::from_secs(1));
        assert!(under_test.limiter().check(&super::rest(&alice)).allowed);
    }

    #[test]
    fn the_fake_admits_at_once_from_the_buckets_check_uses() {
        let clock = Arc::new(FakeClock::new());
        let limiter = InMemoryRateLimiter::new(super::policy(1.0, 3), clock);
        let alice = super::principal("user:alice");
        let key = super::rest(&alice);
        let admitted = |admission| match admission {
            Admission::Now(decision) => decision,
            Admission::Later(_) => panic!("buckets in memory answer at once"),
        };
        // Alternating the two ways of asking drains one bucket: 2, 1, 0 left, then refused.
        assert_eq!(limiter.check(&key).remaining, 2);
        assert_eq!(admitted(limiter.admit(&key)).remaining, 1);
        assert_eq!(limiter.check(&key).remaining, 0);
        assert!(!admitted(limiter.admit(&key)).allowed);
        assert_eq!(limiter.backend_status(), None);
    }
}
