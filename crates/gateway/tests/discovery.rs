//! The discovery use cases on fake ports: scans, decisions, persistence and the scanning loop.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_core::{
    DomainEvent, EventSink, ManagerSettings, ServerId, ServerManager, ServerOrigin, ServerSpec,
};
use mcpgw_discovery::{
    DiscoveredCandidate, DiscoveryError, DiscoveryMode, DiscoverySource, DiscoverySourceFactory,
    DiscoveryStore, REMOVAL_GRACE_KEY, SourceDefinition, SourceError, SourceOrigin,
};
use mcpgw_gateway::{DiscoveryService, DiscoverySettings, EventBus, SourceRequest};
use mcpgw_testkit::clock::FakeClock;
use mcpgw_testkit::discovery_fakes::InMemoryDiscoveryStore;
use mcpgw_testkit::fakes::{FakeLauncher, TokioSpawner};
use serde_json::{Map, Value, json};
use tokio::sync::Notify;

/// A source whose findings the test sets, and that reports a change when told to. A held
/// source's scans wait, once they started, until the test releases them.
struct ScriptedSource {
    candidates: Mutex<Result<Vec<DiscoveredCandidate>, String>>,
    changed: Notify,
    scans: Mutex<usize>,
    held: Mutex<Option<Arc<tokio::sync::Semaphore>>>,
    scan_started: Notify,
}

impl Default for ScriptedSource {
    fn default() -> Self {
        Self {
            candidates: Mutex::new(Ok(Vec::new())),
            changed: Notify::new(),
            scans: Mutex::new(0),
            held: Mutex::new(None),
            scan_started: Notify::new(),
        }
    }
}

impl ScriptedSource {
    fn set(&self, candidates: Vec<DiscoveredCandidate>) {
        *self.candidates.lock().unwrap() = Ok(candidates);
    }

    fn fail(&self, reason: &str) {
        *self.candidates.lock().unwrap() = Err(reason.to_owned());
    }

    fn scans(&self) -> usize {
        *self.scans.lock().unwrap()
    }

    /// Holds the scans that start from now on; each waits for a permit of the answer.
    fn hold(&self) -> Arc<tokio::sync::Semaphore> {
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        *self.held.lock().unwrap() = Some(gate.clone());
        gate
    }

    fn stop_holding(&self) {
        *self.held.lock().unwrap() = None;
    }
}

#[async_trait]
impl DiscoverySource for ScriptedSource {
    async fn scan(&self) -> Result<Vec<DiscoveredCandidate>, SourceError> {
        *self.scans.lock().unwrap() += 1;
        let held = self.held.lock().unwrap().clone();
        self.scan_started.notify_one();
        if let Some(gate) = held {
            gate.acquire().await.unwrap().forget();
        }
        // Read after the wait: what the source holds when the scan answers.
        self.candidates.lock().unwrap().clone().map_err(SourceError)
    }

    async fn changed(&self) {
        self.changed.notified().await;
    }
}

/// Hands out one scripted source per source id; type `fake` only.
#[derive(Default)]
struct ScriptedFactory {
    sources: Mutex<std::collections::BTreeMap<String, Arc<ScriptedSource>>>,
}

impl ScriptedFactory {
    fn source(&self, id: &str) -> Arc<ScriptedSource> {
        self.sources
            .lock()
            .unwrap()
            .entry(id.to_owned())
            .or_default()
            .clone()
    }
}

impl DiscoverySourceFactory for ScriptedFactory {
    fn source_types(&self) -> Vec<&'static str> {
        vec!["fake"]
    }

    fn build(&self, definition: &SourceDefinition) -> Result<Arc<dyn DiscoverySource>, String> {
        if let Some(key) = definition
            .config
            .keys()
            .find(|key| key.as_str() != REMOVAL_GRACE_KEY && key.as_str() != "path")
        {
            return Err(format!("unknown key `{key}`"));
        }
        Ok(self.source(&definition.source_id) as Arc<dyn DiscoverySource>)
    }
}

fn candidate(name: &str, command: &str) -> DiscoveredCandidate {
    let Value::Object(definition) = json!({"mode": "subprocess", "command": [command]}) else {
        unreachable!()
    };
    DiscoveredCandidate {
        name: name.to_owned(),
        location: format!("fake {name}"),
        definition: Ok(definition),
    }
}

