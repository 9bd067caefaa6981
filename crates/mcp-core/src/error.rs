//! Errors of the MCP server domain.

use crate::id::ServerId;
use crate::ports::{LaunchError, RepositoryError, SessionError};
use crate::state::TransitionError;

/// What kind of failure an error is, independent of its wording. Adapters map kinds to their
/// own vocabulary (HTTP statuses, JSON-RPC codes) in one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    NotFound,
    Conflict,
    Invalid,
    Unauthenticated,
    Forbidden,
    RateLimited,
    Unavailable,
    Timeout,
    Internal,
}

impl ErrorKind {
    /// The kind in snake case, as traces and logs name it.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Invalid => "invalid",
            ErrorKind::Unauthenticated => "unauthenticated",
            ErrorKind::Forbidden => "forbidden",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Internal => "internal",
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CoreError {
    #[error(
        "mcp server `{0}` is not registered; list the registered ones with GET /api/mcp_servers"
    )]
    ServerNotFound(ServerId),
    #[error("mcp server `{0}` already exists; choose another id or update the existing one")]
    ServerAlreadyExists(ServerId),
    #[error(
        "mcp server `{0}` is declared in the configuration file; change the file and reload instead"
    )]
    DeclaredInConfig(ServerId),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Transition(#[from] TransitionError),
    #[error("mcp server `{server}` could not be started: {source}")]
    StartFailed {
        server: ServerId,
        source: LaunchError,
    },
    #[error("mcp server `{server}` is {state} and waits {retry_in_ms} ms before the next start")]
    BackingOff {
        server: ServerId,
        state: crate::state::ServerState,
        retry_in_ms: u64,
    },
    #[error("mcp server `{server}`: {source}")]
    Session {
        server: ServerId,
        source: SessionError,
    },
    #[error("the server store failed: {0}")]
    Repository(#[from] RepositoryError),
    #[error("group `{0}` does not exist; list the groups with GET /api/groups")]
    GroupNotFound(ServerId),
    /// A call to a group none of whose members is in rotation.
    #[error(
        "group `{0}` has no member in rotation; its members are unhealthy or it has none (GET \
         /api/groups/{0} shows them; POST /api/groups/{0}/rebalance re-reads their health)"
    )]
    GroupUnavailable(ServerId),
}

impl CoreError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            CoreError::ServerNotFound(_) | CoreError::GroupNotFound(_) => ErrorKind::NotFound,
            CoreError::ServerAlreadyExists(_) | CoreError::DeclaredInConfig(_) => {
                ErrorKind::Conflict
            }
            CoreError::Invalid(_) => ErrorKind::Invalid,
            CoreError::Transition(_) => ErrorKind::Conflict,
            CoreError::StartFailed { .. }
            | CoreError::BackingOff { .. }
            | CoreError::GroupUnavailable(_) => ErrorKind::Unavailable,
            CoreError::Session { source, .. } => source.kind.error_kind(),
            CoreError::Repository(_) => ErrorKind::Internal,
        }
    }
}
