//! The direct path of `tools/call` on a Streamable HTTP session, and the sessions' idle expiry.
//!
//! Tool calls are nearly all of an MCP endpoint's traffic. Through rmcp's session machinery a
//! call is decoded into rmcp's types, queued to the session's worker task, dispatched to a
//! handler task, re-encoded and streamed back as a one-event SSE stream. This module answers
//! the common case itself: a POST on an existing `initialize`-era session whose body is one
//! `tools/call` request without a progress token. It parses only what routing needs (the id,
//! the tool name and the arguments), calls the [`McpFrontend`] on the request's own task and
//! answers `application/json`, which the Streamable HTTP transport allows for any request.
//! It answers the common 2026-07-28 call the same way: a stateless POST whose body is one
//! `tools/call` carrying the era's `_meta` (protocol version and client capabilities, client
//! information optional) and nothing that needs rmcp's streams or checks (answers to a previous round,
//! request state, a progress token, a log level, tasks, `Mcp-Param-*` headers), with
//! `Mcp-Method` and `Mcp-Name` headers that match the body. Its answer is built by the same
//! code as on rmcp's path ([`crate::GatewayMcpServer`]), so input-required results and their
//! sealed state are identical; only the round trips through rmcp's typed messages, its
//! per-request service and its event stream are gone.
//! Everything else (initialize, lists, notifications, progress-reporting calls, batches,
//! anything malformed) goes to rmcp unchanged, and so does any request that fails a check
//! here: rmcp then gives the precise answer (404 for an unknown session, 400 for headers that
//! contradict the body, 406, 415, ...).
//!
//! The tool's result is passed on as the upstream wrote it (only `isError` is set for a tool
//! error and an empty `content` is added when the result has none), so fields and content
//! types newer than rmcp's model reach the client intact.
//!
//! Calls answered here are cancelled by the client's `notifications/cancelled` for their id
//! (that notification is answered 202 here when it names such a call), by `DELETE` of the
//! session, by the gateway's shutdown, and when the client drops the connection.
//!
//! Because rmcp no longer sees every request of a session, the idle expiry of sessions is kept
//! here rather than by rmcp: every request on a session counts as activity, and a session
//! without any request for the configured time is closed (its client gets 404 and must
//! `initialize` again, unless the replicas share a secret and the id is still resumable: the
//! next request then re-creates the session, see [`crate::session_ids`]).
//!
//! A session this replica does not hold (never, or no longer) is rmcp's to answer: it gives
//! the 404, or re-creates a session whose id is resumable and serves the request; the session's
//! next calls come here. A session held here is served as before: its id is neither decoded
//! nor verified.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use mcpgw_core::trace::TraceContext;
use mcpgw_core::{CallContext, Caller, McpFrontend, ToolCallOutcome};
use rmcp::model::ErrorCode;
use rmcp::transport::common::server_side_http::SessionId;
use rmcp::transport::streamable_http_server::session::SessionManager;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::http_service::McpHttpBody;
use crate::local_set::spawn_here;
use crate::resumable::GatewaySessions;
use crate::server::{GatewayMcpServer, jsonrpc_error};

const SESSION_HEADER: &str = "mcp-session-id";
const PROTOCOL_HEADER: &str = "mcp-protocol-version";
const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";

/// The stateless protocol revision the direct path serves.
const STATELESS_VERSION: &str = "2026-07-28";
/// The `_meta` keys of a 2026-07-28 request.
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// The protocol revisions with `initialize` and sessions. A request that names another one
/// (2026-07-28 and later carry per-request headers that rmcp validates) goes to rmcp.
const SESSION_ERA_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// How often idle sessions are looked for, at most.
const SWEEP_INTERVAL_MAX: Duration = Duration::from_secs(30);
/// How often idle sessions are looked for, at least.
const SWEEP_INTERVAL_MIN: Duration = Duration::from_millis(100);

/// A session as this module tracks it.
#[derive(Default)]
struct TrackedSession {
    /// Milliseconds since [`DirectCalls::epoch`] of the last request.
    last_seen_ms: AtomicU64,
    /// Calls answered here and still running, by their JSON-RPC id (as canonical JSON).
    in_flight: Mutex<HashMap<String, CancellationToken>>,
    /// Whether the client can be sent something mid-call (it declared capabilities to answer
    /// server requests, or asked for log messages): its calls need an SSE stream, so they go
    /// to rmcp.
    relays: std::sync::atomic::AtomicBool,
}

