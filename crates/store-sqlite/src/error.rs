//! The one error type of the SQLite store.

use std::path::{Path, PathBuf};

use mcpgw_core::{ErrorKind, RepositoryError};
use rusqlite::ErrorCode;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error(
        "could not create the data directory `{path}`: {source}; choose a data directory that \
         can be created and written"
    )]
    CreateDirectory {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "could not open the database `{path}`: {source}; check that its directory exists and is \
         writable"
    )]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error(
        "`{path}` exists but is not an sqlite database; move the file away or choose another \
         data directory"
    )]
    NotADatabase { path: PathBuf },
    #[error(
        "the database `{path}` is damaged (sqlite reports a malformed file, as a truncated or \
         partly overwritten file is); restore it from a backup, or move it away to start with an \
         empty store"
    )]
    Damaged { path: PathBuf },
    #[error(
        "the database `{path}` has schema version {found} but this gateway knows versions up to \
         {supported}; run the newer gateway that wrote it or restore a backup"
    )]
    SchemaTooNew {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error(
        "could not migrate the database `{path}` to schema version {version}: {source}; the \
         database is unchanged"
    )]
    Migration {
        path: PathBuf,
        version: usize,
        #[source]
        source: rusqlite::Error,
    },
    #[error("the database could not {operation}: {source}")]
    Sqlite {
        operation: &'static str,
        #[source]
        source: rusqlite::Error,
    },
    #[error(
        "the stored {table} record `{key}` cannot be read ({reason}); repair or delete the row"
    )]
    CorruptRecord {
        table: &'static str,
        key: String,
        reason: String,
    },
    #[error("the database task did not finish: {0}")]
    Background(String),
}

impl StoreError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            StoreError::CreateDirectory { .. } | StoreError::Open { .. } => ErrorKind::Unavailable,
            StoreError::Sqlite { source, .. } if is_contention(source) => ErrorKind::Unavailable,
            StoreError::NotADatabase { .. }
            | StoreError::Damaged { .. }
            | StoreError::SchemaTooNew { .. }
            | StoreError::Migration { .. }
            | StoreError::Sqlite { .. }
            | StoreError::CorruptRecord { .. }
            | StoreError::Background(_) => ErrorKind::Internal,
        }
    }

    pub(crate) fn sqlite(operation: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
        move |source| StoreError::Sqlite { operation, source }
    }

    /// An error met while opening the file at `path`: a file that is not a database, or one
    /// that is damaged, becomes the error that names the file and what to do, whichever step
    /// (the first pragma, the migrations, the first read) ran into it.
    pub(crate) fn at_open(path: &Path, error: StoreError) -> StoreError {
        let code = match &error {
            StoreError::Open { source, .. } | StoreError::Sqlite { source, .. } => {
                source.sqlite_error_code()
            }
            StoreError::Migration { source, .. } => source.sqlite_error_code(),
            _ => None,
        };
        match code {
            Some(ErrorCode::NotADatabase) => StoreError::NotADatabase {
                path: path.to_owned(),
            },
            Some(ErrorCode::DatabaseCorrupt) => StoreError::Damaged {
                path: path.to_owned(),
            },
            _ => error,
        }
    }
}

/// Another process (or a long checkpoint) held the database past the busy timeout: the request
/// may succeed when retried, unlike every other SQLite failure.
fn is_contention(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
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
