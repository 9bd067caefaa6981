//! The SQLite discovery store against the `DiscoveryStore` contract (the test kit's suite, on a
//! real file in a temporary directory), plus what only a file can get wrong: data surviving a
//! reopen, sharing the file and the connection with the other stores, and rows it cannot read.

use std::path::{Path, PathBuf};

use mcpgw_discovery::{DiscoveryStore, SourceDefinition, SourceOrigin};
use mcpgw_groups::GroupRepository;
use mcpgw_store_sqlite::{SqliteDiscoveryStore, SqliteStore};
use mcpgw_testkit::discovery_store_suite::{sample_files_source, sample_rejection, sample_source};
use mcpgw_testkit::repository_suite::RepositoryWithGuard;
use tempfile::TempDir;

fn database_path(directory: &TempDir) -> PathBuf {
    directory.path().join("data").join("mcpgw.db")
}

fn open_temporary_store() -> RepositoryWithGuard<SqliteDiscoveryStore, TempDir> {
    let directory = tempfile::tempdir().unwrap();
    let store = SqliteDiscoveryStore::open(&database_path(&directory)).unwrap();
    RepositoryWithGuard::new(store, directory)
}

mod contract {
    mcpgw_testkit::discovery_store_contract_suite!(super::open_temporary_store());
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
async fn everything_survives_closing_and_reopening_the_file() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(&directory);
    {
        let store = SqliteDiscoveryStore::open(&path).unwrap();
        store.save_source(&sample_source("docker-0")).await.unwrap();
        store
            .save_source(&sample_files_source("files-1"))
            .await
            .unwrap();
        store.save_source(&sample_source("gone")).await.unwrap();
        store.delete_source("gone").await.unwrap();
        store
            .save_rejection(&sample_rejection("docker-0", "math"))
            .await
            .unwrap();
        store
            .save_rejection(&sample_rejection("docker-0", "gone"))
            .await
            .unwrap();
        store.delete_rejection("docker-0", "gone").await.unwrap();
    }

    let reopened = SqliteDiscoveryStore::open(&path).unwrap();
    assert_eq!(
        reopened.load_sources().await.unwrap(),
        [sample_source("docker-0"), sample_files_source("files-1")]
    );
    assert_eq!(
        reopened.load_rejections().await.unwrap(),
        [sample_rejection("docker-0", "math")]
    );
}

#[tokio::test]
async fn the_discovery_store_shares_the_gateway_store_and_its_file() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(&directory);
    let store = SqliteStore::open(&path).unwrap();
    let discovery = SqliteDiscoveryStore::new(store.clone());
    assert_eq!(discovery.store().path(), path);

    discovery.save_source(&sample_source("pool")).await.unwrap();
    // A group with the same id as a source: the tables do not see each other.
    let group = mcpgw_groups::GroupSpec {
        id: mcpgw_core::ServerId::parse("pool").unwrap(),
        description: None,
        strategy: mcpgw_groups::GroupStrategy::RoundRobin,
        min_healthy: 1,
        members: Vec::new(),
    };
    store.save(&group).await.unwrap();
    discovery.delete_source("pool").await.unwrap();
    assert_eq!(store.load_all().await.unwrap(), [group]);
    assert_eq!(discovery.load_sources().await.unwrap(), []);

    discovery
        .save_source(&sample_files_source("files-1"))
        .await
        .unwrap();
    drop((discovery, store));
    assert_eq!(
        SqliteDiscoveryStore::open(&path)
            .unwrap()
            .load_sources()
            .await
            .unwrap(),
        [sample_files_source("files-1")]
    );
}

#[tokio::test]
async fn a_source_from_the_configuration_file_round_trips_too() {
    // The registry hands only `api` sources to the store, but the column keeps either origin.
    let store = open_temporary_store();
    let source = SourceDefinition {
        origin: SourceOrigin::Config,
        ..sample_source("docker-0")
    };
    store.save_source(&source).await.unwrap();
    assert_eq!(store.load_sources().await.unwrap(), [source]);
}

