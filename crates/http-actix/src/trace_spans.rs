//! The span of each HTTP request, and the trace context a request brings.
//!
//! When a tracer is installed (see [`mcpgw_gateway::core::trace`]), every request gets a server
//! span named `{METHOD} {route template}` under the `traceparent` it carries (a new trace
//! otherwise), with the HTTP attributes of OpenTelemetry's conventions. The span's context goes
//! into the request's extensions, where the MCP layer finds it (an MCP request whose `_meta`
//! names a context of its own continues that one instead), and it is the task's context while
//! the request runs, so the authentication and any store write below it are its children.
//!
//! Without a tracer the middleware does nothing; the MCP handlers still read a `traceparent`
//! header, so a caller's trace reaches the upstream servers unchanged.

use actix_web::HttpMessage;
use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::HeaderMap;
use actix_web::middleware::Next;
use actix_web::web;
use mcpgw_gateway::core::trace::{self, Span, SpanKind, TraceContext, keys};

use crate::state::ApiState;

/// The trace context of a request's `traceparent` and `tracestate` headers, if they hold a
/// valid one (an invalid one is ignored: the request starts a new trace).
pub fn header_context(headers: &HeaderMap) -> Option<TraceContext> {
    let parent = headers.get(trace::TRACEPARENT)?.to_str().ok()?;
    let state = headers
        .get(trace::TRACESTATE)
        .and_then(|value| value.to_str().ok());
    TraceContext::parse(parent, state)
}

/// The middleware: see the module's documentation.
pub async fn trace_request(
    request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody + 'static>, actix_web::Error> {
    if !trace::is_enabled() {
        return next.call(request).await;
    }
    let parent = header_context(request.headers());
    let mut span = Span::start("HTTP", SpanKind::Server, parent.as_ref());
    if span.is_recording() {
        span.set_attribute(
            keys::HTTP_REQUEST_METHOD,
            request.method().as_str().to_owned(),
        );
        span.set_attribute(keys::URL_PATH, request.path().to_owned());
        if let Some(agent) = request
            .headers()
            .get(actix_web::http::header::USER_AGENT)
            .and_then(|value| value.to_str().ok())
        {
            span.set_attribute(keys::USER_AGENT_ORIGINAL, agent.to_owned());
        }
        let address = request
            .app_data::<web::Data<ApiState>>()
            .and_then(|state| state.client_address(request.request()));
        if let Some(address) = address {
            span.set_attribute(keys::CLIENT_ADDRESS, address.to_string());
        }
    }
    let context = span.context().cloned();
    if let Some(context) = &context {
        request.extensions_mut().insert(context.clone());
    }
    let method = request.method().clone();
    let result = trace::in_scope(context, next.call(request)).await;
    if span.is_recording() {
        match &result {
            Ok(response) => {
                let route = response
                    .request()
                    .match_pattern()
                    .unwrap_or_else(|| crate::telemetry::UNMATCHED_ROUTE.to_owned());
                let status = response.status().as_u16();
                span.update_name(|| format!("{method} {route}"));
                span.set_attribute(keys::HTTP_ROUTE, route);
                span.set_attribute(keys::HTTP_RESPONSE_STATUS_CODE, i64::from(status));
                if status >= 500 {
                    span.set_error(&status.to_string(), "the gateway answered a server error");
                }
            }
            Err(error) => {
                span.update_name(|| method.to_string());
                span.set_error("error", &error.to_string());
            }
        }
    }
    result
}
