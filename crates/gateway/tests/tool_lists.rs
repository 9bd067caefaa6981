//! Tool lists kept across restarts and the bound on probes, on fake ports: each "run" of the
//! gateway is a new manager, catalogue and keeper over the same in-memory tool list store.

use std::collections::BTreeMap;
use std::sync::Arc;

use mcpgw_config::ToolNames;
use mcpgw_core::{
    CallContext, Caller, EventSink, FrontendErrorKind, LaunchSpec, ManagerSettings, McpFrontend,
    ServerId, ServerManager, ServerSpec, Tool, ToolListStore, ToolSource,
};
use mcpgw_gateway::{EventBus, RestoreReport, ToolCatalog, ToolListKeeper};
use mcpgw_testkit::clock::FakeClock;
use mcpgw_testkit::fakes::{FakeBehaviour, FakeLauncher, TokioSpawner};
use mcpgw_testkit::tool_list_store_suite::InMemoryToolListStore;
use tokio::sync::Notify;

/// One run of the gateway over `store`.
struct Run {
    manager: ServerManager,
    launcher: Arc<FakeLauncher>,
    catalog: Arc<ToolCatalog>,
    keeper: Arc<ToolListKeeper>,
}

fn run(store: &Arc<InMemoryToolListStore>) -> Run {
    let launcher = Arc::new(FakeLauncher::new());
    let bus = Arc::new(EventBus::new(256));
    let manager = ServerManager::new(
        launcher.clone(),
        Arc::new(FakeClock::starting_at(1_790_000_000_000_000)),
        bus.clone() as Arc<dyn EventSink>,
        Arc::new(TokioSpawner),
        None,
        ManagerSettings::default(),
    );
    let catalog = ToolCatalog::new(manager.clone(), ToolNames::prefixed());
    bus.add_observer(catalog.observer());
    let keeper = ToolListKeeper::new(manager.clone(), store.clone() as Arc<dyn ToolListStore>);
    bus.add_observer(keeper.observer());
    tokio::spawn(keeper.clone().run());
    Run {
        manager,
        launcher,
        catalog,
        keeper,
    }
}

fn id(raw: &str) -> ServerId {
    ServerId::parse(raw).unwrap()
}

fn spec(raw: &str) -> ServerSpec {
    ServerSpec::subprocess(id(raw), vec!["fixture".into(), raw.into()])
}

/// The same server with one more environment variable: another launch.
fn changed(raw: &str) -> ServerSpec {
    ServerSpec {
        launch: LaunchSpec::Subprocess {
            command: vec!["fixture".into(), raw.into()],
            env: BTreeMap::from([("MODE".into(), "changed".into())]),
            cwd: None,
        },
        ..spec(raw)
    }
}

fn lists(run: &Run, raw: &str, tools: &[&str]) {
    run.launcher.set_behaviour(
        raw,
        FakeBehaviour {
            tools: tools.iter().map(|name| Tool::new(*name)).collect(),
            ..FakeBehaviour::default()
        },
    );
}

fn names(catalog: &ToolCatalog) -> Vec<String> {
    catalog
        .tools(&Caller::default())
        .iter()
        .map(|tool| tool.name.clone())
        .collect()
}

fn kept_names(store: &InMemoryToolListStore, raw: &str) -> Option<Vec<String>> {
    store
        .list(&id(raw))
        .map(|list| list.tools.into_iter().map(|tool| tool.name).collect())
}

/// Probes what is unknown and waits until the probes are over and their lists written.
async fn probe_and_write(run: &Run) {
    run.catalog.probe_unknown_tools();
    run.catalog.settle().await;
    run.keeper.flush().await;
}

/// The first run: `servers` are registered, probed, and their lists kept.
async fn first_run(store: &Arc<InMemoryToolListStore>, servers: &[(&str, &[&str])]) {
    let first = run(store);
    for (raw, tools) in servers {
        lists(&first, raw, tools);
        first.manager.register(spec(raw)).await.unwrap();
    }
    probe_and_write(&first).await;
    assert_eq!(first.launcher.launches(), servers.len());
}

#[tokio::test]
async fn learned_lists_are_served_after_a_restart_without_starting_anything() {
    let store = Arc::new(InMemoryToolListStore::new());
    first_run(&store, &[("math", &["add", "sub"]), ("files", &["read"])]).await;
    let kept = store.list(&id("math")).unwrap();
    assert_eq!(kept.definition_digest, spec("math").tool_list_digest());
    assert_eq!(kept_names(&store, "files").unwrap(), ["read"]);

    let second = run(&store);
    second.manager.register(spec("math")).await.unwrap();
    second.manager.register(spec("files")).await.unwrap();
    let report = second.keeper.restore().await.unwrap();
    assert_eq!(
        report,
        RestoreReport {
            restored: 2,
            not_served: 0,
            forgotten: 0
        }
    );
    probe_and_write(&second).await;

    assert_eq!(second.launcher.launches(), 0, "no server was started");
    assert_eq!(
        names(&second.catalog),
        ["files__read", "math__add", "math__sub"]
    );
    let served = second.manager.tool_list(&id("math")).unwrap();
    assert_eq!(served.source, ToolSource::Stored);
    assert_eq!(served.learned_at, Some(kept.learned_at));
}

