//! Role assignments: a principal holds a role within a scope.

use std::collections::BTreeMap;

use mcpgw_core::Timestamp;

use crate::api_key::{ApiKeyRecord, KeyStatus};
use crate::error::AuthError;
use crate::principal::Principal;
use crate::role::{RoleBook, RoleName};
use crate::scope::Scope;

/// `principal` holds `role` in `scope`. Assigning twice is the same assignment.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RoleAssignment {
    pub principal: Principal,
    pub role: RoleName,
    pub scope: Scope,
}

impl RoleAssignment {
    /// Parses the fields of an assign or revoke request (scope `None`: `global`). Whether the
    /// role exists is [`RoleBook::check_assign`]'s question: a revoke may name a role that no
    /// longer exists.
    pub fn parse(principal: &str, role: &str, scope: Option<&str>) -> Result<Self, AuthError> {
        Ok(Self {
            principal: Principal::parse(principal)?,
            role: RoleName::parse(role)?,
            scope: scope.map(Scope::parse).transpose()?.unwrap_or_default(),
        })
    }
}

impl RoleBook {
    /// Checks that an assignment names an existing role (NotFound otherwise).
    pub fn check_assign(&self, assignment: &RoleAssignment) -> Result<(), AuthError> {
        self.require(assignment.role.as_str()).map(|_| ())
    }
}

/// A principal the gateway knows of, for `GET /api/auth/principals`: it holds a role or a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrincipalSummary {
    pub principal: Principal,
    /// Its assignments, as (role, scope), sorted.
    pub roles: Vec<(RoleName, Scope)>,
    /// Its keys that can be used now.
    pub active_keys: usize,
    /// All its keys, revoked and expired ones included.
    pub total_keys: usize,
}

/// Every principal named by an assignment or a key, sorted by principal.
pub fn summarize_principals(
    assignments: &[RoleAssignment],
    keys: &[ApiKeyRecord],
    now: Timestamp,
) -> Vec<PrincipalSummary> {
    fn summary_of<'a>(
        map: &'a mut BTreeMap<Principal, PrincipalSummary>,
        principal: &Principal,
    ) -> &'a mut PrincipalSummary {
        map.entry(principal.clone())
            .or_insert_with(|| PrincipalSummary {
                principal: principal.clone(),
                roles: Vec::new(),
                active_keys: 0,
                total_keys: 0,
            })
    }
    let mut by_principal = BTreeMap::new();
    for assignment in assignments {
        summary_of(&mut by_principal, &assignment.principal)
            .roles
            .push((assignment.role.clone(), assignment.scope.clone()));
    }
    for key in keys {
        let summary = summary_of(&mut by_principal, &key.principal);
        summary.total_keys += 1;
        if key.status(now) == KeyStatus::Active {
            summary.active_keys += 1;
        }
    }
    by_principal
        .into_values()
        .map(|mut summary| {
            summary.roles.sort();
            summary.roles.dedup();
            summary
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use mcpgw_core::ErrorKind;

    use super::*;
    use crate::api_key::{KeyHash, KeyId};

    #[test]
    fn assignments_parse_with_global_as_the_default_scope() {
        let assignment = RoleAssignment::parse("user:alice", "viewer", None).unwrap();
        assert_eq!(assignment.scope, Scope::Global);
        let scoped = RoleAssignment::parse("group:ops", "operator", Some("tenant:acme")).unwrap();
        assert_eq!(scoped.scope.to_string(), "tenant:acme");
        // Bad principal, bad role name, bad scope: each invalid input.
        for (principal, role, scope) in [
            ("alice", "viewer", None),
            ("user:alice", "Viewer", None),
            ("user:alice", "viewer", Some("tenant:")),
            ("user:alice", "viewer", Some("everywhere")),
        ] {
            let error = RoleAssignment::parse(principal, role, scope).unwrap_err();
            assert_eq!(
                error.kind(),
                ErrorKind::Invalid,
                "{principal} {role} {scope:?}"
            );
        }
        let book = RoleBook::default();
        assert_eq!(book.check_assign(&assignment), Ok(()));
        let ghost = RoleAssignment::parse("user:alice", "ghost", None).unwrap();
        assert_eq!(
            book.check_assign(&ghost).unwrap_err().kind(),
            ErrorKind::NotFound
        );
    }

    #[test]
    fn principals_are_summarized_from_assignments_and_keys() {
        let now = Timestamp::from_unix_micros(1_000_000_000);
        let key = |id: &str, principal: &str, revoked: bool| ApiKeyRecord {
            id: KeyId::parse(id).unwrap(),
            name: id.to_owned(),
            principal: Principal::parse(principal).unwrap(),
            role: None,
            prefix: "mcp_AAAAAAAA".to_owned(),
            hash: KeyHash::of(id),
            created_at: now,
            expires_at: Some(now.plus(Duration::from_secs(60))),
            revoked_at: revoked.then_some(now),
        };
        let assignments = [
            RoleAssignment::parse("user:bob", "viewer", Some("tenant:acme")).unwrap(),
            RoleAssignment::parse("user:bob", "developer", None).unwrap(),
            RoleAssignment::parse("user:bob", "developer", None).unwrap(),
            RoleAssignment::parse("group:ops", "operator", None).unwrap(),
        ];
        let keys = [
            key("k1", "user:bob", false),
            key("k2", "user:bob", true),
            key("k3", "service:ci", false),
        ];
        let summaries = summarize_principals(&assignments, &keys, now);
        let rendered: Vec<(String, Vec<String>, usize, usize)> = summaries
            .iter()
            .map(|summary| {
                (
                    summary.principal.to_string(),
                    summary
                        .roles
                        .iter()
                        .map(|(role, scope)| format!("{role}@{scope}"))
                        .collect(),
                    summary.active_keys,
                    summary.total_keys,
                )
            })
            .collect();
        assert_eq!(
            rendered,
            [
                (
                    "group:ops".to_owned(),
                    vec!["operator@global".to_owned()],
                    0,
                    0
                ),
                ("service:ci".to_owned(), vec![], 1, 1),
                (
                    "user:bob".to_owned(),
                    vec![
                        "developer@global".to_owned(),
                        "viewer@tenant:acme".to_owned()
                    ],
                    1,
                    2
                ),
            ]
        );
        // Once the keys expire, none is active.
        let later = now.plus(Duration::from_secs(60));
        assert!(
            summarize_principals(&assignments, &keys, later)
                .iter()
                .all(|summary| summary.active_keys == 0)
        );
    }
}
