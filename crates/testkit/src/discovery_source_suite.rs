//! What every [`DiscoverySource`] and [`DiscoverySourceFactory`] promise, as tests that every
//! source type must pass, and [`InMemorySourceFactory`], a source type kept in memory for tests
//! of the code that uses the ports.
//!
//! What a source reads differs by type (a directory of files, a container engine), so the suite
//! works through a [`DiscoverySourceFixture`] that the adapter's tests write once: it names the
//! factory, gives the definitions of a source that reads a place of the fixture's own and of
//! one that cannot be read, and puts servers in that place or takes them away. The adapter
//! crate then runs the whole suite with one line in its tests:
//!
//! ```text
//! mcpgw_testkit::discovery_source_contract_suite!(MyFixture::new().await);
//! ```
//!
//! Each case is also a public `async fn` taking `&dyn DiscoverySourceFixture`, for callers that
//! need to run one case by hand. The cases check what the ports' documentation promises:
//! - `scan` answers everything the source sees now, one candidate per server, with the
//!   definition as placed: not validated (a definition the registry would refuse is passed on
//!   as it is), and what cannot be read is a candidate whose `definition` is the reason, next
//!   to the others; a server taken away is gone from the next scan;
//! - `scan` answers `Err` when the source as a whole cannot be read, and every scan returns
//!   within [`SCAN_BOUND`];
//! - `changed`, for a source that can tell, completes after a server is put in or taken away
//!   since the last scan (also when that happened before `changed` was called), and stays
//!   pending while nothing happens and after a scan that saw the change; a source that cannot
//!   tell never completes it;
//! - the factory lists the fixture's type among its `source_types`, builds its sources, and
//!   refuses a definition whose `config` is not valid with a message that names the key.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_discovery::{
    DiscoveredCandidate, DiscoveryMode, DiscoverySource, DiscoverySourceFactory, SourceDefinition,
    SourceError, SourceOrigin,
};
use serde_json::{Map, Value, json};
use tokio::sync::watch;

/// The longest a scan may take in the suite: "a few seconds", with room for a loaded machine.
pub const SCAN_BOUND: Duration = Duration::from_secs(10);

/// How long `changed` is watched to show that it stays pending. A source that polls must look
/// at least every quarter of a second in the suite.
pub const QUIET_FOR: Duration = Duration::from_millis(750);

/// How long a change may take to be reported.
pub const NOTICED_WITHIN: Duration = Duration::from_secs(5);

/// A place servers are discovered in, under the test's control, and the source type that
/// reads it.
#[async_trait]
pub trait DiscoverySourceFixture: Send + Sync {
    /// The factory under test.
    fn factory(&self) -> Arc<dyn DiscoverySourceFactory>;

    /// A definition of a source that reads this fixture's place, of a type among the factory's
    /// `source_types`.
    fn definition(&self) -> SourceDefinition;

    /// A definition of the same type whose source cannot be read as a whole (a directory that
    /// does not exist, an engine that does not answer). The factory must build it.
    fn unreadable_definition(&self) -> SourceDefinition;

    /// Definitions of the type that the factory must refuse, each with the `config` key whose
    /// value is at fault (the message must name it).
    fn invalid_definitions(&self) -> Vec<(SourceDefinition, String)>;

    /// Puts a server called `name` where the source looks, and answers the definition the
    /// source must report for it, in the configuration file's shape.
    async fn add_server(&self, name: &str) -> Map<String, Value>;

    /// Puts a server called `name` whose definition the registry would refuse (an unknown
    /// mode, say) but that the source can read, and answers that definition.
    async fn add_invalid_server(&self, name: &str) -> Map<String, Value>;

    /// Puts something called `name` where the source looks that it cannot read into a
    /// definition (a broken file, a broken label).
    async fn add_unreadable_server(&self, name: &str);

    /// Takes away what was put in under `name`.
    async fn remove_server(&self, name: &str);

    /// Whether the source's `changed` tells changes; when not, it must never complete.
    fn reports_changes(&self) -> bool;

    /// Whether `candidate` comes from what this fixture put in. A place shared with others (an
    /// engine that also runs other containers) answers `false` for theirs, and the cases
    /// leave those out.
    fn is_own(&self, _candidate: &DiscoveredCandidate) -> bool {
        true
    }
}

