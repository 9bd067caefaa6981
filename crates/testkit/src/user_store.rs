//! What every [`UserStore`] promises, as tests that every implementation must pass, and an
//! in-memory implementation for tests of the code that uses the port.
//!
//! An adapter crate runs the whole suite against its own store with one line in its tests:
//!
//! ```text
//! mcpgw_testkit::user_store_contract_suite!(make_my_store().await);
//! ```
//!
//! Each case is also a public `async fn` taking `&dyn UserStore`. The cases check what the
//! port's documentation promises: "a user of that name exists" and "no such user" come back as
//! `Ok(false)` / `Ok(None)`, never as errors; names are compared exactly; every field
//! round-trips; users are listed by name.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use mcpgw_authz::{LocalUser, PasswordHash, StoreError, UserName, UserStore};
use mcpgw_core::Timestamp;

use crate::auth_store::SAMPLE_TIME;
use crate::repository_suite::RepositoryWithGuard;

/// Expands to one `#[tokio::test]` per case of the [`UserStore`] contract, each running against
/// a fresh store made by evaluating `$make_store` inside the test.
///
/// `$make_store` is any expression of a type that implements [`UserStore`]; it is evaluated in
/// an `async fn`, so it may `.await`. When the store needs something kept alive for the length
/// of the test (a temporary directory), wrap both in [`RepositoryWithGuard`], which implements
/// [`UserStore`] by delegation. The invoking crate needs `tokio` with the `macros` and `rt`
/// features among its dev-dependencies.
#[macro_export]
macro_rules! user_store_contract_suite {
    ($make_store:expr $(,)?) => {
        $crate::__user_store_contract_case!($make_store, an_empty_store_has_no_users);
        $crate::__user_store_contract_case!($make_store, a_user_round_trips_every_field);
        $crate::__user_store_contract_case!($make_store, a_taken_name_is_refused_and_kept);
        $crate::__user_store_contract_case!($make_store, a_new_password_hash_replaces_the_old);
        $crate::__user_store_contract_case!($make_store, users_are_disabled_enabled_and_deleted);
        $crate::__user_store_contract_case!($make_store, users_are_listed_by_name);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __user_store_contract_case {
    ($make_store:expr, $case:ident) => {
        #[tokio::test]
        async fn $case() {
            let store = $make_store;
            $crate::user_store::$case(&store).await;
        }
    };
}

#[async_trait]
impl<S: UserStore, G: Send + Sync> UserStore for RepositoryWithGuard<S, G> {
    async fn insert_user(&self, user: &LocalUser) -> Result<bool, StoreError> {
        self.repository.insert_user(user).await
    }
    async fn user(&self, name: &UserName) -> Result<Option<LocalUser>, StoreError> {
        self.repository.user(name).await
    }
    async fn users(&self) -> Result<Vec<LocalUser>, StoreError> {
        self.repository.users().await
    }
    async fn set_password_hash(
        &self,
        name: &UserName,
        hash: &PasswordHash,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        self.repository.set_password_hash(name, hash, at).await
    }
    async fn set_disabled(&self, name: &UserName, disabled: bool) -> Result<bool, StoreError> {
        self.repository.set_disabled(name, disabled).await
    }
    async fn delete_user(&self, name: &UserName) -> Result<bool, StoreError> {
        self.repository.delete_user(name).await
    }
}

// ----- the in-memory store ------------------------------------------------------------------

/// A [`UserStore`] in memory: what a test of the code that uses the port gives it.
/// [`fail_next_write`](Self::fail_next_write) makes the next write fail, and
/// [`fail_reads`](Self::fail_reads) every read until it is turned off, for tests of what the
/// caller does when the store fails.
#[derive(Default)]
pub struct InMemoryUserStore {
    users: Mutex<BTreeMap<UserName, LocalUser>>,
    next_write_failure: Mutex<Option<String>>,
    read_failure: Mutex<Option<String>>,
}

impl InMemoryUserStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the next write (insert, set, delete) return a [`StoreError`] with `message` and
    /// change nothing; the writes after it succeed again.
    pub fn fail_next_write(&self, message: impl Into<String>) {
        *lock(&self.next_write_failure) = Some(message.into());
    }

    /// Makes every read (`user`, `users`) fail with `message` (`None`: answer again).
    pub fn fail_reads(&self, message: Option<&str>) {
        *lock(&self.read_failure) = message.map(str::to_owned);
    }

    /// Puts `user` in as it is, replacing any of that name: for tests that need a record no
    /// use case would write (a hash of another algorithm, a damaged one).
    pub fn put(&self, user: LocalUser) {
        lock(&self.users).insert(user.name.clone(), user);
    }

    fn write(&self) -> Result<MutexGuard<'_, BTreeMap<UserName, LocalUser>>, StoreError> {
        match lock(&self.next_write_failure).take() {
            Some(message) => Err(StoreError(message)),
            None => Ok(lock(&self.users)),
        }
    }

    fn read(&self) -> Result<MutexGuard<'_, BTreeMap<UserName, LocalUser>>, StoreError> {
        match lock(&self.read_failure).clone() {
            Some(message) => Err(StoreError(message)),
            None => Ok(lock(&self.users)),
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
impl UserStore for InMemoryUserStore {
    async fn insert_user(&self, user: &LocalUser) -> Result<bool, StoreError> {
        let mut users = self.write()?;
        if users.contains_key(&user.name) {
            return Ok(false);
        }
        users.insert(user.name.clone(), user.clone());
        Ok(true)
    }

    async fn user(&self, name: &UserName) -> Result<Option<LocalUser>, StoreError> {
        Ok(self.read()?.get(name).cloned())
    }

    async fn users(&self) -> Result<Vec<LocalUser>, StoreError> {
        Ok(self.read()?.values().cloned().collect())
    }

    async fn set_password_hash(
        &self,
        name: &UserName,
        hash: &PasswordHash,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        Ok(match self.write()?.get_mut(name) {
            Some(user) => {
                user.password_hash = hash.clone();
                user.password_changed_at = at;
                true
            }
            None => false,
        })
    }

    async fn set_disabled(&self, name: &UserName, disabled: bool) -> Result<bool, StoreError> {
        Ok(match self.write()?.get_mut(name) {
            Some(user) => {
                user.disabled = disabled;
                true
            }
            None => false,
        })
    }

    async fn delete_user(&self, name: &UserName) -> Result<bool, StoreError> {
        Ok(self.write()?.remove(name).is_some())
    }
}

// ----- sample data --------------------------------------------------------------------------

/// The user name `raw`; panics on a name that is not valid.
pub fn sample_user_name(raw: &str) -> UserName {
    UserName::parse(raw).unwrap_or_else(|error| panic!("test user name `{raw}`: {error}"))
}

/// A made-up argon2id PHC string that differs with `label` (no password hashes to it).
pub fn sample_password_hash(label: &str) -> PasswordHash {
    let raw = format!("$argon2id$v=19$m=19456,t=2,p=1$c2FsdC1vZi0{label}$aGFzaC1vZi0{label}");
    PasswordHash::parse(&raw).unwrap_or_else(|error| panic!("test hash `{raw}`: {error}"))
}

/// An enabled user `name` made at `at`, with the sample hash of its name.
pub fn sample_user(name: &str, at: Timestamp) -> LocalUser {
    LocalUser::new(sample_user_name(name), sample_password_hash(name), at)
}

fn at(seconds_after_sample_time: i64) -> Timestamp {
    Timestamp::from_unix_micros(SAMPLE_TIME.unix_micros() + seconds_after_sample_time * 1_000_000)
}

// ----- the contract cases -------------------------------------------------------------------

async fn insert(store: &dyn UserStore, user: &LocalUser) -> bool {
    store
        .insert_user(user)
        .await
        .unwrap_or_else(|error| panic!("inserting user `{}` failed: {error}", user.name))
}

async fn read(store: &dyn UserStore, name: &str) -> Option<LocalUser> {
    store
        .user(&sample_user_name(name))
        .await
        .unwrap_or_else(|error| panic!("reading user `{name}` failed: {error}"))
}

async fn list(store: &dyn UserStore) -> Vec<LocalUser> {
    store
        .users()
        .await
        .unwrap_or_else(|error| panic!("listing users failed: {error}"))
}

/// Every "no such user" of the port is an `Ok` answer on an empty store, never an error.
pub async fn an_empty_store_has_no_users(store: &dyn UserStore) {
    let nobody = sample_user_name("nobody");
    assert_eq!(list(store).await, []);
    assert_eq!(read(store, "nobody").await, None);
    // Bad input: changes to a user that does not exist.
    assert_eq!(
        store
            .set_password_hash(&nobody, &sample_password_hash("x"), at(1))
            .await,
        Ok(false)
    );
    assert_eq!(store.set_disabled(&nobody, true).await, Ok(false));
    assert_eq!(store.delete_user(&nobody).await, Ok(false));
    assert_eq!(list(store).await, [], "a change to nobody made nobody");
}

/// What is inserted is read back exactly, by name and in the list.
pub async fn a_user_round_trips_every_field(store: &dyn UserStore) {
    let mut user = sample_user("alice.smith@example.com", at(0));
    user.password_changed_at = at(42);
    user.disabled = true;
    assert!(insert(store, &user).await);
    assert_eq!(
        read(store, "alice.smith@example.com").await,
        Some(user.clone())
    );
    assert_eq!(list(store).await, [user]);
}

/// Bad input: a second user of a taken name. It is refused with `Ok(false)` and the first user
/// stays as it was; a name that differs only in case is another user.
pub async fn a_taken_name_is_refused_and_kept(store: &dyn UserStore) {
    let first = sample_user("alice", at(0));
    assert!(insert(store, &first).await);
    let impostor = LocalUser {
        password_hash: sample_password_hash("impostor"),
        ..sample_user("alice", at(5))
    };
    assert!(!insert(store, &impostor).await, "a taken name was accepted");
    assert_eq!(read(store, "alice").await, Some(first.clone()));
    let other_case = sample_user("Alice", at(6));
    assert!(insert(store, &other_case).await);
    assert_eq!(read(store, "Alice").await, Some(other_case));
    assert_eq!(read(store, "alice").await, Some(first));
}

/// A new hash replaces the old one and records when; the creation time stays.
pub async fn a_new_password_hash_replaces_the_old(store: &dyn UserStore) {
    let user = sample_user("bob", at(0));
    assert!(insert(store, &user).await);
    let new_hash = sample_password_hash("new");
    assert_eq!(
        store.set_password_hash(&user.name, &new_hash, at(60)).await,
        Ok(true)
    );
    let stored = read(store, "bob").await.expect("bob is still there");
    assert_eq!(stored.password_hash, new_hash);
    assert_eq!(stored.password_changed_at, at(60));
    assert_eq!(stored.created_at, at(0));
    assert!(!stored.disabled);
}

/// Disabling and enabling are seen by the next read; a deleted user is gone, deleting it again
/// answers `false`, and its name can be taken again.
pub async fn users_are_disabled_enabled_and_deleted(store: &dyn UserStore) {
    let user = sample_user("carol", at(0));
    let keeper = sample_user("dave", at(1));
    assert!(insert(store, &user).await);
    assert!(insert(store, &keeper).await);
    assert_eq!(store.set_disabled(&user.name, true).await, Ok(true));
    assert!(read(store, "carol").await.unwrap().disabled);
    assert!(!read(store, "dave").await.unwrap().disabled, "only carol");
    assert_eq!(store.set_disabled(&user.name, true).await, Ok(true));
    assert_eq!(store.set_disabled(&user.name, false).await, Ok(true));
    assert!(!read(store, "carol").await.unwrap().disabled);

    assert_eq!(store.delete_user(&user.name).await, Ok(true));
    assert_eq!(read(store, "carol").await, None);
    assert_eq!(store.delete_user(&user.name).await, Ok(false));
    assert_eq!(list(store).await, [keeper]);
    let again = sample_user("carol", at(9));
    assert!(insert(store, &again).await);
    assert_eq!(read(store, "carol").await, Some(again));
}

/// Users come back by name in byte order (capitals before small letters), whatever the order
/// they were inserted in.
pub async fn users_are_listed_by_name(store: &dyn UserStore) {
    let names = ["mallory", "Zed", "alice", "_svc", "bob", "9lives", "@home"];
    for (index, name) in names.iter().enumerate() {
        assert!(insert(store, &sample_user(name, at(index as i64))).await);
    }
    let listed: Vec<String> = list(store)
        .await
        .iter()
        .map(|user| user.name.to_string())
        .collect();
    let mut expected: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
    expected.sort();
    assert_eq!(listed, expected);
}

#[cfg(test)]
mod tests {
    use super::*;

    mod in_memory_contract {
        crate::user_store_contract_suite!(crate::user_store::InMemoryUserStore::new());
    }

    mod guarded_contract {
        crate::user_store_contract_suite!(crate::repository_suite::RepositoryWithGuard::new(
            crate::user_store::InMemoryUserStore::new(),
            ()
        ));
    }

    #[tokio::test]
    async fn the_fake_fails_one_write_or_every_read_when_told() {
        let store = InMemoryUserStore::new();
        let user = sample_user("alice", SAMPLE_TIME);
        store.fail_next_write("disk full");
        assert_eq!(
            store.insert_user(&user).await,
            Err(StoreError("disk full".to_owned()))
        );
        assert_eq!(list(&store).await, []);
        assert!(insert(&store, &user).await);
        store.fail_reads(Some("connection lost"));
        assert!(store.user(&user.name).await.is_err());
        assert!(store.users().await.is_err());
        store.fail_reads(None);
        assert_eq!(read(&store, "alice").await, Some(user));
    }

    /// A store that keeps names without their case, to show that the suite notices it.
    struct CaseBlindStore(InMemoryUserStore);

    fn folded(name: &UserName) -> UserName {
        sample_user_name(&name.as_str().to_ascii_lowercase())
    }

    #[async_trait]
    impl UserStore for CaseBlindStore {
        async fn insert_user(&self, user: &LocalUser) -> Result<bool, StoreError> {
            let mut user = user.clone();
            user.name = folded(&user.name);
            self.0.insert_user(&user).await
        }
        async fn user(&self, name: &UserName) -> Result<Option<LocalUser>, StoreError> {
            self.0.user(&folded(name)).await
        }
        async fn users(&self) -> Result<Vec<LocalUser>, StoreError> {
            self.0.users().await
        }
        async fn set_password_hash(
            &self,
            name: &UserName,
            hash: &PasswordHash,
            at: Timestamp,
        ) -> Result<bool, StoreError> {
            self.0.set_password_hash(&folded(name), hash, at).await
        }
        async fn set_disabled(&self, name: &UserName, disabled: bool) -> Result<bool, StoreError> {
            self.0.set_disabled(&folded(name), disabled).await
        }
        async fn delete_user(&self, name: &UserName) -> Result<bool, StoreError> {
            self.0.delete_user(&folded(name)).await
        }
    }

    #[tokio::test]
    async fn the_suite_catches_a_store_that_ignores_case() {
        use futures::FutureExt;
        let store = CaseBlindStore(InMemoryUserStore::new());
        let outcome = std::panic::AssertUnwindSafe(a_taken_name_is_refused_and_kept(&store))
            .catch_unwind()
            .await;
        assert!(outcome.is_err(), "the suite accepted a case-blind store");
    }
}
