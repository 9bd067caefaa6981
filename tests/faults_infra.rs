//! Fault injection against the gateway's own infrastructure, end to end with the real binary:
//! the process killed with SIGKILL in the middle of writes, the data directory turned read-only
//! under a running gateway, the container engine going away, and a database file that is
//! garbage or truncated at start.
//!
//! The property every test defends: a write the gateway answered with a 2xx is on disk and
//! comes back after a restart, a write it could not store is answered with an error in the
//! API's error envelope (never a 2xx, never a crash), and the gateway keeps serving whatever does
//! not need the broken part.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::engine::{self, ContainerGuard, TEST_IMAGE, require_engine, unique, wait_until};
use support::{RunningGateway, cli_key, fixture_binary, fixture_server_yaml, gateway};

const SOON: Duration = Duration::from_secs(20);

/// One HTTP answer, or `None` when the gateway did not answer at all (it was killed).
struct Reply {
    status: u16,
    body: Value,
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .new_agent()
}

/// One request with an API key; `None` when the connection failed (the gateway is gone).
fn try_call(
    agent: &ureq::Agent,
    base_url: &str,
    method: &str,
    path: &str,
    key: &str,
    body: Option<&Value>,
) -> Option<Reply> {
    let mut request = ureq::http::Request::builder()
        .method(method)
        .uri(format!("{base_url}{path}"))
        .header("x-api-key", key)
        .header("content-type", "application/json");
    if path == "/mcp" {
        request = request
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", MCP_PROTOCOL)
            .header("mcp-method", "tools/call");
        if let Some(name) = body.and_then(|body| body["params"]["name"].as_str()) {
            request = request.header("mcp-name", name);
        }
    }
    let request = request
        .body(body.map(Value::to_string).unwrap_or_default())
        .unwrap();
    let mut response = agent.run(request).ok()?;
    let status = response.status().as_u16();
    let event_stream = response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"));
    let text = response.body_mut().read_to_string().ok()?;
    let body = if event_stream {
        text.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
            .find(|message| message.get("id").is_some())?
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    Some(Reply { status, body })
}

#[track_caller]
fn call(gw: &RunningGateway, method: &str, path: &str, key: &str, body: Option<&Value>) -> Reply {
    try_call(&agent(), &gw.base_url, method, path, key, body)
        .unwrap_or_else(|| panic!("{method} {path}: no answer; stderr:\n{}", gw.stderr()))
}

const MCP_PROTOCOL: &str = "2026-07-28";

/// A stateless `tools/call` request body for `/mcp`.
fn tool_call_body(tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool, "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MCP_PROTOCOL,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "mcpgw-faults", "version": "0"},
        },
    }})
}

/// Calls `tool` over `/mcp`; answers the text of a successful result, or fails.
#[track_caller]
fn call_tool_text(gw: &RunningGateway, key: &str, tool: &str, text: &str) -> String {
    let reply = call(
        gw,
        "POST",
        "/mcp",
        key,
        Some(&tool_call_body(tool, json!({"text": text}))),
    );
    let result = &reply.body["result"];
    assert!(
        reply.status == 200 && result.is_object() && result["isError"] != true,
        "{tool}: {} {}\nstderr:\n{}",
        reply.status,
        reply.body,
        gw.stderr()
    );
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{tool} answered no text: {}", reply.body))
        .to_owned()
}

/// Every event id of the tool history of `server`, following the cursor.
#[track_caller]
fn history_ids(gw: &RunningGateway, key: &str, server: &str) -> BTreeSet<u64> {
    let mut ids = BTreeSet::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(cursor) => {
                format!("/api/mcp_servers/{server}/tools/history?limit=500&cursor={cursor}")
            }
            None => format!("/api/mcp_servers/{server}/tools/history?limit=500"),
        };
        let reply = call(gw, "GET", &path, key, None);
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
        for entry in reply.body["history"].as_array().unwrap() {
            ids.insert(event_id(&entry["event_id"]));
        }
        match &reply.body["next_cursor"] {
            Value::Null => return ids,
            next => cursor = Some(next.as_str().map_or(next.to_string(), str::to_owned)),
        }
    }
}

