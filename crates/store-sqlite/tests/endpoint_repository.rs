//! The SQLite endpoint repository against what every `EndpointRepository` must do (the test kit's
//! suite, on a real file in a temporary directory), plus what only a file can get wrong:
//! endpoints surviving a reopen, sharing the file with the other stores, rows it cannot read,
//! and writes the database refuses.

use std::path::{Path, PathBuf};

use mcpgw_core::{EndpointRepository, EndpointSpec, ServerId};
use mcpgw_groups::GroupRepository;
use mcpgw_store_sqlite::{SqliteEndpointRepository, SqliteStore};
use mcpgw_testkit::endpoint_repository_suite::{
    endpoint_name, minimal_endpoint, sample_annotations, sample_endpoint,
};
use mcpgw_testkit::group_repository_suite::sample_group;
use mcpgw_testkit::repository_suite::RepositoryWithGuard;
use tempfile::TempDir;

fn database_path(directory: &TempDir) -> PathBuf {
    directory.path().join("data").join("mcpgw.db")
}

fn open_temporary_store() -> RepositoryWithGuard<SqliteEndpointRepository, TempDir> {
    let directory = tempfile::tempdir().unwrap();
    let store = SqliteEndpointRepository::open(&database_path(&directory)).unwrap();
    RepositoryWithGuard::new(store, directory)
}

mod contract {
    mcpgw_testkit::endpoint_repository_contract_suite!(super::open_temporary_store());
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
async fn the_endpoints_survive_closing_and_reopening_the_file() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(&directory);
    {
        let store = SqliteEndpointRepository::open(&path).unwrap();
        store
            .save_endpoint(&sample_endpoint("support"))
            .await
            .unwrap();
        store
            .save_endpoint(&minimal_endpoint("gone"))
            .await
            .unwrap();
        store.delete_endpoint(&endpoint_name("gone")).await.unwrap();
    }
    let reopened = SqliteEndpointRepository::open(&path).unwrap();
    assert_eq!(
        reopened.load_endpoints().await.unwrap(),
        [sample_endpoint("support")]
    );
}

#[tokio::test]
async fn the_endpoints_share_the_gateway_store_and_its_file() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(&directory);
    let store = SqliteStore::open(&path).unwrap();
    let endpoints = SqliteEndpointRepository::new(store.clone());
    assert_eq!(endpoints.store().path(), path);

    // A group and an endpoint of the same name do not see each other: deleting either leaves
    // the other.
    GroupRepository::save(&store, &sample_group("support"))
        .await
        .unwrap();
    endpoints
        .save_endpoint(&sample_endpoint("support"))
        .await
        .unwrap();
    GroupRepository::delete(&store, &ServerId::parse("support").unwrap())
        .await
        .unwrap();
    assert_eq!(
        endpoints.load_endpoints().await.unwrap(),
        [sample_endpoint("support")]
    );
    GroupRepository::save(&store, &sample_group("support"))
        .await
        .unwrap();
    endpoints
        .delete_endpoint(&endpoint_name("support"))
        .await
        .unwrap();
    assert_eq!(
        GroupRepository::load_all(&store).await.unwrap(),
        [sample_group("support")]
    );
    assert_eq!(endpoints.load_endpoints().await.unwrap(), []);
}

#[tokio::test]
async fn the_rows_are_readable_with_the_sqlite_shell() {
    let store = open_temporary_store();
    store
        .save_endpoint(&sample_endpoint("support"))
        .await
        .unwrap();
    let connection = rusqlite::Connection::open(database_path(&store.guard)).unwrap();
    let (name, first_server, renamed, read_only, denied): (String, String, String, bool, String) =
        connection
            .query_row(
                "SELECT name, spec ->> '$.tools[0].server', spec ->> '$.tools[2].name',
                        spec ->> '$.tools[2].annotations.readOnlyHint', spec ->> '$.deny[0]'
                 FROM endpoints",
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
    assert_eq!(name, "support");
    assert_eq!(first_server, "tickets");
    assert_eq!(renamed, "sum");
    assert!(read_only);
    assert_eq!(denied, "user:mallory");
}

/// Text that no other store need keep: the NUL character and the other control characters, in
/// the description and in the annotations.
#[tokio::test]
async fn control_characters_round_trip() {
    let store = open_temporary_store();
    let mut spec = sample_endpoint("support");
    spec.description = Some("nul \u{0} bell \u{7} escape \u{1b}".to_owned());
    spec.tools[2].annotations =
        Some(serde_json::json!({"title": "a\u{0}b", "nested": sample_annotations()}));
    store.save_endpoint(&spec).await.unwrap();
    assert_eq!(store.load_endpoints().await.unwrap(), [spec]);
}

/// Bad input: rows written behind the store whose JSON is broken, that lack the origin, whose
/// selector names no server id, or whose definition is another endpoint's. Each fails the
/// whole load with an error naming the row (an endpoint read in part would lose its access
/// rules); saving a good endpoint over it repairs the table.
#[tokio::test]
async fn a_row_that_does_not_decode_fails_the_load_naming_it() {
    let store = open_temporary_store();
    store.save_endpoint(&sample_endpoint("good")).await.unwrap();
    let damages = [
        "{\"name\": \"broken\", ",
        r#"{"name": "broken", "tools": []}"#,
        r#"{"name": "broken", "tools": [{"server": "not an id"}], "origin": {"kind": "api"}}"#,
        r#"{"name": "other", "tools": [], "origin": {"kind": "api"}}"#,
    ];
    for damage in damages {
        execute_behind_the_store(
            &database_path(&store.guard),
            &format!(
                "INSERT OR REPLACE INTO endpoints (name, spec) VALUES ('broken', '{}')",
                damage.replace('\'', "''")
            ),
        );
        let error = store.load_endpoints().await.unwrap_err();
        let message = error.to_string();
        assert!(message.contains("`broken`"), "{damage}: {message}");
        assert!(message.contains("endpoints"), "{damage}: {message}");
    }
    store
        .save_endpoint(&minimal_endpoint("broken"))
        .await
        .unwrap();
    assert_eq!(
        store.load_endpoints().await.unwrap(),
        [minimal_endpoint("broken"), sample_endpoint("good")]
    );
}

/// A save the database refuses (a trigger stands in for a full disk) is an error naming what
/// failed, and the endpoint saved before stays as it was.
#[tokio::test]
async fn a_failed_save_is_an_error_and_keeps_the_endpoint_as_it_was() {
    let store = open_temporary_store();
    store
        .save_endpoint(&sample_endpoint("support"))
        .await
        .unwrap();
    execute_behind_the_store(
        &database_path(&store.guard),
        "CREATE TRIGGER refuse_updates BEFORE UPDATE ON endpoints
         BEGIN SELECT RAISE(ABORT, 'disk full'); END;
         CREATE TRIGGER refuse_deletes BEFORE DELETE ON endpoints
         BEGIN SELECT RAISE(ABORT, 'disk full'); END;",
    );
    let error = store
        .save_endpoint(&minimal_endpoint("support"))
        .await
        .unwrap_err();
    assert!(error.0.contains("save the endpoint"), "{error}");
    let error = store
        .delete_endpoint(&endpoint_name("support"))
        .await
        .unwrap_err();
    assert!(error.0.contains("delete the endpoint"), "{error}");
    let loaded: Vec<EndpointSpec> = store.load_endpoints().await.unwrap();
    assert_eq!(loaded, [sample_endpoint("support")]);
}
