//! `/api/mcp_servers`: the registry of MCP servers over REST.

use actix_web::http::StatusCode;
use actix_web::web::{self, Bytes};
use actix_web::{HttpResponse, Responder};
use mcpgw_core::{LOG_RING_CAPACITY, ServerId, ServerState};
use mcpgw_gateway::GroupServiceError;
use serde::Deserialize;

use crate::definition::{
    body_bytes, definition_rules, refuse_tool_name_conflicts, spec_for_create, spec_for_update,
};
use crate::dto::{
    CreateServerRequest, HealthStatus, InvocationEntry, ServerCreated, ServerDeleted,
    ServerDetails, ServerList, ServerLogs, ServerSummary, ServerTools, ToolHistory,
    UpdateServerRequest,
};
use crate::error::{ApiError, ErrorEnvelope, bounded_for_message, names};
use crate::state::ApiState;

/// How many log lines answer when `lines` is not given.
pub const DEFAULT_LOG_LINES: usize = 100;
/// The most log lines one request gets; more are served as this many.
pub const MAX_LOG_LINES: usize = LOG_RING_CAPACITY;
/// How many invocations a history page holds when `limit` is not given.
pub const DEFAULT_HISTORY_LIMIT: usize = 50;
/// The most invocations one history page holds; a larger `limit` is served as this many.
pub const MAX_HISTORY_LIMIT: usize = 500;

/// An id from the path. A string that is not a valid server id cannot name a server, so it is
/// simply not found.
fn path_id(raw: &str) -> Result<ServerId, ApiError> {
    ServerId::parse(raw).map_err(|_| ApiError::server_not_found(raw))
}

fn details(state: &ApiState, id: &ServerId) -> Result<ServerDetails, ApiError> {
    let manager = state.gateway().servers();
    let snapshot = manager.snapshot(id)?;
    let (tools, source) = manager.tools(id)?;
    Ok(ServerDetails::new(&snapshot, tools, source))
}

#[derive(Debug, Deserialize)]
pub(crate) struct ListQuery {
    state: Option<String>,
}

/// List MCP servers, optionally only those in one state.
#[utoipa::path(
    get,
    path = "/api/mcp_servers",
    tag = "mcp_servers",
    operation_id = "list_mcp_servers",
    params(
        ("state" = Option<crate::dto::StateName>, Query,
         description = "Only servers in this state: cold, initializing, ready, degraded or dead"),
    ),
    responses(
        (status = 200, description = "The servers, sorted by id", body = ServerList),
        (status = 422, description = "`state` is not one of the five states", body = ErrorEnvelope),
    )
)]
pub(crate) async fn list_servers(
    state: web::Data<ApiState>,
    query: web::Query<ListQuery>,
) -> Result<web::Json<ServerList>, ApiError> {
    let filter = match query.state.as_deref() {
        None => None,
        Some(raw) => Some(ServerState::parse(raw).ok_or_else(|| {
            ApiError::validation(format!(
                "state: must be one of cold, initializing, ready, degraded, dead; got `{}`",
                bounded_for_message(raw)
            ))
        })?),
    };
    let servers = state.gateway().servers().list(filter);
    Ok(web::Json(ServerList {
        mcp_servers: servers.iter().map(ServerSummary::from).collect(),
    }))
}

/// Group ids and server ids share one namespace: a server may not take a group's id.
fn refuse_group_ids(state: &ApiState, id: &ServerId) -> Result<(), ApiError> {
    match state.gateway().groups() {
        Some(groups) if groups.contains(id) => Err(ApiError::new(
            StatusCode::CONFLICT,
            names::MCP_SERVER_ALREADY_EXISTS,
            GroupServiceError::AlreadyExists(id.clone()).to_string(),
        )),
        _ => Ok(()),
    }
}

/// A member of a group is refused deletion until the operator takes it out of its groups, so
/// that no group loses a member without being told. (A member added between this check and the
/// delete is dropped from its group by the group service when the server goes.)
fn refuse_group_members(state: &ApiState, id: &ServerId) -> Result<(), ApiError> {
    let Some(groups) = state.gateway().groups() else {
        return Ok(());
    };
    let mut member_of = groups.groups_of(id);
    match member_of.len() {
        0 => Ok(()),
        1 => Err(GroupServiceError::ServerInGroup {
            server: id.clone(),
            group: member_of.remove(0),
        }
        .into()),
        _ => {
            let listed: Vec<String> = member_of.iter().map(|group| format!("`{group}`")).collect();
            Err(ApiError::new(
                StatusCode::CONFLICT,
                names::CONFLICT,
                format!(
                    "mcp server `{id}` is a member of groups {}; remove it from them first",
                    listed.join(", ")
                ),
            ))
        }
    }
}

