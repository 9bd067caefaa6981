//! The contract of [`DiscoveryStore`], as tests that every implementation must pass.
//!
//! An adapter crate runs the whole suite against its own store with one line in its tests:
//!
//! ```text
//! mcpgw_testkit::discovery_store_contract_suite!(make_my_store().await);
//! ```
//!
//! Each case is also a public `async fn` taking `&dyn DiscoveryStore`, for callers that need
//! to run one case by hand. The cases check what the port's documentation promises: saving a
//! source is an upsert by `source_id` and saving a rejection an upsert by (`source_id`,
//! `name`); deleting what is not there is not an error; the loads answer everything saved and
//! not deleted (in any order, so the cases sort before comparing); every field round-trips,
//! nested JSON and microseconds included. The in-memory implementation is
//! [`crate::discovery_fakes::InMemoryDiscoveryStore`].

use async_trait::async_trait;
use mcpgw_core::Timestamp;
use mcpgw_discovery::{
    DiscoveryMode, DiscoveryStore, DiscoveryStoreError, Rejection, SourceDefinition, SourceOrigin,
};
use serde_json::{Map, Value, json};

use crate::repository_suite::RepositoryWithGuard;

/// Expands to one `#[tokio::test]` per case of the [`DiscoveryStore`] contract, each running
/// against a fresh store made by evaluating `$make_store` inside the test.
///
/// `$make_store` is any expression of a type that implements [`DiscoveryStore`]; it is
/// evaluated in an `async fn`, so it may `.await`. When the store needs something kept alive
/// for the length of the test (a temporary directory), wrap both in [`RepositoryWithGuard`],
/// which implements [`DiscoveryStore`] by delegation.
///
/// The tests use `#[tokio::test]`, so the invoking crate needs `tokio` with the `macros` and
/// `rt` features among its dev-dependencies. The test functions are named after the cases and
/// defined in the invoking module: to run the suite against two implementations in one crate,
/// invoke it in two modules.
#[macro_export]
macro_rules! discovery_store_contract_suite {
    ($make_store:expr $(,)?) => {
        $crate::__discovery_store_contract_case!($make_store, an_empty_store_loads_nothing);
        $crate::__discovery_store_contract_case!($make_store, a_source_round_trips_every_field);
        $crate::__discovery_store_contract_case!($make_store, saving_a_source_again_replaces_it);
        $crate::__discovery_store_contract_case!(
            $make_store,
            delete_source_removes_only_that_source
        );
        $crate::__discovery_store_contract_case!($make_store, deleting_an_unknown_source_is_ok);
        $crate::__discovery_store_contract_case!($make_store, a_rejection_round_trips_every_field);
        $crate::__discovery_store_contract_case!(
            $make_store,
            rejections_are_upserted_by_source_and_name
        );
        $crate::__discovery_store_contract_case!(
            $make_store,
            delete_rejection_removes_only_that_pair
        );
        $crate::__discovery_store_contract_case!($make_store, deleting_an_unknown_rejection_is_ok);
        $crate::__discovery_store_contract_case!($make_store, the_loads_answer_everything_kept);
        $crate::__discovery_store_contract_case!($make_store, concurrent_writes_all_land);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __discovery_store_contract_case {
    ($make_store:expr, $case:ident) => {
        #[tokio::test]
        async fn $case() {
            let store = $make_store;
            $crate::discovery_store_suite::$case(&store).await;
        }
    };
}

#[async_trait]
impl<S: DiscoveryStore, G: Send + Sync> DiscoveryStore for RepositoryWithGuard<S, G> {
    async fn save_source(&self, source: &SourceDefinition) -> Result<(), DiscoveryStoreError> {
        self.repository.save_source(source).await
    }
    async fn delete_source(&self, source_id: &str) -> Result<(), DiscoveryStoreError> {
        self.repository.delete_source(source_id).await
    }
    async fn load_sources(&self) -> Result<Vec<SourceDefinition>, DiscoveryStoreError> {
        self.repository.load_sources().await
    }
    async fn save_rejection(&self, rejection: &Rejection) -> Result<(), DiscoveryStoreError> {
        self.repository.save_rejection(rejection).await
    }
    async fn delete_rejection(
        &self,
        source_id: &str,
        name: &str,
    ) -> Result<(), DiscoveryStoreError> {
        self.repository.delete_rejection(source_id, name).await
    }
    async fn load_rejections(&self) -> Result<Vec<Rejection>, DiscoveryStoreError> {
        self.repository.load_rejections().await
    }
}

/// A time with microseconds, so that a store that keeps milliseconds or seconds fails.
pub const SAMPLE_REJECTED_AT: Timestamp = Timestamp::from_unix_micros(1_790_000_000_123_457);

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("test value {other} is not a JSON object"),
    }
}

