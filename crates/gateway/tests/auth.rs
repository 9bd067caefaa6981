//! The auth use cases of the application layer, through their ports: an in-memory store, a
//! fake clock, a recording event sink, a scripted secret source, a fake token verifier and a
//! fake policy decider.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_core::DomainEvent;
use mcpgw_gateway::authz::{
    ACCESS_DENIED_MESSAGE, AccessPath, AuthError, AuthStore, BuiltInRole, DeciderError, DenyReason,
    INVALID_API_KEY_MESSAGE, Identity, KeyRejection, NO_CREDENTIALS_MESSAGE, Permission,
    PolicyDecider, PolicyInput, Principal, RandomnessError, RoleAssignment, SecretSource, TenantId,
    TokenError, TokenRejection, TokenVerifier, VerifiedClaims,
};
use mcpgw_gateway::config::{AuthConfig, RoleAssignmentConfig};
use mcpgw_gateway::core::{ErrorKind, ServerId, Timestamp};
use mcpgw_gateway::{
    AuthService, AuthServiceError, AuthSettings, CreateKeyRequest, Credentials, LockoutPolicy,
};
use mcpgw_testkit::auth_store::InMemoryAuthStore;
use mcpgw_testkit::clock::FakeClock;
use mcpgw_testkit::fakes::RecordingEventSink;

// ----- fakes ----------------------------------------------------------------------------------

/// Fills buffers with a running byte, so that every key and id differs; can be made to fail.
#[derive(Default)]
struct ScriptedSecrets {
    next: AtomicU8,
    failing: Mutex<bool>,
}

impl SecretSource for ScriptedSecrets {
    fn fill(&self, destination: &mut [u8]) -> Result<(), RandomnessError> {
        if *self.failing.lock().unwrap() {
            return Err(RandomnessError("getrandom: entropy pool closed".to_owned()));
        }
        let start = self.next.fetch_add(1, Ordering::SeqCst);
        for (index, byte) in destination.iter_mut().enumerate() {
            *byte = start.wrapping_mul(31).wrapping_add(index as u8);
        }
        Ok(())
    }
}

/// Answers each token from a table; an unknown token is a bad signature. Counts the tokens it
/// was asked about, with the resource they were presented to.
#[derive(Default)]
struct FakeVerifier {
    answers: Mutex<HashMap<String, Result<VerifiedClaims, TokenError>>>,
    asked: Mutex<Vec<(String, String)>>,
}

impl FakeVerifier {
    fn answer(&self, token: &str, answer: Result<VerifiedClaims, TokenError>) {
        self.answers
            .lock()
            .unwrap()
            .insert(token.to_owned(), answer);
    }
}

#[async_trait]
impl TokenVerifier for FakeVerifier {
    async fn verify(
        &self,
        token: &str,
        resource: &str,
        _now: Timestamp,
    ) -> Result<VerifiedClaims, TokenError> {
        self.asked
            .lock()
            .unwrap()
            .push((token.to_owned(), resource.to_owned()));
        self.answers
            .lock()
            .unwrap()
            .get(token)
            .cloned()
            .unwrap_or(Err(TokenError::Rejected(TokenRejection::BadSignature)))
    }
}

#[derive(Clone)]
enum Verdict {
    Allow,
    Deny,
    Fail,
    Hang,
}

/// Answers every question with the scripted verdict and remembers the questions.
struct FakeDecider {
    verdict: Mutex<Verdict>,
    asked: Mutex<Vec<PolicyInput>>,
}

impl FakeDecider {
    fn new(verdict: Verdict) -> Self {
        Self {
            verdict: Mutex::new(verdict),
            asked: Mutex::new(Vec::new()),
        }
    }
}

#[async_trait]
impl PolicyDecider for FakeDecider {
    async fn decide(&self, input: &PolicyInput) -> Result<bool, DeciderError> {
        self.asked.lock().unwrap().push(input.clone());
        let verdict = self.verdict.lock().unwrap().clone();
        match verdict {
            Verdict::Allow => Ok(true),
            Verdict::Deny => Ok(false),
            Verdict::Fail => Err(DeciderError("connection refused".to_owned())),
            Verdict::Hang => futures::future::pending().await,
        }
    }
}

/// A store that counts key lookups, to prove a locked-out address never reaches it.
struct CountingStore {
    inner: InMemoryAuthStore,
    key_lookups: AtomicUsize,
}

#[async_trait]
impl AuthStore for CountingStore {
    async fn insert_key(
        &self,
        record: &mcpgw_gateway::authz::ApiKeyRecord,
    ) -> Result<(), mcpgw_gateway::authz::StoreError> {
        self.inner.insert_key(record).await
    }
    async fn key_by_hash(
        &self,
        hash: &mcpgw_gateway::authz::KeyHash,
    ) -> Result<Option<mcpgw_gateway::authz::ApiKeyRecord>, mcpgw_gateway::authz::StoreError> {
        self.key_lookups.fetch_add(1, Ordering::SeqCst);
        self.inner.key_by_hash(hash).await
    }
    async fn key_by_id(
        &self,
        id: &mcpgw_gateway::authz::KeyId,
    ) -> Result<Option<mcpgw_gateway::authz::ApiKeyRecord>, mcpgw_gateway::authz::StoreError> {
        self.inner.key_by_id(id).await
    }
    async fn keys(
        &self,
    ) -> Result<Vec<mcpgw_gateway::authz::ApiKeyRecord>, mcpgw_gateway::authz::StoreError> {
        self.inner.keys().await
    }
    async fn revoke_key(
        &self,
        id: &mcpgw_gateway::authz::KeyId,
        at: Timestamp,
    ) -> Result<Option<mcpgw_gateway::authz::ApiKeyRecord>, mcpgw_gateway::authz::StoreError> {
        self.inner.revoke_key(id, at).await
    }
    async fn custom_roles(
        &self,
    ) -> Result<Vec<mcpgw_gateway::authz::Role>, mcpgw_gateway::authz::StoreError> {
        self.inner.custom_roles().await
    }
    async fn insert_custom_role(
        &self,
        role: &mcpgw_gateway::authz::Role,
    ) -> Result<bool, mcpgw_gateway::authz::StoreError> {
        self.inner.insert_custom_role(role).await
    }
    async fn replace_custom_role(
        &self,
        role: &mcpgw_gateway::authz::Role,
    ) -> Result<bool, mcpgw_gateway::authz::StoreError> {
        self.inner.replace_custom_role(role).await
    }
    async fn delete_custom_role(
        &self,
        name: &mcpgw_gateway::authz::RoleName,
    ) -> Result<bool, mcpgw_gateway::authz::StoreError> {
        self.inner.delete_custom_role(name).await
    }
    async fn assignments(&self) -> Result<Vec<RoleAssignment>, mcpgw_gateway::authz::StoreError> {
        self.inner.assignments().await
    }
    async fn insert_assignment(
        &self,
        assignment: &RoleAssignment,
    ) -> Result<bool, mcpgw_gateway::authz::StoreError> {
        self.inner.insert_assignment(assignment).await
    }
    async fn delete_assignment(
        &self,
        assignment: &RoleAssignment,
    ) -> Result<bool, mcpgw_gateway::authz::StoreError> {
        self.inner.delete_assignment(assignment).await
    }
    async fn policies(
        &self,
    ) -> Result<Vec<mcpgw_gateway::authz::ToolAccessPolicy>, mcpgw_gateway::authz::StoreError> {
        self.inner.policies().await
    }
    async fn policy(
        &self,
        address: &mcpgw_gateway::authz::PolicyAddress,
    ) -> Result<Option<mcpgw_gateway::authz::ToolAccessPolicy>, mcpgw_gateway::authz::StoreError>
    {
        self.inner.policy(address).await
    }
    async fn put_policy(
        &self,
        policy: &mcpgw_gateway::authz::ToolAccessPolicy,
    ) -> Result<(), mcpgw_gateway::authz::StoreError> {
        self.inner.put_policy(policy).await
    }
    async fn delete_policy(
        &self,
        address: &mcpgw_gateway::authz::PolicyAddress,
    ) -> Result<bool, mcpgw_gateway::authz::StoreError> {
        self.inner.delete_policy(address).await
    }
}

