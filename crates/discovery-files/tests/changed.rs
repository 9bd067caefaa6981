//! `changed` against a real directory: it completes once after a change and stays pending
//! while nothing changes. Waits are real but short (a 100 ms poll interval) and bounded.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use mcpgw_discovery::DiscoverySource;
use mcpgw_discovery_files::FilesystemSource;

const POLL: Duration = Duration::from_millis(100);
/// Long enough for several polls: a source that wrongly reports a change has by then.
const QUIET: Duration = Duration::from_millis(600);
/// Generous, for a loaded machine; a working source answers within about one poll.
const PATIENCE: Duration = Duration::from_secs(5);

async fn completes_within(source: &FilesystemSource, wait: Duration) -> bool {
    tokio::time::timeout(wait, source.changed()).await.is_ok()
}

async fn scanned(directory: &Path) -> FilesystemSource {
    let source = FilesystemSource::new(directory, POLL);
    source.scan().await.expect("the directory can be scanned");
    source
}

fn write(directory: &Path, name: &str, text: &str) {
    std::fs::write(directory.join(name), text).expect("write a file");
}

#[tokio::test]
async fn nothing_changed_means_changed_stays_pending() {
    let directory = tempfile::tempdir().expect("a temp directory");
    write(directory.path(), "a.yaml", "mode: subprocess\n");
    let source = scanned(directory.path()).await;

    assert!(!completes_within(&source, QUIET).await);
}

#[tokio::test]
async fn a_file_written_while_waiting_completes_changed_once() {
    let directory = tempfile::tempdir().expect("a temp directory");
    let source = Arc::new(scanned(directory.path()).await);
    let waiting = tokio::spawn({
        let source = Arc::clone(&source);
        async move { source.changed().await }
    });
    tokio::time::sleep(3 * POLL).await;
    assert!(
        !waiting.is_finished(),
        "changed completed before anything changed"
    );

    write(directory.path(), "new.yaml", "mode: subprocess\n");

    tokio::time::timeout(PATIENCE, waiting)
        .await
        .expect("changed completes after a file is written")
        .expect("the waiting task ends normally");
    // The same change is not reported again, whether or not a scan followed.
    assert!(!completes_within(&source, QUIET).await);
    source.scan().await.expect("the directory can be scanned");
    assert!(!completes_within(&source, QUIET).await);
}

#[tokio::test]
async fn a_file_written_between_scans_completes_changed() {
    let directory = tempfile::tempdir().expect("a temp directory");
    let source = scanned(directory.path()).await;

    write(directory.path(), "a.yml", "mode: subprocess\n");

    assert!(completes_within(&source, PATIENCE).await);
}

#[tokio::test]
async fn a_removed_file_completes_changed() {
    let directory = tempfile::tempdir().expect("a temp directory");
    write(directory.path(), "a.yaml", "mode: subprocess\n");
    let source = scanned(directory.path()).await;

    std::fs::remove_file(directory.path().join("a.yaml")).expect("remove the file");

    assert!(completes_within(&source, PATIENCE).await);
}

#[tokio::test]
async fn a_rewrite_of_the_same_size_completes_changed() {
    let directory = tempfile::tempdir().expect("a temp directory");
    let path = directory.path().join("a.yaml");
    write(directory.path(), "a.yaml", "mode: subprocess\n");
    let source = scanned(directory.path()).await;

    // Same size; the modification time alone tells. Set explicitly, so that a coarse
    // filesystem clock cannot hide the rewrite.
    write(directory.path(), "a.yaml", "mode: subprocesS\n");
    let file = std::fs::File::options()
        .write(true)
        .open(&path)
        .expect("open the file");
    file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000))
        .expect("set the modification time");
    drop(file);

    assert!(completes_within(&source, PATIENCE).await);
}

#[tokio::test]
async fn files_that_are_not_definitions_do_not_complete_changed() {
    let directory = tempfile::tempdir().expect("a temp directory");
    write(directory.path(), "a.yaml", "mode: subprocess\n");
    let source = scanned(directory.path()).await;

    for ignored in [".a.yaml.swp", "a.yaml~", ".hidden.yaml", "notes.txt"] {
        write(directory.path(), ignored, "scratch");
    }

    assert!(!completes_within(&source, QUIET).await);
}

#[tokio::test]
async fn a_directory_that_appears_completes_changed() {
    let parent = tempfile::tempdir().expect("a temp directory");
    let dir = parent.path().join("later");
    let source = FilesystemSource::new(&dir, POLL);
    source.scan().await.expect_err("the directory is missing");
    assert!(!completes_within(&source, QUIET).await);

    std::fs::create_dir(&dir).expect("create the directory");

    assert!(completes_within(&source, PATIENCE).await);
}
