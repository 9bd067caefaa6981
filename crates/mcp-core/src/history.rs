//! The record of tool invocations, and the port that stores it.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;
use serde::Serialize;

use crate::events::{DomainEvent, EventObserver, PublishedEvent};
use crate::id::ServerId;
use crate::ports::RepositoryError;
use crate::time::Timestamp;

/// One finished tool call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InvocationRecord {
    pub event_id: u64,
    pub mcp_server_id: ServerId,
    pub tool: String,
    pub occurred_at: Timestamp,
    pub duration_ms: f64,
    /// The call produced an answer without a transport or protocol failure. A tool-level error
    /// (`isError`) is a successful invocation with `is_error` set.
    pub success: bool,
    pub is_error: bool,
    pub error_kind: Option<String>,
    pub principal: Option<String>,
}

impl InvocationRecord {
    /// The record an invocation event stands for; `None` for other events.
    pub fn from_event(published: &PublishedEvent) -> Option<Self> {
        match &published.event {
            DomainEvent::ToolInvocationCompleted {
                mcp_server_id,
                tool,
                duration_ms,
                is_error,
                principal,
                ..
            } => Some(Self {
                event_id: published.event_id,
                mcp_server_id: mcp_server_id.clone(),
                tool: tool.clone(),
                occurred_at: published.occurred_at,
                duration_ms: *duration_ms,
                success: true,
                is_error: *is_error,
                error_kind: None,
                principal: principal.clone(),
            }),
            DomainEvent::ToolInvocationFailed {
                mcp_server_id,
                tool,
                duration_ms,
                error_kind,
                principal,
                ..
            } => Some(Self {
                event_id: published.event_id,
                mcp_server_id: mcp_server_id.clone(),
                tool: tool.clone(),
                occurred_at: published.occurred_at,
                duration_ms: *duration_ms,
                success: false,
                is_error: false,
                error_kind: Some((*error_kind).to_owned()),
                principal: principal.clone(),
            }),
            _ => None,
        }
    }
}

/// A page of history, newest first, and the cursor of the next (older) page.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPage {
    pub entries: Vec<InvocationRecord>,
    /// Pass it as `before` to get the next page; `None` at the end.
    pub next_cursor: Option<u64>,
}

/// Where invocation records are read from. Implementations are fed by observing the event
/// stream (they are [`EventObserver`]s too), so there is one way in for every record.
///
/// Contract: `page` returns the records of one server with `event_id < before` (all when
/// `before` is `None`), newest first, at most `limit` of them, and a `next_cursor` exactly when
/// older records remain. A record whose event was published before `page` was called is in the
/// answer (a persistent store finishes its pending writes first).
#[async_trait]
pub trait InvocationHistory: Send + Sync {
    async fn page(
        &self,
        server: &ServerId,
        limit: usize,
        before: Option<u64>,
    ) -> Result<HistoryPage, RepositoryError>;
}

/// Keeps the most recent invocations of each server in memory.
pub struct InMemoryInvocationHistory {
    per_server: usize,
    records: Mutex<HashMap<ServerId, VecDeque<InvocationRecord>>>,
}

impl std::fmt::Debug for InMemoryInvocationHistory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InMemoryInvocationHistory")
            .field("per_server", &self.per_server)
            .finish()
    }
}

impl InMemoryInvocationHistory {
    pub fn new(per_server: usize) -> Self {
        Self {
            per_server: per_server.max(1),
            records: Mutex::new(HashMap::new()),
        }
    }
}

impl InMemoryInvocationHistory {
    /// Keeps `record`, dropping the server's oldest one when it already has `per_server`.
    pub fn record(&self, record: InvocationRecord) {
        let mut records = self
            .records
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let list = records.entry(record.mcp_server_id.clone()).or_default();
        if list.len() == self.per_server {
            list.pop_front();
        }
        list.push_back(record);
    }
}

impl EventObserver for InMemoryInvocationHistory {
    fn observe(&self, published: &PublishedEvent) {
        if let Some(record) = InvocationRecord::from_event(published) {
            self.record(record);
        }
    }
}

#[async_trait]
impl InvocationHistory for InMemoryInvocationHistory {
    async fn page(
        &self,
        server: &ServerId,
        limit: usize,
        before: Option<u64>,
    ) -> Result<HistoryPage, RepositoryError> {
        let records = self
            .records
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(list) = records.get(server) else {
            return Ok(HistoryPage {
                entries: Vec::new(),
                next_cursor: None,
            });
        };
        let mut older = list
            .iter()
            .rev()
            .filter(|record| before.is_none_or(|cursor| record.event_id < cursor));
        let entries: Vec<InvocationRecord> = older.by_ref().take(limit).cloned().collect();
        let next_cursor = match (older.next(), entries.last()) {
            (Some(_), Some(last)) => Some(last.event_id),
            _ => None,
        };
        Ok(HistoryPage {
            entries,
            next_cursor,
        })
    }
}
