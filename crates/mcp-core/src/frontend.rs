//! The driving port of the data plane: what an MCP front end (Streamable HTTP, stdio) calls.
//!
//! The application layer implements [`McpFrontend`] over every managed server: one aggregated,
//! namespaced tool list, and calls routed to the server that owns each tool. Protocol adapters
//! (the MCP server side on rmcp, say) depend on this trait only, so they never know how servers
//! are managed.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};
use tokio::sync::watch;

use crate::tool::{CallContext, Tool, ToolCallOutcome};

/// Who is calling, as far as the front end knows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    /// The authenticated principal (`user:alice`, ...), when authentication is on.
    pub principal: Option<String>,
    /// The groups the credential vouched for, as `group:<name>` principals (from a token's
    /// groups claim).
    pub groups: Vec<String>,
    /// The tenant the request runs in (from a token's tenant claim).
    pub tenant: Option<String>,
    /// A role the credential itself carries (an API key made with a role).
    pub key_role: Option<String>,
    /// The client's network address (behind trusted proxies, the forwarded one): what an
    /// anonymous caller is told apart by, for rate limits.
    pub address: Option<std::net::IpAddr>,
    /// The scopes of the OAuth access token the caller presented, when its issuer holds
    /// tokens to their scopes; `None` when the caller's roles alone decide.
    pub token_scopes: Option<Arc<CallerScopes>>,
    /// The access token the caller authenticated with, when it was one: what a remote server
    /// configured for token exchange receives a token of its own for, on this caller's behalf.
    /// Never sent anywhere itself.
    pub subject_token: Option<SubjectToken>,
}

/// A caller's access token, kept only to be exchanged (RFC 8693) for a token of an upstream.
/// It never shows itself: `Debug` prints a placeholder, and there is no `Display`.
/// One pointer wide, as it travels with every call.
#[derive(Clone, PartialEq, Eq)]
pub struct SubjectToken(Arc<String>);

impl SubjectToken {
    pub fn new(token: &str) -> Self {
        Self(Arc::new(token.to_owned()))
    }

    /// The token itself, for the request that exchanges it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SubjectToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SubjectToken(<redacted>)")
    }
}

/// What an access token's scopes let its holder do, carried with the caller so that every
/// decision made for it applies them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallerScopes {
    /// The scopes the token carried, as it carried them (for messages).
    pub scopes: Vec<String>,
    /// What they cover, in the authorization layer's own words (`mcp:tools`,
    /// `mcp:tools:<id>`, `mcp:admin`, `role:<name>`).
    pub covers: Vec<String>,
}

impl Caller {
    /// A caller known by its principal only.
    pub fn principal(principal: impl Into<String>) -> Self {
        Self {
            principal: Some(principal.into()),
            ..Self::default()
        }
    }
}

/// How many times servers announced that their prompts, or their resources, changed
/// (`notifications/prompts/list_changed`, `notifications/resources/list_changed`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListChanges {
    pub prompts: u64,
    pub resources: u64,
}

/// Why a front-end request failed, in terms a protocol adapter can map to its own errors.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrontendErrorKind {
    /// No tool, prompt or resource of that name is exposed to this caller.
    UnknownName,
    /// The arguments were refused before reaching a server.
    InvalidArguments,
    /// The server owning the name could not be started or reached.
    Unavailable,
    /// The server did not answer within the allowed time; the upstream request was cancelled.
    Timeout,
    /// The caller cancelled.
    Cancelled,
    /// The upstream answered with a JSON-RPC error; the code is passed on.
    Upstream { code: i32 },
    /// Too many calls; retry after the given number of milliseconds.
    RateLimited { retry_after_ms: u64 },
}

