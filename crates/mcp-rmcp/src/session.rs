//! An initialized MCP client session on rmcp: the [`McpSession`] port over any rmcp transport.

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_core::trace::TraceContext;
use mcpgw_core::{
    CallContext, ExitStatusInfo, ListChanges, McpSession, RelayCapabilities, RelayError,
    RelayRoutes, ServerId, ServerOutput, SessionError, SessionErrorKind, Tool, ToolCall,
    ToolCallOutcome,
};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientConfig,
    ClientRequest, CompleteRequest, CompleteRequestParams, ElicitRequestParams, ElicitResult,
    ErrorCode, ErrorData, GetPromptRequest, GetPromptRequestParams, ListPromptsRequest,
    ListResourceTemplatesRequest, ListResourcesRequest, ListToolsRequest, NumberOrString,
    PaginatedRequestParams, PingRequest, ProgressToken, ReadResourceRequest,
    ReadResourceRequestParams, RequestId, ServerResult, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
// Upstream sessions are of the `initialize` era, whose resource subscriptions rmcp marks
// deprecated in favour of the 2026-07-28 era's `subscriptions/listen`.
#[allow(deprecated)]
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ListRootsResult, SetLevelRequest,
    SetLevelRequestParams, SubscribeRequest, UnsubscribeRequest,
};
use rmcp::service::{
    ClientInitializeError, InboundStreamOrigin, Peer, PeerRequestOptions, QuitReason,
    RequestContext, RoleClient, ServiceError,
};
use rmcp::transport::Transport;
use serde_json::{Map, Value};
use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::link::StdioLink;
use crate::progress::{NotificationRelayTransport, ProgressRoutes};

/// The `clientInfo.name` upstream servers see unless the settings say otherwise.
pub(crate) const DEFAULT_CLIENT_NAME: &str = "mcpgw";

/// What the gateway says about itself in an upstream `initialize`: its name and version, the
/// client capabilities it relays to its own clients (sampling, elicitation in both modes,
/// roots; see [`mcpgw_core::relay`]), and the newest protocol version that still has the
/// handshake. Stdio servers are most likely to accept that one, and over Streamable HTTP its
/// sessions are what tell the gateway (by HTTP 404) that a server restarted.
pub(crate) fn upstream_client_config(name: &str, version: &str) -> ClientConfig {
    ClientConfig::new(
        relayed_capabilities(),
        rmcp::model::Implementation::new(name.to_owned(), version.to_owned()),
    )
    .with_protocol_version(rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE)
}

/// The client capabilities the gateway can relay. `roots.listChanged` is not among them: the
/// upstream session is shared by many clients, whose roots change independently.
fn relayed_capabilities() -> rmcp::model::ClientCapabilities {
    serde_json::from_value(RelayCapabilities::ALL.to_client_capabilities()).unwrap_or_default()
}

/// The `_meta` key of a request's client capabilities (2026-07-28).
const CLIENT_CAPABILITIES_META: &str = "io.modelcontextprotocol/clientCapabilities";
/// The protocol era whose requests carry their own version, client and capabilities, and whose
/// servers answer with input-required results instead of asking mid-call.
const MODERN_PROTOCOL: &str = "2026-07-28";
/// How long the gateway waits for a server to answer whether it takes 2026-07-28 requests.
const DISCOVER_PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// How an upstream request id is written where the relay routes compare it.
pub(crate) fn origin_key(id: &RequestId) -> String {
    match id {
        NumberOrString::Number(number) => number.to_string(),
        NumberOrString::String(text) => format!("{text:?}"),
    }
}

/// The outbound request a server's message came with, when the transport says (the SSE stream
/// of a Streamable HTTP POST).
pub(crate) fn origin_of(extensions: &rmcp::model::Extensions) -> Option<String> {
    match extensions.get::<InboundStreamOrigin>()? {
        InboundStreamOrigin::OutboundRequest(id) => Some(origin_key(id)),
        InboundStreamOrigin::Unassociated => None,
    }
}

/// Hands a log message of the server to the client whose call it came during; dropped when
/// that client cannot be told which one it is.
pub(crate) fn relay_log_message(routes: &RelayRoutes, params: Value, origin: Option<&str>) {
    const METHOD: &str = "notifications/message";
    match routes.route(METHOD, origin) {
        Ok(relay) => {
            relay.notify(METHOD, params);
        }
        Err(why) => {
            tracing::debug!(%why, "dropping a log message of an upstream server");
        }
    }
}

/// How many resource updates a slow subscriber may fall behind before it misses some.
const RESOURCE_UPDATE_CAPACITY: usize = 64;

/// The client side of an upstream session as rmcp runs it: the gateway's `initialize`
/// information, and the notifications that reach the session's users through it (resource
/// updates; progress and tool-list changes are taken off the stream before rmcp sees them).
struct UpstreamClient {
    config: ClientConfig,
    resource_updates: tokio::sync::broadcast::Sender<String>,
    relay_routes: Arc<RelayRoutes>,
    list_changes: watch::Sender<ListChanges>,
}

impl UpstreamClient {
    /// Relays a request of the server to the client whose call it belongs to, and hands back
    /// that client's answer, typed as rmcp wants it.
    async fn relay<P, R>(
        &self,
        method: &str,
        params: &P,
        context: &RequestContext<RoleClient>,
    ) -> Result<R, ErrorData>
    where
        P: serde::Serialize,
        R: serde::de::DeserializeOwned,
    {
        let params = serde_json::to_value(params)
            .map_err(|error| ErrorData::invalid_params(format!("{method}: {error}"), None))?;
        let origin = origin_of(&context.extensions);
        let relay = self
            .relay_routes
            .route(method, origin.as_deref())
            .map_err(relay_error_data)?;
        let answer = relay
            .request(method, params)
            .await
            .map_err(relay_error_data)?;
        serde_json::from_value(answer).map_err(|error| {
            ErrorData::internal_error(
                format!("the client's answer to {method} has the wrong shape: {error}"),
                None,
            )
        })
    }
}

fn relay_error_data(error: RelayError) -> ErrorData {
    ErrorData::new(ErrorCode(error.code), error.message, error.data)
}

