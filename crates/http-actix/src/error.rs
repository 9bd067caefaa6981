//! The one error type of the HTTP adapter and the one place where error kinds become statuses.
//!
//! Every error answer, whether it comes from a use case, from request parsing or from actix
//! itself (unknown route, wrong method, oversized body), is the API's error envelope
//! `{"error": "<Name>", "message": "...", "status_code": N}` with `Content-Type:
//! application/json`.

use std::borrow::Cow;

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, ResponseError};
use mcpgw_core::{CoreError, ErrorKind};
use mcpgw_discovery::DiscoveryError;
use mcpgw_gateway::AuthServiceError;
use mcpgw_gateway::ConfigServiceError;
use mcpgw_gateway::GroupServiceError;
use mcpgw_gateway::authz::AuthError;
use mcpgw_gateway::groups_domain::GroupError;
use serde::Serialize;
use utoipa::ToSchema;

/// The error names (the `error` field of the envelope) this adapter answers.
pub mod names {
    pub const MCP_SERVER_NOT_FOUND: &str = "McpServerNotFoundError";
    pub const MCP_SERVER_ALREADY_EXISTS: &str = "McpServerAlreadyExistsError";
    pub const MCP_SERVER_UNAVAILABLE: &str = "McpServerUnavailableError";
    pub const GROUP_NOT_FOUND: &str = "GroupNotFoundError";
    pub const GROUP_ALREADY_EXISTS: &str = "GroupAlreadyExistsError";
    pub const GROUP_MEMBER_NOT_FOUND: &str = "GroupMemberNotFoundError";
    pub const GROUP_MEMBER_ALREADY_EXISTS: &str = "GroupMemberAlreadyExistsError";
    pub const NOT_FOUND: &str = "NotFoundError";
    pub const CONFLICT: &str = "ConflictError";
    pub const VALIDATION: &str = "ValidationError";
    pub const BAD_REQUEST: &str = "BadRequestError";
    pub const PAYLOAD_TOO_LARGE: &str = "PayloadTooLargeError";
    pub const REQUEST_TIMEOUT: &str = "RequestTimeoutError";
    pub const HEADER_FIELDS_TOO_LARGE: &str = "RequestHeaderFieldsTooLargeError";
    pub const METHOD_NOT_ALLOWED: &str = "MethodNotAllowedError";
    pub const UNSUPPORTED_MEDIA_TYPE: &str = "UnsupportedMediaTypeError";
    pub const FORBIDDEN_ORIGIN: &str = "ForbiddenOriginError";
    pub const MISDIRECTED_REQUEST: &str = "MisdirectedRequestError";
    pub const AUTHENTICATION: &str = "AuthenticationError";
    pub const ACCESS_DENIED: &str = "AccessDeniedError";
    pub const RATE_LIMIT_EXCEEDED: &str = "RateLimitExceeded";
    pub const UPSTREAM_TIMEOUT: &str = "UpstreamTimeoutError";
    pub const INTERNAL: &str = "InternalServerError";
    pub const API_KEY_NOT_FOUND: &str = "ApiKeyNotFoundError";
    pub const ROLE_NOT_FOUND: &str = "RoleNotFoundError";
    pub const ROLE_ALREADY_EXISTS: &str = "RoleAlreadyExistsError";
    pub const ROLE_ASSIGNMENT_NOT_FOUND: &str = "RoleAssignmentNotFoundError";
    pub const TOOL_POLICY_NOT_FOUND: &str = "ToolAccessPolicyNotFoundError";
    pub const SERVICE_UNAVAILABLE: &str = "ServiceUnavailableError";
    pub const STORE_UNAVAILABLE: &str = "StoreUnavailableError";
}

/// What an operator sees instead of an internal error's details, which go to the log only.
const INTERNAL_MESSAGE: &str =
    "the gateway failed to handle the request; the details are in the gateway log";

/// What an operator sees when the gateway's own database fails (a read-only or full disk, a
/// locked or damaged file); the store's own message, which names the file, goes to the log.
const STORE_MESSAGE: &str = "the gateway's database in its data directory could not be read or \
     written, so the request was not carried out; check that the data directory is writable and \
     its disk is not full (the gateway log has the details), then retry";

