//! The contract of [`ToolListStore`], as tests that every implementation must pass, and
//! [`InMemoryToolListStore`], the implementation for tests of the code that uses the port.
//!
//! An adapter crate runs the whole suite against its own store with one line in its tests:
//!
//! ```text
//! mcpgw_testkit::tool_list_store_contract_suite!(make_my_store().await);
//! ```
//!
//! Each case is also a public `async fn` taking `&dyn ToolListStore`, for callers that need to
//! run one case by hand. The cases check what the port's documentation promises: a save is an
//! upsert by server id (the later list of an id wins, also within one call); deleting what is
//! not there is not an error; the load answers everything saved and not deleted (in any order,
//! so the cases sort before comparing); every field round-trips, nested tool schemas, floats,
//! text a careless encoder would mangle and microseconds included.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use mcpgw_core::{RepositoryError, ServerId, StoredToolList, Timestamp, Tool, ToolListStore};
use serde_json::json;

use crate::repository_suite::RepositoryWithGuard;

/// Expands to one `#[tokio::test]` per case of the [`ToolListStore`] contract, each running
/// against a fresh store made by evaluating `$make_store` inside the test.
///
/// `$make_store` is any expression of a type that implements [`ToolListStore`]; it is
/// evaluated in an `async fn`, so it may `.await`. When the store needs something kept alive
/// for the length of the test (a temporary directory), wrap both in [`RepositoryWithGuard`],
/// which implements [`ToolListStore`] by delegation.
///
/// The tests use `#[tokio::test]`, so the invoking crate needs `tokio` with the `macros` and
/// `rt` features among its dev-dependencies. The test functions are named after the cases and
/// defined in the invoking module: to run the suite against two implementations in one crate,
/// invoke it in two modules.
#[macro_export]
macro_rules! tool_list_store_contract_suite {
    ($make_store:expr $(,)?) => {
        $crate::__tool_list_store_contract_case!($make_store, an_empty_store_loads_no_lists);
        $crate::__tool_list_store_contract_case!($make_store, a_list_round_trips_every_field);
        $crate::__tool_list_store_contract_case!($make_store, saving_a_list_again_replaces_it);
        $crate::__tool_list_store_contract_case!(
            $make_store,
            one_save_keeps_every_list_and_the_last_of_an_id_wins
        );
        $crate::__tool_list_store_contract_case!($make_store, saving_no_lists_changes_nothing);
        $crate::__tool_list_store_contract_case!($make_store, delete_removes_only_the_lists_named);
        $crate::__tool_list_store_contract_case!($make_store, deleting_unknown_lists_is_ok);
        $crate::__tool_list_store_contract_case!($make_store, the_load_answers_every_list_kept);
        $crate::__tool_list_store_contract_case!($make_store, concurrent_tool_list_writes_all_land);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __tool_list_store_contract_case {
    ($make_store:expr, $case:ident) => {
        #[tokio::test]
        async fn $case() {
            let store = $make_store;
            $crate::tool_list_store_suite::$case(&store).await;
        }
    };
}

#[async_trait]
impl<S: ToolListStore, G: Send + Sync> ToolListStore for RepositoryWithGuard<S, G> {
    async fn load_tool_lists(&self) -> Result<Vec<StoredToolList>, RepositoryError> {
        self.repository.load_tool_lists().await
    }
    async fn save_tool_lists(&self, lists: &[StoredToolList]) -> Result<(), RepositoryError> {
        self.repository.save_tool_lists(lists).await
    }
    async fn delete_tool_lists(&self, ids: &[ServerId]) -> Result<(), RepositoryError> {
        self.repository.delete_tool_lists(ids).await
    }
}

/// A time with microseconds, so that a store that keeps milliseconds or seconds fails.
pub const SAMPLE_LEARNED_AT: Timestamp = Timestamp::from_unix_micros(1_790_000_000_123_457);

fn server_id(raw: &str) -> ServerId {
    ServerId::parse(raw).unwrap_or_else(|error| panic!("test id `{raw}` is invalid: {error}"))
}

/// A list of three tools: nested input schemas with floats, an output schema, annotations, a
/// title, and text a careless encoder would mangle; learned at [`SAMPLE_LEARNED_AT`] under a
/// digest of 64 hexadecimal digits.
pub fn sample_tool_list(id: &str) -> StoredToolList {
    StoredToolList {
        server_id: server_id(id),
        definition_digest: "0f".repeat(32),
        tools: vec![
            Tool::new("add")
                .with_description("adds \"numbers\"\nand ünïcode ✓")
                .with_input_schema(json!({
                    "type": "object",
                    "properties": {
                        "a": {"type": "number", "minimum": 0.1, "maximum": 1.5e300},
                        "b": {"type": "number", "multipleOf": 1e-7},
                        "tags": {"type": "array", "items": {"enum": ["x", "y", null]}},
                    },
                    "required": ["a", "b"],
                    "additionalProperties": false,
                })),
            Tool {
                name: "describe".to_owned(),
                title: Some("Describe 'it'".to_owned()),
                description: None,
                input_schema: json!({"type": "object"}),
                output_schema: Some(json!({
                    "type": "object",
                    "properties": {"text": {"type": "string", "default": ""}},
                })),
                annotations: Some(json!({"readOnlyHint": true, "idempotentHint": false})),
            },
            Tool::new("tool_with_a_rather_long_name_and_no_description"),
        ],
        learned_at: SAMPLE_LEARNED_AT,
    }
}

/// A list of one plain tool, under another digest and at another time.
pub fn small_tool_list(id: &str) -> StoredToolList {
    StoredToolList {
        server_id: server_id(id),
        definition_digest: "a1".repeat(32),
        tools: vec![Tool::new("echo")],
        learned_at: Timestamp::from_unix_micros(1),
    }
}

async fn lists(store: &dyn ToolListStore) -> Vec<StoredToolList> {
    let mut lists = store
        .load_tool_lists()
        .await
        .unwrap_or_else(|error| panic!("load_tool_lists failed: {error}"));
    lists.sort_by(|left, right| left.server_id.cmp(&right.server_id));
    lists
}

async fn save(store: &dyn ToolListStore, lists: &[StoredToolList]) {
    store
        .save_tool_lists(lists)
        .await
        .unwrap_or_else(|error| panic!("save_tool_lists failed: {error}"));
}

async fn delete(store: &dyn ToolListStore, ids: &[&str]) {
    let ids: Vec<ServerId> = ids.iter().map(|raw| server_id(raw)).collect();
    store
        .delete_tool_lists(&ids)
        .await
        .unwrap_or_else(|error| panic!("delete_tool_lists of {ids:?} failed: {error}"));
}

pub async fn an_empty_store_loads_no_lists(store: &dyn ToolListStore) {
    assert_eq!(lists(store).await, []);
}

pub async fn a_list_round_trips_every_field(store: &dyn ToolListStore) {
    let full = sample_tool_list("math");
    save(store, std::slice::from_ref(&full)).await;
    assert_eq!(lists(store).await, std::slice::from_ref(&full));
    // An empty list is a list the server answered, not a missing one.
    let empty = StoredToolList {
        tools: Vec::new(),
        learned_at: Timestamp::from_unix_micros(-1),
        ..small_tool_list("silent")
    };
    save(store, std::slice::from_ref(&empty)).await;
    assert_eq!(lists(store).await, [full, empty]);
}

pub async fn saving_a_list_again_replaces_it(store: &dyn ToolListStore) {
    save(store, &[sample_tool_list("math"), small_tool_list("other")]).await;
    // Every field but the id changes, and the new list is shorter, so a store that merges
    // tool lists or keys them on anything but the server id fails.
    let replacement = StoredToolList {
        server_id: server_id("math"),
        ..small_tool_list("ignored")
    };
    save(store, std::slice::from_ref(&replacement)).await;
    assert_eq!(lists(store).await, [replacement, small_tool_list("other")]);
}

pub async fn one_save_keeps_every_list_and_the_last_of_an_id_wins(store: &dyn ToolListStore) {
    let last = StoredToolList {
        server_id: server_id("math"),
        ..small_tool_list("ignored")
    };
    save(
        store,
        &[
            sample_tool_list("math"),
            sample_tool_list("files"),
            last.clone(),
            small_tool_list("web"),
        ],
    )
    .await;
    assert_eq!(
        lists(store).await,
        [sample_tool_list("files"), last, small_tool_list("web")]
    );
}

pub async fn saving_no_lists_changes_nothing(store: &dyn ToolListStore) {
    save(store, &[]).await;
    assert_eq!(lists(store).await, []);
    save(store, &[small_tool_list("kept")]).await;
    save(store, &[]).await;
    assert_eq!(lists(store).await, [small_tool_list("kept")]);
}

pub async fn delete_removes_only_the_lists_named(store: &dyn ToolListStore) {
    save(
        store,
        &[
            sample_tool_list("gone"),
            small_tool_list("kept"),
            small_tool_list("also-gone"),
        ],
    )
    .await;
    delete(store, &["gone", "also-gone"]).await;
    assert_eq!(lists(store).await, [small_tool_list("kept")]);
    // A deleted id can be saved again.
    save(store, &[sample_tool_list("gone")]).await;
    assert_eq!(
        lists(store).await,
        [sample_tool_list("gone"), small_tool_list("kept")]
    );
}

pub async fn deleting_unknown_lists_is_ok(store: &dyn ToolListStore) {
    delete(store, &["never-saved"]).await;
    delete(store, &[]).await;
    save(store, &[small_tool_list("kept")]).await;
    // An unknown id beside a known one: only the known one goes.
    delete(store, &["never-saved", "kept", "never-saved"]).await;
    assert_eq!(lists(store).await, []);
}

/// Many lists, some deleted: the load answers exactly the rest, none dropped or duplicated.
pub async fn the_load_answers_every_list_kept(store: &dyn ToolListStore) {
    let mut kept = Vec::new();
    let mut batch = Vec::new();
    for index in 0..120 {
        let list = StoredToolList {
            learned_at: Timestamp::from_unix_micros(index),
            ..(if index % 2 == 0 {
                sample_tool_list(&format!("server-{index:03}"))
            } else {
                small_tool_list(&format!("server-{index:03}"))
            })
        };
        batch.push(list.clone());
        if index % 7 != 0 {
            kept.push(list);
        }
        if batch.len() == 25 {
            save(store, &batch).await;
            batch.clear();
        }
    }
    save(store, &batch).await;
    let deleted: Vec<String> = (0..120)
        .filter(|index| index % 7 == 0)
        .map(|index| format!("server-{index:03}"))
        .collect();
    let deleted: Vec<&str> = deleted.iter().map(String::as_str).collect();
    delete(store, &deleted).await;
    assert_eq!(lists(store).await, kept);
}

/// Writes issued together (the lists of several servers learned at once) must all be kept.
pub async fn concurrent_tool_list_writes_all_land(store: &dyn ToolListStore) {
    let saved: Vec<StoredToolList> = (0..16)
        .map(|index| sample_tool_list(&format!("parallel-{index:02}")))
        .collect();
    let writes = saved
        .iter()
        .map(|list| store.save_tool_lists(std::slice::from_ref(list)));
    for result in futures::future::join_all(writes).await {
        result.unwrap_or_else(|error| panic!("a concurrent write failed: {error}"));
    }
    assert_eq!(lists(store).await, saved);
}

/// A [`ToolListStore`] in memory.
///
/// It counts what it is asked to write ([`saved_lists`](Self::saved_lists),
/// [`deleted_ids`](Self::deleted_ids)), for tests that check that nothing is written needlessly,
/// and [`fail_next_write`](Self::fail_next_write) makes the next save or delete fail without
/// changing anything, for tests of what the caller does when keeping a list fails.
#[derive(Default)]
pub struct InMemoryToolListStore {
    lists: Mutex<BTreeMap<ServerId, StoredToolList>>,
    saved_lists: AtomicUsize,
    deleted_ids: AtomicUsize,
    next_write_failure: Mutex<Option<String>>,
}

impl InMemoryToolListStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the next `save_tool_lists` or `delete_tool_lists` return a [`RepositoryError`]
    /// with `message` and change nothing; the writes after it succeed again.
    pub fn fail_next_write(&self, message: impl Into<String>) {
        *lock(&self.next_write_failure) = Some(message.into());
    }

    /// How many lists successful saves were given, in total.
    pub fn saved_lists(&self) -> usize {
        self.saved_lists.load(Ordering::SeqCst)
    }

    /// How many ids successful deletes were given, in total.
    pub fn deleted_ids(&self) -> usize {
        self.deleted_ids.load(Ordering::SeqCst)
    }

    /// The list kept for `id`, if any.
    pub fn list(&self, id: &ServerId) -> Option<StoredToolList> {
        lock(&self.lists).get(id).cloned()
    }

    fn take_failure(&self) -> Result<(), RepositoryError> {
        match lock(&self.next_write_failure).take() {
            Some(message) => Err(RepositoryError(message)),
            None => Ok(()),
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
impl ToolListStore for InMemoryToolListStore {
    async fn load_tool_lists(&self) -> Result<Vec<StoredToolList>, RepositoryError> {
        Ok(lock(&self.lists).values().cloned().collect())
    }

    async fn save_tool_lists(&self, lists: &[StoredToolList]) -> Result<(), RepositoryError> {
        self.take_failure()?;
        let mut kept = lock(&self.lists);
        for list in lists {
            kept.insert(list.server_id.clone(), list.clone());
        }
        self.saved_lists.fetch_add(lists.len(), Ordering::SeqCst);
        Ok(())
    }

    async fn delete_tool_lists(&self, ids: &[ServerId]) -> Result<(), RepositoryError> {
        self.take_failure()?;
        let mut kept = lock(&self.lists);
        for id in ids {
            kept.remove(id);
        }
        self.deleted_ids.fetch_add(ids.len(), Ordering::SeqCst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;
    use futures::future::BoxFuture;

    use super::*;

    mod in_memory_contract {
        crate::tool_list_store_contract_suite!(
            crate::tool_list_store_suite::InMemoryToolListStore::new()
        );
    }

    mod guarded_contract {
        crate::tool_list_store_contract_suite!(crate::repository_suite::RepositoryWithGuard::new(
            crate::tool_list_store_suite::InMemoryToolListStore::new(),
            ()
        ));
    }

    #[tokio::test]
    async fn fail_next_write_fails_exactly_one_write_and_changes_nothing() {
        let store = InMemoryToolListStore::new();
        store.fail_next_write("disk full");
        let error = store
            .save_tool_lists(&[small_tool_list("math")])
            .await
            .unwrap_err();
        assert_eq!(error.0, "disk full");
        assert_eq!(lists(&store).await, []);
        assert_eq!(store.saved_lists(), 0);
        save(&store, &[small_tool_list("math")]).await;
        store.fail_next_write("disk full");
        assert!(store.delete_tool_lists(&[server_id("math")]).await.is_err());
        assert_eq!(lists(&store).await, [small_tool_list("math")]);
        assert_eq!((store.saved_lists(), store.deleted_ids()), (1, 0));
    }

    /// A store with one deliberate flaw, to show that the suite notices it.
    #[derive(Clone, Copy)]
    enum Flaw {
        /// Saving a known id adds a second copy instead of replacing it.
        AppendsLists,
        /// Keeps only the first list of an id within one save.
        FirstOfABatchWins,
        /// Keeps times in milliseconds.
        TruncatesTimes,
        /// Drops the output schema and annotations of tools.
        DropsToolDetails,
        /// Deleting an unknown id is an error.
        RefusesUnknownDeletes,
        /// Deletes only the first id it is given.
        DeletesOnlyTheFirst,
    }

    struct FlawedStore {
        flaw: Flaw,
        inner: InMemoryToolListStore,
        appended: Mutex<Vec<StoredToolList>>,
    }

    #[async_trait]
    impl ToolListStore for FlawedStore {
        async fn load_tool_lists(&self) -> Result<Vec<StoredToolList>, RepositoryError> {
            let mut loaded = self.inner.load_tool_lists().await?;
            loaded.extend(lock(&self.appended).iter().cloned());
            Ok(loaded)
        }
        async fn save_tool_lists(&self, lists: &[StoredToolList]) -> Result<(), RepositoryError> {
            for list in lists {
                let mut list = list.clone();
                let known = self.inner.list(&list.server_id).is_some();
                match self.flaw {
                    Flaw::AppendsLists if known => {
                        lock(&self.appended).push(list);
                        continue;
                    }
                    Flaw::FirstOfABatchWins if known => continue,
                    Flaw::TruncatesTimes => {
                        let micros = list.learned_at.unix_micros();
                        list.learned_at = Timestamp::from_unix_micros(micros - micros % 1_000);
                    }
                    Flaw::DropsToolDetails => {
                        for tool in &mut list.tools {
                            tool.output_schema = None;
                            tool.annotations = None;
                        }
                    }
                    _ => {}
                }
                self.inner.save_tool_lists(&[list]).await?;
            }
            Ok(())
        }
        async fn delete_tool_lists(&self, ids: &[ServerId]) -> Result<(), RepositoryError> {
            match self.flaw {
                Flaw::RefusesUnknownDeletes => {
                    if let Some(unknown) = ids.iter().find(|id| self.inner.list(id).is_none()) {
                        return Err(RepositoryError(format!("no list for `{unknown}`")));
                    }
                    self.inner.delete_tool_lists(ids).await
                }
                Flaw::DeletesOnlyTheFirst => self.inner.delete_tool_lists(&ids[..1]).await,
                _ => self.inner.delete_tool_lists(ids).await,
            }
        }
    }

    /// Runs one case against a store with `flaw` and reports whether the case failed.
    async fn case_fails_on<F>(flaw: Flaw, case: F) -> bool
    where
        F: for<'a> FnOnce(&'a dyn ToolListStore) -> BoxFuture<'a, ()> + Send + 'static,
    {
        let store = FlawedStore {
            flaw,
            inner: InMemoryToolListStore::new(),
            appended: Mutex::new(Vec::new()),
        };
        let outcome = tokio::spawn(async move { case(&store).await }).await;
        outcome.is_err_and(|error| error.is_panic())
    }

    #[tokio::test]
    async fn the_suite_fails_on_stores_that_break_the_contract() {
        assert!(
            case_fails_on(Flaw::AppendsLists, |store| {
                saving_a_list_again_replaces_it(store).boxed()
            })
            .await
        );
        assert!(
            case_fails_on(Flaw::FirstOfABatchWins, |store| {
                one_save_keeps_every_list_and_the_last_of_an_id_wins(store).boxed()
            })
            .await
        );
        assert!(
            case_fails_on(Flaw::TruncatesTimes, |store| {
                a_list_round_trips_every_field(store).boxed()
            })
            .await
        );
        assert!(
            case_fails_on(Flaw::DropsToolDetails, |store| {
                a_list_round_trips_every_field(store).boxed()
            })
            .await
        );
        assert!(
            case_fails_on(Flaw::RefusesUnknownDeletes, |store| {
                deleting_unknown_lists_is_ok(store).boxed()
            })
            .await
        );
        assert!(
            case_fails_on(Flaw::DeletesOnlyTheFirst, |store| {
                delete_removes_only_the_lists_named(store).boxed()
            })
            .await
        );
    }

    #[tokio::test]
    async fn the_flawed_stores_pass_the_cases_that_do_not_look_at_their_flaw() {
        // So the harness itself is not what fails above.
        assert!(
            !case_fails_on(Flaw::DropsToolDetails, |store| {
                saving_a_list_again_replaces_it(store).boxed()
            })
            .await
        );
        assert!(
            !case_fails_on(Flaw::RefusesUnknownDeletes, |store| {
                a_list_round_trips_every_field(store).boxed()
            })
            .await
        );
        assert!(
            !case_fails_on(Flaw::AppendsLists, |store| {
                deleting_unknown_lists_is_ok(store).boxed()
            })
            .await
        );
    }
}
