//! End-to-end tests of the MCP server REST API: the real binary, real subprocesses (the testkit's
//! fixture MCP server), a real SQLite file, over HTTP.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{descendants, fixture_binary, fixture_server_yaml, gateway, process_alive};

/// These tests watch single starts and stops closely, so the background probe that learns the
/// tools of servers declaring none is turned off (the data-plane tests cover it).
const NO_PROBE: &str = "probe_tools: false\n";

fn config_with(servers: &[String]) -> String {
    format!("{NO_PROBE}mcp_servers:\n{}", servers.join(""))
}

fn fixture_command(extra: &[&str]) -> Value {
    let mut command = vec![Value::from(fixture_binary().display().to_string())];
    command.extend(extra.iter().map(|arg| Value::from(*arg)));
    Value::Array(command)
}

#[test]
fn the_whole_lifecycle_of_a_configured_and_a_created_server() {
    let gw = gateway()
        .config(&config_with(&[fixture_server_yaml("demo", &[])]))
        .start();

    // Registered from the file, not started.
    let list = gw.get("/api/mcp_servers").json();
    assert_eq!(list["mcp_servers"].as_array().unwrap().len(), 1);
    assert_eq!(list["mcp_servers"][0]["mcp_server_id"], "demo");
    assert_eq!(list["mcp_servers"][0]["state"], "cold");
    assert_eq!(list["mcp_servers"][0]["mode"], "subprocess");
    assert_eq!(
        gw.get("/api/mcp_servers/demo/tools").json()["tools"],
        json!([])
    );

    // Start: the real fixture process answers initialize and tools/list.
    let started = gw.post_empty("/api/mcp_servers/demo/start");
    assert_eq!(started.status, 200, "{}", started.text);
    assert_eq!(started.json()["state"], "ready");
    let tools = gw.get("/api/mcp_servers/demo/tools").json();
    assert_eq!(tools["mcp_server_id"], "demo");
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for expected in ["echo", "add", "fail", "sleep", "crash", "stderr"] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    assert!(tools["tools"][0]["inputSchema"].is_object());
    let health = gw.get("/api/mcp_servers/demo/health").json();
    assert_eq!(health["state"], "ready");
    assert_eq!(health["healthy"], true);
    assert_eq!(health["consecutive_failures"], 0);
    let ready_only = gw.get("/api/mcp_servers?state=ready").json();
    assert_eq!(ready_only["mcp_servers"].as_array().unwrap().len(), 1);

    // Stop.
    let stopped = gw.post_empty("/api/mcp_servers/demo/stop");
    assert_eq!(stopped.status, 200);
    assert_eq!(stopped.json()["state"], "cold");
    assert_eq!(
        gw.get("/api/mcp_servers?state=ready").json()["mcp_servers"],
        json!([])
    );

    // Create over REST, read, update, start, delete.
    let created = gw.post(
        "/api/mcp_servers",
        &json!({"mcp_server_id": "made", "mode": "subprocess", "command": fixture_command(&[]),
                "description": "made over REST", "idle_ttl_s": 120}),
    );
    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(
        created.json(),
        json!({"mcp_server_id": "made", "created": true})
    );
    let details = gw.get("/api/mcp_servers/made").json();
    assert_eq!(details["description"], "made over REST");
    assert_eq!(details["idle_ttl_s"], 120);
    assert_eq!(details["state"], "cold");

    let updated = gw.put(
        "/api/mcp_servers/made",
        &json!({"mode": "subprocess", "command": fixture_command(&[]), "description": "changed"}),
    );
    assert_eq!(updated.status, 200, "{}", updated.text);
    assert_eq!(
        gw.get("/api/mcp_servers/made").json()["description"],
        "changed"
    );
    assert_eq!(
        gw.post_empty("/api/mcp_servers/made/start").json()["state"],
        "ready"
    );

    let pids_before = descendants(gw.pid());
    assert!(
        !pids_before.is_empty(),
        "the started server is a child of the gateway"
    );
    let deleted = gw.delete("/api/mcp_servers/made");
    assert_eq!(deleted.status, 200, "{}", deleted.text);
    gw.get("/api/mcp_servers/made")
        .assert_error(404, "McpServerNotFoundError");
    assert!(
        descendants(gw.pid()).is_empty(),
        "delete stops the process first: {:?}",
        descendants(gw.pid())
    );

    // The configured server cannot be changed or deleted over REST.
    gw.delete("/api/mcp_servers/demo")
        .assert_error(409, "ConflictError");
    gw.put(
        "/api/mcp_servers/demo",
        &json!({"mode": "subprocess", "command": ["x"]}),
    )
    .assert_error(409, "ConflictError");
}

