//! Authentication and authorization at run time: the use cases over the authz domain.
//!
//! [`AuthService`] answers three questions on the request path and runs the auth management
//! use cases of the REST surface:
//!
//! - **Who is calling?** [`AuthService::authenticate`] turns the credentials of a request (an
//!   API key from the configured header, or a bearer token) into an [`Identity`]. API keys are
//!   hashed and looked up through the [`AuthStore`] port (stores answer key lookups from
//!   memory); bearer tokens go to the [`TokenVerifier`] port when one is configured. Repeated
//!   failures from one client address lock that address out for a while ([`LockoutPolicy`]),
//!   without touching the store and without affecting any other address.
//! - **May it do this?** [`AuthService::authorize`] decides a [`Permission`] (and, for a tool
//!   call or listing, the tool access policies along an [`AccessPath`]) against a snapshot of
//!   the roles, assignments and policies, then asks the [`PolicyDecider`] port when one is
//!   configured; the decider can only take permissions away, and an error or a late answer
//!   denies.
//! - **Which tools may it see?** [`AuthService::admits_tool`] filters `tools/list`.
//!
//! Local users sign in with a name and a password ([`AuthService::authenticate_password`], for
//! the web console): the password is checked against its argon2id hash in the [`UserStore`]
//! port, on the blocking thread pool, under the same lockout as every other credential. That
//! costs tens of milliseconds, so it happens once per sign-in and never per request.
//!
//! The snapshot (an [`Authorizer`]) lives behind a lock that is held only to clone an `Arc`:
//! the request path never waits on the store. Every admin change writes the store and then
//! rebuilds and swaps the snapshot ([`AuthService::refresh`]); admin changes run one at a time
//! so that a slower rebuild can never swap an older snapshot over a newer one.
//!
//! Configuration-file assignments (`auth.role_assignments`) are merged into every snapshot but
//! never written to the store; revoking one over REST is a Conflict
//! ([`AuthServiceError::StaticAssignment`]).
//!
//! With auth disabled every request is the principal `user:anonymous` carrying the `admin`
//! role as its key role ([`AuthService::authenticate`]), and [`AuthService::authorize`] and
//! [`AuthService::admits_tool`] allow everything without consulting policies or the external
//! decider.
//!
//! Auth events: the core event vocabulary (`mcpgw_core::DomainEvent`) has no authentication,
//! authorization or auth administration variants yet, so this module publishes nothing. Every
//! outcome goes through one private hook per kind ([`AuthService`]'s
//! `on_authentication_outcome`, `on_authorization_denied` and `on_auth_admin_change`), which
//! logs it (never a key, a hash or a token) and is where publishing belongs once the
//! variants exist.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use futures::future::{Either, select};
use mcpgw_authz::{
    AccessPath, ApiKeyRecord, AuthError, AuthStore, Authorizer, BuiltInRole, DeciderError,
    Decision, Identity, IssuedApiKey, KeyHash, KeyId, LocalUser, NewApiKey, PASSWORD_MAX_BYTES,
    PasswordHash, PasswordRejection, Permission, PermissionCheck, PermissionInfo, PolicyAddress,
    PolicyDecider, PolicyInput, PolicyScope, PresentedApiKey, Principal, PrincipalSummary, Role,
    RoleAssignment, RoleBook, RoleName, Scope, SecretSource, TokenVerifier, ToolAccessPolicy,
    UserName, UserStore, catalogue, check_new_password, summarize_principals,
};
use mcpgw_config::AuthConfig;
use mcpgw_core::{Clock, DomainEvent, ErrorKind, EventSink, MonoTime, Timestamp};
use serde::Serialize;

use crate::passwords::{PasswordHasher, PasswordHashing, SALT_BYTES, Verdict};
use crate::token_cache::VerifiedTokens;

/// The header that carries an API key unless configured otherwise.
pub const DEFAULT_API_KEY_HEADER: &str = "X-API-Key";

/// How long the gateway waits for the external policy engine before it denies. The adapter
/// enforces its own limit of 2 s; this is the backstop for an adapter that does not.
pub const POLICY_DECIDER_DEADLINE: Duration = Duration::from_secs(3);

// ----- settings -------------------------------------------------------------------------------

/// How failed authentication attempts lock out a client address.
///
/// `max_failures` failures within `window` lock the address for `lock_duration`; each lockout
/// that follows while the address is still remembered lasts twice as long as the one before,
/// up to `max_lock_duration`. An address is forgotten (and its next lockout is short again)
/// once it has gone `max_lock_duration` without failing and without being locked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockoutPolicy {
    /// Failures within `window` that lock the address; 0 turns lockout off.
    pub max_failures: u32,
    pub window: Duration,
    /// The first lockout's length.
    pub lock_duration: Duration,
    /// The longest lockout.
    pub max_lock_duration: Duration,
    /// At most this many addresses are tracked; stale ones are evicted first, then the
    /// least recently seen unlocked ones.
    pub max_tracked_addresses: usize,
}

impl Default for LockoutPolicy {
    fn default() -> Self {
        Self {
            max_failures: 10,
            window: Duration::from_secs(60),
            lock_duration: Duration::from_secs(60),
            max_lock_duration: Duration::from_secs(15 * 60),
            max_tracked_addresses: 10_000,
        }
    }
}

/// What [`AuthService`] needs to know of the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSettings {
    /// The master switch (`auth.enabled`).
    pub enabled: bool,
    /// A request without credentials is `user:anonymous` (`auth.allow_anonymous`).
    pub allow_anonymous: bool,
    /// API keys are accepted (`auth.api_key.enabled`).
    pub api_key_enabled: bool,
    /// The header that carries an API key (`auth.api_key.header_name`). The service does not
    /// read headers; the HTTP adapter uses this to fill [`Credentials::api_key`].
    pub api_key_header: String,
    /// `auth.role_assignments`: merged into every snapshot, never stored, not revocable.
    pub static_assignments: Vec<RoleAssignment>,
    pub lockout: LockoutPolicy,
    /// The canonical URI of the MCP endpoint (`auth.oauth.resource`); `None`: the URL each
    /// request was addressed to. The HTTP adapter fills [`Credentials::resource`] from it.
    pub resource: Option<String>,
}

impl Default for AuthSettings {
    /// Auth off, the documented default (`auth.enabled: false`).
    fn default() -> Self {
        Self {
            enabled: false,
            allow_anonymous: false,
            api_key_enabled: true,
            api_key_header: DEFAULT_API_KEY_HEADER.to_owned(),
            static_assignments: Vec::new(),
            lockout: LockoutPolicy::default(),
            resource: None,
        }
    }
}

