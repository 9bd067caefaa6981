//! Local users through [`AuthService`]: signing in with a password under the lockout, one
//! answer for every refusal, disabled users, and the management use cases. The ports are the
//! test kit's fakes; hashes are made at the cheapest argon2id cost so that the tests stay fast
//! in debug builds (one test makes a hash at the recommended cost, to show it is the default).

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use async_trait::async_trait;
use mcpgw_authz::{INVALID_PASSWORD_MESSAGE, RandomnessError, StoreError};
use mcpgw_core::DomainEvent;
use mcpgw_testkit::auth_store::InMemoryAuthStore;
use mcpgw_testkit::clock::FakeClock;
use mcpgw_testkit::fakes::RecordingEventSink;
use mcpgw_testkit::user_store::InMemoryUserStore;

use super::*;

const PASSWORD: &str = "correct horse battery staple";

/// Fills buffers with a running byte; can be made to fail.
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

/// The in-memory user store, counting the reads of one user: a sign-in that reads nobody
/// hashed nothing either.
#[derive(Default)]
struct CountingUsers {
    inner: InMemoryUserStore,
    reads: AtomicUsize,
}

#[async_trait]
impl UserStore for CountingUsers {
    async fn insert_user(&self, user: &LocalUser) -> Result<bool, StoreError> {
        self.inner.insert_user(user).await
    }
    async fn user(&self, name: &UserName) -> Result<Option<LocalUser>, StoreError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.user(name).await
    }
    async fn users(&self) -> Result<Vec<LocalUser>, StoreError> {
        self.inner.users().await
    }
    async fn set_password_hash(
        &self,
        name: &UserName,
        hash: &PasswordHash,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        self.inner.set_password_hash(name, hash, at).await
    }
    async fn set_disabled(&self, name: &UserName, disabled: bool) -> Result<bool, StoreError> {
        self.inner.set_disabled(name, disabled).await
    }
    async fn delete_user(&self, name: &UserName) -> Result<bool, StoreError> {
        self.inner.delete_user(name).await
    }
}

struct Harness {
    auth: AuthService,
    clock: Arc<FakeClock>,
    users: Arc<CountingUsers>,
    events: Arc<RecordingEventSink>,
    secrets: Arc<ScriptedSecrets>,
}

fn cheap() -> PasswordHashing {
    PasswordHashing::new(8, 1, 1).unwrap()
}

fn settings() -> AuthSettings {
    AuthSettings {
        enabled: true,
        lockout: LockoutPolicy {
            max_failures: 3,
            window: Duration::from_secs(60),
            lock_duration: Duration::from_secs(60),
            max_lock_duration: Duration::from_secs(200),
            max_tracked_addresses: 100,
        },
        ..AuthSettings::default()
    }
}

async fn harness_with(configure: impl FnOnce(AuthService) -> AuthService) -> Harness {
    let clock = Arc::new(FakeClock::new());
    let users = Arc::new(CountingUsers::default());
    let events = Arc::new(RecordingEventSink::default());
    let secrets = Arc::new(ScriptedSecrets::default());
    let auth = configure(
        AuthService::new(
            settings(),
            Arc::new(InMemoryAuthStore::new()),
            events.clone(),
            clock.clone(),
            secrets.clone(),
        )
        .with_user_store(users.clone()),
    );
    auth.load().await.unwrap();
    Harness {
        auth,
        clock,
        users,
        events,
        secrets,
    }
}

async fn harness() -> Harness {
    harness_with(|auth| auth.with_password_hashing(cheap())).await
}

fn ip(raw: &str) -> Option<IpAddr> {
    Some(raw.parse().unwrap())
}

fn refusal(result: Result<Identity, AuthServiceError>) -> PasswordRejection {
    match result {
        Err(AuthServiceError::Auth(AuthError::InvalidPassword { reason })) => reason,
        other => panic!("expected `Invalid user name or password`, got {other:?}"),
    }
}

fn failed_events(events: &RecordingEventSink) -> Vec<(&'static str, String)> {
    events
        .events()
        .into_iter()
        .filter_map(|event| match event {
            DomainEvent::AuthenticationFailed {
                credential, reason, ..
            } => Some((credential, reason)),
            _ => None,
        })
        .collect()
}

impl Harness {
    async fn sign_in(
        &self,
        name: &str,
        password: &str,
        client: &str,
    ) -> Result<Identity, AuthServiceError> {
        self.auth
            .authenticate_password(name, password, ip(client))
            .await
    }
}

