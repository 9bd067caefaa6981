//! Opening the database and running blocking work off the async executor.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::auth::KeyCache;
use crate::error::StoreError;
use crate::schema;

/// How long a statement waits for a lock held by another connection (another gateway process on
/// the same file, or a checkpoint) before failing with a retryable error.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The gateway's database: one SQLite file, one connection.
///
/// Cloning is cheap and every clone shares the connection. Writes through one connection are
/// serialized by its mutex, which suits a gateway whose writes are rare (servers, keys, roles)
/// and whose hot paths read from in-memory caches.
///
/// All methods that touch the database must be called from inside a tokio runtime: they run on
/// its blocking thread pool.
///
/// API keys are also held in memory (see `auth.rs`): loaded at open, updated by every write
/// through any clone of this store, so that authenticating a request never waits on SQLite.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    connection: Arc<Mutex<Connection>>,
    path: Arc<PathBuf>,
    pub(crate) key_cache: Arc<KeyCache>,
}

impl SqliteStore {
    /// Opens the database at `path`, creating the file and its missing parent directories, brings
    /// its schema up to date, and loads the API keys into memory.
    ///
    /// This blocks (file system, fsync, migrations): call it at startup or from
    /// `spawn_blocking`, not from a task on a busy executor.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(parent) = path
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
        {
            std::fs::create_dir_all(parent).map_err(|source| StoreError::CreateDirectory {
                path: parent.to_owned(),
                source,
            })?;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut connection =
            Connection::open_with_flags(path, flags).map_err(|source| open_error(path, source))?;
        configure(&connection).map_err(|source| open_error(path, source))?;
        // A file that is not a database, or a damaged one, may pass the first pragmas (they do
        // not read every page) and only fail in the migrations or the first read of a table.
        schema::migrate(&mut connection, path, schema::MIGRATIONS)
            .map_err(|error| StoreError::at_open(path, error))?;
        let key_cache = Arc::new(
            KeyCache::load(&connection).map_err(|error| StoreError::at_open(path, error))?,
        );
        Ok(Self {
            connection: Arc::new(Mutex::new(connection)),
            path: Arc::new(path.to_owned()),
            key_cache,
        })
    }

    /// The database file this store was opened on.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version this build of the store creates and understands.
    pub fn schema_version() -> u32 {
        u32::try_from(schema::MIGRATIONS.len()).unwrap_or(u32::MAX)
    }

    /// The shared connection, for tests that need to hold it as a busy database would.
    #[cfg(test)]
    pub(crate) fn connection_for_tests(&self) -> Arc<Mutex<Connection>> {
        Arc::clone(&self.connection)
    }

    /// Runs `work` with the connection on the blocking thread pool and waits for it without
    /// blocking the executor.
    pub(crate) async fn run_blocking<T, W>(&self, work: W) -> Result<T, StoreError>
    where
        T: Send + 'static,
        W: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let connection = Arc::clone(&self.connection);
        tokio::task::spawn_blocking(move || work(&mut lock(&connection)))
            .await
            .map_err(|join_error| StoreError::Background(join_error.to_string()))?
    }
}

/// Locks the connection, also after a panic in an earlier holder: the panic dropped any open
/// `rusqlite::Transaction`, which rolled back, so the connection is usable; a leftover
/// transaction (only possible if someone began one by hand) is rolled back here to be sure.
fn lock(connection: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    match connection.lock() {
        Ok(guard) => guard,
        Err(poisoned) => {
            connection.clear_poison();
            let guard = poisoned.into_inner();
            if !guard.is_autocommit() {
                // Failing to roll back leaves the transaction open; the next statement reports it.
                let _ = guard.execute_batch("ROLLBACK");
            }
            guard
        }
    }
}

fn configure(connection: &Connection) -> rusqlite::Result<()> {
    connection.busy_timeout(BUSY_TIMEOUT)?;
    // WAL lets readers proceed while a write commits. The answer is ignored on purpose: on a file
    // system without shared memory SQLite stays in its rollback journal, which is slower but
    // just as safe.
    let _journal_mode: String =
        connection.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
    // The port promises that `save` is durable when it returns. In WAL mode `NORMAL` syncs only at
    // checkpoints, so a power cut can lose commits that were already acknowledged; `FULL` syncs
    // the WAL at every commit. Writes are rare here (servers, keys, roles), so the extra fsync
    // per commit is cheap; a high-volume table (the event log) should batch its rows into one
    // transaction rather than weaken this.
    connection.pragma_update(None, "synchronous", "FULL")?;
    connection.pragma_update(None, "foreign_keys", "ON")?;
    Ok(())
}

fn open_error(path: &Path, source: rusqlite::Error) -> StoreError {
    StoreError::at_open(
        path,
        StoreError::Open {
            path: path.to_owned(),
            source,
        },
    )
}
