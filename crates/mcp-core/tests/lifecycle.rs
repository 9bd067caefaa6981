//! The server lifecycle, driven through the manager with fake ports and a fake clock.

use std::sync::Arc;
use std::time::Duration;

use mcpgw_core::{
    CallContext, CoreError, DomainEvent, ErrorKind, LaunchError, ManagerSettings, ServerId,
    ServerManager, ServerOrigin, ServerRepository, ServerSpec, ServerState, Tool, ToolCall,
    ToolSource,
};
use mcpgw_testkit::clock::FakeClock;
use mcpgw_testkit::fakes::{FakeBehaviour, FakeLauncher, RecordingEventSink, TokioSpawner};
use serde_json::json;
use tokio::sync::Notify;

struct Harness {
    manager: ServerManager,
    launcher: Arc<FakeLauncher>,
    clock: Arc<FakeClock>,
    events: Arc<RecordingEventSink>,
}

fn harness() -> Harness {
    harness_with(ManagerSettings::default())
}

fn harness_with(settings: ManagerSettings) -> Harness {
    let launcher = Arc::new(FakeLauncher::new());
    let clock = Arc::new(FakeClock::new());
    let events = Arc::new(RecordingEventSink::default());
    let manager = ServerManager::new(
        launcher.clone(),
        clock.clone(),
        events.clone(),
        Arc::new(TokioSpawner),
        None,
        settings,
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

fn call(name: &str) -> ToolCall {
    ToolCall {
        name: name.into(),
        arguments: Some(json!({"text": "hi"}).as_object().unwrap().clone()),
    }
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

fn state(h: &Harness, raw: &str) -> ServerState {
    h.manager.snapshot(&id(raw)).unwrap().state
}

#[tokio::test]
async fn registering_lists_and_refuses_duplicates() {
    let h = harness();
    h.manager.register(spec("b")).await.unwrap();
    h.manager.register(spec("a")).await.unwrap();
    let ids: Vec<String> = h
        .manager
        .list(None)
        .iter()
        .map(|s| s.id().to_string())
        .collect();
    assert_eq!(ids, ["a", "b"], "listing is sorted by id");
    assert!(
        h.manager
            .list(None)
            .iter()
            .all(|s| s.state == ServerState::Cold)
    );
    let duplicate = h.manager.register(spec("a")).await.unwrap_err();
    assert!(matches!(duplicate, CoreError::ServerAlreadyExists(_)));
    assert_eq!(duplicate.kind(), ErrorKind::Conflict);
    assert!(h.manager.list(Some(ServerState::Ready)).is_empty());
    assert_eq!(h.manager.list(Some(ServerState::Cold)).len(), 2);
    assert_eq!(h.launcher.launches(), 0, "registration starts nothing");
}

#[tokio::test]
async fn unknown_servers_are_not_found() {
    let h = harness();
    let missing = id("missing");
    for error in [
        h.manager.snapshot(&missing).unwrap_err(),
        h.manager.start(&missing).await.unwrap_err(),
        h.manager.stop(&missing).await.unwrap_err(),
        h.manager.delete(&missing).await.unwrap_err(),
        h.manager.logs(&missing, 10).unwrap_err(),
        h.manager
            .call_tool(&missing, call("echo"), CallContext::default())
            .await
            .unwrap_err(),
    ] {
        assert_eq!(error.kind(), ErrorKind::NotFound, "{error}");
    }
}

#[tokio::test]
async fn concurrent_first_calls_share_one_start() {
    let h = harness();
    h.manager.register(spec("math")).await.unwrap();
    let gate = Arc::new(Notify::new());
    h.launcher.set_behaviour(
        "math",
        FakeBehaviour {
            launch_gate: Some(gate.clone()),
            ..FakeBehaviour::default()
        },
    );
    let callers: Vec<_> = (0..16)
        .map(|_| {
            let manager = h.manager.clone();
            tokio::spawn(async move {
                manager
                    .call_tool(&id("math"), call("echo"), CallContext::default())
                    .await
            })
        })
        .collect();
    eventually("the start to begin", || h.launcher.launches() == 1).await;
    assert_eq!(state(&h, "math"), ServerState::Initializing);
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        h.launcher.launches(),
        1,
        "waiting callers must not launch again"
    );
    gate.notify_one();
    for caller in callers {
        let outcome = caller.await.unwrap().unwrap();
        assert_eq!(outcome.result["content"][0]["text"], "hi");
    }
    assert_eq!(h.launcher.launches(), 1);
    assert_eq!(h.launcher.session("math").unwrap().calls().len(), 16);
    assert_eq!(state(&h, "math"), ServerState::Ready);
    assert_eq!(
        h.events.transitions(),
        [
            ("cold".into(), "initializing".into()),
            ("initializing".into(), "ready".into())
        ]
    );
}

#[tokio::test]
async fn a_caller_that_gives_up_does_not_leave_the_start_half_done() {
    let h = harness();
    h.manager.register(spec("math")).await.unwrap();
    let gate = Arc::new(Notify::new());
    h.launcher.set_behaviour(
        "math",
        FakeBehaviour {
            launch_gate: Some(gate.clone()),
            ..FakeBehaviour::default()
        },
    );
    let caller = {
        let manager = h.manager.clone();
        tokio::spawn(async move { manager.start(&id("math")).await })
    };
    eventually("the start to begin", || h.launcher.launches() == 1).await;
    caller.abort();
    gate.notify_one();
    eventually("the start to finish without its caller", || {
        state(&h, "math") == ServerState::Ready
    })
    .await;
}

#[tokio::test]
async fn a_failed_start_makes_the_server_dead_and_backs_off() {
    let h = harness();
    h.manager.register(spec("broken")).await.unwrap();
    h.launcher.set_behaviour(
        "broken",
        FakeBehaviour {
            launch_error: Some(LaunchError::CommandNotFound {
                command: "nope".into(),
            }),
            ..FakeBehaviour::default()
        },
    );
    let error = h
        .manager
        .call_tool(&id("broken"), call("echo"), CallContext::default())
        .await;
    let error = error.unwrap_err();
    assert!(matches!(error, CoreError::StartFailed { .. }), "{error}");
    assert!(
        error.to_string().contains("`nope` was not found"),
        "{error}"
    );
    assert_eq!(state(&h, "broken"), ServerState::Dead);
    let snapshot = h.manager.snapshot(&id("broken")).unwrap();
    assert_eq!(snapshot.consecutive_failures, 1);
    assert!(snapshot.last_error.unwrap().contains("not found"));
    assert!(h.events.event_types().contains(&"McpServerStartFailed"));

    // Within the backoff a lazy start is refused without launching.
    let refused = h
        .manager
        .call_tool(&id("broken"), call("echo"), CallContext::default())
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            CoreError::BackingOff {
                retry_in_ms: 1000,
                ..
            }
        ),
        "{refused}"
    );
    assert_eq!(refused.kind(), ErrorKind::Unavailable);
    assert_eq!(h.launcher.launches(), 1);

    // After it, the next use tries again (dead -> initializing).
    h.clock.advance(Duration::from_secs(1));
    h.launcher.set_behaviour("broken", FakeBehaviour::default());
    h.manager
        .call_tool(&id("broken"), call("echo"), CallContext::default())
        .await
        .unwrap();
    assert_eq!(state(&h, "broken"), ServerState::Ready);
    assert_eq!(h.launcher.launches(), 2);
}

