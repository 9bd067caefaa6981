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

/// Fills every buffer with a different running pattern, so that each key and key id differs
/// from the last, deterministically.
#[derive(Default)]
pub struct ScriptedSecrets {
    next: std::sync::atomic::AtomicU8,
}

impl mcpgw_gateway::authz::SecretSource for ScriptedSecrets {
    fn fill(&self, destination: &mut [u8]) -> Result<(), mcpgw_gateway::authz::RandomnessError> {
        let start = self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        for (index, byte) in destination.iter_mut().enumerate() {
            *byte = start
                .wrapping_mul(37)
                .wrapping_add(u8::try_from(index % 251).unwrap_or(0));
        }
        Ok(())
    }
}

/// A harness whose API state carries an auth service over an in-memory store.
pub struct AuthHarness {
    pub harness: Harness,
    pub auth: Arc<mcpgw_gateway::AuthService>,
    pub clock: Arc<mcpgw_testkit::clock::FakeClock>,
    pub events: Arc<RecordingEventSink>,
}

/// A gateway over fakes whose API serves `/api/auth/*` from an `AuthService` over
/// `InMemoryAuthStore`, a fake clock, a recording event sink and scripted secrets. Auth
/// enforcement is off (the service's default settings), so these requests need no
/// credentials: the management routes behave the same either way.
pub async fn harness_with_auth() -> AuthHarness {
    let harness = harness();
    let clock = Arc::new(mcpgw_testkit::clock::FakeClock::new());
    let events = Arc::new(RecordingEventSink::default());
    let auth = Arc::new(mcpgw_gateway::AuthService::new(
        mcpgw_gateway::AuthSettings::default(),
        Arc::new(mcpgw_testkit::auth_store::InMemoryAuthStore::new()),
        events.clone(),
        clock.clone(),
        Arc::new(ScriptedSecrets::default()),
    ));
    auth.load().await.expect("an empty store loads");
    let state = harness.state.clone().with_auth(auth.clone());
    AuthHarness {
        harness: Harness { state, ..harness },
        auth,
        clock,
        events,
    }
}
