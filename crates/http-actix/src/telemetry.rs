//! Prometheus metrics: the process-wide recorder, the request metrics middleware and `/metrics`
//! (Prometheus text, or OpenMetrics with exemplars for scrapers that ask for it: see
//! [`openmetrics`]).
//!
//! Labels only ever carry bounded values: the route *template* (`/api/mcp_servers/{id}`, never
//! the raw path), a known method name or `other`, the status code, a server state. A label that
//! copied caller input would let any caller grow the metrics without bound.

mod openmetrics;

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::future::{Ready, ready};
use std::rc::Rc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use actix_web::dev::{Service, ServiceRequest, ServiceResponse, Transform, forward_ready};
use actix_web::http::Method;
use actix_web::web;
use actix_web::{HttpRequest, HttpResponse};
use futures::future::LocalBoxFuture;
use mcpgw_core::ServerState;
use mcpgw_core::census::{ClientSessions, RelayCounts};
use mcpgw_gateway::metrics::{
    AUTH_DECISIONS_TOTAL, DISCOVERY_CANDIDATES, DISCOVERY_SCANS_TOTAL, EVENT_LOG_COMPACTIONS_TOTAL,
    EVENT_LOG_DROPPED_TOTAL, EVENT_LOG_EVENTS, EVENTS_PUBLISHED_TOTAL, GROUP_TOOL_CALLS_IN_FLIGHT,
    HEALTH_CHECK_DURATION_BUCKETS, HEALTH_CHECK_DURATION_SECONDS, HEALTH_CHECKS_TOTAL,
    MCP_CLIENT_SESSIONS, MCP_LISTEN_STREAMS, MCP_SERVER_START_DURATION_SECONDS,
    MCP_SERVER_STARTS_TOTAL, MCP_SERVER_STATE, MCP_SERVER_STOPS_TOTAL, MCP_SERVER_UP,
    RATE_LIMIT_BUCKETS, RATE_LIMIT_HITS_TOTAL, RELAYS_TOTAL, RecorderHandles,
    TOOL_CALL_DURATION_BUCKETS, TOOL_CALL_DURATION_SECONDS, TOOL_CALLS_IN_FLIGHT, TOOL_CALLS_TOTAL,
    TOOL_PROBE_DURATION_BUCKETS, TOOL_PROBE_DURATION_SECONDS, ToolCallExemplars, WEBSOCKET_CLIENTS,
};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};

use crate::state::ApiState;

pub const HTTP_REQUESTS_TOTAL: &str = "mcpgw_http_requests_total";
pub const HTTP_REQUEST_DURATION_SECONDS: &str = "mcpgw_http_request_duration_seconds";
pub const BUILD_INFO: &str = "mcpgw_build_info";
pub const MCP_SERVERS: &str = "mcpgw_mcp_servers";
pub const UPTIME_SECONDS: &str = "mcpgw_uptime_seconds";

/// The route label of a request that matched no route.
pub const UNMATCHED_ROUTE: &str = "unmatched";

/// Buckets of request durations, in seconds: from a cached lookup to a slow upstream start.
const REQUEST_DURATION_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Buckets of server start durations (launch plus MCP handshake), in seconds: from a local
/// process to a container image that is pulled first.
const START_DURATION_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

/// The handle of the recorder this crate installed, so a second install (another test, an
/// embedder that mounts the API twice) shares it instead of failing.
static INSTALLED: Mutex<Option<PrometheusHandle>> = Mutex::new(None);

