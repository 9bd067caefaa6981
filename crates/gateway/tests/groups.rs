//! Groups at run time, on fake ports: the use cases and their errors, the routing of calls by
//! each strategy (counted on the members), the retry after a transport failure, the rotation
//! that follows the members' health, persistence, and the catalogue's view of groups.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_config::ToolNames;
use mcpgw_core::{
    CallContext, Caller, CoreError, DomainEvent, ErrorKind, EventObserver, EventSink,
    ExitStatusInfo, FrontendErrorKind, LaunchError, LaunchedServer, LogBuffer, ManagerSettings,
    McpFrontend, McpSession, PublishedEvent, RepositoryError, ServerId, ServerLauncher,
    ServerManager, ServerOrigin, ServerSpec, ServerState, SessionError, StoredToolList, Tool,
    ToolCall, ToolCallOutcome,
};
use mcpgw_gateway::{
    EventBus, GroupService, GroupServiceError, GroupUpdate, GroupView, ToolCatalog,
    group_spec_from_config,
};
use mcpgw_groups::{
    GroupError, GroupRepository, GroupSpec, GroupState, GroupStrategy, MemberSpec, RandomSource,
};
use mcpgw_testkit::clock::FakeClock;
use mcpgw_testkit::fakes::{
    FakeBehaviour, FakeLauncher, FakeSession, RecordingEventSink, TokioSpawner,
};
use serde_json::json;
use tokio::sync::Semaphore;

// ----- fakes --------------------------------------------------------------------------------

/// What one upstream does beyond the testkit's fake session: fail calls as a broken connection
/// would, hold calls until the test lets them go, and count the calls it saw.
#[derive(Default)]
struct Upstream {
    fail_with_transport_error: AtomicBool,
    /// When set, each call waits for one permit.
    gate: Mutex<Option<Arc<Semaphore>>>,
    attempts: AtomicUsize,
    answered: AtomicUsize,
}

/// The testkit's [`FakeLauncher`], with each session wrapped so that the test can script the
/// upstream per server.
#[derive(Default)]
struct ScriptedLauncher {
    fakes: FakeLauncher,
    upstreams: Mutex<HashMap<String, Arc<Upstream>>>,
}

impl ScriptedLauncher {
    fn upstream(&self, id: &str) -> Arc<Upstream> {
        Arc::clone(
            self.upstreams
                .lock()
                .unwrap()
                .entry(id.to_owned())
                .or_default(),
        )
    }

    /// The most recent fake session of `id` (to crash it or fail its pings).
    fn session(&self, id: &str) -> Arc<FakeSession> {
        self.fakes
            .session(id)
            .unwrap_or_else(|| panic!("`{id}` never started"))
    }
}

#[async_trait]
impl ServerLauncher for ScriptedLauncher {
    async fn launch(
        &self,
        spec: &ServerSpec,
        logs: Arc<LogBuffer>,
    ) -> Result<LaunchedServer, LaunchError> {
        let launched = self.fakes.launch(spec, logs).await?;
        Ok(LaunchedServer {
            session: Arc::new(ScriptedSession {
                inner: launched.session,
                upstream: self.upstream(spec.id.as_str()),
            }),
        })
    }
}

struct ScriptedSession {
    inner: Arc<dyn McpSession>,
    upstream: Arc<Upstream>,
}

#[async_trait]
impl McpSession for ScriptedSession {
    async fn list_tools(&self) -> Result<Vec<Tool>, SessionError> {
        self.inner.list_tools().await
    }

    async fn call_tool(
        &self,
        call: ToolCall,
        ctx: CallContext,
    ) -> Result<ToolCallOutcome, SessionError> {
        self.upstream.attempts.fetch_add(1, Ordering::SeqCst);
        if self
            .upstream
            .fail_with_transport_error
            .load(Ordering::SeqCst)
        {
            return Err(SessionError::transport("connection reset by peer"));
        }
        let gate = self.upstream.gate.lock().unwrap().clone();
        if let Some(gate) = gate {
            gate.acquire().await.expect("the gate stays open").forget();
        }
        let result = self.inner.call_tool(call, ctx).await;
        self.upstream.answered.fetch_add(1, Ordering::SeqCst);
        result
    }

    async fn ping(&self) -> Result<(), SessionError> {
        self.inner.ping().await
    }

    async fn close(&self) {
        self.inner.close().await;
    }

    async fn closed(&self) -> ExitStatusInfo {
        self.inner.closed().await
    }
}

/// Copies every event the bus delivers into the testkit's recording sink.
struct Recorder(Arc<RecordingEventSink>);

impl EventObserver for Recorder {
    fn observe(&self, published: &PublishedEvent) {
        self.0
            .publish(published.occurred_at, published.event.clone());
    }
}

/// A [`GroupRepository`] in memory, whose next save can be made to fail.
#[derive(Default)]
struct InMemoryGroups {
    groups: Mutex<BTreeMap<ServerId, GroupSpec>>,
    fail_next_save: AtomicBool,
}

impl InMemoryGroups {
    fn stored(&self) -> Vec<GroupSpec> {
        self.groups.lock().unwrap().values().cloned().collect()
    }

    fn stored_spec(&self, raw: &str) -> Option<GroupSpec> {
        self.groups.lock().unwrap().get(&id(raw)).cloned()
    }
}

#[async_trait]
impl GroupRepository for InMemoryGroups {
    async fn save(&self, spec: &GroupSpec) -> Result<(), RepositoryError> {
        if self.fail_next_save.swap(false, Ordering::SeqCst) {
            return Err(RepositoryError("the disk is full".into()));
        }
        self.groups
            .lock()
            .unwrap()
            .insert(spec.id.clone(), spec.clone());
        Ok(())
    }

    async fn delete(&self, id: &ServerId) -> Result<(), RepositoryError> {
        self.groups.lock().unwrap().remove(id);
        Ok(())
    }

    async fn load_all(&self) -> Result<Vec<GroupSpec>, RepositoryError> {
        Ok(self.stored())
    }
}

/// Hands out scripted numbers and fails loudly when the test did not plan a draw.
struct ScriptedRandom(VecDeque<u64>);

impl RandomSource for ScriptedRandom {
    fn next_u64(&mut self) -> u64 {
        self.0
            .pop_front()
            .expect("the group drew more random numbers than the test scripted")
    }
}

// ----- harness ------------------------------------------------------------------------------

struct Harness {
    clock: Arc<FakeClock>,
    bus: Arc<EventBus>,
    manager: ServerManager,
    launcher: Arc<ScriptedLauncher>,
    groups: Arc<GroupService>,
    repository: Arc<InMemoryGroups>,
    events: Arc<RecordingEventSink>,
}

fn id(raw: &str) -> ServerId {
    ServerId::parse(raw).unwrap()
}

fn harness() -> Harness {
    harness_with(|service| service)
}

fn harness_with(configure: impl FnOnce(GroupService) -> GroupService) -> Harness {
    let clock = Arc::new(FakeClock::new());
    let bus = Arc::new(EventBus::new(1024));
    let events = Arc::new(RecordingEventSink::default());
    bus.add_observer(Arc::new(Recorder(events.clone())));
    let launcher = Arc::new(ScriptedLauncher::default());
    let manager = ServerManager::new(
        launcher.clone(),
        clock.clone(),
        bus.clone() as Arc<dyn EventSink>,
        Arc::new(TokioSpawner),
        None,
        ManagerSettings::default(),
    );
    let repository = Arc::new(InMemoryGroups::default());
    let groups = Arc::new(configure(
        GroupService::new(manager.clone(), bus.clone() as Arc<dyn EventSink>)
            .with_repository(repository.clone()),
    ));
    bus.add_observer(groups.observer());
    Harness {
        clock,
        bus,
        manager,
        launcher,
        groups,
        repository,
        events,
    }
}

impl Harness {
    async fn servers(&self, raws: &[&str]) {
        for raw in raws {
            self.manager
                .register(ServerSpec {
                    predefined_tools: vec![Tool::new("echo")],
                    ..ServerSpec::subprocess(id(raw), vec!["fake".into()])
                })
                .await
                .unwrap();
        }
    }

    async fn group(&self, raw: &str, strategy: GroupStrategy, members: &[MemberSpec]) -> GroupView {
        self.groups
            .create(spec(raw, strategy, 1, members), ServerOrigin::Api)
            .await
            .unwrap()
    }

