//! Several replicas on one Redis: one limit for the fleet, and the same decisions as the
//! in-process buckets give one replica.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpgw_authz::{
    RateLimitCaller, RateLimitDecision, RateLimitKey, RateLimitPolicy, RateLimitScope, RateLimiter,
};
use mcpgw_ratelimit::{ManualClock, TokenBuckets};
use mcpgw_ratelimit_redis::{RedisRateLimiter, RedisSettings};
use mcpgw_testkit::clock::FakeClock;
use mcpgw_testkit::redis_server::TempRedis;

fn settings(url: String) -> RedisSettings {
    let mut settings = RedisSettings::new(url);
    // Generous for a loaded test machine: these tests are about decisions, not outages.
    settings.timeout = Duration::from_secs(10);
    settings
}

fn rest(caller: &RateLimitCaller) -> RateLimitKey<'_> {
    RateLimitKey {
        scope: RateLimitScope::Rest,
        caller,
        tool: None,
    }
}

async fn admit(limiter: &dyn RateLimiter, key: &RateLimitKey<'_>) -> RateLimitDecision {
    limiter.admit(key).decision().await
}

/// Two replicas timed by one clock that moves by hand: `(replica A's limiter, replica B's, the
/// clock)`, sharing a fresh database.
async fn two_replicas(
    policy: RateLimitPolicy,
) -> (RedisRateLimiter, RedisRateLimiter, Arc<FakeClock>) {
    let (_, url) = TempRedis::shared().fresh_database();
    let clock = Arc::new(FakeClock::new());
    clock.advance(Duration::from_secs(3600));
    let connect = || async {
        RedisRateLimiter::connect_with_clock(settings(url.clone()), policy, clock.clone())
            .await
            .unwrap_or_else(|error| panic!("cannot connect to the test Redis: {error}"))
    };
    let a = connect().await;
    let b = connect().await;
    (a, b, clock)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_admit_the_burst_and_the_rate_once_not_twice() {
    let policy = RateLimitPolicy {
        requests_per_second: 10.0,
        burst: 20,
    };
    let (a, b, clock) = two_replicas(policy).await;
    // The same traffic against one in-process limiter per replica, as without Redis.
    let local_clock = ManualClock::new();
    local_clock.advance(Duration::from_secs(3600));
    let local_a = TokenBuckets::with_clock(policy, local_clock.clone());
    let local_b = TokenBuckets::with_clock(policy, local_clock.clone());

    let alice = RateLimitCaller::Principal("user:alice".to_owned());
    let (mut fleet, mut per_replica, mut served_by) = (0_u32, 0_u32, [0_u32; 2]);
    // Three seconds in steps of 50 ms; at each step each replica gets three requests, far more
    // than the rate lets through.
    for step in 0..=60 {
        for _ in 0..3 {
            for (index, (shared, local)) in [(&a, &local_a), (&b, &local_b)].into_iter().enumerate()
            {
                if admit(shared, &rest(&alice)).await.allowed {
                    fleet += 1;
                    served_by[index] += 1;
                }
                if local.check(&rest(&alice)).allowed {
                    per_replica += 1;
                }
            }
        }
        if step < 60 {
            clock.advance(Duration::from_millis(50));
            local_clock.advance(Duration::from_millis(50));
        }
    }
    // burst + rate × 3 s, for the whole fleet.
    assert_eq!(fleet, 20 + 10 * 3, "served by each replica: {served_by:?}");
    assert!(
        served_by.iter().all(|served| *served > 0),
        "both replicas served some: {served_by:?}"
    );
    assert_eq!(
        per_replica,
        2 * (20 + 10 * 3),
        "without a shared store each replica grants the whole limit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_the_redis_clock_share_the_limit_in_real_time() {
    let policy = RateLimitPolicy {
        requests_per_second: 20.0,
        burst: 10,
    };
    let (_, url) = TempRedis::shared().fresh_database();
    let a = RedisRateLimiter::connect(settings(url.clone()), policy)
        .await
        .unwrap_or_else(|error| panic!("cannot connect: {error}"));
    let b = RedisRateLimiter::connect(settings(url), policy)
        .await
        .unwrap_or_else(|error| panic!("cannot connect: {error}"));
    let alice = RateLimitCaller::Principal("user:alice".to_owned());
    let started = Instant::now();
    let mut allowed = 0_u32;
    let mut requests = 0_u32;
    // About a second of requests from both replicas, bounded in count too.
    while started.elapsed() < Duration::from_secs(1) && requests < 20_000 {
        for limiter in [&a, &b] {
            requests += 1;
            if admit(limiter, &rest(&alice)).await.allowed {
                allowed += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let most = 10.0 + 20.0 * elapsed;
    // Never more than the fleet's limit (two separate limits would allow 10 + 40 per second)...
    assert!(
        f64::from(allowed) <= most + 1.0,
        "{allowed} allowed of {requests} in {elapsed:.3} s; the limit allows {most:.1}"
    );
    // ... and, with requests every few milliseconds, most of it (a loaded machine may leave
    // some tokens untaken).
    assert!(
        f64::from(allowed) >= 10.0 + 20.0 * elapsed / 2.0,
        "{allowed} allowed of {requests} in {elapsed:.3} s; the limit allows {most:.1}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_are_those_of_the_in_process_buckets() {
    for policy in [
        RateLimitPolicy {
            requests_per_second: 2.0,
            burst: 3,
        },
        RateLimitPolicy {
            requests_per_second: 0.5,
            burst: 1,
        },
        RateLimitPolicy {
            requests_per_second: 25.0,
            burst: 40,
        },
    ] {
        let (redis, _, clock) = two_replicas(policy).await;
        let local_clock = ManualClock::new();
        local_clock.advance(Duration::from_secs(3600));
        let local = TokenBuckets::with_clock(policy, local_clock.clone());
        let callers = [
            RateLimitCaller::Principal("user:alice".to_owned()),
            RateLimitCaller::Principal("user:bob".to_owned()),
        ];
        // Bursts of requests between pauses of varying length, on two callers.
        let pauses_ms = [0, 0, 100, 250, 333, 0, 1000, 10, 490, 2000, 5, 0, 125, 3000];
        for (round, pause) in pauses_ms.into_iter().enumerate() {
            clock.advance(Duration::from_millis(pause));
            local_clock.advance(Duration::from_millis(pause));
            for caller in &callers[..1 + round % 2] {
                for request in 0..4 {
                    let from_redis = admit(&redis, &rest(caller)).await;
                    let from_local = local.check(&rest(caller));
                    let context = format!("{policy:?}, round {round}, request {request}");
                    assert_eq!(
                        (from_redis.allowed, from_redis.limit, from_redis.remaining),
                        (from_local.allowed, from_local.limit, from_local.remaining),
                        "{context}: {from_redis:?} against {from_local:?}"
                    );
                    assert_eq!(
                        from_redis.retry_after_seconds(),
                        from_local.retry_after_seconds(),
                        "{context}"
                    );
                    assert!(
                        from_redis
                            .retry_after_millis()
                            .abs_diff(from_local.retry_after_millis())
                            <= 1,
                        "{context}: {from_redis:?} against {from_local:?}"
                    );
                }
            }
        }
    }
}
