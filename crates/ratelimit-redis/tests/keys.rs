//! What the limiter leaves in Redis: keys inside its namespace whatever the caller's name,
//! expiring after the refill time, and nothing else touched.

use std::collections::HashSet;
use std::time::Duration;

use mcpgw_authz::{
    RateLimitCaller, RateLimitDecision, RateLimitKey, RateLimitPolicy, RateLimitScope, RateLimiter,
};
use mcpgw_ratelimit_redis::{RedisRateLimiter, RedisSettings, redis_key};
use mcpgw_testkit::redis_server::TempRedis;

const POLICY: RateLimitPolicy = RateLimitPolicy {
    requests_per_second: 1.0,
    burst: 3,
};

async fn limiter(url: String) -> RedisRateLimiter {
    let mut settings = RedisSettings::new(url);
    settings.timeout = Duration::from_secs(10);
    RedisRateLimiter::connect(settings, POLICY)
        .await
        .unwrap_or_else(|error| panic!("cannot connect to the test Redis: {error}"))
}

async fn admit(limiter: &dyn RateLimiter, key: &RateLimitKey<'_>) -> RateLimitDecision {
    limiter.admit(key).decision().await
}

fn rest(caller: &RateLimitCaller) -> RateLimitKey<'_> {
    RateLimitKey {
        scope: RateLimitScope::Rest,
        caller,
        tool: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_with_odd_bytes_stay_in_the_namespace_and_in_buckets_of_their_own() {
    let redis = TempRedis::shared();
    let (database, url) = redis.fresh_database();
    // Something of someone else's in the same database, which the limiter must leave alone.
    redis.query(database, &[b"SET", b"session:1", b"keep me"]);
    let limiter = limiter(url).await;

    // Bad input: principals and a tool name with spaces, line breaks, braces, glob characters,
    // a would-be command, the bucket separator, the escape character, and a kilobyte of bytes.
    let kilobyte = format!("user:{}", "x \n}".repeat(256));
    let principals = [
        "user:alice",
        "user:alice ",
        "user:alice\n",
        "user:alice\r\nFLUSHALL\r\n",
        "user:}{mcpgw:rl:{r",
        "user:*",
        "user:\u{1f}t",
        "user:%1Ft",
        kilobyte.as_str(),
    ];
    let callers: Vec<RateLimitCaller> = principals
        .iter()
        .map(|principal| RateLimitCaller::Principal((*principal).to_owned()))
        .collect();
    let odd_tool = "tool with\nnewline}";
    for caller in &callers {
        // Three tokens each: drain one caller's REST bucket completely...
        for left in [2, 1, 0] {
            let decision = admit(&limiter, &rest(caller)).await;
            assert!(decision.allowed, "{caller:?}: {decision:?}");
            assert_eq!(decision.remaining, left, "{caller:?}");
        }
        assert!(!admit(&limiter, &rest(caller)).await.allowed, "{caller:?}");
        // ... which leaves its tool bucket full.
        let tool = RateLimitKey {
            scope: RateLimitScope::ToolCall,
            caller,
            tool: Some(odd_tool),
        };
        assert_eq!(admit(&limiter, &tool).await.remaining, 2, "{caller:?}");
    }

    let keys: Vec<Vec<u8>> = redis.query(database, &[b"KEYS", b"*"]).bulk_strings();
    let ours: HashSet<&[u8]> = keys
        .iter()
        .map(Vec::as_slice)
        .filter(|key| *key != b"session:1")
        .collect();
    assert_eq!(
        ours.len(),
        2 * callers.len(),
        "one REST and one tool bucket per caller, none shared: {ours:?}"
    );
    for key in &ours {
        let text = std::str::from_utf8(key).expect("keys are ASCII");
        let inner = text
            .strip_prefix("mcpgw:rl:{")
            .and_then(|rest| rest.strip_suffix('}'))
            .unwrap_or_else(|| panic!("{text:?} is outside the namespace"));
        assert!(
            inner
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || b":._-@/%".contains(&byte)),
            "{text:?} holds a byte of the caller's unescaped"
        );
        assert!(text.len() < 4 * 1024, "{} bytes", text.len());
    }
    for caller in &callers {
        assert!(
            ours.contains(redis_key(&rest(caller)).as_bytes()),
            "{caller:?}"
        );
    }
    assert_eq!(
        redis.query(database, &[b"GET", b"session:1"]),
        mcpgw_testkit::redis_server::RedisReply::Bulk(Some(b"keep me".to_vec()))
    );
    assert_eq!(
        redis.query(database, &[b"PTTL", b"session:1"]).integer(),
        -1,
        "no expiry put on a key that is not the limiter's"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_expires_after_the_refill_time() {
    let redis = TempRedis::shared();
    let (database, url) = redis.fresh_database();
    let limiter = limiter(url).await;
    let alice = RateLimitCaller::Principal("user:alice".to_owned());
    assert!(admit(&limiter, &rest(&alice)).await.allowed);
    let key = redis_key(&rest(&alice));
    // One per second with bursts of three: full again after 3 s.
    assert_eq!(POLICY.refill_time(), Duration::from_secs(3));
    let ttl = redis.query(database, &[b"PTTL", key.as_bytes()]).integer();
    assert!((2_000..=3_000).contains(&ttl), "{key} lives {ttl} ms");
    // A refused request changes nothing, the time to live included.
    assert!(admit(&limiter, &rest(&alice)).await.allowed);
    assert!(admit(&limiter, &rest(&alice)).await.allowed);
    let ttl_after_last_token = redis.query(database, &[b"PTTL", key.as_bytes()]).integer();
    let refused = admit(&limiter, &rest(&alice)).await;
    assert!(!refused.allowed);
    let ttl_after_refusal = redis.query(database, &[b"PTTL", key.as_bytes()]).integer();
    assert!(
        ttl_after_refusal <= ttl_after_last_token,
        "{ttl_after_refusal} ms after a refusal, {ttl_after_last_token} ms before"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flushed_script_is_sent_again_in_full() {
    let redis = TempRedis::shared();
    let (database, url) = redis.fresh_database();
    let limiter = limiter(url).await;
    let alice = RateLimitCaller::Principal("user:alice".to_owned());
    assert_eq!(admit(&limiter, &rest(&alice)).await.remaining, 2);
    // Redis forgets every script, as after a restart.
    redis.query(database, &[b"SCRIPT", b"FLUSH"]);
    // Still Redis's decision (failing open would answer 2 again), through EVAL.
    assert_eq!(admit(&limiter, &rest(&alice)).await.remaining, 1);
    assert_eq!(admit(&limiter, &rest(&alice)).await.remaining, 0);
    assert!(
        limiter.backend_status().is_some_and(|status| status.up),
        "a NOSCRIPT answer is no outage"
    );
}
