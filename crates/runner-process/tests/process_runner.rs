//! The process runner against real processes: stdio, stderr capture, environment, spawn
//! errors, process-group termination and exit statuses.

mod support;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use mcpgw_core::{LaunchError, LaunchSpec, ProcessSpawner, ServerOutput, SpawnedProcess};
use mcpgw_runner_process::{ProcessRunner, ProcessRunnerSettings};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;

use support::*;

const PATIENCE: Duration = Duration::from_secs(10);

fn runner() -> ProcessRunner {
    ProcessRunner::new(ProcessRunnerSettings::default())
}

async fn spawn_error(runner: &ProcessRunner, launch: &LaunchSpec) -> LaunchError {
    match runner.spawn(&server_id(), launch, log_buffer()).await {
        Ok(spawned) => {
            spawned.control.terminate(Duration::ZERO).await;
            panic!("spawning {launch:?} succeeded, but it should have failed");
        }
        Err(error) => error,
    }
}

async fn read_all_stdout(spawned: SpawnedProcess) -> String {
    let SpawnedProcess { streams, control } = spawned;
    drop(streams.to_server);
    let mut output = String::new();
    let mut from_server = pipe_of(streams.from_server);
    tokio::time::timeout(PATIENCE, from_server.read_to_string(&mut output))
        .await
        .expect("the process closed its stdout in time")
        .expect("stdout is readable");
    control.exited().await;
    output
}

/// A child's stdout is handed over as the pipe's descriptor, for the session to register with
/// whichever runtime serves its calls.
fn pipe_of(output: ServerOutput) -> pipe::Receiver {
    let ServerOutput::Pipe(fd) = output else {
        panic!("a child's stdout is handed over as a pipe, not as {output:?}");
    };
    pipe::Receiver::from_owned_fd(fd).expect("the descriptor is the read end of a pipe")
}

fn scratch_file(name: &str, contents: &str, mode: u32) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, contents).expect("the scratch file can be written");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
        .expect("the scratch file's mode can be set");
    path
}

// --- stdio -------------------------------------------------------------------------------

#[tokio::test]
async fn what_the_gateway_writes_to_stdin_comes_back_on_stdout() {
    let spawned = spawn(&runner(), &command(&["cat"]), &log_buffer()).await;
    let SpawnedProcess {
        mut streams,
        control,
    } = spawned;

    streams
        .to_server
        .write_all(b"{\"jsonrpc\":\"2.0\"}\n")
        .await
        .unwrap();
    streams.to_server.flush().await.unwrap();
    let mut echoed = String::new();
    let mut from_server = BufReader::new(pipe_of(streams.from_server));
    tokio::time::timeout(PATIENCE, from_server.read_line(&mut echoed))
        .await
        .expect("cat answered in time")
        .unwrap();
    assert_eq!(echoed, "{\"jsonrpc\":\"2.0\"}\n");

    drop(streams.to_server);
    let exit = tokio::time::timeout(PATIENCE, control.exited())
        .await
        .expect("cat exited");
    assert_eq!(exit.code, Some(0), "{exit}");
}

#[tokio::test]
async fn closing_stdin_lets_the_server_finish_on_its_own() {
    let logs = log_buffer();
    let spawned = spawn(
        &runner(),
        &shell("cat; echo 'saw end of input' >&2; exit 7"),
        &logs,
    )
    .await;
    let SpawnedProcess { streams, control } = spawned;

    drop(streams.to_server);
    let exit = tokio::time::timeout(PATIENCE, control.exited())
        .await
        .expect("sh exited");
    // Code 7 (not a signal) proves the script ran past the end of its input.
    assert_eq!((exit.code, exit.signal), (Some(7), None), "{exit}");
    wait_for_lines(&logs, PATIENCE, |lines| lines == ["saw end of input"]).await;
}

// --- stderr capture ----------------------------------------------------------------------

#[tokio::test]
async fn stderr_lines_are_captured_in_order_including_an_unterminated_last_line() {
    let logs = log_buffer();
    let script = "echo one >&2; echo two >&2; printf 'crlf\\r\\n' >&2; echo >&2; printf three >&2";
    let spawned = spawn(&runner(), &shell(script), &logs).await;
    spawned.control.exited().await;

    let lines = wait_for_lines(&logs, PATIENCE, |lines| lines.len() >= 5).await;
    assert_eq!(lines, ["one", "two", "crlf", "", "three"]);
}

