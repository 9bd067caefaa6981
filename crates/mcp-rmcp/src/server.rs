//! The downstream MCP server: what MCP clients of the gateway talk to, on rmcp.
//!
//! [`GatewayMcpServer`] is an rmcp [`ServerHandler`] over the application's driving port
//! [`McpFrontend`]. It knows nothing about how servers are managed: it lists what the front end
//! lists, routes calls to it, relays progress and cancellation, and tells connected clients when
//! the aggregated tool list changed. The same handler serves stdio ([`serve_stdio`]) and
//! Streamable HTTP ([`crate::streamable_http_handler`]).
//!
//! JSON-RPC error codes this server answers with (see [`jsonrpc_error`]):
//!
//! | front-end failure | code | notes |
//! |---|---|---|
//! | unknown tool or prompt, refused arguments, bad cursor | -32602 | as the MCP spec says for unknown tools |
//! | unknown resource | -32002 | `data.uri` names it; rmcp turns it into -32602 for 2026-07-28 clients |
//! | upstream timeout | [`TIMEOUT_ERROR_CODE`] (-32001) | the upstream request was cancelled |
//! | upstream JSON-RPC error | the upstream's own code | message passed on, `data` is not kept by the port |
//! | server unavailable | -32603 | message says which server and why |
//! | cancelled | [`CANCELLED_ERROR_CODE`] (-32800) | rmcp drops the answer when the client cancelled |
//! | rate limited | [`RATE_LIMITED_ERROR_CODE`] (-32029) | `data.retryAfterMs`, message says when to retry |
//!
//! Requests the front-end port cannot forward to upstreams are answered here, as far as the
//! protocol allows without them:
//!
//! - `completion/complete` goes to the front end, which routes it to the server owning the
//!   prompt or resource template; one that offers no completions answers an empty completion
//!   (`values: []`, `total: 0`, `hasMore: false`), as the spec allows.
//! - `logging/setLevel` (the `initialize` era) is remembered for the connection and passed on
//!   through the front end to the servers the client may use; their log messages come back
//!   during the client's calls (see below), those below the client's level left out.
//! - `resources/subscribe` (the `initialize` era) goes to the front end, which subscribes at
//!   the server that owns the resource; its `notifications/resources/updated` come back on the
//!   session's stream until `resources/unsubscribe` or the end of the session. A server that
//!   offers no subscriptions answers -32601.
//! - In the 2026-07-28 era these three methods do not exist: they answer -32601 (HTTP 404),
//!   as rmcp answers for the other removed methods.
//!
//! What a server sends its client during a call (`sampling/createMessage`, `elicitation/
//! create`, `roots/list`, `notifications/message`) reaches an `initialize`-era client through
//! the call's [`ClientRelay`]: the handler drains it while the call runs and sends each message
//! from the call's own task, so requests ride the call's SSE stream and everything arrives
//! before the call's answer. A request for a capability the client did not declare is refused
//! to the server with -32601 without asking the client.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use mcpgw_core::tool::ProgressHandler;
use mcpgw_core::trace::TraceContext;
use mcpgw_core::{
    CallContext, Caller, ClientRelay, ErrorKind, FrontendError, FrontendErrorKind, InputRound,
    ListChanges, McpFrontend, ProgressUpdate, RelayCapabilities, RelayError, RelaySession, Relayed,
    Tool, ToolCallOutcome, log_severity,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    DiscoverResult, ErrorCode, ErrorData, Extensions, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, Implementation, InitializeRequestParams, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, ResourceUpdatedNotificationParam, ResultType, ServerCapabilities,
    ServerConfig, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::model::{
    CancelTaskParams, ClientResult, GetTaskParams, GetTaskResult, InputRequiredResult,
    ServerNotification, ServerRequest, UpdateTaskParams,
};
// The `initialize` era's logging, which rmcp marks deprecated (SEP-2577), is still part of the
// protocol the gateway serves to those clients.
#[allow(deprecated)]
use rmcp::model::{SetLevelRequestMethod, SetLevelRequestParams};
use rmcp::service::{
    NotificationContext, Peer, PeerRequestOptions, RequestContext, RoleServer,
    ServerInitializeError, ServiceError, SubscriptionContext,
};
use rmcp::{ServerHandler, ServiceExt};

use crate::direct::Era;
use crate::input_required::{ParkedCalls, Retry, Round};
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::{CancellationToken, DropGuard};

/// Tools per `tools/list` page unless configured otherwise. Large enough that ordinary
/// deployments answer in one page, small enough to bound one response.
pub const DEFAULT_TOOLS_PAGE_SIZE: usize = 1000;

/// JSON-RPC code for "the upstream server did not answer in time". -32001 is what the official
/// SDKs use for request timeouts, so clients already know it.
pub const TIMEOUT_ERROR_CODE: i32 = -32001;

/// JSON-RPC code for "too many tool calls"; the message says when to retry and `data` carries
/// `retryAfterMs`. Chosen in the implementation-defined server range, next to the -32020..-32022
/// codes of the 2026-07-28 protocol without colliding with them.
pub const RATE_LIMITED_ERROR_CODE: i32 = -32029;

/// JSON-RPC code for a request cancelled by something other than the client (a client that
/// cancels gets no answer at all: rmcp drops it). Borrowed from LSP's `RequestCancelled`.
pub const CANCELLED_ERROR_CODE: i32 = -32800;

/// How the downstream server behaves, whatever the transport.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct McpServerSettings {
    /// Items per page of `tools/list`, `prompts/list`, `resources/list` and
    /// `resources/templates/list`. Default [`DEFAULT_TOOLS_PAGE_SIZE`]; at least 1.
    pub page_size: usize,
    /// The secret the replicas of a fleet share. The `requestState` of input-required results
    /// is signed with it (HMAC-SHA256 under its SHA-256), and so are the ids of Streamable
    /// HTTP sessions (under `HMAC-SHA256(secret, "mcpgw session v1")`, a key apart). Replicas
    /// behind one load balancer are given the same secret, so that any of them resumes a
    /// request or a session another one began. `None`: request states are signed with a key
    /// drawn at start, which only this process knows, and sessions live only in the process
    /// that created them.
    pub request_state_secret: Option<String>,
}

impl Default for McpServerSettings {
    fn default() -> Self {
        Self {
            page_size: DEFAULT_TOOLS_PAGE_SIZE,
            request_state_secret: None,
        }
    }
}

impl std::fmt::Debug for McpServerSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServerSettings")
            .field("page_size", &self.page_size)
            .field(
                "request_state_secret",
                &self.request_state_secret.as_ref().map(|_| "***"),
            )
            .finish()
    }
}

impl McpServerSettings {
    #[must_use]
    pub fn with_page_size(mut self, page_size: usize) -> Self {
        self.page_size = page_size.max(1);
        self
    }

    #[must_use]
    pub fn with_request_state_secret(mut self, secret: Option<String>) -> Self {
        self.request_state_secret = secret;
        self
    }
}

/// Why serving a downstream connection ended with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DownstreamError {
    #[error(
        "the mcp client did not complete the handshake: {0}; it must send `initialize` (or a \
         2026-07-28 request with its `_meta`) first"
    )]
    Handshake(String),
    #[error("the mcp connection failed: {0}")]
    Connection(String),
}

impl DownstreamError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            DownstreamError::Handshake(_) => ErrorKind::Invalid,
            DownstreamError::Connection(_) => ErrorKind::Internal,
        }
    }
}

/// Reads who is calling from an rmcp request's extensions. This is the one place where the
/// downstream identity enters the MCP server.
///
/// rmcp's Streamable HTTP server puts the request's [`http::request::Parts`] into the
/// extensions of every JSON-RPC request it dispatches (sessions and stateless requests alike).
/// The HTTP adapter authenticates the request and inserts a [`Caller`] into the
/// `http::Request`'s own extensions before handing it to [`crate::streamable_http_handler`];
/// it is read back from there. Stdio connections and unauthenticated requests carry none and
/// are [`Caller::default`].
pub fn caller_from_extensions(extensions: &Extensions) -> Caller {
    extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
        .cloned()
        .unwrap_or_default()
}

/// The trace a request continues: the context in its `_meta` (how MCP clients pass it over
/// any transport), else the one of the HTTP request that carried it, which the HTTP adapter
/// puts into the request's extensions like the [`Caller`]. `None` when neither has one.
pub fn trace_of(meta: &Map<String, Value>, extensions: &Extensions) -> Option<TraceContext> {
    prefer_meta_trace(
        TraceContext::from_meta(meta),
        extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<TraceContext>()),
    )
}