/// The error envelope every error response carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(example = json!({
    "error": "McpServerNotFoundError",
    "message": "mcp server `math` is not registered; list the registered ones with GET /api/mcp_servers",
    "status_code": 404
}))]
pub struct ErrorEnvelope {
    /// The error's name, such as `McpServerNotFoundError` or `ValidationError`.
    pub error: String,
    /// What went wrong and what to do about it.
    pub message: String,
    /// The HTTP status of the response, repeated for clients that only see the body.
    pub status_code: u16,
}

/// An error on its way to becoming an envelope response.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{name} ({status}): {message}")]
pub struct ApiError {
    status: StatusCode,
    name: &'static str,
    message: String,
    /// The methods a resource accepts, sent as `Allow` with a 405.
    allow: Option<Cow<'static, str>>,
}

impl ApiError {
    pub fn new(status: StatusCode, name: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            name,
            message: message.into(),
            allow: None,
        }
    }

    /// A 422 `ValidationError`.
    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, names::VALIDATION, message)
    }

    /// A 404 for a server id that is not registered (or that cannot be a server id at all).
    pub fn server_not_found(raw_id: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            names::MCP_SERVER_NOT_FOUND,
            format!(
                "mcp server `{}` is not registered; list the registered ones with GET /api/mcp_servers",
                bounded_for_message(raw_id)
            ),
        )
    }

    /// A 404 for a group id that is not a group (or that cannot be a group id at all).
    pub fn group_not_found(raw_id: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            names::GROUP_NOT_FOUND,
            format!(
                "group `{}` does not exist; list the groups with GET /api/groups",
                bounded_for_message(raw_id)
            ),
        )
    }

    /// A 404 for a member id that is not a member of the group (or cannot be a server id).
    pub fn group_member_not_found(group: &str, raw_member: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            names::GROUP_MEMBER_NOT_FOUND,
            format!(
                "`{}` is not a member of group `{}`; list the members with GET /api/groups/{}",
                bounded_for_message(raw_member),
                bounded_for_message(group),
                bounded_for_message(group)
            ),
        )
    }

    /// A 404 for every group route of a gateway composed without groups.
    pub fn groups_not_enabled() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            names::NOT_FOUND,
            "groups are not enabled in this gateway; the application that embeds it was built \
             without a group service",
        )
    }

    /// A 404 for every `/api/discovery/*` request of a gateway composed without discovery.
    pub fn discovery_not_configured() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            names::NOT_FOUND,
            "discovery is not configured in this gateway; add a `discovery:` block to the \
             configuration file and restart the gateway",
        )
    }

    /// A 404 for every `/api/config` request of a gateway composed without a configuration
    /// service.
    pub fn config_not_enabled() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            names::NOT_FOUND,
            "configuration management is not enabled in this gateway; the application that \
             embeds it was built without a configuration service",
        )
    }

    /// A 404 for a path that names no resource.
    pub fn route_not_found(method: &str, path: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            names::NOT_FOUND,
            format!(
                "no route for {} {}; the API is described at /api/openapi.json and /docs",
                bounded_for_message(method),
                bounded_for_message(path)
            ),
        )
    }

    /// A 405 for a known path called with a method it does not accept.
    pub fn method_not_allowed(
        method: &str,
        path: &str,
        allow: impl Into<Cow<'static, str>>,
    ) -> Self {
        let allow = allow.into();
        let message = format!(
            "{} is not allowed on {}; use one of {allow}",
            bounded_for_message(method),
            bounded_for_message(path)
        );
        Self {
            allow: Some(allow),
            ..Self::new(
                StatusCode::METHOD_NOT_ALLOWED,
                names::METHOD_NOT_ALLOWED,
                message,
            )
        }
    }

    /// A 413 for a body above the configured limit.
    pub fn payload_too_large(limit_bytes: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            names::PAYLOAD_TOO_LARGE,
            format!("the request body is larger than the limit of {limit_bytes} bytes; send less"),
        )
    }

    /// A 408 for a body that did not arrive within the body timeout.
    pub fn body_timeout(error: &dyn std::fmt::Display) -> Self {
        Self::new(
            StatusCode::REQUEST_TIMEOUT,
            names::REQUEST_TIMEOUT,
            format!("{error}; send the whole body at once, without pauses"),
        )
    }

    /// A 431 for headers above the configured limit.
    pub fn header_fields_too_large(limit_bytes: usize) -> Self {
        Self::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            names::HEADER_FIELDS_TOO_LARGE,
            format!(
                "the request's headers are larger than the limit of {limit_bytes} bytes; send \
                 fewer or shorter headers"
            ),
        )
    }

    /// A 500 whose details go to the log and never to the caller.
    pub fn internal(detail: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "request failed with an internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            names::INTERNAL,
            INTERNAL_MESSAGE,
        )
    }

    /// A 500 `StoreUnavailableError` for a failure of the gateway's own database (a read-only
    /// or full disk, a locked or damaged file). Every failure that is not the caller's answers
    /// 500; the name and message tell the operator which one it is and what to check, while the
    /// store's own detail (the file, SQLite's error) goes to the log only.
    /// Answering it before anything is acknowledged is what keeps a 2xx meaning "stored".
    pub fn store_unavailable(detail: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "the gateway's database failed a request");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            names::STORE_UNAVAILABLE,
            STORE_MESSAGE,
        )
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn envelope(&self) -> ErrorEnvelope {
        ErrorEnvelope {
            error: self.name.to_owned(),
            message: self.message.clone(),
            status_code: self.status.as_u16(),
        }
    }
}

