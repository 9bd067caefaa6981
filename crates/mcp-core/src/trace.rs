//! W3C trace context: which trace a call belongs to, as it travels between the gateway, its
//! clients and its upstreams.
//!
//! A client names the trace of its request in the `traceparent` (and `tracestate`) HTTP header,
//! or in the request's `_meta` under the same keys (how MCP clients pass it over any transport).
//! The gateway continues that trace and passes the context of its own upstream request on: in
//! `_meta` for every upstream, and also as HTTP headers to remote servers.
//!
//! Spans go through the [`Tracer`] port: the gateway's code starts a [`Span`] where a unit of
//! work begins (an HTTP request, an MCP method, an authorization, a lazy start, a group's choice
//! of member, an upstream request, a store write) and the installed tracer (the OpenTelemetry
//! adapter of the bundled server, or an embedder's own) records and exports it. With no tracer
//! installed, starting a span is one relaxed atomic load and nothing else: a span is then only
//! the context it was started under, so a caller's trace context still reaches the upstream
//! unchanged.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use serde_json::{Map, Value};

/// The `_meta` key and HTTP header of the trace parent.
pub const TRACEPARENT: &str = "traceparent";
/// The `_meta` key and HTTP header of the vendors' trace state.
pub const TRACESTATE: &str = "tracestate";

/// A `tracestate` longer than this is dropped (the limit every tracing system must accept).
const MAX_TRACESTATE_LEN: usize = 512;

/// A 16-byte trace id; never all zeros.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceId(pub [u8; 16]);

/// An 8-byte span id; never all zeros.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanId(pub [u8; 8]);

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, &self.0)
    }
}

impl fmt::Debug for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, &self.0)
    }
}

impl fmt::Display for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, &self.0)
    }
}

impl fmt::Debug for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, &self.0)
    }
}

/// Serialized as their hex digits, as `traceparent` writes them.
impl serde::Serialize for TraceId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl serde::Serialize for SpanId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

fn write_hex(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    for byte in bytes {
        write!(f, "{byte:02x}")?;
    }
    Ok(())
}

/// The context of one span: what a child span, or an upstream, continues.
#[derive(Clone, PartialEq, Eq)]
pub struct TraceContext {
    pub trace_id: TraceId,
    /// The span that is the parent of whatever continues this context.
    pub span_id: SpanId,
    /// Whether the trace is being recorded (the `sampled` flag).
    pub sampled: bool,
    /// The `tracestate` that came with it, passed on unchanged.
    pub state: Option<Arc<str>>,
}

impl fmt::Debug for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.traceparent())
    }
}

impl TraceContext {
    /// Reads a `traceparent` value and its optional `tracestate`. `None` for a value that is
    /// not a valid trace parent (wrong length, upper-case or non-hex digits, version `ff`, an
    /// all-zero trace or span id): the trace is then started afresh, as if none had come.
    /// A `tracestate` that is too long or holds characters outside printable ASCII is left
    /// out; the trace parent still counts.
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<Self> {
        let value = traceparent.trim_matches([' ', '\t']);
        let bytes = value.as_bytes();
        if bytes.len() < 55 {
            return None;
        }
        let version = hex_bytes::<1>(&value[0..2])?[0];
        if version == 0xff || bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
            return None;
        }
        // Version 00 is exactly 55 characters; a later version may append fields after a dash.
        if (version == 0 && bytes.len() != 55) || (bytes.len() > 55 && bytes[55] != b'-') {
            return None;
        }
        let trace_id = hex_bytes::<16>(&value[3..35])?;
        let span_id = hex_bytes::<8>(&value[36..52])?;
        let flags = hex_bytes::<1>(&value[53..55])?[0];
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        let state = tracestate
            .map(|state| state.trim_matches([' ', '\t']))
            .filter(|state| {
                !state.is_empty()
                    && state.len() <= MAX_TRACESTATE_LEN
                    && state.bytes().all(|byte| (0x20..0x7f).contains(&byte))
            })
            .map(Arc::from);
        Some(Self {
            trace_id: TraceId(trace_id),
            span_id: SpanId(span_id),
            sampled: flags & 1 == 1,
            state,
        })
    }

    /// Reads the context a request's `_meta` carries (`traceparent`, `tracestate`), if any.
    pub fn from_meta(meta: &Map<String, Value>) -> Option<Self> {
        let parent = meta.get(TRACEPARENT)?.as_str()?;
        Self::parse(parent, meta.get(TRACESTATE).and_then(Value::as_str))
    }

    /// The `traceparent` value: version 00, this trace and span, and the sampled flag.
    pub fn traceparent(&self) -> String {
        format!(
            "00-{}-{}-{}",
            self.trace_id,
            self.span_id,
            if self.sampled { "01" } else { "00" }
        )
    }

    /// Writes this context into a request's `_meta`, replacing what the caller put there:
    /// the upstream's parent is the gateway's span, not the caller's.
    pub fn write_meta(&self, meta: &mut Map<String, Value>) {
        meta.insert(TRACEPARENT.to_owned(), Value::String(self.traceparent()));
        match &self.state {
            Some(state) => {
                meta.insert(TRACESTATE.to_owned(), Value::String(state.to_string()));
            }
            None => {
                meta.remove(TRACESTATE);
            }
        }
    }
}