/// Chooses between a request's `_meta` context and its HTTP request's: the HTTP request's
/// when both belong to one trace (the HTTP request's span already continues the caller's, and
/// the MCP method's span nests under it), else the `_meta` one, which names the caller's own
/// operation even when a proxy between them started a trace of its own.
pub(crate) fn prefer_meta_trace(
    meta: Option<TraceContext>,
    http: Option<&TraceContext>,
) -> Option<TraceContext> {
    match (meta, http) {
        (Some(meta), Some(http)) if meta.trace_id == http.trace_id => Some(http.clone()),
        (Some(meta), _) => Some(meta),
        (None, http) => http.cloned(),
    }
}

/// Maps a front-end failure to the JSON-RPC error a client sees; the table is in the module
/// documentation. `unknown_code` is the code for [`FrontendErrorKind::UnknownName`], which
/// depends on what was looked up (-32602 for tools and prompts, -32002 for resources).
pub fn jsonrpc_error(error: FrontendError, unknown_code: ErrorCode) -> ErrorData {
    let FrontendError {
        kind,
        message,
        data,
    } = error;
    match kind {
        FrontendErrorKind::UnknownName => ErrorData::new(unknown_code, message, None),
        FrontendErrorKind::InvalidArguments => ErrorData::invalid_params(message, None),
        FrontendErrorKind::Timeout => ErrorData::new(ErrorCode(TIMEOUT_ERROR_CODE), message, None),
        FrontendErrorKind::Upstream { code } => ErrorData::new(ErrorCode(code), message, data),
        FrontendErrorKind::Cancelled => {
            ErrorData::new(ErrorCode(CANCELLED_ERROR_CODE), message, None)
        }
        FrontendErrorKind::RateLimited { retry_after_ms } => ErrorData::new(
            ErrorCode(RATE_LIMITED_ERROR_CODE),
            format!(
                "{message}; retry after {} s",
                retry_after_ms.div_ceil(1000).max(1)
            ),
            Some(serde_json::json!({ "retryAfterMs": retry_after_ms })),
        ),
        FrontendErrorKind::Unavailable => ErrorData::internal_error(message, None),
        _ => ErrorData::internal_error(message, None),
    }
}

/// The MCP server that MCP clients of the gateway connect to. Cheap to clone.
///
/// Each connection (a stdio session, an HTTP session, one stateless HTTP request) gets its own
/// instance from [`GatewayMcpServer::for_new_connection`]; when rmcp drops the last clone of an
/// instance, that connection's background tasks end.
#[derive(Clone)]
pub struct GatewayMcpServer {
    shared: Arc<Shared>,
    connection: Arc<ConnectionLifetime>,
}

struct Shared {
    frontend: Arc<dyn McpFrontend>,
    /// 2026-07-28 calls waiting for their callers' answers to what their servers asked.
    parked: ParkedCalls,
    settings: McpServerSettings,
    /// The last tool list converted to rmcp's type, keyed by the front end's `Arc`: paging
    /// through a large list converts it once, not once per page.
    converted_tools: Mutex<Option<ConvertedTools>>,
    /// The tools whose input schemas name `Mcp-Param-*` headers, for the front end's list
    /// (keyed by its `Arc`) as an anonymous caller sees it.
    header_tools: Mutex<Option<HeaderTools>>,
}

/// A front-end tool list and the names of its tools whose schemas name `Mcp-Param-*` headers.
type HeaderTools = (Arc<Vec<Tool>>, std::collections::HashSet<String>);

/// A front-end tool list and the same list in rmcp's type.
struct ConvertedTools {
    source: Arc<Vec<Tool>>,
    converted: Arc<Vec<rmcp::model::Tool>>,
}

/// What a `subscriptions/listen` stream follows: the tool list's changes, and the prompt and
/// resource list changes servers announce.
struct ListenChanges {
    tools: watch::Receiver<u64>,
    lists: Option<watch::Receiver<ListChanges>>,
}

struct ConnectionLifetime {
    ended: CancellationToken,
    /// Subscribed to the front end's changes while answering `initialize`, before the client
    /// can see the answer, so that no change between the handshake and `initialized` is lost.
    changes_since_initialize: Mutex<Option<watch::Receiver<u64>>>,
    change_watcher_started: AtomicBool,
    /// Subscribed when a `subscriptions/listen` filter is accepted, before rmcp acknowledges
    /// it, for the same reason; taken in order by [`ServerHandler::listen`].
    changes_since_listen_accepted: Mutex<VecDeque<ListenChanges>>,
    /// The task relaying each subscribed resource's updates to the client, by URI; each ends
    /// on unsubscribe, or with the connection.
    resource_subscriptions: Mutex<std::collections::HashMap<String, tokio::task::JoinHandle<()>>>,
    /// Who this connection is to the upstream sessions that relay to it.
    relay_session: RelaySession,
    /// The level the client asked for with `logging/setLevel`; log messages below it are not
    /// relayed.
    log_level: Mutex<Option<usize>>,
    /// Counts the connection among the open client sessions once `initialize` is answered,
    /// until it ends.
    counted: Mutex<Option<mcpgw_core::census::OpenSession>>,
    _end_on_drop: DropGuard,
}

impl ConnectionLifetime {
    fn new() -> Arc<Self> {
        let ended = CancellationToken::new();
        Arc::new(Self {
            _end_on_drop: ended.clone().drop_guard(),
            ended,
            changes_since_initialize: Mutex::new(None),
            change_watcher_started: AtomicBool::new(false),
            changes_since_listen_accepted: Mutex::new(VecDeque::new()),
            resource_subscriptions: Mutex::default(),
            relay_session: RelaySession::new(),
            log_level: Mutex::new(None),
            counted: Mutex::new(None),
        })
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl std::fmt::Debug for GatewayMcpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayMcpServer")
            .field("settings", &self.shared.settings)
            .finish_non_exhaustive()
    }
}

impl GatewayMcpServer {
    pub fn new(frontend: Arc<dyn McpFrontend>, settings: McpServerSettings) -> Self {
        let parked = match settings.request_state_secret.as_deref() {
            Some(secret) => ParkedCalls::with_secret(secret),
            None => ParkedCalls::new(),
        };
        let settings = McpServerSettings {
            page_size: settings.page_size.max(1),
            // Kept only in the key.
            request_state_secret: None,
        };
        Self {
            shared: Arc::new(Shared {
                frontend,
                parked,
                settings,
                converted_tools: Mutex::new(None),
                header_tools: Mutex::new(None),
            }),
            connection: ConnectionLifetime::new(),
        }
    }

