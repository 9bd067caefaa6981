//! End-to-end tests of what wins over the background tool probe, and of calls that name tools
//! the gateway has not learned yet: the real binary and the testkit's fixture server, whose
//! start is held with `--wait-for-file` so that every step happens while the probe is under way.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::peers::spawn_python_client;
use support::{RunningGateway, fixture_binary, fixture_server_yaml, gateway};

const WAIT: Duration = Duration::from_secs(30);

/// What the manager logs (at debug) when an explicit start reaches it; it joins any start under
/// way in the same step, without waiting in between.
const START_REQUESTED: &str = "explicit start of an mcp server requested";
/// What the catalogue logs (at debug) before it starts a server to learn the tools a call names.
const LEARNING: &str = "starting to learn the tools a call names";

/// A gate file for fixtures started with `--wait-for-file`: they answer nothing until it exists.
struct Gate {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Gate {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("open");
        Self { _dir: dir, path }
    }

    fn arg(&self) -> &str {
        self.path.to_str().unwrap()
    }

    fn open(&self) {
        std::fs::write(&self.path, b"").unwrap();
    }
}

/// A fixture server held in its start until `gate` opens.
fn gated_fixture_yaml(id: &str, gate: &Gate) -> String {
    fixture_server_yaml(id, &["--wait-for-file", gate.arg()])
}

fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn state(gw: &RunningGateway, id: &str) -> Value {
    let answer = gw.get(&format!("/api/mcp_servers/{id}"));
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.json()["state"].clone()
}

/// Waits until the background probe is starting `id` (it stays so until the gate opens).
fn wait_for_the_probe(gw: &RunningGateway, id: &str) {
    gw.wait_for(&format!("/api/mcp_servers/{id}"), WAIT, |server| {
        server["state"] == "initializing"
    });
}

/// Starts `id` over REST while the probe's start of it is held, lets the start finish, and
/// checks that the start answers ready and that the server is still ready once the probe is
/// over.
fn start_during_the_probe(gw: &RunningGateway, id: &str, gate: &Gate) {
    wait_for_the_probe(gw, id);
    let answer = std::thread::scope(|scope| {
        let start = scope.spawn(|| gw.post_empty(&format!("/api/mcp_servers/{id}/start")));
        wait_until("the start to reach the manager", || {
            gw.stderr().contains(START_REQUESTED)
        });
        gate.open();
        start.join().unwrap()
    });
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.json()["state"], "ready", "{}", answer.text);
    // A listing waits for the probes under way, so the probe has decided by the time it answers.
    let tools = gw.mcp_tool_names();
    assert!(tools.contains(&format!("{id}__echo")), "{tools:?}");
    assert_eq!(state(gw, id), "ready");
    let server = gw.get(&format!("/api/mcp_servers/{id}")).json();
    assert_eq!(
        server["health"]["total_starts"], 1,
        "one start, shared: {server}"
    );
}

fn debug_logs() -> &'static str {
    "info,mcpgw_core=debug,mcpgw_gateway=debug"
}

#[test]
fn create_then_start_answers_ready_and_the_server_stays_ready() {
    let gate = Gate::new();
    let gw = gateway().env("MCP_LOG", debug_logs()).start();
    let fixture = fixture_binary().display().to_string();
    let created = gw.post(
        "/api/mcp_servers",
        &json!({"mcp_server_id": "fx", "mode": "subprocess",
                "command": [fixture, "--wait-for-file", gate.arg()]}),
    );
    assert_eq!(created.status, 201, "{}", created.text);
    start_during_the_probe(&gw, "fx", &gate);
}

#[test]
fn a_configured_server_started_while_the_startup_probe_runs_stays_ready() {
    let gate = Gate::new();
    let gw = gateway()
        .env("MCP_LOG", debug_logs())
        .config(&format!(
            "mcp_servers:\n{}",
            gated_fixture_yaml("fx", &gate)
        ))
        .start();
    start_during_the_probe(&gw, "fx", &gate);
}

/// The `structuredContent` sum of a fixture `add` answered over `/mcp`.
fn sum_of(answer: &Value) -> &Value {
    &answer["result"]["structuredContent"]["sum"]
}