impl FrontendErrorKind {
    /// The kind as a short, stable word (a span's `error.type`); an unknown name is
    /// `unknown_name` whatever was looked up.
    pub fn as_str(&self) -> &'static str {
        match self {
            FrontendErrorKind::UnknownName => "unknown_name",
            FrontendErrorKind::InvalidArguments => "invalid_arguments",
            FrontendErrorKind::Unavailable => "unavailable",
            FrontendErrorKind::Timeout => "timeout",
            FrontendErrorKind::Cancelled => "cancelled",
            FrontendErrorKind::Upstream { .. } => "upstream_error",
            FrontendErrorKind::RateLimited { .. } => "rate_limited",
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct FrontendError {
    pub kind: FrontendErrorKind,
    pub message: String,
    /// The `data` of an upstream's JSON-RPC error, for [`FrontendErrorKind::Upstream`].
    pub data: Option<Value>,
}

impl FrontendError {
    pub fn new(kind: FrontendErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            data: None,
        }
    }

    #[must_use]
    pub fn with_data(mut self, data: Option<Value>) -> Self {
        self.data = data;
        self
    }

    pub fn unknown(what: &str, name: &str) -> Self {
        Self::new(
            FrontendErrorKind::UnknownName,
            format!("unknown {what}: {name}"),
        )
    }
}

/// The aggregated view of every managed server that an MCP client sees.
///
/// Contract for implementors:
/// - `tools` is cheap (a cached list) and never starts or contacts a server.
/// - Names are unique within each list; `call_tool` accepts the names `tools` lists for that
///   caller, and may accept more (a namespaced name of a tool that is not known yet, which it
///   learns by starting its server; another spelling of a listed tool), but only of tools that
///   caller may use. It answers [`FrontendErrorKind::UnknownName`] for every other name, so that
///   a tool the caller may not use is indistinguishable from one that does not exist.
/// - `changes` moves whenever the list of tools (or prompts, or resources) may have changed.
#[async_trait]
pub trait McpFrontend: Send + Sync {
    fn tools(&self, caller: &Caller) -> Arc<Vec<Tool>>;

    async fn call_tool(
        &self,
        caller: &Caller,
        name: &str,
        arguments: Option<Map<String, Value>>,
        ctx: CallContext,
    ) -> Result<ToolCallOutcome, FrontendError>;

    fn changes(&self) -> watch::Receiver<u64>;

    /// Waits (briefly, bounded by the implementation) until tool lists that are being learned
    /// right now are known, so that a client listing tools just after the gateway started sees
    /// them. Never waits on a server that is slow to answer for longer than that bound.
    async fn settle(&self) {}

    /// MCP `Prompt` objects with namespaced names.
    async fn prompts(&self, caller: &Caller) -> Vec<Value>;

    /// `prompts/get` of a listed prompt: the `GetPromptResult` JSON, or an
    /// `InputRequiredResult` for a caller that speaks the 2026-07-28 era (`ctx.input` is
    /// `Some`); what its server asks meanwhile goes to `ctx.relay`.
    async fn get_prompt(
        &self,
        caller: &Caller,
        name: &str,
        arguments: Option<Map<String, Value>>,
        ctx: CallContext,
    ) -> Result<Value, FrontendError>;

    /// MCP `Resource` objects with namespaced names (URIs unchanged).
    async fn resources(&self, caller: &Caller) -> Vec<Value>;

    /// MCP `ResourceTemplate` objects with namespaced names.
    async fn resource_templates(&self, caller: &Caller) -> Vec<Value>;

    /// `resources/read`, with `ctx` as for [`McpFrontend::get_prompt`].
    async fn read_resource(
        &self,
        caller: &Caller,
        uri: &str,
        ctx: CallContext,
    ) -> Result<Value, FrontendError>;

    /// `completion/complete` (`params` as MCP's `CompleteRequestParams` JSON), answered by the
    /// server that owns the reference: a prompt by the name this front end lists it under
    /// (`ref/prompt`), a resource template by its `uriTemplate` (`ref/resource`). A reference
    /// to nothing the caller may use is [`FrontendErrorKind::UnknownName`]. This default
    /// completes nothing.
    async fn complete(&self, caller: &Caller, params: Value) -> Result<Value, FrontendError> {
        let _ = (caller, params);
        Ok(empty_completion())
    }

