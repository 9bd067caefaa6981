//! The SQLite store against the repository contract, plus what only a file-backed store can get
//! wrong: surviving a reopen, refusing files it cannot use, and many writers at once.

use std::sync::Arc;

use mcpgw_core::{ErrorKind, RepositoryError, ServerRepository, ServerSpec};
use mcpgw_store_sqlite::{SqliteStore, StoreError};
use mcpgw_testkit::repository_suite::{
    RepositoryWithGuard, sample_docker_spec, sample_remote_spec, sample_subprocess_spec,
};
use tempfile::TempDir;

/// A store on a new file in a new temporary directory, which lives as long as the store.
fn open_temporary_store() -> RepositoryWithGuard<SqliteStore, TempDir> {
    let directory = tempfile::tempdir().expect("a temporary directory can be created");
    let store = SqliteStore::open(&directory.path().join("data").join("mcpgw.sqlite3"))
        .unwrap_or_else(|error| panic!("opening a new store failed: {error}"));
    RepositoryWithGuard::new(store, directory)
}

mod contract {
    use super::open_temporary_store;

    mcpgw_testkit::server_repository_contract_suite!(open_temporary_store());
}

async fn load_sorted(store: &SqliteStore) -> Vec<ServerSpec> {
    let mut specs = store.load_all().await.expect("load_all succeeds");
    specs.sort_by(|left, right| left.id.cmp(&right.id));
    specs
}

#[tokio::test]
async fn saved_servers_survive_closing_and_reopening_the_file() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory
        .path()
        .join("nested")
        .join("deeper")
        .join("mcpgw.sqlite3");
    let deleted = sample_remote_spec("deleted");
    let specs = vec![sample_docker_spec("box"), sample_subprocess_spec("math")];
    {
        let store = SqliteStore::open(&path).unwrap();
        for spec in specs.iter().chain([&deleted]) {
            store.save(spec).await.unwrap();
        }
        store.delete(&deleted.id).await.unwrap();
    }
    assert!(
        path.is_file(),
        "the database file was not created at {}",
        path.display()
    );

    let reopened = SqliteStore::open(&path).unwrap();
    assert_eq!(load_sorted(&reopened).await, specs);
    // Reopening ran no migration twice: the schema is still usable for writes.
    reopened.save(&sample_remote_spec("web")).await.unwrap();
    assert_eq!(load_sorted(&reopened).await.len(), 3);
}

#[test]
fn a_file_that_is_not_a_database_is_refused_with_a_clear_error() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("mcpgw.sqlite3");
    let garbage = "this is a text file, not an sqlite database\n".repeat(200);
    std::fs::write(&path, &garbage).unwrap();

    let error = SqliteStore::open(&path).unwrap_err();
    assert!(
        matches!(error, StoreError::NotADatabase { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("mcpgw.sqlite3"),
        "the message names the file: {message}"
    );
    assert!(message.contains("not an sqlite database"), "{message}");
    // The file is left as it was: the store never overwrites what it does not understand.
    assert_eq!(std::fs::read_to_string(&path).unwrap(), garbage);
}

#[test]
fn a_truncated_database_is_refused_as_damaged_naming_the_file() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("mcpgw.db");
    drop(SqliteStore::open(&path).unwrap());
    let whole = std::fs::read(&path).unwrap();
    assert!(whole.len() > 4096, "the schema fills more than one page");
    // The first page alone: the header and the schema survive, every table's pages are gone.
    let cut = whole[..4096].to_vec();
    std::fs::write(&path, &cut).unwrap();

    let error = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(error, StoreError::Damaged { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("mcpgw.db"), "{message}");
    assert!(message.contains("restore it from a backup"), "{message}");
    let left = std::fs::read(&path).unwrap();
    assert_eq!(left, cut, "the file is left as it was");
}

#[test]
fn a_data_directory_that_cannot_be_created_is_refused_with_a_clear_error() {
    let directory = tempfile::tempdir().unwrap();
    // A regular file where a directory should be: not even root can create a directory in it.
    let regular_file = directory.path().join("occupied");
    std::fs::write(&regular_file, "").unwrap();
    let path = regular_file.join("data").join("mcpgw.sqlite3");

    let error = SqliteStore::open(&path).unwrap_err();
    assert!(
        matches!(error, StoreError::CreateDirectory { .. }),
        "{error:?}"
    );
    assert_eq!(error.kind(), ErrorKind::Unavailable);
    assert!(
        error.to_string().contains("occupied"),
        "the message names the path: {error}"
    );
}

#[test]
fn a_database_path_that_is_a_directory_is_refused_with_a_clear_error() {
    let directory = tempfile::tempdir().unwrap();
    let error = SqliteStore::open(directory.path()).unwrap_err();
    assert!(matches!(error, StoreError::Open { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .contains(&directory.path().display().to_string()),
        "{error}"
    );
}

#[test]
fn store_errors_reach_the_port_with_their_message() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("garbage");
    std::fs::write(&path, "x".repeat(4096)).unwrap();
    let store_error = SqliteStore::open(&path).unwrap_err();
    let message = store_error.to_string();
    let repository_error = RepositoryError::from(store_error);
    assert_eq!(repository_error.to_string(), message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_saves_from_many_tasks_all_land() {
    let directory = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&directory.path().join("mcpgw.sqlite3")).unwrap());
    let tasks: Vec<_> = (0..64)
        .map(|index| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let spec = match index % 3 {
                    0 => sample_subprocess_spec(&format!("task-{index:02}")),
                    1 => sample_docker_spec(&format!("task-{index:02}")),
                    _ => sample_remote_spec(&format!("task-{index:02}")),
                };
                store.save(&spec).await.map(|()| spec)
            })
        })
        .collect();
    let mut saved = Vec::new();
    for task in tasks {
        saved.push(
            task.await
                .expect("the task did not panic")
                .expect("the save succeeded"),
        );
    }
    saved.sort_by(|left, right| left.id.cmp(&right.id));

    // A second handle on the same file (another gateway process) sees every row.
    let reopened = SqliteStore::open(store.path()).unwrap();
    assert_eq!(load_sorted(&reopened).await, saved);
}

#[tokio::test]
async fn two_stores_on_one_file_see_each_others_writes() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("mcpgw.sqlite3");
    let first = SqliteStore::open(&path).unwrap();
    let second = SqliteStore::open(&path).unwrap();
    first.save(&sample_subprocess_spec("math")).await.unwrap();
    second.save(&sample_remote_spec("web")).await.unwrap();
    assert_eq!(load_sorted(&first).await, load_sorted(&second).await);
    assert_eq!(load_sorted(&first).await.len(), 2);
}

#[test]
fn the_schema_version_is_recorded_in_the_file() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("mcpgw.sqlite3");
    drop(SqliteStore::open(&path).unwrap());
    let version = user_version_in_header(&path);
    assert_eq!(version, SqliteStore::schema_version());
    assert!(SqliteStore::schema_version() >= 1);
}

/// Reads `PRAGMA user_version` from the SQLite header without a second SQLite binding: it is the
/// big-endian u32 at byte offset 60 of the file (after a checkpoint, which closing performs).
fn user_version_in_header(path: &std::path::Path) -> u32 {
    let bytes = std::fs::read(path).unwrap();
    assert!(
        bytes.starts_with(b"SQLite format 3\0"),
        "not an sqlite file"
    );
    u32::from_be_bytes(bytes[60..64].try_into().unwrap())
}
