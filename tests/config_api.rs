//! End-to-end tests of configuration management: the real binary started from a file, the
//! testkit's fixture MCP server as real subprocesses, the file rewritten on disk and the
//! `/api/config` routes (reload, export, backup, diff), `SIGHUP` and the file watcher.
//!
//! A hot reload must never disturb what it does not change: one test keeps an MCP session
//! calling an untouched server while the file adds, removes and changes others around it.

mod support;

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{
    Answer, RunningGateway, fixture_binary, fixture_server_yaml, gateway, gateway_binary,
    send_signal,
};
use tungstenite::{Message, WebSocket};

const SOON: Duration = Duration::from_secs(15);

/// The background tool probe is off so that only the tests start servers.
const NO_PROBE: &str = "probe_tools: false\n";

/// A recognisable secret: no response and no log line may ever contain this text.
const SECRET_MARK: &str = "s3cr3t-e2e";
const LITERAL_SECRET: &str = "s3cr3t-e2e-VALUE";
const VARIABLE_SECRET: &str = "s3cr3t-e2e-TOKEN";

fn config_with(servers: &[String]) -> String {
    format!("{NO_PROBE}mcp_servers:\n{}", servers.join(""))
}

/// A fixture server entry with a description line.
fn described(id: &str, extra_args: &[&str], description: &str) -> String {
    format!(
        "{}    description: {description}\n",
        fixture_server_yaml(id, extra_args)
    )
}

fn config_path(gw: &RunningGateway) -> &Path {
    gw.config_path
        .as_deref()
        .expect("the gateway was started from a file")
}

fn rewrite(gw: &RunningGateway, yaml: &str) {
    std::fs::write(config_path(gw), yaml).unwrap();
}

fn health(gw: &RunningGateway, id: &str) -> Value {
    let answer = gw.get(&format!("/api/mcp_servers/{id}/health"));
    assert_eq!(answer.status, 200, "health of {id}: {}", answer.text);
    answer.json()
}

#[track_caller]
fn start(gw: &RunningGateway, id: &str) {
    let started = gw.post_empty(&format!("/api/mcp_servers/{id}/start"));
    assert_eq!(started.status, 200, "start {id}: {}", started.text);
}

/// The sorted ids of one list of a reload answer: `added`, `removed`, `updated` or
/// `unchanged`, at the top level or under `servers`.
fn reload_list(answer: &Value, key: &str) -> Vec<String> {
    let list = if answer[key].is_array() {
        &answer[key]
    } else {
        &answer["servers"][key]
    };
    let mut ids: Vec<String> = list
        .as_array()
        .unwrap_or_else(|| panic!("no list `{key}` in the reload answer {answer}"))
        .iter()
        .map(|id| {
            id.as_str()
                .unwrap_or_else(|| panic!("`{key}` holds a non-string: {answer}"))
                .to_owned()
        })
        .collect();
    ids.sort();
    ids
}

fn strings(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|id| (*id).to_owned()).collect()
}

/// The server list as `(id, mode, description)`, sorted by id.
fn server_list(gw: &RunningGateway) -> Vec<(String, String, String)> {
    let mut servers: Vec<(String, String, String)> =
        gw.get("/api/mcp_servers").json()["mcp_servers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|server| {
                (
                    server["mcp_server_id"].as_str().unwrap().to_owned(),
                    server["mode"].as_str().unwrap_or_default().to_owned(),
                    server["description"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                )
            })
            .collect();
    servers.sort();
    servers
}

