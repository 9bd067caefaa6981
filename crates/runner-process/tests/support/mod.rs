//! Helpers shared by the integration tests: a real clock, launch specs, log polling and process
//! inspection through `/proc`.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use mcpgw_core::ProcessSpawner;
use mcpgw_core::{Clock, LaunchSpec, LogBuffer, MonoTime, ServerId, SpawnedProcess, Timestamp};
use mcpgw_runner_process::ProcessRunner;

/// Wall time from the system, sleeps from tokio: what the bundled server would use.
pub struct SystemClock {
    origin: Instant,
}

#[async_trait]
impl Clock for SystemClock {
    fn now(&self) -> MonoTime {
        MonoTime::from_duration(self.origin.elapsed())
    }

    fn wall(&self) -> Timestamp {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp::from_unix_micros(i64::try_from(since_epoch.as_micros()).unwrap_or(i64::MAX))
    }

    async fn sleep(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }
}

pub fn server_id() -> ServerId {
    ServerId::parse("test-server").expect("a valid id")
}

pub fn log_buffer() -> Arc<LogBuffer> {
    Arc::new(LogBuffer::new(
        server_id(),
        Arc::new(SystemClock {
            origin: Instant::now(),
        }),
    ))
}

pub fn command(words: &[&str]) -> LaunchSpec {
    LaunchSpec::Subprocess {
        command: words.iter().map(|word| (*word).to_owned()).collect(),
        env: BTreeMap::new(),
        cwd: None,
    }
}

pub fn shell(script: &str) -> LaunchSpec {
    command(&["sh", "-c", script])
}

pub async fn spawn(
    runner: &ProcessRunner,
    launch: &LaunchSpec,
    logs: &Arc<LogBuffer>,
) -> SpawnedProcess {
    runner
        .spawn(&server_id(), launch, Arc::clone(logs))
        .await
        .unwrap_or_else(|error| panic!("could not spawn {launch:?}: {error}"))
}

pub fn lines_of(logs: &LogBuffer) -> Vec<String> {
    logs.tail(usize::MAX)
        .into_iter()
        .map(|line| line.line)
        .collect()
}

/// Polls the buffer until `condition` holds on its lines, failing after `limit`.
pub async fn wait_for_lines(
    logs: &LogBuffer,
    limit: Duration,
    condition: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let deadline = Instant::now() + limit;
    loop {
        let lines = lines_of(logs);
        if condition(&lines) {
            return lines;
        }
        if Instant::now() > deadline {
            let last: Vec<String> = lines
                .iter()
                .rev()
                .take(5)
                .map(|line| line.chars().take(80).collect())
                .collect();
            panic!(
                "the log buffer never met the condition; {} lines, last: {last:?}",
                lines.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The fields of `/proc/PID/stat` after the command name: state first, then ppid, pgrp, ...
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    Some(after_name.split_whitespace().map(str::to_owned).collect())
}

/// Whether `pid` is a live process. A zombie has finished running: it only waits to be reaped
/// by whoever adopted it, which in a container may be nobody.
pub fn is_running(pid: u32) -> bool {
    match stat_fields(pid) {
        Some(fields) => !matches!(fields[0].as_str(), "Z" | "X" | "x"),
        None => false,
    }
}

pub fn process_group_of(pid: u32) -> Option<u32> {
    stat_fields(pid)?.get(2)?.parse().ok()
}

pub fn parent_of(pid: u32) -> Option<u32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

pub fn command_name_of(pid: u32) -> Option<String> {
    Some(
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .ok()?
            .trim_end()
            .to_owned(),
    )
}

/// Polls until `pid` no longer runs, failing after `limit`.
pub async fn wait_until_gone(pid: u32, limit: Duration) {
    let deadline = Instant::now() + limit;
    while is_running(pid) {
        if Instant::now() > deadline {
            kill_left_over(pid);
            panic!("process {pid} still runs after {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Cleans up after a failed test so that it does not leave a process behind.
pub fn kill_left_over(pid: u32) {
    let _ = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status();
}

/// Parses the lines that are process ids (scripts print `$!`).
pub fn pids_in(lines: &[String]) -> Vec<u32> {
    lines.iter().filter_map(|line| line.parse().ok()).collect()
}
