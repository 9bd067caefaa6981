//! Curated endpoints (see [`mcpgw_core::endpoints`]): their definitions, from the configuration
//! file and from the API, who may use each, and what each serves, resolved against the
//! aggregated catalogue.
//!
//! An endpoint's tools are the catalogue's: a selector names a server or group and one of its
//! tools (or all of them) by the upstream's own name, and the endpoint serves what the
//! catalogue lists for them, under the name it has on `/mcp` unless the selector gives another,
//! with the selector's overrides. A tool that pinning withholds, or that the caller may not use,
//! is not served on any endpoint either. The resolution is cached per endpoint and made again
//! only when the catalogue's list or the endpoint's definition changed.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use mcpgw_authz::{Principal, PrincipalPattern};
use mcpgw_core::{
    Caller, Clock, DomainEvent, EndpointName, EndpointRepository, EndpointSpec, EventSink,
    RepositoryError, ServerId, ServerOrigin, Tool,
};
use tokio::sync::watch;

use crate::catalog::ToolCatalog;

/// Why a change of the endpoints was refused.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("no curated endpoint is named `{0}`")]
    NotFound(String),
    #[error("a curated endpoint named `{0}` exists already")]
    AlreadyExists(String),
    #[error(
        "the curated endpoint `{0}` is declared in the configuration file: change it there and reload"
    )]
    DeclaredInConfig(String),
    #[error("{0}")]
    Invalid(String),
    #[error("the endpoint could not be stored: {0}")]
    Storage(#[from] RepositoryError),
}

impl EndpointError {
    pub fn kind(&self) -> mcpgw_core::ErrorKind {
        match self {
            EndpointError::NotFound(_) => mcpgw_core::ErrorKind::NotFound,
            EndpointError::AlreadyExists(_) | EndpointError::DeclaredInConfig(_) => {
                mcpgw_core::ErrorKind::Conflict
            }
            EndpointError::Invalid(_) => mcpgw_core::ErrorKind::Invalid,
            EndpointError::Storage(_) => mcpgw_core::ErrorKind::Internal,
        }
    }
}

/// One tool as an endpoint serves it.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointTool {
    /// The definition clients of the endpoint see: its name there and the overrides applied.
    pub tool: Tool,
    /// The name the catalogue lists it under on `/mcp`: what a call is routed by.
    pub catalog_name: String,
    /// Whose tool it is, and its own name there.
    pub server: ServerId,
    pub upstream_name: String,
}

/// An endpoint's tools, resolved against one catalogue listing.
#[derive(Debug, Default)]
pub struct Resolved {
    /// In selection order.
    pub tools: Vec<EndpointTool>,
    /// Endpoint name to index in `tools`.
    by_name: HashMap<String, usize>,
}

impl Resolved {
    pub fn get(&self, name: &str) -> Option<&EndpointTool> {
        self.by_name.get(name).map(|index| &self.tools[*index])
    }
}

/// A resolution and the catalogue listing it was made from.
type ResolvedFrom = (Arc<Vec<Tool>>, Arc<Resolved>);

struct Entry {
    spec: Arc<EndpointSpec>,
    allow: Vec<PrincipalPattern>,
    deny: Vec<PrincipalPattern>,
    /// The last resolution, with the catalogue listing it was made from.
    resolved: Mutex<Option<ResolvedFrom>>,
}

impl Entry {
    fn new(spec: EndpointSpec) -> Result<Self, EndpointError> {
        // No store has to keep the NUL character (PostgreSQL's jsonb cannot), and no tool
        // definition needs one: refused like any other invalid text.
        if serde_json::to_value(&spec).is_ok_and(|value| holds_nul(&value)) {
            return Err(EndpointError::Invalid(format!(
                "the endpoint `{}` holds the NUL character in one of its texts; remove it",
                spec.name
            )));
        }
        let patterns = |raw: &[String], key: &str| {
            raw.iter()
                .map(|pattern| {
                    PrincipalPattern::parse(pattern)
                        .map_err(|error| EndpointError::Invalid(format!("{key}: {error}")))
                })
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Self {
            allow: patterns(&spec.allow, "allow")?,
            deny: patterns(&spec.deny, "deny")?,
            spec: Arc::new(spec),
            resolved: Mutex::new(None),
        })
    }
}