    /// A handler for another connection: same front end and settings, its own lifetime.
    #[must_use]
    pub fn for_new_connection(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            connection: ConnectionLifetime::new(),
        }
    }

    fn frontend(&self) -> &dyn McpFrontend {
        self.shared.frontend.as_ref()
    }

    /// A 2026-07-28 call of a client that can be asked something (`capabilities`): run so that
    /// what its server asks becomes an input-required result (see [`crate::input_required`]).
    /// `ctx` holds the call's round and whether its client takes tasks; the rest is filled in.
    async fn call_asking_statelessly(
        &self,
        caller: &Caller,
        request: &CallToolRequestParams,
        capabilities: RelayCapabilities,
        ctx: CallContext,
        log_level: Option<usize>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Round, ErrorData> {
        // Each stateless call is a client of its own.
        let (relay, relayed) = ClientRelay::stateless_channel(RelaySession::new(), capabilities);
        let cancel = CancellationToken::new();
        // Progress reaches the client while the first round runs, on that request's stream.
        let token = context.meta.get_progress_token();
        let (progress, progress_receiver) = progress_channel(token.as_ref());
        let ctx = CallContext {
            cancellation: cancel.clone(),
            progress,
            principal: caller.principal.clone(),
            subject_token: caller.subject_token.clone(),
            relay: Some(relay),
            ..ctx
        };
        let frontend = Arc::clone(&self.shared.frontend);
        let (call_caller, name, arguments) = (
            caller.clone(),
            request.name.to_string(),
            request.arguments.clone(),
        );
        // The call outlives this request when its server asks something: it waits, parked,
        // for the caller's next request.
        let call = tokio::spawn(async move {
            frontend
                .call_tool(&call_caller, &name, arguments, ctx)
                .await
        });
        // Log messages the caller asked for ride this request's stream too.
        let (notes, notes_receiver) = log_level.map(|_| mpsc::unbounded_channel()).unzip();
        let first_round = self.shared.parked.start(
            caller.principal.clone(),
            call,
            relayed,
            cancel,
            &context.ct,
            notes.as_ref(),
        );
        call_relaying(
            first_round,
            progress_receiver,
            notes_receiver,
            token,
            &context.peer,
            log_level,
        )
        .await
    }

    /// A 2026-07-28 `tools/call` that the direct path serves (see [`crate::direct`]): the first
    /// round of a call whose request has no answers, no request state, no progress token and
    /// no log level, and whose client does not take tasks. A client that can be asked
    /// something (`capabilities`) gets what its server asks as an input-required result,
    /// exactly as on rmcp's path; `caller_gone` is cancelled when the client hangs up. Answers
    /// the JSON-RPC `result`: a tool's result as its server wrote it (with `resultType`), an
    /// input-required result or a task as rmcp's path writes them.
    pub(crate) async fn call_tool_stateless(
        &self,
        caller: &Caller,
        name: &str,
        arguments: Option<rmcp::model::JsonObject>,
        capabilities: RelayCapabilities,
        caller_gone: CancellationToken,
        trace: Option<TraceContext>,
    ) -> Result<Value, ErrorData> {
        let retry = Retry {
            kind: "tool",
            name,
            principal: caller.principal.as_deref(),
        };
        let input = Some(InputRound::default());
        let round = if capabilities.answers_requests() {
            let (relay, relayed) =
                ClientRelay::stateless_channel(RelaySession::new(), capabilities);
            let cancel = CancellationToken::new();
            let ctx = CallContext {
                cancellation: cancel.clone(),
                progress: None,
                principal: caller.principal.clone(),
                caller_meta: None,
                subject_token: caller.subject_token.clone(),
                relay: Some(relay),
                input,
                tasks: false,
                trace: trace.clone(),
            };
            let frontend = Arc::clone(&self.shared.frontend);
            let (call_caller, call_name) = (caller.clone(), name.to_owned());
            // As on rmcp's path, the call outlives this request when its server asks something.
            let call = tokio::spawn(async move {
                frontend
                    .call_tool(&call_caller, &call_name, arguments, ctx)
                    .await
            });
            self.shared
                .parked
                .start(
                    caller.principal.clone(),
                    call,
                    relayed,
                    cancel,
                    &caller_gone,
                    None,
                )
                .await?
        } else {
            let ctx = CallContext {
                cancellation: caller_gone,
                progress: None,
                principal: caller.principal.clone(),
                caller_meta: None,
                subject_token: caller.subject_token.clone(),
                relay: None,
                input,
                tasks: false,
                trace,
            };
            Round::Done(
                self.frontend()
                    .call_tool(caller, name, arguments, ctx)
                    .await,
            )
        };
        match round {
            // A result is passed on as its server wrote it, as on the session era's direct path.
            Round::Done(Ok(outcome)) if !outcome.is_input_required() && !outcome.is_task() => {
                Ok(crate::direct::result_json(outcome, Era::Stateless))
            }
            round => {
                let response = self.round_response(round, &retry)?;
                serde_json::to_value(rmcp::model::ServerResult::from(response))
                    .map_err(|error| relay_error("tool result", &error))
            }
        }
    }

    /// Whether 2026-07-28 calls of `name` must carry `Mcp-Param-*` headers, which rmcp checks
    /// against the tool's input schema (`x-mcp-header` annotations): such calls go to rmcp.
    /// Like rmcp's own check, it looks at the list an anonymous caller sees.
    pub(crate) fn takes_param_headers(&self, name: &str) -> bool {
        let tools = self.frontend().tools(&Caller::default());
        let mut cache = lock(&self.shared.header_tools);
        let annotated = match cache.as_ref() {
            Some((source, annotated)) if Arc::ptr_eq(source, &tools) => annotated,
            _ => {
                let annotated = tools
                    .iter()
                    .filter(|tool| mentions_param_headers(&tool.input_schema))
                    .map(|tool| tool.name.clone())
                    .collect();
                &cache.insert((tools, annotated)).1
            }
        };
        annotated.contains(name)
    }

    /// Runs a `prompts/get` or `resources/read` (`what`: the kind and the name or URI) with
    /// its context: the way back to an `initialize`-era client for what its server asks
    /// meanwhile, relayed while it runs, or, for a 2026-07-28 client, its answers and the
    /// server's state of a retry. A server's input-required result comes back with its state
    /// sealed.
    async fn for_caller<Fut>(
        &self,
        caller: &Caller,
        (kind, name): (&'static str, &str),
        responses: &Option<rmcp::model::InputResponses>,
        state: Option<&str>,
        context: &RequestContext<RoleServer>,
        ask: impl FnOnce(CallContext) -> Fut,
    ) -> Result<Asked, AskError>
    where
        Fut: Future<Output = Result<Value, FrontendError>>,
    {
        let retry = Retry {
            kind,
            name,
            principal: caller.principal.as_deref(),
        };
        let input = if uses_initialize_era(context) {
            None
        } else {
            Some(
                self.input_round(responses, state, &retry)
                    .map_err(AskError::Refused)?,
            )
        };
        let log_level = self.log_level_of(caller, context).await;
        let (relay, relayed) = self.relay_for(context, log_level).unzip();
        let ctx = CallContext {
            cancellation: context.ct.clone(),
            principal: caller.principal.clone(),
            subject_token: caller.subject_token.clone(),
            relay,
            input,
            ..CallContext::default()
        };
        let (_, no_progress) = progress_channel(None);
        let json = call_relaying(
            ask(ctx),
            no_progress,
            relayed,
            None,
            &context.peer,
            log_level,
        )
        .await
        .map_err(AskError::Failed)?;
        if !mcpgw_core::is_input_required(&json) {
            return Ok(Asked::Answered(json));
        }
        serde_json::from_value(self.shared.parked.seal(json, &retry))
            .map(Asked::InputRequired)
            .map_err(|error| AskError::Refused(relay_error("input-required result", &error)))
    }

    /// The `InputRound` of a 2026-07-28 request: its answers, and the server's own state from
    /// inside the gateway's envelope, which must have been sealed for `retry`.
    fn input_round(
        &self,
        responses: &Option<rmcp::model::InputResponses>,
        state: Option<&str>,
        retry: &Retry<'_>,
    ) -> Result<InputRound, ErrorData> {
        Ok(InputRound {
            responses: responses
                .as_ref()
                .map(|responses| Value::Object(responses.clone().into_iter().collect())),
            state: match state {
                Some(state) => self.shared.parked.unseal(state, retry)?,
                None => None,
            },
        })
    }

    /// The answer to a `tools/call` of one round: the result, the gateway's own input-required
    /// result, or the server's, its state sealed for `retry`.
    fn round_response(
        &self,
        round: Round,
        retry: &Retry<'_>,
    ) -> Result<CallToolResponse, ErrorData> {
        match round {
            Round::Done(outcome) => {
                let outcome =
                    outcome.map_err(|error| jsonrpc_error(error, ErrorCode::INVALID_PARAMS))?;
                if outcome.is_input_required() {
                    return input_required_response(self.shared.parked.seal(outcome.result, retry));
                }
                if outcome.is_task() {
                    let mut result = outcome.result;
                    let sealed = result
                        .get("taskId")
                        .and_then(Value::as_str)
                        .map(|id| self.shared.parked.seal_task(id, retry.principal));
                    if let Some(sealed) = sealed {
                        result["taskId"] = Value::String(sealed);
                    }
                    return serde_json::from_value(result)
                        .map(CallToolResponse::Task)
                        .map_err(|error| relay_error("task", &error));
                }
                call_tool_result(outcome).map(CallToolResponse::Complete)
            }
            Round::InputRequired(json) => input_required_response(json),
        }
    }

    /// A task request of the client, about the task its (sealed) `task_id` names, sent to the
    /// task's server with the client's `params`.
    async fn task_request(
        &self,
        context: &RequestContext<RoleServer>,
        method: &str,
        task_id: &str,
        params: &impl serde::Serialize,
    ) -> Result<Value, ErrorData> {
        let caller = caller_from_extensions(&context.extensions);
        let inner = self
            .shared
            .parked
            .unseal_task(task_id, caller.principal.as_deref())?;
        let mut params = serde_json::to_value(params)
            .map_err(|error| ErrorData::invalid_params(format!("{method}: {error}"), None))?;
        if let Some(object) = params.as_object_mut() {
            object.remove("_meta");
        }
        self.frontend()
            .task_request(&caller, method, &inner, params)
            .await
            .map_err(|error| jsonrpc_error(error, ErrorCode::INVALID_PARAMS))
    }

    /// The way back to the client for one call: `initialize`-era clients, with the
    /// capabilities they declared. 2026-07-28 clients are stateless: a server cannot send them
    /// requests mid-call, only the log messages they asked for (`log_level`), on the call's
    /// stream.
    fn relay_for(
        &self,
        context: &RequestContext<RoleServer>,
        log_level: Option<usize>,
    ) -> Option<(ClientRelay, mpsc::UnboundedReceiver<Relayed>)> {
        if !uses_initialize_era(context) {
            log_level?;
            return Some(ClientRelay::stateless_channel(
                RelaySession::new(),
                RelayCapabilities::default(),
            ));
        }
        Some(ClientRelay::channel(
            self.connection.relay_session,
            declared_capabilities(context),
        ))
    }

    /// The least severe log level the caller of this request wants to hear: the level its
    /// session set (`initialize` era), or the one its request names in `_meta`
    /// (`io.modelcontextprotocol/logLevel`, 2026-07-28), which is also passed on to the running
    /// servers as the session era's `logging/setLevel` would be.
    async fn log_level_of(
        &self,
        caller: &Caller,
        context: &RequestContext<RoleServer>,
    ) -> Option<usize> {
        if uses_initialize_era(context) {
            return *lock(&self.connection.log_level);
        }
        let level = serde_json::to_value(context.meta.log_level()?).ok()?;
        let level = level.as_str()?;
        let severity = log_severity(level)?;
        self.frontend().set_logging_level(caller, level).await;
        Some(severity)
    }

    fn page_size(&self) -> usize {
        self.shared.settings.page_size
    }

    fn listed_tools(&self, caller: &Caller) -> Arc<Vec<rmcp::model::Tool>> {
        let tools = self.frontend().tools(caller);
        let mut cache = lock(&self.shared.converted_tools);
        if let Some(cached) = cache.as_ref()
            && Arc::ptr_eq(&cached.source, &tools)
        {
            return Arc::clone(&cached.converted);
        }
        let converted: Arc<Vec<rmcp::model::Tool>> =
            Arc::new(tools.iter().filter_map(rmcp_tool).collect());
        *cache = Some(ConvertedTools {
            source: tools,
            converted: Arc::clone(&converted),
        });
        converted
    }

    /// Sends `notifications/tools/list_changed` to an `initialize`-era peer whenever the front
    /// end's list moves, until the connection ends. 2026-07-28 peers ask for the same through
    /// `subscriptions/listen` instead (see [`ServerHandler::listen`]).
    fn watch_changes_for(&self, peer: Peer<RoleServer>) {
        if self
            .connection
            .change_watcher_started
            .swap(true, Ordering::AcqRel)
        {
            return;
        }
        let mut changes = lock(&self.connection.changes_since_initialize)
            .take()
            .unwrap_or_else(|| self.frontend().changes());
        let ended = self.connection.ended.clone();
        if let Some(list_changes) = self.frontend().list_changes() {
            tokio::spawn(relay_list_changes(
                list_changes,
                peer.clone(),
                ended.clone(),
            ));
        }
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = ended.cancelled() => break,
                    changed = changes.changed() => {
                        // The front end is gone: nothing will change any more.
                        if changed.is_err() || peer.is_transport_closed() {
                            break;
                        }
                        if let Err(error) = peer.notify_tool_list_changed().await {
                            tracing::debug!(%error, "mcp client is gone; stopping list_changed");
                            break;
                        }
                    }
                }
            }
        });
    }
}

