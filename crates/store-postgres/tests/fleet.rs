//! Heartbeats and leases of replicas, on a real PostgreSQL server.

use mcpgw_core::FleetStore as _;
use mcpgw_store_postgres::{PostgresSettings, PostgresStore};
use mcpgw_testkit::fleet_store_suite::sample_heartbeat;
use mcpgw_testkit::postgres::TempPostgres;

async fn fresh_store() -> PostgresStore {
    let url = TempPostgres::shared().fresh_database();
    PostgresStore::connect(PostgresSettings::new(url))
        .await
        .expect("connect")
}

mcpgw_testkit::fleet_store_contract_suite!(fresh_store().await);

/// Bad input: a heartbeat row whose servers column was damaged behind the store's back.
#[tokio::test]
async fn a_damaged_heartbeat_is_a_clear_error() {
    let postgres = TempPostgres::shared();
    let url = postgres.fresh_database();
    let store = PostgresStore::connect(PostgresSettings::new(url.clone()))
        .await
        .unwrap();
    store
        .heartbeat(&sample_heartbeat("gw-a", &[]))
        .await
        .unwrap();
    let database = url.rsplit('/').next().unwrap();
    postgres.psql(
        database,
        "UPDATE mcpgw_replicas SET servers = '[{\"id\": \"math\", \"state\": \"sleepy\"}]'",
    );
    let error = store.replicas().await.expect_err("a damaged row");
    assert!(error.0.contains("mcpgw_replicas"), "{error}");
    assert!(error.0.contains("sleepy"), "{error}");
}
