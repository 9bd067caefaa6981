//! `/api/discovery`: discovery sources, and the servers they found that wait for an operator.
//!
//! This module reads request bodies, calls the discovery service and turns its answers and
//! errors into the API's shapes. Whether a source's type and settings are valid, what a scan
//! finds and what approval registers are the service's and the discovery domain's business.
//!
//! A gateway composed without discovery answers 404 on every path under `/api/discovery`,
//! whatever the method, so that a client can tell "not configured" from "wrong method".

use std::sync::Arc;

use actix_web::web::{self, Bytes};
use actix_web::{HttpResponse, Resource};
use mcpgw_discovery::{DiscoveryMode, PendingServer, QuarantinedServer, masked_config};
use mcpgw_gateway::{
    ApprovalView, DiscoveryService, RejectionView, ScanReport, SourceRequest, SourceView,
};
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::definition::{body_bytes, json_object_with, json_type_name, refuse_tool_name_conflicts};
use crate::dto::{
    DiscoveryEnableRequest, DiscoverySourceId, DiscoverySourceRequest, DiscoverySourceUpdate,
    McpServerId,
};
use crate::error::{ApiError, ErrorEnvelope, bounded_for_message, names};
use crate::state::ApiState;

const SOURCE_FIELDS: &str = "`source_type` (or `type`), and optionally `source_id` (or `id`), \
                             `mode`, `enabled` and `config`";
const ENABLE_FIELDS: &str = "`enabled`, true or false";

/// The discovery service, or the 404 of a gateway composed without one.
fn service(state: &ApiState) -> Result<&Arc<DiscoveryService>, ApiError> {
    state
        .gateway()
        .discovery()
        .ok_or_else(ApiError::discovery_not_configured)
}

async fn not_configured() -> ApiError {
    ApiError::discovery_not_configured()
}

/// Mounts the discovery routes; without a discovery service, one resource that answers 404 for
/// every path and method under `/api/discovery` instead.
pub(crate) fn mount(cfg: &mut web::ServiceConfig, mounter: &crate::Mounter) {
    if mounter.state.gateway().discovery().is_none() {
        cfg.service(
            Resource::new(["/api/discovery", "/api/discovery/{tail:.*}"])
                .default_service(web::to(not_configured)),
        );
        return;
    }
    cfg.service(
        mounter
            .resource(
                web::resource(["/api/discovery/sources", "/api/discovery/sources/"]),
                "GET, POST",
            )
            .route(web::get().to(list_sources))
            .route(web::post().to(create_source)),
    )
    .service(
        mounter
            .resource(web::resource("/api/discovery/sources/{id}"), "PUT, DELETE")
            .route(web::put().to(update_source))
            .route(web::delete().to(delete_source)),
    )
    .service(
        mounter
            .resource(web::resource("/api/discovery/sources/{id}/scan"), "POST")
            .route(web::post().to(scan_source)),
    )
    .service(
        mounter
            .resource(web::resource("/api/discovery/sources/{id}/enable"), "PUT")
            .route(web::put().to(enable_source)),
    )
    .service(
        mounter
            .resource(
                web::resource(["/api/discovery/pending", "/api/discovery/pending/"]),
                "GET",
            )
            .route(web::get().to(list_pending)),
    )
    .service(
        mounter
            .resource(
                web::resource(["/api/discovery/quarantined", "/api/discovery/quarantined/"]),
                "GET",
            )
            .route(web::get().to(list_quarantined)),
    )
    .service(
        mounter
            .resource(web::resource("/api/discovery/approve/{name}"), "POST")
            .route(web::post().to(approve)),
    )
    .service(
        mounter
            .resource(web::resource("/api/discovery/reject/{name}"), "POST")
            .route(web::post().to(reject)),
    );
}

// ---------------------------------------------------------------------------------------------
// Wire formats
// ---------------------------------------------------------------------------------------------

/// A source's mode: `additive` only adds servers; `authoritative` also withdraws the ones that
/// disappeared from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SourceModeName {
    Additive,
    Authoritative,
}

impl From<DiscoveryMode> for SourceModeName {
    fn from(mode: DiscoveryMode) -> Self {
        match mode {
            DiscoveryMode::Additive => SourceModeName::Additive,
            DiscoveryMode::Authoritative => SourceModeName::Authoritative,
        }
    }
}

