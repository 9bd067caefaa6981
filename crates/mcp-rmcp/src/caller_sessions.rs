//! Remote servers configured for token exchange: one upstream session per caller.
//!
//! A careful server binds each MCP session to the user whose token opened it and refuses a
//! request on that session that carries another user's token. So a tool call made for a caller
//! runs on a session of that caller's own: opened with a token exchanged for the caller's, and
//! every request of it (`initialize`, `notifications/initialized`, the calls, the event stream,
//! the `DELETE` that ends it) carries the caller's current exchanged token. The gateway's own
//! session, whose requests carry the gateway client's token, stays for everything that is no
//! caller's: tool lists, health checks, prompts, resources, completions and the notifications
//! the server sends on its own (`list_changed`).
//!
//! Callers' sessions are kept by the caller's identity (the principal; for a caller without one,
//! the SHA-256 digest of its access token), never by a raw token, so a caller whose token was
//! refreshed goes on with the same session and the new token. A server keeps at most
//! [`MAX_CALLER_SESSIONS`] of them: a new caller beyond that closes the least recently used one
//! that has no call in flight. A session idle for the server's idle time is closed, and closing
//! the server closes them all; each close ends the session upstream with `DELETE`. A session
//! whose server answers HTTP 404 for its id (it expired) is initialized anew under the call, and
//! the call is sent once more (see the `remote` module).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mcpgw_core::{
    CallContext, ExitStatusInfo, LaunchError, ListChanges, McpSession, ServerId, SessionError,
    SessionErrorKind, SubjectToken, Tool, ToolCall, ToolCallOutcome,
};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::remote::CallerSessionOpener;
use crate::session::RmcpSession;
use crate::token_exchange::{CallerCredential, UpstreamCredentials};

/// The most callers' sessions one server keeps open at once.
pub const MAX_CALLER_SESSIONS: usize = 256;

/// The JSON-RPC error code of a tool call refused because no token could be had for the
/// caller: the request, not the server, is at fault.
const CREDENTIAL_REFUSED_CODE: i32 = -32600;

/// The JSON-RPC error code of a tool call refused because every one of the server's callers'
/// sessions has a call in flight and no other can be opened.
const SESSIONS_BUSY_CODE: i32 = -32000;

/// How often idle callers' sessions are looked for: a quarter of the idle time, within these
/// bounds, so that a session is closed at most a quarter later than it became due.
const SWEEP_MIN: Duration = Duration::from_millis(250);
const SWEEP_MAX: Duration = Duration::from_secs(30);

/// Who a caller's session belongs to.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) enum CallerKey {
    /// The calling principal, as the gateway authenticated it (`user:alice`).
    Principal(String),
    /// A caller without a principal: the SHA-256 digest of its access token, never the token.
    TokenDigest([u8; 32]),
}

impl CallerKey {
    /// The key of a caller with `principal` (when known) who presented `subject`.
    pub(crate) fn of(principal: Option<&str>, subject: &SubjectToken) -> Self {
        match principal {
            Some(principal) if !principal.is_empty() => Self::Principal(principal.to_owned()),
            _ => Self::TokenDigest(Sha256::digest(subject.expose().as_bytes()).into()),
        }
    }
}

impl std::fmt::Debug for CallerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl std::fmt::Display for CallerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Principal(principal) => f.write_str(principal),
            Self::TokenDigest(_) => f.write_str("a caller without a principal"),
        }
    }
}

/// Every one of the pool's entries has a call in flight: none can make room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PoolFull;

/// What [`CallerPool::checkout`] hands out: the entry's value, its id (for
/// [`CallerPool::release`] and [`CallerPool::discard`]), and the entry it evicted to make room.
#[derive(Debug)]
pub(crate) struct Checkout<T> {
    pub(crate) id: u64,
    pub(crate) value: T,
    pub(crate) evicted: Option<T>,
}

struct PoolEntry<T> {
    id: u64,
    value: T,
    last_used: Instant,
    in_flight: usize,
}

/// The bounded set of callers' sessions, by caller, without any I/O: what it evicts, expires or
/// drains is handed back to be closed.
pub(crate) struct CallerPool<K, T> {
    entries: HashMap<K, PoolEntry<T>>,
    max: usize,
    next_id: u64,
}

