//! Sessions of the web console: what a browser holds after signing in.
//!
//! A session is opened by one of the three ways of signing in (an API key, a local user's
//! password, single sign-on) and is then named by a random token that the browser keeps in a
//! cookie. The store keeps only the token's SHA-256, never the token, so a memory dump or a log
//! line cannot be replayed. Each session carries:
//!
//! - the [`Identity`] it acts as: roles are looked up in the current authorization snapshot at
//!   every decision, so a role assigned or revoked takes effect on the next click;
//! - a CSRF token that every form of the console must send back;
//! - its two deadlines: it ends after [`SessionSettings::idle`] without a request, and after
//!   [`SessionSettings::absolute`] whatever happens (or when the API key it was opened with
//!   expires, if that is sooner);
//! - how it was opened (and with which API key), so that the console can check on every
//!   request that what opened it still stands (the key not revoked, the local user's password
//!   unchanged) and end it otherwise.
//!
//! Sign-ins in progress with an identity provider are kept here too, by their `state`, for at
//! most [`PENDING_SIGN_IN_LIFETIME`]: the browser never holds the PKCE verifier or the nonce.
//!
//! The store is in memory: a restart signs everyone out, and replicas do not share sessions
//! (route a browser to one replica, or sign in again). Both maps are bounded; when full, the
//! session that was used longest ago is dropped first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mcpgw_authz::{Identity, KeyHash, PendingSignIn, SecretSource};
use mcpgw_core::{Clock, MonoTime, Timestamp};
use sha2::{Digest as _, Sha256};

/// How long a browser may take at the identity provider before its sign-in is forgotten.
pub const PENDING_SIGN_IN_LIFETIME: Duration = Duration::from_secs(600);

/// The most sign-ins in progress remembered at once (the oldest is dropped beyond it).
const MAX_PENDING_SIGN_INS: usize = 1_000;

/// Lifetimes and bounds of console sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSettings {
    /// A session not used for this long ends.
    pub idle: Duration,
    /// A session ends this long after it was opened, however busy.
    pub absolute: Duration,
    /// The most sessions held at once; beyond it the least recently used one ends.
    pub max_sessions: usize,
}

impl SessionSettings {
    pub const DEFAULT_IDLE: Duration = Duration::from_secs(30 * 60);
    pub const DEFAULT_ABSOLUTE: Duration = Duration::from_secs(12 * 3600);
    pub const DEFAULT_MAX_SESSIONS: usize = 10_000;
}

impl Default for SessionSettings {
    fn default() -> Self {
        Self {
            idle: Self::DEFAULT_IDLE,
            absolute: Self::DEFAULT_ABSOLUTE,
            max_sessions: Self::DEFAULT_MAX_SESSIONS,
        }
    }
}

/// How a session was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignInMethod {
    /// An API key pasted into the sign-in form.
    ApiKey,
    /// A local user's name and password.
    Password,
    /// Single sign-on with the configured OpenID provider.
    SingleSignOn,
    /// Nobody signed in: authentication is off, and every request acts as the unrestricted
    /// anonymous user. Such sessions are never stored.
    AuthenticationOff,
}

impl SignInMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            SignInMethod::ApiKey => "API key",
            SignInMethod::Password => "password",
            SignInMethod::SingleSignOn => "single sign-on",
            SignInMethod::AuthenticationOff => "authentication off",
        }
    }
}

/// A signed-in browser, as the console sees it on each request.
#[derive(Debug, Clone)]
pub struct ConsoleSession {
    pub identity: Identity,
    pub method: SignInMethod,
    /// The token every form must carry back (compare with [`ConsoleSession::csrf_matches`]).
    pub csrf_token: Arc<str>,
    /// The API key the session was opened with, re-checked on every request.
    pub key: Option<KeyHash>,
    pub opened_at: Timestamp,
}

