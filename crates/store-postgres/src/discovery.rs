//! [`DiscoveryStore`] on the `discovery_sources` and `discovery_rejections` tables.
//!
//! The columns hold what the domain hands over, one field per column, so that an operator can
//! read the tables with `psql`: `mode` and `origin` by their canonical names, `enabled` as a
//! boolean, `config` and `definition` as JSON objects exactly as given (they are the operator's
//! own settings and a candidate's definition, with no shape of the store's own), and
//! `rejected_at` in microseconds since the Unix epoch. A row that does not decode is an error
//! naming the row, so that one damaged row is reported and repaired rather than hidden. Every
//! write that changed a row tells the other replicas ([`Topic::Discovery`]).

use async_trait::async_trait;
use mcpgw_core::Timestamp;
use mcpgw_discovery::{
    DiscoveryMode, DiscoveryStore, DiscoveryStoreError, Rejection, SourceDefinition, SourceOrigin,
};
use serde_json::{Map, Value};

use crate::changes::Topic;
use crate::error::StoreError;
use crate::sql::column;
use crate::store::PostgresStore;

const SOURCES: &str = "discovery_sources";
const REJECTIONS: &str = "discovery_rejections";

/// Discovery's durable memory, in the gateway's shared database.
///
/// It is a view of a [`PostgresStore`]: it shares that store's pool, and every clone shares it
/// too. It is a type of its own rather than more methods on [`PostgresStore`] so that discovery
/// is handed exactly its port, and names such as `save_source` never sit among the store's
/// other methods, where they would be ambiguous.
#[derive(Debug, Clone)]
pub struct PostgresDiscoveryStore {
    store: PostgresStore,
}

impl PostgresDiscoveryStore {
    /// Discovery's tables in `store`'s database, through `store`'s pool.
    pub fn new(store: PostgresStore) -> Self {
        Self { store }
    }

    /// The store whose pool this one uses.
    pub fn store(&self) -> &PostgresStore {
        &self.store
    }

    async fn upsert_source(&self, source: &SourceDefinition) -> Result<(), StoreError> {
        let config = Value::Object(source.config.clone()).to_string();
        self.store
            .write_notifying(
                Topic::Discovery,
                "save the discovery source",
                "INSERT INTO discovery_sources
                     (source_id, source_type, mode, enabled, config, origin)
                 VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (source_id) DO UPDATE SET
                     source_type = excluded.source_type, mode = excluded.mode,
                     enabled = excluded.enabled, config = excluded.config,
                     origin = excluded.origin",
                &[
                    &source.source_id,
                    &source.source_type,
                    &source.mode.as_str(),
                    &source.enabled,
                    &config,
                    &source.origin.as_str(),
                ],
            )
            .await?;
        Ok(())
    }

    async fn remove_source(&self, source_id: &str) -> Result<(), StoreError> {
        self.store
            .write_notifying(
                Topic::Discovery,
                "delete the discovery source",
                "DELETE FROM discovery_sources WHERE source_id = $1",
                &[&source_id],
            )
            .await?;
        Ok(())
    }

    async fn all_sources(&self) -> Result<Vec<SourceDefinition>, StoreError> {
        let rows = self
            .store
            .read_rows(
                "list the discovery sources",
                "SELECT source_id, source_type, mode, enabled, config, origin
                 FROM discovery_sources ORDER BY source_id",
                &[],
            )
            .await?;
        let operation = "read a discovery source row";
        let mut sources = Vec::with_capacity(rows.len());
        for row in &rows {
            let source = SourceRow {
                source_id: column(row, 0, operation)?,
                source_type: column(row, 1, operation)?,
                mode: column(row, 2, operation)?,
                enabled: column(row, 3, operation)?,
                config: column(row, 4, operation)?,
                origin: column(row, 5, operation)?,
            };
            sources.push(source.decode()?);
        }
        Ok(sources)
    }

