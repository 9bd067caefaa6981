//! The process spawner: from a `LaunchSpec::Subprocess` to a running, watched process group.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_core::{
    ByteStreams, LaunchError, LaunchSpec, LogBuffer, ProcessSpawner, ServerId, ServerOutput,
    SpawnedProcess,
};
use tokio::process::{Child, Command};
use tokio::runtime::Handle;
use tokio::sync::watch;

use crate::process_control::{ProcessGroup, ProcessGroupControl, watch_for_exit};
use crate::process_group::{kill_child_when_gateway_dies, signal_process_group};
use crate::spawner_thread::spawn_from_long_lived_thread;
use crate::stderr_capture::capture_stderr;

/// How [`ProcessRunner`] starts and stops processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessRunnerSettings {
    /// How long a process gets between SIGTERM and SIGKILL when the last handle to its
    /// [`ProcessControl`](mcpgw_core::ProcessControl) is dropped while it still runs. Callers
    /// of `terminate` pass their own grace; this is the value to pass when in doubt.
    pub stop_grace: Duration,
    /// Whether a child starts with the gateway's environment (and the spec's `env` on top), or
    /// with the spec's `env` alone. Without it, a child that is given no `PATH` runs with the
    /// C library's default search path.
    pub inherit_environment: bool,
}

impl ProcessRunnerSettings {
    pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(3);
}

impl Default for ProcessRunnerSettings {
    fn default() -> Self {
        Self {
            stop_grace: Self::DEFAULT_STOP_GRACE,
            inherit_environment: true,
        }
    }
}

/// Starts `mode: subprocess` servers as local processes, each leading its own process group.
///
/// Each spawn hands back the child's stdin and stdout as [`ByteStreams`] and a
/// [`ProcessControl`](mcpgw_core::ProcessControl) that:
/// - `terminate(grace)`: sends SIGTERM to the whole group, SIGKILL once `grace` has passed, and
///   returns once the leader has been reaped; idempotent, safe to call concurrently and after
///   the process ended;
/// - `exited()`: completes with the exit status, for any number of callers, any number of
///   times.
///
/// Whenever the leader exits, for any reason, the rest of its group is killed: processes a
/// server leaves behind would otherwise run on with nobody to stop them. Closing stdin alone
/// kills nothing (it is how an MCP client asks a stdio server to exit). Dropping every handle
/// to the control while the process runs ends it as `terminate(stop_grace)` would. Every child
/// is reaped, whether or not anyone waits for it.
///
/// Needs a tokio runtime with its I/O and time drivers (`enable_all`).
#[derive(Debug, Clone, Default)]
pub struct ProcessRunner {
    settings: ProcessRunnerSettings,
}

impl ProcessRunner {
    pub fn new(settings: ProcessRunnerSettings) -> Self {
        Self { settings }
    }

    pub fn settings(&self) -> &ProcessRunnerSettings {
        &self.settings
    }

    fn build_command(
        &self,
        program: &str,
        args: &[String],
        env: &BTreeMap<String, String>,
        cwd: Option<&str>,
    ) -> Command {
        let mut command = Command::new(program);
        command.args(args);
        if !self.settings.inherit_environment {
            command.env_clear();
        }
        command.envs(env);
        if let Some(directory) = cwd {
            command.current_dir(directory);
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A group of its own, so that stopping the server reaches everything it started,
            // and so that a Ctrl-C at the gateway's terminal is the gateway's to handle.
            .process_group(0)
            .kill_on_drop(true);
        kill_child_when_gateway_dies(&mut command);
        command
    }
}

#[async_trait]
impl ProcessSpawner for ProcessRunner {
    fn supports(&self, launch: &LaunchSpec) -> bool {
        matches!(launch, LaunchSpec::Subprocess { .. })
    }

