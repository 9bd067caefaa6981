//! [`AuthStore`] on the tables `api_keys`, `custom_roles`, `role_assignments` and
//! `tool_policies`, plus the in-memory index of API keys that serves the request path.
//!
//! # The key cache
//!
//! Authenticating a request looks its key up by SHA-256. That lookup must never wait on
//! PostgreSQL (a slow network, a failover, a pool with every connection busy), so [`KeyCache`]
//! holds every key record in memory: a `HashMap` from hash to record (plus one from id to
//! hash), behind a `RwLock` that is only ever held for a map operation, never across I/O.
//!
//! - It is loaded in full when the store connects.
//! - Every write to `api_keys` through this store (insert, revoke) updates it after the write
//!   committed. Those writes, and the reloads, take the cache's write lock in turn, so they reach
//!   the cache in the order they reached the database and a reload never drops a write of this
//!   replica that committed while it read. Each runs as a task of its own, so a caller that gives
//!   up on a write cannot leave a committed write out of the cache. A failed write never reaches
//!   it, and by the time the write's future returns `Ok` the next lookup through any clone of
//!   the store sees it: a revocation takes effect at once on this replica.
//! - Other replicas write the same table. Each write there notifies [`Topic::Keys`] on commit;
//!   the gateway answers with [`AuthStore::refresh_keys`] (and calls it every few seconds
//!   anyway), which rereads every key, so a key revoked on another replica is refused here
//!   after the next refresh. Until then its new keys answer "unknown": the store never falls
//!   back to the database on a miss, since misses are exactly what a key-guessing client
//!   produces.
//! - `key_by_hash` and `key_by_id` answer from it; lists (`keys`) read the table.
//! - Keying a `HashMap` by the digest leaks nothing useful through timing: an attacker controls
//!   the raw key, not its SHA-256. The record found still compares hashes in constant time
//!   ([`ApiKeyRecord::check`]).
//!
//! Custom roles, assignments and policies are read from the database; the application keeps
//! its own view of them (they change rarely and are needed as a whole, not looked up per
//! request). Their writes notify [`Topic::Access`].

use std::collections::HashMap;
use std::fmt;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use async_trait::async_trait;
use mcpgw_authz::{
    ApiKeyRecord, AuthStore, KeyHash, KeyId, PermissionGrant, PolicyAddress, Principal, Role,
    RoleAssignment, RoleName, ToolAccessPolicy,
};
use mcpgw_core::Timestamp;
use tokio_postgres::Row;

use crate::changes::{Topic, notify};
use crate::error::StoreError;
use crate::sql::column;
use crate::store::PostgresStore;

const KEYS_TABLE: &str = "api_keys";
const ROLES_TABLE: &str = "custom_roles";
const ASSIGNMENTS_TABLE: &str = "role_assignments";
const POLICIES_TABLE: &str = "tool_policies";

