//! What every [`GroupRepository`] must do, as tests that each implementation must pass,
//! and [`InMemoryGroupRepository`], the implementation for tests of the code that uses the
//! port.
//!
//! An adapter crate runs the whole suite against its own repository with one line in its tests:
//!
//! ```text
//! mcpgw_testkit::group_repository_contract_suite!(make_my_repository().await);
//! ```
//!
//! Each case is also a public `async fn` taking `&dyn GroupRepository`, for callers that need
//! to run one case by hand. The cases check what the port's documentation promises: `save` is
//! an upsert by id; deleting an id that is not there is not an error; `load_all` answers every
//! group saved and not deleted, in id order; every field round-trips, the members in the order
//! they were saved (it is the round-robin order) and every strategy included.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use mcpgw_core::{RepositoryError, ServerId};
use mcpgw_groups::{GroupRepository, GroupSpec, GroupStrategy, MemberSpec};

use crate::repository_suite::RepositoryWithGuard;

/// Expands to one `#[tokio::test]` per case of the [`GroupRepository`] contract, each running
/// against a fresh repository made by evaluating `$make_repository` inside the test.
///
/// `$make_repository` is any expression of a type that implements [`GroupRepository`]; it is
/// evaluated in an `async fn`, so it may `.await`. When the repository needs something kept
/// alive for the length of the test (a temporary directory), wrap both in
/// [`RepositoryWithGuard`], which implements [`GroupRepository`] by delegation.
///
/// The tests use `#[tokio::test]`, so the invoking crate needs `tokio` with the `macros` and
/// `rt` features among its dev-dependencies. The test functions are named after the cases and
/// defined in the invoking module: to run the suite against two implementations in one crate,
/// invoke it in two modules.
#[macro_export]
macro_rules! group_repository_contract_suite {
    ($make_repository:expr $(,)?) => {
        $crate::__group_repository_contract_case!(
            $make_repository,
            load_all_on_an_empty_repository_is_empty
        );
        $crate::__group_repository_contract_case!(
            $make_repository,
            save_then_load_all_returns_an_equal_spec
        );
        $crate::__group_repository_contract_case!($make_repository, saving_twice_is_an_upsert);
        $crate::__group_repository_contract_case!($make_repository, delete_removes_the_group);
        $crate::__group_repository_contract_case!($make_repository, deleting_an_unknown_id_is_ok);
        $crate::__group_repository_contract_case!($make_repository, load_all_answers_in_id_order);
        $crate::__group_repository_contract_case!(
            $make_repository,
            a_group_without_members_round_trips
        );
        $crate::__group_repository_contract_case!($make_repository, every_strategy_round_trips);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __group_repository_contract_case {
    ($make_repository:expr, $case:ident) => {
        #[tokio::test]
        async fn $case() {
            let repository = $make_repository;
            $crate::group_repository_suite::$case(&repository).await;
        }
    };
}

#[async_trait]
impl<R: GroupRepository, G: Send + Sync> GroupRepository for RepositoryWithGuard<R, G> {
    async fn save(&self, spec: &GroupSpec) -> Result<(), RepositoryError> {
        self.repository.save(spec).await
    }
    async fn delete(&self, id: &ServerId) -> Result<(), RepositoryError> {
        self.repository.delete(id).await
    }
    async fn load_all(&self) -> Result<Vec<GroupSpec>, RepositoryError> {
        self.repository.load_all().await
    }
}

/// A [`GroupRepository`] in memory: what a test of the code that uses the port gives it.
#[derive(Debug, Default)]
pub struct InMemoryGroupRepository {
    groups: Mutex<BTreeMap<ServerId, GroupSpec>>,
}

impl InMemoryGroupRepository {
    fn groups(&self) -> MutexGuard<'_, BTreeMap<ServerId, GroupSpec>> {
        self.groups.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl GroupRepository for InMemoryGroupRepository {
    async fn save(&self, spec: &GroupSpec) -> Result<(), RepositoryError> {
        self.groups().insert(spec.id.clone(), spec.clone());
        Ok(())
    }
    async fn delete(&self, id: &ServerId) -> Result<(), RepositoryError> {
        self.groups().remove(id);
        Ok(())
    }
    async fn load_all(&self) -> Result<Vec<GroupSpec>, RepositoryError> {
        Ok(self.groups().values().cloned().collect())
    }
}

fn id(raw: &str) -> ServerId {
    ServerId::parse(raw).unwrap_or_else(|error| panic!("test id `{raw}` is invalid: {error}"))
}

/// A group with every field set to something other than its default, so that a store that
/// drops or defaults a field fails the comparison.
pub fn sample_group(raw: &str) -> GroupSpec {
    GroupSpec {
        id: id(raw),
        description: Some(format!("the {raw} pool, with \"quotes\" and ünïcödé")),
        strategy: GroupStrategy::WeightedRoundRobin,
        min_healthy: 2,
        members: vec![
            MemberSpec::new(id("zeta")).with_weight(3).with_priority(2),
            MemberSpec::new(id("alpha")).with_weight(1).with_priority(9),
            MemberSpec::new(id("mid")).with_weight(u32::MAX),
        ],
    }
}

// ----- the cases ----------------------------------------------------------------------------

pub async fn load_all_on_an_empty_repository_is_empty(repository: &dyn GroupRepository) {
    assert_eq!(repository.load_all().await.unwrap(), []);
}

pub async fn save_then_load_all_returns_an_equal_spec(repository: &dyn GroupRepository) {
    let spec = sample_group("pool");
    repository.save(&spec).await.unwrap();
    // Member order is the round-robin order: it must come back as saved, not sorted.
    assert_eq!(repository.load_all().await.unwrap(), [spec]);
}

pub async fn saving_twice_is_an_upsert(repository: &dyn GroupRepository) {
    repository.save(&sample_group("pool")).await.unwrap();
    let changed = GroupSpec {
        description: None,
        strategy: GroupStrategy::Priority,
        min_healthy: 1,
        members: vec![MemberSpec::new(id("only"))],
        ..sample_group("pool")
    };
    repository.save(&changed).await.unwrap();
    assert_eq!(repository.load_all().await.unwrap(), [changed]);
}

pub async fn delete_removes_the_group(repository: &dyn GroupRepository) {
    repository.save(&sample_group("gone")).await.unwrap();
    repository.save(&sample_group("kept")).await.unwrap();
    repository.delete(&id("gone")).await.unwrap();
    assert_eq!(repository.load_all().await.unwrap(), [sample_group("kept")]);
}

pub async fn deleting_an_unknown_id_is_ok(repository: &dyn GroupRepository) {
    repository.delete(&id("never-saved")).await.unwrap();
    repository.save(&sample_group("pool")).await.unwrap();
    repository.delete(&id("never-saved")).await.unwrap();
    assert_eq!(repository.load_all().await.unwrap().len(), 1);
}

pub async fn load_all_answers_in_id_order(repository: &dyn GroupRepository) {
    for raw in ["m", "b", "z", "a", "k"] {
        repository.save(&sample_group(raw)).await.unwrap();
    }
    let ids: Vec<String> = repository
        .load_all()
        .await
        .unwrap()
        .into_iter()
        .map(|spec| spec.id.to_string())
        .collect();
    assert_eq!(ids, ["a", "b", "k", "m", "z"]);
}

pub async fn a_group_without_members_round_trips(repository: &dyn GroupRepository) {
    // A group created over the API starts empty and may already ask for several members.
    let empty = GroupSpec {
        members: Vec::new(),
        min_healthy: 3,
        ..sample_group("empty")
    };
    repository.save(&empty).await.unwrap();
    assert_eq!(repository.load_all().await.unwrap(), [empty]);
}

pub async fn every_strategy_round_trips(repository: &dyn GroupRepository) {
    for strategy in GroupStrategy::ALL {
        let spec = GroupSpec {
            id: id(strategy.as_str()),
            strategy,
            ..sample_group("x")
        };
        repository.save(&spec).await.unwrap();
    }
    let loaded = repository.load_all().await.unwrap();
    let mut strategies: Vec<GroupStrategy> = loaded.iter().map(|spec| spec.strategy).collect();
    strategies.sort_by_key(|strategy| strategy.as_str());
    let mut expected = GroupStrategy::ALL.to_vec();
    expected.sort_by_key(|strategy| strategy.as_str());
    assert_eq!(strategies, expected);
    for spec in loaded {
        assert_eq!(spec.id.as_str(), spec.strategy.as_str());
    }
}

#[cfg(test)]
mod in_memory {
    crate::group_repository_contract_suite!(super::InMemoryGroupRepository::default());
}
