//! `initialize`-era sessions across replicas: two handlers built independently ("replicas",
//! each with its own front end), driven with raw `http` requests as a load balancer without
//! affinity would spread them. With one shared secret, a session begun on one is served by the
//! other; with another secret, without one, or with an id that is not the gateway's, the other
//! answers as for any unknown session (404).

mod downstream_support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use downstream_support::{DEADLINE, FakeFrontend, TOOL_NAMES};
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt as _;
use mcpgw_mcp_rmcp::{
    McpHttpBody, McpHttpHandler, McpHttpSettings, McpServerSettings, streamable_http_handler,
};
use serde_json::{Value, json};

const HOST: &str = "127.0.0.1:8000";
const LEGACY: &str = "2025-11-25";
const SECRET: &str = "the fleet's secret, from the secret store";

/// A replica: its own front end and handler, built from `settings`.
fn replica(settings: McpHttpSettings) -> (Arc<FakeFrontend>, McpHttpHandler) {
    let frontend = FakeFrontend::new();
    let handler = streamable_http_handler(frontend.clone(), settings);
    (frontend, handler)
}

fn with_secret(secret: Option<&str>) -> McpHttpSettings {
    McpHttpSettings::default().with_server(
        McpServerSettings::default().with_request_state_secret(secret.map(str::to_owned)),
    )
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

fn in_session(session: &str) -> Vec<(&str, &str)> {
    vec![
        ("mcp-session-id", session),
        ("mcp-protocol-version", LEGACY),
    ]
}

fn get_stream(session: &str) -> Request<Bytes> {
    let mut headers = in_session(session);
    headers.push(("accept", "text/event-stream"));
    request(Method::GET, &headers, None)
}

fn delete(session: &str) -> Request<Bytes> {
    request(Method::DELETE, &in_session(session), None)
}

fn list(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"})
}

fn call(id: u64, name: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": {"text": "hi"}}})
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

/// Reads Server-Sent Events from `body` until `done` accepts the messages so far. Keep-alive
/// comments and priming events (no data) are skipped.
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

/// The JSON-RPC answer of a request, and whether it came as JSON (the direct path) or SSE.
async fn answer(response: Response<McpHttpBody>) -> (Value, &'static str) {
    assert_eq!(response.status(), StatusCode::OK, "{response:?}");
    let kind = content_type(&response);
    let mut body = response.into_body();
    if kind.starts_with("application/json") {
        let bytes = tokio::time::timeout(DEADLINE, body.collect())
            .await
            .expect("the body did not end in time")
            .unwrap()
            .to_bytes();
        return (serde_json::from_slice(&bytes).unwrap(), "json");
    }
    assert!(kind.starts_with("text/event-stream"), "{kind}");
    let messages = read_events(&mut body, has_answer).await;
    let answer = messages
        .into_iter()
        .find(|message| message.get("id").is_some())
        .unwrap();
    (answer, "sse")
}

fn tool_names(listed: &Value) -> Vec<String> {
    listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {listed}"))
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Opens a session on `handler` with `capabilities` (without `notifications/initialized`,
/// which the client may send to any replica) and answers its id.
async fn initialize(handler: &McpHttpHandler, capabilities: Value) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY,
        "capabilities": capabilities,
        "clientInfo": {"name": "replica-test", "version": "1.0.0"},
    }});
    let response = send(handler, post(&[], body)).await;
    assert_eq!(response.status(), StatusCode::OK);
    let session = response
        .headers()
        .get("mcp-session-id")
        .expect("an initialize answer carries Mcp-Session-Id")
        .to_str()
        .unwrap()
        .to_owned();
    let (initialized, _) = answer(response).await;
    assert_eq!(initialized["result"]["protocolVersion"], LEGACY);
    session
}

async fn initialized(handler: &McpHttpHandler, session: &str) -> StatusCode {
    let notification = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    send(handler, post(&in_session(session), notification))
        .await
        .status()
}

