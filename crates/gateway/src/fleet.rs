//! This replica's place in a fleet of gateways that share one store: its heartbeat, the leases
//! of work that must run on one replica only, and the fleet view.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mcpgw_core::{
    FleetStore, ReplicaHeartbeat, ReplicaStatus, RepositoryError, ServerManager, Timestamp,
};

/// Discovery scans (a candidate found twice would be offered twice).
pub const LEASE_DISCOVERY: &str = "discovery";
/// Event-log compaction (one pass over the shared log is enough).
pub const LEASE_EVENT_LOG_COMPACTION: &str = "event-log-compaction";

/// How a replica takes part in its fleet.
#[derive(Debug, Clone)]
pub struct FleetSettings {
    /// This replica's name in the fleet.
    pub replica_id: String,
    /// The gateway's version, shown in the fleet view.
    pub version: String,
    /// How often the heartbeat is written and the leases renewed.
    pub heartbeat_interval: Duration,
    /// How long a lease lasts without renewal.
    pub lease_ttl: Duration,
}

/// One replica of the fleet. Cheap to share; every method may be called from any task.
pub struct Fleet {
    settings: FleetSettings,
    started_at: Timestamp,
    store: Arc<dyn FleetStore>,
    manager: ServerManager,
    /// Leases this replica holds, each until when it may act on it (a margin before the store
    /// lets it expire, measured from when the renewal was asked for).
    held: Mutex<HashMap<String, Instant>>,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("replica_id", &self.settings.replica_id)
            .finish_non_exhaustive()
    }
}

impl Fleet {
    /// How long a replica that stopped sending heartbeats stays in the fleet view, shown as not
    /// alive, before it is forgotten.
    pub const FORGET_SILENT_AFTER: Duration = Duration::from_secs(3600);

    pub fn new(
        settings: FleetSettings,
        started_at: Timestamp,
        store: Arc<dyn FleetStore>,
        manager: ServerManager,
    ) -> Self {
        Self {
            settings,
            started_at,
            store,
            manager,
            held: Mutex::new(HashMap::new()),
        }
    }

    pub fn replica_id(&self) -> &str {
        &self.settings.replica_id
    }

    pub fn settings(&self) -> &FleetSettings {
        &self.settings
    }

    /// Records this replica's heartbeat: its servers and their states here.
    pub async fn heartbeat(&self) -> Result<(), RepositoryError> {
        let servers = self
            .manager
            .list(None)
            .into_iter()
            .map(|snapshot| (snapshot.spec.id.clone(), snapshot.state))
            .collect();
        self.store
            .heartbeat(&ReplicaHeartbeat {
                replica_id: self.settings.replica_id.clone(),
                version: self.settings.version.clone(),
                started_at: self.started_at,
                servers,
            })
            .await
    }

    /// Takes or renews the lease `name`; answers whether this replica holds it now. A store
    /// that cannot be reached keeps the lease for no one here: the replica stops acting on it
    /// at once, and another takes it once it expired in the store.
    pub async fn renew(&self, name: &str) -> bool {
        let asked = Instant::now();
        let held = match self
            .store
            .acquire_lease(name, &self.settings.replica_id, self.settings.lease_ttl)
            .await
        {
            Ok(held) => held,
            Err(error) => {
                tracing::warn!(lease = name, %error, "could not renew a lease; acting as if lost");
                false
            }
        };
        let mut leases = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if held {
            // Act on it no longer than the store keeps it, less a heartbeat for safety: by
            // then the next renewal has either succeeded or this replica has stopped.
            let margin = self
                .settings
                .heartbeat_interval
                .min(self.settings.lease_ttl / 2);
            leases.insert(name.to_owned(), asked + (self.settings.lease_ttl - margin));
        } else {
            leases.remove(name);
        }
        held
    }

    /// Whether this replica holds the lease `name` now.
    pub fn holds(&self, name: &str) -> bool {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .is_some_and(|until| Instant::now() < *until)
    }

    /// Every replica's latest heartbeat.
    pub async fn replicas(&self) -> Result<Vec<ReplicaStatus>, RepositoryError> {
        self.store.replicas().await
    }

    /// Whether a replica whose heartbeat is `age` old counts as alive: it missed fewer than
    /// three heartbeats.
    pub fn is_alive(&self, age: Duration) -> bool {
        age < self.settings.heartbeat_interval * 3
    }

