//! The source itself: scanning the directory, and noticing that it changed.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::ffi::{OsStr, OsString};
use std::fs::Metadata;
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use mcpgw_discovery::files::candidates_from_yaml;
use mcpgw_discovery::{DiscoveredCandidate, DiscoverySource, SourceError};

/// How often [`FilesystemSource::changed`] looks at the directory when `watch_interval_ms` is
/// not set.
pub const DEFAULT_WATCH_INTERVAL: Duration = Duration::from_millis(1000);

/// The shortest poll interval a source accepts: below it, polling costs more than it saves.
pub const MIN_WATCH_INTERVAL: Duration = Duration::from_millis(100);

/// The longest poll interval a source accepts; the periodic scan covers slower needs.
pub const MAX_WATCH_INTERVAL: Duration = Duration::from_secs(3600);

/// The largest definitions file that is read (1 MiB); a larger one is a candidate whose reason
/// says so. Definitions are small; a huge file is a mistake, or an attempt to exhaust memory.
pub const MAX_FILE_SIZE: u64 = 1024 * 1024;

/// How long a scan may take before it answers an error: the registry must not wait on a
/// filesystem that stopped answering (a hung network mount).
pub const SCAN_TIMEOUT: Duration = Duration::from_secs(5);

/// A directory of YAML server definitions, read as a discovery source.
///
/// Each `*.yaml` or `*.yml` file directly in the directory is read with
/// [`candidates_from_yaml`]; hidden files (`.name`, which also covers editor locks such as
/// `.#name.yaml` and swap files such as `.name.yaml.swp`) and backups (`name.yaml~`) are
/// ignored, as is anything that is not a regular file. Files are read in the order of their
/// names, which decides which of two files defining the same server id wins.
pub struct FilesystemSource {
    directory: PathBuf,
    watch_interval: Duration,
    /// The directory as last scanned, or as last reported changed: `changed` completes only
    /// when the directory differs from it, so one change wakes the registry once.
    seen: Mutex<Option<Fingerprint>>,
}

impl FilesystemSource {
    /// A source reading `directory`, polled for changes every `watch_interval` (clamped to
    /// [`MIN_WATCH_INTERVAL`]..=[`MAX_WATCH_INTERVAL`]). Nothing is read until the first
    /// scan, so the directory may not exist yet.
    pub fn new(directory: impl Into<PathBuf>, watch_interval: Duration) -> Self {
        Self {
            directory: directory.into(),
            watch_interval: watch_interval.clamp(MIN_WATCH_INTERVAL, MAX_WATCH_INTERVAL),
            seen: Mutex::new(None),
        }
    }

    pub fn directory(&self) -> &Path {
        &self.directory
    }

    pub fn watch_interval(&self) -> Duration {
        self.watch_interval
    }

    fn remember(&self, fingerprint: Fingerprint) {
        *self.seen.lock().unwrap_or_else(PoisonError::into_inner) = Some(fingerprint);
    }
}