#[test]
fn a_call_right_after_the_gateway_started_waits_for_the_probe_and_succeeds() {
    let gate = Gate::new();
    let gw = gateway()
        .config(&format!(
            "mcp_servers:\n{}",
            gated_fixture_yaml("fx", &gate)
        ))
        .start();
    wait_for_the_probe(&gw, "fx");
    assert!(gw.mcp_tool_names().is_empty(), "nothing is known yet");
    let answer = std::thread::scope(|scope| {
        let call = scope.spawn(|| gw.mcp_call_tool("fx__add", json!({"a": 2, "b": 3})));
        // The call either waits for the start (in flight on the server) or, had it not
        // waited, has its answer already; either way it reached the gateway before the probe
        // could finish.
        wait_until("the call to reach the server", || {
            call.is_finished()
                || gw.get("/api/mcp_servers/fx").json()["health"]["in_flight_calls"]
                    .as_u64()
                    .is_some_and(|calls| calls >= 1)
        });
        gate.open();
        call.join().unwrap()
    });
    assert_eq!(sum_of(&answer), 5.0, "{answer}");
    assert_eq!(state(&gw, "fx"), "ready", "the call's server keeps running");
}

#[test]
fn with_probing_off_a_cold_servers_tools_are_learned_by_the_first_call() {
    let gw = gateway()
        .config(&format!(
            "probe_tools: false\nmcp_servers:\n{}{}",
            fixture_server_yaml("fx", &[]),
            fixture_server_yaml("other", &[])
        ))
        .start();
    assert!(gw.mcp_tool_names().is_empty(), "nothing is known yet");
    assert_eq!(state(&gw, "fx"), "cold");
    let answer = gw.mcp_call_tool("fx__add", json!({"a": 2, "b": 3}));
    assert_eq!(sum_of(&answer), 5.0, "{answer}");
    assert_eq!(state(&gw, "fx"), "ready");

    // A tool the server turns out not to have is unknown, after the start that learned so.
    let unknown = gw.mcp_call_tool("other__no_such_tool", json!({}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert_eq!(
        state(&gw, "other"),
        "ready",
        "it was started to learn its tools"
    );
    let tools = gw.mcp_tool_names();
    for expected in ["fx__add", "other__add"] {
        assert!(tools.iter().any(|name| name == expected), "{tools:?}");
    }
    // And a name of no server at all starts nothing.
    let nobody = gw.mcp_call_tool("nobody__add", json!({"a": 1, "b": 1}));
    assert_eq!(nobody["error"]["code"], -32602, "{nobody}");
}

#[test]
fn a_groups_tools_are_learned_by_the_first_call_through_it() {
    let gw = gateway()
        .config(&format!(
            "probe_tools: false\nmcp_servers:\n{}{}  pool:\n    mode: group\n    strategy: round_robin\n    members: [{{id: a}}, {{id: b}}]\n",
            fixture_server_yaml("a", &[]),
            fixture_server_yaml("b", &[])
        ))
        .start();
    assert!(gw.mcp_tool_names().is_empty(), "nothing is known yet");
    let answer = gw.mcp_call_tool("pool__add", json!({"a": 2, "b": 3}));
    assert_eq!(sum_of(&answer), 5.0, "{answer}");
    let unknown = gw.mcp_call_tool("pool__no_such_tool", json!({}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let hidden = gw.mcp_call_tool("a__add", json!({"a": 1, "b": 1}));
    assert_eq!(
        hidden["error"]["code"], -32602,
        "members are reached through their group only: {hidden}"
    );
    let tools = gw.mcp_tool_names();
    assert!(tools.iter().any(|name| name == "pool__add"), "{tools:?}");
}

#[test]
fn a_stdio_client_that_calls_right_after_connecting_gets_its_answer() {
    let gate = Gate::new();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gateway.yaml");
    std::fs::write(
        &config,
        format!("mcp_servers:\n{}", gated_fixture_yaml("fx", &gate)),
    )
    .unwrap();
    let gateway_stderr = dir.path().join("gateway.stderr");
    let data_dir = dir.path().join("data");
    let gateway_binary = support::gateway_binary().display().to_string();
    let mut client = spawn_python_client(
        "stdio_client.py",
        &[
            "--no-list",
            "--call",
            "fx__add",
            r#"{"a": 2, "b": 3}"#,
            "--env",
            &format!("MCP_LOG={}", debug_logs()),
            "--server-stderr",
            gateway_stderr.to_str().unwrap(),
            "--",
            &gateway_binary,
            "--config",
            config.to_str().unwrap(),
            "--data-dir",
            data_dir.to_str().unwrap(),
        ]
        .map(str::to_owned),
    );
    // The probe holds the server in its start; the call reaches the gateway meanwhile: it
    // either waits to learn the tools or, had it not waited, the client is done already.
    let logged =
        |path: &Path| std::fs::read_to_string(path).is_ok_and(|written| written.contains(LEARNING));
    wait_until("the call to reach the gateway", || {
        client.has_exited() || logged(&gateway_stderr)
    });
    gate.open();
    let run = client.wait();
    let call = &run["calls"][0];
    assert_eq!(call["name"], "fx__add", "{run}");
    assert!(call["error"].is_null(), "{run}");
    assert_eq!(call["structured"]["sum"], 5.0, "{run}");
}
