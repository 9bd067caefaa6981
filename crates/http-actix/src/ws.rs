//! `/api/ws/events`: the WebSocket stream of domain events.
//!
//! Every connection gets its own receiver of the event bus and its own task. The bus never
//! waits for a connection: a client that reads too slowly falls behind the bus's buffer, loses
//! its oldest events and is told how many (`{"type":"lagged","missed":N}`). Each connection
//! filters by event type and by server (or group) id, given in the query string at connect time
//! and replaced later by a `subscribe` message. The server pings every [`KeepAlive::ping_every`]
//! and closes a connection that has sent nothing for [`KeepAlive::timeout`]; a gateway that shuts
//! down closes every stream with `1001 Going Away`.
//!
//! A connection sends a lone event at once, then lingers for [`LINGER`] and sends what arrived
//! meanwhile together: under load, each connection costs one wake-up and one write per batch
//! rather than per event (see `docs/benchmarks.md`, "Event stream").

use std::collections::{BTreeSet, VecDeque};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, web};
use actix_ws::{CloseCode, CloseReason, Message, MessageStream, Session};
use bytestring::ByteString;
use mcpgw_core::{DomainEvent, EVENT_TYPES, PublishedEvent, ServerId};
use mcpgw_gateway::EventBus;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::{
    self,
    error::{RecvError, TryRecvError},
};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::error::{ApiError, ErrorEnvelope, bounded_for_message, names};
use crate::state::ApiState;

pub const EVENTS_WS_PATH: &str = "/api/ws/events";

/// How long a connection that just sent a frame lets further events gather before sending
/// them together.
const LINGER: Duration = Duration::from_millis(5);
/// The most events sent in one go before the connection looks at its client again.
const BATCH: usize = 256;

/// The largest frame a client may send; a larger one closes the connection with `1009 Message
/// Too Big` as soon as its header announces the size, before its payload is read. A subscribe
/// message needs a few hundred bytes.
pub const MAX_CLIENT_FRAME_BYTES: usize = 64 * 1024;
/// How many messages (frames of any kind) a client may send per second on average, and in one
/// burst. A client over it is closed with `1008 Policy Violation`: every message costs the
/// gateway an answer, and a client of this stream has nothing to say but the odd subscribe.
pub const MAX_CLIENT_MESSAGES_PER_SECOND: u32 = 50;
pub const MAX_CLIENT_MESSAGE_BURST: u32 = 200;

/// How the server keeps a connection alive and notices a client that went away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepAlive {
    /// How often the server pings.
    pub ping_every: Duration,
    /// How long a client may stay silent (no pong, no message) before it is disconnected.
    pub timeout: Duration,
}

impl Default for KeepAlive {
    fn default() -> Self {
        Self {
            ping_every: Duration::from_secs(30),
            timeout: Duration::from_secs(90),
        }
    }
}

/// The event streams of one gateway: where connections subscribe, and the switch that closes
/// them all. Cheap to clone; every clone controls the same streams.
#[derive(Clone)]
pub struct EventStreams {
    bus: Arc<EventBus>,
    /// In a fleet: the events of every replica, in the shared log's order, which connections
    /// follow instead of this replica's bus.
    fleet: Option<broadcast::Sender<Arc<FleetEvent>>>,
    keep_alive: KeepAlive,
    closing: CancellationToken,
    frames: Arc<FrameCache>,
    clients: Arc<AtomicUsize>,
    max_clients: usize,
}

impl std::fmt::Debug for EventStreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStreams")
            .field("bus", &self.bus)
            .field("keep_alive", &self.keep_alive)
            .field("closing", &self.closing.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl EventStreams {
    /// How many streams may be open at once by default: each costs about 100 KiB (its buffers
    /// and its place on the bus), so the default bounds them near 100 MiB.
    pub const DEFAULT_MAX_CLIENTS: usize = 1000;

    pub fn new(bus: Arc<EventBus>) -> Self {
        Self {
            bus,
            fleet: None,
            keep_alive: KeepAlive::default(),
            closing: CancellationToken::new(),
            frames: Arc::new(FrameCache::default()),
            clients: Arc::new(AtomicUsize::new(0)),
            max_clients: Self::DEFAULT_MAX_CLIENTS,
        }
    }

    /// At most `max_clients` streams open at once; a handshake beyond answers 503
    /// `ServiceUnavailableError`.
    #[must_use]
    pub fn with_max_clients(mut self, max_clients: usize) -> Self {
        self.max_clients = max_clients;
        self
    }

    /// Streams the events of a whole fleet of replicas: every connection follows `feed` (fed
    /// from the shared event log, in its order) instead of this replica's bus.
    #[must_use]
    pub fn with_fleet_feed(mut self, feed: broadcast::Sender<Arc<FleetEvent>>) -> Self {
        self.fleet = Some(feed);
        self
    }

    /// Connections open now (for the metrics).
    pub fn client_count(&self) -> usize {
        self.clients.load(Ordering::Relaxed)
    }

    #[must_use]
    pub fn with_keep_alive(mut self, keep_alive: KeepAlive) -> Self {
        self.keep_alive = keep_alive;
        self
    }

    /// Closes every open stream with `1001 Going Away`, and every stream opened from now on as
    /// soon as it is open. Call it before stopping the HTTP server, whose graceful stop would
    /// otherwise wait for the streams until its timeout.
    pub fn close_all(&self) {
        self.closing.cancel();
    }
}

/// An event of any replica of a fleet, as the shared event log holds it: ready to stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetEvent {
    event_type: String,
    mcp_server_id: Option<String>,
    group_id: Option<String>,
    frame: ByteString,
}