/// Installs the process-wide Prometheus recorder, with explicit histogram buckets so that
/// histograms render as histograms (not summaries). Calling it again returns the same handle.
///
/// Fails when another recorder was installed first.
pub fn install_metrics_recorder() -> Result<PrometheusHandle, BuildError> {
    let mut installed = INSTALLED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(handle) = installed.as_ref() {
        return Ok(handle.clone());
    }
    let handle = PrometheusBuilder::new()
        .set_buckets(REQUEST_DURATION_BUCKETS)?
        .set_buckets_for_metric(
            Matcher::Full(HTTP_REQUEST_DURATION_SECONDS.to_owned()),
            REQUEST_DURATION_BUCKETS,
        )?
        .set_buckets_for_metric(
            Matcher::Full(TOOL_CALL_DURATION_SECONDS.to_owned()),
            TOOL_CALL_DURATION_BUCKETS,
        )?
        .set_buckets_for_metric(
            Matcher::Full(MCP_SERVER_START_DURATION_SECONDS.to_owned()),
            START_DURATION_BUCKETS,
        )?
        .set_buckets_for_metric(
            Matcher::Full(HEALTH_CHECK_DURATION_SECONDS.to_owned()),
            HEALTH_CHECK_DURATION_BUCKETS,
        )?
        .set_buckets_for_metric(
            Matcher::Full(TOOL_PROBE_DURATION_SECONDS.to_owned()),
            TOOL_PROBE_DURATION_BUCKETS,
        )?
        .install_recorder()?;
    describe_metrics();
    *installed = Some(handle.clone());
    Ok(handle)
}

fn describe_metrics() {
    metrics::describe_counter!(
        HTTP_REQUESTS_TOTAL,
        "HTTP requests answered, by route template"
    );
    metrics::describe_histogram!(
        HTTP_REQUEST_DURATION_SECONDS,
        metrics::Unit::Seconds,
        "Time to answer HTTP requests, by route template"
    );
    metrics::describe_gauge!(
        BUILD_INFO,
        "Always 1; the version label says which build runs"
    );
    metrics::describe_gauge!(MCP_SERVERS, "Registered MCP servers, by state");
    metrics::describe_gauge!(UPTIME_SECONDS, "Seconds since the gateway started");
    metrics::describe_gauge!(
        MCP_SERVER_UP,
        "1 when the MCP server is ready to take calls, else 0"
    );
    metrics::describe_gauge!(
        MCP_SERVER_STATE,
        "1 for the state the MCP server is in, 0 for every other state"
    );
    metrics::describe_counter!(
        MCP_SERVER_STARTS_TOTAL,
        "Starts of MCP servers (launch and handshake), by result"
    );
    metrics::describe_counter!(
        MCP_SERVER_STOPS_TOTAL,
        "Stops of MCP servers, by reason (crashed for an unexpected exit)"
    );
    metrics::describe_histogram!(
        MCP_SERVER_START_DURATION_SECONDS,
        metrics::Unit::Seconds,
        "Time from launching an MCP server to the end of its handshake (cold-start time)"
    );
    metrics::describe_counter!(
        TOOL_CALLS_TOTAL,
        "Finished tool calls, by server, tool and status"
    );
    metrics::describe_histogram!(
        TOOL_CALL_DURATION_SECONDS,
        metrics::Unit::Seconds,
        "Time of tool calls from the gateway to the upstream and back, by server and tool"
    );
    metrics::describe_counter!(
        HEALTH_CHECKS_TOTAL,
        "Health checks (pings) of running MCP servers, by result"
    );
    metrics::describe_counter!(
        RATE_LIMIT_HITS_TOTAL,
        "Requests and tool calls refused by the rate limiter, by scope"
    );
    metrics::describe_gauge!(
        RATE_LIMIT_BUCKETS,
        "Token buckets the rate limiter holds (one per active caller and scope)"
    );
    metrics::describe_counter!(
        AUTH_DECISIONS_TOTAL,
        "Authentication and authorization decisions, by stage and outcome"
    );
    metrics::describe_gauge!(
        WEBSOCKET_CLIENTS,
        "Clients connected to the WebSocket event stream"
    );
    metrics::describe_counter!(
        EVENTS_PUBLISHED_TOTAL,
        "Domain events published on the event bus, by type"
    );
    metrics::describe_gauge!(EVENT_LOG_EVENTS, "Events stored in the event log");
    metrics::describe_counter!(
        EVENT_LOG_DROPPED_TOTAL,
        "Events the event log could not store"
    );
    metrics::describe_counter!(
        EVENT_LOG_COMPACTIONS_TOTAL,
        "Compactions of the event log (retention applied)"
    );
    metrics::describe_counter!(
        DISCOVERY_SCANS_TOTAL,
        "Scans of discovery sources, by source and result (success, failure)"
    );
    metrics::describe_gauge!(
        TOOL_CALLS_IN_FLIGHT,
        "Tool calls under way at the MCP server, including their wait for its start"
    );
    metrics::describe_gauge!(
        GROUP_TOOL_CALLS_IN_FLIGHT,
        "Tool calls routed through the group and not finished yet"
    );
    metrics::describe_histogram!(
        HEALTH_CHECK_DURATION_SECONDS,
        metrics::Unit::Seconds,
        "Time of health checks (pings) of running MCP servers, by result"
    );
    metrics::describe_histogram!(
        TOOL_PROBE_DURATION_SECONDS,
        metrics::Unit::Seconds,
        "Time of tool probes (start, list, stop) of MCP servers whose tools were unknown, by result"
    );
    metrics::describe_counter!(
        RELAYS_TOTAL,
        "Requests and log messages MCP servers sent their clients mid-call, by kind and outcome"
    );
    metrics::describe_gauge!(
        MCP_CLIENT_SESSIONS,
        "MCP client sessions of the initialize era open now, by negotiated protocol version"
    );
    metrics::describe_gauge!(
        MCP_LISTEN_STREAMS,
        "subscriptions/listen streams of 2026-07-28 clients open now"
    );
    metrics::describe_gauge!(
        DISCOVERY_CANDIDATES,
        "Discovered MCP servers waiting for approval (pending) or failing validation \
         (quarantined)"
    );
}

