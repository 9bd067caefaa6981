//! The configuration use cases on fake ports: a reload applies only the file's difference (and
//! keeps the sessions of servers it did not need to restart), an invalid or clashing file
//! changes nothing, events tell what happened, and export, backup, diff and the file watch
//! behave as operators rely on.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_config::{ConfigFile, ConfigFileError, GatewayConfig, SECRET_MASK};
use mcpgw_core::{
    DomainEvent, EventObserver, EventSink, ManagerSettings, PublishedEvent, ServerId,
    ServerManager, ServerOrigin, ServerSpec, ServerState,
};
use mcpgw_gateway::{
    ConfigService, ConfigServiceError, Environment, EventBus, GroupService, ReloadReport,
    ReloadTrigger, WATCH_DEBOUNCE, group_spec_from_config,
};
use mcpgw_groups::{GroupSpec, GroupStrategy, MemberSpec};
use mcpgw_testkit::clock::FakeClock;
use mcpgw_testkit::fakes::{FakeLauncher, RecordingEventSink, TokioSpawner};
use tokio::sync::Notify;

// ----- fakes --------------------------------------------------------------------------------

const FILE_NAME: &str = "/etc/mcpgw/gateway.yaml";

/// A configuration file held in memory: the test edits its text and says when it changed.
#[derive(Default)]
struct FakeFile {
    text: Mutex<String>,
    changes: Notify,
    unreadable: AtomicBool,
    backups: Mutex<Vec<usize>>,
}

impl FakeFile {
    fn with_text(text: &str) -> Arc<Self> {
        let file = Arc::new(Self::default());
        file.write(text);
        file
    }

    fn write(&self, text: &str) {
        *self.text.lock().unwrap() = text.to_owned();
    }

    /// What a watcher of the real file reports after an edit.
    fn touch(&self) {
        self.changes.notify_one();
    }
}

#[async_trait]
impl ConfigFile for FakeFile {
    fn display_name(&self) -> String {
        FILE_NAME.to_owned()
    }

    async fn read(&self) -> Result<String, ConfigFileError> {
        if self.unreadable.load(Ordering::SeqCst) {
            return Err(ConfigFileError(format!("{FILE_NAME}: permission denied")));
        }
        Ok(self.text.lock().unwrap().clone())
    }

    async fn backup(&self, keep: usize) -> Result<String, ConfigFileError> {
        self.backups.lock().unwrap().push(keep);
        Ok(format!("{FILE_NAME}.bak1"))
    }

    async fn changed(&self) {
        self.changes.notified().await;
    }
}

struct Recorder(Arc<RecordingEventSink>);

impl EventObserver for Recorder {
    fn observe(&self, published: &PublishedEvent) {
        self.0
            .publish(published.occurred_at, published.event.clone());
    }
}

// ----- harness ------------------------------------------------------------------------------

const TOKEN: &str = "s3cr3t-token-value";

fn environment() -> Environment {
    Arc::new(|name: &str| (name == "TOKEN").then(|| TOKEN.to_owned()))
}

const INITIAL: &str = r#"
mcp_servers:
  keep:
    mode: subprocess
    command: [keep-server]
    env: {TOKEN: "${TOKEN}"}
  described:
    mode: subprocess
    command: [described-server]
    description: before in ${REGION:-eu}
  relaunched:
    mode: subprocess
    command: [relaunched-server, --v1]
  dropped:
    mode: subprocess
    command: [dropped-server]
  pool:
    mode: group
    members: [{id: keep}, {id: described}]
  oldpool:
    mode: group
    members: [{id: dropped}]
"#;

const EDITED: &str = r#"
mcp_servers:
  keep:
    mode: subprocess
    command: [keep-server]
    env: {TOKEN: "${TOKEN}"}
  described:
    mode: subprocess
    command: [described-server]
    description: after
    idle_ttl_s: 900
  relaunched:
    mode: subprocess
    command: [relaunched-server, --v2]
  fresh:
    mode: subprocess
    command: [fresh-server]
  pool:
    mode: group
    strategy: priority
    members: [{id: keep}, {id: fresh, priority: 1}]
  newpool:
    mode: group
    members: [{id: described}]
rate_limit: {rps: 5, burst: 10}
"#;

