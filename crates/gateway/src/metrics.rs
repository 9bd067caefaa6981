//! Names of the gateway's Prometheus metrics that the application layer records, through the
//! `metrics` facade (the HTTP adapter installs the exporter and records the HTTP ones), and
//! [`EventMetrics`], the event observer that records those that domain events carry.
//!
//! Label values come only from bounded sets: server and group ids (the registry), tool names
//! from the catalogue (never the name a caller sent), event types, states, result words. Tool
//! names are further capped per server (see [`MAX_TOOL_LABELS_PER_SERVER`]).
//!
//! Sampled tool calls also leave exemplars ([`ToolCallExemplars`]): the trace of the last
//! call that fell into each bucket of each `mcpgw_tool_call_duration_seconds` series, which
//! the OpenMetrics rendering of `/metrics` attaches to the bucket's line.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError, RwLock};
use std::time::Duration;

use mcpgw_core::trace::{SpanId, TraceId};
use mcpgw_core::{DomainEvent, EventObserver, PublishedEvent, ServerId, Timestamp};
use metrics::{Counter, Histogram, SharedString};

pub const MCP_SERVER_UP: &str = "mcpgw_mcp_server_up";
pub const MCP_SERVER_STATE: &str = "mcpgw_mcp_server_state";
pub const MCP_SERVER_STARTS_TOTAL: &str = "mcpgw_mcp_server_starts_total";
pub const MCP_SERVER_STOPS_TOTAL: &str = "mcpgw_mcp_server_stops_total";
pub const MCP_SERVER_START_DURATION_SECONDS: &str = "mcpgw_mcp_server_start_duration_seconds";
pub const TOOL_CALLS_TOTAL: &str = "mcpgw_tool_calls_total";
pub const TOOL_CALL_DURATION_SECONDS: &str = "mcpgw_tool_call_duration_seconds";
pub const HEALTH_CHECKS_TOTAL: &str = "mcpgw_health_checks_total";
pub const RATE_LIMIT_HITS_TOTAL: &str = "mcpgw_rate_limit_hits_total";
pub const RATE_LIMIT_BUCKETS: &str = "mcpgw_rate_limit_buckets";
pub const AUTH_DECISIONS_TOTAL: &str = "mcpgw_auth_decisions_total";
pub const WEBSOCKET_CLIENTS: &str = "mcpgw_websocket_clients";
pub const EVENTS_PUBLISHED_TOTAL: &str = "mcpgw_events_published_total";
pub const EVENT_LOG_EVENTS: &str = "mcpgw_event_log_events";
pub const EVENT_LOG_DROPPED_TOTAL: &str = "mcpgw_event_log_dropped_total";
pub const EVENT_LOG_COMPACTIONS_TOTAL: &str = "mcpgw_event_log_compactions_total";
pub const DISCOVERY_SCANS_TOTAL: &str = "mcpgw_discovery_scans_total";
pub const DISCOVERY_CANDIDATES: &str = "mcpgw_discovery_candidates";
/// Gauge: tool calls under way at a server (including their wait for its start), by
/// `mcp_server_id`.
pub const TOOL_CALLS_IN_FLIGHT: &str = "mcpgw_tool_calls_in_flight";
/// Gauge: tool calls routed through a group and not finished yet, by `group_id`.
pub const GROUP_TOOL_CALLS_IN_FLIGHT: &str = "mcpgw_group_tool_calls_in_flight";
/// Histogram: health check (ping) times, by `mcp_server_id` and `result`.
pub use mcpgw_core::census::HEALTH_CHECK_DURATION_SECONDS;
/// Histogram: times of tool probes (a start only to learn a server's tools, the listing and
/// the stop), by `mcp_server_id` and `result` (`success`, `failure`).
pub const TOOL_PROBE_DURATION_SECONDS: &str = "mcpgw_tool_probe_duration_seconds";
/// Counter: requests and log messages upstream servers sent their clients mid-call, by `kind`
/// and `outcome` (see [`mcpgw_core::census::RelayCounts`]).
pub const RELAYS_TOTAL: &str = "mcpgw_relays_total";
/// Gauge: MCP client sessions of the `initialize` era open now, by `protocol_version`.
pub const MCP_CLIENT_SESSIONS: &str = "mcpgw_mcp_client_sessions";
/// Gauge: `subscriptions/listen` streams (2026-07-28 era) open now.
pub const MCP_LISTEN_STREAMS: &str = "mcpgw_mcp_listen_streams";

/// Buckets of tool call durations, in seconds: from a local tool answering in half a
/// millisecond to the default call timeout.
pub const TOOL_CALL_DURATION_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// Buckets of health check (ping) durations, in seconds: from a local process's answer to the
/// health check timeout.
pub const HEALTH_CHECK_DURATION_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Buckets of tool probe durations, in seconds: like server starts, which they mostly are.
pub const TOOL_PROBE_DURATION_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

