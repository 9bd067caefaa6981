//! Traffic that an upstream server starts: requests it sends to the client (`sampling/
//! createMessage`, `elicitation/create`, `roots/list`) and notifications (`notifications/
//! message`), relayed to the downstream client whose call caused them.
//!
//! Two halves meet here, both without I/O:
//!
//! - A front end gives each call a [`ClientRelay`]: a channel to the client that made it, and
//!   what that client declared it can answer. The front end drains the channel while the call
//!   runs and sends what comes out to the client on the call's own stream, in order with the
//!   call's progress and before its answer.
//! - An upstream session keeps [`RelayRoutes`]: the calls it has in flight and their relays.
//!   When the server sends a request, the session asks the routes which call it belongs to:
//!   the call whose stream it came on, when the transport can tell (Streamable HTTP), else the
//!   calls in flight, when they all come from one client session.
//!
//! Over a transport that cannot tell (stdio), two clients with calls in flight at once would
//! make a request ambiguous. The routes prevent that instead of guessing: a call from a client
//! that can answer requests runs on such a session only while no other client's call does,
//! and calls from other clients wait their turn (calls from clients that can answer nothing
//! run side by side as before). A request that has nowhere to go (nobody calling, a client
//! that did not declare the capability, a call that ended) is answered at once with a
//! JSON-RPC error, never left to wait.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::census::{RelayCounts, RelayOutcome};

/// JSON-RPC "method not found": what a client answers for a capability it lacks.
pub const METHOD_NOT_FOUND: i32 = -32601;
/// JSON-RPC "internal error": the gateway could not deliver the request.
pub const INTERNAL_ERROR: i32 = -32603;

/// MCP's log levels (RFC 5424 severities), least severe first.
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// A log level's severity (0 for `debug`, 7 for `emergency`); `None` for a name that is not a
/// level.
pub fn log_severity(level: &str) -> Option<usize> {
    LOG_LEVELS.iter().position(|known| *known == level)
}

/// The downstream connection a call came on. Calls of one connection share it; it tells the
/// routes which calls belong to the same client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RelaySession(u64);

impl RelaySession {
    /// A session no other connection has.
    pub fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl Default for RelaySession {
    fn default() -> Self {
        Self::new()
    }
}

/// What a client declared it can be asked (its `initialize` capabilities).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayCapabilities {
    pub sampling: bool,
    /// Form-mode elicitation (what an empty `elicitation: {}` declares).
    pub elicitation_form: bool,
    /// URL-mode elicitation.
    pub elicitation_url: bool,
    pub roots: bool,
}

impl RelayCapabilities {
    /// Everything a client can be asked.
    pub const ALL: Self = Self {
        sampling: true,
        elicitation_form: true,
        elicitation_url: true,
        roots: true,
    };

    /// As MCP `ClientCapabilities` JSON. `roots.listChanged` is never declared: the gateway
    /// does not pass a client's roots changes on.
    pub fn to_client_capabilities(self) -> Value {
        let mut declared = serde_json::Map::new();
        if self.sampling {
            declared.insert("sampling".to_owned(), serde_json::json!({}));
        }
        if self.elicitation_form || self.elicitation_url {
            let mut modes = serde_json::Map::new();
            if self.elicitation_form {
                modes.insert("form".to_owned(), serde_json::json!({}));
            }
            if self.elicitation_url {
                modes.insert("url".to_owned(), serde_json::json!({}));
            }
            declared.insert("elicitation".to_owned(), Value::Object(modes));
        }
        if self.roots {
            declared.insert("roots".to_owned(), serde_json::json!({}));
        }
        Value::Object(declared)
    }

    /// Reads MCP `ClientCapabilities` JSON.
    pub fn from_client_capabilities(capabilities: &Value) -> Self {
        let present = |key: &str| capabilities.get(key).is_some_and(|value| !value.is_null());
        let elicitation = capabilities.get("elicitation").filter(|v| !v.is_null());
        let (form, url) = match elicitation {
            None => (false, false),
            Some(declared) => {
                let form = declared.get("form").is_some_and(|v| !v.is_null());
                let url = declared.get("url").is_some_and(|v| !v.is_null());
                // An elicitation capability that names no mode means form mode.
                (form || !url, url)
            }
        };
        Self {
            sampling: present("sampling"),
            elicitation_form: form,
            elicitation_url: url,
            roots: present("roots"),
        }
    }

