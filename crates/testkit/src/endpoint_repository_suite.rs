//! What every [`EndpointRepository`] must do, as tests that each implementation must pass, and
//! [`InMemoryEndpointRepository`], the implementation for tests of the code that uses the port.
//!
//! An adapter crate runs the whole suite against its own repository with one line in its tests:
//!
//! ```text
//! mcpgw_testkit::endpoint_repository_contract_suite!(make_my_repository().await);
//! ```
//!
//! Each case is also a public `async fn` taking `&dyn EndpointRepository`, for callers that need
//! to run one case by hand. The cases check what the port's documentation promises: a save is
//! an upsert by name that replaces every field, cleared ones included; deleting a name that is
//! not there is not an error; the load answers every endpoint saved and not deleted (in any
//! order, so the cases sort before comparing); every field round-trips: the selectors in their
//! order (duplicates included, since the first of two entries for one tool is the one served),
//! with and without overrides, the annotations as nested JSON with numbers of every kind, the
//! allow and deny lists in their order, `tool_search` both ways, and every origin.
//!
//! What a store does with a row it can no longer read back (it fails the load, naming the
//! endpoint) depends on how the store keeps rows, so each adapter tests that itself.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use mcpgw_core::{
    EndpointName, EndpointRepository, EndpointSpec, RepositoryError, ServerId, ServerOrigin,
    ToolSelector,
};
use serde_json::json;

use crate::repository_suite::RepositoryWithGuard;

