//! The JSON lines file sink on real files in a temporary directory: the port's contract,
//! permissions, appending, rotation by moving or removing the file, and bad paths.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mcpgw_audit::JsonLinesFileSink;
use mcpgw_core::audit::{AuditSink as _, AuditSinkError};
use mcpgw_testkit::audit_sink_suite::{AuditDestination, sample_records};
use serde_json::Value;

/// The file the sink writes, read back line by line.
struct FileDestination {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is one JSON object"))
        .collect()
}

#[async_trait]
impl AuditDestination for FileDestination {
    async fn received(&self, expected: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let found = lines(&self.path);
            if found.len() >= expected || Instant::now() > deadline {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

fn sink_and_file() -> (JsonLinesFileSink, FileDestination) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let sink = JsonLinesFileSink::open(&path).unwrap();
    (sink, FileDestination { _dir: dir, path })
}

mcpgw_testkit::audit_sink_contract_suite!(sink_and_file());

fn key_ids(path: &Path) -> Vec<String> {
    lines(path)
        .iter()
        .map(|line| line["event"]["key_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_new_file_is_readable_by_its_owner_alone_and_an_old_one_is_appended_to() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let sink = JsonLinesFileSink::open(&path).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}");
    sink.write(&sample_records("a", 1, 2)).await.unwrap();
    drop(sink);
    // Opened again: what was there stays.
    let sink = JsonLinesFileSink::open(&path).unwrap().with_name("trail");
    assert_eq!(sink.name(), "trail");
    sink.write(&sample_records("b", 3, 1)).await.unwrap();
    assert_eq!(key_ids(&path), ["a0", "a1", "b0"]);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with('\n'), "every record ends its line");
    assert_eq!(text.lines().count(), 3);
}

#[tokio::test]
async fn a_moved_or_removed_file_is_made_again_at_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let rotated = dir.path().join("audit.jsonl.1");
    let sink = JsonLinesFileSink::open(&path).unwrap();
    sink.write(&sample_records("before", 1, 2)).await.unwrap();

    // What log rotation does: move the file away, and expect the writer to start a new one.
    std::fs::rename(&path, &rotated).unwrap();
    sink.write(&sample_records("after", 3, 1)).await.unwrap();
    assert_eq!(key_ids(&rotated), ["before0", "before1"]);
    assert_eq!(key_ids(&path), ["after0"]);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the new file too: {mode:o}");

    // Removed outright: made again as well.
    std::fs::remove_file(&path).unwrap();
    sink.write(&sample_records("again", 4, 1)).await.unwrap();
    assert_eq!(key_ids(&path), ["again0"]);
    sink.flush().await.unwrap();
}

#[tokio::test]
async fn bad_paths_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    // Bad input: a file in a directory that does not exist.
    let missing = dir.path().join("no-such-dir").join("audit.jsonl");
    let error = JsonLinesFileSink::open(&missing).unwrap_err();
    assert!(matches!(error, AuditSinkError::Invalid(_)), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("no-such-dir"), "{message}");
    assert!(message.contains("make the directory first"), "{message}");
    // Bad input: a directory where the file should be.
    let error = JsonLinesFileSink::open(dir.path()).unwrap_err();
    assert!(error.to_string().contains("is a directory"), "{error}");
    // Bad input: a "directory" that is a file.
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "x").unwrap();
    let error = JsonLinesFileSink::open(plain.join("audit.jsonl")).unwrap_err();
    assert!(error.to_string().contains("is not a directory"), "{error}");
}

#[tokio::test]
async fn a_file_that_cannot_be_made_again_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let inner = dir.path().join("logs");
    std::fs::create_dir(&inner).unwrap();
    let path = inner.join("audit.jsonl");
    let sink = JsonLinesFileSink::open(&path).unwrap();
    // Bad input: the file and its whole directory are removed under the sink.
    std::fs::remove_dir_all(&inner).unwrap();
    let error = sink.write(&sample_records("k", 1, 1)).await.unwrap_err();
    assert!(error.is_retryable(), "{error:?}");
    assert!(error.to_string().contains("audit.jsonl"), "{error}");
    // Once the directory is back, writing goes on.
    std::fs::create_dir(&inner).unwrap();
    sink.write(&sample_records("k", 2, 1)).await.unwrap();
    assert_eq!(key_ids(&path), ["k0"]);
}