#[track_caller]
fn wait_until(within: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !condition() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `mcpgw config check --config path`.
fn config_check(path: &Path) -> std::process::Output {
    Command::new(gateway_binary())
        .args(["config", "check", "--config"])
        .arg(path)
        .current_dir(path.parent().unwrap())
        .env_remove("MCP_CONFIG")
        .stdin(Stdio::null())
        .output()
        .expect("the gateway binary runs")
}

/// Asserts an error envelope with `status`, whatever the error's name; answers the message.
#[track_caller]
fn assert_error_status(answer: &Answer, status: u16) -> String {
    assert_eq!(answer.status, status, "body: {}", answer.text);
    let body = answer.json();
    assert!(
        body["error"].as_str().is_some_and(|name| !name.is_empty()),
        "{body}"
    );
    assert_eq!(body["status_code"], status, "{body}");
    body["message"].as_str().expect("a message").to_owned()
}

/// One MCP session over Streamable HTTP in the 2025-06-18 era: `initialize`, then every
/// request carries the session id the gateway gave.
struct Session {
    agent: ureq::Agent,
    url: String,
    session_id: String,
    next_id: AtomicUsize,
}

const SESSION_PROTOCOL: &str = "2025-06-18";

impl Session {
    fn open(gw: &RunningGateway) -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .new_agent();
        let url = gw.url("/mcp");
        let mut response = agent
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .send_json(json!({
                "jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {
                    "protocolVersion": SESSION_PROTOCOL,
                    "capabilities": {},
                    "clientInfo": {"name": "mcpgw-e2e-config", "version": "0"},
                },
            }))
            .expect("the gateway answers initialize");
        assert_eq!(response.status().as_u16(), 200);
        let session_id = response
            .headers()
            .get("mcp-session-id")
            .and_then(|value| value.to_str().ok())
            .expect("initialize answers a session id")
            .to_owned();
        let text = response.body_mut().read_to_string().unwrap();
        let initialized = Self::message_of(&text);
        assert!(initialized["result"].is_object(), "{initialized}");
        let session = Self {
            agent,
            url,
            session_id,
            next_id: AtomicUsize::new(1),
        };
        let notified = session
            .agent
            .post(&session.url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &session.session_id)
            .header("mcp-protocol-version", SESSION_PROTOCOL)
            .send_json(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .expect("the gateway answers the notification");
        assert!(notified.status().is_success(), "{:?}", notified.status());
        session
    }

    /// The JSON-RPC response in a JSON body or in a server-sent event stream.
    fn message_of(text: &str) -> Value {
        if let Ok(value) = serde_json::from_str::<Value>(text) {
            return value;
        }
        text.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
            .find(|message| message.get("id").is_some())
            .unwrap_or_else(|| panic!("no JSON-RPC response in {text:?}"))
    }

    /// Calls `echo` of `tool` with `text`; answers why the call failed, if it did.
    fn echo(&self, tool: &str, text: &str) -> Result<(), String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut response = self
            .agent
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.session_id)
            .header("mcp-protocol-version", SESSION_PROTOCOL)
            .send_json(json!({
                "jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": tool, "arguments": {"text": text}},
            }))
            .map_err(|error| format!("transport: {error}"))?;
        let status = response.status().as_u16();
        let body = response.body_mut().read_to_string().unwrap_or_default();
        if status != 200 {
            return Err(format!("HTTP {status}: {body}"));
        }
        let message = Self::message_of(&body);
        let result = &message["result"];
        if result["isError"] == true || !result.is_object() {
            return Err(format!("{message}"));
        }
        if result["content"][0]["text"] != text {
            return Err(format!("wrong answer: {message}"));
        }
        Ok(())
    }
}

/// Raises its flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

type Client = WebSocket<TcpStream>;

/// Opens the event stream with `query` (without the `?`).
fn connect_events(gw: &RunningGateway, query: &str) -> Client {
    let address = gw.base_url.trim_start_matches("http://");
    let stream = TcpStream::connect(address).unwrap();
    let url = format!("ws://{address}/api/ws/events?{query}");
    let (client, response) = tungstenite::client(url.as_str(), stream)
        .unwrap_or_else(|error| panic!("the handshake of {url} fails: {error}"));
    assert_eq!(response.status().as_u16(), 101);
    client
}