/// A discovery source. Timestamps are UTC without an offset, with microseconds
/// (`2026-11-21T14:03:07.123456`).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DiscoverySource {
    /// The `id:` of the configuration file, else `{type}-{index}` (`docker-0`).
    #[schema(example = "docker-0")]
    pub source_id: String,
    /// `docker` or `filesystem`.
    #[schema(example = "docker")]
    pub source_type: String,
    pub mode: SourceModeName,
    pub enabled: bool,
    /// The type's settings, with the values of keys that look like secrets (tokens, passwords,
    /// keys, credentials, headers) replaced by `"***"`.
    #[schema(value_type = Object, example = json!({"socket_path": "/var/run/docker.sock"}))]
    pub config: Map<String, Value>,
    /// When the last scan finished; `null` before the first one.
    #[schema(example = "2026-11-21T14:03:07.123456")]
    pub last_scan_at: Option<String>,
    /// Why the last scan could not read the source; `null` when it could.
    pub error: Option<String>,
}

impl From<&SourceView> for DiscoverySource {
    fn from(view: &SourceView) -> Self {
        let definition = &view.definition;
        Self {
            source_id: definition.source_id.clone(),
            source_type: definition.source_type.clone(),
            mode: definition.mode.into(),
            enabled: definition.enabled,
            config: masked_config(&definition.config),
            last_scan_at: view.last_scan_at.map(|at| at.to_string()),
            error: view.error.clone(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DiscoverySourceList {
    pub sources: Vec<DiscoverySource>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DiscoverySourceDeleted {
    pub source_id: String,
    /// Always true.
    pub deleted: bool,
}

/// What a scan found, counted after it finished.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DiscoveryScanResult {
    pub source_id: String,
    /// Candidates the source reported.
    pub found: usize,
    /// The source's candidates that wait for approval.
    pub pending: usize,
    /// The source's candidates that failed validation.
    pub quarantined: usize,
}

impl From<ScanReport> for DiscoveryScanResult {
    fn from(report: ScanReport) -> Self {
        Self {
            source_id: report.source_id,
            found: report.found,
            pending: report.pending,
            quarantined: report.quarantined,
        }
    }
}

/// A discovered server waiting for approval.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PendingDiscovery {
    /// The id the server gets when approved.
    #[schema(example = "math")]
    pub name: String,
    pub source_id: String,
    /// The server's mode (`subprocess`, `docker`, `remote`).
    #[schema(example = "docker")]
    pub mode: String,
    #[schema(example = "2026-11-21T14:03:07.123456")]
    pub discovered_at: String,
    /// The server definition as the source reported it, in the configuration file's shape,
    /// with the values of `env` and `headers` replaced by `"***"`.
    #[schema(value_type = Object, example = json!({"mode": "docker", "image": "repo/math:1"}))]
    pub definition: Map<String, Value>,
    /// Whether approving it replaces a server approved earlier from this source with another
    /// definition (the running server keeps the old one until then).
    pub replaces_approved: bool,
}

impl From<&PendingServer> for PendingDiscovery {
    fn from(pending: &PendingServer) -> Self {
        Self {
            name: pending.name.clone(),
            source_id: pending.source_id.clone(),
            mode: pending.mode.clone(),
            discovered_at: pending.discovered_at.to_string(),
            definition: mcpgw_gateway::config::sanitized_definition(&pending.definition),
            replaces_approved: pending.replaces_approved,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PendingDiscoveryList {
    pub pending: Vec<PendingDiscovery>,
}

/// A discovered server that failed validation.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct QuarantinedDiscovery {
    pub name: String,
    pub source_id: String,
    /// What is wrong with its definition, naming the field.
    pub reason: String,
    #[schema(example = "2026-11-21T14:03:07.123456")]
    pub quarantined_at: String,
}

impl From<&QuarantinedServer> for QuarantinedDiscovery {
    fn from(quarantined: &QuarantinedServer) -> Self {
        Self {
            name: quarantined.name.clone(),
            source_id: quarantined.source_id.clone(),
            reason: quarantined.reason.clone(),
            quarantined_at: quarantined.quarantined_at.to_string(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct QuarantinedDiscoveryList {
    pub quarantined: Vec<QuarantinedDiscovery>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DiscoveryApproved {
    pub name: String,
    pub source_id: String,
    /// The id of the registered server.
    pub mcp_server_id: String,
    /// Always true.
    pub approved: bool,
    /// Whether it replaced a server approved earlier with another definition.
    pub replaced: bool,
}

impl From<ApprovalView> for DiscoveryApproved {
    fn from(view: ApprovalView) -> Self {
        Self {
            name: view.name,
            source_id: view.source_id,
            mcp_server_id: view.mcp_server_id.to_string(),
            approved: true,
            replaced: view.replaced,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DiscoveryRejected {
    pub name: String,
    pub source_id: String,
    /// Always true.
    pub rejected: bool,
}

impl From<RejectionView> for DiscoveryRejected {
    fn from(view: RejectionView) -> Self {
        Self {
            name: view.name,
            source_id: view.source_id,
            rejected: true,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Request bodies
// ---------------------------------------------------------------------------------------------

/// Takes a field that may also be given under `alias`; a `null` counts as absent.
fn take_aliased(
    object: &mut Map<String, Value>,
    field: &str,
    alias: &str,
) -> Result<Option<Value>, ApiError> {
    let value = object.remove(field).filter(|value| !value.is_null());
    let aliased = object.remove(alias).filter(|value| !value.is_null());
    match (value, aliased) {
        (Some(_), Some(_)) => Err(ApiError::validation(format!(
            "{field}: give either `{field}` or `{alias}`, not both"
        ))),
        (value, aliased) => Ok(value.or(aliased)),
    }
}

fn string_of(field: &str, value: Value) -> Result<String, ApiError> {
    match value {
        Value::String(text) => Ok(text),
        other => Err(ApiError::validation(format!(
            "{field}: must be a string, not {}",
            json_type_name(&other)
        ))),
    }
}

fn mode_of(value: Value) -> Result<DiscoveryMode, ApiError> {
    match value {
        Value::String(text) if text == "additive" => Ok(DiscoveryMode::Additive),
        Value::String(text) if text == "authoritative" => Ok(DiscoveryMode::Authoritative),
        Value::String(text) => Err(ApiError::validation(format!(
            "mode: `{}` is not a discovery mode; use `additive` or `authoritative`",
            bounded_for_message(&text)
        ))),
        other => Err(ApiError::validation(format!(
            "mode: must be `additive` or `authoritative`, not {}",
            json_type_name(&other)
        ))),
    }
}

fn enabled_of(value: Value) -> Result<bool, ApiError> {
    match value {
        Value::Bool(enabled) => Ok(enabled),
        other => Err(ApiError::validation(format!(
            "enabled: must be true or false, not {}",
            json_type_name(&other)
        ))),
    }
}

/// A key left over once the known ones are taken is a mistake the caller should hear about,
/// not a setting silently dropped.
fn refuse_unknown_keys(object: &Map<String, Value>, accepted: &str) -> Result<(), ApiError> {
    match object.keys().next() {
        None => Ok(()),
        Some(key) => Err(ApiError::validation(format!(
            "unknown field `{}`; the body takes {accepted}",
            bounded_for_message(key)
        ))),
    }
}

/// The body of a create (`path_id` `None`) or of an update of source `path_id`.
pub(crate) fn source_request(
    path_id: Option<&str>,
    bytes: &[u8],
) -> Result<SourceRequest, ApiError> {
    let mut object = json_object_with(bytes, SOURCE_FIELDS)?;
    let body_id = take_aliased(&mut object, "source_id", "id")?
        .map(|value| string_of("source_id", value))
        .transpose()?;
    let source_type = take_aliased(&mut object, "source_type", "type")?
        .map(|value| string_of("source_type", value))
        .transpose()?
        .ok_or_else(|| {
            ApiError::validation("source_type: is required; use `docker` or `filesystem`")
        })?;
    let mode = object
        .remove("mode")
        .filter(|value| !value.is_null())
        .map(mode_of)
        .transpose()?
        .unwrap_or_default();
    let enabled = object
        .remove("enabled")
        .filter(|value| !value.is_null())
        .map(enabled_of)
        .transpose()?
        .unwrap_or(true);
    let config = match object.remove("config") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(config)) => config,
        Some(other) => {
            return Err(ApiError::validation(format!(
                "config: must be an object with the source type's settings, not {}",
                json_type_name(&other)
            )));
        }
    };
    refuse_unknown_keys(&object, SOURCE_FIELDS)?;
    let source_id = match (path_id, body_id) {
        (None, body_id) => body_id,
        (Some(path_id), Some(body_id)) if body_id != path_id => {
            return Err(ApiError::validation(format!(
                "source_id: `{}` differs from the id in the path `{}`; a source cannot be \
                 renamed, delete it and register a new one instead",
                bounded_for_message(&body_id),
                bounded_for_message(path_id)
            )));
        }
        (Some(path_id), _) => Some(path_id.to_owned()),
    };
    Ok(SourceRequest {
        source_id,
        source_type,
        mode,
        enabled,
        config,
    })
}

/// The body of an enable: `{"enabled": bool}`.
pub(crate) fn enabled_from_body(bytes: &[u8]) -> Result<bool, ApiError> {
    let mut object = json_object_with(bytes, ENABLE_FIELDS)?;
    let enabled = match object.remove("enabled") {
        None | Some(Value::Null) => {
            return Err(ApiError::validation(
                "enabled: is required; send true to enable the source or false to disable it",
            ));
        }
        Some(value) => enabled_of(value)?,
    };
    refuse_unknown_keys(&object, ENABLE_FIELDS)?;
    Ok(enabled)
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

/// List discovery sources, with the outcome of each one's last scan.
#[utoipa::path(
    get,
    path = "/api/discovery/sources",
    tag = "discovery",
    operation_id = "list_discovery_sources",
    responses(
        (status = 200, description = "Every source, with secrets in `config` masked", body = DiscoverySourceList),
        (status = 404, description = "Discovery is not configured (NotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn list_sources(
    state: web::Data<ApiState>,
) -> Result<web::Json<DiscoverySourceList>, ApiError> {
    let sources = service(&state)?.sources();
    Ok(web::Json(DiscoverySourceList {
        sources: sources.iter().map(DiscoverySource::from).collect(),
    }))
}

/// Register a discovery source. It is kept across restarts and scanned on the discovery
/// schedule.
#[utoipa::path(
    post,
    path = "/api/discovery/sources",
    tag = "discovery",
    operation_id = "create_discovery_source",
    request_body(content = DiscoverySourceRequest, content_type = "application/json",
        description = "The source's type, mode, whether it is enabled, and its settings. The body \
                       is parsed as JSON whatever its Content-Type says."),
    responses(
        (status = 201, description = "Registered; the new source", body = DiscoverySource),
        (status = 404, description = "Discovery is not configured (NotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "A source with this id exists (DiscoverySourceAlreadyExistsError)", body = ErrorEnvelope),
        (status = 413, description = "The body is larger than the configured limit", body = ErrorEnvelope),
        (status = 422, description = "Malformed JSON, a missing `source_type`, an unknown type or \
            mode, a wrong field type, an unknown field, an invalid id, or settings the type does \
            not accept (ValidationError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn create_source(
    state: web::Data<ApiState>,
    body: Result<Bytes, actix_web::Error>,
) -> Result<HttpResponse, ApiError> {
    let discovery = service(&state)?;
    let bytes = body_bytes(body, state.settings().max_body_bytes)?;
    let request = source_request(None, &bytes)?;
    let view = discovery.add_source(request).await?;
    Ok(HttpResponse::Created().json(DiscoverySource::from(&view)))
}

/// Replace a source registered over the API. Sources of the configuration file are changed
/// there.
#[utoipa::path(
    put,
    path = "/api/discovery/sources/{id}",
    tag = "discovery",
    operation_id = "update_discovery_source",
    params(("id" = DiscoverySourceId, Path, description = "The source's id")),
    request_body(content = DiscoverySourceUpdate, content_type = "application/json",
        description = "The whole source, as on create; `source_id` may be left out."),
    responses(
        (status = 200, description = "The updated source", body = DiscoverySource),
        (status = 404, description = "No such source (DiscoverySourceNotFoundError), or discovery \
            is not configured (NotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "The source is declared in the configuration file (ConflictError)", body = ErrorEnvelope),
        (status = 413, description = "The body is larger than the configured limit", body = ErrorEnvelope),
        (status = 422, description = "Malformed JSON, a body id that differs from the path, a \
            missing `source_type`, an unknown type or mode, a wrong field type, an unknown field, \
            or settings the type does not accept (ValidationError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn update_source(
    state: web::Data<ApiState>,
    id: web::Path<String>,
    body: Result<Bytes, actix_web::Error>,
) -> Result<web::Json<DiscoverySource>, ApiError> {
    let discovery = service(&state)?;
    // An unknown source is reported as such before its body is judged.
    discovery.source(&id)?;
    let bytes = body_bytes(body, state.settings().max_body_bytes)?;
    let request = source_request(Some(&id), &bytes)?;
    let view = discovery.update_source(&id, request).await?;
    Ok(web::Json(DiscoverySource::from(&view)))
}

/// Remove a source registered over the API. The servers it found stay registered; what waits
/// for approval from it is dropped.
#[utoipa::path(
    delete,
    path = "/api/discovery/sources/{id}",
    tag = "discovery",
    operation_id = "delete_discovery_source",
    params(("id" = DiscoverySourceId, Path, description = "The source's id")),
    responses(
        (status = 200, description = "Removed", body = DiscoverySourceDeleted),
        (status = 404, description = "No such source (DiscoverySourceNotFoundError), or discovery \
            is not configured (NotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "The source is declared in the configuration file (ConflictError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn delete_source(
    state: web::Data<ApiState>,
    id: web::Path<String>,
) -> Result<web::Json<DiscoverySourceDeleted>, ApiError> {
    let discovery = service(&state)?;
    discovery.remove_source(&id).await?;
    Ok(web::Json(DiscoverySourceDeleted {
        source_id: id.into_inner(),
        deleted: true,
    }))
}

/// Scan a source now, and answer once the scan finished.
#[utoipa::path(
    post,
    path = "/api/discovery/sources/{id}/scan",
    tag = "discovery",
    operation_id = "scan_discovery_source",
    params(("id" = DiscoverySourceId, Path, description = "The source's id")),
    responses(
        (status = 200, description = "The scan finished; what the source holds now", body = DiscoveryScanResult),
        (status = 404, description = "No such source (DiscoverySourceNotFoundError), or discovery \
            is not configured (NotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "The source is disabled (ConflictError)", body = ErrorEnvelope),
        (status = 503, description = "The source could not be read, its engine or directory is \
            unreachable (DiscoverySourceUnavailableError); the source lists the error", body = ErrorEnvelope),
    )
)]
pub(crate) async fn scan_source(
    state: web::Data<ApiState>,
    id: web::Path<String>,
) -> Result<web::Json<DiscoveryScanResult>, ApiError> {
    let report = service(&state)?.scan(&id).await?;
    Ok(web::Json(report.into()))
}

/// Enable or disable a source; allowed on sources of the configuration file too. A disabled
/// source is not scanned.
#[utoipa::path(
    put,
    path = "/api/discovery/sources/{id}/enable",
    tag = "discovery",
    operation_id = "enable_discovery_source",
    params(("id" = DiscoverySourceId, Path, description = "The source's id")),
    request_body(content = DiscoveryEnableRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The source", body = DiscoverySource),
        (status = 404, description = "No such source (DiscoverySourceNotFoundError), or discovery \
            is not configured (NotFoundError)", body = ErrorEnvelope),
        (status = 413, description = "The body is larger than the configured limit", body = ErrorEnvelope),
        (status = 422, description = "Malformed JSON, or `enabled` missing or not a boolean (ValidationError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn enable_source(
    state: web::Data<ApiState>,
    id: web::Path<String>,
    body: Result<Bytes, actix_web::Error>,
) -> Result<web::Json<DiscoverySource>, ApiError> {
    let discovery = service(&state)?;
    discovery.source(&id)?;
    let bytes = body_bytes(body, state.settings().max_body_bytes)?;
    let enabled = enabled_from_body(&bytes)?;
    let view = discovery.set_enabled(&id, enabled).await?;
    Ok(web::Json(DiscoverySource::from(&view)))
}

/// Discovered servers waiting for approval.
#[utoipa::path(
    get,
    path = "/api/discovery/pending",
    tag = "discovery",
    operation_id = "list_pending_discoveries",
    responses(
        (status = 200, description = "Every pending server", body = PendingDiscoveryList),
        (status = 404, description = "Discovery is not configured (NotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn list_pending(
    state: web::Data<ApiState>,
) -> Result<web::Json<PendingDiscoveryList>, ApiError> {
    let pending = service(&state)?.pending();
    Ok(web::Json(PendingDiscoveryList {
        pending: pending.iter().map(PendingDiscovery::from).collect(),
    }))
}

/// Discovered servers whose definitions failed validation, with the reason.
#[utoipa::path(
    get,
    path = "/api/discovery/quarantined",
    tag = "discovery",
    operation_id = "list_quarantined_discoveries",
    responses(
        (status = 200, description = "Every quarantined server", body = QuarantinedDiscoveryList),
        (status = 404, description = "Discovery is not configured (NotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn list_quarantined(
    state: web::Data<ApiState>,
) -> Result<web::Json<QuarantinedDiscoveryList>, ApiError> {
    let quarantined = service(&state)?.quarantined();
    Ok(web::Json(QuarantinedDiscoveryList {
        quarantined: quarantined.iter().map(QuarantinedDiscovery::from).collect(),
    }))
}

/// Approve a pending server: it is registered as an mcp server of origin `discovery`.
#[utoipa::path(
    post,
    path = "/api/discovery/approve/{name}",
    tag = "discovery",
    operation_id = "approve_discovery",
    params(("name" = McpServerId, Path, description = "The pending server's name")),
    responses(
        (status = 200, description = "Approved and registered", body = DiscoveryApproved),
        (status = 404, description = "No pending server has this name (DiscoveredServerNotFoundError), \
            or discovery is not configured (NotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "A server with this id exists and was not discovered from \
            this source, or the id's tool name prefix is another server's or group's \
            (ConflictError)", body = ErrorEnvelope),
        (status = 422, description = "The id contains the tool name separator (ValidationError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn approve(
    state: web::Data<ApiState>,
    name: web::Path<String>,
) -> Result<web::Json<DiscoveryApproved>, ApiError> {
    let discovery = service(&state)?;
    // A server that is new (not a changed definition of one approved before) must fit the
    // tool names in effect.
    let new_server = discovery
        .pending()
        .into_iter()
        .find(|pending| pending.name == name.as_str())
        .filter(|pending| !pending.replaces_approved);
    if let Some(pending) = new_server
        && let Ok(id) = mcpgw_core::ServerId::parse(&pending.name)
    {
        refuse_tool_name_conflicts(state.gateway(), &id, "name", names::CONFLICT)?;
    }
    let view = discovery.approve(&name).await?;
    Ok(web::Json(view.into()))
}

/// Reject a pending server. The rejection holds across scans and restarts until the server's
/// definition changes.
#[utoipa::path(
    post,
    path = "/api/discovery/reject/{name}",
    tag = "discovery",
    operation_id = "reject_discovery",
    params(("name" = McpServerId, Path, description = "The pending server's name")),
    responses(
        (status = 200, description = "Rejected", body = DiscoveryRejected),
        (status = 404, description = "No pending server has this name (DiscoveredServerNotFoundError), \
            or discovery is not configured (NotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn reject(
    state: web::Data<ApiState>,
    name: web::Path<String>,
) -> Result<web::Json<DiscoveryRejected>, ApiError> {
    let view = service(&state)?.reject(&name).await?;
    Ok(web::Json(view.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused<T: std::fmt::Debug>(result: Result<T, ApiError>) -> String {
        let error = result.expect_err("the body is refused");
        assert_eq!(error.status().as_u16(), 422, "{}", error.message());
        assert_eq!(error.name(), "ValidationError");
        error.message().to_owned()
    }

    #[test]
    fn a_create_body_takes_aliases_and_defaults() {
        let request = source_request(None, br#"{"type": "docker"}"#).unwrap();
        assert_eq!(request.source_id, None);
        assert_eq!(request.source_type, "docker");
        assert_eq!(request.mode, DiscoveryMode::Additive);
        assert!(request.enabled);
        assert!(request.config.is_empty());
        let request = source_request(
            None,
            br#"{"id": "files", "source_type": "filesystem", "mode": "authoritative",
                 "enabled": false, "config": {"path": "/etc/mcp"}}"#,
        )
        .unwrap();
        assert_eq!(request.source_id.as_deref(), Some("files"));
        assert_eq!(request.mode, DiscoveryMode::Authoritative);
        assert!(!request.enabled);
        assert_eq!(request.config["path"], "/etc/mcp");
    }

    #[test]
    fn an_update_body_takes_its_id_from_the_path() {
        let request = source_request(Some("files"), br#"{"source_type": "filesystem"}"#).unwrap();
        assert_eq!(request.source_id.as_deref(), Some("files"));
        let same = source_request(
            Some("files"),
            br#"{"source_id": "files", "source_type": "filesystem"}"#,
        )
        .unwrap();
        assert_eq!(same.source_id.as_deref(), Some("files"));
        let message = refused(source_request(
            Some("files"),
            br#"{"source_id": "other", "source_type": "filesystem"}"#,
        ));
        assert!(
            message.contains("differs from the id in the path"),
            "{message}"
        );
    }

    #[test]
    fn bad_source_bodies_name_the_field() {
        for (body, expected) in [
            ("", "the request body is empty"),
            ("{", "not valid JSON"),
            ("[]", "must be a JSON object"),
            ("{}", "source_type: is required"),
            (
                r#"{"source_type": 5}"#,
                "source_type: must be a string, not a number",
            ),
            (r#"{"type": "docker", "source_type": "docker"}"#, "not both"),
            (
                r#"{"type": "docker", "id": 7}"#,
                "source_id: must be a string",
            ),
            (
                r#"{"type": "docker", "mode": "eager"}"#,
                "mode: `eager` is not a discovery mode",
            ),
            (r#"{"type": "docker", "mode": 1}"#, "mode: must be"),
            (
                r#"{"type": "docker", "enabled": "yes"}"#,
                "enabled: must be true or false",
            ),
            (
                r#"{"type": "docker", "config": []}"#,
                "config: must be an object",
            ),
            (
                r#"{"type": "docker", "socket_path": "/x"}"#,
                "unknown field `socket_path`",
            ),
        ] {
            let message = refused(source_request(None, body.as_bytes()));
            assert!(message.contains(expected), "{body}: {message}");
        }
    }

    #[test]
    fn an_enable_body_needs_a_boolean() {
        assert!(enabled_from_body(br#"{"enabled": true}"#).unwrap());
        assert!(!enabled_from_body(br#"{"enabled": false}"#).unwrap());
        for (body, expected) in [
            ("{}", "enabled: is required"),
            (r#"{"enabled": null}"#, "enabled: is required"),
            (
                r#"{"enabled": "true"}"#,
                "enabled: must be true or false, not a string",
            ),
            (
                r#"{"enabled": true, "mode": "additive"}"#,
                "unknown field `mode`",
            ),
            ("true", "must be a JSON object"),
        ] {
            let message = refused(enabled_from_body(body.as_bytes()));
            assert!(message.contains(expected), "{body}: {message}");
        }
    }

    #[test]
    fn pending_definitions_hide_environment_and_header_values() {
        let definition = serde_json::json!({
            "mode": "remote",
            "endpoint": "https://host/mcp",
            "headers": {"Authorization": "Bearer secret"},
            "env": {"TOKEN": "secret"},
        });
        let definition = definition.as_object().unwrap().clone();
        let shown = Value::Object(mcpgw_gateway::config::sanitized_definition(&definition));
        assert_eq!(shown["endpoint"], "https://host/mcp");
        assert_eq!(shown["headers"]["Authorization"], "***");
        assert_eq!(shown["env"]["TOKEN"], "***");
        assert!(!shown.to_string().contains("secret"), "{shown}");
    }
}
