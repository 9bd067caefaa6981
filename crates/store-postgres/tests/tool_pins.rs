//! What only PostgreSQL adds to the pin ledger: rows damaged behind the store's back, values
//! the database cannot hold, a batch that fails half way, and the announcement each write that
//! changed the ledger sends to the other replicas. The port's shared suite itself runs in
//! `contract.rs`.

use std::time::Duration;

use mcpgw_core::{ServerId, ServerRepository, ToolPin, ToolPinStore};
use mcpgw_store_postgres::{
    Change, ChangeListener, PostgresSettings, PostgresStore, PostgresToolPinStore, Topic,
};
use mcpgw_testkit::postgres::TempPostgres;
use mcpgw_testkit::repository_suite::sample_remote_spec;
use mcpgw_testkit::tool_pin_store_suite::{
    SAMPLE_REJECTED_AT, first_use_pin, new_tool_pin, sample_tool_pin,
};

/// A store on a new database, and the database's name for `psql`.
async fn fresh_store() -> (PostgresStore, String) {
    let url = TempPostgres::shared().fresh_database();
    let name = url.rsplit('/').next().expect("a database name").to_owned();
    let store = connect(&url).await;
    (store, name)
}

async fn connect(url: &str) -> PostgresStore {
    PostgresStore::connect(PostgresSettings::new(url))
        .await
        .unwrap_or_else(|error| panic!("connecting to a fresh database failed: {error}"))
}

fn psql(database: &str, sql: &str) -> String {
    TempPostgres::shared().psql(database, sql)
}

fn id(raw: &str) -> ServerId {
    ServerId::parse(raw).unwrap()
}

/// Bad input: rows written with `psql` whose JSON is broken, whose definition has no name,
/// whose rejection has no time, whose time is a float, or whose owner is not an id. Each fails
/// the whole load with an error naming its owner and tool (the ledger is never read in part);
/// saving a good record over the pair repairs it.
#[tokio::test]
async fn a_damaged_row_fails_the_load_naming_it() {
    let (store, database) = fresh_store().await;
    let pins = PostgresToolPinStore::new(store);
    pins.save_tool_pins(&[
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
            r#"'{"digest": "d", "definition": {"description": "x"}, "observed_at": 1}'"#,
        ),
        (
            "files",
            "read_file",
            "NULL",
            r#"'{"digest": "d", "definition": {"name": "read_file"}, "observed_at": 1,
                "rejected": {"by": "user:ops"}}'"#,
        ),
        (
            "files",
            "read_file",
            r#"'{"digest": "d", "definition": {"name": "read_file"}, "pinned_at": 1.5}'"#,
            "NULL",
        ),
        ("not an id", "read_file", "'{}'", "NULL"),
    ];
    for (owner, tool, pinned, observed) in damages {
        psql(
            &database,
            &format!(
                "DELETE FROM tool_pins WHERE owner IN ('files', 'not an id');
                 INSERT INTO tool_pins (owner, tool, pinned, observed)
                 VALUES ('{owner}', '{tool}', {pinned}, {observed})"
            ),
        );
        let error = pins.load_tool_pins().await.unwrap_err();
        assert!(
            error.0.contains(&format!(
                "the stored tool_pins record `{owner}/{tool}` cannot be read"
            )),
            "{error}"
        );
        assert!(error.0.contains("repair or delete the row"), "{error}");
    }

    psql(
        &database,
        "DELETE FROM tool_pins WHERE owner = 'not an id';
         INSERT INTO tool_pins (owner, tool, pinned, observed)
         VALUES ('files', 'read_file', '[', NULL)",
    );
    assert!(pins.load_tool_pins().await.is_err());
    pins.save_tool_pins(&[new_tool_pin("files", "read_file")])
        .await
        .unwrap();
    assert_eq!(
        pins.load_tool_pins().await.unwrap(),
        [
            new_tool_pin("files", "read_file"),
            first_use_pin("good", "echo"),
            sample_tool_pin("zeta", "read_file"),
        ]
    );
}

