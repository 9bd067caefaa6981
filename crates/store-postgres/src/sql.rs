//! Running statements: reads on a pooled connection, and writes in a transaction of their own
//! that also sends the write's notification, so that the other replicas hear of exactly the
//! writes that committed.

use mcpgw_core::trace::{Span, SpanKind, keys};
use tokio_postgres::Row;
use tokio_postgres::types::{FromSql, ToSql};

use crate::changes::{Topic, notify};
use crate::error::StoreError;
use crate::store::PostgresStore;

/// The parameters of one statement, in `$1`, `$2`, ... order.
pub(crate) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

impl PostgresStore {
    /// Runs one read and answers its rows.
    pub(crate) async fn read_rows(
        &self,
        operation: &'static str,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Vec<Row>, StoreError> {
        let client = self.client().await?;
        client
            .query(sql, params)
            .await
            .map_err(StoreError::postgres(operation))
    }

    /// Runs one write statement in a transaction; when it changed a row, `topic`'s notification
    /// goes out in the same transaction. Answers how many rows it changed (a write that changes
    /// nothing, such as deleting what is not there, tells nobody).
    pub(crate) async fn write_notifying(
        &self,
        topic: Topic,
        operation: &'static str,
        sql: &str,
        params: Params<'_>,
    ) -> Result<u64, StoreError> {
        // A write made for a traced request (none outside one): the statement's verb and the
        // topic it changes, with the database conventions' attributes.
        let mut span = Span::start_in_scope("postgresql", SpanKind::Client);
        if span.is_recording() {
            let verb = sql
                .split_whitespace()
                .next()
                .unwrap_or("SQL")
                .to_ascii_uppercase();
            span.update_name(|| format!("{verb} {}", topic.name()));
            span.set_attribute(keys::DB_SYSTEM_NAME, "postgresql");
            span.set_attribute(keys::DB_OPERATION_NAME, verb);
            span.set_attribute(keys::DB_COLLECTION_NAME, topic.name());
        }
        let result = self
            .write_notifying_now(topic, operation, sql, params)
            .await;
        if let Err(error) = &result {
            span.set_error("db_error", &error.to_string());
        }
        result
    }

    async fn write_notifying_now(
        &self,
        topic: Topic,
        operation: &'static str,
        sql: &str,
        params: Params<'_>,
    ) -> Result<u64, StoreError> {
        let mut client = self.client().await?;
        let transaction = client
            .transaction()
            .await
            .map_err(StoreError::postgres(operation))?;
        let changed = transaction
            .execute(sql, params)
            .await
            .map_err(StoreError::postgres(operation))?;
        if changed > 0 {
            notify(&*transaction, topic, &self.origin).await?;
        }
        transaction
            .commit()
            .await
            .map_err(StoreError::postgres(operation))?;
        Ok(changed)
    }
}

/// Column `index` of `row`, or an error naming `operation` when the column does not hold what
/// the schema says (a table altered by hand): never a panic.
pub(crate) fn column<'a, T: FromSql<'a>>(
    row: &'a Row,
    index: usize,
    operation: &'static str,
) -> Result<T, StoreError> {
    row.try_get(index).map_err(StoreError::postgres(operation))
}
