//! The SQLite store against the `AuthStore` contract (the test kit's suite, on a real file in a
//! temporary directory), plus what only a file can get wrong: data surviving a reopen, a
//! database of schema version 2 migrating, raw keys never reaching the disk, clones and other
//! processes on the same file, and ten thousand keys.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mcpgw_authz::{
    ApiKeyRecord, AuthStore, KeyHash, NewApiKey, RandomnessError, RoleBook, SecretSource,
};
use mcpgw_core::{ServerId, Timestamp};
use mcpgw_groups::GroupRepository;
use mcpgw_store_sqlite::SqliteStore;
use mcpgw_testkit::auth_store::{
    SAMPLE_TIME, sample_assignment, sample_bare_key, sample_key, sample_policy, sample_role,
};
use mcpgw_testkit::repository_suite::RepositoryWithGuard;
use tempfile::TempDir;

fn database_path(directory: &TempDir) -> PathBuf {
    directory.path().join("data").join("mcpgw.sqlite3")
}

fn open_temporary_store() -> RepositoryWithGuard<SqliteStore, TempDir> {
    let directory = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&database_path(&directory)).unwrap();
    RepositoryWithGuard::new(store, directory)
}

mod contract {
    mcpgw_testkit::auth_store_contract_suite!(super::open_temporary_store());
}

fn seconds(offset: i64) -> Timestamp {
    Timestamp::from_unix_micros(SAMPLE_TIME.unix_micros() + offset * 1_000_000)
}

#[tokio::test]
async fn everything_survives_closing_and_reopening_the_file() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(&directory);
    let active = sample_key("active", seconds(0));
    let revoked = sample_bare_key("revoked", seconds(1));
    let role = sample_role("support");
    let assignments = [
        sample_assignment("user:alice", "support", "global"),
        sample_assignment("user:alice", "support", "tenant:acme"),
    ];
    let policy = sample_policy("tool", "math__add");
    let revoked_record;
    {
        let store = SqliteStore::open(&path).unwrap();
        store.insert_key(&active).await.unwrap();
        store.insert_key(&revoked).await.unwrap();
        revoked_record = store
            .revoke_key(&revoked.id, seconds(5))
            .await
            .unwrap()
            .unwrap();
        assert!(store.insert_custom_role(&role).await.unwrap());
        for assignment in &assignments {
            assert!(store.insert_assignment(assignment).await.unwrap());
        }
        store.put_policy(&policy).await.unwrap();
    }

    let reopened = SqliteStore::open(&path).unwrap();
    assert_eq!(reopened.cached_api_keys(), 2);
    // Lookups after a reopen come from the keys loaded at open, revocation included.
    assert_eq!(
        reopened.key_by_hash(&active.hash).await.unwrap(),
        Some(active.clone())
    );
    assert_eq!(
        reopened.key_by_hash(&revoked.hash).await.unwrap(),
        Some(revoked_record.clone())
    );
    assert_eq!(revoked_record.revoked_at, Some(seconds(5)));
    assert_eq!(reopened.keys().await.unwrap(), [active, revoked_record]);
    assert_eq!(reopened.custom_roles().await.unwrap(), [role]);
    assert_eq!(reopened.assignments().await.unwrap(), assignments);
    assert_eq!(
        reopened.policy(policy.address()).await.unwrap(),
        Some(policy.clone())
    );
    assert_eq!(reopened.policies().await.unwrap(), [policy]);
}

/// The schema of migrations 1 and 2 exactly as databases in the field have it.
const SCHEMA_VERSION_2: &str = "
    CREATE TABLE mcp_servers (
        id TEXT PRIMARY KEY NOT NULL,
        mode TEXT NOT NULL,
        definition TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    ) STRICT;
    CREATE TABLE groups (
        id TEXT PRIMARY KEY NOT NULL,
        strategy TEXT NOT NULL,
        definition TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    ) STRICT;
    PRAGMA user_version = 2;
";

