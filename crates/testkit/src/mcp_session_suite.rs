//! What every [`McpSession`] promises, as tests that every session must pass.
//!
//! A session talks to a real server on the other end, which the adapter's tests supply through
//! an [`McpSessionFixture`]: each call of [`McpSessionFixture::connect`] hands back a new
//! session to a server of its own that has these tools:
//! - `echo` answers its `text` argument as the text of its first content block;
//! - `sleep` answers after `ms` milliseconds, reports progress on the way when asked to, and
//!   stops when the call is cancelled;
//! - `crash` makes the server die at once (its process exits, its connection breaks);
//!
//! and that answers a call of any other tool with a JSON-RPC error. The fixture servers of
//! `mcpgw-fixtures` have them, and so does the in-memory
//! [`ScriptedServer`](crate::scripted_server::ScriptedServer). The adapter crate then runs the
//! whole suite with one line in its tests:
//!
//! ```text
//! mcpgw_testkit::mcp_session_contract_suite!(MyFixture::new());
//! ```
//!
//! The cases check what the port's documentation promises:
//! - `list_tools` answers every tool once, pagination followed to the end;
//! - a call answers the tool's result; a JSON-RPC error is a [`SessionErrorKind::Protocol`]
//!   error and the session goes on serving;
//! - `ping` answers;
//! - a cancelled call fails as [`SessionErrorKind::Cancelled`], and progress reaches the
//!   caller's handler;
//! - `close` ends the session, is idempotent, completes `closed`, and later requests fail at
//!   once as [`SessionErrorKind::Closed`];
//! - a server that dies fails the calls waiting on it at once, as
//!   [`SessionErrorKind::Transport`], and ends the session.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mcpgw_core::{
    CallContext, McpSession, ProgressUpdate, SessionError, SessionErrorKind, ToolCall,
    ToolCallOutcome,
};
use serde_json::{Value, json};

/// How long anything a case waits for may take on a loaded machine.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// How long a `sleep` call that a case expects to be cut short asks for: far longer than any
/// case waits, so a call that answers was not cut short.
const LONG_SLEEP_MS: u64 = 60_000;

/// Makes sessions to servers with the suite's tools (see the module's documentation).
#[async_trait]
pub trait McpSessionFixture: Send + Sync {
    /// A new, initialized session to a server of its own.
    async fn connect(&self) -> Arc<dyn McpSession>;
}

/// Expands to one `#[tokio::test]` per case of the [`McpSession`] contract, each running
/// against a fresh fixture made by evaluating `$make_fixture` (any expression of a type that
/// implements [`McpSessionFixture`]; it may `.await`).
///
/// The tests use `#[tokio::test(flavor = "multi_thread")]`, so the invoking crate needs `tokio`
/// with the `macros`, `rt` and `rt-multi-thread` features among its dev-dependencies. The test
/// functions are named after the cases and defined in the invoking module: to run the suite
/// against two kinds of session in one crate, invoke it in two modules.
#[macro_export]
macro_rules! mcp_session_contract_suite {
    ($make_fixture:expr $(,)?) => {
        $crate::__mcp_session_contract_case!($make_fixture, lists_every_tool_once);
        $crate::__mcp_session_contract_case!($make_fixture, a_call_answers_the_tools_result);
        $crate::__mcp_session_contract_case!(
            $make_fixture,
            a_json_rpc_error_is_a_protocol_error_and_the_session_goes_on
        );
        $crate::__mcp_session_contract_case!($make_fixture, ping_answers);
        $crate::__mcp_session_contract_case!(
            $make_fixture,
            a_cancelled_call_fails_as_cancelled_and_the_session_goes_on
        );
        $crate::__mcp_session_contract_case!($make_fixture, progress_reaches_the_callers_handler);
        $crate::__mcp_session_contract_case!(
            $make_fixture,
            close_ends_the_session_and_later_requests_fail_at_once
        );
        $crate::__mcp_session_contract_case!(
            $make_fixture,
            a_server_that_dies_fails_the_waiting_calls_at_once
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __mcp_session_contract_case {
    ($make_fixture:expr, $case:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            let fixture = $make_fixture;
            $crate::mcp_session_suite::$case(&fixture).await;
        }
    };
}

// ----- helpers ------------------------------------------------------------------------------

/// Fails the case instead of hanging it when a broken session never answers.
pub async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {PATIENCE:?}"))
}

pub fn tool_call(name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        name: name.to_owned(),
        arguments: arguments.as_object().cloned(),
    }
}