#[tokio::test]
async fn the_rows_are_readable_with_the_sqlite_shell() {
    let store = open_temporary_store();
    store.save_source(&sample_source("docker-0")).await.unwrap();
    store
        .save_rejection(&sample_rejection("docker-0", "math"))
        .await
        .unwrap();
    let connection = rusqlite::Connection::open(database_path(&store.guard)).unwrap();
    let (mode, enabled, origin, socket): (String, i64, String, String) = connection
        .query_row(
            "SELECT mode, enabled, origin, config ->> '$.socket_path' FROM discovery_sources",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
        )
        .unwrap();
    assert_eq!(
        (mode.as_str(), enabled, origin.as_str(), socket.as_str()),
        (
            "authoritative",
            0,
            "api",
            "unix:///run/user/1000/podman/podman.sock"
        )
    );
    let (image, rejected_at): (String, i64) = connection
        .query_row(
            "SELECT definition ->> '$.image', rejected_at FROM discovery_rejections",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert_eq!(image, "localhost/mcpgw-fixture:test");
    assert_eq!(
        rejected_at,
        mcpgw_testkit::discovery_store_suite::SAMPLE_REJECTED_AT.unix_micros()
    );
}

#[tokio::test]
async fn rows_that_do_not_decode_are_errors_naming_the_row() {
    let cases = [
        (
            "INSERT INTO discovery_sources (source_id, source_type, mode, enabled, config, origin)
             VALUES ('docker-7', 'docker', 'additive', 1, '{\"socket_path\": ', 'api')",
            "`docker-7`",
            "config:",
        ),
        (
            "INSERT INTO discovery_sources (source_id, source_type, mode, enabled, config, origin)
             VALUES ('docker-7', 'docker', 'eager', 1, '{}', 'api')",
            "`docker-7`",
            "unknown mode `eager`",
        ),
        (
            "INSERT INTO discovery_sources (source_id, source_type, mode, enabled, config, origin)
             VALUES ('docker-7', 'docker', 'additive', 1, '[]', 'api')",
            "`docker-7`",
            "a JSON object was expected",
        ),
        (
            "INSERT INTO discovery_sources (source_id, source_type, mode, enabled, config, origin)
             VALUES ('docker-7', 'docker', 'additive', 1, '{}', 'yaml')",
            "`docker-7`",
            "unknown origin `yaml`",
        ),
    ];
    for (insert, key, reason) in cases {
        let store = open_temporary_store();
        store.save_source(&sample_source("docker-0")).await.unwrap();
        execute_behind_the_store(&database_path(&store.guard), insert);

        let error = store.load_sources().await.unwrap_err().0;
        assert!(error.contains("discovery_sources"), "{reason}: {error}");
        assert!(error.contains(key), "{reason}: {error}");
        assert!(error.contains(reason), "{reason}: {error}");
        assert!(
            error.contains("repair or delete the row"),
            "{reason}: {error}"
        );
        // The damage is confined to the row: the other table still loads, and deleting the
        // row through the port repairs the load.
        store
            .save_rejection(&sample_rejection("docker-0", "math"))
            .await
            .unwrap();
        assert_eq!(store.load_rejections().await.unwrap().len(), 1);
        store.delete_source("docker-7").await.unwrap();
        assert_eq!(
            store.load_sources().await.unwrap(),
            [sample_source("docker-0")]
        );
    }
}

#[tokio::test]
async fn a_rejection_whose_definition_does_not_decode_is_an_error_naming_it() {
    let store = open_temporary_store();
    store
        .save_rejection(&sample_rejection("files-1", "web"))
        .await
        .unwrap();
    execute_behind_the_store(
        &database_path(&store.guard),
        "INSERT INTO discovery_rejections (source_id, name, definition, rejected_at)
         VALUES ('files-1', 'math', '{\"mode\": \"docker\"', 5)",
    );
    let error = store.load_rejections().await.unwrap_err().0;
    assert!(error.contains("discovery_rejections"), "{error}");
    assert!(error.contains("`files-1/math`"), "{error}");
    assert!(error.contains("definition:"), "{error}");
    assert_eq!(store.load_sources().await.unwrap(), []);

    store.delete_rejection("files-1", "math").await.unwrap();
    assert_eq!(
        store.load_rejections().await.unwrap(),
        [sample_rejection("files-1", "web")]
    );
}

#[test]
fn the_schema_refuses_an_enabled_flag_that_is_not_a_boolean() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(&directory);
    drop(SqliteDiscoveryStore::open(&path).unwrap());
    let result = rusqlite::Connection::open(&path).unwrap().execute_batch(
        "INSERT INTO discovery_sources (source_id, source_type, mode, enabled, config, origin)
         VALUES ('docker-7', 'docker', 'additive', 2, '{}', 'api')",
    );
    assert!(result.is_err(), "{result:?}");
}
