//! The SQLite event log as an observer of the event bus, against the testkit's `EventObserver`
//! suite: events of every type, from any thread, on a real file in a temporary directory.

use std::sync::Arc;

use mcpgw_store_sqlite::SqliteEventLog;
use mcpgw_testkit::repository_suite::RepositoryWithGuard;
use tempfile::TempDir;

fn open_temporary_log() -> Arc<RepositoryWithGuard<SqliteEventLog, TempDir>> {
    let directory = tempfile::tempdir().unwrap();
    let log = SqliteEventLog::open(&directory.path().join("events.db")).unwrap();
    Arc::new(RepositoryWithGuard::new(log, directory))
}

mcpgw_testkit::event_observer_contract_suite!(open_temporary_log());
