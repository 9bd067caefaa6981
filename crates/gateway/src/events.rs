//! The in-process event bus: every domain event is logged and fanned out to subscribers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use mcpgw_core::{DomainEvent, EventSink, Timestamp};
use tokio::sync::broadcast;

/// A domain event with the identity and time the bus gave it.
#[derive(Debug, Clone)]
pub struct PublishedEvent {
    pub event_id: u64,
    pub occurred_at: Timestamp,
    pub event: DomainEvent,
}

/// Logs every event and broadcasts it to subscribers. A subscriber that falls behind loses its
/// oldest events (the broadcast channel's lag), and publishing never waits for anyone.
pub struct EventBus {
    next_id: AtomicU64,
    sender: broadcast::Sender<Arc<PublishedEvent>>,
    downstream: Vec<Arc<dyn EventSink>>,
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
            downstream: Vec::new(),
        }
    }

    /// Also hands every event to `sink` (an event log, say).
    #[must_use]
    pub fn with_sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.downstream.push(sink);
        self
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<PublishedEvent>> {
        self.sender.subscribe()
    }
}

impl EventSink for EventBus {
    fn publish(&self, occurred_at: Timestamp, event: DomainEvent) {
        let event_id = self.next_id.fetch_add(1, Ordering::Relaxed);
        // Events are logged as JSON so that log shippers can forward them as they are.
        let fields = serde_json::to_string(&event).unwrap_or_default();
        match &event {
            DomainEvent::ToolInvocationCompleted { .. }
            | DomainEvent::ToolInvocationFailed { .. } => {
                tracing::debug!(event_id, event_type = event.event_type(), event = %fields, "domain event");
            }
            _ => {
                tracing::info!(event_id, event_type = event.event_type(), event = %fields, "domain event");
            }
        }
        for sink in &self.downstream {
            sink.publish(occurred_at, event.clone());
        }
        // An error only means nobody listens right now.
        let _ = self.sender.send(Arc::new(PublishedEvent {
            event_id,
            occurred_at,
            event,
        }));
    }
}
