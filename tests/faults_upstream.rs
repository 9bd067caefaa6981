//! Fault injection end to end: upstream MCP servers that misbehave (crash, hang, write garbage
//! or enormous lines, flood stderr, never finish the handshake, flap, reset or stall their HTTP
//! connections) next to a healthy one, with the real gateway binary and real processes.
//!
//! Every test checks the same three things around its fault: the healthy server keeps answering
//! promptly over `/mcp` and REST; the faulty server's state and the domain events (over the
//! WebSocket stream and the tool history) tell the truth; and the gateway stays bounded (its
//! VmRSS under a stated bound, no process left behind, no zombie children).

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{RunningGateway, descendants, fixture_binary, fixture_server_yaml, gateway};
use tungstenite::{Message, WebSocket};

/// How fast the healthy server must answer a call and the REST API a request, whatever the
/// faulty server does (generous: the machine running the suite is small and busy).
const PROMPT: Duration = Duration::from_secs(3);

/// The gateway's resident memory must stay under this in every test. A debug build idles at
/// about 55 MiB with two servers; buffering a 50 MiB line (or parsing it) would go far beyond.
const RSS_BOUND_MIB: u64 = 128;

/// The tool call timeout of every test but those that need longer calls.
const CALL_TIMEOUT_S: u64 = 2;

// ----- helpers ---------------------------------------------------------------------------------

/// A configuration with the healthy fixture `healthy` and the given faulty servers; the
/// background tool probe is off so that only the tests start servers.
fn config(call_timeout_s: u64, faulty: &str) -> String {
    format!(
        "probe_tools: false\ntool_timeout_s: {call_timeout_s}\nmcp_servers:\n{}{faulty}",
        fixture_server_yaml("healthy", &[])
    )
}

/// A subprocess server running `command`, with predefined tools so that a call reaches it
/// before its first start, and `extra` YAML lines (indented by four spaces).
fn faulty_yaml(id: &str, command: &[String], tools: &[&str], extra: &[&str]) -> String {
    let command: Vec<String> = command
        .iter()
        .map(|part| serde_json::to_string(part).unwrap())
        .collect();
    let tools: Vec<String> = tools
        .iter()
        .map(|tool| format!("{{name: {tool}, inputSchema: {{type: object}}}}"))
        .collect();
    let mut yaml = format!(
        "  {id}:\n    mode: subprocess\n    command: [{}]\n    tools: [{}]\n",
        command.join(", "),
        tools.join(", ")
    );
    for line in extra {
        yaml.push_str(&format!("    {line}\n"));
    }
    yaml
}

fn fixture_command(args: &[&str]) -> Vec<String> {
    let mut command = vec![fixture_binary().display().to_string()];
    command.extend(args.iter().map(|arg| (*arg).to_owned()));
    command
}

const FIXTURE_TOOLS: &[&str] = &["echo", "sleep", "crash", "stderr"];

fn text_of(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

/// The healthy server answers a tool call over `/mcp` and its REST resources promptly.
#[track_caller]
fn assert_healthy_serves(gw: &RunningGateway) {
    let started = Instant::now();
    let answer = gw.mcp_call_tool("healthy__echo", json!({"text": "still serving"}));
    assert_eq!(text_of(&answer), "still serving", "{answer}");
    let details = gw.get("/api/mcp_servers/healthy");
    assert_eq!(details.status, 200, "{details:?}");
    assert_eq!(details.json()["state"], "ready");
    let tools = gw.get("/api/mcp_servers/healthy/tools");
    assert_eq!(tools.status, 200, "{tools:?}");
    let elapsed = started.elapsed();
    assert!(
        elapsed < PROMPT,
        "the healthy server took {elapsed:?} to answer"
    );
}

/// Starts a gateway with the healthy fixture beside the faulty server `id` (see
/// [`faulty_yaml`]), and starts the healthy one.
fn start_beside_healthy(
    call_timeout_s: u64,
    id: &str,
    command: &[String],
    tools: &[&str],
    extra: &[&str],
) -> RunningGateway {
    let gw = gateway()
        .config(&config(
            call_timeout_s,
            &faulty_yaml(id, command, tools, extra),
        ))
        .start();
    warm_up(&gw);
    gw
}

/// Starts the healthy server (its tools are unknown until it ran) and checks that it serves.
#[track_caller]
fn warm_up(gw: &RunningGateway) {
    let started = gw.post_empty("/api/mcp_servers/healthy/start");
    assert_eq!(started.status, 200, "{started:?}");
    assert_healthy_serves(gw);
}

fn rss_mib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|value| value.parse().ok())
        .expect("VmRSS in /proc/PID/status");
    kib / 1024
}

#[track_caller]
fn assert_memory_bounded(gw: &RunningGateway, bound_mib: u64) -> u64 {
    let rss = rss_mib(gw.pid());
    assert!(
        rss < bound_mib,
        "the gateway's VmRSS is {rss} MiB, over the bound of {bound_mib} MiB"
    );
    rss
}

/// Children of `pid` that exited and were never reaped.
fn zombie_children(pid: i32) -> Vec<i32> {
    mcpgw_fixtures::processes::process_table()
        .into_iter()
        .filter(|entry| entry.state == 'Z' && i32::try_from(entry.parent) == Ok(pid))
        .filter_map(|entry| i32::try_from(entry.pid).ok())
        .collect()
}

