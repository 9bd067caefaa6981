//! `GatewayBuilder` as an embedder uses it: the whole gateway with some ports replaced, its
//! HTTP state mounted in a test application, and one shutdown.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::test as actix_test;
use mcpgw_core::{ServerRepository, ServerSpec};
use mcpgw_server::gateway::Environment;
use mcpgw_server::{GatewayBuilder, OpeningDataDir, RunningGateway};
use mcpgw_testkit::auth_store::InMemoryAuthStore;
use mcpgw_testkit::discovery_fakes::InMemoryDiscoveryStore;
use mcpgw_testkit::endpoint_repository_suite::InMemoryEndpointRepository;
use mcpgw_testkit::event_log::InMemoryEventLog;
use mcpgw_testkit::group_repository_suite::InMemoryGroupRepository;
use mcpgw_testkit::repository_suite::InMemoryServerRepository;
use mcpgw_testkit::tool_list_store_suite::InMemoryToolListStore;
use mcpgw_testkit::tool_pin_store_suite::InMemoryToolPinStore;

fn environment(pairs: &[(&str, &str)]) -> Environment {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect();
    Arc::new(move |name| map.get(name).cloned())
}

/// A builder whose every store is in memory, with rate limits off.
fn in_memory(data_dir: &Path, servers: Arc<InMemoryServerRepository>) -> GatewayBuilder {
    GatewayBuilder::new(Default::default())
        .data_dir(data_dir)
        .environment(environment(&[("MCP_RATE_LIMIT_RPS", "0")]))
        .with_server_repository(servers)
        .with_group_repository(Arc::new(InMemoryGroupRepository::default()))
        .with_auth_store(Arc::new(InMemoryAuthStore::new()))
        .with_discovery_store(Arc::new(InMemoryDiscoveryStore::new()))
        .with_tool_list_store(Arc::new(InMemoryToolListStore::new()))
        .with_tool_pin_store(Arc::new(InMemoryToolPinStore::new()))
        .with_endpoint_repository(Arc::new(InMemoryEndpointRepository::new()))
        .with_event_log(Arc::new(InMemoryEventLog::new()))
}

/// `POST /api/mcp_servers` with `body` through the gateway's whole HTTP stack.
async fn create_server(running: &RunningGateway, body: serde_json::Value) -> StatusCode {
    let state = running
        .http_state("127.0.0.1:8000".parse().unwrap())
        .unwrap();
    let app = actix_test::init_service(mcpgw_server::http::app(state)).await;
    let request = actix_test::TestRequest::post()
        .uri("/api/mcp_servers")
        .insert_header(("Host", "127.0.0.1:8000"))
        .set_json(body)
        .to_request();
    actix_test::call_service(&app, request).await.status()
}

