//! The Redis limiter against the `RateLimiter` contract suite of the test kit: each case on a
//! database of its own of one Redis server, timed by a clock the suite moves by hand (the
//! script then reads the time from the limiter instead of from Redis), so that no case waits
//! for real time to pass.

use std::sync::Arc;
use std::time::Duration;

use mcpgw_authz::RateLimitPolicy;
use mcpgw_ratelimit_redis::{RedisRateLimiter, RedisSettings};
use mcpgw_testkit::clock::FakeClock;
use mcpgw_testkit::rate_limiter_suite::ClockedLimiter;
use mcpgw_testkit::redis_server::TempRedis;

async fn redis_limiter(policy: RateLimitPolicy) -> ClockedLimiter {
    let (_, url) = TempRedis::shared().fresh_database();
    let clock = Arc::new(FakeClock::new());
    // Readings start well after zero, as real clocks' do.
    clock.advance(Duration::from_secs(3600));
    let mut settings = RedisSettings::new(url);
    // A loaded test machine may take longer than the production default for a round trip; a
    // timeout here would be a fallback decision, not the script's.
    settings.timeout = Duration::from_secs(10);
    let limiter = RedisRateLimiter::connect_with_clock(settings, policy, clock.clone())
        .await
        .unwrap_or_else(|error| panic!("cannot connect to the test Redis: {error}"));
    ClockedLimiter::new(limiter, move |by| clock.advance(by)).with_buckets_in_a_store()
}

mcpgw_testkit::rate_limiter_contract_suite!(redis_limiter);
