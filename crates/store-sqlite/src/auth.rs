//! [`AuthStore`] on the tables of migration 3: `api_keys`, `custom_roles`, `role_assignments`
//! and `tool_policies`, plus the in-memory index of API keys that serves the request path.
//!
//! # The key cache
//!
//! Authenticating a request looks its key up by SHA-256. That lookup must never wait on SQLite
//! (a slow disk, a checkpoint, another process holding the lock), so [`KeyCache`] holds every
//! key record in memory: a `HashMap` from hash to record (plus one from id to hash), behind a
//! `RwLock` that is only ever held for a map operation, never across I/O.
//!
//! - It is loaded in full when the store is opened.
//! - Every write to `api_keys` (insert, revoke) updates it inside the same blocking task that
//!   wrote the row, after the write committed and while the connection's mutex is still held.
//!   Writes therefore reach the cache in the order they reached the database, a failed write
//!   never reaches it, and by the time the write's future returns `Ok` the next lookup through
//!   any clone of the store sees it: a revocation takes effect at once. A caller that gives up
//!   on a write cannot tear the two apart, because the blocking task runs to its end anyway.
//! - `key_by_hash` and `key_by_id` answer from it; lists (`keys`) read the table, which holds
//!   the same records.
//! - Lookup cost does not depend on the number of keys (one hash of a 32-byte digest). Keying a
//!   `HashMap` by the digest leaks nothing useful through timing: an attacker controls the raw
//!   key, not its SHA-256. The record found still compares hashes in constant time
//!   ([`ApiKeyRecord::check`]).
//! - Another process writing the same file (`mcpgw auth create-key` while a gateway
//!   runs) is not seen until [`SqliteStore::reload_api_keys`] or the next open. Until then its
//!   new keys answer "unknown"; the store never falls back to SQLite on a miss, since misses
//!   are exactly what a key-guessing client produces.
//!
//! Custom roles, assignments and policies are read from SQLite; the application keeps its own
//! view of them (they change rarely and are needed as a whole, not looked up per request).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use async_trait::async_trait;
use mcpgw_authz::{
    ApiKeyRecord, AuthStore, KeyHash, KeyId, PermissionGrant, PolicyAddress, Principal, Role,
    RoleAssignment, RoleName, ToolAccessPolicy,
};
use mcpgw_core::Timestamp;
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::error::StoreError;
use crate::store::SqliteStore;

const KEYS_TABLE: &str = "api_keys";
const ROLES_TABLE: &str = "custom_roles";
const ASSIGNMENTS_TABLE: &str = "role_assignments";
const POLICIES_TABLE: &str = "tool_policies";

const KEY_COLUMNS: &str =
    "id, name, principal, role, prefix, sha256, created_at, expires_at, revoked_at";

/// Every key record, in memory, by hash and by id. See the module documentation.
pub(crate) struct KeyCache {
    index: RwLock<KeyIndex>,
}

#[derive(Default)]
struct KeyIndex {
    by_hash: HashMap<KeyHash, ApiKeyRecord>,
    hash_by_id: HashMap<KeyId, KeyHash>,
}

impl KeyIndex {
    fn remember(&mut self, record: ApiKeyRecord) {
        if let Some(previous) = self.hash_by_id.insert(record.id.clone(), record.hash)
            && previous != record.hash
        {
            self.by_hash.remove(&previous);
        }
        self.by_hash.insert(record.hash, record);
    }
}

impl KeyCache {
    /// Loads every key of the database (at open: blocking is expected there).
    pub(crate) fn load(connection: &Connection) -> Result<Self, StoreError> {
        let cache = Self {
            index: RwLock::new(KeyIndex::default()),
        };
        cache.replace_all(select_keys(connection)?);
        Ok(cache)
    }

