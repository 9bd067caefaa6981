//! In-memory fakes of discovery's ports, for tests of the code that uses them.
//!
//! [`InMemoryDiscoveryStore`] keeps sources and rejections in maps: it passes the
//! [`DiscoveryStore`] contract suite ([`crate::discovery_store_suite`]) and forgets everything
//! when dropped, so a test that needs "across restarts" hands the same instance to the second
//! registry.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use mcpgw_discovery::{DiscoveryStore, DiscoveryStoreError, Rejection, SourceDefinition};

/// A [`DiscoveryStore`] in memory.
///
/// [`fail_next_write`](Self::fail_next_write) makes the next save or delete fail without
/// changing anything, for tests of what the caller does when persisting fails.
#[derive(Default)]
pub struct InMemoryDiscoveryStore {
    sources: Mutex<BTreeMap<String, SourceDefinition>>,
    rejections: Mutex<BTreeMap<(String, String), Rejection>>,
    next_write_failure: Mutex<Option<String>>,
}

impl InMemoryDiscoveryStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the next write (any `save_*` or `delete_*`) return a [`DiscoveryStoreError`] with
    /// `message` and change nothing; the writes after it succeed again.
    pub fn fail_next_write(&self, message: impl Into<String>) {
        *lock(&self.next_write_failure) = Some(message.into());
    }

    fn take_failure(&self) -> Result<(), DiscoveryStoreError> {
        match lock(&self.next_write_failure).take() {
            Some(message) => Err(DiscoveryStoreError(message)),
            None => Ok(()),
        }
    }
}

/// A panic in one test must not turn every later use of a shared fake into a second panic.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[async_trait]
impl DiscoveryStore for InMemoryDiscoveryStore {
    async fn save_source(&self, source: &SourceDefinition) -> Result<(), DiscoveryStoreError> {
        self.take_failure()?;
        lock(&self.sources).insert(source.source_id.clone(), source.clone());
        Ok(())
    }

    async fn delete_source(&self, source_id: &str) -> Result<(), DiscoveryStoreError> {
        self.take_failure()?;
        lock(&self.sources).remove(source_id);
        Ok(())
    }

    async fn load_sources(&self) -> Result<Vec<SourceDefinition>, DiscoveryStoreError> {
        Ok(lock(&self.sources).values().cloned().collect())
    }

    async fn save_rejection(&self, rejection: &Rejection) -> Result<(), DiscoveryStoreError> {
        self.take_failure()?;
        let key = (rejection.source_id.clone(), rejection.name.clone());
        lock(&self.rejections).insert(key, rejection.clone());
        Ok(())
    }

    async fn delete_rejection(
        &self,
        source_id: &str,
        name: &str,
    ) -> Result<(), DiscoveryStoreError> {
        self.take_failure()?;
        lock(&self.rejections).remove(&(source_id.to_owned(), name.to_owned()));
        Ok(())
    }

    async fn load_rejections(&self) -> Result<Vec<Rejection>, DiscoveryStoreError> {
        Ok(lock(&self.rejections).values().cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery_store_suite::{sample_rejection, sample_source};

    mod in_memory_contract {
        crate::discovery_store_contract_suite!(
            crate::discovery_fakes::InMemoryDiscoveryStore::new()
        );
    }

    #[tokio::test]
    async fn fail_next_write_fails_exactly_one_write_and_changes_nothing() {
        let store = InMemoryDiscoveryStore::new();
        let source = sample_source("docker-0");
        store.fail_next_write("disk full");
        let error = store.save_source(&source).await.unwrap_err();
        assert_eq!(error, DiscoveryStoreError("disk full".to_owned()));
        assert_eq!(store.load_sources().await.unwrap(), []);
        store.save_source(&source).await.unwrap();

        store.fail_next_write("disk full");
        assert!(store.delete_source("docker-0").await.is_err());
        assert_eq!(store.load_sources().await.unwrap(), [source]);

        let rejection = sample_rejection("docker-0", "math");
        store.fail_next_write("disk full");
        assert!(store.save_rejection(&rejection).await.is_err());
        assert_eq!(store.load_rejections().await.unwrap(), []);
        store.save_rejection(&rejection).await.unwrap();
        store.fail_next_write("disk full");
        assert!(store.delete_rejection("docker-0", "math").await.is_err());
        assert_eq!(store.load_rejections().await.unwrap(), [rejection]);
    }
}