    async fn upsert_rejection(&self, rejection: &Rejection) -> Result<(), StoreError> {
        let definition = Value::Object(rejection.definition.clone()).to_string();
        self.store
            .write_notifying(
                Topic::Discovery,
                "save the discovery rejection",
                "INSERT INTO discovery_rejections (source_id, name, definition, rejected_at)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (source_id, name) DO UPDATE SET
                     definition = excluded.definition,
                     rejected_at = excluded.rejected_at",
                &[
                    &rejection.source_id,
                    &rejection.name,
                    &definition,
                    &rejection.rejected_at.unix_micros(),
                ],
            )
            .await?;
        Ok(())
    }

    async fn remove_rejection(&self, source_id: &str, name: &str) -> Result<(), StoreError> {
        self.store
            .write_notifying(
                Topic::Discovery,
                "delete the discovery rejection",
                "DELETE FROM discovery_rejections WHERE source_id = $1 AND name = $2",
                &[&source_id, &name],
            )
            .await?;
        Ok(())
    }

    async fn all_rejections(&self) -> Result<Vec<Rejection>, StoreError> {
        let rows = self
            .store
            .read_rows(
                "list the discovery rejections",
                "SELECT source_id, name, definition, rejected_at
                 FROM discovery_rejections ORDER BY source_id, name",
                &[],
            )
            .await?;
        let operation = "read a discovery rejection row";
        let mut rejections = Vec::with_capacity(rows.len());
        for row in &rows {
            let rejection = RejectionRow {
                source_id: column(row, 0, operation)?,
                name: column(row, 1, operation)?,
                definition: column(row, 2, operation)?,
                rejected_at: column(row, 3, operation)?,
            };
            rejections.push(rejection.decode()?);
        }
        Ok(rejections)
    }
}

/// A `discovery_sources` row as PostgreSQL answers it, before the domain's rules apply.
struct SourceRow {
    source_id: String,
    source_type: String,
    mode: String,
    enabled: bool,
    config: String,
    origin: String,
}

impl SourceRow {
    fn decode(self) -> Result<SourceDefinition, StoreError> {
        let corrupt = |reason: String| StoreError::CorruptRecord {
            table: SOURCES,
            key: mcpgw_core::bounded_for_message(&self.source_id),
            reason,
        };
        // serde knows every mode by name, so a mode added to the domain decodes without a
        // change here.
        let mode: DiscoveryMode = serde_json::from_value(Value::String(self.mode.clone()))
            .map_err(|_| {
                corrupt(format!(
                    "unknown mode `{}`",
                    mcpgw_core::bounded_for_message(&self.mode)
                ))
            })?;
        let config =
            json_object(&self.config).map_err(|reason| corrupt(format!("config: {reason}")))?;
        let origin = match self.origin.as_str() {
            "api" => SourceOrigin::Api,
            "config" => SourceOrigin::Config,
            other => {
                return Err(corrupt(format!(
                    "unknown origin `{}`",
                    mcpgw_core::bounded_for_message(other)
                )));
            }
        };
        Ok(SourceDefinition {
            source_id: self.source_id.clone(),
            source_type: self.source_type.clone(),
            mode,
            enabled: self.enabled,
            config,
            origin,
        })
    }
}

/// A `discovery_rejections` row as PostgreSQL answers it.
struct RejectionRow {
    source_id: String,
    name: String,
    definition: String,
    rejected_at: i64,
}

impl RejectionRow {
    fn decode(self) -> Result<Rejection, StoreError> {
        let definition =
            json_object(&self.definition).map_err(|reason| StoreError::CorruptRecord {
                table: REJECTIONS,
                key: mcpgw_core::bounded_for_message(&format!("{}/{}", self.source_id, self.name)),
                reason: format!("definition: {reason}"),
            })?;
        Ok(Rejection {
            source_id: self.source_id,
            name: self.name,
            definition,
            rejected_at: Timestamp::from_unix_micros(self.rejected_at),
        })
    }
}

/// `text` as a JSON object; the reason says what it is instead (never the text itself, which
/// may hold an operator's secrets).
fn json_object(text: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!(
            "a JSON object was expected, found {}",
            json_kind(&other)
        )),
        Err(error) => Err(error.to_string()),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[async_trait]
