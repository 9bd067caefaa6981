//! The stored form of a group definition: the one JSON document every store keeps per group.
//!
//! It is a file format, independent of [`GroupSpec`]'s fields: fields may be added with a serde
//! default, never renamed or removed, so that rows written by earlier gateways (and by any
//! store) keep loading. The group's id is not part of it: a store keeps the id as the row's key
//! and hands it back to [`StoredGroup::into_spec`]. The members are part of the document, in
//! their order (the round-robin order), because a group is always read and written whole.
//!
//! ```rust
//! use mcpgw_core::ServerId;
//! use mcpgw_groups::{GroupSpec, GroupStrategy, MemberSpec, StoredGroup};
//!
//! let spec = GroupSpec {
//!     id: ServerId::parse("pool")?,
//!     description: None,
//!     strategy: GroupStrategy::Priority,
//!     min_healthy: 1,
//!     members: vec![MemberSpec::new(ServerId::parse("a")?).with_priority(2)],
//! };
//! let stored = StoredGroup::from_spec(&spec);
//! assert_eq!(stored.strategy, "priority");
//! assert_eq!(stored.into_spec("pool")?, spec);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use mcpgw_core::{IdError, ServerId};
use serde::{Deserialize, Serialize};

use crate::error::GroupError;
use crate::group::MemberSpec;
use crate::repository::GroupSpec;
use crate::strategy::GroupStrategy;

/// A group definition as stored, without its id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredGroup {
    /// What the group is for, as its creator wrote it.
    #[serde(default)]
    pub description: Option<String>,
    /// The strategy's name (`round_robin`, ...), as the API and the configuration spell it.
    pub strategy: String,
    /// Members in rotation below which the group is no longer healthy.
    pub min_healthy: u32,
    /// The members, in the group's order (the round-robin order).
    #[serde(default)]
    pub members: Vec<StoredMember>,
}

/// One member of a [`StoredGroup`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredMember {
    /// The member server's id, as written (checked by [`StoredGroup::into_spec`]).
    pub id: String,
    /// Share of the calls under the weighted strategies.
    pub weight: u32,
    /// Order under `priority`: the lowest number is tried first.
    #[serde(default)]
    pub priority: u32,
}

/// Why a stored document does not make a [`GroupSpec`]: a store reports it as a damaged row.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoredGroupError {
    /// The id the row is kept under is not a valid id.
    #[error("{0}")]
    GroupId(IdError),
    /// The strategy is not one this gateway knows.
    #[error("{0}")]
    Strategy(GroupError),
    /// A member's id is not a valid id.
    #[error("member: {0}")]
    MemberId(IdError),
}

impl StoredGroup {
    /// The stored form of `spec` (its id aside).
    pub fn from_spec(spec: &GroupSpec) -> Self {
        Self {
            description: spec.description.clone(),
            strategy: spec.strategy.as_str().to_owned(),
            min_healthy: spec.min_healthy,
            members: spec
                .members
                .iter()
                .map(|member| StoredMember {
                    id: member.id.as_str().to_owned(),
                    weight: member.weight,
                    priority: member.priority,
                })
                .collect(),
        }
    }

    /// The group kept under `id`. The document is taken as stored: the domain's rules on
    /// weights and `min_healthy` apply when the group is built from the spec, not here.
    pub fn into_spec(self, id: &str) -> Result<GroupSpec, StoredGroupError> {
        let id = ServerId::parse(id).map_err(StoredGroupError::GroupId)?;
        let strategy = GroupStrategy::parse(&self.strategy).map_err(StoredGroupError::Strategy)?;
        let members = self
            .members
            .into_iter()
            .map(|member| {
                Ok(MemberSpec {
                    id: ServerId::parse(&member.id).map_err(StoredGroupError::MemberId)?,
                    weight: member.weight,
                    priority: member.priority,
                })
            })
            .collect::<Result<Vec<_>, StoredGroupError>>()?;
        Ok(GroupSpec {
            id,
            description: self.description,
            strategy,
            min_healthy: self.min_healthy,
            members,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(raw: &str) -> ServerId {
        ServerId::parse(raw).unwrap()
    }

    #[test]
    fn the_document_keeps_its_shape_and_round_trips() {
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
        let stored: StoredGroup = serde_json::from_value(json).unwrap();
        assert_eq!(stored.into_spec("pool").unwrap(), spec);
    }

    #[test]
    fn a_document_without_the_optional_fields_loads_with_their_defaults() {
        let stored: StoredGroup = serde_json::from_str(
            r#"{"strategy": "priority", "min_healthy": 1, "members": [{"id": "a", "weight": 2}]}"#,
        )
        .unwrap();
        let spec = stored.into_spec("pool").unwrap();
        assert_eq!(spec.description, None);
        assert_eq!(spec.members, [MemberSpec::new(id("a")).with_weight(2)]);
    }

    /// Bad input: an unknown strategy, a member id and a group id that are not ids.
    #[test]
    fn documents_that_make_no_group_say_why() {
        let document = |strategy: &str, member: &str| StoredGroup {
            description: None,
            strategy: strategy.to_owned(),
            min_healthy: 1,
            members: vec![StoredMember {
                id: member.to_owned(),
                weight: 1,
                priority: 0,
            }],
        };
        let error = document("fastest", "a").into_spec("pool").unwrap_err();
        assert!(matches!(error, StoredGroupError::Strategy(_)), "{error:?}");
        assert!(error.to_string().contains("`fastest`"), "{error}");
        let error = document("random", "a b").into_spec("pool").unwrap_err();
        assert!(matches!(error, StoredGroupError::MemberId(_)), "{error:?}");
        assert!(error.to_string().starts_with("member: "), "{error}");
        let error = document("random", "a").into_spec("bad id").unwrap_err();
        assert!(matches!(error, StoredGroupError::GroupId(_)), "{error:?}");
    }
}