#[tokio::test]
async fn a_user_signs_in_as_its_principal_and_holds_only_the_roles_assigned_to_it() {
    let h = harness().await;
    let made = h.auth.create_user("alice", PASSWORD).await.unwrap();
    assert_eq!(made.principal.to_string(), "user:alice");
    assert!(!made.disabled);

    let identity = h.sign_in("alice", PASSWORD, "192.0.2.1").await.unwrap();
    assert_eq!(
        identity,
        Identity::new(Principal::parse("user:alice").unwrap())
    );
    // Being a local user grants nothing by itself.
    assert!(
        !h.auth
            .authorize(&identity, Permission::ToolInvoke, None)
            .await
            .is_allowed()
    );
    h.auth
        .assign_role("user:alice", "developer", None)
        .await
        .unwrap();
    let decision = h
        .auth
        .authorize(&identity, Permission::ToolInvoke, None)
        .await;
    assert_eq!(
        decision.into_result().unwrap().as_str(),
        "developer",
        "the role assigned to user:alice"
    );

    let succeeded: Vec<_> = h
        .events
        .events()
        .into_iter()
        .filter_map(|event| match event {
            DomainEvent::AuthenticationSucceeded {
                principal,
                credential,
                client,
            } => Some((principal, credential, client)),
            _ => None,
        })
        .collect();
    assert_eq!(
        succeeded,
        [(
            "user:alice".to_owned(),
            "password",
            Some("192.0.2.1".to_owned())
        )]
    );
}

/// Bad input: an unknown name, a wrong password, a name that is no user name, an empty
/// password and one past the longest allowed. All answer one message; the reasons differ only
/// in the events, which never hold the password.
#[tokio::test]
async fn every_refusal_answers_the_same_message_and_events_say_why() {
    let h = harness().await;
    h.auth.create_user("alice", PASSWORD).await.unwrap();
    let too_long = "p".repeat(PASSWORD_MAX_BYTES + 1);
    let cases = [
        ("bob", PASSWORD, PasswordRejection::UnknownUser),
        (
            "alice",
            "correct horse battery stapler",
            PasswordRejection::WrongPassword,
        ),
        ("Alice", PASSWORD, PasswordRejection::UnknownUser),
        ("al ice", PASSWORD, PasswordRejection::Malformed),
        ("alice", "", PasswordRejection::Malformed),
        ("alice", too_long.as_str(), PasswordRejection::Malformed),
    ];
    // Each from its own address, so that none is locked out.
    for (index, (name, password, reason)) in cases.iter().enumerate() {
        let result = h
            .sign_in(name, password, &format!("192.0.2.{}", index + 1))
            .await;
        let error = result.clone().unwrap_err();
        assert_eq!(error.to_string(), INVALID_PASSWORD_MESSAGE, "{name}");
        assert_eq!(error.kind(), ErrorKind::Unauthenticated);
        assert_eq!(refusal(result), *reason, "{name}");
    }
    let failed = failed_events(&h.events);
    assert_eq!(failed.len(), cases.len());
    for ((credential, reason), (_, _, expected)) in failed.iter().zip(&cases) {
        assert_eq!(*credential, "password");
        assert_eq!(reason, &expected.to_string());
        assert!(!reason.contains("horse"), "{reason}");
    }
}

#[tokio::test]
async fn an_unknown_user_costs_a_hash_as_a_wrong_password_does() {
    let h = harness().await;
    h.auth.create_user("alice", PASSWORD).await.unwrap();
    // A malformed name hashes nothing: it finishes while every hashing slot is taken.
    let slots = h.auth.passwords.slots();
    let held = Arc::clone(&slots)
        .acquire_many_owned(u32::try_from(slots.available_permits()).unwrap())
        .await
        .unwrap();
    let malformed = tokio::time::timeout(
        Duration::from_secs(5),
        h.sign_in("-bad", PASSWORD, "192.0.2.1"),
    )
    .await
    .expect("a malformed name waited for a hash");
    assert_eq!(refusal(malformed), PasswordRejection::Malformed);
    // An unknown user and a wrong password both wait for a slot: each needs a hash.
    for (name, password) in [("bob", PASSWORD), ("alice", "not the password at all")] {
        let waited = tokio::time::timeout(
            Duration::from_millis(200),
            h.sign_in(name, password, "192.0.2.2"),
        )
        .await;
        assert!(waited.is_err(), "{name} was refused without hashing");
    }
    drop(held);
    assert!(!h.auth.passwords.has_dummy());
    assert_eq!(
        refusal(h.sign_in("bob", PASSWORD, "192.0.2.3").await),
        PasswordRejection::UnknownUser
    );
    assert!(
        h.auth.passwords.has_dummy(),
        "the unknown user was checked against the dummy hash"
    );
}

