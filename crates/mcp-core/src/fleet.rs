//! Replicas of one gateway that share a store: who is alive, what each runs, and which one holds
//! the work that must happen once.
//!
//! Each replica records a heartbeat (its id, version, start time and the state of every server
//! it manages) every few seconds; the fleet view is the latest heartbeat of each. Work that must
//! run on one replica only (discovery scans, event-log compaction, watching the configuration
//! file) is guarded by a named lease: the holder renews it before it expires, and when the
//! holder stops renewing (it died, or lost the database), another replica takes the lease once
//! it has expired. Times of heartbeats and leases come from the store's clock, so replicas
//! whose clocks disagree still agree on who holds what.

use std::time::Duration;

use async_trait::async_trait;

use crate::id::ServerId;
use crate::ports::RepositoryError;
use crate::state::ServerState;
use crate::time::Timestamp;

/// What one replica reports about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaHeartbeat {
    pub replica_id: String,
    /// The gateway's version.
    pub version: String,
    pub started_at: Timestamp,
    /// Every server the replica manages and its state there, by id.
    pub servers: Vec<(ServerId, ServerState)>,
}

/// A replica as the fleet view shows it: its latest heartbeat and how old it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaStatus {
    pub heartbeat: ReplicaHeartbeat,
    /// When the latest heartbeat was recorded (the store's clock).
    pub last_heartbeat_at: Timestamp,
    /// How long ago that was, by the store's clock.
    pub heartbeat_age: Duration,
    /// The leases this replica holds and has not let expire.
    pub leases: Vec<String>,
}

/// Shared records of the replicas of one fleet.
///
/// Contract for implementors (the testkit's `fleet_store_contract_suite!` checks it):
/// - `heartbeat` records (or replaces) the replica's latest heartbeat, stamped with the
///   store's time; `replicas` answers the latest heartbeat of every replica that has not left,
///   in replica id order, with its age.
/// - `leave` removes the replica's heartbeat and releases its leases; unknown ids are not an
///   error.
/// - `acquire_lease(name, holder, ttl)` answers `true` when, afterwards, `holder` holds the
///   lease until `ttl` from now: it was free, expired, or already `holder`'s (a renewal).
///   Otherwise `false` and nothing changes. Two replicas acquiring at once never both get it.
/// - `release_lease` frees the lease if `holder` holds it, else does nothing.
/// - `forget_silent(older_than)` removes the heartbeats older than `older_than` (replicas that
///   died without leaving) and answers how many went.
#[async_trait]
pub trait FleetStore: Send + Sync {
    async fn heartbeat(&self, heartbeat: &ReplicaHeartbeat) -> Result<(), RepositoryError>;
    async fn replicas(&self) -> Result<Vec<ReplicaStatus>, RepositoryError>;
    async fn leave(&self, replica_id: &str) -> Result<(), RepositoryError>;
    async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<bool, RepositoryError>;
    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), RepositoryError>;
    async fn forget_silent(&self, older_than: Duration) -> Result<usize, RepositoryError>;
}