/// The next event frame, skipping control frames; fails after `within`.
fn next_event(client: &mut Client, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "no event within {within:?}");
        client.get_mut().set_read_timeout(Some(left)).unwrap();
        match client.read().expect("the event stream stays open") {
            Message::Text(text) => {
                return serde_json::from_str(text.as_str())
                    .unwrap_or_else(|error| panic!("not JSON ({error}): {text}"));
            }
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
            other => panic!("unexpected frame {other:?}"),
        }
    }
}

#[test]
fn a_reload_adds_removes_and_changes_servers_while_an_untouched_one_serves_every_call() {
    let before = config_with(&[
        described("steady", &[], "left alone"),
        described("labelled", &[], "old words"),
        described("shifting", &[], "gets new arguments"),
        described("doomed", &[], "goes away"),
    ]);
    let gw = gateway().config(&before).start();
    for id in ["steady", "labelled", "shifting", "doomed"] {
        start(&gw, id);
    }
    let steady_before = health(&gw, "steady");
    let labelled_before = health(&gw, "labelled");
    let shifting_before = health(&gw, "shifting");
    assert_eq!(steady_before["total_starts"], 1);
    assert_eq!(shifting_before["total_starts"], 1);
    wait_until(SOON, "doomed__echo is listed", || {
        gw.mcp_tool_names().contains(&"doomed__echo".to_owned())
    });

    let session = Session::open(&gw);
    let stop = AtomicBool::new(false);
    let calls = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::<String>::new());
    let reloaded = std::thread::scope(|scope| {
        // Stops the client also when an assertion below fails, so that the scope can end.
        let _stop_client = StopOnDrop(&stop);
        scope.spawn(|| {
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                if let Err(why) = session.echo("steady__echo", &format!("call {n}")) {
                    failures.lock().unwrap().push(format!("call {n}: {why}"));
                }
                calls.fetch_add(1, Ordering::Relaxed);
            }
        });
        wait_until(SOON, "the client made its first calls", || {
            calls.load(Ordering::Relaxed) >= 5
        });

        rewrite(
            &gw,
            &config_with(&[
                described("steady", &[], "left alone"),
                described("labelled", &[], "new words"),
                described(
                    "shifting",
                    &["--stderr-at-start", "2"],
                    "gets new arguments",
                ),
                described("fresh", &[], "just added"),
            ]),
        );
        let reloaded = gw.post_empty("/api/config/reload");
        // The client keeps calling through the restart of `shifting` and beyond.
        let after_reload = calls.load(Ordering::Relaxed);
        let shifting_restarted = Instant::now() + SOON;
        while Instant::now() < shifting_restarted {
            let shifting = health(&gw, "shifting");
            if shifting["total_starts"] == 2 && shifting["state"] == "ready" {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        wait_until(SOON, "the client made more calls after the reload", || {
            calls.load(Ordering::Relaxed) >= after_reload + 20
        });
        stop.store(true, Ordering::Relaxed);
        reloaded
    });

    assert_eq!(reloaded.status, 200, "{}", reloaded.text);
    let answer = reloaded.json();
    assert_eq!(
        reload_list(&answer, "added"),
        strings(&["fresh"]),
        "{answer}"
    );
    assert_eq!(
        reload_list(&answer, "removed"),
        strings(&["doomed"]),
        "{answer}"
    );
    assert_eq!(
        reload_list(&answer, "updated"),
        strings(&["labelled", "shifting"]),
        "{answer}"
    );
    assert_eq!(
        reload_list(&answer, "unchanged"),
        strings(&["steady"]),
        "{answer}"
    );

    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} calls to the untouched server failed: {failures:#?}",
        failures.len(),
        calls.load(Ordering::Relaxed)
    );

    // The untouched server and the description-only change kept their processes.
    let steady_after = health(&gw, "steady");
    assert_eq!(steady_after["state"], "ready", "{steady_after}");
    assert_eq!(steady_after["total_starts"], steady_before["total_starts"]);
    assert_eq!(steady_after["started_at"], steady_before["started_at"]);
    let labelled_after = health(&gw, "labelled");
    assert_eq!(labelled_after["state"], "ready", "{labelled_after}");
    assert_eq!(
        labelled_after["total_starts"],
        labelled_before["total_starts"]
    );
    assert_eq!(labelled_after["started_at"], labelled_before["started_at"]);
    assert_eq!(
        gw.get("/api/mcp_servers/labelled").json()["description"],
        "new words"
    );

    // The launch change restarted `shifting` with its new arguments (`--stderr-at-start 2`
    // writes lines 0 and 1; the first launch wrote none).
    let shifting_after = health(&gw, "shifting");
    assert_eq!(shifting_after["total_starts"], 2, "{shifting_after}");
    assert_eq!(shifting_after["state"], "ready", "{shifting_after}");
    assert_ne!(shifting_after["started_at"], shifting_before["started_at"]);
    gw.wait_for("/api/mcp_servers/shifting/logs?lines=1000", SOON, |logs| {
        logs["logs"]
            .as_array()
            .is_some_and(|lines| lines.iter().any(|l| l["line"] == "fixture start line 1"))
    });

    // The removed server is gone with its tools; the added one answers.
    gw.get("/api/mcp_servers/doomed")
        .assert_error(404, "McpServerNotFoundError");
    let names = gw.mcp_tool_names();
    assert!(
        !names.iter().any(|name| name.starts_with("doomed__")),
        "{names:?}"
    );
    // Without the tool probe, a server's tools are known once it has run.
    start(&gw, "fresh");
    let fresh = gw.mcp_call_tool("fresh__echo", json!({"text": "hello fresh"}));
    assert_eq!(
        fresh["result"]["content"][0]["text"], "hello fresh",
        "{fresh}"
    );
    assert_eq!(
        session.echo("steady__echo", "still the same session"),
        Ok(())
    );
}

