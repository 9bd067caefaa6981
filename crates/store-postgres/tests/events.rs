//! The PostgreSQL event log against the `EventLog`, `InvocationHistory` and `EventObserver`
//! contracts (the test kit's suites, each case on a fresh database of one throwaway server),
//! plus what only a log shared by several replicas can get wrong: two replicas writing one
//! stream, two compactions at once, the notification of each committed batch, and rows changed
//! behind the log's back.

use std::time::{Duration, Instant};

use mcpgw_core::{
    CompactionReport, EventLog, EventLogError, EventObserver, EventRetention, InvocationHistory,
    PublishedEvent, ServerId,
};
use mcpgw_store_postgres::{
    CHANNEL, PostgresEventLog, PostgresSettings, PostgresStore, StoreError, StoredEvent,
};
use mcpgw_testkit::event_log::{sample_completed, sample_stream, sample_time};
use mcpgw_testkit::postgres::TempPostgres;
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, NoTls, Notification};

/// A fresh database on the shared server: its URL and its name (for `psql`).
fn fresh_database() -> (String, String) {
    let url = TempPostgres::shared().fresh_database();
    let name = url.rsplit('/').next().expect("a database name").to_owned();
    (url, name)
}

async fn connect(url: &str) -> PostgresStore {
    PostgresStore::connect(PostgresSettings::new(url))
        .await
        .expect("connect to the test database")
}

async fn fresh_log() -> PostgresEventLog {
    let (url, _) = fresh_database();
    PostgresEventLog::open(&connect(&url).await, "replica-a")
        .await
        .expect("open the event log")
}

mod contract {
    mcpgw_testkit::event_log_contract_suite!(super::fresh_log().await);
}

mod history_contract {
    mcpgw_testkit::invocation_history_contract_suite!(super::fresh_log().await);
}

mod observer_contract {
    mcpgw_testkit::event_observer_contract_suite!(std::sync::Arc::new(super::fresh_log().await));
}

fn math() -> ServerId {
    ServerId::parse("math").unwrap()
}

fn psql(database: &str, sql: &str) -> String {
    TempPostgres::shared().psql(database, sql).trim().to_owned()
}

