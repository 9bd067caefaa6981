//! [`ServerRepository`] on the `mcp_servers` table.
//!
//! A row's `definition` is the serde form of [`ServerSpec`] (the core's one form of a
//! definition, a file format that only grows) without the id, which is the row's key: the same
//! document the SQLite store keeps, so rows move between the two stores unchanged. Every write
//! tells the other replicas ([`Topic::Servers`]).

use async_trait::async_trait;
use mcpgw_core::{RepositoryError, ServerId, ServerRepository, ServerSpec};

use crate::changes::Topic;
use crate::definitions::DefinitionTable;
use crate::error::StoreError;
use crate::store::PostgresStore;

const TABLE: &str = "mcp_servers";

// The database's clock stamps the rows: the port passes no time, and these columns are for
// operators reading the table, not for the domain.
static SERVERS: DefinitionTable = DefinitionTable {
    topic: Topic::Servers,
    upsert_sql: "INSERT INTO mcp_servers (id, mode, definition) VALUES ($1, $2, $3)
     ON CONFLICT (id) DO UPDATE SET
         mode = excluded.mode, definition = excluded.definition, updated_at = now()",
    delete_sql: "DELETE FROM mcp_servers WHERE id = $1",
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
    let corrupt = |reason: String| StoreError::CorruptRecord {
        table: TABLE,
        key: mcpgw_core::bounded_for_message(&id),
        reason,
    };
    ServerId::parse(&id).map_err(|error| corrupt(error.to_string()))?;
    let mut definition: serde_json::Value =
        serde_json::from_str(definition).map_err(|error| corrupt(error.to_string()))?;
    let Some(fields) = definition.as_object_mut() else {
        return Err(corrupt("the definition is not a JSON object".to_owned()));
    };
    fields.insert("id".to_owned(), serde_json::Value::String(id.clone()));
    serde_json::from_value(definition).map_err(|error| corrupt(error.to_string()))
}

#[async_trait]
impl ServerRepository for PostgresStore {
    async fn save(&self, spec: &ServerSpec) -> Result<(), RepositoryError> {
        let definition = encode(spec)?;
        Ok(self
            .upsert_definition(&SERVERS, spec.id.as_str(), spec.mode(), &definition)
            .await?)
    }

    async fn delete(&self, id: &ServerId) -> Result<(), RepositoryError> {
        Ok(self.delete_definition(&SERVERS, id.as_str()).await?)
    }

    async fn load_all(&self) -> Result<Vec<ServerSpec>, RepositoryError> {
        Ok(self.load_definitions(&SERVERS, decode_row).await?)
    }
}

#[cfg(test)]
mod tests {
    use mcpgw_core::ServerOrigin;

    use super::*;

    /// The document is the one the SQLite store keeps for the same server.
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
        assert_eq!(decode_row("math".into(), &json.to_string()).unwrap(), spec);
    }

    /// Bad input: broken JSON, JSON that is not an object, a definition missing its launch, and
    /// an id that is not an id. Each is a `CorruptRecord` naming the row.
    #[test]
    fn rows_that_do_not_decode_are_reported_with_their_key() {
        let valid = encode(&ServerSpec::subprocess(
            ServerId::parse("ok").unwrap(),
            vec!["x".into()],
        ))
        .unwrap();
        let cases = [
            ("math", "{not json".to_owned()),
            ("math", "[1, 2]".to_owned()),
            ("math", r#"{"description": "no launch"}"#.to_owned()),
            ("bad id", valid),
        ];
        for (key, definition) in cases {
            let error = decode_row(key.into(), &definition).unwrap_err();
            assert!(
                matches!(&error, StoreError::CorruptRecord { table: "mcp_servers", key: found, .. } if found == key),
                "{definition}: {error:?}"
            );
            assert_eq!(error.kind(), mcpgw_core::ErrorKind::Internal);
        }
    }
}
