//! `/api/tool_pins`: the pin ledger over REST. Operators read what each server's (or group's)
//! tools looked like when they were trusted and what the server reports now, with a diff, and
//! approve or reject the changes; the ledger itself is the gateway's (`ToolPins`).
//!
//! A decision is recorded under the caller's principal (`user:anonymous` while authentication
//! is off). Approving or rejecting may name the digest the operator looked at, so that a
//! definition that changed again since is not approved unseen.

use std::collections::HashMap;
use std::sync::Arc;

use actix_web::web::{self, Bytes};
use actix_web::{HttpMessage as _, HttpRequest};
use mcpgw_core::{Caller, PinStatus, ServerId, Tool};
use mcpgw_gateway::{PinVerdict, ToolPinError, ToolPinView, ToolPins};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::definition::{body_bytes, json_type_name};
use crate::error::{ApiError, ErrorEnvelope, bounded_for_message, names, status_and_name_of};
use crate::state::ApiState;

/// Who decided, when the caller is nobody in particular.
const ANONYMOUS: &str = "user:anonymous";

/// A trusted definition.
#[derive(Debug, Serialize, ToSchema)]
pub struct PinnedDefinition {
    /// SHA-256 (hex) over the canonical JSON of the definition's name, title, description,
    /// `inputSchema`, `outputSchema` and annotations.
    pub digest: String,
    /// The MCP Tool object as it was trusted.
    #[schema(value_type = Object)]
    pub definition: Value,
    pub pinned_at: String,
    /// Who approved it; null when it was pinned on first use.
    pub approved_by: Option<String>,
}

/// What the server reports, when it differs from the pin.
#[derive(Debug, Serialize, ToSchema)]
pub struct ObservedDefinition {
    pub digest: String,
    /// The MCP Tool object as the server reports it.
    #[schema(value_type = Object)]
    pub definition: Value,
    pub observed_at: String,
    /// Set when an operator rejected this definition.
    pub rejected_by: Option<String>,
    pub rejected_at: Option<String>,
}

/// One tool in the ledger.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolPinEntry {
    /// The server or group whose tool it is.
    pub mcp_server_id: String,
    /// The tool's own (upstream) name.
    pub tool: String,
    /// `pinned` (the server reports the pinned definition, or no longer lists the tool),
    /// `changed`, `new` (no pin yet) or `rejected`.
    #[schema(example = "changed")]
    pub status: String,
    pub pinned: Option<PinnedDefinition>,
    pub observed: Option<ObservedDefinition>,
    /// The fields that differ: `title`, `description`, `inputSchema`, ...
    pub changed_fields: Vec<String>,
    /// A unified diff of the pinned definition into the observed one (JSON with its keys in
    /// order); empty when there is nothing to compare.
    pub diff: String,
}

impl From<&ToolPinView> for ToolPinEntry {
    fn from(view: &ToolPinView) -> Self {
        let definition = |tool: &Tool| serde_json::to_value(tool).unwrap_or_default();
        let pin = &view.pin;
        Self {
            mcp_server_id: pin.owner.to_string(),
            tool: pin.tool.clone(),
            status: view.status.as_str().to_owned(),
            pinned: pin.pinned.as_ref().map(|pinned| PinnedDefinition {
                digest: pinned.digest.clone(),
                definition: definition(&pinned.definition),
                pinned_at: pinned.pinned_at.to_string(),
                approved_by: pinned.approved_by.clone(),
            }),
            observed: pin.observed.as_ref().map(|observed| ObservedDefinition {
                digest: observed.digest.clone(),
                definition: definition(&observed.definition),
                observed_at: observed.observed_at.to_string(),
                rejected_by: observed.rejected.as_ref().map(|(by, _)| by.clone()),
                rejected_at: observed.rejected.as_ref().map(|(_, at)| at.to_string()),
            }),
            changed_fields: view
                .changed_fields
                .iter()
                .map(|field| (*field).to_owned())
                .collect(),
            diff: view.diff.clone(),
        }
    }
}

