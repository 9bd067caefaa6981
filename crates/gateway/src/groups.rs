//! Groups at run time: the use cases over the groups domain (create, change, delete, rebalance),
//! the routing of a call through a group's strategy with one retry on another member, and the
//! rotation that follows the members' health.
//!
//! The group aggregates (`mcpgw_groups::Group`) live here behind one lock each; the manager
//! runs the calls. Members are ordinary managed servers: a group never stops them, and a call
//! routed to a cold member starts it lazily like any other call. The one start a group makes
//! itself is the recovery of a crashed member that is out of rotation (no call reaches it any
//! more), so that it can return ([`GroupService::recover`]).
//!
//! Rotation follows the members' servers: a transport failure of a routed call, a failed
//! health check, or the server turning `degraded` or `dead` takes a member out; the server
//! becoming `ready` (or a passed health check, or a stop with its backoff over, seen by the
//! recovery pass) brings it back; `rebalance` re-reads everything at once.

use mcpgw_core::trace::{Span, SpanKind, keys};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcpgw_config::GroupDefinition;
use mcpgw_core::{
    CallContext, CoreError, DomainEvent, ErrorKind, EventObserver, EventSink, PublishedEvent,
    ResyncReport, ServerId, ServerManager, ServerOrigin, ServerState, SessionErrorKind, Tool,
    ToolCall, ToolCallOutcome, ToolSource, scope_task, scoped_id, split_scoped_id,
};
use mcpgw_groups::{
    CallOutcome, CallPlan, Group, GroupError, GroupEvent, GroupRepository, GroupSpec, GroupState,
    GroupStrategy, MAX_ATTEMPTS_PER_CALL, MemberSpec, RandomSource,
};
use serde::Serialize;
use serde_json::Value;

/// A member as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemberView {
    pub id: ServerId,
    pub weight: u32,
    pub priority: u32,
    /// The member server's lifecycle state (`None` if the server is gone).
    pub state: Option<ServerState>,
    pub in_rotation: bool,
    /// Calls routed to this member through the group and not finished yet.
    pub in_flight: u32,
}

/// A group as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupView {
    pub group_id: ServerId,
    pub description: Option<String>,
    pub strategy: GroupStrategy,
    pub min_healthy: u32,
    pub state: GroupState,
    /// `config` for groups of the configuration file, `api` for groups created over REST.
    pub origin: &'static str,
    pub members: Vec<MemberView>,
}

/// A partial change of a group (REST `PUT`/`PATCH`): absent fields keep their value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupUpdate {
    pub strategy: Option<GroupStrategy>,
    pub min_healthy: Option<u32>,
    /// `Some(None)` clears the description.
    pub description: Option<Option<String>>,
    /// Replaces the whole member list when present.
    pub members: Option<Vec<MemberSpec>>,
}

/// Why a group use case was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum GroupServiceError {
    #[error("group `{0}` does not exist; list the groups with GET /api/groups")]
    NotFound(ServerId),
    #[error(
        "the id `{0}` is already used by a group or an mcp server; group ids and server ids \
         share one namespace, choose another id"
    )]
    AlreadyExists(ServerId),
    #[error(
        "mcp server `{0}` does not exist; register it before adding it to a group (GET \
         /api/mcp_servers lists the servers)"
    )]
    MemberServerNotFound(ServerId),
    #[error(
        "group `{0}` is declared in the configuration file; change the file and reload instead"
    )]
    ConfigManaged(ServerId),
    #[error("mcp server `{server}` is a member of group `{group}`; remove it from the group first")]
    ServerInGroup { server: ServerId, group: ServerId },
    #[error(transparent)]
    Domain(#[from] GroupError),
    #[error("the group could not be stored: {0}")]
    Storage(String),
}

impl GroupServiceError {
    /// The error class the adapters map to statuses: 404, 409, 422, 500.
    pub fn kind(&self) -> ErrorKind {
        match self {
            GroupServiceError::NotFound(_) | GroupServiceError::MemberServerNotFound(_) => {
                ErrorKind::NotFound
            }
            GroupServiceError::AlreadyExists(_)
            | GroupServiceError::ConfigManaged(_)
            | GroupServiceError::ServerInGroup { .. } => ErrorKind::Conflict,
            GroupServiceError::Domain(error) => error.kind(),
            GroupServiceError::Storage(_) => ErrorKind::Internal,
        }
    }
}

/// The random source of the `random` strategy in production: a small xorshift generator
/// seeded from the clock and the process id. Tests hand in a scripted source instead.
pub struct SeededRandom(u64);

impl SeededRandom {
    pub fn from_entropy() -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|since| since.as_nanos() as u64)
            .unwrap_or_default();
        // A stack address adds a little more per-process variation (address randomization).
        let local = 0_u8;
        let address = std::ptr::from_ref(&local).addr() as u64;
        Self::with_seed(nanos ^ (u64::from(std::process::id()) << 32) ^ address)
    }

    /// A generator with a fixed seed: the same seed gives the same numbers.
    pub fn with_seed(seed: u64) -> Self {
        // splitmix64 spreads similar seeds apart; xorshift must never hold 0.
        let mut mixed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        mixed ^= mixed >> 31;
        Self(if mixed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            mixed
        })
    }
}

