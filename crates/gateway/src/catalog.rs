//! The aggregated catalogue: every managed server's and group's tools under one namespace, and
//! the routing of calls back to the server (or through the group) that owns each tool. Servers
//! that are members of a group are not listed on their own: their tools are reached through
//! the group.
//!
//! A call may name `{server}__{tool}` (or `{group}__{tool}`) before the catalogue knows that
//! server's tools (the probe has not finished, probing is off, or it failed), or a tool that
//! the server's kept list from an earlier run lacks (the program behind an unchanged definition
//! may list more now): the server is started as the call would start it, its tools are
//! learned, and the call is then routed, or answered as an unknown tool when the server has no
//! such tool. With bare naming, a bare name
//! reaches only tools the catalogue knows (nothing says which server an unknown bare name
//! belongs to); the prefixed form reaches every tool, listed bare or not.
//!
//! Names follow `tool_names` (see [`crate::naming`]): the prefix is the owner's id or its custom
//! prefix (which leads back to that owner), and the separator is the configured one. With
//! `prefix: none` a name says nothing about its owner, so a name that is not listed cannot be
//! split: it is an unknown tool until its owner's tools are known and list it. A shortened name
//! cannot be split either: it is reached as listed, and the whole name it stands for reaches
//! the same tool. When two owners would list the same name (possible with `none`,
//! with a shortening that meets another name, or with prefixes that read alike), only the first
//! in id order is listed, a warning is logged and [`DomainEvent::ToolNameCollision`] is
//! published once per collision (again only after it went away and came back). Prompts follow
//! the same rules; resources and resource templates get the prefix on their names, never
//! shortened (they are reached by URI, not by name).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use mcpgw_authz::AccessPath;
use mcpgw_config::ToolNames;
use mcpgw_core::{
    CallContext, Caller, CoreError, DomainEvent, EventObserver, EventSink, FrontendError,
    FrontendErrorKind, McpFrontend, McpSession, PublishedEvent, ResourceSubscription, ServerId,
    ServerManager, SessionError, SessionErrorKind, Tool, ToolCall, ToolCallOutcome, scope_task,
    split_scoped_id,
};
use serde_json::{Map, Value};
use tokio::sync::{Notify, watch};

use crate::groups::GroupService;
use crate::naming::{Assigned, NameCollision, ToolNaming};

/// The default separator of the server (or group) id from the upstream's own name
/// (`tool_names.separator` may name another). Server ids never contain it.
pub const NAME_SEPARATOR: &str = ToolNames::DEFAULT_SEPARATOR;

/// How long listing prompts or resources waits for one running server.
const FAN_OUT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a tool listing waits for tool lists that are being learned.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(5);
/// How many servers are probed for their tools at once, unless
/// [`ToolCatalog::set_probe_concurrency`] says otherwise.
pub const DEFAULT_PROBE_CONCURRENCY: usize = 4;

/// A tool name as a call of it would be routed and authorized (see [`ToolCatalog::resolve`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedTool {
    /// The server or group that serves it.
    pub owner: ServerId,
    /// Whether `owner` is a group (its members are never called by their own names).
    pub is_group: bool,
    /// The owner's own name for the tool.
    pub tool: String,
    /// Whether the catalogue lists the name now; an unlisted name is authorized on the path
    /// its tool would have, before its server is started to learn whether the tool exists.
    pub listed: bool,
    /// The tool access policies the call must pass, most specific first.
    pub path: AccessPath,
}

/// Who answers an exposed tool.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owner {
    Server(ServerId),
    Group(ServerId),
}

impl Owner {
    fn id(&self) -> &ServerId {
        match self {
            Owner::Server(id) | Owner::Group(id) => id,
        }
    }
}

#[derive(Default)]
struct Snapshot {
    /// The `dirty` counter value this snapshot was built at.
    built_at: u64,
    tools: Arc<Vec<Tool>>,
    /// Exposed tool name -> (owner, the upstream's own name); also the whole prefixed form of
    /// every tool listed bare or shortened.
    routes: HashMap<String, (Owner, String)>,
    /// Routed tool name -> its access path for authorization, made once per build rather
    /// than per listing.
    paths: HashMap<String, AccessPath>,
}

/// The [`McpFrontend`] over a [`ServerManager`] (and, when given, a [`GroupService`]).
///
/// The tool list is built from what the manager already knows (live tools of servers that ran,
/// predefined tools of the others) and cached; it is rebuilt only after an event that can change
/// it, so listing never starts a server and never fans out to upstreams.
pub struct ToolCatalog {
    manager: ServerManager,
    groups: Option<Arc<GroupService>>,
    naming: ToolNaming,
    /// Where [`DomainEvent::ToolNameCollision`] is published, once set.
    events: RwLock<Option<Arc<dyn EventSink>>>,
    /// The collisions of the newest build so far, and the `dirty` counter value it was built
    /// at: a collision is reported when a build finds it and the one before did not.
    collisions: std::sync::Mutex<(u64, std::collections::HashSet<NameCollision>)>,
    dirty: AtomicU64,
    snapshot: RwLock<Snapshot>,
    changes: watch::Sender<u64>,
    rebuild_wanted: Notify,
    resource_routes: RwLock<HashMap<String, ServerId>>,
    /// Exposed prompt name -> (server, the upstream's own name), as last listed.
    prompt_routes: RwLock<HashMap<String, (ServerId, String)>>,
    /// Servers whose tools were probed (or are being probed); a server leaves the set when its
    /// definition changes, so a failed probe is not retried in a loop.
    probed: std::sync::Mutex<std::collections::HashSet<ServerId>>,
    /// One permit per probe that may run at once; a probe holds its permit from before its
    /// start until its stop.
    probe_slots: std::sync::Mutex<Arc<tokio::sync::Semaphore>>,
    probes_pending: watch::Sender<usize>,
    probing: std::sync::atomic::AtomicBool,
    /// How many callers subscribe to each (server, resource URI): the server is told to stop
    /// announcing a resource once the last of them is gone.
    resource_subscribers: Arc<std::sync::Mutex<HashMap<(ServerId, String), usize>>>,
    /// The most verbose log level any client asked for.
    log_levels: LogLevels,
    /// The prompt and resource list changes the running servers announced.
    list_changes: watch::Sender<mcpgw_core::ListChanges>,
    /// Whether a server that started offered tasks; once one did, the catalog declares them
    /// (its tasks may outlive its run).
    tasks_offered: std::sync::atomic::AtomicBool,
    /// Where work started by event observers runs (observers may be called off the runtime).
    runtime: Option<tokio::runtime::Handle>,
    /// The pin ledger, when tools are pinned: lists are reviewed against it as they are built.
    pins: std::sync::OnceLock<Arc<crate::ToolPins>>,
    /// How each server and group whose tools are pinned is pinned, as of the last build: what
    /// a check outside a build reads, instead of working it out from the definitions again. A
    /// call to an owner pinned with `enforce` checks, once the server runs, that the tool it
    /// names is still admitted (a server that starts for the call may list other tools than it
    /// did before).
    pinned: RwLock<HashMap<ServerId, mcpgw_core::ToolPinning>>,
    any_enforced: std::sync::atomic::AtomicBool,
}

