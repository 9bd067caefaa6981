//! What every [`McpFrontend`] promises, as tests that every front end must pass.
//!
//! A front end aggregates servers that the adapter's tests set up, through an
//! [`McpFrontendFixture`]: it names the front end, a caller, one tool that caller may use
//! (which answers its `text` argument as the text of its first content block), and a way to
//! change the tool list. The adapter crate then runs the whole suite with one line in its
//! tests:
//!
//! ```text
//! mcpgw_testkit::mcp_frontend_contract_suite!(MyFixture::new().await);
//! ```
//!
//! The cases check what the port's documentation promises:
//! - `tools` lists each name once, the echoing tool among them;
//! - `call_tool` of a listed name answers the tool's result;
//! - every other name (one that no server has, an empty one) answers
//!   [`FrontendErrorKind::UnknownName`];
//! - a caller who may use none of the tools sees none listed, and calling one answers
//!   [`FrontendErrorKind::UnknownName`] too, indistinguishable from a tool that does not exist;
//!   a front end that restricts no one lists every tool to such a caller and lets it call;
//! - `changes` moves when the tool list changes;
//! - `complete` refuses a reference to a prompt or template nobody lists (as
//!   [`FrontendErrorKind::UnknownName`], naming it) and one of no known type, and refuses an
//!   outsider as it refuses an unknown reference;
//! - `subscribe_resource` of a resource nobody serves is
//!   [`FrontendErrorKind::UnknownName`], naming it, for every caller.

use std::sync::Arc;

use async_trait::async_trait;
use mcpgw_core::{
    CallContext, Caller, FrontendError, FrontendErrorKind, McpFrontend, ToolCallOutcome,
};
use serde_json::json;

use crate::mcp_session_suite::{PATIENCE, within};

/// A front end under test and what to ask of it.
#[async_trait]
pub trait McpFrontendFixture: Send + Sync {
    /// The front end under test.
    fn frontend(&self) -> Arc<dyn McpFrontend>;

    /// A caller who may use [`echo_tool`](Self::echo_tool).
    fn caller(&self) -> Caller;

    /// The listed name of a tool that answers its `text` argument as the text of its first
    /// content block.
    fn echo_tool(&self) -> String;

    /// A caller who may use none of the tools, for a front end that restricts callers; `None`
    /// for one that lets every caller use every tool.
    fn outsider(&self) -> Option<Caller>;

    /// Changes the list of tools that [`caller`](Self::caller) sees (adds a server, say).
    async fn change_tools(&self);
}

