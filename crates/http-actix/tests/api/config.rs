//! `/api/config`: the running configuration with secrets masked, reload (applied, refused when
//! the file is invalid, refused without a file), export, backup and diff, over a real
//! configuration service whose file is a fake held in memory; and the 404 of every
//! configuration path in a gateway composed without a configuration service.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use actix_web::http::Method;
use actix_web::test::{self, TestRequest};
use async_trait::async_trait;
use mcpgw_config::{ConfigFile, ConfigFileError};
use mcpgw_core::{ManagerSettings, ServerManager};
use mcpgw_gateway::{ConfigService, Environment, Gateway, GatewayInfo, TokioClock, TokioSpawner};
use mcpgw_http_actix::{ApiState, HttpSettings, app, install_metrics_recorder};
use mcpgw_testkit::fakes::{FakeLauncher, RecordingEventSink};
use serde_json::{Value, json};

use crate::support::{TEST_VERSION, assert_envelope, harness, send};

const FILE_NAME: &str = "gateway.yaml";
const BACKUP_PATH: &str = "/srv/mcpgw/gateway.yaml.bak1";

/// Values that must never leave the gateway: one written in the file, one that a `${VAR}`
/// reference expands to.
const ENV_SECRET: &str = "s3cr3t-env-value-4711";
const HEADER_SECRET: &str = "tok-9f8e7d-header-secret";
const NEW_ENV_SECRET: &str = "rotated-s3cr3t-0815";

