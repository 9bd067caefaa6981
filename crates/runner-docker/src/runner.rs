//! The container spawner: picks the engine a `LaunchSpec::Docker` runs on and hands the launch
//! to the Engine API or the command-line backend.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bollard::Docker;
use mcpgw_core::{
    ContainerCli, ContainerEngine, LaunchError, LaunchSpec, LogBuffer, ProcessSpawner, ServerId,
    SpawnedProcess,
};

use crate::container_spec::ContainerSpec;
use crate::engine::{EngineAddress, connect_engine, default_engine_address};

pub use crate::container_spec::{OWNER_LABEL, SERVER_LABEL};

/// The engine a docker-mode server runs on when its spec does not name one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DefaultEngine {
    /// A Docker Engine API (Docker's, or the one `podman system service` serves).
    EngineApi(EngineAddress),
    /// A command-line client, which runs each container as a child process of the gateway.
    Cli(ContainerCli),
}

impl DefaultEngine {
    /// Finds the engine this machine offers, in this order:
    /// 1. the Engine API at [`default_engine_address`] (`DOCKER_HOST`, else
    ///    `/var/run/docker.sock`), when that socket exists;
    /// 2. a `docker` command-line client on `PATH`;
    /// 3. a `podman` command-line client on `PATH`;
    /// 4. otherwise the Engine API address of step 1, so that launches fail with a message
    ///    naming the socket that is missing.
    pub fn detect() -> Self {
        let address = default_engine_address();
        if address.socket().exists() {
            return DefaultEngine::EngineApi(address);
        }
        for cli in [ContainerCli::Docker, ContainerCli::Podman] {
            if find_on_path(cli.program()).is_some() {
                return DefaultEngine::Cli(cli);
            }
        }
        DefaultEngine::EngineApi(address)
    }
}

impl std::fmt::Display for DefaultEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DefaultEngine::EngineApi(address) => write!(f, "the Engine API at {address}"),
            DefaultEngine::Cli(cli) => write!(f, "the `{}` command", cli.program()),
        }
    }
}

/// The first executable file called `program` in a `PATH` directory.
fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|directory| directory.join(program))
        .find(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
}

/// How [`DockerRunner`] runs containers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerRunnerSettings {
    /// This gateway's id: the value of the [`OWNER_LABEL`] on every container it runs.
    pub instance_id: String,
    /// The engine for specs whose `engine` is [`ContainerEngine::Default`].
    pub default_engine: DefaultEngine,
    /// How long a container gets between the stop signal and the kill when the last handle to
    /// its [`ProcessControl`](mcpgw_core::ProcessControl) is dropped while it still runs.
    pub stop_grace: Duration,
}

impl DockerRunnerSettings {
    pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(3);

    /// Settings with the engine found by [`DefaultEngine::detect`] and the default grace.
    pub fn detect(instance_id: impl Into<String>) -> Self {
        Self {
            instance_id: instance_id.into(),
            default_engine: DefaultEngine::detect(),
            stop_grace: Self::DEFAULT_STOP_GRACE,
        }
    }
}

/// Starts `mode: docker` servers as containers.
///
/// Every container drops all capabilities, may not gain privileges, has a read-only root
/// filesystem unless the spec says otherwise, joins no network unless the spec names one, and
/// carries the labels [`OWNER_LABEL`]`=<instance id>` and [`SERVER_LABEL`]`=<server id>`. Its
/// stdin and stdout are the MCP byte streams; its stderr goes to the server's log buffer, line
/// by line, in bounded memory.
///
/// The spec's `engine` picks the backend: the default engine of the settings, the Engine API
/// at a given address (one client per address, kept for the runner's life), or a command-line
/// client. Each spawn hands back a [`ProcessControl`](mcpgw_core::ProcessControl) that:
/// - `terminate(grace)`: stops the container (the stop signal, a kill once `grace` has passed)
///   and removes it; idempotent, safe to call concurrently, returns once the container is gone;
/// - `exited()`: completes with the container's exit status (`container exited with code 3`);
/// - when every handle is dropped before `terminate`, removes the container in the background
///   (stopping it first with the settings' `stop_grace`).
///
/// A spawn that fails leaves no container behind. Needs a tokio runtime with its I/O and time
/// drivers (`enable_all`).
pub struct DockerRunner {
    settings: DockerRunnerSettings,
    clients: Mutex<HashMap<EngineAddress, Docker>>,
    cli_images: crate::cli::ImagesSeen,
}

impl std::fmt::Debug for DockerRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerRunner")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Where one launch runs.
enum Backend {
    Api(EngineAddress),
    Cli(ContainerCli),
}

impl DockerRunner {
    pub fn new(settings: DockerRunnerSettings) -> Self {
        Self {
            settings,
            clients: Mutex::new(HashMap::new()),
            cli_images: crate::cli::ImagesSeen::default(),
        }
    }

    pub fn settings(&self) -> &DockerRunnerSettings {
        &self.settings
    }

