//! [`DiscoveryStore`] on the `discovery_sources` and `discovery_rejections` tables.
//!
//! The columns hold what the domain hands over, one field per column, so that an operator can
//! read the file with the sqlite shell: `mode` and `origin` by their canonical names, `enabled`
//! as 0 or 1, `config` and `definition` as JSON objects exactly as given (they are the
//! operator's own settings and a candidate's definition, with no shape of the store's own), and
//! `rejected_at` in microseconds since the Unix epoch. A row that does not decode is an error
//! naming the row, so that one damaged row is reported and repaired rather than hidden.

use std::path::Path;

use async_trait::async_trait;
use mcpgw_core::Timestamp;
use mcpgw_discovery::{
    DiscoveryMode, DiscoveryStore, DiscoveryStoreError, Rejection, SourceDefinition, SourceOrigin,
};
use rusqlite::params;
use serde_json::{Map, Value};

use crate::error::StoreError;
use crate::store::SqliteStore;

const SOURCES: &str = "discovery_sources";
const REJECTIONS: &str = "discovery_rejections";

/// Discovery's durable memory, in the gateway's database file.
///
/// It is a view of a [`SqliteStore`]: it shares that store's connection (and so its mutex, its
/// WAL mode and its durability settings), and every clone shares it too. It is a type of its
/// own rather than more methods on [`SqliteStore`] so that discovery is handed exactly its
/// port, and names such as `save_source` never sit among the store's other methods, where
/// they would be ambiguous.
#[derive(Debug, Clone)]
pub struct SqliteDiscoveryStore {
    store: SqliteStore,
}

impl SqliteDiscoveryStore {
    /// Discovery's tables in `store`'s database, through `store`'s connection.
    pub fn new(store: SqliteStore) -> Self {
        Self { store }
    }

