//! Redis going away and coming back: what requests get meanwhile, what the metrics and the
//! status say, and that the limiter heals by itself.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpgw_authz::{
    RateLimitCaller, RateLimitDecision, RateLimitFailMode, RateLimitKey, RateLimitPolicy,
    RateLimitScope, RateLimiter,
};
use mcpgw_ratelimit_redis::{
    BACKEND_ERRORS_TOTAL, BACKEND_UP, RedisRateLimiter, RedisSettings, redis_key,
};
use mcpgw_testkit::redis_server::TempRedis;
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};

/// Counters and gauges by name and labels (`name{label=value,...}`), for the test to read.
#[derive(Default)]
struct TestRecorder {
    series: Mutex<HashMap<String, Arc<AtomicU64>>>,
}

impl TestRecorder {
    fn series(&self, key: &Key) -> Arc<AtomicU64> {
        let mut labels: Vec<String> = key
            .labels()
            .map(|label| format!("{}={}", label.key(), label.value()))
            .collect();
        labels.sort();
        let name = format!("{}{{{}}}", key.name(), labels.join(","));
        self.series.lock().unwrap().entry(name).or_default().clone()
    }

    fn counter(&self, name: &str) -> u64 {
        self.series
            .lock()
            .unwrap()
            .get(name)
            .map_or(0, |value| value.load(Ordering::Relaxed))
    }

    /// The sum of every series of the counter `name`, whatever its labels.
    fn counter_total(&self, name: &str) -> u64 {
        let prefix = format!("{name}{{");
        self.series
            .lock()
            .unwrap()
            .iter()
            .filter(|(series, _)| series.starts_with(&prefix))
            .map(|(_, value)| value.load(Ordering::Relaxed))
            .sum()
    }

    fn gauge(&self, name: &str) -> Option<f64> {
        self.series
            .lock()
            .unwrap()
            .get(name)
            .map(|value| f64::from_bits(value.load(Ordering::Relaxed)))
    }
}

impl Recorder for TestRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.series(key))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.series(key))
    }

    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

const POLICY: RateLimitPolicy = RateLimitPolicy {
    requests_per_second: 1.0,
    burst: 5,
};

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

fn settings(url: String, on_unavailable: RateLimitFailMode) -> RedisSettings {
    let mut settings = RedisSettings::new(url);
    settings.timeout = Duration::from_millis(500);
    settings.on_unavailable = on_unavailable;
    settings
}

