//! Remote servers: the [`ServerLauncher`] port for [`LaunchSpec::Remote`], MCP over Streamable
//! HTTP on rmcp's reqwest client.
//!
//! rmcp keeps a Streamable HTTP session open whatever happens to the server behind it: a request
//! that cannot reach the server fails, and the next one tries again. The gateway instead wants a
//! session that ends when the server is gone, so that the manager marks the server dead and
//! connects again, with its backoff, on the next use. The HTTP client is therefore wrapped in a
//! [`WatchedHttpClient`] that sees every request's outcome and ends the session when the server
//! cannot be reached, broke the connection, or no longer knows the session (HTTP 404).
//!
//! Configured header values are credentials more often than not: they are sent on every request
//! and never written into an error message or a log line.

use std::collections::{BTreeMap, HashMap};
use std::error::Error as StdError;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_core::logs::LogBuffer;
use mcpgw_core::trace::{TRACEPARENT, TRACESTATE};
use mcpgw_core::{
    LaunchError, LaunchSpec, LaunchedServer, McpSession, ServerId, ServerLauncher, ServerSpec,
    TokenExchange,
};
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientConfig, ClientJsonRpcMessage};
use rmcp::service::ClientInitializeError;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::common::client_side_sse::{BoxedSseResponse, ExponentialBackoff};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::caller_sessions::TokenExchangeSession;
use crate::session::{ConnectionLost, RmcpSession, SessionSetup};
use crate::token_exchange::{CallerCredential, UpstreamCredentials};

/// Headers the Streamable HTTP transport sets itself; configuring them would break the protocol.
const TRANSPORT_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    "content-length",
    "host",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// How much of an unexpected answer's text goes into an error message.
const ANSWER_EXCERPT_CHARS: usize = 200;

/// How long the standalone event stream waits before its first reconnection attempt, and at most
/// between two attempts, when the server closed it but is still reachable.
const EVENT_STREAM_RETRY_FIRST: Duration = Duration::from_millis(500);
const EVENT_STREAM_RETRY_MAX: Duration = Duration::from_secs(30);

/// How the launcher talks to remote servers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteSettings {
    /// How long connecting and the `initialize` handshake may take together. Default 10 s.
    pub connect_timeout: Duration,
    /// How long any one request may wait for its answer before it is cancelled and fails with
    /// [`mcpgw_core::SessionErrorKind::Timeout`]. Default none: callers bound their own calls.
    pub request_timeout: Option<Duration>,
    /// The `clientInfo.name` sent in `initialize`. Default `mcpgw`.
    pub client_name: String,
    /// The `clientInfo.version` sent in `initialize`. Default this crate's version.
    pub client_version: String,
}

impl Default for RemoteSettings {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            request_timeout: None,
            client_name: crate::session::DEFAULT_CLIENT_NAME.to_owned(),
            client_version: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }
}

impl RemoteSettings {
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    #[must_use]
    pub fn with_request_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.request_timeout = timeout;
        self
    }

    #[must_use]
    pub fn with_client_info(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.client_name = name.into();
        self.client_version = version.into();
        self
    }

    fn client_config(&self) -> ClientConfig {
        crate::session::upstream_client_config(&self.client_name, &self.client_version)
    }
}

/// Starts sessions with servers reached over MCP Streamable HTTP ([`LaunchSpec::Remote`]).
///
/// Every launch opens its own HTTP connection pool, which closes with the session. A remote
/// server has no stderr, so the log buffer stays empty.
#[derive(Debug, Clone, Default)]
pub struct RemoteLauncher {
    settings: RemoteSettings,
}

impl RemoteLauncher {
    pub fn new(settings: RemoteSettings) -> Self {
        Self { settings }
    }

    pub fn settings(&self) -> &RemoteSettings {
        &self.settings
    }

