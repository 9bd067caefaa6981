//! The discovery use cases: sources and their scans, and the approval and rejection of what
//! they find.
//!
//! [`DiscoveryService`] owns the sources (those of the configuration file, and those
//! registered over the API, which its [`DiscoveryStore`] keeps) and the
//! [`DiscoveryRegistry`] that decides what each candidate becomes. Every enabled source is
//! scanned every `refresh_interval`, as soon as the source says it changed, and on demand;
//! an approval registers the server with the [`ServerManager`] (which persists it), and an
//! authoritative source's withdrawal removes it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use mcpgw_config::DiscoveryConfig;
use mcpgw_core::{
    CoreError, DomainEvent, EventSink, ServerId, ServerManager, ServerOrigin, Timestamp,
};
use mcpgw_discovery::{
    DiscoveryError, DiscoveryMode, DiscoveryRegistry, DiscoverySource, DiscoverySourceFactory,
    DiscoveryStore, PendingServer, QuarantinedServer, SourceDefinition, SourceError, SourceOrigin,
};
use serde_json::{Map, Value};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::GroupService;

/// How discovery runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoverySettings {
    /// How often every enabled source is scanned (`discovery.refresh_interval_s`).
    pub refresh_interval: Duration,
}

impl Default for DiscoverySettings {
    fn default() -> Self {
        Self {
            refresh_interval: Duration::from_secs(DiscoveryConfig::DEFAULT_REFRESH_INTERVAL_S),
        }
    }
}

/// How long one scan may take before the source counts as unreachable.
pub const SCAN_DEADLINE: Duration = Duration::from_secs(15);

/// The shortest time between two scans of one source that its change notifications cause,
/// so that a burst of changes (a directory being written, containers starting) is one scan.
const MIN_GAP_BETWEEN_CHANGE_SCANS: Duration = Duration::from_millis(200);

/// A source as the API shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceView {
    pub definition: SourceDefinition,
    pub last_scan_at: Option<Timestamp>,
    /// Why the last scan failed; `None` after a scan that worked.
    pub error: Option<String>,
}

/// A source to register or the new definition of one.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceRequest {
    /// `None` picks `{type}-{n}` with the first free `n`.
    pub source_id: Option<String>,
    pub source_type: String,
    pub mode: DiscoveryMode,
    pub enabled: bool,
    pub config: Map<String, Value>,
}

/// What a scan found, counted after it finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanReport {
    pub source_id: String,
    pub found: usize,
    pub pending: usize,
    pub quarantined: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalView {
    pub name: String,
    pub source_id: String,
    pub mcp_server_id: ServerId,
    /// Whether it replaced a server approved earlier with another definition.
    pub replaced: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectionView {
    pub name: String,
    pub source_id: String,
}

/// The sources of the configuration file's `discovery` block, with their ids.
pub fn discovery_sources_from_config(config: &DiscoveryConfig) -> Vec<SourceDefinition> {
    config
        .sources_with_ids()
        .map(|(source_id, source)| SourceDefinition {
            source_id,
            source_type: source.source_type.clone(),
            mode: source.mode,
            enabled: source.enabled,
            config: source.config.clone(),
            origin: SourceOrigin::Config,
        })
        .collect()
}

/// Builds each source with the first factory that knows its type: how the bundled server
/// offers `docker` and `filesystem` sources side by side, and how an embedder adds its own.
#[derive(Default, Clone)]
pub struct CompositeSourceFactory {
    factories: Vec<Arc<dyn DiscoverySourceFactory>>,
}

impl CompositeSourceFactory {
    pub fn new() -> Self {
        Self::default()
    }

    #[must_use]
    pub fn with(mut self, factory: Arc<dyn DiscoverySourceFactory>) -> Self {
        self.factories.push(factory);
        self
    }
}

impl DiscoverySourceFactory for CompositeSourceFactory {
    fn source_types(&self) -> Vec<&'static str> {
        let mut types: Vec<&'static str> = self
            .factories
            .iter()
            .flat_map(|factory| factory.source_types())
            .collect();
        types.dedup();
        types
    }

    fn build(&self, definition: &SourceDefinition) -> Result<Arc<dyn DiscoverySource>, String> {
        self.factories
            .iter()
            .find(|factory| {
                factory
                    .source_types()
                    .contains(&definition.source_type.as_str())
            })
            .ok_or_else(|| {
                format!(
                    "unknown source type `{}`; use one of: {}",
                    definition.source_type,
                    self.source_types().join(", ")
                )
            })?
            .build(definition)
    }
}

