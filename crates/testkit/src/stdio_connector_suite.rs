//! What every [`StdioConnector`] promises, as tests that every connector must pass, against the
//! in-memory [`ScriptedServer`]: no process, no binary.
//!
//! The adapter crate runs the whole suite with one line in its tests, given an expression that
//! makes the connector under test (any type that implements [`StdioConnector`]; it may
//! `.await`):
//!
//! ```text
//! mcpgw_testkit::stdio_connector_contract_suite!(MyConnector::default());
//! ```
//!
//! The connector must not bound requests with a timeout of its own shorter than a few seconds.
//! The cases check what the port's documentation promises:
//! - `connect` completes the MCP handshake (`initialize`, then `notifications/initialized`)
//!   before any request, and hands back a session that serves requests over the streams;
//! - a server that closes its stdout before it answers `initialize` is a launch error, not a
//!   session;
//! - a JSON-RPC error keeps its code, and the session goes on;
//! - a cancelled call is cancelled upstream (`notifications/cancelled` with its request id);
//! - a server that closes its stdout in the middle of a call fails that call at once as a
//!   transport error and ends the session;
//! - closing the session closes the server's stdin, which is how a stdio server is asked to
//!   finish.

use std::time::{Duration, Instant};

use mcpgw_core::{
    CallContext, LaunchError, McpSession, ServerId, SessionErrorKind, StdioConnector,
};
use serde_json::json;
use std::sync::Arc;

use crate::mcp_session_suite::{call, echo, tool_call, within};
use crate::scripted_server::{ScriptedOptions, ScriptedServer, scripted_tool_names};