/// The status and the generic error name of each error kind. This is the one place where the
/// domain's error kinds become HTTP statuses.
pub fn status_and_name_of(kind: ErrorKind) -> (StatusCode, &'static str) {
    match kind {
        ErrorKind::NotFound => (StatusCode::NOT_FOUND, names::NOT_FOUND),
        ErrorKind::Conflict => (StatusCode::CONFLICT, names::CONFLICT),
        ErrorKind::Invalid => (StatusCode::UNPROCESSABLE_ENTITY, names::VALIDATION),
        ErrorKind::Unauthenticated => (StatusCode::UNAUTHORIZED, names::AUTHENTICATION),
        ErrorKind::Forbidden => (StatusCode::FORBIDDEN, names::ACCESS_DENIED),
        ErrorKind::RateLimited => (StatusCode::TOO_MANY_REQUESTS, names::RATE_LIMIT_EXCEEDED),
        ErrorKind::Unavailable => (
            StatusCode::SERVICE_UNAVAILABLE,
            names::MCP_SERVER_UNAVAILABLE,
        ),
        ErrorKind::Timeout => (StatusCode::GATEWAY_TIMEOUT, names::UPSTREAM_TIMEOUT),
        ErrorKind::Internal => (StatusCode::INTERNAL_SERVER_ERROR, names::INTERNAL),
        // A kind added later is unknown here; answering 500 keeps its details out of responses.
        _ => (StatusCode::INTERNAL_SERVER_ERROR, names::INTERNAL),
    }
}

impl From<CoreError> for ApiError {
    fn from(error: CoreError) -> Self {
        if matches!(error, CoreError::Repository(_)) {
            return ApiError::store_unavailable(&error);
        }
        let (status, generic_name) = status_and_name_of(error.kind());
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            return ApiError::internal(&error);
        }
        let name = match &error {
            CoreError::ServerNotFound(_) => names::MCP_SERVER_NOT_FOUND,
            CoreError::ServerAlreadyExists(_) => names::MCP_SERVER_ALREADY_EXISTS,
            CoreError::GroupNotFound(_) => names::GROUP_NOT_FOUND,
            _ => generic_name,
        };
        ApiError::new(status, name, error.to_string())
    }
}

