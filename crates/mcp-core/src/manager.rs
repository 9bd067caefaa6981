//! The server manager: the registry of managed MCP servers and the use cases on them (register,
//! update, remove, start, stop, call, health checks, idle reaping, restarts).
//!
//! Concurrency design:
//! - The registry is a `std::sync::RwLock<BTreeMap>`: reads (listing, lookups on the call path)
//!   never wait on a start or a stop.
//! - Each server's mutable status sits behind a `std::sync::Mutex` that is never held across an
//!   `.await`.
//! - Starts and stops of one server are serialized by that server's `tokio::sync::Mutex`
//!   (`lifecycle`). A start runs as a detached task, so a caller that gives up does not leave the
//!   server half-started; concurrent callers share the one start (single flight).
//! - A background tool probe starts a server only to learn its tools. Whether anybody else
//!   wants the server (an explicit start, a call, a group's use of a member) is recorded in its
//!   status (`wanted`), and the probe decides to stop the server under the lifecycle lock and
//!   the status lock together, so a demand is either seen by that decision or arrives after the
//!   server is cold and starts it again: a probe never undoes somebody else's start.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::future::{BoxFuture, Either, FutureExt, Shared};
use tokio::sync::oneshot;

use crate::error::CoreError;
use crate::events::{DomainEvent, EventSink};
use crate::health::{BackoffPolicy, FailureTracker};
use crate::id::ServerId;
use crate::logs::{LogBuffer, LogLine};
use crate::ports::{
    LaunchError, McpSession, ServerLauncher, ServerRepository, SessionError, TaskSpawner,
};
use crate::spec::{ServerOrigin, ServerSpec};
use crate::state::ServerState;
use crate::time::{Clock, MonoTime, Timestamp};
use crate::tool::{CallContext, Tool, ToolCall, ToolCallOutcome};
use crate::trace::{Span, SpanKind, TraceContext, keys};

/// How long a timed-out call may take to pass its cancellation on to the upstream.
const CANCEL_GRACE: Duration = Duration::from_secs(1);

/// Knobs of the manager that are not per server.
#[derive(Debug, Clone)]
pub struct ManagerSettings {
    pub backoff: BackoffPolicy,
    /// How long a launch plus the first `tools/list` may take.
    pub start_timeout: Duration,
    /// How long a health check (`ping`) may take before it counts as failed.
    pub health_check_timeout: Duration,
    /// How long a tool call may take; on expiry the upstream request is cancelled.
    pub call_timeout: Duration,
    /// How many calls one server serves at once; more wait for a free slot (within the call
    /// timeout), so one busy agent cannot pile unbounded work onto an upstream.
    pub max_concurrent_calls_per_server: usize,
}

impl Default for ManagerSettings {
    fn default() -> Self {
        Self {
            backoff: BackoffPolicy::default(),
            start_timeout: Duration::from_secs(60),
            health_check_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(60),
            max_concurrent_calls_per_server: 64,
        }
    }
}

/// Where the tools of a snapshot came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolSource {
    /// Listed by the running (or last running) server.
    Live,
    /// Declared in the server's definition; the server has not run yet.
    Predefined,
    /// Listed by the server in an earlier run of the gateway under the same definition, and
    /// kept since (see [`ServerManager::restore_tools`]); the server has not run yet.
    Stored,
    /// Nothing known yet: the server never ran and declares no tools.
    Unknown,
}

impl ToolSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolSource::Live => "live",
            ToolSource::Predefined => "predefined",
            ToolSource::Stored => "stored",
            ToolSource::Unknown => "unknown",
        }
    }
}

/// A server's tools as the manager knows them, with where they came from.
#[derive(Debug, Clone)]
pub struct ToolList {
    pub tools: Arc<Vec<Tool>>,
    pub source: ToolSource,
    /// When the server listed these tools: its last start or change announcement for
    /// [`ToolSource::Live`], the kept list's time for [`ToolSource::Stored`]; `None` otherwise.
    pub learned_at: Option<Timestamp>,
    /// The definition the server ran under when it listed these tools (live or stored lists).
    pub learned_from: Option<Arc<ServerSpec>>,
}

/// Where a server's listed tools (`Status::live_tools`) came from, and when.
struct Learned {
    at: Timestamp,
    from: Arc<ServerSpec>,
    /// Restored from a kept list rather than listed by the server in this run.
    stored: bool,
}

/// A consistent, owned view of one server at one moment.
#[derive(Debug, Clone)]
pub struct ServerSnapshot {
    pub spec: Arc<ServerSpec>,
    pub state: ServerState,
    pub consecutive_failures: u32,
    pub last_error: Option<String>,
    pub started_at: Option<Timestamp>,
    pub last_used_at: Option<Timestamp>,
    pub last_health_check_at: Option<Timestamp>,
    pub last_health_check_ok: Option<bool>,
    /// Health checks that passed since the server was registered.
    pub health_checks_passed: u64,
    /// Health checks that failed (error or timeout) since the server was registered.
    pub health_checks_failed: u64,
    pub in_flight_calls: usize,
    pub total_starts: u64,
    /// How long the next start still has to wait because of the restart backoff.
    pub restart_backoff_remaining: Duration,
    pub tool_count: usize,
    pub tool_source: ToolSource,
}

impl ServerSnapshot {
    pub fn id(&self) -> &ServerId {
        &self.spec.id
    }
}

/// Why a start did not produce a session; cloneable so that every waiter of a shared start gets
/// the same answer.
#[derive(Debug, Clone)]
enum StartFailure {
    Launch(LaunchError),
    BackingOff { state: ServerState, wait: Duration },
    Removed,
}

type SharedStart = Shared<BoxFuture<'static, Result<Arc<dyn McpSession>, StartFailure>>>;

struct Status {
    state: ServerState,
    failures: FailureTracker,
    session: Option<Arc<dyn McpSession>>,
    /// Incremented on every start, so that a watcher of an old session can tell it is stale.
    generation: u64,
    live_tools: Option<Arc<Vec<Tool>>>,
    /// Set whenever `live_tools` is.
    tools_learned: Option<Learned>,
    last_error: Option<String>,
    started_at: Option<Timestamp>,
    last_used: MonoTime,
    last_used_at: Option<Timestamp>,
    next_health_check: MonoTime,
    health_check_running: bool,
    last_health_check_at: Option<Timestamp>,
    last_health_check_ok: Option<bool>,
    health_checks_passed: u64,
    health_checks_failed: u64,
    total_starts: u64,
    removed: bool,
    /// Somebody other than a tool probe asked for the server (an explicit start, a call, a
    /// group's use of a member) since it last stopped or died; a probe leaves such a server
    /// running.
    wanted: bool,
}

struct ManagedServer {
    spec: RwLock<Arc<ServerSpec>>,
    status: Mutex<Status>,
    lifecycle: tokio::sync::Mutex<()>,
    starting: Mutex<Option<(u64, SharedStart)>>,
    logs: Mutex<Option<Arc<LogBuffer>>>,
    in_flight: AtomicUsize,
    call_slots: tokio::sync::Semaphore,
}