impl DiscoveryStore for PostgresDiscoveryStore {
    async fn save_source(&self, source: &SourceDefinition) -> Result<(), DiscoveryStoreError> {
        Ok(self.upsert_source(source).await?)
    }

    async fn delete_source(&self, source_id: &str) -> Result<(), DiscoveryStoreError> {
        Ok(self.remove_source(source_id).await?)
    }

    async fn load_sources(&self) -> Result<Vec<SourceDefinition>, DiscoveryStoreError> {
        Ok(self.all_sources().await?)
    }

    async fn save_rejection(&self, rejection: &Rejection) -> Result<(), DiscoveryStoreError> {
        Ok(self.upsert_rejection(rejection).await?)
    }

    async fn delete_rejection(
        &self,
        source_id: &str,
        name: &str,
    ) -> Result<(), DiscoveryStoreError> {
        Ok(self.remove_rejection(source_id, name).await?)
    }

    async fn load_rejections(&self) -> Result<Vec<Rejection>, DiscoveryStoreError> {
        Ok(self.all_rejections().await?)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn source_row(mode: &str, config: &str, origin: &str) -> SourceRow {
        SourceRow {
            source_id: "docker-0".into(),
            source_type: "docker".into(),
            mode: mode.into(),
            enabled: true,
            config: config.into(),
            origin: origin.into(),
        }
    }

    #[test]
    fn a_valid_source_row_decodes_every_field() {
        let source = source_row(
            "authoritative",
            r#"{"socket_path": "unix:///tmp/podman.sock", "labels": {"team": ["a", 1.5]}}"#,
            "api",
        )
        .decode()
        .unwrap();
        assert_eq!(
            source,
            SourceDefinition {
                source_id: "docker-0".into(),
                source_type: "docker".into(),
                mode: DiscoveryMode::Authoritative,
                enabled: true,
                config: json!({"socket_path": "unix:///tmp/podman.sock", "labels": {"team": ["a", 1.5]}})
                    .as_object()
                    .unwrap()
                    .clone(),
                origin: SourceOrigin::Api,
            }
        );
        let additive = source_row("additive", "{}", "config").decode().unwrap();
        assert_eq!(additive.mode, DiscoveryMode::Additive);
        assert_eq!(additive.origin, SourceOrigin::Config);
    }

    /// Bad input: a config that is not JSON, one that is not an object (holding a secret that
    /// must not reach the message), an unknown mode and an unknown origin.
    #[test]
    fn source_rows_that_do_not_decode_are_reported_with_their_key() {
        let cases = [
            (source_row("additive", "{not json", "api"), "config:"),
            (
                source_row("additive", r#"["hunter2"]"#, "api"),
                "found an array",
            ),
            (source_row("eager", "{}", "api"), "unknown mode `eager`"),
            (
                source_row("additive", "{}", "file"),
                "unknown origin `file`",
            ),
        ];
        for (row, reason) in cases {
            let error = row.decode().unwrap_err();
            assert!(
                matches!(&error, StoreError::CorruptRecord { table: "discovery_sources", key, .. } if key == "docker-0"),
                "{reason}: {error:?}"
            );
            let message = error.to_string();
            assert!(message.contains(reason), "{message}");
            assert!(!message.contains("hunter2"), "{message}");
            assert!(message.contains("repair or delete the row"), "{message}");
        }
    }

    /// Bad input: a rejected definition that is cut short, and one that is a string.
    #[test]
    fn rejection_rows_that_do_not_decode_are_reported_with_their_key() {
        for (definition, reason) in [("{\"mode\": ", "definition:"), ("\"docker\"", "a string")] {
            let row = RejectionRow {
                source_id: "files-1".into(),
                name: "math".into(),
                definition: definition.into(),
                rejected_at: 1,
            };
            let error = row.decode().unwrap_err();
            assert!(
                matches!(&error, StoreError::CorruptRecord { table: "discovery_rejections", key, .. } if key == "files-1/math"),
                "{error:?}"
            );
            assert!(error.to_string().contains(reason), "{error}");
        }
    }
}