impl From<GroupServiceError> for ApiError {
    fn from(error: GroupServiceError) -> Self {
        if matches!(error, GroupServiceError::Storage(_)) {
            return ApiError::store_unavailable(&error);
        }
        let (status, generic_name) = status_and_name_of(error.kind());
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            return ApiError::internal(&error);
        }
        let name = match &error {
            GroupServiceError::NotFound(_) => names::GROUP_NOT_FOUND,
            GroupServiceError::AlreadyExists(_) => names::GROUP_ALREADY_EXISTS,
            GroupServiceError::MemberServerNotFound(_) => names::MCP_SERVER_NOT_FOUND,
            GroupServiceError::Domain(GroupError::MemberNotFound { .. }) => {
                names::GROUP_MEMBER_NOT_FOUND
            }
            GroupServiceError::Domain(GroupError::MemberAlreadyExists { .. }) => {
                names::GROUP_MEMBER_ALREADY_EXISTS
            }
            _ => generic_name,
        };
        ApiError::new(status, name, error.to_string())
    }
}

impl From<AuthServiceError> for ApiError {
    /// Auth errors by kind, with a specific name for the auth management API's not-found and
    /// already-exists cases. (Authentication and authorization refusals keep the kind's
    /// `AuthenticationError` / `AccessDeniedError` / `RateLimitExceeded` names.)
    fn from(error: AuthServiceError) -> Self {
        if matches!(error.as_auth_error(), Some(AuthError::Store(_))) {
            return ApiError::store_unavailable(&error);
        }
        let (status, generic_name) = status_and_name_of(error.kind());
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            return ApiError::internal(&error);
        }
        let name = match error.as_auth_error() {
            Some(AuthError::KeyNotFound { .. }) => names::API_KEY_NOT_FOUND,
            Some(AuthError::RoleNotFound { .. }) => names::ROLE_NOT_FOUND,
            Some(AuthError::RoleAlreadyExists { .. }) => names::ROLE_ALREADY_EXISTS,
            Some(AuthError::AssignmentNotFound { .. }) => names::ROLE_ASSIGNMENT_NOT_FOUND,
            Some(AuthError::PolicyNotFound { .. }) => names::TOOL_POLICY_NOT_FOUND,
            Some(AuthError::VerifierUnavailable { .. }) => names::SERVICE_UNAVAILABLE,
            _ => generic_name,
        };
        ApiError::new(status, name, error.to_string())
    }
}

impl From<DiscoveryError> for ApiError {
    /// The status of the error's kind, with the discovery domain's own name for it (a source
    /// that cannot be read is `DiscoverySourceUnavailableError`, not a server's 503).
    fn from(error: DiscoveryError) -> Self {
        if matches!(error, DiscoveryError::Store(_)) {
            return ApiError::store_unavailable(&error);
        }
        let (status, _) = status_and_name_of(error.kind());
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            return ApiError::internal(&error);
        }
        ApiError::new(status, error.name(), error.to_string())
    }
}

impl From<ConfigServiceError> for ApiError {
    /// The status of the error's kind, with the service's name for it. An invalid file's
    /// message carries every error on a line of its own, each with its file, line and key, so
    /// that a client can show them as a compiler would.
    fn from(error: ConfigServiceError) -> Self {
        let (status, _) = status_and_name_of(error.kind());
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            return ApiError::internal(&error);
        }
        let message = match &error {
            ConfigServiceError::Invalid(errors) => format!(
                "the configuration file is invalid and nothing was changed; fix every error \
                 below and reload again\n{errors}"
            ),
            other => other.to_string(),
        };
        ApiError::new(status, error.name(), message)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status);
        if let Some(allow) = &self.allow
            && let Ok(value) = HeaderValue::from_str(allow)
        {
            response.insert_header((header::ALLOW, value));
        }
        response.json(self.envelope())
    }
}

pub(crate) use mcpgw_core::bounded_for_message;

/// The application's fallback service: the envelope for a path no route matches.
pub async fn route_not_found(request: HttpRequest) -> ApiError {
    ApiError::route_not_found(request.method().as_str(), request.path())
}

impl actix_web::Responder for ApiError {
    type Body = actix_web::body::BoxBody;

