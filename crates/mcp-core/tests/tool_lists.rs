//! Tool lists kept across restarts, as the manager sees them: a kept list is served only for
//! the definition it was learned under, only in place of nothing, and gives way to what the
//! server lists itself.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use mcpgw_core::{
    Clock, DomainEvent, LaunchSpec, ManagerSettings, ServerId, ServerManager, ServerSpec,
    StoredToolList, Timestamp, Tool, ToolSource,
};
use mcpgw_testkit::clock::FakeClock;
use mcpgw_testkit::fakes::{FakeBehaviour, FakeLauncher, RecordingEventSink, TokioSpawner};
use serde_json::json;

struct Harness {
    manager: ServerManager,
    launcher: Arc<FakeLauncher>,
    clock: Arc<FakeClock>,
    events: Arc<RecordingEventSink>,
}

fn harness() -> Harness {
    let launcher = Arc::new(FakeLauncher::new());
    let clock = Arc::new(FakeClock::starting_at(1_790_000_000_000_000));
    let events = Arc::new(RecordingEventSink::default());
    let manager = ServerManager::new(
        launcher.clone(),
        clock.clone(),
        events.clone(),
        Arc::new(TokioSpawner),
        None,
        ManagerSettings::default(),
    );
    Harness {
        manager,
        launcher,
        clock,
        events,
    }
}

fn id(raw: &str) -> ServerId {
    ServerId::parse(raw).unwrap()
}

fn spec(raw: &str) -> ServerSpec {
    ServerSpec::subprocess(id(raw), vec!["fixture".into()])
}

/// A kept list of `tools` for `spec`'s current definition, learned at `LEARNED_AT`.
fn kept(spec: &ServerSpec, tools: &[&str]) -> StoredToolList {
    StoredToolList {
        server_id: spec.id.clone(),
        definition_digest: spec.tool_list_digest(),
        tools: tools
            .iter()
            .map(|name| {
                Tool::new(*name).with_input_schema(json!({
                    "type": "object",
                    "properties": {"x": {"type": "number", "minimum": 0.1}},
                }))
            })
            .collect(),
        learned_at: LEARNED_AT,
    }
}

const LEARNED_AT: Timestamp = Timestamp::from_unix_micros(1_700_000_000_123_456);

fn tool_events(h: &Harness) -> usize {
    h.events
        .events()
        .iter()
        .filter(|event| matches!(event, DomainEvent::McpServerToolsChanged { .. }))
        .count()
}

#[tokio::test]
async fn a_kept_list_of_the_same_definition_is_served_without_a_start() {
    let h = harness();
    h.manager.register(spec("quiet")).await.unwrap();
    let list = kept(&spec("quiet"), &["add", "echo"]);

    assert!(h.manager.restore_tools(&list).unwrap());

    let served = h.manager.tool_list(&id("quiet")).unwrap();
    assert_eq!(*served.tools, list.tools);
    assert_eq!(served.source, ToolSource::Stored);
    assert_eq!(served.learned_at, Some(LEARNED_AT));
    let snapshot = h.manager.snapshot(&id("quiet")).unwrap();
    assert_eq!(
        (snapshot.tool_source, snapshot.tool_count),
        (ToolSource::Stored, 2)
    );
    assert_eq!(h.launcher.launches(), 0, "nothing was started");
    assert_eq!(tool_events(&h), 1, "whoever shows the tools hears of them");
    // A probe has nothing to learn: the tools are known.
    assert_eq!(
        h.manager.probe_tools(&id("quiet")).await.unwrap(),
        list.tools
    );
    assert_eq!(h.launcher.launches(), 0);
}

#[tokio::test]
async fn a_list_of_another_definition_is_never_served() {
    let h = harness();
    let mut changed = spec("quiet");
    changed.launch = LaunchSpec::Subprocess {
        command: vec!["fixture".into()],
        env: BTreeMap::from([("MODE".into(), "new".into())]),
        cwd: None,
    };
    h.manager.register(changed).await.unwrap();

    // Learned under the old definition (no `MODE`).
    assert!(
        !h.manager
            .restore_tools(&kept(&spec("quiet"), &["old"]))
            .unwrap()
    );

    let served = h.manager.tool_list(&id("quiet")).unwrap();
    assert_eq!(served.source, ToolSource::Unknown);
    assert!(served.tools.is_empty());
    assert_eq!(tool_events(&h), 0);
}

