//! The configuration management use cases: reload the configuration file into the running
//! gateway, show the running configuration with its secrets masked, export the current state as
//! a file, back the file up, and compare the file on disk with what runs.
//!
//! A reload validates the whole file before it changes anything: an invalid file, or one that
//! declares an id a server or group created at run time already holds, changes nothing. Then
//! only the difference is applied: servers and groups the file dropped are stopped and removed,
//! new ones are registered as at start-up, changed servers get their new definition (the
//! manager restarts a running one only when its launch settings changed, so a new description
//! or `idle_ttl_s` keeps the session), and everything the file did not change is left alone.
//! The file's curated endpoints (`endpoints`) are made what the file says, as a whole; an
//! endpoint created over the API keeps its name, so a file that declares it changes nothing.
//! Sections other than `mcp_servers` and `endpoints` are recorded but take effect at the next
//! start.
//!
//! The file itself is reached only through the [`ConfigFile`] port; this module never touches
//! the file system.

use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use mcpgw_config::{
    ConfigChanges, ConfigErrors, ConfigFile, EndpointDefinition, GatewayConfig, GroupDefinition,
    GroupMember, ServerDefinition,
};
use mcpgw_core::{
    DomainEvent, EndpointSpec, ErrorKind, EventSink, ServerId, ServerManager, ServerOrigin,
    ServerSpec,
};
use mcpgw_groups::GroupSpec;

use crate::endpoints::EndpointService;
use crate::groups::{GroupService, GroupView, group_spec_from_config};

/// Looks up the variables that `${VAR}` references in the file name.
pub type Environment = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// How long the watcher waits after the file changed before it reads it, so that an editor's
/// save (truncate, write, rename) is read once and whole.
pub const WATCH_DEBOUNCE: Duration = Duration::from_millis(200);

/// Lines of context around each change of the unified diff.
const DIFF_CONTEXT_LINES: usize = 3;

/// How many backups of the file are kept (`.bak1` is the newest).
const BACKUPS_KEPT: usize = 5;

/// What asked for a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadTrigger {
    /// `POST /api/config/reload`.
    Api,
    /// SIGHUP.
    Signal,
    /// The file changed on disk (`config_reload.watch: true`).
    Watch,
}

impl ReloadTrigger {
    pub fn as_str(self) -> &'static str {
        match self {
            ReloadTrigger::Api => "api",
            ReloadTrigger::Signal => "signal",
            ReloadTrigger::Watch => "watch",
        }
    }
}

/// What a reload did, by id; servers and groups together, each list sorted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadReport {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub updated: Vec<String>,
    pub unchanged: Vec<String>,
    /// Top-level sections that changed but take effect only at the next start.
    pub restart_required: Vec<String>,
}

/// The file on disk compared with the running configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigDiffView {
    /// Unified diff from the running text to the text on disk; empty when they are equal.
    pub unified: String,
    /// What a reload would change.
    pub changes: ConfigChanges,
}

/// Why a configuration use case was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigServiceError {
    #[error(
        "the gateway was started without a configuration file; start it with --config FILE to \
         reload, back up or compare its configuration"
    )]
    NoFile,
    /// The file could not be read or backed up; the message names the file.
    #[error("{0}")]
    Read(String),
    #[error("the configuration file is invalid and nothing was changed; fix it and reload: {0}")]
    Invalid(ConfigErrors),
    /// The file declares an id that a server or group created at run time holds; nothing was
    /// changed.
    #[error("{0}")]
    Conflict(String),
    /// A step of applying a valid file failed; the steps before it were applied.
    #[error("{0}")]
    Apply(String),
}

impl ConfigServiceError {
    /// The error class the adapters map to statuses: 409, 503, 422, 500.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ConfigServiceError::NoFile | ConfigServiceError::Conflict(_) => ErrorKind::Conflict,
            ConfigServiceError::Read(_) => ErrorKind::Unavailable,
            ConfigServiceError::Invalid(_) => ErrorKind::Invalid,
            ConfigServiceError::Apply(_) => ErrorKind::Internal,
        }
    }

    /// The `error` name of the API's error envelope.
    pub fn name(&self) -> &'static str {
        match self {
            ConfigServiceError::NoFile | ConfigServiceError::Conflict(_) => "ConflictError",
            ConfigServiceError::Read(_) => "ServiceUnavailableError",
            ConfigServiceError::Invalid(_) => "ValidationError",
            ConfigServiceError::Apply(_) => "InternalServerError",
        }
    }
}

