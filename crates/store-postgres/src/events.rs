//! The event log on PostgreSQL: every event that any replica publishes, in one table, with
//! retention applied by compaction, the tool invocation history read back from it, and the
//! fleet-wide stream of events in the order the database committed them.
//!
//! Writing works as in the SQLite store's event log: `observe` runs inline on the publishing
//! thread, so it never touches the database. It queues the event for a background task, which
//! writes whatever has queued up in one transaction per batch. When the queue is full, `observe`
//! waits up to [`PostgresEventLog::ENQUEUE_PATIENCE`] (by default) and then drops the event and
//! counts it in [`EventLogStats::dropped`]; an event that cannot be stored at all (an id beyond
//! what PostgreSQL's integers hold) and a batch the database refuses are counted there too.
//!
//! What changes with several replicas on one table:
//!
//! - Every row names the replica that wrote it, and gets a `position` from the database. A
//!   batch takes the append lock (a transaction-level advisory lock) before it inserts, so
//!   positions are handed out and committed in one order across the fleet: a reader that has
//!   seen a position has seen every smaller one that will ever exist. [`events_after`] reads
//!   that order; each committed batch sends the [`Topic::Events`] notification from inside its
//!   transaction, so a listener hears of it only once the rows are there to read.
//! - `event_id` is the id the writing replica gave the event. Ids of different replicas may
//!   repeat: the history pages by id, as the port asks, so when two replicas' invocations of
//!   one server share an id and a page ends between them, the next page starts below that id
//!   and leaves the second one out.
//! - [`last_event_id`](EventLog::last_event_id) answers the largest id any replica wrote, kept
//!   in a high-water mark row that each batch raises and compaction never lowers.
//! - Any replica may compact. Compactions take turns: each takes the compaction lock (a
//!   transaction-level advisory lock) and waits for one running elsewhere to commit, then
//!   applies retention to what is left, so two compactions at once remove exactly what one
//!   would, and each reports what it removed itself. The count bound keeps the newest events
//!   by position, the fleet's order (for one replica, its id order).
//!
//! Dropping the log lets the background task write everything queued before it ends, as long
//! as the tokio runtime runs; [`PostgresEventLog::close`] waits for that, so a graceful stop
//! loses nothing.
//!
//! [`events_after`]: PostgresEventLog::events_after

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mcpgw_core::{
    CompactionReport, EventLog, EventLogError, EventLogStats, EventObserver, EventRetention,
    HistoryPage, InvocationHistory, InvocationRecord, PublishedEvent, RepositoryError, ServerId,
    Timestamp,
};
use tokio::sync::mpsc::error::{TryRecvError, TrySendError};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_postgres::Row;
use tokio_postgres::types::FromSql;

use crate::changes::{Topic, notify};
use crate::error::StoreError;
use crate::store::PostgresStore;

/// The advisory lock every replica's writer takes, inside the batch's transaction, before it
/// inserts ("mcpgw", the event log, 1).
const APPEND_LOCK: i64 = 0x6d63_7067_7700_0e01;

/// The advisory lock a compaction takes inside its transaction ("mcpgw", the event log, 2).
const COMPACTION_LOCK: i64 = 0x6d63_7067_7700_0e02;

/// How long the writer gathers events into one transaction after the first one arrives.
const GATHER: Duration = Duration::from_millis(20);

/// How often the writer looks at its queue while a batch is open and events keep coming.
const WRITE_TICK: Duration = Duration::from_millis(2);

/// The most events written in one transaction: bounds the statement and how long one batch
/// holds the append lock that the other replicas' writers wait for.
const MAX_BATCH: usize = 4_096;

const INVOCATION_TYPES: [&str; 2] = ["ToolInvocationCompleted", "ToolInvocationFailed"];

