//! Where the command-line tools (`mcpgw auth create-key`, `create-user`, `set-password`) write:
//! the shared PostgreSQL store when the configuration names one, else the SQLite store under
//! the data directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcpgw_config::StoreConfig;
use mcpgw_gateway::Environment;
use mcpgw_gateway::authz::{AuthStore, UserStore};
use mcpgw_store_sqlite::SqliteStore;

use crate::StartError;

/// The store a command-line tool works on.
#[derive(Debug, Clone)]
pub enum StoreLocation {
    /// The SQLite store under a data directory (made when missing).
    DataDir(PathBuf),
    /// The PostgreSQL database that a fleet of replicas shares.
    Shared(StoreConfig),
}

impl StoreLocation {
    /// The store the gateway started with `config_file` (or `./gateway.yaml` when there is
    /// one) and `data_dir` would use. A configuration file that cannot be read or is invalid
    /// is an error, since the tool cannot know where to write.
    pub fn for_gateway(
        data_dir: &Path,
        config_file: Option<&Path>,
        environment: &Environment,
    ) -> Result<Self, StartError> {
        let Some(path) = crate::default_config_path(config_file) else {
            return Ok(Self::DataDir(data_dir.to_owned()));
        };
        let sources = crate::default_discovery_sources();
        let config = crate::load_config_file(&path, environment, &sources, &[])?;
        Ok(match config.store {
            Some(section) => Self::Shared(section),
            None => Self::DataDir(data_dir.to_owned()),
        })
    }

    /// Opens it on the current runtime: the auth store and the user store of one database.
    pub(crate) async fn open(
        &self,
    ) -> Result<(Arc<dyn AuthStore>, Arc<dyn UserStore>), StartError> {
        match self {
            Self::DataDir(data_dir) => {
                std::fs::create_dir_all(data_dir).map_err(|error| {
                    StartError::new(format!(
                        "cannot create the data directory {}; pass a writable --data-dir: {error}",
                        data_dir.display()
                    ))
                })?;
                let store = Arc::new(
                    SqliteStore::open(&crate::data_dir::store_path(data_dir)).map_err(|error| {
                        StartError::new(format!("cannot open the gateway's store: {error}"))
                    })?,
                );
                Ok((store.clone(), store))
            }
            Self::Shared(section) => {
                let store = Arc::new(crate::cluster::connect(section).await?);
                Ok((store.clone(), store))
            }
        }
    }
}

impl From<&Path> for StoreLocation {
    fn from(data_dir: &Path) -> Self {
        Self::DataDir(data_dir.to_owned())
    }
}
