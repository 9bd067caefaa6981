//! A child must die with the gateway, even when the gateway is killed outright, and only then:
//! not when the thread that happened to spawn it goes away.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpgw_core::ProcessSpawner;
use mcpgw_runner_process::{ProcessRunner, ProcessRunnerSettings};

use support::*;

/// Set in the environment of this test binary when it is re-run as a stand-in gateway.
const GATEWAY_ROLE: &str = "MCPGW_RUNNER_PROCESS_TEST_GATEWAY_ROLE";
const CHILD_PID_PREFIX: &str = "spawned child pid ";
const THIS_TEST: &str = "a_child_dies_when_the_gateway_is_killed";

/// As the stand-in gateway: spawn a server, say its pid, and wait to be killed.
fn act_as_gateway() -> ! {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let runner = ProcessRunner::new(ProcessRunnerSettings::default());
        let spawned = spawn(&runner, &command(&["sleep", "1000"]), &log_buffer()).await;
        let pid = spawned.control.pid().unwrap();
        let mut stdout = std::io::stdout();
        writeln!(stdout, "{CHILD_PID_PREFIX}{pid}").unwrap();
        stdout.flush().unwrap();
        std::future::pending::<()>().await;
    });
    unreachable!("the stand-in gateway waits until it is killed")
}

#[test]
fn a_child_dies_when_the_gateway_is_killed() {
    if std::env::var_os(GATEWAY_ROLE).is_some() {
        act_as_gateway();
    }
    let mut gateway = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", THIS_TEST, "--nocapture", "--test-threads=1"])
        .env(GATEWAY_ROLE, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the test binary can run itself as a stand-in gateway");
    let gateway_stdout = BufReader::new(gateway.stdout.take().unwrap());
    let child = gateway_stdout
        .lines()
        .map_while(Result::ok)
        // libtest may print `test NAME ... ` on the same line first.
        .find_map(|line| {
            let (_, pid) = line.split_once(CHILD_PID_PREFIX)?;
            pid.trim().parse().ok()
        })
        .expect("the stand-in gateway reported its child's pid");

    assert!(is_running(child));
    assert_eq!(command_name_of(child).as_deref(), Some("sleep"));
    assert_eq!(parent_of(child), Some(gateway.id()));

    gateway.kill().expect("SIGKILL to the stand-in gateway");
    gateway.wait().unwrap();

    let deadline = Instant::now() + Duration::from_secs(10);
    while is_running(child) {
        if Instant::now() > deadline {
            kill_left_over(child);
            panic!("the child {child} outlived its SIGKILLed gateway");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The id of the calling thread, from `/proc/thread-self` (a link to `PID/task/TID`).
fn current_thread_id() -> u32 {
    let link = std::fs::read_link("/proc/thread-self").expect("/proc/thread-self");
    link.file_name()
        .and_then(|tid| tid.to_str())
        .and_then(|tid| tid.parse().ok())
        .unwrap()
}

#[test]
fn a_child_outlives_the_thread_that_spawned_it() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_keep_alive(Duration::from_millis(20))
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let runner = Arc::new(ProcessRunner::new(ProcessRunnerSettings::default()));
        let logs = log_buffer();
        let spawning_runner = Arc::clone(&runner);
        let spawning_logs = Arc::clone(&logs);
        // A blocking-pool thread exits once idle, like an actix worker that is restarted.
        let (spawned, spawning_thread) = tokio::task::spawn_blocking(move || {
            let spawned = tokio::runtime::Handle::current().block_on(async {
                spawning_runner
                    .spawn(&server_id(), &command(&["sleep", "1000"]), spawning_logs)
                    .await
                    .expect("sleep can be spawned")
            });
            (spawned, current_thread_id())
        })
        .await
        .unwrap();

        let thread_entry = format!("/proc/self/task/{spawning_thread}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::path::Path::new(&thread_entry).exists() {
            assert!(
                Instant::now() < deadline,
                "the idle blocking thread never exited"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }

        // Had the parent-death signal been tied to that thread, SIGKILL would have come with
        // its exit; give it ample time to show.
        let still_running =
            tokio::time::timeout(Duration::from_millis(500), spawned.control.exited()).await;
        assert!(
            still_running.is_err(),
            "the child died with its spawning thread: {still_running:?}"
        );
        assert!(is_running(spawned.control.pid().unwrap()));
        spawned.control.terminate(Duration::from_secs(5)).await;
    });
}