/// Names of span attributes: OpenTelemetry's semantic conventions where they define one (MCP,
/// generative AI tools, RPC, HTTP, databases), `mcpgw.*` for what only the gateway knows.
pub mod keys {
    pub const MCP_METHOD_NAME: &str = "mcp.method.name";
    pub const MCP_SESSION_ID: &str = "mcp.session.id";
    pub const MCP_PROTOCOL_VERSION: &str = "mcp.protocol.version";
    pub const JSONRPC_REQUEST_ID: &str = "jsonrpc.request.id";
    pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
    pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
    pub const ERROR_TYPE: &str = "error.type";
    pub const RPC_RESPONSE_STATUS_CODE: &str = "rpc.response.status_code";
    pub const NETWORK_TRANSPORT: &str = "network.transport";
    pub const SERVER_ADDRESS: &str = "server.address";
    pub const SERVER_PORT: &str = "server.port";
    pub const HTTP_REQUEST_METHOD: &str = "http.request.method";
    pub const HTTP_ROUTE: &str = "http.route";
    pub const HTTP_RESPONSE_STATUS_CODE: &str = "http.response.status_code";
    pub const URL_PATH: &str = "url.path";
    pub const CLIENT_ADDRESS: &str = "client.address";
    pub const USER_AGENT_ORIGINAL: &str = "user_agent.original";
    pub const DB_SYSTEM_NAME: &str = "db.system.name";
    pub const DB_OPERATION_NAME: &str = "db.operation.name";
    pub const DB_COLLECTION_NAME: &str = "db.collection.name";
    /// The server or group a call went to.
    pub const MCP_SERVER_ID: &str = "mcpgw.mcp_server_id";
    /// The server's mode (`subprocess`, `docker`, `remote`).
    pub const MCP_SERVER_MODE: &str = "mcpgw.mcp_server.mode";
    pub const GROUP_ID: &str = "mcpgw.group.id";
    pub const GROUP_STRATEGY: &str = "mcpgw.group.strategy";
    pub const GROUP_MEMBER: &str = "mcpgw.group.member";
    /// Which attempt of a group call an upstream request is (1, then 2 for the retry).
    pub const GROUP_ATTEMPT: &str = "mcpgw.group.attempt";
    pub const PRINCIPAL: &str = "mcpgw.principal";
    /// How a caller authenticated (`api_key`, `jwt`, `session`, `anonymous`, `none`).
    pub const AUTH_METHOD: &str = "mcpgw.auth.method";
    /// The permission an authorization checked (`mcp_server:list`).
    pub const AUTHZ_PERMISSION: &str = "mcpgw.authz.permission";
    /// An authorization's answer (`allow` or `deny`).
    pub const AUTHZ_DECISION: &str = "mcpgw.authz.decision";
    /// Whether the call had to start its server first.
    pub const COLD_START: &str = "mcpgw.cold_start";
    /// The curated endpoint a call came through.
    pub const ENDPOINT: &str = "mcpgw.endpoint";
}