    async fn spawn(
        &self,
        server_id: &ServerId,
        launch: &LaunchSpec,
        logs: Arc<LogBuffer>,
    ) -> Result<SpawnedProcess, LaunchError> {
        let LaunchSpec::Subprocess { command, env, cwd } = launch else {
            return Err(LaunchError::UnsupportedMode(launch.mode().to_owned()));
        };
        let Some((program, args)) = command
            .split_first()
            .filter(|(program, _)| !program.is_empty())
        else {
            return Err(LaunchError::SpawnFailed {
                command: command.join(" "),
                reason: "the command is empty; give at least the program to run".to_owned(),
            });
        };
        let runtime = Handle::try_current().map_err(|_| LaunchError::SpawnFailed {
            command: program.clone(),
            reason: "the process runner must be called inside a tokio runtime".to_owned(),
        })?;

        let process_command = self.build_command(program, args, env, cwd.as_deref());
        let mut child = spawn_from_long_lived_thread(process_command, runtime.clone())
            .await
            .map_err(|error| launch_error_from_spawn(&error, program, cwd.as_deref()))?;
        let (leader_pid, process_group_id, stdin, stdout, stderr) = match take_parts(&mut child) {
            Some(parts) => parts,
            None => {
                // Tokio hands out the pipes and the pid of a fresh child, so this is a bug; the
                // child is killed when dropped here.
                return Err(LaunchError::SpawnFailed {
                    command: program.clone(),
                    reason: "the child's pipes or pid were missing right after the spawn"
                        .to_owned(),
                });
            }
        };
        tracing::info!(%server_id, pid = leader_pid, %program, "started server process");

        let group = Arc::new(ProcessGroup::new(leader_pid, process_group_id));
        let (exit_sender, exit_receiver) = watch::channel(None);
        runtime.spawn(capture_stderr(stderr, logs));
        runtime.spawn(watch_for_exit(child, Arc::clone(&group), exit_sender));

        // The descriptor itself, so that the session reads it on the thread that serves the
        // calls. Taking it over cannot fail for a fresh child's pipe; should it, the child
        // (owned by the exit watcher) is killed with the group below.
        let stdout = match stdout.into_owned_fd() {
            Ok(fd) => fd,
            Err(error) => {
                let _ = signal_process_group(process_group_id, libc::SIGKILL);
                return Err(LaunchError::SpawnFailed {
                    command: program.clone(),
                    reason: format!("the child's stdout could not be taken over: {error}"),
                });
            }
        };
        Ok(SpawnedProcess {
            streams: ByteStreams {
                to_server: Box::pin(stdin),
                from_server: ServerOutput::Pipe(stdout),
            },
            control: Arc::new(ProcessGroupControl::new(
                group,
                exit_receiver,
                self.settings.stop_grace,
            )),
        })
    }
}

type ChildParts = (
    u32,
    libc::pid_t,
    tokio::process::ChildStdin,
    tokio::process::ChildStdout,
    tokio::process::ChildStderr,
);

fn take_parts(child: &mut Child) -> Option<ChildParts> {
    let leader_pid = child.id()?;
    let process_group_id = libc::pid_t::try_from(leader_pid).ok()?;
    let parts = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    if let (Some(stdin), Some(stdout), Some(stderr)) = parts {
        return Some((leader_pid, process_group_id, stdin, stdout, stderr));
    }
    // Not reaped yet, so the group is still this child's.
    let _ = signal_process_group(process_group_id, libc::SIGKILL);
    None
}

/// Turns a spawn failure into what the operator needs to fix.
fn launch_error_from_spawn(error: &io::Error, program: &str, cwd: Option<&str>) -> LaunchError {
    let spawn_failed = |reason: String| LaunchError::SpawnFailed {
        command: program.to_owned(),
        reason,
    };
    match error.raw_os_error() {
        // ENOENT comes from a missing working directory, a missing program, or a program whose
        // `#!` interpreter is missing; only the second is "command not found".
        Some(libc::ENOENT) => {
            if let Some(directory) = cwd
                && !Path::new(directory).is_dir()
            {
                return spawn_failed(format!(
                    "the working directory `{directory}` does not exist; create it or change \
                     `cwd`"
                ));
            }
            if program.contains('/') {
                let path = match cwd {
                    Some(directory) => Path::new(directory).join(program),
                    None => Path::new(program).to_path_buf(),
                };
                if path.exists() {
                    return spawn_failed(
                        "the file exists but its interpreter (the `#!` line) or a library it \
                         needs was not found"
                            .to_owned(),
                    );
                }
            }
            LaunchError::CommandNotFound {
                command: program.to_owned(),
            }
        }
        Some(libc::EACCES) => spawn_failed(
            "permission denied; make the file executable (chmod +x) for the gateway's user and \
             check that its directories and the working directory are accessible"
                .to_owned(),
        ),
        Some(libc::ENOEXEC) => spawn_failed(
            "the file is not an executable the system can run; a script needs a `#!` line"
                .to_owned(),
        ),
        _ => spawn_failed(error.to_string()),
    }
}