/// An `api` source of type `docker`, `authoritative` and disabled (both the non-default
/// values), whose `config` nests objects and arrays and holds every kind of JSON value,
/// including text a careless encoder would mangle.
pub fn sample_source(source_id: &str) -> SourceDefinition {
    SourceDefinition {
        source_id: source_id.to_owned(),
        source_type: "docker".to_owned(),
        mode: DiscoveryMode::Authoritative,
        enabled: false,
        config: object(json!({
            "socket_path": "unix:///run/user/1000/podman/podman.sock",
            "removal_grace_s": 90,
            "filters": {
                "labels": ["mcp.gateway.enabled=true", "team=\"search\"\nand ünïcödé ✓"],
                "nested": {"deeper": {"empty": {}, "list": []}},
            },
            "ratio": 0.1,
            "tiny": 1.5e-7,
            "negative": -42,
            "large": u64::MAX,
            "verbose": true,
            "token": null,
        })),
        origin: SourceOrigin::Api,
    }
}

/// An `api` source of type `filesystem`, `additive` and enabled, with a small `config`.
pub fn sample_files_source(source_id: &str) -> SourceDefinition {
    SourceDefinition {
        source_id: source_id.to_owned(),
        source_type: "filesystem".to_owned(),
        mode: DiscoveryMode::Additive,
        enabled: true,
        config: object(json!({"path": "/etc/mcp/servers.d"})),
        origin: SourceOrigin::Api,
    }
}

/// A rejection of a docker-mode definition with nested settings, at [`SAMPLE_REJECTED_AT`].
pub fn sample_rejection(source_id: &str, name: &str) -> Rejection {
    Rejection {
        source_id: source_id.to_owned(),
        name: name.to_owned(),
        definition: object(json!({
            "mode": "docker",
            "image": "localhost/mcpgw-fixture:test",
            "args": ["--stdio", "--name=\"x\""],
            "env": {"API_TOKEN": "s3cr=t;'", "EMPTY": ""},
            "idle_ttl_s": 30,
            "tools": [{"name": "add", "inputSchema": {"type": "object", "minimum": 0.1}}],
        })),
        rejected_at: SAMPLE_REJECTED_AT,
    }
}

async fn sources(store: &dyn DiscoveryStore) -> Vec<SourceDefinition> {
    let mut sources = store
        .load_sources()
        .await
        .unwrap_or_else(|error| panic!("load_sources failed: {error}"));
    sources.sort_by(|left, right| left.source_id.cmp(&right.source_id));
    sources
}

async fn rejections(store: &dyn DiscoveryStore) -> Vec<Rejection> {
    let mut rejections = store
        .load_rejections()
        .await
        .unwrap_or_else(|error| panic!("load_rejections failed: {error}"));
    rejections
        .sort_by(|left, right| (&left.source_id, &left.name).cmp(&(&right.source_id, &right.name)));
    rejections
}

async fn save_source(store: &dyn DiscoveryStore, source: &SourceDefinition) {
    store
        .save_source(source)
        .await
        .unwrap_or_else(|error| panic!("saving source `{}` failed: {error}", source.source_id));
}

async fn save_rejection(store: &dyn DiscoveryStore, rejection: &Rejection) {
    store
        .save_rejection(rejection)
        .await
        .unwrap_or_else(|error| {
            panic!(
                "saving rejection `{}/{}` failed: {error}",
                rejection.source_id, rejection.name
            )
        });
}

pub async fn an_empty_store_loads_nothing(store: &dyn DiscoveryStore) {
    assert_eq!(sources(store).await, []);
    assert_eq!(rejections(store).await, []);
}

pub async fn a_source_round_trips_every_field(store: &dyn DiscoveryStore) {
    let saved = vec![sample_source("docker-0"), sample_files_source("files-1")];
    for source in &saved {
        save_source(store, source).await;
    }
    assert_eq!(sources(store).await, saved);
    // An empty `config` is a valid one, not a missing one.
    let bare = SourceDefinition {
        config: Map::new(),
        ..sample_files_source("files-2")
    };
    save_source(store, &bare).await;
    assert_eq!(sources(store).await.last(), Some(&bare));
}