    /// Whether a server behind this front end offers tasks, so that the front end declares the
    /// tasks extension to its clients; `false` in this default.
    fn offers_tasks(&self) -> bool {
        false
    }

    /// `tasks/get`, `tasks/update` or `tasks/cancel` (`method`) of the task `task_id`, as the
    /// call that created it named it (its owners in front, see [`crate::task`]); `params` as
    /// the client wrote them. The result as JSON, with the server's `taskId`. An id that names
    /// no owner this front end routes to is [`FrontendErrorKind::UnknownName`].
    async fn task_request(
        &self,
        caller: &Caller,
        method: &str,
        task_id: &str,
        params: Value,
    ) -> Result<Value, FrontendError>;

    /// Moves whenever a server announces that its prompts or its resources changed, so that a
    /// protocol adapter can tell its clients; `None` when this front end cannot tell, as in
    /// this default.
    fn list_changes(&self) -> Option<watch::Receiver<ListChanges>> {
        None
    }

    /// `logging/setLevel` from a client: the servers it may use are asked to log at `level`
    /// (an RFC 5424 name: `debug`, `info`, ...) or more verbosely. Their log messages reach a
    /// client through the relay of its calls (see [`crate::relay`]), which filters by each
    /// client's own level. This default asks nobody.
    async fn set_logging_level(&self, caller: &Caller, level: &str) {
        let _ = (caller, level);
    }

    /// `resources/subscribe`: the updates of `uri` that the server owning it announces, until
    /// the subscription is dropped (which unsubscribes). A resource the caller may not read is
    /// [`FrontendErrorKind::UnknownName`]; one whose server offers no subscriptions is
    /// [`FrontendErrorKind::Upstream`] -32601, as this default answers for every URI.
    async fn subscribe_resource(
        &self,
        caller: &Caller,
        uri: &str,
    ) -> Result<ResourceSubscription, FrontendError> {
        let _ = caller;
        Err(FrontendError::new(
            FrontendErrorKind::Upstream { code: -32601 },
            format!("resource subscriptions are not offered for {uri}"),
        ))
    }
}

/// A `CompleteResult` with no values: what a server without completions answers.
pub fn empty_completion() -> Value {
    serde_json::json!({"completion": {"values": [], "total": 0, "hasMore": false}})
}

/// One caller's subscription to the updates of one resource. Dropping it ends the
/// subscription: the owner of the resource is told once nobody else subscribes to it.
pub struct ResourceSubscription {
    uri: String,
    updates: tokio::sync::broadcast::Receiver<String>,
    _release: Box<dyn Send + Sync>,
}

impl ResourceSubscription {
    /// A subscription to `uri` whose updates come from `updates` (which may carry other URIs
    /// too); `release` is dropped when the subscription is.
    pub fn new(
        uri: impl Into<String>,
        updates: tokio::sync::broadcast::Receiver<String>,
        release: impl Send + Sync + 'static,
    ) -> Self {
        Self {
            uri: uri.into(),
            updates,
            _release: Box::new(release),
        }
    }

    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// Waits for the next update of the resource: `true` for an update, `false` once the
    /// server can announce no more (it stopped). A reader that fell behind the server's
    /// announcements gets one `true` for all it missed, which may include none of its own:
    /// an update says "read it again", never what changed.
    pub async fn updated(&mut self) -> bool {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            match self.updates.recv().await {
                Ok(uri) if uri == self.uri => return true,
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => return true,
                Err(RecvError::Closed) => return false,
            }
        }
    }
}

impl std::fmt::Debug for ResourceSubscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceSubscription")
            .field("uri", &self.uri)
            .finish_non_exhaustive()
    }
}
