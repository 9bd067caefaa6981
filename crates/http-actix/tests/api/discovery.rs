//! `/api/discovery`: sources, scans, the pending and quarantined servers, approval and
//! rejection, over a real discovery service whose sources are scripted fakes; and the 404 of
//! every discovery path in a gateway composed without discovery.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::http::Method;
use actix_web::test::{self, TestRequest};
use async_trait::async_trait;
use mcpgw_core::{ManagerSettings, ServerId, ServerManager};
use mcpgw_discovery::{
    DiscoveredCandidate, DiscoveryMode, DiscoverySource, DiscoverySourceFactory, SourceDefinition,
    SourceError, SourceOrigin,
};
use mcpgw_gateway::{
    DiscoveryService, DiscoverySettings, Gateway, GatewayInfo, TokioClock, TokioSpawner,
};
use mcpgw_http_actix::{ApiState, HttpSettings, app, install_metrics_recorder};
use mcpgw_testkit::fakes::{FakeLauncher, RecordingEventSink};
use serde_json::{Map, Value, json};

use crate::support::{TEST_VERSION, assert_envelope, harness, send};

/// What each source (by id) answers to its next scans; a source without a script sees nothing.
#[derive(Default)]
struct Scripts {
    scans: Mutex<HashMap<String, Result<Vec<DiscoveredCandidate>, String>>>,
}

impl Scripts {
    fn set(&self, source_id: &str, answer: Result<Vec<DiscoveredCandidate>, String>) {
        self.scans
            .lock()
            .unwrap()
            .insert(source_id.to_owned(), answer);
    }
}

struct ScriptedSource {
    source_id: String,
    scripts: Arc<Scripts>,
}

#[async_trait]
impl DiscoverySource for ScriptedSource {
    async fn scan(&self) -> Result<Vec<DiscoveredCandidate>, SourceError> {
        match self.scripts.scans.lock().unwrap().get(&self.source_id) {
            None => Ok(Vec::new()),
            Some(Ok(candidates)) => Ok(candidates.clone()),
            Some(Err(reason)) => Err(SourceError(reason.clone())),
        }
    }
}

/// Builds `scripted` sources; their settings may only be `dir`, `token` and the common grace.
struct ScriptedFactory {
    scripts: Arc<Scripts>,
}

impl DiscoverySourceFactory for ScriptedFactory {
    fn source_types(&self) -> Vec<&'static str> {
        vec!["scripted"]
    }

    fn build(&self, definition: &SourceDefinition) -> Result<Arc<dyn DiscoverySource>, String> {
        if let Some(key) = definition
            .config
            .keys()
            .find(|key| !["dir", "token", "removal_grace_s"].contains(&key.as_str()))
        {
            return Err(format!(
                "config.{key}: is not a setting of scripted sources; use `dir` or `token`"
            ));
        }
        Ok(Arc::new(ScriptedSource {
            source_id: definition.source_id.clone(),
            scripts: Arc::clone(&self.scripts),
        }))
    }
}

struct DiscoveryHarness {
    state: ApiState,
    gateway: Gateway,
    scripts: Arc<Scripts>,
}

async fn discovery_harness() -> DiscoveryHarness {
    discovery_harness_with(Vec::new()).await
}

/// A gateway with discovery whose configuration file declares `config_sources`.
async fn discovery_harness_with(config_sources: Vec<SourceDefinition>) -> DiscoveryHarness {
    discovery_harness_named(config_sources, mcpgw_config::ToolNames::default()).await
}