    /// Whether the client can be asked anything at all.
    pub fn answers_requests(self) -> bool {
        self.sampling || self.elicitation_form || self.elicitation_url || self.roots
    }

    /// The capability `method` (with `params`) needs, when the client lacks it.
    pub fn missing_for(self, method: &str, params: &Value) -> Option<&'static str> {
        match method {
            "sampling/createMessage" if !self.sampling => Some("sampling"),
            "roots/list" if !self.roots => Some("roots"),
            "elicitation/create" => {
                let url_mode = params.get("mode").and_then(Value::as_str) == Some("url");
                match (url_mode, self.elicitation_url, self.elicitation_form) {
                    (true, false, _) => Some("elicitation.url"),
                    (false, _, false) => Some("elicitation.form"),
                    _ => None,
                }
            }
            "sampling/createMessage" | "roots/list" | "ping" => None,
            _ => Some("a capability for this method"),
        }
    }
}

fn cannot_be_sent(method: &str) -> RelayError {
    RelayError::new(
        METHOD_NOT_FOUND,
        format!(
            "the client that made the call cannot be sent {method}: it did not declare the \
             capability for it (or its protocol era has no requests from servers mid-call)"
        ),
    )
}

/// A JSON-RPC error for the upstream that sent a request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct RelayError {
    pub code: i32,
    pub message: String,
    pub data: Option<Value>,
}

impl RelayError {
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    fn no_client(method: &str, why: &str) -> Self {
        Self::new(
            INTERNAL_ERROR,
            format!("the gateway has no client to relay {method} to: {why}"),
        )
    }
}

/// Something for the client, as it comes out of a [`ClientRelay`]'s channel.
#[derive(Debug)]
pub enum Relayed {
    /// A notification (`notifications/message`, ...).
    Notification { method: String, params: Value },
    /// A request; its answer (the client's result, or its error) goes to `answer`.
    Request {
        method: String,
        params: Value,
        answer: oneshot::Sender<Result<Value, RelayError>>,
    },
}

/// The way back to the client that made a call. Cheap to clone.
#[derive(Clone)]
pub struct ClientRelay {
    inner: Arc<RelayInner>,
}

struct RelayInner {
    session: RelaySession,
    capabilities: RelayCapabilities,
    /// Whether the client is on the line while the call runs (an `initialize`-era session),
    /// rather than asked through the call's result and answering with a later request.
    live: bool,
    sender: mpsc::UnboundedSender<Relayed>,
    /// Where what happens to the messages relayed through it is counted.
    counts: &'static RelayCounts,
}

impl std::fmt::Debug for ClientRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientRelay")
            .field("session", &self.inner.session)
            .field("capabilities", &self.inner.capabilities)
            .finish_non_exhaustive()
    }
}

impl ClientRelay {
    /// A relay for one call of `session`, and the receiving end the front end drains while
    /// the call runs. Dropping the receiver (the call ended) fails the requests still waiting.
    pub fn channel(
        session: RelaySession,
        capabilities: RelayCapabilities,
    ) -> (Self, mpsc::UnboundedReceiver<Relayed>) {
        Self::new(session, capabilities, true)
    }

    /// Like [`ClientRelay::channel`], for a client that is not on the line while the call
    /// runs: a 2026-07-28 client, asked through an input-required result, which answers with
    /// its next request (or never). Such a call does not take turns with other clients (it
    /// would hold its server while it waits), so over a transport that cannot tell which call
    /// a request belongs to, a request of it that comes while other clients' calls run is
    /// refused rather than guessed.
    pub fn stateless_channel(
        session: RelaySession,
        capabilities: RelayCapabilities,
    ) -> (Self, mpsc::UnboundedReceiver<Relayed>) {
        Self::new(session, capabilities, false)
    }

    fn new(
        session: RelaySession,
        capabilities: RelayCapabilities,
        live: bool,
    ) -> (Self, mpsc::UnboundedReceiver<Relayed>) {
        Self::counted_in(session, capabilities, live, RelayCounts::global())
    }

    fn counted_in(
        session: RelaySession,
        capabilities: RelayCapabilities,
        live: bool,
        counts: &'static RelayCounts,
    ) -> (Self, mpsc::UnboundedReceiver<Relayed>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        let relay = Self {
            inner: Arc::new(RelayInner {
                session,
                capabilities,
                live,
                sender,
                counts,
            }),
        };
        (relay, receiver)
    }

    /// Whether the client is on the line while the call runs (see
    /// [`ClientRelay::stateless_channel`]).
    pub fn is_live(&self) -> bool {
        self.inner.live
    }

