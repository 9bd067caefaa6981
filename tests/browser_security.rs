//! End-to-end tests of what a web page can make the operator's browser do to a gateway on
//! loopback with authentication off, against the real binary.
//!
//! On the wire (requests written byte for byte, so no client library fixes a header up): bodies
//! that a browser sends across sites without a preflight (`text/plain`, forms, multipart, a body
//! without a type) are refused with 415; requests from a foreign `Origin` (`null` included) that
//! change anything are refused with 403, and so are WebSocket upgrades and `/mcp` requests from
//! one; a `Host` that does not name the gateway (DNS rebinding) is refused with 421 on every
//! route but the probes. And the positives: the gateway's own pages, clients that send no
//! `Origin` (curl), bodiless POSTs, `charset` parameters, the names of `allowed_hosts` (and of
//! its older spelling `mcp_endpoint.allowed_hosts`), and address literals on a non-loopback
//! listener.
//!
//! In a real browser (Debian's chromium, headless): a page on another origin tries a no-cors
//! `fetch` that creates and starts a server, auto-submitted forms, a WebSocket to the event
//! stream and a POST to `/mcp`; a page whose name is rebound to 127.0.0.1 tries to read and
//! change the gateway as its own origin. A page on an origin that `MCP_CORS_ORIGINS` allows
//! reads and creates in the same run, which proves that the browser and its pages really reach
//! the gateway, so that the refusals mean something.

mod support;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use serde_json::{Value, json};
use support::{RawAnswer, RunningGateway, fixture_server_yaml, gateway, raw_exchange};

/// What a WebSocket handshake sends besides `Host` and `Origin`.
const UPGRADE: &str = "Upgrade: websocket\r\nConnection: Upgrade\r\n\
    Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n";

/// One request written as is: `host` (the gateway's own address when `None`), `headers` (each
/// `Name: value`), and a body with its `Content-Length` when there is one.
fn send(
    gw: &RunningGateway,
    method: &str,
    path: &str,
    host: Option<&str>,
    headers: &[&str],
    body: Option<&str>,
) -> RawAnswer {
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\n",
        host.unwrap_or(gw.address())
    );
    for header in headers {
        request.push_str(header);
        request.push_str("\r\n");
    }
    if let Some(body) = body {
        request.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    request.push_str("Connection: close\r\n\r\n");
    request.push_str(body.unwrap_or_default());
    raw_exchange(gw.address(), request.as_bytes())
}

/// A WebSocket upgrade of the event stream with `headers` (an `Origin`, say).
fn upgrade(gw: &RunningGateway, host: Option<&str>, headers: &[&str]) -> RawAnswer {
    let request = format!(
        "GET /api/ws/events HTTP/1.1\r\nHost: {}\r\n{UPGRADE}{}\r\n",
        host.unwrap_or(gw.address()),
        headers
            .iter()
            .map(|header| format!("{header}\r\n"))
            .collect::<String>()
    );
    raw_exchange(gw.address(), request.as_bytes())
}

/// A server definition whose command, were it ever started, would create `marker`.
fn marking_server(id: &str, marker: &Path) -> String {
    json!({
        "mcp_server_id": id,
        "mode": "subprocess",
        "command": ["touch", marker.to_str().unwrap()],
    })
    .to_string()
}

fn server_ids(gw: &RunningGateway) -> Vec<String> {
    let listed = gw.get("/api/mcp_servers");
    assert_eq!(listed.status, 200, "{}", listed.text);
    let mut ids: Vec<String> = listed.json()["mcp_servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|server| server["mcp_server_id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

/// An MCP `initialize` as the 2025-11-25 era sends it.
fn initialize() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "browser-security", "version": "0"}}})
    .to_string()
}

const MCP_HEADERS: [&str; 2] = [
    "Content-Type: application/json",
    "Accept: application/json, text/event-stream",
];