impl RandomSource for SeededRandom {
    fn next_u64(&mut self) -> u64 {
        // xorshift64*.
        let mut state = self.0;
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        self.0 = state;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Handed to strategies that never draw (all but `random`), so the shared generator's lock
/// stays off their call path.
struct NoDraws;

impl RandomSource for NoDraws {
    fn next_u64(&mut self) -> u64 {
        0
    }
}

/// Why a member entered or left rotation, as the `reason` of `GroupMemberHealthChanged`.
mod reason {
    pub const SERVER_DEGRADED: &str = "server_degraded";
    pub const SERVER_DEAD: &str = "server_dead";
    pub const SERVER_READY: &str = "server_ready";
    pub const HEALTH_CHECK_FAILED: &str = "health_check_failed";
    pub const RECOVERED: &str = "recovered";
    pub const REBALANCE: &str = "rebalance";
    /// A member added (or created with the group) while its server is degraded or dead.
    pub const UNHEALTHY_WHEN_ADDED: &str = "unhealthy_when_added";
}

/// The reasons to publish for the rotation changes of one operation: `left` overrides the
/// domain's own leave reason when set.
#[derive(Clone, Copy)]
struct Reasons {
    left: Option<&'static str>,
    returned: &'static str,
}

impl Reasons {
    const fn new(left: Option<&'static str>, returned: &'static str) -> Self {
        Self { left, returned }
    }
}

struct GroupEntry {
    group: Group,
    description: Option<String>,
    origin: ServerOrigin,
}

impl GroupEntry {
    fn spec(&self) -> GroupSpec {
        GroupSpec {
            id: self.group.id().clone(),
            description: self.description.clone(),
            strategy: self.group.strategy(),
            min_healthy: self.group.min_healthy(),
            members: self
                .group
                .members()
                .iter()
                .map(|member| MemberSpec {
                    id: member.id().clone(),
                    weight: member.weight(),
                    priority: member.priority(),
                })
                .collect(),
        }
    }

    fn is_config(&self) -> bool {
        self.origin == ServerOrigin::Config
    }
}

/// A poisoned entry is still consistent: every change to a group is one domain call that
/// either happens or not, so a panic elsewhere never leaves it half changed.
fn lock(entry: &Mutex<GroupEntry>) -> MutexGuard<'_, GroupEntry> {
    entry
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn storage(error: mcpgw_core::RepositoryError) -> GroupServiceError {
    GroupServiceError::Storage(error.to_string())
}

/// Whether the member's server can take calls as far as its state tells: a cold server is
/// started by the call, a degraded or dead one cannot answer now.
fn state_is_healthy(state: ServerState) -> bool {
    !matches!(state, ServerState::Degraded | ServerState::Dead)
}

/// How an attempt on a member ended, as far as rotation and the retry care.
fn classify(result: &Result<ToolCallOutcome, CoreError>) -> CallOutcome {
    match result {
        // An `isError` result is an answer: the member works.
        Ok(_) => CallOutcome::Success,
        Err(CoreError::Session { source, .. }) => match source.kind {
            SessionErrorKind::Transport | SessionErrorKind::Closed => CallOutcome::TransportFailure,
            // Timeouts, cancellations and JSON-RPC errors would likely repeat elsewhere (or
            // the caller gave up): no retry, and the manager's own health rules decide the rest.
            _ => CallOutcome::ToolError,
        },
        // The member could not be started (or is gone): another member may well answer.
        Err(
            CoreError::StartFailed { .. }
            | CoreError::BackingOff { .. }
            | CoreError::ServerNotFound(_),
        ) => CallOutcome::TransportFailure,
        Err(_) => CallOutcome::ToolError,
    }
}

/// A group's definition from the configuration file, as the groups domain takes it.
pub fn group_spec_from_config(
    definition: &GroupDefinition,
) -> Result<GroupSpec, GroupServiceError> {
    Ok(GroupSpec {
        id: definition.id.clone(),
        description: definition.description.clone(),
        strategy: definition.strategy,
        min_healthy: definition.min_healthy,
        members: definition
            .members
            .iter()
            .map(|member| MemberSpec {
                id: member.id.clone(),
                weight: member.weight,
                priority: member.priority,
            })
            .collect(),
    })
}

/// Every group of the gateway. Cheap to share (`Arc`).
///
/// Locking: the map's lock is only held to find an entry; an entry's lock is held for domain
/// calls only, never across an `.await` and never while asking the manager anything, because
/// the manager publishes server events while holding its own locks and the observer of this
/// service then takes entry locks. Changes of definition (create, update, delete, members) are
/// serialized by one async lock, so a definition is validated, stored and applied as one step.
pub struct GroupService {
    manager: ServerManager,
    events: Arc<dyn EventSink>,
    repository: Option<Arc<dyn GroupRepository>>,
    random: Mutex<Box<dyn RandomSource + Send>>,
    groups: RwLock<BTreeMap<ServerId, Arc<Mutex<GroupEntry>>>>,
    changes: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for GroupService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupService").finish_non_exhaustive()
    }
}

impl GroupService {
    /// No groups yet; `events` receives the group events.
    pub fn new(manager: ServerManager, events: Arc<dyn EventSink>) -> Self {
        Self {
            manager,
            events,
            repository: None,
            random: Mutex::new(Box::new(SeededRandom::from_entropy())),
            groups: RwLock::new(BTreeMap::new()),
            changes: tokio::sync::Mutex::new(()),
        }
    }

    /// Keeps groups created over the API in `repository`.
    #[must_use]
    pub fn with_repository(mut self, repository: Arc<dyn GroupRepository>) -> Self {
        self.repository = Some(repository);
        self
    }

    /// Uses `random` for the `random` strategy (tests pass a scripted source).
    #[must_use]
    pub fn with_random(self, random: Box<dyn RandomSource + Send>) -> Self {
        *self.random.lock().unwrap_or_else(|p| p.into_inner()) = random;
        self
    }

    // ----- lookups ------------------------------------------------------------------------

    fn entry(&self, id: &ServerId) -> Option<Arc<Mutex<GroupEntry>>> {
        self.groups
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
    }