    pub fn session(&self) -> RelaySession {
        self.inner.session
    }

    pub fn capabilities(&self) -> RelayCapabilities {
        self.inner.capabilities
    }

    /// Sends a request to the client and waits for its answer. A capability the client did
    /// not declare is refused at once with "method not found", as the client itself would;
    /// a call that ended (answered, cancelled, its client gone) fails at once too.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RelayError> {
        let (answer, outcome) = self.request_uncounted(method, params).await;
        self.inner.counts.add(method, outcome);
        answer
    }

    async fn request_uncounted(
        &self,
        method: &str,
        params: Value,
    ) -> (Result<Value, RelayError>, RelayOutcome) {
        if let Some(missing) = self.inner.capabilities.missing_for(method, &params) {
            let refused = Err(RelayError::new(
                METHOD_NOT_FOUND,
                format!(
                    "the client did not declare the {missing} capability, so {method} cannot be relayed to it"
                ),
            ));
            return (refused, RelayOutcome::Refused);
        }
        let (answer, answered) = oneshot::channel();
        let request = Relayed::Request {
            method: method.to_owned(),
            params,
            answer,
        };
        if self.inner.sender.send(request).is_err() {
            let ended = Err(RelayError::no_client(
                method,
                "the call it belongs to has ended",
            ));
            return (ended, RelayOutcome::NoClient);
        }
        match answered.await {
            Ok(Ok(result)) => (Ok(result), RelayOutcome::Answered),
            Ok(Err(error)) => (Err(error), RelayOutcome::ClientError),
            Err(_) => (
                Err(RelayError::no_client(
                    method,
                    "the call it belongs to ended before the client answered",
                )),
                RelayOutcome::NoClient,
            ),
        }
    }

    /// Sends a notification to the client; `false` when the call has ended.
    pub fn notify(&self, method: &str, params: Value) -> bool {
        let sent = self
            .inner
            .sender
            .send(Relayed::Notification {
                method: method.to_owned(),
                params,
            })
            .is_ok();
        let outcome = if sent {
            RelayOutcome::Relayed
        } else {
            RelayOutcome::NoClient
        };
        self.inner.counts.add(method, outcome);
        sent
    }

    /// Whether the call it belongs to is still running.
    pub fn is_open(&self) -> bool {
        !self.inner.sender.is_closed()
    }
}

/// The calls in flight on one upstream session, and which client each belongs to. See the
/// module documentation.
pub struct RelayRoutes {
    /// Whether the transport cannot tell which call a request belongs to, so that calls from
    /// different clients that can be asked must take turns.
    take_turns: bool,
    state: Mutex<RoutesState>,
    /// Where the messages that find no client are counted.
    counts: &'static RelayCounts,
}

#[derive(Default)]
struct RoutesState {
    next_key: u64,
    calls: HashMap<u64, InFlight>,
    /// The client session whose calls have the session to themselves (turn-taking only).
    holder: Option<RelaySession>,
    /// Calls in flight that take turns, the holder's included.
    running: usize,
    /// Calls in flight that take no turns: all of them where turns are not taken, and those
    /// of clients that are not on the line.
    outside: usize,
    waiting: VecDeque<Waiter>,
}

struct InFlight {
    relay: Option<ClientRelay>,
    origin: Option<String>,
}

struct Waiter {
    id: u64,
    session: Option<RelaySession>,
    admitted: oneshot::Sender<()>,
}

fn lock(state: &Mutex<RoutesState>) -> MutexGuard<'_, RoutesState> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl std::fmt::Debug for RelayRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = lock(&self.state);
        f.debug_struct("RelayRoutes")
            .field("take_turns", &self.take_turns)
            .field("running", &state.running)
            .field("outside", &state.outside)
            .field("waiting", &state.waiting.len())
            .finish()
    }
}

impl RoutesState {
    /// Whether a call of `session` (`None`: a client that answers no requests) may start now.
    fn admits(&self, session: Option<RelaySession>) -> bool {
        match (self.holder, session) {
            (Some(holder), Some(session)) => holder == session,
            (Some(_), None) => false,
            (None, Some(_)) => self.running == 0,
            (None, None) => true,
        }
    }

    fn start(&mut self, session: Option<RelaySession>) {
        self.running += 1;
        if session.is_some() {
            self.holder = session;
        }
    }

