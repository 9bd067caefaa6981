//! What every [`FleetStore`] must do (heartbeats and leases of replicas sharing a store), as
//! tests, and an in-memory implementation of it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use mcpgw_core::{
    FleetStore, ReplicaHeartbeat, ReplicaStatus, RepositoryError, ServerId, ServerState, Timestamp,
};

/// Runs every case of what a [`FleetStore`] must do against the store `$make_store` makes (an
/// expression evaluated once per case, inside the async test, so it may `.await`). Each case
/// must get an empty store. The tests use `#[tokio::test]` with a multi-threaded runtime, so the
/// invoking crate needs tokio's `macros`, `rt` and `rt-multi-thread` among its dev-dependencies.
#[macro_export]
macro_rules! fleet_store_contract_suite {
    ($make_store:expr $(,)?) => {
        $crate::__fleet_store_contract_case!($make_store, a_heartbeat_is_listed_with_its_servers);
        $crate::__fleet_store_contract_case!($make_store, a_later_heartbeat_replaces_the_earlier);
        $crate::__fleet_store_contract_case!($make_store, heartbeats_age_by_the_store_clock);
        $crate::__fleet_store_contract_case!(
            $make_store,
            leaving_removes_the_replica_and_its_leases
        );
        $crate::__fleet_store_contract_case!(
            $make_store,
            a_lease_is_held_renewed_and_refused_to_others
        );
        $crate::__fleet_store_contract_case!(
            $make_store,
            an_expired_lease_moves_to_another_replica
        );
        $crate::__fleet_store_contract_case!($make_store, only_the_holder_releases_a_lease);
        $crate::__fleet_store_contract_case!($make_store, concurrent_acquires_have_one_winner);
        $crate::__fleet_store_contract_case!($make_store, silent_replicas_are_forgotten);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __fleet_store_contract_case {
    ($make_store:expr, $case:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            let store = $make_store;
            $crate::fleet_store_suite::$case(&store).await;
        }
    };
}

fn id(raw: &str) -> ServerId {
    ServerId::parse(raw).expect("a valid id")
}

/// A heartbeat of `replica` reporting `servers`.
pub fn sample_heartbeat(replica: &str, servers: &[(&str, ServerState)]) -> ReplicaHeartbeat {
    ReplicaHeartbeat {
        replica_id: replica.to_owned(),
        version: "0.1.0".to_owned(),
        started_at: Timestamp::from_unix_micros(1_790_000_000_123_456),
        servers: servers
            .iter()
            .map(|(server, state)| (id(server), *state))
            .collect(),
    }
}

async fn replicas(store: &dyn FleetStore) -> Vec<ReplicaStatus> {
    store.replicas().await.expect("replicas")
}

pub async fn a_heartbeat_is_listed_with_its_servers(store: &dyn FleetStore) {
    assert!(
        replicas(store).await.is_empty(),
        "a new store has no replicas"
    );
    let beat = sample_heartbeat(
        "gw-b",
        &[("math", ServerState::Ready), ("api", ServerState::Cold)],
    );
    store.heartbeat(&beat).await.expect("heartbeat");
    store
        .heartbeat(&sample_heartbeat("gw-a", &[]))
        .await
        .expect("heartbeat");
    let listed = replicas(store).await;
    let ids: Vec<&str> = listed
        .iter()
        .map(|status| status.heartbeat.replica_id.as_str())
        .collect();
    assert_eq!(ids, ["gw-a", "gw-b"], "in replica id order");
    assert_eq!(listed[1].heartbeat, beat, "every field round-trips");
    assert!(listed[1].heartbeat_age < Duration::from_secs(5));
    assert!(listed[1].leases.is_empty());
}

pub async fn a_later_heartbeat_replaces_the_earlier(store: &dyn FleetStore) {
    store
        .heartbeat(&sample_heartbeat("gw-a", &[("math", ServerState::Cold)]))
        .await
        .expect("heartbeat");
    let first = replicas(store).await[0].last_heartbeat_at;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let later = sample_heartbeat("gw-a", &[("math", ServerState::Ready)]);
    store.heartbeat(&later).await.expect("heartbeat");
    let listed = replicas(store).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].heartbeat, later);
    assert!(listed[0].last_heartbeat_at > first, "stamped again");
}

