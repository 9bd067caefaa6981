//! A small, fast, deterministic MCP server over stdio or Streamable HTTP, for end-to-end tests,
//! benchmarks and the README's demo. The `mcpgw-fixture-server` binary is a thin `main` around
//! [`serve_stdio`] and [`serve_http`].
//!
//! Tools (names optionally prefixed with `--tools-prefix`):
//! - `echo {text}`: answers `text`.
//! - `add {a, b}`: answers the sum as text and as `structuredContent` `{"sum": ...}`.
//! - `fail {message?}`: a tool-level error (`isError: true`), not a JSON-RPC error.
//! - `sleep {ms}`: sleeps, and sends `notifications/progress` (at 0, 1/4, 1/2 and 3/4 of `ms`)
//!   when the request carries a progress token; when cancelled it stops at once and writes
//!   `fixture sleep cancelled` to stderr.
//! - `crash {code?}`: the process exits at once with `code` (default 1) without answering.
//! - `stderr {lines?, text?, bytes?, invalid_utf8?}`: writes to stderr, answers how many lines.
//! - `env {name}`: the value of an environment variable, a tool-level error when it is unset.
//! - `notify_tools_changed`: adds the tool `added_later` (which answers `added later`) to the
//!   list, once, and sends `notifications/tools/list_changed` (every time).
//! - `drop_session`: over HTTP, forgets the caller's session shortly after answering, as a
//!   restarted server would: later requests on it get HTTP 404. Over stdio, a tool-level error.
//! - `tool_0` .. `tool_{n-1}` with `--extra-tools n`: echo their arguments as JSON.
//!
//! Prompts: `greeting {name}` (one user message `Hello, {name}!`) and `farewell {name?}`.
//! Resources: `fixture://readme` and `fixture://version` (text); the resource template
//! `fixture://echo/{text}` reads back `text`. `--page-size` paginates every list.
//!
//! Unknown tools and malformed arguments answer JSON-RPC error -32602 (invalid params), as
//! rmcp's own tool router does; an unknown prompt too, and an unknown resource -32002.
//!
//! Options (see [`FixtureOptions`]): `--exit-at-start CODE` (writes `fixture exiting at start`
//! to stderr and exits before reading anything), `--stderr-at-start N` (writes
//! `fixture start line {i}` N times), `--wait-for-file PATH` (writes `fixture waiting for PATH`
//! to stderr and does nothing else until PATH exists, which holds its start for as long as a
//! test wants), `--tools-prefix P`, `--extra-tools N`, `--page-size N`
//! (paginates the lists; clients must follow `nextCursor`), `--no-handshake` (reads and
//! ignores all input, after writing `fixture ignoring all input`; stdio only), `--delay-ms N`
//! (waits before answering every `tools/call`), `--serial` (serves one `tools/call` at a time:
//! a call waits until the one before it, delay included, has answered, as an upstream with a
//! single worker does), `--http PORT` (serves Streamable HTTP at
//! `http://127.0.0.1:PORT/mcp` instead of stdio; 0 picks a free port; writes
//! `fixture listening on http://127.0.0.1:PORT/mcp` to stderr once it accepts connections),
//! `--require-header NAME=VALUE` (HTTP only, repeatable: requests without that exact header
//! get 401). Over stdio it writes `fixture ready` to stderr once it serves MCP, and exits 0
//! when its stdin closes; over HTTP it serves until it is killed. Server info name:
//! `mcpgw-fixture`.
//!
//! [`fixture_server_binary`] finds (or builds) the binary for tests of other packages, because
//! cargo builds a package's binaries only for that package's own tests.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::Write as _;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, combinators::BoxBody};
use rmcp::ServerHandler;
use rmcp::ServiceExt as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, JsonObject,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, Prompt, PromptArgument, PromptMessage,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, Role, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio::sync::SemaphorePermit;
use tokio_util::sync::CancellationToken;

/// The `serverInfo.name` the fixture reports in its `initialize` answer.
pub const FIXTURE_SERVER_NAME: &str = "mcpgw-fixture";

/// The name of the fixture's binary target.
pub const FIXTURE_BINARY_NAME: &str = "mcpgw-fixture-server";

/// Environment variable that points tests at a fixture binary built elsewhere (a container
/// image, a release build); when set, [`fixture_server_binary`] uses it as is.
pub const FIXTURE_BINARY_ENV: &str = "MCPGW_FIXTURE_SERVER";

pub const FIXTURE_USAGE: &str = "usage: mcpgw-fixture-server [--exit-at-start CODE] \
[--stderr-at-start N] [--wait-for-file PATH] [--tools-prefix PREFIX] [--extra-tools N] [--page-size N] \
[--no-handshake] [--delay-ms N] [--serial] [--http PORT [--require-header NAME=VALUE]...]";

/// The path the HTTP mode serves MCP on.
pub const FIXTURE_HTTP_PATH: &str = "/mcp";

/// What the HTTP mode writes to stderr, followed by its endpoint URL, once it accepts
/// connections.
pub const FIXTURE_LISTENING_PREFIX: &str = "fixture listening on ";

/// How long `drop_session` waits before forgetting the session, so that its own answer is
/// delivered first.
const DROP_SESSION_DELAY: Duration = Duration::from_millis(100);

