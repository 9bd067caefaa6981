//! What the gateway needs to know to run one MCP server.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::id::ServerId;
use crate::tool::Tool;

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LaunchSpec {
    /// A local process speaking MCP over stdin/stdout.
    Subprocess {
        command: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<String>,
    },
    /// A container speaking MCP over its stdin/stdout.
    Docker {
        image: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        network: String,
        memory: Option<String>,
        cpus: Option<String>,
        read_only: bool,
        volumes: Vec<String>,
        /// Which container engine runs it.
        engine: ContainerEngine,
    },
    /// A server reached over MCP Streamable HTTP.
    Remote {
        endpoint: String,
        headers: BTreeMap<String, String>,
    },
}

impl LaunchSpec {
    /// The `mode` name the API and the configuration use.
    pub fn mode(&self) -> &'static str {
        match self {
            LaunchSpec::Subprocess { .. } => "subprocess",
            LaunchSpec::Docker { .. } => "docker",
            LaunchSpec::Remote { .. } => "remote",
        }
    }

    /// Whether the server has a stderr stream the gateway captures.
    pub fn captures_stderr(&self) -> bool {
        !matches!(self, LaunchSpec::Remote { .. })
    }
}

/// Which container engine runs a docker-mode server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ContainerEngine {
    /// The gateway's default engine: the Engine API that `DOCKER_HOST` names (or
    /// `/var/run/docker.sock`), else a `docker` or `podman` CLI found on `PATH`.
    #[default]
    Default,
    /// The Docker Engine API at this address (`unix:///path/to/socket`, or a bare socket path).
    /// A server approved from a docker discovery source runs on that source's engine.
    Host(String),
    /// This command-line client, which runs the container as a child process.
    Cli(ContainerCli),
}

/// The container command-line clients the gateway knows how to drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContainerCli {
    Docker,
    Podman,
}

impl ContainerCli {
    /// The program's name, as found on `PATH`.
    pub fn program(self) -> &'static str {
        match self {
            ContainerCli::Docker => "docker",
            ContainerCli::Podman => "podman",
        }
    }
}

/// Where a server's definition came from; it decides who may change it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerOrigin {
    /// Declared in the configuration file: changed by editing the file, not over REST.
    Config,
    /// Created over the REST API (or by an embedder): persisted in the server repository.
    Api,
    /// Approved from a discovery source.
    Discovery { source_id: String },
}

impl ServerOrigin {
    pub fn as_str(&self) -> &'static str {
        match self {
            ServerOrigin::Config => "config",
            ServerOrigin::Api => "api",
            ServerOrigin::Discovery { .. } => "discovery",
        }
    }
}

/// The full definition of one managed MCP server.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSpec {
    pub id: ServerId,
    pub description: Option<String>,
    pub launch: LaunchSpec,
    pub idle_ttl: Duration,
    pub health_check_interval: Duration,
    pub max_consecutive_failures: u32,
    /// Tools listed before the first start, so clients see them without starting the server.
    pub predefined_tools: Vec<Tool>,
    pub origin: ServerOrigin,
}

impl ServerSpec {
    pub const DEFAULT_IDLE_TTL: Duration = Duration::from_secs(300);
    pub const DEFAULT_HEALTH_CHECK_INTERVAL: Duration = Duration::from_secs(60);
    pub const DEFAULT_MAX_CONSECUTIVE_FAILURES: u32 = 3;

    /// A subprocess server with every default; convenient for embedders and tests.
    pub fn subprocess(id: ServerId, command: Vec<String>) -> Self {
        Self {
            id,
            description: None,
            launch: LaunchSpec::Subprocess {
                command,
                env: BTreeMap::new(),
                cwd: None,
            },
            idle_ttl: Self::DEFAULT_IDLE_TTL,
            health_check_interval: Self::DEFAULT_HEALTH_CHECK_INTERVAL,
            max_consecutive_failures: Self::DEFAULT_MAX_CONSECUTIVE_FAILURES,
            predefined_tools: Vec::new(),
            origin: ServerOrigin::Api,
        }
    }

    pub fn mode(&self) -> &'static str {
        self.launch.mode()
    }

    /// Whether a change from `self` to `other` needs a restart to take effect.
    pub fn launch_differs(&self, other: &ServerSpec) -> bool {
        self.launch != other.launch
    }
}