    async fn call(&self, group: &str) -> Result<ToolCallOutcome, CoreError> {
        self.groups
            .call_tool(&id(group), echo("hi"), CallContext::default())
            .await
    }

    /// Calls the group `count` times and names the member that answered each call.
    async fn answered_by(&self, group: &str, count: usize, members: &[&str]) -> Vec<String> {
        let mut order = Vec::new();
        for _ in 0..count {
            let before: Vec<usize> = members.iter().map(|m| self.answered(m)).collect();
            self.call(group).await.expect("the call succeeds");
            let after: Vec<usize> = members.iter().map(|m| self.answered(m)).collect();
            let changed: Vec<&str> = members
                .iter()
                .zip(before.iter().zip(&after))
                .filter(|(_, (before, after))| before != after)
                .map(|(member, _)| *member)
                .collect();
            assert_eq!(changed.len(), 1, "exactly one member answers a call");
            order.push(changed[0].to_owned());
        }
        order
    }

    fn answered(&self, raw: &str) -> usize {
        self.launcher.upstream(raw).answered.load(Ordering::SeqCst)
    }

    fn attempts(&self, raw: &str) -> usize {
        self.launcher.upstream(raw).attempts.load(Ordering::SeqCst)
    }

    fn view(&self, group: &str) -> GroupView {
        self.groups.get(&id(group)).unwrap()
    }

    fn in_rotation(&self, group: &str) -> Vec<(String, bool)> {
        self.view(group)
            .members
            .into_iter()
            .map(|member| (member.id.to_string(), member.in_rotation))
            .collect()
    }

    fn group_events(&self) -> Vec<DomainEvent> {
        self.events
            .events()
            .into_iter()
            .filter(|event| event.event_type().starts_with("Group"))
            .collect()
    }

    /// `(member, in_rotation, reason)` of every rotation change published so far.
    fn rotation_changes(&self) -> Vec<(String, bool, &'static str)> {
        self.events
            .events()
            .into_iter()
            .filter_map(|event| match event {
                DomainEvent::GroupMemberHealthChanged {
                    mcp_server_id,
                    in_rotation,
                    reason,
                    ..
                } => Some((mcp_server_id.to_string(), in_rotation, reason)),
                _ => None,
            })
            .collect()
    }

    fn state_changes(&self) -> Vec<(&'static str, &'static str)> {
        self.events
            .events()
            .into_iter()
            .filter_map(|event| match event {
                DomainEvent::GroupStateChanged { from, to, .. } => Some((from, to)),
                _ => None,
            })
            .collect()
    }

    fn state_of(&self, raw: &str) -> ServerState {
        self.manager.snapshot(&id(raw)).unwrap().state
    }
}

fn spec(raw: &str, strategy: GroupStrategy, min_healthy: u32, members: &[MemberSpec]) -> GroupSpec {
    GroupSpec {
        id: id(raw),
        description: None,
        strategy,
        min_healthy,
        members: members.to_vec(),
    }
}

fn member(raw: &str) -> MemberSpec {
    MemberSpec::new(id(raw))
}

fn echo(text: &str) -> ToolCall {
    ToolCall {
        name: "echo".into(),
        arguments: json!({"text": text}).as_object().cloned(),
    }
}

/// Lets spawned tasks run until `condition` holds; fails the test if it never does.
async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    for _ in 0..10_000 {
        if condition() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("gave up waiting until {what}");
}

// ----- definitions --------------------------------------------------------------------------

#[tokio::test]
async fn a_created_group_is_listed_with_its_members_in_order_and_announced() {
    let h = harness();
    h.servers(&["a", "b", "c"]).await;
    let view = h
        .groups
        .create(
            GroupSpec {
                description: Some("three copies".into()),
                ..spec(
                    "pool",
                    GroupStrategy::WeightedRoundRobin,
                    2,
                    &[member("b").with_weight(3), member("a").with_priority(4)],
                )
            },
            ServerOrigin::Api,
        )
        .await
        .unwrap();
    assert_eq!(view.group_id, id("pool"));
    assert_eq!(view.description.as_deref(), Some("three copies"));
    assert_eq!(view.strategy, GroupStrategy::WeightedRoundRobin);
    assert_eq!(view.min_healthy, 2);
    assert_eq!(view.state, GroupState::Healthy);
    assert_eq!(view.origin, "api");
    let members: Vec<(String, u32, u32, Option<ServerState>, bool, u32)> = view
        .members
        .iter()
        .map(|m| {
            (
                m.id.to_string(),
                m.weight,
                m.priority,
                m.state,
                m.in_rotation,
                m.in_flight,
            )
        })
        .collect();
    assert_eq!(
        members,
        [
            ("b".into(), 3, 0, Some(ServerState::Cold), true, 0),
            ("a".into(), 1, 4, Some(ServerState::Cold), true, 0),
        ]
    );
    h.group("other", GroupStrategy::RoundRobin, &[member("c")])
        .await;
    let listed: Vec<String> = h
        .groups
        .list()
        .into_iter()
        .map(|view| view.group_id.to_string())
        .collect();
    assert_eq!(listed, ["other", "pool"]);
    assert_eq!(h.groups.get(&id("pool")).unwrap(), view);
    assert!(h.groups.contains(&id("pool")) && !h.groups.contains(&id("a")));
    assert_eq!(h.groups.groups_of(&id("a")), [id("pool")]);
    assert_eq!(h.groups.groups_of(&id("c")), [id("other")]);
    assert!(h.groups.groups_of(&id("nobody")).is_empty());
    assert_eq!(
        h.group_events()[0],
        DomainEvent::GroupCreated {
            group_id: id("pool"),
            strategy: "weighted_round_robin",
            origin: "api",
        }
    );
    // Creating a group starts nobody.
    assert_eq!(h.launcher.fakes.launches(), 0);
}

#[tokio::test]
async fn create_refuses_bad_groups_and_changes_nothing() {
    let h = harness();
    h.servers(&["a", "b"]).await;
    h.group("pool", GroupStrategy::RoundRobin, &[member("a")])
        .await;
    h.events.clear();
    let cases: Vec<(&str, GroupSpec, ErrorKind)> = vec![
        (
            "the id of a server",
            spec("a", GroupStrategy::RoundRobin, 1, &[member("b")]),
            ErrorKind::Conflict,
        ),
        (
            "the id of a group",
            spec("pool", GroupStrategy::RoundRobin, 1, &[member("b")]),
            ErrorKind::Conflict,
        ),
        (
            "a member that is no server",
            spec(
                "new",
                GroupStrategy::RoundRobin,
                1,
                &[member("a"), member("ghost")],
            ),
            ErrorKind::NotFound,
        ),
        (
            "a group as a member",
            spec("new", GroupStrategy::RoundRobin, 1, &[member("pool")]),
            ErrorKind::NotFound,
        ),
        (
            "a member listed twice",
            spec(
                "new",
                GroupStrategy::RoundRobin,
                1,
                &[member("a"), member("a")],
            ),
            ErrorKind::Conflict,
        ),
        (
            "itself as a member",
            spec("new", GroupStrategy::RoundRobin, 1, &[member("new")]),
            ErrorKind::Invalid,
        ),
        (
            "a weight of 0",
            spec(
                "new",
                GroupStrategy::RoundRobin,
                1,
                &[member("a").with_weight(0)],
            ),
            ErrorKind::Invalid,
        ),
        (
            "min_healthy 0",
            spec("new", GroupStrategy::RoundRobin, 0, &[member("a")]),
            ErrorKind::Invalid,
        ),
        (
            "min_healthy above its members",
            spec(
                "new",
                GroupStrategy::RoundRobin,
                3,
                &[member("a"), member("b")],
            ),
            ErrorKind::Invalid,
        ),
    ];
    for (what, bad, kind) in cases {
        let error = h
            .groups
            .create(bad.clone(), ServerOrigin::Api)
            .await
            .expect_err(what);
        assert_eq!(error.kind(), kind, "{what}: {error}");
        assert!(!error.to_string().is_empty());
        if bad.id != id("pool") {
            assert!(!h.groups.contains(&bad.id), "{what} created a group");
        }
    }
    assert!(
        matches!(
            h.groups
                .create(spec("new", GroupStrategy::RoundRobin, 1, &[member("ghost")]), ServerOrigin::Api)
                .await,
            Err(GroupServiceError::MemberServerNotFound(ref missing)) if *missing == id("ghost")
        ),
        "the error names the missing member"
    );
    assert_eq!(h.groups.ids(), [id("pool")]);
    assert!(h.group_events().is_empty(), "{:?}", h.group_events());
    assert_eq!(h.repository.stored().len(), 1);
}