#[tokio::test]
async fn what_does_not_count_for_the_digest_does_not_stop_a_restore() {
    let h = harness();
    let mut described = spec("quiet");
    described.description = Some("now with a description".into());
    described.idle_ttl = Duration::from_secs(7);
    h.manager.register(described).await.unwrap();
    assert!(
        h.manager
            .restore_tools(&kept(&spec("quiet"), &["add"]))
            .unwrap()
    );
}

#[tokio::test]
async fn known_tools_are_never_replaced_by_a_kept_list() {
    let h = harness();
    // Declared tools win over a kept list.
    let declared = ServerSpec {
        predefined_tools: vec![Tool::new("declared")],
        ..spec("declared")
    };
    h.manager.register(declared.clone()).await.unwrap();
    assert!(
        !h.manager
            .restore_tools(&kept(&declared, &["kept"]))
            .unwrap()
    );
    assert_eq!(
        h.manager.tools(&id("declared")).unwrap(),
        (vec![Tool::new("declared")], ToolSource::Predefined)
    );

    // So do the tools a server listed in this run.
    h.manager.register(spec("ran")).await.unwrap();
    h.manager.start(&id("ran")).await.unwrap();
    assert!(
        !h.manager
            .restore_tools(&kept(&spec("ran"), &["kept"]))
            .unwrap()
    );
    let (tools, source) = h.manager.tools(&id("ran")).unwrap();
    assert_eq!(source, ToolSource::Live);
    assert_eq!(tools[0].name, "echo");

    // And a second kept list does not replace the first.
    h.manager.register(spec("twice")).await.unwrap();
    assert!(
        h.manager
            .restore_tools(&kept(&spec("twice"), &["first"]))
            .unwrap()
    );
    assert!(
        !h.manager
            .restore_tools(&kept(&spec("twice"), &["second"]))
            .unwrap()
    );
    assert_eq!(h.manager.tools(&id("twice")).unwrap().0[0].name, "first");

    // An unknown server is an error, as for every other use case.
    assert!(
        h.manager
            .restore_tools(&kept(&spec("nobody"), &["x"]))
            .is_err()
    );
}

#[tokio::test]
async fn what_the_server_lists_replaces_the_kept_list() {
    let h = harness();
    h.launcher.set_behaviour(
        "quiet",
        FakeBehaviour {
            tools: vec![Tool::new("fresh")],
            ..FakeBehaviour::default()
        },
    );
    h.manager.register(spec("quiet")).await.unwrap();
    assert!(
        h.manager
            .restore_tools(&kept(&spec("quiet"), &["old"]))
            .unwrap()
    );
    h.clock.advance(Duration::from_secs(3));

    h.manager.start(&id("quiet")).await.unwrap();

    let served = h.manager.tool_list(&id("quiet")).unwrap();
    assert_eq!(served.source, ToolSource::Live);
    assert_eq!(*served.tools, vec![Tool::new("fresh")]);
    assert_eq!(served.learned_at, Some(h.clock.wall()));
    assert_eq!(
        served.learned_from.unwrap().tool_list_digest(),
        spec("quiet").tool_list_digest()
    );
    // Restored, then changed by the start.
    assert_eq!(tool_events(&h), 2);
}

