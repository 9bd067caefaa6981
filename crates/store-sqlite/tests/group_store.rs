//! The SQLite store against the `GroupRepository` contract suite of the test kit, plus what only
//! a file can get wrong: surviving a reopen, sharing the file with the servers' table,
//! concurrent writers, rows it cannot read.

use std::sync::Arc;

use mcpgw_core::{ServerId, ServerRepository};
use mcpgw_groups::GroupRepository;
use mcpgw_store_sqlite::SqliteStore;
use mcpgw_testkit::group_repository_suite::sample_group;
use mcpgw_testkit::repository_suite::sample_subprocess_spec;
use tempfile::TempDir;

fn id(raw: &str) -> ServerId {
    ServerId::parse(raw).unwrap()
}

fn open_temporary_store() -> (SqliteStore, TempDir) {
    let directory = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&directory.path().join("mcpgw.sqlite3")).unwrap();
    (store, directory)
}

mod contract {
    use mcpgw_testkit::repository_suite::RepositoryWithGuard;

    mcpgw_testkit::group_repository_contract_suite!({
        let (store, directory) = super::open_temporary_store();
        RepositoryWithGuard::new(store, directory)
    });
}

// ----- what a file adds ---------------------------------------------------------------------

#[tokio::test]
async fn saved_groups_survive_closing_and_reopening_the_file() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("mcpgw.sqlite3");
    {
        let store = SqliteStore::open(&path).unwrap();
        GroupRepository::save(&store, &sample_group("pool"))
            .await
            .unwrap();
        GroupRepository::save(&store, &sample_group("gone"))
            .await
            .unwrap();
        GroupRepository::delete(&store, &id("gone")).await.unwrap();
    }
    let reopened = SqliteStore::open(&path).unwrap();
    assert_eq!(
        GroupRepository::load_all(&reopened).await.unwrap(),
        [sample_group("pool")]
    );
}

#[tokio::test]
async fn groups_and_servers_share_the_file_without_seeing_each_other() {
    let (store, _directory) = open_temporary_store();
    // The same id in both tables: the namespaces are one in the gateway, but the store keeps
    // what it is given and must not confuse the tables.
    ServerRepository::save(&store, &sample_subprocess_spec("same"))
        .await
        .unwrap();
    GroupRepository::save(&store, &sample_group("same"))
        .await
        .unwrap();
    GroupRepository::delete(&store, &id("same")).await.unwrap();
    assert_eq!(GroupRepository::load_all(&store).await.unwrap(), []);
    assert_eq!(ServerRepository::load_all(&store).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_saves_from_many_tasks_all_land() {
    let (store, _directory) = open_temporary_store();
    let store = Arc::new(store);
    let tasks: Vec<_> = (0..32)
        .map(|index| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let spec = sample_group(&format!("group-{index:02}"));
                GroupRepository::save(&*store, &spec).await.map(|()| spec)
            })
        })
        .collect();
    let mut saved = Vec::new();
    for task in tasks {
        saved.push(task.await.unwrap().unwrap());
    }
    saved.sort_by(|left, right| left.id.cmp(&right.id));
    assert_eq!(GroupRepository::load_all(&*store).await.unwrap(), saved);
}

#[tokio::test]
async fn a_row_the_store_cannot_read_fails_the_load_with_its_key() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("mcpgw.sqlite3");
    let store = SqliteStore::open(&path).unwrap();
    GroupRepository::save(&store, &sample_group("fine"))
        .await
        .unwrap();
    // Someone edited the file by hand and wrote a strategy this gateway does not know.
    let connection = rusqlite::Connection::open(&path).unwrap();
    connection
        .execute(
            "INSERT INTO groups (id, strategy, definition, created_at, updated_at)
             VALUES ('broken', 'fastest', '{\"strategy\": \"fastest\", \"min_healthy\": 1}', 'x', 'x')",
            [],
        )
        .unwrap();
    drop(connection);
    let error = GroupRepository::load_all(&store).await.unwrap_err();
    let message = error.to_string();
    assert!(message.contains("`broken`"), "{message}");
    assert!(message.contains("groups"), "{message}");
}
