//! [`EndpointRepository`] on the `endpoints` table.
//!
//! One row per curated endpoint: `name` is the endpoint's name, `spec` (jsonb) its whole
//! [`EndpointSpec`] in the domain's serde form, its name included: the same document the SQLite
//! store keeps. Every write that changed a row tells the other replicas ([`Topic::Endpoints`]).
//!
//! jsonb cannot hold a string with the NUL character, so a definition with one is refused
//! before anything is written, with an error naming the endpoint and the field.
//!
//! The endpoints are what operators defined, not a cache: a row that does not decode, or whose
//! definition names another endpoint than its key, fails the whole load with an error naming the
//! row, instead of serving a gateway that silently lost an endpoint (and its access rules).

use async_trait::async_trait;
use mcpgw_core::{EndpointName, EndpointRepository, EndpointSpec, RepositoryError, ServerOrigin};
use serde_json::Value;

use crate::changes::Topic;
use crate::error::StoreError;
use crate::sql::column;
use crate::store::PostgresStore;

const TABLE: &str = "endpoints";

/// The curated endpoints created at run time, in the gateway's shared database.
///
/// It is a view of a [`PostgresStore`]: it shares that store's pool, and is a type of its own
/// so that the application is handed exactly this port.
#[derive(Debug, Clone)]
pub struct PostgresEndpointRepository {
    store: PostgresStore,
}

/// The JSON kept for `spec`.
fn encode(spec: &EndpointSpec) -> Result<String, StoreError> {
    serde_json::to_string(spec).map_err(|error| StoreError::CorruptRecord {
        table: TABLE,
        key: spec.name.to_string(),
        reason: format!("it cannot be written as JSON: {error}"),
    })
}

/// The endpoint of the row keyed `name` whose `spec` column reads as `json`.
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

/// The first field of `spec` whose text holds the NUL character, which jsonb cannot keep.
fn field_with_nul(spec: &EndpointSpec) -> Option<String> {
    let has_nul = |text: &str| text.contains('\0');
    if spec.description.as_deref().is_some_and(has_nul) {
        return Some("description".to_owned());
    }
    for (index, selector) in spec.tools.iter().enumerate() {
        let texts = [
            ("tool", selector.tool.as_deref()),
            ("name", selector.name.as_deref()),
            ("title", selector.title.as_deref()),
            ("description", selector.description.as_deref()),
        ];
        for (field, text) in texts {
            if text.is_some_and(has_nul) {
                return Some(format!("tools[{index}].{field}"));
            }
        }
        if selector.annotations.as_ref().is_some_and(value_has_nul) {
            return Some(format!("tools[{index}].annotations"));
        }
    }
    for (list, patterns) in [("allow", &spec.allow), ("deny", &spec.deny)] {
        if let Some(index) = patterns.iter().position(|pattern| has_nul(pattern)) {
            return Some(format!("{list}[{index}]"));
        }
    }
    match &spec.origin {
        ServerOrigin::Discovery { source_id } if has_nul(source_id) => {
            Some("origin.source_id".to_owned())
        }
        _ => None,
    }
}