/// Expands to one `#[tokio::test]` per case of the [`DiscoverySource`] and
/// [`DiscoverySourceFactory`] contract, each running against a fresh fixture made by
/// evaluating `$make_fixture` (any expression of a type that implements
/// [`DiscoverySourceFixture`]; it may `.await`).
///
/// The tests use `#[tokio::test(flavor = "multi_thread")]`, so the invoking crate needs `tokio`
/// with the `macros`, `rt`, `rt-multi-thread` and `time` features among its dev-dependencies.
/// The test functions are named after the cases and defined in the invoking module: to run the
/// suite against two source types in one crate, invoke it in two modules.
#[macro_export]
macro_rules! discovery_source_contract_suite {
    ($make_fixture:expr $(,)?) => {
        $crate::__discovery_source_contract_case!($make_fixture, an_empty_place_has_no_candidates);
        $crate::__discovery_source_contract_case!(
            $make_fixture,
            scan_answers_one_candidate_per_server_with_its_definition
        );
        $crate::__discovery_source_contract_case!(
            $make_fixture,
            scan_passes_definitions_on_without_validating_them
        );
        $crate::__discovery_source_contract_case!(
            $make_fixture,
            what_cannot_be_read_is_a_candidate_with_its_reason
        );
        $crate::__discovery_source_contract_case!(
            $make_fixture,
            a_server_taken_away_is_gone_from_the_next_scan
        );
        $crate::__discovery_source_contract_case!(
            $make_fixture,
            a_source_that_cannot_be_read_answers_an_error
        );
        $crate::__discovery_source_contract_case!(
            $make_fixture,
            changed_stays_pending_while_nothing_happens
        );
        $crate::__discovery_source_contract_case!(
            $make_fixture,
            changed_completes_after_a_server_comes_or_goes
        );
        $crate::__discovery_source_contract_case!(
            $make_fixture,
            a_change_before_waiting_is_reported
        );
        $crate::__discovery_source_contract_case!(
            $make_fixture,
            the_factory_builds_the_types_it_lists
        );
        $crate::__discovery_source_contract_case!(
            $make_fixture,
            the_factory_refuses_invalid_settings_naming_the_key
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __discovery_source_contract_case {
    ($make_fixture:expr, $case:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            let fixture = $make_fixture;
            $crate::discovery_source_suite::$case(&fixture).await;
        }
    };
}

// ----- an in-memory source type -------------------------------------------------------------

/// The `source_type` of [`InMemorySourceFactory`].
pub const IN_MEMORY_SOURCE_TYPE: &str = "memory";

/// The `config` key that names the [`InMemoryPlace`] a `memory` source reads.
pub const PLACE_KEY: &str = "place";

/// A place servers are discovered in, kept in memory: what a test puts in is what the sources
/// reading it see. [`fail_scans`](Self::fail_scans) makes it unreadable as a whole.
pub struct InMemoryPlace {
    state: Mutex<PlaceState>,
    /// Moves on every change, so that sources can tell one happened.
    version: watch::Sender<u64>,
}

#[derive(Default)]
struct PlaceState {
    candidates: BTreeMap<String, DiscoveredCandidate>,
    failure: Option<String>,
}

impl Default for InMemoryPlace {
    fn default() -> Self {
        Self {
            state: Mutex::new(PlaceState::default()),
            version: watch::Sender::new(0),
        }
    }
}

impl InMemoryPlace {
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, PlaceState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn touch(&self) {
        self.version.send_modify(|version| *version += 1);
    }

    /// Puts `candidate` in, replacing one of the same name.
    pub fn put(&self, candidate: DiscoveredCandidate) {
        self.state()
            .candidates
            .insert(candidate.name.clone(), candidate);
        self.touch();
    }

    /// Puts in a server called `name` with `definition`.
    pub fn put_server(&self, name: &str, definition: Map<String, Value>) {
        self.put(DiscoveredCandidate {
            name: name.to_owned(),
            location: format!("memory entry {name}"),
            definition: Ok(definition),
        });
    }

    /// Takes away what was put in under `name`.
    pub fn remove(&self, name: &str) {
        self.state().candidates.remove(name);
        self.touch();
    }

    /// Makes every scan fail with `reason`, or (with `None`) answer again.
    pub fn fail_scans(&self, reason: Option<&str>) {
        self.state().failure = reason.map(str::to_owned);
        self.touch();
    }
}

/// A source reading an [`InMemoryPlace`]; it tells changes.
pub struct InMemorySource {
    place: Option<Arc<InMemoryPlace>>,
    place_name: String,
    /// The place's version at the last scan, or at the last change reported.
    seen: Mutex<u64>,
}

#[async_trait]
impl DiscoverySource for InMemorySource {
    async fn scan(&self) -> Result<Vec<DiscoveredCandidate>, SourceError> {
        let Some(place) = &self.place else {
            return Err(SourceError(format!(
                "there is no place called `{}` in memory",
                self.place_name
            )));
        };
        let state = place.state();
        *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = *place.version.borrow();
        match &state.failure {
            Some(reason) => Err(SourceError(reason.clone())),
            None => Ok(state.candidates.values().cloned().collect()),
        }
    }

    async fn changed(&self) {
        let Some(place) = &self.place else {
            return futures::future::pending().await;
        };
        let mut versions = place.version.subscribe();
        loop {
            {
                let now = *versions.borrow_and_update();
                let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
                if now != *seen {
                    *seen = now;
                    return;
                }
            }
            if versions.changed().await.is_err() {
                return futures::future::pending().await;
            }
        }
    }
}

/// Builds `memory` sources, each reading the [`InMemoryPlace`] its `config.place` names among
/// those [`add_place`](Self::add_place) registered. A name not registered builds a source
/// whose scans fail, as a directory that does not exist would.
#[derive(Default)]
pub struct InMemorySourceFactory {
    places: Mutex<BTreeMap<String, Arc<InMemoryPlace>>>,
}

impl InMemorySourceFactory {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `place` under `name`, for `config: {"place": name}`.
    pub fn add_place(&self, name: &str, place: Arc<InMemoryPlace>) {
        self.places
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_owned(), place);
    }
}

impl DiscoverySourceFactory for InMemorySourceFactory {
    fn source_types(&self) -> Vec<&'static str> {
        vec![IN_MEMORY_SOURCE_TYPE]
    }

    fn build(&self, definition: &SourceDefinition) -> Result<Arc<dyn DiscoverySource>, String> {
        if definition.source_type != IN_MEMORY_SOURCE_TYPE {
            return Err(format!(
                "this factory builds `{IN_MEMORY_SOURCE_TYPE}` sources, not `{}`",
                definition.source_type
            ));
        }
        if let Some(key) = definition
            .config
            .keys()
            .find(|key| !matches!(key.as_str(), PLACE_KEY | mcpgw_discovery::REMOVAL_GRACE_KEY))
        {
            return Err(format!(
                "config.{key} is not a setting of a {IN_MEMORY_SOURCE_TYPE} source"
            ));
        }
        let place_name = match definition.config.get(PLACE_KEY) {
            Some(Value::String(name)) if !name.is_empty() => name.clone(),
            _ => return Err(format!("config.{PLACE_KEY} must name a place, as a string")),
        };
        let place = self
            .places
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&place_name)
            .cloned();
        Ok(Arc::new(InMemorySource {
            place,
            place_name,
            seen: Mutex::new(0),
        }))
    }
}