    /// The lock is only held for map operations, which cannot panic half-way through an
    /// update, so a poisoned lock still guards a consistent index.
    fn read(&self) -> RwLockReadGuard<'_, KeyIndex> {
        self.index
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, KeyIndex> {
        self.index
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn by_hash(&self, hash: &KeyHash) -> Option<ApiKeyRecord> {
        self.read().by_hash.get(hash).cloned()
    }

    fn by_id(&self, id: &KeyId) -> Option<ApiKeyRecord> {
        let index = self.read();
        index
            .hash_by_id
            .get(id)
            .and_then(|hash| index.by_hash.get(hash))
            .cloned()
    }

    fn remember(&self, record: ApiKeyRecord) {
        self.write().remember(record);
    }

    fn replace_all(&self, records: Vec<ApiKeyRecord>) {
        let mut fresh = KeyIndex::default();
        for record in records {
            fresh.remember(record);
        }
        *self.write() = fresh;
    }

    fn len(&self) -> usize {
        self.read().by_hash.len()
    }
}

/// Shows the size only: the records hold hashes, which never go to logs.
impl fmt::Debug for KeyCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyCache")
            .field("keys", &self.len())
            .finish()
    }
}

// ----- rows -----------------------------------------------------------------------------------

/// An `api_keys` row as SQLite returns it, before the domain parses it.
struct KeyRow {
    id: String,
    name: String,
    principal: String,
    role: Option<String>,
    prefix: String,
    sha256: String,
    created_at: i64,
    expires_at: Option<i64>,
    revoked_at: Option<i64>,
}

impl KeyRow {
    /// Reads the columns of [`KEY_COLUMNS`], in that order.
    fn read(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            name: row.get(1)?,
            principal: row.get(2)?,
            role: row.get(3)?,
            prefix: row.get(4)?,
            sha256: row.get(5)?,
            created_at: row.get(6)?,
            expires_at: row.get(7)?,
            revoked_at: row.get(8)?,
        })
    }

    fn decode(self) -> Result<ApiKeyRecord, StoreError> {
        let corrupt = |reason: String| StoreError::CorruptRecord {
            table: KEYS_TABLE,
            key: self.id.clone(),
            reason,
        };
        let id = KeyId::parse(&self.id).map_err(|error| corrupt(error.to_string()))?;
        let principal =
            Principal::parse(&self.principal).map_err(|error| corrupt(error.to_string()))?;
        let role = self
            .role
            .as_deref()
            .map(RoleName::parse)
            .transpose()
            .map_err(|error| corrupt(error.to_string()))?;
        // The reason never repeats the column's value: it is (part of) a key's hash.
        let hash = KeyHash::from_hex(&self.sha256)
            .ok_or_else(|| corrupt("`sha256` is not 64 hexadecimal digits".to_owned()))?;
        Ok(ApiKeyRecord {
            id,
            name: self.name,
            principal,
            role,
            prefix: self.prefix,
            hash,
            created_at: Timestamp::from_unix_micros(self.created_at),
            expires_at: self.expires_at.map(Timestamp::from_unix_micros),
            revoked_at: self.revoked_at.map(Timestamp::from_unix_micros),
        })
    }
}

fn select_keys(connection: &Connection) -> Result<Vec<ApiKeyRecord>, StoreError> {
    let mut statement = connection
        .prepare(&format!(
            "SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_at, id"
        ))
        .map_err(StoreError::sqlite("list the api keys"))?;
    let rows = statement
        .query_map([], KeyRow::read)
        .map_err(StoreError::sqlite("list the api keys"))?;
    let mut records = Vec::new();
    for row in rows {
        records.push(
            row.map_err(StoreError::sqlite("read an api key row"))?
                .decode()?,
        );
    }
    Ok(records)
}

fn json_strings<T: ToString>(items: &[T]) -> String {
    let strings: Vec<String> = items.iter().map(ToString::to_string).collect();
    // A list of strings always serializes.
    serde_json::to_string(&strings).unwrap_or_else(|_| "[]".to_owned())
}

