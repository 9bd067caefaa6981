//! Who may do what in mcpgw: principals, permissions, roles, scopes, API-key records, tool
//! access policies, and the decision function that combines them.
//!
//! It is a domain crate. It must never do I/O, read a clock or draw randomness: stores, token
//! verification, external policy engines and secret bytes are ports ([`AuthStore`],
//! [`TokenVerifier`], [`PolicyDecider`], [`SecretSource`]) that adapters implement, and time
//! comes in as a [`Timestamp`](mcpgw_core::Timestamp) parameter. It must never log, return or
//! keep a raw API key (only its SHA-256, compared in constant time), and never put in a client
//! message why a credential or a request was refused: clients see four fixed messages
//! (`No valid credentials provided`, `Invalid API key`, `Invalid user name or password`,
//! `Access denied`), the reasons go to logs and events.
//!
//! The pieces:
//! - [`Principal`] (`user:`, `group:`, `service:`; `user:anonymous`) and [`PrincipalPattern`]
//!   (`*`, `service:*`, `group:ops`).
//! - [`Permission`]: the catalogue of `resource:action` permissions, each with the REST routes
//!   and MCP methods it opens ([`Permission::for_rest_route`], [`Permission::for_mcp_method`]);
//!   roles grant them through [`PermissionGrant`] (`tool:list`, `mcp_server:*`, `*`).
//! - [`Role`]: the six built-in roles ([`BuiltInRole`]) and custom ones, in a [`RoleBook`].
//! - [`RoleAssignment`]: a principal holds a role in a [`Scope`], `global` or
//!   `tenant:<id>`.
//! - [`ApiKeyRecord`], [`NewApiKey`], [`PresentedApiKey`]: keys `mcp_` + base64url(32 bytes).
//! - [`ToolAccessPolicy`] at a [`PolicyAddress`], checked along an [`AccessPath`].
//! - [`Authorizer`]: [`Identity`] + [`Permission`] (+ [`AccessPath`]) → [`Decision`].
//! - [`RateLimitPolicy`] and the [`RateLimiter`] port: token buckets per caller (and tool).
//! - The [`SignInProvider`] port: the web console's single sign-on at an OpenID provider
//!   ([`PendingSignIn`] between the redirect and the return, [`SignInError`]).
//! - [`LocalUser`], [`UserName`], [`check_new_password`] and the [`UserStore`] port: people who
//!   sign in with a name and a password the gateway keeps (`user:<name>`).
//!
//! The built-in roles grant exactly this:
//!
//! | role | grants |
//! |---|---|
//! | `admin` | `*` |
//! | `mcp_server_admin` | `mcp_server:*`, `tool:invoke`, `tool:list` |
//! | `developer` | `mcp_server:read`, `mcp_server:list`, `mcp_server:start`, `tool:invoke`, `tool:list` |
//! | `viewer` | `mcp_server:read`, `mcp_server:list`, `tool:list`, `metrics:read`, `endpoint:list`, `endpoint:read` |
//! | `auditor` | `audit:read`, `events:read`, `metrics:read` |
//! | `operator` | `mcp_server:start`, `mcp_server:stop`, `config:reload`, `group:*`, `endpoint:*` |
//!
//! The auditor's "audit read" is the audit trail, which the gateway keeps in two places: the tool
//! invocation history (`audit:read`) and the live event stream (`events:read`). "Metrics read"
//! is `GET /api/system` (uptime, version, metrics summary); `/metrics` itself is open. An
//! operator who should also see servers is given `viewer` as well: `operator` grants only start,
//! stop, reload, and group and curated endpoint management.
//!
//! # Example
//!
//! Roles decide first, then every tool access policy on the way to the tool:
//!
//! ```rust
//! use mcpgw_authz::{
//!     AccessPath, Authorizer, Decision, DenyReason, Identity, Permission, PolicyAddress,
//!     Principal, RoleAssignment, RoleBook, ToolAccessPolicy,
//! };
//! use mcpgw_core::ServerId;
//!
//! let math = ServerId::parse("math").expect("a valid id");
//! let authorizer = Authorizer::new(
//!     RoleBook::default(), // the six built-in roles and no custom one
//!     [RoleAssignment::parse("group:dev", "developer", None)?],
//!     [ToolAccessPolicy::parse(
//!         PolicyAddress::provider(&math),
//!         &[],
//!         &["user:mallory".to_owned()],
//!     )?],
//! );
//! let member_of_dev = |user: &str| -> Result<Identity, mcpgw_authz::AuthError> {
//!     Ok(Identity::new(Principal::parse(user)?).with_groups(vec![Principal::parse("group:dev")?]))
//! };
//! let add = AccessPath::server_tool(&math, "add")?;
//!
//! // `developer`, held through the group, grants `tool:invoke`.
//! let decision = authorizer.decide(&member_of_dev("user:alice")?, Permission::ToolInvoke, Some(&add));
//! assert_eq!(decision.into_result()?.as_str(), "developer");
//!
//! // The same role, but the server's policy denies this user.
//! assert!(matches!(
//!     authorizer.decide(&member_of_dev("user:mallory")?, Permission::ToolInvoke, Some(&add)),
//!     Decision::Deny { reason: DenyReason::DeniedByPolicy { .. } }
//! ));
//! # Ok::<(), mcpgw_authz::AuthError>(())
//! ```

