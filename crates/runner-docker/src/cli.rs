//! The command-line backend: runs a container as `docker run -i --rm ...` (or `podman run`), a
//! child process of the gateway whose stdin and stdout are the MCP byte streams.
//!
//! The client only relays the container's streams; the container itself belongs to the engine.
//! Killing the client therefore does not end the container, which is why stopping one always
//! goes through `<cli> stop` and `<cli> rm -f` by name.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_core::{
    ByteStreams, ContainerCli, ExitStatusInfo, LaunchError, LogBuffer, ServerId, ServerOutput,
    SpawnedProcess,
};
use tokio::process::{Child, Command};
use tokio::sync::{Notify, watch};

use crate::container_spec::ContainerSpec;
use crate::control::{ContainerControl, RunningContainer};
use crate::stderr::capture_stderr;

/// How long the client gets to exit by itself once its container is gone, before it is killed.
const CLIENT_EXIT_GRACE: Duration = Duration::from_secs(5);

/// The arguments of `<cli> run` for `spec`, everything after the program name.
///
/// Environment values are not on the command line, where any local user could read them in
/// the process list: `-e KEY` makes the client copy `KEY` from its own environment, which
/// [`spawn_container`] sets. The pull policy is left to `run`'s default (pull a missing image,
/// never replace a local one); the image is checked before the run so a missing one fails the
/// launch with a clear message.
pub(crate) fn run_arguments(spec: &ContainerSpec) -> Vec<String> {
    let mut args: Vec<String> = ["run", "-i", "--rm", "--name", &spec.name]
        .map(str::to_owned)
        .to_vec();
    for (key, value) in &spec.labels {
        args.push("--label".to_owned());
        args.push(format!("{key}={value}"));
    }
    args.extend(
        [
            "--network",
            &spec.network,
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
        ]
        .map(str::to_owned),
    );
    if spec.read_only {
        args.push("--read-only".to_owned());
    }
    if let Some((memory, _)) = &spec.memory {
        args.push("--memory".to_owned());
        args.push(memory.clone());
    }
    if let Some((cpus, _)) = &spec.cpus {
        args.push("--cpus".to_owned());
        args.push(cpus.clone());
    }
    for key in spec.env.keys() {
        args.push("-e".to_owned());
        args.push(key.clone());
    }
    for volume in &spec.volumes {
        args.push("-v".to_owned());
        args.push(volume.clone());
    }
    args.push(spec.image.clone());
    args.extend(spec.args.iter().cloned());
    args
}

pub(crate) async fn spawn_container(
    cli: ContainerCli,
    server_id: &ServerId,
    spec: ContainerSpec,
    logs: Arc<LogBuffer>,
    stop_grace: Duration,
    images: &ImagesSeen,
) -> Result<SpawnedProcess, LaunchError> {
    let program = cli.program();
    if !images.contains(cli, &spec.image) {
        ensure_image(cli, &spec.image).await?;
        images.insert(cli, &spec.image);
    }

    let mut command = Command::new(program);
    command
        .args(run_arguments(&spec))
        .envs(&spec.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // A group of its own, so that a Ctrl-C at the gateway's terminal is the gateway's.
        .process_group(0)
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|error| launch_error(program, &spec.image, &error))?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        // Tokio hands out the pipes of a fresh child, so this is a bug; the child is killed
        // when dropped here, and `--rm` removes what it may have created.
        return Err(LaunchError::SpawnFailed {
            command: format!("{program} run {}", spec.image),
            reason: "the client's pipes were missing right after the spawn".to_owned(),
        });
    };
    tracing::info!(%server_id, container = %spec.name, image = %spec.image, client = program,
        client_pid = ?child.id(), "started server container");

    tokio::spawn(capture_stderr(stderr, logs));
    let (exit_sender, exit_receiver) = watch::channel(None);
    let kill_client = Arc::new(Notify::new());
    tokio::spawn(watch_client(child, Arc::clone(&kill_client), exit_sender));

    // The descriptor itself, so that the session reads it on the thread that serves the calls.
    let stdout = stdout
        .into_owned_fd()
        .map_err(|error| LaunchError::SpawnFailed {
            command: format!("{program} run {}", spec.image),
            reason: format!("the client's stdout could not be taken over: {error}"),
        })?;
    Ok(SpawnedProcess {
        streams: ByteStreams {
            to_server: Box::pin(stdin),
            from_server: ServerOutput::Pipe(stdout),
        },
        control: Arc::new(ContainerControl::new(
            CliContainer {
                cli,
                name: spec.name,
                exit_status: exit_receiver,
                kill_client,
                removed: tokio::sync::Mutex::new(false),
            },
            stop_grace,
        )),
    })
}

