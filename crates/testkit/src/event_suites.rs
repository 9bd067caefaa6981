//! What every [`EventSink`] and every [`EventObserver`] promise, as tests that every
//! implementation must pass.
//!
//! - [`event_sink_contract_suite!`](crate::event_sink_contract_suite) runs against a sink made
//!   by a function that takes the observers to tell of every event: every observer sees every
//!   published event once, in the order it was published, with the time it was published at
//!   and an id that increases from one event to the next; publishing from several threads at
//!   once loses nothing, repeats nothing and keeps each thread's order.
//! - [`event_observer_contract_suite!`](crate::event_observer_contract_suite) runs against an
//!   observer: it takes an event of every type, about servers and groups it never heard of,
//!   promptly (it is called inline by the publisher), from a thread of a runtime and from a
//!   thread outside any, and from several threads at once.
//!
//! An adapter crate runs them with one line each in its tests:
//!
//! ```text
//! mcpgw_testkit::event_sink_contract_suite!(|observers| MySink::with_observers(observers));
//! mcpgw_testkit::event_observer_contract_suite!(MyObserver::new());
//! ```

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpgw_core::{
    DomainEvent, EVENT_TYPES, EventObserver, EventSink, PublishedEvent, ServerId, ServerState,
    Timestamp,
};

#[doc(hidden)]
pub use mcpgw_core::EventObserver as __Observer;

/// How long an observer may take for one event, at most, on a loaded machine: it is called
/// inline by whoever publishes, so it must be far quicker than this as a rule.
pub const QUICK: Duration = Duration::from_millis(500);

