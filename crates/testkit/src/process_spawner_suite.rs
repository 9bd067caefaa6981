//! What every [`ProcessSpawner`] and the [`ProcessControl`](mcpgw_core::ProcessControl) it hands
//! back promise, as tests that every spawner must pass, on real processes.
//!
//! A spawner starts servers in its own way (a local process, a container), so the suite works
//! through a [`ProcessSpawnerFixture`] that the adapter's tests write once: it names the
//! spawner and turns a POSIX shell script into a launch the spawner runs as `sh -c script`. The
//! adapter crate then runs the whole suite with one line in its tests:
//!
//! ```text
//! mcpgw_testkit::process_spawner_contract_suite!(MyFixture::new());
//! ```
//!
//! Each case is also a public `async fn` taking `&dyn ProcessSpawnerFixture`, for callers that
//! need to run one case by hand. There is no in-memory spawner here: what the port promises is
//! about processes, which only real ones show. The cases check what the ports' documentation
//! promises:
//! - a spawner supports the launches it runs and refuses other modes;
//! - the server's stdin is what the gateway writes and its stdout what the gateway reads,
//!   closing stdin is how a server is asked to finish, and its stderr lines reach the server's
//!   log buffer in order;
//! - `exited` completes with the exit status, for every caller and every call;
//! - `terminate(grace)` ends the process and everything it started: a polite signal first,
//!   which a server may answer by exiting on its own, a forced kill once `grace` has passed
//!   for one that does not; it is idempotent, safe to call concurrently and after the process
//!   ended (which keeps its real exit status), and returns once nothing is left running;
//! - a program that does not exist is a launch error, not a process.
//!
//! The cases about what a server started look for its processes in `/proc` by the ids the
//! script prints, so they hold for spawners whose processes share the test's process id
//! namespace (a local process, not a container).

use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpgw_core::{
    LaunchError, LaunchSpec, LogBuffer, ProcessSpawner, ServerId, ServerOutput, SpawnedProcess,
};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::clock::FakeClock;

/// How long anything a case waits for may take on a loaded machine.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// A spawner under test and the launches it runs.
pub trait ProcessSpawnerFixture: Send + Sync {
    /// The spawner under test.
    fn spawner(&self) -> Arc<dyn ProcessSpawner>;

    /// A launch the spawner runs as `sh -c script`, with `sh` a POSIX shell and `sleep`,
    /// `cat` and `printf` at hand.
    fn shell(&self, script: &str) -> LaunchSpec;

    /// A launch of a program that does not exist.
    fn missing_program(&self) -> LaunchSpec;

    /// A launch of a mode the spawner does not run.
    fn unsupported(&self) -> LaunchSpec;
}

