//! The SQLite tool list store against the `ToolListStore` contract (the test kit's suite, on a
//! real file in a temporary directory), plus what only a file can get wrong: lists surviving a
//! reopen, sharing the file with the other stores, and rows it cannot read.

use std::path::{Path, PathBuf};

use mcpgw_core::{ServerId, ServerRepository, ToolListStore};
use mcpgw_store_sqlite::{SqliteStore, SqliteToolListStore};
use mcpgw_testkit::repository_suite::{RepositoryWithGuard, sample_subprocess_spec};
use mcpgw_testkit::tool_list_store_suite::{SAMPLE_LEARNED_AT, sample_tool_list, small_tool_list};
use tempfile::TempDir;

fn database_path(directory: &TempDir) -> PathBuf {
    directory.path().join("data").join("mcpgw.db")
}

fn open_temporary_store() -> RepositoryWithGuard<SqliteToolListStore, TempDir> {
    let directory = tempfile::tempdir().unwrap();
    let store = SqliteToolListStore::open(&database_path(&directory)).unwrap();
    RepositoryWithGuard::new(store, directory)
}

mod contract {
    mcpgw_testkit::tool_list_store_contract_suite!(super::open_temporary_store());
}

fn id(raw: &str) -> ServerId {
    ServerId::parse(raw).unwrap()
}

/// Writes to the file through a connection of its own, as an operator with the sqlite shell
/// (or a damaged disk) would.
fn execute_behind_the_store(path: &Path, sql: &str) {
    rusqlite::Connection::open(path)
        .unwrap()
        .execute_batch(sql)
        .unwrap();
}

#[tokio::test]
async fn the_lists_survive_closing_and_reopening_the_file() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(&directory);
    {
        let store = SqliteToolListStore::open(&path).unwrap();
        store
            .save_tool_lists(&[
                sample_tool_list("math"),
                small_tool_list("gone"),
                small_tool_list("web"),
            ])
            .await
            .unwrap();
        store.delete_tool_lists(&[id("gone")]).await.unwrap();
    }
    let reopened = SqliteToolListStore::open(&path).unwrap();
    assert_eq!(
        reopened.load_tool_lists().await.unwrap(),
        [sample_tool_list("math"), small_tool_list("web")]
    );
}

#[tokio::test]
async fn the_tool_lists_share_the_gateway_store_and_its_file() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(&directory);
    let store = SqliteStore::open(&path).unwrap();
    let lists = SqliteToolListStore::new(store.clone());
    assert_eq!(lists.store().path(), path);

    // A server row and a list of the same id do not see each other: a server of the
    // configuration file has a list and no row, and deleting either leaves the other.
    let spec = sample_subprocess_spec("math");
    ServerRepository::save(&store, &spec).await.unwrap();
    lists
        .save_tool_lists(&[sample_tool_list("math"), small_tool_list("configured")])
        .await
        .unwrap();
    ServerRepository::delete(&store, &id("math")).await.unwrap();
    assert_eq!(lists.load_tool_lists().await.unwrap().len(), 2);
    ServerRepository::save(&store, &spec).await.unwrap();
    lists.delete_tool_lists(&[id("math")]).await.unwrap();
    assert_eq!(ServerRepository::load_all(&store).await.unwrap(), [spec]);
    assert_eq!(
        lists.load_tool_lists().await.unwrap(),
        [small_tool_list("configured")]
    );
}

#[tokio::test]
async fn the_rows_are_readable_with_the_sqlite_shell() {
    let store = open_temporary_store();
    store
        .save_tool_lists(&[sample_tool_list("math")])
        .await
        .unwrap();
    let connection = rusqlite::Connection::open(database_path(&store.guard)).unwrap();
    let (digest, first_tool, minimum, learned_at): (String, String, f64, i64) = connection
        .query_row(
            "SELECT definition_digest, tools ->> '$[0].name',
                    tools ->> '$[0].inputSchema.properties.a.minimum', learned_at
             FROM tool_lists WHERE server_id = 'math'",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
        )
        .unwrap();
    assert_eq!(digest, "0f".repeat(32));
    assert_eq!(first_tool, "add");
    assert_eq!(minimum, 0.1);
    assert_eq!(learned_at, SAMPLE_LEARNED_AT.unix_micros());
}

#[tokio::test]
async fn a_row_that_does_not_decode_is_left_out_and_the_others_load() {
    let store = open_temporary_store();
    store
        .save_tool_lists(&[small_tool_list("good"), small_tool_list("zeta")])
        .await
        .unwrap();
    execute_behind_the_store(
        &database_path(&store.guard),
        "INSERT INTO tool_lists (server_id, definition_digest, tools, learned_at)
         VALUES ('broken', 'd', '[{\"name\": ', 5),
                ('not an id', 'd', '[]', 5),
                ('no-name', 'd', '[{\"description\": \"x\"}]', 5);",
    );

    assert_eq!(
        store.load_tool_lists().await.unwrap(),
        [small_tool_list("good"), small_tool_list("zeta")]
    );
    // Saving a list for the broken row's server replaces the row.
    store
        .save_tool_lists(&[small_tool_list("broken")])
        .await
        .unwrap();
    assert_eq!(store.load_tool_lists().await.unwrap().len(), 3);
}

#[tokio::test]
async fn a_failed_save_keeps_none_of_its_lists() {
    let store = open_temporary_store();
    store
        .save_tool_lists(&[small_tool_list("kept")])
        .await
        .unwrap();
    // A trigger stands in for a disk that fails in the middle of the batch.
    execute_behind_the_store(
        &database_path(&store.guard),
        "CREATE TRIGGER refuse_poison BEFORE INSERT ON tool_lists
         WHEN NEW.server_id = 'poison'
         BEGIN SELECT RAISE(ABORT, 'disk full'); END;",
    );
    let error = store
        .save_tool_lists(&[
            sample_tool_list("first"),
            small_tool_list("poison"),
            sample_tool_list("last"),
        ])
        .await
        .unwrap_err();
    assert!(error.0.contains("save the tool lists"), "{error}");
    assert_eq!(
        store.load_tool_lists().await.unwrap(),
        [small_tool_list("kept")],
        "all of them or none"
    );
}