#[test]
fn bodies_not_declared_json_are_refused_with_415_before_any_handler() {
    let gw = gateway().config("probe_tools: false\n").start();
    let marker = gw.data_dir.path().join("pwned");
    let body = marking_server("pwned", &marker);
    // Bad input: what a page sends across sites without a preflight (text/plain, a form, a
    // multipart form, a body whose type the page left out), and a JSON look-alike.
    for content_type in [
        Some("Content-Type: text/plain;charset=UTF-8"),
        Some("Content-Type: application/x-www-form-urlencoded"),
        Some("Content-Type: multipart/form-data; boundary=----x"),
        Some("Content-Type: application/jsonp"),
        None,
    ] {
        let headers: Vec<&str> = content_type.into_iter().collect();
        for (method, path) in [
            ("POST", "/api/mcp_servers"),
            ("PUT", "/api/mcp_servers/pwned"),
            ("POST", "/api/mcp_servers/pwned/start"),
        ] {
            let answer = send(&gw, method, path, None, &headers, Some(&body));
            let message = answer.assert_error(415, "UnsupportedMediaTypeError");
            assert!(
                message.contains("Content-Type: application/json"),
                "{method} {path} with {content_type:?}: {message}"
            );
        }
    }
    // A declared non-JSON type is refused even without a body: an empty text/plain form.
    send(
        &gw,
        "POST",
        "/api/mcp_servers/pwned/start",
        None,
        &["Content-Type: text/plain"],
        Some(""),
    )
    .assert_error(415, "UnsupportedMediaTypeError");
    assert_eq!(server_ids(&gw), Vec::<String>::new());
    assert!(!marker.exists(), "a refused body ran its command");

    // JSON, with a charset parameter, in any case.
    let typed = send(
        &gw,
        "POST",
        "/api/mcp_servers",
        None,
        &["Content-Type: Application/JSON; charset=utf-8"],
        Some(&marking_server("typed", &gw.data_dir.path().join("typed"))),
    );
    assert_eq!(typed.status, 201, "{}", typed.body);
    // A bodiless POST needs no type, as `curl -X POST` sends it (with and without a length).
    let stopped = send(&gw, "POST", "/api/mcp_servers/typed/stop", None, &[], None);
    assert_eq!(stopped.status, 200, "{}", stopped.body);
    let stopped = send(
        &gw,
        "POST",
        "/api/mcp_servers/typed/stop",
        None,
        &[],
        Some(""),
    );
    assert_eq!(stopped.status, 200, "{}", stopped.body);
    assert_eq!(server_ids(&gw), ["typed"]);
}