impl<K: Eq + Hash + Clone, T: Clone> CallerPool<K, T> {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            entries: HashMap::new(),
            max: max.max(1),
            next_id: 1,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The entry of `key`, made by `make` when there is none, with one more call in flight. A
    /// full pool first evicts its least recently used entry without a call in flight.
    pub(crate) fn checkout(
        &mut self,
        key: &K,
        now: Instant,
        make: impl FnOnce() -> T,
    ) -> Result<Checkout<T>, PoolFull> {
        if let Some(entry) = self.entries.get_mut(key) {
            entry.in_flight += 1;
            entry.last_used = now;
            return Ok(Checkout {
                id: entry.id,
                value: entry.value.clone(),
                evicted: None,
            });
        }
        let mut evicted = None;
        if self.entries.len() >= self.max {
            let oldest = self
                .entries
                .iter()
                .filter(|(_, entry)| entry.in_flight == 0)
                .min_by_key(|(_, entry)| (entry.last_used, entry.id))
                .map(|(key, _)| key.clone())
                .ok_or(PoolFull)?;
            evicted = self.entries.remove(&oldest).map(|entry| entry.value);
        }
        let id = self.next_id;
        self.next_id += 1;
        let value = make();
        self.entries.insert(
            key.clone(),
            PoolEntry {
                id,
                value: value.clone(),
                last_used: now,
                in_flight: 1,
            },
        );
        Ok(Checkout { id, value, evicted })
    }

    /// One call on entry `id` of `key` is over; its idle time starts at `now`.
    pub(crate) fn release(&mut self, key: &K, id: u64, now: Instant) {
        if let Some(entry) = self.entries.get_mut(key)
            && entry.id == id
        {
            entry.in_flight = entry.in_flight.saturating_sub(1);
            entry.last_used = now;
        }
    }

    /// Takes entry `id` of `key` out (its session broke), unless another replaced it already.
    pub(crate) fn discard(&mut self, key: &K, id: u64) -> Option<T> {
        match self.entries.get(key) {
            Some(entry) if entry.id == id => self.entries.remove(key).map(|entry| entry.value),
            _ => None,
        }
    }

    /// Takes out the entries without a call in flight whose last use is `idle` or longer ago.
    pub(crate) fn expire(&mut self, now: Instant, idle: Duration) -> Vec<T> {
        let due: Vec<K> = self
            .entries
            .iter()
            .filter(|(_, entry)| {
                entry.in_flight == 0 && now.saturating_duration_since(entry.last_used) >= idle
            })
            .map(|(key, _)| key.clone())
            .collect();
        due.iter()
            .filter_map(|key| self.entries.remove(key))
            .map(|entry| entry.value)
            .collect()
    }

    /// Takes out every entry.
    pub(crate) fn drain(&mut self) -> Vec<T> {
        self.entries.drain().map(|(_, entry)| entry.value).collect()
    }
}

/// One caller's session: its credential, and the session once it is open.
struct CallerSlot {
    credential: Arc<CallerCredential>,
    session: tokio::sync::OnceCell<Arc<RmcpSession>>,
}

impl CallerSlot {
    async fn close(&self) {
        if let Some(session) = self.session.get() {
            session.close().await;
        }
    }
}

type Pool = CallerPool<CallerKey, Arc<CallerSlot>>;

/// What the idle sweeper shares with the session.
struct Shared {
    server_id: ServerId,
    pool: Mutex<Pool>,
}