/// The `retry` interval the HTTP mode asks clients to wait before reopening an event stream.
/// Short, so that tests see a lost session quickly.
const HTTP_SSE_RETRY: Duration = Duration::from_millis(200);

/// How often `--wait-for-file` looks for its file.
const WAIT_FOR_FILE_POLL: Duration = Duration::from_millis(10);

/// How many progress notifications `sleep` sends when the request asks for progress.
const SLEEP_PROGRESS_STEPS: u32 = 4;

/// Upper bounds that keep a mistyped argument from making the fixture hang or eat the disk.
const STDERR_MAX_LINES: u64 = 1_000_000;
const STDERR_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// The fixture's command-line options. Every option is optional; the default is a plain server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FixtureOptions {
    /// Exit with this code before reading anything, after a line on stderr.
    pub exit_at_start: Option<i32>,
    /// Lines written to stderr before serving.
    pub stderr_at_start: u64,
    /// Serve only once this file exists (checked every few milliseconds).
    pub wait_for_file: Option<PathBuf>,
    /// Prepended to every tool name.
    pub tools_prefix: String,
    /// How many trivial `tool_{i}` tools to add.
    pub extra_tools: u32,
    /// Page size of `tools/list`; `None` lists every tool on one page.
    pub page_size: Option<usize>,
    /// Never answer `initialize`: read stdin and ignore everything.
    pub no_handshake: bool,
    /// Waited before answering every `tools/call`.
    pub call_delay: Duration,
    /// Serve one `tools/call` at a time (the delay included); the others wait their turn.
    pub serial: bool,
    /// Serve Streamable HTTP on this port of 127.0.0.1 (0 picks a free one) instead of stdio.
    pub http_port: Option<u16>,
    /// HTTP only: requests without each of these exact headers are answered 401.
    pub required_headers: Vec<(String, String)>,
}

impl FixtureOptions {
    /// Parses the command line (without the program name). The error is a message for stderr.
    pub fn parse_args<I>(args: I) -> Result<Self, String>
    where
        I: IntoIterator<Item = String>,
    {
        let mut options = Self::default();
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            let mut value = |flag: &str| {
                args.next()
                    .ok_or_else(|| format!("`{flag}` needs a value; {FIXTURE_USAGE}"))
            };
            match flag.as_str() {
                "--exit-at-start" => {
                    options.exit_at_start = Some(parse_number(&flag, &value(&flag)?)?);
                }
                "--stderr-at-start" => {
                    options.stderr_at_start = parse_number(&flag, &value(&flag)?)?;
                }
                "--wait-for-file" => options.wait_for_file = Some(PathBuf::from(value(&flag)?)),
                "--tools-prefix" => options.tools_prefix = value(&flag)?,
                "--extra-tools" => options.extra_tools = parse_number(&flag, &value(&flag)?)?,
                "--page-size" => {
                    let size: usize = parse_number(&flag, &value(&flag)?)?;
                    if size == 0 {
                        return Err("`--page-size` must be at least 1".to_owned());
                    }
                    options.page_size = Some(size);
                }
                "--no-handshake" => options.no_handshake = true,
                "--delay-ms" => {
                    options.call_delay =
                        Duration::from_millis(parse_number(&flag, &value(&flag)?)?);
                }
                "--serial" => options.serial = true,
                "--http" => options.http_port = Some(parse_number(&flag, &value(&flag)?)?),
                "--require-header" => {
                    let raw = value(&flag)?;
                    let Some((name, header_value)) = raw.split_once('=') else {
                        return Err(format!(
                            "`--require-header` takes NAME=VALUE, not `{raw}`; {FIXTURE_USAGE}"
                        ));
                    };
                    if name.is_empty() {
                        return Err("`--require-header` needs a header name".to_owned());
                    }
                    options
                        .required_headers
                        .push((name.to_owned(), header_value.to_owned()));
                }
                "-h" | "--help" => return Err(FIXTURE_USAGE.to_owned()),
                other => return Err(format!("unknown option `{other}`; {FIXTURE_USAGE}")),
            }
        }
        if options.http_port.is_some() && options.no_handshake {
            return Err("`--no-handshake` works only over stdio, not with `--http`".to_owned());
        }
        if options.http_port.is_none() && !options.required_headers.is_empty() {
            return Err("`--require-header` works only with `--http`".to_owned());
        }
        Ok(options)
    }
}

fn parse_number<T: std::str::FromStr>(flag: &str, raw: &str) -> Result<T, String> {
    raw.parse()
        .map_err(|_| format!("`{flag}` takes a number, not `{raw}`"))
}

/// Runs the fixture on the process's stdin and stdout until the client goes away.
///
/// `--exit-at-start` and the `crash` tool end the whole process, which is what a fixture
/// for crashing servers is for.
pub async fn serve_stdio(options: FixtureOptions) -> std::io::Result<()> {
    start_up(&options)?;
    if options.no_handshake {
        eprintln!("fixture ignoring all input");
        let mut stdin = tokio::io::stdin();
        tokio::io::copy(&mut stdin, &mut tokio::io::sink()).await?;
        return Ok(());
    }
    let server = FixtureServer::new(&options);
    let transport = rmcp::transport::stdio_pipes();
    eprintln!("fixture ready");
    let running = match server.serve(transport).await {
        Ok(running) => running,
        // A client that leaves before `initialize` is not the fixture's failure.
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
        Err(error) => return Err(std::io::Error::other(error)),
    };
    running.waiting().await.map_err(std::io::Error::other)?;
    Ok(())
}