#[tokio::test]
async fn an_explicit_start_ignores_the_backoff() {
    let h = harness();
    h.manager.register(spec("s")).await.unwrap();
    h.launcher.set_behaviour(
        "s",
        FakeBehaviour {
            launch_error: Some(LaunchError::Handshake("bad".into())),
            ..FakeBehaviour::default()
        },
    );
    assert!(h.manager.start(&id("s")).await.is_err());
    h.launcher.set_behaviour("s", FakeBehaviour::default());
    let snapshot = h.manager.start(&id("s")).await.unwrap();
    assert_eq!(snapshot.state, ServerState::Ready);
}

#[tokio::test]
async fn repeated_start_failures_reach_degraded() {
    let h = harness();
    h.manager
        .register(ServerSpec {
            max_consecutive_failures: 2,
            ..spec("s")
        })
        .await
        .unwrap();
    h.launcher.set_behaviour(
        "s",
        FakeBehaviour {
            launch_error: Some(LaunchError::Handshake("bad".into())),
            ..FakeBehaviour::default()
        },
    );
    assert!(h.manager.start(&id("s")).await.is_err());
    assert_eq!(state(&h, "s"), ServerState::Dead);
    assert!(h.manager.start(&id("s")).await.is_err());
    assert_eq!(state(&h, "s"), ServerState::Degraded);
    assert_eq!(
        h.events.transitions().last().unwrap(),
        &("dead".to_string(), "degraded".to_string())
    );
}

#[tokio::test]
async fn transport_failures_degrade_tool_errors_do_not_and_success_resets() {
    let h = harness();
    h.manager.register(spec("s")).await.unwrap();
    let s = id("s");
    let ctx = CallContext::default;
    for name in [
        "tool_error",
        "protocol_error",
        "unknown_tool",
        "tool_error",
        "protocol_error",
    ] {
        let _ = h.manager.call_tool(&s, call(name), ctx()).await;
    }
    assert_eq!(h.manager.snapshot(&s).unwrap().consecutive_failures, 0);
    assert_eq!(state(&h, "s"), ServerState::Ready);

    for _ in 0..2 {
        assert!(
            h.manager
                .call_tool(&s, call("transport_error"), ctx())
                .await
                .is_err()
        );
    }
    assert_eq!(h.manager.snapshot(&s).unwrap().consecutive_failures, 2);
    h.manager.call_tool(&s, call("echo"), ctx()).await.unwrap();
    assert_eq!(
        h.manager.snapshot(&s).unwrap().consecutive_failures,
        0,
        "a success resets"
    );
    for _ in 0..2 {
        assert!(
            h.manager
                .call_tool(&s, call("transport_error"), ctx())
                .await
                .is_err()
        );
    }
    assert_eq!(state(&h, "s"), ServerState::Ready);
    assert!(
        h.manager
            .call_tool(&s, call("transport_error"), ctx())
            .await
            .is_err()
    );
    assert_eq!(
        state(&h, "s"),
        ServerState::Degraded,
        "the third failure in a row degrades"
    );

    let types = h.events.event_types();
    // Two protocol errors, one unknown tool, five transport failures.
    assert_eq!(
        types
            .iter()
            .filter(|t| **t == "ToolInvocationFailed")
            .count(),
        8
    );
    assert!(types.contains(&"ToolInvocationCompleted"));
}

