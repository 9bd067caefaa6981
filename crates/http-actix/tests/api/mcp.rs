//! `/mcp`: the mount point of the MCP endpoint, driven with a fake `McpHttpHandler`. Requests
//! must reach the handler exactly as sent, answers must reach the client frame by frame while
//! the handler is still producing them, and a client that leaves must stop the handler's body.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use actix_web::body::MessageBody;
use actix_web::http::Version;
use actix_web::test::{self, TestRequest};
use bytes::Bytes;
use futures::FutureExt;
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Full};
use mcpgw_http_actix::{HttpSettings, McpHttpHandler, McpResponseBody, build_server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::support::{Harness, assert_envelope, harness_with};

/// How long a test waits for something that should happen at once before failing.
const DEADLINE: Duration = Duration::from_secs(10);

/// The requests a fake handler received.
type Received = Arc<Mutex<Vec<http::Request<Bytes>>>>;

/// A handler that keeps every request and answers 200 with two `x-answer` headers, a session id
/// and a JSON body.
fn recording_handler() -> (McpHttpHandler, Received) {
    let received: Received = Arc::default();
    let kept = Arc::clone(&received);
    let handler: McpHttpHandler = Arc::new(move |request| {
        kept.lock().unwrap().push(request);
        async {
            http::Response::builder()
                .status(200)
                .header("content-type", "application/json")
                .header("mcp-session-id", "session-from-handler")
                .header("x-answer", "first")
                .header("x-answer", "second")
                .body(
                    Full::new(Bytes::from_static(
                        br#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
                    ))
                    .boxed_unsync(),
                )
                .unwrap()
        }
        .boxed()
    });
    (handler, received)
}

fn harness_with_handler(settings: HttpSettings, handler: McpHttpHandler) -> Harness {
    let mut harness = harness_with(settings);
    harness.state = harness.state.with_mcp_handler(handler);
    harness
}

/// `(name, value)` of every header, sorted, values as text.
fn header_pairs(headers: &http::HeaderMap) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = headers
        .iter()
        .map(|(name, value)| (name.as_str().to_owned(), value.to_str().unwrap().to_owned()))
        .collect();
    pairs.sort();
    pairs
}

#[actix_web::test]
async fn a_post_reaches_the_handler_exactly_as_sent_and_its_answer_comes_back() {
    let (handler, received) = recording_handler();
    let harness = harness_with_handler(HttpSettings::default(), handler);
    // The gateway's public name, so that the Host below is one it answers.
    let hosts = mcpgw_http_actix::AllowedHosts::new([127, 0, 0, 1].into(), &["gateway.test"])
        .expect("a valid host name");
    let app = test::init_service(mcpgw_http_actix::app(
        harness.state.clone().with_allowed_hosts(hosts),
    ))
    .await;
    // Bytes that are not UTF-8 must pass untouched too.
    let body: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\xff\x00\r\n";
    let request = TestRequest::post()
        .uri("/mcp?session=abc&flag=1&encoded=a%20b")
        .insert_header(("host", "gateway.test:8000"))
        .insert_header(("content-type", "application/json"))
        .insert_header(("accept", "application/json, text/event-stream"))
        .insert_header(("mcp-protocol-version", "2025-11-25"))
        .insert_header(("mcp-session-id", "session-42"))
        .append_header(("x-repeated", "one"))
        .append_header(("x-repeated", "two"))
        .append_header(("x-repeated", "three"))
        .set_payload(body)
        .to_request();
    let response = test::call_service(&app, request).await;

    assert_eq!(response.status(), 200);
    let answer_headers: Vec<&str> = response
        .headers()
        .get_all("x-answer")
        .map(|value| value.to_str().unwrap())
        .collect();
    assert_eq!(answer_headers, ["first", "second"]);
    assert_eq!(
        response.headers().get("mcp-session-id").unwrap(),
        "session-from-handler"
    );
    assert_eq!(
        response.headers().get("content-type").unwrap(),
        "application/json"
    );
    let answer = test::read_body(response).await;
    assert_eq!(&answer[..], br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);

    let received = received.lock().unwrap();
    assert_eq!(received.len(), 1, "the handler is called once");
    let request = &received[0];
    assert_eq!(request.method(), http::Method::POST);
    assert_eq!(request.uri(), "/mcp?session=abc&flag=1&encoded=a%20b");
    assert_eq!(
        request.uri().query(),
        Some("session=abc&flag=1&encoded=a%20b")
    );
    assert_eq!(request.version(), http::Version::HTTP_11);
    let repeated: Vec<&str> = request
        .headers()
        .get_all("x-repeated")
        .iter()
        .map(|value| value.to_str().unwrap())
        .collect();
    assert_eq!(
        repeated,
        ["one", "two", "three"],
        "repeated headers keep their order"
    );
    let expected: Vec<(String, String)> = [
        ("accept", "application/json, text/event-stream"),
        ("content-length", &body.len().to_string()),
        ("content-type", "application/json"),
        ("host", "gateway.test:8000"),
        ("mcp-protocol-version", "2025-11-25"),
        ("mcp-session-id", "session-42"),
        ("x-repeated", "one"),
        ("x-repeated", "three"),
        ("x-repeated", "two"),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value.to_owned()))
    .collect();
    assert_eq!(header_pairs(request.headers()), expected);
    assert_eq!(&request.body()[..], body);
}

