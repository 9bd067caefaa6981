//! Connecting: the settings, the pool, and the migrations run at connect.

use std::str::FromStr as _;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;

use crate::auth::KeyCache;
use crate::error::StoreError;
use crate::schema;

/// How to reach the database.
#[derive(Clone)]
pub struct PostgresSettings {
    /// A `postgres://user@host:port/database?options` URL (or the `key=value` form).
    pub url: String,
    /// The password, when it is not in the URL (read from a secret file or the environment).
    /// It wins over one in the URL.
    pub password: Option<String>,
    /// Connections the pool opens at most. Writes are rare and reads of hot data come from
    /// memory, so a handful is plenty for one replica.
    pub max_connections: usize,
    /// How long connecting (and waiting for a free pooled connection) may take.
    pub connect_timeout: Duration,
}

impl std::fmt::Debug for PostgresSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresSettings")
            .field("target", &describe_url(&self.url))
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("max_connections", &self.max_connections)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

impl PostgresSettings {
    pub const DEFAULT_MAX_CONNECTIONS: usize = 8;
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            password: None,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
        }
    }

    /// The driver's configuration: the URL, the separate password, and the connect timeout
    /// when the URL sets none.
    pub fn driver_config(&self) -> Result<tokio_postgres::Config, StoreError> {
        let mut config = tokio_postgres::Config::from_str(&self.url)
            .map_err(|error| StoreError::InvalidUrl(error.to_string()))?;
        if let Some(password) = &self.password {
            config.password(password);
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(self.connect_timeout);
        }
        if config.get_application_name().is_none() {
            config.application_name("mcpgw");
        }
        Ok(config)
    }

    /// Where the URL points, without its password: for messages and logs.
    pub fn target(&self) -> String {
        describe_url(&self.url)
    }
}

/// `host:port/database` of a connection string, never its password.
fn describe_url(url: &str) -> String {
    match tokio_postgres::Config::from_str(url) {
        Err(_) => "an unparsable URL".to_owned(),
        Ok(config) => {
            let host = config
                .get_hosts()
                .first()
                .map(|host| match host {
                    tokio_postgres::config::Host::Tcp(name) => name.clone(),
                    tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
                })
                .unwrap_or_else(|| "localhost".to_owned());
            let port = config.get_ports().first().copied().unwrap_or(5432);
            let database = config
                .get_dbname()
                .or(config.get_user())
                .unwrap_or("postgres");
            format!("{host}:{port}/{database}")
        }
    }
}

/// The gateway's shared database: a pool of connections to one PostgreSQL database.
///
/// Cloning is cheap and every clone shares the pool. Every method must be called from inside a
/// tokio runtime.
#[derive(Clone)]
pub struct PostgresStore {
    pub(crate) pool: Pool,
    pub(crate) settings: Arc<PostgresSettings>,
    /// Names this store in its notifications, so that its own listener can tell them apart.
    pub(crate) origin: Arc<str>,
    /// Every API key, in memory, for lookups that never wait on the database (`auth.rs`).
    pub(crate) key_cache: Arc<KeyCache>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("target", &self.settings.target())
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects, brings the schema up to date (under an advisory lock: replicas starting
    /// together take turns), checks that the pool can hand out a connection, and loads the API
    /// keys into memory.
    pub async fn connect(settings: PostgresSettings) -> Result<Self, StoreError> {
        let config = settings.driver_config()?;
        let target = settings.target();
        let (mut client, connection) =
            config
                .connect(NoTls)
                .await
                .map_err(|error| StoreError::Connect {
                    target: target.clone(),
                    reason: error.to_string(),
                })?;
        let driver = tokio::spawn(connection);
        let report = schema::migrate(&mut client, schema::MIGRATIONS).await;
        drop(client);
        // The connection task ends once its client is gone.
        let _ = driver.await;
        let report = report?;
        if !report.applied.is_empty() {
            tracing::info!(target = %target, applied = ?report.applied, "migrated the PostgreSQL schema");
        }
        if !report.unknown.is_empty() {
            tracing::warn!(
                target = %target,
                versions = ?report.unknown,
                "the PostgreSQL schema has migrations this release does not know (a newer release \
                 applied them); running on it, as migrations only add"
            );
        }
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(settings.max_connections.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(settings.connect_timeout))
            .create_timeout(Some(settings.connect_timeout))
            .recycle_timeout(Some(settings.connect_timeout))
            .build()
            .map_err(|error| StoreError::Pool(error.to_string()))?;
        let store = Self {
            pool,
            settings: Arc::new(settings),
            origin: Arc::from(crate::changes::new_origin()),
            key_cache: Arc::new(KeyCache::empty()),
        };
        drop(store.client().await?);
        store.reload_api_keys().await?;
        Ok(store)
    }

    /// The schema version this build of the store creates and understands.
    pub fn schema_version() -> u32 {
        schema::MIGRATIONS
            .last()
            .map_or(0, |migration| migration.version)
    }

    /// Where the store points, without its password.
    pub fn target(&self) -> String {
        self.settings.target()
    }

    /// The settings the store was opened with (a listener opens its own connection with them).
    pub fn settings(&self) -> &PostgresSettings {
        &self.settings
    }

    /// A connection from the pool.
    pub(crate) async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(|error| match error {
            deadpool_postgres::PoolError::Backend(source) => StoreError::Connect {
                target: self.settings.target(),
                reason: source.to_string(),
            },
            other => StoreError::Pool(other.to_string()),
        })
    }
}
