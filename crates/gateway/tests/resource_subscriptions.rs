//! Resource subscriptions through the catalogue, on real fixture server processes: each
//! caller's subscription brings the owner's updates, and the owner is told to stop only when
//! the last subscriber of a resource is gone.

use std::sync::Arc;
use std::time::Duration;

use mcpgw_config::ToolNames;
use mcpgw_core::{
    Caller, EventSink, FrontendErrorKind, ManagerSettings, McpFrontend, ServerId, ServerManager,
    ServerSpec,
};
use mcpgw_fixtures::fixture::fixture_server_binary;
use mcpgw_gateway::TokioSpawner;
use mcpgw_gateway::{EventBus, StdioLauncher, ToolCatalog};
use mcpgw_mcp_rmcp::RmcpStdioConnector;
use mcpgw_runner_process::{ProcessRunner, ProcessRunnerSettings};

const PATIENCE: Duration = Duration::from_secs(10);

async fn catalog_with_fixture() -> (ServerManager, Arc<ToolCatalog>) {
    let launcher = StdioLauncher::new(
        Arc::new(ProcessRunner::new(ProcessRunnerSettings::default())),
        Arc::new(RmcpStdioConnector::default()),
        Duration::from_secs(2),
    );
    let bus = Arc::new(EventBus::new(64));
    let manager = ServerManager::new(
        Arc::new(launcher),
        Arc::new(mcpgw_gateway::TokioClock::default()),
        bus.clone() as Arc<dyn EventSink>,
        Arc::new(TokioSpawner::new(tokio::runtime::Handle::current())),
        None,
        ManagerSettings::default(),
    );
    let catalog = ToolCatalog::new(manager.clone(), ToolNames::prefixed());
    bus.add_observer(catalog.observer());
    let binary = fixture_server_binary().display().to_string();
    manager
        .register(ServerSpec::subprocess(
            ServerId::parse("fx").unwrap(),
            vec![binary],
        ))
        .await
        .unwrap();
    (manager, catalog)
}

async fn unsubscribed_lines(manager: &ServerManager) -> usize {
    manager
        .logs(&ServerId::parse("fx").unwrap(), 100)
        .unwrap()
        .iter()
        .filter(|line| line.line == "fixture unsubscribed fixture://readme")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_share_the_owners_subscription_until_the_last_leaves() {
    let (manager, catalog) = catalog_with_fixture().await;
    let caller = Caller::default();
    // The owner is found by listing (which starts nothing): start it first.
    manager
        .start(&ServerId::parse("fx").unwrap())
        .await
        .unwrap();
    let mut first = catalog
        .subscribe_resource(&caller, "fixture://readme")
        .await
        .unwrap();
    let mut second = catalog
        .subscribe_resource(&caller, "fixture://readme")
        .await
        .unwrap();
    // The fixture announces the resource once after each subscription.
    for subscription in [&mut first, &mut second] {
        let updated = tokio::time::timeout(PATIENCE, subscription.updated())
            .await
            .expect("an update arrived in time");
        assert!(updated);
    }
    drop(first);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        unsubscribed_lines(&manager).await,
        0,
        "the owner was told to stop while a subscriber remained"
    );
    drop(second);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while unsubscribed_lines(&manager).await == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the owner was not told to stop once the last subscriber left"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Bad input: a resource nobody serves.
    let refused = catalog
        .subscribe_resource(&caller, "nowhere://thing")
        .await
        .unwrap_err();
    assert_eq!(refused.kind, FrontendErrorKind::UnknownName);
    assert!(
        refused.message.contains("nowhere://thing"),
        "{}",
        refused.message
    );
    manager.shutdown().await;
}