/// The most verbose `logging/setLevel` level asked for so far.
#[derive(Debug, Default)]
struct LogLevels {
    most_verbose: std::sync::Mutex<Option<usize>>,
}

impl LogLevels {
    /// The level upstreams log at, once any client asked for one.
    fn current(&self) -> Option<&'static str> {
        let most_verbose = *self
            .most_verbose
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        most_verbose.and_then(|level| mcpgw_core::LOG_LEVELS.get(level).copied())
    }

    /// Records a level asked for; answers the level upstreams should log at (the most verbose
    /// asked for so far), or `None` for a name that is not a level.
    fn ask(&self, level: &str) -> Option<&'static str> {
        let asked = mcpgw_core::log_severity(level)?;
        let mut most_verbose = self
            .most_verbose
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let level = most_verbose.map_or(asked, |current| current.min(asked));
        *most_verbose = Some(level);
        Some(mcpgw_core::LOG_LEVELS[level])
    }
}

impl std::fmt::Debug for ToolCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCatalog")
            .field("naming", &self.naming)
            .finish_non_exhaustive()
    }
}

impl ToolCatalog {
    /// Builds the catalogue. Register [`ToolCatalog::observer`] on the event bus, and run
    /// [`ToolCatalog::run_change_notifier`] in a task, so that changes reach clients. Tools
    /// and prompts are named as `naming` says.
    pub fn new(manager: ServerManager, naming: ToolNames) -> Arc<Self> {
        Self::assemble(manager, None, naming)
    }

    /// Builds the catalogue with groups: each group's tools are listed as `{group}__{tool}` and
    /// routed through [`GroupService::call_tool`], and the members' own tools are not listed.
    /// Group events reach the catalogue through [`ToolCatalog::observer`] like server events.
    pub fn with_groups(
        manager: ServerManager,
        naming: ToolNames,
        groups: Arc<GroupService>,
    ) -> Arc<Self> {
        Self::assemble(manager, Some(groups), naming)
    }

