//! The database schema, as an ordered list of migrations.
//!
//! `PRAGMA user_version` holds how many migrations a database has had. To change the schema,
//! append a migration; never edit or reorder one that has shipped, because databases in the
//! field have already run it.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use crate::error::StoreError;

/// Migration `n` (1-based) is `MIGRATIONS[n - 1]`.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: servers created at run time. `definition` is the JSON of `servers::StoredServer`;
    // `mode` is repeated as a column so that it can be queried without parsing JSON.
    "CREATE TABLE mcp_servers (
        id TEXT PRIMARY KEY NOT NULL,
        mode TEXT NOT NULL,
        definition TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    ) STRICT;",
    // 2: groups created at run time. `definition` is the JSON of `groups::StoredGroup` (the
    // members, in order, are part of it: a group is always read and written whole).
    "CREATE TABLE groups (
        id TEXT PRIMARY KEY NOT NULL,
        strategy TEXT NOT NULL,
        definition TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    ) STRICT;",
    // 3: authentication and authorization (`auth.rs`). Times are microseconds since the Unix
    // epoch (UTC), so that records round-trip exactly. A key is stored as its SHA-256 (64
    // lowercase hex digits) and its listed prefix, never as the raw key. Roles hold custom
    // roles only (built-in ones live in code); `permissions`, `allow_list` and `deny_list` are
    // JSON arrays of strings in the order given. A policy's `scope` is the canonical name
    // (`provider`, `group`, `tool`).
    "CREATE TABLE api_keys (
        id TEXT PRIMARY KEY NOT NULL,
        name TEXT NOT NULL,
        principal TEXT NOT NULL,
        role TEXT,
        prefix TEXT NOT NULL,
        sha256 TEXT NOT NULL UNIQUE CHECK (length(sha256) = 64),
        created_at INTEGER NOT NULL,
        expires_at INTEGER,
        revoked_at INTEGER
    ) STRICT;
    CREATE TABLE custom_roles (
        name TEXT PRIMARY KEY NOT NULL,
        description TEXT NOT NULL,
        permissions TEXT NOT NULL
    ) STRICT;
    CREATE TABLE role_assignments (
        principal TEXT NOT NULL,
        role TEXT NOT NULL,
        scope TEXT NOT NULL,
        UNIQUE (principal, role, scope)
    ) STRICT;
    CREATE TABLE tool_policies (
        scope TEXT NOT NULL,
        target_id TEXT NOT NULL,
        allow_list TEXT NOT NULL,
        deny_list TEXT NOT NULL,
        PRIMARY KEY (scope, target_id)
    ) STRICT;",
    // 4: discovery (`discovery.rs`). Sources registered over the API, one row each: `config` is
    // the source type's settings as a JSON object, `mode` and `origin` their canonical names.
    // Rejected candidates, one row per (source, proposed name): `definition` is the rejected
    // definition as a JSON object, `rejected_at` microseconds since the Unix epoch (UTC). A
    // rejection has no foreign key to its source: sources from the configuration file are not
    // stored here, and their rejections are.
    "CREATE TABLE discovery_sources (
        source_id TEXT PRIMARY KEY NOT NULL,
        source_type TEXT NOT NULL,
        mode TEXT NOT NULL,
        enabled INTEGER NOT NULL CHECK (enabled IN (0, 1)),
        config TEXT NOT NULL,
        origin TEXT NOT NULL
    ) STRICT;
    CREATE TABLE discovery_rejections (
        source_id TEXT NOT NULL,
        name TEXT NOT NULL,
        definition TEXT NOT NULL,
        rejected_at INTEGER NOT NULL,
        PRIMARY KEY (source_id, name)
    ) STRICT;",
    // 5: the tool lists servers listed (`tool_lists.rs`), one row per server id, whatever the
    // server's origin (servers of the configuration file have no row in `mcp_servers`, so
    // there is no foreign key). `definition_digest` is the digest of the definition the list
    // was learned under, `tools` a JSON array of MCP `Tool` objects, `learned_at` microseconds
    // since the Unix epoch (UTC).
    "CREATE TABLE tool_lists (
        server_id TEXT PRIMARY KEY NOT NULL,
        definition_digest TEXT NOT NULL,
        tools TEXT NOT NULL,
        learned_at INTEGER NOT NULL
    ) STRICT;",
    // 6: local users (`users.rs`), one row per user name (compared exactly, case included).
    // `password_hash` is the PHC string of the password's hash, never the password; times are
    // microseconds since the Unix epoch (UTC).
    "CREATE TABLE users (
        name TEXT PRIMARY KEY NOT NULL,
        password_hash TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        password_changed_at INTEGER NOT NULL,
        disabled INTEGER NOT NULL CHECK (disabled IN (0, 1))
    ) STRICT;",
    // 7: the tool pin ledger (`tool_pins.rs`), one row per (owner, tool): the server or group
    // whose tool it is, and the tool's upstream name. `pinned` and `observed` are JSON objects
    // (the trusted definition, and the one reported when it differs), NULL when there is none.
    // Like the tool lists, there is no foreign key: servers of the configuration file have pins
    // and no row in `mcp_servers`.
    "CREATE TABLE tool_pins (
        owner TEXT NOT NULL,
        tool TEXT NOT NULL,
        pinned TEXT,
        observed TEXT,
        PRIMARY KEY (owner, tool)
    ) STRICT;",
    // 8: curated endpoints created at run time (`endpoints.rs`), one row per endpoint name
    // (compared exactly, case included). `spec` is the JSON of the whole `EndpointSpec`, its
    // name included, read and written whole.
    "CREATE TABLE endpoints (
        name TEXT PRIMARY KEY NOT NULL,
        spec TEXT NOT NULL
    ) STRICT;",
];