/// Stops every server over REST, then expects no process left under the gateway and no
/// zombie among its children.
#[track_caller]
fn assert_no_leaks(gw: &RunningGateway, ids: &[&str]) {
    for id in ids {
        let stopped = gw.post_empty(&format!("/api/mcp_servers/{id}/stop"));
        assert_eq!(stopped.status, 200, "stop {id}: {stopped:?}");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = descendants(gw.pid());
        let zombies = zombie_children(gw.pid());
        if left.is_empty() && zombies.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "after stopping every server the gateway still has descendants {left:?} and \
             zombie children {zombies:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The state changes, starts, crashes and failures of some servers, read from the WebSocket
/// stream in the background from the moment it is opened.
struct Events {
    seen: Arc<Mutex<Vec<Value>>>,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
}

impl Events {
    fn record(gw: &RunningGateway, server_ids: &str) -> Self {
        let address = gw.base_url.trim_start_matches("http://").to_owned();
        let stream = TcpStream::connect(&address).unwrap();
        let url = format!("ws://{address}/api/ws/events?mcp_server_ids={server_ids}");
        let (mut client, response): (WebSocket<TcpStream>, _) =
            tungstenite::client(url.as_str(), stream)
                .unwrap_or_else(|error| panic!("the handshake of {url} fails: {error}"));
        assert_eq!(response.status().as_u16(), 101);
        client
            .get_mut()
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let seen = seen.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    match client.read() {
                        Ok(Message::Text(text)) => {
                            let event: Value = serde_json::from_str(text.as_str()).unwrap();
                            seen.lock().unwrap().push(event);
                        }
                        Ok(_) => {}
                        Err(tungstenite::Error::Io(error))
                            if matches!(
                                error.kind(),
                                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                            ) => {}
                        Err(_) => break,
                    }
                }
            })
        };
        Self {
            seen,
            stop,
            reader: Some(reader),
        }
    }

    fn all(&self) -> Vec<Value> {
        self.seen.lock().unwrap().clone()
    }

    /// Waits until `check` accepts the events seen so far; answers them.
    #[track_caller]
    fn wait_for(&self, within: Duration, check: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + within;
        loop {
            let events = self.all();
            if check(&events) {
                return events;
            }
            assert!(
                Instant::now() < deadline,
                "the events never matched within {within:?}: {:#?}",
                steps(&events)
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// A short description of an event: its type, or `id:from->to` for state changes.
fn step(event: &Value) -> String {
    match event["event_type"].as_str().unwrap_or_default() {
        "McpServerStateChanged" => format!(
            "{}:{}->{}",
            event["mcp_server_id"].as_str().unwrap_or_default(),
            event["from"].as_str().unwrap_or_default(),
            event["to"].as_str().unwrap_or_default()
        ),
        other => format!(
            "{}:{other}",
            event["mcp_server_id"].as_str().unwrap_or_default()
        ),
    }
}

fn steps(events: &[Value]) -> Vec<String> {
    events.iter().map(step).collect()
}

fn count_steps(events: &[Value], wanted: &str) -> usize {
    events.iter().filter(|event| step(event) == wanted).count()
}

fn health(gw: &RunningGateway, id: &str) -> Value {
    let answer = gw.get(&format!("/api/mcp_servers/{id}/health"));
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.json()
}

fn log_lines(gw: &RunningGateway, id: &str, lines: usize) -> Vec<String> {
    let logs = gw
        .get(&format!("/api/mcp_servers/{id}/logs?lines={lines}"))
        .json();
    logs["logs"]
        .as_array()
        .unwrap_or_else(|| panic!("{logs}"))
        .iter()
        .map(|entry| entry["line"].as_str().unwrap().to_owned())
        .collect()
}

fn history(gw: &RunningGateway, id: &str) -> Vec<Value> {
    let answer = gw.get(&format!("/api/mcp_servers/{id}/tools/history?limit=100"));
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.json()["history"].as_array().unwrap().clone()
}

/// Runs `call` on a thread, timing it; `join` answers the result and how long it took.
fn timed_call(gw: &RunningGateway, tool: &str, arguments: Value) -> JoinHandle<(Value, Duration)> {
    let base_url = gw.base_url.clone();
    let tool = tool.to_owned();
    std::thread::spawn(move || {
        let started = Instant::now();
        let answer = mcp_call_at(&base_url, &tool, &arguments);
        (answer, started.elapsed())
    })
}

/// A stateless `tools/call` on `/mcp` of the gateway at `base_url` (the threads of
/// [`timed_call`] cannot borrow the gateway).
fn mcp_call_at(base_url: &str, tool: &str, arguments: &Value) -> Value {
    const PROTOCOL: &str = "2026-07-28";
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": tool, "arguments": arguments,
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "mcpgw-faults", "version": "0"},
    }}});
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .new_agent();
    let mut response = agent
        .post(&format!("{base_url}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", PROTOCOL)
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .send_json(&body)
        .expect("the gateway answers");
    let text = response.body_mut().read_to_string().unwrap();
    support::jsonrpc_answer(&text)
}