// Sampling, roots and logging are the `initialize` era's, which rmcp marks deprecated.
#[allow(deprecated)]
impl rmcp::ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.relay("sampling/createMessage", &params, &context)
            .await
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.relay("elicitation/create", &params, &context).await
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        self.relay("roots/list", &serde_json::json!({}), &context)
            .await
    }

    async fn on_prompt_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.list_changes
            .send_modify(|changes| changes.prompts = changes.prompts.wrapping_add(1));
    }

    async fn on_resource_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.list_changes
            .send_modify(|changes| changes.resources = changes.resources.wrapping_add(1));
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        // Nobody subscribed right now means nobody is waiting for it.
        let _ = self.resource_updates.send(params.uri);
    }
}

/// A server that keeps answering with new cursors is cut off after this many pages.
const MAX_LIST_PAGES: usize = 10_000;

/// How long `close` waits for rmcp to wind the connection down.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// How long a request that failed because the connection closed waits for the session to
/// report its end (which follows within moments) before it answers.
const END_NOTICE_GRACE: Duration = Duration::from_millis(500);

/// How long telling the server about a cancelled request may delay the caller.
const CANCEL_NOTICE_GRACE: Duration = Duration::from_secs(1);

/// Resolves, with a description for the logs, once a transport knows that its connection is gone
/// for good while rmcp would keep it open (a remote server that dropped the session or cannot
/// be reached any more).
pub(crate) type ConnectionLost = Pin<Box<dyn Future<Output = String> + Send>>;

/// What a connector decides about a session it establishes; the transport is separate.
pub(crate) struct SessionSetup {
    pub(crate) client_config: ClientConfig,
    pub(crate) request_timeout: Option<Duration>,
    /// Ends the session when it resolves. Stdio transports end on their own and pass `None`.
    pub(crate) connection_lost: Option<ConnectionLost>,
    /// Completes error messages about a broken connection: where to look for the reason.
    pub(crate) failure_hint: String,
}

/// What relays the session's notifications: progress routes and the tool-list change counter,
/// and for a stdio server the link that does the relaying itself.
struct Relays {
    progress_routes: Arc<ProgressRoutes>,
    relay_routes: Arc<RelayRoutes>,
    tool_list_changes: watch::Receiver<u64>,
    link: Option<Arc<StdioLink>>,
}

/// An MCP client session with one upstream server, created by a connector of this crate.
///
/// Dropping the session ends the connection, as [`McpSession::close`] does.
pub struct RmcpSession {
    server_id: ServerId,
    peer: Peer<RoleClient>,
    /// The stdio link whose direct path tool calls take; `None` for remote servers.
    link: Option<Arc<StdioLink>>,
    request_timeout: Option<Duration>,
    progress_routes: Arc<ProgressRoutes>,
    /// The calls in flight and the clients they came from, for what the server sends back.
    relay_routes: Arc<RelayRoutes>,
    tool_list_changes: watch::Receiver<u64>,
    /// What the server announced with `notifications/prompts/list_changed` and
    /// `notifications/resources/list_changed`.
    list_changes: watch::Receiver<ListChanges>,
    /// What the server announced with `notifications/resources/updated`; dropped with the
    /// session, which ends every receiver.
    resource_updates: tokio::sync::broadcast::Sender<String>,
    failure_hint: String,
    /// What the gateway calls itself upstream, for the `_meta` of 2026-07-28 requests.
    client_info: rmcp::model::Implementation,
    /// Whether the server takes requests of the 2026-07-28 era on this `initialize`-era
    /// session, learned from a `server/discover` the first time a caller of that era needs it.
    modern_requests: tokio::sync::OnceCell<bool>,
    shutdown: CancellationToken,
    closed_by_gateway: AtomicBool,
    ended: watch::Receiver<Option<ExitStatusInfo>>,
    _shutdown_on_drop: DropGuard,
}

impl std::fmt::Debug for RmcpSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RmcpSession")
            .field("server_id", &self.server_id)
            .field("ended", &self.ended.borrow().is_some())
            .finish_non_exhaustive()
    }
}

impl RmcpSession {
    /// Runs the `initialize` handshake over `transport` and starts serving the session.
    pub(crate) async fn establish<T>(
        server_id: ServerId,
        transport: T,
        setup: SessionSetup,
    ) -> Result<Self, ClientInitializeError>
    where
        T: Transport<RoleClient> + 'static,
    {
        let progress_routes = Arc::new(ProgressRoutes::default());
        // Streamable HTTP says which POST a server's request came with.
        let relay_routes = Arc::new(RelayRoutes::new(false));
        let (tool_list_sender, tool_list_changes) = watch::channel(0_u64);
        let transport = NotificationRelayTransport::new(
            transport,
            Arc::clone(&progress_routes),
            Arc::clone(&relay_routes),
            tool_list_sender,
        );
        let relays = Relays {
            progress_routes,
            relay_routes,
            tool_list_changes,
            link: None,
        };
        Self::start(server_id, transport, setup, relays).await
    }

    /// Like [`RmcpSession::establish`], over a server's stdin and stdout: tool calls take the
    /// link's direct path, everything else goes through rmcp.
    pub(crate) async fn establish_linked(
        server_id: ServerId,
        to_server: Pin<Box<dyn tokio::io::AsyncWrite + Send>>,
        from_server: ServerOutput,
        setup: SessionSetup,
    ) -> Result<Self, ClientInitializeError> {
        let progress_routes = Arc::new(ProgressRoutes::default());
        // A stdio stream does not say which call a server's request belongs to: clients that
        // can be asked take turns.
        let relay_routes = Arc::new(RelayRoutes::new(true));
        let (tool_list_sender, tool_list_changes) = watch::channel(0_u64);
        let (link, transport) = StdioLink::open(
            server_id.clone(),
            to_server,
            from_server,
            Arc::clone(&progress_routes),
            Arc::clone(&relay_routes),
            tool_list_sender,
        );
        let relays = Relays {
            progress_routes,
            relay_routes,
            tool_list_changes,
            link: Some(link),
        };
        Self::start(server_id, transport, setup, relays).await
    }