    fn entries(&self) -> Vec<Arc<Mutex<GroupEntry>>> {
        self.groups
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    fn existing(&self, id: &ServerId) -> Result<Arc<Mutex<GroupEntry>>, GroupServiceError> {
        self.entry(id)
            .ok_or_else(|| GroupServiceError::NotFound(id.clone()))
    }

    /// The entry of a group whose definition may be changed over the API.
    fn changeable(&self, id: &ServerId) -> Result<Arc<Mutex<GroupEntry>>, GroupServiceError> {
        let entry = self.existing(id)?;
        if lock(&entry).is_config() {
            return Err(GroupServiceError::ConfigManaged(id.clone()));
        }
        Ok(entry)
    }

    fn server_state(&self, id: &ServerId) -> Option<ServerState> {
        self.manager
            .snapshot(id)
            .ok()
            .map(|snapshot| snapshot.state)
    }

    /// The view of a group; member states are read after the entry's lock is released.
    fn view(&self, entry: &Mutex<GroupEntry>) -> GroupView {
        let mut view = {
            let entry = lock(entry);
            GroupView {
                group_id: entry.group.id().clone(),
                description: entry.description.clone(),
                strategy: entry.group.strategy(),
                min_healthy: entry.group.min_healthy(),
                state: entry.group.state(),
                origin: entry.origin.as_str(),
                members: entry
                    .group
                    .members()
                    .iter()
                    .map(|member| MemberView {
                        id: member.id().clone(),
                        weight: member.weight(),
                        priority: member.priority(),
                        state: None,
                        in_rotation: member.in_rotation(),
                        in_flight: member.in_flight(),
                    })
                    .collect(),
            }
        };
        for member in &mut view.members {
            member.state = self.server_state(&member.id);
        }
        view
    }

    // ----- events -------------------------------------------------------------------------

    fn publish(&self, event: DomainEvent) {
        self.events.publish(self.manager.clock().wall(), event);
    }

    fn publish_rotation(&self, events: Vec<GroupEvent>, reasons: Reasons) {
        for event in events {
            self.publish(match event {
                GroupEvent::MemberLeftRotation {
                    group,
                    member,
                    reason,
                } => DomainEvent::GroupMemberHealthChanged {
                    group_id: group,
                    mcp_server_id: member,
                    in_rotation: false,
                    reason: reasons.left.unwrap_or(reason.as_str()),
                },
                GroupEvent::MemberReturned { group, member } => {
                    DomainEvent::GroupMemberHealthChanged {
                        group_id: group,
                        mcp_server_id: member,
                        in_rotation: true,
                        reason: reasons.returned,
                    }
                }
                GroupEvent::StateChanged { group, from, to } => DomainEvent::GroupStateChanged {
                    group_id: group,
                    from: from.as_str(),
                    to: to.as_str(),
                },
            });
        }
    }

    // ----- definitions --------------------------------------------------------------------

    /// Loads the groups of the repository (at start-up, after the servers).
    ///
    /// A stored group whose id is now taken (by a server or a configured group) is skipped with
    /// a warning, the configuration wins; members whose servers are gone are left out (and the
    /// stored group is updated), so one stale row never stops the gateway from starting.
    pub async fn restore_from_repository(&self) -> Result<usize, GroupServiceError> {
        let Some(repository) = self.repository.clone() else {
            return Ok(0);
        };
        let stored = repository.load_all().await.map_err(storage)?;
        let _changes = self.changes.lock().await;
        let mut restored = 0;
        for mut spec in stored {
            if self.contains(&spec.id) || self.manager.contains(&spec.id) {
                tracing::warn!(
                    group = %spec.id,
                    "a stored group has the id of a configured group or a server; the stored group is not loaded"
                );
                continue;
            }
            let before = spec.members.len();
            spec.members.retain(|member| {
                let exists = self.manager.contains(&member.id);
                if !exists {
                    tracing::warn!(
                        group = %spec.id,
                        member = %member.id,
                        "a stored group names a server that no longer exists; the member is left out"
                    );
                }
                exists
            });
            let shrunk = spec.members.len() != before;
            let id = spec.id.clone();
            match self.insert(spec, ServerOrigin::Api, shrunk).await {
                Ok(_) => restored += 1,
                Err(error) => {
                    tracing::warn!(group = %id, %error, "a stored group could not be loaded");
                }
            }
        }
        Ok(restored)
    }

    /// Brings the groups created at run time in line with the repository, which another gateway
    /// sharing it may have changed: stored groups this one lacks are added, changed ones take
    /// the stored definition (members that stay keep their rotation), and run-time groups no
    /// longer stored are removed. Groups of the configuration file are left alone; nothing is
    /// written back. Resync the servers first, so that new groups find their members.
    pub async fn resync_from_repository(&self) -> Result<ResyncReport, GroupServiceError> {
        let Some(repository) = self.repository.clone() else {
            return Ok(ResyncReport::default());
        };
        let _changes = self.changes.lock().await;
        let stored = repository.load_all().await.map_err(storage)?;
        let mut report = ResyncReport::default();
        let stored_ids: HashSet<ServerId> = stored.iter().map(|spec| spec.id.clone()).collect();
        for spec in stored {
            let id = spec.id.clone();
            match self.existing(&id) {
                Err(_) if self.manager.contains(&id) => {
                    tracing::warn!(group = %id, "a stored group has the id of a server; it is not loaded");
                }
                Err(_) => match self.insert(spec, ServerOrigin::Api, false).await {
                    Ok(_) => report.added.push(id),
                    Err(error) => {
                        tracing::warn!(group = %id, %error, "a group stored by another gateway could not be loaded");
                    }
                },
                Ok(entry) => {
                    let current = {
                        let entry = lock(&entry);
                        (!entry.is_config()).then(|| entry.spec())
                    };
                    let Some(current) = current else { continue };
                    if current == spec {
                        continue;
                    }
                    let update = GroupUpdate {
                        strategy: Some(spec.strategy),
                        min_healthy: Some(spec.min_healthy),
                        description: Some(spec.description),
                        members: Some(spec.members),
                    };
                    match self
                        .apply_group_update(&id, &entry, update, ServerOrigin::Api, false)
                        .await
                    {
                        Ok(_) => report.updated.push(id),
                        Err(error) => {
                            tracing::warn!(group = %id, %error, "a group changed by another gateway could not be updated");
                        }
                    }
                }
            }
        }
        let gone: Vec<ServerId> = self
            .entries()
            .iter()
            .filter_map(|entry| {
                let entry = lock(entry);
                let id = entry.group.id();
                (!entry.is_config() && !stored_ids.contains(id)).then(|| id.clone())
            })
            .collect();
        for id in gone {
            self.remove_entry(&id);
            report.removed.push(id);
        }
        Ok(report)
    }

    /// Creates a group. Its members must be registered servers; its id must not be a server's
    /// or another group's. Publishes `GroupCreated`; an API group is stored first.
    ///
    /// A group created with members needs at most as many healthy members as it has
    /// (`min_healthy`); one created without members may ask for more, since its members are
    /// added afterwards. Members whose servers are degraded or dead start out of rotation.
    pub async fn create(
        &self,
        spec: GroupSpec,
        origin: ServerOrigin,
    ) -> Result<GroupView, GroupServiceError> {
        let _changes = self.changes.lock().await;
        if self.contains(&spec.id) || self.manager.contains(&spec.id) {
            return Err(GroupServiceError::AlreadyExists(spec.id));
        }
        let members = spec.members.len();
        if origin == ServerOrigin::Api && members > 0 && spec.min_healthy as usize > members {
            return Err(GroupError::MinHealthyAboveMembers {
                group: spec.id,
                min_healthy: spec.min_healthy,
                members,
            }
            .into());
        }
        let save = origin == ServerOrigin::Api;
        self.insert(spec, origin, save).await
    }

    /// Validates, stores (when `save`) and registers a group; the caller holds `changes`.
    async fn insert(
        &self,
        spec: GroupSpec,
        origin: ServerOrigin,
        save: bool,
    ) -> Result<GroupView, GroupServiceError> {
        let mut group = Group::with_members(
            spec.id.clone(),
            spec.strategy,
            spec.min_healthy,
            spec.members.iter().cloned(),
        )?;
        if let Some(missing) = spec
            .members
            .iter()
            .find(|member| !self.manager.contains(&member.id))
        {
            return Err(GroupServiceError::MemberServerNotFound(missing.id.clone()));
        }
        let mut rotation = Vec::new();
        for member in &spec.members {
            if self
                .server_state(&member.id)
                .is_some_and(|state| !state_is_healthy(state))
            {
                rotation.extend(group.member_health(&member.id, false)?);
            }
        }
        if save && let Some(repository) = &self.repository {
            repository.save(&spec).await.map_err(storage)?;
        }
        let entry = Arc::new(Mutex::new(GroupEntry {
            group,
            description: spec.description,
            origin,
        }));
        {
            let mut groups = self.groups.write().unwrap_or_else(|p| p.into_inner());
            groups.insert(spec.id.clone(), Arc::clone(&entry));
        }
        {
            let entry = lock(&entry);
            self.publish(DomainEvent::GroupCreated {
                group_id: spec.id,
                strategy: entry.group.strategy().as_str(),
                origin: entry.origin.as_str(),
            });
            self.publish_rotation(
                rotation,
                Reasons::new(Some(reason::UNHEALTHY_WHEN_ADDED), reason::SERVER_READY),
            );
        }
        Ok(self.view(&entry))
    }

    pub fn get(&self, id: &ServerId) -> Result<GroupView, GroupServiceError> {
        let entry = self.existing(id)?;
        Ok(self.view(&entry))
    }

    /// Every group, in id order.
    pub fn list(&self) -> Vec<GroupView> {
        self.entries()
            .iter()
            .map(|entry| self.view(entry))
            .collect()
    }

    pub fn contains(&self, id: &ServerId) -> bool {
        self.groups
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(id)
    }

    /// The ids of every group, in order.
    pub fn ids(&self) -> Vec<ServerId> {
        self.groups
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    /// The groups `server` is a member of, in id order.
    pub fn groups_of(&self, server: &ServerId) -> Vec<ServerId> {
        self.entries()
            .iter()
            .filter_map(|entry| {
                let entry = lock(entry);
                entry.group.member(server).map(|_| entry.group.id().clone())
            })
            .collect()
    }

    /// Whether `server` is a member of at least one group.
    pub fn is_member(&self, server: &ServerId) -> bool {
        self.entries()
            .iter()
            .any(|entry| lock(entry).group.member(server).is_some())
    }

    /// Every server that is a member of at least one group (the catalogue hides them).
    pub fn member_ids(&self) -> HashSet<ServerId> {
        let mut members = HashSet::new();
        for entry in self.entries() {
            let entry = lock(&entry);
            members.extend(
                entry
                    .group
                    .members()
                    .iter()
                    .map(|member| member.id().clone()),
            );
        }
        members
    }

    /// Changes strategy, `min_healthy`, description or the member list of an API group.
    /// Publishes `GroupUpdated` (and member/state events for what changed).
    ///
    /// A new member list keeps the members that stay in their place, with their rotation and
    /// calls in flight (their weight and priority are taken from the list); members that go
    /// are removed and new ones are added at the end. A strategy that changes starts from its
    /// beginning. `min_healthy` is applied after the members, so both can grow in one update.
    pub async fn update(
        &self,
        id: &ServerId,
        update: GroupUpdate,
    ) -> Result<GroupView, GroupServiceError> {
        let _changes = self.changes.lock().await;
        let entry = self.changeable(id)?;
        self.apply_group_update(id, &entry, update, ServerOrigin::Api, true)
            .await
    }

    /// Gives a group the definition `spec`, whatever its origin: how a configuration reload
    /// changes a group of the file. As with [`GroupService::update`], the members that stay
    /// keep their place, rotation and calls in flight, and a strategy that does not change
    /// keeps its state. Publishes `GroupUpdated` (and member/state events for what changed).
    pub async fn replace(&self, spec: GroupSpec) -> Result<GroupView, GroupServiceError> {
        let _changes = self.changes.lock().await;
        let entry = self.existing(&spec.id)?;
        let origin = lock(&entry).origin.clone();
        let update = GroupUpdate {
            strategy: Some(spec.strategy),
            min_healthy: Some(spec.min_healthy),
            description: Some(spec.description),
            members: Some(spec.members),
        };
        self.apply_group_update(&spec.id, &entry, update, origin, true)
            .await
    }

    /// The body of `update`, `replace` and a resync (which stores nothing: the definition
    /// came from the repository); the caller holds `changes`.
    async fn apply_group_update(
        &self,
        id: &ServerId,
        entry: &Arc<Mutex<GroupEntry>>,
        update: GroupUpdate,
        origin: ServerOrigin,
        store: bool,
    ) -> Result<GroupView, GroupServiceError> {
        let entry = Arc::clone(entry);
        if update == GroupUpdate::default() {
            return Ok(self.view(&entry));
        }
        let (mut draft, description) = {
            let entry = lock(&entry);
            (entry.group.clone(), entry.description.clone())
        };
        let health = self.health_of_new_members(&draft, update.members.as_deref());
        let applied = apply_update(&mut draft, &update, &health)?;
        if let Some(missing) = applied
            .added
            .iter()
            .find(|member| !self.manager.contains(member))
        {
            return Err(GroupServiceError::MemberServerNotFound(missing.clone()));
        }
        let description = update.description.clone().unwrap_or(description);
        if store {
            self.save(&GroupEntry {
                group: draft,
                description: description.clone(),
                origin,
            })
            .await?;
        }
        {
            let mut live = lock(&entry);
            live.description = description;
            match apply_update(&mut live.group, &update, &health) {
                Ok(applied) => {
                    for member in applied.removed {
                        self.publish(DomainEvent::GroupMemberRemoved {
                            group_id: id.clone(),
                            mcp_server_id: member,
                        });
                    }
                    for member in applied.added {
                        self.publish(DomainEvent::GroupMemberAdded {
                            group_id: id.clone(),
                            mcp_server_id: member,
                        });
                    }
                    self.publish_rotation(
                        applied.events,
                        Reasons::new(Some(reason::UNHEALTHY_WHEN_ADDED), reason::SERVER_READY),
                    );
                }
                // Only a member that vanished since the draft (its server was removed) can
                // make the second application fail; the group keeps what it has.
                Err(error) => {
                    tracing::warn!(group = %id, %error, "a group changed while it was updated");
                }
            }
            self.publish(DomainEvent::GroupUpdated {
                group_id: id.clone(),
            });
        }
        Ok(self.view(&entry))
    }

    /// Which of the members named in `members` that are not in `group` yet may take calls.
    fn health_of_new_members(
        &self,
        group: &Group,
        members: Option<&[MemberSpec]>,
    ) -> HashMap<ServerId, bool> {
        members
            .unwrap_or_default()
            .iter()
            .filter(|member| group.member(&member.id).is_none())
            .map(|member| {
                let healthy = self.server_state(&member.id).is_none_or(state_is_healthy);
                (member.id.clone(), healthy)
            })
            .collect()
    }

    /// Stores an API group's definition; the caller holds `changes`.
    async fn save(&self, entry: &GroupEntry) -> Result<(), GroupServiceError> {
        match &self.repository {
            Some(repository) if !entry.is_config() => {
                repository.save(&entry.spec()).await.map_err(storage)
            }
            _ => Ok(()),
        }
    }

    /// Deletes an API group. Publishes `GroupDeleted`.
    pub async fn delete(&self, id: &ServerId) -> Result<(), GroupServiceError> {
        let _changes = self.changes.lock().await;
        self.changeable(id)?;
        if let Some(repository) = &self.repository {
            repository.delete(id).await.map_err(storage)?;
        }
        self.remove_entry(id);
        Ok(())
    }

    /// Removes a group whatever its origin (and without touching the repository): for
    /// configuration reloads that drop a configured group. Publishes `GroupDeleted`.
    pub async fn unregister(&self, id: &ServerId) -> Result<(), GroupServiceError> {
        let _changes = self.changes.lock().await;
        self.existing(id)?;
        self.remove_entry(id);
        Ok(())
    }

    fn remove_entry(&self, id: &ServerId) {
        let removed = self
            .groups
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        if removed.is_some() {
            self.publish(DomainEvent::GroupDeleted {
                group_id: id.clone(),
            });
        }
    }

    /// Adds a registered server as a member (in rotation unless it is degraded or dead).
    /// Publishes `GroupMemberAdded`.
    pub async fn add_member(
        &self,
        id: &ServerId,
        member: MemberSpec,
    ) -> Result<GroupView, GroupServiceError> {
        let _changes = self.changes.lock().await;
        let entry = self.changeable(id)?;
        let change = |group: &mut Group| group.add_member(member.clone());
        let draft = self.draft(&entry, change)?;
        if !self.manager.contains(&member.id) {
            return Err(GroupServiceError::MemberServerNotFound(member.id));
        }
        self.save(&draft).await?;
        let healthy = self.server_state(&member.id).is_none_or(state_is_healthy);
        {
            let mut live = lock(&entry);
            match change(&mut live.group) {
                Ok(mut events) => {
                    if !healthy {
                        events.extend(live.group.member_health(&member.id, false)?);
                    }
                    self.publish(DomainEvent::GroupMemberAdded {
                        group_id: id.clone(),
                        mcp_server_id: member.id.clone(),
                    });
                    self.publish_rotation(
                        events,
                        Reasons::new(Some(reason::UNHEALTHY_WHEN_ADDED), reason::SERVER_READY),
                    );
                }
                Err(error) => {
                    tracing::warn!(group = %id, %error, "a group changed while a member was added");
                }
            }
        }
        Ok(self.view(&entry))
    }

    /// Publishes `GroupMemberRemoved`.
    pub async fn remove_member(
        &self,
        id: &ServerId,
        member: &ServerId,
    ) -> Result<GroupView, GroupServiceError> {
        let _changes = self.changes.lock().await;
        let entry = self.changeable(id)?;
        let change = |group: &mut Group| group.remove_member(member);
        let draft = self.draft(&entry, change)?;
        self.save(&draft).await?;
        {
            let mut live = lock(&entry);
            // The member may have left meanwhile because its server was removed: then it is
            // gone already and was announced then.
            if let Ok(events) = change(&mut live.group) {
                self.publish(DomainEvent::GroupMemberRemoved {
                    group_id: id.clone(),
                    mcp_server_id: member.clone(),
                });
                self.publish_rotation(events, Reasons::new(None, reason::SERVER_READY));
            }
        }
        Ok(self.view(&entry))
    }

    /// A copy of the entry with `change` applied, to validate and store before the live group
    /// changes.
    fn draft(
        &self,
        entry: &Mutex<GroupEntry>,
        change: impl FnOnce(&mut Group) -> Result<Vec<GroupEvent>, GroupError>,
    ) -> Result<GroupEntry, GroupServiceError> {
        let mut draft = {
            let entry = lock(entry);
            GroupEntry {
                group: entry.group.clone(),
                description: entry.description.clone(),
                origin: entry.origin.clone(),
            }
        };
        change(&mut draft.group)?;
        Ok(draft)
    }

    // ----- rotation -----------------------------------------------------------------------

    /// Re-reads every member's health (a member is healthy unless its server is degraded or
    /// dead), puts the healthy ones back in rotation and resets the strategy's state.
    pub fn rebalance(&self, id: &ServerId) -> Result<GroupView, GroupServiceError> {
        let entry = self.existing(id)?;
        let members: Vec<ServerId> = lock(&entry)
            .group
            .members()
            .iter()
            .map(|member| member.id().clone())
            .collect();
        // Read before locking the entry: the manager must never be asked under an entry lock.
        let healthy: Vec<ServerId> = members
            .into_iter()
            .filter(|member| self.server_state(member).is_some_and(state_is_healthy))
            .collect();
        {
            let mut entry = lock(&entry);
            let events = entry.group.rebalance(&healthy);
            self.publish_rotation(events, Reasons::new(None, reason::REBALANCE));
        }
        Ok(self.view(&entry))
    }

    /// Applies a member's health to every group it belongs to.
    fn set_member_health(&self, server: &ServerId, healthy: bool, why: &'static str) {
        for entry in self.entries() {
            let mut entry = lock(&entry);
            if entry.group.member(server).is_none() {
                continue;
            }
            if let Ok(events) = entry.group.member_health(server, healthy) {
                self.publish_rotation(events, Reasons::new(Some(why), why));
            }
        }
    }

    /// Takes a removed server out of every group; API groups are stored again in the
    /// background (the observer that calls this cannot wait).
    fn drop_member_everywhere(self: &Arc<Self>, server: &ServerId) {
        let mut to_store = Vec::new();
        for entry in self.entries() {
            let mut entry = lock(&entry);
            let Ok(events) = entry.group.remove_member(server) else {
                continue;
            };
            let group_id = entry.group.id().clone();
            self.publish(DomainEvent::GroupMemberRemoved {
                group_id: group_id.clone(),
                mcp_server_id: server.clone(),
            });
            self.publish_rotation(events, Reasons::new(None, reason::SERVER_READY));
            if !entry.is_config() {
                to_store.push(group_id);
            }
        }
        if to_store.is_empty() || self.repository.is_none() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(
                server = %server,
                "no runtime to store the groups a removed server left; they are stored at their next change"
            );
            return;
        };
        let service = Arc::clone(self);
        runtime.spawn(async move {
            let _changes = service.changes.lock().await;
            for id in to_store {
                let Some(entry) = service.entry(&id) else {
                    continue;
                };
                let current = service.draft(&entry, |_| Ok(Vec::new()));
                if let Ok(current) = current
                    && let Err(error) = service.save(&current).await
                {
                    tracing::warn!(group = %id, %error, "could not store a group after a member's server was removed");
                }
            }
        });
    }

    /// One pass of recovery for members out of rotation, so that a member returns once it can
    /// serve again even when no call reaches it (calls go to the members in rotation):
    ///
    /// - a ready server whose failures were reset by a later success (a health check that
    ///   passed) returns;
    /// - a cold server (stopped, so a call would start it anew) returns once its restart
    ///   backoff has passed;
    /// - a dead server (it crashed or failed to start) is started again once its backoff has
    ///   passed; when it becomes ready, the observer returns it.
    ///
    /// Degraded servers are restarted by the manager's own maintenance. Run it periodically
    /// ([`GroupService::spawn_recovery`]); tests call it directly.
    pub async fn recover(&self) {
        let mut out_of_rotation = BTreeSet::new();
        for entry in self.entries() {
            let entry = lock(&entry);
            out_of_rotation.extend(
                entry
                    .group
                    .members()
                    .iter()
                    .filter(|member| !member.in_rotation())
                    .map(|member| member.id().clone()),
            );
        }
        let mut to_start = Vec::new();
        for member in out_of_rotation {
            let Ok(snapshot) = self.manager.snapshot(&member) else {
                continue;
            };
            let backoff_passed = snapshot.restart_backoff_remaining.is_zero();
            match snapshot.state {
                ServerState::Ready if snapshot.consecutive_failures == 0 => {
                    self.set_member_health(&member, true, reason::RECOVERED);
                }
                ServerState::Cold if backoff_passed => {
                    self.set_member_health(&member, true, reason::RECOVERED);
                }
                ServerState::Dead if backoff_passed => to_start.push(member),
                _ => {}
            }
        }
        let starts = to_start.iter().map(|member| async move {
            if let Err(error) = self.manager.session(member).await {
                tracing::debug!(server = %member, %error, "a group member could not be restarted yet");
            }
        });
        futures::future::join_all(starts).await;
    }

    /// Runs [`GroupService::recover`] every `period` until the handle is aborted or the
    /// service is dropped. Call it from within a tokio runtime.
    pub fn spawn_recovery(self: &Arc<Self>, period: Duration) -> tokio::task::JoinHandle<()> {
        let service = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(period);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticker.tick().await;
                let Some(service) = service.upgrade() else {
                    return;
                };
                service.recover().await;
            }
        })
    }

    // ----- the data plane -----------------------------------------------------------------

    /// The tools a group exposes: those of its first member (in member order) whose tools are
    /// known, with the members' own names (the catalogue adds the `{group}__` prefix).
    pub fn tools(&self, id: &ServerId) -> Option<Vec<Tool>> {
        let entry = self.entry(id)?;
        let members: Vec<ServerId> = lock(&entry)
            .group
            .members()
            .iter()
            .map(|member| member.id().clone())
            .collect();
        let known = members
            .iter()
            .find_map(|member| match self.manager.tools(member) {
                Ok((tools, source)) if source != ToolSource::Unknown => Some(tools),
                _ => None,
            });
        Some(known.unwrap_or_default())
    }

    /// Whether the group has the tool `name`: the answer of its first member (in member order)
    /// that can tell ([`ServerManager::knows_tool`]); `None` while no member can, or for an
    /// unknown group.
    pub fn knows_tool(&self, id: &ServerId, name: &str) -> Option<bool> {
        let entry = self.entry(id)?;
        let members: Vec<ServerId> = lock(&entry)
            .group
            .members()
            .iter()
            .map(|member| member.id().clone())
            .collect();
        members
            .iter()
            .find_map(|member| self.manager.knows_tool(member, name).ok().flatten())
    }

    /// Learns a group's tools while no member can tell whether it has a tool a call names:
    /// starts the members in rotation, in member order, as a call would start them (single
    /// flight with every other start), until one lists its tools; the members stay running,
    /// like members a call started. A group without members has nothing to learn. Answers the
    /// last start's error when no member could start, and `GroupUnavailable` when none is in
    /// rotation.
    pub async fn learn_tools(&self, id: &ServerId) -> Result<(), CoreError> {
        let entry = self
            .entry(id)
            .ok_or_else(|| CoreError::GroupNotFound(id.clone()))?;
        let (has_members, in_rotation): (bool, Vec<ServerId>) = {
            let entry = lock(&entry);
            let members = entry.group.members();
            (
                !members.is_empty(),
                members
                    .iter()
                    .filter(|member| member.in_rotation())
                    .map(|member| member.id().clone())
                    .collect(),
            )
        };
        if !has_members {
            return Ok(());
        }
        let mut failure = None;
        for member in in_rotation {
            match self.manager.start_for_call(&member).await {
                Ok(()) => return Ok(()),
                Err(error) => failure = Some(error),
            }
        }
        Err(failure.unwrap_or_else(|| CoreError::GroupUnavailable(id.clone())))
    }

    /// Routes one call through the group: the strategy picks a member, the manager runs the
    /// call there (starting a cold member); a transport failure takes the member out of
    /// rotation and the call is tried once more on another member. `NotFound` for an unknown
    /// group; `CoreError` kinds of the last attempt otherwise; an `unavailable` group (no
    /// member in rotation) answers an error that says so.
    pub async fn call_tool(
        &self,
        id: &ServerId,
        call: ToolCall,
        ctx: CallContext,
    ) -> Result<ToolCallOutcome, CoreError> {
        let entry = self
            .entry(id)
            .ok_or_else(|| CoreError::GroupNotFound(id.clone()))?;
        if let Some(member) = pinned_member(&entry, &ctx)? {
            return self.call_pinned(&entry, member, call, ctx).await;
        }
        let cancellation = ctx.cancellation.clone();
        // The group's choice of members and its retry, around the members' upstream requests.
        let mut span = Span::start_local("group.call", SpanKind::Internal, ctx.trace.as_ref());
        let mut ctx = ctx;
        if let Some(context) = span.context() {
            ctx.trace = Some(context.clone());
        }
        if span.is_recording() {
            span.set_attribute(keys::GROUP_ID, id.to_string());
            span.set_attribute(keys::GROUP_STRATEGY, lock(&entry).group.strategy().as_str());
        }
        let mut plan = CallPlan::new();
        // The last possible attempt takes the call itself; earlier ones take copies.
        let mut call = Some(call);
        let mut ctx = Some(ctx);
        let mut failure = None;
        while let Some(member) = self.start_attempt(&entry, &mut plan) {
            let attempt = Attempt {
                entry: &entry,
                member: Some(member),
            };
            let last = plan.tried().len() >= MAX_ATTEMPTS_PER_CALL;
            let (this_call, this_ctx) = if last {
                (call.take(), ctx.take())
            } else {
                (call.clone(), ctx.clone())
            };
            let (Some(this_call), Some(this_ctx)) = (this_call, this_ctx) else {
                break;
            };
            let attempt_number = plan.tried().len();
            if span.is_recording() {
                span.add_event("group.member_selected", || {
                    vec![
                        (keys::GROUP_MEMBER, attempt.member().to_string().into()),
                        (keys::GROUP_ATTEMPT, (attempt_number as u64).into()),
                    ]
                });
                span.set_attribute(keys::GROUP_MEMBER, attempt.member().to_string());
                span.set_attribute(keys::GROUP_ATTEMPT, attempt_number as u64);
            }
            let result = self
                .manager
                .call_tool(attempt.member(), this_call, this_ctx)
                .await;
            let outcome = classify(&result);
            let member = attempt.member().clone();
            attempt.finish(self, outcome);
            if plan.should_retry(outcome) && !cancellation.is_cancelled() {
                if span.is_recording()
                    && let Err(error) = &result
                {
                    span.add_event("group.retry", || {
                        vec![
                            (keys::GROUP_MEMBER, member.to_string().into()),
                            (keys::ERROR_TYPE, error.to_string().into()),
                        ]
                    });
                }
                failure = result.err();
                continue;
            }
            if let Err(error) = &result {
                span.set_error(error.kind().as_str(), &error.to_string());
            }
            return result.map(|answer| scope_task(pin_to_member(answer, &member), &member));
        }
        let error = failure.unwrap_or_else(|| CoreError::GroupUnavailable(id.clone()));
        span.set_error(error.kind().as_str(), &error.to_string());
        Err(error)
    }

    /// The retry of a call that a member answered with an input-required result goes to that
    /// member, whose `requestState` only it can read, whatever the strategy would pick; it is
    /// not tried on another member.
    async fn call_pinned(
        &self,
        entry: &Mutex<GroupEntry>,
        (member, state): (ServerId, Option<String>),
        call: ToolCall,
        mut ctx: CallContext,
    ) -> Result<ToolCallOutcome, CoreError> {
        if let Some(round) = ctx.input.as_mut() {
            round.state = state;
        }
        {
            let mut entry = lock(entry);
            // The member was read from this group's own state, so it is one of its members.
            let _ = entry.group.call_started(&member);
        }
        let attempt = Attempt {
            entry,
            member: Some(member.clone()),
        };
        let result = self.manager.call_tool(&member, call, ctx).await;
        attempt.finish(self, classify(&result));
        result.map(|answer| scope_task(pin_to_member(answer, &member), &member))
    }

    /// A task request (`tasks/get`, `tasks/update`, `tasks/cancel`) about a task that a member
    /// of group `id` created: `task_id` names the member in front of the member's own id (see
    /// [`mcpgw_core::task`]). The request goes to that member, whatever the strategy.
    pub async fn task_request(
        &self,
        id: &ServerId,
        method: &str,
        task_id: &str,
        mut params: Value,
    ) -> Result<Value, CoreError> {
        let entry = self
            .entry(id)
            .ok_or_else(|| CoreError::GroupNotFound(id.clone()))?;
        let unknown = || {
            CoreError::Invalid(format!(
                "group `{id}` has no task `{task_id}`; its member may have left the group"
            ))
        };
        let (member, rest) = split_scoped_id(task_id).ok_or_else(unknown)?;
        if !lock(&entry)
            .group
            .members()
            .iter()
            .any(|known| known.id() == &member)
        {
            return Err(unknown());
        }
        params["taskId"] = Value::String(rest.to_owned());
        let session = self.manager.session(&member).await?;
        session
            .task_request(method, params)
            .await
            .map_err(|source| CoreError::Session {
                server: member,
                source,
            })
    }

    /// Picks the member for the next attempt and counts the call as in flight on it.
    fn start_attempt(&self, entry: &Mutex<GroupEntry>, plan: &mut CallPlan) -> Option<ServerId> {
        let mut entry = lock(entry);
        let group = &mut entry.group;
        let member = if group.strategy() == GroupStrategy::Random {
            let mut random = self.random.lock().unwrap_or_else(|p| p.into_inner());
            plan.next_member(group, &mut **random)
        } else {
            plan.next_member(group, &mut NoDraws)
        }?;
        // The member was just selected from this group, so it is one of its members.
        let _ = group.call_started(&member);
        Some(member)
    }

    /// The observer to register on the event bus: member servers' state changes and failed
    /// health checks move members in and out of rotation, and a removed server leaves every
    /// group.
    pub fn observer(self: &Arc<Self>) -> Arc<dyn EventObserver> {
        Arc::new(GroupObserver {
            service: Arc::downgrade(self),
        })
    }
}