/// Whether a string of `value`, or a key of one of its objects, holds the NUL character.
fn value_has_nul(value: &Value) -> bool {
    match value {
        Value::String(text) => text.contains('\0'),
        Value::Array(items) => items.iter().any(value_has_nul),
        Value::Object(fields) => fields
            .iter()
            .any(|(key, field)| key.contains('\0') || value_has_nul(field)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

impl PostgresEndpointRepository {
    /// The endpoints table of `store`'s database, through `store`'s pool.
    pub fn new(store: PostgresStore) -> Self {
        Self { store }
    }

    /// The store whose pool this one uses.
    pub fn store(&self) -> &PostgresStore {
        &self.store
    }

    async fn upsert(&self, spec: &EndpointSpec, json: &str) -> Result<(), StoreError> {
        self.store
            .write_notifying(
                Topic::Endpoints,
                "save the endpoint",
                "INSERT INTO endpoints (name, spec) VALUES ($1, $2::text::jsonb)
                 ON CONFLICT (name) DO UPDATE SET spec = excluded.spec",
                &[&spec.name.as_str(), &json],
            )
            .await?;
        Ok(())
    }

    async fn remove(&self, name: &EndpointName) -> Result<(), StoreError> {
        self.store
            .write_notifying(
                Topic::Endpoints,
                "delete the endpoint",
                "DELETE FROM endpoints WHERE name = $1",
                &[&name.as_str()],
            )
            .await?;
        Ok(())
    }

    async fn all(&self) -> Result<Vec<EndpointSpec>, StoreError> {
        let operation = "read an endpoint row";
        let rows = self
            .store
            .read_rows(
                "list the endpoints",
                "SELECT name, spec::text FROM endpoints ORDER BY name",
                &[],
            )
            .await?;
        rows.iter()
            .map(|row| {
                let name: &str = column(row, 0, operation)?;
                let json: &str = column(row, 1, operation)?;
                decode_row(name, json)
            })
            .collect()
    }
}

#[async_trait]
impl EndpointRepository for PostgresEndpointRepository {
    async fn save_endpoint(&self, spec: &EndpointSpec) -> Result<(), RepositoryError> {
        if let Some(field) = field_with_nul(spec) {
            return Err(RepositoryError(format!(
                "the endpoint `{}` cannot be stored in PostgreSQL: its {field} holds the NUL \
                 character, which a jsonb column cannot keep; remove it from the definition",
                spec.name
            )));
        }
        let json = encode(spec)?;
        Ok(self.upsert(spec, &json).await?)
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
    use mcpgw_core::{ServerId, ToolSelector};
    use serde_json::json;

    use super::*;

    fn sample() -> EndpointSpec {
        EndpointSpec {
            name: EndpointName::parse("support").unwrap(),
            description: Some("for the support agents".into()),
            tools: vec![
                ToolSelector {
                    server: ServerId::parse("tickets").unwrap(),
                    tool: None,
                    name: None,
                    title: None,
                    description: None,
                    annotations: None,
                },
                ToolSelector {
                    server: ServerId::parse("math").unwrap(),
                    tool: Some("add".into()),
                    name: Some("sum".into()),
                    title: Some("Sum".into()),
                    description: Some("Adds.".into()),
                    annotations: Some(json!({"readOnlyHint": true, "x": [{"y": "z"}]})),
                },
            ],
            allow: vec!["group:support".into()],
            deny: vec!["user:mallory".into()],
            tool_search: true,
            origin: ServerOrigin::Discovery {
                source_id: "docker-0".into(),
            },
        }
    }

    #[test]
    fn an_endpoint_round_trips_through_its_row() {
        let spec = sample();
        assert_eq!(
            decode_row("support", &encode(&spec).unwrap()).unwrap(),
            spec
        );
        assert_eq!(field_with_nul(&spec), None);
    }

    /// Bad input: broken JSON, a definition without its origin, a selector of a server id that
    /// is not an id, an endpoint name that is not a path segment, and a definition of another
    /// endpoint than the row's key. Each is a `CorruptRecord` naming the row.
    #[test]
    fn rows_that_do_not_decode_are_reported_with_their_name() {
        let cases = [
            ("support", "{not json"),
            ("support", r#"{"name": "support", "tools": []}"#),
            (
                "support",
                r#"{"name": "support", "tools": [{"server": "a b"}], "origin": {"kind": "api"}}"#,
            ),
            (
                "a/b",
                r#"{"name": "a/b", "tools": [], "origin": {"kind": "api"}}"#,
            ),
            (
                "support",
                r#"{"name": "sales", "tools": [], "origin": {"kind": "api"}}"#,
            ),
        ];
        for (key, json) in cases {
            let error = decode_row(key, json).unwrap_err();
            assert!(
                matches!(&error, StoreError::CorruptRecord { table: "endpoints", key: found, .. } if found == key),
                "{json}: {error:?}"
            );
            assert!(error.to_string().contains(&format!("`{key}`")), "{json}");
        }
    }

    /// Bad input: the NUL character in each kind of text a definition holds, annotations'
    /// keys and nested values included. Each is found and named; a backslash followed by
    /// `u0000` (six characters of text, not the NUL character) is not.
    #[test]
    fn the_nul_character_is_found_in_every_field() {
        let mut cases: Vec<(EndpointSpec, &str)> = Vec::new();
        let mut spec = sample();
        spec.description = Some("a\0b".into());
        cases.push((spec, "description"));
        let mut spec = sample();
        spec.tools[1].tool = Some("\0".into());
        cases.push((spec, "tools[1].tool"));
        let mut spec = sample();
        spec.tools[1].name = Some("s\0".into());
        cases.push((spec, "tools[1].name"));
        let mut spec = sample();
        spec.tools[1].title = Some("\0T".into());
        cases.push((spec, "tools[1].title"));
        let mut spec = sample();
        spec.tools[0].description = Some("d\0".into());
        cases.push((spec, "tools[0].description"));
        let mut spec = sample();
        spec.tools[1].annotations = Some(json!({"x": [{"y": "\u{0}"}]}));
        cases.push((spec, "tools[1].annotations"));
        let mut spec = sample();
        spec.tools[1].annotations = Some(json!({"k\u{0}": 1}));
        cases.push((spec, "tools[1].annotations"));
        let mut spec = sample();
        spec.allow.push("user:\0".into());
        cases.push((spec, "allow[1]"));
        let mut spec = sample();
        spec.deny = vec!["\0".into()];
        cases.push((spec, "deny[0]"));
        let mut spec = sample();
        spec.origin = ServerOrigin::Discovery {
            source_id: "docker\0".into(),
        };
        cases.push((spec, "origin.source_id"));
        for (spec, field) in cases {
            assert_eq!(field_with_nul(&spec).as_deref(), Some(field));
        }
        let mut spec = sample();
        spec.description = Some("\\u0000".into());
        assert_eq!(field_with_nul(&spec), None);
    }
}
