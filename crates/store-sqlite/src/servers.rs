//! [`ServerRepository`] on the `mcp_servers` table.
//!
//! The core types are deliberately not `Serialize`, so the stored JSON has its own shape here
//! ([`StoredServer`]). That shape is a file format: fields may be added with a serde default,
//! never renamed or removed, or databases written by older gateways stop loading.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_core::{
    ContainerCli, ContainerEngine, LaunchSpec, RepositoryError, ServerId, ServerOrigin,
    ServerRepository, ServerSpec, Tool,
};
use serde::{Deserialize, Serialize};

use crate::definitions::DefinitionTable;
use crate::error::StoreError;
use crate::store::SqliteStore;

const TABLE: &str = "mcp_servers";

// SQLite's own clock stamps the rows: the port passes no time, and these columns are for
// operators reading the file, not for the domain.
static SERVERS: DefinitionTable = DefinitionTable {
    upsert_sql: "INSERT INTO mcp_servers (id, mode, definition, created_at, updated_at)
     VALUES (?1, ?2, ?3, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
     ON CONFLICT (id) DO UPDATE SET
         mode = excluded.mode, definition = excluded.definition, updated_at = excluded.updated_at",
    delete_sql: "DELETE FROM mcp_servers WHERE id = ?1",
    select_sql: "SELECT id, definition FROM mcp_servers ORDER BY id",
    save_operation: "save the mcp server",
    delete_operation: "delete the mcp server",
    list_operation: "list the mcp servers",
    read_operation: "read an mcp server row",
};

#[derive(Serialize, Deserialize)]
struct StoredServer {
    #[serde(default)]
    description: Option<String>,
    launch: StoredLaunch,
    /// serde's `Duration` shape (`{"secs", "nanos"}`) keeps any duration exactly.
    idle_ttl: Duration,
    health_check_interval: Duration,
    max_consecutive_failures: u32,
    #[serde(default)]
    predefined_tools: Vec<Tool>,
    origin: StoredOrigin,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
enum StoredLaunch {
    Subprocess {
        command: Vec<String>,
        #[serde(default)]
        env: BTreeMap<String, String>,
        #[serde(default)]
        cwd: Option<String>,
    },
    Docker {
        image: String,
        #[serde(default)]
        args: Vec<String>,
        #[serde(default)]
        env: BTreeMap<String, String>,
        network: String,
        #[serde(default)]
        memory: Option<String>,
        #[serde(default)]
        cpus: Option<String>,
        read_only: bool,
        #[serde(default)]
        volumes: Vec<String>,
        /// Absent in rows written before engines could be chosen: the default engine.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        engine: Option<StoredEngine>,
    },
    Remote {
        endpoint: String,
        #[serde(default)]
        headers: BTreeMap<String, String>,
    },
}

/// Which engine runs a stored docker-mode server.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum StoredEngine {
    Host(String),
    DockerCli,
    PodmanCli,
}

fn engine_kind(_engine: &ContainerEngine) -> &'static str {
    "docker (with an engine this store does not know)"
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum StoredOrigin {
    Config,
    Api,
    Discovery { source_id: String },
}

impl StoredServer {
    fn from_spec(spec: &ServerSpec) -> Result<Self, StoreError> {
        let launch = match &spec.launch {
            LaunchSpec::Subprocess { command, env, cwd } => StoredLaunch::Subprocess {
                command: command.clone(),
                env: env.clone(),
                cwd: cwd.clone(),
            },
            LaunchSpec::Docker {
                image,
                args,
                env,
                network,
                memory,
                cpus,
                read_only,
                volumes,
                engine,
            } => StoredLaunch::Docker {
                image: image.clone(),
                args: args.clone(),
                env: env.clone(),
                network: network.clone(),
                memory: memory.clone(),
                cpus: cpus.clone(),
                read_only: *read_only,
                volumes: volumes.clone(),
                engine: match engine {
                    ContainerEngine::Default => None,
                    ContainerEngine::Host(host) => Some(StoredEngine::Host(host.clone())),
                    ContainerEngine::Cli(ContainerCli::Docker) => Some(StoredEngine::DockerCli),
                    ContainerEngine::Cli(ContainerCli::Podman) => Some(StoredEngine::PodmanCli),
                    other => {
                        return Err(StoreError::UnsupportedMode {
                            mode: engine_kind(other),
                        });
                    }
                },
            },
            LaunchSpec::Remote { endpoint, headers } => StoredLaunch::Remote {
                endpoint: endpoint.clone(),
                headers: headers.clone(),
            },
            // A mode added to the core after this store was written: refusing is better than
            // storing something that would load as a different server.
            other => return Err(StoreError::UnsupportedMode { mode: other.mode() }),
        };
        let origin = match &spec.origin {
            ServerOrigin::Config => StoredOrigin::Config,
            ServerOrigin::Api => StoredOrigin::Api,
            ServerOrigin::Discovery { source_id } => StoredOrigin::Discovery {
                source_id: source_id.clone(),
            },
        };
        Ok(Self {
            description: spec.description.clone(),
            launch,
            idle_ttl: spec.idle_ttl,
            health_check_interval: spec.health_check_interval,
            max_consecutive_failures: spec.max_consecutive_failures,
            predefined_tools: spec.predefined_tools.clone(),
            origin,
        })
    }

    fn into_spec(self, id: ServerId) -> ServerSpec {
        let launch = match self.launch {
            StoredLaunch::Subprocess { command, env, cwd } => {
                LaunchSpec::Subprocess { command, env, cwd }
            }
            StoredLaunch::Docker {
                image,
                args,
                env,
                network,
                memory,
                cpus,
                read_only,
                volumes,
                engine,
            } => LaunchSpec::Docker {
                image,
                args,
                env,
                network,
                memory,
                cpus,
                read_only,
                volumes,
                engine: match engine {
                    None => ContainerEngine::Default,
                    Some(StoredEngine::Host(host)) => ContainerEngine::Host(host),
                    Some(StoredEngine::DockerCli) => ContainerEngine::Cli(ContainerCli::Docker),
                    Some(StoredEngine::PodmanCli) => ContainerEngine::Cli(ContainerCli::Podman),
                },
            },
            StoredLaunch::Remote { endpoint, headers } => LaunchSpec::Remote { endpoint, headers },
        };
        let origin = match self.origin {
            StoredOrigin::Config => ServerOrigin::Config,
            StoredOrigin::Api => ServerOrigin::Api,
            StoredOrigin::Discovery { source_id } => ServerOrigin::Discovery { source_id },
        };
        ServerSpec {
            id,
            description: self.description,
            launch,
            idle_ttl: self.idle_ttl,
            health_check_interval: self.health_check_interval,
            max_consecutive_failures: self.max_consecutive_failures,
            predefined_tools: self.predefined_tools,
            origin,
        }
    }
}

fn decode_row(id: String, definition: &str) -> Result<ServerSpec, StoreError> {
    let corrupt = |reason: String, key: &str| StoreError::CorruptRecord {
        table: TABLE,
        key: key.to_owned(),
        reason,
    };
    let server_id = ServerId::parse(&id).map_err(|error| corrupt(error.to_string(), &id))?;
    let stored: StoredServer =
        serde_json::from_str(definition).map_err(|error| corrupt(error.to_string(), &id))?;
    Ok(stored.into_spec(server_id))
}

impl SqliteStore {
    async fn save_server(&self, spec: &ServerSpec) -> Result<(), StoreError> {
        let definition =
            serde_json::to_string(&StoredServer::from_spec(spec)?).map_err(|error| {
                StoreError::CorruptRecord {
                    table: TABLE,
                    key: spec.id.to_string(),
                    reason: error.to_string(),
                }
            })?;
        self.upsert_definition(
            &SERVERS,
            spec.id.as_str().to_owned(),
            spec.mode(),
            definition,
        )
        .await
    }

    async fn delete_server(&self, id: &ServerId) -> Result<(), StoreError> {
        self.delete_definition(&SERVERS, id.as_str().to_owned())
            .await
    }

    async fn load_servers(&self) -> Result<Vec<ServerSpec>, StoreError> {
        self.load_definitions(&SERVERS, decode_row).await
    }
}

#[async_trait]
impl ServerRepository for SqliteStore {
    async fn save(&self, spec: &ServerSpec) -> Result<(), RepositoryError> {
        Ok(self.save_server(spec).await?)
    }

    async fn delete(&self, id: &ServerId) -> Result<(), RepositoryError> {
        Ok(self.delete_server(id).await?)
    }

    async fn load_all(&self) -> Result<Vec<ServerSpec>, RepositoryError> {
        Ok(self.load_servers().await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_json_keeps_its_documented_shape() {
        let mut spec = ServerSpec::subprocess(ServerId::parse("math").unwrap(), vec!["m".into()]);
        spec.origin = ServerOrigin::Discovery {
            source_id: "docker-0".into(),
        };
        let json = serde_json::to_value(StoredServer::from_spec(&spec).unwrap()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "description": null,
                "launch": {"mode": "subprocess", "command": ["m"], "env": {}, "cwd": null},
                "idle_ttl": {"secs": 300, "nanos": 0},
                "health_check_interval": {"secs": 60, "nanos": 0},
                "max_consecutive_failures": 3,
                "predefined_tools": [],
                "origin": {"kind": "discovery", "source_id": "docker-0"},
            })
        );
    }

    #[test]
    fn a_row_with_broken_json_or_id_is_reported_with_its_key() {
        let error = decode_row("math".into(), "{not json").unwrap_err();
        assert!(matches!(&error, StoreError::CorruptRecord { key, .. } if key == "math"));
        let valid = serde_json::to_string(
            &StoredServer::from_spec(&ServerSpec::subprocess(
                ServerId::parse("ok").unwrap(),
                vec!["x".into()],
            ))
            .unwrap(),
        )
        .unwrap();
        let error = decode_row("bad id".into(), &valid).unwrap_err();
        assert!(matches!(&error, StoreError::CorruptRecord { key, .. } if key == "bad id"));
        assert_eq!(error.kind(), mcpgw_core::ErrorKind::Internal);
    }
}
