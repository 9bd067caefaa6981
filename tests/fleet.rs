//! Several gateway replicas sharing one PostgreSQL store, each a real `mcpgw` process, behind a
//! client that sends each request to the next replica (no affinity): what is created, revoked or
//! deleted on one replica takes effect on all within a second, the fleet view shows every
//! replica and who holds the work that runs once, that work moves when its holder is killed,
//! and a replica killed while it takes writes loses none it acknowledged.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use mcpgw_testkit::postgres::TempPostgres;
use serde_json::{Value, json};
use support::RunningGateway;

/// One request with an API key; `None` when the replica did not answer (it is down).
fn call(
    gateway: &RunningGateway,
    method: &str,
    path: &str,
    key: &str,
    body: Option<&Value>,
) -> Option<(u16, Value)> {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .new_agent();
    let request = ureq::http::Request::builder()
        .method(method)
        .uri(gateway.url(path))
        .header("x-api-key", key)
        .header("content-type", "application/json")
        .body(body.map(Value::to_string).unwrap_or_default())
        .unwrap();
    let mut response = agent.run(request).ok()?;
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    Some((
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    ))
}

/// `tools/call` on `/mcp` in the stateless era, with an API key.
fn call_tool(gateway: &RunningGateway, key: &str, name: &str, arguments: Value) -> Value {
    const PROTOCOL: &str = "2026-07-28";
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": name, "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": PROTOCOL,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    });
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .new_agent();
    let mut response = agent
        .post(gateway.url("/mcp"))
        .header("x-api-key", key)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", PROTOCOL)
        .header("mcp-method", "tools/call")
        .header("mcp-name", name)
        .send_json(&body)
        .expect("the replica answers");
    let text = response.body_mut().read_to_string().unwrap();
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .find_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .unwrap_or_else(|| serde_json::from_str(&text).unwrap_or(Value::String(text.clone())))
}

/// One POST to `/mcp` in the session era: answers the session id the response names (if any)
/// and the JSON-RPC answer (`null` for a notification's 202).
fn session_post(
    gateway: &RunningGateway,
    key: &str,
    session: Option<&str>,
    body: &Value,
) -> (Option<String>, Value) {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .new_agent();
    let mut request = agent
        .post(gateway.url("/mcp"))
        .header("x-api-key", key)
        .header("accept", "application/json, text/event-stream");
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-11-25");
    }
    let mut response = request.send_json(body).expect("the replica answers");
    let status = response.status().as_u16();
    assert!(status == 200 || status == 202, "{status} for {body}");
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let text = response.body_mut().read_to_string().unwrap_or_default();
    if status == 202 {
        return (session, Value::Null);
    }
    let answer = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|message| message.get("id").is_some())
        .unwrap_or_else(|| serde_json::from_str(&text).unwrap_or(Value::String(text.clone())));
    (session, answer)
}

type EventStream = tungstenite::WebSocket<std::net::TcpStream>;

/// The event stream of `gateway`, filtered to `event_type`.
fn events_of(gateway: &RunningGateway, key: &str, event_type: &str) -> EventStream {
    let address = gateway.address().to_owned();
    let stream = std::net::TcpStream::connect(&address).unwrap();
    let url = format!("ws://{address}/api/ws/events?event_types={event_type}&api_key={key}");
    let (client, response) = tungstenite::client(url.as_str(), stream).expect("the handshake");
    assert_eq!(response.status().as_u16(), 101);
    client
}

/// The next event on `stream`; fails after `within`.
fn next_event(stream: &mut EventStream, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "no event within {within:?}");
        stream.get_mut().set_read_timeout(Some(left)).unwrap();
        if let tungstenite::Message::Text(text) = stream.read().expect("the stream stays open") {
            return serde_json::from_str(text.as_str()).unwrap();
        }
    }
}

#[track_caller]
fn ok(
    gateway: &RunningGateway,
    method: &str,
    path: &str,
    key: &str,
    body: Option<&Value>,
) -> Value {
    let (status, body) = call(gateway, method, path, key, body).expect("the replica answers");
    assert!(
        (200..300).contains(&status),
        "{method} {path}: {status} {body}"
    );
    body
}