    fn respond_to(self, _request: &HttpRequest) -> HttpResponse<Self::Body> {
        self.error_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpgw_core::{LaunchError, ServerId};

    #[test]
    fn every_kind_has_its_documented_status() {
        let expected = [
            (ErrorKind::NotFound, 404),
            (ErrorKind::Conflict, 409),
            (ErrorKind::Invalid, 422),
            (ErrorKind::Unauthenticated, 401),
            (ErrorKind::Forbidden, 403),
            (ErrorKind::RateLimited, 429),
            (ErrorKind::Unavailable, 503),
            (ErrorKind::Timeout, 504),
            (ErrorKind::Internal, 500),
        ];
        for (kind, status) in expected {
            assert_eq!(status_and_name_of(kind).0.as_u16(), status, "{kind:?}");
        }
    }

    #[test]
    fn server_errors_get_their_specific_names() {
        let id = ServerId::parse("math").unwrap();
        let not_found = ApiError::from(CoreError::ServerNotFound(id.clone()));
        assert_eq!(
            (not_found.status().as_u16(), not_found.name()),
            (404, "McpServerNotFoundError")
        );
        let duplicate = ApiError::from(CoreError::ServerAlreadyExists(id.clone()));
        assert_eq!(
            (duplicate.status().as_u16(), duplicate.name()),
            (409, "McpServerAlreadyExistsError")
        );
        let declared = ApiError::from(CoreError::DeclaredInConfig(id.clone()));
        assert_eq!(
            (declared.status().as_u16(), declared.name()),
            (409, "ConflictError")
        );
        assert!(declared.message().contains("configuration file"));
        let failed = ApiError::from(CoreError::StartFailed {
            server: id,
            source: LaunchError::CommandNotFound {
                command: "nope".into(),
            },
        });
        assert_eq!(
            (failed.status().as_u16(), failed.name()),
            (503, "McpServerUnavailableError")
        );
        assert!(
            failed.message().contains("`nope` was not found"),
            "{}",
            failed.message()
        );
    }

    #[test]
    fn group_errors_get_their_specific_names() {
        let group = ServerId::parse("pool").unwrap();
        let member = ServerId::parse("math").unwrap();
        let cases = [
            (
                GroupServiceError::NotFound(group.clone()),
                404,
                "GroupNotFoundError",
            ),
            (
                GroupServiceError::MemberServerNotFound(member.clone()),
                404,
                "McpServerNotFoundError",
            ),
            (
                GroupServiceError::Domain(GroupError::MemberNotFound {
                    group: group.clone(),
                    member: member.clone(),
                }),
                404,
                "GroupMemberNotFoundError",
            ),
            (
                GroupServiceError::AlreadyExists(group.clone()),
                409,
                "GroupAlreadyExistsError",
            ),
            (
                GroupServiceError::Domain(GroupError::MemberAlreadyExists {
                    group: group.clone(),
                    member: member.clone(),
                }),
                409,
                "GroupMemberAlreadyExistsError",
            ),
            (
                GroupServiceError::ConfigManaged(group.clone()),
                409,
                "ConflictError",
            ),
            (
                GroupServiceError::ServerInGroup {
                    server: member.clone(),
                    group: group.clone(),
                },
                409,
                "ConflictError",
            ),
            (
                GroupServiceError::Domain(GroupError::UnknownStrategy("fastest".into())),
                422,
                "ValidationError",
            ),
            (
                GroupServiceError::Domain(GroupError::MinHealthyAboveMembers {
                    group: group.clone(),
                    min_healthy: 3,
                    members: 2,
                }),
                422,
                "ValidationError",
            ),
        ];
        for (error, status, name) in cases {
            let message = error.to_string();
            let api = ApiError::from(error);
            assert_eq!(
                (api.status().as_u16(), api.name()),
                (status, name),
                "{message}"
            );
            assert_eq!(api.message(), message);
        }
        let in_group = ApiError::from(GroupServiceError::ServerInGroup {
            server: member,
            group,
        });
        assert!(
            in_group.message().contains("group `pool`"),
            "{}",
            in_group.message()
        );
    }

    #[test]
    fn core_group_errors_get_their_specific_names() {
        let group = ServerId::parse("pool").unwrap();
        let missing = ApiError::from(CoreError::GroupNotFound(group.clone()));
        assert_eq!(
            (missing.status().as_u16(), missing.name()),
            (404, "GroupNotFoundError")
        );
        let unavailable = ApiError::from(CoreError::GroupUnavailable(group));
        assert_eq!(unavailable.status().as_u16(), 503);
        assert!(unavailable.message().contains("no member in rotation"));
    }

    #[test]
    fn group_storage_failures_are_the_stores_503_and_hide_their_details() {
        let error = ApiError::from(GroupServiceError::Storage(
            "database is locked at /secret/db".to_owned(),
        ));
        assert_eq!(
            (error.status().as_u16(), error.name()),
            (500, "StoreUnavailableError")
        );
        assert!(!error.message().contains("/secret"));
    }

    #[test]
    fn repository_failures_are_the_stores_503_and_hide_their_details() {
        let error = ApiError::from(CoreError::Repository(mcpgw_core::RepositoryError(
            "disk I/O error at /secret/path".to_owned(),
        )));
        assert_eq!(
            (error.status().as_u16(), error.name()),
            (500, "StoreUnavailableError")
        );
        assert!(!error.message().contains("/secret/path"));
        let message = error.message();
        assert!(message.contains("data directory"), "{message}");
    }

    #[test]
    fn auth_errors_get_their_kind_status_and_specific_names() {
        use mcpgw_gateway::authz::{Principal, RoleName, Scope, StoreError};
        let role = RoleName::parse("deployer").unwrap();
        let cases = [
            (
                AuthError::KeyNotFound { key_id: "k".into() },
                404,
                "ApiKeyNotFoundError",
            ),
            (
                AuthError::RoleNotFound {
                    role: "ghost".into(),
                },
                404,
                "RoleNotFoundError",
            ),
            (
                AuthError::AssignmentNotFound {
                    principal: Principal::parse("user:alice").unwrap(),
                    role: role.clone(),
                    scope: Scope::Global,
                },
                404,
                "RoleAssignmentNotFoundError",
            ),
            (
                AuthError::RoleAlreadyExists { role: role.clone() },
                409,
                "RoleAlreadyExistsError",
            ),
            (
                AuthError::BuiltInRole {
                    role: RoleName::parse("admin").unwrap(),
                },
                409,
                "ConflictError",
            ),
            (
                AuthError::RoleInUse {
                    role,
                    assignments: 2,
                },
                409,
                "ConflictError",
            ),
            (
                AuthError::InvalidScope {
                    scope: "planet".into(),
                    problem: "no".into(),
                },
                422,
                "ValidationError",
            ),
            (AuthError::NoCredentials, 401, "AuthenticationError"),
        ];
        for (error, status, name) in cases {
            let message = error.to_string();
            let api = ApiError::from(AuthServiceError::from(error));
            assert_eq!(
                (api.status().as_u16(), api.name()),
                (status, name),
                "{message}"
            );
            assert_eq!(api.message(), message);
        }
        let locked = ApiError::from(AuthServiceError::LockedOut {
            retry_after_secs: 30,
        });
        assert_eq!(
            (locked.status().as_u16(), locked.name()),
            (429, "RateLimitExceeded")
        );
        let store = ApiError::from(AuthServiceError::from(StoreError(
            "disk I/O error at /secret/auth.db".into(),
        )));
        assert_eq!(
            (store.status().as_u16(), store.name()),
            (500, "StoreUnavailableError")
        );
        assert!(!store.message().contains("/secret"), "{}", store.message());
    }

    #[test]
    fn discovery_errors_get_their_kind_status_and_domain_names() {
        let cases = [
            (
                DiscoveryError::SourceNotFound("docker-0".into()),
                404,
                "DiscoverySourceNotFoundError",
            ),
            (
                DiscoveryError::CandidateNotFound("math".into()),
                404,
                "DiscoveredServerNotFoundError",
            ),
            (
                DiscoveryError::SourceAlreadyExists("docker-0".into()),
                409,
                "DiscoverySourceAlreadyExistsError",
            ),
            (
                DiscoveryError::SourceDeclaredInConfig("docker-0".into()),
                409,
                "ConflictError",
            ),
            (
                DiscoveryError::InvalidSource("config.path: is required".into()),
                422,
                "ValidationError",
            ),
            (
                DiscoveryError::SourceUnavailable {
                    source_id: "docker-0".into(),
                    reason: "connection refused".into(),
                },
                503,
                "DiscoverySourceUnavailableError",
            ),
        ];
        for (error, status, name) in cases {
            let message = error.to_string();
            let api = ApiError::from(error);
            assert_eq!(
                (api.status().as_u16(), api.name()),
                (status, name),
                "{message}"
            );
            assert_eq!(api.message(), message);
        }
        let store = ApiError::from(DiscoveryError::Store("disk full at /secret/db".into()));
        assert_eq!(
            (store.status().as_u16(), store.name()),
            (500, "StoreUnavailableError")
        );
        assert!(!store.message().contains("/secret"), "{}", store.message());
    }

    #[test]
    fn config_errors_get_their_kind_status_and_service_names() {
        let no_file = ApiError::from(ConfigServiceError::NoFile);
        assert_eq!(
            (no_file.status().as_u16(), no_file.name()),
            (409, "ConflictError")
        );
        assert!(
            no_file.message().contains("--config"),
            "{}",
            no_file.message()
        );
        let unreadable = ApiError::from(ConfigServiceError::Read(
            "cannot read gateway.yaml: permission denied".into(),
        ));
        assert_eq!(unreadable.status().as_u16(), 503);
        assert!(unreadable.message().contains("gateway.yaml"));
        let failed = ApiError::from(ConfigServiceError::Apply(
            "cannot stop math at /secret/run".into(),
        ));
        assert_eq!(
            (failed.status().as_u16(), failed.name()),
            (500, "InternalServerError")
        );
        assert!(
            !failed.message().contains("/secret"),
            "{}",
            failed.message()
        );
    }

    #[test]
    fn an_invalid_configuration_lists_every_error_on_its_own_line() {
        let text = "mcp_servers:\n  a:\n    mode: subprocess\n    command: [x]\n    \
                    idle_ttl_s: 0\n  b:\n    mode: subprocess\n    command: [y]\n    \
                    health_check_interval_s: 1\n";
        let errors = mcpgw_config::parse("gateway.yaml", text, &|_| None)
            .expect_err("both values are out of range");
        assert_eq!(errors.len(), 2, "{errors}");
        let api = ApiError::from(ConfigServiceError::Invalid(errors.clone()));
        assert_eq!(
            (api.status().as_u16(), api.name()),
            (422, "ValidationError")
        );
        let lines: Vec<&str> = api.message().lines().collect();
        assert_eq!(lines.len(), 3, "{}", api.message());
        assert!(lines[0].contains("nothing was changed"), "{}", lines[0]);
        for (line, error) in lines[1..].iter().zip(errors.errors()) {
            assert_eq!(*line, error.to_string());
        }
        assert!(lines[1].starts_with("gateway.yaml:5:"), "{}", lines[1]);
        assert!(
            lines[1].contains("mcp_servers.a.idle_ttl_s"),
            "{}",
            lines[1]
        );
        assert!(lines[2].contains("mcp_servers.b.health_check_interval_s"));
    }

    #[test]
    fn quoted_caller_input_carries_no_control_character() {
        assert_eq!(
            bounded_for_message("x\r\nSet-Cookie: a\u{0}"),
            "x\\r\\nSet-Cookie: a\\u{0}"
        );
        assert_eq!(bounded_for_message("plain été"), "plain été");
    }

    #[test]
    fn long_caller_input_is_cut_in_messages() {
        let error = ApiError::server_not_found(&"x".repeat(10_000));
        assert!(error.message().len() < 300, "{}", error.message().len());
    }
}
