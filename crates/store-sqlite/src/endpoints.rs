//! [`EndpointRepository`] on the `endpoints` table.
//!
//! One row per curated endpoint: `name` is the endpoint's name, `spec` the JSON of its whole
//! [`EndpointSpec`] in the domain's serde form (the name included, and the optional fields left
//! out when they are empty), read and written whole. Endpoints of the configuration file are
//! not stored here.
//!
//! The endpoints are what operators defined, not a cache: a row that does not decode, or whose
//! definition names another endpoint than its key, fails the whole load with an error naming the
//! row, instead of serving a gateway that silently lost an endpoint (and its access rules).

use std::path::Path;

use async_trait::async_trait;
use mcpgw_core::{EndpointName, EndpointRepository, EndpointSpec, RepositoryError};
use rusqlite::params;

use crate::error::StoreError;
use crate::store::SqliteStore;

const TABLE: &str = "endpoints";

/// The curated endpoints created at run time, in the gateway's database file.
///
/// Like [`crate::SqliteToolListStore`], it is a view of a [`SqliteStore`]: it shares that
/// store's connection, WAL mode and durability settings, and is a type of its own so that the
/// application is handed exactly this port.
#[derive(Debug, Clone)]
pub struct SqliteEndpointRepository {
    store: SqliteStore,
}

/// The JSON kept for `spec`.
fn encode(spec: &EndpointSpec) -> Result<String, StoreError> {
    serde_json::to_string(spec).map_err(|error| StoreError::CorruptRecord {
        table: TABLE,
        key: spec.name.to_string(),
        reason: format!("it cannot be written as JSON: {error}"),
    })
}

/// The endpoint of the row keyed `name` whose `spec` column holds `json`.
fn decode_row(name: &str, json: &str) -> Result<EndpointSpec, StoreError> {
    let corrupt = |reason: String| StoreError::CorruptRecord {
        table: TABLE,
        key: mcpgw_core::bounded_for_message(name),
        reason,
    };
    let spec: EndpointSpec =
        serde_json::from_str(json).map_err(|error| corrupt(error.to_string()))?;
    if spec.name.as_str() != name {
        return Err(corrupt(format!(
            "its definition is that of the endpoint `{}`",
            mcpgw_core::bounded_for_message(spec.name.as_str())
        )));
    }
    Ok(spec)
}

impl SqliteEndpointRepository {
    /// The endpoints table of `store`'s database, through `store`'s connection.
    pub fn new(store: SqliteStore) -> Self {
        Self { store }
    }

    /// Opens the database at `path` as [`SqliteStore::open`] does and answers its endpoints
    /// table. This blocks; a process that already holds a [`SqliteStore`] on the file should
    /// use [`SqliteEndpointRepository::new`] with it instead of opening a second connection.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        SqliteStore::open(path).map(Self::new)
    }

    /// The store whose connection this one uses.
    pub fn store(&self) -> &SqliteStore {
        &self.store
    }

    async fn upsert(&self, spec: &EndpointSpec) -> Result<(), StoreError> {
        let name = spec.name.as_str().to_owned();
        let json = encode(spec)?;
        self.store
            .run_blocking(move |connection| {
                connection
                    .execute(
                        "INSERT INTO endpoints (name, spec) VALUES (?1, ?2)
                         ON CONFLICT (name) DO UPDATE SET spec = excluded.spec",
                        params![name, json],
                    )
                    .map_err(StoreError::sqlite("save the endpoint"))?;
                Ok(())
            })
            .await
    }

    async fn remove(&self, name: &EndpointName) -> Result<(), StoreError> {
        let name = name.as_str().to_owned();
        self.store
            .run_blocking(move |connection| {
                connection
                    .execute("DELETE FROM endpoints WHERE name = ?1", params![name])
                    .map_err(StoreError::sqlite("delete the endpoint"))?;
                Ok(())
            })
            .await
    }

    async fn all(&self) -> Result<Vec<EndpointSpec>, StoreError> {
        self.store
            .run_blocking(|connection| {
                let operation = "list the endpoints";
                let mut statement = connection
                    .prepare("SELECT name, spec FROM endpoints ORDER BY name")
                    .map_err(StoreError::sqlite(operation))?;
                let rows = statement
                    .query_map([], |row| {
                        Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
                    })
                    .map_err(StoreError::sqlite(operation))?;
                let mut endpoints = Vec::new();
                for row in rows {
                    let (name, json) = row.map_err(StoreError::sqlite("read an endpoint row"))?;
                    endpoints.push(decode_row(&name, &json)?);
                }
                Ok(endpoints)
            })
            .await
    }
}

