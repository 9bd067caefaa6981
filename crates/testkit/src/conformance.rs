//! The server side of the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`), as a small stdio MCP server: the gateway fronts it
//! in the conformance test, so that the suite's scenarios exercise the gateway's MCP endpoint.
//! The `mcpgw-conformance-server` binary is a thin `main` around [`serve_stdio`].
//!
//! Every name and text below is the one the suite's scenario descriptions ask for; they are
//! answered verbatim, so that a test can tell a real answer from an error that happens to pass
//! a lenient check.
//!
//! Tools:
//! - `test_simple_text`: the text `This is a simple text response for testing.`
//! - `test_image_content`: a 1x1 red PNG (`image/png`).
//! - `test_audio_content`: a short silent WAV (`audio/wav`).
//! - `test_embedded_resource`: the resource `test://embedded-resource` (`text/plain`,
//!   `This is an embedded resource content.`).
//! - `test_multiple_content_types`: the text `Multiple content types test:`, the PNG, and the
//!   resource `test://mixed-content-resource` (`application/json`).
//! - `test_error_handling`: an `isError` result with the text
//!   `This tool intentionally returns an error for testing`.
//! - `test_tool_with_progress`: progress 0, 50 and 100 of 100, 50 ms apart, when the request
//!   carries a progress token; answers `Progress test completed`.
//! - `test_tool_with_logging`: three `info` log messages (`Tool execution started`,
//!   `Tool processing data`, `Tool execution completed`), 50 ms apart, unless the client set a
//!   level above `info`.
//! - `test_sampling {prompt}`, `test_elicitation {message}`,
//!   `test_elicitation_sep1034_defaults`, `test_elicitation_sep1330_enums`: ask the client
//!   (`sampling/createMessage`, `elicitation/create`) and answer what it said; a client that
//!   did not declare the capability gets an `isError` result saying so.
//! - `test_missing_capability`: needs the client's `sampling` capability; without it, JSON-RPC
//!   error -32021 with `data.requiredCapabilities = {"sampling": {}}`.
//! - `test_logging_tool`: one `info` log message, only when the client set a level.
//! - `test_streaming_elicitation`: `elicitation/create` when the client declared elicitation,
//!   else a plain text answer saying it was skipped.
//! - `test_header_parameter {region}`: answers `region`; its schema marks it `x-mcp-header:
//!   Region` (SEP-2243), so 2026-07-28 clients send it as the header `Mcp-Param-Region` too.
//! - `json_schema_2020_12_tool`: an input schema with JSON Schema 2020-12 keywords (`$schema`,
//!   `$defs`, `$anchor`, `$ref`, `allOf`/`anyOf`, `if`/`then`/`else`, `additionalProperties`);
//!   answers its arguments as JSON.
//! - `test_trigger_tool_change`: adds the tool `test_tool_added_by_trigger`, or removes it when
//!   it is there, and sends `notifications/tools/list_changed`: every call changes the list.
//!
//! Prompts: `test_simple_prompt`, `test_prompt_with_arguments {arg1, arg2}`,
//! `test_prompt_with_embedded_resource {resourceUri}`, `test_prompt_with_image`.
//! Completion: values for `arg1`/`arg2` of `test_prompt_with_arguments` that start with the
//! typed prefix.
//! Resources: `test://static-text`, `test://static-binary` (the PNG), `test://watched-resource`
//! (subscribable); the template `test://template/{id}/data`. An unknown URI is JSON-RPC error
//! -32002 with `data.uri`. `logging/setLevel` sets the level for the connection.
//!
//! Not served: the 2026-07-28 input-required tools (`test_input_required_result_*`) and the
//! tasks and skills extensions. They need a 2026-07-28 connection, and a stdio upstream of
//! the gateway is always an `initialize`-era connection.
//!
//! [`conformance_server_binary`] finds (or builds) the binary for tests of other packages.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use rmcp::ServerHandler;
use rmcp::ServiceExt as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities,
    CompleteRequestParams, CompleteResult, ErrorData, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, ServerConfig, ServerNotification, ServerRequest,
    SubscribeRequestParams, UnsubscribeRequestParams,
};
// The 2025 protocol's logging, which rmcp marks deprecated (SEP-2577), is what the
// `logging-set-level` and `tools-call-with-logging` scenarios test.
#[allow(deprecated)]
use rmcp::model::SetLevelRequestParams;
use rmcp::service::{Peer, RequestContext, RoleServer};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

