//! Rate limits that hold for a whole fleet of gateway replicas: mcpgw's [`RateLimiter`] port
//! with its buckets in Redis, so that a caller gets its rate once, not once per replica.
//!
//! Each request is one atomic Lua script on the bucket's key: the generic cell rate algorithm
//! (GCRA), which keeps a bucket as one number, the moment it would be full again. It answers what
//! the in-process token buckets of `mcpgw-ratelimit` answer for the same policy: the burst as the
//! limit, the whole tokens left, and when refused how long until the next token. The script is
//! sent by its SHA-1 (`EVALSHA`), and in full (`EVAL`) when Redis does not have it (`NOSCRIPT`,
//! after a restart or a `SCRIPT FLUSH`). Time is the Redis server's clock, one for the whole
//! fleet, so replicas whose clocks drift still agree.
//!
//! Keys are `mcpgw:rl:{<bucket>}`: the bucket's key (scope, caller and tool) with every byte
//! other than letters, digits and `:._-@/` written `%XX`, so that no principal or tool name,
//! whatever bytes it holds, can reach a key outside the namespace or another caller's bucket
//! ([`redis_key`]). A key lives for the policy's refill time after the request that last took a
//! token from it: by then the bucket is full again, and Redis forgetting it changes nothing.
//!
//! Every call waits at most the configured timeout (50 ms by default). When Redis cannot be
//! reached, does not answer in time, or answers an error, the request is decided as
//! `on_unavailable` says ([`RateLimitFailMode`]: `open` admits, `closed` refuses with a
//! `Retry-After` of one second), [`BACKEND_ERRORS_TOTAL`] counts it, and the limiter reports
//! itself down ([`RateLimiter::backend_status`], and the gauge [`BACKEND_UP`]). A task pings
//! Redis once a second, so the status follows Redis even when no request comes (a replica that
//! fails closed is taken out of rotation by its readiness probe, and must still notice Redis
//! coming back). The connection reconnects by itself; nothing here ever blocks a thread.
//!
//! # Example
//!
//! ```no_run
//! use mcpgw_authz::{RateLimitCaller, RateLimitFailMode, RateLimitKey, RateLimitPolicy, RateLimitScope, RateLimiter as _};
//! use mcpgw_ratelimit_redis::{RedisRateLimiter, RedisSettings};
//!
//! # async fn example() -> Result<(), mcpgw_ratelimit_redis::Error> {
//! let mut settings = RedisSettings::new("redis://:secret@redis.internal:6379/0");
//! settings.on_unavailable = RateLimitFailMode::Closed;
//! let policy = RateLimitPolicy { requests_per_second: 10.0, burst: 20 };
//! let limiter = RedisRateLimiter::connect(settings, policy).await?;
//!
//! let alice = RateLimitCaller::Principal("user:alice".into());
//! let key = RateLimitKey { scope: RateLimitScope::Rest, caller: &alice, tool: None };
//! let decision = limiter.admit(&key).decision().await;
//! assert_eq!(decision.limit, 20);
//! # Ok(())
//! # }
//! ```

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock, Weak};
use std::time::Duration;

use mcpgw_authz::{
    Admission, RateLimitBackendStatus, RateLimitDecision, RateLimitFailMode, RateLimitKey,
    RateLimitPolicy, RateLimiter,
};
use mcpgw_core::Clock;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ErrorKind, RedisError, Value};

/// Requests decided without Redis's answer (labels `backend="redis"` and `reason`: `timeout`,
/// `unreachable` or `error`).
pub const BACKEND_ERRORS_TOTAL: &str = "mcpgw_rate_limit_backend_errors_total";
/// 1 while the rate limiter's store answers, 0 while it does not (label `backend="redis"`).
pub const BACKEND_UP: &str = "mcpgw_rate_limit_backend_up";

/// The store's name, in metrics and the readiness probe.
const BACKEND: &str = "redis";
/// Every bucket's key starts with this; the bucket's own key follows, then `}`.
const KEY_PREFIX: &str = "mcpgw:rl:{";
/// How often Redis is pinged to keep the status true without traffic.
const PROBE_INTERVAL: Duration = Duration::from_secs(1);
/// How long `connect` waits for the first answer (longer than one call may: a new connection).
const FIRST_ANSWER_PATIENCE: Duration = Duration::from_secs(1);
/// How long one attempt to open a connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// The script; EVALSHA names it by its SHA-1.
const SCRIPT: &str = include_str!("gcra.lua");
/// Rates are kept within these bounds: the in-process buckets count no less than a thousandth
/// of a request per second either, and above a billion per second a token's interval would be
/// too small for the script's arithmetic.
const MIN_RATE: f64 = 0.001;
const MAX_RATE: f64 = 1e9;
/// Keys live at most this long (about 31,000 years in milliseconds), whatever the policy.
const MAX_TTL_MS: u128 = 1_000_000_000_000_000;