#[tokio::test]
async fn a_degraded_server_is_restarted_after_its_backoff() {
    let h = harness();
    h.manager
        .register(ServerSpec {
            max_consecutive_failures: 1,
            ..spec("s")
        })
        .await
        .unwrap();
    let s = id("s");
    assert!(
        h.manager
            .call_tool(&s, call("transport_error"), CallContext::default())
            .await
            .is_err()
    );
    assert_eq!(state(&h, "s"), ServerState::Degraded);
    let first = h.launcher.session("s").unwrap();

    h.manager.run_maintenance().await;
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        h.launcher.launches(),
        1,
        "no restart before the backoff has passed"
    );

    h.clock.advance(Duration::from_secs(1));
    h.manager.run_maintenance().await;
    eventually("the restart", || state(&h, "s") == ServerState::Ready).await;
    assert_eq!(h.launcher.launches(), 2);
    assert!(
        first.is_closed(),
        "the old session is closed before the new one starts"
    );
    assert!(
        h.events
            .transitions()
            .contains(&("degraded".into(), "initializing".into()))
    );
}

#[tokio::test]
async fn a_crash_makes_the_server_dead_and_the_next_call_restarts_it() {
    let h = harness();
    h.manager.register(spec("s")).await.unwrap();
    let s = id("s");
    h.manager.start(&s).await.unwrap();
    h.launcher.session("s").unwrap().crash("exited with code 1");
    eventually("the crash to be noticed", || {
        state(&h, "s") == ServerState::Dead
    })
    .await;
    let crashed = h
        .events
        .events()
        .into_iter()
        .find(|event| matches!(event, DomainEvent::McpServerCrashed { .. }))
        .expect("a crash event");
    assert!(
        matches!(crashed, DomainEvent::McpServerCrashed { ref exit, .. } if exit == "exited with code 1")
    );
    let crashed_session = h.launcher.session("s").unwrap();
    eventually(
        "what the crashed server left behind to be cleaned up",
        || crashed_session.closes() == 1,
    )
    .await;

    h.clock.advance(Duration::from_secs(1));
    h.manager
        .call_tool(&s, call("echo"), CallContext::default())
        .await
        .unwrap();
    assert_eq!(state(&h, "s"), ServerState::Ready);
    assert_eq!(h.launcher.launches(), 2);
}

#[tokio::test]
async fn a_stop_is_not_mistaken_for_a_crash() {
    let h = harness();
    h.manager.register(spec("s")).await.unwrap();
    h.manager.start(&id("s")).await.unwrap();
    let snapshot = h.manager.stop(&id("s")).await.unwrap();
    assert_eq!(snapshot.state, ServerState::Cold);
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    assert_eq!(state(&h, "s"), ServerState::Cold);
    assert!(!h.events.event_types().contains(&"McpServerCrashed"));
    assert_eq!(h.launcher.session("s").unwrap().closes(), 1);
    // Stopping again is a no-op.
    h.manager.stop(&id("s")).await.unwrap();
    assert_eq!(h.launcher.session("s").unwrap().closes(), 1);
}

#[tokio::test]
async fn stopping_a_dead_server_leaves_it_dead() {
    let h = harness();
    h.manager.register(spec("s")).await.unwrap();
    h.launcher.set_behaviour(
        "s",
        FakeBehaviour {
            launch_error: Some(LaunchError::Handshake("no".into())),
            ..FakeBehaviour::default()
        },
    );
    let _ = h.manager.start(&id("s")).await;
    assert_eq!(
        h.manager.stop(&id("s")).await.unwrap().state,
        ServerState::Dead
    );
}

#[tokio::test]
async fn health_checks_run_on_schedule_and_failures_degrade() {
    let h = harness();
    let s = id("s");
    h.manager
        .register(ServerSpec {
            health_check_interval: Duration::from_secs(10),
            ..spec("s")
        })
        .await
        .unwrap();
    h.manager.start(&s).await.unwrap();
    let session = h.launcher.session("s").unwrap();

    h.clock.advance(Duration::from_secs(9));
    h.manager.run_maintenance().await;
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    assert_eq!(session.pings(), 0, "not due yet");

    h.clock.advance(Duration::from_secs(1));
    h.manager.run_maintenance().await;
    eventually("the first health check", || session.pings() == 1).await;
    eventually("its result", || {
        h.manager.snapshot(&s).unwrap().last_health_check_ok == Some(true)
    })
    .await;

    session.set_healthy(false);
    for round in 1..=3 {
        h.clock.advance(Duration::from_secs(10));
        h.manager.run_maintenance().await;
        eventually("a failed check", || {
            h.manager.snapshot(&s).unwrap().consecutive_failures == round
        })
        .await;
    }
    assert_eq!(state(&h, "s"), ServerState::Degraded);
    let snapshot = h.manager.snapshot(&s).unwrap();
    assert_eq!(
        (snapshot.health_checks_passed, snapshot.health_checks_failed),
        (1, 3)
    );
    assert_eq!(
        h.events
            .event_types()
            .iter()
            .filter(|t| **t == "HealthCheckFailed")
            .count(),
        3
    );
}

