//! The aggregated catalogue and the invocation history, on fake ports.

use std::sync::Arc;
use std::time::Duration;

use mcpgw_config::ToolNaming;
use mcpgw_core::{
    CallContext, Caller, EventSink, FrontendErrorKind, InMemoryInvocationHistory,
    InvocationHistory, LaunchError, ManagerSettings, McpFrontend, ServerId, ServerManager,
    ServerSpec, Tool,
};
use mcpgw_gateway::{EventBus, ToolCatalog};
use mcpgw_testkit::clock::FakeClock;
use mcpgw_testkit::fakes::{FakeBehaviour, FakeLauncher, TokioSpawner};
use serde_json::json;

struct Harness {
    manager: ServerManager,
    launcher: Arc<FakeLauncher>,
    catalog: Arc<ToolCatalog>,
    history: Arc<InMemoryInvocationHistory>,
}

fn harness(naming: ToolNaming) -> Harness {
    let launcher = Arc::new(FakeLauncher::new());
    let bus = Arc::new(EventBus::new(64));
    let manager = ServerManager::new(
        launcher.clone(),
        Arc::new(FakeClock::new()),
        bus.clone() as Arc<dyn EventSink>,
        Arc::new(TokioSpawner),
        None,
        ManagerSettings::default(),
    );
    let catalog = ToolCatalog::new(manager.clone(), naming);
    bus.add_observer(catalog.observer());
    let history = Arc::new(InMemoryInvocationHistory::new(100));
    bus.add_observer(history.clone());
    tokio::spawn(catalog.clone().run_change_notifier());
    Harness {
        manager,
        launcher,
        catalog,
        history,
    }
}

fn id(raw: &str) -> ServerId {
    ServerId::parse(raw).unwrap()
}

/// Lets the fake server `raw` list `tools` once it runs, as it declares before.
fn lists(h: &Harness, raw: &str, tools: &[&str]) {
    h.launcher.set_behaviour(
        raw,
        FakeBehaviour {
            tools: tools.iter().map(|name| Tool::new(*name)).collect(),
            ..FakeBehaviour::default()
        },
    );
}

fn with_tools(raw: &str, tools: &[&str]) -> ServerSpec {
    ServerSpec {
        predefined_tools: tools.iter().map(|name| Tool::new(*name)).collect(),
        ..ServerSpec::subprocess(id(raw), vec!["x".into()])
    }
}

fn names(catalog: &ToolCatalog) -> Vec<String> {
    catalog
        .tools(&Caller::default())
        .iter()
        .map(|tool| tool.name.clone())
        .collect()
}

fn text(arguments: serde_json::Value) -> Option<serde_json::Map<String, serde_json::Value>> {
    arguments.as_object().cloned()
}

#[tokio::test]
async fn tools_of_every_server_are_listed_prefixed_without_starting_any() {
    let h = harness(ToolNaming::Prefixed);
    h.manager
        .register(with_tools("math", &["add", "echo"]))
        .await
        .unwrap();
    h.manager
        .register(with_tools("files", &["echo"]))
        .await
        .unwrap();
    h.manager.register(with_tools("empty", &[])).await.unwrap();
    assert_eq!(
        names(&h.catalog),
        ["files__echo", "math__add", "math__echo"]
    );
    assert!(h.launcher.session("math").is_none() && h.launcher.session("files").is_none());
}

#[tokio::test]
async fn servers_that_declare_no_tools_are_probed_once_and_stopped_again() {
    let h = harness(ToolNaming::Prefixed);
    lists(&h, "quiet", &["hidden"]);
    h.manager.register(with_tools("quiet", &[])).await.unwrap();
    h.catalog.probe_unknown_tools();
    h.catalog.settle().await;
    assert_eq!(names(&h.catalog), ["quiet__hidden"]);
    assert_eq!(h.launcher.launches(), 1);
    assert!(
        h.launcher.session("quiet").unwrap().is_closed(),
        "the probe stops what it started"
    );
    assert_eq!(
        h.manager.snapshot(&id("quiet")).unwrap().state,
        mcpgw_core::ServerState::Cold
    );
    // Once known, the tools are not probed again.
    h.catalog.probe_unknown_tools();
    h.catalog.settle().await;
    assert_eq!(h.launcher.launches(), 1);
}

#[tokio::test]
async fn a_failing_probe_is_not_retried_until_the_definition_changes() {
    let h = harness(ToolNaming::Prefixed);
    h.launcher.set_behaviour(
        "broken",
        FakeBehaviour {
            launch_error: Some(LaunchError::Handshake("no".into())),
            ..FakeBehaviour::default()
        },
    );
    h.manager.register(with_tools("broken", &[])).await.unwrap();
    for _ in 0..3 {
        h.catalog.probe_unknown_tools();
        h.catalog.settle().await;
    }
    assert_eq!(h.launcher.launches(), 1);
    assert!(names(&h.catalog).is_empty());
}

#[tokio::test]
async fn bare_naming_leaves_unique_names_alone_and_prefixes_shared_ones() {
    let h = harness(ToolNaming::Bare);
    h.manager
        .register(with_tools("math", &["add", "echo"]))
        .await
        .unwrap();
    h.manager
        .register(with_tools("files", &["echo", "read"]))
        .await
        .unwrap();
    assert_eq!(
        names(&h.catalog),
        ["files__echo", "read", "add", "math__echo"]
    );
}

