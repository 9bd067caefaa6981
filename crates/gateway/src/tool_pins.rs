//! The pin ledger of the running gateway: reviews every tool list the catalogue is about to
//! serve against the pins (see [`mcpgw_core::pins`]), keeps the ledger in a [`ToolPinStore`],
//! announces what it sees as events, and carries out operators' decisions.
//!
//! Lists are reviewed when the catalogue rebuilds, which it does only after a change (a server
//! started, announced new tools, was registered, changed): a tool call never computes a
//! digest. A review that finds nothing new writes nothing. What a review changes (a first
//! pin, a newly observed definition) is written in the background; an operator's decision is
//! written before it is answered. Every write takes the record as it is at that moment, so a
//! decision is never overwritten by an older observation waiting to be written.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use mcpgw_core::{
    Clock, DomainEvent, EventSink, PinDecisionError, PinMode, PinStatus, RepositoryError, ServerId,
    Timestamp, Tool, ToolPin, ToolPinStore, ToolPinning, approve_pin, changed_fields, reject_pin,
    review_tools, tool_digest,
};
use tokio::sync::Notify;

/// Why a decision on the ledger was refused.
#[derive(Debug, thiserror::Error)]
pub enum ToolPinError {
    #[error("`{0}` has no tool pins: it is not pinned, or has not listed its tools yet")]
    UnknownOwner(ServerId),
    #[error(transparent)]
    Decision(#[from] PinDecisionError),
    #[error("the pin ledger could not be written: {0}")]
    Store(#[from] RepositoryError),
}

impl ToolPinError {
    pub fn kind(&self) -> mcpgw_core::ErrorKind {
        match self {
            ToolPinError::UnknownOwner(_)
            | ToolPinError::Decision(PinDecisionError::UnknownTool { .. }) => {
                mcpgw_core::ErrorKind::NotFound
            }
            ToolPinError::Decision(_) => mcpgw_core::ErrorKind::Conflict,
            ToolPinError::Store(_) => mcpgw_core::ErrorKind::Internal,
        }
    }
}

/// An operator's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinVerdict {
    Approve,
    Reject,
}

/// One tool's entry in the ledger, as the API shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolPinView {
    pub pin: ToolPin,
    pub status: PinStatus,
    /// The fields that differ between the pinned and the observed definition.
    pub changed_fields: Vec<&'static str>,
    /// A unified diff of the pinned definition into the observed one (pretty JSON, keys in
    /// order); empty when there is nothing to compare.
    pub diff: String,
}

impl ToolPinView {
    fn of(pin: &ToolPin) -> Self {
        let (changed, diff) = match (&pin.pinned, &pin.observed) {
            (pinned, Some(observed)) => {
                let before = pinned
                    .as_ref()
                    .map(|pinned| readable(&pinned.definition))
                    .unwrap_or_default();
                let fields = match pinned {
                    Some(pinned) => changed_fields(&pinned.definition, &observed.definition),
                    None => Vec::new(),
                };
                let diff = mcpgw_config::unified_diff(
                    &format!("pinned/{}", pin.tool),
                    &before,
                    &format!("observed/{}", pin.tool),
                    &readable(&observed.definition),
                    3,
                );
                (fields, diff)
            }
            _ => (Vec::new(), String::new()),
        };
        Self {
            status: pin.status(),
            changed_fields: changed,
            diff,
            pin: pin.clone(),
        }
    }
}

/// A definition as pretty JSON with its keys in order, one line per value, for a diff a person
/// can read.
fn readable(tool: &Tool) -> String {
    let mut canonical = String::new();
    let value = serde_json::to_value(tool).unwrap_or_default();
    mcpgw_core::pins::write_canonical(&mut canonical, &value);
    let sorted: serde_json::Value = serde_json::from_str(&canonical).unwrap_or(value);
    let mut text = serde_json::to_string_pretty(&sorted).unwrap_or_default();
    text.push('\n');
    text
}

/// The last review of one owner's list, so that the same list under the same ledger is not
/// reviewed again.
struct Reviewed {
    tools: Arc<Vec<Tool>>,
    pinning: ToolPinning,
    ledger_version: u64,
    admitted: Arc<Vec<Tool>>,
}