/// [`discovery_harness_with`], with tools named as `names` says.
async fn discovery_harness_named(
    config_sources: Vec<SourceDefinition>,
    names: mcpgw_config::ToolNames,
) -> DiscoveryHarness {
    let launcher = Arc::new(FakeLauncher::new());
    let events = Arc::new(RecordingEventSink::default());
    let manager = ServerManager::new(
        launcher,
        Arc::new(TokioClock::default()),
        events.clone(),
        Arc::new(TokioSpawner::current()),
        None,
        ManagerSettings::default(),
    );
    let scripts = Arc::new(Scripts::default());
    let service = DiscoveryService::new(
        manager.clone(),
        Arc::new(ScriptedFactory {
            scripts: Arc::clone(&scripts),
        }),
        events,
        DiscoverySettings {
            refresh_interval: Duration::from_secs(3600),
        },
    );
    service
        .load(config_sources)
        .await
        .expect("the configured sources load");
    let gateway = Gateway::new(
        manager,
        GatewayInfo {
            version: TEST_VERSION.to_owned(),
            config_path: None,
        },
    )
    .with_discovery(Arc::new(service))
    .with_tool_names(names);
    gateway.mark_startup_complete();
    let metrics = install_metrics_recorder().expect("the metrics recorder installs");
    let state = ApiState::new(gateway.clone(), metrics, HttpSettings::default());
    DiscoveryHarness {
        state,
        gateway,
        scripts,
    }
}

fn candidate(name: &str, definition: Value) -> DiscoveredCandidate {
    let Value::Object(definition) = definition else {
        panic!("a candidate's definition is an object")
    };
    DiscoveredCandidate {
        name: name.to_owned(),
        location: format!("scripted entry {name}"),
        definition: Ok(definition),
    }
}

fn subprocess(command: &str) -> Value {
    json!({"mode": "subprocess", "command": [command]})
}

fn request(method: Method, uri: &str, body: Option<&Value>) -> actix_http::Request {
    let builder = TestRequest::default().method(method).uri(uri);
    match body {
        Some(body) => builder.set_json(body).to_request(),
        None => builder.to_request(),
    }
}

fn raw(method: Method, uri: &str, body: &str) -> actix_http::Request {
    TestRequest::default()
        .method(method)
        .uri(uri)
        .insert_header(("content-type", "application/json"))
        .set_payload(body.to_owned())
        .to_request()
}

/// `2026-11-21T14:03:07.123456`: UTC, microseconds, no offset.
fn assert_timestamp(value: &Value) {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {value}"));
    let bytes = text.as_bytes();
    let shape_ok = bytes.len() == 26
        && bytes.iter().enumerate().all(|(index, byte)| match index {
            4 | 7 => *byte == b'-',
            10 => *byte == b'T',
            13 | 16 => *byte == b':',
            19 => *byte == b'.',
            _ => byte.is_ascii_digit(),
        });
    assert!(
        shape_ok,
        "`{text}` is not a timestamp like 2026-11-21T14:03:07.123456"
    );
}

fn source_in<'a>(list: &'a Value, source_id: &str) -> Option<&'a Value> {
    list["sources"]
        .as_array()
        .expect("sources is an array")
        .iter()
        .find(|source| source["source_id"] == source_id)
}

fn names_in<'a>(list: &'a Value, key: &str) -> Vec<&'a str> {
    let mut names: Vec<&str> = list[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} is an array in {list}"))
        .iter()
        .map(|entry| entry["name"].as_str().expect("a name"))
        .collect();
    names.sort_unstable();
    names
}

#[actix_web::test]
async fn without_discovery_every_discovery_path_answers_404() {
    let app = test::init_service(app(harness().state)).await;
    let body = json!({"source_type": "docker"});
    let cases = [
        (Method::GET, "/api/discovery/sources", None),
        (Method::GET, "/api/discovery/sources/", None),
        (Method::POST, "/api/discovery/sources", Some(&body)),
        (Method::PUT, "/api/discovery/sources/docker-0", Some(&body)),
        (Method::DELETE, "/api/discovery/sources/docker-0", None),
        (Method::POST, "/api/discovery/sources/docker-0/scan", None),
        (
            Method::PUT,
            "/api/discovery/sources/docker-0/enable",
            Some(&body),
        ),
        (Method::GET, "/api/discovery/pending", None),
        (Method::GET, "/api/discovery/quarantined", None),
        (Method::POST, "/api/discovery/approve/math", None),
        (Method::POST, "/api/discovery/reject/math", None),
        // Unknown sub-paths and methods no discovery route takes: still "not configured".
        (Method::GET, "/api/discovery", None),
        (Method::GET, "/api/discovery/", None),
        (Method::GET, "/api/discovery/nothing/here", None),
        (Method::PATCH, "/api/discovery/sources", Some(&body)),
        (Method::DELETE, "/api/discovery/pending", None),
        (Method::GET, "/api/discovery/approve/math", None),
    ];
    for (method, uri, body) in cases {
        let response = test::call_service(&app, request(method.clone(), uri, body)).await;
        let message = assert_envelope(response, 404, "NotFoundError").await;
        assert!(
            message.contains("discovery is not configured") && message.contains("`discovery:`"),
            "{method} {uri}: {message}"
        );
    }
}