/// Sends an `initialize`-era client `notifications/prompts/list_changed` and
/// `notifications/resources/list_changed` as servers announce them, until the connection ends.
async fn relay_list_changes(
    mut changes: watch::Receiver<ListChanges>,
    peer: Peer<RoleServer>,
    ended: CancellationToken,
) {
    let mut seen = *changes.borrow_and_update();
    loop {
        tokio::select! {
            () = ended.cancelled() => return,
            changed = changes.changed() => {
                if changed.is_err() || peer.is_transport_closed() {
                    return;
                }
            }
        }
        let now = *changes.borrow_and_update();
        let sent = async {
            if now.prompts != seen.prompts {
                peer.notify_prompt_list_changed().await?;
            }
            if now.resources != seen.resources {
                peer.notify_resource_list_changed().await?;
            }
            Ok::<(), ServiceError>(())
        };
        if let Err(error) = sent.await {
            tracing::debug!(%error, "mcp client is gone; stopping list_changed");
            return;
        }
        seen = now;
    }
}

/// The front end's tool in rmcp's type. A tool whose input schema is not a JSON object is
/// listed with the empty object schema rather than dropped, so that it stays callable.
fn rmcp_tool(tool: &Tool) -> Option<rmcp::model::Tool> {
    let mut json = serde_json::to_value(tool).ok()?;
    if !tool.input_schema.is_object() {
        tracing::warn!(tool = %tool.name, "tool input schema is not an object; listing it as {{\"type\": \"object\"}}");
        json["inputSchema"] = serde_json::json!({"type": "object"});
    }
    match serde_json::from_value(json) {
        Ok(converted) => Some(converted),
        Err(error) => {
            tracing::warn!(tool = %tool.name, %error, "tool definition is not valid mcp; not listing it");
            None
        }
    }
}

/// Items of one page, and the cursor of the next page if there is one.
///
/// Cursors are decimal offsets; an offset past the end (the list shrank between pages) is an
/// empty last page rather than an error.
fn page(
    request: Option<PaginatedRequestParams>,
    len: usize,
    page_size: usize,
) -> Result<(Range<usize>, Option<String>), ErrorData> {
    let start = match request.and_then(|params| params.cursor) {
        None => 0,
        Some(cursor) => cursor.parse::<usize>().map_err(|_| {
            ErrorData::invalid_params(
                format!(
                    "invalid cursor `{cursor}`; pass the nextCursor of the previous page, or no \
                     cursor to start from the beginning"
                ),
                None,
            )
        })?,
    };
    let start = start.min(len);
    let end = start.saturating_add(page_size).min(len);
    let next_cursor = (end < len).then(|| end.to_string());
    Ok((start..end, next_cursor))
}

/// Converts pass-through JSON items (prompts, resources) to rmcp's types, skipping those that
/// are not valid MCP rather than failing the whole list.
fn convert_items<T: serde::de::DeserializeOwned>(items: Vec<Value>, what: &str) -> Vec<T> {
    items
        .into_iter()
        .filter_map(|item| match serde_json::from_value(item) {
            Ok(converted) => Some(converted),
            Err(error) => {
                tracing::warn!(%error, "an upstream {what} is not valid mcp; not listing it");
                None
            }
        })
        .collect()
}

/// The requested page of pass-through items (prompts, resources, templates) converted to rmcp's
/// type, with the cursor of the next page; items that are not valid MCP are skipped before
/// paging so pages stay full.
fn converted_page<T: serde::de::DeserializeOwned>(
    items: Vec<Value>,
    what: &str,
    request: Option<PaginatedRequestParams>,
    page_size: usize,
) -> Result<(Vec<T>, Option<String>), ErrorData> {
    let mut converted: Vec<T> = convert_items(items, what);
    let (range, next_cursor) = page(request, converted.len(), page_size)?;
    Ok((converted.drain(range).collect(), next_cursor))
}

fn relay_error(what: &str, error: &serde_json::Error) -> ErrorData {
    ErrorData::internal_error(
        format!(
            "the upstream server's {what} is not valid mcp ({error}); the gateway cannot relay it"
        ),
        None,
    )
}

