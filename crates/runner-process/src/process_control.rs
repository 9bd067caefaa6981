//! Watching and ending one spawned process group.
//!
//! One watcher task owns the child: it waits for the leader to exit, reaps it, kills whatever
//! the leader left behind in its group, and publishes the exit status. Everything else (the
//! `ProcessControl` handle, its clones, a handle being dropped) only signals the group and
//! waits for that publication.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_core::{ExitStatusInfo, ProcessControl};
use tokio::process::Child;
use tokio::sync::watch;

use crate::exit_status::{abandoned, describe_exit};
use crate::process_group::signal_process_group;

/// A process group led by a child this crate spawned.
pub(crate) struct ProcessGroup {
    leader_pid: u32,
    process_group_id: libc::pid_t,
    /// Set once the group must no longer be signalled: after the leader was reaped, its pid,
    /// and with it the group id, may be handed to an unrelated process.
    released: Mutex<bool>,
}

impl ProcessGroup {
    pub(crate) fn new(leader_pid: u32, process_group_id: libc::pid_t) -> Self {
        Self {
            leader_pid,
            process_group_id,
            released: Mutex::new(false),
        }
    }

    /// Sends `signal` to the whole group unless it was released. Returns whether it was sent.
    fn signal_unless_released(&self, signal: libc::c_int) -> bool {
        let released = self.released.lock().unwrap_or_else(PoisonError::into_inner);
        if *released {
            return false;
        }
        self.send(signal);
        true
    }

    /// Kills what is left of the group and stops signalling it from now on.
    ///
    /// Called right after the leader was reaped (the microseconds between the reap inside
    /// tokio and this call are the only moment the group id could be reused, which would need
    /// the kernel to cycle through its whole pid space in that time), or instead of reaping it
    /// when the watcher is abandoned.
    fn kill_remaining_and_release(&self) {
        let mut released = self.released.lock().unwrap_or_else(PoisonError::into_inner);
        if !*released {
            self.send(libc::SIGKILL);
            *released = true;
        }
    }

    fn send(&self, signal: libc::c_int) {
        if let Err(error) = signal_process_group(self.process_group_id, signal) {
            // No such group: every member has already exited, which is what we wanted.
            if error.raw_os_error() != Some(libc::ESRCH) {
                tracing::warn!(
                    process_group = self.process_group_id,
                    signal,
                    %error,
                    "could not signal a server's process group"
                );
            }
        }
    }
}

/// The watcher task: waits for the leader, reaps it, ends its leftovers, publishes the status.
pub(crate) async fn watch_for_exit(
    mut child: Child,
    group: Arc<ProcessGroup>,
    exit_status: watch::Sender<Option<ExitStatusInfo>>,
) {
    // If the runtime shuts down while the leader still runs, this task is dropped mid-wait:
    // the guard ends the group then (and `kill_on_drop` the leader, as a last resort).
    let abandon_guard = EndGroupIfAbandoned(Arc::clone(&group));
    let outcome = child.wait().await;
    group.kill_remaining_and_release();
    std::mem::forget(abandon_guard);
    let status = match outcome {
        Ok(status) => describe_exit(status),
        Err(error) => ExitStatusInfo {
            code: None,
            signal: None,
            description: format!("lost track of the process: {error}"),
        },
    };
    tracing::debug!(pid = group.leader_pid, %status, "server process ended");
    exit_status.send_replace(Some(status));
}

struct EndGroupIfAbandoned(Arc<ProcessGroup>);

impl Drop for EndGroupIfAbandoned {
    fn drop(&mut self) {
        self.0.kill_remaining_and_release();
    }
}

/// Waits until the watcher published the exit status.
async fn wait_for_exit(exit_status: &watch::Receiver<Option<ExitStatusInfo>>) -> ExitStatusInfo {
    let mut exit_status = exit_status.clone();
    match exit_status.wait_for(Option::is_some).await {
        Ok(status) => status.clone().unwrap_or_else(abandoned),
        Err(_watcher_gone) => abandoned(),
    }
}

/// SIGTERM to the group, SIGKILL once `grace` has passed, then waits for the reap.
async fn end_group(
    group: &ProcessGroup,
    exit_status: &watch::Receiver<Option<ExitStatusInfo>>,
    grace: Duration,
) -> ExitStatusInfo {
    if group.signal_unless_released(libc::SIGTERM)
        && tokio::time::timeout(grace, wait_for_exit(exit_status))
            .await
            .is_err()
    {
        group.signal_unless_released(libc::SIGKILL);
    }
    // Once the leader is gone the watcher SIGKILLs the rest of the group, so members that
    // ignored SIGTERM do not outlive a leader that obeyed it.
    wait_for_exit(exit_status).await
}

/// The [`ProcessControl`] of one spawned process group.
pub(crate) struct ProcessGroupControl {
    group: Arc<ProcessGroup>,
    exit_status: watch::Receiver<Option<ExitStatusInfo>>,
    /// Used when the last handle is dropped while the process still runs.
    stop_grace: Duration,
}

impl ProcessGroupControl {
    pub(crate) fn new(
        group: Arc<ProcessGroup>,
        exit_status: watch::Receiver<Option<ExitStatusInfo>>,
        stop_grace: Duration,
    ) -> Self {
        Self {
            group,
            exit_status,
            stop_grace,
        }
    }
}

#[async_trait]
impl ProcessControl for ProcessGroupControl {
    fn pid(&self) -> Option<u32> {
        Some(self.group.leader_pid)
    }

    async fn terminate(&self, grace: Duration) {
        end_group(&self.group, &self.exit_status, grace).await;
    }

    async fn exited(&self) -> ExitStatusInfo {
        wait_for_exit(&self.exit_status).await
    }
}

impl Drop for ProcessGroupControl {
    /// Nobody can stop the process any more, so stop it now, as `terminate` would.
    fn drop(&mut self) {
        if self.exit_status.borrow().is_some() {
            return;
        }
        let group = Arc::clone(&self.group);
        let exit_status = self.exit_status.clone();
        let grace = self.stop_grace;
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    end_group(&group, &exit_status, grace).await;
                });
            }
            // Without a runtime there is no waiting out a grace period: kill at once. The
            // group stays unreleased, so the watcher still reaps the leader.
            Err(_) => {
                group.signal_unless_released(libc::SIGKILL);
            }
        }
    }
}