#[actix_web::test]
async fn with_discovery_unknown_paths_and_methods_answer_the_usual_errors() {
    let harness = discovery_harness().await;
    let app = test::init_service(app(harness.state)).await;
    let response = test::call_service(
        &app,
        request(Method::GET, "/api/discovery/nothing/here", None),
    )
    .await;
    let message = assert_envelope(response, 404, "NotFoundError").await;
    assert!(message.contains("no route"), "{message}");
    let response = test::call_service(
        &app,
        request(Method::DELETE, "/api/discovery/pending", None),
    )
    .await;
    assert_eq!(response.headers().get("allow").unwrap(), "GET");
    assert_envelope(response, 405, "MethodNotAllowedError").await;
}

#[actix_web::test]
async fn sources_are_listed_created_updated_enabled_and_deleted() {
    let harness = discovery_harness().await;
    let app = test::init_service(app(harness.state)).await;

    for uri in ["/api/discovery/sources", "/api/discovery/sources/"] {
        let (status, body) = send(&app, request(Method::GET, uri, None)).await;
        assert_eq!(
            (status.as_u16(), body),
            (200, json!({"sources": []})),
            "{uri}"
        );
    }

    let (status, created) = send(
        &app,
        request(
            Method::POST,
            "/api/discovery/sources",
            Some(&json!({"id": "local", "type": "scripted",
                         "config": {"dir": "/srv/mcp", "token": "s3cret"}})),
        ),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        created,
        json!({
            "source_id": "local",
            "source_type": "scripted",
            "mode": "additive",
            "enabled": true,
            "config": {"dir": "/srv/mcp", "token": "***"},
            "last_scan_at": null,
            "error": null,
        })
    );

    let (status, generated) = send(
        &app,
        request(
            Method::POST,
            "/api/discovery/sources",
            Some(&json!({"source_type": "scripted", "mode": "authoritative", "enabled": false})),
        ),
    )
    .await;
    assert_eq!(status, 201, "{generated}");
    assert_eq!(generated["source_id"], "scripted-0");
    assert_eq!(generated["mode"], "authoritative");
    assert_eq!(generated["enabled"], false);
    assert_eq!(generated["config"], json!({}));

    let response = test::call_service(
        &app,
        request(
            Method::POST,
            "/api/discovery/sources",
            Some(&json!({"source_id": "local", "source_type": "scripted"})),
        ),
    )
    .await;
    assert_envelope(response, 409, "DiscoverySourceAlreadyExistsError").await;

    let (status, listed) = send(&app, request(Method::GET, "/api/discovery/sources", None)).await;
    assert_eq!(status, 200);
    assert_eq!(listed["sources"].as_array().unwrap().len(), 2, "{listed}");
    assert_eq!(source_in(&listed, "local"), Some(&created));
    assert!(
        !listed.to_string().contains("s3cret"),
        "secrets are masked: {listed}"
    );

    let (status, updated) = send(
        &app,
        request(
            Method::PUT,
            "/api/discovery/sources/local",
            Some(&json!({"source_id": "local", "source_type": "scripted",
                         "mode": "authoritative", "config": {"dir": "/srv/other"}})),
        ),
    )
    .await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["source_id"], "local");
    assert_eq!(updated["mode"], "authoritative");
    assert_eq!(updated["config"], json!({"dir": "/srv/other"}));

    let response = test::call_service(
        &app,
        request(
            Method::PUT,
            "/api/discovery/sources/ghost",
            Some(&json!({"source_type": "scripted"})),
        ),
    )
    .await;
    assert_envelope(response, 404, "DiscoverySourceNotFoundError").await;

    let (status, disabled) = send(
        &app,
        request(
            Method::PUT,
            "/api/discovery/sources/local/enable",
            Some(&json!({"enabled": false})),
        ),
    )
    .await;
    assert_eq!(
        (status.as_u16(), &disabled["enabled"]),
        (200, &json!(false)),
        "{disabled}"
    );
    let (status, enabled) = send(
        &app,
        request(
            Method::PUT,
            "/api/discovery/sources/scripted-0/enable",
            Some(&json!({"enabled": true})),
        ),
    )
    .await;
    assert_eq!(
        (status.as_u16(), &enabled["enabled"]),
        (200, &json!(true)),
        "{enabled}"
    );
    let (_, listed) = send(&app, request(Method::GET, "/api/discovery/sources", None)).await;
    assert_eq!(source_in(&listed, "local").unwrap()["enabled"], false);
    assert_eq!(source_in(&listed, "scripted-0").unwrap()["enabled"], true);

    let (status, deleted) = send(
        &app,
        request(Method::DELETE, "/api/discovery/sources/local", None),
    )
    .await;
    assert_eq!(
        (status.as_u16(), deleted),
        (200, json!({"source_id": "local", "deleted": true}))
    );
    let (_, listed) = send(&app, request(Method::GET, "/api/discovery/sources", None)).await;
    assert!(source_in(&listed, "local").is_none(), "{listed}");
    for (method, uri, body) in [
        (Method::DELETE, "/api/discovery/sources/local", None),
        (Method::POST, "/api/discovery/sources/local/scan", None),
        (
            Method::PUT,
            "/api/discovery/sources/local/enable",
            Some(json!({"enabled": true})),
        ),
    ] {
        let response = test::call_service(&app, request(method, uri, body.as_ref())).await;
        assert_envelope(response, 404, "DiscoverySourceNotFoundError").await;
    }
}

