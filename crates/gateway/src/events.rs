//! The in-process event bus: every domain event is logged and fanned out to subscribers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use mcpgw_core::{DomainEvent, EventObserver, EventSink, PublishedEvent, Timestamp};
use tokio::sync::broadcast;

/// Logs every event and broadcasts it to subscribers. A subscriber that falls behind loses its
/// oldest events (the broadcast channel's lag), and publishing never waits for anyone.
pub struct EventBus {
    next_id: AtomicU64,
    sender: broadcast::Sender<Arc<PublishedEvent>>,
    observers: std::sync::RwLock<Vec<Arc<dyn EventObserver>>>,
}

impl std::fmt::Debug for EventBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBus")
            .field("subscribers", &self.sender.receiver_count())
            .finish()
    }
}

impl EventBus {
    pub fn new(capacity: usize) -> Self {
        Self {
            next_id: AtomicU64::new(1),
            sender: broadcast::channel(capacity.max(1)).0,
            observers: std::sync::RwLock::new(Vec::new()),
        }
    }

    /// Also hands every event, with its id, to `observer` (the invocation history, an event
    /// log), inline and in order.
    pub fn add_observer(&self, observer: Arc<dyn EventObserver>) {
        self.observers
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(observer);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<PublishedEvent>> {
        self.sender.subscribe()
    }
}

impl EventSink for EventBus {
    fn publish(&self, occurred_at: Timestamp, event: DomainEvent) {
        let event_id = self.next_id.fetch_add(1, Ordering::Relaxed);
        // Events are logged as JSON so that log shippers can forward them as they are. Tool
        // invocations are frequent and logged at debug level: serialize only when it is on.
        let frequent = matches!(
            event,
            DomainEvent::ToolInvocationCompleted { .. } | DomainEvent::ToolInvocationFailed { .. }
        );
        if frequent {
            if tracing::enabled!(tracing::Level::DEBUG) {
                let fields = serde_json::to_string(&event).unwrap_or_default();
                tracing::debug!(event_id, event_type = event.event_type(), event = %fields, "domain event");
            }
        } else if tracing::enabled!(tracing::Level::INFO) {
            let fields = serde_json::to_string(&event).unwrap_or_default();
            tracing::info!(event_id, event_type = event.event_type(), event = %fields, "domain event");
        }
        let published = Arc::new(PublishedEvent {
            event_id,
            occurred_at,
            event,
        });
        for observer in self
            .observers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            observer.observe(&published);
        }
        // An error only means nobody listens right now.
        let _ = self.sender.send(published);
    }
}