fn error_message(answer: &Value) -> String {
    answer["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("not an error: {answer}"))
        .to_owned()
}

// ----- 1. crashes at start --------------------------------------------------------------------

/// Injects: a server that exits with code 3 before reading anything, at every start, while a
/// client keeps calling it for five seconds.
#[test]
fn a_server_that_crashes_at_every_start_backs_off_instead_of_looping() {
    let gw = start_beside_healthy(
        CALL_TIMEOUT_S,
        "quitter",
        &fixture_command(&["--exit-at-start", "3"]),
        FIXTURE_TOOLS,
        &["max_consecutive_failures: 3"],
    );
    let events = Events::record(&gw, "quitter");

    let hammering = Instant::now();
    let mut calls = 0;
    while hammering.elapsed() < Duration::from_secs(5) {
        let started = Instant::now();
        let answer = gw.mcp_call_tool("quitter__echo", json!({"text": "hello?"}));
        assert!(
            started.elapsed() < PROMPT,
            "a call to a crashing server must fail fast"
        );
        let message = error_message(&answer);
        assert!(
            message.contains("quitter"),
            "the error names the server: {message}"
        );
        calls += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_healthy_serves(&gw);

    // A busy loop would have started it once per call; the backoff (1 s, 2 s, then degraded
    // with 4 s) allows three starts in five seconds.
    let starts = health(&gw, "quitter")["total_starts"].as_u64().unwrap();
    assert!(
        (3..=4).contains(&starts),
        "{starts} starts for {calls} calls in 5 s"
    );
    let seen = events.wait_for(Duration::from_secs(2), |events| {
        count_steps(events, "quitter:dead->degraded") == 1
    });
    let starts_seen: Vec<&Value> = seen
        .iter()
        .filter(|event| step(event).ends_with("->initializing"))
        .collect();
    assert_eq!(starts_seen.len() as u64, starts, "{:#?}", steps(&seen));
    assert_eq!(
        count_steps(&seen, "quitter:initializing->dead"),
        starts_seen.len(),
        "every start ended dead: {:#?}",
        steps(&seen)
    );
    assert_eq!(
        count_steps(&seen, "quitter:McpServerStartFailed"),
        starts_seen.len()
    );
    // The gaps between starts grow: at least the backoff of 1 s, then 2 s.
    let times: Vec<f64> = starts_seen
        .iter()
        .map(|event| occurred_at_seconds(event))
        .collect();
    assert!(times[1] - times[0] >= 0.9, "{times:?}");
    assert!(times[2] - times[1] >= 1.9, "{times:?}");

    let state = health(&gw, "quitter");
    assert_eq!(state["state"], "degraded", "{state}");
    assert!(
        state["consecutive_failures"].as_u64().unwrap() >= 3,
        "{state}"
    );
    let backoff = state["restart_backoff_remaining_ms"].as_u64().unwrap();
    assert!(backoff > 0 && backoff <= 60_000, "{state}");
    assert!(
        state["last_error"]
            .as_str()
            .is_some_and(|error| !error.is_empty()),
        "{state}"
    );
    let exits = log_lines(&gw, "quitter", 100)
        .iter()
        .filter(|line| *line == "fixture exiting at start")
        .count();
    assert_eq!(exits as u64, starts, "the stderr of every start is kept");

    assert_memory_bounded(&gw, RSS_BOUND_MIB);
    assert_no_leaks(&gw, &["healthy", "quitter"]);
}

/// Seconds of an event's `occurred_at` (`2026-11-21T14:03:07.123456`) within its day.
fn occurred_at_seconds(event: &Value) -> f64 {
    let at = event["occurred_at"].as_str().unwrap();
    let time = at.split_once('T').unwrap().1;
    let mut parts = time.split(':');
    let hours: f64 = parts.next().unwrap().parse().unwrap();
    let minutes: f64 = parts.next().unwrap().parse().unwrap();
    let seconds: f64 = parts.next().unwrap().parse().unwrap();
    hours * 3600.0 + minutes * 60.0 + seconds
}

// ----- 2. crashes mid-call --------------------------------------------------------------------

/// Injects: the fixture's `crash` tool (exit 9 without answering) while three long `sleep`
/// calls to the same server are in flight.
#[test]
fn a_crash_fails_every_call_in_flight_at_once() {
    let gw = start_beside_healthy(30, "crashy", &fixture_command(&[]), FIXTURE_TOOLS, &[]);
    assert_eq!(
        gw.post_empty("/api/mcp_servers/crashy/start").json()["state"],
        "ready"
    );
    let events = Events::record(&gw, "crashy");
    let sleepers: Vec<_> = (0..3)
        .map(|_| timed_call(&gw, "crashy__sleep", json!({"ms": 20_000})))
        .collect();
    gw.wait_for(
        "/api/mcp_servers/crashy/health",
        Duration::from_secs(5),
        |h| h["in_flight_calls"] == 3,
    );
    let crashed_at = Instant::now();
    let crash = gw.mcp_call_tool("crashy__crash", json!({"code": 9}));
    assert!(crash["error"].is_object(), "{crash}");
    for sleeper in sleepers {
        let (answer, _) = sleeper.join().unwrap();
        let waited = crashed_at.elapsed();
        assert!(
            waited < Duration::from_secs(5),
            "an in-flight call hung {waited:?} after the crash"
        );
        assert_eq!(answer["error"]["code"], -32603, "{answer}");
        assert!(error_message(&answer).contains("crashy"), "{answer}");
    }
    assert_healthy_serves(&gw);

    let seen = events.wait_for(Duration::from_secs(5), |events| {
        count_steps(events, "crashy:ready->dead") == 1
            && count_steps(events, "crashy:McpServerCrashed") == 1
            && count_steps(events, "crashy:ToolInvocationFailed") == 4
    });
    for failed in seen
        .iter()
        .filter(|event| event["event_type"] == "ToolInvocationFailed")
    {
        assert_eq!(failed["error_kind"], "transport", "{failed}");
    }
    let state = health(&gw, "crashy");
    assert_eq!(state["state"], "dead", "{state}");
    assert_eq!(state["in_flight_calls"], 0, "{state}");
    let failed_sleeps: Vec<Value> = history(&gw, "crashy")
        .into_iter()
        .filter(|entry| entry["tool"] == "sleep")
        .collect();
    assert_eq!(failed_sleeps.len(), 3, "{failed_sleeps:?}");
    for entry in &failed_sleeps {
        assert_eq!(entry["success"], false, "{entry}");
        assert_eq!(entry["error_kind"], "transport", "{entry}");
    }
    // Once its backoff (1 s) is over, the next use starts it again.
    gw.wait_for(
        "/api/mcp_servers/crashy/health",
        Duration::from_secs(5),
        |h| h["restart_backoff_remaining_ms"] == 0,
    );
    let again = gw.mcp_call_tool("crashy__echo", json!({"text": "back"}));
    assert_eq!(text_of(&again), "back", "{again}");

    assert_memory_bounded(&gw, RSS_BOUND_MIB);
    assert_no_leaks(&gw, &["healthy", "crashy"]);
}

// ----- 3. hangs in a call ---------------------------------------------------------------------

/// Injects: five concurrent `sleep` calls of ten minutes against a call timeout of 2 s.
#[test]
fn hung_calls_are_cut_off_by_the_timeout_and_the_others_keep_serving() {
    let gw = start_beside_healthy(
        CALL_TIMEOUT_S,
        "hung",
        &fixture_command(&[]),
        FIXTURE_TOOLS,
        &["max_consecutive_failures: 10"],
    );
    let events = Events::record(&gw, "hung");
    let hung: Vec<_> = (0..5)
        .map(|_| timed_call(&gw, "hung__sleep", json!({"ms": 600_000})))
        .collect();
    // While they hang, the healthy server answers as usual.
    let during = Instant::now();
    while during.elapsed() < Duration::from_millis(1500) {
        assert_healthy_serves(&gw);
    }
    for call in hung {
        let (answer, took) = call.join().unwrap();
        assert_eq!(answer["error"]["code"], -32001, "{answer}");
        assert!(
            error_message(&answer).contains("2 s"),
            "the message says the timeout: {answer}"
        );
        assert!(
            took >= Duration::from_secs(CALL_TIMEOUT_S) && took < Duration::from_secs(6),
            "cut off after {took:?}"
        );
    }
    // Every upstream request was cancelled, not left running.
    gw.wait_for(
        "/api/mcp_servers/hung/logs",
        Duration::from_secs(5),
        |logs| {
            logs["logs"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|line| line["line"] == "fixture sleep cancelled")
                .count()
                == 5
        },
    );
    let seen = events.wait_for(Duration::from_secs(5), |events| {
        count_steps(events, "hung:ToolInvocationFailed") == 5
    });
    assert!(
        seen.iter()
            .filter(|event| event["event_type"] == "ToolInvocationFailed")
            .all(|event| event["error_kind"] == "timeout"),
        "{seen:#?}"
    );
    let state = health(&gw, "hung");
    assert_eq!(state["state"], "ready", "{state}");
    assert_eq!(state["consecutive_failures"], 5, "timeouts count: {state}");
    // The session survived: the next call is answered and resets the count.
    let answer = gw.mcp_call_tool("hung__echo", json!({"text": "awake"}));
    assert_eq!(text_of(&answer), "awake", "{answer}");
    assert_eq!(health(&gw, "hung")["consecutive_failures"], 0);
    let timeouts = history(&gw, "hung")
        .into_iter()
        .filter(|entry| entry["tool"] == "sleep" && entry["error_kind"] == "timeout")
        .count();
    assert_eq!(timeouts, 5);
    assert_healthy_serves(&gw);

    assert_memory_bounded(&gw, RSS_BOUND_MIB);
    assert_no_leaks(&gw, &["healthy", "hung"]);
}

// ----- 4 and 5. garbage and a huge line on stdout ---------------------------------------------

/// A small MCP server over stdio that does the handshake properly and then, on request, writes
/// garbage or a 50 MiB line to stdout. Written without `$` so that the configuration's
/// variable expansion leaves it alone.
const ROGUE_SERVER: &str = r#"
import json, sys
out = sys.stdout.buffer
def raw(data):
    out.write(data + b"\n")
    out.flush()
def send(message):
    raw(json.dumps(message).encode())
def answer(rid, text):
    send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}})