    async fn start<T>(
        server_id: ServerId,
        transport: T,
        setup: SessionSetup,
        relays: Relays,
    ) -> Result<Self, ClientInitializeError>
    where
        T: Transport<RoleClient> + 'static,
    {
        let SessionSetup {
            client_config,
            request_timeout,
            connection_lost,
            failure_hint,
        } = setup;
        let Relays {
            progress_routes,
            relay_routes,
            tool_list_changes,
            link,
        } = relays;
        let shutdown = CancellationToken::new();
        let (resource_updates, _) = tokio::sync::broadcast::channel(RESOURCE_UPDATE_CAPACITY);
        let (list_changes_sender, list_changes) = watch::channel(ListChanges::default());
        let client_info = client_config.client_info.clone();
        let client = UpstreamClient {
            config: client_config,
            resource_updates: resource_updates.clone(),
            relay_routes: Arc::clone(&relay_routes),
            list_changes: list_changes_sender,
        };
        // Boxed as `Send` here, where the types are concrete: left to async-trait's inference,
        // rustc fails to prove rmcp's handshake future `Send` for every lifetime.
        let handshake: Pin<Box<dyn Future<Output = _> + Send>> = Box::pin(
            rmcp::service::serve_client_with_ct(client, transport, shutdown.clone()),
        );
        let running = handshake.await?;
        let peer = running.peer().clone();

        let (ended_sender, ended) = watch::channel(None);
        let watched_server = server_id.clone();
        let connection_lost =
            connection_lost.unwrap_or_else(|| Box::pin(std::future::pending::<String>()));
        let shutdown_when_lost = shutdown.clone();
        tokio::spawn(async move {
            let waiting = running.waiting();
            tokio::pin!(waiting);
            let (description, lost) = tokio::select! {
                quit = &mut waiting => (describe_quit(quit), false),
                description = connection_lost => (description, true),
            };
            tracing::debug!(server = %watched_server, %description, "mcp session ended");
            // Told before rmcp winds down, so that waiters on `closed` learn of it at once.
            let _ = ended_sender.send(Some(ExitStatusInfo {
                description,
                ..Default::default()
            }));
            if lost {
                shutdown_when_lost.cancel();
                let _ = waiting.await;
            }
        });

        Ok(Self {
            server_id,
            peer,
            link,
            request_timeout,
            progress_routes,
            relay_routes,
            tool_list_changes,
            list_changes,
            resource_updates,
            failure_hint,
            client_info,
            modern_requests: tokio::sync::OnceCell::new(),
            _shutdown_on_drop: shutdown.clone().drop_guard(),
            shutdown,
            closed_by_gateway: AtomicBool::new(false),
            ended,
        })
    }

    /// Whether the server declared `resources.subscribe` in its `initialize` answer.
    fn offers_subscriptions(&self) -> bool {
        self.peer.peer_info().is_some_and(|info| {
            info.capabilities
                .resources
                .as_ref()
                .and_then(|resources| resources.subscribe)
                == Some(true)
        })
    }

    /// The `serverInfo` the upstream reported in its `initialize` answer, as JSON.
    pub fn server_info(&self) -> Option<serde_json::Value> {
        let info = self.peer.peer_info()?;
        serde_json::to_value(info.server_info.as_ref()?).ok()
    }

    /// The `_meta` that makes a request one of the 2026-07-28 era, for a caller of that era
    /// (`input` is `Some`) when the server takes such requests on this session: then the
    /// server may answer with an input-required result, which goes back to that caller.
    /// `None` keeps the request in the session's own era.
    async fn modern_meta(&self, ctx: &CallContext) -> Option<Map<String, Value>> {
        let capabilities = self.modern_capabilities(ctx).await?;
        Some(modern_meta_map(&self.client_info, &capabilities))
    }

    /// Whether a request for this caller goes out in the 2026-07-28 era (as
    /// [`RmcpSession::modern_meta`] decides), and then the client capabilities it declares. The
    /// stdio link's tool calls write the rest of the era's `_meta` from borrowed values
    /// ([`ModernMeta`]) instead of building it.
    async fn modern_capabilities(&self, ctx: &CallContext) -> Option<Value> {
        ctx.input.as_ref()?;
        if !self.accepts_modern_requests().await {
            return None;
        }
        let mut capabilities = ctx.relay.as_ref().map_or_else(
            || Value::Object(Map::new()),
            |relay| relay.capabilities().to_client_capabilities(),
        );
        if ctx.tasks {
            capabilities["extensions"] = serde_json::json!({ mcpgw_core::TASKS_EXTENSION: {} });
        }
        Some(capabilities)
    }

    /// Asks the server once, with a `server/discover` of the 2026-07-28 era, whether it takes
    /// requests of that era on this session. A server of the `initialize` era only answers
    /// with an error (or not at all, within [`DISCOVER_PROBE_TIMEOUT`]), and keeps being asked
    /// its questions mid-call.
    ///
    /// Only stdio servers are asked. Over Streamable HTTP a 2026-07-28 request is a POST of its
    /// own outside any session, with the era's version in its headers; sent on the session, it
    /// would make rmcp's transport announce that version for the session's later requests too,
    /// which servers of the `initialize` era refuse.
    async fn accepts_modern_requests(&self) -> bool {
        if self.link.is_none() {
            return false;
        }
        *self
            .modern_requests
            .get_or_init(|| async {
                let meta = rmcp::model::RequestMetaObject::with_client_context(
                    rmcp::model::ProtocolVersion::V_2026_07_28,
                    self.client_info.clone(),
                    relayed_capabilities(),
                );
                let probe = tokio::time::timeout(DISCOVER_PROBE_TIMEOUT, self.peer.discover(meta));
                let accepts = match probe.await {
                    Ok(Ok(discovered)) => discovered
                        .supported_versions
                        .iter()
                        .any(|version| version.as_str() == MODERN_PROTOCOL),
                    Ok(Err(error)) => {
                        tracing::debug!(server = %self.server_id, %error,
                            "the server takes no 2026-07-28 requests on its session");
                        false
                    }
                    Err(_) => false,
                };
                tracing::debug!(server = %self.server_id, accepts,
                    "asked whether the server takes 2026-07-28 requests");
                accepts
            })
            .await
    }

    fn request_options(&self) -> PeerRequestOptions {
        match self.request_timeout {
            Some(timeout) => PeerRequestOptions::with_timeout(timeout),
            None => PeerRequestOptions::no_options(),
        }
    }

    async fn request(
        &self,
        request: ClientRequest,
        method: &str,
    ) -> Result<ServerResult, SessionError> {
        self.ensure_open()?;
        let handle = match self
            .peer
            .send_request_with_option(request, self.request_options())
            .await
        {
            Ok(handle) => handle,
            Err(error) => return Err(self.failure(error, method).await),
        };
        let response = handle.await_response();
        tokio::select! {
            biased;
            result = response => match result {
                Ok(result) => Ok(result),
                Err(error) => Err(self.failure(error, method).await),
            },
            () = self.ended() => Err(self.ended_error(method)),
        }
    }

