//! The container spawner: picks the engine a `LaunchSpec::Docker` runs on and hands the launch
//! to the Engine API or the command-line backend.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
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
    /// The engine for specs whose `engine` is [`ContainerEngine::Default`]; `None` has
    /// [`DefaultEngine::detect`] find it when a launch or a sweep first needs it, so that a
    /// gateway that runs no containers never looks for an engine.
    pub default_engine: Option<DefaultEngine>,
    /// How long a container gets between the stop signal and the kill when the last handle to
    /// its [`ProcessControl`](mcpgw_core::ProcessControl) is dropped while it still runs.
    pub stop_grace: Duration,
}

impl DockerRunnerSettings {
    pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(3);

    /// Settings whose default engine is found when first needed, with the default grace.
    pub fn new(instance_id: impl Into<String>) -> Self {
        Self {
            instance_id: instance_id.into(),
            default_engine: None,
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
///
/// The runner touches no engine until it is asked to: the default engine is found at the first
/// launch or sweep that needs it. Before its first container on an engine, it removes the
/// containers that an earlier run of the same instance left there (see
/// [`DockerRunner::remove_leftovers`]); after that first container, never again, so that a
/// sweep can never take a container of this run.
pub struct DockerRunner {
    settings: DockerRunnerSettings,
    default_engine: OnceLock<DefaultEngine>,
    clients: Mutex<HashMap<EngineAddress, Docker>>,
    /// Per engine: whether its leftovers are dealt with (removed, or given up on because a
    /// container of this run was about to start there). Held while a sweep runs, so that no
    /// launch on that engine overlaps one.
    sweeps: Mutex<HashMap<DefaultEngine, Arc<tokio::sync::Mutex<bool>>>>,
    cli_images: crate::cli::ImagesSeen,
}

impl std::fmt::Debug for DockerRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerRunner")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Why a spec's engine cannot be used, before any engine is contacted.
enum Unusable {
    /// A `docker_host` that is not a unix socket.
    Address(String),
    /// An engine kind this runner does not know.
    Kind(String),
}

impl DockerRunner {
    pub fn new(settings: DockerRunnerSettings) -> Self {
        let default_engine = OnceLock::new();
        if let Some(engine) = &settings.default_engine {
            let _ = default_engine.set(engine.clone());
        }
        Self {
            settings,
            default_engine,
            clients: Mutex::new(HashMap::new()),
            sweeps: Mutex::new(HashMap::new()),
            cli_images: crate::cli::ImagesSeen::default(),
        }
    }

    pub fn settings(&self) -> &DockerRunnerSettings {
        &self.settings
    }

    /// The engine for specs that name none, found (and logged) on first use.
    pub fn default_engine(&self) -> &DefaultEngine {
        self.default_engine.get_or_init(|| {
            let engine = DefaultEngine::detect();
            tracing::info!(%engine, "docker-mode servers that name no engine run on the default engine");
            engine
        })
    }

    /// The engine a spec's `engine` names, without contacting it.
    fn engine_for(&self, engine: &ContainerEngine) -> Result<DefaultEngine, Unusable> {
        Ok(match engine {
            ContainerEngine::Default => self.default_engine().clone(),
            ContainerEngine::Host(host) => {
                DefaultEngine::EngineApi(EngineAddress::parse(host).map_err(Unusable::Address)?)
            }
            ContainerEngine::Cli(cli) => DefaultEngine::Cli(*cli),
            other => {
                return Err(Unusable::Kind(format!(
                    "the container engine {other:?} is not supported by this gateway; use the \
                     default engine, an Engine API socket, or the docker or podman command"
                )));
            }
        })
    }

    /// Removes the containers that an earlier run of this instance left on the engine a spec's
    /// `engine` names (the default engine for [`ContainerEngine::Default`]), unless that was
    /// done before or this runner already started a container there; answers how many it
    /// removed. For the composition root, as soon as it knows that a docker-mode server exists:
    /// leftovers are removed then, rather than at the server's first start. A failure (the
    /// engine is unreachable) is answered, and the sweep is tried again by the next call or
    /// the next launch on that engine.
    pub async fn remove_leftovers(&self, engine: &ContainerEngine) -> Result<usize, String> {
        let engine = match self.engine_for(engine) {
            Ok(engine) => engine,
            Err(Unusable::Address(reason) | Unusable::Kind(reason)) => return Err(reason),
        };
        let gate = self.sweep_gate(&engine);
        let mut swept = gate.lock().await;
        if *swept {
            return Ok(0);
        }
        let outcome = self.sweep(&engine).await;
        *swept = outcome.is_ok();
        outcome
    }

    /// Whether `engine`'s leftovers are dealt with: removed, or never to be looked for again
    /// because a container of this run started there (a sweep would take it). Locked while a
    /// sweep runs, and while a launch runs on an engine whose sweep failed.
    fn sweep_gate(&self, engine: &DefaultEngine) -> Arc<tokio::sync::Mutex<bool>> {
        Arc::clone(
            self.sweeps
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(engine.clone())
                .or_default(),
        )
    }

    async fn sweep(&self, engine: &DefaultEngine) -> Result<usize, String> {
        let outcome =
            crate::cleanup::remove_leftover_containers(engine, &self.settings.instance_id).await;
        match &outcome {
            Ok(0) => {}
            Ok(removed) => {
                tracing::info!(removed, %engine, "removed containers an earlier run left behind");
            }
            Err(error) => {
                tracing::warn!(%error, %engine, "could not remove the containers an earlier run may have left behind");
            }
        }
        outcome
    }

    /// Runs one container on `engine`, after that engine's leftovers are dealt with. When the
    /// sweep fails, the launch runs with the gate held: if it starts a container, the engine
    /// is never swept again; if not, the next launch tries the sweep again.
    async fn launch(
        &self,
        engine: DefaultEngine,
        server_id: &ServerId,
        launch: &LaunchSpec,
        logs: Arc<LogBuffer>,
    ) -> Result<SpawnedProcess, LaunchError> {
        let gate = self.sweep_gate(&engine);
        let mut swept = gate.lock().await;
        if !*swept && self.sweep(&engine).await.is_err() {
            let launched = self.launch_on(engine, server_id, launch, logs).await;
            *swept = launched.is_ok();
            return launched;
        }
        *swept = true;
        drop(swept);
        self.launch_on(engine, server_id, launch, logs).await
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
            return Err(LaunchError::UnsupportedMode(launch.mode().to_owned()));
        };
        let engine = self.engine_for(engine).map_err(|unusable| match unusable {
            Unusable::Address(reason) => LaunchError::SpawnFailed {
                command: format!("docker run {image}"),
                reason,
            },
            Unusable::Kind(reason) => LaunchError::Other(reason),
        })?;
        self.launch(engine, server_id, launch, logs).await
    }
}

impl DockerRunner {
    async fn launch_on(
        &self,
        engine: DefaultEngine,
        server_id: &ServerId,
        launch: &LaunchSpec,
        logs: Arc<LogBuffer>,
    ) -> Result<SpawnedProcess, LaunchError> {
        let LaunchSpec::Docker { image, .. } = launch else {
            return Err(LaunchError::UnsupportedMode(launch.mode().to_owned()));
        };
        match engine {
            DefaultEngine::EngineApi(address) => {
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
            DefaultEngine::Cli(cli) => {
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
            default_engine: Some(default_engine),
            stop_grace: Duration::from_secs(1),
        })
    }

    #[test]
    fn the_spec_engine_picks_the_backend_and_default_follows_the_settings() {
        let address = EngineAddress::parse("/run/one.sock").unwrap();
        let api = runner(DefaultEngine::EngineApi(address.clone()));
        assert!(matches!(
            api.engine_for(&ContainerEngine::Default),
            Ok(DefaultEngine::EngineApi(chosen)) if chosen == address
        ));
        assert!(matches!(
            api.engine_for(&ContainerEngine::Cli(ContainerCli::Podman)),
            Ok(DefaultEngine::Cli(ContainerCli::Podman))
        ));
        assert!(matches!(
            api.engine_for(&ContainerEngine::Host("unix:///run/two.sock".to_owned())),
            Ok(DefaultEngine::EngineApi(chosen)) if chosen.socket() == std::path::Path::new("/run/two.sock")
        ));
        let cli = runner(DefaultEngine::Cli(ContainerCli::Docker));
        assert!(matches!(
            cli.engine_for(&ContainerEngine::Default),
            Ok(DefaultEngine::Cli(ContainerCli::Docker))
        ));
    }

    #[tokio::test]
    async fn a_host_that_is_not_a_socket_fails_the_launch_with_what_to_write() {
        let runner = runner(DefaultEngine::Cli(ContainerCli::Docker));
        let launch = LaunchSpec::Docker {
            image: "img".to_owned(),
            args: Vec::new(),
            env: Default::default(),
            network: String::new(),
            memory: None,
            cpus: None,
            read_only: true,
            volumes: Vec::new(),
            engine: ContainerEngine::Host("tcp://10.0.0.1:2375".to_owned()),
        };
        let server = ServerId::parse("s").unwrap();
        let logs = Arc::new(LogBuffer::new(server.clone(), Arc::new(NoClock)));
        let Err(error) = runner.spawn(&server, &launch, logs).await else {
            panic!("a tcp address must be refused");
        };
        let text = error.to_string();
        assert!(text.contains("unix:///path/to/docker.sock"), "{text}");
        let Err(swept) = runner
            .remove_leftovers(&ContainerEngine::Host("tcp://10.0.0.1:2375".to_owned()))
            .await
        else {
            panic!("nothing to sweep at a tcp address");
        };
        assert!(swept.contains("unix:///path/to/docker.sock"), "{swept}");
    }

    #[test]
    fn the_default_engine_is_not_looked_for_until_it_is_needed() {
        let runner = DockerRunner::new(DockerRunnerSettings::new("gw"));
        assert!(runner.default_engine.get().is_none());
        let _ = runner.engine_for(&ContainerEngine::Cli(ContainerCli::Podman));
        assert!(
            runner.default_engine.get().is_none(),
            "an engine of its own needs no default"
        );
        let found = runner.default_engine().clone();
        assert_eq!(runner.default_engine.get(), Some(&found));
    }

    #[test]
    fn only_docker_specs_are_supported() {
        let runner = runner(DefaultEngine::Cli(ContainerCli::Docker));
        assert!(!runner.supports(&LaunchSpec::Remote {
            endpoint: "http://x".to_owned(),
            headers: Default::default(),
            token_exchange: None,
        }));
    }

    struct NoClock;

    #[async_trait]
    impl mcpgw_core::Clock for NoClock {
        fn now(&self) -> mcpgw_core::MonoTime {
            mcpgw_core::MonoTime::from_duration(Duration::ZERO)
        }
        fn wall(&self) -> mcpgw_core::Timestamp {
            mcpgw_core::Timestamp::from_unix_micros(0)
        }
        async fn sleep(&self, duration: Duration) {
            tokio::time::sleep(duration).await;
        }
    }
}