/// The `(line, key)` pairs an error message must name.
type Located<'a> = &'a [(usize, &'a str)];

#[test]
fn an_invalid_file_changes_nothing_and_answers_422_with_file_line_and_key() {
    let good = config_with(&[
        described("steady", &[], "left alone"),
        described("other", &[], "also here"),
    ]);
    let gw = gateway().config(&good).start();
    start(&gw, "steady");
    let listed = server_list(&gw);
    let running = gw.get("/api/config").json();
    let steady = health(&gw, "steady");
    let mut events = connect_events(&gw, "event_types=ConfigurationReloadFailed");

    // Line 6 of each file holds the mistake (a fixture entry is three lines).
    let syntax = format!(
        "{NO_PROBE}mcp_servers:\n{}    description: a: b\n",
        fixture_server_yaml("steady", &[])
    );
    let unknown_key = format!(
        "{NO_PROBE}mcp_servers:\n{}    idle_tll_s: 60\n",
        fixture_server_yaml("steady", &[])
    );
    // Two bad values, lines 6 and 10: the answer lists every error.
    let bad_values = format!(
        "{NO_PROBE}mcp_servers:\n{}    idle_ttl_s: 0\n{}    max_consecutive_failures: 1000\n",
        fixture_server_yaml("steady", &[]),
        fixture_server_yaml("fresh", &[]),
    );
    let file = config_path(&gw).display().to_string();
    let cases: [(&str, &str, Located<'_>); 3] = [
        ("a syntax error", &syntax, &[(6, "")]),
        ("an unknown key", &unknown_key, &[(6, "idle_tll_s")]),
        (
            "bad values",
            &bad_values,
            &[(6, "idle_ttl_s"), (10, "max_consecutive_failures")],
        ),
    ];
    for (what, yaml, problems) in cases {
        rewrite(&gw, yaml);
        let answer = gw.post_empty("/api/config/reload");
        let message = answer.assert_error(422, "ValidationError");
        for (line, key) in problems {
            let located = format!("{file}:{line}");
            assert!(
                message.contains(&located),
                "{what}: the message names {located}: {message}"
            );
            assert!(
                message.contains(key),
                "{what}: the message names `{key}`: {message}"
            );
        }
        if what == "an unknown key" {
            assert!(
                message.contains("idle_ttl_s"),
                "{what}: the message suggests the nearest key: {message}"
            );
        }
        let event = next_event(&mut events, SOON);
        assert_eq!(event["event_type"], "ConfigurationReloadFailed", "{event}");

        assert_eq!(server_list(&gw), listed, "{what} changed the servers");
        assert_eq!(
            gw.get("/api/config").json(),
            running,
            "{what} changed the running configuration"
        );
        let now = health(&gw, "steady");
        assert_eq!(now["state"], "ready", "{what}: {now}");
        assert_eq!(now["total_starts"], steady["total_starts"], "{what}");
        assert_eq!(now["started_at"], steady["started_at"], "{what}");
        let echoed = gw.mcp_call_tool("steady__echo", json!({"text": what}));
        assert_eq!(echoed["result"]["content"][0]["text"], what, "{echoed}");
    }
}

/// The fields of a server's details that a reproduction must keep.
const SERVER_FIELDS: [&str; 8] = [
    "mode",
    "description",
    "command",
    "env",
    "endpoint",
    "idle_ttl_s",
    "health_check_interval_s",
    "max_consecutive_failures",
];

fn server_details(gw: &RunningGateway) -> Vec<(String, Vec<Value>)> {
    let mut servers: Vec<(String, Vec<Value>)> = gw.get("/api/mcp_servers").json()["mcp_servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|server| {
            let id = server["mcp_server_id"].as_str().unwrap().to_owned();
            let details = gw.get(&format!("/api/mcp_servers/{id}")).json();
            let fields = SERVER_FIELDS
                .iter()
                .map(|field| details[*field].clone())
                .collect();
            (id, fields)
        })
        .collect();
    servers.sort_by(|a, b| a.0.cmp(&b.0));
    servers
}

fn group_details(gw: &RunningGateway) -> Vec<Value> {
    let mut groups: Vec<Value> = gw.get("/api/groups").json()["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|group| {
            let id = group["group_id"].as_str().unwrap();
            let details = gw.get(&format!("/api/groups/{id}")).json();
            let mut members: Vec<Value> = details["members"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| json!({"id": m["id"], "weight": m["weight"], "priority": m["priority"]}))
                .collect();
            members.sort_by_key(|m| m["id"].as_str().unwrap_or_default().to_owned());
            json!({
                "group_id": details["group_id"],
                "strategy": details["strategy"],
                "min_healthy": details["min_healthy"],
                "members": members,
            })
        })
        .collect();
    groups.sort_by_key(|g| g["group_id"].as_str().unwrap_or_default().to_owned());
    groups
}

#[test]
fn an_export_loads_into_a_second_gateway_with_the_same_servers_and_groups() {
    let yaml = format!(
        "{}  pool:\n    mode: group\n    strategy: round_robin\n    min_healthy: 1\n    members: [{{id: base}}]\n",
        config_with(&[described(
            "base",
            &["--tools-prefix", "b_"],
            "from the file"
        )]),
    );
    let gw = gateway().config(&yaml).start();
    let fixture = fixture_binary().display().to_string();
    let created = gw.post(
        "/api/mcp_servers",
        &json!({
            "mcp_server_id": "made",
            "mode": "subprocess",
            "command": [fixture, "--stderr-at-start", "1"],
            "description": "made over REST",
            "idle_ttl_s": 120,
            "max_consecutive_failures": 7,
        }),
    );
    assert_eq!(created.status, 201, "{}", created.text);
    let group = gw.post(
        "/api/groups",
        &json!({
            "group_id": "mixed",
            "strategy": "weighted_round_robin",
            "min_healthy": 2,
            "members": [{"id": "base", "weight": 3}, {"id": "made", "weight": 1}],
        }),
    );
    assert_eq!(group.status, 201, "{}", group.text);

    let exported = gw.post_empty("/api/config/export");
    assert_eq!(exported.status, 200, "{}", exported.text);
    let exported = exported.json()["yaml"]
        .as_str()
        .unwrap_or_else(|| panic!("no `yaml` in the export"))
        .to_owned();
    let elsewhere = tempfile::tempdir().unwrap();
    let path = elsewhere.path().join("exported.yaml");
    std::fs::write(&path, &exported).unwrap();
    let check = config_check(&path);
    assert!(
        check.status.success(),
        "config check refuses the export:\n{}\n{exported}",
        String::from_utf8_lossy(&check.stderr)
    );

    let second = gateway().config(&exported).start();
    let servers = server_details(&gw);
    assert_eq!(
        servers
            .iter()
            .map(|(id, _)| id.as_str())
            .collect::<Vec<_>>(),
        ["base", "made"]
    );
    assert_eq!(server_details(&second), servers, "{exported}");
    let groups = group_details(&gw);
    assert_eq!(groups.len(), 2, "{groups:?}");
    assert_eq!(group_details(&second), groups, "{exported}");
}

#[test]
fn backups_rotate_through_five_files_newest_first() {
    let version = |n: usize| config_with(&[described("demo", &[], &format!("version {n}"))]);
    let gw = gateway().config(&version(0)).start();
    let path = config_path(&gw).to_path_buf();
    let backup = |n: usize| PathBuf::from(format!("{}.bak{n}", path.display()));
    for n in 1..=6 {
        rewrite(&gw, &version(n));
        let reloaded = gw.post_empty("/api/config/reload");
        assert_eq!(reloaded.status, 200, "{}", reloaded.text);
        let answer = gw.post_empty("/api/config/backup");
        assert_eq!(answer.status, 200, "{}", answer.text);
        assert_eq!(
            answer.json()["path"],
            backup(1).display().to_string(),
            "backup {n}"
        );
    }
    // Six backups: the newest (version 6) in .bak1 down to version 2 in .bak5.
    for slot in 1..=5 {
        let text = std::fs::read_to_string(backup(slot))
            .unwrap_or_else(|error| panic!("{}: {error}", backup(slot).display()));
        let expected = format!("version {}", 7 - slot);
        assert!(
            text.contains(&expected),
            ".bak{slot} holds {expected}: {text}"
        );
        for other in (0..=6).filter(|n| *n != 7 - slot) {
            assert!(
                !text.contains(&format!("version {other}\n")),
                ".bak{slot} holds only {expected}: {text}"
            );
        }
    }
    assert!(!backup(6).exists(), "no sixth backup");
    assert!(!backup(0).exists());
}

/// The changed lines of a unified diff (`+`/`-`, without the `+++`/`---` headers).
fn changed_lines(diff: &str) -> Vec<&str> {
    diff.lines()
        .filter(|line| {
            (line.starts_with('+') && !line.starts_with("+++"))
                || (line.starts_with('-') && !line.starts_with("---"))
        })
        .collect()
}

#[test]
fn the_diff_shows_an_edit_and_nothing_for_an_unchanged_file() {
    let yaml = config_with(&[
        described("demo", &[], "before the edit"),
        described("other", &[], "stays"),
    ]);
    let gw = gateway().config(&yaml).start();

    let unchanged = gw.get("/api/config/diff");
    assert_eq!(unchanged.status, 200, "{}", unchanged.text);
    let unchanged = unchanged.json();
    assert_eq!(unchanged["diff"], "", "{unchanged}");
    for section in ["added", "removed", "updated"] {
        assert_eq!(
            unchanged["changed"]["servers"][section],
            json!([]),
            "{unchanged}"
        );
    }

    rewrite(&gw, &yaml.replace("before the edit", "after the edit"));
    let edited = gw.get("/api/config/diff");
    assert_eq!(edited.status, 200, "{}", edited.text);
    let edited = edited.json();
    let diff = edited["diff"].as_str().expect("a diff");
    let lines = changed_lines(diff);
    assert_eq!(lines.len(), 2, "one line out, one in: {diff}");
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with('-') && line.contains("before the edit")),
        "{diff}"
    );
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with('+') && line.contains("after the edit")),
        "{diff}"
    );
    let servers = &edited["changed"]["servers"];
    assert_eq!(servers["updated"], json!(["demo"]), "{edited}");
    assert_eq!(servers["added"], json!([]), "{edited}");
    assert_eq!(servers["removed"], json!([]), "{edited}");
    assert!(edited["changed"]["groups"].is_object(), "{edited}");
    assert!(edited["changed"]["restart_required"].is_array(), "{edited}");

    // The diff only reports: the running server still has the old description.
    assert_eq!(
        gw.get("/api/mcp_servers/demo").json()["description"],
        "before the edit"
    );
}