/// The ledger of every server and group.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolPinList {
    pub tool_pins: Vec<ToolPinEntry>,
}

/// The ledger of one server or group.
#[derive(Debug, Serialize, ToSchema)]
pub struct ServerToolPins {
    pub mcp_server_id: String,
    /// How the server's tools are pinned (`off`, `warn`, `enforce`), from its definition or
    /// the gateway's default; null for a group, which follows its strictest member.
    pub mode: Option<String>,
    pub approve_first: Option<bool>,
    pub tools: Vec<ToolPinEntry>,
}

/// What was decided.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolPinDecision {
    pub mcp_server_id: String,
    /// `approved` or `rejected`.
    pub decision: String,
    pub decided_by: String,
    pub tools: Vec<ToolPinEntry>,
}

/// The ledger was forgotten.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolPinsReset {
    pub mcp_server_id: String,
    pub reset: bool,
}

/// Which changes to approve or reject.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolPinDecisionRequest {
    /// The tools (their own names) to decide on; every tool with a change waiting when absent.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// For each tool, the observed digest the decision is about: a tool whose server reports
    /// another definition by now is refused (409), and nothing is decided.
    #[serde(default)]
    pub digests: HashMap<String, String>,
}

/// The statuses `GET /api/tool_pins` filters by: one of the four, or `pending` (changed or new).
#[derive(Debug, ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub(crate) enum PinStatusFilter {
    Pinned,
    Changed,
    New,
    Rejected,
    Pending,
}

#[derive(Debug, Deserialize)]
pub(crate) struct PinListQuery {
    status: Option<String>,
}

fn ledger(state: &ApiState) -> Result<&Arc<ToolPins>, ApiError> {
    state.gateway().tool_pins().ok_or_else(|| {
        ApiError::new(
            actix_web::http::StatusCode::NOT_FOUND,
            names::NOT_FOUND,
            "tool pinning is not part of this gateway; an application that embeds the API \
             enables it with Gateway::with_tool_pins",
        )
    })
}

/// The id of a registered server or group; a string that is not a valid id names neither.
fn owner_id(state: &ApiState, raw: &str) -> Result<ServerId, ApiError> {
    let id = ServerId::parse(raw).map_err(|_| ApiError::server_not_found(raw))?;
    let gateway = state.gateway();
    let known = gateway.servers().contains(&id)
        || gateway.groups().is_some_and(|groups| groups.contains(&id));
    if known {
        Ok(id)
    } else {
        Err(ApiError::server_not_found(raw))
    }
}

fn principal(request: &HttpRequest) -> String {
    request
        .extensions()
        .get::<Caller>()
        .and_then(|caller| caller.principal.clone())
        .unwrap_or_else(|| ANONYMOUS.to_owned())
}

impl From<ToolPinError> for ApiError {
    fn from(error: ToolPinError) -> Self {
        if let ToolPinError::Store(_) = &error {
            return ApiError::store_unavailable(&error);
        }
        let (status, name) = status_and_name_of(error.kind());
        ApiError::new(status, name, error.to_string())
    }
}