def note(text):
    sys.stderr.write(text + "\n")
    sys.stderr.flush()
TOOLS = [{"name": n, "inputSchema": {"type": "object"}}
         for n in ("echo", "garbage", "garbage_only", "huge_line", "huge_answer")]
MIB = 1024 * 1024
note("rogue ready")
for line in sys.stdin.buffer:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    rid = message.get("id")
    method = message.get("method")
    if rid is None or method is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "rogue", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
    elif method == "tools/call":
        name = message["params"]["name"]
        arguments = message["params"].get("arguments") or {}
        if name == "echo":
            answer(rid, arguments.get("text", ""))
        elif name in ("garbage", "garbage_only"):
            note("rogue writing garbage")
            raw(b"this is not json")
            raw(b'{"hello": "world"}')
            raw(b"[1, 2, 3]")
            raw(b'{"jsonrpc": "2.0", "id": 987654321, "result": {}}')
            raw(b'{"jsonrpc": "2.0", "id": "nobody-asked", "error": {"code": -32000, "message": "stray"}}')
            raw(b'{"jsonrpc": "2.0", "method": 5}')
            raw(b"\xff\xfe\x00 binary")
            if name == "garbage":
                answer(rid, "answered after garbage")
        elif name == "huge_line":
            note("rogue writing a 50 MiB line")
            raw(b"x" * (50 * MIB))
            answer(rid, "answered after a huge line")
        elif name == "huge_answer":
            note("rogue writing a 50 MiB answer")
            raw(b'{"jsonrpc": "2.0", "id": ' + json.dumps(rid).encode()
                + b', "result": {"content": [{"type": "text", "text": "' + b"y" * (50 * MIB)
                + b'"}]}}')
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no such method"}})
"#;

