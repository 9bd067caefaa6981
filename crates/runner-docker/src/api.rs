//! The Engine API backend: creates, attaches to, starts, watches and removes one container
//! through a Docker Engine API (Docker's, or podman's compatible one).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bollard::Docker;
use bollard::container::LogOutput;
use bollard::errors::Error as EngineError;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    AttachContainerOptions, CreateContainerOptions, CreateImageOptions, RemoveContainerOptions,
    StopContainerOptions,
};
use futures::{Stream, StreamExt};
use mcpgw_core::{
    ByteStreams, ExitStatusInfo, LaunchError, LogBuffer, ServerId, ServerOutput, SpawnedProcess,
};
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

use crate::container_spec::ContainerSpec;
use crate::control::{ContainerControl, RunningContainer};
use crate::engine::EngineAddress;
use crate::stderr::StderrLines;

/// How many bytes of the container's stdout may wait for the gateway to read them; past that
/// the container's output waits, as it would on a full pipe.
const STDOUT_BUFFER_BYTES: usize = 64 * 1024;

/// How long to wait between two looks at a container whose wait request failed.
const WAIT_RETRY_DELAY: Duration = Duration::from_millis(500);

pub(crate) async fn spawn_container(
    client: Docker,
    address: &EngineAddress,
    server_id: &ServerId,
    spec: ContainerSpec,
    logs: Arc<LogBuffer>,
    stop_grace: Duration,
) -> Result<SpawnedProcess, LaunchError> {
    let failed = |reason: String| LaunchError::SpawnFailed {
        command: format!("docker run {}", spec.image),
        reason,
    };
    ensure_image(&client, address, &spec.image)
        .await
        .map_err(failed)?;

    let options = CreateContainerOptions {
        name: Some(spec.name.clone()),
        ..Default::default()
    };
    client
        .create_container(Some(options), create_body(&spec))
        .await
        .map_err(|error| {
            failed(format!(
                "the container engine at {address} could not create the container: {}",
                engine_message(&error)
            ))
        })?;
    // From here on the container exists: a failure, or the caller giving up, removes it.
    let mut created = RemoveUnlessKept::new(client.clone(), spec.name.clone());

    let attach = AttachContainerOptions {
        stream: true,
        stdin: true,
        stdout: true,
        stderr: true,
        ..Default::default()
    };
    // Attached before the start, so not one byte the server writes at start is missed.
    let attached = match client.attach_container(&spec.name, Some(attach)).await {
        Ok(attached) => attached,
        Err(error) => {
            created.remove_now().await;
            return Err(failed(format!(
                "the container engine at {address} could not attach to the container: {}",
                engine_message(&error)
            )));
        }
    };
    if let Err(error) = client.start_container(&spec.name, None).await {
        created.remove_now().await;
        return Err(failed(format!(
            "the container engine at {address} could not start the container: {}; check the \
             image's command and `args`",
            engine_message(&error)
        )));
    }
    created.keep();
    tracing::info!(%server_id, container = %spec.name, image = %spec.image, engine = %address,
        "started server container");

    let (stdout_writer, stdout_reader) = tokio::io::duplex(STDOUT_BUFFER_BYTES);
    tokio::spawn(relay_output(attached.output, stdout_writer, logs));
    let (exit_sender, exit_receiver) = watch::channel(None);
    tokio::spawn(watch_for_exit(
        client.clone(),
        spec.name.clone(),
        exit_sender,
    ));

    Ok(SpawnedProcess {
        streams: ByteStreams {
            to_server: attached.input,
            from_server: ServerOutput::stream(stdout_reader),
        },
        control: Arc::new(ContainerControl::new(
            Container {
                client,
                name: spec.name,
                exit_status: exit_receiver,
                removed: tokio::sync::Mutex::new(false),
            },
            stop_grace,
        )),
    })
}