#[test]
fn created_servers_survive_a_restart_of_the_gateway() {
    let mut first = gateway().config(NO_PROBE).start();
    let created = first.post(
        "/api/mcp_servers",
        &json!({"mcp_server_id": "kept", "mode": "subprocess", "command": fixture_command(&[]),
                "description": "persisted", "env": {"SECRET_TOKEN": "hunter2"}}),
    );
    assert_eq!(created.status, 201, "{}", created.text);
    first.signal_and_wait(libc::SIGTERM, Duration::from_secs(10));
    let data_dir = std::mem::replace(&mut first.data_dir, tempfile::tempdir().unwrap());
    drop(first);

    let second = gateway().config(NO_PROBE).data_dir(data_dir).start();
    let details = second.get("/api/mcp_servers/kept").json();
    assert_eq!(details["description"], "persisted");
    assert_eq!(
        details["env"],
        json!({"SECRET_TOKEN": "***"}),
        "env values are never shown"
    );
    assert_eq!(
        second.post_empty("/api/mcp_servers/kept/start").json()["state"],
        "ready"
    );
}

#[test]
fn logs_follow_the_four_rules() {
    let gw = gateway()
        .config(&config_with(&[
            fixture_server_yaml("chatty", &["--stderr-at-start", "1500"]),
            fixture_server_yaml("quiet", &[]),
        ]))
        .start();

    // Rule 3: registered but never started: an empty list.
    let never = gw.get("/api/mcp_servers/chatty/logs").json();
    assert_eq!(
        never,
        json!({"logs": [], "mcp_server_id": "chatty", "count": 0})
    );
    // Rule 4: not registered: 404.
    gw.get("/api/mcp_servers/nobody/logs")
        .assert_error(404, "McpServerNotFoundError");

    assert_eq!(gw.post_empty("/api/mcp_servers/chatty/start").status, 200);
    // 1500 numbered lines plus the fixture's own "fixture ready": wait for the last one.
    gw.wait_for(
        "/api/mcp_servers/chatty/logs?lines=1",
        Duration::from_secs(10),
        |body| body["logs"][0]["line"] == "fixture ready",
    );

    // Rule 1: default 100, the most recent, oldest first.
    let default = gw.get("/api/mcp_servers/chatty/logs").json();
    assert_eq!(default["count"], 100);
    let lines: Vec<&str> = default["logs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["line"].as_str().unwrap())
        .collect();
    assert_eq!(lines.len(), 100);
    assert_eq!(lines[0], "fixture start line 1401");
    assert_eq!(lines[98], "fixture start line 1499");
    assert_eq!(lines[99], "fixture ready");
    let entry = &default["logs"][0];
    assert_eq!(entry["mcp_server_id"], "chatty");
    assert_eq!(entry["stream"], "stderr");
    let timestamp = entry["timestamp"].as_str().unwrap();
    assert_eq!(
        timestamp.len(),
        "2026-11-21T14:03:07.123456".len(),
        "{timestamp}"
    );
    assert_eq!(&timestamp[10..11], "T");
    assert_eq!(&timestamp[19..20], ".");
    assert!(
        !timestamp.ends_with('Z') && !timestamp.contains('+'),
        "{timestamp}"
    );

    // The ring keeps 1000 of the 1501 lines; asking for more serves 1000.
    for asked in ["1000", "1500", "100000", "99999999999999999999"] {
        let body = gw
            .get(&format!("/api/mcp_servers/chatty/logs?lines={asked}"))
            .json();
        assert_eq!(body["count"], 1000, "lines={asked}");
        assert_eq!(
            body["logs"][0]["line"], "fixture start line 501",
            "lines={asked}"
        );
    }
    let one = gw.get("/api/mcp_servers/chatty/logs?lines=1").json();
    assert_eq!(one["count"], 1);

    // Bad values of `lines`: 422.
    for bad in ["0", "-1", "abc", "1.5", "", "1e3", "0x10"] {
        gw.get(&format!("/api/mcp_servers/chatty/logs?lines={bad}"))
            .assert_error(422, "ValidationError");
    }
}

#[test]
fn long_lines_are_truncated_and_invalid_utf8_is_replaced() {
    let fixture = fixture_binary().display().to_string();
    // A shell prelude writes a 20000-byte line and a line with invalid UTF-8, then becomes the
    // fixture (same stdin/stdout), so the server speaks MCP as usual.
    let script = format!(
        "head -c 20000 /dev/zero | tr '\\0' x >&2; echo >&2; printf 'bad \\377\\376 bytes\\n' >&2; \
         exec '{fixture}'"
    );
    let gw = gateway().config(NO_PROBE).start();
    let created = gw.post(
        "/api/mcp_servers",
        &json!({"mcp_server_id": "noisy", "mode": "subprocess", "command": ["sh", "-c", script]}),
    );
    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(
        gw.post_empty("/api/mcp_servers/noisy/start").json()["state"],
        "ready"
    );
    let body = gw.wait_for(
        "/api/mcp_servers/noisy/logs",
        Duration::from_secs(10),
        |body| body["count"].as_u64().unwrap() >= 3,
    );
    let long = body["logs"][0]["line"].as_str().unwrap();
    assert_eq!(
        long.len(),
        8192,
        "truncated to 8192 bytes including the mark"
    );
    assert!(long.ends_with("xxx..."));
    assert_eq!(body["logs"][1]["line"], "bad \u{fffd}\u{fffd} bytes");
}

#[test]
fn errors_answer_the_envelope() {
    let gw = gateway().config(NO_PROBE).start();
    let fixture = fixture_command(&[]);
    let good = json!({"mcp_server_id": "one", "mode": "subprocess", "command": fixture});
    assert_eq!(gw.post("/api/mcp_servers", &good).status, 201);

    // 409: a duplicate id.
    gw.post("/api/mcp_servers", &good)
        .assert_error(409, "McpServerAlreadyExistsError");

    // 404: every {id} route of an unknown server.
    for path in ["", "/tools", "/health", "/logs"] {
        gw.get(&format!("/api/mcp_servers/ghost{path}"))
            .assert_error(404, "McpServerNotFoundError");
    }
    for path in ["/start", "/stop"] {
        gw.post_empty(&format!("/api/mcp_servers/ghost{path}"))
            .assert_error(404, "McpServerNotFoundError");
    }
    gw.delete("/api/mcp_servers/ghost")
        .assert_error(404, "McpServerNotFoundError");
    gw.put(
        "/api/mcp_servers/ghost",
        &json!({"mode": "subprocess", "command": ["x"]}),
    )
    .assert_error(404, "McpServerNotFoundError");

    // 422: malformed JSON, wrong shapes and types, bad ids, out-of-range values.
    let bad_bodies = [
        ("{", "malformed JSON"),
        ("[]", "not an object"),
        ("\"text\"", "a string"),
        (r#"{"mode": "subprocess", "command": ["x"]}"#, "no id"),
        (
            r#"{"mcp_server_id": "a b", "mode": "subprocess", "command": ["x"]}"#,
            "bad id",
        ),
        (
            r#"{"mcp_server_id": "a__b", "mode": "subprocess", "command": ["x"]}"#,
            "id with __",
        ),
        (
            r#"{"mcp_server_id": 7, "mode": "subprocess", "command": ["x"]}"#,
            "numeric id",
        ),
        (
            r#"{"mcp_server_id": "x", "mode": "subprocess", "command": "x"}"#,
            "command not a list",
        ),
        (
            r#"{"mcp_server_id": "x", "mode": "subprocess", "command": []}"#,
            "empty command",
        ),
        (
            r#"{"mcp_server_id": "x", "mode": "warp", "command": ["x"]}"#,
            "unknown mode",
        ),
        (
            r#"{"mcp_server_id": "x", "mode": "subprocess", "command": ["x"], "idle_ttl_s": "x"}"#,
            "string ttl",
        ),
        (
            r#"{"mcp_server_id": "x", "mode": "subprocess", "command": ["x"], "idle_ttl_s": 0}"#,
            "ttl out of range",
        ),
        (
            r#"{"mcp_server_id": "x", "mode": "remote"}"#,
            "remote without endpoint",
        ),
        (
            r#"{"mcp_server_id": "x", "mode": "subprocess", "command": ["x"], "bogus": 1}"#,
            "unknown field",
        ),
    ];
    for (body, what) in bad_bodies {
        let answer = gw.post_raw("/api/mcp_servers", body);
        assert_eq!(answer.status, 422, "{what}: {}", answer.text);
        answer.assert_error(422, "ValidationError");
    }
    gw.get("/api/mcp_servers?state=running")
        .assert_error(422, "ValidationError");

    // Unknown routes and methods also answer the envelope.
    gw.get("/api/nothing-here")
        .assert_error(404, "NotFoundError");
    gw.delete("/api/mcp_servers")
        .assert_error(405, "MethodNotAllowedError");
}

#[test]
fn concurrent_starts_share_one_process() {
    let gw = gateway()
        .config(&config_with(&[fixture_server_yaml("shared", &[])]))
        .start();
    let url = gw.url("/api/mcp_servers/shared/start");
    let handles: Vec<_> = (0..12)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .build()
                    .new_agent();
                let mut response = agent.post(&url).send_empty().unwrap();
                (
                    response.status().as_u16(),
                    response.body_mut().read_to_string().unwrap(),
                )
            })
        })
        .collect();
    for handle in handles {
        let (status, body) = handle.join().unwrap();
        assert_eq!(status, 200, "{body}");
    }
    let health = gw.get("/api/mcp_servers/shared/health").json();
    assert_eq!(health["total_starts"], 1, "{health}");
    let logs = gw.get("/api/mcp_servers/shared/logs").json();
    let ready_lines = logs["logs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["line"] == "fixture ready")
        .count();
    assert_eq!(ready_lines, 1, "one process was started: {logs}");
    assert_eq!(descendants(gw.pid()).len(), 1);
}