/// The value of the `tool` label for tool names beyond the cap ([`MAX_TOOL_LABELS_PER_SERVER`]
/// unless [`EventMetrics::with_max_tool_labels`] set another): not a valid MCP tool name, so it
/// never collides with a real tool.
pub const OTHER_TOOL_LABEL: &str = "(other)";

/// How many distinct `tool` label values one server (or group member) gets by default. Past the
/// cap, calls of every further tool are counted and timed together under [`OTHER_TOOL_LABEL`],
/// and a warning names the server once; the tools that got a label keep it until the server's
/// tool list changes (which frees the labels) or the server is removed. A tool list is at most
/// this long in practice; the cap keeps the series count bounded whatever an upstream lists
/// or an embedder calls.
pub const MAX_TOOL_LABELS_PER_SERVER: usize = 1000;

/// Which recorder the `metrics` macros use here and now (the scope's local recorder, else the
/// global one, else the no-op recorder), told apart by its address.
fn current_recorder() -> usize {
    metrics::with_recorder(|recorder| std::ptr::from_ref(recorder).cast::<()>().addr())
}

/// Metric handles kept across calls (`T`), with the recorder that made them. Looking a series
/// up in the recorder's registry costs a dozen allocations, so the hot paths keep their handles;
/// but a handle belongs to the recorder that made it, and the recorder in place can change (a
/// local recorder in a test, an exporter installed after the first events). [`Self::current`]
/// hands out the kept handles only while the recorder that made them is still in place, and
/// starts over from `T::default()` otherwise.
#[derive(Debug, Default)]
pub struct RecorderHandles<T> {
    recorder: usize,
    kept: T,
}

impl<T: Default> RecorderHandles<T> {
    /// The kept handles, emptied first if another recorder than the one that made them is in
    /// place.
    pub fn current(&mut self) -> &mut T {
        let recorder = current_recorder();
        if self.recorder != recorder {
            self.kept = T::default();
            self.recorder = recorder;
        }
        &mut self.kept
    }
}

/// Records the metrics that domain events carry: starts and stops, start durations, tool calls
/// and their durations, authentication and authorization decisions, and every event by type.
/// Register it on the event bus as an observer.
///
/// The label values of servers and tools are kept (shared strings, so that a call does not
/// allocate label strings), and so are the handles of the metrics that every tool call
/// records ([`RecorderHandles`]: the observer may be registered before the exporter is
/// installed). Like the label values, the handles are forgotten with their server and its tool
/// list.
#[derive(Debug)]
pub struct EventMetrics {
    labels: RwLock<HashMap<ServerId, ServerLabels>>,
    handles: Mutex<RecorderHandles<KeptHandles>>,
    max_tool_labels: usize,
    exemplars: &'static ToolCallExemplars,
}

impl Default for EventMetrics {
    fn default() -> Self {
        Self {
            labels: RwLock::default(),
            handles: Mutex::default(),
            max_tool_labels: MAX_TOOL_LABELS_PER_SERVER,
            exemplars: ToolCallExemplars::global(),
        }
    }
}

/// The metric handles [`EventMetrics`] keeps.
#[derive(Debug, Default)]
struct KeptHandles {
    /// By server and tool name; only for tools with a label of their own (not
    /// [`OTHER_TOOL_LABEL`]), so that they are as bounded as the labels.
    tool_calls: HashMap<ServerId, HashMap<String, ToolCallHandles>>,
    /// `mcpgw_events_published_total` by event type.
    events: HashMap<&'static str, Counter>,
}

#[derive(Debug)]
struct ToolCallHandles {
    duration: Histogram,
    /// `mcpgw_tool_calls_total` by status (a handful of words).
    calls: Vec<(&'static str, Counter)>,
    /// The series' label values, for its exemplars.
    server_label: SharedString,
    tool_label: SharedString,
}

#[derive(Debug)]
struct ServerLabels {
    id: SharedString,
    tools: HashMap<String, SharedString>,
    /// Whether the cap was reached (and said so) since the labels were last freed.
    capped: bool,
}

/// The trace of a sampled call, as its event carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallTrace {
    pub trace_id: TraceId,
    pub span_id: SpanId,
}

impl EventMetrics {
    pub fn new() -> Self {
        Self::default()
    }

    /// Caps the distinct `tool` label values of one server at `max` (at least 1) instead of
    /// [`MAX_TOOL_LABELS_PER_SERVER`].
    #[must_use]
    pub fn with_max_tool_labels(mut self, max: usize) -> Self {
        self.max_tool_labels = max.max(1);
        self
    }