pub async fn saving_a_source_again_replaces_it(store: &dyn DiscoveryStore) {
    save_source(store, &sample_source("src")).await;
    save_source(store, &sample_files_source("other")).await;
    // Every field but the id changes, and the new `config` lacks keys the old one had, so a
    // store that merges or keys on anything but the id fails.
    let replacement = SourceDefinition {
        source_id: "src".to_owned(),
        ..sample_files_source("ignored")
    };
    save_source(store, &replacement).await;
    assert_eq!(
        sources(store).await,
        [sample_files_source("other"), replacement]
    );
}

pub async fn delete_source_removes_only_that_source(store: &dyn DiscoveryStore) {
    save_source(store, &sample_source("gone")).await;
    save_source(store, &sample_files_source("kept")).await;
    save_rejection(store, &sample_rejection("gone", "math")).await;
    store
        .delete_source("gone")
        .await
        .unwrap_or_else(|error| panic!("delete_source failed: {error}"));
    assert_eq!(sources(store).await, [sample_files_source("kept")]);
    // A source's rejections are the caller's to delete: the port ties nothing to a source.
    assert_eq!(rejections(store).await, [sample_rejection("gone", "math")]);
    // A deleted id can be saved again.
    save_source(store, &sample_source("gone")).await;
    assert_eq!(
        sources(store).await,
        [sample_source("gone"), sample_files_source("kept")]
    );
}

pub async fn deleting_an_unknown_source_is_ok(store: &dyn DiscoveryStore) {
    store
        .delete_source("never-saved")
        .await
        .unwrap_or_else(|error| {
            panic!("deleting an unknown source on an empty store failed: {error}")
        });
    save_source(store, &sample_source("kept")).await;
    store
        .delete_source("never-saved")
        .await
        .unwrap_or_else(|error| panic!("deleting an unknown source failed: {error}"));
    assert_eq!(sources(store).await, [sample_source("kept")]);
}

pub async fn a_rejection_round_trips_every_field(store: &dyn DiscoveryStore) {
    let rejection = sample_rejection("docker-0", "math server ✓");
    save_rejection(store, &rejection).await;
    let bare = Rejection {
        definition: Map::new(),
        rejected_at: Timestamp::from_unix_micros(1),
        ..sample_rejection("files-1", "web")
    };
    save_rejection(store, &bare).await;
    assert_eq!(rejections(store).await, [rejection, bare]);
}

pub async fn rejections_are_upserted_by_source_and_name(store: &dyn DiscoveryStore) {
    // The same name under two sources, and two names under one source: four rejections.
    for (source_id, name) in [("a", "math"), ("b", "math"), ("a", "web"), ("b", "web")] {
        save_rejection(store, &sample_rejection(source_id, name)).await;
    }
    let replacement = Rejection {
        definition: object(json!({"mode": "remote", "endpoint": "https://mcp.example.com/mcp"})),
        rejected_at: SAMPLE_REJECTED_AT.plus(std::time::Duration::from_micros(3)),
        ..sample_rejection("a", "math")
    };
    save_rejection(store, &replacement).await;
    assert_eq!(
        rejections(store).await,
        [
            replacement,
            sample_rejection("a", "web"),
            sample_rejection("b", "math"),
            sample_rejection("b", "web"),
        ]
    );
}

pub async fn delete_rejection_removes_only_that_pair(store: &dyn DiscoveryStore) {
    for (source_id, name) in [("a", "math"), ("b", "math"), ("a", "web")] {
        save_rejection(store, &sample_rejection(source_id, name)).await;
    }
    store
        .delete_rejection("a", "math")
        .await
        .unwrap_or_else(|error| panic!("delete_rejection failed: {error}"));
    assert_eq!(
        rejections(store).await,
        [sample_rejection("a", "web"), sample_rejection("b", "math")]
    );
    // A deleted pair can be rejected again.
    save_rejection(store, &sample_rejection("a", "math")).await;
    assert_eq!(rejections(store).await.len(), 3);
}

pub async fn deleting_an_unknown_rejection_is_ok(store: &dyn DiscoveryStore) {
    store
        .delete_rejection("a", "never-rejected")
        .await
        .unwrap_or_else(|error| {
            panic!("deleting an unknown rejection on an empty store failed: {error}")
        });
    save_rejection(store, &sample_rejection("a", "math")).await;
    // Known source, unknown name; unknown source, known name.
    for (source_id, name) in [("a", "web"), ("b", "math")] {
        store
            .delete_rejection(source_id, name)
            .await
            .unwrap_or_else(|error| {
                panic!("deleting unknown rejection `{source_id}/{name}` failed: {error}")
            });
    }
    assert_eq!(rejections(store).await, [sample_rejection("a", "math")]);
}