/// One statement writes the whole batch, in the order it was observed, and raises the
/// high-water marks (creating their row again should it have been deleted).
const APPEND: &str = "
    WITH appended AS (
        INSERT INTO events
            (replica, event_id, occurred_at, event_type, mcp_server_id, group_id, payload)
        SELECT $1::text, batch.event_id, batch.occurred_at, batch.event_type,
               batch.mcp_server_id, batch.group_id, batch.payload::json
        FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[])
             WITH ORDINALITY
             AS batch (event_id, occurred_at, event_type, mcp_server_id, group_id, payload, n)
        ORDER BY batch.n
        RETURNING position, event_id
    )
    INSERT INTO event_log_state AS state (id, last_event_id, last_position)
    SELECT 1, max(event_id), max(position) FROM appended
    ON CONFLICT (id) DO UPDATE SET
        last_event_id = GREATEST(state.last_event_id, EXCLUDED.last_event_id),
        last_position = GREATEST(state.last_position, EXCLUDED.last_position)";

const READ_AFTER: &str = "
    SELECT position, replica::text, event_id, occurred_at, event_type, mcp_server_id, group_id,
           payload::text
    FROM events
    WHERE position > $1
    ORDER BY position
    LIMIT $2";

const READ_INVOCATIONS: &str = "
    SELECT event_id, occurred_at, event_type, payload::text
    FROM events
    WHERE mcp_server_id = $1
      AND event_type IN ('ToolInvocationCompleted', 'ToolInvocationFailed')
      AND event_id < $2
    ORDER BY event_id DESC, position DESC
    LIMIT $3";

/// The high-water marks; should their row be gone, what the table still holds.
const READ_LAST_EVENT_ID: &str = "
    SELECT COALESCE((SELECT last_event_id FROM event_log_state WHERE id = 1),
                    (SELECT max(event_id) FROM events), 0)";

const READ_LAST_POSITION: &str = "
    SELECT COALESCE((SELECT last_position FROM event_log_state WHERE id = 1),
                    (SELECT max(position) FROM events), 0)";

/// One row of the shared log, as the fleet-wide stream reads it.
///
/// The event itself is the JSON text the event stream shows clients, exactly as its replica
/// wrote it, beside the fields a stream filters on: a stored event cannot be turned back into a
/// `PublishedEvent` (whose events name some of their values by static strings), and a client
/// would get this text anyway.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    /// The fleet's order of events: increasing, and committed in this order.
    pub position: i64,
    /// The replica that wrote the event.
    pub replica: String,
    /// The id the writing replica gave the event (another replica's event may have the same).
    pub event_id: u64,
    pub occurred_at: Timestamp,
    /// `ToolInvocationCompleted`, `GroupCreated`, ... (a newer release may write types this one
    /// does not know).
    pub event_type: String,
    /// The server the event concerns; for a group member's event the member.
    pub mcp_server_id: Option<ServerId>,
    /// The group the event concerns, for group events.
    pub group_id: Option<ServerId>,
    /// The event as the event stream shows it: its fields with `event_type`, plus `event_id`
    /// and `occurred_at` as strings.
    pub payload: String,
}

enum Command {
    Append(Box<PublishedEvent>),
    /// Answered once every command queued before it has been handled.
    Flush(oneshot::Sender<()>),
}

struct Shared {
    store: PostgresStore,
    replica: String,
    dropped: AtomicU64,
}

/// The PostgreSQL [`EventLog`] of one replica. See the module documentation for how writes are
/// queued and what several replicas on one table see.
///
/// Every async method must be called from inside a tokio runtime (the one the log was opened
/// in); `observe` may be called from any thread.
pub struct PostgresEventLog {
    shared: Arc<Shared>,
    /// `None` once closed.
    sender: RwLock<Option<mpsc::Sender<Command>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    patience: Duration,
}

impl std::fmt::Debug for PostgresEventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresEventLog")
            .field("target", &self.shared.store.target())
            .field("replica", &self.shared.replica)
            .field("dropped", &self.shared.dropped.load(Ordering::Relaxed))
            .finish()
    }
}

impl PostgresEventLog {
    /// Events that may wait for the writer: about a minute of a very busy gateway, a few tens
    /// of MiB at most.
    pub const DEFAULT_QUEUE_CAPACITY: usize = 65_536;

    /// How long `observe` waits for room in a full queue before it drops the event. Long
    /// enough to ride out a compaction or another replica's batch, short enough that an
    /// unreachable database cannot stall the gateway's request handling for long.
    pub const ENQUEUE_PATIENCE: Duration = Duration::from_secs(1);