    /// A request made for a caller (`tools/call` but on the stdio link's direct path,
    /// `prompts/get`, `resources/read`): what the server asks the client meanwhile goes to
    /// `ctx.relay`, its progress to `ctx.progress`, and the caller's cancellation cancels the
    /// request upstream.
    async fn request_for_caller(
        &self,
        request: ClientRequest,
        method: &str,
        ctx: &CallContext,
    ) -> Result<ServerResult, SessionError> {
        self.ensure_open()?;
        let ticket = tokio::select! {
            biased;
            ticket = self.relay_routes.enter(ctx.relay.clone()) => ticket,
            () = ctx.cancellation.cancelled() => return Err(cancelled_error()),
        };
        let handle = match self
            .peer
            .send_cancellable_request(request, self.request_options())
            .await
        {
            Ok(handle) => handle,
            Err(error) => return Err(self.failure(error, method).await),
        };
        let request_id = handle.id.clone();
        ticket.bind_origin(origin_key(&request_id));
        // rmcp puts a progress token on every request; routing it is what makes it ours.
        let _progress_registration = ctx.progress.clone().map(|handler| {
            self.progress_routes
                .register(handle.progress_token.clone(), handler)
        });
        let response = handle.await_response();
        tokio::pin!(response);
        tokio::select! {
            biased;
            result = &mut response => match result {
                Ok(result) => Ok(result),
                Err(error) => Err(self.failure(error, method).await),
            },
            () = ctx.cancellation.cancelled() => {
                self.cancel_upstream(request_id).await;
                Err(cancelled_error())
            }
            () = self.ended() => Err(self.ended_error(method)),
        }
    }

    /// The error of a request that failed. When the failure is the end of the whole session
    /// (the server exited, the connection broke), the end is awaited (briefly) first, so that
    /// the error can say why and `has_ended` already answers true: the manager then counts the
    /// end once, as a crash, and not once more for every request that was in flight.
    async fn failure(&self, error: ServiceError, method: &str) -> SessionError {
        if matches!(
            error,
            ServiceError::TransportClosed | ServiceError::TransportSend(_)
        ) {
            self.await_end_notice().await;
        }
        self.session_error(error, method)
    }

    /// Waits (briefly) for the session to report its end, which follows a broken connection
    /// within moments, so that an error can say why.
    async fn await_end_notice(&self) {
        let _ = tokio::time::timeout(END_NOTICE_GRACE, self.ended()).await;
    }

    fn ensure_open(&self) -> Result<(), SessionError> {
        if self.closed_by_gateway.load(Ordering::Acquire) {
            return Err(closed_error());
        }
        if let Some(description) = self.end_description() {
            return Err(SessionError::transport(format!(
                "the connection to the server is gone ({description}); the gateway starts a new \
                 session on the next use"
            )));
        }
        Ok(())
    }

    /// Completes once the session has ended, however it ended.
    async fn ended(&self) {
        let mut ended = self.ended.clone();
        let _ = ended.wait_for(Option::is_some).await;
    }

    /// The error of a request that was still waiting when the session ended under it.
    fn ended_error(&self, method: &str) -> SessionError {
        if self.closed_by_gateway.load(Ordering::Acquire) {
            return closed_error();
        }
        SessionError::transport(format!(
            "the connection to the server ended before it answered `{method}` ({}); {}",
            self.end_description()
                .unwrap_or_else(|| "the server stopped responding".into()),
            self.failure_hint
        ))
    }

    fn session_error(&self, error: ServiceError, method: &str) -> SessionError {
        match error {
            ServiceError::McpError(data) => {
                protocol_error(method, data.code.0, &data.message, data.data)
            }
            ServiceError::Timeout { timeout } => timeout_error(method, timeout),
            ServiceError::Cancelled { .. } => cancelled_error(),
            _ if self.closed_by_gateway.load(Ordering::Acquire) => closed_error(),
            ServiceError::TransportClosed => SessionError::transport(format!(
                "the connection to the server closed before it answered `{method}` ({}); {}",
                self.end_description()
                    .unwrap_or_else(|| "the server stopped responding".into()),
                self.failure_hint
            )),
            // The inner error alone: the wrapper's display names rmcp's generic transport types.
            ServiceError::TransportSend(error) => self.send_error(method, &error.error),
            ServiceError::UnexpectedResponse => SessionError::transport(format!(
                "the server answered `{method}` with a result of the wrong type"
            )),
            other => SessionError::transport(format!("`{method}` failed: {other}")),
        }
    }

    fn send_error(&self, method: &str, error: &dyn std::fmt::Display) -> SessionError {
        SessionError::transport(format!(
            "sending `{method}` to the server failed: {error}; {}",
            self.failure_hint
        ))
    }

    fn end_description(&self) -> Option<String> {
        self.ended
            .borrow()
            .as_ref()
            .map(|exit| exit.description.clone())
    }

    /// Runs a paginated list request to its last page and collects the items of every page.
    async fn list_all<Item>(
        &self,
        method: &str,
        request: impl Fn(PaginatedRequestParams) -> ClientRequest,
        page: impl Fn(ServerResult) -> Option<(Vec<Item>, Option<String>)>,
    ) -> Result<Vec<Item>, SessionError> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen_cursors = HashSet::new();
        for _page in 0..MAX_LIST_PAGES {
            let params = PaginatedRequestParams::default().with_cursor(cursor.take());
            let result = self.request(request(params), method).await?;
            let Some((page_items, next_cursor)) = page(result) else {
                return Err(wrong_result_type(method));
            };
            items.extend(page_items);
            match next_cursor {
                Some(next) if !next.is_empty() => {
                    if !seen_cursors.insert(next.clone()) {
                        return Err(SessionError::transport(format!(
                            "the server's `{method}` pagination repeats cursor `{next}`"
                        )));
                    }
                    cursor = Some(next);
                }
                _ => return Ok(items),
            }
        }
        Err(SessionError::transport(format!(
            "the server's `{method}` pagination did not end within {MAX_LIST_PAGES} pages"
        )))
    }

    /// Tells the server to stop working on `request_id`. The caller has gone already, so a
    /// server that cannot be told in time is not waited for.
    async fn cancel_upstream(&self, request_id: RequestId) {
        let notice = CancelledNotificationParam::new(
            Some(request_id),
            Some("the caller cancelled the request".to_owned()),
        );
        self.send_cancellation(self.peer.notify_cancelled(notice))
            .await;
    }

    /// Sends a cancellation notice, waiting for it no longer than [`CANCEL_NOTICE_GRACE`].
    async fn send_cancellation<E: std::fmt::Display>(
        &self,
        send: impl Future<Output = Result<(), E>>,
    ) {
        match tokio::time::timeout(CANCEL_NOTICE_GRACE, send).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::debug!(server = %self.server_id, %error, "could not send a cancellation");
            }
            Err(_) => {
                tracing::debug!(server = %self.server_id, "sending a cancellation timed out");
            }
        }
    }
}