/// Expands to one `#[tokio::test]` per case of what every [`EndpointRepository`] must do, each
/// running against a fresh repository made by evaluating `$make_repository` inside the test.
///
/// `$make_repository` is any expression of a type that implements [`EndpointRepository`]; it
/// is evaluated in an `async fn`, so it may `.await`. When the repository needs something kept
/// alive for the length of the test (a temporary directory), wrap both in
/// [`RepositoryWithGuard`], which implements [`EndpointRepository`] by delegation.
///
/// The tests use `#[tokio::test]`, so the invoking crate needs `tokio` with the `macros` and
/// `rt` features among its dev-dependencies. The test functions are named after the cases and
/// defined in the invoking module: to run the suite against two implementations in one crate,
/// invoke it in two modules.
#[macro_export]
macro_rules! endpoint_repository_contract_suite {
    ($make_repository:expr $(,)?) => {
        $crate::__endpoint_repository_contract_case!(
            $make_repository,
            an_empty_repository_loads_no_endpoints
        );
        $crate::__endpoint_repository_contract_case!(
            $make_repository,
            an_endpoint_round_trips_every_field
        );
        $crate::__endpoint_repository_contract_case!(
            $make_repository,
            an_endpoint_with_only_the_required_fields_round_trips
        );
        $crate::__endpoint_repository_contract_case!($make_repository, every_origin_round_trips);
        $crate::__endpoint_repository_contract_case!(
            $make_repository,
            saving_again_replaces_every_field
        );
        $crate::__endpoint_repository_contract_case!(
            $make_repository,
            delete_removes_only_the_endpoint_named
        );
        $crate::__endpoint_repository_contract_case!(
            $make_repository,
            deleting_an_unknown_name_is_ok
        );
        $crate::__endpoint_repository_contract_case!(
            $make_repository,
            a_deleted_endpoint_can_be_saved_again
        );
        $crate::__endpoint_repository_contract_case!(
            $make_repository,
            the_load_answers_every_endpoint_kept
        );
        $crate::__endpoint_repository_contract_case!(
            $make_repository,
            concurrent_endpoint_saves_all_land
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __endpoint_repository_contract_case {
    ($make_repository:expr, $case:ident) => {
        #[tokio::test]
        async fn $case() {
            let repository = $make_repository;
            $crate::endpoint_repository_suite::$case(&repository).await;
        }
    };
}

#[async_trait]
impl<R: EndpointRepository, G: Send + Sync> EndpointRepository for RepositoryWithGuard<R, G> {
    async fn save_endpoint(&self, spec: &EndpointSpec) -> Result<(), RepositoryError> {
        self.repository.save_endpoint(spec).await
    }
    async fn delete_endpoint(&self, name: &EndpointName) -> Result<(), RepositoryError> {
        self.repository.delete_endpoint(name).await
    }
    async fn load_endpoints(&self) -> Result<Vec<EndpointSpec>, RepositoryError> {
        self.repository.load_endpoints().await
    }
}

/// An [`EndpointRepository`] in memory: what a test of the code that uses the port gives it.
/// It loads the endpoints in name order.
#[derive(Debug, Default)]
pub struct InMemoryEndpointRepository {
    endpoints: Mutex<BTreeMap<EndpointName, EndpointSpec>>,
}

impl InMemoryEndpointRepository {
    pub fn new() -> Self {
        Self::default()
    }

    fn endpoints(&self) -> MutexGuard<'_, BTreeMap<EndpointName, EndpointSpec>> {
        self.endpoints
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl EndpointRepository for InMemoryEndpointRepository {
    async fn save_endpoint(&self, spec: &EndpointSpec) -> Result<(), RepositoryError> {
        self.endpoints().insert(spec.name.clone(), spec.clone());
        Ok(())
    }
    async fn delete_endpoint(&self, name: &EndpointName) -> Result<(), RepositoryError> {
        self.endpoints().remove(name);
        Ok(())
    }
    async fn load_endpoints(&self) -> Result<Vec<EndpointSpec>, RepositoryError> {
        Ok(self.endpoints().values().cloned().collect())
    }
}

/// `raw` as an endpoint name; panics, naming it, when a test wrote one that is not valid.
pub fn endpoint_name(raw: &str) -> EndpointName {
    EndpointName::parse(raw).unwrap_or_else(|error| panic!("test name `{raw}` is invalid: {error}"))
}

fn server_id(raw: &str) -> ServerId {
    ServerId::parse(raw).unwrap_or_else(|error| panic!("test id `{raw}` is invalid: {error}"))
}

/// A selector of every tool of `server`, with no overrides.
pub fn whole_server(server: &str) -> ToolSelector {
    ToolSelector {
        server: server_id(server),
        tool: None,
        name: None,
        title: None,
        description: None,
        annotations: None,
    }
}

/// A selector of one tool, with no overrides.
pub fn one_tool(server: &str, tool: &str) -> ToolSelector {
    ToolSelector {
        tool: Some(tool.to_owned()),
        ..whole_server(server)
    }
}

/// Annotations a careless store would change: nested objects and arrays, `null` inside them,
/// integers beyond what a double holds exactly, negative numbers, floats that only a correct
/// float reader reads back, very large and very small exponents, and text with quotes,
/// newlines and non-ASCII letters.
pub fn sample_annotations() -> serde_json::Value {
    json!({
        "readOnlyHint": true,
        "destructiveHint": false,
        "idempotentHint": true,
        "openWorldHint": false,
        "title": "Add \"two\" numbers\nwith ünïcödé ✓",
        "x-limits": {
            "max": u64::MAX,
            "min": i64::MIN,
            "ratio": 0.1,
            "third": 1.0 / 3.0,
            "huge": f64::MAX,
            "smallest": f64::MIN_POSITIVE,
            "tiny": 5e-324,
            "whole": 2.0,
            "steps": [1, -2, 3.5, "four", null, {"deep": {"deeper": [true, false]}}],
            "empty": {},
            "none": [],
        },
    })
}

/// An endpoint with every field set to something other than its default, so that a store that
/// drops or defaults a field fails the comparison. Its selectors: every tool of one server, one
/// tool without overrides, one with every override, one with a title alone, and a second entry
/// for a tool already selected (kept in its place: the first entry is the one served).
pub fn sample_endpoint(raw: &str) -> EndpointSpec {
    EndpointSpec {
        name: endpoint_name(raw),
        description: Some(format!("the {raw} endpoint, with \"quotes\" and ünïcödé")),
        tools: vec![
            whole_server("tickets"),
            one_tool("zeta", "search"),
            ToolSelector {
                name: Some("sum".to_owned()),
                title: Some("Sum".to_owned()),
                description: Some("Adds two numbers.\nNever fails.".to_owned()),
                annotations: Some(sample_annotations()),
                ..one_tool("math", "add")
            },
            ToolSelector {
                title: Some("Subtract".to_owned()),
                ..one_tool("math", "sub")
            },
            ToolSelector {
                name: Some("plus".to_owned()),
                ..one_tool("math", "add")
            },
        ],
        allow: vec![
            "group:support".to_owned(),
            "user:alice".to_owned(),
            "service:*".to_owned(),
        ],
        deny: vec!["user:mallory".to_owned(), "group:contractors".to_owned()],
        tool_search: true,
        origin: ServerOrigin::Discovery {
            source_id: "docker-0".to_owned(),
        },
    }
}

/// An endpoint with only what is required: no description, no selectors, no allow or deny
/// list, `tool_search` off (every optional field is left out of its serde form).
pub fn minimal_endpoint(raw: &str) -> EndpointSpec {
    EndpointSpec {
        name: endpoint_name(raw),
        description: None,
        tools: Vec::new(),
        allow: Vec::new(),
        deny: Vec::new(),
        tool_search: false,
        origin: ServerOrigin::Api,
    }
}

/// Every endpoint `repository` loads, in name order.
async fn load_sorted(repository: &dyn EndpointRepository) -> Vec<EndpointSpec> {
    let mut endpoints = repository
        .load_endpoints()
        .await
        .unwrap_or_else(|error| panic!("loading the endpoints failed: {error}"));
    endpoints.sort_by(|left, right| left.name.cmp(&right.name));
    endpoints
}

async fn save(repository: &dyn EndpointRepository, spec: &EndpointSpec) {
    repository
        .save_endpoint(spec)
        .await
        .unwrap_or_else(|error| panic!("saving the endpoint `{}` failed: {error}", spec.name));
}

async fn delete(repository: &dyn EndpointRepository, raw: &str) {
    repository
        .delete_endpoint(&endpoint_name(raw))
        .await
        .unwrap_or_else(|error| panic!("deleting the endpoint `{raw}` failed: {error}"));
}

// ----- the cases ----------------------------------------------------------------------------

pub async fn an_empty_repository_loads_no_endpoints(repository: &dyn EndpointRepository) {
    assert_eq!(load_sorted(repository).await, []);
}

pub async fn an_endpoint_round_trips_every_field(repository: &dyn EndpointRepository) {
    let spec = sample_endpoint("support");
    save(repository, &spec).await;
    let loaded = load_sorted(repository).await;
    assert_eq!(loaded, std::slice::from_ref(&spec));
    // Spelled out, so that a failure says which part was lost.
    let back = &loaded[0];
    assert_eq!(back.tools.len(), 5, "the selectors, duplicates included");
    assert!(!back.tools[0].overrides() && back.tools[0].tool.is_none());
    assert!(!back.tools[1].overrides());
    assert!(back.tools[2].overrides());
    assert_eq!(back.tools[2].annotations, Some(sample_annotations()));
    assert_eq!(back.tools[3].title.as_deref(), Some("Subtract"));
    assert_eq!(back.tools[3].name, None);
    assert_eq!(back.tools[4].name.as_deref(), Some("plus"));
    assert_eq!(back.allow, spec.allow, "the allow list, in its order");
    assert_eq!(back.deny, spec.deny, "the deny list, in its order");
    assert!(back.tool_search);
}

pub async fn an_endpoint_with_only_the_required_fields_round_trips(
    repository: &dyn EndpointRepository,
) {
    let minimal = minimal_endpoint("bare");
    save(repository, &minimal).await;
    // One selector of one tool whose overrides are all empty strings: set, not absent.
    let empty_overrides = EndpointSpec {
        tools: vec![ToolSelector {
            name: Some(String::new()),
            title: Some(String::new()),
            description: Some(String::new()),
            annotations: Some(json!({})),
            ..one_tool("math", "add")
        }],
        ..minimal_endpoint("empty-overrides")
    };
    save(repository, &empty_overrides).await;
    assert_eq!(load_sorted(repository).await, [minimal, empty_overrides]);
}

pub async fn every_origin_round_trips(repository: &dyn EndpointRepository) {
    let origins = [
        ("from-config", ServerOrigin::Config),
        ("from-api", ServerOrigin::Api),
        (
            "from-discovery",
            ServerOrigin::Discovery {
                source_id: "files-1".to_owned(),
            },
        ),
    ];
    let mut saved = Vec::new();
    for (raw, origin) in origins {
        let spec = EndpointSpec {
            origin,
            ..sample_endpoint(raw)
        };
        save(repository, &spec).await;
        saved.push(spec);
    }
    saved.sort_by(|left, right| left.name.cmp(&right.name));
    assert_eq!(load_sorted(repository).await, saved);
}

pub async fn saving_again_replaces_every_field(repository: &dyn EndpointRepository) {
    save(repository, &sample_endpoint("support")).await;
    // Every field cleared or changed: a store that merges the new definition into the old one
    // keeps something it should not.
    let cleared = minimal_endpoint("support");
    save(repository, &cleared).await;
    assert_eq!(load_sorted(repository).await, [cleared]);
    // And back: every field set again.
    let changed = EndpointSpec {
        tools: vec![one_tool("web", "fetch")],
        allow: vec!["*".to_owned()],
        ..sample_endpoint("support")
    };
    save(repository, &changed).await;
    assert_eq!(load_sorted(repository).await, [changed]);
}

pub async fn delete_removes_only_the_endpoint_named(repository: &dyn EndpointRepository) {
    save(repository, &sample_endpoint("gone")).await;
    save(repository, &sample_endpoint("kept")).await;
    // A name that differs only in case, or by a prefix, is another endpoint.
    save(repository, &minimal_endpoint("Gone")).await;
    save(repository, &minimal_endpoint("gone-too")).await;
    delete(repository, "gone").await;
    assert_eq!(
        load_sorted(repository).await,
        [
            minimal_endpoint("Gone"),
            minimal_endpoint("gone-too"),
            sample_endpoint("kept")
        ]
    );
}

pub async fn deleting_an_unknown_name_is_ok(repository: &dyn EndpointRepository) {
    delete(repository, "never-saved").await;
    save(repository, &sample_endpoint("support")).await;
    delete(repository, "never-saved").await;
    // Deleting twice is deleting what is no longer there.
    delete(repository, "support").await;
    delete(repository, "support").await;
    assert_eq!(load_sorted(repository).await, []);
}

pub async fn a_deleted_endpoint_can_be_saved_again(repository: &dyn EndpointRepository) {
    save(repository, &sample_endpoint("support")).await;
    delete(repository, "support").await;
    assert_eq!(load_sorted(repository).await, []);
    let again = EndpointSpec {
        tool_search: false,
        ..sample_endpoint("support")
    };
    save(repository, &again).await;
    assert_eq!(load_sorted(repository).await, [again]);
}

pub async fn the_load_answers_every_endpoint_kept(repository: &dyn EndpointRepository) {
    let names = ["m", "b", "z", "a", "k", "B", "_", "-", "9", "a-b"];
    for raw in names {
        save(repository, &sample_endpoint(raw)).await;
    }
    // The longest name a path segment allows.
    let longest = "x".repeat(EndpointName::MAX_LENGTH);
    save(repository, &minimal_endpoint(&longest)).await;
    delete(repository, "k").await;
    let loaded: Vec<String> = load_sorted(repository)
        .await
        .into_iter()
        .map(|spec| spec.name.to_string())
        .collect();
    let mut expected: Vec<String> = names
        .iter()
        .filter(|raw| **raw != "k")
        .map(|raw| (*raw).to_owned())
        .chain([longest])
        .collect();
    expected.sort();
    assert_eq!(loaded, expected);
}

pub async fn concurrent_endpoint_saves_all_land(repository: &dyn EndpointRepository) {
    let specs: Vec<EndpointSpec> = (0..16)
        .map(|index| sample_endpoint(&format!("endpoint-{index:02}")))
        .collect();
    let saves = specs.iter().map(|spec| repository.save_endpoint(spec));
    for (result, spec) in futures::future::join_all(saves)
        .await
        .into_iter()
        .zip(&specs)
    {
        result.unwrap_or_else(|error| panic!("saving `{}` failed: {error}", spec.name));
    }
    assert_eq!(load_sorted(repository).await, specs);
}

#[cfg(test)]
mod in_memory {
    crate::endpoint_repository_contract_suite!(super::InMemoryEndpointRepository::new());
}
