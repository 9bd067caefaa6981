//! What an [`McpSession`] promises about the reverse direction: requests its server sends the
//! client during a call (see [`mcpgw_core::relay`]), as tests that a session whose servers can
//! ask must pass.
//!
//! The fixture's sessions (an [`McpSessionFixture`]) reach a server that, besides the tools of
//! the main suite, has `roots`: it asks its client for its roots (`roots/list`) from within the
//! call and answers their URIs, one per line, or a tool-level error
//! `roots/list failed: CODE MESSAGE` when the request is refused. The fixture servers of
//! `mcpgw-fixtures` have it. An adapter runs the cases with:
//!
//! ```text
//! mcpgw_testkit::mcp_session_relay_suite!(MyFixture::new());
//! ```
//!
//! The cases:
//! - a request reaches the relay of the call it came during, and the client's answer goes
//!   back to the server;
//! - a call without a relay, or whose client did not declare the capability, has the request
//!   refused at once with -32601 (the client is never asked);
//! - a call cancelled while its client is being asked fails as cancelled at once, and the
//!   session goes on serving.

use std::time::Instant;

use mcpgw_core::{
    CallContext, ClientRelay, RelayCapabilities, RelaySession, Relayed, SessionErrorKind,
};
use serde_json::json;

use crate::mcp_session_suite::{McpSessionFixture, PATIENCE, call, echo, first_text, within};

/// Expands to one `#[tokio::test]` per case (see the module's documentation), like
/// [`crate::mcp_session_contract_suite!`].
#[macro_export]
macro_rules! mcp_session_relay_suite {
    ($make_fixture:expr $(,)?) => {
        $crate::__mcp_session_relay_case!(
            $make_fixture,
            a_servers_request_reaches_the_callers_relay_and_the_answer_returns
        );
        $crate::__mcp_session_relay_case!(
            $make_fixture,
            a_request_the_caller_cannot_answer_is_refused_at_once
        );
        $crate::__mcp_session_relay_case!(
            $make_fixture,
            a_call_cancelled_while_its_client_is_asked_ends_at_once
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __mcp_session_relay_case {
    ($make_fixture:expr, $case:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            let fixture = $make_fixture;
            $crate::mcp_session_relay_suite::$case(&fixture).await;
        }
    };
}

/// A client that can be asked for its roots, and nothing else.
fn roots_only() -> RelayCapabilities {
    RelayCapabilities {
        roots: true,
        ..RelayCapabilities::default()
    }
}

fn with_relay(relay: ClientRelay) -> CallContext {
    CallContext {
        relay: Some(relay),
        ..CallContext::default()
    }
}

pub async fn a_servers_request_reaches_the_callers_relay_and_the_answer_returns(
    fixture: &dyn McpSessionFixture,
) {
    let session = fixture.connect().await;
    let (relay, mut asked) = ClientRelay::channel(RelaySession::new(), roots_only());
    let client = tokio::spawn(async move {
        match asked.recv().await {
            Some(Relayed::Request { method, answer, .. }) => {
                assert_eq!(method, "roots/list");
                let roots = json!({"roots": [{"uri": "file:///work"}, {"uri": "file:///home"}]});
                let _ = answer.send(Ok(roots));
            }
            other => panic!("expected the server's roots/list, got {other:?}"),
        }
    });
    let outcome = call(session.as_ref(), "roots", json!({}), with_relay(relay))
        .await
        .expect("the call answers");
    assert!(!outcome.is_error, "{:?}", outcome.result);
    assert_eq!(first_text(&outcome), "file:///work\nfile:///home");
    within("the client's side", client)
        .await
        .expect("the client answered");
    session.close().await;
}

pub async fn a_request_the_caller_cannot_answer_is_refused_at_once(
    fixture: &dyn McpSessionFixture,
) {
    let session = fixture.connect().await;
    // Bad input: a call with no way back to its client, then one whose client declared
    // sampling but not roots.
    let (relay, mut asked) = ClientRelay::channel(
        RelaySession::new(),
        RelayCapabilities {
            sampling: true,
            ..RelayCapabilities::default()
        },
    );
    for ctx in [CallContext::default(), with_relay(relay)] {
        let started = Instant::now();
        let outcome = call(session.as_ref(), "roots", json!({}), ctx)
            .await
            .expect("the tool answers its error");
        assert!(outcome.is_error, "{:?}", outcome.result);
        let text = first_text(&outcome);
        assert!(text.contains("-32601"), "{text}");
        assert!(started.elapsed() < PATIENCE / 2, "the refusal waited");
    }
    assert!(asked.try_recv().is_err(), "the client was asked");
    session.close().await;
}

pub async fn a_call_cancelled_while_its_client_is_asked_ends_at_once(
    fixture: &dyn McpSessionFixture,
) {
    let session = fixture.connect().await;
    let (relay, mut asked) = ClientRelay::channel(RelaySession::new(), roots_only());
    let ctx = with_relay(relay);
    let cancellation = ctx.cancellation.clone();
    let calling = {
        let session = session.clone();
        tokio::spawn(async move {
            session
                .call_tool(crate::mcp_session_suite::tool_call("roots", json!({})), ctx)
                .await
        })
    };
    // The client is asked, and never answers; the caller gives up.
    let question = within("the server's question", asked.recv()).await;
    assert!(
        matches!(question, Some(Relayed::Request { .. })),
        "{question:?}"
    );
    cancellation.cancel();
    let failed = within("the cancelled call", calling)
        .await
        .expect("the call's task")
        .expect_err("a cancelled call fails");
    assert_eq!(failed.kind, SessionErrorKind::Cancelled, "{failed}");
    drop(question);
    // Nothing is left waiting: the session answers the next caller.
    assert_eq!(
        echo(session.as_ref(), "still here").await.unwrap(),
        "still here"
    );
    session.close().await;
}