/// The `serverInfo.name` of the conformance server.
pub const CONFORMANCE_SERVER_NAME: &str = "mcpgw-conformance";

/// The name of the conformance server's binary target.
pub const CONFORMANCE_BINARY_NAME: &str = "mcpgw-conformance-server";

/// Environment variable that points tests at a conformance server built elsewhere.
pub const CONFORMANCE_BINARY_ENV: &str = "MCPGW_CONFORMANCE_SERVER";

/// The exact text `tools-call-simple-text` asks for.
pub const SIMPLE_TEXT: &str = "This is a simple text response for testing.";
/// The exact text `tools-call-error` asks for.
pub const ERROR_TEXT: &str = "This tool intentionally returns an error for testing";

/// A 1x1 red PNG.
const PNG_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR42mP4z8AAAAMBAQD3A0FDAAAAAElFTkSuQmCC";
/// Eight samples of silence, 8 kHz mono 8-bit PCM.
const WAV_BASE64: &str = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==";

/// The pause between the steps of the progress and logging tools; the suite asks for ~50 ms
/// so that clients see the notifications arrive one by one.
const STEP_PAUSE: Duration = Duration::from_millis(50);

const STATIC_TEXT_URI: &str = "test://static-text";
const STATIC_BINARY_URI: &str = "test://static-binary";
const WATCHED_URI: &str = "test://watched-resource";
const TEMPLATE_URI: &str = "test://template/{id}/data";
const TEMPLATE_PREFIX: &str = "test://template/";
const TEMPLATE_SUFFIX: &str = "/data";
const ADDED_BY_TRIGGER: &str = "test_tool_added_by_trigger";

/// The MCP log levels in increasing severity, as the wire spells them. Kept as strings because
/// rmcp marks its own level type deprecated (SEP-2577), while the 2025 protocol still has it.
const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// Serves the conformance server on this process's stdin and stdout until stdin closes.
pub async fn serve_stdio() -> std::io::Result<()> {
    let running = match ConformanceServer::default()
        .serve(rmcp::transport::stdio())
        .await
    {
        Ok(running) => running,
        // A client that leaves before `initialize` is not the server's failure.
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
        Err(error) => return Err(std::io::Error::other(error)),
    };
    running.waiting().await.map_err(std::io::Error::other)?;
    Ok(())
}

#[derive(Clone, Default)]
struct ConformanceServer {
    state: Arc<ConnectionState>,
}

#[derive(Default)]
struct ConnectionState {
    /// The index into [`LOG_LEVELS`] that the client set; `None` until it sets one.
    log_level: Mutex<Option<usize>>,
    tool_added_by_trigger: AtomicBool,
}