impl RmcpSession {
    /// A tool call on the stdio link's direct path: written from this task, answered straight
    /// back to it as JSON (see the `link` module).
    async fn call_tool_linked(
        &self,
        link: &Arc<StdioLink>,
        call: ToolCall,
        ctx: CallContext,
        modern: Option<Value>,
    ) -> Result<ToolCallOutcome, SessionError> {
        link.follow_caller().await;
        let id = link.next_id();
        let (_expected, answer) = link.expect_answer(id);
        let capabilities = if modern.is_some() {
            None
        } else {
            caller_capabilities(&ctx)
        };
        let round = modern.as_ref().and(ctx.input.as_ref());
        let caller = caller_entry(ctx.caller_meta.as_deref(), ctx.principal.as_deref());
        let progress_registration = ctx.progress.map(|handler| {
            self.progress_routes
                .register(ProgressToken(NumberOrString::Number(id)), handler)
        });
        let request = LinkedCall {
            jsonrpc: "2.0",
            id,
            method: "tools/call",
            params: LinkedCallParams {
                name: &call.name,
                arguments: call.arguments.as_ref(),
                input_responses: round.and_then(|round| round.responses.as_ref()),
                request_state: round.and_then(|round| round.state.as_deref()),
                meta: CallMeta {
                    traceparent: ctx.trace.as_ref().map(TraceContext::traceparent),
                    tracestate: ctx.trace.as_ref().and_then(|trace| trace.state.as_deref()),
                    progress_token: progress_registration.as_ref().map(|_| id),
                    caller,
                    client_capabilities: capabilities.as_deref(),
                    modern: modern.as_ref().map(|capabilities| ModernMeta {
                        protocol_version: MODERN_PROTOCOL,
                        client_info: &self.client_info,
                        client_capabilities: capabilities,
                    }),
                },
            },
        };
        let line = serde_json::to_vec(&request).map_err(|error| {
            SessionError::transport(format!("the `tools/call` request is not JSON: {error}"))
        })?;
        if let Err(error) = link.send_line(line).await {
            self.await_end_notice().await;
            if self.closed_by_gateway.load(Ordering::Acquire) {
                return Err(closed_error());
            }
            return Err(self.send_error("tools/call", &error));
        }
        let timeout = async {
            match self.request_timeout {
                Some(timeout) => tokio::time::sleep(timeout).await,
                None => std::future::pending().await,
            }
        };
        let answer = tokio::select! {
            biased;
            answer = answer => answer,
            () = ctx.cancellation.cancelled() => {
                self.cancel_linked(link, id, "the caller cancelled the request").await;
                return Err(cancelled_error());
            }
            () = timeout => {
                self.cancel_linked(link, id, "the request timed out").await;
                return Err(timeout_error("tools/call", self.request_timeout.unwrap_or_default()));
            }
            () = self.ended() => return Err(self.ended_error("tools/call")),
        };
        let Ok(mut answer) = answer else {
            // The reader ended: the session is ending, and says why in a moment.
            self.await_end_notice().await;
            return Err(self.ended_error("tools/call"));
        };
        if let Some(error) = answer.get_mut("error").map(Value::take) {
            return Err(linked_error(error));
        }
        match answer.get_mut("result").map(Value::take) {
            Some(result @ Value::Object(_)) => {
                let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
                Ok(ToolCallOutcome { result, is_error })
            }
            _ => Err(wrong_result_type("tools/call")),
        }
    }

    /// Tells the server to stop working on direct request `id`, without waiting long for it.
    async fn cancel_linked(&self, link: &Arc<StdioLink>, id: i64, reason: &str) {
        let notice = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": reason},
        });
        self.send_cancellation(link.send_line(notice.to_string().into_bytes()))
            .await;
    }
}

/// A `tools/call` request of the direct path, serialized from borrowed parts.
#[derive(serde::Serialize)]
struct LinkedCall<'a> {
    jsonrpc: &'static str,
    id: i64,
    method: &'static str,
    params: LinkedCallParams<'a>,
}

#[derive(serde::Serialize)]
struct LinkedCallParams<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<&'a Map<String, Value>>,
    #[serde(rename = "inputResponses", skip_serializing_if = "Option::is_none")]
    input_responses: Option<&'a Value>,
    #[serde(rename = "requestState", skip_serializing_if = "Option::is_none")]
    request_state: Option<&'a str>,
    #[serde(rename = "_meta", skip_serializing_if = "CallMeta::is_empty")]
    meta: CallMeta<'a>,
}

#[derive(serde::Serialize)]
struct CallMeta<'a> {
    /// The trace context the server continues.
    #[serde(skip_serializing_if = "Option::is_none")]
    traceparent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tracestate: Option<&'a str>,
    #[serde(rename = "progressToken", skip_serializing_if = "Option::is_none")]
    progress_token: Option<i64>,
    #[serde(
        rename = "io.modelcontextprotocol/clientCapabilities",
        skip_serializing_if = "Option::is_none"
    )]
    client_capabilities: Option<&'a Value>,
    /// The version, client and capabilities of a 2026-07-28 request.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    modern: Option<ModernMeta<'a>>,
    /// The calling principal under the server's `caller_meta` key.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    caller: Option<CallerEntry<'a>>,
}

/// One `_meta` member whose key is the server's `caller_meta`: the calling principal.
struct CallerEntry<'a> {
    key: &'a str,
    principal: &'a str,
}

impl serde::Serialize for CallerEntry<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(self.key, self.principal)?;
        map.end()
    }
}

/// The principal member a call's `_meta` gets, when its server names a key for it
/// ([`CallContext::caller_meta`]) and the caller is known ([`CallContext::principal`]).
fn caller_entry<'a>(
    key: Option<&'a String>,
    principal: Option<&'a str>,
) -> Option<CallerEntry<'a>> {
    Some(CallerEntry {
        key: key?,
        principal: principal?,
    })
}

