//! Prometheus metrics: the process-wide recorder, the request metrics middleware and `/metrics`.
//!
//! Labels only ever carry bounded values: the route *template* (`/api/mcp_servers/{id}`, never
//! the raw path), a known method name or `other`, the status code, a server state. A label that
//! copied caller input would let any caller grow the metrics without bound.

use std::future::{Ready, ready};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use actix_web::HttpResponse;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse, Transform, forward_ready};
use actix_web::http::Method;
use actix_web::web;
use futures::future::LocalBoxFuture;
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};

use crate::probes::count_by_state;
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
        ready(Ok(RequestMetricsMiddleware { service }))
    }
}

#[derive(Debug)]
pub struct RequestMetricsMiddleware<S> {
    service: S,
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
        Box::pin(async move {
            let result = response.await;
            let (status, route) = match &result {
                Ok(response) => (response.status().as_u16(), route_label(response.request())),
                Err(error) => (
                    error.as_response_error().status_code().as_u16(),
                    UNMATCHED_ROUTE.to_owned(),
                ),
            };
            let status = status.to_string();
            metrics::counter!(
                HTTP_REQUESTS_TOTAL,
                "method" => method,
                "route" => route.clone(),
                "status" => status,
            )
            .increment(1);
            metrics::histogram!(
                HTTP_REQUEST_DURATION_SECONDS,
                "method" => method,
                "route" => route,
            )
            .record(started.elapsed().as_secs_f64());
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
        Some(pattern) if pattern.len() > 1 => pattern.trim_end_matches('/').to_owned(),
        Some(pattern) => pattern,
        None => UNMATCHED_ROUTE.to_owned(),
    }
}

/// Prometheus metrics in the text exposition format.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "observability",
    operation_id = "prometheus_metrics",
    responses((status = 200, description = "Prometheus text exposition format",
               content_type = "text/plain; version=0.0.4", body = String))
)]
pub(crate) async fn metrics_text(state: web::Data<ApiState>) -> HttpResponse {
    let gateway = state.gateway();
    metrics::gauge!(BUILD_INFO, "version" => gateway.info().version.clone()).set(1.0);
    for (server_state, count) in count_by_state(&state) {
        metrics::gauge!(MCP_SERVERS, "state" => server_state.as_str()).set(count as f64);
    }
    metrics::gauge!(UPTIME_SECONDS).set(gateway.uptime().as_secs_f64());
    let handle = state.metrics();
    handle.run_upkeep();
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(handle.render())
}