impl ConsoleSession {
    /// The session that stands for every request while authentication is off.
    pub fn authentication_off(identity: Identity, opened_at: Timestamp) -> Self {
        Self {
            identity,
            method: SignInMethod::AuthenticationOff,
            csrf_token: Arc::from(""),
            key: None,
            opened_at,
        }
    }

    /// Whether `presented` is this session's CSRF token, compared in constant time. A session
    /// without a token (authentication off) accepts none: forms are then protected by the
    /// `Origin` check and `SameSite` alone, as the REST API is.
    pub fn csrf_matches(&self, presented: &str) -> bool {
        if self.method == SignInMethod::AuthenticationOff {
            return true;
        }
        constant_time_eq(self.csrf_token.as_bytes(), presented.as_bytes())
    }
}

/// What opening a session hands back: the raw token for the cookie (shown nowhere else).
#[derive(Clone)]
pub struct OpenedSession {
    pub token: String,
    pub session: ConsoleSession,
}

impl std::fmt::Debug for OpenedSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedSession")
            .field("token", &"<redacted>")
            .field("session", &self.session)
            .finish()
    }
}

/// Why a session could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot open a console session: {0}")]
pub struct SessionError(String);

struct Stored {
    session: ConsoleSession,
    last_used: MonoTime,
    /// When the session ends at the latest: its absolute lifetime, or its key's expiry.
    ends: MonoTime,
}

struct Pending {
    sign_in: PendingSignIn,
    /// The SHA-256 of the value of a cookie set on the browser that started the sign-in: only
    /// that browser can finish it, so nobody can sign a victim's browser in as themselves.
    browser: [u8; 32],
    started: MonoTime,
}

#[derive(Default)]
struct Maps {
    sessions: HashMap<[u8; 32], Stored>,
    pending: HashMap<String, Pending>,
}

/// The console's sessions. Cheap to clone; clones share the store.
#[derive(Clone)]
pub struct ConsoleSessions {
    inner: Arc<Inner>,
}

struct Inner {
    settings: SessionSettings,
    clock: Arc<dyn Clock>,
    secrets: Arc<dyn SecretSource>,
    maps: Mutex<Maps>,
}

impl std::fmt::Debug for ConsoleSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleSessions")
            .field("settings", &self.inner.settings)
            .field("open", &self.open_count())
            .finish()
    }
}

