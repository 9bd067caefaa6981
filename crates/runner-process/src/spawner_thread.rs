//! One thread that spawns every child, for the whole life of the gateway.
//!
//! Linux delivers the parent-death signal when the *thread* that forked the child exits, not
//! when the process does. Tokio's blocking-pool threads come and go, and actix-web restarts its
//! worker threads, so a child spawned from one of those would be killed at a random later time.
//! Spawning from a thread that never exits ties each child's life to the gateway's instead.

use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::thread;

use tokio::process::{Child, Command};
use tokio::runtime::Handle;
use tokio::sync::oneshot;

use crate::process_group::signal_process_group;

type SpawnJob = Box<dyn FnOnce() + Send + 'static>;

fn spawn_jobs() -> Result<&'static mpsc::Sender<SpawnJob>, String> {
    static SPAWN_JOBS: OnceLock<Result<mpsc::Sender<SpawnJob>, String>> = OnceLock::new();
    SPAWN_JOBS
        .get_or_init(|| {
            let (sender, receiver) = mpsc::channel::<SpawnJob>();
            thread::Builder::new()
                .name("mcpgw-process-spawner".to_owned())
                .spawn(move || {
                    // The sender lives in a static, so this loop runs until the process ends.
                    for job in receiver {
                        // A panicking job (a runtime without its I/O driver, say) must not end
                        // the thread: that would kill every child it has spawned.
                        let _ = catch_unwind(AssertUnwindSafe(job));
                    }
                })
                .map(|_| sender)
                .map_err(|error| error.to_string())
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Spawns `command` on the long-lived spawner thread, registering the child with `runtime`.
pub(crate) async fn spawn_from_long_lived_thread(
    mut command: Command,
    runtime: Handle,
) -> io::Result<Child> {
    let jobs = spawn_jobs().map_err(|reason| {
        io::Error::other(format!(
            "the process spawner thread could not be started: {reason}"
        ))
    })?;
    let (reply, answer) = oneshot::channel();
    let job: SpawnJob = Box::new(move || {
        // Tokio registers the child and its pipes with the runtime it is entered in.
        let _runtime_context = runtime.enter();
        let spawned = command.spawn();
        if let Err(Ok(unwanted_child)) = reply.send(spawned) {
            // The caller stopped waiting. Nobody has reaped the child, so its group id is
            // still its own; end the group before dropping (and so killing) the child.
            if let Some(process_group_id) = unwanted_child
                .id()
                .and_then(|pid| libc::pid_t::try_from(pid).ok())
            {
                let _ = signal_process_group(process_group_id, libc::SIGKILL);
            }
        }
    });
    jobs.send(job)
        .map_err(|_| io::Error::other("the process spawner thread has stopped"))?;
    answer.await.map_err(|_| {
        io::Error::other(
            "the process spawner failed; the tokio runtime needs its I/O driver \
             (build it with enable_all)",
        )
    })?
}