impl ConnectionState {
    fn log_level(&self) -> Option<usize> {
        *self
            .log_level
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Converts this module's JSON literals to rmcp's types. The literals are fixed, so a failure
/// is a bug of this file, reported as an internal error rather than a panic.
fn from_json<T: DeserializeOwned>(value: Value) -> Result<T, ErrorData> {
    serde_json::from_value(value).map_err(|error| {
        ErrorData::internal_error(
            format!("conformance server built invalid mcp: {error}"),
            None,
        )
    })
}

fn text_result(text: &str) -> CallToolResult {
    CallToolResult::success(vec![rmcp::model::ContentBlock::text(text)])
}

fn error_result(text: &str) -> CallToolResult {
    CallToolResult::error(vec![rmcp::model::ContentBlock::text(text)])
}

fn tool(name: &str, description: &str, input_schema: Value) -> Value {
    json!({"name": name, "description": description, "inputSchema": input_schema})
}

fn no_arguments() -> Value {
    json!({"type": "object", "properties": {}})
}

fn tool_definitions(with_trigger_tool: bool) -> Vec<Value> {
    let string_argument = |name: &str, description: &str| {
        json!({"type": "object",
               "properties": {name: {"type": "string", "description": description}},
               "required": [name]})
    };
    let mut tools = vec![
        tool("test_simple_text", "Answers a fixed text.", no_arguments()),
        tool("test_image_content", "Answers a PNG image.", no_arguments()),
        tool("test_audio_content", "Answers a WAV sound.", no_arguments()),
        tool(
            "test_embedded_resource",
            "Answers an embedded text resource.",
            no_arguments(),
        ),
        tool(
            "test_multiple_content_types",
            "Answers text, an image and an embedded resource.",
            no_arguments(),
        ),
        tool(
            "test_error_handling",
            "Always answers a tool-level error.",
            no_arguments(),
        ),
        tool(
            "test_tool_with_progress",
            "Reports progress 0, 50 and 100 of 100.",
            no_arguments(),
        ),
        tool(
            "test_tool_with_logging",
            "Sends three log messages while it runs.",
            no_arguments(),
        ),
        tool(
            "test_sampling",
            "Asks the client to sample an answer to the prompt.",
            string_argument("prompt", "The prompt to send to the LLM"),
        ),
        tool(
            "test_elicitation",
            "Asks the user for a name and an email address.",
            string_argument("message", "The message to show the user"),
        ),
        tool(
            "test_elicitation_sep1034_defaults",
            "Asks the user with defaults for every primitive type.",
            no_arguments(),
        ),
        tool(
            "test_elicitation_sep1330_enums",
            "Asks the user with every enum schema variant.",
            no_arguments(),
        ),
        tool(
            "test_missing_capability",
            "Needs the client's sampling capability.",
            no_arguments(),
        ),
        tool(
            "test_logging_tool",
            "Logs one message when the client asked for logs.",
            no_arguments(),
        ),
        tool(
            "test_streaming_elicitation",
            "Asks the user for input when the client can be asked.",
            no_arguments(),
        ),
        tool(
            "test_trigger_tool_change",
            "Adds a tool and announces that the tool list changed.",
            no_arguments(),
        ),
        tool(
            "test_header_parameter",
            "Answers its `region`, which Streamable HTTP clients also send as Mcp-Param-Region.",
            json!({"type": "object",
                   "properties": {"region": {"type": "string", "x-mcp-header": "Region",
                                             "description": "Any text"}},
                   "required": ["region"]}),
        ),
        tool(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features",
            json_schema_2020_12(),
        ),
    ];
    if with_trigger_tool {
        tools.push(tool(
            ADDED_BY_TRIGGER,
            "Added by test_trigger_tool_change.",
            no_arguments(),
        ));
    }
    tools
}

/// An input schema with the 2020-12 keywords that SEP-1613 and SEP-2106 say must survive a
/// listing unchanged: `$schema`, `$defs` with an `$anchor`, `$ref`, `allOf`/`anyOf`,
/// `if`/`then`/`else` and `additionalProperties`.
fn json_schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {"$anchor": "addressDef", "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"}
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false
    })
}

fn prompt_definitions() -> Value {
    let argument = |name: &str, description: &str| json!({"name": name, "description": description, "required": true});
    json!([
        {"name": "test_simple_prompt", "description": "A prompt without arguments."},
        {"name": "test_prompt_with_arguments", "description": "A prompt with two arguments.",
         "arguments": [argument("arg1", "First test argument"),
                       argument("arg2", "Second test argument")]},
        {"name": "test_prompt_with_embedded_resource",
         "description": "A prompt that embeds a resource.",
         "arguments": [argument("resourceUri", "URI of the resource to embed")]},
        {"name": "test_prompt_with_image", "description": "A prompt with an image."}
    ])
}

fn resource_definitions() -> Value {
    json!([
        {"uri": STATIC_TEXT_URI, "name": "static-text", "description": "A static text resource.",
         "mimeType": "text/plain"},
        {"uri": STATIC_BINARY_URI, "name": "static-binary",
         "description": "A static binary resource (a PNG image).", "mimeType": "image/png"},
        {"uri": WATCHED_URI, "name": "watched-resource",
         "description": "A resource clients may subscribe to.", "mimeType": "text/plain"}
    ])
}

