//! The SQLite event log against the `EventLog` contract (the test kit's suite, on a real file
//! in a temporary directory), plus what only a file can get wrong: events and the last id
//! surviving a close and reopen, a compaction that the database refuses halfway, a write queue
//! that stays full, and the stored payload's shape.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mcpgw_core::{
    CompactionReport, EventLog, EventLogError, EventObserver, EventRetention, InvocationHistory,
    InvocationRecord, ServerId,
};
use mcpgw_store_sqlite::{SqliteEventLog, StoreError};
use mcpgw_testkit::event_log::{sample_completed, sample_stream, sample_time};
use mcpgw_testkit::repository_suite::RepositoryWithGuard;
use rusqlite::Connection;
use tempfile::TempDir;

fn log_path(directory: &TempDir) -> PathBuf {
    directory.path().join("data").join("events.db")
}

fn open_temporary_log() -> RepositoryWithGuard<SqliteEventLog, TempDir> {
    let directory = tempfile::tempdir().unwrap();
    let log = SqliteEventLog::open(&log_path(&directory)).unwrap();
    RepositoryWithGuard::new(log, directory)
}

mod contract {
    mcpgw_testkit::event_log_contract_suite!(super::open_temporary_log());
}

mod history_contract {
    mcpgw_testkit::invocation_history_contract_suite!(super::open_temporary_log());
}

fn math() -> ServerId {
    ServerId::parse("math").unwrap()
}

