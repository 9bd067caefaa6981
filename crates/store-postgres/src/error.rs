//! The one error type of the PostgreSQL store.

use mcpgw_core::{ErrorKind, RepositoryError};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("the store URL is not a valid PostgreSQL connection string: {0}")]
    InvalidUrl(String),
    #[error(
        "could not connect to PostgreSQL at {target}: {reason}; check that the server runs, \
         accepts connections from this host, and that the user and password are right"
    )]
    Connect { target: String, reason: String },
    #[error("no PostgreSQL connection could be had from the pool: {0}")]
    Pool(String),
    #[error(
        "could not migrate the PostgreSQL schema to version {version} ({name}): {}; that \
         migration was rolled back",
        describe(source)
    )]
    Migration {
        version: u32,
        name: &'static str,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error("PostgreSQL could not {operation}: {}", describe(source))]
    Postgres {
        operation: &'static str,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error(
        "the stored {table} record `{key}` cannot be read ({reason}); repair or delete the row"
    )]
    CorruptRecord {
        table: &'static str,
        key: String,
        reason: String,
    },
}

impl StoreError {
    /// `Unavailable` when PostgreSQL could not be reached or dropped the connection (a retry
    /// may succeed), `Internal` for everything else.
    pub fn kind(&self) -> ErrorKind {
        match self {
            StoreError::Connect { .. } | StoreError::Pool(_) => ErrorKind::Unavailable,
            StoreError::Postgres { source, .. } if is_transient(source) => ErrorKind::Unavailable,
            StoreError::InvalidUrl(_)
            | StoreError::Migration { .. }
            | StoreError::Postgres { .. }
            | StoreError::CorruptRecord { .. } => ErrorKind::Internal,
        }
    }

    /// Wraps a driver error met while doing `operation` ("save a server", ...).
    pub(crate) fn postgres(
        operation: &'static str,
    ) -> impl FnOnce(tokio_postgres::Error) -> StoreError {
        move |source| StoreError::Postgres { operation, source }
    }
}

impl From<deadpool_postgres::PoolError> for StoreError {
    fn from(error: deadpool_postgres::PoolError) -> Self {
        StoreError::Pool(error.to_string())
    }
}

/// The driver's error with the server's own words: its `Display` says only "db error" for an
/// error the server reported. The server's `DETAIL` is left out: it can quote the row's values
/// (a key's hash in a unique violation), which must never reach a message.
pub(crate) fn describe(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
        None => error.to_string(),
    }
}

/// A closed connection, or a serialization failure or deadlock that PostgreSQL asks the client
/// to retry.
fn is_transient(error: &tokio_postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    error.code().is_some_and(|code| {
        *code == tokio_postgres::error::SqlState::T_R_SERIALIZATION_FAILURE
            || *code == tokio_postgres::error::SqlState::T_R_DEADLOCK_DETECTED
            || code.code().starts_with("08")
            || code.code().starts_with("57P")
    })
}

/// The auth port's error: the message goes to the log (never a key or a hash: neither ever
/// appears in this crate's messages).
impl From<StoreError> for mcpgw_authz::StoreError {
    fn from(error: StoreError) -> Self {
        mcpgw_authz::StoreError(error.to_string())
    }
}

impl From<StoreError> for RepositoryError {
    fn from(error: StoreError) -> Self {
        RepositoryError(error.to_string())
    }
}

impl From<StoreError> for mcpgw_discovery::DiscoveryStoreError {
    fn from(error: StoreError) -> Self {
        mcpgw_discovery::DiscoveryStoreError(error.to_string())
    }
}