fn rogue_command() -> Vec<String> {
    vec![
        "python3".into(),
        "-u".into(),
        "-c".into(),
        ROGUE_SERVER.into(),
    ]
}

const ROGUE_TOOLS: &[&str] = &[
    "echo",
    "garbage",
    "garbage_only",
    "huge_line",
    "huge_answer",
];

/// Injects: lines on stdout that are not JSON, JSON that is not JSON-RPC, responses to ids
/// nobody asked for, a notification with a bad method, and bytes that are not UTF-8; once
/// followed by the real answer, once never answered.
#[test]
fn garbage_on_stdout_is_ignored_and_the_session_survives() {
    let gw = start_beside_healthy(
        CALL_TIMEOUT_S,
        "rogue",
        &rogue_command(),
        ROGUE_TOOLS,
        &["max_consecutive_failures: 5"],
    );
    let events = Events::record(&gw, "rogue");
    let answer = gw.mcp_call_tool("rogue__garbage", json!({}));
    assert_eq!(text_of(&answer), "answered after garbage", "{answer}");
    assert_healthy_serves(&gw);
    // Garbage without an answer is a call that never ends: the timeout cuts it off.
    let started = Instant::now();
    let unanswered = gw.mcp_call_tool("rogue__garbage_only", json!({}));
    assert_eq!(unanswered["error"]["code"], -32001, "{unanswered}");
    assert!(started.elapsed() < Duration::from_secs(CALL_TIMEOUT_S + 3));
    // The session still works after all of it.
    let echoed = gw.mcp_call_tool("rogue__echo", json!({"text": "still talking"}));
    assert_eq!(text_of(&echoed), "still talking", "{echoed}");
    assert_healthy_serves(&gw);

    let state = health(&gw, "rogue");
    assert_eq!(state["state"], "ready", "{state}");
    let seen = events.wait_for(Duration::from_secs(5), |events| {
        count_steps(events, "rogue:ToolInvocationCompleted") == 2
            && count_steps(events, "rogue:ToolInvocationFailed") == 1
    });
    assert!(
        !steps(&seen).iter().any(|step| step.contains("->dead")),
        "{seen:#?}"
    );
    let failed = seen
        .iter()
        .find(|event| event["event_type"] == "ToolInvocationFailed")
        .unwrap();
    assert_eq!(failed["tool"], "garbage_only");
    assert_eq!(failed["error_kind"], "timeout");
    let logs = log_lines(&gw, "rogue", 100);
    assert_eq!(
        logs.iter()
            .filter(|line| *line == "rogue writing garbage")
            .count(),
        2,
        "{logs:?}"
    );
    assert!(gw.child.id() > 0 && support::process_alive(gw.pid()));

    assert_memory_bounded(&gw, RSS_BOUND_MIB);
    assert_no_leaks(&gw, &["healthy", "rogue"]);
}

/// Injects: one line of 50 MiB on stdout, first as junk followed by the real answer, then as a
/// (valid, but far too large) answer to the call.
#[test]
fn a_fifty_mib_line_on_stdout_is_dropped_in_bounded_memory() {
    let gw = start_beside_healthy(
        CALL_TIMEOUT_S + 3,
        "rogue",
        &rogue_command(),
        ROGUE_TOOLS,
        &["max_consecutive_failures: 5"],
    );
    assert_eq!(
        gw.mcp_call_tool("rogue__echo", json!({"text": "warm"}))["result"]["content"][0]["text"],
        "warm"
    );
    let baseline = rss_mib(gw.pid());
    let events = Events::record(&gw, "rogue");

    let junk = timed_call(&gw, "rogue__huge_line", json!({}));
    while !junk.is_finished() {
        assert_healthy_serves(&gw);
    }
    let (answer, _) = junk.join().unwrap();
    assert_eq!(text_of(&answer), "answered after a huge line", "{answer}");
    let after_junk = assert_memory_bounded(&gw, RSS_BOUND_MIB);

    let oversized = timed_call(&gw, "rogue__huge_answer", json!({}));
    while !oversized.is_finished() {
        assert_healthy_serves(&gw);
    }
    let (answer, took) = oversized.join().unwrap();
    assert_eq!(
        answer["error"]["code"], -32001,
        "the answer was dropped: {answer}"
    );
    assert!(took < Duration::from_secs(CALL_TIMEOUT_S + 6), "{took:?}");
    let after_answer = assert_memory_bounded(&gw, RSS_BOUND_MIB);
    // The transport keeps at most one 16 MiB line; buffering the 50 MiB line would add more
    // than 50 MiB, parsing it more than 100.
    let growth = after_junk.max(after_answer).saturating_sub(baseline);
    assert!(
        growth < 48,
        "VmRSS grew by {growth} MiB ({baseline} -> {after_junk} -> {after_answer})"
    );
    eprintln!(
        "VmRSS: {baseline} MiB before, {after_junk} after the junk line, {after_answer} after the huge answer"
    );

    // The session survives a dropped line and the server stays usable.
    let echoed = gw.mcp_call_tool("rogue__echo", json!({"text": "after"}));
    assert_eq!(text_of(&echoed), "after", "{echoed}");
    let seen = events.wait_for(Duration::from_secs(5), |events| {
        count_steps(events, "rogue:ToolInvocationFailed") == 1
    });
    let failed = seen
        .iter()
        .find(|event| event["event_type"] == "ToolInvocationFailed")
        .unwrap();
    assert_eq!(failed["tool"], "huge_answer");
    assert_eq!(failed["error_kind"], "timeout");
    let logs = log_lines(&gw, "rogue", 100);
    assert!(
        logs.iter()
            .any(|line| line == "rogue writing a 50 MiB answer"),
        "{logs:?}"
    );
    assert_healthy_serves(&gw);

    assert_no_leaks(&gw, &["healthy", "rogue"]);
}