/// Drains histogram samples into the exported distributions every `period`, so memory stays
/// bounded between scrapes. Spawn it once on the runtime that serves HTTP; it never returns.
pub async fn run_metrics_upkeep(handle: PrometheusHandle, period: Duration) {
    let mut ticker = actix_web::rt::time::interval(period);
    loop {
        ticker.tick().await;
        handle.run_upkeep();
    }
}

/// Counts and times every request by method, route template and status. Wrap the whole `App`
/// with it (not one scope), so that unmatched routes are counted too.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestMetrics;

impl<S, B> Transform<S, ServiceRequest> for RequestMetrics
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error>,
    S::Future: 'static,
    B: 'static,
{
    type Response = ServiceResponse<B>;
    type Error = actix_web::Error;
    type Transform = RequestMetricsMiddleware<S>;
    type InitError = ();
    type Future = Ready<Result<Self::Transform, Self::InitError>>;

    fn new_transform(&self, service: S) -> Self::Future {
        ready(Ok(RequestMetricsMiddleware {
            service,
            handles: Rc::default(),
        }))
    }
}

#[derive(Debug)]
pub struct RequestMetricsMiddleware<S> {
    service: S,
    /// This worker's handles of the request metrics (one middleware per HTTP worker thread).
    handles: Rc<RefCell<RecorderHandles<RouteHandles>>>,
}

/// Handles of the request metrics by route. Routes, methods and statuses are bounded sets
/// (route templates, not paths), and so is this.
#[derive(Debug, Default)]
struct RouteHandles {
    routes: HashMap<String, RouteSeries>,
}