/// The configuration in effect and the text it was read from.
struct Running {
    config: GatewayConfig,
    text: String,
}

/// Every change a reload makes, worked out (and checked) before the first one is made.
struct Plan {
    removed_groups: Vec<ServerId>,
    removed_servers: Vec<ServerId>,
    added_servers: Vec<ServerSpec>,
    updated_servers: Vec<ServerSpec>,
    added_groups: Vec<GroupSpec>,
    updated_groups: Vec<GroupSpec>,
}

/// The configuration use cases. Share it as `Arc<ConfigService>`.
pub struct ConfigService {
    servers: ServerManager,
    groups: Option<Arc<GroupService>>,
    endpoints: Option<Arc<EndpointService>>,
    events: Arc<dyn EventSink>,
    /// What a reloaded file may name beyond the schema (the discovery source types there are).
    parse_options: mcpgw_config::ParseOptions,
    environment: Environment,
    file: Option<Arc<dyn ConfigFile>>,
    running: RwLock<Running>,
    /// One reload at a time, so two triggers never apply interleaved halves of two files.
    reloads: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for ConfigService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigService")
            .field("file", &self.file.as_ref().map(|file| file.display_name()))
            .finish_non_exhaustive()
    }
}

fn server_id(raw: &str) -> Result<ServerId, ConfigServiceError> {
    // Parsed configurations hold valid ids only; this guards against a broken invariant.
    ServerId::parse(raw).map_err(|error| {
        ConfigServiceError::Apply(format!(
            "the configuration names an invalid id `{raw}`: {error}"
        ))
    })
}

fn step_failed(step: &str, error: &dyn std::fmt::Display) -> ConfigServiceError {
    ConfigServiceError::Apply(format!(
        "{step} failed: {error}; the steps before it were applied, reload again to apply the rest"
    ))
}

fn group_definition_of(view: &GroupView) -> GroupDefinition {
    GroupDefinition {
        id: view.group_id.clone(),
        description: view.description.clone(),
        strategy: view.strategy,
        min_healthy: view.min_healthy,
        members: view
            .members
            .iter()
            .map(|member| GroupMember {
                id: member.id.clone(),
                weight: member.weight,
                priority: member.priority,
            })
            .collect(),
    }
}

fn sorted(lists: [&[String]; 2]) -> Vec<String> {
    let mut all: Vec<String> = lists.into_iter().flatten().cloned().collect();
    all.sort();
    all
}

impl ConfigService {
    /// A service for a gateway running `running`; without [`ConfigService::with_file`] every
    /// use case that needs the file answers [`ConfigServiceError::NoFile`].
    pub fn new(
        servers: ServerManager,
        events: Arc<dyn EventSink>,
        environment: Environment,
        running: GatewayConfig,
    ) -> Self {
        Self {
            servers,
            groups: None,
            endpoints: None,
            events,
            parse_options: mcpgw_config::ParseOptions::default(),
            environment,
            file: None,
            running: RwLock::new(Running {
                config: running,
                text: String::new(),
            }),
            reloads: tokio::sync::Mutex::new(()),
        }
    }

    /// The file the running configuration was read from, and its text at that moment.
    #[must_use]
    pub fn with_file(mut self, file: Arc<dyn ConfigFile>, text: String) -> Self {
        self.file = Some(file);
        self.running_mut().text = text;
        self
    }

    /// What a reloaded file may name beyond the schema: the discovery source types the gateway
    /// can build (the bundled ones without it).
    #[must_use]
    pub fn with_parse_options(mut self, options: mcpgw_config::ParseOptions) -> Self {
        self.parse_options = options;
        self
    }

    /// What a definition may name beyond the schema: the discovery source types and launch
    /// modes this gateway can build. REST bodies and reloaded files are read with them.
    pub fn parse_options(&self) -> &mcpgw_config::ParseOptions {
        &self.parse_options
    }

    /// The groups service that runs the file's groups (without it, groups are not applied).
    #[must_use]
    pub fn with_groups(mut self, groups: Arc<GroupService>) -> Self {
        self.groups = Some(groups);
        self
    }

    /// The curated endpoints service that serves the file's endpoints (without it, the file's
    /// endpoints are not applied by a reload).
    #[must_use]
    pub fn with_endpoints(mut self, endpoints: Arc<EndpointService>) -> Self {
        self.endpoints = Some(endpoints);
        self
    }