#[tokio::test]
async fn idle_servers_are_stopped_but_not_while_a_call_runs() {
    let h = harness();
    let s = id("s");
    h.manager
        .register(ServerSpec {
            idle_ttl: Duration::from_secs(30),
            ..spec("s")
        })
        .await
        .unwrap();
    h.manager
        .call_tool(&s, call("echo"), CallContext::default())
        .await
        .unwrap();

    // A long call keeps the server in use.
    let hanging = {
        let manager = h.manager.clone();
        let ctx = CallContext::default();
        let cancel = ctx.cancellation.clone();
        (
            tokio::spawn(async move { manager.call_tool(&id("s"), call("hang"), ctx).await }),
            cancel,
        )
    };
    eventually("the call to be in flight", || {
        h.manager.snapshot(&s).unwrap().in_flight_calls == 1
    })
    .await;
    h.clock.advance(Duration::from_secs(31));
    h.manager.run_maintenance().await;
    assert_eq!(state(&h, "s"), ServerState::Ready);
    hanging.1.cancel();
    assert!(hanging.0.await.unwrap().is_err());

    h.clock.advance(Duration::from_secs(29));
    h.manager.run_maintenance().await;
    assert_eq!(state(&h, "s"), ServerState::Ready, "idle for 29 s only");
    h.clock.advance(Duration::from_secs(1));
    h.manager.run_maintenance().await;
    eventually("the idle server to be stopped", || {
        state(&h, "s") == ServerState::Cold
    })
    .await;
    assert!(
        h.events
            .events()
            .iter()
            .any(|event| matches!(event, DomainEvent::McpServerStopped { reason: "idle", .. }))
    );
}

#[tokio::test]
async fn a_call_that_outlives_the_timeout_is_cancelled_and_counts_as_a_failure() {
    let h = harness_with(ManagerSettings {
        call_timeout: Duration::from_secs(5),
        ..ManagerSettings::default()
    });
    let s = id("s");
    h.manager.register(spec("s")).await.unwrap();
    h.manager.start(&s).await.unwrap();
    let ctx = CallContext::default();
    let cancellation = ctx.cancellation.clone();
    let pending = {
        let manager = h.manager.clone();
        tokio::spawn(async move { manager.call_tool(&id("s"), call("hang"), ctx).await })
    };
    eventually("the call to wait on the clock", || h.clock.sleepers() >= 1).await;
    h.clock.advance(Duration::from_secs(5));
    let error = pending.await.unwrap().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Timeout, "{error}");
    assert!(
        cancellation.is_cancelled(),
        "the upstream request is cancelled"
    );
    assert_eq!(h.manager.snapshot(&s).unwrap().consecutive_failures, 1);
}

#[tokio::test]
async fn a_call_waits_for_a_start_no_longer_than_the_call_timeout() {
    let h = harness_with(ManagerSettings {
        call_timeout: Duration::from_secs(5),
        start_timeout: Duration::from_secs(60),
        ..ManagerSettings::default()
    });
    let s = id("s");
    h.manager.register(spec("s")).await.unwrap();
    let gate = Arc::new(Notify::new());
    h.launcher.set_behaviour(
        "s",
        FakeBehaviour {
            launch_gate: Some(gate.clone()),
            ..FakeBehaviour::default()
        },
    );
    let pending = {
        let manager = h.manager.clone();
        tokio::spawn(async move {
            manager
                .call_tool(&id("s"), call("echo"), CallContext::default())
                .await
        })
    };
    eventually("the start and the call to wait on the clock", || {
        h.launcher.launches() == 1 && h.clock.sleepers() >= 2
    })
    .await;
    h.clock.advance(Duration::from_secs(5));
    let error = pending.await.unwrap().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Timeout, "{error}");
    assert!(
        error
            .to_string()
            .contains("did not finish starting within 5 s"),
        "{error}"
    );
    // The start goes on without its caller; only its own outcome counts against health.
    let snapshot = h.manager.snapshot(&s).unwrap();
    assert_eq!(snapshot.state, ServerState::Initializing);
    assert_eq!(snapshot.consecutive_failures, 0);
    gate.notify_one();
    eventually("the start to finish", || {
        state(&h, "s") == ServerState::Ready
    })
    .await;
}