/// Create an MCP server.
#[utoipa::path(
    post,
    path = "/api/mcp_servers",
    tag = "mcp_servers",
    operation_id = "create_mcp_server",
    request_body(content = CreateServerRequest, content_type = "application/json",
        description = "`mcp_server_id` plus the fields of a server in the configuration file. \
                       The body is parsed as JSON whatever its Content-Type says."),
    responses(
        (status = 201, description = "Created", body = ServerCreated),
        (status = 409, description = "A server or group with this id exists, or the id's tool name prefix is another server's or group's (McpServerAlreadyExistsError)", body = ErrorEnvelope),
        (status = 413, description = "The body is larger than the configured limit", body = ErrorEnvelope),
        (status = 422, description = "Malformed JSON, a missing or invalid id (one with the tool name separator too), a wrong field, `mode: group`", body = ErrorEnvelope),
    )
)]
pub(crate) async fn create_server(
    state: web::Data<ApiState>,
    body: Result<Bytes, actix_web::Error>,
) -> Result<HttpResponse, ApiError> {
    let bytes = body_bytes(body, state.settings().max_body_bytes)?;
    let spec = spec_for_create(&bytes, &definition_rules(state.gateway()))?;
    refuse_group_ids(&state, &spec.id)?;
    refuse_tool_name_conflicts(
        state.gateway(),
        &spec.id,
        "mcp_server_id",
        names::MCP_SERVER_ALREADY_EXISTS,
    )?;
    let snapshot = state.gateway().servers().register(spec).await?;
    Ok(HttpResponse::Created().json(ServerCreated {
        mcp_server_id: snapshot.id().to_string(),
        created: true,
    }))
}

/// Details of one MCP server: its definition (secrets masked), tools and health.
#[utoipa::path(
    get,
    path = "/api/mcp_servers/{id}",
    tag = "mcp_servers",
    operation_id = "get_mcp_server",
    params(("id" = crate::dto::McpServerId, Path, description = "The server's id")),
    responses(
        (status = 200, description = "The server", body = ServerDetails),
        (status = 404, description = "No such server (McpServerNotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn get_server(
    state: web::Data<ApiState>,
    id: web::Path<String>,
) -> Result<web::Json<ServerDetails>, ApiError> {
    let id = path_id(&id)?;
    Ok(web::Json(details(&state, &id)?))
}

/// Replace the definition of a server created over the API; a running server whose launch
/// settings changed is restarted.
#[utoipa::path(
    put,
    path = "/api/mcp_servers/{id}",
    tag = "mcp_servers",
    operation_id = "update_mcp_server",
    params(("id" = crate::dto::McpServerId, Path, description = "The server's id")),
    request_body(content = UpdateServerRequest, content_type = "application/json",
        description = "The whole new definition, as for create; `mcp_server_id` may be left out."),
    responses(
        (status = 200, description = "The updated server", body = ServerDetails),
        (status = 404, description = "No such server (McpServerNotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "The server is declared in the configuration file (ConflictError)", body = ErrorEnvelope),
        (status = 413, description = "The body is larger than the configured limit", body = ErrorEnvelope),
        (status = 422, description = "Malformed JSON, a wrong field, or a body id that differs from the path", body = ErrorEnvelope),
    )
)]
pub(crate) async fn update_server(
    state: web::Data<ApiState>,
    id: web::Path<String>,
    body: Result<Bytes, actix_web::Error>,
) -> Result<web::Json<ServerDetails>, ApiError> {
    let id = path_id(&id)?;
    let manager = state.gateway().servers();
    // An unknown server is reported as such before its body is judged.
    manager.snapshot(&id)?;
    let bytes = body_bytes(body, state.settings().max_body_bytes)?;
    let spec = spec_for_update(&id, &bytes, &definition_rules(state.gateway()))?;
    manager.update(spec).await?;
    Ok(web::Json(details(&state, &id)?))
}