// ----- the harness ----------------------------------------------------------------------------

struct Harness {
    auth: Arc<AuthService>,
    clock: Arc<FakeClock>,
    store: Arc<CountingStore>,
    events: Arc<RecordingEventSink>,
    secrets: Arc<ScriptedSecrets>,
}

fn enabled() -> AuthSettings {
    AuthSettings {
        enabled: true,
        ..AuthSettings::default()
    }
}

async fn harness_with(
    settings: AuthSettings,
    configure: impl FnOnce(AuthService) -> AuthService,
) -> Harness {
    let clock = Arc::new(FakeClock::new());
    let store = Arc::new(CountingStore {
        inner: InMemoryAuthStore::new(),
        key_lookups: AtomicUsize::new(0),
    });
    let events = Arc::new(RecordingEventSink::default());
    let secrets = Arc::new(ScriptedSecrets::default());
    let auth = configure(AuthService::new(
        settings,
        store.clone(),
        events.clone(),
        clock.clone(),
        secrets.clone(),
    ));
    auth.load().await.unwrap();
    Harness {
        auth: Arc::new(auth),
        clock,
        store,
        events,
        secrets,
    }
}

async fn harness() -> Harness {
    harness_with(enabled(), |auth| auth).await
}

fn key_request(principal: &str, role: Option<&str>, days: Option<i64>) -> CreateKeyRequest {
    CreateKeyRequest {
        principal: principal.to_owned(),
        name: "ci runner".to_owned(),
        role: role.map(str::to_owned),
        expires_in_days: days,
    }
}

impl Harness {
    /// A fresh key for `principal` holding `role` (as the key's role); the raw key.
    async fn key(&self, principal: &str, role: Option<&str>) -> String {
        self.auth
            .create_key(key_request(principal, role, None))
            .await
            .unwrap()
            .raw_key
            .expose()
            .to_owned()
    }

    async fn login(&self, key: &str, client: &str) -> Result<Identity, AuthServiceError> {
        self.auth
            .authenticate(Credentials::api_key(key), Some(ip(client)))
            .await
    }
}

fn ip(raw: &str) -> IpAddr {
    raw.parse().unwrap()
}

fn auth_error(result: Result<Identity, AuthServiceError>) -> AuthError {
    match result {
        Err(AuthServiceError::Auth(error)) => error,
        other => panic!("expected an auth error, got {other:?}"),
    }
}

fn claims(subject: &str, groups: &[&str], tenant: Option<&str>) -> VerifiedClaims {
    VerifiedClaims {
        subject: subject.to_owned(),
        groups: groups.iter().map(|group| (*group).to_owned()).collect(),
        tenant: tenant.map(str::to_owned),
        expires_at: Timestamp::from_unix_micros(i64::MAX),
        scopes: None,
    }
}

fn user(name: &str) -> Identity {
    Identity::new(Principal::parse(&format!("user:{name}")).unwrap())
}

fn server(id: &str) -> ServerId {
    ServerId::parse(id).unwrap()
}

// ----- authentication -------------------------------------------------------------------------

#[tokio::test]
async fn a_valid_key_authenticates_as_its_principal_with_its_role() {
    let h = harness().await;
    let key = h.key("service:ci", Some("developer")).await;
    let identity = h.login(&key, "10.0.0.1").await.unwrap();
    assert_eq!(identity.principal.to_string(), "service:ci");
    assert_eq!(identity.key_role.unwrap().as_str(), "developer");
    // The store was asked once (the key lookup); the key's creation and the success are
    // events, and neither carries the key.
    assert_eq!(h.store.key_lookups.load(Ordering::SeqCst), 1);
    let events = h.events.events();
    let types: Vec<_> = events.iter().map(DomainEvent::event_type).collect();
    assert_eq!(types, ["ApiKeyCreated", "AuthenticationSucceeded"]);
    assert!(matches!(
        &events[1],
        DomainEvent::AuthenticationSucceeded { principal, credential: "api_key", client }
            if principal == "service:ci" && client.as_deref() == Some("10.0.0.1")
    ));
    let json = serde_json::to_string(&events).unwrap();
    assert!(
        !json.contains(&key[4..]),
        "no event carries the key: {json}"
    );
}