#[test]
fn a_server_that_crashes_becomes_dead_with_an_event() {
    let fixture = fixture_binary().display().to_string();
    // The shell becomes the fixture (exec keeps its pid, $$); a background subshell in the same
    // process group kills it with SIGKILL a moment after the start.
    let script = format!("(sleep 1; kill -9 $$) & exec '{fixture}'");
    let gw = gateway().config(NO_PROBE).start();
    let created = gw.post(
        "/api/mcp_servers",
        &json!({"mcp_server_id": "fragile", "mode": "subprocess", "command": ["sh", "-c", script]}),
    );
    assert_eq!(created.status, 201);
    assert_eq!(
        gw.post_empty("/api/mcp_servers/fragile/start").json()["state"],
        "ready"
    );
    let health = gw.wait_for(
        "/api/mcp_servers/fragile/health",
        Duration::from_secs(15),
        |h| h["state"] == "dead",
    );
    assert_eq!(health["healthy"], false);
    assert_eq!(health["consecutive_failures"], 1);
    assert!(
        health["last_error"]
            .as_str()
            .unwrap()
            .contains("ended unexpectedly"),
        "{health}"
    );
    let stderr = gw.stderr();
    assert!(
        stderr.contains("McpServerCrashed"),
        "the crash is an event: {stderr}"
    );
    assert!(
        stderr.contains(r#""from":"ready","to":"dead""#),
        "the transition is an event: {stderr}"
    );
}

#[test]
fn a_server_that_exits_at_start_is_dead_and_its_stderr_is_kept() {
    let gw = gateway()
        .config(&config_with(&[fixture_server_yaml(
            "quitter",
            &["--exit-at-start", "3"],
        )]))
        .start();
    let message = gw
        .post_empty("/api/mcp_servers/quitter/start")
        .assert_error(503, "McpServerUnavailableError");
    assert!(message.contains("quitter"), "{message}");
    let health = gw.get("/api/mcp_servers/quitter/health").json();
    assert_eq!(health["state"], "dead");
    assert_eq!(health["consecutive_failures"], 1);
    let logs = gw.get("/api/mcp_servers/quitter/logs").json();
    assert!(
        logs["logs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["line"] == "fixture exiting at start"),
        "{logs}"
    );
    assert!(gw.stderr().contains("McpServerStartFailed"));
}

#[test]
fn a_command_that_does_not_exist_is_a_clear_error() {
    let gw = gateway().config(NO_PROBE).start();
    let created = gw.post(
        "/api/mcp_servers",
        &json!({"mcp_server_id": "typo", "mode": "subprocess",
                "command": ["/nonexistent/definitely-not-a-server"]}),
    );
    assert_eq!(created.status, 201);
    let message = gw
        .post_empty("/api/mcp_servers/typo/start")
        .assert_error(503, "McpServerUnavailableError");
    assert!(message.contains("was not found"), "{message}");
    assert_eq!(
        gw.get("/api/mcp_servers/typo/health").json()["state"],
        "dead"
    );
}

#[test]
fn no_process_survives_a_sigterm_of_the_gateway() {
    let fixture = fixture_binary().display().to_string();
    // One plain server, and one whose shell leaves a grandchild behind in its process group.
    let gw_config = format!(
        "{NO_PROBE}mcp_servers:\n{}  family:\n    mode: subprocess\n    command: [sh, -c, \"sleep 1000 & exec '{fixture}'\"]\n",
        fixture_server_yaml("plain", &[]),
    );
    let mut gw = gateway().config(&gw_config).start();
    for id in ["plain", "family"] {
        let started = gw.post_empty(&format!("/api/mcp_servers/{id}/start"));
        assert_eq!(started.status, 200, "{}", started.text);
    }
    let spawned = descendants(gw.pid());
    assert!(
        spawned.len() >= 3,
        "two servers and a grandchild: {spawned:?}"
    );
    let status = gw.signal_and_wait(libc::SIGTERM, Duration::from_secs(15));
    assert!(status.success(), "a clean exit on SIGTERM: {status:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while spawned.iter().any(|pid| process_alive(*pid)) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let survivors: Vec<i32> = spawned
        .into_iter()
        .filter(|pid| process_alive(*pid))
        .collect();
    assert!(survivors.is_empty(), "orphans left behind: {survivors:?}");
}

#[test]
fn sigint_stops_the_gateway_cleanly_too() {
    let mut gw = gateway()
        .config(&config_with(&[fixture_server_yaml("plain", &[])]))
        .start();
    assert_eq!(gw.post_empty("/api/mcp_servers/plain/start").status, 200);
    let spawned = descendants(gw.pid());
    assert_eq!(spawned.len(), 1);
    let status = gw.signal_and_wait(libc::SIGINT, Duration::from_secs(15));
    assert!(status.success(), "{status:?}");
    std::thread::sleep(Duration::from_millis(100));
    assert!(!process_alive(spawned[0]));
}

#[test]
fn probes_and_metrics_answer() {
    let gw = gateway()
        .config(&config_with(&[fixture_server_yaml("demo", &[])]))
        .start();
    assert_eq!(gw.get("/health/live").status, 200);
    assert_eq!(gw.get("/health/startup").json()["status"], "started");
    let ready = gw.get("/health/ready").json();
    assert_eq!(ready["status"], "ready");
    let metrics = gw.get("/metrics");
    assert_eq!(metrics.status, 200);
    assert!(
        metrics.content_type.starts_with("text/plain"),
        "{}",
        metrics.content_type
    );
    assert!(
        metrics.text.contains("mcpgw_mcp_servers{state=\"cold\"} 1"),
        "{}",
        metrics.text
    );
    let openapi = gw.get("/api/openapi.json").json();
    assert!(openapi["openapi"].as_str().unwrap().starts_with("3.1"));
    assert!(openapi["paths"]["/api/mcp_servers/{id}/logs"].is_object());
    let docs = gw.get("/docs/");
    assert_eq!(docs.status, 200);
    assert!(
        docs.text.to_lowercase().contains("swagger"),
        "{}",
        &docs.text[..200.min(docs.text.len())]
    );
}

#[test]
fn trailing_slashes_on_collections_answer_without_redirects() {
    let gw = gateway().config(NO_PROBE).start();
    let plain = gw.get("/api/mcp_servers");
    let slashed = gw.get("/api/mcp_servers/");
    assert_eq!(plain.status, 200);
    assert_eq!(slashed.status, 200);
    assert_eq!(plain.json(), slashed.json());
    let created = gw.post(
        "/api/mcp_servers/",
        &json!({"mcp_server_id": "slash", "mode": "subprocess", "command": fixture_command(&[])}),
    );
    assert_eq!(created.status, 201, "{}", created.text);
}

#[test]
fn a_wrong_json_type_anywhere_in_a_body_answers_422_naming_the_field() {
    let gw = gateway().config(NO_PROBE).start();
    let fixture = fixture_command(&[]);
    // (body, the field the message must start with); each value has the wrong JSON type.
    let cases = [
        // A number inside the command list: refused, not turned into the text "7".
        (
            json!({"mcp_server_id": "typed", "mode": "subprocess", "command": ["python3", 7]}),
            "command[1]: ",
        ),
        // A number where a string belongs.
        (
            json!({"mcp_server_id": "typed", "mode": "subprocess", "command": fixture,
                   "env": {"PORT": 8080}}),
            "env.PORT: ",
        ),
        (
            json!({"mcp_server_id": "typed", "mode": "docker", "image": "repo/img:1",
                   "cpus": 1.5}),
            "cpus: ",
        ),
        // A string where an integer belongs.
        (
            json!({"mcp_server_id": "typed", "mode": "subprocess", "command": fixture,
                   "idle_ttl_s": "300"}),
            "idle_ttl_s: ",
        ),
        // An object where an array belongs.
        (
            json!({"mcp_server_id": "typed", "mode": "subprocess", "command": {"0": "python3"}}),
            "command: ",
        ),
        // A string where a boolean belongs.
        (
            json!({"mcp_server_id": "typed", "mode": "docker", "image": "repo/img:1",
                   "read_only": "false"}),
            "read_only: ",
        ),
    ];
    for (body, field) in &cases {
        let message = gw
            .post("/api/mcp_servers", body)
            .assert_error(422, "ValidationError");
        assert!(message.starts_with(field), "{body}: {message}");
    }
    // Nothing was registered, under any spelling.
    assert_eq!(gw.get("/api/mcp_servers").json()["mcp_servers"], json!([]));

    // An update is typed as strictly as a create.
    let good = json!({"mcp_server_id": "typed", "mode": "subprocess", "command": fixture});
    assert_eq!(gw.post("/api/mcp_servers", &good).status, 201);
    let message = gw
        .put(
            "/api/mcp_servers/typed",
            &json!({"mode": "subprocess", "command": [fixture[0], true]}),
        )
        .assert_error(422, "ValidationError");
    assert!(message.starts_with("command[1]: "), "{message}");
    let details = gw.get("/api/mcp_servers/typed").json();
    assert_eq!(details["command"], fixture, "{details}");

    // Group bodies are as strict: a weight as text, a count as a list.
    for (path, body, field) in [
        (
            "/api/groups",
            json!({"group_id": "typed-pool", "members": [{"id": "typed", "weight": "2"}]}),
            "members[0].weight: ",
        ),
        (
            "/api/groups",
            json!({"group_id": "typed-pool", "min_healthy": [1]}),
            "min_healthy: ",
        ),
    ] {
        let message = gw.post(path, &body).assert_error(422, "ValidationError");
        assert!(message.starts_with(field), "{path} {body}: {message}");
    }
}

/// A start registers every configured server; the log sums them up in one line (a thousand
/// servers would otherwise mean a thousand lines at every start, most of the start-up's work),
/// while a server created over the API is logged on its own as before.
#[test]
fn configured_registrations_are_summed_up_in_the_log_and_a_created_server_is_logged() {
    let gw = gateway()
        .config(&config_with(&[
            fixture_server_yaml("first", &[]),
            fixture_server_yaml("second", &[]),
        ]))
        .start();
    let created =
        json!({"mcp_server_id": "third", "mode": "subprocess", "command": fixture_command(&[])});
    assert_eq!(gw.post("/api/mcp_servers", &created).status, 201);
    let logged_registrations = || {
        gw.stderr()
            .lines()
            .filter(|line| line.contains("event_type=\"McpServerRegistered\""))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while logged_registrations().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let registrations = logged_registrations();
    assert_eq!(registrations.len(), 1, "{registrations:?}");
    assert!(
        registrations[0].contains("\"mcp_server_id\":\"third\"")
            && registrations[0].contains("\"origin\":\"api\""),
        "{registrations:?}"
    );
    let stderr = gw.stderr();
    assert!(
        stderr.contains("mcp servers registered configured=2"),
        "{stderr}"
    );
    // All three are registered all the same.
    let list = gw.get("/api/mcp_servers").json();
    assert_eq!(list["mcp_servers"].as_array().unwrap().len(), 3);
}