/// The event log's own database file (`events.rs`), migrated like the store's but counted
/// separately: its `user_version` is the number of these that have run.
pub(crate) const EVENT_LOG_MIGRATIONS: &[&str] = &[
    // 1: the event log. `occurred_at` is microseconds since the Unix epoch (UTC); `payload` is
    // the event as clients see it on the event stream (its fields with `event_type`, plus
    // `event_id` and `occurred_at` as strings). `mcp_server_id` is the server the event concerns,
    // when there is one. The partial index serves the tool history, which reads one server's
    // invocations newest first. `event_log_state` holds the largest id ever written, which
    // compaction must never lower, in its one row.
    "CREATE TABLE events (
        event_id INTEGER PRIMARY KEY NOT NULL,
        occurred_at INTEGER NOT NULL,
        event_type TEXT NOT NULL,
        mcp_server_id TEXT,
        payload TEXT NOT NULL
    ) STRICT;
    CREATE INDEX events_by_occurred_at ON events (occurred_at);
    CREATE INDEX events_tool_invocations ON events (mcp_server_id, event_id)
        WHERE event_type IN ('ToolInvocationCompleted', 'ToolInvocationFailed');
    CREATE TABLE event_log_state (
        id INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
        last_event_id INTEGER NOT NULL
    ) STRICT;
    INSERT INTO event_log_state (id, last_event_id) VALUES (1, 0);",
];