#[tokio::test]
async fn failures_denials_and_administration_are_events_without_secrets() {
    let h = harness().await;
    let key = h.key("user:bob", None).await;
    let bad = format!("{}x", &key[..key.len() - 1]);
    assert!(h.login(&bad, "10.0.0.2").await.is_err());
    let identity = h.login(&key, "10.0.0.2").await.unwrap();
    let decision = h
        .auth
        .authorize(&identity, mcpgw_authz::Permission::McpServerDelete, None)
        .await;
    assert!(!decision.is_allowed());
    h.auth
        .assign_role("user:bob", "viewer", None)
        .await
        .unwrap();
    let events = h.events.events();
    let types: Vec<_> = events.iter().map(DomainEvent::event_type).collect();
    assert_eq!(
        types,
        [
            "ApiKeyCreated",
            "AuthenticationFailed",
            "AuthenticationSucceeded",
            "AuthorizationDenied",
            "RoleAssigned"
        ]
    );
    assert!(matches!(
        &events[3],
        DomainEvent::AuthorizationDenied { principal, permission, .. }
            if principal == "user:bob" && permission == "mcp_server:delete"
    ));
    let json = serde_json::to_string(&events).unwrap();
    assert!(
        !json.contains(&key[4..]) && !json.contains(&bad[4..]),
        "{json}"
    );
}

