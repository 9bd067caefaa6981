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
//!
//! Buckets in this process answer at once; a limiter whose buckets are in a store shared by the
//! fleet is awaited. When that store does not answer and the limiter fails closed, the request
//! is refused the same way, with `Retry-After: 1` and a message that says why.

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{HttpMessage as _, HttpResponse, web};
use mcpgw_gateway::authz::{
    Admission, RateLimitCaller, RateLimitDecision, RateLimitKey, RateLimitScope, RateLimiter,
};
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
    let admission = {
        let caller = RateLimitCaller::of(principal.as_deref(), address);
        limiter.admit(&RateLimitKey {
            scope: RateLimitScope::Rest,
            caller: &caller,
            tool: None,
        })
    };
    // Buckets in this process answer at once; a shared store's answer is awaited.
    let decision = match admission {
        Admission::Now(decision) => decision,
        Admission::Later(pending) => pending.await,
    };
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
        let response = too_many_requests(&decision, limiter.as_ref());
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

fn too_many_requests(decision: &RateLimitDecision, limiter: &dyn RateLimiter) -> HttpResponse {
    let retry_after = decision.retry_after_seconds();
    let message = match limiter.backend_status() {
        // Refused because the store that counts for the whole fleet does not answer.
        Some(status) if status.refuses_traffic() => format!(
            "rate limit unavailable: the rate limiter's {} store does not answer; retry after \
             {retry_after} s",
            status.backend
        ),
        _ => format!(
            "rate limit exceeded: {} requests per second with bursts of {}; retry after \
             {retry_after} s",
            limiter.policy().requests_per_second,
            decision.limit
        ),
    };
    let body = ErrorEnvelope {
        error: names::RATE_LIMIT_EXCEEDED.to_owned(),
        message,
        status_code: StatusCode::TOO_MANY_REQUESTS.as_u16(),
    };
    let mut response = HttpResponse::TooManyRequests()
        .insert_header((header::RETRY_AFTER, retry_after.to_string()))
        .json(body);
    add_headers(response.headers_mut(), decision);
    response
}