/// Brings the database up to `migrations.len()`, all pending migrations in one transaction: a
/// failure leaves the database exactly as it was, never half migrated.
pub(crate) fn migrate(
    connection: &mut Connection,
    path: &Path,
    migrations: &[&str],
) -> Result<(), StoreError> {
    let supported = u32::try_from(migrations.len()).unwrap_or(u32::MAX);
    // IMMEDIATE takes the write lock before reading the version, so two gateways opening the
    // same new file at once cannot both run migration 1.
    let transaction = connection
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(StoreError::sqlite("start the schema migration"))?;
    let found: u32 = transaction
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(StoreError::sqlite("read the schema version"))?;
    if found > supported {
        return Err(StoreError::SchemaTooNew {
            path: path.to_owned(),
            found,
            supported,
        });
    }
    if found == supported {
        return Ok(());
    }
    for (index, sql) in migrations.iter().enumerate().skip(found as usize) {
        transaction
            .execute_batch(sql)
            .map_err(|source| StoreError::Migration {
                path: path.to_owned(),
                version: index + 1,
                source,
            })?;
    }
    transaction
        .pragma_update(None, "user_version", supported)
        .map_err(StoreError::sqlite("record the schema version"))?;
    transaction
        .commit()
        .map_err(StoreError::sqlite("commit the schema migration"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user_version(connection: &Connection) -> u32 {
        connection
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .unwrap()
    }

    fn table_names(connection: &Connection) -> Vec<String> {
        let mut statement = connection
            .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
            .unwrap();
        statement
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn applies_only_the_pending_migrations_in_order() {
        let mut connection = Connection::open_in_memory().unwrap();
        let path = Path::new(":memory:");
        migrate(&mut connection, path, &["CREATE TABLE first (a INTEGER);"]).unwrap();
        assert_eq!(user_version(&connection), 1);

        // Running migration 1 again would fail with "table first already exists".
        let two = [
            "CREATE TABLE first (a INTEGER);",
            "ALTER TABLE first ADD COLUMN b TEXT;",
        ];
        migrate(&mut connection, path, &two).unwrap();
        assert_eq!(user_version(&connection), 2);
        migrate(&mut connection, path, &two).unwrap();
        assert_eq!(user_version(&connection), 2);
        connection
            .execute("INSERT INTO first (a, b) VALUES (1, 'x')", [])
            .unwrap();
    }

    #[test]
    fn a_failing_migration_leaves_the_database_untouched() {
        let mut connection = Connection::open_in_memory().unwrap();
        let broken = ["CREATE TABLE first (a INTEGER);", "THIS IS NOT SQL;"];
        let error = migrate(&mut connection, Path::new("db"), &broken).unwrap_err();
        assert!(
            matches!(error, StoreError::Migration { version: 2, .. }),
            "{error:?}"
        );
        assert_eq!(user_version(&connection), 0);
        assert!(
            table_names(&connection).is_empty(),
            "{:?}",
            table_names(&connection)
        );
    }

    #[test]
    fn a_database_from_a_newer_schema_is_refused() {
        let mut connection = Connection::open_in_memory().unwrap();
        // One past the newest this build knows, whatever that is.
        let newer = u32::try_from(MIGRATIONS.len()).unwrap() + 1;
        connection
            .pragma_update(None, "user_version", newer)
            .unwrap();
        let error = migrate(&mut connection, Path::new("db"), MIGRATIONS).unwrap_err();
        assert!(
            matches!(error, StoreError::SchemaTooNew { found, supported, .. }
                if found == newer && supported as usize == MIGRATIONS.len()),
            "{error:?}"
        );
        assert!(table_names(&connection).is_empty());
    }

    #[test]
    fn the_shipped_migrations_apply_to_an_empty_database() {
        let mut connection = Connection::open_in_memory().unwrap();
        migrate(&mut connection, Path::new(":memory:"), MIGRATIONS).unwrap();
        assert_eq!(user_version(&connection) as usize, MIGRATIONS.len());
        let tables = table_names(&connection);
        assert!(tables.contains(&"mcp_servers".to_owned()), "{tables:?}");
        assert!(tables.contains(&"groups".to_owned()), "{tables:?}");
        for table in [
            "api_keys",
            "custom_roles",
            "role_assignments",
            "tool_policies",
            "discovery_sources",
            "discovery_rejections",
            "tool_lists",
            "users",
            "tool_pins",
            "endpoints",
        ] {
            assert!(tables.contains(&table.to_owned()), "{tables:?}");
        }
    }

    #[test]
    fn a_database_of_the_third_schema_gains_the_discovery_tables_and_keeps_its_rows() {
        let mut connection = Connection::open_in_memory().unwrap();
        let path = Path::new(":memory:");
        migrate(&mut connection, path, &MIGRATIONS[..3]).unwrap();
        connection
            .execute_batch(
                "INSERT INTO custom_roles (name, description, permissions)
                 VALUES ('support', 'helps', '[]');",
            )
            .unwrap();
        migrate(&mut connection, path, MIGRATIONS).unwrap();
        assert_eq!(user_version(&connection) as usize, MIGRATIONS.len());
        let roles: i64 = connection
            .query_row("SELECT count(*) FROM custom_roles", [], |row| row.get(0))
            .unwrap();
        assert_eq!(roles, 1);
        // Bad input the schema itself refuses: a second rejection of the same (source, name).
        let reject = "INSERT INTO discovery_rejections (source_id, name, definition, rejected_at)
                      VALUES ('docker-0', ?1, '{}', 0)";
        connection.execute(reject, ["math"]).unwrap();
        connection.execute(reject, ["web"]).unwrap();
        assert!(connection.execute(reject, ["math"]).is_err());
    }

    #[test]
    fn a_database_of_the_fourth_schema_gains_the_tool_lists_and_keeps_its_rows() {
        let mut connection = Connection::open_in_memory().unwrap();
        let path = Path::new(":memory:");
        migrate(&mut connection, path, &MIGRATIONS[..4]).unwrap();
        connection
            .execute_batch(
                "INSERT INTO mcp_servers (id, mode, definition, created_at, updated_at)
                 VALUES ('math', 'subprocess', '{}', 'then', 'then');
                 INSERT INTO discovery_rejections (source_id, name, definition, rejected_at)
                 VALUES ('docker-0', 'web', '{}', 0);",
            )
            .unwrap();
        migrate(&mut connection, path, MIGRATIONS).unwrap();
        assert_eq!(user_version(&connection) as usize, MIGRATIONS.len());
        assert!(table_names(&connection).contains(&"tool_lists".to_owned()));
        let rows: i64 = connection
            .query_row(
                "SELECT (SELECT count(*) FROM mcp_servers)
                      + (SELECT count(*) FROM discovery_rejections)",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(rows, 2);
        // Bad input the schema itself refuses: a second list of one server, a missing digest,
        // a time that is not an integer.
        let insert = "INSERT INTO tool_lists (server_id, definition_digest, tools, learned_at)
                      VALUES (?1, ?2, '[]', ?3)";
        connection.execute(insert, ("math", "d", 1)).unwrap();
        assert!(connection.execute(insert, ("math", "d", 2)).is_err());
        assert!(
            connection
                .execute(insert, ("web", None::<String>, 1))
                .is_err()
        );
        assert!(connection.execute(insert, ("web", "d", "soon")).is_err());
    }

    #[test]
    fn a_database_of_the_fifth_schema_gains_the_users_table_and_keeps_its_rows() {
        let mut connection = Connection::open_in_memory().unwrap();
        let path = Path::new(":memory:");
        migrate(&mut connection, path, &MIGRATIONS[..5]).unwrap();
        connection
            .execute_batch(
                "INSERT INTO role_assignments (principal, role, scope)
                 VALUES ('user:alice', 'viewer', 'global');
                 INSERT INTO tool_lists (server_id, definition_digest, tools, learned_at)
                 VALUES ('math', 'd', '[]', 0);",
            )
            .unwrap();
        migrate(&mut connection, path, MIGRATIONS).unwrap();
        assert_eq!(user_version(&connection) as usize, MIGRATIONS.len());
        assert!(table_names(&connection).contains(&"users".to_owned()));
        let rows: i64 = connection
            .query_row(
                "SELECT (SELECT count(*) FROM role_assignments)
                      + (SELECT count(*) FROM tool_lists)",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(rows, 2);
        // Bad input the schema itself refuses: a second user of one name, a `disabled` that is
        // not 0 or 1, a missing hash. A name differing only in case is another user.
        let insert = "INSERT INTO users (name, password_hash, created_at, password_changed_at,
                      disabled) VALUES (?1, ?2, 0, 0, ?3)";
        connection.execute(insert, ("alice", "$h", 0)).unwrap();
        connection.execute(insert, ("Alice", "$h", 1)).unwrap();
        assert!(connection.execute(insert, ("alice", "$h", 0)).is_err());
        assert!(connection.execute(insert, ("bob", "$h", 2)).is_err());
        assert!(
            connection
                .execute(insert, ("carol", None::<String>, 0))
                .is_err()
        );
    }

    #[test]
    fn a_database_of_the_sixth_schema_gains_the_tool_pins_and_keeps_its_rows() {
        let mut connection = Connection::open_in_memory().unwrap();
        let path = Path::new(":memory:");
        migrate(&mut connection, path, &MIGRATIONS[..6]).unwrap();
        connection
            .execute_batch(
                "INSERT INTO users (name, password_hash, created_at, password_changed_at, disabled)
                 VALUES ('alice', '$h', 0, 0, 0);
                 INSERT INTO tool_lists (server_id, definition_digest, tools, learned_at)
                 VALUES ('math', 'd', '[]', 0);",
            )
            .unwrap();
        migrate(&mut connection, path, MIGRATIONS).unwrap();
        assert_eq!(user_version(&connection) as usize, MIGRATIONS.len());
        assert!(table_names(&connection).contains(&"tool_pins".to_owned()));
        let rows: i64 = connection
            .query_row(
                "SELECT (SELECT count(*) FROM users) + (SELECT count(*) FROM tool_lists)",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(rows, 2);
        // Bad input the schema itself refuses: a second record of one (owner, tool), a missing
        // owner or tool, a half that is bytes rather than text. Either half may be missing, and one tool name
        // under two owners is two records.
        let insert =
            "INSERT INTO tool_pins (owner, tool, pinned, observed) VALUES (?1, ?2, ?3, ?4)";
        connection
            .execute(insert, ("math", "add", "{}", None::<String>))
            .unwrap();
        connection
            .execute(insert, ("web", "add", None::<String>, "{}"))
            .unwrap();
        connection
            .execute(insert, ("math", "sub", None::<String>, None::<String>))
            .unwrap();
        assert!(
            connection
                .execute(insert, ("math", "add", None::<String>, "{}"))
                .is_err()
        );
        assert!(
            connection
                .execute(insert, (None::<String>, "mul", "{}", "{}"))
                .is_err()
        );
        assert!(
            connection
                .execute(insert, ("math", None::<String>, "{}", "{}"))
                .is_err()
        );
        assert!(
            connection
                .execute(insert, ("math", "div", vec![0xffu8, 0], "{}"))
                .is_err()
        );
    }

    #[test]
    fn a_database_of_the_seventh_schema_gains_the_endpoints_and_keeps_its_rows() {
        let mut connection = Connection::open_in_memory().unwrap();
        let path = Path::new(":memory:");
        migrate(&mut connection, path, &MIGRATIONS[..7]).unwrap();
        connection
            .execute_batch(
                "INSERT INTO groups (id, strategy, definition, created_at, updated_at)
                 VALUES ('pool', 'round_robin', '{}', 'then', 'then');
                 INSERT INTO tool_pins (owner, tool, pinned, observed)
                 VALUES ('math', 'add', '{}', NULL);",
            )
            .unwrap();
        migrate(&mut connection, path, MIGRATIONS).unwrap();
        assert_eq!(user_version(&connection) as usize, MIGRATIONS.len());
        assert!(table_names(&connection).contains(&"endpoints".to_owned()));
        let rows: i64 = connection
            .query_row(
                "SELECT (SELECT count(*) FROM groups) + (SELECT count(*) FROM tool_pins)",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(rows, 2);
        // Bad input the schema itself refuses: a second row of one name, a missing name or
        // definition, a definition that is bytes rather than text. A name differing only in
        // case is another endpoint.
        let insert = "INSERT INTO endpoints (name, spec) VALUES (?1, ?2)";
        connection.execute(insert, ("support", "{}")).unwrap();
        connection.execute(insert, ("Support", "{}")).unwrap();
        assert!(connection.execute(insert, ("support", "{}")).is_err());
        assert!(connection.execute(insert, (None::<String>, "{}")).is_err());
        assert!(
            connection
                .execute(insert, ("sales", None::<String>))
                .is_err()
        );
        assert!(
            connection
                .execute(insert, ("sales", vec![0xffu8, 0]))
                .is_err()
        );
    }

    #[test]
    fn a_database_of_the_second_schema_gains_the_auth_tables_and_keeps_its_rows() {
        let mut connection = Connection::open_in_memory().unwrap();
        let path = Path::new(":memory:");
        migrate(&mut connection, path, &MIGRATIONS[..2]).unwrap();
        assert_eq!(user_version(&connection), 2);
        connection
            .execute_batch(
                "INSERT INTO mcp_servers (id, mode, definition, created_at, updated_at)
                 VALUES ('math', 'subprocess', '{}', 'then', 'then');
                 INSERT INTO groups (id, strategy, definition, created_at, updated_at)
                 VALUES ('pool', 'round_robin', '{}', 'then', 'then');",
            )
            .unwrap();
        migrate(&mut connection, path, MIGRATIONS).unwrap();
        assert_eq!(user_version(&connection) as usize, MIGRATIONS.len());
        let tables = table_names(&connection);
        for table in [
            "api_keys",
            "custom_roles",
            "role_assignments",
            "tool_policies",
        ] {
            assert!(tables.contains(&table.to_owned()), "{tables:?}");
        }
        let rows: i64 = connection
            .query_row(
                "SELECT (SELECT count(*) FROM mcp_servers) + (SELECT count(*) FROM groups)",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(rows, 2);
    }

    #[test]
    fn the_auth_tables_refuse_duplicates_and_malformed_hashes() {
        let mut connection = Connection::open_in_memory().unwrap();
        migrate(&mut connection, Path::new(":memory:"), MIGRATIONS).unwrap();
        let insert_key = "INSERT INTO api_keys (id, name, principal, prefix, sha256, created_at)
                          VALUES (?1, 'n', 'user:a', 'mcp_', ?2, 0)";
        let hash = "ab".repeat(32);
        connection.execute(insert_key, ["key_1", &hash]).unwrap();
        // Bad input: a second key with the same hash, and a hash that is not 64 digits long.
        assert!(connection.execute(insert_key, ["key_2", &hash]).is_err());
        assert!(connection.execute(insert_key, ["key_3", "abc"]).is_err());
        let assign = "INSERT INTO role_assignments (principal, role, scope)
                      VALUES ('user:a', 'viewer', ?1)";
        connection.execute(assign, ["global"]).unwrap();
        connection.execute(assign, ["tenant:x"]).unwrap();
        assert!(connection.execute(assign, ["global"]).is_err());
    }

    #[test]
    fn a_database_of_the_first_schema_gains_the_groups_table_and_keeps_its_servers() {
        let mut connection = Connection::open_in_memory().unwrap();
        let path = Path::new(":memory:");
        migrate(&mut connection, path, &MIGRATIONS[..1]).unwrap();
        connection
            .execute(
                "INSERT INTO mcp_servers (id, mode, definition, created_at, updated_at)
                 VALUES ('math', 'subprocess', '{}', 'then', 'then')",
                [],
            )
            .unwrap();
        migrate(&mut connection, path, MIGRATIONS).unwrap();
        assert_eq!(user_version(&connection) as usize, MIGRATIONS.len());
        assert!(table_names(&connection).contains(&"groups".to_owned()));
        let servers: i64 = connection
            .query_row("SELECT count(*) FROM mcp_servers", [], |row| row.get(0))
            .unwrap();
        assert_eq!(servers, 1);
    }
}
