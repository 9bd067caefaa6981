//! What only PostgreSQL adds to the curated endpoints: the jsonb column an operator queries,
//! rows damaged behind the store's back, text jsonb cannot hold, replicas that read each
//! other's writes, and the announcement each write that changed a row sends to the other
//! replicas. The port's shared suite itself runs in `contract.rs`.

use std::time::Duration;

use mcpgw_core::{EndpointRepository, ServerRepository};
use mcpgw_store_postgres::{
    Change, ChangeListener, PostgresEndpointRepository, PostgresSettings, PostgresStore, Topic,
};
use mcpgw_testkit::endpoint_repository_suite::{
    endpoint_name, minimal_endpoint, sample_annotations, sample_endpoint,
};
use mcpgw_testkit::postgres::TempPostgres;
use mcpgw_testkit::repository_suite::sample_remote_spec;

/// A store on a new database, and the database's name for `psql`.
async fn fresh_store() -> (PostgresStore, String) {
    let url = TempPostgres::shared().fresh_database();
    let name = url.rsplit('/').next().expect("a database name").to_owned();
    (connect(&url).await, name)
}

async fn connect(url: &str) -> PostgresStore {
    PostgresStore::connect(PostgresSettings::new(url))
        .await
        .unwrap_or_else(|error| panic!("connecting to a fresh database failed: {error}"))
}

fn psql(database: &str, sql: &str) -> String {
    TempPostgres::shared().psql(database, sql)
}

async fn next(listener: &mut ChangeListener) -> Change {
    tokio::time::timeout(Duration::from_secs(10), listener.next())
        .await
        .expect("a change within 10 s")
        .expect("the listener runs")
}

/// The definition is a jsonb document an operator can query in place, and what jsonb does to
/// it (key order, the spelling of numbers) does not change what loads back.
#[tokio::test]
async fn the_rows_are_queryable_with_psql() {
    let (store, database) = fresh_store().await;
    let endpoints = PostgresEndpointRepository::new(store);
    endpoints
        .save_endpoint(&sample_endpoint("support"))
        .await
        .unwrap();
    let read = psql(
        &database,
        "SELECT name, spec #>> '{tools,0,server}', spec #>> '{tools,2,name}',
                spec #>> '{tools,2,annotations,readOnlyHint}', spec ->> 'tool_search',
                spec -> 'deny' ? 'user:mallory', spec #>> '{origin,source_id}'
         FROM endpoints",
    );
    assert_eq!(
        read.trim(),
        "support|tickets|sum|true|true|t|docker-0",
        "the stored document: {}",
        psql(&database, "SELECT spec FROM endpoints")
    );
    assert_eq!(
        endpoints.load_endpoints().await.unwrap(),
        [sample_endpoint("support")]
    );
}

/// Bad input: rows written with `psql` that lack the origin, whose selector names no server
/// id, whose origin is of no known kind, or whose definition is another endpoint's. Each fails
/// the whole load with an error naming the row; saving a good endpoint over it repairs the
/// table. (The column refuses JSON that is not JSON at all.)
#[tokio::test]
async fn a_damaged_row_fails_the_load_naming_it() {
    let (store, database) = fresh_store().await;
    let endpoints = PostgresEndpointRepository::new(store);
    endpoints
        .save_endpoint(&sample_endpoint("good"))
        .await
        .unwrap();
    let damages = [
        r#"{"name": "broken", "tools": []}"#,
        r#"{"name": "broken", "tools": [{"server": "not an id"}], "origin": {"kind": "api"}}"#,
        r#"{"name": "broken", "tools": [], "origin": {"kind": "file"}}"#,
        r#"{"name": "other", "tools": [], "origin": {"kind": "api"}}"#,
    ];
    for damage in damages {
        psql(
            &database,
            &format!(
                "DELETE FROM endpoints WHERE name = 'broken';
                 INSERT INTO endpoints (name, spec) VALUES ('broken', $${damage}$$)"
            ),
        );
        let error = endpoints.load_endpoints().await.unwrap_err();
        assert!(
            error
                .0
                .contains("the stored endpoints record `broken` cannot be read"),
            "{damage}: {error}"
        );
        assert!(error.0.contains("repair or delete the row"), "{error}");
    }
    endpoints
        .save_endpoint(&minimal_endpoint("broken"))
        .await
        .unwrap();
    assert_eq!(
        endpoints.load_endpoints().await.unwrap(),
        [minimal_endpoint("broken"), sample_endpoint("good")]
    );
}