#[tokio::test]
async fn a_group_created_empty_may_ask_for_members_it_gets_later() {
    let h = harness();
    h.servers(&["a", "b"]).await;
    let view = h
        .groups
        .create(
            spec("pool", GroupStrategy::RoundRobin, 2, &[]),
            ServerOrigin::Api,
        )
        .await
        .unwrap();
    assert_eq!(view.state, GroupState::Unavailable);
    h.groups.add_member(&id("pool"), member("a")).await.unwrap();
    assert_eq!(h.view("pool").state, GroupState::Partial);
    h.groups.add_member(&id("pool"), member("b")).await.unwrap();
    assert_eq!(h.view("pool").state, GroupState::Healthy);
    assert_eq!(
        h.state_changes(),
        [("unavailable", "partial"), ("partial", "healthy")]
    );
}

#[tokio::test]
async fn update_changes_settings_and_keeps_the_rotation_of_members_that_stay() {
    let h = harness();
    h.servers(&["a", "b", "c", "d"]).await;
    h.group(
        "pool",
        GroupStrategy::RoundRobin,
        &[member("a"), member("b"), member("c")],
    )
    .await;
    // `b` leaves rotation after a transport failure.
    h.launcher
        .upstream("b")
        .fail_with_transport_error
        .store(true, Ordering::SeqCst);
    h.call("pool").await.unwrap();
    h.call("pool").await.unwrap();
    assert_eq!(
        h.in_rotation("pool"),
        [("a".into(), true), ("b".into(), false), ("c".into(), true)]
    );
    h.events.clear();

    let view = h
        .groups
        .update(
            &id("pool"),
            GroupUpdate {
                strategy: Some(GroupStrategy::Priority),
                min_healthy: Some(3),
                description: Some(Some("now with d".into())),
                members: Some(vec![
                    member("d").with_priority(1),
                    member("b").with_weight(5),
                    member("a"),
                ]),
            },
        )
        .await
        .unwrap();
    assert_eq!(view.strategy, GroupStrategy::Priority);
    assert_eq!(view.min_healthy, 3);
    assert_eq!(view.description.as_deref(), Some("now with d"));
    let members: Vec<(String, u32, u32, bool)> = view
        .members
        .iter()
        .map(|m| (m.id.to_string(), m.weight, m.priority, m.in_rotation))
        .collect();
    // Staying members keep their place and rotation (`b` is still out); `d` joins at the end.
    assert_eq!(
        members,
        [
            ("a".into(), 1, 0, true),
            ("b".into(), 5, 0, false),
            ("d".into(), 1, 1, true),
        ]
    );
    assert_eq!(
        view.state,
        GroupState::Partial,
        "2 of 3 needed members in rotation"
    );
    let types: Vec<&str> = h
        .group_events()
        .iter()
        .map(DomainEvent::event_type)
        .collect();
    assert_eq!(
        types,
        [
            "GroupMemberRemoved",
            "GroupMemberAdded",
            "GroupStateChanged",
            "GroupUpdated"
        ]
    );
    assert_eq!(
        h.repository.stored_spec("pool").unwrap().members,
        [
            member("a"),
            member("b").with_weight(5),
            member("d").with_priority(1)
        ]
    );

    // Clearing the description and nothing else.
    let view = h
        .groups
        .update(
            &id("pool"),
            GroupUpdate {
                description: Some(None),
                ..GroupUpdate::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(view.description, None);
    assert_eq!(view.members.len(), 3);
    assert_eq!(h.repository.stored_spec("pool").unwrap().description, None);
}

#[tokio::test]
async fn update_refuses_bad_changes_and_changes_nothing() {
    let h = harness();
    h.servers(&["a", "b"]).await;
    h.group("pool", GroupStrategy::RoundRobin, &[member("a")])
        .await;
    let before = h.view("pool");
    let stored_before = h.repository.stored();
    h.events.clear();
    let cases: Vec<(&str, &str, GroupUpdate, ErrorKind)> = vec![
        (
            "an unknown group",
            "nope",
            GroupUpdate::default(),
            ErrorKind::NotFound,
        ),
        (
            "an unknown member server",
            "pool",
            GroupUpdate {
                strategy: Some(GroupStrategy::Random),
                members: Some(vec![member("a"), member("ghost")]),
                ..GroupUpdate::default()
            },
            ErrorKind::NotFound,
        ),
        (
            "min_healthy above the members",
            "pool",
            GroupUpdate {
                min_healthy: Some(2),
                ..GroupUpdate::default()
            },
            ErrorKind::Invalid,
        ),
        (
            "min_healthy 0",
            "pool",
            GroupUpdate {
                min_healthy: Some(0),
                ..GroupUpdate::default()
            },
            ErrorKind::Invalid,
        ),
        (
            "a member listed twice",
            "pool",
            GroupUpdate {
                members: Some(vec![member("a"), member("b"), member("a")]),
                ..GroupUpdate::default()
            },
            ErrorKind::Conflict,
        ),
        (
            "the group as its own member",
            "pool",
            GroupUpdate {
                members: Some(vec![member("pool")]),
                ..GroupUpdate::default()
            },
            ErrorKind::Invalid,
        ),
        (
            "a weight of 0 for a member that stays",
            "pool",
            GroupUpdate {
                members: Some(vec![member("a").with_weight(0)]),
                ..GroupUpdate::default()
            },
            ErrorKind::Invalid,
        ),
    ];
    for (what, group, update, kind) in cases {
        let error = h.groups.update(&id(group), update).await.expect_err(what);
        assert_eq!(error.kind(), kind, "{what}: {error}");
    }
    assert_eq!(h.view("pool"), before);
    assert_eq!(h.repository.stored(), stored_before);
    assert!(h.group_events().is_empty(), "{:?}", h.group_events());
}

#[tokio::test]
async fn groups_of_the_configuration_file_change_only_with_the_file() {
    let h = harness();
    h.servers(&["a", "b"]).await;
    let config = mcpgw_config::parse(
        "gateway.yaml",
        "mcp_servers:\n  a: {mode: subprocess, command: [x]}\n  b: {mode: subprocess, command: [x]}\n  \
         pool: {mode: group, strategy: weighted_round_robin, min_healthy: 2, members: [{id: a, weight: 3}, {id: b}]}\n",
        &|_| None,
    )
    .unwrap();
    let definition = &config.groups()[0];
    let spec = group_spec_from_config(definition).unwrap();
    assert_eq!(spec.strategy, GroupStrategy::WeightedRoundRobin);
    assert_eq!(spec.members, [member("a").with_weight(3), member("b")]);
    let view = h.groups.create(spec, ServerOrigin::Config).await.unwrap();
    assert_eq!(view.origin, "config");
    assert!(
        h.repository.stored().is_empty(),
        "config groups are not stored"
    );

    let pool = id("pool");
    let refusals = [
        h.groups
            .update(
                &pool,
                GroupUpdate {
                    min_healthy: Some(1),
                    ..GroupUpdate::default()
                },
            )
            .await
            .unwrap_err(),
        h.groups.delete(&pool).await.unwrap_err(),
        h.groups
            .add_member(&pool, member("b").with_weight(2))
            .await
            .unwrap_err(),
        h.groups.remove_member(&pool, &id("a")).await.unwrap_err(),
    ];
    for error in refusals {
        assert_eq!(error, GroupServiceError::ConfigManaged(pool.clone()));
        assert_eq!(error.kind(), ErrorKind::Conflict);
        assert!(error.to_string().contains("configuration file"), "{error}");
    }
    // Operations on state are allowed.
    h.groups.rebalance(&pool).unwrap();
    let order = h.answered_by("pool", 4, &["a", "b"]).await;
    assert_eq!(order.iter().filter(|m| *m == "a").count(), 3, "{order:?}");
    // A reload may drop it.
    h.groups.unregister(&pool).await.unwrap();
    assert!(!h.groups.contains(&pool));
}

#[tokio::test]
async fn delete_removes_an_api_group_and_its_stored_row() {
    let h = harness();
    h.servers(&["a"]).await;
    h.group("pool", GroupStrategy::RoundRobin, &[member("a")])
        .await;
    assert_eq!(h.repository.stored().len(), 1);
    h.groups.delete(&id("pool")).await.unwrap();
    assert!(!h.groups.contains(&id("pool")));
    assert!(h.repository.stored().is_empty());
    assert_eq!(
        h.group_events().last(),
        Some(&DomainEvent::GroupDeleted {
            group_id: id("pool")
        })
    );
    assert_eq!(
        h.groups.delete(&id("pool")).await.unwrap_err(),
        GroupServiceError::NotFound(id("pool"))
    );
    let error = h.call("pool").await.unwrap_err();
    assert!(matches!(error, CoreError::GroupNotFound(_)), "{error:?}");
    assert_eq!(error.kind(), ErrorKind::NotFound);
    // The id is free again, for a server too.
    h.servers(&["pool"]).await;
}

#[tokio::test]
async fn members_are_added_and_removed_with_their_errors() {
    let h = harness();
    h.servers(&["a", "b", "c"]).await;
    h.group("pool", GroupStrategy::RoundRobin, &[member("a")])
        .await;
    h.events.clear();
    let view = h
        .groups
        .add_member(&id("pool"), member("b").with_weight(2).with_priority(3))
        .await
        .unwrap();
    let last = view.members.last().unwrap();
    assert_eq!((last.id.as_str(), last.weight, last.priority), ("b", 2, 3));
    assert_eq!(
        h.repository.stored_spec("pool").unwrap().members,
        [member("a"), member("b").with_weight(2).with_priority(3)]
    );
    let view = h.groups.remove_member(&id("pool"), &id("a")).await.unwrap();
    assert_eq!(view.members.len(), 1);
    assert_eq!(
        h.repository.stored_spec("pool").unwrap().members,
        [member("b").with_weight(2).with_priority(3)]
    );
    assert_eq!(
        h.group_events(),
        [
            DomainEvent::GroupMemberAdded {
                group_id: id("pool"),
                mcp_server_id: id("b")
            },
            DomainEvent::GroupMemberRemoved {
                group_id: id("pool"),
                mcp_server_id: id("a")
            },
        ]
    );

    let pool = id("pool");
    let add = |raw: &str| h.groups.add_member(&pool, member(raw));
    assert_eq!(
        add("ghost").await.unwrap_err(),
        GroupServiceError::MemberServerNotFound(id("ghost"))
    );
    assert_eq!(
        add("b").await.unwrap_err(),
        GroupServiceError::Domain(GroupError::MemberAlreadyExists {
            group: pool.clone(),
            member: id("b")
        })
    );
    assert_eq!(add("pool").await.unwrap_err().kind(), ErrorKind::Invalid);
    assert_eq!(
        h.groups
            .add_member(&pool, member("c").with_weight(0))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Invalid
    );
    assert_eq!(
        h.groups
            .add_member(&id("nope"), member("c"))
            .await
            .unwrap_err(),
        GroupServiceError::NotFound(id("nope"))
    );
    let not_member = h.groups.remove_member(&pool, &id("c")).await.unwrap_err();
    assert_eq!(not_member.kind(), ErrorKind::NotFound);
    assert!(not_member.to_string().contains("`c`"), "{not_member}");
    assert_eq!(
        h.groups
            .remove_member(&id("nope"), &id("c"))
            .await
            .unwrap_err(),
        GroupServiceError::NotFound(id("nope"))
    );
    assert_eq!(h.view("pool").members.len(), 1);
}

#[tokio::test]
async fn a_failed_save_answers_a_storage_error_and_changes_nothing() {
    let h = harness();
    h.servers(&["a", "b"]).await;
    h.repository.fail_next_save.store(true, Ordering::SeqCst);
    let error = h
        .groups
        .create(
            spec("pool", GroupStrategy::RoundRobin, 1, &[member("a")]),
            ServerOrigin::Api,
        )
        .await
        .unwrap_err();
    assert!(matches!(error, GroupServiceError::Storage(_)), "{error:?}");
    assert_eq!(error.kind(), ErrorKind::Internal);
    assert!(!h.groups.contains(&id("pool")));

    h.group("pool", GroupStrategy::RoundRobin, &[member("a")])
        .await;
    h.repository.fail_next_save.store(true, Ordering::SeqCst);
    let error = h
        .groups
        .add_member(&id("pool"), member("b"))
        .await
        .unwrap_err();
    assert!(matches!(error, GroupServiceError::Storage(_)), "{error:?}");
    assert_eq!(h.view("pool").members.len(), 1);
    assert_eq!(
        h.repository.stored_spec("pool").unwrap().members,
        [member("a")]
    );
}

#[tokio::test]
async fn stored_groups_are_restored_as_api_groups_leaving_out_what_no_longer_exists() {
    let h = harness();
    h.servers(&["a", "b", "taken"]).await;
    let repository = h.repository.clone();
    for stored in [
        spec(
            "pool",
            GroupStrategy::LeastConnections,
            1,
            &[member("a"), member("gone"), member("b")],
        ),
        spec("taken", GroupStrategy::RoundRobin, 1, &[member("a")]),
        spec("empty", GroupStrategy::Random, 2, &[]),
    ] {
        repository.save(&stored).await.unwrap();
    }
    assert_eq!(h.groups.restore_from_repository().await.unwrap(), 2);
    let pool = h.view("pool");
    assert_eq!(pool.origin, "api");
    assert_eq!(pool.strategy, GroupStrategy::LeastConnections);
    let members: Vec<&str> = pool.members.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(members, ["a", "b"]);
    assert_eq!(
        repository.stored_spec("pool").unwrap().members,
        [member("a"), member("b")],
        "the stored group no longer names the server that is gone"
    );
    assert!(
        !h.groups.contains(&id("taken")),
        "a server's id wins over a stored group"
    );
    assert_eq!(h.view("empty").state, GroupState::Unavailable);
}

// ----- strategies ---------------------------------------------------------------------------

#[tokio::test]
async fn round_robin_spreads_calls_evenly_in_member_order() {
    let h = harness();
    h.servers(&["a", "b", "c"]).await;
    h.group(
        "pool",
        GroupStrategy::RoundRobin,
        &[member("a"), member("b"), member("c")],
    )
    .await;
    let order = h.answered_by("pool", 9, &["a", "b", "c"]).await;
    assert_eq!(order, ["a", "b", "c", "a", "b", "c", "a", "b", "c"]);
    // Each member started lazily on its first call, once.
    assert_eq!(h.launcher.fakes.launches(), 3);
}

#[tokio::test]
async fn weighted_round_robin_gives_exactly_three_of_every_four_calls_to_weight_three() {
    let h = harness();
    h.servers(&["a", "b"]).await;
    h.group(
        "pool",
        GroupStrategy::WeightedRoundRobin,
        &[member("a").with_weight(3), member("b").with_weight(1)],
    )
    .await;
    let order = h.answered_by("pool", 40, &["a", "b"]).await;
    for window in order.chunks(4) {
        let to_a = window.iter().filter(|m| *m == "a").count();
        assert_eq!(to_a, 3, "{window:?} in {order:?}");
    }
}

#[tokio::test]
async fn priority_sends_every_call_to_the_lowest_number_while_it_is_in_rotation() {
    let h = harness();
    h.servers(&["low", "first", "second"]).await;
    h.group(
        "pool",
        GroupStrategy::Priority,
        &[
            member("low").with_priority(5),
            member("first").with_priority(1),
            member("second").with_priority(2),
        ],
    )
    .await;
    let order = h.answered_by("pool", 6, &["low", "first", "second"]).await;
    assert!(order.iter().all(|m| m == "first"), "{order:?}");

    // `first` breaks: this call is retried on the next priority, and so are the next ones.
    h.launcher
        .upstream("first")
        .fail_with_transport_error
        .store(true, Ordering::SeqCst);
    let order = h.answered_by("pool", 3, &["low", "first", "second"]).await;
    assert_eq!(order, ["second", "second", "second"]);
    assert_eq!(
        h.attempts("first"),
        7,
        "the failed member is not tried again"
    );

    // Back in rotation once its server is ready again (here: restarted by an operator).
    h.launcher
        .upstream("first")
        .fail_with_transport_error
        .store(false, Ordering::SeqCst);
    h.manager.stop(&id("first")).await.unwrap();
    h.manager.start(&id("first")).await.unwrap();
    let order = h.answered_by("pool", 2, &["low", "first", "second"]).await;
    assert_eq!(order, ["first", "first"]);
}

#[tokio::test]
async fn least_connections_picks_the_member_with_the_fewest_calls_in_flight() {
    let h = harness();
    h.servers(&["a", "b", "c"]).await;
    h.group(
        "pool",
        GroupStrategy::LeastConnections,
        &[member("a"), member("b"), member("c")],
    )
    .await;
    // Start every member first, so that held calls do not wait on a start.
    for raw in ["a", "b", "c"] {
        h.manager.start(&id(raw)).await.unwrap();
    }
    let gates: HashMap<&str, Arc<Semaphore>> = ["a", "b", "c"]
        .into_iter()
        .map(|raw| {
            let gate = Arc::new(Semaphore::new(0));
            *h.launcher.upstream(raw).gate.lock().unwrap() = Some(gate.clone());
            (raw, gate)
        })
        .collect();
    let total_attempts = |h: &Harness| ["a", "b", "c"].iter().map(|m| h.attempts(m)).sum::<usize>();
    let mut held = Vec::new();
    let hold = |h: &Harness| {
        let groups = h.groups.clone();
        tokio::spawn(async move {
            groups
                .call_tool(&id("pool"), echo("held"), CallContext::default())
                .await
        })
    };
    for expected in 1..=3 {
        held.push(hold(&h));
        wait_until("the call reached a member", || {
            total_attempts(&h) == expected
        })
        .await;
    }
    let in_flight =
        |h: &Harness| -> Vec<u32> { h.view("pool").members.iter().map(|m| m.in_flight).collect() };
    assert_eq!(in_flight(&h), [1, 1, 1], "one held call on each member");

    // Finish the call on `b`: it now has the fewest calls in flight, twice in a row.
    gates["b"].add_permits(1);
    wait_until("b answered", || h.answered("b") == 1).await;
    wait_until("b's call is counted as finished", || {
        in_flight(&h) == [1, 0, 1]
    })
    .await;
    held.push(hold(&h));
    wait_until("the call reached a member", || total_attempts(&h) == 4).await;
    assert_eq!(h.attempts("b"), 2);
    assert_eq!(in_flight(&h), [1, 1, 1]);
    gates["a"].add_permits(1);
    gates["c"].add_permits(1);
    wait_until("a and c answered", || {
        h.answered("a") == 1 && h.answered("c") == 1
    })
    .await;
    wait_until("their calls are counted as finished", || {
        in_flight(&h) == [0, 1, 0]
    })
    .await;
    held.push(hold(&h));
    wait_until("the call reached a member", || total_attempts(&h) == 5).await;
    assert_eq!(
        h.attempts("c"),
        2,
        "a tie goes round robin, from after the last pick (b)"
    );
    for gate in gates.values() {
        gate.add_permits(10);
    }
    for call in held {
        call.await.unwrap().unwrap();
    }
    assert_eq!(in_flight(&h), [0, 0, 0]);
}

#[tokio::test]
async fn random_draws_members_by_weight_from_the_random_source() {
    let h = harness_with(|service| {
        service.with_random(Box::new(ScriptedRandom(VecDeque::from([
            0, 1, 2, 3, 3, 0, 7,
        ]))))
    });
    h.servers(&["light", "heavy"]).await;
    h.group(
        "pool",
        GroupStrategy::Random,
        &[
            member("light").with_weight(1),
            member("heavy").with_weight(3),
        ],
    )
    .await;
    // Draws below 4: 0 -> light, 1..=3 -> heavy; 7 % 4 = 3 -> heavy.
    let order = h.answered_by("pool", 7, &["light", "heavy"]).await;
    assert_eq!(
        order,
        [
            "light", "heavy", "heavy", "heavy", "heavy", "light", "heavy"
        ]
    );
}

#[tokio::test]
async fn strategies_other_than_random_never_draw() {
    // The scripted source has nothing: a draw would fail the test.
    let h = harness_with(|service| service.with_random(Box::new(ScriptedRandom(VecDeque::new()))));
    h.servers(&["a", "b"]).await;
    for (index, strategy) in GroupStrategy::ALL.into_iter().enumerate() {
        if strategy == GroupStrategy::Random {
            continue;
        }
        let raw = format!("g{index}");
        h.group(&raw, strategy, &[member("a"), member("b")]).await;
        for _ in 0..3 {
            h.call(&raw).await.unwrap();
        }
    }
}

// ----- failures and retry -------------------------------------------------------------------

#[tokio::test]
async fn a_transport_failure_is_retried_once_on_another_member_which_stays_alone_in_rotation() {
    let h = harness();
    h.servers(&["a", "b", "c"]).await;
    h.groups
        .create(
            spec(
                "pool",
                GroupStrategy::RoundRobin,
                3,
                &[member("a"), member("b"), member("c")],
            ),
            ServerOrigin::Api,
        )
        .await
        .unwrap();
    h.events.clear();
    h.launcher
        .upstream("a")
        .fail_with_transport_error
        .store(true, Ordering::SeqCst);

    let outcome = h.call("pool").await.unwrap();
    assert_eq!(outcome.result["content"][0]["text"], "hi");
    assert_eq!(
        (h.attempts("a"), h.answered("b")),
        (1, 1),
        "tried on a, answered by b"
    );
    assert_eq!(
        h.rotation_changes(),
        [("a".to_owned(), false, "transport_failure")]
    );
    assert_eq!(h.state_changes(), [("healthy", "partial")]);
    assert_eq!(h.view("pool").state, GroupState::Partial);

    // Later calls never go to `a` again.
    let order = h.answered_by("pool", 4, &["a", "b", "c"]).await;
    assert_eq!(order, ["c", "b", "c", "b"]);
    assert_eq!(h.attempts("a"), 1);

    // Two members failing: one retry only, and the call fails with the transport error.
    h.launcher
        .upstream("b")
        .fail_with_transport_error
        .store(true, Ordering::SeqCst);
    h.launcher
        .upstream("c")
        .fail_with_transport_error
        .store(true, Ordering::SeqCst);
    let attempts_before = h.attempts("b") + h.attempts("c");
    let error = h.call("pool").await.unwrap_err();
    assert!(
        matches!(&error, CoreError::Session { source, .. } if source.message.contains("connection reset")),
        "{error:?}"
    );
    assert_eq!(error.kind(), ErrorKind::Unavailable);
    assert_eq!(
        h.attempts("b") + h.attempts("c") - attempts_before,
        2,
        "two attempts for the call, not three"
    );

    // Nobody left: the group is unavailable and says so.
    assert_eq!(h.view("pool").state, GroupState::Unavailable);
    let error = h.call("pool").await.unwrap_err();
    assert!(matches!(error, CoreError::GroupUnavailable(_)), "{error:?}");
    assert_eq!(error.kind(), ErrorKind::Unavailable);
    assert!(
        error.to_string().contains("no member in rotation"),
        "{error}"
    );
}

#[tokio::test]
async fn a_member_that_cannot_start_is_skipped_for_another() {
    let h = harness();
    h.servers(&["broken", "fine"]).await;
    h.launcher.fakes.set_behaviour(
        "broken",
        FakeBehaviour {
            launch_error: Some(LaunchError::Handshake("no answer".into())),
            ..FakeBehaviour::default()
        },
    );
    h.group(
        "pool",
        GroupStrategy::RoundRobin,
        &[member("broken"), member("fine")],
    )
    .await;
    let outcome = h.call("pool").await.unwrap();
    assert_eq!(outcome.result["content"][0]["text"], "hi");
    assert_eq!(h.answered("fine"), 1);
    assert_eq!(
        h.in_rotation("pool"),
        [("broken".into(), false), ("fine".into(), true)]
    );
}

#[tokio::test]
async fn answers_that_are_errors_are_not_retried_and_keep_the_member_in_rotation() {
    let h = harness();
    h.servers(&["a", "b"]).await;
    h.group(
        "pool",
        GroupStrategy::RoundRobin,
        &[member("a"), member("b")],
    )
    .await;
    let call = |name: &str| ToolCall {
        name: name.to_owned(),
        arguments: None,
    };
    // A tool-level error is an answer.
    let outcome = h
        .groups
        .call_tool(&id("pool"), call("tool_error"), CallContext::default())
        .await
        .unwrap();
    assert!(outcome.is_error);
    // A JSON-RPC error is an answer too: passed on, not retried elsewhere.
    let error = h
        .groups
        .call_tool(&id("pool"), call("protocol_error"), CallContext::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, CoreError::Session { source, .. } if source.message.contains("internal error")),
        "{error:?}"
    );
    assert_eq!(
        (h.attempts("a"), h.attempts("b")),
        (1, 1),
        "one attempt per call"
    );
    // A cancelled call is not retried either.
    let ctx = CallContext::default();
    ctx.cancellation.cancel();
    let error = h
        .groups
        .call_tool(&id("pool"), call("hang"), ctx)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Conflict, "{error:?}");
    assert_eq!(h.attempts("a") + h.attempts("b"), 3);
    assert_eq!(
        h.in_rotation("pool"),
        [("a".into(), true), ("b".into(), true)]
    );
    assert!(h.rotation_changes().is_empty());
}

