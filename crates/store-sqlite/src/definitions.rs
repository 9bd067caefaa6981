//! Tables that keep one JSON definition per id (servers, groups): the shared writes and reads.
//!
//! Each such table has `id` (the primary key), one short column an operator can read at a
//! glance (a server's mode, a group's strategy), `definition` (the JSON document, in the
//! table's own file format) and `created_at` / `updated_at` stamped by SQLite's clock.

use mcpgw_core::trace::{Span, SpanKind, keys};
use rusqlite::params;

use crate::error::StoreError;
use crate::store::SqliteStore;

/// The statements of one definitions table, and how its failures are named.
pub(crate) struct DefinitionTable {
    /// The table's name, as traces name what a write touched.
    pub table: &'static str,
    /// `INSERT ... ON CONFLICT (id) DO UPDATE` with `?1` id, `?2` the short column, `?3` the
    /// definition.
    pub upsert_sql: &'static str,
    /// `DELETE ... WHERE id = ?1`.
    pub delete_sql: &'static str,
    /// `SELECT id, definition ... ORDER BY id`.
    pub select_sql: &'static str,
    pub save_operation: &'static str,
    pub delete_operation: &'static str,
    pub list_operation: &'static str,
    pub read_operation: &'static str,
}

impl SqliteStore {
    pub(crate) async fn upsert_definition(
        &self,
        table: &'static DefinitionTable,
        id: String,
        summary: String,
        definition: String,
    ) -> Result<(), StoreError> {
        let _span = write_span("INSERT", table.table);
        self.run_blocking(move |connection| {
            connection
                .execute(table.upsert_sql, params![id, summary, definition])
                .map_err(StoreError::sqlite(table.save_operation))?;
            Ok(())
        })
        .await
    }

    pub(crate) async fn delete_definition(
        &self,
        table: &'static DefinitionTable,
        id: String,
    ) -> Result<(), StoreError> {
        let _span = write_span("DELETE", table.table);
        self.run_blocking(move |connection| {
            connection
                .execute(table.delete_sql, params![id])
                .map_err(StoreError::sqlite(table.delete_operation))?;
            Ok(())
        })
        .await
    }

    /// Every row in id order, each decoded by `decode(id, definition)`.
    pub(crate) async fn load_definitions<T: Send + 'static>(
        &self,
        table: &'static DefinitionTable,
        decode: fn(String, &str) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        self.run_blocking(move |connection| {
            let mut statement = connection
                .prepare(table.select_sql)
                .map_err(StoreError::sqlite(table.list_operation))?;
            let rows = statement
                .query_map([], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
                })
                .map_err(StoreError::sqlite(table.list_operation))?;
            let mut decoded = Vec::new();
            for row in rows {
                let (id, definition) = row.map_err(StoreError::sqlite(table.read_operation))?;
                decoded.push(decode(id, &definition)?);
            }
            Ok(decoded)
        })
        .await
    }
}

/// The span of a write made for a traced request (none outside one): `{operation} {table}`,
/// with the database conventions' attributes.
pub(crate) fn write_span(operation: &'static str, table: &'static str) -> Span {
    let mut span = Span::start_in_scope("sqlite", SpanKind::Client);
    if span.is_recording() {
        span.update_name(|| format!("{operation} {table}"));
        span.set_attribute(keys::DB_SYSTEM_NAME, "sqlite");
        span.set_attribute(keys::DB_OPERATION_NAME, operation);
        span.set_attribute(keys::DB_COLLECTION_NAME, table);
    }
    span
}