/// What a span stands for, as exporters classify it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// Handling a request that came from a client (an HTTP request, an MCP method).
    Server,
    /// A request to another service (an upstream MCP server, a database).
    Client,
    /// Work inside the gateway (an authorization, a start, a group's choice of member).
    Internal,
}

/// The value of a span attribute.
#[derive(Debug, Clone, PartialEq)]
pub enum AttributeValue {
    Str(Cow<'static, str>),
    Int(i64),
    Bool(bool),
    Float(f64),
}

impl From<&'static str> for AttributeValue {
    fn from(value: &'static str) -> Self {
        Self::Str(Cow::Borrowed(value))
    }
}

impl From<String> for AttributeValue {
    fn from(value: String) -> Self {
        Self::Str(Cow::Owned(value))
    }
}

impl From<i64> for AttributeValue {
    fn from(value: i64) -> Self {
        Self::Int(value)
    }
}

impl From<u64> for AttributeValue {
    fn from(value: u64) -> Self {
        Self::Int(i64::try_from(value).unwrap_or(i64::MAX))
    }
}

impl From<bool> for AttributeValue {
    fn from(value: bool) -> Self {
        Self::Bool(value)
    }
}

impl From<f64> for AttributeValue {
    fn from(value: f64) -> Self {
        Self::Float(value)
    }
}

/// The port through which spans are recorded and exported.
///
/// Contract for implementors:
/// - `start` with a parent continues the parent's trace (same trace id, the parent's span id
///   as parent); without one it starts a new trace. The tracer's sampler decides whether the
///   span records; a span that does not still has a context (with `sampled` false) that
///   children and upstreams continue.
/// - Everything is cheap and never blocks: export happens in the background.
pub trait Tracer: Send + Sync {
    fn start(
        &self,
        name: &'static str,
        kind: SpanKind,
        parent: Option<&TraceContext>,
    ) -> Box<dyn SpanRecorder>;
}

/// One started span of a [`Tracer`]. Ending it (or dropping it) records its end time.
pub trait SpanRecorder: Send + Sync {
    /// This span's own context, for its children and for upstream requests.
    fn context(&self) -> TraceContext;
    /// Whether anything set on this span is kept (the trace is sampled).
    fn is_recording(&self) -> bool;
    fn update_name(&mut self, name: String);
    fn set_attribute(&mut self, key: &'static str, value: AttributeValue);
    fn add_event(&mut self, name: &'static str, attributes: Vec<(&'static str, AttributeValue)>);
    /// Marks the span failed: `error_type` is a short, low-cardinality class of the failure.
    fn set_error(&mut self, error_type: &str, message: &str);
    fn end(&mut self);
}

/// Whether a tracer is installed; read on every span start, so it is an atomic apart from the
/// tracer itself.
static ENABLED: AtomicBool = AtomicBool::new(false);
static TRACER: RwLock<Option<Arc<dyn Tracer>>> = RwLock::new(None);

/// Installs the process-wide tracer: spans started from now on go to it.
pub fn install(tracer: Arc<dyn Tracer>) {
    *TRACER.write().unwrap_or_else(PoisonError::into_inner) = Some(tracer);
    ENABLED.store(true, Ordering::Release);
}

/// Removes the process-wide tracer: spans started from now on are not recorded.
pub fn uninstall() {
    ENABLED.store(false, Ordering::Release);
    *TRACER.write().unwrap_or_else(PoisonError::into_inner) = None;
}

/// Whether spans are being recorded at all.
#[inline]
pub fn is_enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

fn installed() -> Option<Arc<dyn Tracer>> {
    TRACER
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// A span, or (with no tracer installed) only the context it was started under.
pub struct Span {
    recorder: Option<Box<dyn SpanRecorder>>,
    context: Option<TraceContext>,
}

impl fmt::Debug for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Span")
            .field("context", &self.context)
            .field("recording", &self.is_recording())
            .finish()
    }
}

