//! What every [`ServerLauncher`] promises, as tests that every launcher must pass.
//!
//! A launcher starts servers in its own way, so the suite works through a
//! [`ServerLauncherFixture`] that the adapter's tests write once: it names the launcher and the
//! servers to launch. The adapter crate then runs the whole suite with one line in its tests:
//!
//! ```text
//! mcpgw_testkit::server_launcher_contract_suite!(MyFixture::new());
//! ```
//!
//! A server the launcher runs as processes of this machine may print the ids of its processes
//! to its stderr, one per line: the cases then check that none of them is left running where
//! the launcher promises to have ended them. The cases check what the port's documentation
//! promises:
//! - a launched server answers over the session the launch hands back;
//! - a launch that fails is an error, and leaves nothing it started running;
//! - a spec of a mode the launcher does not take is refused as unsupported;
//! - closing the session ends it and stops what the launch started (the server's processes),
//!   and requests fail from then on.

use std::sync::Arc;

use mcpgw_core::{
    LaunchError, LaunchedServer, LogBuffer, ServerLauncher, ServerSpec, SessionErrorKind,
};

use crate::clock::FakeClock;
use crate::mcp_session_suite::{echo, within};
use crate::process_spawner_suite::{is_running, kill_left_over, pids_in, wait_until_gone};

/// A launcher under test and the servers it launches.
pub trait ServerLauncherFixture: Send + Sync {
    /// The launcher under test.
    fn launcher(&self) -> Arc<dyn ServerLauncher>;

    /// A server that starts, with a tool `echo` that answers its `text` argument as the text of
    /// its first content block.
    fn working(&self) -> ServerSpec;

    /// A server of a mode the launcher takes whose launch fails (it exits during the start,
    /// never completes the handshake, cannot be reached), within a few seconds.
    fn failing(&self) -> ServerSpec;

    /// A server of a mode the launcher does not take.
    fn unsupported(&self) -> ServerSpec;
}

/// Expands to one `#[tokio::test]` per case of the [`ServerLauncher`] contract, each running
/// against a fresh fixture made by evaluating `$make_fixture` (any expression of a type that
/// implements [`ServerLauncherFixture`]; it may `.await`).
///
/// The tests use `#[tokio::test(flavor = "multi_thread")]`, so the invoking crate needs `tokio`
/// with the `macros`, `rt` and `rt-multi-thread` features among its dev-dependencies. The test
/// functions are named after the cases and defined in the invoking module: to run the suite
/// against two launchers in one crate, invoke it in two modules.
#[macro_export]
macro_rules! server_launcher_contract_suite {
    ($make_fixture:expr $(,)?) => {
        $crate::__server_launcher_contract_case!($make_fixture, a_launched_server_answers);
        $crate::__server_launcher_contract_case!(
            $make_fixture,
            a_failed_launch_is_an_error_and_leaves_nothing_running
        );
        $crate::__server_launcher_contract_case!(
            $make_fixture,
            a_mode_the_launcher_does_not_take_is_unsupported
        );
        $crate::__server_launcher_contract_case!(
            $make_fixture,
            closing_the_session_stops_what_the_launch_started
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __server_launcher_contract_case {
    ($make_fixture:expr, $case:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            let fixture = $make_fixture;
            $crate::server_launcher_suite::$case(&fixture).await;
        }
    };
}

fn logs_for(spec: &ServerSpec) -> Arc<LogBuffer> {
    Arc::new(LogBuffer::new(spec.id.clone(), Arc::new(FakeClock::new())))
}

fn lines_of(logs: &LogBuffer) -> Vec<String> {
    logs.tail(usize::MAX)
        .into_iter()
        .map(|line| line.line)
        .collect()
}

async fn launch(
    fixture: &dyn ServerLauncherFixture,
    spec: &ServerSpec,
    logs: &Arc<LogBuffer>,
) -> Result<LaunchedServer, LaunchError> {
    within(
        &format!("launching {}", spec.id),
        fixture.launcher().launch(spec, logs.clone()),
    )
    .await
}

fn expect_failure(answer: Result<LaunchedServer, LaunchError>, what: &str) -> LaunchError {
    match answer {
        Err(error) => error,
        Ok(launched) => {
            // Leave nothing behind for the next test.
            tokio::spawn(async move { launched.session.close().await });
            panic!("{what} was launched");
        }
    }
}

pub async fn a_launched_server_answers(fixture: &dyn ServerLauncherFixture) {
    let spec = fixture.working();
    let logs = logs_for(&spec);
    let launched = launch(fixture, &spec, &logs)
        .await
        .unwrap_or_else(|error| panic!("launching {} failed: {error}", spec.id));
    let session = launched.session;
    let tools = within("list_tools", session.list_tools()).await.unwrap();
    assert!(
        tools.iter().any(|tool| tool.name == "echo"),
        "`echo` is listed: {tools:?}"
    );
    assert_eq!(
        echo(session.as_ref(), "launched").await.unwrap(),
        "launched"
    );
    within("ping", session.ping()).await.unwrap();
    assert!(!session.has_ended());
    within("close", session.close()).await;
}

pub async fn a_failed_launch_is_an_error_and_leaves_nothing_running(
    fixture: &dyn ServerLauncherFixture,
) {
    let spec = fixture.failing();
    let logs = logs_for(&spec);
    let error = expect_failure(launch(fixture, &spec, &logs).await, "a failing server");
    assert!(!error.to_string().is_empty(), "{error:?}");
    assert!(
        !matches!(error, LaunchError::UnsupportedMode(_)),
        "the failing server must be of a mode the launcher takes: {error:?}"
    );
    // Checked at once: the launcher cleaned up before it answered.
    for pid in pids_in(&lines_of(&logs)) {
        if is_running(pid) {
            kill_left_over(pid);
            panic!("process {pid}, started by a launch that failed with {error:?}, still runs");
        }
    }
}

pub async fn a_mode_the_launcher_does_not_take_is_unsupported(fixture: &dyn ServerLauncherFixture) {
    let spec = fixture.unsupported();
    let logs = logs_for(&spec);
    let error = expect_failure(launch(fixture, &spec, &logs).await, "an unsupported mode");
    match error {
        LaunchError::UnsupportedMode(mode) => assert_eq!(mode, spec.launch.mode()),
        other => panic!("not refused as unsupported: {other:?}"),
    }
    assert!(lines_of(&logs).is_empty(), "nothing was started to log");
}

pub async fn closing_the_session_stops_what_the_launch_started(
    fixture: &dyn ServerLauncherFixture,
) {
    let spec = fixture.working();
    let logs = logs_for(&spec);
    let launched = launch(fixture, &spec, &logs)
        .await
        .unwrap_or_else(|error| panic!("launching {} failed: {error}", spec.id));
    let session = launched.session;
    assert_eq!(echo(session.as_ref(), "up").await.unwrap(), "up");
    let pids = pids_in(&lines_of(&logs));
    for &pid in &pids {
        assert!(is_running(pid), "process {pid} of the server runs");
    }
    within("close", session.close()).await;
    within("closed after close", session.closed()).await;
    assert!(session.has_ended());
    let error = within("a call after close", echo_error(session.as_ref())).await;
    assert_eq!(error, SessionErrorKind::Closed);
    for pid in pids {
        wait_until_gone(pid, "the closed server").await;
    }
}

async fn echo_error(session: &dyn mcpgw_core::McpSession) -> SessionErrorKind {
    match echo(session, "x").await {
        Ok(answer) => panic!("a closed session answered {answer:?}"),
        Err(error) => error.kind,
    }
}