struct Harness {
    clock: Arc<FakeClock>,
    manager: ServerManager,
    launcher: Arc<FakeLauncher>,
    groups: Arc<GroupService>,
    file: Arc<FakeFile>,
    events: Arc<RecordingEventSink>,
    service: Arc<ConfigService>,
}

fn parse(text: &str) -> GatewayConfig {
    mcpgw_config::parse(FILE_NAME, text, &*environment()).expect("the test's file is valid")
}

fn id(raw: &str) -> ServerId {
    ServerId::parse(raw).unwrap()
}

/// A gateway started from `text` the way the binary starts one: the file's servers, then its
/// groups, then the configuration service over the same file.
async fn started_with(text: &str) -> Harness {
    let clock = Arc::new(FakeClock::new());
    let bus = Arc::new(EventBus::new(4096));
    let events = Arc::new(RecordingEventSink::default());
    bus.add_observer(Arc::new(Recorder(events.clone())));
    let launcher = Arc::new(FakeLauncher::new());
    let manager = ServerManager::new(
        launcher.clone(),
        clock.clone(),
        bus.clone() as Arc<dyn EventSink>,
        Arc::new(TokioSpawner),
        None,
        ManagerSettings::default(),
    );
    let groups = Arc::new(GroupService::new(
        manager.clone(),
        bus.clone() as Arc<dyn EventSink>,
    ));
    bus.add_observer(groups.observer());
    let config = parse(text);
    for spec in config.server_specs() {
        manager.register(spec).await.unwrap();
    }
    for definition in config.groups() {
        let spec = group_spec_from_config(&definition).unwrap();
        groups.create(spec, ServerOrigin::Config).await.unwrap();
    }
    let file = FakeFile::with_text(text);
    let service = Arc::new(
        ConfigService::new(
            manager.clone(),
            bus.clone() as Arc<dyn EventSink>,
            environment(),
            config,
        )
        .with_file(file.clone(), text.to_owned())
        .with_groups(groups.clone()),
    );
    Harness {
        clock,
        manager,
        launcher,
        groups,
        file,
        events,
        service,
    }
}

impl Harness {
    fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .manager
            .list(None)
            .iter()
            .map(|snapshot| snapshot.id().to_string())
            .chain(self.groups.ids().iter().map(ToString::to_string))
            .collect();
        ids.sort();
        ids
    }

    fn reload_events(&self) -> Vec<DomainEvent> {
        self.events
            .events()
            .into_iter()
            .filter(|event| {
                matches!(
                    event,
                    DomainEvent::ConfigurationReloaded { .. }
                        | DomainEvent::ConfigurationReloadFailed { .. }
                )
            })
            .collect()
    }
}

/// A group's id, strategy and `(member, weight)` list: what an export must carry.
type GroupShape = (String, String, Vec<(String, u32)>);

fn strings(raw: &[&str]) -> Vec<String> {
    raw.iter().map(ToString::to_string).collect()
}