/// Every kind of request naming `session` is answered 404 by `handler`.
async fn unknown_everywhere(handler: &McpHttpHandler, session: &str, what: &str) {
    let listed = send(handler, post(&in_session(session), list(90))).await;
    assert_eq!(listed.status(), StatusCode::NOT_FOUND, "{what}: tools/list");
    let called = send(handler, post(&in_session(session), call(91, "srv__echo"))).await;
    assert_eq!(called.status(), StatusCode::NOT_FOUND, "{what}: tools/call");
    let stream = send(handler, get_stream(session)).await;
    assert_eq!(stream.status(), StatusCode::NOT_FOUND, "{what}: GET");
    let ended = send(handler, delete(session)).await;
    assert_eq!(ended.status(), StatusCode::NOT_FOUND, "{what}: DELETE");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_begun_on_one_replica_is_served_by_another() {
    let (_, a) = replica(with_secret(Some(SECRET)));
    let (frontend_b, b) = replica(with_secret(Some(SECRET)));
    let session = initialize(&a, json!({})).await;
    assert_eq!(initialized(&a, &session).await, StatusCode::ACCEPTED);

    // The first request B sees re-creates the session there.
    let (listed, _) = answer(send(&b, post(&in_session(&session), list(2))).await).await;
    assert_eq!(tool_names(&listed), TOOL_NAMES);
    assert!(listed["result"].get("resultType").is_none(), "{listed}");

    // A plain call takes the direct path on B as it does on A.
    let (called, path) =
        answer(send(&b, post(&in_session(&session), call(3, "srv__echo"))).await).await;
    assert_eq!(path, "json", "{called}");
    assert_eq!(called["id"], 3);
    assert_eq!(called["result"]["structuredContent"], json!({"text": "hi"}));

    // A call with a progress token takes rmcp's path, on B's copy of the session.
    let progress = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "srv__progress", "_meta": {"progressToken": "p-4"}}});
    let response = send(&b, post(&in_session(&session), progress)).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(content_type(&response).starts_with("text/event-stream"));
    let mut body = response.into_body();
    let messages = read_events(&mut body, has_answer).await;
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert_eq!(messages[0]["method"], "notifications/progress");
    assert_eq!(messages[0]["params"]["progressToken"], "p-4");
    assert_eq!(messages[2]["result"]["content"][0]["text"], "finished");

    // B's copy announces B's tool list changes on its GET stream: its handshake, replayed
    // with `notifications/initialized`, started the watcher.
    let stream = send(&b, get_stream(&session)).await;
    assert_eq!(stream.status(), StatusCode::OK);
    assert!(content_type(&stream).starts_with("text/event-stream"));
    let mut stream = stream.into_body();
    frontend_b.add_tool("srv__new");
    let events = read_events(&mut stream, |messages| !messages.is_empty()).await;
    assert_eq!(events[0]["method"], "notifications/tools/list_changed");

    // DELETE on B ends B's copy; B does not re-create it afterwards.
    assert_eq!(
        send(&b, delete(&session)).await.status(),
        StatusCode::NO_CONTENT
    );
    unknown_everywhere(&b, &session, "deleted on B").await;

    // A still holds its own copy until that one idles out: nothing tells A of the DELETE.
    let (listed, _) = answer(send(&a, post(&in_session(&session), list(5))).await).await;
    assert_eq!(tool_names(&listed).len(), TOOL_NAMES.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_first_request_on_another_replica_resumes_the_session() {
    let (_, a) = replica(with_secret(Some(SECRET)));
    let (_, b) = replica(with_secret(Some(SECRET)));

    // `notifications/initialized` itself reaching B.
    let session = initialize(&a, json!({})).await;
    assert_eq!(initialized(&b, &session).await, StatusCode::ACCEPTED);
    let (called, path) =
        answer(send(&b, post(&in_session(&session), call(2, "srv__echo"))).await).await;
    assert_eq!((path, &called["id"]), ("json", &json!(2)), "{called}");

    // A direct-path call as the first request: rmcp re-creates the session and answers it,
    // the next one is direct.
    let session = initialize(&a, json!({})).await;
    let (called, _) =
        answer(send(&b, post(&in_session(&session), call(3, "srv__echo"))).await).await;
    assert_eq!(called["result"]["structuredContent"], json!({"text": "hi"}));
    let (_, path) = answer(send(&b, post(&in_session(&session), call(4, "srv__echo"))).await).await;
    assert_eq!(path, "json");

    // A GET stream as the first request.
    let session = initialize(&a, json!({})).await;
    let stream = send(&b, get_stream(&session)).await;
    assert_eq!(stream.status(), StatusCode::OK);

    // A DELETE as the first request ends a session B never held.
    let session = initialize(&a, json!({})).await;
    assert_eq!(
        send(&b, delete(&session)).await.status(),
        StatusCode::NO_CONTENT
    );
    unknown_everywhere(&b, &session, "deleted on B before B held it").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_racing_to_resume_a_session_are_all_served() {
    let (_, a) = replica(with_secret(Some(SECRET)));
    let (_, b) = replica(with_secret(Some(SECRET)));
    let session = initialize(&a, json!({})).await;
    let mut racing = Vec::new();
    for index in 0..8_u64 {
        let (b, session) = (b.clone(), session.clone());
        racing.push(tokio::spawn(async move {
            let body = if index % 2 == 0 {
                list(100 + index)
            } else {
                call(100 + index, "srv__echo")
            };
            answer(send(&b, post(&in_session(&session), body)).await)
                .await
                .0
        }));
    }
    let stream = send(&b, get_stream(&session)).await;
    assert_eq!(stream.status(), StatusCode::OK);
    for (index, racer) in racing.into_iter().enumerate() {
        let answered = racer.await.unwrap();
        assert_eq!(answered["id"], 100 + index, "{answered}");
        assert!(answered.get("result").is_some(), "{answered}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_can_be_asked_keeps_its_calls_on_streams_on_another_replica() {
    let (_, a) = replica(with_secret(Some(SECRET)));
    let (_, b) = replica(with_secret(Some(SECRET)));
    let session = initialize(&a, json!({"sampling": {}})).await;
    // Its calls may carry a server's requests before the answer, so every one streams, on B as
    // on A, though B never saw its capabilities but in the id.
    for id in [2, 3] {
        let (called, path) =
            answer(send(&b, post(&in_session(&session), call(id, "srv__echo"))).await).await;
        assert_eq!(path, "sse", "{called}");
        assert_eq!(called["id"], id);
    }
    let (_, path) = answer(send(&a, post(&in_session(&session), call(4, "srv__echo"))).await).await;
    assert_eq!(path, "sse");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_with_another_secret_or_none_do_not_know_the_session() {
    let (_, a) = replica(with_secret(Some(SECRET)));
    let (_, other) = replica(with_secret(Some("another fleet's secret")));
    let (_, alone) = replica(with_secret(None));
    let session = initialize(&a, json!({})).await;
    unknown_everywhere(&other, &session, "another secret").await;
    unknown_everywhere(&alone, &session, "no secret").await;

    // Without a secret, ids are random as they always were, and no other process knows them.
    let (_, alone_too) = replica(with_secret(None));
    let random = initialize(&alone, json!({})).await;
    assert_eq!(random.len(), 36, "{random}");
    assert_eq!(random.matches('-').count(), 4, "{random}");
    unknown_everywhere(&alone_too, &random, "no secret on either").await;
    unknown_everywhere(&a, &random, "a random id on a replica with a secret").await;
    // The session itself is untouched by all this.
    let (listed, _) = answer(send(&alone, post(&in_session(&random), list(2))).await).await;
    assert_eq!(tool_names(&listed), TOOL_NAMES);
}

/// HMAC-SHA256, written out here so that the test signs as a holder of the secret would.
fn hmac(key: &[u8], message: &[u8]) -> [u8; 32] {
    use sha2::{Digest as _, Sha256};
    let mut block = [0_u8; 64];
    if key.len() > block.len() {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let inner = Sha256::new()
        .chain_update(block.map(|byte| byte ^ 0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(block.map(|byte| byte ^ 0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// An id with `payload` after the layout's prefix, signed under `secret`'s session key.
fn forged(secret: &str, payload: &[u8]) -> String {
    use base64::Engine as _;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let mut bytes = vec![1_u8];
    bytes.extend_from_slice(&u64::try_from(now_ms).unwrap().to_be_bytes());
    bytes.extend_from_slice(&[9; 16]);
    bytes.extend_from_slice(payload);
    let key = hmac(secret.as_bytes(), b"mcpgw session v1");
    let mac = hmac(&key, &bytes);
    bytes.extend_from_slice(&mac);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_that_are_not_the_fleets_are_unknown_sessions() {
    let (_, a) = replica(with_secret(Some(SECRET)));
    let (_, b) = replica(with_secret(Some(SECRET)));
    let session = initialize(&a, json!({})).await;

    // A well-formed id signed with the secret's key resumes: the forgeries below fail for what
    // they change, not for how they are signed.
    let genuine = forged(
        SECRET,
        br#"{"v":"2025-11-25","c":{},"i":{"name":"forger","version":"1"}}"#,
    );
    let (listed, _) = answer(send(&b, post(&in_session(&genuine), list(2))).await).await;
    assert_eq!(tool_names(&listed), TOOL_NAMES);

    // Bad input: one character changed (first, middle, last), cut by one and by half, with
    // bytes appended, 100 KiB long, not base64url, correctly signed garbage, correctly signed
    // JSON of another shape, signed under another secret.
    let mut tampered = Vec::new();
    for index in [0, session.len() / 2, session.len() - 1] {
        let mut changed = session.clone();
        let original = &session[index..=index];
        changed.replace_range(index..=index, if original == "A" { "B" } else { "A" });
        tampered.push(changed);
    }
    tampered.push(session[..session.len() - 1].to_owned());
    tampered.push(session[..session.len() / 2].to_owned());
    tampered.push(format!("{session}AAAA"));
    tampered.push("A".repeat(100 * 1024));
    tampered.push(format!("{}!*", &session[..session.len() - 2]));
    tampered.push(forged(SECRET, b"\x00\xff not json at all"));
    tampered.push(forged(SECRET, br#"{"v":7,"c":[],"i":null}"#));
    tampered.push(forged(SECRET, b""));
    tampered.push(forged(
        "another secret",
        br#"{"v":"2025-11-25","c":{},"i":{"name":"forger","version":"1"}}"#,
    ));
    for id in &tampered {
        unknown_everywhere(&b, id, &format!("{:.60}", id)).await;
    }
    // Neither replica was disturbed.
    for replica in [&a, &b] {
        let (listed, _) = answer(send(replica, post(&in_session(&session), list(3))).await).await;
        assert_eq!(tool_names(&listed), TOOL_NAMES);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_past_its_resume_window_is_an_unknown_session_elsewhere() {
    let window = Duration::from_millis(500);
    let settings = || with_secret(Some(SECRET)).with_session_resume_window(Some(window));
    let (_, a) = replica(settings());
    let (_, b) = replica(settings());
    let session = initialize(&a, json!({})).await;
    tokio::time::sleep(window + Duration::from_millis(200)).await;
    // Bad input: an id issued longer ago than the window, on a replica that does not hold it.
    unknown_everywhere(&b, &session, "past its window").await;
    // The replica that holds the session goes on serving it: the window bounds re-creation,
    // not a session's life.
    let (listed, _) = answer(send(&a, post(&in_session(&session), list(2))).await).await;
    assert_eq!(tool_names(&listed), TOOL_NAMES);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_closed_for_idling_comes_back_on_its_next_request_within_the_window() {
    let idle = Duration::from_millis(300);
    let (_, a) = replica(with_secret(Some(SECRET)).with_session_idle_timeout(Some(idle)));
    let session = initialize(&a, json!({})).await;
    tokio::time::sleep(idle * 4).await;
    let (called, _) =
        answer(send(&a, post(&in_session(&session), call(2, "srv__echo"))).await).await;
    assert_eq!(called["result"]["structuredContent"], json!({"text": "hi"}));

    // Without a secret, idling ends the session for good, as it always did.
    let (_, alone) = replica(with_secret(None).with_session_idle_timeout(Some(idle)));
    let session = initialize(&alone, json!({})).await;
    tokio::time::sleep(idle * 4).await;
    let response = send(&alone, post(&in_session(&session), call(3, "srv__echo"))).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}