impl TrackedSession {
    fn in_flight(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The direct path and the session tracker of one MCP endpoint.
pub(crate) struct DirectCalls {
    frontend: Arc<dyn McpFrontend>,
    /// The endpoint's handler, which answers 2026-07-28 calls as rmcp's path would.
    server: GatewayMcpServer,
    sessions: Arc<GatewaySessions>,
    shutdown: CancellationToken,
    idle_timeout: Option<Duration>,
    max_body_bytes: usize,
    sweeper_started: std::sync::atomic::AtomicBool,
    epoch: Instant,
    tracked: RwLock<HashMap<Arc<str>, Arc<TrackedSession>>>,
}

/// One JSON-RPC request or notification, as far as routing needs it (read without copying).
#[derive(Deserialize)]
pub(crate) struct Incoming<'a> {
    #[serde(borrow)]
    jsonrpc: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    pub(crate) id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
}

impl Incoming<'_> {
    /// The parameters of an `initialize` request, when this is one whose parameters rmcp
    /// reads too.
    pub(crate) fn initialize_params(&self) -> Option<rmcp::model::InitializeRequestParams> {
        if self.jsonrpc != "2.0" || self.method != "initialize" || self.id.is_none() {
            return None;
        }
        serde_json::from_str(self.params?.get()).ok()
    }
}

#[derive(Deserialize)]
struct CallParams {
    name: String,
    #[serde(default)]
    arguments: Option<Map<String, Value>>,
    #[serde(default, rename = "_meta")]
    meta: Option<Map<String, Value>>,
    /// A task-augmented call (the tasks extension) is rmcp's to answer.
    #[serde(default)]
    task: Option<serde::de::IgnoredAny>,
}

/// The params of a 2026-07-28 `tools/call`. The fields that make it rmcp's are only noticed.
#[derive(Deserialize)]
struct StatelessCallParams {
    name: String,
    #[serde(default)]
    arguments: Option<Map<String, Value>>,
    #[serde(rename = "_meta")]
    meta: Map<String, Value>,
    #[serde(default)]
    task: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "inputResponses")]
    input_responses: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "requestState")]
    request_state: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct CancelParams<'a> {
    #[serde(rename = "requestId", borrow)]
    request_id: &'a RawValue,
}

#[derive(Serialize)]
struct Reply<'a> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<rmcp::model::ErrorData>,
}

/// Removes a finished (or abandoned) call from its session; cancels it if it did not finish.
struct InFlightGuard {
    session: Arc<TrackedSession>,
    key: String,
    token: CancellationToken,
    finished: bool,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.session.in_flight().remove(&self.key);
        if !self.finished {
            self.token.cancel();
        }
    }
}