#[tokio::test]
async fn every_key_failure_mode_answers_the_fixed_message_with_its_reason() {
    let h = harness().await;
    let revoked = h
        .auth
        .create_key(key_request("user:bob", None, None))
        .await
        .unwrap();
    h.auth.revoke_key(revoked.record.id.as_str()).await.unwrap();
    let expiring = h
        .auth
        .create_key(key_request("user:eve", None, Some(1)))
        .await
        .unwrap();
    h.clock.advance(Duration::from_secs(86_400));

    // Bad input: nothing at all; a blank header; a key without the `mcp_` prefix.
    for credentials in [
        Credentials::default(),
        Credentials::api_key("   "),
        Credentials::api_key("sk_live_0123456789abcdef0123456789abcdef0123"),
    ] {
        let error = auth_error(h.auth.authenticate(credentials, None).await);
        assert_eq!(error, AuthError::NoCredentials);
        assert_eq!(error.to_string(), NO_CREDENTIALS_MESSAGE);
        assert_eq!(error.kind(), ErrorKind::Unauthenticated);
    }

    let unknown = format!("mcp_{}", "A".repeat(43));
    type Expectation = fn(&KeyRejection) -> bool;
    let table: [(String, Expectation); 4] = [
        ("mcp_short!".to_owned(), |r| *r == KeyRejection::Malformed),
        (unknown, |r| *r == KeyRejection::Unknown),
        (revoked.raw_key.expose().to_owned(), |r| {
            matches!(r, KeyRejection::Revoked { .. })
        }),
        (expiring.raw_key.expose().to_owned(), |r| {
            matches!(r, KeyRejection::Expired { .. })
        }),
    ];
    for (key, expected) in table {
        match auth_error(h.auth.authenticate(Credentials::api_key(&key), None).await) {
            error @ AuthError::InvalidApiKey { reason } => {
                assert!(expected(&reason), "{key}: unexpected reason {reason:?}");
                assert_eq!(error.to_string(), INVALID_API_KEY_MESSAGE);
            }
            other => panic!("{key}: expected Invalid API key, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_revoked_key_is_refused_at_once() {
    let h = harness().await;
    let issued = h
        .auth
        .create_key(key_request("user:ann", Some("viewer"), None))
        .await
        .unwrap();
    let key = issued.raw_key.expose().to_owned();
    h.login(&key, "10.0.0.2").await.unwrap();
    h.auth.revoke_key(issued.record.id.as_str()).await.unwrap();
    let error = auth_error(h.login(&key, "10.0.0.2").await);
    assert!(matches!(
        error,
        AuthError::InvalidApiKey {
            reason: KeyRejection::Revoked { .. }
        }
    ));
}

#[tokio::test]
async fn api_keys_can_be_turned_off() {
    let h = harness_with(
        AuthSettings {
            api_key_enabled: false,
            ..enabled()
        },
        |auth| auth,
    )
    .await;
    let key = h.key("user:ann", Some("admin")).await;
    // With keys off, a key is no credential at all.
    assert_eq!(
        auth_error(h.login(&key, "10.0.0.3").await),
        AuthError::NoCredentials
    );
}

#[tokio::test]
async fn bearer_tokens_go_through_the_verifier() {
    let verifier = Arc::new(FakeVerifier::default());
    verifier.answer("good", Ok(claims("alice", &["ops"], Some("acme"))));
    verifier.answer(
        "expired",
        Err(TokenError::Rejected(TokenRejection::Expired)),
    );
    verifier.answer(
        "down",
        Err(TokenError::Unavailable("jwks: timed out".to_owned())),
    );
    verifier.answer("bad-subject", Ok(claims("", &[], None)));
    let h = harness_with(enabled(), |auth| auth.with_token_verifier(verifier.clone())).await;

    let identity = h
        .auth
        .authenticate(Credentials::bearer("good"), None)
        .await
        .unwrap();
    assert_eq!(identity.principal.to_string(), "user:alice");
    assert_eq!(identity.groups[0].to_string(), "group:ops");
    assert_eq!(identity.tenant.unwrap().as_str(), "acme");

    let expired = auth_error(
        h.auth
            .authenticate(Credentials::bearer("expired"), None)
            .await,
    );
    assert_eq!(
        expired,
        AuthError::InvalidToken {
            reason: TokenRejection::Expired
        }
    );
    assert_eq!(expired.to_string(), NO_CREDENTIALS_MESSAGE);
    // A token the fake does not know: bad signature.
    let forged = auth_error(
        h.auth
            .authenticate(Credentials::bearer("forged"), None)
            .await,
    );
    assert_eq!(forged.kind(), ErrorKind::Unauthenticated);
    // A subject that names no principal.
    let bad = auth_error(
        h.auth
            .authenticate(Credentials::bearer("bad-subject"), None)
            .await,
    );
    assert!(matches!(
        bad,
        AuthError::InvalidToken {
            reason: TokenRejection::InvalidClaim(_)
        }
    ));
    // The verifier cannot decide: 503, the token is not blamed.
    let down = auth_error(h.auth.authenticate(Credentials::bearer("down"), None).await);
    assert_eq!(down.kind(), ErrorKind::Unavailable);
}

#[tokio::test]
async fn a_bearer_token_without_a_verifier_is_no_credential() {
    let h = harness().await;
    let error = auth_error(
        h.auth
            .authenticate(Credentials::bearer("eyJhbGciOi"), None)
            .await,
    );
    assert_eq!(error, AuthError::NoCredentials);
}

#[tokio::test]
async fn anonymous_access_is_user_anonymous_with_only_its_own_roles() {
    let h = harness_with(
        AuthSettings {
            allow_anonymous: true,
            ..enabled()
        },
        |auth| auth,
    )
    .await;
    let identity = h
        .auth
        .authenticate(Credentials::default(), None)
        .await
        .unwrap();
    assert!(identity.principal.is_anonymous());
    assert!(
        !h.auth
            .authorize(&identity, Permission::McpServerList, None)
            .await
            .is_allowed()
    );
    h.auth
        .assign_role("user:anonymous", "viewer", None)
        .await
        .unwrap();
    assert!(
        h.auth
            .authorize(&identity, Permission::McpServerList, None)
            .await
            .is_allowed()
    );
    assert!(
        !h.auth
            .authorize(&identity, Permission::McpServerStart, None)
            .await
            .is_allowed()
    );
    // A wrong key is still refused: anonymous access does not excuse a bad credential.
    let wrong = format!("mcp_{}", "B".repeat(43));
    assert_eq!(
        auth_error(h.auth.authenticate(Credentials::api_key(wrong), None).await).kind(),
        ErrorKind::Unauthenticated
    );
}

#[tokio::test]
async fn with_auth_disabled_everything_is_allowed() {
    let h = harness_with(AuthSettings::default(), |auth| {
        auth.with_policy_decider(Arc::new(FakeDecider::new(Verdict::Deny)))
    })
    .await;
    h.auth
        .put_policy("provider", "math", &[], &["*".to_owned()])
        .await
        .unwrap();
    // Even a garbage credential is fine: nothing is checked.
    let identity = h
        .auth
        .authenticate(Credentials::api_key("garbage"), Some(ip("10.0.0.9")))
        .await
        .unwrap();
    let path = AccessPath::server_tool(&server("math"), "add").unwrap();
    for permission in Permission::ALL {
        assert!(
            h.auth
                .authorize(&identity, permission, Some(&path))
                .await
                .is_allowed()
        );
    }
    assert!(h.auth.admits_tool(&identity, &path));
    assert_eq!(h.store.key_lookups.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn settings_come_from_the_auth_section() {
    let config = AuthConfig {
        enabled: true,
        allow_anonymous: true,
        role_assignments: vec![RoleAssignmentConfig {
            principal: "group:ops".to_owned(),
            role: "operator".to_owned(),
            scope: "tenant:acme".to_owned(),
        }],
        ..AuthConfig::default()
    };
    let settings = AuthSettings::from_config(&config).unwrap();
    assert!(settings.enabled && settings.allow_anonymous && settings.api_key_enabled);
    assert_eq!(settings.api_key_header, "X-API-Key");
    assert_eq!(
        settings.static_assignments[0].scope.to_string(),
        "tenant:acme"
    );
    assert_eq!(settings.lockout, LockoutPolicy::default());
    // Bad input: a principal without a kind.
    let broken = AuthConfig {
        role_assignments: vec![RoleAssignmentConfig {
            principal: "ops".to_owned(),
            role: "operator".to_owned(),
            scope: "global".to_owned(),
        }],
        ..AuthConfig::default()
    };
    assert_eq!(
        AuthSettings::from_config(&broken).unwrap_err().kind(),
        ErrorKind::Invalid
    );
}

#[tokio::test]
async fn credentials_never_show_their_secret_in_debug_output() {
    let credentials = Credentials {
        api_key: Some("mcp_supersecret".to_owned()),
        bearer: Some("eyJtoken".to_owned()),
        resource: Some("http://127.0.0.1:8000/mcp".to_owned()),
    };
    let shown = format!("{credentials:?}");
    assert!(
        !shown.contains("supersecret") && !shown.contains("eyJtoken"),
        "{shown}"
    );
}

// ----- lockout --------------------------------------------------------------------------------

fn lockout_settings() -> AuthSettings {
    AuthSettings {
        lockout: LockoutPolicy {
            max_failures: 3,
            window: Duration::from_secs(60),
            lock_duration: Duration::from_secs(60),
            max_lock_duration: Duration::from_secs(200),
            max_tracked_addresses: 100,
        },
        ..enabled()
    }
}

fn wrong_key() -> String {
    format!("mcp_{}", "W".repeat(43))
}

async fn fail(h: &Harness, client: &str, times: usize) {
    for _ in 0..times {
        let error = h.login(&wrong_key(), client).await.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Unauthenticated, "{error}");
    }
}

fn retry_after(result: Result<Identity, AuthServiceError>) -> u64 {
    match result {
        Err(error @ AuthServiceError::LockedOut { .. }) => {
            assert_eq!(error.kind(), ErrorKind::RateLimited);
            error.retry_after_secs().unwrap()
        }
        other => panic!("expected a lockout, got {other:?}"),
    }
}

#[tokio::test]
async fn failures_lock_out_one_address_without_touching_the_store() {
    let h = harness_with(lockout_settings(), |auth| auth).await;
    let good = h.key("user:ann", Some("viewer")).await;
    fail(&h, "192.0.2.1", 3).await;
    let lookups = h.store.key_lookups.load(Ordering::SeqCst);

    // Even the valid key is refused from the locked address, and the store is not asked.
    assert_eq!(retry_after(h.login(&good, "192.0.2.1").await), 60);
    assert_eq!(retry_after(h.login(&wrong_key(), "192.0.2.1").await), 60);
    assert_eq!(h.store.key_lookups.load(Ordering::SeqCst), lookups);

    // Another address is unaffected.
    h.login(&good, "192.0.2.2").await.unwrap();

    // Retry-After counts down, rounded up.
    h.clock.advance(Duration::from_millis(59_500));
    assert_eq!(retry_after(h.login(&good, "192.0.2.1").await), 1);
    h.clock.advance(Duration::from_millis(500));
    h.login(&good, "192.0.2.1").await.unwrap();
}

#[tokio::test]
async fn failures_spread_beyond_the_window_do_not_lock() {
    let h = harness_with(lockout_settings(), |auth| auth).await;
    let good = h.key("user:ann", None).await;
    fail(&h, "192.0.2.3", 2).await;
    h.clock.advance(Duration::from_secs(61));
    fail(&h, "192.0.2.3", 2).await;
    h.login(&good, "192.0.2.3").await.unwrap();
}

#[tokio::test]
async fn repeated_lockouts_double_up_to_the_maximum() {
    let h = harness_with(lockout_settings(), |auth| auth).await;
    let mut lengths = Vec::new();
    for _ in 0..4 {
        fail(&h, "198.51.100.7", 3).await;
        let length = retry_after(h.login(&wrong_key(), "198.51.100.7").await);
        lengths.push(length);
        h.clock.advance(Duration::from_secs(length));
    }
    assert_eq!(lengths, [60, 120, 200, 200]);
    // A long quiet spell forgives the history: the next lockout is short again.
    h.clock.advance(Duration::from_secs(200));
    fail(&h, "198.51.100.7", 3).await;
    assert_eq!(retry_after(h.login(&wrong_key(), "198.51.100.7").await), 60);
}

#[tokio::test]
async fn success_does_not_lift_a_lock_and_outages_do_not_count() {
    let verifier = Arc::new(FakeVerifier::default());
    verifier.answer(
        "down",
        Err(TokenError::Unavailable("jwks unreachable".to_owned())),
    );
    let h = harness_with(lockout_settings(), |auth| {
        auth.with_token_verifier(verifier)
    })
    .await;
    let good = h.key("user:ann", None).await;
    // Requests without credentials and verifier outages are not guesses.
    for _ in 0..5 {
        h.auth
            .authenticate(Credentials::default(), Some(ip("203.0.113.5")))
            .await
            .unwrap_err();
        h.auth
            .authenticate(Credentials::bearer("down"), Some(ip("203.0.113.5")))
            .await
            .unwrap_err();
    }
    h.login(&good, "203.0.113.5").await.unwrap();
    // Rejected tokens count like rejected keys.
    for _ in 0..3 {
        h.auth
            .authenticate(Credentials::bearer("forged"), Some(ip("203.0.113.5")))
            .await
            .unwrap_err();
    }
    retry_after(h.login(&good, "203.0.113.5").await);
    h.clock.advance(Duration::from_secs(30));
    retry_after(h.login(&good, "203.0.113.5").await);
}

#[tokio::test]
async fn ipv6_clients_are_locked_by_their_64_network() {
    let h = harness_with(lockout_settings(), |auth| auth).await;
    let good = h.key("user:ann", None).await;
    fail(&h, "2001:db8:1:2::1", 1).await;
    fail(&h, "2001:db8:1:2::2", 1).await;
    fail(&h, "2001:db8:1:2:ffff::9", 1).await;
    retry_after(h.login(&good, "2001:db8:1:2::77").await);
    h.login(&good, "2001:db8:1:3::1").await.unwrap();
}

#[tokio::test]
async fn the_lockout_table_stays_bounded() {
    let mut settings = lockout_settings();
    settings.lockout.max_tracked_addresses = 8;
    let h = harness_with(settings, |auth| auth).await;
    fail(&h, "10.1.0.1", 3).await; // locked: kept as long as possible
    for host in 0..50 {
        fail(&h, &format!("10.2.0.{host}"), 1).await;
    }
    assert!(h.auth.tracked_addresses() <= 8);
    retry_after(h.login(&wrong_key(), "10.1.0.1").await);
}

// ----- authorization --------------------------------------------------------------------------

#[tokio::test]
async fn built_in_roles_grant_their_documented_permissions() {
    let h = harness().await;
    use Permission::*;
    let table: [(BuiltInRole, &[Permission], &[Permission]); 6] = [
        (
            BuiltInRole::Admin,
            &[AuthManage, McpServerDelete, ConfigReload],
            &[],
        ),
        (
            BuiltInRole::McpServerAdmin,
            &[McpServerCreate, McpServerDelete, ToolInvoke, ToolList],
            &[AuthManage, ConfigReload, GroupCreate],
        ),
        (
            BuiltInRole::Developer,
            &[McpServerList, McpServerRead, McpServerStart, ToolInvoke],
            &[McpServerStop, McpServerDelete, AuthRead],
        ),
        (
            BuiltInRole::Viewer,
            &[McpServerList, McpServerRead, ToolList, MetricsRead],
            &[ToolInvoke, McpServerStart, ConfigRead],
        ),
        (
            BuiltInRole::Auditor,
            &[AuditRead, EventsRead, MetricsRead],
            &[McpServerList, ToolInvoke],
        ),
        (
            BuiltInRole::Operator,
            &[
                McpServerStart,
                McpServerStop,
                ConfigReload,
                GroupCreate,
                GroupRebalance,
            ],
            &[McpServerDelete, ToolInvoke, AuthManage],
        ),
    ];
    for (role, allowed, denied) in table {
        let principal = format!("user:{}", role.name());
        h.auth
            .assign_role(&principal, role.name(), None)
            .await
            .unwrap();
        let identity = Identity::new(Principal::parse(&principal).unwrap());
        for permission in allowed {
            let decision = h.auth.authorize(&identity, *permission, None).await;
            assert_eq!(
                decision.into_result().unwrap().as_str(),
                role.name(),
                "{role} should grant {permission}"
            );
        }
        for permission in denied {
            let error = h
                .auth
                .authorize(&identity, *permission, None)
                .await
                .into_result();
            let error = error.expect_err(&format!("{role} must not grant {permission}"));
            assert_eq!(error.to_string(), ACCESS_DENIED_MESSAGE);
        }
    }
}

#[tokio::test]
async fn a_key_role_and_group_assignments_count() {
    let verifier = Arc::new(FakeVerifier::default());
    verifier.answer("ops", Ok(claims("carol", &["ops"], None)));
    let h = harness_with(enabled(), |auth| auth.with_token_verifier(verifier)).await;
    h.auth
        .assign_role("group:ops", "operator", None)
        .await
        .unwrap();
    let carol = h
        .auth
        .authenticate(Credentials::bearer("ops"), None)
        .await
        .unwrap();
    assert!(
        h.auth
            .authorize(&carol, Permission::McpServerStop, None)
            .await
            .is_allowed()
    );

    let key = h.key("service:ci", Some("viewer")).await;
    let ci = h.login(&key, "10.0.0.4").await.unwrap();
    assert!(
        h.auth
            .authorize(&ci, Permission::McpServerList, None)
            .await
            .is_allowed()
    );
    assert!(
        !h.auth
            .authorize(&ci, Permission::McpServerStart, None)
            .await
            .is_allowed()
    );
}

#[tokio::test]
async fn a_tenant_assignment_applies_within_its_tenant_only() {
    let h = harness().await;
    h.auth
        .assign_role("user:dana", "developer", Some("tenant:acme"))
        .await
        .unwrap();
    let acme = user("dana").in_tenant(TenantId::parse("acme").unwrap());
    let other = user("dana").in_tenant(TenantId::parse("globex").unwrap());
    assert!(
        h.auth
            .authorize(&acme, Permission::ToolInvoke, None)
            .await
            .is_allowed()
    );
    match h
        .auth
        .authorize(&other, Permission::ToolInvoke, None)
        .await
        .into_result()
    {
        Err(AuthError::AccessDenied {
            reason:
                DenyReason::NotGranted {
                    roles_in_other_tenants,
                    ..
                },
        }) => assert_eq!(roles_in_other_tenants.len(), 1),
        other => panic!("expected a tenant deny, got {other:?}"),
    }
    assert!(
        !h.auth
            .authorize(&user("dana"), Permission::ToolInvoke, None)
            .await
            .is_allowed()
    );
}

#[tokio::test]
async fn tool_policies_filter_tools_and_deny_calls() {
    let h = harness().await;
    h.auth
        .assign_role("group:staff", "developer", None)
        .await
        .unwrap();
    h.auth
        .put_policy("tool", "math__divide", &["user:alice".to_owned()], &[])
        .await
        .unwrap();
    h.auth
        .put_policy("mcp_server", "math", &[], &["user:mallory".to_owned()])
        .await
        .unwrap();
    let staff = Principal::group("staff").unwrap();
    let alice = user("alice").with_groups(vec![staff.clone()]);
    let bob = user("bob").with_groups(vec![staff.clone()]);
    let mallory = user("mallory").with_groups(vec![staff]);
    let add = AccessPath::server_tool(&server("math"), "add").unwrap();
    let divide = AccessPath::server_tool(&server("math"), "divide").unwrap();

    assert!(h.auth.admits_tool(&alice, &divide) && h.auth.admits_tool(&bob, &add));
    assert!(!h.auth.admits_tool(&bob, &divide));
    assert!(!h.auth.admits_tool(&mallory, &add));
    assert!(
        h.auth
            .authorize(&alice, Permission::ToolInvoke, Some(&divide))
            .await
            .is_allowed()
    );
    assert!(matches!(
        h.auth
            .authorize(&bob, Permission::ToolInvoke, Some(&divide))
            .await,
        mcpgw_gateway::authz::Decision::Deny {
            reason: DenyReason::NotInAllowList { .. }
        }
    ));
    assert!(matches!(
        h.auth
            .authorize(&mallory, Permission::ToolInvoke, Some(&add))
            .await,
        mcpgw_gateway::authz::Decision::Deny {
            reason: DenyReason::DeniedByPolicy { .. }
        }
    ));
    // Clearing the policy takes effect at once.
    h.auth.delete_policy("tool", "math__divide").await.unwrap();
    assert!(h.auth.admits_tool(&bob, &divide));
}

#[tokio::test]
async fn the_external_decider_can_only_take_away() {
    let decider = Arc::new(FakeDecider::new(Verdict::Allow));
    let h = harness_with(enabled(), |auth| auth.with_policy_decider(decider.clone())).await;
    h.auth
        .assign_role("user:alice", "developer", None)
        .await
        .unwrap();
    let alice = user("alice");
    let path = AccessPath::server_tool(&server("math"), "add").unwrap();

    assert!(
        h.auth
            .authorize(&alice, Permission::ToolInvoke, Some(&path))
            .await
            .is_allowed()
    );
    let asked = decider.asked.lock().unwrap().last().cloned().unwrap();
    assert_eq!(asked.action, Permission::ToolInvoke);
    assert_eq!(asked.resource.as_deref(), Some("tool/math__add"));
    assert_eq!(asked.principal.to_string(), "user:alice");

    for (verdict, detail) in [
        (Verdict::Deny, "deny"),
        (Verdict::Fail, "connection refused"),
    ] {
        *decider.verdict.lock().unwrap() = verdict;
        match h
            .auth
            .authorize(&alice, Permission::ToolInvoke, Some(&path))
            .await
        {
            mcpgw_gateway::authz::Decision::Deny {
                reason: DenyReason::ExternalPolicy { detail: got, .. },
            } => assert!(got.contains(detail), "{got}"),
            other => panic!("expected an external deny, got {other:?}"),
        }
    }
    // What the gateway denies is never put to the engine.
    *decider.verdict.lock().unwrap() = Verdict::Allow;
    let before = decider.asked.lock().unwrap().len();
    assert!(
        !h.auth
            .authorize(&alice, Permission::AuthManage, None)
            .await
            .is_allowed()
    );
    assert_eq!(decider.asked.lock().unwrap().len(), before);
}

#[tokio::test]
async fn a_decider_that_never_answers_denies_after_the_deadline() {
    let decider = Arc::new(FakeDecider::new(Verdict::Hang));
    let h = harness_with(enabled(), |auth| auth.with_policy_decider(decider)).await;
    h.auth
        .assign_role("user:alice", "viewer", None)
        .await
        .unwrap();
    let pending = {
        let auth = h.auth.clone();
        tokio::spawn(async move {
            auth.authorize(&user("alice"), Permission::McpServerList, None)
                .await
        })
    };
    while h.clock.sleepers() == 0 {
        tokio::task::yield_now().await;
    }
    h.clock.advance(mcpgw_gateway::POLICY_DECIDER_DEADLINE);
    match pending.await.unwrap() {
        mcpgw_gateway::authz::Decision::Deny {
            reason: DenyReason::ExternalPolicy { detail, .. },
        } => assert!(detail.contains("no answer"), "{detail}"),
        other => panic!("expected a deny on timeout, got {other:?}"),
    }
}

// ----- administration -------------------------------------------------------------------------

#[tokio::test]
async fn keys_are_created_listed_and_revoked() {
    let h = harness().await;
    let issued = h
        .auth
        .create_key(key_request("user:ann", Some("viewer"), Some(30)))
        .await
        .unwrap();
    let raw = issued.raw_key.expose().to_owned();
    assert!(raw.starts_with("mcp_") && raw.len() == 47, "{raw}");
    let listed = h.auth.list_keys().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].status, "active");
    assert_eq!(listed[0].prefix, &raw[..12]);
    let json = serde_json::to_string(&listed).unwrap();
    assert!(
        !json.contains(&raw) && !json.contains(&issued.record.hash.to_hex()),
        "{json}"
    );

    let revoked = h.auth.revoke_key(issued.record.id.as_str()).await.unwrap();
    assert_eq!(revoked.status, "revoked");
    // Bad input: an id that does not exist, and one that cannot be an id.
    for id in ["key_0000000000000000", "../etc/passwd"] {
        let error = h.auth.revoke_key(id).await.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::NotFound, "{id}");
    }
    // Bad input: no name, an unknown role, an expiry out of range, a bad principal.
    let bad = [
        CreateKeyRequest {
            name: " ".to_owned(),
            ..key_request("user:a", None, None)
        },
        key_request("user:a", Some("wizard"), None),
        key_request("user:a", None, Some(0)),
        key_request("alice", None, None),
    ];
    let kinds: Vec<ErrorKind> = {
        let mut kinds = Vec::new();
        for request in bad {
            kinds.push(h.auth.create_key(request).await.unwrap_err().kind());
        }
        kinds
    };
    assert_eq!(
        kinds,
        [
            ErrorKind::Invalid,
            ErrorKind::NotFound,
            ErrorKind::Invalid,
            ErrorKind::Invalid
        ]
    );
}

#[tokio::test]
async fn key_creation_fails_cleanly_without_randomness_or_storage() {
    let h = harness().await;
    *h.secrets.failing.lock().unwrap() = true;
    let error = h
        .auth
        .create_key(key_request("user:a", None, None))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Internal);
    *h.secrets.failing.lock().unwrap() = false;
    h.store.inner.fail_next_write("disk full");
    let error = h
        .auth
        .create_key(key_request("user:a", None, None))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Internal);
    assert!(h.auth.list_keys().await.unwrap().is_empty());
}