    /// Connects to `endpoint`, sending `headers` with every request, and runs the `initialize`
    /// handshake; like [`ServerLauncher::launch`], with the concrete session type.
    pub async fn connect_session(
        &self,
        server_id: &ServerId,
        endpoint: &str,
        headers: &BTreeMap<String, String>,
    ) -> Result<RmcpSession, LaunchError> {
        let target = RemoteTarget::parse(endpoint, headers)?;
        let http = self.http_client(&target)?;
        self.open(server_id, &target, http, RequestAuth::Configured)
            .await
    }

    /// [`RemoteLauncher::connect_session`] for a server configured for token exchange: the
    /// gateway's own session (its requests carry the gateway client's token) serves everything
    /// but tool calls, and each caller's tool calls run on an upstream session of that caller's
    /// own, opened on first use, whose every request carries a token exchanged for the caller's
    /// (see [`TokenExchangeSession`]). A caller's session is closed once it has been idle for
    /// `caller_idle`.
    pub async fn connect_session_as(
        &self,
        server_id: &ServerId,
        endpoint: &str,
        headers: &BTreeMap<String, String>,
        token_exchange: &TokenExchange,
        caller_idle: Duration,
    ) -> Result<TokenExchangeSession, LaunchError> {
        let target = RemoteTarget::parse(endpoint, headers)?;
        let credentials = Arc::new(
            UpstreamCredentials::new(token_exchange.clone(), endpoint, server_id.to_string())
                .map_err(LaunchError::Other)?,
        );
        let http = self.http_client(&target)?;
        let own = self
            .open(
                server_id,
                &target,
                http.clone(),
                RequestAuth::Gateway(Arc::clone(&credentials)),
            )
            .await?;
        let opener = CallerSessionOpener {
            launcher: self.clone(),
            server_id: server_id.clone(),
            target,
            http,
        };
        Ok(TokenExchangeSession::new(
            server_id.clone(),
            own,
            credentials,
            opener,
            caller_idle,
        ))
    }

    /// The HTTP client of one launch; its connection pool closes with the last session using it.
    fn http_client(&self, target: &RemoteTarget) -> Result<reqwest::Client, LaunchError> {
        reqwest::Client::builder()
            .connect_timeout(self.settings.connect_timeout)
            .build()
            .map_err(|error| {
                LaunchError::Other(format!(
                    "cannot set up the http client for {}: {}",
                    target.display,
                    error_causes(&error)
                ))
            })
    }

    /// Opens one upstream session at `target` whose requests carry what `auth` says, and runs
    /// the `initialize` handshake.
    async fn open(
        &self,
        server_id: &ServerId,
        target: &RemoteTarget,
        http: reqwest::Client,
        auth: RequestAuth,
    ) -> Result<RmcpSession, LaunchError> {
        // A caller's session recovers from an expired session id by itself (see below); every
        // other session ends on it.
        let recovers_expired = matches!(auth, RequestAuth::Caller(_));
        let watch = Arc::new(ConnectionWatch::new(
            target.display.clone(),
            recovers_expired,
        ));
        let client = WatchedHttpClient {
            inner: http,
            watch: Arc::clone(&watch),
            auth,
        };
        let mut config = StreamableHttpClientTransportConfig::with_uri(target.url.as_str())
            .custom_headers(target.headers.clone())
            // A server that forgot the gateway's own session restarted or expired it: the
            // gateway's own restart path (a new session, the tool list read again) handles that,
            // not a silent re-initialization underneath. A caller's session holds nothing the
            // gateway must read again: rmcp initializes it anew (with the caller's current
            // token) and sends the request that met the 404 once more, which the server never
            // ran.
            .reinit_on_expired_session(recovers_expired);
        let mut backoff = ExponentialBackoff::default();
        backoff.base_duration = EVENT_STREAM_RETRY_FIRST;
        backoff.max_delay = Some(EVENT_STREAM_RETRY_MAX);
        config.retry_config = Arc::new(backoff);
        let transport = StreamableHttpClientTransport::with_client(client, config);

        let lost_watch = Arc::clone(&watch);
        let connection_lost: ConnectionLost = Box::pin(async move {
            lost_watch.lost.cancelled().await;
            lost_watch.lost_description()
        });
        let setup = SessionSetup {
            client_config: self.settings.client_config(),
            request_timeout: self.settings.request_timeout,
            connection_lost: Some(connection_lost),
            failure_hint: format!("check that the server at {} is up", target.display),
        };
        let handshake = RmcpSession::establish(server_id.clone(), transport, setup);
        // On timeout the handshake is dropped, and with it the transport and its requests.
        match tokio::time::timeout(self.settings.connect_timeout, handshake).await {
            Ok(Ok(session)) => Ok(session),
            Ok(Err(error)) => Err(handshake_error(
                &target.display,
                watch.last_failure(),
                error,
            )),
            Err(_) => {
                tracing::warn!(
                    server = %server_id,
                    endpoint = %target.display,
                    "the remote mcp server did not complete `initialize` within {:?}",
                    self.settings.connect_timeout
                );
                Err(LaunchError::Timeout(self.settings.connect_timeout))
            }
        }
    }
}