#[tokio::test]
async fn a_call_abandoned_by_its_caller_is_no_longer_counted_in_flight() {
    let h = harness();
    h.servers(&["a"]).await;
    h.group("pool", GroupStrategy::LeastConnections, &[member("a")])
        .await;
    h.manager.start(&id("a")).await.unwrap();
    *h.launcher.upstream("a").gate.lock().unwrap() = Some(Arc::new(Semaphore::new(0)));
    let groups = h.groups.clone();
    let call = tokio::spawn(async move {
        groups
            .call_tool(&id("pool"), echo("abandoned"), CallContext::default())
            .await
    });
    wait_until("the call is in flight", || h.attempts("a") == 1).await;
    assert_eq!(h.view("pool").members[0].in_flight, 1);
    call.abort();
    wait_until("the abandoned call is not counted", || {
        h.view("pool").members[0].in_flight == 0
    })
    .await;
    assert!(h.view("pool").members[0].in_rotation);
}

// ----- rotation from health -----------------------------------------------------------------

#[tokio::test]
async fn a_crashed_member_leaves_rotation_and_returns_when_its_server_is_ready() {
    let h = harness();
    h.servers(&["a", "b"]).await;
    h.group(
        "pool",
        GroupStrategy::RoundRobin,
        &[member("a"), member("b")],
    )
    .await;
    h.answered_by("pool", 2, &["a", "b"]).await;
    h.events.clear();

    h.launcher.session("a").crash("killed");
    wait_until("a is dead", || h.state_of("a") == ServerState::Dead).await;
    assert_eq!(
        h.rotation_changes(),
        [("a".to_owned(), false, "server_dead")]
    );
    let order = h.answered_by("pool", 3, &["a", "b"]).await;
    assert_eq!(
        order,
        ["b", "b", "b"],
        "calls keep succeeding on the others"
    );

    h.manager.start(&id("a")).await.unwrap();
    assert_eq!(
        h.rotation_changes(),
        [
            ("a".to_owned(), false, "server_dead"),
            ("a".to_owned(), true, "server_ready")
        ]
    );
    let order = h.answered_by("pool", 2, &["a", "b"]).await;
    assert!(order.contains(&"a".to_owned()), "{order:?}");
}

