//! The gateway's MCP endpoint over Streamable HTTP, as a plain function of `http` types.
//!
//! [`streamable_http_handler`] wraps rmcp's `StreamableHttpService` around
//! [`GatewayMcpServer`], so that an HTTP adapter (actix-web, say) can mount it at `/mcp` with
//! nothing but `http`, `http-body` and `bytes`: it never sees rmcp. Both protocol eras are
//! served on the one path: `initialize`-era clients (2025-06-18, 2025-11-25) get sessions
//! (`Mcp-Session-Id`, a GET stream, DELETE), 2026-07-28 clients are served statelessly.
//!
//! Sessions live in the replica that holds them. When the replicas share a secret
//! ([`McpServerSettings::request_state_secret`]), a session's id carries what its `initialize`
//! said, signed, and a replica that gets a request for a session it does not hold re-creates it
//! from the id and serves the request, so a load balancer needs no affinity (see
//! [`crate::session_ids`] for the id and what a re-created session does not keep).
//!
//! The handler checks neither `Host` nor `Origin`: those are rules of the whole HTTP surface,
//! and the HTTP adapter that mounts the handler applies them to every route, `/mcp` included
//! (mcpgw's does, before a request gets here). An embedder that mounts it elsewhere must check
//! both itself, or a web page can reach it through DNS rebinding.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, BodyStream, Full, StreamBody};
use mcpgw_core::{McpFrontend, bounded_for_message};
use rmcp::model::{ClientJsonRpcMessage, InitializeRequestParams};
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use crate::direct::{DirectCalls, Incoming};
use crate::resumable::GatewaySessions;
use crate::server::{GatewayMcpServer, McpServerSettings};
use crate::session_ids::SessionIds;

/// The body of every answer: a complete body for JSON answers and errors, an unending stream of
/// Server-Sent Events for SSE answers. It never fails.
pub type McpHttpBody = BoxBody<Bytes, Infallible>;

/// Answers one HTTP request to the MCP endpoint. The request body is passed whole; the answer's
/// body may stream for as long as the client stays connected.
pub type McpHttpHandler = Arc<
    dyn Fn(http::Request<Bytes>) -> BoxFuture<'static, http::Response<McpHttpBody>> + Send + Sync,
>;

/// How the Streamable HTTP endpoint behaves.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct McpHttpSettings {
    /// How often an idle SSE stream carries a keep-alive comment, so that proxies do not cut
    /// it. Default 15 s; `None` sends none.
    pub sse_keep_alive: Option<Duration>,
    /// Whether `initialize`-era clients get sessions (`Mcp-Session-Id`, GET stream, DELETE).
    /// Default true; without it they are served statelessly and get no server-initiated
    /// notifications. 2026-07-28 clients are stateless either way.
    pub legacy_sessions: bool,
    /// A session that sees no request for this long is closed; its client must `initialize`
    /// again (it gets 404 for the old session id). Default 30 min (rmcp's own default, 5 min,
    /// drops desktop clients left idle for a coffee). `None` keeps sessions until DELETE or
    /// shutdown. When the replicas share a secret (`server.request_state_secret`), closing
    /// frees only this replica's copy: a request within the resume window re-creates it.
    pub session_idle_timeout: Option<Duration>,
    /// When the replicas share a secret (`server.request_state_secret`), session ids carry
    /// their session and any replica re-creates a session it does not hold, for this long
    /// after the session's `initialize` (the id cannot tell how recently the session was
    /// used). Default 24 h; `None`: without limit. Without a shared secret, sessions live
    /// only in the replica that created them and this is not used.
    pub session_resume_window: Option<Duration>,
    /// Largest accepted request body; larger ones are answered 413. Default 4 MiB. The HTTP
    /// adapter must accept at least this much before calling the handler.
    pub max_request_body_bytes: usize,
    /// Whether stateless requests whose answer is ready before anything else was sent are
    /// answered `application/json` instead of an SSE stream. Default true (cheaper, and proxies
    /// handle it better); a call that reports progress still streams.
    pub json_responses: bool,
    /// Cancelling this token ends every session and open stream: for graceful shutdown, since
    /// GET streams otherwise stay open for as long as clients keep them.
    pub shutdown: CancellationToken,
    /// What the MCP server itself does (page sizes).
    pub server: McpServerSettings,
}