/// Every server's and group's pin ledger.
#[utoipa::path(
    get,
    path = "/api/tool_pins",
    tag = "tool_pins",
    operation_id = "list_tool_pins",
    params(
        ("status" = Option<PinStatusFilter>, Query,
         description = "Only entries with this status: `pinned`, `changed`, `new`, `rejected`, \
            or `pending` (changed or new: waiting for a decision)"),
    ),
    responses(
        (status = 200, description = "The ledger, by server then tool", body = ToolPinList),
        (status = 422, description = "`status` is none of the five (ValidationError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn list_tool_pins(
    state: web::Data<ApiState>,
    query: web::Query<PinListQuery>,
) -> Result<web::Json<ToolPinList>, ApiError> {
    let pins = ledger(&state)?;
    let wanted: Option<Box<dyn Fn(PinStatus) -> bool>> = match query.status.as_deref() {
        None => None,
        Some("pending") => Some(Box::new(PinStatus::is_pending)),
        Some(raw) => {
            let status = [
                PinStatus::Pinned,
                PinStatus::Changed,
                PinStatus::New,
                PinStatus::Rejected,
            ]
            .into_iter()
            .find(|status| status.as_str() == raw)
            .ok_or_else(|| {
                ApiError::validation(format!(
                    "status: `{}` is not a pin status; use pinned, changed, new, rejected or \
                     pending",
                    bounded_for_message(raw)
                ))
            })?;
            Some(Box::new(move |candidate| candidate == status))
        }
    };
    let tool_pins = pins
        .all(false)
        .iter()
        .filter(|view| wanted.as_ref().is_none_or(|wanted| wanted(view.status)))
        .map(ToolPinEntry::from)
        .collect();
    Ok(web::Json(ToolPinList { tool_pins }))
}

/// One server's (or group's) pin ledger.
#[utoipa::path(
    get,
    path = "/api/tool_pins/{id}",
    tag = "tool_pins",
    operation_id = "get_tool_pins",
    params(("id" = crate::dto::McpServerId, Path, description = "The server's or group's id")),
    responses(
        (status = 200, description = "The ledger by tool; empty while nothing is pinned", body = ServerToolPins),
        (status = 404, description = "No such server or group (McpServerNotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn get_tool_pins(
    state: web::Data<ApiState>,
    id: web::Path<String>,
) -> Result<web::Json<ServerToolPins>, ApiError> {
    let pins = ledger(&state)?;
    let id = owner_id(&state, &id)?;
    let pinning = state
        .gateway()
        .servers()
        .snapshot(&id)
        .ok()
        .map(|snapshot| pins.pinning_of(snapshot.spec.tool_pinning));
    Ok(web::Json(ServerToolPins {
        mcp_server_id: id.to_string(),
        mode: pinning.map(|pinning| pinning.mode.as_str().to_owned()),
        approve_first: pinning.map(|pinning| pinning.approve_first),
        tools: pins.ledger(&id).iter().map(ToolPinEntry::from).collect(),
    }))
}

/// Reads a decision body: a JSON object (or nothing at all, meaning every waiting change).
fn decision_request(bytes: &[u8]) -> Result<ToolPinDecisionRequest, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(ToolPinDecisionRequest::default());
    }
    let value: Value = serde_json::from_slice(bytes).map_err(|error| {
        ApiError::validation(format!(
            "the request body is not valid JSON: {error}; send an object with `tools` and \
             `digests`, or nothing to decide on every waiting change"
        ))
    })?;
    if !value.is_object() {
        return Err(ApiError::validation(format!(
            "the request body must be a JSON object with `tools` and `digests`, not {}",
            json_type_name(&value)
        )));
    }
    serde_json::from_value(value).map_err(|error| {
        ApiError::validation(format!(
            "{error}; `tools` is a list of tool names and `digests` an object of tool name to \
             digest"
        ))
    })
}

async fn decide(
    state: &ApiState,
    request: &HttpRequest,
    id: &str,
    body: Result<Bytes, actix_web::Error>,
    verdict: PinVerdict,
) -> Result<web::Json<ToolPinDecision>, ApiError> {
    let pins = ledger(state)?;
    let id = owner_id(state, id)?;
    let body = body_bytes(body, state.settings().max_body_bytes)?;
    let wanted = decision_request(&body)?;
    let by = principal(request);
    let decided = pins
        .decide(&id, verdict, wanted.tools.as_deref(), &wanted.digests, &by)
        .await?;
    Ok(web::Json(ToolPinDecision {
        mcp_server_id: id.to_string(),
        decision: match verdict {
            PinVerdict::Approve => "approved",
            PinVerdict::Reject => "rejected",
        }
        .to_owned(),
        decided_by: by,
        tools: decided.iter().map(ToolPinEntry::from).collect(),
    }))
}