/// Makes sure `image` is on the engine: an image already there is used as it is (never
/// pulled, so a locally built tag is not replaced), anything else is pulled.
async fn ensure_image(client: &Docker, address: &EngineAddress, image: &str) -> Result<(), String> {
    match client.inspect_image(image).await {
        Ok(_) => return Ok(()),
        Err(error) if status_code(&error) == Some(404) => {}
        Err(error) => {
            return Err(format!(
                "the container engine at {address} could not look up the image `{image}`: {}",
                engine_message(&error)
            ));
        }
    }
    tracing::info!(image, engine = %address, "pulling a missing image");
    let options = CreateImageOptions {
        from_image: Some(image.to_owned()),
        ..Default::default()
    };
    let mut progress = client.create_image(Some(options), None, None);
    let mut pull_error = None;
    while let Some(step) = progress.next().await {
        if let Err(error) = step {
            pull_error = Some(engine_message(&error));
            break;
        }
    }
    // Some engines end a failed pull without an error in the stream: only the image counts.
    if pull_error.is_none() && client.inspect_image(image).await.is_ok() {
        return Ok(());
    }
    Err(format!(
        "the image `{image}` is not on the container engine at {address} and could not be \
         pulled ({}); pull or build the image on that engine, then start the server again",
        pull_error.unwrap_or_else(|| "the pull ended without the image".to_owned())
    ))
}

