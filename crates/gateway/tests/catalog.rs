//! The aggregated catalogue and the invocation history, on fake ports.

use std::sync::Arc;
use std::time::Duration;

use mcpgw_config::ToolNames;
use mcpgw_core::{
    CallContext, Caller, EventSink, FrontendErrorKind, InMemoryInvocationHistory,
    InvocationHistory, LaunchError, ManagerSettings, McpFrontend, ServerId, ServerManager,
    ServerSpec, Tool,
};
use mcpgw_gateway::authz::{RandomnessError, SecretSource};
use mcpgw_gateway::{AuthService, AuthSettings, AuthorizedFrontend, EventBus, ToolCatalog};
use mcpgw_testkit::auth_store::InMemoryAuthStore;
use mcpgw_testkit::clock::FakeClock;
use mcpgw_testkit::fakes::{FakeBehaviour, FakeLauncher, RecordingEventSink, TokioSpawner};
use serde_json::json;
use tokio::sync::Notify;

struct Harness {
    manager: ServerManager,
    launcher: Arc<FakeLauncher>,
    catalog: Arc<ToolCatalog>,
    history: Arc<InMemoryInvocationHistory>,
}

fn harness(naming: ToolNames) -> Harness {
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
    let h = harness(ToolNames::prefixed());
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
    let h = harness(ToolNames::prefixed());
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
    let h = harness(ToolNames::prefixed());
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
    let h = harness(ToolNames::bare());
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
    let h = harness(ToolNames::prefixed());
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
    let h = harness(ToolNames::prefixed());
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
    let h = harness(ToolNames::prefixed());
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
    let h = harness(ToolNames::prefixed());
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
    let h = harness(ToolNames::prefixed());
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

// ----- calls that name tools the catalogue has not learned yet --------------------------------

/// A harness whose catalogue never probes: tools are learned only by calls.
fn without_probing(naming: ToolNames) -> Harness {
    let h = harness(naming);
    h.catalog.set_probing(false);
    h
}

fn state_of(h: &Harness, raw: &str) -> mcpgw_core::ServerState {
    h.manager.snapshot(&id(raw)).unwrap().state
}

async fn call_named(
    frontend: &dyn McpFrontend,
    caller: &Caller,
    name: &str,
) -> Result<mcpgw_core::ToolCallOutcome, mcpgw_core::FrontendError> {
    frontend
        .call_tool(
            caller,
            name,
            text(json!({"text": "hi"})),
            CallContext::default(),
        )
        .await
}

#[tokio::test]
async fn a_call_learns_the_tools_of_a_server_whose_tools_are_unknown_and_is_routed() {
    let h = without_probing(ToolNames::prefixed());
    h.manager.register(with_tools("quiet", &[])).await.unwrap();
    let outcome = call_named(&*h.catalog, &Caller::default(), "quiet__echo")
        .await
        .unwrap();
    assert_eq!(outcome.result["content"][0]["text"], "hi");
    assert_eq!(h.launcher.launches(), 1);
    assert_eq!(state_of(&h, "quiet"), mcpgw_core::ServerState::Ready);
    assert_eq!(
        names(&h.catalog),
        ["quiet__echo"],
        "and the list knows it now"
    );
}

#[tokio::test]
async fn concurrent_first_calls_of_unknown_tools_share_one_start() {
    let h = without_probing(ToolNames::prefixed());
    h.manager.register(with_tools("quiet", &[])).await.unwrap();
    let gate = Arc::new(Notify::new());
    h.launcher.set_behaviour(
        "quiet",
        FakeBehaviour {
            launch_gate: Some(gate.clone()),
            ..FakeBehaviour::default()
        },
    );
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let catalog = h.catalog.clone();
            tokio::spawn(
                async move { call_named(&*catalog, &Caller::default(), "quiet__echo").await },
            )
        })
        .collect();
    for _ in 0..1000 {
        tokio::task::yield_now().await;
    }
    assert_eq!(h.launcher.launches(), 1, "one start for every waiting call");
    gate.notify_one();
    for call in calls {
        let outcome = call.await.unwrap().unwrap();
        assert_eq!(outcome.result["content"][0]["text"], "hi");
    }
    assert_eq!(h.launcher.launches(), 1);
    assert_eq!(h.launcher.session("quiet").unwrap().calls().len(), 8);
}

#[tokio::test]
async fn a_tool_the_learned_list_lacks_is_unknown_after_the_start() {
    let h = without_probing(ToolNames::prefixed());
    h.manager.register(with_tools("quiet", &[])).await.unwrap();
    let error = call_named(&*h.catalog, &Caller::default(), "quiet__nope")
        .await
        .unwrap_err();
    assert_eq!(error.kind, FrontendErrorKind::UnknownName, "{error}");
    assert_eq!(error.message, "unknown tool: quiet__nope");
    assert_eq!(h.launcher.launches(), 1, "the server was started to learn");
    assert_eq!(state_of(&h, "quiet"), mcpgw_core::ServerState::Ready);
    assert!(
        h.launcher.session("quiet").unwrap().calls().is_empty(),
        "nothing reached the upstream"
    );
    // Known now: the next unknown name is answered without any start.
    let again = call_named(&*h.catalog, &Caller::default(), "quiet__nope")
        .await
        .unwrap_err();
    assert_eq!(again.kind, FrontendErrorKind::UnknownName);
    assert_eq!(h.launcher.launches(), 1);
}