/// What the secrets test found wrong; reported all together so that one run shows every leak.
#[derive(Default)]
struct Findings(Vec<String>);

impl Findings {
    fn no_secret(&mut self, what: &str, text: &str) {
        if text.contains(SECRET_MARK) {
            self.0.push(format!("{what} shows a secret value:\n{text}"));
        }
    }

    fn expect(&mut self, holds: bool, what: &str) {
        if !holds {
            self.0.push(what.to_owned());
        }
    }
}

#[test]
fn no_secret_appears_in_any_configuration_answer_or_in_the_log() {
    let fixture = fixture_binary().display().to_string();
    let yaml = |description: &str| {
        format!(
            "{NO_PROBE}mcp_servers:\n  vault:\n    mode: subprocess\n    command: [\"{fixture}\"]\n    env: {{API_SECRET: {LITERAL_SECRET}}}\n    description: {description}\n  upstream:\n    mode: remote\n    endpoint: \"http://127.0.0.1:9/mcp\"\n    headers: {{Authorization: \"Bearer ${{MY_TOKEN}}\", X-Api-Key: {LITERAL_SECRET}}}\n"
        )
    };
    let gw = gateway()
        .config(&yaml("keeps a secret"))
        .env("MY_TOKEN", VARIABLE_SECRET)
        // The gateway's own debug logs, without rmcp's: at debug it logs every MCP message in
        // full, so the `env` tool's answer below (the secret, as data a tool returned) would be
        // in it whatever the gateway does with its configuration.
        .env("MCP_LOG", "debug,rmcp=info")
        .start();
    start(&gw, "vault");
    // The secret reached the server: the masking below hides a real value.
    let seen = gw.mcp_call_tool("vault__env", json!({"name": "API_SECRET"}));
    assert_eq!(
        seen["result"]["content"][0]["text"], LITERAL_SECRET,
        "{seen}"
    );
    let mut found = Findings::default();

    let running = gw.get("/api/config");
    assert_eq!(running.status, 200, "{}", running.text);
    found.no_secret("GET /api/config", &running.text);
    found.expect(
        running.text.contains("***"),
        &format!("GET /api/config masks secrets as ***: {}", running.text),
    );
    for id in ["vault", "upstream"] {
        let details = gw.get(&format!("/api/mcp_servers/{id}"));
        assert_eq!(details.status, 200, "{}", details.text);
        found.no_secret(&format!("GET /api/mcp_servers/{id}"), &details.text);
    }

    let exported = gw.post_empty("/api/config/export");
    assert_eq!(exported.status, 200, "{}", exported.text);
    found.no_secret("the export", &exported.text);
    let exported_yaml = exported.json()["yaml"].as_str().unwrap().to_owned();
    found.expect(
        exported_yaml.contains("${MY_TOKEN}"),
        &format!("the export keeps the reference ${{MY_TOKEN}} as text: {exported_yaml}"),
    );
    found.expect(
        exported_yaml.contains("***"),
        &format!("the export masks literal secrets as ***: {exported_yaml}"),
    );

    // The edit sits next to the secret lines, so the diff's context shows them.
    rewrite(&gw, &yaml("still keeps a secret"));
    let diff = gw.get("/api/config/diff");
    assert_eq!(diff.status, 200, "{}", diff.text);
    assert!(diff.text.contains("still keeps a secret"), "{}", diff.text);
    found.no_secret("the diff", &diff.text);

    let reloaded = gw.post_empty("/api/config/reload");
    assert_eq!(reloaded.status, 200, "{}", reloaded.text);
    found.no_secret("the reload answer", &reloaded.text);
    assert_eq!(
        reload_list(&reloaded.json(), "updated"),
        strings(&["vault"])
    );
    found.no_secret(
        "GET /api/config after the reload",
        &gw.get("/api/config").text,
    );

    // A failed reload's errors quote the file too.
    rewrite(
        &gw,
        &yaml("broken").replace("    description: broken\n", "    idle_ttl_s: 0\n"),
    );
    let failed = gw.post_empty("/api/config/reload");
    assert_eq!(failed.status, 422, "{}", failed.text);
    found.no_secret("the failed reload answer", &failed.text);

    found.no_secret("the gateway's log", &gw.stderr());
    assert!(found.0.is_empty(), "{}", found.0.join("\n\n"));
}

