//! What every [`AuthStore`] promises, as tests that every implementation must pass, and an
//! in-memory implementation for tests of the code that uses the port.
//!
//! An adapter crate runs the whole suite against its own store with one line in its tests:
//!
//! ```text
//! mcpgw_testkit::auth_store_contract_suite!(make_my_store().await);
//! ```
//!
//! Each case is also a public `async fn` taking `&dyn AuthStore`, for callers that need to run
//! one case by hand. The cases check what the port's documentation promises: answers such as
//! "no such key" or "already exists" come back as `Ok(None)` / `Ok(false)`, never as errors; a
//! taken key id or hash is an `Err`; a revocation is visible to the next read and keeps its
//! first time; lists come back ordered (keys by `created_at` then id, roles by name,
//! assignments by (principal, role, scope), policies by address); every field round-trips.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use mcpgw_authz::{
    ApiKeyRecord, AuthStore, KeyHash, KeyId, PolicyAddress, Principal, Role, RoleAssignment,
    RoleName, StoreError, ToolAccessPolicy,
};
use mcpgw_core::Timestamp;

use crate::repository_suite::RepositoryWithGuard;

/// Expands to one `#[tokio::test]` per case of the [`AuthStore`] contract, each running against
/// a fresh store made by evaluating `$make_store` inside the test.
///
/// `$make_store` is any expression of a type that implements [`AuthStore`]; it is evaluated in
/// an `async fn`, so it may `.await`. When the store needs something kept alive for the length
/// of the test (a temporary directory), wrap both in [`RepositoryWithGuard`], which implements
/// [`AuthStore`] by delegation.
///
/// The tests use `#[tokio::test]`, so the invoking crate needs `tokio` with the `macros` and
/// `rt` features among its dev-dependencies. The test functions are named after the cases and
/// defined in the invoking module: to run the suite against two implementations in one crate,
/// invoke it in two modules.
#[macro_export]
macro_rules! auth_store_contract_suite {
    ($make_store:expr $(,)?) => {
        $crate::__auth_store_contract_case!($make_store, an_empty_store_answers_nothing_found);
        $crate::__auth_store_contract_case!($make_store, a_key_is_found_by_hash_and_by_id);
        $crate::__auth_store_contract_case!($make_store, keys_are_listed_by_creation_then_id);
        $crate::__auth_store_contract_case!($make_store, a_revocation_is_visible_at_once);
        $crate::__auth_store_contract_case!($make_store, a_taken_key_id_or_hash_is_an_error);
        $crate::__auth_store_contract_case!($make_store, many_keys_are_each_found_by_hash);
        $crate::__auth_store_contract_case!($make_store, concurrent_key_inserts_all_land);
        $crate::__auth_store_contract_case!($make_store, custom_roles_insert_replace_delete);
        $crate::__auth_store_contract_case!($make_store, custom_roles_are_listed_by_name);
        $crate::__auth_store_contract_case!($make_store, assignments_add_remove_and_scopes);
        $crate::__auth_store_contract_case!($make_store, assignments_are_listed_in_order);
        $crate::__auth_store_contract_case!($make_store, policies_put_get_replace_delete);
        $crate::__auth_store_contract_case!($make_store, policies_are_listed_by_address);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __auth_store_contract_case {
    ($make_store:expr, $case:ident) => {
        #[tokio::test]
        async fn $case() {
            let store = $make_store;
            $crate::auth_store::$case(&store).await;
        }
    };
}

#[async_trait]
impl<S: AuthStore, G: Send + Sync> AuthStore for RepositoryWithGuard<S, G> {
    async fn insert_key(&self, record: &ApiKeyRecord) -> Result<(), StoreError> {
        self.repository.insert_key(record).await
    }
    async fn key_by_hash(&self, hash: &KeyHash) -> Result<Option<ApiKeyRecord>, StoreError> {
        self.repository.key_by_hash(hash).await
    }
    async fn key_by_id(&self, id: &KeyId) -> Result<Option<ApiKeyRecord>, StoreError> {
        self.repository.key_by_id(id).await
    }
    async fn keys(&self) -> Result<Vec<ApiKeyRecord>, StoreError> {
        self.repository.keys().await
    }
    async fn revoke_key(
        &self,
        id: &KeyId,
        at: Timestamp,
    ) -> Result<Option<ApiKeyRecord>, StoreError> {
        self.repository.revoke_key(id, at).await
    }
    async fn custom_roles(&self) -> Result<Vec<Role>, StoreError> {
        self.repository.custom_roles().await
    }
    async fn insert_custom_role(&self, role: &Role) -> Result<bool, StoreError> {
        self.repository.insert_custom_role(role).await
    }
    async fn replace_custom_role(&self, role: &Role) -> Result<bool, StoreError> {
        self.repository.replace_custom_role(role).await
    }
    async fn delete_custom_role(&self, name: &RoleName) -> Result<bool, StoreError> {
        self.repository.delete_custom_role(name).await
    }
    async fn assignments(&self) -> Result<Vec<RoleAssignment>, StoreError> {
        self.repository.assignments().await
    }
    async fn insert_assignment(&self, assignment: &RoleAssignment) -> Result<bool, StoreError> {
        self.repository.insert_assignment(assignment).await
    }
    async fn delete_assignment(&self, assignment: &RoleAssignment) -> Result<bool, StoreError> {
        self.repository.delete_assignment(assignment).await
    }
    async fn policies(&self) -> Result<Vec<ToolAccessPolicy>, StoreError> {
        self.repository.policies().await
    }
    async fn policy(
        &self,
        address: &PolicyAddress,
    ) -> Result<Option<ToolAccessPolicy>, StoreError> {
        self.repository.policy(address).await
    }
    async fn put_policy(&self, policy: &ToolAccessPolicy) -> Result<(), StoreError> {
        self.repository.put_policy(policy).await
    }
    async fn delete_policy(&self, address: &PolicyAddress) -> Result<bool, StoreError> {
        self.repository.delete_policy(address).await
    }
    async fn refresh_keys(&self) -> Result<(), StoreError> {
        self.repository.refresh_keys().await
    }
}

// ----- the in-memory store ------------------------------------------------------------------

/// An [`AuthStore`] in memory: what a test of the code that uses the port gives it.
///
/// Key lookups by hash go through a `HashMap`, as the port asks of every implementation.
/// [`fail_next_write`](Self::fail_next_write) makes the next write fail, for tests of what the
/// caller does when persisting fails.
#[derive(Default)]
pub struct InMemoryAuthStore {
    state: Mutex<State>,
    next_write_failure: Mutex<Option<String>>,
    refreshes: std::sync::atomic::AtomicUsize,
}

#[derive(Default)]
struct State {
    keys: HashMap<KeyId, ApiKeyRecord>,
    key_ids_by_hash: HashMap<KeyHash, KeyId>,
    roles: BTreeMap<RoleName, Role>,
    assignments: std::collections::BTreeSet<RoleAssignment>,
    policies: BTreeMap<PolicyAddress, ToolAccessPolicy>,
}

impl InMemoryAuthStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the next write (any insert, replace, delete, revoke or put) return a
    /// [`StoreError`] with `message` and change nothing; the writes after it succeed again.
    pub fn fail_next_write(&self, message: impl Into<String>) {
        *lock(&self.next_write_failure) = Some(message.into());
    }

    /// How often [`AuthStore::refresh_keys`] was called: what the gateway does to see keys that
    /// another process wrote.
    pub fn refreshes(&self) -> usize {
        self.refreshes.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn write(&self) -> Result<MutexGuard<'_, State>, StoreError> {
        match lock(&self.next_write_failure).take() {
            Some(message) => Err(StoreError(message)),
            None => Ok(lock(&self.state)),
        }
    }
}

/// A panic in one test must not turn every later use of a shared fake into a second panic.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[async_trait]
impl AuthStore for InMemoryAuthStore {
    async fn insert_key(&self, record: &ApiKeyRecord) -> Result<(), StoreError> {
        let mut state = self.write()?;
        if state.keys.contains_key(&record.id) {
            return Err(StoreError(format!(
                "an api key with id `{}` is already stored",
                record.id
            )));
        }
        if state.key_ids_by_hash.contains_key(&record.hash) {
            return Err(StoreError(
                "an api key with the same hash is already stored".to_owned(),
            ));
        }
        state.key_ids_by_hash.insert(record.hash, record.id.clone());
        state.keys.insert(record.id.clone(), record.clone());
        Ok(())
    }

    async fn key_by_hash(&self, hash: &KeyHash) -> Result<Option<ApiKeyRecord>, StoreError> {
        let state = lock(&self.state);
        Ok(state
            .key_ids_by_hash
            .get(hash)
            .and_then(|id| state.keys.get(id))
            .cloned())
    }

    async fn key_by_id(&self, id: &KeyId) -> Result<Option<ApiKeyRecord>, StoreError> {
        Ok(lock(&self.state).keys.get(id).cloned())
    }

    async fn keys(&self) -> Result<Vec<ApiKeyRecord>, StoreError> {
        let mut keys: Vec<ApiKeyRecord> = lock(&self.state).keys.values().cloned().collect();
        keys.sort_by(|left, right| (left.created_at, &left.id).cmp(&(right.created_at, &right.id)));
        Ok(keys)
    }

    async fn revoke_key(
        &self,
        id: &KeyId,
        at: Timestamp,
    ) -> Result<Option<ApiKeyRecord>, StoreError> {
        let mut state = self.write()?;
        Ok(state.keys.get_mut(id).map(|record| {
            *record = record.revoked(at);
            record.clone()
        }))
    }

    async fn custom_roles(&self) -> Result<Vec<Role>, StoreError> {
        Ok(lock(&self.state).roles.values().cloned().collect())
    }

    async fn insert_custom_role(&self, role: &Role) -> Result<bool, StoreError> {
        let mut state = self.write()?;
        if state.roles.contains_key(role.name()) {
            return Ok(false);
        }
        state.roles.insert(role.name().clone(), role.clone());
        Ok(true)
    }

    async fn replace_custom_role(&self, role: &Role) -> Result<bool, StoreError> {
        let mut state = self.write()?;
        Ok(match state.roles.get_mut(role.name()) {
            Some(stored) => {
                *stored = role.clone();
                true
            }
            None => false,
        })
    }

    async fn delete_custom_role(&self, name: &RoleName) -> Result<bool, StoreError> {
        Ok(self.write()?.roles.remove(name).is_some())
    }

    async fn assignments(&self) -> Result<Vec<RoleAssignment>, StoreError> {
        Ok(lock(&self.state).assignments.iter().cloned().collect())
    }

    async fn insert_assignment(&self, assignment: &RoleAssignment) -> Result<bool, StoreError> {
        Ok(self.write()?.assignments.insert(assignment.clone()))
    }

    async fn delete_assignment(&self, assignment: &RoleAssignment) -> Result<bool, StoreError> {
        Ok(self.write()?.assignments.remove(assignment))
    }

    async fn policies(&self) -> Result<Vec<ToolAccessPolicy>, StoreError> {
        Ok(lock(&self.state).policies.values().cloned().collect())
    }

    async fn policy(
        &self,
        address: &PolicyAddress,
    ) -> Result<Option<ToolAccessPolicy>, StoreError> {
        Ok(lock(&self.state).policies.get(address).cloned())
    }

    async fn put_policy(&self, policy: &ToolAccessPolicy) -> Result<(), StoreError> {
        self.write()?
            .policies
            .insert(policy.address().clone(), policy.clone());
        Ok(())
    }

    async fn delete_policy(&self, address: &PolicyAddress) -> Result<bool, StoreError> {
        Ok(self.write()?.policies.remove(address).is_some())
    }

    /// Nothing to read again: every write is this store's own. The call is counted.
    async fn refresh_keys(&self) -> Result<(), StoreError> {
        self.refreshes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }
}

// ----- sample data --------------------------------------------------------------------------

/// A fixed instant for test records: 2027-01-15T08:00:00 UTC.
pub const SAMPLE_TIME: Timestamp = Timestamp::from_unix_micros(1_800_000_000_000_000);

fn principal(raw: &str) -> Principal {
    Principal::parse(raw).unwrap_or_else(|error| panic!("test principal `{raw}`: {error}"))
}

fn role_name(raw: &str) -> RoleName {
    RoleName::parse(raw).unwrap_or_else(|error| panic!("test role name `{raw}`: {error}"))
}

fn key_id(raw: &str) -> KeyId {
    KeyId::parse(raw).unwrap_or_else(|error| panic!("test key id `{raw}`: {error}"))
}

/// The hash of the (made-up) raw key of the sample key `label`.
pub fn sample_key_hash(label: &str) -> KeyHash {
    KeyHash::of(&format!("mcp_contract-suite-secret-of-{label}"))
}

/// A key record with every optional field set: id `key_<label>`, a name with quotes and
/// non-ASCII text, a principal whose name holds characters a careless encoder mangles, a role,
/// an expiry, and created at `created_at`.
pub fn sample_key(label: &str, created_at: Timestamp) -> ApiKeyRecord {
    ApiKeyRecord {
        id: key_id(&format!("key_{label}")),
        name: format!("ci \"{label}\" – ünïcödé ✓"),
        principal: principal(&format!("service:deploy|{label} @team/ops")),
        role: Some(role_name("developer")),
        prefix: "mcp_AbCd-_9z".to_owned(),
        hash: sample_key_hash(label),
        created_at,
        expires_at: Some(Timestamp::from_unix_micros(
            created_at.unix_micros() + 90 * 86_400_000_000 + 123_456,
        )),
        revoked_at: None,
    }
}

/// A key record with every optional field empty.
pub fn sample_bare_key(label: &str, created_at: Timestamp) -> ApiKeyRecord {
    ApiKeyRecord {
        role: None,
        expires_at: None,
        revoked_at: None,
        principal: principal(&format!("user:{label}")),
        name: label.to_owned(),
        ..sample_key(label, created_at)
    }
}

/// A custom role with a multi-line description and grants of all three shapes.
pub fn sample_role(name: &str) -> Role {
    Role::parse_custom(
        name,
        Some("reads servers;\nruns \"tools\" – ünïcödé"),
        &[
            "mcp_server:read".to_owned(),
            "tool:*".to_owned(),
            "metrics:read".to_owned(),
        ],
    )
    .unwrap_or_else(|error| panic!("test role `{name}`: {error}"))
}

/// An assignment of `role` to `principal` in `scope` (`global` or `tenant:<id>`).
pub fn sample_assignment(principal: &str, role: &str, scope: &str) -> RoleAssignment {
    RoleAssignment::parse(principal, role, Some(scope))
        .unwrap_or_else(|error| panic!("test assignment {principal}/{role}/{scope}: {error}"))
}

/// The address `{scope}/{target_id}`.
pub fn sample_address(scope: &str, target_id: &str) -> PolicyAddress {
    PolicyAddress::parse(scope, target_id)
        .unwrap_or_else(|error| panic!("test address {scope}/{target_id}: {error}"))
}

/// A policy at `{scope}/{target_id}` with patterns of every shape in both lists, in an order
/// that is not sorted (the order must survive).
pub fn sample_policy(scope: &str, target_id: &str) -> ToolAccessPolicy {
    ToolAccessPolicy::parse(
        sample_address(scope, target_id),
        &[
            "user:zoë".to_owned(),
            "group:Domain Users".to_owned(),
            "service:*".to_owned(),
        ],
        &["user:mallory|1".to_owned(), "*".to_owned()],
    )
    .unwrap_or_else(|error| panic!("test policy {scope}/{target_id}: {error}"))
}

fn at(seconds_after_sample_time: i64) -> Timestamp {
    Timestamp::from_unix_micros(SAMPLE_TIME.unix_micros() + seconds_after_sample_time * 1_000_000)
}

// ----- the contract cases -------------------------------------------------------------------

async fn insert_key(store: &dyn AuthStore, record: &ApiKeyRecord) {
    store
        .insert_key(record)
        .await
        .unwrap_or_else(|error| panic!("inserting key `{}` failed: {error}", record.id));
}

async fn keys(store: &dyn AuthStore) -> Vec<ApiKeyRecord> {
    store
        .keys()
        .await
        .unwrap_or_else(|error| panic!("listing keys failed: {error}"))
}

async fn by_hash(store: &dyn AuthStore, hash: &KeyHash) -> Option<ApiKeyRecord> {
    store
        .key_by_hash(hash)
        .await
        .unwrap_or_else(|error| panic!("key_by_hash failed: {error}"))
}

async fn by_id(store: &dyn AuthStore, id: &KeyId) -> Option<ApiKeyRecord> {
    store
        .key_by_id(id)
        .await
        .unwrap_or_else(|error| panic!("key_by_id `{id}` failed: {error}"))
}

async fn roles(store: &dyn AuthStore) -> Vec<Role> {
    store
        .custom_roles()
        .await
        .unwrap_or_else(|error| panic!("listing custom roles failed: {error}"))
}

async fn assignments(store: &dyn AuthStore) -> Vec<RoleAssignment> {
    store
        .assignments()
        .await
        .unwrap_or_else(|error| panic!("listing assignments failed: {error}"))
}

async fn policies(store: &dyn AuthStore) -> Vec<ToolAccessPolicy> {
    store
        .policies()
        .await
        .unwrap_or_else(|error| panic!("listing policies failed: {error}"))
}

/// Every "not found" of the port is an `Ok` answer on an empty store, never an error.
pub async fn an_empty_store_answers_nothing_found(store: &dyn AuthStore) {
    assert_eq!(keys(store).await, []);
    assert_eq!(roles(store).await, []);
    assert_eq!(assignments(store).await, []);
    assert_eq!(policies(store).await, []);
    assert_eq!(by_hash(store, &sample_key_hash("nobody")).await, None);
    assert_eq!(by_id(store, &key_id("key_nobody")).await, None);
    assert_eq!(
        store
            .revoke_key(&key_id("key_nobody"), at(1))
            .await
            .unwrap(),
        None,
        "revoking an unknown key answers None"
    );
    assert!(
        !store
            .replace_custom_role(&sample_role("ghost"))
            .await
            .unwrap()
    );
    assert!(!store.delete_custom_role(&role_name("ghost")).await.unwrap());
    assert!(
        !store
            .delete_assignment(&sample_assignment("user:nobody", "viewer", "global"))
            .await
            .unwrap()
    );
    let address = sample_address("provider", "math");
    assert_eq!(store.policy(&address).await.unwrap(), None);
    assert!(!store.delete_policy(&address).await.unwrap());
    // The misses above wrote nothing.
    assert_eq!(keys(store).await, []);
    assert_eq!(roles(store).await, []);
}

/// Keys come back exactly as inserted, by hash and by id; another hash or id finds nothing.
pub async fn a_key_is_found_by_hash_and_by_id(store: &dyn AuthStore) {
    let full = sample_key("full", at(0));
    let bare = sample_bare_key("bare", at(1));
    let mut already_revoked = sample_key("revoked", at(2));
    already_revoked.revoked_at = Some(at(3));
    for record in [&full, &bare, &already_revoked] {
        insert_key(store, record).await;
    }
    for record in [&full, &bare, &already_revoked] {
        assert_eq!(by_hash(store, &record.hash).await.as_ref(), Some(record));
        assert_eq!(by_id(store, &record.id).await.as_ref(), Some(record));
    }
    assert_eq!(by_hash(store, &sample_key_hash("other")).await, None);
    assert_eq!(by_id(store, &key_id("key_other")).await, None);
    // An id is compared exactly: a case variant is another id.
    assert_eq!(by_id(store, &key_id("key_FULL")).await, None);
}

/// `keys` lists by `created_at`, then by id for keys created in the same microsecond,
/// whatever the insertion order.
pub async fn keys_are_listed_by_creation_then_id(store: &dyn AuthStore) {
    let late = sample_key("a-late", at(100));
    let early = sample_bare_key("z-early", at(-100));
    let same_time_b = sample_key("b-same", at(0));
    let same_time_a = sample_bare_key("a-same", at(0));
    for record in [&late, &same_time_b, &early, &same_time_a] {
        insert_key(store, record).await;
    }
    assert_eq!(keys(store).await, [early, same_time_a, same_time_b, late]);
}

/// A revocation is visible to the very next read of every kind, keeps its first time when
/// repeated, and leaves other keys alone.
pub async fn a_revocation_is_visible_at_once(store: &dyn AuthStore) {
    let revoked = sample_key("revoked", at(0));
    let kept = sample_key("kept", at(1));
    insert_key(store, &revoked).await;
    insert_key(store, &kept).await;
    // Read first, so that a store which caches reads must notice the write.
    assert_eq!(by_hash(store, &revoked.hash).await.as_ref(), Some(&revoked));

    let expected = ApiKeyRecord {
        revoked_at: Some(at(10)),
        ..revoked.clone()
    };
    let answer = store.revoke_key(&revoked.id, at(10)).await.unwrap();
    assert_eq!(answer.as_ref(), Some(&expected));
    assert_eq!(
        by_hash(store, &revoked.hash).await.as_ref(),
        Some(&expected)
    );
    assert_eq!(by_id(store, &revoked.id).await.as_ref(), Some(&expected));
    assert_eq!(keys(store).await, [expected.clone(), kept.clone()]);

    // A second revocation answers the stored record with the first time.
    let again = store.revoke_key(&revoked.id, at(20)).await.unwrap();
    assert_eq!(again.as_ref(), Some(&expected));
    assert_eq!(
        by_hash(store, &revoked.hash).await.as_ref(),
        Some(&expected)
    );

    assert_eq!(by_hash(store, &kept.hash).await.as_ref(), Some(&kept));
}

/// Ids and hashes are random, so a taken one is a failure (`Err`), and it changes nothing.
pub async fn a_taken_key_id_or_hash_is_an_error(store: &dyn AuthStore) {
    let original = sample_key("original", at(0));
    insert_key(store, &original).await;

    let same_id = ApiKeyRecord {
        hash: sample_key_hash("another secret"),
        name: "impostor".to_owned(),
        ..original.clone()
    };
    assert!(
        store.insert_key(&same_id).await.is_err(),
        "a second key with a taken id was accepted"
    );
    let same_hash = ApiKeyRecord {
        id: key_id("key_impostor"),
        name: "impostor".to_owned(),
        ..original.clone()
    };
    assert!(
        store.insert_key(&same_hash).await.is_err(),
        "a second key with a taken hash was accepted"
    );

    assert_eq!(keys(store).await, std::slice::from_ref(&original));
    assert_eq!(by_hash(store, &original.hash).await, Some(original.clone()));
    assert_eq!(by_hash(store, &same_id.hash).await, None);
    assert_eq!(by_id(store, &same_hash.id).await, None);
}

/// Every one of many keys is found by its own hash (a store keyed on a prefix of the hash, or
/// one that keeps only the latest keys, fails here).
pub async fn many_keys_are_each_found_by_hash(store: &dyn AuthStore) {
    let records: Vec<ApiKeyRecord> = (0..300)
        .map(|index| sample_bare_key(&format!("bulk-{index:03}"), at(index)))
        .collect();
    for record in &records {
        insert_key(store, record).await;
    }
    for record in &records {
        assert_eq!(by_hash(store, &record.hash).await.as_ref(), Some(record));
    }
    assert_eq!(keys(store).await, records);
}

/// Keys created together (as concurrent REST requests would) must all be stored.
pub async fn concurrent_key_inserts_all_land(store: &dyn AuthStore) {
    let records: Vec<ApiKeyRecord> = (0..32)
        .map(|index| sample_key(&format!("parallel-{index:02}"), at(index)))
        .collect();
    let results =
        futures::future::join_all(records.iter().map(|record| store.insert_key(record))).await;
    for (record, result) in records.iter().zip(results) {
        result.unwrap_or_else(|error| panic!("inserting `{}` failed: {error}", record.id));
    }
    assert_eq!(keys(store).await, records);
    for record in &records {
        assert_eq!(by_hash(store, &record.hash).await.as_ref(), Some(record));
    }
}

/// Insert answers `false` (and writes nothing) for a taken name; replace answers `false` for
/// an unknown one; delete answers whether there was a role.
pub async fn custom_roles_insert_replace_delete(store: &dyn AuthStore) {
    let role = sample_role("support");
    assert!(store.insert_custom_role(&role).await.unwrap());
    assert_eq!(roles(store).await, std::slice::from_ref(&role));

    let rival = Role::parse_custom("support", Some("other"), &["*".to_owned()]).unwrap();
    assert!(
        !store.insert_custom_role(&rival).await.unwrap(),
        "inserting a taken role name must answer false"
    );
    assert_eq!(
        roles(store).await,
        std::slice::from_ref(&role),
        "the rival overwrote the role"
    );

    let changed = role
        .updated(Some(""), Some(&["audit:read".to_owned(), "*".to_owned()]))
        .unwrap();
    assert!(store.replace_custom_role(&changed).await.unwrap());
    assert_eq!(roles(store).await, std::slice::from_ref(&changed));
    assert!(
        !store
            .replace_custom_role(&sample_role("unknown"))
            .await
            .unwrap(),
        "replacing an unknown role must answer false"
    );
    assert_eq!(roles(store).await, [changed]);

    assert!(store.delete_custom_role(role.name()).await.unwrap());
    assert_eq!(roles(store).await, []);
    assert!(!store.delete_custom_role(role.name()).await.unwrap());
    // A deleted name can be created again.
    assert!(store.insert_custom_role(&role).await.unwrap());
    assert_eq!(roles(store).await, [role]);
}

/// Custom roles are listed by name, whatever the insertion order.
pub async fn custom_roles_are_listed_by_name(store: &dyn AuthStore) {
    let names = ["zeta", "alpha-2", "alpha", "m_id", "beta-1"];
    for name in names {
        assert!(store.insert_custom_role(&sample_role(name)).await.unwrap());
    }
    let listed: Vec<String> = roles(store)
        .await
        .iter()
        .map(|role| role.name().to_string())
        .collect();
    assert_eq!(listed, ["alpha", "alpha-2", "beta-1", "m_id", "zeta"]);
}

/// Assigning twice answers `false`; the same principal and role in `global`, `tenant:a` and
/// `tenant:b` are three assignments; delete removes exactly the one named.
pub async fn assignments_add_remove_and_scopes(store: &dyn AuthStore) {
    let global = sample_assignment("user:alice", "viewer", "global");
    let tenant_a = sample_assignment("user:alice", "viewer", "tenant:a");
    let tenant_b = sample_assignment("user:alice", "viewer", "tenant:b");
    for assignment in [&global, &tenant_a, &tenant_b] {
        assert!(store.insert_assignment(assignment).await.unwrap());
    }
    assert!(
        !store.insert_assignment(&tenant_a).await.unwrap(),
        "assigning the same role twice must answer false"
    );
    let mut expected = vec![global.clone(), tenant_a.clone(), tenant_b.clone()];
    expected.sort();
    assert_eq!(assignments(store).await, expected);

    assert!(store.delete_assignment(&tenant_a).await.unwrap());
    assert!(
        !store.delete_assignment(&tenant_a).await.unwrap(),
        "deleting a removed assignment must answer false"
    );
    // Another tenant, another role or another principal is not the stored assignment.
    for absent in [
        sample_assignment("user:alice", "viewer", "tenant:c"),
        sample_assignment("user:alice", "admin", "global"),
        sample_assignment("user:Alice", "viewer", "global"),
        sample_assignment("group:alice", "viewer", "global"),
    ] {
        assert!(
            !store.delete_assignment(&absent).await.unwrap(),
            "{absent:?}"
        );
    }
    assert_eq!(assignments(store).await, [global, tenant_b]);
}

/// Assignments are listed by (principal, role, scope), the order of [`RoleAssignment`]'s `Ord`.
pub async fn assignments_are_listed_in_order(store: &dyn AuthStore) {
    let mut inserted = vec![
        sample_assignment("user:bob", "viewer", "global"),
        sample_assignment("user:alice", "viewer", "tenant:z"),
        sample_assignment("service:ci", "developer", "global"),
        sample_assignment("group:ops", "operator", "global"),
        sample_assignment("user:alice", "admin", "global"),
        sample_assignment("user:alice", "viewer", "global"),
        sample_assignment("user:alice", "viewer", "tenant:a"),
        sample_assignment("user:anonymous", "viewer", "global"),
    ];
    for assignment in &inserted {
        assert!(store.insert_assignment(assignment).await.unwrap());
    }
    inserted.sort();
    assert_eq!(assignments(store).await, inserted);
}

/// `put_policy` sets or replaces; `policy` reads one address; delete answers whether one was
/// set. Pattern order within a list survives.
pub async fn policies_put_get_replace_delete(store: &dyn AuthStore) {
    let policy = sample_policy("tool", "math__add__v2");
    let address = policy.address().clone();
    store.put_policy(&policy).await.unwrap();
    assert_eq!(store.policy(&address).await.unwrap(), Some(policy.clone()));
    assert_eq!(policies(store).await, std::slice::from_ref(&policy));

    let replacement =
        ToolAccessPolicy::parse(address.clone(), &[], &["group:contractors".to_owned()]).unwrap();
    store.put_policy(&replacement).await.unwrap();
    assert_eq!(
        store.policy(&address).await.unwrap(),
        Some(replacement.clone())
    );
    assert_eq!(policies(store).await, [replacement]);

    // The same target under another scope is another address.
    assert_eq!(
        store
            .policy(&sample_address("provider", "math"))
            .await
            .unwrap(),
        None
    );
    let empty = ToolAccessPolicy::parse(sample_address("mcp_server", "math"), &[], &[]).unwrap();
    store.put_policy(&empty).await.unwrap();
    assert_eq!(
        store
            .policy(&sample_address("provider", "math"))
            .await
            .unwrap(),
        Some(empty.clone()),
        "`mcp_server` is an alias of `provider`, and an empty policy is still a policy"
    );

    assert!(store.delete_policy(&address).await.unwrap());
    assert_eq!(store.policy(&address).await.unwrap(), None);
    assert!(!store.delete_policy(&address).await.unwrap());
    assert_eq!(policies(store).await, [empty]);
}

/// Policies are listed by address: the order of [`PolicyAddress`]'s `Ord` (scope, then
/// target).
pub async fn policies_are_listed_by_address(store: &dyn AuthStore) {
    let mut inserted = vec![
        sample_policy("tool", "web__search"),
        sample_policy("group", "pool"),
        sample_policy("provider", "web"),
        sample_policy("tool", "math__add"),
        sample_policy("provider", "math"),
        sample_policy("group", "math"),
    ];
    for policy in &inserted {
        store.put_policy(policy).await.unwrap();
    }
    inserted.sort_by(|left, right| left.address().cmp(right.address()));
    assert_eq!(policies(store).await, inserted);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::FutureExt;
    use futures::future::BoxFuture;

    use super::*;

    mod in_memory_contract {
        crate::auth_store_contract_suite!(crate::auth_store::InMemoryAuthStore::new());
    }

    mod guarded_contract {
        crate::auth_store_contract_suite!(crate::repository_suite::RepositoryWithGuard::new(
            crate::auth_store::InMemoryAuthStore::new(),
            ()
        ));
    }

    #[tokio::test]
    async fn fail_next_write_fails_exactly_one_write_and_changes_nothing() {
        let store = InMemoryAuthStore::new();
        store.fail_next_write("disk full");
        let record = sample_key("k", SAMPLE_TIME);
        let error = store.insert_key(&record).await.unwrap_err();
        assert_eq!(error, StoreError("disk full".to_owned()));
        assert_eq!(keys(&store).await, []);
        insert_key(&store, &record).await;

        store.fail_next_write("disk full");
        assert!(store.revoke_key(&record.id, at(5)).await.is_err());
        assert_eq!(by_hash(&store, &record.hash).await, Some(record.clone()));
        assert!(store.revoke_key(&record.id, at(5)).await.unwrap().is_some());
    }

    /// A store with one deliberate flaw, to show that the suite notices it. It wraps the
    /// in-memory store and breaks one promise.
    #[derive(Clone, Copy, PartialEq)]
    enum Flaw {
        /// Serves lookups by hash from a copy taken at insert, never updated on revoke.
        StaleLookupAfterRevoke,
        /// A second revocation overwrites the first time.
        RevokeOverwritesTime,
        /// Lists keys in insertion order.
        KeysInInsertionOrder,
        /// Assignments are keyed without their scope.
        IgnoresScope,
        /// Answers `Err` for a taken role name.
        DuplicateRoleIsError,
        /// Accepts a second key with a taken hash.
        AcceptsTakenHash,
        /// Lists policies by their text (`group/` before `provider/`).
        PoliciesByText,
    }

    struct Flawed {
        flaw: Flaw,
        inner: InMemoryAuthStore,
        snapshots: Mutex<HashMap<KeyHash, ApiKeyRecord>>,
        insertion_order: Mutex<Vec<KeyId>>,
    }

    #[async_trait]
    impl AuthStore for Flawed {
        async fn insert_key(&self, record: &ApiKeyRecord) -> Result<(), StoreError> {
            if self.flaw == Flaw::AcceptsTakenHash
                && self.inner.key_by_hash(&record.hash).await?.is_some()
            {
                return Ok(());
            }
            self.inner.insert_key(record).await?;
            lock(&self.snapshots).insert(record.hash, record.clone());
            lock(&self.insertion_order).push(record.id.clone());
            Ok(())
        }
        async fn key_by_hash(&self, hash: &KeyHash) -> Result<Option<ApiKeyRecord>, StoreError> {
            if self.flaw == Flaw::StaleLookupAfterRevoke {
                return Ok(lock(&self.snapshots).get(hash).cloned());
            }
            self.inner.key_by_hash(hash).await
        }
        async fn key_by_id(&self, id: &KeyId) -> Result<Option<ApiKeyRecord>, StoreError> {
            self.inner.key_by_id(id).await
        }
        async fn keys(&self) -> Result<Vec<ApiKeyRecord>, StoreError> {
            if self.flaw == Flaw::KeysInInsertionOrder {
                let order = lock(&self.insertion_order).clone();
                let mut listed = Vec::new();
                for id in order {
                    listed.extend(self.inner.key_by_id(&id).await?);
                }
                return Ok(listed);
            }
            self.inner.keys().await
        }
        async fn revoke_key(
            &self,
            id: &KeyId,
            at: Timestamp,
        ) -> Result<Option<ApiKeyRecord>, StoreError> {
            if self.flaw == Flaw::RevokeOverwritesTime {
                let mut state = lock(&self.inner.state);
                return Ok(state.keys.get_mut(id).map(|record| {
                    record.revoked_at = Some(at);
                    record.clone()
                }));
            }
            self.inner.revoke_key(id, at).await
        }
        async fn custom_roles(&self) -> Result<Vec<Role>, StoreError> {
            self.inner.custom_roles().await
        }
        async fn insert_custom_role(&self, role: &Role) -> Result<bool, StoreError> {
            match self.inner.insert_custom_role(role).await? {
                false if self.flaw == Flaw::DuplicateRoleIsError => {
                    Err(StoreError("taken".to_owned()))
                }
                answer => Ok(answer),
            }
        }
        async fn replace_custom_role(&self, role: &Role) -> Result<bool, StoreError> {
            self.inner.replace_custom_role(role).await
        }
        async fn delete_custom_role(&self, name: &RoleName) -> Result<bool, StoreError> {
            self.inner.delete_custom_role(name).await
        }
        async fn assignments(&self) -> Result<Vec<RoleAssignment>, StoreError> {
            self.inner.assignments().await
        }
        async fn insert_assignment(&self, assignment: &RoleAssignment) -> Result<bool, StoreError> {
            if self.flaw == Flaw::IgnoresScope {
                let taken = self.inner.assignments().await?.iter().any(|stored| {
                    stored.principal == assignment.principal && stored.role == assignment.role
                });
                if taken {
                    return Ok(false);
                }
            }
            self.inner.insert_assignment(assignment).await
        }
        async fn delete_assignment(&self, assignment: &RoleAssignment) -> Result<bool, StoreError> {
            self.inner.delete_assignment(assignment).await
        }
        async fn policies(&self) -> Result<Vec<ToolAccessPolicy>, StoreError> {
            let mut listed = self.inner.policies().await?;
            if self.flaw == Flaw::PoliciesByText {
                listed.sort_by_key(|policy| policy.address().to_string());
            }
            Ok(listed)
        }
        async fn policy(
            &self,
            address: &PolicyAddress,
        ) -> Result<Option<ToolAccessPolicy>, StoreError> {
            self.inner.policy(address).await
        }
        async fn put_policy(&self, policy: &ToolAccessPolicy) -> Result<(), StoreError> {
            self.inner.put_policy(policy).await
        }
        async fn delete_policy(&self, address: &PolicyAddress) -> Result<bool, StoreError> {
            self.inner.delete_policy(address).await
        }
    }

    type Case = for<'a> fn(&'a dyn AuthStore) -> BoxFuture<'a, ()>;

    /// Runs one case against a store with `flaw` and reports whether the case failed.
    async fn case_fails_on(flaw: Flaw, case: Case) -> bool {
        let store = Arc::new(Flawed {
            flaw,
            inner: InMemoryAuthStore::new(),
            snapshots: Mutex::default(),
            insertion_order: Mutex::default(),
        });
        let outcome = tokio::spawn(async move { case(store.as_ref()).await }).await;
        outcome.is_err_and(|error| error.is_panic())
    }

    #[tokio::test]
    async fn the_suite_fails_on_stores_that_break_the_contract() {
        let table: [(Flaw, Case); 7] = [
            (Flaw::StaleLookupAfterRevoke, |store| {
                a_revocation_is_visible_at_once(store).boxed()
            }),
            (Flaw::RevokeOverwritesTime, |store| {
                a_revocation_is_visible_at_once(store).boxed()
            }),
            (Flaw::KeysInInsertionOrder, |store| {
                keys_are_listed_by_creation_then_id(store).boxed()
            }),
            (Flaw::IgnoresScope, |store| {
                assignments_add_remove_and_scopes(store).boxed()
            }),
            (Flaw::DuplicateRoleIsError, |store| {
                custom_roles_insert_replace_delete(store).boxed()
            }),
            (Flaw::AcceptsTakenHash, |store| {
                a_taken_key_id_or_hash_is_an_error(store).boxed()
            }),
            (Flaw::PoliciesByText, |store| {
                policies_are_listed_by_address(store).boxed()
            }),
        ];
        for (flaw, case) in table {
            assert!(
                case_fails_on(flaw, case).await,
                "the suite did not notice a store that {}",
                match flaw {
                    Flaw::StaleLookupAfterRevoke => "serves stale lookups after a revoke",
                    Flaw::RevokeOverwritesTime => "overwrites the first revocation time",
                    Flaw::KeysInInsertionOrder => "lists keys in insertion order",
                    Flaw::IgnoresScope => "ignores scopes",
                    Flaw::DuplicateRoleIsError => "answers Err for a taken role name",
                    Flaw::AcceptsTakenHash => "accepts a taken hash",
                    Flaw::PoliciesByText => "lists policies by their text",
                }
            );
        }
        // A flaw passes the cases that do not look at it, so the harness itself is not what
        // fails.
        assert!(
            !case_fails_on(Flaw::PoliciesByText, |store| {
                a_revocation_is_visible_at_once(store).boxed()
            })
            .await
        );
    }
}