    /// Keeps the exemplars of sampled calls in `exemplars` instead of the process-wide
    /// [`ToolCallExemplars::global`] that `/metrics` renders.
    #[must_use]
    pub fn with_exemplars(mut self, exemplars: &'static ToolCallExemplars) -> Self {
        self.exemplars = exemplars;
        self
    }

    /// The label values of a server and, when given, one of its tools.
    fn labels_of(&self, server: &ServerId, tool: Option<&str>) -> (SharedString, SharedString) {
        {
            let labels = self.labels.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(known) = labels.get(server) {
                match tool {
                    None => return (known.id.clone(), SharedString::const_str("")),
                    Some(tool) => {
                        if let Some(value) = known.tools.get(tool) {
                            return (known.id.clone(), value.clone());
                        }
                    }
                }
            }
        }
        let mut labels = self.labels.write().unwrap_or_else(PoisonError::into_inner);
        let known = labels
            .entry(server.clone())
            .or_insert_with(|| ServerLabels {
                id: SharedString::from(Arc::<str>::from(server.as_str())),
                tools: HashMap::new(),
                capped: false,
            });
        let Some(tool) = tool else {
            return (known.id.clone(), SharedString::const_str(""));
        };
        let value = match known.tools.get(tool) {
            Some(value) => value.clone(),
            None if known.tools.len() < self.max_tool_labels => {
                let value = SharedString::from(Arc::<str>::from(tool));
                known.tools.insert(tool.to_owned(), value.clone());
                value
            }
            None => {
                if !known.capped {
                    known.capped = true;
                    tracing::warn!(
                        server = %server,
                        cap = self.max_tool_labels,
                        "an mcp server's calls name more tools than the metrics keep apart; \
                         calls of the further tools are counted under tool=\"(other)\""
                    );
                }
                SharedString::const_str(OTHER_TOOL_LABEL)
            }
        };
        (known.id.clone(), value)
    }

    /// Forgets the label values of a server that is gone, or the tool values of a server whose
    /// tool list changed, so that memory follows the registry.
    fn forget(&self, server: &ServerId, only_tools: bool) {
        {
            let mut labels = self.labels.write().unwrap_or_else(PoisonError::into_inner);
            if only_tools {
                if let Some(known) = labels.get_mut(server) {
                    known.tools.clear();
                    known.capped = false;
                }
            } else {
                labels.remove(server);
            }
        }
        self.exemplars.forget(server.as_str());
        // Handles exist only for tools with labels: without their labels, they go too.
        self.with_kept(|kept| kept.tool_calls.remove(server));
    }

    /// Runs `act` on the kept handles of the recorder in place.
    fn with_kept<R>(&self, act: impl FnOnce(&mut KeptHandles) -> R) -> R {
        let mut handles = self.handles.lock().unwrap_or_else(PoisonError::into_inner);
        act(handles.current())
    }

    fn tool_call(&self, server: &ServerId, tool: &str, status: &'static str, call: CallRecord) {
        let seconds = call.duration_ms / 1000.0;
        self.with_kept(|kept| {
            let kept_tool = kept
                .tool_calls
                .get_mut(server)
                .and_then(|tools| tools.get_mut(tool));
            if let Some(handles) = kept_tool {
                handles.duration.record(seconds);
                if let Some(trace) = call.trace {
                    self.exemplars.record(
                        &handles.server_label,
                        &handles.tool_label,
                        seconds,
                        trace,
                        call.at,
                    );
                }
                match handles.calls.iter().find(|(word, _)| *word == status) {
                    Some((_, calls)) => calls.increment(1),
                    None => {
                        let calls = self.calls_counter(server, tool, status);
                        calls.increment(1);
                        handles.calls.push((status, calls));
                    }
                }
                return;
            }
            // The first call of this tool under this recorder: its handles are made, and kept
            // when the tool has a label of its own.
            let (server_label, tool_label) = self.labels_of(server, Some(tool));
            let duration = metrics::histogram!(
                TOOL_CALL_DURATION_SECONDS,
                "mcp_server_id" => server_label.clone(),
                "tool" => tool_label.clone(),
            );
            duration.record(seconds);
            if let Some(trace) = call.trace {
                self.exemplars
                    .record(&server_label, &tool_label, seconds, trace, call.at);
            }
            let calls = self.calls_counter(server, tool, status);
            calls.increment(1);
            if &*tool_label != OTHER_TOOL_LABEL {
                kept.tool_calls.entry(server.clone()).or_default().insert(
                    tool.to_owned(),
                    ToolCallHandles {
                        duration,
                        calls: vec![(status, calls)],
                        server_label,
                        tool_label,
                    },
                );
            }
        });
    }