/// What one update does to a group, applied once to a draft (to validate and store it) and
/// once to the live group.
struct AppliedUpdate {
    events: Vec<GroupEvent>,
    added: Vec<ServerId>,
    removed: Vec<ServerId>,
}

fn apply_update(
    group: &mut Group,
    update: &GroupUpdate,
    healthy: &HashMap<ServerId, bool>,
) -> Result<AppliedUpdate, GroupError> {
    let mut applied = AppliedUpdate {
        events: Vec::new(),
        added: Vec::new(),
        removed: Vec::new(),
    };
    if let Some(members) = &update.members {
        let mut named = HashSet::new();
        for member in members {
            if member.id == *group.id() {
                return Err(GroupError::GroupAsItsOwnMember(member.id.clone()));
            }
            if !named.insert(&member.id) {
                return Err(GroupError::MemberAlreadyExists {
                    group: group.id().clone(),
                    member: member.id.clone(),
                });
            }
        }
        let leaving: Vec<ServerId> = group
            .members()
            .iter()
            .map(|member| member.id().clone())
            .filter(|id| !named.contains(id))
            .collect();
        for member in leaving {
            applied.events.extend(group.remove_member(&member)?);
            applied.removed.push(member);
        }
        for member in members {
            if group.member(&member.id).is_some() {
                group.update_member(&member.id, member.weight, member.priority)?;
            } else {
                applied.events.extend(group.add_member(member.clone())?);
                if healthy.get(&member.id) == Some(&false) {
                    applied
                        .events
                        .extend(group.member_health(&member.id, false)?);
                }
                applied.added.push(member.id.clone());
            }
        }
    }
    if let Some(strategy) = update.strategy
        && strategy != group.strategy()
    {
        group.set_strategy(strategy);
    }
    if let Some(min_healthy) = update.min_healthy {
        applied.events.extend(group.set_min_healthy(min_healthy)?);
    }
    Ok(applied)
}