/// An event id, whether the answer gives it as a number or a string.
fn event_id(value: &Value) -> u64 {
    value
        .as_u64()
        .or_else(|| value.as_str().and_then(|text| text.parse().ok()))
        .unwrap_or_else(|| panic!("not an event id: {value}"))
}

fn auth_config(extra_servers: &str) -> String {
    format!(
        "probe_tools: false\nauth:\n  enabled: true\nmcp_servers:\n{}{extra_servers}",
        fixture_server_yaml("demo", &[])
    )
}

/// Starts `demo` (its tools are known once it ran: the configuration turns the background
/// probe off, so that only the tests start servers).
#[track_caller]
fn start_demo(gw: &RunningGateway, admin: &str) {
    let reply = call(gw, "POST", "/api/mcp_servers/demo/start", admin, None);
    assert_eq!(reply.status, 200, "{}", reply.body);
}

/// Takes the data directory out of a stopped gateway, to start the next one on it.
fn take_data_dir(gw: &mut RunningGateway) -> tempfile::TempDir {
    std::mem::replace(&mut gw.data_dir, tempfile::tempdir().unwrap())
}

/// What the writer threads of one round had acknowledged (answered 2xx) before the kill.
#[derive(Default, Debug)]
struct Acknowledged {
    /// (key id, raw key)
    keys: Vec<(String, String)>,
    roles: Vec<String>,
    /// (principal, role)
    assignments: Vec<(String, String)>,
    /// provider policy targets
    policies: Vec<String>,
    servers: Vec<String>,
    /// tool history event ids of `demo` seen over GET before the kill
    history: BTreeSet<u64>,
}