    fn assemble(
        manager: ServerManager,
        groups: Option<Arc<GroupService>>,
        naming: ToolNames,
    ) -> Arc<Self> {
        Arc::new(Self {
            manager,
            groups,
            naming: ToolNaming::new(naming),
            events: RwLock::new(None),
            collisions: std::sync::Mutex::default(),
            // Start dirty, so the first read builds.
            dirty: AtomicU64::new(1),
            snapshot: RwLock::new(Snapshot::default()),
            changes: watch::channel(0).0,
            rebuild_wanted: Notify::new(),
            resource_routes: RwLock::new(HashMap::new()),
            prompt_routes: RwLock::new(HashMap::new()),
            probed: std::sync::Mutex::new(std::collections::HashSet::new()),
            probe_slots: std::sync::Mutex::new(Arc::new(tokio::sync::Semaphore::new(
                DEFAULT_PROBE_CONCURRENCY,
            ))),
            probes_pending: watch::channel(0).0,
            probing: std::sync::atomic::AtomicBool::new(true),
            resource_subscribers: Arc::default(),
            log_levels: LogLevels::default(),
            list_changes: watch::Sender::new(mcpgw_core::ListChanges::default()),
            tasks_offered: std::sync::atomic::AtomicBool::new(false),
            runtime: tokio::runtime::Handle::try_current().ok(),
            pins: std::sync::OnceLock::new(),
            pinned: RwLock::new(HashMap::new()),
            any_enforced: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Where to run work an event observer starts.
    fn runtime(&self) -> Option<tokio::runtime::Handle> {
        tokio::runtime::Handle::try_current()
            .ok()
            .or_else(|| self.runtime.clone())
    }

    /// Follows a server that just started: tells it the log level clients asked for, if any
    /// asked, and passes on, while it runs, its announcements that its prompts or resources
    /// changed.
    fn follow_started_server(&self, server: &ServerId) {
        let (Some(session), Some(runtime)) = (self.manager.running_session(server), self.runtime())
        else {
            return;
        };
        if session.offers_tasks() {
            self.tasks_offered
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        if let Some(level) = self.log_levels.current() {
            let (session, server) = (Arc::clone(&session), server.clone());
            runtime.spawn(async move {
                let asked = tokio::time::timeout(FAN_OUT_TIMEOUT, session.set_logging_level(level));
                if !matches!(asked.await, Ok(Ok(()))) {
                    tracing::debug!(%server, level, "a started server was not told the log level");
                }
            });
        }
        let Some(mut announced) = session.list_changes() else {
            return;
        };
        let changes = self.list_changes.clone();
        runtime.spawn(async move {
            // The session counts from zero: what it announced before this task ran counts too.
            let mut seen = mcpgw_core::ListChanges::default();
            loop {
                let now = *announced.borrow_and_update();
                if now != seen {
                    changes.send_modify(|total| {
                        total.prompts = total
                            .prompts
                            .wrapping_add(now.prompts.wrapping_sub(seen.prompts));
                        total.resources = total
                            .resources
                            .wrapping_add(now.resources.wrapping_sub(seen.resources));
                    });
                    seen = now;
                }
                // Ends with the session, which drops its sender.
                if announced.changed().await.is_err() {
                    return;
                }
            }
        });
    }

    /// The event observer that marks the catalogue stale when a server's tools may have changed.
    pub fn observer(self: &Arc<Self>) -> Arc<dyn EventObserver> {
        Arc::new(CatalogObserver {
            catalog: Arc::downgrade(self),
        })
    }

    /// Learns, in the background, the tools of every server that never ran and declares none
    /// (see [`ServerManager::probe_tools`]), at most [`ToolCatalog::set_probe_concurrency`] at
    /// a time (whenever they were registered: at start-up, by a reload, over the API). Each
    /// server is probed once per definition. Call it from within a tokio runtime.
    pub fn probe_unknown_tools(self: &Arc<Self>) {
        if !self.probing.load(Ordering::Acquire) {
            return;
        }
        let unknown: Vec<ServerId> = self
            .manager
            .list(None)
            .into_iter()
            .filter(|server| server.tool_source == mcpgw_core::ToolSource::Unknown)
            .map(|server| server.id().clone())
            .collect();
        for id in unknown {
            let newly = self
                .probed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id.clone());
            if !newly {
                continue;
            }
            self.probes_pending.send_modify(|pending| *pending += 1);
            let catalog = Arc::clone(self);
            let slots = Arc::clone(&self.probe_slots.lock().unwrap_or_else(|p| p.into_inner()));
            tokio::spawn(async move {
                if let Ok(_slot) = slots.acquire_owned().await {
                    let clock = catalog.manager.clock();
                    let started = clock.now();
                    let probed = catalog.manager.probe_tools(&id).await;
                    crate::metrics::tool_probe_timed(
                        &id,
                        probed.is_ok(),
                        clock.now().saturating_since(started),
                    );
                    if let Err(error) = probed {
                        tracing::warn!(server = %id, %error, "could not learn the tools of an mcp server");
                    }
                }
                catalog.probes_pending.send_modify(|pending| *pending -= 1);
            });
        }
    }

    /// Turns probing on or off (it is on by default).
    pub fn set_probing(&self, enabled: bool) {
        self.probing.store(enabled, Ordering::Release);
    }

    /// Where the catalogue publishes its events ([`DomainEvent::ToolNameCollision`]); without
    /// one, collisions are only logged.
    pub fn set_events(&self, events: Arc<dyn EventSink>) {
        *self.events.write().unwrap_or_else(|p| p.into_inner()) = Some(events);
    }

    /// How tools and prompts are named.
    pub fn naming(&self) -> &ToolNaming {
        &self.naming
    }

    /// Logs and publishes the collisions of the build at `built_at` that the build before it
    /// did not have. A build that finishes after a newer one reports nothing.
    fn report_collisions(&self, built_at: u64, found: Vec<NameCollision>) {
        let fresh: Vec<NameCollision> = {
            let mut reported = self.collisions.lock().unwrap_or_else(|p| p.into_inner());
            if built_at < reported.0 {
                return;
            }
            let found: std::collections::HashSet<NameCollision> = found.into_iter().collect();
            let fresh = found
                .iter()
                .filter(|collision| !reported.1.contains(*collision))
                .cloned()
                .collect();
            *reported = (built_at, found);
            fresh
        };
        if fresh.is_empty() {
            return;
        }
        let events = self
            .events
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for collision in fresh {
            tracing::warn!(
                name = %collision.name,
                server = %collision.owner,
                tool = %collision.tool,
                listed_from = %collision.listed_from,
                "two tools would be listed under one name; only the first (in id order) is listed"
            );
            if let (Some(events), Ok(mcp_server_id)) = (&events, ServerId::parse(&collision.owner))
            {
                events.publish(
                    self.manager.clock().wall(),
                    DomainEvent::ToolNameCollision {
                        mcp_server_id,
                        tool: collision.tool,
                        name: collision.name,
                        listed_from: collision.listed_from,
                    },
                );
            }
        }
    }

    /// How many servers may be probed at once (at least 1; [`DEFAULT_PROBE_CONCURRENCY`] until
    /// set). Probes already waiting or running keep the bound they were scheduled under, so set
    /// it before probing starts.
    pub fn set_probe_concurrency(&self, probes: usize) {
        *self.probe_slots.lock().unwrap_or_else(|p| p.into_inner()) =
            Arc::new(tokio::sync::Semaphore::new(probes.max(1)));
    }

    fn forget_probe(&self, id: &ServerId) {
        self.probed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
    }

    /// Rebuilds after changes and moves [`McpFrontend::changes`] when the list really changed;
    /// probes servers whose tools are unknown. Runs until the catalogue is dropped.
    pub async fn run_change_notifier(self: Arc<Self>) {
        // Compared with the list last announced, not with the cached one: a listing between
        // the event and this task's turn rebuilds the cache, and the change must still be
        // announced to the clients that did not list. The first baseline is the empty list, so
        // the first tools ever known are announced even if this task starts late.
        let mut announced: Arc<Vec<Tool>> = Arc::default();
        loop {
            self.probe_unknown_tools();
            self.rebuild_wanted.notified().await;
            let current = self.current_tools();
            if *current != *announced {
                self.changes.send_modify(|version| *version += 1);
                announced = current;
            }
        }
    }

    fn mark_dirty(&self) {
        self.dirty.fetch_add(1, Ordering::AcqRel);
        self.rebuild_wanted.notify_one();
    }

    fn snapshot(&self) -> std::sync::RwLockReadGuard<'_, Snapshot> {
        self.snapshot
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The tool list, rebuilt first when an event made it stale.
    fn current_tools(&self) -> Arc<Vec<Tool>> {
        let dirty = self.dirty.load(Ordering::Acquire);
        {
            let snapshot = self.snapshot();
            if snapshot.built_at == dirty {
                return Arc::clone(&snapshot.tools);
            }
        }
        let rebuilt = self.build(dirty);
        let tools = Arc::clone(&rebuilt.tools);
        let mut snapshot = self
            .snapshot
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // A concurrent rebuild may have seen newer events; keep the newest.
        if rebuilt.built_at >= snapshot.built_at {
            *snapshot = rebuilt;
        }
        tools
    }

    fn build(&self, built_at: u64) -> Snapshot {
        let members = self
            .groups
            .as_ref()
            .map(|groups| groups.member_ids())
            .unwrap_or_default();
        let mut per_server: Vec<(Owner, Vec<Tool>)> = Vec::new();
        let mut pinned = HashMap::new();
        for server in self.manager.list(None) {
            let id = server.id().clone();
            if members.contains(&id) {
                continue;
            }
            if let Ok(list) = self.manager.tool_list(&id) {
                let pinning = self.server_pinning(server.spec.tool_pinning);
                let tools = self.pinned_tools(&id, pinning, &list.tools, &mut pinned);
                per_server.push((Owner::Server(id), tools));
            }
        }
        if let Some(groups) = &self.groups {
            for id in groups.ids() {
                if let Some(tools) = groups.tools(&id) {
                    let pinning = self.group_pinning(&id);
                    let tools = self.pinned_tools(&id, pinning, &Arc::new(tools), &mut pinned);
                    per_server.push((Owner::Group(id), tools));
                }
            }
            // Servers and groups share one namespace: list them in one id order.
            per_server.sort_by(|(left, _), (right, _)| left.id().cmp(right.id()));
        }
        let any_enforced = pinned
            .values()
            .any(|pinning: &mcpgw_core::ToolPinning| pinning.mode == mcpgw_core::PinMode::Enforce);
        self.any_enforced.store(any_enforced, Ordering::Release);
        *self.pinned.write().unwrap_or_else(|p| p.into_inner()) = pinned;
        let names: Vec<(&str, Vec<&str>)> = per_server
            .iter()
            .map(|(owner, tools)| {
                let tools = tools.iter().map(|tool| tool.name.as_str()).collect();
                (owner.id().as_str(), tools)
            })
            .collect();
        let assigned = self.naming.assign(&names);
        let mut collisions = Vec::new();
        let mut exposed = Vec::new();
        let mut routes = HashMap::new();
        let mut paths = HashMap::new();
        // The whole prefixed forms of tools listed bare or shortened, added once every listed
        // name is in, so that a listed name always wins over an alias that happens to spell
        // the same.
        let mut aliases = Vec::new();
        for ((owner, tools), assigned) in per_server.iter().zip(assigned) {
            for (tool, assigned) in tools.iter().zip(assigned) {
                let name = match assigned {
                    Assigned::Listed { name, alias } => {
                        if let Some(alias) = alias {
                            aliases.push((alias, owner, &tool.name));
                        }
                        name
                    }
                    Assigned::Collides(collision) => {
                        collisions.push(collision);
                        continue;
                    }
                    Assigned::Repeated => continue,
                };
                let path = access_path_of(owner, &tool.name);
                if let Some(path) = path {
                    paths.insert(name.clone(), path);
                }
                routes.insert(name.clone(), (owner.clone(), tool.name.clone()));
                exposed.push(Tool {
                    name,
                    ..tool.clone()
                });
            }
        }
        for (alias, owner, tool) in aliases {
            if routes.contains_key(&alias) {
                continue;
            }
            if let Some(path) = access_path_of(owner, tool) {
                paths.insert(alias.clone(), path);
            }
            routes.insert(alias, (owner.clone(), tool.clone()));
        }
        self.report_collisions(built_at, collisions);
        Snapshot {
            built_at,
            tools: Arc::new(exposed),
            routes,
            paths,
        }
    }

    /// The tool access path of an exposed tool name, for authorization: the tool and its
    /// server, or the tool and its group. `None` for a name that is not listed.
    pub fn access_path(&self, name: &str) -> Option<AccessPath> {
        self.current_tools();
        self.snapshot().paths.get(name).cloned()
    }

    /// The access path a call of `name` would have if its tool exists, for a name the catalogue
    /// does not list: `{server}__{tool}` of a server that is not a group member, or
    /// `{group}__{tool}`. A call of such a name may start the server to learn its tools, so it
    /// is authorized on this path first. `None` when no server or group has that id.
    pub fn unlisted_access_path(&self, name: &str) -> Option<AccessPath> {
        let (owner, tool) = self.owner_of(name)?;
        match owner {
            Owner::Server(server) => AccessPath::server_tool(&server, tool).ok(),
            Owner::Group(group) => AccessPath::group_tool(&group, tool, None).ok(),
        }
    }

    /// How a call of `name` is routed and authorized, for explaining a decision: whose tool it
    /// is (a server's or a group's), the owner's own name for it, whether the catalogue lists
    /// the name now, and the access path the call is authorized on (the path of
    /// [`ToolCatalog::access_path`], else of [`ToolCatalog::unlisted_access_path`]). `None` for
    /// a name no server or group would serve.
    pub fn resolve(&self, name: &str) -> Option<ResolvedTool> {
        let (owner, tool, listed) = self.serving(name)?;
        let path = if listed {
            self.access_path(name)?
        } else {
            self.unlisted_access_path(name)?
        };
        let (owner, is_group) = match owner {
            Owner::Server(id) => (id, false),
            Owner::Group(id) => (id, true),
        };
        Some(ResolvedTool {
            owner,
            is_group,
            tool,
            listed,
            path,
        })
    }

    /// Who would own the tool `name` names in its prefixed form: a group, or a server that is
    /// not a member of one (members are reached through their groups only). The first reading
    /// of the name (see [`ToolNaming::split`]) that names such an owner counts; with
    /// `prefix: none` no name has an owner.
    fn owner_of<'a>(&self, name: &'a str) -> Option<(Owner, &'a str)> {
        self.split(name)
            .into_iter()
            .find_map(|(id, tool)| self.listed_owner(id, tool))
    }

    /// `id` as the owner of `tool`, when it is a group or a server that is not a member.
    fn listed_owner<'a>(&self, id: ServerId, tool: &'a str) -> Option<(Owner, &'a str)> {
        if tool.is_empty() {
            return None;
        }
        if let Some(groups) = &self.groups {
            if groups.contains(&id) {
                return Some((Owner::Group(id), tool));
            }
            if groups.is_member(&id) {
                return None;
            }
        }
        self.manager
            .contains(&id)
            .then_some((Owner::Server(id), tool))
    }

    /// Whether `owner` has the tool `tool`, as far as its tools are known; `None` while only a
    /// start can tell (the server never ran and declares none, or only its kept list is known
    /// and lacks the tool; likewise for every member of the group).
    fn knows_tool(&self, owner: &Owner, tool: &str) -> Option<bool> {
        match owner {
            Owner::Server(server) => match self.manager.knows_tool(server, tool) {
                Ok(known) => known,
                // Removed meanwhile: it has no tools.
                Err(_) => Some(false),
            },
            Owner::Group(group) => match &self.groups {
                Some(groups) if groups.contains(group) => groups.knows_tool(group, tool),
                _ => Some(false),
            },
        }
    }

    /// The route of a name that the catalogue does not list. A `{server}__{tool}` or
    /// `{group}__{tool}` name whose owner cannot tell yet whether it has the tool (see
    /// [`ServerManager::knows_tool`]) starts the server (or a member of the group) as a call
    /// would, single flight with every other start, and learns its tools; the name is then
    /// routed if the tool exists. Any other name is an unknown tool.
    async fn unlisted_route(&self, name: &str) -> Result<(Owner, String), FrontendError> {
        let unknown = || FrontendError::unknown("tool", name);
        let (owner, tool) = self.owner_of(name).ok_or_else(unknown)?;
        let has_tool = match self.knows_tool(&owner, tool) {
            Some(has_tool) => has_tool,
            None => {
                tracing::debug!(owner = %owner.id(), tool, "starting to learn the tools a call names");
                match &owner {
                    Owner::Server(server) => {
                        self.manager
                            .start_for_call(server)
                            .await
                            .map_err(frontend_error)?;
                    }
                    Owner::Group(group) => {
                        if let Some(groups) = &self.groups {
                            groups.learn_tools(group).await.map_err(frontend_error)?;
                        }
                    }
                }
                self.knows_tool(&owner, tool).unwrap_or(false)
            }
        };
        if has_tool && self.pin_admits(&owner, tool) {
            Ok((owner, tool.to_owned()))
        } else {
            Err(unknown())
        }
    }

    /// The listed tools whose access path `admit` lets through, read from one snapshot; the
    /// whole list (the same `Arc`) when every tool passes.
    pub fn tools_admitted(&self, admit: impl Fn(&AccessPath) -> bool) -> Arc<Vec<Tool>> {
        self.current_tools();
        let snapshot = self.snapshot();
        let visible: Vec<Tool> = snapshot
            .tools
            .iter()
            .filter(|tool| snapshot.paths.get(&tool.name).is_some_and(&admit))
            .cloned()
            .collect();
        if visible.len() == snapshot.tools.len() {
            Arc::clone(&snapshot.tools)
        } else {
            Arc::new(visible)
        }
    }

    /// Who serves `name`, for a span: the attribute that names its owner (a server's or a
    /// group's id) and the id. `None` for a name no server or group serves.
    pub fn owner_attribute(&self, name: &str) -> Option<(&'static str, String)> {
        Some(match self.serving(name)?.0 {
            Owner::Server(server) => (mcpgw_core::trace::keys::MCP_SERVER_ID, server.to_string()),
            Owner::Group(group) => (mcpgw_core::trace::keys::GROUP_ID, group.to_string()),
        })
    }

    /// Who serves `name` and under which of its own names: the route of a listed name, else
    /// the owner its prefixed form names; and whether it is listed.
    fn serving(&self, name: &str) -> Option<(Owner, String, bool)> {
        match self.route(name) {
            Some((owner, tool)) => Some((owner, tool, true)),
            None => {
                let (owner, tool) = self.owner_of(name)?;
                Some((owner, tool.to_owned(), false))
            }
        }
    }

    fn route(&self, name: &str) -> Option<(Owner, String)> {
        self.current_tools();
        self.snapshot().routes.get(name).cloned()
    }

    /// The readings of a namespaced `{prefix}{separator}{name}` as (owner, name), first
    /// separator first (see [`ToolNaming::split`]); none with `prefix: none`.
    fn split<'a>(&self, name: &'a str) -> Vec<(ServerId, &'a str)> {
        self.naming.split(name)
    }