/// The file the gateway started from: a subprocess server with a secret in `env`, and a
/// remote server whose header takes a secret from the environment.
fn initial_text() -> String {
    format!(
        "mcp_servers:
  math:
    mode: subprocess
    command: [python3, -m, math_server]
    env: {{MATH_TOKEN: \"{ENV_SECRET}\"}}
    idle_ttl_s: 300
  api:
    mode: remote
    endpoint: \"https://host.example/mcp\"
    headers: {{Authorization: \"Bearer ${{API_TOKEN}}\"}}
"
    )
}

/// The configuration file, in memory: what `read` answers is whatever the test last wrote.
#[derive(Default)]
struct FakeConfigFile {
    text: Mutex<String>,
    read_failure: Mutex<Option<String>>,
    backup_failure: Mutex<Option<String>>,
    /// The `keep` of every backup asked for, in order.
    backups: Mutex<Vec<usize>>,
}

impl FakeConfigFile {
    fn with_text(text: &str) -> Self {
        let file = Self::default();
        file.write(text);
        file
    }

    fn write(&self, text: &str) {
        text.clone_into(&mut self.text.lock().unwrap());
    }
}

#[async_trait]
impl ConfigFile for FakeConfigFile {
    fn display_name(&self) -> String {
        FILE_NAME.to_owned()
    }

    async fn read(&self) -> Result<String, ConfigFileError> {
        if let Some(reason) = self.read_failure.lock().unwrap().clone() {
            return Err(ConfigFileError(reason));
        }
        Ok(self.text.lock().unwrap().clone())
    }

    async fn backup(&self, keep: usize) -> Result<String, ConfigFileError> {
        if let Some(reason) = self.backup_failure.lock().unwrap().clone() {
            return Err(ConfigFileError(reason));
        }
        self.backups.lock().unwrap().push(keep);
        Ok(BACKUP_PATH.to_owned())
    }

    async fn changed(&self) {
        // Reloads in these tests are asked for over the API only.
        std::future::pending::<()>().await;
    }
}

struct ConfigHarness {
    state: ApiState,
    file: Arc<FakeConfigFile>,
}

fn environment() -> Environment {
    let variables: HashMap<String, String> =
        HashMap::from([("API_TOKEN".to_owned(), HEADER_SECRET.to_owned())]);
    Arc::new(move |name: &str| variables.get(name).cloned())
}

/// A gateway over fakes composed as the bundled server does with `--config gateway.yaml`: the
/// file's servers registered, and a configuration service over the file (or, with
/// `with_file` false, a service of a gateway started without a file, whose running
/// configuration is still the text's).
async fn config_harness(with_file: bool) -> ConfigHarness {
    let text = initial_text();
    let environment = environment();
    let running = mcpgw_config::parse(FILE_NAME, &text, &*environment)
        .expect("the initial configuration is valid");
    let events = Arc::new(RecordingEventSink::default());
    let manager = ServerManager::new(
        Arc::new(FakeLauncher::new()),
        Arc::new(TokioClock::default()),
        events.clone(),
        Arc::new(TokioSpawner::current()),
        None,
        ManagerSettings::default(),
    );
    for spec in running.server_specs() {
        manager
            .register(spec)
            .await
            .expect("a configured server registers");
    }
    let file = Arc::new(FakeConfigFile::with_text(&text));
    let mut service = ConfigService::new(manager.clone(), events, environment, running);
    if with_file {
        service = service.with_file(file.clone(), text);
    }
    let gateway = Gateway::new(
        manager,
        GatewayInfo {
            version: TEST_VERSION.to_owned(),
            config_path: with_file.then(|| FILE_NAME.to_owned()),
        },
    )
    .with_config(Arc::new(service));
    gateway.mark_startup_complete();
    let metrics = install_metrics_recorder().expect("the metrics recorder installs");
    ConfigHarness {
        state: ApiState::new(gateway, metrics, HttpSettings::default()),
        file,
    }
}

fn get(uri: &str) -> actix_http::Request {
    TestRequest::get().uri(uri).to_request()
}

fn post(uri: &str) -> actix_http::Request {
    TestRequest::post().uri(uri).to_request()
}

/// The ids of the registered servers, sorted.
fn server_ids(list: &Value) -> Vec<String> {
    let mut ids: Vec<String> = list["mcp_servers"]
        .as_array()
        .unwrap_or_else(|| panic!("mcp_servers is an array in {list}"))
        .iter()
        .map(|server| server["mcp_server_id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort_unstable();
    ids
}

fn assert_no_secret(what: &str, text: &str) {
    for secret in [ENV_SECRET, HEADER_SECRET, NEW_ENV_SECRET] {
        assert!(
            !text.contains(secret),
            "{what} shows the secret {secret}: {text}"
        );
    }
}

#[actix_web::test]
async fn the_running_configuration_is_shown_with_every_secret_masked() {
    let harness = config_harness(true).await;
    let app = test::init_service(app(harness.state)).await;
    let (status, body) = send(&app, get("/api/config")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["path"], FILE_NAME);
    let servers = &body["config"]["mcp_servers"];
    assert_eq!(
        servers["math"]["command"],
        json!(["python3", "-m", "math_server"])
    );
    assert_eq!(servers["math"]["env"]["MATH_TOKEN"], "***", "{body}");
    assert_eq!(servers["api"]["endpoint"], "https://host.example/mcp");
    assert_eq!(servers["api"]["headers"]["Authorization"], "***", "{body}");
    assert_no_secret("GET /api/config", &body.to_string());
}

#[actix_web::test]
async fn reload_applies_the_files_changes_and_answers_what_changed() {
    let harness = config_harness(true).await;
    let app = test::init_service(app(harness.state)).await;

    // Unchanged file: everything unchanged.
    let (status, body) = send(&app, post("/api/config/reload")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"added": [], "removed": [], "updated": [], "unchanged": ["api", "math"],
               "restart_required": []})
    );

    // A server added, one changed, one removed; a JSON body is ignored like an empty one.
    harness.file.write(&format!(
        "mcp_servers:
  math:
    mode: subprocess
    command: [python3, -m, math_server]
    env: {{MATH_TOKEN: \"{ENV_SECRET}\"}}
    idle_ttl_s: 600
  weather:
    mode: subprocess
    command: [weather-server]
"
    ));
    let request = TestRequest::post()
        .uri("/api/config/reload")
        .set_json(json!({"anything": true}))
        .to_request();
    let (status, body) = send(&app, request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"added": ["weather"], "removed": ["api"], "updated": ["math"], "unchanged": [],
               "restart_required": []})
    );

    let (status, list) = send(&app, get("/api/mcp_servers")).await;
    assert_eq!(status, 200);
    assert_eq!(server_ids(&list), ["math", "weather"]);
    let (_, details) = send(&app, get("/api/mcp_servers/math")).await;
    assert_eq!(details["idle_ttl_s"], 600, "{details}");
    let (_, shown) = send(&app, get("/api/config")).await;
    let mut shown_ids: Vec<&String> = shown["config"]["mcp_servers"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    shown_ids.sort_unstable();
    assert_eq!(shown_ids, ["math", "weather"], "{shown}");
}

#[actix_web::test]
async fn an_invalid_file_changes_nothing_and_answers_422_with_every_error() {
    let harness = config_harness(true).await;
    let app = test::init_service(app(harness.state)).await;
    // Two errors on known lines, and a new server that must not be registered.
    harness.file.write(
        "mcp_servers:
  math:
    mode: subprocess
    command: [python3, -m, math_server]
    idle_ttl_s: 0
  weather:
    mode: subprocess
    command: [weather-server]
    health_check_interval_s: 1
",
    );
    let response = test::call_service(&app, post("/api/config/reload")).await;
    let message = assert_envelope(response, 422, "ValidationError").await;
    for expected in [
        "gateway.yaml:5",
        "mcp_servers.math.idle_ttl_s",
        "gateway.yaml:9",
        "mcp_servers.weather.health_check_interval_s",
    ] {
        assert!(message.contains(expected), "{expected} in {message}");
    }
    // One error per line.
    let math_line = message
        .lines()
        .find(|line| line.contains("mcp_servers.math.idle_ttl_s"))
        .unwrap();
    assert!(!math_line.contains("weather"), "{message}");

    let (_, list) = send(&app, get("/api/mcp_servers")).await;
    assert_eq!(server_ids(&list), ["api", "math"]);
    let (_, shown) = send(&app, get("/api/config")).await;
    assert!(
        shown["config"]["mcp_servers"]["weather"].is_null(),
        "{shown}"
    );
    assert_eq!(shown["config"]["mcp_servers"]["math"]["idle_ttl_s"], 300);

    // The diff reports the invalid file the same way.
    let response = test::call_service(&app, get("/api/config/diff")).await;
    let message = assert_envelope(response, 422, "ValidationError").await;
    assert!(message.contains("mcp_servers.math.idle_ttl_s"), "{message}");
}

#[actix_web::test]
async fn a_file_that_cannot_be_read_is_an_error_that_says_why() {
    let harness = config_harness(true).await;
    let app = test::init_service(app(harness.state)).await;
    *harness.file.read_failure.lock().unwrap() =
        Some("cannot read gateway.yaml: permission denied".to_owned());
    let response = test::call_service(&app, post("/api/config/reload")).await;
    let message = assert_envelope(response, 503, "ServiceUnavailableError").await;
    assert!(
        message.contains("gateway.yaml") && message.contains("permission denied"),
        "{message}"
    );
    let (_, list) = send(&app, get("/api/mcp_servers")).await;
    assert_eq!(server_ids(&list), ["api", "math"]);
}

#[actix_web::test]
async fn without_a_file_reload_backup_and_diff_answer_409() {
    let harness = config_harness(false).await;
    let app = test::init_service(app(harness.state)).await;
    for request in [
        post("/api/config/reload"),
        post("/api/config/backup"),
        get("/api/config/diff"),
    ] {
        let response = test::call_service(&app, request).await;
        let message = assert_envelope(response, 409, "ConflictError").await;
        assert!(message.contains("--config"), "{message}");
    }
    // What runs can still be shown and exported.
    let (status, body) = send(&app, get("/api/config")).await;
    assert_eq!(status, 200);
    assert_eq!(body["path"], Value::Null);
    assert_eq!(
        body["config"]["mcp_servers"]["math"]["env"]["MATH_TOKEN"],
        "***"
    );
    let (status, body) = send(&app, post("/api/config/export")).await;
    assert_eq!(status, 200);
    assert!(body["yaml"].as_str().unwrap().contains("math"), "{body}");
}

#[actix_web::test]
async fn export_answers_yaml_that_the_gateway_accepts_without_secrets() {
    let harness = config_harness(true).await;
    let app = test::init_service(app(harness.state)).await;
    let (status, body) = send(&app, post("/api/config/export")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body.as_object().unwrap().len(), 1, "{body}");
    let yaml = body["yaml"].as_str().expect("yaml is a string");
    assert_no_secret("export", yaml);
    // With the gateway's environment, as the export is meant to be loaded.
    let exported = mcpgw_config::parse("export", yaml, &*environment())
        .unwrap_or_else(|errors| panic!("the export does not parse: {errors}\n{yaml}"));
    let mut ids: Vec<&String> = exported.mcp_servers.keys().collect();
    ids.sort_unstable();
    assert_eq!(ids, ["api", "math"]);
}

#[actix_web::test]
async fn backup_answers_the_path_of_the_newest_backup_and_keeps_five() {
    let harness = config_harness(true).await;
    let app = test::init_service(app(harness.state)).await;
    let (status, body) = send(&app, post("/api/config/backup")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"path": BACKUP_PATH}));
    assert_eq!(*harness.file.backups.lock().unwrap(), [5]);

    // A directory that cannot be written is an error that names it.
    *harness.file.backup_failure.lock().unwrap() = Some(
        "cannot write a backup in /srv/mcpgw: permission denied; make the directory writable \
         by the gateway"
            .to_owned(),
    );
    let response = test::call_service(&app, post("/api/config/backup")).await;
    let message = assert_envelope(response, 503, "ServiceUnavailableError").await;
    assert!(message.contains("/srv/mcpgw"), "{message}");
}

#[actix_web::test]
async fn diff_shows_the_files_edits_as_a_unified_diff_and_by_server() {
    let harness = config_harness(true).await;
    let app = test::init_service(app(harness.state)).await;

    // The file as it was loaded: nothing differs.
    let (status, body) = send(&app, get("/api/config/diff")).await;
    assert_eq!(status, 200, "{body}");
    let empty = json!({"added": [], "removed": [], "updated": []});
    assert_eq!(
        body,
        json!({"diff": "", "changed": {"servers": empty, "groups": empty,
               "endpoints": empty, "restart_required": []}})
    );

    // An edit (with a rotated secret), an addition and a removal.
    harness.file.write(&format!(
        "mcp_servers:
  math:
    mode: subprocess
    command: [python3, -m, math_server]
    env: {{MATH_TOKEN: \"{NEW_ENV_SECRET}\"}}
    idle_ttl_s: 600
  weather:
    mode: subprocess
    command: [weather-server]
"
    ));
    let (status, body) = send(&app, get("/api/config/diff")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["changed"],
        json!({"servers": {"added": ["weather"], "removed": ["api"], "updated": ["math"]},
               "groups": empty, "endpoints": empty, "restart_required": []})
    );
    let diff = body["diff"].as_str().expect("diff is a string");
    assert!(diff.contains("@@"), "{diff}");
    let removed_lines: Vec<&str> = diff
        .lines()
        .filter(|line| line.starts_with('-') && !line.starts_with("---"))
        .collect();
    let added_lines: Vec<&str> = diff
        .lines()
        .filter(|line| line.starts_with('+') && !line.starts_with("+++"))
        .collect();
    assert!(
        removed_lines.iter().any(|line| line.contains("300")),
        "{diff}"
    );
    assert!(
        added_lines.iter().any(|line| line.contains("600")),
        "{diff}"
    );
    assert!(
        added_lines.iter().any(|line| line.contains("weather")),
        "{diff}"
    );
    assert_no_secret("the diff", &body.to_string());

    // The diff changed nothing.
    let (_, list) = send(&app, get("/api/mcp_servers")).await;
    assert_eq!(server_ids(&list), ["api", "math"]);
}

#[actix_web::test]
async fn with_a_service_wrong_methods_and_unknown_paths_answer_the_usual_errors() {
    let harness = config_harness(true).await;
    let app = test::init_service(app(harness.state)).await;
    let response = test::call_service(&app, get("/api/config/reload")).await;
    assert_eq!(response.headers().get("allow").unwrap(), "POST");
    assert_envelope(response, 405, "MethodNotAllowedError").await;
    let response = test::call_service(&app, post("/api/config")).await;
    assert_eq!(response.headers().get("allow").unwrap(), "GET");
    assert_envelope(response, 405, "MethodNotAllowedError").await;
    let response = test::call_service(&app, get("/api/config/nothing")).await;
    let message = assert_envelope(response, 404, "NotFoundError").await;
    assert!(message.contains("no route"), "{message}");
}

#[actix_web::test]
async fn without_a_configuration_service_every_configuration_path_answers_404() {
    let app = test::init_service(app(harness().state)).await;
    let cases = [
        (Method::GET, "/api/config"),
        (Method::POST, "/api/config/reload"),
        (Method::POST, "/api/config/export"),
        (Method::POST, "/api/config/backup"),
        (Method::GET, "/api/config/diff"),
        (Method::GET, "/api/config/"),
        (Method::DELETE, "/api/config"),
        (Method::GET, "/api/config/nothing/here"),
    ];
    for (method, uri) in cases {
        let request = TestRequest::default()
            .method(method.clone())
            .uri(uri)
            .to_request();
        let response = test::call_service(&app, request).await;
        let message = assert_envelope(response, 404, "NotFoundError").await;
        assert!(
            message.contains("configuration management is not enabled"),
            "{method} {uri}: {message}"
        );
    }
}

#[test]
fn every_configuration_route_maps_to_its_permission() {
    use mcpgw_gateway::authz::Permission;
    let expected = [
        ("GET", "/api/config", "config:read"),
        ("POST", "/api/config/reload", "config:reload"),
        ("POST", "/api/config/export", "config:export"),
        ("POST", "/api/config/backup", "config:backup"),
        ("GET", "/api/config/diff", "config:read"),
    ];
    for (method, path, permission) in expected {
        let mapped = Permission::for_rest_route(method, path)
            .unwrap_or_else(|| panic!("{method} {path} maps to no permission"));
        assert_eq!(mapped.to_string(), permission, "{method} {path}");
    }
}
