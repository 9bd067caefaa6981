//! [`JsonLinesFileSink`]: audit records as JSON lines in a file.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use mcpgw_core::audit::{AuditRecord, AuditSink, AuditSinkError};

/// Appends each record as one line of JSON to a file.
///
/// - The file is made with mode 0600 when missing (an existing file keeps its mode); its
///   directory must exist.
/// - Each batch is written with one write of whole lines, straight to the kernel;
///   [`flush`](AuditSink::flush) syncs the file to the disk.
/// - Before each batch the file at the path is compared with the open one (device and inode):
///   when it was moved away or removed, a new file is made at the path and written from then
///   on, so a rotation loses nothing and needs no signal.
pub struct JsonLinesFileSink {
    name: String,
    path: PathBuf,
    open: Arc<Mutex<OpenFile>>,
}

struct OpenFile {
    file: File,
    device: u64,
    inode: u64,
}

impl std::fmt::Debug for JsonLinesFileSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonLinesFileSink")
            .field("name", &self.name)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl JsonLinesFileSink {
    /// Opens (or makes) the file at `path` for appending. Its directory must exist; an error
    /// says what is wrong with the path. The sink is named `file`.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, AuditSinkError> {
        let path = path.into();
        if let Some(directory) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            match std::fs::metadata(directory) {
                Ok(metadata) if metadata.is_dir() => {}
                Ok(_) => {
                    return Err(AuditSinkError::Invalid(format!(
                        "cannot write the audit file {}: {} is not a directory",
                        path.display(),
                        directory.display()
                    )));
                }
                Err(error) => {
                    return Err(AuditSinkError::Invalid(format!(
                        "cannot write the audit file {}: its directory {} cannot be read ({error}); \
                         make the directory first",
                        path.display(),
                        directory.display()
                    )));
                }
            }
        }
        if path.is_dir() {
            return Err(AuditSinkError::Invalid(format!(
                "cannot write the audit file {}: it is a directory; name a file in it",
                path.display()
            )));
        }
        let open = open_file(&path).map_err(|error| match error {
            AuditSinkError::Unavailable(message) => AuditSinkError::Invalid(message),
            other => other,
        })?;
        Ok(Self {
            name: "file".to_owned(),
            path,
            open: Arc::new(Mutex::new(open)),
        })
    }

    /// The same sink under another name (in metrics and logs).
    #[must_use]
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The file the records go to.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn open_file(path: &Path) -> Result<OpenFile, AuditSinkError> {
    let cannot = |error: std::io::Error| {
        AuditSinkError::Unavailable(format!(
            "cannot open the audit file {} for appending: {error}",
            path.display()
        ))
    };
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(cannot)?;
    let metadata = file.metadata().map_err(cannot)?;
    Ok(OpenFile {
        file,
        device: metadata.dev(),
        inode: metadata.ino(),
    })
}

/// The open file, made again at `path` when the file there is not the open one any more.
fn current<'a>(path: &Path, open: &'a mut OpenFile) -> Result<&'a mut OpenFile, AuditSinkError> {
    let same = std::fs::metadata(path)
        .map(|metadata| metadata.dev() == open.device && metadata.ino() == open.inode)
        .unwrap_or(false);
    if !same {
        *open = open_file(path)?;
        tracing::info!(path = %path.display(), "the audit file was moved or removed; writing a new one");
    }
    Ok(open)
}

#[async_trait]
impl AuditSink for JsonLinesFileSink {
    fn name(&self) -> &str {
        &self.name
    }

    async fn write(&self, records: &[AuditRecord]) -> Result<(), AuditSinkError> {
        if records.is_empty() {
            return Ok(());
        }
        let mut lines = String::new();
        for record in records {
            lines.push_str(&record.to_json_line());
            lines.push('\n');
        }
        let path = self.path.clone();
        let open = self.open.clone();
        tokio::task::spawn_blocking(move || {
            let mut open = open.lock().unwrap_or_else(PoisonError::into_inner);
            let open = current(&path, &mut open)?;
            open.file
                .write_all(lines.as_bytes())
                .and_then(|()| open.file.flush())
                .map_err(|error| {
                    AuditSinkError::Unavailable(format!(
                        "cannot append to the audit file {}: {error}",
                        path.display()
                    ))
                })
        })
        .await
        .map_err(|error| {
            AuditSinkError::Unavailable(format!("the audit file write did not finish: {error}"))
        })?
    }

    async fn flush(&self) -> Result<(), AuditSinkError> {
        let path = self.path.clone();
        let open = self.open.clone();
        tokio::task::spawn_blocking(move || {
            let open = open.lock().unwrap_or_else(PoisonError::into_inner);
            open.file.sync_data().map_err(|error| {
                AuditSinkError::Unavailable(format!(
                    "cannot sync the audit file {}: {error}",
                    path.display()
                ))
            })
        })
        .await
        .map_err(|error| {
            AuditSinkError::Unavailable(format!("the audit file sync did not finish: {error}"))
        })?
    }
}