/// The rows hold JSON an operator can read with `psql`: cast to jsonb on the fly, except a
/// definition whose text holds the escape of a NUL character, which jsonb refuses and the
/// ledger keeps as it is.
#[tokio::test]
async fn the_rows_are_readable_with_psql() {
    let (store, database) = fresh_store().await;
    let pins = PostgresToolPinStore::new(store);
    pins.save_tool_pins(&[
        sample_tool_pin("files", "read_file"),
        first_use_pin("web", "fetch"),
    ])
    .await
    .unwrap();
    let read = psql(
        &database,
        "SELECT pinned::jsonb #>> '{definition,name}', pinned::jsonb ->> 'approved_by',
                strpos(observed, '\\u0000') > 0, strpos(observed, $$\"at\":9223372036854775806}$$) > 0
         FROM tool_pins WHERE owner = 'files' AND tool = 'read_file'",
    );
    assert_eq!(read.trim(), "read_file|user:ops@example.com|t|t");
    assert_eq!(SAMPLE_REJECTED_AT.unix_micros(), 9_223_372_036_854_775_806);
    let read = psql(
        &database,
        "SELECT observed IS NULL, pinned::jsonb ? 'approved_by' FROM tool_pins WHERE owner = 'web'",
    );
    assert_eq!(read.trim(), "t|f");
}

/// Bad input: a batch whose middle record names a tool with a NUL character, which a
/// PostgreSQL text column cannot hold. The save fails with PostgreSQL's reason and keeps none
/// of the batch; the ledger is as it was.
#[tokio::test]
async fn a_tool_name_postgresql_cannot_hold_fails_the_whole_save_clearly() {
    let (store, _) = fresh_store().await;
    let pins = PostgresToolPinStore::new(store);
    pins.save_tool_pins(&[first_use_pin("kept", "echo")])
        .await
        .unwrap();
    let error = pins
        .save_tool_pins(&[
            sample_tool_pin("first", "read_file"),
            first_use_pin("files", "nul\u{0}name"),
            sample_tool_pin("last", "read_file"),
        ])
        .await
        .unwrap_err();
    assert!(
        error
            .0
            .starts_with("PostgreSQL could not save the tool pins"),
        "{error}"
    );
    assert_eq!(
        pins.load_tool_pins().await.unwrap(),
        [first_use_pin("kept", "echo")],
        "all of them or none"
    );
}

async fn next(listener: &mut ChangeListener) -> Change {
    tokio::time::timeout(Duration::from_secs(10), listener.next())
        .await
        .expect("a change within 10 s")
        .expect("the listener runs")
}

/// Another replica hears a save and a delete of pins on the `tool_pins` topic; writes that
/// change nothing (an empty save, deleting owners without pins) announce nothing, which a
/// write of another topic after them shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pin_writes_are_announced_to_the_other_replicas() {
    let url = TempPostgres::shared().fresh_database();
    let writer = connect(&url).await;
    let other = connect(&url).await;
    let pins = PostgresToolPinStore::new(writer.clone());
    let mut listener = other.listen();
    assert_eq!(next(&mut listener).await, Change::Listening);

    pins.save_tool_pins(&[sample_tool_pin("files", "read_file")])
        .await
        .unwrap();
    assert_eq!(next(&mut listener).await, Change::Topic(Topic::ToolPins));
    pins.delete_tool_pins(&[id("files")]).await.unwrap();
    assert_eq!(next(&mut listener).await, Change::Topic(Topic::ToolPins));

    pins.save_tool_pins(&[]).await.unwrap();
    pins.delete_tool_pins(&[id("never-saved")]).await.unwrap();
    pins.delete_tool_pins(&[]).await.unwrap();
    writer.save(&sample_remote_spec("mark")).await.unwrap();
    assert_eq!(next(&mut listener).await, Change::Topic(Topic::Servers));

    // The replica that wrote hears its own write as its own.
    let mut own = writer.listen();
    assert_eq!(next(&mut own).await, Change::Listening);
    pins.save_tool_pins(&[new_tool_pin("files", "read_file")])
        .await
        .unwrap();
    assert_eq!(next(&mut own).await, Change::Own(Topic::ToolPins));
}

/// A write through one replica is read by another, deletions included.
#[tokio::test]
async fn a_pin_written_on_one_replica_is_read_by_another() {
    let url = TempPostgres::shared().fresh_database();
    let writer = PostgresToolPinStore::new(connect(&url).await);
    let reader = PostgresToolPinStore::new(connect(&url).await);
    let written: Vec<ToolPin> = vec![
        sample_tool_pin("files", "read_file"),
        first_use_pin("web", "fetch"),
    ];
    writer.save_tool_pins(&written).await.unwrap();
    assert_eq!(reader.load_tool_pins().await.unwrap(), written);
    writer.delete_tool_pins(&[id("web")]).await.unwrap();
    assert_eq!(
        reader.load_tool_pins().await.unwrap(),
        [sample_tool_pin("files", "read_file")]
    );
}

/// A database from before the ledger (its migration not recorded, its table not there, a
/// server in it) gains the ledger when a replica of this release connects, and keeps what it
/// held.
#[tokio::test]
async fn a_database_of_the_previous_schema_gains_the_ledger() {
    let (store, database) = fresh_store().await;
    store.save(&sample_remote_spec("web")).await.unwrap();
    drop(store);
    psql(
        &database,
        "DROP TABLE tool_pins; DELETE FROM mcpgw_schema_migrations WHERE version = 4",
    );
    let url = TempPostgres::shared().url(&database);
    let store = connect(&url).await;
    let recorded = psql(
        &database,
        "SELECT string_agg(version::text, ',' ORDER BY version) FROM mcpgw_schema_migrations",
    );
    let expected: Vec<String> = (1..=PostgresStore::schema_version())
        .map(|version| version.to_string())
        .collect();
    assert_eq!(recorded.trim(), expected.join(","));
    assert_eq!(
        ServerRepository::load_all(&store).await.unwrap(),
        [sample_remote_spec("web")]
    );
    let pins = PostgresToolPinStore::new(store);
    assert_eq!(pins.load_tool_pins().await.unwrap(), []);
    pins.save_tool_pins(&[sample_tool_pin("web", "fetch")])
        .await
        .unwrap();
    assert_eq!(
        pins.load_tool_pins().await.unwrap(),
        [sample_tool_pin("web", "fetch")]
    );
}