mod api_key;
mod assignment;
mod decision;
mod error;
mod permission;
mod policy;
mod ports;
mod principal;
mod rate_limit;
mod role;
mod scope;
mod sign_in;
mod token_scope;
mod user;

#[cfg(test)]
mod tests;

pub use api_key::{
    API_KEY_LISTED_PREFIX_LEN, API_KEY_MAX_EXPIRY_DAYS, API_KEY_MAX_LEN, API_KEY_NAME_MAX_CHARS,
    API_KEY_PREFIX, API_KEY_SECRET_BYTES, ApiKeyRecord, IssuedApiKey, KeyHash, KeyId, KeyRejection,
    KeyStatus, NewApiKey, PresentedApiKey, RawApiKey,
};
pub use assignment::{PrincipalSummary, RoleAssignment, summarize_principals};
pub use decision::{Authorizer, Decision, DenyReason, Identity, PermissionCheck};
pub use error::{
    ACCESS_DENIED_MESSAGE, AuthError, INVALID_API_KEY_MESSAGE, INVALID_PASSWORD_MESSAGE,
    NO_CREDENTIALS_MESSAGE,
};
pub use permission::{Endpoint, Permission, PermissionGrant, PermissionInfo, Resource, catalogue};
pub use policy::{
    AccessPath, POLICY_LIST_MAX_LEN, PolicyAddress, PolicyScope, TOOL_NAME_SEPARATOR,
    ToolAccessPolicy,
};
pub use ports::{
    AuthStore, DeciderError, PolicyDecider, PolicyInput, RandomnessError, SecretSource, StoreError,
    TokenError, TokenRejection, TokenVerifier, UserStore, VerifiedClaims,
};
pub use principal::{
    ANONYMOUS_USER_NAME, PRINCIPAL_NAME_MAX_BYTES, Principal, PrincipalError, PrincipalKind,
    PrincipalPattern,
};
pub use rate_limit::{
    Admission, PendingDecision, RateLimitBackendStatus, RateLimitCaller, RateLimitDecision,
    RateLimitFailMode, RateLimitKey, RateLimitPolicy, RateLimitScope, RateLimiter,
};
pub use role::{
    BuiltInRole, ROLE_DESCRIPTION_MAX_BYTES, ROLE_MAX_GRANTS, ROLE_NAME_MAX_LEN, Role, RoleBook,
    RoleName,
};
pub use scope::{Scope, TENANT_ID_MAX_BYTES, TenantId};
pub use sign_in::{PendingSignIn, SignInError, SignInProvider, SignInStart};
pub use token_scope::{
    ADMIN_SCOPE, ScopeGrant, ScopeLimit, ScopeMap, TOOLS_SCOPE, TOOLS_SCOPE_PREFIX,
};
pub use user::{
    LocalUser, PASSWORD_HASH_MAX_LEN, PASSWORD_MAX_BYTES, PASSWORD_MIN_BYTES, PasswordHash,
    PasswordRejection, USER_NAME_MAX_CHARS, UserName, check_new_password,
};
