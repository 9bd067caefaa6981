//! The persistent event log: every published domain event in an SQLite file, with retention
//! applied by compaction, and the tool invocation history read back from it.
//!
//! The log lives in its own database file (the gateway uses `<data-dir>/events.db`), not in the
//! store's `mcpgw.db`. Events are written as often as tools are called, while the store's tables
//! (servers, keys, roles) change rarely and are read on request paths: one file each means the
//! log's batches and its compaction never hold the write lock that an API key revocation or a
//! server registration waits for, and the log can be deleted or moved on its own. Its schema
//! is the separate migration list `schema::EVENT_LOG_MIGRATIONS`.
//!
//! `observe` runs inline on the publishing thread (often an async executor thread), so it never
//! touches SQLite: it queues the event for a dedicated writer thread, which writes whatever has
//! queued up in one transaction per batch. When the queue is full, `observe` waits up to
//! [`ENQUEUE_PATIENCE`] (by default) and then drops the event and counts it in
//! [`EventLogStats::dropped`]; a batch the database refuses is counted there too. Reads,
//! compaction and statistics use a second connection on the blocking thread pool. Dropping the log (or [`SqliteEventLog::close`])
//! lets the writer finish everything queued before it exits, so a graceful stop loses nothing.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mcpgw_core::{
    CompactionReport, EventLog, EventLogError, EventLogStats, EventObserver, EventRetention,
    HistoryPage, InvocationHistory, InvocationRecord, PublishedEvent, RepositoryError, ServerId,
    Timestamp,
};
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};

use crate::error::StoreError;
use crate::schema;

/// Events that may wait for the writer: about a minute of a very busy gateway, a few tens of
/// MiB at most.
pub const DEFAULT_QUEUE_CAPACITY: usize = 65_536;

/// How long `observe` waits for room in a full queue before it drops the event. Long enough to
/// ride out a checkpoint or a compaction, short enough that a stuck disk cannot stall the
/// gateway's request handling for long.
pub const ENQUEUE_PATIENCE: Duration = Duration::from_secs(1);

/// How long a statement waits for a lock held by another connection (the other connection of
/// this log, or another process) before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the writer gathers events into one transaction after the first one arrives.
const GATHER: Duration = Duration::from_millis(20);

/// How often the writer looks at its queue while a batch is open and events keep coming.
const WRITE_TICK: Duration = Duration::from_millis(2);

/// The most events written in one transaction: bounds how long one commit holds the lock.
const MAX_BATCH: usize = 4_096;

const INVOCATION_TYPES: [&str; 2] = ["ToolInvocationCompleted", "ToolInvocationFailed"];

enum Command {
    Append(Box<PublishedEvent>),
    /// Answered once every command queued before it has been handled.
    Flush(mpsc::Sender<()>),
}

struct Shared {
    path: PathBuf,
    /// Reads, compaction and statistics; the writer thread has its own connection.
    reader: Mutex<Connection>,
    dropped: AtomicU64,
}

/// The SQLite [`EventLog`]. See the module documentation for how writes are queued.
///
/// Every async method runs its SQLite work on tokio's blocking pool, so it must be called from
/// inside a tokio runtime; `observe` may be called from any thread.
pub struct SqliteEventLog {
    shared: Arc<Shared>,
    /// `None` once closed.
    sender: RwLock<Option<SyncSender<Command>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    patience: Duration,
}

impl std::fmt::Debug for SqliteEventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteEventLog")
            .field("path", &self.shared.path)
            .field("dropped", &self.shared.dropped.load(Ordering::Relaxed))
            .finish()
    }
}

