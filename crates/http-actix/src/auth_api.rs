//! `/api/auth/*`: the auth management API (API keys, roles, role assignments, principals,
//! permissions and tool access policies) over the application's [`AuthService`].
//!
//! This module reads requests and writes answers; every rule (what a principal, a role name, a
//! scope or a permission may look like, what built-in roles refuse, what exists) belongs to the
//! authz domain and the auth service, whose errors become envelopes through their kind. Bodies
//! accept both names where a field has two (`principal`/`principal_id`, `role`/`role_name`,
//! `name`/`role_name`) and answer the union of both.
//!
//! Whether the caller may use these routes is decided before they run (auth management needs
//! `admin`); nothing here looks at credentials. A gateway composed without an auth service
//! answers 404 on every route of this module.

use std::sync::Arc;

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use actix_web::web::{self, Bytes};
use mcpgw_gateway::{AuthService, CreateKeyRequest};
use serde_json::{Map, Value};

use crate::definition::{body_bytes, json_object_with, json_type_name};
use crate::dto::{
    ApiKeyCreated, ApiKeyList, ApiKeyView, CheckPermissionRequest, CreateApiKeyRequest,
    CreateRoleRequest, HeldRoleView, PermissionCheckResult, PermissionList, PermissionView,
    PolicyDeleted, PolicyView, PrincipalList, PrincipalRoles, PrincipalView, RoleAssigned,
    RoleAssignmentRequest, RoleDeleted, RoleList, RoleRevoked, RoleView, SetPolicyRequest,
    UpdateRoleRequest,
};
use crate::error::{ApiError, ErrorEnvelope, bounded_for_message, names};
use crate::state::ApiState;

// ----- reading requests -----------------------------------------------------------------------

/// The auth service, or the 404 of a gateway composed without one.
fn service(state: &ApiState) -> Result<&Arc<AuthService>, ApiError> {
    state.auth().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            names::NOT_FOUND,
            "auth is not enabled in this gateway; the application that embeds it was built \
             without an auth service",
        )
    })
}

/// `a`, `b` and `c` as "`a`, `b` or `c`".
fn quoted_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| format!("`{item}`")).collect();
    match quoted.as_slice() {
        [] => String::new(),
        [only] => only.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

fn unknown_field(key: &str, allowed: &[&str]) -> ApiError {
    let advice = match mcpgw_core::suggest::nearest(key, allowed.iter().copied()) {
        Some(suggestion) => format!("did you mean `{suggestion}`?"),
        None => format!("valid fields are {}", quoted_list(allowed)),
    };
    ApiError::validation(format!(
        "unknown field `{}`; {advice}",
        bounded_for_message(key)
    ))
}

/// A JSON object body whose keys are all in `allowed`.
fn body_object(
    state: &ApiState,
    body: Result<Bytes, actix_web::Error>,
    allowed: &[&str],
) -> Result<Map<String, Value>, ApiError> {
    let bytes = body_bytes(body, state.settings().max_body_bytes)?;
    let fields = quoted_list(allowed);
    let object = json_object_with(&bytes, &fields)?;
    check_fields(&object, allowed)?;
    Ok(object)
}

fn check_fields(object: &Map<String, Value>, allowed: &[&str]) -> Result<(), ApiError> {
    match object.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => Err(unknown_field(key, allowed)),
        None => Ok(()),
    }
}

/// Query parameters as a JSON object of strings, so they are read like a body. A parameter
/// given twice is refused rather than guessed at.
fn query_object(
    query: &[(String, String)],
    allowed: &[&str],
) -> Result<Map<String, Value>, ApiError> {
    let mut object = Map::new();
    for (key, value) in query {
        if !allowed.contains(&key.as_str()) {
            return Err(unknown_field(key, allowed).with_query_wording());
        }
        if object
            .insert(key.clone(), Value::String(value.clone()))
            .is_some()
        {
            return Err(ApiError::validation(format!(
                "{key}: the query parameter is given more than once; give it once"
            )));
        }
    }
    Ok(object)
}

trait QueryWording {
    fn with_query_wording(self) -> Self;
}