impl ManagedServer {
    fn spec(&self) -> Arc<ServerSpec> {
        Arc::clone(
            &self
                .spec
                .read()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        )
    }

    /// [`ServerSpec::caller_meta`], without copying the spec.
    fn caller_meta(&self) -> Option<Arc<String>> {
        self.spec
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .caller_meta
            .clone()
    }

    fn status(&self) -> std::sync::MutexGuard<'_, Status> {
        self.status
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn logs(&self) -> Option<Arc<LogBuffer>> {
        self.logs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

struct Inner {
    servers: RwLock<BTreeMap<ServerId, Arc<ManagedServer>>>,
    launcher: Arc<dyn ServerLauncher>,
    clock: Arc<dyn Clock>,
    events: Arc<dyn EventSink>,
    spawner: Arc<dyn TaskSpawner>,
    repository: Option<Arc<dyn ServerRepository>>,
    settings: ManagerSettings,
    start_sequence: AtomicU64,
    /// Serializes the writes that touch both the repository and the registry (create, update,
    /// delete), so that what is stored is always what is registered: without it, two creates
    /// of one id could both store their definition while only the first is registered, and an
    /// update racing a delete could store a row for a server that no longer exists.
    writes: tokio::sync::Mutex<()>,
}

/// What [`ServerManager::resync_from_repository`] changed, by server id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResyncReport {
    pub added: Vec<ServerId>,
    pub updated: Vec<ServerId>,
    pub removed: Vec<ServerId>,
}

impl ResyncReport {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.updated.is_empty() && self.removed.is_empty()
    }
}

/// The registry and lifecycle manager of MCP servers. Cheap to clone; all clones share state.
#[derive(Clone)]
pub struct ServerManager {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ServerManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerManager")
            .field("servers", &self.len())
            .finish_non_exhaustive()
    }
}

/// A handle on a [`ServerManager`] that does not keep it alive: for an event observer, which
/// the manager's own event sink holds, so that a strong handle would make a cycle and the
/// manager, its sink and every observer (an event log that writes itself out on drop among
/// them) would never be dropped.
#[derive(Clone, Debug)]
pub struct WeakServerManager {
    inner: std::sync::Weak<Inner>,
}

impl WeakServerManager {
    /// The manager, while anything else still holds it.
    pub fn upgrade(&self) -> Option<ServerManager> {
        self.inner.upgrade().map(|inner| ServerManager { inner })
    }
}

