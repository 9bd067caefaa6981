//! Tools and tool calls as the domain sees them.
//!
//! A tool is kept in the MCP `Tool` object's own JSON shape (camelCase), because clients rely on
//! it verbatim; results pass through as JSON so that nothing an upstream says is lost on the way.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

/// An MCP tool definition with its original (unprefixed) name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default = "empty_object_schema")]
    pub input_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
}

fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object"})
}

impl Tool {
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            title: None,
            description: None,
            input_schema: empty_object_schema(),
            output_schema: None,
            annotations: None,
        }
    }

    #[must_use]
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    #[must_use]
    pub fn with_input_schema(mut self, schema: Value) -> Self {
        self.input_schema = schema;
        self
    }
}

/// A call of one tool of one server.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub name: String,
    pub arguments: Option<Map<String, Value>>,
}

/// The upstream's answer to a call: the MCP `CallToolResult` object as JSON. `is_error` marks a
/// tool-level error, which is an answer, not a failure of the server.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallOutcome {
    pub result: Value,
    pub is_error: bool,
}

impl ToolCallOutcome {
    /// Whether the server answered with a 2026-07-28 `InputRequiredResult` (SEP-2322): it needs
    /// answers from the client (`inputRequests`) before the call can complete, and the client
    /// retries the call with them. See [`InputRound`].
    pub fn is_input_required(&self) -> bool {
        is_input_required(&self.result)
    }
}

/// Whether an MCP result (of `tools/call`, `prompts/get` or `resources/read`) is an
/// `InputRequiredResult`.
pub fn is_input_required(result: &Value) -> bool {
    result.get("resultType").and_then(Value::as_str) == Some(INPUT_REQUIRED)
}

/// The `resultType` of an `InputRequiredResult`.
pub const INPUT_REQUIRED: &str = "input_required";

/// A request's part in the 2026-07-28 era's multi round-trip exchange (SEP-2322).
///
/// A server that needs something from the client mid-request (an elicitation, a sampling, the
/// client's roots) answers with an `InputRequiredResult`: its questions (`inputRequests`) and
/// an opaque `requestState`. The client asks its user or model, then sends the same request
/// again with the answers (`inputResponses`) and the state echoed back.
///
/// A request carries an `InputRound` when its caller speaks that era, so the server may answer
/// it that way; the round of a retry carries the answers and the server's own state (the
/// gateway's envelope around it already checked and removed). `None` marks a caller of the
/// `initialize` era, to whom a server asks its questions mid-call instead.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InputRound {
    /// The `inputResponses` of a retry, keyed as the server keyed its `inputRequests`.
    pub responses: Option<Value>,
    /// The `requestState` of a retry, as the server wrote it.
    pub state: Option<String>,
}

/// A progress notification from an upstream, relayed to whoever made the call.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressUpdate {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

pub type ProgressHandler = Arc<dyn Fn(ProgressUpdate) + Send + Sync>;

/// Per-call context: cancellation from the caller, where progress goes, who is calling, and
/// the way back to the caller for what the server sends it mid-call.
#[derive(Clone, Default)]
pub struct CallContext {
    pub cancellation: CancellationToken,
    pub progress: Option<ProgressHandler>,
    pub principal: Option<String>,
    /// The caller's access token, for a remote server that exchanges it for one of its own
    /// (see [`crate::SubjectToken`]); `None` for callers that authenticated otherwise.
    pub subject_token: Option<crate::SubjectToken>,
    /// The `_meta` key under which the request carries `principal`
    /// ([`crate::ServerSpec::caller_meta`]); set by the server manager from the server's
    /// definition.
    pub caller_meta: Option<std::sync::Arc<String>>,
    /// Where the server's requests and log messages during this call go (see
    /// [`crate::relay`]); `None` for a caller that can be sent nothing.
    pub relay: Option<crate::relay::ClientRelay>,
    /// `Some` when the caller speaks the 2026-07-28 era and may be answered with an
    /// input-required result; see [`InputRound`].
    pub input: Option<InputRound>,
    /// Whether the caller declared the tasks extension (see [`crate::task`]): then a server of
    /// the 2026-07-28 era may answer the call with a task.
    pub tasks: bool,
    /// The trace this call belongs to: the span the upstream request continues (passed on in
    /// `_meta` and, to remote servers, as HTTP headers). `None` when the call carries no trace.
    pub trace: Option<crate::trace::TraceContext>,
}

impl std::fmt::Debug for CallContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallContext")
            .field("cancelled", &self.cancellation.is_cancelled())
            .field("progress", &self.progress.is_some())
            .field("principal", &self.principal)
            .field("subject_token", &self.subject_token)
            .field("caller_meta", &self.caller_meta)
            .field("relay", &self.relay)
            .field("input", &self.input)
            .field("tasks", &self.tasks)
            .field("trace", &self.trace)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_use_the_mcp_wire_names() {
        let tool = Tool::new("echo").with_description("echoes");
        let json = serde_json::to_value(&tool).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name": "echo", "description": "echoes",
                               "inputSchema": {"type": "object"}})
        );
        let back: Tool = serde_json::from_value(json).unwrap();
        assert_eq!(back, tool);
    }
}