/// The [`DiscoverySourceFixture`] of the `memory` type: a fresh place and factory.
pub struct InMemorySourceFixture {
    pub factory: Arc<InMemorySourceFactory>,
    pub place: Arc<InMemoryPlace>,
}

impl Default for InMemorySourceFixture {
    fn default() -> Self {
        let factory = Arc::new(InMemorySourceFactory::new());
        let place = Arc::new(InMemoryPlace::new());
        factory.add_place("here", place.clone());
        Self { factory, place }
    }
}

/// A definition of a source of `source_type` with `config`, enabled and declared in the
/// configuration file.
pub fn source_definition(source_id: &str, source_type: &str, config: Value) -> SourceDefinition {
    let Value::Object(config) = config else {
        panic!("a source's config is a JSON object, not {config}");
    };
    SourceDefinition {
        source_id: source_id.to_owned(),
        source_type: source_type.to_owned(),
        mode: DiscoveryMode::Additive,
        enabled: true,
        config,
        origin: SourceOrigin::Config,
    }
}

/// The definition the fixtures of the test kit place for `name`: a subprocess server.
pub fn sample_server_definition(name: &str) -> Map<String, Value> {
    object(json!({"mode": "subprocess", "command": [format!("mcp-{name}"), "--stdio"]}))
}