    fn running_ref(&self) -> std::sync::RwLockReadGuard<'_, Running> {
        self.running.read().unwrap_or_else(|p| p.into_inner())
    }

    fn running_mut(&self) -> std::sync::RwLockWriteGuard<'_, Running> {
        self.running.write().unwrap_or_else(|p| p.into_inner())
    }

    fn file(&self) -> Result<&Arc<dyn ConfigFile>, ConfigServiceError> {
        self.file.as_ref().ok_or(ConfigServiceError::NoFile)
    }

    fn publish(&self, event: DomainEvent) {
        self.events.publish(self.servers.clock().wall(), event);
    }

    /// The configuration in effect (as of the start or the last successful reload).
    pub fn running(&self) -> GatewayConfig {
        self.running_ref().config.clone()
    }

    /// The configuration in effect with every secret masked, for display.
    pub fn sanitized(&self) -> serde_json::Value {
        mcpgw_config::sanitized(&self.running_ref().config)
    }

    /// Reads the file and parses it with the environment.
    async fn read_file(&self) -> Result<(GatewayConfig, String), ConfigServiceError> {
        let name = self.file()?.display_name();
        let text = self.read_text().await?;
        self.parse_text(&name, text)
    }

    async fn read_text(&self) -> Result<String, ConfigServiceError> {
        let file = self.file()?;
        file.read().await.map_err(|error| {
            ConfigServiceError::Read(format!(
                "cannot read the configuration file {}: {error}; check that it exists and is \
                 readable",
                file.display_name()
            ))
        })
    }

    fn parse_text(
        &self,
        name: &str,
        text: String,
    ) -> Result<(GatewayConfig, String), ConfigServiceError> {
        let config = mcpgw_config::parse_with(name, &text, &*self.environment, &self.parse_options)
            .map_err(ConfigServiceError::Invalid)?;
        Ok((config, text))
    }

    /// Applies the file's changes to the running gateway. See the module documentation; an
    /// error means nothing changed, except [`ConfigServiceError::Apply`], after which the
    /// running configuration stays the old one, so that the next reload applies what is left.
    pub async fn reload(&self, trigger: ReloadTrigger) -> Result<ReloadReport, ConfigServiceError> {
        let _reload = self.reloads.lock().await;
        match self.reload_locked().await {
            Ok(report) => {
                tracing::info!(
                    trigger = trigger.as_str(),
                    added = ?report.added,
                    removed = ?report.removed,
                    updated = ?report.updated,
                    restart_required = ?report.restart_required,
                    "configuration reloaded"
                );
                self.publish(DomainEvent::ConfigurationReloaded {
                    trigger: trigger.as_str(),
                    added: report.added.clone(),
                    removed: report.removed.clone(),
                    updated: report.updated.clone(),
                    restart_required: report.restart_required.clone(),
                });
                Ok(report)
            }
            Err(error) => {
                tracing::warn!(trigger = trigger.as_str(), %error, "configuration reload refused");
                self.publish(DomainEvent::ConfigurationReloadFailed {
                    trigger: trigger.as_str(),
                    error: error.to_string(),
                });
                Err(error)
            }
        }
    }

    async fn reload_locked(&self) -> Result<ReloadReport, ConfigServiceError> {
        let (new, text) = self.read_file().await?;
        let old = self.running();
        let changes = mcpgw_config::changes(&old, &new);
        let plan = self.plan(&new, &changes)?;
        let endpoints = self.endpoint_plan(&new, &changes)?;
        self.apply(plan).await?;
        self.apply_endpoints(endpoints, &changes)?;
        {
            let mut running = self.running_mut();
            running.config = new;
            running.text = text;
        }
        let servers = &changes.servers;
        let groups = &changes.groups;
        Ok(ReloadReport {
            added: sorted([&servers.added, &groups.added]),
            removed: sorted([&servers.removed, &groups.removed]),
            updated: sorted([&servers.updated, &groups.updated]),
            unchanged: sorted([&servers.unchanged, &groups.unchanged]),
            restart_required: changes.restart_required.clone(),
        })
    }

    /// Builds every definition the reload needs and refuses ids held by servers or groups of
    /// another origin, before anything is changed.
    fn plan(
        &self,
        new: &GatewayConfig,
        changes: &ConfigChanges,
    ) -> Result<Plan, ConfigServiceError> {
        let server_spec = |raw: &str| -> Result<ServerSpec, ConfigServiceError> {
            let id = server_id(raw)?;
            new.mcp_servers
                .get(raw)
                .and_then(|definition| definition.to_server_spec(id, ServerOrigin::Config))
                .ok_or_else(|| {
                    ConfigServiceError::Apply(format!(
                        "`{raw}` is not a server in the new configuration"
                    ))
                })
        };
        let group_spec = |raw: &str| -> Result<GroupSpec, ConfigServiceError> {
            let id = server_id(raw)?;
            let definition = new
                .mcp_servers
                .get(raw)
                .and_then(|definition| definition.to_group_definition(id))
                .ok_or_else(|| {
                    ConfigServiceError::Apply(format!(
                        "`{raw}` is not a group in the new configuration"
                    ))
                })?;
            group_spec_from_config(&definition).map_err(|error| {
                ConfigServiceError::Apply(format!("group `{raw}` cannot be built: {error}"))
            })
        };
        let plan = Plan {
            removed_groups: changes
                .groups
                .removed
                .iter()
                .map(|raw| server_id(raw))
                .collect::<Result<_, _>>()?,
            removed_servers: changes
                .servers
                .removed
                .iter()
                .map(|raw| server_id(raw))
                .collect::<Result<_, _>>()?,
            added_servers: changes
                .servers
                .added
                .iter()
                .map(|raw| server_spec(raw))
                .collect::<Result<_, _>>()?,
            updated_servers: changes
                .servers
                .updated
                .iter()
                .map(|raw| server_spec(raw))
                .collect::<Result<_, _>>()?,
            added_groups: changes
                .groups
                .added
                .iter()
                .map(|raw| group_spec(raw))
                .collect::<Result<_, _>>()?,
            updated_groups: changes
                .groups
                .updated
                .iter()
                .map(|raw| group_spec(raw))
                .collect::<Result<_, _>>()?,
        };
        let added = plan
            .added_servers
            .iter()
            .map(|spec| &spec.id)
            .chain(plan.added_groups.iter().map(|spec| &spec.id));
        let mut clashes = Vec::new();
        for id in added {
            if let Some(holder) = self.holder_of_another_origin(id) {
                clashes.push(format!("`{id}` ({holder})"));
            }
        }
        if !clashes.is_empty() {
            return Err(ConfigServiceError::Conflict(format!(
                "the configuration file declares ids that servers or groups created at run time \
                 already hold: {}; server and group ids share one namespace, so rename them in \
                 the file or delete the others over the API, then reload (nothing was changed)",
                clashes.join(", ")
            )));
        }
        if self.groups.is_none()
            && !(changes.groups.added.is_empty()
                && changes.groups.removed.is_empty()
                && changes.groups.updated.is_empty())
        {
            tracing::warn!("the configuration's groups changed, but this gateway runs no groups");
        }
        Ok(plan)
    }

    /// The file's curated endpoints, when this gateway serves endpoints; refuses names that
    /// endpoints created over the API hold, before anything is changed.
    fn endpoint_plan(
        &self,
        new: &GatewayConfig,
        changes: &ConfigChanges,
    ) -> Result<Option<Vec<EndpointSpec>>, ConfigServiceError> {
        let Some(endpoints) = &self.endpoints else {
            if !changes.endpoints.is_empty() {
                tracing::warn!(
                    "the configuration's curated endpoints changed, but this gateway serves no \
                     curated endpoints"
                );
            }
            return Ok(None);
        };
        let specs = new.to_endpoint_specs();
        let held: Vec<String> = specs
            .iter()
            .filter_map(|spec| {
                let existing = endpoints.get(spec.name.as_str())?;
                (existing.origin != ServerOrigin::Config)
                    .then(|| format!("`{}` (of origin {})", spec.name, existing.origin.as_str()))
            })
            .collect();
        if !held.is_empty() {
            return Err(ConfigServiceError::Conflict(format!(
                "the configuration file declares curated endpoints whose names endpoints created \
                 at run time already hold: {}; rename them in the file or delete the others \
                 over the API, then reload (nothing was changed)",
                held.join(", ")
            )));
        }
        Ok(Some(specs))
    }

    /// Makes the file's curated endpoints `specs` (the API's stay as they are).
    fn apply_endpoints(
        &self,
        specs: Option<Vec<EndpointSpec>>,
        changes: &ConfigChanges,
    ) -> Result<(), ConfigServiceError> {
        let (Some(endpoints), Some(specs)) = (&self.endpoints, specs) else {
            return Ok(());
        };
        endpoints
            .apply_config(specs)
            .map_err(|error| step_failed("applying the curated endpoints", &error))?;
        let section = &changes.endpoints;
        if !section.is_empty() {
            tracing::info!(
                added = ?section.added,
                removed = ?section.removed,
                updated = ?section.updated,
                "curated endpoints reloaded"
            );
        }
        Ok(())
    }

    /// What holds `id` and is not the file's own (so the reload may not take it over).
    fn holder_of_another_origin(&self, id: &ServerId) -> Option<String> {
        if let Ok(snapshot) = self.servers.snapshot(id)
            && snapshot.spec.origin != ServerOrigin::Config
        {
            return Some(format!(
                "an mcp server of origin {}",
                snapshot.spec.origin.as_str()
            ));
        }
        let groups = self.groups.as_ref()?;
        match groups.get(id) {
            Ok(view) if view.origin != ServerOrigin::Config.as_str() => {
                Some(format!("a group of origin {}", view.origin))
            }
            _ => None,
        }
    }

    /// Applies a plan in the order that keeps every group's members registered: groups that go
    /// first, then servers that go, new servers, changed servers, and finally new and changed
    /// groups (whose members now all exist). Each step tolerates the state a failed earlier
    /// reload left, so that reloading again converges.
    async fn apply(&self, plan: Plan) -> Result<(), ConfigServiceError> {
        if let Some(groups) = &self.groups {
            for id in &plan.removed_groups {
                if groups.contains(id) {
                    groups
                        .unregister(id)
                        .await
                        .map_err(|error| step_failed(&format!("removing group `{id}`"), &error))?;
                }
            }
        }
        for id in &plan.removed_servers {
            match self.servers.snapshot(id) {
                Ok(snapshot) if snapshot.spec.origin == ServerOrigin::Config => {
                    self.servers.unregister(id).await.map_err(|error| {
                        step_failed(&format!("removing mcp server `{id}`"), &error)
                    })?;
                }
                Ok(_) => tracing::warn!(
                    server = %id,
                    "a server the configuration file dropped is now managed over the API; it is kept"
                ),
                Err(_) => {}
            }
        }
        for spec in plan.added_servers {
            let id = spec.id.clone();
            let result = if self.servers.contains(&id) {
                self.servers.replace(spec).await
            } else {
                self.servers.register(spec).await
            };
            result
                .map_err(|error| step_failed(&format!("registering mcp server `{id}`"), &error))?;
        }
        for spec in plan.updated_servers {
            let id = spec.id.clone();
            let result = if self.servers.contains(&id) {
                self.servers.replace(spec).await
            } else {
                self.servers.register(spec).await
            };
            result.map_err(|error| step_failed(&format!("updating mcp server `{id}`"), &error))?;
        }
        let Some(groups) = &self.groups else {
            return Ok(());
        };
        for spec in plan.added_groups {
            let id = spec.id.clone();
            // A group an earlier, failed reload already created is changed in place.
            let result = if groups.contains(&id) {
                groups.replace(spec).await.map(drop)
            } else {
                groups.create(spec, ServerOrigin::Config).await.map(drop)
            };
            result.map_err(|error| step_failed(&format!("registering group `{id}`"), &error))?;
        }
        // A changed group keeps the members that stay with their rotation and calls in flight.
        for spec in plan.updated_groups {
            let id = spec.id.clone();
            let result = if groups.contains(&id) {
                groups.replace(spec).await.map(drop)
            } else {
                groups.create(spec, ServerOrigin::Config).await.map(drop)
            };
            result.map_err(|error| step_failed(&format!("updating group `{id}`"), &error))?;
        }
        Ok(())
    }

    /// The current state as a configuration file: the file's servers, groups and curated
    /// endpoints as written (so `${VAR}` references survive), plus every server, group and
    /// endpoint created over the API or approved from discovery. Loading it reproduces the
    /// state.
    pub async fn export(&self) -> String {
        let _reload = self.reloads.lock().await;
        let mut config = self.running();
        for snapshot in self.servers.list(None) {
            let id = snapshot.id().as_str();
            if config.mcp_servers.contains_key(id) {
                continue;
            }
            match ServerDefinition::from_server_spec(&snapshot.spec) {
                Some(definition) => {
                    config.mcp_servers.insert(id.to_owned(), definition);
                }
                None => tracing::warn!(
                    server = %id,
                    mode = snapshot.spec.mode(),
                    "an mcp server's launch cannot be written as a configuration; it is left out of the export"
                ),
            }
        }
        if let Some(groups) = &self.groups {
            for view in groups.list() {
                let id = view.group_id.as_str();
                if config.mcp_servers.contains_key(id) {
                    continue;
                }
                config.mcp_servers.insert(
                    id.to_owned(),
                    ServerDefinition::from_group_definition(&group_definition_of(&view)),
                );
            }
        }
        if let Some(endpoints) = &self.endpoints {
            for spec in endpoints.list() {
                if spec.origin == ServerOrigin::Config {
                    continue;
                }
                config
                    .endpoints
                    .entry(spec.name.to_string())
                    .or_insert_with(|| EndpointDefinition::from_endpoint_spec(&spec));
            }
        }
        mcpgw_config::export_yaml(&config)
    }

    /// Copies the file to `<file>.bak1` (keeping five backups); answers the backup's path.
    pub async fn backup(&self) -> Result<String, ConfigServiceError> {
        let file = self.file()?;
        file.backup(BACKUPS_KEPT).await.map_err(|error| {
            ConfigServiceError::Read(format!(
                "cannot back up the configuration file {}: {error}; check that its directory is \
                 writable",
                file.display_name()
            ))
        })
    }

    /// The file on disk compared with the running configuration: the text, and what a reload
    /// would change. A file that does not parse answers [`ConfigServiceError::Invalid`].
    pub async fn diff(&self) -> Result<ConfigDiffView, ConfigServiceError> {
        let name = self.file()?.display_name();
        // The usual case, a file that is what runs, needs no parsing (which costs hundreds of
        // milliseconds for a file of a thousand servers): the same text makes the same
        // configuration, since the environment its `${VAR}`s read does not change.
        let text = self.read_text().await?;
        {
            let running = self.running_ref();
            if text == running.text {
                return Ok(ConfigDiffView {
                    unified: String::new(),
                    changes: mcpgw_config::no_changes(&running.config),
                });
            }
        }
        let (disk, disk_text) = self.parse_text(&name, text)?;
        let running = self.running_ref();
        // The texts are the files as written, literal secrets included: the diff shows every
        // secret value of either configuration as the mask, as GET /api/config does.
        let mut secrets = mcpgw_config::secret_values(&running.config);
        secrets.extend(mcpgw_config::secret_values(&disk));
        let unified =
            mcpgw_config::unified_diff(&name, &running.text, &name, &disk_text, DIFF_CONTEXT_LINES);
        Ok(ConfigDiffView {
            unified: mcpgw_config::redact_secrets(&unified, &secrets),
            changes: mcpgw_config::changes(&running.config, &disk),
        })
    }

    /// Reloads (trigger `watch`) whenever the file changes, when the running configuration
    /// says `config_reload.watch: true` and a file is set; `None` otherwise. The task ends when
    /// the service is dropped. Call it from within a tokio runtime.
    pub fn spawn_watch(self: &Arc<Self>) -> Option<tokio::task::JoinHandle<()>> {
        let file = Arc::clone(self.file.as_ref()?);
        if !self.running_ref().config.config_reload.watch {
            return None;
        }
        let service: Weak<Self> = Arc::downgrade(self);
        let clock = Arc::clone(self.servers.clock());
        Some(tokio::spawn(async move {
            loop {
                file.changed().await;
                clock.sleep(WATCH_DEBOUNCE).await;
                let Some(service) = service.upgrade() else {
                    return;
                };
                // The outcome is logged and published as an event by `reload`.
                let _ = service.reload(ReloadTrigger::Watch).await;
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_their_kinds_and_names() {
        assert_eq!(ConfigServiceError::NoFile.kind(), ErrorKind::Conflict);
        assert_eq!(ConfigServiceError::NoFile.name(), "ConflictError");
        assert!(ConfigServiceError::NoFile.to_string().contains("--config"));
        let read = ConfigServiceError::Read("cannot read the configuration file x".into());
        assert_eq!(read.kind(), ErrorKind::Unavailable);
        assert_eq!(read.name(), "ServiceUnavailableError");
        let conflict = ConfigServiceError::Conflict("taken".into());
        assert_eq!(conflict.kind(), ErrorKind::Conflict);
        let apply = ConfigServiceError::Apply("broken".into());
        assert_eq!(apply.kind(), ErrorKind::Internal);
        assert_eq!(apply.name(), "InternalServerError");
    }

    /// A configuration file held in memory.
    struct MemoryFile(std::sync::Mutex<String>);

    #[async_trait::async_trait]
    impl ConfigFile for MemoryFile {
        fn display_name(&self) -> String {
            "gateway.yaml".to_owned()
        }

        async fn read(&self) -> Result<String, mcpgw_config::ConfigFileError> {
            Ok(self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone())
        }

        async fn backup(&self, _keep: usize) -> Result<String, mcpgw_config::ConfigFileError> {
            Ok("gateway.yaml.bak1".to_owned())
        }

        async fn changed(&self) {
            std::future::pending::<()>().await;
        }
    }

    fn endpoints_file(names: &[&str]) -> String {
        let mut text = String::from("endpoints:\n");
        for name in names {
            text.push_str(&format!("  {name}:\n    tools: [{{server: math}}]\n"));
        }
        text
    }

    #[tokio::test]
    async fn a_reload_applies_the_files_endpoints_and_refuses_names_the_api_holds() {
        use mcpgw_testkit::clock::FakeClock;
        use mcpgw_testkit::fakes::{FakeLauncher, RecordingEventSink, TokioSpawner};

        let events = Arc::new(RecordingEventSink::default());
        let clock = Arc::new(FakeClock::new());
        let manager = ServerManager::new(
            Arc::new(FakeLauncher::new()),
            clock.clone(),
            events.clone(),
            Arc::new(TokioSpawner),
            None,
            mcpgw_core::ManagerSettings::default(),
        );
        let endpoints = Arc::new(EndpointService::new(events.clone(), clock));
        let file = Arc::new(MemoryFile(std::sync::Mutex::new(endpoints_file(&[
            "support", "ops",
        ]))));
        let service = ConfigService::new(
            manager,
            events,
            Arc::new(|_: &str| None),
            GatewayConfig::default(),
        )
        .with_file(file.clone(), String::new())
        .with_endpoints(endpoints.clone());
        let origin_of = |name: &str| endpoints.get(name).map(|spec| spec.origin.clone());

        let report = service.reload(ReloadTrigger::Api).await.unwrap();
        assert!(report.restart_required.is_empty(), "{report:?}");
        assert_eq!(origin_of("support"), Some(ServerOrigin::Config));
        assert_eq!(origin_of("ops"), Some(ServerOrigin::Config));

        // An endpoint created over the API keeps its name: a file that declares it is refused
        // whole, and nothing changes.
        let api = service.running().to_endpoint_specs()[0].clone();
        endpoints
            .create(mcpgw_core::EndpointSpec {
                name: mcpgw_core::EndpointName::parse("mine").unwrap(),
                origin: ServerOrigin::Api,
                ..api
            })
            .await
            .unwrap();
        *file.0.lock().unwrap() = endpoints_file(&["support", "mine"]);
        let error = service.reload(ReloadTrigger::Api).await.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Conflict, "{error}");
        assert!(
            error.to_string().contains("`mine` (of origin api)"),
            "{error}"
        );
        assert_eq!(origin_of("ops"), Some(ServerOrigin::Config));
        assert_eq!(origin_of("mine"), Some(ServerOrigin::Api));

        // The file drops one and adds another; the API's endpoint stays.
        *file.0.lock().unwrap() = endpoints_file(&["support", "new"]);
        service.reload(ReloadTrigger::Api).await.unwrap();
        assert_eq!(origin_of("ops"), None);
        assert_eq!(origin_of("new"), Some(ServerOrigin::Config));
        assert_eq!(origin_of("mine"), Some(ServerOrigin::Api));

        // The export holds both kinds, and loads back to them.
        let exported = service.export().await;
        let again = mcpgw_config::parse("export.yaml", &exported, &|_| None).unwrap();
        let names: Vec<&str> = again.endpoints.keys().map(String::as_str).collect();
        assert_eq!(names, ["mine", "new", "support"], "{exported}");
    }

    #[test]
    fn triggers_have_their_event_names() {
        assert_eq!(ReloadTrigger::Api.as_str(), "api");
        assert_eq!(ReloadTrigger::Signal.as_str(), "signal");
        assert_eq!(ReloadTrigger::Watch.as_str(), "watch");
    }
}