/// Starts the writers of one round against `base_url`; they stop at the first request the
/// gateway does not answer, and record every write it answered with a 2xx.
fn start_writers(
    base_url: &str,
    admin: &str,
    round: usize,
    acknowledged: &Arc<Mutex<Acknowledged>>,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<()>> {
    let mut threads = Vec::new();
    for kind in 0..5 {
        let base_url = base_url.to_owned();
        let admin = admin.to_owned();
        let acknowledged = Arc::clone(acknowledged);
        let stop = Arc::clone(stop);
        let fixture = fixture_binary().display().to_string();
        threads.push(std::thread::spawn(move || {
            let agent = agent();
            let post = |path: &str, body: Value| {
                try_call(&agent, &base_url, "POST", path, &admin, Some(&body))
            };
            for i in 0.. {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let tag = format!("r{round}-{i}");
                let done = match kind {
                    0 => post(
                        "/api/auth/keys",
                        json!({"principal": format!("service:w{tag}"), "name": tag,
                               "role": "viewer"}),
                    )
                    .map(|reply| {
                        if reply.status == 201 {
                            let key_id = reply.body["key_id"].as_str().unwrap().to_owned();
                            let key = reply.body["key"].as_str().unwrap().to_owned();
                            acknowledged.lock().unwrap().keys.push((key_id, key));
                        }
                    }),
                    1 => post(
                        "/api/auth/roles",
                        json!({"name": format!("role-{tag}"), "permissions": ["tool:list"]}),
                    )
                    .and_then(|reply| {
                        if reply.status != 201 {
                            return Some(());
                        }
                        acknowledged
                            .lock()
                            .unwrap()
                            .roles
                            .push(format!("role-{tag}"));
                        let assigned = post(
                            "/api/auth/roles/assign",
                            json!({"principal": format!("user:u{tag}"),
                                   "role": format!("role-{tag}")}),
                        )?;
                        if assigned.status == 201 {
                            acknowledged
                                .lock()
                                .unwrap()
                                .assignments
                                .push((format!("user:u{tag}"), format!("role-{tag}")));
                        }
                        Some(())
                    }),
                    2 => post(
                        &format!("/api/auth/policies/provider/target-{tag}"),
                        json!({"allow_list": ["user:alice"], "deny_list": ["user:mallory"]}),
                    )
                    .map(|reply| {
                        if reply.status == 201 {
                            acknowledged
                                .lock()
                                .unwrap()
                                .policies
                                .push(format!("target-{tag}"));
                        }
                    }),
                    3 => post(
                        "/api/mcp_servers",
                        json!({"mcp_server_id": format!("api-{tag}"), "mode": "subprocess",
                               "command": [fixture]}),
                    )
                    .map(|reply| {
                        if reply.status == 201 {
                            acknowledged
                                .lock()
                                .unwrap()
                                .servers
                                .push(format!("api-{tag}"));
                        }
                    }),
                    _ => post(
                        "/mcp",
                        tool_call_body("demo__echo", json!({"text": format!("call {tag}")})),
                    )
                    .and_then(|_| {
                        let reply = try_call(
                            &agent,
                            &base_url,
                            "GET",
                            "/api/mcp_servers/demo/tools/history?limit=20",
                            &admin,
                            None,
                        )?;
                        if reply.status == 200 {
                            let seen: Vec<u64> = reply.body["history"]
                                .as_array()
                                .unwrap()
                                .iter()
                                .map(|entry| event_id(&entry["event_id"]))
                                .collect();
                            acknowledged.lock().unwrap().history.extend(seen);
                        }
                        Some(())
                    }),
                };
                if done.is_none() {
                    return;
                }
            }
        }));
    }
    threads
}

/// Checks that everything in `acknowledged` is served by `gw` (restarted after the kill).
#[track_caller]
fn assert_all_there(gw: &RunningGateway, admin: &str, acknowledged: &Acknowledged, round: usize) {
    for (key_id, key) in &acknowledged.keys {
        let reply = call(gw, "GET", "/api/mcp_servers", key, None);
        assert_eq!(
            reply.status, 200,
            "round {round}: the acknowledged key {key_id} no longer authenticates: {}",
            reply.body
        );
    }
    let roles = call(gw, "GET", "/api/auth/roles", admin, None).body;
    let listed = names_in(&roles, "roles", "name");
    for role in &acknowledged.roles {
        assert!(
            listed.contains(role.as_str()),
            "round {round}: the acknowledged role {role} is lost: {roles}"
        );
    }
    for (principal, role) in &acknowledged.assignments {
        let held = call(
            gw,
            "GET",
            &format!("/api/auth/principals/roles?principal={principal}"),
            admin,
            None,
        )
        .body;
        assert!(
            held["roles"]
                .as_array()
                .unwrap()
                .iter()
                .any(|held| held["role"] == role.as_str()),
            "round {round}: the acknowledged assignment {principal} -> {role} is lost: {held}"
        );
    }
    for target in &acknowledged.policies {
        let reply = call(
            gw,
            "GET",
            &format!("/api/auth/policies/provider/{target}"),
            admin,
            None,
        );
        assert_eq!(
            reply.status, 200,
            "round {round}: the acknowledged policy on {target} is lost: {}",
            reply.body
        );
    }
    let servers = call(gw, "GET", "/api/mcp_servers", admin, None).body;
    let listed = names_in(&servers, "mcp_servers", "mcp_server_id");
    for server in &acknowledged.servers {
        assert!(
            listed.contains(server.as_str()),
            "round {round}: the acknowledged server {server} is lost"
        );
    }
    let history = history_ids(gw, admin, "demo");
    let lost: Vec<&u64> = acknowledged.history.difference(&history).collect();
    assert!(
        lost.is_empty(),
        "round {round}: tool history entries seen before the kill are lost: {lost:?}"
    );
}

/// Injects: SIGKILL of the gateway while five client threads make acknowledged writes at the
/// same time (API keys, custom roles and assignments, tool access policies, servers over REST,
/// tool calls whose history they read back), at three different moments, each time restarting
/// on the same data directory.
#[test]
fn sigkill_during_writes_loses_no_acknowledged_write() {
    let data_dir = tempfile::tempdir().unwrap();
    let admin = cli_key(data_dir.path(), "user:root", Some("admin"));
    let mut data_dir = Some(data_dir);
    let mut all = Acknowledged::default();
    // Different moments after the writers start, so that the kill lands in different places
    // (a commit in flight, an event batch being gathered, a server's first start).
    for (round, kill_after_ms) in [350_u64, 900, 1_600].into_iter().enumerate() {
        let mut gw = gateway()
            .config(&auth_config(""))
            .data_dir(data_dir.take().unwrap())
            .start();
        start_demo(&gw, &admin);
        if round > 0 {
            assert_all_there(&gw, &admin, &all, round);
        }
        // A first call starts `demo`, so that the writers' calls find it running.
        call_tool_text(&gw, &admin, "demo__echo", "warm up");
        let warm = Acknowledged {
            history: history_ids(&gw, &admin, "demo"),
            ..Acknowledged::default()
        };
        let acknowledged = Arc::new(Mutex::new(warm));
        let stop = Arc::new(AtomicBool::new(false));
        let writers = start_writers(&gw.base_url, &admin, round, &acknowledged, &stop);
        std::thread::sleep(Duration::from_millis(kill_after_ms));
        let status = gw.signal_and_wait(libc::SIGKILL, Duration::from_secs(10));
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL)
        );
        stop.store(true, Ordering::Relaxed);
        for writer in writers {
            writer.join().unwrap();
        }
        let acknowledged = std::mem::take(&mut *acknowledged.lock().unwrap());
        let writes = acknowledged.keys.len()
            + acknowledged.roles.len()
            + acknowledged.policies.len()
            + acknowledged.servers.len();
        assert!(
            writes > 0 && !acknowledged.history.is_empty(),
            "round {round}: nothing was acknowledged before the kill: {acknowledged:?}"
        );
        all.keys.extend(acknowledged.keys);
        all.roles.extend(acknowledged.roles);
        all.assignments.extend(acknowledged.assignments);
        all.policies.extend(acknowledged.policies);
        all.servers.extend(acknowledged.servers);
        all.history.extend(acknowledged.history);
        data_dir = Some(take_data_dir(&mut gw));
    }
    let gw = gateway()
        .config(&auth_config(""))
        .data_dir(data_dir.take().unwrap())
        .start();
    start_demo(&gw, &admin);
    assert_all_there(&gw, &admin, &all, 3);
    // The store is not corrupt: new writes of every kind work and are read back.
    let created = call(
        &gw,
        "POST",
        "/api/auth/roles",
        &admin,
        Some(&json!({"name": "after-kills", "permissions": ["tool:list"]})),
    );
    assert_eq!(created.status, 201, "{}", created.body);
    let key = call(
        &gw,
        "POST",
        "/api/auth/keys",
        &admin,
        Some(&json!({"principal": "service:after", "name": "after", "role": "viewer"})),
    );
    assert_eq!(key.status, 201, "{}", key.body);
    let new_key = key.body["key"].as_str().unwrap();
    assert_eq!(
        call(&gw, "GET", "/api/mcp_servers", new_key, None).status,
        200
    );
    let before = history_ids(&gw, &admin, "demo");
    assert_eq!(call_tool_text(&gw, &admin, "demo__echo", "after"), "after");
    let after = history_ids(&gw, &admin, "demo");
    let new: Vec<&u64> = after.difference(&before).collect();
    assert_eq!(new.len(), 1, "{new:?}");
    assert!(
        before.iter().all(|id| id < new[0]),
        "a new event reused an old id: {new:?}"
    );
}

