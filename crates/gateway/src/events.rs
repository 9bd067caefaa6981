//! The in-process event bus: every domain event is logged and fanned out to subscribers.

use std::cell::RefCell;
use std::collections::VecDeque;
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
    /// What the bundled server uses: about three seconds of 5,000 events per second, so a
    /// subscriber that keeps up on average rides out a pause (a garbage-collecting client, a
    /// busy worker) without losing events. Each slot holds one shared pointer.
    pub const DEFAULT_CAPACITY: usize = 16_384;

    /// A bus whose subscribers may fall `capacity` events behind before they lose the oldest.
    pub fn new(capacity: usize) -> Self {
        Self {
            next_id: AtomicU64::new(1),
            sender: broadcast::channel(capacity.max(1)).0,
            observers: std::sync::RwLock::new(Vec::new()),
        }
    }

    /// Numbers the next events after `last_event_id` (the largest id of a persistent event
    /// log), so that ids stay unique across restarts.
    #[must_use]
    pub fn continuing_after(self, last_event_id: u64) -> Self {
        self.next_id
            .store(last_event_id.saturating_add(1), Ordering::Relaxed);
        self
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

/// Events an observer published while the bus was delivering another one.
type Queued = VecDeque<(Timestamp, DomainEvent)>;

thread_local! {
    /// The buses this thread is publishing on right now (by address), each with the events
    /// that observers published on it meanwhile.
    static PUBLISHING: RefCell<Vec<(usize, Queued)>> = const { RefCell::new(Vec::new()) };
}

impl EventSink for EventBus {
    /// Publishes in order. An observer may publish in turn (the groups react to a server's
    /// state change with their own events): such an event is queued and published once the
    /// current one has reached every observer and subscriber, so ids stay in causal order and
    /// observers are never re-entered.
    fn publish(&self, occurred_at: Timestamp, event: DomainEvent) {
        let bus = std::ptr::from_ref(self).addr();
        let mut pending = Some((occurred_at, event));
        PUBLISHING.with(|publishing| {
            let mut publishing = publishing.borrow_mut();
            match publishing.iter_mut().find(|(active, _)| *active == bus) {
                Some((_, queue)) => queue.extend(pending.take()),
                None => publishing.push((bus, VecDeque::new())),
            }
        });
        let Some(first) = pending else {
            // Queued behind the event being published now.
            return;
        };
        // Clears this bus's entry even if an observer panics, so the thread can publish again.
        struct Active(usize);
        impl Drop for Active {
            fn drop(&mut self) {
                PUBLISHING.with(|publishing| {
                    publishing
                        .borrow_mut()
                        .retain(|(active, _)| *active != self.0);
                });
            }
        }
        let _active = Active(bus);
        let mut next = Some(first);
        while let Some((occurred_at, event)) = next {
            self.deliver(occurred_at, event);
            next = PUBLISHING.with(|publishing| {
                publishing
                    .borrow_mut()
                    .iter_mut()
                    .find(|(active, _)| *active == bus)
                    .and_then(|(_, queue)| queue.pop_front())
            });
        }
    }
}

impl EventBus {
    fn deliver(&self, occurred_at: Timestamp, event: DomainEvent) {
        let event_id = self.next_id.fetch_add(1, Ordering::Relaxed);
        // Events are logged as JSON so that log shippers can forward them as they are. Tool
        // invocations and granted requests are as frequent as requests and logged at debug
        // level: serialize only when it is on. Refusals stay at info. So do the registrations
        // of the configuration's servers: one per server at every start (a thousand lines for
        // a thousand servers, most of the start-up's work), summed up by the start's
        // "mcp servers registered" line and named by a reload's `ConfigurationReloaded`.
        let frequent = matches!(
            event,
            DomainEvent::ToolInvocationCompleted { .. }
                | DomainEvent::ToolInvocationFailed { .. }
                | DomainEvent::AuthenticationSucceeded { .. }
                | DomainEvent::AuthorizationGranted { .. }
                | DomainEvent::McpServerRegistered {
                    origin: "config",
                    ..
                }
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use mcpgw_core::ServerId;

    use super::*;

    fn removed(raw: &str) -> DomainEvent {
        DomainEvent::McpServerRemoved {
            mcp_server_id: ServerId::parse(raw).unwrap(),
        }
    }

    /// Publishes `follow_up` on the bus when it sees `a`, and records what it saw.
    struct Reacting {
        bus: std::sync::Weak<EventBus>,
        seen: Mutex<Vec<(u64, String)>>,
        depth: Mutex<u32>,
    }

    impl EventObserver for Reacting {
        fn observe(&self, published: &PublishedEvent) {
            {
                let mut depth = self.depth.lock().unwrap();
                assert_eq!(*depth, 0, "an observer was re-entered");
                *depth += 1;
            }
            let id = published.event.mcp_server_id().unwrap().to_string();
            self.seen
                .lock()
                .unwrap()
                .push((published.event_id, id.clone()));
            if id == "a"
                && let Some(bus) = self.bus.upgrade()
            {
                bus.publish(published.occurred_at, removed("b"));
                bus.publish(published.occurred_at, removed("c"));
            }
            *self.depth.lock().unwrap() -= 1;
        }
    }

    #[test]
    fn events_published_by_an_observer_follow_the_one_it_reacted_to() {
        let bus = Arc::new(EventBus::new(16));
        let observer = Arc::new(Reacting {
            bus: Arc::downgrade(&bus),
            seen: Mutex::new(Vec::new()),
            depth: Mutex::new(0),
        });
        bus.add_observer(observer.clone());
        let mut subscriber = bus.subscribe();
        bus.publish(Timestamp::from_unix_micros(0), removed("a"));
        bus.publish(Timestamp::from_unix_micros(0), removed("d"));
        let seen = observer.seen.lock().unwrap().clone();
        let expected: Vec<(u64, String)> = [(1, "a"), (2, "b"), (3, "c"), (4, "d")]
            .into_iter()
            .map(|(id, server)| (id, server.to_owned()))
            .collect();
        assert_eq!(seen, expected);
        let mut broadcast = Vec::new();
        while let Ok(published) = subscriber.try_recv() {
            broadcast.push(published.event_id);
        }
        assert_eq!(broadcast, [1, 2, 3, 4], "subscribers see the same order");
    }
}