impl FleetEvent {
    /// The event of type `event_type` concerning the server `mcp_server_id` (a group member's
    /// event names the member) and the group `group_id`, if any, whose JSON as clients get it
    /// is `frame`.
    pub fn new(
        event_type: String,
        mcp_server_id: Option<String>,
        group_id: Option<String>,
        frame: String,
    ) -> Self {
        Self {
            event_type,
            mcp_server_id,
            group_id,
            frame: ByteString::from(frame),
        }
    }
}

/// Where a connection's events come from: this replica's bus, or the fleet's log.
enum EventSource {
    Bus(broadcast::Receiver<Arc<PublishedEvent>>),
    Fleet(broadcast::Receiver<Arc<FleetEvent>>),
}

/// One event of either source.
enum Received {
    Local(Arc<PublishedEvent>),
    Fleet(Arc<FleetEvent>),
}

impl EventSource {
    async fn recv(&mut self) -> Result<Received, RecvError> {
        match self {
            EventSource::Bus(events) => events.recv().await.map(Received::Local),
            EventSource::Fleet(events) => events.recv().await.map(Received::Fleet),
        }
    }

    fn try_recv(&mut self) -> Result<Received, TryRecvError> {
        match self {
            EventSource::Bus(events) => events.try_recv().map(Received::Local),
            EventSource::Fleet(events) => events.try_recv().map(Received::Fleet),
        }
    }
}

/// The frames of the most recent events, so that every connection does not serialize the same
/// event again.
#[derive(Default)]
struct FrameCache {
    recent: Mutex<VecDeque<(u64, ByteString)>>,
}

impl FrameCache {
    const CAPACITY: usize = 64;

    /// The frame of `published`, serialized once: connections ask for the newest events, so
    /// the search starts there, and a frame is shared (a reference count), never copied.
    fn frame_of(&self, published: &PublishedEvent) -> ByteString {
        let mut recent = self
            .recent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((_, frame)) = recent
            .iter()
            .rev()
            .find(|(event_id, _)| *event_id == published.event_id)
        {
            return frame.clone();
        }
        let frame = ByteString::from(event_frame(published));
        if recent.len() == Self::CAPACITY {
            recent.pop_front();
        }
        recent.push_back((published.event_id, frame.clone()));
        frame
    }
}

/// The JSON of an event as clients get it: its fields with `event_type`, plus `event_id` (a
/// string, as in the tool history) and `occurred_at`.
fn event_frame(published: &PublishedEvent) -> String {
    // Events hold strings, numbers and booleans only; should one ever fail to serialize, the
    // client still learns that an event happened.
    serde_json::to_string(published).unwrap_or_else(|error| {
        tracing::error!(%error, event_type = published.event.event_type(), "an event could not be serialized");
        serde_json::json!({
            "event_type": published.event.event_type(),
            "event_id": published.event_id.to_string(),
            "occurred_at": published.occurred_at.to_string(),
        })
        .to_string()
    })
}

/// Which events a connection wants. An empty set lets everything through on that dimension.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Filter {
    event_types: BTreeSet<&'static str>,
    /// Server ids; an event matches by the server it concerns (a group member's event by the
    /// member) or by its group.
    ids: BTreeSet<String>,
}

impl Filter {
    fn parse<'a>(
        event_types: impl IntoIterator<Item = &'a str>,
        ids: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, String> {
        let mut filter = Filter::default();
        for raw in event_types
            .into_iter()
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            let known = EVENT_TYPES
                .iter()
                .find(|name| **name == raw)
                .ok_or_else(|| {
                    format!(
                        "event_types: unknown event type `{}`; known types: {}",
                        bounded_for_message(raw),
                        EVENT_TYPES.join(", ")
                    )
                })?;
            filter.event_types.insert(known);
        }
        for raw in ids.into_iter().map(str::trim).filter(|s| !s.is_empty()) {
            let id = ServerId::parse(raw).map_err(|error| format!("mcp_server_ids: {error}"))?;
            filter.ids.insert(id.as_str().to_owned());
        }
        Ok(filter)
    }

    fn matches(&self, event: &DomainEvent) -> bool {
        let type_matches =
            self.event_types.is_empty() || self.event_types.contains(event.event_type());
        let id_matches = self.ids.is_empty()
            || [event.mcp_server_id(), event.group_id()]
                .into_iter()
                .flatten()
                .any(|id| self.ids.contains(id.as_str()));
        type_matches && id_matches
    }

    fn matches_fleet(&self, event: &FleetEvent) -> bool {
        let type_matches =
            self.event_types.is_empty() || self.event_types.contains(event.event_type.as_str());
        let id_matches = self.ids.is_empty()
            || [event.mcp_server_id.as_deref(), event.group_id.as_deref()]
                .into_iter()
                .flatten()
                .any(|id| self.ids.contains(id));
        type_matches && id_matches
    }

    fn acknowledgement(&self) -> String {
        ServerMessage::Subscribed {
            event_types: self.event_types.iter().copied().collect(),
            mcp_server_ids: self.ids.iter().map(String::as_str).collect(),
        }
        .to_json()
    }
}

/// The query string of `/api/ws/events`.
#[derive(Debug, Deserialize)]
pub(crate) struct EventsQuery {
    event_types: Option<String>,
    mcp_server_ids: Option<String>,
    // `api_key` (the credential of clients that cannot set a header on a WebSocket handshake)
    // is read by the authentication middleware, before the handler.
}

/// What a client may send.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ClientMessage {
    /// Replaces the connection's filter; a missing list lets everything through.
    Subscribe {
        #[serde(default)]
        event_types: Vec<String>,
        #[serde(default)]
        mcp_server_ids: Vec<String>,
    },
}

