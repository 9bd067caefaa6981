//! Rate-limit policy: who is limited, by which bucket, and what an answer over the limit says.
//!
//! Token buckets: REST requests per caller, and tool calls per caller and tool.
//! A caller is its principal, or its client address when it is anonymous (no principal, or
//! `user:anonymous`), so that anonymous clients do not share one bucket. Counting happens behind
//! the [`RateLimiter`] port: the bundled adapter keeps lock-free token buckets in memory and
//! answers at once; an adapter that keeps the buckets in a store shared by several replicas
//! answers through [`Admission::Later`], and says how its store is doing through
//! [`RateLimiter::backend_status`].

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
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

/// What a limiter does when the store that keeps its buckets cannot answer (unreachable, or not
/// within its time): `open` admits the request, `closed` refuses it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum RateLimitFailMode {
    /// Admit, as a full bucket would: an outage of the store never stops traffic, and limits
    /// do not hold while it lasts.
    #[default]
    Open,
    /// Refuse with a wait of [`RateLimitFailMode::CLOSED_RETRY_AFTER`]: limits never go
    /// unenforced, and an outage of the store stops the traffic it limits.
    Closed,
}

impl RateLimitFailMode {
    /// How long a request refused because the store cannot answer is told to wait.
    pub const CLOSED_RETRY_AFTER: Duration = Duration::from_secs(1);

    /// The word of the configuration and of the readiness probe: `open` or `closed`.
    pub fn as_str(self) -> &'static str {
        match self {
            RateLimitFailMode::Open => "open",
            RateLimitFailMode::Closed => "closed",
        }
    }

    /// The decision for a request the store could not count, under `policy`. Open: allowed,
    /// with what a full bucket answers (`burst - 1` left). Closed: refused, nothing left,
    /// retry after [`RateLimitFailMode::CLOSED_RETRY_AFTER`]. A policy that is not enabled
    /// needs no store: [`RateLimitDecision::UNLIMITED`] either way.
    pub fn decision(self, policy: &RateLimitPolicy) -> RateLimitDecision {
        if !policy.is_enabled() {
            return RateLimitDecision::UNLIMITED;
        }
        match self {
            RateLimitFailMode::Open => RateLimitDecision {
                allowed: true,
                limit: policy.burst,
                remaining: policy.burst - 1,
                retry_after: Duration::ZERO,
            },
            RateLimitFailMode::Closed => RateLimitDecision {
                allowed: false,
                limit: policy.burst,
                remaining: 0,
                retry_after: Self::CLOSED_RETRY_AFTER,
            },
        }
    }
}

/// How the store behind a limiter is doing, for the readiness probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitBackendStatus {
    /// The store's name, as the probe shows it (`redis`).
    pub backend: &'static str,
    /// Whether the store answered the last time the limiter asked it.
    pub up: bool,
    /// What checks do while it does not answer.
    pub on_unavailable: RateLimitFailMode,
}

impl RateLimitBackendStatus {
    /// The store is down and the limiter refuses every request meanwhile: a replica in this
    /// state serves nothing that is limited, so it should not be sent traffic.
    pub fn refuses_traffic(&self) -> bool {
        !self.up && self.on_unavailable == RateLimitFailMode::Closed
    }
}

/// A decision that a limiter is still making; it owns all it needs, so it can be awaited
/// anywhere.
pub type PendingDecision = Pin<Box<dyn Future<Output = RateLimitDecision> + Send + 'static>>;

/// A limiter's answer to one request: the decision itself, or a decision to wait for.
///
/// Callers match on it, so that the answer of a limiter that decides in memory costs neither an
/// allocation nor a suspension:
///
/// ```rust
/// # use mcpgw_authz::{Admission, RateLimitDecision};
/// # async fn decide(admission: Admission) -> RateLimitDecision {
/// match admission {
///     Admission::Now(decision) => decision,
///     Admission::Later(pending) => pending.await,
/// }
/// # }
/// ```
pub enum Admission {
    /// Decided without waiting (buckets in this process).
    Now(RateLimitDecision),
    /// Being decided by a store the limiter had to ask (buckets shared by several replicas).
    Later(PendingDecision),
}

impl Admission {
    /// The decision, waiting for it when it is being made.
    pub async fn decision(self) -> RateLimitDecision {
        match self {
            Admission::Now(decision) => decision,
            Admission::Later(pending) => pending.await,
        }
    }
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Admission::Now(decision) => f.debug_tuple("Now").field(decision).finish(),
            Admission::Later(_) => f.write_str("Later(..)"),
        }
    }
}

