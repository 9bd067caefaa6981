//! The instance id and the removal of containers an earlier run left behind.

use std::sync::Arc;

use mcpgw_core::{DomainEvent, EventObserver, LaunchSpec, PublishedEvent, WeakServerManager};
use mcpgw_runner_docker::DockerRunner;

use crate::StartError;

/// This gateway's instance id, the owner label of the containers it runs: kept in the data
/// directory, so that a gateway restarted on the same data finds (and removes) the containers
/// a killed predecessor left, and two gateways with their own data never touch each other's.
pub fn instance_id(data_dir: &std::path::Path) -> Result<String, StartError> {
    use mcpgw_gateway::authz::SecretSource as _;
    let path = data_dir.join("instance_id");
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let id = text.trim();
            let valid = (8..=64).contains(&id.len())
                && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
            if !valid {
                return Err(StartError::new(format!(
                    "{} does not hold an instance id (8 to 64 letters, digits or `-`); delete \
                     it and a new one is made",
                    path.display()
                )));
            }
            Ok(id.to_owned())
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let mut bytes = [0_u8; 8];
            mcpgw_gateway::OsSecrets
                .fill(&mut bytes)
                .map_err(|error| StartError::new(format!("cannot make an instance id: {error}")))?;
            let id: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
            std::fs::write(&path, format!("{id}\n")).map_err(|error| {
                StartError::new(format!(
                    "cannot write the instance id to {}: {error}",
                    path.display()
                ))
            })?;
            Ok(id)
        }
        Err(error) => Err(StartError::new(format!(
            "cannot read the instance id {}: {error}",
            path.display()
        ))),
    }
}

/// Removes the containers that an earlier run of this instance left behind (a gateway killed
/// outright cannot remove its own), as soon as a docker-mode server exists: one in the
/// configuration file or restored from the store at start, one created over the API, by a
/// reload or by a discovery approval later. Only the engine that server runs on is contacted,
/// once; a gateway without docker-mode servers never looks for an engine. The runner itself
/// also sweeps an engine before its first container there, so nothing this run starts can be
/// taken for a leftover.
pub(crate) struct LeftoverSweep {
    /// Weak: the manager's event sink holds this observer.
    pub(crate) servers: WeakServerManager,
    pub(crate) runner: Arc<DockerRunner>,
    pub(crate) runtime: tokio::runtime::Handle,
}

impl EventObserver for LeftoverSweep {
    fn observe(&self, event: &PublishedEvent) {
        let id = match &event.event {
            DomainEvent::McpServerRegistered {
                mcp_server_id,
                mode,
                ..
            } if *mode == "docker" => mcp_server_id,
            DomainEvent::McpServerUpdated { mcp_server_id, .. } => mcp_server_id,
            _ => return,
        };
        // Observers run while the manager publishes; it is asked for the spec afterwards.
        let Some(servers) = self.servers.upgrade() else {
            return;
        };
        let runner = self.runner.clone();
        let id = id.clone();
        self.runtime.spawn(async move {
            let Ok(server) = servers.snapshot(&id) else {
                return;
            };
            if let LaunchSpec::Docker { engine, .. } = &server.spec.launch {
                // A failure is logged by the runner, and tried again at the server's start.
                let _ = runner.remove_leftovers(engine).await;
            }
        });
    }
}