/// A definition the registry refuses (a mode that does not exist) but any source can read.
pub fn sample_invalid_definition() -> Map<String, Value> {
    object(json!({"mode": "teleport", "endpoint": 42}))
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("{other} is not an object"),
    }
}

#[async_trait]
impl DiscoverySourceFixture for InMemorySourceFixture {
    fn factory(&self) -> Arc<dyn DiscoverySourceFactory> {
        self.factory.clone()
    }

    fn definition(&self) -> SourceDefinition {
        source_definition("memory-0", IN_MEMORY_SOURCE_TYPE, json!({"place": "here"}))
    }

    fn unreadable_definition(&self) -> SourceDefinition {
        source_definition(
            "memory-1",
            IN_MEMORY_SOURCE_TYPE,
            json!({"place": "nowhere"}),
        )
    }

    fn invalid_definitions(&self) -> Vec<(SourceDefinition, String)> {
        vec![
            (
                source_definition("memory-2", IN_MEMORY_SOURCE_TYPE, json!({})),
                PLACE_KEY.to_owned(),
            ),
            (
                source_definition("memory-3", IN_MEMORY_SOURCE_TYPE, json!({"place": 7})),
                PLACE_KEY.to_owned(),
            ),
            (
                source_definition(
                    "memory-4",
                    IN_MEMORY_SOURCE_TYPE,
                    json!({"place": "here", "colour": "red"}),
                ),
                "colour".to_owned(),
            ),
        ]
    }

    async fn add_server(&self, name: &str) -> Map<String, Value> {
        let definition = sample_server_definition(name);
        self.place.put_server(name, definition.clone());
        definition
    }

    async fn add_invalid_server(&self, name: &str) -> Map<String, Value> {
        let definition = sample_invalid_definition();
        self.place.put_server(name, definition.clone());
        definition
    }

    async fn add_unreadable_server(&self, name: &str) {
        self.place.put(DiscoveredCandidate {
            name: name.to_owned(),
            location: format!("memory entry {name}"),
            definition: Err(format!("memory entry {name} is not a definition")),
        });
    }

    async fn remove_server(&self, name: &str) {
        self.place.remove(name);
    }

    fn reports_changes(&self) -> bool {
        true
    }
}

// ----- helpers ------------------------------------------------------------------------------

fn build(
    fixture: &dyn DiscoverySourceFixture,
    definition: &SourceDefinition,
) -> Arc<dyn DiscoverySource> {
    fixture
        .factory()
        .build(definition)
        .unwrap_or_else(|reason| panic!("building {definition:?} was refused: {reason}"))
}

async fn scan_result(
    source: &dyn DiscoverySource,
) -> Result<Vec<DiscoveredCandidate>, SourceError> {
    tokio::time::timeout(SCAN_BOUND, source.scan())
        .await
        .unwrap_or_else(|_| panic!("a scan took longer than {SCAN_BOUND:?}"))
}

/// The fixture's own candidates of a scan that must succeed, by name; a name answered twice
/// fails the case.
async fn scan_own(
    fixture: &dyn DiscoverySourceFixture,
    source: &dyn DiscoverySource,
) -> BTreeMap<String, DiscoveredCandidate> {
    let candidates = scan_result(source)
        .await
        .unwrap_or_else(|error| panic!("a scan of a readable place failed: {error}"));
    let mut by_name = BTreeMap::new();
    for candidate in candidates.into_iter().filter(|c| fixture.is_own(c)) {
        assert!(
            !candidate.location.trim().is_empty(),
            "a candidate says where it was found: {candidate:?}"
        );
        if let Some(first) = by_name.insert(candidate.name.clone(), candidate) {
            panic!(
                "one server, two candidates: {first:?} and {:?}",
                by_name[&first.name]
            );
        }
    }
    by_name
}

fn names(candidates: &BTreeMap<String, DiscoveredCandidate>) -> BTreeSet<&str> {
    candidates.keys().map(String::as_str).collect()
}

async fn reports_a_change_within(source: &dyn DiscoverySource, wait: Duration) -> bool {
    tokio::time::timeout(wait, source.changed()).await.is_ok()
}