#[derive(Debug, Default)]
struct RouteSeries {
    requests: Vec<(&'static str, u16, metrics::Counter)>,
    durations: Vec<(&'static str, metrics::Histogram)>,
}

impl RouteHandles {
    fn record(&mut self, method: &'static str, route: String, status: u16, seconds: f64) {
        let series = match self.routes.get_mut(route.as_str()) {
            Some(series) => series,
            None => self.routes.entry(route.clone()).or_default(),
        };
        match series
            .requests
            .iter()
            .find(|(kept_method, kept_status, _)| *kept_method == method && *kept_status == status)
        {
            Some((_, _, requests)) => requests.increment(1),
            None => {
                let requests = metrics::counter!(
                    HTTP_REQUESTS_TOTAL,
                    "method" => method,
                    "route" => route.clone(),
                    "status" => status.to_string(),
                );
                requests.increment(1);
                series.requests.push((method, status, requests));
            }
        }
        match series
            .durations
            .iter()
            .find(|(kept_method, _)| *kept_method == method)
        {
            Some((_, durations)) => durations.record(seconds),
            None => {
                let durations = metrics::histogram!(
                    HTTP_REQUEST_DURATION_SECONDS,
                    "method" => method,
                    "route" => route,
                );
                durations.record(seconds);
                series.durations.push((method, durations));
            }
        }
    }
}

impl<S, B> Service<ServiceRequest> for RequestMetricsMiddleware<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error>,
    S::Future: 'static,
    B: 'static,
{
    type Response = ServiceResponse<B>;
    type Error = actix_web::Error;
    type Future = LocalBoxFuture<'static, Result<Self::Response, Self::Error>>;

    forward_ready!(service);

    fn call(&self, request: ServiceRequest) -> Self::Future {
        let method = method_label(request.method());
        let started = Instant::now();
        let response = self.service.call(request);
        let handles = Rc::clone(&self.handles);
        Box::pin(async move {
            let result = response.await;
            let (status, route) = match &result {
                Ok(response) => (response.status().as_u16(), route_label(response.request())),
                Err(error) => (
                    error.as_response_error().status_code().as_u16(),
                    UNMATCHED_ROUTE.to_owned(),
                ),
            };
            handles.borrow_mut().current().record(
                method,
                route,
                status,
                started.elapsed().as_secs_f64(),
            );
            result
        })
    }
}

/// Methods are caller input too: anything beyond the standard ones is `other`.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// The matched route's template, with a collection's trailing-slash alias counted as the
/// collection itself.
fn route_label(request: &actix_web::HttpRequest) -> String {
    match request.match_pattern() {
        Some(pattern) if pattern.len() > 1 && pattern.ends_with('/') => {
            pattern.trim_end_matches('/').to_owned()
        }
        Some(pattern) => pattern,
        None => UNMATCHED_ROUTE.to_owned(),
    }
}

/// Prometheus metrics in the text exposition format; in the OpenMetrics text format, with
/// exemplars of traced tool calls, when the `Accept` header prefers
/// `application/openmetrics-text`.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "observability",
    operation_id = "prometheus_metrics",
    responses((status = 200,
               description = "Prometheus text exposition format, or OpenMetrics when asked for",
               content(
                   (String = "text/plain; version=0.0.4"),
                   (String = "application/openmetrics-text; version=1.0.0"),
               )))
)]
pub(crate) async fn metrics_text(request: HttpRequest, state: web::Data<ApiState>) -> HttpResponse {
    let gateway = state.gateway();
    metrics::gauge!(BUILD_INFO, "version" => gateway.info().version.clone()).set(1.0);
    record_servers(&state);
    metrics::gauge!(UPTIME_SECONDS).set(gateway.uptime().as_secs_f64());
    if let Some(limiter) = state.rate_limiter() {
        metrics::gauge!(RATE_LIMIT_BUCKETS).set(limiter.tracked() as f64);
    }
    if let Some(streams) = state.event_streams() {
        metrics::gauge!(WEBSOCKET_CLIENTS).set(streams.client_count() as f64);
    }
    if let Some(discovery) = gateway.discovery() {
        let (pending, quarantined) = discovery.counts();
        metrics::gauge!(DISCOVERY_CANDIDATES, "state" => "pending").set(pending as f64);
        metrics::gauge!(DISCOVERY_CANDIDATES, "state" => "quarantined").set(quarantined as f64);
    }
    record_groups(&state);
    record_census();
    // The event log's size is set by its compaction task (`mcpgw_gateway::run_event_log_compaction`),
    // which counts the log anyway: a scrape never waits on the log's writer or counts its rows.
    let handle = state.metrics();
    handle.run_upkeep();
    let accept = request.headers().get(actix_web::http::header::ACCEPT);
    if openmetrics::wants_openmetrics(accept) {
        let exemplars = ToolCallExemplars::global().snapshot();
        return HttpResponse::Ok()
            .content_type(openmetrics::CONTENT_TYPE)
            .body(openmetrics::render(&handle.render(), &exemplars));
    }
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(handle.render())
}