/// Waits until both limiters report Redis `up`, at most 20 s.
async fn until_up(limiters: [&RedisRateLimiter; 2], up: bool) {
    let started = Instant::now();
    while limiters
        .iter()
        .any(|limiter| limiter.backend_status().map(|status| status.up) != Some(up))
    {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the limiters did not report up = {up} within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Metrics are read from a recorder local to this thread, so everything runs on one thread.
fn run_with_recorder(recorder: &TestRecorder, test: impl std::future::Future<Output = ()>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    metrics::with_local_recorder(recorder, || runtime.block_on(test));
}

#[test]
fn while_redis_is_down_open_admits_closed_refuses_and_both_heal_when_it_is_back() {
    let recorder = TestRecorder::default();
    let redis = TempRedis::start();
    let up_series = format!("{BACKEND_UP}{{backend=redis}}");
    run_with_recorder(&recorder, async {
        let (_, url) = redis.fresh_database();
        let open =
            RedisRateLimiter::connect(settings(url.clone(), RateLimitFailMode::Open), POLICY)
                .await
                .expect("connect");
        let closed = RedisRateLimiter::connect(settings(url, RateLimitFailMode::Closed), POLICY)
            .await
            .expect("connect");
        let alice = RateLimitCaller::Principal("user:alice".to_owned());
        for limiter in [&open, &closed] {
            let status = limiter.backend_status().expect("a store behind it");
            assert!(status.up && !status.refuses_traffic(), "{status:?}");
        }
        assert_eq!(recorder.gauge(&up_series), Some(1.0));

        // Alice's bucket, shared by both, is drained while Redis runs.
        for _ in 0..5 {
            assert!(admit(&open, &rest(&alice)).await.allowed);
        }
        assert!(!admit(&closed, &rest(&alice)).await.allowed);
        assert_eq!(recorder.counter_total(BACKEND_ERRORS_TOTAL), 0);

        // Redis dies.
        redis.stop();
        let admitted = admit(&open, &rest(&alice)).await;
        assert_eq!(
            admitted,
            RateLimitFailMode::Open.decision(&POLICY),
            "failing open admits what Redis would have refused"
        );
        assert!(admitted.allowed);
        let refused = admit(&closed, &rest(&alice)).await;
        assert!(!refused.allowed, "{refused:?}");
        assert_eq!(refused.retry_after, Duration::from_secs(1));
        assert_eq!(refused.retry_after_seconds(), 1);
        // Another caller, whose bucket would be full, is refused the same: nothing is known.
        let bob = RateLimitCaller::Principal("user:bob".to_owned());
        assert!(!admit(&closed, &rest(&bob)).await.allowed);

        let open_status = open.backend_status().expect("a store");
        let closed_status = closed.backend_status().expect("a store");
        assert_eq!(
            (
                open_status.backend,
                open_status.up,
                open_status.on_unavailable
            ),
            ("redis", false, RateLimitFailMode::Open)
        );
        assert!(!open_status.refuses_traffic());
        assert_eq!(closed_status.on_unavailable, RateLimitFailMode::Closed);
        assert!(closed_status.refuses_traffic(), "{closed_status:?}");
        assert_eq!(recorder.gauge(&up_series), Some(0.0));
        let errors = recorder.counter_total(BACKEND_ERRORS_TOTAL);
        assert_eq!(errors, 3, "each request decided without Redis is counted");
        let by_reason = recorder.counter(&format!(
            "{BACKEND_ERRORS_TOTAL}{{backend=redis,reason=unreachable}}"
        )) + recorder.counter(&format!(
            "{BACKEND_ERRORS_TOTAL}{{backend=redis,reason=timeout}}"
        ));
        assert_eq!(by_reason, errors, "a dead Redis is unreachable or silent");

        // The status stays down without traffic: the once-a-second ping says so too.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(closed.backend_status().is_some_and(|status| !status.up));

        // Redis comes back, empty, on the same port; the limiters notice without any request.
        redis.start_again();
        until_up([&open, &closed], true).await;
        assert_eq!(recorder.gauge(&up_series), Some(1.0));
        assert!(!closed.backend_status().expect("a store").refuses_traffic());
        let errors_before = recorder.counter_total(BACKEND_ERRORS_TOTAL);
        // Redis decides again: a full bucket for alice (the restart lost hers), counted down.
        let first = admit(&closed, &rest(&alice)).await;
        assert!(first.allowed, "{first:?}");
        assert_eq!(first.remaining, 4);
        assert_eq!(admit(&open, &rest(&alice)).await.remaining, 3);
        assert_eq!(recorder.counter_total(BACKEND_ERRORS_TOTAL), errors_before);
    });
}

#[test]
fn a_limiter_whose_redis_is_not_there_yet_starts_down_and_comes_up_with_it() {
    let recorder = TestRecorder::default();
    let redis = TempRedis::start();
    let (database, url) = redis.fresh_database();
    redis.stop();
    run_with_recorder(&recorder, async {
        let closed = RedisRateLimiter::connect(settings(url, RateLimitFailMode::Closed), POLICY)
            .await
            .expect("an unreachable Redis is no reason to fail");
        let status = closed.backend_status().expect("a store");
        assert!(!status.up && status.refuses_traffic(), "{status:?}");
        let alice = RateLimitCaller::Principal("user:alice".to_owned());
        let refused = admit(&closed, &rest(&alice)).await;
        assert_eq!(refused, RateLimitFailMode::Closed.decision(&POLICY));
        assert_eq!(
            recorder.gauge(&format!("{BACKEND_UP}{{backend=redis}}")),
            Some(0.0)
        );

        redis.start_again();
        let started = Instant::now();
        while !closed.backend_status().is_some_and(|status| status.up) {
            assert!(started.elapsed() < Duration::from_secs(20), "never came up");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let decision = admit(&closed, &rest(&alice)).await;
        assert!(decision.allowed, "{decision:?}");
        assert_eq!(decision.remaining, 4);
    });
    // The bucket is in Redis, with the policy's refill time (5 s) to live.
    let alice = RateLimitCaller::Principal("user:alice".to_owned());
    let key = redis_key(&rest(&alice));
    let ttl = redis.query(database, &[b"PTTL", key.as_bytes()]).integer();
    assert!((1..=5_000).contains(&ttl), "{key} lives {ttl} ms");
}

#[test]
fn a_bucket_key_holding_something_else_is_decided_without_redis_and_counted() {
    let recorder = TestRecorder::default();
    let redis = TempRedis::shared();
    let (database, url) = redis.fresh_database();
    let alice = RateLimitCaller::Principal("user:alice".to_owned());
    let key = redis_key(&rest(&alice));
    // Bad input: the bucket's key holds a list, which the script cannot read.
    redis.query(database, &[b"RPUSH", key.as_bytes(), b"not a bucket"]);
    run_with_recorder(&recorder, async {
        let closed = RedisRateLimiter::connect(settings(url, RateLimitFailMode::Closed), POLICY)
            .await
            .expect("connect");
        let decision = admit(&closed, &rest(&alice)).await;
        assert_eq!(decision, RateLimitFailMode::Closed.decision(&POLICY));
        assert_eq!(
            recorder.counter(&format!(
                "{BACKEND_ERRORS_TOTAL}{{backend=redis,reason=error}}"
            )),
            1
        );
        // Another caller's bucket is unaffected.
        let bob = RateLimitCaller::Principal("user:bob".to_owned());
        let decision = admit(&closed, &rest(&bob)).await;
        assert!(decision.allowed && decision.remaining == 4, "{decision:?}");
    });
    assert_eq!(
        redis.query(database, &[b"LLEN", key.as_bytes()]).integer(),
        1,
        "the limiter never overwrites what it cannot read"
    );
}