impl DirectCalls {
    pub(crate) fn new(
        frontend: Arc<dyn McpFrontend>,
        server: GatewayMcpServer,
        sessions: Arc<GatewaySessions>,
        shutdown: CancellationToken,
        idle_timeout: Option<Duration>,
        max_body_bytes: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            frontend,
            server,
            sessions,
            shutdown,
            idle_timeout,
            max_body_bytes,
            sweeper_started: std::sync::atomic::AtomicBool::new(false),
            epoch: Instant::now(),
            tracked: RwLock::new(HashMap::new()),
        })
    }

    /// Starts, with the first request, the task that closes idle sessions (the endpoint may be
    /// built before the runtime that serves it runs); it ends with the shutdown token or when
    /// the endpoint is dropped.
    pub(crate) fn ensure_idle_sweeper(self: &Arc<Self>) {
        let Some(idle_timeout) = self.idle_timeout else {
            return;
        };
        if self.sweeper_started.load(Ordering::Relaxed)
            || self.sweeper_started.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let interval = (idle_timeout / 4).clamp(SWEEP_INTERVAL_MIN, SWEEP_INTERVAL_MAX);
        let weak: Weak<Self> = Arc::downgrade(self);
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(interval) => {}
                }
                let Some(this) = weak.upgrade() else { return };
                this.close_idle_sessions(idle_timeout).await;
            }
        });
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn read_tracked(
        &self,
    ) -> std::sync::RwLockReadGuard<'_, HashMap<Arc<str>, Arc<TrackedSession>>> {
        self.tracked.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_tracked(
        &self,
    ) -> std::sync::RwLockWriteGuard<'_, HashMap<Arc<str>, Arc<TrackedSession>>> {
        self.tracked.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Records activity on a session that exists (rmcp answered for it, or confirmed it).
    fn touch(&self, session: &str) -> Arc<TrackedSession> {
        let now = self.now_ms();
        if let Some(tracked) = self.read_tracked().get(session) {
            tracked.last_seen_ms.store(now, Ordering::Relaxed);
            return Arc::clone(tracked);
        }
        let mut all = self.write_tracked();
        let tracked = all
            .entry(Arc::from(session))
            .or_insert_with(|| self.new_tracked(session));
        tracked.last_seen_ms.store(now, Ordering::Relaxed);
        Arc::clone(tracked)
    }

    /// A session seen here for the first time. One whose id carries its client's capabilities
    /// (it may have been resumed from another replica, without this replica seeing its
    /// `initialize`) relays when they say so.
    fn new_tracked(&self, session: &str) -> Arc<TrackedSession> {
        let tracked = TrackedSession::default();
        if let Some(ids) = self.sessions.ids()
            && ids.answers_requests(session)
        {
            tracked.relays.store(true, Ordering::Relaxed);
        }
        Arc::new(tracked)
    }

    /// Forgets a session and cancels the calls still running on it.
    fn forget(&self, session: &str) {
        let removed = self.write_tracked().remove(session);
        if let Some(tracked) = removed {
            for (_, token) in tracked.in_flight().drain() {
                token.cancel();
            }
        }
    }

    /// Called with every answer rmcp gave: keeps the session table in step with rmcp's.
    /// `posted` is the message of a POST, which says whether the session's client can be sent
    /// anything mid-call.
    pub(crate) fn after_forwarded(
        &self,
        method: &http::Method,
        request_session: Option<&str>,
        posted: Option<&Incoming<'_>>,
        response: &http::Response<McpHttpBody>,
    ) {
        let answered_session = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|value| value.to_str().ok());
        let session = answered_session.or(request_session);
        let Some(session) = session else { return };
        let status = response.status();
        let ended = *method == http::Method::DELETE && status.is_success();
        if ended || status == http::StatusCode::NOT_FOUND {
            self.forget(session);
        } else if status.is_success() {
            let tracked = self.touch(session);
            if posted.is_some_and(wants_relays) {
                tracked.relays.store(true, Ordering::Relaxed);
            }
        }
    }

    async fn close_idle_sessions(&self, idle_timeout: Duration) {
        let now = self.now_ms();
        let idle_ms = u64::try_from(idle_timeout.as_millis()).unwrap_or(u64::MAX);
        // Sessions rmcp has that were never seen here (their `initialize` answer went by while
        // the table was being swept) start their idle time now.
        let live: Vec<SessionId> = self
            .sessions
            .local()
            .sessions
            .read()
            .await
            .keys()
            .cloned()
            .collect();
        let mut expired = Vec::new();
        {
            let mut all = self.write_tracked();
            all.retain(|id, _| live.iter().any(|live_id| **live_id == **id));
            for id in &live {
                let tracked = all.entry(Arc::from(&**id)).or_insert_with(|| {
                    let tracked = self.new_tracked(id);
                    tracked.last_seen_ms.store(now, Ordering::Relaxed);
                    tracked
                });
                let last_seen = tracked.last_seen_ms.load(Ordering::Relaxed);
                let busy = !tracked.in_flight().is_empty();
                if !busy && now.saturating_sub(last_seen) >= idle_ms {
                    expired.push(id.clone());
                }
            }
        }
        for id in expired {
            tracing::debug!(session = %id, "closing an idle mcp session");
            self.forget(&id);
            if let Err(error) = self.sessions.close_session(&id).await {
                tracing::debug!(session = %id, %error, "could not close an idle mcp session");
            }
        }
    }

    /// Answers the request if it is a call (or the cancellation of one) that the direct path
    /// serves; `None` hands it to rmcp.
    pub(crate) async fn try_answer(
        &self,
        request: &http::Request<Bytes>,
    ) -> Option<http::Response<McpHttpBody>> {
        if request.method() != http::Method::POST || request.body().len() > self.max_body_bytes {
            return None;
        }
        let headers = request.headers();
        let Some(session) = headers.get(SESSION_HEADER) else {
            return self.try_answer_stateless(request).await;
        };
        let session = session.to_str().ok()?;
        if let Some(version) = headers.get(PROTOCOL_HEADER) {
            let version = version.to_str().ok()?;
            if !SESSION_ERA_VERSIONS.contains(&version) {
                return None;
            }
        }
        if !accepts_json_and_sse(headers) || !is_json(headers) {
            return None;
        }
        let incoming: Incoming<'_> = serde_json::from_slice(request.body()).ok()?;
        if incoming.jsonrpc != "2.0" {
            return None;
        }
        match (incoming.method.as_ref(), incoming.id) {
            ("tools/call", Some(id)) if is_valid_id(id) => {
                let params = serde_json::from_str::<CallParams>(
                    incoming.params.map_or("null", RawValue::get),
                );
                if let Ok(params) = &params
                    && (params.task.is_some() || params.meta.as_ref().is_some_and(needs_rmcp))
                {
                    return None;
                }
                if !self.session_exists(session).await {
                    return None;
                }
                let params = match params {
                    Ok(params) => params,
                    Err(error) => {
                        self.touch(session);
                        let error = rmcp::model::ErrorData::invalid_params(
                            format!(
                                "tools/call needs params {{\"name\": string, \"arguments\"?: \
                                 object}} ({error})"
                            ),
                            None,
                        );
                        return Some(reply(id, Err(error)));
                    }
                };
                let caller = request
                    .extensions()
                    .get::<Caller>()
                    .cloned()
                    .unwrap_or_default();
                let tracked = self.touch(session);
                if tracked.relays.load(Ordering::Relaxed) {
                    return None;
                }
                let trace = trace_of_request(params.meta.as_ref(), request);
                Some(self.call(&tracked, &caller, id, params, trace).await)
            }
            ("notifications/cancelled", None) => {
                let params: CancelParams<'_> = serde_json::from_str(incoming.params?.get()).ok()?;
                let key = canonical_id(params.request_id)?;
                let tracked = self.read_tracked().get(session).cloned()?;
                let token = tracked.in_flight().get(&key).cloned()?;
                tracked.last_seen_ms.store(self.now_ms(), Ordering::Relaxed);
                token.cancel();
                Some(accepted())
            }
            _ => None,
        }
    }

    /// Answers a 2026-07-28 `tools/call` the direct path serves (see the module's
    /// documentation); `None` hands the request to rmcp.
    async fn try_answer_stateless(
        &self,
        request: &http::Request<Bytes>,
    ) -> Option<http::Response<McpHttpBody>> {
        let headers = request.headers();
        if only_value(headers, PROTOCOL_HEADER)? != STATELESS_VERSION
            || only_value(headers, METHOD_HEADER)? != "tools/call"
            || headers
                .keys()
                .any(|name| name.as_str().starts_with("mcp-param-"))
            || !accepts_json_and_sse(headers)
            || !is_json(headers)
        {
            return None;
        }
        let incoming: Incoming<'_> = serde_json::from_slice(request.body()).ok()?;
        let id = incoming.id.filter(|id| is_valid_id(id))?;
        if incoming.jsonrpc != "2.0" || incoming.method != "tools/call" {
            return None;
        }
        let params: StatelessCallParams = serde_json::from_str(incoming.params?.get()).ok()?;
        if params.task.is_some()
            || params.input_responses.is_some()
            || params.request_state.is_some()
            || only_value(headers, NAME_HEADER)? != params.name
        {
            return None;
        }
        let capabilities = stateless_capabilities(&params.meta)?;
        if self.server.takes_param_headers(&params.name) {
            return None;
        }
        let caller = request
            .extensions()
            .get::<Caller>()
            .cloned()
            .unwrap_or_default();
        // The call runs in its own task (in the request's `LocalSet` when it has one), which
        // sees the client hang up as a cancellation (the guard fires when this future is
        // dropped) instead of vanishing mid-request.
        let caller_gone = CancellationToken::new();
        let hang_up = caller_gone.clone().drop_guard();
        let server = self.server.clone();
        let trace = trace_of_request(Some(&params.meta), request);
        let StatelessCallParams {
            name, arguments, ..
        } = params;
        let task = spawn_here(async move {
            server
                .call_tool_stateless(&caller, &name, arguments, capabilities, caller_gone, trace)
                .await
        });
        let outcome = answer_of(task).await;
        hang_up.disarm();
        let status = match &outcome {
            Err(error) => stateless_error_status(error.code),
            Ok(_) => http::StatusCode::OK,
        };
        let mut response = reply(id, outcome);
        *response.status_mut() = status;
        Some(response)
    }

    async fn session_exists(&self, session: &str) -> bool {
        self.sessions.holds(session).await
    }

    async fn call(
        &self,
        tracked: &Arc<TrackedSession>,
        caller: &Caller,
        id: &RawValue,
        params: CallParams,
        trace: Option<TraceContext>,
    ) -> http::Response<McpHttpBody> {
        let token = self.shutdown.child_token();
        let mut guard = canonical_id(id).map(|key| {
            tracked.in_flight().insert(key.clone(), token.clone());
            InFlightGuard {
                session: Arc::clone(tracked),
                key,
                token: token.clone(),
                finished: false,
            }
        });
        let ctx = CallContext {
            cancellation: token,
            progress: None,
            principal: caller.principal.clone(),
            caller_meta: None,
            subject_token: caller.subject_token.clone(),
            // Sessions whose clients can be sent anything mid-call are not served here.
            relay: None,
            // Only `initialize`-era sessions are served here.
            input: None,
            tasks: false,
            trace,
        };
        // The call runs in its own task: when the client hangs up, this future is dropped and
        // the guard cancels the token, and the call still sees the cancellation and passes it
        // upstream instead of vanishing mid-request. The task joins the request's `LocalSet`
        // when it has one (see the `local_set` module).
        let frontend = Arc::clone(&self.frontend);
        let caller = caller.clone();
        let CallParams {
            name, arguments, ..
        } = params;
        let task = spawn_here(async move {
            frontend
                .call_tool(&caller, &name, arguments, ctx)
                .await
                .map(|outcome| result_json(outcome, Era::Session))
                .map_err(|error| jsonrpc_error(error, ErrorCode::INVALID_PARAMS))
        });
        let outcome = answer_of(task).await;
        if let Some(guard) = guard.as_mut() {
            guard.finished = true;
        }
        drop(guard);
        reply(id, outcome)
    }
}

