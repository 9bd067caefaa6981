//! An initialized MCP client session on rmcp: the [`McpSession`] port over any rmcp transport.

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_core::{
    CallContext, ExitStatusInfo, McpSession, ServerId, SessionError, SessionErrorKind, Tool,
    ToolCall, ToolCallOutcome,
};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientConfig,
    ClientRequest, ListToolsRequest, PaginatedRequestParams, PingRequest, RequestId, ServerResult,
};
use rmcp::service::{
    ClientInitializeError, Peer, PeerRequestOptions, QuitReason, RoleClient, ServiceError,
};
use rmcp::transport::Transport;
use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::progress::{ProgressRelayTransport, ProgressRoutes};

/// A server that keeps answering with new cursors is cut off after this many pages.
const MAX_TOOL_PAGES: usize = 10_000;

/// How long `close` waits for rmcp to wind the connection down.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// How long telling the server about a cancelled request may delay the caller.
const CANCEL_NOTICE_GRACE: Duration = Duration::from_secs(1);

/// An MCP client session with one upstream server, created by a connector of this crate.
///
/// Dropping the session ends the connection, as [`McpSession::close`] does.
pub struct RmcpSession {
    server_id: ServerId,
    peer: Peer<RoleClient>,
    request_timeout: Option<Duration>,
    progress_routes: Arc<ProgressRoutes>,
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
        client_config: ClientConfig,
        request_timeout: Option<Duration>,
    ) -> Result<Self, ClientInitializeError>
    where
        T: Transport<RoleClient> + 'static,
    {
        let progress_routes = Arc::new(ProgressRoutes::default());
        let transport = ProgressRelayTransport::new(transport, Arc::clone(&progress_routes));
        let shutdown = CancellationToken::new();
        // Boxed as `Send` here, where the types are concrete: left to async-trait's inference,
        // rustc fails to prove rmcp's handshake future `Send` for every lifetime.
        let handshake: Pin<Box<dyn Future<Output = _> + Send>> = Box::pin(
            rmcp::service::serve_client_with_ct(client_config, transport, shutdown.clone()),
        );
        let running = handshake.await?;
        let peer = running.peer().clone();

        let (ended_sender, ended) = watch::channel(None);
        let watched_server = server_id.clone();
        tokio::spawn(async move {
            let description = match running.waiting().await {
                Ok(QuitReason::Closed) => "the server closed the connection".to_owned(),
                Ok(QuitReason::Cancelled) => "the session was closed by the gateway".to_owned(),
                Ok(QuitReason::JoinError(error)) | Err(error) => {
                    format!("the session's task failed: {error}")
                }
                Ok(other) => format!("the session ended: {other:?}"),
            };
            tracing::debug!(server = %watched_server, %description, "mcp session ended");
            let _ = ended_sender.send(Some(ExitStatusInfo {
                description,
                ..Default::default()
            }));
        });

        Ok(Self {
            server_id,
            peer,
            request_timeout,
            progress_routes,
            _shutdown_on_drop: shutdown.clone().drop_guard(),
            shutdown,
            closed_by_gateway: AtomicBool::new(false),
            ended,
        })
    }

    /// The `serverInfo` the upstream reported in its `initialize` answer, as JSON.
    pub fn server_info(&self) -> Option<serde_json::Value> {
        let info = self.peer.peer_info()?;
        serde_json::to_value(info.server_info.as_ref()?).ok()
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
        let handle = self
            .peer
            .send_request_with_option(request, self.request_options())
            .await
            .map_err(|error| self.session_error(error, method))?;
        handle
            .await_response()
            .await
            .map_err(|error| self.session_error(error, method))
    }

    fn ensure_open(&self) -> Result<(), SessionError> {
        if self.closed_by_gateway.load(Ordering::Acquire) {
            return Err(closed_error());
        }
        Ok(())
    }

    fn session_error(&self, error: ServiceError, method: &str) -> SessionError {
        match error {
            ServiceError::McpError(data) => SessionError::new(
                SessionErrorKind::Protocol { code: data.code.0 },
                format!(
                    "the server answered `{method}` with JSON-RPC error {}: {}",
                    data.code.0, data.message
                ),
            ),
            ServiceError::Timeout { timeout } => SessionError::timeout(format!(
                "the server did not answer `{method}` within {timeout:?}; the request was \
                 cancelled"
            )),
            ServiceError::Cancelled { .. } => cancelled_error(),
            _ if self.closed_by_gateway.load(Ordering::Acquire) => closed_error(),
            ServiceError::TransportClosed => SessionError::transport(format!(
                "the connection to the server closed before it answered `{method}` ({}); its \
                 stderr in the logs may say why",
                self.end_description()
                    .unwrap_or_else(|| "the server stopped responding".into())
            )),
            ServiceError::TransportSend(error) => SessionError::transport(format!(
                "sending `{method}` to the server failed: {error}; its stderr in the logs may say \
                 why"
            )),
            ServiceError::UnexpectedResponse => SessionError::transport(format!(
                "the server answered `{method}` with a result of the wrong type"
            )),
            other => SessionError::transport(format!("`{method}` failed: {other}")),
        }
    }

    fn end_description(&self) -> Option<String> {
        self.ended
            .borrow()
            .as_ref()
            .map(|exit| exit.description.clone())
    }

    /// Tells the server to stop working on `request_id`. The caller has gone already, so a
    /// server that cannot be told in time is not waited for.
    async fn cancel_upstream(&self, request_id: RequestId) {
        let notice = CancelledNotificationParam::new(
            Some(request_id),
            Some("the caller cancelled the request".to_owned()),
        );
        match tokio::time::timeout(CANCEL_NOTICE_GRACE, self.peer.notify_cancelled(notice)).await {
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
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen_cursors = HashSet::new();
        for _page in 0..MAX_TOOL_PAGES {
            let params = PaginatedRequestParams::default().with_cursor(cursor.take());
            let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(params));
            let page = match self.request(request, "tools/list").await? {
                ServerResult::ListToolsResult(page) => page,
                _ => {
                    return Err(SessionError::transport(
                        "the server answered `tools/list` with a result of the wrong type",
                    ));
                }
            };
            tools.reserve(page.tools.len());
            for tool in page.tools {
                let name = tool.name.clone();
                // The domain's tool is the MCP JSON shape, so JSON is the faithful bridge.
                let converted = serde_json::to_value(&tool)
                    .and_then(serde_json::from_value::<Tool>)
                    .map_err(|error| {
                        SessionError::transport(format!(
                            "the server listed tool `{name}` in a shape the gateway cannot read: \
                             {error}"
                        ))
                    })?;
                tools.push(converted);
            }
            match page.next_cursor {
                Some(next) if !next.is_empty() => {
                    if !seen_cursors.insert(next.clone()) {
                        return Err(SessionError::transport(format!(
                            "the server's `tools/list` pagination repeats cursor `{next}`"
                        )));
                    }
                    cursor = Some(next);
                }
                _ => return Ok(tools),
            }
        }
        Err(SessionError::transport(format!(
            "the server's `tools/list` pagination did not end within {MAX_TOOL_PAGES} pages"
        )))
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
        let mut params = CallToolRequestParams::new(call.name);
        params.arguments = call.arguments;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = self
            .peer
            .send_cancellable_request(request, self.request_options())
            .await
            .map_err(|error| self.session_error(error, "tools/call"))?;
        let request_id = handle.id.clone();
        // rmcp puts a progress token on every request; routing it is what makes it ours.
        let _progress_registration = ctx.progress.map(|handler| {
            self.progress_routes
                .register(handle.progress_token.clone(), handler)
        });

        let response = handle.await_response();
        tokio::pin!(response);
        let result = tokio::select! {
            biased;
            result = &mut response => result,
            () = ctx.cancellation.cancelled() => {
                self.cancel_upstream(request_id).await;
                return Err(cancelled_error());
            }
        };
        let result = result.map_err(|error| self.session_error(error, "tools/call"))?;
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

    async fn close(&self) {
        self.closed_by_gateway.store(true, Ordering::Release);
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