struct SourceState {
    definition: SourceDefinition,
    source: Arc<dyn DiscoverySource>,
    last_scan_at: Option<Timestamp>,
    error: Option<String>,
    /// Wakes the source's scanning task (enabled again, scan settings changed).
    wake: Arc<Notify>,
    task: Option<JoinHandle<()>>,
}

impl SourceState {
    fn view(&self) -> SourceView {
        SourceView {
            definition: self.definition.clone(),
            last_scan_at: self.last_scan_at,
            error: self.error.clone(),
        }
    }
}

impl Drop for SourceState {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

#[derive(Default)]
struct State {
    sources: BTreeMap<String, SourceState>,
    registry: DiscoveryRegistry,
}

/// A source whose definition could not be turned into a source (a stored source whose
/// settings this gateway no longer accepts): it lists the reason as its error at each scan.
struct UnusableSource(String);

#[async_trait::async_trait]
impl DiscoverySource for UnusableSource {
    async fn scan(&self) -> Result<Vec<mcpgw_discovery::DiscoveredCandidate>, SourceError> {
        Err(SourceError(self.0.clone()))
    }
}

/// Runs discovery. Cheap to share behind an `Arc`; call [`DiscoveryService::load`] once, then
/// [`DiscoveryService::start_scanning`] for the periodic and on-change scans.
pub struct DiscoveryService {
    servers: ServerManager,
    groups: Option<Arc<GroupService>>,
    factory: Arc<dyn DiscoverySourceFactory>,
    store: Option<Arc<dyn DiscoveryStore>>,
    events: Arc<dyn EventSink>,
    settings: DiscoverySettings,
    state: Mutex<State>,
    /// Serializes what changes the registry and the servers (applying a scan, approving,
    /// rejecting, changing sources), so that each sees the others' effects whole. Scans
    /// themselves run outside it.
    decisions: tokio::sync::Mutex<()>,
    /// Set by `start_scanning`: sources added later (over the API, on whatever runtime serves
    /// the request) get their scanning task on the runtime that started scanning.
    scheduler: Mutex<Option<(Weak<DiscoveryService>, tokio::runtime::Handle)>>,
}

impl std::fmt::Debug for DiscoveryService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscoveryService")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl DiscoveryService {
    pub fn new(
        servers: ServerManager,
        factory: Arc<dyn DiscoverySourceFactory>,
        events: Arc<dyn EventSink>,
        settings: DiscoverySettings,
    ) -> Self {
        Self {
            servers,
            groups: None,
            factory,
            store: None,
            events,
            settings,
            state: Mutex::new(State::default()),
            decisions: tokio::sync::Mutex::new(()),
            scheduler: Mutex::new(None),
        }
    }

