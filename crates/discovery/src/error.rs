//! The discovery domain's errors.

use mcpgw_core::ErrorKind;

/// What can go wrong in a discovery use case.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoveryError {
    #[error(
        "discovery source `{0}` is not registered; list the sources with GET /api/discovery/sources"
    )]
    SourceNotFound(String),
    #[error("discovery source `{0}` already exists; choose another id or update it with PUT")]
    SourceAlreadyExists(String),
    #[error(
        "discovery source `{0}` is declared in the configuration file; change it there (enable, \
         disable and scan work over the API)"
    )]
    SourceDeclaredInConfig(String),
    #[error("{0}")]
    InvalidSource(String),
    #[error(
        "no discovered mcp server `{0}` is pending; list the pending ones with GET \
         /api/discovery/pending"
    )]
    CandidateNotFound(String),
    #[error(
        "mcp server `{0}` already exists and was not discovered from this source; rename one of them"
    )]
    NameTaken(String),
    #[error("discovery source `{source_id}` could not be read: {reason}")]
    SourceUnavailable { source_id: String, reason: String },
    #[error(
        "discovery source `{0}` is disabled; enable it with PUT /api/discovery/sources/{0}/enable"
    )]
    SourceDisabled(String),
    #[error("the discovery store failed: {0}")]
    Store(String),
    #[error("the approved server could not be registered: {0}")]
    Registration(String),
}

impl DiscoveryError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            DiscoveryError::SourceNotFound(_) | DiscoveryError::CandidateNotFound(_) => {
                ErrorKind::NotFound
            }
            DiscoveryError::SourceAlreadyExists(_)
            | DiscoveryError::SourceDeclaredInConfig(_)
            | DiscoveryError::NameTaken(_)
            | DiscoveryError::SourceDisabled(_) => ErrorKind::Conflict,
            DiscoveryError::InvalidSource(_) => ErrorKind::Invalid,
            DiscoveryError::SourceUnavailable { .. } => ErrorKind::Unavailable,
            DiscoveryError::Store(_) | DiscoveryError::Registration(_) => ErrorKind::Internal,
        }
    }

    /// The error's name in the API's envelope.
    pub fn name(&self) -> &'static str {
        match self {
            DiscoveryError::SourceNotFound(_) => "DiscoverySourceNotFoundError",
            DiscoveryError::CandidateNotFound(_) => "DiscoveredServerNotFoundError",
            DiscoveryError::SourceAlreadyExists(_) => "DiscoverySourceAlreadyExistsError",
            DiscoveryError::SourceDeclaredInConfig(_)
            | DiscoveryError::NameTaken(_)
            | DiscoveryError::SourceDisabled(_) => "ConflictError",
            DiscoveryError::InvalidSource(_) => "ValidationError",
            DiscoveryError::SourceUnavailable { .. } => "DiscoverySourceUnavailableError",
            DiscoveryError::Store(_) | DiscoveryError::Registration(_) => "InternalServerError",
        }
    }
}