/// A call in flight on one member. Dropping it unfinished (the caller went away mid-call)
/// still counts the call as finished, so `least_connections` never counts ghosts.
struct Attempt<'a> {
    entry: &'a Mutex<GroupEntry>,
    member: Option<ServerId>,
}

impl Attempt<'_> {
    fn member(&self) -> &ServerId {
        self.member
            .as_ref()
            .expect("an attempt holds its member until it finishes")
    }

    fn finish(mut self, service: &GroupService, outcome: CallOutcome) {
        let Some(member) = self.member.take() else {
            return;
        };
        let mut entry = lock(self.entry);
        // The member may have been removed meanwhile; then there is nothing to count.
        if let Ok(events) = entry.group.call_finished(&member, outcome)
            && !events.is_empty()
        {
            service.publish_rotation(events, Reasons::new(None, reason::SERVER_READY));
        }
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        if let Some(member) = self.member.take() {
            let _ = lock(self.entry)
                .group
                .call_finished(&member, CallOutcome::ToolError);
        }
    }
}

struct GroupObserver {
    service: Weak<GroupService>,
}

impl EventObserver for GroupObserver {
    fn observe(&self, published: &PublishedEvent) {
        let (server, change) = match &published.event {
            DomainEvent::McpServerStateChanged {
                mcp_server_id, to, ..
            } => match to {
                ServerState::Degraded => (mcp_server_id, Some((false, reason::SERVER_DEGRADED))),
                ServerState::Dead => (mcp_server_id, Some((false, reason::SERVER_DEAD))),
                ServerState::Ready => (mcp_server_id, Some((true, reason::SERVER_READY))),
                // Cold members stay as they are (a call starts them); a cold member out of
                // rotation returns through the recovery pass once its backoff passed.
                _ => return,
            },
            DomainEvent::HealthCheckFailed { mcp_server_id, .. } => {
                (mcp_server_id, Some((false, reason::HEALTH_CHECK_FAILED)))
            }
            DomainEvent::McpServerRemoved { mcp_server_id } => (mcp_server_id, None),
            _ => return,
        };
        let Some(service) = self.service.upgrade() else {
            return;
        };
        match change {
            Some((healthy, why)) => service.set_member_health(server, healthy, why),
            None => service.drop_member_everywhere(server),
        }
    }
}

