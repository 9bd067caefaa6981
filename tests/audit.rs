//! End-to-end tests of audit export against the real binary: a scripted session with
//! authentication on reaches a file sink and a syslog receiver whole, in order and without a
//! secret; a syslog receiver that stops reading loses records (counted on `/metrics`) without
//! slowing tool calls.

mod support;

use std::net::{TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{RunningGateway, cli_key, fixture_server_yaml, gateway};

/// One request with an optional key, from a client address the gateway believes (it trusts
/// 127.0.0.1 as a proxy), answering the status and the body as JSON (or text).
fn call(
    gw: &RunningGateway,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: Option<&Value>,
) -> (u16, Value) {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .new_agent();
    let mut request = ureq::http::Request::builder()
        .method(method)
        .uri(gw.url(path))
        .header("x-forwarded-for", "198.51.100.7")
        .header("content-type", "application/json");
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    let payload = body.map(Value::to_string).unwrap_or_default();
    let mut response = agent
        .run(request.body(payload).unwrap())
        .expect("the gateway answers");
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// `tools/call` on `/mcp` in the stateless era with `key`; answers the JSON-RPC message.
fn call_tool_with_key(gw: &RunningGateway, key: &str, tool: &str, arguments: Value) -> Value {
    const PROTOCOL: &str = "2026-07-28";
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": PROTOCOL,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "mcpgw-e2e", "version": "0"},
            },
        },
    });
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .new_agent();
    let mut response = agent
        .post(&gw.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", PROTOCOL)
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .header("x-api-key", key)
        .send_json(&body)
        .expect("the gateway answers");
    assert_eq!(response.status().as_u16(), 200);
    let text = response.body_mut().read_to_string().unwrap();
    support::jsonrpc_answer(&text)
}

/// Datagrams a UDP socket on loopback received, collected by a thread until the test ends.
struct UdpInbox {
    port: u16,
    messages: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl UdpInbox {
    fn bind() -> Self {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let port = socket.local_addr().unwrap().port();
        let messages = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        {
            let (messages, stop) = (messages.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut buffer = vec![0_u8; 65_536];
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(read) = socket.recv(&mut buffer) {
                        let text = String::from_utf8_lossy(&buffer[..read]).into_owned();
                        messages.lock().unwrap().push(text);
                    }
                }
            });
        }
        Self {
            port,
            messages,
            stop,
        }
    }

    fn messages(&self) -> Vec<String> {
        self.messages.lock().unwrap().clone()
    }
}

impl Drop for UdpInbox {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The record in a syslog message: its MSG, which follows the structured data.
fn syslog_record(message: &str) -> Value {
    let start = message
        .find("] {")
        .unwrap_or_else(|| panic!("no structured data before MSG: {message}"));
    serde_json::from_str(&message[start + 2..])
        .unwrap_or_else(|error| panic!("MSG is not a record ({error}): {message}"))
}

fn file_records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is one record"))
        .collect()
}

fn types(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .map(|record| record["event_type"].as_str().unwrap().to_owned())
        .collect()
}