fn raw_connection(path: &Path) -> Connection {
    let connection = Connection::open(path).unwrap();
    connection.busy_timeout(Duration::from_secs(5)).unwrap();
    connection
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_observed_before_a_drop_survive_the_reopen() {
    let directory = tempfile::tempdir().unwrap();
    let path = log_path(&directory);
    let events = sample_stream(1, 3_000);
    let before_close;
    {
        let log = SqliteEventLog::open(&path).unwrap();
        for event in &events {
            log.observe(event);
        }
        // No flush: dropping the log writes what is queued.
        before_close = tokio::task::spawn_blocking(move || drop(log));
    }
    before_close.await.unwrap();

    let reopened = SqliteEventLog::open(&path).unwrap();
    let stats = reopened.stats().await.unwrap();
    assert_eq!(stats.events, 3_000);
    assert_eq!(
        (stats.oldest_event_id, stats.newest_event_id),
        (Some(1), Some(3_000))
    );
    assert_eq!(reopened.last_event_id().await.unwrap(), 3_000);
    let newest: Vec<InvocationRecord> = events
        .iter()
        .rev()
        .filter_map(InvocationRecord::from_event)
        .filter(|record| record.mcp_server_id == math())
        .take(25)
        .collect();
    let page = reopened.page(&math(), 25, None).await.unwrap();
    assert_eq!(page.entries, newest);
    assert_eq!(
        page.next_cursor,
        newest.last().map(|record| record.event_id)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_writes_everything_and_later_events_are_counted_as_dropped() {
    let directory = tempfile::tempdir().unwrap();
    let path = log_path(&directory);
    let log = SqliteEventLog::open(&path).unwrap();
    for event in sample_stream(1, 500) {
        log.observe(&event);
    }
    log.close().await.unwrap();
    log.close().await.unwrap();
    log.observe(&sample_completed(501, "math", 501));
    let stats = log.stats().await.unwrap();
    assert_eq!((stats.events, stats.dropped), (500, 1));
    // Reads and flushes still answer after the close.
    log.flush().await.unwrap();
    assert_eq!(log.last_event_id().await.unwrap(), 500);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_event_id_survives_compacting_everything_and_reopening() {
    let directory = tempfile::tempdir().unwrap();
    let path = log_path(&directory);
    {
        let log = SqliteEventLog::open(&path).unwrap();
        for event in sample_stream(10, 20) {
            log.observe(&event);
        }
        let report = log
            .compact(
                EventRetention {
                    max_age: Some(Duration::from_secs(1)),
                    max_events: None,
                },
                sample_time(1_000),
            )
            .await
            .unwrap();
        assert_eq!(
            report,
            CompactionReport {
                removed: 20,
                remaining: 0
            }
        );
        log.close().await.unwrap();
    }
    let reopened = SqliteEventLog::open(&path).unwrap();
    assert_eq!(reopened.last_event_id().await.unwrap(), 29);
    assert_eq!(reopened.stats().await.unwrap().events, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_the_database_refuses_removes_nothing() {
    let directory = tempfile::tempdir().unwrap();
    let path = log_path(&directory);
    let log = SqliteEventLog::open(&path).unwrap();
    for event in sample_stream(1, 12) {
        log.observe(&event);
    }
    log.flush().await.unwrap();
    let history_before = log.page(&math(), 100, None).await.unwrap();
    // The age bound removes events 1 to 3 first; the count bound then reaches event 8, which
    // the database refuses to delete: the first deletions must be undone too.
    raw_connection(&path)
        .execute_batch(
            "CREATE TRIGGER refuse_eight BEFORE DELETE ON events WHEN OLD.event_id = 8
             BEGIN SELECT RAISE(ABORT, 'event 8 is protected'); END;",
        )
        .unwrap();
    let retention = EventRetention {
        max_age: Some(Duration::from_secs(6)),
        max_events: Some(2),
    };
    let error = log.compact(retention, sample_time(10)).await.unwrap_err();
    assert!(
        matches!(&error, EventLogError::Compaction(message) if message.contains("event 8 is protected")),
        "{error:?}"
    );
    assert_eq!(error.name(), "CompactionError");
    let stats = log.stats().await.unwrap();
    assert_eq!(
        (stats.events, stats.oldest_event_id, stats.newest_event_id),
        (12, Some(1), Some(12))
    );
    assert_eq!(log.page(&math(), 100, None).await.unwrap(), history_before);

    // Once the database allows it, the same compaction applies both bounds.
    raw_connection(&path)
        .execute_batch("DROP TRIGGER refuse_eight;")
        .unwrap();
    let report = log.compact(retention, sample_time(10)).await.unwrap();
    assert_eq!(
        report,
        CompactionReport {
            removed: 10,
            remaining: 2
        }
    );
    assert_eq!(log.last_event_id().await.unwrap(), 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_that_stays_full_drops_and_counts_instead_of_hanging() {
    let directory = tempfile::tempdir().unwrap();
    let path = log_path(&directory);
    let patience = Duration::from_millis(20);
    let log = SqliteEventLog::open_with_queue(&path, 4, patience).unwrap();
    // Another connection holds the write lock, so the writer thread waits on its first batch
    // (once it has gathered it) and the queue fills up.
    let blocker = raw_connection(&path);
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();

    let events = sample_stream(1, 100);
    log.observe(&events[0]);
    // Longer than the writer gathers a batch: it is now stuck committing event 1.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let mut longest = Duration::ZERO;
    for event in &events[1..] {
        let observed = Instant::now();
        log.observe(event);
        longest = longest.max(observed.elapsed());
    }
    let took = started.elapsed();
    // Well within the writer's busy timeout: nothing waited for the database.
    assert!(took < Duration::from_secs(4), "observing took {took:?}");
    assert!(
        longest >= patience,
        "no observe waited for room: {longest:?}"
    );
    assert!(
        longest < patience * 50,
        "an observe waited {longest:?}, far beyond its patience"
    );
    let dropped_while_blocked = log.stats().await.unwrap().dropped;
    assert!(dropped_while_blocked > 0);

    blocker.execute_batch("ROLLBACK").unwrap();
    log.flush().await.unwrap();
    let stats = log.stats().await.unwrap();
    assert_eq!(stats.dropped, dropped_while_blocked);
    assert_eq!(stats.events + stats.dropped, 100);
    assert_eq!(stats.oldest_event_id, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_the_database_refuses_midway_is_dropped_whole_and_the_next_one_is_written() {
    let directory = tempfile::tempdir().unwrap();
    let path = log_path(&directory);
    let log = SqliteEventLog::open(&path).unwrap();
    // Bad input: the database refuses one event (event 5) in the middle of a batch, after
    // the events before it were already written into the batch's transaction.
    let refuser = raw_connection(&path);
    refuser
        .execute_batch(
            "CREATE TRIGGER refuse_five BEFORE INSERT ON events WHEN NEW.event_id = 5
             BEGIN SELECT RAISE(ABORT, 'refused for the test'); END;",
        )
        .unwrap();
    let events = sample_stream(1, 10);
    for event in &events {
        log.observe(event);
    }
    log.flush().await.unwrap();
    let stats = log.stats().await.unwrap();
    let stored = stored_ids(&refuser);
    assert!(!stored.contains(&5), "{stored:?}");
    assert!(stats.dropped >= 1, "the refused batch was not counted");
    assert_eq!(
        stored.len() as u64 + stats.dropped,
        10,
        "every event was either stored or counted as dropped: {stored:?}, {} dropped",
        stats.dropped
    );
    // Whatever shared event 5's batch went with it: the events that were stored are the ones
    // of other batches, each batch a run of consecutive ids, so they are all before or all
    // after the dropped ones.
    let dropped_run = (1..=10)
        .filter(|id| !stored.contains(id))
        .collect::<Vec<_>>();
    assert!(
        dropped_run.windows(2).all(|pair| pair[1] == pair[0] + 1),
        "a batch is dropped whole, not in parts: {dropped_run:?}"
    );

    refuser.execute_batch("DROP TRIGGER refuse_five").unwrap();
    let later = sample_stream(11, 3);
    for event in &later {
        log.observe(event);
    }
    log.flush().await.unwrap();
    let stored = stored_ids(&refuser);
    assert!(
        [11, 12, 13].iter().all(|id| stored.contains(id)),
        "the writer went on after the refused batch: {stored:?}"
    );
    assert_eq!(log.stats().await.unwrap().dropped, stats.dropped);
}

fn stored_ids(connection: &Connection) -> Vec<i64> {
    let mut statement = connection
        .prepare("SELECT event_id FROM events ORDER BY event_id")
        .unwrap();
    statement
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stored_payload_is_the_event_as_the_event_stream_shows_it() {
    let directory = tempfile::tempdir().unwrap();
    let path = log_path(&directory);
    let log = SqliteEventLog::open(&path).unwrap();
    log.observe(&sample_completed(4, "math", 2));
    log.flush().await.unwrap();
    let (event_type, server, occurred_at, payload): (String, Option<String>, i64, String) =
        raw_connection(&path)
            .query_row(
                "SELECT event_type, mcp_server_id, occurred_at, payload FROM events
                 WHERE event_id = 4",
                [],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
            )
            .unwrap();
    assert_eq!(event_type, "ToolInvocationCompleted");
    assert_eq!(server.as_deref(), Some("math"));
    assert_eq!(occurred_at, sample_time(2).unix_micros());
    let payload: serde_json::Value = serde_json::from_str(&payload).unwrap();
    assert_eq!(
        payload,
        serde_json::json!({
            "event_type": "ToolInvocationCompleted",
            "mcp_server_id": "math",
            "tool": "add \"numbers\" ✓",
            "duration_ms": 0.1 + 0.2 + 4.0,
            "is_error": false,
            "principal": "user:4",
            "event_id": "4",
            "occurred_at": "2026-11-21T14:03:09.000000",
        })
    );
}

#[test]
fn a_file_that_is_not_a_database_is_refused_with_its_path() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("events.db");
    std::fs::write(&path, vec![b'x'; 4096]).unwrap();
    let error = SqliteEventLog::open(&path).unwrap_err();
    assert!(
        matches!(&error, StoreError::NotADatabase { path: reported } if reported == &path),
        "{error:?}"
    );
}
