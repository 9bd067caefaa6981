//! End-to-end tests of the HTTP front against hostile input: the real binary on a free port,
//! raw TCP clients that lie, stall, flood and send garbage, and WebSocket abusers.
//!
//! Every hostile request must be answered with the API's error envelope, or refused at the
//! protocol level (a bare 4xx and a closed connection), or cut off; never a 500, a panic, a hang
//! or a gateway that stops serving. After each, a normal request is served promptly, and where
//! the input is large the gateway's resident memory (VmRSS and its peak VmHWM, from
//! /proc/<pid>/status) stays within a stated bound.
//!
//! The web console's routes (section 8) answer with its HTML error page instead (the status,
//! and the error's name in `data-error`), or with the envelope where the checks in front of
//! every route answer first (an oversized header, a foreign `Host`).

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use mcpgw_http_actix::HttpSettings;
use serde_json::Value;
use support::{RunningGateway, cli_key, fixture_server_yaml, gateway, process_alive};
use tungstenite::{Message, WebSocket};

/// How long a normal request may take while the gateway is under attack (a loaded 2-core
/// machine included).
const PROMPTLY: Duration = Duration::from_secs(3);

/// How much the gateway's peak resident memory may grow while it refuses one oversized input:
/// well under the size of the inputs (16 to 20 MiB), so an input buffered whole fails it.
const MEMORY_BOUND_KIB: u64 = 10 * 1024;

/// What the gateway may take in answer to anything: a hang is a failure.
const ANSWER_WITHIN: Duration = Duration::from_secs(30);

const MIB: usize = 1024 * 1024;

/// A gateway with one fixture server, `demo`, that only the tests start.
fn start() -> RunningGateway {
    start_with(&[])
}

fn start_with(env: &[(&str, &str)]) -> RunningGateway {
    let mut builder = gateway().config(&format!(
        "probe_tools: false\nmcp_servers:\n{}",
        fixture_server_yaml("demo", &[])
    ));
    for (key, value) in env {
        builder = builder.env(key, value);
    }
    builder.start()
}

fn address(gw: &RunningGateway) -> String {
    gw.base_url.trim_start_matches("http://").to_owned()
}

fn connect(gw: &RunningGateway) -> TcpStream {
    let stream = TcpStream::connect(address(gw)).expect("the gateway accepts connections");
    stream.set_read_timeout(Some(ANSWER_WITHIN)).unwrap();
    stream.set_write_timeout(Some(ANSWER_WITHIN)).unwrap();
    stream
}

