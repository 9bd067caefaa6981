//! [`ToolPinStore`] on the `tool_pins` table.
//!
//! One row per (owner, tool): `pinned` and `observed` hold the record's two halves as JSON text
//! in the form [`mcpgw_core::pins::stored`] defines (the digest, the MCP `Tool` definition as the
//! server reported it, times as Unix microseconds, who approved or rejected and when), or NULL
//! when the record has no such half. A save of several records is one transaction.
//!
//! Unlike the tool lists, the pins are not a cache: they are what operators decided. A row that
//! does not decode fails the whole load with an error naming its owner and tool, because a
//! ledger read in part would pin again on first use a definition an operator rejected.

use std::path::Path;

use async_trait::async_trait;
use mcpgw_core::{RepositoryError, ServerId, ToolPin, ToolPinStore};
use rusqlite::params;

use crate::error::StoreError;
use crate::store::SqliteStore;

const TABLE: &str = "tool_pins";

/// The pin ledger, in the gateway's database file.
///
/// Like [`crate::SqliteToolListStore`], it is a view of a [`SqliteStore`]: it shares that
/// store's connection, WAL mode and durability settings, and is a type of its own so that the
/// application is handed exactly this port.
#[derive(Debug, Clone)]
pub struct SqliteToolPinStore {
    store: SqliteStore,
}

/// A `tool_pins` row as SQLite answers it, before the domain's types apply.
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

impl ToolPinRow {
    fn encode(pin: &ToolPin) -> Result<Self, StoreError> {
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
        Ok(Self {
            owner: pin.owner.as_str().to_owned(),
            tool: pin.tool.clone(),
            pinned,
            observed,
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

impl SqliteToolPinStore {
    /// The pin ledger of `store`'s database, through `store`'s connection.
    pub fn new(store: SqliteStore) -> Self {
        Self { store }
    }

    /// Opens the database at `path` as [`SqliteStore::open`] does and answers its pin ledger.
    /// This blocks; a process that already holds a [`SqliteStore`] on the file should use
    /// [`SqliteToolPinStore::new`] with it instead of opening a second connection.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        SqliteStore::open(path).map(Self::new)
    }

    /// The store whose connection this one uses.
    pub fn store(&self) -> &SqliteStore {
        &self.store
    }

    async fn upsert_pins(&self, pins: &[ToolPin]) -> Result<(), StoreError> {
        if pins.is_empty() {
            return Ok(());
        }
        let rows = pins
            .iter()
            .map(ToolPinRow::encode)
            .collect::<Result<Vec<_>, _>>()?;
        self.store
            .run_blocking(move |connection| {
                let operation = "save the tool pins";
                let transaction = connection
                    .transaction()
                    .map_err(StoreError::sqlite(operation))?;
                {
                    // In order, so that the later record of a pair in one save wins.
                    let mut statement = transaction
                        .prepare_cached(
                            "INSERT INTO tool_pins (owner, tool, pinned, observed)
                             VALUES (?1, ?2, ?3, ?4)
                             ON CONFLICT (owner, tool) DO UPDATE SET
                                 pinned = excluded.pinned,
                                 observed = excluded.observed",
                        )
                        .map_err(StoreError::sqlite(operation))?;
                    for row in &rows {
                        statement
                            .execute(params![row.owner, row.tool, row.pinned, row.observed])
                            .map_err(StoreError::sqlite(operation))?;
                    }
                }
                transaction.commit().map_err(StoreError::sqlite(operation))
            })
            .await
    }

    async fn remove_owners(&self, owners: &[ServerId]) -> Result<(), StoreError> {
        if owners.is_empty() {
            return Ok(());
        }
        let owners: Vec<String> = owners.iter().map(|id| id.as_str().to_owned()).collect();
        self.store
            .run_blocking(move |connection| {
                let operation = "delete the tool pins";
                let transaction = connection
                    .transaction()
                    .map_err(StoreError::sqlite(operation))?;
                {
                    let mut statement = transaction
                        .prepare_cached("DELETE FROM tool_pins WHERE owner = ?1")
                        .map_err(StoreError::sqlite(operation))?;
                    for owner in &owners {
                        statement
                            .execute(params![owner])
                            .map_err(StoreError::sqlite(operation))?;
                    }
                }
                transaction.commit().map_err(StoreError::sqlite(operation))
            })
            .await
    }

    async fn all_pins(&self) -> Result<Vec<ToolPin>, StoreError> {
        self.store
            .run_blocking(|connection| {
                let operation = "list the tool pins";
                let mut statement = connection
                    .prepare(
                        "SELECT owner, tool, pinned, observed
                         FROM tool_pins ORDER BY owner, tool",
                    )
                    .map_err(StoreError::sqlite(operation))?;
                let rows = statement
                    .query_map([], |row| {
                        Ok(ToolPinRow {
                            owner: row.get(0)?,
                            tool: row.get(1)?,
                            pinned: row.get(2)?,
                            observed: row.get(3)?,
                        })
                    })
                    .map_err(StoreError::sqlite(operation))?;
                let mut pins = Vec::new();
                for row in rows {
                    let row = row.map_err(StoreError::sqlite("read a tool pin row"))?;
                    pins.push(row.decode()?);
                }
                Ok(pins)
            })
            .await
    }
}

#[async_trait]
impl ToolPinStore for SqliteToolPinStore {
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
    fn the_json_is_the_documented_shape() {
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
        let row = ToolPinRow::encode(&pin).unwrap();
        let pinned: serde_json::Value =
            serde_json::from_str(row.pinned.as_deref().unwrap()).unwrap();
        assert_eq!(
            pinned,
            serde_json::json!({
                "digest": "d1",
                "definition": {"name": "read_file", "inputSchema": {"type": "object"}},
                "pinned_at": 7,
            })
        );
        let observed: serde_json::Value =
            serde_json::from_str(row.observed.as_deref().unwrap()).unwrap();
        assert_eq!(
            observed["rejected"],
            serde_json::json!({"by": "user:ops", "at": 9})
        );
        assert_eq!(row.decode().unwrap(), pin);
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
}
