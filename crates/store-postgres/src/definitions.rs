//! Tables that keep one JSON definition per id (servers, groups): the shared writes and reads.
//!
//! Each such table has `id` (the primary key, byte-ordered), one short column an operator can
//! read at a glance (a server's mode, a group's strategy), `definition` (the JSON document, in
//! the same form as every other store's) and `created_at` / `updated_at` stamped by the
//! database's clock.

use crate::changes::Topic;
use crate::error::StoreError;
use crate::sql::column;
use crate::store::PostgresStore;

/// The statements of one definitions table, the notification its writes send, and how its
/// failures are named.
pub(crate) struct DefinitionTable {
    pub topic: Topic,
    /// `INSERT ... ON CONFLICT (id) DO UPDATE` with `$1` id, `$2` the short column, `$3` the
    /// definition.
    pub upsert_sql: &'static str,
    /// `DELETE ... WHERE id = $1`.
    pub delete_sql: &'static str,
    /// `SELECT id, definition ... ORDER BY id`.
    pub select_sql: &'static str,
    pub save_operation: &'static str,
    pub delete_operation: &'static str,
    pub list_operation: &'static str,
    pub read_operation: &'static str,
}

impl PostgresStore {
    pub(crate) async fn upsert_definition(
        &self,
        table: &'static DefinitionTable,
        id: &str,
        summary: &str,
        definition: &str,
    ) -> Result<(), StoreError> {
        self.write_notifying(
            table.topic,
            table.save_operation,
            table.upsert_sql,
            &[&id, &summary, &definition],
        )
        .await?;
        Ok(())
    }

    pub(crate) async fn delete_definition(
        &self,
        table: &'static DefinitionTable,
        id: &str,
    ) -> Result<(), StoreError> {
        self.write_notifying(
            table.topic,
            table.delete_operation,
            table.delete_sql,
            &[&id],
        )
        .await?;
        Ok(())
    }

    /// Every row in id order, each decoded by `decode(id, definition)`.
    pub(crate) async fn load_definitions<T>(
        &self,
        table: &'static DefinitionTable,
        decode: fn(String, &str) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        let rows = self
            .read_rows(table.list_operation, table.select_sql, &[])
            .await?;
        let mut decoded = Vec::with_capacity(rows.len());
        for row in &rows {
            let id: String = column(row, 0, table.read_operation)?;
            let definition: &str = column(row, 1, table.read_operation)?;
            decoded.push(decode(id, definition)?);
        }
        Ok(decoded)
    }
}