    /// Lets in the waiters at the head of the queue that may start now.
    fn admit_waiting(&mut self) {
        while let Some(first) = self.waiting.front() {
            if !self.admits(first.session) {
                return;
            }
            let Some(waiter) = self.waiting.pop_front() else {
                return;
            };
            self.start(waiter.session);
            if waiter.admitted.send(()).is_err() {
                // It gave up in the meantime: take its place back.
                self.finish();
            }
        }
    }

    /// Gives a call that has started its key, and remembers its relay.
    fn register(&mut self, relay: Option<ClientRelay>) -> u64 {
        let key = self.next_key;
        self.next_key += 1;
        if relay.is_some() {
            self.calls.insert(
                key,
                InFlight {
                    relay,
                    origin: None,
                },
            );
        }
        key
    }

    fn finish(&mut self) {
        self.running = self.running.saturating_sub(1);
        if self.running == 0 {
            self.holder = None;
        }
    }
}

impl RelayRoutes {
    /// Routes for a transport that tells which call a request came on (`take_turns` false),
    /// or one that cannot (`take_turns` true: stdio).
    pub fn new(take_turns: bool) -> Self {
        Self {
            take_turns,
            state: Mutex::new(RoutesState::default()),
            counts: RelayCounts::global(),
        }
    }

    /// Registers a call before it is sent upstream, waiting for its turn where turns are
    /// taken. The call is in flight until the ticket is dropped.
    pub async fn enter(&self, relay: Option<ClientRelay>) -> CallTicket<'_> {
        let stateless = relay.as_ref().is_some_and(|relay| !relay.is_live());
        let turn = (self.take_turns && !stateless).then(|| {
            relay
                .as_ref()
                .filter(|relay| relay.capabilities().answers_requests())
                .map(ClientRelay::session)
        });
        let gated = turn.is_some();
        let (id, receiver) = {
            let mut state = lock(&self.state);
            let now = match turn {
                Some(session) => {
                    let own_turn = session.is_some() && state.holder == session;
                    let admitted = own_turn || (state.waiting.is_empty() && state.admits(session));
                    if admitted {
                        state.start(session);
                    }
                    admitted
                }
                None => {
                    state.outside += 1;
                    true
                }
            };
            if now {
                // The common case: one lock, no wait.
                return CallTicket {
                    routes: self,
                    key: state.register(relay),
                    gated,
                };
            }
            let (admitted, receiver) = oneshot::channel();
            let id = state.next_key;
            state.next_key += 1;
            state.waiting.push_back(Waiter {
                id,
                session: turn.flatten(),
                admitted,
            });
            (id, receiver)
        };
        let mut pending = PendingTurn {
            routes: self,
            id,
            receiver: Some(receiver),
        };
        pending.wait().await;
        let key = lock(&self.state).register(relay);
        CallTicket {
            routes: self,
            key,
            gated,
        }
    }

    /// The client a request or notification from the upstream goes to, or why it goes
    /// nowhere. `origin` is the
    /// upstream request id (as [`CallTicket::bind_origin`] was given it) of the call whose
    /// stream it came on, when the transport knows it.
    pub fn route(&self, method: &str, origin: Option<&str>) -> Result<ClientRelay, RelayError> {
        let routed = self.route_uncounted(method, origin);
        if let Err(error) = &routed {
            // Every message that gets a client is counted by its relay, once it is sent; one
            // that gets none is counted here.
            let outcome = if error.code == METHOD_NOT_FOUND {
                RelayOutcome::Refused
            } else {
                RelayOutcome::NoClient
            };
            self.counts.add(method, outcome);
        }
        routed
    }

    fn route_uncounted(
        &self,
        method: &str,
        origin: Option<&str>,
    ) -> Result<ClientRelay, RelayError> {
        let state = lock(&self.state);
        if let Some(origin) = origin
            && let Some(call) = state
                .calls
                .values()
                .find(|call| call.origin.as_deref() == Some(origin))
        {
            return match &call.relay {
                Some(relay) => Ok(relay.clone()),
                None => Err(cannot_be_sent(method)),
            };
        }
        // Only calls with a relay are in the table; the others are counted.
        let untracked = (state.running + state.outside).saturating_sub(state.calls.len());
        let mut sessions = state.calls.values().filter_map(|call| call.relay.as_ref());
        let Some(first) = sessions.next() else {
            return Err(if untracked > 0 {
                cannot_be_sent(method)
            } else {
                RelayError::no_client(method, "no call is in flight on this server")
            });
        };
        if untracked == 0 && sessions.all(|relay| relay.session() == first.session()) {
            return Ok(first.clone());
        }
        Err(RelayError::no_client(
            method,
            "calls of several clients are in flight on this server and its transport does not \
             say which one this belongs to",
        ))
    }

    /// Calls in flight right now.
    pub fn in_flight(&self) -> usize {
        let state = lock(&self.state);
        state.running + state.outside
    }

    fn leave(&self, key: u64, gated: bool) {
        let mut state = lock(&self.state);
        state.calls.remove(&key);
        if gated {
            state.finish();
            state.admit_waiting();
        } else {
            state.outside = state.outside.saturating_sub(1);
        }
    }
}