// ----- 6. floods stderr -----------------------------------------------------------------------

/// Injects: 20,000 lines on stderr at start, then 200,000 lines and one 32 MiB line from the
/// `stderr` tool, and bytes that are not UTF-8.
#[test]
fn a_stderr_flood_keeps_the_log_buffer_bounded() {
    let gw = start_beside_healthy(
        20,
        "chatty",
        &fixture_command(&["--stderr-at-start", "20000"]),
        FIXTURE_TOOLS,
        &[],
    );
    assert_eq!(
        gw.post_empty("/api/mcp_servers/chatty/start").json()["state"],
        "ready"
    );
    let flood = timed_call(&gw, "chatty__stderr", json!({"lines": 200_000}));
    while !flood.is_finished() {
        assert_healthy_serves(&gw);
    }
    let (answer, took) = flood.join().unwrap();
    assert_eq!(text_of(&answer), "wrote 200000 lines", "{answer}");
    eprintln!("200,000 stderr lines took {took:?}");
    let big = gw.mcp_call_tool("chatty__stderr", json!({"bytes": 32 * 1024 * 1024}));
    assert_eq!(text_of(&big), "wrote 1 lines", "{big}");
    let invalid = gw.mcp_call_tool("chatty__stderr", json!({"invalid_utf8": true}));
    assert_eq!(text_of(&invalid), "wrote 1 lines", "{invalid}");

    let logs = gw.get("/api/mcp_servers/chatty/logs?lines=5000").json();
    let entries = logs["logs"].as_array().unwrap();
    assert_eq!(entries.len(), 1000, "served at most the cap");
    assert_eq!(logs["count"], 1000);
    for entry in entries {
        assert!(entry["line"].as_str().unwrap().len() <= 8192);
    }
    let lines: Vec<&str> = entries
        .iter()
        .map(|entry| entry["line"].as_str().unwrap())
        .collect();
    // Oldest first, the most recent kept: the flood's tail, the cut 32 MiB line, the bad bytes.
    assert_eq!(lines[lines.len() - 3], "fixture line 199999");
    let cut = lines[lines.len() - 2];
    assert_eq!(cut.len(), 8192);
    assert!(cut.starts_with("xxxx") && cut.ends_with("..."));
    assert_eq!(
        lines[lines.len() - 1],
        "fixture invalid utf8 \u{fffd}\u{fffd} end"
    );

    let echoed = gw.mcp_call_tool("chatty__echo", json!({"text": "calm"}));
    assert_eq!(text_of(&echoed), "calm", "{echoed}");
    assert_eq!(health(&gw, "chatty")["state"], "ready");
    assert_healthy_serves(&gw);
    let rss = assert_memory_bounded(&gw, RSS_BOUND_MIB);
    eprintln!("VmRSS after the stderr flood: {rss} MiB");
    assert_no_leaks(&gw, &["healthy", "chatty"]);
}

// ----- 7. never answers initialize ------------------------------------------------------------

/// Injects: a server that reads its input and never answers `initialize`.
#[test]
fn a_server_that_never_answers_initialize_fails_its_start_and_calls_do_not_hang() {
    let gw = start_beside_healthy(
        CALL_TIMEOUT_S,
        "mute",
        &fixture_command(&["--no-handshake"]),
        FIXTURE_TOOLS,
        &[],
    );
    let events = Events::record(&gw, "mute");
    let started = Instant::now();
    let first = timed_call(&gw, "mute__echo", json!({"text": "anyone?"}));
    let second = timed_call(&gw, "mute__echo", json!({"text": "anyone at all?"}));
    for call in [first, second] {
        let (answer, took) = call.join().unwrap();
        assert!(answer["error"].is_object(), "{answer}");
        assert!(
            took < Duration::from_secs(CALL_TIMEOUT_S + 3),
            "a call to a server that never starts waited {took:?}"
        );
        assert!(error_message(&answer).contains("mute"), "{answer}");
    }
    assert_eq!(health(&gw, "mute")["state"], "initializing");
    assert_healthy_serves(&gw);

    // The start itself gives up after the handshake timeout (30 s) and says why.
    let state = gw.wait_for(
        "/api/mcp_servers/mute/health",
        Duration::from_secs(45),
        |h| h["state"] == "dead",
    );
    let gave_up = started.elapsed();
    assert!(gave_up < Duration::from_secs(40), "{gave_up:?}");
    let error = state["last_error"].as_str().unwrap();
    assert!(error.contains("did not become ready within"), "{state}");
    assert_eq!(state["total_starts"], 1, "one start, shared by both calls");
    let seen = events.wait_for(Duration::from_secs(2), |events| {
        count_steps(events, "mute:initializing->dead") == 1
            && count_steps(events, "mute:McpServerStartFailed") == 1
    });
    assert_eq!(
        steps(&seen)
            .iter()
            .filter(|step| step.contains("->"))
            .collect::<Vec<_>>(),
        ["mute:cold->initializing", "mute:initializing->dead"]
    );
    assert!(log_lines(&gw, "mute", 10).contains(&"fixture ignoring all input".to_owned()));
    assert_healthy_serves(&gw);
    assert_memory_bounded(&gw, RSS_BOUND_MIB);
    assert_no_leaks(&gw, &["healthy", "mute"]);
}

// ----- 8. exits and is restarted in a loop ----------------------------------------------------

