//! The session manager of the Streamable HTTP endpoint: rmcp's local sessions, whose ids carry
//! their session when the replicas share a secret (see [`crate::session_ids`]).
//!
//! Without a shared secret this is rmcp's `LocalSessionManager` unchanged: random ids, known
//! only to the process that issued them.
//!
//! With one, a new session's id is minted from its client's `initialize` (which the endpoint
//! hands over in [`GatewaySessions::initializing`], around rmcp's handling of the request). A
//! request naming a session this replica does not hold makes rmcp ask the ids
//! ([`SessionIds`] is its `SessionStore`) and, when the id verifies, re-create the session
//! here: [`SessionManager::restore_session`] gives it a fresh worker, and rmcp replays
//! `initialize` and `notifications/initialized` on it before serving the request.
//!
//! A session being re-created is not visible to [`SessionManager::has_session`] until its
//! `initialized` was delivered: a request that arrives meanwhile waits for the re-creation
//! (rmcp serializes them per id) instead of reaching a worker that has not seen `initialize`,
//! which would end it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::Stream;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, InitializeRequestParams, ServerJsonRpcMessage,
};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionHandle, LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
    SessionError, create_local_session,
};
use rmcp::transport::streamable_http_server::session::{
    RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};
use tokio::sync::Notify;

use crate::session_ids::SessionIds;

/// How long a re-creation waits for the worker of an abandoned one to end.
const ABANDONED_WAIT: Duration = Duration::from_secs(2);

tokio::task_local! {
    /// The `initialize` a new session is being created for, with the negotiated version.
    static INITIALIZING: InitializeRequestParams;
}

/// A session being re-created here.
enum Resuming {
    /// Its worker, waiting for rmcp to replay the handshake.
    Replaying(LocalSessionHandle),
    /// A re-creation whose request was dropped before the handshake was replayed (its client
    /// hung up): the worker ends, and its end, reported through `close_session`, wakes the
    /// next re-creation of the id.
    Abandoned(Arc<Notify>),
}

/// rmcp's local sessions, with resumable ids when [`SessionIds`] are given.
pub(crate) struct GatewaySessions {
    local: LocalSessionManager,
    ids: Option<Arc<SessionIds>>,
    resuming: Mutex<HashMap<SessionId, Resuming>>,
}

impl std::fmt::Debug for GatewaySessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewaySessions")
            .field("resumable", &self.ids.is_some())
            .finish_non_exhaustive()
    }
}

impl GatewaySessions {
    pub(crate) fn new(local: LocalSessionManager, ids: Option<Arc<SessionIds>>) -> Self {
        Self {
            local,
            ids,
            resuming: Mutex::new(HashMap::new()),
        }
    }

    /// The sessions this replica holds.
    pub(crate) fn local(&self) -> &LocalSessionManager {
        &self.local
    }

    /// The resumable ids, when the replicas share a secret.
    pub(crate) fn ids(&self) -> Option<&Arc<SessionIds>> {
        self.ids.as_ref()
    }

    /// Runs `answer` (rmcp's handling of an `initialize` request) so that the session it
    /// creates gets an id carrying `params`.
    pub(crate) async fn initializing<F: Future>(
        params: InitializeRequestParams,
        answer: F,
    ) -> F::Output {
        INITIALIZING.scope(params, answer).await
    }

    /// Whether this replica holds session `id` (and has replayed its handshake, when it
    /// re-created it). Reads the id as given: nothing is allocated, decoded or verified.
    pub(crate) async fn holds(&self, id: &str) -> bool {
        self.local.sessions.read().await.contains_key(id)
    }

    /// Whether session `id` exists for a request: held here, or resumable here.
    pub(crate) async fn holds_or_resumes(&self, id: &str) -> bool {
        self.holds(id).await
            || self
                .ids
                .as_ref()
                .is_some_and(|ids| ids.resumable(id).is_some())
    }

    fn resuming(&self) -> MutexGuard<'_, HashMap<SessionId, Resuming>> {
        self.resuming.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The worker of a session being re-created, if `id` is one.
    fn replaying(&self, id: &SessionId) -> Option<LocalSessionHandle> {
        self.ids.as_ref()?;
        match self.resuming().get(id) {
            Some(Resuming::Replaying(handle)) => Some(handle.clone()),
            _ => None,
        }
    }