pub async fn heartbeats_age_by_the_store_clock(store: &dyn FleetStore) {
    store
        .heartbeat(&sample_heartbeat("gw-a", &[]))
        .await
        .expect("heartbeat");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let age = replicas(store).await[0].heartbeat_age;
    assert!(
        age >= Duration::from_millis(250) && age < Duration::from_secs(10),
        "{age:?}"
    );
}

pub async fn leaving_removes_the_replica_and_its_leases(store: &dyn FleetStore) {
    store
        .heartbeat(&sample_heartbeat("gw-a", &[]))
        .await
        .expect("heartbeat");
    store
        .heartbeat(&sample_heartbeat("gw-b", &[]))
        .await
        .expect("heartbeat");
    assert!(
        store
            .acquire_lease("discovery", "gw-a", Duration::from_secs(60))
            .await
            .expect("acquire")
    );
    let listed = replicas(store).await;
    assert_eq!(listed[0].leases, ["discovery"]);
    store.leave("gw-a").await.expect("leave");
    store
        .leave("gw-unknown")
        .await
        .expect("leaving twice is fine");
    let ids: Vec<String> = replicas(store)
        .await
        .into_iter()
        .map(|status| status.heartbeat.replica_id)
        .collect();
    assert_eq!(ids, ["gw-b"]);
    assert!(
        store
            .acquire_lease("discovery", "gw-b", Duration::from_secs(60))
            .await
            .expect("acquire"),
        "the leaver's lease is free at once"
    );
}

pub async fn a_lease_is_held_renewed_and_refused_to_others(store: &dyn FleetStore) {
    let ttl = Duration::from_secs(60);
    assert!(
        store
            .acquire_lease("compaction", "gw-a", ttl)
            .await
            .unwrap()
    );
    assert!(
        store
            .acquire_lease("compaction", "gw-a", ttl)
            .await
            .unwrap(),
        "the holder renews"
    );
    assert!(
        !store
            .acquire_lease("compaction", "gw-b", ttl)
            .await
            .unwrap(),
        "a held lease is refused to others"
    );
    assert!(
        store.acquire_lease("discovery", "gw-b", ttl).await.unwrap(),
        "leases are independent by name"
    );
}

pub async fn an_expired_lease_moves_to_another_replica(store: &dyn FleetStore) {
    let short = Duration::from_millis(400);
    assert!(
        store
            .acquire_lease("discovery", "gw-a", short)
            .await
            .unwrap()
    );
    assert!(
        !store
            .acquire_lease("discovery", "gw-b", short)
            .await
            .unwrap()
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        store
            .acquire_lease("discovery", "gw-b", Duration::from_secs(60))
            .await
            .unwrap(),
        "a lease its holder stopped renewing is taken once it expired"
    );
    assert!(
        !store
            .acquire_lease("discovery", "gw-a", Duration::from_secs(60))
            .await
            .unwrap(),
        "and the old holder cannot take it back"
    );
}

pub async fn only_the_holder_releases_a_lease(store: &dyn FleetStore) {
    let ttl = Duration::from_secs(60);
    assert!(store.acquire_lease("watch", "gw-a", ttl).await.unwrap());
    store
        .release_lease("watch", "gw-b")
        .await
        .expect("releasing another's lease is no error");
    assert!(!store.acquire_lease("watch", "gw-b", ttl).await.unwrap());
    store.release_lease("watch", "gw-a").await.expect("release");
    assert!(store.acquire_lease("watch", "gw-b", ttl).await.unwrap());
    store
        .release_lease("never-taken", "gw-a")
        .await
        .expect("releasing a lease nobody took is no error");
}

pub async fn concurrent_acquires_have_one_winner(store: &dyn FleetStore) {
    // Bad input for the store's atomicity: eight replicas asking for one lease at once.
    let attempts = (0..8).map(|replica| {
        let holder = format!("gw-{replica}");
        async move {
            store
                .acquire_lease("discovery", &holder, Duration::from_secs(60))
                .await
                .expect("acquire")
        }
    });
    let won = futures::future::join_all(attempts).await;
    assert_eq!(won.iter().filter(|won| **won).count(), 1, "{won:?}");
}