impl Span {
    /// Starts a span under `parent` (a new trace when `None`); with no tracer installed, the
    /// span is inert and its [`Span::context`] is `parent`.
    #[inline]
    pub fn start(name: &'static str, kind: SpanKind, parent: Option<&TraceContext>) -> Self {
        if !is_enabled() {
            return Self {
                recorder: None,
                context: parent.cloned(),
            };
        }
        Self::start_enabled(name, kind, parent)
    }

    /// Like [`Span::start`], but when no tracer is installed the span neither records nor
    /// carries a context: for spans whose context nobody passes on.
    #[inline]
    pub fn start_local(name: &'static str, kind: SpanKind, parent: Option<&TraceContext>) -> Self {
        if !is_enabled() {
            return Self::none();
        }
        Self::start_enabled(name, kind, parent)
    }

    /// A span under the context of the running task (see [`in_scope`]), when there is one and
    /// a tracer is installed; nothing otherwise. For work deep inside a request (a store
    /// write) that has no context handed to it.
    #[inline]
    pub fn start_in_scope(name: &'static str, kind: SpanKind) -> Self {
        if !is_enabled() {
            return Self::none();
        }
        match current() {
            Some(parent) => Self::start_enabled(name, kind, Some(&parent)),
            None => Self::none(),
        }
    }

    #[cold]
    fn start_enabled(name: &'static str, kind: SpanKind, parent: Option<&TraceContext>) -> Self {
        match installed() {
            Some(tracer) => {
                let recorder = tracer.start(name, kind, parent);
                let context = Some(recorder.context());
                Self {
                    recorder: Some(recorder),
                    context,
                }
            }
            None => Self {
                recorder: None,
                context: parent.cloned(),
            },
        }
    }

    /// A span that is nothing: neither records nor carries a context.
    pub const fn none() -> Self {
        Self {
            recorder: None,
            context: None,
        }
    }

    /// The context children and upstream requests continue: this span's own when it was
    /// recorded or sampled out by a tracer, else the parent it was started under.
    pub fn context(&self) -> Option<&TraceContext> {
        self.context.as_ref()
    }

    /// Whether attributes set on this span are kept: callers skip building expensive ones
    /// otherwise.
    #[inline]
    pub fn is_recording(&self) -> bool {
        self.recorder
            .as_ref()
            .is_some_and(|recorder| recorder.is_recording())
    }

    /// Renames the span (a name that carries a target, such as `tools/call echo`).
    pub fn update_name(&mut self, name: impl FnOnce() -> String) {
        if let Some(recorder) = self.recorder.as_mut().filter(|r| r.is_recording()) {
            recorder.update_name(name());
        }
    }

    pub fn set_attribute(&mut self, key: &'static str, value: impl Into<AttributeValue>) {
        if let Some(recorder) = self.recorder.as_mut().filter(|r| r.is_recording()) {
            recorder.set_attribute(key, value.into());
        }
    }

    pub fn add_event(
        &mut self,
        name: &'static str,
        attributes: impl FnOnce() -> Vec<(&'static str, AttributeValue)>,
    ) {
        if let Some(recorder) = self.recorder.as_mut().filter(|r| r.is_recording()) {
            recorder.add_event(name, attributes());
        }
    }

    /// Marks the span failed with a short class of failure and a message.
    pub fn set_error(&mut self, error_type: &str, message: &str) {
        if let Some(recorder) = self.recorder.as_mut().filter(|r| r.is_recording()) {
            recorder.set_error(error_type, message);
        }
    }

    /// Ends the span now (dropping it does too).
    pub fn end(mut self) {
        if let Some(mut recorder) = self.recorder.take() {
            recorder.end();
        }
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        if let Some(mut recorder) = self.recorder.take() {
            recorder.end();
        }
    }
}

thread_local! {
    /// The context of the future being polled on this thread (see [`in_scope`]).
    static CURRENT: std::cell::RefCell<Option<TraceContext>> =
        const { std::cell::RefCell::new(None) };
}

/// Puts the outer context back when a poll ends, also when it panics.
struct Restore<'a> {
    inner: &'a mut Option<TraceContext>,
    outer: Option<Option<TraceContext>>,
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        let outer = self.outer.take().flatten();
        *self.inner = CURRENT.with(|current| current.replace(outer));
    }
}