impl QueryWording for ApiError {
    /// "unknown field" reads "unknown query parameter" for a query string.
    fn with_query_wording(self) -> Self {
        ApiError::validation(
            self.message()
                .replacen("unknown field", "unknown query parameter", 1)
                .replacen("valid fields are", "valid parameters are", 1),
        )
    }
}

/// A string field; `null` counts as absent.
fn optional_string(object: &Map<String, Value>, key: &str) -> Result<Option<String>, ApiError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(value)) => Ok(Some(value.clone())),
        Some(other) => Err(ApiError::validation(format!(
            "{key}: must be a string, not {}",
            json_type_name(other)
        ))),
    }
}

/// A field the API spells two ways (`principal` / `principal_id`): either may be given, or
/// both with the same value.
fn either_string(
    object: &Map<String, Value>,
    first: &str,
    second: &str,
) -> Result<Option<String>, ApiError> {
    match (
        optional_string(object, first)?,
        optional_string(object, second)?,
    ) {
        (Some(one), Some(other)) if one != other => Err(ApiError::validation(format!(
            "{first}: `{}` differs from {second} `{}`; they are two names of one field, give one",
            bounded_for_message(&one),
            bounded_for_message(&other)
        ))),
        (Some(value), _) | (None, Some(value)) => Ok(Some(value)),
        (None, None) => Ok(None),
    }
}

fn required_either(
    object: &Map<String, Value>,
    first: &str,
    second: &str,
    what: &str,
) -> Result<String, ApiError> {
    either_string(object, first, second)?.ok_or_else(|| {
        ApiError::validation(format!("{first}: is required (or `{second}`); {what}"))
    })
}

fn required_string(object: &Map<String, Value>, key: &str, what: &str) -> Result<String, ApiError> {
    optional_string(object, key)?
        .ok_or_else(|| ApiError::validation(format!("{key}: is required; {what}")))
}

/// An integer field; `null` counts as absent.
fn optional_integer(object: &Map<String, Value>, key: &str) -> Result<Option<i64>, ApiError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(number)) => number.as_i64().map(Some).ok_or_else(|| {
            ApiError::validation(format!(
                "{key}: must be a whole number of days, not {}",
                bounded_for_message(&number.to_string())
            ))
        }),
        Some(other) => Err(ApiError::validation(format!(
            "{key}: must be a whole number, not {}",
            json_type_name(other)
        ))),
    }
}

/// A list of strings; `null` counts as absent.
fn optional_string_list(
    object: &Map<String, Value>,
    key: &str,
) -> Result<Option<Vec<String>>, ApiError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(index, item)| match item {
                Value::String(value) => Ok(value.clone()),
                other => Err(ApiError::validation(format!(
                    "{key}[{index}]: must be a string, not {}",
                    json_type_name(other)
                ))),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(other) => Err(ApiError::validation(format!(
            "{key}: must be an array of strings, not {}",
            json_type_name(other)
        ))),
    }
}

const PRINCIPAL_HINT: &str = "name a principal such as `user:alice`, `group:ops` or `service:ci`";
const KEY_FIELDS: &[&str] = &[
    "principal",
    "principal_id",
    "name",
    "role",
    "expires_in_days",
];
const ROLE_CREATE_FIELDS: &[&str] = &["name", "role_name", "description", "permissions"];
const ROLE_UPDATE_FIELDS: &[&str] = &["description", "permissions"];
const ASSIGNMENT_FIELDS: &[&str] = &["principal", "principal_id", "role", "role_name", "scope"];
const PRINCIPAL_QUERY_FIELDS: &[&str] = &["principal", "principal_id"];
const CHECK_FIELDS: &[&str] = &["principal", "principal_id", "permission"];
const POLICY_FIELDS: &[&str] = &["allow_list", "deny_list"];

/// The principal, role and scope of an assign or revoke request.
struct AssignmentFields {
    principal: String,
    role: String,
    scope: Option<String>,
}

fn assignment_fields(object: &Map<String, Value>) -> Result<AssignmentFields, ApiError> {
    Ok(AssignmentFields {
        principal: required_either(object, "principal", "principal_id", PRINCIPAL_HINT)?,
        role: required_either(
            object,
            "role",
            "role_name",
            "name a role (GET /api/auth/roles/all lists them)",
        )?,
        scope: optional_string(object, "scope")?,
    })
}