impl ConsoleSessions {
    pub fn new(
        settings: SessionSettings,
        clock: Arc<dyn Clock>,
        secrets: Arc<dyn SecretSource>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                settings,
                clock,
                secrets,
                maps: Mutex::new(Maps::default()),
            }),
        }
    }

    pub fn settings(&self) -> &SessionSettings {
        &self.inner.settings
    }

    fn maps(&self) -> std::sync::MutexGuard<'_, Maps> {
        self.inner
            .maps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A fresh random token of 32 bytes, base64url without padding (43 characters).
    pub fn random_token(&self) -> Result<String, SessionError> {
        let mut bytes = [0_u8; 32];
        self.inner
            .secrets
            .fill(&mut bytes)
            .map_err(|error| SessionError(error.to_string()))?;
        Ok(base64url(&bytes))
    }

    fn digest(token: &str) -> [u8; 32] {
        Sha256::digest(token.as_bytes()).into()
    }

    /// Opens a session for `identity`. `key` (with its expiry) is the API key it was opened
    /// with, if any: revoking that key ends the session, and it ends when the key expires.
    pub fn open(
        &self,
        identity: Identity,
        method: SignInMethod,
        key: Option<(KeyHash, Option<Timestamp>)>,
    ) -> Result<OpenedSession, SessionError> {
        let token = self.random_token()?;
        let csrf_token: Arc<str> = Arc::from(self.random_token()?);
        let now = self.inner.clock.now();
        let wall = self.inner.clock.wall();
        let mut ends = now.plus(self.inner.settings.absolute);
        let key = key.map(|(hash, expires_at)| {
            if let Some(expires_at) = expires_at {
                let left = expires_at.unix_micros().saturating_sub(wall.unix_micros());
                let left = Duration::from_micros(u64::try_from(left).unwrap_or(0));
                ends = ends.min(now.plus(left));
            }
            hash
        });
        let session = ConsoleSession {
            identity,
            method,
            csrf_token,
            key,
            opened_at: wall,
        };
        let mut maps = self.maps();
        self.sweep(&mut maps, now);
        if maps.sessions.len() >= self.inner.settings.max_sessions.max(1)
            && let Some(oldest) = maps
                .sessions
                .iter()
                .min_by_key(|(_, stored)| stored.last_used)
                .map(|(digest, _)| *digest)
        {
            maps.sessions.remove(&oldest);
            tracing::warn!(
                max = self.inner.settings.max_sessions,
                "the console holds its most sessions; the least recently used one ended"
            );
        }
        maps.sessions.insert(
            Self::digest(&token),
            Stored {
                session: session.clone(),
                last_used: now,
                ends,
            },
        );
        Ok(OpenedSession { token, session })
    }

    /// The session named by `token`, if it is open; using it restarts its idle time.
    pub fn get(&self, token: &str) -> Option<ConsoleSession> {
        let now = self.inner.clock.now();
        let digest = Self::digest(token);
        let mut maps = self.maps();
        let stored = maps.sessions.get_mut(&digest)?;
        let idle = now.saturating_since(stored.last_used);
        if idle >= self.inner.settings.idle || now >= stored.ends {
            maps.sessions.remove(&digest);
            return None;
        }
        stored.last_used = now;
        Some(stored.session.clone())
    }

    /// Ends the session named by `token` (signing out). Answers whether it was open.
    pub fn close(&self, token: &str) -> bool {
        self.maps().sessions.remove(&Self::digest(token)).is_some()
    }

    /// How many sessions are open (expired ones not yet swept may be counted).
    pub fn open_count(&self) -> usize {
        self.maps().sessions.len()
    }

    /// Remembers a sign-in that went to the identity provider, under its `state`, for the
    /// browser that holds `browser` (a random value in a cookie).
    pub fn remember_sign_in(&self, sign_in: PendingSignIn, browser: &str) {
        let now = self.inner.clock.now();
        let mut maps = self.maps();
        self.sweep(&mut maps, now);
        if maps.pending.len() >= MAX_PENDING_SIGN_INS
            && let Some(oldest) = maps
                .pending
                .iter()
                .min_by_key(|(_, pending)| pending.started)
                .map(|(state, _)| state.clone())
        {
            maps.pending.remove(&oldest);
        }
        maps.pending.insert(
            sign_in.state.clone(),
            Pending {
                sign_in,
                browser: Self::digest(browser),
                started: now,
            },
        );
    }

    /// Takes the sign-in that went out with `state`, if `browser` is the value of the browser
    /// that started it (each can be finished once; a wrong browser uses it up too).
    pub fn take_sign_in(&self, state: &str, browser: &str) -> Option<PendingSignIn> {
        let now = self.inner.clock.now();
        let pending = self.maps().pending.remove(state)?;
        let same_browser = constant_time_eq(&pending.browser, &Self::digest(browser));
        (same_browser && now.saturating_since(pending.started) < PENDING_SIGN_IN_LIFETIME)
            .then_some(pending.sign_in)
    }

    /// Drops what has expired. Runs when something is added, so the maps never grow with
    /// sessions nobody uses.
    fn sweep(&self, maps: &mut Maps, now: MonoTime) {
        let idle = self.inner.settings.idle;
        maps.sessions
            .retain(|_, stored| now.saturating_since(stored.last_used) < idle && now < stored.ends);
        maps.pending
            .retain(|_, pending| now.saturating_since(pending.started) < PENDING_SIGN_IN_LIFETIME);
    }
}

fn constant_time_eq(left: &[u8], right: &[u8]) -> bool {
    if left.len() != right.len() {
        return false;
    }
    left.iter()
        .zip(right)
        .fold(0_u8, |difference, (a, b)| difference | (a ^ b))
        == 0
}

fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

    use async_trait::async_trait;
    use mcpgw_authz::RandomnessError;

    use mcpgw_authz::Principal;

    use super::*;

    /// A clock moved by hand.
    #[derive(Default)]
    struct HandClock {
        micros: AtomicU64,
    }

    impl HandClock {
        fn advance(&self, by: Duration) {
            self.micros
                .fetch_add(u64::try_from(by.as_micros()).unwrap(), Ordering::SeqCst);
        }
    }

    #[async_trait]
    impl Clock for HandClock {
        fn now(&self) -> MonoTime {
            MonoTime::from_duration(Duration::from_micros(self.micros.load(Ordering::SeqCst)))
        }
        fn wall(&self) -> Timestamp {
            Timestamp::from_unix_micros(
                1_700_000_000_000_000 + i64::try_from(self.micros.load(Ordering::SeqCst)).unwrap(),
            )
        }
        async fn sleep(&self, _: Duration) {}
    }

    /// Distinct bytes on every call, so that tokens differ.
    #[derive(Default)]
    struct Counter(AtomicU8);

    impl SecretSource for Counter {
        fn fill(&self, destination: &mut [u8]) -> Result<(), RandomnessError> {
            let first = self.0.fetch_add(1, Ordering::SeqCst);
            for (index, byte) in destination.iter_mut().enumerate() {
                *byte = first.wrapping_add(u8::try_from(index % 251).unwrap());
            }
            Ok(())
        }
    }

    struct Broken;

    impl SecretSource for Broken {
        fn fill(&self, _: &mut [u8]) -> Result<(), RandomnessError> {
            Err(RandomnessError("no entropy".into()))
        }
    }

    fn sessions(settings: SessionSettings) -> (ConsoleSessions, Arc<HandClock>) {
        let clock = Arc::new(HandClock::default());
        let store = ConsoleSessions::new(settings, clock.clone(), Arc::new(Counter::default()));
        (store, clock)
    }

    fn alice() -> Identity {
        Identity::new(Principal::parse("user:alice").unwrap())
    }

    #[test]
    fn a_session_is_found_by_its_token_only_and_holds_its_csrf_token() {
        let (store, _) = sessions(SessionSettings::default());
        let opened = store.open(alice(), SignInMethod::Password, None).unwrap();
        assert_eq!(opened.token.len(), 43, "32 bytes in base64url");
        let found = store.get(&opened.token).expect("open");
        assert_eq!(found.identity.principal.to_string(), "user:alice");
        assert!(found.csrf_matches(&opened.session.csrf_token));
        // Bad input: a wrong CSRF token, an empty one, one a byte short; an unknown session
        // token and the CSRF token presented as the session token.
        assert!(!found.csrf_matches("nope"));
        assert!(!found.csrf_matches(""));
        assert!(!found.csrf_matches(&opened.session.csrf_token[1..]));
        assert!(store.get("not-a-session").is_none());
        assert!(store.get(&opened.session.csrf_token).is_none());
        assert!(
            !format!("{opened:?}").contains(&opened.token),
            "never logged"
        );
    }

    #[test]
    fn sessions_end_when_idle_and_at_their_absolute_deadline() {
        let settings = SessionSettings {
            idle: Duration::from_secs(60),
            absolute: Duration::from_secs(150),
            max_sessions: 10,
        };
        let (store, clock) = sessions(settings);
        let busy = store.open(alice(), SignInMethod::ApiKey, None).unwrap();
        let quiet = store.open(alice(), SignInMethod::ApiKey, None).unwrap();
        for _ in 0..2 {
            clock.advance(Duration::from_secs(50));
            assert!(
                store.get(&busy.token).is_some(),
                "used within the idle time"
            );
        }
        assert!(store.get(&quiet.token).is_none(), "100 s without a request");
        clock.advance(Duration::from_secs(50));
        assert!(
            store.get(&busy.token).is_none(),
            "150 s after opening, however busy"
        );
    }

    #[test]
    fn a_session_ends_when_its_key_expires_and_names_its_key() {
        let (store, clock) = sessions(SessionSettings::default());
        let key = KeyHash::of("mcpgw_0123456789");
        let expires = clock.wall().plus(Duration::from_secs(120));
        let keyed = store
            .open(alice(), SignInMethod::ApiKey, Some((key, Some(expires))))
            .unwrap();
        let other = store.open(alice(), SignInMethod::Password, None).unwrap();
        clock.advance(Duration::from_secs(119));
        assert!(store.get(&keyed.token).is_some());
        clock.advance(Duration::from_secs(1));
        assert!(store.get(&keyed.token).is_none(), "the key expired");

        assert!(store.get(&other.token).is_some(), "another session stays");
        // A key that never expires: the session holds the key, which the console checks on
        // every request (revocation is tested end to end in tests/console.rs).
        let keyed = store
            .open(alice(), SignInMethod::ApiKey, Some((key, None)))
            .unwrap();
        assert_eq!(store.get(&keyed.token).unwrap().key, Some(key));
        assert_eq!(store.get(&other.token).unwrap().key, None);
    }

    #[test]
    fn signing_out_ends_the_session_and_the_store_stays_bounded() {
        let settings = SessionSettings {
            max_sessions: 2,
            ..SessionSettings::default()
        };
        let (store, clock) = sessions(settings);
        let first = store.open(alice(), SignInMethod::Password, None).unwrap();
        clock.advance(Duration::from_secs(1));
        let second = store.open(alice(), SignInMethod::Password, None).unwrap();
        clock.advance(Duration::from_secs(1));
        assert!(
            store.get(&first.token).is_some(),
            "first is now the most recently used"
        );
        let third = store.open(alice(), SignInMethod::Password, None).unwrap();
        assert_eq!(store.open_count(), 2);
        assert!(
            store.get(&second.token).is_none(),
            "the least recently used went"
        );
        assert!(store.close(&third.token));
        assert!(!store.close(&third.token), "only once");
        assert!(store.get(&third.token).is_none());
    }

    #[test]
    fn pending_sign_ins_are_taken_once_and_expire() {
        let (store, clock) = sessions(SessionSettings::default());
        let pending = |state: &str| PendingSignIn {
            state: state.into(),
            nonce: "n".into(),
            pkce_verifier: "v".into(),
            redirect_uri: "http://127.0.0.1/ui/login/sso/callback".into(),
        };
        store.remember_sign_in(pending("one"), "browser-a");
        store.remember_sign_in(pending("two"), "browser-a");
        store.remember_sign_in(pending("three"), "browser-a");
        assert_eq!(store.take_sign_in("one", "browser-a").unwrap().state, "one");
        assert!(
            store.take_sign_in("one", "browser-a").is_none(),
            "a state is used once"
        );
        // Bad input: a state that was never issued; a real state finished by another browser
        // (the attacker's callback URL opened in a victim's browser).
        assert!(store.take_sign_in("forged", "browser-a").is_none());
        assert!(store.take_sign_in("three", "browser-b").is_none());
        assert!(
            store.take_sign_in("three", "browser-a").is_none(),
            "used up"
        );
        clock.advance(PENDING_SIGN_IN_LIFETIME);
        assert!(store.take_sign_in("two", "browser-a").is_none(), "too late");
    }

    #[test]
    fn no_randomness_no_session() {
        let store = ConsoleSessions::new(
            SessionSettings::default(),
            Arc::new(HandClock::default()),
            Arc::new(Broken),
        );
        let error = store
            .open(alice(), SignInMethod::Password, None)
            .unwrap_err();
        assert!(error.to_string().contains("no entropy"), "{error}");
        assert_eq!(store.open_count(), 0);
    }

    #[test]
    fn tokens_are_url_safe_base64() {
        assert_eq!(base64url(b"\xfb\xff"), "-_8");
        assert_eq!(base64url(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64url(b"fo"), "Zm8");
    }
}