fn config_source(id: &str, mode: DiscoveryMode) -> SourceDefinition {
    let mut config = Map::new();
    config.insert(REMOVAL_GRACE_KEY.to_owned(), json!(0));
    SourceDefinition {
        source_id: id.to_owned(),
        source_type: "fake".to_owned(),
        mode,
        enabled: true,
        config,
        origin: SourceOrigin::Config,
    }
}

#[derive(Default)]
struct Recorded(Mutex<Vec<DomainEvent>>);

impl EventSink for Recorded {
    fn publish(&self, _occurred_at: mcpgw_core::Timestamp, event: DomainEvent) {
        self.0.lock().unwrap().push(event);
    }
}

impl Recorded {
    fn types(&self) -> Vec<&'static str> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(DomainEvent::event_type)
            .collect()
    }
}

struct Harness {
    manager: ServerManager,
    factory: Arc<ScriptedFactory>,
    store: Arc<InMemoryDiscoveryStore>,
    events: Arc<Recorded>,
    service: Arc<DiscoveryService>,
}

async fn harness(
    sources: Vec<SourceDefinition>,
    store: Arc<InMemoryDiscoveryStore>,
    factory: Arc<ScriptedFactory>,
    manager: Option<ServerManager>,
) -> Harness {
    let manager = manager.unwrap_or_else(|| {
        ServerManager::new(
            Arc::new(FakeLauncher::new()),
            Arc::new(FakeClock::new()),
            Arc::new(EventBus::new(64)) as Arc<dyn EventSink>,
            Arc::new(TokioSpawner),
            None,
            ManagerSettings::default(),
        )
    });
    let events = Arc::new(Recorded::default());
    let service = Arc::new(
        DiscoveryService::new(
            manager.clone(),
            factory.clone(),
            events.clone(),
            DiscoverySettings {
                refresh_interval: Duration::from_secs(3600),
            },
        )
        .with_store(store.clone() as Arc<dyn DiscoveryStore>),
    );
    service.load(sources).await.unwrap();
    Harness {
        manager,
        factory,
        store,
        events,
        service,
    }
}

fn id(raw: &str) -> ServerId {
    ServerId::parse(raw).unwrap()
}

#[tokio::test]
async fn scan_approve_and_the_server_runs_with_origin_discovery() {
    let h = harness(
        vec![config_source("fs", DiscoveryMode::Additive)],
        Arc::default(),
        Arc::default(),
        None,
    )
    .await;
    h.factory
        .source("fs")
        .set(vec![candidate("calc", "calc-server")]);
    let report = h.service.scan("fs").await.unwrap();
    assert_eq!(
        (report.found, report.pending, report.quarantined),
        (1, 1, 0)
    );
    assert!(h.service.sources()[0].last_scan_at.is_some());

    let approval = h.service.approve("calc").await.unwrap();
    assert_eq!(approval.mcp_server_id, id("calc"));
    assert!(!approval.replaced);
    let snapshot = h.manager.snapshot(&id("calc")).unwrap();
    assert_eq!(
        snapshot.spec.origin,
        ServerOrigin::Discovery {
            source_id: "fs".into()
        }
    );
    assert!(h.service.pending().is_empty());
    assert_eq!(
        h.events.types(),
        vec![
            "DiscoveryServerPending",
            "DiscoveryScanCompleted",
            "DiscoveryServerApproved"
        ]
    );
    // Approving twice: it is no longer pending.
    assert!(matches!(
        h.service.approve("calc").await,
        Err(DiscoveryError::CandidateNotFound(_))
    ));
}

#[tokio::test]
async fn a_rejection_is_stored_and_holds_after_a_restart() {
    let store = Arc::new(InMemoryDiscoveryStore::new());
    let factory = Arc::new(ScriptedFactory::default());
    let first = harness(
        vec![config_source("fs", DiscoveryMode::Additive)],
        store.clone(),
        factory.clone(),
        None,
    )
    .await;
    factory
        .source("fs")
        .set(vec![candidate("calc", "calc-server")]);
    first.service.scan("fs").await.unwrap();
    first.service.reject("calc").await.unwrap();
    assert_eq!(store.load_rejections().await.unwrap().len(), 1);

    let restarted = harness(
        vec![config_source("fs", DiscoveryMode::Additive)],
        store.clone(),
        factory.clone(),
        None,
    )
    .await;
    let report = restarted.service.scan("fs").await.unwrap();
    assert_eq!(report.pending, 0);

    // Another definition brings it back, and the stored rejection goes.
    factory
        .source("fs")
        .set(vec![candidate("calc", "calc-server-2")]);
    assert_eq!(restarted.service.scan("fs").await.unwrap().pending, 1);
    assert!(store.load_rejections().await.unwrap().is_empty());
}