/// Delete a server created over the API, stopping it first.
#[utoipa::path(
    delete,
    path = "/api/mcp_servers/{id}",
    tag = "mcp_servers",
    operation_id = "delete_mcp_server",
    params(("id" = crate::dto::McpServerId, Path, description = "The server's id")),
    responses(
        (status = 200, description = "Deleted", body = ServerDeleted),
        (status = 404, description = "No such server (McpServerNotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "The server is declared in the configuration file, or is a \
            member of a group (ConflictError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn delete_server(
    state: web::Data<ApiState>,
    id: web::Path<String>,
) -> Result<web::Json<ServerDeleted>, ApiError> {
    let id = path_id(&id)?;
    refuse_group_members(&state, &id)?;
    state.gateway().servers().delete(&id).await?;
    Ok(web::Json(ServerDeleted {
        mcp_server_id: id.to_string(),
        deleted: true,
    }))
}

/// Start a server now (the restart backoff does not apply); starting a ready server does
/// nothing.
#[utoipa::path(
    post,
    path = "/api/mcp_servers/{id}/start",
    tag = "mcp_servers",
    operation_id = "start_mcp_server",
    params(("id" = crate::dto::McpServerId, Path, description = "The server's id")),
    responses(
        (status = 200, description = "The started server", body = ServerDetails),
        (status = 404, description = "No such server (McpServerNotFoundError)", body = ErrorEnvelope),
        (status = 503, description = "The start failed; the message says why (McpServerUnavailableError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn start_server(
    state: web::Data<ApiState>,
    id: web::Path<String>,
) -> Result<web::Json<ServerDetails>, ApiError> {
    change_run_state(&state, &id, RunStateChange::Start).await
}

/// Stop a server; a server that is not running stays as it is.
#[utoipa::path(
    post,
    path = "/api/mcp_servers/{id}/stop",
    tag = "mcp_servers",
    operation_id = "stop_mcp_server",
    params(("id" = crate::dto::McpServerId, Path, description = "The server's id")),
    responses(
        (status = 200, description = "The stopped server", body = ServerDetails),
        (status = 404, description = "No such server (McpServerNotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn stop_server(
    state: web::Data<ApiState>,
    id: web::Path<String>,
) -> Result<web::Json<ServerDetails>, ApiError> {
    change_run_state(&state, &id, RunStateChange::Stop).await
}

/// What the start and stop endpoints ask of a server; both answer with its details afterwards.
#[derive(Clone, Copy)]
enum RunStateChange {
    Start,
    Stop,
}

async fn change_run_state(
    state: &ApiState,
    raw_id: &str,
    change: RunStateChange,
) -> Result<web::Json<ServerDetails>, ApiError> {
    let id = path_id(raw_id)?;
    let manager = state.gateway().servers();
    match change {
        RunStateChange::Start => manager.start(&id).await?,
        RunStateChange::Stop => manager.stop(&id).await?,
    };
    Ok(web::Json(details(state, &id)?))
}

/// The server's tools, without starting it: the live list once it has run, else its
/// predefined tools, else the list it gave before the gateway's last restart (under the same
/// definition); `source` says which, `learned_at` when the server listed them.
#[utoipa::path(
    get,
    path = "/api/mcp_servers/{id}/tools",
    tag = "mcp_servers",
    operation_id = "list_mcp_server_tools",
    params(("id" = crate::dto::McpServerId, Path, description = "The server's id")),
    responses(
        (status = 200, description = "The tools, unprefixed", body = ServerTools),
        (status = 404, description = "No such server (McpServerNotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn server_tools(
    state: web::Data<ApiState>,
    id: web::Path<String>,
) -> Result<web::Json<ServerTools>, ApiError> {
    let id = path_id(&id)?;
    let list = state.gateway().servers().tool_list(&id)?;
    Ok(web::Json(ServerTools {
        mcp_server_id: id.to_string(),
        tools: std::sync::Arc::unwrap_or_clone(list.tools),
        source: list.source.into(),
        learned_at: list.learned_at.map(|at| at.to_string()),
    }))
}

/// The server's health.
#[utoipa::path(
    get,
    path = "/api/mcp_servers/{id}/health",
    tag = "mcp_servers",
    operation_id = "get_mcp_server_health",
    params(("id" = crate::dto::McpServerId, Path, description = "The server's id")),
    responses(
        (status = 200, description = "The health status", body = HealthStatus),
        (status = 404, description = "No such server (McpServerNotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn server_health(
    state: web::Data<ApiState>,
    id: web::Path<String>,
) -> Result<web::Json<HealthStatus>, ApiError> {
    let id = path_id(&id)?;
    let snapshot = state.gateway().servers().snapshot(&id)?;
    Ok(web::Json(HealthStatus::from(&snapshot)))
}

#[derive(Debug, Deserialize)]
pub(crate) struct LogsQuery {
    lines: Option<String>,
}

/// Reads a count from the query: an integer, `default` when absent; above `max` is served as
/// `max`; below 1 or not an integer is refused, naming `parameter`.
fn requested_count(
    parameter: &str,
    raw: Option<&str>,
    default: usize,
    max: usize,
) -> Result<usize, ApiError> {
    let Some(raw) = raw else {
        return Ok(default);
    };
    let refuse = || {
        ApiError::validation(format!(
            "{parameter}: must be an integer from 1 to {max}; got `{}`",
            bounded_for_message(raw)
        ))
    };
    match raw.parse::<i64>() {
        Ok(count) if count < 1 => Err(refuse()),
        Ok(count) => Ok(usize::try_from(count).unwrap_or(max).min(max)),
        // A positive integer too large for i64 is still an integer above the maximum.
        Err(_) if !raw.is_empty() && raw.bytes().all(|byte| byte.is_ascii_digit()) => Ok(max),
        Err(_) => Err(refuse()),
    }
}

/// Reads `lines`: default 100, at most 1000.
fn requested_log_lines(raw: Option<&str>) -> Result<usize, ApiError> {
    requested_count("lines", raw, DEFAULT_LOG_LINES, MAX_LOG_LINES)
}

/// The most recent stderr lines of a server, oldest first.
#[utoipa::path(
    get,
    path = "/api/mcp_servers/{id}/logs",
    tag = "mcp_servers",
    operation_id = "get_mcp_server_logs",
    params(
        ("id" = crate::dto::McpServerId, Path, description = "The server's id"),
        ("lines" = Option<i64>, Query, minimum = 1,
         description = "How many of the most recent lines: default 100; above 1000 is served as 1000"),
    ),
    responses(
        (status = 200, description = "The lines; empty when the server never ran", body = ServerLogs),
        (status = 404, description = "No such server (McpServerNotFoundError)", body = ErrorEnvelope),
        (status = 422, description = "`lines` is below 1 or not an integer", body = ErrorEnvelope),
    )
)]
pub(crate) async fn server_logs(
    state: web::Data<ApiState>,
    id: web::Path<String>,
    query: web::Query<LogsQuery>,
) -> Result<impl Responder, ApiError> {
    let id = path_id(&id)?;
    let manager = state.gateway().servers();
    // An unknown server is reported as such, whatever `lines` says.
    if !manager.contains(&id) {
        return Err(ApiError::server_not_found(id.as_str()));
    }
    let lines = requested_log_lines(query.lines.as_deref())?;
    let logs: Vec<_> = manager
        .logs(&id, lines)?
        .into_iter()
        .map(Into::into)
        .collect();
    Ok(web::Json(ServerLogs {
        count: logs.len(),
        logs,
        mcp_server_id: id.to_string(),
    }))
}

#[derive(Debug, Deserialize)]
pub(crate) struct HistoryQuery {
    limit: Option<String>,
    cursor: Option<String>,
}

impl HistoryQuery {
    /// The newest `limit` invocations.
    pub(crate) fn first(limit: usize) -> Self {
        Self {
            limit: Some(limit.to_string()),
            cursor: None,
        }
    }
}

/// Reads `cursor`: the decimal `next_cursor` of a previous page, so a non-negative integer.
fn requested_cursor(raw: Option<&str>) -> Result<Option<u64>, ApiError> {
    raw.map(|raw| {
        raw.parse::<u64>().map_err(|_| {
            ApiError::validation(format!(
                "cursor: must be the `next_cursor` of a previous page, a non-negative integer; \
                 got `{}`; leave it out for the newest page",
                bounded_for_message(raw)
            ))
        })
    })
    .transpose()
}

/// The server's tool invocations, newest first, a page at a time.
#[utoipa::path(
    get,
    path = "/api/mcp_servers/{id}/tools/history",
    tag = "mcp_servers",
    operation_id = "get_mcp_server_tool_history",
    params(
        ("id" = crate::dto::McpServerId, Path, description = "The server's id"),
        ("limit" = Option<i64>, Query, minimum = 1,
         description = "How many invocations per page: default 50; above 500 is served as 500"),
        ("cursor" = Option<String>, Query, pattern = "^[0-9]{1,19}$",
         description = "The `next_cursor` of the previous page; leave it out for the newest page"),
    ),
    responses(
        (status = 200, description = "A page of invocations, newest first; `next_cursor` is null \
            on the last page", body = ToolHistory),
        (status = 404, description = "No such server (McpServerNotFoundError)", body = ErrorEnvelope),
        (status = 422, description = "`limit` is below 1 or not an integer, or `cursor` is not a \
            non-negative integer", body = ErrorEnvelope),
    )
)]
pub(crate) async fn tool_history(
    state: web::Data<ApiState>,
    id: web::Path<String>,
    query: web::Query<HistoryQuery>,
) -> Result<web::Json<ToolHistory>, ApiError> {
    let id = path_id(&id)?;
    // An unknown server is reported as such, whatever the query says.
    if !state.gateway().servers().contains(&id) {
        return Err(ApiError::server_not_found(id.as_str()));
    }
    let limit = requested_count(
        "limit",
        query.limit.as_deref(),
        DEFAULT_HISTORY_LIMIT,
        MAX_HISTORY_LIMIT,
    )?;
    let before = requested_cursor(query.cursor.as_deref())?;
    let page = state
        .gateway()
        .history()
        .page(&id, limit, before)
        .await
        .map_err(|error| ApiError::internal(&error))?;
    Ok(web::Json(ToolHistory {
        mcp_server_id: id.to_string(),
        history: page
            .entries
            .into_iter()
            .map(InvocationEntry::from)
            .collect(),
        next_cursor: page.next_cursor.map(|cursor| cursor.to_string()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_follow_the_four_rules() {
        assert_eq!(requested_log_lines(None).unwrap(), 100);
        assert_eq!(requested_log_lines(Some("1")).unwrap(), 1);
        assert_eq!(requested_log_lines(Some("1000")).unwrap(), 1000);
        assert_eq!(requested_log_lines(Some("1001")).unwrap(), 1000);
        assert_eq!(requested_log_lines(Some("+7")).unwrap(), 7);
        assert_eq!(
            requested_log_lines(Some("99999999999999999999999")).unwrap(),
            1000
        );
        for bad in [
            "0",
            "-1",
            "-99999999999999999999999",
            "abc",
            "1.5",
            "",
            " 5",
            "1e3",
            "0x10",
        ] {
            let error = requested_log_lines(Some(bad)).unwrap_err();
            assert_eq!(error.status().as_u16(), 422, "{bad:?}");
            assert!(error.message().starts_with("lines: "), "{bad:?}");
        }
    }

    #[test]
    fn history_limits_default_to_50_and_stop_at_500() {
        let limit = |raw| requested_count("limit", raw, DEFAULT_HISTORY_LIMIT, MAX_HISTORY_LIMIT);
        assert_eq!(limit(None).unwrap(), 50);
        assert_eq!(limit(Some("1")).unwrap(), 1);
        assert_eq!(limit(Some("500")).unwrap(), 500);
        assert_eq!(limit(Some("501")).unwrap(), 500);
        assert_eq!(limit(Some("99999999999999999999999")).unwrap(), 500);
        for bad in ["0", "-3", "x", "2.5", ""] {
            let error = limit(Some(bad)).unwrap_err();
            assert_eq!(error.status().as_u16(), 422, "{bad:?}");
            assert!(error.message().starts_with("limit: "), "{bad:?}");
        }
    }

    #[test]
    fn history_cursors_are_non_negative_integers() {
        assert_eq!(requested_cursor(None).unwrap(), None);
        assert_eq!(requested_cursor(Some("0")).unwrap(), Some(0));
        assert_eq!(requested_cursor(Some("42")).unwrap(), Some(42));
        assert_eq!(
            requested_cursor(Some("18446744073709551615")).unwrap(),
            Some(u64::MAX)
        );
        for bad in ["-1", "abc", "1.5", "", "18446744073709551616", " 4"] {
            let error = requested_cursor(Some(bad)).unwrap_err();
            assert_eq!(error.status().as_u16(), 422, "{bad:?}");
            assert!(error.message().starts_with("cursor: "), "{bad:?}");
        }
    }
}