fn parse_json_strings(
    raw: &str,
    table: &'static str,
    key: &str,
    column: &str,
) -> Result<Vec<String>, StoreError> {
    serde_json::from_str(raw).map_err(|error| StoreError::CorruptRecord {
        table,
        key: key.to_owned(),
        reason: format!("`{column}` is not a json array of strings: {error}"),
    })
}

fn decode_role(name: String, description: String, permissions: &str) -> Result<Role, StoreError> {
    let corrupt = |reason: String| StoreError::CorruptRecord {
        table: ROLES_TABLE,
        key: name.clone(),
        reason,
    };
    let role_name = RoleName::parse(&name).map_err(|error| corrupt(error.to_string()))?;
    let grants = parse_json_strings(permissions, ROLES_TABLE, &name, "permissions")?
        .iter()
        .map(|grant| PermissionGrant::parse(grant))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| corrupt(error.to_string()))?;
    Role::custom(role_name, &description, grants).map_err(|error| corrupt(error.to_string()))
}

fn decode_assignment(
    principal: &str,
    role: &str,
    scope: &str,
) -> Result<RoleAssignment, StoreError> {
    RoleAssignment::parse(principal, role, Some(scope)).map_err(|error| StoreError::CorruptRecord {
        table: ASSIGNMENTS_TABLE,
        key: format!("{principal} {role} {scope}"),
        reason: error.to_string(),
    })
}

fn decode_policy(
    scope: &str,
    target_id: &str,
    allow_list: &str,
    deny_list: &str,
) -> Result<ToolAccessPolicy, StoreError> {
    let key = format!("{scope}/{target_id}");
    let corrupt = |reason: String| StoreError::CorruptRecord {
        table: POLICIES_TABLE,
        key: key.clone(),
        reason,
    };
    let address =
        PolicyAddress::parse(scope, target_id).map_err(|error| corrupt(error.to_string()))?;
    let allow = parse_json_strings(allow_list, POLICIES_TABLE, &key, "allow_list")?;
    let deny = parse_json_strings(deny_list, POLICIES_TABLE, &key, "deny_list")?;
    ToolAccessPolicy::parse(address, &allow, &deny).map_err(|error| corrupt(error.to_string()))
}

// ----- the store ------------------------------------------------------------------------------

impl SqliteStore {
    /// Reloads every API key from the database into memory, replacing what was there.
    ///
    /// Writes through this store (and its clones) keep the memory current on their own; this is
    /// for keys that another process wrote to the same file, such as `mcpgw auth
    /// create-key` run while the gateway is up.
    pub async fn reload_api_keys(&self) -> Result<(), StoreError> {
        let cache = Arc::clone(&self.key_cache);
        self.run_blocking(move |connection| {
            cache.replace_all(select_keys(connection)?);
            Ok(())
        })
        .await
    }

    /// How many API keys are held in memory (revoked and expired ones included).
    pub fn cached_api_keys(&self) -> usize {
        self.key_cache.len()
    }

    async fn store_key(&self, record: &ApiKeyRecord) -> Result<(), StoreError> {
        let record = record.clone();
        let cache = Arc::clone(&self.key_cache);
        self.run_blocking(move |connection| {
            connection
                .execute(
                    &format!(
                        "INSERT INTO api_keys ({KEY_COLUMNS})
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
                    ),
                    params![
                        record.id.as_str(),
                        record.name,
                        record.principal.to_string(),
                        record.role.as_ref().map(RoleName::as_str),
                        record.prefix,
                        record.hash.to_hex(),
                        record.created_at.unix_micros(),
                        record.expires_at.map(Timestamp::unix_micros),
                        record.revoked_at.map(Timestamp::unix_micros),
                    ],
                )
                .map_err(StoreError::sqlite("store the api key"))?;
            cache.remember(record);
            Ok(())
        })
        .await
    }

    async fn list_keys(&self) -> Result<Vec<ApiKeyRecord>, StoreError> {
        self.run_blocking(|connection| select_keys(connection))
            .await
    }