/// Polls `condition` every 10 ms; answers how long it took to hold, or fails after `within`.
#[track_caller]
fn within(what: &str, within: Duration, mut condition: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    loop {
        if condition() {
            return started.elapsed();
        }
        assert!(started.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn config(url: &str, catalog: &Path) -> String {
    format!(
        "store: {{url: \"{url}\"}}\n\
         cluster: {{heartbeat_interval_s: 1, lease_s: 3, resync_interval_s: 5}}\n\
         auth: {{enabled: true}}\n\
         discovery:\n  refresh_interval_s: 1\n  sources:\n    - {{id: catalog, type: filesystem, \
         mode: additive, config: {{path: \"{}\"}}}}\n\
         mcp_servers: {{}}\n",
        catalog.display()
    )
}

fn admin_key(config_file: &Path) -> String {
    let output = std::process::Command::new(support::gateway_binary())
        .args([
            "auth",
            "create-key",
            "--principal",
            "user:admin",
            "--name",
            "fleet",
            "--role",
            "admin",
        ])
        .arg("--config")
        .arg(config_file)
        .arg("--data-dir")
        .arg(config_file.parent().unwrap().join("cli-data"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

fn replica(config_file: &Path, name: &str) -> RunningGateway {
    support::gateway()
        .arg("--config")
        .arg(config_file.to_str().unwrap())
        .env("HOSTNAME", name)
        .env(
            "MCP_CLUSTER_SECRET",
            "a fleet secret that every replica of the test shares",
        )
        .start()
}

fn listed(gateway: &RunningGateway, key: &str, id: &str) -> bool {
    call(gateway, "GET", "/api/mcp_servers", key, None).is_some_and(|(status, body)| {
        status == 200
            && body["mcp_servers"]
                .as_array()
                .is_some_and(|servers| servers.iter().any(|server| server["mcp_server_id"] == id))
    })
}

fn fixture_definition(id: &str) -> Value {
    json!({
        "mcp_server_id": id,
        "mode": "subprocess",
        "command": [support::fixture_binary().display().to_string()],
    })
}

fn holders(gateway: &RunningGateway, key: &str, lease: &str) -> Vec<String> {
    let Some((200, body)) = call(gateway, "GET", "/api/system/replicas", key, None) else {
        return Vec::new();
    };
    body["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|replica| replica["alive"] == true)
        .filter(|replica| {
            replica["leases"]
                .as_array()
                .unwrap()
                .iter()
                .any(|held| held == lease)
        })
        .map(|replica| replica["replica_id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn three_replicas_share_servers_keys_and_work() {
    let postgres = TempPostgres::start();
    let url = postgres.fresh_database();
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("catalog");
    std::fs::create_dir(&catalog).unwrap();
    let config_file = dir.path().join("gateway.yaml");
    std::fs::write(&config_file, config(&url, &catalog)).unwrap();
    let admin = admin_key(&config_file);
    let mut replicas = vec![
        replica(&config_file, "gw-a"),
        replica(&config_file, "gw-b"),
        replica(&config_file, "gw-c"),
    ];

    // The fleet view: every replica alive, each lease held by exactly one.
    within(
        "three replicas in the fleet view",
        Duration::from_secs(10),
        || {
            call(&replicas[2], "GET", "/api/system/replicas", &admin, None).is_some_and(
                |(_, body)| {
                    body["replicas"].as_array().is_some_and(|all| {
                        all.len() == 3 && all.iter().all(|replica| replica["alive"] == true)
                    })
                },
            )
        },
    );
    let fleet = ok(&replicas[0], "GET", "/api/system/replicas", &admin, None);
    assert_eq!(fleet["replica_id"], "gw-a");
    assert_eq!(fleet["shared_store"], true);
    within("one discovery holder", Duration::from_secs(5), || {
        holders(&replicas[1], &admin, "discovery").len() == 1
    });
    assert_eq!(
        holders(&replicas[1], &admin, "event-log-compaction").len(),
        1
    );

    // The event stream of C shows what happens on A.
    let mut stream = events_of(&replicas[2], &admin, "McpServerRegistered");

    // A server created on A is listed on B and C within a second, and callable there.
    let created = Instant::now();
    let answer = ok(
        &replicas[0],
        "POST",
        "/api/mcp_servers",
        &admin,
        Some(&fixture_definition("shared")),
    );
    assert_eq!(answer["created"], true);
    for replica in &replicas[1..] {
        within(
            "the new server on every replica",
            Duration::from_secs(1).saturating_sub(created.elapsed()) + Duration::from_millis(1),
            || listed(replica, &admin, "shared"),
        );
    }
    let registered = next_event(&mut stream, Duration::from_secs(2));
    assert_eq!(
        registered["event_type"], "McpServerRegistered",
        "{registered}"
    );
    assert_eq!(registered["mcp_server_id"], "shared", "{registered}");
    for replica in &replicas {
        let answer = call_tool(replica, &admin, "shared__echo", json!({"text": "hello"}));
        assert_eq!(answer["result"]["content"][0]["text"], "hello", "{answer}");
    }

    // A curated endpoint created on A is served on B and C under its own names.
    let created = ok(
        &replicas[0],
        "POST",
        "/api/endpoints",
        &admin,
        Some(
            &json!({"name": "team", "tools": [{"server": "shared", "tool": "echo", "name": "say"}]}),
        ),
    );
    assert_eq!(created["created"], true, "{created}");
    for replica in &replicas[1..] {
        within(
            "the endpoint on every replica",
            Duration::from_secs(2),
            || {
                call(replica, "GET", "/api/endpoints/team", &admin, None)
                    .is_some_and(|(status, _)| status == 200)
            },
        );
        let answer = ok(replica, "GET", "/api/endpoints/team", &admin, None);
        assert_eq!(answer["tools"][0]["name"], "say", "{answer}");
    }

    // A session-era MCP session opened on A goes on on B and C, with no affinity anywhere.
    let (session, _) = session_post(
        &replicas[0],
        &admin,
        None,
        &json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "fleet-e2e", "version": "0"},
            },
        }),
    );
    let session = session.expect("initialize answers a session id");
    let (_, answer) = session_post(
        &replicas[1],
        &admin,
        Some(&session),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(
        answer,
        Value::Null,
        "a notification is accepted without an answer"
    );
    let (_, tool_list) = session_post(
        &replicas[2],
        &admin,
        Some(&session),
        &json!({
            "jsonrpc": "2.0", "id": 2, "method": "tools/list",
        }),
    );
    let names: Vec<&str> = tool_list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("tools/list on C: {tool_list}"))
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert!(names.contains(&"shared__echo"), "{tool_list}");
    for (index, progress) in [(1, false), (2, true), (0, false)] {
        let mut params = json!({"name": "shared__echo", "arguments": {"text": "in session"}});
        if progress {
            params["_meta"] = json!({"progressToken": "p-1"});
        }
        let (_, called) = session_post(
            &replicas[index],
            &admin,
            Some(&session),
            &json!({
                "jsonrpc": "2.0", "id": 3 + index, "method": "tools/call", "params": params,
            }),
        );
        assert_eq!(
            called["result"]["content"][0]["text"], "in session",
            "{called}"
        );
    }

    // A key made on A works on C; revoked on B, it is refused everywhere within a second.
    let issued = ok(
        &replicas[0],
        "POST",
        "/api/auth/keys",
        &admin,
        Some(&json!({"principal": "service:ci", "name": "ci", "role": "viewer"})),
    );
    let key = issued["key"].as_str().unwrap().to_owned();
    let key_id = issued["key_id"].as_str().unwrap().to_owned();
    within(
        "the new key on every replica",
        Duration::from_secs(1),
        || {
            replicas.iter().all(|replica| {
                call(replica, "GET", "/api/mcp_servers", &key, None)
                    .is_some_and(|(status, _)| status == 200)
            })
        },
    );
    ok(
        &replicas[1],
        "DELETE",
        &format!("/api/auth/keys/{key_id}"),
        &admin,
        None,
    );
    let revoked = Instant::now();
    for replica in &replicas {
        within(
            "the revoked key refused",
            Duration::from_secs(1).saturating_sub(revoked.elapsed()) + Duration::from_millis(1),
            || {
                call(replica, "GET", "/api/mcp_servers", &key, None)
                    .is_some_and(|(status, _)| status == 401)
            },
        );
    }

    // Deleted on C, gone from A and B within a second.
    ok(
        &replicas[2],
        "DELETE",
        "/api/mcp_servers/shared",
        &admin,
        None,
    );
    for replica in &replicas[..2] {
        within("the deleted server gone", Duration::from_secs(1), || {
            !listed(replica, &admin, "shared")
        });
    }

    // The replica holding discovery is killed: another takes the work once the lease expired.
    let holder = holders(&replicas[0], &admin, "discovery").remove(0);
    let index = replicas
        .iter()
        .position(|replica| {
            ok(replica, "GET", "/api/system/replicas", &admin, None)["replica_id"]
                == holder.as_str()
        })
        .unwrap();
    let mut killed = replicas.remove(index);
    killed.signal_and_wait(libc::SIGKILL, Duration::from_secs(5));
    let moved = within(
        "discovery moves to a survivor",
        Duration::from_secs(8),
        || {
            holders(&replicas[0], &admin, "discovery")
                .first()
                .is_some_and(|new_holder| *new_holder != holder)
        },
    );
    assert!(
        moved <= Duration::from_secs(3 + 2),
        "the lease moved after {moved:?}"
    );
}

#[test]
fn a_replica_killed_under_writes_loses_nothing_it_acknowledged() {
    let postgres = TempPostgres::start();
    let url = postgres.fresh_database();
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("catalog");
    std::fs::create_dir(&catalog).unwrap();
    let config_file = dir.path().join("gateway.yaml");
    std::fs::write(&config_file, config(&url, &catalog)).unwrap();
    let admin = admin_key(&config_file);
    let mut replicas = vec![
        replica(&config_file, "gw-a"),
        replica(&config_file, "gw-b"),
        replica(&config_file, "gw-c"),
    ];
    let victim_pid = replicas[1].pid();
    // Four clients write at once, each round robin over the replicas, and retry on the next
    // replica what one that does not answer was sent. A third of the way in, one replica is
    // killed: nothing gets a chance to flush or say goodbye.
    let sent = std::sync::atomic::AtomicUsize::new(0);
    let acknowledged = std::sync::Mutex::new(Vec::new());
    let retried = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for client in 0..4 {
            let (replicas, sent, acknowledged, retried, admin) =
                (&replicas, &sent, &acknowledged, &retried, &admin);
            scope.spawn(move || {
                for number in 0..20 {
                    if sent.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 25 {
                        support::send_signal(victim_pid, libc::SIGKILL);
                    }
                    let id = format!("load-{client}-{number}");
                    let body = fixture_definition(&id);
                    let mut answered = None;
                    for attempt in 0..replicas.len() {
                        let replica = &replicas[(client + number + attempt) % replicas.len()];
                        match call(replica, "POST", "/api/mcp_servers", admin, Some(&body)) {
                            Some(answer) => {
                                answered = Some(answer);
                                break;
                            }
                            None => {
                                retried.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            }
                        }
                    }
                    let (status, answer) = answered.expect("some replica answers");
                    // A retry of a create that landed before its replica died finds it: 409.
                    assert!(status == 201 || status == 409, "{status} {answer}");
                    acknowledged.lock().unwrap().push(id);
                }
            });
        }
    });
    let acknowledged = acknowledged.into_inner().unwrap();
    let retried = retried.into_inner();
    assert_eq!(acknowledged.len(), 80);
    assert!(
        retried > 0,
        "the killed replica was sent requests, which were retried"
    );
    let survivors: Vec<&RunningGateway> = replicas
        .iter()
        .filter(|replica| replica.pid() != victim_pid)
        .collect();
    for survivor in survivors {
        within(
            "every acknowledged server on the survivors",
            Duration::from_secs(2),
            || acknowledged.iter().all(|id| listed(survivor, &admin, id)),
        );
    }
    drop(replicas.remove(1));
}

#[test]
fn the_rate_limit_holds_for_the_whole_fleet() {
    let postgres = TempPostgres::start();
    let redis = mcpgw_testkit::redis_server::TempRedis::start();
    let (_, redis_url) = redis.fresh_database();
    let url = postgres.fresh_database();
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("catalog");
    std::fs::create_dir(&catalog).unwrap();
    let config_file = dir.path().join("gateway.yaml");
    let (rate, burst) = (4.0, 6.0);
    std::fs::write(
        &config_file,
        format!(
            "{}rate_limit: {{rps: {rate}, burst: {burst}, backend: redis, redis: {{url: \"{redis_url}\"}}}}\n",
            config(&url, &catalog)
        ),
    )
    .unwrap();
    let admin = admin_key(&config_file);
    let limited = |name: &str| {
        support::gateway()
            .arg("--config")
            .arg(config_file.to_str().unwrap())
            .env("HOSTNAME", name)
            // The test support turns limiting off by default; the environment wins over the
            // file, so it says the same policy.
            .env("MCP_RATE_LIMIT_RPS", &rate.to_string())
            .env("MCP_RATE_LIMIT_BURST", &burst.to_string())
            .start()
    };
    let replicas = [limited("gw-a"), limited("gw-b"), limited("gw-c")];

    // One caller, round robin over the three replicas, as fast as they answer, for 3 s.
    let started = Instant::now();
    let (mut admitted, mut refused) = (0_u32, 0_u32);
    let mut turn = 0;
    while started.elapsed() < Duration::from_secs(3) {
        let replica = &replicas[turn % replicas.len()];
        turn += 1;
        match call(replica, "GET", "/api/mcp_servers", &admin, None) {
            Some((200, _)) => admitted += 1,
            Some((429, _)) => refused += 1,
            other => panic!("unexpected answer {other:?}"),
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let ceiling = burst + rate * elapsed;
    assert!(
        f64::from(admitted) <= ceiling,
        "{admitted} admitted in {elapsed:.2} s, more than burst + rate × time = {ceiling:.1}"
    );
    assert!(
        f64::from(admitted) >= burst,
        "at least the burst is admitted: {admitted}"
    );
    assert!(refused > 0, "the rest is refused");
    // Each replica alone would have admitted a burst of its own: the limit is the fleet's.
    assert!(
        f64::from(admitted) < 3.0 * burst,
        "{admitted} admitted: the replicas counted apart"
    );
    let ready = call(&replicas[0], "GET", "/health/ready", &admin, None).unwrap();
    assert_eq!(ready.0, 200, "{ready:?}");
    assert_eq!(ready.1["rate_limit"]["backend"], "redis", "{ready:?}");
    assert_eq!(ready.1["rate_limit"]["up"], true, "{ready:?}");
}