impl Default for McpHttpSettings {
    fn default() -> Self {
        Self {
            sse_keep_alive: Some(Duration::from_secs(15)),
            legacy_sessions: true,
            session_idle_timeout: Some(Duration::from_secs(30 * 60)),
            session_resume_window: Some(Duration::from_secs(24 * 60 * 60)),
            max_request_body_bytes: 4 * 1024 * 1024,
            json_responses: true,
            shutdown: CancellationToken::new(),
            server: McpServerSettings::default(),
        }
    }
}

impl McpHttpSettings {
    #[must_use]
    pub fn with_sse_keep_alive(mut self, interval: Option<Duration>) -> Self {
        self.sse_keep_alive = interval;
        self
    }

    #[must_use]
    pub fn with_legacy_sessions(mut self, enabled: bool) -> Self {
        self.legacy_sessions = enabled;
        self
    }

    #[must_use]
    pub fn with_session_idle_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.session_idle_timeout = timeout;
        self
    }

    #[must_use]
    pub fn with_session_resume_window(mut self, window: Option<Duration>) -> Self {
        self.session_resume_window = window;
        self
    }

    #[must_use]
    pub fn with_max_request_body_bytes(mut self, bytes: usize) -> Self {
        self.max_request_body_bytes = bytes;
        self
    }

    #[must_use]
    pub fn with_json_responses(mut self, enabled: bool) -> Self {
        self.json_responses = enabled;
        self
    }

    #[must_use]
    pub fn with_shutdown(mut self, shutdown: CancellationToken) -> Self {
        self.shutdown = shutdown;
        self
    }

    #[must_use]
    pub fn with_server(mut self, server: McpServerSettings) -> Self {
        self.server = server;
        self
    }

    fn rmcp_config(&self) -> StreamableHttpServerConfig {
        StreamableHttpServerConfig::default()
            .with_sse_keep_alive(self.sse_keep_alive)
            .with_legacy_session_mode(self.legacy_sessions)
            .with_json_response(self.json_responses)
            .with_max_request_body_bytes(self.max_request_body_bytes)
            .with_cancellation_token(self.shutdown.clone())
            // The HTTP adapter in front checks both for every route (see the module's docs).
            .disable_allowed_origins()
            .disable_allowed_hosts()
    }
}

/// Builds the handler for the MCP endpoint.
///
/// Call it inside a tokio runtime: rmcp spawns a task per session and per streaming request.
/// The caller's identity is read from a [`mcpgw_core::Caller`] in the request's extensions
/// (see [`crate::caller_from_extensions`]).
pub fn streamable_http_handler(
    frontend: Arc<dyn McpFrontend>,
    settings: McpHttpSettings,
) -> McpHttpHandler {
    let prototype = GatewayMcpServer::new(Arc::clone(&frontend), settings.server.clone());
    let mut local = LocalSessionManager::default();
    // Idle sessions are closed by `DirectCalls`, which sees every request of a session; rmcp
    // does not see the calls answered on the direct path.
    local.session_config.keep_alive = None;
    // The fleet's secret, when there is one, makes session ids resumable on every replica.
    let ids = settings
        .server
        .request_state_secret
        .as_deref()
        .map(|secret| Arc::new(SessionIds::new(secret, settings.session_resume_window)));
    let sessions = Arc::new(GatewaySessions::new(local, ids.clone()));
    let direct_server = prototype.for_new_connection();
    let negotiator = direct_server.clone();
    let mut config = settings.rmcp_config();
    if let Some(ids) = ids {
        config.session_store = Some(ids);
    }
    let service = StreamableHttpService::new(
        move || Ok(prototype.for_new_connection()),
        Arc::clone(&sessions),
        config,
    );
    let direct = DirectCalls::new(
        frontend,
        direct_server,
        Arc::clone(&sessions),
        settings.shutdown.clone(),
        settings.session_idle_timeout,
        settings.max_request_body_bytes,
    );
    let forwarder = Arc::new(Forwarder {
        service,
        direct: Arc::clone(&direct),
        sessions,
        negotiator,
    });
    Arc::new(move |request: http::Request<Bytes>| {
        let direct = Arc::clone(&direct);
        let forwarder = Arc::clone(&forwarder);
        Box::pin(async move {
            direct.ensure_idle_sweeper();
            if let Some(response) = direct.try_answer(&request).await {
                return response;
            }
            // rmcp's request future is large (kilobytes): it is allocated on its own, only for
            // the requests that go to rmcp, so that a call answered above allocates a small
            // future and never the large block, whose allocation and release cost a call more
            // than its whole routing.
            Box::pin(forwarder.forward(request)).await
        })
    })
}