    async fn revoke(&self, id: &KeyId, at: Timestamp) -> Result<Option<ApiKeyRecord>, StoreError> {
        let id = id.as_str().to_owned();
        let cache = Arc::clone(&self.key_cache);
        self.run_blocking(move |connection| {
            // `coalesce` keeps the first revocation time of a key revoked before.
            let row = connection
                .query_row(
                    &format!(
                        "UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?2)
                         WHERE id = ?1 RETURNING {KEY_COLUMNS}"
                    ),
                    params![id, at.unix_micros()],
                    KeyRow::read,
                )
                .optional()
                .map_err(StoreError::sqlite("revoke the api key"))?;
            let Some(row) = row else {
                return Ok(None);
            };
            let record = row.decode()?;
            cache.remember(record.clone());
            Ok(Some(record))
        })
        .await
    }

    async fn list_roles(&self) -> Result<Vec<Role>, StoreError> {
        self.run_blocking(|connection| {
            let mut statement = connection
                .prepare("SELECT name, description, permissions FROM custom_roles ORDER BY name")
                .map_err(StoreError::sqlite("list the custom roles"))?;
            let rows = statement
                .query_map([], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                    ))
                })
                .map_err(StoreError::sqlite("list the custom roles"))?;
            let mut roles = Vec::new();
            for row in rows {
                let (name, description, permissions) =
                    row.map_err(StoreError::sqlite("read a custom role row"))?;
                roles.push(decode_role(name, description, &permissions)?);
            }
            Ok(roles)
        })
        .await
    }

    /// Runs one write statement and answers whether it changed a row.
    async fn write_one(
        &self,
        operation: &'static str,
        sql: &'static str,
        values: Vec<String>,
    ) -> Result<bool, StoreError> {
        self.run_blocking(move |connection| {
            let changed = connection
                .execute(sql, rusqlite::params_from_iter(values))
                .map_err(StoreError::sqlite(operation))?;
            Ok(changed > 0)
        })
        .await
    }

    async fn list_assignments(&self) -> Result<Vec<RoleAssignment>, StoreError> {
        let mut assignments = self
            .run_blocking(|connection| {
                let mut statement = connection
                    .prepare("SELECT principal, role, scope FROM role_assignments")
                    .map_err(StoreError::sqlite("list the role assignments"))?;
                let rows = statement
                    .query_map([], |row| {
                        Ok((
                            row.get::<_, String>(0)?,
                            row.get::<_, String>(1)?,
                            row.get::<_, String>(2)?,
                        ))
                    })
                    .map_err(StoreError::sqlite("list the role assignments"))?;
                let mut assignments = Vec::new();
                for row in rows {
                    let (principal, role, scope) =
                        row.map_err(StoreError::sqlite("read a role assignment row"))?;
                    assignments.push(decode_assignment(&principal, &role, &scope)?);
                }
                Ok(assignments)
            })
            .await?;
        // The port's order is the domain's (principal kind before name, `global` before
        // tenants), which no text collation reproduces.
        assignments.sort();
        Ok(assignments)
    }

    async fn list_policies(&self) -> Result<Vec<ToolAccessPolicy>, StoreError> {
        let mut policies = self
            .run_blocking(|connection| {
                let mut statement = connection
                    .prepare("SELECT scope, target_id, allow_list, deny_list FROM tool_policies")
                    .map_err(StoreError::sqlite("list the tool access policies"))?;
                let rows = statement
                    .query_map([], |row| {
                        Ok((
                            row.get::<_, String>(0)?,
                            row.get::<_, String>(1)?,
                            row.get::<_, String>(2)?,
                            row.get::<_, String>(3)?,
                        ))
                    })
                    .map_err(StoreError::sqlite("list the tool access policies"))?;
                let mut policies = Vec::new();
                for row in rows {
                    let (scope, target, allow, deny) =
                        row.map_err(StoreError::sqlite("read a tool access policy row"))?;
                    policies.push(decode_policy(&scope, &target, &allow, &deny)?);
                }
                Ok(policies)
            })
            .await?;
        // By address: provider, group, tool (the domain's order), then target.
        policies.sort_by(|left, right| left.address().cmp(right.address()));
        Ok(policies)
    }

    async fn read_policy(
        &self,
        address: &PolicyAddress,
    ) -> Result<Option<ToolAccessPolicy>, StoreError> {
        let scope = address.scope().as_str();
        let target = address.target_id().to_owned();
        self.run_blocking(move |connection| {
            let row = connection
                .query_row(
                    "SELECT allow_list, deny_list FROM tool_policies
                     WHERE scope = ?1 AND target_id = ?2",
                    params![scope, target],
                    |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)),
                )
                .optional()
                .map_err(StoreError::sqlite("read the tool access policy"))?;
            row.map(|(allow, deny)| decode_policy(scope, &target, &allow, &deny))
                .transpose()
        })
        .await
    }
}

