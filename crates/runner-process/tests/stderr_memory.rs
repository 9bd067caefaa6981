//! A 50 MiB stderr line without a newline must not cost 50 MiB of memory.
//!
//! This file holds a single test so that the process's peak memory belongs to it alone.

mod support;

use std::time::Duration;

use mcpgw_core::LOG_LINE_MAX_BYTES;
use mcpgw_runner_process::{ProcessRunner, ProcessRunnerSettings};

use support::*;

const HUGE_LINE_BYTES: u64 = 50 * 1024 * 1024;

/// The most memory this test process has ever had resident, in KiB.
fn peak_resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmHWM line")
}

#[tokio::test]
async fn a_fifty_mib_line_is_truncated_in_bounded_memory() {
    let logs = log_buffer();
    let script = format!(
        "head -c {HUGE_LINE_BYTES} /dev/zero | tr '\\0' x >&2; printf '\\ntail\\nlast' >&2"
    );
    let runner = ProcessRunner::new(ProcessRunnerSettings::default());
    let spawned = spawn(&runner, &shell(&script), &logs).await;
    let exit = tokio::time::timeout(Duration::from_secs(120), spawned.control.exited())
        .await
        .expect("the child wrote its 50 MiB in time");
    assert_eq!(exit.code, Some(0), "{exit}");

    let lines = wait_for_lines(&logs, Duration::from_secs(30), |lines| lines.len() >= 3).await;
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0].len(), LOG_LINE_MAX_BYTES);
    assert!(lines[0].starts_with("xxxx"));
    assert!(lines[0].ends_with("x..."));
    assert_eq!(lines[1], "tail");
    assert_eq!(lines[2], "last");

    // Holding the line, even once, would put the peak above 50 MiB.
    let peak_mib = peak_resident_kib() / 1024;
    assert!(peak_mib < 20, "the test process peaked at {peak_mib} MiB");
}