    /// Keeps API-registered sources and rejections in `store`, so they survive restarts.
    #[must_use]
    pub fn with_store(mut self, store: Arc<dyn DiscoveryStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Lets discovery see group ids, which share the namespace of server ids.
    #[must_use]
    pub fn with_groups(mut self, groups: Arc<GroupService>) -> Self {
        self.groups = Some(groups);
        self
    }

    /// Lets discovered definitions name the launch modes `options` register (by default only
    /// the built-in ones).
    #[must_use]
    pub fn with_parse_options(self, options: mcpgw_config::ParseOptions) -> Self {
        self.state().registry.set_definition_rules(options);
        self
    }

    pub fn settings(&self) -> &DiscoverySettings {
        &self.settings
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn publish(&self, event: DomainEvent) {
        self.events.publish(self.servers.clock().wall(), event);
    }

    fn now(&self) -> Timestamp {
        self.servers.clock().wall()
    }

    /// Reads what discovery knows: the configuration file's sources (a source whose settings
    /// are invalid is an error: the file must be fixed), the stored sources and rejections, and
    /// the servers approved before (from the server manager, which restored them).
    pub async fn load(&self, config_sources: Vec<SourceDefinition>) -> Result<(), DiscoveryError> {
        let _decisions = self.decisions.lock().await;
        let mut loaded = Vec::new();
        for definition in config_sources {
            let source = self.build(&definition).map_err(|reason| {
                DiscoveryError::InvalidSource(format!(
                    "discovery source `{}`: {reason}",
                    definition.source_id
                ))
            })?;
            loaded.push((definition, source));
        }
        let mut rejections = Vec::new();
        if let Some(store) = &self.store {
            for definition in store.load_sources().await.map_err(store_error)? {
                if loaded
                    .iter()
                    .any(|(known, _)| known.source_id == definition.source_id)
                {
                    tracing::warn!(
                        source_id = %definition.source_id,
                        "a discovery source registered over the API has the id of one in the \
                         configuration file; the file's source is used"
                    );
                    continue;
                }
                let source = self.build(&definition).unwrap_or_else(|reason| {
                    Arc::new(UnusableSource(format!(
                        "this source's settings are no longer valid ({reason}); update or \
                         delete it"
                    ))) as Arc<dyn DiscoverySource>
                });
                loaded.push((definition, source));
            }
            rejections = store.load_rejections().await.map_err(store_error)?;
        }
        let approved: Vec<(String, mcpgw_core::ServerSpec)> = self
            .servers
            .list(None)
            .into_iter()
            .filter_map(|snapshot| match &snapshot.spec.origin {
                ServerOrigin::Discovery { source_id } => {
                    Some((source_id.clone(), (*snapshot.spec).clone()))
                }
                _ => None,
            })
            .collect();

        let mut state = self.state();
        for (definition, source) in loaded {
            state.sources.insert(
                definition.source_id.clone(),
                SourceState {
                    definition,
                    source,
                    last_scan_at: None,
                    error: None,
                    wake: Arc::new(Notify::new()),
                    task: None,
                },
            );
        }
        for rejection in rejections {
            state.registry.restore_rejection(rejection);
        }
        for (source_id, spec) in approved {
            state.registry.restore_approved(&source_id, spec);
        }
        Ok(())
    }

    fn build(&self, definition: &SourceDefinition) -> Result<Arc<dyn DiscoverySource>, String> {
        definition.validate_common()?;
        let types = self.factory.source_types();
        if !types.contains(&definition.source_type.as_str()) {
            return Err(format!(
                "unknown source type `{}`; use one of: {}",
                definition.source_type,
                types.join(", ")
            ));
        }
        self.factory.build(definition)
    }

    /// Scans every enabled source now, then keeps scanning each every `refresh_interval` and
    /// whenever it says it changed, until the service is dropped. Call it inside the tokio
    /// runtime the scans should run on.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn start_scanning(self: &Arc<Self>) {
        *self
            .scheduler
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) =
            Some((Arc::downgrade(self), tokio::runtime::Handle::current()));
        let mut state = self.state();
        let ids: Vec<String> = state.sources.keys().cloned().collect();
        for id in ids {
            if let Some(source) = state.sources.get_mut(&id) {
                self.spawn_scanning_task(source);
            }
        }
    }

    /// Ends the periodic scans of every source (at shutdown); [`Self::start_scanning`] starts
    /// them again. A scan under way is abandoned.
    pub fn stop_scanning(&self) {
        *self
            .scheduler
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = None;
        for source in self.state().sources.values_mut() {
            if let Some(task) = source.task.take() {
                task.abort();
            }
        }
    }

