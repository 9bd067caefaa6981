//! The ports of the authorization domain: what adapters implement so that this crate never
//! touches a database, an identity provider, a policy engine or a random number generator.
//!
//! Each port says what its errors mean. The rule they share: the error channel is for the
//! technology failing (a disk, a network); every answer the domain has a word for (not found,
//! already there, denied) comes back in the `Ok` value.

use std::collections::BTreeMap;
use std::fmt;

use async_trait::async_trait;
use mcpgw_core::Timestamp;

use crate::api_key::{ApiKeyRecord, KeyHash, KeyId};
use crate::assignment::RoleAssignment;
use crate::decision::Identity;
use crate::error::AuthError;
use crate::permission::Permission;
use crate::policy::{PolicyAddress, ToolAccessPolicy};
use crate::principal::Principal;
use crate::role::{Role, RoleName};
use crate::scope::TenantId;
use crate::token_scope::ScopeLimit;
use crate::user::{LocalUser, PasswordHash, UserName};

/// The auth store failed (I/O, corruption, a lost connection). The message is for the log:
/// clients get a generic 500, so it may name files and tables, but never a key or a hash.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

/// Durable storage of API keys, custom roles, role assignments and tool access policies.
///
/// Contract (a contract suite in the test kit holds every implementation to it):
/// - A write is durable when it returns `Ok`, and every later read of any handle on the same
///   store sees it (a revocation takes effect at once).
/// - `Err` means the store failed; outcomes such as "no such key" or "already exists" are
///   `Ok(None)` / `Ok(false)`, never errors.
/// - Lists come back in a stable order: keys by `created_at` then id, roles by name,
///   assignments by (principal, role, scope), policies by address.
/// - Built-in roles are not stored; stored roles are custom ones. Validation (names,
///   permissions, built-in names) happens in the domain before a write; a store does not
///   re-validate but must round-trip exactly what it was given.
/// - Configuration-file assignments (`auth.role_assignments`) are not written here; the
///   application merges them with [`AuthStore::assignments`].
///
/// Implementations answer key lookups from memory (the request path must not wait on a
/// database) and keep that cache coherent with their own writes.
#[async_trait]
pub trait AuthStore: Send + Sync {
    /// Stores a new key. Ids and hashes come from 64 and 256 random bits; a store that finds
    /// one taken anyway answers `Err`.
    async fn insert_key(&self, record: &ApiKeyRecord) -> Result<(), StoreError>;
    /// The key whose hash is `hash`, revoked and expired ones included (the caller judges).
    async fn key_by_hash(&self, hash: &KeyHash) -> Result<Option<ApiKeyRecord>, StoreError>;
    async fn key_by_id(&self, id: &KeyId) -> Result<Option<ApiKeyRecord>, StoreError>;
    async fn keys(&self) -> Result<Vec<ApiKeyRecord>, StoreError>;
    /// Marks the key revoked at `at` and returns the stored record; a key revoked before keeps
    /// its first revocation time. `None` when no key has that id. Keys are never deleted, so a
    /// revoked key stays listed and keeps answering `Invalid API key` with the reason revoked.
    async fn revoke_key(
        &self,
        id: &KeyId,
        at: Timestamp,
    ) -> Result<Option<ApiKeyRecord>, StoreError>;

    async fn custom_roles(&self) -> Result<Vec<Role>, StoreError>;
    /// `false` (and nothing written) when a role of that name exists.
    async fn insert_custom_role(&self, role: &Role) -> Result<bool, StoreError>;
    /// Replaces the role of the same name; `false` when there is none.
    async fn replace_custom_role(&self, role: &Role) -> Result<bool, StoreError>;
    /// `false` when there was no such role.
    async fn delete_custom_role(&self, name: &RoleName) -> Result<bool, StoreError>;

    async fn assignments(&self) -> Result<Vec<RoleAssignment>, StoreError>;
    /// `false` when the same (principal, role, scope) was already assigned.
    async fn insert_assignment(&self, assignment: &RoleAssignment) -> Result<bool, StoreError>;
    /// `false` when there was no such assignment.
    async fn delete_assignment(&self, assignment: &RoleAssignment) -> Result<bool, StoreError>;