/// Expands to one `#[tokio::test]` per case of the [`ProcessSpawner`] contract, each running
/// against a fresh fixture made by evaluating `$make_fixture` (any expression of a type that
/// implements [`ProcessSpawnerFixture`]; it may `.await`).
///
/// The tests use `#[tokio::test(flavor = "multi_thread")]`, so the invoking crate needs `tokio`
/// with the `macros`, `rt`, `rt-multi-thread`, `time` and `io-util` features among its
/// dev-dependencies. The test functions are named after the cases and defined in the invoking
/// module: to run the suite against two spawners in one crate, invoke it in two modules.
#[macro_export]
macro_rules! process_spawner_contract_suite {
    ($make_fixture:expr $(,)?) => {
        $crate::__process_spawner_contract_case!(
            $make_fixture,
            supports_its_launches_and_refuses_other_modes
        );
        $crate::__process_spawner_contract_case!(
            $make_fixture,
            what_is_written_to_stdin_comes_back_on_stdout
        );
        $crate::__process_spawner_contract_case!(
            $make_fixture,
            stdout_ends_and_exited_reports_the_exit_code
        );
        $crate::__process_spawner_contract_case!(
            $make_fixture,
            stderr_lines_reach_the_logs_in_order
        );
        $crate::__process_spawner_contract_case!(
            $make_fixture,
            a_missing_program_is_a_launch_error
        );
        $crate::__process_spawner_contract_case!(
            $make_fixture,
            terminate_ends_the_process_and_everything_it_started
        );
        $crate::__process_spawner_contract_case!($make_fixture, the_polite_signal_comes_first);
        $crate::__process_spawner_contract_case!(
            $make_fixture,
            a_process_that_ignores_the_polite_signal_is_killed_after_the_grace
        );
        $crate::__process_spawner_contract_case!(
            $make_fixture,
            terminate_is_idempotent_and_safe_to_call_concurrently
        );
        $crate::__process_spawner_contract_case!(
            $make_fixture,
            terminate_after_the_process_exited_keeps_its_exit_status
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __process_spawner_contract_case {
    ($make_fixture:expr, $case:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            let fixture = $make_fixture;
            $crate::process_spawner_suite::$case(&fixture).await;
        }
    };
}

// ----- helpers ------------------------------------------------------------------------------

fn server_id() -> ServerId {
    ServerId::parse("contract").expect("a valid server id")
}

fn log_buffer() -> Arc<LogBuffer> {
    Arc::new(LogBuffer::new(server_id(), Arc::new(FakeClock::new())))
}

async fn spawn(
    fixture: &dyn ProcessSpawnerFixture,
    launch: &LaunchSpec,
    logs: &Arc<LogBuffer>,
) -> SpawnedProcess {
    tokio::time::timeout(
        PATIENCE,
        fixture.spawner().spawn(&server_id(), launch, logs.clone()),
    )
    .await
    .unwrap_or_else(|_| panic!("spawning {launch:?} took longer than {PATIENCE:?}"))
    .unwrap_or_else(|error| panic!("spawning {launch:?} failed: {error}"))
}

/// The server's stdout as a stream, whichever way the spawner handed it over.
fn reader_of(output: ServerOutput) -> Box<dyn AsyncRead + Send + Unpin> {
    match output {
        ServerOutput::Stream(stream) => Box::new(stream),
        ServerOutput::Pipe(descriptor) => Box::new(
            tokio::net::unix::pipe::Receiver::from_owned_fd(descriptor)
                .expect("a pipe's descriptor is the read end of a pipe"),
        ),
    }
}

fn lines_of(logs: &LogBuffer) -> Vec<String> {
    logs.tail(usize::MAX)
        .into_iter()
        .map(|line| line.line)
        .collect()
}

/// Polls the log buffer until `condition` holds on its lines, failing after [`PATIENCE`].
async fn wait_for_lines(logs: &LogBuffer, condition: impl Fn(&[String]) -> bool) -> Vec<String> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let lines = lines_of(logs);
        if condition(&lines) {
            return lines;
        }
        assert!(
            Instant::now() < deadline,
            "the server's log never showed what was awaited; it holds {lines:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The lines that are process ids (scripts print `$!` and `$$`).
pub(crate) fn pids_in(lines: &[String]) -> Vec<u32> {
    lines.iter().filter_map(|line| line.parse().ok()).collect()
}

/// Whether `pid` still runs code of its own. A zombie has finished and only waits to be
/// reaped; a process that is exiting, or has a SIGKILL pending, will never run again: the
/// kernel finishes it without its say, so it does not count as left running.
pub(crate) fn is_running(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // After the command name, which may hold spaces: state, ppid, pgrp, session, tty_nr,
    // tpgid, flags.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return false;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first().copied().unwrap_or("X");
    const EXITING: u64 = 0x4;
    let flags: u64 = fields.get(6).and_then(|f| f.parse().ok()).unwrap_or(0);
    if matches!(state, "Z" | "X" | "x") || flags & EXITING != 0 {
        return false;
    }
    const SIGKILL_BIT: u64 = 1 << (9 - 1);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kill_pending = status.lines().any(|line| {
        line.strip_prefix("SigPnd:")
            .or_else(|| line.strip_prefix("ShdPnd:"))
            .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
            .is_some_and(|mask| mask & SIGKILL_BIT != 0)
    });
    !kill_pending
}

/// Polls until `pid` no longer runs; kills it and fails the case after [`PATIENCE`].
pub(crate) async fn wait_until_gone(pid: u32, what: &str) {
    let deadline = Instant::now() + PATIENCE;
    while is_running(pid) {
        if Instant::now() > deadline {
            // Leave nothing behind for the next test.
            kill_left_over(pid);
            panic!("{what} (process {pid}) still runs after {PATIENCE:?}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Fails the case when `pid` still runs, killing it first so that nothing is left behind.
fn assert_not_running(pid: u32, what: &str) {
    if is_running(pid) {
        kill_left_over(pid);
        panic!("{what} (process {pid}) still runs");
    }
}

pub(crate) fn kill_left_over(pid: u32) {
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
}

async fn terminate_within(spawned: &SpawnedProcess, grace: Duration, limit: Duration) {
    tokio::time::timeout(limit, spawned.control.terminate(grace))
        .await
        .unwrap_or_else(|_| panic!("terminate({grace:?}) did not return within {limit:?}"));
}

// ----- the cases ----------------------------------------------------------------------------

pub async fn supports_its_launches_and_refuses_other_modes(fixture: &dyn ProcessSpawnerFixture) {
    let spawner = fixture.spawner();
    assert!(spawner.supports(&fixture.shell("exit 0")));
    let other = fixture.unsupported();
    assert!(!spawner.supports(&other), "{other:?}");
    match spawner.spawn(&server_id(), &other, log_buffer()).await {
        Err(LaunchError::UnsupportedMode(mode)) => assert_eq!(mode, other.mode()),
        Err(error) => panic!("spawning {other:?} failed, but not as unsupported: {error}"),
        Ok(spawned) => {
            spawned.control.terminate(Duration::ZERO).await;
            panic!("a mode the spawner does not support was spawned: {other:?}");
        }
    }
}

pub async fn what_is_written_to_stdin_comes_back_on_stdout(fixture: &dyn ProcessSpawnerFixture) {
    let logs = log_buffer();
    let spawned = spawn(fixture, &fixture.shell("cat; echo finished >&2"), &logs).await;
    let SpawnedProcess { streams, control } = spawned;
    let mut to_server = streams.to_server;
    let mut from_server = BufReader::new(reader_of(streams.from_server));
    // One line at a time, answered before the next is sent: nothing waits for a full buffer.
    for message in [
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
        "ünïcödé ✓",
        "",
    ] {
        to_server
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
        to_server.flush().await.unwrap();
        let mut echoed = String::new();
        tokio::time::timeout(PATIENCE, from_server.read_line(&mut echoed))
            .await
            .expect("the line came back in time")
            .expect("stdout is readable");
        assert_eq!(echoed, format!("{message}\n"));
    }
    // Closing stdin asks the server to finish: `cat` ends, the script after it runs, and the
    // process exits on its own with stdout closed.
    drop(to_server);
    let mut rest = String::new();
    tokio::time::timeout(PATIENCE, from_server.read_to_string(&mut rest))
        .await
        .expect("stdout closed in time")
        .expect("stdout is readable");
    assert_eq!(rest, "");
    let exit = tokio::time::timeout(PATIENCE, control.exited())
        .await
        .expect("the server exited after its stdin closed");
    assert_eq!((exit.code, exit.signal), (Some(0), None), "{exit}");
    wait_for_lines(&logs, |lines| lines == ["finished"]).await;
}

pub async fn stdout_ends_and_exited_reports_the_exit_code(fixture: &dyn ProcessSpawnerFixture) {
    let logs = log_buffer();
    let spawned = spawn(fixture, &fixture.shell("printf 'all of it'; exit 7"), &logs).await;
    let SpawnedProcess { streams, control } = spawned;
    let mut output = String::new();
    tokio::time::timeout(
        PATIENCE,
        reader_of(streams.from_server).read_to_string(&mut output),
    )
    .await
    .expect("stdout closed in time")
    .expect("stdout is readable");
    assert_eq!(output, "all of it");
    // Every caller, every time, the same status.
    let (first, second) = tokio::time::timeout(PATIENCE, async {
        tokio::join!(control.exited(), control.exited())
    })
    .await
    .expect("the server exited");
    let third = control.exited().await;
    for exit in [first, second, third] {
        assert_eq!((exit.code, exit.signal), (Some(7), None), "{exit}");
        assert!(!exit.description.is_empty());
    }
}

pub async fn stderr_lines_reach_the_logs_in_order(fixture: &dyn ProcessSpawnerFixture) {
    let logs = log_buffer();
    let script = "for n in 1 2 3 4 5; do echo \"line $n\" >&2; done; printf 'last, unended' >&2";
    let spawned = spawn(fixture, &fixture.shell(script), &logs).await;
    let expected = [
        "line 1",
        "line 2",
        "line 3",
        "line 4",
        "line 5",
        "last, unended",
    ];
    wait_for_lines(&logs, |lines| lines == expected).await;
    tokio::time::timeout(PATIENCE, spawned.control.exited())
        .await
        .expect("the server exited");
    // Nothing from stdout, nothing twice.
    assert_eq!(lines_of(&logs), expected);
}

pub async fn a_missing_program_is_a_launch_error(fixture: &dyn ProcessSpawnerFixture) {
    let launch = fixture.missing_program();
    assert!(fixture.spawner().supports(&launch));
    let answer = tokio::time::timeout(
        PATIENCE,
        fixture.spawner().spawn(&server_id(), &launch, log_buffer()),
    )
    .await
    .expect("the spawn answered in time");
    match answer {
        Err(error) => assert!(!error.to_string().is_empty()),
        Ok(spawned) => {
            spawned.control.terminate(Duration::ZERO).await;
            panic!("a program that does not exist was spawned: {launch:?}");
        }
    }
}

pub async fn terminate_ends_the_process_and_everything_it_started(
    fixture: &dyn ProcessSpawnerFixture,
) {
    let logs = log_buffer();
    // The server starts two more processes, one of them in a subshell of its own, and prints
    // their ids.
    let script = "sleep 1000 & echo $! >&2; (sleep 1000; true) & echo $! >&2; wait";
    let spawned = spawn(fixture, &fixture.shell(script), &logs).await;
    let started = pids_in(&wait_for_lines(&logs, |lines| pids_in(lines).len() == 2).await);
    for &pid in &started {
        assert!(is_running(pid), "process {pid} runs before terminate");
    }
    let leader = spawned.control.pid();
    if let Some(leader) = leader {
        assert!(is_running(leader), "the server's own process runs");
    }

    terminate_within(&spawned, Duration::from_secs(5), PATIENCE).await;
    // "Returns once nothing is left running": checked at once, not eventually.
    if let Some(leader) = leader {
        assert!(!is_running(leader), "the server still runs after terminate");
    }
    for &pid in &started {
        assert_not_running(pid, "started by the server, after terminate returned,");
    }
    tokio::time::timeout(PATIENCE, spawned.control.exited())
        .await
        .expect("exited completes after terminate");
}

pub async fn the_polite_signal_comes_first(fixture: &dyn ProcessSpawnerFixture) {
    let logs = log_buffer();
    let script = "trap 'echo asked to stop >&2; exit 0' TERM; echo ready >&2; \
                  while :; do sleep 0.05; done";
    let spawned = spawn(fixture, &fixture.shell(script), &logs).await;
    wait_for_lines(&logs, |lines| lines == ["ready"]).await;

    let started = Instant::now();
    terminate_within(&spawned, Duration::from_secs(30), PATIENCE).await;
    // The server heard the polite signal and exited on its own, long before the grace was over.
    assert!(
        started.elapsed() < PATIENCE,
        "terminate waited {:?} for a server that stopped when asked",
        started.elapsed()
    );
    let exit = spawned.control.exited().await;
    assert_eq!((exit.code, exit.signal), (Some(0), None), "{exit}");
    wait_for_lines(&logs, |lines| {
        lines.iter().any(|line| line == "asked to stop")
    })
    .await;
}

pub async fn a_process_that_ignores_the_polite_signal_is_killed_after_the_grace(
    fixture: &dyn ProcessSpawnerFixture,
) {
    let logs = log_buffer();
    // An ignored signal stays ignored in what the server starts, too.
    let script = "trap '' TERM; sleep 1000 & echo $! >&2; echo ready >&2; wait";
    let spawned = spawn(fixture, &fixture.shell(script), &logs).await;
    let lines = wait_for_lines(&logs, |lines| lines.iter().any(|line| line == "ready")).await;
    let started_by_server = pids_in(&lines);
    assert_eq!(started_by_server.len(), 1, "{lines:?}");

    let grace = Duration::from_millis(400);
    let started = Instant::now();
    terminate_within(&spawned, grace, PATIENCE).await;
    assert!(
        started.elapsed() >= grace,
        "the forced kill came {:?} after the polite signal, before the grace of {grace:?}",
        started.elapsed()
    );
    let exit = spawned.control.exited().await;
    assert_eq!(exit.code, None, "killed, not exited: {exit}");
    assert_eq!(exit.signal, Some(9), "SIGKILL: {exit}");
    assert_not_running(
        started_by_server[0],
        "started by the server, after the forced kill,",
    );
}

pub async fn terminate_is_idempotent_and_safe_to_call_concurrently(
    fixture: &dyn ProcessSpawnerFixture,
) {
    let logs = log_buffer();
    let spawned = spawn(
        fixture,
        &fixture.shell("echo ready >&2; exec sleep 1000"),
        &logs,
    )
    .await;
    wait_for_lines(&logs, |lines| lines == ["ready"]).await;
    let grace = Duration::from_secs(5);
    tokio::time::timeout(PATIENCE, async {
        tokio::join!(
            spawned.control.terminate(grace),
            spawned.control.terminate(grace),
            spawned.control.terminate(grace)
        )
    })
    .await
    .expect("every concurrent terminate returned");
    let exit = spawned.control.exited().await;
    assert!(exit.signal.is_some() || exit.code.is_some(), "{exit}");
    // Once more, after the end: it returns at once and changes nothing.
    terminate_within(&spawned, grace, Duration::from_secs(1)).await;
    assert_eq!(spawned.control.exited().await, exit);
    if let Some(pid) = spawned.control.pid() {
        wait_until_gone(pid, "the terminated server").await;
    }
}

pub async fn terminate_after_the_process_exited_keeps_its_exit_status(
    fixture: &dyn ProcessSpawnerFixture,
) {
    let spawned = spawn(fixture, &fixture.shell("exit 3"), &log_buffer()).await;
    let exit = tokio::time::timeout(PATIENCE, spawned.control.exited())
        .await
        .expect("the server exited");
    assert_eq!((exit.code, exit.signal), (Some(3), None), "{exit}");
    terminate_within(&spawned, Duration::from_secs(5), Duration::from_secs(1)).await;
    assert_eq!(spawned.control.exited().await, exit);
}