    fn spawn_scanning_task(&self, source: &mut SourceState) {
        let Some((service, runtime)) = self
            .scheduler
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
        else {
            return;
        };
        if let Some(previous) = source.task.take() {
            previous.abort();
        }
        let source_id = source.definition.source_id.clone();
        let watched = Arc::clone(&source.source);
        let wake = Arc::clone(&source.wake);
        let interval = self.settings.refresh_interval;
        source.task = Some(runtime.spawn(scan_source_forever(
            service, source_id, watched, wake, interval,
        )));
    }

    // ----- sources -----------------------------------------------------------------------

    pub fn sources(&self) -> Vec<SourceView> {
        self.state()
            .sources
            .values()
            .map(SourceState::view)
            .collect()
    }

    pub fn source(&self, source_id: &str) -> Result<SourceView, DiscoveryError> {
        self.state()
            .sources
            .get(source_id)
            .map(SourceState::view)
            .ok_or_else(|| DiscoveryError::SourceNotFound(source_id.to_owned()))
    }

    /// Registers a source over the API; it is scanned at once when enabled.
    pub async fn add_source(&self, request: SourceRequest) -> Result<SourceView, DiscoveryError> {
        let _decisions = self.decisions.lock().await;
        let source_id = match request.source_id.clone() {
            Some(id) => id,
            None => {
                let state = self.state();
                (0..)
                    .map(|n| format!("{}-{n}", request.source_type))
                    .find(|id| !state.sources.contains_key(id))
                    .unwrap_or_default()
            }
        };
        if self.state().sources.contains_key(&source_id) {
            return Err(DiscoveryError::SourceAlreadyExists(source_id));
        }
        let (definition, source) = self.build_and_store(source_id.clone(), request).await?;
        self.publish(DomainEvent::DiscoverySourceAdded {
            source_id: source_id.clone(),
            source_type: definition.source_type.clone(),
            mode: definition.mode.as_str(),
        });
        let mut state = self.state();
        let mut entry = SourceState {
            definition,
            source,
            last_scan_at: None,
            error: None,
            wake: Arc::new(Notify::new()),
            task: None,
        };
        self.spawn_scanning_task(&mut entry);
        let view = entry.view();
        state.sources.insert(source_id, entry);
        Ok(view)
    }

    /// Replaces an API-registered source's definition; what it found is re-judged at its next
    /// scan, which happens at once.
    pub async fn update_source(
        &self,
        source_id: &str,
        request: SourceRequest,
    ) -> Result<SourceView, DiscoveryError> {
        let _decisions = self.decisions.lock().await;
        self.modifiable(source_id)?;
        let (definition, source) = self.build_and_store(source_id.to_owned(), request).await?;
        self.publish(DomainEvent::DiscoverySourceUpdated {
            source_id: source_id.to_owned(),
        });
        let mut state = self.state();
        let entry = state
            .sources
            .get_mut(source_id)
            .ok_or_else(|| DiscoveryError::SourceNotFound(source_id.to_owned()))?;
        entry.definition = definition;
        entry.source = source;
        entry.error = None;
        self.spawn_scanning_task(entry);
        Ok(entry.view())
    }

    /// Removes an API-registered source. What it found leaves pending and quarantine, and its
    /// rejections are forgotten; servers it approved stay, as servers no source withdraws.
    pub async fn remove_source(&self, source_id: &str) -> Result<(), DiscoveryError> {
        let _decisions = self.decisions.lock().await;
        self.modifiable(source_id)?;
        if let Some(store) = &self.store {
            store.delete_source(source_id).await.map_err(store_error)?;
        }
        let dropped = {
            let mut state = self.state();
            state.sources.remove(source_id);
            state.registry.forget_source(source_id)
        };
        if let Some(store) = &self.store {
            for (owner, name) in dropped {
                if let Err(error) = store.delete_rejection(&owner, &name).await {
                    tracing::warn!(%error, source_id = owner, name, "could not forget a rejection");
                }
            }
        }
        self.publish(DomainEvent::DiscoverySourceRemoved {
            source_id: source_id.to_owned(),
        });
        Ok(())
    }

