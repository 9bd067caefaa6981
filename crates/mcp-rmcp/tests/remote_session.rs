//! The remote launcher against real Streamable HTTP endpoints: the testkit's fixture server in
//! its HTTP mode, and plain TCP listeners that misbehave.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpgw_core::logs::LogBuffer;
use mcpgw_core::{
    CallContext, ClientAuth, LaunchError, LaunchSpec, McpSession, ProgressUpdate, ServerId,
    ServerLauncher, ServerSpec, SessionError, SessionErrorKind, SubjectToken, TokenExchange,
    ToolCall, ToolCallOutcome,
};
use mcpgw_fixtures::fixture::{FIXTURE_LISTENING_PREFIX, fixture_server_binary};
use mcpgw_mcp_rmcp::{RemoteLauncher, RemoteSettings, RmcpSession, TokenExchangeSession};
use mcpgw_testkit::clock::FakeClock;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use tokio::process::{Child, Command};
use tokio::sync::watch;

/// Generous, because the test machines are small and shared; the assertions that are about
/// speed use their own, tighter bounds.
const DEADLINE: Duration = Duration::from_secs(10);

/// A fixture server serving Streamable HTTP, and what it wrote to stderr so far.
struct HttpFixture {
    child: Child,
    endpoint: String,
    stderr_lines: watch::Receiver<Vec<String>>,
}

impl HttpFixture {
    async fn start(args: &[&str]) -> Self {
        let binary = fixture_server_binary();
        let mut child = Command::new(&binary)
            .args(["--http", "0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", binary.display()));
        let stderr = child.stderr.take().expect("stderr is piped");
        let (sender, stderr_lines) = watch::channel(Vec::new());
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                sender.send_modify(|lines| lines.push(line));
            }
        });
        let mut fixture = Self {
            child,
            endpoint: String::new(),
            stderr_lines,
        };
        let listening = fixture
            .wait_for_stderr(|line| line.starts_with(FIXTURE_LISTENING_PREFIX))
            .await;
        fixture.endpoint = listening[FIXTURE_LISTENING_PREFIX.len()..].to_owned();
        fixture
    }

    async fn wait_for_stderr(&self, wanted: impl Fn(&str) -> bool) -> String {
        let mut lines = self.stderr_lines.clone();
        let found = tokio::time::timeout(
            DEADLINE,
            lines.wait_for(|lines| lines.iter().any(|line| wanted(line))),
        )
        .await;
        assert!(
            matches!(found, Ok(Ok(_))),
            "the fixture never wrote the expected line to stderr; it wrote {:?}",
            self.stderr_lines.borrow()
        );
        self.stderr_lines
            .borrow()
            .iter()
            .find(|line| wanted(line))
            .cloned()
            .expect("found above")
    }

    async fn kill(&mut self) {
        self.child.kill().await.expect("the fixture can be killed");
    }
}

fn server_id() -> ServerId {
    ServerId::parse("remote").unwrap()
}

fn no_headers() -> BTreeMap<String, String> {
    BTreeMap::new()
}

fn bearer(token: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("Authorization".to_owned(), format!("Bearer {token}"))])
}

/// Fails the test instead of hanging it when a broken session never answers.
async fn within<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, future)
        .await
        .expect("no answer within the test deadline")
}

async fn connect(fixture: &HttpFixture) -> RmcpSession {
    within(RemoteLauncher::default().connect_session(
        &server_id(),
        &fixture.endpoint,
        &no_headers(),
    ))
    .await
    .expect("the fixture completes the handshake over http")
}

async fn launch_error(
    launcher: &RemoteLauncher,
    endpoint: &str,
    headers: &BTreeMap<String, String>,
) -> LaunchError {
    match within(launcher.connect_session(&server_id(), endpoint, headers)).await {
        Ok(_) => panic!("connecting to {endpoint} must fail"),
        Err(error) => error,
    }
}

fn arguments(arguments: Value) -> Option<serde_json::Map<String, Value>> {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    Some(arguments)
}

async fn call(
    session: &dyn McpSession,
    name: &str,
    args: Value,
) -> Result<ToolCallOutcome, SessionError> {
    let call = ToolCall {
        name: name.to_owned(),
        arguments: arguments(args),
    };
    within(session.call_tool(call, CallContext::default())).await
}

