//! Connecting and migrating, on a real PostgreSQL server.

use mcpgw_store_postgres::{PostgresSettings, PostgresStore, StoreError};
use mcpgw_testkit::postgres::TempPostgres;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_connecting_together_migrate_once() {
    let postgres = TempPostgres::start();
    let url = postgres.fresh_database();
    let mut connecting = Vec::new();
    for _ in 0..4 {
        let settings = PostgresSettings::new(url.clone());
        connecting.push(tokio::spawn(PostgresStore::connect(settings)));
    }
    for handle in connecting {
        handle
            .await
            .expect("no panic")
            .expect("every replica connects");
    }
    let database = url.rsplit('/').next().expect("a database name");
    let recorded = postgres.psql(
        database,
        "SELECT string_agg(version::text, ',' ORDER BY version) FROM mcpgw_schema_migrations",
    );
    let expected: Vec<String> = (1..=PostgresStore::schema_version())
        .map(|version| version.to_string())
        .collect();
    assert_eq!(recorded.trim(), expected.join(","));
}

#[tokio::test]
async fn a_newer_schema_does_not_stop_an_older_replica() {
    let postgres = TempPostgres::shared();
    let url = postgres.fresh_database();
    PostgresStore::connect(PostgresSettings::new(url.clone()))
        .await
        .expect("first connect");
    let database = url.rsplit('/').next().expect("a database name");
    postgres.psql(
        database,
        "INSERT INTO mcpgw_schema_migrations (version, name) VALUES (9999, 'from a newer release')",
    );
    PostgresStore::connect(PostgresSettings::new(url))
        .await
        .expect("an older release still connects");
}

/// Bad input: a URL that is not a connection string, and a port where nothing listens.
#[tokio::test]
async fn bad_urls_and_unreachable_servers_are_clear_errors() {
    let error = PostgresStore::connect(PostgresSettings::new("postgres://[::1"))
        .await
        .expect_err("an unparsable URL");
    assert!(matches!(error, StoreError::InvalidUrl(_)), "{error}");

    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let mut settings = PostgresSettings::new(format!(
        "postgres://mcpgw:secret-password@127.0.0.1:{closed}/mcpgw"
    ));
    settings.connect_timeout = std::time::Duration::from_secs(2);
    let error = PostgresStore::connect(settings)
        .await
        .expect_err("nothing listens");
    let message = error.to_string();
    assert!(matches!(error, StoreError::Connect { .. }), "{message}");
    assert!(
        message.contains(&format!("127.0.0.1:{closed}/mcpgw")),
        "{message}"
    );
    assert!(!message.contains("secret-password"), "{message}");
}
