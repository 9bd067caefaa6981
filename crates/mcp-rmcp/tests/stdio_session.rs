//! The rmcp stdio connector against a real MCP server process: the testkit's fixture server.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpgw_core::{
    ByteStreams, CallContext, InputRound, LaunchError, McpSession, ProgressUpdate, ServerId,
    ServerOutput, SessionErrorKind, StdioConnector, ToolCall, ToolCallOutcome,
};
use mcpgw_fixtures::fixture::fixture_server_binary;
use mcpgw_mcp_rmcp::{RmcpStdioConnector, StdioConnectorSettings};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt as _;
use tokio::process::{Child, Command};
use tokio::sync::watch;

/// Generous, because the test machines are small and shared; the assertions that are about
/// speed use their own, tighter bounds.
const DEADLINE: Duration = Duration::from_secs(10);

/// A running fixture server and what it wrote to stderr so far, one entry per line.
struct FixtureProcess {
    child: Child,
    stderr_lines: watch::Receiver<Vec<Vec<u8>>>,
}

impl FixtureProcess {
    fn spawn(args: &[&str]) -> (Self, ByteStreams) {
        Self::spawn_with_env(args, &[])
    }

    fn spawn_with_env(args: &[&str], env: &[(&str, &str)]) -> (Self, ByteStreams) {
        Self::spawn_binary(&fixture_server_binary(), args, env)
    }

    fn spawn_binary(
        binary: &std::path::Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> (Self, ByteStreams) {
        let mut child = Command::new(binary)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", binary.display()));
        let streams = ByteStreams {
            to_server: Box::pin(child.stdin.take().expect("stdin is piped")),
            from_server: ServerOutput::Pipe(
                child
                    .stdout
                    .take()
                    .expect("stdout is piped")
                    .into_owned_fd()
                    .expect("stdout is a pipe"),
            ),
        };
        let stderr = child.stderr.take().expect("stderr is piped");
        let (sender, stderr_lines) = watch::channel(Vec::new());
        tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(stderr);
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if line.last() == Some(&b'\n') {
                            line.pop();
                        }
                        sender.send_modify(|lines| lines.push(line));
                    }
                }
            }
        });
        (
            Self {
                child,
                stderr_lines,
            },
            streams,
        )
    }

    async fn wait_for_stderr(&self, wanted: &[u8]) {
        let mut lines = self.stderr_lines.clone();
        let found = tokio::time::timeout(
            DEADLINE,
            lines.wait_for(|lines| lines.iter().any(|line| line.as_slice() == wanted)),
        )
        .await;
        assert!(
            matches!(found, Ok(Ok(_))),
            "the fixture never wrote {:?} to stderr; it wrote {:?}",
            String::from_utf8_lossy(wanted),
            self.stderr_lines
                .borrow()
                .iter()
                .map(|line| String::from_utf8_lossy(line))
                .collect::<Vec<_>>()
        );
    }

    async fn wait_for_exit(&mut self) -> std::process::ExitStatus {
        tokio::time::timeout(DEADLINE, self.child.wait())
            .await
            .expect("the fixture did not exit in time")
            .expect("waiting for the fixture failed")
    }
}

/// Fails the test instead of hanging it when a broken session never answers.
async fn within<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, future)
        .await
        .expect("no answer within the test deadline")
}

fn server_id() -> ServerId {
    ServerId::parse("fixture").unwrap()
}

async fn connect(args: &[&str]) -> (FixtureProcess, Arc<dyn McpSession>) {
    let (process, streams) = FixtureProcess::spawn(args);
    let session = within(RmcpStdioConnector::default().connect(&server_id(), streams))
        .await
        .expect("the fixture completes the handshake");
    (process, session)
}

async fn call(
    session: &Arc<dyn McpSession>,
    name: &str,
    arguments: Value,
) -> Result<ToolCallOutcome, mcpgw_core::SessionError> {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    let call = ToolCall {
        name: name.to_owned(),
        arguments: Some(arguments),
    };
    tokio::time::timeout(DEADLINE, session.call_tool(call, CallContext::default()))
        .await
        .expect("the call was answered in time")
}

