//! Tool lists that survive restarts: what servers listed is kept through the
//! [`ToolListStore`] port, and served again at the next start instead of starting each server
//! that declares no tools to ask it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use mcpgw_core::{
    CoreError, DomainEvent, EventObserver, PublishedEvent, RepositoryError, ServerId,
    ServerManager, StoredToolList, Tool, ToolListStore, ToolSource,
};
use tokio::sync::Notify;

/// Keeps the tool lists servers learn in a [`ToolListStore`], and serves them again after a
/// restart.
///
/// - [`ToolListKeeper::restore`], once the servers of the configuration and the store are
///   registered and before any probe, hands every kept list to the manager
///   ([`ServerManager::restore_tools`]), which serves it only while the server's definition has
///   the digest the list was learned under; lists of servers that are no longer registered are
///   deleted.
/// - Its [`observer`](ToolListKeeper::observer) notes every server whose tools were listed (a
///   start, a probe, a change announcement) or that was removed; [`run`](ToolListKeeper::run)
///   writes those lists (and deletes those of removed servers) in the background, several at a
///   time, so that nothing on the call path waits for the store. A list identical to the one
///   kept for the same definition is not written again.
///
/// A failed write is logged and changes nothing: the list is written when the server lists its
/// tools again, and until then a restart probes that server as it would without a store.
pub struct ToolListKeeper {
    manager: ServerManager,
    store: Arc<dyn ToolListStore>,
    /// What the store holds, as far as this keeper loaded or wrote it.
    kept: Mutex<HashMap<ServerId, Kept>>,
    pending: Mutex<BTreeMap<ServerId, Pending>>,
    wake: Notify,
    /// Serializes writes, so that a delete and a later save of one id reach the store in order.
    writing: tokio::sync::Mutex<()>,
}

/// What the store holds for one server: the digest and the tools (shared with the manager
/// where it can be).
type Kept = (String, Arc<Vec<Tool>>);

/// What is still to be written for one server.
#[derive(Debug, Clone, Copy, Default)]
struct Pending {
    /// The server was removed: its list goes first.
    delete: bool,
    /// The server listed its tools: its current list is to be kept.
    save: bool,
}

/// What [`ToolListKeeper::restore`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// Lists now served in place of a probe.
    pub restored: usize,
    /// Lists kept but not served: learned under another definition, or of a server whose
    /// tools are known otherwise (declared in its definition).
    pub not_served: usize,
    /// Lists deleted because their server is no longer registered.
    pub forgotten: usize,
}