/// Lets spawned tasks run until `condition` holds; the tests run on one thread, so yielding is
/// what moves the other tasks forward.
async fn until(what: &str, condition: impl Fn() -> bool) {
    for _ in 0..10_000 {
        if condition() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("{what} did not happen");
}

// ----- reload -------------------------------------------------------------------------------

#[tokio::test]
async fn a_reload_applies_only_the_difference_and_keeps_untouched_sessions() {
    let harness = started_with(INITIAL).await;
    for server in ["keep", "described", "relaunched", "dropped"] {
        harness.manager.start(&id(server)).await.unwrap();
    }
    let keep_before = harness.manager.snapshot(&id("keep")).unwrap();
    harness.file.write(EDITED);
    harness.events.clear();

    let report = harness.service.reload(ReloadTrigger::Api).await.unwrap();

    assert_eq!(
        report,
        ReloadReport {
            added: strings(&["fresh", "newpool"]),
            removed: strings(&["dropped", "oldpool"]),
            updated: strings(&["described", "pool", "relaunched"]),
            unchanged: strings(&["keep"]),
            restart_required: strings(&["rate_limit"]),
        }
    );
    assert_eq!(
        harness.ids(),
        strings(&[
            "described",
            "fresh",
            "keep",
            "newpool",
            "pool",
            "relaunched"
        ])
    );

    // Untouched: the same session, never restarted.
    let keep = harness.manager.snapshot(&id("keep")).unwrap();
    assert_eq!(keep.state, ServerState::Ready);
    assert_eq!(keep.started_at, keep_before.started_at);
    assert_eq!(keep.total_starts, 1);
    assert_eq!(harness.launcher.sessions("keep").len(), 1);
    assert!(!harness.launcher.session("keep").unwrap().is_closed());

    // A new description and idle time do not need a restart: the session stays.
    let described = harness.manager.snapshot(&id("described")).unwrap();
    assert_eq!(described.state, ServerState::Ready);
    assert_eq!(described.total_starts, 1);
    assert_eq!(described.spec.description.as_deref(), Some("after"));
    assert_eq!(described.spec.idle_ttl, Duration::from_secs(900));
    assert!(!harness.launcher.session("described").unwrap().is_closed());

    // A new command does: the old session is closed and a new one runs the new command.
    let relaunched = harness.manager.snapshot(&id("relaunched")).unwrap();
    assert_eq!(relaunched.state, ServerState::Ready);
    assert_eq!(relaunched.total_starts, 2);
    let sessions = harness.launcher.sessions("relaunched");
    assert_eq!(sessions.len(), 2);
    assert!(sessions[0].is_closed());
    assert!(!sessions[1].is_closed());
    assert_eq!(
        *relaunched.spec,
        ServerSpec {
            origin: ServerOrigin::Config,
            ..ServerSpec::subprocess(id("relaunched"), strings(&["relaunched-server", "--v2"]))
        }
    );

    // A dropped server is stopped, not only forgotten.
    assert!(harness.launcher.session("dropped").unwrap().is_closed());

    // A new server is registered as the file's, and waits cold for its first call.
    let fresh = harness.manager.snapshot(&id("fresh")).unwrap();
    assert_eq!(fresh.state, ServerState::Cold);
    assert_eq!(fresh.spec.origin, ServerOrigin::Config);

    let pool = harness.groups.get(&id("pool")).unwrap();
    assert_eq!(pool.strategy, GroupStrategy::Priority);
    assert_eq!(pool.origin, "config");
    let members: Vec<(String, u32)> = pool
        .members
        .iter()
        .map(|member| (member.id.to_string(), member.priority))
        .collect();
    assert_eq!(members, vec![("keep".into(), 0), ("fresh".into(), 1)]);
    let newpool = harness.groups.get(&id("newpool")).unwrap();
    assert_eq!(newpool.members[0].id, id("described"));
    // The changed group of the file is changed in place, not deleted and created again, so
    // the member that stays keeps its rotation.
    let pool_events: Vec<&'static str> = harness
        .events
        .events()
        .iter()
        .filter(|event| event.group_id() == Some(&id("pool")))
        .map(DomainEvent::event_type)
        .collect();
    assert!(pool_events.contains(&"GroupUpdated"), "{pool_events:?}");
    assert!(
        !pool_events.contains(&"GroupDeleted") && !pool_events.contains(&"GroupCreated"),
        "{pool_events:?}"
    );

    assert_eq!(harness.service.running(), parse(EDITED));
    assert_eq!(
        harness.reload_events(),
        vec![DomainEvent::ConfigurationReloaded {
            trigger: "api",
            added: report.added.clone(),
            removed: report.removed.clone(),
            updated: report.updated.clone(),
            restart_required: report.restart_required.clone(),
        }]
    );
}

#[tokio::test]
async fn reloading_an_unchanged_file_touches_nothing() {
    let harness = started_with(INITIAL).await;
    harness.manager.start(&id("keep")).await.unwrap();
    harness.events.clear();

    let report = harness.service.reload(ReloadTrigger::Signal).await.unwrap();

    assert!(report.added.is_empty() && report.removed.is_empty() && report.updated.is_empty());
    assert_eq!(
        report.unchanged,
        strings(&[
            "described",
            "dropped",
            "keep",
            "oldpool",
            "pool",
            "relaunched"
        ])
    );
    assert_eq!(
        harness.events.event_types(),
        vec!["ConfigurationReloaded"],
        "an unchanged file changes no server and no group"
    );
    assert_eq!(
        harness.manager.snapshot(&id("keep")).unwrap().total_starts,
        1
    );
}

#[tokio::test]
async fn a_server_can_become_a_group_and_a_group_a_server() {
    let harness = started_with(
        r#"
mcp_servers:
  a: {mode: subprocess, command: [a]}
  b: {mode: subprocess, command: [b]}
  shifting: {mode: subprocess, command: [shifting]}
  turning: {mode: group, members: [{id: a}]}
"#,
    )
    .await;
    harness.file.write(
        r#"
mcp_servers:
  a: {mode: subprocess, command: [a]}
  b: {mode: subprocess, command: [b]}
  shifting: {mode: group, members: [{id: b}]}
  turning: {mode: subprocess, command: [turning]}
"#,
    );

    harness.service.reload(ReloadTrigger::Api).await.unwrap();

    assert!(harness.groups.contains(&id("shifting")));
    assert!(!harness.manager.contains(&id("shifting")));
    assert!(harness.manager.contains(&id("turning")));
    assert!(!harness.groups.contains(&id("turning")));
}

#[tokio::test]
async fn an_invalid_file_changes_nothing_and_reports_every_error_where_it_is() {
    let harness = started_with(INITIAL).await;
    harness.manager.start(&id("keep")).await.unwrap();
    let before = harness.ids();
    harness.file.write(
        r#"mcp_servers:
  keep:
    mode: subprocess
    command: [keep-server]
    idle_ttl_s: 0
  fresh:
    mode: subprocess
    command: [fresh-server]
    health_check_interval_s: 1
"#,
    );

    let error = harness
        .service
        .reload(ReloadTrigger::Api)
        .await
        .unwrap_err();

    let ConfigServiceError::Invalid(errors) = &error else {
        panic!("expected the file's errors, got {error:?}");
    };
    assert_eq!(error.kind(), mcpgw_core::ErrorKind::Invalid);
    assert_eq!(error.name(), "ValidationError");
    let located: Vec<(String, Option<usize>, String)> = errors
        .errors()
        .iter()
        .map(|error| (error.source_name.clone(), error.line, error.path.clone()))
        .collect();
    assert_eq!(
        located,
        vec![
            (
                FILE_NAME.to_owned(),
                Some(5),
                "mcp_servers.keep.idle_ttl_s".to_owned()
            ),
            (
                FILE_NAME.to_owned(),
                Some(9),
                "mcp_servers.fresh.health_check_interval_s".to_owned()
            ),
        ]
    );
    assert_eq!(harness.ids(), before);
    assert_eq!(harness.service.running(), parse(INITIAL));
    assert_eq!(
        harness.manager.snapshot(&id("keep")).unwrap().state,
        ServerState::Ready
    );
    let reload_events = harness.reload_events();
    let [DomainEvent::ConfigurationReloadFailed { trigger, error }] = reload_events.as_slice()
    else {
        panic!("expected one failure event, got {reload_events:?}");
    };
    assert_eq!(*trigger, "api");
    assert!(error.contains("mcp_servers.keep.idle_ttl_s"), "{error}");
}

#[tokio::test]
async fn an_unreadable_file_is_unavailable_and_names_the_file() {
    let harness = started_with(INITIAL).await;
    harness.file.unreadable.store(true, Ordering::SeqCst);

    let error = harness
        .service
        .reload(ReloadTrigger::Signal)
        .await
        .unwrap_err();

    assert!(matches!(error, ConfigServiceError::Read(_)), "{error:?}");
    assert_eq!(error.kind(), mcpgw_core::ErrorKind::Unavailable);
    assert!(error.to_string().contains(FILE_NAME), "{error}");
    assert!(matches!(
        harness.reload_events().as_slice(),
        [DomainEvent::ConfigurationReloadFailed {
            trigger: "signal",
            ..
        }]
    ));
}

#[tokio::test]
async fn an_id_held_by_an_api_server_makes_the_whole_reload_a_conflict() {
    let harness = started_with(INITIAL).await;
    harness
        .manager
        .register(ServerSpec::subprocess(id("fresh"), strings(&["api-fresh"])))
        .await
        .unwrap();
    let before = harness.ids();
    harness.file.write(EDITED);

    let error = harness
        .service
        .reload(ReloadTrigger::Api)
        .await
        .unwrap_err();

    assert!(
        matches!(error, ConfigServiceError::Conflict(_)),
        "{error:?}"
    );
    assert_eq!(error.kind(), mcpgw_core::ErrorKind::Conflict);
    assert!(error.to_string().contains("`fresh`"), "{error}");
    assert_eq!(harness.ids(), before, "nothing was applied");
    assert_eq!(harness.service.running(), parse(INITIAL));
    let fresh = harness.manager.snapshot(&id("fresh")).unwrap();
    assert_eq!(fresh.spec.origin, ServerOrigin::Api);
}

#[tokio::test]
async fn without_a_file_the_file_use_cases_say_how_to_get_one() {
    let manager = ServerManager::new(
        Arc::new(FakeLauncher::new()),
        Arc::new(FakeClock::new()),
        Arc::new(RecordingEventSink::default()),
        Arc::new(TokioSpawner),
        None,
        ManagerSettings::default(),
    );
    let mut config = GatewayConfig::default();
    config.config_reload.watch = true;
    let service = Arc::new(ConfigService::new(
        manager,
        Arc::new(RecordingEventSink::default()),
        environment(),
        config,
    ));

    let error = service.reload(ReloadTrigger::Api).await.unwrap_err();
    assert!(matches!(error, ConfigServiceError::NoFile));
    assert_eq!(error.kind(), mcpgw_core::ErrorKind::Conflict);
    assert!(error.to_string().contains("--config"), "{error}");
    assert!(matches!(
        service.backup().await,
        Err(ConfigServiceError::NoFile)
    ));
    assert!(matches!(
        service.diff().await,
        Err(ConfigServiceError::NoFile)
    ));
    assert!(service.spawn_watch().is_none());
}

// ----- view, export, backup, diff -----------------------------------------------------------

#[tokio::test]
async fn the_running_configuration_is_shown_with_secrets_masked() {
    let harness = started_with(INITIAL).await;

    let shown = harness.service.sanitized();

    assert_eq!(shown["mcp_servers"]["keep"]["env"]["TOKEN"], SECRET_MASK);
    assert!(!shown.to_string().contains(TOKEN));
}

#[tokio::test]
async fn an_export_holds_the_api_servers_and_groups_and_loads_back_to_the_same_state() {
    let harness = started_with(INITIAL).await;
    harness
        .manager
        .register(ServerSpec {
            description: Some("made over the api".into()),
            ..ServerSpec::subprocess(id("made"), strings(&["made-server", "--flag"]))
        })
        .await
        .unwrap();
    harness
        .groups
        .create(
            GroupSpec {
                id: id("apigroup"),
                description: None,
                strategy: GroupStrategy::WeightedRoundRobin,
                min_healthy: 1,
                members: vec![
                    MemberSpec {
                        id: id("made"),
                        weight: 3,
                        priority: 0,
                    },
                    MemberSpec {
                        id: id("keep"),
                        weight: 1,
                        priority: 0,
                    },
                ],
            },
            ServerOrigin::Api,
        )
        .await
        .unwrap();

    let yaml = harness.service.export().await;

    assert!(
        yaml.contains("${REGION:-eu}"),
        "a reference that fell back to its default is written back as written:\n{yaml}"
    );
    assert!(
        !yaml.contains(TOKEN),
        "a secret never leaves in clear:\n{yaml}"
    );
    assert!(
        yaml.contains("\"${TOKEN}\""),
        "a secret that came from a variable is written back as the reference:\n{yaml}"
    );
    let loaded = parse(&yaml);
    // Everything loads back as it runs: the secret through its reference, with the same
    // environment.
    let running_specs: BTreeMap<String, ServerSpec> = harness
        .manager
        .list(None)
        .into_iter()
        .map(|snapshot| {
            let spec = ServerSpec {
                origin: ServerOrigin::Config,
                ..(*snapshot.spec).clone()
            };
            (spec.id.to_string(), spec)
        })
        .collect();
    let loaded_specs: BTreeMap<String, ServerSpec> = loaded
        .server_specs()
        .into_iter()
        .map(|spec| (spec.id.to_string(), spec))
        .collect();
    assert_eq!(loaded_specs, running_specs);
    assert!(loaded_specs.contains_key("made"));
    let loaded_groups: Vec<GroupSpec> = loaded
        .groups()
        .iter()
        .map(|definition| group_spec_from_config(definition).unwrap())
        .collect();
    let mut running_groups: Vec<GroupShape> = harness
        .groups
        .list()
        .into_iter()
        .map(|view| {
            (
                view.group_id.to_string(),
                view.strategy.as_str().to_owned(),
                view.members
                    .iter()
                    .map(|member| (member.id.to_string(), member.weight))
                    .collect(),
            )
        })
        .collect();
    running_groups.sort();
    let loaded_groups: Vec<GroupShape> = loaded_groups
        .into_iter()
        .map(|spec| {
            (
                spec.id.to_string(),
                spec.strategy.as_str().to_owned(),
                spec.members
                    .iter()
                    .map(|member| (member.id.to_string(), member.weight))
                    .collect(),
            )
        })
        .collect();
    assert_eq!(loaded_groups, running_groups);
    assert!(loaded_groups.iter().any(|(id, _, _)| id == "apigroup"));
}

#[tokio::test]
async fn a_backup_keeps_five_and_answers_the_path() {
    let harness = started_with(INITIAL).await;

    let path = harness.service.backup().await.unwrap();

    assert_eq!(path, format!("{FILE_NAME}.bak1"));
    assert_eq!(*harness.file.backups.lock().unwrap(), vec![5]);
}

#[tokio::test]
async fn a_diff_shows_the_edit_on_disk_until_it_is_reloaded() {
    let harness = started_with(INITIAL).await;
    let unchanged = harness.service.diff().await.unwrap();
    assert_eq!(unchanged.unified, "");
    assert!(unchanged.changes.servers.updated.is_empty());

    harness
        .file
        .write(&INITIAL.replace("[relaunched-server, --v1]", "[relaunched-server, --v2]"));
    let edited = harness.service.diff().await.unwrap();

    assert!(
        edited
            .unified
            .contains("-    command: [relaunched-server, --v1]"),
        "{}",
        edited.unified
    );
    assert!(
        edited
            .unified
            .contains("+    command: [relaunched-server, --v2]"),
        "{}",
        edited.unified
    );
    assert_eq!(edited.changes.servers.updated, strings(&["relaunched"]));
    assert!(edited.changes.servers.added.is_empty());
    assert_eq!(
        harness
            .manager
            .snapshot(&id("relaunched"))
            .unwrap()
            .spec
            .launch,
        ServerSpec::subprocess(id("relaunched"), strings(&["relaunched-server", "--v1"])).launch,
        "a diff only compares"
    );

    harness.service.reload(ReloadTrigger::Api).await.unwrap();
    assert_eq!(harness.service.diff().await.unwrap().unified, "");
}

// ----- watch --------------------------------------------------------------------------------

#[tokio::test]
async fn a_watched_file_is_reloaded_after_it_changes() {
    let watched = format!("{INITIAL}config_reload: {{watch: true}}\n");
    let harness = started_with(&watched).await;
    let watcher = harness.service.spawn_watch().expect("watch is on");
    harness.file.write(&format!(
        "{INITIAL}  added_by_edit: {{mode: subprocess, command: [edit]}}\nconfig_reload: {{watch: true}}\n"
    ));

    harness.file.touch();
    until("the watcher waiting out the debounce", || {
        harness.clock.sleepers() == 1
    })
    .await;
    assert!(
        !harness.manager.contains(&id("added_by_edit")),
        "the file is read only after the debounce"
    );
    harness.clock.advance(WATCH_DEBOUNCE);
    until("the reload", || !harness.reload_events().is_empty()).await;

    assert!(harness.manager.contains(&id("added_by_edit")));
    assert!(matches!(
        harness.reload_events().as_slice(),
        [DomainEvent::ConfigurationReloaded { trigger: "watch", added, .. }]
            if *added == strings(&["added_by_edit"])
    ));
    watcher.abort();
}

#[tokio::test]
async fn without_watch_in_the_file_nothing_watches_it() {
    let harness = started_with(INITIAL).await;
    assert!(harness.service.spawn_watch().is_none());
}