pub async fn call(
    session: &dyn McpSession,
    name: &str,
    arguments: Value,
    ctx: CallContext,
) -> Result<ToolCallOutcome, SessionError> {
    within(
        &format!("calling `{name}`"),
        session.call_tool(tool_call(name, arguments), ctx),
    )
    .await
}

pub async fn echo(session: &dyn McpSession, said: &str) -> Result<String, SessionError> {
    let outcome = call(
        session,
        "echo",
        json!({ "text": said }),
        CallContext::default(),
    )
    .await?;
    assert!(!outcome.is_error, "`echo` failed: {:?}", outcome.result);
    Ok(first_text(&outcome))
}

pub fn first_text(outcome: &ToolCallOutcome) -> String {
    outcome.result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content in {:?}", outcome.result))
        .to_owned()
}

/// Starts a long `sleep` call on its own task.
fn sleeping(
    session: &Arc<dyn McpSession>,
    ctx: CallContext,
) -> tokio::task::JoinHandle<Result<ToolCallOutcome, SessionError>> {
    let session = session.clone();
    tokio::spawn(async move {
        session
            .call_tool(tool_call("sleep", json!({ "ms": LONG_SLEEP_MS })), ctx)
            .await
    })
}

/// Gives a request just sent the time to reach the server.
async fn let_it_arrive() {
    tokio::time::sleep(Duration::from_millis(200)).await;
}

// ----- the cases ----------------------------------------------------------------------------

pub async fn lists_every_tool_once(fixture: &dyn McpSessionFixture) {
    let session = fixture.connect().await;
    let tools = within("list_tools", session.list_tools())
        .await
        .expect("the tools are listed");
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    for wanted in ["echo", "sleep", "crash"] {
        assert_eq!(
            names.iter().filter(|name| **name == wanted).count(),
            1,
            "`{wanted}` is listed once: {names:?}"
        );
    }
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "a tool listed twice: {names:?}");
    // Listing again answers the same.
    let again = within("list_tools", session.list_tools()).await.unwrap();
    assert_eq!(again, tools);
    session.close().await;
}

pub async fn a_call_answers_the_tools_result(fixture: &dyn McpSessionFixture) {
    let session = fixture.connect().await;
    assert_eq!(echo(session.as_ref(), "hello").await.unwrap(), "hello");
    assert_eq!(
        echo(session.as_ref(), "ünïcödé ✓").await.unwrap(),
        "ünïcödé ✓"
    );
    session.close().await;
}

pub async fn a_json_rpc_error_is_a_protocol_error_and_the_session_goes_on(
    fixture: &dyn McpSessionFixture,
) {
    let session = fixture.connect().await;
    let error = call(
        session.as_ref(),
        "no_such_tool",
        json!({}),
        CallContext::default(),
    )
    .await
    .expect_err("a tool the server does not have is an error");
    assert!(
        matches!(error.kind, SessionErrorKind::Protocol { .. }),
        "{:?}: {}",
        error.kind,
        error.message
    );
    assert!(!error.kind.counts_against_health());
    assert!(!session.has_ended());
    assert_eq!(
        echo(session.as_ref(), "still here").await.unwrap(),
        "still here"
    );
    session.close().await;
}

pub async fn ping_answers(fixture: &dyn McpSessionFixture) {
    let session = fixture.connect().await;
    within("ping", session.ping()).await.expect("ping answers");
    within("ping", session.ping())
        .await
        .expect("ping answers again");
    session.close().await;
}