#[tokio::test]
async fn custom_roles_are_created_changed_and_deleted() {
    let h = harness().await;
    let perms = |list: &[&str]| list.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>();
    let role = h
        .auth
        .create_role(
            "deployer",
            Some("ships things"),
            &perms(&["mcp_server:start"]),
        )
        .await
        .unwrap();
    assert_eq!(role.name().as_str(), "deployer");
    assert_eq!(h.auth.list_custom_roles().len(), 1);
    assert_eq!(h.auth.list_all_roles().len(), 7);
    h.auth
        .assign_role("user:ann", "deployer", None)
        .await
        .unwrap();
    let ann = user("ann");
    assert!(
        h.auth
            .authorize(&ann, Permission::McpServerStart, None)
            .await
            .is_allowed()
    );
    assert!(
        !h.auth
            .authorize(&ann, Permission::McpServerStop, None)
            .await
            .is_allowed()
    );

    // A PATCH takes effect in the snapshot at once.
    h.auth
        .update_role("deployer", None, Some(&perms(&["mcp_server:*"])))
        .await
        .unwrap();
    assert!(
        h.auth
            .authorize(&ann, Permission::McpServerStop, None)
            .await
            .is_allowed()
    );
    assert_eq!(
        h.auth.role("deployer").unwrap().description(),
        "ships things"
    );

    let errors = [
        h.auth.create_role("deployer", None, &[]).await.unwrap_err(),
        h.auth.create_role("admin", None, &[]).await.unwrap_err(),
        h.auth
            .create_role("x", None, &perms(&["mcp_server:fly"]))
            .await
            .unwrap_err(),
        h.auth
            .update_role("viewer", Some("mine"), None)
            .await
            .unwrap_err(),
        h.auth
            .update_role("ghost", Some("mine"), None)
            .await
            .unwrap_err(),
        h.auth.delete_role("deployer").await.unwrap_err(),
        h.auth.delete_role("admin").await.unwrap_err(),
        h.auth.delete_role("ghost").await.unwrap_err(),
    ];
    let kinds: Vec<ErrorKind> = errors.iter().map(AuthServiceError::kind).collect();
    use ErrorKind::*;
    assert_eq!(
        kinds,
        [
            Conflict, Conflict, Invalid, Conflict, NotFound, Conflict, Conflict, NotFound
        ]
    );

    h.auth
        .revoke_role("user:ann", "deployer", None)
        .await
        .unwrap();
    h.auth.delete_role("deployer").await.unwrap();
    assert_eq!(h.auth.role("deployer").unwrap_err().kind(), NotFound);
    assert!(
        !h.auth
            .authorize(&ann, Permission::McpServerStart, None)
            .await
            .is_allowed()
    );
}

