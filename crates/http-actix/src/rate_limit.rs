//! Rate limiting of REST requests: one token bucket per caller (see [`RateLimiter`]).
//!
//! Every request under `/api/` counts against its caller's bucket: the principal the
//! authentication middleware found, or the client's address (behind trusted proxies, the
//! forwarded one) when the caller is anonymous. It runs inside authentication, so a request
//! that fails to authenticate never reaches it (repeated failures have their own lockout).
//! `/mcp` is limited per tool call by the front end, never here; probes, `/metrics`, the
//! documentation page and CORS preflights are never limited.
//!
//! Every response of a limited route carries `X-RateLimit-Limit` (the bucket's capacity) and
//! `X-RateLimit-Remaining`; a refused request answers 429 `RateLimitExceeded` with
//! `Retry-After` in whole seconds, rounded up so that a client that waits that long gets in.

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{HttpMessage as _, HttpResponse, web};
use mcpgw_gateway::authz::{RateLimitCaller, RateLimitDecision, RateLimitKey, RateLimitScope};
use mcpgw_gateway::core::Caller;

use crate::error::{ErrorEnvelope, names};
use crate::state::ApiState;

pub const RATE_LIMIT_LIMIT_HEADER: &str = "x-ratelimit-limit";
pub const RATE_LIMIT_REMAINING_HEADER: &str = "x-ratelimit-remaining";

/// Is `path` one of the REST routes that count against the REST bucket?
fn is_limited(path: &str) -> bool {
    path.starts_with("/api/")
}

/// The actix middleware (mount with `actix_web::middleware::from_fn`, inside authentication).
pub async fn limit_rate(
    request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody + 'static>>, actix_web::Error> {
    let limiter = request.app_data::<web::Data<ApiState>>().and_then(|state| {
        state
            .rate_limiter()
            .cloned()
            .map(|limiter| (state.clone(), limiter))
    });
    let Some((state, limiter)) = limiter.filter(|_| is_limited(request.path())) else {
        return next
            .call(request)
            .await
            .map(ServiceResponse::map_into_left_body);
    };
    if !limiter.policy().is_enabled() {
        return next
            .call(request)
            .await
            .map(ServiceResponse::map_into_left_body);
    }
    // Authentication found the caller and its address already when it is on.
    let known = request
        .extensions()
        .get::<Caller>()
        .map(|caller| (caller.principal.clone(), caller.address));
    let (principal, address) =
        known.unwrap_or_else(|| (None, state.client_address(request.request())));
    let caller = RateLimitCaller::of(principal.as_deref(), address);
    let decision = limiter.check(&RateLimitKey {
        scope: RateLimitScope::Rest,
        caller: &caller,
        tool: None,
    });
    if !decision.allowed {
        metrics::counter!(
            mcpgw_gateway::metrics::RATE_LIMIT_HITS_TOTAL,
            "scope" => RateLimitScope::Rest.as_str()
        )
        .increment(1);
        tracing::debug!(
            path = request.path(),
            retry_after_ms = decision.retry_after_millis(),
            "refused a REST request over its caller's rate limit"
        );
        let response = too_many_requests(&decision, limiter.policy().requests_per_second);
        return Ok(request.into_response(response).map_into_right_body());
    }
    let mut response = next.call(request).await?;
    add_headers(response.headers_mut(), &decision);
    Ok(response.map_into_left_body())
}

fn add_headers(headers: &mut actix_web::http::header::HeaderMap, decision: &RateLimitDecision) {
    headers.insert(
        HeaderName::from_static(RATE_LIMIT_LIMIT_HEADER),
        HeaderValue::from(decision.limit),
    );
    headers.insert(
        HeaderName::from_static(RATE_LIMIT_REMAINING_HEADER),
        HeaderValue::from(decision.remaining),
    );
}

fn too_many_requests(decision: &RateLimitDecision, requests_per_second: f64) -> HttpResponse {
    let retry_after = decision.retry_after_seconds();
    let body = ErrorEnvelope {
        error: names::RATE_LIMIT_EXCEEDED.to_owned(),
        message: format!(
            "rate limit exceeded: {requests_per_second} requests per second with bursts of {}; \
             retry after {retry_after} s",
            decision.limit
        ),
        status_code: StatusCode::TOO_MANY_REQUESTS.as_u16(),
    };
    let mut response = HttpResponse::TooManyRequests()
        .insert_header((header::RETRY_AFTER, retry_after.to_string()))
        .json(body);
    add_headers(response.headers_mut(), decision);
    response
}
