//! Reads, backs up and watches the configuration file: the adapter of `mcpgw_config::ConfigFile`.
//!
//! [`FileConfig`] reads the gateway's configuration file as UTF-8 text, copies it to rotating
//! backups next to it (`<file>.bak1` newest .. `<file>.bak{keep}` oldest, each written to a
//! temporary file, flushed to disk and renamed, so a backup is whole or absent), and notices
//! changes by polling the file's size, modification time and a hash of its content. All file
//! access runs on the blocking pool, and every error names the path it is about.
//!
//! This adapter must never write, rename or delete the configuration file itself: it only
//! creates and rotates the backups next to it. It never parses or validates what it reads (the
//! `mcpgw-config` domain crate does), and never blocks the async runtime.
//!
//! # Example
//!
//! Read the file, keep a backup next to it, and wait for the next change (a real file in a
//! temporary directory):
//!
//! ```rust
//! use std::time::Duration;
//!
//! use mcpgw_config::ConfigFile as _;
//! use mcpgw_config_file::FileConfig;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let directory = tempfile::tempdir()?;
//! let path = directory.path().join("gateway.yaml");
//! std::fs::write(&path, "mcp_servers: {}\n")?;
//!
//! let file = FileConfig::new(&path).with_watch_interval(Duration::from_millis(100));
//! let text = file.read().await?;
//! let config = mcpgw_config::parse(&file.display_name(), &text, &|_| None)?;
//! assert!(config.mcp_servers.is_empty());
//!
//! let backup = file.backup(3).await?; // keeps gateway.yaml.bak1 ..= .bak3
//! assert!(backup.ends_with("gateway.yaml.bak1"));
//!
//! std::fs::write(&path, "mcp_servers: {}\ntool_timeout_s: 30\n")?;
//! file.changed().await; // noticed at the next poll
//! # Ok(())
//! # }
//! ```

mod backup;
mod state;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_config::{ConfigFile, ConfigFileError};

pub use backup::MAX_BACKUPS;
pub use state::HASHED_SIZE_LIMIT;

use state::FileState;

/// How often [`FileConfig::changed`] looks at the file unless told otherwise.
pub const DEFAULT_WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// The shortest poll interval accepted: below it, polling costs more than it saves.
pub const MIN_WATCH_INTERVAL: Duration = Duration::from_millis(100);

/// The configuration file on the local filesystem.
pub struct FileConfig {
    path: PathBuf,
    watch_interval: Duration,
    /// The file as last read, or as last reported changed: `changed` completes only when the
    /// file differs from it, so one change wakes the caller once.
    seen: Mutex<Option<FileState>>,
}

impl FileConfig {
    /// The file at `path` (kept as given, relative paths resolve against the working
    /// directory at each access), polled every [`DEFAULT_WATCH_INTERVAL`]. Nothing is read
    /// yet, so the file may not exist.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            watch_interval: DEFAULT_WATCH_INTERVAL,
            seen: Mutex::new(None),
        }
    }

    /// Polls for changes every `interval`, raised to [`MIN_WATCH_INTERVAL`] if shorter.
    #[must_use]
    pub fn with_watch_interval(mut self, interval: Duration) -> Self {
        self.set_watch_interval(interval);
        self
    }

    /// Polls for changes every `interval`, raised to [`MIN_WATCH_INTERVAL`] if shorter.
    pub fn set_watch_interval(&mut self, interval: Duration) {
        self.watch_interval = interval.max(MIN_WATCH_INTERVAL);
    }

    pub fn watch_interval(&self) -> Duration {
        self.watch_interval
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn remember(&self, state: FileState) {
        *self.seen.lock().unwrap_or_else(PoisonError::into_inner) = Some(state);
    }

    async fn observe(&self) -> Option<FileState> {
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || state::observe(&path))
            .await
            .ok()
    }
}

impl std::fmt::Debug for FileConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileConfig")
            .field("path", &self.path)
            .field("watch_interval", &self.watch_interval)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl ConfigFile for FileConfig {
    fn display_name(&self) -> String {
        self.path.display().to_string()
    }

    async fn read(&self) -> Result<String, ConfigFileError> {
        let path = self.path.clone();
        let (result, state) = tokio::task::spawn_blocking(move || state::read_text(&path))
            .await
            .map_err(|failure| task_failed(&self.path, "reading", &failure))?;
        // Remembered even when the read failed: a missing file that appears, or an unreadable
        // one that is fixed, is then a change.
        self.remember(state);
        result
    }

    async fn backup(&self, keep: usize) -> Result<String, ConfigFileError> {
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || backup::backup(&path, keep))
            .await
            .map_err(|failure| task_failed(&self.path, "backing up", &failure))?
    }

    /// Polls the file every watch interval and completes when it differs from the last
    /// `read` (or from the last change reported, so one change is reported once). A missing
    /// file is a state like any other: its disappearance is reported once, and so is its
    /// return. Called before any `read`, the file as it is at the call is the baseline.
    /// Dropping the future midway loses nothing: the state is only updated on completion.
    async fn changed(&self) {
        let has_baseline = self
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some();
        if !has_baseline && let Some(now) = self.observe().await {
            let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
            if seen.is_none() {
                *seen = Some(now);
            }
        }
        loop {
            tokio::time::sleep(self.watch_interval).await;
            // A look that could not be taken (the blocking task panicked) tells nothing: try
            // again at the next tick rather than report a change that may not be one.
            let Some(now) = self.observe().await else {
                continue;
            };
            let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
            if seen.as_ref() != Some(&now) {
                *seen = Some(now);
                return;
            }
        }
    }
}

fn task_failed(path: &Path, doing: &str, failure: &tokio::task::JoinError) -> ConfigFileError {
    ConfigFileError(format!(
        "{doing} the configuration file {} failed unexpectedly ({failure}); see the gateway's \
         log and report it as a bug",
        path.display()
    ))
}