    /// Makes a re-created session visible: its handshake was replayed.
    async fn publish(&self, id: &SessionId) {
        let replayed = {
            let mut resuming = self.resuming();
            match resuming.remove(id) {
                Some(Resuming::Replaying(handle)) => Some(handle),
                Some(abandoned) => {
                    resuming.insert(id.clone(), abandoned);
                    None
                }
                None => None,
            }
        };
        if let Some(handle) = replayed {
            self.local.sessions.write().await.insert(id.clone(), handle);
        }
    }

    /// A fresh worker for session `id`, with its handle.
    fn new_worker(
        &self,
        id: &SessionId,
    ) -> (LocalSessionHandle, WorkerTransport<LocalSessionWorker>) {
        let (handle, worker) = create_local_session(id.clone(), self.local.session_config.clone());
        (handle, WorkerTransport::spawn(worker))
    }
}

fn closed(result: Result<(), SessionError>) -> Result<(), LocalSessionManagerError> {
    match result {
        // The worker ended already: nothing left to close.
        Ok(()) | Err(SessionError::SessionServiceTerminated) => Ok(()),
        Err(error) => Err(error.into()),
    }
}

impl SessionManager for GatewaySessions {
    type Error = LocalSessionManagerError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let minted = self.ids.as_ref().and_then(|ids| {
            INITIALIZING
                .try_with(|params| ids.mint(params))
                .ok()
                .flatten()
        });
        let Some(id) = minted else {
            return self.local.create_session().await;
        };
        let id: SessionId = Arc::from(id);
        let (handle, transport) = self.new_worker(&id);
        self.local.sessions.write().await.insert(id.clone(), handle);
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        if let Some(handle) = self.replaying(id) {
            return Ok(handle.initialize(message).await?);
        }
        self.local.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.local.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let resuming = if self.ids.is_some() {
            self.resuming().remove(id)
        } else {
            None
        };
        match resuming {
            Some(Resuming::Replaying(handle)) => closed(handle.close().await)?,
            Some(Resuming::Abandoned(ended)) => {
                // The abandoned worker's end, reported by rmcp: the session was never held.
                ended.notify_one();
                return Ok(());
            }
            None => {}
        }
        self.local.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + 'static, Self::Error> {
        self.local.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        if let Some(handle) = self.replaying(id) {
            let initialized = matches!(
                &message,
                ClientJsonRpcMessage::Notification(notification)
                    if matches!(
                        notification.notification,
                        ClientNotification::InitializedNotification(_)
                    )
            );
            handle.push_message(message, None).await?;
            if initialized {
                self.publish(id).await;
            }
            return Ok(());
        }
        self.local.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + 'static, Self::Error> {
        self.local.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + 'static, Self::Error> {
        self.local.resume(id, last_event_id).await
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        if self.ids.is_none() {
            return Ok(RestoreOutcome::NotSupported);
        }
        if self.local.has_session(&id).await? {
            return Ok(RestoreOutcome::AlreadyPresent);
        }
        // rmcp re-creates one id at a time: a worker still here for it belongs to a
        // re-creation that was abandoned. Dropping its handle ends it; its end is awaited so
        // that rmcp's cleanup of it cannot close the new one.
        let abandoned = {
            let mut resuming = self.resuming();
            match resuming.get(&id) {
                Some(Resuming::Replaying(_)) => {
                    let ended = Arc::new(Notify::new());
                    resuming.insert(id.clone(), Resuming::Abandoned(Arc::clone(&ended)));
                    Some(ended)
                }
                Some(Resuming::Abandoned(ended)) => Some(Arc::clone(ended)),
                None => None,
            }
        };
        if let Some(ended) = abandoned
            && tokio::time::timeout(ABANDONED_WAIT, ended.notified())
                .await
                .is_err()
        {
            tracing::debug!(session = %id, "an abandoned mcp session did not end in time");
        }
        let (handle, transport) = self.new_worker(&id);
        self.resuming().insert(id, Resuming::Replaying(handle));
        Ok(RestoreOutcome::Restored(transport))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> InitializeRequestParams {
        serde_json::from_value(serde_json::json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        }))
        .unwrap()
    }

    fn sessions(ids: Option<Arc<SessionIds>>) -> GatewaySessions {
        GatewaySessions::new(LocalSessionManager::default(), ids)
    }

    fn fleet_ids() -> Arc<SessionIds> {
        Arc::new(SessionIds::new("fleet", Some(Duration::from_secs(60))))
    }

    #[tokio::test]
    async fn new_sessions_get_resumable_ids_only_with_a_secret_and_an_initialize() {
        let ids = fleet_ids();
        let fleet = sessions(Some(Arc::clone(&ids)));
        let (id, _transport) = GatewaySessions::initializing(params(), fleet.create_session())
            .await
            .unwrap();
        assert!(ids.resumable(&id).is_some(), "{id}");
        assert!(fleet.has_session(&id).await.unwrap());
        // Outside an `initialize` the id is a plain random one.
        let (plain, _transport) = fleet.create_session().await.unwrap();
        assert!(ids.resumable(&plain).is_none());
        assert!(fleet.has_session(&plain).await.unwrap());
        // Without a secret, nothing is minted and nothing restored.
        let alone = sessions(None);
        let (random, _transport) = GatewaySessions::initializing(params(), alone.create_session())
            .await
            .unwrap();
        assert!(ids.resumable(&random).is_none());
        assert!(matches!(
            alone.restore_session(id.clone()).await.unwrap(),
            RestoreOutcome::NotSupported
        ));
    }

    #[tokio::test]
    async fn a_session_being_re_created_is_visible_only_once_its_handshake_was_replayed() {
        let ids = fleet_ids();
        let id: SessionId = Arc::from(ids.mint(&params()).unwrap());
        let here = sessions(Some(ids));
        let RestoreOutcome::Restored(_transport) = here.restore_session(id.clone()).await.unwrap()
        else {
            panic!("not restored");
        };
        assert!(!here.has_session(&id).await.unwrap());
        // Bad input: a notification other than `initialized` does not publish it.
        let other: ClientJsonRpcMessage = serde_json::from_value(serde_json::json!({
            "jsonrpc": "2.0", "method": "notifications/roots/list_changed"
        }))
        .unwrap();
        here.accept_message(&id, other).await.unwrap();
        assert!(!here.has_session(&id).await.unwrap());
        let initialized: ClientJsonRpcMessage = serde_json::from_value(serde_json::json!({
            "jsonrpc": "2.0", "method": "notifications/initialized"
        }))
        .unwrap();
        here.accept_message(&id, initialized).await.unwrap();
        assert!(here.has_session(&id).await.unwrap());
        assert!(matches!(
            here.restore_session(id.clone()).await.unwrap(),
            RestoreOutcome::AlreadyPresent
        ));
        here.close_session(&id).await.unwrap();
        assert!(!here.has_session(&id).await.unwrap());
    }

    #[tokio::test]
    async fn an_abandoned_re_creation_is_replaced_once_its_worker_ended() {
        let ids = fleet_ids();
        let id: SessionId = Arc::from(ids.mint(&params()).unwrap());
        let here = Arc::new(sessions(Some(ids)));
        let RestoreOutcome::Restored(_first) = here.restore_session(id.clone()).await.unwrap()
        else {
            panic!("not restored");
        };
        // The next re-creation of the id waits for the first worker's end, which rmcp reports
        // with `close_session`; that report must not close the new session.
        let again = tokio::spawn({
            let here = Arc::clone(&here);
            let id = id.clone();
            async move { here.restore_session(id).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!again.is_finished(), "it waits for the abandoned worker");
        here.close_session(&id).await.unwrap();
        let RestoreOutcome::Restored(_second) = again.await.unwrap().unwrap() else {
            panic!("not restored");
        };
        assert!(matches!(
            here.resuming().get(&id),
            Some(Resuming::Replaying(_))
        ));
    }
}