#[tokio::test]
async fn an_unreachable_source_keeps_what_it_found_and_lists_its_error() {
    let h = harness(
        vec![config_source("fs", DiscoveryMode::Authoritative)],
        Arc::default(),
        Arc::default(),
        None,
    )
    .await;
    h.factory.source("fs").set(vec![candidate("calc", "x")]);
    h.service.scan("fs").await.unwrap();
    h.service.approve("calc").await.unwrap();
    h.factory.source("fs").fail("engine down");
    let error = h.service.scan("fs").await.unwrap_err();
    assert!(
        matches!(&error, DiscoveryError::SourceUnavailable { reason, .. } if reason == "engine down")
    );
    assert_eq!(
        h.service.source("fs").unwrap().error.as_deref(),
        Some("engine down")
    );
    // Even an authoritative source removes nothing on a failed scan.
    assert!(h.manager.contains(&id("calc")));
    assert!(h.events.types().contains(&"DiscoveryScanFailed"));

    // A scan that works clears the error; the empty answer now withdraws the server.
    h.factory.source("fs").set(vec![]);
    h.service.scan("fs").await.unwrap();
    assert_eq!(h.service.source("fs").unwrap().error, None);
    assert!(!h.manager.contains(&id("calc")));
    assert!(h.events.types().contains(&"DiscoveryServerWithdrawn"));
}

#[tokio::test]
async fn a_changed_definition_replaces_the_approved_server_on_approval() {
    let h = harness(
        vec![config_source("fs", DiscoveryMode::Additive)],
        Arc::default(),
        Arc::default(),
        None,
    )
    .await;
    h.factory.source("fs").set(vec![candidate("calc", "v1")]);
    h.service.scan("fs").await.unwrap();
    h.service.approve("calc").await.unwrap();
    h.factory.source("fs").set(vec![candidate("calc", "v2")]);
    assert_eq!(h.service.scan("fs").await.unwrap().pending, 1);
    let approval = h.service.approve("calc").await.unwrap();
    assert!(approval.replaced);
    let spec: ServerSpec = (*h.manager.snapshot(&id("calc")).unwrap().spec).clone();
    assert!(
        matches!(spec.launch, mcpgw_core::LaunchSpec::Subprocess { ref command, .. } if command == &vec!["v2".to_owned()])
    );
}