/// What a request that the direct path does not answer goes through: rmcp's service, with the
/// gateway's corrections around it.
struct Forwarder {
    service: StreamableHttpService<GatewayMcpServer, GatewaySessions>,
    direct: Arc<DirectCalls>,
    sessions: Arc<GatewaySessions>,
    /// Tells which protocol version an `initialize` will get, for its session's id.
    negotiator: GatewayMcpServer,
}

impl Forwarder {
    async fn forward(&self, request: http::Request<Bytes>) -> http::Response<McpHttpBody> {
        let method = request.method().clone();
        // rmcp answers a body it cannot read as a JSON-RPC message with a plain-text 415;
        // keeping the body (a reference count, not a copy) lets that answer be replaced by the
        // JSON-RPC error the specifications ask for, without parsing good requests twice.
        let posted_json = (method == http::Method::POST && is_json(request.headers()))
            .then(|| request.body().clone());
        let session = request
            .headers()
            .get("mcp-session-id")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let ending = match (&method, &session) {
            (&http::Method::DELETE, Some(id)) => Some(SessionEnd {
                known: self.sessions.holds_or_resumes(id).await,
            }),
            _ => None,
        };
        // Read once, without copying, here and after the answer.
        let posted = posted_json
            .as_deref()
            .and_then(|body| serde_json::from_slice::<Incoming<'_>>(body).ok());
        let initializing = match (&session, &posted) {
            (None, Some(posted)) if self.sessions.ids().is_some() => posted
                .initialize_params()
                .map(|params| negotiated(&self.negotiator, params)),
            _ => None,
        };
        let request = request.map(Full::new);
        let response = match initializing {
            Some(params) => {
                GatewaySessions::initializing(params, self.service.handle(request)).await
            }
            None => self.service.handle(request).await,
        };
        let response = match ending {
            Some(ending) => ending.answer(response),
            None => response,
        };
        if response.status() == http::StatusCode::UNSUPPORTED_MEDIA_TYPE
            && let Some(body) = &posted_json
            && let Some(malformed) = Malformed::diagnose(body)
        {
            return malformed.into_response();
        }
        self.direct
            .after_forwarded(&method, session.as_deref(), posted.as_ref(), &response);
        match (session, posted.as_ref().and_then(|posted| posted.id)) {
            (Some(session), Some(id)) => cancel_on_hang_up(response, &self.sessions, session, id),
            _ => response,
        }
    }
}

/// `params` with the protocol version the session will have: the one `initialize` answers with,
/// which is the one a resumed copy of the session must get again.
fn negotiated(
    server: &GatewayMcpServer,
    mut params: InitializeRequestParams,
) -> InitializeRequestParams {
    if let Ok(answer) = rmcp::ServerHandler::negotiate_initialize(server, &params) {
        params.protocol_version = answer.protocol_version;
    }
    params
}

/// An `initialize`-era request (a message with an `id` and a `method`) answered over SSE,
/// whose client hangs up before the stream ends, is cancelled as if the client had sent
/// `notifications/cancelled`: rmcp would keep its
/// handler running (a stream can be resumed), and a call whose server waits for the client's
/// answer to a relayed request would hold that server until the session expired.
fn cancel_on_hang_up(
    response: http::Response<McpHttpBody>,
    sessions: &Arc<GatewaySessions>,
    session: String,
    id: &RawValue,
) -> http::Response<McpHttpBody> {
    let streams = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"));
    if !streams || !response.status().is_success() {
        return response;
    }
    let Ok(request_id) = serde_json::from_str::<serde_json::Value>(id.get()) else {
        return response;
    };
    let guard = CancelOnHangUp {
        sessions: Arc::clone(sessions),
        session,
        request_id,
    };
    response.map(|body| {
        StreamBody::new(HangUpWatch {
            frames: BodyStream::new(body),
            guard: Some(guard),
        })
        .boxed()
    })
}

/// The frames of an SSE answer; dropping it before the last one drops the guard armed.
struct HangUpWatch<S> {
    frames: S,
    guard: Option<CancelOnHangUp>,
}

impl<S: futures::Stream + Unpin> futures::Stream for HangUpWatch<S> {
    type Item = S::Item;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let next = std::pin::Pin::new(&mut self.frames).poll_next(cx);
        if let std::task::Poll::Ready(None) = next {
            // The answer was sent whole: nothing to cancel.
            self.guard = None;
        }
        next
    }
}