#[tokio::test]
async fn assignments_are_made_listed_and_revoked() {
    let settings = AuthSettings {
        static_assignments: vec![RoleAssignment::parse("user:root", "admin", None).unwrap()],
        ..enabled()
    };
    let h = harness_with(settings, |auth| auth).await;
    let (assignment, created) = h
        .auth
        .assign_role("user:ann", "viewer", Some("tenant:acme"))
        .await
        .unwrap();
    assert!(created);
    assert_eq!(assignment.scope.to_string(), "tenant:acme");
    assert!(
        !h.auth
            .assign_role("user:ann", "viewer", Some("tenant:acme"))
            .await
            .unwrap()
            .1
    );
    h.key("service:ci", None).await;

    let principals: Vec<String> = h
        .auth
        .list_principals()
        .await
        .unwrap()
        .iter()
        .map(|summary| summary.principal.to_string())
        .collect();
    assert_eq!(principals, ["service:ci", "user:ann", "user:root"]);

    let held = h.auth.roles_of("user:root").unwrap();
    assert_eq!(held.len(), 1);
    assert!(held[0].from_config);
    assert!(!h.auth.roles_of("user:ann").unwrap()[0].from_config);

    // The static assignment is in force but cannot be revoked.
    assert!(
        h.auth
            .check_permission("user:root", "auth:manage")
            .unwrap()
            .allowed
    );
    let error = h
        .auth
        .revoke_role("user:root", "admin", None)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Conflict);
    assert!(
        error.to_string().contains("auth.role_assignments"),
        "{error}"
    );
    // An assignment that does not exist is NotFound; bad input is Invalid.
    assert_eq!(
        h.auth
            .revoke_role("user:ann", "viewer", None)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        h.auth
            .assign_role("user:ann", "wizard", None)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        h.auth
            .assign_role("ann", "viewer", None)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Invalid
    );
    assert_eq!(
        h.auth
            .assign_role("user:ann", "viewer", Some("galaxy"))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Invalid
    );
    h.auth
        .revoke_role("user:ann", "viewer", Some("tenant:acme"))
        .await
        .unwrap();
    assert!(h.auth.roles_of("user:ann").unwrap().is_empty());
    assert_eq!(
        h.auth.roles_of("nobody").unwrap_err().kind(),
        ErrorKind::Invalid
    );
}