#[tokio::test]
async fn failures_lock_the_address_out_before_the_store_is_asked() {
    let h = harness().await;
    h.auth.create_user("alice", PASSWORD).await.unwrap();
    // Unknown users and wrong passwords count alike.
    refusal(h.sign_in("bob", PASSWORD, "192.0.2.1").await);
    refusal(h.sign_in("alice", "wrong password here", "192.0.2.1").await);
    refusal(h.sign_in("carol", PASSWORD, "192.0.2.1").await);
    let reads = h.users.reads.load(Ordering::SeqCst);

    // Even the right password is refused from the locked address, and nothing is read or
    // hashed for it.
    for _ in 0..2 {
        match h.sign_in("alice", PASSWORD, "192.0.2.1").await {
            Err(error @ AuthServiceError::LockedOut { .. }) => {
                assert_eq!(error.retry_after_secs(), Some(60));
                assert_eq!(error.kind(), ErrorKind::RateLimited);
            }
            other => panic!("expected a lockout, got {other:?}"),
        }
    }
    assert_eq!(h.users.reads.load(Ordering::SeqCst), reads);

    // Another address is unaffected; the locked one is let in once the lock is over.
    h.sign_in("alice", PASSWORD, "192.0.2.2").await.unwrap();
    h.clock.advance(Duration::from_secs(60));
    h.sign_in("alice", PASSWORD, "192.0.2.1").await.unwrap();
}

/// Refused API keys and refused passwords from one address share its count.
#[tokio::test]
async fn key_and_password_failures_count_together() {
    let h = harness().await;
    h.auth.create_user("alice", PASSWORD).await.unwrap();
    let wrong_key = format!("mcp_{}", "W".repeat(43));
    for _ in 0..2 {
        let error = h
            .auth
            .authenticate(Credentials::api_key(wrong_key.clone()), ip("192.0.2.9"))
            .await
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Unauthenticated);
    }
    refusal(h.sign_in("alice", "wrong password here", "192.0.2.9").await);
    assert!(matches!(
        h.sign_in("alice", PASSWORD, "192.0.2.9").await,
        Err(AuthServiceError::LockedOut { .. })
    ));
}

#[tokio::test]
async fn a_disabled_user_is_refused_only_once_its_password_checked() {
    let h = harness().await;
    h.auth.create_user("alice", PASSWORD).await.unwrap();
    h.auth.set_user_disabled("alice", true).await.unwrap();
    assert!(h.auth.user("alice").await.unwrap().disabled);
    assert_eq!(
        refusal(h.sign_in("alice", PASSWORD, "192.0.2.1").await),
        PasswordRejection::Disabled
    );
    // Bad input: a wrong password for a disabled user does not learn that it is disabled.
    assert_eq!(
        refusal(h.sign_in("alice", "wrong password here", "192.0.2.2").await),
        PasswordRejection::WrongPassword
    );
    h.auth.set_user_disabled("alice", false).await.unwrap();
    h.sign_in("alice", PASSWORD, "192.0.2.3").await.unwrap();
}

#[tokio::test]
async fn users_are_created_listed_repassworded_and_deleted() {
    let h = harness().await;
    h.auth.create_user("bob", PASSWORD).await.unwrap();
    h.clock.advance(Duration::from_secs(5));
    h.auth
        .create_user("alice.smith@example.com", PASSWORD)
        .await
        .unwrap();
    let listed = h.auth.list_users().await.unwrap();
    let names: Vec<&str> = listed.iter().map(|user| user.name.as_str()).collect();
    assert_eq!(names, ["alice.smith@example.com", "bob"]);
    let shown = serde_json::to_string(&listed).unwrap();
    assert!(
        !shown.contains("argon2"),
        "listings never show a hash: {shown}"
    );

    let before = h.auth.user("bob").await.unwrap();
    h.clock.advance(Duration::from_secs(60));
    h.auth
        .set_password("bob", "a brand new passphrase")
        .await
        .unwrap();
    let after = h.auth.user("bob").await.unwrap();
    assert_eq!(after.created_at, before.created_at);
    assert!(after.password_changed_at > before.password_changed_at);
    refusal(h.sign_in("bob", PASSWORD, "192.0.2.1").await);
    h.sign_in("bob", "a brand new passphrase", "192.0.2.2")
        .await
        .unwrap();

    h.auth.delete_user("bob").await.unwrap();
    assert_eq!(
        refusal(
            h.sign_in("bob", "a brand new passphrase", "192.0.2.3")
                .await
        ),
        PasswordRejection::UnknownUser
    );
    assert_eq!(h.auth.list_users().await.unwrap().len(), 1);
}