impl AuthSettings {
    /// The settings of the `auth` section, with the default lockout policy. A static
    /// assignment that does not parse is refused (configuration validation refuses it first).
    pub fn from_config(config: &AuthConfig) -> Result<Self, AuthError> {
        let static_assignments = config
            .role_assignments
            .iter()
            .map(|assignment| {
                RoleAssignment::parse(
                    &assignment.principal,
                    &assignment.role,
                    Some(&assignment.scope),
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let header = config.api_key.header_name.trim();
        Ok(Self {
            enabled: config.enabled,
            allow_anonymous: config.allow_anonymous,
            api_key_enabled: config.api_key.enabled,
            api_key_header: if header.is_empty() {
                DEFAULT_API_KEY_HEADER.to_owned()
            } else {
                header.to_owned()
            },
            static_assignments,
            lockout: LockoutPolicy::default(),
            resource: config
                .oauth
                .resource
                .as_deref()
                .map(str::trim)
                .filter(|resource| !resource.is_empty())
                .map(str::to_owned),
        })
    }
}

/// The credentials a request carried, as the HTTP or MCP adapter found them.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// The value of the API-key header (or `?api_key=` on the WebSocket).
    pub api_key: Option<String>,
    /// The token of an `Authorization: Bearer <token>` header, without the scheme.
    pub bearer: Option<String>,
    /// The canonical URI of the resource the request was addressed to (the gateway's MCP
    /// endpoint): a bearer token must have been minted for it, unless its issuer's audience is
    /// configured. `None`: the configured [`AuthSettings::resource`], else no token whose
    /// audience is not configured can pass.
    pub resource: Option<String>,
}

impl Credentials {
    pub fn api_key(key: impl Into<String>) -> Self {
        Self {
            api_key: Some(key.into()),
            ..Self::default()
        }
    }

    pub fn bearer(token: impl Into<String>) -> Self {
        Self {
            bearer: Some(token.into()),
            ..Self::default()
        }
    }

    /// The same credentials, presented to `resource`.
    #[must_use]
    pub fn presented_to(mut self, resource: impl Into<String>) -> Self {
        self.resource = Some(resource.into());
        self
    }

    /// Whether no credential (or only blank ones) was presented.
    pub fn is_empty(&self) -> bool {
        let blank = |value: &Option<String>| value.as_deref().is_none_or(|v| v.trim().is_empty());
        blank(&self.api_key) && blank(&self.bearer)
    }
}

impl std::fmt::Debug for Credentials {
    /// Never shows a secret: only which credentials are present.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("bearer", &self.bearer.as_ref().map(|_| "<redacted>"))
            .field("resource", &self.resource)
            .finish()
    }
}

// ----- errors ---------------------------------------------------------------------------------

/// What the auth use cases fail with: a domain [`AuthError`], or one of the two refusals that
/// belong to the application (a locked-out address, a configuration-file assignment).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthServiceError {
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The client address failed to authenticate too often; it may try again after
    /// `retry_after_secs` (the `Retry-After` header).
    #[error(
        "too many failed authentication attempts from this address; try again in \
         {retry_after_secs} s"
    )]
    LockedOut { retry_after_secs: u64 },
    /// The assignment comes from the configuration file (`auth.role_assignments`).
    #[error(
        "`{}` holds role `{}` in scope `{}` through auth.role_assignments in the \
         configuration file; remove it there and reload instead",
        assignment.principal, assignment.role, assignment.scope
    )]
    StaticAssignment { assignment: RoleAssignment },
    /// A local-user operation on a service built without a [`UserStore`].
    #[error(
        "local users are not available: this gateway was built without a user store \
         (AuthService::with_user_store)"
    )]
    NoUserStore,
    /// A password could not be hashed or checked (no secure randomness for a salt, the hashing
    /// task failed). The message is for the log; it never holds the password.
    #[error("the password could not be hashed or checked: {message}")]
    PasswordHashing { message: String },
}

impl AuthServiceError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            AuthServiceError::Auth(error) => error.kind(),
            AuthServiceError::LockedOut { .. } => ErrorKind::RateLimited,
            AuthServiceError::StaticAssignment { .. } => ErrorKind::Conflict,
            AuthServiceError::NoUserStore => ErrorKind::Unavailable,
            AuthServiceError::PasswordHashing { .. } => ErrorKind::Internal,
        }
    }

    /// Seconds to put in `Retry-After`, for a locked-out address.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            AuthServiceError::LockedOut { retry_after_secs } => Some(*retry_after_secs),
            _ => None,
        }
    }

    /// The domain error, when this is one.
    pub fn as_auth_error(&self) -> Option<&AuthError> {
        match self {
            AuthServiceError::Auth(error) => Some(error),
            _ => None,
        }
    }
}

impl From<mcpgw_authz::StoreError> for AuthServiceError {
    fn from(error: mcpgw_authz::StoreError) -> Self {
        AuthServiceError::Auth(AuthError::Store(error))
    }
}

impl From<mcpgw_authz::PrincipalError> for AuthServiceError {
    fn from(error: mcpgw_authz::PrincipalError) -> Self {
        AuthServiceError::Auth(AuthError::InvalidPrincipal(error))
    }
}

// ----- views ----------------------------------------------------------------------------------

/// A key as listings show it: never its hash, never the raw key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiKeySummary {
    pub key_id: KeyId,
    pub name: String,
    pub principal: Principal,
    pub role: Option<RoleName>,
    /// The key's first characters, to tell keys apart.
    pub prefix: String,
    pub created_at: Timestamp,
    pub expires_at: Option<Timestamp>,
    pub revoked_at: Option<Timestamp>,
    /// `active`, `expired` or `revoked` at the time of the listing.
    pub status: &'static str,
}

impl ApiKeySummary {
    pub fn of(record: &ApiKeyRecord, now: Timestamp) -> Self {
        Self {
            key_id: record.id.clone(),
            name: record.name.clone(),
            principal: record.principal.clone(),
            role: record.role.clone(),
            prefix: record.prefix.clone(),
            created_at: record.created_at,
            expires_at: record.expires_at,
            revoked_at: record.revoked_at,
            status: record.status(now).as_str(),
        }
    }
}

/// A local user as listings show it: never its password hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UserSummary {
    pub name: UserName,
    /// `user:<name>`: what role assignments name to give the user roles.
    pub principal: Principal,
    pub created_at: Timestamp,
    pub password_changed_at: Timestamp,
    pub disabled: bool,
}

impl UserSummary {
    pub fn of(user: &LocalUser) -> Self {
        Self {
            name: user.name.clone(),
            principal: user.principal(),
            created_at: user.created_at,
            password_changed_at: user.password_changed_at,
            disabled: user.disabled,
        }
    }
}

/// A role a principal holds, and where the assignment comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeldRole {
    pub role: RoleName,
    pub scope: Scope,
    /// `true` for an `auth.role_assignments` entry of the configuration file.
    pub from_config: bool,
}

