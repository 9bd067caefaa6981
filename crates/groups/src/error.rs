//! Errors of the groups domain.

use mcpgw_core::{ErrorKind, ServerId};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GroupError {
    #[error(
        "unknown group strategy `{0}`; use one of round_robin, weighted_round_robin, \
         least_connections, random, priority"
    )]
    UnknownStrategy(String),
    #[error(
        "`{member}` is already a member of group `{group}`; remove it first to change its \
         weight or priority"
    )]
    MemberAlreadyExists { group: ServerId, member: ServerId },
    #[error(
        "`{member}` is not a member of group `{group}`; list the members with GET /api/groups/{group}"
    )]
    MemberNotFound { group: ServerId, member: ServerId },
    #[error("group `{0}` cannot be a member of itself; add mcp servers as members")]
    GroupAsItsOwnMember(ServerId),
    #[error("member `{member}` has weight {weight}; a weight must be at least 1")]
    InvalidWeight { member: ServerId, weight: u32 },
    #[error("min_healthy of group `{0}` is 0; it must be at least 1")]
    MinHealthyZero(ServerId),
    #[error(
        "min_healthy {min_healthy} is larger than the {members} member(s) of group `{group}`; \
         add members first or choose a min_healthy of at most {members}"
    )]
    MinHealthyAboveMembers {
        group: ServerId,
        min_healthy: u32,
        members: usize,
    },
}

impl GroupError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            GroupError::MemberAlreadyExists { .. } => ErrorKind::Conflict,
            GroupError::MemberNotFound { .. } => ErrorKind::NotFound,
            GroupError::UnknownStrategy(_)
            | GroupError::GroupAsItsOwnMember(_)
            | GroupError::InvalidWeight { .. }
            | GroupError::MinHealthyZero(_)
            | GroupError::MinHealthyAboveMembers { .. } => ErrorKind::Invalid,
        }
    }
}