/// Many rows, some deleted: the loads answer exactly the rest, none dropped or duplicated.
pub async fn the_loads_answer_everything_kept(store: &dyn DiscoveryStore) {
    let mut kept_sources = Vec::new();
    for index in 0..60 {
        let source = if index % 2 == 0 {
            sample_source(&format!("source-{index:02}"))
        } else {
            sample_files_source(&format!("source-{index:02}"))
        };
        save_source(store, &source).await;
        if index % 5 == 0 {
            store.delete_source(&source.source_id).await.unwrap();
        } else {
            kept_sources.push(source);
        }
    }
    let mut kept_rejections = Vec::new();
    for index in 0..150 {
        let rejection = Rejection {
            rejected_at: Timestamp::from_unix_micros(index),
            ..sample_rejection(
                &format!("source-{:02}", index % 10),
                &format!("name-{index:03}"),
            )
        };
        save_rejection(store, &rejection).await;
        if index % 7 == 0 {
            store
                .delete_rejection(&rejection.source_id, &rejection.name)
                .await
                .unwrap();
        } else {
            kept_rejections.push(rejection);
        }
    }
    kept_rejections
        .sort_by(|left, right| (&left.source_id, &left.name).cmp(&(&right.source_id, &right.name)));
    assert_eq!(sources(store).await, kept_sources);
    assert_eq!(rejections(store).await, kept_rejections);
}

