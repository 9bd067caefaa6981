//! The SQLite pin ledger against what every `ToolPinStore` must do (the test kit's suite, on a real
//! file in a temporary directory), plus what only a file can get wrong: pins surviving a
//! reopen, sharing the file with the other stores, and rows it cannot read.

use std::path::{Path, PathBuf};

use mcpgw_core::{ServerId, ToolListStore, ToolPinStore};
use mcpgw_store_sqlite::{SqliteStore, SqliteToolListStore, SqliteToolPinStore};
use mcpgw_testkit::repository_suite::RepositoryWithGuard;
use mcpgw_testkit::tool_list_store_suite::small_tool_list;
use mcpgw_testkit::tool_pin_store_suite::{
    SAMPLE_PINNED_AT, SAMPLE_REJECTED_AT, first_use_pin, new_tool_pin, sample_tool_pin,
};
use tempfile::TempDir;

fn database_path(directory: &TempDir) -> PathBuf {
    directory.path().join("data").join("mcpgw.db")
}

fn open_temporary_store() -> RepositoryWithGuard<SqliteToolPinStore, TempDir> {
    let directory = tempfile::tempdir().unwrap();
    let store = SqliteToolPinStore::open(&database_path(&directory)).unwrap();
    RepositoryWithGuard::new(store, directory)
}

mod contract {
    mcpgw_testkit::tool_pin_store_contract_suite!(super::open_temporary_store());
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
async fn the_pins_survive_closing_and_reopening_the_file() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(&directory);
    {
        let store = SqliteToolPinStore::open(&path).unwrap();
        store
            .save_tool_pins(&[
                sample_tool_pin("files", "read_file"),
                first_use_pin("gone", "echo"),
                new_tool_pin("web", "fetch"),
            ])
            .await
            .unwrap();
        store.delete_tool_pins(&[id("gone")]).await.unwrap();
    }
    let reopened = SqliteToolPinStore::open(&path).unwrap();
    assert_eq!(
        reopened.load_tool_pins().await.unwrap(),
        [
            sample_tool_pin("files", "read_file"),
            new_tool_pin("web", "fetch")
        ]
    );
}

#[tokio::test]
async fn the_pins_share_the_gateway_store_and_its_file() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(&directory);
    let store = SqliteStore::open(&path).unwrap();
    let pins = SqliteToolPinStore::new(store.clone());
    let lists = SqliteToolListStore::new(store);
    assert_eq!(pins.store().path(), path);

    // A tool list and the pins of the same server do not see each other: forgetting a learned
    // list (its definition changed) must not forget what operators decided about its tools.
    lists
        .save_tool_lists(&[small_tool_list("math")])
        .await
        .unwrap();
    pins.save_tool_pins(&[first_use_pin("math", "add")])
        .await
        .unwrap();
    lists.delete_tool_lists(&[id("math")]).await.unwrap();
    assert_eq!(
        pins.load_tool_pins().await.unwrap(),
        [first_use_pin("math", "add")]
    );
    lists
        .save_tool_lists(&[small_tool_list("math")])
        .await
        .unwrap();
    pins.delete_tool_pins(&[id("math")]).await.unwrap();
    assert_eq!(
        lists.load_tool_lists().await.unwrap(),
        [small_tool_list("math")]
    );
    assert_eq!(pins.load_tool_pins().await.unwrap(), []);
}

#[tokio::test]
async fn the_rows_are_readable_with_the_sqlite_shell() {
    let store = open_temporary_store();
    store
        .save_tool_pins(&[
            sample_tool_pin("files", "read_file"),
            first_use_pin("web", "fetch"),
        ])
        .await
        .unwrap();
    let connection = rusqlite::Connection::open(database_path(&store.guard)).unwrap();
    let (name, approved_by, pinned_at, rejected_by, rejected_at): (
        String,
        String,
        i64,
        String,
        i64,
    ) = connection
        .query_row(
            "SELECT pinned ->> '$.definition.name', pinned ->> '$.approved_by',
                    pinned ->> '$.pinned_at', observed ->> '$.rejected.by',
                    observed ->> '$.rejected.at'
             FROM tool_pins WHERE owner = 'files' AND tool = 'read_file'",
            [],
            |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                ))
            },
        )
        .unwrap();
    assert_eq!(name, "read_file");
    assert_eq!(approved_by, "user:ops@example.com");
    assert_eq!(pinned_at, SAMPLE_PINNED_AT.unix_micros());
    assert_eq!(rejected_by, "api-key:key_01 \"security\"");
    assert_eq!(rejected_at, SAMPLE_REJECTED_AT.unix_micros());
    // A half that is not there is NULL, and an absent approver is left out.
    let (observed, has_approver): (Option<String>, i64) = connection
        .query_row(
            "SELECT observed, json_type(pinned, '$.approved_by') IS NOT NULL
             FROM tool_pins WHERE owner = 'web'",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert_eq!((observed, has_approver), (None, 0));
}

