//! [`GroupRepository`] on the `groups` table.
//!
//! A row's `definition` is the group's stored form, [`StoredGroup`] (the groups domain's one
//! form of a definition, a file format that only grows), without the id, which is the row's
//! key: the same document the SQLite store keeps. Every write tells the other replicas
//! ([`Topic::Groups`]).

use async_trait::async_trait;
use mcpgw_core::{RepositoryError, ServerId};
use mcpgw_groups::{GroupRepository, GroupSpec, StoredGroup};

use crate::changes::Topic;
use crate::definitions::DefinitionTable;
use crate::error::StoreError;
use crate::store::PostgresStore;

const TABLE: &str = "groups";

static GROUPS: DefinitionTable = DefinitionTable {
    topic: Topic::Groups,
    upsert_sql: "INSERT INTO groups (id, strategy, definition) VALUES ($1, $2, $3)
     ON CONFLICT (id) DO UPDATE SET
         strategy = excluded.strategy, definition = excluded.definition, updated_at = now()",
    delete_sql: "DELETE FROM groups WHERE id = $1",
    select_sql: "SELECT id, definition FROM groups ORDER BY id",
    save_operation: "save the group",
    delete_operation: "delete the group",
    list_operation: "list the groups",
    read_operation: "read a group row",
};

fn encode(spec: &GroupSpec) -> Result<String, StoreError> {
    serde_json::to_string(&StoredGroup::from_spec(spec)).map_err(|error| {
        StoreError::CorruptRecord {
            table: TABLE,
            key: spec.id.to_string(),
            reason: error.to_string(),
        }
    })
}

fn decode_row(id: String, definition: &str) -> Result<GroupSpec, StoreError> {
    let corrupt = |reason: String| StoreError::CorruptRecord {
        table: TABLE,
        key: mcpgw_core::bounded_for_message(&id),
        reason,
    };
    let stored: StoredGroup =
        serde_json::from_str(definition).map_err(|error| corrupt(error.to_string()))?;
    stored
        .into_spec(&id)
        .map_err(|error| corrupt(error.to_string()))
}

#[async_trait]
impl GroupRepository for PostgresStore {
    async fn save(&self, spec: &GroupSpec) -> Result<(), RepositoryError> {
        let definition = encode(spec)?;
        Ok(self
            .upsert_definition(
                &GROUPS,
                spec.id.as_str(),
                spec.strategy.as_str(),
                &definition,
            )
            .await?)
    }

    async fn delete(&self, id: &ServerId) -> Result<(), RepositoryError> {
        Ok(self.delete_definition(&GROUPS, id.as_str()).await?)
    }

    async fn load_all(&self) -> Result<Vec<GroupSpec>, RepositoryError> {
        Ok(self.load_definitions(&GROUPS, decode_row).await?)
    }
}

#[cfg(test)]
mod tests {
    use mcpgw_groups::{GroupStrategy, MemberSpec};

    use super::*;

    fn id(raw: &str) -> ServerId {
        ServerId::parse(raw).unwrap()
    }

    #[test]
    fn a_group_round_trips_through_its_row() {
        let spec = GroupSpec {
            id: id("pool"),
            description: Some("three copies".into()),
            strategy: GroupStrategy::Priority,
            min_healthy: 2,
            members: vec![
                MemberSpec::new(id("b")).with_weight(3),
                MemberSpec::new(id("a")).with_priority(7),
            ],
        };
        assert_eq!(
            decode_row("pool".into(), &encode(&spec).unwrap()).unwrap(),
            spec
        );
    }

    /// Bad input: broken JSON, an unknown strategy, a member id and a group id that are not
    /// ids. Each is a `CorruptRecord` naming the row.
    #[test]
    fn rows_that_do_not_decode_are_reported_with_their_key() {
        let valid = r#"{"strategy": "round_robin", "min_healthy": 1, "members": []}"#;
        let cases = [
            ("pool", "{not json"),
            ("pool", r#"{"strategy": "fastest", "min_healthy": 1}"#),
            (
                "pool",
                r#"{"strategy": "random", "min_healthy": 1, "members": [{"id": "a b", "weight": 1}]}"#,
            ),
            ("bad id", valid),
        ];
        for (key, definition) in cases {
            let error = decode_row(key.into(), definition).unwrap_err();
            assert!(
                matches!(&error, StoreError::CorruptRecord { table: "groups", key: found, .. } if found == key),
                "{definition}: {error:?}"
            );
        }
    }
}