#[tokio::test]
async fn a_role_named_by_a_static_assignment_cannot_be_deleted() {
    let store = Arc::new(InMemoryAuthStore::new());
    let role = mcpgw_gateway::authz::Role::parse_custom("deployer", None, &[]).unwrap();
    store.insert_custom_role(&role).await.unwrap();
    let settings = AuthSettings {
        static_assignments: vec![RoleAssignment::parse("user:ci", "deployer", None).unwrap()],
        ..enabled()
    };
    let auth = AuthService::new(
        settings,
        store,
        Arc::new(RecordingEventSink::default()),
        Arc::new(FakeClock::new()),
        Arc::new(ScriptedSecrets::default()),
    );
    auth.load().await.unwrap();
    assert_eq!(
        auth.delete_role("deployer").await.unwrap_err().kind(),
        ErrorKind::Conflict
    );
}

#[tokio::test]
async fn policies_are_set_read_listed_and_cleared() {
    let h = harness().await;
    let policy = h
        .auth
        .put_policy("mcp_server", "math", &["group:ops".to_owned()], &[])
        .await
        .unwrap();
    assert_eq!(policy.address().to_string(), "provider/math");
    assert_eq!(
        h.auth.policy("provider", "math").unwrap().allow_list()[0].to_string(),
        "group:ops"
    );
    assert_eq!(h.auth.list_policies().await.unwrap().len(), 1);
    // Replacing keeps one policy at the address.
    h.auth
        .put_policy("provider", "math", &[], &["*".to_owned()])
        .await
        .unwrap();
    assert_eq!(h.auth.list_policies().await.unwrap().len(), 1);
    h.auth.delete_policy("provider", "math").await.unwrap();

    // Bad input: an unknown scope, a tool without `__`, a bad pattern; absent policies.
    let kinds = [
        h.auth
            .put_policy("planet", "math", &[], &[])
            .await
            .unwrap_err()
            .kind(),
        h.auth
            .put_policy("tool", "math", &[], &[])
            .await
            .unwrap_err()
            .kind(),
        h.auth
            .put_policy("group", "g1", &["robot:x".to_owned()], &[])
            .await
            .unwrap_err()
            .kind(),
        h.auth.policy("provider", "math").unwrap_err().kind(),
        h.auth
            .delete_policy("provider", "math")
            .await
            .unwrap_err()
            .kind(),
    ];
    use ErrorKind::*;
    assert_eq!(kinds, [Invalid, Invalid, Invalid, NotFound, NotFound]);
}