/// The answer of `POST /api/auth/check-permission`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PermissionCheckView {
    pub principal: Principal,
    pub permission: Permission,
    pub allowed: bool,
    pub granted_by_role: Option<RoleName>,
}

/// A request for a key, in the union of the API's two spellings of a key request (the HTTP
/// adapter maps `principal`/`principal_id` and friends onto it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateKeyRequest {
    pub principal: String,
    pub name: String,
    pub role: Option<String>,
    pub expires_in_days: Option<i64>,
}

// ----- lockout --------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct AddressRecord {
    window_started: MonoTime,
    failures_in_window: u32,
    locked_until: Option<MonoTime>,
    /// Lockouts so far while remembered; the next lasts `lock_duration * 2^lockouts`.
    lockouts: u32,
    last_seen: MonoTime,
}

impl AddressRecord {
    fn locked_at(&self, now: MonoTime) -> Option<Duration> {
        self.locked_until
            .filter(|until| *until > now)
            .map(|until| until.saturating_since(now))
    }

    /// Nothing left to remember: no lock in force, the window is over, and the address has
    /// been quiet long enough that its lockout history is forgiven.
    fn is_stale(&self, now: MonoTime, policy: &LockoutPolicy) -> bool {
        let quiet_since = match self.locked_until {
            Some(until) if until > self.last_seen => until,
            _ => self.last_seen,
        };
        self.locked_at(now).is_none()
            && now.saturating_since(self.window_started) >= policy.window
            && now.saturating_since(quiet_since) >= policy.max_lock_duration
    }
}

/// Failed attempts per client address: pure bookkeeping driven by the clock's readings.
#[derive(Debug)]
struct Lockout {
    policy: LockoutPolicy,
    addresses: HashMap<IpAddr, AddressRecord>,
}

impl Lockout {
    fn new(policy: LockoutPolicy) -> Self {
        Self {
            policy,
            addresses: HashMap::new(),
        }
    }

    fn enabled(&self) -> bool {
        self.policy.max_failures > 0 && self.policy.max_tracked_addresses > 0
    }

    /// How long `address` stays locked, if it is.
    fn locked(&self, address: IpAddr, now: MonoTime) -> Option<Duration> {
        if !self.enabled() {
            return None;
        }
        self.addresses
            .get(&address)
            .and_then(|record| record.locked_at(now))
    }

    /// Counts a failure; answers the lock's length when this failure started one.
    fn record_failure(&mut self, address: IpAddr, now: MonoTime) -> Option<Duration> {
        if !self.enabled() {
            return None;
        }
        if !self.addresses.contains_key(&address) {
            self.make_room(now);
        }
        let policy = &self.policy;
        let record = self
            .addresses
            .entry(address)
            .or_insert_with(|| AddressRecord {
                window_started: now,
                failures_in_window: 0,
                locked_until: None,
                lockouts: 0,
                last_seen: now,
            });
        if record.is_stale(now, policy) {
            record.lockouts = 0;
        }
        record.last_seen = now;
        if record.locked_at(now).is_some() {
            return None;
        }
        if now.saturating_since(record.window_started) >= policy.window {
            record.window_started = now;
            record.failures_in_window = 0;
        }
        record.failures_in_window += 1;
        if record.failures_in_window < policy.max_failures {
            return None;
        }
        let factor = 1_u32.checked_shl(record.lockouts).unwrap_or(u32::MAX);
        let length = policy
            .lock_duration
            .saturating_mul(factor)
            .min(policy.max_lock_duration);
        record.locked_until = Some(now.plus(length));
        record.lockouts = record.lockouts.saturating_add(1);
        record.failures_in_window = 0;
        record.window_started = now.plus(length);
        Some(length)
    }

    /// Keeps the table under its bound: stale entries go first; if that is not enough, the
    /// least recently seen entry without a lock in force (or, failing that, any) goes.
    fn make_room(&mut self, now: MonoTime) {
        if self.addresses.len() < self.policy.max_tracked_addresses {
            return;
        }
        let policy = self.policy.clone();
        self.addresses
            .retain(|_, record| !record.is_stale(now, &policy));
        while self.addresses.len() >= self.policy.max_tracked_addresses {
            let victim = self
                .addresses
                .iter()
                .min_by_key(|(_, record)| (record.locked_at(now).is_some(), record.last_seen))
                .map(|(address, _)| *address);
            match victim {
                Some(address) => {
                    self.addresses.remove(&address);
                }
                None => break,
            }
        }
    }

    fn tracked(&self) -> usize {
        self.addresses.len()
    }
}

/// The address lockout keys on: IPv4 as is (IPv4-mapped IPv6 included), IPv6 by its /64
/// network, which one client usually holds whole.
fn lockout_key(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(_) => address,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let segments = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(
                    segments[0],
                    segments[1],
                    segments[2],
                    segments[3],
                    0,
                    0,
                    0,
                    0,
                ))
            }
        },
    }
}

fn whole_seconds_rounded_up(duration: Duration) -> u64 {
    let seconds = duration.as_secs();
    if duration.subsec_nanos() > 0 || seconds == 0 {
        seconds + 1
    } else {
        seconds
    }
}

// ----- the service ----------------------------------------------------------------------------

/// How a credential was presented, for logs and (later) events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CredentialKind {
    None,
    ApiKey,
    Bearer,
    /// A local user's name and password.
    Password,
}

impl CredentialKind {
    fn as_str(self) -> &'static str {
        match self {
            CredentialKind::None => "none",
            CredentialKind::ApiKey => "api_key",
            CredentialKind::Bearer => "bearer",
            CredentialKind::Password => "password",
        }
    }
}

/// Authentication, authorization and auth management. Share it as `Arc<AuthService>`: every
/// method takes `&self`.
pub struct AuthService {
    settings: AuthSettings,
    store: Arc<dyn AuthStore>,
    events: Arc<dyn EventSink>,
    clock: Arc<dyn Clock>,
    secrets: Arc<dyn SecretSource>,
    verifier: Option<Arc<dyn TokenVerifier>>,
    decider: Option<Arc<dyn PolicyDecider>>,
    /// Local users; `None`: nobody signs in with a password.
    users: Option<Arc<dyn UserStore>>,
    passwords: PasswordHasher,
    /// Tokens the verifier accepted recently (see the `token_cache` module).
    verified_tokens: VerifiedTokens,
    snapshot: RwLock<Arc<Authorizer>>,
    lockout: Mutex<Lockout>,
    /// Serializes admin changes, so that snapshots are swapped in the order of the writes.
    admin: tokio::sync::Mutex<()>,
}

