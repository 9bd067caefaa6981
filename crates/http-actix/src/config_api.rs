//! `/api/config`: the running configuration (secrets masked), reloading the file, exporting,
//! backing it up, and its difference from what runs.
//!
//! This module calls the configuration service and turns its answers and errors into the API's
//! shapes. What a valid file is, what a reload changes and which values are secrets are the
//! service's and the configuration domain's business; nothing here reads the file or masks a
//! value itself.
//!
//! A gateway composed without a configuration service answers 404 on every path under
//! `/api/config`, whatever the method, so that a client can tell "not available here" from
//! "wrong method".

use std::sync::Arc;

use actix_web::{Resource, web};
use mcpgw_gateway::{ConfigDiffView, ConfigService, ReloadReport, ReloadTrigger};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorEnvelope};
use crate::state::ApiState;

/// The configuration service, or the 404 of a gateway composed without one.
fn service(state: &ApiState) -> Result<&Arc<ConfigService>, ApiError> {
    state
        .gateway()
        .config()
        .ok_or_else(ApiError::config_not_enabled)
}

async fn not_enabled() -> ApiError {
    ApiError::config_not_enabled()
}

/// Mounts the configuration routes; without a configuration service, one resource that
/// answers 404 for every path and method under `/api/config` instead.
pub(crate) fn mount(cfg: &mut web::ServiceConfig, mounter: &crate::Mounter) {
    if mounter.state.gateway().config().is_none() {
        cfg.service(
            Resource::new(["/api/config", "/api/config/{tail:.*}"])
                .default_service(web::to(not_enabled)),
        );
        return;
    }
    cfg.service(
        mounter
            .resource(web::resource("/api/config"), "GET")
            .route(web::get().to(get_config)),
    )
    .service(
        mounter
            .resource(web::resource("/api/config/reload"), "POST")
            .route(web::post().to(reload_config)),
    )
    .service(
        mounter
            .resource(web::resource("/api/config/export"), "POST")
            .route(web::post().to(export_config)),
    )
    .service(
        mounter
            .resource(web::resource("/api/config/backup"), "POST")
            .route(web::post().to(backup_config)),
    )
    .service(
        mounter
            .resource(web::resource("/api/config/diff"), "GET")
            .route(web::get().to(diff_config)),
    );
}

// ---------------------------------------------------------------------------------------------
// Wire formats
// ---------------------------------------------------------------------------------------------

/// The running configuration.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RunningConfig {
    /// The configuration in the file's shape, with every secret (`env` values, `headers`,
    /// tokens, keys, passwords) replaced by `"***"`.
    #[schema(value_type = Object, example = json!({"mcp_servers": {"api": {"mode": "remote",
        "endpoint": "https://host/mcp", "headers": {"Authorization": "***"}}}}))]
    pub config: Value,
    /// The configuration file the gateway started from; `null` when it started without one.
    #[schema(example = "gateway.yaml")]
    pub path: Option<String>,
}

/// What a reload changed, by server or group id (each list sorted).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ConfigReloadResult {
    /// Declared in the file and registered by this reload.
    #[schema(example = json!(["math"]))]
    pub added: Vec<String>,
    /// Gone from the file and removed by this reload (stopped first when running).
    pub removed: Vec<String>,
    /// Declared with another definition and replaced by this reload.
    pub updated: Vec<String>,
    /// Declared as before; left running as they were.
    pub unchanged: Vec<String>,
    /// Top-level sections that differ but take effect only at the next start (`auth`,
    /// `rate_limit`, ...).
    #[schema(example = json!(["rate_limit"]))]
    pub restart_required: Vec<String>,
}

impl From<ReloadReport> for ConfigReloadResult {
    fn from(report: ReloadReport) -> Self {
        Self {
            added: report.added,
            removed: report.removed,
            updated: report.updated,
            unchanged: report.unchanged,
            restart_required: report.restart_required,
        }
    }
}