fn create_body(spec: &ContainerSpec) -> ContainerCreateBody {
    ContainerCreateBody {
        image: Some(spec.image.clone()),
        cmd: (!spec.args.is_empty()).then(|| spec.args.clone()),
        env: Some(
            spec.env
                .iter()
                .map(|(key, value)| format!("{key}={value}"))
                .collect(),
        ),
        labels: Some(
            spec.labels
                .iter()
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect::<HashMap<_, _>>(),
        ),
        // StdinOnce: when the gateway closes stdin, the server sees its end, as over a pipe.
        open_stdin: Some(true),
        stdin_once: Some(true),
        attach_stdin: Some(true),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        // Without a TTY the engine keeps stdout and stderr apart and passes bytes unchanged.
        tty: Some(false),
        host_config: Some(HostConfig {
            network_mode: Some(spec.network.clone()),
            memory: spec.memory.as_ref().map(|(_, bytes)| *bytes),
            nano_cpus: spec.cpus.as_ref().map(|(_, nanos)| *nanos),
            readonly_rootfs: Some(spec.read_only),
            binds: (!spec.volumes.is_empty()).then(|| spec.volumes.clone()),
            cap_drop: Some(vec!["ALL".to_owned()]),
            security_opt: Some(vec!["no-new-privileges".to_owned()]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Splits the attached output: stdout to the gateway's reader, stderr into the log buffer.
async fn relay_output<S>(mut output: S, mut stdout: tokio::io::DuplexStream, logs: Arc<LogBuffer>)
where
    S: Stream<Item = Result<LogOutput, EngineError>> + Unpin,
{
    let server_id = logs.server_id().clone();
    let mut stderr = StderrLines::new(logs);
    let mut reader_open = true;
    while let Some(item) = output.next().await {
        match item {
            Ok(LogOutput::StdOut { message } | LogOutput::Console { message }) => {
                // Once the gateway stopped reading, stdout is dropped but stderr still logged.
                if reader_open && stdout.write_all(&message).await.is_err() {
                    reader_open = false;
                }
            }
            Ok(LogOutput::StdErr { message }) => stderr.feed(&message),
            Ok(LogOutput::StdIn { .. }) => {}
            Err(error) => {
                tracing::debug!(%server_id, %error, "stopped reading the container's output");
                break;
            }
        }
    }
    stderr.finish();
    let _ = stdout.shutdown().await;
}

/// Waits for the container to stop running and publishes how it ended.
async fn watch_for_exit(
    client: Docker,
    name: String,
    exit_status: watch::Sender<Option<ExitStatusInfo>>,
) {
    let status = loop {
        let mut waiting = client.wait_container(&name, None);
        match waiting.next().await {
            Some(Ok(response)) => break exited_with(response.status_code),
            // bollard reports a non-zero exit code as an error.
            Some(Err(EngineError::DockerContainerWaitError { code, .. })) => {
                break exited_with(code);
            }
            // The engine answers only when the container stops: a request timeout means it
            // still runs.
            Some(Err(EngineError::RequestTimeoutError)) => continue,
            Some(Err(_)) | None => {}
        }
        // The wait broke off (the engine restarted, the container was removed): look at the
        // container itself.
        match client.inspect_container(&name, None).await {
            Ok(inspected) => {
                let state = inspected.state.unwrap_or_default();
                if state.running != Some(true) {
                    break exited_with(state.exit_code.unwrap_or_default());
                }
                tokio::time::sleep(WAIT_RETRY_DELAY).await;
            }
            Err(error) if status_code(&error) == Some(404) => {
                break ExitStatusInfo {
                    code: None,
                    signal: None,
                    description: "the container was removed".to_owned(),
                };
            }
            Err(error) => {
                break ExitStatusInfo {
                    code: None,
                    signal: None,
                    description: format!("lost track of the container: {}", engine_message(&error)),
                };
            }
        }
    };
    tracing::debug!(container = %name, %status, "server container ended");
    exit_status.send_replace(Some(status));
}

fn exited_with(code: i64) -> ExitStatusInfo {
    let code = i32::try_from(code).unwrap_or(i32::MAX);
    ExitStatusInfo {
        code: Some(code),
        signal: None,
        description: format!("container exited with code {code}"),
    }
}

/// One container this backend started, shared by its control and the background removal.
struct Container {
    client: Docker,
    name: String,
    exit_status: watch::Receiver<Option<ExitStatusInfo>>,
    /// Held while stopping and removing, so concurrent callers wait for the one doing it.
    removed: tokio::sync::Mutex<bool>,
}

#[async_trait]
impl RunningContainer for Container {
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
        if self.exit_status.borrow().is_none() {
            let seconds = grace.as_secs() + u64::from(grace.subsec_nanos() > 0);
            let options = StopContainerOptions {
                t: Some(i32::try_from(seconds).unwrap_or(i32::MAX)),
                signal: None,
            };
            // A failed stop is not final: the forced removal below kills what still runs.
            if let Err(error) = self.client.stop_container(&self.name, Some(options)).await
                && !matches!(status_code(&error), Some(304 | 404))
            {
                tracing::debug!(container = %self.name, error = %engine_message(&error),
                    "could not stop a server container; removing it by force");
            }
        }
        remove_container(&self.client, &self.name).await;
        *removed = true;
    }
}

/// Removes a container by force; a container already gone counts as removed.
pub(crate) async fn remove_container(client: &Docker, name: &str) {
    // Killing first: podman's forced removal of a running container waits out the image's
    // stop timeout (10 s by default) when the process ignores SIGTERM, as many MCP servers
    // do; a kill ends it at once. A container that no longer runs answers 409 or 404 here.
    let kill = bollard::query_parameters::KillContainerOptions {
        signal: "SIGKILL".to_owned(),
    };
    if let Err(error) = client.kill_container(name, Some(kill)).await
        && !matches!(status_code(&error), Some(304 | 404 | 409))
    {
        tracing::debug!(container = name, error = %engine_message(&error),
            "could not kill a server container before removing it");
    }
    let options = RemoveContainerOptions {
        force: true,
        ..Default::default()
    };
    match client.remove_container(name, Some(options)).await {
        Ok(()) => {}
        Err(error) if status_code(&error) == Some(404) => {}
        Err(error) => tracing::warn!(
            container = name,
            error = %engine_message(&error),
            "could not remove a server container; the next start of the gateway removes it"
        ),
    }
}

/// Removes a created container unless the launch got far enough to hand it over, including
/// when the launching future is dropped half-way.
struct RemoveUnlessKept {
    client: Docker,
    name: String,
    armed: bool,
}

impl RemoveUnlessKept {
    fn new(client: Docker, name: String) -> Self {
        Self {
            client,
            name,
            armed: true,
        }
    }

    async fn remove_now(&mut self) {
        self.armed = false;
        remove_container(&self.client, &self.name).await;
    }

    fn keep(&mut self) {
        self.armed = false;
    }
}

impl Drop for RemoveUnlessKept {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let client = self.client.clone();
        let name = std::mem::take(&mut self.name);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { remove_container(&client, &name).await });
        }
    }
}

pub(crate) fn status_code(error: &EngineError) -> Option<u16> {
    match error {
        EngineError::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

/// The engine's own words when it gave any, else the client's description of the failure.
pub(crate) fn engine_message(error: &EngineError) -> String {
    match error {
        EngineError::DockerResponseServerError { message, .. } => message.trim().to_owned(),
        EngineError::DockerStreamError { error } => error.trim().to_owned(),
        other => other.to_string(),
    }
}