/// One HTTP answer read off a raw connection.
#[derive(Debug)]
struct Raw {
    status: u16,
    /// The status line and the header lines, as sent.
    head: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// What a hostile request got: an answer, or a connection the gateway closed or reset.
#[derive(Debug)]
enum Reply {
    Answered(Raw),
    CutOff(String),
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

fn is_timeout(error: &std::io::Error) -> bool {
    matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// Reads one answer; fails (a hang) when nothing conclusive arrives within the stream's read
/// timeout.
fn read_reply(stream: &mut TcpStream) -> Reply {
    let mut buffer = Vec::new();
    let mut chunk = [0_u8; 16 * 1024];
    let mut fill = |buffer: &mut Vec<u8>| -> Result<usize, String> {
        match stream.read(&mut chunk) {
            Ok(0) => Ok(0),
            Ok(read) => {
                buffer.extend_from_slice(&chunk[..read]);
                Ok(read)
            }
            Err(error) if is_timeout(&error) => {
                panic!("the gateway neither answered nor closed the connection (a hang)")
            }
            Err(error) => Err(error.to_string()),
        }
    };
    let head_end = loop {
        if let Some(end) = find(&buffer, b"\r\n\r\n") {
            break end;
        }
        match fill(&mut buffer) {
            Ok(0) => {
                return Reply::CutOff(format!("closed after {} bytes of answer", buffer.len()));
            }
            Ok(_) => {}
            Err(error) => return Reply::CutOff(error),
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP status line: {head}"));
    let headers: Vec<(String, String)> = lines
        .map(|line| {
            let (name, value) = line
                .split_once(':')
                .unwrap_or_else(|| panic!("a header line without a colon: {line:?} in {head}"));
            (name.to_owned(), value.trim().to_owned())
        })
        .collect();
    let mut body = buffer[head_end + 4..].to_vec();
    let length = headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .map(|(_, value)| value.parse::<usize>().unwrap());
    let chunked = headers.iter().any(|(name, value)| {
        name.eq_ignore_ascii_case("transfer-encoding") && value.contains("chunked")
    });
    loop {
        let complete = match length {
            Some(length) => body.len() >= length,
            None if chunked => body.ends_with(b"0\r\n\r\n"),
            None => false,
        };
        if complete || status == 101 {
            break;
        }
        match fill(&mut body) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    if chunked {
        body = dechunk(&body);
    } else if let Some(length) = length {
        // What follows belongs to the next answer on the connection.
        body.truncate(length);
    }
    Reply::Answered(Raw {
        status,
        head,
        headers,
        body,
    })
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(line_end) = find(data, b"\r\n") {
        let size_text = String::from_utf8_lossy(&data[..line_end]);
        let Ok(size) = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16)
        else {
            break;
        };
        data = &data[line_end + 2..];
        if size == 0 || data.len() < size {
            break;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[(size + 2).min(data.len())..];
    }
    out
}

/// Sends `request` whole on a new connection and reads the answer.
fn exchange(gw: &RunningGateway, request: &[u8]) -> Reply {
    let mut stream = connect(gw);
    if let Err(error) = stream.write_all(request) {
        return Reply::CutOff(format!("the gateway stopped reading: {error}"));
    }
    read_reply(&mut stream)
}

fn get_raw(gw: &RunningGateway, target: &str) -> Reply {
    exchange(
        gw,
        format!("GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

/// Asserts the API's error envelope with one of `statuses`; answers its JSON.
#[track_caller]
fn assert_envelope(reply: &Reply, statuses: &[u16], error: Option<&str>) -> Value {
    let Reply::Answered(raw) = reply else {
        panic!("expected an envelope {statuses:?}, the connection was cut: {reply:?}");
    };
    assert!(
        statuses.contains(&raw.status),
        "status {} not in {statuses:?}: {}",
        raw.status,
        raw.text()
    );
    assert!(
        raw.header("content-type")
            .is_some_and(|value| value.starts_with("application/json")),
        "{}",
        raw.head
    );
    let body: Value = serde_json::from_slice(&raw.body)
        .unwrap_or_else(|problem| panic!("not JSON ({problem}): {}", raw.text()));
    assert_eq!(body["status_code"], raw.status, "{body}");
    assert!(body["error"].is_string(), "{body}");
    let message = body["message"].as_str().expect("a message");
    assert!(!message.is_empty() && message.len() < 2048, "{message}");
    if let Some(error) = error {
        assert_eq!(body["error"], error, "{body}");
    }
    body
}

/// Waits for each slow client's thread (which answers how long the gateway let it hang on) and
/// checks that the gateway cut every one off within `timeout` and a little slack.
fn assert_all_cut_off(clients: Vec<thread::JoinHandle<Duration>>, timeout: Duration, what: &str) {
    for handle in clients {
        let took = handle.join().unwrap();
        eprintln!("{what} was cut off after {took:?}");
        assert!(
            took <= timeout + Duration::from_secs(3),
            "{what}: cut off after {took:?}, timeout {timeout:?}"
        );
    }
}

/// A normal request on a new connection is answered 200 within [`PROMPTLY`].
#[track_caller]
fn assert_serves_promptly(gw: &RunningGateway) {
    assert!(
        process_alive(gw.pid()),
        "the gateway died:\n{}",
        gw.stderr()
    );
    let began = Instant::now();
    let reply = get_raw(gw, "/api/mcp_servers");
    let took = began.elapsed();
    match reply {
        Reply::Answered(raw) => assert_eq!(raw.status, 200, "{}", raw.text()),
        Reply::CutOff(why) => panic!("a normal request was cut off: {why}"),
    }
    assert!(took < PROMPTLY, "a normal request took {took:?}");
}

/// A field of /proc/<pid>/status in KiB (`VmRSS`, `VmHWM`).
fn memory_kib(pid: i32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Brings the gateway to its steady state before a memory measure, so that one-time costs
/// (worker threads' first allocations, buffers that grow once) are not counted: every worker
/// has served requests, read a body, refused one over the limit and held a WebSocket.
fn warm_up(gw: &RunningGateway) {
    for _ in 0..4 {
        assert_serves_promptly(gw);
        let mut small = head("POST", "/api/mcp_servers", "Content-Length: 2\r\n").into_bytes();
        small.extend_from_slice(b"{}");
        assert_envelope(&exchange(gw, &small), &[422], None);
        let _ = chunked_body(
            gw,
            &head("POST", "/api/mcp_servers", "Transfer-Encoding: chunked\r\n"),
            2 * MIB,
        );
        drop(ws_connect(gw, ""));
    }
}

/// Warms the gateway up, runs `attack` and asserts that the gateway's peak resident memory
/// grew by less than `bound_kib` over its resident memory before.
#[track_caller]
fn within_memory<T>(gw: &RunningGateway, bound_kib: u64, attack: impl FnOnce() -> T) -> T {
    warm_up(gw);
    let before = memory_kib(gw.pid(), "VmRSS").max(memory_kib(gw.pid(), "VmHWM"));
    let outcome = attack();
    let peak = memory_kib(gw.pid(), "VmHWM");
    let grown = peak.saturating_sub(before);
    eprintln!("memory: VmRSS before {before} KiB, VmHWM after {peak} KiB, grown {grown} KiB");
    assert!(
        grown < bound_kib,
        "the gateway's peak memory grew by {grown} KiB (bound {bound_kib} KiB)"
    );
    outcome
}

/// Writes `total` bytes of `fill` in 64 KiB pieces until done or the gateway stops reading;
/// answers how many went out.
fn push_bytes(stream: &mut TcpStream, total: usize, fill: u8) -> usize {
    let piece = vec![fill; 64 * 1024];
    let mut sent = 0;
    while sent < total {
        let size = piece.len().min(total - sent);
        if stream.write_all(&piece[..size]).is_err() {
            break;
        }
        sent += size;
    }
    sent
}

fn head(method: &str, target: &str, extra: &str) -> String {
    format!(
        "{method} {target} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\n{extra}\r\n"
    )
}

fn mcp_head(extra: &str) -> String {
    head(
        "POST",
        "/mcp",
        &format!("MCP-Protocol-Version: 2026-07-28\r\n{extra}"),
    )
}

/// A whole POST of `body` to /mcp with the `Host` the endpoint accepts (its own address), so
/// that the body itself is judged; `extra` are more header lines.
fn mcp_post(gw: &RunningGateway, extra: &str, body: &[u8]) -> Vec<u8> {
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\n{extra}\
         Content-Length: {}\r\n\r\n",
        address(gw),
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    request
}

/// Sends `head` (which declares the body's length), then `body_size` bytes of body from another
/// thread (the gateway may answer before it has read them all); answers the reply.
fn declared_body(gw: &RunningGateway, head: &str, body_size: usize) -> Reply {
    send_while_reading(gw, head, move |writer| {
        push_bytes(writer, body_size, b' ');
    })
}

/// Sends `total` bytes of body as 64 KiB chunks of chunked transfer encoding, from another
/// thread; answers the reply.
fn chunked_body(gw: &RunningGateway, head: &str, total: usize) -> Reply {
    send_while_reading(gw, head, move |writer| {
        let mut chunk = format!("{:x}\r\n", 64 * 1024).into_bytes();
        chunk.extend(std::iter::repeat_n(b' ', 64 * 1024));
        chunk.extend_from_slice(b"\r\n");
        let mut sent = 0;
        while sent < total {
            if writer.write_all(&chunk).is_err() {
                return;
            }
            sent += 64 * 1024;
        }
        let _ = writer.write_all(b"0\r\n\r\n");
    })
}

/// Sends `head`, then lets `push` write the body from another thread while this one reads the
/// reply (the gateway may answer, and close, before the body is all sent).
fn send_while_reading(
    gw: &RunningGateway,
    head: &str,
    push: impl FnOnce(&mut TcpStream) + Send + 'static,
) -> Reply {
    let mut stream = connect(gw);
    stream.write_all(head.as_bytes()).unwrap();
    let mut writer = stream.try_clone().unwrap();
    writer
        .set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let pusher = thread::spawn(move || push(&mut writer));
    let reply = read_reply(&mut stream);
    drop(stream);
    let _ = pusher.join();
    reply
}

// ---------------------------------------------------------------------------------------------
// 1. Oversized bodies

/// Bad input: a 20 MiB body on POST /api/mcp_servers, announced by its Content-Length and then
/// actually sent.
#[test]
fn a_body_far_over_the_limit_is_refused_with_413_and_never_buffered() {
    let gw = start();
    let reply = within_memory(&gw, MEMORY_BOUND_KIB, || {
        declared_body(
            &gw,
            &head(
                "POST",
                "/api/mcp_servers",
                &format!("Content-Length: {}\r\n", 20 * MIB),
            ),
            20 * MIB,
        )
    });
    let body = assert_envelope(&reply, &[413], Some("PayloadTooLargeError"));
    let limit = HttpSettings::default().max_body_bytes;
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains(&limit.to_string()),
        "names the limit: {body}"
    );
    assert_serves_promptly(&gw);
}

/// Bad input: a chunked body of 20 MiB (no Content-Length, so the gateway only learns its size
/// by reading it) on POST /api/mcp_servers and on PUT /api/mcp_servers/demo.
#[test]
fn a_chunked_body_over_the_limit_is_cut_at_the_limit() {
    let gw = start();
    for (method, target) in [
        ("POST", "/api/mcp_servers"),
        ("PUT", "/api/mcp_servers/demo"),
    ] {
        let began = Instant::now();
        let reply = within_memory(&gw, MEMORY_BOUND_KIB, || {
            chunked_body(
                &gw,
                &head(method, target, "Transfer-Encoding: chunked\r\n"),
                20 * MIB,
            )
        });
        // The gateway stops at the limit: either it answers 413 or it drops the connection
        // while the client is still sending.
        if let Reply::Answered(_) = reply {
            assert_envelope(&reply, &[413], Some("PayloadTooLargeError"));
        }
        assert!(
            began.elapsed() < Duration::from_secs(15),
            "{method} {target}"
        );
        assert_serves_promptly(&gw);
    }
}

/// Bad input: a Content-Length shorter than the body sent (the rest of the body then looks like
/// the next request), and a Content-Length longer than the body sent (the gateway waits for
/// bytes that never come).
#[test]
fn a_lying_content_length_is_refused_or_cut_off() {
    let gw = start();
    let body = r#"{"mcp_server_id":"liar","mode":"subprocess","command":["true"]}"#;

    // Shorter: the gateway reads 10 bytes of JSON, which is not a whole document.
    let mut request = head("POST", "/api/mcp_servers", "Content-Length: 10\r\n").into_bytes();
    request.extend_from_slice(body.as_bytes());
    let reply = exchange(&gw, &request);
    let answer = assert_envelope(&reply, &[422], Some("ValidationError"));
    assert!(
        answer["message"].as_str().unwrap().contains("JSON"),
        "{answer}"
    );
    assert_eq!(
        gw.get("/api/mcp_servers/liar").status,
        404,
        "nothing created"
    );

    // Longer: 20 of 1000 bytes arrive, then the client stalls with the connection open.
    let timeout = HttpSettings::default().client_body_timeout;
    let mut stream = connect(&gw);
    stream
        .write_all(head("POST", "/api/mcp_servers", "Content-Length: 1000\r\n").as_bytes())
        .unwrap();
    stream.write_all(&body.as_bytes()[..20]).unwrap();
    let began = Instant::now();
    let reply = read_reply(&mut stream);
    let took = began.elapsed();
    if let Reply::Answered(_) = reply {
        assert_envelope(&reply, &[408], Some("RequestTimeoutError"));
    }
    assert!(
        took < timeout + Duration::from_secs(3),
        "the stalled body was cut after {took:?} (timeout {timeout:?})"
    );
    eprintln!("a stalled body was cut off after {took:?}");
    assert_serves_promptly(&gw);
}

/// Bad input: bodies over the MCP endpoint's limit on POST /mcp, announced (20 MiB) and chunked
/// (6 MiB, over the 4 MiB limit).
#[test]
fn an_oversized_post_to_mcp_is_refused_with_413() {
    let gw = start();
    let reply = within_memory(&gw, MEMORY_BOUND_KIB, || {
        declared_body(
            &gw,
            &mcp_head(&format!("Content-Length: {}\r\n", 20 * MIB)),
            20 * MIB,
        )
    });
    assert_envelope(&reply, &[413], Some("PayloadTooLargeError"));
    assert_serves_promptly(&gw);

    let limit = HttpSettings::default().max_mcp_body_bytes;
    let reply = within_memory(&gw, MEMORY_BOUND_KIB, || {
        chunked_body(
            &gw,
            &mcp_head("Transfer-Encoding: chunked\r\n"),
            limit + 2 * MIB,
        )
    });
    if let Reply::Answered(_) = reply {
        assert_envelope(&reply, &[413], Some("PayloadTooLargeError"));
    }
    assert_serves_promptly(&gw);
}

// ---------------------------------------------------------------------------------------------
// 2. Deep JSON nesting

/// Bad input: 100,000 nested arrays, and 50,000 nested objects, as the body of REST calls and
/// of a JSON-RPC message (a recursive parser without a depth limit overflows its stack).
#[test]
fn deeply_nested_json_is_refused_without_a_stack_overflow() {
    let gw = start();
    let arrays = "[".repeat(100_000);
    let objects = r#"{"a":"#.repeat(50_000);
    for body in [&arrays, &objects] {
        for (method, target) in [
            ("POST", "/api/mcp_servers"),
            ("PUT", "/api/mcp_servers/demo"),
            ("POST", "/api/groups"),
        ] {
            let mut request = head(
                method,
                target,
                &format!("Content-Length: {}\r\n", body.len()),
            )
            .into_bytes();
            request.extend_from_slice(body.as_bytes());
            let reply = exchange(&gw, &request);
            assert_envelope(&reply, &[422, 413], Some("ValidationError"));
        }
        let request = mcp_post(&gw, "MCP-Protocol-Version: 2026-07-28\r\n", body.as_bytes());
        assert_json_rpc_error(&exchange(&gw, &request), -32700, "deep nesting on /mcp");
        assert_serves_promptly(&gw);
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Path traversal and odd ids

/// Bad input: ids that try to climb out of the path (encoded and raw `..`), NUL bytes, a 10 KB
/// id, unicode and invalid UTF-8, and `__` (the tool-name separator) inside, on every route that
/// takes an id.
#[test]
fn odd_ids_in_paths_answer_404_or_422_envelopes_and_read_no_file() {
    let gw = start();
    let long = "a".repeat(10 * 1024);
    let ids = [
        "..%2F..%2Fetc%2Fpasswd",
        "..%2f..%2f..%2f..%2fetc%2fpasswd",
        "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        "....%2F%2Fetc%2Fpasswd",
        "demo%00",
        "%00",
        "demo%00.yaml",
        long.as_str(),
        "%C3%A9t%C3%A9",
        "%F0%9F%92%A5",
        "%FF%FE",
        "a__b",
        "demo__echo",
        "%20demo",
        "demo%0d%0aX-Injected:%201",
    ];
    let mut checked = 0;
    for id in ids {
        for (method, suffix) in [
            ("GET", ""),
            ("DELETE", ""),
            ("POST", "/start"),
            ("POST", "/stop"),
            ("GET", "/tools"),
            ("GET", "/logs"),
            ("GET", "/health"),
        ] {
            for collection in ["/api/mcp_servers/", "/api/groups/"] {
                if collection == "/api/groups/" && !suffix.is_empty() {
                    continue;
                }
                let target = format!("{collection}{id}{suffix}");
                let reply = exchange(
                    &gw,
                    format!(
                        "{method} {target} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\
                         Connection: close\r\n\r\n"
                    )
                    .as_bytes(),
                );
                let body = assert_envelope(&reply, &[404, 422], None);
                assert!(!body.to_string().contains("root:"), "{target}: {body}");
                checked += 1;
            }
        }
    }
    // Raw, unnormalized `..` segments and traversal into the documentation's assets.
    for target in [
        "/api/mcp_servers/../../../../etc/passwd",
        "/api/../../etc/passwd",
        "/docs/../../../../etc/passwd",
        "/docs/..%2F..%2F..%2F..%2Fetc%2Fpasswd",
        "/docs/%2e%2e/%2e%2e/etc/passwd",
        "/api/openapi.json/../../etc/passwd",
    ] {
        let reply = get_raw(&gw, target);
        let body = assert_envelope(&reply, &[404, 422], None);
        assert!(!body.to_string().contains("root:"), "{target}: {body}");
        checked += 1;
    }
    assert!(checked > 100);
    // The registry is unchanged: `demo` alone, still cold.
    let listed = gw.get("/api/mcp_servers").json();
    assert_eq!(
        listed["mcp_servers"].as_array().unwrap().len(),
        1,
        "{listed}"
    );
    assert_serves_promptly(&gw);
}

// ---------------------------------------------------------------------------------------------
// 4. Header injection and huge headers

/// Asserts that no header of `raw` was split or injected: every line is `name: value`, no
/// value holds a CR or LF, and no header named by the attacker exists.
#[track_caller]
fn assert_unsplit(raw: &Raw) {
    for (name, value) in &raw.headers {
        assert!(
            !name.is_empty() && name.bytes().all(|byte| byte.is_ascii_graphic()),
            "a split header line: {:?}",
            raw.head
        );
        assert!(!value.contains(['\r', '\n']), "{value:?}");
        assert!(
            !name.eq_ignore_ascii_case("x-injected") && !name.eq_ignore_ascii_case("set-cookie"),
            "an injected header: {}",
            raw.head
        );
    }
}

/// Bad input: CR and LF smuggled into header values, raw (bare CR, bare LF, obs-fold) and
/// percent-encoded (in Origin, which CORS echoes, in X-Request-Id, in Host, and in query
/// parameters that messages repeat).
#[test]
fn header_values_are_never_reflected_with_line_breaks() {
    let gw = start_with(&[("MCP_CORS_ORIGINS", "*")]);

    // An allowed origin is echoed exactly as it came, and cannot carry a line break.
    let origin = "http://a.example%0d%0aX-Injected:%201";
    let reply = exchange(
        &gw,
        format!(
            "GET /api/mcp_servers HTTP/1.1\r\nHost: localhost\r\nOrigin: {origin}\r\n\
             X-Request-Id: abc%0d%0aSet-Cookie:%20pwned=1\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    );
    let Reply::Answered(raw) = &reply else {
        panic!("{reply:?}")
    };
    assert_eq!(raw.status, 200, "{}", raw.text());
    assert_unsplit(raw);
    if let Some(echoed) = raw.header("access-control-allow-origin") {
        assert_eq!(echoed, origin);
    }

    // Raw line breaks inside values: a bare CR, a bare LF, an obsolete folded line.
    let raw_attacks: [&[u8]; 4] = [
        b"GET /api/mcp_servers HTTP/1.1\r\nHost: localhost\r\nOrigin: http://a.example\rX-Injected: 1\r\nConnection: close\r\n\r\n",
        b"GET /api/mcp_servers HTTP/1.1\r\nHost: localhost\r\nOrigin: http://a.example\nX-Injected: 1\r\nConnection: close\r\n\r\n",
        b"GET /api/mcp_servers HTTP/1.1\r\nHost: localhost\r\nOrigin: http://a.example\r\n X-Injected: 1\r\nConnection: close\r\n\r\n",
        b"GET /api/mcp_servers HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: a\r\n\tSet-Cookie: pwned=1\r\nConnection: close\r\n\r\n",
    ];
    for attack in raw_attacks {
        let reply = exchange(&gw, attack);
        if let Reply::Answered(raw) = &reply {
            assert!(raw.status < 500, "{}: {}", raw.status, raw.text());
            assert_unsplit(raw);
            if let Some(echoed) = raw.header("access-control-allow-origin") {
                assert!(!echoed.contains("Injected"), "{echoed:?}");
            }
        }
    }

    // A preflight from an origin with an encoded line break.
    let reply = exchange(
        &gw,
        format!(
            "OPTIONS /api/mcp_servers HTTP/1.1\r\nHost: localhost\r\nOrigin: {origin}\r\n\
             Access-Control-Request-Method: POST\r\n\
             Access-Control-Request-Headers: x-a%0d%0aX-Injected: 1\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    );
    if let Reply::Answered(raw) = &reply {
        assert!(raw.status < 500, "{}", raw.text());
        assert_unsplit(raw);
    }

    // A hostile Host: no answer builds an absolute URL from it.
    for target in ["/docs", "/docs/", "/api/openapi.json", "/api/nope", "/mcp"] {
        let reply = exchange(
            &gw,
            format!(
                "GET {target} HTTP/1.1\r\nHost: evil.example%0d%0aX-Injected:%201\r\n\
                 Connection: close\r\n\r\n"
            )
            .as_bytes(),
        );
        if let Reply::Answered(raw) = &reply {
            assert!(raw.status < 500, "{target}: {}", raw.text());
            assert_unsplit(raw);
            assert!(
                !raw.text().contains("evil.example%0d%0a"),
                "{target} reflects the Host: {}",
                raw.text()
            );
        }
    }

    // Encoded line breaks in query parameters come back, if at all, JSON-escaped in the body.
    for target in [
        "/api/mcp_servers?state=x%0d%0aX-Injected:%201",
        "/api/mcp_servers/demo/logs?lines=1%0d%0aX-Injected:%201",
        "/api/ws/events?event_types=x%0d%0aX-Injected:%201",
    ] {
        let reply = get_raw(&gw, target);
        let body = assert_envelope(&reply, &[422], Some("ValidationError"));
        let Reply::Answered(raw) = &reply else {
            unreachable!()
        };
        assert_unsplit(raw);
        assert!(!body["message"].as_str().unwrap().contains('\r'), "{body}");
    }
    assert_serves_promptly(&gw);
}

/// Bad input: a credential in `?api_key=` (the event stream accepts one there): it must not
/// reach the log, whatever the log level.
#[test]
fn an_api_key_in_the_query_string_is_never_logged() {
    let gw = start_with(&[("MCP_LOG", "debug")]);
    let secret = "mcp_NeverLogThisSecretValue0123456789abcdefXYZ";
    let mut client = ws_connect(&gw, &format!("api_key={secret}"));
    client
        .send(Message::text(r#"{"type":"subscribe","event_types":[]}"#))
        .unwrap();
    let _ = next_text(&mut client, Duration::from_secs(10));
    drop(client);
    for target in [
        format!("/api/mcp_servers?api_key={secret}"),
        format!("/api/ws/events?api_key={secret}"),
        format!("/api/nope?api_key={secret}"),
        format!("/mcp?api_key={secret}"),
    ] {
        let reply = get_raw(&gw, &target);
        if let Reply::Answered(raw) = &reply {
            assert!(raw.status < 500, "{target}: {}", raw.text());
            assert!(!raw.text().contains(secret), "{target} echoes the key");
        }
    }
    assert_serves_promptly(&gw);
    // Give the log writer a moment to flush what the requests produced.
    thread::sleep(Duration::from_millis(300));
    let log = gw.stderr();
    assert!(!log.is_empty());
    assert!(
        !log.contains("NeverLogThisSecretValue"),
        "the key is in the log"
    );
}

/// Bad input: a 64 KiB header value, 90 headers of 1 KiB, 200 KiB of headers, and 200 headers:
/// each is refused with 431 (or another 4xx), never served and never a 500.
#[test]
fn huge_headers_are_refused_with_431() {
    let gw = start();
    let limit = HttpSettings::default().max_header_bytes;
    let one_big = format!("X-Big: {}\r\n", "a".repeat(64 * 1024));
    let ninety: String = (0..90)
        .map(|index| format!("X-Many-{index}: {}\r\n", "b".repeat(1024)))
        .collect();
    let two_hundred_kib = format!("X-Big: {}\r\n", "c".repeat(200 * 1024));
    let two_hundred: String = (0..200)
        .map(|index| format!("X-Count-{index}: x\r\n"))
        .collect();
    for (name, headers) in [
        ("one 64 KiB header", &one_big),
        ("90 headers of 1 KiB", &ninety),
        ("200 KiB of headers", &two_hundred_kib),
        ("200 headers", &two_hundred),
    ] {
        let reply = exchange(
            &gw,
            format!(
                "GET /api/mcp_servers HTTP/1.1\r\nHost: localhost\r\n{headers}Connection: close\r\n\r\n"
            )
            .as_bytes(),
        );
        match &reply {
            Reply::Answered(raw) => {
                assert_eq!(raw.status, 431, "{name}: {}", raw.text());
                if !raw.body.is_empty() {
                    let body = assert_envelope(&reply, &[431], None);
                    assert!(
                        body["message"]
                            .as_str()
                            .unwrap()
                            .contains(&limit.to_string()),
                        "{body}"
                    );
                }
            }
            Reply::CutOff(_) => {}
        }
        assert_serves_promptly(&gw);
    }
    // Just under the limit is served.
    let under = format!("X-Fits: {}\r\n", "d".repeat(limit / 2));
    let reply = exchange(
        &gw,
        format!(
            "GET /api/mcp_servers HTTP/1.1\r\nHost: localhost\r\n{under}Connection: close\r\n\r\n"
        )
        .as_bytes(),
    );
    let Reply::Answered(raw) = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(raw.status, 200, "{}", raw.text());
}

// ---------------------------------------------------------------------------------------------
// 5. Slow clients

/// Trickles `bytes` (over and over) one per `pause` until the gateway closes the connection or
/// answers; answers how long after the first byte that happened. Fails after `give_up`.
fn trickle(mut stream: TcpStream, bytes: Vec<u8>, pause: Duration, give_up: Duration) -> Duration {
    stream.set_read_timeout(Some(pause)).unwrap();
    let began = Instant::now();
    let mut sink = [0_u8; 4096];
    for byte in bytes.iter().cycle() {
        if began.elapsed() > give_up {
            panic!("a trickling client was not cut off within {give_up:?}");
        }
        if stream.write_all(&[*byte]).is_err() {
            return began.elapsed();
        }
        match stream.read(&mut sink) {
            // An answer (408) or a close: either way the gateway is done with this client.
            Ok(_) => return began.elapsed(),
            Err(error) if is_timeout(&error) => {}
            Err(_) => return began.elapsed(),
        }
    }
    unreachable!()
}

/// Bad input: five slowloris clients that send a request head one byte a second, forever.
#[test]
fn slowloris_clients_are_cut_off_and_others_are_served_meanwhile() {
    let gw = start();
    let timeout = HttpSettings::default().client_request_timeout;
    let give_up = timeout + Duration::from_secs(10);
    let loris: Vec<_> = (0..5)
        .map(|_| {
            let stream = connect(&gw);
            thread::spawn(move || {
                trickle(
                    stream,
                    b"GET /api/mcp_servers HTTP/1.1\r\nHost: localhost\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaa"
                        .to_vec(),
                    Duration::from_secs(1),
                    give_up,
                )
            })
        })
        .collect();
    thread::sleep(Duration::from_secs(2));
    for _ in 0..3 {
        assert_serves_promptly(&gw);
    }
    assert_all_cut_off(loris, timeout, "a slowloris client");
    assert_serves_promptly(&gw);
}

/// Bad input: a request head sent at once and a body trickled one byte a second, on REST and on
/// /mcp.
#[test]
fn a_slow_body_is_cut_off() {
    let gw = start();
    let timeout = HttpSettings::default().client_body_timeout;
    let give_up = timeout + Duration::from_secs(10);
    let trickled: Vec<_> = [
        head("POST", "/api/mcp_servers", "Content-Length: 500\r\n"),
        mcp_head("Content-Length: 500\r\n"),
        head("POST", "/api/mcp_servers", "Transfer-Encoding: chunked\r\n"),
    ]
    .into_iter()
    .map(|head| {
        let mut stream = connect(&gw);
        stream.write_all(head.as_bytes()).unwrap();
        let body: Vec<u8> = if head.contains("chunked") {
            b"1\r\n \r\n".to_vec()
        } else {
            b" ".to_vec()
        };
        thread::spawn(move || trickle(stream, body, Duration::from_secs(1), give_up))
    })
    .collect();
    thread::sleep(Duration::from_secs(2));
    assert_serves_promptly(&gw);
    assert_all_cut_off(trickled, timeout, "a slow body");
    assert_serves_promptly(&gw);
}

/// Bad input: 500 connections opened at once that never send a byte.
#[test]
fn five_hundred_idle_connections_do_not_stop_a_normal_request() {
    let gw = start();
    let timeout = HttpSettings::default().client_request_timeout;
    let idle: Vec<TcpStream> = (0..500).map(|_| connect(&gw)).collect();
    let opened = Instant::now();
    for _ in 0..3 {
        assert_serves_promptly(&gw);
    }
    // The idle ones are closed by the gateway within its request timeout.
    let mut closed = 0;
    for mut stream in idle {
        let left = (timeout + Duration::from_secs(5)).saturating_sub(opened.elapsed());
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(10))))
            .unwrap();
        let mut sink = [0_u8; 512];
        match stream.read(&mut sink) {
            Err(error) if is_timeout(&error) => {}
            _ => closed += 1,
        }
    }
    eprintln!(
        "{closed} of 500 idle connections closed within {:?}",
        opened.elapsed()
    );
    assert_eq!(closed, 500, "idle connections stay open past the timeout");
    assert_serves_promptly(&gw);
}

// ---------------------------------------------------------------------------------------------
// 6. WebSocket abuse

type Client = WebSocket<TcpStream>;

fn ws_connect(gw: &RunningGateway, query: &str) -> Client {
    let address = address(gw);
    let stream = TcpStream::connect(&address).unwrap();
    stream.set_read_timeout(Some(ANSWER_WITHIN)).unwrap();
    stream.set_write_timeout(Some(ANSWER_WITHIN)).unwrap();
    let url = format!("ws://{address}/api/ws/events?{query}");
    let (client, response) = tungstenite::client(url.as_str(), stream)
        .unwrap_or_else(|error| panic!("the handshake of {url} fails: {error}"));
    assert_eq!(response.status().as_u16(), 101);
    client
}

/// The next text frame, skipping control frames; `None` when the server closed.
fn next_text(client: &mut Client, within: Duration) -> Option<Value> {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "no frame within {within:?}");
        client.get_mut().set_read_timeout(Some(left)).unwrap();
        match client.read() {
            Ok(Message::Text(text)) => {
                return Some(
                    serde_json::from_str(text.as_str())
                        .unwrap_or_else(|error| panic!("not JSON ({error}): {text}")),
                );
            }
            Ok(Message::Close(_)) => return None,
            Ok(_) => {}
            Err(tungstenite::Error::Io(error)) if is_timeout(&error) => {
                panic!("no frame within {within:?}")
            }
            Err(_) => return None,
        }
    }
}

/// Reads until the server closes; answers the close code (`None` for a connection dropped
/// without a close frame) and how many text frames came before.
fn until_closed(client: &mut Client, within: Duration) -> (Option<u16>, usize) {
    let deadline = Instant::now() + within;
    let mut texts = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "the server did not close within {within:?}"
        );
        client.get_mut().set_read_timeout(Some(left)).unwrap();
        match client.read() {
            Ok(Message::Text(_)) => texts += 1,
            Ok(Message::Close(frame)) => return (frame.map(|frame| u16::from(frame.code)), texts),
            Ok(_) => {}
            Err(tungstenite::Error::Io(error)) if is_timeout(&error) => {
                panic!("the server did not close within {within:?}")
            }
            Err(_) => return (None, texts),
        }
    }
}

/// A subscriber to `demo`'s start and stop sees both while `abuse` runs.
fn events_keep_flowing(gw: &RunningGateway, abuse: impl FnOnce() + Send) {
    let mut subscriber = ws_connect(
        gw,
        "event_types=McpServerStarted,McpServerStopped&mcp_server_ids=demo",
    );
    thread::scope(|scope| {
        let abuser = scope.spawn(abuse);
        thread::sleep(Duration::from_millis(300));
        let began = Instant::now();
        assert_eq!(gw.post_empty("/api/mcp_servers/demo/start").status, 200);
        assert_eq!(gw.post_empty("/api/mcp_servers/demo/stop").status, 200);
        let mut seen = Vec::new();
        while seen.len() < 2 {
            let event = next_text(&mut subscriber, Duration::from_secs(15))
                .expect("the subscriber's stream stays open");
            seen.push(event["event_type"].as_str().unwrap().to_owned());
        }
        assert_eq!(seen, ["McpServerStarted", "McpServerStopped"]);
        eprintln!(
            "the subscriber got start and stop within {:?}",
            began.elapsed()
        );
        abuser.join().unwrap();
    });
}

/// Bad input: a client that sends text frames as fast as it can (tens of thousands a second)
/// and reads nothing until it is done.
#[test]
fn a_websocket_text_flood_is_closed_and_subscribers_keep_their_events() {
    let gw = start();
    let mut flooder = ws_connect(&gw, "");
    flooder
        .get_mut()
        .set_write_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let pid = gw.pid();
    warm_up(&gw);
    let before = memory_kib(pid, "VmRSS").max(memory_kib(pid, "VmHWM"));
    events_keep_flowing(&gw, move || {
        let began = Instant::now();
        let mut sent = 0;
        while sent < 20_000 && began.elapsed() < Duration::from_secs(5) {
            if flooder
                .send(Message::text(r#"{"type":"subscribe","event_types":[]}"#))
                .is_err()
            {
                break;
            }
            sent += 1;
        }
        let rate = f64::from(sent) / began.elapsed().as_secs_f64();
        let (code, answers) = until_closed(&mut flooder, Duration::from_secs(20));
        eprintln!(
            "the flooder sent {sent} frames ({rate:.0}/s), got {answers} answers, closed with {code:?}"
        );
        assert_eq!(code, Some(1008), "a flood is closed as a policy violation");
    });
    let peak = memory_kib(pid, "VmHWM");
    eprintln!("memory: VmRSS before {before} KiB, VmHWM after {peak} KiB");
    assert!(peak.saturating_sub(before) < MEMORY_BOUND_KIB);
    assert_serves_promptly(&gw);
}

/// Bad input: one 16 MiB WebSocket frame.
#[test]
fn a_huge_websocket_frame_closes_the_connection_without_buffering_it() {
    let gw = start();
    let mut giant = ws_connect(&gw, "");
    giant
        .get_mut()
        .set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let code = within_memory(&gw, MEMORY_BOUND_KIB, || {
        let text = "x".repeat(16 * MIB);
        let _ = giant.send(Message::text(text));
        until_closed(&mut giant, Duration::from_secs(20)).0
    });
    eprintln!("a 16 MiB frame was answered by close code {code:?}");
    assert!(
        matches!(code, Some(1009) | None),
        "a frame over the limit is closed as too big (1009), or dropped: {code:?}"
    );
    events_keep_flowing(&gw, || {});
    assert_serves_promptly(&gw);
}

/// Bad input: binary frames of garbage and text frames that are not a valid subscribe message,
/// in a loop; then bytes that are not WebSocket frames at all.
#[test]
fn websocket_garbage_gets_error_frames_then_protocol_garbage_is_closed() {
    let gw = start();
    let mut client = ws_connect(&gw, "");
    let garbage: Vec<u8> = (0..4096_u32)
        .map(|index| (index * 7919 % 251) as u8)
        .collect();
    let bad_texts = [
        "not json",
        "{\"type\":\"subscribe\",\"event_types\":\"McpServerStarted\"}",
        "{\"type\":\"subscribe\",\"event_types\":[\"NoSuchEvent\"]}",
        "{\"type\":\"subscribe\",\"mcp_server_ids\":[\"../etc\"]}",
        "{\"type\":\"unsubscribe\"}",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
    ];
    for round in 0..60 {
        let message = if round % 2 == 0 {
            Message::binary(garbage.clone())
        } else {
            Message::text(bad_texts[round / 2 % bad_texts.len()])
        };
        client.send(message).unwrap();
        let answer = next_text(&mut client, Duration::from_secs(10))
            .unwrap_or_else(|| panic!("closed after garbage round {round}"));
        assert_eq!(answer["type"], "error", "{answer}");
        assert!(
            answer["message"]
                .as_str()
                .is_some_and(|text| !text.is_empty())
        );
    }
    // The filter is unchanged and the connection still works.
    client
        .send(Message::text(
            r#"{"type":"subscribe","mcp_server_ids":["demo"]}"#,
        ))
        .unwrap();
    let answer = next_text(&mut client, Duration::from_secs(10)).unwrap();
    assert_eq!(answer["type"], "subscribed", "{answer}");

    // Bytes that are no frame (unmasked, reserved opcode): the protocol is broken.
    client
        .get_mut()
        .write_all(&[0x8B, 0x7F, 0xFF, 0x00, 0x13])
        .unwrap();
    client.get_mut().write_all(&garbage).unwrap();
    let mut sink = [0_u8; 1024];
    client
        .get_mut()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let began = Instant::now();
    loop {
        match client.get_mut().read(&mut sink) {
            Ok(0) => break,
            Ok(_) => {}
            Err(error) if is_timeout(&error) => panic!("the broken stream stays open"),
            Err(_) => break,
        }
    }
    assert!(began.elapsed() < Duration::from_secs(10));
    events_keep_flowing(&gw, || {});
    assert_serves_promptly(&gw);
}

/// Bad input: 200 WebSocket connections opened at once.
#[test]
fn two_hundred_websocket_connections_at_once_leave_delivery_and_memory_intact() {
    let gw = start();
    let before = memory_kib(gw.pid(), "VmRSS");
    let crowd: Vec<Client> = thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| scope.spawn(|| (0..25).map(|_| ws_connect(&gw, "")).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|handle| handle.join().unwrap())
            .collect()
    });
    assert_eq!(crowd.len(), 200);
    assert_serves_promptly(&gw);
    events_keep_flowing(&gw, || {});
    let after = memory_kib(gw.pid(), "VmRSS");
    eprintln!("memory with 200 event streams: VmRSS {before} KiB -> {after} KiB");
    assert!(
        after.saturating_sub(before) < 32 * 1024,
        "200 streams cost {} KiB",
        after - before
    );
    drop(crowd);
    assert_serves_promptly(&gw);
}

// ---------------------------------------------------------------------------------------------
// 7. Malformed JSON-RPC on /mcp

/// Asserts a refusal of a bad JSON-RPC message: an HTTP 4xx, or a JSON-RPC error (never a
/// result, never a 5xx).
#[track_caller]
fn assert_json_rpc_refusal(reply: &Reply, what: &str) {
    let Reply::Answered(raw) = reply else {
        return;
    };
    assert!(raw.status < 500, "{what}: {} {}", raw.status, raw.text());
    if raw.status == 200 || raw.status == 202 {
        let text = raw.text();
        assert!(
            text.contains("\"error\"") && !text.contains("\"result\""),
            "{what}: answered {text}"
        );
    }
}

/// Asserts the answer the JSON-RPC and Streamable HTTP specifications give a body that is not a
/// JSON-RPC message: HTTP 400 with an error response of `code` and a null id, whose message is
/// bounded and carries no raw control character.
#[track_caller]
fn assert_json_rpc_error(reply: &Reply, code: i64, what: &str) {
    let Reply::Answered(raw) = reply else {
        panic!("{what}: expected a JSON-RPC error, the connection was cut: {reply:?}");
    };
    assert_eq!(raw.status, 400, "{what}: {}", raw.text());
    assert!(
        raw.header("content-type")
            .is_some_and(|value| value.starts_with("application/json")),
        "{what}: {}",
        raw.head
    );
    let body: Value = serde_json::from_slice(&raw.body)
        .unwrap_or_else(|problem| panic!("{what}: not JSON ({problem}): {}", raw.text()));
    assert_eq!(body["jsonrpc"], "2.0", "{what}: {body}");
    assert_eq!(body["id"], Value::Null, "{what}: {body}");
    assert_eq!(body["error"]["code"], code, "{what}: {body}");
    let message = body["error"]["message"].as_str().expect("a message");
    assert!(
        !message.is_empty() && message.len() < 1024,
        "{what}: {message}"
    );
    assert!(!message.contains(char::is_control), "{what}: {message}");
}

/// Bad input: messages on POST /mcp that are not JSON, not an object, a batch of 10,000
/// entries, the wrong `jsonrpc` version, and ids that are huge (a 100,000-digit number, a
/// 1 MiB string, an object), in both protocol eras: the 2026-07-28 stateless one and the
/// `initialize` one (no protocol version header).
#[test]
fn malformed_json_rpc_on_mcp_gets_an_error_never_a_500() {
    let gw = start();
    let batch = format!(
        "[{}]",
        (0..10_000)
            .map(|id| format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#))
            .collect::<Vec<_>>()
            .join(",")
    );
    let huge_number = format!(
        r#"{{"jsonrpc":"2.0","id":{},"method":"tools/list"}}"#,
        "9".repeat(100_000)
    );
    let huge_string = format!(
        r#"{{"jsonrpc":"2.0","id":"{}","method":"tools/list"}}"#,
        "i".repeat(MIB)
    );
    const PARSE_ERROR: i64 = -32700;
    const INVALID_REQUEST: i64 = -32600;
    // `None`: a valid message with an odd id, which gets whatever a valid message gets.
    let bodies: Vec<(&str, String, Option<i64>)> = vec![
        ("not JSON", "this is not json".to_owned(), Some(PARSE_ERROR)),
        (
            "truncated JSON",
            r#"{"jsonrpc":"2.0","id":1,"meth"#.to_owned(),
            Some(PARSE_ERROR),
        ),
        (
            "invalid UTF-8",
            String::from_utf8_lossy(&[0xFF, 0xFE, b'{']).into_owned(),
            Some(PARSE_ERROR),
        ),
        (
            "control characters",
            "\r\n\u{0}\u{1b}[31m".to_owned(),
            Some(PARSE_ERROR),
        ),
        ("a number", "42".to_owned(), Some(INVALID_REQUEST)),
        (
            "a string",
            "\"tools/list\"".to_owned(),
            Some(INVALID_REQUEST),
        ),
        ("null", "null".to_owned(), Some(INVALID_REQUEST)),
        ("an empty array", "[]".to_owned(), Some(INVALID_REQUEST)),
        (
            "an array of numbers",
            "[1,2,3]".to_owned(),
            Some(INVALID_REQUEST),
        ),
        ("a batch of 10,000", batch, Some(INVALID_REQUEST)),
        (
            "jsonrpc 1.0",
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/list"}"#.to_owned(),
            Some(INVALID_REQUEST),
        ),
        (
            "no jsonrpc",
            r#"{"id":1,"method":"tools/list"}"#.to_owned(),
            Some(INVALID_REQUEST),
        ),
        (
            "method not a string",
            r#"{"jsonrpc":"2.0","id":1,"method":7}"#.to_owned(),
            Some(INVALID_REQUEST),
        ),
        ("a 100,000-digit id", huge_number, Some(INVALID_REQUEST)),
        ("a 1 MiB string id", huge_string, None),
        (
            "an object id",
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}"#.to_owned(),
            Some(INVALID_REQUEST),
        ),
        (
            "a float id",
            r#"{"jsonrpc":"2.0","id":1e400,"method":"tools/list"}"#.to_owned(),
            Some(INVALID_REQUEST),
        ),
    ];
    for (era, version_header) in [
        ("2026-07-28", "MCP-Protocol-Version: 2026-07-28\r\n"),
        ("initialize era", ""),
    ] {
        for (what, body, code) in &bodies {
            let what = format!("{what} ({era})");
            let began = Instant::now();
            let reply = exchange(&gw, &mcp_post(&gw, version_header, body.as_bytes()));
            match code {
                Some(code) => assert_json_rpc_error(&reply, *code, &what),
                None => assert_json_rpc_refusal(&reply, &what),
            }
            assert!(
                began.elapsed() < Duration::from_secs(10),
                "{what} took {:?}",
                began.elapsed()
            );
        }
    }

    // A wrong Content-Type is still refused as such, whatever the body.
    let body = "this is not json";
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: text/plain\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nContent-Length: {}\r\n\r\n{body}",
        address(&gw),
        body.len()
    );
    let Reply::Answered(raw) = exchange(&gw, request.as_bytes()) else {
        panic!("a wrong Content-Type: the connection was cut");
    };
    assert_eq!(raw.status, 415, "{}", raw.text());
    assert_serves_promptly(&gw);
}

/// Bad input: line breaks and a NUL inside a server id, where the core parses it (the event
/// stream's `mcp_server_ids`, `mcp_server_id` in a create body): the message quotes the id
/// with its control characters escaped, never raw.
#[test]
fn control_characters_in_server_ids_are_quoted_escaped() {
    let gw = start();
    let body = assert_envelope(
        &get_raw(&gw, "/api/ws/events?mcp_server_ids=a%0d%0ab"),
        &[422],
        Some("ValidationError"),
    );
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("a\\r\\nb") && !message.contains(char::is_control),
        "{message}"
    );

    let create = r#"{"mcp_server_id":"a\r\nX-Injected: 1\u0000","command":"true"}"#;
    let mut request = head(
        "POST",
        "/api/mcp_servers",
        &format!("Content-Length: {}\r\n", create.len()),
    )
    .into_bytes();
    request.extend_from_slice(create.as_bytes());
    let body = assert_envelope(&exchange(&gw, &request), &[422], Some("ValidationError"));
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("a\\r\\nX-Injected: 1\\u{0}") && !message.contains(char::is_control),
        "{message}"
    );
    assert_serves_promptly(&gw);
}

// ---------------------------------------------------------------------------------------------
// 8. The web console

/// The console's form limit.
const CONSOLE_FORM_LIMIT: usize = 256 * 1024;

/// A console request: `headers` are more header lines; a body gets its `Content-Length`.
fn ui_request(method: &str, target: &str, headers: &str, body: &[u8]) -> Vec<u8> {
    let mut request =
        format!("{method} {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{headers}");
    if method == "POST" || !body.is_empty() {
        request.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    request.push_str("\r\n");
    let mut request = request.into_bytes();
    request.extend_from_slice(body);
    request
}

const FORM: &str = "Content-Type: application/x-www-form-urlencoded\r\n";

/// Asserts that nothing was split or injected in a console answer's head: every line is
/// `name: value`, no value holds a CR or LF, no header named by the attacker exists, and the
/// only cookies set are the console's own.
#[track_caller]
fn assert_console_head(raw: &Raw) {
    for (name, value) in &raw.headers {
        assert!(
            !name.is_empty() && name.bytes().all(|byte| byte.is_ascii_graphic()),
            "a split header line: {:?}",
            raw.head
        );
        assert!(!value.contains(['\r', '\n']), "{value:?}");
        assert!(
            !name.eq_ignore_ascii_case("x-injected"),
            "an injected header: {}",
            raw.head
        );
        if name.eq_ignore_ascii_case("set-cookie") {
            assert!(
                ["mcpgw_login=", "mcpgw_session=", "mcpgw_sso="]
                    .iter()
                    .any(|own| value.starts_with(own)),
                "a cookie the console does not set: {}",
                raw.head
            );
        }
    }
}

/// Asserts a console page with one of `statuses` (HTML, nothing split or injected in its head);
/// with `error`, the error page of that error (`data-error`). Answers the page.
#[track_caller]
fn assert_page(reply: &Reply, statuses: &[u16], error: Option<&str>) -> String {
    let Reply::Answered(raw) = reply else {
        panic!("expected a console page {statuses:?}, the connection was cut: {reply:?}");
    };
    let text = raw.text();
    assert!(
        statuses.contains(&raw.status),
        "status {} not in {statuses:?}: {}",
        raw.status,
        &text[..text.len().min(2000)]
    );
    assert_console_head(raw);
    if raw.status != 303 {
        assert!(
            raw.header("content-type")
                .is_some_and(|value| value.starts_with("text/html")),
            "{}",
            raw.head
        );
    }
    if let Some(error) = error {
        assert!(
            text.contains(&format!("data-error=\"{error}\"")),
            "not the {error} page: {}",
            &text[..text.len().min(2000)]
        );
    }
    text
}

/// Asserts a clear refusal: a console page of a 4xx that says what is wrong (its alert), or the
/// envelope of a 4xx where a check in front of every route answered first, or a protocol-level
/// 4xx (no body); or a connection cut off.
#[track_caller]
fn assert_console_refusal(reply: &Reply, what: &str) {
    let Reply::Answered(raw) = reply else {
        return;
    };
    assert!(
        (400..500).contains(&raw.status),
        "{what}: {} {}",
        raw.status,
        raw.text()
    );
    assert_console_head(raw);
    let content_type = raw.header("content-type").unwrap_or_default();
    if content_type.starts_with("application/json") {
        assert_envelope(reply, &[raw.status], None);
    } else if content_type.starts_with("text/html") {
        assert!(
            raw.text().contains("role=\"alert\""),
            "{what}: {}",
            raw.text()
        );
    } else {
        assert!(raw.body.is_empty(), "{what}: {}", raw.head);
    }
}

/// The console answers a page promptly: `/ui/servers` (with `session`, when authentication is
/// on) within [`PROMPTLY`].
#[track_caller]
fn assert_console_serves_promptly(gw: &RunningGateway, session: Option<&str>) {
    assert!(
        process_alive(gw.pid()),
        "the gateway died:\n{}",
        gw.stderr()
    );
    let cookie = session
        .map(|session| format!("Cookie: mcpgw_session={session}\r\n"))
        .unwrap_or_default();
    let began = Instant::now();
    let reply = exchange(gw, &ui_request("GET", "/ui/servers", &cookie, b""));
    let took = began.elapsed();
    let page = assert_page(&reply, &[200], None);
    assert!(page.contains("data-server=\"demo\""), "{page}");
    assert!(took < PROMPTLY, "a console page took {took:?}");
}

/// The value of cookie `name` among an answer's `Set-Cookie` headers.
fn set_cookie_value(raw: &Raw, name: &str) -> Option<String> {
    raw.headers
        .iter()
        .filter(|(header, _)| header.eq_ignore_ascii_case("set-cookie"))
        .find_map(|(_, value)| {
            let (key, value) = value.split(';').next()?.split_once('=')?;
            (key == name).then(|| value.to_owned())
        })
}

/// Signs in to the console with `key` as a browser does: the sign-in page's token and cookie,
/// then the key form. Answers the session cookie's value.
fn sign_in(gw: &RunningGateway, key: &str) -> String {
    let Reply::Answered(page) = exchange(gw, &ui_request("GET", "/ui/login", "", b"")) else {
        panic!("the sign-in page was cut off");
    };
    assert_eq!(page.status, 200, "{}", page.text());
    let token = set_cookie_value(&page, "mcpgw_login").expect("the sign-in page sets its token");
    let form = format!("login_token={token}&api_key={key}");
    let reply = exchange(
        gw,
        &ui_request(
            "POST",
            "/ui/login/key",
            &format!("{FORM}Cookie: mcpgw_login={token}\r\n"),
            form.as_bytes(),
        ),
    );
    let Reply::Answered(signed_in) = reply else {
        panic!("signing in was cut off");
    };
    assert_eq!(signed_in.status, 303, "{}", signed_in.text());
    set_cookie_value(&signed_in, "mcpgw_session").expect("a session cookie")
}

/// A gateway with the console and authentication on, the fixture server `demo`, and an admin
/// key signed in: (gateway, the key, the session cookie's value).
fn start_console_with_auth() -> (RunningGateway, String, String) {
    let data = tempfile::tempdir().unwrap();
    let key = cli_key(data.path(), "user:root", Some("admin"));
    let gw = gateway()
        .data_dir(data)
        .config(&format!(
            "probe_tools: false\nauth:\n  enabled: true\nmcp_servers:\n{}",
            fixture_server_yaml("demo", &[])
        ))
        .start();
    let session = sign_in(&gw, &key);
    assert_console_serves_promptly(&gw, Some(&session));
    (gw, key, session)
}

/// Bad input: a 20 MiB urlencoded form on POST /ui/servers, announced by its Content-Length and
/// sent, then one of 20 MiB in chunks (its size only known by reading it): the console reads at
/// most its 256 KiB form limit of either.
#[test]
fn a_console_form_far_over_the_limit_is_refused_and_never_buffered() {
    let gw = start();
    let form_head = |length: &str| {
        format!(
            "POST /ui/servers HTTP/1.1\r\nHost: localhost\r\n{FORM}Connection: close\r\n{length}\r\n"
        )
    };
    let announced = within_memory(&gw, MEMORY_BOUND_KIB, || {
        declared_body(
            &gw,
            &form_head(&format!("Content-Length: {}\r\n", 20 * MIB)),
            20 * MIB,
        )
    });
    let chunked = within_memory(&gw, MEMORY_BOUND_KIB, || {
        chunked_body(&gw, &form_head("Transfer-Encoding: chunked\r\n"), 20 * MIB)
    });
    for (what, reply) in [("announced", announced), ("chunked", chunked)] {
        if what == "chunked" && matches!(reply, Reply::CutOff(_)) {
            // The gateway stopped reading at the limit and closed while the client still sent.
            continue;
        }
        // The refusal names the limit; it is the form's error page (422 ValidationError, or
        // 413 PayloadTooLargeError as the API answers an oversized body).
        let page = assert_page(&reply, &[413, 422], None);
        assert!(
            page.contains("data-error=\"ValidationError\"")
                || page.contains("data-error=\"PayloadTooLargeError\""),
            "{what}: {page}"
        );
        assert!(
            page.contains(&CONSOLE_FORM_LIMIT.to_string()),
            "{what}: the page names the limit: {page}"
        );
    }
    assert_console_serves_promptly(&gw, None);
    // Nothing was created.
    assert_eq!(
        gw.get("/api/mcp_servers").json()["mcp_servers"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

/// Bad input: console forms that are not what a browser sends: a text/plain body, a
/// multipart/form-data body, a body without a Content-Type, invalid UTF-8 (raw and
/// percent-encoded), percent-garbage, a JSON body declared urlencoded, a field repeated, and
/// 10,000 fields (distinct, and one repeated 10,000 times), on the forms of every kind of
/// handler (a typed form, a free-form tool call, a sign-out, a server action).
#[test]
fn console_forms_of_the_wrong_shape_get_a_clear_refusal() {
    let gw = start();
    let many_fields: String = (0..10_000).map(|index| format!("&f{index}=v")).collect();
    let repeated: String = (0..10_000).map(|_| "&mode=subprocess").collect();
    let multipart =
        "--x\r\nContent-Disposition: form-data; name=\"csrf_token\"\r\n\r\nx\r\n--x--\r\n";
    let bodies: Vec<(&str, String, Vec<u8>)> = vec![
        (
            "text/plain",
            "Content-Type: text/plain\r\n".into(),
            b"csrf_token=x&mode=subprocess".to_vec(),
        ),
        (
            "multipart",
            "Content-Type: multipart/form-data; boundary=x\r\n".into(),
            multipart.as_bytes().to_vec(),
        ),
        ("no Content-Type", String::new(), b"csrf_token=x".to_vec()),
        (
            "raw invalid UTF-8",
            FORM.into(),
            b"csrf_token=x&mcp_server_id=\xff\xfe&mode=\xc3\x28&command=\xed\xa0\x80".to_vec(),
        ),
        (
            "encoded invalid UTF-8",
            FORM.into(),
            b"csrf_token=x&mcp_server_id=%FF%FE&mode=%C3%28&command=%ED%A0%80".to_vec(),
        ),
        (
            "percent-garbage",
            FORM.into(),
            b"csrf_token=x&mcp_server_id=%zz%&&==&%%%&mode=%0&%=%".to_vec(),
        ),
        (
            "JSON declared urlencoded",
            FORM.into(),
            br#"{"csrf_token":"x","mcp_server_id":"json","mode":"subprocess"}"#.to_vec(),
        ),
        (
            "a repeated field",
            FORM.into(),
            b"csrf_token=x&csrf_token=y&mode=docker".to_vec(),
        ),
        (
            "10,000 fields",
            FORM.into(),
            format!("csrf_token=x&mcp_server_id=many{many_fields}").into_bytes(),
        ),
        (
            "one field 10,000 times",
            FORM.into(),
            format!("csrf_token=x&mcp_server_id=repeated{repeated}").into_bytes(),
        ),
    ];
    for target in [
        "/ui/servers",
        "/ui/servers/demo",
        "/ui/tools/demo__echo",
        "/ui/logout",
        "/ui/servers/demo/stop",
        "/ui/access/keys",
    ] {
        for (what, headers, body) in &bodies {
            let began = Instant::now();
            let reply = exchange(&gw, &ui_request("POST", target, headers, body));
            let what = format!("{what} on {target}");
            // A button's form (signing out, stopping a server) carries only its token: where
            // the body still reads as a form with one (authentication off takes any), the
            // button did its work, and the other fields are ignored.
            match &reply {
                Reply::Answered(raw) if raw.status == 303 => {
                    assert!(
                        target == "/ui/logout" || target == "/ui/servers/demo/stop",
                        "{what}: {}",
                        raw.head
                    );
                    assert!(
                        raw.header("location")
                            .is_some_and(|to| to.starts_with("/ui/")),
                        "{what}: {}",
                        raw.head
                    );
                }
                _ => assert_console_refusal(&reply, &what),
            }
            assert!(
                began.elapsed() < Duration::from_secs(10),
                "{what} took {:?}",
                began.elapsed()
            );
        }
    }
    // No server was created or changed by any of them.
    let listed = gw.get("/api/mcp_servers").json();
    assert_eq!(
        listed["mcp_servers"].as_array().unwrap().len(),
        1,
        "{listed}"
    );
    assert_console_serves_promptly(&gw, None);
}

/// Bad input: a console form whose head arrives at once and whose body trickles one byte a
/// second, announced and chunked.
#[test]
fn a_slow_console_form_is_cut_off() {
    let gw = start();
    let timeout = HttpSettings::default().client_body_timeout;
    let give_up = timeout + Duration::from_secs(10);
    let trickled: Vec<_> = ["Content-Length: 500\r\n", "Transfer-Encoding: chunked\r\n"]
        .into_iter()
        .map(|length| {
            let mut stream = connect(&gw);
            stream
                .write_all(
                    format!(
                        "POST /ui/servers HTTP/1.1\r\nHost: localhost\r\n{FORM}\
                         Connection: close\r\n{length}\r\n"
                    )
                    .as_bytes(),
                )
                .unwrap();
            let body: Vec<u8> = if length.contains("chunked") {
                b"1\r\na\r\n".to_vec()
            } else {
                b"a".to_vec()
            };
            thread::spawn(move || trickle(stream, body, Duration::from_secs(1), give_up))
        })
        .collect();
    thread::sleep(Duration::from_secs(2));
    assert_console_serves_promptly(&gw, None);
    assert_all_cut_off(trickled, timeout, "a slow console form");
    assert_console_serves_promptly(&gw, None);
}

/// Bad input: query strings on the servers list with 10,000 parameters (unknown ones, which are
/// ignored; distinct ones, which make the request line longer than any the gateway takes; and
/// one parameter 10,000 times), and huge and control-character values in `q`, `page`, `state`
/// and the sign-in page's `next`.
#[test]
fn console_query_strings_of_any_size_and_content_get_a_clear_answer() {
    let gw = start();
    // 10,000 parameters the list does not know: ignored, the list is served.
    let unknown: String = (0..10_000).map(|_| "x=1&").collect();
    let page = assert_page(
        &get_raw(&gw, &format!("/ui/servers?{unknown}q=demo")),
        &[200],
        None,
    );
    assert!(page.contains("data-server=\"demo\""));
    // 10,000 distinct parameters: a request line over the parser's limit, refused as such.
    let distinct: String = (0..10_000).map(|index| format!("p{index}=v&")).collect();
    let reply = get_raw(&gw, &format!("/ui/servers?{distinct}"));
    assert_console_refusal(&reply, "10,000 distinct parameters");
    // One parameter 10,000 times.
    let repeated: String = (0..10_000).map(|_| "q=a&").collect();
    assert_page(
        &get_raw(&gw, &format!("/ui/servers?{repeated}")),
        &[422],
        Some("ValidationError"),
    );

    let huge = "a".repeat(30 * 1024);
    let huge_digits = "9".repeat(10_000);
    // A search for anything is a search: no match, and the text shown escaped.
    for q in [
        huge.as_str(),
        "%00%0d%0aX-Injected:%201%1b[31m",
        "%3Cscript%3Ealert(1)%3C/script%3E",
    ] {
        let page = assert_page(&get_raw(&gw, &format!("/ui/servers?q={q}")), &[200], None);
        // Shown HTML-escaped (a line break inside an attribute is only text; the head is
        // checked unsplit).
        assert!(!page.contains("<script>alert"), "q is shown unescaped");
        for target in ["/ui/tools", "/ui/servers-rows"] {
            let reply = get_raw(&gw, &format!("{target}?q={q}"));
            let Reply::Answered(raw) = &reply else {
                panic!("{target}: {reply:?}")
            };
            assert!(
                raw.status == 200 || raw.status == 404,
                "{target}: {}",
                raw.status
            );
            assert_console_head(raw);
        }
    }
    // `page` and `state` out of what the list takes: its error page, the value quoted bounded
    // and escaped.
    for (name, value) in [
        ("page", huge_digits.as_str()),
        ("page", "0"),
        ("page", "-1"),
        ("page", "%00"),
        ("page", "1%0d%0aX-Injected:%201"),
        ("state", huge.as_str()),
        ("state", "%0d%0a%00%1b"),
        ("state", "READY"),
    ] {
        for target in ["/ui/servers", "/ui/servers-rows", "/ui/tools"] {
            if target == "/ui/tools" && name == "state" {
                continue;
            }
            let reply = get_raw(&gw, &format!("{target}?{name}={value}"));
            let page = assert_page(&reply, &[422], Some("ValidationError"));
            let alert = page
                .split("data-error=\"ValidationError\">")
                .nth(1)
                .and_then(|rest| rest.split("</p>").next())
                .unwrap_or_default();
            assert!(alert.starts_with(name), "{target}?{name}: {alert}");
            assert!(
                alert.len() < 1024,
                "{target}?{name}: a message of {} bytes",
                alert.len()
            );
            assert!(
                !alert.contains(['\r', '\n', '\0']),
                "{target}?{name}: {alert:?}"
            );
        }
    }
    // `next` leads only into the console; anything else goes to the overview.
    for next in [
        huge.as_str(),
        "%0d%0aX-Injected:%201",
        "/ui/%0d%0aX-Injected:%201",
        "//evil.example",
        "https://evil.example/ui/",
        "/ui/%00",
        "/ui/\\evil",
    ] {
        let reply = get_raw(&gw, &format!("/ui/login?next={next}"));
        let Reply::Answered(raw) = &reply else {
            panic!("next={next}: {reply:?}")
        };
        // Authentication is off: the sign-in page sends the browser on.
        assert_eq!(raw.status, 303, "next={next}: {}", raw.text());
        assert_console_head(raw);
        assert_eq!(raw.header("location"), Some("/ui/"), "next={next}");
    }
    assert_console_serves_promptly(&gw, None);
}

/// Bad input: ids in console paths that try to climb out (`..`, encoded and raw), NUL bytes,
/// invalid UTF-8, a 10 KB id and a 10 KB tool name, on every console route that takes one,
/// pages and actions.
#[test]
fn odd_ids_in_console_paths_answer_404_and_read_no_file() {
    let gw = start();
    let long = "a".repeat(10 * 1024);
    let ids = [
        "..%2F..%2Fetc%2Fpasswd",
        "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        "%00",
        "demo%00",
        "demo%00.yaml",
        "%FF%FE",
        "%C3%A9t%C3%A9",
        long.as_str(),
        "demo%0d%0aX-Injected:%201",
    ];
    let mut checked = 0;
    for id in ids {
        for target in [
            format!("/ui/servers/{id}"),
            format!("/ui/servers/{id}/live"),
            format!("/ui/servers/{id}/edit"),
            format!("/ui/tools/{id}"),
            format!("/ui/assets/{id}"),
        ] {
            let page = assert_page(&get_raw(&gw, &target), &[404], None);
            assert!(page.contains("role=\"alert\""), "{target}: {page}");
            assert!(!page.contains("root:"), "{target}");
            checked += 1;
        }
        for target in [
            format!("/ui/servers/{id}"),
            format!("/ui/servers/{id}/start"),
            format!("/ui/servers/demo/{id}"),
            format!("/ui/tools/{id}"),
            format!("/ui/discovery/{id}/approve"),
            format!("/ui/access/keys/{id}/revoke"),
            format!("/ui/groups/{id}/rebalance"),
            format!("/ui/config/{id}"),
        ] {
            // With the form's token (any, authentication being off), so that the id is judged.
            let reply = exchange(
                &gw,
                &ui_request(
                    "POST",
                    &target,
                    FORM,
                    b"csrf_token=x&mode=subprocess&command=x",
                ),
            );
            let page = assert_page(&reply, &[404, 405, 422], None);
            assert!(!page.contains("root:"), "{target}");
            checked += 1;
        }
    }
    // Raw, unnormalized `..` segments.
    for target in [
        "/ui/../../../../etc/passwd",
        "/ui/assets/../../../../etc/passwd",
        "/ui/servers/../../../etc/passwd",
        "/ui/%2e%2e/%2e%2e/etc/passwd",
    ] {
        let reply = get_raw(&gw, target);
        let Reply::Answered(raw) = &reply else {
            panic!("{target}: {reply:?}")
        };
        assert_eq!(raw.status, 404, "{target}: {}", raw.text());
        assert!(!raw.text().contains("root:"), "{target}");
        checked += 1;
    }
    assert!(checked > 100, "{checked}");
    // `demo` is still there, unchanged.
    let listed = gw.get("/api/mcp_servers").json();
    assert_eq!(
        listed["mcp_servers"].as_array().unwrap().len(),
        1,
        "{listed}"
    );
    assert_console_serves_promptly(&gw, None);
}

/// Bad input: `Cookie` headers with thousands of cookies (under and over the header limit), a
/// 30 KiB session cookie and one over the header limit, session cookies of invalid bytes (bytes
/// over 0x7F, which are not text; control characters, which are not a header value), a forged
/// session next to the real one, and the session cookie sent twice; on pages and on forms.
#[test]
fn hostile_console_cookies_never_open_a_session_nor_break_the_console() {
    let (gw, _key, session) = start_console_with_auth();
    let limit = HttpSettings::default().max_header_bytes;
    let crowd =
        |count: usize| -> String { (0..count).map(|index| format!("c{index}=v; ")).collect() };
    let three_thousand = crowd(3_000);
    assert!(three_thousand.len() < limit);
    let five_thousand = crowd(5_000);
    assert!(five_thousand.len() > limit);
    let big_session = "s".repeat(30 * 1024);
    let huge_session = "s".repeat(limit + 1024);
    // (what, the Cookie header's value as bytes, the answer a page gets: 303 sent to sign in,
    // 200 served, 431 or 400 refused before any handler)
    let cases: Vec<(&str, Vec<u8>, &[u16])> = vec![
        ("3,000 cookies", three_thousand.clone().into_bytes(), &[303]),
        (
            "3,000 cookies and the session last",
            format!("{three_thousand}mcpgw_session={session}").into_bytes(),
            &[200],
        ),
        ("5,000 cookies", five_thousand.into_bytes(), &[431]),
        (
            "a 30 KiB session cookie",
            format!("mcpgw_session={big_session}").into_bytes(),
            &[303],
        ),
        (
            "a session cookie over the header limit",
            format!("mcpgw_session={huge_session}").into_bytes(),
            &[431],
        ),
        (
            "a session cookie of bytes over 0x7F",
            [
                b"mcpgw_session=".as_slice(),
                &[0xFF, 0xFE, 0x80, 0xC3, 0x28],
            ]
            .concat(),
            &[303, 400],
        ),
        (
            "a session cookie with control characters",
            [b"mcpgw_session=".as_slice(), &[0x01, 0x7F, b'a']].concat(),
            &[303, 400],
        ),
        (
            "a forged session first, the real one after",
            format!("mcpgw_session=forged; mcpgw_session={session}").into_bytes(),
            &[303],
        ),
        (
            "an empty session cookie",
            b"mcpgw_session=".to_vec(),
            &[303],
        ),
        (
            "a cookie without a value",
            b"mcpgw_session".to_vec(),
            &[303],
        ),
    ];
    for (what, cookie, page_statuses) in &cases {
        let request = |method: &str, target: &str, body: &[u8]| {
            let mut request = format!(
                "{method} {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{FORM}\
                 Content-Length: {}\r\nCookie: ",
                body.len()
            )
            .into_bytes();
            request.extend_from_slice(cookie);
            request.extend_from_slice(b"\r\n\r\n");
            request.extend_from_slice(body);
            request
        };
        let began = Instant::now();
        let reply = exchange(&gw, &request("GET", "/ui/servers", b""));
        let Reply::Answered(raw) = &reply else {
            panic!("{what}: {reply:?}")
        };
        assert!(
            page_statuses.contains(&raw.status),
            "{what}: {} {}",
            raw.status,
            raw.text()
        );
        assert_console_head(raw);
        match raw.status {
            303 => assert!(
                raw.header("location")
                    .is_some_and(|to| to.starts_with("/ui/login?next=")),
                "{what}: {}",
                raw.head
            ),
            200 => {
                assert!(raw.text().contains("data-server=\"demo\""), "{what}");
            }
            _ => assert_console_refusal(&reply, what),
        }
        // A form with any of them and no valid session changes nothing.
        let reply = exchange(
            &gw,
            &request("POST", "/ui/servers/demo/stop", b"csrf_token=x"),
        );
        let Reply::Answered(raw) = &reply else {
            panic!("{what}: {reply:?}")
        };
        if page_statuses == &[200] {
            // The real session with a wrong CSRF token.
            assert_page(&reply, &[403], Some("AccessDeniedError"));
        } else {
            assert!(
                [401, 400, 431].contains(&raw.status),
                "{what}: a form got {} {}",
                raw.status,
                raw.text()
            );
            assert_console_refusal(&reply, what);
        }
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "{what} took {:?}",
            began.elapsed()
        );
    }
    assert_console_serves_promptly(&gw, Some(&session));
}

/// Bad input: a 200 KiB API key and a sign-in form of 10,000 fields, with a valid sign-in token,
/// on the sign-in form; then the right key still signs in.
#[test]
fn a_hostile_sign_in_form_is_refused_and_signing_in_still_works() {
    let (gw, key, session) = start_console_with_auth();
    let Reply::Answered(page) = exchange(&gw, &ui_request("GET", "/ui/login", "", b"")) else {
        panic!("the sign-in page was cut off");
    };
    let token = set_cookie_value(&page, "mcpgw_login").unwrap();
    let cookie = format!("{FORM}Cookie: mcpgw_login={token}\r\n");
    let huge_key = format!("login_token={token}&api_key=mcp_{}", "k".repeat(200 * 1024));
    let reply = exchange(
        &gw,
        &ui_request("POST", "/ui/login/key", &cookie, huge_key.as_bytes()),
    );
    let page = assert_page(&reply, &[401], None);
    assert!(page.contains("role=\"alert\""), "{page}");
    let Reply::Answered(raw) = &reply else {
        unreachable!()
    };
    assert!(set_cookie_value(raw, "mcpgw_session").is_none());
    let fields: String = (0..10_000).map(|index| format!("&f{index}=v")).collect();
    let many = format!("login_token={token}&user_name=nobody&password=wrong-password{fields}");
    let reply = exchange(
        &gw,
        &ui_request("POST", "/ui/login/password", &cookie, many.as_bytes()),
    );
    let Reply::Answered(raw) = &reply else {
        panic!("{reply:?}")
    };
    assert_page(&reply, &[401], None);
    assert!(set_cookie_value(raw, "mcpgw_session").is_none());
    // The session open before is untouched, and the right key still signs in.
    assert_console_serves_promptly(&gw, Some(&session));
    let again = sign_in(&gw, &key);
    assert_ne!(again, session);
    assert_console_serves_promptly(&gw, Some(&again));
}

/// Bad input: console requests that a page on another site makes the browser send: a `Host`
/// that is not the gateway's (DNS rebinding), with a CR LF smuggled in, and forms posted with a
/// foreign `Origin` and with `Origin: null`. The checks in front of every route refuse them in
/// the envelope, before the console sees them.
#[test]
fn console_requests_from_another_site_are_refused_before_the_console() {
    let gw = start();
    for host in ["evil.example", "evil.example%0d%0aX-Injected:%201"] {
        for (method, target) in [("GET", "/ui/servers"), ("POST", "/ui/servers/demo/stop")] {
            let request = format!(
                "{method} {target} HTTP/1.1\r\nHost: {host}\r\n{FORM}Content-Length: 12\r\n\
                 Connection: close\r\n\r\ncsrf_token=x"
            );
            let reply = exchange(&gw, request.as_bytes());
            assert_envelope(&reply, &[421], Some("MisdirectedRequestError"));
        }
    }
    for origin in ["https://evil.example", "null"] {
        let reply = exchange(
            &gw,
            &ui_request(
                "POST",
                "/ui/servers/demo/start",
                &format!("{FORM}Origin: {origin}\r\n"),
                b"csrf_token=x",
            ),
        );
        assert_envelope(&reply, &[403], Some("ForbiddenOriginError"));
    }
    // Nothing was started.
    assert_eq!(gw.get("/api/mcp_servers/demo").json()["state"], "cold");
    assert_console_serves_promptly(&gw, None);
}

/// Bad input on the Access page's forms (roles, assignments, policies), posted by a signed-in
/// admin with the session's own CSRF token, so that each reaches its handler: a principal of
/// 10,000 letters, one with a newline and a NUL, a scope `tenant:` without an id, a role that
/// does not exist, role names with a space and of 1,000 letters, a permission no catalogue
/// lists, a built-in role's deletion, a policy scope `bogus`, a target id with `..`, an allow
/// list of 10,000 lines, invalid UTF-8 (percent-encoded), and a field given twice. Each gets a
/// clear 4xx page promptly, and no role, assignment or policy changes.
#[test]
fn hostile_access_forms_are_refused_and_change_nothing() {
    let (gw, key, session) = start_console_with_auth();
    let Reply::Answered(page) = exchange(
        &gw,
        &ui_request(
            "GET",
            "/ui/access",
            &format!("Cookie: mcpgw_session={session}\r\n"),
            b"",
        ),
    ) else {
        panic!("the access page was cut off");
    };
    assert_eq!(page.status, 200, "{}", page.text());
    let text = page.text();
    let csrf = text
        .split("name=\"csrf_token\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the access page carries the session's CSRF token")
        .to_owned();
    let state = |gw: &RunningGateway| {
        let get = |path: &str| {
            let Reply::Answered(raw) = exchange(
                gw,
                &ui_request("GET", path, &format!("X-API-Key: {key}\r\n"), b""),
            ) else {
                panic!("GET {path} was cut off");
            };
            let body: serde_json::Value = serde_json::from_str(&raw.text()).expect("a JSON answer");
            (raw.status, body)
        };
        // The roles, who holds them, and the one server's policy (404 while it has none).
        (
            get("/api/auth/roles/all"),
            get("/api/auth/principals"),
            get("/api/auth/policies/provider/demo"),
        )
    };
    let before = state(&gw);
    assert_eq!(before.0.0, 200, "{:?}", before.0);
    assert_eq!(before.2.0, 404, "no policy yet: {:?}", before.2);
    let long_principal = format!("user:{}", "a".repeat(10_000));
    let many_lines: String = (0..10_000)
        .map(|index| format!("user:u{index}%0A"))
        .collect();
    let cases: Vec<(&str, String)> = vec![
        (
            "/ui/access/assignments",
            format!("principal={long_principal}&role=viewer&scope=global"),
        ),
        (
            "/ui/access/assignments",
            "principal=user:a%0Ab%00&role=viewer&scope=global".into(),
        ),
        (
            "/ui/access/assignments",
            "principal=user:alice&role=viewer&scope=tenant:".into(),
        ),
        (
            "/ui/access/assignments",
            "principal=user:alice&role=no-such-role&scope=global".into(),
        ),
        (
            "/ui/access/assignments",
            "principal=user:alice&principal=user:bob&role=viewer".into(),
        ),
        (
            "/ui/access/assignments",
            "principal=user:%FF%FE&role=viewer&scope=global".into(),
        ),
        (
            "/ui/access/assignments/revoke",
            "principal=user:nobody&role=admin&scope=global".into(),
        ),
        (
            "/ui/access/roles",
            "name=two words&description=x&permissions=tool:list".into(),
        ),
        (
            "/ui/access/roles",
            format!("name={}&permissions=tool:list", "r".repeat(1_000)),
        ),
        (
            "/ui/access/roles",
            "name=made&description=x&permissions=nope:nope".into(),
        ),
        (
            "/ui/access/roles",
            "name=admin&description=x&permissions=tool:list".into(),
        ),
        (
            "/ui/access/roles/admin",
            "description=taken&permissions=tool:list".into(),
        ),
        ("/ui/access/roles/admin/delete", String::new()),
        ("/ui/access/roles/no-such-role/delete", String::new()),
        (
            "/ui/access/policies",
            "scope=bogus&target_id=demo&allow_list=user:alice".into(),
        ),
        (
            "/ui/access/policies",
            "scope=provider&target_id=../../etc&deny_list=*".into(),
        ),
        (
            "/ui/access/policies",
            format!("scope=provider&target_id=demo&allow_list={many_lines}"),
        ),
        (
            "/ui/access/policies",
            "scope=provider&target_id=demo&deny_list=user:%FF".into(),
        ),
        (
            "/ui/access/policies/delete",
            "scope=provider&target_id=no-such-server".into(),
        ),
    ];
    for (target, form) in &cases {
        let body = format!("csrf_token={csrf}&{form}");
        let began = Instant::now();
        let reply = exchange(
            &gw,
            &ui_request(
                "POST",
                target,
                &format!("{FORM}Cookie: mcpgw_session={session}\r\n"),
                body.as_bytes(),
            ),
        );
        let what = format!("{target} with {}", &form[..form.len().min(80)]);
        let Reply::Answered(raw) = &reply else {
            panic!("{what}: the connection was cut: {reply:?}");
        };
        assert_ne!(raw.status, 303, "{what} was accepted: {}", raw.head);
        assert_console_refusal(&reply, &what);
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "{what} took {:?}",
            began.elapsed()
        );
    }
    assert_eq!(state(&gw), before, "a refused form changed access");
    assert_console_serves_promptly(&gw, Some(&session));
}
