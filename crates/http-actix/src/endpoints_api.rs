//! `/api/endpoints`: curated endpoints over REST.
//!
//! Bodies are judged by the configuration crate's rules for `endpoints` entries, so that an
//! endpoint created over REST and one declared in the file obey the same checks (names, ids,
//! overrides only on one tool, principal patterns). Which tools an endpoint serves is the
//! endpoint service's business (resolved against the aggregated catalogue); this module turns
//! its answers and errors into the API's shapes.
//!
//! A gateway composed without curated endpoints answers 404 on every path under
//! `/api/endpoints`, whatever the method.

use std::sync::Arc;

use actix_web::http::StatusCode;
use actix_web::web::{self, Bytes};
use actix_web::{HttpResponse, Resource};
use mcpgw_config::{ConfigErrors, EndpointToolDefinition};
use mcpgw_core::{EndpointSpec, ServerOrigin, Tool};
use mcpgw_gateway::authz::{PRINCIPAL_NAME_MAX_BYTES, PrincipalKind};
use mcpgw_gateway::{EndpointError, EndpointService};
use serde::Serialize;
use serde_json::{Map, Value, json};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{
    AdditionalProperties, ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, Type,
};
use utoipa::{PartialSchema, ToSchema};

use crate::definition::{body_bytes, json_object_with, json_type_name};
use crate::error::{ApiError, ErrorEnvelope, bounded_for_message, names, status_and_name_of};
use crate::state::ApiState;

const NAME_FIELD: &str = "name";
const ENDPOINT_FIELDS: &str =
    "`name`, `tools` and optionally `description`, `allow`, `deny` and `tool_search`";

/// The endpoint service, or the 404 of a gateway composed without one.
fn service(state: &ApiState) -> Result<&Arc<EndpointService>, ApiError> {
    state
        .gateway()
        .endpoints()
        .ok_or_else(endpoints_not_enabled)
}

/// The 404 of every route of a gateway composed without curated endpoints.
fn endpoints_not_enabled() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        names::NOT_FOUND,
        "curated endpoints are not enabled in this gateway; the application that embeds it was \
         built without an endpoint service",
    )
}

async fn not_enabled() -> ApiError {
    endpoints_not_enabled()
}

impl From<EndpointError> for ApiError {
    fn from(error: EndpointError) -> Self {
        if matches!(error, EndpointError::Storage(_)) {
            return ApiError::store_unavailable(&error);
        }
        let (status, name) = status_and_name_of(error.kind());
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            return ApiError::internal(&error);
        }
        let message = match &error {
            EndpointError::NotFound(_) => {
                format!("{error}; list the curated endpoints with GET /api/endpoints")
            }
            _ => error.to_string(),
        };
        ApiError::new(status, name, message)
    }
}

/// The 404 of a name from the path that names no endpoint.
fn not_found(raw: &str) -> ApiError {
    EndpointError::NotFound(bounded_for_message(raw)).into()
}

/// Mounts the endpoint routes; without an endpoint service, one resource that answers 404 for
/// every path and method under `/api/endpoints` instead.
pub(crate) fn mount(cfg: &mut web::ServiceConfig, mounter: &crate::Mounter) {
    if mounter.state.gateway().endpoints().is_none() {
        cfg.service(
            Resource::new(["/api/endpoints", "/api/endpoints/{tail:.*}"])
                .default_service(web::to(not_enabled)),
        );
        return;
    }
    cfg.service(
        mounter
            .resource(
                web::resource(["/api/endpoints", "/api/endpoints/"]),
                "GET, POST",
            )
            .route(web::get().to(list_endpoints))
            .route(web::post().to(create_endpoint)),
    )
    .service(
        mounter
            .resource(web::resource("/api/endpoints/{name}"), "GET, PUT, DELETE")
            .route(web::get().to(get_endpoint))
            .route(web::put().to(update_endpoint))
            .route(web::delete().to(delete_endpoint)),
    );
}