/// What opens the upstream sessions of a server's callers: the launch's target and HTTP
/// client (whose connections they share with the gateway's own session).
#[derive(Clone)]
pub(crate) struct CallerSessionOpener {
    launcher: RemoteLauncher,
    server_id: ServerId,
    target: RemoteTarget,
    http: reqwest::Client,
}

impl std::fmt::Debug for CallerSessionOpener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallerSessionOpener")
            .field("server_id", &self.server_id)
            .field("endpoint", &self.target.display)
            .finish_non_exhaustive()
    }
}

impl CallerSessionOpener {
    /// Opens a session whose every request, `initialize` first, carries `credential`'s token.
    pub(crate) async fn open(
        &self,
        credential: Arc<CallerCredential>,
    ) -> Result<RmcpSession, LaunchError> {
        self.launcher
            .open(
                &self.server_id,
                &self.target,
                self.http.clone(),
                RequestAuth::Caller(credential),
            )
            .await
    }
}

#[async_trait]
impl ServerLauncher for RemoteLauncher {
    async fn launch(
        &self,
        spec: &ServerSpec,
        _logs: Arc<LogBuffer>,
    ) -> Result<LaunchedServer, LaunchError> {
        let LaunchSpec::Remote {
            endpoint,
            headers,
            token_exchange,
        } = &spec.launch
        else {
            return Err(LaunchError::UnsupportedMode(spec.launch.mode().to_owned()));
        };
        let session: Arc<dyn McpSession> = match token_exchange {
            None => Arc::new(self.connect_session(&spec.id, endpoint, headers).await?),
            Some(exchange) => Arc::new(
                self.connect_session_as(&spec.id, endpoint, headers, exchange, spec.idle_ttl)
                    .await?,
            ),
        };
        Ok(LaunchedServer { session })
    }
}

/// A validated endpoint and header set.
#[derive(Clone)]
struct RemoteTarget {
    url: reqwest::Url,
    /// The endpoint without user name, password, query or fragment, which may hold secrets.
    display: String,
    headers: HashMap<HeaderName, HeaderValue>,
}

