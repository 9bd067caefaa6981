//! The token buckets against the `RateLimiter` contract suite of the test kit, timed by a
//! manual clock so that no case waits for real time to pass.

use std::time::Duration;

use mcpgw_authz::RateLimitPolicy;
use mcpgw_ratelimit::{ManualClock, TokenBuckets};
use mcpgw_testkit::rate_limiter_suite::ClockedLimiter;

fn token_buckets(policy: RateLimitPolicy) -> ClockedLimiter {
    let clock = ManualClock::new();
    // Readings start well after zero, as the process clock's do.
    clock.advance(Duration::from_secs(3600));
    let limiter = TokenBuckets::with_clock(policy, clock.clone());
    ClockedLimiter::new(limiter, move |by| clock.advance(by))
}

mcpgw_testkit::rate_limiter_contract_suite!(|policy| std::future::ready(token_buckets(policy)));