/// Injects: a server that crashes on every second call, restarted again and again: by lazy
/// starts after its backoff, then by the gateway once it is degraded.
#[test]
fn a_flapping_server_degrades_backs_off_and_recovers() {
    let gw = start_beside_healthy(
        CALL_TIMEOUT_S,
        "flappy",
        &fixture_command(&[]),
        FIXTURE_TOOLS,
        &["max_consecutive_failures: 2"],
    );
    let events = Events::record(&gw, "flappy");

    // First life: a good call, then a crash. One failure: dead, backing off 1 s.
    let answer = gw.mcp_call_tool("flappy__echo", json!({"text": "one"}));
    assert_eq!(text_of(&answer), "one", "{answer}");
    assert!(gw.mcp_call_tool("flappy__crash", json!({}))["error"].is_object());
    gw.wait_for(
        "/api/mcp_servers/flappy/health",
        Duration::from_secs(5),
        |h| h["state"] == "dead",
    );
    // Within the backoff a lazy start is refused at once, with the wait, and nothing runs.
    let refused = gw.mcp_call_tool("flappy__echo", json!({"text": "too soon"}));
    let message = error_message(&refused);
    assert!(message.contains("before the next start"), "{message}");
    assert_eq!(health(&gw, "flappy")["total_starts"], 1);
    assert!(zombie_children(gw.pid()).is_empty());

    // Second life, after the backoff: the second crash reaches the limit of 2.
    std::thread::sleep(Duration::from_millis(1100));
    assert!(gw.mcp_call_tool("flappy__crash", json!({}))["error"].is_object());
    let degraded = gw.wait_for(
        "/api/mcp_servers/flappy/health",
        Duration::from_secs(5),
        |h| h["state"] == "degraded",
    );
    assert_eq!(degraded["consecutive_failures"], 2, "{degraded}");
    let backoff = degraded["restart_backoff_remaining_ms"].as_u64().unwrap();
    assert!(backoff > 0 && backoff <= 2000, "{degraded}");
    assert!(zombie_children(gw.pid()).is_empty());

    // The gateway restarts a degraded server itself once the backoff (2 s) is over; the start
    // does not reset the count, a successful call does.
    let restarted = gw.wait_for(
        "/api/mcp_servers/flappy/health",
        Duration::from_secs(6),
        |h| h["state"] == "ready",
    );
    assert_eq!(restarted["total_starts"], 3, "{restarted}");
    assert_eq!(restarted["consecutive_failures"], 2, "{restarted}");
    let answer = gw.mcp_call_tool("flappy__echo", json!({"text": "steady"}));
    assert_eq!(text_of(&answer), "steady", "{answer}");
    assert_eq!(health(&gw, "flappy")["consecutive_failures"], 0);

    let seen = events.all();
    let transitions: Vec<String> = steps(&seen)
        .into_iter()
        .filter(|step| step.contains("->"))
        .collect();
    assert_eq!(
        transitions,
        [
            "flappy:cold->initializing",
            "flappy:initializing->ready",
            "flappy:ready->dead",
            "flappy:dead->initializing",
            "flappy:initializing->ready",
            "flappy:ready->dead",
            "flappy:dead->degraded",
            "flappy:degraded->initializing",
            "flappy:initializing->ready",
        ]
    );
    assert_eq!(count_steps(&seen, "flappy:McpServerCrashed"), 2);
    assert!(
        zombie_children(gw.pid()).is_empty(),
        "crashed servers are reaped"
    );
    assert_healthy_serves(&gw);
    assert_memory_bounded(&gw, RSS_BOUND_MIB);
    assert_no_leaks(&gw, &["healthy", "flappy"]);
}

// ----- 9. remote upstreams that reset or stall ------------------------------------------------

/// What a fake remote MCP server does with a request.
#[derive(Clone, Copy, PartialEq)]
enum Remote {
    /// Resets every connection (SO_LINGER 0, then close) as soon as it is accepted.
    ResetsEverything,
    /// Accepts and never answers anything.
    SilentFromTheStart,
    /// Speaks MCP (stateless, JSON answers); its tools misbehave: `reset` resets the
    /// connection, `stall` never answers, `stall_body` sends the headers and part of the body.
    Flaky,
}

/// A fake remote MCP server on a free port; answers the endpoint URL.
fn spawn_remote(behaviour: Remote) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || serve_remote(behaviour, stream));
        }
    });
    format!("http://127.0.0.1:{port}/mcp")
}

/// Writes a whole HTTP answer and leaves the connection to be closed.
fn respond(stream: &mut TcpStream, status: &str, body: &str) {
    let content_type = if body.is_empty() {
        ""
    } else {
        "Content-Type: application/json\r\n"
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\n{content_type}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
}

fn reset(stream: TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a socket this function owns, with a correctly sized `linger`.
    #[allow(unsafe_code)]
    let result = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&stream),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            std::ptr::from_ref(&linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(result, 0);
    drop(stream);
}

fn serve_remote(behaviour: Remote, stream: TcpStream) {
    match behaviour {
        Remote::ResetsEverything => return reset(stream),
        Remote::SilentFromTheStart => {
            std::thread::sleep(Duration::from_secs(120));
            return;
        }
        Remote::Flaky => {}
    }
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if line == "\r\n" {
            break;
        }
        head.push(line);
    }
    let method = head[0]
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned();
    let length: usize = head
        .iter()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let mut stream = stream;
    if method != "POST" {
        return respond(
            &mut stream,
            if method == "DELETE" {
                "200 OK"
            } else {
                "405 Method Not Allowed"
            },
            "",
        );
    }
    let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let Some(id) = message.get("id").cloned() else {
        return respond(&mut stream, "202 Accepted", "");
    };
    let result = match message["method"].as_str().unwrap_or_default() {
        "initialize" => json!({
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "flaky-remote", "version": "1"}
        }),
        "tools/list" => {
            let tools = ["echo", "reset", "stall", "stall_body"]
                .map(|name| json!({"name": name, "inputSchema": {"type": "object"}}));
            json!({ "tools": tools })
        }
        "ping" => json!({}),
        "tools/call" => match message["params"]["name"].as_str().unwrap_or_default() {
            "echo" => json!({"content": [{"type": "text",
                "text": message["params"]["arguments"]["text"]}]}),
            "reset" => {
                return reset(stream);
            }
            "stall" => {
                std::thread::sleep(Duration::from_secs(120));
                return;
            }
            _ => {
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                      Content-Length: 100000\r\nConnection: close\r\n\r\n{\"jsonrpc\": \"2.0\", ",
                );
                let _ = stream.flush();
                std::thread::sleep(Duration::from_secs(120));
                return;
            }
        },
        _ => {
            let error = json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "no such method"}});
            return respond(&mut stream, "200 OK", &error.to_string());
        }
    };
    let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
    respond(&mut stream, "200 OK", &answer.to_string());
}

