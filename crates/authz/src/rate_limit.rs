//! Rate-limit policy: who is limited, by which bucket, and what an answer over the limit says.
//!
//! Token buckets: REST requests per caller, and tool calls per caller and tool.
//! A caller is its principal, or its client address when it is anonymous (no principal, or
//! `user:anonymous`), so that anonymous clients do not share one bucket. Counting happens behind
//! the [`RateLimiter`] port (the bundled adapter keeps lock-free token buckets in memory).

use std::net::IpAddr;
use std::time::Duration;

use crate::principal::ANONYMOUS_USER_NAME;

/// Steady rate and burst of every bucket. `requests_per_second == 0` turns limiting off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimitPolicy {
    /// Tokens added per second (fractions allowed: `0.5` is one request every two seconds).
    pub requests_per_second: f64,
    /// The bucket's capacity: how many requests may come at once after a quiet period.
    pub burst: u32,
}

impl RateLimitPolicy {
    /// The documented defaults (`rate_limit: {rps: 10, burst: 20}`): 10 requests per second,
    /// bursts of 20.
    pub const DEFAULT: Self = Self {
        requests_per_second: 10.0,
        burst: 20,
    };

    pub fn is_enabled(&self) -> bool {
        self.requests_per_second > 0.0 && self.burst > 0
    }

    /// How long an untouched bucket takes to fill up again. A bucket idle for this long is
    /// full, so forgetting it (and making a full one on the caller's next request) changes
    /// nothing: this is the idle time after which buckets are evicted.
    pub fn refill_time(&self) -> Duration {
        if !self.is_enabled() {
            return Duration::ZERO;
        }
        let seconds = f64::from(self.burst) / self.requests_per_second;
        Duration::try_from_secs_f64(seconds.ceil()).unwrap_or(Duration::MAX)
    }
}

impl Default for RateLimitPolicy {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Which family of buckets a check counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RateLimitScope {
    /// REST requests under `/api/`.
    Rest,
    /// MCP `tools/call`, one bucket per caller and tool.
    ToolCall,
}

impl RateLimitScope {
    /// The label of the scope in metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            RateLimitScope::Rest => "rest",
            RateLimitScope::ToolCall => "tool_call",
        }
    }
}

/// The identity a bucket belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RateLimitCaller {
    /// An authenticated principal (`user:alice`, `service:ci`).
    Principal(String),
    /// An anonymous client, by address.
    Address(IpAddr),
    /// An anonymous client whose address is unknown (not a TCP peer): one shared bucket.
    Unknown,
}

impl RateLimitCaller {
    /// The principal when there is one that is not `user:anonymous`, else the client's address.
    pub fn of(principal: Option<&str>, address: Option<IpAddr>) -> Self {
        match principal {
            Some(principal) if !is_anonymous(principal) => {
                RateLimitCaller::Principal(principal.to_owned())
            }
            _ => match address {
                Some(address) => RateLimitCaller::Address(address),
                None => RateLimitCaller::Unknown,
            },
        }
    }

    /// Writes the bucket key of this caller (`p:user:alice`, `a:10.0.0.7`, `u:`).
    pub fn write_key(&self, key: &mut String) {
        use std::fmt::Write as _;
        match self {
            RateLimitCaller::Principal(principal) => {
                key.push_str("p:");
                key.push_str(principal);
            }
            RateLimitCaller::Address(address) => {
                let _ = write!(key, "a:{address}");
            }
            RateLimitCaller::Unknown => key.push_str("u:"),
        }
    }
}

fn is_anonymous(principal: &str) -> bool {
    principal
        .strip_prefix("user:")
        .is_some_and(|name| name == ANONYMOUS_USER_NAME)
}

/// One request to count: the scope, the caller and, for tool calls, the tool (a name from the
/// catalogue, never raw caller input, so the number of buckets stays bounded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitKey<'a> {
    pub scope: RateLimitScope,
    pub caller: &'a RateLimitCaller,
    pub tool: Option<&'a str>,
}

impl RateLimitKey<'_> {
    /// Appends the bucket's key to `key`: scope, caller and tool, separated by a byte that
    /// occurs in none of them. A limiter reuses one buffer rather than allocating per check.
    pub fn write_bucket_key(&self, key: &mut String) {
        key.push_str(match self.scope {
            RateLimitScope::Rest => "r\u{1f}",
            RateLimitScope::ToolCall => "t\u{1f}",
        });
        self.caller.write_key(key);
        if let Some(tool) = self.tool {
            key.push('\u{1f}');
            key.push_str(tool);
        }
    }
}

/// The answer to one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitDecision {
    pub allowed: bool,
    /// The bucket's capacity (`X-RateLimit-Limit`).
    pub limit: u32,
    /// Whole requests left in the bucket after this one (`X-RateLimit-Remaining`; 0 when refused).
    pub remaining: u32,
    /// When refused: how long until the next request would be allowed.
    pub retry_after: Duration,
}

impl RateLimitDecision {
    /// The decision when limiting is off.
    pub const UNLIMITED: Self = Self {
        allowed: true,
        limit: u32::MAX,
        remaining: u32::MAX,
        retry_after: Duration::ZERO,
    };

    /// `Retry-After` in whole seconds, rounded up and at least 1, so that a client that waits
    /// exactly that long is let through.
    pub fn retry_after_seconds(&self) -> u64 {
        let whole = self.retry_after.as_secs();
        let rounded = if self.retry_after.subsec_nanos() > 0 {
            whole + 1
        } else {
            whole
        };
        rounded.max(1)
    }

    /// The wait in milliseconds, rounded up (for the MCP error's `retryAfterMs`).
    pub fn retry_after_millis(&self) -> u64 {
        let millis = self.retry_after.as_nanos().div_ceil(1_000_000);
        u64::try_from(millis).unwrap_or(u64::MAX).max(1)
    }
}

/// Counts requests against token buckets.
///
/// Contract for implementors:
/// - `check` takes one token from the key's bucket when one is there and answers allowed, with
///   the whole tokens left; otherwise it answers refused, `remaining` 0, and how long until a
///   token is back. A new key starts with a full bucket (`burst` tokens).
/// - `check` is cheap (well under a microsecond) and never blocks on I/O.
/// - Buckets of keys not seen for [`RateLimitPolicy::refill_time`] may be forgotten; `evict_idle`
///   forgets them now and answers how many went. Memory is bounded by the keys seen within that
///   time.
/// - With a policy that is not enabled, every check is [`RateLimitDecision::UNLIMITED`] and no
///   bucket is kept.
pub trait RateLimiter: Send + Sync {
    fn policy(&self) -> RateLimitPolicy;
    fn check(&self, key: &RateLimitKey<'_>) -> RateLimitDecision;
    fn evict_idle(&self) -> usize;
    /// Buckets held now.
    fn tracked(&self) -> usize;
}