/// A call waiting for its turn; dropping it (the caller gave up) leaves the queue, or gives
/// the turn back if it had just been granted.
struct PendingTurn<'a> {
    routes: &'a RelayRoutes,
    id: u64,
    receiver: Option<oneshot::Receiver<()>>,
}

impl PendingTurn<'_> {
    async fn wait(&mut self) {
        if let Some(receiver) = self.receiver.as_mut() {
            // The sender is dropped only after `admitted.send` was tried, so an error cannot
            // mean anything but a granted turn that the queue already counted.
            let _ = receiver.await;
        }
        self.receiver = None;
    }
}

impl Drop for PendingTurn<'_> {
    fn drop(&mut self) {
        let Some(mut receiver) = self.receiver.take() else {
            return;
        };
        let mut state = lock(&self.routes.state);
        if receiver.try_recv().is_ok() {
            state.finish();
            state.admit_waiting();
        } else {
            state.waiting.retain(|waiter| waiter.id != self.id);
            state.admit_waiting();
        }
    }
}

/// A call in flight on an upstream session, until dropped.
pub struct CallTicket<'a> {
    routes: &'a RelayRoutes,
    key: u64,
    /// Whether the call takes turns.
    gated: bool,
}

impl CallTicket<'_> {
    /// Records the upstream request id the call went out with, for transports that say which
    /// request a server's request came with.
    pub fn bind_origin(&self, origin: String) {
        let mut state = lock(&self.routes.state);
        if let Some(call) = state.calls.get_mut(&self.key) {
            call.origin = Some(origin);
        }
    }
}

impl std::fmt::Debug for CallTicket<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallTicket")
            .field("key", &self.key)
            .finish()
    }
}

