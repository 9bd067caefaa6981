//! An in-process API over a real `Gateway` whose servers are fakes.

use std::sync::Arc;

use actix_web::body::MessageBody;
use actix_web::dev::{Service, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::test;
use mcpgw_core::{InvocationHistory, ManagerSettings, ServerManager};
use mcpgw_gateway::{EventBus, Gateway, GatewayInfo, GroupService, TokioClock, TokioSpawner};
use mcpgw_http_actix::{ApiState, HttpSettings, install_metrics_recorder};
use mcpgw_testkit::fakes::{FakeLauncher, RecordingEventSink};
use serde_json::Value;

pub const TEST_VERSION: &str = "9.9.9-test";

pub struct Harness {
    pub launcher: Arc<FakeLauncher>,
    pub gateway: Gateway,
    pub state: ApiState,
    /// The group service, in harnesses made by [`harness_with_groups`].
    pub groups: Option<Arc<GroupService>>,
}

/// A gateway over fakes whose start-up is complete, with the default HTTP settings.
pub fn harness() -> Harness {
    harness_with(HttpSettings::default())
}

pub fn harness_with(settings: HttpSettings) -> Harness {
    harness_with_history(settings, None)
}

/// A harness whose gateway keeps its tool invocation history in `history` (the gateway's
/// default when `None`).
pub fn harness_with_history(
    settings: HttpSettings,
    history: Option<Arc<dyn InvocationHistory>>,
) -> Harness {
    let launcher = Arc::new(FakeLauncher::new());
    let manager = ServerManager::new(
        launcher.clone(),
        Arc::new(TokioClock::default()),
        Arc::new(RecordingEventSink::default()),
        Arc::new(TokioSpawner::current()),
        None,
        ManagerSettings::default(),
    );
    let gateway = Gateway::new(
        manager,
        GatewayInfo {
            version: TEST_VERSION.to_owned(),
            config_path: None,
        },
    );
    let gateway = match history {
        Some(history) => gateway.with_history(history),
        None => gateway,
    };
    gateway.mark_startup_complete();
    let metrics = install_metrics_recorder().expect("the metrics recorder installs");
    let state = ApiState::new(gateway.clone(), metrics, settings);
    Harness {
        launcher,
        gateway,
        state,
        groups: None,
    }
}

/// A gateway over fakes with groups enabled, as the bundled server composes it: the servers'
/// events go through an event bus on which the group service observes its members.
pub fn harness_with_groups() -> Harness {
    let launcher = Arc::new(FakeLauncher::new());
    let events = Arc::new(EventBus::new(1024));
    let manager = ServerManager::new(
        launcher.clone(),
        Arc::new(TokioClock::default()),
        events.clone(),
        Arc::new(TokioSpawner::current()),
        None,
        ManagerSettings::default(),
    );
    let groups = Arc::new(GroupService::new(manager.clone(), events.clone()));
    events.add_observer(groups.observer());
    let gateway = Gateway::new(
        manager,
        GatewayInfo {
            version: TEST_VERSION.to_owned(),
            config_path: None,
        },
    )
    .with_groups(groups.clone());
    gateway.mark_startup_complete();
    let metrics = install_metrics_recorder().expect("the metrics recorder installs");
    let state = ApiState::new(gateway.clone(), metrics, HttpSettings::default());
    Harness {
        launcher,
        gateway,
        state,
        groups: Some(groups),
    }
}

/// The body of a response as JSON, failing loudly when it is not JSON.
pub async fn json_of<B: MessageBody>(response: ServiceResponse<B>) -> Value {
    let bytes = test::read_body(response).await;
    serde_json::from_slice(&bytes).unwrap_or_else(|error| {
        panic!(
            "the body is not JSON ({error}): {}",
            String::from_utf8_lossy(&bytes)
        )
    })
}

/// Sends `request` and returns the status and the JSON body.
pub async fn send<S, B>(app: &S, request: actix_http::Request) -> (StatusCode, Value)
where
    S: Service<actix_http::Request, Response = ServiceResponse<B>, Error = actix_web::Error>,
    B: MessageBody,
{
    let response = test::call_service(app, request).await;
    let status = response.status();
    (status, json_of(response).await)
}

/// Asserts that `response` is the error envelope with `status` and `name`, with a JSON content
/// type, and returns its message.
pub async fn assert_envelope<B: MessageBody>(
    response: ServiceResponse<B>,
    status: u16,
    name: &str,
) -> String {
    let actual_status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(actix_web::http::header::CONTENT_TYPE)
        .map(|value| value.to_str().unwrap_or_default().to_owned())
        .unwrap_or_default();
    let body = json_of(response).await;
    assert_eq!(actual_status, status, "status of {body}");
    assert!(
        content_type.starts_with("application/json"),
        "content type {content_type:?}"
    );
    assert_eq!(body["error"], name, "error name in {body}");
    assert_eq!(body["status_code"], status, "status_code in {body}");
    let object = body.as_object().expect("the envelope is an object");
    assert_eq!(
        object.len(),
        3,
        "the envelope has exactly three fields: {body}"
    );
    let message = body["message"]
        .as_str()
        .expect("message is a string")
        .to_owned();
    assert!(!message.is_empty(), "the message says something");
    message
}