async fn assert_reported(
    fixture: &dyn DiscoverySourceFixture,
    source: &dyn DiscoverySource,
    what: &str,
) {
    let reported = reports_a_change_within(source, NOTICED_WITHIN).await;
    if fixture.reports_changes() {
        assert!(
            reported,
            "{what} was not reported within {NOTICED_WITHIN:?}"
        );
    } else {
        assert!(
            !reported,
            "a source that cannot tell changes reported {what}"
        );
    }
}

async fn assert_quiet(source: &dyn DiscoverySource, what: &str) {
    assert!(
        !reports_a_change_within(source, QUIET_FOR).await,
        "`changed` completed {what}"
    );
}

// ----- the cases ----------------------------------------------------------------------------

pub async fn an_empty_place_has_no_candidates(fixture: &dyn DiscoverySourceFixture) {
    let source = build(fixture, &fixture.definition());
    assert_eq!(
        names(&scan_own(fixture, source.as_ref()).await),
        BTreeSet::new()
    );
    // Scanning again changes nothing.
    assert_eq!(
        names(&scan_own(fixture, source.as_ref()).await),
        BTreeSet::new()
    );
}

pub async fn scan_answers_one_candidate_per_server_with_its_definition(
    fixture: &dyn DiscoverySourceFixture,
) {
    let source = build(fixture, &fixture.definition());
    let mut expected = BTreeMap::new();
    for name in ["alpha", "beta", "gamma"] {
        expected.insert(name.to_owned(), fixture.add_server(name).await);
    }
    let found = scan_own(fixture, source.as_ref()).await;
    assert_eq!(names(&found), BTreeSet::from(["alpha", "beta", "gamma"]));
    for (name, definition) in &expected {
        assert_eq!(
            found[name].definition.as_ref(),
            Ok(definition),
            "the definition of `{name}`"
        );
    }
}

pub async fn scan_passes_definitions_on_without_validating_them(
    fixture: &dyn DiscoverySourceFixture,
) {
    let source = build(fixture, &fixture.definition());
    let good = fixture.add_server("good").await;
    let refused = fixture.add_invalid_server("odd").await;
    let found = scan_own(fixture, source.as_ref()).await;
    assert_eq!(names(&found), BTreeSet::from(["good", "odd"]));
    assert_eq!(found["good"].definition.as_ref(), Ok(&good));
    // Validation is the registry's: the source hands the definition on as it read it.
    assert_eq!(found["odd"].definition.as_ref(), Ok(&refused));
}

pub async fn what_cannot_be_read_is_a_candidate_with_its_reason(
    fixture: &dyn DiscoverySourceFixture,
) {
    let source = build(fixture, &fixture.definition());
    let good = fixture.add_server("good").await;
    fixture.add_unreadable_server("broken").await;
    // One unreadable server does not make the scan fail: it is a candidate like the others.
    let found = scan_own(fixture, source.as_ref()).await;
    assert_eq!(names(&found), BTreeSet::from(["broken", "good"]));
    assert_eq!(found["good"].definition.as_ref(), Ok(&good));
    match &found["broken"].definition {
        Err(reason) => assert!(!reason.trim().is_empty(), "the reason says something"),
        Ok(definition) => panic!("an unreadable server was read as {definition:?}"),
    }
}

pub async fn a_server_taken_away_is_gone_from_the_next_scan(fixture: &dyn DiscoverySourceFixture) {
    let source = build(fixture, &fixture.definition());
    fixture.add_server("stays").await;
    fixture.add_server("goes").await;
    fixture.add_unreadable_server("broken").await;
    assert_eq!(
        names(&scan_own(fixture, source.as_ref()).await),
        BTreeSet::from(["broken", "goes", "stays"])
    );
    fixture.remove_server("goes").await;
    fixture.remove_server("broken").await;
    assert_eq!(
        names(&scan_own(fixture, source.as_ref()).await),
        BTreeSet::from(["stays"])
    );
}

pub async fn a_source_that_cannot_be_read_answers_an_error(fixture: &dyn DiscoverySourceFixture) {
    let source = build(fixture, &fixture.unreadable_definition());
    for attempt in 0..2 {
        match scan_result(source.as_ref()).await {
            Err(error) => assert!(
                !error.0.trim().is_empty(),
                "scan {attempt}: the error says why"
            ),
            Ok(candidates) => {
                panic!("scan {attempt} of a source that cannot be read answered {candidates:?}")
            }
        }
    }
}