/// Expands to one `#[tokio::test]` per case of the [`StdioConnector`] contract, each running
/// against a fresh connector made by evaluating `$make_connector`.
///
/// The tests use `#[tokio::test(flavor = "multi_thread")]`, so the invoking crate needs `tokio`
/// with the `macros`, `rt` and `rt-multi-thread` features among its dev-dependencies. The test
/// functions are named after the cases and defined in the invoking module.
#[macro_export]
macro_rules! stdio_connector_contract_suite {
    ($make_connector:expr $(,)?) => {
        $crate::__stdio_connector_contract_case!(
            $make_connector,
            the_handshake_comes_first_and_the_session_serves_requests
        );
        $crate::__stdio_connector_contract_case!(
            $make_connector,
            a_server_that_closes_stdout_before_initialize_is_a_launch_error
        );
        $crate::__stdio_connector_contract_case!(
            $make_connector,
            a_json_rpc_error_keeps_its_code_and_the_session_goes_on
        );
        $crate::__stdio_connector_contract_case!(
            $make_connector,
            a_cancelled_call_is_cancelled_upstream
        );
        $crate::__stdio_connector_contract_case!(
            $make_connector,
            a_server_that_closes_stdout_mid_call_fails_the_call_at_once
        );
        $crate::__stdio_connector_contract_case!(
            $make_connector,
            closing_the_session_closes_the_servers_stdin
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __stdio_connector_contract_case {
    ($make_connector:expr, $case:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            let connector = $make_connector;
            $crate::stdio_connector_suite::$case(&connector).await;
        }
    };
}

fn server_id() -> ServerId {
    ServerId::parse("scripted").expect("a valid server id")
}

async fn connect(
    connector: &dyn StdioConnector,
    options: ScriptedOptions,
) -> (Arc<dyn McpSession>, ScriptedServer) {
    let (streams, server) = ScriptedServer::start(options);
    let session = within("connect", connector.connect(&server_id(), streams))
        .await
        .unwrap_or_else(|error| panic!("the scripted server's handshake failed: {error}"));
    (session, server)
}

pub async fn the_handshake_comes_first_and_the_session_serves_requests(
    connector: &dyn StdioConnector,
) {
    let options = ScriptedOptions {
        page_size: 2,
        extra_tools: 3,
        ..ScriptedOptions::default()
    };
    let (session, server) = connect(connector, options.clone()).await;
    let initialize = server
        .wait_for_message(|message| message["method"] == "initialize")
        .await;
    assert!(
        initialize["params"]["protocolVersion"].is_string(),
        "{initialize}"
    );
    assert!(initialize["params"]["clientInfo"]["name"].is_string());

    let tools = within("list_tools", session.list_tools()).await.unwrap();
    let names: Vec<String> = tools.into_iter().map(|tool| tool.name).collect();
    assert_eq!(names, scripted_tool_names(&options), "every page, in order");
    assert_eq!(
        echo(session.as_ref(), "over stdio").await.unwrap(),
        "over stdio"
    );
    within("ping", session.ping()).await.unwrap();

    let methods = server.methods();
    assert_eq!(
        methods[..2],
        ["initialize", "notifications/initialized"],
        "{methods:?}"
    );
    for method in ["tools/list", "tools/call", "ping"] {
        assert!(methods.iter().any(|seen| seen == method), "{methods:?}");
    }
    session.close().await;
}

pub async fn a_server_that_closes_stdout_before_initialize_is_a_launch_error(
    connector: &dyn StdioConnector,
) {
    let (streams, _server) = ScriptedServer::start(ScriptedOptions {
        close_before_initialize: true,
        ..ScriptedOptions::default()
    });
    let started = Instant::now();
    let answer = within("connect", connector.connect(&server_id(), streams)).await;
    match answer {
        Err(LaunchError::Handshake(message)) => assert!(!message.is_empty()),
        Err(other) => panic!("not a handshake error: {other:?}"),
        Ok(session) => {
            session.close().await;
            panic!("a server that never answered `initialize` made a session");
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the closed stdout was noticed only after {:?}",
        started.elapsed()
    );
}

pub async fn a_json_rpc_error_keeps_its_code_and_the_session_goes_on(
    connector: &dyn StdioConnector,
) {
    let (session, _server) = connect(connector, ScriptedOptions::default()).await;
    let error = call(
        session.as_ref(),
        "no_such_tool",
        json!({}),
        CallContext::default(),
    )
    .await
    .expect_err("an unknown tool is an error");
    assert_eq!(
        error.kind,
        SessionErrorKind::Protocol { code: -32602 },
        "{}",
        error.message
    );
    assert!(error.message.contains("no_such_tool"), "{}", error.message);
    assert!(!session.has_ended());
    assert_eq!(echo(session.as_ref(), "on").await.unwrap(), "on");
    session.close().await;
}

pub async fn a_cancelled_call_is_cancelled_upstream(connector: &dyn StdioConnector) {
    let (session, server) = connect(connector, ScriptedOptions::default()).await;
    let ctx = CallContext::default();
    let cancellation = ctx.cancellation.clone();
    let in_flight = {
        let session = session.clone();
        tokio::spawn(async move {
            session
                .call_tool(tool_call("sleep", json!({"ms": 60_000})), ctx)
                .await
        })
    };
    let request = within(
        "the sleep request reaching the server",
        server.wait_for_message(|message| {
            message["method"] == "tools/call" && message["params"]["name"] == "sleep"
        }),
    )
    .await;
    cancellation.cancel();
    let error = within("the cancelled call", in_flight)
        .await
        .unwrap()
        .expect_err("a cancelled call fails");
    assert_eq!(error.kind, SessionErrorKind::Cancelled, "{}", error.message);
    let notice = within(
        "the cancellation reaching the server",
        server.wait_for_message(|message| message["method"] == "notifications/cancelled"),
    )
    .await;
    assert_eq!(notice["params"]["requestId"], request["id"], "{notice}");
    assert_eq!(echo(session.as_ref(), "on").await.unwrap(), "on");
    session.close().await;
}

pub async fn a_server_that_closes_stdout_mid_call_fails_the_call_at_once(
    connector: &dyn StdioConnector,
) {
    let (session, server) = connect(connector, ScriptedOptions::default()).await;
    let in_flight = {
        let session = session.clone();
        tokio::spawn(async move {
            session
                .call_tool(
                    tool_call("sleep", json!({"ms": 60_000})),
                    CallContext::default(),
                )
                .await
        })
    };
    within(
        "the sleep request reaching the server",
        server.wait_for_message(|message| message["params"]["name"] == "sleep"),
    )
    .await;
    let started = Instant::now();
    server.close_stdout();
    let error = within("the call in flight", in_flight)
        .await
        .unwrap()
        .expect_err("a call whose server closed its stdout fails");
    assert_eq!(error.kind, SessionErrorKind::Transport, "{}", error.message);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the call failed only {:?} after stdout closed",
        started.elapsed()
    );
    within("closed", session.closed()).await;
    assert!(session.has_ended());
    let error = call(
        session.as_ref(),
        "echo",
        json!({"text": "x"}),
        CallContext::default(),
    )
    .await
    .expect_err("a call after the end fails");
    assert_eq!(error.kind, SessionErrorKind::Transport, "{}", error.message);
    session.close().await;
}

pub async fn closing_the_session_closes_the_servers_stdin(connector: &dyn StdioConnector) {
    let (session, server) = connect(connector, ScriptedOptions::default()).await;
    assert_eq!(echo(session.as_ref(), "hi").await.unwrap(), "hi");
    assert!(!server.stdin_is_closed());
    within("close", session.close()).await;
    within("the server's stdin closing", server.wait_for_stdin_closed()).await;
    within("closed", session.closed()).await;
    let error = call(
        session.as_ref(),
        "echo",
        json!({"text": "x"}),
        CallContext::default(),
    )
    .await
    .expect_err("a call after close fails");
    assert_eq!(error.kind, SessionErrorKind::Closed, "{}", error.message);
}