// ---------------------------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------------------------

/// One entry of an endpoint's selection: every tool of a server or group, or one of its tools
/// with optional overrides of what clients see.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EndpointEntry {
    /// The server's or group's id.
    #[schema(example = "math")]
    pub server: String,
    /// The tool's own (upstream) name; absent: every tool of `server`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "add")]
    pub tool: Option<String>,
    /// The name the tool is served under on this endpoint (only with `tool`):
    /// `^[A-Za-z0-9_.-]{1,128}$`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "sum")]
    pub name: Option<String>,
    /// Replaces the tool's title (only with `tool`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Replaces the tool's description (only with `tool`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Replaces the tool's annotations, an MCP `ToolAnnotations` object (only with `tool`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>, example = json!({"readOnlyHint": true}))]
    pub annotations: Option<Value>,
}

impl From<EndpointToolDefinition> for EndpointEntry {
    fn from(entry: EndpointToolDefinition) -> Self {
        Self {
            server: entry.server,
            tool: entry.tool,
            name: entry.name,
            title: entry.title,
            description: entry.description,
            annotations: entry.annotations,
        }
    }
}

// The request bodies are read by the configuration crate; their schemas say its rules in JSON
// Schema, so that a client generated from the document sends what it accepts. What JSON Schema
// cannot say (two entries may not give one `name`; lengths the parser counts in bytes) is in
// the descriptions.

/// Whitespace as `str::trim` sees it.
const BLANK: &str = r"\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000";
/// Control characters, as `char::is_control` sees them.
const CONTROL: &str = r"\x00-\x1f\x7f-\x9f";
/// Whitespace and control characters together.
const BLANK_OR_CONTROL: &str =
    r"\x00-\x20\x7f-\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000";

fn string() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String)
}

/// An object that refuses keys it does not list.
fn closed_object() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
}

fn endpoint_name_schema() -> ObjectBuilder {
    string()
        .pattern(Some("^[A-Za-z0-9_-]{1,64}$"))
        .description(Some(
            "1 to 64 letters, digits, `_` and `-`: the last segment of the endpoint's path \
             `/mcp/v/{name}`.",
        ))
        .examples([json!("support")])
}

/// A server or group id: no `__`, which separates ids from tool names.
fn server_id_schema() -> ObjectBuilder {
    string()
        .pattern(Some("^(?:_?[A-Za-z0-9-])*_?$"))
        .min_length(Some(1))
        .max_length(Some(mcpgw_core::ServerId::MAX_LEN))
        .description(Some(
            "A server's or group's id: 1 to 64 letters, digits, `_` and `-`, without `__`. It \
             need not exist yet: the entry selects nothing until it does.",
        ))
        .examples([json!("math")])
}

/// A principal pattern: a principal, `kind:*` or `*`.
fn principal_patterns_schema() -> ArrayBuilder {
    let kinds = PrincipalKind::ALL
        .iter()
        .map(|kind| kind.as_str())
        .collect::<Vec<_>>()
        .join("|");
    let edge = format!("[^{BLANK_OR_CONTROL}*]");
    let inner = format!("[^{CONTROL}*]");
    let inner_max = PRINCIPAL_NAME_MAX_BYTES - 2;
    let name = format!("{edge}(?:{inner}{{0,{inner_max}}}{edge})?");
    ArrayBuilder::new()
        .items(RefOr::T(
            string()
                .pattern(Some(format!(r"^(?:\*|(?:{kinds}):(?:\*|{name}))$")))
                .examples([json!("group:support")])
                .build()
                .into(),
        ))
        .description(Some(
            "Principal patterns: a principal (`user:alice`, `group:support`; a name of at most \
             256 bytes), `kind:*` (`service:*`) or `*`.",
        ))
}