/// What the server sends besides events.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ServerMessage<'a> {
    Subscribed {
        event_types: Vec<&'a str>,
        mcp_server_ids: Vec<&'a str>,
    },
    Lagged {
        missed: u64,
    },
    Error {
        message: String,
    },
}

impl ServerMessage<'_> {
    fn to_json(&self) -> String {
        // Plain strings and numbers: serializing cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Stream domain events over a WebSocket.
#[utoipa::path(
    get,
    path = "/api/ws/events",
    tag = "events",
    operation_id = "stream_events",
    description = "Upgrades to a WebSocket (send the usual `Upgrade: websocket` handshake) that \
        streams every domain event as one JSON text frame: the event's own fields with \
        `event_type`, plus `event_id` (a string, increasing) and `occurred_at` (UTC, microseconds), \
        e.g. `{\"event_type\":\"McpServerStateChanged\",\"mcp_server_id\":\"demo\",\"from\":\"cold\",\
        \"to\":\"initializing\",\"reason\":\"...\",\"event_id\":\"17\",\"occurred_at\":\"2026-11-21T14:03:07.123456\"}`.\n\n\
        The client may send, at any time, `{\"type\":\"subscribe\",\"event_types\":[...],\
        \"mcp_server_ids\":[...]}` to replace its filter (a missing or empty list lets everything \
        through); the server answers `{\"type\":\"subscribed\",\"event_types\":[...],\
        \"mcp_server_ids\":[...]}` with the filter now in force. A message the server cannot use \
        (not JSON, an unknown `type`, an unknown event type, a binary frame) is answered by \
        `{\"type\":\"error\",\"message\":\"...\"}`, the filter unchanged and the connection open. A frame \
        over 64 KiB closes the stream with `1009 Message Too Big` (before its payload is read), and \
        more than 50 messages a second (bursts of 200) with `1008 Policy Violation`.\n\n\
        A client that reads too slowly loses its oldest events and is told so by \
        `{\"type\":\"lagged\",\"missed\":N}` before the next event it gets. The server pings \
        every 30 s and answers pings; a client silent for 90 s is disconnected. When the gateway \
        shuts down, every stream is closed with `1001 Going Away`.",
    params(
        ("event_types" = Option<String>, Query,
         description = "Only these event types, comma-separated (`McpServerStarted,McpServerStopped`); all when absent"),
        ("mcp_server_ids" = Option<String>, Query,
         description = "Only events about these servers or groups, comma-separated; a group member's event matches its member id and its group id; all when absent"),
        ("api_key" = Option<String>, Query,
         description = "The API key, for clients that cannot set a header on the handshake (used once authentication is enabled)"),
    ),
    responses(
        (status = 101, description = "Switched to the WebSocket protocol; events follow as text frames"),
        (status = 400, description = "Not a WebSocket handshake", body = ErrorEnvelope),
        (status = 404, description = "This gateway was composed without an event stream", body = ErrorEnvelope),
        (status = 422, description = "An unknown event type or an invalid server id in the filter", body = ErrorEnvelope),
        (status = 503, description = "As many streams are open as the gateway serves (1000 by default)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn events_socket(
    state: web::Data<ApiState>,
    request: HttpRequest,
    body: web::Payload,
    query: web::Query<EventsQuery>,
) -> Result<HttpResponse, ApiError> {
    let Some(streams) = state.event_streams() else {
        return Err(ApiError::new(
            actix_web::http::StatusCode::NOT_FOUND,
            names::NOT_FOUND,
            "this gateway has no event stream",
        ));
    };
    // The caller was authenticated and authorized (`events:read`) before this handler ran: the
    // authentication middleware takes the credential from the API-key header, a bearer token
    // or `?api_key=` (a browser cannot set headers on a WebSocket handshake), and the route's
    // permission is checked like every other route's.
    if streams.client_count() >= streams.max_clients {
        return Err(ApiError::new(
            actix_web::http::StatusCode::SERVICE_UNAVAILABLE,
            names::SERVICE_UNAVAILABLE,
            format!(
                "{} event streams are open, the most this gateway serves; close one or try again \
                 later",
                streams.max_clients
            ),
        ));
    }
    let filter = Filter::parse(
        query.event_types.as_deref().unwrap_or_default().split(','),
        query
            .mcp_server_ids
            .as_deref()
            .unwrap_or_default()
            .split(','),
    )
    .map_err(ApiError::validation)?;
    let (response, session, mut messages) = actix_ws::handle(&request, body).map_err(|error| {
        ApiError::new(
            actix_web::http::StatusCode::BAD_REQUEST,
            names::BAD_REQUEST,
            format!("{EVENTS_WS_PATH} expects a WebSocket handshake: {error}"),
        )
    })?;
    messages = messages.max_frame_size(MAX_CLIENT_FRAME_BYTES);
    // Subscribed before the answer goes out, so no event after the upgrade is missed.
    let last_heard = Instant::now();
    let events = match &streams.fleet {
        Some(feed) => EventSource::Fleet(feed.subscribe()),
        None => EventSource::Bus(streams.bus.subscribe()),
    };
    let connection = Connection {
        events,
        session,
        messages,
        filter,
        keep_alive: streams.keep_alive,
        closing: Box::pin(streams.closing.clone().cancelled_owned()),
        frames: streams.frames.clone(),
        last_heard,
        silence: Box::pin(tokio::time::sleep_until(
            last_heard + streams.keep_alive.timeout,
        )),
        _counted: CountedClient::enter(&streams.clients),
        allowance: MessageAllowance::new(last_heard),
    };
    actix_web::rt::spawn(connection.run());
    Ok(response)
}

/// Why a connection ends.
enum End {
    /// The client closed it or went away; nothing more to send.
    Gone,
    /// The server closes it with this reason.
    Close(CloseReason),
}

struct Connection {
    events: EventSource,
    session: Session,
    messages: MessageStream,
    filter: Filter,
    keep_alive: KeepAlive,
    /// Completes when the gateway shuts down. Made once per connection (not per frame), like
    /// `silence`, so that sending a frame registers no waker and no timer.
    closing: Pin<Box<WaitForCancellationFutureOwned>>,
    frames: Arc<FrameCache>,
    /// When the client last sent anything (a pong, a ping, a message).
    last_heard: Instant,
    /// Fires when the client has been silent for the keep-alive timeout; moved on whenever it
    /// is heard.
    silence: Pin<Box<Sleep>>,
    _counted: CountedClient,
    allowance: MessageAllowance,
}

/// A token bucket of the messages a client may still send: [`MAX_CLIENT_MESSAGE_BURST`] at
/// most, refilled at [`MAX_CLIENT_MESSAGES_PER_SECOND`].
struct MessageAllowance {
    tokens: f64,
    refilled_at: Instant,
}

impl MessageAllowance {
    fn new(now: Instant) -> Self {
        Self {
            tokens: f64::from(MAX_CLIENT_MESSAGE_BURST),
            refilled_at: now,
        }
    }

    /// Takes one message's token; `false` when the client is over its allowance.
    fn take(&mut self, now: Instant) -> bool {
        let earned = now.duration_since(self.refilled_at).as_secs_f64()
            * f64::from(MAX_CLIENT_MESSAGES_PER_SECOND);
        self.tokens = (self.tokens + earned).min(f64::from(MAX_CLIENT_MESSAGE_BURST));
        self.refilled_at = now;
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }
}

/// Counts a connection as open for as long as it lives, however it ends.
struct CountedClient(Arc<AtomicUsize>);

impl CountedClient {
    fn enter(clients: &Arc<AtomicUsize>) -> Self {
        clients.fetch_add(1, Ordering::Relaxed);
        Self(clients.clone())
    }
}

impl Drop for CountedClient {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Connection {
    async fn run(mut self) {
        let mut pings = tokio::time::interval_at(
            Instant::now() + self.keep_alive.ping_every,
            self.keep_alive.ping_every,
        );
        pings.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // After a frame goes out, the connection lingers: events that arrive meanwhile wait
        // until `LINGER` has passed and then go out together. A lone event is sent at once; a
        // busy stream costs one wake-up, one response poll and one write per batch instead of
        // per event, which is what lets a gateway feed many subscribers at thousands of events
        // per second.
        let mut linger = Box::pin(tokio::time::sleep(Duration::ZERO));
        let mut lingering = false;
        let end = loop {
            let step = tokio::select! {
                biased;
                () = self.closing.as_mut() => Err(going_away()),
                message = self.messages.recv() => self.on_client(message).await,
                received = self.events.recv(), if !lingering => {
                    match self.on_event(received).await {
                        Ok(()) => {
                            lingering = true;
                            linger.as_mut().reset(Instant::now() + LINGER);
                            Ok(())
                        }
                        Err(end) => Err(end),
                    }
                }
                () = linger.as_mut(), if lingering => match self.drain_events().await {
                    Ok(0) => {
                        lingering = false;
                        Ok(())
                    }
                    Ok(sent) => {
                        // A full batch means more is waiting: go on at once.
                        let pause = if sent == BATCH { Duration::ZERO } else { LINGER };
                        linger.as_mut().reset(Instant::now() + pause);
                        Ok(())
                    }
                    Err(end) => Err(end),
                },
                _ = pings.tick() => self.on_ping_tick().await,
            };
            if let Err(end) = step {
                break end;
            }
        };
        if let End::Close(reason) = end {
            // A client that reads nothing cannot take the close frame either: it gets a moment,
            // then the connection is dropped.
            let _ = tokio::time::timeout(Duration::from_secs(1), self.session.close(Some(reason)))
                .await;
        }
    }

    async fn on_client(
        &mut self,
        message: Option<Result<Message, actix_ws::ProtocolError>>,
    ) -> Result<(), End> {
        let message = match message {
            None => return Err(End::Gone),
            Some(Err(error)) if is_oversized(&error) => {
                tracing::debug!("event stream client sent a frame over the size limit");
                return Err(End::Close(CloseReason {
                    code: CloseCode::Size,
                    description: Some(format!(
                        "frames are limited to {MAX_CLIENT_FRAME_BYTES} bytes; send a subscribe \
                         message only"
                    )),
                }));
            }
            Some(Err(error)) => {
                tracing::debug!(%error, "event stream client broke the WebSocket protocol");
                return Err(End::Close(CloseReason {
                    code: CloseCode::Protocol,
                    description: Some(bounded_for_message(&error.to_string())),
                }));
            }
            Some(Ok(message)) => message,
        };
        self.heard();
        if !matches!(message, Message::Close(_)) && !self.allowance.take(self.last_heard) {
            tracing::debug!("event stream client sent too many messages");
            return Err(End::Close(CloseReason {
                code: CloseCode::Policy,
                description: Some(format!(
                    "more than {MAX_CLIENT_MESSAGES_PER_SECOND} messages a second (bursts of \
                     {MAX_CLIENT_MESSAGE_BURST}); send fewer"
                )),
            }));
        }
        match message {
            Message::Text(text) => {
                let answer = answer_to_text(&mut self.filter, &text);
                self.send(answer.into()).await
            }
            Message::Binary(_) | Message::Continuation(_) => {
                let answer = ServerMessage::Error {
                    message: "only JSON text messages are accepted".to_owned(),
                };
                self.send(answer.to_json().into()).await
            }
            Message::Ping(payload) => {
                let sent = tokio::select! {
                    biased;
                    () = self.closing.as_mut() => return Err(going_away()),
                    () = self.silence.as_mut() => return Err(silent(self.keep_alive)),
                    sent = self.session.pong(&payload) => sent,
                };
                sent.map_err(|_| End::Gone)
            }
            Message::Pong(_) | Message::Nop => Ok(()),
            Message::Close(_) => Err(End::Gone),
        }
    }

    async fn on_event(&mut self, received: Result<Received, RecvError>) -> Result<(), End> {
        match received {
            Ok(Received::Local(published)) => {
                if !self.filter.matches(&published.event) {
                    return Ok(());
                }
                let frame = self.frames.frame_of(&published);
                self.send(frame).await
            }
            Ok(Received::Fleet(event)) => {
                if !self.filter.matches_fleet(&event) {
                    return Ok(());
                }
                self.send(event.frame.clone()).await
            }
            Err(RecvError::Lagged(missed)) => {
                self.send(ServerMessage::Lagged { missed }.to_json().into())
                    .await
            }
            Err(RecvError::Closed) => Err(going_away()),
        }
    }

    /// Sends the events already waiting, at most [`BATCH`] of them (so that client messages
    /// and pings are served between batches); answers how many it took from the bus.
    async fn drain_events(&mut self) -> Result<usize, End> {
        for taken in 0..BATCH {
            let received = match self.events.try_recv() {
                Ok(published) => Ok(published),
                Err(TryRecvError::Lagged(missed)) => Err(RecvError::Lagged(missed)),
                Err(TryRecvError::Closed) => Err(RecvError::Closed),
                Err(TryRecvError::Empty) => return Ok(taken),
            };
            self.on_event(received).await?;
        }
        Ok(BATCH)
    }

    async fn on_ping_tick(&mut self) -> Result<(), End> {
        if Instant::now() >= self.deadline() {
            return Err(silent(self.keep_alive));
        }
        let sent = tokio::select! {
            biased;
            () = self.closing.as_mut() => return Err(going_away()),
            () = self.silence.as_mut() => return Err(silent(self.keep_alive)),
            sent = self.session.ping(b"") => sent,
        };
        sent.map_err(|_| End::Gone)
    }

    /// Sends one text frame. Waiting for a client that does not read ends at shutdown or when
    /// the client has been silent for too long; meanwhile the bus goes on without it.
    async fn send(&mut self, text: ByteString) -> Result<(), End> {
        let sent = tokio::select! {
            biased;
            () = self.closing.as_mut() => return Err(going_away()),
            () = self.silence.as_mut() => return Err(silent(self.keep_alive)),
            sent = self.session.text(text) => sent,
        };
        sent.map_err(|_| End::Gone)
    }

    /// The client sent something: its silence starts again.
    fn heard(&mut self) {
        self.last_heard = Instant::now();
        let deadline = self.deadline();
        self.silence.as_mut().reset(deadline);
    }

    fn deadline(&self) -> Instant {
        self.last_heard + self.keep_alive.timeout
    }
}

/// The answer to a client's text message: the acknowledgement of the filter it sets, or an
/// error (the filter unchanged).
fn answer_to_text(filter: &mut Filter, text: &str) -> String {
    let message = match serde_json::from_str::<ClientMessage>(text) {
        Ok(message) => message,
        Err(error) => {
            return ServerMessage::Error {
                message: format!(
                    "expected {{\"type\":\"subscribe\",\"event_types\":[...],\"mcp_server_ids\":[...]}}: {error}"
                ),
            }
            .to_json();
        }
    };
    match message {
        ClientMessage::Subscribe {
            event_types,
            mcp_server_ids,
        } => match Filter::parse(
            event_types.iter().map(String::as_str),
            mcp_server_ids.iter().map(String::as_str),
        ) {
            Ok(parsed) => {
                *filter = parsed;
                filter.acknowledgement()
            }
            Err(message) => ServerMessage::Error { message }.to_json(),
        },
    }
}

/// A frame over [`MAX_CLIENT_FRAME_BYTES`]: refused by actix's parser, or, before the parser
/// could buffer it, by the frame guard of the HTTP front (`limits`).
fn is_oversized(error: &actix_ws::ProtocolError) -> bool {
    match error {
        actix_ws::ProtocolError::Overflow => true,
        actix_ws::ProtocolError::Io(io) => io
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<actix_web::error::PayloadError>())
            .is_some_and(|payload| matches!(payload, actix_web::error::PayloadError::Overflow)),
        _ => false,
    }
}

fn going_away() -> End {
    End::Close(CloseReason {
        code: CloseCode::Away,
        description: Some("the gateway is shutting down".to_owned()),
    })
}

fn silent(keep_alive: KeepAlive) -> End {
    End::Close(CloseReason {
        code: CloseCode::Policy,
        description: Some(format!(
            "no answer to pings for {} s",
            keep_alive.timeout.as_secs()
        )),
    })
}

#[cfg(test)]
mod tests {
    use mcpgw_core::{ServerState, Timestamp};

    use super::*;

    fn id(raw: &str) -> ServerId {
        ServerId::parse(raw).unwrap()
    }

    /// One event of every kind.
    fn every_event() -> Vec<DomainEvent> {
        vec![
            DomainEvent::McpServerRegistered {
                mcp_server_id: id("a"),
                mode: "subprocess".to_owned(),
                origin: "api",
            },
            DomainEvent::McpServerUpdated {
                mcp_server_id: id("a"),
                restart_required: false,
            },
            DomainEvent::McpServerRemoved {
                mcp_server_id: id("a"),
            },
            DomainEvent::McpServerStateChanged {
                mcp_server_id: id("a"),
                from: ServerState::Cold,
                to: ServerState::Initializing,
                reason: "start".to_owned(),
            },
            DomainEvent::McpServerStarted {
                mcp_server_id: id("a"),
                duration_ms: 5,
                tool_count: 2,
            },
            DomainEvent::McpServerStartFailed {
                mcp_server_id: id("a"),
                error: "x".to_owned(),
                consecutive_failures: 1,
            },
            DomainEvent::McpServerStopped {
                mcp_server_id: id("a"),
                reason: "api",
            },
            DomainEvent::McpServerCrashed {
                mcp_server_id: id("a"),
                exit: "1".to_owned(),
                consecutive_failures: 1,
            },
            DomainEvent::McpServerToolsChanged {
                mcp_server_id: id("a"),
                tool_count: 1,
            },
            DomainEvent::HealthCheckFailed {
                mcp_server_id: id("a"),
                error: "x".to_owned(),
                consecutive_failures: 1,
            },
            DomainEvent::ToolInvocationCompleted {
                mcp_server_id: id("a"),
                tool: "t".to_owned(),
                duration_ms: 1.0,
                is_error: false,
                principal: None,
                trace_id: None,
                span_id: None,
            },
            DomainEvent::ToolInvocationFailed {
                mcp_server_id: id("a"),
                tool: "t".to_owned(),
                duration_ms: 1.0,
                error_kind: "timeout",
                error: "x".to_owned(),
                principal: None,
                trace_id: None,
                span_id: None,
            },
            DomainEvent::GroupCreated {
                group_id: id("g"),
                strategy: "round_robin",
                origin: "api",
            },
            DomainEvent::GroupUpdated { group_id: id("g") },
            DomainEvent::GroupDeleted { group_id: id("g") },
            DomainEvent::GroupMemberAdded {
                group_id: id("g"),
                mcp_server_id: id("a"),
            },
            DomainEvent::GroupMemberRemoved {
                group_id: id("g"),
                mcp_server_id: id("a"),
            },
            DomainEvent::GroupMemberHealthChanged {
                group_id: id("g"),
                mcp_server_id: id("a"),
                in_rotation: true,
                reason: "server_ready",
            },
            DomainEvent::GroupStateChanged {
                group_id: id("g"),
                from: "healthy",
                to: "partial",
            },
        ]
    }

    #[test]
    fn every_kind_of_event_passes_a_filter_naming_its_type() {
        for event in every_event() {
            let filter = Filter::parse([event.event_type()], []).unwrap();
            assert!(filter.matches(&event), "{event:?}");
        }
    }

    #[test]
    fn a_frame_is_the_event_with_its_id_and_time() {
        let published = PublishedEvent {
            event_id: 42,
            occurred_at: Timestamp::from_unix_micros(1_500_000),
            event: DomainEvent::McpServerStopped {
                mcp_server_id: id("demo"),
                reason: "api",
            },
        };
        let frame: serde_json::Value = serde_json::from_str(&event_frame(&published)).unwrap();
        assert_eq!(
            frame,
            serde_json::json!({"event_type": "McpServerStopped", "mcp_server_id": "demo",
                "reason": "api", "event_id": "42", "occurred_at": "1970-01-01T00:00:01.500000"})
        );
        let cache = FrameCache::default();
        assert_eq!(&*cache.frame_of(&published), event_frame(&published));
        assert_eq!(cache.frame_of(&published), cache.frame_of(&published));
    }

    #[test]
    fn filters_match_by_type_and_by_server_or_group() {
        let everything = Filter::parse([""], [" "]).unwrap();
        assert!(every_event().iter().all(|event| everything.matches(event)));

        let by_type = Filter::parse(["McpServerStarted", " McpServerStopped "], []).unwrap();
        let matched: Vec<&str> = every_event()
            .iter()
            .filter(|event| by_type.matches(event))
            .map(DomainEvent::event_type)
            .collect();
        assert_eq!(matched, ["McpServerStarted", "McpServerStopped"]);

        // A member's event matches its member and its group; a whole group's only the group.
        let member = DomainEvent::GroupMemberAdded {
            group_id: id("g"),
            mcp_server_id: id("a"),
        };
        let whole = DomainEvent::GroupUpdated { group_id: id("g") };
        let by_server = Filter::parse([], ["a"]).unwrap();
        let by_group = Filter::parse([], ["g"]).unwrap();
        let by_other = Filter::parse([], ["b"]).unwrap();
        assert!(by_server.matches(&member) && by_group.matches(&member));
        assert!(!by_server.matches(&whole) && by_group.matches(&whole));
        assert!(!by_other.matches(&member));
    }

    #[test]
    fn bad_filters_say_what_is_wrong() {
        let unknown = Filter::parse(["McpServerStarted", "Nope"], []).unwrap_err();
        assert!(
            unknown.contains("`Nope`") && unknown.contains("GroupStateChanged"),
            "{unknown}"
        );
        let bad_id = Filter::parse([], ["ok", "not ok"]).unwrap_err();
        assert!(bad_id.starts_with("mcp_server_ids:"), "{bad_id}");
    }

    #[test]
    fn subscribe_messages_replace_the_filter_or_answer_an_error() {
        let mut filter = Filter::parse(["McpServerStarted"], ["a"]).unwrap();
        let before = filter.clone();
        // Not JSON, an unknown message type, an unknown event type, a list of the wrong type:
        // an error each time, and the filter stays as it was.
        for bad in [
            "{",
            r#"{"type":"other"}"#,
            r#"{"type":"subscribe","event_types":["Nope"]}"#,
            r#"{"type":"subscribe","event_types":"McpServerStarted"}"#,
        ] {
            let answer: serde_json::Value =
                serde_json::from_str(&answer_to_text(&mut filter, bad)).unwrap();
            assert_eq!(answer["type"], "error", "{bad}");
            assert!(answer["message"].as_str().is_some_and(|m| !m.is_empty()));
            assert_eq!(filter, before);
        }
        let answer: serde_json::Value = serde_json::from_str(&answer_to_text(
            &mut filter,
            r#"{"type":"subscribe","event_types":["GroupCreated"],"mcp_server_ids":["g"]}"#,
        ))
        .unwrap();
        assert_eq!(
            answer,
            serde_json::json!({"type": "subscribed", "event_types": ["GroupCreated"], "mcp_server_ids": ["g"]})
        );
        assert_eq!(filter, Filter::parse(["GroupCreated"], ["g"]).unwrap());
        let answer: serde_json::Value =
            serde_json::from_str(&answer_to_text(&mut filter, r#"{"type":"subscribe"}"#)).unwrap();
        assert_eq!(
            answer,
            serde_json::json!({"type": "subscribed", "event_types": [], "mcp_server_ids": []})
        );
        assert_eq!(filter, Filter::default());
    }

    /// The bundled server on a real socket, streaming from `bus`.
    mod on_a_socket {
        use std::net::{SocketAddr, TcpListener, TcpStream};

        use mcpgw_core::{EventSink as _, ManagerSettings, NullEventSink, ServerManager};
        use mcpgw_gateway::{Gateway, GatewayInfo, TokioClock, TokioSpawner};
        use mcpgw_testkit::fakes::FakeLauncher;
        use tungstenite::WebSocket;

        use super::*;
        use crate::{HttpSettings, build_server, install_metrics_recorder};

        type Client = WebSocket<TcpStream>;

        fn serve(bus: &Arc<EventBus>, keep_alive: KeepAlive) -> SocketAddr {
            serve_streams(EventStreams::new(bus.clone()).with_keep_alive(keep_alive))
        }

        fn serve_streams(streams: EventStreams) -> SocketAddr {
            let manager = ServerManager::new(
                Arc::new(FakeLauncher::new()),
                Arc::new(TokioClock::default()),
                Arc::new(NullEventSink),
                Arc::new(TokioSpawner::current()),
                None,
                ManagerSettings::default(),
            );
            let gateway = Gateway::new(
                manager,
                GatewayInfo {
                    version: "0.0.0".to_owned(),
                    config_path: None,
                },
            );
            let settings = HttpSettings {
                workers: 1,
                ..HttpSettings::default()
            };
            let state = ApiState::new(
                gateway,
                install_metrics_recorder().unwrap(),
                settings.clone(),
            )
            .with_events(streams);
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let address = listener.local_addr().unwrap();
            actix_web::rt::spawn(build_server(state, listener, &settings).unwrap());
            address
        }

        fn connect(address: SocketAddr) -> Client {
            let stream = TcpStream::connect(address).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(20)))
                .unwrap();
            let url = format!("ws://{address}{EVENTS_WS_PATH}");
            tungstenite::client(url.as_str(), stream).unwrap().0
        }

        fn removed(n: usize) -> DomainEvent {
            DomainEvent::McpServerRemoved {
                mcp_server_id: id(&format!("server-with-a-rather-long-id-{n}")),
            }
        }

        /// The next text frame as JSON, answering pings on the way.
        fn next_json(client: &mut Client) -> serde_json::Value {
            loop {
                match client.read().unwrap() {
                    tungstenite::Message::Text(text) => {
                        return serde_json::from_str(text.as_str()).unwrap();
                    }
                    tungstenite::Message::Close(frame) => panic!("closed: {frame:?}"),
                    _ => {}
                }
            }
        }

        /// The code of the first close frame among unmasked server frames (payloads under
        /// 64 KiB).
        fn close_code(mut bytes: &[u8]) -> Option<u16> {
            while bytes.len() >= 2 {
                let opcode = bytes[0] & 0x0f;
                let (length, header) = match bytes[1] & 0x7f {
                    126 => (usize::from(u16::from_be_bytes([bytes[2], bytes[3]])), 4),
                    127 => return None,
                    short => (usize::from(short), 2),
                };
                let payload = bytes.get(header..header + length)?;
                if opcode == 8 {
                    return Some(u16::from_be_bytes([*payload.first()?, *payload.get(1)?]));
                }
                bytes = &bytes[header + length..];
            }
            None
        }

        /// Until the first event has arrived, the connection may not be subscribed yet.
        async fn wait_until_subscribed(bus: &Arc<EventBus>, client: Client) -> Client {
            bus.publish(Timestamp::from_unix_micros(0), removed(0));
            actix_web::rt::task::spawn_blocking(move || {
                let mut client = client;
                assert_eq!(next_json(&mut client)["event_type"], "McpServerRemoved");
                client
            })
            .await
            .unwrap()
        }

        #[actix_web::test]
        async fn a_client_that_does_not_read_loses_its_oldest_events_and_is_told_how_many() {
            const CAPACITY: usize = 64;
            const EVENTS: usize = 200_000;
            let bus = Arc::new(EventBus::new(CAPACITY));
            let address = serve(&bus, KeepAlive::default());
            let client = actix_web::rt::task::spawn_blocking(move || connect(address))
                .await
                .unwrap();
            let client = wait_until_subscribed(&bus, client).await;

            // Far more than the socket's buffers and the bus's hold, published while the
            // client reads nothing: publishing never waits for it.
            let began = std::time::Instant::now();
            for n in 1..=EVENTS {
                bus.publish(Timestamp::from_unix_micros(0), removed(n));
            }
            assert!(began.elapsed() < Duration::from_secs(30));

            let (lagged, ids) = actix_web::rt::task::spawn_blocking(move || {
                let mut client = client;
                let mut lagged = 0;
                let mut ids = Vec::new();
                loop {
                    let frame = next_json(&mut client);
                    if frame["type"] == "lagged" {
                        lagged += frame["missed"].as_u64().unwrap();
                        continue;
                    }
                    let event_id: u64 = frame["event_id"].as_str().unwrap().parse().unwrap();
                    ids.push(event_id);
                    if event_id == EVENTS as u64 + 1 {
                        return (lagged, ids);
                    }
                }
            })
            .await
            .unwrap();
            assert!(lagged > 0, "the client was told it lagged");
            assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "in order");
            // Every event was either received or counted as missed.
            assert_eq!(ids.len() as u64 + lagged, EVENTS as u64);
        }

        #[actix_web::test]
        async fn streams_beyond_the_maximum_are_refused_until_one_closes() {
            let bus = Arc::new(EventBus::new(16));
            let address = serve_streams(EventStreams::new(bus.clone()).with_max_clients(2));
            let (status, body, second) = actix_web::rt::task::spawn_blocking(move || {
                let first = connect(address);
                let second = connect(address);
                let url = format!("ws://{address}{EVENTS_WS_PATH}");
                let stream = TcpStream::connect(address).unwrap();
                let Err(tungstenite::handshake::HandshakeError::Failure(tungstenite::Error::Http(
                    refused,
                ))) = tungstenite::client(url.as_str(), stream)
                else {
                    panic!("a third stream was let in");
                };
                let body: serde_json::Value =
                    serde_json::from_slice(refused.body().as_deref().unwrap_or_default()).unwrap();
                drop(first);
                (refused.status().as_u16(), body, second)
            })
            .await
            .unwrap();
            assert_eq!(status, 503);
            assert_eq!(body["error"], "ServiceUnavailableError", "{body}");
            assert!(
                body["message"]
                    .as_str()
                    .unwrap()
                    .contains("2 event streams")
            );
            // The first client's place is free once its connection has ended.
            let began = std::time::Instant::now();
            let third = loop {
                let attempt = actix_web::rt::task::spawn_blocking(move || {
                    let url = format!("ws://{address}{EVENTS_WS_PATH}");
                    tungstenite::client(url.as_str(), TcpStream::connect(address).unwrap())
                        .map(|(client, _)| client)
                        .ok()
                })
                .await
                .unwrap();
                if let Some(client) = attempt {
                    break client;
                }
                assert!(began.elapsed() < Duration::from_secs(10), "no place freed");
                actix_web::rt::time::sleep(Duration::from_millis(20)).await;
            };
            drop((second, third));
        }

        #[actix_web::test]
        async fn a_silent_client_is_closed_and_one_that_answers_pings_stays() {
            let bus = Arc::new(EventBus::new(16));
            let keep_alive = KeepAlive {
                ping_every: Duration::from_millis(100),
                timeout: Duration::from_millis(500),
            };
            let address = serve(&bus, keep_alive);
            let (silent, answering) =
                actix_web::rt::task::spawn_blocking(move || (connect(address), connect(address)))
                    .await
                    .unwrap();
            let silent = wait_until_subscribed(&bus, silent).await;
            let answering = wait_until_subscribed(&bus, answering).await;

            let (silent_close, answering) = actix_web::rt::task::spawn_blocking(move || {
                let mut answering = answering;
                // Reading answers the server's pings; the silent client reads nothing.
                answering
                    .get_mut()
                    .set_read_timeout(Some(Duration::from_millis(50)))
                    .unwrap();
                let until = std::time::Instant::now() + Duration::from_millis(1500);
                let mut pings = 0;
                while std::time::Instant::now() < until {
                    match answering.read() {
                        Ok(tungstenite::Message::Ping(_)) => pings += 1,
                        // The event that showed the silent client subscribed.
                        Ok(tungstenite::Message::Text(_)) => {}
                        Ok(other) => panic!("unexpected {other:?}"),
                        Err(tungstenite::Error::Io(error))
                            if matches!(
                                error.kind(),
                                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                            ) => {}
                        Err(error) => panic!("the answering client was dropped: {error}"),
                    }
                }
                assert!(pings >= 3, "{pings} pings");
                answering
                    .get_mut()
                    .set_read_timeout(Some(Duration::from_secs(20)))
                    .unwrap();
                // Read as raw frames: answering the buffered pings would fail on a closed
                // connection before the close frame is reached.
                let mut silent = silent;
                let mut bytes = Vec::new();
                let _ = std::io::Read::read_to_end(silent.get_mut(), &mut bytes);
                let close = close_code(&bytes);
                (close, answering)
            })
            .await
            .unwrap();
            assert_eq!(silent_close, Some(1008));

            bus.publish(Timestamp::from_unix_micros(0), removed(1));
            let event = actix_web::rt::task::spawn_blocking(move || {
                let mut answering = answering;
                next_json(&mut answering)
            })
            .await
            .unwrap();
            assert_eq!(event["event_type"], "McpServerRemoved");
        }
    }
}