#[tokio::test]
async fn a_database_of_schema_version_2_is_migrated_and_keeps_its_groups() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("old.sqlite3");
    {
        let connection = rusqlite::Connection::open(&path).unwrap();
        connection.execute_batch(SCHEMA_VERSION_2).unwrap();
        connection
            .execute_batch(
                r#"INSERT INTO groups (id, strategy, definition, created_at, updated_at)
                   VALUES ('pool', 'round_robin',
                           '{"strategy": "round_robin", "min_healthy": 1,
                             "members": [{"id": "math", "weight": 1}]}',
                           'then', 'then');"#,
            )
            .unwrap();
    }

    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(SqliteStore::schema_version(), 8);
    let groups = GroupRepository::load_all(&store).await.unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].id, ServerId::parse("pool").unwrap());
    assert_eq!(store.keys().await.unwrap(), []);

    let key = sample_key("after-migration", SAMPLE_TIME);
    store.insert_key(&key).await.unwrap();
    assert!(
        store
            .insert_custom_role(&sample_role("migrated"))
            .await
            .unwrap()
    );
    drop(store);

    let reopened = SqliteStore::open(&path).unwrap();
    assert_eq!(reopened.key_by_hash(&key.hash).await.unwrap(), Some(key));
    let version: u32 = rusqlite::Connection::open(&path)
        .unwrap()
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap();
    assert_eq!(version, SqliteStore::schema_version());
}

/// Hands out a fixed byte pattern, so the raw key of the test is known.
struct PatternSecrets(Mutex<u8>);

impl SecretSource for PatternSecrets {
    fn fill(&self, destination: &mut [u8]) -> Result<(), RandomnessError> {
        let mut next = self.0.lock().unwrap();
        for byte in destination {
            *byte = next.wrapping_mul(37).wrapping_add(11);
            *next = next.wrapping_add(1);
        }
        Ok(())
    }
}

fn file_bytes_with_wal(path: &Path) -> Vec<u8> {
    let mut bytes = std::fs::read(path).unwrap();
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    if let Ok(more) = std::fs::read(PathBuf::from(wal)) {
        bytes.extend(more);
    }
    bytes
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

#[tokio::test]
async fn the_database_holds_the_hash_and_the_prefix_never_the_raw_key() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(&directory);
    let store = SqliteStore::open(&path).unwrap();
    let issued = NewApiKey::parse(
        "user:alice",
        "laptop",
        Some("viewer"),
        Some(30),
        &RoleBook::default(),
    )
    .unwrap()
    .issue(&PatternSecrets(Mutex::new(0)), SAMPLE_TIME)
    .unwrap();
    store.insert_key(&issued.record).await.unwrap();
    let raw = issued.raw_key.expose();

    let bytes = file_bytes_with_wal(&path);
    assert!(
        contains(&bytes, issued.record.hash.to_hex().as_bytes()),
        "the test reads the wrong file: the hash is not in it"
    );
    // The listed prefix (12 characters) is stored; anything longer of the raw key is not.
    let secret_tail = &raw[issued.record.prefix.len()..];
    assert!(!contains(&bytes, raw.as_bytes()), "the raw key is on disk");
    assert!(
        !contains(&bytes, secret_tail.as_bytes()),
        "the secret part of the key is on disk"
    );
    assert_eq!(
        store.key_by_hash(&KeyHash::of(raw)).await.unwrap(),
        Some(issued.record)
    );
}

#[tokio::test]
async fn a_revocation_through_one_clone_is_seen_by_every_other_at_once() {
    let (store, _directory) = {
        let guarded = open_temporary_store();
        (guarded.repository, guarded.guard)
    };
    let request_path = store.clone();
    let record = sample_key("shared", SAMPLE_TIME);
    store.insert_key(&record).await.unwrap();
    assert_eq!(
        request_path.key_by_hash(&record.hash).await.unwrap(),
        Some(record.clone())
    );
    store.revoke_key(&record.id, seconds(9)).await.unwrap();
    let seen = request_path
        .key_by_hash(&record.hash)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(seen.revoked_at, Some(seconds(9)));
}