    /// Opens the database at `path` as [`SqliteStore::open`] does (creating it and migrating
    /// its schema) and answers its discovery tables. This blocks, as [`SqliteStore::open`]
    /// does; a process that already holds a [`SqliteStore`] on the file should use
    /// [`SqliteDiscoveryStore::new`] with it instead of opening a second connection.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        SqliteStore::open(path).map(Self::new)
    }

    /// The store whose connection this one uses.
    pub fn store(&self) -> &SqliteStore {
        &self.store
    }

    async fn upsert_source(&self, source: &SourceDefinition) -> Result<(), StoreError> {
        let config = Value::Object(source.config.clone()).to_string();
        let row = (
            source.source_id.clone(),
            source.source_type.clone(),
            source.mode.as_str(),
            source.enabled,
            config,
            source.origin.as_str(),
        );
        self.store
            .run_blocking(move |connection| {
                connection
                    .execute(
                        "INSERT INTO discovery_sources
                             (source_id, source_type, mode, enabled, config, origin)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                         ON CONFLICT (source_id) DO UPDATE SET
                             source_type = excluded.source_type, mode = excluded.mode,
                             enabled = excluded.enabled, config = excluded.config,
                             origin = excluded.origin",
                        params![row.0, row.1, row.2, row.3, row.4, row.5],
                    )
                    .map_err(StoreError::sqlite("save the discovery source"))?;
                Ok(())
            })
            .await
    }

    async fn remove_source(&self, source_id: &str) -> Result<(), StoreError> {
        let source_id = source_id.to_owned();
        self.store
            .run_blocking(move |connection| {
                connection
                    .execute(
                        "DELETE FROM discovery_sources WHERE source_id = ?1",
                        params![source_id],
                    )
                    .map_err(StoreError::sqlite("delete the discovery source"))?;
                Ok(())
            })
            .await
    }

    async fn all_sources(&self) -> Result<Vec<SourceDefinition>, StoreError> {
        self.store
            .run_blocking(|connection| {
                let operation = "list the discovery sources";
                let mut statement = connection
                    .prepare(
                        "SELECT source_id, source_type, mode, enabled, config, origin
                         FROM discovery_sources ORDER BY source_id",
                    )
                    .map_err(StoreError::sqlite(operation))?;
                let rows = statement
                    .query_map([], |row| {
                        Ok(SourceRow {
                            source_id: row.get(0)?,
                            source_type: row.get(1)?,
                            mode: row.get(2)?,
                            enabled: row.get(3)?,
                            config: row.get(4)?,
                            origin: row.get(5)?,
                        })
                    })
                    .map_err(StoreError::sqlite(operation))?;
                let mut sources = Vec::new();
                for row in rows {
                    let row = row.map_err(StoreError::sqlite("read a discovery source row"))?;
                    sources.push(row.decode()?);
                }
                Ok(sources)
            })
            .await
    }

    async fn upsert_rejection(&self, rejection: &Rejection) -> Result<(), StoreError> {
        let row = (
            rejection.source_id.clone(),
            rejection.name.clone(),
            Value::Object(rejection.definition.clone()).to_string(),
            rejection.rejected_at.unix_micros(),
        );
        self.store
            .run_blocking(move |connection| {
                connection
                    .execute(
                        "INSERT INTO discovery_rejections
                             (source_id, name, definition, rejected_at)
                         VALUES (?1, ?2, ?3, ?4)
                         ON CONFLICT (source_id, name) DO UPDATE SET
                             definition = excluded.definition,
                             rejected_at = excluded.rejected_at",
                        params![row.0, row.1, row.2, row.3],
                    )
                    .map_err(StoreError::sqlite("save the discovery rejection"))?;
                Ok(())
            })
            .await
    }

    async fn remove_rejection(&self, source_id: &str, name: &str) -> Result<(), StoreError> {
        let (source_id, name) = (source_id.to_owned(), name.to_owned());
        self.store
            .run_blocking(move |connection| {
                connection
                    .execute(
                        "DELETE FROM discovery_rejections WHERE source_id = ?1 AND name = ?2",
                        params![source_id, name],
                    )
                    .map_err(StoreError::sqlite("delete the discovery rejection"))?;
                Ok(())
            })
            .await
    }

    async fn all_rejections(&self) -> Result<Vec<Rejection>, StoreError> {
        self.store
            .run_blocking(|connection| {
                let operation = "list the discovery rejections";
                let mut statement = connection
                    .prepare(
                        "SELECT source_id, name, definition, rejected_at
                         FROM discovery_rejections ORDER BY source_id, name",
                    )
                    .map_err(StoreError::sqlite(operation))?;
                let rows = statement
                    .query_map([], |row| {
                        Ok(RejectionRow {
                            source_id: row.get(0)?,
                            name: row.get(1)?,
                            definition: row.get(2)?,
                            rejected_at: row.get(3)?,
                        })
                    })
                    .map_err(StoreError::sqlite(operation))?;
                let mut rejections = Vec::new();
                for row in rows {
                    let row = row.map_err(StoreError::sqlite("read a discovery rejection row"))?;
                    rejections.push(row.decode()?);
                }
                Ok(rejections)
            })
            .await
    }
}

/// A `discovery_sources` row as SQLite answers it, before the domain's rules apply.
struct SourceRow {
    source_id: String,
    source_type: String,
    mode: String,
    enabled: i64,
    config: String,
    origin: String,
}

impl SourceRow {
    fn decode(self) -> Result<SourceDefinition, StoreError> {
        let corrupt = |reason: String| StoreError::CorruptRecord {
            table: SOURCES,
            key: self.source_id.clone(),
            reason,
        };
        // serde knows every mode by name, so a mode added to the domain decodes without a
        // change here.
        let mode: DiscoveryMode = serde_json::from_value(Value::String(self.mode.clone()))
            .map_err(|_| corrupt(format!("unknown mode `{}`", self.mode)))?;
        let enabled = match self.enabled {
            0 => false,
            1 => true,
            other => return Err(corrupt(format!("`enabled` is {other}, not 0 or 1"))),
        };
        let config =
            json_object(&self.config).map_err(|reason| corrupt(format!("config: {reason}")))?;
        let origin = match self.origin.as_str() {
            "api" => SourceOrigin::Api,
            "config" => SourceOrigin::Config,
            other => return Err(corrupt(format!("unknown origin `{other}`"))),
        };
        Ok(SourceDefinition {
            source_id: self.source_id.clone(),
            source_type: self.source_type.clone(),
            mode,
            enabled,
            config,
            origin,
        })
    }
}