#[tokio::test]
async fn a_degraded_member_leaves_rotation_after_failed_health_checks() {
    let h = harness();
    h.manager
        .register(ServerSpec {
            max_consecutive_failures: 2,
            predefined_tools: vec![Tool::new("echo")],
            ..ServerSpec::subprocess(id("a"), vec!["fake".into()])
        })
        .await
        .unwrap();
    h.servers(&["b"]).await;
    h.group(
        "pool",
        GroupStrategy::RoundRobin,
        &[member("a"), member("b")],
    )
    .await;
    h.manager.start(&id("a")).await.unwrap();
    h.events.clear();
    h.launcher.session("a").set_healthy(false);

    let fail_one_health_check = |count: usize| {
        let h = &h;
        async move {
            h.clock.advance(ServerSpec::DEFAULT_HEALTH_CHECK_INTERVAL);
            h.manager.run_maintenance().await;
            wait_until("the health check failed", || {
                h.events
                    .event_types()
                    .iter()
                    .filter(|t| **t == "HealthCheckFailed")
                    .count()
                    == count
            })
            .await;
        }
    };
    fail_one_health_check(1).await;
    // The first failed check takes the member out, though the server is still ready.
    assert_eq!(h.state_of("a"), ServerState::Ready);
    assert_eq!(
        h.rotation_changes(),
        [("a".to_owned(), false, "health_check_failed")]
    );
    fail_one_health_check(2).await;
    assert_eq!(h.state_of("a"), ServerState::Degraded);
    assert_eq!(
        h.rotation_changes().len(),
        1,
        "already out: no second change"
    );
    assert_eq!(h.answered_by("pool", 2, &["a", "b"]).await, ["b", "b"]);

    // The manager restarts a degraded server once its backoff passed; ready, it returns.
    h.clock.advance(Duration::from_secs(60));
    h.manager.run_maintenance().await;
    wait_until("a is ready again", || h.state_of("a") == ServerState::Ready).await;
    assert_eq!(
        h.rotation_changes().last(),
        Some(&("a".to_owned(), true, "server_ready"))
    );
}

