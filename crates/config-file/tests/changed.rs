//! Noticing changes: once per change, never in a loop, a missing file being a state.

use std::fs::File;
use std::path::Path;
use std::time::Duration;

use mcpgw_config::ConfigFile;
use mcpgw_config_file::FileConfig;

const INTERVAL: Duration = Duration::from_millis(100);
/// Long enough for several polls: a change is seen within one.
const NOTICED_WITHIN: Duration = Duration::from_secs(5);
/// Five polls: a spurious completion would happen at the first.
const QUIET_FOR: Duration = Duration::from_millis(600);

async fn completes_within(file: &FileConfig, wait: Duration) -> bool {
    tokio::time::timeout(wait, file.changed()).await.is_ok()
}

fn watched(path: &Path) -> FileConfig {
    FileConfig::new(path).with_watch_interval(INTERVAL)
}

#[tokio::test]
async fn a_write_after_read_completes_once() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("gateway.yaml");
    std::fs::write(&path, "version: 1\n").unwrap();
    let file = watched(&path);
    file.read().await.unwrap();

    assert!(
        !completes_within(&file, QUIET_FOR).await,
        "completed without a write"
    );

    std::fs::write(&path, "version: 22\n").unwrap();
    assert!(
        completes_within(&file, NOTICED_WITHIN).await,
        "a write was not noticed"
    );
    assert!(
        !completes_within(&file, QUIET_FOR).await,
        "one write completed twice"
    );

    std::fs::write(&path, "version: 333\n").unwrap();
    assert!(
        completes_within(&file, NOTICED_WITHIN).await,
        "a second write was not noticed"
    );
    assert!(
        !completes_within(&file, QUIET_FOR).await,
        "the second write completed twice"
    );
}

#[tokio::test]
async fn a_write_between_read_and_watching_is_noticed() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("gateway.yaml");
    std::fs::write(&path, "version: 1\n").unwrap();
    let file = watched(&path);
    file.read().await.unwrap();

    std::fs::write(&path, "version: 22\n").unwrap();

    assert!(completes_within(&file, NOTICED_WITHIN).await);
}

#[tokio::test]
async fn reading_the_new_content_after_a_write_settles_the_change() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("gateway.yaml");
    std::fs::write(&path, "version: 1\n").unwrap();
    let file = watched(&path);
    file.read().await.unwrap();

    std::fs::write(&path, "version: 22\n").unwrap();
    assert_eq!(file.read().await.unwrap(), "version: 22\n");

    assert!(
        !completes_within(&file, QUIET_FOR).await,
        "the change was already read"
    );
}

#[tokio::test]
async fn a_same_size_rewrite_with_the_same_modification_time_is_noticed() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("gateway.yaml");
    std::fs::write(&path, "version: 1\n").unwrap();
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    let file = watched(&path);
    file.read().await.unwrap();

    // What a filesystem with whole-second times shows for two quick writes.
    std::fs::write(&path, "version: 2\n").unwrap();
    File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(modified)
        .unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().modified().unwrap(),
        modified
    );

    assert!(completes_within(&file, NOTICED_WITHIN).await);
}

#[tokio::test]
async fn a_file_that_disappears_and_returns_is_two_changes_each_once() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("gateway.yaml");
    std::fs::write(&path, "version: 1\n").unwrap();
    let file = watched(&path);
    file.read().await.unwrap();

    std::fs::remove_file(&path).unwrap();
    assert!(
        completes_within(&file, NOTICED_WITHIN).await,
        "the removal was not noticed"
    );
    assert!(
        !completes_within(&file, QUIET_FOR).await,
        "a missing file completed twice"
    );

    std::fs::write(&path, "version: 1\n").unwrap();
    assert!(
        completes_within(&file, NOTICED_WITHIN).await,
        "the return was not noticed"
    );
    assert!(
        !completes_within(&file, QUIET_FOR).await,
        "the return completed twice"
    );
}

#[tokio::test]
async fn a_file_missing_at_read_that_appears_is_noticed() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("gateway.yaml");
    let file = watched(&path);
    file.read().await.unwrap_err();

    std::fs::write(&path, "version: 1\n").unwrap();

    assert!(completes_within(&file, NOTICED_WITHIN).await);
}

#[tokio::test]
async fn watching_before_any_read_starts_from_the_file_as_it_is() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("gateway.yaml");
    std::fs::write(&path, "version: 1\n").unwrap();
    let file = watched(&path);

    assert!(
        !completes_within(&file, QUIET_FOR).await,
        "completed without a write"
    );

    std::fs::write(&path, "version: 22\n").unwrap();
    assert!(completes_within(&file, NOTICED_WITHIN).await);
}

#[tokio::test]
async fn a_backup_is_not_a_change_of_the_file() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("gateway.yaml");
    std::fs::write(&path, "version: 1\n").unwrap();
    let file = watched(&path);
    file.read().await.unwrap();

    file.backup(5).await.unwrap();

    assert!(!completes_within(&file, QUIET_FOR).await);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "version: 1\n");
}