/// The upstream's `CallToolResult` JSON in rmcp's type.
///
/// What rmcp's type cannot hold is lost on the way: top-level fields other than `content`,
/// `structuredContent`, `isError` and `_meta`, and content blocks of types rmcp does not know
/// (such a result is answered with -32603).
fn call_tool_result(outcome: ToolCallOutcome) -> Result<CallToolResult, ErrorData> {
    let mut json = outcome.result;
    if let Some(object) = json.as_object_mut()
        && !["content", "structuredContent", "isError"]
            .iter()
            .any(|key| object.contains_key(*key))
    {
        object.insert("content".to_owned(), Value::Array(Vec::new()));
    }
    let mut result: CallToolResult =
        serde_json::from_value(json).map_err(|error| relay_error("tool result", &error))?;
    // A result from an `initialize`-era upstream has no `resultType`; 2026-07-28 clients require
    // it, and rmcp only removes it for older clients, it never adds it.
    result.result_type.get_or_insert(ResultType::COMPLETE);
    if outcome.is_error {
        result.is_error = Some(true);
    }
    Ok(result)
}

/// Runs `call` while relaying to the client, in order and before the answer, the progress it
/// reports and what its server sends the client mid-call (log messages, requests): all of it is
/// sent from this task, so the answer cannot overtake it, and requests ride the call's own
/// stream. A relayed request waits for the client's answer without holding up the rest.
async fn call_relaying<F>(
    call: F,
    mut progress: mpsc::UnboundedReceiver<ProgressUpdate>,
    relayed: Option<mpsc::UnboundedReceiver<Relayed>>,
    token: Option<ProgressToken>,
    peer: &Peer<RoleServer>,
    log_level: Option<usize>,
) -> F::Output
where
    F: Future,
{
    let send = async |update: ProgressUpdate| {
        let Some(token) = token.clone() else { return };
        let mut notification = ProgressNotificationParam::new(token, update.progress);
        notification.total = update.total;
        notification.message = update.message;
        if let Err(error) = peer.notify_progress(notification).await {
            tracing::debug!(%error, "could not relay progress to the mcp client");
        }
    };
    let mut relayed = relayed;
    let mut asking = futures::stream::FuturesUnordered::new();
    let mut call = std::pin::pin!(call);
    loop {
        tokio::select! {
            biased;
            Some(update) = progress.recv() => send(update).await,
            Some(item) = async { relayed.as_mut()?.recv().await }, if relayed.is_some() => {
                if let Some(request) = relay_to_client(item, peer, log_level).await {
                    asking.push(request);
                }
            }
            Some(()) = futures::StreamExt::next(&mut asking), if !asking.is_empty() => {}
            outcome = &mut call => {
                progress.close();
                while let Ok(update) = progress.try_recv() {
                    send(update).await;
                }
                if let Some(relayed) = relayed.as_mut() {
                    relayed.close();
                    while let Ok(item) = relayed.try_recv() {
                        // The call is over: a request now has no call to belong to, and
                        // dropping it answers its server at once.
                        if matches!(item, Relayed::Notification { .. }) {
                            drop(relay_to_client(item, peer, log_level).await);
                        }
                    }
                }
                return outcome;
            }
        }
    }
}

/// Sends one relayed message to the client: a notification at once, a request as a future that
/// waits for the client's answer and hands it to the server that asked.
async fn relay_to_client(
    item: Relayed,
    peer: &Peer<RoleServer>,
    log_level: Option<usize>,
) -> Option<futures::future::BoxFuture<'static, ()>> {
    match item {
        Relayed::Notification { method, params } => {
            if method == "notifications/message" && !log_level_admits(log_level, &params) {
                return None;
            }
            let notification = serde_json::json!({"method": method, "params": params});
            match serde_json::from_value::<ServerNotification>(notification) {
                Ok(notification) => {
                    if let Err(error) = peer.send_notification(notification).await {
                        tracing::debug!(%error, %method, "could not relay a notification to the mcp client");
                    }
                }
                Err(error) => {
                    tracing::debug!(%error, %method, "an upstream notification has no valid shape");
                }
            }
            None
        }
        Relayed::Request {
            method,
            params,
            answer,
        } => {
            let request = serde_json::json!({"method": method, "params": params});
            let request = match serde_json::from_value::<ServerRequest>(request) {
                Ok(request) => request,
                Err(error) => {
                    let _ = answer.send(Err(RelayError::new(
                        ErrorCode::INVALID_PARAMS.0,
                        format!("the gateway cannot relay this {method}: {error}"),
                    )));
                    return None;
                }
            };
            // Sent from the call's task, so rmcp puts it on the call's own stream.
            let sent = peer
                .send_request_with_option(request, PeerRequestOptions::no_options())
                .await;
            Some(Box::pin(async move {
                let result = match sent {
                    Ok(handle) => handle.await_response().await,
                    Err(error) => Err(error),
                };
                let _ = answer.send(client_answer(&method, result));
            }))
        }
    }
}

/// The client's answer to a relayed request, as the upstream should get it.
fn client_answer(
    method: &str,
    result: Result<ClientResult, ServiceError>,
) -> Result<Value, RelayError> {
    match result {
        Ok(result) => serde_json::to_value(&result).map_err(|error| {
            RelayError::new(
                ErrorCode::INTERNAL_ERROR.0,
                format!("the client's answer to {method} is not JSON: {error}"),
            )
        }),
        Err(ServiceError::McpError(error)) => Err(RelayError {
            code: error.code.0,
            message: error.message.into_owned(),
            data: error.data,
        }),
        Err(error) => Err(RelayError::new(
            ErrorCode::INTERNAL_ERROR.0,
            format!("the client did not answer {method}: {error}"),
        )),
    }
}

/// Whether a log message is at or above the severity the client asked for (all pass when it
/// asked for none).
fn log_level_admits(asked: Option<usize>, params: &Value) -> bool {
    let Some(asked) = asked else { return true };
    let level = params
        .get("level")
        .and_then(Value::as_str)
        .and_then(log_severity);
    level.is_none_or(|level| level >= asked)
}

/// What the client of a request declared it can be asked: the request's own capabilities
/// (2026-07-28), else its session's.
fn declared_capabilities(context: &RequestContext<RoleServer>) -> RelayCapabilities {
    context
        .client_capabilities()
        .and_then(|declared| serde_json::to_value(declared).ok())
        .map(|declared| RelayCapabilities::from_client_capabilities(&declared))
        .unwrap_or_default()
}

/// Where a call's progress goes when the client asked for it (a progress token): a handler for
/// the call's context, and the receiving end [`call_relaying`] drains.
fn progress_channel(
    token: Option<&ProgressToken>,
) -> (
    Option<ProgressHandler>,
    mpsc::UnboundedReceiver<ProgressUpdate>,
) {
    let (sender, receiver) = mpsc::unbounded_channel();
    let handler = token.is_some().then(|| {
        Arc::new(move |update: ProgressUpdate| {
            let _ = sender.send(update);
        }) as ProgressHandler
    });
    (handler, receiver)
}

/// What a `prompts/get` or `resources/read` for a client came to.
enum Asked {
    Answered(Value),
    InputRequired(InputRequiredResult),
}

/// Why a `prompts/get` or `resources/read` for a client has no answer: the front end's error,
/// which each method maps its own way, or the gateway's refusal.
enum AskError {
    Failed(FrontendError),
    Refused(ErrorData),
}

impl AskError {
    fn into_error_data(self, failed: impl FnOnce(FrontendError) -> ErrorData) -> ErrorData {
        match self {
            Self::Failed(error) => failed(error),
            Self::Refused(error) => error,
        }
    }
}

fn input_required_response(json: Value) -> Result<CallToolResponse, ErrorData> {
    serde_json::from_value::<InputRequiredResult>(json)
        .map(CallToolResponse::InputRequired)
        .map_err(|error| relay_error("input-required result", &error))
}

/// Whether a schema has an `x-mcp-header` annotation anywhere (2026-07-28 `Mcp-Param-*`
/// headers).
fn mentions_param_headers(schema: &Value) -> bool {
    match schema {
        Value::Object(object) => object
            .iter()
            .any(|(key, value)| key == "x-mcp-header" || mentions_param_headers(value)),
        Value::Array(items) => items.iter().any(mentions_param_headers),
        _ => false,
    }
}

fn with_complete_result_type(result_type: &mut Option<ResultType>) {
    result_type.get_or_insert(ResultType::COMPLETE);
}