    /// The event log of `replica` (the name every row it writes carries: non-empty, without
    /// NUL characters) in `store`'s database, with a queue of
    /// [`DEFAULT_QUEUE_CAPACITY`](Self::DEFAULT_QUEUE_CAPACITY) events. Starts the writer task
    /// on the current tokio runtime.
    pub async fn open(
        store: &PostgresStore,
        replica: impl Into<String>,
    ) -> Result<Self, StoreError> {
        Self::open_with_queue(
            store,
            replica,
            Self::DEFAULT_QUEUE_CAPACITY,
            Self::ENQUEUE_PATIENCE,
        )
        .await
    }

    /// Like [`open`](Self::open), with a queue of `capacity` events (at least 1), and
    /// `patience`: how long `observe` waits for room in a full queue before dropping.
    pub async fn open_with_queue(
        store: &PostgresStore,
        replica: impl Into<String>,
        capacity: usize,
        patience: Duration,
    ) -> Result<Self, StoreError> {
        let replica = replica.into();
        {
            // The database holds the rule (the column's domain), and refuses a name text cannot
            // hold: a bad name is an error here, not a refused batch later.
            let client = store.client().await?;
            client
                .query_one("SELECT $1::text::event_replica::text", &[&replica])
                .await
                .map_err(StoreError::postgres(
                    "accept the replica name (a replica needs a non-empty name without NUL \
                     characters)",
                ))?;
        }
        let shared = Arc::new(Shared {
            store: store.clone(),
            replica,
            dropped: AtomicU64::new(0),
        });
        let (sender, receiver) = mpsc::channel(capacity.max(1));
        let writer = tokio::spawn(write_until_closed(receiver, Arc::clone(&shared)));
        Ok(Self {
            shared,
            sender: RwLock::new(Some(sender)),
            writer: Mutex::new(Some(writer)),
            patience,
        })
    }

    /// The replica this log writes as.
    pub fn replica(&self) -> &str {
        &self.shared.replica
    }

    /// Writes everything queued, then stops the writer task. Events observed afterwards are
    /// dropped (and counted); reads keep working. Closing twice is harmless.
    pub async fn close(&self) -> Result<(), EventLogError> {
        drop(write_lock(&self.sender).take());
        let writer = lock(&self.writer).take();
        if let Some(writer) = writer {
            writer.await.map_err(|error| {
                EventLogError::Storage(format!(
                    "the event log's writer task stopped abnormally ({error}); check the log for \
                     why"
                ))
            })?;
        }
        Ok(())
    }

    /// The events of every replica with a position after `position`, in position order, at
    /// most `limit` of them: the fleet-wide stream. Pass the last position read to get the
    /// next ones; [`last_position`](Self::last_position) is where to start from to see only
    /// what comes next.
    ///
    /// It answers what is committed; events this replica still has queued come once written
    /// ([`EventLog::flush`] writes them). A row that cannot be read (changed behind the log's
    /// back) is skipped with a warning, and the rows after it are read in its place, so a
    /// reader never stalls on it.
    pub async fn events_after(
        &self,
        position: i64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let mut events = Vec::new();
        if limit == 0 {
            return Ok(events);
        }
        let client = self.shared.store.client().await?;
        let statement = client
            .prepare_cached(READ_AFTER)
            .await
            .map_err(StoreError::postgres("prepare the read of the event stream"))?;
        let mut after = position;
        loop {
            let wanted = limit - events.len();
            let fetch = i64::try_from(wanted).unwrap_or(i64::MAX);
            let rows = client
                .query(&statement, &[&after, &fetch])
                .await
                .map_err(StoreError::postgres("read the event stream"))?;
            for row in &rows {
                after = column(row, 0, "a row of the event stream")?;
                match stored_event(row, after) {
                    Ok(event) => events.push(event),
                    Err(error) => tracing::warn!(
                        position = after,
                        error = %full_message(&error),
                        "skipped an event log row that cannot be read"
                    ),
                }
            }
            if rows.len() < wanted || events.len() == limit {
                return Ok(events);
            }
        }
    }

