//! Rows damaged behind the store's back (written with `psql`, as an operator or a faulty tool
//! would) and values PostgreSQL cannot hold: each gives a clear error naming the row, or is
//! skipped where the port says so, and never a panic.

use mcpgw_authz::{AuthStore, UserStore};
use mcpgw_core::{ServerRepository, ToolListStore};
use mcpgw_discovery::DiscoveryStore;
use mcpgw_groups::GroupRepository;
use mcpgw_store_postgres::{
    PostgresDiscoveryStore, PostgresSettings, PostgresStore, PostgresToolListStore,
};
use mcpgw_testkit::auth_store::{SAMPLE_TIME, sample_address, sample_key};
use mcpgw_testkit::discovery_store_suite::sample_rejection;
use mcpgw_testkit::postgres::TempPostgres;
use mcpgw_testkit::repository_suite::sample_remote_spec;
use mcpgw_testkit::tool_list_store_suite::small_tool_list;
use mcpgw_testkit::user_store::{sample_user, sample_user_name};

/// A store on a new database, and the database's name for `psql`.
async fn fresh_store() -> (PostgresStore, String) {
    let url = TempPostgres::shared().fresh_database();
    let name = url.rsplit('/').next().expect("a database name").to_owned();
    let store = PostgresStore::connect(PostgresSettings::new(url))
        .await
        .unwrap_or_else(|error| panic!("connecting to a fresh database failed: {error}"));
    (store, name)
}

fn psql(database: &str, sql: &str) -> String {
    TempPostgres::shared().psql(database, sql)
}

/// Checks that `message` reports the damaged row `key` of `table` and says what to do.
fn assert_names_the_row(message: &str, table: &str, key: &str) {
    assert!(
        message.contains(&format!("the stored {table} record `{key}` cannot be read")),
        "{message}"
    );
    assert!(message.contains("repair or delete the row"), "{message}");
}

/// Bad input: a server row with broken JSON, then one whose id is not an id.
#[tokio::test]
async fn a_damaged_server_row_fails_the_load_naming_it() {
    let (store, database) = fresh_store().await;
    ServerRepository::save(&store, &sample_remote_spec("web"))
        .await
        .unwrap();
    psql(
        &database,
        "INSERT INTO mcp_servers (id, mode, definition) VALUES ('math', 'remote', '{not json')",
    );
    let error = ServerRepository::load_all(&store).await.unwrap_err();
    assert_names_the_row(&error.0, "mcp_servers", "math");

    psql(
        &database,
        "UPDATE mcp_servers SET id = 'not an id' WHERE id = 'web';
         DELETE FROM mcp_servers WHERE id = 'math'",
    );
    let error = ServerRepository::load_all(&store).await.unwrap_err();
    assert_names_the_row(&error.0, "mcp_servers", "not an id");
}

/// Bad input: a group row with a strategy this gateway does not know.
#[tokio::test]
async fn a_damaged_group_row_fails_the_load_naming_it() {
    let (store, database) = fresh_store().await;
    psql(
        &database,
        r#"INSERT INTO groups (id, strategy, definition)
           VALUES ('pool', 'fastest', '{"strategy": "fastest", "min_healthy": 1}')"#,
    );
    let error = GroupRepository::load_all(&store).await.unwrap_err();
    assert_names_the_row(&error.0, "groups", "pool");
    assert!(error.0.contains("`fastest`"), "{error}");
}

/// Bad input: tool lists whose tools are not JSON or not tools. The port treats the lists as a
/// cache, so those rows are left out and the others still load.
#[tokio::test]
async fn damaged_tool_lists_are_skipped_and_the_others_load() {
    let (store, database) = fresh_store().await;
    let lists = PostgresToolListStore::new(store);
    lists
        .save_tool_lists(&[small_tool_list("kept"), small_tool_list("math")])
        .await
        .unwrap();
    psql(
        &database,
        "UPDATE tool_lists SET tools = '[{' WHERE server_id = 'math';
         INSERT INTO tool_lists (server_id, definition_digest, tools, learned_at)
         VALUES ('web', 'ab', '{\"name\": \"not a list\"}', 0),
                ('bad id', 'ab', '[]', 0)",
    );
    assert_eq!(
        lists.load_tool_lists().await.unwrap(),
        [small_tool_list("kept")]
    );
}

/// Bad input: a source with a mode this gateway does not know, and a rejection whose
/// definition is not a JSON object.
#[tokio::test]
async fn damaged_discovery_rows_fail_their_load_naming_them() {
    let (store, database) = fresh_store().await;
    let discovery = PostgresDiscoveryStore::new(store);
    discovery
        .save_rejection(&sample_rejection("files-1", "web"))
        .await
        .unwrap();
    psql(
        &database,
        "INSERT INTO discovery_sources (source_id, source_type, mode, enabled, config, origin)
         VALUES ('docker-0', 'docker', 'eager', true, '{}', 'api');
         UPDATE discovery_rejections SET definition = '\"docker\"'",
    );
    let error = discovery.load_sources().await.unwrap_err();
    assert_names_the_row(&error.0, "discovery_sources", "docker-0");
    assert!(error.0.contains("unknown mode `eager`"), "{error}");
    let error = discovery.load_rejections().await.unwrap_err();
    assert_names_the_row(&error.0, "discovery_rejections", "files-1/web");
}

