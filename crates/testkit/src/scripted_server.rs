//! A tiny MCP server in memory that speaks newline-delimited JSON-RPC over a pair of
//! [`tokio::io::duplex`] pipes, for testing what talks MCP over stdio without any process.
//!
//! [`ScriptedServer::start`] hands back the [`ByteStreams`] a [`StdioConnector`] connects over
//! (the server's stdin and stdout, as a spawner would) and a [`ScriptedServer`] to watch and
//! steer the server. It answers:
//! - `initialize` with the protocol version the client asked for, `ping` with `{}`;
//! - `tools/list` in pages of [`ScriptedOptions::page_size`] tools: `echo`, `sleep`, `crash`
//!   and then [`ScriptedOptions::extra_tools`] more, `tool_0`, `tool_1`, ...;
//! - `tools/call` of `echo` with its `text` argument as text content; of `sleep` after `ms`
//!   milliseconds, reporting progress twice on the way when the request carries a progress
//!   token, and never when it is cancelled (`notifications/cancelled`); of `crash` by closing
//!   its stdout and stopping, like a process that exits; of any other name with JSON-RPC error
//!   `-32602`;
//! - any other request with JSON-RPC error `-32601`.
//!
//! These are the tools the [`mcp_session_suite`](crate::mcp_session_suite) asks of a server,
//! so the suite runs on sessions connected to it too.
//!
//! [`StdioConnector`]: mcpgw_core::StdioConnector

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpgw_core::{ByteStreams, ServerOutput};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot, watch};

/// How the scripted server behaves.
#[derive(Debug, Clone)]
pub struct ScriptedOptions {
    /// How many tools one `tools/list` page holds. Default 2, so that listing takes pages.
    pub page_size: usize,
    /// Tools listed after `echo`, `sleep` and `crash`. Default 2.
    pub extra_tools: usize,
    /// Closes stdout as soon as `initialize` arrives, without answering it. Default false.
    pub close_before_initialize: bool,
}

impl Default for ScriptedOptions {
    fn default() -> Self {
        Self {
            page_size: 2,
            extra_tools: 2,
            close_before_initialize: false,
        }
    }
}

/// What the scripted server saw, and a way to make it end.
#[derive(Clone)]
pub struct ScriptedServer {
    seen: watch::Receiver<Vec<Value>>,
    stdin_closed: watch::Receiver<bool>,
    close_stdout: Arc<Mutex<Option<oneshot::Sender<()>>>>,
}

impl std::fmt::Debug for ScriptedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedServer")
            .field("seen", &self.seen.borrow().len())
            .finish_non_exhaustive()
    }
}

/// The names of every tool the server lists, in order.
pub fn scripted_tool_names(options: &ScriptedOptions) -> Vec<String> {
    let mut names: Vec<String> = ["echo", "sleep", "crash"].map(str::to_owned).to_vec();
    names.extend((0..options.extra_tools).map(|index| format!("tool_{index}")));
    names
}

impl ScriptedServer {
    /// Starts the server on the current tokio runtime.
    pub fn start(options: ScriptedOptions) -> (ByteStreams, ScriptedServer) {
        let (client_writes, server_reads) = tokio::io::duplex(64 * 1024);
        let (server_writes, client_reads) = tokio::io::duplex(64 * 1024);
        let (seen_sender, seen) = watch::channel(Vec::new());
        let (stdin_sender, stdin_closed) = watch::channel(false);
        let (close_sender, close_receiver) = oneshot::channel();
        let (out_sender, out_receiver) = mpsc::unbounded_channel::<Value>();
        let server = ScriptedServer {
            seen,
            stdin_closed,
            close_stdout: Arc::new(Mutex::new(Some(close_sender))),
        };
        tokio::spawn(write_stdout(server_writes, out_receiver, close_receiver));
        let state = Arc::new(State {
            options,
            out: out_sender,
            seen: seen_sender,
            sleeping: Mutex::new(HashMap::new()),
            close_stdout: server.close_stdout.clone(),
        });
        tokio::spawn(read_stdin(server_reads, state, stdin_sender));
        let streams = ByteStreams {
            to_server: Box::pin(client_writes),
            from_server: ServerOutput::stream(client_reads),
        };
        (streams, server)
    }