#[tokio::test]
async fn a_crash_counts_once_however_many_calls_it_fails() {
    let h = harness();
    let s = id("s");
    h.manager.register(spec("s")).await.unwrap();
    h.manager.start(&s).await.unwrap();
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let manager = h.manager.clone();
            tokio::spawn(async move {
                manager
                    .call_tool(&id("s"), call("wait_for_crash"), CallContext::default())
                    .await
            })
        })
        .collect();
    let session = h.launcher.session("s").unwrap();
    eventually("the calls to be in flight", || session.calls().len() == 3).await;
    session.crash("killed by a signal");
    for pending in calls {
        let error = pending.await.unwrap().unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
    }
    eventually("the crash to be recorded", || {
        state(&h, "s") == ServerState::Dead
    })
    .await;
    // One crash is one failure: not four (three calls and the end), which would reach the
    // limit of three and degrade the server at its first crash.
    assert_eq!(h.manager.snapshot(&s).unwrap().consecutive_failures, 1);
}

#[tokio::test]
async fn predefined_tools_are_listed_before_the_first_start() {
    let h = harness();
    let s = id("s");
    let predefined = vec![Tool::new("declared")];
    h.manager
        .register(ServerSpec {
            predefined_tools: predefined.clone(),
            ..spec("s")
        })
        .await
        .unwrap();
    h.manager.register(spec("plain")).await.unwrap();
    assert_eq!(
        h.manager.tools(&s).unwrap(),
        (predefined, ToolSource::Predefined)
    );
    assert_eq!(
        h.manager.tools(&id("plain")).unwrap(),
        (vec![], ToolSource::Unknown)
    );
    assert_eq!(h.launcher.launches(), 0);
    h.manager.start(&s).await.unwrap();
    let (live, source) = h.manager.tools(&s).unwrap();
    assert_eq!(source, ToolSource::Live);
    assert_eq!(live[0].name, "echo");
    // Still known after a stop.
    h.manager.stop(&s).await.unwrap();
    assert_eq!(h.manager.tools(&s).unwrap().1, ToolSource::Live);
}

#[tokio::test]
async fn logs_are_empty_until_the_first_start_and_kept_across_restarts() {
    let h = harness();
    let s = id("s");
    h.manager.register(spec("s")).await.unwrap();
    assert!(h.manager.logs(&s, 100).unwrap().is_empty());
    h.launcher.set_behaviour(
        "s",
        FakeBehaviour {
            stderr_at_launch: vec!["one".into(), "two".into()],
            ..FakeBehaviour::default()
        },
    );
    h.manager.start(&s).await.unwrap();
    h.manager.stop(&s).await.unwrap();
    h.manager.start(&s).await.unwrap();
    let lines: Vec<String> = h
        .manager
        .logs(&s, 100)
        .unwrap()
        .into_iter()
        .map(|l| l.line)
        .collect();
    assert_eq!(lines, ["one", "two", "one", "two"]);
    let last = h.manager.logs(&s, 1).unwrap();
    assert_eq!(last.len(), 1);
    assert_eq!(last[0].line, "two");
    assert_eq!(last[0].stream, "stderr");
    assert_eq!(last[0].timestamp.to_string(), "2026-11-21T14:03:07.000000");
}

#[tokio::test]
async fn servers_from_the_config_file_cannot_be_changed_over_the_api() {
    let h = harness();
    h.manager
        .register(ServerSpec {
            origin: ServerOrigin::Config,
            ..spec("c")
        })
        .await
        .unwrap();
    let update = h
        .manager
        .update(ServerSpec {
            description: Some("x".into()),
            ..spec("c")
        })
        .await;
    assert!(matches!(update, Err(CoreError::DeclaredInConfig(_))));
    let delete = h.manager.delete(&id("c")).await.unwrap_err();
    assert_eq!(delete.kind(), ErrorKind::Conflict);
    // They can still be started and stopped.
    h.manager.start(&id("c")).await.unwrap();
    h.manager.stop(&id("c")).await.unwrap();
    // And a reload may remove them.
    h.manager.unregister(&id("c")).await.unwrap();
    assert!(!h.manager.contains(&id("c")));
}

#[tokio::test]
async fn delete_stops_the_server_first() {
    let h = harness();
    h.manager.register(spec("s")).await.unwrap();
    h.manager.start(&id("s")).await.unwrap();
    h.manager.delete(&id("s")).await.unwrap();
    assert!(h.launcher.session("s").unwrap().is_closed());
    assert!(!h.manager.contains(&id("s")));
    let types = h.events.event_types();
    let stopped = types.iter().position(|t| *t == "McpServerStopped").unwrap();
    let removed = types.iter().position(|t| *t == "McpServerRemoved").unwrap();
    assert!(stopped < removed);
}