impl AuthService {
    /// A service whose snapshot holds only the built-in roles and the static assignments;
    /// call [`AuthService::load`] before serving to read the store.
    pub fn new(
        settings: AuthSettings,
        store: Arc<dyn AuthStore>,
        events: Arc<dyn EventSink>,
        clock: Arc<dyn Clock>,
        secrets: Arc<dyn SecretSource>,
    ) -> Self {
        let snapshot = Authorizer::new(
            RoleBook::default(),
            settings.static_assignments.clone(),
            Vec::new(),
        );
        let lockout = Lockout::new(settings.lockout.clone());
        Self {
            settings,
            store,
            events,
            clock,
            secrets,
            verifier: None,
            decider: None,
            users: None,
            passwords: PasswordHasher::new(PasswordHashing::RECOMMENDED),
            verified_tokens: VerifiedTokens::new(),
            snapshot: RwLock::new(Arc::new(snapshot)),
            lockout: Mutex::new(lockout),
            admin: tokio::sync::Mutex::new(()),
        }
    }

    /// Bearer tokens are verified by `verifier` (OIDC enabled).
    #[must_use]
    pub fn with_token_verifier(mut self, verifier: Arc<dyn TokenVerifier>) -> Self {
        self.verifier = Some(verifier);
        self
    }

    /// Decisions that the gateway allows are also put to `decider` (OPA enabled).
    #[must_use]
    pub fn with_policy_decider(mut self, decider: Arc<dyn PolicyDecider>) -> Self {
        self.decider = Some(decider);
        self
    }

    /// Local users are kept in `users`: they can sign in with a password
    /// ([`AuthService::authenticate_password`]) and be managed ([`AuthService::create_user`]).
    #[must_use]
    pub fn with_user_store(mut self, users: Arc<dyn UserStore>) -> Self {
        self.users = Some(users);
        self
    }

    /// Passwords are hashed at `hashing`'s cost instead of [`PasswordHashing::RECOMMENDED`].
    /// Passwords hashed before keep the cost they were hashed at and still check.
    #[must_use]
    pub fn with_password_hashing(mut self, hashing: PasswordHashing) -> Self {
        self.passwords = PasswordHasher::new(hashing);
        self
    }

    /// The cost new password hashes are made at.
    pub fn password_hashing(&self) -> PasswordHashing {
        self.passwords.hashing()
    }

    /// Whether local users can sign in (a user store is configured).
    pub fn accepts_passwords(&self) -> bool {
        self.users.is_some()
    }

    pub fn settings(&self) -> &AuthSettings {
        &self.settings
    }

    /// Whether bearer tokens can be verified (a token verifier is configured).
    pub fn accepts_bearer_tokens(&self) -> bool {
        self.verifier.is_some()
    }

    /// The authorization servers whose tokens are accepted, for the protected resource
    /// metadata; empty without a token verifier.
    pub fn authorization_servers(&self) -> Vec<String> {
        self.verifier
            .as_ref()
            .map(|verifier| verifier.authorization_servers())
            .unwrap_or_default()
    }

    /// The scopes the token verifier's issuers are read with, for `scopes_supported`.
    pub fn scopes_supported(&self) -> Vec<String> {
        self.verifier
            .as_ref()
            .map(|verifier| verifier.scopes_supported())
            .unwrap_or_default()
    }

    pub fn is_enabled(&self) -> bool {
        self.settings.enabled
    }

    /// Reads roles, assignments and policies from the store and swaps in a new snapshot.
    pub async fn load(&self) -> Result<(), AuthServiceError> {
        let _admin = self.admin.lock().await;
        self.refresh_locked().await
    }

    /// The same as [`AuthService::load`], for after a change made behind the service's back.
    pub async fn refresh(&self) -> Result<(), AuthServiceError> {
        self.load().await
    }

    async fn refresh_locked(&self) -> Result<(), AuthServiceError> {
        let roles = RoleBook::new(self.store.custom_roles().await?);
        let stored = self.store.assignments().await?;
        let policies = self.store.policies().await?;
        for assignment in &self.settings.static_assignments {
            if roles.get(assignment.role.as_str()).is_none() {
                tracing::warn!(
                    principal = %assignment.principal,
                    role = %assignment.role,
                    "auth.role_assignments names a role that does not exist; it grants nothing"
                );
            }
        }
        let assignments = self
            .settings
            .static_assignments
            .iter()
            .cloned()
            .chain(stored);
        let authorizer = Authorizer::new(roles, assignments, policies);
        *self
            .snapshot
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(authorizer);
        Ok(())
    }