    /// Removes from the fleet view the replicas silent for longer than
    /// [`Fleet::FORGET_SILENT_AFTER`] (killed, and never back under their name). Any replica may
    /// do it; the one holding event-log compaction does.
    pub async fn forget_silent(&self) {
        match self.store.forget_silent(Self::FORGET_SILENT_AFTER).await {
            Ok(0) => {}
            Ok(forgotten) => tracing::info!(forgotten, "forgot replicas silent for an hour"),
            Err(error) => tracing::warn!(%error, "could not forget silent replicas"),
        }
    }

    /// Leaves the fleet at shutdown: the heartbeat is removed and the leases released at once,
    /// so another replica takes the work without waiting for them to expire.
    pub async fn leave(&self) {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        if let Err(error) = self.store.leave(&self.settings.replica_id).await {
            tracing::warn!(%error, "could not leave the fleet; the leases expire by themselves");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpgw_core::{ManagerSettings, ServerSpec, ServerState};
    use mcpgw_testkit::clock::FakeClock;
    use mcpgw_testkit::fakes::{FakeLauncher, RecordingEventSink, TokioSpawner};
    use mcpgw_testkit::fleet_store_suite::InMemoryFleetStore;

    fn replica(name: &str, store: &InMemoryFleetStore, ttl: Duration) -> Fleet {
        let manager = ServerManager::new(
            Arc::new(FakeLauncher::new()),
            Arc::new(FakeClock::new()),
            Arc::new(RecordingEventSink::default()),
            Arc::new(TokioSpawner),
            None,
            ManagerSettings::default(),
        );
        Fleet::new(
            FleetSettings {
                replica_id: name.to_owned(),
                version: "9.9.9".to_owned(),
                heartbeat_interval: ttl / 3,
                lease_ttl: ttl,
            },
            Timestamp::from_unix_micros(7),
            Arc::new(store.clone()),
            manager,
        )
    }

    #[tokio::test]
    async fn the_heartbeat_reports_every_server_and_its_state() {
        let store = InMemoryFleetStore::new();
        let fleet = replica("gw-a", &store, Duration::from_secs(15));
        fleet
            .manager
            .register(ServerSpec::subprocess(
                mcpgw_core::ServerId::parse("math").unwrap(),
                vec!["fixture".into()],
            ))
            .await
            .unwrap();
        fleet.heartbeat().await.unwrap();
        let replicas = fleet.replicas().await.unwrap();
        assert_eq!(replicas.len(), 1);
        let beat = &replicas[0].heartbeat;
        assert_eq!(beat.replica_id, "gw-a");
        assert_eq!(beat.version, "9.9.9");
        assert_eq!(beat.servers.len(), 1);
        assert_eq!(beat.servers[0].1, ServerState::Cold);
        assert!(fleet.is_alive(replicas[0].heartbeat_age));
        assert!(!fleet.is_alive(Duration::from_secs(15)));
    }

    #[tokio::test]
    async fn one_replica_holds_a_lease_until_it_stops_renewing() {
        let store = InMemoryFleetStore::new();
        let ttl = Duration::from_millis(600);
        let a = replica("gw-a", &store, ttl);
        let b = replica("gw-b", &store, ttl);
        assert!(a.renew(LEASE_DISCOVERY).await);
        assert!(!b.renew(LEASE_DISCOVERY).await);
        assert!(a.holds(LEASE_DISCOVERY));
        assert!(!b.holds(LEASE_DISCOVERY));
        // A stops renewing: it stops acting before the store lets the lease go, and B takes
        // it only after that.
        tokio::time::sleep(ttl - ttl / 3 + Duration::from_millis(50)).await;
        assert!(!a.holds(LEASE_DISCOVERY), "A acts on the lease no longer");
        tokio::time::sleep(ttl / 3).await;
        assert!(b.renew(LEASE_DISCOVERY).await);
        assert!(b.holds(LEASE_DISCOVERY));
        assert!(!a.renew(LEASE_DISCOVERY).await);

        b.leave().await;
        assert!(!b.holds(LEASE_DISCOVERY));
        assert!(
            a.renew(LEASE_DISCOVERY).await,
            "a leaver's lease is free at once"
        );
    }
}
