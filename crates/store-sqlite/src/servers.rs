//! [`ServerRepository`] on the `mcp_servers` table.
//!
//! A row's `definition` is the serde form of [`ServerSpec`] (the core's one form of a
//! definition, a file format that only grows) without the id, which is the row's key. Rows
//! written by earlier gateways have exactly that shape: the unit tests below pin it.

use async_trait::async_trait;
use mcpgw_core::{RepositoryError, ServerId, ServerRepository, ServerSpec};

use crate::definitions::DefinitionTable;
use crate::error::StoreError;
use crate::store::SqliteStore;

const TABLE: &str = "mcp_servers";

// SQLite's own clock stamps the rows: the port passes no time, and these columns are for
// operators reading the file, not for the domain.
static SERVERS: DefinitionTable = DefinitionTable {
    table: "mcp_servers",
    upsert_sql: "INSERT INTO mcp_servers (id, mode, definition, created_at, updated_at)
     VALUES (?1, ?2, ?3, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
     ON CONFLICT (id) DO UPDATE SET
         mode = excluded.mode, definition = excluded.definition, updated_at = excluded.updated_at",
    delete_sql: "DELETE FROM mcp_servers WHERE id = ?1",
    select_sql: "SELECT id, definition FROM mcp_servers ORDER BY id",
    save_operation: "save the mcp server",
    delete_operation: "delete the mcp server",
    list_operation: "list the mcp servers",
    read_operation: "read an mcp server row",
};

/// The row's JSON: the serde form of [`ServerSpec`] without the id, which is the row's key.
fn encode(spec: &ServerSpec) -> Result<String, StoreError> {
    let corrupt = |reason: String| StoreError::CorruptRecord {
        table: TABLE,
        key: spec.id.to_string(),
        reason,
    };
    let mut definition = serde_json::to_value(spec).map_err(|error| corrupt(error.to_string()))?;
    if let Some(fields) = definition.as_object_mut() {
        fields.remove("id");
    }
    serde_json::to_string(&definition).map_err(|error| corrupt(error.to_string()))
}

fn decode_row(id: String, definition: &str) -> Result<ServerSpec, StoreError> {
    let corrupt = |reason: String, key: &str| StoreError::CorruptRecord {
        table: TABLE,
        key: key.to_owned(),
        reason,
    };
    ServerId::parse(&id).map_err(|error| corrupt(error.to_string(), &id))?;
    let mut definition: serde_json::Value =
        serde_json::from_str(definition).map_err(|error| corrupt(error.to_string(), &id))?;
    let Some(fields) = definition.as_object_mut() else {
        return Err(corrupt(
            "the definition is not a JSON object".to_owned(),
            &id,
        ));
    };
    fields.insert("id".to_owned(), serde_json::Value::String(id.clone()));
    serde_json::from_value(definition).map_err(|error| corrupt(error.to_string(), &id))
}

impl SqliteStore {
    async fn save_server(&self, spec: &ServerSpec) -> Result<(), StoreError> {
        let definition = encode(spec)?;
        self.upsert_definition(
            &SERVERS,
            spec.id.as_str().to_owned(),
            spec.mode().to_owned(),
            definition,
        )
        .await
    }

    async fn delete_server(&self, id: &ServerId) -> Result<(), StoreError> {
        self.delete_definition(&SERVERS, id.as_str().to_owned())
            .await
    }

    async fn load_servers(&self) -> Result<Vec<ServerSpec>, StoreError> {
        self.load_definitions(&SERVERS, decode_row).await
    }
}

#[async_trait]
impl ServerRepository for SqliteStore {
    async fn save(&self, spec: &ServerSpec) -> Result<(), RepositoryError> {
        Ok(self.save_server(spec).await?)
    }

    async fn delete(&self, id: &ServerId) -> Result<(), RepositoryError> {
        Ok(self.delete_server(id).await?)
    }

    async fn load_all(&self) -> Result<Vec<ServerSpec>, RepositoryError> {
        Ok(self.load_servers().await?)
    }
}

#[cfg(test)]
mod tests {
    use mcpgw_core::ServerOrigin;

    use super::*;

    #[test]
    fn the_stored_json_keeps_its_documented_shape() {
        let mut spec = ServerSpec::subprocess(ServerId::parse("math").unwrap(), vec!["m".into()]);
        spec.origin = ServerOrigin::Discovery {
            source_id: "docker-0".into(),
        };
        let json: serde_json::Value = serde_json::from_str(&encode(&spec).unwrap()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "description": null,
                "launch": {"mode": "subprocess", "command": ["m"], "env": {}, "cwd": null},
                "idle_ttl": {"secs": 300, "nanos": 0},
                "health_check_interval": {"secs": 60, "nanos": 0},
                "max_consecutive_failures": 3,
                "predefined_tools": [],
                "origin": {"kind": "discovery", "source_id": "docker-0"},
            })
        );
    }

    #[test]
    fn a_row_with_broken_json_or_id_is_reported_with_its_key() {
        let error = decode_row("math".into(), "{not json").unwrap_err();
        assert!(matches!(&error, StoreError::CorruptRecord { key, .. } if key == "math"));
        let valid = encode(&ServerSpec::subprocess(
            ServerId::parse("ok").unwrap(),
            vec!["x".into()],
        ))
        .unwrap();
        let error = decode_row("bad id".into(), &valid).unwrap_err();
        assert!(matches!(&error, StoreError::CorruptRecord { key, .. } if key == "bad id"));
        assert_eq!(error.kind(), mcpgw_core::ErrorKind::Internal);
    }
}
