//! A [`ServerRepository`] of one's own: the servers created at run time kept in one JSON file,
//! in the serde form of [`ServerSpec`].
//!
//! `tests/contract.rs` proves it with the port's contract suite (one macro line), and
//! `tests/gateway.rs` runs the bundled gateway with it in place of SQLite; `src/main.rs` serves
//! that gateway over HTTP.
//!
//! Every write replaces the file through a temporary file and a rename, so a crash leaves the
//! old file or the new one, never half of one. One lock serializes the writes of this process;
//! two processes must not share a file.

use std::collections::BTreeMap;
use std::path::PathBuf;

use async_trait::async_trait;
use mcpgw_core::{RepositoryError, ServerId, ServerRepository, ServerSpec};
use tokio::sync::Mutex;

/// The servers in a JSON file: an array of definitions, ordered by id.
#[derive(Debug)]
pub struct JsonFileRepository {
    path: PathBuf,
    /// What the file holds, read once; writes go to both.
    servers: Mutex<Option<BTreeMap<ServerId, ServerSpec>>>,
}

impl JsonFileRepository {
    /// A repository kept in `path`; the file is made on the first save.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            servers: Mutex::new(None),
        }
    }

    async fn read(&self) -> Result<BTreeMap<ServerId, ServerSpec>, RepositoryError> {
        let text = match tokio::fs::read_to_string(&self.path).await {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(BTreeMap::new());
            }
            Err(error) => return Err(failure("read", &self.path, error)),
        };
        let specs: Vec<ServerSpec> =
            serde_json::from_str(&text).map_err(|error| failure("parse", &self.path, error))?;
        Ok(specs
            .into_iter()
            .map(|spec| (spec.id.clone(), spec))
            .collect())
    }

    async fn write(&self, servers: &BTreeMap<ServerId, ServerSpec>) -> Result<(), RepositoryError> {
        let specs: Vec<&ServerSpec> = servers.values().collect();
        let text = serde_json::to_string_pretty(&specs)
            .map_err(|error| failure("encode", &self.path, error))?;
        let temporary = self.path.with_extension("json.tmp");
        tokio::fs::write(&temporary, text)
            .await
            .map_err(|error| failure("write", &temporary, error))?;
        tokio::fs::rename(&temporary, &self.path)
            .await
            .map_err(|error| failure("replace", &self.path, error))
    }

    /// Applies `change` to the servers and writes them; nothing changes when the write fails.
    async fn change(
        &self,
        change: impl FnOnce(&mut BTreeMap<ServerId, ServerSpec>),
    ) -> Result<(), RepositoryError> {
        let mut held = self.servers.lock().await;
        let mut servers = match held.as_ref() {
            Some(servers) => servers.clone(),
            None => self.read().await?,
        };
        change(&mut servers);
        self.write(&servers).await?;
        *held = Some(servers);
        Ok(())
    }
}

fn failure(action: &str, path: &std::path::Path, error: impl std::fmt::Display) -> RepositoryError {
    RepositoryError(format!("cannot {action} {}: {error}", path.display()))
}

#[async_trait]
impl ServerRepository for JsonFileRepository {
    async fn save(&self, spec: &ServerSpec) -> Result<(), RepositoryError> {
        self.change(|servers| {
            servers.insert(spec.id.clone(), spec.clone());
        })
        .await
    }

    async fn delete(&self, id: &ServerId) -> Result<(), RepositoryError> {
        self.change(|servers| {
            servers.remove(id);
        })
        .await
    }

    async fn load_all(&self) -> Result<Vec<ServerSpec>, RepositoryError> {
        let mut held = self.servers.lock().await;
        if held.is_none() {
            *held = Some(self.read().await?);
        }
        Ok(held
            .iter()
            .flat_map(|servers| servers.values().cloned())
            .collect())
    }
}
