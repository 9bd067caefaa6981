//! [`GroupRepository`] on the `groups` table.
//!
//! A row's `definition` is the group's stored form, [`StoredGroup`] (the groups domain's one
//! form of a definition, a file format that only grows), without the id, which is the row's
//! key. The members are part of it, in their order (the round-robin order), because a group is
//! always read and written whole.

use async_trait::async_trait;
use mcpgw_core::{RepositoryError, ServerId};
use mcpgw_groups::{GroupRepository, GroupSpec, StoredGroup};

use crate::definitions::DefinitionTable;
use crate::error::StoreError;
use crate::store::SqliteStore;

const TABLE: &str = "groups";

static GROUPS: DefinitionTable = DefinitionTable {
    table: "groups",
    upsert_sql: "INSERT INTO groups (id, strategy, definition, created_at, updated_at)
     VALUES (?1, ?2, ?3, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
     ON CONFLICT (id) DO UPDATE SET
         strategy = excluded.strategy, definition = excluded.definition,
         updated_at = excluded.updated_at",
    delete_sql: "DELETE FROM groups WHERE id = ?1",
    select_sql: "SELECT id, definition FROM groups ORDER BY id",
    save_operation: "save the group",
    delete_operation: "delete the group",
    list_operation: "list the groups",
    read_operation: "read a group row",
};

fn decode_row(id: String, definition: &str) -> Result<GroupSpec, StoreError> {
    let corrupt = |reason: String| StoreError::CorruptRecord {
        table: TABLE,
        key: id.clone(),
        reason,
    };
    let stored: StoredGroup =
        serde_json::from_str(definition).map_err(|error| corrupt(error.to_string()))?;
    stored
        .into_spec(&id)
        .map_err(|error| corrupt(error.to_string()))
}

impl SqliteStore {
    async fn save_group(&self, spec: &GroupSpec) -> Result<(), StoreError> {
        let definition = serde_json::to_string(&StoredGroup::from_spec(spec)).map_err(|error| {
            StoreError::CorruptRecord {
                table: TABLE,
                key: spec.id.to_string(),
                reason: error.to_string(),
            }
        })?;
        self.upsert_definition(
            &GROUPS,
            spec.id.as_str().to_owned(),
            spec.strategy.as_str().to_owned(),
            definition,
        )
        .await
    }

    async fn delete_group(&self, id: &ServerId) -> Result<(), StoreError> {
        self.delete_definition(&GROUPS, id.as_str().to_owned())
            .await
    }

    async fn load_groups(&self) -> Result<Vec<GroupSpec>, StoreError> {
        self.load_definitions(&GROUPS, decode_row).await
    }
}

#[async_trait]
impl GroupRepository for SqliteStore {
    async fn save(&self, spec: &GroupSpec) -> Result<(), RepositoryError> {
        Ok(self.save_group(spec).await?)
    }

    async fn delete(&self, id: &ServerId) -> Result<(), RepositoryError> {
        Ok(self.delete_group(id).await?)
    }

    async fn load_all(&self) -> Result<Vec<GroupSpec>, RepositoryError> {
        Ok(self.load_groups().await?)
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
    fn the_stored_json_keeps_its_documented_shape() {
        let spec = GroupSpec {
            id: id("pool"),
            description: Some("three copies".into()),
            strategy: GroupStrategy::WeightedRoundRobin,
            min_healthy: 2,
            members: vec![
                MemberSpec::new(id("a")).with_weight(3),
                MemberSpec::new(id("b")).with_priority(7),
            ],
        };
        let json = serde_json::to_value(StoredGroup::from_spec(&spec)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "description": "three copies",
                "strategy": "weighted_round_robin",
                "min_healthy": 2,
                "members": [
                    {"id": "a", "weight": 3, "priority": 0},
                    {"id": "b", "weight": 1, "priority": 7},
                ],
            })
        );
        let back = decode_row("pool".into(), &json.to_string()).unwrap();
        assert_eq!(back, spec);
    }

    #[test]
    fn rows_that_do_not_decode_are_reported_with_their_key() {
        let valid_members = r#"{"strategy": "round_robin", "min_healthy": 1, "members": []}"#;
        let cases = [
            ("pool", "{not json", "broken json"),
            (
                "pool",
                r#"{"strategy": "fastest", "min_healthy": 1}"#,
                "unknown strategy",
            ),
            (
                "pool",
                r#"{"strategy": "random", "min_healthy": 1, "members": [{"id": "a b", "weight": 1}]}"#,
                "a member id that is not an id",
            ),
            ("bad id", valid_members, "a group id that is not an id"),
        ];
        for (key, definition, what) in cases {
            let error = decode_row(key.into(), definition).unwrap_err();
            assert!(
                matches!(&error, StoreError::CorruptRecord { table: "groups", key: found, .. } if found == key),
                "{what}: {error:?}"
            );
            assert_eq!(error.kind(), mcpgw_core::ErrorKind::Internal, "{what}");
        }
    }

    #[test]
    fn a_row_written_without_the_optional_fields_loads_with_their_defaults() {
        let spec = decode_row(
            "pool".into(),
            r#"{"strategy": "priority", "min_healthy": 1, "members": [{"id": "a", "weight": 2}]}"#,
        )
        .unwrap();
        assert_eq!(spec.description, None);
        assert_eq!(spec.members, [MemberSpec::new(id("a")).with_weight(2)]);
    }
}