/// The ids of the groups whose in-flight gauge the last scrape set (see
/// [`SERVERS_WITH_GAUGES`]).
static GROUPS_WITH_GAUGES: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Sets the in-flight gauge of every group (the calls routed to its members and not finished),
/// and zeroes those of groups deleted since the last scrape.
fn record_groups(state: &ApiState) {
    let mut present = BTreeSet::new();
    if let Some(groups) = state.gateway().groups() {
        for group in groups.list() {
            let in_flight: u64 = group
                .members
                .iter()
                .map(|member| u64::from(member.in_flight))
                .sum();
            let id = group.group_id.as_str().to_owned();
            metrics::gauge!(GROUP_TOOL_CALLS_IN_FLIGHT, "group_id" => id.clone())
                .set(in_flight as f64);
            present.insert(id);
        }
    }
    let removed: Vec<String> = {
        let mut previous = GROUPS_WITH_GAUGES
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let removed = previous.difference(&present).cloned().collect();
        *previous = present;
        removed
    };
    for id in removed {
        metrics::gauge!(GROUP_TOOL_CALLS_IN_FLIGHT, "group_id" => id).set(0.0);
    }
}

/// Sets the relay counters and the client session gauges from the domain's counts.
fn record_census() {
    for line in RelayCounts::global().read() {
        metrics::counter!(
            RELAYS_TOTAL,
            "kind" => line.kind.as_str(),
            "outcome" => line.outcome.as_str(),
        )
        .absolute(line.count);
    }
    let sessions = ClientSessions::global().read();
    for (version, open) in sessions.by_protocol_version {
        metrics::gauge!(MCP_CLIENT_SESSIONS, "protocol_version" => version.to_string())
            .set(open as f64);
    }
    metrics::gauge!(MCP_LISTEN_STREAMS).set(sessions.listen_streams as f64);
}