    /// An API source from `request`: built (so that its settings are checked) and stored.
    async fn build_and_store(
        &self,
        source_id: String,
        request: SourceRequest,
    ) -> Result<(SourceDefinition, Arc<dyn DiscoverySource>), DiscoveryError> {
        let definition = SourceDefinition {
            source_id,
            source_type: request.source_type,
            mode: request.mode,
            enabled: request.enabled,
            config: request.config,
            origin: SourceOrigin::Api,
        };
        let source = self
            .build(&definition)
            .map_err(DiscoveryError::InvalidSource)?;
        if let Some(store) = &self.store {
            store.save_source(&definition).await.map_err(store_error)?;
        }
        Ok((definition, source))
    }

    fn modifiable(&self, source_id: &str) -> Result<(), DiscoveryError> {
        match self.state().sources.get(source_id) {
            None => Err(DiscoveryError::SourceNotFound(source_id.to_owned())),
            Some(entry) if entry.definition.origin == SourceOrigin::Config => {
                Err(DiscoveryError::SourceDeclaredInConfig(source_id.to_owned()))
            }
            Some(_) => Ok(()),
        }
    }

    /// Enables or disables a source. A disabled source is not scanned (a scan request is a
    /// conflict), and a scan still running when it is disabled changes nothing; what it found
    /// before stays as it was. Enabling it scans it at once. For a source of the configuration
    /// file the change lasts until the gateway restarts.
    pub async fn set_enabled(
        &self,
        source_id: &str,
        enabled: bool,
    ) -> Result<SourceView, DiscoveryError> {
        let _decisions = self.decisions.lock().await;
        let definition = {
            let state = self.state();
            let entry = state
                .sources
                .get(source_id)
                .ok_or_else(|| DiscoveryError::SourceNotFound(source_id.to_owned()))?;
            SourceDefinition {
                enabled,
                ..entry.definition.clone()
            }
        };
        if definition.origin == SourceOrigin::Api
            && let Some(store) = &self.store
        {
            store.save_source(&definition).await.map_err(store_error)?;
        }
        let view = {
            let mut state = self.state();
            let entry = state
                .sources
                .get_mut(source_id)
                .ok_or_else(|| DiscoveryError::SourceNotFound(source_id.to_owned()))?;
            let changed = entry.definition.enabled != enabled;
            entry.definition.enabled = enabled;
            if changed {
                entry.wake.notify_one();
            }
            entry.view()
        };
        self.publish(DomainEvent::DiscoverySourceEnabled {
            source_id: source_id.to_owned(),
            enabled,
        });
        Ok(view)
    }

    // ----- scans -------------------------------------------------------------------------