/// Bad input to the management use cases: a taken name, a short password, a bad name, and
/// changes to a user that does not exist. Each is refused with its own error and writes nothing.
#[tokio::test]
async fn management_refuses_bad_requests_with_their_own_errors() {
    let h = harness().await;
    h.auth.create_user("alice", PASSWORD).await.unwrap();
    let first = h.users.inner.users().await.unwrap();

    let error = h
        .auth
        .create_user("alice", "another good passphrase")
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Conflict);
    assert!(
        matches!(&error, AuthServiceError::Auth(AuthError::UserAlreadyExists { name }) if name.as_str() == "alice"),
        "{error:?}"
    );
    assert_eq!(
        h.users.inner.users().await.unwrap(),
        first,
        "alice kept her hash"
    );

    let error = h.auth.create_user("bob", "too short").await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Invalid);
    assert!(
        error
            .to_string()
            .starts_with("password: is 9 bytes long and must be at least 12"),
        "{error}"
    );
    let error = h.auth.create_user("b o b", PASSWORD).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Invalid);
    assert!(error.to_string().starts_with("user name: "), "{error}");
    let error = h.auth.set_password("alice", "short").await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Invalid);

    for error in [
        h.auth.set_password("ghost", PASSWORD).await.unwrap_err(),
        h.auth.set_user_disabled("ghost", true).await.unwrap_err(),
        h.auth.delete_user("ghost").await.unwrap_err(),
        h.auth.user("ghost").await.unwrap_err(),
    ] {
        assert_eq!(error.kind(), ErrorKind::NotFound, "{error}");
        assert_eq!(error.to_string(), "user `ghost` does not exist");
    }
    assert_eq!(h.users.inner.users().await.unwrap(), first);
}

#[tokio::test]
async fn failures_of_the_ports_are_errors_of_their_own_and_lock_nobody_out() {
    let h = harness().await;
    h.auth.create_user("alice", PASSWORD).await.unwrap();

    // No randomness for a salt: nothing is stored.
    *h.secrets.failing.lock().unwrap() = true;
    let error = h.auth.create_user("bob", PASSWORD).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Internal);
    assert!(error.to_string().contains("salt"), "{error}");
    assert!(!error.to_string().contains(PASSWORD), "{error}");
    *h.secrets.failing.lock().unwrap() = false;
    assert_eq!(h.users.inner.users().await.unwrap().len(), 1);

    // The store cannot be read: an internal error, not counted against the address.
    h.users.inner.fail_reads(Some("database is locked"));
    for _ in 0..4 {
        let error = h.sign_in("alice", PASSWORD, "192.0.2.1").await.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Internal, "{error}");
    }
    h.users.inner.fail_reads(None);
    h.sign_in("alice", PASSWORD, "192.0.2.1").await.unwrap();

    // A stored hash the gateway cannot check refuses the user like a wrong password.
    let mut damaged = h.users.inner.users().await.unwrap().remove(0);
    damaged.password_hash =
        PasswordHash::parse("$2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW")
            .unwrap();
    h.users.inner.put(damaged);
    assert_eq!(
        refusal(h.sign_in("alice", PASSWORD, "192.0.2.2").await),
        PasswordRejection::UnusableHash
    );
}

#[tokio::test]
async fn without_a_user_store_nobody_signs_in_with_a_password() {
    let clock = Arc::new(FakeClock::new());
    let auth = AuthService::new(
        settings(),
        Arc::new(InMemoryAuthStore::new()),
        Arc::new(RecordingEventSink::default()),
        clock,
        Arc::new(ScriptedSecrets::default()),
    );
    assert!(!auth.accepts_passwords());
    assert_eq!(
        refusal(
            auth.authenticate_password("alice", PASSWORD, ip("192.0.2.1"))
                .await
        ),
        PasswordRejection::NoUsers
    );
    let error = auth.create_user("alice", PASSWORD).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable);
    assert!(matches!(error, AuthServiceError::NoUserStore));
    assert!(matches!(
        auth.list_users().await,
        Err(AuthServiceError::NoUserStore)
    ));
}

/// The one test that pays for a hash at the recommended cost (about half a second unoptimized).
#[tokio::test]
async fn by_default_passwords_are_hashed_with_argon2id_at_19_mib_two_passes_one_lane() {
    let h = harness_with(|auth| auth).await;
    assert_eq!(h.auth.password_hashing(), PasswordHashing::RECOMMENDED);
    h.auth.create_user("alice", PASSWORD).await.unwrap();
    let stored = h.users.inner.users().await.unwrap().remove(0);
    assert!(
        stored
            .password_hash
            .as_str()
            .starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
        "{:?}",
        stored.password_hash
    );
}