/// The trace a direct call continues: its `_meta`'s context, else its HTTP request's (which
/// the HTTP adapter put in the request's extensions).
fn trace_of_request(
    meta: Option<&Map<String, Value>>,
    request: &http::Request<Bytes>,
) -> Option<TraceContext> {
    crate::server::prefer_meta_trace(
        meta.and_then(TraceContext::from_meta),
        request.extensions().get::<TraceContext>(),
    )
}

/// The answer of a call run in its own task; a task that ended without one (it panicked) is an
/// internal error.
async fn answer_of(
    task: tokio::task::JoinHandle<Result<Value, rmcp::model::ErrorData>>,
) -> Result<Value, rmcp::model::ErrorData> {
    task.await.unwrap_or_else(|error| {
        tracing::error!(%error, "a tool call ended inside the gateway without an answer");
        Err(rmcp::model::ErrorData::internal_error(
            "the gateway failed while running the call; see its log",
            None,
        ))
    })
}

/// The JSON-RPC answer to request `id`.
fn reply(
    id: &RawValue,
    outcome: Result<Value, rmcp::model::ErrorData>,
) -> http::Response<McpHttpBody> {
    let (result, error) = match outcome {
        Ok(result) => (Some(result), None),
        Err(error) => (None, Some(error)),
    };
    let reply = Reply {
        jsonrpc: "2.0",
        id,
        result,
        error,
    };
    match serde_json::to_vec(&reply) {
        Ok(body) => json_response(body),
        Err(error) => {
            // Every part is JSON already; this is unreachable in practice.
            tracing::error!(%error, "could not encode a tool call's answer");
            let fallback = Reply {
                jsonrpc: "2.0",
                id,
                result: None,
                error: Some(rmcp::model::ErrorData::internal_error(
                    "the gateway could not encode the tool's answer",
                    None,
                )),
            };
            json_response(serde_json::to_vec(&fallback).unwrap_or_default())
        }
    }
}