/// Cancels one request of one session when dropped.
struct CancelOnHangUp {
    sessions: Arc<GatewaySessions>,
    session: String,
    request_id: serde_json::Value,
}

impl Drop for CancelOnHangUp {
    fn drop(&mut self) {
        let cancel = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": self.request_id, "reason": "the client hung up"},
        });
        let Ok(cancel) = serde_json::from_value::<ClientJsonRpcMessage>(cancel) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let sessions = Arc::clone(&self.sessions);
        let session = self.session.as_str().into();
        runtime.spawn(async move {
            // A session that ended meanwhile has cancelled its requests itself.
            let _ = sessions.accept_message(&session, cancel).await;
        });
    }
}

/// A `DELETE` that names a session: whether that session existed when the request came in.
///
/// rmcp answers every `DELETE` it accepts with 202, for a session it closed and for one it
/// never had. The session is closed by the time of the answer, so a closed session is answered
/// 204 No Content (clients treat 200 and 204 as a successful termination, and anything else as a
/// failure they log), and a session that did not exist (never opened, already ended, expired)
/// is answered 404, as every other request naming it is. Every other answer of rmcp (a missing
/// or unsupported protocol version, sessions turned off) stands.
struct SessionEnd {
    known: bool,
}

impl SessionEnd {
    fn answer(self, response: http::Response<McpHttpBody>) -> http::Response<McpHttpBody> {
        if response.status() != http::StatusCode::ACCEPTED {
            return response;
        }
        if self.known {
            let mut ended = http::Response::new(Full::new(Bytes::new()).boxed());
            *ended.status_mut() = http::StatusCode::NO_CONTENT;
            ended
        } else {
            let mut unknown =
                http::Response::new(Full::new(Bytes::from_static(SESSION_NOT_FOUND)).boxed());
            *unknown.status_mut() = http::StatusCode::NOT_FOUND;
            unknown.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            unknown
        }
    }
}

/// The body of a 404 for a session the endpoint does not have, as rmcp words it for the other
/// methods.
const SESSION_NOT_FOUND: &[u8] = b"Not Found: Session not found";