#[test]
fn requests_from_foreign_origins_change_nothing() {
    let gw = gateway().config("probe_tools: false\n").start();
    let marker = gw.data_dir.path().join("pwned");
    let created = gw.post(
        "/api/mcp_servers",
        &json!({"mcp_server_id": "kept", "mode": "subprocess", "command": ["true"],
                "description": "as created"}),
    );
    assert_eq!(created.status, 201, "{}", created.text);
    let port = gw.port();
    let update = json!({"mode": "subprocess", "command": ["touch", marker.to_str().unwrap()],
                        "description": "changed"})
    .to_string();
    let create = marking_server("pwned", &marker);
    let other_port = format!(
        "Origin: http://127.0.0.1:{}",
        port.checked_add(1).unwrap_or(1)
    );
    let other_name = format!("Origin: http://localhost:{port}");
    // Bad input: a foreign site, the opaque origin of sandboxed frames and local files, another
    // port of the gateway's host, and the gateway's port under a name the request did not use.
    for origin in [
        "Origin: https://evil.example",
        "Origin: null",
        other_port.as_str(),
        other_name.as_str(),
    ] {
        for (method, path, body) in [
            ("POST", "/api/mcp_servers", Some(create.as_str())),
            ("PUT", "/api/mcp_servers/kept", Some(update.as_str())),
            ("PATCH", "/api/mcp_servers/kept", Some(update.as_str())),
            ("DELETE", "/api/mcp_servers/kept", None),
            ("POST", "/api/mcp_servers/kept/start", None),
        ] {
            let answer = send(
                &gw,
                method,
                path,
                None,
                &[origin, "Content-Type: application/json"],
                body,
            );
            let message = answer.assert_error(403, "ForbiddenOriginError");
            assert!(
                message.contains("MCP_CORS_ORIGINS"),
                "{method} {path} from {origin}: {message}"
            );
        }
    }
    assert_eq!(server_ids(&gw), ["kept"]);
    let kept = gw.get("/api/mcp_servers/kept").json();
    assert_eq!(kept["description"], "as created", "{kept}");
    assert_eq!(kept["state"], "cold", "{kept}");
    assert!(!marker.exists());

    // Reading is left to CORS: served, without a header that would let the page see it.
    let read = send(
        &gw,
        "GET",
        "/api/mcp_servers",
        None,
        &["Origin: https://evil.example"],
        None,
    );
    assert_eq!(read.status, 200, "{}", read.body);
    assert!(read.header("access-control-allow-origin").is_none());

    // The gateway's own pages, under either loopback name, and clients without an Origin.
    let own = format!("Origin: http://127.0.0.1:{port}");
    let answer = send(
        &gw,
        "POST",
        "/api/mcp_servers",
        None,
        &[&own, "Content-Type: application/json"],
        Some(r#"{"mcp_server_id": "own", "mode": "subprocess", "command": ["true"]}"#),
    );
    assert_eq!(answer.status, 201, "{}", answer.body);
    let localhost = format!("localhost:{port}");
    let answer = send(
        &gw,
        "DELETE",
        "/api/mcp_servers/own",
        Some(&localhost),
        &[&other_name],
        None,
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    let answer = send(
        &gw,
        "DELETE",
        "/api/mcp_servers/kept",
        None,
        &["Content-Type: application/json"],
        None,
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(server_ids(&gw), Vec::<String>::new());
}

#[test]
fn a_host_that_does_not_name_the_gateway_is_misdirected_on_every_route_but_the_probes() {
    let gw = gateway()
        .config(&format!(
            "probe_tools: false\nmcp_servers:\n{}",
            fixture_server_yaml("demo", &[])
        ))
        .start();
    let port = gw.port();
    let rebound = format!("evil.example:{port}");
    let json = ["Content-Type: application/json"];
    let create = r#"{"mcp_server_id": "rebound", "mode": "subprocess", "command": ["true"]}"#;
    let initialize = initialize();
    // Bad input: a rebinding page's name on the REST API, the MCP endpoint, the documentation,
    // the metrics, a preflight, a path that does not exist; and a name with a line break.
    for (method, path, headers, body) in [
        ("GET", "/api/mcp_servers", &[][..], None),
        ("POST", "/api/mcp_servers", &json[..], Some(create)),
        ("POST", "/mcp", &MCP_HEADERS[..], Some(initialize.as_str())),
        ("GET", "/docs", &[], None),
        ("GET", "/docs/", &[], None),
        ("GET", "/api/openapi.json", &[], None),
        ("GET", "/metrics", &[], None),
        (
            "OPTIONS",
            "/api/mcp_servers",
            &[
                "Origin: https://evil.example",
                "Access-Control-Request-Method: POST",
            ],
            None,
        ),
        ("GET", "/api/no/such/route", &[], None),
    ] {
        for host in [rebound.as_str(), "evil.example", "evil.example%0d%0aX: 1"] {
            let answer = send(&gw, method, path, Some(host), headers, body);
            answer.assert_error(421, "MisdirectedRequestError");
            assert!(
                !answer.body.contains("evil"),
                "{method} {path} reflects the Host: {}",
                answer.body
            );
        }
    }
    upgrade(&gw, Some(&rebound), &[]).assert_error(421, "MisdirectedRequestError");
    assert_eq!(server_ids(&gw), ["demo"]);

    // The probes answer under any name: an orchestrator may ask by one the gateway never heard.
    for probe in ["/health/live", "/health/startup", "/health/ready"] {
        let answer = send(&gw, "GET", probe, Some(&rebound), &[], None);
        assert_eq!(answer.status, 200, "{probe}: {}", answer.body);
    }
    // Bad input: other paths that start like a probe's.
    for path in [
        "/health/../api/mcp_servers",
        "/health/%2e%2e/api/mcp_servers",
        "/health/nothing",
        "/health/live/",
    ] {
        send(&gw, "GET", path, Some(&rebound), &[], None)
            .assert_error(421, "MisdirectedRequestError");
    }
    // Loopback names and addresses, with and without the port.
    for host in [
        format!("localhost:{port}"),
        "localhost".to_owned(),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        format!("LocalHost.:{port}"),
    ] {
        let answer = send(&gw, "GET", "/api/mcp_servers", Some(&host), &[], None);
        assert_eq!(answer.status, 200, "{host}: {}", answer.body);
    }
    let answer = send(&gw, "GET", "/docs/", Some("localhost"), &[], None);
    assert_eq!(answer.status, 200);
    assert_eq!(upgrade(&gw, None, &[]).status, 101);
}

#[test]
fn allowed_hosts_and_its_older_spelling_name_the_gateway_too() {
    let gw = gateway()
        .config(
            "probe_tools: false\nallowed_hosts: [gw.example.com]\n\
             mcp_endpoint: {allowed_hosts: [\"old.example.com:8443\"]}\n",
        )
        .start();
    let port = gw.port();
    let initialize = initialize();
    for host in [
        format!("gw.example.com:{port}"),
        "GW.Example.com".to_owned(),
        "old.example.com:8443".to_owned(),
    ] {
        let answer = send(&gw, "GET", "/api/mcp_servers", Some(&host), &[], None);
        assert_eq!(answer.status, 200, "{host}: {}", answer.body);
        let answer = send(
            &gw,
            "POST",
            "/mcp",
            Some(&host),
            &MCP_HEADERS,
            Some(&initialize),
        );
        assert_eq!(answer.status, 200, "{host}: {}", answer.body);
    }
    // Bad input: another port of a name bound to one, a name listed nowhere.
    for host in ["old.example.com:8000", "other.example.com"] {
        send(&gw, "GET", "/api/mcp_servers", Some(host), &[], None)
            .assert_error(421, "MisdirectedRequestError");
    }
    // A page served under an allowed name is the gateway's own page there.
    let host = format!("gw.example.com:{port}");
    let answer = send(
        &gw,
        "POST",
        "/api/mcp_servers",
        Some(&host),
        &[
            &format!("Origin: http://gw.example.com:{port}"),
            "Content-Type: application/json",
        ],
        Some(r#"{"mcp_server_id": "own", "mode": "subprocess", "command": ["true"]}"#),
    );
    assert_eq!(answer.status, 201, "{}", answer.body);
}

#[test]
fn a_listener_on_every_interface_answers_addresses_and_listed_names_only() {
    let gw = gateway()
        .host("0.0.0.0")
        .arg("--unsafe-no-auth")
        .config("probe_tools: false\n")
        .start();
    let port = gw.port();
    // A pod address, as Kubernetes probes and Prometheus send it, and an IPv6 one.
    for host in [format!("10.1.2.3:{port}"), format!("[fd00::7]:{port}")] {
        for path in ["/api/mcp_servers", "/metrics", "/health/ready"] {
            let answer = send(&gw, "GET", path, Some(&host), &[], None);
            assert_eq!(answer.status, 200, "{host} {path}: {}", answer.body);
        }
    }
    // Bad input: a name nobody listed (a service name, or a rebinding page's).
    let named = format!("mcpgw.default.svc:{port}");
    for path in ["/api/mcp_servers", "/metrics"] {
        send(&gw, "GET", path, Some(&named), &[], None)
            .assert_error(421, "MisdirectedRequestError");
    }
    let probe = send(&gw, "GET", "/health/ready", Some(&named), &[], None);
    assert_eq!(probe.status, 200, "{}", probe.body);
}

#[test]
fn websocket_upgrades_from_foreign_origins_are_refused() {
    let console = "http://console.example:3000";
    let gw = gateway().env("MCP_CORS_ORIGINS", console).start();
    // Bad input: a foreign site, the opaque origin.
    for origin in ["Origin: https://evil.example", "Origin: null"] {
        let message = upgrade(&gw, None, &[origin]).assert_error(403, "ForbiddenOriginError");
        assert!(message.contains("MCP_CORS_ORIGINS"), "{message}");
    }
    let own = format!("Origin: http://127.0.0.1:{}", gw.port());
    let allowed = format!("Origin: {console}");
    for headers in [&[own.as_str()][..], &[allowed.as_str()], &[]] {
        let answer = upgrade(&gw, None, headers);
        assert_eq!(answer.status, 101, "{headers:?}: {}", answer.body);
    }
}

#[test]
fn mcp_answers_its_own_pages_listed_origins_and_clients_without_one() {
    let console = "http://console.example:3000";
    let gw = gateway()
        .config("mcp_endpoint: {allowed_origins: [\"http://desktop.example:*\"]}\n")
        .env("MCP_CORS_ORIGINS", console)
        .start();
    let initialize = initialize();
    let with = |origin: &str| {
        let mut headers = MCP_HEADERS.to_vec();
        headers.push(origin);
        send(&gw, "POST", "/mcp", None, &headers, Some(&initialize))
    };
    // Bad input: a foreign site, the opaque origin; on POST and on the GET stream alike.
    for origin in ["Origin: https://evil.example", "Origin: null"] {
        with(origin).assert_error(403, "ForbiddenOriginError");
        send(
            &gw,
            "GET",
            "/mcp",
            None,
            &[origin, "Accept: text/event-stream"],
            None,
        )
        .assert_error(403, "ForbiddenOriginError");
    }
    let own = format!("Origin: http://127.0.0.1:{}", gw.port());
    let allowed = format!("Origin: {console}");
    for origin in [
        own.as_str(),
        allowed.as_str(),
        "Origin: http://desktop.example:5173",
    ] {
        let answer = with(origin);
        assert_eq!(answer.status, 200, "{origin}: {}", answer.body);
    }
    let answer = send(&gw, "POST", "/mcp", None, &MCP_HEADERS, Some(&initialize));
    assert_eq!(answer.status, 200, "{}", answer.body);
    // The MCP endpoint's own origins open only the MCP endpoint.
    send(
        &gw,
        "POST",
        "/api/mcp_servers",
        None,
        &[
            "Origin: http://desktop.example:5173",
            "Content-Type: application/json",
        ],
        Some(r#"{"mcp_server_id": "x", "mode": "subprocess", "command": ["true"]}"#),
    )
    .assert_error(403, "ForbiddenOriginError");
}

// --- In a real browser ----------------------------------------------------------------------

const CHROMIUM: &str = "/usr/bin/chromium";
/// The attacker's site and an allowed console, both served by [`PageServer`] on one port.
const EVIL: &str = "evil.example";
const CONSOLE: &str = "console.example";

/// A tiny web server for the browser: it serves the pages it holds by path, takes the result a
/// page posts to `/report`, and relays every other request byte for byte to the gateway, as a
/// name that an attacker rebinds to 127.0.0.1 does (the gateway then sees the attacker's name in
/// `Host`).
struct PageServer {
    port: u16,
    reports: Mutex<mpsc::Receiver<Value>>,
}

impl PageServer {
    fn start(listener: TcpListener, pages: HashMap<String, String>, gateway: String) -> Self {
        let port = listener.local_addr().unwrap().port();
        let pages = Arc::new(pages);
        let (report, reports) = mpsc::channel();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let pages = Arc::clone(&pages);
                let gateway = gateway.clone();
                let report = report.clone();
                std::thread::spawn(move || serve(client, &pages, &report, &gateway));
            }
        });
        Self {
            port,
            reports: Mutex::new(reports),
        }
    }

    /// Loads `page` under `name` in a fresh headless chromium that resolves the two test names
    /// to 127.0.0.1, and answers the result the page reports. Fails loudly when chromium is
    /// missing, or the page reports nothing within 60 s.
    fn browse(&self, name: &str, page: &str) -> Value {
        assert!(
            Path::new(CHROMIUM).exists(),
            "{CHROMIUM} is missing: run scripts/install-test-deps.sh (it installs Debian's \
             chromium)"
        );
        let url = format!("http://{name}:{}/{page}", self.port);
        let profile = tempfile::tempdir().unwrap();
        let mut chromium = Command::new(CHROMIUM)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg(format!(
                "--host-resolver-rules=MAP {EVIL} 127.0.0.1, MAP {CONSOLE} 127.0.0.1"
            ))
            .arg(&url)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("chromium starts");
        let mut stderr = chromium.stderr.take().unwrap();
        let log = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        let report = self
            .reports
            .lock()
            .unwrap()
            .recv_timeout(Duration::from_secs(60));
        let _ = chromium.kill();
        let _ = chromium.wait();
        let log = log.join().unwrap();
        let report = report.unwrap_or_else(|_| {
            panic!("{url} reported nothing within 60 s; chromium's log:\n{log}")
        });
        assert_eq!(report["page"], format!("/{page}"), "{report}");
        assert_eq!(
            report["done"], true,
            "{url}: {report}\nchromium's log:\n{log}"
        );
        report
    }
}

fn serve(
    mut client: TcpStream,
    pages: &HashMap<String, String>,
    report: &mpsc::Sender<Value>,
    gateway: &str,
) {
    let mut head = Vec::new();
    let mut buffer = [0_u8; 4096];
    let end = loop {
        if let Some(end) = head.windows(4).position(|window| window == b"\r\n\r\n") {
            break end + 4;
        }
        match client.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(read) => head.extend_from_slice(&buffer[..read]),
        }
        if head.len() > 65_536 {
            return;
        }
    };
    let text = String::from_utf8_lossy(&head[..end]).into_owned();
    let target = text.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let path = target.split('?').next().unwrap_or("/");
    if let Some(page) = pages.get(path) {
        let _ = write!(
            client,
            "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\
             Cache-Control: no-store\r\nConnection: close\r\n\r\n{page}",
            page.len()
        );
        return;
    }
    if path == "/report" {
        let length: usize = text
            .lines()
            .filter_map(|line| line.split_once(':'))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
            .and_then(|(_, value)| value.trim().parse().ok())
            .unwrap_or(0);
        let mut body = head[end..].to_vec();
        while body.len() < length {
            match client.read(&mut buffer) {
                Ok(0) | Err(_) => return,
                Ok(read) => body.extend_from_slice(&buffer[..read]),
            }
        }
        let _ = client.write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
        if let Ok(value) = serde_json::from_slice(&body) {
            let _ = report.send(value);
        }
        return;
    }
    if path == "/favicon.ico" {
        let _ = client
            .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return;
    }
    let Ok(mut upstream) = TcpStream::connect(gateway) else {
        return;
    };
    if upstream.write_all(&head).is_err() {
        return;
    }
    let (Ok(mut upstream_reader), Ok(mut client_writer)) =
        (upstream.try_clone(), client.try_clone())
    else {
        return;
    };
    let answers = std::thread::spawn(move || {
        let _ = std::io::copy(&mut upstream_reader, &mut client_writer);
        let _ = client_writer.shutdown(std::net::Shutdown::Write);
    });
    let _ = std::io::copy(&mut client, &mut upstream);
    let _ = upstream.shutdown(std::net::Shutdown::Write);
    let _ = answers.join();
}

/// A page that runs `body` (the statements of an async function that fills `out`), then posts
/// `out`, with its path and `done: true` once the statements finished, to `REPORT_URL`: the
/// page server under its address, a name no page's own connections use, so the report never
/// travels on a connection that is relayed to the gateway.
fn page(markup: &str, body: &str) -> String {
    format!(
        "<!doctype html><html><body>{markup}<script>\n\
         const out = {{page: location.pathname}};\n\
         (async () => {{\n\
           try {{\n{body}\n}} catch (error) {{ out.error = String(error); }}\n\
           out.done = true;\n\
           await fetch(\"REPORT_URL\", {{method: \"POST\", mode: \"no-cors\", body: JSON.stringify(out)}});\n\
         }})();\n\
         </script></body></html>"
    )
}

/// The pages of the browser test, by path, with the gateway's URL, the report URL and the
/// marker directory filled in.
fn pages(
    gateway_url: &str,
    gateway_ws: &str,
    report_url: &str,
    markers: &Path,
) -> HashMap<String, String> {
    let fill = |text: &str| {
        text.replace("GATEWAY_WS", gateway_ws)
            .replace("GATEWAY", gateway_url)
            .replace("MARKERS", markers.to_str().unwrap())
    };
    let mcp_call = r#"JSON.stringify({jsonrpc: "2.0", id: 1, method: "tools/call", params: {
        name: "demo__echo", arguments: {text: "from a page"}, _meta: {
          "io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientCapabilities": {},
          "io.modelcontextprotocol/clientInfo": {name: "page", version: "0"}}}})"#;
    let mut pages = HashMap::new();
    // The positive control: an origin listed in MCP_CORS_ORIGINS reads, creates and opens the
    // event stream.
    pages.insert(
        "/console.html".to_owned(),
        page(
            "",
            &fill(
                r#"
            const listed = await fetch("GATEWAY/api/mcp_servers");
            out.list_status = listed.status;
            out.listed = (await listed.json()).mcp_servers.map((server) => server.mcp_server_id);
            const created = await fetch("GATEWAY/api/mcp_servers", {method: "POST",
              headers: {"Content-Type": "application/json"},
              body: JSON.stringify({mcp_server_id: "console-made", mode: "subprocess",
                                    command: ["true"]})});
            out.create_status = created.status;
            out.websocket = await new Promise((resolve) => {
              const socket = new WebSocket("GATEWAY_WS/api/ws/events");
              socket.onopen = () => { resolve("open"); socket.close(); };
              socket.onerror = () => resolve("refused");
              setTimeout(() => resolve("no answer"), 10000);
            });"#,
            ),
        ),
    );
    // Simple requests: no preflight, an opaque answer the page never needs to read.
    pages.insert(
        "/simple.html".to_owned(),
        page(
            "",
            &fill(
                r#"
            const post = (path, body, headers) =>
              fetch("GATEWAY" + path, {method: "POST", mode: "no-cors", headers, body});
            await post("/api/mcp_servers", JSON.stringify({mcp_server_id: "pwned",
              mode: "subprocess", command: ["touch", "MARKERS/simple"]}),
              {"Content-Type": "text/plain"});
            await post("/api/mcp_servers/pwned/start", "{}", {"Content-Type": "text/plain"});
            await post("/api/mcp_servers", new Blob([JSON.stringify({mcp_server_id: "untyped",
              mode: "subprocess", command: ["touch", "MARKERS/untyped"]})]), {});
            await post("/api/mcp_servers/untyped/start", null, {});
            await post("/api/mcp_servers/demo/start", null, {});
            out.sent = 5;"#,
            ),
        ),
    );
    // Forms: a text/plain one whose body is JSON, then a urlencoded start.
    pages.insert(
        "/form.html".to_owned(),
        page(
            &fill(
                r#"<form id="create" method="post" enctype="text/plain" target="sink1"
                  action="GATEWAY/api/mcp_servers">
              <input type="hidden"
                name='{"mcp_server_id":"formed","mode":"subprocess","command":["touch","MARKERS/form"],"description":"'
                value='"}'>
            </form>
            <form id="start" method="post" target="sink2"
                  action="GATEWAY/api/mcp_servers/formed/start">
              <input type="hidden" name="go" value="1">
            </form>"#,
            ),
            r#"
            // A frame for each answer, so that the page stays; it cannot read them.
            const loaded = (name) => {
              const frame = document.createElement("iframe");
              frame.name = name;
              document.body.appendChild(frame);
              return new Promise((resolve) => frame.addEventListener("load", resolve, {once: true}));
            };
            const first = loaded("sink1");
            document.getElementById("create").submit();
            await first;
            const second = loaded("sink2");
            document.getElementById("start").submit();
            await second;
            out.submitted = 2;"#,
        ),
    );
    // The event stream, which carries every server's events.
    pages.insert(
        "/ws.html".to_owned(),
        page(
            "",
            &fill(
                r#"
            out.websocket = await new Promise((resolve) => {
              const socket = new WebSocket("GATEWAY_WS/api/ws/events");
              socket.onopen = () => { resolve("open"); socket.close(); };
              socket.onerror = () => resolve("refused");
              setTimeout(() => resolve("no answer"), 10000);
            });"#,
            ),
        ),
    );
    // The MCP endpoint from a foreign page.
    pages.insert(
        "/mcp.html".to_owned(),
        page(
            "",
            &fill(&format!(
                r#"
            await fetch("GATEWAY/mcp", {{method: "POST", mode: "no-cors",
              headers: {{"Content-Type": "text/plain"}}, body: {mcp_call}}});
            out.sent = 1;"#
            )),
        ),
    );
    // DNS rebinding: the page's own name now leads to the gateway, so it calls it as its own
    // origin, with any headers and reading every answer.
    pages.insert(
        "/rebind.html".to_owned(),
        page(
            "",
            &fill(&format!(
                r#"
            const read = await fetch("/api/mcp_servers");
            out.read_status = read.status;
            out.read_body = await read.text();
            const created = await fetch("/api/mcp_servers", {{method: "POST",
              headers: {{"Content-Type": "application/json"}},
              body: JSON.stringify({{mcp_server_id: "rebound", mode: "subprocess",
                                     command: ["touch", "MARKERS/rebound"]}})}});
            out.create_status = created.status;
            const started = await fetch("/api/mcp_servers/rebound/start", {{method: "POST"}});
            out.start_status = started.status;
            const called = await fetch("/mcp", {{method: "POST", headers: {{
              "Content-Type": "application/json",
              "Accept": "application/json, text/event-stream",
              "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
              "Mcp-Name": "demo__echo"}}, body: {mcp_call}}});
            out.mcp_status = called.status;
            out.mcp_body = await called.text();"#
            )),
        ),
    );
    for page in pages.values_mut() {
        *page = page.replace("REPORT_URL", report_url);
    }
    pages
}