#[actix_web::test]
async fn sources_of_the_configuration_file_are_enabled_over_the_api_but_changed_in_the_file() {
    let declared = SourceDefinition {
        source_id: "from-file".to_owned(),
        source_type: "scripted".to_owned(),
        mode: DiscoveryMode::Additive,
        enabled: true,
        config: Map::new(),
        origin: SourceOrigin::Config,
    };
    let harness = discovery_harness_with(vec![declared]).await;
    let app = test::init_service(app(harness.state)).await;
    let (_, listed) = send(&app, request(Method::GET, "/api/discovery/sources", None)).await;
    assert_eq!(
        source_in(&listed, "from-file").unwrap()["enabled"],
        true,
        "{listed}"
    );

    for (method, body) in [
        (
            Method::PUT,
            Some(json!({"source_type": "scripted", "mode": "authoritative"})),
        ),
        (Method::DELETE, None),
    ] {
        let response = test::call_service(
            &app,
            request(
                method.clone(),
                "/api/discovery/sources/from-file",
                body.as_ref(),
            ),
        )
        .await;
        let message = assert_envelope(response, 409, "ConflictError").await;
        assert!(
            message.contains("configuration file"),
            "{method}: {message}"
        );
    }

    let (status, disabled) = send(
        &app,
        request(
            Method::PUT,
            "/api/discovery/sources/from-file/enable",
            Some(&json!({"enabled": false})),
        ),
    )
    .await;
    assert_eq!(
        (status.as_u16(), &disabled["enabled"]),
        (200, &json!(false)),
        "{disabled}"
    );
    // A disabled source is not scanned, not even on request.
    let response = test::call_service(
        &app,
        request(Method::POST, "/api/discovery/sources/from-file/scan", None),
    )
    .await;
    let message = assert_envelope(response, 409, "ConflictError").await;
    assert!(message.contains("enable"), "{message}");
}