/// One entry of `tools`: a whole server or group, or one tool of it with optional overrides.
fn entry_schema() -> Schema {
    let whole = closed_object()
        .property("server", server_id_schema())
        .required("server")
        .description(Some("Every tool of a server or group."));
    let one = closed_object()
        .property("server", server_id_schema())
        .property(
            "tool",
            string()
                .pattern(Some(format!("[^{BLANK}]")))
                .description(Some("The tool's own (upstream) name."))
                .examples([json!("add")]),
        )
        .property(
            "name",
            string()
                .pattern(Some("^[A-Za-z0-9_.-]{1,128}$"))
                .description(Some(
                    "The name clients of the endpoint see: 1 to 128 letters, digits, `_`, `-` \
                     and `.`; no two entries of one endpoint may give the same.",
                ))
                .examples([json!("sum")]),
        )
        .property(
            "title",
            string().description(Some("Replaces the tool's title.")),
        )
        .property(
            "description",
            string().description(Some("Replaces the tool's description.")),
        )
        .property(
            "annotations",
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .description(Some(
                    "Replaces the tool's annotations (MCP `ToolAnnotations`).",
                ))
                .examples([json!({"readOnlyHint": true})]),
        )
        .required("server")
        .required("tool")
        .description(Some(
            "One tool, with optional overrides of what clients see.",
        ));
    OneOfBuilder::new()
        .item(RefOr::T(whole.build().into()))
        .item(RefOr::T(one.build().into()))
        .build()
        .into()
}

/// The fields of a definition, with `name` (required when `name_required`).
fn definition_schema(name_required: bool) -> ObjectBuilder {
    let object = closed_object()
        .property("name", endpoint_name_schema())
        .property(
            "description",
            string().examples([json!("Tools for the support agents")]),
        )
        .property(
            "tools",
            ArrayBuilder::new()
                .items(RefOr::T(entry_schema()))
                .min_items(Some(1))
                .description(Some(
                    "What the endpoint serves, in order. A tool selected twice is served once, \
                     as its first entry says.",
                )),
        )
        .property(
            "allow",
            principal_patterns_schema().description(Some(
                "Principal patterns that may use the endpoint (a principal, `kind:*` or `*`); \
                 absent or empty: every caller who may use `/mcp`. They apply when \
                 authentication is on.",
            )),
        )
        .property(
            "deny",
            principal_patterns_schema().description(Some(
                "Principal patterns that may not use the endpoint, whatever `allow` says.",
            )),
        )
        .property(
            "tool_search",
            ObjectBuilder::new()
                .schema_type(Type::Boolean)
                .description(Some(
                    "`tools/list` answers the tool search meta-tool alone; every selected tool \
                 stays callable by name. Default false.",
                )),
        )
        .required("tools");
    if name_required {
        object.required("name")
    } else {
        object
    }
}

/// The body of `POST /api/endpoints`: `name` plus the fields of an `endpoints` entry of the
/// configuration file.
pub(crate) struct CreateEndpointRequest;

impl PartialSchema for CreateEndpointRequest {
    fn schema() -> RefOr<Schema> {
        RefOr::T(
            definition_schema(true)
                .examples([json!({
                    "name": "support",
                    "description": "Tools for the support agents",
                    "tools": [
                        {"server": "tickets"},
                        {"server": "math", "tool": "add", "name": "sum", "title": "Sum",
                         "annotations": {"readOnlyHint": true}}
                    ],
                    "allow": ["group:support", "user:alice"],
                    "deny": ["user:mallory"]
                })])
                .build()
                .into(),
        )
    }
}

impl ToSchema for CreateEndpointRequest {}

/// The body of `PUT /api/endpoints/{name}`: the whole definition; `name` may be left out and
/// must equal the path's when given.
pub(crate) struct ReplaceEndpointRequest;

impl PartialSchema for ReplaceEndpointRequest {
    fn schema() -> RefOr<Schema> {
        RefOr::T(
            definition_schema(false)
                .examples([json!({"tools": [{"server": "tickets"}]})])
                .build()
                .into(),
        )
    }
}