pub async fn changed_stays_pending_while_nothing_happens(fixture: &dyn DiscoverySourceFixture) {
    let source = build(fixture, &fixture.definition());
    fixture.add_server("steady").await;
    scan_own(fixture, source.as_ref()).await;
    assert_quiet(source.as_ref(), "while nothing happened").await;
    // Scanning is not a change either.
    scan_own(fixture, source.as_ref()).await;
    assert_quiet(source.as_ref(), "after a scan that found nothing new").await;
}

pub async fn changed_completes_after_a_server_comes_or_goes(fixture: &dyn DiscoverySourceFixture) {
    let source = build(fixture, &fixture.definition());
    scan_own(fixture, source.as_ref()).await;

    let waiting = {
        let source = source.clone();
        tokio::spawn(async move { reports_a_change_within(source.as_ref(), NOTICED_WITHIN).await })
    };
    // Let the waiter start before anything happens.
    tokio::time::sleep(Duration::from_millis(50)).await;
    fixture.add_server("arrives").await;
    let reported = waiting.await.expect("the waiting task");
    assert_eq!(
        reported,
        fixture.reports_changes(),
        "a server put in while `changed` was waited on"
    );
    // The registry scans when told; after that scan there is nothing new.
    assert!(
        scan_own(fixture, source.as_ref())
            .await
            .contains_key("arrives")
    );
    assert_quiet(source.as_ref(), "after the scan that saw the new server").await;

    fixture.remove_server("arrives").await;
    assert_reported(fixture, source.as_ref(), "a server taken away").await;
    assert!(
        !scan_own(fixture, source.as_ref())
            .await
            .contains_key("arrives")
    );
    assert_quiet(source.as_ref(), "after the scan that saw it go").await;

    fixture.add_unreadable_server("broken").await;
    assert_reported(fixture, source.as_ref(), "an unreadable server put in").await;
}

pub async fn a_change_before_waiting_is_reported(fixture: &dyn DiscoverySourceFixture) {
    let source = build(fixture, &fixture.definition());
    scan_own(fixture, source.as_ref()).await;
    // Put in after the scan and before anyone waits: still a change since the last scan.
    fixture.add_server("early").await;
    assert_reported(
        fixture,
        source.as_ref(),
        "a server put in before `changed` was called",
    )
    .await;
}

pub async fn the_factory_builds_the_types_it_lists(fixture: &dyn DiscoverySourceFixture) {
    let factory = fixture.factory();
    let types = factory.source_types();
    let definition = fixture.definition();
    assert!(
        types.contains(&definition.source_type.as_str()),
        "the factory lists {types:?}, not the fixture's type `{}`",
        definition.source_type
    );
    let unreadable = fixture.unreadable_definition();
    assert_eq!(unreadable.source_type, definition.source_type);
    for definition in [definition, unreadable] {
        if let Err(reason) = factory.build(&definition) {
            panic!("the factory refused {definition:?}: {reason}");
        }
    }
}

pub async fn the_factory_refuses_invalid_settings_naming_the_key(
    fixture: &dyn DiscoverySourceFixture,
) {
    let invalid = fixture.invalid_definitions();
    assert!(
        !invalid.is_empty(),
        "the fixture gives at least one invalid definition"
    );
    for (definition, key) in invalid {
        match fixture.factory().build(&definition) {
            Err(reason) => assert!(
                reason.contains(&key),
                "the refusal of {:?} names `{key}`: {reason}",
                definition.config
            ),
            Ok(_) => panic!("the factory built a source of {:?}", definition.config),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod contract {
        crate::discovery_source_contract_suite!(super::InMemorySourceFixture::default());
    }

    #[tokio::test]
    async fn a_place_that_fails_its_scans_answers_errors_until_it_is_fixed() {
        let fixture = InMemorySourceFixture::default();
        let source = build(&fixture, &fixture.definition());
        fixture.add_server("one").await;
        fixture.place.fail_scans(Some("the engine does not answer"));
        let error = scan_result(source.as_ref()).await.unwrap_err();
        assert_eq!(error.0, "the engine does not answer");
        fixture.place.fail_scans(None);
        assert_eq!(scan_result(source.as_ref()).await.unwrap().len(), 1);
    }
}
