use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use mcpgw_authz::{
    Admission, RateLimitCaller, RateLimitKey, RateLimitPolicy, RateLimitScope, RateLimiter,
};

use super::{ManualClock, TokenBuckets};

fn policy(requests_per_second: f64, burst: u32) -> RateLimitPolicy {
    RateLimitPolicy {
        requests_per_second,
        burst,
    }
}

fn limiter(requests_per_second: f64, burst: u32) -> (TokenBuckets<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    // Readings start well after zero, as the process clock's do.
    clock.advance(Duration::from_secs(3600));
    (
        TokenBuckets::with_clock(policy(requests_per_second, burst), clock.clone()),
        clock,
    )
}

fn alice() -> RateLimitCaller {
    RateLimitCaller::Principal("user:alice".to_owned())
}

fn rest(caller: &RateLimitCaller) -> RateLimitKey<'_> {
    RateLimitKey {
        scope: RateLimitScope::Rest,
        caller,
        tool: None,
    }
}

#[test]
fn a_new_caller_gets_the_burst_then_waits_one_token_interval() {
    let (limiter, clock) = limiter(1.0, 3);
    let caller = alice();
    let remaining: Vec<u32> = (0..3)
        .map(|_| {
            let decision = limiter.check(&rest(&caller));
            assert!(decision.allowed);
            assert_eq!(decision.limit, 3);
            decision.remaining
        })
        .collect();
    assert_eq!(remaining, [2, 1, 0]);

    let refused = limiter.check(&rest(&caller));
    assert!(!refused.allowed);
    assert_eq!(refused.remaining, 0);
    assert!(
        refused.retry_after > Duration::from_millis(990)
            && refused.retry_after <= Duration::from_secs(1),
        "one token per second: the wait is about a second, got {:?}",
        refused.retry_after
    );
    assert_eq!(refused.retry_after_seconds(), 1);

    // Just before the announced time: still refused. At it: allowed, once.
    clock.advance(refused.retry_after - Duration::from_millis(5));
    assert!(!limiter.check(&rest(&caller)).allowed);
    clock.advance(Duration::from_millis(5));
    assert!(limiter.check(&rest(&caller)).allowed);
    assert!(!limiter.check(&rest(&caller)).allowed);
}

#[test]
fn fractional_rates_are_honoured() {
    let (limiter, clock) = limiter(0.5, 1);
    let caller = alice();
    assert!(limiter.check(&rest(&caller)).allowed);
    let refused = limiter.check(&rest(&caller));
    assert!(!refused.allowed);
    assert_eq!(refused.retry_after_seconds(), 2);
    clock.advance(Duration::from_millis(1990));
    assert!(!limiter.check(&rest(&caller)).allowed);
    clock.advance(Duration::from_millis(10));
    assert!(limiter.check(&rest(&caller)).allowed);
}

#[test]
fn callers_scopes_and_tools_have_separate_buckets() {
    let (limiter, _clock) = limiter(1.0, 2);
    let noisy = alice();
    let quiet = RateLimitCaller::Principal("user:bob".to_owned());
    let address = RateLimitCaller::Address(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)));
    for _ in 0..2 {
        assert!(limiter.check(&rest(&noisy)).allowed);
    }
    assert!(!limiter.check(&rest(&noisy)).allowed);

    assert!(limiter.check(&rest(&quiet)).allowed, "another principal");
    assert!(
        limiter.check(&rest(&address)).allowed,
        "an anonymous address"
    );
    let tool = |name| RateLimitKey {
        scope: RateLimitScope::ToolCall,
        caller: &noisy,
        tool: Some(name),
    };
    assert!(
        limiter.check(&tool("math__add")).allowed,
        "tool calls are not REST"
    );
    assert!(limiter.check(&tool("math__add")).allowed);
    assert!(!limiter.check(&tool("math__add")).allowed);
    assert!(limiter.check(&tool("math__mul")).allowed, "another tool");
    assert_eq!(limiter.tracked(), 5);
}