/// A limiter that decides through a store, for the tests of this module and of the probes.
#[cfg(test)]
pub(crate) mod store_fake {
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};

    use mcpgw_core::{ManagerSettings, ServerManager};
    use mcpgw_gateway::authz::{
        Admission, RateLimitBackendStatus, RateLimitDecision, RateLimitKey, RateLimitPolicy,
        RateLimiter,
    };
    use mcpgw_gateway::{Gateway, GatewayInfo, TokioClock, TokioSpawner};
    use mcpgw_testkit::fakes::{FakeLauncher, RecordingEventSink};

    use crate::state::{ApiState, HttpSettings};

    pub(crate) const POLICY: RateLimitPolicy = RateLimitPolicy {
        requests_per_second: 4.0,
        burst: 7,
    };

    /// Answers the decisions it is given, in order, each after suspending once (as a round
    /// trip to a store does), and reports `status` as its store's.
    pub(crate) struct StoreLimiter {
        pub(crate) decisions: Mutex<VecDeque<RateLimitDecision>>,
        pub(crate) status: Mutex<Option<RateLimitBackendStatus>>,
        pub(crate) keys: Mutex<Vec<String>>,
    }

    impl StoreLimiter {
        pub(crate) fn new(
            decisions: impl IntoIterator<Item = RateLimitDecision>,
            status: Option<RateLimitBackendStatus>,
        ) -> Arc<Self> {
            Arc::new(Self {
                decisions: Mutex::new(decisions.into_iter().collect()),
                status: Mutex::new(status),
                keys: Mutex::new(Vec::new()),
            })
        }
    }

    impl RateLimiter for StoreLimiter {
        fn policy(&self) -> RateLimitPolicy {
            POLICY
        }

        fn check(&self, _key: &RateLimitKey<'_>) -> RateLimitDecision {
            panic!("callers must ask through admit, which a store's limiter overrides");
        }

        fn admit(&self, key: &RateLimitKey<'_>) -> Admission {
            let mut bucket = String::new();
            key.write_bucket_key(&mut bucket);
            self.keys.lock().unwrap().push(bucket);
            let decision = self
                .decisions
                .lock()
                .unwrap()
                .pop_front()
                .expect("a decision left for this request");
            Admission::Later(Box::pin(async move {
                tokio::task::yield_now().await;
                decision
            }))
        }

        fn evict_idle(&self) -> usize {
            0
        }

        fn tracked(&self) -> usize {
            0
        }

        fn backend_status(&self) -> Option<RateLimitBackendStatus> {
            *self.status.lock().unwrap()
        }
    }

    /// The state of a started gateway over fakes, limited by `limiter` when there is one.
    pub(crate) fn state_with(limiter: Option<Arc<dyn RateLimiter>>) -> ApiState {
        let manager = ServerManager::new(
            Arc::new(FakeLauncher::new()),
            Arc::new(TokioClock::default()),
            Arc::new(RecordingEventSink::default()),
            Arc::new(TokioSpawner::current()),
            None,
            ManagerSettings::default(),
        );
        let gateway = Gateway::new(
            manager,
            GatewayInfo {
                version: "0.0.0-test".to_owned(),
                config_path: None,
            },
        );
        gateway.mark_startup_complete();
        let metrics = crate::install_metrics_recorder().expect("the metrics recorder installs");
        let state = ApiState::new(gateway, metrics, HttpSettings::default());
        match limiter {
            Some(limiter) => state.with_rate_limiter(limiter),
            None => state,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use actix_web::http::StatusCode;
    use actix_web::middleware::from_fn;
    use actix_web::{App, HttpResponse, test, web};
    use mcpgw_gateway::authz::{RateLimitBackendStatus, RateLimitDecision, RateLimitFailMode};

    use super::store_fake::{POLICY, StoreLimiter, state_with};
    use super::*;

    async fn answer(limiter: std::sync::Arc<StoreLimiter>) -> ServiceResponse<impl MessageBody> {
        let app = test::init_service(
            App::new()
                .app_data(web::Data::new(state_with(Some(limiter))))
                .wrap(from_fn(limit_rate))
                .route(
                    "/api/things",
                    web::get().to(|| async { HttpResponse::Ok().body("things") }),
                ),
        )
        .await;
        let request = test::TestRequest::get()
            .uri("/api/things")
            .peer_addr("192.0.2.7:40000".parse().unwrap())
            .to_request();
        test::call_service(&app, request).await
    }

    fn header<'a, B>(response: &'a ServiceResponse<B>, name: &str) -> &'a str {
        response
            .headers()
            .get(name)
            .unwrap_or_else(|| panic!("no {name} header"))
            .to_str()
            .unwrap()
    }

    #[actix_web::test]
    async fn a_decision_from_a_store_is_awaited_and_its_counts_are_sent() {
        let limiter = StoreLimiter::new(
            [RateLimitDecision {
                allowed: true,
                limit: 7,
                remaining: 3,
                retry_after: Duration::ZERO,
            }],
            None,
        );
        let response = answer(limiter.clone()).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(header(&response, RATE_LIMIT_LIMIT_HEADER), "7");
        assert_eq!(header(&response, RATE_LIMIT_REMAINING_HEADER), "3");
        assert_eq!(
            *limiter.keys.lock().unwrap(),
            ["r\u{1f}a:192.0.2.7"],
            "the anonymous caller counted by its address"
        );
    }

    #[actix_web::test]
    async fn a_refusal_from_a_store_is_a_429_with_its_wait() {
        let limiter = StoreLimiter::new(
            [RateLimitDecision {
                allowed: false,
                limit: 7,
                remaining: 0,
                retry_after: Duration::from_millis(1500),
            }],
            None,
        );
        let response = answer(limiter).await;
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(header(&response, "retry-after"), "2");
        assert_eq!(header(&response, RATE_LIMIT_REMAINING_HEADER), "0");
        let body: serde_json::Value = test::read_body_json(response).await;
        assert_eq!(body["error"], "RateLimitExceeded");
        assert_eq!(
            body["message"],
            "rate limit exceeded: 4 requests per second with bursts of 7; retry after 2 s"
        );
    }

    #[actix_web::test]
    async fn a_store_that_does_not_answer_while_failing_closed_is_named_in_the_refusal() {
        let limiter = StoreLimiter::new(
            [RateLimitFailMode::Closed.decision(&POLICY)],
            Some(RateLimitBackendStatus {
                backend: "redis",
                up: false,
                on_unavailable: RateLimitFailMode::Closed,
            }),
        );
        let response = answer(limiter).await;
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(header(&response, "retry-after"), "1");
        let body: serde_json::Value = test::read_body_json(response).await;
        assert_eq!(body["error"], "RateLimitExceeded");
        assert_eq!(body["status_code"], 429);
        assert_eq!(
            body["message"],
            "rate limit unavailable: the rate limiter's redis store does not answer; retry after \
             1 s"
        );
    }
}