impl Shared {
    fn pool(&self) -> std::sync::MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Closes slots, all at once.
async fn close_slots(slots: Vec<Arc<CallerSlot>>) {
    futures::future::join_all(slots.iter().map(|slot| slot.close())).await;
}

/// The session of a remote server configured for token exchange (see the module's
/// documentation): the gateway's own [`RmcpSession`] for everything but tool calls, and one
/// upstream session per caller for the tool calls made for that caller.
///
/// Made by [`RemoteLauncher::connect_session_as`](crate::RemoteLauncher::connect_session_as)
/// and by the launcher for specs with `token_exchange`. Dropping it ends every session it holds,
/// as [`McpSession::close`] does.
pub struct TokenExchangeSession {
    server_id: ServerId,
    own: RmcpSession,
    credentials: Arc<UpstreamCredentials>,
    opener: CallerSessionOpener,
    shared: Arc<Shared>,
    closed_by_gateway: AtomicBool,
    stop_sweeper: CancellationToken,
    _stop_sweeper_on_drop: DropGuard,
}

impl std::fmt::Debug for TokenExchangeSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenExchangeSession")
            .field("server_id", &self.server_id)
            .field("own", &self.own)
            .field("caller_sessions", &self.caller_sessions())
            .finish_non_exhaustive()
    }
}

impl TokenExchangeSession {
    pub(crate) fn new(
        server_id: ServerId,
        own: RmcpSession,
        credentials: Arc<UpstreamCredentials>,
        opener: CallerSessionOpener,
        caller_idle: Duration,
    ) -> Self {
        let shared = Arc::new(Shared {
            server_id: server_id.clone(),
            pool: Mutex::new(CallerPool::new(MAX_CALLER_SESSIONS)),
        });
        let stop_sweeper = CancellationToken::new();
        tokio::spawn(sweep_idle(
            Arc::downgrade(&shared),
            caller_idle,
            stop_sweeper.clone(),
        ));
        Self {
            server_id,
            own,
            credentials,
            opener,
            shared,
            closed_by_gateway: AtomicBool::new(false),
            _stop_sweeper_on_drop: stop_sweeper.clone().drop_guard(),
            stop_sweeper,
        }
    }

    /// How many callers' sessions are open (or opening) now.
    pub fn caller_sessions(&self) -> usize {
        self.shared.pool().len()
    }

    /// The gateway's own session, which serves everything but tool calls.
    pub fn own_session(&self) -> &RmcpSession {
        &self.own
    }

    fn refused(message: String) -> SessionError {
        SessionError::new(
            SessionErrorKind::Protocol {
                code: CREDENTIAL_REFUSED_CODE,
            },
            message,
        )
    }

    /// The open session of the caller `key`, opening one when it has none (or only one that
    /// ended). The returned guard holds the caller's call in flight, which keeps the session
    /// from being closed for idleness or evicted.
    async fn caller_session(
        &self,
        key: &CallerKey,
        subject: &SubjectToken,
        ctx: &CallContext,
    ) -> Result<(Arc<RmcpSession>, InFlight), SessionError> {
        // A session found ended is replaced once; a second one that ended already fails the
        // call with its own reason.
        let mut replaced = false;
        loop {
            let checkout = self
                .shared
                .pool()
                .checkout(key, Instant::now(), || {
                    Arc::new(CallerSlot {
                        credential: Arc::new(CallerCredential::new(
                            Arc::clone(&self.credentials),
                            subject.clone(),
                        )),
                        session: tokio::sync::OnceCell::new(),
                    })
                })
                .map_err(|PoolFull| {
                    SessionError::new(
                        SessionErrorKind::Protocol {
                            code: SESSIONS_BUSY_CODE,
                        },
                        format!(
                            "mcp server `{}` has {MAX_CALLER_SESSIONS} callers' sessions with a \
                             call in flight, the most it keeps; try again when one is done",
                            self.server_id
                        ),
                    )
                })?;
            let in_flight = InFlight {
                shared: Arc::clone(&self.shared),
                key: key.clone(),
                id: checkout.id,
            };
            if let Some(evicted) = checkout.evicted {
                tracing::debug!(server = %self.server_id,
                    "closing the least recently used caller's session to make room");
                tokio::spawn(async move { evicted.close().await });
            }
            let slot = checkout.value;
            // The caller's latest token is what the session's requests carry from now on.
            slot.credential.update(subject);
            let opening = slot.session.get_or_try_init(|| async {
                tracing::debug!(server = %self.server_id, caller = %key,
                    "opening an upstream session for the caller");
                self.opener
                    .open(Arc::clone(&slot.credential))
                    .await
                    .map(Arc::new)
            });
            let opened = tokio::select! {
                biased;
                opened = opening => opened,
                () = ctx.cancellation.cancelled() => {
                    return Err(SessionError::new(
                        SessionErrorKind::Cancelled,
                        "the caller cancelled the request",
                    ));
                }
            };
            let session = match opened {
                Ok(session) => Arc::clone(session),
                Err(error) => {
                    // Nothing to close: the next call tries anew.
                    self.shared.pool().discard(key, checkout.id);
                    return Err(open_error(&self.server_id, error));
                }
            };
            if self.closed_by_gateway.load(Ordering::Acquire) {
                // The server was closed while this session opened: it must not outlive it.
                session.close().await;
                return Err(closed_error());
            }
            if session.has_ended() && !replaced {
                replaced = true;
                in_flight.discard();
                continue;
            }
            return Ok((session, in_flight));
        }
    }
}