    /// The `mcpgw_tool_calls_total` series of a tool and a status.
    fn calls_counter(&self, server: &ServerId, tool: &str, status: &'static str) -> Counter {
        let (server_label, tool_label) = self.labels_of(server, Some(tool));
        metrics::counter!(
            TOOL_CALLS_TOTAL,
            "mcp_server_id" => server_label,
            "tool" => tool_label,
            "status" => status,
        )
    }

    fn event_published(&self, event_type: &'static str) {
        self.with_kept(|kept| {
            kept.events
                .entry(event_type)
                .or_insert_with(
                    || metrics::counter!(EVENTS_PUBLISHED_TOTAL, "event_type" => event_type),
                )
                .increment(1);
        });
    }

    fn stopped(&self, server: &ServerId, reason: &'static str) {
        metrics::counter!(
            MCP_SERVER_STOPS_TOTAL,
            "mcp_server_id" => self.server_id(server),
            "reason" => reason,
        )
        .increment(1);
    }

    fn server_id(&self, server: &ServerId) -> SharedString {
        self.labels_of(server, None).0
    }
}

impl EventObserver for EventMetrics {
    fn observe(&self, published: &PublishedEvent) {
        let event = &published.event;
        self.event_published(event.event_type());
        match event {
            DomainEvent::ToolInvocationCompleted {
                mcp_server_id,
                tool,
                duration_ms,
                is_error,
                trace_id,
                span_id,
                ..
            } => {
                let status = if *is_error { "tool_error" } else { "success" };
                let call = CallRecord::of(*duration_ms, *trace_id, *span_id, published);
                self.tool_call(mcp_server_id, tool, status, call);
            }
            DomainEvent::ToolInvocationFailed {
                mcp_server_id,
                tool,
                duration_ms,
                error_kind,
                trace_id,
                span_id,
                ..
            } => {
                let call = CallRecord::of(*duration_ms, *trace_id, *span_id, published);
                self.tool_call(mcp_server_id, tool, error_kind, call);
            }
            DomainEvent::McpServerStarted {
                mcp_server_id,
                duration_ms,
                ..
            } => {
                let server = self.server_id(mcp_server_id);
                metrics::counter!(
                    MCP_SERVER_STARTS_TOTAL,
                    "mcp_server_id" => server.clone(),
                    "result" => "success",
                )
                .increment(1);
                // Precision beyond 2^53 ms is not a concern for a start duration.
                #[allow(clippy::cast_precision_loss)]
                let seconds = *duration_ms as f64 / 1000.0;
                metrics::histogram!(MCP_SERVER_START_DURATION_SECONDS, "mcp_server_id" => server)
                    .record(seconds);
            }
            DomainEvent::McpServerStartFailed { mcp_server_id, .. } => {
                metrics::counter!(
                    MCP_SERVER_STARTS_TOTAL,
                    "mcp_server_id" => self.server_id(mcp_server_id),
                    "result" => "failure",
                )
                .increment(1);
            }
            DomainEvent::McpServerStopped {
                mcp_server_id,
                reason,
            } => self.stopped(mcp_server_id, reason),
            DomainEvent::McpServerCrashed { mcp_server_id, .. } => {
                self.stopped(mcp_server_id, "crashed");
            }
            DomainEvent::McpServerToolsChanged { mcp_server_id, .. } => {
                self.forget(mcp_server_id, true);
            }
            DomainEvent::McpServerRemoved { mcp_server_id } => self.forget(mcp_server_id, false),
            DomainEvent::AuthenticationSucceeded { .. } => {
                auth_decision("authentication", "allowed")
            }
            DomainEvent::AuthenticationFailed { .. } => auth_decision("authentication", "denied"),
            DomainEvent::AuthorizationGranted { .. } => auth_decision("authorization", "allowed"),
            DomainEvent::AuthorizationDenied { .. } => auth_decision("authorization", "denied"),
            // Source ids are the operator's (the file, or admins over the API): a bounded set.
            DomainEvent::DiscoveryScanCompleted { source_id, .. } => {
                discovery_scan(source_id, "success");
            }
            DomainEvent::DiscoveryScanFailed { source_id, .. } => {
                discovery_scan(source_id, "failure");
            }
            _ => {}
        }
    }
}

/// What the metrics take from a finished call's event.
#[derive(Debug, Clone, Copy)]
struct CallRecord {
    duration_ms: f64,
    trace: Option<CallTrace>,
    at: Timestamp,
}

impl CallRecord {
    fn of(
        duration_ms: f64,
        trace_id: Option<TraceId>,
        span_id: Option<SpanId>,
        published: &PublishedEvent,
    ) -> Self {
        Self {
            duration_ms,
            trace: trace_id
                .zip(span_id)
                .map(|(trace_id, span_id)| CallTrace { trace_id, span_id }),
            at: published.occurred_at,
        }
    }
}