    /// The current snapshot of roles, assignments and policies.
    pub fn authorizer(&self) -> Arc<Authorizer> {
        Arc::clone(&self.snapshot.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn lockout(&self) -> MutexGuard<'_, Lockout> {
        self.lockout.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many client addresses the lockout currently remembers (bounded by
    /// [`LockoutPolicy::max_tracked_addresses`]).
    pub fn tracked_addresses(&self) -> usize {
        self.lockout().tracked()
    }

    // ----- authentication -------------------------------------------------------------------

    /// Who is calling.
    ///
    /// - Auth disabled: `user:anonymous` with `admin` as its key role, whatever was sent.
    /// - A locked-out `client`: [`AuthServiceError::LockedOut`], before anything else (the
    ///   store is not asked).
    /// - No credential (or only blank ones): `user:anonymous` when anonymous access is
    ///   allowed, `No valid credentials provided` otherwise.
    /// - An API key (when API keys are enabled; it wins over a bearer token): its shape, then
    ///   the store's record, then the record's status at the clock's wall time.
    /// - A bearer token: the token verifier's verdict (no verifier configured: `No valid
    ///   credentials provided`; the verifier unreachable: Unavailable, not counted as a
    ///   failure).
    ///
    /// A refused credential counts as a failure of `client`; enough of them lock it out.
    /// Without a `client` address (an embedder that has none) nothing is counted or locked.
    pub async fn authenticate(
        &self,
        credentials: Credentials,
        client: Option<IpAddr>,
    ) -> Result<Identity, AuthServiceError> {
        if !self.settings.enabled {
            return Ok(Self::unrestricted_identity());
        }
        let client_key = client.map(lockout_key);
        self.refuse_if_locked_out(client_key)?;
        let (kind, outcome) = match self.presented(&credentials) {
            (Some(key), _) => (CredentialKind::ApiKey, self.authenticate_key(key).await),
            (None, Some(token)) => {
                let resource = credentials
                    .resource
                    .as_deref()
                    .or(self.settings.resource.as_deref())
                    .unwrap_or_default();
                (
                    CredentialKind::Bearer,
                    self.authenticate_token(token, resource).await,
                )
            }
            (None, None) if self.settings.allow_anonymous => {
                (CredentialKind::None, Ok(Identity::anonymous()))
            }
            (None, None) => (CredentialKind::None, Err(AuthError::NoCredentials)),
        };
        // A credential was presented and refused: that is what lockout counts. Requests
        // without one guess nothing; store and verifier outages are not the client's doing.
        if let Err(error) = &outcome
            && kind != CredentialKind::None
            && error.kind() == ErrorKind::Unauthenticated
        {
            self.count_failure(client_key);
        }
        self.on_authentication_outcome(kind, client, outcome.as_ref().map_err(failure_reason));
        outcome.map_err(AuthServiceError::from)
    }

    /// Refuses a locked-out address (keyed by [`lockout_key`]) before anything is done for it.
    fn refuse_if_locked_out(&self, address: Option<IpAddr>) -> Result<(), AuthServiceError> {
        let Some(address) = address else {
            return Ok(());
        };
        let now = self.clock.now();
        match self.lockout().locked(address, now) {
            Some(remaining) => {
                let retry_after_secs = whole_seconds_rounded_up(remaining);
                tracing::debug!(
                    client = %address,
                    retry_after_secs,
                    "authentication refused: the address is locked out"
                );
                Err(AuthServiceError::LockedOut { retry_after_secs })
            }
            None => Ok(()),
        }
    }

    /// Counts a refused credential against `address` (keyed by [`lockout_key`]).
    fn count_failure(&self, address: Option<IpAddr>) {
        let Some(address) = address else {
            return;
        };
        let now = self.clock.now();
        if let Some(length) = self.lockout().record_failure(address, now) {
            tracing::warn!(
                client = %address,
                lock_secs = length.as_secs(),
                "too many failed authentication attempts; the address is locked out"
            );
        }
    }

    /// Who signs in with the local user name `name` and `password` (the web console's sign-in).
    ///
    /// - A locked-out `client`: [`AuthServiceError::LockedOut`], before anything else (nothing
    ///   is hashed, the store is not asked).
    /// - The password is checked against the user's argon2id hash on the blocking thread pool.
    ///   An unknown user is checked against a dummy hash, so that it takes as long as a wrong
    ///   password and the time taken does not tell which names exist.
    /// - An unknown user, a wrong password, a disabled user (told only after its password
    ///   checked), a malformed name or password and a gateway without users all answer the
    ///   same `Invalid user name or password` ([`AuthError::InvalidPassword`], its reason for
    ///   logs and events), and each counts as a failure of `client`, as a refused API key does.
    /// - The identity is `user:<name>` and nothing more: its roles are the role assignments of
    ///   that principal.
    ///
    /// The check runs whether auth is enabled or not: a sign-in is always a real one.
    /// `AuthenticationSucceeded` / `AuthenticationFailed` are published with the credential
    /// kind `password`; a store outage or a failure to hash is not counted against `client`.
    pub async fn authenticate_password(
        &self,
        name: &str,
        password: &str,
        client: Option<IpAddr>,
    ) -> Result<Identity, AuthServiceError> {
        let client_key = client.map(lockout_key);
        self.refuse_if_locked_out(client_key)?;
        let outcome = self.check_password(name, password).await;
        if let Err(error) = &outcome
            && error.kind() == ErrorKind::Unauthenticated
        {
            self.count_failure(client_key);
        }
        let reason = |error: &AuthServiceError| match error {
            AuthServiceError::Auth(error) => failure_reason(error),
            other => other.to_string(),
        };
        self.on_authentication_outcome(
            CredentialKind::Password,
            client,
            outcome.as_ref().map_err(reason),
        );
        outcome
    }

    async fn check_password(
        &self,
        name: &str,
        password: &str,
    ) -> Result<Identity, AuthServiceError> {
        let refuse = |reason| Err(AuthError::InvalidPassword { reason }.into());
        let Some(users) = &self.users else {
            return refuse(PasswordRejection::NoUsers);
        };
        // Neither tells anything about which users exist, so nothing is hashed for them.
        let Ok(name) = UserName::parse(name) else {
            return refuse(PasswordRejection::Malformed);
        };
        if password.is_empty() || password.len() > PASSWORD_MAX_BYTES {
            return refuse(PasswordRejection::Malformed);
        }
        let Some(user) = users.user(&name).await? else {
            self.passwords
                .check_against_dummy(password)
                .await
                .map_err(hashing_failed)?;
            return refuse(PasswordRejection::UnknownUser);
        };
        match self
            .passwords
            .verify(password, &user.password_hash)
            .await
            .map_err(hashing_failed)?
        {
            Verdict::Matches if user.disabled => refuse(PasswordRejection::Disabled),
            Verdict::Matches => Ok(Identity::new(user.principal())),
            Verdict::DoesNotMatch => refuse(PasswordRejection::WrongPassword),
            Verdict::Unusable => {
                tracing::error!(
                    user = %user.name,
                    algorithm = user.password_hash.algorithm(),
                    "the stored password hash of this user cannot be checked; set its password \
                     again"
                );
                // As long as any other refusal takes.
                self.passwords
                    .check_against_dummy(password)
                    .await
                    .map_err(hashing_failed)?;
                refuse(PasswordRejection::UnusableHash)
            }
        }
    }

    /// The credentials that count, as `(api key, bearer token)`: an API key (when keys are
    /// enabled) wins over a bearer token, and blank values count as absent.
    fn presented<'a>(&self, credentials: &'a Credentials) -> (Option<&'a str>, Option<&'a str>) {
        let api_key = credentials
            .api_key
            .as_deref()
            .filter(|_| self.settings.api_key_enabled)
            .filter(|value| !value.trim().is_empty());
        let bearer = credentials
            .bearer
            .as_deref()
            .map(str::trim)
            .filter(|value| !value.is_empty());
        match api_key {
            Some(key) => (Some(key), None),
            None => (None, bearer),
        }
    }

    /// The bearer token [`AuthService::authenticate`] judges `credentials` by, when a token (not
    /// an API key) is what authenticates them: what a remote server configured for token
    /// exchange gets a token of its own for.
    pub fn authenticating_token<'a>(&self, credentials: &'a Credentials) -> Option<&'a str> {
        self.presented(credentials).1
    }

    /// What every request is when auth is disabled: `user:anonymous` holding `admin` as the
    /// key role, so that anything that asks the snapshot directly also finds it allowed.
    fn unrestricted_identity() -> Identity {
        Identity::anonymous().with_key_role(BuiltInRole::Admin.role_name())
    }

    async fn authenticate_key(&self, raw: &str) -> Result<Identity, AuthError> {
        let presented = PresentedApiKey::parse(Some(raw))?;
        let hash = presented.hash();
        let record = self
            .store
            .key_by_hash(&hash)
            .await?
            .ok_or(AuthError::InvalidApiKey {
                reason: mcpgw_authz::KeyRejection::Unknown,
            })?;
        record.check(&hash, self.clock.wall())?;
        Ok(Identity::for_api_key(&record))
    }