#[tokio::test]
async fn invalid_utf8_on_stderr_becomes_replacement_characters() {
    let logs = log_buffer();
    let spawned = spawn(&runner(), &shell("printf 'a\\377b\\n' >&2"), &logs).await;
    spawned.control.exited().await;

    let lines = wait_for_lines(&logs, PATIENCE, |lines| !lines.is_empty()).await;
    assert_eq!(lines, ["a\u{fffd}b"]);
}

#[tokio::test]
async fn only_the_most_recent_thousand_lines_are_kept() {
    let logs = log_buffer();
    let spawned = spawn(&runner(), &shell("seq 1 1500 >&2"), &logs).await;
    spawned.control.exited().await;

    let lines = wait_for_lines(&logs, PATIENCE, |lines| {
        lines.last().is_some_and(|last| last == "1500")
    })
    .await;
    assert_eq!(lines.len(), 1000);
    assert_eq!(lines[0], "501");
}

#[tokio::test]
async fn a_child_writing_stderr_never_blocks_on_a_full_pipe() {
    // 2 MiB of stderr is far more than a pipe holds (64 KiB): the child only finishes if the
    // runner keeps draining while nobody looks at the logs.
    let logs = log_buffer();
    // 2048 lines of 1023 bytes each (the last one without a newline).
    let script = "head -c 2095104 /dev/zero | tr '\\0' e | fold -w 1023 >&2";
    let spawned = spawn(&runner(), &shell(script), &logs).await;
    let exit = tokio::time::timeout(Duration::from_secs(60), spawned.control.exited())
        .await
        .expect("the chatty child finished");
    assert_eq!(exit.code, Some(0));
    let lines = wait_for_lines(&logs, PATIENCE, |lines| lines.len() == 1000).await;
    assert!(
        lines
            .iter()
            .all(|line| line.len() == 1023 && line.starts_with("eee"))
    );
}

// --- environment and working directory ---------------------------------------------------

#[tokio::test]
async fn the_specs_env_is_added_to_the_gateways_environment() {
    let launch = LaunchSpec::Subprocess {
        command: vec![
            "sh".into(),
            "-c".into(),
            "printf '%s|%s' \"$FOO\" \"$PATH\"".into(),
        ],
        env: BTreeMap::from([("FOO".to_owned(), "bar baz".to_owned())]),
        cwd: None,
    };
    let output = read_all_stdout(spawn(&runner(), &launch, &log_buffer()).await).await;
    let gateway_path = std::env::var("PATH").expect("the test runs with a PATH");
    assert_eq!(output, format!("bar baz|{gateway_path}"));
}

#[tokio::test]
async fn without_inheritance_the_child_sees_only_the_specs_env() {
    let runner = ProcessRunner::new(ProcessRunnerSettings {
        inherit_environment: false,
        ..ProcessRunnerSettings::default()
    });
    let launch = LaunchSpec::Subprocess {
        command: vec!["/usr/bin/env".into()],
        env: BTreeMap::from([("ONLY".to_owned(), "this".to_owned())]),
        cwd: None,
    };
    let output = read_all_stdout(spawn(&runner, &launch, &log_buffer()).await).await;
    assert_eq!(output, "ONLY=this\n");
}

#[tokio::test]
async fn the_working_directory_is_honoured() {
    let in_root = LaunchSpec::Subprocess {
        command: vec!["pwd".into()],
        env: BTreeMap::new(),
        cwd: Some("/".into()),
    };
    assert_eq!(
        read_all_stdout(spawn(&runner(), &in_root, &log_buffer()).await).await,
        "/\n"
    );

    // Without `cwd` the child starts where the gateway is, so the one above was not a fluke.
    let here = std::env::current_dir().unwrap();
    assert_ne!(here, PathBuf::from("/"));
    let default = read_all_stdout(spawn(&runner(), &command(&["pwd"]), &log_buffer()).await).await;
    assert_eq!(default, format!("{}\n", here.display()));
}

// --- spawn errors ------------------------------------------------------------------------