/// Every key record, in memory, by hash and by id. See the module documentation.
pub(crate) struct KeyCache {
    index: RwLock<KeyIndex>,
    /// Taken by every key write and every reload, from the statement to the cache update.
    writes: tokio::sync::Mutex<()>,
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
    /// An empty cache, filled at connect by [`PostgresStore::reload_api_keys`].
    pub(crate) fn empty() -> Self {
        Self {
            index: RwLock::new(KeyIndex::default()),
            writes: tokio::sync::Mutex::new(()),
        }
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

// Every statement on `api_keys` answers its columns in the order `KeyRow::read` reads them.
const SELECT_KEYS_SQL: &str =
    "SELECT id, name, principal, role, prefix, sha256, created_at, expires_at, revoked_at
     FROM api_keys ORDER BY created_at, id";
const SELECT_KEY_SQL: &str =
    "SELECT id, name, principal, role, prefix, sha256, created_at, expires_at, revoked_at
     FROM api_keys WHERE id = $1";
const INSERT_KEY_SQL: &str =
    "INSERT INTO api_keys (id, name, principal, role, prefix, sha256, created_at, expires_at,
                           revoked_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
const REVOKE_KEY_SQL: &str = "UPDATE api_keys SET revoked_at = $2
     WHERE id = $1 AND revoked_at IS NULL
     RETURNING id, name, principal, role, prefix, sha256, created_at, expires_at, revoked_at";

/// An `api_keys` row as PostgreSQL returns it, before the domain parses it.
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
    /// Reads `id, name, principal, role, prefix, sha256, created_at, expires_at, revoked_at`,
    /// in that order.
    fn read(row: &Row) -> Result<Self, StoreError> {
        let operation = "read an api key row";
        Ok(Self {
            id: column(row, 0, operation)?,
            name: column(row, 1, operation)?,
            principal: column(row, 2, operation)?,
            role: column(row, 3, operation)?,
            prefix: column(row, 4, operation)?,
            sha256: column(row, 5, operation)?,
            created_at: column(row, 6, operation)?,
            expires_at: column(row, 7, operation)?,
            revoked_at: column(row, 8, operation)?,
        })
    }

    fn decode(self) -> Result<ApiKeyRecord, StoreError> {
        let corrupt = |reason: String| StoreError::CorruptRecord {
            table: KEYS_TABLE,
            key: mcpgw_core::bounded_for_message(&self.id),
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

fn decode_role(name: &str, description: &str, permissions: &str) -> Result<Role, StoreError> {
    let key = mcpgw_core::bounded_for_message(name);
    let corrupt = |reason: String| StoreError::CorruptRecord {
        table: ROLES_TABLE,
        key: key.clone(),
        reason,
    };
    let role_name = RoleName::parse(name).map_err(|error| corrupt(error.to_string()))?;
    let grants = parse_json_strings(permissions, ROLES_TABLE, &key, "permissions")?
        .iter()
        .map(|grant| PermissionGrant::parse(grant))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| corrupt(error.to_string()))?;
    Role::custom(role_name, description, grants).map_err(|error| corrupt(error.to_string()))
}

fn decode_assignment(
    principal: &str,
    role: &str,
    scope: &str,
) -> Result<RoleAssignment, StoreError> {
    RoleAssignment::parse(principal, role, Some(scope)).map_err(|error| StoreError::CorruptRecord {
        table: ASSIGNMENTS_TABLE,
        key: mcpgw_core::bounded_for_message(&format!("{principal} {role} {scope}")),
        reason: error.to_string(),
    })
}

fn decode_policy(
    scope: &str,
    target_id: &str,
    allow_list: &str,
    deny_list: &str,
) -> Result<ToolAccessPolicy, StoreError> {
    let key = mcpgw_core::bounded_for_message(&format!("{scope}/{target_id}"));
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

impl PostgresStore {
    /// Rereads every API key from the database into memory, replacing what was there.
    ///
    /// Writes through this store (and its clones) keep the memory current on their own; this
    /// is for keys that other replicas wrote or revoked. When the database cannot be read the
    /// memory stays as it was. A damaged row is left out with a warning naming it: its key is
    /// then refused (as an unknown one), and one bad row neither stops a replica from starting
    /// (the whole fleet shares it) nor keeps revocations of the other keys from arriving.
    pub async fn reload_api_keys(&self) -> Result<(), StoreError> {
        let _writing = self.key_cache.writes.lock().await;
        let rows = self
            .read_rows("list the api keys", SELECT_KEYS_SQL, &[])
            .await?;
        let records = rows
            .iter()
            .filter_map(|row| match KeyRow::read(row).and_then(KeyRow::decode) {
                Ok(record) => Some(record),
                Err(error) => {
                    tracing::warn!(%error, "an API key row cannot be read; its key is refused");
                    None
                }
            })
            .collect();
        self.key_cache.replace_all(records);
        Ok(())
    }

    /// How many API keys are held in memory (revoked and expired ones included).
    pub fn cached_api_keys(&self) -> usize {
        self.key_cache.len()
    }

    async fn select_keys(&self) -> Result<Vec<ApiKeyRecord>, StoreError> {
        let rows = self
            .read_rows("list the api keys", SELECT_KEYS_SQL, &[])
            .await?;
        rows.iter().map(|row| KeyRow::read(row)?.decode()).collect()
    }

    /// Runs `write` (a key write that answers what the cache must learn) as a task of its own
    /// holding the cache's write lock, and teaches the cache its answer: the task runs to its
    /// end even when the caller stops waiting, so a committed write always reaches the cache.
    async fn write_key<W, F>(&self, write: W) -> Result<Option<ApiKeyRecord>, StoreError>
    where
        W: FnOnce(PostgresStore) -> F,
        F: Future<Output = Result<Option<ApiKeyRecord>, StoreError>> + Send + 'static,
    {
        let store = self.clone();
        let work = write(self.clone());
        let task = tokio::spawn(async move {
            let _writing = store.key_cache.writes.lock().await;
            let learned = work.await?;
            if let Some(record) = &learned {
                store.key_cache.remember(record.clone());
            }
            Ok::<_, StoreError>(learned)
        });
        match task.await {
            Ok(outcome) => outcome,
            // A panic in the task is the caller's panic, as if the write had run in place.
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            Err(_) => Err(StoreError::Pool(
                "the runtime stopped before the api key write finished".to_owned(),
            )),
        }
    }

    async fn store_key(&self, record: &ApiKeyRecord) -> Result<(), StoreError> {
        let record = record.clone();
        self.write_key(|store| async move {
            let operation = "store the api key";
            let mut client = store.client().await?;
            let transaction = client
                .transaction()
                .await
                .map_err(StoreError::postgres(operation))?;
            transaction
                .execute(
                    INSERT_KEY_SQL,
                    &[
                        &record.id.as_str(),
                        &record.name,
                        &record.principal.to_string(),
                        &record.role.as_ref().map(RoleName::as_str),
                        &record.prefix,
                        &record.hash.to_hex(),
                        &record.created_at.unix_micros(),
                        &record.expires_at.map(Timestamp::unix_micros),
                        &record.revoked_at.map(Timestamp::unix_micros),
                    ],
                )
                .await
                .map_err(StoreError::postgres(operation))?;
            notify(&*transaction, Topic::Keys, &store.origin).await?;
            transaction
                .commit()
                .await
                .map_err(StoreError::postgres(operation))?;
            Ok(Some(record))
        })
        .await?;
        Ok(())
    }

    async fn list_keys(&self) -> Result<Vec<ApiKeyRecord>, StoreError> {
        self.select_keys().await
    }

    async fn revoke(&self, id: &KeyId, at: Timestamp) -> Result<Option<ApiKeyRecord>, StoreError> {
        let id = id.as_str().to_owned();
        self.write_key(|store| async move {
            let operation = "revoke the api key";
            let mut client = store.client().await?;
            let transaction = client
                .transaction()
                .await
                .map_err(StoreError::postgres(operation))?;
            // Only a key not revoked yet changes (and tells the other replicas); a key revoked
            // before keeps its first revocation time and is answered as stored.
            let revoked = transaction
                .query_opt(REVOKE_KEY_SQL, &[&id, &at.unix_micros()])
                .await
                .map_err(StoreError::postgres(operation))?;
            let changed = revoked.is_some();
            let row = match revoked {
                Some(row) => row,
                None => {
                    let stored = transaction
                        .query_opt(SELECT_KEY_SQL, &[&id])
                        .await
                        .map_err(StoreError::postgres(operation))?;
                    match stored {
                        Some(row) => row,
                        None => return Ok(None),
                    }
                }
            };
            let record = KeyRow::read(&row)?.decode()?;
            if changed {
                notify(&*transaction, Topic::Keys, &store.origin).await?;
            }
            transaction
                .commit()
                .await
                .map_err(StoreError::postgres(operation))?;
            Ok(Some(record))
        })
        .await
    }

    async fn list_roles(&self) -> Result<Vec<Role>, StoreError> {
        let rows = self
            .read_rows(
                "list the custom roles",
                "SELECT name, description, permissions FROM custom_roles ORDER BY name",
                &[],
            )
            .await?;
        let operation = "read a custom role row";
        rows.iter()
            .map(|row| {
                decode_role(
                    column(row, 0, operation)?,
                    column(row, 1, operation)?,
                    column(row, 2, operation)?,
                )
            })
            .collect()
    }

    async fn list_assignments(&self) -> Result<Vec<RoleAssignment>, StoreError> {
        let rows = self
            .read_rows(
                "list the role assignments",
                "SELECT principal, role, scope FROM role_assignments",
                &[],
            )
            .await?;
        let operation = "read a role assignment row";
        let mut assignments = rows
            .iter()
            .map(|row| {
                decode_assignment(
                    column(row, 0, operation)?,
                    column(row, 1, operation)?,
                    column(row, 2, operation)?,
                )
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        // The port's order is the domain's (principal kind before name, `global` before
        // tenants), which no text collation reproduces.
        assignments.sort();
        Ok(assignments)
    }

    async fn list_policies(&self) -> Result<Vec<ToolAccessPolicy>, StoreError> {
        let rows = self
            .read_rows(
                "list the tool access policies",
                "SELECT scope, target_id, allow_list, deny_list FROM tool_policies",
                &[],
            )
            .await?;
        let operation = "read a tool access policy row";
        let mut policies = rows
            .iter()
            .map(|row| {
                decode_policy(
                    column(row, 0, operation)?,
                    column(row, 1, operation)?,
                    column(row, 2, operation)?,
                    column(row, 3, operation)?,
                )
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        // By address: provider, group, tool (the domain's order), then target.
        policies.sort_by(|left, right| left.address().cmp(right.address()));
        Ok(policies)
    }

    async fn read_policy(
        &self,
        address: &PolicyAddress,
    ) -> Result<Option<ToolAccessPolicy>, StoreError> {
        let scope = address.scope().as_str();
        let target = address.target_id();
        let rows = self
            .read_rows(
                "read the tool access policy",
                "SELECT allow_list, deny_list FROM tool_policies
                 WHERE scope = $1 AND target_id = $2",
                &[&scope, &target],
            )
            .await?;
        let operation = "read a tool access policy row";
        rows.first()
            .map(|row| {
                decode_policy(
                    scope,
                    target,
                    column(row, 0, operation)?,
                    column(row, 1, operation)?,
                )
            })
            .transpose()
    }

    /// Runs one write on the access tables (roles, assignments, policies) and answers whether
    /// it changed a row.
    async fn write_access(
        &self,
        operation: &'static str,
        sql: &'static str,
        values: &[&str],
    ) -> Result<bool, StoreError> {
        let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = values
            .iter()
            .map(|value| value as &(dyn tokio_postgres::types::ToSql + Sync))
            .collect();
        let changed = self
            .write_notifying(Topic::Access, operation, sql, &params)
            .await?;
        Ok(changed > 0)
    }
}

#[async_trait]
impl AuthStore for PostgresStore {
    async fn insert_key(&self, record: &ApiKeyRecord) -> Result<(), mcpgw_authz::StoreError> {
        Ok(self.store_key(record).await?)
    }

    /// From memory only: never waits on the database.
    async fn key_by_hash(
        &self,
        hash: &KeyHash,
    ) -> Result<Option<ApiKeyRecord>, mcpgw_authz::StoreError> {
        Ok(self.key_cache.by_hash(hash))
    }

    /// From memory only: never waits on the database.
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
            .write_access(
                "store the custom role",
                "INSERT INTO custom_roles (name, description, permissions) VALUES ($1, $2, $3)
                 ON CONFLICT (name) DO NOTHING",
                &[
                    role.name().as_str(),
                    role.description(),
                    &json_strings(role.permissions()),
                ],
            )
            .await?)
    }

    async fn replace_custom_role(&self, role: &Role) -> Result<bool, mcpgw_authz::StoreError> {
        Ok(self
            .write_access(
                "replace the custom role",
                "UPDATE custom_roles SET description = $2, permissions = $3 WHERE name = $1",
                &[
                    role.name().as_str(),
                    role.description(),
                    &json_strings(role.permissions()),
                ],
            )
            .await?)
    }

    async fn delete_custom_role(&self, name: &RoleName) -> Result<bool, mcpgw_authz::StoreError> {
        Ok(self
            .write_access(
                "delete the custom role",
                "DELETE FROM custom_roles WHERE name = $1",
                &[name.as_str()],
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
        let [principal, role, scope] = assignment_values(assignment);
        Ok(self
            .write_access(
                "store the role assignment",
                "INSERT INTO role_assignments (principal, role, scope) VALUES ($1, $2, $3)
                 ON CONFLICT (principal, role, scope) DO NOTHING",
                &[&principal, &role, &scope],
            )
            .await?)
    }

    async fn delete_assignment(
        &self,
        assignment: &RoleAssignment,
    ) -> Result<bool, mcpgw_authz::StoreError> {
        let [principal, role, scope] = assignment_values(assignment);
        Ok(self
            .write_access(
                "delete the role assignment",
                "DELETE FROM role_assignments WHERE principal = $1 AND role = $2 AND scope = $3",
                &[&principal, &role, &scope],
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
        self.write_access(
            "store the tool access policy",
            "INSERT INTO tool_policies (scope, target_id, allow_list, deny_list)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (scope, target_id) DO UPDATE SET
                 allow_list = excluded.allow_list, deny_list = excluded.deny_list",
            &[
                policy.address().scope().as_str(),
                policy.address().target_id(),
                &json_strings(policy.allow_list()),
                &json_strings(policy.deny_list()),
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
            .write_access(
                "delete the tool access policy",
                "DELETE FROM tool_policies WHERE scope = $1 AND target_id = $2",
                &[address.scope().as_str(), address.target_id()],
            )
            .await?)
    }

    /// The memory of keys is replaced by what the database holds now
    /// ([`PostgresStore::reload_api_keys`]): keys other replicas created or revoked.
    async fn refresh_keys(&self) -> Result<(), mcpgw_authz::StoreError> {
        Ok(self.reload_api_keys().await?)
    }
}

fn assignment_values(assignment: &RoleAssignment) -> [String; 3] {
    [
        assignment.principal.to_string(),
        assignment.role.to_string(),
        assignment.scope.to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use mcpgw_testkit::auth_store::{SAMPLE_TIME, sample_key};

    use super::*;

    fn valid() -> KeyRow {
        KeyRow {
            id: "key_0123".to_owned(),
            name: "n".to_owned(),
            principal: "user:alice".to_owned(),
            role: Some("viewer".to_owned()),
            prefix: "mcp_abcdefgh".to_owned(),
            sha256: "0f".repeat(32),
            created_at: 1,
            expires_at: None,
            revoked_at: Some(2),
        }
    }

    /// Bad input: a principal, a role and a hash that do not parse. Each is reported with the
    /// key's id and never with its hash.
    #[test]
    fn key_rows_that_do_not_decode_are_reported_with_their_id_and_never_their_hash() {
        let record = valid().decode().unwrap();
        assert_eq!(record.revoked_at, Some(Timestamp::from_unix_micros(2)));
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
    }

    /// Bad input: permissions that are not JSON or name no permission, an assignment in a scope
    /// that does not exist, a policy whose target has no separator and one whose pattern is
    /// not a principal pattern.
    #[test]
    fn access_rows_that_do_not_decode_are_reported_with_their_table() {
        for (permissions, what) in [
            ("not json", "broken json"),
            (r#"["tool:fly"]"#, "an unknown permission"),
        ] {
            let error = decode_role("support", "", permissions).unwrap_err();
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
        let cache = KeyCache::empty();
        let record = sample_key("shown", SAMPLE_TIME);
        cache.remember(record.clone());
        let shown = format!("{cache:?}");
        assert_eq!(shown, "KeyCache { keys: 1 }");
        assert!(!shown.contains(&record.hash.to_hex()));
    }

    /// A record whose hash changed under the same id (a row repaired by hand, then reloaded)
    /// is no longer found by its old hash.
    #[test]
    fn a_record_remembered_again_under_a_new_hash_forgets_the_old_one() {
        let cache = KeyCache::empty();
        let first = sample_key("first", SAMPLE_TIME);
        cache.remember(first.clone());
        let moved = ApiKeyRecord {
            hash: sample_key("second", SAMPLE_TIME).hash,
            ..first.clone()
        };
        cache.remember(moved.clone());
        assert_eq!(cache.by_hash(&first.hash), None);
        assert_eq!(cache.by_hash(&moved.hash), Some(moved.clone()));
        assert_eq!(cache.by_id(&first.id), Some(moved));
        assert_eq!(cache.len(), 1);
    }
}
