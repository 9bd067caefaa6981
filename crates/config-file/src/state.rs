//! What the file looks like on disk, cheaply enough to look every second, and reading it.

use std::collections::hash_map::DefaultHasher;
use std::fs::{File, Metadata};
use std::hash::Hasher;
use std::io::{ErrorKind, Read};
use std::path::Path;
use std::time::SystemTime;

use mcpgw_config::ConfigFileError;

/// Files up to this size (1 MiB) have their content hashed at each look. A rewrite that keeps
/// the size within one tick of a coarse modification time (whole seconds on some filesystems)
/// is otherwise invisible; configuration files are a few kilobytes, so reading them once per
/// interval costs little, and a larger file falls back to size and time alone.
pub const HASHED_SIZE_LIMIT: u64 = 1024 * 1024;

/// One look at the file: two looks that differ mean the file may have changed in between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileState {
    Missing,
    /// The file could not be opened or read, for this reason; being fixed is a change.
    Unreadable(ErrorKind),
    Present {
        size: u64,
        modified: Option<SystemTime>,
        /// Absent above [`HASHED_SIZE_LIMIT`].
        content_hash: Option<u64>,
    },
}

impl FileState {
    fn from_error(error: &std::io::Error) -> Self {
        match error.kind() {
            ErrorKind::NotFound => Self::Missing,
            kind => Self::Unreadable(kind),
        }
    }

    fn present(metadata: &Metadata, content: Option<&[u8]>) -> Self {
        Self::Present {
            size: metadata.len(),
            modified: metadata.modified().ok(),
            content_hash: content.map(hash_content),
        }
    }
}

fn hash_content(content: &[u8]) -> u64 {
    // `DefaultHasher::new` uses fixed keys, so equal contents hash equally across looks.
    let mut hasher = DefaultHasher::new();
    hasher.write(content);
    hasher.finish()
}

/// Looks at the file without keeping anything but its state.
pub(crate) fn observe(path: &Path) -> FileState {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(error) => return FileState::from_error(&error),
    };
    let metadata = match file.metadata() {
        Ok(metadata) => metadata,
        Err(error) => return FileState::from_error(&error),
    };
    if metadata.len() > HASHED_SIZE_LIMIT {
        return FileState::present(&metadata, None);
    }
    let mut content = Vec::new();
    // Read at most one byte past the limit: a file growing while it is read must not make
    // a look unbounded.
    match file
        .by_ref()
        .take(HASHED_SIZE_LIMIT + 1)
        .read_to_end(&mut content)
    {
        Ok(_) => FileState::present(&metadata, Some(&content)),
        Err(error) => FileState::from_error(&error),
    }
}

/// Reads the whole file as UTF-8, and answers the state it was read in. The size and time
/// come from before the read and the hash from the bytes read, so a write racing the read
/// makes the state differ from the next look, which then reports a change.
pub(crate) fn read_text(path: &Path) -> (Result<String, ConfigFileError>, FileState) {
    let cannot_read = |error: &std::io::Error| {
        ConfigFileError(format!(
            "cannot read the configuration file {}: {error}; check that it exists and is \
             readable",
            path.display()
        ))
    };
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(error) => return (Err(cannot_read(&error)), FileState::from_error(&error)),
    };
    let metadata = match file.metadata() {
        Ok(metadata) => metadata,
        Err(error) => return (Err(cannot_read(&error)), FileState::from_error(&error)),
    };
    let mut content = Vec::new();
    if let Err(error) = file.read_to_end(&mut content) {
        return (Err(cannot_read(&error)), FileState::from_error(&error));
    }
    let hashed = (content.len() as u64 <= HASHED_SIZE_LIMIT).then_some(content.as_slice());
    let state = FileState::present(&metadata, hashed);
    let text = String::from_utf8(content).map_err(|error| {
        ConfigFileError(format!(
            "the configuration file {} is not valid UTF-8 (invalid byte at offset {}); save it \
             as UTF-8",
            path.display(),
            error.utf8_error().valid_up_to()
        ))
    });
    (text, state)
}