impl RemoteTarget {
    fn parse(endpoint: &str, headers: &BTreeMap<String, String>) -> Result<Self, LaunchError> {
        let url = reqwest::Url::parse(endpoint).map_err(|error| {
            LaunchError::Other(format!(
                "the endpoint of a remote server must be an http:// or https:// URL, and this \
                 one is not valid ({error}); fix the server's `endpoint`"
            ))
        })?;
        let display = endpoint_for_messages(&url);
        if !matches!(url.scheme(), "http" | "https") {
            return Err(LaunchError::Other(format!(
                "the endpoint {display} of a remote server must use http:// or https://; fix the \
                 server's `endpoint`"
            )));
        }
        let mut parsed = HashMap::with_capacity(headers.len());
        for (name, value) in headers {
            let header_name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                LaunchError::Other(format!(
                    "`{name}` is not a valid HTTP header name; fix the `headers` of the remote \
                     server at {display}"
                ))
            })?;
            if TRANSPORT_HEADERS.contains(&header_name.as_str()) {
                return Err(LaunchError::Other(format!(
                    "header `{name}` is set by the MCP transport itself; remove it from the \
                     `headers` of the remote server at {display}"
                )));
            }
            // The value is left out of the message: it is a credential more often than not.
            let mut header_value = HeaderValue::from_str(value).map_err(|_| {
                LaunchError::Other(format!(
                    "the value of header `{name}` is not a valid HTTP header value (visible ASCII \
                     without line breaks); fix the `headers` of the remote server at {display}"
                ))
            })?;
            header_value.set_sensitive(true);
            parsed.insert(header_name, header_value);
        }
        Ok(Self {
            url,
            display,
            headers: parsed,
        })
    }
}

fn endpoint_for_messages(url: &reqwest::Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

/// Why a request to a remote server failed, as far as the gateway acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FailureKind {
    /// No connection could be made: refused, no route, unknown host.
    Unreachable,
    /// A connection broke in the middle of a request.
    ConnectionBroken,
    /// The server answered 404 for the session: it restarted or expired the session.
    SessionGone,
    /// The server refused the credentials (401, 403).
    Unauthorized,
    /// The answer was not MCP Streamable HTTP.
    NotMcp,
    Other,
}

impl FailureKind {
    /// Whether the session can serve no further request.
    fn ends_session(self) -> bool {
        matches!(
            self,
            FailureKind::Unreachable | FailureKind::ConnectionBroken | FailureKind::SessionGone
        )
    }
}

#[derive(Debug, Clone)]
struct RemoteFailure {
    kind: FailureKind,
    detail: String,
}

/// What the HTTP client has seen of one session's connection.
struct ConnectionWatch {
    endpoint: String,
    /// Whether rmcp initializes the session anew when the server no longer knows its id (a
    /// caller's session), so that an HTTP 404 does not end it.
    recovers_expired: bool,
    lost: CancellationToken,
    lost_because: Mutex<Option<RemoteFailure>>,
    last_failure: Mutex<Option<RemoteFailure>>,
}

impl ConnectionWatch {
    fn new(endpoint: String, recovers_expired: bool) -> Self {
        Self {
            endpoint,
            recovers_expired,
            lost: CancellationToken::new(),
            lost_because: Mutex::new(None),
            last_failure: Mutex::new(None),
        }
    }

    fn observe<T>(
        &self,
        result: Result<T, StreamableHttpError<reqwest::Error>>,
    ) -> Result<T, StreamableHttpError<reqwest::Error>> {
        if let Err(error) = &result
            && let Some(failure) = classify(error)
        {
            self.record(failure);
        }
        result
    }

    fn record(&self, failure: RemoteFailure) {
        tracing::debug!(endpoint = %self.endpoint, kind = ?failure.kind, detail = %failure.detail,
            "a request to a remote mcp server failed");
        let recovered = self.recovers_expired && failure.kind == FailureKind::SessionGone;
        if failure.kind.ends_session() && !recovered {
            let mut lost_because = self
                .lost_because
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            lost_because.get_or_insert_with(|| failure.clone());
            drop(lost_because);
            self.lost.cancel();
        }
        *self
            .last_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(failure);
    }