    /// Asks every running server for one of its lists, all at once, each bounded by
    /// [`FAN_OUT_TIMEOUT`]; a server that fails or is slow contributes nothing. In id order.
    async fn ask_running_servers(
        &self,
        ask: impl Fn(Arc<dyn McpSession>) -> BoxFuture<'static, Result<Vec<Value>, SessionError>>,
    ) -> Vec<(ServerId, Vec<Value>)> {
        let sessions = self.running_sessions().await;
        futures::future::join_all(sessions.into_iter().map(|(id, session)| {
            let listing = tokio::time::timeout(FAN_OUT_TIMEOUT, ask(session));
            async move {
                match listing.await {
                    Ok(Ok(items)) => (id, items),
                    _ => (id, Vec::new()),
                }
            }
        }))
        .await
    }

    /// The first running server (in id order) with a resource template that `uri` matches.
    async fn template_owner(&self, uri: &str) -> Option<ServerId> {
        self.first_template_server(|pattern| uri_matches_template(uri, pattern))
            .await
    }

    /// The first running server (in id order) that lists a resource template whose
    /// `uriTemplate` satisfies `wanted`.
    async fn first_template_server(&self, wanted: impl Fn(&str) -> bool) -> Option<ServerId> {
        let listed = self
            .ask_running_servers(|session| {
                Box::pin(async move { session.list_resource_templates().await })
            })
            .await;
        listed.into_iter().find_map(|(id, templates)| {
            templates
                .iter()
                .filter_map(|template| template.get("uriTemplate").and_then(Value::as_str))
                .any(&wanted)
                .then_some(id)
        })
    }

