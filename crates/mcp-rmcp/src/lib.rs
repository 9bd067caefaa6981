//! MCP protocol sessions for mcpgw on rmcp, the official Rust SDK (an adapter).
//!
//! [`RmcpStdioConnector`] implements the domain's [`StdioConnector`] port: it runs the MCP client
//! protocol (the `initialize` handshake, then requests) over the two byte streams of a server
//! that some [`ProcessSpawner`] started, and hands back an [`McpSession`]. The session follows
//! `tools/list` pagination, relays progress, cancels upstream requests whose caller gave up, and
//! reports when the connection ends.
//!
//! This crate speaks the protocol and nothing else: it must never start, signal or wait for
//! processes or containers (the runners do that), and it must never depend on another adapter
//! crate.
//!
//! # Example
//!
//! Connecting to a server that a process spawner started. Not run as a test: it starts a
//! process (`uvx mcp-server-time`), which a test machine may not have.
//!
//! ```rust,no_run
//! use std::process::Stdio;
//!
//! use mcpgw_core::{ByteStreams, ServerId, ServerOutput, StdioConnector as _};
//! use mcpgw_mcp_rmcp::{RmcpStdioConnector, StdioConnectorSettings};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // In the gateway a runner starts the process; here, tokio does.
//! let mut child = tokio::process::Command::new("uvx")
//!     .arg("mcp-server-time")
//!     .stdin(Stdio::piped())
//!     .stdout(Stdio::piped())
//!     .spawn()?;
//! let streams = ByteStreams {
//!     to_server: Box::pin(child.stdin.take().expect("piped stdin")),
//!     from_server: ServerOutput::stream(child.stdout.take().expect("piped stdout")),
//! };
//! let connector = RmcpStdioConnector::new(StdioConnectorSettings::default());
//! let session = connector.connect(&ServerId::parse("time")?, streams).await?;
//! let tools = session.list_tools().await?;
//! assert!(tools.iter().any(|tool| tool.name == "get_current_time"));
//! session.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! [`StdioConnector`]: mcpgw_core::StdioConnector
//! [`ProcessSpawner`]: mcpgw_core::ProcessSpawner
//! [`McpSession`]: mcpgw_core::McpSession

mod caller_sessions;
mod direct;
mod http_service;
mod input_required;
mod link;
mod local_set;
mod progress;
mod remote;
mod resumable;
mod server;
mod session;
mod session_ids;
mod stdio;
mod token_exchange;

pub use caller_sessions::{MAX_CALLER_SESSIONS, TokenExchangeSession};
pub use http_service::{McpHttpBody, McpHttpHandler, McpHttpSettings, streamable_http_handler};
pub use local_set::on_local_set;
pub use remote::{RemoteLauncher, RemoteSettings};
pub use server::{
    CANCELLED_ERROR_CODE, DEFAULT_TOOLS_PAGE_SIZE, DownstreamError, GatewayMcpServer,
    McpServerSettings, RATE_LIMITED_ERROR_CODE, TIMEOUT_ERROR_CODE, caller_from_extensions,
    jsonrpc_error, serve_connection, serve_stdio,
};
pub use session::RmcpSession;
pub use stdio::{RmcpStdioConnector, StdioConnectorSettings};