#[tokio::test]
async fn a_changed_definition_is_probed_again_and_its_old_list_is_not_served() {
    let store = Arc::new(InMemoryToolListStore::new());
    first_run(&store, &[("math", &["old"]), ("files", &["read"])]).await;

    let second = run(&store);
    lists(&second, "math", &["new"]);
    second.manager.register(changed("math")).await.unwrap();
    second.manager.register(spec("files")).await.unwrap();
    let report = second.keeper.restore().await.unwrap();
    assert_eq!((report.restored, report.not_served), (1, 1));
    assert_eq!(
        second.manager.tool_list(&id("math")).unwrap().source,
        ToolSource::Unknown,
        "the old list is not served"
    );
    probe_and_write(&second).await;

    assert_eq!(second.launcher.launches(), 1);
    assert_eq!(second.launcher.sessions("math").len(), 1, "only math");
    assert_eq!(names(&second.catalog), ["files__read", "math__new"]);
    let kept = store.list(&id("math")).unwrap();
    assert_eq!(kept.definition_digest, changed("math").tool_list_digest());
    assert_eq!(kept_names(&store, "math").unwrap(), ["new"]);
}

#[tokio::test]
async fn an_unchanged_list_is_not_written_again() {
    let store = Arc::new(InMemoryToolListStore::new());
    first_run(&store, &[("math", &["add"])]).await;
    assert_eq!(store.saved_lists(), 1);

    let second = run(&store);
    lists(&second, "math", &["add"]);
    second.manager.register(spec("math")).await.unwrap();
    second.keeper.restore().await.unwrap();
    // A start lists the same tools under the same definition: nothing to write.
    second.manager.start(&id("math")).await.unwrap();
    second.manager.stop(&id("math")).await.unwrap();
    second.manager.start(&id("math")).await.unwrap();
    second.keeper.flush().await;
    assert_eq!(store.saved_lists(), 1);

    // Other tools are written.
    lists(&second, "math", &["add", "more"]);
    second.manager.stop(&id("math")).await.unwrap();
    second.manager.start(&id("math")).await.unwrap();
    second.keeper.flush().await;
    assert_eq!(store.saved_lists(), 2);
    assert_eq!(kept_names(&store, "math").unwrap(), ["add", "more"]);
}

#[tokio::test]
async fn removing_a_server_deletes_its_list() {
    let store = Arc::new(InMemoryToolListStore::new());
    let only = run(&store);
    for raw in ["math", "files"] {
        only.manager.register(spec(raw)).await.unwrap();
    }
    probe_and_write(&only).await;
    assert!(store.list(&id("math")).is_some());

    only.manager.delete(&id("math")).await.unwrap();
    only.keeper.flush().await;
    assert!(store.list(&id("math")).is_none());
    assert!(store.list(&id("files")).is_some());

    // Registered again and listed again: kept again.
    only.manager.register(spec("math")).await.unwrap();
    probe_and_write(&only).await;
    assert!(store.list(&id("math")).is_some());
}

#[tokio::test]
async fn lists_of_servers_no_longer_registered_are_deleted_at_the_restore() {
    let store = Arc::new(InMemoryToolListStore::new());
    first_run(&store, &[("math", &["add"]), ("gone", &["x"])]).await;

    let second = run(&store);
    second.manager.register(spec("math")).await.unwrap();
    let report = second.keeper.restore().await.unwrap();
    assert_eq!((report.restored, report.forgotten), (1, 1));
    assert!(store.list(&id("gone")).is_none());

    // Registered again later, it has no list to come back to: it is probed.
    second.manager.register(spec("gone")).await.unwrap();
    probe_and_write(&second).await;
    assert_eq!(second.launcher.sessions("gone").len(), 1);
}

#[tokio::test]
async fn a_failed_write_is_retried_when_the_server_lists_its_tools_again() {
    let store = Arc::new(InMemoryToolListStore::new());
    let only = run(&store);
    only.manager.register(spec("math")).await.unwrap();
    store.fail_next_write("disk full");
    probe_and_write(&only).await;
    assert!(store.list(&id("math")).is_none());

    only.manager.start(&id("math")).await.unwrap();
    only.keeper.flush().await;
    assert_eq!(kept_names(&store, "math").unwrap(), ["echo"]);
}

