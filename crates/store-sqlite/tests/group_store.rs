//! The SQLite store against the `GroupRepository` contract (the port's doc: `save` is an upsert,
//! deleting an unknown id is not an error, `load_all` returns every group in id order), written
//! as one function per case over `&dyn GroupRepository` so that any other implementation can
//! run the same cases; plus what only a file can get wrong: surviving a reopen, sharing the file
//! with the servers' table, rows it cannot read.

use std::sync::Arc;

use mcpgw_core::{ServerId, ServerRepository};
use mcpgw_groups::{GroupRepository, GroupSpec, GroupStrategy, MemberSpec};
use mcpgw_store_sqlite::SqliteStore;
use mcpgw_testkit::repository_suite::sample_subprocess_spec;
use tempfile::TempDir;

fn id(raw: &str) -> ServerId {
    ServerId::parse(raw).unwrap()
}

/// A group with every field set to something other than its default, so that a store that
/// drops or defaults a field fails the comparison.
fn sample_group(raw: &str) -> GroupSpec {
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

fn open_temporary_store() -> (SqliteStore, TempDir) {
    let directory = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&directory.path().join("mcpgw.sqlite3")).unwrap();
    (store, directory)
}

// ----- the contract cases -------------------------------------------------------------------

async fn load_all_on_an_empty_repository_is_empty(repository: &dyn GroupRepository) {
    assert_eq!(repository.load_all().await.unwrap(), []);
}

async fn save_then_load_all_returns_an_equal_spec(repository: &dyn GroupRepository) {
    let spec = sample_group("pool");
    repository.save(&spec).await.unwrap();
    // Member order is the round-robin order: it must come back as saved, not sorted.
    assert_eq!(repository.load_all().await.unwrap(), [spec]);
}

async fn saving_twice_is_an_upsert(repository: &dyn GroupRepository) {
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

async fn delete_removes_the_group(repository: &dyn GroupRepository) {
    repository.save(&sample_group("gone")).await.unwrap();
    repository.save(&sample_group("kept")).await.unwrap();
    repository.delete(&id("gone")).await.unwrap();
    assert_eq!(repository.load_all().await.unwrap(), [sample_group("kept")]);
}

async fn deleting_an_unknown_id_is_ok(repository: &dyn GroupRepository) {
    repository.delete(&id("never-saved")).await.unwrap();
    repository.save(&sample_group("pool")).await.unwrap();
    repository.delete(&id("never-saved")).await.unwrap();
    assert_eq!(repository.load_all().await.unwrap().len(), 1);
}

async fn load_all_answers_in_id_order(repository: &dyn GroupRepository) {
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

async fn a_group_without_members_round_trips(repository: &dyn GroupRepository) {
    // A group created over the API starts empty and may already ask for several members.
    let empty = GroupSpec {
        members: Vec::new(),
        min_healthy: 3,
        ..sample_group("empty")
    };
    repository.save(&empty).await.unwrap();
    assert_eq!(repository.load_all().await.unwrap(), [empty]);
}

async fn every_strategy_round_trips(repository: &dyn GroupRepository) {
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

macro_rules! contract_cases {
    ($($case:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                let (store, _directory) = open_temporary_store();
                super::$case(&store).await;
            }
        )*
    };
}

mod contract {
    use super::open_temporary_store;

    contract_cases!(
        load_all_on_an_empty_repository_is_empty,
        save_then_load_all_returns_an_equal_spec,
        saving_twice_is_an_upsert,
        delete_removes_the_group,
        deleting_an_unknown_id_is_ok,
        load_all_answers_in_id_order,
        a_group_without_members_round_trips,
        every_strategy_round_trips,
    );
}

// ----- what a file adds ---------------------------------------------------------------------

#[tokio::test]
async fn saved_groups_survive_closing_and_reopening_the_file() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("mcpgw.sqlite3");
    {
        let store = SqliteStore::open(&path).unwrap();
        GroupRepository::save(&store, &sample_group("pool"))
            .await
            .unwrap();
        GroupRepository::save(&store, &sample_group("gone"))
            .await
            .unwrap();
        GroupRepository::delete(&store, &id("gone")).await.unwrap();
    }
    let reopened = SqliteStore::open(&path).unwrap();
    assert_eq!(
        GroupRepository::load_all(&reopened).await.unwrap(),
        [sample_group("pool")]
    );
}

#[tokio::test]
async fn groups_and_servers_share_the_file_without_seeing_each_other() {
    let (store, _directory) = open_temporary_store();
    // The same id in both tables: the namespaces are one in the gateway, but the store keeps
    // what it is given and must not confuse the tables.
    ServerRepository::save(&store, &sample_subprocess_spec("same"))
        .await
        .unwrap();
    GroupRepository::save(&store, &sample_group("same"))
        .await
        .unwrap();
    GroupRepository::delete(&store, &id("same")).await.unwrap();
    assert_eq!(GroupRepository::load_all(&store).await.unwrap(), []);
    assert_eq!(ServerRepository::load_all(&store).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_saves_from_many_tasks_all_land() {
    let (store, _directory) = open_temporary_store();
    let store = Arc::new(store);
    let tasks: Vec<_> = (0..32)
        .map(|index| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let spec = sample_group(&format!("group-{index:02}"));
                GroupRepository::save(&*store, &spec).await.map(|()| spec)
            })
        })
        .collect();
    let mut saved = Vec::new();
    for task in tasks {
        saved.push(task.await.unwrap().unwrap());
    }
    saved.sort_by(|left, right| left.id.cmp(&right.id));
    assert_eq!(GroupRepository::load_all(&*store).await.unwrap(), saved);
}

#[tokio::test]
async fn a_row_the_store_cannot_read_fails_the_load_with_its_key() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("mcpgw.sqlite3");
    let store = SqliteStore::open(&path).unwrap();
    GroupRepository::save(&store, &sample_group("fine"))
        .await
        .unwrap();
    // Someone edited the file by hand and wrote a strategy this gateway does not know.
    let connection = rusqlite::Connection::open(&path).unwrap();
    connection
        .execute(
            "INSERT INTO groups (id, strategy, definition, created_at, updated_at)
             VALUES ('broken', 'fastest', '{\"strategy\": \"fastest\", \"min_healthy\": 1}', 'x', 'x')",
            [],
        )
        .unwrap();
    drop(connection);
    let error = GroupRepository::load_all(&store).await.unwrap_err();
    let message = error.to_string();
    assert!(message.contains("`broken`"), "{message}");
    assert!(message.contains("groups"), "{message}");
}