/// A member's input-required result, its `requestState` prefixed with the member's id (see
/// [`scoped_id`]) so that the client's retry reaches the same member (see
/// [`GroupService::call_pinned`]); a result without a state gets one that names the member
/// alone. The client sees the state only inside the gateway's signed envelope, so it cannot
/// point the retry at another member. Other answers pass unchanged.
fn pin_to_member(mut answer: ToolCallOutcome, member: &ServerId) -> ToolCallOutcome {
    if !answer.is_input_required() {
        return answer;
    }
    if let Some(result) = answer.result.as_object_mut() {
        let state = result
            .get("requestState")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let pinned = scoped_id(member, state);
        result.insert("requestState".to_owned(), Value::String(pinned));
    }
    answer
}

/// The member a retry is pinned to and that member's own state, when the call is the retry
/// of an input-required result of this group; a state that names no member of the group is
/// refused.
fn pinned_member(
    entry: &Mutex<GroupEntry>,
    ctx: &CallContext,
) -> Result<Option<(ServerId, Option<String>)>, CoreError> {
    let Some(state) = ctx.input.as_ref().and_then(|round| round.state.as_deref()) else {
        return Ok(None);
    };
    let entry = lock(entry);
    let pinned = split_scoped_id(state)
        .filter(|(member, _)| entry.group.members().iter().any(|m| m.id() == member));
    match pinned {
        Some((member, inner)) => Ok(Some((
            member,
            (!inner.is_empty()).then(|| inner.to_owned()),
        ))),
        None => Err(CoreError::Invalid(format!(
            "the member of group `{}` that asked for this input is no longer one of its members; \
             call the tool again without inputResponses and requestState",
            entry.group.id()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use mcpgw_core::{LaunchError, SessionError};

    use super::*;

    fn server(raw: &str) -> ServerId {
        ServerId::parse(raw).unwrap()
    }

    fn session_error(kind: SessionErrorKind) -> Result<ToolCallOutcome, CoreError> {
        Err(CoreError::Session {
            server: server("a"),
            source: SessionError::new(kind, "it went wrong"),
        })
    }

    #[test]
    fn only_failures_to_reach_a_member_are_transport_failures() {
        let answered = Ok(ToolCallOutcome {
            result: serde_json::json!({"isError": true}),
            is_error: true,
        });
        assert_eq!(
            classify(&answered),
            CallOutcome::Success,
            "an isError result"
        );
        for kind in [SessionErrorKind::Transport, SessionErrorKind::Closed] {
            assert_eq!(
                classify(&session_error(kind)),
                CallOutcome::TransportFailure,
                "{kind:?}"
            );
        }
        for kind in [
            SessionErrorKind::Timeout,
            SessionErrorKind::Cancelled,
            SessionErrorKind::Protocol { code: -32602 },
        ] {
            assert_eq!(
                classify(&session_error(kind)),
                CallOutcome::ToolError,
                "{kind:?}"
            );
        }
        let could_not_start = [
            CoreError::StartFailed {
                server: server("a"),
                source: LaunchError::Handshake("no".into()),
            },
            CoreError::BackingOff {
                server: server("a"),
                state: ServerState::Dead,
                retry_in_ms: 1000,
            },
            CoreError::ServerNotFound(server("a")),
        ];
        for error in could_not_start {
            let message = error.to_string();
            assert_eq!(
                classify(&Err(error)),
                CallOutcome::TransportFailure,
                "{message}"
            );
        }
        assert_eq!(
            classify(&Err(CoreError::Invalid("bad arguments".into()))),
            CallOutcome::ToolError
        );
    }

    #[test]
    fn a_seeded_generator_repeats_itself_and_spreads_its_numbers() {
        let first: Vec<u64> = {
            let mut random = SeededRandom::with_seed(42);
            (0..8).map(|_| random.next_u64()).collect()
        };
        let again: Vec<u64> = {
            let mut random = SeededRandom::with_seed(42);
            (0..8).map(|_| random.next_u64()).collect()
        };
        assert_eq!(first, again);
        let other: Vec<u64> = {
            let mut random = SeededRandom::with_seed(43);
            (0..8).map(|_| random.next_u64()).collect()
        };
        assert_ne!(first, other);
        // Seed 0 must not leave xorshift stuck at 0.
        let mut zero = SeededRandom::with_seed(0);
        let draws: Vec<u64> = (0..4).map(|_| zero.next_u64()).collect();
        assert!(draws.iter().all(|draw| *draw != 0), "{draws:?}");
        // Uniform enough for weighted picks: 40_000 draws below 4, each bucket near 10_000.
        let mut random = SeededRandom::with_seed(7);
        let mut buckets = [0_u32; 4];
        for _ in 0..40_000 {
            buckets[random.below(4) as usize] += 1;
        }
        assert!(
            buckets.iter().all(|count| (9_000..11_000).contains(count)),
            "{buckets:?}"
        );
    }

    #[test]
    fn a_generator_from_entropy_does_not_repeat_one_number() {
        let mut random = SeededRandom::from_entropy();
        let draws: HashSet<u64> = (0..16).map(|_| random.next_u64()).collect();
        assert_eq!(draws.len(), 16);
    }

    #[test]
    fn service_errors_map_to_their_kinds() {
        let pool = server("pool");
        assert_eq!(
            GroupServiceError::NotFound(pool.clone()).kind(),
            ErrorKind::NotFound
        );
        assert_eq!(
            GroupServiceError::MemberServerNotFound(pool.clone()).kind(),
            ErrorKind::NotFound
        );
        assert_eq!(
            GroupServiceError::AlreadyExists(pool.clone()).kind(),
            ErrorKind::Conflict
        );
        assert_eq!(
            GroupServiceError::ConfigManaged(pool.clone()).kind(),
            ErrorKind::Conflict
        );
        assert_eq!(
            GroupServiceError::Domain(GroupError::MinHealthyZero(pool)).kind(),
            ErrorKind::Invalid
        );
        assert_eq!(
            GroupServiceError::Storage("disk".into()).kind(),
            ErrorKind::Internal
        );
    }
}