    async fn authenticate_token(&self, token: &str, resource: &str) -> Result<Identity, AuthError> {
        let Some(verifier) = &self.verifier else {
            return Err(AuthError::NoCredentials);
        };
        let now = self.clock.wall();
        let digest = VerifiedTokens::digest(resource, token);
        let claims = match self.verified_tokens.get(&digest, now) {
            Some(claims) => claims,
            None => {
                let claims = verifier.verify(token, resource, now).await?;
                self.verified_tokens.insert(digest, claims.clone(), now);
                claims
            }
        };
        Identity::from_claims(&claims)
    }

    /// Publishes `AuthenticationSucceeded` / `AuthenticationFailed` with the principal, the
    /// credential's kind and the reason of a refusal (never the credential).
    fn on_authentication_outcome(
        &self,
        kind: CredentialKind,
        client: Option<IpAddr>,
        outcome: Result<&Identity, String>,
    ) {
        let client = client.map(|address| address.to_string());
        let event = match outcome {
            Ok(identity) => DomainEvent::AuthenticationSucceeded {
                principal: identity.principal.to_string(),
                credential: kind.as_str(),
                client,
            },
            Err(reason) => DomainEvent::AuthenticationFailed {
                credential: kind.as_str(),
                reason,
                client,
            },
        };
        self.events.publish(self.clock.wall(), event);
    }

    // ----- authorization --------------------------------------------------------------------

    /// Whether `identity` may do `permission` (on the tool or server that `path` leads to).
    ///
    /// The snapshot decides first; when it allows and a policy decider is configured, the
    /// decider is asked too and can only deny (its error, or no answer within
    /// [`POLICY_DECIDER_DEADLINE`], denies). With auth disabled everything is allowed, by
    /// `admin`.
    pub async fn authorize(
        &self,
        identity: &Identity,
        permission: Permission,
        path: Option<&AccessPath>,
    ) -> Decision {
        self.authorize_with_context(identity, permission, path, BTreeMap::new())
            .await
    }

    /// [`AuthService::authorize`] with facts of the request (method, path, client address)
    /// for the external policy engine's `input.context`.
    pub async fn authorize_with_context(
        &self,
        identity: &Identity,
        permission: Permission,
        path: Option<&AccessPath>,
        context: BTreeMap<String, String>,
    ) -> Decision {
        if !self.settings.enabled {
            return Decision::Allow {
                granted_by_role: BuiltInRole::Admin.role_name(),
            };
        }
        let decision = self.authorizer().decide(identity, permission, path);
        let decision = match (&self.decider, decision.is_allowed()) {
            (Some(decider), true) => {
                let mut input = PolicyInput::new(identity, permission, path.and_then(resource_of));
                input.context = context;
                let answer = self.ask_decider(decider.as_ref(), &input).await;
                decision.and_external(identity, permission, answer)
            }
            _ => decision,
        };
        let event = match &decision {
            Decision::Allow { granted_by_role } => DomainEvent::AuthorizationGranted {
                principal: identity.principal.to_string(),
                permission: permission.to_string(),
                granted_by_role: granted_by_role.to_string(),
            },
            Decision::Deny { reason } => DomainEvent::AuthorizationDenied {
                principal: identity.principal.to_string(),
                permission: permission.to_string(),
                reason: reason.to_string(),
            },
        };
        self.events.publish(self.clock.wall(), event);
        decision
    }

    async fn ask_decider(
        &self,
        decider: &dyn PolicyDecider,
        input: &PolicyInput,
    ) -> Result<bool, DeciderError> {
        let answer = decider.decide(input);
        let deadline = self.clock.sleep(POLICY_DECIDER_DEADLINE);
        match select(answer, deadline).await {
            Either::Left((answer, _)) => answer,
            Either::Right(((), _)) => Err(DeciderError(format!(
                "no answer within {} s",
                POLICY_DECIDER_DEADLINE.as_secs()
            ))),
        }
    }

    /// Whether the tool access policies along `path` admit `identity`: for filtering
    /// `tools/list` (a tool it may not call is not shown). Permissions are not checked here;
    /// `tool:list` is checked once for the whole listing. Always `true` with auth disabled.
    pub fn admits_tool(&self, identity: &Identity, path: &AccessPath) -> bool {
        !self.settings.enabled || self.authorizer().admits(identity, path).is_ok()
    }

    /// Publishes an auth administration event.
    fn on_auth_admin_change(&self, event: DomainEvent) {
        self.events.publish(self.clock.wall(), event);
    }

    // ----- keys -----------------------------------------------------------------------------

    /// Makes a key. The raw key is in the answer and nowhere else: show it once.
    pub async fn create_key(
        &self,
        request: CreateKeyRequest,
    ) -> Result<IssuedApiKey, AuthServiceError> {
        let snapshot = self.authorizer();
        let new = NewApiKey::parse(
            &request.principal,
            &request.name,
            request.role.as_deref(),
            request.expires_in_days,
            snapshot.roles(),
        )?;
        let issued = new.issue(self.secrets.as_ref(), self.clock.wall())?;
        self.store.insert_key(&issued.record).await?;
        self.on_auth_admin_change(DomainEvent::ApiKeyCreated {
            key_id: issued.record.id.to_string(),
            principal: issued.record.principal.to_string(),
            name: issued.record.name.clone(),
        });
        Ok(issued)
    }

    /// Every key, revoked and expired ones included, oldest first.
    pub async fn list_keys(&self) -> Result<Vec<ApiKeySummary>, AuthServiceError> {
        let now = self.clock.wall();
        Ok(self
            .store
            .keys()
            .await?
            .iter()
            .map(|record| ApiKeySummary::of(record, now))
            .collect())
    }

    /// Whether the key whose hash is `hash` still authenticates, and until when: `Some(expiry)`
    /// for a key that is neither revoked nor expired (`Some(None)`: it never expires), `None`
    /// otherwise (or when the store cannot say). What a console session opened with a key is
    /// re-checked against on every request, from the store's in-memory index of keys.
    pub async fn key_standing(&self, hash: &KeyHash) -> Option<Option<Timestamp>> {
        let record = self.store.key_by_hash(hash).await.ok()??;
        record
            .check(hash, self.clock.wall())
            .ok()
            .map(|()| record.expires_at)
    }

    /// Revokes a key; it is refused from now on. Revoking it again keeps the first time.
    pub async fn revoke_key(&self, key_id: &str) -> Result<ApiKeySummary, AuthServiceError> {
        let id = KeyId::parse(key_id)?;
        let now = self.clock.wall();
        let record =
            self.store
                .revoke_key(&id, now)
                .await?
                .ok_or_else(|| AuthError::KeyNotFound {
                    key_id: id.to_string(),
                })?;
        self.on_auth_admin_change(DomainEvent::ApiKeyRevoked {
            key_id: id.to_string(),
        });
        Ok(ApiKeySummary::of(&record, now))
    }