#[tokio::test]
async fn permission_checks_and_the_catalogue() {
    let h = harness().await;
    assert_eq!(h.auth.permissions().len(), Permission::ALL.len());
    h.auth
        .assign_role("user:vic", "viewer", None)
        .await
        .unwrap();
    let check = h.auth.check_permission("user:vic", "tool:list").unwrap();
    assert!(check.allowed);
    assert_eq!(check.granted_by_role.unwrap().as_str(), "viewer");
    let denied = h.auth.check_permission("user:vic", "tool:invoke").unwrap();
    assert!(!denied.allowed && denied.granted_by_role.is_none());
    let json = serde_json::to_value(&denied).unwrap();
    assert_eq!(json["permission"], "tool:invoke");
    assert_eq!(json["principal"], "user:vic");
    // Bad input: an unknown permission, an unparsable principal.
    assert_eq!(
        h.auth
            .check_permission("user:vic", "tool:fly")
            .unwrap_err()
            .kind(),
        ErrorKind::Invalid
    );
    assert_eq!(
        h.auth
            .check_permission("vic", "tool:list")
            .unwrap_err()
            .kind(),
        ErrorKind::Invalid
    );
}

#[tokio::test]
async fn a_failed_write_leaves_the_snapshot_as_it_was() {
    let h = harness().await;
    h.auth
        .assign_role("user:ann", "viewer", None)
        .await
        .unwrap();
    h.store.inner.fail_next_write("disk full");
    let error = h
        .auth
        .assign_role("user:bob", "viewer", None)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Internal);
    assert!(
        h.auth
            .authorize(&user("ann"), Permission::ToolList, None)
            .await
            .is_allowed()
    );
    assert!(
        !h.auth
            .authorize(&user("bob"), Permission::ToolList, None)
            .await
            .is_allowed()
    );
}

#[tokio::test]
async fn a_token_is_verified_once_a_minute_per_resource_and_a_refused_one_every_time() {
    let verifier = Arc::new(FakeVerifier::default());
    let mut soon = claims("alice", &[], None);
    let h = harness_with(enabled(), |auth| auth.with_token_verifier(verifier.clone())).await;
    let now = mcpgw_core::Clock::wall(h.clock.as_ref()).unix_micros();
    soon.expires_at = Timestamp::from_unix_micros(now + 150_000_000);
    verifier.answer("good", Ok(soon));
    let asked = || verifier.asked.lock().unwrap().len();
    let present = |token: &str, resource: &str| Credentials::bearer(token).presented_to(resource);

    for _ in 0..3 {
        let identity = h
            .auth
            .authenticate(present("good", "http://gw/mcp"), None)
            .await
            .unwrap();
        assert_eq!(identity.principal.to_string(), "user:alice");
    }
    assert_eq!(asked(), 1, "the same token is verified once");
    // The resource the token is presented to is part of what was verified.
    h.auth
        .authenticate(present("good", "http://other/mcp"), None)
        .await
        .unwrap();
    assert_eq!(verifier.asked.lock().unwrap()[1].1, "http://other/mcp");
    assert_eq!(asked(), 2);
    // A minute later the verifier is asked again (a withdrawn key takes effect).
    h.clock.advance(Duration::from_secs(61));
    h.auth
        .authenticate(present("good", "http://gw/mcp"), None)
        .await
        .unwrap();
    assert_eq!(asked(), 3);
    // Once the token expired, the cache no longer answers for it: the verifier decides.
    h.clock.advance(Duration::from_secs(90));
    verifier.answer("good", Err(TokenError::Rejected(TokenRejection::Expired)));
    assert_eq!(
        auth_error(
            h.auth
                .authenticate(present("good", "http://gw/mcp"), None)
                .await
        ),
        AuthError::InvalidToken {
            reason: TokenRejection::Expired
        }
    );
    assert_eq!(asked(), 4);
    // Bad input: a forged token is refused, and asked about, every time.
    for expected in [5, 6] {
        let _ = h
            .auth
            .authenticate(present("forged", "http://gw/mcp"), None)
            .await;
        assert_eq!(asked(), expected);
    }
}