#[tokio::test]
async fn recovery_restarts_a_crashed_member_and_returns_members_whose_health_came_back() {
    let h = harness();
    h.servers(&["a", "b", "c"]).await;
    h.group(
        "pool",
        GroupStrategy::RoundRobin,
        &[member("a"), member("b"), member("c")],
    )
    .await;
    for raw in ["a", "b"] {
        h.manager.start(&id(raw)).await.unwrap();
    }
    // `b` fails one health check but stays ready.
    h.launcher.session("b").set_healthy(false);
    h.clock.advance(ServerSpec::DEFAULT_HEALTH_CHECK_INTERVAL);
    h.manager.run_maintenance().await;
    wait_until("b failed a health check", || {
        h.in_rotation("pool")[1] == ("b".to_owned(), false)
    })
    .await;
    assert_eq!(h.state_of("b"), ServerState::Ready);
    // `a` crashes: nobody calls it any more, so only recovery brings it back.
    h.launcher.session("a").crash("killed");
    wait_until("a is dead", || h.state_of("a") == ServerState::Dead).await;
    assert_eq!(
        h.in_rotation("pool"),
        [("a".into(), false), ("b".into(), false), ("c".into(), true)]
    );

    // Before a's backoff passed and while b still fails, recovery changes nothing.
    h.groups.recover().await;
    assert_eq!(h.launcher.fakes.sessions("a").len(), 1);
    assert_eq!(
        h.in_rotation("pool")[..2],
        [("a".into(), false), ("b".into(), false)]
    );

    h.launcher.session("b").set_healthy(true);
    h.clock.advance(ServerSpec::DEFAULT_HEALTH_CHECK_INTERVAL);
    h.manager.run_maintenance().await;
    wait_until("b passed a health check", || {
        h.manager.snapshot(&id("b")).unwrap().consecutive_failures == 0
    })
    .await;
    h.groups.recover().await;
    assert_eq!(
        h.state_of("a"),
        ServerState::Ready,
        "recovery restarted the crashed member"
    );
    assert_eq!(
        h.in_rotation("pool"),
        [("a".into(), true), ("b".into(), true), ("c".into(), true)]
    );
    let returns: Vec<(String, bool, &str)> = h
        .rotation_changes()
        .into_iter()
        .filter(|(_, in_rotation, _)| *in_rotation)
        .collect();
    assert!(
        returns.contains(&("a".to_owned(), true, "server_ready")),
        "{returns:?}"
    );
    assert!(
        returns.contains(&("b".to_owned(), true, "recovered")),
        "{returns:?}"
    );
}