#[test]
fn sighup_reloads_the_file() {
    let gw = gateway()
        .config(&config_with(&[described(
            "first",
            &[],
            "here from the start",
        )]))
        .start();
    start(&gw, "first");
    let first = health(&gw, "first");
    let mut events = connect_events(&gw, "event_types=ConfigurationReloaded");

    rewrite(
        &gw,
        &config_with(&[
            described("first", &[], "here from the start"),
            described("second", &[], "added by SIGHUP"),
        ]),
    );
    send_signal(gw.pid(), libc::SIGHUP);
    gw.wait_for("/api/mcp_servers", Duration::from_secs(5), |body| {
        body["mcp_servers"]
            .as_array()
            .is_some_and(|servers| servers.iter().any(|s| s["mcp_server_id"] == "second"))
    });
    let event = next_event(&mut events, SOON);
    assert_eq!(event["event_type"], "ConfigurationReloaded", "{event}");
    start(&gw, "second");
    let second = gw.mcp_call_tool("second__echo", json!({"text": "after SIGHUP"}));
    assert_eq!(
        second["result"]["content"][0]["text"], "after SIGHUP",
        "{second}"
    );
    let now = health(&gw, "first");
    assert_eq!(now["total_starts"], first["total_starts"]);
    assert_eq!(now["started_at"], first["started_at"]);
}