    async fn policies(&self) -> Result<Vec<ToolAccessPolicy>, StoreError>;
    async fn policy(&self, address: &PolicyAddress)
    -> Result<Option<ToolAccessPolicy>, StoreError>;
    /// Sets the policy at its address, replacing any there.
    async fn put_policy(&self, policy: &ToolAccessPolicy) -> Result<(), StoreError>;
    /// `false` when no policy was set there.
    async fn delete_policy(&self, address: &PolicyAddress) -> Result<bool, StoreError>;
    /// Reads the keys again from where they are kept, for keys that another process wrote
    /// there (a command-line tool that made a key while the gateway runs). The gateway calls
    /// it every few seconds while authentication is on. A store that sees every write itself
    /// has nothing to do, which is the default.
    async fn refresh_keys(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Durable storage of local users (name, password hash, times, disabled).
///
/// A separate port from [`AuthStore`], and an optional one: a gateway without it has no local
/// users, and a store of keys and roles need not keep users. Contract (a contract suite in the
/// test kit holds every implementation to it):
/// - A write is durable when it returns `Ok`, and every later read of any handle on the same
///   store sees it.
/// - `Err` means the store failed; "a user of that name exists" and "no such user" are
///   `Ok(false)` / `Ok(None)`, never errors.
/// - Names are compared exactly (case-sensitive); `users` lists by name, in byte order.
/// - Validation (names, the password rule, hashing) happens before a write; a store
///   round-trips exactly what it was given and never sees a password.
#[async_trait]
pub trait UserStore: Send + Sync {
    /// Stores a new user; `false` (and nothing written) when a user of that name exists.
    async fn insert_user(&self, user: &LocalUser) -> Result<bool, StoreError>;
    async fn user(&self, name: &UserName) -> Result<Option<LocalUser>, StoreError>;
    /// Every user, by name.
    async fn users(&self) -> Result<Vec<LocalUser>, StoreError>;
    /// Replaces the user's password hash and records `at` as when it changed; `false` when
    /// there is no such user.
    async fn set_password_hash(
        &self,
        name: &UserName,
        hash: &PasswordHash,
        at: Timestamp,
    ) -> Result<bool, StoreError>;
    /// Disables or enables the user; `false` when there is no such user.
    async fn set_disabled(&self, name: &UserName, disabled: bool) -> Result<bool, StoreError>;
    /// `false` when there was no such user.
    async fn delete_user(&self, name: &UserName) -> Result<bool, StoreError>;
}

/// What a verified bearer token says about its holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedClaims {
    /// The subject claim (`sub` by default); the principal is `user:<subject>`.
    pub subject: String,
    /// The groups claim (`groups` by default); each becomes `group:<name>`.
    pub groups: Vec<String>,
    /// The tenant claim (`tenant_id` by default).
    pub tenant: Option<String>,
    /// The `exp` claim.
    pub expires_at: Timestamp,
    /// The token's scopes as its issuer's scope map reads them, when that issuer narrows by
    /// scope; `None` when it does not (its tokens are judged by roles alone).
    pub scopes: Option<ScopeLimit>,
}

/// Why a bearer token was refused. Clients always see `No valid credentials provided`; this
/// goes to logs and events.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenRejection {
    /// Not a JWT (wrong segment count, bad base64, bad JSON).
    Malformed,
    /// `alg` is `none` or not one of the accepted algorithms (RS256, ES256).
    UnsupportedAlgorithm(String),
    /// No key of the issuer's key set has the token's `kid`, even after a refresh.
    UnknownKey,
    BadSignature,
    WrongIssuer,
    WrongAudience,
    Expired,
    /// `nbf` lies in the future beyond the allowed leeway.
    NotYetValid,
    /// A required claim is missing or has the wrong type; names the claim.
    MissingClaim(String),
    /// A claim holds a value that names no principal or tenant; names the claim.
    InvalidClaim(String),
}

impl fmt::Display for TokenRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenRejection::Malformed => f.write_str("the token is not a well-formed jwt"),
            TokenRejection::UnsupportedAlgorithm(alg) => {
                write!(f, "the token's algorithm `{alg}` is not accepted")
            }
            TokenRejection::UnknownKey => f.write_str("the token's key id is not in the key set"),
            TokenRejection::BadSignature => f.write_str("the token's signature does not verify"),
            TokenRejection::WrongIssuer => f.write_str("the token comes from another issuer"),
            TokenRejection::WrongAudience => f.write_str("the token is for another audience"),
            TokenRejection::Expired => f.write_str("the token has expired"),
            TokenRejection::NotYetValid => f.write_str("the token is not valid yet"),
            TokenRejection::MissingClaim(claim) => write!(f, "the token has no `{claim}` claim"),
            TokenRejection::InvalidClaim(claim) => {
                write!(f, "the token's `{claim}` claim holds an unusable value")
            }
        }
    }
}

/// Why a token verifier gave no verdict.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The token is invalid: `No valid credentials provided` (401).
    #[error("{0}")]
    Rejected(TokenRejection),
    /// The verifier could not decide (the key set cannot be fetched): 503, the token is not
    /// blamed. The message is for the log.
    #[error("{0}")]
    Unavailable(String),
}

impl From<TokenError> for AuthError {
    fn from(error: TokenError) -> Self {
        match error {
            TokenError::Rejected(reason) => AuthError::InvalidToken { reason },
            TokenError::Unavailable(message) => AuthError::VerifierUnavailable { message },
        }
    }
}

/// Verifies bearer tokens (JWT/OIDC).
///
/// Contract: `verify` checks the signature against the issuer's key set (refreshing it once
/// on an unknown `kid`), the algorithm (never `none`), `iss`, `aud`, `exp` and `nbf` against
/// `now` with a small leeway, and extracts the configured claims. `resource` is the canonical
/// URI of the resource the token was presented to (the gateway's MCP endpoint, RFC 8707): an
/// issuer whose audience is not configured accepts only tokens whose `aud` names it. A token it
/// refuses is `TokenError::Rejected` with the reason; `TokenError::Unavailable` only when it
/// could not reach a verdict. It must answer within a bounded time.
#[async_trait]
pub trait TokenVerifier: Send + Sync {
    async fn verify(
        &self,
        bearer_token: &str,
        resource: &str,
        now: Timestamp,
    ) -> Result<VerifiedClaims, TokenError>;