impl SqliteEventLog {
    /// Opens (creating the file and its missing parent directories) the event log at `path`,
    /// brings its schema up to date and starts its writer thread, with a queue of
    /// [`DEFAULT_QUEUE_CAPACITY`] events.
    ///
    /// This blocks (file system, migrations): call it at startup or from `spawn_blocking`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_with_queue(path, DEFAULT_QUEUE_CAPACITY, ENQUEUE_PATIENCE)
    }

    /// Like [`open`](Self::open), with a queue of `capacity` events (at least 1), and
    /// `patience`: how long `observe` waits for room in a full queue before dropping.
    pub fn open_with_queue(
        path: &Path,
        capacity: usize,
        patience: Duration,
    ) -> Result<Self, StoreError> {
        if let Some(parent) = path
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
        {
            std::fs::create_dir_all(parent).map_err(|source| StoreError::CreateDirectory {
                path: parent.to_owned(),
                source,
            })?;
        }
        let mut writer_connection = open_connection(path)?;
        schema::migrate(&mut writer_connection, path, schema::EVENT_LOG_MIGRATIONS)
            .map_err(|error| StoreError::at_open(path, error))?;
        let reader = open_connection(path)?;
        let shared = Arc::new(Shared {
            path: path.to_owned(),
            reader: Mutex::new(reader),
            dropped: AtomicU64::new(0),
        });
        let (sender, receiver) = mpsc::sync_channel(capacity.max(1));
        let writer = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("mcpgw-event-log".to_owned())
                .spawn(move || write_until_closed(&mut writer_connection, &receiver, &shared))
                .map_err(|error| StoreError::Background(error.to_string()))?
        };
        Ok(Self {
            shared,
            sender: RwLock::new(Some(sender)),
            writer: Mutex::new(Some(writer)),
            patience,
        })
    }

    /// The database file of this log.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Writes everything queued, then stops the writer thread. Events observed afterwards are
    /// dropped (and counted); reads keep working. Closing twice is harmless.
    pub async fn close(&self) -> Result<(), EventLogError> {
        let sender = write_lock(&self.sender).take();
        drop(sender);
        let writer = lock(&self.writer).take();
        if let Some(writer) = writer {
            tokio::task::spawn_blocking(move || writer.join())
                .await
                .map_err(|error| EventLogError::Storage(error.to_string()))?
                .map_err(|_| {
                    EventLogError::Storage(
                        "the event log's writer thread panicked; check the log for why".to_owned(),
                    )
                })?;
        }
        Ok(())
    }

    /// Counts an event that will never be written; the count is reported through `stats`
    /// (and a metric). Warns at the 1st, 2nd, 4th, 8th ... drop, so a stuck disk is loud in
    /// the log without a line per event.
    fn count_dropped(&self) {
        warn_dropped(&self.shared, 1, "the event log's write queue stayed full");
    }

    async fn run_read<T, W>(&self, work: W) -> Result<T, StoreError>
    where
        T: Send + 'static,
        W: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        tokio::task::spawn_blocking(move || work(&mut lock(&shared.reader)))
            .await
            .map_err(|error| StoreError::Background(error.to_string()))?
    }
}

/// Adds `count` to the dropped events, warning when the total crosses a power of two.
fn warn_dropped(shared: &Shared, count: u64, why: &str) {
    let before = shared.dropped.fetch_add(count, Ordering::Relaxed);
    let after = before + count;
    if before == 0 || (after.ilog2() > before.ilog2()) {
        tracing::warn!(
            dropped_total = after,
            why,
            "events were dropped from the event log"
        );
    }
}

impl Drop for SqliteEventLog {
    fn drop(&mut self) {
        // Disconnecting lets the writer drain the queue and exit; waiting for it makes the
        // drop of the last handle the moment everything observed is on disk.
        write_lock(&self.sender).take();
        if let Some(writer) = lock(&self.writer).take() {
            let _ = writer.join();
        }
    }
}

