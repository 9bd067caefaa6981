//! The gateway's tracing port implemented with the OpenTelemetry SDK.

use std::borrow::Cow;
use std::str::FromStr;

use mcpgw_core::trace::{
    AttributeValue, SpanId, SpanKind, SpanRecorder, TraceContext, TraceId, Tracer,
};
use opentelemetry::trace::{
    Span as _, SpanContext, Status, TraceContextExt, TraceFlags, TraceState, Tracer as _,
};
use opentelemetry::{Context, KeyValue, Value};
use opentelemetry_sdk::trace::SdkTracer;

/// [`Tracer`] over an SDK tracer: spans are sampled, batched and exported by the SDK.
pub struct OtelTracer {
    tracer: SdkTracer,
}

impl OtelTracer {
    pub fn new(tracer: SdkTracer) -> Self {
        Self { tracer }
    }
}

impl Tracer for OtelTracer {
    fn start(
        &self,
        name: &'static str,
        kind: SpanKind,
        parent: Option<&TraceContext>,
    ) -> Box<dyn SpanRecorder> {
        let parent_context = match parent {
            Some(parent) => Context::new().with_remote_span_context(span_context_of(parent)),
            None => Context::new(),
        };
        let span = self
            .tracer
            .span_builder(Cow::Borrowed(name))
            .with_kind(otel_kind(kind))
            .start_with_context(&self.tracer, &parent_context);
        Box::new(OtelSpan { span })
    }
}

struct OtelSpan {
    span: opentelemetry_sdk::trace::Span,
}

impl SpanRecorder for OtelSpan {
    fn context(&self) -> TraceContext {
        let context = self.span.span_context();
        let state = context.trace_state().header();
        TraceContext {
            trace_id: TraceId(context.trace_id().to_bytes()),
            span_id: SpanId(context.span_id().to_bytes()),
            sampled: context.is_sampled(),
            state: (!state.is_empty()).then(|| state.into()),
        }
    }

    fn is_recording(&self) -> bool {
        self.span.is_recording()
    }

    fn update_name(&mut self, name: String) {
        self.span.update_name(name);
    }

    fn set_attribute(&mut self, key: &'static str, value: AttributeValue) {
        self.span
            .set_attribute(KeyValue::new(key, otel_value(value)));
    }

    fn add_event(&mut self, name: &'static str, attributes: Vec<(&'static str, AttributeValue)>) {
        let attributes = attributes
            .into_iter()
            .map(|(key, value)| KeyValue::new(key, otel_value(value)))
            .collect();
        self.span.add_event(name, attributes);
    }

    fn set_error(&mut self, error_type: &str, message: &str) {
        self.span
            .set_attribute(KeyValue::new("error.type", error_type.to_owned()));
        self.span.set_status(Status::error(message.to_owned()));
    }

    fn end(&mut self) {
        self.span.end();
    }
}

/// The SDK's form of a context the gateway received or made.
pub(crate) fn span_context_of(context: &TraceContext) -> SpanContext {
    let state = context
        .state
        .as_deref()
        .and_then(|state| TraceState::from_str(state).ok())
        .unwrap_or_default();
    SpanContext::new(
        opentelemetry::trace::TraceId::from_bytes(context.trace_id.0),
        opentelemetry::trace::SpanId::from_bytes(context.span_id.0),
        if context.sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        },
        true,
        state,
    )
}

fn otel_kind(kind: SpanKind) -> opentelemetry::trace::SpanKind {
    match kind {
        SpanKind::Server => opentelemetry::trace::SpanKind::Server,
        SpanKind::Client => opentelemetry::trace::SpanKind::Client,
        SpanKind::Internal => opentelemetry::trace::SpanKind::Internal,
    }
}

fn otel_value(value: AttributeValue) -> Value {
    match value {
        AttributeValue::Str(text) => Value::from(text.into_owned()),
        AttributeValue::Int(number) => Value::I64(number),
        AttributeValue::Bool(flag) => Value::Bool(flag),
        AttributeValue::Float(number) => Value::F64(number),
    }
}