/// The images a client has shown to be present. Each CLI call costs a process start (about a
/// tenth of a second with podman), so the check runs once per image; an image removed later is
/// pulled again by `run`'s default policy, and a failed pull fails that start with its stderr
/// in the logs.
#[derive(Debug, Default)]
pub(crate) struct ImagesSeen(std::sync::Mutex<std::collections::HashSet<(ContainerCli, String)>>);

impl ImagesSeen {
    fn contains(&self, cli: ContainerCli, image: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .contains(&(cli, image.to_owned()))
    }

    fn insert(&self, cli: ContainerCli, image: &str) {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert((cli, image.to_owned()));
    }
}

/// Fails the launch when the image is neither on the engine nor pullable, rather than letting
/// `run` fail after the launch was reported as started.
async fn ensure_image(cli: ContainerCli, image: &str) -> Result<(), LaunchError> {
    let program = cli.program();
    let launch_failed = |error: io::Error| launch_error(program, image, &error);
    let inspected = run_client(cli, &["image", "inspect", image])
        .await
        .map_err(launch_failed)?;
    if inspected.status.success() {
        return Ok(());
    }
    tracing::info!(image, client = program, "pulling a missing image");
    let pulled = run_client(cli, &["pull", image])
        .await
        .map_err(launch_failed)?;
    if pulled.status.success() {
        return Ok(());
    }
    Err(LaunchError::SpawnFailed {
        command: format!("{program} run {image}"),
        reason: format!(
            "the image `{image}` is not on the engine and could not be pulled ({}); pull or build \
             the image, then start the server again",
            last_line(&pulled.stderr).unwrap_or("the pull failed")
        ),
    })
}

/// Runs one short client command to its end and collects its output.
pub(crate) async fn run_client(cli: ContainerCli, args: &[&str]) -> io::Result<Output> {
    Command::new(cli.program())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output()
        .await
}

/// The last non-empty line of a client's output: where both clients put their error.
pub(crate) fn last_line(output: &[u8]) -> Option<&str> {
    std::str::from_utf8(output)
        .ok()?
        .lines()
        .map(str::trim)
        .rfind(|line| !line.is_empty())
}

fn launch_error(program: &str, image: &str, error: &io::Error) -> LaunchError {
    if error.kind() == io::ErrorKind::NotFound {
        return LaunchError::CommandNotFound {
            command: program.to_owned(),
        };
    }
    LaunchError::SpawnFailed {
        command: format!("{program} run {image}"),
        reason: error.to_string(),
    }
}

/// Owns the client process: reaps it whenever it exits, kills it when asked.
async fn watch_client(
    mut child: Child,
    kill_client: Arc<Notify>,
    exit_status: watch::Sender<Option<ExitStatusInfo>>,
) {
    let outcome = tokio::select! {
        outcome = child.wait() => outcome,
        () = kill_client.notified() => {
            let _ = child.start_kill();
            child.wait().await
        }
    };
    let status = match outcome {
        Ok(status) => describe_exit(status),
        Err(error) => ExitStatusInfo {
            code: None,
            signal: None,
            description: format!("lost track of the container client: {error}"),
        },
    };
    exit_status.send_replace(Some(status));
}

/// `run` exits with the container's code; 125 to 127 are the client's own failures.
fn describe_exit(status: ExitStatus) -> ExitStatusInfo {
    if let Some(code) = status.code() {
        let hint = match code {
            125 => " (the engine could not run the container; its error is in the logs)",
            126 => " (the container's command could not be run)",
            127 => " (the container's command was not found)",
            _ => "",
        };
        return ExitStatusInfo {
            code: Some(code),
            signal: None,
            description: format!("container exited with code {code}{hint}"),
        };
    }
    let signal = status.signal();
    ExitStatusInfo {
        code: None,
        signal,
        description: match signal {
            Some(signal) => format!("the container client was killed by signal {signal}"),
            None => format!("the container client ended ({status})"),
        },
    }
}

/// One container run by a client process.
struct CliContainer {
    cli: ContainerCli,
    name: String,
    exit_status: watch::Receiver<Option<ExitStatusInfo>>,
    kill_client: Arc<Notify>,
    /// Held while stopping and removing, so concurrent callers wait for the one doing it.
    removed: tokio::sync::Mutex<bool>,
}

#[async_trait]
impl RunningContainer for CliContainer {
    fn name(&self) -> &str {
        &self.name
    }

    fn exit_status(&self) -> watch::Receiver<Option<ExitStatusInfo>> {
        self.exit_status.clone()
    }