/// Bad input: the NUL character in a description, and in an annotation nested deep in a
/// selector, which jsonb cannot hold. The save is refused before anything is written, naming
/// the endpoint and the field, and announces nothing; the endpoint saved before is as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_jsonb_cannot_hold_is_refused_naming_the_endpoint() {
    let (store, _) = fresh_store().await;
    let endpoints = PostgresEndpointRepository::new(store.clone());
    endpoints
        .save_endpoint(&sample_endpoint("support"))
        .await
        .unwrap();
    let mut listener = store.listen();
    assert_eq!(next(&mut listener).await, Change::Listening);

    let mut described = minimal_endpoint("support");
    described.description = Some("before\u{0}after".to_owned());
    let error = endpoints.save_endpoint(&described).await.unwrap_err();
    assert!(
        error.0.contains("the endpoint `support` cannot be stored")
            && error.0.contains("its description holds the NUL character"),
        "{error}"
    );
    let mut annotated = sample_endpoint("support");
    annotated.tools[2].annotations = Some(serde_json::json!({
        "ok": sample_annotations(),
        "list": [1, {"deep": "x\u{0}y"}],
    }));
    let error = endpoints.save_endpoint(&annotated).await.unwrap_err();
    assert!(
        error.0.contains("its tools[2].annotations holds"),
        "{error}"
    );

    // The text of a backslash and `u0000` is not the NUL character, and is kept.
    let mut escaped = sample_endpoint("support");
    escaped.description = Some("a literal \\u0000".to_owned());
    endpoints.save_endpoint(&escaped).await.unwrap();
    assert_eq!(next(&mut listener).await, Change::Own(Topic::Endpoints));
    assert_eq!(endpoints.load_endpoints().await.unwrap(), [escaped]);
}

/// Another replica hears a save and a delete on the `endpoints` topic; deleting a name that is
/// not there changes nothing and announces nothing, which a write of another topic after it
/// shows. The replica that wrote hears its own writes as its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_writes_are_announced_to_the_other_replicas() {
    let url = TempPostgres::shared().fresh_database();
    let writer = connect(&url).await;
    let other = connect(&url).await;
    let endpoints = PostgresEndpointRepository::new(writer.clone());
    let mut listener = other.listen();
    assert_eq!(next(&mut listener).await, Change::Listening);

    endpoints
        .save_endpoint(&sample_endpoint("support"))
        .await
        .unwrap();
    assert_eq!(next(&mut listener).await, Change::Topic(Topic::Endpoints));
    // Saving the same name again is a change too (an update).
    endpoints
        .save_endpoint(&minimal_endpoint("support"))
        .await
        .unwrap();
    assert_eq!(next(&mut listener).await, Change::Topic(Topic::Endpoints));
    endpoints
        .delete_endpoint(&endpoint_name("support"))
        .await
        .unwrap();
    assert_eq!(next(&mut listener).await, Change::Topic(Topic::Endpoints));

    endpoints
        .delete_endpoint(&endpoint_name("never-saved"))
        .await
        .unwrap();
    writer.save(&sample_remote_spec("mark")).await.unwrap();
    assert_eq!(next(&mut listener).await, Change::Topic(Topic::Servers));

    let mut own = writer.listen();
    assert_eq!(next(&mut own).await, Change::Listening);
    endpoints
        .save_endpoint(&sample_endpoint("sales"))
        .await
        .unwrap();
    assert_eq!(next(&mut own).await, Change::Own(Topic::Endpoints));
}

/// A write through one replica is read by another, deletions included; names load in byte
/// order whatever the database's collation (upper case before lower case).
#[tokio::test]
async fn an_endpoint_written_on_one_replica_is_read_by_another() {
    let url = TempPostgres::shared().fresh_database();
    let writer = PostgresEndpointRepository::new(connect(&url).await);
    let reader = PostgresEndpointRepository::new(connect(&url).await);
    for raw in ["support", "Zeta", "gone", "alpha"] {
        writer.save_endpoint(&sample_endpoint(raw)).await.unwrap();
    }
    writer
        .delete_endpoint(&endpoint_name("gone"))
        .await
        .unwrap();
    let names: Vec<String> = reader
        .load_endpoints()
        .await
        .unwrap()
        .into_iter()
        .map(|spec| spec.name.to_string())
        .collect();
    assert_eq!(names, ["Zeta", "alpha", "support"]);
}

/// A database from before the endpoints (their migration not recorded, their table not there,
/// a server in it) gains them when a replica of this release connects, and keeps what it held.
#[tokio::test]
async fn a_database_of_the_previous_schema_gains_the_endpoints() {
    let (store, database) = fresh_store().await;
    store.save(&sample_remote_spec("web")).await.unwrap();
    drop(store);
    psql(
        &database,
        "DROP TABLE endpoints; DELETE FROM mcpgw_schema_migrations WHERE version = 5",
    );
    let store = connect(&TempPostgres::shared().url(&database)).await;
    let recorded = psql(
        &database,
        "SELECT string_agg(version::text, ',' ORDER BY version) FROM mcpgw_schema_migrations",
    );
    let expected: Vec<String> = (1..=PostgresStore::schema_version())
        .map(|version| version.to_string())
        .collect();
    assert_eq!(recorded.trim(), expected.join(","));
    assert!(PostgresStore::schema_version() >= 5);
    assert_eq!(
        ServerRepository::load_all(&store).await.unwrap(),
        [sample_remote_spec("web")]
    );
    let endpoints = PostgresEndpointRepository::new(store);
    assert_eq!(endpoints.load_endpoints().await.unwrap(), []);
    endpoints
        .save_endpoint(&sample_endpoint("support"))
        .await
        .unwrap();
    assert_eq!(
        endpoints.load_endpoints().await.unwrap(),
        [sample_endpoint("support")]
    );
}