#[tokio::test]
async fn an_update_that_changes_the_launch_restarts_a_running_server() {
    let h = harness();
    h.manager.register(spec("s")).await.unwrap();
    h.manager.start(&id("s")).await.unwrap();
    let updated = ServerSpec::subprocess(id("s"), vec!["other".into()]);
    let snapshot = h.manager.update(updated).await.unwrap();
    assert_eq!(snapshot.state, ServerState::Ready);
    assert_eq!(h.launcher.launches(), 2);
    assert!(h.launcher.sessions("s")[0].is_closed());

    // A description change does not restart.
    let described = ServerSpec {
        description: Some("new".into()),
        ..ServerSpec::subprocess(id("s"), vec!["other".into()])
    };
    h.manager.update(described).await.unwrap();
    assert_eq!(h.launcher.launches(), 2);
    assert_eq!(
        h.manager
            .snapshot(&id("s"))
            .unwrap()
            .spec
            .description
            .as_deref(),
        Some("new")
    );
}

#[tokio::test]
async fn shutdown_stops_every_running_server() {
    let h = harness();
    for name in ["a", "b", "c"] {
        h.manager.register(spec(name)).await.unwrap();
    }
    h.manager.start(&id("a")).await.unwrap();
    h.manager.start(&id("b")).await.unwrap();
    h.manager.shutdown().await;
    assert!(
        h.manager
            .list(None)
            .iter()
            .all(|s| s.state == ServerState::Cold)
    );
    assert!(h.launcher.session("a").unwrap().is_closed());
    assert!(h.launcher.session("b").unwrap().is_closed());
}

/// A repository whose writes give way to other tasks several times before they land, as a
/// real store's do while they wait for the disk: it lets two writes interleave.
struct SlowRepository(mcpgw_testkit::repository_suite::InMemoryServerRepository);

impl SlowRepository {
    async fn give_way() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }
}

#[async_trait::async_trait]
impl ServerRepository for SlowRepository {
    async fn save(&self, spec: &ServerSpec) -> Result<(), mcpgw_core::RepositoryError> {
        Self::give_way().await;
        self.0.save(spec).await
    }

    async fn delete(&self, id: &ServerId) -> Result<(), mcpgw_core::RepositoryError> {
        Self::give_way().await;
        self.0.delete(id).await
    }

    async fn load_all(&self) -> Result<Vec<ServerSpec>, mcpgw_core::RepositoryError> {
        self.0.load_all().await
    }
}

fn harness_with_repository() -> (Harness, Arc<SlowRepository>) {
    let repository = Arc::new(SlowRepository(
        mcpgw_testkit::repository_suite::InMemoryServerRepository::new(),
    ));
    let launcher = Arc::new(FakeLauncher::new());
    let clock = Arc::new(FakeClock::new());
    let events = Arc::new(RecordingEventSink::default());
    let manager = ServerManager::new(
        launcher.clone(),
        clock.clone(),
        events.clone(),
        Arc::new(TokioSpawner),
        Some(repository.clone()),
        ManagerSettings::default(),
    );
    let harness = Harness {
        manager,
        launcher,
        clock,
        events,
    };
    (harness, repository)
}

fn described(raw: &str, description: &str) -> ServerSpec {
    let mut spec = spec(raw);
    spec.origin = ServerOrigin::Api;
    spec.description = Some(description.to_owned());
    spec
}

#[tokio::test]
async fn two_creates_of_one_id_store_the_one_that_was_registered() {
    let (h, repository) = harness_with_repository();
    // Bad input: the same id created twice at the same moment, with different definitions.
    let (first, second) = tokio::join!(
        h.manager.register(described("twin", "first")),
        h.manager.register(described("twin", "second")),
    );
    assert!(
        first.is_ok() != second.is_ok(),
        "exactly one create wins: {first:?} / {second:?}"
    );
    let loser = if first.is_ok() { second } else { first };
    assert!(
        matches!(loser, Err(CoreError::ServerAlreadyExists(_))),
        "{loser:?}"
    );
    let registered = h.manager.snapshot(&id("twin")).unwrap();
    let registered = registered.spec.description.clone();
    let stored = repository.load_all().await.unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(
        stored[0].description, registered,
        "the stored definition is the registered one, so a restart brings back what was acknowledged"
    );
}

#[tokio::test]
async fn an_update_racing_a_delete_never_stores_a_removed_server() {
    let (h, repository) = harness_with_repository();
    h.manager.register(described("gone", "v1")).await.unwrap();
    let gone = id("gone");
    // Running, so that stopping it takes a while.
    h.manager.start(&gone).await.unwrap();
    // The delete goes first, so the update comes while the server is being stopped.
    let (deleted, updated) = tokio::join!(
        h.manager.delete(&gone),
        h.manager.update(described("gone", "v2")),
    );
    deleted.unwrap();
    let stored = repository.load_all().await.unwrap();
    assert!(
        stored.is_empty(),
        "a deleted server must not come back at the next start: {stored:?} (update: {updated:?})"
    );
    assert!(h.manager.snapshot(&id("gone")).is_err());
}

// ----- tool probes and the demands that win over them ----------------------------------------

/// Holds every launch of `raw` until the returned gate is notified.
fn gated(h: &Harness, raw: &str) -> Arc<Notify> {
    let gate = Arc::new(Notify::new());
    h.launcher.set_behaviour(
        raw,
        FakeBehaviour {
            launch_gate: Some(gate.clone()),
            ..FakeBehaviour::default()
        },
    );
    gate
}