impl std::fmt::Debug for FilesystemSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilesystemSource")
            .field("directory", &self.directory)
            .field("watch_interval", &self.watch_interval)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl DiscoverySource for FilesystemSource {
    async fn scan(&self) -> Result<Vec<DiscoveredCandidate>, SourceError> {
        let directory = self.directory.clone();
        let scanning = tokio::task::spawn_blocking(move || scan_directory(&directory));
        let (result, fingerprint) = match tokio::time::timeout(SCAN_TIMEOUT, scanning).await {
            Ok(Ok(scanned)) => scanned,
            Ok(Err(failure)) => {
                return Err(SourceError(format!(
                    "scanning directory {} failed unexpectedly ({failure}); see the gateway's \
                     log and report it as a bug",
                    self.directory.display()
                )));
            }
            Err(_) => {
                return Err(SourceError(format!(
                    "reading directory {} took longer than {} s; check that its filesystem \
                     answers",
                    self.directory.display(),
                    SCAN_TIMEOUT.as_secs()
                )));
            }
        };
        self.remember(fingerprint);
        result
    }

    /// Polls the directory's fingerprint every interval and completes when it differs from
    /// the last scan's (or from the last change reported, so that one change is reported
    /// once). Before the first scan, any look at the directory counts as a change.
    async fn changed(&self) {
        loop {
            tokio::time::sleep(self.watch_interval).await;
            let directory = self.directory.clone();
            let Ok(now) = tokio::task::spawn_blocking(move || fingerprint(&directory)).await else {
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

/// What the directory looked like, cheaply: enough to tell that a definitions file appeared,
/// went away or was rewritten, without reading any.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fingerprint {
    /// The directory could not be listed, and why: it appearing (or its error changing) is a
    /// change.
    Unlisted(String),
    Listed(Vec<FileStamp>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    name: OsString,
    /// Absent when the file's metadata could not be read (a dangling symlink).
    size: Option<u64>,
    modified: Option<SystemTime>,
}

struct ListedFile {
    name: OsString,
    path: PathBuf,
    metadata: std::io::Result<Metadata>,
}

impl ListedFile {
    fn stamp(&self) -> FileStamp {
        let metadata = self.metadata.as_ref().ok();
        FileStamp {
            name: self.name.clone(),
            size: metadata.map(Metadata::len),
            modified: metadata.and_then(|metadata| metadata.modified().ok()),
        }
    }
}

fn fingerprint(directory: &Path) -> Fingerprint {
    match list_definition_files(directory) {
        Ok(files) => Fingerprint::Listed(files.iter().map(ListedFile::stamp).collect()),
        Err(error) => Fingerprint::Unlisted(error.0),
    }
}

/// Everything a scan answers, and the fingerprint of what it read. The fingerprint is taken
/// before the files are read, so a file written during the scan differs from it and is
/// scanned again.
fn scan_directory(
    directory: &Path,
) -> (Result<Vec<DiscoveredCandidate>, SourceError>, Fingerprint) {
    let files = match list_definition_files(directory) {
        Ok(files) => files,
        Err(error) => {
            let fingerprint = Fingerprint::Unlisted(error.0.clone());
            return (Err(error), fingerprint);
        }
    };
    let fingerprint = Fingerprint::Listed(files.iter().map(ListedFile::stamp).collect());

    let mut candidates = Vec::new();
    let mut defined_in: HashMap<String, String> = HashMap::new();
    for file in &files {
        let location = format!("file {}", file.path.display());
        let stem = file_stem(&file.name);
        let found = match read_definitions(file, &location) {
            Ok(text) => candidates_from_yaml(&location, &stem, &text),
            Err(reason) => vec![DiscoveredCandidate {
                name: stem,
                location,
                definition: Err(reason),
            }],
        };
        for mut candidate in found {
            match defined_in.entry(candidate.name.clone()) {
                Entry::Occupied(first) => {
                    candidate.definition = Err(format!(
                        "`{}` in {} is already defined in {}, which is read first; remove or \
                         rename one of the two",
                        candidate.name,
                        candidate.location,
                        first.get()
                    ));
                }
                Entry::Vacant(slot) => {
                    slot.insert(candidate.location.clone());
                }
            }
            candidates.push(candidate);
        }
    }
    (Ok(candidates), fingerprint)
}

/// The definitions files of `directory`, sorted by name, each with its metadata (or why it has
/// none).
fn list_definition_files(directory: &Path) -> Result<Vec<ListedFile>, SourceError> {
    let shown = directory.display();
    let unreadable = |error: std::io::Error| {
        SourceError(match error.kind() {
            ErrorKind::NotFound => format!(
                "directory {shown} does not exist; create it, or set config.path of this source \
                 to the directory that holds the server definitions"
            ),
            ErrorKind::NotADirectory => format!(
                "{shown} is not a directory; set config.path of this source to a directory of \
                 YAML server definitions"
            ),
            ErrorKind::PermissionDenied => format!(
                "cannot read directory {shown}: permission denied; let the gateway's user read \
                 and enter it"
            ),
            _ => format!("cannot read directory {shown}: {error}; check that it is readable"),
        })
    };
    let metadata = std::fs::metadata(directory).map_err(unreadable)?;
    if !metadata.is_dir() {
        return Err(unreadable(std::io::Error::from(ErrorKind::NotADirectory)));
    }

    let mut files = Vec::new();
    for entry in std::fs::read_dir(directory).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        let name = entry.file_name();
        if !is_definitions_file_name(&name) {
            continue;
        }
        let path = entry.path();
        // Follows symlinks: a link to a definitions file is one; a dangling link is reported.
        let metadata = std::fs::metadata(&path);
        if let Ok(metadata) = &metadata
            && !metadata.is_file()
        {
            tracing::debug!(path = %path.display(), "not a regular file, not read as definitions");
            continue;
        }
        files.push(ListedFile {
            name,
            path,
            metadata,
        });
    }
    files.sort_by(|left, right| left.name.cmp(&right.name));
    Ok(files)
}

/// `*.yaml` and `*.yml`, without hidden files and editor leftovers.
fn is_definitions_file_name(name: &OsStr) -> bool {
    let name = name.to_string_lossy();
    if name.starts_with('.') || name.ends_with('~') {
        return false;
    }
    match name.rsplit_once('.') {
        Some((stem, extension)) => {
            !stem.is_empty()
                && (extension.eq_ignore_ascii_case("yaml") || extension.eq_ignore_ascii_case("yml"))
        }
        None => false,
    }
}

fn file_stem(name: &OsStr) -> String {
    let name = name.to_string_lossy();
    match name.rsplit_once('.') {
        Some((stem, _)) => stem.to_owned(),
        None => name.into_owned(),
    }
}

/// The text of a definitions file, or why it cannot be read (the candidate's reason).
fn read_definitions(file: &ListedFile, location: &str) -> Result<String, String> {
    let cannot_read = |error: &std::io::Error| match error.kind() {
        ErrorKind::PermissionDenied => {
            format!("cannot read {location}: permission denied; let the gateway's user read it")
        }
        ErrorKind::NotFound => format!(
            "cannot read {location}: it does not exist (a dangling symlink, or removed while \
             being read); fix or remove it"
        ),
        _ => format!("cannot read {location}: {error}; check that it is a readable file"),
    };
    let too_large = |size: u64| {
        format!(
            "{location} has {size} bytes, more than the {MAX_FILE_SIZE} a definitions file may \
             have; split it into several files"
        )
    };
    let metadata = file.metadata.as_ref().map_err(cannot_read)?;
    if metadata.len() > MAX_FILE_SIZE {
        return Err(too_large(metadata.len()));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(&file.path)
        .and_then(|opened| opened.take(MAX_FILE_SIZE + 1).read_to_end(&mut bytes))
        .map_err(|error| cannot_read(&error))?;
    // It may have grown since it was listed.
    if bytes.len() as u64 > MAX_FILE_SIZE {
        return Err(too_large(bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|error| {
        format!(
            "{location} is not UTF-8 text (invalid bytes after byte {}); save it as UTF-8",
            error.utf8_error().valid_up_to()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_files_are_yaml_files_that_are_not_hidden_or_backups() {
        for name in ["a.yaml", "a.yml", "b.c.yaml", "UPPER.YAML", "x.Yml"] {
            assert!(is_definitions_file_name(OsStr::new(name)), "{name}");
        }
        for name in [
            ".a.yaml",
            ".#a.yaml",
            "a.yaml~",
            "a.yaml.swp",
            ".a.yaml.swp",
            "#a.yaml#",
            "a.json",
            "yaml",
            ".yaml",
            "a.yaml.bak",
            "4913",
        ] {
            assert!(!is_definitions_file_name(OsStr::new(name)), "{name}");
        }
    }

    #[test]
    fn the_stem_drops_only_the_last_extension() {
        assert_eq!(file_stem(OsStr::new("math.yaml")), "math");
        assert_eq!(file_stem(OsStr::new("a.b.yml")), "a.b");
    }

    #[test]
    fn the_interval_is_clamped_to_its_bounds() {
        assert_eq!(
            FilesystemSource::new("/d", Duration::from_millis(1)).watch_interval(),
            MIN_WATCH_INTERVAL
        );
        assert_eq!(
            FilesystemSource::new("/d", Duration::from_secs(86_400)).watch_interval(),
            MAX_WATCH_INTERVAL
        );
        assert_eq!(
            FilesystemSource::new("/d", Duration::from_millis(250)).watch_interval(),
            Duration::from_millis(250)
        );
    }
}
