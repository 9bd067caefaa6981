//! The downstream MCP server against rmcp's own client over an in-memory byte stream: the same
//! code path as stdio, in both protocol eras.

mod downstream_support;

use std::sync::Arc;
use std::time::Instant;

use downstream_support::{DEADLINE, FakeFrontend, TOOL_NAMES};
use mcpgw_mcp_rmcp::{
    CANCELLED_ERROR_CODE, DownstreamError, GatewayMcpServer, McpServerSettings,
    RATE_LIMITED_ERROR_CODE, TIMEOUT_ERROR_CODE, serve_connection,
};
use rmcp::ClientHandler;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientConfig, ClientRequest,
    ErrorCode, GetPromptRequestParams, Implementation, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, ReadResourceRequestParams, ResourceContents,
    ResultType, ServerNotification, ServerResult, SubscriptionFilter,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, PeerRequestOptions, RoleClient,
    RunningService, ServiceError,
};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// A client that reports the server's notifications to the test.
struct RecordingClient {
    progress: mpsc::UnboundedSender<ProgressNotificationParam>,
    tool_list_changed: mpsc::UnboundedSender<()>,
    resource_updated: mpsc::UnboundedSender<String>,
}

impl ClientHandler for RecordingClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("downstream-test", "0"),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.progress.send(params);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.tool_list_changed.send(());
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.resource_updated.send(params.uri);
    }
}

struct Connected {
    frontend: Arc<FakeFrontend>,
    client: RunningService<RoleClient, RecordingClient>,
    progress: mpsc::UnboundedReceiver<ProgressNotificationParam>,
    tool_list_changed: mpsc::UnboundedReceiver<()>,
    resource_updated: mpsc::UnboundedReceiver<String>,
    server: JoinHandle<Result<(), DownstreamError>>,
}

async fn connect(lifecycle: ClientLifecycleMode) -> Connected {
    let frontend = FakeFrontend::new();
    let server = GatewayMcpServer::new(
        frontend.clone(),
        McpServerSettings::default().with_page_size(2),
    );
    let (client_side, server_side) = tokio::io::duplex(64 * 1024);
    let (server_reader, server_writer) = tokio::io::split(server_side);
    let server = tokio::spawn(serve_connection(server, server_reader, server_writer));
    let (progress_sender, progress) = mpsc::unbounded_channel();
    let (changed_sender, tool_list_changed) = mpsc::unbounded_channel();
    let (updated_sender, resource_updated) = mpsc::unbounded_channel();
    let client = RecordingClient {
        progress: progress_sender,
        tool_list_changed: changed_sender,
        resource_updated: updated_sender,
    };
    let client = tokio::time::timeout(
        DEADLINE,
        client.serve_with_lifecycle(tokio::io::split(client_side), lifecycle),
    )
    .await
    .expect("the handshake timed out")
    .expect("the handshake failed");
    Connected {
        frontend,
        client,
        progress,
        tool_list_changed,
        resource_updated,
        server,
    }
}

async fn connect_legacy() -> Connected {
    connect(ClientLifecycleMode::Initialize).await
}

async fn connect_2026() -> Connected {
    connect(ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    })
    .await
}

fn call(name: &str) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned())
}

async fn call_error(connected: &Connected, name: &str) -> rmcp::ErrorData {
    match connected.client.call_tool(call(name)).await {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("`{name}` should fail with a JSON-RPC error, got {other:?}"),
    }
}