/// Expands to one `#[tokio::test]` per case of the [`McpFrontend`] contract, each running
/// against a fresh fixture made by evaluating `$make_fixture` (any expression of a type that
/// implements [`McpFrontendFixture`]; it may `.await`).
///
/// The tests use `#[tokio::test(flavor = "multi_thread")]`, so the invoking crate needs `tokio`
/// with the `macros`, `rt` and `rt-multi-thread` features among its dev-dependencies. The test
/// functions are named after the cases and defined in the invoking module: to run the suite
/// against two front ends in one crate, invoke it in two modules.
#[macro_export]
macro_rules! mcp_frontend_contract_suite {
    ($make_fixture:expr $(,)?) => {
        $crate::__mcp_frontend_contract_case!($make_fixture, lists_each_tool_once);
        $crate::__mcp_frontend_contract_case!($make_fixture, a_listed_tool_answers_its_result);
        $crate::__mcp_frontend_contract_case!($make_fixture, any_other_name_is_unknown);
        $crate::__mcp_frontend_contract_case!(
            $make_fixture,
            a_tool_the_caller_may_not_use_is_unknown_to_it
        );
        $crate::__mcp_frontend_contract_case!($make_fixture, changes_move_when_the_tools_change);
        $crate::__mcp_frontend_contract_case!(
            $make_fixture,
            a_completion_of_nothing_listed_is_refused
        );
        $crate::__mcp_frontend_contract_case!(
            $make_fixture,
            a_subscription_to_nothing_served_is_refused
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __mcp_frontend_contract_case {
    ($make_fixture:expr, $case:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            let fixture = $make_fixture;
            $crate::mcp_frontend_suite::$case(&fixture).await;
        }
    };
}

async fn call(
    frontend: &dyn McpFrontend,
    caller: &Caller,
    name: &str,
) -> Result<ToolCallOutcome, FrontendError> {
    within(
        &format!("calling `{name}`"),
        frontend.call_tool(
            caller,
            name,
            json!({"text": "through the front end"})
                .as_object()
                .cloned(),
            CallContext::default(),
        ),
    )
    .await
}

fn names(frontend: &dyn McpFrontend, caller: &Caller) -> Vec<String> {
    frontend
        .tools(caller)
        .iter()
        .map(|tool| tool.name.clone())
        .collect()
}

fn assert_unknown(answer: Result<ToolCallOutcome, FrontendError>, name: &str) {
    match answer {
        Err(error) => {
            assert_eq!(
                error.kind,
                FrontendErrorKind::UnknownName,
                "`{name}`: {}",
                error.message
            );
            assert!(error.message.contains(name), "`{name}`: {}", error.message);
        }
        Ok(outcome) => panic!("`{name}` was called: {:?}", outcome.result),
    }
}

pub async fn lists_each_tool_once(fixture: &dyn McpFrontendFixture) {
    let frontend = fixture.frontend();
    frontend.settle().await;
    let listed = names(frontend.as_ref(), &fixture.caller());
    assert!(
        listed.contains(&fixture.echo_tool()),
        "`{}` is listed: {listed:?}",
        fixture.echo_tool()
    );
    let mut unique = listed.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(
        unique.len(),
        listed.len(),
        "a name listed twice: {listed:?}"
    );
}

pub async fn a_listed_tool_answers_its_result(fixture: &dyn McpFrontendFixture) {
    let frontend = fixture.frontend();
    let outcome = call(frontend.as_ref(), &fixture.caller(), &fixture.echo_tool())
        .await
        .expect("a listed tool answers");
    assert!(!outcome.is_error, "{:?}", outcome.result);
    assert_eq!(
        outcome.result["content"][0]["text"], "through the front end",
        "{:?}",
        outcome.result
    );
}

pub async fn any_other_name_is_unknown(fixture: &dyn McpFrontendFixture) {
    let frontend = fixture.frontend();
    let caller = fixture.caller();
    let echo = fixture.echo_tool();
    for name in [
        "no_such_tool".to_owned(),
        format!("{echo}_but_longer"),
        "no_such_server__echo".to_owned(),
    ] {
        assert_unknown(call(frontend.as_ref(), &caller, &name).await, &name);
    }
    let empty = call(frontend.as_ref(), &caller, "").await;
    assert!(
        matches!(&empty, Err(error) if error.kind == FrontendErrorKind::UnknownName),
        "{empty:?}"
    );
    // The front end still serves.
    call(frontend.as_ref(), &caller, &echo)
        .await
        .expect("a listed tool still answers");
}

pub async fn a_tool_the_caller_may_not_use_is_unknown_to_it(fixture: &dyn McpFrontendFixture) {
    let frontend = fixture.frontend();
    frontend.settle().await;
    let echo = fixture.echo_tool();
    match fixture.outsider() {
        Some(outsider) => {
            let listed = names(frontend.as_ref(), &outsider);
            assert!(listed.is_empty(), "listed to an outsider: {listed:?}");
            for name in names(frontend.as_ref(), &fixture.caller()) {
                assert_unknown(call(frontend.as_ref(), &outsider, &name).await, &name);
            }
        }
        None => {
            let stranger = Caller::principal("user:contract-stranger");
            assert_eq!(
                names(frontend.as_ref(), &stranger),
                names(frontend.as_ref(), &fixture.caller()),
                "a front end that restricts no one lists the same tools to everyone"
            );
            call(frontend.as_ref(), &stranger, &echo)
                .await
                .expect("a front end that restricts no one lets anyone call");
        }
    }
}

pub async fn changes_move_when_the_tools_change(fixture: &dyn McpFrontendFixture) {
    let frontend = fixture.frontend();
    frontend.settle().await;
    let caller = fixture.caller();
    let before = names(frontend.as_ref(), &caller);
    let mut changes = frontend.changes();
    changes.borrow_and_update();
    fixture.change_tools().await;
    tokio::time::timeout(PATIENCE, changes.changed())
        .await
        .expect("`changes` moved in time")
        .expect("the front end keeps its change counter");
    frontend.settle().await;
    assert_ne!(
        names(frontend.as_ref(), &caller),
        before,
        "the tool list changed"
    );
}

pub async fn a_completion_of_nothing_listed_is_refused(fixture: &dyn McpFrontendFixture) {
    let frontend = fixture.frontend();
    let complete = |caller: Caller, reference: serde_json::Value| {
        let frontend = Arc::clone(&frontend);
        async move {
            within(
                "completing",
                frontend.complete(
                    &caller,
                    json!({"ref": reference, "argument": {"name": "a", "value": ""}}),
                ),
            )
            .await
        }
    };
    // Bad input: a prompt and a template that nobody lists, and a reference of no known type.
    for (reference, named) in [
        (
            json!({"type": "ref/prompt", "name": "no_such_server__no_such_prompt"}),
            "no_such_server__no_such_prompt",
        ),
        (
            json!({"type": "ref/resource", "uri": "nowhere://{thing}"}),
            "nowhere://{thing}",
        ),
    ] {
        match complete(fixture.caller(), reference.clone()).await {
            Err(error) => {
                assert_eq!(error.kind, FrontendErrorKind::UnknownName, "{reference}");
                assert!(
                    error.message.contains(named),
                    "{reference}: {}",
                    error.message
                );
            }
            Ok(answer) => panic!("{reference} was completed: {answer}"),
        }
    }
    let strange = complete(fixture.caller(), json!({"type": "ref/other", "name": "x"})).await;
    assert!(
        strange.is_err(),
        "a reference of no known type: {strange:?}"
    );
    if let Some(outsider) = fixture.outsider() {
        let refused = complete(
            outsider,
            json!({"type": "ref/prompt", "name": "no_such_server__no_such_prompt"}),
        )
        .await;
        assert!(
            matches!(&refused, Err(error) if error.kind == FrontendErrorKind::UnknownName),
            "{refused:?}"
        );
    }
}

pub async fn a_subscription_to_nothing_served_is_refused(fixture: &dyn McpFrontendFixture) {
    let frontend = fixture.frontend();
    // Bad input: a URI no server lists, from the caller and from an outsider.
    let uri = "nowhere://contract/resource";
    let callers = std::iter::once(fixture.caller()).chain(fixture.outsider());
    for caller in callers {
        match within("subscribing", frontend.subscribe_resource(&caller, uri)).await {
            Err(error) => {
                assert_eq!(error.kind, FrontendErrorKind::UnknownName, "{caller:?}");
                assert!(error.message.contains(uri), "{caller:?}: {}", error.message);
            }
            Ok(subscription) => panic!("{caller:?} subscribed to {subscription:?}"),
        }
    }
}
