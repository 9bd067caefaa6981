//! What every [`PolicyDecider`] promises, as tests that every decider must pass.
//!
//! A decider asks a policy engine, so the suite works through a [`ScriptedEngine`] that the
//! adapter's tests write once over the engine the decider asks (a local server speaking the
//! engine's protocol, or the engine itself): the suite tells it what to answer, and it tells
//! the suite what it was asked. The adapter crate then runs the whole suite with one line in
//! its tests:
//!
//! ```text
//! mcpgw_testkit::policy_decider_contract_suite!(MyEngine::start().await.with_decider());
//! ```
//!
//! where the expression answers a `(decider, engine)` pair, fresh for every case. Each case is
//! also a public `async fn` taking `(&dyn PolicyDecider, &dyn ScriptedEngine)`, for callers
//! that need to run one case by hand. There is no in-memory decider here: what the port
//! promises is about an engine on the other side of a connection.
//!
//! The domain treats `Err` as deny, so a decider can only allow by answering `Ok(true)`. The
//! cases check what the port's documentation promises:
//! - `Ok(true)` only for an explicit allow; `Ok(false)` for an explicit deny, an undefined
//!   decision and any answer that is not a decision of either kind;
//! - `Err` when no decision came: the engine failed, answered something unreadable, hung up,
//!   or said nothing within the decider's deadline, which is kept (neither much sooner nor
//!   later), also for many questions at once;
//! - every question reaches the engine, whole, and gets the engine's answer of that moment: no
//!   decision is remembered, and a failed one leaves the decider working.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use mcpgw_authz::{
    DeciderError, Identity, Permission, PolicyDecider, PolicyInput, Principal, TenantId,
};

/// How much later than its deadline a decider may give up on a silent engine, for a loaded
/// machine.
pub const DEADLINE_GRACE: Duration = Duration::from_secs(2);

/// What the engine answers every question with, until told otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineAnswer {
    /// An explicit allow (for OPA, a result that is JSON `true`).
    Allow,
    /// An explicit deny (for OPA, `false`).
    Deny,
    /// A well-formed answer that holds no decision (for OPA, no result: the rule is undefined).
    Undefined,
    /// A well-formed answer whose decision is neither an allow nor a deny (for OPA, a result
    /// that is a string, a number or an object).
    Unclear,
    /// A failure of the engine, whatever else the answer holds (for OPA, an error status with
    /// a body that says `true`).
    Failure,
    /// An answer that cannot be read (for OPA, a body that is not JSON).
    Garbled,
    /// The connection is closed without an answer.
    HangUp,
    /// The question is received and never answered.
    Silent,
}

/// The policy engine the decider under test asks, under the test's control.
#[async_trait]
pub trait ScriptedEngine: Send + Sync {
    /// From now on, every question is answered with `answer`.
    async fn answer_with(&self, answer: EngineAnswer);

    /// The questions the engine received so far, in order, read back from what arrived.
    async fn questions(&self) -> Vec<PolicyInput>;

    /// The decider's deadline for one decision. The suite waits it out several times, so a
    /// fixture sets it short (a fraction of a second).
    fn deadline(&self) -> Duration;
}

