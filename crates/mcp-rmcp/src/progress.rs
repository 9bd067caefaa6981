//! Routing of upstream notifications the session acts on: `notifications/progress` to the caller
//! whose request they belong to, and `notifications/tools/list_changed` to a change counter.
//!
//! rmcp hands each incoming notification to the client handler on a task of its own, so
//! notifications could overtake each other and the final response. Progress is therefore taken
//! off the stream inside the transport, in arrival order, before the response that follows it
//! is routed to its caller. Tool-list changes are counted at the same place, so that a change
//! announced before an answer is visible by the time the answer is.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use mcpgw_core::tool::ProgressHandler;
use mcpgw_core::{ProgressUpdate, RelayRoutes};
use rmcp::RoleClient;
use rmcp::model::{JsonRpcMessage, ProgressNotificationParam, ProgressToken, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::watch;

use crate::session::{origin_of, relay_log_message};

/// Progress that arrived before its request's handler was registered is kept this long (in
/// notifications, across all tokens), because rmcp only reveals a request's progress token once
/// the request is on its way and a fast server may already have answered with progress.
const UNCLAIMED_PROGRESS_CAPACITY: usize = 64;

#[derive(Default)]
pub(crate) struct ProgressRoutes {
    state: Mutex<RouteState>,
}

#[derive(Default)]
struct RouteState {
    handlers: HashMap<ProgressToken, ProgressHandler>,
    unclaimed: VecDeque<ProgressNotificationParam>,
}

impl ProgressRoutes {
    fn state(&self) -> MutexGuard<'_, RouteState> {
        // A handler that panicked leaves the map itself intact.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands one notification to its handler, or keeps it for a handler about to register.
    ///
    /// Handlers run under the lock so that notifications reach them in arrival order; they
    /// must be quick and must not call back into the session.
    pub(crate) fn deliver(&self, progress: ProgressNotificationParam) {
        let mut state = self.state();
        if let Some(handler) = state.handlers.get(&progress.progress_token) {
            handler(progress_update(progress));
            return;
        }
        if state.unclaimed.len() == UNCLAIMED_PROGRESS_CAPACITY {
            state.unclaimed.pop_front();
        }
        state.unclaimed.push_back(progress);
    }

    /// Routes the progress of `token` to `handler` until the returned registration is dropped,
    /// first replaying what arrived for it already.
    pub(crate) fn register(
        self: &Arc<Self>,
        token: ProgressToken,
        handler: ProgressHandler,
    ) -> ProgressRegistration {
        let mut state = self.state();
        let unclaimed = std::mem::take(&mut state.unclaimed);
        for progress in unclaimed {
            if progress.progress_token == token {
                handler(progress_update(progress));
            } else {
                state.unclaimed.push_back(progress);
            }
        }
        state.handlers.insert(token.clone(), handler);
        ProgressRegistration {
            routes: Arc::clone(self),
            token,
        }
    }
}

fn progress_update(progress: ProgressNotificationParam) -> ProgressUpdate {
    ProgressUpdate {
        progress: progress.progress,
        total: progress.total,
        message: progress.message,
    }
}

/// Ends the routing of one request's progress when the request is over.
pub(crate) struct ProgressRegistration {
    routes: Arc<ProgressRoutes>,
    token: ProgressToken,
}

impl Drop for ProgressRegistration {
    fn drop(&mut self) {
        self.routes.state().handlers.remove(&self.token);
    }
}

/// A transport that takes progress notifications out of the incoming stream and delivers them
/// through [`ProgressRoutes`], and counts tool-list change announcements; everything else (the
/// announcements included) passes through untouched.
pub(crate) struct NotificationRelayTransport<T> {
    inner: T,
    routes: Arc<ProgressRoutes>,
    relay_routes: Arc<RelayRoutes>,
    tool_list_changes: watch::Sender<u64>,
}

impl<T> NotificationRelayTransport<T> {
    pub(crate) fn new(
        inner: T,
        routes: Arc<ProgressRoutes>,
        relay_routes: Arc<RelayRoutes>,
        tool_list_changes: watch::Sender<u64>,
    ) -> Self {
        Self {
            inner,
            routes,
            relay_routes,
            tool_list_changes,
        }
    }
}

impl<T> Transport<RoleClient> for NotificationRelayTransport<T>
where
    T: Transport<RoleClient>,
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    // Cancel-safe as long as the inner `receive` is: rmcp polls it inside `select!`, and the
    // only await point here is the inner one.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            match self.inner.receive().await? {
                JsonRpcMessage::Notification(notification) => match notification.notification {
                    ServerNotification::ProgressNotification(progress) => {
                        self.routes.deliver(progress.params);
                    }
                    // Log messages go to the calling client in order with the call's answer,
                    // like progress.
                    ServerNotification::LoggingMessageNotification(log) => {
                        if let Ok(params) = serde_json::to_value(&log.params) {
                            let origin = origin_of(&log.extensions);
                            relay_log_message(&self.relay_routes, params, origin.as_deref());
                        }
                    }
                    other => {
                        if matches!(other, ServerNotification::ToolListChangedNotification(_)) {
                            self.tool_list_changes
                                .send_modify(|changes| *changes = changes.wrapping_add(1));
                        }
                        return Some(JsonRpcMessage::Notification(
                            rmcp::model::JsonRpcNotification {
                                jsonrpc: notification.jsonrpc,
                                notification: other,
                            },
                        ));
                    }
                },
                message => return Some(message),
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::NumberOrString;

    fn token(value: i64) -> ProgressToken {
        ProgressToken(NumberOrString::Number(value))
    }

    fn recorder() -> (ProgressHandler, Arc<Mutex<Vec<f64>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        let handler: ProgressHandler =
            Arc::new(move |update: ProgressUpdate| sink.lock().unwrap().push(update.progress));
        (handler, seen)
    }

    #[test]
    fn progress_that_arrives_before_registration_is_replayed_in_order() {
        let routes = Arc::new(ProgressRoutes::default());
        routes.deliver(ProgressNotificationParam::new(token(1), 1.0));
        routes.deliver(ProgressNotificationParam::new(token(2), 99.0));
        routes.deliver(ProgressNotificationParam::new(token(1), 2.0));
        let (handler, seen) = recorder();
        let registration = routes.register(token(1), handler);
        routes.deliver(ProgressNotificationParam::new(token(1), 3.0));
        assert_eq!(*seen.lock().unwrap(), [1.0, 2.0, 3.0]);

        drop(registration);
        routes.deliver(ProgressNotificationParam::new(token(1), 4.0));
        assert_eq!(
            *seen.lock().unwrap(),
            [1.0, 2.0, 3.0],
            "no delivery after the call ended"
        );
    }

    #[test]
    fn unclaimed_progress_is_bounded() {
        let routes = Arc::new(ProgressRoutes::default());
        for index in 0..(UNCLAIMED_PROGRESS_CAPACITY as i64 + 10) {
            routes.deliver(ProgressNotificationParam::new(token(index), 0.0));
        }
        assert_eq!(routes.state().unclaimed.len(), UNCLAIMED_PROGRESS_CAPACITY);
        let (handler, seen) = recorder();
        let _registration = routes.register(token(0), handler);
        assert!(
            seen.lock().unwrap().is_empty(),
            "the oldest entries were dropped"
        );
    }
}