impl ServerHandler for GatewayMcpServer {
    // The `initialize` era's logging, which rmcp marks deprecated, is relayed to its clients.
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        let mut info = InitializeResult::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_prompts()
                .enable_prompts_list_changed()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_resources_list_changed()
                .enable_completions()
                .enable_logging()
                .build(),
        )
        .with_server_info(Implementation::new("mcpgw", env!("CARGO_PKG_VERSION")));
        // The tasks extension, once a server behind the gateway offers tasks.
        if self.frontend().offers_tasks() {
            info.capabilities.extensions.get_or_insert_default().insert(
                mcpgw_core::TASKS_EXTENSION.to_owned(),
                serde_json::Map::new(),
            );
        }
        info
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        // The 2026-07-28 era subscribes with `subscriptions/listen`, which carries the tool,
        // prompt and resource lists' changes and the updates of the resources it names, so the
        // capabilities stay. It has no `logging/setLevel`, nor a way for a server to send log
        // messages mid-call.
        let mut info = self.get_info();
        info.capabilities.logging = None;
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            info,
        ))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        // Only used by rmcp to check 2026-07-28 `Mcp-Param-*` headers against the schema; it
        // has no request, so it sees what an anonymous caller sees.
        self.listed_tools(&Caller::default())
            .iter()
            .find(|tool| tool.name == name)
            .cloned()
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        *lock(&self.connection.changes_since_initialize) = Some(self.frontend().changes());
        context.peer.set_peer_info(request.clone());
        let answer = self.negotiate_initialize(&request);
        if let Ok(answer) = &answer {
            let session = mcpgw_core::census::ClientSessions::global()
                .open_session(answer.protocol_version.as_str());
            *lock(&self.connection.counted) = Some(session);
        }
        answer
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.watch_changes_for(context.peer);
    }

    /// The tool list's changes always; the prompt and resource lists' changes and the updates
    /// of the resources the client names, when it asks for them.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut pending = lock(&self.connection.changes_since_listen_accepted);
        // A listen request that failed after this point never takes its receivers; keep such
        // leftovers from piling up.
        if pending.len() >= 64 {
            pending.pop_front();
        }
        pending.push_back(ListenChanges {
            tools: self.frontend().changes(),
            lists: self.frontend().list_changes(),
        });
        let mut accepted = SubscriptionFilter::builder().tools_list_changed().build();
        accepted.prompts_list_changed = requested.prompts_list_changed.filter(|asked| *asked);
        accepted.resources_list_changed = requested.resources_list_changed.filter(|asked| *asked);
        accepted.resource_subscriptions = requested
            .resource_subscriptions
            .clone()
            .filter(|uris| !uris.is_empty());
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let _counted = mcpgw_core::census::ClientSessions::global().open_listen_stream();
        let ListenChanges {
            tools: mut changes,
            lists,
        } = lock(&self.connection.changes_since_listen_accepted)
            .pop_front()
            .unwrap_or_else(|| ListenChanges {
                tools: self.frontend().changes(),
                lists: self.frontend().list_changes(),
            });
        let accepted = context.accepted().clone();
        let wants_lists = accepted.prompts_list_changed == Some(true)
            || accepted.resources_list_changed == Some(true);
        let mut lists = lists.filter(|_| wants_lists);
        let mut seen_lists = lists.as_mut().map(|lists| *lists.borrow_and_update());
        let (updated_sender, mut updated) = mpsc::unbounded_channel::<String>();
        let caller = caller_from_extensions(&context.request_context().extensions);
        for uri in accepted.resource_subscriptions.iter().flatten() {
            match self.frontend().subscribe_resource(&caller, uri).await {
                Ok(mut subscription) => {
                    let (sender, uri, ended) = (
                        updated_sender.clone(),
                        uri.clone(),
                        self.connection.ended.clone(),
                    );
                    tokio::spawn(async move {
                        loop {
                            tokio::select! {
                                () = ended.cancelled() => return,
                                () = sender.closed() => return,
                                more = subscription.updated() => {
                                    if !more || sender.send(uri.clone()).is_err() {
                                        return;
                                    }
                                }
                            }
                        }
                    });
                }
                Err(error) => {
                    tracing::debug!(%uri, %error, "a listen stream's resource is not subscribed");
                }
            }
        }
        drop(updated_sender);
        let mut watching_tools = accepted.tools_list_changed == Some(true);
        loop {
            let sent = tokio::select! {
                () = context.cancelled() => return Ok(()),
                changed = changes.changed(), if watching_tools => {
                    if changed.is_err() {
                        watching_tools = false;
                        continue;
                    }
                    context.sink().notify_tool_list_changed().await
                }
                changed = async { lists.as_mut()?.changed().await.ok() }, if lists.is_some() => {
                    let (Some(now), Some(seen)) = (
                        changed.and(lists.as_mut().map(|lists| *lists.borrow_and_update())),
                        seen_lists,
                    ) else {
                        lists = None;
                        continue;
                    };
                    seen_lists = Some(now);
                    let mut sent = Ok(());
                    if now.prompts != seen.prompts && accepted.prompts_list_changed == Some(true) {
                        sent = context.sink().notify_prompt_list_changed().await;
                    }
                    if sent.is_ok()
                        && now.resources != seen.resources
                        && accepted.resources_list_changed == Some(true)
                    {
                        sent = context.sink().notify_resource_list_changed().await;
                    }
                    sent
                }
                Some(uri) = updated.recv() => context.sink().notify_resource_updated(uri).await,
            };
            if let Err(error) = sent {
                tracing::debug!(%error, "subscription ended; stopping its notifications");
                return Ok(());
            }
        }
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = caller_from_extensions(&context.extensions);
        self.frontend().settle().await;
        let tools = self.listed_tools(&caller);
        let (range, next_cursor) = page(request, tools.len(), self.page_size())?;
        let mut result = ListToolsResult::with_all_items(tools[range].to_vec());
        result.next_cursor = next_cursor;
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = caller_from_extensions(&context.extensions);
        let trace = match request.meta.as_ref() {
            Some(meta) if meta.contains_key(mcpgw_core::trace::TRACEPARENT) => {
                trace_of(meta, &context.extensions)
            }
            _ => trace_of(&context.meta, &context.extensions),
        };
        let retry = Retry {
            kind: "tool",
            name: &request.name,
            principal: caller.principal.as_deref(),
        };
        let modern = !uses_initialize_era(&context);
        let tasks = modern
            && context
                .client_capabilities()
                .is_some_and(|capabilities| capabilities.supports_tasks());
        let log_level = self.log_level_of(&caller, &context).await;
        let mut input = None;
        if modern {
            if let Some(state) = request.request_state.as_deref()
                && !ParkedCalls::is_sealed(state)
            {
                let (notes, notes_receiver) = log_level.map(|_| mpsc::unbounded_channel()).unzip();
                let resumed = self.shared.parked.resume(
                    state,
                    request.input_responses.as_ref(),
                    caller.principal.as_deref(),
                    &context.ct,
                    notes.as_ref(),
                );
                let (_, no_progress) = progress_channel(None);
                let resumed = call_relaying(
                    resumed,
                    no_progress,
                    notes_receiver,
                    None,
                    &context.peer,
                    log_level,
                )
                .await?;
                return self.round_response(resumed, &retry);
            }
            let round = self.input_round(
                &request.input_responses,
                request.request_state.as_deref(),
                &retry,
            )?;
            let capabilities = declared_capabilities(&context);
            if capabilities.answers_requests() {
                let first = self
                    .call_asking_statelessly(
                        &caller,
                        &request,
                        capabilities,
                        CallContext {
                            input: Some(round),
                            tasks,
                            trace: trace.clone(),
                            ..CallContext::default()
                        },
                        log_level,
                        &context,
                    )
                    .await?;
                return self.round_response(first, &retry);
            }
            input = Some(round);
        }
        let token = context.meta.get_progress_token();
        let (progress, progress_receiver) = progress_channel(token.as_ref());
        let (relay, relayed) = self.relay_for(&context, log_level).unzip();
        let call_context = CallContext {
            cancellation: context.ct.clone(),
            progress,
            principal: caller.principal.clone(),
            caller_meta: None,
            subject_token: caller.subject_token.clone(),
            relay,
            input,
            tasks,
            trace,
        };
        let call =
            self.frontend()
                .call_tool(&caller, &request.name, request.arguments, call_context);
        let outcome = call_relaying(
            call,
            progress_receiver,
            relayed,
            token,
            &context.peer,
            log_level,
        )
        .await
        .map_err(|error| jsonrpc_error(error, ErrorCode::INVALID_PARAMS))?;
        self.round_response(Round::Done(Ok(outcome)), &retry)
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let task_id = request.task_id.clone();
        let mut json = self
            .task_request(&context, "tasks/get", &task_id, &request)
            .await?;
        // The client knows the task by the gateway's id.
        json["taskId"] = Value::String(task_id);
        serde_json::from_value(json).map_err(|error| relay_error("task", &error))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.task_request(&context, "tasks/update", &request.task_id, &request)
            .await
            .map(drop)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.task_request(&context, "tasks/cancel", &request.task_id, &request)
            .await
            .map(drop)
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let caller = caller_from_extensions(&context.extensions);
        let (prompts, next_cursor) = converted_page(
            self.frontend().prompts(&caller).await,
            "prompt",
            request,
            self.page_size(),
        )?;
        Ok(ListPromptsResult {
            next_cursor,
            ..ListPromptsResult::with_all_items(prompts)
        })
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let caller = caller_from_extensions(&context.extensions);
        let asked = self
            .for_caller(
                &caller,
                ("prompt", &request.name),
                &request.input_responses,
                request.request_state.as_deref(),
                &context,
                |ctx| {
                    self.frontend()
                        .get_prompt(&caller, &request.name, request.arguments, ctx)
                },
            )
            .await
            .map_err(|error| {
                error.into_error_data(|error| jsonrpc_error(error, ErrorCode::INVALID_PARAMS))
            })?;
        let json = match asked {
            Asked::Answered(json) => json,
            Asked::InputRequired(result) => return Ok(GetPromptResponse::InputRequired(result)),
        };
        let mut result: GetPromptResult =
            serde_json::from_value(json).map_err(|error| relay_error("prompt", &error))?;
        with_complete_result_type(&mut result.result_type);
        Ok(GetPromptResponse::Complete(result))
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let caller = caller_from_extensions(&context.extensions);
        let (resources, next_cursor) = converted_page(
            self.frontend().resources(&caller).await,
            "resource",
            request,
            self.page_size(),
        )?;
        Ok(ListResourcesResult {
            next_cursor,
            ..ListResourcesResult::with_all_items(resources)
        })
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let caller = caller_from_extensions(&context.extensions);
        let (templates, next_cursor) = converted_page(
            self.frontend().resource_templates(&caller).await,
            "resource template",
            request,
            self.page_size(),
        )?;
        Ok(ListResourceTemplatesResult {
            next_cursor,
            ..ListResourceTemplatesResult::with_all_items(templates)
        })
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let caller = caller_from_extensions(&context.extensions);
        let asked = self
            .for_caller(
                &caller,
                ("resource", &request.uri),
                &request.input_responses,
                request.request_state.as_deref(),
                &context,
                |ctx| self.frontend().read_resource(&caller, &request.uri, ctx),
            )
            .await
            .map_err(|error| {
                error.into_error_data(|error| unknown_resource_error(error, &request.uri))
            })?;
        let json = match asked {
            Asked::Answered(json) => json,
            Asked::InputRequired(result) => {
                return Ok(ReadResourceResponse::InputRequired(result));
            }
        };
        let mut result: ReadResourceResult =
            serde_json::from_value(json).map_err(|error| relay_error("resource", &error))?;
        with_complete_result_type(&mut result.result_type);
        Ok(ReadResourceResponse::Complete(result))
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let caller = caller_from_extensions(&context.extensions);
        let params =
            serde_json::to_value(&request).map_err(|error| relay_error("completion", &error))?;
        let json = self
            .frontend()
            .complete(&caller, params)
            .await
            .map_err(|error| jsonrpc_error(error, ErrorCode::INVALID_PARAMS))?;
        let mut result: CompleteResult =
            serde_json::from_value(json).map_err(|error| relay_error("completion", &error))?;
        with_complete_result_type(&mut result.result_type);
        Ok(result)
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if !uses_initialize_era(&context) {
            return Err(ErrorData::method_not_found::<SetLevelRequestMethod>());
        }
        let level = serde_json::to_value(request.level)
            .ok()
            .and_then(|level| level.as_str().map(str::to_owned))
            .unwrap_or_else(|| "info".to_owned());
        *lock(&self.connection.log_level) = log_severity(&level);
        let caller = caller_from_extensions(&context.extensions);
        self.frontend().set_logging_level(&caller, &level).await;
        Ok(())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // rmcp only routes this method to initialize-era requests, whose sessions carry the
        // updates on their stream.
        let caller = caller_from_extensions(&context.extensions);
        let mut subscription = self
            .frontend()
            .subscribe_resource(&caller, &request.uri)
            .await
            .map_err(|error| unknown_resource_error(error, &request.uri))?;
        let peer = context.peer.clone();
        let ended = self.connection.ended.clone();
        let uri = request.uri.clone();
        let relay = tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = ended.cancelled() => return,
                    updated = subscription.updated() => {
                        if !updated {
                            return;
                        }
                        let notification = ResourceUpdatedNotificationParam::new(uri.clone());
                        if let Err(error) = peer.notify_resource_updated(notification).await {
                            tracing::debug!(%error, "mcp client is gone; stopping resource updates");
                            return;
                        }
                    }
                }
            }
        });
        // Subscribing to a resource again replaces the earlier relay, so each update is sent
        // once.
        if let Some(earlier) =
            lock(&self.connection.resource_subscriptions).insert(request.uri, relay)
        {
            earlier.abort();
        }
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // Unsubscribing from something never subscribed to is already done.
        if let Some(relay) = lock(&self.connection.resource_subscriptions).remove(&request.uri) {
            relay.abort();
        }
        Ok(())
    }
}