    /// Every message the server read so far, in order.
    pub fn seen(&self) -> Vec<Value> {
        self.seen.borrow().clone()
    }

    /// The `method` of every message the server read so far, in order.
    pub fn methods(&self) -> Vec<String> {
        self.seen()
            .iter()
            .map(|message| message["method"].as_str().unwrap_or("").to_owned())
            .collect()
    }

    /// Waits until a message the server read satisfies `wanted`, and returns it.
    pub async fn wait_for_message(&self, wanted: impl Fn(&Value) -> bool) -> Value {
        let mut seen = self.seen.clone();
        let found = seen
            .wait_for(|messages| messages.iter().any(&wanted))
            .await
            .expect("the scripted server keeps its record while a handle exists");
        found
            .iter()
            .find(|message| wanted(message))
            .cloned()
            .expect("found above")
    }

    /// Waits until the client closed the server's stdin.
    pub async fn wait_for_stdin_closed(&self) {
        let mut closed = self.stdin_closed.clone();
        let _ = closed.wait_for(|closed| *closed).await;
    }

    /// Whether the client closed the server's stdin.
    pub fn stdin_is_closed(&self) -> bool {
        *self.stdin_closed.borrow()
    }

    /// Closes the server's stdout, as a server that exits does; requests in flight stay
    /// unanswered.
    pub fn close_stdout(&self) {
        close(&self.close_stdout);
    }
}

fn close(close_stdout: &Mutex<Option<oneshot::Sender<()>>>) {
    let sender = close_stdout
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .take();
    if let Some(sender) = sender {
        let _ = sender.send(());
    }
}

struct State {
    options: ScriptedOptions,
    out: mpsc::UnboundedSender<Value>,
    seen: watch::Sender<Vec<Value>>,
    /// The `sleep` calls in flight, by request id, each with what cancels it.
    sleeping: Mutex<HashMap<String, oneshot::Sender<()>>>,
    close_stdout: Arc<Mutex<Option<oneshot::Sender<()>>>>,
}

impl State {
    fn send(&self, message: Value) {
        // Nobody reads any more once stdout is closed; nothing to do then.
        let _ = self.out.send(message);
    }