#[actix_web::test]
async fn get_and_delete_reach_the_handler_with_their_method_and_version() {
    let (handler, received) = recording_handler();
    let harness = harness_with_handler(HttpSettings::default(), handler);
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let get = TestRequest::get()
        .uri("/mcp")
        .insert_header(("accept", "text/event-stream"))
        .insert_header(("last-event-id", "17"))
        .to_request();
    assert_eq!(test::call_service(&app, get).await.status(), 200);
    let delete = TestRequest::delete()
        .uri("/mcp?reason=done")
        .version(Version::HTTP_10)
        .insert_header(("mcp-session-id", "session-42"))
        .to_request();
    assert_eq!(test::call_service(&app, delete).await.status(), 200);

    let received = received.lock().unwrap();
    assert_eq!(received.len(), 2);
    assert_eq!(received[0].method(), http::Method::GET);
    assert_eq!(received[0].uri(), "/mcp");
    assert_eq!(
        header_pairs(received[0].headers()),
        [
            ("accept".to_owned(), "text/event-stream".to_owned()),
            ("last-event-id".to_owned(), "17".to_owned()),
        ]
    );
    assert!(received[0].body().is_empty());
    assert_eq!(received[1].method(), http::Method::DELETE);
    assert_eq!(received[1].uri(), "/mcp?reason=done");
    assert_eq!(received[1].version(), http::Version::HTTP_10);
    assert_eq!(received[1].headers()["mcp-session-id"], "session-42");
}

/// A body whose frames the test sends through a channel, whenever it chooses.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|chunk| Ok(Frame::data(chunk))))
    }
}

/// A handler that answers an event stream whose frames come from a channel; the sending end of
/// each answer's channel is handed to the test.
fn streaming_handler() -> (McpHttpHandler, mpsc::UnboundedReceiver<mpsc::Sender<Bytes>>) {
    let (senders, senders_for_test) = mpsc::unbounded_channel();
    let handler: McpHttpHandler = Arc::new(move |_request| {
        let (frames, body) = mpsc::channel(8);
        senders.send(frames).expect("the test listens");
        async move {
            http::Response::builder()
                .status(200)
                .header("content-type", "text/event-stream")
                .header("cache-control", "no-cache")
                .body(McpResponseBody::new(ChannelBody(body)))
                .unwrap()
        }
        .boxed()
    });
    (handler, senders_for_test)
}

async fn within_deadline<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen within {DEADLINE:?}"))
}

#[actix_web::test]
async fn an_event_stream_reaches_the_client_frame_by_frame() {
    let (handler, mut senders) = streaming_handler();
    let harness = harness_with_handler(HttpSettings::default(), handler);
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let request = TestRequest::get()
        .uri("/mcp")
        .insert_header(("accept", "text/event-stream"))
        .to_request();
    // The head is answered while the body has not produced a single frame.
    let response = within_deadline("the head", test::call_service(&app, request)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers().get("content-type").unwrap(),
        "text/event-stream"
    );
    let frames = senders.recv().await.expect("the handler was called");
    let mut body = Box::pin(response.into_body());

    assert!(
        next_frame(&mut body).now_or_never().is_none(),
        "a frame arrived before one was sent"
    );
    frames
        .send(Bytes::from_static(b"data: first\n\n"))
        .await
        .unwrap();
    let first = within_deadline("the first frame", next_frame(&mut body)).await;
    assert_eq!(first.as_deref(), Some(&b"data: first\n\n"[..]));
    // Only now that the first frame has arrived is the last one sent.
    assert!(next_frame(&mut body).now_or_never().is_none());
    frames
        .send(Bytes::from_static(b"data: last\n\n"))
        .await
        .unwrap();
    let last = within_deadline("the last frame", next_frame(&mut body)).await;
    assert_eq!(last.as_deref(), Some(&b"data: last\n\n"[..]));
    drop(frames);
    assert_eq!(
        within_deadline("the end of the stream", next_frame(&mut body)).await,
        None
    );
}