/// A call in flight on a caller's session; when it is over, the session's idle time starts.
struct InFlight {
    shared: Arc<Shared>,
    key: CallerKey,
    id: u64,
}

impl InFlight {
    /// The session broke: it goes, and the caller's next call opens another.
    fn discard(&self) {
        let slot = self.shared.pool().discard(&self.key, self.id);
        if let Some(slot) = slot {
            tokio::spawn(async move { slot.close().await });
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.shared
            .pool()
            .release(&self.key, self.id, Instant::now());
    }
}

/// Closes the callers' sessions that have been idle for `idle`, until the session is closed or
/// dropped.
async fn sweep_idle(shared: Weak<Shared>, idle: Duration, stop: CancellationToken) {
    let interval = (idle / 4).clamp(SWEEP_MIN, SWEEP_MAX);
    loop {
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            () = stop.cancelled() => return,
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let expired = shared.pool().expire(Instant::now(), idle);
        if !expired.is_empty() {
            tracing::debug!(server = %shared.server_id, count = expired.len(), ?idle,
                "closing idle callers' sessions");
            close_slots(expired).await;
        }
    }
}

fn open_error(server_id: &ServerId, error: LaunchError) -> SessionError {
    let message = format!(
        "could not open an upstream session for the caller at mcp server `{server_id}`: {error}"
    );
    match error {
        LaunchError::Timeout(_) => SessionError::timeout(message),
        _ => SessionError::transport(message),
    }
}

fn closed_error() -> SessionError {
    SessionError::new(
        SessionErrorKind::Closed,
        "the session was closed by the gateway; start the server again to use it",
    )
}

#[async_trait]
impl McpSession for TokenExchangeSession {
    async fn list_tools(&self) -> Result<Vec<Tool>, SessionError> {
        self.own.list_tools().await
    }

    /// Runs on the caller's own upstream session. A caller without an access token (an API
    /// key, no authentication) cannot be acted for: the call is refused rather than made with
    /// the gateway's identity.
    async fn call_tool(
        &self,
        call: ToolCall,
        ctx: CallContext,
    ) -> Result<ToolCallOutcome, SessionError> {
        if self.closed_by_gateway.load(Ordering::Acquire) {
            return Err(closed_error());
        }
        let Some(subject) = ctx.subject_token.clone() else {
            return Err(Self::refused(format!(
                "mcp server `{}` is called with each caller's own identity (token exchange), \
                 and this call came without an access token to exchange: sign in with OAuth \
                 (an API key cannot be exchanged)",
                self.server_id
            )));
        };
        // Exchanged before anything is opened: a refusal is the caller's, with the
        // authorization server's answer, and the session's requests find the token cached.
        if let Err(error) = self.credentials.exchanged_for(&subject).await {
            tracing::warn!(server = %self.server_id, error = %error.0,
                "the caller's token could not be exchanged");
            return Err(Self::refused(error.0));
        }
        let key = CallerKey::of(ctx.principal.as_deref(), &subject);
        let (session, in_flight) = self.caller_session(&key, &subject, &ctx).await?;
        let result = session.call_tool(call, ctx).await;
        if let Err(error) = &result
            && (session.has_ended() || error.kind == SessionErrorKind::Transport)
            && !self.closed_by_gateway.load(Ordering::Acquire)
        {
            in_flight.discard();
        }
        result
    }