/// A connection of its own, outside any log, for holding locks behind the log's back.
async fn raw_client(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// A connection listening on the replicas' channel, and the notifications it hears.
async fn listener(
    url: &str,
) -> (
    tokio_postgres::Client,
    mpsc::UnboundedReceiver<Notification>,
) {
    let (client, mut connection) = tokio_postgres::connect(url, NoTls).await.unwrap();
    let (heard, notifications) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(message) =
            std::future::poll_fn(|context| connection.poll_message(context)).await
        {
            match message {
                Ok(AsyncMessage::Notification(notification)) => {
                    if heard.send(notification).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(_) => return,
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN {CHANNEL}"))
        .await
        .unwrap();
    (client, notifications)
}

fn observe_all(log: &PostgresEventLog, events: &[PublishedEvent]) {
    for event in events {
        log.observe(event);
    }
}

/// The whole stream, read in pages of `limit`.
async fn whole_stream(log: &PostgresEventLog, limit: usize) -> Vec<StoredEvent> {
    let mut stream = Vec::new();
    let mut after = 0;
    loop {
        let page = log.events_after(after, limit).await.unwrap();
        assert!(page.len() <= limit, "a page beyond its limit");
        match page.last() {
            Some(last) => after = last.position,
            None => return stream,
        }
        stream.extend(page);
    }
}

fn ids_of(stream: &[StoredEvent], replica: &str) -> Vec<u64> {
    stream
        .iter()
        .filter(|stored| stored.replica == replica)
        .map(|stored| stored.event_id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_write_one_stream_in_position_order() {
    let (url, _) = fresh_database();
    let first = PostgresEventLog::open(&connect(&url).await, "replica-a")
        .await
        .unwrap();
    let second = PostgresEventLog::open(&connect(&url).await, "replica-b")
        .await
        .unwrap();
    assert_eq!(
        (first.replica(), second.replica()),
        ("replica-a", "replica-b")
    );
    // Each replica numbers its own events; both write at once, in several batches each.
    let from_first = sample_stream(1, 60);
    let from_second = sample_stream(1_001, 45);
    for round in 0..15 {
        observe_all(&first, &from_first[round * 4..round * 4 + 4]);
        observe_all(&second, &from_second[round * 3..round * 3 + 3]);
        if round % 4 == 0 {
            let (one, other) = tokio::join!(first.flush(), second.flush());
            one.unwrap();
            other.unwrap();
        }
    }
    first.flush().await.unwrap();
    second.flush().await.unwrap();

    let stream = first.events_after(0, 1_000).await.unwrap();
    assert_eq!(stream.len(), 105);
    assert!(
        stream
            .windows(2)
            .all(|pair| pair[0].position < pair[1].position),
        "positions increase"
    );
    // Every event once, in the order its replica observed it, with that replica's name.
    let expected_first: Vec<u64> = from_first.iter().map(|event| event.event_id).collect();
    let expected_second: Vec<u64> = from_second.iter().map(|event| event.event_id).collect();
    assert_eq!(ids_of(&stream, "replica-a"), expected_first);
    assert_eq!(ids_of(&stream, "replica-b"), expected_second);
    for stored in &stream {
        let original = if stored.replica == "replica-a" {
            &from_first[stored.event_id as usize - 1]
        } else {
            &from_second[stored.event_id as usize - 1_001]
        };
        assert_eq!(stored.occurred_at, original.occurred_at);
        assert_eq!(stored.event_type, original.event.event_type());
        assert_eq!(
            stored.mcp_server_id.as_ref(),
            original.event.mcp_server_id()
        );
        assert_eq!(stored.group_id, None);
        let payload: serde_json::Value = serde_json::from_str(&stored.payload).unwrap();
        assert_eq!(payload, serde_json::to_value(original).unwrap());
    }
    // Both replicas read the same stream, in any page size.
    assert_eq!(whole_stream(&second, 7).await, stream);
    assert_eq!(whole_stream(&first, 1).await, stream);

    let last = stream.last().unwrap().position;
    assert_eq!(first.last_position().await.unwrap(), last);
    assert_eq!(second.last_position().await.unwrap(), last);
    assert!(second.events_after(last, 10).await.unwrap().is_empty());
    // The largest id of any replica, whichever replica asks.
    assert_eq!(first.last_event_id().await.unwrap(), 1_045);
    assert_eq!(second.last_event_id().await.unwrap(), 1_045);
    let stats = second.stats().await.unwrap();
    assert_eq!(
        (stats.events, stats.oldest_event_id, stats.newest_event_id),
        (105, Some(1), Some(1_045))
    );

    // What comes next is read after the last position, from either replica.
    second.observe(&sample_completed(1_046, "math", 1_046));
    second.flush().await.unwrap();
    let next = first.events_after(last, 10).await.unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(
        (next[0].replica.as_str(), next[0].event_id),
        ("replica-b", 1_046)
    );
    assert!(next[0].position > last);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_compactions_at_once_remove_exactly_what_retention_says() {
    let (url, _) = fresh_database();
    let first = PostgresEventLog::open(&connect(&url).await, "replica-a")
        .await
        .unwrap();
    let second = PostgresEventLog::open(&connect(&url).await, "replica-b")
        .await
        .unwrap();
    // Event `i` happened at second `i`: the first replica's at seconds 1 to 60, the second's
    // at 101 to 140, written after them.
    observe_all(&first, &sample_stream(1, 60));
    first.flush().await.unwrap();
    observe_all(&second, &sample_stream(101, 40));
    second.flush().await.unwrap();
    // At second 140 the age bound keeps seconds 90 and later (the second replica's 40), the
    // count bound the newest 30 of those.
    let retention = EventRetention {
        max_age: Some(Duration::from_secs(50)),
        max_events: Some(30),
    };
    let (one, other) = tokio::join!(
        first.compact(retention, sample_time(140)),
        second.compact(retention, sample_time(140))
    );
    let (one, other) = (one.unwrap(), other.unwrap());
    let mut removed = [one.removed, other.removed];
    removed.sort_unstable();
    // They took turns: one removed everything retention drops, the other found nothing left.
    assert_eq!(removed, [0, 70]);
    assert_eq!((one.remaining, other.remaining), (30, 30));
    let stream = first.events_after(0, 1_000).await.unwrap();
    assert_eq!(
        ids_of(&stream, "replica-b"),
        (111..=140).collect::<Vec<_>>()
    );
    assert_eq!(stream.len(), 30);
    assert_eq!(first.last_event_id().await.unwrap(), 140);

    // Again, with new events of both and many compactions at once.
    observe_all(&first, &sample_stream(61, 20));
    observe_all(&second, &sample_stream(141, 20));
    first.flush().await.unwrap();
    second.flush().await.unwrap();
    let keep_ten = EventRetention {
        max_age: None,
        max_events: Some(10),
    };
    let (one, two, three, four) = tokio::join!(
        first.compact(keep_ten, sample_time(0)),
        second.compact(keep_ten, sample_time(0)),
        first.compact(keep_ten, sample_time(0)),
        second.compact(keep_ten, sample_time(0)),
    );
    let reports = [one.unwrap(), two.unwrap(), three.unwrap(), four.unwrap()];
    let total: u64 = reports.iter().map(|report| report.removed).sum();
    assert_eq!(total, 60);
    assert!(
        reports.iter().all(|report| report.remaining == 10),
        "{reports:?}"
    );
    let newest = whole_stream(&second, 100).await;
    assert_eq!(newest.len(), 10);
    assert_eq!(
        ids_of(&newest, "replica-b"),
        (151..=160).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_announced_once_committed_and_a_refused_one_never() {
    let (url, database) = fresh_database();
    let log = PostgresEventLog::open(&connect(&url).await, "replica-a")
        .await
        .unwrap();
    let (_listening, mut notifications) = listener(&url).await;
    // Bad input: the database refuses event 5 at commit, after the batch's statements (its
    // notification included) have run inside the transaction.
    psql(
        &database,
        "CREATE FUNCTION refuse_five() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN RAISE EXCEPTION 'event 5 is refused at commit'; END $$;
         CREATE CONSTRAINT TRIGGER refuse_five AFTER INSERT ON events
             DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.event_id = 5)
             EXECUTE FUNCTION refuse_five();",
    );
    log.observe(&sample_completed(5, "math", 5));
    log.flush().await.unwrap();
    assert_eq!(log.stats().await.unwrap().dropped, 1);
    assert_eq!(psql(&database, "SELECT count(*) FROM events"), "0");

    log.observe(&sample_completed(6, "math", 6));
    log.flush().await.unwrap();
    let heard = tokio::time::timeout(Duration::from_secs(10), notifications.recv())
        .await
        .expect("a notification within 10 s")
        .expect("the listener runs");
    assert_eq!(heard.channel(), CHANNEL);
    assert_eq!(
        mcpgw_store_postgres::parse_payload(heard.payload()).map(|(topic, _)| topic),
        Some(mcpgw_store_postgres::Topic::Events),
        "{}",
        heard.payload()
    );
    // The rows of the announced batch are there to read.
    let stream = log.events_after(0, 10).await.unwrap();
    assert_eq!(
        stream
            .iter()
            .map(|stored| stored.event_id)
            .collect::<Vec<_>>(),
        [6]
    );
    // Notifications arrive in commit order: had the refused batch announced itself, its
    // notification would have come first.
    assert!(
        notifications.try_recv().is_err(),
        "a second notification came"
    );
    assert_eq!(log.stats().await.unwrap().dropped, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_changed_behind_the_logs_back_are_skipped_by_the_stream_and_reported_by_the_history() {
    let (url, database) = fresh_database();
    let log = PostgresEventLog::open(&connect(&url).await, "replica-a")
        .await
        .unwrap();
    observe_all(&log, &sample_stream(1, 12));
    log.flush().await.unwrap();
    let before = log.events_after(0, 100).await.unwrap();
    let position_of = |event_id: u64| {
        before
            .iter()
            .find(|stored| stored.event_id == event_id)
            .unwrap()
            .position
    };
    // Bad input: an invocation whose payload lost its fields (event 3), a server id no server
    // can have (event 4), an empty group id (event 5).
    psql(
        &database,
        "UPDATE events SET payload = '{\"tool\": 1}' WHERE event_id = 3;
         UPDATE events SET mcp_server_id = 'not a server id!' WHERE event_id = 4;
         UPDATE events SET group_id = '' WHERE event_id = 5;",
    );

    let stream = log.events_after(0, 100).await.unwrap();
    assert_eq!(
        stream
            .iter()
            .map(|stored| stored.event_id)
            .collect::<Vec<_>>(),
        [1, 2, 3, 6, 7, 8, 9, 10, 11, 12]
    );
    // The stream hands on the payload as stored, without reading it.
    assert_eq!(stream[2].payload, "{\"tool\": 1}");
    // A page that starts at unreadable rows reads on past them instead of coming back empty.
    let page = log.events_after(position_of(3), 1).await.unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0].event_id, 6);
    let page = log.events_after(position_of(3), 2).await.unwrap();
    assert_eq!(
        page.iter()
            .map(|stored| stored.event_id)
            .collect::<Vec<_>>(),
        [6, 7]
    );
    // Nothing readable after them: an empty answer, not an error.
    psql(
        &database,
        "UPDATE events SET mcp_server_id = 'bad id!' WHERE event_id > 6",
    );
    assert!(
        log.events_after(position_of(6), 5)
            .await
            .unwrap()
            .is_empty()
    );

    // The history cannot answer a page holding event 3 and says which row is wrong.
    let error = log.page(&math(), 100, None).await.unwrap_err();
    assert!(
        error.0.contains("event 3") && error.0.contains("`tool` is missing or not a string"),
        "{error}"
    );
    // Pages that do not reach it still answer.
    let page = log.page(&math(), 100, Some(3)).await.unwrap();
    assert_eq!(
        page.entries
            .iter()
            .map(|record| record.event_id)
            .collect::<Vec<_>>(),
        [1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_replica_names_are_refused_when_the_log_opens() {
    let (url, _) = fresh_database();
    let store = connect(&url).await;
    // Bad input: an empty name, and one with a NUL character, which PostgreSQL text cannot hold.
    for bad in ["", "replica\0a"] {
        let error = PostgresEventLog::open(&store, bad)
            .await
            .expect_err("a bad replica name");
        let mut message = error.to_string();
        let mut cause = std::error::Error::source(&error);
        while let Some(current) = cause {
            message.push_str(&format!(" / {current}"));
            cause = current.source();
        }
        assert!(matches!(error, StoreError::Postgres { .. }), "{message}");
        assert!(message.contains("replica name"), "{message}");
    }
    let log = PostgresEventLog::open(&store, "replica-a").await.unwrap();
    assert_eq!(log.replica(), "replica-a");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_the_database_refuses_removes_nothing() {
    let (url, database) = fresh_database();
    let log = PostgresEventLog::open(&connect(&url).await, "replica-a")
        .await
        .unwrap();
    observe_all(&log, &sample_stream(1, 12));
    log.flush().await.unwrap();
    let history_before = log.page(&math(), 100, None).await.unwrap();
    // The age bound removes events 1 to 3 first; the count bound then reaches event 8, which
    // the database refuses to delete: the first deletions must be undone too.
    psql(
        &database,
        "CREATE FUNCTION protect_eight() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN RAISE EXCEPTION 'event 8 is protected'; END $$;
         CREATE TRIGGER protect_eight BEFORE DELETE ON events
             FOR EACH ROW WHEN (OLD.event_id = 8) EXECUTE FUNCTION protect_eight();",
    );
    let retention = EventRetention {
        max_age: Some(Duration::from_secs(6)),
        max_events: Some(2),
    };
    let error = log.compact(retention, sample_time(10)).await.unwrap_err();
    let EventLogError::Compaction(message) = &error else {
        panic!("not a compaction error: {error:?}");
    };
    assert!(message.contains("event 8 is protected"), "{message}");
    let stats = log.stats().await.unwrap();
    assert_eq!(
        (stats.events, stats.oldest_event_id, stats.newest_event_id),
        (12, Some(1), Some(12))
    );
    assert_eq!(log.page(&math(), 100, None).await.unwrap(), history_before);

    psql(&database, "DROP TRIGGER protect_eight ON events");
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
    let (url, _) = fresh_database();
    let patience = Duration::from_millis(20);
    let log = PostgresEventLog::open_with_queue(&connect(&url).await, "replica-a", 4, patience)
        .await
        .unwrap();
    // Another connection locks the table, so the writer waits on its first batch (once it has
    // gathered it) and the queue fills up.
    let mut blocker = raw_client(&url).await;
    let blocking = blocker.transaction().await.unwrap();
    blocking
        .batch_execute("LOCK TABLE events IN EXCLUSIVE MODE")
        .await
        .unwrap();

    let events = sample_stream(1, 100);
    log.observe(&events[0]);
    // Longer than the writer gathers a batch: it is now stuck writing event 1.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let mut longest = Duration::ZERO;
    for event in &events[1..] {
        let observed = Instant::now();
        log.observe(event);
        longest = longest.max(observed.elapsed());
    }
    let took = started.elapsed();
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

    blocking.rollback().await.unwrap();
    log.flush().await.unwrap();
    let stats = log.stats().await.unwrap();
    assert_eq!(stats.dropped, dropped_while_blocked);
    assert_eq!(stats.events + stats.dropped, 100);
    assert_eq!(stats.oldest_event_id, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_postgresql_cannot_store_drops_that_event_alone() {
    let (url, _) = fresh_database();
    let log = PostgresEventLog::open(&connect(&url).await, "replica-a")
        .await
        .unwrap();
    // Bad input: an id beyond PostgreSQL's largest integer, between two good events of the
    // same batch.
    log.observe(&sample_completed(1, "math", 1));
    log.observe(&sample_completed(u64::MAX, "math", 2));
    log.observe(&sample_completed(2, "math", 3));
    log.flush().await.unwrap();
    let stats = log.stats().await.unwrap();
    assert_eq!((stats.events, stats.dropped), (2, 1));
    assert_eq!(log.last_event_id().await.unwrap(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_writes_everything_and_later_events_are_counted_as_dropped() {
    let (url, _) = fresh_database();
    let store = connect(&url).await;
    let log = PostgresEventLog::open(&store, "replica-a").await.unwrap();
    observe_all(&log, &sample_stream(1, 500));
    log.close().await.unwrap();
    log.close().await.unwrap();
    log.observe(&sample_completed(501, "math", 501));
    let stats = log.stats().await.unwrap();
    assert_eq!((stats.events, stats.dropped), (500, 1));
    // Reads and flushes still answer after the close.
    log.flush().await.unwrap();
    assert_eq!(log.last_event_id().await.unwrap(), 500);

    // A dropped log's writer finishes on its own; a new log of the replica continues.
    let reopened = PostgresEventLog::open(&store, "replica-a").await.unwrap();
    observe_all(&reopened, &sample_stream(501, 10));
    drop(reopened);
    let deadline = Instant::now() + Duration::from_secs(10);
    let again = PostgresEventLog::open(&store, "replica-a").await.unwrap();
    while again.stats().await.unwrap().events < 510 {
        assert!(
            Instant::now() < deadline,
            "the dropped log's events never came"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(again.last_event_id().await.unwrap(), 510);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stored_row_is_the_event_as_the_event_stream_shows_it() {
    let (url, database) = fresh_database();
    let log = PostgresEventLog::open(&connect(&url).await, "replica-a")
        .await
        .unwrap();
    log.observe(&sample_completed(4, "math", 2));
    log.flush().await.unwrap();
    let row = psql(
        &database,
        "SELECT replica || '|' || event_type || '|' || mcp_server_id || '|' || occurred_at
         FROM events WHERE event_id = 4",
    );
    assert_eq!(
        row,
        format!(
            "replica-a|ToolInvocationCompleted|math|{}",
            sample_time(2).unix_micros()
        )
    );
    let payload: serde_json::Value = serde_json::from_str(&psql(
        &database,
        "SELECT payload FROM events WHERE event_id = 4",
    ))
    .unwrap();
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
    // The high-water marks moved with the batch.
    let stored = log.events_after(0, 1).await.unwrap();
    assert_eq!(
        psql(
            &database,
            "SELECT last_event_id || ',' || last_position FROM event_log_state"
        ),
        format!("4,{}", stored[0].position)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_event_id_and_position_survive_compaction_and_a_lost_state_row() {
    let (url, database) = fresh_database();
    let log = PostgresEventLog::open(&connect(&url).await, "replica-a")
        .await
        .unwrap();
    observe_all(&log, &sample_stream(10, 20));
    log.flush().await.unwrap();
    let last = log.last_position().await.unwrap();
    let everything = EventRetention {
        max_age: None,
        max_events: Some(0),
    };
    assert_eq!(
        log.compact(everything, sample_time(0))
            .await
            .unwrap()
            .removed,
        20
    );
    assert_eq!(log.last_event_id().await.unwrap(), 29);
    assert_eq!(log.last_position().await.unwrap(), last);
    // Bad input: the row holding the high-water marks is deleted. The log answers from what
    // the table holds, and the next batch writes the row again.
    observe_all(&log, &sample_stream(30, 2));
    log.flush().await.unwrap();
    psql(&database, "DELETE FROM event_log_state");
    assert_eq!(log.last_event_id().await.unwrap(), 31);
    assert_eq!(log.last_position().await.unwrap(), last + 2);
    log.observe(&sample_completed(32, "math", 32));
    log.flush().await.unwrap();
    assert_eq!(
        psql(&database, "SELECT last_event_id FROM event_log_state"),
        "32"
    );
}