impl Drop for CallTicket<'_> {
    fn drop(&mut self) {
        self.routes.leave(self.key, self.gated);
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;

    use futures::poll;
    use serde_json::json;

    use super::*;

    fn relay(capabilities: RelayCapabilities) -> (ClientRelay, mpsc::UnboundedReceiver<Relayed>) {
        ClientRelay::channel(RelaySession::new(), capabilities)
    }

    fn routed_to(route: Result<ClientRelay, RelayError>) -> ClientRelay {
        route.unwrap_or_else(|error| panic!("expected a client, got {error:?}"))
    }

    fn refused(route: Result<ClientRelay, RelayError>) -> RelayError {
        route.expect_err("expected no client")
    }

    #[test]
    fn capabilities_are_read_as_the_client_declared_them() {
        let none = RelayCapabilities::from_client_capabilities(&json!({}));
        assert_eq!(none, RelayCapabilities::default());
        assert!(!none.answers_requests());

        // An elicitation capability that names no mode is form mode; nulls declare nothing.
        let form = RelayCapabilities::from_client_capabilities(
            &json!({"elicitation": {}, "sampling": null}),
        );
        assert!(form.elicitation_form && !form.elicitation_url && !form.sampling);
        let url_only =
            RelayCapabilities::from_client_capabilities(&json!({"elicitation": {"url": {}}}));
        assert!(url_only.elicitation_url && !url_only.elicitation_form);

        let all = RelayCapabilities::from_client_capabilities(
            &RelayCapabilities::ALL.to_client_capabilities(),
        );
        assert_eq!(all, RelayCapabilities::ALL, "the JSON form reads back");

        assert_eq!(
            form.missing_for("elicitation/create", &json!({"mode": "url"})),
            Some("elicitation.url")
        );
        assert_eq!(form.missing_for("elicitation/create", &json!({})), None);
        assert_eq!(
            url_only.missing_for("elicitation/create", &json!({"mode": "form"})),
            Some("elicitation.form")
        );
        assert_eq!(
            none.missing_for("sampling/createMessage", &json!({})),
            Some("sampling")
        );
        assert_eq!(none.missing_for("roots/list", &json!({})), Some("roots"));
        assert_eq!(none.missing_for("ping", &json!({})), None);
        assert!(all.missing_for("tasks/get", &json!({})).is_some());
    }

    #[test]
    fn log_levels_are_ordered_by_severity() {
        assert_eq!(log_severity("debug"), Some(0));
        assert_eq!(log_severity("emergency"), Some(7));
        assert!(log_severity("warning") > log_severity("notice"));
        assert_eq!(log_severity("loud"), None);
    }

    #[tokio::test]
    async fn a_request_reaches_the_client_and_its_answer_comes_back() {
        let (relay, mut receiver) = relay(RelayCapabilities::ALL);
        let client = async {
            match receiver.recv().await {
                Some(Relayed::Request {
                    method,
                    params,
                    answer,
                }) => {
                    assert_eq!(method, "sampling/createMessage");
                    let _ = answer.send(Ok(json!({"echo": params})));
                }
                other => panic!("expected a request, got {other:?}"),
            }
        };
        let (answer, ()) = tokio::join!(
            relay.request("sampling/createMessage", json!({"maxTokens": 5})),
            client
        );
        assert_eq!(answer.unwrap(), json!({"echo": {"maxTokens": 5}}));

        assert!(relay.notify("notifications/message", json!({"level": "info"})));
        match receiver.try_recv() {
            Ok(Relayed::Notification { method, params }) => {
                assert_eq!(method, "notifications/message");
                assert_eq!(params["level"], "info");
            }
            other => panic!("expected the notification, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_capability_the_client_lacks_is_refused_without_asking_it() {
        let capabilities = RelayCapabilities {
            sampling: true,
            ..RelayCapabilities::default()
        };
        let (relay, mut receiver) = relay(capabilities);
        let error = relay
            .request("elicitation/create", json!({"message": "name?"}))
            .await
            .unwrap_err();
        assert_eq!(error.code, METHOD_NOT_FOUND);
        assert!(error.message.contains("elicitation.form"), "{error}");
        assert!(receiver.try_recv().is_err(), "the client was not asked");
    }

    #[tokio::test]
    async fn a_call_that_ended_fails_its_requests_at_once() {
        // The call ended before the server asked.
        let (relay, receiver) = relay(RelayCapabilities::ALL);
        drop(receiver);
        assert!(!relay.is_open());
        let error = relay.request("roots/list", json!({})).await.unwrap_err();
        assert_eq!(error.code, INTERNAL_ERROR);
        assert!(!relay.notify("notifications/message", json!({})));

        // The call ended while the client was being asked.
        let (relay, mut receiver) = relay_with_all();
        let asking = relay.request("roots/list", json!({}));
        let hang_up = async {
            assert!(matches!(
                receiver.recv().await,
                Some(Relayed::Request { .. })
            ));
            drop(receiver);
        };
        let (answer, ()) = tokio::join!(asking, hang_up);
        let error = answer.unwrap_err();
        assert_eq!(error.code, INTERNAL_ERROR);
        assert!(error.message.contains("ended"), "{error}");
    }

    fn relay_with_all() -> (ClientRelay, mpsc::UnboundedReceiver<Relayed>) {
        relay(RelayCapabilities::ALL)
    }

    #[tokio::test]
    async fn requests_follow_the_stream_they_came_on() {
        let routes = RelayRoutes::new(false);
        let (first, _first_messages) = relay_with_all();
        let (second, _second_messages) = relay_with_all();
        let one = routes.enter(Some(first.clone())).await;
        one.bind_origin("1".to_owned());
        let two = routes.enter(Some(second.clone())).await;
        two.bind_origin("2".to_owned());
        let bare = routes.enter(None).await;
        bare.bind_origin("3".to_owned());
        assert_eq!(routes.in_flight(), 3);

        let to_second = routed_to(routes.route("sampling/createMessage", Some("2")));
        assert_eq!(to_second.session(), second.session());
        let to_first = routed_to(routes.route("sampling/createMessage", Some("1")));
        assert_eq!(to_first.session(), first.session());
        // Without an origin (the standalone stream), three calls of different clients are
        // ambiguous; a call whose client can be sent nothing is never given another's relay.
        let ambiguous = refused(routes.route("roots/list", None));
        assert_eq!(ambiguous.code, INTERNAL_ERROR);
        assert!(ambiguous.message.contains("several clients"), "{ambiguous}");
        let unknown_origin = refused(routes.route("roots/list", Some("3")));
        assert_eq!(unknown_origin.code, INTERNAL_ERROR);

        drop((one, two, bare));
        assert_eq!(routes.in_flight(), 0);
        let idle = refused(routes.route("roots/list", None));
        assert!(idle.message.contains("no call is in flight"), "{idle}");
    }

    #[tokio::test]
    async fn without_origins_the_calls_of_one_client_are_its_own() {
        let routes = RelayRoutes::new(false);
        let session = RelaySession::new();
        let (relay, _messages) = ClientRelay::channel(session, RelayCapabilities::ALL);
        let (same_client, _more) = ClientRelay::channel(session, RelayCapabilities::ALL);
        let first = routes.enter(Some(relay)).await;
        let second = routes.enter(Some(same_client)).await;
        assert_eq!(
            routed_to(routes.route("elicitation/create", None)).session(),
            session
        );
        drop((first, second));

        // One call whose client can be sent nothing: refused as that client would.
        let bare = routes.enter(None).await;
        let error = refused(routes.route("sampling/createMessage", None));
        assert_eq!(error.code, METHOD_NOT_FOUND);
        drop(bare);
    }

    #[tokio::test]
    async fn without_origins_clients_that_can_be_asked_take_turns() {
        let routes = RelayRoutes::new(true);
        let (alice, _alice_messages) = relay_with_all();
        let (bob, _bob_messages) = relay_with_all();
        let (alice_again, _more) = ClientRelay::channel(alice.session(), RelayCapabilities::ALL);

        let alice_call = routes.enter(Some(alice.clone())).await;
        // Alice's second call joins her turn at once; Bob and a client that can be asked
        // nothing wait until Alice's calls are over.
        let alice_second = routes.enter(Some(alice_again)).await;
        let mut bob_call = pin!(routes.enter(Some(bob.clone())));
        assert!(poll!(bob_call.as_mut()).is_pending());
        let mut bare_call = pin!(routes.enter(None));
        assert!(poll!(bare_call.as_mut()).is_pending());
        assert_eq!(
            routed_to(routes.route("elicitation/create", None)).session(),
            alice.session(),
            "while Alice's calls run, every request is hers"
        );

        drop(alice_call);
        assert!(
            poll!(bob_call.as_mut()).is_pending(),
            "Alice still has a call"
        );
        drop(alice_second);
        let bob_ticket = bob_call.await;
        assert!(
            poll!(bare_call.as_mut()).is_pending(),
            "the queue is served in order"
        );
        assert_eq!(
            routed_to(routes.route("elicitation/create", None)).session(),
            bob.session()
        );
        drop(bob_ticket);
        let bare_ticket = bare_call.await;
        assert_eq!(
            refused(routes.route("sampling/createMessage", None)).code,
            METHOD_NOT_FOUND
        );

        // Calls of clients that can be asked nothing run side by side.
        let another_bare = routes.enter(None).await;
        assert_eq!(routes.in_flight(), 2);
        drop((bare_ticket, another_bare));
        assert_eq!(routes.in_flight(), 0);
    }

    #[tokio::test]
    async fn a_call_that_gives_up_waiting_leaves_the_queue() {
        let routes = RelayRoutes::new(true);
        let (alice, _alice_messages) = relay_with_all();
        let (bob, _bob_messages) = relay_with_all();
        let (carol, _carol_messages) = relay_with_all();
        let alice_call = routes.enter(Some(alice)).await;
        {
            let mut bob_call = pin!(routes.enter(Some(bob)));
            assert!(poll!(bob_call.as_mut()).is_pending());
        }
        let mut carol_call = pin!(routes.enter(Some(carol.clone())));
        assert!(poll!(carol_call.as_mut()).is_pending());
        drop(alice_call);
        let carol_ticket = carol_call.await;
        assert_eq!(routes.in_flight(), 1, "Bob's place was not kept");
        assert_eq!(
            routed_to(routes.route("roots/list", None)).session(),
            carol.session()
        );
        drop(carol_ticket);

        // A turn granted to a call that is dropped before it runs is handed on.
        let (dave, _dave_messages) = relay_with_all();
        let (erin, _erin_messages) = relay_with_all();
        let dave_call = routes.enter(Some(dave)).await;
        let mut erin_call = Box::pin(routes.enter(Some(erin)));
        assert!(poll!(erin_call.as_mut()).is_pending());
        let mut bare_call = pin!(routes.enter(None));
        assert!(poll!(bare_call.as_mut()).is_pending());
        drop(dave_call); // Erin's turn is granted here, but she is never polled again...
        assert_eq!(routes.in_flight(), 1);
        // ...and gives up, which passes the turn to the next in line.
        drop(erin_call);
        let bare_ticket = bare_call.await;
        assert_eq!(routes.in_flight(), 1);
        drop(bare_ticket);
        assert_eq!(routes.in_flight(), 0);
    }

    #[tokio::test]
    async fn stateless_clients_do_not_take_turns_and_are_never_guessed() {
        let routes = RelayRoutes::new(true);
        let (stateless, _asked_later) =
            ClientRelay::stateless_channel(RelaySession::new(), RelayCapabilities::ALL);
        assert!(!stateless.is_live());
        let (live, _on_the_line) = relay_with_all();
        let parked = routes.enter(Some(stateless.clone())).await;
        // A live client's call is not held up by a call whose client may never come back...
        let mut live_call = pin!(routes.enter(Some(live)));
        let live_ticket = match poll!(live_call.as_mut()) {
            std::task::Poll::Ready(ticket) => ticket,
            std::task::Poll::Pending => panic!("the live call waited for a stateless one"),
        };
        // ...and a request that could be either's is refused, not guessed.
        let refused = refused(routes.route("elicitation/create", None));
        assert!(refused.message.contains("several clients"), "{refused}");
        drop(live_ticket);
        assert_eq!(
            routed_to(routes.route("elicitation/create", None)).session(),
            stateless.session()
        );
        drop(parked);
    }

    #[tokio::test]
    async fn every_relayed_message_is_counted_once_by_how_it_ended() {
        use crate::census::{RelayKind, RelayOutcome};

        let counts: &'static RelayCounts = Box::leak(Box::new(RelayCounts::new()));
        let routes = RelayRoutes {
            counts,
            ..RelayRoutes::new(false)
        };
        let count = |kind, outcome| counts.get(kind, outcome);
        // Bad input tried: requests with no call in flight, a capability the client did not
        // declare, a client that answers with an error, a call that ends before its client
        // answers, and a log message after its call ended.
        refused(routes.route("sampling/createMessage", None));
        assert_eq!(count(RelayKind::Sampling, RelayOutcome::NoClient), 1);

        let (client, mut receiver) = ClientRelay::counted_in(
            RelaySession::new(),
            RelayCapabilities {
                sampling: true,
                ..RelayCapabilities::default()
            },
            true,
            counts,
        );
        let ticket = routes.enter(Some(client)).await;
        let relay = routed_to(routes.route("roots/list", None));
        relay.request("roots/list", json!({})).await.unwrap_err();
        assert_eq!(count(RelayKind::Roots, RelayOutcome::Refused), 1);

        let answer_next = |receiver: &mut mpsc::UnboundedReceiver<Relayed>, answer| {
            let Some(Relayed::Request { answer: to, .. }) = receiver.try_recv().ok() else {
                panic!("no request reached the client");
            };
            to.send(answer).unwrap();
        };
        let asked = relay.request("sampling/createMessage", json!({}));
        let mut asked = pin!(asked);
        assert!(poll!(asked.as_mut()).is_pending());
        answer_next(&mut receiver, Ok(json!({"content": "hi"})));
        asked.await.unwrap();
        assert_eq!(count(RelayKind::Sampling, RelayOutcome::Answered), 1);

        let asked = relay.request("sampling/createMessage", json!({}));
        let mut asked = pin!(asked);
        assert!(poll!(asked.as_mut()).is_pending());
        answer_next(&mut receiver, Err(RelayError::new(-1, "the user declined")));
        asked.await.unwrap_err();
        assert_eq!(count(RelayKind::Sampling, RelayOutcome::ClientError), 1);

        assert!(relay.notify("notifications/message", json!({"level": "info"})));
        assert_eq!(count(RelayKind::Logging, RelayOutcome::Relayed), 1);

        let asked = relay.request("sampling/createMessage", json!({}));
        let mut asked = pin!(asked);
        assert!(poll!(asked.as_mut()).is_pending());
        drop(receiver);
        asked.await.unwrap_err();
        assert!(!relay.notify("notifications/message", json!({"level": "info"})));
        assert_eq!(count(RelayKind::Sampling, RelayOutcome::NoClient), 2);
        assert_eq!(count(RelayKind::Logging, RelayOutcome::NoClient), 1);
        drop(ticket);

        let total: u64 = counts.read().iter().map(|line| line.count).sum();
        assert_eq!(total, 7, "each message counted once: {:?}", counts.read());
    }
}