/// The running configuration as YAML.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ConfigExport {
    /// A configuration file that the gateway accepts and that describes what runs now. Secrets
    /// are masked as in `GET /api/config`.
    #[schema(
        example = "mcp_servers:\n  math:\n    mode: subprocess\n    command: [python3, -m, math_server]\n"
    )]
    pub yaml: String,
}

/// Where a backup was written.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ConfigBackup {
    /// The newest backup, `<config>.bak1`; older ones moved up to `.bak5`.
    #[schema(example = "/etc/mcpgw/gateway.yaml.bak1")]
    pub path: String,
}

/// How one section's entries differ between the file and what runs, by id (each list sorted).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ConfigSectionDiff {
    /// In the file, not running.
    pub added: Vec<String>,
    /// Running, gone from the file.
    pub removed: Vec<String>,
    /// In both, with another definition in the file.
    pub updated: Vec<String>,
}

impl From<mcpgw_config::SectionChanges> for ConfigSectionDiff {
    fn from(changes: mcpgw_config::SectionChanges) -> Self {
        Self {
            added: changes.added,
            removed: changes.removed,
            updated: changes.updated,
        }
    }
}

/// What a reload would change, section by section.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ConfigChangeSummary {
    /// `mcp_servers` entries that are servers.
    pub servers: ConfigSectionDiff,
    /// `mcp_servers` entries of mode `group`.
    pub groups: ConfigSectionDiff,
    /// `endpoints` entries: curated endpoints.
    pub endpoints: ConfigSectionDiff,
    /// Top-level sections that differ and take effect only at the next start.
    pub restart_required: Vec<String>,
}

/// The file on disk against the running configuration.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ConfigDiff {
    /// A unified diff from the running configuration to the file, secrets masked on both sides;
    /// empty when they agree.
    #[schema(
        example = "--- gateway.yaml\n+++ gateway.yaml\n@@ -1,3 +1,3 @@\n mcp_servers:\n   math:\n-    idle_ttl_s: 300\n+    idle_ttl_s: 600\n"
    )]
    pub diff: String,
    pub changed: ConfigChangeSummary,
}