fn first_text(outcome: &ToolCallOutcome) -> &str {
    outcome.result["content"][0]["text"]
        .as_str()
        .expect("a text content block")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_calls_and_pings_over_streamable_http() {
    let fixture = HttpFixture::start(&["--page-size", "3"]).await;
    let session = connect(&fixture).await;
    assert_eq!(
        session.server_info().unwrap()["name"],
        mcpgw_fixtures::fixture::FIXTURE_SERVER_NAME
    );

    let tools = within(session.list_tools()).await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "echo",
            "add",
            "fail",
            "sleep",
            "crash",
            "stderr",
            "env",
            "notify_tools_changed",
            "drop_session",
            "roots"
        ],
        "every page"
    );

    let echo = call(&session, "echo", json!({"text": "over http"}))
        .await
        .unwrap();
    assert_eq!(first_text(&echo), "over http");
    let add = call(&session, "add", json!({"a": 2, "b": 3}))
        .await
        .unwrap();
    assert_eq!(add.result["structuredContent"], json!({"sum": 5}));
    let fail = call(&session, "fail", json!({"message": "no"}))
        .await
        .unwrap();
    assert!(fail.is_error);
    let unknown = call(&session, "nope", json!({})).await.unwrap_err();
    assert_eq!(unknown.kind, SessionErrorKind::Protocol { code: -32602 });

    within(session.ping()).await.unwrap();

    let prompts = within(session.list_prompts()).await.unwrap();
    assert_eq!(prompts.len(), 2);
    let resource = within(session.read_resource("fixture://readme", CallContext::default()))
        .await
        .unwrap();
    assert_eq!(resource["contents"][0]["uri"], "fixture://readme");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_callers_handler_in_order_over_http() {
    let fixture = HttpFixture::start(&[]).await;
    let session = connect(&fixture).await;
    let updates = Arc::new(Mutex::new(Vec::<ProgressUpdate>::new()));
    let sink = Arc::clone(&updates);
    let ctx = CallContext {
        progress: Some(Arc::new(move |update| sink.lock().unwrap().push(update))),
        ..CallContext::default()
    };
    let call = ToolCall {
        name: "sleep".to_owned(),
        arguments: arguments(json!({"ms": 200})),
    };
    let outcome = within(session.call_tool(call, ctx)).await.unwrap();
    assert_eq!(first_text(&outcome), "slept 200");
    let progress: Vec<f64> = updates
        .lock()
        .unwrap()
        .iter()
        .map(|update| update.progress)
        .collect();
    assert_eq!(progress, [0.0, 50.0, 100.0, 150.0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_call_cancels_it_upstream_over_http() {
    let fixture = HttpFixture::start(&[]).await;
    let session = connect(&fixture).await;
    let cancellation = tokio_util::sync::CancellationToken::new();
    // Cancel once the server is working on the call: its first progress says so.
    let cancel_on_progress = cancellation.clone();
    let ctx = CallContext {
        cancellation: cancellation.clone(),
        progress: Some(Arc::new(move |_update| cancel_on_progress.cancel())),
        ..CallContext::default()
    };
    let call = ToolCall {
        name: "sleep".to_owned(),
        arguments: arguments(json!({"ms": 10_000})),
    };
    let started = Instant::now();
    let cancelled = within(session.call_tool(call, ctx)).await.unwrap_err();
    assert_eq!(cancelled.kind, SessionErrorKind::Cancelled);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    fixture
        .wait_for_stderr(|line| line == "fixture sleep cancelled")
        .await;
    assert_eq!(
        first_text(&call_echo(&session).await.unwrap()),
        "still here"
    );
}

async fn call_echo(session: &dyn McpSession) -> Result<ToolCallOutcome, SessionError> {
    call(session, "echo", json!({"text": "still here"})).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_list_changes_arrive_over_http() {
    let fixture = HttpFixture::start(&[]).await;
    let session = connect(&fixture).await;
    let mut changes = session.tool_list_changes().unwrap();
    call(&session, "notify_tools_changed", json!({}))
        .await
        .unwrap();
    within(changes.wait_for(|count| *count >= 1))
        .await
        .expect("the session is alive");
    let tools = within(session.list_tools()).await.unwrap();
    assert_eq!(tools.last().unwrap().name, "added_later");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_timeout_fails_the_call_and_keeps_the_session() {
    let fixture = HttpFixture::start(&[]).await;
    let launcher = RemoteLauncher::new(
        RemoteSettings::default().with_request_timeout(Some(Duration::from_millis(300))),
    );
    let session = within(launcher.connect_session(&server_id(), &fixture.endpoint, &no_headers()))
        .await
        .unwrap();
    let slow = call(&session, "sleep", json!({"ms": 5_000}))
        .await
        .unwrap_err();
    assert_eq!(slow.kind, SessionErrorKind::Timeout, "{}", slow.message);
    // A slow server is not a dead one.
    assert_eq!(
        first_text(&call_echo(&session).await.unwrap()),
        "still here"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_headers_are_sent_and_never_shown() {
    let fixture = HttpFixture::start(&["--require-header", "Authorization=Bearer s3cret"]).await;
    let launcher = RemoteLauncher::default();

    let session =
        within(launcher.connect_session(&server_id(), &fixture.endpoint, &bearer("s3cret")))
            .await
            .expect("the right header opens the session");
    // Every request carries the header, not only `initialize`.
    assert_eq!(
        first_text(&call_echo(&session).await.unwrap()),
        "still here"
    );
    within(session.list_tools()).await.unwrap();
    within(session.ping()).await.unwrap();

    let without = launch_error(&launcher, &fixture.endpoint, &no_headers()).await;
    let message = without.to_string();
    assert!(matches!(without, LaunchError::Handshake(_)), "{without:?}");
    assert!(message.contains(&fixture.endpoint), "{message}");
    assert!(message.contains("401"), "{message}");
    assert!(message.contains("headers"), "{message}");
    assert!(!message.contains("s3cret"), "{message}");

    let wrong = launch_error(&launcher, &fixture.endpoint, &bearer("guess")).await;
    let message = wrong.to_string();
    assert!(message.contains("401"), "{message}");
    assert!(
        !message.contains("guess") && !message.contains("s3cret"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_fails_at_once_naming_the_endpoint() {
    // A port that was free a moment ago and has no listener now.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}/mcp", listener.local_addr().unwrap());
    drop(listener);

    let started = Instant::now();
    let error = launch_error(&RemoteLauncher::default(), &endpoint, &bearer("s3cret")).await;
    let message = error.to_string();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    assert!(matches!(error, LaunchError::Other(_)), "{error:?}");
    assert!(message.contains(&endpoint), "{message}");
    assert!(
        message.to_lowercase().contains("connection refused"),
        "{message}"
    );
    assert!(!message.contains("s3cret"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_that_never_answers_times_out_within_the_connect_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}/mcp", listener.local_addr().unwrap());
    // Accepts every connection and holds it open without a byte in reply.
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });

    let connect_timeout = Duration::from_millis(500);
    let launcher =
        RemoteLauncher::new(RemoteSettings::default().with_connect_timeout(connect_timeout));
    let started = Instant::now();
    let error = launch_error(&launcher, &endpoint, &no_headers()).await;
    let waited = started.elapsed();
    assert!(
        matches!(error, LaunchError::Timeout(timeout) if timeout == connect_timeout),
        "{error:?}"
    );
    assert!(waited >= connect_timeout, "gave up early: {waited:?}");
    assert!(waited < Duration::from_secs(3), "took {waited:?}");
    holder.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_that_is_not_mcp_is_named_in_the_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}/mcp", listener.local_addr().unwrap());
    let web_page = tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = vec![0_u8; 64 * 1024];
                let _ = socket.read(&mut request).await;
                let body = "<html>hello</html>";
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\n\
                     connection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });

    let error = launch_error(&RemoteLauncher::default(), &endpoint, &no_headers()).await;
    let message = error.to_string();
    assert!(matches!(error, LaunchError::Handshake(_)), "{error:?}");
    assert!(message.contains(&endpoint), "{message}");
    assert!(message.contains("text/html"), "{message}");
    assert!(message.contains("MCP Streamable HTTP"), "{message}");
    web_page.abort();
}

/// Killing the server ends the session on its own: the standalone event stream breaks, its
/// reconnection is refused, and `closed` completes without any request. A call in flight at
/// that moment fails with a transport error, and so does every later one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_server_ends_the_session_and_fails_calls_in_flight() {
    let mut fixture = HttpFixture::start(&[]).await;
    let session: Arc<dyn McpSession> = Arc::new(connect(&fixture).await);

    let (working_sender, mut working) = watch::channel(false);
    let ctx = CallContext {
        progress: Some(Arc::new(move |_update| {
            let _ = working_sender.send(true);
        })),
        ..CallContext::default()
    };
    let in_flight = tokio::spawn({
        let session = Arc::clone(&session);
        async move {
            let call = ToolCall {
                name: "sleep".to_owned(),
                arguments: arguments(json!({"ms": 30_000})),
            };
            session.call_tool(call, ctx).await
        }
    });
    within(working.wait_for(|working| *working)).await.unwrap();

    fixture.kill().await;

    let failed = within(in_flight).await.unwrap().unwrap_err();
    assert_eq!(
        failed.kind,
        SessionErrorKind::Transport,
        "{}",
        failed.message
    );
    let exit = within(session.closed()).await;
    assert!(
        exit.description.contains(&fixture.endpoint),
        "{}",
        exit.description
    );
    let after = call_echo(session.as_ref()).await.unwrap_err();
    assert_eq!(after.kind, SessionErrorKind::Transport, "{}", after.message);
    let ping = within(session.ping()).await.unwrap_err();
    assert!(ping.kind.counts_against_health());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_an_idle_server_completes_closed_without_a_request() {
    let mut fixture = HttpFixture::start(&[]).await;
    let session = connect(&fixture).await;
    fixture.kill().await;
    let exit = within(session.closed()).await;
    assert!(
        exit.description.contains("cannot be reached") || exit.description.contains("broke"),
        "{}",
        exit.description
    );
    let after = call_echo(&session).await.unwrap_err();
    assert_eq!(after.kind, SessionErrorKind::Transport, "{}", after.message);
}

/// A server that forgets the session (it restarted, or expired it) answers 404 on the session
/// id: the session ends instead of silently starting over, so the manager sees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_drops_the_session_ends_it() {
    let fixture = HttpFixture::start(&[]).await;
    let session = connect(&fixture).await;
    let dropping = call(&session, "drop_session", json!({})).await.unwrap();
    assert!(!dropping.is_error, "{:?}", dropping.result);
    fixture
        .wait_for_stderr(|line| line.starts_with("fixture dropped session"))
        .await;

    let exit = within(session.closed()).await;
    assert!(exit.description.contains("404"), "{}", exit.description);
    let after = call_echo(&session).await.unwrap_err();
    assert_eq!(after.kind, SessionErrorKind::Transport, "{}", after.message);

    // The server itself is fine: a new session works.
    let again = connect(&fixture).await;
    assert_eq!(first_text(&call_echo(&again).await.unwrap()), "still here");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_ends_the_session_and_is_idempotent() {
    let fixture = HttpFixture::start(&[]).await;
    let session = connect(&fixture).await;
    within(session.close()).await;
    within(session.close()).await;
    assert_eq!(
        within(session.closed()).await.description,
        "the session was closed by the gateway"
    );
    let after = call_echo(&session).await.unwrap_err();
    assert_eq!(after.kind, SessionErrorKind::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_launcher_serves_remote_specs_only() {
    let fixture = HttpFixture::start(&[]).await;
    let launcher = RemoteLauncher::default();
    let logs = Arc::new(LogBuffer::new(server_id(), Arc::new(FakeClock::new())));

    let mut spec = ServerSpec::subprocess(server_id(), vec!["true".to_owned()]);
    let unsupported = match launcher.launch(&spec, Arc::clone(&logs)).await {
        Ok(_) => panic!("a subprocess spec is not the remote launcher's"),
        Err(error) => error,
    };
    assert!(
        matches!(unsupported, LaunchError::UnsupportedMode(ref mode) if mode == "subprocess"),
        "{unsupported:?}"
    );

    spec.launch = LaunchSpec::Remote {
        endpoint: fixture.endpoint.clone(),
        headers: BTreeMap::new(),
        token_exchange: None,
    };
    let launched = within(launcher.launch(&spec, logs)).await.unwrap();
    assert_eq!(
        first_text(&call_echo(launched.session.as_ref()).await.unwrap()),
        "still here"
    );
    launched.session.close().await;
}

// --- Token exchange: one upstream session per caller ---------------------------------------

/// A token endpoint that answers every request with a token, as an authorization server that
/// grants every exchange does; its URL.
async fn start_token_endpoint() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/token", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut chunk = [0_u8; 4096];
                loop {
                    let Ok(read) = stream.read(&mut chunk).await else {
                        return;
                    };
                    if read == 0 {
                        return;
                    }
                    request.extend_from_slice(&chunk[..read]);
                    let text = String::from_utf8_lossy(&request);
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text[..end]
                            .lines()
                            .find_map(|line| {
                                let (name, value) = line.split_once(':')?;
                                name.eq_ignore_ascii_case("content-length")
                                    .then(|| value.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        if request.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                let body = r#"{"access_token":"exchanged","token_type":"Bearer","expires_in":300}"#;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    url
}

async fn connect_exchanging(fixture: &HttpFixture, caller_idle: Duration) -> TokenExchangeSession {
    let exchange = TokenExchange {
        token_endpoint: start_token_endpoint().await,
        client_id: "mcpgw".to_owned(),
        client_secret: "s3cret".to_owned(),
        client_auth: ClientAuth::default(),
        resource: None,
        audience: None,
        scope: None,
    };
    within(RemoteLauncher::default().connect_session_as(
        &server_id(),
        &fixture.endpoint,
        &no_headers(),
        &exchange,
        caller_idle,
    ))
    .await
    .expect("the fixture completes the handshake over http")
}

/// A call's context for `principal`, who signed in with `token`.
fn signed_in(principal: &str, token: &str) -> CallContext {
    CallContext {
        principal: Some(principal.to_owned()),
        subject_token: Some(SubjectToken::new(token)),
        ..CallContext::default()
    }
}

async fn call_as(
    session: &dyn McpSession,
    ctx: CallContext,
    name: &str,
    args: Value,
) -> Result<ToolCallOutcome, SessionError> {
    let call = ToolCall {
        name: name.to_owned(),
        arguments: arguments(args),
    };
    within(session.call_tool(call, ctx)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_caller_gets_a_session_and_one_the_server_forgot_is_opened_anew_under_the_call() {
    let fixture = HttpFixture::start(&[]).await;
    let session = connect_exchanging(&fixture, Duration::from_secs(300)).await;
    let echo = json!({"text": "still here"});
    let alice = || signed_in("user:alice", "alice-token");

    assert_eq!(
        session.caller_sessions(),
        0,
        "callers' sessions open on use"
    );
    let answer = call_as(&session, alice(), "echo", echo.clone()).await;
    assert_eq!(first_text(&answer.unwrap()), "still here");
    assert_eq!(session.caller_sessions(), 1);
    // A refreshed token of the same principal keeps the session.
    let refreshed = signed_in("user:alice", "alice-refreshed-token");
    call_as(&session, refreshed, "echo", echo.clone())
        .await
        .unwrap();
    assert_eq!(session.caller_sessions(), 1);
    let bob = signed_in("user:bob", "bob-token");
    call_as(&session, bob, "echo", echo.clone()).await.unwrap();
    assert_eq!(session.caller_sessions(), 2);

    // The server forgets alice's session: her next call meets HTTP 404, and goes through on a
    // session initialized anew, without the caller noticing.
    let dropping = call_as(&session, alice(), "drop_session", json!({})).await;
    assert!(!dropping.unwrap().is_error);
    fixture
        .wait_for_stderr(|line| line.starts_with("fixture dropped session"))
        .await;
    let answer = call_as(&session, alice(), "echo", echo.clone()).await;
    assert_eq!(first_text(&answer.unwrap()), "still here");
    assert_eq!(session.caller_sessions(), 2);
    assert!(
        !session.has_ended(),
        "the gateway's own session is not touched"
    );
    assert!(
        session
            .list_tools()
            .await
            .unwrap()
            .iter()
            .any(|tool| tool.name == "echo")
    );

    // Bad input: a caller without an access token (an API key) cannot be acted for.
    let refused = call_as(
        &session,
        CallContext {
            principal: Some("user:keyholder".to_owned()),
            ..CallContext::default()
        },
        "echo",
        echo.clone(),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.kind, SessionErrorKind::Protocol { code: -32600 });
    assert!(
        refused.message.contains("sign in with OAuth"),
        "{}",
        refused.message
    );
    let shown = format!("{session:?}");
    for secret in ["alice-token", "exchanged", "s3cret"] {
        assert!(!shown.contains(secret), "{shown}");
    }

    within(session.close()).await;
    assert_eq!(
        session.caller_sessions(),
        0,
        "closing the server closes them all"
    );
    let after = call_as(&session, alice(), "echo", echo).await.unwrap_err();
    assert_eq!(after.kind, SessionErrorKind::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_session_is_closed_once_idle_and_opened_again_on_use() {
    let fixture = HttpFixture::start(&[]).await;
    let session = connect_exchanging(&fixture, Duration::from_millis(300)).await;
    let echo = json!({"text": "still here"});
    call_as(&session, signed_in("user:alice", "t"), "echo", echo.clone())
        .await
        .unwrap();
    assert_eq!(session.caller_sessions(), 1);
    let started = Instant::now();
    while session.caller_sessions() > 0 {
        assert!(
            started.elapsed() < DEADLINE,
            "the idle caller's session was never closed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!session.has_ended(), "the server's own session stays");
    call_as(&session, signed_in("user:alice", "t"), "echo", echo)
        .await
        .unwrap();
    assert_eq!(session.caller_sessions(), 1);
    within(session.close()).await;
}