#[test]
fn the_watcher_reloads_a_changed_file_without_a_request() {
    let watched =
        |servers: &[String]| format!("config_reload: {{watch: true}}\n{}", config_with(servers));
    let gw = gateway()
        .config(&watched(&[described("first", &[], "watched")]))
        .start();
    assert_eq!(server_list(&gw).len(), 1);

    rewrite(
        &gw,
        &watched(&[
            described("first", &[], "watched"),
            described("second", &[], "seen by the watcher"),
        ]),
    );
    gw.wait_for("/api/mcp_servers", Duration::from_secs(5), |body| {
        body["mcp_servers"]
            .as_array()
            .is_some_and(|servers| servers.iter().any(|s| s["mcp_server_id"] == "second"))
    });
    assert_eq!(
        gw.get("/api/mcp_servers/second").json()["description"],
        "seen by the watcher"
    );
}

#[test]
fn without_a_config_file_reload_backup_and_diff_answer_409() {
    let gw = gateway().start();
    assert!(gw.config_path.is_none());
    let running = gw.get("/api/config");
    assert_eq!(running.status, 200, "{}", running.text);
    assert!(running.json().is_object(), "{}", running.text);
    for answer in [
        gw.post_empty("/api/config/reload"),
        gw.post_empty("/api/config/backup"),
        gw.get("/api/config/diff"),
    ] {
        let message = assert_error_status(&answer, 409);
        assert!(message.contains("config"), "says what to do: {message}");
    }
    // Export needs no file: it describes the running state.
    let exported = gw.post_empty("/api/config/export");
    assert_eq!(exported.status, 200, "{}", exported.text);
    assert!(exported.json()["yaml"].is_string(), "{}", exported.text);
}