/// Another process (here: another store on the same file) that adds a key is not seen by the
/// running store's lookups until it reloads; after the reload it is, and revocations made by
/// the other process are too.
#[tokio::test]
async fn keys_written_by_another_process_are_seen_after_a_reload() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(&directory);
    let running = SqliteStore::open(&path).unwrap();
    let kept = sample_key("kept", seconds(0));
    running.insert_key(&kept).await.unwrap();

    let other_process = SqliteStore::open(&path).unwrap();
    let added = sample_key("added-elsewhere", seconds(1));
    other_process.insert_key(&added).await.unwrap();
    other_process
        .revoke_key(&kept.id, seconds(2))
        .await
        .unwrap();

    assert_eq!(running.key_by_hash(&added.hash).await.unwrap(), None);
    // Through the port, as the gateway does it.
    let port: &dyn AuthStore = &running;
    port.refresh_keys().await.unwrap();
    assert_eq!(running.key_by_hash(&added.hash).await.unwrap(), Some(added));
    assert_eq!(
        running
            .key_by_hash(&kept.hash)
            .await
            .unwrap()
            .unwrap()
            .revoked_at,
        Some(seconds(2))
    );
    assert_eq!(running.cached_api_keys(), 2);
}

const MANY_KEYS: usize = 10_000;

/// Writes `count` keys straight into the file in one transaction (inserting them one by one
/// through the store would spend the test's time on fsyncs).
fn write_keys_directly(path: &Path, records: &[ApiKeyRecord]) {
    let mut connection = rusqlite::Connection::open(path).unwrap();
    let transaction = connection.transaction().unwrap();
    {
        let mut insert = transaction
            .prepare(
                "INSERT INTO api_keys (id, name, principal, role, prefix, sha256, created_at,
                                       expires_at, revoked_at)
                 VALUES (?1, ?2, ?3, NULL, ?4, ?5, ?6, NULL, NULL)",
            )
            .unwrap();
        for record in records {
            insert
                .execute(rusqlite::params![
                    record.id.as_str(),
                    record.name,
                    record.principal.to_string(),
                    record.prefix,
                    record.hash.to_hex(),
                    record.created_at.unix_micros(),
                ])
                .unwrap();
        }
    }
    transaction.commit().unwrap();
}

/// Ten thousand keys load at open and each is found by its hash. The time bound is loose (a
/// hash-map lookup takes microseconds even in a debug build); it catches a store that scans
/// every key per lookup, which takes seconds here.
#[tokio::test]
async fn ten_thousand_keys_are_loaded_at_open_and_found_quickly() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(&directory);
    drop(SqliteStore::open(&path).unwrap());
    let records: Vec<ApiKeyRecord> = (0..MANY_KEYS)
        .map(|index| sample_bare_key(&format!("k{index:05}"), seconds(index as i64)))
        .collect();
    write_keys_directly(&path, &records);

    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.cached_api_keys(), MANY_KEYS);
    let started = Instant::now();
    for record in &records {
        let found = store.key_by_hash(&record.hash).await.unwrap();
        assert_eq!(found.as_ref().map(|found| &found.id), Some(&record.id));
    }
    let elapsed = started.elapsed();
    eprintln!(
        "{MANY_KEYS} lookups took {elapsed:?} ({:?} each)",
        elapsed / MANY_KEYS as u32
    );
    assert!(
        elapsed < Duration::from_secs(2),
        "{MANY_KEYS} lookups took {elapsed:?}"
    );

    // The cache of a large store still follows writes.
    let last = &records[MANY_KEYS - 1];
    store.revoke_key(&last.id, seconds(1)).await.unwrap();
    assert_eq!(
        store
            .key_by_hash(&last.hash)
            .await
            .unwrap()
            .unwrap()
            .revoked_at,
        Some(seconds(1))
    );
    let new = sample_key("new", seconds(-1));
    store.insert_key(&new).await.unwrap();
    assert_eq!(store.key_by_hash(&new.hash).await.unwrap(), Some(new));
    assert_eq!(store.cached_api_keys(), MANY_KEYS + 1);
}