    fn answer(&self, id: &Value, result: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    fn fail(&self, id: &Value, code: i32, message: &str) {
        self.send(json!({"jsonrpc": "2.0", "id": id,
                         "error": {"code": code, "message": message}}));
    }

    fn sleeping(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<()>>> {
        self.sleeping
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

async fn write_stdout(
    mut stdout: tokio::io::DuplexStream,
    mut messages: mpsc::UnboundedReceiver<Value>,
    mut close_now: oneshot::Receiver<()>,
) {
    loop {
        tokio::select! {
            biased;
            _ = &mut close_now => break,
            message = messages.recv() => {
                let Some(message) = message else { break };
                let mut line = message.to_string();
                line.push('\n');
                if stdout.write_all(line.as_bytes()).await.is_err() {
                    break;
                }
            }
        }
    }
    // Dropping the stream closes the client's end: it reads the end of the output.
    let _ = stdout.shutdown().await;
}

async fn read_stdin(
    stdin: tokio::io::DuplexStream,
    state: Arc<State>,
    stdin_closed: watch::Sender<bool>,
) {
    let mut lines = BufReader::new(stdin).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        state.seen.send_modify(|seen| seen.push(message.clone()));
        if handle(&state, message) == Next::Stop {
            // Gone, like a process that exited: it reads nothing more.
            return;
        }
    }
    stdin_closed.send_replace(true);
}

#[derive(PartialEq, Eq)]
enum Next {
    Read,
    Stop,
}

fn handle(state: &Arc<State>, message: Value) -> Next {
    let method = message["method"].as_str().unwrap_or_default();
    let id = message.get("id").cloned();
    let params = &message["params"];
    if method == "notifications/cancelled" {
        let cancelled = params["requestId"].to_string();
        if let Some(cancel) = state.sleeping().remove(&cancelled) {
            let _ = cancel.send(());
        }
        return Next::Read;
    }
    // Other notifications, and answers to requests the server never made, need nothing.
    let Some(id) = id else { return Next::Read };
    if method.is_empty() {
        return Next::Read;
    }
    match method {
        "initialize" => {
            if state.options.close_before_initialize {
                close(&state.close_stdout);
                return Next::Stop;
            }
            let version = params["protocolVersion"].clone();
            state.answer(
                &id,
                json!({
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": true}},
                    "serverInfo": {"name": "mcpgw-testkit-scripted", "version": "1.0.0"},
                }),
            );
        }
        "ping" => state.answer(&id, json!({})),
        "tools/list" => list_tools(state, &id, params),
        "tools/call" => return call_tool(state, id, params),
        _ => state.fail(&id, -32601, &format!("method not found: {method}")),
    }
    Next::Read
}

fn list_tools(state: &State, id: &Value, params: &Value) {
    let names = scripted_tool_names(&state.options);
    let start: usize = params["cursor"]
        .as_str()
        .and_then(|cursor| cursor.parse().ok())
        .unwrap_or(0);
    let end = (start + state.options.page_size.max(1)).min(names.len());
    let tools: Vec<Value> = names[start.min(end)..end]
        .iter()
        .map(|name| {
            let schema = match name.as_str() {
                "echo" => json!({"type": "object", "properties": {"text": {"type": "string"}},
                                 "required": ["text"]}),
                "sleep" => json!({"type": "object", "properties": {"ms": {"type": "integer"}},
                                  "required": ["ms"]}),
                _ => json!({"type": "object"}),
            };
            json!({"name": name, "description": format!("The scripted `{name}`."),
                   "inputSchema": schema})
        })
        .collect();
    let mut result = json!({ "tools": tools });
    if end < names.len() {
        result["nextCursor"] = json!(end.to_string());
    }
    state.answer(id, result);
}

fn text(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": false})
}

fn call_tool(state: &Arc<State>, id: Value, params: &Value) -> Next {
    let name = params["name"].as_str().unwrap_or_default();
    let arguments = &params["arguments"];
    match name {
        "crash" => {
            close(&state.close_stdout);
            return Next::Stop;
        }
        "echo" => match arguments["text"].as_str() {
            Some(said) => state.answer(&id, text(said)),
            None => state.fail(&id, -32602, "`echo` needs a `text` string"),
        },
        "sleep" => {
            let ms = arguments["ms"].as_u64().unwrap_or(0);
            let token = params["_meta"]["progressToken"].clone();
            let (cancel, cancelled) = oneshot::channel();
            state.sleeping().insert(id.to_string(), cancel);
            tokio::spawn(sleep(state.clone(), id, ms, token, cancelled));
        }
        _ => state.fail(&id, -32602, &format!("unknown tool: {name}")),
    }
    Next::Read
}

async fn sleep(
    state: Arc<State>,
    id: Value,
    ms: u64,
    token: Value,
    mut cancelled: oneshot::Receiver<()>,
) {
    let half = Duration::from_millis(ms / 2);
    for step in 1..=2u64 {
        if !token.is_null() {
            state.send(json!({
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": token, "progress": (step - 1) * ms / 2,
                           "total": ms, "message": format!("step {step} of 2")},
            }));
        }
        tokio::select! {
            () = tokio::time::sleep(half) => {}
            // A cancelled request is not answered.
            _ = &mut cancelled => return,
        }
    }
    state.sleeping().remove(&id.to_string());
    state.answer(&id, text(&format!("slept {ms}")));
}