    /// Scans one source now and applies what it found; answers the counts after the scan.
    pub async fn scan(&self, source_id: &str) -> Result<ScanReport, DiscoveryError> {
        let source = {
            let state = self.state();
            let entry = state
                .sources
                .get(source_id)
                .ok_or_else(|| DiscoveryError::SourceNotFound(source_id.to_owned()))?;
            if !entry.definition.enabled {
                return Err(DiscoveryError::SourceDisabled(source_id.to_owned()));
            }
            Arc::clone(&entry.source)
        };
        let scanned = match tokio::time::timeout(SCAN_DEADLINE, source.scan()).await {
            Ok(Ok(candidates)) => Ok(candidates),
            Ok(Err(error)) => Err(error.0),
            Err(_) => Err(format!(
                "the source did not answer within {} s",
                SCAN_DEADLINE.as_secs()
            )),
        };

        let _decisions = self.decisions.lock().await;
        // The source may have been disabled, changed or removed while it was being scanned
        // (those changes take the decision lock too): what the scan answered, found or failed,
        // then no longer counts. Once a disable has answered, nothing of the source's changes
        // anything.
        match self.state().sources.get(source_id) {
            Some(entry) if Arc::ptr_eq(&entry.source, &source) => {
                if !entry.definition.enabled {
                    return Err(DiscoveryError::SourceDisabled(source_id.to_owned()));
                }
            }
            _ => return Err(DiscoveryError::SourceNotFound(source_id.to_owned())),
        }
        let now = self.now();
        let candidates = match scanned {
            Ok(candidates) => candidates,
            Err(reason) => {
                if let Some(entry) = self.state().sources.get_mut(source_id) {
                    entry.last_scan_at = Some(now);
                    entry.error = Some(reason.clone());
                }
                tracing::warn!(source_id, %reason, "discovery scan failed");
                self.publish(DomainEvent::DiscoveryScanFailed {
                    source_id: source_id.to_owned(),
                    error: reason.clone(),
                });
                return Err(DiscoveryError::SourceUnavailable {
                    source_id: source_id.to_owned(),
                    reason,
                });
            }
        };

        let outcome = {
            let mut state = self.state();
            let Some(definition) = state
                .sources
                .get(source_id)
                .filter(|entry| Arc::ptr_eq(&entry.source, &source))
                .map(|entry| entry.definition.clone())
            else {
                return Err(DiscoveryError::SourceNotFound(source_id.to_owned()));
            };
            // A server approved from discovery and then deleted over the API is offered again.
            let servers = &self.servers;
            state
                .registry
                .retain_approved(&|id: &ServerId| servers.contains(id));
            let groups = self.groups.as_deref();
            let is_taken = |id: &ServerId| {
                servers.contains(id) || groups.is_some_and(|groups| groups.contains(id))
            };
            let outcome = state
                .registry
                .apply_scan(&definition, candidates, now, &is_taken);
            if let Some(entry) = state.sources.get_mut(source_id) {
                entry.last_scan_at = Some(now);
                entry.error = None;
            }
            outcome
        };

        for name in &outcome.newly_pending {
            self.publish(DomainEvent::DiscoveryServerPending {
                name: name.clone(),
                source_id: source_id.to_owned(),
            });
        }
        for (name, reason) in &outcome.newly_quarantined {
            tracing::info!(source_id, name, reason, "discovered server quarantined");
            self.publish(DomainEvent::DiscoveryServerQuarantined {
                name: name.clone(),
                source_id: source_id.to_owned(),
                reason: reason.clone(),
            });
        }
        if let Some(store) = &self.store {
            for (owner, name) in &outcome.rejections_cleared {
                if let Err(error) = store.delete_rejection(owner, name).await {
                    tracing::warn!(%error, source_id = owner, name, "could not forget a rejection");
                }
            }
        }
        for id in &outcome.withdrawn {
            match self.servers.delete(id).await {
                Ok(()) | Err(CoreError::ServerNotFound(_)) => {}
                Err(error) => {
                    tracing::warn!(%error, server = %id, "could not remove a withdrawn server");
                }
            }
            self.publish(DomainEvent::DiscoveryServerWithdrawn {
                mcp_server_id: id.clone(),
                source_id: source_id.to_owned(),
            });
        }
        self.publish(DomainEvent::DiscoveryScanCompleted {
            source_id: source_id.to_owned(),
            found: outcome.found,
            pending: outcome.pending,
            quarantined: outcome.quarantined,
        });
        Ok(ScanReport {
            source_id: source_id.to_owned(),
            found: outcome.found,
            pending: outcome.pending,
            quarantined: outcome.quarantined,
        })
    }

    fn is_enabled(&self, source_id: &str) -> Option<bool> {
        self.state()
            .sources
            .get(source_id)
            .map(|entry| entry.definition.enabled)
    }