/// Bad input: a user whose hash is not a PHC string (reported without the hash), and a column
/// whose type was changed by hand (an error, where reading it blindly would panic).
#[tokio::test]
async fn damaged_user_rows_fail_the_read_cleanly() {
    let (store, database) = fresh_store().await;
    assert!(
        store
            .insert_user(&sample_user("alice", SAMPLE_TIME))
            .await
            .unwrap()
    );
    psql(
        &database,
        "INSERT INTO users (name, password_hash, created_at, password_changed_at, disabled)
         VALUES ('bob', 'plain text secret', 0, 0, false)",
    );
    let error = store.user(&sample_user_name("bob")).await.unwrap_err();
    assert_names_the_row(&error.0, "users", "bob");
    assert!(!error.0.contains("plain text secret"), "{error}");
    assert!(store.users().await.is_err());

    psql(
        &database,
        "DELETE FROM users WHERE name = 'bob';
         ALTER TABLE users ALTER COLUMN disabled TYPE integer USING disabled::integer",
    );
    let error = store.user(&sample_user_name("alice")).await.unwrap_err();
    assert!(error.0.contains("read a user row"), "{error}");
}

/// Bad input: a key row whose principal is not a principal. A refresh leaves that key out (it
/// is refused from then on) and keeps the others, a revocation of it fails and changes nothing,
/// listing the keys names the row, and a replica connecting to the database still starts.
#[tokio::test]
async fn a_damaged_key_row_is_refused_without_stopping_refresh_or_connect() {
    let (store, database) = fresh_store().await;
    let key = sample_key("damaged", SAMPLE_TIME);
    let good = sample_key("good", SAMPLE_TIME);
    store.insert_key(&key).await.unwrap();
    store.insert_key(&good).await.unwrap();
    psql(
        &database,
        "UPDATE api_keys SET principal = 'alice' WHERE id = 'key_damaged'",
    );

    store
        .refresh_keys()
        .await
        .expect("the other keys still load");
    assert_eq!(store.key_by_hash(&key.hash).await.unwrap(), None);
    assert_eq!(
        store.key_by_hash(&good.hash).await.unwrap(),
        Some(good.clone())
    );
    let error = store.keys().await.unwrap_err();
    assert_names_the_row(&error.0, "api_keys", "key_damaged");
    assert!(!error.0.contains(&key.hash.to_hex()), "{error}");

    let error = store.revoke_key(&key.id, SAMPLE_TIME).await.unwrap_err();
    assert_names_the_row(&error.0, "api_keys", "key_damaged");
    let revoked_at = psql(
        &database,
        "SELECT coalesce(revoked_at::text, 'none') FROM api_keys WHERE id = 'key_damaged'",
    );
    assert_eq!(revoked_at.trim(), "none", "the failed revocation was kept");

    let replica =
        PostgresStore::connect(PostgresSettings::new(TempPostgres::shared().url(&database)))
            .await
            .expect("a replica starts despite the damaged row");
    assert_eq!(replica.key_by_hash(&key.hash).await.unwrap(), None);
    assert_eq!(replica.key_by_hash(&good.hash).await.unwrap(), Some(good));
}

/// Bad input: a role whose permissions are not JSON, an assignment in a scope that does not
/// exist, and a policy whose allow list names no principal pattern.
#[tokio::test]
async fn damaged_access_rows_fail_their_reads_naming_them() {
    let (store, database) = fresh_store().await;
    psql(
        &database,
        "INSERT INTO custom_roles (name, description, permissions)
         VALUES ('support', '', 'not json');
         INSERT INTO role_assignments (principal, role, scope)
         VALUES ('user:a', 'viewer', 'planet:x');
         INSERT INTO tool_policies (scope, target_id, allow_list, deny_list)
         VALUES ('provider', 'math', '[\"nobody\"]', '[]')",
    );
    let error = store.custom_roles().await.unwrap_err();
    assert_names_the_row(&error.0, "custom_roles", "support");
    let error = store.assignments().await.unwrap_err();
    assert_names_the_row(&error.0, "role_assignments", "user:a viewer planet:x");
    let error = store.policies().await.unwrap_err();
    assert_names_the_row(&error.0, "tool_policies", "provider/math");
    let error = store
        .policy(&sample_address("provider", "math"))
        .await
        .unwrap_err();
    assert_names_the_row(&error.0, "tool_policies", "provider/math");
}

/// Bad input: text PostgreSQL cannot hold (a NUL character) in a rejection's name. The write
/// fails with an error naming what it did, and nothing is stored.
#[tokio::test]
async fn text_postgresql_cannot_hold_is_an_error() {
    let (store, _database) = fresh_store().await;
    let discovery = PostgresDiscoveryStore::new(store);
    let error = discovery
        .save_rejection(&sample_rejection("files-1", "nul\0name"))
        .await
        .unwrap_err();
    assert!(
        error.0.contains("could not save the discovery rejection"),
        "{error}"
    );
    assert_eq!(discovery.load_rejections().await.unwrap(), []);
}
