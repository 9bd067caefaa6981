//! The port through which the configuration file is read, backed up and watched.

use async_trait::async_trait;

/// Why the configuration file could not be read or backed up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigFileError(pub String);

/// The configuration file the gateway started from.
///
/// Contract for implementors:
/// - `read` answers the whole text as it is now on disk.
/// - `backup` copies the current file to `<file>.bak1`, after moving `.bak1`..`.bak{keep-1}`
///   one step up (the oldest beyond `keep` is dropped); each file appears whole or not at all
///   (written to a temporary file and renamed). It answers the path of `.bak1`. A directory
///   that cannot be written is an error that names it.
/// - `changed` completes when the file may have changed since the last `read` (its size or
///   modification time moved); it never completes spuriously in a loop.
#[async_trait]
pub trait ConfigFile: Send + Sync {
    /// The path as the operator gave it, for messages.
    fn display_name(&self) -> String;
    async fn read(&self) -> Result<String, ConfigFileError>;
    async fn backup(&self, keep: usize) -> Result<String, ConfigFileError>;
    async fn changed(&self);
}