/// A failed `resources/read`: an unknown URI carries it in `data.uri` (SEP-2164), so that a
/// client that pipelines reads can tell which one failed.
fn unknown_resource_error(error: FrontendError, uri: &str) -> ErrorData {
    let unknown = error.kind == FrontendErrorKind::UnknownName;
    let mut answer = jsonrpc_error(error, ErrorCode::RESOURCE_NOT_FOUND);
    if unknown {
        answer.data = Some(serde_json::json!({ "uri": uri }));
    }
    answer
}

/// Whether a request belongs to the `initialize` era (2025-11-25 and before), where
/// `logging/setLevel` still exists. A request without any version is treated as that era, as
/// rmcp does.
fn uses_initialize_era(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_none_or(|version| version.has_initialize())
}

/// Serves one MCP connection over a byte stream pair until the client closes its side (or the
/// future is dropped, which ends the connection). A client that closes before saying anything
/// is a normal end.
pub async fn serve_connection<R, W>(
    server: GatewayMcpServer,
    reader: R,
    writer: W,
) -> Result<(), DownstreamError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let running = match server.serve((reader, writer)).await {
        Ok(running) => running,
        Err(ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
        Err(error) => return Err(DownstreamError::Handshake(error.to_string())),
    };
    running
        .waiting()
        .await
        .map_err(|error| DownstreamError::Connection(error.to_string()))?;
    Ok(())
}