/// Counts requests against token buckets.
///
/// Contract for implementors:
/// - A request takes one token from the key's bucket when one is there and is allowed, with the
///   whole tokens left; otherwise it is refused, `remaining` 0, with how long until a token is
///   back. A new key starts with a full bucket (`burst` tokens). Every answer names `burst` as
///   the limit.
/// - Callers ask through `admit`. A limiter whose buckets are in this process implements
///   `check`, which is cheap (well under a microsecond) and never blocks on I/O, and keeps the
///   default `admit`, which answers [`Admission::Now`] with it: nothing is allocated. A limiter
///   whose buckets are in a shared store overrides `admit` to answer [`Admission::Later`] with
///   the store's decision, and answers `check` (which must not wait for the store either) as
///   its [`RateLimitFailMode`] says for a store that cannot answer.
/// - Buckets of keys not seen for [`RateLimitPolicy::refill_time`] may be forgotten; `evict_idle`
///   forgets those this process holds now and answers how many went; `tracked` counts the
///   buckets this process holds. Memory is bounded by the keys seen within that time. A limiter
///   whose store forgets idle buckets by itself holds none: both answer 0.
/// - With a policy that is not enabled, every answer is [`RateLimitDecision::UNLIMITED`], at
///   once, and no bucket is kept.
/// - `backend_status` is `None` for buckets in this process; a limiter with a store answers how
///   the store is doing, without asking it (the readiness probe reads it on every request).
pub trait RateLimiter: Send + Sync {
    fn policy(&self) -> RateLimitPolicy;
    fn check(&self, key: &RateLimitKey<'_>) -> RateLimitDecision;
    /// Takes a token for `key`, at once or through the limiter's store.
    fn admit(&self, key: &RateLimitKey<'_>) -> Admission {
        Admission::Now(self.check(key))
    }
    fn evict_idle(&self) -> usize;
    /// Buckets held now, in this process.
    fn tracked(&self) -> usize;
    /// How the store that keeps the buckets is doing; `None` when they are in this process.
    fn backend_status(&self) -> Option<RateLimitBackendStatus> {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    use std::time::Duration;

    use super::*;

    fn poll_once<F: Future>(future: F) -> Poll<F::Output> {
        let mut future = std::pin::pin!(future);
        future
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
    }

    const POLICY: RateLimitPolicy = RateLimitPolicy {
        requests_per_second: 2.0,
        burst: 5,
    };

    #[test]
    fn failing_open_admits_as_a_full_bucket_would() {
        let decision = RateLimitFailMode::Open.decision(&POLICY);
        assert_eq!(
            decision,
            RateLimitDecision {
                allowed: true,
                limit: 5,
                remaining: 4,
                retry_after: Duration::ZERO,
            }
        );
    }

    #[test]
    fn failing_closed_refuses_for_a_second() {
        let decision = RateLimitFailMode::Closed.decision(&POLICY);
        assert!(!decision.allowed);
        assert_eq!((decision.limit, decision.remaining), (5, 0));
        assert_eq!(decision.retry_after, Duration::from_secs(1));
        assert_eq!(decision.retry_after_seconds(), 1);
    }

    #[test]
    fn a_policy_that_is_off_needs_no_store_whatever_the_mode() {
        // Bad input: a policy with no burst, and one with a rate that is not a number.
        for off in [
            RateLimitPolicy {
                requests_per_second: 2.0,
                burst: 0,
            },
            RateLimitPolicy {
                requests_per_second: f64::NAN,
                burst: 5,
            },
        ] {
            for mode in [RateLimitFailMode::Open, RateLimitFailMode::Closed] {
                assert_eq!(
                    mode.decision(&off),
                    RateLimitDecision::UNLIMITED,
                    "{mode:?}"
                );
            }
        }
    }

    #[test]
    fn the_modes_have_the_words_of_the_configuration() {
        assert_eq!(RateLimitFailMode::default(), RateLimitFailMode::Open);
        assert_eq!(RateLimitFailMode::Open.as_str(), "open");
        assert_eq!(RateLimitFailMode::Closed.as_str(), "closed");
    }

    #[test]
    fn only_a_store_that_is_down_and_fails_closed_refuses_traffic() {
        let status = |up, on_unavailable| RateLimitBackendStatus {
            backend: "redis",
            up,
            on_unavailable,
        };
        assert!(status(false, RateLimitFailMode::Closed).refuses_traffic());
        assert!(!status(false, RateLimitFailMode::Open).refuses_traffic());
        assert!(!status(true, RateLimitFailMode::Closed).refuses_traffic());
        assert!(!status(true, RateLimitFailMode::Open).refuses_traffic());
    }

    #[test]
    fn an_admission_hands_over_its_decision_now_or_when_it_is_made() {
        let refused = RateLimitFailMode::Closed.decision(&POLICY);
        assert_eq!(
            poll_once(Admission::Now(refused).decision()),
            Poll::Ready(refused)
        );
        let later = Admission::Later(Box::pin(async move { refused }));
        assert_eq!(format!("{later:?}"), "Later(..)");
        assert_eq!(poll_once(later.decision()), Poll::Ready(refused));
    }

    /// A limiter that only implements what the port requires.
    struct Fixed(RateLimitDecision);

    impl RateLimiter for Fixed {
        fn policy(&self) -> RateLimitPolicy {
            POLICY
        }
        fn check(&self, _key: &RateLimitKey<'_>) -> RateLimitDecision {
            self.0
        }
        fn evict_idle(&self) -> usize {
            0
        }
        fn tracked(&self) -> usize {
            0
        }
    }

    #[test]
    fn by_default_a_limiter_admits_with_its_check_at_once_and_has_no_store() {
        let decision = RateLimitFailMode::Open.decision(&POLICY);
        let limiter = Fixed(decision);
        let caller = RateLimitCaller::Unknown;
        let key = RateLimitKey {
            scope: RateLimitScope::Rest,
            caller: &caller,
            tool: None,
        };
        assert!(matches!(limiter.admit(&key), Admission::Now(now) if now == decision));
        assert_eq!(limiter.backend_status(), None);
    }
}