    async fn ping(&self) -> Result<(), SessionError> {
        self.own.ping().await
    }

    async fn close(&self) {
        self.closed_by_gateway.store(true, Ordering::Release);
        self.stop_sweeper.cancel();
        let slots = self.shared.pool().drain();
        tokio::join!(close_slots(slots), self.own.close());
    }

    async fn closed(&self) -> ExitStatusInfo {
        self.own.closed().await
    }

    fn has_ended(&self) -> bool {
        self.own.has_ended()
    }

    fn tool_list_changes(&self) -> Option<watch::Receiver<u64>> {
        self.own.tool_list_changes()
    }

    fn list_changes(&self) -> Option<watch::Receiver<ListChanges>> {
        self.own.list_changes()
    }

    async fn list_prompts(&self) -> Result<Vec<Value>, SessionError> {
        self.own.list_prompts().await
    }

    async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
        ctx: CallContext,
    ) -> Result<Value, SessionError> {
        self.own.get_prompt(name, arguments, ctx).await
    }

    async fn list_resources(&self) -> Result<Vec<Value>, SessionError> {
        self.own.list_resources().await
    }

    async fn list_resource_templates(&self) -> Result<Vec<Value>, SessionError> {
        self.own.list_resource_templates().await
    }

    async fn read_resource(&self, uri: &str, ctx: CallContext) -> Result<Value, SessionError> {
        self.own.read_resource(uri, ctx).await
    }

    async fn complete(&self, params: Value) -> Result<Value, SessionError> {
        self.own.complete(params).await
    }

    fn offers_tasks(&self) -> bool {
        self.own.offers_tasks()
    }

    async fn task_request(&self, method: &str, params: Value) -> Result<Value, SessionError> {
        self.own.task_request(method, params).await
    }

    async fn set_logging_level(&self, level: &str) -> Result<(), SessionError> {
        self.own.set_logging_level(level).await
    }

    async fn subscribe_resource(&self, uri: &str) -> Result<(), SessionError> {
        self.own.subscribe_resource(uri).await
    }

    async fn unsubscribe_resource(&self, uri: &str) -> Result<(), SessionError> {
        self.own.unsubscribe_resource(uri).await
    }