impl std::fmt::Debug for ToolListKeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolListKeeper")
            .field("kept", &lock(&self.kept).len())
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ToolListKeeper {
    pub fn new(manager: ServerManager, store: Arc<dyn ToolListStore>) -> Arc<Self> {
        Arc::new(Self {
            manager,
            store,
            kept: Mutex::new(HashMap::new()),
            pending: Mutex::new(BTreeMap::new()),
            wake: Notify::new(),
            writing: tokio::sync::Mutex::new(()),
        })
    }

    /// The observer that notes what is to be written; register it on the event bus.
    pub fn observer(self: &Arc<Self>) -> Arc<dyn EventObserver> {
        Arc::new(KeeperObserver {
            keeper: Arc::downgrade(self),
        })
    }

    /// Serves the kept lists again (see the type's documentation) and deletes those of servers
    /// that are not registered. Call it after registering the servers and before probing.
    pub async fn restore(&self) -> Result<RestoreReport, RepositoryError> {
        let lists = self.store.load_tool_lists().await?;
        let mut report = RestoreReport::default();
        let mut orphans = Vec::new();
        for list in lists {
            let id = list.server_id.clone();
            match self.manager.restore_tools(&list) {
                Ok(true) => {
                    report.restored += 1;
                    // Share the manager's copy rather than keeping a second one.
                    let tools = match self.manager.tool_list(&id) {
                        Ok(served) if served.source == ToolSource::Stored => served.tools,
                        _ => Arc::new(list.tools),
                    };
                    lock(&self.kept).insert(id, (list.definition_digest, tools));
                }
                Ok(false) => {
                    report.not_served += 1;
                    lock(&self.kept).insert(id, (list.definition_digest, Arc::new(list.tools)));
                }
                Err(CoreError::ServerNotFound(_)) => orphans.push(id),
                Err(error) => {
                    tracing::warn!(server = %id, %error, "a kept tool list could not be served");
                }
            }
        }
        if !orphans.is_empty() {
            self.store.delete_tool_lists(&orphans).await?;
            report.forgotten = orphans.len();
        }
        Ok(report)
    }

    /// Writes what is pending until the keeper is dropped. Run it in a task.
    pub async fn run(self: Arc<Self>) {
        loop {
            self.wake.notified().await;
            self.flush().await;
        }
    }

    /// Writes everything pending now, and returns once it is written (or failed and logged);
    /// for shutdown, and for tests.
    pub async fn flush(&self) {
        let _writing = self.writing.lock().await;
        let pending = std::mem::take(&mut *lock(&self.pending));
        if pending.is_empty() {
            return;
        }
        let deletes: Vec<ServerId> = pending
            .iter()
            .filter(|(_, what)| what.delete)
            .map(|(id, _)| id.clone())
            .collect();
        if !deletes.is_empty() {
            match self.store.delete_tool_lists(&deletes).await {
                Ok(()) => {
                    let mut kept = lock(&self.kept);
                    for id in &deletes {
                        kept.remove(id);
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, servers = deletes.len(), "the tool lists of removed mcp servers could not be deleted; the next start deletes them");
                }
            }
        }
        let mut saves = Vec::new();
        let mut saved = Vec::new();
        for (id, what) in pending {
            if !what.save {
                continue;
            }
            if let Some((list, tools)) = self.list_to_save(&id) {
                saves.push(list);
                saved.push((id, tools));
            }
        }
        if saves.is_empty() {
            return;
        }
        match self.store.save_tool_lists(&saves).await {
            Ok(()) => {
                let mut kept = lock(&self.kept);
                for (list, (id, tools)) in saves.into_iter().zip(saved) {
                    kept.insert(id, (list.definition_digest, tools));
                }
            }
            Err(error) => {
                tracing::warn!(%error, servers = saves.len(), "learned tool lists could not be kept; they are written again when the servers list their tools");
            }
        }
    }

    /// The list to write for `id`: what the server listed in this run, unless the store already
    /// holds the same tools for the same definition. The digest is the one of the definition
    /// the tools were listed under, which may be older than the server's current one.
    fn list_to_save(&self, id: &ServerId) -> Option<(StoredToolList, Arc<Vec<Tool>>)> {
        let list = self.manager.tool_list(id).ok()?;
        if list.source != ToolSource::Live {
            return None;
        }
        let digest = list.learned_from?.tool_list_digest();
        let learned_at = list.learned_at?;
        let unchanged = lock(&self.kept).get(id).is_some_and(|(kept_digest, kept)| {
            *kept_digest == digest && (Arc::ptr_eq(kept, &list.tools) || **kept == *list.tools)
        });
        if unchanged {
            return None;
        }
        Some((
            StoredToolList {
                server_id: id.clone(),
                definition_digest: digest,
                tools: list.tools.as_ref().clone(),
                learned_at,
            },
            list.tools,
        ))
    }

    fn note(&self, id: &ServerId, change: impl FnOnce(&mut Pending)) {
        change(lock(&self.pending).entry(id.clone()).or_default());
        self.wake.notify_one();
    }
}

struct KeeperObserver {
    keeper: Weak<ToolListKeeper>,
}

impl EventObserver for KeeperObserver {
    fn observe(&self, published: &PublishedEvent) {
        // Every tool call publishes an event: those this observer ignores cost it one match,
        // not a reference count on the keeper.
        let (mcp_server_id, removed) = match &published.event {
            DomainEvent::McpServerStarted { mcp_server_id, .. }
            | DomainEvent::McpServerToolsChanged { mcp_server_id, .. } => (mcp_server_id, false),
            DomainEvent::McpServerRemoved { mcp_server_id } => (mcp_server_id, true),
            _ => return,
        };
        let Some(keeper) = self.keeper.upgrade() else {
            return;
        };
        if removed {
            keeper.note(mcp_server_id, |pending| {
                // A save noted before the removal is of the removed server.
                *pending = Pending {
                    delete: true,
                    save: false,
                };
            });
        } else {
            keeper.note(mcp_server_id, |pending| pending.save = true);
        }
    }
}