/// Whether a request makes its session one whose calls may carry relayed messages: an
/// `initialize` that declares capabilities for server requests, or `logging/setLevel`.
fn wants_relays(posted: &Incoming<'_>) -> bool {
    #[derive(Deserialize)]
    struct Initialize {
        #[serde(default)]
        capabilities: Value,
    }
    match posted.method.as_ref() {
        "logging/setLevel" => true,
        "initialize" => posted
            .params
            .and_then(|params| serde_json::from_str::<Initialize>(params.get()).ok())
            .is_some_and(|initialize| {
                mcpgw_core::RelayCapabilities::from_client_capabilities(&initialize.capabilities)
                    .answers_requests()
            }),
        _ => false,
    }
}

/// `_meta` keys that need rmcp: progress (relayed on an SSE stream) and per-request protocol
/// metadata.
fn needs_rmcp(meta: &Map<String, Value>) -> bool {
    meta.keys()
        .any(|key| key == "progressToken" || key.starts_with("io.modelcontextprotocol/"))
}

/// The one value of header `name`; `None` when it is absent, repeated or not text.
fn only_value<'h>(headers: &'h http::HeaderMap, name: &str) -> Option<&'h str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    value.to_str().ok()
}

/// What the client of a 2026-07-28 request declared it can be asked, when its `_meta` is one
/// the direct path serves: the era's version and capabilities (and client information, when
/// given) well formed, and nothing that needs rmcp (a progress token, a log level, other
/// protocol keys, declared extensions such as tasks).
fn stateless_capabilities(meta: &Map<String, Value>) -> Option<mcpgw_core::RelayCapabilities> {
    if meta.get(META_VERSION)?.as_str()? != STATELESS_VERSION {
        return None;
    }
    // The client's information is optional; anything but an object is rmcp's to judge.
    if meta
        .get(META_CLIENT_INFO)
        .is_some_and(|info| !info.is_object())
    {
        return None;
    }
    let capabilities = meta.get(META_CAPABILITIES)?;
    if capabilities.as_object()?.contains_key("extensions") {
        return None;
    }
    let other = meta.keys().any(|key| {
        key == "progressToken"
            || (key.starts_with("io.modelcontextprotocol/")
                && ![META_VERSION, META_CLIENT_INFO, META_CAPABILITIES].contains(&key.as_str()))
    });
    if other {
        return None;
    }
    Some(mcpgw_core::RelayCapabilities::from_client_capabilities(
        capabilities,
    ))
}