/// Runs `future` unless `limit` passes first on `clock`.
async fn within<T>(
    clock: &dyn Clock,
    limit: Duration,
    future: impl Future<Output = T>,
) -> Option<T> {
    let future = std::pin::pin!(future);
    let sleep = clock.sleep(limit);
    match futures::future::select(future, sleep).await {
        Either::Left((value, _)) => Some(value),
        Either::Right(((), _)) => None,
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl ServerManager {
    /// A handle that does not keep the manager alive (see [`WeakServerManager`]).
    pub fn downgrade(&self) -> WeakServerManager {
        WeakServerManager {
            inner: Arc::downgrade(&self.inner),
        }
    }

    pub fn new(
        launcher: Arc<dyn ServerLauncher>,
        clock: Arc<dyn Clock>,
        events: Arc<dyn EventSink>,
        spawner: Arc<dyn TaskSpawner>,
        repository: Option<Arc<dyn ServerRepository>>,
        settings: ManagerSettings,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                servers: RwLock::new(BTreeMap::new()),
                launcher,
                clock,
                events,
                spawner,
                repository,
                settings,
                start_sequence: AtomicU64::new(0),
                writes: tokio::sync::Mutex::new(()),
            }),
        }
    }

    pub fn settings(&self) -> &ManagerSettings {
        &self.inner.settings
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    fn publish(&self, event: DomainEvent) {
        self.inner.events.publish(self.inner.clock.wall(), event);
    }

    fn lookup(&self, id: &ServerId) -> Result<Arc<ManagedServer>, CoreError> {
        self.inner
            .servers
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(id)
            .cloned()
            .ok_or_else(|| CoreError::ServerNotFound(id.clone()))
    }

    fn all(&self) -> Vec<Arc<ManagedServer>> {
        self.inner
            .servers
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .values()
            .cloned()
            .collect()
    }

    pub fn len(&self) -> usize {
        self.inner
            .servers
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, id: &ServerId) -> bool {
        self.lookup(id).is_ok()
    }

    /// Moves a server to `to`, publishing the change. Illegal transitions are refused, so a
    /// logic error shows up as an error instead of a silently wrong state.
    fn transition(
        &self,
        server_id: &ServerId,
        status: &mut Status,
        to: ServerState,
        reason: &str,
    ) -> Result<(), CoreError> {
        let from = status.state;
        from.check_transition(to)?;
        status.state = to;
        if matches!(to, ServerState::Cold | ServerState::Dead) {
            // Nothing runs any more: whoever wanted it asks again with their next start or call.
            status.wanted = false;
        }
        tracing::debug!(server = %server_id, %from, %to, reason, "mcp server state changed");
        self.publish(DomainEvent::McpServerStateChanged {
            mcp_server_id: server_id.clone(),
            from,
            to,
            reason: reason.to_owned(),
        });
        Ok(())
    }

    // ----- registration -------------------------------------------------------------------

    /// Loads the servers a repository remembers (those created at run time before a restart).
    pub async fn restore_from_repository(&self) -> Result<usize, CoreError> {
        let Some(repository) = self.inner.repository.clone() else {
            return Ok(0);
        };
        let specs = repository.load_all().await?;
        let mut restored = 0;
        for spec in specs {
            if self.contains(&spec.id) {
                tracing::warn!(
                    server = %spec.id,
                    "a stored mcp server has the id of a configured one; the configured one wins"
                );
                continue;
            }
            self.insert(spec);
            restored += 1;
        }
        Ok(restored)
    }

    /// Brings the servers created at run time in line with the repository, which another
    /// gateway sharing it may have changed: stored servers this one lacks are added (cold),
    /// changed ones take the stored definition (restarted when running and their launch
    /// changed), and run-time servers no longer stored are stopped and removed. Servers of the
    /// configuration file are left alone, and a stored server with a configured id is skipped
    /// as at start-up. Nothing is written back to the repository.
    ///
    /// It holds the lock of registrations while it compares, so a server this gateway is
    /// creating or deleting right now is never mistaken for one another gateway removed.
    pub async fn resync_from_repository(&self) -> Result<ResyncReport, CoreError> {
        let Some(repository) = self.inner.repository.clone() else {
            return Ok(ResyncReport::default());
        };
        let mut report = ResyncReport::default();
        let mut replaced = Vec::new();
        {
            let _writes = self.inner.writes.lock().await;
            let stored = repository.load_all().await?;
            let stored_ids: std::collections::HashSet<ServerId> =
                stored.iter().map(|spec| spec.id.clone()).collect();
            for spec in stored {
                match self.lookup(&spec.id) {
                    Err(_) => {
                        report.added.push(spec.id.clone());
                        self.insert(spec);
                    }
                    Ok(server) => {
                        let current = server.spec();
                        if current.origin == ServerOrigin::Config || server.status().removed {
                            continue;
                        }
                        if *current != spec {
                            report.updated.push(spec.id.clone());
                            let restart = self.apply_spec(&server, spec);
                            replaced.push((server, restart));
                        }
                    }
                }
            }
            let gone: Vec<ServerId> = self
                .inner
                .servers
                .read()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .values()
                // A server already being removed here (a delete waiting for its stop) is the
                // delete's to finish and answer.
                .filter(|server| !server.status().removed)
                .map(|server| server.spec())
                .filter(|spec| {
                    spec.origin != ServerOrigin::Config && !stored_ids.contains(&spec.id)
                })
                .map(|spec| spec.id.clone())
                .collect();
            for id in gone {
                if let Ok(server) = self.lookup(&id) {
                    server.status().removed = true;
                }
                report.removed.push(id);
            }
        }
        // Stops and restarts take as long as they take: registrations need not wait for them.
        for id in &report.removed {
            if let Err(error) = self.unregister(id).await {
                tracing::debug!(server = %id, %error, "a server removed elsewhere was already gone here");
            }
        }
        for (server, restart) in replaced {
            let id = server.spec().id.clone();
            self.finish_replace(&server, &id, restart).await?;
        }
        Ok(report)
    }

    /// Registers a new server. Servers created at run time (over the API, or approved from
    /// discovery) are saved to the repository first, so an acknowledged registration survives
    /// a restart.
    pub async fn register(&self, spec: ServerSpec) -> Result<ServerSnapshot, CoreError> {
        let _writes = self.inner.writes.lock().await;
        if self.contains(&spec.id) {
            return Err(CoreError::ServerAlreadyExists(spec.id));
        }
        if spec.origin != ServerOrigin::Config
            && let Some(repository) = &self.inner.repository
        {
            repository.save(&spec).await?;
        }
        let id = spec.id.clone();
        {
            let mut servers = self
                .inner
                .servers
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if servers.contains_key(&id) {
                drop(servers);
                return Err(CoreError::ServerAlreadyExists(id));
            }
            servers.insert(id.clone(), Arc::new(self.new_managed(spec)));
        }
        let server = self.lookup(&id)?;
        let spec = server.spec();
        self.publish(DomainEvent::McpServerRegistered {
            mcp_server_id: id.clone(),
            mode: spec.mode().to_owned(),
            origin: spec.origin.as_str(),
        });
        self.snapshot(&id)
    }

    fn insert(&self, spec: ServerSpec) {
        let id = spec.id.clone();
        let mode = spec.mode().to_owned();
        let origin = spec.origin.as_str();
        self.inner
            .servers
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(id.clone(), Arc::new(self.new_managed(spec)));
        self.publish(DomainEvent::McpServerRegistered {
            mcp_server_id: id,
            mode,
            origin,
        });
    }

    fn new_managed(&self, spec: ServerSpec) -> ManagedServer {
        let now = self.inner.clock.now();
        ManagedServer {
            status: Mutex::new(Status {
                state: ServerState::Cold,
                failures: FailureTracker::new(
                    spec.max_consecutive_failures,
                    self.inner.settings.backoff,
                ),
                session: None,
                generation: 0,
                live_tools: None,
                tools_learned: None,
                last_error: None,
                started_at: None,
                last_used: now,
                last_used_at: None,
                next_health_check: now,
                health_check_running: false,
                last_health_check_at: None,
                last_health_check_ok: None,
                health_checks_passed: 0,
                health_checks_failed: 0,
                total_starts: 0,
                removed: false,
                wanted: false,
            }),
            spec: RwLock::new(Arc::new(spec)),
            lifecycle: tokio::sync::Mutex::new(()),
            starting: Mutex::new(None),
            logs: Mutex::new(None),
            in_flight: AtomicUsize::new(0),
            call_slots: tokio::sync::Semaphore::new(
                self.inner.settings.max_concurrent_calls_per_server.max(1),
            ),
        }
    }

    /// Replaces the definition of a server created at run time. A server declared in the
    /// configuration file cannot be changed this way. If the launch settings changed and the
    /// server runs, it is restarted with the new ones.
    pub async fn update(&self, spec: ServerSpec) -> Result<ServerSnapshot, CoreError> {
        let writes = self.inner.writes.lock().await;
        let server = self.lookup(&spec.id)?;
        if server.status().removed {
            return Err(CoreError::ServerNotFound(spec.id));
        }
        let current = server.spec();
        if current.origin == ServerOrigin::Config {
            return Err(CoreError::DeclaredInConfig(spec.id));
        }
        let spec = ServerSpec {
            origin: current.origin.clone(),
            ..spec
        };
        if let Some(repository) = &self.inner.repository
            && spec.origin != ServerOrigin::Config
        {
            repository.save(&spec).await?;
        }
        let id = spec.id.clone();
        let restart = self.apply_spec(&server, spec);
        // A restart can take as long as a start: other writes need not wait for it.
        drop(writes);
        self.finish_replace(&server, &id, restart).await
    }

    /// Replaces a definition whatever its origin; for configuration reloads and embedders.
    pub async fn replace(&self, spec: ServerSpec) -> Result<ServerSnapshot, CoreError> {
        let server = self.lookup(&spec.id)?;
        self.replace_spec(&server, spec).await
    }

    async fn replace_spec(
        &self,
        server: &Arc<ManagedServer>,
        spec: ServerSpec,
    ) -> Result<ServerSnapshot, CoreError> {
        let id = spec.id.clone();
        let restart = self.apply_spec(server, spec);
        self.finish_replace(server, &id, restart).await
    }

    /// Puts the new definition in place and announces it; answers whether the server must be
    /// restarted to run it.
    fn apply_spec(&self, server: &Arc<ManagedServer>, spec: ServerSpec) -> bool {
        let id = spec.id.clone();
        let restart_required = server.spec().launch_differs(&spec);
        let declares_tools = !spec.predefined_tools.is_empty();
        let limit = spec.max_consecutive_failures;
        *server
            .spec
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(spec);
        let was_running = {
            let mut status = server.status();
            status.failures.set_limit(limit);
            let running = status.state.is_running();
            if restart_required && !running {
                // The tools were listed under the old launch and may not be the new one's: they
                // are not served any more, and the next start (or probe) lists them again. A
                // running server is restarted below, which lists them again too.
                status.live_tools = None;
                status.tools_learned = None;
            } else if declares_tools && listed_source(&status) == ToolSource::Stored {
                // A kept list is served only in place of declared tools (see `restore_tools`);
                // a definition that declares them now lists those, as at the next start-up.
                status.live_tools = None;
                status.tools_learned = None;
            }
            running
        };
        self.publish(DomainEvent::McpServerUpdated {
            mcp_server_id: id,
            restart_required,
        });
        restart_required && was_running
    }

    async fn finish_replace(
        &self,
        server: &Arc<ManagedServer>,
        id: &ServerId,
        restart: bool,
    ) -> Result<ServerSnapshot, CoreError> {
        if restart {
            self.stop_server(server, "updated").await;
            // The restart carries on the run the update interrupted, like an explicit start.
            server.status().wanted = true;
            if let Err(failure) = self.start_server(server, true).await {
                tracing::warn!(server = %id, ?failure, "restart after an update failed");
            }
        }
        self.snapshot(id)
    }

    /// Removes a server created at run time, stopping it first.
    pub async fn delete(&self, id: &ServerId) -> Result<(), CoreError> {
        {
            let _writes = self.inner.writes.lock().await;
            let server = self.lookup(id)?;
            if server.status().removed {
                return Err(CoreError::ServerNotFound(id.clone()));
            }
            if server.spec().origin == ServerOrigin::Config {
                return Err(CoreError::DeclaredInConfig(id.clone()));
            }
            if let Some(repository) = &self.inner.repository {
                repository.delete(id).await?;
            }
            // From here on an update finds it gone, so nothing stores its row again; the stop
            // below can take a while and need not hold other writes up.
            server.status().removed = true;
        }
        self.unregister(id).await
    }

    /// Removes a server whatever its origin, stopping it first; for configuration reloads.
    pub async fn unregister(&self, id: &ServerId) -> Result<(), CoreError> {
        let server = self.lookup(id)?;
        {
            let _lifecycle = server.lifecycle.lock().await;
            server.status().removed = true;
        }
        self.stop_server(&server, "removed").await;
        self.inner
            .servers
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(id);
        self.publish(DomainEvent::McpServerRemoved {
            mcp_server_id: id.clone(),
        });
        Ok(())
    }

    // ----- reads --------------------------------------------------------------------------

    pub fn snapshot(&self, id: &ServerId) -> Result<ServerSnapshot, CoreError> {
        let server = self.lookup(id)?;
        Ok(self.snapshot_of(&server))
    }

    fn snapshot_of(&self, server: &ManagedServer) -> ServerSnapshot {
        let spec = server.spec();
        let now = self.inner.clock.now();
        let status = server.status();
        let (tool_count, tool_source) = match &status.live_tools {
            Some(tools) => (tools.len(), listed_source(&status)),
            None if !spec.predefined_tools.is_empty() => {
                (spec.predefined_tools.len(), ToolSource::Predefined)
            }
            None => (0, ToolSource::Unknown),
        };
        ServerSnapshot {
            state: status.state,
            consecutive_failures: status.failures.consecutive(),
            last_error: status.last_error.clone(),
            started_at: status.started_at,
            last_used_at: status.last_used_at,
            last_health_check_at: status.last_health_check_at,
            last_health_check_ok: status.last_health_check_ok,
            health_checks_passed: status.health_checks_passed,
            health_checks_failed: status.health_checks_failed,
            in_flight_calls: server.in_flight.load(Ordering::Relaxed),
            total_starts: status.total_starts,
            restart_backoff_remaining: status.failures.wait_before_start(now),
            tool_count,
            tool_source,
            spec,
        }
    }

    /// Every server, sorted by id, optionally only those in `state`.
    pub fn list(&self, state: Option<ServerState>) -> Vec<ServerSnapshot> {
        self.all()
            .iter()
            .map(|server| self.snapshot_of(server))
            .filter(|snapshot| state.is_none_or(|wanted| snapshot.state == wanted))
            .collect()
    }

    /// The tools of a server without starting it: the live list once it has run, else its
    /// predefined tools, else a restored list.
    pub fn tools(&self, id: &ServerId) -> Result<(Vec<Tool>, ToolSource), CoreError> {
        let list = self.tool_list(id)?;
        Ok((Arc::unwrap_or_clone(list.tools), list.source))
    }

    /// [`ServerManager::tools`], with when and under which definition the tools were listed.
    pub fn tool_list(&self, id: &ServerId) -> Result<ToolList, CoreError> {
        let server = self.lookup(id)?;
        let spec = server.spec();
        let status = server.status();
        Ok(match (&status.live_tools, &status.tools_learned) {
            (Some(tools), learned) => ToolList {
                tools: Arc::clone(tools),
                source: listed_source(&status),
                learned_at: learned.as_ref().map(|learned| learned.at),
                learned_from: learned.as_ref().map(|learned| Arc::clone(&learned.from)),
            },
            (None, _) => ToolList {
                tools: Arc::new(spec.predefined_tools.clone()),
                source: if spec.predefined_tools.is_empty() {
                    ToolSource::Unknown
                } else {
                    ToolSource::Predefined
                },
                learned_at: None,
                learned_from: None,
            },
        })
    }

    /// Whether the server has the tool `name`, as far as its tools are known; `None` while only
    /// the server itself can tell. Copies nothing.
    ///
    /// The live list once it has run, or its predefined tools, answers both ways. A kept list
    /// ([`ToolSource::Stored`]) answers only for the tools it has: it belongs to the server's
    /// definition, but the program behind an unchanged definition may have changed since it
    /// was listed (a newer version of the package its command runs, a remote endpoint that
    /// was redeployed), so a tool it lacks is `None` until the server lists its tools in this
    /// run.
    pub fn knows_tool(&self, id: &ServerId, name: &str) -> Result<Option<bool>, CoreError> {
        let server = self.lookup(id)?;
        let spec = server.spec();
        let status = server.status();
        let has = |tools: &[Tool]| tools.iter().any(|tool| tool.name == name);
        Ok(match &status.live_tools {
            Some(tools) if has(tools) => Some(true),
            Some(_) if listed_source(&status) == ToolSource::Stored => None,
            Some(_) => Some(false),
            None if !spec.predefined_tools.is_empty() => Some(has(&spec.predefined_tools)),
            None => None,
        })
    }

    /// Serves a kept tool list (from a [`crate::ToolListStore`]) as the tools of a server that
    /// declares none and has listed none in this run, so that it need not be started to list
    /// them. The list is taken only while the server's definition has the digest the list was
    /// learned under ([`ServerSpec::tool_list_digest`]): a list of another definition is never
    /// served. Answers whether it was taken; when it was, the server's tools are
    /// [`ToolSource::Stored`] until it lists them itself (or its definition comes to declare
    /// tools, or another launch), and `McpServerToolsChanged` is published. A kept list speaks
    /// for the tools it has only (see [`ServerManager::knows_tool`]).
    pub fn restore_tools(&self, list: &crate::StoredToolList) -> Result<bool, CoreError> {
        let server = self.lookup(&list.server_id)?;
        let spec = server.spec();
        if !spec.predefined_tools.is_empty() || spec.tool_list_digest() != list.definition_digest {
            return Ok(false);
        }
        {
            let mut status = server.status();
            // The definition may have been replaced since it was read above.
            if status.removed || status.live_tools.is_some() || !Arc::ptr_eq(&server.spec(), &spec)
            {
                return Ok(false);
            }
            status.live_tools = Some(Arc::new(list.tools.clone()));
            status.tools_learned = Some(Learned {
                at: list.learned_at,
                from: spec,
                stored: true,
            });
        }
        self.publish(DomainEvent::McpServerToolsChanged {
            mcp_server_id: list.server_id.clone(),
            tool_count: list.tools.len(),
        });
        Ok(true)
    }

    /// The most recent `count` stderr lines, oldest first; empty when the server never ran.
    pub fn logs(&self, id: &ServerId, count: usize) -> Result<Vec<LogLine>, CoreError> {
        let server = self.lookup(id)?;
        Ok(server
            .logs()
            .map(|buffer| buffer.tail(count))
            .unwrap_or_default())
    }

    // ----- start and stop -----------------------------------------------------------------

    /// Starts a server now (an operator's request): the restart backoff does not apply.
    /// Starting a ready server is a no-op.
    pub async fn start(&self, id: &ServerId) -> Result<ServerSnapshot, CoreError> {
        let server = self.lookup(id)?;
        tracing::debug!(server = %id, "explicit start of an mcp server requested");
        // Before joining any start under way, so that a probe sharing it leaves the server be.
        server.status().wanted = true;
        self.start_server(&server, true)
            .await
            .map_err(|failure| self.start_error(id, failure))?;
        self.snapshot(id)
    }

    /// Stops a server. A cold server stays cold; a dead one stays dead (nothing runs either way).
    pub async fn stop(&self, id: &ServerId) -> Result<ServerSnapshot, CoreError> {
        let server = self.lookup(id)?;
        self.stop_server(&server, "requested").await;
        self.snapshot(id)
    }

    /// Stops every running server; for gateway shutdown.
    pub async fn shutdown(&self) {
        let servers = self.all();
        futures::future::join_all(
            servers
                .iter()
                .map(|server| self.stop_server(server, "shutdown")),
        )
        .await;
    }

    fn start_error(&self, id: &ServerId, failure: StartFailure) -> CoreError {
        match failure {
            StartFailure::Launch(source) => CoreError::StartFailed {
                server: id.clone(),
                source,
            },
            StartFailure::BackingOff { state, wait } => CoreError::BackingOff {
                server: id.clone(),
                state,
                retry_in_ms: millis(wait).max(1),
            },
            StartFailure::Removed => CoreError::ServerNotFound(id.clone()),
        }
    }

    /// Returns a live session, starting the server when needed. Concurrent callers share one
    /// start. `force` skips the restart backoff.
    async fn start_server(
        &self,
        server: &Arc<ManagedServer>,
        force: bool,
    ) -> Result<Arc<dyn McpSession>, StartFailure> {
        if let Some(session) = ready_session(server) {
            return Ok(session);
        }
        let shared = {
            let mut starting = server
                .starting
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            match &*starting {
                Some((_, shared)) => shared.clone(),
                None => {
                    let sequence = self.inner.start_sequence.fetch_add(1, Ordering::Relaxed);
                    let (sender, receiver) = oneshot::channel();
                    let manager = self.clone();
                    let task_server = Arc::clone(server);
                    self.inner.spawner.spawn(
                        async move {
                            let result = manager.run_start(&task_server, force).await;
                            let mut starting = task_server
                                .starting
                                .lock()
                                .unwrap_or_else(|poisoned| poisoned.into_inner());
                            if starting.as_ref().is_some_and(|(seq, _)| *seq == sequence) {
                                *starting = None;
                            }
                            drop(starting);
                            let _ = sender.send(result);
                        }
                        .boxed(),
                    );
                    let shared: SharedStart = async move {
                        receiver.await.unwrap_or_else(|_| {
                            Err(StartFailure::Launch(LaunchError::Other(
                                "the start task ended without an answer".to_owned(),
                            )))
                        })
                    }
                    .boxed()
                    .shared();
                    *starting = Some((sequence, shared.clone()));
                    shared
                }
            }
        };
        shared.await
    }

    async fn run_start(
        &self,
        server: &Arc<ManagedServer>,
        force: bool,
    ) -> Result<Arc<dyn McpSession>, StartFailure> {
        let _lifecycle = server.lifecycle.lock().await;
        let spec = server.spec();
        let id = &spec.id;
        let previous_session = {
            let mut status = server.status();
            if status.removed {
                return Err(StartFailure::Removed);
            }
            if let (ServerState::Ready, Some(session)) = (status.state, &status.session) {
                return Ok(Arc::clone(session));
            }
            let wait = status.failures.wait_before_start(self.inner.clock.now());
            if !force && !wait.is_zero() {
                return Err(StartFailure::BackingOff {
                    state: status.state,
                    wait,
                });
            }
            status.session.take()
        };
        if let Some(session) = previous_session {
            session.close().await;
        }
        let generation = {
            let mut status = server.status();
            // Initializing is reachable from cold, degraded and dead only; a ready server without
            // a session cannot exist, so an error here is a bug worth surfacing.
            if let Err(error) = self.transition(id, &mut status, ServerState::Initializing, "start")
            {
                return Err(StartFailure::Launch(LaunchError::Other(error.to_string())));
            }
            status.generation += 1;
            status.total_starts += 1;
            status.generation
        };
        let logs = {
            let mut logs = server
                .logs
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if spec.launch.captures_stderr() {
                Arc::clone(logs.get_or_insert_with(|| {
                    Arc::new(LogBuffer::new(id.clone(), Arc::clone(&self.inner.clock)))
                }))
            } else {
                // Remote servers have no stderr; give the launcher a buffer nobody reads.
                Arc::new(LogBuffer::new(id.clone(), Arc::clone(&self.inner.clock)))
            }
        };
        let started = self.inner.clock.now();
        let timeout = self.inner.settings.start_timeout;
        let launched = within(&*self.inner.clock, timeout, async {
            let launched = self.inner.launcher.launch(&spec, logs).await?;
            match launched.session.list_tools().await {
                Ok(tools) => Ok((launched.session, tools)),
                Err(error) => {
                    launched.session.close().await;
                    Err(LaunchError::Handshake(format!(
                        "tools/list failed: {error}"
                    )))
                }
            }
        })
        .await
        .unwrap_or(Err(LaunchError::Timeout(timeout)));

        match launched {
            Ok((session, tools)) => {
                let tool_count = tools.len();
                let duration = self.inner.clock.now().saturating_since(started);
                let tools_changed = {
                    let mut status = server.status();
                    let now = self.inner.clock.now();
                    status.session = Some(Arc::clone(&session));
                    let tools_changed = match &status.live_tools {
                        Some(previous) => **previous != tools,
                        None => spec.predefined_tools != tools,
                    };
                    status.live_tools = Some(Arc::new(tools));
                    status.tools_learned = Some(Learned {
                        at: self.inner.clock.wall(),
                        from: Arc::clone(&spec),
                        stored: false,
                    });
                    status.last_error = None;
                    status.started_at = Some(self.inner.clock.wall());
                    status.last_used = now;
                    status.next_health_check = now.plus(spec.health_check_interval);
                    let _ = self.transition(id, &mut status, ServerState::Ready, "started");
                    tools_changed
                };
                self.publish(DomainEvent::McpServerStarted {
                    mcp_server_id: id.clone(),
                    duration_ms: millis(duration),
                    tool_count,
                });
                if tools_changed {
                    self.publish(DomainEvent::McpServerToolsChanged {
                        mcp_server_id: id.clone(),
                        tool_count,
                    });
                }
                self.watch_session(server, Arc::clone(&session), generation);
                Ok(session)
            }
            Err(error) => {
                let consecutive_failures = {
                    let mut status = server.status();
                    status.failures.record_failure(self.inner.clock.now());
                    status.last_error = Some(error.to_string());
                    let _ = self.transition(id, &mut status, ServerState::Dead, "start failed");
                    if status.failures.limit_reached() {
                        let _ = self.transition(
                            id,
                            &mut status,
                            ServerState::Degraded,
                            "too many consecutive failures",
                        );
                    }
                    status.failures.consecutive()
                };
                tracing::warn!(server = %id, %error, "mcp server failed to start");
                self.publish(DomainEvent::McpServerStartFailed {
                    mcp_server_id: id.clone(),
                    error: error.to_string(),
                    consecutive_failures,
                });
                Err(StartFailure::Launch(error))
            }
        }
    }

    /// Watches a session for an end the gateway did not ask for (a crash, an exit).
    fn watch_session(
        &self,
        server: &Arc<ManagedServer>,
        session: Arc<dyn McpSession>,
        generation: u64,
    ) {
        let manager = self.clone();
        let server = Arc::clone(server);
        if let Some(mut changes) = session.tool_list_changes() {
            let manager = self.clone();
            let server = Arc::clone(&server);
            let session = Arc::clone(&session);
            self.inner.spawner.spawn(
                async move {
                    while changes.changed().await.is_ok() {
                        if !manager.refresh_tools(&server, &session, generation).await {
                            break;
                        }
                    }
                }
                .boxed(),
            );
        }
        self.inner.spawner.spawn(
            async move {
                let exit = session.closed().await;
                if manager.on_session_ended(&server, generation, exit.to_string()) {
                    // Whatever the server left behind (children in its process group, a
                    // container) goes with it.
                    session.close().await;
                }
            }
            .boxed(),
        );
    }

    /// Lists the tools of a running session again after it announced a change. Returns false
    /// once the session is no longer the server's current one.
    async fn refresh_tools(
        &self,
        server: &Arc<ManagedServer>,
        session: &Arc<dyn McpSession>,
        generation: u64,
    ) -> bool {
        if server.status().generation != generation {
            return false;
        }
        let tools = match session.list_tools().await {
            Ok(tools) => tools,
            Err(error) => {
                tracing::warn!(%error, "listing tools after a change announcement failed");
                return true;
            }
        };
        let id = server.spec().id.clone();
        let tool_count = tools.len();
        {
            let mut status = server.status();
            if status.generation != generation {
                return false;
            }
            let now = self.inner.clock.wall();
            if let Some(learned) = &mut status.tools_learned {
                learned.at = now;
            }
            if status.live_tools.as_deref() == Some(&tools) {
                return true;
            }
            status.live_tools = Some(Arc::new(tools));
        }
        self.publish(DomainEvent::McpServerToolsChanged {
            mcp_server_id: id,
            tool_count,
        });
        true
    }

    /// Records an unexpected end; tells whether it was one (and not a stop the gateway made).
    fn on_session_ended(&self, server: &Arc<ManagedServer>, generation: u64, exit: String) -> bool {
        let id = server.spec().id.clone();
        let consecutive_failures = {
            let mut status = server.status();
            // A stale watcher (the session was replaced or stopped on purpose) has nothing to do.
            if status.generation != generation || !status.state.is_running() || status.removed {
                return false;
            }
            status.session = None;
            status.failures.record_failure(self.inner.clock.now());
            status.last_error = Some(format!("the server ended unexpectedly: {exit}"));
            let _ = self.transition(&id, &mut status, ServerState::Dead, "crashed");
            if status.failures.limit_reached() {
                let _ = self.transition(
                    &id,
                    &mut status,
                    ServerState::Degraded,
                    "too many consecutive failures",
                );
            }
            status.failures.consecutive()
        };
        tracing::warn!(server = %id, %exit, "mcp server ended unexpectedly");
        self.publish(DomainEvent::McpServerCrashed {
            mcp_server_id: id,
            exit,
            consecutive_failures,
        });
        true
    }

    async fn stop_server(&self, server: &Arc<ManagedServer>, reason: &'static str) {
        self.stop_server_unless(server, reason, |_| false).await;
    }

    /// Stops a running server unless `keep` says otherwise; `keep` is asked under the
    /// lifecycle lock and the status lock, in the same step that moves the server to `cold`,
    /// so nothing can slip in between the decision and the stop.
    async fn stop_server_unless(
        &self,
        server: &Arc<ManagedServer>,
        reason: &'static str,
        keep: impl FnOnce(&Status) -> bool,
    ) {
        let _lifecycle = server.lifecycle.lock().await;
        let id = server.spec().id.clone();
        let session = {
            let mut status = server.status();
            if !status.state.is_running() || keep(&status) {
                return;
            }
            // Bump the generation first so the watcher of this session knows the end is wanted.
            status.generation += 1;
            let session = status.session.take();
            let _ = self.transition(&id, &mut status, ServerState::Cold, reason);
            session
        };
        if let Some(session) = session {
            session.close().await;
        }
        self.publish(DomainEvent::McpServerStopped {
            mcp_server_id: id,
            reason,
        });
    }

    /// Learns the tools of a server that never ran and declares none: starts it (or joins a
    /// start under way), lets the start list its tools, and stops it again, unless somebody
    /// else wants it: an explicit start, a call or a group's use, before or during the probe,
    /// keeps it running. Servers whose tools are already known are left alone. Returns the
    /// tools it learned.
    pub async fn probe_tools(&self, id: &ServerId) -> Result<Vec<Tool>, CoreError> {
        let server = self.lookup(id)?;
        let (tools, source) = self.tools(id)?;
        if source != ToolSource::Unknown {
            return Ok(tools);
        }
        let was_running = server.status().state.is_running();
        self.start_server(&server, false)
            .await
            .map_err(|failure| self.start_error(id, failure))?;
        if !was_running {
            self.stop_server_unless(&server, "probed", |status| {
                status.wanted || server.in_flight.load(Ordering::Acquire) > 0
            })
            .await;
        }
        Ok(self.tools(id)?.0)
    }

    // ----- sessions -----------------------------------------------------------------------

    /// The session of a server that is running now, without starting anything.
    pub fn running_session(&self, id: &ServerId) -> Option<Arc<dyn McpSession>> {
        let server = self.lookup(id).ok()?;
        let status = server.status();
        if status.state.is_running() {
            status.session.clone()
        } else {
            None
        }
    }

    /// The session of a server, started lazily (single flight, subject to the backoff) like a
    /// tool call would. For requests other than tool calls (prompts, resources).
    pub async fn session(&self, id: &ServerId) -> Result<Arc<dyn McpSession>, CoreError> {
        let server = self.lookup(id)?;
        let _in_flight = InFlight::enter(self, &server);
        self.start_server(&server, false)
            .await
            .map_err(|failure| self.start_error(id, failure))
    }

    // ----- calls --------------------------------------------------------------------------

    /// Calls a tool, starting the server first when it is not running (single flight, subject
    /// to the restart backoff). A tool-level error is an `Ok` outcome with `is_error`; only
    /// transport failures and timeouts count against the server's health.
    pub async fn call_tool(
        &self,
        id: &ServerId,
        call: ToolCall,
        ctx: CallContext,
    ) -> Result<ToolCallOutcome, CoreError> {
        let server = self.lookup(id)?;
        let _in_flight = InFlight::enter(self, &server);
        let timeout = self.inner.settings.call_timeout;
        let session = self
            .session_for_call(&server, id, ctx.trace.as_ref())
            .await?;
        let mut ctx = ctx;
        ctx.caller_meta.clone_from(&server.caller_meta());
        // The upstream request's span: its context is what the upstream continues.
        let mut upstream = Span::start_local("tools/call", SpanKind::Client, ctx.trace.as_ref());
        if upstream.is_recording() {
            upstream.update_name(|| format!("tools/call {}", call.name));
            upstream.set_attribute(keys::MCP_METHOD_NAME, "tools/call");
            upstream.set_attribute(keys::GEN_AI_TOOL_NAME, call.name.clone());
            upstream.set_attribute(keys::MCP_SERVER_ID, id.to_string());
            upstream.set_attribute(keys::MCP_SERVER_MODE, server.spec().mode().to_owned());
        }
        if let Some(context) = upstream.context() {
            ctx.trace = Some(context.clone());
        }
        let tool = call.name.clone();
        let principal = ctx.principal.clone();
        // A sampled call's trace goes into its event, for the event log and the metrics'
        // exemplars (two copies of a few bytes, nothing when the call is not traced).
        let (trace_id, span_id) = ctx
            .trace
            .as_ref()
            .filter(|trace| trace.sampled)
            .map_or((None, None), |trace| {
                (Some(trace.trace_id), Some(trace.span_id))
            });
        let cancellation = ctx.cancellation.clone();
        let started = self.inner.clock.now();
        let call = async {
            let _slot = server.call_slots.acquire().await;
            session.call_tool(call, ctx).await
        };
        let mut call = std::pin::pin!(call);
        let result = match within(&*self.inner.clock, timeout, call.as_mut()).await {
            Some(result) => result,
            None => {
                // Cancel through the session (which tells the upstream) and give it a moment
                // to do so, instead of dropping the request on the floor.
                cancellation.cancel();
                let _ = within(&*self.inner.clock, CANCEL_GRACE, call).await;
                Err(SessionError::timeout(format!(
                    "the tool did not answer within {} s",
                    timeout.as_secs_f64()
                )))
            }
        };
        let duration_ms = self
            .inner
            .clock
            .now()
            .saturating_since(started)
            .as_secs_f64()
            * 1000.0;
        if upstream.is_recording() {
            match &result {
                Ok(outcome) if outcome.is_error => {
                    upstream.set_error("tool_error", "the tool answered an error");
                }
                Ok(_) => {}
                Err(error) => upstream.set_error(error.kind.as_str(), &error.message),
            }
        }
        upstream.end();
        match &result {
            Ok(outcome) => {
                server.status().failures.record_success();
                self.publish(DomainEvent::ToolInvocationCompleted {
                    mcp_server_id: id.clone(),
                    tool,
                    duration_ms,
                    is_error: outcome.is_error,
                    principal,
                    trace_id,
                    span_id,
                });
            }
            Err(error) => {
                // A call that failed because its session ended (a crash) is part of that end,
                // which `on_session_ended` counts once for every call that was in flight.
                if error.kind.counts_against_health() && !session.has_ended() {
                    self.record_runtime_failure(&server, &error.to_string());
                }
                self.publish(DomainEvent::ToolInvocationFailed {
                    mcp_server_id: id.clone(),
                    tool,
                    duration_ms,
                    error_kind: error.kind.as_str(),
                    error: error.message.clone(),
                    principal,
                    trace_id,
                    span_id,
                });
            }
        }
        result.map_err(|source| CoreError::Session {
            server: id.clone(),
            source,
        })
    }

    /// The session a call runs on, starting the server when it is not running (single flight,
    /// subject to the restart backoff). A start can take up to the start timeout (a server that
    /// never answers `initialize`); the caller waits for it no longer than for a call. The start
    /// goes on without it and its own outcome (ready, or dead with the reason) is what counts
    /// against health.
    async fn session_for_call(
        &self,
        server: &Arc<ManagedServer>,
        id: &ServerId,
        trace: Option<&TraceContext>,
    ) -> Result<Arc<dyn McpSession>, CoreError> {
        // A running server's session comes without the start's future, which is large (more
        // than a kilobyte) and would otherwise be part of every call's future; it is boxed
        // below, for the calls that start their server.
        if let Some(session) = ready_session(server) {
            return Ok(session);
        }
        // The lazy start, as this call waits for it (a start other calls share is waited for
        // by each, under each one's trace).
        let mut span = Span::start_local("mcp_server.start", SpanKind::Internal, trace);
        if span.is_recording() {
            span.set_attribute(keys::MCP_SERVER_ID, id.to_string());
            span.set_attribute(keys::MCP_SERVER_MODE, server.spec().mode().to_owned());
        }
        let started = self.start_session_for_call(server, id).await;
        if let Err(error) = &started {
            span.set_error("start_failed", &error.to_string());
        }
        started
    }

    /// The slow path of [`ServerManager::session_for_call`]: the server is not running.
    async fn start_session_for_call(
        &self,
        server: &Arc<ManagedServer>,
        id: &ServerId,
    ) -> Result<Arc<dyn McpSession>, CoreError> {
        let timeout = self.inner.settings.call_timeout;
        Box::pin(within(
            &*self.inner.clock,
            timeout,
            self.start_server(server, false),
        ))
        .await
        .ok_or_else(|| CoreError::Session {
            server: id.clone(),
            source: SessionError::timeout(format!(
                "the server did not finish starting within {} s (the call timeout); the \
                 start goes on: retry later, or read its state and logs if it never becomes ready",
                timeout.as_secs_f64()
            )),
        })?
        .map_err(|failure| self.start_error(id, failure))
    }

    /// Starts a server, when it is not running, exactly as [`ServerManager::call_tool`] would
    /// (single flight with every other start, subject to the restart backoff, waited for no
    /// longer than the call timeout); it stays running like one a call started. For a call
    /// that names a tool of a server whose tools are not known yet: once this returns, they are.
    pub async fn start_for_call(&self, id: &ServerId) -> Result<(), CoreError> {
        let server = self.lookup(id)?;
        let _in_flight = InFlight::enter(self, &server);
        self.session_for_call(&server, id, None).await.map(drop)
    }

    /// Counts a failure of a running server; at the limit a ready server becomes degraded.
    fn record_runtime_failure(&self, server: &ManagedServer, error: &str) -> u32 {
        let id = server.spec().id.clone();
        let mut status = server.status();
        status.failures.record_failure(self.inner.clock.now());
        status.last_error = Some(error.to_owned());
        if status.failures.limit_reached() && status.state == ServerState::Ready {
            let _ = self.transition(
                &id,
                &mut status,
                ServerState::Degraded,
                "too many consecutive failures",
            );
        }
        status.failures.consecutive()
    }

    // ----- maintenance --------------------------------------------------------------------

    /// One pass of background upkeep; the host calls it every second or so. It reaps servers
    /// idle longer than their `idle_ttl`, runs due health checks (each in its own task) and
    /// restarts degraded servers whose backoff has passed.
    pub async fn run_maintenance(&self) {
        let now = self.inner.clock.now();
        for server in self.all() {
            let spec = server.spec();
            enum Due {
                Nothing,
                Reap,
                HealthCheck(Arc<dyn McpSession>, u64),
                Restart,
            }
            let due = {
                let mut status = server.status();
                let idle = server.in_flight.load(Ordering::Acquire) == 0
                    && now.saturating_since(status.last_used) >= spec.idle_ttl;
                match status.state {
                    ServerState::Ready if idle => Due::Reap,
                    ServerState::Ready
                        if now >= status.next_health_check && !status.health_check_running =>
                    {
                        match status.session.clone() {
                            Some(session) => {
                                status.health_check_running = true;
                                Due::HealthCheck(session, status.generation)
                            }
                            None => Due::Nothing,
                        }
                    }
                    ServerState::Degraded if status.failures.wait_before_start(now).is_zero() => {
                        Due::Restart
                    }
                    _ => Due::Nothing,
                }
            };
            match due {
                Due::Nothing => {}
                Due::Reap => {
                    // A stop can take the whole grace period; the other servers' upkeep must not
                    // wait for it.
                    tracing::info!(server = %spec.id, "stopping idle mcp server");
                    let manager = self.clone();
                    let server = Arc::clone(&server);
                    self.inner
                        .spawner
                        .spawn(async move { manager.stop_if_still_idle(&server).await }.boxed());
                }
                Due::HealthCheck(session, generation) => {
                    let manager = self.clone();
                    let server = Arc::clone(&server);
                    self.inner.spawner.spawn(
                        async move { manager.health_check(&server, session, generation).await }
                            .boxed(),
                    );
                }
                Due::Restart => {
                    let manager = self.clone();
                    let server = Arc::clone(&server);
                    self.inner.spawner.spawn(
                        async move {
                            if let Err(failure) = manager.start_server(&server, false).await {
                                tracing::debug!(?failure, "restart of a degraded server failed");
                            }
                        }
                        .boxed(),
                    );
                }
            }
        }
    }

    /// Stops a server for idleness, unless a call arrived since the decision was made.
    async fn stop_if_still_idle(&self, server: &Arc<ManagedServer>) {
        let spec = server.spec();
        let still_idle = {
            let status = server.status();
            server.in_flight.load(Ordering::Acquire) == 0
                && self.inner.clock.now().saturating_since(status.last_used) >= spec.idle_ttl
        };
        if still_idle {
            self.stop_server(server, "idle").await;
        }
    }

    async fn health_check(
        &self,
        server: &Arc<ManagedServer>,
        session: Arc<dyn McpSession>,
        generation: u64,
    ) {
        let timeout = self.inner.settings.health_check_timeout;
        let pinged = self.inner.clock.now();
        let result = within(&*self.inner.clock, timeout, session.ping())
            .await
            .unwrap_or_else(|| Err(SessionError::timeout("the health check timed out")));
        let took = self.inner.clock.now().saturating_since(pinged);
        let spec = server.spec();
        let failure = {
            let mut status = server.status();
            status.health_check_running = false;
            if status.generation != generation {
                return;
            }
            status.next_health_check = self.inner.clock.now().plus(spec.health_check_interval);
            status.last_health_check_at = Some(self.inner.clock.wall());
            status.last_health_check_ok = Some(result.is_ok());
            match &result {
                Ok(()) => {
                    status.health_checks_passed += 1;
                    status.failures.record_success();
                    None
                }
                Err(error) => {
                    status.health_checks_failed += 1;
                    Some(error.to_string())
                }
            }
        };
        // Timed like it is counted: a check of a session that was replaced meanwhile is neither.
        crate::census::health_check_timed(&spec.id, failure.is_none(), took);
        if let Some(error) = failure {
            let consecutive_failures = self.record_runtime_failure(server, &error);
            self.publish(DomainEvent::HealthCheckFailed {
                mcp_server_id: spec.id.clone(),
                error,
                consecutive_failures,
            });
        }
    }
}

