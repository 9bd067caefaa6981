//! Rotating backups next to the configuration file, each written whole or not at all.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use mcpgw_config::ConfigFileError;

/// The most backups one call may keep: rotating is one rename per backup, so the count bounds
/// the work, and nobody needs hundreds of copies of a configuration file.
pub const MAX_BACKUPS: usize = 100;

/// How many names a temporary file tries before giving up: a name is taken only when another
/// gateway (or a crashed earlier one) used the same process id and counter.
const TEMPORARY_NAME_ATTEMPTS: u64 = 16;

static TEMPORARY_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Copies `path` to `<path>.bak1` after moving the older backups one step up, and answers the
/// path of `.bak1`.
pub(crate) fn backup(path: &Path, keep: usize) -> Result<String, ConfigFileError> {
    if keep == 0 {
        return Err(ConfigFileError(format!(
            "cannot back up the configuration file {}: the number of backups to keep is 0; \
             keep at least 1",
            path.display()
        )));
    }
    if keep > MAX_BACKUPS {
        return Err(ConfigFileError(format!(
            "cannot back up the configuration file {}: keeping {keep} backups is above the \
             limit of {MAX_BACKUPS}; keep fewer",
            path.display()
        )));
    }
    let directory = directory_of(path);
    // The copy is made before anything is rotated, so a file that cannot be read or a
    // directory that cannot be written leaves the existing backups as they were.
    let temporary = write_temporary_copy(path, &directory)?;
    let newest = backup_path(path, 1);
    let installed = rotate(path, keep, &directory).and_then(|()| {
        fs::rename(&temporary, &newest)
            .map_err(|error| cannot_move(&temporary, &newest, &directory, &error))
    });
    if let Err(error) = installed {
        if let Err(removal) = fs::remove_file(&temporary) {
            tracing::warn!(
                path = %temporary.display(),
                error = %removal,
                "could not remove the temporary backup file after a failed backup"
            );
        }
        return Err(error);
    }
    sync_directory(&directory);
    Ok(newest.display().to_string())
}

/// `<path>.bak{index}`.
fn backup_path(path: &Path, index: usize) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(format!(".bak{index}"));
    PathBuf::from(name)
}

fn directory_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Moves `.bak{keep-1}` to `.bak{keep}` (replacing it), down to `.bak1` to `.bak2`; a gap in
/// the sequence is skipped.
fn rotate(path: &Path, keep: usize, directory: &Path) -> Result<(), ConfigFileError> {
    for index in (1..keep).rev() {
        let from = backup_path(path, index);
        let to = backup_path(path, index + 1);
        match fs::rename(&from, &to) {
            Ok(()) => {}
            Err(error) if error.kind() == ErrorKind::NotFound => {}
            Err(error) => return Err(cannot_move(&from, &to, directory, &error)),
        }
    }
    Ok(())
}

fn cannot_move(from: &Path, to: &Path, directory: &Path, error: &io::Error) -> ConfigFileError {
    ConfigFileError(format!(
        "cannot move the backup {} to {}: {error}; check that {} is a file, not a directory, \
         and that the permissions of the directory {} allow writing",
        from.display(),
        to.display(),
        to.display(),
        directory.display()
    ))
}

/// Copies the file into a new hidden file of the same directory (so the rename that installs
/// it stays on one filesystem), flushed to disk, with the file's permissions: a configuration
/// file may hold secrets, and its backup must not be more readable than it is.
fn write_temporary_copy(path: &Path, directory: &Path) -> Result<PathBuf, ConfigFileError> {
    let mut source = File::open(path).map_err(|error| {
        ConfigFileError(format!(
            "cannot back up the configuration file {}: {error}; check that it exists and is \
             readable",
            path.display()
        ))
    })?;
    let metadata = source.metadata().map_err(|error| {
        ConfigFileError(format!(
            "cannot back up the configuration file {}: {error}; check that it is readable",
            path.display()
        ))
    })?;
    if !metadata.is_file() {
        return Err(ConfigFileError(format!(
            "cannot back up the configuration file {}: it is not a regular file; point the \
             gateway at the file itself",
            path.display()
        )));
    }
    let unwritable = |error: &io::Error| {
        ConfigFileError(format!(
            "cannot write a backup of the configuration file {} into the directory {}: {error}; \
             check the directory's permissions and free space",
            path.display(),
            directory.display()
        ))
    };
    // Read whole before anything is created, so a file that cannot be read leaves no
    // temporary file behind and its error is not mistaken for the directory's.
    let mut content = Vec::new();
    source.read_to_end(&mut content).map_err(|error| {
        ConfigFileError(format!(
            "cannot back up the configuration file {}: {error}; check that it is readable",
            path.display()
        ))
    })?;
    let (temporary, mut copy) = create_temporary(path, directory).map_err(|e| unwritable(&e))?;
    let written = copy
        .write_all(&content)
        .and_then(|()| copy.set_permissions(metadata.permissions()))
        .and_then(|()| copy.sync_all());
    if let Err(error) = written {
        drop(copy);
        // Best effort: the error about the copy is the one worth reporting.
        let _ = fs::remove_file(&temporary);
        return Err(unwritable(&error));
    }
    Ok(temporary)
}

fn create_temporary(path: &Path, directory: &Path) -> io::Result<(PathBuf, File)> {
    let file_name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "config".to_owned());
    let process = std::process::id();
    let mut last_error = None;
    for _ in 0..TEMPORARY_NAME_ATTEMPTS {
        let counter = TEMPORARY_COUNTER.fetch_add(1, Ordering::Relaxed);
        let temporary = directory.join(format!(".{file_name}.bak-{process}-{counter}.tmp"));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)
        {
            Ok(file) => return Ok((temporary, file)),
            Err(error) if error.kind() == ErrorKind::AlreadyExists => last_error = Some(error),
            Err(error) => return Err(error),
        }
    }
    Err(last_error.unwrap_or_else(|| io::Error::other("no free temporary file name")))
}

/// Flushes the directory so the renames survive a crash. A failure here leaves the backup in
/// place (only its durability is in doubt), so it is logged rather than reported.
fn sync_directory(directory: &Path) {
    if let Err(error) = File::open(directory).and_then(|handle| handle.sync_all()) {
        tracing::warn!(
            directory = %directory.display(),
            %error,
            "could not flush the directory after writing a configuration backup"
        );
    }
}
