//! [`ToolListStore`] on the `tool_lists` table.
//!
//! One row per server id: `definition_digest` as the domain hands it, `tools` the JSON array of
//! MCP `Tool` objects exactly as the server listed them, `learned_at` microseconds since the
//! Unix epoch. A save of several lists is one statement in one transaction (all of them or
//! none), and so is a delete of several ids. Every write that changed a row tells the other
//! replicas ([`Topic::ToolLists`]).
//!
//! The lists are a cache of what servers answered: a row that does not decode is left out of
//! the load with a warning naming it (its server is then probed again, and the new list
//! replaces the row), instead of failing the load of every other list.

use std::collections::BTreeMap;

use async_trait::async_trait;
use mcpgw_core::{RepositoryError, ServerId, StoredToolList, Timestamp, Tool, ToolListStore};

use crate::changes::Topic;
use crate::error::StoreError;
use crate::sql::column;
use crate::store::PostgresStore;

const TABLE: &str = "tool_lists";

/// The tool lists servers listed, in the gateway's shared database.
///
/// It is a view of a [`PostgresStore`]: it shares that store's pool, and is a type of its own
/// so that the application is handed exactly this port.
#[derive(Debug, Clone)]
pub struct PostgresToolListStore {
    store: PostgresStore,
}

/// A `tool_lists` row as PostgreSQL answers it, before the domain's types apply.
struct ToolListRow {
    server_id: String,
    definition_digest: String,
    tools: String,
    learned_at: i64,
}

impl ToolListRow {
    fn read(row: &tokio_postgres::Row) -> Result<Self, StoreError> {
        let operation = "read a tool list row";
        Ok(Self {
            server_id: column(row, 0, operation)?,
            definition_digest: column(row, 1, operation)?,
            tools: column(row, 2, operation)?,
            learned_at: column(row, 3, operation)?,
        })
    }

    fn decode(self) -> Result<StoredToolList, StoreError> {
        let corrupt = |reason: String| StoreError::CorruptRecord {
            table: TABLE,
            key: mcpgw_core::bounded_for_message(&self.server_id),
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

impl PostgresToolListStore {
    /// The tool list table of `store`'s database, through `store`'s pool.
    pub fn new(store: PostgresStore) -> Self {
        Self { store }
    }

    /// The store whose pool this one uses.
    pub fn store(&self) -> &PostgresStore {
        &self.store
    }

    async fn upsert_lists(&self, lists: &[StoredToolList]) -> Result<(), StoreError> {
        // The last list of an id wins, and the rows go in id order: one statement cannot touch
        // a row twice, and two replicas saving overlapping batches lock rows in the same order.
        let mut latest: BTreeMap<&str, &StoredToolList> = BTreeMap::new();
        for list in lists {
            latest.insert(list.server_id.as_str(), list);
        }
        if latest.is_empty() {
            return Ok(());
        }
        let mut ids = Vec::with_capacity(latest.len());
        let mut digests = Vec::with_capacity(latest.len());
        let mut tools = Vec::with_capacity(latest.len());
        let mut learned_at = Vec::with_capacity(latest.len());
        for (id, list) in latest {
            let json =
                serde_json::to_string(&list.tools).map_err(|error| StoreError::CorruptRecord {
                    table: TABLE,
                    key: id.to_owned(),
                    reason: error.to_string(),
                })?;
            ids.push(id);
            digests.push(list.definition_digest.as_str());
            tools.push(json);
            learned_at.push(list.learned_at.unix_micros());
        }
        self.store
            .write_notifying(
                Topic::ToolLists,
                "save the tool lists",
                "INSERT INTO tool_lists (server_id, definition_digest, tools, learned_at)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[])
                 ON CONFLICT (server_id) DO UPDATE SET
                     definition_digest = excluded.definition_digest,
                     tools = excluded.tools,
                     learned_at = excluded.learned_at",
                &[&ids, &digests, &tools, &learned_at],
            )
            .await?;
        Ok(())
    }

    async fn remove_lists(&self, ids: &[ServerId]) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        let ids: Vec<&str> = ids.iter().map(ServerId::as_str).collect();
        self.store
            .write_notifying(
                Topic::ToolLists,
                "delete the tool lists",
                "DELETE FROM tool_lists WHERE server_id = ANY($1)",
                &[&ids],
            )
            .await?;
        Ok(())
    }

    async fn all_lists(&self) -> Result<Vec<StoredToolList>, StoreError> {
        let rows = self
            .store
            .read_rows(
                "list the tool lists",
                "SELECT server_id, definition_digest, tools, learned_at
                 FROM tool_lists ORDER BY server_id",
                &[],
            )
            .await?;
        let mut lists = Vec::with_capacity(rows.len());
        for row in &rows {
            match ToolListRow::read(row)?.decode() {
                Ok(list) => lists.push(list),
                Err(error) => {
                    tracing::warn!(%error, "a kept tool list is skipped; its server is probed again");
                }
            }
        }
        Ok(lists)
    }
}

#[async_trait]
impl ToolListStore for PostgresToolListStore {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(server_id: &str, tools: &str) -> ToolListRow {
        ToolListRow {
            server_id: server_id.to_owned(),
            definition_digest: "0f".repeat(32),
            tools: tools.to_owned(),
            learned_at: -1,
        }
    }

    #[test]
    fn a_valid_row_decodes_every_field() {
        let list = row(
            "math",
            r#"[{"name": "add", "inputSchema": {"type": "object"}}]"#,
        )
        .decode()
        .unwrap();
        assert_eq!(list.server_id.as_str(), "math");
        assert_eq!(list.tools, [Tool::new("add")]);
        assert_eq!(list.learned_at, Timestamp::from_unix_micros(-1));
    }

    /// Bad input: tools that are not JSON, tools that are not a list of tools, and a server id
    /// that is not an id. Each is a `CorruptRecord` naming the row.
    #[test]
    fn rows_that_do_not_decode_are_reported_with_their_key() {
        for (server_id, tools) in [
            ("math", "[{"),
            ("math", r#"{"name": "add"}"#),
            ("math", r#"[{"description": "no name"}]"#),
            ("bad id", "[]"),
        ] {
            let error = row(server_id, tools).decode().unwrap_err();
            assert!(
                matches!(&error, StoreError::CorruptRecord { table: "tool_lists", key, .. } if key == server_id),
                "{tools}: {error:?}"
            );
        }
    }
}