#[actix_web::test]
async fn bad_bodies_answer_422_naming_the_problem() {
    let harness = discovery_harness().await;
    let app = test::init_service(app(harness.state)).await;
    let response = test::call_service(
        &app,
        request(
            Method::POST,
            "/api/discovery/sources",
            Some(&json!({"source_id": "local", "source_type": "scripted"})),
        ),
    )
    .await;
    assert_eq!(response.status(), 201);

    let cases = [
        (
            Method::POST,
            "/api/discovery/sources",
            "{\"source_type\": ",
            "not valid JSON",
        ),
        (
            Method::POST,
            "/api/discovery/sources",
            "",
            "the request body is empty",
        ),
        (
            Method::POST,
            "/api/discovery/sources",
            "[1]",
            "must be a JSON object",
        ),
        (
            Method::POST,
            "/api/discovery/sources",
            "{}",
            "source_type: is required",
        ),
        (
            Method::POST,
            "/api/discovery/sources",
            r#"{"source_type": ["scripted"]}"#,
            "source_type: must be a string, not an array",
        ),
        (
            Method::POST,
            "/api/discovery/sources",
            r#"{"source_type": "scripted", "enabled": "yes"}"#,
            "enabled: must be true or false, not a string",
        ),
        (
            Method::POST,
            "/api/discovery/sources",
            r#"{"source_type": "scripted", "config": "dir=/x"}"#,
            "config: must be an object",
        ),
        (
            Method::POST,
            "/api/discovery/sources",
            r#"{"source_type": "scripted", "refresh": 5}"#,
            "unknown field `refresh`",
        ),
        (
            Method::POST,
            "/api/discovery/sources",
            r#"{"source_type": "scripted", "mode": "eager"}"#,
            "mode: `eager` is not a discovery mode",
        ),
        (
            Method::POST,
            "/api/discovery/sources",
            r#"{"source_type": "scripted", "config": {"socket": "/x"}}"#,
            "config.socket",
        ),
        (
            Method::POST,
            "/api/discovery/sources",
            r#"{"source_id": "bad id!", "source_type": "scripted"}"#,
            "bad id!",
        ),
        (
            Method::PUT,
            "/api/discovery/sources/local",
            r#"{"source_id": "other", "source_type": "scripted"}"#,
            "differs from the id in the path",
        ),
        (
            Method::PUT,
            "/api/discovery/sources/local",
            r#"{"source_type": "scripted", "mode": 2}"#,
            "mode: must be",
        ),
        (
            Method::PUT,
            "/api/discovery/sources/local/enable",
            "{}",
            "enabled: is required",
        ),
        (
            Method::PUT,
            "/api/discovery/sources/local/enable",
            r#"{"enabled": "false"}"#,
            "enabled: must be true or false, not a string",
        ),
        (
            Method::PUT,
            "/api/discovery/sources/local/enable",
            r#"{"enabled": 1}"#,
            "enabled: must be true or false, not a number",
        ),
        (
            Method::PUT,
            "/api/discovery/sources/local/enable",
            "{enabled: true}",
            "not valid JSON",
        ),
    ];
    for (method, uri, body, expected) in cases {
        let response = test::call_service(&app, raw(method.clone(), uri, body)).await;
        let message = assert_envelope(response, 422, "ValidationError").await;
        assert!(
            message.contains(expected),
            "{method} {uri} {body}: {message}"
        );
    }

    // Nothing refused was registered or changed.
    let (_, listed) = send(&app, request(Method::GET, "/api/discovery/sources", None)).await;
    assert_eq!(listed["sources"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(source_in(&listed, "local").unwrap()["enabled"], true);
    assert_eq!(source_in(&listed, "local").unwrap()["mode"], "additive");
}

#[actix_web::test]
async fn a_scan_fills_pending_and_quarantined_and_approval_registers_the_server() {
    let harness = discovery_harness().await;
    harness.scripts.set(
        "local",
        Ok(vec![
            candidate("alpha", subprocess("alpha-server")),
            candidate("beta", subprocess("beta-server")),
            // A subprocess without a command fails the configuration file's rules.
            candidate("broken", json!({"mode": "subprocess"})),
        ]),
    );
    let gateway = harness.gateway.clone();
    let app = test::init_service(app(harness.state)).await;
    let response = test::call_service(
        &app,
        request(
            Method::POST,
            "/api/discovery/sources",
            Some(&json!({"source_id": "local", "source_type": "scripted"})),
        ),
    )
    .await;
    assert_eq!(response.status(), 201);

    let (status, report) = send(
        &app,
        request(Method::POST, "/api/discovery/sources/local/scan", None),
    )
    .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(
        report,
        json!({"source_id": "local", "found": 3, "pending": 2, "quarantined": 1})
    );

    let (_, listed) = send(&app, request(Method::GET, "/api/discovery/sources", None)).await;
    let source = source_in(&listed, "local").unwrap();
    assert_timestamp(&source["last_scan_at"]);
    assert_eq!(source["error"], Value::Null);

    for uri in ["/api/discovery/pending", "/api/discovery/pending/"] {
        let (status, pending) = send(&app, request(Method::GET, uri, None)).await;
        assert_eq!(status, 200, "{pending}");
        assert_eq!(names_in(&pending, "pending"), ["alpha", "beta"], "{uri}");
    }
    let (_, pending) = send(&app, request(Method::GET, "/api/discovery/pending", None)).await;
    let alpha = pending["pending"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["name"] == "alpha")
        .unwrap();
    let mut keys: Vec<&String> = alpha.as_object().unwrap().keys().collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "definition",
            "discovered_at",
            "mode",
            "name",
            "replaces_approved",
            "source_id"
        ]
    );
    assert_eq!(alpha["replaces_approved"], false);
    assert_eq!(alpha["source_id"], "local");
    assert_eq!(alpha["mode"], "subprocess");
    assert_eq!(alpha["definition"], subprocess("alpha-server"));
    assert_timestamp(&alpha["discovered_at"]);

    let (status, quarantined) = send(
        &app,
        request(Method::GET, "/api/discovery/quarantined", None),
    )
    .await;
    assert_eq!(status, 200, "{quarantined}");
    assert_eq!(names_in(&quarantined, "quarantined"), ["broken"]);
    let broken = &quarantined["quarantined"][0];
    assert_eq!(broken["source_id"], "local");
    assert!(
        broken["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("command")),
        "the reason names the missing field: {broken}"
    );
    assert_timestamp(&broken["quarantined_at"]);
    let mut keys: Vec<&String> = broken.as_object().unwrap().keys().collect();
    keys.sort_unstable();
    assert_eq!(keys, ["name", "quarantined_at", "reason", "source_id"]);

    let (status, approved) = send(
        &app,
        request(Method::POST, "/api/discovery/approve/alpha", None),
    )
    .await;
    assert_eq!(status, 200, "{approved}");
    assert_eq!(
        approved,
        json!({"name": "alpha", "source_id": "local", "mcp_server_id": "alpha",
               "approved": true, "replaced": false})
    );
    let alpha_id = ServerId::parse("alpha").unwrap();
    assert!(
        gateway.servers().snapshot(&alpha_id).is_ok(),
        "the approved server is registered in the gateway"
    );
    let (status, details) = send(&app, request(Method::GET, "/api/mcp_servers/alpha", None)).await;
    assert_eq!(status, 200, "{details}");

    let (status, rejected) = send(
        &app,
        request(Method::POST, "/api/discovery/reject/beta", None),
    )
    .await;
    assert_eq!(status, 200, "{rejected}");
    assert_eq!(
        rejected,
        json!({"name": "beta", "source_id": "local", "rejected": true})
    );
    let beta_id = ServerId::parse("beta").unwrap();
    assert!(gateway.servers().snapshot(&beta_id).is_err());

    let (_, pending) = send(&app, request(Method::GET, "/api/discovery/pending", None)).await;
    assert_eq!(pending, json!({"pending": []}));

    for uri in [
        "/api/discovery/approve/beta",
        "/api/discovery/reject/alpha",
        "/api/discovery/approve/nobody",
        "/api/discovery/reject/nobody",
    ] {
        let response = test::call_service(&app, request(Method::POST, uri, None)).await;
        let message = assert_envelope(response, 404, "DiscoveredServerNotFoundError").await;
        assert!(
            message.contains("/api/discovery/pending"),
            "{uri}: {message}"
        );
    }
}

#[actix_web::test]
async fn a_source_that_cannot_be_read_answers_503_and_lists_its_error() {
    let harness = discovery_harness().await;
    harness.scripts.set(
        "down",
        Err("the engine at /tmp/nowhere.sock refused the connection".to_owned()),
    );
    harness.scripts.set(
        "up",
        Ok(vec![candidate("gamma", subprocess("gamma-server"))]),
    );
    let app = test::init_service(app(harness.state)).await;
    for id in ["down", "up"] {
        let response = test::call_service(
            &app,
            request(
                Method::POST,
                "/api/discovery/sources",
                Some(&json!({"source_id": id, "source_type": "scripted"})),
            ),
        )
        .await;
        assert_eq!(response.status(), 201);
    }
    let (status, report) = send(
        &app,
        request(Method::POST, "/api/discovery/sources/up/scan", None),
    )
    .await;
    assert_eq!(status, 200, "{report}");

    let response = test::call_service(
        &app,
        request(Method::POST, "/api/discovery/sources/down/scan", None),
    )
    .await;
    let message = assert_envelope(response, 503, "DiscoverySourceUnavailableError").await;
    assert!(message.contains("refused the connection"), "{message}");

    let (status, listed) = send(&app, request(Method::GET, "/api/discovery/sources", None)).await;
    assert_eq!(status, 200);
    let down = source_in(&listed, "down").unwrap();
    assert!(
        down["error"]
            .as_str()
            .is_some_and(|error| error.contains("refused the connection")),
        "{down}"
    );
    assert_eq!(source_in(&listed, "up").unwrap()["error"], Value::Null);

    let (status, pending) = send(&app, request(Method::GET, "/api/discovery/pending", None)).await;
    assert_eq!(status, 200, "{pending}");
    assert_eq!(names_in(&pending, "pending"), ["gamma"]);
    let (status, _) = send(
        &app,
        request(Method::GET, "/api/discovery/quarantined", None),
    )
    .await;
    assert_eq!(status, 200);
}

#[actix_web::test]
async fn pending_definitions_do_not_show_secrets() {
    let harness = discovery_harness().await;
    harness.scripts.set(
        "local",
        Ok(vec![candidate(
            "remote-api",
            json!({"mode": "remote", "endpoint": "https://example.test/mcp",
                   "headers": {"Authorization": "Bearer top-secret"}}),
        )]),
    );
    let app = test::init_service(app(harness.state)).await;
    let response = test::call_service(
        &app,
        request(
            Method::POST,
            "/api/discovery/sources",
            Some(&json!({"source_id": "local", "source_type": "scripted"})),
        ),
    )
    .await;
    assert_eq!(response.status(), 201);
    let (status, _) = send(
        &app,
        request(Method::POST, "/api/discovery/sources/local/scan", None),
    )
    .await;
    assert_eq!(status, 200);
    let (_, pending) = send(&app, request(Method::GET, "/api/discovery/pending", None)).await;
    let entry = &pending["pending"][0];
    assert_eq!(entry["name"], "remote-api", "{pending}");
    assert_eq!(entry["definition"]["headers"]["Authorization"], "***");
    assert_eq!(entry["definition"]["endpoint"], "https://example.test/mcp");
    assert!(!pending.to_string().contains("top-secret"), "{pending}");
}

#[actix_web::test]
async fn the_openapi_document_describes_every_discovery_route() {
    let app = test::init_service(app(harness().state)).await;
    let (status, document) = send(&app, request(Method::GET, "/api/openapi.json", None)).await;
    assert_eq!(status, 200);
    let operations = [
        ("/api/discovery/sources", "get", "200"),
        ("/api/discovery/sources", "post", "201"),
        ("/api/discovery/sources/{id}", "put", "200"),
        ("/api/discovery/sources/{id}", "delete", "200"),
        ("/api/discovery/sources/{id}/scan", "post", "200"),
        ("/api/discovery/sources/{id}/enable", "put", "200"),
        ("/api/discovery/pending", "get", "200"),
        ("/api/discovery/quarantined", "get", "200"),
        ("/api/discovery/approve/{name}", "post", "200"),
        ("/api/discovery/reject/{name}", "post", "200"),
    ];
    for (path, method, success) in operations {
        let operation = &document["paths"][path][method];
        assert!(operation.is_object(), "{method} {path} is documented");
        assert_eq!(operation["tags"], json!(["discovery"]), "{method} {path}");
        let responses = &operation["responses"];
        for status in [success, "404", "429"] {
            assert!(
                responses[status].is_object(),
                "{method} {path} documents {status}"
            );
        }
        assert!(
            responses[success]["headers"]["X-RateLimit-Remaining"].is_object(),
            "{method} {path}"
        );
        assert_eq!(
            operation["security"],
            json!([{"api_key": []}, {"bearer": []}]),
            "{method} {path}"
        );
    }
    for (path, method) in [
        ("/api/discovery/sources", "post"),
        ("/api/discovery/sources/{id}", "put"),
        ("/api/discovery/sources/{id}/enable", "put"),
    ] {
        let operation = &document["paths"][path][method];
        assert!(operation["requestBody"].is_object(), "{method} {path}");
        assert!(operation["responses"]["422"].is_object(), "{method} {path}");
    }
    assert!(
        document["paths"]["/api/discovery/sources/{id}/scan"]["post"]["responses"]["503"]
            .is_object()
    );
    assert!(
        document["paths"]["/api/discovery/approve/{name}"]["post"]["responses"]["409"].is_object()
    );
    let schemas = &document["components"]["schemas"];
    assert!(schemas["DiscoverySource"]["properties"]["last_scan_at"].is_object());
    assert!(schemas["PendingDiscovery"]["properties"]["discovered_at"].is_object());
}

/// Settings without secrets come back exactly as sent, numbers and non-ASCII text included.
#[actix_web::test]
async fn settings_come_back_as_sent() {
    let harness = discovery_harness().await;
    let app = test::init_service(app(harness.state)).await;
    let mut config = Map::new();
    config.insert("dir".to_owned(), json!("/srv/a b/ü"));
    config.insert("removal_grace_s".to_owned(), json!(90));
    let (status, created) = send(
        &app,
        request(
            Method::POST,
            "/api/discovery/sources",
            Some(&json!({"source_type": "scripted", "mode": "authoritative",
                         "config": Value::Object(config.clone())})),
        ),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["config"], Value::Object(config));
}

#[actix_web::test]
async fn approving_a_server_the_tool_names_cannot_take_is_refused_naming_why() {
    let names = mcpgw_config::ToolNames {
        separator: "-".to_owned(),
        prefix: mcpgw_config::ToolPrefix::Custom,
        prefixes: [("github".to_owned(), "gh".to_owned())].into(),
        ..mcpgw_config::ToolNames::default()
    };
    let DiscoveryHarness {
        state,
        gateway,
        scripts,
    } = discovery_harness_named(Vec::new(), names).await;
    let app = test::init_service(app(state)).await;
    let (status, _) = send(
        &app,
        request(
            Method::POST,
            "/api/discovery/sources",
            Some(&json!({"source_id": "local", "source_type": "scripted"})),
        ),
    )
    .await;
    assert_eq!(status, 201);
    // Bad input: a candidate whose id holds the separator, and one whose id is the prefix
    // written for `github`.
    scripts.set(
        "local",
        Ok(vec![
            candidate("my-tools", subprocess("a")),
            candidate("gh", subprocess("b")),
            candidate("plain", subprocess("c")),
        ]),
    );
    let (status, report) = send(
        &app,
        request(Method::POST, "/api/discovery/sources/local/scan", None),
    )
    .await;
    assert_eq!(status, 200, "{report}");
    let message = assert_envelope(
        test::call_service(
            &app,
            request(Method::POST, "/api/discovery/approve/my-tools", None),
        )
        .await,
        422,
        "ValidationError",
    )
    .await;
    assert!(message.contains("id `my-tools` contains `-`"), "{message}");
    let message = assert_envelope(
        test::call_service(
            &app,
            request(Method::POST, "/api/discovery/approve/gh", None),
        )
        .await,
        409,
        "ConflictError",
    )
    .await;
    assert!(
        message.contains("`gh`") && message.contains("`github`"),
        "{message}"
    );
    for refused in ["my-tools", "gh"] {
        assert!(
            gateway
                .servers()
                .snapshot(&ServerId::parse(refused).unwrap())
                .is_err(),
            "{refused} is not registered"
        );
    }
    let (status, approved) = send(
        &app,
        request(Method::POST, "/api/discovery/approve/plain", None),
    )
    .await;
    assert_eq!(status, 200, "{approved}");
}