/// The `Content-Type` is JSON, as rmcp requires before it reads the body: with any other, its
/// 415 is the right answer and stays.
fn is_json(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// JSON-RPC's code for a body that is not JSON.
const PARSE_ERROR: i32 = -32700;
/// JSON-RPC's code for JSON that is not a valid request.
const INVALID_REQUEST: i32 = -32600;

/// A POSTed body that is not a JSON-RPC message the endpoint accepts, and why.
#[derive(Debug, PartialEq, Eq)]
struct Malformed {
    code: i32,
    message: String,
}

/// The members of a message object whose shape is checked, left unparsed.
#[derive(serde::Deserialize)]
struct Members<'a> {
    #[serde(borrow)]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Option<&'a RawValue>,
}

impl Malformed {
    /// Why `body` is not a JSON-RPC message, or `None` when it is one (rmcp's 415 then had
    /// another cause, and stands).
    fn diagnose(body: &[u8]) -> Option<Self> {
        if let Err(error) = serde_json::from_slice::<IgnoredAny>(body) {
            return Some(Self {
                code: PARSE_ERROR,
                message: format!(
                    "parse error: the body is not valid JSON ({}); send one JSON-RPC 2.0 \
                     message as a JSON object",
                    bounded_for_message(&error.to_string())
                ),
            });
        }
        let error = serde_json::from_slice::<ClientJsonRpcMessage>(body).err()?;
        let reason = match body.iter().find(|byte| !byte.is_ascii_whitespace()) {
            Some(b'{') => match serde_json::from_slice::<Members<'_>>(body) {
                Ok(members) => members.fault(),
                Err(_) => None,
            },
            Some(b'[') => Some(
                "the body is a JSON array, and batches are not accepted (MCP 2025-06-18 \
                 removed them); send each message in a request of its own"
                    .to_owned(),
            ),
            Some(first) => Some(format!(
                "the body is a JSON {}, not a message; send a JSON object with \"jsonrpc\": \
                 \"2.0\"",
                match first {
                    b'"' => "string",
                    b'n' => "null",
                    b't' | b'f' => "boolean",
                    _ => "number",
                }
            )),
            None => None,
        };
        let reason = reason.unwrap_or_else(|| {
            format!(
                "the message is not a JSON-RPC request, notification or response the endpoint \
                 accepts ({}); check it against the MCP schema",
                bounded_for_message(&error.to_string())
            )
        });
        Some(Self {
            code: INVALID_REQUEST,
            message: format!("invalid request: {reason}"),
        })
    }

    /// The answer: HTTP 400 with a JSON-RPC error response, whose id is null because the
    /// request's own id could not be read.
    fn into_response(self) -> http::Response<McpHttpBody> {
        let body = serde_json::json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": { "code": self.code, "message": self.message },
        });
        let mut response = http::Response::new(Full::new(Bytes::from(body.to_string())).boxed());
        *response.status_mut() = http::StatusCode::BAD_REQUEST;
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        response
    }
}