#[tokio::test]
async fn api_sources_are_stored_and_config_sources_cannot_be_changed() {
    let h = harness(
        vec![config_source("fs", DiscoveryMode::Additive)],
        Arc::default(),
        Arc::default(),
        None,
    )
    .await;
    let request = |source_id: Option<&str>| SourceRequest {
        source_id: source_id.map(str::to_owned),
        source_type: "fake".into(),
        mode: DiscoveryMode::Authoritative,
        enabled: false,
        config: Map::new(),
    };
    let added = h.service.add_source(request(None)).await.unwrap();
    assert_eq!(added.definition.source_id, "fake-0");
    assert_eq!(added.definition.origin, SourceOrigin::Api);
    assert_eq!(h.store.load_sources().await.unwrap().len(), 1);
    assert!(matches!(
        h.service.add_source(request(Some("fake-0"))).await,
        Err(DiscoveryError::SourceAlreadyExists(_))
    ));
    // Bad input: an unknown type, a config key the type does not know, an id with a slash.
    let mut unknown_type = request(Some("x"));
    unknown_type.source_type = "ftp".into();
    assert!(matches!(
        h.service.add_source(unknown_type).await,
        Err(DiscoveryError::InvalidSource(message)) if message.contains("unknown source type `ftp`")
    ));
    let mut unknown_key = request(Some("y"));
    unknown_key.config.insert("sockett".into(), json!("/x"));
    assert!(matches!(
        h.service.add_source(unknown_key).await,
        Err(DiscoveryError::InvalidSource(message)) if message.contains("sockett")
    ));
    assert!(matches!(
        h.service.add_source(request(Some("a/b"))).await,
        Err(DiscoveryError::InvalidSource(_))
    ));

    // A disabled source refuses scans; enabling it is stored.
    assert!(matches!(
        h.service.scan("fake-0").await,
        Err(DiscoveryError::SourceDisabled(_))
    ));
    h.service.set_enabled("fake-0", true).await.unwrap();
    assert!(h.store.load_sources().await.unwrap()[0].enabled);
    h.service
        .update_source("fake-0", request(None))
        .await
        .unwrap();
    h.service.remove_source("fake-0").await.unwrap();
    assert!(h.store.load_sources().await.unwrap().is_empty());
    assert!(matches!(
        h.service.remove_source("fake-0").await,
        Err(DiscoveryError::SourceNotFound(_))
    ));

    // The file's source: enable and disable work; update and delete are conflicts.
    h.service.set_enabled("fs", false).await.unwrap();
    assert!(matches!(
        h.service.update_source("fs", request(None)).await,
        Err(DiscoveryError::SourceDeclaredInConfig(_))
    ));
    assert!(matches!(
        h.service.remove_source("fs").await,
        Err(DiscoveryError::SourceDeclaredInConfig(_))
    ));
    assert!(h.store.load_sources().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_config_source_with_invalid_settings_stops_the_load() {
    let mut broken = config_source("fs", DiscoveryMode::Additive);
    broken.config.insert("sockett".into(), json!("/x"));
    let service = DiscoveryService::new(
        ServerManager::new(
            Arc::new(FakeLauncher::new()),
            Arc::new(FakeClock::new()),
            Arc::new(EventBus::new(8)) as Arc<dyn EventSink>,
            Arc::new(TokioSpawner),
            None,
            ManagerSettings::default(),
        ),
        Arc::new(ScriptedFactory::default()),
        Arc::new(Recorded::default()),
        DiscoverySettings::default(),
    );
    let error = service.load(vec![broken]).await.unwrap_err();
    assert!(error.to_string().contains("`fs`") && error.to_string().contains("sockett"));
}

#[tokio::test]
async fn the_scanning_loop_scans_at_start_and_when_the_source_changes() {
    let h = harness(
        vec![config_source("fs", DiscoveryMode::Additive)],
        Arc::default(),
        Arc::default(),
        None,
    )
    .await;
    let source = h.factory.source("fs");
    source.set(vec![candidate("calc", "x")]);
    h.service.start_scanning();
    wait_until(|| h.service.pending().len() == 1).await;
    let scans = source.scans();
    source.set(vec![candidate("calc", "x"), candidate("web", "y")]);
    source.changed.notify_one();
    wait_until(|| h.service.pending().len() == 2).await;
    assert!(source.scans() > scans);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_running_when_its_source_is_disabled_changes_nothing() {
    let h = harness(
        vec![config_source("fs", DiscoveryMode::Additive)],
        Arc::default(),
        Arc::default(),
        None,
    )
    .await;
    let source = h.factory.source("fs");
    for failing in [false, true] {
        let release = source.hold();
        let scanning = tokio::spawn({
            let service = h.service.clone();
            async move { service.scan("fs").await }
        });
        source.scan_started.notified().await;
        h.service.set_enabled("fs", false).await.unwrap();
        // What the source answers after the disable: a server that appeared meanwhile, or a
        // failure; neither may count.
        if failing {
            source.fail("the engine went away");
        } else {
            source.set(vec![candidate("late", "x")]);
        }
        release.add_permits(1);
        assert!(
            matches!(
                scanning.await.unwrap(),
                Err(DiscoveryError::SourceDisabled(_))
            ),
            "failing: {failing}"
        );
        assert!(h.service.pending().is_empty(), "failing: {failing}");
        let view = h.service.source("fs").unwrap();
        assert_eq!(view.last_scan_at, None, "failing: {failing}");
        assert_eq!(view.error, None, "failing: {failing}");
        assert!(
            !h.events
                .types()
                .iter()
                .any(|event| event.starts_with("DiscoveryScan")
                    || *event == "DiscoveryServerPending"),
            "failing: {failing}: {:?}",
            h.events.types()
        );
        source.stop_holding();
        h.service.set_enabled("fs", true).await.unwrap();
    }

    // Enabled again, its scans count.
    source.set(vec![candidate("late", "x")]);
    assert_eq!(h.service.scan("fs").await.unwrap().pending, 1);
    assert_eq!(h.service.pending()[0].name, "late");
}

async fn wait_until(condition: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the condition did not hold within 5 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