#[actix_web::test]
async fn with_every_store_replaced_the_gateway_keeps_its_servers_there_and_makes_no_database() {
    let data_dir = tempfile::tempdir().unwrap();
    let servers = Arc::new(InMemoryServerRepository::new());
    let running = in_memory(data_dir.path(), servers.clone())
        .build()
        .await
        .unwrap();
    let status = create_server(
        &running,
        serde_json::json!({"mcp_server_id": "kept", "mode": "subprocess", "command": ["true"]}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    running.shutdown().await;

    let saved: Vec<String> = servers
        .load_all()
        .await
        .unwrap()
        .iter()
        .map(|spec: &ServerSpec| spec.id.to_string())
        .collect();
    assert_eq!(saved, ["kept"]);
    for file in ["mcpgw.db", "events.db"] {
        assert!(
            !data_dir.path().join(file).exists(),
            "{file} was made although its port was replaced"
        );
    }

    // A second gateway on the same repository finds the server again.
    let again = in_memory(data_dir.path(), servers).build().await.unwrap();
    let listed: Vec<String> = again
        .gateway()
        .servers()
        .list(None)
        .iter()
        .map(|server| server.spec.id.to_string())
        .collect();
    assert_eq!(listed, ["kept"]);
    again.shutdown().await;
}

#[actix_web::test]
async fn databases_opened_ahead_serve_the_gateway_and_keep_its_state() {
    let parent = tempfile::tempdir().unwrap();
    let data_dir = parent.path().join("not-yet");
    let build = || {
        GatewayBuilder::new(Default::default())
            .environment(environment(&[]))
            .opening_data_dir(OpeningDataDir::start(&data_dir).unwrap())
            .build()
    };
    let running = build().await.unwrap();
    let status = create_server(
        &running,
        serde_json::json!({"mcp_server_id": "durable", "mode": "subprocess", "command": ["true"]}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let log = running.gateway().event_log().unwrap().clone();
    log.flush().await.unwrap();
    let last_event = log.last_event_id().await.unwrap();
    assert!(last_event >= 1, "the registration was not logged");
    running.shutdown().await;
    for file in ["mcpgw.db", "events.db", "instance_id"] {
        assert!(data_dir.join(file).is_file(), "{file} is missing");
    }
    // The next start opens the same files ahead, and finds the server and its events there.
    let again = build().await.unwrap();
    let id = mcpgw_core::ServerId::parse("durable").unwrap();
    assert!(again.gateway().servers().snapshot(&id).is_ok());
    let log = again.gateway().event_log().unwrap();
    assert!(log.last_event_id().await.unwrap() >= last_event);
    again.shutdown().await;
}

#[test]
fn an_opening_given_up_removes_the_directory_it_created_and_nothing_it_found() {
    let parent = tempfile::tempdir().unwrap();
    // A directory this start created (a first start whose configuration was refused) goes.
    let created = parent.path().join("first-start");
    let opening = OpeningDataDir::start(&created).unwrap();
    assert!(created.is_dir());
    drop(opening);
    assert!(
        !created.exists(),
        "the directory this start created is left"
    );

    // One that existed stays, with what it held.
    let found = parent.path().join("earlier");
    std::fs::create_dir(&found).unwrap();
    std::fs::write(found.join("keep.txt"), "earlier data").unwrap();
    drop(OpeningDataDir::start(&found).unwrap());
    assert_eq!(
        std::fs::read_to_string(found.join("keep.txt")).unwrap(),
        "earlier data"
    );

    // A path that cannot be a directory is an error that names it.
    let file = parent.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let error = OpeningDataDir::start(&file).unwrap_err().to_string();
    assert!(error.contains("a-file"), "{error}");
}

#[actix_web::test]
async fn by_default_the_state_lives_in_sqlite_under_the_data_directory() {
    let data_dir = tempfile::tempdir().unwrap();
    let build = || {
        GatewayBuilder::new(Default::default())
            .data_dir(data_dir.path())
            .environment(environment(&[]))
            .build()
    };
    let running = build().await.unwrap();
    let status = create_server(
        &running,
        serde_json::json!({"mcp_server_id": "durable", "mode": "subprocess", "command": ["true"]}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    running.shutdown().await;
    for file in ["mcpgw.db", "events.db", "instance_id"] {
        assert!(data_dir.path().join(file).is_file(), "{file} is missing");
    }
    let again = build().await.unwrap();
    assert!(
        again
            .gateway()
            .servers()
            .snapshot(&mcpgw_core::ServerId::parse("durable").unwrap())
            .is_ok()
    );
    again.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_auth_on_the_keys_are_read_again_through_the_port_and_no_longer_after_shutdown() {
    let data_dir = tempfile::tempdir().unwrap();
    let mut config = mcpgw_server::config::GatewayConfig::default();
    config.auth.enabled = true;
    let store = Arc::new(InMemoryAuthStore::new());
    let running = GatewayBuilder::new(config)
        .data_dir(data_dir.path())
        .environment(environment(&[]))
        .with_auth_store(store.clone())
        .build()
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while store.refreshes() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the gateway never asked its auth store to read the keys again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    running.shutdown().await;
    let after_shutdown = store.refreshes();
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        store.refreshes(),
        after_shutdown,
        "a background task outlived the shutdown"
    );
}

#[tokio::test]
async fn a_bad_environment_value_stops_the_build_with_its_name() {
    let data_dir = tempfile::tempdir().unwrap();
    // Bad input: a rate that is not a number.
    let error = GatewayBuilder::new(Default::default())
        .data_dir(data_dir.path())
        .environment(environment(&[("MCP_RATE_LIMIT_RPS", "lots")]))
        .build()
        .await
        .unwrap_err();
    assert!(error.to_string().contains("MCP_RATE_LIMIT_RPS"), "{error}");
    assert!(error.to_string().contains("lots"), "{error}");
}

/// The configuration file of the discovery test: one source of the testkit's `memory` type.
const MEMORY_DISCOVERY: &str = "\
discovery:
  refresh_interval_s: 3600
  sources:
    - {id: shelf, type: memory, mode: additive, config: {place: shelf}}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discovery_source_type_of_ones_own_works_from_the_file_through_scans_and_reloads() {
    use mcpgw_testkit::discovery_source_suite::{
        InMemoryPlace, InMemorySourceFactory, sample_server_definition,
    };

    let data_dir = tempfile::tempdir().unwrap();
    let file = data_dir.path().join("gateway.yaml");
    std::fs::write(&file, MEMORY_DISCOVERY).unwrap();
    let environment = environment(&[]);

    // Bad input for the bundled gateway: a type it cannot build, named with the nearest one.
    let refused = mcpgw_server::load_config_file(
        &file,
        &environment,
        &mcpgw_server::default_discovery_sources(),
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(
        refused.contains("unknown source type `memory`"),
        "{refused}"
    );
    assert!(refused.contains("gateway.yaml:4"), "{refused}");

    let place = Arc::new(InMemoryPlace::new());
    let factory = InMemorySourceFactory::new();
    factory.add_place("shelf", Arc::clone(&place));
    let factory = Arc::new(factory);
    // The file is read with the factory's types once they are registered.
    let running = GatewayBuilder::new(Default::default())
        .data_dir(data_dir.path().join("data"))
        .environment(environment)
        .with_discovery_sources(factory)
        .read_config_file(&file)
        .unwrap()
        .build()
        .await
        .unwrap();

    let discovery = running
        .gateway()
        .discovery()
        .expect("discovery is on")
        .clone();
    place.put_server("notes", sample_server_definition("notes"));
    let report = discovery.scan("shelf").await.unwrap();
    assert_eq!((report.found, report.pending), (1, 1));

    // A reload reads the file again with the same source types.
    let config = running
        .gateway()
        .config()
        .expect("a file was given")
        .clone();
    config
        .reload(mcpgw_server::gateway::ReloadTrigger::Api)
        .await
        .expect("the file still names a type this gateway builds");
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_build_can_run_as_a_spawned_task() {
    let data_dir = tempfile::tempdir().unwrap();
    let build = GatewayBuilder::new(Default::default())
        .data_dir(data_dir.path())
        .environment(environment(&[]))
        .build();
    // `tokio::spawn` takes only futures that can move between threads.
    let running = tokio::spawn(build).await.unwrap().unwrap();
    assert!(running.gateway().servers().list(None).is_empty());
    running.shutdown().await;
    assert!(data_dir.path().join("mcpgw.db").is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_running_text_is_the_one_that_was_parsed_not_a_later_read() {
    let data_dir = tempfile::tempdir().unwrap();
    let file = data_dir.path().join("gateway.yaml");
    std::fs::write(
        &file,
        "mcp_servers:\n  a: {mode: subprocess, command: [a-server]}\n",
    )
    .unwrap();
    let builder = GatewayBuilder::new(Default::default())
        .data_dir(data_dir.path().join("data"))
        .environment(environment(&[]))
        .read_config_file(&file)
        .unwrap();
    // The file changes between reading and building: the running configuration is still the
    // first text, so the difference shows, and a reload would apply it.
    std::fs::write(
        &file,
        "mcp_servers:\n  b: {mode: subprocess, command: [b-server]}\n",
    )
    .unwrap();
    let running = builder.build().await.unwrap();
    let config = running
        .gateway()
        .config()
        .expect("a file was given")
        .clone();
    let diff = config.diff().await.unwrap();
    assert!(
        diff.unified.contains("-  a: {mode: subprocess"),
        "{}",
        diff.unified
    );
    assert!(
        diff.unified.contains("+  b: {mode: subprocess"),
        "{}",
        diff.unified
    );
    running.shutdown().await;
}