/// Records the time a tool probe of `server` took (see [`TOOL_PROBE_DURATION_SECONDS`]):
/// `learned` when it ended with the server's tools.
pub fn tool_probe_timed(server: &ServerId, learned: bool, took: Duration) {
    metrics::histogram!(
        TOOL_PROBE_DURATION_SECONDS,
        "mcp_server_id" => server.as_str().to_owned(),
        "result" => if learned { "success" } else { "failure" },
    )
    .record(took.as_secs_f64());
}

/// One exemplar: a sampled call's trace, its duration in seconds and when it ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Exemplar {
    pub trace: CallTrace,
    pub value: f64,
    pub at: Timestamp,
}

/// The exemplars of one `mcpgw_tool_call_duration_seconds` series: the last sampled call of
/// each bucket (the buckets of [`TOOL_CALL_DURATION_BUCKETS`], then `+Inf`).
pub type SeriesExemplars = [Option<Exemplar>; TOOL_CALL_DURATION_BUCKETS.len() + 1];

/// The exemplars of the tool call latency histogram, by server label and tool label: only
/// sampled calls write here (a lock and a copy of a few dozen bytes; the first exemplar of a
/// series allocates its slots), so calls that are not traced pay nothing. Bounded like the
/// labels: one set of slots per series, forgotten with the server's labels.
#[derive(Debug, Default)]
pub struct ToolCallExemplars {
    series: Mutex<HashMap<String, HashMap<String, Box<SeriesExemplars>>>>,
}

/// The index in [`SeriesExemplars`] of the bucket a duration falls into: the first whose upper
/// bound is at least the duration, else `+Inf`.
pub fn tool_call_bucket(seconds: f64) -> usize {
    TOOL_CALL_DURATION_BUCKETS
        .iter()
        .position(|bound| seconds <= *bound)
        .unwrap_or(TOOL_CALL_DURATION_BUCKETS.len())
}

impl ToolCallExemplars {
    pub fn new() -> Self {
        Self::default()
    }

    /// The exemplars of the whole process: what the event observer writes by default, and
    /// what `/metrics` renders.
    pub fn global() -> &'static ToolCallExemplars {
        static GLOBAL: LazyLock<ToolCallExemplars> = LazyLock::new(ToolCallExemplars::new);
        &GLOBAL
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, HashMap<String, Box<SeriesExemplars>>>> {
        self.series.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps a sampled call as the exemplar of its bucket in the series `server`, `tool`
    /// (label values).
    pub fn record(&self, server: &str, tool: &str, seconds: f64, trace: CallTrace, at: Timestamp) {
        let exemplar = Exemplar {
            trace,
            value: seconds,
            at,
        };
        let mut series = self.lock();
        let tools = match series.get_mut(server) {
            Some(tools) => tools,
            None => series.entry(server.to_owned()).or_default(),
        };
        let slots = match tools.get_mut(tool) {
            Some(slots) => slots,
            None => tools
                .entry(tool.to_owned())
                .or_insert_with(|| Box::new([None; TOOL_CALL_DURATION_BUCKETS.len() + 1])),
        };
        slots[tool_call_bucket(seconds)] = Some(exemplar);
    }

    /// Every series' exemplars now, by server label and tool label.
    pub fn snapshot(&self) -> HashMap<String, HashMap<String, Box<SeriesExemplars>>> {
        self.lock().clone()
    }

    /// Forgets the exemplars of a server's series (its labels were freed).
    pub fn forget(&self, server: &str) {
        self.lock().remove(server);
    }
}

fn discovery_scan(source_id: &str, result: &'static str) {
    metrics::counter!(
        DISCOVERY_SCANS_TOTAL,
        "source_id" => source_id.to_owned(),
        "result" => result,
    )
    .increment(1);
}

fn auth_decision(stage: &'static str, outcome: &'static str) {
    metrics::counter!(AUTH_DECISIONS_TOTAL, "stage" => stage, "outcome" => outcome).increment(1);
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, Ordering};

    use mcpgw_core::Timestamp;
    use metrics::{Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, Unit};

    use super::*;

    /// A metric's name and its labels, sorted by label name.
    type Series = (String, BTreeMap<String, String>);

    #[derive(Default)]
    struct Samples(Mutex<Vec<f64>>);

    impl HistogramFn for Samples {
        fn record(&self, value: f64) {
            self.0.lock().unwrap().push(value);
        }
    }

    /// Keeps every counter and histogram series in memory, to read back what was recorded.
    #[derive(Default)]
    struct MemoryRecorder {
        counters: Mutex<HashMap<Series, Arc<AtomicU64>>>,
        histograms: Mutex<HashMap<Series, Arc<Samples>>>,
    }