/// Where the limiter finds Redis, how long it waits for it, and what it does without it.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisSettings {
    /// `redis://[[user]:password@]host[:port][/database]`, or `redis+unix:///path` /
    /// `unix:///path` for a socket. The password is never logged nor shown in errors.
    pub url: String,
    /// How long one call may take before the request is decided without Redis.
    pub timeout: Duration,
    /// What requests get while Redis cannot answer.
    pub on_unavailable: RateLimitFailMode,
}

impl RedisSettings {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);

    /// `url`, with the default timeout (50 ms) and failing open.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            timeout: Self::DEFAULT_TIMEOUT,
            on_unavailable: RateLimitFailMode::Open,
        }
    }
}

impl std::fmt::Debug for RedisSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSettings")
            .field("url", &masked_url(&self.url))
            .field("timeout", &self.timeout)
            .field("on_unavailable", &self.on_unavailable)
            .finish()
    }
}

/// Settings the limiter cannot work with. Redis being unreachable is not one: a limiter whose
/// Redis does not answer yet starts down, and decides as `on_unavailable` says until it does.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The URL does not name a Redis server this client can reach (the password masked).
    #[error("the Redis URL `{url}` cannot be used: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("the Redis timeout must be longer than 0")]
    ZeroTimeout,
}

/// [`RateLimiter`] over buckets in Redis, shared by every replica that uses the same Redis.
pub struct RedisRateLimiter {
    shared: Arc<Shared>,
    /// The task that pings Redis; none when the policy is off (no Redis is needed then).
    prober: Option<tokio::task::AbortHandle>,
}

impl std::fmt::Debug for RedisRateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRateLimiter")
            .field("url", &self.shared.url)
            .field("policy", &self.shared.policy)
            .field("up", &self.shared.up.load(Ordering::Relaxed))
            .field("on_unavailable", &self.shared.on_unavailable)
            .finish_non_exhaustive()
    }
}

/// What the limiter and the futures of its decisions share.
struct Shared {
    policy: RateLimitPolicy,
    client: redis::Client,
    config: ConnectionManagerConfig,
    /// The connection, once the first one is made; it reconnects by itself after that.
    connection: RwLock<Option<ConnectionManager>>,
    timeout: Duration,
    on_unavailable: RateLimitFailMode,
    /// `None`: the Redis server's clock.
    clock: Option<Arc<dyn Clock>>,
    script_hash: String,
    /// The script's arguments that follow from the policy.
    interval_us: String,
    burst: String,
    ttl_ms: String,
    up: AtomicBool,
    /// The URL with its password masked, for logs.
    url: String,
}

/// Why a request was decided without Redis's answer.
#[derive(Debug)]
enum Failure {
    Timeout,
    /// No connection has been made yet (the task that pings Redis keeps trying).
    NotConnected,
    Unreachable(RedisError),
    Error(String),
}

impl Failure {
    fn reason(&self) -> &'static str {
        match self {
            Failure::Timeout => "timeout",
            Failure::NotConnected | Failure::Unreachable(_) => "unreachable",
            Failure::Error(_) => "error",
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Timeout => f.write_str("no answer within the timeout"),
            Failure::NotConnected => f.write_str("no connection could be made yet"),
            Failure::Unreachable(error) => write!(f, "unreachable: {error}"),
            Failure::Error(error) => write!(f, "answered an error: {error}"),
        }
    }
}

impl From<RedisError> for Failure {
    /// Errors of the connection (and of signing in) are Redis out of reach; an error that Redis
    /// answered, or an answer that cannot be read, is an error.
    fn from(error: RedisError) -> Self {
        let unreachable = error.is_io_error()
            || error.is_connection_dropped()
            || error.is_connection_refusal()
            || error.is_timeout()
            || matches!(
                error.kind(),
                ErrorKind::AuthenticationFailed | ErrorKind::ClientError
            );
        if unreachable {
            Failure::Unreachable(error)
        } else {
            Failure::Error(error.to_string())
        }
    }
}