/// The `_meta` members of a 2026-07-28 request from `client_info` declaring `capabilities`, as
/// a map (for the requests that go through rmcp's typed messages).
fn modern_meta_map(
    client_info: &rmcp::model::Implementation,
    capabilities: &Value,
) -> Map<String, Value> {
    let meta = ModernMeta {
        protocol_version: MODERN_PROTOCOL,
        client_info,
        client_capabilities: capabilities,
    };
    match serde_json::to_value(meta) {
        Ok(Value::Object(meta)) => meta,
        // A struct of strings and JSON values always makes an object.
        _ => Map::new(),
    }
}

/// The `_meta` members of a 2026-07-28 request, written from borrowed values (the stdio link's
/// tool calls write them so, without building a map).
#[derive(serde::Serialize)]
struct ModernMeta<'a> {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion")]
    protocol_version: &'static str,
    #[serde(rename = "io.modelcontextprotocol/clientInfo")]
    client_info: &'a rmcp::model::Implementation,
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities")]
    client_capabilities: &'a Value,
}

impl CallMeta<'_> {
    fn is_empty(&self) -> bool {
        self.traceparent.is_none()
            && self.progress_token.is_none()
            && self.client_capabilities.is_none()
            && self.modern.is_none()
            && self.caller.is_none()
    }
}

/// Makes a request one of the 2026-07-28 era: its `_meta` gets `meta` (see
/// [`RmcpSession::modern_meta`]); the answers and the server's state of a retry are returned for
/// its params.
fn modern_request(
    slot: &mut Option<rmcp::model::RequestMetaObject>,
    meta: Map<String, Value>,
    ctx: &CallContext,
    method: &str,
) -> Result<(Option<rmcp::model::InputResponses>, Option<String>), SessionError> {
    let request_meta = slot.get_or_insert_default();
    for (key, value) in meta {
        request_meta.insert(key, value);
    }
    input_round(ctx, method)
}

/// The answers and the server's state of a retry, typed as rmcp wants them. `inputResponses`
/// must be an object keyed like the server's questions.
fn input_round(
    ctx: &CallContext,
    method: &str,
) -> Result<(Option<rmcp::model::InputResponses>, Option<String>), SessionError> {
    check_responses(ctx, method)?;
    let Some(round) = &ctx.input else {
        return Ok((None, None));
    };
    let responses = match &round.responses {
        Some(Value::Object(responses)) => Some(
            responses
                .iter()
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
        ),
        _ => None,
    };
    Ok((responses, round.state.clone()))
}

/// `inputResponses`, when there are any, must be an object keyed like the server's questions.
fn check_responses(ctx: &CallContext, method: &str) -> Result<(), SessionError> {
    match ctx
        .input
        .as_ref()
        .and_then(|round| round.responses.as_ref())
    {
        None | Some(Value::Object(_)) => Ok(()),
        Some(_) => Err(SessionError::new(
            SessionErrorKind::Protocol { code: -32602 },
            format!(
                "`{method}`: inputResponses must be an object that maps the keys of the \
                 server's inputRequests to the answers"
            ),
        )),
    }
}

/// What the caller of a tool can really be sent, for the server to read in place of what the
/// gateway declared for the whole session (the 2026-07-28 per-request capabilities, which
/// servers on the official SDKs prefer); `None` when the caller can be sent all of it.
fn caller_capabilities(ctx: &CallContext) -> Option<std::borrow::Cow<'static, Value>> {
    static NONE: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| serde_json::json!({}));
    let Some(relay) = &ctx.relay else {
        return Some(std::borrow::Cow::Borrowed(&NONE));
    };
    let capabilities = relay.capabilities();
    (capabilities != RelayCapabilities::ALL)
        .then(|| std::borrow::Cow::Owned(capabilities.to_client_capabilities()))
}

/// The session error of a JSON-RPC error answer to a direct `tools/call`.
fn linked_error(error: Value) -> SessionError {
    let code = error
        .get("code")
        .and_then(Value::as_i64)
        .and_then(|code| i32::try_from(code).ok());
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("(no message)");
    match code {
        Some(code) => protocol_error("tools/call", code, message, error.get("data").cloned()),
        None => SessionError::transport(format!(
            "the server answered `tools/call` with an error that has no valid code: {error}"
        )),
    }
}

fn describe_quit(quit: Result<QuitReason, tokio::task::JoinError>) -> String {
    match quit {
        Ok(QuitReason::Closed) => "the server closed the connection".to_owned(),
        Ok(QuitReason::Cancelled) => "the session was closed by the gateway".to_owned(),
        Ok(QuitReason::JoinError(error)) | Err(error) => {
            format!("the session's task failed: {error}")
        }
        Ok(other) => format!("the session ended: {other:?}"),
    }
}

/// Items of a list result as the MCP JSON objects the domain passes through.
fn json_items<Item: serde::Serialize>(
    method: &str,
    items: Vec<Item>,
) -> Result<Vec<Value>, SessionError> {
    items
        .iter()
        .map(|item| {
            serde_json::to_value(item).map_err(|error| {
                SessionError::transport(format!(
                    "an item of the server's `{method}` answer is not JSON: {error}"
                ))
            })
        })
        .collect()
}

fn result_json(method: &str, result: &impl serde::Serialize) -> Result<Value, SessionError> {
    serde_json::to_value(result).map_err(|error| {
        SessionError::transport(format!(
            "the server's `{method}` result is not JSON: {error}"
        ))
    })
}

/// The server answered `method` with a JSON-RPC error: the server is fine, the request was not.
fn protocol_error(method: &str, code: i32, message: &str, data: Option<Value>) -> SessionError {
    SessionError::new(
        SessionErrorKind::Protocol { code },
        format!("the server answered `{method}` with JSON-RPC error {code}: {message}"),
    )
    .with_data(data)
}

fn timeout_error(method: &str, timeout: Duration) -> SessionError {
    SessionError::timeout(format!(
        "the server did not answer `{method}` within {timeout:?}; the request was cancelled"
    ))
}

fn wrong_result_type(method: &str) -> SessionError {
    SessionError::transport(format!(
        "the server answered `{method}` with a result of the wrong type"
    ))
}

fn cancelled_error() -> SessionError {
    SessionError::new(
        SessionErrorKind::Cancelled,
        "the caller cancelled the request",
    )
}