fn required_string<'a>(
    arguments: &'a Map<String, Value>,
    name: &str,
) -> Result<&'a str, ErrorData> {
    arguments.get(name).and_then(Value::as_str).ok_or_else(|| {
        ErrorData::invalid_params(format!("argument `{name}` must be a string"), None)
    })
}

fn read_result(uri: &str) -> Result<Value, ErrorData> {
    let contents = match uri {
        STATIC_TEXT_URI => json!({"uri": uri, "mimeType": "text/plain",
                                  "text": "This is the content of the static text resource."}),
        STATIC_BINARY_URI => json!({"uri": uri, "mimeType": "image/png", "blob": PNG_BASE64}),
        WATCHED_URI => json!({"uri": uri, "mimeType": "text/plain",
                              "text": "This resource can be watched."}),
        _ => match template_id(uri) {
            Some(id) => json!({"uri": uri, "mimeType": "application/json",
                               "text": json!({"id": id, "templateTest": true,
                                              "data": format!("Data for ID: {id}")}).to_string()}),
            None => {
                return Err(ErrorData::resource_not_found(
                    format!(
                        "no resource {uri}; this server serves test://static-text, test://static-binary, test://watched-resource and test://template/{{id}}/data"
                    ),
                    Some(json!({"uri": uri})),
                ));
            }
        },
    };
    Ok(json!({"contents": [contents]}))
}

/// The `{id}` of `test://template/{id}/data`: one non-empty path segment.
fn template_id(uri: &str) -> Option<&str> {
    let id = uri
        .strip_prefix(TEMPLATE_PREFIX)?
        .strip_suffix(TEMPLATE_SUFFIX)?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

fn prompt_result(name: &str, arguments: &Map<String, Value>) -> Result<Value, ErrorData> {
    let messages = match name {
        "test_simple_prompt" => json!([
            {"role": "user", "content": {"type": "text", "text": "This is a simple prompt for testing."}}
        ]),
        "test_prompt_with_arguments" => {
            let arg1 = required_string(arguments, "arg1")?;
            let arg2 = required_string(arguments, "arg2")?;
            json!([{"role": "user", "content": {"type": "text",
                "text": format!("Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")}}])
        }
        "test_prompt_with_embedded_resource" => {
            let uri = required_string(arguments, "resourceUri")?;
            json!([
                {"role": "user", "content": {"type": "resource", "resource": {
                    "uri": uri, "mimeType": "text/plain",
                    "text": "Embedded resource content for testing."}}},
                {"role": "user", "content": {"type": "text",
                    "text": "Please process the embedded resource above."}}
            ])
        }
        "test_prompt_with_image" => json!([
            {"role": "user", "content": {"type": "image", "data": PNG_BASE64, "mimeType": "image/png"}},
            {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}}
        ]),
        other => {
            return Err(ErrorData::invalid_params(
                format!("unknown prompt: {other}"),
                None,
            ));
        }
    };
    Ok(json!({"messages": messages}))
}

/// Sends a server-to-client request given as JSON and answers the client's result as JSON.
async fn ask_client(peer: &Peer<RoleServer>, request: Value) -> Result<Value, String> {
    let request: ServerRequest =
        serde_json::from_value(request).map_err(|error| error.to_string())?;
    let answer = peer
        .send_request(request)
        .await
        .map_err(|error| error.to_string())?;
    serde_json::to_value(answer).map_err(|error| error.to_string())
}

fn client_capabilities(context: &RequestContext<RoleServer>) -> ClientCapabilities {
    context
        .peer
        .peer_info()
        .map(|info| info.capabilities.clone())
        .unwrap_or_default()
}

fn elicitation_request(message: &str, schema: Value) -> Value {
    json!({"method": "elicitation/create",
           "params": {"message": message, "requestedSchema": schema}})
}

fn sep1034_schema() -> Value {
    json!({"type": "object", "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "default": true}
    }})
}