/// The curated endpoints of one gateway.
pub struct EndpointService {
    endpoints: RwLock<BTreeMap<EndpointName, Arc<Entry>>>,
    repository: Option<Arc<dyn EndpointRepository>>,
    events: Arc<dyn EventSink>,
    clock: Arc<dyn Clock>,
    catalog: OnceLock<Arc<ToolCatalog>>,
    changes: watch::Sender<u64>,
}

impl std::fmt::Debug for EndpointService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointService")
            .field("endpoints", &self.read().len())
            .finish_non_exhaustive()
    }
}

impl EndpointService {
    pub fn new(events: Arc<dyn EventSink>, clock: Arc<dyn Clock>) -> Self {
        Self {
            endpoints: RwLock::new(BTreeMap::new()),
            repository: None,
            events,
            clock,
            catalog: OnceLock::new(),
            changes: watch::channel(0).0,
        }
    }

    /// Keeps the endpoints created over the API in `repository`.
    #[must_use]
    pub fn with_repository(mut self, repository: Arc<dyn EndpointRepository>) -> Self {
        self.repository = Some(repository);
        self
    }

    /// Resolves endpoints against `catalog` (set once, before serving).
    pub fn set_catalog(&self, catalog: Arc<ToolCatalog>) {
        let _ = self.catalog.set(catalog);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<EndpointName, Arc<Entry>>> {
        self.endpoints
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<EndpointName, Arc<Entry>>> {
        self.endpoints
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn publish(&self, event: DomainEvent) {
        self.events.publish(self.clock.wall(), event);
    }

    fn changed(&self) {
        self.changes.send_modify(|version| *version += 1);
    }

    /// Moves whenever an endpoint is added, changed or removed.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Every endpoint, by name.
    pub fn list(&self) -> Vec<Arc<EndpointSpec>> {
        self.read()
            .values()
            .map(|entry| Arc::clone(&entry.spec))
            .collect()
    }

    pub fn get(&self, name: &str) -> Option<Arc<EndpointSpec>> {
        self.read().get(name).map(|entry| Arc::clone(&entry.spec))
    }

    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Creates an endpoint (of the API unless `spec.origin` says otherwise), stored before it
    /// is served.
    pub async fn create(&self, spec: EndpointSpec) -> Result<Arc<EndpointSpec>, EndpointError> {
        let entry = Arc::new(Entry::new(spec)?);
        let name = entry.spec.name.clone();
        if self.read().contains_key(&name) {
            return Err(EndpointError::AlreadyExists(name.to_string()));
        }
        if let (Some(repository), ServerOrigin::Api) = (&self.repository, &entry.spec.origin) {
            repository.save_endpoint(&entry.spec).await?;
        }
        {
            let mut endpoints = self.write();
            if endpoints.contains_key(&name) {
                return Err(EndpointError::AlreadyExists(name.to_string()));
            }
            endpoints.insert(name.clone(), Arc::clone(&entry));
        }
        self.publish(DomainEvent::EndpointCreated {
            endpoint: name.to_string(),
            origin: entry.spec.origin.as_str(),
        });
        self.changed();
        Ok(Arc::clone(&entry.spec))
    }

    /// Replaces an endpoint of the API with `spec` (of the same name).
    pub async fn replace(&self, spec: EndpointSpec) -> Result<Arc<EndpointSpec>, EndpointError> {
        let name = spec.name.clone();
        let existing = self
            .read()
            .get(&name)
            .cloned()
            .ok_or_else(|| EndpointError::NotFound(name.to_string()))?;
        if existing.spec.origin == ServerOrigin::Config {
            return Err(EndpointError::DeclaredInConfig(name.to_string()));
        }
        let entry = Arc::new(Entry::new(EndpointSpec {
            origin: existing.spec.origin.clone(),
            ..spec
        })?);
        if let Some(repository) = &self.repository {
            repository.save_endpoint(&entry.spec).await?;
        }
        self.write().insert(name.clone(), Arc::clone(&entry));
        self.publish(DomainEvent::EndpointUpdated {
            endpoint: name.to_string(),
        });
        self.changed();
        Ok(Arc::clone(&entry.spec))
    }

    /// Deletes an endpoint of the API.
    pub async fn delete(&self, name: &str) -> Result<(), EndpointError> {
        let parsed =
            EndpointName::parse(name).map_err(|_| EndpointError::NotFound(name.to_owned()))?;
        let existing = self
            .read()
            .get(&parsed)
            .cloned()
            .ok_or_else(|| EndpointError::NotFound(name.to_owned()))?;
        if existing.spec.origin == ServerOrigin::Config {
            return Err(EndpointError::DeclaredInConfig(name.to_owned()));
        }
        if let Some(repository) = &self.repository {
            repository.delete_endpoint(&parsed).await?;
        }
        self.write().remove(&parsed);
        self.publish(DomainEvent::EndpointDeleted {
            endpoint: name.to_owned(),
        });
        self.changed();
        Ok(())
    }

    /// Makes the configuration file's endpoints exactly `specs`: adds the new ones, replaces
    /// the changed ones and removes those no longer there (the API's endpoints stay). An
    /// endpoint of the file whose name an API endpoint has is refused, naming it.
    pub fn apply_config(&self, specs: Vec<EndpointSpec>) -> Result<(), EndpointError> {
        let mut entries = Vec::with_capacity(specs.len());
        for spec in specs {
            entries.push(Arc::new(Entry::new(EndpointSpec {
                origin: ServerOrigin::Config,
                ..spec
            })?));
        }
        let mut events = Vec::new();
        {
            let mut endpoints = self.write();
            for entry in &entries {
                if let Some(existing) = endpoints.get(&entry.spec.name)
                    && existing.spec.origin != ServerOrigin::Config
                {
                    return Err(EndpointError::AlreadyExists(entry.spec.name.to_string()));
                }
            }
            let wanted: Vec<&EndpointName> = entries.iter().map(|entry| &entry.spec.name).collect();
            endpoints.retain(|name, existing| {
                let keep = existing.spec.origin != ServerOrigin::Config || wanted.contains(&name);
                if !keep {
                    events.push(DomainEvent::EndpointDeleted {
                        endpoint: name.to_string(),
                    });
                }
                keep
            });
            for entry in entries {
                let name = entry.spec.name.clone();
                match endpoints.get(&name) {
                    Some(existing) if existing.spec == entry.spec => {}
                    Some(_) => {
                        events.push(DomainEvent::EndpointUpdated {
                            endpoint: name.to_string(),
                        });
                        endpoints.insert(name, entry);
                    }
                    None => {
                        events.push(DomainEvent::EndpointCreated {
                            endpoint: name.to_string(),
                            origin: ServerOrigin::Config.as_str(),
                        });
                        endpoints.insert(name, entry);
                    }
                }
            }
        }
        if !events.is_empty() {
            for event in events {
                self.publish(event);
            }
            self.changed();
        }
        Ok(())
    }

    /// Serves again the endpoints saved in the repository (at start).
    pub async fn restore_from_repository(&self) -> Result<usize, EndpointError> {
        let Some(repository) = &self.repository else {
            return Ok(0);
        };
        let specs = repository.load_endpoints().await?;
        let count = specs.len();
        {
            let mut endpoints = self.write();
            for spec in specs {
                let name = spec.name.clone();
                match Entry::new(spec) {
                    Ok(entry) => {
                        endpoints.insert(name, Arc::new(entry));
                    }
                    Err(error) => {
                        tracing::warn!(endpoint = %name, %error, "a stored curated endpoint is not served");
                    }
                }
            }
        }
        self.changed();
        Ok(count)
    }

    /// Reads the repository again and makes the API's endpoints what it holds (another replica
    /// of the fleet changed them).
    pub async fn resync_from_repository(&self) -> Result<(), EndpointError> {
        let Some(repository) = &self.repository else {
            return Ok(());
        };
        let stored = repository.load_endpoints().await?;
        let mut changed = false;
        {
            let mut endpoints = self.write();
            let names: Vec<EndpointName> = stored.iter().map(|spec| spec.name.clone()).collect();
            endpoints.retain(|name, entry| {
                let keep = entry.spec.origin == ServerOrigin::Config || names.contains(name);
                changed |= !keep;
                keep
            });
            for spec in stored {
                let same = endpoints
                    .get(&spec.name)
                    .is_some_and(|entry| *entry.spec == spec);
                if same {
                    continue;
                }
                let name = spec.name.clone();
                if let Ok(entry) = Entry::new(spec) {
                    endpoints.insert(name, Arc::new(entry));
                    changed = true;
                }
            }
        }
        if changed {
            self.changed();
        }
        Ok(())
    }

    /// Whether `caller` may use the endpoint `name`: `None` when there is no such endpoint.
    /// Deny wins; a non-empty allow list admits only the principals it names (or their
    /// groups). A caller without a principal (authentication off) is admitted.
    pub fn admits(&self, name: &str, caller: &Caller) -> Option<bool> {
        let entry = self.read().get(name).cloned()?;
        let Some(principal) = caller
            .principal
            .as_deref()
            .and_then(|raw| Principal::parse(raw).ok())
        else {
            return Some(caller.principal.is_none());
        };
        let groups: Vec<Principal> = caller
            .groups
            .iter()
            .filter_map(|group| Principal::parse(group).ok())
            .collect();
        let named = |patterns: &[PrincipalPattern]| {
            patterns
                .iter()
                .any(|pattern| pattern.matches(&principal, &groups))
        };
        Some(!named(&entry.deny) && (entry.allow.is_empty() || named(&entry.allow)))
    }

    /// The endpoint's tools as the catalogue lists them now; `None` when there is no such
    /// endpoint (or no catalogue is set).
    pub fn resolve(&self, name: &str) -> Option<Arc<Resolved>> {
        let entry = self.read().get(name).cloned()?;
        let catalog = self.catalog.get()?;
        let listed = catalog.listed_tools();
        let mut cached = entry
            .resolved
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((from, resolved)) = cached.as_ref()
            && Arc::ptr_eq(from, &listed)
        {
            return Some(Arc::clone(resolved));
        }
        let routes = catalog.owners_of(&listed);
        let resolved = Arc::new(resolve(&entry.spec, &listed, &routes));
        *cached = Some((listed, Arc::clone(&resolved)));
        Some(resolved)
    }
}

/// Whether a string of `value`, or a key of one of its objects, holds the NUL character.
fn holds_nul(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::String(text) => text.contains('\0'),
        serde_json::Value::Array(items) => items.iter().any(holds_nul),
        serde_json::Value::Object(fields) => fields
            .iter()
            .any(|(key, field)| key.contains('\0') || holds_nul(field)),
        _ => false,
    }
}

/// `spec`'s tools among `listed` (the catalogue's list), whose owners and own names are
/// `routes` (same order).
fn resolve(
    spec: &EndpointSpec,
    listed: &[Tool],
    routes: &[Option<(ServerId, String)>],
) -> Resolved {
    let mut resolved = Resolved::default();
    let mut taken: std::collections::HashSet<usize> = std::collections::HashSet::new();
    for selector in &spec.tools {
        for (index, (tool, route)) in listed.iter().zip(routes).enumerate() {
            let Some((server, upstream)) = route else {
                continue;
            };
            if *server != selector.server
                || selector
                    .tool
                    .as_ref()
                    .is_some_and(|wanted| wanted != upstream)
                || taken.contains(&index)
            {
                continue;
            }
            let mut shown = tool.clone();
            if let Some(name) = &selector.name {
                shown.name.clone_from(name);
            }
            if let Some(title) = &selector.title {
                shown.title = Some(title.clone());
            }
            if let Some(description) = &selector.description {
                shown.description = Some(description.clone());
            }
            if let Some(annotations) = &selector.annotations {
                shown.annotations = Some(annotations.clone());
            }
            if let Some(first) = resolved.by_name.get(&shown.name) {
                let first = &resolved.tools[*first];
                tracing::warn!(
                    endpoint = %spec.name,
                    name = %shown.name,
                    listed = %format!("{}/{}", first.server, first.upstream_name),
                    skipped = %format!("{server}/{upstream}"),
                    "two tools of a curated endpoint have one name; the first is served"
                );
                continue;
            }
            taken.insert(index);
            resolved
                .by_name
                .insert(shown.name.clone(), resolved.tools.len());
            resolved.tools.push(EndpointTool {
                tool: shown,
                catalog_name: tool.name.clone(),
                server: server.clone(),
                upstream_name: upstream.clone(),
            });
        }
    }
    resolved
}
