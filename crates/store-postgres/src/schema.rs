//! The schema: numbered migrations, applied at connect under an advisory lock.
//!
//! Each migration runs in a transaction of its own together with the row that records it in
//! `mcpgw_schema_migrations`, so a migration is applied exactly once and never half. Replicas
//! that start together all take the same session-level advisory lock first: one applies what is
//! missing, the others wait, then find nothing left to do.
//!
//! Migrations only add (tables, columns with defaults, indexes) and never change the meaning of
//! what is there, so that a replica of the previous release keeps working on a schema that a
//! newer replica migrated during a rolling upgrade. A replica that finds versions it does not
//! know (a newer release migrated the database) therefore starts, and says so in the log.

use tokio_postgres::Client;

use crate::error::StoreError;

/// One step of the schema.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Migration {
    pub(crate) version: u32,
    pub(crate) name: &'static str,
    pub(crate) sql: &'static str,
}

/// Every migration, in order. Append only: a released migration never changes.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "servers, groups, tool lists, auth, users, discovery",
        sql: include_str!("../migrations/0001_state.sql"),
    },
    Migration {
        version: 2,
        name: "event log",
        sql: include_str!("../migrations/0002_events.sql"),
    },
    Migration {
        version: 3,
        name: "replicas and leases",
        sql: include_str!("../migrations/0003_fleet.sql"),
    },
    Migration {
        version: 4,
        name: "tool pins",
        sql: include_str!("../migrations/0004_tool_pins.sql"),
    },
    Migration {
        version: 5,
        name: "endpoints",
        sql: include_str!("../migrations/0005_endpoints.sql"),
    },
];

/// The advisory lock key every mcpgw replica takes while it migrates ("mcpgw" and 1).
const MIGRATION_LOCK: i64 = 0x6d63_7067_7700_0001;

/// What a migration run found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MigrationReport {
    pub(crate) applied: Vec<u32>,
    /// Versions recorded in the database that this build does not know.
    pub(crate) unknown: Vec<u32>,
}

/// Brings the schema up to date on `client`, a connection of its own (the session-level lock
/// goes with it if this task dies half way).
pub(crate) async fn migrate(
    client: &mut Client,
    migrations: &[Migration],
) -> Result<MigrationReport, StoreError> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(StoreError::postgres("take the migration lock"))?;
    let outcome = migrate_locked(client, migrations).await;
    // Dropping the connection releases the lock too; this releases it sooner.
    let unlocked = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(StoreError::postgres("release the migration lock"));
    let report = outcome?;
    unlocked?;
    Ok(report)
}

async fn migrate_locked(
    client: &mut Client,
    migrations: &[Migration],
) -> Result<MigrationReport, StoreError> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS mcpgw_schema_migrations (
                 version INTEGER PRIMARY KEY,
                 name TEXT NOT NULL,
                 applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
             )",
        )
        .await
        .map_err(StoreError::postgres("create the migrations table"))?;
    let rows = client
        .query("SELECT version FROM mcpgw_schema_migrations", &[])
        .await
        .map_err(StoreError::postgres("read the applied migrations"))?;
    let done: Vec<u32> = rows
        .iter()
        .map(|row| u32::try_from(row.get::<_, i32>(0)).unwrap_or(0))
        .collect();
    let mut applied = Vec::new();
    for migration in migrations {
        if done.contains(&migration.version) {
            continue;
        }
        let fail = |source| StoreError::Migration {
            version: migration.version,
            name: migration.name,
            source,
        };
        let transaction = client.transaction().await.map_err(fail)?;
        transaction
            .batch_execute(migration.sql)
            .await
            .map_err(fail)?;
        let version = i32::try_from(migration.version).unwrap_or(i32::MAX);
        transaction
            .execute(
                "INSERT INTO mcpgw_schema_migrations (version, name) VALUES ($1, $2)",
                &[&version, &migration.name],
            )
            .await
            .map_err(fail)?;
        transaction.commit().await.map_err(fail)?;
        applied.push(migration.version);
    }
    let unknown = done
        .into_iter()
        .filter(|version| !migrations.iter().any(|known| known.version == *version))
        .collect();
    Ok(MigrationReport { applied, unknown })
}