    fn last_failure(&self) -> Option<RemoteFailure> {
        self.last_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn lost_description(&self) -> String {
        let failure = self
            .lost_because
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let endpoint = &self.endpoint;
        match failure {
            Some(RemoteFailure {
                kind: FailureKind::SessionGone,
                ..
            }) => format!(
                "the remote server at {endpoint} no longer knows the session (HTTP 404); it \
                 probably restarted"
            ),
            Some(RemoteFailure {
                kind: FailureKind::Unreachable,
                detail,
            }) => format!("the remote server at {endpoint} cannot be reached: {detail}"),
            Some(RemoteFailure { detail, .. }) => {
                format!("the connection to the remote server at {endpoint} broke: {detail}")
            }
            None => format!("the connection to the remote server at {endpoint} was lost"),
        }
    }
}

/// Copies a tool call's trace context from its `_meta` into the request's `traceparent` and
/// `tracestate` headers, for the remote server's HTTP layer (a proxy, a load balancer, a
/// server instrumented at the HTTP level) to continue the trace too.
fn add_trace_headers(
    message: &ClientJsonRpcMessage,
    headers: &mut HashMap<HeaderName, HeaderValue>,
) {
    use rmcp::model::{ClientRequest, JsonRpcMessage};
    let JsonRpcMessage::Request(request) = message else {
        return;
    };
    let ClientRequest::CallToolRequest(call) = &request.request else {
        return;
    };
    let Some(meta) = call.params.meta.as_ref() else {
        return;
    };
    for name in [TRACEPARENT, TRACESTATE] {
        if let Some(value) = meta.get(name).and_then(Value::as_str)
            && let Ok(value) = HeaderValue::from_str(value)
        {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
}

/// Whose token the requests of a session carry.
#[derive(Clone)]
enum RequestAuth {
    /// None but what the server's configured `headers` hold.
    Configured,
    /// The gateway client's own (a server configured for token exchange: the gateway's own
    /// session).
    Gateway(Arc<UpstreamCredentials>),
    /// A token exchanged for one caller's (that caller's session).
    Caller(Arc<CallerCredential>),
}

/// rmcp's reqwest client, with every outcome reported to the session's [`ConnectionWatch`]. For
/// a server configured for token exchange it also sets each request's `Authorization`, as
/// [`RequestAuth`] says.
#[derive(Clone)]
struct WatchedHttpClient {
    inner: reqwest::Client,
    watch: Arc<ConnectionWatch>,
    auth: RequestAuth,
}

impl WatchedHttpClient {
    /// The bearer token of a request: rmcp's (none is configured) without token exchange; with
    /// it, the gateway's own or the caller's.
    async fn bearer_for(
        &self,
        configured: Option<String>,
    ) -> Result<Option<String>, StreamableHttpError<reqwest::Error>> {
        let token = match &self.auth {
            RequestAuth::Configured => return Ok(configured),
            RequestAuth::Gateway(credentials) => credentials.own_token().await,
            RequestAuth::Caller(credential) => credential.token().await,
        };
        token
            .map(Some)
            .map_err(|error| StreamableHttpError::UnexpectedServerResponse(error.0.into()))
    }
}

impl StreamableHttpClient for WatchedHttpClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let auth_header = self.bearer_for(auth_header).await?;
        let mut custom_headers = custom_headers;
        add_trace_headers(&message, &mut custom_headers);
        let result = self
            .inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await;
        self.watch.observe(result)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let auth_header = self.bearer_for(auth_header).await?;
        let mut custom_headers = custom_headers;
        add_trace_headers(&message, &mut custom_headers);
        let result = self
            .inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.watch.observe(result)
    }

    // Ending the session is what sends this; its outcome says nothing about the session.
    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        let auth_header = self.bearer_for(auth_header).await?;
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxedSseResponse, StreamableHttpError<Self::Error>> {
        let auth_header = self.bearer_for(auth_header).await?;
        let result = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await;
        self.watch.observe(result)
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxedSseResponse, StreamableHttpError<Self::Error>> {
        let auth_header = self.bearer_for(auth_header).await?;
        let result = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.watch.observe(result)
    }
}

/// What a failed request means for the session; `None` for outcomes that are no failure of the
/// server (one without a standalone event stream, say).
fn classify(error: &StreamableHttpError<reqwest::Error>) -> Option<RemoteFailure> {
    let failure = |kind, detail: String| Some(RemoteFailure { kind, detail });
    match error {
        StreamableHttpError::ServerDoesNotSupportSse
        | StreamableHttpError::ServerDoesNotSupportDeleteSession => None,
        StreamableHttpError::Client(error) => {
            let detail = error_causes(error);
            match error.status().map(|status| status.as_u16()) {
                Some(404) => failure(FailureKind::SessionGone, "HTTP 404".to_owned()),
                Some(401 | 403) => failure(FailureKind::Unauthorized, detail),
                Some(_) => failure(FailureKind::Other, detail),
                None if error.is_connect() => failure(FailureKind::Unreachable, detail),
                None if error.is_timeout() => failure(FailureKind::Other, detail),
                None if error.is_request() || error.is_body() => {
                    failure(FailureKind::ConnectionBroken, detail)
                }
                None => failure(FailureKind::Other, detail),
            }
        }
        StreamableHttpError::SessionExpired => {
            failure(FailureKind::SessionGone, "HTTP 404".to_owned())
        }
        StreamableHttpError::AuthRequired(_) => failure(
            FailureKind::Unauthorized,
            "HTTP 401 unauthorized".to_owned(),
        ),
        StreamableHttpError::InsufficientScope(_) => {
            failure(FailureKind::Unauthorized, "HTTP 403 forbidden".to_owned())
        }
        StreamableHttpError::UnexpectedServerResponse(text) => {
            let text = excerpt(text);
            if text.starts_with("HTTP 401") || text.starts_with("HTTP 403") {
                failure(FailureKind::Unauthorized, text)
            } else {
                failure(FailureKind::NotMcp, text)
            }
        }
        StreamableHttpError::UnexpectedContentType(content_type) => failure(
            FailureKind::NotMcp,
            match content_type {
                Some(content_type) => {
                    format!("it answered with content type `{}`", excerpt(content_type))
                }
                None => "it answered without a content type".to_owned(),
            },
        ),
        StreamableHttpError::Deserialize(error) => failure(
            FailureKind::NotMcp,
            format!("its answer is not JSON-RPC: {error}"),
        ),
        StreamableHttpError::MissingSessionIdInResponse => failure(
            FailureKind::NotMcp,
            "it answered `initialize` without a session id".to_owned(),
        ),
        StreamableHttpError::HttpStatus(status) => {
            failure(FailureKind::Other, format!("HTTP {}", status.status))
        }
        other => failure(FailureKind::Other, other.to_string()),
    }
}

/// The causes of an error without its outermost message: reqwest's names the full URL, which
/// may carry a secret in its query.
pub(crate) fn error_causes(error: &reqwest::Error) -> String {
    let mut causes: Vec<String> = Vec::new();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if causes.last() != Some(&text) {
            causes.push(text);
        }
        source = cause.source();
    }
    if causes.is_empty() {
        // Only the outermost message: drop its URL.
        let mut error_text = error.to_string();
        if let Some(url) = error.url() {
            error_text = error_text.replace(url.as_str(), &endpoint_for_messages(url));
        }
        return error_text;
    }
    causes.join(": ")
}

fn excerpt(text: &str) -> String {
    let mut shown: String = text.chars().take(ANSWER_EXCERPT_CHARS).collect();
    if shown.len() < text.len() {
        shown.push_str("...");
    }
    shown
}

fn handshake_error(
    endpoint: &str,
    failure: Option<RemoteFailure>,
    error: ClientInitializeError,
) -> LaunchError {
    if let Some(RemoteFailure { kind, detail }) = failure {
        return match kind {
            FailureKind::Unreachable => LaunchError::Other(format!(
                "cannot reach the remote mcp server at {endpoint}: {detail}; check that it is \
                 running and that the endpoint is right"
            )),
            FailureKind::Unauthorized => LaunchError::Handshake(format!(
                "the remote mcp server at {endpoint} refused the request ({detail}); check the \
                 credentials in the server's `headers`"
            )),
            FailureKind::NotMcp => LaunchError::Handshake(format!(
                "{endpoint} did not answer as an MCP Streamable HTTP endpoint ({detail}); check \
                 the URL and its path (often /mcp)"
            )),
            FailureKind::ConnectionBroken | FailureKind::SessionGone | FailureKind::Other => {
                LaunchError::Handshake(format!(
                    "the request to the remote mcp server at {endpoint} failed: {detail}"
                ))
            }
        };
    }
    let message = match error {
        ClientInitializeError::JsonRpcError(data) => format!(
            "the remote mcp server at {endpoint} rejected `initialize` with JSON-RPC error {}: {}",
            data.code.0, data.message
        ),
        ClientInitializeError::ConnectionClosed(_) => format!(
            "the connection to the remote mcp server at {endpoint} closed before it answered \
             `initialize`"
        ),
        ClientInitializeError::TransportError { error, .. } => format!(
            "the request to the remote mcp server at {endpoint} failed: {}",
            error.error
        ),
        other => format!("{other}; check that {endpoint} is an MCP Streamable HTTP endpoint"),
    };
    LaunchError::Handshake(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect()
    }

    fn parse_error(endpoint: &str, pairs: &[(&str, &str)]) -> String {
        match RemoteTarget::parse(endpoint, &headers(pairs)) {
            Ok(_) => panic!("{endpoint} with {pairs:?} must be rejected"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn endpoints_in_messages_lose_their_credentials() {
        let url = reqwest::Url::parse("https://user:pw@example.com:8443/mcp?token=abc#x").unwrap();
        assert_eq!(endpoint_for_messages(&url), "https://example.com:8443/mcp");
    }

    #[test]
    fn rejects_bad_endpoints_and_headers_without_showing_values() {
        assert!(parse_error("not a url", &[]).contains("must be an http:// or https:// URL"));
        assert!(parse_error("ftp://example.com/mcp", &[]).contains("must use http://"));
        let bad_value = parse_error(
            "http://127.0.0.1:1/mcp",
            &[("Authorization", "Bearer s3cret\nX-Injected: 1")],
        );
        assert!(bad_value.contains("`Authorization`"), "{bad_value}");
        assert!(!bad_value.contains("s3cret"), "{bad_value}");
        assert!(
            parse_error("http://127.0.0.1:1/mcp", &[("bad name", "x")])
                .contains("not a valid HTTP header name")
        );
        assert!(
            parse_error("http://127.0.0.1:1/mcp", &[("Mcp-Session-Id", "x")])
                .contains("set by the MCP transport")
        );
    }

    #[test]
    fn configured_headers_are_kept_and_marked_sensitive() {
        let target = RemoteTarget::parse(
            "http://127.0.0.1:1/mcp",
            &headers(&[("Authorization", "Bearer s3cret"), ("X-Tenant", "t1")]),
        )
        .unwrap();
        let authorization = &target.headers[&HeaderName::from_static("authorization")];
        assert_eq!(authorization, "Bearer s3cret");
        assert!(authorization.is_sensitive());
        assert!(!format!("{authorization:?}").contains("s3cret"));
        assert_eq!(target.headers.len(), 2);
    }

    #[test]
    fn only_lost_connections_end_the_session() {
        let kind = |error: StreamableHttpError<reqwest::Error>| classify(&error).map(|f| f.kind);
        assert_eq!(
            kind(StreamableHttpError::SessionExpired),
            Some(FailureKind::SessionGone)
        );
        assert_eq!(kind(StreamableHttpError::ServerDoesNotSupportSse), None);
        assert_eq!(
            kind(StreamableHttpError::UnexpectedContentType(Some(
                "text/html".to_owned()
            ))),
            Some(FailureKind::NotMcp)
        );
        assert!(FailureKind::SessionGone.ends_session());
        assert!(FailureKind::Unreachable.ends_session());
        assert!(FailureKind::ConnectionBroken.ends_session());
        assert!(!FailureKind::Unauthorized.ends_session());
        assert!(!FailureKind::Other.ends_session());
    }
}