async fn next<T>(receiver: &mut mpsc::UnboundedReceiver<T>, what: &str) -> T {
    tokio::time::timeout(DEADLINE, receiver.recv())
        .await
        .unwrap_or_else(|_| panic!("no {what} arrived in time"))
        .unwrap_or_else(|| panic!("the {what} channel closed"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_introduces_itself_as_mcpgw_with_list_changed_tools() {
    let connected = connect_legacy().await;
    let info = connected.client.peer_info().expect("server info");
    let server_info = info.server_info.as_ref().expect("serverInfo");
    assert_eq!(server_info.name, "mcpgw");
    assert_eq!(server_info.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(info.protocol_version, ProtocolVersion::V_2025_11_25);
    let capabilities = serde_json::to_value(&info.capabilities).unwrap();
    assert_eq!(capabilities["tools"], json!({"listChanged": true}));
    assert!(capabilities.get("prompts").is_some(), "{capabilities}");
    assert!(capabilities.get("resources").is_some(), "{capabilities}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_listed_in_pages_of_the_configured_size() {
    let connected = connect_legacy().await;
    let first = connected.client.list_tools(None).await.unwrap();
    let names: Vec<_> = first.tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(names, ["srv__echo", "srv__whoami"]);
    assert_eq!(first.next_cursor.as_deref(), Some("2"));
    assert_eq!(
        first.tools[0].description.as_deref(),
        Some("the srv__echo tool")
    );
    assert_eq!(
        serde_json::Value::Object((*first.tools[0].input_schema).clone()),
        json!({"type": "object", "properties": {"text": {"type": "string"}}})
    );

    let all = connected.client.list_all_tools().await.unwrap();
    let names: Vec<_> = all.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(names, TOOL_NAMES);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_the_server_did_not_give_is_invalid_params() {
    let connected = connect_legacy().await;
    let request = PaginatedRequestParams::default().with_cursor(Some("not-a-cursor".into()));
    match connected.client.list_tools(Some(request)).await {
        Err(ServiceError::McpError(error)) => {
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
            assert!(error.message.contains("not-a-cursor"), "{}", error.message);
        }
        other => panic!("expected invalid params, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_pass_through_including_tool_errors() {
    let connected = connect_legacy().await;
    let arguments = json!({"text": "hi", "n": 3});
    let mut request = call("srv__echo");
    request.arguments = arguments.as_object().cloned();
    let result = connected.client.call_tool(request).await.unwrap();
    assert_eq!(result.structured_content, Some(arguments.clone()));
    assert_eq!(
        result.content[0].as_text().map(|text| text.text.as_str()),
        Some(arguments.to_string().as_str())
    );
    assert_ne!(result.is_error, Some(true));

    let result = connected
        .client
        .call_tool(call("srv__tool_error"))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    assert_eq!(
        result.content[0].as_text().map(|text| text.text.as_str()),
        Some("it broke")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn front_end_failures_become_the_documented_json_rpc_errors() {
    let connected = connect_legacy().await;
    let expectations: [(&str, i32, &str); 9] = [
        ("srv__not_listed", -32602, "unknown tool: srv__not_listed"),
        (
            "srv__unknown_name",
            -32602,
            "unknown tool: srv__unknown_name",
        ),
        ("srv__invalid_arguments", -32602, "must be a string"),
        ("srv__unavailable", -32603, "could not be started"),
        (
            "srv__timeout",
            TIMEOUT_ERROR_CODE,
            "did not answer within 30s",
        ),
        (
            "srv__cancelled",
            CANCELLED_ERROR_CODE,
            "the gateway is stopping",
        ),
        ("srv__upstream", -32042, "JSON-RPC error -32042: nope"),
        (
            "srv__rate_limited",
            RATE_LIMITED_ERROR_CODE,
            "retry after 3 s",
        ),
        ("srv__invalid_result", -32603, "not valid mcp"),
    ];
    for (tool, code, message) in expectations {
        let error = call_error(&connected, tool).await;
        assert_eq!(error.code, ErrorCode(code), "{tool}: {error:?}");
        assert!(error.message.contains(message), "{tool}: {error:?}");
    }
    let error = call_error(&connected, "srv__rate_limited").await;
    assert_eq!(error.data, Some(json!({"retryAfterMs": 2500})));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_client_with_its_token() {
    let mut connected = connect_legacy().await;
    let handle = connected
        .client
        .send_request_with_option(
            ClientRequest::CallToolRequest(CallToolRequest::new(call("srv__progress"))),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    let token = handle.progress_token.clone();
    let result = handle.await_response().await.unwrap();
    assert!(
        matches!(result, ServerResult::CallToolResult(_)),
        "{result:?}"
    );

    let mut seen = Vec::new();
    for _ in 0..2 {
        let progress = next(&mut connected.progress, "progress notification").await;
        assert_eq!(progress.progress_token, token);
        assert_eq!(progress.total, Some(2.0));
        seen.push((progress.progress, progress.message.unwrap_or_default()));
    }
    seen.sort_by(|left, right| left.0.total_cmp(&right.0));
    assert_eq!(
        seen,
        [(1.0, "half way".to_owned()), (2.0, "done".to_owned())]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_request_cancels_the_front_end_call() {
    let mut connected = connect_legacy().await;
    let handle = connected
        .client
        .send_request_with_option(
            ClientRequest::CallToolRequest(CallToolRequest::new(call("srv__slow"))),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    connected.frontend.wait_until_slow_call_started().await;
    let progress = next(&mut connected.progress, "progress notification").await;
    assert_eq!(progress.message.as_deref(), Some("started"));
    assert!(!*connected.frontend.slow_call_cancelled.borrow());

    handle
        .cancel(Some("the user pressed stop".into()))
        .await
        .unwrap();
    connected.frontend.wait_until_slow_call_cancelled().await;

    // The connection is still good for the next call.
    let result = connected.client.call_tool(call("srv__echo")).await.unwrap();
    assert_ne!(result.is_error, Some(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_list_is_announced_and_listed() {
    let mut connected = connect_legacy().await;
    connected.frontend.add_tool("srv__new");
    next(&mut connected.tool_list_changed, "tools/list_changed").await;
    let tools = connected.client.list_all_tools().await.unwrap();
    assert_eq!(
        tools.last().map(|tool| tool.name.as_ref()),
        Some("srv__new")
    );

    connected.frontend.add_tool("srv__newer");
    next(
        &mut connected.tool_list_changed,
        "second tools/list_changed",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)] // the `initialize` era's subscriptions, which this test is about
async fn a_subscribed_resource_announces_its_updates_until_unsubscribed() {
    let mut connected = connect_legacy().await;
    let subscribe = rmcp::model::SubscribeRequestParams::new("file:///a.txt");
    connected.client.subscribe(subscribe).await.unwrap();
    assert_eq!(connected.frontend.subscriptions(), 1);
    // Another resource's update is not this subscription's.
    let updates = &connected.frontend.resource_updates;
    updates.send("file:///other.txt".to_owned()).unwrap();
    updates.send("file:///a.txt".to_owned()).unwrap();
    assert_eq!(
        next(&mut connected.resource_updated, "the update").await,
        "file:///a.txt"
    );
    // Subscribing again replaces the relay: one update, one notification.
    let again = rmcp::model::SubscribeRequestParams::new("file:///a.txt");
    connected.client.subscribe(again).await.unwrap();
    let deadline = Instant::now() + DEADLINE;
    while connected.frontend.subscriptions() != 1 {
        assert!(
            Instant::now() < deadline,
            "the earlier subscription was not let go"
        );
        tokio::task::yield_now().await;
    }
    updates.send("file:///a.txt".to_owned()).unwrap();
    next(
        &mut connected.resource_updated,
        "the update after subscribing again",
    )
    .await;
    let unsubscribe = rmcp::model::UnsubscribeRequestParams::new("file:///a.txt");
    connected.client.unsubscribe(unsubscribe).await.unwrap();
    while connected.frontend.subscriptions() != 0 {
        assert!(
            Instant::now() < deadline,
            "unsubscribing did not end the subscription"
        );
        tokio::task::yield_now().await;
    }
    let _ = updates.send("file:///a.txt".to_owned());
    // Bad input: a resource nobody has is refused with its URI, and makes no subscription.
    let refused = connected
        .client
        .subscribe(rmcp::model::SubscribeRequestParams::new("file:///nowhere"))
        .await
        .unwrap_err();
    match refused {
        ServiceError::McpError(error) => {
            assert_eq!(error.code, ErrorCode::RESOURCE_NOT_FOUND, "{error:?}");
            assert!(error.message.contains("file:///nowhere"), "{error:?}");
        }
        other => panic!("not a JSON-RPC error: {other:?}"),
    }
    assert_eq!(connected.frontend.subscriptions(), 0);
    assert!(
        connected.resource_updated.try_recv().is_err(),
        "an update arrived after unsubscribing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_and_resources_pass_through() {
    let connected = connect_legacy().await;
    let prompts = connected.client.list_all_prompts().await.unwrap();
    let names: Vec<_> = prompts.iter().map(|prompt| prompt.name.as_str()).collect();
    // The item that is not a valid prompt is left out rather than failing the list.
    assert_eq!(names, ["srv__greet", "srv__farewell"]);

    let mut request = GetPromptRequestParams::new("srv__greet");
    request.arguments = json!({"who": "ada"}).as_object().cloned();
    let prompt = connected.client.get_prompt(request).await.unwrap();
    let message = serde_json::to_value(&prompt.messages[0]).unwrap();
    assert_eq!(message["content"]["text"], "hello ada");
    match connected
        .client
        .get_prompt(GetPromptRequestParams::new("srv__nope"))
        .await
    {
        Err(ServiceError::McpError(error)) => assert_eq!(error.code, ErrorCode::INVALID_PARAMS),
        other => panic!("expected invalid params, got {other:?}"),
    }

    let resources = connected.client.list_all_resources().await.unwrap();
    assert_eq!(resources.len(), 1);
    assert_eq!(resources[0].uri, "file:///a.txt");
    assert_eq!(resources[0].name, "srv__a");
    let templates = connected
        .client
        .list_all_resource_templates()
        .await
        .unwrap();
    assert_eq!(templates.len(), 1);
    assert_eq!(templates[0].uri_template, "file:///{path}");

    let read = connected
        .client
        .read_resource(ReadResourceRequestParams::new("file:///a.txt"))
        .await
        .unwrap();
    match &read.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => assert_eq!(text, "A"),
        other => panic!("expected text contents, got {other:?}"),
    }
    match connected
        .client
        .read_resource(ReadResourceRequestParams::new("file:///missing"))
        .await
    {
        Err(ServiceError::McpError(error)) => {
            assert_eq!(error.code, ErrorCode::RESOURCE_NOT_FOUND)
        }
        other => panic!("expected resource not found, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_type_is_added_for_2026_clients_and_left_out_for_older_ones() {
    let legacy = connect_legacy().await;
    let result = legacy.client.call_tool(call("srv__echo")).await.unwrap();
    assert_eq!(result.result_type, None);

    let modern = connect_2026().await;
    let result = modern.client.call_tool(call("srv__echo")).await.unwrap();
    assert_eq!(result.result_type, Some(ResultType::COMPLETE));
    let tools = modern.client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), TOOL_NAMES.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_client_hears_of_changes_through_its_subscription() {
    let connected = connect_2026().await;
    let mut subscription = connected
        .client
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .unwrap();
    assert_eq!(subscription.acknowledged().tools_list_changed, Some(true));
    connected.frontend.add_tool("srv__new");
    let notification = tokio::time::timeout(DEADLINE, subscription.next())
        .await
        .expect("no notification arrived in time")
        .unwrap();
    assert!(
        matches!(
            notification,
            Some(ServerNotification::ToolListChangedNotification(_))
        ),
        "{notification:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_departed_client_ends_the_connection_and_its_watcher() {
    let Connected {
        frontend,
        client,
        server,
        ..
    } = connect_legacy().await;
    // Served connections watch the change counter.
    wait_for(|| frontend.change_receivers() == 1, "the watcher to start").await;
    client.cancel().await.unwrap();
    let ended = tokio::time::timeout(DEADLINE, server)
        .await
        .expect("the server did not notice the client left");
    ended.unwrap().unwrap();
    wait_for(|| frontend.change_receivers() == 0, "the watcher to end").await;
}

async fn wait_for(condition: impl Fn() -> bool, what: &str) {
    let deadline = Instant::now() + DEADLINE;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}