    fn backend_for(&self, engine: &ContainerEngine, image: &str) -> Result<Backend, LaunchError> {
        Ok(match engine {
            ContainerEngine::Default => match &self.settings.default_engine {
                DefaultEngine::EngineApi(address) => Backend::Api(address.clone()),
                DefaultEngine::Cli(cli) => Backend::Cli(*cli),
            },
            ContainerEngine::Host(host) => {
                Backend::Api(EngineAddress::parse(host).map_err(|reason| {
                    LaunchError::SpawnFailed {
                        command: format!("docker run {image}"),
                        reason,
                    }
                })?)
            }
            ContainerEngine::Cli(cli) => Backend::Cli(*cli),
            other => {
                return Err(LaunchError::Other(format!(
                    "the container engine {other:?} is not supported by this gateway; use the \
                     default engine, an Engine API socket, or the docker or podman command"
                )));
            }
        })
    }

    /// The client for `address`, connecting (and negotiating the API version) on first use.
    async fn client(&self, address: &EngineAddress) -> Result<Docker, String> {
        if let Some(client) = self
            .clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(address)
        {
            return Ok(client.clone());
        }
        let client = connect_engine(address).await?;
        // Two first launches may race here; either client is as good as the other.
        Ok(self
            .clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(address.clone())
            .or_insert(client)
            .clone())
    }
}

#[async_trait]
impl ProcessSpawner for DockerRunner {
    fn supports(&self, launch: &LaunchSpec) -> bool {
        matches!(launch, LaunchSpec::Docker { .. })
    }

    async fn spawn(
        &self,
        server_id: &ServerId,
        launch: &LaunchSpec,
        logs: Arc<LogBuffer>,
    ) -> Result<SpawnedProcess, LaunchError> {
        let LaunchSpec::Docker { image, engine, .. } = launch else {
            return Err(LaunchError::UnsupportedMode(launch.mode()));
        };
        match self.backend_for(engine, image)? {
            Backend::Api(address) => {
                let spec = ContainerSpec::from_launch(
                    server_id,
                    &self.settings.instance_id,
                    launch,
                    "docker",
                )?;
                let client =
                    self.client(&address)
                        .await
                        .map_err(|reason| LaunchError::SpawnFailed {
                            command: format!("docker run {image}"),
                            reason,
                        })?;
                crate::api::spawn_container(
                    client,
                    &address,
                    server_id,
                    spec,
                    logs,
                    self.settings.stop_grace,
                )
                .await
            }
            Backend::Cli(cli) => {
                let spec = ContainerSpec::from_launch(
                    server_id,
                    &self.settings.instance_id,
                    launch,
                    cli.program(),
                )?;
                crate::cli::spawn_container(
                    cli,
                    server_id,
                    spec,
                    logs,
                    self.settings.stop_grace,
                    &self.cli_images,
                )
                .await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runner(default_engine: DefaultEngine) -> DockerRunner {
        DockerRunner::new(DockerRunnerSettings {
            instance_id: "gw".to_owned(),
            default_engine,
            stop_grace: Duration::from_secs(1),
        })
    }

    #[test]
    fn the_spec_engine_picks_the_backend_and_default_follows_the_settings() {
        let address = EngineAddress::parse("/run/one.sock").unwrap();
        let api = runner(DefaultEngine::EngineApi(address.clone()));
        assert!(matches!(
            api.backend_for(&ContainerEngine::Default, "i"),
            Ok(Backend::Api(chosen)) if chosen == address
        ));
        assert!(matches!(
            api.backend_for(&ContainerEngine::Cli(ContainerCli::Podman), "i"),
            Ok(Backend::Cli(ContainerCli::Podman))
        ));
        assert!(matches!(
            api.backend_for(&ContainerEngine::Host("unix:///run/two.sock".to_owned()), "i"),
            Ok(Backend::Api(chosen)) if chosen.socket() == std::path::Path::new("/run/two.sock")
        ));
        let cli = runner(DefaultEngine::Cli(ContainerCli::Docker));
        assert!(matches!(
            cli.backend_for(&ContainerEngine::Default, "i"),
            Ok(Backend::Cli(ContainerCli::Docker))
        ));
    }

    #[test]
    fn a_host_that_is_not_a_socket_fails_the_launch_with_what_to_write() {
        let runner = runner(DefaultEngine::Cli(ContainerCli::Docker));
        let Err(error) = runner.backend_for(
            &ContainerEngine::Host("tcp://10.0.0.1:2375".to_owned()),
            "img",
        ) else {
            panic!("a tcp address must be refused");
        };
        let text = error.to_string();
        assert!(text.contains("unix:///path/to/docker.sock"), "{text}");
    }

    #[test]
    fn only_docker_specs_are_supported() {
        let runner = runner(DefaultEngine::Cli(ContainerCli::Docker));
        assert!(!runner.supports(&LaunchSpec::Remote {
            endpoint: "http://x".to_owned(),
            headers: Default::default(),
        }));
    }
}