#[tokio::test]
async fn min_healthy_drives_the_group_state() {
    let h = harness();
    h.servers(&["a", "b", "c"]).await;
    h.groups
        .create(
            spec(
                "pool",
                GroupStrategy::RoundRobin,
                2,
                &[member("a"), member("b"), member("c")],
            ),
            ServerOrigin::Api,
        )
        .await
        .unwrap();
    for raw in ["a", "b", "c"] {
        h.manager.start(&id(raw)).await.unwrap();
    }
    let mut states = vec![h.view("pool").state];
    for raw in ["a", "b", "c"] {
        h.launcher.session(raw).crash("killed");
        wait_until("the member left", || {
            h.view("pool")
                .members
                .iter()
                .any(|m| m.id == id(raw) && !m.in_rotation)
        })
        .await;
        states.push(h.view("pool").state);
    }
    assert_eq!(
        states,
        [
            GroupState::Healthy,
            GroupState::Healthy,
            GroupState::Partial,
            GroupState::Unavailable
        ]
    );
    assert_eq!(
        h.state_changes(),
        [("healthy", "partial"), ("partial", "unavailable")]
    );
    // Lowering min_healthy is a definition change that moves the state too.
    h.manager.start(&id("a")).await.unwrap();
    assert_eq!(h.view("pool").state, GroupState::Partial);
    h.groups
        .update(
            &id("pool"),
            GroupUpdate {
                min_healthy: Some(1),
                ..GroupUpdate::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(h.view("pool").state, GroupState::Healthy);
}

#[tokio::test]
async fn rebalance_returns_healthy_members_and_restarts_the_strategy() {
    let h = harness();
    h.servers(&["a", "b", "c"]).await;
    h.group(
        "pool",
        GroupStrategy::RoundRobin,
        &[member("a"), member("b"), member("c")],
    )
    .await;
    for raw in ["a", "b"] {
        h.launcher
            .upstream(raw)
            .fail_with_transport_error
            .store(true, Ordering::SeqCst);
    }
    // Tried on a, retried on b: both fail, and there is no third attempt.
    h.call("pool").await.unwrap_err();
    h.call("pool").await.unwrap();
    assert_eq!(
        h.in_rotation("pool"),
        [("a".into(), false), ("b".into(), false), ("c".into(), true)]
    );
    // `b` is really gone (its server crashed); `a` only had a bad moment and is still running.
    h.launcher.session("b").crash("killed");
    wait_until("b is dead", || h.state_of("b") == ServerState::Dead).await;
    h.launcher
        .upstream("a")
        .fail_with_transport_error
        .store(false, Ordering::SeqCst);
    h.events.clear();

    let view = h.groups.rebalance(&id("pool")).unwrap();
    let rotation: Vec<bool> = view.members.iter().map(|m| m.in_rotation).collect();
    assert_eq!(rotation, [true, false, true]);
    assert_eq!(h.rotation_changes(), [("a".to_owned(), true, "rebalance")]);
    // Round robin starts over from the first member.
    assert_eq!(
        h.answered_by("pool", 3, &["a", "b", "c"]).await,
        ["a", "c", "a"]
    );
    assert_eq!(
        h.groups.rebalance(&id("nope")).unwrap_err(),
        GroupServiceError::NotFound(id("nope"))
    );
}

#[tokio::test]
async fn members_that_are_degraded_or_dead_join_out_of_rotation() {
    let h = harness();
    h.servers(&["a", "b"]).await;
    h.manager.start(&id("a")).await.unwrap();
    h.launcher.session("a").crash("killed");
    wait_until("a is dead", || h.state_of("a") == ServerState::Dead).await;
    let view = h
        .group(
            "pool",
            GroupStrategy::RoundRobin,
            &[member("a"), member("b")],
        )
        .await;
    assert_eq!(
        view.members
            .iter()
            .map(|m| m.in_rotation)
            .collect::<Vec<_>>(),
        [false, true]
    );
    assert_eq!(view.members[0].state, Some(ServerState::Dead));
    assert_eq!(
        h.rotation_changes(),
        [("a".to_owned(), false, "unhealthy_when_added")]
    );
}

#[tokio::test]
async fn a_removed_server_leaves_every_group_and_the_stored_groups() {
    let h = harness();
    h.servers(&["a", "b"]).await;
    h.group(
        "one",
        GroupStrategy::RoundRobin,
        &[member("a"), member("b")],
    )
    .await;
    h.group("two", GroupStrategy::RoundRobin, &[member("b")])
        .await;
    h.events.clear();
    h.manager.delete(&id("b")).await.unwrap();
    assert_eq!(h.groups.groups_of(&id("b")), Vec::<ServerId>::new());
    let removed: Vec<DomainEvent> = h
        .group_events()
        .into_iter()
        .filter(|event| event.event_type() == "GroupMemberRemoved")
        .collect();
    assert_eq!(
        removed,
        [
            DomainEvent::GroupMemberRemoved {
                group_id: id("one"),
                mcp_server_id: id("b")
            },
            DomainEvent::GroupMemberRemoved {
                group_id: id("two"),
                mcp_server_id: id("b")
            },
        ]
    );
    assert_eq!(
        h.state_changes(),
        [("healthy", "unavailable")],
        "`two` lost its only member"
    );
    wait_until("the stored groups follow", || {
        h.repository.stored_spec("one").unwrap().members == [member("a")]
            && h.repository.stored_spec("two").unwrap().members.is_empty()
    })
    .await;
}

// ----- the catalogue ------------------------------------------------------------------------

fn catalog_of(h: &Harness, naming: ToolNames) -> Arc<ToolCatalog> {
    let catalog = ToolCatalog::with_groups(h.manager.clone(), naming, h.groups.clone());
    h.bus.add_observer(catalog.observer());
    catalog.set_probing(false);
    tokio::spawn(catalog.clone().run_change_notifier());
    catalog
}

fn names(catalog: &ToolCatalog) -> Vec<String> {
    catalog
        .tools(&Caller::default())
        .iter()
        .map(|tool| tool.name.clone())
        .collect()
}

async fn register_with_tools(h: &Harness, raw: &str, tools: &[&str]) {
    h.manager
        .register(ServerSpec {
            predefined_tools: tools.iter().map(|name| Tool::new(*name)).collect(),
            ..ServerSpec::subprocess(id(raw), vec!["fake".into()])
        })
        .await
        .unwrap();
    h.launcher.fakes.set_behaviour(
        raw,
        FakeBehaviour {
            tools: tools.iter().map(|name| Tool::new(*name)).collect(),
            ..FakeBehaviour::default()
        },
    );
}

#[tokio::test]
async fn the_catalogue_lists_groups_instead_of_their_members_and_routes_through_them() {
    let h = harness();
    register_with_tools(&h, "a", &["add", "echo"]).await;
    register_with_tools(&h, "b", &["add", "echo"]).await;
    register_with_tools(&h, "solo", &["echo"]).await;
    let catalog = catalog_of(&h, ToolNames::prefixed());
    assert_eq!(
        names(&catalog),
        ["a__add", "a__echo", "b__add", "b__echo", "solo__echo"]
    );
    let mut changes = catalog.changes();

    h.group(
        "pool",
        GroupStrategy::RoundRobin,
        &[member("a"), member("b")],
    )
    .await;
    assert_eq!(names(&catalog), ["pool__add", "pool__echo", "solo__echo"]);
    tokio::time::timeout(Duration::from_secs(5), changes.changed())
        .await
        .expect("clients hear that the list changed")
        .unwrap();

    for _ in 0..4 {
        let outcome = catalog
            .call_tool(
                &Caller::default(),
                "pool__echo",
                json!({"text": "via the group"}).as_object().cloned(),
                CallContext::default(),
            )
            .await
            .unwrap();
        assert_eq!(outcome.result["content"][0]["text"], "via the group");
    }
    assert_eq!((h.answered("a"), h.answered("b")), (2, 2));
    // Members are reached only through their group.
    for hidden in ["a__echo", "b__add"] {
        let error = catalog
            .call_tool(&Caller::default(), hidden, None, CallContext::default())
            .await
            .unwrap_err();
        assert_eq!(error.kind, FrontendErrorKind::UnknownName, "{hidden}");
    }

    // A member removed from the group is listed on its own again.
    h.groups.remove_member(&id("pool"), &id("b")).await.unwrap();
    assert_eq!(
        names(&catalog),
        ["b__add", "b__echo", "pool__add", "pool__echo", "solo__echo"]
    );
    // A deleted group is gone, and its former members are back.
    h.groups.delete(&id("pool")).await.unwrap();
    assert_eq!(
        names(&catalog),
        ["a__add", "a__echo", "b__add", "b__echo", "solo__echo"]
    );
}

#[tokio::test]
async fn bare_naming_treats_a_group_like_a_server() {
    let h = harness();
    register_with_tools(&h, "a", &["echo", "search"]).await;
    register_with_tools(&h, "b", &["echo", "search"]).await;
    register_with_tools(&h, "solo", &["echo"]).await;
    let catalog = catalog_of(&h, ToolNames::bare());
    h.group(
        "pool",
        GroupStrategy::RoundRobin,
        &[member("a"), member("b")],
    )
    .await;
    // `search` is the group's alone; `echo` is shared with `solo`.
    assert_eq!(names(&catalog), ["pool__echo", "search", "solo__echo"]);
    let error = catalog
        .call_tool(&Caller::default(), "search", None, CallContext::default())
        .await
        .unwrap_err();
    // Routed to a member (FakeSession knows no `search`): the upstream's own error comes back.
    assert_eq!(error.kind, FrontendErrorKind::Upstream { code: -32602 });
    assert_eq!(h.attempts("a"), 1);
}

#[tokio::test]
async fn an_unavailable_group_answers_unavailable_to_mcp_clients() {
    let h = harness();
    register_with_tools(&h, "a", &["echo"]).await;
    let catalog = catalog_of(&h, ToolNames::prefixed());
    h.group("pool", GroupStrategy::RoundRobin, &[member("a")])
        .await;
    h.launcher
        .upstream("a")
        .fail_with_transport_error
        .store(true, Ordering::SeqCst);
    let first = catalog
        .call_tool(
            &Caller::default(),
            "pool__echo",
            None,
            CallContext::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(first.kind, FrontendErrorKind::Unavailable);
    let second = catalog
        .call_tool(
            &Caller::default(),
            "pool__echo",
            None,
            CallContext::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(second.kind, FrontendErrorKind::Unavailable);
    assert!(
        second.message.contains("no member in rotation"),
        "{}",
        second.message
    );
    // The group's tools stay listed while it is unavailable: it may recover.
    assert_eq!(names(&catalog), ["pool__echo"]);
}

#[tokio::test]
async fn group_tools_come_from_the_first_member_whose_tools_are_known() {
    let h = harness();
    register_with_tools(&h, "unknown", &[]).await;
    register_with_tools(&h, "known", &["lookup"]).await;
    h.group(
        "pool",
        GroupStrategy::RoundRobin,
        &[member("unknown"), member("known")],
    )
    .await;
    let tools: Vec<String> = h
        .groups
        .tools(&id("pool"))
        .unwrap()
        .into_iter()
        .map(|tool| tool.name)
        .collect();
    assert_eq!(tools, ["lookup"]);
    assert_eq!(h.groups.tools(&id("nope")), None);
}

/// Registers `raw` without declared tools: its tools are unknown until it runs, and then it
/// lists `echo`.
async fn register_unknown(h: &Harness, raw: &str) {
    h.manager
        .register(ServerSpec::subprocess(id(raw), vec!["fake".into()]))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_call_through_a_group_whose_members_tools_are_unknown_learns_them() {
    let h = harness();
    register_unknown(&h, "a").await;
    register_unknown(&h, "b").await;
    let catalog = catalog_of(&h, ToolNames::prefixed());
    h.group(
        "pool",
        GroupStrategy::RoundRobin,
        &[member("a"), member("b")],
    )
    .await;
    assert!(names(&catalog).is_empty(), "nothing known yet");
    let outcome = catalog
        .call_tool(
            &Caller::default(),
            "pool__echo",
            json!({"text": "first"}).as_object().cloned(),
            CallContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.result["content"][0]["text"], "first");
    assert_eq!(names(&catalog), ["pool__echo"]);
    // The first member in rotation was started to learn, and round robin's first pick is it.
    assert_eq!(h.launcher.fakes.launches(), 1);
    assert_eq!(h.answered("a"), 1);
    // A tool no member lists is unknown, now that they are known, without another start.
    let error = catalog
        .call_tool(
            &Caller::default(),
            "pool__nope",
            None,
            CallContext::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(error.kind, FrontendErrorKind::UnknownName, "{error}");
    assert_eq!(h.launcher.fakes.launches(), 1);
    // Members stay reachable only through their group, known or not.
    for hidden in ["a__echo", "b__echo"] {
        let error = catalog
            .call_tool(&Caller::default(), hidden, None, CallContext::default())
            .await
            .unwrap_err();
        assert_eq!(error.kind, FrontendErrorKind::UnknownName, "{hidden}");
    }
}

#[tokio::test]
async fn an_unknown_tool_of_a_group_is_answered_unknown_after_learning() {
    let h = harness();
    register_unknown(&h, "a").await;
    let catalog = catalog_of(&h, ToolNames::prefixed());
    h.group("pool", GroupStrategy::RoundRobin, &[member("a")])
        .await;
    let error = catalog
        .call_tool(
            &Caller::default(),
            "pool__nope",
            None,
            CallContext::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(error.kind, FrontendErrorKind::UnknownName, "{error}");
    assert_eq!(
        h.launcher.fakes.launches(),
        1,
        "the member was started to learn"
    );
    assert_eq!(h.attempts("a"), 0, "and no call reached it");
    assert_eq!(
        h.manager.snapshot(&id("a")).unwrap().state,
        ServerState::Ready
    );
}

#[tokio::test]
async fn a_group_tool_a_members_kept_list_lacks_is_learned_from_the_member() {
    let h = harness();
    register_unknown(&h, "a").await;
    // Kept from an earlier run under the same definition; the member lists `echo` now.
    let kept = StoredToolList {
        server_id: id("a"),
        definition_digest: ServerSpec::subprocess(id("a"), vec!["fake".into()]).tool_list_digest(),
        tools: vec![Tool::new("retired")],
        learned_at: mcpgw_core::Timestamp::from_unix_micros(1_700_000_000_000_000),
    };
    assert!(h.manager.restore_tools(&kept).unwrap());
    let catalog = catalog_of(&h, ToolNames::prefixed());
    h.group("pool", GroupStrategy::RoundRobin, &[member("a")])
        .await;
    assert_eq!(names(&catalog), ["pool__retired"]);

    let outcome = catalog
        .call_tool(
            &Caller::default(),
            "pool__echo",
            json!({"text": "new"}).as_object().cloned(),
            CallContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.result["content"][0]["text"], "new");
    assert_eq!(h.launcher.fakes.launches(), 1);
    assert_eq!(names(&catalog), ["pool__echo"]);
}

// ----- gateways sharing one repository ---------------------------------------------------------

#[tokio::test]
async fn a_resync_brings_in_groups_another_gateway_created_changed_and_deleted() {
    let a = harness();
    let shared = a.repository.clone();
    let b = harness_with(move |service| service.with_repository(shared));
    a.servers(&["one", "two"]).await;
    b.servers(&["one", "two"]).await;
    // A group of B's configuration file: no resync touches it.
    b.groups
        .create(
            spec("local", GroupStrategy::RoundRobin, 1, &[member("one")]),
            ServerOrigin::Config,
        )
        .await
        .unwrap();

    a.group("pool", GroupStrategy::RoundRobin, &[member("one")])
        .await;
    let report = b.groups.resync_from_repository().await.unwrap();
    assert_eq!(report.added, [id("pool")]);
    assert_eq!(b.groups.get(&id("pool")).unwrap().members.len(), 1);
    assert!(b.groups.resync_from_repository().await.unwrap().is_empty());
    let saved_before = a.repository.stored();

    a.groups
        .update(
            &id("pool"),
            GroupUpdate {
                members: Some(vec![member("one"), member("two")]),
                ..GroupUpdate::default()
            },
        )
        .await
        .unwrap();
    let report = b.groups.resync_from_repository().await.unwrap();
    assert_eq!(report.updated, [id("pool")]);
    let members: Vec<ServerId> = b
        .groups
        .get(&id("pool"))
        .unwrap()
        .members
        .iter()
        .map(|member| member.id.clone())
        .collect();
    assert_eq!(members, [id("one"), id("two")]);
    assert_ne!(a.repository.stored(), saved_before);

    a.groups.delete(&id("pool")).await.unwrap();
    let report = b.groups.resync_from_repository().await.unwrap();
    assert_eq!(report.removed, [id("pool")]);
    assert!(b.groups.get(&id("pool")).is_err());
    assert!(b.groups.get(&id("local")).is_ok());
    assert!(
        a.repository.stored().is_empty(),
        "a resync writes nothing back: {:?}",
        a.repository.stored()
    );
}