fn closed_error() -> SessionError {
    SessionError::new(
        SessionErrorKind::Closed,
        "the session was closed by the gateway; start the server again to use it",
    )
}

#[async_trait]
impl McpSession for RmcpSession {
    async fn list_tools(&self) -> Result<Vec<Tool>, SessionError> {
        let listed = self
            .list_all(
                "tools/list",
                |params| ClientRequest::ListToolsRequest(ListToolsRequest::with_param(params)),
                |result| match result {
                    ServerResult::ListToolsResult(page) => Some((page.tools, page.next_cursor)),
                    _ => None,
                },
            )
            .await?;
        listed
            .into_iter()
            .map(|tool| {
                let name = tool.name.clone();
                // The domain's tool is the MCP JSON shape, so JSON is the faithful bridge.
                serde_json::to_value(&tool)
                    .and_then(serde_json::from_value::<Tool>)
                    .map_err(|error| {
                        SessionError::transport(format!(
                            "the server listed tool `{name}` in a shape the gateway cannot read: \
                             {error}"
                        ))
                    })
            })
            .collect()
    }

    async fn call_tool(
        &self,
        call: ToolCall,
        ctx: CallContext,
    ) -> Result<ToolCallOutcome, SessionError> {
        self.ensure_open()?;
        if ctx.cancellation.is_cancelled() {
            return Err(cancelled_error());
        }
        let modern = self.modern_capabilities(&ctx).await;
        if let Some(link) = &self.link {
            if modern.is_some() {
                check_responses(&ctx, "tools/call")?;
            }
            // Held for the whole call: over stdio, it is what makes callers take turns.
            let _ticket = tokio::select! {
                biased;
                ticket = self.relay_routes.enter(ctx.relay.clone()) => ticket,
                () = ctx.cancellation.cancelled() => return Err(cancelled_error()),
            };
            return self.call_tool_linked(link, call, ctx, modern).await;
        }
        let mut params = CallToolRequestParams::new(call.name);
        params.arguments = call.arguments;
        // The trace context goes in `_meta` (and, for a remote server, the HTTP client puts it
        // in the request's headers too: see the `remote` module).
        if let Some(trace) = &ctx.trace {
            trace.write_meta(params.meta.get_or_insert_default());
        }
        if let Some(caller) = caller_entry(ctx.caller_meta.as_deref(), ctx.principal.as_deref()) {
            params.meta.get_or_insert_default().insert(
                caller.key.to_owned(),
                Value::String(caller.principal.to_owned()),
            );
        }
        match modern.map(|capabilities| modern_meta_map(&self.client_info, &capabilities)) {
            Some(meta) => {
                (params.input_responses, params.request_state) =
                    modern_request(&mut params.meta, meta, &ctx, "tools/call")?;
            }
            None => {
                if let Some(capabilities) = caller_capabilities(&ctx) {
                    params.meta.get_or_insert_default().insert(
                        CLIENT_CAPABILITIES_META.to_owned(),
                        capabilities.into_owned(),
                    );
                }
            }
        }
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let result = self.request_for_caller(request, "tools/call", &ctx).await?;
        let is_error = match &result {
            ServerResult::CallToolResult(result) => result.is_error == Some(true),
            _ => false,
        };
        let result = serde_json::to_value(&result).map_err(|error| {
            SessionError::transport(format!(
                "the server's `tools/call` result is not JSON: {error}"
            ))
        })?;
        Ok(ToolCallOutcome { result, is_error })
    }

    async fn ping(&self) -> Result<(), SessionError> {
        let request = ClientRequest::PingRequest(PingRequest {
            method: Default::default(),
            extensions: Default::default(),
        });
        self.request(request, "ping").await.map(|_| ())
    }

    fn tool_list_changes(&self) -> Option<watch::Receiver<u64>> {
        Some(self.tool_list_changes.clone())
    }

    fn list_changes(&self) -> Option<watch::Receiver<ListChanges>> {
        Some(self.list_changes.clone())
    }

    /// A stdio server that declared the tasks extension when it was initialized: its tasks are
    /// reached with requests of the 2026-07-28 era on this session.
    fn offers_tasks(&self) -> bool {
        self.link.is_some()
            && self
                .peer
                .peer_info()
                .is_some_and(|info| info.capabilities.supports_tasks())
    }

    async fn list_prompts(&self) -> Result<Vec<Value>, SessionError> {
        let prompts = self
            .list_all(
                "prompts/list",
                |params| ClientRequest::ListPromptsRequest(ListPromptsRequest::with_param(params)),
                |result| match result {
                    ServerResult::ListPromptsResult(page) => Some((page.prompts, page.next_cursor)),
                    _ => None,
                },
            )
            .await?;
        json_items("prompts/list", prompts)
    }

