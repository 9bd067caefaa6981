//! The Streamable HTTP handler driven with raw `http` requests, as the HTTP adapter drives it:
//! sessions for `initialize`-era clients, stateless 2026-07-28 requests, body limits. (`Host` and
//! `Origin` are the HTTP adapter's to check, on every route.)

mod downstream_support;

use std::sync::Arc;

use bytes::Bytes;
use downstream_support::{DEADLINE, FakeFrontend, TOOL_NAMES};
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt as _;
use mcpgw_core::Caller;
use mcpgw_mcp_rmcp::{McpHttpBody, McpHttpHandler, McpHttpSettings, streamable_http_handler};
use serde_json::{Value, json};

const HOST: &str = "127.0.0.1:8000";
const LEGACY: &str = "2025-11-25";
const MODERN: &str = "2026-07-28";

fn handler(settings: McpHttpSettings) -> (Arc<FakeFrontend>, McpHttpHandler) {
    let frontend = FakeFrontend::new();
    let handler = streamable_http_handler(frontend.clone(), settings);
    (frontend, handler)
}

fn request(method: Method, headers: &[(&str, &str)], body: Option<Value>) -> Request<Bytes> {
    let mut builder = Request::builder()
        .method(method)
        .uri("/mcp")
        .header(http::header::HOST, HOST);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let body = body.map_or_else(Bytes::new, |body| Bytes::from(body.to_string()));
    builder.body(body).unwrap()
}

fn post(headers: &[(&str, &str)], body: Value) -> Request<Bytes> {
    let mut all = vec![
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
    ];
    all.extend_from_slice(headers);
    request(Method::POST, &all, Some(body))
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY,
        "capabilities": {},
        "clientInfo": {"name": "raw-http-test", "version": "0"},
    }})
}

/// A 2026-07-28 request: the per-request `_meta` replaces the handshake.
fn modern(id: u64, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-http-test", "version": "0"},
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn modern_headers<'a>(method: &'a str, name: Option<&'a str>) -> Vec<(&'a str, &'a str)> {
    let mut headers = vec![("mcp-protocol-version", MODERN), ("mcp-method", method)];
    if let Some(name) = name {
        headers.push(("mcp-name", name));
    }
    headers
}

async fn send(handler: &McpHttpHandler, request: Request<Bytes>) -> Response<McpHttpBody> {
    tokio::time::timeout(DEADLINE, handler(request))
        .await
        .expect("the handler did not answer in time")
}

fn content_type(response: &Response<McpHttpBody>) -> String {
    response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

async fn text(response: Response<McpHttpBody>) -> String {
    let body = tokio::time::timeout(DEADLINE, response.into_body().collect())
        .await
        .expect("the body did not end in time")
        .unwrap()
        .to_bytes();
    String::from_utf8(body.to_vec()).unwrap()
}

/// Reads Server-Sent Events from `body` until `done` accepts the messages so far, and returns
/// them. Keep-alive comments and priming events (no data) are skipped.
async fn read_events(body: &mut McpHttpBody, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let mut buffer = String::new();
    let mut messages = Vec::new();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if done(&messages) {
            return messages;
        }
        let frame = tokio::time::timeout_at(deadline, body.frame())
            .await
            .unwrap_or_else(|_| panic!("timed out; messages so far: {messages:?}"));
        let Some(frame) = frame else {
            panic!("the stream ended; messages so far: {messages:?}");
        };
        let Ok(data) = frame.unwrap().into_data() else {
            continue;
        };
        buffer.push_str(std::str::from_utf8(&data).unwrap());
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            let data: String = event
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            if !data.is_empty() {
                messages.push(serde_json::from_str(&data).unwrap());
            }
        }
    }
}

fn has_answer(messages: &[Value]) -> bool {
    messages.iter().any(|message| message.get("id").is_some())
}

/// The JSON-RPC answer (result or error) of a request, whether it came as JSON or as SSE.
async fn answer(response: Response<McpHttpBody>) -> Value {
    assert_eq!(response.status(), StatusCode::OK, "{response:?}");
    if content_type(&response).starts_with("application/json") {
        return serde_json::from_str(&text(response).await).unwrap();
    }
    assert!(content_type(&response).starts_with("text/event-stream"));
    let mut body = response.into_body();
    let messages = read_events(&mut body, has_answer).await;
    messages
        .into_iter()
        .find(|message| message.get("id").is_some())
        .unwrap()
}