#[tokio::test]
async fn calls_are_routed_to_the_owner_under_the_upstream_name() {
    let h = harness(ToolNaming::Prefixed);
    h.manager
        .register(with_tools("a", &["echo"]))
        .await
        .unwrap();
    h.manager
        .register(with_tools("b", &["echo"]))
        .await
        .unwrap();
    let outcome = h
        .catalog
        .call_tool(
            &Caller::default(),
            "b__echo",
            text(json!({"text": "to b"})),
            CallContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.result["content"][0]["text"], "to b");
    assert_eq!(h.launcher.session("b").unwrap().calls()[0].name, "echo");
    assert!(
        h.launcher.session("a").is_none(),
        "only the owner was started"
    );
}

#[tokio::test]
async fn unknown_and_malformed_names_are_unknown_tools() {
    let h = harness(ToolNaming::Prefixed);
    h.manager
        .register(with_tools("a", &["echo"]))
        .await
        .unwrap();
    for name in [
        "echo",
        "a__nope",
        "zz__echo",
        "",
        "__",
        "a__echo__x",
        "a_echo",
    ] {
        let error = h
            .catalog
            .call_tool(&Caller::default(), name, None, CallContext::default())
            .await
            .unwrap_err();
        assert_eq!(error.kind, FrontendErrorKind::UnknownName, "{name}");
    }
}

#[tokio::test]
async fn the_live_list_replaces_the_predefined_one_after_a_start_and_clients_are_told() {
    let h = harness(ToolNaming::Prefixed);
    h.manager
        .register(with_tools("s", &["declared"]))
        .await
        .unwrap();
    let mut changes = h.catalog.changes();
    assert_eq!(names(&h.catalog), ["s__declared"]);
    // The fake server lists `echo` when it runs.
    h.manager.start(&id("s")).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), changes.changed())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(names(&h.catalog), ["s__echo"]);

    // A restart that lists the same tools changes nothing for clients.
    h.manager.stop(&id("s")).await.unwrap();
    h.manager.start(&id("s")).await.unwrap();
    let unchanged = tokio::time::timeout(Duration::from_millis(200), changes.changed()).await;
    assert!(unchanged.is_err(), "no notification without a change");

    h.manager.register(with_tools("t", &["new"])).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), changes.changed())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(names(&h.catalog), ["s__echo", "t__new"]);
    h.manager.delete(&id("t")).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), changes.changed())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(names(&h.catalog), ["s__echo"]);
}

#[tokio::test]
async fn failures_map_to_what_a_client_is_told() {
    let h = harness(ToolNaming::Prefixed);
    let served = ["echo", "protocol_error", "transport_error"];
    lists(&h, "s", &served);
    h.manager.register(with_tools("s", &served)).await.unwrap();
    h.manager
        .register(with_tools("broken", &["echo"]))
        .await
        .unwrap();
    h.launcher.set_behaviour(
        "broken",
        FakeBehaviour {
            launch_error: Some(LaunchError::CommandNotFound {
                command: "nope".into(),
            }),
            ..FakeBehaviour::default()
        },
    );
    let call = |name: &'static str| {
        let catalog = h.catalog.clone();
        async move {
            catalog
                .call_tool(&Caller::default(), name, None, CallContext::default())
                .await
        }
    };
    let protocol = call("s__protocol_error").await.unwrap_err();
    assert_eq!(protocol.kind, FrontendErrorKind::Upstream { code: -32603 });
    assert_eq!(
        call("s__transport_error").await.unwrap_err().kind,
        FrontendErrorKind::Unavailable
    );
    let start = call("broken__echo").await.unwrap_err();
    assert_eq!(start.kind, FrontendErrorKind::Unavailable);
    assert!(start.message.contains("was not found"), "{}", start.message);
}

#[tokio::test]
async fn every_call_lands_in_the_history_newest_first() {
    let h = harness(ToolNaming::Prefixed);
    let served = ["echo", "tool_error", "transport_error"];
    lists(&h, "s", &served);
    h.manager.register(with_tools("s", &served)).await.unwrap();
    let caller = Caller::principal("user:alice");
    for name in ["s__echo", "s__tool_error", "s__transport_error", "s__echo"] {
        let _ = h
            .catalog
            .call_tool(
                &caller,
                name,
                text(json!({"text": "x"})),
                CallContext::default(),
            )
            .await;
    }
    let first = h.history.page(&id("s"), 3, None).await.unwrap();
    let tools: Vec<&str> = first.entries.iter().map(|r| r.tool.as_str()).collect();
    assert_eq!(tools, ["echo", "transport_error", "tool_error"]);
    assert!(first.entries[0].success);
    assert!(!first.entries[1].success);
    assert_eq!(first.entries[1].error_kind.as_deref(), Some("transport"));
    assert!(first.entries[2].success && first.entries[2].is_error);
    assert_eq!(first.entries[0].principal.as_deref(), Some("user:alice"));
    let second = h
        .history
        .page(&id("s"), 3, first.next_cursor)
        .await
        .unwrap();
    assert_eq!(second.entries.len(), 1);
    assert_eq!(second.entries[0].tool, "echo");
    assert_eq!(second.next_cursor, None);
}