    fn resource_updates(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        self.own.resource_updates()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(start: Instant, secs: u64) -> Instant {
        start + Duration::from_secs(secs)
    }

    #[test]
    fn callers_are_keyed_by_principal_and_never_by_their_token() {
        let token = SubjectToken::new("eyJ.secret.token");
        let refreshed = SubjectToken::new("eyJ.another.token");
        // One principal is one key, whatever token it presents: a refresh keeps the session.
        assert_eq!(
            CallerKey::of(Some("user:alice"), &token),
            CallerKey::of(Some("user:alice"), &refreshed)
        );
        assert_ne!(
            CallerKey::of(Some("user:alice"), &token),
            CallerKey::of(Some("user:bob"), &token)
        );
        // Bad input: no principal, or an empty one; the token's digest stands in, not the token.
        let digest: [u8; 32] = Sha256::digest(b"eyJ.secret.token").into();
        assert_eq!(CallerKey::of(None, &token), CallerKey::TokenDigest(digest));
        assert_eq!(
            CallerKey::of(Some(""), &token),
            CallerKey::TokenDigest(digest)
        );
        assert_ne!(CallerKey::of(None, &token), CallerKey::of(None, &refreshed));
        for key in [
            CallerKey::of(None, &token),
            CallerKey::of(Some("user:alice"), &token),
        ] {
            let shown = format!("{key} {key:?}");
            assert!(!shown.contains("secret"), "{shown}");
        }
        assert_eq!(
            CallerKey::of(Some("user:alice"), &token).to_string(),
            "user:alice"
        );
    }

    #[test]
    fn a_caller_gets_its_own_entry_back_until_it_is_discarded() {
        let start = Instant::now();
        let mut pool: CallerPool<&str, u32> = CallerPool::new(4);
        let alice = pool.checkout(&"alice", start, || 1).unwrap();
        let again = pool.checkout(&"alice", at(start, 1), || 2).unwrap();
        assert_eq!((alice.value, again.value), (1, 1));
        assert_eq!(alice.id, again.id);
        let bob = pool.checkout(&"bob", at(start, 1), || 3).unwrap();
        assert_eq!(bob.value, 3);
        assert_ne!(bob.id, alice.id);
        assert_eq!(pool.len(), 2);

        // Bad input: a stale id (of an entry already replaced) discards nothing.
        assert_eq!(pool.discard(&"alice", bob.id), None);
        assert_eq!(pool.discard(&"alice", alice.id), Some(1));
        assert_eq!(pool.discard(&"alice", alice.id), None);
        let reopened = pool.checkout(&"alice", at(start, 2), || 4).unwrap();
        assert_eq!(reopened.value, 4);
        assert_ne!(reopened.id, alice.id);
        // Releasing the old entry's call does not touch the new one.
        pool.release(&"alice", alice.id, at(start, 3));
        pool.release(&"bob", bob.id, at(start, 3));
        assert_eq!(pool.expire(at(start, 100), Duration::from_secs(5)), vec![3]);
        assert_eq!(
            pool.len(),
            1,
            "alice's new entry still has its call in flight"
        );
    }

    #[test]
    fn a_full_pool_evicts_its_least_recently_used_idle_entry() {
        let start = Instant::now();
        let mut pool: CallerPool<u32, u32> = CallerPool::new(3);
        for caller in 0..3 {
            let checkout = pool
                .checkout(&caller, at(start, caller.into()), || caller)
                .unwrap();
            assert!(checkout.evicted.is_none());
            pool.release(&caller, checkout.id, at(start, caller.into()));
        }
        // Caller 0 is used again, so 1 is now the least recently used.
        let zero = pool.checkout(&0, at(start, 10), || 99).unwrap();
        pool.release(&0, zero.id, at(start, 10));
        let three = pool.checkout(&3, at(start, 11), || 3).unwrap();
        assert_eq!(three.evicted, Some(1));
        assert_eq!(pool.len(), 3);

        // The least recently used entry without a call in flight goes next: 2...
        let four = pool.checkout(&4, at(start, 12), || 4).unwrap();
        assert_eq!(four.evicted, Some(2));
        // ...and when every entry has a call in flight, a new caller is refused.
        let zero = pool.checkout(&0, at(start, 13), || 99).unwrap();
        assert_eq!(
            pool.checkout(&5, at(start, 14), || 5).unwrap_err(),
            PoolFull
        );
        assert_eq!(pool.len(), 3);
        // Once 0's call is over, 0 goes, though 3 and 4 were used before it: an entry with a
        // call in flight is never evicted.
        pool.release(&0, zero.id, at(start, 15));
        let five = pool.checkout(&5, at(start, 16), || 5).unwrap();
        assert_eq!(five.evicted, Some(0));
    }

    #[test]
    fn entries_expire_after_their_idle_time_without_a_call_in_flight() {
        let start = Instant::now();
        let idle = Duration::from_secs(60);
        let mut pool: CallerPool<&str, &str> = CallerPool::new(8);
        let alice = pool.checkout(&"alice", start, || "alice").unwrap();
        let bob = pool.checkout(&"bob", start, || "bob").unwrap();
        pool.release(&"alice", alice.id, at(start, 10));
        // Bob's call is still running long after: his session is not idle.
        assert!(pool.expire(at(start, 69), idle).is_empty());
        assert_eq!(pool.expire(at(start, 70), idle), vec!["alice"]);
        assert!(pool.expire(at(start, 1000), idle).is_empty());
        pool.release(&"bob", bob.id, at(start, 1000));
        assert!(pool.expire(at(start, 1059), idle).is_empty());
        assert_eq!(pool.expire(at(start, 1060), idle), vec!["bob"]);
        assert_eq!(pool.len(), 0);

        let _carol = pool.checkout(&"carol", start, || "carol").unwrap();
        let _dave = pool.checkout(&"dave", start, || "dave").unwrap();
        let mut drained = pool.drain();
        drained.sort_unstable();
        assert_eq!(drained, vec!["carol", "dave"]);
        assert_eq!(pool.len(), 0);
    }
}