/// Writes issued together (as concurrent REST requests and a scan would) must all be stored.
pub async fn concurrent_writes_all_land(store: &dyn DiscoveryStore) {
    let saved_sources: Vec<SourceDefinition> = (0..16)
        .map(|index| sample_source(&format!("parallel-{index:02}")))
        .collect();
    let saved_rejections: Vec<Rejection> = (0..16)
        .map(|index| sample_rejection("parallel-00", &format!("name-{index:02}")))
        .collect();
    let source_writes = saved_sources.iter().map(|source| store.save_source(source));
    let rejection_writes = saved_rejections
        .iter()
        .map(|rejection| store.save_rejection(rejection));
    let (source_results, rejection_results) = futures::future::join(
        futures::future::join_all(source_writes),
        futures::future::join_all(rejection_writes),
    )
    .await;
    for result in source_results.into_iter().chain(rejection_results) {
        result.unwrap_or_else(|error| panic!("a concurrent write failed: {error}"));
    }
    assert_eq!(sources(store).await, saved_sources);
    assert_eq!(rejections(store).await, saved_rejections);
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use futures::FutureExt;
    use futures::future::BoxFuture;

    use super::*;
    use crate::discovery_fakes::InMemoryDiscoveryStore;

    mod guarded_contract {
        crate::discovery_store_contract_suite!(crate::repository_suite::RepositoryWithGuard::new(
            crate::discovery_fakes::InMemoryDiscoveryStore::new(),
            ()
        ));
    }

    /// A store with one deliberate flaw, to show that the suite notices it. It wraps the
    /// in-memory store and breaks one promise.
    #[derive(Clone, Copy)]
    enum Flaw {
        /// Saving a known source adds a second copy instead of replacing it.
        AppendsSources,
        /// Keeps only the top level of `config`: nested objects come back empty.
        FlattensConfig,
        /// Rejections are keyed by name alone, so another source's rejection replaces it.
        RejectionsKeyedByName,
        /// Deleting one rejection deletes every rejection of its source.
        DeletesTheSourcesRejections,
        /// Deleting an unknown source is an error.
        RefusesUnknownDeletes,
        /// Keeps times in milliseconds.
        TruncatesTimes,
    }

    struct FlawedStore {
        flaw: Flaw,
        inner: InMemoryDiscoveryStore,
        appended: Mutex<Vec<SourceDefinition>>,
    }

    #[async_trait]
    impl DiscoveryStore for FlawedStore {
        async fn save_source(&self, source: &SourceDefinition) -> Result<(), DiscoveryStoreError> {
            let mut source = source.clone();
            match self.flaw {
                Flaw::AppendsSources
                    if sources(&self.inner)
                        .await
                        .iter()
                        .any(|known| known.source_id == source.source_id) =>
                {
                    self.appended.lock().unwrap().push(source);
                    return Ok(());
                }
                Flaw::FlattensConfig => {
                    for value in source.config.values_mut() {
                        if value.is_object() {
                            *value = json!({});
                        }
                    }
                }
                _ => {}
            }
            self.inner.save_source(&source).await
        }
        async fn delete_source(&self, source_id: &str) -> Result<(), DiscoveryStoreError> {
            let known = sources(&self.inner)
                .await
                .iter()
                .any(|source| source.source_id == source_id);
            if matches!(self.flaw, Flaw::RefusesUnknownDeletes) && !known {
                return Err(DiscoveryStoreError(format!("no source `{source_id}`")));
            }
            self.inner.delete_source(source_id).await
        }
        async fn load_sources(&self) -> Result<Vec<SourceDefinition>, DiscoveryStoreError> {
            let mut loaded = self.inner.load_sources().await?;
            loaded.extend(self.appended.lock().unwrap().iter().cloned());
            Ok(loaded)
        }
        async fn save_rejection(&self, rejection: &Rejection) -> Result<(), DiscoveryStoreError> {
            let mut rejection = rejection.clone();
            match self.flaw {
                Flaw::RejectionsKeyedByName => {
                    for known in rejections(&self.inner).await {
                        if known.name == rejection.name {
                            self.inner
                                .delete_rejection(&known.source_id, &known.name)
                                .await?;
                        }
                    }
                }
                Flaw::TruncatesTimes => {
                    let micros = rejection.rejected_at.unix_micros();
                    rejection.rejected_at = Timestamp::from_unix_micros(micros - micros % 1_000);
                }
                _ => {}
            }
            self.inner.save_rejection(&rejection).await
        }
        async fn delete_rejection(
            &self,
            source_id: &str,
            name: &str,
        ) -> Result<(), DiscoveryStoreError> {
            if matches!(self.flaw, Flaw::DeletesTheSourcesRejections) {
                for known in rejections(&self.inner).await {
                    if known.source_id == source_id {
                        self.inner
                            .delete_rejection(&known.source_id, &known.name)
                            .await?;
                    }
                }
            }
            self.inner.delete_rejection(source_id, name).await
        }
        async fn load_rejections(&self) -> Result<Vec<Rejection>, DiscoveryStoreError> {
            self.inner.load_rejections().await
        }
    }

    /// Runs one case against a store with `flaw` and reports whether the case failed.
    async fn case_fails_on<F>(flaw: Flaw, case: F) -> bool
    where
        F: for<'a> FnOnce(&'a dyn DiscoveryStore) -> BoxFuture<'a, ()> + Send + 'static,
    {
        let store = FlawedStore {
            flaw,
            inner: InMemoryDiscoveryStore::new(),
            appended: Mutex::new(Vec::new()),
        };
        let outcome = tokio::spawn(async move { case(&store).await }).await;
        outcome.is_err_and(|error| error.is_panic())
    }

    #[tokio::test]
    async fn the_suite_fails_on_stores_that_break_the_contract() {
        assert!(
            case_fails_on(Flaw::AppendsSources, |store| {
                saving_a_source_again_replaces_it(store).boxed()
            })
            .await
        );
        assert!(
            case_fails_on(Flaw::FlattensConfig, |store| {
                a_source_round_trips_every_field(store).boxed()
            })
            .await
        );
        assert!(
            case_fails_on(Flaw::RejectionsKeyedByName, |store| {
                rejections_are_upserted_by_source_and_name(store).boxed()
            })
            .await
        );
        assert!(
            case_fails_on(Flaw::DeletesTheSourcesRejections, |store| {
                delete_rejection_removes_only_that_pair(store).boxed()
            })
            .await
        );
        assert!(
            case_fails_on(Flaw::RefusesUnknownDeletes, |store| {
                deleting_an_unknown_source_is_ok(store).boxed()
            })
            .await
        );
        assert!(
            case_fails_on(Flaw::TruncatesTimes, |store| {
                a_rejection_round_trips_every_field(store).boxed()
            })
            .await
        );
    }

    #[tokio::test]
    async fn the_flawed_stores_pass_the_cases_that_do_not_look_at_their_flaw() {
        // So the harness itself is not what fails above.
        assert!(
            !case_fails_on(Flaw::RefusesUnknownDeletes, |store| {
                saving_a_source_again_replaces_it(store).boxed()
            })
            .await
        );
        assert!(
            !case_fails_on(Flaw::TruncatesTimes, |store| {
                a_source_round_trips_every_field(store).boxed()
            })
            .await
        );
        assert!(
            !case_fails_on(Flaw::AppendsSources, |store| {
                rejections_are_upserted_by_source_and_name(store).boxed()
            })
            .await
        );
    }
}
