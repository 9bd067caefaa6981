//! [`ToolPinStore`] on the `tool_pins` table.
//!
//! One row per (owner, tool): `pinned` and `observed` hold the record's two halves as JSON text
//! in the form [`mcpgw_core::pins::stored`] defines (the digest, the MCP `Tool` definition as the
//! server reported it, times as Unix microseconds, who approved or rejected and when), or NULL
//! when the record has no such half. A save of several records is one statement in one
//! transaction (all of them or none), and so is a delete of several owners. Every write that
//! changed a row tells the other replicas ([`Topic::ToolPins`]).
//!
//! Unlike the tool lists, the pins are not a cache: they are what operators decided. A row that
//! does not decode fails the whole load with an error naming its owner and tool, because a
//! ledger read in part would pin again on first use a definition an operator rejected.

use std::collections::BTreeMap;

use async_trait::async_trait;
use mcpgw_core::{RepositoryError, ServerId, ToolPin, ToolPinStore};

use crate::changes::Topic;
use crate::error::StoreError;
use crate::sql::column;
use crate::store::PostgresStore;

const TABLE: &str = "tool_pins";

/// The pin ledger, in the gateway's shared database.
///
/// It is a view of a [`PostgresStore`]: it shares that store's pool, and is a type of its own
/// so that the application is handed exactly this port.
#[derive(Debug, Clone)]
pub struct PostgresToolPinStore {
    store: PostgresStore,
}

/// A `tool_pins` row as PostgreSQL answers it, before the domain's types apply.
struct ToolPinRow {
    owner: String,
    tool: String,
    pinned: Option<String>,
    observed: Option<String>,
}

/// The key of a record in messages: its owner and tool, bounded and with control characters
/// escaped, since the tool's name is whatever an upstream server chose.
fn record_key(owner: &str, tool: &str) -> String {
    format!(
        "{}/{}",
        mcpgw_core::bounded_for_message(owner),
        mcpgw_core::bounded_for_message(tool)
    )
}

/// The JSON of `pin`'s two halves.
fn encode(pin: &ToolPin) -> Result<(Option<String>, Option<String>), StoreError> {
    let corrupt = |column: &str, error: serde_json::Error| StoreError::CorruptRecord {
        table: TABLE,
        key: record_key(pin.owner.as_str(), &pin.tool),
        reason: format!("{column}: {error}"),
    };
    let pinned = pin
        .pinned
        .as_ref()
        .map(mcpgw_core::encode_pinned)
        .transpose()
        .map_err(|error| corrupt("pinned", error))?;
    let observed = pin
        .observed
        .as_ref()
        .map(mcpgw_core::encode_observed)
        .transpose()
        .map_err(|error| corrupt("observed", error))?;
    Ok((pinned, observed))
}

impl ToolPinRow {
    fn read(row: &tokio_postgres::Row) -> Result<Self, StoreError> {
        let operation = "read a tool pin row";
        Ok(Self {
            owner: column(row, 0, operation)?,
            tool: column(row, 1, operation)?,
            pinned: column(row, 2, operation)?,
            observed: column(row, 3, operation)?,
        })
    }

    fn decode(self) -> Result<ToolPin, StoreError> {
        let corrupt = |reason: String| StoreError::CorruptRecord {
            table: TABLE,
            key: record_key(&self.owner, &self.tool),
            reason,
        };
        let owner = ServerId::parse(&self.owner).map_err(|error| corrupt(error.to_string()))?;
        let pinned = self
            .pinned
            .as_deref()
            .map(mcpgw_core::decode_pinned)
            .transpose()
            .map_err(|error| corrupt(format!("pinned: {error}")))?;
        let observed = self
            .observed
            .as_deref()
            .map(mcpgw_core::decode_observed)
            .transpose()
            .map_err(|error| corrupt(format!("observed: {error}")))?;
        Ok(ToolPin {
            owner,
            tool: self.tool,
            pinned,
            observed,
        })
    }
}

impl PostgresToolPinStore {
    /// The pin ledger of `store`'s database, through `store`'s pool.
    pub fn new(store: PostgresStore) -> Self {
        Self { store }
    }

    /// The store whose pool this one uses.
    pub fn store(&self) -> &PostgresStore {
        &self.store
    }

    async fn upsert_pins(&self, pins: &[ToolPin]) -> Result<(), StoreError> {
        // The last record of a pair wins, and the rows go in key order: one statement cannot
        // touch a row twice, and two replicas saving overlapping batches lock rows in the same
        // order.
        let mut latest: BTreeMap<(&str, &str), &ToolPin> = BTreeMap::new();
        for pin in pins {
            latest.insert((pin.owner.as_str(), pin.tool.as_str()), pin);
        }
        if latest.is_empty() {
            return Ok(());
        }
        let mut owners = Vec::with_capacity(latest.len());
        let mut tools = Vec::with_capacity(latest.len());
        let mut pinned = Vec::with_capacity(latest.len());
        let mut observed = Vec::with_capacity(latest.len());
        for ((owner, tool), pin) in latest {
            let (pinned_json, observed_json) = encode(pin)?;
            owners.push(owner);
            tools.push(tool);
            pinned.push(pinned_json);
            observed.push(observed_json);
        }
        self.store
            .write_notifying(
                Topic::ToolPins,
                "save the tool pins",
                "INSERT INTO tool_pins (owner, tool, pinned, observed)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
                 ON CONFLICT (owner, tool) DO UPDATE SET
                     pinned = excluded.pinned,
                     observed = excluded.observed",
                &[&owners, &tools, &pinned, &observed],
            )
            .await?;
        Ok(())
    }