pub async fn a_cancelled_call_fails_as_cancelled_and_the_session_goes_on(
    fixture: &dyn McpSessionFixture,
) {
    let session = fixture.connect().await;
    let ctx = CallContext::default();
    let cancellation = ctx.cancellation.clone();
    let call = sleeping(&session, ctx);
    let_it_arrive().await;
    let started = Instant::now();
    cancellation.cancel();
    let answer = within("the cancelled call", call).await.unwrap();
    let error = answer.expect_err("a cancelled call fails");
    assert_eq!(error.kind, SessionErrorKind::Cancelled, "{}", error.message);
    assert!(
        started.elapsed() < PATIENCE / 2,
        "the cancelled call failed only {:?} after the cancellation",
        started.elapsed()
    );
    // A call cancelled before it starts fails the same way.
    let ctx = CallContext::default();
    ctx.cancellation.cancel();
    let error = call_echo_with(session.as_ref(), ctx).await.unwrap_err();
    assert_eq!(error.kind, SessionErrorKind::Cancelled, "{}", error.message);
    assert!(!session.has_ended());
    assert_eq!(echo(session.as_ref(), "after").await.unwrap(), "after");
    session.close().await;
}

async fn call_echo_with(
    session: &dyn McpSession,
    ctx: CallContext,
) -> Result<ToolCallOutcome, SessionError> {
    call(session, "echo", json!({ "text": "x" }), ctx).await
}

pub async fn progress_reaches_the_callers_handler(fixture: &dyn McpSessionFixture) {
    let session = fixture.connect().await;
    let updates: Arc<Mutex<Vec<ProgressUpdate>>> = Arc::default();
    let ctx = CallContext {
        progress: Some(Arc::new({
            let updates = updates.clone();
            move |update| updates.lock().unwrap().push(update)
        })),
        ..CallContext::default()
    };
    let outcome = call(session.as_ref(), "sleep", json!({ "ms": 300 }), ctx)
        .await
        .expect("the sleep answers");
    assert!(!outcome.is_error, "{:?}", outcome.result);
    let updates = updates.lock().unwrap().clone();
    assert!(!updates.is_empty(), "no progress reached the handler");
    assert!(
        updates
            .windows(2)
            .all(|pair| pair[0].progress <= pair[1].progress),
        "progress out of order: {updates:?}"
    );
    session.close().await;
}

pub async fn close_ends_the_session_and_later_requests_fail_at_once(
    fixture: &dyn McpSessionFixture,
) {
    let session = fixture.connect().await;
    assert_eq!(echo(session.as_ref(), "before").await.unwrap(), "before");
    assert!(!session.has_ended());
    within("close", session.close()).await;
    within("closed after close", session.closed()).await;
    assert!(session.has_ended());
    // Idempotent.
    within("a second close", session.close()).await;

    let started = Instant::now();
    let error = call_echo_with(session.as_ref(), CallContext::default())
        .await
        .expect_err("a call on a closed session fails");
    assert_eq!(error.kind, SessionErrorKind::Closed, "{}", error.message);
    assert!(!error.message.is_empty());
    let error = within("list_tools", session.list_tools())
        .await
        .expect_err("listing on a closed session fails");
    assert_eq!(error.kind, SessionErrorKind::Closed, "{}", error.message);
    let error = within("ping", session.ping())
        .await
        .expect_err("a ping on a closed session fails");
    assert_eq!(error.kind, SessionErrorKind::Closed, "{}", error.message);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "requests on a closed session took {:?} to fail",
        started.elapsed()
    );
}

pub async fn a_server_that_dies_fails_the_waiting_calls_at_once(fixture: &dyn McpSessionFixture) {
    let session = fixture.connect().await;
    let waiting = sleeping(&session, CallContext::default());
    let_it_arrive().await;
    let started = Instant::now();
    // The server dies before it can answer the crash itself; whatever that call answers, it
    // must answer.
    let _ = call(session.as_ref(), "crash", json!({}), CallContext::default()).await;
    let error = within("the call waiting on the dead server", waiting)
        .await
        .unwrap()
        .expect_err("a call waiting on a server that died fails");
    assert_eq!(error.kind, SessionErrorKind::Transport, "{}", error.message);
    assert!(error.kind.counts_against_health());
    assert!(
        started.elapsed() < PATIENCE / 2,
        "the waiting call failed only {:?} after the server died",
        started.elapsed()
    );
    let exit = within("closed after the server died", session.closed()).await;
    assert!(!exit.description.is_empty());
    assert!(session.has_ended());
    let error = call_echo_with(session.as_ref(), CallContext::default())
        .await
        .expect_err("a call after the server died fails");
    assert!(
        error.kind.counts_against_health(),
        "{:?}: {}",
        error.kind,
        error.message
    );
    within("close after the end", session.close()).await;
}