// ----- keys -----------------------------------------------------------------------------------

/// Create an API key. The raw key is in this answer and nowhere else, ever.
#[utoipa::path(
    post,
    path = "/api/auth/keys",
    tag = "auth",
    operation_id = "create_api_key",
    request_body(content = CreateApiKeyRequest, content_type = "application/json",
        description = "Either of two shapes: `{principal, name, role?, expires_in_days?}` or \
                       `{principal_id, name}`."),
    responses(
        (status = 201, description = "Created; the raw key is shown this once", body = ApiKeyCreated),
        (status = 404, description = "`role` names no role (RoleNotFoundError), or auth is not enabled (NotFoundError)", body = ErrorEnvelope),
        (status = 422, description = "Malformed JSON, an unknown field, a wrong type, a missing or invalid \
            principal, a bad name, or `expires_in_days` outside 1..=3650 (ValidationError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn create_key(
    state: web::Data<ApiState>,
    body: Result<Bytes, actix_web::Error>,
) -> Result<HttpResponse, ApiError> {
    let auth = service(&state)?;
    let object = body_object(&state, body, KEY_FIELDS)?;
    let request = CreateKeyRequest {
        principal: required_either(&object, "principal", "principal_id", PRINCIPAL_HINT)?,
        name: required_string(&object, "name", "name the key, to tell it apart later")?,
        role: optional_string(&object, "role")?,
        expires_in_days: optional_integer(&object, "expires_in_days")?,
    };
    let issued = auth.create_key(request).await?;
    let record = &issued.record;
    let raw = issued.raw_key.expose().to_owned();
    Ok(HttpResponse::Created().json(ApiKeyCreated {
        key_id: record.id.to_string(),
        key: raw.clone(),
        raw_key: raw,
        principal: record.principal.to_string(),
        principal_id: record.principal.to_string(),
        name: record.name.clone(),
        role: record.role.as_ref().map(ToString::to_string),
        prefix: record.prefix.clone(),
        created_at: record.created_at.to_string(),
        expires_at: record.expires_at.map(|at| at.to_string()),
    }))
}

/// List API keys (never their raw value or hash).
#[utoipa::path(
    get,
    path = "/api/auth/keys",
    tag = "auth",
    operation_id = "list_api_keys",
    responses(
        (status = 200, description = "Every key, revoked and expired ones included", body = ApiKeyList),
        (status = 404, description = "Auth is not enabled (NotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn list_keys(
    state: web::Data<ApiState>,
) -> Result<web::Json<ApiKeyList>, ApiError> {
    let keys = service(&state)?.list_keys().await?;
    Ok(web::Json(ApiKeyList {
        keys: keys.iter().map(ApiKeyView::from).collect(),
    }))
}

/// Revoke an API key. It stops working at once; revoking it again keeps the first time.
#[utoipa::path(
    delete,
    path = "/api/auth/keys/{key_id}",
    tag = "auth",
    operation_id = "revoke_api_key",
    params(("key_id" = crate::dto::ApiKeyId, Path, description = "The key's id")),
    responses(
        (status = 200, description = "The key, now revoked", body = ApiKeyView),
        (status = 404, description = "No such key, or a string that cannot be a key id (ApiKeyNotFoundError), or auth is not enabled (NotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn revoke_key(
    state: web::Data<ApiState>,
    key_id: web::Path<String>,
) -> Result<web::Json<ApiKeyView>, ApiError> {
    let auth = service(&state)?;
    // A string that cannot be a key id is reported as an unknown key by the service.
    let summary = auth.revoke_key(&key_id).await?;
    Ok(web::Json(ApiKeyView::from(&summary)))
}

// ----- roles ----------------------------------------------------------------------------------

/// List the custom roles.
#[utoipa::path(
    get,
    path = "/api/auth/roles",
    tag = "auth",
    operation_id = "list_custom_roles",
    responses(
        (status = 200, description = "The custom roles, by name", body = RoleList),
        (status = 404, description = "Auth is not enabled (NotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn list_roles(
    state: web::Data<ApiState>,
) -> Result<web::Json<RoleList>, ApiError> {
    let roles = service(&state)?.list_custom_roles();
    Ok(web::Json(RoleList {
        roles: roles.iter().map(RoleView::from).collect(),
    }))
}

/// List every role: the built-in ones in their fixed order, then the custom ones by name.
#[utoipa::path(
    get,
    path = "/api/auth/roles/all",
    tag = "auth",
    operation_id = "list_all_roles",
    responses(
        (status = 200, description = "Every role", body = RoleList),
        (status = 404, description = "Auth is not enabled (NotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn list_all_roles(
    state: web::Data<ApiState>,
) -> Result<web::Json<RoleList>, ApiError> {
    let roles = service(&state)?.list_all_roles();
    Ok(web::Json(RoleList {
        roles: roles.iter().map(RoleView::from).collect(),
    }))
}

/// Create a custom role.
#[utoipa::path(
    post,
    path = "/api/auth/roles",
    tag = "auth",
    operation_id = "create_role",
    request_body(content = CreateRoleRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "Created", body = RoleView),
        (status = 404, description = "Auth is not enabled (NotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "A built-in role has this name (ConflictError), or a custom one does (RoleAlreadyExistsError)", body = ErrorEnvelope),
        (status = 422, description = "Malformed JSON, an unknown field, a wrong type, an invalid name or an unknown permission (ValidationError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn create_role(
    state: web::Data<ApiState>,
    body: Result<Bytes, actix_web::Error>,
) -> Result<HttpResponse, ApiError> {
    let auth = service(&state)?;
    let object = body_object(&state, body, ROLE_CREATE_FIELDS)?;
    let name = required_either(&object, "name", "role_name", "name the new role")?;
    let description = optional_string(&object, "description")?;
    let permissions = optional_string_list(&object, "permissions")?.ok_or_else(|| {
        ApiError::validation(
            "permissions: is required; list what the role grants (GET /api/auth/permissions)",
        )
    })?;
    let role = auth
        .create_role(&name, description.as_deref(), &permissions)
        .await?;
    Ok(HttpResponse::Created().json(RoleView::from(&role)))
}

/// Details of one role, built in or custom.
#[utoipa::path(
    get,
    path = "/api/auth/roles/{role_name}",
    tag = "auth",
    operation_id = "get_role",
    params(("role_name" = crate::dto::RoleNameParam, Path, description = "The role's name")),
    responses(
        (status = 200, description = "The role", body = RoleView),
        (status = 404, description = "No such role (RoleNotFoundError), or auth is not enabled (NotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn get_role(
    state: web::Data<ApiState>,
    role_name: web::Path<String>,
) -> Result<web::Json<RoleView>, ApiError> {
    let role = service(&state)?.role(&role_name)?;
    Ok(web::Json(RoleView::from(&role)))
}

/// Change a custom role: only the fields in the body change.
#[utoipa::path(
    patch,
    path = "/api/auth/roles/{role_name}",
    tag = "auth",
    operation_id = "update_role",
    params(("role_name" = crate::dto::RoleNameParam, Path, description = "The role's name")),
    request_body(content = UpdateRoleRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The updated role", body = RoleView),
        (status = 404, description = "No such role (RoleNotFoundError), or auth is not enabled (NotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "The role is built in (ConflictError)", body = ErrorEnvelope),
        (status = 422, description = "Malformed JSON, an unknown field (a role cannot be renamed), a wrong type or an unknown permission (ValidationError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn update_role(
    state: web::Data<ApiState>,
    role_name: web::Path<String>,
    body: Result<Bytes, actix_web::Error>,
) -> Result<web::Json<RoleView>, ApiError> {
    let auth = service(&state)?;
    // An unknown role is reported as such before its body is judged.
    auth.role(&role_name)?;
    let object = body_object(&state, body, ROLE_UPDATE_FIELDS)?;
    let description = match object.get("description") {
        // `null` clears the description.
        Some(Value::Null) => Some(String::new()),
        _ => optional_string(&object, "description")?,
    };
    let permissions = optional_string_list(&object, "permissions")?;
    let role = auth
        .update_role(&role_name, description.as_deref(), permissions.as_deref())
        .await?;
    Ok(web::Json(RoleView::from(&role)))
}

/// Delete a custom role that is no longer assigned.
#[utoipa::path(
    delete,
    path = "/api/auth/roles/{role_name}",
    tag = "auth",
    operation_id = "delete_role",
    params(("role_name" = crate::dto::RoleNameParam, Path, description = "The role's name")),
    responses(
        (status = 200, description = "Deleted", body = RoleDeleted),
        (status = 404, description = "No such role (RoleNotFoundError), or auth is not enabled (NotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "The role is built in, or still assigned (ConflictError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn delete_role(
    state: web::Data<ApiState>,
    role_name: web::Path<String>,
) -> Result<web::Json<RoleDeleted>, ApiError> {
    let auth = service(&state)?;
    auth.delete_role(&role_name).await?;
    Ok(web::Json(RoleDeleted {
        name: role_name.into_inner(),
        deleted: true,
    }))
}

// ----- assignments ----------------------------------------------------------------------------

/// Assign a role to a principal, globally or within one tenant. Assigning twice changes
/// nothing and answers 200 with `created: false`.
#[utoipa::path(
    post,
    path = "/api/auth/roles/assign",
    tag = "auth",
    operation_id = "assign_role",
    request_body(content = RoleAssignmentRequest, content_type = "application/json",
        description = "Either of two shapes: `{principal, role, scope}` or `{principal_id, role_name}`."),
    responses(
        (status = 201, description = "Assigned", body = RoleAssigned),
        (status = 200, description = "The principal already held the role in this scope", body = RoleAssigned),
        (status = 404, description = "No such role (RoleNotFoundError), or auth is not enabled (NotFoundError)", body = ErrorEnvelope),
        (status = 422, description = "Malformed JSON, an unknown field, a wrong type, or an invalid principal, role name or scope (ValidationError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn assign_role(
    state: web::Data<ApiState>,
    body: Result<Bytes, actix_web::Error>,
) -> Result<HttpResponse, ApiError> {
    let auth = service(&state)?;
    let object = body_object(&state, body, ASSIGNMENT_FIELDS)?;
    let fields = assignment_fields(&object)?;
    let (assignment, created) = auth
        .assign_role(&fields.principal, &fields.role, fields.scope.as_deref())
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(HttpResponse::build(status).json(RoleAssigned {
        principal: assignment.principal.to_string(),
        principal_id: assignment.principal.to_string(),
        role: assignment.role.to_string(),
        role_name: assignment.role.to_string(),
        scope: assignment.scope.to_string(),
        created,
    }))
}

/// Revoke a role from a principal. The fields come in the body (as for assign) or, with an
/// empty body, as query parameters of the same names.
#[utoipa::path(
    delete,
    path = "/api/auth/roles/revoke",
    tag = "auth",
    operation_id = "revoke_role",
    request_body(content = RoleAssignmentRequest, content_type = "application/json",
        description = "The same body as assign. (The same fields are also accepted as query \
                       parameters, `?principal=user:alice&role=developer`, with an empty body; \
                       fields in both answer 422.)"),
    responses(
        (status = 200, description = "Revoked", body = RoleRevoked),
        (status = 404, description = "The principal does not hold the role in this scope (RoleAssignmentNotFoundError), or auth is not enabled (NotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "The assignment comes from the configuration file (ConflictError)", body = ErrorEnvelope),
        (status = 422, description = "Malformed JSON, an unknown field or parameter, a wrong type, fields in both body and query, or an invalid principal, role name or scope (ValidationError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn revoke_role(
    state: web::Data<ApiState>,
    query: web::Query<Vec<(String, String)>>,
    body: Result<Bytes, actix_web::Error>,
) -> Result<web::Json<RoleRevoked>, ApiError> {
    let auth = service(&state)?;
    let bytes = body_bytes(body, state.settings().max_body_bytes)?;
    let object = if bytes.iter().all(u8::is_ascii_whitespace) {
        query_object(&query, ASSIGNMENT_FIELDS)?
    } else {
        if !query.is_empty() {
            return Err(ApiError::validation(
                "give the principal, role and scope either in the body or as query parameters, \
                 not both",
            ));
        }
        let object = json_object_with(&bytes, &quoted_list(ASSIGNMENT_FIELDS))?;
        check_fields(&object, ASSIGNMENT_FIELDS)?;
        object
    };
    let fields = assignment_fields(&object)?;
    let assignment = auth
        .revoke_role(&fields.principal, &fields.role, fields.scope.as_deref())
        .await?;
    Ok(web::Json(RoleRevoked {
        principal: assignment.principal.to_string(),
        principal_id: assignment.principal.to_string(),
        role: assignment.role.to_string(),
        role_name: assignment.role.to_string(),
        scope: assignment.scope.to_string(),
        revoked: true,
    }))
}

// ----- principals and permissions -------------------------------------------------------------

/// List every principal that holds a role (stored or from the configuration file) or a key.
#[utoipa::path(
    get,
    path = "/api/auth/principals",
    tag = "auth",
    operation_id = "list_principals",
    responses(
        (status = 200, description = "The principals, sorted", body = PrincipalList),
        (status = 404, description = "Auth is not enabled (NotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn list_principals(
    state: web::Data<ApiState>,
) -> Result<web::Json<PrincipalList>, ApiError> {
    let principals = service(&state)?.list_principals().await?;
    Ok(web::Json(PrincipalList {
        principals: principals.iter().map(PrincipalView::from).collect(),
    }))
}

/// The roles a principal holds, in every scope.
#[utoipa::path(
    get,
    path = "/api/auth/principals/roles",
    tag = "auth",
    operation_id = "principal_roles",
    params(
        ("principal" = crate::dto::PrincipalParam, Query, description = "The principal, such as \
            `user:alice` (`principal_id` is accepted instead)"),
    ),
    responses(
        (status = 200, description = "Its roles; empty when it holds none", body = PrincipalRoles),
        (status = 404, description = "Auth is not enabled (NotFoundError)", body = ErrorEnvelope),
        (status = 422, description = "No principal, an invalid one, or an unknown parameter (ValidationError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn principal_roles(
    state: web::Data<ApiState>,
    query: web::Query<Vec<(String, String)>>,
) -> Result<web::Json<PrincipalRoles>, ApiError> {
    let auth = service(&state)?;
    let object = query_object(&query, PRINCIPAL_QUERY_FIELDS)?;
    let raw = required_either(&object, "principal", "principal_id", PRINCIPAL_HINT)?;
    let roles = auth.roles_of(&raw)?;
    // The service parsed it; answer it as the domain spells it.
    let principal =
        mcpgw_gateway::authz::Principal::parse(&raw).map_or(raw, |principal| principal.to_string());
    Ok(web::Json(PrincipalRoles {
        principal_id: principal.clone(),
        principal,
        roles: roles.iter().map(HeldRoleView::from).collect(),
    }))
}

/// The permission catalogue: every `resource:action` and what it opens.
#[utoipa::path(
    get,
    path = "/api/auth/permissions",
    tag = "auth",
    operation_id = "list_permissions",
    responses(
        (status = 200, description = "Every permission", body = PermissionList),
        (status = 404, description = "Auth is not enabled (NotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn list_permissions(
    state: web::Data<ApiState>,
) -> Result<web::Json<PermissionList>, ApiError> {
    let permissions = service(&state)?.permissions();
    Ok(web::Json(PermissionList {
        permissions: permissions.iter().map(PermissionView::from).collect(),
    }))
}

/// Whether a principal holds a role that grants a permission, in the global scope (tool
/// access policies and an external policy engine are not consulted).
#[utoipa::path(
    post,
    path = "/api/auth/check-permission",
    tag = "auth",
    operation_id = "check_permission",
    request_body(content = CheckPermissionRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The answer, allowed or not", body = PermissionCheckResult),
        (status = 404, description = "Auth is not enabled (NotFoundError)", body = ErrorEnvelope),
        (status = 422, description = "Malformed JSON, an unknown field, a wrong type, or an invalid principal or permission (ValidationError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn check_permission(
    state: web::Data<ApiState>,
    body: Result<Bytes, actix_web::Error>,
) -> Result<web::Json<PermissionCheckResult>, ApiError> {
    let auth = service(&state)?;
    let object = body_object(&state, body, CHECK_FIELDS)?;
    let principal = required_either(&object, "principal", "principal_id", PRINCIPAL_HINT)?;
    let permission = required_string(
        &object,
        "permission",
        "name a permission such as `tool:invoke` (GET /api/auth/permissions lists them)",
    )?;
    let check = auth.check_permission(&principal, &permission)?;
    Ok(web::Json(PermissionCheckResult {
        principal: check.principal.to_string(),
        permission: check.permission.as_str().to_owned(),
        allowed: check.allowed,
        granted_by_role: check.granted_by_role.as_ref().map(ToString::to_string),
    }))
}

// ----- tool access policies -------------------------------------------------------------------

/// The tool access policy at `{scope}/{target_id}`.
#[utoipa::path(
    get,
    path = "/api/auth/policies/{scope}/{target_id}",
    tag = "auth",
    operation_id = "get_tool_policy",
    params(
        ("scope" = String, Path, description = "`provider` (alias `mcp_server`), `group` or `tool`"),
        ("target_id" = String, Path, description = "A server id, a group id, or `{id}__{tool}`"),
    ),
    responses(
        (status = 200, description = "The policy", body = PolicyView),
        (status = 404, description = "No policy is set there (ToolAccessPolicyNotFoundError), or auth is not enabled (NotFoundError)", body = ErrorEnvelope),
        (status = 422, description = "An unknown scope or an invalid target (ValidationError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn get_policy(
    state: web::Data<ApiState>,
    path: web::Path<(String, String)>,
) -> Result<web::Json<PolicyView>, ApiError> {
    let (scope, target_id) = path.into_inner();
    let policy = service(&state)?.policy(&scope, &target_id)?;
    Ok(web::Json(PolicyView::from(&policy)))
}

/// Set the tool access policy at `{scope}/{target_id}`, replacing any there.
#[utoipa::path(
    post,
    path = "/api/auth/policies/{scope}/{target_id}",
    tag = "auth",
    operation_id = "set_tool_policy",
    params(
        ("scope" = String, Path, description = "`provider` (alias `mcp_server`), `group` or `tool`"),
        ("target_id" = String, Path, description = "A server id, a group id, or `{id}__{tool}`"),
    ),
    request_body(content = SetPolicyRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "Set where none was", body = PolicyView),
        (status = 200, description = "Replaced the policy that was there", body = PolicyView),
        (status = 404, description = "Auth is not enabled (NotFoundError)", body = ErrorEnvelope),
        (status = 422, description = "Malformed JSON, an unknown field, neither list, a wrong type, a bad pattern, an unknown scope or an invalid target (ValidationError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn set_policy(
    state: web::Data<ApiState>,
    path: web::Path<(String, String)>,
    body: Result<Bytes, actix_web::Error>,
) -> Result<HttpResponse, ApiError> {
    let auth = service(&state)?;
    let (scope, target_id) = path.into_inner();
    let object = body_object(&state, body, POLICY_FIELDS)?;
    let allow_list = optional_string_list(&object, "allow_list")?;
    let deny_list = optional_string_list(&object, "deny_list")?;
    if allow_list.is_none() && deny_list.is_none() {
        return Err(ApiError::validation(
            "allow_list: give `allow_list`, `deny_list` or both (lists of principal patterns such \
             as `user:alice`, `group:ops`, `service:*`, `*`); to clear a policy, DELETE it",
        ));
    }
    let existed = match auth.policy(&scope, &target_id) {
        Ok(_) => true,
        Err(error) if error.kind() == mcpgw_gateway::core::ErrorKind::NotFound => false,
        Err(error) => return Err(error.into()),
    };
    let policy = auth
        .put_policy(
            &scope,
            &target_id,
            &allow_list.unwrap_or_default(),
            &deny_list.unwrap_or_default(),
        )
        .await?;
    let status = if existed {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok(HttpResponse::build(status).json(PolicyView::from(&policy)))
}

/// Clear the tool access policy at `{scope}/{target_id}`.
#[utoipa::path(
    delete,
    path = "/api/auth/policies/{scope}/{target_id}",
    tag = "auth",
    operation_id = "clear_tool_policy",
    params(
        ("scope" = String, Path, description = "`provider` (alias `mcp_server`), `group` or `tool`"),
        ("target_id" = String, Path, description = "A server id, a group id, or `{id}__{tool}`"),
    ),
    responses(
        (status = 200, description = "Cleared", body = PolicyDeleted),
        (status = 404, description = "No policy is set there (ToolAccessPolicyNotFoundError), or auth is not enabled (NotFoundError)", body = ErrorEnvelope),
        (status = 422, description = "An unknown scope or an invalid target (ValidationError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn delete_policy(
    state: web::Data<ApiState>,
    path: web::Path<(String, String)>,
) -> Result<web::Json<PolicyDeleted>, ApiError> {
    let auth = service(&state)?;
    let (scope, target_id) = path.into_inner();
    auth.delete_policy(&scope, &target_id).await?;
    let canonical = mcpgw_gateway::authz::PolicyScope::parse(&scope)
        .map_or(scope, |parsed| parsed.as_str().to_owned());
    Ok(web::Json(PolicyDeleted {
        scope: canonical,
        target_id,
        deleted: true,
    }))
}

// ----- mounting -------------------------------------------------------------------------------

/// Mounts every `/api/auth/*` route. The fixed paths under `/api/auth/roles/` come before
/// `/api/auth/roles/{role_name}`, so `all`, `assign` and `revoke` are never taken for names.
pub(crate) fn mount(cfg: &mut web::ServiceConfig, mounter: &crate::Mounter) {
    cfg.service(
        mounter
            .resource(
                web::resource(["/api/auth/keys", "/api/auth/keys/"]),
                "GET, POST",
            )
            .route(web::get().to(list_keys))
            .route(web::post().to(create_key)),
    )
    .service(
        mounter
            .resource(web::resource("/api/auth/keys/{key_id}"), "DELETE")
            .route(web::delete().to(revoke_key)),
    )
    .service(
        mounter
            .resource(
                web::resource(["/api/auth/roles", "/api/auth/roles/"]),
                "GET, POST",
            )
            .route(web::get().to(list_roles))
            .route(web::post().to(create_role)),
    )
    .service(
        mounter
            .resource(web::resource("/api/auth/roles/all"), "GET")
            .route(web::get().to(list_all_roles)),
    )
    .service(
        mounter
            .resource(web::resource("/api/auth/roles/assign"), "POST")
            .route(web::post().to(assign_role)),
    )
    .service(
        mounter
            .resource(web::resource("/api/auth/roles/revoke"), "DELETE")
            .route(web::delete().to(revoke_role)),
    )
    .service(
        mounter
            .resource(
                web::resource("/api/auth/roles/{role_name}"),
                "GET, PATCH, DELETE",
            )
            .route(web::get().to(get_role))
            .route(web::patch().to(update_role))
            .route(web::delete().to(delete_role)),
    )
    .service(
        mounter
            .resource(
                web::resource(["/api/auth/principals", "/api/auth/principals/"]),
                "GET",
            )
            .route(web::get().to(list_principals)),
    )
    .service(
        mounter
            .resource(web::resource("/api/auth/principals/roles"), "GET")
            .route(web::get().to(principal_roles)),
    )
    .service(
        mounter
            .resource(
                web::resource(["/api/auth/permissions", "/api/auth/permissions/"]),
                "GET",
            )
            .route(web::get().to(list_permissions)),
    )
    .service(
        mounter
            .resource(web::resource("/api/auth/check-permission"), "POST")
            .route(web::post().to(check_permission)),
    )
    .service(
        mounter
            .resource(
                web::resource("/api/auth/policies/{scope}/{target_id}"),
                "GET, POST, DELETE",
            )
            .route(web::get().to(get_policy))
            .route(web::post().to(set_policy))
            .route(web::delete().to(delete_policy)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_misses_of_field_names_are_suggested() {
        let nearest = |word| mcpgw_core::suggest::nearest(word, KEY_FIELDS.iter().copied());
        assert_eq!(nearest("principle"), Some("principal"));
        assert_eq!(nearest("Name"), Some("name"));
        assert_eq!(nearest("expires_in"), Some("expires_in_days"));
        assert_eq!(nearest("colour"), None);
    }
}