    /// The server and its own name of the prompt listed as `name`: from the routes of the
    /// last listing (listing again when it is not there), else a namespaced name, which also
    /// reaches a server that is not running yet (it is started).
    async fn prompt_route(
        &self,
        caller: &Caller,
        name: &str,
    ) -> Result<(ServerId, String), FrontendError> {
        let known = |catalog: &Self| {
            catalog
                .prompt_routes
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(name)
                .cloned()
        };
        if let Some(route) = known(self) {
            return Ok(route);
        }
        self.prompts(caller).await;
        if let Some(route) = known(self) {
            return Ok(route);
        }
        // The reading that names a registered server, else the first (which then answers
        // that the server does not exist).
        let readings = self.split(name);
        let reading = readings
            .iter()
            .find(|(server, _)| self.manager.contains(server))
            .or(readings.first());
        match reading {
            Some((server, prompt)) => Ok((server.clone(), (*prompt).to_owned())),
            None => Err(FrontendError::unknown("prompt", name)),
        }
    }

    /// The server that serves `uri`: the one that listed it last, else (listing again) the
    /// first running server that lists it or has a template it matches.
    async fn resource_owner(&self, caller: &Caller, uri: &str) -> Result<ServerId, FrontendError> {
        let known = |catalog: &Self| {
            catalog
                .resource_routes
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(uri)
                .cloned()
        };
        if let Some(server) = known(self) {
            return Ok(server);
        }
        self.resources(caller).await;
        match known(self) {
            Some(server) => Ok(server),
            None => self
                .template_owner(uri)
                .await
                .ok_or_else(|| FrontendError::unknown("resource", uri)),
        }
    }

    async fn running_sessions(&self) -> Vec<(ServerId, Arc<dyn McpSession>)> {
        self.manager
            .list(None)
            .into_iter()
            .filter_map(|snapshot| {
                let id = snapshot.id().clone();
                self.manager
                    .running_session(&id)
                    .map(|session| (id, session))
            })
            .collect()
    }
}

/// Tool pinning.
impl ToolCatalog {
    /// Reviews every tool list against `pins` from now on (see [`crate::ToolPins`]); a
    /// decision on the ledger rebuilds the list.
    pub fn set_tool_pins(self: &Arc<Self>, pins: Arc<crate::ToolPins>) {
        let catalog = Arc::downgrade(self);
        pins.on_change(move || {
            if let Some(catalog) = catalog.upgrade() {
                catalog.mark_dirty();
            }
        });
        if self.pins.set(pins).is_ok() {
            self.mark_dirty();
        }
    }

    /// How a server whose definition says `own` is pinned.
    fn server_pinning(&self, own: Option<mcpgw_core::ToolPinning>) -> mcpgw_core::ToolPinning {
        match self.pins.get() {
            Some(pins) => pins.pinning_of(own),
            None => mcpgw_core::ToolPinning::OFF,
        }
    }

    /// How a group is pinned: the strictest of the gateway's default and its members'
    /// settings, since its tools are theirs.
    fn group_pinning(&self, group: &ServerId) -> mcpgw_core::ToolPinning {
        let (Some(pins), Some(groups)) = (self.pins.get(), &self.groups) else {
            return mcpgw_core::ToolPinning::OFF;
        };
        let members = groups
            .get(group)
            .map(|view| view.members)
            .unwrap_or_default();
        members
            .iter()
            .filter_map(|member| self.manager.snapshot(&member.id).ok())
            .fold(pins.default_pinning(), |pinning, member| {
                pinning.strictest(pins.pinning_of(member.spec.tool_pinning))
            })
    }

    /// The tools of `owner`'s list that pinning admits; notes in `pinned` how an owner whose
    /// tools are pinned is pinned.
    fn pinned_tools(
        &self,
        owner: &ServerId,
        pinning: mcpgw_core::ToolPinning,
        tools: &Arc<Vec<Tool>>,
        pinned: &mut HashMap<ServerId, mcpgw_core::ToolPinning>,
    ) -> Vec<Tool> {
        let Some(pins) = self.pins.get().filter(|_| pinning.is_on()) else {
            return tools.as_ref().clone();
        };
        pinned.insert(owner.clone(), pinning);
        Arc::unwrap_or_clone(pins.admit(owner, pinning, tools))
    }

    /// The listed tools, as one snapshot holds them: the same `Arc` until the list is rebuilt.
    pub fn listed_tools(&self) -> Arc<Vec<Tool>> {
        self.current_tools()
    }