fn sep1330_schema() -> Value {
    json!({"type": "object", "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "oneOf": [
            {"const": "value1", "title": "First Option"},
            {"const": "value2", "title": "Second Option"},
            {"const": "value3", "title": "Third Option"}]},
        "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                       "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array",
                          "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {"type": "array", "items": {"anyOf": [
            {"const": "value1", "title": "First Choice"},
            {"const": "value2", "title": "Second Choice"},
            {"const": "value3", "title": "Third Choice"}]}}
    }})
}

impl ConformanceServer {
    async fn log(&self, peer: &Peer<RoleServer>, level: usize, message: &str) {
        let threshold = self.state.log_level().unwrap_or(0);
        if level < threshold {
            return;
        }
        let notification = json!({"method": "notifications/message",
            "params": {"level": LOG_LEVELS[level], "logger": "conformance", "data": message}});
        if let Ok(notification) = serde_json::from_value::<ServerNotification>(notification) {
            // A client that stopped listening is no reason to fail the tool.
            let _ = peer.send_notification(notification).await;
        }
    }

    async fn progress(&self, context: &RequestContext<RoleServer>) -> CallToolResult {
        let token = context.meta.get_progress_token();
        for (step, progress) in [0.0, 50.0, 100.0].into_iter().enumerate() {
            if step > 0 {
                tokio::time::sleep(STEP_PAUSE).await;
            }
            if let Some(token) = &token {
                let notification =
                    ProgressNotificationParam::new(token.clone(), progress).with_total(100.0);
                let _ = context.peer.notify_progress(notification).await;
            }
        }
        text_result("Progress test completed")
    }

    async fn logging(&self, peer: &Peer<RoleServer>) -> CallToolResult {
        let info = 1;
        self.log(peer, info, "Tool execution started").await;
        tokio::time::sleep(STEP_PAUSE).await;
        self.log(peer, info, "Tool processing data").await;
        tokio::time::sleep(STEP_PAUSE).await;
        self.log(peer, info, "Tool execution completed").await;
        text_result("Logging test completed")
    }

