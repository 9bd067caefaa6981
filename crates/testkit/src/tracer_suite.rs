//! What every [`Tracer`] promises, as tests that every tracer must pass.
//!
//! The adapter's tests run the whole suite with one line:
//!
//! ```text
//! mcpgw_testkit::tracer_contract_suite!(my_tracer());
//! ```
//!
//! where the expression answers an `Arc<dyn Tracer>`, fresh for every case, that records every
//! new trace and follows its parent's sampling decision otherwise (the parent-based, always-on
//! sampler every OpenTelemetry SDK defaults to). Each case is also a public function taking
//! `&dyn Tracer`. The cases check what the port's documentation promises:
//! - a span without a parent starts a new trace, with ids that are never zero and differ
//!   between traces;
//! - a child continues its parent's trace (same trace id, a span id of its own, the parent's
//!   trace state), also when the parent came from another process;
//! - a child of an unsampled parent records nothing but still has a context, unsampled, that
//!   its own children and upstreams continue;
//! - a span takes attributes of every kind, events and an error, and ending it twice (once by
//!   hand, once by the drop of its owner) is harmless.

use mcpgw_core::trace::{AttributeValue, SpanId, SpanKind, TraceContext, TraceId, Tracer};

/// Runs every case of the tracer contract against the tracer `$make` answers.
#[macro_export]
macro_rules! tracer_contract_suite {
    ($make:expr $(,)?) => {
        $crate::__tracer_contract_case!($make, a_root_span_starts_a_new_trace);
        $crate::__tracer_contract_case!($make, a_child_continues_its_parents_trace);
        $crate::__tracer_contract_case!($make, a_child_of_an_unsampled_parent_records_nothing);
        $crate::__tracer_contract_case!($make, a_span_takes_what_it_is_given_and_ends_once);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __tracer_contract_case {
    ($make:expr, $case:ident) => {
        #[test]
        fn $case() {
            let tracer: std::sync::Arc<dyn mcpgw_core::trace::Tracer> = $make;
            $crate::tracer_suite::$case(tracer.as_ref());
        }
    };
}

fn remote_parent(sampled: bool) -> TraceContext {
    TraceContext {
        trace_id: TraceId([0x4b; 16]),
        span_id: SpanId([0x0f; 8]),
        sampled,
        state: Some("vendor=one".into()),
    }
}

pub fn a_root_span_starts_a_new_trace(tracer: &dyn Tracer) {
    let mut first = tracer.start("root", SpanKind::Server, None);
    let mut second = tracer.start("root", SpanKind::Server, None);
    let (one, two) = (first.context(), second.context());
    assert!(first.is_recording(), "a new trace is recorded");
    assert!(one.sampled, "a new recorded trace is sampled");
    assert_ne!(one.trace_id.0, [0; 16]);
    assert_ne!(one.span_id.0, [0; 8]);
    assert_ne!(
        one.trace_id, two.trace_id,
        "each root starts a trace of its own"
    );
    first.end();
    second.end();
}

pub fn a_child_continues_its_parents_trace(tracer: &dyn Tracer) {
    let parent = remote_parent(true);
    let mut child = tracer.start("child", SpanKind::Client, Some(&parent));
    let context = child.context();
    assert!(child.is_recording());
    assert_eq!(context.trace_id, parent.trace_id);
    assert_ne!(context.span_id, parent.span_id);
    assert!(context.sampled);
    assert_eq!(context.state.as_deref(), Some("vendor=one"));
    let mut grandchild = tracer.start("grandchild", SpanKind::Internal, Some(&context));
    assert_eq!(grandchild.context().trace_id, parent.trace_id);
    grandchild.end();
    child.end();
}

pub fn a_child_of_an_unsampled_parent_records_nothing(tracer: &dyn Tracer) {
    let parent = remote_parent(false);
    let mut child = tracer.start("child", SpanKind::Server, Some(&parent));
    assert!(!child.is_recording(), "the parent's decision is followed");
    let context = child.context();
    assert_eq!(context.trace_id, parent.trace_id, "the trace still goes on");
    assert!(!context.sampled);
    child.end();
}

pub fn a_span_takes_what_it_is_given_and_ends_once(tracer: &dyn Tracer) {
    let mut span = tracer.start("work", SpanKind::Internal, None);
    span.update_name("work done".to_owned());
    span.set_attribute("text", AttributeValue::from("value"));
    span.set_attribute("number", AttributeValue::from(7_i64));
    span.set_attribute("flag", AttributeValue::from(true));
    span.set_attribute("ratio", AttributeValue::from(0.5));
    span.add_event("step", vec![("index", AttributeValue::from(1_i64))]);
    span.set_error("timeout", "the work took too long");
    span.end();
    // A second end (the owner's drop after an explicit end) is harmless.
    span.end();
    assert!(!span.context().trace_id.0.iter().all(|byte| *byte == 0));
}
