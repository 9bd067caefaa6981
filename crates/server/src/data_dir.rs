//! Opening the default databases of a data directory while the start does other work.
//!
//! A start opens two SQLite files under its data directory: the store (`mcpgw.db`) and the
//! event log (`events.db`). Each takes milliseconds (a new one is created and migrated with
//! several `fsync`s), and neither needs the configuration, so both are opened on threads of
//! their own: with each other, and, when the bundled server starts, while the configuration file
//! is read and checked.

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use mcpgw_store_sqlite::{SqliteEventLog, SqliteStore, StoreError};

use crate::StartError;

/// The store's file under the data directory.
const STORE_FILE: &str = "mcpgw.db";
/// The event log's file under the data directory.
pub(crate) const EVENT_LOG_FILE: &str = "events.db";

/// The default databases of a data directory, being opened on threads of their own. Hand it to
/// [`crate::GatewayBuilder::opening_data_dir`]; dropped before a build took it (a start that
/// failed on its configuration), it waits for the threads, closes what they opened, and removes
/// the data directory if it created it, so that a failed first start leaves nothing behind.
pub struct OpeningDataDir {
    dir: PathBuf,
    created_dir: bool,
    store: Option<JoinHandle<Result<SqliteStore, StoreError>>>,
    /// The store once opened: every port that is not replaced shares it.
    opened_store: Option<SqliteStore>,
    event_log: Option<JoinHandle<Result<SqliteEventLog, StoreError>>>,
    /// The database files that were there before this start (and so are never removed).
    existed: Vec<PathBuf>,
    handed_over: bool,
}

impl std::fmt::Debug for OpeningDataDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpeningDataDir")
            .field("dir", &self.dir)
            .field("created_dir", &self.created_dir)
            .finish_non_exhaustive()
    }
}

impl OpeningDataDir {
    /// Creates `dir` when it is missing and starts opening both databases in it.
    pub fn start(dir: impl Into<PathBuf>) -> Result<Self, StartError> {
        Self::start_with(dir.into(), true, true)
    }

    /// Creates `dir` when it is missing and starts opening the store when `store` says so,
    /// the event log when `event_log` says so. What is not started ahead is opened on the
    /// caller's thread when it is first asked for.
    pub(crate) fn start_with(
        dir: PathBuf,
        store: bool,
        event_log: bool,
    ) -> Result<Self, StartError> {
        let created_dir = !dir.exists();
        std::fs::create_dir_all(&dir).map_err(|error| {
            StartError::new(format!(
                "cannot create the data directory {}: {error}",
                dir.display()
            ))
        })?;
        let existed = [store_path(&dir), dir.join(EVENT_LOG_FILE)]
            .into_iter()
            .filter(|path| path.exists())
            .collect();
        let mut opening = Self {
            dir,
            created_dir,
            store: None,
            opened_store: None,
            event_log: None,
            existed,
            handed_over: false,
        };
        if store {
            let path = store_path(&opening.dir);
            opening.store = Some(spawn_opener("mcpgw-open-store", move || {
                SqliteStore::open(&path)
            })?);
        }
        if event_log {
            let path = opening.dir.join(EVENT_LOG_FILE);
            opening.event_log = Some(spawn_opener("mcpgw-open-events", move || {
                SqliteEventLog::open(&path)
            })?);
        }
        Ok(opening)
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// From here on the directory is the gateway's, whatever happens next: dropping this no
    /// longer removes it.
    pub(crate) fn hand_over(&mut self) {
        self.handed_over = true;
    }

    /// For a gateway whose state lives elsewhere (a shared PostgreSQL store): closes the
    /// databases being opened and removes the files this start created, so that the data
    /// directory holds no empty store that could be mistaken for the gateway's.
    pub(crate) fn discard_databases(&mut self) {
        if let Some(opening) = self.store.take() {
            drop(opening.join());
        }
        self.opened_store = None;
        if let Some(opening) = self.event_log.take() {
            drop(opening.join());
        }
        for path in [store_path(&self.dir), self.dir.join(EVENT_LOG_FILE)] {
            if self.existed.contains(&path) {
                continue;
            }
            for suffix in ["", "-wal", "-shm", "-journal"] {
                let mut file = path.clone().into_os_string();
                file.push(suffix);
                let _ = std::fs::remove_file(&file);
            }
        }
    }

    /// The store: waited for when it is being opened, else opened now; opened once.
    pub(crate) fn store(&mut self) -> Result<SqliteStore, StartError> {
        if let Some(store) = &self.opened_store {
            return Ok(store.clone());
        }
        let path = store_path(&self.dir);
        let store = match self.store.take() {
            Some(opening) => joined(opening, "the store", &path)?,
            None => {
                SqliteStore::open(&path).map_err(|error| open_error("the store", &path, error))?
            }
        };
        self.opened_store = Some(store.clone());
        Ok(store)
    }

    /// The event log: waited for when it is being opened, else opened now.
    pub(crate) fn event_log(&mut self) -> Result<SqliteEventLog, StartError> {
        let path = self.dir.join(EVENT_LOG_FILE);
        match self.event_log.take() {
            Some(opening) => joined(opening, "the event log", &path),
            None => SqliteEventLog::open(&path)
                .map_err(|error| open_error("the event log", &path, error)),
        }
    }
}

impl Drop for OpeningDataDir {
    fn drop(&mut self) {
        if self.handed_over {
            return;
        }
        // The databases are closed before their directory goes.
        if let Some(opening) = self.store.take() {
            drop(opening.join());
        }
        self.opened_store = None;
        if let Some(opening) = self.event_log.take() {
            drop(opening.join());
        }
        if self.created_dir
            && let Err(error) = std::fs::remove_dir_all(&self.dir)
        {
            tracing::warn!(dir = %self.dir.display(), %error, "the data directory this start created could not be removed");
        }
    }
}

/// The default store's file under `data_dir`.
pub(crate) fn store_path(data_dir: &Path) -> PathBuf {
    data_dir.join(STORE_FILE)
}

fn spawn_opener<T: Send + 'static>(
    name: &str,
    open: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<JoinHandle<Result<T, StoreError>>, StartError> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(open)
        .map_err(|error| StartError::new(format!("cannot start a thread at startup: {error}")))
}

fn joined<T>(
    opening: JoinHandle<Result<T, StoreError>>,
    what: &str,
    path: &Path,
) -> Result<T, StartError> {
    opening
        .join()
        .map_err(|_| StartError::new(format!("the thread that opened {what} panicked")))?
        .map_err(|error| open_error(what, path, error))
}

fn open_error(what: &str, path: &Path, error: StoreError) -> StartError {
    StartError::new(format!("cannot open {what} {}: {error}", path.display()))
}