impl RedisRateLimiter {
    /// A limiter for `policy` on the Redis at `settings.url`, timed by the Redis server's clock.
    ///
    /// Fails only on settings it cannot use (a URL that is not Redis's, a zero timeout). It
    /// waits up to a second for Redis's first answer; without one it starts down (and says so in
    /// a warning), decides as `settings.on_unavailable` says, and keeps trying. It must be
    /// called inside a tokio runtime with timers and I/O, which runs the connection and the
    /// task that pings Redis.
    pub async fn connect(settings: RedisSettings, policy: RateLimitPolicy) -> Result<Self, Error> {
        Self::start(settings, policy, None).await
    }

    /// Like [`RedisRateLimiter::connect`], timed by `clock` rather than by the Redis server's
    /// clock: for tests and simulations that move time by hand. Every limiter that shares the
    /// buckets must then read the same clock.
    pub async fn connect_with_clock(
        settings: RedisSettings,
        policy: RateLimitPolicy,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, Error> {
        Self::start(settings, policy, Some(clock)).await
    }

    async fn start(
        settings: RedisSettings,
        policy: RateLimitPolicy,
        clock: Option<Arc<dyn Clock>>,
    ) -> Result<Self, Error> {
        if settings.timeout.is_zero() {
            return Err(Error::ZeroTimeout);
        }
        let invalid = |error: RedisError| Error::InvalidUrl {
            url: masked_url(&settings.url),
            reason: redacted(&error.to_string(), &settings.url),
        };
        let client = redis::Client::open(settings.url.as_str()).map_err(invalid)?;
        // One attempt per reconnection, no backoff of its own: the task that pings Redis every
        // second starts the next one, so the limiter heals within a second or two of Redis
        // coming back.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(CONNECT_TIMEOUT)
            .set_response_timeout(settings.timeout.max(FIRST_ANSWER_PATIENCE))
            .set_number_of_retries(0);
        let rate = policy.requests_per_second.clamp(MIN_RATE, MAX_RATE);
        let ttl_ms = policy.refill_time().as_millis().clamp(1, MAX_TTL_MS);
        let shared = Arc::new(Shared {
            policy,
            client,
            config,
            connection: RwLock::new(None),
            timeout: settings.timeout,
            on_unavailable: settings.on_unavailable,
            clock,
            script_hash: redis::Script::new(SCRIPT).get_hash().to_owned(),
            interval_us: format!("{}", 1e6 / rate),
            burst: policy.burst.to_string(),
            ttl_ms: ttl_ms.to_string(),
            up: AtomicBool::new(false),
            url: masked_url(&settings.url),
        });
        if !policy.is_enabled() {
            return Ok(Self {
                shared,
                prober: None,
            });
        }
        shared
            .probe(settings.timeout.max(FIRST_ANSWER_PATIENCE))
            .await;
        if shared.up.load(Ordering::Relaxed) {
            tracing::info!(url = %shared.url, "rate limits are kept in Redis, for the whole fleet");
        }
        let prober = tokio::spawn(probe_every_second(Arc::downgrade(&shared))).abort_handle();
        Ok(Self {
            shared,
            prober: Some(prober),
        })
    }
}

impl Drop for RedisRateLimiter {
    fn drop(&mut self) {
        if let Some(prober) = &self.prober {
            prober.abort();
        }
    }
}

/// Gives the metrics their help texts. Done with every ping, so that a recorder installed after
/// the limiter was made gets them too.
fn describe_metrics() {
    metrics::describe_counter!(
        BACKEND_ERRORS_TOTAL,
        "Rate-limit checks decided without the shared store's answer (unreachable, too slow, or \
         an error), by the store and the reason."
    );
    metrics::describe_gauge!(
        BACKEND_UP,
        "1 while the rate limiter's shared store answers, 0 while it does not."
    );
}

/// Pings Redis every [`PROBE_INTERVAL`] for as long as the limiter lives.
async fn probe_every_second(shared: Weak<Shared>) {
    loop {
        tokio::time::sleep(PROBE_INTERVAL).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        shared.probe(shared.timeout).await;
    }
}

impl Shared {
    /// The connection, once the first one was made.
    fn connection(&self) -> Option<ConnectionManager> {
        self.connection
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The connection, making the first one when there is none yet (waiting at most
    /// `patience`). Only `connect` and the task that pings Redis make it, one at a time.
    async fn connect(&self, patience: Duration) -> Result<ConnectionManager, Failure> {
        if let Some(connection) = self.connection() {
            return Ok(connection);
        }
        let made = ConnectionManager::new_with_config(self.client.clone(), self.config.clone());
        let connection = match tokio::time::timeout(patience, made).await {
            Ok(Ok(connection)) => connection,
            Ok(Err(error)) => return Err(Failure::from(error)),
            Err(_) => return Err(Failure::Timeout),
        };
        *self
            .connection
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(connection.clone());
        Ok(connection)
    }

    /// Asks Redis for `PONG` within `patience` and records whether it answered.
    async fn probe(&self, patience: Duration) {
        let answer = match self.connect(patience).await {
            Ok(mut connection) => {
                let ping = redis::cmd("PING");
                match tokio::time::timeout(patience, ping.query_async::<String>(&mut connection))
                    .await
                {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(error)) => Err(Failure::from(error)),
                    Err(_) => Err(Failure::Timeout),
                }
            }
            Err(failure) => Err(failure),
        };
        match answer {
            Ok(()) => self.mark_up(),
            Err(failure) => self.mark_down(&failure),
        }
        describe_metrics();
        metrics::gauge!(BACKEND_UP, "backend" => BACKEND).set(if self.is_up() { 1.0 } else { 0.0 });
    }

    fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    fn mark_up(&self) {
        if !self.up.swap(true, Ordering::Relaxed) {
            metrics::gauge!(BACKEND_UP, "backend" => BACKEND).set(1.0);
            tracing::info!(url = %self.url, "the rate limiter's Redis answers again");
        }
    }

    fn mark_down(&self, failure: &Failure) {
        if self.up.swap(false, Ordering::Relaxed) {
            metrics::gauge!(BACKEND_UP, "backend" => BACKEND).set(0.0);
            tracing::warn!(
                url = %self.url,
                problem = %failure,
                on_unavailable = self.on_unavailable.as_str(),
                "the rate limiter's Redis does not answer; requests are decided without it"
            );
        } else {
            tracing::debug!(url = %self.url, problem = %failure, "Redis still does not answer");
        }
    }

    /// The decision for the bucket under `key`: Redis's, or the fallback's when Redis does not
    /// give one in time.
    async fn decide(self: Arc<Self>, key: String) -> RateLimitDecision {
        let failure = match tokio::time::timeout(self.timeout, self.run_script(&key)).await {
            Ok(Ok(decision)) => {
                self.mark_up();
                return decision;
            }
            Ok(Err(failure)) => failure,
            Err(_) => Failure::Timeout,
        };
        metrics::counter!(
            BACKEND_ERRORS_TOTAL,
            "backend" => BACKEND,
            "reason" => failure.reason()
        )
        .increment(1);
        self.mark_down(&failure);
        self.on_unavailable.decision(&self.policy)
    }

    /// Runs the script by its hash, and in full when Redis does not know the hash.
    async fn run_script(&self, key: &str) -> Result<RateLimitDecision, Failure> {
        let now = match &self.clock {
            Some(clock) => format!("{}", clock.now().as_duration().as_nanos() as f64 / 1000.0),
            None => String::new(),
        };
        let invocation = |command: &str, script: &str| {
            let mut command = redis::cmd(command);
            command
                .arg(script)
                .arg(1)
                .arg(key)
                .arg(&self.interval_us)
                .arg(&self.burst)
                .arg(&self.ttl_ms)
                .arg(&now);
            command
        };
        let mut connection = self.connection().ok_or(Failure::NotConnected)?;
        let answer = match invocation("EVALSHA", &self.script_hash)
            .query_async::<Value>(&mut connection)
            .await
        {
            Err(error) if error.kind() == ErrorKind::NoScriptError => {
                invocation("EVAL", SCRIPT)
                    .query_async::<Value>(&mut connection)
                    .await?
            }
            answer => answer?,
        };
        self.read_answer(&answer)
    }

    /// The script's answer `[allowed, remaining, retry_after_ns]` as a decision.
    fn read_answer(&self, answer: &Value) -> Result<RateLimitDecision, Failure> {
        let unexpected = || Failure::Error(format!("the script answered {answer:?}"));
        let Value::Array(items) = answer else {
            return Err(unexpected());
        };
        let numbers: Vec<i64> = items
            .iter()
            .map(|item| match item {
                Value::Int(number) => Some(*number),
                _ => None,
            })
            .collect::<Option<_>>()
            .ok_or_else(unexpected)?;
        let [allowed, remaining, retry_after_ns] = numbers[..] else {
            return Err(unexpected());
        };
        let limit = self.policy.burst;
        Ok(match allowed {
            1 => RateLimitDecision {
                allowed: true,
                limit,
                remaining: u32::try_from(remaining).unwrap_or(0).min(limit),
                retry_after: Duration::ZERO,
            },
            0 => RateLimitDecision {
                allowed: false,
                limit,
                remaining: 0,
                retry_after: Duration::from_nanos(
                    u64::try_from(retry_after_ns).unwrap_or(0).max(1),
                ),
            },
            _ => return Err(unexpected()),
        })
    }
}

impl RateLimiter for RedisRateLimiter {
    fn policy(&self) -> RateLimitPolicy {
        self.shared.policy
    }