    async fn sampling(
        &self,
        arguments: &Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let prompt = required_string(arguments, "prompt")?;
        if client_capabilities(context).sampling.is_none() {
            return Ok(error_result(
                "the client did not declare the sampling capability, so it cannot be asked to sample",
            ));
        }
        let request = json!({"method": "sampling/createMessage", "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
            "maxTokens": 100}});
        Ok(match ask_client(&context.peer, request).await {
            Ok(answer) => {
                let text = answer["content"]["text"].as_str().unwrap_or_default();
                text_result(&format!("LLM response: {text}"))
            }
            Err(error) => error_result(&format!("sampling failed: {error}")),
        })
    }

    async fn elicitation(
        &self,
        message: &str,
        schema: Value,
        answer_prefix: &str,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        if client_capabilities(context).elicitation.is_none() {
            return error_result(
                "the client did not declare the elicitation capability, so the user cannot be asked",
            );
        }
        match ask_client(&context.peer, elicitation_request(message, schema)).await {
            Ok(answer) => text_result(&format!(
                "{answer_prefix}action={}, content={}",
                answer["action"].as_str().unwrap_or("unknown"),
                answer.get("content").unwrap_or(&Value::Null)
            )),
            Err(error) => error_result(&format!("elicitation failed: {error}")),
        }
    }

    async fn call(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match name {
            "test_simple_text" => text_result(SIMPLE_TEXT),
            "test_image_content" => from_json(json!({"content": [
                {"type": "image", "data": PNG_BASE64, "mimeType": "image/png"}]}))?,
            "test_audio_content" => from_json(json!({"content": [
                {"type": "audio", "data": WAV_BASE64, "mimeType": "audio/wav"}]}))?,
            "test_embedded_resource" => from_json(json!({"content": [
                {"type": "resource", "resource": {"uri": "test://embedded-resource",
                 "mimeType": "text/plain", "text": "This is an embedded resource content."}}]}))?,
            "test_multiple_content_types" => from_json(json!({"content": [
                {"type": "text", "text": "Multiple content types test:"},
                {"type": "image", "data": PNG_BASE64, "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "test://mixed-content-resource",
                 "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}"}}]}))?,
            "test_error_handling" => error_result(ERROR_TEXT),
            "test_tool_with_progress" => self.progress(context).await,
            "test_tool_with_logging" => self.logging(&context.peer).await,
            "test_sampling" => self.sampling(arguments, context).await?,
            "test_elicitation" => {
                let message = required_string(arguments, "message")?;
                let schema = json!({"type": "object", "properties": {
                    "username": {"type": "string", "description": "User's response"},
                    "email": {"type": "string", "description": "User's email address"}},
                    "required": ["username", "email"]});
                self.elicitation(message, schema, "User response: ", context)
                    .await
            }
            "test_elicitation_sep1034_defaults" => {
                self.elicitation(
                    "Please review your information",
                    sep1034_schema(),
                    "Elicitation completed: ",
                    context,
                )
                .await
            }
            "test_elicitation_sep1330_enums" => {
                self.elicitation(
                    "Please choose your options",
                    sep1330_schema(),
                    "Elicitation completed: ",
                    context,
                )
                .await
            }
            "test_missing_capability" => {
                if client_capabilities(context).sampling.is_none() {
                    return Err(ErrorData::missing_required_client_capability(from_json(
                        json!({"sampling": {}}),
                    )?));
                }
                text_result("the client declared the sampling capability")
            }
            "test_logging_tool" => {
                if self.state.log_level().is_some() {
                    self.log(&context.peer, 1, "test_logging_tool ran").await;
                }
                text_result("Logging tool completed")
            }
            "test_streaming_elicitation" => {
                if client_capabilities(context).elicitation.is_none() {
                    text_result(
                        "elicitation skipped: the client did not declare the elicitation capability",
                    )
                } else {
                    let schema = json!({"type": "object",
                        "properties": {"answer": {"type": "string"}}, "required": ["answer"]});
                    self.elicitation("Please answer", schema, "Elicitation completed: ", context)
                        .await
                }
            }
            "test_header_parameter" => text_result(required_string(arguments, "region")?),
            "json_schema_2020_12_tool" => {
                text_result(&Value::Object(arguments.clone()).to_string())
            }
            "test_trigger_tool_change" => {
                // Toggling makes every call a real change, however often a suite calls it.
                let was_added = self
                    .state
                    .tool_added_by_trigger
                    .fetch_xor(true, Ordering::AcqRel);
                let _ = context.peer.notify_tool_list_changed().await;
                let verb = if was_added { "removed" } else { "added" };
                text_result(&format!("{verb} {ADDED_BY_TRIGGER}"))
            }
            ADDED_BY_TRIGGER if self.state.tool_added_by_trigger.load(Ordering::Acquire) => {
                text_result("added by test_trigger_tool_change")
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool: {other}"),
                    None,
                ));
            }
        })
    }
}

impl ServerHandler for ConformanceServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = json!({
            "tools": {"listChanged": true},
            "prompts": {},
            "resources": {"subscribe": true},
            "logging": {},
            "completions": {}
        });
        let mut config = ServerConfig::new(from_json(capabilities).unwrap_or_default());
        config.server_info =
            rmcp::model::Implementation::new(CONFORMANCE_SERVER_NAME, env!("CARGO_PKG_VERSION"));
        config
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let added = self.state.tool_added_by_trigger.load(Ordering::Acquire);
        from_json(json!({"tools": tool_definitions(added)}))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let result = self.call(&request.name, &arguments, &context).await?;
        Ok(CallToolResponse::Complete(result))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        from_json(json!({"prompts": prompt_definitions()}))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let result: GetPromptResult = from_json(prompt_result(&request.name, &arguments)?)?;
        Ok(GetPromptResponse::Complete(result))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        from_json(json!({"resources": resource_definitions()}))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        from_json(json!({"resourceTemplates": [
            {"uriTemplate": TEMPLATE_URI, "name": "template-data",
             "description": "Data for the id in the URI.", "mimeType": "application/json"}
        ]}))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let result: ReadResourceResult = from_json(read_result(&request.uri)?)?;
        Ok(ReadResourceResponse::Complete(result))
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // The resources never change, so a subscription never produces an update; only the
        // URI is checked.
        read_result(&request.uri).map(drop)
    }

    async fn unsubscribe(
        &self,
        _request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let level = serde_json::to_value(&request)
            .ok()
            .and_then(|params| params["level"].as_str().map(str::to_owned))
            .and_then(|level| LOG_LEVELS.iter().position(|known| *known == level))
            .ok_or_else(|| ErrorData::invalid_params("unknown log level", None))?;
        *self
            .state
            .log_level
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(level);
        Ok(())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let reference = serde_json::to_value(&request.r#ref).unwrap_or_default();
        let candidates: &[&str] = match (
            reference["type"].as_str(),
            reference["name"].as_str(),
            request.argument.name.as_str(),
        ) {
            (Some("ref/prompt"), Some("test_prompt_with_arguments"), "arg1" | "arg2") => {
                &["paris", "park", "party", "test", "testValue"]
            }
            _ => &[],
        };
        let values: Vec<&str> = candidates
            .iter()
            .copied()
            .filter(|value| value.starts_with(request.argument.value.as_str()))
            .collect();
        from_json(
            json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}),
        )
    }
}