    // ----- local users ----------------------------------------------------------------------

    fn user_store(&self) -> Result<&Arc<dyn UserStore>, AuthServiceError> {
        self.users.as_ref().ok_or(AuthServiceError::NoUserStore)
    }

    /// A new password's hash: the password rule, then a fresh salt from the secret source,
    /// then argon2id on the blocking thread pool.
    async fn hash_new_password(&self, password: &str) -> Result<PasswordHash, AuthServiceError> {
        check_new_password(password)?;
        let mut salt = [0_u8; SALT_BYTES];
        self.secrets
            .fill(&mut salt)
            .map_err(|error| AuthServiceError::PasswordHashing {
                message: format!("no secure randomness for a salt: {error}"),
            })?;
        self.passwords
            .hash(password, salt)
            .await
            .map_err(hashing_failed)
    }

    /// Makes a local user `name` (see [`UserName`]) with `password` (see
    /// [`check_new_password`]). It holds no role until one is assigned to `user:<name>`.
    /// A taken name is [`AuthError::UserAlreadyExists`].
    pub async fn create_user(
        &self,
        name: &str,
        password: &str,
    ) -> Result<UserSummary, AuthServiceError> {
        let name = UserName::parse(name)?;
        let users = self.user_store()?;
        let hash = self.hash_new_password(password).await?;
        let user = LocalUser::new(name, hash, self.clock.wall());
        if !users.insert_user(&user).await? {
            return Err(AuthError::UserAlreadyExists { name: user.name }.into());
        }
        tracing::info!(user = %user.name, "local user created");
        Ok(UserSummary::of(&user))
    }

    /// Every local user, by name.
    pub async fn list_users(&self) -> Result<Vec<UserSummary>, AuthServiceError> {
        let users = self.user_store()?.users().await?;
        Ok(users.iter().map(UserSummary::of).collect())
    }

    /// The local user `name`; [`AuthError::UserNotFound`] when there is none.
    pub async fn user(&self, name: &str) -> Result<UserSummary, AuthServiceError> {
        let name = UserName::parse(name)?;
        match self.user_store()?.user(&name).await? {
            Some(user) => Ok(UserSummary::of(&user)),
            None => Err(AuthError::UserNotFound { name }.into()),
        }
    }

    /// Gives the local user `name` a new password (the same rule as at creation).
    pub async fn set_password(&self, name: &str, password: &str) -> Result<(), AuthServiceError> {
        let name = UserName::parse(name)?;
        let users = self.user_store()?;
        let hash = self.hash_new_password(password).await?;
        if !users
            .set_password_hash(&name, &hash, self.clock.wall())
            .await?
        {
            return Err(AuthError::UserNotFound { name }.into());
        }
        tracing::info!(user = %name, "local user's password set");
        Ok(())
    }

    /// Disables (`true`) or enables the local user `name`. A disabled user cannot sign in and
    /// keeps its roles and its password.
    pub async fn set_user_disabled(
        &self,
        name: &str,
        disabled: bool,
    ) -> Result<(), AuthServiceError> {
        let name = UserName::parse(name)?;
        if !self.user_store()?.set_disabled(&name, disabled).await? {
            return Err(AuthError::UserNotFound { name }.into());
        }
        tracing::info!(user = %name, disabled, "local user disabled or enabled");
        Ok(())
    }

    /// Deletes the local user `name`. The role assignments of `user:<name>` stay (the principal
    /// may also sign in otherwise, with a key or a token); revoke them separately.
    pub async fn delete_user(&self, name: &str) -> Result<(), AuthServiceError> {
        let name = UserName::parse(name)?;
        if !self.user_store()?.delete_user(&name).await? {
            return Err(AuthError::UserNotFound { name }.into());
        }
        tracing::info!(user = %name, "local user deleted");
        Ok(())
    }

    // ----- roles ----------------------------------------------------------------------------

    /// The custom roles, by name.
    pub fn list_custom_roles(&self) -> Vec<Role> {
        self.authorizer().roles().custom().cloned().collect()
    }

    /// The built-in roles in their fixed order (`admin`, `mcp_server_admin`, `developer`,
    /// `viewer`, `auditor`, `operator`), then the custom ones by name.
    pub fn list_all_roles(&self) -> Vec<Role> {
        self.authorizer().roles().all().cloned().collect()
    }

    pub fn role(&self, name: &str) -> Result<Role, AuthServiceError> {
        Ok(self.authorizer().roles().require(name)?.clone())
    }

    pub async fn create_role(
        &self,
        name: &str,
        description: Option<&str>,
        permissions: &[String],
    ) -> Result<Role, AuthServiceError> {
        let role = Role::parse_custom(name, description, permissions)?;
        let _admin = self.admin.lock().await;
        self.authorizer().roles().check_create(&role)?;
        if !self.store.insert_custom_role(&role).await? {
            return Err(AuthError::RoleAlreadyExists {
                role: role.name().clone(),
            }
            .into());
        }
        self.refresh_locked().await?;
        self.on_auth_admin_change(DomainEvent::RoleCreated {
            role: role.name().to_string(),
        });
        Ok(role)
    }

    /// Applies a PATCH (`None` keeps a field) to a custom role.
    pub async fn update_role(
        &self,
        name: &str,
        description: Option<&str>,
        permissions: Option<&[String]>,
    ) -> Result<Role, AuthServiceError> {
        let _admin = self.admin.lock().await;
        let role = self
            .authorizer()
            .roles()
            .check_update(name, description, permissions)?;
        if !self.store.replace_custom_role(&role).await? {
            return Err(AuthError::RoleNotFound {
                role: role.name().to_string(),
            }
            .into());
        }
        self.refresh_locked().await?;
        self.on_auth_admin_change(DomainEvent::RoleUpdated {
            role: role.name().to_string(),
        });
        Ok(role)
    }

    /// Deletes a custom role that nothing is assigned any more.
    pub async fn delete_role(&self, name: &str) -> Result<(), AuthServiceError> {
        let _admin = self.admin.lock().await;
        let stored = self.store.assignments().await?;
        let naming_it = stored
            .iter()
            .chain(&self.settings.static_assignments)
            .filter(|assignment| assignment.role.as_str() == name)
            .count();
        let snapshot = self.authorizer();
        snapshot.roles().check_delete(name, naming_it)?;
        let role = snapshot.roles().require(name)?.name().clone();
        if !self.store.delete_custom_role(&role).await? {
            return Err(AuthError::RoleNotFound {
                role: role.to_string(),
            }
            .into());
        }
        self.refresh_locked().await?;
        self.on_auth_admin_change(DomainEvent::RoleDeleted {
            role: role.to_string(),
        });
        Ok(())
    }

    // ----- assignments ----------------------------------------------------------------------

