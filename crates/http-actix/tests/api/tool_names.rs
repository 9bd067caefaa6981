//! Servers and groups created over the API must fit the tool names in effect: no id with the
//! separator (422), no prefix that another server or group has (409), each refusal naming both.

use std::collections::BTreeMap;
use std::sync::Arc;

use actix_web::test::{self, TestRequest};
use mcpgw_config::{ToolNames, ToolPrefix};
use mcpgw_core::{ManagerSettings, ServerId, ServerManager};
use mcpgw_gateway::{EventBus, Gateway, GatewayInfo, GroupService, TokioClock, TokioSpawner};
use mcpgw_http_actix::{ApiState, HttpSettings, install_metrics_recorder};
use mcpgw_testkit::fakes::FakeLauncher;
use serde_json::{Value, json};

use crate::support::{TEST_VERSION, assert_envelope, send};

/// A gateway with groups whose tools are named as `names` says.
fn named_gateway(names: ToolNames) -> (Gateway, ApiState) {
    let events = Arc::new(EventBus::new(1024));
    let manager = ServerManager::new(
        Arc::new(FakeLauncher::new()),
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
    .with_groups(groups)
    .with_tool_names(names);
    gateway.mark_startup_complete();
    let metrics = install_metrics_recorder().expect("the metrics recorder installs");
    let state = ApiState::new(gateway.clone(), metrics, HttpSettings::default());
    (gateway, state)
}

fn github_as_gh() -> ToolNames {
    ToolNames {
        prefix: ToolPrefix::Custom,
        prefixes: BTreeMap::from([("github".to_owned(), "gh".to_owned())]),
        ..ToolNames::default()
    }
}

fn server(id: &str) -> Value {
    json!({"mcp_server_id": id, "mode": "subprocess", "command": ["server"]})
}

fn create_server(id: &str) -> actix_http::Request {
    TestRequest::post()
        .uri("/api/mcp_servers")
        .set_json(server(id))
        .to_request()
}

fn create_group(id: &str) -> actix_http::Request {
    TestRequest::post()
        .uri("/api/groups")
        .set_json(json!({"group_id": id, "members": []}))
        .to_request()
}

fn exists(gateway: &Gateway, id: &str) -> bool {
    gateway
        .servers()
        .snapshot(&ServerId::parse(id).unwrap())
        .is_ok()
}

#[actix_web::test]
async fn an_id_that_is_a_custom_prefix_of_another_answers_409_naming_both() {
    let (gateway, state) = named_gateway(github_as_gh());
    let app = test::init_service(mcpgw_http_actix::app(state)).await;
    // Bad input: `gh`, the prefix written for `github`, even before `github` exists.
    let message = assert_envelope(
        test::call_service(&app, create_server("gh")).await,
        409,
        "McpServerAlreadyExistsError",
    )
    .await;
    assert!(
        message.contains("`gh`") && message.contains("`github`"),
        "{message}"
    );
    assert!(!exists(&gateway, "gh"));
    // Bad input: a group of that id.
    let message = assert_envelope(
        test::call_service(&app, create_group("gh")).await,
        409,
        "GroupAlreadyExistsError",
    )
    .await;
    assert!(
        message.contains("`gh`") && message.contains("`github`"),
        "{message}"
    );
    let (status, body) = send(&app, create_server("github")).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = send(&app, create_server("math")).await;
    assert_eq!(status, 201, "{body}");
}

#[actix_web::test]
async fn an_owner_whose_custom_prefix_is_an_existing_id_answers_409_naming_both() {
    let (gateway, state) = named_gateway(github_as_gh());
    // `gh` came in some way that was not checked (here: straight into the registry).
    gateway
        .servers()
        .register(mcpgw_core::ServerSpec::subprocess(
            ServerId::parse("gh").unwrap(),
            vec!["server".into()],
        ))
        .await
        .unwrap();
    let app = test::init_service(mcpgw_http_actix::app(state)).await;
    // Bad input: `github`, whose tools would be listed as `gh__...`, which `gh`'s are.
    let message = assert_envelope(
        test::call_service(&app, create_server("github")).await,
        409,
        "McpServerAlreadyExistsError",
    )
    .await;
    assert!(
        message.contains("`github`") && message.contains("`gh`") && message.contains("prefix"),
        "{message}"
    );
    assert!(!exists(&gateway, "github"));
}

#[actix_web::test]
async fn an_id_with_the_separator_answers_422() {
    let (gateway, state) = named_gateway(ToolNames {
        separator: "-".to_owned(),
        ..ToolNames::default()
    });
    let app = test::init_service(mcpgw_http_actix::app(state)).await;
    // Bad input: ids that hold the separator `-`.
    let message = assert_envelope(
        test::call_service(&app, create_server("my-server")).await,
        422,
        "ValidationError",
    )
    .await;
    assert!(
        message.starts_with("mcp_server_id: id `my-server` contains `-`"),
        "{message}"
    );
    assert!(!exists(&gateway, "my-server"));
    let message = assert_envelope(
        test::call_service(&app, create_group("my-pool")).await,
        422,
        "ValidationError",
    )
    .await;
    assert!(
        message.starts_with("group_id: id `my-pool` contains `-`"),
        "{message}"
    );
    let (status, body) = send(&app, create_server("my_server")).await;
    assert_eq!(status, 201, "{body}");
}

#[actix_web::test]
async fn the_default_names_refuse_nothing_new() {
    let (_, state) = named_gateway(ToolNames::default());
    let app = test::init_service(mcpgw_http_actix::app(state)).await;
    for id in ["gh", "github", "my-server", "a_b"] {
        let (status, body) = send(&app, create_server(id)).await;
        assert_eq!(status, 201, "{id}: {body}");
    }
}
