//! Groups at run time: the use cases over the groups domain (create, change, delete, rebalance),
//! the routing of a call through a group's strategy with one retry on another member, and the
//! rotation that follows the members' health.
//!
//! The group aggregates (`mcpgw_groups::Group`) live here behind one lock each; the manager
//! runs the calls. Members are ordinary managed servers: a group never starts or stops them
//! itself, a call routed to a cold member starts it lazily like any other call.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use mcpgw_core::{
    CallContext, CoreError, ErrorKind, EventObserver, EventSink, ServerId, ServerManager,
    ServerOrigin, ServerState, Tool, ToolCall, ToolCallOutcome,
};
use mcpgw_groups::{
    Group, GroupError, GroupRepository, GroupSpec, GroupState, GroupStrategy, MemberSpec,
    RandomSource,
};
use serde::Serialize;

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
    #[error(
        "mcp server `{server}` is a member of group `{group}`; remove it from the group first"
    )]
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
        todo!()
    }
}

impl RandomSource for SeededRandom {
    fn next_u64(&mut self) -> u64 {
        todo!()
    }
}

struct GroupEntry {
    group: Group,
    description: Option<String>,
    origin: ServerOrigin,
}

/// Every group of the gateway. Cheap to share (`Arc`).
pub struct GroupService {
    manager: ServerManager,
    events: Arc<dyn EventSink>,
    repository: Option<Arc<dyn GroupRepository>>,
    random: Mutex<Box<dyn RandomSource + Send>>,
    groups: RwLock<BTreeMap<ServerId, Arc<Mutex<GroupEntry>>>>,
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

    /// Loads the groups of the repository (at start-up, after the servers).
    pub async fn restore_from_repository(&self) -> Result<usize, GroupServiceError> {
        todo!()
    }

    /// Creates a group. Its members must be registered servers; its id must not be a server's
    /// or another group's. Publishes `GroupCreated`; an API group is stored first.
    pub async fn create(
        &self,
        spec: GroupSpec,
        origin: ServerOrigin,
    ) -> Result<GroupView, GroupServiceError> {
        let _ = (spec, origin, &self.manager, &self.events, &self.repository);
        todo!()
    }

    pub fn get(&self, id: &ServerId) -> Result<GroupView, GroupServiceError> {
        let _ = id;
        todo!()
    }

    /// Every group, in id order.
    pub fn list(&self) -> Vec<GroupView> {
        todo!()
    }

    pub fn contains(&self, id: &ServerId) -> bool {
        let _ = id;
        todo!()
    }

    /// The groups `server` is a member of, in id order.
    pub fn groups_of(&self, server: &ServerId) -> Vec<ServerId> {
        let _ = server;
        todo!()
    }

    /// Changes strategy, `min_healthy`, description or the member list of an API group.
    /// Publishes `GroupUpdated` (and member/state events for what changed).
    pub async fn update(
        &self,
        id: &ServerId,
        update: GroupUpdate,
    ) -> Result<GroupView, GroupServiceError> {
        let _ = (id, update);
        todo!()
    }

    /// Deletes an API group. Publishes `GroupDeleted`.
    pub async fn delete(&self, id: &ServerId) -> Result<(), GroupServiceError> {
        let _ = id;
        todo!()
    }

    /// Adds a registered server as a member (in rotation unless it is degraded or dead).
    /// Publishes `GroupMemberAdded`.
    pub async fn add_member(
        &self,
        id: &ServerId,
        member: MemberSpec,
    ) -> Result<GroupView, GroupServiceError> {
        let _ = (id, member);
        todo!()
    }

    /// Publishes `GroupMemberRemoved`.
    pub async fn remove_member(
        &self,
        id: &ServerId,
        member: &ServerId,
    ) -> Result<GroupView, GroupServiceError> {
        let _ = (id, member);
        todo!()
    }

    /// Re-reads every member's health (a member is healthy unless its server is degraded or
    /// dead), puts the healthy ones back in rotation and resets the strategy's state.
    pub fn rebalance(&self, id: &ServerId) -> Result<GroupView, GroupServiceError> {
        let _ = id;
        todo!()
    }

    /// The tools a group exposes: those of its first member (in member order) whose tools are
    /// known, with the members' own names (the catalogue adds the `{group}__` prefix).
    pub fn tools(&self, id: &ServerId) -> Option<Vec<Tool>> {
        let _ = id;
        todo!()
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
        let _ = (id, call, ctx);
        todo!()
    }

    /// The observer to register on the event bus: member servers' state changes and failed
    /// health checks move members in and out of rotation.
    pub fn observer(self: &Arc<Self>) -> Arc<dyn EventObserver> {
        todo!()
    }
}