impl Members<'_> {
    /// What is wrong with the members every message shares, if anything.
    fn fault(&self) -> Option<String> {
        let Some(version) = self.jsonrpc else {
            return Some(
                "the message has no \"jsonrpc\" member; add \"jsonrpc\": \"2.0\"".to_owned(),
            );
        };
        if version.get() != "\"2.0\"" {
            return Some(format!(
                "\"jsonrpc\" is {}, and only \"2.0\" is accepted; send \"jsonrpc\": \"2.0\"",
                bounded_for_message(version.get())
            ));
        }
        if let Some(method) = self.method
            && !method.get().starts_with('"')
        {
            return Some(format!(
                "\"method\" is {}, not a string; name the method as a string",
                bounded_for_message(method.get())
            ));
        }
        if let Some(id) = self.id
            && !id.get().starts_with('"')
            && serde_json::from_str::<i64>(id.get()).is_err()
        {
            return Some(format!(
                "\"id\" is {}, and an id must be a string or an integer that fits in 64 bits; \
                 send such an id",
                bounded_for_message(id.get())
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rmcp_checks_neither_hosts_nor_origins() {
        let config = McpHttpSettings::default().rmcp_config();
        assert!(config.allowed_hosts.is_empty());
        assert!(config.allowed_origins.is_empty());
    }

    fn diagnosed(body: &str) -> Malformed {
        Malformed::diagnose(body.as_bytes()).unwrap_or_else(|| panic!("{body} passed"))
    }

    #[test]
    fn bodies_that_are_not_json_are_parse_errors() {
        let deep = "[".repeat(10_000);
        for body in [
            "this is not json",
            r#"{"jsonrpc":"2.0","id":1,"meth"#,
            "",
            &deep,
        ] {
            let malformed = diagnosed(body);
            assert_eq!(malformed.code, PARSE_ERROR, "{body:.40}: {malformed:?}");
            assert!(
                malformed.message.starts_with("parse error: "),
                "{malformed:?}"
            );
        }
    }

    #[test]
    fn json_that_is_not_a_message_is_an_invalid_request_saying_why() {
        let digits = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"ping"}}"#,
            "9".repeat(1000)
        );
        let deep_and_closed = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        for (body, why) in [
            ("42", "a JSON number"),
            ("\"tools/list\"", "a JSON string"),
            ("null", "a JSON null"),
            (" true", "a JSON boolean"),
            ("[]", "batches are not accepted"),
            (&deep_and_closed, "batches are not accepted"),
            (r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, "batches"),
            (r#"{"id":1,"method":"ping"}"#, "no \"jsonrpc\" member"),
            (
                r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
                "\"jsonrpc\" is \"1.0\"",
            ),
            (r#"{"jsonrpc":"2.0","id":1,"method":7}"#, "\"method\" is 7"),
            (
                r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
                "\"id\" is {\"a\":1}",
            ),
            (
                r#"{"jsonrpc":"2.0","id":1e400,"method":"ping"}"#,
                "\"id\" is 1e400",
            ),
            (&digits, "an id must be a string or an integer"),
            (
                r#"{"jsonrpc":"2.0","id":1}"#,
                "unrecognized JSON-RPC message",
            ),
        ] {
            let malformed = diagnosed(body);
            assert_eq!(malformed.code, INVALID_REQUEST, "{body:.40}: {malformed:?}");
            assert!(
                malformed.message.starts_with("invalid request: "),
                "{malformed:?}"
            );
            assert!(malformed.message.contains(why), "{body:.40}: {malformed:?}");
        }
    }

    #[test]
    fn quoted_input_is_bounded_and_has_no_raw_control_characters() {
        let body = format!(
            "{{\"jsonrpc\": {{\"a\":\r\n\"{}\"}}, \"id\": 1, \"method\": \"ping\"}}",
            "x".repeat(10_000)
        );
        let malformed = diagnosed(&body);
        assert_eq!(malformed.code, INVALID_REQUEST);
        assert!(malformed.message.contains("\\r\\n"), "{malformed:?}");
        assert!(!malformed.message.contains(['\r', '\n']), "{malformed:?}");
        assert!(malformed.message.len() < 400, "{malformed:?}");
    }

    #[test]
    fn valid_messages_are_not_diagnosed() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":"a","method":"no/such/method","params":{}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        ] {
            assert_eq!(Malformed::diagnose(body.as_bytes()), None, "{body}");
        }
    }

    /// A front end with nothing behind it. A tool call records how many tasks the runtime it
    /// runs on has alive (in `alive_at_calls`), then fails as a call of an unknown tool.
    struct NoFrontend {
        changes: tokio::sync::watch::Sender<u64>,
        alive_at_calls: std::sync::Mutex<Vec<usize>>,
    }

    impl NoFrontend {
        fn new() -> Self {
            Self {
                changes: tokio::sync::watch::channel(0).0,
                alive_at_calls: std::sync::Mutex::default(),
            }
        }
    }

    #[async_trait::async_trait]
    impl McpFrontend for NoFrontend {
        fn tools(&self, _caller: &mcpgw_core::Caller) -> Arc<Vec<mcpgw_core::Tool>> {
            Arc::new(Vec::new())
        }
        async fn call_tool(
            &self,
            _caller: &mcpgw_core::Caller,
            name: &str,
            _arguments: Option<serde_json::Map<String, serde_json::Value>>,
            _ctx: mcpgw_core::CallContext,
        ) -> Result<mcpgw_core::ToolCallOutcome, mcpgw_core::FrontendError> {
            let alive = tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks();
            self.alive_at_calls.lock().unwrap().push(alive);
            Err(mcpgw_core::FrontendError::unknown("tool", name))
        }
        fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
            self.changes.subscribe()
        }
        async fn prompts(&self, _caller: &mcpgw_core::Caller) -> Vec<serde_json::Value> {
            Vec::new()
        }
        async fn get_prompt(
            &self,
            _caller: &mcpgw_core::Caller,
            name: &str,
            _arguments: Option<serde_json::Map<String, serde_json::Value>>,
            _ctx: mcpgw_core::CallContext,
        ) -> Result<serde_json::Value, mcpgw_core::FrontendError> {
            Err(mcpgw_core::FrontendError::unknown("prompt", name))
        }

        async fn task_request(
            &self,
            _caller: &mcpgw_core::Caller,
            _method: &str,
            task_id: &str,
            _params: serde_json::Value,
        ) -> Result<serde_json::Value, mcpgw_core::FrontendError> {
            Err(mcpgw_core::FrontendError::unknown("task", task_id))
        }
        async fn resources(&self, _caller: &mcpgw_core::Caller) -> Vec<serde_json::Value> {
            Vec::new()
        }
        async fn resource_templates(&self, _caller: &mcpgw_core::Caller) -> Vec<serde_json::Value> {
            Vec::new()
        }
        async fn read_resource(
            &self,
            _caller: &mcpgw_core::Caller,
            uri: &str,
            _ctx: mcpgw_core::CallContext,
        ) -> Result<serde_json::Value, mcpgw_core::FrontendError> {
            Err(mcpgw_core::FrontendError::unknown("resource", uri))
        }
    }

    async fn post(
        handler: &McpHttpHandler,
        headers: &[(&str, &str)],
        body: &'static str,
    ) -> (http::StatusCode, String, String) {
        let (status, headers, body) = post_for_headers(handler, headers, body).await;
        let content_type = headers
            .get(http::header::CONTENT_TYPE)
            .map_or(String::new(), |value| value.to_str().unwrap().to_owned());
        (status, content_type, body)
    }

    async fn post_for_headers(
        handler: &McpHttpHandler,
        headers: &[(&str, &str)],
        body: &'static str,
    ) -> (http::StatusCode, http::HeaderMap, String) {
        let mut request = http::Request::builder()
            .method(http::Method::POST)
            .uri("/mcp")
            .header(http::header::HOST, "127.0.0.1:8000")
            .header(http::header::ACCEPT, "application/json, text/event-stream");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = handler(request.body(Bytes::from_static(body.as_bytes())).unwrap()).await;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, headers, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn malformed_bodies_get_a_json_rpc_error_in_both_eras_and_a_wrong_type_stays_415() {
        let handler =
            streamable_http_handler(Arc::new(NoFrontend::new()), McpHttpSettings::default());
        let json = ("content-type", "application/json");
        for era in [
            &[json][..],
            &[json, ("mcp-protocol-version", "2025-11-25")],
            &[json, ("mcp-protocol-version", "2026-07-28")],
            &[json, ("mcp-session-id", "no-such-session")],
        ] {
            for (body, code) in [
                ("{not json", PARSE_ERROR),
                ("[1,2]", INVALID_REQUEST),
                (
                    r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
                    INVALID_REQUEST,
                ),
            ] {
                let (status, content_type, text) = post(&handler, era, body).await;
                assert_eq!(
                    status,
                    http::StatusCode::BAD_REQUEST,
                    "{era:?} {body}: {text}"
                );
                assert_eq!(content_type, "application/json");
                let answer: serde_json::Value = serde_json::from_str(&text).unwrap();
                assert_eq!(answer["jsonrpc"], "2.0", "{text}");
                assert_eq!(answer["id"], serde_json::Value::Null, "{text}");
                assert_eq!(answer["error"]["code"], code, "{era:?} {body}: {text}");
            }
        }
        let (status, _, text) = post(
            &handler,
            &[("content-type", "text/plain")],
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
        )
        .await;
        assert_eq!(status, http::StatusCode::UNSUPPORTED_MEDIA_TYPE, "{text}");
        let (status, _, text) =
            post(&handler, &[("content-type", "text/plain")], "{not json").await;
        assert_eq!(status, http::StatusCode::UNSUPPORTED_MEDIA_TYPE, "{text}");
    }

    /// Makes the same call on the direct path from a task of the current `LocalSet`, first
    /// inside `on_local_set`, then outside.
    async fn call_twice(
        handler: &McpHttpHandler,
        headers: &'static [(&'static str, &'static str)],
        body: &'static str,
        answers: &mut Vec<(http::StatusCode, String, String)>,
    ) {
        for marked in [true, false] {
            let handler = handler.clone();
            let answer = tokio::task::spawn_local(async move {
                if marked {
                    crate::on_local_set(post(&handler, headers, body)).await
                } else {
                    post(&handler, headers, body).await
                }
            })
            .await
            .unwrap();
            answers.push(answer);
        }
    }

    #[test]
    fn direct_calls_served_on_a_local_set_run_in_that_set_in_both_eras() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let frontend = Arc::new(NoFrontend::new());
        let handler = streamable_http_handler(frontend.clone(), McpHttpSettings::default());
        let stateless: &[(&str, &str)] = &[
            ("content-type", "application/json"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "nothing"),
        ];
        let stateless_call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nothing","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
        let session_call =
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nothing"}}"#;
        let warm_up = Arc::clone(&frontend);
        let local_set = tokio::task::LocalSet::new();
        let answers = local_set.block_on(&runtime, async move {
            let mut answers = Vec::new();
            call_twice(&handler, stateless, stateless_call, &mut answers).await;
            let json = ("content-type", "application/json");
            let (status, headers, text) = post_for_headers(
                &handler,
                &[json],
                r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}"#,
            )
            .await;
            assert_eq!(status, http::StatusCode::OK, "{text}");
            let session: &'static str = Box::leak(
                headers["mcp-session-id"]
                    .to_str()
                    .unwrap()
                    .to_owned()
                    .into_boxed_str(),
            );
            let in_session: &'static [(&str, &str)] = Box::leak(Box::new([
                json,
                ("mcp-protocol-version", "2025-11-25"),
                ("mcp-session-id", session),
            ]));
            let (status, _, text) = post(
                &handler,
                in_session,
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            )
            .await;
            assert_eq!(status, http::StatusCode::ACCEPTED, "{text}");
            // One call first, so that the session's own tasks have started.
            post(&handler, in_session, session_call).await;
            warm_up.alive_at_calls.lock().unwrap().pop();
            call_twice(&handler, in_session, session_call, &mut answers).await;
            answers
        });
        for (status, _, text) in &answers {
            // The direct path's answer to an unknown tool.
            assert_eq!(*status, http::StatusCode::OK, "{text}");
            assert!(text.contains("-32602"), "{text}");
        }
        // The runtime also runs the handler's own background tasks, alike for each pair of
        // calls; the call's task is one more of them only when it is not the set's.
        let alive = frontend.alive_at_calls.lock().unwrap().clone();
        assert_eq!(alive.len(), 4);
        for pair in alive.chunks(2) {
            assert_eq!(
                pair[1],
                pair[0] + 1,
                "the call ran as a task of the set when its handler said it runs in one, and \
                 as a task of the runtime otherwise: {alive:?}"
            );
        }
    }
}