    /// Never waits for Redis, so it cannot know: it answers as `on_unavailable` says. The
    /// gateway asks through [`RateLimiter::admit`].
    fn check(&self, _key: &RateLimitKey<'_>) -> RateLimitDecision {
        self.shared.on_unavailable.decision(&self.shared.policy)
    }

    fn admit(&self, key: &RateLimitKey<'_>) -> Admission {
        if !self.shared.policy.is_enabled() {
            return Admission::Now(RateLimitDecision::UNLIMITED);
        }
        let pending = self.shared.clone().decide(redis_key(key));
        Admission::Later(Box::pin(pending))
    }

    /// Redis forgets idle buckets by itself (each key expires after the refill time).
    fn evict_idle(&self) -> usize {
        0
    }

    /// No bucket is held in this process.
    fn tracked(&self) -> usize {
        0
    }

    /// `redis`, whether it answered the last call or ping, and `on_unavailable`; `None` when the
    /// policy is off (no Redis is asked then).
    fn backend_status(&self) -> Option<RateLimitBackendStatus> {
        self.prober.as_ref().map(|_| RateLimitBackendStatus {
            backend: BACKEND,
            up: self.shared.is_up(),
            on_unavailable: self.shared.on_unavailable,
        })
    }
}

/// The Redis key of `key`'s bucket: `mcpgw:rl:{` + the bucket's key + `}`, every byte of the
/// bucket's key other than an ASCII letter, digit or one of `:._-@/` written as `%XX`. Two
/// buckets never share a key, and no key leaves the `mcpgw:rl:` namespace or holds a brace,
/// space or control character of its caller's.
pub fn redis_key(key: &RateLimitKey<'_>) -> String {
    let mut bucket = String::new();
    key.write_bucket_key(&mut bucket);
    let mut redis_key = String::with_capacity(KEY_PREFIX.len() + bucket.len() + 1);
    redis_key.push_str(KEY_PREFIX);
    for byte in bucket.bytes() {
        if byte.is_ascii_alphanumeric() || b":._-@/".contains(&byte) {
            redis_key.push(char::from(byte));
        } else {
            let _ = write!(redis_key, "%{byte:02X}");
        }
    }
    redis_key.push('}');
    redis_key
}

/// `url` with the password of its user information replaced by `***`.
fn masked_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_owned();
    };
    let user_info = &rest[..at];
    let masked_user_info = match user_info.split_once(':') {
        Some((user, _password)) => format!("{user}:***"),
        None => user_info.to_owned(),
    };
    format!("{scheme}://{masked_user_info}{}", &rest[at..])
}

/// `text` with the password of `url` (as written, and percent-decoded) replaced by `***`.
fn redacted(text: &str, url: &str) -> String {
    let password = url
        .split_once("://")
        .map(|(_, rest)| &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())])
        .and_then(|authority| authority.rfind('@').map(|at| &authority[..at]))
        .and_then(|user_info| user_info.split_once(':').map(|(_, password)| password))
        .filter(|password| !password.is_empty());
    let Some(password) = password else {
        return text.to_owned();
    };
    let mut redacted = text.replace(password, "***");
    let decoded = percent_decoded(password);
    if !decoded.is_empty() && decoded != password {
        redacted = redacted.replace(&decoded, "***");
    }
    redacted
}

fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let escaped = (bytes[index] == b'%')
            .then(|| text.get(index + 1..index + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                decoded.push(byte);
                index += 3;
            }
            None => {
                decoded.push(bytes[index]);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

#[cfg(test)]
mod tests;