/// What is waiting to be written.
#[derive(Default)]
struct PendingWrites {
    records: BTreeSet<(ServerId, String)>,
}

/// The pin ledger and its rules for one gateway. See the module documentation.
pub struct ToolPins {
    store: Arc<dyn ToolPinStore>,
    events: Arc<dyn EventSink>,
    clock: Arc<dyn Clock>,
    default: ToolPinning,
    ledger: Mutex<HashMap<ServerId, HashMap<String, ToolPin>>>,
    /// Moves whenever the ledger changes other than by a review (a decision, a reset, a
    /// reload), so that cached reviews are made again.
    version: AtomicU64,
    reviewed: Mutex<HashMap<ServerId, Reviewed>>,
    pending: Mutex<PendingWrites>,
    wake: Notify,
    /// Serializes writes, so that records reach the store in the order they changed.
    writing: tokio::sync::Mutex<()>,
    /// Called after the ledger changed other than by a review: the catalogue rebuilds.
    on_change: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
}

impl std::fmt::Debug for ToolPins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolPins")
            .field("default", &self.default)
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ToolPins {
    /// A ledger kept in `store`, with `default` for servers whose definition says nothing.
    /// Call [`ToolPins::load`] before serving, and run [`ToolPins::run`] in a task.
    pub fn new(
        store: Arc<dyn ToolPinStore>,
        events: Arc<dyn EventSink>,
        clock: Arc<dyn Clock>,
        default: ToolPinning,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            events,
            clock,
            default,
            ledger: Mutex::new(HashMap::new()),
            version: AtomicU64::new(0),
            reviewed: Mutex::new(HashMap::new()),
            pending: Mutex::new(PendingWrites::default()),
            wake: Notify::new(),
            writing: tokio::sync::Mutex::new(()),
            on_change: Mutex::new(Vec::new()),
        })
    }

    /// The setting for servers whose definition says nothing.
    pub fn default_pinning(&self) -> ToolPinning {
        self.default
    }

    /// The setting of a server whose definition says `own`.
    pub fn pinning_of(&self, own: Option<ToolPinning>) -> ToolPinning {
        own.unwrap_or(self.default)
    }

    /// Reads the whole ledger from the store, replacing what this gateway held (at start, and
    /// when another replica changed it). A store that fails leaves the ledger as it was.
    pub async fn load(&self) -> Result<usize, RepositoryError> {
        let records = self.store.load_tool_pins().await?;
        let count = records.len();
        let mut ledger: HashMap<ServerId, HashMap<String, ToolPin>> = HashMap::new();
        for record in records {
            ledger
                .entry(record.owner.clone())
                .or_default()
                .insert(record.tool.clone(), record);
        }
        *lock(&self.ledger) = ledger;
        self.changed();
        Ok(count)
    }

    /// Registers `hook` to be called whenever the ledger changed other than by a review.
    pub fn on_change(&self, hook: impl Fn() + Send + Sync + 'static) {
        lock(&self.on_change).push(Box::new(hook));
    }

    fn changed(&self) {
        self.version.fetch_add(1, Ordering::AcqRel);
        for hook in lock(&self.on_change).iter() {
            hook();
        }
    }

    fn publish(&self, event: DomainEvent) {
        self.events.publish(self.clock.wall(), event);
    }

    fn now(&self) -> Timestamp {
        self.clock.wall()
    }

    /// The tools of `owner`'s list `tools` that may be served under `pinning`, after recording
    /// what is new in the ledger. Answers `tools` itself when every tool passes.
    pub fn admit(
        &self,
        owner: &ServerId,
        pinning: ToolPinning,
        tools: &Arc<Vec<Tool>>,
    ) -> Arc<Vec<Tool>> {
        if !pinning.is_on() {
            return Arc::clone(tools);
        }
        let version = self.version.load(Ordering::Acquire);
        if let Some(reviewed) = lock(&self.reviewed).get(owner)
            && reviewed.pinning == pinning
            && reviewed.ledger_version == version
            && (Arc::ptr_eq(&reviewed.tools, tools) || reviewed.tools == *tools)
        {
            return Arc::clone(&reviewed.admitted);
        }
        let digests: Vec<String> = tools.iter().map(tool_digest).collect();
        let review = {
            let mut ledger = lock(&self.ledger);
            let pins = ledger.entry(owner.clone()).or_default();
            review_tools(owner, pins, tools, &digests, pinning, self.now())
        };
        if !review.changed.is_empty() {
            let mut pending = lock(&self.pending);
            for record in &review.changed {
                pending
                    .records
                    .insert((record.owner.clone(), record.tool.clone()));
            }
            drop(pending);
            self.wake.notify_one();
        }
        if !review.pinned_first.is_empty() {
            tracing::info!(server = %owner, tools = review.pinned_first.len(), "pinned the tools a server listed first");
            self.publish(DomainEvent::ToolsPinned {
                mcp_server_id: owner.clone(),
                tools: review.pinned_first.clone(),
            });
        }
        let withheld = pinning.mode == PinMode::Enforce;
        for change in &review.new_changes {
            tracing::warn!(
                server = %owner,
                tool = %change.tool,
                change = change.kind(),
                withheld,
                "a tool's definition differs from its pin"
            );
            self.publish(DomainEvent::ToolDefinitionChanged {
                mcp_server_id: owner.clone(),
                tool: change.tool.clone(),
                change: change.kind(),
                pinned_digest: change.pinned_digest.clone(),
                observed_digest: change.observed_digest.clone(),
                withheld,
            });
        }
        let admitted = if review.admitted.len() == tools.len() {
            Arc::clone(tools)
        } else {
            Arc::new(review.admitted)
        };
        lock(&self.reviewed).insert(
            owner.clone(),
            Reviewed {
                tools: Arc::clone(tools),
                pinning,
                ledger_version: version,
                admitted: Arc::clone(&admitted),
            },
        );
        admitted
    }

    /// The ledger of `owner`, by tool name; empty when it has none.
    pub fn ledger(&self, owner: &ServerId) -> Vec<ToolPinView> {
        let ledger = lock(&self.ledger);
        let mut views: Vec<ToolPinView> = ledger
            .get(owner)
            .map(|pins| pins.values().map(ToolPinView::of).collect())
            .unwrap_or_default();
        views.sort_by(|a, b| a.pin.tool.cmp(&b.pin.tool));
        views
    }

    /// Every owner with a ledger, with its records, by owner then tool; only the records
    /// waiting for a decision when `pending_only`.
    pub fn all(&self, pending_only: bool) -> Vec<ToolPinView> {
        let ledger = lock(&self.ledger);
        let mut views: Vec<ToolPinView> = ledger
            .values()
            .flat_map(|pins| pins.values())
            .filter(|pin| !pending_only || pin.status().is_pending())
            .map(ToolPinView::of)
            .collect();
        views.sort_by(|a, b| (&a.pin.owner, &a.pin.tool).cmp(&(&b.pin.owner, &b.pin.tool)));
        views
    }

    /// Approves or rejects what `owner` reports for `tools` (every tool with a change waiting
    /// when `None`), by `by`. `expected` maps a tool to the observed digest the operator saw:
    /// a tool that reports another one now is refused. All or nothing: the first refusal
    /// changes nothing. Answers the decided records, written to the store.
    pub async fn decide(
        &self,
        owner: &ServerId,
        verdict: PinVerdict,
        tools: Option<&[String]>,
        expected: &HashMap<String, String>,
        by: &str,
    ) -> Result<Vec<ToolPinView>, ToolPinError> {
        let _writing = self.writing.lock().await;
        let now = self.now();
        let (decided, events) = {
            let mut ledger = lock(&self.ledger);
            let pins = ledger
                .get_mut(owner)
                .filter(|pins| !pins.is_empty())
                .ok_or_else(|| ToolPinError::UnknownOwner(owner.clone()))?;
            let names: Vec<String> = match tools {
                Some(tools) => tools.to_vec(),
                None => {
                    let mut waiting: Vec<String> = pins
                        .values()
                        .filter(|pin| pin.status().is_pending())
                        .map(|pin| pin.tool.clone())
                        .collect();
                    waiting.sort();
                    waiting
                }
            };
            // Decided on copies, and put in place only once every one succeeded.
            let mut decided = Vec::with_capacity(names.len());
            let mut events = Vec::with_capacity(names.len());
            for name in &names {
                let mut pin =
                    pins.get(name)
                        .cloned()
                        .ok_or_else(|| PinDecisionError::UnknownTool {
                            owner: owner.clone(),
                            tool: name.clone(),
                        })?;
                let expected = expected.get(name).map(String::as_str);
                let digest = match verdict {
                    PinVerdict::Approve => approve_pin(&mut pin, by, expected, now)?,
                    PinVerdict::Reject => reject_pin(&mut pin, by, expected, now)?,
                };
                events.push(match verdict {
                    PinVerdict::Approve => DomainEvent::ToolPinApproved {
                        mcp_server_id: owner.clone(),
                        tool: name.clone(),
                        digest,
                        approved_by: by.to_owned(),
                    },
                    PinVerdict::Reject => DomainEvent::ToolPinRejected {
                        mcp_server_id: owner.clone(),
                        tool: name.clone(),
                        digest,
                        rejected_by: by.to_owned(),
                    },
                });
                decided.push(pin);
            }
            (decided, events)
        };
        self.store.save_tool_pins(&decided).await?;
        {
            let mut ledger = lock(&self.ledger);
            let pins = ledger.entry(owner.clone()).or_default();
            for pin in &decided {
                pins.insert(pin.tool.clone(), pin.clone());
            }
        }
        for event in events {
            self.publish(event);
        }
        self.changed();
        Ok(decided.iter().map(ToolPinView::of).collect())
    }

    /// Forgets `owner`'s pins (by `by`): its next list is pinned as a first one.
    pub async fn reset(&self, owner: &ServerId, by: &str) -> Result<(), ToolPinError> {
        let _writing = self.writing.lock().await;
        if lock(&self.ledger).get(owner).is_none_or(HashMap::is_empty) {
            return Err(ToolPinError::UnknownOwner(owner.clone()));
        }
        self.store
            .delete_tool_pins(std::slice::from_ref(owner))
            .await?;
        lock(&self.ledger).remove(owner);
        lock(&self.pending)
            .records
            .retain(|(pending_owner, _)| pending_owner != owner);
        self.publish(DomainEvent::ToolPinsReset {
            mcp_server_id: owner.clone(),
            reset_by: by.to_owned(),
        });
        self.changed();
        Ok(())
    }

    /// Forgets the pins of a server or group that was removed (no event: the removal is one).
    pub async fn forget(&self, owner: &ServerId) {
        let _writing = self.writing.lock().await;
        if lock(&self.ledger).remove(owner).is_none() {
            return;
        }
        lock(&self.pending)
            .records
            .retain(|(pending_owner, _)| pending_owner != owner);
        lock(&self.reviewed).remove(owner);
        if let Err(error) = self
            .store
            .delete_tool_pins(std::slice::from_ref(owner))
            .await
        {
            tracing::warn!(server = %owner, %error, "could not forget the pins of a removed server");
        }
    }

    /// Writes what reviews changed, as they change; runs until aborted.
    pub async fn run(self: Arc<Self>) {
        loop {
            self.wake.notified().await;
            self.flush().await;
        }
    }

    /// Writes now what reviews changed and is not written yet.
    pub async fn flush(&self) {
        let _writing = self.writing.lock().await;
        let keys = std::mem::take(&mut lock(&self.pending).records);
        if keys.is_empty() {
            return;
        }
        let records: Vec<ToolPin> = {
            let ledger = lock(&self.ledger);
            keys.iter()
                .filter_map(|(owner, tool)| ledger.get(owner)?.get(tool).cloned())
                .collect()
        };
        if let Err(error) = self.store.save_tool_pins(&records).await {
            tracing::warn!(%error, records = records.len(), "could not write the pin ledger; it is written at the next change");
            lock(&self.pending).records.extend(keys);
        }
    }
}