    /// For each of `tools` (listed names), the server or group that owns it and the tool's own
    /// name there; `None` for a name that is not routed (any more).
    pub fn owners_of(&self, tools: &[Tool]) -> Vec<Option<(ServerId, String)>> {
        let snapshot = self.snapshot();
        tools
            .iter()
            .map(|tool| {
                snapshot
                    .routes
                    .get(&tool.name)
                    .map(|(owner, own_name)| (owner.id().clone(), own_name.clone()))
            })
            .collect()
    }

    /// Forgets the pins of a server or group that was removed, in the background.
    fn forget_pins(&self, owner: &ServerId) {
        if let (Some(pins), Some(runtime)) = (self.pins.get(), self.runtime()) {
            let (pins, owner) = (Arc::clone(pins), owner.clone());
            runtime.spawn(async move { pins.forget(&owner).await });
        }
    }

    /// How `owner` was pinned at the last build; `None` when its tools are not pinned.
    fn pinning_at_build(&self, owner: &ServerId) -> Option<mcpgw_core::ToolPinning> {
        self.pinned
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(owner)
            .copied()
    }

    fn is_enforced(&self, owner: &ServerId) -> bool {
        self.pinning_at_build(owner)
            .is_some_and(|pinning| pinning.mode == mcpgw_core::PinMode::Enforce)
    }

    /// Whether pinning admits `owner`'s tool `tool` as the owner lists it now.
    fn pin_admits(&self, owner: &Owner, tool: &str) -> bool {
        let Some(pins) = self.pins.get() else {
            return true;
        };
        // Every owner is in the last build (a registration or change rebuilds before a call is
        // routed); one that is not there is not pinned.
        let Some(pinning) = self.pinning_at_build(owner.id()) else {
            return true;
        };
        let tools = match owner {
            Owner::Server(server) => match self.manager.tool_list(server) {
                Ok(list) => list.tools,
                Err(_) => return false,
            },
            Owner::Group(group) => {
                match self.groups.as_ref().and_then(|groups| groups.tools(group)) {
                    Some(tools) => Arc::new(tools),
                    None => return false,
                }
            }
        };
        pins.admit(owner.id(), pinning, &tools)
            .iter()
            .any(|admitted| admitted.name == tool)
    }

    /// For a call routed to an owner pinned with `enforce`: starts the server when it is not
    /// running (as the call would), then checks that the tool is still admitted, so that a
    /// server that restarts with a changed tool never has the changed tool called.
    async fn verify_pinned(
        &self,
        owner: &Owner,
        tool: &str,
        name: &str,
    ) -> Result<(), FrontendError> {
        if let Owner::Server(server) = owner
            && self.manager.running_session(server).is_none()
        {
            self.manager
                .start_for_call(server)
                .await
                .map_err(frontend_error)?;
        }
        if self.pin_admits(owner, tool) {
            Ok(())
        } else {
            Err(FrontendError::unknown("tool", name))
        }
    }
}

/// The access path of `owner`'s tool `tool`, for authorization.
fn access_path_of(owner: &Owner, tool: &str) -> Option<AccessPath> {
    match owner {
        Owner::Server(server) => AccessPath::server_tool(server, tool).ok(),
        Owner::Group(group) => AccessPath::group_tool(group, tool, None).ok(),
    }
}

/// Maps the manager's errors to what an MCP client is told.
fn frontend_error(error: CoreError) -> FrontendError {
    let message = error.to_string();
    let kind = match &error {
        CoreError::ServerNotFound(_) | CoreError::GroupNotFound(_) => {
            FrontendErrorKind::UnknownName
        }
        CoreError::GroupUnavailable(_) => FrontendErrorKind::Unavailable,
        CoreError::Session { source, .. } => match source.kind {
            SessionErrorKind::Protocol { code } => {
                return FrontendError::new(FrontendErrorKind::Upstream { code }, &source.message)
                    .with_data(source.data.clone());
            }
            SessionErrorKind::Timeout => FrontendErrorKind::Timeout,
            SessionErrorKind::Cancelled => FrontendErrorKind::Cancelled,
            _ => FrontendErrorKind::Unavailable,
        },
        _ => FrontendErrorKind::Unavailable,
    };
    FrontendError::new(kind, message)
}

/// Whether `uri` is one of the URIs an RFC 6570 template describes, for the simple expressions
/// (`{name}`) resource templates use: each expression matches one or more characters other than
/// `/`, and the literal text around them must match exactly.
fn uri_matches_template(uri: &str, template: &str) -> bool {
    let mut literals = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            return false;
        };
        literals.push(&rest[..open]);
        rest = &rest[open + close + 1..];
    }
    let last = rest;
    let Some(first) = literals.first() else {
        return uri == template;
    };
    let Some(mut remaining) = uri.strip_prefix(first) else {
        return false;
    };
    // Each expression is followed by the next literal (or, for the last one, by `last`).
    for literal in literals.iter().skip(1).chain(std::iter::once(&last)) {
        let value_end = if literal.is_empty() {
            remaining.find('/').unwrap_or(remaining.len())
        } else {
            match remaining.find(literal) {
                Some(at) => at,
                None => return false,
            }
        };
        if value_end == 0 || remaining[..value_end].contains('/') {
            return false;
        }
        remaining = &remaining[value_end..];
        match remaining.strip_prefix(literal) {
            Some(after) => remaining = after,
            None => return false,
        }
    }
    remaining.is_empty()
}

/// A resource or template with its server's prefix on its name (whole: it is never shortened,
/// since nothing is reached by it), or as it is when names are not prefixed.
fn rename(mut item: Value, server: &ServerId, naming: &ToolNaming) -> Value {
    if let Some(name) = item.get("name").and_then(Value::as_str) {
        let namespaced = naming.full_name(server.as_str(), name);
        item["name"] = Value::String(namespaced);
    }
    item
}

#[async_trait]
impl McpFrontend for ToolCatalog {
    fn tools(&self, _caller: &Caller) -> Arc<Vec<Tool>> {
        self.current_tools()
    }

    async fn call_tool(
        &self,
        caller: &Caller,
        name: &str,
        arguments: Option<Map<String, Value>>,
        mut ctx: CallContext,
    ) -> Result<ToolCallOutcome, FrontendError> {
        // The rarer paths' futures are boxed: inline, they would make every call's future as
        // large as theirs (kilobytes), and a block that large costs more to allocate than
        // routing the call.
        let (owner, tool) = match self.route(name) {
            Some(route) => route,
            None => Box::pin(self.unlisted_route(name)).await?,
        };
        if self.any_enforced.load(Ordering::Acquire) && self.is_enforced(owner.id()) {
            Box::pin(self.verify_pinned(&owner, &tool, name)).await?;
        }
        if ctx.principal.is_none() {
            ctx.principal.clone_from(&caller.principal);
        }
        let call = ToolCall {
            name: tool,
            arguments,
        };
        let result = match (&owner, &self.groups) {
            (Owner::Server(server), _) => self.manager.call_tool(server, call, ctx).await,
            (Owner::Group(group), Some(groups)) => {
                Box::pin(groups.call_tool(group, call, ctx)).await
            }
            // Group routes exist only when the catalogue has groups.
            (Owner::Group(group), None) => Err(CoreError::GroupNotFound(group.clone())),
        };
        result
            .map(|outcome| scope_task(outcome, owner.id()))
            .map_err(frontend_error)
    }

