//! [`ToolListStore`] on the `tool_lists` table.
//!
//! One row per server id: `definition_digest` as the domain hands it, `tools` the JSON array of
//! MCP `Tool` objects exactly as the server listed them, `learned_at` microseconds since the
//! Unix epoch. A save of several lists is one transaction, so the lists that many servers
//! learned at about the same time cost one commit, not one each.
//!
//! The lists are a cache of what servers answered: a row that does not decode is left out of
//! the load with a warning naming it (its server is then probed again, and the new list
//! replaces the row), instead of failing the load of every other list.

use std::path::Path;

use async_trait::async_trait;
use mcpgw_core::{RepositoryError, ServerId, StoredToolList, Timestamp, Tool, ToolListStore};
use rusqlite::params;

use crate::error::StoreError;
use crate::store::SqliteStore;

const TABLE: &str = "tool_lists";

/// The tool lists servers listed, in the gateway's database file.
///
/// Like [`crate::SqliteDiscoveryStore`], it is a view of a [`SqliteStore`]: it shares that
/// store's connection, WAL mode and durability settings, and is a type of its own so that the
/// application is handed exactly this port.
#[derive(Debug, Clone)]
pub struct SqliteToolListStore {
    store: SqliteStore,
}

struct ToolListRow {
    server_id: String,
    definition_digest: String,
    tools: String,
    learned_at: i64,
}

impl ToolListRow {
    fn decode(self) -> Result<StoredToolList, StoreError> {
        let corrupt = |reason: String| StoreError::CorruptRecord {
            table: TABLE,
            key: self.server_id.clone(),
            reason,
        };
        let server_id =
            ServerId::parse(&self.server_id).map_err(|error| corrupt(error.to_string()))?;
        let tools: Vec<Tool> = serde_json::from_str(&self.tools)
            .map_err(|error| corrupt(format!("tools: {error}")))?;
        Ok(StoredToolList {
            server_id,
            definition_digest: self.definition_digest,
            tools,
            learned_at: Timestamp::from_unix_micros(self.learned_at),
        })
    }
}

impl SqliteToolListStore {
    /// The tool list table of `store`'s database, through `store`'s connection.
    pub fn new(store: SqliteStore) -> Self {
        Self { store }
    }

    /// Opens the database at `path` as [`SqliteStore::open`] does and answers its tool list
    /// table. This blocks; a process that already holds a [`SqliteStore`] on the file should
    /// use [`SqliteToolListStore::new`] with it instead of opening a second connection.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        SqliteStore::open(path).map(Self::new)
    }

    /// The store whose connection this one uses.
    pub fn store(&self) -> &SqliteStore {
        &self.store
    }

    async fn upsert_lists(&self, lists: &[StoredToolList]) -> Result<(), StoreError> {
        if lists.is_empty() {
            return Ok(());
        }
        let mut rows = Vec::with_capacity(lists.len());
        for list in lists {
            let tools =
                serde_json::to_string(&list.tools).map_err(|error| StoreError::CorruptRecord {
                    table: TABLE,
                    key: list.server_id.to_string(),
                    reason: error.to_string(),
                })?;
            rows.push(ToolListRow {
                server_id: list.server_id.as_str().to_owned(),
                definition_digest: list.definition_digest.clone(),
                tools,
                learned_at: list.learned_at.unix_micros(),
            });
        }
        self.store
            .run_blocking(move |connection| {
                let operation = "save the tool lists";
                let transaction = connection
                    .transaction()
                    .map_err(StoreError::sqlite(operation))?;
                {
                    let mut statement = transaction
                        .prepare_cached(
                            "INSERT INTO tool_lists (server_id, definition_digest, tools, learned_at)
                             VALUES (?1, ?2, ?3, ?4)
                             ON CONFLICT (server_id) DO UPDATE SET
                                 definition_digest = excluded.definition_digest,
                                 tools = excluded.tools,
                                 learned_at = excluded.learned_at",
                        )
                        .map_err(StoreError::sqlite(operation))?;
                    for row in &rows {
                        statement
                            .execute(params![
                                row.server_id,
                                row.definition_digest,
                                row.tools,
                                row.learned_at
                            ])
                            .map_err(StoreError::sqlite(operation))?;
                    }
                }
                transaction.commit().map_err(StoreError::sqlite(operation))
            })
            .await
    }

    async fn remove_lists(&self, ids: &[ServerId]) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        let ids: Vec<String> = ids.iter().map(|id| id.as_str().to_owned()).collect();
        self.store
            .run_blocking(move |connection| {
                let operation = "delete the tool lists";
                let transaction = connection
                    .transaction()
                    .map_err(StoreError::sqlite(operation))?;
                {
                    let mut statement = transaction
                        .prepare_cached("DELETE FROM tool_lists WHERE server_id = ?1")
                        .map_err(StoreError::sqlite(operation))?;
                    for id in &ids {
                        statement
                            .execute(params![id])
                            .map_err(StoreError::sqlite(operation))?;
                    }
                }
                transaction.commit().map_err(StoreError::sqlite(operation))
            })
            .await
    }

    async fn all_lists(&self) -> Result<Vec<StoredToolList>, StoreError> {
        self.store
            .run_blocking(|connection| {
                let operation = "list the tool lists";
                let mut statement = connection
                    .prepare(
                        "SELECT server_id, definition_digest, tools, learned_at
                         FROM tool_lists ORDER BY server_id",
                    )
                    .map_err(StoreError::sqlite(operation))?;
                let rows = statement
                    .query_map([], |row| {
                        Ok(ToolListRow {
                            server_id: row.get(0)?,
                            definition_digest: row.get(1)?,
                            tools: row.get(2)?,
                            learned_at: row.get(3)?,
                        })
                    })
                    .map_err(StoreError::sqlite(operation))?;
                let mut lists = Vec::new();
                for row in rows {
                    let row = row.map_err(StoreError::sqlite("read a tool list row"))?;
                    match row.decode() {
                        Ok(list) => lists.push(list),
                        Err(error) => {
                            tracing::warn!(%error, "a kept tool list is skipped; its server is probed again");
                        }
                    }
                }
                Ok(lists)
            })
            .await
    }
}

#[async_trait]
impl ToolListStore for SqliteToolListStore {
    async fn load_tool_lists(&self) -> Result<Vec<StoredToolList>, RepositoryError> {
        Ok(self.all_lists().await?)
    }

    async fn save_tool_lists(&self, lists: &[StoredToolList]) -> Result<(), RepositoryError> {
        Ok(self.upsert_lists(lists).await?)
    }

    async fn delete_tool_lists(&self, ids: &[ServerId]) -> Result<(), RepositoryError> {
        Ok(self.remove_lists(ids).await?)
    }
}