    /// The largest position committed so far (0 for a new log); compaction never lowers it.
    /// Reading [`events_after`](Self::events_after) from it answers only what is committed
    /// later.
    pub async fn last_position(&self) -> Result<i64, StoreError> {
        let client = self.shared.store.client().await?;
        let row = client
            .query_one(READ_LAST_POSITION, &[])
            .await
            .map_err(StoreError::postgres(
                "read the last position of the event log",
            ))?;
        column(&row, 0, "last_position")
    }

    fn count_dropped(&self) {
        warn_dropped(&self.shared, 1, "the event log's write queue stayed full");
    }
}

/// Adds `count` to the dropped events, warning when the total crosses a power of two, so an
/// unreachable database is loud in the log without a line per event.
fn warn_dropped(shared: &Shared, count: u64, why: &str) {
    let before = shared.dropped.fetch_add(count, Ordering::Relaxed);
    let after = before + count;
    if before == 0 || after.ilog2() > before.ilog2() {
        tracing::warn!(
            dropped_total = after,
            replica = %shared.replica,
            why,
            "events were dropped from the event log"
        );
    }
}

impl EventObserver for PostgresEventLog {
    fn observe(&self, event: &PublishedEvent) {
        let sender = read_lock(&self.sender);
        let Some(sender) = sender.as_ref() else {
            self.count_dropped();
            return;
        };
        let mut command = Command::Append(Box::new(event.clone()));
        let deadline = Instant::now() + self.patience;
        loop {
            match sender.try_send(command) {
                Ok(()) => return,
                Err(TrySendError::Closed(_)) => {
                    self.count_dropped();
                    return;
                }
                Err(TrySendError::Full(returned)) => {
                    if Instant::now() >= deadline {
                        self.count_dropped();
                        return;
                    }
                    command = returned;
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }
}

#[async_trait]
impl EventLog for PostgresEventLog {
    async fn flush(&self) -> Result<(), EventLogError> {
        let Some(sender) = read_lock(&self.sender).clone() else {
            // Closed: the writer finished everything before it stopped.
            return Ok(());
        };
        let (done, finished) = oneshot::channel();
        if sender.send(Command::Flush(done)).await.is_err() || finished.await.is_err() {
            return Err(EventLogError::Storage(
                "the event log's writer task stopped before writing what was queued (its runtime \
                 shut down, or it failed); check the log for why"
                    .to_owned(),
            ));
        }
        Ok(())
    }

    async fn last_event_id(&self) -> Result<u64, EventLogError> {
        self.flush().await?;
        let read = async {
            let client = self.shared.store.client().await?;
            let row = client
                .query_one(READ_LAST_EVENT_ID, &[])
                .await
                .map_err(StoreError::postgres("read the last event id"))?;
            let last: i64 = column(&row, 0, "last_event_id")?;
            u64::try_from(last).map_err(|_| StoreError::CorruptRecord {
                table: "event_log_state",
                key: "last_event_id".to_owned(),
                reason: format!("the last event id is negative ({last})"),
            })
        };
        read.await.map_err(storage)
    }

    async fn compact(
        &self,
        retention: EventRetention,
        now: Timestamp,
    ) -> Result<CompactionReport, EventLogError> {
        self.flush()
            .await
            .map_err(|error| EventLogError::Compaction(error.to_string()))?;
        compact(&self.shared.store, retention, now)
            .await
            .map_err(|error| EventLogError::Compaction(full_message(&error)))
    }

    async fn stats(&self) -> Result<EventLogStats, EventLogError> {
        let dropped = self.shared.dropped.load(Ordering::Relaxed);
        let read = async {
            let client = self.shared.store.client().await?;
            let row = client
                .query_one(
                    "SELECT count(*), min(event_id), max(event_id) FROM events",
                    &[],
                )
                .await
                .map_err(StoreError::postgres("count the events"))?;
            let events: i64 = column(&row, 0, "the event count")?;
            let oldest: Option<i64> = column(&row, 1, "the oldest event id")?;
            let newest: Option<i64> = column(&row, 2, "the newest event id")?;
            Ok::<_, StoreError>(EventLogStats {
                events: u64::try_from(events).unwrap_or(0),
                oldest_event_id: oldest.and_then(|id| u64::try_from(id).ok()),
                newest_event_id: newest.and_then(|id| u64::try_from(id).ok()),
                dropped,
            })
        };
        read.await.map_err(storage)
    }
}

#[async_trait]
impl InvocationHistory for PostgresEventLog {
    async fn page(
        &self,
        server: &ServerId,
        limit: usize,
        before: Option<u64>,
    ) -> Result<HistoryPage, RepositoryError> {
        self.flush()
            .await
            .map_err(|error| RepositoryError(error.to_string()))?;
        if limit == 0 {
            return Ok(HistoryPage {
                entries: Vec::new(),
                next_cursor: None,
            });
        }
        let before = before.map_or(i64::MAX, |cursor| i64::try_from(cursor).unwrap_or(i64::MAX));
        // One row more than asked says whether an older page exists.
        let fetch = i64::try_from(limit).unwrap_or(i64::MAX).saturating_add(1);
        let mut entries = read_invocations(&self.shared.store, server, before, fetch)
            .await
            .map_err(|error| RepositoryError(full_message(&error)))?;
        let more = entries.len() > limit;
        entries.truncate(limit);
        let next_cursor = if more {
            entries.last().map(|record| record.event_id)
        } else {
            None
        };
        Ok(HistoryPage {
            entries,
            next_cursor,
        })
    }
}

fn storage(error: StoreError) -> EventLogError {
    EventLogError::Storage(full_message(&error))
}

/// An error with every cause under it. The driver's own message for a refusal by the server is
/// only "db error"; the server's reason is its cause.
fn full_message(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(current) = cause {
        let text = current.to_string();
        if !message.ends_with(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        cause = current.source();
    }
    message
}

/// Column `index` of `row`, or why it cannot be read (`what` names the row in the error).
fn column<'r, T: FromSql<'r>>(row: &'r Row, index: usize, what: &str) -> Result<T, StoreError> {
    row.try_get(index)
        .map_err(|error| StoreError::CorruptRecord {
            table: "events",
            key: what.to_owned(),
            reason: full_message(&error),
        })
}

// --- writing ---

/// The writer task: handles commands until every sender is gone and the queue is empty.
async fn write_until_closed(mut receiver: mpsc::Receiver<Command>, shared: Arc<Shared>) {
    while let Some(first) = receiver.recv().await {
        // Group commit: what arrives within `GATHER` of the first event goes into the same
        // transaction, so a busy gateway pays one round of statements and one commit per batch,
        // not per event. Events are serialized as they come, spreading that work over the
        // batch. The writer sleeps between its looks at the queue instead of waiting on it, so
        // publishers never have to wake it; a flush (a history read, a shutdown) ends the
        // gathering, so whoever waits for it waits at most one look.
        let mut batch = Batch::default();
        let mut flushes = Vec::new();
        let deadline = tokio::time::Instant::now() + GATHER;
        let mut next = Some(first);
        let mut closed = false;
        loop {
            let mut took = 0;
            while let Some(command) = next.take() {
                match command {
                    Command::Append(event) => batch.add(&event, &shared),
                    Command::Flush(done) => flushes.push(done),
                }
                took += 1;
                if batch.len() >= MAX_BATCH {
                    break;
                }
                next = poll(&mut receiver, &mut closed);
            }
            let now = tokio::time::Instant::now();
            if !flushes.is_empty()
                || batch.is_empty()
                || closed
                || batch.len() >= MAX_BATCH
                || now >= deadline
            {
                break;
            }
            // While events keep coming, look again soon; once a look found none, the rest of
            // the batch's time is slept in one go.
            let rest = deadline - now;
            tokio::time::sleep(if took > 0 { rest.min(WRITE_TICK) } else { rest }).await;
            next = poll(&mut receiver, &mut closed);
        }
        if !batch.is_empty() {
            let count = batch.len() as u64;
            if let Err(error) = append(&shared, &batch).await {
                tracing::error!(
                    error = %full_message(&error),
                    events = count,
                    replica = %shared.replica,
                    "the event log could not write a batch"
                );
                warn_dropped(&shared, count, "the database refused a batch");
            }
        }
        // Every event queued before these flushes was in this batch or an earlier one.
        for done in flushes {
            let _ = done.send(());
        }
    }
}

/// The next queued command, if one is there now.
fn poll(receiver: &mut mpsc::Receiver<Command>, closed: &mut bool) -> Option<Command> {
    match receiver.try_recv() {
        Ok(command) => Some(command),
        Err(TryRecvError::Empty) => None,
        Err(TryRecvError::Disconnected) => {
            *closed = true;
            None
        }
    }
}

/// The events of one transaction, column by column, ready to be bound as arrays.
#[derive(Default)]
struct Batch {
    event_ids: Vec<i64>,
    occurred_at: Vec<i64>,
    event_types: Vec<&'static str>,
    servers: Vec<Option<String>>,
    groups: Vec<Option<String>>,
    payloads: Vec<String>,
}

impl Batch {
    fn len(&self) -> usize {
        self.event_ids.len()
    }

    fn is_empty(&self) -> bool {
        self.event_ids.is_empty()
    }

    /// Adds `published`, or drops (and counts) it alone when it cannot be stored: one event the
    /// table cannot hold must not take its batch with it.
    fn add(&mut self, published: &PublishedEvent, shared: &Shared) {
        let Ok(event_id) = i64::try_from(published.event_id) else {
            tracing::error!(
                event_id = published.event_id,
                "an event id is beyond what PostgreSQL stores; the event is not logged"
            );
            warn_dropped(shared, 1, "an event id was out of range");
            return;
        };
        let payload = match serde_json::to_string(published) {
            Ok(payload) => payload,
            Err(error) => {
                tracing::error!(
                    event_id = published.event_id,
                    %error,
                    "an event could not be serialized; it is not logged"
                );
                warn_dropped(shared, 1, "an event could not be serialized");
                return;
            }
        };
        self.event_ids.push(event_id);
        self.occurred_at.push(published.occurred_at.unix_micros());
        self.event_types.push(published.event.event_type());
        self.servers.push(
            published
                .event
                .mcp_server_id()
                .map(|server| server.as_str().to_owned()),
        );
        self.groups.push(
            published
                .event
                .group_id()
                .map(|group| group.as_str().to_owned()),
        );
        self.payloads.push(payload);
    }
}

/// Writes `batch` in one transaction: the append lock first (so positions commit in order),
/// the rows and the high-water marks, and the notification, which goes out only if the
/// transaction commits.
async fn append(shared: &Shared, batch: &Batch) -> Result<(), StoreError> {
    let mut client = shared.store.client().await?;
    let transaction = client
        .transaction()
        .await
        .map_err(StoreError::postgres("start writing events"))?;
    let lock = transaction
        .prepare_cached("SELECT pg_advisory_xact_lock($1)")
        .await
        .map_err(StoreError::postgres("prepare the event log's append lock"))?;
    transaction
        .execute(&lock, &[&APPEND_LOCK])
        .await
        .map_err(StoreError::postgres("take the event log's append lock"))?;
    let insert = transaction
        .prepare_cached(APPEND)
        .await
        .map_err(StoreError::postgres("prepare the event insert"))?;
    transaction
        .execute(
            &insert,
            &[
                &shared.replica,
                &batch.event_ids,
                &batch.occurred_at,
                &batch.event_types,
                &batch.servers,
                &batch.groups,
                &batch.payloads,
            ],
        )
        .await
        .map_err(StoreError::postgres("write events"))?;
    notify(&*transaction, Topic::Events, &shared.store.origin).await?;
    transaction
        .commit()
        .await
        .map_err(StoreError::postgres("commit the written events"))
}

// --- compaction ---

/// Applies `retention` in one transaction, after any compaction running elsewhere has
/// committed. An error anywhere rolls back both bounds (the transaction is dropped
/// uncommitted), so retention is applied all or nothing.
async fn compact(
    store: &PostgresStore,
    retention: EventRetention,
    now: Timestamp,
) -> Result<CompactionReport, StoreError> {
    let mut client = store.client().await?;
    let transaction = client
        .transaction()
        .await
        .map_err(StoreError::postgres("start the compaction"))?;
    // Every statement after the lock reads what the previous compaction left.
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&COMPACTION_LOCK])
        .await
        .map_err(StoreError::postgres("take the event log's compaction lock"))?;
    let mut removed = 0_u64;
    if let Some(max_age) = retention.max_age {
        let age = i64::try_from(max_age.as_micros()).unwrap_or(i64::MAX);
        let cutoff = now.unix_micros().saturating_sub(age);
        removed += transaction
            .execute("DELETE FROM events WHERE occurred_at < $1", &[&cutoff])
            .await
            .map_err(StoreError::postgres(
                "remove the events older than the maximum age",
            ))?;
    }
    if let Some(max_events) = retention.max_events {
        removed += if max_events == 0 {
            transaction
                .execute("DELETE FROM events", &[])
                .await
                .map_err(StoreError::postgres(
                    "remove the events beyond the maximum count",
                ))?
        } else {
            let offset = i64::try_from(max_events - 1).unwrap_or(i64::MAX);
            let oldest_kept = transaction
                .query_opt(
                    "SELECT position FROM events ORDER BY position DESC LIMIT 1 OFFSET $1",
                    &[&offset],
                )
                .await
                .map_err(StoreError::postgres("find the oldest event to keep"))?;
            match oldest_kept {
                Some(row) => {
                    let oldest_kept: i64 = column(&row, 0, "the oldest event to keep")?;
                    transaction
                        .execute("DELETE FROM events WHERE position < $1", &[&oldest_kept])
                        .await
                        .map_err(StoreError::postgres(
                            "remove the events beyond the maximum count",
                        ))?
                }
                None => 0,
            }
        };
    }
    let row = transaction
        .query_one("SELECT count(*) FROM events", &[])
        .await
        .map_err(StoreError::postgres("count the remaining events"))?;
    let remaining: i64 = column(&row, 0, "the event count")?;
    transaction
        .commit()
        .await
        .map_err(StoreError::postgres("commit the compaction"))?;
    Ok(CompactionReport {
        removed,
        remaining: u64::try_from(remaining).unwrap_or(0),
    })
}

// --- reading ---

/// A row of [`READ_AFTER`] as the stream reads it; an error names what cannot be read.
fn stored_event(row: &Row, position: i64) -> Result<StoredEvent, StoreError> {
    let key = format!("position {position}");
    let corrupt = |reason: String| StoreError::CorruptRecord {
        table: "events",
        key: key.clone(),
        reason,
    };
    let event_id: i64 = column(row, 2, &key)?;
    let id = |raw: Option<String>, name: &str| {
        raw.map(|raw| {
            ServerId::parse(&raw).map_err(|error| corrupt(format!("`{name}` is invalid: {error}")))
        })
        .transpose()
    };
    Ok(StoredEvent {
        position,
        replica: column(row, 1, &key)?,
        event_id: u64::try_from(event_id)
            .map_err(|_| corrupt(format!("the event id is negative ({event_id})")))?,
        occurred_at: Timestamp::from_unix_micros(column(row, 3, &key)?),
        event_type: column(row, 4, &key)?,
        mcp_server_id: id(column(row, 5, &key)?, "mcp_server_id")?,
        group_id: id(column(row, 6, &key)?, "group_id")?,
        payload: column(row, 7, &key)?,
    })
}

async fn read_invocations(
    store: &PostgresStore,
    server: &ServerId,
    before: i64,
    fetch: i64,
) -> Result<Vec<InvocationRecord>, StoreError> {
    let client = store.client().await?;
    let statement = client
        .prepare_cached(READ_INVOCATIONS)
        .await
        .map_err(StoreError::postgres("prepare the history read"))?;
    let rows = client
        .query(&statement, &[&server.as_str(), &before, &fetch])
        .await
        .map_err(StoreError::postgres("read the history"))?;
    rows.iter()
        .map(|row| {
            let event_id: i64 = column(row, 0, "a history row")?;
            let key = format!("event {event_id}");
            invocation_record(
                server,
                event_id,
                column(row, 1, &key)?,
                &column::<String>(row, 2, &key)?,
                &column::<String>(row, 3, &key)?,
            )
        })
        .collect()
}

/// Rebuilds what [`InvocationRecord::from_event`] made of the event before it was stored.
fn invocation_record(
    server: &ServerId,
    event_id: i64,
    occurred_at: i64,
    event_type: &str,
    payload: &str,
) -> Result<InvocationRecord, StoreError> {
    let corrupt = |reason: String| StoreError::CorruptRecord {
        table: "events",
        key: format!("event {event_id}"),
        reason,
    };
    let fields: serde_json::Value =
        serde_json::from_str(payload).map_err(|error| corrupt(error.to_string()))?;
    let text = |key: &str| {
        fields
            .get(key)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| corrupt(format!("`{key}` is missing or not a string")))
    };
    let success = event_type == INVOCATION_TYPES[0];
    let tool = text("tool")?;
    let duration_ms = fields
        .get("duration_ms")
        .and_then(serde_json::Value::as_f64)
        .ok_or_else(|| corrupt("`duration_ms` is missing or not a number".to_owned()))?;
    let principal = match fields.get("principal") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(principal)) => Some(principal.clone()),
        Some(_) => return Err(corrupt("`principal` is not a string".to_owned())),
    };
    let (is_error, error_kind) = if success {
        let is_error = fields
            .get("is_error")
            .and_then(serde_json::Value::as_bool)
            .ok_or_else(|| corrupt("`is_error` is missing or not a boolean".to_owned()))?;
        (is_error, None)
    } else {
        (false, Some(text("error_kind")?))
    };
    Ok(InvocationRecord {
        event_id: u64::try_from(event_id)
            .map_err(|_| corrupt(format!("the event id is negative ({event_id})")))?,
        mcp_server_id: server.clone(),
        tool,
        occurred_at: Timestamp::from_unix_micros(occurred_at),
        duration_ms,
        success,
        is_error,
        error_kind,
        principal,
    })
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn read_lock<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write_lock<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PostgresSettings;
    use mcpgw_testkit::event_log::sample_completed;
    use mcpgw_testkit::postgres::TempPostgres;

    /// Positions are committed in order only if a batch takes its positions after the append
    /// lock, never before: while another session holds the lock, the writer waits for it with
    /// no position taken.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_takes_no_position_before_it_holds_the_append_lock() {
        let url = TempPostgres::shared().fresh_database();
        let store = PostgresStore::connect(PostgresSettings::new(url))
            .await
            .unwrap();
        let log = PostgresEventLog::open(&store, "replica-a").await.unwrap();
        let holder = store.client().await.unwrap();
        holder
            .execute("SELECT pg_advisory_lock($1)", &[&APPEND_LOCK])
            .await
            .unwrap();
        log.observe(&sample_completed(1, "math", 1));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let waiting: i64 = holder
                .query_one(
                    "SELECT count(*) FROM pg_locks
                     WHERE locktype = 'advisory' AND NOT granted
                       AND database = (SELECT oid FROM pg_database
                                       WHERE datname = current_database())",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            if waiting == 1 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the writer never waited for the append lock"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let taken: Option<i64> = holder
            .query_one("SELECT pg_sequence_last_value('events_position_seq')", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(taken, None, "a position was taken before the lock");

        holder
            .execute("SELECT pg_advisory_unlock($1)", &[&APPEND_LOCK])
            .await
            .unwrap();
        log.flush().await.unwrap();
        let stored = log.events_after(0, 10).await.unwrap();
        assert_eq!(stored.len(), 1);
        assert_eq!(stored[0].event_id, 1);
    }

    #[test]
    fn messages_name_the_servers_reason_once() {
        #[derive(Debug)]
        struct Layer(&'static str, Option<Box<Layer>>);
        impl std::fmt::Display for Layer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for Layer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.1.as_deref().map(|layer| layer as _)
            }
        }
        // The outer message already ends with the driver's text; the server's reason is added.
        let error = Layer(
            "could not write events: db error",
            Some(Box::new(Layer(
                "db error",
                Some(Box::new(Layer("ERROR: disk full", None))),
            ))),
        );
        assert_eq!(
            full_message(&error),
            "could not write events: db error: ERROR: disk full"
        );
    }
}