/// The HTTP status of a 2026-07-28 error answer, as rmcp gives it: 400 for a request the
/// protocol refuses, 404 for an unknown method, 200 for the rest (a tool's own failure, an
/// unknown tool).
fn stateless_error_status(code: ErrorCode) -> http::StatusCode {
    match code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::HEADER_MISMATCH => http::StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => http::StatusCode::NOT_FOUND,
        _ => http::StatusCode::OK,
    }
}

/// JSON-RPC ids are strings or numbers.
fn is_valid_id(id: &RawValue) -> bool {
    matches!(id.get().as_bytes().first(), Some(b'"' | b'-' | b'0'..=b'9'))
}

/// The id in one spelling, so that a cancellation finds its call whatever whitespace either
/// message used.
fn canonical_id(id: &RawValue) -> Option<String> {
    let value: Value = serde_json::from_str(id.get()).ok()?;
    match value {
        Value::String(_) | Value::Number(_) => Some(value.to_string()),
        _ => None,
    }
}

/// The protocol era of a call the direct path answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Era {
    /// `initialize` and a session (2025-11-25 and before).
    Session,
    /// Stateless requests (2026-07-28).
    Stateless,
}

/// The upstream's result as the client gets it: as written, with `isError` set for a tool
/// error and an empty `content` when the result has no content of any kind. `resultType` is a
/// 2026-07-28 field: sessions' clients do not know it, stateless clients require it
/// (`complete` unless the server said otherwise).
pub(crate) fn result_json(outcome: ToolCallOutcome, era: Era) -> Value {
    let ToolCallOutcome {
        mut result,
        is_error,
    } = outcome;
    if !result.is_object() {
        result = Value::Object(Map::new());
    }
    if let Some(object) = result.as_object_mut() {
        match era {
            Era::Session => {
                object.remove("resultType");
            }
            Era::Stateless => {
                object
                    .entry("resultType")
                    .or_insert_with(|| Value::String("complete".to_owned()));
            }
        }
        if !["content", "structuredContent"]
            .iter()
            .any(|key| object.contains_key(*key))
        {
            object.insert("content".to_owned(), Value::Array(Vec::new()));
        }
        if is_error {
            object.insert("isError".to_owned(), Value::Bool(true));
        }
    }
    result
}