#[tokio::test]
async fn a_missing_command_is_reported_as_not_found() {
    for missing in ["mcpgw-no-such-command", "/nonexistent/mcpgw/server"] {
        match spawn_error(&runner(), &command(&[missing, "--flag"])).await {
            LaunchError::CommandNotFound { command } => assert_eq!(command, missing),
            other => panic!("expected CommandNotFound for {missing}, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn an_empty_command_is_an_error() {
    for empty in [command(&[]), command(&[""]), command(&["", "arg"])] {
        match spawn_error(&runner(), &empty).await {
            LaunchError::SpawnFailed { reason, .. } => {
                assert!(reason.contains("empty"), "{reason}")
            }
            other => panic!("expected SpawnFailed for {empty:?}, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_file_that_is_not_executable_fails_to_spawn() {
    let path = scratch_file("not-executable.sh", "#!/bin/sh\necho hi\n", 0o644);
    let program = path.to_str().unwrap();
    match spawn_error(&runner(), &command(&[program])).await {
        LaunchError::SpawnFailed { command, reason } => {
            assert_eq!(command, program);
            assert!(reason.contains("permission denied"), "{reason}");
        }
        other => panic!("expected SpawnFailed, got {other:?}"),
    }
}

#[tokio::test]
async fn a_script_with_a_missing_interpreter_is_not_reported_as_a_missing_command() {
    let path = scratch_file(
        "missing-interpreter.sh",
        "#!/nonexistent/interpreter\n",
        0o755,
    );
    match spawn_error(&runner(), &command(&[path.to_str().unwrap()])).await {
        LaunchError::SpawnFailed { reason, .. } => {
            assert!(reason.contains("interpreter"), "{reason}")
        }
        other => panic!("expected SpawnFailed, got {other:?}"),
    }
}

#[tokio::test]
async fn a_missing_working_directory_is_reported_as_such() {
    let launch = LaunchSpec::Subprocess {
        command: vec!["pwd".into()],
        env: BTreeMap::new(),
        cwd: Some("/nonexistent/mcpgw-dir".into()),
    };
    match spawn_error(&runner(), &launch).await {
        LaunchError::SpawnFailed { reason, .. } => {
            assert!(reason.contains("working directory"), "{reason}");
        }
        other => panic!("expected SpawnFailed, got {other:?}"),
    }
}

#[tokio::test]
async fn only_subprocess_specs_are_supported() {
    let runner = runner();
    assert!(runner.supports(&command(&["cat"])));
    let remote = LaunchSpec::Remote {
        endpoint: "http://127.0.0.1:1/mcp".into(),
        headers: BTreeMap::new(),
        token_exchange: None,
    };
    assert!(!runner.supports(&remote));
    match spawn_error(&runner, &remote).await {
        LaunchError::UnsupportedMode(mode) => assert_eq!(mode, "remote"),
        other => panic!("expected UnsupportedMode, got {other:?}"),
    }
}

// --- termination -------------------------------------------------------------------------

#[tokio::test]
async fn terminate_ends_the_whole_process_group() {
    let logs = log_buffer();
    let script = "sleep 1000 & echo $! >&2; sleep 1000 & echo $! >&2; wait";
    let spawned = spawn(&runner(), &shell(script), &logs).await;
    let leader = spawned.control.pid().expect("a process has a pid");
    let lines = wait_for_lines(&logs, PATIENCE, |lines| pids_in(lines).len() == 2).await;
    let grandchildren = pids_in(&lines);

    assert_eq!(
        process_group_of(leader),
        Some(leader),
        "the child leads its own group"
    );
    assert_ne!(process_group_of(std::process::id()), Some(leader));
    for &grandchild in &grandchildren {
        assert!(is_running(grandchild));
        assert_eq!(process_group_of(grandchild), Some(leader));
    }

    tokio::time::timeout(PATIENCE, spawned.control.terminate(Duration::from_secs(5)))
        .await
        .expect("terminate returned");
    assert!(
        !is_running(leader),
        "terminate returns once the leader is gone"
    );
    for grandchild in grandchildren {
        wait_until_gone(grandchild, PATIENCE).await;
    }
    let exit = spawned.control.exited().await;
    assert_eq!(exit.signal, Some(libc::SIGTERM), "{exit}");
}

#[tokio::test]
async fn a_child_that_ignores_sigterm_is_killed_after_the_grace() {
    let logs = log_buffer();
    let spawned = spawn(
        &runner(),
        &shell("trap '' TERM; echo ready >&2; sleep 1000"),
        &logs,
    )
    .await;
    wait_for_lines(&logs, PATIENCE, |lines| lines == ["ready"]).await;

    let grace = Duration::from_millis(300);
    let started = Instant::now();
    tokio::time::timeout(PATIENCE, spawned.control.terminate(grace))
        .await
        .expect("terminate returned after the grace");
    assert!(
        started.elapsed() >= grace,
        "SIGKILL came before the grace was over"
    );

    let exit = spawned.control.exited().await;
    assert_eq!(
        (exit.code, exit.signal),
        (None, Some(libc::SIGKILL)),
        "{exit}"
    );
    assert!(exit.description.starts_with("killed by signal 9"), "{exit}");
}

#[tokio::test]
async fn members_that_ignore_sigterm_do_not_outlive_a_leader_that_obeyed() {
    let logs = log_buffer();
    let script = "(trap '' TERM; echo ready >&2; exec sleep 1000) & echo $! >&2; wait";
    let spawned = spawn(&runner(), &shell(script), &logs).await;
    let lines = wait_for_lines(&logs, PATIENCE, |lines| {
        lines.iter().any(|line| line == "ready") && pids_in(lines).len() == 1
    })
    .await;
    let stubborn = pids_in(&lines)[0];
    assert!(is_running(stubborn));

    let grace = Duration::from_secs(30);
    let started = Instant::now();
    spawned.control.terminate(grace).await;
    // The leader obeyed at once, so terminate must not have waited out the grace.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    wait_until_gone(stubborn, PATIENCE).await;
}

#[tokio::test]
async fn processes_left_behind_by_a_server_that_exits_are_ended() {
    let logs = log_buffer();
    let spawned = spawn(&runner(), &shell("sleep 1000 & echo $! >&2; exit 0"), &logs).await;
    let exit = tokio::time::timeout(PATIENCE, spawned.control.exited())
        .await
        .expect("sh exited");
    assert_eq!(exit.code, Some(0));

    let lines = wait_for_lines(&logs, PATIENCE, |lines| pids_in(lines).len() == 1).await;
    wait_until_gone(pids_in(&lines)[0], PATIENCE).await;
}

#[tokio::test]
async fn terminate_is_idempotent_and_safe_to_call_concurrently() {
    let spawned = spawn(&runner(), &command(&["sleep", "1000"]), &log_buffer()).await;
    let pid = spawned.control.pid().unwrap();
    let grace = Duration::from_secs(5);

    tokio::time::timeout(PATIENCE, async {
        tokio::join!(
            spawned.control.terminate(grace),
            spawned.control.terminate(grace)
        )
    })
    .await
    .expect("both terminate calls returned");
    assert!(!is_running(pid));
    tokio::time::timeout(PATIENCE, spawned.control.terminate(grace))
        .await
        .expect("terminate after the end returns at once");
    assert_eq!(spawned.control.exited().await.signal, Some(libc::SIGTERM));
}

#[tokio::test]
async fn terminate_after_a_natural_exit_keeps_the_real_exit_status() {
    let spawned = spawn(&runner(), &shell("exit 3"), &log_buffer()).await;
    spawned.control.exited().await;
    tokio::time::timeout(PATIENCE, spawned.control.terminate(Duration::from_secs(5)))
        .await
        .expect("terminate returned");
    assert_eq!(spawned.control.exited().await.code, Some(3));
}

#[tokio::test]
async fn dropping_every_handle_ends_the_process() {
    let spawned = spawn(&runner(), &command(&["sleep", "1000"]), &log_buffer()).await;
    let pid = spawned.control.pid().unwrap();
    assert!(is_running(pid));
    drop(spawned);
    wait_until_gone(pid, PATIENCE).await;
}

// --- exit status -------------------------------------------------------------------------

#[tokio::test]
async fn exited_reports_the_exit_code_to_every_caller_every_time() {
    let spawned = spawn(&runner(), &shell("exit 3"), &log_buffer()).await;
    let control = spawned.control;

    let (first, second) = tokio::join!(control.exited(), control.exited());
    let third = control.exited().await;
    for exit in [first, second, third] {
        assert_eq!(exit.code, Some(3));
        assert_eq!(exit.signal, None);
        assert_eq!(exit.description, "exited with code 3");
    }
}

#[tokio::test]
async fn exited_reports_the_signal_that_killed_the_child() {
    let logs = log_buffer();
    let spawned = spawn(&runner(), &shell("echo started >&2; kill -KILL $$"), &logs).await;
    let exit = tokio::time::timeout(PATIENCE, spawned.control.exited())
        .await
        .expect("sh died");
    assert_eq!(
        (exit.code, exit.signal),
        (None, Some(libc::SIGKILL)),
        "{exit}"
    );
    assert_eq!(spawned.control.exited().await, exit);
}