fn stops(h: &Harness) -> Vec<&'static str> {
    h.events
        .events()
        .into_iter()
        .filter_map(|event| match event {
            DomainEvent::McpServerStopped { reason, .. } => Some(reason),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_probe_that_nobody_joined_stops_the_server_it_started() {
    let h = harness();
    h.manager.register(spec("math")).await.unwrap();
    let tools = h.manager.probe_tools(&id("math")).await.unwrap();
    assert_eq!(
        tools,
        [Tool::new("echo").with_description("echoes its text")]
    );
    assert_eq!(state(&h, "math"), ServerState::Cold);
    assert!(h.launcher.session("math").unwrap().is_closed());
    assert_eq!(stops(&h), ["probed"]);
    assert_eq!(
        h.manager.tools(&id("math")).unwrap().1,
        ToolSource::Live,
        "what the probe learned stays known"
    );
}

#[tokio::test]
async fn a_start_during_a_probe_ends_ready_and_stays_ready() {
    let h = harness();
    h.manager.register(spec("math")).await.unwrap();
    let gate = gated(&h, "math");
    let probe = {
        let manager = h.manager.clone();
        tokio::spawn(async move { manager.probe_tools(&id("math")).await })
    };
    eventually("the probe's start to begin", || h.launcher.launches() == 1).await;
    let math = id("math");
    let mut start = Box::pin(h.manager.start(&math));
    assert!(
        futures::poll!(start.as_mut()).is_pending(),
        "the explicit start joins the probe's start"
    );
    gate.notify_one();
    let answered = start.await.unwrap();
    probe.await.unwrap().unwrap();
    assert_eq!(
        answered.state,
        ServerState::Ready,
        "the start answers ready"
    );
    assert_eq!(
        state(&h, "math"),
        ServerState::Ready,
        "and the probe left it so"
    );
    assert_eq!(h.launcher.launches(), 1, "one start, shared");
    assert!(!h.launcher.session("math").unwrap().is_closed());
    assert!(stops(&h).is_empty(), "{:?}", stops(&h));
}

#[tokio::test]
async fn a_call_during_a_probe_keeps_the_server_running() {
    let h = harness();
    h.manager.register(spec("math")).await.unwrap();
    let gate = gated(&h, "math");
    // Both futures are polled by hand, so that the call ends before the probe looks: the
    // server is no longer in use by then, and the probe must still see that it was wanted.
    let math = id("math");
    let mut probe = Box::pin(h.manager.probe_tools(&math));
    assert!(futures::poll!(probe.as_mut()).is_pending());
    eventually("the probe's start to begin", || h.launcher.launches() == 1).await;
    let mut calling = Box::pin(
        h.manager
            .call_tool(&math, call("echo"), CallContext::default()),
    );
    assert!(futures::poll!(calling.as_mut()).is_pending());
    gate.notify_one();
    let outcome = calling.await.unwrap();
    assert_eq!(outcome.result["content"][0]["text"], "hi");
    probe.await.unwrap();
    assert_eq!(state(&h, "math"), ServerState::Ready);
    assert!(!h.launcher.session("math").unwrap().is_closed());
    assert!(stops(&h).is_empty(), "{:?}", stops(&h));
}

#[tokio::test]
async fn a_group_members_start_during_a_probe_keeps_it_running() {
    let h = harness();
    h.manager.register(spec("member")).await.unwrap();
    let gate = gated(&h, "member");
    let member = id("member");
    let mut probe = Box::pin(h.manager.probe_tools(&member));
    assert!(futures::poll!(probe.as_mut()).is_pending());
    eventually("the probe's start to begin", || h.launcher.launches() == 1).await;
    // What a group asks of the manager to bring a member back.
    let mut session = Box::pin(h.manager.session(&member));
    assert!(futures::poll!(session.as_mut()).is_pending());
    gate.notify_one();
    session.await.unwrap();
    probe.await.unwrap();
    assert_eq!(state(&h, "member"), ServerState::Ready);
    assert!(stops(&h).is_empty(), "{:?}", stops(&h));
}

#[tokio::test]
async fn a_demand_ends_with_the_run_it_asked_for() {
    let h = harness();
    h.manager.register(spec("math")).await.unwrap();
    h.launcher.set_behaviour(
        "math",
        FakeBehaviour {
            launch_error: Some(LaunchError::Handshake("not yet".into())),
            ..FakeBehaviour::default()
        },
    );
    let failed = h
        .manager
        .call_tool(&id("math"), call("echo"), CallContext::default())
        .await
        .unwrap_err();
    assert_eq!(failed.kind(), ErrorKind::Unavailable, "{failed}");
    assert_eq!(state(&h, "math"), ServerState::Dead);
    // The call that asked for the server got its answer; a probe after the backoff learns the
    // tools and stops the server again, as nobody asked for this run.
    h.launcher.set_behaviour("math", FakeBehaviour::default());
    h.clock.advance(Duration::from_secs(1));
    h.manager.probe_tools(&id("math")).await.unwrap();
    assert_eq!(state(&h, "math"), ServerState::Cold);
    assert_eq!(stops(&h), ["probed"]);
}

// ----- gateways sharing one repository ---------------------------------------------------------

/// Two managers on one repository, as two gateway replicas on one database.
fn two_replicas() -> (Harness, Harness) {
    let repository = Arc::new(mcpgw_testkit::repository_suite::InMemoryServerRepository::new());
    let replica = || {
        let launcher = Arc::new(FakeLauncher::new());
        let clock = Arc::new(FakeClock::new());
        let events = Arc::new(RecordingEventSink::default());
        let manager = ServerManager::new(
            launcher.clone(),
            clock.clone(),
            events.clone(),
            Arc::new(TokioSpawner),
            Some(repository.clone() as Arc<dyn ServerRepository>),
            ManagerSettings::default(),
        );
        Harness {
            manager,
            launcher,
            clock,
            events,
        }
    };
    (replica(), replica())
}

#[tokio::test]
async fn a_resync_brings_in_what_another_gateway_created_changed_and_deleted() {
    let (a, b) = two_replicas();
    let configured = spec("configured");
    b.manager.register(configured.clone()).await.unwrap();

    a.manager.register(described("shared", "v1")).await.unwrap();
    let report = b.manager.resync_from_repository().await.unwrap();
    assert_eq!(report.added, [id("shared")]);
    assert_eq!(state(&b, "shared"), ServerState::Cold);
    assert!(b.manager.resync_from_repository().await.unwrap().is_empty());

    // Running on B, then its launch changes on A: B restarts it with the new definition.
    b.manager.start(&id("shared")).await.unwrap();
    let first_session = b.launcher.session("shared").unwrap();
    let mut changed = described("shared", "v2");
    changed.launch =
        ServerSpec::subprocess(id("shared"), vec!["fixture".into(), "--v2".into()]).launch;
    a.manager.update(changed).await.unwrap();
    let report = b.manager.resync_from_repository().await.unwrap();
    assert_eq!(report.updated, [id("shared")]);
    let snapshot = b.manager.snapshot(&id("shared")).unwrap();
    assert_eq!(snapshot.spec.description.as_deref(), Some("v2"));
    assert!(first_session.is_closed(), "the old launch was stopped");
    assert_eq!(
        state(&b, "shared"),
        ServerState::Ready,
        "and the new one runs"
    );

    a.manager.delete(&id("shared")).await.unwrap();
    let report = b.manager.resync_from_repository().await.unwrap();
    assert_eq!(report.removed, [id("shared")]);
    assert!(b.manager.snapshot(&id("shared")).is_err());
    assert!(
        b.launcher.session("shared").unwrap().is_closed(),
        "a server deleted elsewhere stops here"
    );
    assert!(
        b.manager.snapshot(&configured.id).is_ok(),
        "servers of the configuration file are never touched by a resync"
    );
}

#[tokio::test]
async fn a_resync_never_removes_a_server_being_created_here() {
    let (a, _b) = two_replicas();
    // Bad input for the comparison: creates and resyncs interleaved on one gateway. Each create
    // stores before it registers, and a resync that read the repository in between would
    // otherwise see a registered server that is not stored and remove it.
    for round in 0..20 {
        let name = format!("racing-{round}");
        let (created, resynced) = tokio::join!(
            a.manager.register(described(&name, "new")),
            a.manager.resync_from_repository(),
        );
        created.unwrap();
        resynced.unwrap();
        assert!(a.manager.snapshot(&id(&name)).is_ok(), "{name} was removed");
    }
}

#[tokio::test]
async fn a_resync_during_a_delete_leaves_the_delete_its_answer() {
    let (a, _b) = two_replicas();
    // Bad input for the comparison: a delete whose server cannot be stopped yet (its start is
    // held half way) when a resync reads the repository, which no longer holds it. The delete
    // answers; the resync must not take the server for one another gateway removed.
    let gate = Arc::new(Notify::new());
    a.launcher.set_behaviour(
        "going",
        FakeBehaviour {
            launch_gate: Some(gate.clone()),
            ..FakeBehaviour::default()
        },
    );
    a.manager.register(described("going", "v1")).await.unwrap();
    let starting = {
        let manager = a.manager.clone();
        tokio::spawn(async move { manager.start(&id("going")).await })
    };
    eventually("the start holds the server", || {
        state(&a, "going") == ServerState::Initializing
    })
    .await;
    let going = id("going");
    let (deleted, resynced, ()) = tokio::join!(
        a.manager.delete(&going),
        a.manager.resync_from_repository(),
        async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            gate.notify_one();
        },
    );
    deleted.unwrap_or_else(|error| panic!("the delete answered {error:?}"));
    let report = resynced.unwrap();
    assert!(
        report.removed.is_empty(),
        "a server this gateway is deleting was taken for one removed elsewhere: {report:?}"
    );
    assert!(a.manager.snapshot(&going).is_err());
    let _ = starting.await;
}
