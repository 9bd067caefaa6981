//! The port through which groups created at run time are kept across restarts.

use async_trait::async_trait;
use mcpgw_core::{RepositoryError, ServerId};

use crate::group::MemberSpec;
use crate::strategy::GroupStrategy;

/// A group's definition as it is stored: what was asked for, not its run-time rotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSpec {
    pub id: ServerId,
    pub description: Option<String>,
    pub strategy: GroupStrategy,
    pub min_healthy: u32,
    pub members: Vec<MemberSpec>,
}

/// Where groups created over the API (not those of the configuration file) are kept.
#[async_trait]
pub trait GroupRepository: Send + Sync {
    /// Inserts or replaces the group with `spec.id`.
    async fn save(&self, spec: &GroupSpec) -> Result<(), RepositoryError>;
    /// Deletes the group; deleting an unknown id is not an error.
    async fn delete(&self, id: &ServerId) -> Result<(), RepositoryError>;
    /// Every stored group, in id order.
    async fn load_all(&self) -> Result<Vec<GroupSpec>, RepositoryError>;
}
