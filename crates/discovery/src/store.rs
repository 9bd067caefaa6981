//! The port that keeps what discovery must remember across restarts.

use async_trait::async_trait;
use mcpgw_core::Timestamp;
use serde_json::{Map, Value};

use crate::source::SourceDefinition;

/// A rejected candidate: it stays rejected, across scans and restarts, until a scan finds it
/// with another definition.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    pub source_id: String,
    pub name: String,
    /// The definition that was rejected.
    pub definition: Map<String, Value>,
    pub rejected_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DiscoveryStoreError(pub String);

/// Durable storage for discovery.
///
/// Contract for implementors:
/// - `save_source` is an upsert by `source_id` and is durable when it returns; only sources of
///   origin `api` are handed to it.
/// - `save_rejection` is an upsert by (`source_id`, `name`).
/// - deleting what is not there is not an error.
/// - `load_*` answer everything saved and not deleted, in any order.
#[async_trait]
pub trait DiscoveryStore: Send + Sync {
    async fn save_source(&self, source: &SourceDefinition) -> Result<(), DiscoveryStoreError>;
    async fn delete_source(&self, source_id: &str) -> Result<(), DiscoveryStoreError>;
    async fn load_sources(&self) -> Result<Vec<SourceDefinition>, DiscoveryStoreError>;
    async fn save_rejection(&self, rejection: &Rejection) -> Result<(), DiscoveryStoreError>;
    async fn delete_rejection(
        &self,
        source_id: &str,
        name: &str,
    ) -> Result<(), DiscoveryStoreError>;
    async fn load_rejections(&self) -> Result<Vec<Rejection>, DiscoveryStoreError>;
}