/// Expands to one `#[tokio::test]` per case of the [`PolicyDecider`] contract, each running
/// against a fresh pair made by evaluating `$make_pair` (an expression, which may `.await`, of a
/// tuple `(decider, engine)` whose types implement [`PolicyDecider`] and [`ScriptedEngine`]).
///
/// The invoking crate needs `tokio` with the `macros` and `rt` features among its
/// dev-dependencies. The test functions are named after the cases and defined in the invoking
/// module: to run the suite against two deciders in one crate, invoke it in two modules.
#[macro_export]
macro_rules! policy_decider_contract_suite {
    ($make_pair:expr $(,)?) => {
        $crate::__policy_decider_contract_case!($make_pair, an_explicit_allow_allows);
        $crate::__policy_decider_contract_case!($make_pair, an_explicit_deny_denies);
        $crate::__policy_decider_contract_case!(
            $make_pair,
            an_undefined_or_unclear_decision_denies
        );
        $crate::__policy_decider_contract_case!($make_pair, a_failing_engine_gives_no_decision);
        $crate::__policy_decider_contract_case!($make_pair, an_unreadable_answer_gives_no_decision);
        $crate::__policy_decider_contract_case!(
            $make_pair,
            an_engine_that_hangs_up_gives_no_decision
        );
        $crate::__policy_decider_contract_case!(
            $make_pair,
            a_silent_engine_gives_no_decision_at_the_deadline
        );
        $crate::__policy_decider_contract_case!($make_pair, the_engine_is_asked_the_whole_question);
        $crate::__policy_decider_contract_case!(
            $make_pair,
            every_decision_is_the_engines_answer_of_the_moment
        );
        $crate::__policy_decider_contract_case!(
            $make_pair,
            concurrent_questions_keep_their_deadlines
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __policy_decider_contract_case {
    ($make_pair:expr, $case:ident) => {
        #[tokio::test]
        async fn $case() {
            let (decider, engine) = $make_pair;
            $crate::policy_decider_suite::$case(&decider, &engine).await;
        }
    };
}

// ----- helpers ------------------------------------------------------------------------------

fn principal(raw: &str) -> Principal {
    Principal::parse(raw).expect("a principal")
}

/// A question with every part filled in.
pub fn full_question() -> PolicyInput {
    let mut identity = Identity::new(principal("user:alice"));
    identity.groups = vec![principal("group:ops"), principal("group:dev")];
    identity.tenant = Some(TenantId::parse("acme").expect("a tenant"));
    let mut input = PolicyInput::new(
        &identity,
        Permission::parse("tool:invoke").expect("a permission"),
        Some("tool/math__add".to_owned()),
    );
    input.context.insert("method".to_owned(), "POST".to_owned());
    input.context.insert("path".to_owned(), "/mcp".to_owned());
    input
        .context
        .insert("client_address".to_owned(), "192.0.2.7".to_owned());
    input
}

/// A question with nothing but the principal and the action.
pub fn bare_question() -> PolicyInput {
    PolicyInput::new(
        &Identity::new(principal("service:ci-bot")),
        Permission::parse("mcp_server:list").expect("a permission"),
        None,
    )
}

/// Asks once, failing the case when no answer comes within the deadline and its grace.
async fn decide(
    decider: &dyn PolicyDecider,
    engine: &dyn ScriptedEngine,
    input: &PolicyInput,
) -> Result<bool, DeciderError> {
    let bound = engine.deadline() + DEADLINE_GRACE;
    match tokio::time::timeout(bound, decider.decide(input)).await {
        Ok(answer) => answer,
        Err(_) => panic!(
            "no answer within {bound:?}: the deadline is {:?}",
            engine.deadline()
        ),
    }
}

async fn assert_decision(
    decider: &dyn PolicyDecider,
    engine: &dyn ScriptedEngine,
    answer: EngineAnswer,
    expected: bool,
) {
    engine.answer_with(answer).await;
    for input in [full_question(), bare_question()] {
        assert_eq!(
            decide(decider, engine, &input).await,
            Ok(expected),
            "the engine answered {answer:?} to {input:?}"
        );
    }
}

async fn assert_no_decision(
    decider: &dyn PolicyDecider,
    engine: &dyn ScriptedEngine,
    answer: EngineAnswer,
) {
    engine.answer_with(answer).await;
    for input in [full_question(), bare_question()] {
        match decide(decider, engine, &input).await {
            Err(DeciderError(message)) => assert!(
                !message.trim().is_empty(),
                "{answer:?}: the error says what went wrong"
            ),
            Ok(decision) => panic!("the engine answered {answer:?}: expected Err, got {decision}"),
        }
    }
}

// ----- the cases ----------------------------------------------------------------------------

pub async fn an_explicit_allow_allows(decider: &dyn PolicyDecider, engine: &dyn ScriptedEngine) {
    assert_decision(decider, engine, EngineAnswer::Allow, true).await;
}

pub async fn an_explicit_deny_denies(decider: &dyn PolicyDecider, engine: &dyn ScriptedEngine) {
    assert_decision(decider, engine, EngineAnswer::Deny, false).await;
}

pub async fn an_undefined_or_unclear_decision_denies(
    decider: &dyn PolicyDecider,
    engine: &dyn ScriptedEngine,
) {
    assert_decision(decider, engine, EngineAnswer::Undefined, false).await;
    assert_decision(decider, engine, EngineAnswer::Unclear, false).await;
}

pub async fn a_failing_engine_gives_no_decision(
    decider: &dyn PolicyDecider,
    engine: &dyn ScriptedEngine,
) {
    assert_no_decision(decider, engine, EngineAnswer::Failure).await;
}

pub async fn an_unreadable_answer_gives_no_decision(
    decider: &dyn PolicyDecider,
    engine: &dyn ScriptedEngine,
) {
    assert_no_decision(decider, engine, EngineAnswer::Garbled).await;
}

pub async fn an_engine_that_hangs_up_gives_no_decision(
    decider: &dyn PolicyDecider,
    engine: &dyn ScriptedEngine,
) {
    assert_no_decision(decider, engine, EngineAnswer::HangUp).await;
}

pub async fn a_silent_engine_gives_no_decision_at_the_deadline(
    decider: &dyn PolicyDecider,
    engine: &dyn ScriptedEngine,
) {
    engine.answer_with(EngineAnswer::Silent).await;
    let deadline = engine.deadline();
    let started = Instant::now();
    let answer = decide(decider, engine, &full_question()).await;
    let waited = started.elapsed();
    assert!(
        answer.is_err(),
        "a silent engine decides nothing: {answer:?}"
    );
    assert!(
        waited >= deadline.mul_f64(0.8),
        "gave up after {waited:?}, before the deadline of {deadline:?}"
    );
    assert_eq!(
        engine.questions().await.len(),
        1,
        "the question did reach the engine"
    );
}

pub async fn the_engine_is_asked_the_whole_question(
    decider: &dyn PolicyDecider,
    engine: &dyn ScriptedEngine,
) {
    engine.answer_with(EngineAnswer::Allow).await;
    assert!(engine.questions().await.is_empty(), "nothing asked yet");
    let questions = [full_question(), bare_question(), full_question()];
    for input in &questions {
        assert_eq!(decide(decider, engine, input).await, Ok(true), "{input:?}");
    }
    assert_eq!(
        engine.questions().await,
        questions,
        "one question per decision, as the decider was given it"
    );
}

pub async fn every_decision_is_the_engines_answer_of_the_moment(
    decider: &dyn PolicyDecider,
    engine: &dyn ScriptedEngine,
) {
    let script = [
        (EngineAnswer::Allow, Some(true)),
        (EngineAnswer::Deny, Some(false)),
        (EngineAnswer::Allow, Some(true)),
        (EngineAnswer::Silent, None),
        (EngineAnswer::Allow, Some(true)),
        (EngineAnswer::Failure, None),
        (EngineAnswer::Allow, Some(true)),
        (EngineAnswer::HangUp, None),
        (EngineAnswer::Undefined, Some(false)),
        (EngineAnswer::Allow, Some(true)),
    ];
    for (step, (answer, expected)) in script.into_iter().enumerate() {
        engine.answer_with(answer).await;
        let decision = decide(decider, engine, &full_question()).await;
        match expected {
            Some(expected) => assert_eq!(decision, Ok(expected), "step {step}: {answer:?}"),
            None => assert!(decision.is_err(), "step {step}: {answer:?}: {decision:?}"),
        }
    }
    assert_eq!(
        engine.questions().await.len(),
        script.len(),
        "every decision asked the engine"
    );
}

pub async fn concurrent_questions_keep_their_deadlines(
    decider: &dyn PolicyDecider,
    engine: &dyn ScriptedEngine,
) {
    engine.answer_with(EngineAnswer::Allow).await;
    let questions: Vec<PolicyInput> = (0..8).map(|_| full_question()).collect();
    let answers =
        futures::future::join_all(questions.iter().map(|input| decide(decider, engine, input)))
            .await;
    assert!(
        answers.iter().all(|answer| *answer == Ok(true)),
        "{answers:?}"
    );

    // Silent: each question waits out its own deadline, side by side, not one after another.
    engine.answer_with(EngineAnswer::Silent).await;
    let started = Instant::now();
    let answers =
        futures::future::join_all(questions.iter().map(|input| decide(decider, engine, input)))
            .await;
    let waited = started.elapsed();
    assert!(answers.iter().all(Result::is_err), "{answers:?}");
    let deadline = engine.deadline();
    assert!(
        waited < deadline * 2 + DEADLINE_GRACE / 2,
        "eight silent questions took {waited:?} with a deadline of {deadline:?}"
    );
    assert_eq!(engine.questions().await.len(), 16);
}