/// Injects: one remote upstream that resets every connection, one that accepts and never
/// answers, and one that serves MCP but resets, stalls, or stalls mid-body on some calls.
#[test]
fn remote_upstreams_that_reset_or_stall_fail_their_calls_in_time() {
    let remote = |id: &str, endpoint: &str, extra: &str| {
        format!(
            "  {id}:\n    mode: remote\n    endpoint: \"{endpoint}\"\n    tools: [{{name: echo, \
             inputSchema: {{type: object}}}}]\n{extra}"
        )
    };
    let servers = [
        remote("refusing", &spawn_remote(Remote::ResetsEverything), ""),
        remote("silent", &spawn_remote(Remote::SilentFromTheStart), ""),
        remote(
            "flaky",
            &spawn_remote(Remote::Flaky),
            "    max_consecutive_failures: 2\n",
        ),
    ]
    .concat();
    let gw = gateway().config(&config(CALL_TIMEOUT_S, &servers)).start();
    warm_up(&gw);
    let events = Events::record(&gw, "refusing,silent,flaky");

    // Resets at the handshake: the start fails at once with the reason.
    let started = Instant::now();
    let refused = gw.mcp_call_tool("refusing__echo", json!({"text": "hi"}));
    assert!(started.elapsed() < PROMPT, "{:?}", started.elapsed());
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    let state = health(&gw, "refusing");
    assert_eq!(state["state"], "dead", "{state}");
    eprintln!("a remote that resets: {}", state["last_error"]);
    assert!(!state["last_error"].as_str().unwrap().is_empty(), "{state}");

    // Never answers: the call gives up within its timeout.
    let silent = timed_call(&gw, "silent__echo", json!({"text": "hi"}));
    assert_healthy_serves(&gw);
    let (answer, took) = silent.join().unwrap();
    assert!(answer["error"].is_object(), "{answer}");
    assert!(took < Duration::from_secs(CALL_TIMEOUT_S + 3), "{took:?}");

    // Serves MCP, then misbehaves on some calls.
    assert_eq!(
        gw.post_empty("/api/mcp_servers/flaky/start").json()["state"],
        "ready"
    );
    let echoed = gw.mcp_call_tool("flaky__echo", json!({"text": "fine"}));
    assert_eq!(text_of(&echoed), "fine", "{echoed}");
    let started = Instant::now();
    let reset = gw.mcp_call_tool("flaky__reset", json!({}));
    assert!(started.elapsed() < PROMPT, "{:?}", started.elapsed());
    assert_eq!(reset["error"]["code"], -32603, "{reset}");
    eprintln!("a reset call answers: {}", error_message(&reset));
    // The reset ended the remote session: the server is dead until its backoff (1 s) is over
    // and the next call starts it again.
    let state = health(&gw, "flaky");
    assert_eq!(state["state"], "dead", "{state}");
    assert_eq!(state["consecutive_failures"], 1, "{state}");
    gw.wait_for(
        "/api/mcp_servers/flaky/health",
        Duration::from_secs(5),
        |h| h["restart_backoff_remaining_ms"] == 0,
    );
    let stall = timed_call(&gw, "flaky__stall", json!({}));
    let stall_body = timed_call(&gw, "flaky__stall_body", json!({}));
    for call in [stall, stall_body] {
        let (answer, took) = call.join().unwrap();
        eprintln!("a stalled call answers after {took:?}: {answer}");
        assert_eq!(answer["error"]["code"], -32001, "{answer}");
        assert!(took < Duration::from_secs(CALL_TIMEOUT_S + 3), "{took:?}");
    }
    let seen = events.wait_for(Duration::from_secs(5), |events| {
        count_steps(events, "flaky:ready->degraded") == 1
            && count_steps(events, "flaky:ToolInvocationFailed") == 3
    });
    let failures: Vec<&Value> = seen
        .iter()
        .filter(|event| {
            event["event_type"] == "ToolInvocationFailed" && event["mcp_server_id"] == "flaky"
        })
        .collect();
    let kinds: Vec<&str> = failures
        .iter()
        .map(|event| event["error_kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.len(), 3, "{kinds:?} {:#?}", steps(&seen));
    assert_eq!(kinds.iter().filter(|kind| **kind == "timeout").count(), 2);
    assert!(count_steps(&seen, "refusing:McpServerStartFailed") >= 1);
    assert_healthy_serves(&gw);
    assert_memory_bounded(&gw, RSS_BOUND_MIB);
    assert_no_leaks(&gw, &["healthy", "refusing", "silent", "flaky"]);
}