#[async_trait]
impl EndpointRepository for SqliteEndpointRepository {
    async fn save_endpoint(&self, spec: &EndpointSpec) -> Result<(), RepositoryError> {
        Ok(self.upsert(spec).await?)
    }

    async fn delete_endpoint(&self, name: &EndpointName) -> Result<(), RepositoryError> {
        Ok(self.remove(name).await?)
    }

    async fn load_endpoints(&self) -> Result<Vec<EndpointSpec>, RepositoryError> {
        Ok(self.all().await?)
    }
}

#[cfg(test)]
mod tests {
    use mcpgw_core::{ServerId, ServerOrigin, ToolSelector};

    use super::*;

    fn sample() -> EndpointSpec {
        EndpointSpec {
            name: EndpointName::parse("support").unwrap(),
            description: None,
            tools: vec![ToolSelector {
                server: ServerId::parse("math").unwrap(),
                tool: Some("add".into()),
                name: None,
                title: Some("Add".into()),
                description: None,
                annotations: Some(serde_json::json!({"readOnlyHint": true})),
            }],
            allow: Vec::new(),
            deny: vec!["user:mallory".into()],
            tool_search: false,
            origin: ServerOrigin::Api,
        }
    }

    #[test]
    fn the_stored_json_is_the_domains_serde_form() {
        let spec = sample();
        let json: serde_json::Value = serde_json::from_str(&encode(&spec).unwrap()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "name": "support",
                "tools": [{
                    "server": "math",
                    "tool": "add",
                    "title": "Add",
                    "annotations": {"readOnlyHint": true},
                }],
                "deny": ["user:mallory"],
                "origin": {"kind": "api"},
            })
        );
        assert_eq!(decode_row("support", &json.to_string()).unwrap(), spec);
    }

    /// Bad input: broken JSON, a definition without its selectors, a selector of a server id
    /// that is not an id, an origin of no known kind, an endpoint name that is not a path
    /// segment, and a definition of another endpoint than the row's key. Each is a
    /// `CorruptRecord` naming the row.
    #[test]
    fn rows_that_do_not_decode_are_reported_with_their_name() {
        let cases = [
            ("support", "{not json", "broken json"),
            (
                "support",
                r#"{"name": "support", "origin": {"kind": "api"}}"#,
                "no selectors",
            ),
            (
                "support",
                r#"{"name": "support", "tools": [{"server": "a b"}], "origin": {"kind": "api"}}"#,
                "a server id that is not an id",
            ),
            (
                "support",
                r#"{"name": "support", "tools": [], "origin": {"kind": "file"}}"#,
                "an unknown origin",
            ),
            (
                "a/b",
                r#"{"name": "a/b", "tools": [], "origin": {"kind": "api"}}"#,
                "a name that is not a path segment",
            ),
            (
                "support",
                r#"{"name": "sales", "tools": [], "origin": {"kind": "api"}}"#,
                "another endpoint's definition",
            ),
        ];
        for (key, json, what) in cases {
            let error = decode_row(key, json).unwrap_err();
            assert!(
                matches!(&error, StoreError::CorruptRecord { table: "endpoints", key: found, .. } if found == key),
                "{what}: {error:?}"
            );
            assert_eq!(error.kind(), mcpgw_core::ErrorKind::Internal, "{what}");
            assert!(error.to_string().contains(&format!("`{key}`")), "{what}");
        }
    }
}
