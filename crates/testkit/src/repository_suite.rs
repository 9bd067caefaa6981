//! The contract of [`ServerRepository`], as tests that every implementation must pass, and an
//! in-memory implementation for tests of the code that uses the port.
//!
//! An adapter crate runs the whole suite against its own repository with one line in its tests:
//!
//! ```text
//! mcpgw_testkit::server_repository_contract_suite!(make_my_repository().await);
//! ```
//!
//! Each case is also a public `async fn` taking `&dyn ServerRepository`, for callers that need
//! to run one case by hand.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_core::{
    ContainerEngine, LaunchSpec, RepositoryError, ServerId, ServerOrigin, ServerRepository,
    ServerSpec, Tool,
};
use serde_json::json;

/// Expands to one `#[tokio::test]` per case of the [`ServerRepository`] contract, each running
/// against a fresh repository made by evaluating `$make_repository` inside the test.
///
/// `$make_repository` is any expression of a type that implements [`ServerRepository`]; it is
/// evaluated in an `async fn`, so it may `.await`. When the repository needs something kept alive
/// for the length of the test (a temporary directory), wrap both in [`RepositoryWithGuard`].
///
/// The tests use `#[tokio::test]`, so the crate that invokes this macro needs `tokio` with the
/// `macros` and `rt` features among its dev-dependencies. The test functions are named after the
/// cases and defined in the invoking module: to run the suite against two implementations in
/// one crate, invoke it in two modules.
///
/// ```text
/// mod sqlite {
///     mcpgw_testkit::server_repository_contract_suite!(open_temporary_store());
/// }
/// ```
#[macro_export]
macro_rules! server_repository_contract_suite {
    ($make_repository:expr $(,)?) => {
        $crate::__server_repository_contract_case!(
            $make_repository,
            load_all_on_an_empty_repository_is_empty
        );
        $crate::__server_repository_contract_case!(
            $make_repository,
            save_then_load_all_returns_equal_specs
        );
        $crate::__server_repository_contract_case!($make_repository, saving_twice_is_an_upsert);
        $crate::__server_repository_contract_case!($make_repository, delete_removes_the_server);
        $crate::__server_repository_contract_case!($make_repository, deleting_an_unknown_id_is_ok);
        $crate::__server_repository_contract_case!($make_repository, many_servers_round_trip);
        $crate::__server_repository_contract_case!($make_repository, concurrent_saves_all_land);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __server_repository_contract_case {
    ($make_repository:expr, $case:ident) => {
        #[tokio::test]
        async fn $case() {
            let repository = $make_repository;
            $crate::repository_suite::$case(&repository).await;
        }
    };
}

/// A repository together with something that must outlive it, such as the temporary
/// directory its database lives in. It implements [`ServerRepository`] by delegation.
pub struct RepositoryWithGuard<R, G> {
    pub repository: R,
    pub guard: G,
}

impl<R, G> RepositoryWithGuard<R, G> {
    pub fn new(repository: R, guard: G) -> Self {
        Self { repository, guard }
    }
}

#[async_trait]
impl<R: ServerRepository, G: Send + Sync> ServerRepository for RepositoryWithGuard<R, G> {
    async fn save(&self, spec: &ServerSpec) -> Result<(), RepositoryError> {
        self.repository.save(spec).await
    }

    async fn delete(&self, id: &ServerId) -> Result<(), RepositoryError> {
        self.repository.delete(id).await
    }

    async fn load_all(&self) -> Result<Vec<ServerSpec>, RepositoryError> {
        self.repository.load_all().await
    }
}

/// A [`ServerRepository`] in memory: what a test of the code that uses the port gives it.
///
/// [`fail_next_save`](Self::fail_next_save) makes the next `save` fail, for tests of what the
/// caller does when persisting fails.
#[derive(Default)]
pub struct InMemoryServerRepository {
    servers: Mutex<BTreeMap<ServerId, ServerSpec>>,
    next_save_failure: Mutex<Option<String>>,
}

impl InMemoryServerRepository {
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the next `save` return a [`RepositoryError`] with `message` and store nothing;
    /// the saves after it succeed again.
    pub fn fail_next_save(&self, message: impl Into<String>) {
        *lock(&self.next_save_failure) = Some(message.into());
    }
}

/// A panic in one test must not turn every later use of a shared fake into a second panic.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[async_trait]
impl ServerRepository for InMemoryServerRepository {
    async fn save(&self, spec: &ServerSpec) -> Result<(), RepositoryError> {
        if let Some(message) = lock(&self.next_save_failure).take() {
            return Err(RepositoryError(message));
        }
        lock(&self.servers).insert(spec.id.clone(), spec.clone());
        Ok(())
    }

    async fn delete(&self, id: &ServerId) -> Result<(), RepositoryError> {
        lock(&self.servers).remove(id);
        Ok(())
    }

    async fn load_all(&self) -> Result<Vec<ServerSpec>, RepositoryError> {
        Ok(lock(&self.servers).values().cloned().collect())
    }
}

fn server_id(raw: &str) -> ServerId {
    ServerId::parse(raw).unwrap_or_else(|error| panic!("test id `{raw}` is invalid: {error}"))
}

/// A subprocess server with every optional field set to something other than its default,
/// including text that a careless encoder would mangle (quotes, newlines, non-ASCII).
pub fn sample_subprocess_spec(id: &str) -> ServerSpec {
    ServerSpec {
        id: server_id(id),
        description: Some("adds \"numbers\"\nand ünïcode ✓".to_owned()),
        launch: LaunchSpec::Subprocess {
            command: vec!["python3".into(), "-m".into(), "math server".into()],
            env: BTreeMap::from([
                ("API_TOKEN".to_owned(), "s3cr=t;'\"".to_owned()),
                ("EMPTY".to_owned(), String::new()),
            ]),
            cwd: Some("/srv/math".to_owned()),
        },
        idle_ttl: Duration::from_millis(1_500),
        health_check_interval: Duration::from_secs(17),
        max_consecutive_failures: 9,
        predefined_tools: vec![
            Tool::new("add").with_description("adds two numbers").with_input_schema(json!({
                "type": "object",
                "properties": {"a": {"type": "number", "minimum": 0.1}, "b": {"type": "number"}},
                "required": ["a", "b"],
            })),
            Tool {
                name: "describe".to_owned(),
                title: Some("Describe".to_owned()),
                description: None,
                input_schema: json!({"type": "object"}),
                output_schema: Some(json!({"type": "object", "properties": {}})),
                annotations: Some(json!({"readOnlyHint": true})),
            },
        ],
        origin: ServerOrigin::Api,
        caller_meta: Some(std::sync::Arc::new("com.example/caller".to_owned())),
        tool_pinning: Some(mcpgw_core::ToolPinning {
            mode: mcpgw_core::PinMode::Enforce,
            approve_first: true,
        }),
    }
}

/// A docker server with every field set.
pub fn sample_docker_spec(id: &str) -> ServerSpec {
    ServerSpec {
        id: server_id(id),
        description: Some("a boxed server".to_owned()),
        launch: LaunchSpec::Docker {
            image: "localhost/fixture:1.2".to_owned(),
            args: vec!["--stdio".into(), "--verbose".into()],
            env: BTreeMap::from([("MODE".to_owned(), "strict".to_owned())]),
            network: "bridge".to_owned(),
            memory: Some("512m".to_owned()),
            cpus: Some("1.5".to_owned()),
            read_only: false,
            volumes: vec!["/data:/data:ro".to_owned()],
            engine: ContainerEngine::Host("unix:///run/podman/podman.sock".to_owned()),
        },
        idle_ttl: Duration::from_secs(86_400),
        health_check_interval: Duration::from_secs(5),
        max_consecutive_failures: 1,
        predefined_tools: Vec::new(),
        origin: ServerOrigin::Discovery {
            source_id: "docker-0".to_owned(),
        },
        caller_meta: Some(std::sync::Arc::new("org.example/principal".to_owned())),
        tool_pinning: Some(mcpgw_core::ToolPinning {
            mode: mcpgw_core::PinMode::Warn,
            approve_first: false,
        }),
    }
}

/// A remote server with headers.
pub fn sample_remote_spec(id: &str) -> ServerSpec {
    ServerSpec {
        id: server_id(id),
        description: None,
        launch: LaunchSpec::Remote {
            endpoint: "https://mcp.example.com/mcp?tenant=a&x=1".to_owned(),
            headers: BTreeMap::from([
                ("Authorization".to_owned(), "Bearer abc.def".to_owned()),
                ("X-Trace".to_owned(), "on".to_owned()),
            ]),
            // Kept whole, client secret included: the store is where it lives.
            token_exchange: Some(mcpgw_core::TokenExchange {
                token_endpoint: "https://idp.example.com/token".to_owned(),
                client_id: "mcpgw".to_owned(),
                client_secret: "s3cret".to_owned(),
                client_auth: mcpgw_core::ClientAuth::ClientSecretPost,
                resource: Some("https://mcp.example.com/mcp".to_owned()),
                audience: None,
                scope: Some("files:read".to_owned()),
            }),
        },
        idle_ttl: Duration::from_secs(1),
        health_check_interval: Duration::from_secs(3_600),
        max_consecutive_failures: 100,
        predefined_tools: vec![Tool::new("search")],
        origin: ServerOrigin::Config,
        caller_meta: None,
        tool_pinning: None,
    }
}

async fn load_sorted(repository: &dyn ServerRepository) -> Vec<ServerSpec> {
    let mut specs = repository
        .load_all()
        .await
        .unwrap_or_else(|error| panic!("load_all failed: {error}"));
    specs.sort_by(|left, right| left.id.cmp(&right.id));
    specs
}

async fn save(repository: &dyn ServerRepository, spec: &ServerSpec) {
    repository
        .save(spec)
        .await
        .unwrap_or_else(|error| panic!("saving `{}` failed: {error}", spec.id));
}

pub async fn load_all_on_an_empty_repository_is_empty(repository: &dyn ServerRepository) {
    assert_eq!(load_sorted(repository).await, Vec::new());
}

pub async fn save_then_load_all_returns_equal_specs(repository: &dyn ServerRepository) {
    let specs = vec![
        sample_docker_spec("box"),
        sample_subprocess_spec("math"),
        sample_remote_spec("web"),
    ];
    for spec in &specs {
        save(repository, spec).await;
    }
    assert_eq!(load_sorted(repository).await, specs);
}

pub async fn saving_twice_is_an_upsert(repository: &dyn ServerRepository) {
    let first = sample_subprocess_spec("math");
    save(repository, &first).await;
    // The second version changes the mode too, so a store keyed on anything but the id fails.
    let mut second = sample_remote_spec("math");
    second.description = Some("moved to http".to_owned());
    save(repository, &second).await;
    assert_eq!(load_sorted(repository).await, vec![second]);
}

pub async fn delete_removes_the_server(repository: &dyn ServerRepository) {
    let kept = sample_remote_spec("kept");
    let removed = sample_subprocess_spec("removed");
    save(repository, &kept).await;
    save(repository, &removed).await;
    repository
        .delete(&removed.id)
        .await
        .unwrap_or_else(|error| panic!("delete failed: {error}"));
    assert_eq!(load_sorted(repository).await, vec![kept.clone()]);

    // A deleted id can be saved again.
    save(repository, &removed).await;
    assert_eq!(load_sorted(repository).await, vec![kept, removed]);
}

pub async fn deleting_an_unknown_id_is_ok(repository: &dyn ServerRepository) {
    let unknown = server_id("never-saved");
    repository.delete(&unknown).await.unwrap_or_else(|error| {
        panic!("delete of an unknown id on an empty store failed: {error}")
    });
    let kept = sample_docker_spec("kept");
    save(repository, &kept).await;
    repository
        .delete(&unknown)
        .await
        .unwrap_or_else(|error| panic!("delete of an unknown id failed: {error}"));
    assert_eq!(load_sorted(repository).await, vec![kept]);
}

pub async fn many_servers_round_trip(repository: &dyn ServerRepository) {
    let specs: Vec<ServerSpec> = (0..200)
        .map(|index| {
            let id = format!("server-{index:03}");
            let mut spec = match index % 3 {
                0 => sample_subprocess_spec(&id),
                1 => sample_docker_spec(&id),
                _ => sample_remote_spec(&id),
            };
            spec.max_consecutive_failures = index + 1;
            spec
        })
        .collect();
    for spec in &specs {
        save(repository, spec).await;
    }
    let loaded = load_sorted(repository).await;
    assert_eq!(loaded.len(), specs.len());
    assert_eq!(loaded, specs);
}

/// Saves issued together (as concurrent REST requests would) must all be stored.
pub async fn concurrent_saves_all_land(repository: &dyn ServerRepository) {
    let specs: Vec<ServerSpec> = (0..32)
        .map(|index| sample_subprocess_spec(&format!("parallel-{index:02}")))
        .collect();
    let results = futures::future::join_all(specs.iter().map(|spec| repository.save(spec))).await;
    for (spec, result) in specs.iter().zip(results) {
        result.unwrap_or_else(|error| panic!("saving `{}` failed: {error}", spec.id));
    }
    let loaded: HashMap<ServerId, ServerSpec> = load_sorted(repository)
        .await
        .into_iter()
        .map(|spec| (spec.id.clone(), spec))
        .collect();
    assert_eq!(loaded.len(), specs.len());
    for spec in &specs {
        assert_eq!(
            loaded.get(&spec.id),
            Some(spec),
            "`{}` is missing or differs",
            spec.id
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod in_memory_contract {
        crate::server_repository_contract_suite!(
            crate::repository_suite::InMemoryServerRepository::default()
        );
    }

    #[tokio::test]
    async fn fail_next_save_fails_exactly_one_save_and_stores_nothing() {
        let repository = InMemoryServerRepository::new();
        repository.fail_next_save("disk full");
        let spec = sample_remote_spec("web");
        let error = repository.save(&spec).await.unwrap_err();
        assert_eq!(error.to_string(), "disk full");
        assert_eq!(load_sorted(&repository).await, Vec::new());

        save(&repository, &spec).await;
        assert_eq!(load_sorted(&repository).await, vec![spec]);
    }

    /// A repository with one deliberate flaw, to show that the suite notices it.
    #[derive(Clone, Copy)]
    enum Flaw {
        AppendsInsteadOfUpserting,
        ForgetsDescriptions,
        IgnoresDeletes,
        DropsEveryHundredthSave,
    }

    struct FlawedRepository {
        flaw: Flaw,
        servers: Mutex<Vec<ServerSpec>>,
    }

    #[async_trait]
    impl ServerRepository for FlawedRepository {
        async fn save(&self, spec: &ServerSpec) -> Result<(), RepositoryError> {
            let mut servers = lock(&self.servers);
            let mut spec = spec.clone();
            match self.flaw {
                Flaw::AppendsInsteadOfUpserting => {}
                Flaw::ForgetsDescriptions => spec.description = None,
                Flaw::IgnoresDeletes => {}
                Flaw::DropsEveryHundredthSave if servers.len() == 99 => return Ok(()),
                Flaw::DropsEveryHundredthSave => {}
            }
            if !matches!(self.flaw, Flaw::AppendsInsteadOfUpserting) {
                servers.retain(|existing| existing.id != spec.id);
            }
            servers.push(spec);
            Ok(())
        }

        async fn delete(&self, id: &ServerId) -> Result<(), RepositoryError> {
            if !matches!(self.flaw, Flaw::IgnoresDeletes) {
                lock(&self.servers).retain(|existing| &existing.id != id);
            }
            Ok(())
        }

        async fn load_all(&self) -> Result<Vec<ServerSpec>, RepositoryError> {
            Ok(lock(&self.servers).clone())
        }
    }

    /// Runs one case against a repository with `flaw` and reports whether the case failed.
    async fn case_fails_on<F>(flaw: Flaw, case: F) -> bool
    where
        F: for<'a> FnOnce(&'a dyn ServerRepository) -> futures::future::BoxFuture<'a, ()>
            + Send
            + 'static,
    {
        let repository = FlawedRepository {
            flaw,
            servers: Mutex::new(Vec::new()),
        };
        let outcome = tokio::spawn(async move { case(&repository).await }).await;
        outcome.is_err_and(|error| error.is_panic())
    }

    #[tokio::test]
    async fn the_suite_fails_on_repositories_that_break_the_contract() {
        use futures::FutureExt;

        assert!(
            case_fails_on(Flaw::AppendsInsteadOfUpserting, |repository| {
                saving_twice_is_an_upsert(repository).boxed()
            })
            .await
        );
        assert!(
            case_fails_on(Flaw::ForgetsDescriptions, |repository| {
                save_then_load_all_returns_equal_specs(repository).boxed()
            })
            .await
        );
        assert!(
            case_fails_on(Flaw::IgnoresDeletes, |repository| {
                delete_removes_the_server(repository).boxed()
            })
            .await
        );
        assert!(
            case_fails_on(Flaw::DropsEveryHundredthSave, |repository| {
                many_servers_round_trip(repository).boxed()
            })
            .await
        );
        // The same flaws pass the cases that do not look at them, so the harness itself is not
        // what fails.
        assert!(
            !case_fails_on(Flaw::IgnoresDeletes, |repository| {
                saving_twice_is_an_upsert(repository).boxed()
            })
            .await
        );
    }

    #[tokio::test]
    async fn the_guard_lives_as_long_as_the_wrapped_repository() {
        let guard = std::sync::Arc::new(());
        let wrapped = RepositoryWithGuard::new(
            InMemoryServerRepository::new(),
            std::sync::Arc::clone(&guard),
        );
        save(&wrapped, &sample_docker_spec("box")).await;
        assert_eq!(std::sync::Arc::strong_count(&guard), 2);
        assert_eq!(load_sorted(&wrapped).await, vec![sample_docker_spec("box")]);
        drop(wrapped);
        assert_eq!(std::sync::Arc::strong_count(&guard), 1);
    }
}