    async fn stop_and_remove(&self, grace: Duration) {
        let mut removed = self.removed.lock().await;
        if *removed {
            return;
        }
        let program = self.cli.program();
        if self.exit_status.borrow().is_none() {
            let seconds = (grace.as_secs() + u64::from(grace.subsec_nanos() > 0)).to_string();
            // `run --rm` removes the container once it stopped; the `rm -f` below covers a
            // stop that failed or a client that is already gone.
            let _ = run_client(self.cli, &["stop", "-t", &seconds, &self.name]).await;
        }
        match run_client(self.cli, &["rm", "-f", &self.name]).await {
            Ok(output) if output.status.success() || is_no_such_container(&output) => {}
            Ok(output) => tracing::warn!(
                container = %self.name,
                error = last_line(&output.stderr).unwrap_or_default(),
                "could not remove a server container; the next start of the gateway removes it"
            ),
            Err(error) => tracing::warn!(
                container = %self.name,
                %error,
                client = program,
                "could not run the container client to remove a server container"
            ),
        }
        let mut exit_status = self.exit_status.clone();
        let client_exited = exit_status.wait_for(Option::is_some);
        if tokio::time::timeout(CLIENT_EXIT_GRACE, client_exited)
            .await
            .is_err()
        {
            self.kill_client.notify_one();
            let _ = exit_status.wait_for(Option::is_some).await;
        }
        *removed = true;
    }
}

fn is_no_such_container(output: &Output) -> bool {
    let stderr = String::from_utf8_lossy(&output.stderr).to_ascii_lowercase();
    stderr.contains("no such container") || stderr.contains("no container with name")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn spec() -> ContainerSpec {
        ContainerSpec {
            name: "mcpgw-math-0badcafe".to_owned(),
            image: "repo/img:tag".to_owned(),
            args: vec!["--stderr-at-start".to_owned(), "3".to_owned()],
            env: BTreeMap::from([
                ("API_TOKEN".to_owned(), "secret-value".to_owned()),
                ("MODE".to_owned(), "fast".to_owned()),
            ]),
            labels: BTreeMap::from([
                ("mcp.gateway.owner".to_owned(), "gw-1".to_owned()),
                ("mcp.gateway.server".to_owned(), "math".to_owned()),
            ]),
            network: "none".to_owned(),
            memory: Some(("512m".to_owned(), 512 << 20)),
            cpus: Some(("1.5".to_owned(), 1_500_000_000)),
            read_only: true,
            volumes: vec!["/srv/data:/data:ro".to_owned()],
        }
    }

    #[test]
    fn the_run_command_is_hardened_labelled_and_ends_with_the_image_and_its_args() {
        let expected = [
            "run",
            "-i",
            "--rm",
            "--name",
            "mcpgw-math-0badcafe",
            "--label",
            "mcp.gateway.owner=gw-1",
            "--label",
            "mcp.gateway.server=math",
            "--network",
            "none",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--read-only",
            "--memory",
            "512m",
            "--cpus",
            "1.5",
            "-e",
            "API_TOKEN",
            "-e",
            "MODE",
            "-v",
            "/srv/data:/data:ro",
            "repo/img:tag",
            "--stderr-at-start",
            "3",
        ];
        assert_eq!(run_arguments(&spec()), expected);
    }

    #[test]
    fn environment_values_stay_off_the_command_line() {
        let args = run_arguments(&spec());
        assert!(args.iter().all(|arg| !arg.contains("secret-value")));
    }

    #[test]
    fn optional_settings_are_left_out_when_unset() {
        let mut spec = spec();
        spec.read_only = false;
        spec.memory = None;
        spec.cpus = None;
        spec.env.clear();
        spec.volumes.clear();
        spec.args.clear();
        let args = run_arguments(&spec);
        for absent in ["--read-only", "--memory", "--cpus", "-e", "-v"] {
            assert!(!args.iter().any(|arg| arg == absent), "{absent}: {args:?}");
        }
        assert_eq!(args.last().map(String::as_str), Some("repo/img:tag"));
    }

    #[test]
    fn exit_codes_are_described_with_the_clients_own_failures_explained() {
        let exited = describe_exit(ExitStatus::from_raw(3 << 8));
        assert_eq!(exited.code, Some(3));
        assert_eq!(exited.description, "container exited with code 3");
        let engine_failed = describe_exit(ExitStatus::from_raw(125 << 8));
        assert!(
            engine_failed
                .description
                .contains("could not run the container")
        );
        let killed = describe_exit(ExitStatus::from_raw(9));
        assert_eq!(killed.signal, Some(9));
        assert!(killed.description.contains("signal 9"));
    }

    #[test]
    fn the_last_error_line_is_found_past_trailing_blank_lines() {
        assert_eq!(
            last_line(b"Trying to pull x...\nError: x: image not known\n\n"),
            Some("Error: x: image not known")
        );
        assert_eq!(last_line(b""), None);
    }
}