impl ToSchema for ReplaceEndpointRequest {}

/// One endpoint in the list.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EndpointSummary {
    #[schema(example = "support")]
    pub name: String,
    pub description: Option<String>,
    /// `config` (declared in the configuration file) or `api` (created over the API).
    #[schema(example = "api")]
    pub origin: String,
    /// Where MCP clients reach it.
    #[schema(example = "/mcp/v/support")]
    pub path: String,
    pub tool_search: bool,
    /// How many tools it serves now, as the aggregated catalogue lists them.
    pub tool_count: usize,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EndpointList {
    /// Every curated endpoint, sorted by name.
    pub endpoints: Vec<EndpointSummary>,
}

/// One tool an endpoint serves.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EndpointServedTool {
    /// The name clients of the endpoint see.
    #[schema(example = "sum")]
    pub name: String,
    /// The server or group whose tool it is.
    #[schema(example = "math")]
    pub server: String,
    /// The tool's own (upstream) name there.
    #[schema(example = "add")]
    pub tool: String,
    /// The name it has on `/mcp`, the aggregated catalogue.
    #[schema(example = "math__add")]
    pub catalog_name: String,
    /// The MCP `Tool` object clients of the endpoint are served, overrides applied.
    #[schema(value_type = crate::dto::McpTool)]
    pub definition: Tool,
}