    // ----- decisions ---------------------------------------------------------------------

    pub fn pending(&self) -> Vec<PendingServer> {
        self.state().registry.pending()
    }

    pub fn quarantined(&self) -> Vec<QuarantinedServer> {
        self.state().registry.quarantined()
    }

    /// How many candidates are pending and how many quarantined (for metrics, without copying
    /// them).
    pub fn counts(&self) -> (usize, usize) {
        self.state().registry.counts()
    }

    /// Approves the pending `name`: the server is registered (or, for a changed definition of
    /// a server approved before, updated and restarted if it runs).
    pub async fn approve(&self, name: &str) -> Result<ApprovalView, DiscoveryError> {
        let _decisions = self.decisions.lock().await;
        let approval = self.state().registry.approval(name)?;
        let id = approval.spec.id.clone();
        let replaced = approval.replaces_approved && self.servers.contains(&id);
        let registered = if replaced {
            self.servers.update(approval.spec.clone()).await.map(drop)
        } else {
            self.servers.register(approval.spec.clone()).await.map(drop)
        };
        registered.map_err(|error| match error {
            CoreError::ServerAlreadyExists(id) => DiscoveryError::NameTaken(id.to_string()),
            other => DiscoveryError::Registration(other.to_string()),
        })?;
        self.state().registry.confirm_approval(&approval);
        if let Some(store) = &self.store
            && let Err(error) = store.delete_rejection(&approval.source_id, name).await
        {
            tracing::warn!(%error, name, "could not forget an earlier rejection");
        }
        self.publish(DomainEvent::DiscoveryServerApproved {
            mcp_server_id: id.clone(),
            source_id: approval.source_id.clone(),
        });
        Ok(ApprovalView {
            name: name.to_owned(),
            source_id: approval.source_id,
            mcp_server_id: id,
            replaced,
        })
    }

    /// Rejects the pending `name`; it stays out, across scans and restarts, until its source
    /// reports another definition for it.
    pub async fn reject(&self, name: &str) -> Result<RejectionView, DiscoveryError> {
        let _decisions = self.decisions.lock().await;
        let rejection = self.state().registry.reject(name, self.now())?;
        if let Some(store) = &self.store {
            store
                .save_rejection(&rejection)
                .await
                .map_err(store_error)?;
        }
        self.publish(DomainEvent::DiscoveryServerRejected {
            name: name.to_owned(),
            source_id: rejection.source_id.clone(),
        });
        Ok(RejectionView {
            name: name.to_owned(),
            source_id: rejection.source_id,
        })
    }
}

fn store_error(error: mcpgw_discovery::DiscoveryStoreError) -> DiscoveryError {
    DiscoveryError::Store(error.0)
}

/// One source's scanning loop: scan, then wait for the interval, a change the source reports,
/// or a wake-up (enabled again); a disabled source only waits. Ends when the service is gone.
async fn scan_source_forever(
    service: Weak<DiscoveryService>,
    source_id: String,
    source: Arc<dyn DiscoverySource>,
    wake: Arc<Notify>,
    interval: Duration,
) {
    loop {
        let enabled = {
            let Some(service) = service.upgrade() else {
                return;
            };
            match service.is_enabled(&source_id) {
                None => return,
                Some(true) => {
                    // Failures are recorded on the source and published; nothing more to do.
                    let _ = service.scan(&source_id).await;
                    true
                }
                Some(false) => false,
            }
        };
        if enabled {
            tokio::select! {
                () = tokio::time::sleep(interval) => {}
                () = source.changed() => {
                    tokio::time::sleep(MIN_GAP_BETWEEN_CHANGE_SCANS).await;
                }
                () = wake.notified() => {}
            }
        } else {
            // A disabled source's changes are not watched: it would report them forever.
            tokio::select! {
                () = tokio::time::sleep(interval) => {}
                () = wake.notified() => {}
            }
        }
    }
}