impl EventObserver for SqliteEventLog {
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
                Err(TrySendError::Disconnected(_)) => {
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
impl EventLog for SqliteEventLog {
    async fn flush(&self) -> Result<(), EventLogError> {
        let Some(sender) = read_lock(&self.sender).clone() else {
            // Closed: the writer finished everything before it stopped.
            return Ok(());
        };
        tokio::task::spawn_blocking(move || {
            let (done, finished) = mpsc::channel();
            // A failed send or receive means the writer stopped, after writing what it had.
            if sender.send(Command::Flush(done)).is_ok() {
                let _ = finished.recv();
            }
        })
        .await
        .map_err(|error| EventLogError::Storage(error.to_string()))
    }

    async fn last_event_id(&self) -> Result<u64, EventLogError> {
        self.flush().await?;
        self.run_read(|connection| {
            let last: i64 = connection
                .query_row(
                    "SELECT last_event_id FROM event_log_state WHERE id = 1",
                    [],
                    |row| row.get(0),
                )
                .map_err(StoreError::sqlite("read the last event id"))?;
            Ok(u64::try_from(last).unwrap_or(0))
        })
        .await
        .map_err(storage)
    }

    async fn compact(
        &self,
        retention: EventRetention,
        now: Timestamp,
    ) -> Result<CompactionReport, EventLogError> {
        self.flush()
            .await
            .map_err(|error| EventLogError::Compaction(error.to_string()))?;
        self.run_read(move |connection| compact(connection, retention, now))
            .await
            .map_err(|error| EventLogError::Compaction(error.to_string()))
    }

    async fn stats(&self) -> Result<EventLogStats, EventLogError> {
        let dropped = self.shared.dropped.load(Ordering::Relaxed);
        self.run_read(move |connection| {
            let (events, oldest, newest): (i64, Option<i64>, Option<i64>) = connection
                .query_row(
                    "SELECT count(*), min(event_id), max(event_id) FROM events",
                    [],
                    |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
                )
                .map_err(StoreError::sqlite("count the events"))?;
            Ok(EventLogStats {
                events: u64::try_from(events).unwrap_or(0),
                oldest_event_id: oldest.and_then(|id| u64::try_from(id).ok()),
                newest_event_id: newest.and_then(|id| u64::try_from(id).ok()),
                dropped,
            })
        })
        .await
        .map_err(storage)
    }
}

#[async_trait]
impl InvocationHistory for SqliteEventLog {
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
        let server = server.clone();
        let before = before.map_or(i64::MAX, |cursor| i64::try_from(cursor).unwrap_or(i64::MAX));
        // One row more than asked says whether an older page exists.
        let fetch = i64::try_from(limit).unwrap_or(i64::MAX).saturating_add(1);
        let mut entries = self
            .run_read(move |connection| read_invocations(connection, &server, before, fetch))
            .await
            .map_err(RepositoryError::from)?;
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

fn open_connection(path: &Path) -> Result<Connection, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let connection =
        Connection::open_with_flags(path, flags).map_err(|source| open_error(path, source))?;
    configure(&connection).map_err(|source| open_error(path, source))?;
    Ok(connection)
}

fn configure(connection: &Connection) -> rusqlite::Result<()> {
    connection.busy_timeout(BUSY_TIMEOUT)?;
    // WAL lets history reads proceed while a batch commits; without shared memory SQLite stays
    // in its rollback journal, slower but as safe, so the answer is not checked.
    let _journal_mode: String =
        connection.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
    // Each batch is one transaction, so syncing every commit costs one fsync per batch, not
    // per event.
    connection.pragma_update(None, "synchronous", "FULL")?;
    Ok(())
}

fn open_error(path: &Path, source: rusqlite::Error) -> StoreError {
    StoreError::at_open(
        path,
        StoreError::Open {
            path: path.to_owned(),
            source,
        },
    )
}

fn storage(error: StoreError) -> EventLogError {
    EventLogError::Storage(error.to_string())
}

/// The writer thread: handles commands until every sender is gone and the queue is empty.
fn write_until_closed(connection: &mut Connection, receiver: &Receiver<Command>, shared: &Shared) {
    while let Ok(first) = receiver.recv() {
        let mut flushes = Vec::new();
        // Group commit: what arrives within `GATHER` of the first event goes into the same
        // transaction, so a busy gateway pays one commit (and one sync) per batch, not per
        // event. The events are written into the open transaction as they come, a few at a
        // time, so that the writer's work is spread over the batch instead of falling in one
        // burst at its end: on a machine with few CPUs such a burst delays the tool calls
        // running beside it (by up to a millisecond, once per batch, on a busy gateway). The
        // writer sleeps between its looks at the queue instead of waiting on it, so publishers
        // never have to wake it: on a busy gateway an event costs its publisher a queue push,
        // not a system call. A flush (a history read, a shutdown) is only answered once the
        // batch is committed, within `GATHER`.
        let mut batch = Batch::new(connection);
        let deadline = Instant::now() + GATHER;
        let mut next = Some(first);
        let mut closed = false;
        loop {
            let mut took = 0;
            while let Some(command) = next.take() {
                match command {
                    Command::Append(event) => batch.add(&event),
                    Command::Flush(done) => flushes.push(done),
                }
                took += 1;
                if batch.len() >= MAX_BATCH {
                    break;
                }
                next = match receiver.try_recv() {
                    Ok(command) => Some(command),
                    Err(mpsc::TryRecvError::Empty) => None,
                    Err(mpsc::TryRecvError::Disconnected) => {
                        closed = true;
                        None
                    }
                };
            }
            let now = Instant::now();
            if batch.is_empty() || closed || batch.len() >= MAX_BATCH || now >= deadline {
                break;
            }
            // While events keep coming, look again soon; once a look found none, the rest of
            // the batch's time is slept in one go.
            let rest = deadline - now;
            std::thread::sleep(if took > 0 { rest.min(WRITE_TICK) } else { rest });
            next = receiver.try_recv().ok();
        }
        let count = batch.len() as u64;
        if let Err(error) = batch.commit() {
            tracing::error!(%error, events = count, "the event log could not write a batch");
            warn_dropped(shared, count, "the database refused a batch");
        }
        // Every event queued before these flushes was in this batch or an earlier one.
        for done in flushes {
            let _ = done.send(());
        }
    }
}

/// One transaction of the writer: events are written into it as they are added, and it is
/// committed whole or not at all.
struct Batch<'c> {
    /// The writer's connection, until the transaction is started on it.
    connection: Option<&'c mut Connection>,
    /// Open from the first event on; `None` before, and after a failure.
    transaction: Option<rusqlite::Transaction<'c>>,
    /// The first failure; the events added after it are not written.
    failure: Option<StoreError>,
    events: usize,
    written_max: i64,
}

impl<'c> Batch<'c> {
    fn new(connection: &'c mut Connection) -> Self {
        Self {
            connection: Some(connection),
            transaction: None,
            failure: None,
            events: 0,
            written_max: 0,
        }
    }