/// Bad input: rows written behind the store's back whose JSON is broken, whose definition has
/// no name, whose rejection has no time, or whose owner is not an id. Each fails the whole load
/// with an error naming its owner and tool; saving a good record over it repairs the ledger.
#[tokio::test]
async fn a_row_that_does_not_decode_fails_the_load_naming_it() {
    let store = open_temporary_store();
    let path = database_path(&store.guard);
    store
        .save_tool_pins(&[
            first_use_pin("good", "echo"),
            sample_tool_pin("zeta", "read_file"),
        ])
        .await
        .unwrap();
    let damages = [
        ("files", "read_file", "'{\"digest\": '", "NULL"),
        (
            "files",
            "read_file",
            "NULL",
            "'{\"digest\": \"d\", \"definition\": {\"description\": \"x\"}, \"observed_at\": 1}'",
        ),
        (
            "files",
            "read_file",
            "NULL",
            "'{\"digest\": \"d\", \"definition\": {\"name\": \"read_file\"}, \"observed_at\": 1,
               \"rejected\": {\"by\": \"user:ops\"}}'",
        ),
        ("not an id", "read_file", "'{}'", "NULL"),
    ];
    for (owner, tool, pinned, observed) in damages {
        execute_behind_the_store(
            &path,
            &format!(
                "DELETE FROM tool_pins WHERE tool = '{tool}' AND owner IN ('files', 'not an id');
                 INSERT INTO tool_pins (owner, tool, pinned, observed)
                 VALUES ('{owner}', '{tool}', {pinned}, {observed});"
            ),
        );
        let error = store.load_tool_pins().await.unwrap_err();
        assert!(
            error.0.contains(&format!(
                "the stored tool_pins record `{owner}/{tool}` cannot be read"
            )),
            "{error}"
        );
        assert!(error.0.contains("repair or delete the row"), "{error}");
    }

    // Saving a record for the damaged pair replaces the row, and the ledger loads again.
    execute_behind_the_store(&path, "DELETE FROM tool_pins WHERE owner = 'not an id';");
    execute_behind_the_store(
        &path,
        "INSERT INTO tool_pins (owner, tool, pinned, observed)
         VALUES ('files', 'read_file', '[', NULL);",
    );
    assert!(store.load_tool_pins().await.is_err());
    store
        .save_tool_pins(&[new_tool_pin("files", "read_file")])
        .await
        .unwrap();
    assert_eq!(
        store.load_tool_pins().await.unwrap(),
        [
            new_tool_pin("files", "read_file"),
            first_use_pin("good", "echo"),
            sample_tool_pin("zeta", "read_file"),
        ]
    );
}

#[tokio::test]
async fn a_failed_save_keeps_none_of_its_pins() {
    let store = open_temporary_store();
    store
        .save_tool_pins(&[first_use_pin("kept", "echo")])
        .await
        .unwrap();
    // A trigger stands in for a disk that fails in the middle of the batch.
    execute_behind_the_store(
        &database_path(&store.guard),
        "CREATE TRIGGER refuse_poison BEFORE INSERT ON tool_pins
         WHEN NEW.owner = 'poison'
         BEGIN SELECT RAISE(ABORT, 'disk full'); END;",
    );
    let error = store
        .save_tool_pins(&[
            sample_tool_pin("first", "read_file"),
            first_use_pin("poison", "echo"),
            sample_tool_pin("last", "read_file"),
        ])
        .await
        .unwrap_err();
    assert!(error.0.contains("save the tool pins"), "{error}");
    assert_eq!(
        store.load_tool_pins().await.unwrap(),
        [first_use_pin("kept", "echo")],
        "all of them or none"
    );
}