/// Opens a 2025-11-25 session and answers its id.
async fn open_session(handler: &McpHttpHandler) -> String {
    let response = send(handler, post(&[], initialize())).await;
    assert_eq!(response.status(), StatusCode::OK);
    let session = response
        .headers()
        .get("mcp-session-id")
        .expect("an initialize answer carries Mcp-Session-Id")
        .to_str()
        .unwrap()
        .to_owned();
    let initialized = answer(response).await;
    assert_eq!(initialized["result"]["serverInfo"]["name"], "mcpgw");
    assert_eq!(initialized["result"]["protocolVersion"], LEGACY);
    assert_eq!(
        initialized["result"]["capabilities"]["tools"]["listChanged"],
        true
    );

    let notification = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = send(
        handler,
        post(
            &[
                ("mcp-session-id", &session),
                ("mcp-protocol-version", LEGACY),
            ],
            notification,
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    session
}

fn in_session(session: &str) -> [(&str, &str); 2] {
    [
        ("mcp-session-id", session),
        ("mcp-protocol-version", LEGACY),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_client_works_in_a_session_from_initialize_to_delete() {
    let (_frontend, handler) = handler(McpHttpSettings::default());
    let session = open_session(&handler).await;

    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let listed = answer(send(&handler, post(&in_session(&session), list.clone())).await).await;
    let names: Vec<_> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, TOOL_NAMES);
    // `initialize`-era clients keep the wire shape of their era.
    assert!(listed["result"].get("resultType").is_none(), "{listed}");
    assert!(listed["result"].get("nextCursor").is_none(), "{listed}");

    let delete = request(Method::DELETE, &in_session(&session), None);
    let ended = send(&handler, delete).await;
    assert_eq!(ended.status(), StatusCode::NO_CONTENT);
    assert!(
        ended
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .is_empty()
    );
    let response = send(&handler, post(&in_session(&session), list)).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_session_that_does_not_exist_answers_404() {
    let (_frontend, handler) = handler(McpHttpSettings::default());
    let never_opened = request(Method::DELETE, &in_session("no-such-session"), None);
    assert_eq!(
        send(&handler, never_opened).await.status(),
        StatusCode::NOT_FOUND
    );

    let session = open_session(&handler).await;
    let first = request(Method::DELETE, &in_session(&session), None);
    assert_eq!(send(&handler, first).await.status(), StatusCode::NO_CONTENT);
    let again = request(Method::DELETE, &in_session(&session), None);
    assert_eq!(send(&handler, again).await.status(), StatusCode::NOT_FOUND);

    // Without a session id there is nothing to end: rmcp's 400 stands.
    let anonymous = request(Method::DELETE, &[("mcp-protocol-version", LEGACY)], None);
    assert_eq!(
        send(&handler, anonymous).await.status(),
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_is_streamed_before_the_answer_in_a_session() {
    let (_frontend, handler) = handler(McpHttpSettings::default());
    let session = open_session(&handler).await;
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "srv__progress", "_meta": {"progressToken": "p-7"}}});
    let response = send(&handler, post(&in_session(&session), call)).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let messages = read_events(&mut body, has_answer).await;
    let methods: Vec<_> = messages
        .iter()
        .map(|message| {
            message["method"]
                .as_str()
                .map_or_else(|| "answer".to_owned(), str::to_owned)
        })
        .collect();
    assert_eq!(
        methods,
        ["notifications/progress", "notifications/progress", "answer"]
    );
    assert_eq!(messages[0]["params"]["progressToken"], "p-7");
    assert_eq!(messages[0]["params"]["progress"], 1.0);
    assert_eq!(messages[1]["params"]["message"], "done");
    assert_eq!(messages[2]["result"]["content"][0]["text"], "finished");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_stream_announces_tool_list_changes() {
    let (frontend, handler) = handler(McpHttpSettings::default());
    let session = open_session(&handler).await;
    let mut headers = in_session(&session).to_vec();
    headers.push(("accept", "text/event-stream"));
    let response = send(&handler, request(Method::GET, &headers, None)).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(content_type(&response).starts_with("text/event-stream"));
    let mut stream = response.into_body();

    frontend.add_tool("srv__new");
    let messages = read_events(&mut stream, |messages| !messages.is_empty()).await;
    assert_eq!(messages[0]["method"], "notifications/tools/list_changed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caller_in_the_request_extensions_reaches_the_front_end() {
    let (frontend, handler) = handler(McpHttpSettings::default());
    let session = open_session(&handler).await;
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                      "params": {"name": "srv__whoami"}});
    let mut request = post(&in_session(&session), call);
    request
        .extensions_mut()
        .insert(Caller::principal("user:alice"));
    let answered = answer(send(&handler, request).await).await;
    assert_eq!(answered["result"]["content"][0]["text"], "user:alice");

    let call = modern(4, "tools/call", json!({"name": "srv__whoami"}));
    let mut request = post(&modern_headers("tools/call", Some("srv__whoami")), call);
    request
        .extensions_mut()
        .insert(Caller::principal("user:bob"));
    let answered = answer(send(&handler, request).await).await;
    assert_eq!(answered["result"]["content"][0]["text"], "user:bob");

    // Without a caller the request is anonymous.
    let call = modern(5, "tools/call", json!({"name": "srv__whoami"}));
    let request = post(&modern_headers("tools/call", Some("srv__whoami")), call);
    let answered = answer(send(&handler, request).await).await;
    assert_eq!(answered["result"]["content"][0]["text"], "nobody");
    assert_eq!(
        *frontend.call_principals.lock().unwrap(),
        [
            Some("user:alice".to_owned()),
            Some("user:bob".to_owned()),
            None
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_client_is_served_statelessly_with_complete_results() {
    let (_frontend, handler) = handler(McpHttpSettings::default());
    let list = modern(1, "tools/list", json!({}));
    let response = send(&handler, post(&modern_headers("tools/list", None), list)).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().get("mcp-session-id").is_none());
    assert!(content_type(&response).starts_with("application/json"));
    let listed = answer(response).await;
    assert_eq!(
        listed["result"]["tools"].as_array().unwrap().len(),
        TOOL_NAMES.len()
    );
    assert_eq!(listed["result"]["resultType"], "complete");
    // rmcp fills the cache hints 2026-07-28 requires: never cached, per caller.
    assert_eq!(listed["result"]["ttlMs"], 0);
    assert_eq!(listed["result"]["cacheScope"], "private");

    // The front end's result has no `resultType` (as from a 2025-era upstream); the 2026
    // client still gets one.
    let call = modern(
        2,
        "tools/call",
        json!({"name": "srv__echo", "arguments": {"a": 1}}),
    );
    let called = answer(
        send(
            &handler,
            post(&modern_headers("tools/call", Some("srv__echo")), call),
        )
        .await,
    )
    .await;
    assert_eq!(called["result"]["resultType"], "complete");
    assert_eq!(called["result"]["structuredContent"], json!({"a": 1}));

    let unknown = modern(3, "tools/call", json!({"name": "srv__nope"}));
    let refused = answer(
        send(
            &handler,
            post(&modern_headers("tools/call", Some("srv__nope")), unknown),
        )
        .await,
    )
    .await;
    assert_eq!(refused["error"]["code"], -32602);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_request_without_its_standard_headers_is_a_bad_request() {
    let (_frontend, handler) = handler(McpHttpSettings::default());
    let list = modern(1, "tools/list", json!({}));
    let response = send(&handler, post(&[("mcp-protocol-version", MODERN)], list)).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let body: Value = serde_json::from_str(&text(response).await).unwrap();
    assert_eq!(body["error"]["code"], -32020, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_cancels_its_stateless_call() {
    let (frontend, handler) = handler(McpHttpSettings::default());
    let mut call = modern(1, "tools/call", json!({"name": "srv__slow"}));
    call["params"]["_meta"]["progressToken"] = json!("slow-1");
    let response = send(
        &handler,
        post(&modern_headers("tools/call", Some("srv__slow")), call),
    )
    .await;
    // The progress notification comes first, so the answer is a stream.
    assert_eq!(response.status(), StatusCode::OK);
    assert!(content_type(&response).starts_with("text/event-stream"));
    let mut body = response.into_body();
    let messages = read_events(&mut body, |messages| !messages.is_empty()).await;
    assert_eq!(messages[0]["method"], "notifications/progress");
    assert!(!*frontend.slow_call_cancelled.borrow());

    drop(body);
    frontend.wait_until_slow_call_cancelled().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_are_refused() {
    let (_frontend, handler) = handler(McpHttpSettings::default().with_max_request_body_bytes(256));
    let mut call = modern(1, "tools/call", json!({"name": "srv__echo"}));
    call["params"]["arguments"] = json!({"text": "x".repeat(1024)});
    let response = send(
        &handler,
        post(&modern_headers("tools/call", Some("srv__echo")), call),
    )
    .await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
}

fn call(id: Value, name: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": {"text": "hi"}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_in_a_session_are_answered_as_json_with_the_callers_id() {
    let (_frontend, handler) = handler(McpHttpSettings::default());
    let session = open_session(&handler).await;

    let response = send(
        &handler,
        post(&in_session(&session), call(json!("call-a"), "srv__echo")),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(content_type(&response), "application/json");
    let answered: Value = serde_json::from_str(&text(response).await).unwrap();
    assert_eq!(answered["jsonrpc"], "2.0");
    assert_eq!(answered["id"], "call-a");
    assert_eq!(
        answered["result"]["structuredContent"],
        json!({"text": "hi"})
    );

    // Tool errors are answers; failures are JSON-RPC errors with the documented codes.
    let cases = [
        ("srv__tool_error", None),
        ("srv__unknown_name", Some(-32602)),
        ("srv__invalid_arguments", Some(-32602)),
        ("srv__timeout", Some(-32001)),
        ("srv__upstream", Some(-32042)),
        ("srv__rate_limited", Some(-32029)),
        ("srv__unavailable", Some(-32603)),
    ];
    for (index, (name, code)) in cases.into_iter().enumerate() {
        let id = json!(100 + index);
        let answered = answer(
            send(
                &handler,
                post(&in_session(&session), call(id.clone(), name)),
            )
            .await,
        )
        .await;
        assert_eq!(answered["id"], id, "{name}: {answered}");
        match code {
            None => assert_eq!(answered["result"]["isError"], true, "{name}: {answered}"),
            Some(code) => assert_eq!(answered["error"]["code"], code, "{name}: {answered}"),
        }
    }

    // A content block newer than the gateway's protocol model passes through untouched.
    let answered = answer(
        send(
            &handler,
            post(
                &in_session(&session),
                call(json!(200), "srv__invalid_result"),
            ),
        )
        .await,
    )
    .await;
    assert_eq!(
        answered["result"]["content"][0]["type"], "hologram",
        "{answered}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_or_unusual_calls_still_get_rmcps_answers() {
    let (_frontend, handler) = handler(McpHttpSettings::default());
    let session = open_session(&handler).await;

    // A session the endpoint does not know: 404, so the client initializes again.
    let response = send(
        &handler,
        post(&in_session("no-such-session"), call(json!(1), "srv__echo")),
    )
    .await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);

    // A call without a name is invalid params, not a crash or a hang.
    let nameless = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {}});
    let answered = answer(send(&handler, post(&in_session(&session), nameless)).await).await;
    assert_eq!(answered["error"]["code"], -32602, "{answered}");
    assert!(
        answered["error"]["message"]
            .as_str()
            .unwrap()
            .contains("name"),
        "{answered}"
    );

    // Not JSON at all.
    let mut garbage = post(&in_session(&session), json!(null));
    *garbage.body_mut() = Bytes::from_static(b"{\"jsonrpc\": \"2.0\", \"id\": 4, \"meth");
    assert!(send(&handler, garbage).await.status().is_client_error());

    // A call that asks for progress is streamed, as before.
    let progress = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "srv__progress", "_meta": {"progressToken": 5}}});
    let response = send(&handler, post(&in_session(&session), progress)).await;
    assert!(content_type(&response).starts_with("text/event-stream"));
    assert_eq!(
        answer(response).await["result"]["content"][0]["text"],
        "finished"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancellation_notification_cancels_a_running_call() {
    let (frontend, handler) = handler(McpHttpSettings::default());
    let session = open_session(&handler).await;
    let pending = tokio::spawn(handler(post(
        &in_session(&session),
        call(json!("slow-1"), "srv__slow"),
    )));
    frontend.wait_until_slow_call_started().await;

    // A cancellation for another id changes nothing for this call.
    let other = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": "slow-2"}});
    assert_eq!(
        send(&handler, post(&in_session(&session), other))
            .await
            .status(),
        StatusCode::ACCEPTED
    );
    assert!(!*frontend.slow_call_cancelled.borrow());

    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": "slow-1", "reason": "user gave up"}});
    assert_eq!(
        send(&handler, post(&in_session(&session), cancel))
            .await
            .status(),
        StatusCode::ACCEPTED
    );
    frontend.wait_until_slow_call_cancelled().await;
    let response = tokio::time::timeout(DEADLINE, pending)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(answer(response).await["error"]["code"], -32800);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_session_cancels_its_running_calls() {
    let (frontend, handler) = handler(McpHttpSettings::default());
    let session = open_session(&handler).await;
    let pending = tokio::spawn(handler(post(
        &in_session(&session),
        call(json!(9), "srv__slow"),
    )));
    frontend.wait_until_slow_call_started().await;
    let delete = request(Method::DELETE, &in_session(&session), None);
    assert_eq!(
        send(&handler, delete).await.status(),
        StatusCode::NO_CONTENT
    );
    frontend.wait_until_slow_call_cancelled().await;
    let response = tokio::time::timeout(DEADLINE, pending)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(answer(response).await["error"]["code"], -32800);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_cancels_its_session_call() {
    let (frontend, handler) = handler(McpHttpSettings::default());
    let session = open_session(&handler).await;
    let pending = tokio::spawn(handler(post(
        &in_session(&session),
        call(json!(9), "srv__slow"),
    )));
    frontend.wait_until_slow_call_started().await;
    // The HTTP adapter drops the answer's future when the connection closes.
    pending.abort();
    frontend.wait_until_slow_call_cancelled().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_without_requests_for_the_idle_time_are_closed() {
    let idle = std::time::Duration::from_millis(400);
    let (_frontend, handler) =
        handler(McpHttpSettings::default().with_session_idle_timeout(Some(idle)));
    let session = open_session(&handler).await;
    let busy = open_session(&handler).await;

    // Calls keep a session alive, well past the idle time.
    let started = tokio::time::Instant::now();
    let mut id = 0;
    while started.elapsed() < idle * 3 {
        id += 1;
        let answered = answer(
            send(
                &handler,
                post(&in_session(&busy), call(json!(id), "srv__echo")),
            )
            .await,
        )
        .await;
        assert!(answered.get("result").is_some(), "{answered}");
        tokio::time::sleep(idle / 8).await;
    }
    let answered = answer(
        send(
            &handler,
            post(&in_session(&busy), call(json!(0), "srv__echo")),
        )
        .await,
    )
    .await;
    assert!(answered.get("result").is_some(), "{answered}");

    // The other one saw nothing for longer than that and is gone.
    let response = send(
        &handler,
        post(&in_session(&session), call(json!(1), "srv__echo")),
    )
    .await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_session_calls_are_refused() {
    let (_frontend, handler) = handler(McpHttpSettings::default().with_max_request_body_bytes(512));
    let session = open_session(&handler).await;
    let mut big = call(json!(1), "srv__echo");
    big["params"]["arguments"] = json!({"text": "x".repeat(1024)});
    let response = send(&handler, post(&in_session(&session), big)).await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
}

// --- the direct path of 2026-07-28 calls ----------------------------------------------------

/// A 2026-07-28 `tools/call` of `name`; `rmcp` adds a progress token, which the direct path
/// leaves to rmcp (progress needs a stream): the same call on each path.
fn stateless_call(id: Value, name: &str, rmcp: bool) -> Request<Bytes> {
    let mut body = modern(
        0,
        "tools/call",
        json!({"name": name, "arguments": {"text": "hi"}}),
    );
    body["id"] = id;
    if rmcp {
        body["params"]["_meta"]["progressToken"] = json!("via-rmcp");
    }
    post(&modern_headers("tools/call", Some(name)), body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_calls_are_answered_directly_with_results_as_written() {
    let (_frontend, handler) = handler(McpHttpSettings::default());
    let response = send(
        &handler,
        stateless_call(json!("call-a"), "srv__invalid_result", false),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(content_type(&response), "application/json");
    assert!(response.headers().get("mcp-session-id").is_none());
    let answered: Value = serde_json::from_str(&text(response).await).unwrap();
    assert_eq!(answered["jsonrpc"], "2.0");
    assert_eq!(answered["id"], "call-a");
    // A content block newer than rmcp's model reaches the client, with the era's result type.
    assert_eq!(
        answered["result"],
        json!({"content": [{"type": "hologram"}], "resultType": "complete"}),
        "{answered}"
    );
    // rmcp's path cannot carry it: that is what shows the call above took the direct path.
    let through_rmcp = answer(
        send(
            &handler,
            stateless_call(json!("call-b"), "srv__invalid_result", true),
        )
        .await,
    )
    .await;
    assert_eq!(through_rmcp["error"]["code"], -32603, "{through_rmcp}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_calls_get_the_same_answers_on_both_paths() {
    let (_frontend, handler) = handler(McpHttpSettings::default());
    // Every tool of the fake front end but the one that waits to be cancelled and the one whose
    // result rmcp cannot carry (above), and one that does not exist.
    let names = TOOL_NAMES
        .into_iter()
        .filter(|name| !["srv__slow", "srv__invalid_result"].contains(name))
        .chain(["srv__not_listed"]);
    for name in names {
        let direct = send(&handler, stateless_call(json!(7), name, false)).await;
        let (direct_status, direct_type) = (direct.status(), content_type(&direct));
        let direct: Value = serde_json::from_str(&text(direct).await).unwrap();
        assert_eq!(direct_type, "application/json", "{name}");
        let through_rmcp = send(&handler, stateless_call(json!(7), name, true)).await;
        assert_eq!(through_rmcp.status(), direct_status, "{name}: {direct}");
        let through_rmcp = answer(through_rmcp).await;
        assert_eq!(direct, through_rmcp, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_calls_that_need_rmcps_checks_get_rmcps_answers() {
    let (frontend, handler) = handler(McpHttpSettings::default());
    let body = modern(1, "tools/call", json!({"name": "srv__echo"}));
    // Bad input tried: an Mcp-Name that contradicts the body, a repeated Mcp-Name, and an
    // Mcp-Method that contradicts the body.
    let cases: [(&str, Vec<(&str, &str)>); 3] = [
        (
            "mismatched name",
            modern_headers("tools/call", Some("srv__whoami")),
        ),
        ("repeated name", {
            let mut headers = modern_headers("tools/call", Some("srv__echo"));
            headers.push(("mcp-name", "srv__echo"));
            headers
        }),
        (
            "mismatched method",
            modern_headers("tools/list", Some("srv__echo")),
        ),
    ];
    for (case, headers) in cases {
        let response = send(&handler, post(&headers, body.clone())).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{case}");
        let answered: Value = serde_json::from_str(&text(response).await).unwrap();
        assert!(answered["error"]["code"].is_i64(), "{case}: {answered}");
    }

    // An Mcp-Param header the tool does not declare is rmcp's to judge; it lets it pass.
    let mut headers = modern_headers("tools/call", Some("srv__echo"));
    headers.push(("mcp-param-text", "hi"));
    let answered = answer(send(&handler, post(&headers, body.clone())).await).await;
    assert_eq!(answered["result"]["resultType"], "complete", "{answered}");

    // A tool whose schema asks for its `text` in an Mcp-Param header, called without it.
    frontend.add_tool_with_schema(
        "srv__routed",
        json!({"type": "object", "properties": {"text": {"type": "string", "x-mcp-header": "Text"}}}),
    );
    let routed = modern(
        3,
        "tools/call",
        json!({"name": "srv__routed", "arguments": {"text": "hi"}}),
    );
    let response = send(
        &handler,
        post(&modern_headers("tools/call", Some("srv__routed")), routed),
    )
    .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);

    // `_meta` without the client's capabilities, which the era requires: rmcp's 400. Without
    // the client's information, which it does not require: answered.
    for (key, status) in [
        (
            "io.modelcontextprotocol/clientCapabilities",
            StatusCode::BAD_REQUEST,
        ),
        ("io.modelcontextprotocol/clientInfo", StatusCode::OK),
    ] {
        let mut incomplete = modern(4, "tools/call", json!({"name": "srv__echo"}));
        incomplete["params"]["_meta"]
            .as_object_mut()
            .unwrap()
            .remove(key);
        let response = send(
            &handler,
            post(&modern_headers("tools/call", Some("srv__echo")), incomplete),
        )
        .await;
        assert_eq!(response.status(), status, "without {key}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_cancels_its_direct_stateless_call() {
    let (frontend, handler) = handler(McpHttpSettings::default());
    let pending = tokio::spawn(handler(stateless_call(json!(9), "srv__slow", false)));
    frontend.wait_until_slow_call_started().await;
    // The HTTP adapter drops the answer's future when the connection closes.
    pending.abort();
    frontend.wait_until_slow_call_cancelled().await;
}
