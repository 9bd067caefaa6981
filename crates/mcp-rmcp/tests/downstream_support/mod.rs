//! A small in-memory [`McpFrontend`] for the downstream server tests: a few tools with known
//! behaviour, one failing with each [`FrontendErrorKind`], prompts, resources, and a change
//! counter the test moves by hand.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_core::{
    CallContext, Caller, FrontendError, FrontendErrorKind, McpFrontend, ProgressUpdate, Tool,
    ToolCallOutcome,
};
use serde_json::{Map, Value, json};
use tokio::sync::watch;

/// Generous, because the test machines are small and shared.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// The names `FakeFrontend` lists, in order.
pub const TOOL_NAMES: [&str; 13] = [
    "srv__echo",
    "srv__whoami",
    "srv__tool_error",
    "srv__progress",
    "srv__slow",
    "srv__unknown_name",
    "srv__invalid_arguments",
    "srv__unavailable",
    "srv__timeout",
    "srv__cancelled",
    "srv__upstream",
    "srv__rate_limited",
    "srv__invalid_result",
];

pub struct FakeFrontend {
    tools: Mutex<Arc<Vec<Tool>>>,
    changes: watch::Sender<u64>,
    /// Becomes true when a `srv__slow` call sees its cancellation token fire.
    pub slow_call_cancelled: watch::Sender<bool>,
    /// Becomes true when a `srv__slow` call started (and reported its first progress).
    pub slow_call_started: watch::Sender<bool>,
    /// The principal of every call, in order.
    pub call_principals: Mutex<Vec<Option<String>>>,
    /// What the test announces as updated resources, to every subscription.
    pub resource_updates: tokio::sync::broadcast::Sender<String>,
    /// One per subscription alive (handed out and not yet dropped).
    pub live_subscriptions: Arc<()>,
}

impl FakeFrontend {
    pub fn new() -> Arc<Self> {
        let tools = TOOL_NAMES
            .iter()
            .map(|name| {
                Tool::new(*name)
                    .with_description(format!("the {name} tool"))
                    .with_input_schema(
                        json!({"type": "object", "properties": {"text": {"type": "string"}}}),
                    )
            })
            .collect();
        Arc::new(Self {
            tools: Mutex::new(Arc::new(tools)),
            changes: watch::channel(0).0,
            slow_call_cancelled: watch::channel(false).0,
            slow_call_started: watch::channel(false).0,
            call_principals: Mutex::new(Vec::new()),
            resource_updates: tokio::sync::broadcast::channel(16).0,
            live_subscriptions: Arc::new(()),
        })
    }

    /// How many subscriptions are alive.
    pub fn subscriptions(&self) -> usize {
        Arc::strong_count(&self.live_subscriptions) - 1
    }

    /// Adds a tool and moves the change counter, as the catalogue does.
    pub fn add_tool(&self, name: &str) {
        self.add_tool_with_schema(name, json!({"type": "object"}));
    }

    /// [`FakeFrontend::add_tool`] with an input schema.
    pub fn add_tool_with_schema(&self, name: &str, schema: Value) {
        let mut tools = self.tools.lock().unwrap();
        let mut list = (**tools).clone();
        list.push(Tool::new(name).with_input_schema(schema));
        *tools = Arc::new(list);
        drop(tools);
        self.changes.send_modify(|version| *version += 1);
    }

    /// How many receivers of the change counter are alive: each connected peer's watcher holds
    /// one.
    pub fn change_receivers(&self) -> usize {
        self.changes.receiver_count()
    }

    pub async fn wait_until_slow_call_started(&self) {
        let mut started = self.slow_call_started.subscribe();
        tokio::time::timeout(DEADLINE, started.wait_for(|started| *started))
            .await
            .expect("the slow call did not start in time")
            .unwrap();
    }

    pub async fn wait_until_slow_call_cancelled(&self) {
        let mut cancelled = self.slow_call_cancelled.subscribe();
        tokio::time::timeout(DEADLINE, cancelled.wait_for(|cancelled| *cancelled))
            .await
            .expect("the slow call's cancellation token did not fire in time")
            .unwrap();
    }
}

fn text_result(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}]})
}

fn failure(kind: FrontendErrorKind, message: &str) -> Result<ToolCallOutcome, FrontendError> {
    Err(FrontendError::new(kind, message))
}

fn report(ctx: &CallContext, progress: f64, message: &str) {
    if let Some(handler) = &ctx.progress {
        handler(ProgressUpdate {
            progress,
            total: Some(2.0),
            message: Some(message.to_owned()),
        });
    }
}

#[async_trait]
impl McpFrontend for FakeFrontend {
    fn tools(&self, _caller: &Caller) -> Arc<Vec<Tool>> {
        Arc::clone(&self.tools.lock().unwrap())
    }