impl From<ConfigDiffView> for ConfigDiff {
    fn from(view: ConfigDiffView) -> Self {
        Self {
            diff: view.unified,
            changed: ConfigChangeSummary {
                servers: view.changes.servers.into(),
                groups: view.changes.groups.into(),
                endpoints: view.changes.endpoints.into(),
                restart_required: view.changes.restart_required,
            },
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

/// The running configuration, with every secret replaced by `"***"`.
#[utoipa::path(
    get,
    path = "/api/config",
    tag = "config",
    operation_id = "get_config",
    responses(
        (status = 200, description = "The running configuration, secrets masked", body = RunningConfig),
        (status = 401, description = "Authentication is on and the request has no valid credentials", body = ErrorEnvelope),
        (status = 403, description = "The caller lacks `config:read`", body = ErrorEnvelope),
        (status = 404, description = "The gateway was composed without a configuration service (NotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn get_config(
    state: web::Data<ApiState>,
) -> Result<web::Json<RunningConfig>, ApiError> {
    let config = service(&state)?.sanitized();
    Ok(web::Json(RunningConfig {
        config,
        path: state.gateway().info().config_path.clone(),
    }))
}

/// Re-read the configuration file and apply what changed. The whole file is validated first:
/// an invalid file changes nothing. Servers that did not change keep running.
#[utoipa::path(
    post,
    path = "/api/config/reload",
    tag = "config",
    operation_id = "reload_config",
    request_body(content = Option<Object>, content_type = "application/json",
        description = "Ignored; may be empty."),
    responses(
        (status = 200, description = "Applied; what was added, removed, updated and left unchanged", body = ConfigReloadResult),
        (status = 401, description = "Authentication is on and the request has no valid credentials", body = ErrorEnvelope),
        (status = 403, description = "The caller lacks `config:reload`", body = ErrorEnvelope),
        (status = 404, description = "The gateway was composed without a configuration service (NotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "The gateway was started without a configuration file (ConflictError)", body = ErrorEnvelope),
        (status = 422, description = "The file is invalid; nothing changed. The message lists every \
            error, one per line, as `file:line:column: key.path: what is wrong` (ValidationError)", body = ErrorEnvelope),
        (status = 503, description = "The file could not be read; the message names it (ServiceUnavailableError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn reload_config(
    state: web::Data<ApiState>,
) -> Result<web::Json<ConfigReloadResult>, ApiError> {
    let report = service(&state)?.reload(ReloadTrigger::Api).await?;
    Ok(web::Json(report.into()))
}

/// The running configuration as a YAML configuration file, secrets masked.
#[utoipa::path(
    post,
    path = "/api/config/export",
    tag = "config",
    operation_id = "export_config",
    request_body(content = Option<Object>, content_type = "application/json",
        description = "Ignored; may be empty."),
    responses(
        (status = 200, description = "The configuration as YAML", body = ConfigExport),
        (status = 401, description = "Authentication is on and the request has no valid credentials", body = ErrorEnvelope),
        (status = 403, description = "The caller lacks `config:export`", body = ErrorEnvelope),
        (status = 404, description = "The gateway was composed without a configuration service (NotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn export_config(
    state: web::Data<ApiState>,
) -> Result<web::Json<ConfigExport>, ApiError> {
    let yaml = service(&state)?.export().await;
    Ok(web::Json(ConfigExport { yaml }))
}

/// Copy the configuration file to `<file>.bak1` next to it, moving older backups up to
/// `.bak5` (the oldest beyond that is dropped).
#[utoipa::path(
    post,
    path = "/api/config/backup",
    tag = "config",
    operation_id = "backup_config",
    request_body(content = Option<Object>, content_type = "application/json",
        description = "Ignored; may be empty."),
    responses(
        (status = 200, description = "Written; the path of the new backup", body = ConfigBackup),
        (status = 401, description = "Authentication is on and the request has no valid credentials", body = ErrorEnvelope),
        (status = 403, description = "The caller lacks `config:backup`", body = ErrorEnvelope),
        (status = 404, description = "The gateway was composed without a configuration service (NotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "The gateway was started without a configuration file (ConflictError)", body = ErrorEnvelope),
        (status = 503, description = "The file could not be read, or its directory cannot be written; the message names it (ServiceUnavailableError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn backup_config(
    state: web::Data<ApiState>,
) -> Result<web::Json<ConfigBackup>, ApiError> {
    let path = service(&state)?.backup().await?;
    Ok(web::Json(ConfigBackup { path }))
}

/// The configuration file on disk against the running configuration: a unified diff, and the
/// servers and groups a reload would add, remove or update.
#[utoipa::path(
    get,
    path = "/api/config/diff",
    tag = "config",
    operation_id = "diff_config",
    responses(
        (status = 200, description = "The differences; an empty `diff` and empty lists when the file matches what runs", body = ConfigDiff),
        (status = 401, description = "Authentication is on and the request has no valid credentials", body = ErrorEnvelope),
        (status = 403, description = "The caller lacks `config:read`", body = ErrorEnvelope),
        (status = 404, description = "The gateway was composed without a configuration service (NotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "The gateway was started without a configuration file (ConflictError)", body = ErrorEnvelope),
        (status = 422, description = "The file on disk is invalid; the message lists every error, one per line (ValidationError)", body = ErrorEnvelope),
        (status = 503, description = "The file could not be read; the message names it (ServiceUnavailableError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn diff_config(
    state: web::Data<ApiState>,
) -> Result<web::Json<ConfigDiff>, ApiError> {
    let view = service(&state)?.diff().await?;
    Ok(web::Json(view.into()))
}