/// Expands to one `#[test]` per case of the [`EventSink`] contract, each running against a sink
/// made by calling `$make_sink` with the observers it must tell of every event (an
/// `FnOnce(Vec<Arc<dyn EventObserver>>) -> S` where `S` implements [`EventSink`]).
///
/// The test functions are named after the cases and defined in the invoking module.
#[macro_export]
macro_rules! event_sink_contract_suite {
    ($make_sink:expr $(,)?) => {
        $crate::__event_sink_contract_case!(
            $make_sink,
            observers_see_every_event_once_in_order_with_increasing_ids
        );
        $crate::__event_sink_contract_case!(
            $make_sink,
            publishing_from_several_threads_loses_and_repeats_nothing
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __event_sink_contract_case {
    ($make_sink:expr, $case:ident) => {
        #[test]
        fn $case() {
            $crate::event_suites::$case($make_sink);
        }
    };
}

/// Expands to one `#[test]` per case of the [`EventObserver`] contract, each running against an
/// observer made by evaluating `$make_observer` (an expression of type
/// `Arc<dyn EventObserver>`, or an `Arc` of a type that implements [`EventObserver`]; it may
/// `.await`). The expression is evaluated inside a tokio runtime,
/// so it may spawn tasks; the invoking crate needs `tokio` with the `rt` and `rt-multi-thread`
/// features among its dev-dependencies.
///
/// The test functions are named after the cases and defined in the invoking module: to run the
/// suite against two observers in one crate, invoke it in two modules.
#[macro_export]
macro_rules! event_observer_contract_suite {
    ($make_observer:expr $(,)?) => {
        $crate::__event_observer_contract_case!($make_observer, takes_every_type_of_event_promptly);
        $crate::__event_observer_contract_case!(
            $make_observer,
            takes_events_from_a_thread_outside_any_runtime
        );
        $crate::__event_observer_contract_case!(
            $make_observer,
            takes_events_from_several_threads_at_once
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __event_observer_contract_case {
    ($make_observer:expr, $case:ident) => {
        #[test]
        fn $case() {
            let runtime = $crate::event_suites::runtime();
            let observer: ::std::sync::Arc<dyn $crate::event_suites::__Observer> =
                runtime.block_on(async { $make_observer });
            $crate::event_suites::$case(&runtime, observer);
        }
    };
}

/// The runtime the observer suite's cases run in: two worker threads, timers and I/O on.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn id(raw: &str) -> ServerId {
    ServerId::parse(raw).expect("a valid id")
}

/// One event of every type, about servers and groups nobody registered.
pub fn one_event_of_each_type() -> Vec<DomainEvent> {
    let server = || id("contract-server");
    let group = || id("contract-group");
    let events = vec![
        DomainEvent::McpServerRegistered {
            mcp_server_id: server(),
            mode: "subprocess".to_owned(),
            origin: "api",
        },
        DomainEvent::McpServerUpdated {
            mcp_server_id: server(),
            restart_required: true,
        },
        DomainEvent::McpServerRemoved {
            mcp_server_id: server(),
        },
        DomainEvent::McpServerStateChanged {
            mcp_server_id: server(),
            from: ServerState::Cold,
            to: ServerState::Initializing,
            reason: "a call".into(),
        },
        DomainEvent::McpServerStarted {
            mcp_server_id: server(),
            duration_ms: 12,
            tool_count: 3,
        },
        DomainEvent::McpServerStartFailed {
            mcp_server_id: server(),
            error: "exited".into(),
            consecutive_failures: 1,
        },
        DomainEvent::McpServerStopped {
            mcp_server_id: server(),
            reason: "idle",
        },
        DomainEvent::McpServerCrashed {
            mcp_server_id: server(),
            exit: "exit code 1".into(),
            consecutive_failures: 2,
        },
        DomainEvent::McpServerToolsChanged {
            mcp_server_id: server(),
            tool_count: 4,
        },
        DomainEvent::HealthCheckFailed {
            mcp_server_id: server(),
            error: "no answer".into(),
            consecutive_failures: 1,
        },
        DomainEvent::ToolInvocationCompleted {
            mcp_server_id: server(),
            tool: "echo".into(),
            duration_ms: 1.5,
            is_error: false,
            principal: Some("user:alice".into()),
            trace_id: Some(mcpgw_core::trace::TraceId([0x4b; 16])),
            span_id: Some(mcpgw_core::trace::SpanId([0x0f; 8])),
        },
        DomainEvent::ToolInvocationFailed {
            mcp_server_id: server(),
            tool: "echo".into(),
            duration_ms: 2.5,
            error_kind: "timeout",
            error: "no answer".into(),
            principal: None,
            trace_id: None,
            span_id: None,
        },
        DomainEvent::GroupCreated {
            group_id: group(),
            strategy: "round_robin",
            origin: "api",
        },
        DomainEvent::GroupUpdated { group_id: group() },
        DomainEvent::GroupDeleted { group_id: group() },
        DomainEvent::GroupMemberAdded {
            group_id: group(),
            mcp_server_id: server(),
        },
        DomainEvent::GroupMemberRemoved {
            group_id: group(),
            mcp_server_id: server(),
        },
        DomainEvent::GroupMemberHealthChanged {
            group_id: group(),
            mcp_server_id: server(),
            in_rotation: false,
            reason: "transport_failure",
        },
        DomainEvent::GroupStateChanged {
            group_id: group(),
            from: "healthy",
            to: "partial",
        },
        DomainEvent::AuthenticationSucceeded {
            principal: "user:alice".into(),
            credential: "api_key",
            client: Some("127.0.0.1".into()),
        },
        DomainEvent::AuthenticationFailed {
            credential: "bearer",
            reason: "expired".into(),
            client: None,
        },
        DomainEvent::AuthorizationGranted {
            principal: "user:alice".into(),
            permission: "servers:read".into(),
            granted_by_role: "viewer".into(),
        },
        DomainEvent::AuthorizationDenied {
            principal: "user:bob".into(),
            permission: "servers:write".into(),
            reason: "no role grants it".into(),
        },
        DomainEvent::ApiKeyCreated {
            key_id: "key-1".into(),
            principal: "user:alice".into(),
            name: "ci".into(),
        },
        DomainEvent::ApiKeyRevoked {
            key_id: "key-1".into(),
        },
        DomainEvent::RoleCreated {
            role: "auditor".into(),
        },
        DomainEvent::RoleUpdated {
            role: "auditor".into(),
        },
        DomainEvent::RoleDeleted {
            role: "auditor".into(),
        },
        DomainEvent::RoleAssigned {
            principal: "user:alice".into(),
            role: "viewer".into(),
            scope: "global".into(),
        },
        DomainEvent::RoleRevoked {
            principal: "user:alice".into(),
            role: "viewer".into(),
            scope: "global".into(),
        },
        DomainEvent::ToolPolicySet {
            policy: "tool/contract-server__echo".into(),
        },
        DomainEvent::ToolPolicyCleared {
            policy: "tool/contract-server__echo".into(),
        },
        DomainEvent::DiscoverySourceAdded {
            source_id: "files".into(),
            source_type: "files".into(),
            mode: "approve",
        },
        DomainEvent::DiscoverySourceUpdated {
            source_id: "files".into(),
        },
        DomainEvent::DiscoverySourceRemoved {
            source_id: "files".into(),
        },
        DomainEvent::DiscoverySourceEnabled {
            source_id: "files".into(),
            enabled: false,
        },
        DomainEvent::DiscoveryScanCompleted {
            source_id: "files".into(),
            found: 3,
            pending: 1,
            quarantined: 1,
        },
        DomainEvent::DiscoveryScanFailed {
            source_id: "files".into(),
            error: "directory missing".into(),
        },
        DomainEvent::DiscoveryServerPending {
            name: "found".into(),
            source_id: "files".into(),
        },
        DomainEvent::DiscoveryServerQuarantined {
            name: "odd".into(),
            source_id: "files".into(),
            reason: "invalid".into(),
        },
        DomainEvent::DiscoveryServerApproved {
            mcp_server_id: server(),
            source_id: "files".into(),
        },
        DomainEvent::DiscoveryServerRejected {
            name: "found".into(),
            source_id: "files".into(),
        },
        DomainEvent::DiscoveryServerWithdrawn {
            mcp_server_id: server(),
            source_id: "files".into(),
        },
        DomainEvent::ConfigurationReloaded {
            trigger: "api",
            added: vec!["a".into()],
            removed: vec!["b".into()],
            updated: vec![],
            restart_required: vec!["listen".into()],
        },
        DomainEvent::ConfigurationReloadFailed {
            trigger: "signal",
            error: "invalid".into(),
        },
        DomainEvent::ToolsPinned {
            mcp_server_id: server(),
            tools: vec!["echo".into()],
        },
        DomainEvent::ToolDefinitionChanged {
            mcp_server_id: server(),
            tool: "echo".into(),
            change: "changed",
            pinned_digest: Some("a".repeat(64)),
            observed_digest: "b".repeat(64),
            withheld: true,
        },
        DomainEvent::ToolPinApproved {
            mcp_server_id: server(),
            tool: "echo".into(),
            digest: "b".repeat(64),
            approved_by: "user:ops".into(),
        },
        DomainEvent::ToolPinRejected {
            mcp_server_id: server(),
            tool: "echo".into(),
            digest: "b".repeat(64),
            rejected_by: "user:ops".into(),
        },
        DomainEvent::ToolPinsReset {
            mcp_server_id: server(),
            reset_by: "user:ops".into(),
        },
        DomainEvent::ToolNameCollision {
            mcp_server_id: server(),
            tool: "echo".into(),
            name: "echo".into(),
            listed_from: "other".into(),
        },
        DomainEvent::EndpointCreated {
            endpoint: "support".into(),
            origin: "api",
        },
        DomainEvent::EndpointUpdated {
            endpoint: "support".into(),
        },
        DomainEvent::EndpointDeleted {
            endpoint: "support".into(),
        },
    ];
    let mut types: Vec<&str> = events.iter().map(DomainEvent::event_type).collect();
    types.sort_unstable();
    let mut every: Vec<&str> = EVENT_TYPES.to_vec();
    every.sort_unstable();
    assert_eq!(types, every, "one sample per event type, no more, no less");
    events
}

/// An observer that writes down what it sees.
#[derive(Default)]
struct Seen(Mutex<Vec<PublishedEvent>>);

impl EventObserver for Seen {
    fn observe(&self, event: &PublishedEvent) {
        // Takes a moment, as any observer does, in which another thread may publish.
        std::thread::yield_now();
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(event.clone());
    }
}

impl Seen {
    fn events(&self) -> Vec<PublishedEvent> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

fn sink_observed_by<S: EventSink>(
    make_sink: impl FnOnce(Vec<Arc<dyn EventObserver>>) -> S,
    count: usize,
) -> (S, Vec<Arc<Seen>>) {
    let seen: Vec<Arc<Seen>> = (0..count).map(|_| Arc::new(Seen::default())).collect();
    let observers = seen
        .iter()
        .map(|seen| seen.clone() as Arc<dyn EventObserver>)
        .collect();
    (make_sink(observers), seen)
}

fn numbered(n: usize) -> DomainEvent {
    DomainEvent::RoleCreated {
        role: format!("role-{n}"),
    }
}

// ----- the sink's cases ---------------------------------------------------------------------

pub fn observers_see_every_event_once_in_order_with_increasing_ids<S: EventSink>(
    make_sink: impl FnOnce(Vec<Arc<dyn EventObserver>>) -> S,
) {
    let (sink, seen) = sink_observed_by(make_sink, 2);
    let published: Vec<(Timestamp, DomainEvent)> = one_event_of_each_type()
        .into_iter()
        .chain((0..20).map(numbered))
        .enumerate()
        .map(|(n, event)| {
            let micros = 1_700_000_000_000_000 + i64::try_from(n).unwrap_or(0) * 1_000;
            (Timestamp::from_unix_micros(micros), event)
        })
        .collect();
    for (occurred_at, event) in &published {
        sink.publish(*occurred_at, event.clone());
    }
    for (index, observer) in seen.iter().enumerate() {
        let events = observer.events();
        let told: Vec<(Timestamp, DomainEvent)> = events
            .iter()
            .map(|event| (event.occurred_at, event.event.clone()))
            .collect();
        assert_eq!(
            told, published,
            "observer {index} saw every event once, in order"
        );
        assert!(
            events
                .windows(2)
                .all(|pair| pair[0].event_id < pair[1].event_id),
            "ids increase: {:?}",
            events
                .iter()
                .map(|event| event.event_id)
                .collect::<Vec<_>>()
        );
    }
    let ids = |seen: &Seen| -> Vec<u64> { seen.events().iter().map(|e| e.event_id).collect() };
    assert_eq!(
        ids(&seen[0]),
        ids(&seen[1]),
        "every observer sees the same ids"
    );
}

pub fn publishing_from_several_threads_loses_and_repeats_nothing<S: EventSink>(
    make_sink: impl FnOnce(Vec<Arc<dyn EventObserver>>) -> S,
) {
    const THREADS: usize = 4;
    const EACH: usize = 500;
    let (sink, seen) = sink_observed_by(make_sink, 1);
    let start = std::sync::Barrier::new(THREADS);
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let sink = &sink;
            let start = &start;
            scope.spawn(move || {
                start.wait();
                for n in 0..EACH {
                    sink.publish(Timestamp::from_unix_micros(0), numbered(thread * EACH + n));
                }
            });
        }
    });
    let events = seen[0].events();
    assert_eq!(events.len(), THREADS * EACH, "every event, once");
    let mut ids: Vec<u64> = events.iter().map(|event| event.event_id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(
        ids.len(),
        THREADS * EACH,
        "every event has an id of its own"
    );
    let numbered: Vec<(usize, u64)> = events
        .iter()
        .map(|event| match &event.event {
            DomainEvent::RoleCreated { role } => {
                (role["role-".len()..].parse().unwrap(), event.event_id)
            }
            other => panic!("an event nobody published: {other:?}"),
        })
        .collect();
    for thread in 0..THREADS {
        let mine: Vec<(usize, u64)> = numbered
            .iter()
            .copied()
            .filter(|(n, _)| n / EACH == thread)
            .collect();
        let order: Vec<usize> = mine.iter().map(|(n, _)| *n).collect();
        let expected: Vec<usize> = (thread * EACH..(thread + 1) * EACH).collect();
        assert_eq!(
            order, expected,
            "thread {thread}'s events, once each, in its order"
        );
        assert!(
            mine.windows(2).all(|pair| pair[0].1 < pair[1].1),
            "the ids of thread {thread}'s events increase"
        );
    }
}

// ----- the observer's cases -----------------------------------------------------------------

fn observe_all(observer: &dyn EventObserver, events: Vec<DomainEvent>, first_id: u64) {
    for (offset, event) in events.into_iter().enumerate() {
        let published = PublishedEvent {
            event_id: first_id + offset as u64,
            occurred_at: Timestamp::from_unix_micros(1_700_000_000_000_000),
            event,
        };
        let started = Instant::now();
        observer.observe(&published);
        assert!(
            started.elapsed() < QUICK,
            "observing {} took {:?}",
            published.event.event_type(),
            started.elapsed()
        );
    }
}

pub fn takes_every_type_of_event_promptly(
    runtime: &tokio::runtime::Runtime,
    observer: Arc<dyn EventObserver>,
) {
    // Inline, on a thread of the runtime, as the domain publishes from its tasks.
    runtime.block_on(async move {
        tokio::spawn(async move {
            observe_all(observer.as_ref(), one_event_of_each_type(), 1);
            // And again, as events that repeat (a server that starts and stops twice).
            observe_all(observer.as_ref(), one_event_of_each_type(), 1_000);
        })
        .await
        .expect("the observer took every event");
    });
}

pub fn takes_events_from_a_thread_outside_any_runtime(
    runtime: &tokio::runtime::Runtime,
    observer: Arc<dyn EventObserver>,
) {
    let _ = runtime;
    std::thread::spawn(move || {
        observe_all(observer.as_ref(), one_event_of_each_type(), 1);
    })
    .join()
    .expect("the observer took every event outside a runtime");
}

pub fn takes_events_from_several_threads_at_once(
    runtime: &tokio::runtime::Runtime,
    observer: Arc<dyn EventObserver>,
) {
    let _guard = runtime.enter();
    let started = Instant::now();
    std::thread::scope(|scope| {
        for thread in 0..4u64 {
            let observer = observer.clone();
            scope.spawn(move || {
                observe_all(
                    observer.as_ref(),
                    one_event_of_each_type(),
                    1 + thread * 100,
                );
            });
        }
    });
    assert!(
        started.elapsed() < QUICK * 10,
        "four threads of events took {:?}",
        started.elapsed()
    );
}