    async fn call_tool(
        &self,
        caller: &Caller,
        name: &str,
        arguments: Option<Map<String, Value>>,
        ctx: CallContext,
    ) -> Result<ToolCallOutcome, FrontendError> {
        self.call_principals
            .lock()
            .unwrap()
            .push(ctx.principal.clone());
        let outcome = |result| {
            Ok(ToolCallOutcome {
                result,
                is_error: false,
            })
        };
        match name {
            "srv__echo" => {
                let arguments = Value::Object(arguments.unwrap_or_default());
                outcome(json!({
                    "content": [{"type": "text", "text": arguments.to_string()}],
                    "structuredContent": arguments,
                }))
            }
            "srv__whoami" => outcome(text_result(
                caller.principal.clone().unwrap_or_else(|| "nobody".into()),
            )),
            "srv__tool_error" => Ok(ToolCallOutcome {
                result: json!({"content": [{"type": "text", "text": "it broke"}], "isError": true}),
                is_error: true,
            }),
            "srv__progress" => {
                report(&ctx, 1.0, "half way");
                report(&ctx, 2.0, "done");
                outcome(text_result("finished"))
            }
            "srv__slow" => {
                report(&ctx, 1.0, "started");
                self.slow_call_started.send_replace(true);
                ctx.cancellation.cancelled().await;
                self.slow_call_cancelled.send_replace(true);
                failure(
                    FrontendErrorKind::Cancelled,
                    "the caller cancelled the call",
                )
            }
            "srv__invalid_arguments" => failure(
                FrontendErrorKind::InvalidArguments,
                "argument `text` must be a string",
            ),
            "srv__unavailable" => failure(
                FrontendErrorKind::Unavailable,
                "mcp server `srv` could not be started: no such file",
            ),
            "srv__timeout" => failure(
                FrontendErrorKind::Timeout,
                "mcp server `srv` did not answer within 30s; the request was cancelled",
            ),
            "srv__cancelled" => failure(FrontendErrorKind::Cancelled, "the gateway is stopping"),
            "srv__upstream" => failure(
                FrontendErrorKind::Upstream { code: -32042 },
                "the server answered `tools/call` with JSON-RPC error -32042: nope",
            ),
            "srv__rate_limited" => failure(
                FrontendErrorKind::RateLimited {
                    retry_after_ms: 2500,
                },
                "too many calls of `srv__rate_limited`",
            ),
            "srv__invalid_result" => outcome(json!({"content": [{"type": "hologram"}]})),
            // `srv__unknown_name` is listed but behaves as if it were not, like a tool the
            // caller may not use.
            _ => Err(FrontendError::unknown("tool", name)),
        }
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    async fn prompts(&self, _caller: &Caller) -> Vec<Value> {
        vec![
            json!({"name": "srv__greet", "description": "greets",
                   "arguments": [{"name": "who", "required": true}]}),
            json!({"name": "srv__farewell"}),
            json!({"not a prompt": true}),
        ]
    }

    async fn get_prompt(
        &self,
        _caller: &Caller,
        name: &str,
        arguments: Option<Map<String, Value>>,
        _ctx: mcpgw_core::CallContext,
    ) -> Result<Value, FrontendError> {
        if name != "srv__greet" {
            return Err(FrontendError::unknown("prompt", name));
        }
        let who = arguments
            .and_then(|arguments| arguments.get("who").cloned())
            .and_then(|who| who.as_str().map(str::to_owned))
            .unwrap_or_default();
        Ok(json!({
            "description": "greets",
            "messages": [{"role": "user", "content": {"type": "text", "text": format!("hello {who}")}}],
        }))
    }

    async fn task_request(
        &self,
        _caller: &Caller,
        _method: &str,
        task_id: &str,
        _params: Value,
    ) -> Result<Value, FrontendError> {
        Err(FrontendError::unknown("task", task_id))
    }

    async fn resources(&self, _caller: &Caller) -> Vec<Value> {
        vec![json!({"uri": "file:///a.txt", "name": "srv__a", "mimeType": "text/plain"})]
    }

    async fn resource_templates(&self, _caller: &Caller) -> Vec<Value> {
        vec![json!({"uriTemplate": "file:///{path}", "name": "srv__files"})]
    }

    async fn read_resource(
        &self,
        _caller: &Caller,
        uri: &str,
        _ctx: mcpgw_core::CallContext,
    ) -> Result<Value, FrontendError> {
        if uri != "file:///a.txt" {
            return Err(FrontendError::unknown("resource", uri));
        }
        Ok(json!({"contents": [{"uri": uri, "mimeType": "text/plain", "text": "A"}]}))
    }

    async fn subscribe_resource(
        &self,
        _caller: &Caller,
        uri: &str,
    ) -> Result<mcpgw_core::ResourceSubscription, FrontendError> {
        if uri != "file:///a.txt" {
            return Err(FrontendError::unknown("resource", uri));
        }
        Ok(mcpgw_core::ResourceSubscription::new(
            uri,
            self.resource_updates.subscribe(),
            Arc::clone(&self.live_subscriptions),
        ))
    }
}