/// A `discovery_rejections` row as SQLite answers it.
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
                key: format!("{}/{}", self.source_id, self.name),
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

fn json_object(text: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!("a JSON object was expected, found {other}")),
        Err(error) => Err(error.to_string()),
    }
}

/// The port's error carries the whole message, which names the row or the operation.
impl From<StoreError> for DiscoveryStoreError {
    fn from(error: StoreError) -> Self {
        DiscoveryStoreError(error.to_string())
    }
}

#[async_trait]
impl DiscoveryStore for SqliteDiscoveryStore {
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

    fn source_row(mode: &str, enabled: i64, config: &str, origin: &str) -> SourceRow {
        SourceRow {
            source_id: "docker-0".into(),
            source_type: "docker".into(),
            mode: mode.into(),
            enabled,
            config: config.into(),
            origin: origin.into(),
        }
    }

    #[test]
    fn a_valid_source_row_decodes_every_field() {
        let source = source_row(
            "authoritative",
            0,
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
                enabled: false,
                config: json!({"socket_path": "unix:///tmp/podman.sock", "labels": {"team": ["a", 1.5]}})
                    .as_object()
                    .unwrap()
                    .clone(),
                origin: SourceOrigin::Api,
            }
        );
        let additive = source_row("additive", 1, "{}", "config").decode().unwrap();
        assert_eq!(additive.mode, DiscoveryMode::Additive);
        assert!(additive.enabled);
        assert_eq!(additive.origin, SourceOrigin::Config);
    }

    #[test]
    fn source_rows_that_do_not_decode_are_reported_with_their_key() {
        let cases = [
            (
                source_row("additive", 1, "{not json", "api"),
                "broken json",
                "config:",
            ),
            (
                source_row("additive", 1, "[1, 2]", "api"),
                "config not an object",
                "JSON object",
            ),
            (
                source_row("eager", 1, "{}", "api"),
                "unknown mode",
                "unknown mode `eager`",
            ),
            (
                source_row("additive", 7, "{}", "api"),
                "enabled out of range",
                "`enabled` is 7",
            ),
            (
                source_row("additive", 1, "{}", "file"),
                "unknown origin",
                "unknown origin `file`",
            ),
        ];
        for (row, what, reason) in cases {
            let error = row.decode().unwrap_err();
            assert!(
                matches!(&error, StoreError::CorruptRecord { table: "discovery_sources", key, .. } if key == "docker-0"),
                "{what}: {error:?}"
            );
            let message = error.to_string();
            assert!(message.contains(reason), "{what}: {message}");
            assert!(
                message.contains("repair or delete the row"),
                "{what}: {message}"
            );
            assert_eq!(error.kind(), mcpgw_core::ErrorKind::Internal, "{what}");
        }
    }

    #[test]
    fn rejection_rows_that_do_not_decode_are_reported_with_their_key() {
        for (definition, reason) in [
            ("{\"mode\": ", "definition:"),
            ("\"docker\"", "JSON object"),
        ] {
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

    #[test]
    fn the_port_error_carries_the_whole_message() {
        let error = StoreError::CorruptRecord {
            table: SOURCES,
            key: "docker-0".into(),
            reason: "unknown mode `eager`".into(),
        };
        let expected = error.to_string();
        assert_eq!(DiscoveryStoreError::from(error).0, expected);
    }
}
