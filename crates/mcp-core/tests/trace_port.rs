//! The tracing port: what a span does with no tracer installed (nothing but carry its parent's
//! context), and what an installed tracer is asked and told.
//!
//! The tracer is process-wide, so every step runs in one test, in order.

use std::sync::{Arc, Mutex};

use mcpgw_core::trace::{
    self, AttributeValue, Span, SpanId, SpanKind, SpanRecorder, TraceContext, TraceId, Tracer,
};

#[derive(Debug, Clone, PartialEq)]
enum Record {
    Started {
        name: &'static str,
        kind: SpanKind,
        parent: Option<SpanId>,
        id: SpanId,
    },
    Renamed(SpanId, String),
    Attribute(SpanId, &'static str, AttributeValue),
    Event(SpanId, &'static str),
    Failed(SpanId, String),
    Ended(SpanId),
}

/// Records everything; spans record unless their name is `unsampled`.
#[derive(Default)]
struct FakeTracer {
    records: Arc<Mutex<Vec<Record>>>,
    next: Mutex<u8>,
}

struct FakeSpan {
    context: TraceContext,
    recording: bool,
    records: Arc<Mutex<Vec<Record>>>,
}

impl Tracer for FakeTracer {
    fn start(
        &self,
        name: &'static str,
        kind: SpanKind,
        parent: Option<&TraceContext>,
    ) -> Box<dyn SpanRecorder> {
        let mut next = self.next.lock().unwrap();
        *next += 1;
        let id = SpanId([*next; 8]);
        let recording = name != "unsampled";
        self.records.lock().unwrap().push(Record::Started {
            name,
            kind,
            parent: parent.map(|parent| parent.span_id),
            id,
        });
        Box::new(FakeSpan {
            context: TraceContext {
                trace_id: parent.map_or(TraceId([9; 16]), |parent| parent.trace_id),
                span_id: id,
                sampled: recording,
                state: parent.and_then(|parent| parent.state.clone()),
            },
            recording,
            records: Arc::clone(&self.records),
        })
    }
}

impl SpanRecorder for FakeSpan {
    fn context(&self) -> TraceContext {
        self.context.clone()
    }
    fn is_recording(&self) -> bool {
        self.recording
    }
    fn update_name(&mut self, name: String) {
        let id = self.context.span_id;
        self.records.lock().unwrap().push(Record::Renamed(id, name));
    }
    fn set_attribute(&mut self, key: &'static str, value: AttributeValue) {
        let id = self.context.span_id;
        self.records
            .lock()
            .unwrap()
            .push(Record::Attribute(id, key, value));
    }
    fn add_event(&mut self, name: &'static str, _attributes: Vec<(&'static str, AttributeValue)>) {
        let id = self.context.span_id;
        self.records.lock().unwrap().push(Record::Event(id, name));
    }
    fn set_error(&mut self, error_type: &str, _message: &str) {
        let id = self.context.span_id;
        self.records
            .lock()
            .unwrap()
            .push(Record::Failed(id, error_type.to_owned()));
    }
    fn end(&mut self) {
        let id = self.context.span_id;
        self.records.lock().unwrap().push(Record::Ended(id));
    }
}

fn caller() -> TraceContext {
    TraceContext::parse(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        Some("vendor=1"),
    )
    .expect("valid")
}

#[tokio::test]
async fn spans_are_inert_without_a_tracer_and_reported_with_one() {
    // Without a tracer: a span only carries its parent's context, so a caller's trace reaches
    // the upstream unchanged; nothing asked for is built.
    assert!(!trace::is_enabled());
    let parent = caller();
    let mut span = Span::start("tools/call", SpanKind::Server, Some(&parent));
    assert_eq!(span.context(), Some(&parent));
    assert!(!span.is_recording());
    span.update_name(|| panic!("a name is never built for an inert span"));
    span.add_event("never", || {
        panic!("attributes are never built for an inert span")
    });
    span.set_attribute("key", "value");
    span.end();
    assert_eq!(
        Span::start_local("x", SpanKind::Internal, Some(&parent)).context(),
        None
    );
    let scoped = trace::in_scope(Some(parent.clone()), async {
        (
            trace::current(),
            Span::start_in_scope("write", SpanKind::Client)
                .context()
                .cloned(),
        )
    })
    .await;
    assert_eq!(scoped, (Some(parent.clone()), None));
    assert_eq!(trace::current(), None, "the scope ends with its future");

    // With a tracer: children continue the parent's trace, attributes are kept, each span
    // ends exactly once.
    let tracer = Arc::new(FakeTracer::default());
    let records = Arc::clone(&tracer.records);
    trace::install(tracer);
    assert!(trace::is_enabled());
    let mut server = Span::start("tools/call", SpanKind::Server, Some(&parent));
    let server_context = server.context().cloned().expect("a context of its own");
    assert_eq!(server_context.trace_id, parent.trace_id);
    assert_ne!(server_context.span_id, parent.span_id);
    assert_eq!(server_context.state.as_deref(), Some("vendor=1"));
    server.update_name(|| "tools/call echo".to_owned());
    server.set_attribute("gen_ai.tool.name", "echo");
    {
        let mut client = Span::start_local("tools/call", SpanKind::Client, server.context());
        client.add_event("retry", Vec::new);
        client.set_error("timeout", "the tool did not answer");
        // Dropped here: it ends.
    }
    let unsampled = Span::start("unsampled", SpanKind::Internal, None);
    let mut unsampled = unsampled;
    assert!(!unsampled.is_recording());
    assert!(
        unsampled.context().is_some(),
        "an unsampled span still has a context"
    );
    unsampled.update_name(|| panic!("nothing is built for a span that does not record"));
    drop(unsampled);
    let in_request = trace::in_scope(Some(server_context.clone()), async {
        Span::start_in_scope("INSERT mcp_servers", SpanKind::Client)
            .context()
            .cloned()
    })
    .await
    .expect("a span under the task's context");
    assert_eq!(in_request.trace_id, parent.trace_id);
    server.end();
    trace::uninstall();
    assert!(!trace::is_enabled());

    let records = records.lock().unwrap().clone();
    let server_id = server_context.span_id;
    let client_id = SpanId([2; 8]);
    assert_eq!(
        records[0],
        Record::Started {
            name: "tools/call",
            kind: SpanKind::Server,
            parent: Some(parent.span_id),
            id: server_id,
        }
    );
    assert!(records.contains(&Record::Renamed(server_id, "tools/call echo".into())));
    assert!(records.contains(&Record::Attribute(
        server_id,
        "gen_ai.tool.name",
        AttributeValue::from("echo")
    )));
    assert!(records.contains(&Record::Started {
        name: "tools/call",
        kind: SpanKind::Client,
        parent: Some(server_id),
        id: client_id,
    }));
    assert!(records.contains(&Record::Event(client_id, "retry")));
    assert!(records.contains(&Record::Failed(client_id, "timeout".into())));
    for id in [server_id, client_id, SpanId([3; 8]), SpanId([4; 8])] {
        let ends = records
            .iter()
            .filter(|record| **record == Record::Ended(id))
            .count();
        assert_eq!(ends, 1, "span {id} ends once: {records:?}");
    }
}