/// The session of a server that is ready, if it is.
fn ready_session(server: &ManagedServer) -> Option<Arc<dyn McpSession>> {
    let status = server.status();
    match (status.state, &status.session) {
        (ServerState::Ready, Some(session)) => Some(Arc::clone(session)),
        _ => None,
    }
}

/// The source of a server's listed tools (`live_tools` is set).
fn listed_source(status: &Status) -> ToolSource {
    match &status.tools_learned {
        Some(Learned { stored: true, .. }) => ToolSource::Stored,
        _ => ToolSource::Live,
    }
}

/// Counts a call as in flight (so idle reaping leaves the server alone), marks the server
/// wanted (so a tool probe leaves it running), and marks it used at both ends of the call.
struct InFlight<'a> {
    manager: &'a ServerManager,
    server: Arc<ManagedServer>,
}

impl<'a> InFlight<'a> {
    fn enter(manager: &'a ServerManager, server: &Arc<ManagedServer>) -> Self {
        server.in_flight.fetch_add(1, Ordering::AcqRel);
        let guard = Self {
            manager,
            server: Arc::clone(server),
        };
        let mut status = guard.touch();
        // A call wants the server: a probe that shares its start must not stop it.
        status.wanted = true;
        drop(status);
        guard
    }

    fn touch(&self) -> std::sync::MutexGuard<'_, Status> {
        let mut status = self.server.status();
        status.last_used = self.manager.inner.clock.now();
        status.last_used_at = Some(self.manager.inner.clock.wall());
        status
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        drop(self.touch());
        self.server.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}