#[test]
fn a_hostile_page_in_a_real_browser_cannot_drive_the_gateway() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let page_port = listener.local_addr().unwrap().port();
    let console_origin = format!("http://{CONSOLE}:{page_port}");
    let gw = gateway()
        .config(&format!(
            "probe_tools: false\nmcp_servers:\n{}",
            fixture_server_yaml("demo", &[])
        ))
        .env("MCP_CORS_ORIGINS", &console_origin)
        .start();
    let markers: PathBuf = gw.data_dir.path().join("markers");
    std::fs::create_dir(&markers).unwrap();
    let gateway_url = format!("http://{}", gw.address());
    let gateway_ws = format!("ws://{}", gw.address());
    let server = PageServer::start(
        listener,
        pages(
            &gateway_url,
            &gateway_ws,
            &format!("http://127.0.0.1:{page_port}/report"),
            &markers,
        ),
        gw.address().to_owned(),
    );

    // The positive control first: the browser, its name mapping and the pages work.
    let console = server.browse(CONSOLE, "console.html");
    assert_eq!(console["list_status"], 200, "{console}");
    assert_eq!(console["listed"], json!(["demo"]), "{console}");
    assert_eq!(console["create_status"], 201, "{console}");
    assert_eq!(console["websocket"], "open", "{console}");

    let mut breaches = Vec::new();
    let simple = server.browse(EVIL, "simple.html");
    assert_eq!(simple["sent"], 5, "{simple}");
    let form = server.browse(EVIL, "form.html");
    assert_eq!(form["submitted"], 2, "{form}");
    let socket = server.browse(EVIL, "ws.html");
    if socket["websocket"] != "refused" {
        breaches.push(format!(
            "the event stream answered a foreign page: {socket}"
        ));
    }
    let mcp = server.browse(EVIL, "mcp.html");
    assert_eq!(mcp["sent"], 1, "{mcp}");
    let rebound = server.browse(EVIL, "rebind.html");
    for (what, key) in [
        ("read the servers", "read_status"),
        ("create a server", "create_status"),
        ("start a server", "start_status"),
        ("call a tool", "mcp_status"),
    ] {
        if rebound[key] != 421 {
            breaches.push(format!(
                "a rebound page's request to {what} was not refused as misdirected: {rebound}"
            ));
        }
    }
    if rebound["read_body"]
        .as_str()
        .unwrap_or_default()
        .contains("demo")
    {
        breaches.push(format!("a rebound page read the servers: {rebound}"));
    }

    // What the gateway says happened, asked without any Origin.
    let ids = server_ids(&gw);
    if ids != ["console-made", "demo"] {
        breaches.push(format!("servers created by foreign pages: {ids:?}"));
    }
    let made: Vec<String> = std::fs::read_dir(&markers)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    if !made.is_empty() {
        breaches.push(format!("commands of foreign pages ran: {made:?}"));
    }
    let demo = gw.get("/api/mcp_servers/demo").json();
    if demo["state"] != "cold" {
        breaches.push(format!("a foreign page started a server: {demo}"));
    }
    let history = gw.get("/api/mcp_servers/demo/tools/history").json();
    if history["history"] != json!([]) {
        breaches.push(format!("a foreign page called a tool: {history}"));
    }
    assert!(
        breaches.is_empty(),
        "a hostile page got through:\n{}",
        breaches.join("\n")
    );
}