pub async fn silent_replicas_are_forgotten(store: &dyn FleetStore) {
    store
        .heartbeat(&sample_heartbeat("gw-old", &[]))
        .await
        .expect("heartbeat");
    tokio::time::sleep(Duration::from_millis(400)).await;
    store
        .heartbeat(&sample_heartbeat("gw-new", &[]))
        .await
        .expect("heartbeat");
    let forgotten = store
        .forget_silent(Duration::from_millis(200))
        .await
        .expect("forget");
    assert_eq!(forgotten, 1);
    let ids: Vec<String> = replicas(store)
        .await
        .into_iter()
        .map(|status| status.heartbeat.replica_id)
        .collect();
    assert_eq!(ids, ["gw-new"], "only the silent one goes");
    assert_eq!(
        store.forget_silent(Duration::from_secs(60)).await.unwrap(),
        0
    );
}

/// A [`FleetStore`] in memory, on the system clock: for tests and single-process embedders.
#[derive(Debug, Clone, Default)]
pub struct InMemoryFleetStore {
    state: Arc<Mutex<FleetState>>,
}

#[derive(Debug, Default)]
struct FleetState {
    replicas: BTreeMap<String, (ReplicaHeartbeat, SystemTime, Instant)>,
    leases: BTreeMap<String, (String, Instant)>,
}

impl InMemoryFleetStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, FleetState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn timestamp(at: SystemTime) -> Timestamp {
    let micros = at
        .duration_since(UNIX_EPOCH)
        .map(|since| i64::try_from(since.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    Timestamp::from_unix_micros(micros)
}

#[async_trait]
impl FleetStore for InMemoryFleetStore {
    async fn heartbeat(&self, heartbeat: &ReplicaHeartbeat) -> Result<(), RepositoryError> {
        self.state().replicas.insert(
            heartbeat.replica_id.clone(),
            (heartbeat.clone(), SystemTime::now(), Instant::now()),
        );
        Ok(())
    }

    async fn replicas(&self) -> Result<Vec<ReplicaStatus>, RepositoryError> {
        let state = self.state();
        let now = Instant::now();
        Ok(state
            .replicas
            .values()
            .map(|(heartbeat, wall, at)| ReplicaStatus {
                heartbeat: heartbeat.clone(),
                last_heartbeat_at: timestamp(*wall),
                heartbeat_age: now.saturating_duration_since(*at),
                leases: state
                    .leases
                    .iter()
                    .filter(|(_, (holder, until))| *holder == heartbeat.replica_id && *until > now)
                    .map(|(name, _)| name.clone())
                    .collect(),
            })
            .collect())
    }

    async fn leave(&self, replica_id: &str) -> Result<(), RepositoryError> {
        let mut state = self.state();
        state.replicas.remove(replica_id);
        state.leases.retain(|_, (holder, _)| holder != replica_id);
        Ok(())
    }

    async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<bool, RepositoryError> {
        let mut state = self.state();
        let now = Instant::now();
        let free = state
            .leases
            .get(name)
            .is_none_or(|(current, until)| current == holder || *until <= now);
        if free {
            state
                .leases
                .insert(name.to_owned(), (holder.to_owned(), now + ttl));
        }
        Ok(free)
    }

    async fn forget_silent(&self, older_than: Duration) -> Result<usize, RepositoryError> {
        let mut state = self.state();
        let before = state.replicas.len();
        let now = Instant::now();
        state
            .replicas
            .retain(|_, (_, _, at)| now.saturating_duration_since(*at) <= older_than);
        Ok(before - state.replicas.len())
    }

    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), RepositoryError> {
        let mut state = self.state();
        if state
            .leases
            .get(name)
            .is_some_and(|(current, _)| current == holder)
        {
            state.leases.remove(name);
        }
        Ok(())
    }
}

#[cfg(test)]
mod in_memory {
    crate::fleet_store_contract_suite!(super::InMemoryFleetStore::new());
}