/// The next chunk of an actix body, `None` at its end.
fn next_frame<B: MessageBody>(body: &mut Pin<Box<B>>) -> impl Future<Output = Option<Bytes>> + '_ {
    futures::future::poll_fn(move |cx| body.as_mut().poll_next(cx)).map(|chunk| {
        chunk.map(|chunk| {
            chunk.unwrap_or_else(|error| panic!("the body failed: {:?}", error.into()))
        })
    })
}

/// Reads from `stream` into `seen` until `seen` contains `wanted`.
async fn read_until(stream: &mut TcpStream, seen: &mut Vec<u8>, wanted: &str) {
    within_deadline(&format!("receiving {wanted:?}"), async {
        let mut buffer = [0u8; 4096];
        while !String::from_utf8_lossy(seen).contains(wanted) {
            let read = stream.read(&mut buffer).await.expect("the socket reads");
            assert!(
                read > 0,
                "the server closed the connection before {wanted:?}: {}",
                String::from_utf8_lossy(seen)
            );
            seen.extend_from_slice(&buffer[..read]);
        }
    })
    .await;
}

async fn start_server(harness: &Harness) -> (SocketAddr, actix_web::dev::ServerHandle) {
    let settings = HttpSettings {
        workers: 1,
        ..harness.state.settings().clone()
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let server = build_server(harness.state.clone(), listener, &settings).unwrap();
    let handle = server.handle();
    actix_web::rt::spawn(server);
    (address, handle)
}

#[actix_web::test]
async fn over_a_real_socket_frames_are_not_held_back_and_a_leaving_client_stops_the_body() {
    let (handler, mut senders) = streaming_handler();
    let harness = harness_with_handler(HttpSettings::default(), handler);
    let (address, server) = start_server(&harness).await;

    let mut client = TcpStream::connect(address).await.unwrap();
    client
        .write_all(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
        .await
        .unwrap();
    let frames = within_deadline("the handler call", senders.recv())
        .await
        .expect("the handler was called");
    let mut seen = Vec::new();
    read_until(&mut client, &mut seen, "\r\n\r\n").await;
    let head = String::from_utf8_lossy(&seen).to_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    assert!(head.contains("content-type: text/event-stream"), "{head}");

    frames
        .send(Bytes::from_static(b"data: first\n\n"))
        .await
        .unwrap();
    read_until(&mut client, &mut seen, "data: first").await;
    // The first frame is on the client's side of the socket before the second is sent.
    frames
        .send(Bytes::from_static(b"data: second\n\n"))
        .await
        .unwrap();
    read_until(&mut client, &mut seen, "data: second").await;

    // The client leaves while the stream is open: the handler's body is dropped, which closes
    // its channel.
    drop(client);
    within_deadline("dropping the body after the client left", frames.closed()).await;

    server.stop(true).await;
}

#[actix_web::test]
async fn over_a_real_socket_a_chunked_request_body_arrives_whole() {
    let (handler, received) = recording_handler();
    let harness = harness_with_handler(
        HttpSettings {
            max_mcp_body_bytes: 64,
            ..HttpSettings::default()
        },
        handler,
    );
    let (address, server) = start_server(&harness).await;

    let mut client = TcpStream::connect(address).await.unwrap();
    client
        .write_all(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n\
              10\r\n{\"jsonrpc\":\"2.0\"\r\n",
        )
        .await
        .unwrap();
    client.flush().await.unwrap();
    // The second chunk comes in a later write, so the server reads the body in two parts.
    client
        .write_all(b"A\r\n,\"id\":\"x\"}\r\n0\r\n\r\n")
        .await
        .unwrap();
    let mut seen = Vec::new();
    read_until(&mut client, &mut seen, "\"result\"").await;
    assert!(String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200"));
    assert_eq!(
        &received.lock().unwrap()[0].body()[..],
        br#"{"jsonrpc":"2.0","id":"x"}"#
    );

    // Above the limit without a declared length: refused once the limit is passed.
    let mut client = TcpStream::connect(address).await.unwrap();
    let chunk = "x".repeat(40);
    client
        .write_all(
            format!(
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n\
                 28\r\n{chunk}\r\n28\r\n{chunk}\r\n0\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let mut seen = Vec::new();
    read_until(&mut client, &mut seen, "PayloadTooLargeError").await;
    assert!(String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 413"));
    assert_eq!(
        received.lock().unwrap().len(),
        1,
        "the handler saw no second call"
    );

    server.stop(true).await;
}

#[actix_web::test]
async fn without_a_handler_every_method_answers_404_not_enabled() {
    let harness = harness_with(HttpSettings::default());
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    for request in [
        TestRequest::get(),
        TestRequest::post().set_payload("{}"),
        TestRequest::delete(),
        TestRequest::put(),
        TestRequest::default().method(actix_web::http::Method::OPTIONS),
    ] {
        let response = test::call_service(&app, request.uri("/mcp").to_request()).await;
        let message = assert_envelope(response, 404, "NotFoundError").await;
        assert!(message.contains("MCP endpoint"), "{message}");
        assert!(message.contains("not enabled"), "{message}");
    }
}

#[actix_web::test]
async fn a_body_above_the_mcp_limit_answers_413_without_calling_the_handler() {
    let (handler, received) = recording_handler();
    let harness = harness_with_handler(
        HttpSettings {
            max_mcp_body_bytes: 64,
            ..HttpSettings::default()
        },
        handler,
    );
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;

    let at_limit = TestRequest::post()
        .uri("/mcp")
        .set_payload("x".repeat(64))
        .to_request();
    assert_eq!(test::call_service(&app, at_limit).await.status(), 200);
    assert_eq!(received.lock().unwrap()[0].body().len(), 64);

    // Refused from the declared length.
    let declared = TestRequest::post()
        .uri("/mcp")
        .set_payload("x".repeat(65))
        .to_request();
    let message = assert_envelope(
        test::call_service(&app, declared).await,
        413,
        "PayloadTooLargeError",
    )
    .await;
    assert!(message.contains("64 bytes"), "{message}");

    // Refused from what arrived, when no length is declared.
    let mut undeclared = TestRequest::post()
        .uri("/mcp")
        .set_payload("x".repeat(65))
        .to_request();
    undeclared
        .headers_mut()
        .remove(actix_web::http::header::CONTENT_LENGTH);
    assert_envelope(
        test::call_service(&app, undeclared).await,
        413,
        "PayloadTooLargeError",
    )
    .await;
    assert_eq!(
        received.lock().unwrap().len(),
        1,
        "only the body at the limit got through"
    );
}

#[actix_web::test]
async fn the_mcp_limit_is_four_mebibytes_and_independent_of_the_rest_limit() {
    let (handler, received) = recording_handler();
    let harness = harness_with_handler(HttpSettings::default(), handler);
    assert_eq!(harness.state.settings().max_mcp_body_bytes, 4 * 1024 * 1024);
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    // Above the REST API's 1 MiB, within 4 MiB.
    let fits = TestRequest::post()
        .uri("/mcp")
        .set_payload(vec![b'x'; 4 * 1024 * 1024])
        .to_request();
    assert_eq!(test::call_service(&app, fits).await.status(), 200);
    assert_eq!(received.lock().unwrap()[0].body().len(), 4 * 1024 * 1024);
    let oversized = TestRequest::post()
        .uri("/mcp")
        .set_payload(vec![b'x'; 4 * 1024 * 1024 + 1])
        .to_request();
    assert_envelope(
        test::call_service(&app, oversized).await,
        413,
        "PayloadTooLargeError",
    )
    .await;
}

#[actix_web::test]
async fn other_methods_answer_405_and_options_names_the_methods() {
    let (handler, received) = recording_handler();
    let harness = harness_with_handler(HttpSettings::default(), handler);
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    for request in [TestRequest::put().set_payload("{}"), TestRequest::patch()] {
        let response = test::call_service(&app, request.uri("/mcp").to_request()).await;
        assert_eq!(
            response.headers().get("allow").unwrap(),
            "GET, POST, DELETE, OPTIONS"
        );
        assert_envelope(response, 405, "MethodNotAllowedError").await;
    }
    let options = TestRequest::default()
        .method(actix_web::http::Method::OPTIONS)
        .uri("/mcp")
        .to_request();
    let response = test::call_service(&app, options).await;
    assert_eq!(response.status(), 204);
    assert_eq!(
        response.headers().get("allow").unwrap(),
        "GET, POST, DELETE, OPTIONS"
    );
    assert!(
        received.lock().unwrap().is_empty(),
        "the handler only sees its own methods"
    );
}

#[actix_web::test]
async fn mcp_requests_are_counted_under_the_route_template() {
    let (handler, _received) = recording_handler();
    let harness = harness_with_handler(HttpSettings::default(), handler);
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let call = TestRequest::post()
        .uri("/mcp?unbounded=caller-input-in-the-query")
        .set_payload("{}")
        .to_request();
    assert_eq!(test::call_service(&app, call).await.status(), 200);
    let response = test::call_service(&app, TestRequest::get().uri("/metrics").to_request()).await;
    let page = String::from_utf8(test::read_body(response).await.to_vec()).unwrap();
    assert!(
        page.contains(r#"mcpgw_http_requests_total{method="POST",route="/mcp",status="200"}"#),
        "{page}"
    );
    assert!(!page.contains("caller-input-in-the-query"), "{page}");
}