    fn series_of(key: &Key) -> Series {
        (
            key.name().to_owned(),
            key.labels()
                .map(|label| (label.key().to_owned(), label.value().to_owned()))
                .collect(),
        )
    }

    fn series(name: &str, labels: &[(&str, &str)]) -> Series {
        (
            name.to_owned(),
            labels
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect(),
        )
    }

    impl MemoryRecorder {
        fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
            self.counters
                .lock()
                .unwrap()
                .get(&series(name, labels))
                .map_or(0, |value| value.load(Ordering::Relaxed))
        }

        fn samples(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
            self.histograms
                .lock()
                .unwrap()
                .get(&series(name, labels))
                .map(|samples| samples.0.lock().unwrap().clone())
                .unwrap_or_default()
        }

        fn label_values(&self, name: &str, label: &str) -> Vec<String> {
            let mut values: Vec<String> = self
                .counters
                .lock()
                .unwrap()
                .keys()
                .filter(|(series, _)| series == name)
                .filter_map(|(_, labels)| labels.get(label).cloned())
                .collect();
            values.sort();
            values.dedup();
            values
        }
    }

    impl Recorder for MemoryRecorder {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            let mut counters = self.counters.lock().unwrap();
            Counter::from_arc(counters.entry(series_of(key)).or_default().clone())
        }

        fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::noop()
        }

        fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
            let mut histograms = self.histograms.lock().unwrap();
            Histogram::from_arc(histograms.entry(series_of(key)).or_default().clone())
        }
    }

    fn id(raw: &str) -> ServerId {
        ServerId::parse(raw).unwrap()
    }

    fn observe_all(recorder: &MemoryRecorder, observer: &EventMetrics, events: Vec<DomainEvent>) {
        metrics::with_local_recorder(recorder, || {
            for (event_id, event) in (1..).zip(events) {
                observer.observe(&PublishedEvent {
                    event_id,
                    occurred_at: Timestamp::from_unix_micros(0),
                    event,
                });
            }
        });
    }

    fn completed(server: &str, tool: &str, duration_ms: f64, is_error: bool) -> DomainEvent {
        DomainEvent::ToolInvocationCompleted {
            mcp_server_id: id(server),
            tool: tool.to_owned(),
            duration_ms,
            is_error,
            principal: Some("user:alice".to_owned()),
            trace_id: None,
            span_id: None,
        }
    }

    fn failed(server: &str, tool: &str, error_kind: &'static str) -> DomainEvent {
        DomainEvent::ToolInvocationFailed {
            mcp_server_id: id(server),
            tool: tool.to_owned(),
            duration_ms: 30_000.0,
            error_kind,
            error: "the tool did not answer within 30 s".to_owned(),
            principal: None,
            trace_id: None,
            span_id: None,
        }
    }

    #[test]
    fn tool_calls_are_counted_by_status_and_timed_in_seconds() {
        let recorder = MemoryRecorder::default();
        observe_all(
            &recorder,
            &EventMetrics::new(),
            vec![
                completed("math", "add", 2.0, false),
                completed("math", "add", 4.0, false),
                completed("math", "add", 8.0, true),
                failed("math", "add", "timeout"),
                completed("math", "mul", 1.0, false),
            ],
        );
        let add = |status| {
            recorder.counter(
                TOOL_CALLS_TOTAL,
                &[
                    ("mcp_server_id", "math"),
                    ("tool", "add"),
                    ("status", status),
                ],
            )
        };
        assert_eq!(add("success"), 2);
        assert_eq!(add("tool_error"), 1);
        assert_eq!(add("timeout"), 1);
        assert_eq!(
            recorder.samples(
                TOOL_CALL_DURATION_SECONDS,
                &[("mcp_server_id", "math"), ("tool", "add")]
            ),
            vec![0.002, 0.004, 0.008, 30.0]
        );
        assert_eq!(
            recorder.counter(
                TOOL_CALLS_TOTAL,
                &[
                    ("mcp_server_id", "math"),
                    ("tool", "mul"),
                    ("status", "success")
                ]
            ),
            1
        );
        assert_eq!(
            recorder.counter(
                EVENTS_PUBLISHED_TOTAL,
                &[("event_type", "ToolInvocationCompleted")]
            ),
            4
        );
        assert_eq!(
            recorder.counter(
                EVENTS_PUBLISHED_TOTAL,
                &[("event_type", "ToolInvocationFailed")]
            ),
            1
        );
    }

    #[test]
    fn starts_stops_and_crashes_are_counted_per_server() {
        let recorder = MemoryRecorder::default();
        observe_all(
            &recorder,
            &EventMetrics::new(),
            vec![
                DomainEvent::McpServerStarted {
                    mcp_server_id: id("math"),
                    duration_ms: 1500,
                    tool_count: 2,
                },
                DomainEvent::McpServerStartFailed {
                    mcp_server_id: id("math"),
                    error: "exited during the handshake".to_owned(),
                    consecutive_failures: 1,
                },
                DomainEvent::McpServerStopped {
                    mcp_server_id: id("math"),
                    reason: "idle",
                },
                DomainEvent::McpServerCrashed {
                    mcp_server_id: id("math"),
                    exit: "signal 9".to_owned(),
                    consecutive_failures: 1,
                },
            ],
        );
        let math = |key, value| [("mcp_server_id", "math"), (key, value)];
        assert_eq!(
            recorder.counter(MCP_SERVER_STARTS_TOTAL, &math("result", "success")),
            1
        );
        assert_eq!(
            recorder.counter(MCP_SERVER_STARTS_TOTAL, &math("result", "failure")),
            1
        );
        assert_eq!(
            recorder.counter(MCP_SERVER_STOPS_TOTAL, &math("reason", "idle")),
            1
        );
        assert_eq!(
            recorder.counter(MCP_SERVER_STOPS_TOTAL, &math("reason", "crashed")),
            1
        );
        assert_eq!(
            recorder.samples(
                MCP_SERVER_START_DURATION_SECONDS,
                &[("mcp_server_id", "math")]
            ),
            vec![1.5]
        );
    }

    #[test]
    fn auth_decisions_are_counted_by_stage_and_outcome() {
        let recorder = MemoryRecorder::default();
        observe_all(
            &recorder,
            &EventMetrics::new(),
            vec![
                DomainEvent::AuthenticationSucceeded {
                    principal: "user:alice".to_owned(),
                    credential: "api_key",
                    client: None,
                },
                DomainEvent::AuthenticationFailed {
                    credential: "api_key",
                    reason: "unknown key".to_owned(),
                    client: Some("10.0.0.1".to_owned()),
                },
                DomainEvent::AuthenticationFailed {
                    credential: "bearer",
                    reason: "expired".to_owned(),
                    client: None,
                },
                DomainEvent::AuthorizationGranted {
                    principal: "user:alice".to_owned(),
                    permission: "mcp_servers:read".to_owned(),
                    granted_by_role: "viewer".to_owned(),
                },
                DomainEvent::AuthorizationDenied {
                    principal: "user:bob".to_owned(),
                    permission: "mcp_servers:write".to_owned(),
                    reason: "no role grants it".to_owned(),
                },
            ],
        );
        let decisions = |stage, outcome| {
            recorder.counter(
                AUTH_DECISIONS_TOTAL,
                &[("stage", stage), ("outcome", outcome)],
            )
        };
        assert_eq!(decisions("authentication", "allowed"), 1);
        assert_eq!(decisions("authentication", "denied"), 2);
        assert_eq!(decisions("authorization", "allowed"), 1);
        assert_eq!(decisions("authorization", "denied"), 1);
    }

    #[test]
    fn a_server_never_gets_more_tool_labels_than_the_bound() {
        let recorder = MemoryRecorder::default();
        let observer = EventMetrics::new();
        let events = (0..=MAX_TOOL_LABELS_PER_SERVER)
            .map(|n| completed("math", &format!("tool_{n}"), 1.0, false))
            .collect();
        observe_all(&recorder, &observer, events);
        let tools = recorder.label_values(TOOL_CALLS_TOTAL, "tool");
        assert_eq!(tools.len(), MAX_TOOL_LABELS_PER_SERVER + 1);
        assert!(tools.contains(&OTHER_TOOL_LABEL.to_owned()));
        assert!(!tools.contains(&format!("tool_{MAX_TOOL_LABELS_PER_SERVER}")));
        // Handles are kept as far as labels go, and no further.
        let kept = |observer: &EventMetrics| {
            let handles = observer.handles.lock().unwrap();
            handles
                .kept
                .tool_calls
                .get(&id("math"))
                .map_or(0, HashMap::len)
        };
        assert_eq!(kept(&observer), MAX_TOOL_LABELS_PER_SERVER);

        // A changed tool list frees the labels, so new tools are named again.
        observe_all(
            &recorder,
            &observer,
            vec![
                DomainEvent::McpServerToolsChanged {
                    mcp_server_id: id("math"),
                    tool_count: 1,
                },
                completed("math", "renamed", 1.0, false),
            ],
        );
        assert_eq!(
            kept(&observer),
            1,
            "the old tools' handles went with their labels"
        );
        assert_eq!(
            recorder.counter(
                TOOL_CALLS_TOTAL,
                &[
                    ("mcp_server_id", "math"),
                    ("tool", "renamed"),
                    ("status", "success")
                ]
            ),
            1
        );
    }

    #[test]
    fn events_reach_the_recorder_installed_when_they_happen() {
        let observer = EventMetrics::new();
        let early = MemoryRecorder::default();
        observe_all(
            &early,
            &observer,
            vec![completed("math", "add", 1.0, false)],
        );
        let late = MemoryRecorder::default();
        observe_all(&late, &observer, vec![completed("math", "add", 1.0, false)]);
        let add = [
            ("mcp_server_id", "math"),
            ("tool", "add"),
            ("status", "success"),
        ];
        assert_eq!(early.counter(TOOL_CALLS_TOTAL, &add), 1);
        assert_eq!(late.counter(TOOL_CALLS_TOTAL, &add), 1);
    }

    fn traced(event: DomainEvent, trace: u8, span: u8) -> DomainEvent {
        match event {
            DomainEvent::ToolInvocationCompleted {
                mcp_server_id,
                tool,
                duration_ms,
                is_error,
                principal,
                ..
            } => DomainEvent::ToolInvocationCompleted {
                mcp_server_id,
                tool,
                duration_ms,
                is_error,
                principal,
                trace_id: Some(TraceId([trace; 16])),
                span_id: Some(SpanId([span; 8])),
            },
            DomainEvent::ToolInvocationFailed {
                mcp_server_id,
                tool,
                duration_ms,
                error_kind,
                error,
                principal,
                ..
            } => DomainEvent::ToolInvocationFailed {
                mcp_server_id,
                tool,
                duration_ms,
                error_kind,
                error,
                principal,
                trace_id: Some(TraceId([trace; 16])),
                span_id: Some(SpanId([span; 8])),
            },
            other => other,
        }
    }

    #[test]
    fn sampled_calls_leave_the_last_exemplar_of_each_bucket() {
        let exemplars: &'static ToolCallExemplars = Box::leak(Box::default());
        let observer = EventMetrics::new().with_exemplars(exemplars);
        let recorder = MemoryRecorder::default();
        observe_all(
            &recorder,
            &observer,
            vec![
                // 2 ms and 2.2 ms share the bucket up to 2.5 ms: the later one stays.
                traced(completed("math", "add", 2.0, false), 1, 1),
                traced(completed("math", "add", 2.2, false), 2, 2),
                // A call that was not traced leaves none, even in a bucket of its own.
                completed("math", "add", 40.0, false),
                traced(failed("math", "add", "timeout"), 3, 3),
                traced(completed("math", "mul", 0.1, true), 4, 4),
            ],
        );
        let snapshot = exemplars.snapshot();
        let add = &snapshot["math"]["add"];
        let kept: Vec<(usize, String, f64)> = add
            .iter()
            .enumerate()
            .filter_map(|(bucket, slot)| {
                slot.map(|exemplar| (bucket, exemplar.trace.trace_id.to_string(), exemplar.value))
            })
            .collect();
        assert_eq!(
            kept,
            [
                (tool_call_bucket(0.0022), "02".repeat(16), 0.0022),
                (tool_call_bucket(30.0), "03".repeat(16), 30.0),
            ]
        );
        assert_eq!(tool_call_bucket(0.0022), 2, "the bucket up to 2.5 ms");
        assert_eq!(
            tool_call_bucket(30.0),
            14,
            "30 s is within the bucket up to 30 s"
        );
        assert_eq!(tool_call_bucket(61.0), TOOL_CALL_DURATION_BUCKETS.len());
        let mul = snapshot["math"]["mul"][0].expect("0.1 ms is in the first bucket");
        assert_eq!(mul.trace.span_id.to_string(), "04".repeat(8));
        assert_eq!(mul.at, Timestamp::from_unix_micros(0));

        // The labels' end is the exemplars' end.
        observe_all(
            &recorder,
            &observer,
            vec![DomainEvent::McpServerRemoved {
                mcp_server_id: id("math"),
            }],
        );
        assert!(exemplars.snapshot().is_empty());
    }

    #[test]
    fn the_tool_label_cap_can_be_set() {
        // Bad input tried: a cap of 0, which would leave no tool a label; it counts as 1.
        let recorder = MemoryRecorder::default();
        let observer = EventMetrics::new().with_max_tool_labels(0);
        observe_all(
            &recorder,
            &observer,
            vec![
                completed("math", "add", 1.0, false),
                completed("math", "mul", 1.0, false),
                completed("math", "div", 1.0, false),
            ],
        );
        assert_eq!(
            recorder.label_values(TOOL_CALLS_TOTAL, "tool"),
            ["(other)", "add"]
        );
        assert_eq!(
            recorder.counter(
                TOOL_CALLS_TOTAL,
                &[
                    ("mcp_server_id", "math"),
                    ("tool", OTHER_TOOL_LABEL),
                    ("status", "success")
                ]
            ),
            2
        );
    }
}