/// Serves the gateway's MCP endpoint over this process's stdin and stdout until stdin closes.
/// Nothing else may write to stdout meanwhile: log to stderr.
pub async fn serve_stdio(
    frontend: Arc<dyn McpFrontend>,
    settings: McpServerSettings,
) -> Result<(), DownstreamError> {
    let (stdin, stdout) = rmcp::transport::stdio();
    serve_connection(GatewayMcpServer::new(frontend, settings), stdin, stdout).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cursor(cursor: &str) -> Option<PaginatedRequestParams> {
        Some(PaginatedRequestParams::default().with_cursor(Some(cursor.to_owned())))
    }

    #[test]
    fn pages_end_with_no_cursor() {
        assert_eq!(page(None, 5, 2).unwrap(), (0..2, Some("2".to_owned())));
        assert_eq!(
            page(cursor("2"), 5, 2).unwrap(),
            (2..4, Some("4".to_owned()))
        );
        assert_eq!(page(cursor("4"), 5, 2).unwrap(), (4..5, None));
        assert_eq!(page(None, 0, 2).unwrap(), (0..0, None));
    }

    #[test]
    fn a_cursor_past_a_shrunken_list_is_an_empty_last_page() {
        assert_eq!(page(cursor("9"), 5, 2).unwrap(), (5..5, None));
    }

    #[test]
    fn a_cursor_that_is_not_ours_is_invalid_params() {
        let error = page(cursor("abc"), 5, 2).unwrap_err();
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        assert!(error.message.contains("abc"), "{}", error.message);
    }

    #[test]
    fn legacy_results_gain_the_complete_result_type() {
        let outcome = ToolCallOutcome {
            result: serde_json::json!({"content": [{"type": "text", "text": "hi"}]}),
            is_error: false,
        };
        let result = call_tool_result(outcome).unwrap();
        assert_eq!(result.result_type, Some(ResultType::COMPLETE));
    }

    #[test]
    fn an_empty_result_object_is_an_empty_result() {
        let outcome = ToolCallOutcome {
            result: serde_json::json!({}),
            is_error: true,
        };
        let result = call_tool_result(outcome).unwrap();
        assert!(result.content.is_empty());
        assert_eq!(result.is_error, Some(true));
    }

    #[test]
    fn a_tool_with_a_non_object_schema_stays_listed() {
        let tool = Tool::new("odd").with_input_schema(serde_json::json!(true));
        let converted = rmcp_tool(&tool).unwrap();
        assert_eq!(converted.name, "odd");
        assert_eq!(
            Value::Object((*converted.input_schema).clone()),
            serde_json::json!({"type": "object"})
        );
    }

    #[test]
    fn an_unknown_resource_names_its_uri_and_other_failures_do_not() {
        let unknown = unknown_resource_error(
            FrontendError::unknown("resource", "test://gone"),
            "test://gone",
        );
        assert_eq!(unknown.code, ErrorCode::RESOURCE_NOT_FOUND);
        assert_eq!(
            unknown.data,
            Some(serde_json::json!({"uri": "test://gone"}))
        );
        let unavailable = unknown_resource_error(
            FrontendError::new(FrontendErrorKind::Unavailable, "server `a` is dead"),
            "test://a",
        );
        assert_eq!(unavailable.code, ErrorCode::INTERNAL_ERROR);
        assert_eq!(unavailable.data, None);
    }

    /// A front end with nothing in it, for the requests the server answers by itself.
    struct EmptyFrontend {
        changes: watch::Sender<u64>,
    }

    #[async_trait::async_trait]
    impl McpFrontend for EmptyFrontend {
        fn tools(&self, _caller: &Caller) -> Arc<Vec<Tool>> {
            Arc::new(Vec::new())
        }

        async fn call_tool(
            &self,
            _caller: &Caller,
            name: &str,
            _arguments: Option<serde_json::Map<String, Value>>,
            _ctx: CallContext,
        ) -> Result<ToolCallOutcome, FrontendError> {
            Err(FrontendError::unknown("tool", name))
        }

        fn changes(&self) -> watch::Receiver<u64> {
            self.changes.subscribe()
        }

        async fn prompts(&self, _caller: &Caller) -> Vec<Value> {
            Vec::new()
        }

        async fn get_prompt(
            &self,
            _caller: &Caller,
            name: &str,
            _arguments: Option<serde_json::Map<String, Value>>,
            _ctx: CallContext,
        ) -> Result<Value, FrontendError> {
            Err(FrontendError::unknown("prompt", name))
        }

        async fn task_request(
            &self,
            _caller: &Caller,
            _method: &str,
            task_id: &str,
            _params: serde_json::Value,
        ) -> Result<serde_json::Value, FrontendError> {
            Err(FrontendError::unknown("task", task_id))
        }

        async fn resources(&self, _caller: &Caller) -> Vec<Value> {
            Vec::new()
        }

        async fn resource_templates(&self, _caller: &Caller) -> Vec<Value> {
            Vec::new()
        }

        async fn read_resource(
            &self,
            _caller: &Caller,
            uri: &str,
            _ctx: CallContext,
        ) -> Result<Value, FrontendError> {
            Err(FrontendError::unknown("resource", uri))
        }
    }

    async fn connect(
        lifecycle: rmcp::service::ClientLifecycleMode,
    ) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
        use rmcp::service::ClientServiceExt as _;
        let frontend = Arc::new(EmptyFrontend {
            changes: watch::channel(0).0,
        });
        let server = GatewayMcpServer::new(frontend, McpServerSettings::default());
        let (client_side, server_side) = tokio::io::duplex(64 * 1024);
        let (server_reader, server_writer) = tokio::io::split(server_side);
        tokio::spawn(serve_connection(server, server_reader, server_writer));
        tokio::time::timeout(
            std::time::Duration::from_secs(10),
            ().serve_with_lifecycle(tokio::io::split(client_side), lifecycle),
        )
        .await
        .expect("the handshake timed out")
        .expect("the handshake failed")
    }

    fn completion_request() -> CompleteRequestParams {
        serde_json::from_value(serde_json::json!({
            "ref": {"type": "ref/prompt", "name": "srv__greet"},
            "argument": {"name": "who", "value": "a"}
        }))
        .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[allow(deprecated)]
    async fn initialize_era_clients_get_completions_levels_and_subscriptions_answered() {
        let client = connect(rmcp::service::ClientLifecycleMode::Initialize).await;
        let capabilities = &client
            .peer_info()
            .expect("the server introduced itself")
            .capabilities;
        assert!(capabilities.completions.is_some());
        // Upstream log messages, resource updates and prompt and resource list changes are
        // relayed.
        assert!(capabilities.logging.is_some());
        assert_eq!(
            capabilities.prompts.as_ref().and_then(|p| p.list_changed),
            Some(true)
        );
        assert_eq!(
            capabilities.resources.as_ref().and_then(|r| r.list_changed),
            Some(true)
        );
        assert_eq!(
            capabilities.resources.as_ref().and_then(|r| r.subscribe),
            Some(true)
        );

        let completion = client
            .complete(completion_request())
            .await
            .unwrap()
            .completion;
        assert!(completion.values.is_empty());
        assert_eq!(
            (completion.total, completion.has_more),
            (Some(0), Some(false))
        );

        client
            .set_level(SetLevelRequestParams::new(rmcp::model::LoggingLevel::Debug))
            .await
            .unwrap();
        // A front end that offers no subscriptions refuses one with "method not found";
        // unsubscribing from what was never subscribed to is already done.
        match client
            .subscribe(SubscribeRequestParams::new("test://watched"))
            .await
            .unwrap_err()
        {
            rmcp::ServiceError::McpError(error) => {
                assert_eq!(error.code, ErrorCode::METHOD_NOT_FOUND, "{error:?}");
            }
            other => panic!("not a JSON-RPC error: {other:?}"),
        }
        client
            .unsubscribe(UnsubscribeRequestParams::new("test://watched"))
            .await
            .unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[allow(deprecated)]
    async fn logging_set_level_does_not_exist_for_2026_clients() {
        let client = connect(rmcp::service::ClientLifecycleMode::Discover {
            preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        })
        .await;
        let capabilities = &client
            .peer_info()
            .expect("the server introduced itself")
            .capabilities;
        assert!(capabilities.logging.is_none(), "no logging in this era");
        // Its `subscriptions/listen` carries the list changes and the resource updates, so
        // those capabilities stay declared, as this era derives them from that method.
        assert_eq!(
            capabilities.resources.as_ref().and_then(|r| r.subscribe),
            Some(true)
        );
        assert_eq!(
            capabilities.prompts.as_ref().and_then(|p| p.list_changed),
            Some(true)
        );
        assert_eq!(
            capabilities.resources.as_ref().and_then(|r| r.list_changed),
            Some(true)
        );
        let completion = client
            .complete(completion_request())
            .await
            .unwrap()
            .completion;
        assert!(completion.values.is_empty());
        match client
            .set_level(SetLevelRequestParams::new(rmcp::model::LoggingLevel::Info))
            .await
        {
            Err(rmcp::service::ServiceError::McpError(error)) => {
                assert_eq!(error.code, ErrorCode::METHOD_NOT_FOUND);
            }
            other => panic!("expected method not found, got {other:?}"),
        }
    }

    #[test]
    fn rate_limits_say_when_to_retry() {
        let error = jsonrpc_error(
            FrontendError::new(
                FrontendErrorKind::RateLimited {
                    retry_after_ms: 1500,
                },
                "too many calls of `x__y`",
            ),
            ErrorCode::INVALID_PARAMS,
        );
        assert_eq!(error.code, ErrorCode(RATE_LIMITED_ERROR_CODE));
        assert_eq!(error.message, "too many calls of `x__y`; retry after 2 s");
        assert_eq!(error.data, Some(serde_json::json!({"retryAfterMs": 1500})));
    }
}