    fn len(&self) -> usize {
        self.events
    }

    fn is_empty(&self) -> bool {
        self.events == 0
    }

    fn add(&mut self, published: &PublishedEvent) {
        self.events += 1;
        if self.failure.is_some() {
            return;
        }
        if let Err(error) = self.write(published) {
            // Dropping the transaction rolls back what it wrote: the batch is all or nothing.
            self.transaction = None;
            self.failure = Some(error);
        }
    }

    fn write(&mut self, published: &PublishedEvent) -> Result<(), StoreError> {
        if let Some(connection) = self.connection.take() {
            self.transaction = Some(
                connection
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(StoreError::sqlite("start writing events"))?,
            );
        }
        let Some(transaction) = self.transaction.as_ref() else {
            return Ok(());
        };
        let event_id = insert_event(transaction, published)?;
        self.written_max = self.written_max.max(event_id);
        Ok(())
    }

    fn commit(self) -> Result<(), StoreError> {
        if let Some(error) = self.failure {
            return Err(error);
        }
        let Some(transaction) = self.transaction else {
            return Ok(());
        };
        transaction
            .execute(
                "UPDATE event_log_state SET last_event_id = max(last_event_id, ?1) WHERE id = 1",
                [self.written_max],
            )
            .map_err(StoreError::sqlite("record the last event id"))?;
        transaction
            .commit()
            .map_err(StoreError::sqlite("commit the written events"))
    }
}

/// The event as it is stored: what a client of the event stream gets for it.
fn payload(published: &PublishedEvent) -> Result<String, serde_json::Error> {
    serde_json::to_string(published)
}

/// Writes one event in `transaction`; answers its id.
fn insert_event(
    transaction: &rusqlite::Transaction<'_>,
    published: &PublishedEvent,
) -> Result<i64, StoreError> {
    let event_id = i64::try_from(published.event_id).map_err(|_| StoreError::CorruptRecord {
        table: "events",
        key: published.event_id.to_string(),
        reason: "the id is beyond the range sqlite stores".to_owned(),
    })?;
    let payload = payload(published).map_err(|error| StoreError::CorruptRecord {
        table: "events",
        key: published.event_id.to_string(),
        reason: error.to_string(),
    })?;
    transaction
        .prepare_cached(
            "INSERT OR REPLACE INTO events
                 (event_id, occurred_at, event_type, mcp_server_id, payload)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(StoreError::sqlite("prepare the event insert"))?
        .execute(params![
            event_id,
            published.occurred_at.unix_micros(),
            published.event.event_type(),
            published.event.mcp_server_id().map(ServerId::as_str),
            payload,
        ])
        .map_err(StoreError::sqlite("write an event"))?;
    Ok(event_id)
}

fn compact(
    connection: &mut Connection,
    retention: EventRetention,
    now: Timestamp,
) -> Result<CompactionReport, StoreError> {
    // Both bounds in one transaction: an error anywhere rolls back both (the transaction is
    // dropped uncommitted), so retention is applied all or nothing.
    let transaction = connection
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(StoreError::sqlite("start the compaction"))?;
    let mut removed = 0_usize;
    if let Some(max_age) = retention.max_age {
        let age = i64::try_from(max_age.as_micros()).unwrap_or(i64::MAX);
        let cutoff = now.unix_micros().saturating_sub(age);
        removed += transaction
            .execute("DELETE FROM events WHERE occurred_at < ?1", [cutoff])
            .map_err(StoreError::sqlite(
                "remove the events older than the maximum age",
            ))?;
    }
    if let Some(max_events) = retention.max_events {
        removed += if max_events == 0 {
            transaction
                .execute("DELETE FROM events", [])
                .map_err(StoreError::sqlite(
                    "remove the events beyond the maximum count",
                ))?
        } else {
            let offset = i64::try_from(max_events - 1).unwrap_or(i64::MAX);
            let oldest_kept: Option<i64> = transaction
                .query_row(
                    "SELECT event_id FROM events ORDER BY event_id DESC LIMIT 1 OFFSET ?1",
                    [offset],
                    |row| row.get(0),
                )
                .optional()
                .map_err(StoreError::sqlite("find the oldest event to keep"))?;
            match oldest_kept {
                Some(oldest_kept) => transaction
                    .execute("DELETE FROM events WHERE event_id < ?1", [oldest_kept])
                    .map_err(StoreError::sqlite(
                        "remove the events beyond the maximum count",
                    ))?,
                None => 0,
            }
        };
    }
    let remaining: i64 = transaction
        .query_row("SELECT count(*) FROM events", [], |row| row.get(0))
        .map_err(StoreError::sqlite("count the remaining events"))?;
    transaction
        .commit()
        .map_err(StoreError::sqlite("commit the compaction"))?;
    Ok(CompactionReport {
        removed: removed as u64,
        remaining: u64::try_from(remaining).unwrap_or(0),
    })
}

fn read_invocations(
    connection: &mut Connection,
    server: &ServerId,
    before: i64,
    fetch: i64,
) -> Result<Vec<InvocationRecord>, StoreError> {
    let mut statement = connection
        .prepare_cached(
            "SELECT event_id, occurred_at, event_type, payload FROM events
             WHERE mcp_server_id = ?1
               AND event_type IN ('ToolInvocationCompleted', 'ToolInvocationFailed')
               AND event_id < ?2
             ORDER BY event_id DESC
             LIMIT ?3",
        )
        .map_err(StoreError::sqlite("prepare the history read"))?;
    let rows = statement
        .query_map(params![server.as_str(), before, fetch], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, String>(3)?,
            ))
        })
        .map_err(StoreError::sqlite("read the history"))?;
    let mut records = Vec::new();
    for row in rows {
        let (event_id, occurred_at, event_type, payload) =
            row.map_err(StoreError::sqlite("read the history"))?;
        records.push(invocation_record(
            server,
            event_id,
            occurred_at,
            &event_type,
            &payload,
        )?);
    }
    Ok(records)
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
        key: event_id.to_string(),
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
        event_id: u64::try_from(event_id).map_err(|error| corrupt(error.to_string()))?,
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