async fn call(
    run: &Run,
    name: &str,
) -> Result<mcpgw_core::ToolCallOutcome, mcpgw_core::FrontendError> {
    run.catalog
        .call_tool(
            &Caller::default(),
            name,
            serde_json::json!({"text": "hi"}).as_object().cloned(),
            CallContext::default(),
        )
        .await
}

#[tokio::test]
async fn a_call_of_a_tool_the_kept_list_lacks_starts_the_server_to_learn_its_list() {
    let store = Arc::new(InMemoryToolListStore::new());
    first_run(&store, &[("math", &["add"])]).await;

    // The same definition, but the program behind it changed since (a newer version of the
    // package its command runs): it lists a tool the kept list lacks.
    let second = run(&store);
    lists(&second, "math", &["add", "echo"]);
    second.manager.register(spec("math")).await.unwrap();
    second.keeper.restore().await.unwrap();
    assert_eq!(names(&second.catalog), ["math__add"]);

    let outcome = call(&second, "math__echo").await.unwrap();
    assert_eq!(outcome.result["content"][0]["text"], "hi");
    assert_eq!(second.launcher.launches(), 1);
    assert_eq!(names(&second.catalog), ["math__add", "math__echo"]);
    assert_eq!(
        second.manager.tool_list(&id("math")).unwrap().source,
        ToolSource::Live
    );
    second.keeper.flush().await;
    assert_eq!(kept_names(&store, "math").unwrap(), ["add", "echo"]);

    // The server's own list answers from now on: a tool it lacks is unknown without a start,
    // even once it stopped.
    second.manager.stop(&id("math")).await.unwrap();
    let error = call(&second, "math__nope").await.unwrap_err();
    assert_eq!(error.kind, FrontendErrorKind::UnknownName, "{error}");
    assert_eq!(second.launcher.launches(), 1);
}

#[tokio::test]
async fn a_tool_neither_the_kept_list_nor_the_server_has_is_unknown_after_one_start() {
    let store = Arc::new(InMemoryToolListStore::new());
    first_run(&store, &[("math", &["echo"])]).await;

    let second = run(&store);
    lists(&second, "math", &["echo"]);
    second.manager.register(spec("math")).await.unwrap();
    second.keeper.restore().await.unwrap();
    for _ in 0..3 {
        let error = call(&second, "math__nope").await.unwrap_err();
        assert_eq!(error.kind, FrontendErrorKind::UnknownName, "{error}");
        assert_eq!(error.message, "unknown tool: math__nope");
    }
    assert_eq!(second.launcher.launches(), 1, "one start to ask the server");
    assert!(
        second.launcher.session("math").unwrap().calls().is_empty(),
        "nothing reached the upstream"
    );
    // Tools the kept list has are routed as listed.
    call(&second, "math__echo").await.unwrap();
    assert_eq!(second.launcher.launches(), 1);
}

/// Lets spawned tasks run until `condition` holds; fails instead of hanging.
async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    for _ in 0..10_000 {
        if condition() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("timed out waiting for: {what}");
}

async fn let_tasks_run() {
    for _ in 0..200 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn probes_start_at_most_the_configured_number_of_servers_at_once() {
    let store = Arc::new(InMemoryToolListStore::new());
    let only = run(&store);
    only.catalog.set_probe_concurrency(3);
    let gate = Arc::new(Notify::new());
    let held = |raw: &str| {
        only.launcher.set_behaviour(
            raw,
            FakeBehaviour {
                launch_gate: Some(gate.clone()),
                ..FakeBehaviour::default()
            },
        );
    };
    for index in 0..8 {
        let raw = format!("boot-{index}");
        held(&raw);
        only.manager.register(spec(&raw)).await.unwrap();
    }
    only.catalog.probe_unknown_tools();
    eventually("three probes start", || only.launcher.launches() == 3).await;
    let_tasks_run().await;
    assert_eq!(only.launcher.launches(), 3, "the others wait for a slot");

    // Servers registered later (a reload, the API) queue behind the same bound.
    for index in 0..4 {
        let raw = format!("later-{index}");
        held(&raw);
        only.manager.register(spec(&raw)).await.unwrap();
    }
    only.catalog.probe_unknown_tools();
    let_tasks_run().await;
    assert_eq!(only.launcher.launches(), 3);

    // Each finished probe lets exactly one more start.
    let learned = |run: &Run| {
        run.manager
            .list(None)
            .iter()
            .filter(|server| server.tool_source == ToolSource::Live)
            .count()
    };
    for finished in 1..=12 {
        gate.notify_one();
        eventually("a probe finishes", || learned(&only) == finished).await;
        let_tasks_run().await;
        let running = only.launcher.launches() - learned(&only);
        assert!(running <= 3, "{running} probes at once");
        assert_eq!(only.launcher.launches(), (finished + 3).min(12));
    }
}