#[test]
fn anonymous_callers_are_told_apart_by_address() {
    let address = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    assert_eq!(
        RateLimitCaller::of(Some("user:anonymous"), Some(address)),
        RateLimitCaller::Address(address)
    );
    assert_eq!(
        RateLimitCaller::of(None, Some(address)),
        RateLimitCaller::Address(address)
    );
    assert_eq!(RateLimitCaller::of(None, None), RateLimitCaller::Unknown);
    assert_eq!(
        RateLimitCaller::of(Some("user:anonymousx"), Some(address)),
        RateLimitCaller::Principal("user:anonymousx".to_owned())
    );
}

#[test]
fn a_disabled_policy_limits_nothing_and_keeps_nothing() {
    let (limiter, _clock) = limiter(0.0, 20);
    let caller = alice();
    for _ in 0..1000 {
        assert!(limiter.check(&rest(&caller)).allowed);
    }
    assert_eq!(limiter.tracked(), 0);
    assert_eq!(limiter.evict_idle(), 0);
}

#[test]
fn idle_buckets_are_evicted_after_the_refill_time_and_busy_ones_stay() {
    // 10 per second, burst 20: a bucket refills in 2 s.
    let (limiter, clock) = limiter(10.0, 20);
    let idle = alice();
    let busy = RateLimitCaller::Principal("user:bob".to_owned());
    for _ in 0..20 {
        assert!(limiter.check(&rest(&idle)).allowed);
    }
    assert!(!limiter.check(&rest(&idle)).allowed);
    assert!(limiter.check(&rest(&busy)).allowed);

    clock.advance(Duration::from_millis(1500));
    assert_eq!(limiter.evict_idle(), 0, "nothing idle for 2 s yet");
    assert!(limiter.check(&rest(&busy)).allowed);
    clock.advance(Duration::from_millis(600));
    assert_eq!(
        limiter.evict_idle(),
        1,
        "the idle bucket goes, the busy one stays"
    );
    assert_eq!(limiter.tracked(), 1);

    // The evicted caller comes back to a full bucket, exactly as if it had been kept.
    let answers: Vec<bool> = (0..21)
        .map(|_| limiter.check(&rest(&idle)).allowed)
        .collect();
    assert_eq!(answers.iter().filter(|allowed| **allowed).count(), 20);
    assert!(!answers[20]);
}

#[test]
fn memory_is_bounded_by_callers_seen_within_the_refill_time() {
    let (limiter, clock) = limiter(10.0, 20);
    for round in 0..5_u32 {
        for index in 0..10_000_u32 {
            let caller = RateLimitCaller::Principal(format!("user:u{round}-{index}"));
            assert!(limiter.check(&rest(&caller)).allowed);
        }
        clock.advance(Duration::from_secs(3));
        limiter.evict_idle();
        assert_eq!(limiter.tracked(), 0, "round {round}");
    }
}

#[test]
fn concurrent_checks_never_hand_out_more_than_the_burst() {
    let (limiter, _clock) = limiter(1.0, 50);
    let limiter = Arc::new(limiter);
    let allowed: usize = (0..8)
        .map(|_| {
            let limiter = limiter.clone();
            std::thread::spawn(move || {
                let caller = alice();
                (0..100)
                    .filter(|_| limiter.check(&rest(&caller)).allowed)
                    .count()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|thread| thread.join().unwrap())
        .sum();
    assert_eq!(allowed, 50, "the clock stands still: exactly the burst");
}

#[test]
fn admitting_answers_at_once_from_the_same_buckets_as_checking() {
    let (limiter, _clock) = limiter(1.0, 3);
    let caller = alice();
    let admitted = |admission| match admission {
        Admission::Now(decision) => decision,
        Admission::Later(_) => panic!("buckets in this process answer at once"),
    };
    // Alternating the two ways of asking drains one bucket: 2, 1, 0 left, then refused.
    assert_eq!(admitted(limiter.admit(&rest(&caller))).remaining, 2);
    assert_eq!(limiter.check(&rest(&caller)).remaining, 1);
    assert_eq!(admitted(limiter.admit(&rest(&caller))).remaining, 0);
    assert!(!limiter.check(&rest(&caller)).allowed);
    assert!(!admitted(limiter.admit(&rest(&caller))).allowed);
    assert_eq!(
        limiter.backend_status(),
        None,
        "no store behind these buckets"
    );
}