#[async_trait]
impl AuthStore for SqliteStore {
    async fn insert_key(&self, record: &ApiKeyRecord) -> Result<(), mcpgw_authz::StoreError> {
        Ok(self.store_key(record).await?)
    }

    /// From memory only: never waits on SQLite.
    async fn key_by_hash(
        &self,
        hash: &KeyHash,
    ) -> Result<Option<ApiKeyRecord>, mcpgw_authz::StoreError> {
        Ok(self.key_cache.by_hash(hash))
    }

    /// From memory only: never waits on SQLite.
    async fn key_by_id(&self, id: &KeyId) -> Result<Option<ApiKeyRecord>, mcpgw_authz::StoreError> {
        Ok(self.key_cache.by_id(id))
    }

    async fn keys(&self) -> Result<Vec<ApiKeyRecord>, mcpgw_authz::StoreError> {
        Ok(self.list_keys().await?)
    }

    async fn revoke_key(
        &self,
        id: &KeyId,
        at: Timestamp,
    ) -> Result<Option<ApiKeyRecord>, mcpgw_authz::StoreError> {
        Ok(self.revoke(id, at).await?)
    }

    async fn custom_roles(&self) -> Result<Vec<Role>, mcpgw_authz::StoreError> {
        Ok(self.list_roles().await?)
    }

    async fn insert_custom_role(&self, role: &Role) -> Result<bool, mcpgw_authz::StoreError> {
        Ok(self
            .write_one(
                "store the custom role",
                "INSERT INTO custom_roles (name, description, permissions) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO NOTHING",
                vec![
                    role.name().to_string(),
                    role.description().to_owned(),
                    json_strings(role.permissions()),
                ],
            )
            .await?)
    }

    async fn replace_custom_role(&self, role: &Role) -> Result<bool, mcpgw_authz::StoreError> {
        Ok(self
            .write_one(
                "replace the custom role",
                "UPDATE custom_roles SET description = ?2, permissions = ?3 WHERE name = ?1",
                vec![
                    role.name().to_string(),
                    role.description().to_owned(),
                    json_strings(role.permissions()),
                ],
            )
            .await?)
    }

    async fn delete_custom_role(&self, name: &RoleName) -> Result<bool, mcpgw_authz::StoreError> {
        Ok(self
            .write_one(
                "delete the custom role",
                "DELETE FROM custom_roles WHERE name = ?1",
                vec![name.to_string()],
            )
            .await?)
    }

    async fn assignments(&self) -> Result<Vec<RoleAssignment>, mcpgw_authz::StoreError> {
        Ok(self.list_assignments().await?)
    }

    async fn insert_assignment(
        &self,
        assignment: &RoleAssignment,
    ) -> Result<bool, mcpgw_authz::StoreError> {
        Ok(self
            .write_one(
                "store the role assignment",
                "INSERT INTO role_assignments (principal, role, scope) VALUES (?1, ?2, ?3)
                 ON CONFLICT (principal, role, scope) DO NOTHING",
                assignment_values(assignment),
            )
            .await?)
    }