fn first_text(outcome: &ToolCallOutcome) -> &str {
    outcome.result["content"][0]["text"]
        .as_str()
        .expect("a text content block")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_every_tool_across_pages() {
    let (_process, session) = connect(&["--page-size", "2", "--extra-tools", "5"]).await;
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
            "roots",
            "tool_0",
            "tool_1",
            "tool_2",
            "tool_3",
            "tool_4"
        ]
    );
    let echo = &tools[0];
    assert_eq!(echo.input_schema["properties"]["text"]["type"], "string");
    assert_eq!(echo.description.as_deref(), Some("Answers the given text."));
    assert_eq!(
        tools[1].output_schema.as_ref().unwrap()["properties"]["sum"]["type"],
        "number"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefixed_tools_are_listed_and_called_by_their_prefixed_names() {
    let (_process, session) = connect(&["--tools-prefix", "b_"]).await;
    let tools = within(session.list_tools()).await.unwrap();
    assert!(
        tools.iter().all(|tool| tool.name.starts_with("b_")),
        "{tools:?}"
    );
    assert_eq!(
        first_text(
            &call(&session, "b_echo", json!({"text": "hi"}))
                .await
                .unwrap()
        ),
        "hi"
    );
    let unprefixed = call(&session, "echo", json!({"text": "hi"}))
        .await
        .unwrap_err();
    assert_eq!(unprefixed.kind, SessionErrorKind::Protocol { code: -32602 });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_add_and_fail_answer_as_documented() {
    let (process, session) = connect(&["--stderr-at-start", "3"]).await;
    process.wait_for_stderr(b"fixture start line 2").await;
    process.wait_for_stderr(b"fixture ready").await;

    let echo = call(&session, "echo", json!({"text": "hello"}))
        .await
        .unwrap();
    assert!(!echo.is_error);
    assert_eq!(first_text(&echo), "hello");

    let add = call(&session, "add", json!({"a": 2, "b": 3}))
        .await
        .unwrap();
    assert!(!add.is_error);
    assert_eq!(first_text(&add), "5");
    assert_eq!(add.result["structuredContent"], json!({"sum": 5}));

    let fail = call(&session, "fail", json!({"message": "it broke"}))
        .await
        .unwrap();
    assert!(
        fail.is_error,
        "a tool-level error is an answer with isError"
    );
    assert_eq!(fail.result["isError"], true);
    assert_eq!(first_text(&fail), "it broke");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_tools_and_bad_arguments_are_protocol_errors() {
    let (_process, session) = connect(&[]).await;
    let unknown = call(&session, "no_such_tool", json!({})).await.unwrap_err();
    assert_eq!(unknown.kind, SessionErrorKind::Protocol { code: -32602 });
    assert!(
        unknown.message.contains("no_such_tool"),
        "{}",
        unknown.message
    );

    let bad = call(&session, "add", json!({"a": "two", "b": 3}))
        .await
        .unwrap_err();
    assert_eq!(bad.kind, SessionErrorKind::Protocol { code: -32602 });

    // The server is fine after answering errors.
    assert_eq!(
        first_text(&call(&session, "echo", json!({"text": "ok"})).await.unwrap()),
        "ok"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_is_answered() {
    let (_process, session) = connect(&[]).await;
    tokio::time::timeout(DEADLINE, session.ping())
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_is_a_transport_error_and_ends_the_session() {
    let (mut process, session) = connect(&[]).await;
    let crash = call(&session, "crash", json!({"code": 3}))
        .await
        .unwrap_err();
    assert_eq!(crash.kind, SessionErrorKind::Transport, "{}", crash.message);
    assert_eq!(process.wait_for_exit().await.code(), Some(3));

    // `closed` completes, for several waiters at once.
    let (first, second) = tokio::time::timeout(DEADLINE, async {
        tokio::join!(session.closed(), session.closed())
    })
    .await
    .expect("closed() completes once the server is gone");
    assert_eq!(first.description, "the server closed the connection");
    assert_eq!(first, second);

    let after = call(&session, "echo", json!({"text": "anyone?"}))
        .await
        .unwrap_err();
    assert_eq!(after.kind, SessionErrorKind::Transport);
    let ping = within(session.ping()).await.unwrap_err();
    assert!(ping.kind.counts_against_health());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_ended_by_itself_stays_the_servers_failure_after_a_close() {
    let (_process, session) = connect(&[]).await;
    let sleeping = {
        let session = Arc::clone(&session);
        tokio::spawn(async move { call(&session, "sleep", json!({"ms": 30_000})).await })
    };
    let crash = call(&session, "crash", json!({"code": 3}))
        .await
        .unwrap_err();
    assert_eq!(crash.kind, SessionErrorKind::Transport, "{}", crash.message);
    // By the time a request fails with the end of the connection, the session says it ended,
    // so that the manager counts the end once instead of once per request.
    assert!(session.has_ended());
    // The gateway cleans up after the crash; the calls it cut short stay the server's failures.
    within(session.close()).await;
    let slept = sleeping.await.unwrap().unwrap_err();
    assert_eq!(slept.kind, SessionErrorKind::Transport, "{}", slept.message);
    let after = call(&session, "echo", json!({"text": "anyone?"}))
        .await
        .unwrap_err();
    assert_eq!(after.kind, SessionErrorKind::Transport, "{}", after.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_callers_handler_in_order() {
    let (_process, session) = connect(&[]).await;
    let updates = Arc::new(Mutex::new(Vec::<ProgressUpdate>::new()));
    let sink = Arc::clone(&updates);
    let ctx = CallContext {
        progress: Some(Arc::new(move |update| sink.lock().unwrap().push(update))),
        ..CallContext::default()
    };
    let call = ToolCall {
        name: "sleep".to_owned(),
        arguments: Some(json!({"ms": 200}).as_object().unwrap().clone()),
    };
    let outcome = tokio::time::timeout(DEADLINE, session.call_tool(call, ctx))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first_text(&outcome), "slept 200");

    // Every notification was sent before the answer, so all of them arrived before it, in order.
    let updates = updates.lock().unwrap();
    let progress: Vec<f64> = updates.iter().map(|update| update.progress).collect();
    assert_eq!(progress, [0.0, 50.0, 100.0, 150.0]);
    assert!(updates.iter().all(|update| update.total == Some(200.0)));
    assert_eq!(updates[1].message.as_deref(), Some("slept 50 of 200 ms"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_call_cancels_it_upstream_and_keeps_the_session() {
    let (process, session) = connect(&[]).await;
    let cancellation = tokio_util::sync::CancellationToken::new();
    let ctx = CallContext {
        cancellation: cancellation.clone(),
        ..CallContext::default()
    };
    let call = ToolCall {
        name: "sleep".to_owned(),
        arguments: Some(json!({"ms": 10_000}).as_object().unwrap().clone()),
    };
    let started = Instant::now();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancellation.cancel();
    });
    let cancelled = tokio::time::timeout(DEADLINE, session.call_tool(call, ctx))
        .await
        .unwrap()
        .unwrap_err();
    canceller.await.unwrap();
    assert_eq!(cancelled.kind, SessionErrorKind::Cancelled);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );

    // The server itself stopped sleeping: it says so on stderr.
    process.wait_for_stderr(b"fixture sleep cancelled").await;
    assert_eq!(first_text(&call_echo(&session).await), "still here");
}

async fn call_echo(session: &Arc<dyn McpSession>) -> ToolCallOutcome {
    call(session, "echo", json!({"text": "still here"}))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_ends_the_session_and_the_server_sees_end_of_input() {
    let (mut process, session) = connect(&[]).await;
    tokio::time::timeout(DEADLINE, session.close())
        .await
        .expect("close returns");
    tokio::time::timeout(DEADLINE, session.close())
        .await
        .expect("close is idempotent");
    assert_eq!(
        within(session.closed()).await.description,
        "the session was closed by the gateway"
    );
    let after = call(&session, "echo", json!({"text": "x"}))
        .await
        .unwrap_err();
    assert_eq!(after.kind, SessionErrorKind::Closed);
    // With its stdin closed, the fixture exits normally.
    assert!(process.wait_for_exit().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_initialize_times_out() {
    let (process, streams) = FixtureProcess::spawn(&["--no-handshake"]);
    process.wait_for_stderr(b"fixture ignoring all input").await;
    let timeout = Duration::from_millis(300);
    let connector =
        RmcpStdioConnector::new(StdioConnectorSettings::default().with_initialize_timeout(timeout));
    let started = Instant::now();
    let error = match within(connector.connect(&server_id(), streams)).await {
        Ok(_) => panic!("a server that ignores initialize must not connect"),
        Err(error) => error,
    };
    assert!(
        matches!(error, LaunchError::Timeout(waited) if waited == timeout),
        "{error:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_exits_at_start_fails_the_handshake() {
    let (mut process, streams) = FixtureProcess::spawn(&["--exit-at-start", "2"]);
    let connector = RmcpStdioConnector::default();
    let error = match within(connector.connect(&server_id(), streams)).await {
        Ok(_) => panic!("a server that exited must not connect"),
        Err(error) => error,
    };
    let LaunchError::Handshake(message) = &error else {
        panic!("expected a handshake error: {error:?}")
    };
    assert!(message.contains("the server closed"), "{message}");
    assert_eq!(process.wait_for_exit().await.code(), Some(2));
    process.wait_for_stderr(b"fixture exiting at start").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stderr_and_env_tools_do_what_tests_rely_on() {
    let (process, streams) =
        FixtureProcess::spawn_with_env(&[], &[("MCPGW_FIXTURE_TEST_VALUE", "forty-two")]);
    let session = within(RmcpStdioConnector::default().connect(&server_id(), streams))
        .await
        .unwrap();

    let env = call(&session, "env", json!({"name": "MCPGW_FIXTURE_TEST_VALUE"}))
        .await
        .unwrap();
    assert_eq!(first_text(&env), "forty-two");
    let unset = call(&session, "env", json!({"name": "MCPGW_FIXTURE_UNSET"}))
        .await
        .unwrap();
    assert!(unset.is_error);

    let lines = call(&session, "stderr", json!({"lines": 3})).await.unwrap();
    assert_eq!(lines.result["structuredContent"], json!({"lines": 3}));
    process.wait_for_stderr(b"fixture line 2").await;

    call(&session, "stderr", json!({"text": "custom", "lines": 1}))
        .await
        .unwrap();
    process.wait_for_stderr(b"custom").await;

    call(&session, "stderr", json!({"bytes": 10000}))
        .await
        .unwrap();
    process.wait_for_stderr(&[b'x'; 10000]).await;

    call(&session, "stderr", json!({"invalid_utf8": true}))
        .await
        .unwrap();
    process
        .wait_for_stderr(b"fixture invalid utf8 \xff\xfe end")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_ms_slows_every_call() {
    let (_process, session) = connect(&["--delay-ms", "300"]).await;
    let started = Instant::now();
    call_echo(&session).await;
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_brings_the_servers_resource_updates() {
    let (_process, session) = connect(&[]).await;
    // Taken before subscribing, so that the announcement that follows cannot be missed.
    let mut updates = session
        .resource_updates()
        .expect("the session tells of updates");
    within(session.subscribe_resource("fixture://readme"))
        .await
        .unwrap();
    assert_eq!(within(updates.recv()).await.unwrap(), "fixture://readme");
    within(session.unsubscribe_resource("fixture://readme"))
        .await
        .unwrap();
    // The announcements end with the session.
    session.close().await;
    drop(session);
    assert!(
        matches!(
            within(updates.recv()).await,
            Err(tokio::sync::broadcast::error::RecvError::Closed)
        ),
        "the receiver ends with the session"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_pass_through_to_a_server_that_offers_them() {
    let (_process, session) = connect(&[]).await;
    let prompt = json!({
        "ref": {"type": "ref/prompt", "name": "greeting"},
        "argument": {"name": "name", "value": "A"},
    });
    let answer = within(session.complete(prompt)).await.unwrap();
    assert_eq!(
        answer["completion"]["values"],
        json!(["Ada", "Alan"]),
        "{answer}"
    );
    assert_eq!(answer["completion"]["total"], 2);
    let template = json!({
        "ref": {"type": "ref/resource", "uri": "fixture://echo/{text}"},
        "argument": {"name": "text", "value": "hel"},
    });
    let answer = within(session.complete(template)).await.unwrap();
    assert_eq!(
        answer["completion"]["values"],
        json!(["hello", "help"]),
        "{answer}"
    );
    // Bad input: a prompt the server does not have (its error passes on with its code), and
    // a request that is no completion request at all (refused before it is sent).
    let unknown = json!({
        "ref": {"type": "ref/prompt", "name": "no_such_prompt"},
        "argument": {"name": "name", "value": ""},
    });
    let error = within(session.complete(unknown)).await.unwrap_err();
    assert_eq!(error.kind, SessionErrorKind::Protocol { code: -32602 });
    assert!(
        error.message.contains("no_such_prompt"),
        "{}",
        error.message
    );
    let error = within(session.complete(json!({"argument": 7})))
        .await
        .unwrap_err();
    assert_eq!(error.kind, SessionErrorKind::Protocol { code: -32602 });
    // The session goes on.
    within(session.ping()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_pass_through_across_pages() {
    let (_process, session) = connect(&["--page-size", "1"]).await;
    let prompts = within(session.list_prompts()).await.unwrap();
    let names: Vec<&str> = prompts
        .iter()
        .map(|prompt| prompt["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["greeting", "farewell"], "both pages: {prompts:?}");
    assert_eq!(prompts[0]["arguments"][0]["name"], "name");
    assert_eq!(prompts[0]["arguments"][0]["required"], true);

    let arguments = json!({"name": "Ada"}).as_object().unwrap().clone();
    let greeting = within(session.get_prompt("greeting", Some(arguments), CallContext::default()))
        .await
        .unwrap();
    assert_eq!(greeting["messages"][0]["role"], "user");
    assert_eq!(greeting["messages"][0]["content"]["text"], "Hello, Ada!");

    let unknown = within(session.get_prompt("no_such_prompt", None, CallContext::default()))
        .await
        .unwrap_err();
    assert_eq!(unknown.kind, SessionErrorKind::Protocol { code: -32602 });
    assert!(
        unknown.message.contains("no_such_prompt"),
        "{}",
        unknown.message
    );
    let missing_argument = within(session.get_prompt("greeting", None, CallContext::default()))
        .await
        .unwrap_err();
    assert_eq!(
        missing_argument.kind,
        SessionErrorKind::Protocol { code: -32602 }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_and_templates_pass_through_across_pages() {
    let (_process, session) = connect(&["--page-size", "1"]).await;
    let resources = within(session.list_resources()).await.unwrap();
    let uris: Vec<&str> = resources
        .iter()
        .map(|resource| resource["uri"].as_str().unwrap())
        .collect();
    assert_eq!(uris, ["fixture://readme", "fixture://version"]);
    assert_eq!(resources[0]["mimeType"], "text/plain");

    let templates = within(session.list_resource_templates()).await.unwrap();
    assert_eq!(templates.len(), 1, "{templates:?}");
    assert_eq!(templates[0]["uriTemplate"], "fixture://echo/{text}");

    let readme = within(session.read_resource("fixture://readme", CallContext::default()))
        .await
        .unwrap();
    assert_eq!(readme["contents"][0]["uri"], "fixture://readme");
    assert_eq!(
        readme["contents"][0]["text"],
        "The mcpgw fixture server: a small MCP server for tests."
    );
    let echoed = within(session.read_resource("fixture://echo/hi", CallContext::default()))
        .await
        .unwrap();
    assert_eq!(echoed["contents"][0]["text"], "hi");

    let unknown = within(session.read_resource("fixture://nothing", CallContext::default()))
        .await
        .unwrap_err();
    assert_eq!(unknown.kind, SessionErrorKind::Protocol { code: -32002 });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_list_changes_are_counted_before_the_announcing_call_returns() {
    let (_process, session) = connect(&[]).await;
    let changes = session
        .tool_list_changes()
        .expect("rmcp sessions report tool-list changes");
    assert_eq!(*changes.borrow(), 0);
    assert!(
        !within(session.list_tools())
            .await
            .unwrap()
            .iter()
            .any(|tool| tool.name == "added_later")
    );

    let announced = call(&session, "notify_tools_changed", json!({}))
        .await
        .unwrap();
    assert_eq!(
        announced.result["structuredContent"],
        json!({"added": true})
    );
    // Over stdio the announcement precedes the answer on the one stream, and the session counts
    // it as it arrives: no waiting needed.
    assert_eq!(*changes.borrow(), 1);
    let tools = within(session.list_tools()).await.unwrap();
    assert_eq!(tools.last().unwrap().name, "added_later");
    assert_eq!(
        first_text(&call(&session, "added_later", json!({})).await.unwrap()),
        "added later"
    );

    call(&session, "notify_tools_changed", json!({}))
        .await
        .unwrap();
    assert_eq!(*changes.borrow(), 2, "every announcement counts");
}

// --- the direct path of tool calls ---------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_timeout_fails_the_call_cancels_it_upstream_and_keeps_the_session() {
    let (process, streams) = FixtureProcess::spawn(&[]);
    let timeout = Duration::from_millis(300);
    let connector = RmcpStdioConnector::new(
        StdioConnectorSettings::default().with_request_timeout(Some(timeout)),
    );
    let session = within(connector.connect(&server_id(), streams))
        .await
        .expect("the fixture completes the handshake");
    let started = Instant::now();
    let timed_out = call(&session, "sleep", json!({"ms": 10_000}))
        .await
        .unwrap_err();
    assert_eq!(timed_out.kind, SessionErrorKind::Timeout, "{timed_out}");
    assert!(timed_out.message.contains("300ms"), "{timed_out}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    process.wait_for_stderr(b"fixture sleep cancelled").await;
    assert_eq!(first_text(&call_echo(&session).await), "still here");
    assert!(!session.has_ended());
}

/// Calls made from another runtime (as an HTTP worker's are) are answered before and after the
/// session's reader moves to that runtime, each with its own answer, concurrently with calls
/// from the runtime that made the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_from_other_runtimes_get_their_own_answers_while_the_reader_moves() {
    let (_process, session) = connect(&[]).await;
    let elsewhere = {
        let session = Arc::clone(&session);
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                for round in 0..20 {
                    let text = format!("elsewhere {round}");
                    let outcome = call(&session, "echo", json!({"text": text})).await.unwrap();
                    assert_eq!(first_text(&outcome), text);
                }
                let calls = (0..16).map(|index| {
                    let session = Arc::clone(&session);
                    async move {
                        let text = format!("together {index}");
                        let outcome = call(&session, "echo", json!({"text": text})).await.unwrap();
                        assert_eq!(first_text(&outcome), text);
                    }
                });
                futures::future::join_all(calls).await;
            });
        })
    };
    for round in 0..20 {
        let text = format!("home {round}");
        let outcome = call(&session, "echo", json!({"text": text})).await.unwrap();
        assert_eq!(first_text(&outcome), text);
    }
    tokio::task::spawn_blocking(move || elsewhere.join())
        .await
        .unwrap()
        .expect("every call from the other runtime got its own answer");
    // The other runtime is gone, and the session still answers (its reader went home).
    assert_eq!(first_text(&call_echo(&session).await), "still here");
    session.ping().await.expect("rmcp's requests still work");
}

/// Output that is not a pipe (the Docker API's attached stream, say) is read where the session
/// was made, with the same direct path for calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_over_a_stream_that_is_not_a_pipe_works_alike() {
    let (_process, streams) = FixtureProcess::spawn(&[]);
    let ByteStreams {
        to_server,
        from_server,
    } = streams;
    let ServerOutput::Pipe(fd) = from_server else {
        panic!("the fixture's stdout is a pipe");
    };
    let stream = tokio::net::unix::pipe::Receiver::from_owned_fd(fd).expect("a pipe");
    let streams = ByteStreams {
        to_server,
        from_server: ServerOutput::stream(stream),
    };
    let session = within(RmcpStdioConnector::default().connect(&server_id(), streams))
        .await
        .expect("the fixture completes the handshake");
    assert_eq!(first_text(&call_echo(&session).await), "still here");
    session.ping().await.unwrap();
    let listed = session.list_tools().await.unwrap();
    assert!(listed.iter().any(|tool| tool.name == "echo"));
}

/// A session with the conformance server, which answers 2026-07-28 requests with
/// input-required results and tasks of its own.
async fn connect_conformance() -> (FixtureProcess, Arc<dyn McpSession>) {
    let binary = mcpgw_fixtures::conformance::conformance_server_binary();
    let (process, streams) = FixtureProcess::spawn_binary(&binary, &[], &[]);
    let session = within(RmcpStdioConnector::default().connect(&server_id(), streams))
        .await
        .expect("the conformance server completes the handshake");
    (process, session)
}

fn modern(responses: Option<Value>, state: Option<&str>) -> CallContext {
    CallContext {
        input: Some(InputRound {
            responses,
            state: state.map(str::to_owned),
        }),
        ..CallContext::default()
    }
}

async fn call_with(
    session: &Arc<dyn McpSession>,
    name: &str,
    ctx: CallContext,
) -> Result<ToolCallOutcome, mcpgw_core::SessionError> {
    let call = ToolCall {
        name: name.to_owned(),
        arguments: Some(serde_json::Map::new()),
    };
    within(session.call_tool(call, ctx)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_caller_gets_the_servers_own_input_required_results() {
    let (_server, session) = connect_conformance().await;
    const TOOL: &str = "test_input_required_result_multi_round";
    // A caller of the `initialize` era: the request stays in the session's era.
    let legacy = call_with(&session, TOOL, CallContext::default())
        .await
        .unwrap();
    assert!(
        first_text(&legacy).contains("needs a 2026-07-28 request"),
        "{legacy:?}"
    );

    let first = call_with(&session, TOOL, modern(None, None)).await.unwrap();
    assert!(first.is_input_required(), "{first:?}");
    assert_eq!(
        first.result["inputRequests"]["step1"]["method"],
        "elicitation/create"
    );
    let state = first.result["requestState"].as_str().unwrap().to_owned();
    let answer = |field: &str, value: &str| json!({"action": "accept", "content": {field: value}});

    let second = call_with(
        &session,
        TOOL,
        modern(
            Some(json!({"step1": answer("name", "Alice")})),
            Some(&state),
        ),
    )
    .await
    .unwrap();
    assert!(second.is_input_required(), "{second:?}");
    let state = second.result["requestState"].as_str().unwrap().to_owned();
    let done = call_with(
        &session,
        TOOL,
        modern(
            Some(json!({"step2": answer("color", "blue")})),
            Some(&state),
        ),
    )
    .await
    .unwrap();
    assert_eq!(first_text(&done), "Alice's favorite color is blue");

    // Bad input: answers that are no object are refused before they reach the server.
    let refused = call_with(&session, TOOL, modern(Some(json!(["step1"])), Some(&state)))
        .await
        .unwrap_err();
    assert_eq!(refused.kind, SessionErrorKind::Protocol { code: -32602 });

    // prompts/get answers input-required results the same way.
    let prompt = within(session.get_prompt(
        "test_input_required_result_prompt",
        None,
        modern(None, None),
    ))
    .await
    .unwrap();
    assert_eq!(prompt["resultType"], "input_required", "{prompt}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_tasks_are_followed_with_task_requests() {
    let (_server, session) = connect_conformance().await;
    let ctx = CallContext {
        tasks: true,
        ..modern(None, None)
    };
    let created = call_with(&session, "confirm_delete", ctx).await.unwrap();
    assert!(created.is_task(), "{created:?}");
    let id = created.result["taskId"].as_str().unwrap().to_owned();
    let get = || session.task_request("tasks/get", json!({"taskId": id}));
    let deadline = Instant::now() + DEADLINE;
    loop {
        let got = within(get()).await.unwrap();
        if got["status"] == "input_required" {
            assert_eq!(
                got["inputRequests"]["confirm"]["method"],
                "elicitation/create"
            );
            break;
        }
        assert!(Instant::now() < deadline, "the task never asked: {got}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let responses = json!({"confirm": {"action": "accept", "content": {"confirm": true}}});
    within(session.task_request(
        "tasks/update",
        json!({"taskId": id, "inputResponses": responses}),
    ))
    .await
    .unwrap();
    loop {
        let got = within(get()).await.unwrap();
        if got["status"] == "completed" {
            assert_eq!(got["result"]["content"][0]["text"], "delete the file: true");
            break;
        }
        assert!(Instant::now() < deadline, "the task never completed: {got}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Bad input: a task the server does not know.
    let unknown = within(session.task_request("tasks/get", json!({"taskId": "no-such-task"})))
        .await
        .unwrap_err();
    assert_eq!(unknown.kind, SessionErrorKind::Protocol { code: -32602 });
    // A caller that does not take tasks gets the result at once.
    let plain = call_with(&session, "slow_compute", modern(None, None))
        .await
        .unwrap();
    assert_eq!(first_text(&plain), "computed ");
}
