//! The [`StdioConnector`] port on rmcp: MCP over a server's stdin and stdout.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_core::{ByteStreams, LaunchError, McpSession, ServerId, StdioConnector};
use rmcp::model::ClientConfig;
use rmcp::service::ClientInitializeError;

use crate::session::{RmcpSession, SessionSetup};

/// How the connector talks to servers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StdioConnectorSettings {
    /// How long a server may take to answer `initialize`. Default 30 s.
    pub initialize_timeout: Duration,
    /// How long any one request may wait for its answer before it is cancelled and fails with
    /// [`mcpgw_core::SessionErrorKind::Timeout`]. Default none: callers bound their own calls.
    pub request_timeout: Option<Duration>,
    /// The `clientInfo.name` sent in `initialize`. Default `mcpgw`.
    pub client_name: String,
    /// The `clientInfo.version` sent in `initialize`. Default this crate's version.
    pub client_version: String,
}

impl Default for StdioConnectorSettings {
    fn default() -> Self {
        Self {
            initialize_timeout: Duration::from_secs(30),
            request_timeout: None,
            client_name: crate::session::DEFAULT_CLIENT_NAME.to_owned(),
            client_version: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }
}

impl StdioConnectorSettings {
    #[must_use]
    pub fn with_initialize_timeout(mut self, timeout: Duration) -> Self {
        self.initialize_timeout = timeout;
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

/// Runs the MCP client protocol over a stdio server's byte streams, on rmcp.
#[derive(Debug, Clone, Default)]
pub struct RmcpStdioConnector {
    settings: StdioConnectorSettings,
}

impl RmcpStdioConnector {
    pub fn new(settings: StdioConnectorSettings) -> Self {
        Self { settings }
    }

    pub fn settings(&self) -> &StdioConnectorSettings {
        &self.settings
    }

    /// Like [`StdioConnector::connect`], with the concrete session type.
    pub async fn connect_session(
        &self,
        server_id: &ServerId,
        streams: ByteStreams,
    ) -> Result<RmcpSession, LaunchError> {
        let ByteStreams {
            to_server,
            from_server,
        } = streams;
        let setup = SessionSetup {
            client_config: self.settings.client_config(),
            request_timeout: self.settings.request_timeout,
            // A stdio session ends by itself when the server's stdout closes.
            connection_lost: None,
            failure_hint: "its stderr in the logs may say why".to_owned(),
        };
        let handshake =
            RmcpSession::establish_linked(server_id.clone(), to_server, from_server, setup);
        // On timeout the handshake future is dropped, and the streams with it, which closes the
        // server's stdin.
        match tokio::time::timeout(self.settings.initialize_timeout, handshake).await {
            Ok(Ok(session)) => Ok(session),
            Ok(Err(error)) => Err(handshake_error(error)),
            Err(_) => Err(LaunchError::Timeout(self.settings.initialize_timeout)),
        }
    }
}

#[async_trait]
impl StdioConnector for RmcpStdioConnector {
    async fn connect(
        &self,
        server_id: &ServerId,
        streams: ByteStreams,
    ) -> Result<Arc<dyn McpSession>, LaunchError> {
        let session = self.connect_session(server_id, streams).await?;
        Ok(Arc::new(session))
    }
}

fn handshake_error(error: ClientInitializeError) -> LaunchError {
    let message = match error {
        ClientInitializeError::ConnectionClosed(_) => {
            "the server closed its stdout before answering `initialize`; check the command and \
             its stderr in the logs"
                .to_owned()
        }
        // The inner error alone: the wrapper's display names rmcp's generic transport types.
        ClientInitializeError::TransportError { error, .. } => format!(
            "the server closed its stdin before the `initialize` handshake completed ({}); it \
             probably exited: check the command and its stderr in the logs",
            error.error
        ),
        ClientInitializeError::JsonRpcError(data) => format!(
            "the server rejected `initialize` with JSON-RPC error {}: {}",
            data.code.0, data.message
        ),
        other => format!("{other}; check that the command is an MCP stdio server"),
    };
    LaunchError::Handshake(message)
}