    async fn delete_assignment(
        &self,
        assignment: &RoleAssignment,
    ) -> Result<bool, mcpgw_authz::StoreError> {
        Ok(self
            .write_one(
                "delete the role assignment",
                "DELETE FROM role_assignments WHERE principal = ?1 AND role = ?2 AND scope = ?3",
                assignment_values(assignment),
            )
            .await?)
    }

    async fn policies(&self) -> Result<Vec<ToolAccessPolicy>, mcpgw_authz::StoreError> {
        Ok(self.list_policies().await?)
    }

    async fn policy(
        &self,
        address: &PolicyAddress,
    ) -> Result<Option<ToolAccessPolicy>, mcpgw_authz::StoreError> {
        Ok(self.read_policy(address).await?)
    }

    async fn put_policy(&self, policy: &ToolAccessPolicy) -> Result<(), mcpgw_authz::StoreError> {
        self.write_one(
            "store the tool access policy",
            "INSERT INTO tool_policies (scope, target_id, allow_list, deny_list)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (scope, target_id) DO UPDATE SET
                 allow_list = excluded.allow_list, deny_list = excluded.deny_list",
            vec![
                policy.address().scope().as_str().to_owned(),
                policy.address().target_id().to_owned(),
                json_strings(policy.allow_list()),
                json_strings(policy.deny_list()),
            ],
        )
        .await?;
        Ok(())
    }

    async fn delete_policy(
        &self,
        address: &PolicyAddress,
    ) -> Result<bool, mcpgw_authz::StoreError> {
        Ok(self
            .write_one(
                "delete the tool access policy",
                "DELETE FROM tool_policies WHERE scope = ?1 AND target_id = ?2",
                vec![
                    address.scope().as_str().to_owned(),
                    address.target_id().to_owned(),
                ],
            )
            .await?)
    }

    /// The memory of keys is replaced by what the file holds now ([`SqliteStore::reload_api_keys`]).
    async fn refresh_keys(&self) -> Result<(), mcpgw_authz::StoreError> {
        Ok(self.reload_api_keys().await?)
    }
}