#[tokio::test]
async fn a_new_launch_of_a_server_that_is_not_running_drops_its_listed_tools() {
    let h = harness();
    h.manager.register(spec("ran")).await.unwrap();
    h.manager.start(&id("ran")).await.unwrap();
    h.manager.stop(&id("ran")).await.unwrap();
    h.manager.register(spec("kept")).await.unwrap();
    assert!(
        h.manager
            .restore_tools(&kept(&spec("kept"), &["old"]))
            .unwrap()
    );

    for raw in ["ran", "kept"] {
        // Only the description changes: the list stays.
        let described = ServerSpec {
            description: Some("same launch".into()),
            ..spec(raw)
        };
        h.manager.update(described).await.unwrap();
        assert_ne!(
            h.manager.tool_list(&id(raw)).unwrap().source,
            ToolSource::Unknown
        );

        // Another command: the list of the old one is not served any more.
        let relaunched = ServerSpec::subprocess(id(raw), vec!["other".into()]);
        h.manager.update(relaunched).await.unwrap();
        let served = h.manager.tool_list(&id(raw)).unwrap();
        assert_eq!(served.source, ToolSource::Unknown, "{raw}");
        assert!(
            served.tools.is_empty() && served.learned_at.is_none(),
            "{raw}"
        );
    }
    assert_eq!(h.launcher.launches(), 1, "dropping a list starts nothing");
}

#[tokio::test]
async fn a_running_server_keeps_its_tools_until_its_restart_lists_them_again() {
    let h = harness();
    h.manager.register(spec("running")).await.unwrap();
    h.manager.start(&id("running")).await.unwrap();
    h.launcher.set_behaviour(
        "running",
        FakeBehaviour {
            tools: vec![Tool::new("relaunched")],
            ..FakeBehaviour::default()
        },
    );
    let relaunched = ServerSpec::subprocess(id("running"), vec!["other".into()]);
    h.manager.update(relaunched.clone()).await.unwrap();
    let served = h.manager.tool_list(&id("running")).unwrap();
    assert_eq!(served.source, ToolSource::Live);
    assert_eq!(*served.tools, vec![Tool::new("relaunched")]);
    assert_eq!(
        served.learned_from.unwrap().tool_list_digest(),
        relaunched.tool_list_digest()
    );
}

#[tokio::test]
async fn a_kept_list_answers_for_the_tools_it_has_and_the_server_for_the_others() {
    let h = harness();
    h.manager.register(spec("quiet")).await.unwrap();
    assert!(
        h.manager
            .restore_tools(&kept(&spec("quiet"), &["add"]))
            .unwrap()
    );
    let quiet = id("quiet");
    assert_eq!(h.manager.knows_tool(&quiet, "add").unwrap(), Some(true));
    assert_eq!(
        h.manager.knows_tool(&quiet, "echo").unwrap(),
        None,
        "the program behind the definition may list it now"
    );

    // Once the server has listed its tools in this run, its list answers both ways, running
    // or not.
    h.manager.start(&quiet).await.unwrap();
    assert_eq!(h.manager.knows_tool(&quiet, "echo").unwrap(), Some(true));
    assert_eq!(h.manager.knows_tool(&quiet, "add").unwrap(), Some(false));
    h.manager.stop(&quiet).await.unwrap();
    assert_eq!(h.manager.knows_tool(&quiet, "add").unwrap(), Some(false));
    assert_eq!(h.launcher.launches(), 1);
}

#[tokio::test]
async fn tools_declared_by_an_update_replace_a_kept_list() {
    let h = harness();
    h.manager.register(spec("quiet")).await.unwrap();
    assert!(
        h.manager
            .restore_tools(&kept(&spec("quiet"), &["kept"]))
            .unwrap()
    );
    // The launch is the same, so nothing restarts; but a definition that declares tools lists
    // those, as it would have at start-up, where the kept list would not have been served.
    let declared = ServerSpec {
        predefined_tools: vec![Tool::new("declared")],
        ..spec("quiet")
    };
    h.manager.update(declared).await.unwrap();
    assert_eq!(
        h.manager.tools(&id("quiet")).unwrap(),
        (vec![Tool::new("declared")], ToolSource::Predefined)
    );
    assert_eq!(h.manager.tool_list(&id("quiet")).unwrap().learned_at, None);
    assert_eq!(
        h.manager.knows_tool(&id("quiet"), "kept").unwrap(),
        Some(false)
    );
    assert_eq!(h.launcher.launches(), 0);
}