/// Runs `future` with `context` as the current context while it is polled (whichever thread
/// polls it): spans started inside it with [`Span::start_in_scope`] are its children. Work it
/// spawns onto other tasks does not inherit the context.
pub async fn in_scope<F: Future>(context: Option<TraceContext>, future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = context;
    std::future::poll_fn(move |cx| {
        let outer = CURRENT.with(|current| current.replace(context.take()));
        let _restore = Restore {
            inner: &mut context,
            outer: Some(outer),
        };
        future.as_mut().poll(cx)
    })
    .await
}

/// The context of the future being polled (see [`in_scope`]), if any.
pub fn current() -> Option<TraceContext> {
    CURRENT.with(|current| current.borrow().clone())
}

/// `N` bytes from exactly `2 * N` lower-case hex digits.
fn hex_bytes<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digits = text.as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (index, pair) in digits.chunks_exact(2).enumerate() {
        out[index] = (hex_digit(pair[0])? << 4) | hex_digit(pair[1])?;
    }
    Some(out)
}

fn hex_digit(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_parent_is_read_and_written_back_unchanged() {
        let context = TraceContext::parse(PARENT, Some("congo=t61rcWkgMzE")).expect("valid");
        assert_eq!(
            context.trace_id.to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(context.span_id.to_string(), "00f067aa0ba902b7");
        assert!(context.sampled);
        assert_eq!(context.state.as_deref(), Some("congo=t61rcWkgMzE"));
        assert_eq!(context.traceparent(), PARENT);

        let unsampled = TraceContext::parse(&PARENT.replace("-01", "-00"), None).expect("valid");
        assert!(!unsampled.sampled);
        assert!(unsampled.traceparent().ends_with("-00"));
    }

    #[test]
    fn a_later_version_is_read_up_to_what_version_00_defines() {
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra";
        let context = TraceContext::parse(later, None).expect("a later version is continued");
        assert_eq!(context.traceparent(), PARENT);
    }

    #[test]
    fn invalid_parents_start_a_new_trace() {
        // Bad input tried: empty, too short, too long for version 00, upper-case hex, a
        // non-hex digit, version ff, all-zero ids, wrong separators, a later version with
        // something other than a dash after the flags.
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",
        ] {
            assert_eq!(TraceContext::parse(bad, None), None, "{bad:?}");
        }
    }

    #[test]
    fn an_unfit_trace_state_is_left_out_and_the_parent_still_counts() {
        // Bad input tried: a trace state over 512 characters, one with a control character,
        // and an empty one.
        for state in [
            "a=".to_owned() + &"b".repeat(600),
            "a=b\u{7}".into(),
            "".into(),
        ] {
            let context = TraceContext::parse(PARENT, Some(&state)).expect("the parent is valid");
            assert_eq!(context.state, None);
        }
    }

    #[test]
    fn meta_is_read_and_replaced() {
        let meta = json!({"traceparent": PARENT, "tracestate": "a=1", "other": true});
        let context = TraceContext::from_meta(meta.as_object().expect("object")).expect("found");
        assert_eq!(context.state.as_deref(), Some("a=1"));

        let child = TraceContext {
            span_id: SpanId([1, 2, 3, 4, 5, 6, 7, 8]),
            state: None,
            ..context
        };
        let mut written = meta.as_object().cloned().expect("object");
        child.write_meta(&mut written);
        assert_eq!(
            written["traceparent"],
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0102030405060708-01"
        );
        assert!(!written.contains_key("tracestate"));
        assert_eq!(written["other"], true);

        // Bad input tried: a traceparent that is not a string.
        let wrong = json!({"traceparent": 7});
        assert_eq!(
            TraceContext::from_meta(wrong.as_object().expect("object")),
            None
        );
    }
}