/// The path of the `mcpgw-conformance-server` binary, built on first use when it is missing or
/// older than its sources.
///
/// Cargo builds a package's binaries only for that package's own tests, so tests elsewhere
/// call this. It looks next to the running test executable (`target/<profile>/deps/<test>`
/// gives `target/<profile>/mcpgw-conformance-server`) and otherwise runs
/// `cargo build -p mcpgw-testkit --bin mcpgw-conformance-server` once per process.
/// [`CONFORMANCE_BINARY_ENV`] overrides the search.
///
/// # Panics
///
/// When the binary can neither be found nor built: a test that needs it must fail loudly
/// rather than skip.
pub fn conformance_server_binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            crate::binaries::workspace_binary(
                CONFORMANCE_BINARY_NAME,
                CONFORMANCE_BINARY_ENV,
                &["src/conformance.rs", "src/bin/mcpgw-conformance-server.rs"],
            )
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_takes_one_segment() {
        assert_eq!(template_id("test://template/123/data"), Some("123"));
        assert_eq!(template_id("test://template//data"), None);
        assert_eq!(template_id("test://template/1/2/data"), None);
        assert_eq!(template_id("test://template/123"), None);
    }

    #[test]
    fn every_definition_is_valid_mcp() {
        let _: ListToolsResult = from_json(json!({"tools": tool_definitions(true)})).unwrap();
        let _: ListPromptsResult = from_json(json!({"prompts": prompt_definitions()})).unwrap();
        let _: ListResourcesResult =
            from_json(json!({"resources": resource_definitions()})).unwrap();
        for uri in [
            STATIC_TEXT_URI,
            STATIC_BINARY_URI,
            WATCHED_URI,
            "test://template/7/data",
        ] {
            let _: ReadResourceResult = from_json(read_result(uri).unwrap()).unwrap();
        }
        let arguments = json!({"arg1": "a", "arg2": "b", "resourceUri": "test://x"});
        let arguments = arguments.as_object().unwrap();
        for prompt in prompt_definitions().as_array().unwrap() {
            let name = prompt["name"].as_str().unwrap();
            let _: GetPromptResult = from_json(prompt_result(name, arguments).unwrap()).unwrap();
        }
        let _: ServerConfig = ConformanceServer::default().get_info();
        assert!(
            ConformanceServer::default()
                .get_info()
                .capabilities
                .resources
                .is_some()
        );
    }

    #[test]
    fn unknown_resources_name_their_uri() {
        let error = read_result("test://nope").unwrap_err();
        assert_eq!(error.code, rmcp::model::ErrorCode::RESOURCE_NOT_FOUND);
        assert_eq!(error.data, Some(json!({"uri": "test://nope"})));
    }

    #[test]
    fn prompt_arguments_are_substituted() {
        let arguments = json!({"arg1": "hello", "arg2": "world"});
        let result =
            prompt_result("test_prompt_with_arguments", arguments.as_object().unwrap()).unwrap();
        assert_eq!(
            result["messages"][0]["content"]["text"],
            "Prompt with arguments: arg1='hello', arg2='world'"
        );
        assert!(prompt_result("test_prompt_with_arguments", &Map::new()).is_err());
    }
}