/// A curated endpoint: its definition, where it is served, and what it serves now.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EndpointDetails {
    #[schema(example = "support")]
    pub name: String,
    pub description: Option<String>,
    /// The definition's entries as written (the `tools` of the definition and of a PUT body).
    pub selection: Vec<EndpointEntry>,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    pub tool_search: bool,
    /// `config` (declared in the configuration file) or `api` (created over the API).
    #[schema(example = "api")]
    pub origin: String,
    #[schema(example = "/mcp/v/support")]
    pub path: String,
    /// The tools it serves now, in selection order, as the aggregated catalogue lists them
    /// (tools that pinning withholds are not served); empty while the catalogue is unknown.
    pub tools: Vec<EndpointServedTool>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EndpointCreated {
    #[schema(example = "support")]
    pub name: String,
    /// Always true.
    pub created: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EndpointDeleted {
    #[schema(example = "support")]
    pub name: String,
    /// Always true.
    pub deleted: bool,
}

fn path_of(spec: &EndpointSpec) -> String {
    format!("{}{}", crate::CURATED_PATH_PREFIX, spec.name)
}

fn summary(service: &EndpointService, spec: &EndpointSpec) -> EndpointSummary {
    EndpointSummary {
        name: spec.name.to_string(),
        description: spec.description.clone(),
        origin: spec.origin.as_str().to_owned(),
        path: path_of(spec),
        tool_search: spec.tool_search,
        tool_count: service
            .resolve(spec.name.as_str())
            .map_or(0, |resolved| resolved.tools.len()),
    }
}

fn details(service: &EndpointService, spec: &EndpointSpec) -> EndpointDetails {
    let definition = mcpgw_config::EndpointDefinition::from_endpoint_spec(spec);
    let tools = service
        .resolve(spec.name.as_str())
        .map(|resolved| {
            resolved
                .tools
                .iter()
                .map(|served| EndpointServedTool {
                    name: served.tool.name.clone(),
                    server: served.server.to_string(),
                    tool: served.upstream_name.clone(),
                    catalog_name: served.catalog_name.clone(),
                    definition: served.tool.clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    EndpointDetails {
        name: spec.name.to_string(),
        description: definition.description,
        selection: definition
            .tools
            .into_iter()
            .map(EndpointEntry::from)
            .collect(),
        allow: definition.allow,
        deny: definition.deny,
        tool_search: definition.tool_search,
        origin: spec.origin.as_str().to_owned(),
        path: path_of(spec),
        tools,
    }
}

// ---------------------------------------------------------------------------------------------
// Bodies
// ---------------------------------------------------------------------------------------------

/// The configuration crate's errors as one 422 message.
fn validation_error(errors: &ConfigErrors) -> ApiError {
    let messages: Vec<String> = errors
        .errors()
        .iter()
        .map(|error| {
            if error.path.is_empty() {
                error.message.clone()
            } else {
                format!("{}: {}", error.path, error.message)
            }
        })
        .collect();
    ApiError::validation(messages.join("; "))
}

/// The name a create body gives: required, a string.
fn name_in(object: &Map<String, Value>) -> Result<String, ApiError> {
    match object.get(NAME_FIELD) {
        None | Some(Value::Null) => Err(ApiError::validation(format!(
            "{NAME_FIELD}: is required; name the new endpoint (1 to 64 letters, digits, `_` or \
             `-`: it is the last segment of its path /mcp/v/NAME)"
        ))),
        Some(Value::String(name)) => Ok(name.clone()),
        Some(other) => Err(ApiError::validation(format!(
            "{NAME_FIELD}: must be a string, not {}",
            json_type_name(other)
        ))),
    }
}

/// The body of a create: `name` plus the definition's fields.
pub(crate) fn spec_for_create(bytes: &[u8]) -> Result<EndpointSpec, ApiError> {
    let object = json_object_with(bytes, ENDPOINT_FIELDS)?;
    let name = name_in(&object)?;
    mcpgw_config::endpoint_spec_from_body(&name, Value::Object(object), ServerOrigin::Api)
        .map_err(|errors| validation_error(&errors))
}

/// The body of a replace of endpoint `name`: the whole definition; `name` may be left out and
/// must equal the path's when present.
pub(crate) fn spec_for_replace(name: &str, bytes: &[u8]) -> Result<EndpointSpec, ApiError> {
    let object = json_object_with(bytes, ENDPOINT_FIELDS)?;
    mcpgw_config::endpoint_spec_from_body(name, Value::Object(object), ServerOrigin::Api)
        .map_err(|errors| validation_error(&errors))
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

/// List the curated endpoints, with how many tools each serves now.
#[utoipa::path(
    get,
    path = "/api/endpoints",
    tag = "endpoints",
    operation_id = "list_endpoints",
    responses(
        (status = 200, description = "Every curated endpoint, sorted by name", body = EndpointList),
        (status = 404, description = "Curated endpoints are not enabled in this gateway (NotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn list_endpoints(
    state: web::Data<ApiState>,
) -> Result<web::Json<EndpointList>, ApiError> {
    let service = service(&state)?;
    Ok(web::Json(EndpointList {
        endpoints: service
            .list()
            .iter()
            .map(|spec| summary(service, spec))
            .collect(),
    }))
}

/// Create a curated endpoint, served at once at `/mcp/v/{name}`.
#[utoipa::path(
    post,
    path = "/api/endpoints",
    tag = "endpoints",
    operation_id = "create_endpoint",
    request_body(content = CreateEndpointRequest, content_type = "application/json",
        description = "`name` plus the fields of an `endpoints` entry of the configuration file. \
                       The servers and groups named need not exist yet: an entry selects nothing \
                       until one does."),
    responses(
        (status = 201, description = "Created", body = EndpointCreated),
        (status = 404, description = "Curated endpoints are not enabled in this gateway (NotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "A curated endpoint with this name exists (ConflictError)", body = ErrorEnvelope),
        (status = 422, description = "Malformed JSON, a missing or invalid name, no entry, an \
            unknown key, a wrong field type, an invalid server id, an override without `tool`, an \
            invalid override name, two entries served under one name, annotations that are not \
            an object, or an invalid principal pattern (ValidationError)", body = ErrorEnvelope),
        (status = 500, description = "The endpoint could not be stored (StoreUnavailableError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn create_endpoint(
    state: web::Data<ApiState>,
    body: Result<Bytes, actix_web::Error>,
) -> Result<HttpResponse, ApiError> {
    let service = service(&state)?;
    let bytes = body_bytes(body, state.settings().max_body_bytes)?;
    let spec = spec_for_create(&bytes)?;
    let created = service.create(spec).await?;
    Ok(HttpResponse::Created().json(EndpointCreated {
        name: created.name.to_string(),
        created: true,
    }))
}

/// A curated endpoint: its definition, where it is served, and the tools it serves now.
#[utoipa::path(
    get,
    path = "/api/endpoints/{name}",
    tag = "endpoints",
    operation_id = "get_endpoint",
    params(("name" = String, Path, description = "The endpoint's name")),
    responses(
        (status = 200, description = "The endpoint", body = EndpointDetails),
        (status = 404, description = "No such endpoint, or curated endpoints are not enabled (NotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn get_endpoint(
    state: web::Data<ApiState>,
    name: web::Path<String>,
) -> Result<web::Json<EndpointDetails>, ApiError> {
    let service = service(&state)?;
    let spec = service.get(&name).ok_or_else(|| not_found(&name))?;
    Ok(web::Json(details(service, &spec)))
}

/// Replace a curated endpoint created over the API with a whole new definition.
#[utoipa::path(
    put,
    path = "/api/endpoints/{name}",
    tag = "endpoints",
    operation_id = "replace_endpoint",
    params(("name" = String, Path, description = "The endpoint's name")),
    request_body(content = ReplaceEndpointRequest, content_type = "application/json",
        description = "The whole definition, as for a create; `name` may be left out, and must \
                       equal the name in the path when given."),
    responses(
        (status = 200, description = "The endpoint as it is now", body = EndpointDetails),
        (status = 404, description = "No such endpoint, or curated endpoints are not enabled (NotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "The endpoint is declared in the configuration file (ConflictError)", body = ErrorEnvelope),
        (status = 422, description = "As for a create, or a body name that differs from the \
            path's (ValidationError)", body = ErrorEnvelope),
        (status = 500, description = "The endpoint could not be stored (StoreUnavailableError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn update_endpoint(
    state: web::Data<ApiState>,
    name: web::Path<String>,
    body: Result<Bytes, actix_web::Error>,
) -> Result<web::Json<EndpointDetails>, ApiError> {
    let service = service(&state)?;
    // An unknown endpoint, or one of the file, is reported as such before its body is judged.
    let existing = service.get(&name).ok_or_else(|| not_found(&name))?;
    if existing.origin == ServerOrigin::Config {
        return Err(EndpointError::DeclaredInConfig(existing.name.to_string()).into());
    }
    let bytes = body_bytes(body, state.settings().max_body_bytes)?;
    let spec = spec_for_replace(&name, &bytes)?;
    let replaced = service.replace(spec).await?;
    Ok(web::Json(details(service, &replaced)))
}

/// Delete a curated endpoint created over the API; its path answers 404 from then on.
#[utoipa::path(
    delete,
    path = "/api/endpoints/{name}",
    tag = "endpoints",
    operation_id = "delete_endpoint",
    params(("name" = String, Path, description = "The endpoint's name")),
    responses(
        (status = 200, description = "Deleted", body = EndpointDeleted),
        (status = 404, description = "No such endpoint, or curated endpoints are not enabled (NotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "The endpoint is declared in the configuration file (ConflictError)", body = ErrorEnvelope),
        (status = 500, description = "The deletion could not be stored (StoreUnavailableError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn delete_endpoint(
    state: web::Data<ApiState>,
    name: web::Path<String>,
) -> Result<web::Json<EndpointDeleted>, ApiError> {
    let service = service(&state)?;
    if service.get(&name).is_none() {
        return Err(not_found(&name));
    }
    service.delete(&name).await?;
    Ok(web::Json(EndpointDeleted {
        name: name.into_inner(),
        deleted: true,
    }))
}

#[cfg(test)]
mod tests {
    use mcpgw_core::RepositoryError;

    use super::*;

    fn refused(result: Result<EndpointSpec, ApiError>) -> String {
        let error = result.unwrap_err();
        assert_eq!(error.status().as_u16(), 422, "{error}");
        assert_eq!(error.name(), "ValidationError");
        error.message().to_owned()
    }

    #[test]
    fn a_create_body_becomes_an_api_spec() {
        let spec = spec_for_create(
            br#"{"name": "support", "tools": [{"server": "math", "tool": "add", "name": "sum"}],
                 "allow": ["group:support"], "tool_search": true}"#,
        )
        .unwrap();
        assert_eq!(spec.name.as_str(), "support");
        assert_eq!(spec.origin, ServerOrigin::Api);
        assert_eq!(spec.tools[0].name.as_deref(), Some("sum"));
        assert_eq!(spec.allow, ["group:support"]);
        assert!(spec.tool_search);
    }

    #[test]
    fn bad_create_bodies_are_validation_errors_that_name_the_field() {
        let cases: &[(&str, &str)] = &[
            ("", "the request body is empty"),
            ("{\"name\": ", "not valid JSON"),
            ("[1]", "must be a JSON object"),
            (r#"{"tools": [{"server": "math"}]}"#, "name: is required"),
            (
                r#"{"name": 7, "tools": [{"server": "math"}]}"#,
                "name: must be a string",
            ),
            (
                r#"{"name": "a b", "tools": [{"server": "math"}]}"#,
                "name: `a b`",
            ),
            (
                r#"{"name": "e"}"#,
                "tools: an endpoint serves at least one entry",
            ),
            (
                r#"{"name": "e", "tools": [{"server": "a__b"}]}"#,
                "tools[0].server",
            ),
            (
                r#"{"name": "e", "tools": [{"server": "m", "title": "T"}]}"#,
                "need `tool`",
            ),
            (
                r#"{"name": "e", "tools": [{"server": "m"}], "deny": ["x"]}"#,
                "deny[0]",
            ),
            (
                r#"{"name": "e", "tools": [{"server": "m"}], "alow": []}"#,
                "did you mean `allow`?",
            ),
        ];
        for (body, expected) in cases {
            let message = refused(spec_for_create(body.as_bytes()));
            assert!(message.contains(expected), "{body}: {message}");
        }
    }

    #[test]
    fn a_replace_body_may_leave_the_name_out_but_not_change_it() {
        let spec = spec_for_replace("support", br#"{"tools": [{"server": "math"}]}"#).unwrap();
        assert_eq!(spec.name.as_str(), "support");
        // Bad input: a body name that differs from the path's.
        let message = refused(spec_for_replace(
            "support",
            br#"{"name": "other", "tools": [{"server": "math"}]}"#,
        ));
        assert!(message.contains("does not match"), "{message}");
    }

    #[test]
    fn endpoint_errors_map_through_their_kinds() {
        let cases = [
            (EndpointError::NotFound("x".into()), 404, "NotFoundError"),
            (
                EndpointError::AlreadyExists("x".into()),
                409,
                "ConflictError",
            ),
            (
                EndpointError::DeclaredInConfig("x".into()),
                409,
                "ConflictError",
            ),
            (
                EndpointError::Invalid("allow: bad".into()),
                422,
                "ValidationError",
            ),
        ];
        for (error, status, name) in cases {
            let api = ApiError::from(error);
            assert_eq!((api.status().as_u16(), api.name()), (status, name));
        }
        let store = ApiError::from(EndpointError::Storage(RepositoryError(
            "disk full at /secret/db".into(),
        )));
        assert_eq!(
            (store.status().as_u16(), store.name()),
            (500, "StoreUnavailableError")
        );
        assert!(!store.message().contains("/secret"), "{}", store.message());
    }
}