/// Approve what a server reports: each observed definition becomes the pin, and is served.
#[utoipa::path(
    post,
    path = "/api/tool_pins/{id}/approve",
    tag = "tool_pins",
    operation_id = "approve_tool_pins",
    params(("id" = crate::dto::McpServerId, Path, description = "The server's or group's id")),
    request_body(content = ToolPinDecisionRequest, content_type = "application/json",
        description = "Which tools; an empty body approves every change waiting"),
    responses(
        (status = 200, description = "Approved; the entries as they are now", body = ToolPinDecision),
        (status = 404, description = "No such server or group (McpServerNotFoundError), no ledger \
            for it, or no such tool in it (NotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "A tool has no change waiting, or reports another digest \
            than the one named (ConflictError); nothing was decided", body = ErrorEnvelope),
        (status = 422, description = "Malformed JSON or a wrong field (ValidationError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn approve_tool_pins(
    state: web::Data<ApiState>,
    request: HttpRequest,
    id: web::Path<String>,
    body: Result<Bytes, actix_web::Error>,
) -> Result<web::Json<ToolPinDecision>, ApiError> {
    decide(&state, &request, &id, body, PinVerdict::Approve).await
}

/// Reject what a server reports: each observed definition stays withheld (also under `warn`)
/// until the server reports another one.
#[utoipa::path(
    post,
    path = "/api/tool_pins/{id}/reject",
    tag = "tool_pins",
    operation_id = "reject_tool_pins",
    params(("id" = crate::dto::McpServerId, Path, description = "The server's or group's id")),
    request_body(content = ToolPinDecisionRequest, content_type = "application/json",
        description = "Which tools; an empty body rejects every change waiting"),
    responses(
        (status = 200, description = "Rejected; the entries as they are now", body = ToolPinDecision),
        (status = 404, description = "No such server or group (McpServerNotFoundError), no ledger \
            for it, or no such tool in it (NotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "A tool has no change waiting, or reports another digest \
            than the one named (ConflictError); nothing was decided", body = ErrorEnvelope),
        (status = 422, description = "Malformed JSON or a wrong field (ValidationError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn reject_tool_pins(
    state: web::Data<ApiState>,
    request: HttpRequest,
    id: web::Path<String>,
    body: Result<Bytes, actix_web::Error>,
) -> Result<web::Json<ToolPinDecision>, ApiError> {
    decide(&state, &request, &id, body, PinVerdict::Reject).await
}

/// Forget a server's pins: its next tool list is pinned as a first one (or waits for approval
/// under `approve_first`).
#[utoipa::path(
    delete,
    path = "/api/tool_pins/{id}",
    tag = "tool_pins",
    operation_id = "reset_tool_pins",
    params(("id" = crate::dto::McpServerId, Path, description = "The server's or group's id")),
    responses(
        (status = 200, description = "Forgotten", body = ToolPinsReset),
        (status = 404, description = "No such server or group (McpServerNotFoundError), or no \
            ledger for it (NotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn reset_tool_pins(
    state: web::Data<ApiState>,
    request: HttpRequest,
    id: web::Path<String>,
) -> Result<web::Json<ToolPinsReset>, ApiError> {
    let pins = ledger(&state)?;
    let id = owner_id(&state, &id)?;
    pins.reset(&id, &principal(&request)).await?;
    Ok(web::Json(ToolPinsReset {
        mcp_server_id: id.to_string(),
        reset: true,
    }))
}

/// Mounts the ledger's routes.
pub(crate) fn mount(cfg: &mut web::ServiceConfig, mounter: &crate::Mounter) {
    cfg.service(
        mounter
            .resource(web::resource(["/api/tool_pins", "/api/tool_pins/"]), "GET")
            .route(web::get().to(list_tool_pins)),
    )
    .service(
        mounter
            .resource(web::resource("/api/tool_pins/{id}"), "GET, DELETE")
            .route(web::get().to(get_tool_pins))
            .route(web::delete().to(reset_tool_pins)),
    )
    .service(
        mounter
            .resource(web::resource("/api/tool_pins/{id}/approve"), "POST")
            .route(web::post().to(approve_tool_pins)),
    )
    .service(
        mounter
            .resource(web::resource("/api/tool_pins/{id}/reject"), "POST")
            .route(web::post().to(reject_tool_pins)),
    );
}