    async fn task_request(
        &self,
        _caller: &Caller,
        method: &str,
        task_id: &str,
        mut params: Value,
    ) -> Result<Value, FrontendError> {
        let unknown = || FrontendError::unknown("task", task_id);
        let (owner, rest) = split_scoped_id(task_id).ok_or_else(unknown)?;
        if let Some(groups) = &self.groups
            && groups.contains(&owner)
        {
            return groups
                .task_request(&owner, method, rest, params)
                .await
                .map_err(frontend_error);
        }
        params["taskId"] = Value::String(rest.to_owned());
        let session = self
            .manager
            .session(&owner)
            .await
            .map_err(|error| match error {
                CoreError::ServerNotFound(_) => unknown(),
                other => frontend_error(other),
            })?;
        session.task_request(method, params).await.map_err(|error| {
            frontend_error(CoreError::Session {
                server: owner.clone(),
                source: error,
            })
        })
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn list_changes(&self) -> Option<watch::Receiver<mcpgw_core::ListChanges>> {
        Some(self.list_changes.subscribe())
    }

    fn offers_tasks(&self) -> bool {
        self.tasks_offered
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    async fn settle(&self) {
        let mut pending = self.probes_pending.subscribe();
        let _ = tokio::time::timeout(SETTLE_TIMEOUT, pending.wait_for(|count| *count == 0)).await;
    }

    async fn prompts(&self, _caller: &Caller) -> Vec<Value> {
        let listed = self
            .ask_running_servers(|session| Box::pin(async move { session.list_prompts().await }))
            .await;
        // Prompts follow the same naming rules as tools; a prompt without a name is left out.
        let named: Vec<(ServerId, Vec<(String, Value)>)> = listed
            .into_iter()
            .map(|(id, prompts)| {
                let prompts = prompts
                    .into_iter()
                    .filter_map(|prompt| {
                        let name = prompt.get("name").and_then(Value::as_str)?.to_owned();
                        Some((name, prompt))
                    })
                    .collect();
                (id, prompts)
            })
            .collect();
        let names: Vec<(&str, Vec<&str>)> = named
            .iter()
            .map(|(id, prompts)| {
                let names = prompts.iter().map(|(name, _)| name.as_str()).collect();
                (id.as_str(), names)
            })
            .collect();
        let assigned = self.naming.assign(&names);
        let mut routes = HashMap::new();
        let mut aliases = Vec::new();
        let mut all = Vec::new();
        for ((id, prompts), assigned) in named.iter().zip(assigned) {
            for ((name, prompt), assigned) in prompts.iter().zip(assigned) {
                let exposed = match assigned {
                    Assigned::Listed {
                        name: listed,
                        alias,
                    } => {
                        aliases.extend(alias.map(|alias| (alias, id, name)));
                        listed
                    }
                    Assigned::Collides(collision) => {
                        tracing::debug!(
                            name = %collision.name,
                            server = %collision.owner,
                            prompt = %collision.tool,
                            listed_from = %collision.listed_from,
                            "two prompts would be listed under one name; the first is listed"
                        );
                        continue;
                    }
                    Assigned::Repeated => continue,
                };
                let mut prompt = prompt.clone();
                prompt["name"] = Value::String(exposed.clone());
                routes.insert(exposed, (id.clone(), name.clone()));
                all.push(prompt);
            }
        }
        // The whole prefixed forms of prompts listed bare or shortened reach them too.
        for (alias, id, name) in aliases {
            routes
                .entry(alias)
                .or_insert_with(|| (id.clone(), name.clone()));
        }
        *self
            .prompt_routes
            .write()
            .unwrap_or_else(|p| p.into_inner()) = routes;
        all
    }

    async fn get_prompt(
        &self,
        caller: &Caller,
        name: &str,
        arguments: Option<Map<String, Value>>,
        mut ctx: CallContext,
    ) -> Result<Value, FrontendError> {
        let (server, prompt) = self.prompt_route(caller, name).await?;
        if ctx.principal.is_none() {
            ctx.principal.clone_from(&caller.principal);
        }
        let session = self
            .manager
            .session(&server)
            .await
            .map_err(frontend_error)?;
        session
            .get_prompt(&prompt, arguments, ctx)
            .await
            .map_err(|error| {
                frontend_error(CoreError::Session {
                    server: server.clone(),
                    source: error,
                })
            })
    }

    async fn resources(&self, _caller: &Caller) -> Vec<Value> {
        let listed = self
            .ask_running_servers(|session| Box::pin(async move { session.list_resources().await }))
            .await;
        let mut routes = self
            .resource_routes
            .write()
            .unwrap_or_else(|p| p.into_inner());
        let mut all = Vec::new();
        for (id, resources) in listed {
            for resource in resources {
                if let Some(uri) = resource.get("uri").and_then(Value::as_str) {
                    // The first server (in id order) to list a URI owns it.
                    routes.entry(uri.to_owned()).or_insert_with(|| id.clone());
                }
                all.push(rename(resource, &id, &self.naming));
            }
        }
        all
    }

    async fn resource_templates(&self, _caller: &Caller) -> Vec<Value> {
        let listed = self
            .ask_running_servers(|session| {
                Box::pin(async move { session.list_resource_templates().await })
            })
            .await;
        listed
            .into_iter()
            .flat_map(|(id, templates)| {
                templates
                    .into_iter()
                    .map(move |template| rename(template, &id, &self.naming))
            })
            .collect()
    }

    async fn read_resource(
        &self,
        caller: &Caller,
        uri: &str,
        mut ctx: CallContext,
    ) -> Result<Value, FrontendError> {
        let server = self.resource_owner(caller, uri).await?;
        if ctx.principal.is_none() {
            ctx.principal.clone_from(&caller.principal);
        }
        let session = self
            .manager
            .session(&server)
            .await
            .map_err(frontend_error)?;
        session.read_resource(uri, ctx).await.map_err(|error| {
            frontend_error(CoreError::Session {
                server: server.clone(),
                source: error,
            })
        })
    }

    async fn complete(&self, caller: &Caller, params: Value) -> Result<Value, FrontendError> {
        self.route_completion(caller, params).await
    }

    async fn set_logging_level(&self, _caller: &Caller, level: &str) {
        // Upstream sessions are shared by every client, each of which gets only the levels it
        // asked for (the front end filters): the upstream logs at the most verbose level any
        // client asked for.
        let Some(level) = self.log_levels.ask(level) else {
            return;
        };
        self.ask_running_servers(|session| {
            Box::pin(async move {
                session.set_logging_level(level).await?;
                Ok(Vec::new())
            })
        })
        .await;
    }

    async fn subscribe_resource(
        &self,
        caller: &Caller,
        uri: &str,
    ) -> Result<ResourceSubscription, FrontendError> {
        let server = self.resource_owner(caller, uri).await?;
        let session = self
            .manager
            .session(&server)
            .await
            .map_err(frontend_error)?;
        let session_error = |error| {
            frontend_error(CoreError::Session {
                server: server.clone(),
                source: error,
            })
        };
        // Taken before asking, so that no announcement between the answer and the first read
        // is lost.
        let updates = session.resource_updates().ok_or_else(|| {
            FrontendError::new(
                FrontendErrorKind::Upstream { code: -32601 },
                format!("the server `{server}` offers no resource subscriptions ({uri})"),
            )
        })?;
        // Subscribing again is harmless, so every caller asks; only the last one to leave
        // unsubscribes.
        session
            .subscribe_resource(uri)
            .await
            .map_err(session_error)?;
        let key = (server, uri.to_owned());
        *self
            .resource_subscribers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key.clone())
            .or_default() += 1;
        let release = SubscriberRelease {
            subscribers: Arc::clone(&self.resource_subscribers),
            key,
            session,
        };
        Ok(ResourceSubscription::new(uri, updates, release))
    }
}

/// Counts one caller out of a resource's subscribers when its subscription is dropped, and
/// unsubscribes from the server when it was the last.
struct SubscriberRelease {
    subscribers: Arc<std::sync::Mutex<HashMap<(ServerId, String), usize>>>,
    key: (ServerId, String),
    session: Arc<dyn McpSession>,
}

impl Drop for SubscriberRelease {
    fn drop(&mut self) {
        let last = {
            let mut subscribers = self.subscribers.lock().unwrap_or_else(|p| p.into_inner());
            match subscribers.get_mut(&self.key) {
                Some(count) if *count > 1 => {
                    *count -= 1;
                    false
                }
                _ => {
                    subscribers.remove(&self.key);
                    true
                }
            }
        };
        // Dropped outside a runtime (at shutdown), there is nobody left to tell.
        if let (true, Ok(runtime)) = (last, tokio::runtime::Handle::try_current()) {
            let session = Arc::clone(&self.session);
            let uri = self.key.1.clone();
            runtime.spawn(async move {
                if let Err(error) = session.unsubscribe_resource(&uri).await {
                    tracing::debug!(%error, %uri, "could not unsubscribe from a resource");
                }
            });
        }
    }
}

impl ToolCatalog {
    /// `completion/complete`, routed to the owner of its reference, with a prompt's reference
    /// renamed to the owner's own name.
    async fn route_completion(
        &self,
        caller: &Caller,
        mut params: Value,
    ) -> Result<Value, FrontendError> {
        let reference = params.get("ref").cloned().unwrap_or(Value::Null);
        let text = |key: &str| {
            reference
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let (server, listed_as, what) = match reference.get("type").and_then(Value::as_str) {
            Some("ref/prompt") => {
                let name = text("name").ok_or_else(|| invalid_reference("`ref.name`"))?;
                let (server, prompt) = self.prompt_route(caller, &name).await?;
                params["ref"]["name"] = Value::String(prompt);
                (server, name, "prompt")
            }
            Some("ref/resource") => {
                let uri = text("uri").ok_or_else(|| invalid_reference("`ref.uri`"))?;
                let server = self
                    .first_template_server(|pattern| pattern == uri)
                    .await
                    .ok_or_else(|| FrontendError::unknown("resource template", &uri))?;
                (server, uri, "resource template")
            }
            _ => {
                return Err(invalid_reference(
                    "`ref.type` (`ref/prompt` or `ref/resource`)",
                ));
            }
        };
        let session = self
            .manager
            .session(&server)
            .await
            .map_err(|error| match error {
                // A namespaced name of a server that does not exist names nothing listed.
                CoreError::ServerNotFound(_) | CoreError::GroupNotFound(_) => {
                    FrontendError::unknown(what, &listed_as)
                }
                other => frontend_error(other),
            })?;
        session.complete(params).await.map_err(|error| {
            frontend_error(CoreError::Session {
                server: server.clone(),
                source: error,
            })
        })
    }
}

/// A completion request whose reference lacks `what`.
fn invalid_reference(what: &str) -> FrontendError {
    FrontendError::new(
        FrontendErrorKind::InvalidArguments,
        format!("the completion request needs {what}"),
    )
}

struct CatalogObserver {
    catalog: std::sync::Weak<ToolCatalog>,
}

impl EventObserver for CatalogObserver {
    fn observe(&self, published: &PublishedEvent) {
        // Rotation and group state do not change which tools are listed; membership does.
        let relevant = matches!(
            published.event,
            DomainEvent::McpServerRegistered { .. }
                | DomainEvent::McpServerRemoved { .. }
                | DomainEvent::McpServerUpdated { .. }
                | DomainEvent::McpServerStarted { .. }
                | DomainEvent::McpServerToolsChanged { .. }
                | DomainEvent::GroupCreated { .. }
                | DomainEvent::GroupUpdated { .. }
                | DomainEvent::GroupDeleted { .. }
                | DomainEvent::GroupMemberAdded { .. }
                | DomainEvent::GroupMemberRemoved { .. }
        );
        let Some(catalog) = self.catalog.upgrade() else {
            return;
        };
        if let DomainEvent::McpServerUpdated { mcp_server_id, .. }
        | DomainEvent::McpServerRemoved { mcp_server_id } = &published.event
        {
            catalog.forget_probe(mcp_server_id);
        }
        if let DomainEvent::McpServerStarted { mcp_server_id, .. } = &published.event {
            catalog.follow_started_server(mcp_server_id);
        }
        if let DomainEvent::McpServerRemoved { mcp_server_id }
        | DomainEvent::GroupDeleted {
            group_id: mcp_server_id,
        } = &published.event
        {
            catalog.forget_pins(mcp_server_id);
        }
        if relevant {
            catalog.mark_dirty();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::uri_matches_template;

    #[test]
    fn uris_match_simple_templates() {
        assert!(uri_matches_template(
            "test://template/123/data",
            "test://template/{id}/data"
        ));
        assert!(uri_matches_template("file:///a.txt", "file:///{name}"));
        assert!(uri_matches_template("x://a/b", "x://{one}/{two}"));
        assert!(uri_matches_template("fixed://uri", "fixed://uri"));
        assert!(!uri_matches_template(
            "test://template//data",
            "test://template/{id}/data"
        ));
        assert!(!uri_matches_template(
            "test://template/1/2/data",
            "test://template/{id}/data"
        ));
        assert!(!uri_matches_template(
            "test://other/1/data",
            "test://template/{id}/data"
        ));
        assert!(!uri_matches_template(
            "test://template/1/data/x",
            "test://template/{id}/data"
        ));
        assert!(!uri_matches_template("x://a", "x://{one}/{two}"));
        assert!(!uri_matches_template("x://a/b", "x://{broken"));
    }
}