    async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
        ctx: CallContext,
    ) -> Result<Value, SessionError> {
        let mut params = GetPromptRequestParams::new(name);
        params.arguments = arguments;
        if let Some(meta) = self.modern_meta(&ctx).await {
            (params.input_responses, params.request_state) =
                modern_request(&mut params.meta, meta, &ctx, "prompts/get")?;
        }
        let request = ClientRequest::GetPromptRequest(GetPromptRequest::new(params));
        match self
            .request_for_caller(request, "prompts/get", &ctx)
            .await?
        {
            ServerResult::GetPromptResult(result) => result_json("prompts/get", &result),
            ServerResult::InputRequiredResult(result) => result_json("prompts/get", &result),
            _ => Err(wrong_result_type("prompts/get")),
        }
    }

    async fn task_request(&self, method: &str, mut params: Value) -> Result<Value, SessionError> {
        self.ensure_open()?;
        let ctx = CallContext {
            input: Some(mcpgw_core::InputRound::default()),
            tasks: true,
            ..CallContext::default()
        };
        let Some(meta) = self.modern_meta(&ctx).await else {
            return Err(SessionError::new(
                SessionErrorKind::Protocol { code: -32601 },
                format!(
                    "the server takes no 2026-07-28 requests, where tasks live (asked {method})"
                ),
            ));
        };
        if !params.is_object() {
            params = Value::Object(Map::new());
        }
        params["_meta"] = Value::Object(meta);
        let request: ClientRequest =
            serde_json::from_value(serde_json::json!({"method": method, "params": params}))
                .map_err(|error| {
                    SessionError::new(
                        SessionErrorKind::Protocol { code: -32602 },
                        format!("invalid `{method}` request: {error}"),
                    )
                })?;
        let result = self.request(request, method).await?;
        result_json(method, &result)
    }

    async fn list_resources(&self) -> Result<Vec<Value>, SessionError> {
        let resources = self
            .list_all(
                "resources/list",
                |params| {
                    ClientRequest::ListResourcesRequest(ListResourcesRequest::with_param(params))
                },
                |result| match result {
                    ServerResult::ListResourcesResult(page) => {
                        Some((page.resources, page.next_cursor))
                    }
                    _ => None,
                },
            )
            .await?;
        json_items("resources/list", resources)
    }

    async fn list_resource_templates(&self) -> Result<Vec<Value>, SessionError> {
        let templates = self
            .list_all(
                "resources/templates/list",
                |params| {
                    ClientRequest::ListResourceTemplatesRequest(
                        ListResourceTemplatesRequest::with_param(params),
                    )
                },
                |result| match result {
                    ServerResult::ListResourceTemplatesResult(page) => {
                        Some((page.resource_templates, page.next_cursor))
                    }
                    _ => None,
                },
            )
            .await?;
        json_items("resources/templates/list", templates)
    }

    async fn read_resource(&self, uri: &str, ctx: CallContext) -> Result<Value, SessionError> {
        let mut params = ReadResourceRequestParams::new(uri);
        if let Some(meta) = self.modern_meta(&ctx).await {
            (params.input_responses, params.request_state) =
                modern_request(&mut params.meta, meta, &ctx, "resources/read")?;
        }
        let request = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(params));
        match self
            .request_for_caller(request, "resources/read", &ctx)
            .await?
        {
            ServerResult::ReadResourceResult(result) => result_json("resources/read", &result),
            ServerResult::InputRequiredResult(result) => result_json("resources/read", &result),
            _ => Err(wrong_result_type("resources/read")),
        }
    }

    async fn complete(&self, params: Value) -> Result<Value, SessionError> {
        let offers_completions = self
            .peer
            .peer_info()
            .is_some_and(|info| info.capabilities.completions.is_some());
        if !offers_completions {
            // Asking would only earn a "method not found".
            return Ok(mcpgw_core::empty_completion());
        }
        let params: CompleteRequestParams = serde_json::from_value(params).map_err(|error| {
            SessionError::new(
                SessionErrorKind::Protocol { code: -32602 },
                format!("the completion request is not valid: {error}"),
            )
        })?;
        let request = ClientRequest::CompleteRequest(CompleteRequest::new(params));
        match self.request(request, "completion/complete").await? {
            ServerResult::CompleteResult(result) => result_json("completion/complete", &result),
            _ => Err(wrong_result_type("completion/complete")),
        }
    }

    // The `initialize` era's subscriptions (see the import).
    #[allow(deprecated)]
    async fn subscribe_resource(&self, uri: &str) -> Result<(), SessionError> {
        if !self.offers_subscriptions() {
            return Err(SessionError::new(
                SessionErrorKind::Protocol { code: -32601 },
                format!("the server offers no resource subscriptions (asked for {uri})"),
            ));
        }
        let request = ClientRequest::SubscribeRequest(SubscribeRequest::new(
            SubscribeRequestParams::new(uri),
        ));
        self.request(request, "resources/subscribe").await.map(drop)
    }

    #[allow(deprecated)]
    async fn unsubscribe_resource(&self, uri: &str) -> Result<(), SessionError> {
        if !self.offers_subscriptions() {
            return Ok(());
        }
        let request = ClientRequest::UnsubscribeRequest(UnsubscribeRequest::new(
            UnsubscribeRequestParams::new(uri),
        ));
        self.request(request, "resources/unsubscribe")
            .await
            .map(drop)
    }

    // The `initialize` era's logging, which rmcp marks deprecated.
    #[allow(deprecated)]
    async fn set_logging_level(&self, level: &str) -> Result<(), SessionError> {
        let logs = self
            .peer
            .peer_info()
            .is_some_and(|info| info.capabilities.logging.is_some());
        if !logs {
            return Ok(());
        }
        let level = serde_json::from_value(Value::String(level.to_owned())).map_err(|_| {
            SessionError::new(
                SessionErrorKind::Protocol { code: -32602 },
                format!("`{level}` is not a log level"),
            )
        })?;
        let request =
            ClientRequest::SetLevelRequest(SetLevelRequest::new(SetLevelRequestParams::new(level)));
        self.request(request, "logging/setLevel").await.map(|_| ())
    }

    fn resource_updates(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        Some(self.resource_updates.subscribe())
    }

    fn has_ended(&self) -> bool {
        self.ended.borrow().is_some()
    }

    async fn close(&self) {
        // A session that already ended by itself (the server exited, the connection broke)
        // keeps that as the reason its waiting requests failed: they are the server's failures,
        // not requests the gateway gave up on.
        if self.ended.borrow().is_none() {
            self.closed_by_gateway.store(true, Ordering::Release);
        }
        self.shutdown.cancel();
        if tokio::time::timeout(CLOSE_GRACE, self.closed())
            .await
            .is_err()
        {
            tracing::warn!(
                server = %self.server_id,
                "the mcp session did not end within {CLOSE_GRACE:?} of closing"
            );
        }
    }

    async fn closed(&self) -> ExitStatusInfo {
        let mut ended = self.ended.clone();
        match ended.wait_for(Option::is_some).await {
            Ok(exit) => exit.clone().unwrap_or_default(),
            // The watcher task is gone without a word: the runtime is shutting down.
            Err(_) => ExitStatusInfo {
                description: "the session's task stopped".to_owned(),
                ..Default::default()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_written_modern_meta_has_the_members_the_built_one_has() {
        let client_info = rmcp::model::Implementation::default();
        let capabilities = serde_json::json!({"sampling": {}});
        let written = serde_json::to_value(ModernMeta {
            protocol_version: MODERN_PROTOCOL,
            client_info: &client_info,
            client_capabilities: &capabilities,
        })
        .unwrap();
        let built: Map<String, Value> = [
            (
                "io.modelcontextprotocol/protocolVersion",
                Value::String(MODERN_PROTOCOL.to_owned()),
            ),
            (
                "io.modelcontextprotocol/clientInfo",
                serde_json::to_value(&client_info).unwrap(),
            ),
            (CLIENT_CAPABILITIES_META, capabilities.clone()),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect();
        assert_eq!(written, Value::Object(built.clone()));
        assert_eq!(modern_meta_map(&client_info, &capabilities), built);
    }
}