fn read_lock<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write_lock<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpgw_core::DomainEvent;

    fn invocation(event_id: u64) -> PublishedEvent {
        PublishedEvent {
            event_id,
            occurred_at: Timestamp::from_unix_micros(1_500_000),
            event: DomainEvent::ToolInvocationFailed {
                mcp_server_id: ServerId::parse("math").unwrap(),
                tool: "add".to_owned(),
                duration_ms: 0.1 + 0.2,
                error_kind: "timeout",
                error: "took too long".to_owned(),
                principal: Some("user:a".to_owned()),
                trace_id: None,
                span_id: None,
            },
        }
    }

    #[test]
    fn the_stored_payload_is_the_event_stream_frame() {
        let stored: serde_json::Value =
            serde_json::from_str(&payload(&invocation(42)).unwrap()).unwrap();
        assert_eq!(
            stored,
            serde_json::json!({
                "event_type": "ToolInvocationFailed", "mcp_server_id": "math", "tool": "add",
                "duration_ms": 0.1 + 0.2, "error_kind": "timeout", "error": "took too long",
                "principal": "user:a", "event_id": "42",
                "occurred_at": "1970-01-01T00:00:01.500000",
            })
        );
    }

    #[test]
    fn a_stored_invocation_reads_back_as_the_record_of_the_event() {
        let published = invocation(7);
        let text = payload(&published).unwrap();
        let server = ServerId::parse("math").unwrap();
        let record =
            invocation_record(&server, 7, 1_500_000, "ToolInvocationFailed", &text).unwrap();
        assert_eq!(Some(record), InvocationRecord::from_event(&published));
        let broken = invocation_record(&server, 7, 0, "ToolInvocationFailed", "{\"tool\": 1}");
        assert!(
            matches!(broken, Err(StoreError::CorruptRecord { .. })),
            "{broken:?}"
        );
    }

    #[tokio::test]
    async fn history_reads_use_the_partial_index() {
        let directory = tempfile::tempdir().unwrap();
        let log = SqliteEventLog::open(&directory.path().join("events.db")).unwrap();
        let plan: Vec<String> = log
            .run_read(|connection| {
                let mut statement = connection
                    .prepare(
                        "EXPLAIN QUERY PLAN SELECT event_id FROM events
                         WHERE mcp_server_id = 'math'
                           AND event_type IN ('ToolInvocationCompleted', 'ToolInvocationFailed')
                           AND event_id < 10 ORDER BY event_id DESC LIMIT 5",
                    )
                    .unwrap();
                let rows = statement
                    .query_map([], |row| row.get::<_, String>(3))
                    .unwrap()
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap();
                Ok(rows)
            })
            .await
            .unwrap();
        assert!(
            plan.iter()
                .any(|step| step.contains("events_tool_invocations")),
            "{plan:?}"
        );
    }
}