fn accepts_json_and_sse(headers: &http::HeaderMap) -> bool {
    let mut json = false;
    let mut sse = false;
    for value in headers.get_all(http::header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        for entry in value.split(',') {
            // Parameters (quality weights among them) are rmcp's to interpret.
            if entry.contains(';') {
                return false;
            }
            let essence = entry.trim();
            json |= essence.eq_ignore_ascii_case("application/json");
            sse |= essence.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

fn is_json(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            value
                .split(';')
                .next()
                .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
        })
}

fn json_response(body: Vec<u8>) -> http::Response<McpHttpBody> {
    let mut response = http::Response::new(Full::new(Bytes::from(body)).boxed());
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

fn accepted() -> http::Response<McpHttpBody> {
    let mut response = http::Response::new(Full::new(Bytes::new()).boxed());
    *response.status_mut() = http::StatusCode::ACCEPTED;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, value.parse().unwrap());
        }
        headers
    }

    #[test]
    fn only_plain_accept_lists_with_both_types_take_the_direct_path() {
        let both = "application/json, text/event-stream";
        assert!(accepts_json_and_sse(&headers(&[("accept", both)])));
        assert!(accepts_json_and_sse(&headers(&[
            ("accept", "application/json"),
            ("accept", "text/event-stream")
        ])));
        assert!(!accepts_json_and_sse(&headers(&[(
            "accept",
            "application/json"
        )])));
        assert!(!accepts_json_and_sse(&headers(&[(
            "accept",
            "application/json, text/event-stream;q=0"
        )])));
    }

    #[test]
    fn results_pass_through_with_tool_errors_marked() {
        let outcome = ToolCallOutcome {
            result: serde_json::json!({
                "content": [{"type": "future-block", "x": 1}],
                "resultType": "complete",
                "extra": true
            }),
            is_error: true,
        };
        assert_eq!(
            result_json(outcome.clone(), Era::Session),
            serde_json::json!({
                "content": [{"type": "future-block", "x": 1}],
                "extra": true,
                "isError": true
            })
        );
        // Stateless clients keep the server's `resultType`, or get `complete`.
        assert_eq!(
            result_json(outcome, Era::Stateless)["resultType"],
            "complete"
        );
        let empty = ToolCallOutcome {
            result: serde_json::json!({}),
            is_error: false,
        };
        assert_eq!(
            result_json(empty.clone(), Era::Session),
            serde_json::json!({"content": []})
        );
        assert_eq!(
            result_json(empty, Era::Stateless),
            serde_json::json!({"content": [], "resultType": "complete"})
        );
    }

    #[test]
    fn ids_are_compared_in_one_spelling() {
        let spaced: Box<RawValue> = serde_json::from_str(" 7 ").unwrap();
        let plain: Box<RawValue> = serde_json::from_str("7").unwrap();
        assert_eq!(canonical_id(&spaced), canonical_id(&plain));
        let text: Box<RawValue> = serde_json::from_str("\"7\"").unwrap();
        assert_ne!(canonical_id(&text), canonical_id(&plain));
        let null: Box<RawValue> = serde_json::from_str("null").unwrap();
        assert_eq!(canonical_id(&null), None);
        assert!(!is_valid_id(&null));
    }

    #[test]
    fn progress_and_protocol_metadata_go_to_rmcp() {
        let meta = |json: Value| json.as_object().cloned().unwrap();
        assert!(needs_rmcp(&meta(serde_json::json!({"progressToken": 1}))));
        assert!(needs_rmcp(&meta(serde_json::json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28"
        }))));
        assert!(!needs_rmcp(&meta(
            serde_json::json!({"traceparent": "00-ab"})
        )));
    }
}
