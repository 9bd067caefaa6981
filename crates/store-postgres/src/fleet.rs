//! [`FleetStore`] on the `mcpgw_replicas` and `mcpgw_leases` tables, stamped by the database's
//! clock so that replicas whose clocks disagree still agree on ages and expiries.

use std::time::Duration;

use async_trait::async_trait;
use mcpgw_core::{
    FleetStore, ReplicaHeartbeat, ReplicaStatus, RepositoryError, ServerId, ServerState, Timestamp,
};
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::store::PostgresStore;

#[derive(Serialize, Deserialize)]
struct ServerRow {
    id: String,
    state: String,
}

fn encode_servers(servers: &[(ServerId, ServerState)]) -> String {
    let rows: Vec<ServerRow> = servers
        .iter()
        .map(|(id, state)| ServerRow {
            id: id.to_string(),
            state: state.as_str().to_owned(),
        })
        .collect();
    serde_json::to_string(&rows).unwrap_or_else(|_| "[]".to_owned())
}

fn decode_servers(replica: &str, text: &str) -> Result<Vec<(ServerId, ServerState)>, StoreError> {
    let corrupt = |reason: String| StoreError::CorruptRecord {
        table: "mcpgw_replicas",
        key: replica.to_owned(),
        reason,
    };
    let rows: Vec<ServerRow> =
        serde_json::from_str(text).map_err(|error| corrupt(error.to_string()))?;
    rows.into_iter()
        .map(|row| {
            let id = ServerId::parse(&row.id).map_err(|error| corrupt(error.to_string()))?;
            let state = ServerState::parse(&row.state)
                .ok_or_else(|| corrupt(format!("`{}` is not a server state", row.state)))?;
            Ok((id, state))
        })
        .collect()
}

fn seconds(duration: Duration) -> f64 {
    duration.as_secs_f64()
}

impl PostgresStore {
    async fn record_heartbeat(&self, heartbeat: &ReplicaHeartbeat) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO mcpgw_replicas
                     (replica_id, version, started_at_us, servers, heartbeat_at)
                 VALUES ($1, $2, $3, $4, clock_timestamp())
                 ON CONFLICT (replica_id) DO UPDATE SET
                     version = EXCLUDED.version, started_at_us = EXCLUDED.started_at_us,
                     servers = EXCLUDED.servers, heartbeat_at = EXCLUDED.heartbeat_at",
                &[
                    &heartbeat.replica_id,
                    &heartbeat.version,
                    &heartbeat.started_at.unix_micros(),
                    &encode_servers(&heartbeat.servers),
                ],
            )
            .await
            .map_err(StoreError::postgres("record a heartbeat"))?;
        Ok(())
    }

    async fn load_replicas(&self) -> Result<Vec<ReplicaStatus>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT r.replica_id, r.version, r.started_at_us, r.servers,
                        (EXTRACT(EPOCH FROM r.heartbeat_at) * 1000000)::BIGINT,
                        GREATEST(EXTRACT(EPOCH FROM clock_timestamp() - r.heartbeat_at), 0)::FLOAT8,
                        COALESCE(
                            (SELECT array_agg(l.name ORDER BY l.name) FROM mcpgw_leases l
                             WHERE l.holder = r.replica_id AND l.expires_at > clock_timestamp()),
                            ARRAY[]::TEXT[])
                 FROM mcpgw_replicas r ORDER BY r.replica_id",
                &[],
            )
            .await
            .map_err(StoreError::postgres("list the replicas"))?;
        rows.iter()
            .map(|row| {
                let replica_id: String = row.get(0);
                let servers = decode_servers(&replica_id, row.get::<_, &str>(3))?;
                let age: f64 = row.get(5);
                Ok(ReplicaStatus {
                    heartbeat: ReplicaHeartbeat {
                        replica_id,
                        version: row.get(1),
                        started_at: Timestamp::from_unix_micros(row.get(2)),
                        servers,
                    },
                    last_heartbeat_at: Timestamp::from_unix_micros(row.get(4)),
                    heartbeat_age: Duration::try_from_secs_f64(age).unwrap_or_default(),
                    leases: row.get(6),
                })
            })
            .collect()
    }

    async fn remove_replica(&self, replica_id: &str) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let transaction = client
            .transaction()
            .await
            .map_err(StoreError::postgres("begin removing a replica"))?;
        transaction
            .execute(
                "DELETE FROM mcpgw_replicas WHERE replica_id = $1",
                &[&replica_id],
            )
            .await
            .map_err(StoreError::postgres("remove a replica"))?;
        transaction
            .execute("DELETE FROM mcpgw_leases WHERE holder = $1", &[&replica_id])
            .await
            .map_err(StoreError::postgres("release a replica's leases"))?;
        transaction
            .commit()
            .await
            .map_err(StoreError::postgres("commit removing a replica"))
    }

    async fn take_lease(
        &self,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        // One statement, so two replicas asking at once are serialized by the row: the insert
        // of one conflicts with the other's, whose update then sees the lease held.
        let row = client
            .query_opt(
                "INSERT INTO mcpgw_leases (name, holder, expires_at)
                 VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3))
                 ON CONFLICT (name) DO UPDATE SET
                     holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
                 WHERE mcpgw_leases.holder = EXCLUDED.holder
                    OR mcpgw_leases.expires_at <= clock_timestamp()
                 RETURNING holder",
                &[&name, &holder, &seconds(ttl)],
            )
            .await
            .map_err(StoreError::postgres("take a lease"))?;
        Ok(row.is_some())
    }

    async fn remove_silent(&self, older_than: Duration) -> Result<usize, StoreError> {
        let client = self.client().await?;
        let removed = client
            .execute(
                "DELETE FROM mcpgw_replicas
                 WHERE heartbeat_at < clock_timestamp() - make_interval(secs => $1)",
                &[&seconds(older_than)],
            )
            .await
            .map_err(StoreError::postgres("forget silent replicas"))?;
        Ok(usize::try_from(removed).unwrap_or(usize::MAX))
    }

    async fn give_up_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "DELETE FROM mcpgw_leases WHERE name = $1 AND holder = $2",
                &[&name, &holder],
            )
            .await
            .map_err(StoreError::postgres("release a lease"))?;
        Ok(())
    }
}

#[async_trait]
impl FleetStore for PostgresStore {
    async fn heartbeat(&self, heartbeat: &ReplicaHeartbeat) -> Result<(), RepositoryError> {
        Ok(self.record_heartbeat(heartbeat).await?)
    }

    async fn replicas(&self) -> Result<Vec<ReplicaStatus>, RepositoryError> {
        Ok(self.load_replicas().await?)
    }

    async fn leave(&self, replica_id: &str) -> Result<(), RepositoryError> {
        Ok(self.remove_replica(replica_id).await?)
    }

    async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<bool, RepositoryError> {
        Ok(self.take_lease(name, holder, ttl).await?)
    }

    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), RepositoryError> {
        Ok(self.give_up_lease(name, holder).await?)
    }

    async fn forget_silent(&self, older_than: Duration) -> Result<usize, RepositoryError> {
        Ok(self.remove_silent(older_than).await?)
    }
}