    /// The authorization servers whose tokens it accepts, for the protected resource
    /// metadata's `authorization_servers` (RFC 9728).
    fn authorization_servers(&self) -> Vec<String> {
        Vec::new()
    }

    /// The scopes its issuers' tokens can carry that the gateway reads, for
    /// `scopes_supported`; empty when none of its issuers narrows by scope.
    fn scopes_supported(&self) -> Vec<String> {
        Vec::new()
    }
}

/// What an external policy engine is asked: `{"input": {principal, action, resource,
/// context}}` in OPA's case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyInput {
    pub principal: Principal,
    pub groups: Vec<Principal>,
    pub tenant: Option<TenantId>,
    /// The permission asked for.
    pub action: Permission,
    /// What it is asked on: `mcp_server/<id>`, `group/<id>`, `tool/<id>__<tool>`; `None` for
    /// collection-wide operations.
    pub resource: Option<String>,
    /// Free-form facts of the request (method, path, client address), for policies to use.
    pub context: BTreeMap<String, String>,
}

impl PolicyInput {
    pub fn new(identity: &Identity, action: Permission, resource: Option<String>) -> Self {
        Self {
            principal: identity.principal.clone(),
            groups: identity.groups.clone(),
            tenant: identity.tenant.clone(),
            action,
            resource,
            context: BTreeMap::new(),
        }
    }
}

/// The external policy engine failed to answer (unreachable, timed out, answered something
/// that is not a decision). The message is for the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DeciderError(pub String);

/// An external policy decision point (OPA).
///
/// Contract: `Ok(true)` only when the engine's answer is an explicit allow (for OPA, a result
/// that is JSON `true`); `Ok(false)` for an explicit deny or any other result; `Err` when no
/// answer came (including the 2 s timeout, which the adapter enforces). The domain treats `Err`
/// as deny ([`crate::Decision::and_external`]). The engine is asked only after the gateway's
/// own decision allowed, so it can take permissions away but never grant them.
#[async_trait]
pub trait PolicyDecider: Send + Sync {
    async fn decide(&self, input: &PolicyInput) -> Result<bool, DeciderError>;
}

/// The secret source failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RandomnessError(pub String);

/// Cryptographically secure random bytes, for API keys and their ids.
///
/// Contract: fills the whole buffer from a CSPRNG (the operating system's) or fails; never
/// returns predictable bytes. Synchronous: the operating system answers at once.
pub trait SecretSource: Send + Sync {
    fn fill(&self, destination: &mut [u8]) -> Result<(), RandomnessError>;
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use mcpgw_core::ErrorKind;

    use super::*;

    // The ports are used as `Arc<dyn Port>` by the application: they must stay object safe.
    #[allow(dead_code)]
    fn ports_are_object_safe(
        _: Arc<dyn AuthStore>,
        _: Arc<dyn TokenVerifier>,
        _: Arc<dyn PolicyDecider>,
        _: Arc<dyn SecretSource>,
        _: Arc<dyn UserStore>,
    ) {
    }

    #[test]
    fn token_errors_become_401_with_the_fixed_message_or_503() {
        let rejected = AuthError::from(TokenError::Rejected(TokenRejection::Expired));
        assert_eq!(rejected.kind(), ErrorKind::Unauthenticated);
        assert_eq!(rejected.to_string(), "No valid credentials provided");
        assert_eq!(
            rejected,
            AuthError::InvalidToken {
                reason: TokenRejection::Expired
            }
        );
        let unavailable = AuthError::from(TokenError::Unavailable("jwks: timed out".to_owned()));
        assert_eq!(unavailable.kind(), ErrorKind::Unavailable);
        assert!(unavailable.to_string().contains("jwks: timed out"));
    }

    #[test]
    fn token_rejections_explain_themselves_for_the_log() {
        let table = [
            (
                TokenRejection::Malformed,
                "the token is not a well-formed jwt",
            ),
            (
                TokenRejection::UnsupportedAlgorithm("none".to_owned()),
                "the token's algorithm `none` is not accepted",
            ),
            (
                TokenRejection::UnknownKey,
                "the token's key id is not in the key set",
            ),
            (
                TokenRejection::BadSignature,
                "the token's signature does not verify",
            ),
            (
                TokenRejection::WrongIssuer,
                "the token comes from another issuer",
            ),
            (
                TokenRejection::WrongAudience,
                "the token is for another audience",
            ),
            (TokenRejection::Expired, "the token has expired"),
            (TokenRejection::NotYetValid, "the token is not valid yet"),
            (
                TokenRejection::MissingClaim("sub".to_owned()),
                "the token has no `sub` claim",
            ),
            (
                TokenRejection::InvalidClaim("groups".to_owned()),
                "the token's `groups` claim holds an unusable value",
            ),
        ];
        for (rejection, message) in table {
            assert_eq!(rejection.to_string(), message);
        }
    }
}