/// Sets the immutable flag (which stops root too) on a directory and every file in it, and
/// takes it off again when dropped, also when the test fails.
struct Immutable {
    paths: Vec<PathBuf>,
}

impl Immutable {
    #[track_caller]
    fn set(directory: &Path) -> Self {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(directory)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        paths.push(directory.to_owned());
        let guard = Self { paths };
        for path in &guard.paths {
            chattr("+i", path);
        }
        guard
    }
}

#[track_caller]
fn chattr(flag: &str, path: &Path) {
    let status = Command::new("chattr")
        .arg(flag)
        .arg(path)
        .status()
        .expect("running chattr: install e2fsprogs");
    assert!(
        status.success(),
        "chattr {flag} {} failed: the tests need root on a file system with the immutable flag",
        path.display()
    );
}

impl Drop for Immutable {
    fn drop(&mut self) {
        for path in &self.paths {
            let _ = Command::new("chattr").arg("-i").arg(path).status();
        }
    }
}

/// A counter of `/metrics` (the sum of its series), 0 when absent.
fn metric(gw: &RunningGateway, name: &str) -> f64 {
    gw.get("/metrics")
        .text
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Injects: the data directory and every file in it (the databases, their WAL and shared
/// memory files) become immutable while the gateway runs, then writable again.
#[test]
fn a_read_only_data_directory_refuses_writes_and_recovers_without_restart() {
    let data_dir = tempfile::tempdir().unwrap();
    let admin = cli_key(data_dir.path(), "user:root", Some("admin"));
    // The dropped-events counter is brought up to date by each compaction round.
    let config = format!(
        "event_log:\n  compaction_interval_s: 1\n{}",
        auth_config("")
    );
    let mut gw = gateway().config(&config).data_dir(data_dir).start();
    start_demo(&gw, &admin);
    let fixture = fixture_binary().display().to_string();
    let server =
        |id: &str| json!({"mcp_server_id": id, "mode": "subprocess", "command": [fixture]});
    let role = |name: &str| json!({"name": name, "permissions": ["tool:list"]});
    assert_eq!(
        call(
            &gw,
            "POST",
            "/api/mcp_servers",
            &admin,
            Some(&server("before"))
        )
        .status,
        201
    );
    assert_eq!(
        call(
            &gw,
            "POST",
            "/api/auth/roles",
            &admin,
            Some(&role("before"))
        )
        .status,
        201
    );
    assert_eq!(call_tool_text(&gw, &admin, "demo__echo", "one"), "one");
    let history_before = history_ids(&gw, &admin, "demo");
    assert_eq!(history_before.len(), 1);

    let frozen = Immutable::set(gw.data_dir.path());
    // Reads keep working.
    let servers = call(&gw, "GET", "/api/mcp_servers", &admin, None);
    assert_eq!(servers.status, 200, "{}", servers.body);
    assert!(servers.body.to_string().contains("\"before\""));
    assert_eq!(
        call(&gw, "GET", "/api/auth/roles/before", &admin, None).status,
        200
    );
    assert_eq!(history_ids(&gw, &admin, "demo"), history_before);
    // Every write is refused with the store's 500, and nothing of it shows.
    let writes: [(&str, String, Value); 6] = [
        ("POST", "/api/mcp_servers".into(), server("during")),
        ("POST", "/api/auth/roles".into(), role("during")),
        (
            "POST",
            "/api/auth/keys".into(),
            json!({"principal": "service:during", "name": "during"}),
        ),
        (
            "POST",
            "/api/auth/roles/assign".into(),
            json!({"principal": "user:during", "role": "before"}),
        ),
        (
            "POST",
            "/api/auth/policies/provider/during".into(),
            json!({"allow_list": ["user:alice"]}),
        ),
        ("DELETE", "/api/auth/roles/before".into(), Value::Null),
    ];
    for (method, path, body) in &writes {
        let body = (!body.is_null()).then_some(body);
        let reply = call(&gw, method, path, &admin, body);
        assert_eq!(reply.status, 500, "{method} {path}: {}", reply.body);
        assert_eq!(
            reply.body["error"], "StoreUnavailableError",
            "{}",
            reply.body
        );
        assert_eq!(reply.body["status_code"], 500, "{}", reply.body);
        let message = reply.body["message"].as_str().unwrap();
        assert!(
            message.contains("database") && message.contains("data directory"),
            "{message}"
        );
    }
    assert_eq!(
        call(&gw, "GET", "/api/mcp_servers/during", &admin, None).status,
        404
    );
    assert_eq!(
        call(&gw, "GET", "/api/auth/roles/during", &admin, None).status,
        404
    );
    assert_eq!(
        call(&gw, "GET", "/api/auth/roles/before", &admin, None).status,
        200
    );
    assert_eq!(
        call(
            &gw,
            "GET",
            "/api/auth/policies/provider/during",
            &admin,
            None
        )
        .status,
        404
    );
    let held = call(
        &gw,
        "GET",
        "/api/auth/principals/roles?principal=user:during",
        &admin,
        None,
    );
    assert_eq!(held.body["roles"], json!([]), "{}", held.body);
    // Tool calls keep working; their events cannot be stored, and are counted as dropped.
    let dropped_before = metric(&gw, "mcpgw_event_log_dropped_total");
    assert_eq!(call_tool_text(&gw, &admin, "demo__echo", "two"), "two");
    wait_until(SOON, "the lost events to be counted", || {
        metric(&gw, "mcpgw_event_log_dropped_total") > dropped_before
    });
    assert!(gw.get("/health/ready").status == 200);

    drop(frozen);
    // Writable again: writes work without a restart, and everything acknowledged is there.
    assert_eq!(
        call(
            &gw,
            "POST",
            "/api/mcp_servers",
            &admin,
            Some(&server("after"))
        )
        .status,
        201
    );
    assert_eq!(
        call(&gw, "POST", "/api/auth/roles", &admin, Some(&role("after"))).status,
        201
    );
    assert_eq!(call_tool_text(&gw, &admin, "demo__echo", "three"), "three");
    let history_after = history_ids(&gw, &admin, "demo");
    assert!(history_after.is_superset(&history_before));
    assert_eq!(history_after.len(), history_before.len() + 1);

    gw.signal_and_wait(libc::SIGTERM, SOON);
    let data_dir = take_data_dir(&mut gw);
    let gw = gateway()
        .config(&auth_config(""))
        .data_dir(data_dir)
        .start();
    start_demo(&gw, &admin);
    for id in ["before", "after"] {
        assert_eq!(
            call(&gw, "GET", &format!("/api/mcp_servers/{id}"), &admin, None).status,
            200
        );
        assert_eq!(
            call(&gw, "GET", &format!("/api/auth/roles/{id}"), &admin, None).status,
            200
        );
    }
    assert_eq!(
        call(&gw, "GET", "/api/mcp_servers/during", &admin, None).status,
        404
    );
    assert_eq!(history_ids(&gw, &admin, "demo"), history_after);
}

/// A private podman API service on its own socket, killed when dropped. The shared service at
/// /tmp/podman.sock is never touched: other suites use it.
struct EngineService {
    socket: PathBuf,
    child: Option<Child>,
}

impl EngineService {
    fn start(socket: &Path) -> Self {
        let _ = std::fs::remove_file(socket);
        let child = Command::new("podman")
            .args(["system", "service", "--time=0"])
            .arg(format!("unix://{}", socket.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("podman starts");
        let service = Self {
            socket: socket.to_owned(),
            child: Some(child),
        };
        wait_until(SOON, "the private podman service to answer", || {
            service.answers()
        });
        service
    }

    fn answers(&self) -> bool {
        use std::io::{Read as _, Write as _};
        let Ok(mut stream) = std::os::unix::net::UnixStream::connect(&self.socket) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        if stream
            .write_all(b"GET /_ping HTTP/1.0\r\nHost: engine\r\n\r\n")
            .is_err()
        {
            return false;
        }
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer.trim_end().ends_with("OK")
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for EngineService {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// Injects: the container engine's API service is killed while a docker-mode server runs on it
/// and a discovery source watches it, then started again.
#[test]
fn the_container_engine_going_away_fails_only_what_needs_it() {
    require_engine();
    let socket = PathBuf::from(format!("/tmp/{}.sock", unique("mcpgw-faults-engine")));
    let host = format!("unix://{}", socket.display());
    let box_id = unique("faultbox");
    let _containers = ContainerGuard::new().server(&box_id);
    let mut service = EngineService::start(&socket);
    let config = format!(
        "probe_tools: false\nmcp_servers:\n{}  {box_id}:\n    mode: docker\n    image: {TEST_IMAGE}\n    docker_host: {host}\ndiscovery:\n  refresh_interval_s: 3600\n  sources:\n    - {{id: engine, type: docker, mode: additive, enabled: true, config: {{socket_path: {}}}}}\n",
        fixture_server_yaml("local", &[]),
        socket.display()
    );
    let gw = gateway().config(&config).start();
    assert_eq!(gw.post_empty("/api/mcp_servers/local/start").status, 200);
    let started = gw.post_empty(&format!("/api/mcp_servers/{box_id}/start"));
    assert_eq!(started.status, 200, "{}\n{}", started.text, gw.stderr());
    let echo = |tool: &str, text: &str| gw.mcp_call_tool(tool, json!({"text": text}));
    assert_eq!(
        echo(&format!("{box_id}__echo"), "in a box")["result"]["content"][0]["text"],
        "in a box"
    );
    let scan = gw.post_empty("/api/discovery/sources/engine/scan");
    assert_eq!(scan.status, 200, "{}", scan.text);

    service.kill();
    // The subprocess server does not need the engine.
    let local = echo("local__echo", "still here");
    assert_eq!(
        local["result"]["content"][0]["text"],
        "still here",
        "{local}\n{}",
        gw.stderr()
    );
    // The docker server's calls fail with a clear error, and its state tells the truth.
    let failed = echo(&format!("{box_id}__echo"), "gone");
    let failure = if failed["error"].is_object() {
        failed["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    } else {
        assert_eq!(failed["result"]["isError"], true, "{failed}");
        failed["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(!failure.is_empty(), "{failed}");
    let health = gw.wait_for(
        &format!("/api/mcp_servers/{box_id}/health"),
        SOON,
        |health| health["healthy"] == false && health["state"] != "ready",
    );
    assert!(
        ["dead", "degraded", "cold"].contains(&health["state"].as_str().unwrap()),
        "{health}"
    );
    // Discovery: the scan fails with the source's error, the other endpoints answer normally.
    gw.post_empty("/api/discovery/sources/engine/scan")
        .assert_error(503, "DiscoverySourceUnavailableError");
    let sources = gw.get("/api/discovery/sources");
    assert_eq!(sources.status, 200);
    let error = &sources.json()["sources"][0]["error"];
    assert!(
        error.is_string() && !error.as_str().unwrap().is_empty(),
        "{error}"
    );
    assert_eq!(gw.get("/api/discovery/pending").status, 200);
    assert_eq!(gw.get("/api/discovery/quarantined").status, 200);
    assert_eq!(gw.get("/health/ready").status, 200);
    // A start while the engine is gone fails with a reason, not a hang or a crash.
    gw.post_empty(&format!("/api/mcp_servers/{box_id}/start"))
        .assert_error(503, "McpServerUnavailableError");

    // Killing the API service does not stop the containers it started: remove the old one, as
    // a restarted engine would have lost track of it anyway.
    for container in engine::containers_of_server(&box_id) {
        engine::podman(&["rm", "--force", "--time", "0", &container.id]);
    }
    let _service = EngineService::start(&socket);
    let restarted = gw.post_empty(&format!("/api/mcp_servers/{box_id}/start"));
    assert_eq!(restarted.status, 200, "{}\n{}", restarted.text, gw.stderr());
    assert_eq!(
        echo(&format!("{box_id}__echo"), "back")["result"]["content"][0]["text"],
        "back"
    );
    let scan = gw.post_empty("/api/discovery/sources/engine/scan");
    assert_eq!(scan.status, 200, "{}", scan.text);
    assert_eq!(
        gw.get("/api/discovery/sources").json()["sources"][0]["error"],
        Value::Null
    );
}

/// Starts the gateway on `data_dir`, expects it to refuse, and answers its stderr.
fn start_fails_on(data_dir: &Path) -> String {
    let started = Instant::now();
    let output = Command::new(support::gateway_binary())
        .args(["--http", "--host", "127.0.0.1", "--port", "0", "--data-dir"])
        .arg(data_dir)
        .env_remove("MCP_CONFIG")
        .current_dir(data_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(!output.status.success(), "the gateway started");
    assert!(started.elapsed() < SOON);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

/// Injects: `mcpgw.db` and `events.db` replaced by garbage, and each truncated to its first
/// page, before the gateway starts.
#[test]
fn a_garbage_or_truncated_database_stops_the_start_naming_the_file() {
    // Garbage in place of each database file.
    for file in ["mcpgw.db", "events.db"] {
        let data_dir = tempfile::tempdir().unwrap();
        let path = data_dir.path().join(file);
        let garbage: Vec<u8> = (0..20_000_u32).map(|i| (i * 7919 % 251) as u8).collect();
        std::fs::write(&path, &garbage).unwrap();
        let stderr = start_fails_on(data_dir.path());
        assert!(
            stderr.contains(&path.display().to_string()) && stderr.contains("not an sqlite"),
            "{file}: {stderr}"
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            garbage,
            "{file} was changed by the failed start"
        );
    }
    // A real database of a stopped gateway, cut to its first page.
    for file in ["mcpgw.db", "events.db"] {
        let data_dir = tempfile::tempdir().unwrap();
        let admin = cli_key(data_dir.path(), "user:root", Some("admin"));
        let mut gw = gateway()
            .config(&auth_config(""))
            .data_dir(data_dir)
            .start();
        start_demo(&gw, &admin);
        for i in 0..30 {
            let created = call(
                &gw,
                "POST",
                "/api/auth/roles",
                &admin,
                Some(
                    &json!({"name": format!("role-{i}"), "description": "y".repeat(1000),
                             "permissions": ["tool:list"]}),
                ),
            );
            assert_eq!(created.status, 201, "{}", created.body);
            call_tool_text(&gw, &admin, "demo__echo", &"z".repeat(2000));
        }
        gw.signal_and_wait(libc::SIGTERM, SOON);
        let data_dir = take_data_dir(&mut gw);
        let path = data_dir.path().join(file);
        for companion in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{companion}", path.display()));
        }
        let whole = std::fs::read(&path).unwrap();
        assert!(
            whole.len() > 3 * 4096,
            "{file} is only {} bytes",
            whole.len()
        );
        let cut = whole[..4096].to_vec();
        std::fs::write(&path, &cut).unwrap();
        let stderr = start_fails_on(data_dir.path());
        assert!(
            stderr.contains(&path.display().to_string())
                && stderr.contains("is damaged")
                && stderr.contains("restore it from a backup"),
            "{file}: the error does not name the file and the way out: {stderr}"
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            cut,
            "{file} was changed by the failed start"
        );
    }
}

/// The `field` of every entry of the list `collection` in a listing answer.
fn names_in<'a>(body: &'a Value, collection: &str, field: &str) -> BTreeSet<&'a str> {
    body[collection]
        .as_array()
        .unwrap_or_else(|| panic!("`{collection}` is not a list: {body}"))
        .iter()
        .filter_map(|entry| entry[field].as_str())
        .collect()
}