    async fn remove_owners(&self, owners: &[ServerId]) -> Result<(), StoreError> {
        if owners.is_empty() {
            return Ok(());
        }
        let owners: Vec<&str> = owners.iter().map(ServerId::as_str).collect();
        self.store
            .write_notifying(
                Topic::ToolPins,
                "delete the tool pins",
                "DELETE FROM tool_pins WHERE owner = ANY($1)",
                &[&owners],
            )
            .await?;
        Ok(())
    }

    async fn all_pins(&self) -> Result<Vec<ToolPin>, StoreError> {
        let rows = self
            .store
            .read_rows(
                "list the tool pins",
                "SELECT owner, tool, pinned, observed FROM tool_pins ORDER BY owner, tool",
                &[],
            )
            .await?;
        rows.iter()
            .map(|row| ToolPinRow::read(row)?.decode())
            .collect()
    }
}

#[async_trait]
impl ToolPinStore for PostgresToolPinStore {
    async fn load_tool_pins(&self) -> Result<Vec<ToolPin>, RepositoryError> {
        Ok(self.all_pins().await?)
    }

    async fn save_tool_pins(&self, pins: &[ToolPin]) -> Result<(), RepositoryError> {
        Ok(self.upsert_pins(pins).await?)
    }

    async fn delete_tool_pins(&self, owners: &[ServerId]) -> Result<(), RepositoryError> {
        Ok(self.remove_owners(owners).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpgw_core::{ObservedTool, PinnedTool, Timestamp, Tool};

    fn row(owner: &str, pinned: Option<&str>, observed: Option<&str>) -> ToolPinRow {
        ToolPinRow {
            owner: owner.to_owned(),
            tool: "read_file".to_owned(),
            pinned: pinned.map(str::to_owned),
            observed: observed.map(str::to_owned),
        }
    }

    #[test]
    fn the_json_is_the_documented_shape_and_decodes_back() {
        let pin = ToolPin {
            owner: ServerId::parse("files").unwrap(),
            tool: "read_file".to_owned(),
            pinned: Some(PinnedTool {
                digest: "d1".to_owned(),
                definition: Tool::new("read_file"),
                pinned_at: Timestamp::from_unix_micros(7),
                approved_by: None,
            }),
            observed: Some(ObservedTool {
                digest: "d2".to_owned(),
                definition: Tool::new("read_file"),
                observed_at: Timestamp::from_unix_micros(8),
                rejected: Some(("user:ops".to_owned(), Timestamp::from_unix_micros(9))),
            }),
        };
        let (pinned, observed) = encode(&pin).unwrap();
        let pinned_json: serde_json::Value =
            serde_json::from_str(pinned.as_deref().unwrap()).unwrap();
        assert_eq!(
            pinned_json,
            serde_json::json!({
                "digest": "d1",
                "definition": {"name": "read_file", "inputSchema": {"type": "object"}},
                "pinned_at": 7,
            })
        );
        let observed_json: serde_json::Value =
            serde_json::from_str(observed.as_deref().unwrap()).unwrap();
        assert_eq!(
            observed_json["rejected"],
            serde_json::json!({"by": "user:ops", "at": 9})
        );
        let decoded = ToolPinRow {
            owner: "files".to_owned(),
            tool: "read_file".to_owned(),
            pinned,
            observed,
        }
        .decode()
        .unwrap();
        assert_eq!(decoded, pin);
    }

    /// Bad input: halves that are not JSON, not objects, miss a field, hold a time that is not
    /// an integer, a rejection without its time, a definition without a name, and an owner
    /// that is not an id. Each is a `CorruptRecord` naming the owner and the tool.
    #[test]
    fn rows_that_do_not_decode_are_reported_with_their_owner_and_tool() {
        let definition = r#"{"name": "read_file"}"#;
        let pinned = format!(r#"{{"digest": "d", "definition": {definition}, "pinned_at": 1}}"#);
        let cases = [
            row("files", Some("{"), None),
            row("files", None, Some("[]")),
            row("files", Some(r#"{"digest": "d", "pinned_at": 1}"#), None),
            row(
                "files",
                Some(&format!(
                    r#"{{"digest": "d", "definition": {definition}, "pinned_at": 1.5}}"#
                )),
                None,
            ),
            row(
                "files",
                Some(&pinned),
                Some(&format!(
                    r#"{{"digest": "d", "definition": {definition}, "observed_at": 1, "rejected": {{"by": "x"}}}}"#
                )),
            ),
            row(
                "files",
                None,
                Some(r#"{"digest": "d", "definition": {"description": "x"}, "observed_at": 1}"#),
            ),
            row("not an id", Some(&pinned), None),
        ];
        for case in cases {
            let owner = case.owner.clone();
            let (pinned, observed) = (case.pinned.clone(), case.observed.clone());
            let error = case.decode().unwrap_err();
            assert!(
                matches!(&error, StoreError::CorruptRecord { table: "tool_pins", key, .. }
                    if *key == format!("{owner}/read_file")),
                "{pinned:?} {observed:?}: {error:?}"
            );
        }
    }

    /// Bad input: a tool name of 300 characters with a line break, as a hostile upstream could
    /// report. The message names the record without carrying the break or the whole name.
    #[test]
    fn the_key_of_a_hostile_tool_name_is_bounded_and_escaped() {
        let tool = format!("evil\n{}", "x".repeat(300));
        let key = record_key("files", &tool);
        assert!(key.starts_with("files/evil\\n"), "{key}");
        assert!(key.ends_with("..."), "{key}");
        assert!(!key.contains('\n') && key.len() < 100, "{key}");
    }
}