#[track_caller]
fn wait_until(what: &str, within: Duration, check: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "not within {within:?}: {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Whether `text` holds anything shaped like an API key: `mcp_` and 43 characters of base64url.
fn holds_a_key(text: &str) -> bool {
    text.match_indices("mcp_").any(|(at, _)| {
        let tail: Vec<char> = text[at + 4..].chars().take(43).collect();
        tail.len() == 43
            && tail
                .iter()
                .all(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
    })
}

const SECURITY_SET: [&str; 23] = mcpgw_core::audit::SECURITY_EVENT_TYPES;

#[test]
fn a_session_reaches_the_file_and_syslog_in_order_without_secrets() {
    let data = tempfile::tempdir().unwrap();
    let admin = cli_key(data.path(), "user:root", Some("admin"));
    let audit_dir = tempfile::tempdir().unwrap();
    let audit_file = audit_dir.path().join("audit.jsonl");
    let inbox = UdpInbox::bind();
    let config = |timeout: u64| {
        format!(
            "auth:\n  enabled: true\n  trusted_proxies: [\"127.0.0.1\"]\n\
             audit:\n  sinks:\n    - {{type: file, path: \"{}\"}}\n    - {{type: syslog, address: \
             \"udp://127.0.0.1:{}\", hostname: e2e-host}}\n\
             tool_timeout_s: {timeout}\nmcp_servers:\n{}",
            audit_file.display(),
            inbox.port,
            fixture_server_yaml("demo", &[])
        )
    };
    let mut gw = gateway().config(&config(60)).data_dir(data).start();

    // A failed authentication: a well-formed key nobody issued.
    let guessed = format!("mcp_{}", "Q".repeat(43));
    let (status, _) = call(&gw, "GET", "/api/mcp_servers", Some(&guessed), None);
    assert_eq!(status, 401);
    // A key made for bob, who then may not call one tool.
    let (status, made) = call(
        &gw,
        "POST",
        "/api/auth/keys",
        Some(&admin),
        Some(&json!({"principal": "user:bob", "name": "laptop", "role": "developer"})),
    );
    assert_eq!(status, 201, "{made}");
    let bob = made["key"].as_str().unwrap().to_owned();
    let key_id = made["key_id"].as_str().unwrap().to_owned();
    let (status, body) = call(
        &gw,
        "POST",
        "/api/auth/policies/tool/demo__add",
        Some(&admin),
        Some(&json!({"allow_list": [], "deny_list": ["user:bob"]})),
    );
    assert!(status < 300, "{body}");
    // The denied tool call, and an allowed one (which is no security event).
    let denied = call_tool_with_key(&gw, &bob, "demo__add", json!({"a": 1, "b": 2}));
    assert!(
        denied.get("error").is_some() || denied["result"]["isError"] == true,
        "{denied}"
    );
    let allowed = call_tool_with_key(&gw, &bob, "demo__echo", json!({"text": "hi"}));
    assert!(allowed.get("result").is_some(), "{allowed}");
    // A role made and assigned.
    let (status, body) = call(
        &gw,
        "POST",
        "/api/auth/roles",
        Some(&admin),
        Some(&json!({"name": "reviewers", "permissions": ["mcp_server:list"]})),
    );
    assert_eq!(status, 201, "{body}");
    let (status, body) = call(
        &gw,
        "POST",
        "/api/auth/roles/assign",
        Some(&admin),
        Some(&json!({"principal": "user:bob", "role": "reviewers"})),
    );
    assert_eq!(status, 201, "{body}");
    // Bob's key revoked, and the configuration reloaded with a change.
    let (status, body) = call(
        &gw,
        "DELETE",
        &format!("/api/auth/keys/{key_id}"),
        Some(&admin),
        None,
    );
    assert!(status < 300, "{body}");
    std::fs::write(gw.config_path.as_ref().unwrap(), config(30)).unwrap();
    let (status, body) = call(&gw, "POST", "/api/config/reload", Some(&admin), None);
    assert_eq!(status, 200, "{body}");

    // Both sinks get the whole session, the reload last.
    let reloaded = |records: Vec<Value>| {
        types(&records)
            .iter()
            .any(|kind| kind == "ConfigurationReloaded")
    };
    wait_until("the file has the reload", Duration::from_secs(10), || {
        reloaded(file_records(&audit_file))
    });
    wait_until("syslog has the reload", Duration::from_secs(10), || {
        reloaded(inbox.messages().iter().map(|m| syslog_record(m)).collect())
    });
    // A graceful stop flushes the sinks.
    let status = gw.signal_and_wait(libc::SIGTERM, Duration::from_secs(30));
    assert!(status.success(), "{status:?}\n{}", gw.stderr());

    let from_file = file_records(&audit_file);
    wait_until(
        "syslog has every record the file has",
        Duration::from_secs(5),
        || inbox.messages().len() >= from_file.len(),
    );
    let messages = inbox.messages();
    let from_syslog: Vec<Value> = messages.iter().map(|m| syslog_record(m)).collect();
    assert_eq!(from_file, from_syslog, "both sinks got the same records");

    // In the order they were published, each once.
    let ids: Vec<u64> = from_file
        .iter()
        .map(|record| record["event_id"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "{ids:?}");
    // Only security events, and the session's in its order.
    let kinds = types(&from_file);
    for kind in &kinds {
        assert!(SECURITY_SET.contains(&kind.as_str()), "{kind} was exported");
    }
    let script = [
        "AuthenticationFailed",
        "ApiKeyCreated",
        "ToolPolicySet",
        "AuthorizationDenied",
        "RoleCreated",
        "RoleAssigned",
        "ApiKeyRevoked",
        "ConfigurationReloaded",
    ];
    let mut rest = kinds.iter();
    for expected in script {
        assert!(
            rest.any(|kind| kind == expected),
            "{expected} missing or out of order in {kinds:?}"
        );
    }
    let denial = from_file
        .iter()
        .find(|record| record["event_type"] == "AuthorizationDenied")
        .unwrap();
    assert_eq!(denial["severity"], "warning");
    assert_eq!(denial["event"]["principal"], "user:bob");
    let reload = from_file
        .iter()
        .find(|record| record["event_type"] == "ConfigurationReloaded")
        .unwrap();
    assert_eq!(
        reload["event"]["restart_required"],
        json!(["tool_timeout_s"])
    );
    assert!(
        reload["occurred_at"].as_str().unwrap().ends_with('Z'),
        "{reload}"
    );
    // Syslog's header names the event and the configured host.
    let header = messages
        .iter()
        .find(|m| m.contains(" AuthenticationFailed "))
        .unwrap();
    assert!(header.starts_with("<84>1 "), "authpriv, warning: {header}");
    assert!(header.contains(" e2e-host mcpgw "), "{header}");

    // No credential the session used is anywhere in either sink.
    let file_text = std::fs::read_to_string(&audit_file).unwrap();
    let syslog_text = messages.concat();
    for secret in [&admin, &bob, &guessed] {
        assert!(
            !file_text.contains(secret.as_str()),
            "the file holds {secret}"
        );
        assert!(
            !syslog_text.contains(secret.as_str()),
            "syslog holds {secret}"
        );
    }
    assert!(!holds_a_key(&file_text), "no key at all: {file_text}");
    assert!(!holds_a_key(&syslog_text), "no key at all: {syslog_text}");
    // The file is the gateway user's alone.
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&audit_file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}");
}

/// Makes the listener's (and so its connections') receive buffer as small as the kernel
/// allows, so that a receiver that never reads is full after a few records.
#[allow(unsafe_code)]
fn shrink_receive_buffer(listener: &TcpListener) {
    use std::os::fd::AsRawFd as _;
    let size: libc::c_int = 1024;
    // SAFETY: setsockopt on a socket this test owns, reading a c_int that outlives the call,
    // with its exact length.
    let result = unsafe {
        libc::setsockopt(
            listener.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            std::ptr::from_ref(&size).cast(),
            libc::socklen_t::try_from(std::mem::size_of::<libc::c_int>()).unwrap(),
        )
    };
    assert_eq!(result, 0, "{}", std::io::Error::last_os_error());
}

/// The value of `mcpgw_audit_records_dropped_total{sink="syslog"}` on `/metrics`.
fn dropped(gw: &RunningGateway) -> f64 {
    let text = gw.get("/metrics").text;
    text.lines()
        .find_map(|line| {
            line.strip_prefix("mcpgw_audit_records_dropped_total{sink=\"syslog\"} ")
                .map(|value| value.trim().parse::<f64>().unwrap())
        })
        .unwrap_or_else(|| panic!("no dropped counter of the syslog sink:\n{text}"))
}

fn timed_call(gw: &RunningGateway, n: usize) -> Duration {
    let started = Instant::now();
    let answer = gw.mcp_call_tool("demo__echo", json!({"text": format!("call {n}")}));
    assert!(answer.get("result").is_some(), "{answer}");
    started.elapsed()
}

#[test]
fn a_receiver_that_stops_reading_costs_records_not_call_latency() {
    // Bad input: a syslog receiver that accepts connections and never reads from them.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    shrink_receive_buffer(&listener);
    let port = listener.local_addr().unwrap().port();
    let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
    {
        let held = held.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                held.lock().unwrap().push(stream);
            }
        });
    }
    // Every tool call is exported, into a queue of four.
    let config = format!(
        "audit:\n  queue_size: 4\n  event_types: [ToolInvocationCompleted]\n  sinks:\n    - \
         {{type: syslog, address: \"tcp://127.0.0.1:{port}\"}}\nmcp_servers:\n{}",
        fixture_server_yaml("demo", &[])
    );
    let gw = gateway().config(&config).start();
    assert_eq!(dropped(&gw), 0.0, "nothing dropped before the first call");

    // The baseline: calls while the receiver's buffers still take what is sent.
    let mut baseline: Vec<Duration> = (0..20).map(|n| timed_call(&gw, n)).collect();
    baseline.sort_unstable();
    let median = baseline[baseline.len() / 2];

    // Calls until the receiver's buffers are full and the sink is stuck: nearly every record
    // is dropped. (A few may be dropped earlier, whenever calls outpace the sink's writes.)
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut slowest = Duration::ZERO;
    let mut n = 20;
    loop {
        assert!(
            Instant::now() < deadline,
            "the sink was not stuck within 120 s; held connections: {}, dropped: {}",
            held.lock().unwrap().len(),
            dropped(&gw)
        );
        let before = dropped(&gw);
        for _ in 0..20 {
            slowest = slowest.max(timed_call(&gw, n));
            n += 1;
        }
        if dropped(&gw) - before >= 15.0 {
            break;
        }
    }
    // The sink is stuck now (each write waits out its timeout): calls go on as before, and
    // their records are dropped.
    let before = dropped(&gw);
    for _ in 0..40 {
        slowest = slowest.max(timed_call(&gw, n));
        n += 1;
    }
    let after = dropped(&gw);
    assert!(
        after >= before + 20.0,
        "records of calls made while the sink was stuck were not dropped: {before} -> {after}"
    );
    // Generous on a loaded machine, far below the sink's 5 s timeout that a call waiting on it
    // would take.
    let bound = (median * 30).max(Duration::from_secs(3));
    assert!(
        slowest < bound,
        "a call took {slowest:?} while the sink was stuck (baseline median {median:?})"
    );
    assert!(
        !held.lock().unwrap().is_empty(),
        "the sink connected to the receiver"
    );
}