/// What both modes do before serving: the start-up options that end or delay the start.
fn start_up(options: &FixtureOptions) -> std::io::Result<()> {
    if let Some(code) = options.exit_at_start {
        eprintln!("fixture exiting at start");
        std::process::exit(code);
    }
    if options.stderr_at_start > 0 {
        let mut stderr = std::io::BufWriter::new(std::io::stderr().lock());
        for index in 0..options.stderr_at_start {
            writeln!(stderr, "fixture start line {index}")?;
        }
        stderr.flush()?;
    }
    if let Some(path) = &options.wait_for_file {
        eprintln!("fixture waiting for {}", path.display());
        // Nothing else runs yet, so blocking this thread holds up nothing but the start.
        while !path.exists() {
            std::thread::sleep(WAIT_FOR_FILE_POLL);
        }
    }
    Ok(())
}

/// Runs the fixture as a Streamable HTTP server on `127.0.0.1:{options.http_port}` (0 picks a
/// free port) until the process is killed. Every session shares one tool list, so
/// `notify_tools_changed` changes it for all of them.
pub async fn serve_http(options: FixtureOptions) -> std::io::Result<()> {
    start_up(&options)?;
    let listener =
        tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, options.http_port.unwrap_or(0)))
            .await?;
    let address = listener.local_addr()?;
    let server = FixtureServer::new(&options);
    let sessions = Arc::new(LocalSessionManager::default());
    let _ = server.shared.http_sessions.set(Arc::clone(&sessions));
    let handler_for_sessions = server.clone();
    let service = StreamableHttpService::new(
        move || Ok(handler_for_sessions.clone()),
        sessions,
        StreamableHttpServerConfig::default().with_sse_retry(Some(HTTP_SSE_RETRY)),
    );
    let gate = Arc::new(HttpGate {
        service,
        required_headers: options.required_headers.clone(),
    });
    eprintln!("{FIXTURE_LISTENING_PREFIX}http://{address}{FIXTURE_HTTP_PATH}");
    loop {
        let (stream, _peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Out of file descriptors, say: the listener itself is fine, so keep serving.
            Err(error) => {
                eprintln!("fixture cannot accept a connection: {error}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        // Without it, small answers wait for the peer's delayed acknowledgement (~40 ms).
        let _ = stream.set_nodelay(true);
        let gate = Arc::clone(&gate);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let gate = Arc::clone(&gate);
                async move { Ok::<_, Infallible>(gate.answer(request).await) }
            });
            // A client that goes away mid-request is no failure of the fixture.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

type HttpResponse = http::Response<BoxBody<Bytes, Infallible>>;

/// The checks the HTTP mode makes before a request reaches rmcp's Streamable HTTP service.
struct HttpGate {
    service: StreamableHttpService<FixtureServer, LocalSessionManager>,
    required_headers: Vec<(String, String)>,
}

impl HttpGate {
    async fn answer(&self, request: http::Request<hyper::body::Incoming>) -> HttpResponse {
        if request.uri().path() != FIXTURE_HTTP_PATH {
            return plain_response(
                http::StatusCode::NOT_FOUND,
                format!("not found: the fixture serves MCP at {FIXTURE_HTTP_PATH}"),
            );
        }
        for (name, value) in &self.required_headers {
            let present = request
                .headers()
                .get_all(name.as_str())
                .iter()
                .any(|sent| sent.as_bytes() == value.as_bytes());
            if !present {
                // Names the header, never the expected value: tests check that secrets stay put.
                let mut response = plain_response(
                    http::StatusCode::UNAUTHORIZED,
                    format!("missing or wrong `{name}` header"),
                );
                response.headers_mut().insert(
                    http::header::WWW_AUTHENTICATE,
                    http::HeaderValue::from_static("Bearer realm=\"mcpgw-fixture\""),
                );
                return response;
            }
        }
        self.service.handle(request).await
    }
}

fn plain_response(status: http::StatusCode, text: String) -> HttpResponse {
    let mut response = http::Response::new(Full::new(Bytes::from(text)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FixtureTool {
    Echo,
    Add,
    Fail,
    Sleep,
    Crash,
    Stderr,
    Env,
    NotifyToolsChanged,
    DropSession,
    AddedLater,
    Extra,
}

/// The server's state is computed once at start, so a call costs a hash lookup and whatever
/// the tool itself does.
#[derive(Clone)]
struct FixtureServer {
    shared: Arc<FixtureShared>,
}

struct FixtureShared {
    catalog: Mutex<ToolCatalog>,
    /// The name `notify_tools_changed` adds, with the prefix.
    added_later_name: String,
    prompts: Vec<Prompt>,
    resources: Vec<Resource>,
    resource_templates: Vec<ResourceTemplate>,
    page_size: Option<usize>,
    call_delay: Duration,
    /// With `--serial`, the one permit a `tools/call` holds while it runs.
    serial_calls: Option<tokio::sync::Semaphore>,
    /// The HTTP mode's sessions, which `drop_session` forgets; unset over stdio.
    http_sessions: OnceLock<Arc<LocalSessionManager>>,
}

#[derive(Default)]
struct ToolCatalog {
    tools: Vec<Tool>,
    by_name: HashMap<String, FixtureTool>,
}

impl ToolCatalog {
    fn add(&mut self, kind: FixtureTool, tool: Tool) {
        self.by_name.insert(tool.name.to_string(), kind);
        self.tools.push(tool);
    }
}

impl FixtureShared {
    fn catalog(&self) -> MutexGuard<'_, ToolCatalog> {
        self.catalog.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for the call's turn under `--serial` (at once otherwise). The permit, when there
    /// is one, must be held until the call has answered. `Err` when the call was cancelled
    /// while it waited.
    async fn admit_call(
        &self,
        cancelled: &CancellationToken,
    ) -> Result<Option<SemaphorePermit<'_>>, CallCancelled> {
        let Some(serial_calls) = &self.serial_calls else {
            return Ok(None);
        };
        tokio::select! {
            permit = serial_calls.acquire() => match permit {
                Ok(permit) => Ok(Some(permit)),
                // The semaphore is never closed; should it be, calls run unserialised.
                Err(_) => Ok(None),
            },
            () = cancelled.cancelled() => Err(CallCancelled),
        }
    }
}

/// A call that was cancelled before its turn came.
#[derive(Debug, PartialEq, Eq)]
struct CallCancelled;

impl FixtureServer {
    fn new(options: &FixtureOptions) -> Self {
        let mut catalog = ToolCatalog::default();
        let mut add = |kind: FixtureTool, tool: Tool| catalog.add(kind, tool);
        let prefix = options.tools_prefix.as_str();
        add(
            FixtureTool::Echo,
            tool(
                prefix,
                "echo",
                "Answers the given text.",
                json!({"type": "object", "properties": {"text": {"type": "string"}},
                       "required": ["text"]}),
            ),
        );
        let mut add_tool = tool(
            prefix,
            "add",
            "Adds two numbers.",
            json!({"type": "object",
                   "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                   "required": ["a", "b"]}),
        );
        add_tool.output_schema = Some(Arc::new(object(json!({
            "type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]
        }))));
        add(FixtureTool::Add, add_tool);
        add(
            FixtureTool::Fail,
            tool(
                prefix,
                "fail",
                "Answers a tool-level error with the given message.",
                json!({"type": "object", "properties": {"message": {"type": "string"}}}),
            ),
        );
        add(
            FixtureTool::Sleep,
            tool(
                prefix,
                "sleep",
                "Sleeps for `ms` milliseconds, reporting progress, and stops when cancelled.",
                json!({"type": "object",
                       "properties": {"ms": {"type": "integer", "minimum": 0}},
                       "required": ["ms"]}),
            ),
        );
        add(
            FixtureTool::Crash,
            tool(
                prefix,
                "crash",
                "Exits the server process at once with the given code (default 1).",
                json!({"type": "object", "properties": {"code": {"type": "integer"}}}),
            ),
        );
        add(
            FixtureTool::Stderr,
            tool(
                prefix,
                "stderr",
                "Writes lines to stderr and answers how many it wrote.",
                json!({"type": "object", "properties": {
                    "lines": {"type": "integer", "minimum": 0},
                    "text": {"type": "string"},
                    "bytes": {"type": "integer", "minimum": 0},
                    "invalid_utf8": {"type": "boolean"}
                }}),
            ),
        );
        add(
            FixtureTool::Env,
            tool(
                prefix,
                "env",
                "Answers the value of an environment variable of the server process.",
                json!({"type": "object", "properties": {"name": {"type": "string"}},
                       "required": ["name"]}),
            ),
        );
        add(
            FixtureTool::NotifyToolsChanged,
            tool(
                prefix,
                "notify_tools_changed",
                "Adds the tool `added_later` and announces that the tool list changed.",
                json!({"type": "object"}),
            ),
        );
        add(
            FixtureTool::DropSession,
            tool(
                prefix,
                "drop_session",
                "Over HTTP, forgets the caller's session shortly after answering.",
                json!({"type": "object"}),
            ),
        );
        for index in 0..options.extra_tools {
            add(
                FixtureTool::Extra,
                tool(
                    prefix,
                    &format!("tool_{index}"),
                    "Echoes its arguments as JSON.",
                    json!({"type": "object"}),
                ),
            );
        }
        Self {
            shared: Arc::new(FixtureShared {
                catalog: Mutex::new(catalog),
                added_later_name: format!("{prefix}added_later"),
                prompts: fixture_prompts(),
                resources: fixture_resources(),
                resource_templates: vec![
                    ResourceTemplate::new(ECHO_RESOURCE_TEMPLATE, "echo")
                        .with_description("Reads back the text at the end of the URI.")
                        .with_mime_type("text/plain"),
                ],
                page_size: options.page_size,
                call_delay: options.call_delay,
                serial_calls: options.serial.then(|| tokio::sync::Semaphore::new(1)),
                http_sessions: OnceLock::new(),
            }),
        }
    }

    /// Adds `added_later` once; whether it was added by this call.
    fn add_tool_later(&self) -> bool {
        let name = &self.shared.added_later_name;
        let mut catalog = self.shared.catalog();
        if catalog.by_name.contains_key(name) {
            return false;
        }
        let added = Tool::new(
            name.clone(),
            "Added by `notify_tools_changed`; answers `added later`.",
            Arc::new(object(json!({"type": "object"}))),
        );
        catalog.add(FixtureTool::AddedLater, added);
        true
    }

    /// Forgets the caller's HTTP session once its answer had time to leave.
    fn drop_session(&self, context: &RequestContext<RoleServer>) -> CallToolResult {
        let Some(sessions) = self.shared.http_sessions.get() else {
            return CallToolResult::error(vec![ContentBlock::text(
                "drop_session works only over http",
            )]);
        };
        let session_id = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.headers.get("mcp-session-id"))
            .and_then(|value| value.to_str().ok())
            .map(Arc::<str>::from);
        let Some(session_id) = session_id else {
            return CallToolResult::error(vec![ContentBlock::text(
                "the request carries no session id",
            )]);
        };
        let sessions = Arc::clone(sessions);
        tokio::spawn(async move {
            tokio::time::sleep(DROP_SESSION_DELAY).await;
            if let Err(error) = sessions.close_session(&session_id).await {
                eprintln!("fixture could not drop session {session_id}: {error}");
            } else {
                eprintln!("fixture dropped session {session_id}");
            }
        });
        text_result("dropping the session")
    }
}

const README_URI: &str = "fixture://readme";
const VERSION_URI: &str = "fixture://version";
const ECHO_RESOURCE_TEMPLATE: &str = "fixture://echo/{text}";
const ECHO_RESOURCE_PREFIX: &str = "fixture://echo/";
const README_TEXT: &str = "The mcpgw fixture server: a small MCP server for tests.";

fn fixture_prompts() -> Vec<Prompt> {
    vec![
        Prompt::new(
            "greeting",
            Some("Greets someone by name."),
            Some(vec![
                PromptArgument::new("name")
                    .with_description("Who to greet.")
                    .with_required(true),
            ]),
        ),
        Prompt::new(
            "farewell",
            Some("Says goodbye, to someone by name if given."),
            Some(vec![
                PromptArgument::new("name")
                    .with_description("Who to say goodbye to.")
                    .with_required(false),
            ]),
        ),
    ]
}

fn fixture_resources() -> Vec<Resource> {
    vec![
        Resource::new(README_URI, "readme")
            .with_description("What this server is.")
            .with_mime_type("text/plain"),
        Resource::new(VERSION_URI, "version")
            .with_description("The fixture's version.")
            .with_mime_type("text/plain"),
    ]
}

/// One page of `items` for `cursor` (an index), with the cursor of the next page if any.
fn page_of<T: Clone>(
    items: &[T],
    page_size: Option<usize>,
    request: Option<PaginatedRequestParams>,
) -> Result<(Vec<T>, Option<String>), ErrorData> {
    let Some(page_size) = page_size else {
        return Ok((items.to_vec(), None));
    };
    let start = match request.and_then(|params| params.cursor) {
        None => 0,
        Some(cursor) => cursor
            .parse::<usize>()
            .ok()
            .filter(|start| *start <= items.len())
            .ok_or_else(|| ErrorData::invalid_params(format!("unknown cursor `{cursor}`"), None))?,
    };
    let end = start.saturating_add(page_size).min(items.len());
    let next = (end < items.len()).then(|| end.to_string());
    Ok((items[start..end].to_vec(), next))
}

fn tool(prefix: &str, base_name: &str, description: &'static str, schema: Value) -> Tool {
    Tool::new(
        format!("{prefix}{base_name}"),
        description,
        Arc::new(object(schema)),
    )
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

impl ServerHandler for FixtureServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_prompts()
            .enable_resources()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        ServerConfig::new(capabilities).with_server_info(Implementation::new(
            FIXTURE_SERVER_NAME,
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let (tools, next_cursor) =
            page_of(&self.shared.catalog().tools, self.shared.page_size, request)?;
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = next_cursor;
        Ok(result)
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let (prompts, next_cursor) = page_of(&self.shared.prompts, self.shared.page_size, request)?;
        let mut result = ListPromptsResult::with_all_items(prompts);
        result.next_cursor = next_cursor;
        Ok(result)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let empty = JsonObject::new();
        let arguments = request.arguments.as_ref().unwrap_or(&empty);
        let text = match request.name.as_str() {
            "greeting" => format!("Hello, {}!", required_str(arguments, "name")?),
            "farewell" => match optional_str(arguments, "name")? {
                Some(name) => format!("Goodbye, {name}!"),
                None => "Goodbye!".to_owned(),
            },
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown prompt `{other}`"),
                    None,
                ));
            }
        };
        Ok(
            GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
                .with_description(format!("the fixture's `{}` prompt", request.name))
                .into(),
        )
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let (resources, next_cursor) =
            page_of(&self.shared.resources, self.shared.page_size, request)?;
        let mut result = ListResourcesResult::with_all_items(resources);
        result.next_cursor = next_cursor;
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let (templates, next_cursor) = page_of(
            &self.shared.resource_templates,
            self.shared.page_size,
            request,
        )?;
        let mut result = ListResourceTemplatesResult::with_all_items(templates);
        result.next_cursor = next_cursor;
        Ok(result)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.as_str();
        let text = match uri {
            README_URI => README_TEXT.to_owned(),
            VERSION_URI => env!("CARGO_PKG_VERSION").to_owned(),
            _ => match uri.strip_prefix(ECHO_RESOURCE_PREFIX) {
                Some(text) => text.to_owned(),
                None => {
                    return Err(ErrorData::resource_not_found(
                        format!("unknown resource `{uri}`"),
                        None,
                    ));
                }
            },
        };
        let contents = ResourceContents::text(text, uri).with_mime_type("text/plain");
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let known = self
            .shared
            .catalog()
            .by_name
            .get(request.name.as_ref())
            .copied();
        let Some(kind) = known else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{}`", request.name),
                None,
            ));
        };
        let Ok(_turn) = self.shared.admit_call(&context.ct).await else {
            return Ok(cancelled_result().into());
        };
        if !self.shared.call_delay.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(self.shared.call_delay) => {}
                () = context.ct.cancelled() => return Ok(cancelled_result().into()),
            }
        }
        let empty = JsonObject::new();
        let arguments = request.arguments.as_ref().unwrap_or(&empty);
        let result = match kind {
            FixtureTool::Echo => text_result(required_str(arguments, "text")?),
            FixtureTool::Add => add(arguments)?,
            FixtureTool::Fail => CallToolResult::error(vec![ContentBlock::text(
                optional_str(arguments, "message")?.unwrap_or("fixture failure"),
            )]),
            FixtureTool::Sleep => sleep(required_u64(arguments, "ms")?, &context).await,
            FixtureTool::Crash => {
                let code = optional_i64(arguments, "code")?.unwrap_or(1);
                std::process::exit(i32::try_from(code).unwrap_or(1));
            }
            FixtureTool::Stderr => write_stderr(arguments).await?,
            FixtureTool::Env => {
                let name = required_str(arguments, "name")?;
                match std::env::var_os(name) {
                    Some(value) => text_result(&value.to_string_lossy()),
                    None => CallToolResult::error(vec![ContentBlock::text(format!(
                        "environment variable `{name}` is not set"
                    ))]),
                }
            }
            FixtureTool::NotifyToolsChanged => {
                let added = self.add_tool_later();
                // A client that stopped listening is no reason to fail the call.
                let _ = context.peer.notify_tool_list_changed().await;
                let mut result = text_result("announced a tool list change");
                result.structured_content = Some(json!({ "added": added }));
                result
            }
            FixtureTool::DropSession => self.drop_session(&context),
            FixtureTool::AddedLater => text_result("added later"),
            FixtureTool::Extra => text_result(&Value::Object(arguments.clone()).to_string()),
        };
        Ok(result.into())
    }
}

fn text_result(text: &str) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

fn cancelled_result() -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text("cancelled")])
}

fn add(arguments: &JsonObject) -> Result<CallToolResult, ErrorData> {
    let a = required_number(arguments, "a")?;
    let b = required_number(arguments, "b")?;
    // Integers stay integers, so that 2 + 3 answers "5" and not "5.0".
    let sum = match (a.as_i64(), b.as_i64()) {
        (Some(a), Some(b)) if a.checked_add(b).is_some() => json!(a + b),
        _ => json!(a.as_f64().unwrap_or(f64::NAN) + b.as_f64().unwrap_or(f64::NAN)),
    };
    let mut result = text_result(&sum.to_string());
    result.structured_content = Some(json!({ "sum": sum }));
    Ok(result)
}

async fn sleep(ms: u64, context: &RequestContext<RoleServer>) -> CallToolResult {
    let total = Duration::from_millis(ms);
    let started = tokio::time::Instant::now();
    let progress_token = context.meta.get_progress_token();
    let steps = if progress_token.is_some() {
        SLEEP_PROGRESS_STEPS
    } else {
        1
    };
    for step in 0..steps {
        if let Some(token) = &progress_token {
            let done = ms * u64::from(step) / u64::from(steps);
            let progress = ProgressNotificationParam::new(token.clone(), done as f64)
                .with_total(ms as f64)
                .with_message(format!("slept {done} of {ms} ms"));
            // A client that stopped listening is no reason to stop sleeping.
            let _ = context.peer.notify_progress(progress).await;
        }
        let until = started + total * (step + 1) / steps;
        tokio::select! {
            () = tokio::time::sleep_until(until) => {}
            () = context.ct.cancelled() => {
                // Lets tests see that the cancellation reached the server, not just the client.
                eprintln!("fixture sleep cancelled");
                return cancelled_result();
            }
        }
    }
    text_result(&format!("slept {ms}"))
}

async fn write_stderr(arguments: &JsonObject) -> Result<CallToolResult, ErrorData> {
    let bytes = optional_u64(arguments, "bytes")?;
    let invalid_utf8 = match arguments.get("invalid_utf8") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => *flag,
        Some(_) => return Err(invalid_argument("invalid_utf8", "a boolean")),
    };
    let lines = optional_u64(arguments, "lines")?.unwrap_or(1);
    let text = optional_str(arguments, "text")?.map(str::to_owned);
    if lines > STDERR_MAX_LINES {
        return Err(invalid_argument("lines", "at most 1000000"));
    }
    if bytes.is_some_and(|bytes| bytes > STDERR_MAX_BYTES) {
        return Err(invalid_argument("bytes", "at most 67108864"));
    }
    // stderr may be a pipe nobody drains fast enough: block a pool thread, not the runtime.
    let written = tokio::task::spawn_blocking(move || -> std::io::Result<u64> {
        let mut stderr = std::io::BufWriter::with_capacity(64 * 1024, std::io::stderr().lock());
        let written = if let Some(bytes) = bytes {
            let line = vec![b'x'; usize::try_from(bytes).unwrap_or(usize::MAX)];
            stderr.write_all(&line)?;
            stderr.write_all(b"\n")?;
            1
        } else if invalid_utf8 {
            stderr.write_all(b"fixture invalid utf8 \xff\xfe end\n")?;
            1
        } else {
            for index in 0..lines {
                match &text {
                    Some(text) => writeln!(stderr, "{text}")?,
                    None => writeln!(stderr, "fixture line {index}")?,
                }
            }
            lines
        };
        stderr.flush()?;
        Ok(written)
    })
    .await
    .map_err(|error| ErrorData::internal_error(format!("stderr writer failed: {error}"), None))?
    .map_err(|error| ErrorData::internal_error(format!("writing stderr failed: {error}"), None))?;
    let mut result = text_result(&format!("wrote {written} lines"));
    result.structured_content = Some(json!({ "lines": written }));
    Ok(result)
}

fn invalid_argument(name: &str, expected: &str) -> ErrorData {
    ErrorData::invalid_params(format!("argument `{name}` must be {expected}"), None)
}

fn required_str<'a>(arguments: &'a JsonObject, name: &str) -> Result<&'a str, ErrorData> {
    optional_str(arguments, name)?.ok_or_else(|| invalid_argument(name, "a string"))
}

fn optional_str<'a>(arguments: &'a JsonObject, name: &str) -> Result<Option<&'a str>, ErrorData> {
    match arguments.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(invalid_argument(name, "a string")),
    }
}

fn required_number<'a>(
    arguments: &'a JsonObject,
    name: &str,
) -> Result<&'a serde_json::Number, ErrorData> {
    match arguments.get(name) {
        Some(Value::Number(number)) => Ok(number),
        _ => Err(invalid_argument(name, "a number")),
    }
}

fn required_u64(arguments: &JsonObject, name: &str) -> Result<u64, ErrorData> {
    optional_u64(arguments, name)?.ok_or_else(|| invalid_argument(name, "a non-negative integer"))
}

fn optional_u64(arguments: &JsonObject, name: &str) -> Result<Option<u64>, ErrorData> {
    match arguments.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .map(Some)
            .ok_or_else(|| invalid_argument(name, "a non-negative integer")),
    }
}

fn optional_i64(arguments: &JsonObject, name: &str) -> Result<Option<i64>, ErrorData> {
    match arguments.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_i64()
            .map(Some)
            .ok_or_else(|| invalid_argument(name, "an integer")),
    }
}

/// The path of the `mcpgw-fixture-server` binary, built on first use when it is missing or
/// older than its sources.
///
/// Cargo builds a package's binaries only for that package's own tests, so tests elsewhere
/// call this. It looks next to the running test executable (`target/<profile>/deps/<test>`
/// gives `target/<profile>/mcpgw-fixture-server`) and otherwise runs
/// `cargo build -p mcpgw-testkit --bin mcpgw-fixture-server` once per process.
/// [`FIXTURE_BINARY_ENV`] overrides the search.
///
/// # Panics
///
/// When the binary can neither be found nor built: a test that needs a real server must fail
/// loudly rather than skip.
pub fn fixture_server_binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            crate::binaries::workspace_binary(
                FIXTURE_BINARY_NAME,
                FIXTURE_BINARY_ENV,
                &["src/fixture.rs", "src/bin/mcpgw-fixture-server.rs"],
            )
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<FixtureOptions, String> {
        FixtureOptions::parse_args(args.iter().map(|arg| (*arg).to_owned()))
    }

    #[test]
    fn parses_every_option() {
        let options = parse(&[
            "--exit-at-start",
            "2",
            "--stderr-at-start",
            "3",
            "--wait-for-file",
            "/tmp/gate",
            "--tools-prefix",
            "a_",
            "--extra-tools",
            "5",
            "--page-size",
            "2",
            "--no-handshake",
            "--delay-ms",
            "7",
            "--serial",
        ])
        .unwrap();
        assert_eq!(options.exit_at_start, Some(2));
        assert_eq!(options.stderr_at_start, 3);
        assert_eq!(options.wait_for_file, Some(PathBuf::from("/tmp/gate")));
        assert_eq!(options.tools_prefix, "a_");
        assert_eq!(options.extra_tools, 5);
        assert_eq!(options.page_size, Some(2));
        assert!(options.no_handshake);
        assert_eq!(options.call_delay, Duration::from_millis(7));
        assert!(options.serial);
        assert_eq!(parse(&[]).unwrap(), FixtureOptions::default());
        assert!(
            !parse(&["--delay-ms", "5"]).unwrap().serial,
            "off unless asked for"
        );
        assert!(
            parse(&["--http", "0", "--serial"]).unwrap().serial,
            "both modes"
        );
    }

    #[tokio::test]
    async fn serial_calls_wait_for_the_one_before_them() {
        use futures::FutureExt as _;
        let serial = FixtureServer::new(&parse(&["--serial"]).unwrap());
        let never_cancelled = CancellationToken::new();
        let first = serial.shared.admit_call(&never_cancelled).await.unwrap();
        assert!(first.is_some(), "a serial call holds the one permit");
        assert!(
            serial
                .shared
                .admit_call(&never_cancelled)
                .now_or_never()
                .is_none(),
            "a second call must wait while the first runs"
        );
        // A call cancelled while it waits gives up its place instead of running later.
        let cancelled = CancellationToken::new();
        cancelled.cancel();
        assert_eq!(
            serial.shared.admit_call(&cancelled).await.unwrap_err(),
            CallCancelled
        );
        drop(first);
        let second = serial.shared.admit_call(&never_cancelled).now_or_never();
        assert!(
            matches!(second, Some(Ok(Some(_)))),
            "the next call runs once the first has answered"
        );

        // Without the flag, calls never wait for each other.
        let concurrent = FixtureServer::new(&FixtureOptions::default());
        let held = concurrent
            .shared
            .admit_call(&never_cancelled)
            .await
            .unwrap();
        assert!(held.is_none());
        assert!(matches!(
            concurrent
                .shared
                .admit_call(&never_cancelled)
                .now_or_never(),
            Some(Ok(None))
        ));
    }

    #[test]
    fn rejects_unknown_options_and_bad_values() {
        assert!(
            parse(&["--bogus"])
                .unwrap_err()
                .contains("unknown option `--bogus`")
        );
        assert!(
            parse(&["--page-size"])
                .unwrap_err()
                .contains("needs a value")
        );
        assert!(
            parse(&["--page-size", "0"])
                .unwrap_err()
                .contains("at least 1")
        );
        assert!(
            parse(&["--delay-ms", "soon"])
                .unwrap_err()
                .contains("takes a number")
        );
    }

    #[test]
    fn prefixes_every_tool_and_adds_extra_tools() {
        let options = FixtureOptions {
            tools_prefix: "p_".to_owned(),
            extra_tools: 2,
            ..FixtureOptions::default()
        };
        let server = FixtureServer::new(&options);
        let names = |server: &FixtureServer| -> Vec<String> {
            let catalog = server.shared.catalog();
            catalog
                .tools
                .iter()
                .map(|tool| tool.name.to_string())
                .collect()
        };
        assert_eq!(
            names(&server),
            [
                "p_echo",
                "p_add",
                "p_fail",
                "p_sleep",
                "p_crash",
                "p_stderr",
                "p_env",
                "p_notify_tools_changed",
                "p_drop_session",
                "p_tool_0",
                "p_tool_1"
            ]
        );
        assert!(server.add_tool_later());
        assert!(!server.add_tool_later(), "added once only");
        assert_eq!(
            names(&server).last().map(String::as_str),
            Some("p_added_later")
        );
    }

    #[test]
    fn parses_the_http_options() {
        let options = parse(&[
            "--http",
            "0",
            "--require-header",
            "Authorization=Bearer a=b",
            "--require-header",
            "X-Tenant=t1",
        ])
        .unwrap();
        assert_eq!(options.http_port, Some(0));
        assert_eq!(
            options.required_headers,
            [
                ("Authorization".to_owned(), "Bearer a=b".to_owned()),
                ("X-Tenant".to_owned(), "t1".to_owned())
            ]
        );
        assert!(
            parse(&["--http", "0", "--require-header", "novalue"])
                .unwrap_err()
                .contains("NAME=VALUE")
        );
        assert!(
            parse(&["--require-header", "A=b"])
                .unwrap_err()
                .contains("only with `--http`")
        );
        assert!(
            parse(&["--http", "0", "--no-handshake"])
                .unwrap_err()
                .contains("only over stdio")
        );
        assert!(
            parse(&["--http", "70000"])
                .unwrap_err()
                .contains("takes a number")
        );
    }

    #[test]
    fn pages_follow_the_cursor_to_the_end() {
        let items = [1, 2, 3];
        let cursor = |cursor: &str| {
            Some(PaginatedRequestParams::default().with_cursor(Some(cursor.to_owned())))
        };
        assert_eq!(page_of(&items, None, None).unwrap(), (vec![1, 2, 3], None));
        assert_eq!(
            page_of(&items, Some(2), None).unwrap(),
            (vec![1, 2], Some("2".to_owned()))
        );
        assert_eq!(
            page_of(&items, Some(2), cursor("2")).unwrap(),
            (vec![3], None)
        );
        assert!(page_of(&items, Some(2), cursor("9")).is_err());
    }

    #[test]
    fn adds_integers_as_integers_and_floats_as_floats() {
        let sum = |a: Value, b: Value| {
            let arguments = object(json!({"a": a, "b": b}));
            add(&arguments).unwrap().structured_content.unwrap()
        };
        assert_eq!(sum(json!(2), json!(3)), json!({"sum": 5}));
        assert_eq!(sum(json!(0.5), json!(2)), json!({"sum": 2.5}));
        assert!(add(&object(json!({"a": "2", "b": 3}))).is_err());
    }
}