fn assignment_values(assignment: &RoleAssignment) -> Vec<String> {
    vec![
        assignment.principal.to_string(),
        assignment.role.to_string(),
        assignment.scope.to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use mcpgw_testkit::auth_store::{SAMPLE_TIME, sample_bare_key, sample_key};

    use super::*;

    fn open_temporary_store() -> (SqliteStore, tempfile::TempDir) {
        let directory = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&directory.path().join("auth.sqlite3")).unwrap();
        (store, directory)
    }

    /// While another thread holds the database connection (as a long write or a stuck disk
    /// would), key lookups still answer; a lookup that went to SQLite would wait for the
    /// connection and hit the timeout.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn key_lookups_answer_while_the_database_is_busy() {
        let (store, _directory) = open_temporary_store();
        let record = sample_key("busy", SAMPLE_TIME);
        store.insert_key(&record).await.unwrap();

        let connection = store.connection_for_tests();
        let (locked_sender, locked) = mpsc::channel();
        let (release, release_receiver) = mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let _guard = connection.lock().unwrap();
            locked_sender.send(()).unwrap();
            let _ = release_receiver.recv();
        });
        locked.recv().unwrap();

        let lookups = async {
            (
                store.key_by_hash(&record.hash).await.unwrap(),
                store.key_by_id(&record.id).await.unwrap(),
                store
                    .key_by_hash(&sample_key("other", SAMPLE_TIME).hash)
                    .await
                    .unwrap(),
            )
        };
        let answered = tokio::time::timeout(Duration::from_secs(10), lookups).await;
        release.send(()).unwrap();
        holder.join().unwrap();
        let (by_hash, by_id, unknown) = answered.expect("a key lookup waited on the database");
        assert_eq!(by_hash, Some(record.clone()));
        assert_eq!(by_id, Some(record));
        assert_eq!(unknown, None);
    }

    /// A write that fails in SQLite must not reach the cache: a taken hash under a new id
    /// would otherwise make the impostor record answer lookups.
    #[tokio::test]
    async fn a_failed_write_leaves_the_cache_unchanged() {
        let (store, _directory) = open_temporary_store();
        let original = sample_key("original", SAMPLE_TIME);
        store.insert_key(&original).await.unwrap();
        let impostor = ApiKeyRecord {
            id: KeyId::parse("key_impostor").unwrap(),
            ..sample_bare_key("original", SAMPLE_TIME)
        };
        assert_eq!(impostor.hash, original.hash);
        let error = store.insert_key(&impostor).await.unwrap_err();
        assert!(error.0.contains("api key"), "{error}");
        assert!(!error.0.contains(&original.hash.to_hex()), "{error}");
        assert_eq!(
            store.key_by_hash(&original.hash).await.unwrap(),
            Some(original)
        );
        assert_eq!(store.key_by_id(&impostor.id).await.unwrap(), None);
        assert_eq!(store.cached_api_keys(), 1);
    }

    #[test]
    fn rows_that_do_not_decode_are_reported_with_their_key_and_never_their_hash() {
        let valid = || KeyRow {
            id: "key_0123".to_owned(),
            name: "n".to_owned(),
            principal: "user:alice".to_owned(),
            role: Some("viewer".to_owned()),
            prefix: "mcp_abcdefgh".to_owned(),
            sha256: "0f".repeat(32),
            created_at: 1,
            expires_at: None,
            revoked_at: None,
        };
        assert!(valid().decode().is_ok());
        let almost_a_hash = format!("{}zz", "0f".repeat(31));
        let broken = [
            KeyRow {
                principal: "alice".to_owned(),
                ..valid()
            },
            KeyRow {
                role: Some("Not A Role".to_owned()),
                ..valid()
            },
            KeyRow {
                sha256: almost_a_hash.clone(),
                ..valid()
            },
        ];
        for row in broken {
            let error = row.decode().unwrap_err();
            assert!(
                matches!(&error, StoreError::CorruptRecord { table: "api_keys", key, .. } if key == "key_0123"),
                "{error:?}"
            );
            assert!(!error.to_string().contains(&almost_a_hash[..20]), "{error}");
        }

        for (permissions, what) in [
            ("not json", "broken json"),
            (r#"["tool:fly"]"#, "an unknown permission"),
        ] {
            let error = decode_role("support".into(), String::new(), permissions).unwrap_err();
            assert!(
                matches!(&error, StoreError::CorruptRecord { table: "custom_roles", key, .. } if key == "support"),
                "{what}: {error:?}"
            );
        }
        let error = decode_assignment("user:a", "viewer", "planet:x").unwrap_err();
        assert!(
            matches!(
                &error,
                StoreError::CorruptRecord {
                    table: "role_assignments",
                    ..
                }
            ),
            "{error:?}"
        );
        let error = decode_policy("tool", "no-separator", "[]", "[]").unwrap_err();
        assert!(
            matches!(&error, StoreError::CorruptRecord { table: "tool_policies", key, .. } if key == "tool/no-separator"),
            "{error:?}"
        );
        let error = decode_policy("provider", "math", r#"["nobody"]"#, "[]").unwrap_err();
        assert!(
            matches!(
                &error,
                StoreError::CorruptRecord {
                    table: "tool_policies",
                    ..
                }
            ),
            "{error:?}"
        );
    }

    #[test]
    fn the_cache_shows_its_size_and_never_a_hash_in_debug_output() {
        let mut connection = Connection::open_in_memory().unwrap();
        let path = std::path::Path::new(":memory:");
        crate::schema::migrate(&mut connection, path, crate::schema::MIGRATIONS).unwrap();
        let cache = KeyCache::load(&connection).unwrap();
        let record = sample_key("shown", SAMPLE_TIME);
        cache.remember(record.clone());
        let shown = format!("{cache:?}");
        assert_eq!(shown, "KeyCache { keys: 1 }");
        assert!(!shown.contains(&record.hash.to_hex()));
    }
}
