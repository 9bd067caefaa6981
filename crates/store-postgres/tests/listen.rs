//! Hearing other replicas' changes, on a real PostgreSQL server.

use std::time::Duration;

use mcpgw_store_postgres::{Change, PostgresSettings, PostgresStore, Topic};
use mcpgw_testkit::postgres::TempPostgres;

async fn next(listener: &mut mcpgw_store_postgres::ChangeListener) -> Change {
    tokio::time::timeout(Duration::from_secs(10), listener.next())
        .await
        .expect("a change within 10 s")
        .expect("the listener runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_arrive_and_a_dropped_connection_heals() {
    let postgres = TempPostgres::shared();
    let url = postgres.fresh_database();
    let database = url.rsplit('/').next().unwrap().to_owned();
    let store = PostgresStore::connect(PostgresSettings::new(url))
        .await
        .unwrap();
    let mut listener = store.listen();
    assert_eq!(next(&mut listener).await, Change::Listening);

    postgres.psql(&database, "NOTIFY mcpgw_changes, 'servers'");
    assert_eq!(next(&mut listener).await, Change::Topic(Topic::Servers));
    // Bad input: a payload that names no topic is ignored; the next good one still arrives.
    postgres.psql(
        &database,
        "NOTIFY mcpgw_changes, 'no such topic'; NOTIFY mcpgw_changes, 'keys'",
    );
    assert_eq!(next(&mut listener).await, Change::Topic(Topic::Keys));

    // A transaction that rolls back announces nothing.
    postgres.psql(
        &database,
        "BEGIN; SELECT pg_notify('mcpgw_changes', 'groups'); ROLLBACK",
    );
    postgres.psql(&database, "NOTIFY mcpgw_changes, 'access'");
    assert_eq!(next(&mut listener).await, Change::Topic(Topic::Access));

    // The listening connection is killed (a PostgreSQL restart or failover looks the same):
    // the listener reconnects and says so, since it may have missed changes meanwhile.
    postgres.psql(
        &database,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE application_name = 'mcpgw' AND query LIKE 'LISTEN%'",
    );
    assert_eq!(next(&mut listener).await, Change::Listening);
    postgres.psql(&database, "NOTIFY mcpgw_changes, 'users'");
    assert_eq!(next(&mut listener).await, Change::Topic(Topic::Users));
}

/// A store hears its own writes as its own, and another store's as the other's: a replica
/// need not read again what it wrote itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_tells_its_own_writes_from_another_stores() {
    use mcpgw_core::{ServerId, ServerRepository as _, ServerSpec};

    let url = TempPostgres::shared().fresh_database();
    let mine = PostgresStore::connect(PostgresSettings::new(url.clone()))
        .await
        .unwrap();
    let other = PostgresStore::connect(PostgresSettings::new(url))
        .await
        .unwrap();
    let mut listener = mine.listen();
    assert_eq!(next(&mut listener).await, Change::Listening);
    let spec = |id: &str| ServerSpec::subprocess(ServerId::parse(id).unwrap(), vec!["x".into()]);
    mine.save(&spec("mine")).await.unwrap();
    assert_eq!(next(&mut listener).await, Change::Own(Topic::Servers));
    other.save(&spec("theirs")).await.unwrap();
    assert_eq!(next(&mut listener).await, Change::Topic(Topic::Servers));
}
