//! Runs MCP servers in containers, and discovers them from a container engine.
//!
//! [`DockerRunner`] is the [`ProcessSpawner`](mcpgw_core::ProcessSpawner) for `mode: docker`:
//! it runs the image with stdin and stdout as the MCP transport and the container's stderr in
//! the server's log buffer, hardened by default (every capability dropped, no new privileges,
//! a read-only root filesystem, no network), through the Docker Engine API (which podman also
//! serves) or a `docker`/`podman` command-line client. Every container it runs carries the
//! label `mcp.gateway.owner=<instance id>`; stopping a server removes its container, and
//! [`remove_leftover_containers`] removes the ones a gateway that died left behind. The runner
//! contacts no engine until a launch or [`DockerRunner::remove_leftovers`] needs one, and
//! removes an engine's leftovers before its first container there.
//!
//! [`DockerDiscoverySource`] is the discovery source of type `docker`: it lists the running
//! containers labelled `mcp.gateway.enabled=true` on an engine's socket.
//!
//! This crate must never decide when a server starts or stops, never speak MCP, and never touch
//! a container it did not start (no `mcp.gateway.owner` label of this instance) except to read
//! its labels for discovery.
//!
//! # Example
//!
//! Not run as a test: it needs a container engine and an image. The log buffer comes from the
//! caller, which owns the server's clock.
//!
//! ```rust,no_run
//! use std::collections::BTreeMap;
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use mcpgw_core::{ContainerEngine, LaunchSpec, LogBuffer, ProcessSpawner as _, ServerId};
//! use mcpgw_runner_docker::{DockerRunner, DockerRunnerSettings};
//!
//! async fn start_and_stop(logs: Arc<LogBuffer>) -> Result<(), Box<dyn std::error::Error>> {
//!     // Every container it runs is labelled `mcp.gateway.owner=gateway-1`.
//!     let runner = DockerRunner::new(DockerRunnerSettings::new("gateway-1"));
//!     let launch = LaunchSpec::Docker {
//!         image: "mcp/time".into(),
//!         args: Vec::new(),
//!         env: BTreeMap::new(),
//!         network: "none".into(),
//!         memory: Some("256m".into()),
//!         cpus: None,
//!         read_only: true,
//!         volumes: Vec::new(),
//!         engine: ContainerEngine::Default, // found on first use: the Engine API, docker or podman
//!     };
//!     let container = runner.spawn(&ServerId::parse("time")?, &launch, logs).await?;
//!     // `container.streams` are its stdin and stdout, for an MCP connector.
//!     container.control.terminate(Duration::from_secs(3)).await; // stops and removes it
//!     Ok(())
//! }
//! ```

mod api;
mod cleanup;
mod cli;
mod container_spec;
mod control;
mod discovery;
mod engine;
mod runner;
mod stderr;

pub use cleanup::remove_leftover_containers;
pub use discovery::{
    DOCKER_SOURCE_TYPE, DockerDiscoverySource, DockerSourceFactory, SOCKET_PATH_KEY,
};
pub use engine::{EngineAddress, connect_engine, default_engine_address};
pub use runner::{DefaultEngine, DockerRunner, DockerRunnerSettings, OWNER_LABEL, SERVER_LABEL};