#[tokio::test]
async fn a_server_that_cannot_start_answers_why_rather_than_unknown() {
    let h = without_probing(ToolNames::prefixed());
    h.manager.register(with_tools("broken", &[])).await.unwrap();
    h.launcher.set_behaviour(
        "broken",
        FakeBehaviour {
            launch_error: Some(LaunchError::CommandNotFound {
                command: "nope".into(),
            }),
            ..FakeBehaviour::default()
        },
    );
    let error = call_named(&*h.catalog, &Caller::default(), "broken__echo")
        .await
        .unwrap_err();
    assert_eq!(error.kind, FrontendErrorKind::Unavailable, "{error}");
    assert!(error.message.contains("was not found"), "{}", error.message);
}

#[tokio::test]
async fn names_of_no_server_start_nothing() {
    let h = without_probing(ToolNames::prefixed());
    h.manager.register(with_tools("quiet", &[])).await.unwrap();
    for name in [
        "echo",
        "zz__echo",
        "__echo",
        "quiet__",
        "quiet_echo",
        "bad id__echo",
    ] {
        let error = call_named(&*h.catalog, &Caller::default(), name)
            .await
            .unwrap_err();
        assert_eq!(error.kind, FrontendErrorKind::UnknownName, "{name}");
    }
    assert_eq!(h.launcher.launches(), 0);
}

#[tokio::test]
async fn bare_names_reach_known_tools_only_and_the_prefixed_form_reaches_every_tool() {
    let h = without_probing(ToolNames::bare());
    h.manager.register(with_tools("quiet", &[])).await.unwrap();
    let bare = call_named(&*h.catalog, &Caller::default(), "echo")
        .await
        .unwrap_err();
    assert_eq!(bare.kind, FrontendErrorKind::UnknownName);
    assert_eq!(
        h.launcher.launches(),
        0,
        "a bare name does not say whose it is"
    );

    call_named(&*h.catalog, &Caller::default(), "quiet__echo")
        .await
        .unwrap();
    assert_eq!(names(&h.catalog), ["echo"], "listed bare once known");
    for name in ["echo", "quiet__echo"] {
        let outcome = call_named(&*h.catalog, &Caller::default(), name)
            .await
            .unwrap();
        assert_eq!(outcome.result["content"][0]["text"], "hi", "{name}");
    }
    assert_eq!(h.launcher.session("quiet").unwrap().calls().len(), 3);
}

/// Fills buffers with a running byte; enough for the auth service's ids in these tests.
#[derive(Default)]
struct CountingSecrets(std::sync::atomic::AtomicU8);

impl SecretSource for CountingSecrets {
    fn fill(&self, destination: &mut [u8]) -> Result<(), RandomnessError> {
        let start = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        for (index, byte) in destination.iter_mut().enumerate() {
            *byte = start.wrapping_add(u8::try_from(index % 256).unwrap_or_default());
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_caller_the_policies_do_not_admit_starts_nothing() {
    let h = without_probing(ToolNames::prefixed());
    h.manager.register(with_tools("quiet", &[])).await.unwrap();
    let auth = AuthService::new(
        AuthSettings {
            enabled: true,
            ..AuthSettings::default()
        },
        Arc::new(InMemoryAuthStore::new()),
        Arc::new(RecordingEventSink::default()),
        Arc::new(FakeClock::new()),
        Arc::new(CountingSecrets::default()),
    );
    auth.load().await.unwrap();
    let auth = Arc::new(auth);
    for user in ["user:alice", "user:mallory"] {
        auth.assign_role(user, "developer", None).await.unwrap();
    }
    auth.put_policy("provider", "quiet", &[], &["user:mallory".to_owned()])
        .await
        .unwrap();
    auth.put_policy("tool", "quiet__secret", &["user:bob".to_owned()], &[])
        .await
        .unwrap();
    let frontend = AuthorizedFrontend::new(h.catalog.clone(), auth);
    let mallory = Caller::principal("user:mallory");
    let alice = Caller::principal("user:alice");
    let nobody = Caller::principal("user:nobody");

    for (caller, name) in [
        (&mallory, "quiet__echo"),
        (&nobody, "quiet__echo"),
        (&alice, "quiet__secret"),
        (&alice, "zz__echo"),
    ] {
        let error = call_named(&*frontend, caller, name).await.unwrap_err();
        assert_eq!(error.kind, FrontendErrorKind::UnknownName, "{name}");
        assert_eq!(error.message, format!("unknown tool: {name}"));
    }
    assert_eq!(
        h.launcher.launches(),
        0,
        "no start for a caller who may not call"
    );

    let outcome = call_named(&*frontend, &alice, "quiet__echo").await.unwrap();
    assert_eq!(outcome.result["content"][0]["text"], "hi");
    assert_eq!(h.launcher.launches(), 1);
    // Known now, and still refused the same way.
    let error = call_named(&*frontend, &mallory, "quiet__echo")
        .await
        .unwrap_err();
    assert_eq!(error.kind, FrontendErrorKind::UnknownName);
}