    /// Gives `principal` the role `role` in `scope` (`None`: global). Answers the assignment
    /// and whether it is new (assigning twice is the same assignment).
    pub async fn assign_role(
        &self,
        principal: &str,
        role: &str,
        scope: Option<&str>,
    ) -> Result<(RoleAssignment, bool), AuthServiceError> {
        let assignment = RoleAssignment::parse(principal, role, scope)?;
        let _admin = self.admin.lock().await;
        self.authorizer().roles().check_assign(&assignment)?;
        let created = self.store.insert_assignment(&assignment).await?;
        if created {
            self.refresh_locked().await?;
            self.on_auth_admin_change(DomainEvent::RoleAssigned {
                principal: assignment.principal.to_string(),
                role: assignment.role.to_string(),
                scope: assignment.scope.to_string(),
            });
        }
        Ok((assignment, created))
    }

    /// Takes a role away. A configuration-file assignment is a Conflict; one that does not
    /// exist is NotFound.
    pub async fn revoke_role(
        &self,
        principal: &str,
        role: &str,
        scope: Option<&str>,
    ) -> Result<RoleAssignment, AuthServiceError> {
        let assignment = RoleAssignment::parse(principal, role, scope)?;
        let _admin = self.admin.lock().await;
        let deleted = self.store.delete_assignment(&assignment).await?;
        if deleted {
            self.refresh_locked().await?;
            self.on_auth_admin_change(DomainEvent::RoleRevoked {
                principal: assignment.principal.to_string(),
                role: assignment.role.to_string(),
                scope: assignment.scope.to_string(),
            });
            return Ok(assignment);
        }
        if self.settings.static_assignments.contains(&assignment) {
            return Err(AuthServiceError::StaticAssignment { assignment });
        }
        Err(AuthError::AssignmentNotFound {
            principal: assignment.principal,
            role: assignment.role,
            scope: assignment.scope,
        }
        .into())
    }

    /// Every principal that holds a role (stored or from the configuration) or a key.
    pub async fn list_principals(&self) -> Result<Vec<PrincipalSummary>, AuthServiceError> {
        let mut assignments = self.store.assignments().await?;
        assignments.extend(self.settings.static_assignments.iter().cloned());
        assignments.sort();
        assignments.dedup();
        let keys = self.store.keys().await?;
        Ok(summarize_principals(&assignments, &keys, self.clock.wall()))
    }

    /// The roles `principal` holds, in every scope, sorted by (role, scope).
    pub fn roles_of(&self, principal: &str) -> Result<Vec<HeldRole>, AuthServiceError> {
        let principal = Principal::parse(principal)?;
        let snapshot = self.authorizer();
        Ok(snapshot
            .assignments_of(&principal)
            .iter()
            .map(|(role, scope)| HeldRole {
                role: role.clone(),
                scope: scope.clone(),
                from_config: self.settings.static_assignments.iter().any(|assignment| {
                    assignment.principal == principal
                        && &assignment.role == role
                        && &assignment.scope == scope
                }),
            })
            .collect())
    }

    // ----- policies -------------------------------------------------------------------------

    /// Sets the tool access policy at `{scope}/{target_id}`, replacing any there.
    pub async fn put_policy(
        &self,
        scope: &str,
        target_id: &str,
        allow_list: &[String],
        deny_list: &[String],
    ) -> Result<ToolAccessPolicy, AuthServiceError> {
        let address = PolicyAddress::parse(scope, target_id)?;
        let policy = ToolAccessPolicy::parse(address, allow_list, deny_list)?;
        let _admin = self.admin.lock().await;
        self.store.put_policy(&policy).await?;
        self.refresh_locked().await?;
        self.on_auth_admin_change(DomainEvent::ToolPolicySet {
            policy: policy.address().to_string(),
        });
        Ok(policy)
    }

    pub fn policy(
        &self,
        scope: &str,
        target_id: &str,
    ) -> Result<ToolAccessPolicy, AuthServiceError> {
        let address = PolicyAddress::parse(scope, target_id)?;
        self.authorizer()
            .policy(&address)
            .cloned()
            .ok_or_else(|| AuthError::PolicyNotFound { address }.into())
    }

    pub async fn delete_policy(
        &self,
        scope: &str,
        target_id: &str,
    ) -> Result<(), AuthServiceError> {
        let address = PolicyAddress::parse(scope, target_id)?;
        let _admin = self.admin.lock().await;
        if !self.store.delete_policy(&address).await? {
            return Err(AuthError::PolicyNotFound { address }.into());
        }
        self.refresh_locked().await?;
        self.on_auth_admin_change(DomainEvent::ToolPolicyCleared {
            policy: address.to_string(),
        });
        Ok(())
    }

    /// Every policy, by address.
    pub async fn list_policies(&self) -> Result<Vec<ToolAccessPolicy>, AuthServiceError> {
        Ok(self.store.policies().await?)
    }

    // ----- permissions ----------------------------------------------------------------------

    /// The permission catalogue (`GET /api/auth/permissions`).
    pub fn permissions(&self) -> &'static [PermissionInfo] {
        catalogue()
    }

    /// Whether `principal` holds a role that grants `permission`, in the global scope (tool
    /// policies and the external engine are not consulted: this is about roles).
    pub fn check_permission(
        &self,
        principal: &str,
        permission: &str,
    ) -> Result<PermissionCheckView, AuthServiceError> {
        let principal = Principal::parse(principal)?;
        let permission = Permission::parse(permission)?;
        let PermissionCheck {
            allowed,
            granted_by_role,
        } = self.authorizer().check_permission(&principal, permission);
        Ok(PermissionCheckView {
            principal,
            permission,
            allowed,
            granted_by_role,
        })
    }
}

/// The resource an external policy is asked about: the first address of the path, as
/// `mcp_server/<id>`, `group/<id>` or `tool/<id>__<tool>`.
fn resource_of(path: &AccessPath) -> Option<String> {
    let address = path.addresses().first()?;
    let scope = match address.scope() {
        PolicyScope::Provider => "mcp_server",
        PolicyScope::Group => "group",
        PolicyScope::Tool => "tool",
    };
    Some(format!("{scope}/{}", address.target_id()))
}

/// Why authentication failed, for the log: the domain's reasons, never the credential.
fn failure_reason(error: &AuthError) -> String {
    match error {
        AuthError::InvalidApiKey { reason } => reason.to_string(),
        AuthError::InvalidToken { reason } => reason.to_string(),
        AuthError::InvalidPassword { reason } => reason.to_string(),
        other => other.to_string(),
    }
}

fn hashing_failed(error: crate::passwords::HashingFailed) -> AuthServiceError {
    AuthServiceError::PasswordHashing { message: error.0 }
}

#[cfg(test)]
mod local_user_tests;
