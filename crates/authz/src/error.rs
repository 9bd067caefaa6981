//! Errors of the authorization domain.
//!
//! The three failures a client sees carry fixed messages (`No valid credentials provided`,
//! `Invalid API key`, `Access denied`); why exactly a credential or a request was refused
//! travels in the variant's `reason`, for logs and events, never in the message, so a caller
//! cannot probe which keys exist or which policy stopped it.

use mcpgw_core::ErrorKind;

use crate::api_key::KeyRejection;
use crate::decision::DenyReason;
use crate::policy::PolicyAddress;
use crate::ports::{StoreError, TokenRejection};
use crate::principal::{Principal, PrincipalError};
use crate::role::RoleName;
use crate::scope::Scope;
use crate::user::{PasswordRejection, UserName};

/// The message for a request without a usable credential.
pub const NO_CREDENTIALS_MESSAGE: &str = "No valid credentials provided";
/// The message for an API key that is unknown, revoked, expired or mistyped.
pub const INVALID_API_KEY_MESSAGE: &str = "Invalid API key";
/// The message for an authenticated caller without the required role or scope.
pub const ACCESS_DENIED_MESSAGE: &str = "Access denied";
/// The message for a sign-in with a user name and a password that fails, for whatever reason.
pub const INVALID_PASSWORD_MESSAGE: &str = "Invalid user name or password";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// No credential, an empty one, or a key without the `mcp_` prefix.
    #[error("No valid credentials provided")]
    NoCredentials,
    /// A key with the `mcp_` prefix that cannot be used; `reason` says why.
    #[error("Invalid API key")]
    InvalidApiKey { reason: KeyRejection },
    /// A bearer token that the token verifier refused; `reason` says why. Tokens have no message
    /// of their own: an invalid token is no valid credential.
    #[error("No valid credentials provided")]
    InvalidToken { reason: TokenRejection },
    /// A user name and password that do not sign in; `reason` says why. An unknown user and a
    /// wrong password answer the same, so that the answer does not tell which names exist.
    #[error("Invalid user name or password")]
    InvalidPassword { reason: PasswordRejection },
    /// An authenticated caller that may not do what it asked; `reason` says why.
    #[error("Access denied")]
    AccessDenied { reason: DenyReason },

    #[error(transparent)]
    InvalidPrincipal(#[from] PrincipalError),
    #[error("permission `{permission}` is not valid: {problem}")]
    InvalidPermission { permission: String, problem: String },
    #[error(
        "unknown permission `{permission}`; {}GET /api/auth/permissions lists every permission",
        suggestion.map(|name| format!("did you mean `{name}`? ")).unwrap_or_default()
    )]
    UnknownPermission {
        permission: String,
        suggestion: Option<&'static str>,
    },
    #[error("role name `{name}` is not valid: {problem}")]
    InvalidRoleName { name: String, problem: &'static str },
    #[error("scope `{scope}` is not valid: {problem}")]
    InvalidScope { scope: String, problem: String },
    #[error("tool access policy `{address}` is not valid: {problem}")]
    InvalidPolicy { address: String, problem: String },
    /// A field of a request (a key's name, `expires_in_days`, a role's description) is out of
    /// bounds.
    #[error("{field}: {problem}")]
    InvalidField {
        field: &'static str,
        problem: String,
    },

    #[error(
        "role `{role}` is built in and cannot be created, changed or deleted; create a custom \
         role with another name instead"
    )]
    BuiltInRole { role: RoleName },
    #[error("role `{role}` already exists; change it with PATCH /api/auth/roles/{role}")]
    RoleAlreadyExists { role: RoleName },
    #[error(
        "role `{role}` is still assigned {assignments} time(s); revoke its assignments first \
         (GET /api/auth/principals lists them)"
    )]
    RoleInUse { role: RoleName, assignments: usize },
    #[error("role `{role}` does not exist; GET /api/auth/roles/all lists the roles")]
    RoleNotFound { role: String },
    #[error("api key `{key_id}` does not exist; GET /api/auth/keys lists the keys")]
    KeyNotFound { key_id: String },
    #[error("user `{name}` already exists; choose another name, or set its password instead")]
    UserAlreadyExists { name: UserName },
    #[error("user `{name}` does not exist")]
    UserNotFound { name: UserName },
    #[error(
        "`{principal}` does not hold role `{role}` in scope `{scope}`; GET \
         /api/auth/principals/roles?principal={principal} lists its roles"
    )]
    AssignmentNotFound {
        principal: Principal,
        role: RoleName,
        scope: Scope,
    },
    #[error("no tool access policy is set at `{address}`")]
    PolicyNotFound { address: PolicyAddress },

    /// The auth store failed (its message is for the log; clients get a generic 500).
    #[error("the auth store failed: {0}")]
    Store(#[from] StoreError),
    /// The token verifier could not decide (the identity provider's key set is unreachable):
    /// the token was not found invalid, so this is not an authentication failure.
    #[error("tokens cannot be verified right now: {message}; try again shortly")]
    VerifierUnavailable { message: String },
    /// The secret source failed, so no key can be made safely.
    #[error("no secure randomness is available to make a key: {message}")]
    RandomnessUnavailable { message: String },
}

impl AuthError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            AuthError::NoCredentials
            | AuthError::InvalidApiKey { .. }
            | AuthError::InvalidToken { .. }
            | AuthError::InvalidPassword { .. } => ErrorKind::Unauthenticated,
            AuthError::AccessDenied { .. } => ErrorKind::Forbidden,
            AuthError::InvalidPrincipal(_)
            | AuthError::InvalidPermission { .. }
            | AuthError::UnknownPermission { .. }
            | AuthError::InvalidRoleName { .. }
            | AuthError::InvalidScope { .. }
            | AuthError::InvalidPolicy { .. }
            | AuthError::InvalidField { .. } => ErrorKind::Invalid,
            AuthError::BuiltInRole { .. }
            | AuthError::RoleAlreadyExists { .. }
            | AuthError::RoleInUse { .. }
            | AuthError::UserAlreadyExists { .. } => ErrorKind::Conflict,
            AuthError::RoleNotFound { .. }
            | AuthError::KeyNotFound { .. }
            | AuthError::UserNotFound { .. }
            | AuthError::AssignmentNotFound { .. }
            | AuthError::PolicyNotFound { .. } => ErrorKind::NotFound,
            AuthError::VerifierUnavailable { .. } => ErrorKind::Unavailable,
            AuthError::Store(_) | AuthError::RandomnessUnavailable { .. } => ErrorKind::Internal,
        }
    }
}