/// The ids of the servers whose gauges the last scrape set, so that the next one can zero the
/// gauges of servers that were removed meanwhile (the exporter keeps a series once it exists).
static SERVERS_WITH_GAUGES: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Sets the per-server gauges and health check counters, and the servers by state, from one
/// listing of the registry.
fn record_servers(state: &ApiState) {
    let servers = state.gateway().servers().list(None);
    let mut by_state = [0_usize; ServerState::ALL.len()];
    let mut present = BTreeSet::new();
    for snapshot in &servers {
        let id = snapshot.id().as_str().to_owned();
        let up = if snapshot.state == ServerState::Ready {
            1.0
        } else {
            0.0
        };
        metrics::gauge!(MCP_SERVER_UP, "mcp_server_id" => id.clone()).set(up);
        metrics::gauge!(TOOL_CALLS_IN_FLIGHT, "mcp_server_id" => id.clone())
            .set(snapshot.in_flight_calls as f64);
        for (index, server_state) in ServerState::ALL.into_iter().enumerate() {
            let current = server_state == snapshot.state;
            if current {
                by_state[index] += 1;
            }
            metrics::gauge!(
                MCP_SERVER_STATE,
                "mcp_server_id" => id.clone(),
                "state" => server_state.as_str(),
            )
            .set(if current { 1.0 } else { 0.0 });
        }
        metrics::counter!(HEALTH_CHECKS_TOTAL, "mcp_server_id" => id.clone(), "result" => "passed")
            .absolute(snapshot.health_checks_passed);
        metrics::counter!(HEALTH_CHECKS_TOTAL, "mcp_server_id" => id.clone(), "result" => "failed")
            .absolute(snapshot.health_checks_failed);
        present.insert(id);
    }
    for (server_state, count) in ServerState::ALL.into_iter().zip(by_state) {
        metrics::gauge!(MCP_SERVERS, "state" => server_state.as_str()).set(count as f64);
    }
    let removed = {
        let mut previous = SERVERS_WITH_GAUGES
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let removed: Vec<String> = previous.difference(&present).cloned().collect();
        *previous = present;
        removed
    };
    for id in removed {
        metrics::gauge!(MCP_SERVER_UP, "mcp_server_id" => id.clone()).set(0.0);
        metrics::gauge!(TOOL_CALLS_IN_FLIGHT, "mcp_server_id" => id.clone()).set(0.0);
        for server_state in ServerState::ALL {
            metrics::gauge!(
                MCP_SERVER_STATE,
                "mcp_server_id" => id.clone(),
                "state" => server_state.as_str(),
            )
            .set(0.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use metrics::{
        Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString,
        Unit,
    };

    use super::*;

    /// Counts every counter increment and histogram sample by series (`name{label=value,...}`).
    #[derive(Default)]
    struct Tally {
        counters: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
        samples: Mutex<BTreeMap<String, Arc<Samples>>>,
    }

    #[derive(Default)]
    struct Samples(AtomicU64);

    impl HistogramFn for Samples {
        fn record(&self, _: f64) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn series(key: &Key) -> String {
        let labels: Vec<String> = key
            .labels()
            .map(|label| format!("{}={}", label.key(), label.value()))
            .collect();
        format!("{}{{{}}}", key.name(), labels.join(","))
    }

    impl Tally {
        fn count(&self, series: &str) -> u64 {
            self.counters
                .lock()
                .unwrap()
                .get(series)
                .map_or(0, |count| count.load(Ordering::Relaxed))
        }

        fn samples(&self, series: &str) -> u64 {
            self.samples
                .lock()
                .unwrap()
                .get(series)
                .map_or(0, |samples| samples.0.load(Ordering::Relaxed))
        }
    }

    impl Recorder for Tally {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            let mut counters = self.counters.lock().unwrap();
            Counter::from_arc(counters.entry(series(key)).or_default().clone())
        }

        fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::noop()
        }

        fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
            let mut samples = self.samples.lock().unwrap();
            Histogram::from_arc(samples.entry(series(key)).or_default().clone())
        }
    }

    const OK_MCP: &str = "mcpgw_http_requests_total{method=POST,route=/mcp,status=200}";
    const BAD_MCP: &str = "mcpgw_http_requests_total{method=POST,route=/mcp,status=400}";
    const MCP_TIMES: &str = "mcpgw_http_request_duration_seconds{method=POST,route=/mcp}";

    #[test]
    fn kept_handles_count_each_request_once_in_its_own_series() {
        let tally = Tally::default();
        let mut handles = RouteHandles::default();
        metrics::with_local_recorder(&tally, || {
            for status in [200, 200, 400, 200] {
                handles.record("POST", "/mcp".to_owned(), status, 0.001);
            }
            handles.record("GET", "/api/system".to_owned(), 200, 0.001);
        });
        assert_eq!(tally.count(OK_MCP), 3);
        assert_eq!(tally.count(BAD_MCP), 1);
        assert_eq!(tally.samples(MCP_TIMES), 4);
        assert_eq!(
            tally.count("mcpgw_http_requests_total{method=GET,route=/api/system,status=200}"),
            1
        );
        assert_eq!(handles.routes.len(), 2);
    }

    #[test]
    fn kept_handles_follow_the_recorder_in_place() {
        let (first, second) = (Tally::default(), Tally::default());
        let mut handles = RecorderHandles::<RouteHandles>::default();
        metrics::with_local_recorder(&first, || {
            handles
                .current()
                .record("POST", "/mcp".to_owned(), 200, 0.001);
        });
        metrics::with_local_recorder(&second, || {
            for _ in 0..2 {
                handles
                    .current()
                    .record("POST", "/mcp".to_owned(), 200, 0.001);
            }
        });
        assert_eq!(first.count(OK_MCP), 1);
        assert_eq!(second.count(OK_MCP), 2);
        assert_eq!(second.samples(MCP_TIMES), 2);
    }
}
