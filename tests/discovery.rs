//! End-to-end tests of discovery: the real binary with `docker` sources on a real engine
//! (podman's Docker Engine API socket; the tests start labelled containers of the test image
//! with the podman CLI) and `filesystem` sources on temporary directories, driven over
//! `/api/discovery/*`, checked through the server list, calls through `/mcp` and the event
//! stream.
//!
//! Every test fails, saying why, when the engine or the image is missing: it never skips.
//! Names carry the test's name and the process id, because a docker source sees every labelled
//! container on the engine, including those of tests running at the same time; assertions
//! therefore look for their own names and never count everything a source found.
//!
//! Bad input tried: labels with an unknown mode, an http mode without a port, a name with `__`;
//! definition files without a command, with an unknown mode and with broken YAML; approving and
//! rejecting unknown names; scanning a disabled, a deleted and an unreachable source; updating
//! and deleting a source of the configuration file; registering a duplicate source and one of
//! an unknown type.

mod support;

use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::engine::{
    self, ContainerGuard, OWNER_LABEL, TEST_IMAGE, containers_of_server, instance_id,
    require_engine, run_labelled, stop_now, unique, wait_until,
};
use support::{RunningGateway, fixture_binary, fixture_server_yaml, gateway};
use tungstenite::{Message, WebSocket};

const SOON: Duration = Duration::from_secs(20);

type Client = WebSocket<TcpStream>;

// --- configuration ---------------------------------------------------------------------------

/// A docker source on the test engine; `removal_grace_s` is small so that removals are quick.
fn docker_source(id: &str, mode: &str) -> String {
    format!(
        "    - {{id: {id}, type: docker, mode: {mode}, config: {{socket_path: \"{}\", removal_grace_s: 1}}}}\n",
        engine::socket_path()
    )
}

fn files_source(id: &str, mode: &str, dir: &Path) -> String {
    format!(
        "    - {{id: {id}, type: filesystem, mode: {mode}, config: {{path: \"{}\", watch_interval_ms: 200, removal_grace_s: 1}}}}\n",
        dir.display()
    )
}

fn discovery_yaml(refresh_interval_s: u64, sources: &[String]) -> String {
    format!(
        "discovery:\n  refresh_interval_s: {refresh_interval_s}\n  sources:\n{}",
        sources.join("")
    )
}

fn start(yaml: &str) -> RunningGateway {
    require_engine();
    gateway()
        .config(yaml)
        .env("DOCKER_HOST", &engine::docker_host())
        .start()
}

fn restart(gw: RunningGateway) -> RunningGateway {
    let mut gw = gw;
    let yaml = std::fs::read_to_string(gw.config_path.as_ref().unwrap()).unwrap();
    let status = gw.signal_and_wait(libc::SIGTERM, SOON);
    assert!(status.success(), "{status:?}");
    let data_dir = std::mem::replace(&mut gw.data_dir, tempfile::tempdir().unwrap());
    drop(gw);
    gateway()
        .config(&yaml)
        .env("DOCKER_HOST", &engine::docker_host())
        .data_dir(data_dir)
        .start()
}

/// The labels of a discoverable container named `name` (stdio unless `extra` says otherwise).
fn labels<'a>(name: &'a str, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut labels = vec![("mcp.gateway.enabled", "true"), ("mcp.gateway.name", name)];
    labels.extend_from_slice(extra);
    labels
}

/// Starts a labelled container that stays up (the fixture serving HTTP inside it); the name of
/// the container is the candidate's name with a suffix, so the label, not the container name,
/// must be what names the candidate.
fn run_discoverable(name: &str, extra: &[(&str, &str)]) -> String {
    let container = format!("{name}-box");
    run_labelled(&container, &labels(name, extra), &["--http", "8080"]);
    container
}

/// Writes a definitions file in one step, so that a watcher never reads half of it.
fn write_definition(dir: &Path, file: &str, yaml: &str) {
    let staging = dir.join(format!(".{file}.partial"));
    std::fs::write(&staging, yaml).unwrap();
    std::fs::rename(&staging, dir.join(file)).unwrap();
}

/// One definition of a subprocess fixture server, the file's whole content.
fn fixture_definition(args: &[&str]) -> String {
    let mut command = vec![serde_json::to_string(&fixture_binary().display().to_string()).unwrap()];
    command.extend(args.iter().map(|arg| serde_json::to_string(arg).unwrap()));
    format!("mode: subprocess\ncommand: [{}]\n", command.join(", "))
}

// --- the API -----------------------------------------------------------------------------------

fn entries(gw: &RunningGateway, list: &str) -> Vec<Value> {
    let answer = gw.get(&format!("/api/discovery/{list}"));
    assert_eq!(answer.status, 200, "GET {list}: {}", answer.text);
    answer.json()[list]
        .as_array()
        .unwrap_or_else(|| panic!("no `{list}` array: {}", answer.text))
        .clone()
}

fn find(entries: &[Value], name: &str) -> Option<Value> {
    entries.iter().find(|entry| entry["name"] == name).cloned()
}

#[track_caller]
fn wait_pending(gw: &RunningGateway, name: &str) -> Value {
    let mut found = None;
    wait_until(SOON, &format!("{name} is pending"), || {
        found = find(&entries(gw, "pending"), name);
        found.is_some()
    });
    found.unwrap()
}

#[track_caller]
fn wait_quarantined(gw: &RunningGateway, name: &str) -> Value {
    let mut found = None;
    wait_until(SOON, &format!("{name} is quarantined"), || {
        found = find(&entries(gw, "quarantined"), name);
        found.is_some()
    });
    found.unwrap()
}

#[track_caller]
fn scan(gw: &RunningGateway, source: &str) -> Value {
    let answer = gw.post_empty(&format!("/api/discovery/sources/{source}/scan"));
    assert_eq!(answer.status, 200, "scan of {source}: {}", answer.text);
    let body = answer.json();
    assert_eq!(body["source_id"], source, "{body}");
    for count in ["found", "pending", "quarantined"] {
        assert!(body[count].is_u64(), "{count} is a count: {body}");
    }
    body
}

#[track_caller]
fn approve(gw: &RunningGateway, name: &str) -> Value {
    let answer = gw.post_empty(&format!("/api/discovery/approve/{name}"));
    assert_eq!(answer.status, 200, "approve {name}: {}", answer.text);
    let body = answer.json();
    assert_eq!(body["name"], name, "{body}");
    assert_eq!(body["mcp_server_id"], name, "{body}");
    assert_eq!(body["approved"], true, "{body}");
    body
}

fn server(gw: &RunningGateway, id: &str) -> Option<Value> {
    let answer = gw.get(&format!("/api/mcp_servers/{id}"));
    match answer.status {
        200 => Some(answer.json()),
        404 => None,
        _ => panic!("GET server {id}: {answer:?}"),
    }
}

fn source(gw: &RunningGateway, id: &str) -> Option<Value> {
    let answer = gw.get("/api/discovery/sources");
    assert_eq!(answer.status, 200, "{}", answer.text);
    answer.json()["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|source| source["source_id"] == id)
        .cloned()
}

/// The text of a successful `tools/call`; fails on an error.
#[track_caller]
fn call_text(gw: &RunningGateway, tool: &str, arguments: Value) -> String {
    let answer = gw.mcp_call_tool(tool, arguments);
    let result = &answer["result"];
    assert!(
        result.is_object() && result["isError"] != true,
        "{tool} failed: {answer}\ngateway stderr:\n{}",
        gw.stderr()
    );
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{tool} answered no text: {answer}"))
        .to_owned()
}

#[track_caller]
fn assert_echoes(gw: &RunningGateway, server: &str) {
    // An approved server's tools are listed once the gateway's probe has run it.
    let tool = format!("{server}__echo");
    wait_until(SOON, &format!("tools/list offers {tool}"), || {
        gw.mcp_tool_names().contains(&tool)
    });
    let text = format!("hello {server}");
    assert_eq!(call_text(gw, &tool, json!({"text": text})), text);
}

fn log_lines(gw: &RunningGateway, id: &str) -> Vec<String> {
    gw.get(&format!("/api/mcp_servers/{id}/logs?lines=1000"))
        .json()["logs"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|entry| entry["line"].as_str().map(str::to_owned))
        .collect()
}

// --- the event stream ------------------------------------------------------------------------

fn connect(gw: &RunningGateway, event_types: &[&str]) -> Client {
    let address = gw.base_url.trim_start_matches("http://");
    let stream = TcpStream::connect(address).unwrap();
    let url = format!(
        "ws://{address}/api/ws/events?event_types={}",
        event_types.join(",")
    );
    let (client, response) = tungstenite::client(url.as_str(), stream)
        .unwrap_or_else(|error| panic!("the handshake of {url} fails: {error}"));
    assert_eq!(response.status().as_u16(), 101);
    client
}

/// Reads events until one satisfies `wanted`, skipping the others; fails after [`SOON`].
#[track_caller]
fn expect_event(client: &mut Client, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + SOON;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "no event within {SOON:?}: {what}");
        client.get_mut().set_read_timeout(Some(left)).unwrap();
        let frame = client
            .read()
            .unwrap_or_else(|error| panic!("waiting for {what}: {error}"));
        if let Message::Text(text) = frame {
            let event: Value = serde_json::from_str(text.as_str()).unwrap();
            if wanted(&event) {
                return event;
            }
        }
    }
}

fn is(event: &Value, event_type: &str, field: &str, value: &str) -> bool {
    event["event_type"] == event_type && event[field] == value
}

// --- tests -------------------------------------------------------------------------------------

#[test]
fn without_a_discovery_block_every_discovery_route_answers_404() {
    let gw = gateway().config("mcp_servers: {}\n").start();
    let source = json!({"source_type": "filesystem", "mode": "additive", "enabled": true, "config": {"path": "/tmp"}});
    let answers = [
        ("GET sources", gw.get("/api/discovery/sources")),
        ("POST sources", gw.post("/api/discovery/sources", &source)),
        ("PUT source", gw.put("/api/discovery/sources/s", &source)),
        ("DELETE source", gw.delete("/api/discovery/sources/s")),
        ("scan", gw.post_empty("/api/discovery/sources/s/scan")),
        (
            "enable",
            gw.put("/api/discovery/sources/s/enable", &json!({"enabled": true})),
        ),
        ("pending", gw.get("/api/discovery/pending")),
        ("quarantined", gw.get("/api/discovery/quarantined")),
        ("approve", gw.post_empty("/api/discovery/approve/x")),
        ("reject", gw.post_empty("/api/discovery/reject/x")),
    ];
    for (route, answer) in answers {
        assert_eq!(answer.status, 404, "{route}: {answer:?}");
        let body = answer.json();
        assert_eq!(body["status_code"], 404, "{route}: {body}");
        assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
    }

    // The same routes exist once discovery is on, even with no source.
    let on = gateway()
        .config("discovery: {refresh_interval_s: 60}\n")
        .start();
    assert_eq!(
        on.get("/api/discovery/sources").json(),
        json!({"sources": []})
    );
    assert_eq!(
        on.get("/api/discovery/pending").json(),
        json!({"pending": []})
    );
    assert_eq!(
        on.get("/api/discovery/quarantined").json(),
        json!({"quarantined": []})
    );
    on.post_empty("/api/discovery/approve/x")
        .assert_error(404, "DiscoveredServerNotFoundError");
}

#[test]
fn a_labelled_container_is_pending_then_approved_as_a_docker_server_whose_tools_answer() {
    let name = unique("disc-stdio");
    let box_name = format!("{name}-box");
    let _guard = ContainerGuard::new().name(&box_name).server(&name);
    let gw = start(&discovery_yaml(3600, &[docker_source("dock", "additive")]));
    let mut events = connect(
        &gw,
        &[
            "DiscoveryServerPending",
            "DiscoveryScanCompleted",
            "DiscoveryServerApproved",
        ],
    );
    let listed = source(&gw, "dock").expect("the source of the file is listed");
    assert_eq!(listed["source_type"], "docker", "{listed}");
    assert_eq!(listed["mode"], "additive", "{listed}");
    assert_eq!(listed["enabled"], true, "{listed}");
    assert_eq!(listed["config"]["socket_path"], engine::socket_path());

    // The command label is a whitespace-separated string: the arguments of the new container.
    run_discoverable(&name, &[("mcp.gateway.command", "--stderr-at-start 2")]);
    let scanned = scan(&gw, "dock");
    assert!(scanned["found"].as_u64().unwrap() >= 1, "{scanned}");
    assert!(scanned["pending"].as_u64().unwrap() >= 1, "{scanned}");
    assert!(
        source(&gw, "dock").unwrap()["last_scan_at"].is_string(),
        "the scan's time is recorded"
    );

    let pending = find(&entries(&gw, "pending"), &name).unwrap_or_else(|| {
        panic!(
            "{name} pending after the scan: {:?}",
            entries(&gw, "pending")
        )
    });
    assert_eq!(pending["source_id"], "dock", "{pending}");
    assert_eq!(pending["mode"], "docker", "{pending}");
    assert!(pending["discovered_at"].is_string(), "{pending}");
    let definition = &pending["definition"];
    assert_eq!(definition["mode"], "docker", "{definition}");
    assert_eq!(definition["image"], TEST_IMAGE, "{definition}");
    let arguments = if definition["args"].is_array() {
        &definition["args"]
    } else {
        &definition["command"]
    };
    assert_eq!(
        *arguments,
        json!(["--stderr-at-start", "2"]),
        "{definition}"
    );
    assert!(
        server(&gw, &name).is_none(),
        "not registered before approval"
    );
    expect_event(&mut events, "the pending event", |event| {
        is(event, "DiscoveryServerPending", "name", &name) && event["source_id"] == "dock"
    });
    expect_event(&mut events, "the completed scan", |event| {
        is(event, "DiscoveryScanCompleted", "source_id", "dock")
    });

    let approved = approve(&gw, &name);
    assert_eq!(approved["source_id"], "dock", "{approved}");
    assert_eq!(approved["replaced"], false, "{approved}");
    expect_event(&mut events, "the approval", |event| {
        is(event, "DiscoveryServerApproved", "mcp_server_id", &name)
    });
    assert!(find(&entries(&gw, "pending"), &name).is_none());
    let registered = server(&gw, &name).expect("the approved server is registered");
    assert_eq!(registered["mode"], "docker", "{registered}");

    assert_echoes(&gw, &name);
    wait_until(
        SOON,
        "the label's arguments reached the new container",
        || log_lines(&gw, &name).contains(&"fixture start line 1".to_owned()),
    );
    // A container of its own, run by this gateway, not the discovered one (the probe's
    // container may still be on its way out).
    wait_until(SOON, "one container runs for the server", || {
        containers_of_server(&name).len() == 1
    });
    let containers = containers_of_server(&name);
    assert_eq!(containers.len(), 1, "{containers:?}");
    assert_ne!(containers[0].name, box_name);
    assert_eq!(
        containers[0]
            .labels
            .get(OWNER_LABEL)
            .and_then(Value::as_str),
        Some(instance_id(gw.data_dir.path()).as_str())
    );
    // Approving again: it is no longer pending.
    gw.post_empty(&format!("/api/discovery/approve/{name}"))
        .assert_error(404, "DiscoveredServerNotFoundError");
}

/// An `http` candidate becomes a remote server at `http://<container name>:<port><path>`. That
/// name resolves on the container network, where a gateway that runs in a container next to
/// its servers lives; the gateway under test runs on the host, so this test checks the
/// definition and the registration, and the stdio test above proves the tools answer.
#[test]
fn an_http_labelled_container_becomes_a_remote_server_at_its_name_port_and_path() {
    let name = unique("disc-http");
    let box_name = format!("{name}-box");
    let defaulted = unique("disc-http-default");
    let _guard = ContainerGuard::new()
        .name(&box_name)
        .name(&format!("{defaulted}-box"))
        .server(&name);
    let gw = start(&discovery_yaml(3600, &[docker_source("dock", "additive")]));
    run_discoverable(
        &name,
        &[
            ("mcp.gateway.mode", "http"),
            ("mcp.gateway.port", "8080"),
            ("mcp.gateway.path", "/rpc"),
        ],
    );
    run_discoverable(
        &defaulted,
        &[("mcp.gateway.mode", "http"), ("mcp.gateway.port", "9000")],
    );
    scan(&gw, "dock");
    let pending = entries(&gw, "pending");
    let entry = find(&pending, &name).unwrap_or_else(|| {
        panic!(
            "{name} pending: {pending:?}; quarantined: {:?}",
            entries(&gw, "quarantined")
        )
    });
    assert_eq!(entry["mode"], "remote", "{entry}");
    assert_eq!(
        entry["definition"]["endpoint"],
        format!("http://{box_name}:8080/rpc"),
        "{entry}"
    );
    let entry = find(&pending, &defaulted).expect("the second candidate is pending");
    assert_eq!(
        entry["definition"]["endpoint"],
        format!("http://{defaulted}-box:9000/mcp"),
        "the path defaults to /mcp: {entry}"
    );

    approve(&gw, &name);
    let registered = server(&gw, &name).expect("the approved server is registered");
    assert_eq!(registered["mode"], "remote", "{registered}");
    assert_eq!(
        registered["endpoint"],
        format!("http://{box_name}:8080/rpc"),
        "{registered}"
    );
}

#[test]
fn broken_labels_are_quarantined_with_a_reason_naming_the_label() {
    let bogus_mode = unique("disc-bogus");
    let no_port = unique("disc-noport");
    let bad_name = format!("bad__{}", std::process::id());
    let _guard = ContainerGuard::new()
        .name(&format!("{bogus_mode}-box"))
        .name(&format!("{no_port}-box"))
        .name(&format!("{bad_name}-box"));
    let gw = start(&discovery_yaml(3600, &[docker_source("dock", "additive")]));
    let mut events = connect(&gw, &["DiscoveryServerQuarantined"]);
    run_discoverable(&bogus_mode, &[("mcp.gateway.mode", "bogus")]);
    run_discoverable(&no_port, &[("mcp.gateway.mode", "http")]);
    run_discoverable(&bad_name, &[]);
    let scanned = scan(&gw, "dock");
    assert!(scanned["quarantined"].as_u64().unwrap() >= 3, "{scanned}");

    let quarantined = entries(&gw, "quarantined");
    let reason_of = |name: &str| -> String {
        let entry = find(&quarantined, name)
            .unwrap_or_else(|| panic!("{name} is quarantined: {quarantined:?}"));
        assert_eq!(entry["source_id"], "dock", "{entry}");
        assert!(entry["quarantined_at"].is_string(), "{entry}");
        entry["reason"].as_str().unwrap_or_default().to_owned()
    };
    let reason = reason_of(&bogus_mode);
    assert!(
        reason.contains("mcp.gateway.mode") && reason.contains("bogus"),
        "{reason}"
    );
    let reason = reason_of(&no_port);
    assert!(reason.contains("mcp.gateway.port"), "{reason}");
    let reason = reason_of(&bad_name);
    assert!(reason.contains("__"), "the id rule: {reason}");

    let pending = entries(&gw, "pending");
    for name in [&bogus_mode, &no_port, &bad_name] {
        assert!(find(&pending, name).is_none(), "{name} is not pending");
        assert!(server(&gw, name).is_none());
    }
    // A quarantined candidate cannot be approved.
    gw.post_empty(&format!("/api/discovery/approve/{bogus_mode}"))
        .assert_error(404, "DiscoveredServerNotFoundError");
    expect_event(&mut events, "the quarantine event", |event| {
        is(event, "DiscoveryServerQuarantined", "name", &no_port)
            && event["reason"].as_str().is_some_and(|r| r.contains("port"))
    });
}

#[test]
fn a_rejection_holds_across_scans_and_restarts_until_the_definition_changes() {
    let name = unique("disc-reject");
    let first_box = format!("{name}-box");
    let second_box = format!("{name}-box2");
    let _guard = ContainerGuard::new()
        .name(&first_box)
        .name(&second_box)
        .server(&name);
    let gw = start(&discovery_yaml(3600, &[docker_source("dock", "additive")]));
    let mut events = connect(&gw, &["DiscoveryServerRejected"]);
    run_discoverable(&name, &[]);
    scan(&gw, "dock");
    wait_pending(&gw, &name);

    let rejected = gw.post_empty(&format!("/api/discovery/reject/{name}"));
    assert_eq!(rejected.status, 200, "{}", rejected.text);
    assert_eq!(
        rejected.json(),
        json!({"name": name, "source_id": "dock", "rejected": true})
    );
    expect_event(&mut events, "the rejection", |event| {
        is(event, "DiscoveryServerRejected", "name", &name)
    });
    assert!(find(&entries(&gw, "pending"), &name).is_none());
    gw.post_empty(&format!("/api/discovery/reject/{name}"))
        .assert_error(404, "DiscoveredServerNotFoundError");
    gw.post_empty("/api/discovery/reject/no-such-candidate")
        .assert_error(404, "DiscoveredServerNotFoundError");

    scan(&gw, "dock");
    assert!(
        find(&entries(&gw, "pending"), &name).is_none(),
        "still rejected"
    );
    assert!(find(&entries(&gw, "quarantined"), &name).is_none());

    let gw = restart(gw);
    scan(&gw, "dock");
    assert!(
        find(&entries(&gw, "pending"), &name).is_none(),
        "still rejected after a restart"
    );
    assert!(server(&gw, &name).is_none());

    // Another definition under the same name is a new question.
    stop_now(&first_box);
    run_labelled(
        &second_box,
        &labels(
            &name,
            &[("mcp.gateway.command", "[\"--stderr-at-start\", \"1\"]")],
        ),
        &["--http", "8080"],
    );
    scan(&gw, "dock");
    let pending = wait_pending(&gw, &name);
    let definition = &pending["definition"];
    let arguments = if definition["args"].is_array() {
        &definition["args"]
    } else {
        &definition["command"]
    };
    assert_eq!(
        *arguments,
        json!(["--stderr-at-start", "1"]),
        "a JSON array label: {definition}"
    );
}

#[test]
fn an_authoritative_docker_source_withdraws_the_server_once_its_container_stopped() {
    let name = unique("disc-auth");
    let box_name = format!("{name}-box");
    let _guard = ContainerGuard::new().name(&box_name).server(&name);
    let gw = start(&discovery_yaml(
        1,
        &[docker_source("dock", "authoritative")],
    ));
    let mut events = connect(&gw, &["DiscoveryServerWithdrawn"]);
    run_discoverable(&name, &[]);
    // The periodic scan finds it: no scan is asked for.
    wait_pending(&gw, &name);
    approve(&gw, &name);
    assert_echoes(&gw, &name);
    assert_eq!(containers_of_server(&name).len(), 1);

    stop_now(&box_name);
    wait_until(SOON, "the server is withdrawn", || {
        server(&gw, &name).is_none()
    });
    expect_event(&mut events, "the withdrawal", |event| {
        is(event, "DiscoveryServerWithdrawn", "mcp_server_id", &name)
            && event["source_id"] == "dock"
    });
    wait_until(SOON, "the withdrawn server's container is removed", || {
        containers_of_server(&name).is_empty()
    });
    assert!(!gw.mcp_tool_names().contains(&format!("{name}__echo")));
}

#[test]
fn an_additive_docker_source_keeps_the_server_after_its_container_stopped() {
    let name = unique("disc-add");
    let box_name = format!("{name}-box");
    let _guard = ContainerGuard::new().name(&box_name).server(&name);
    let gw = start(&discovery_yaml(1, &[docker_source("dock", "additive")]));
    run_discoverable(&name, &[]);
    scan(&gw, "dock");
    wait_pending(&gw, &name);
    approve(&gw, &name);

    stop_now(&box_name);
    scan(&gw, "dock");
    // Nothing can show that a removal will never come; this waits well past the grace period
    // (1 s) and several periodic scans (every 1 s), then scans once more.
    std::thread::sleep(Duration::from_secs(3));
    scan(&gw, "dock");
    assert!(
        server(&gw, &name).is_some(),
        "an additive source removes nothing"
    );
    assert_echoes(&gw, &name);
}

#[test]
fn a_filesystem_source_sees_new_and_changed_files_without_a_scan() {
    let dir = tempfile::tempdir().unwrap();
    let single = unique("fs-single");
    let first = unique("fs-multi-a");
    let second = unique("fs-multi-b");
    let gw = start(&discovery_yaml(
        3600,
        &[files_source("files", "additive", dir.path())],
    ));
    let mut events = connect(&gw, &["DiscoveryServerPending", "DiscoveryServerApproved"]);

    // One definition per file: the file's stem names it.
    write_definition(
        dir.path(),
        &format!("{single}.yaml"),
        &fixture_definition(&[]),
    );
    // Or several under `mcp_servers`.
    write_definition(
        dir.path(),
        "several.yaml",
        &format!(
            "mcp_servers:\n{}{}",
            fixture_server_yaml(&first, &[]),
            fixture_server_yaml(&second, &[])
        ),
    );
    let pending = wait_pending(&gw, &single);
    assert_eq!(pending["source_id"], "files", "{pending}");
    assert_eq!(pending["mode"], "subprocess", "{pending}");
    assert_eq!(pending["definition"]["mode"], "subprocess", "{pending}");
    wait_pending(&gw, &first);
    wait_pending(&gw, &second);
    expect_event(&mut events, "the pending event", |event| {
        is(event, "DiscoveryServerPending", "name", &single) && event["source_id"] == "files"
    });

    let approved = approve(&gw, &single);
    assert_eq!(approved["source_id"], "files", "{approved}");
    assert_eq!(approved["replaced"], false, "{approved}");
    assert_eq!(server(&gw, &single).unwrap()["mode"], "subprocess");
    assert_echoes(&gw, &single);
    approve(&gw, &first);
    assert_echoes(&gw, &first);

    // A changed definition of an approved server waits for approval again; until then the
    // approved one keeps serving.
    write_definition(
        dir.path(),
        &format!("{single}.yaml"),
        &fixture_definition(&["--stderr-at-start", "1"]),
    );
    let pending = wait_pending(&gw, &single);
    assert_eq!(pending["replaces_approved"], true, "{pending}");
    assert!(
        pending["definition"]["command"]
            .as_array()
            .is_some_and(|command| command.contains(&json!("--stderr-at-start"))),
        "{pending}"
    );
    assert_echoes(&gw, &single);
    let approved = approve(&gw, &single);
    assert_eq!(approved["replaced"], true, "{approved}");
    assert_echoes(&gw, &single);
    wait_until(SOON, "the new definition runs", || {
        log_lines(&gw, &single).contains(&"fixture start line 0".to_owned())
    });
    // An unchanged approved server does not come back.
    assert!(find(&entries(&gw, "pending"), &first).is_none());
}

#[test]
fn invalid_definition_files_are_quarantined_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let no_command = unique("fs-nocommand");
    let bad_mode = unique("fs-badmode");
    let broken = unique("fs-broken");
    let gw = start(&discovery_yaml(
        3600,
        &[files_source("files", "additive", dir.path())],
    ));
    write_definition(
        dir.path(),
        &format!("{no_command}.yaml"),
        "mode: subprocess\n",
    );
    write_definition(
        dir.path(),
        &format!("{bad_mode}.yaml"),
        "mode: teleport\ncommand: [x]\n",
    );
    write_definition(dir.path(), &format!("{broken}.yaml"), "mode: [subprocess\n");

    let reason = wait_quarantined(&gw, &no_command)["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(reason.contains("command"), "{reason}");
    let reason = wait_quarantined(&gw, &bad_mode)["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(reason.contains("teleport"), "{reason}");
    let entry = wait_quarantined(&gw, &broken);
    assert_eq!(entry["source_id"], "files", "{entry}");
    assert!(
        entry["reason"]
            .as_str()
            .is_some_and(|reason| !reason.is_empty()),
        "{entry}"
    );
    for name in [&no_command, &bad_mode, &broken] {
        assert!(find(&entries(&gw, "pending"), name).is_none());
    }

    // Fixed, it leaves quarantine for pending.
    write_definition(
        dir.path(),
        &format!("{no_command}.yaml"),
        &fixture_definition(&[]),
    );
    wait_pending(&gw, &no_command);
    assert!(find(&entries(&gw, "quarantined"), &no_command).is_none());
}

#[test]
fn a_deleted_file_removes_the_server_of_an_authoritative_source_only() {
    let authoritative_dir = tempfile::tempdir().unwrap();
    let additive_dir = tempfile::tempdir().unwrap();
    let doomed = unique("fs-doomed");
    let kept = unique("fs-kept");
    let gw = start(&discovery_yaml(
        1,
        &[
            files_source("owner", "authoritative", authoritative_dir.path()),
            files_source("adder", "additive", additive_dir.path()),
        ],
    ));
    write_definition(
        authoritative_dir.path(),
        &format!("{doomed}.yaml"),
        &fixture_definition(&[]),
    );
    write_definition(
        additive_dir.path(),
        &format!("{kept}.yaml"),
        &fixture_definition(&[]),
    );
    assert_eq!(wait_pending(&gw, &doomed)["source_id"], "owner");
    assert_eq!(wait_pending(&gw, &kept)["source_id"], "adder");
    approve(&gw, &doomed);
    approve(&gw, &kept);
    assert_echoes(&gw, &doomed);
    assert_echoes(&gw, &kept);

    std::fs::remove_file(authoritative_dir.path().join(format!("{doomed}.yaml"))).unwrap();
    std::fs::remove_file(additive_dir.path().join(format!("{kept}.yaml"))).unwrap();
    wait_until(
        SOON,
        "the authoritative source withdraws its server",
        || server(&gw, &doomed).is_none(),
    );
    // The withdrawal shows the grace period and rescans have passed for both sources.
    scan(&gw, "adder");
    std::thread::sleep(Duration::from_millis(1500));
    scan(&gw, "adder");
    assert!(
        server(&gw, &kept).is_some(),
        "an additive source removes nothing"
    );
    assert_echoes(&gw, &kept);
}

#[test]
fn sources_are_managed_over_rest() {
    let config_dir = tempfile::tempdir().unwrap();
    let api_dir = tempfile::tempdir().unwrap();
    let name = unique("fs-api");
    let gw = start(&discovery_yaml(
        3600,
        &[files_source("from-file", "additive", config_dir.path())],
    ));
    let mut events = connect(
        &gw,
        &[
            "DiscoverySourceAdded",
            "DiscoverySourceUpdated",
            "DiscoverySourceEnabled",
            "DiscoverySourceRemoved",
        ],
    );
    let body = |mode: &str| {
        json!({
            "source_id": "extra",
            "source_type": "filesystem",
            "mode": mode,
            "enabled": true,
            "config": {"path": api_dir.path(), "watch_interval_ms": 200, "removal_grace_s": 1},
        })
    };
    let created = gw.post("/api/discovery/sources", &body("additive"));
    assert_eq!(created.status, 201, "{}", created.text);
    expect_event(&mut events, "the added source", |event| {
        is(event, "DiscoverySourceAdded", "source_id", "extra")
    });
    let listed = source(&gw, "extra").expect("listed");
    assert_eq!(listed["source_type"], "filesystem", "{listed}");
    assert_eq!(listed["mode"], "additive", "{listed}");
    assert_eq!(listed["enabled"], true, "{listed}");
    assert_eq!(listed["config"]["path"], json!(api_dir.path()), "{listed}");
    assert!(listed.get("error").is_some(), "{listed}");

    gw.post("/api/discovery/sources", &body("additive"))
        .assert_error(409, "DiscoverySourceAlreadyExistsError");
    let mut unknown_type = body("additive");
    unknown_type["source_id"] = json!("odd");
    unknown_type["source_type"] = json!("carrier-pigeon");
    gw.post("/api/discovery/sources", &unknown_type)
        .assert_error(422, "ValidationError");
    // Without an id, one is made up from the type.
    let anonymous_dir = tempfile::tempdir().unwrap();
    let mut anonymous = body("additive");
    anonymous.as_object_mut().unwrap().remove("source_id");
    anonymous["config"]["path"] = json!(anonymous_dir.path());
    let made = gw.post("/api/discovery/sources", &anonymous);
    assert_eq!(made.status, 201, "{}", made.text);
    let made_id = made.json()["source_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(made_id.starts_with("filesystem-"), "{}", made.text);
    assert!(source(&gw, &made_id).is_some());

    write_definition(
        api_dir.path(),
        &format!("{name}.yaml"),
        &fixture_definition(&[]),
    );
    let scanned = scan(&gw, "extra");
    assert_eq!(scanned["found"], 1, "{scanned}");
    assert_eq!(wait_pending(&gw, &name)["source_id"], "extra");

    let updated = gw.put("/api/discovery/sources/extra", &body("authoritative"));
    assert_eq!(updated.status, 200, "{}", updated.text);
    assert_eq!(source(&gw, "extra").unwrap()["mode"], "authoritative");
    expect_event(&mut events, "the updated source", |event| {
        is(event, "DiscoverySourceUpdated", "source_id", "extra")
    });

    let disabled = gw.put(
        "/api/discovery/sources/extra/enable",
        &json!({"enabled": false}),
    );
    assert_eq!(disabled.status, 200, "{}", disabled.text);
    assert_eq!(source(&gw, "extra").unwrap()["enabled"], false);
    expect_event(&mut events, "the disabled source", |event| {
        is(event, "DiscoverySourceEnabled", "source_id", "extra") && event["enabled"] == false
    });
    gw.post_empty("/api/discovery/sources/extra/scan")
        .assert_error(409, "ConflictError");
    gw.put(
        "/api/discovery/sources/extra/enable",
        &json!({"enabled": "no"}),
    )
    .assert_error(422, "ValidationError");
    let enabled = gw.put(
        "/api/discovery/sources/extra/enable",
        &json!({"enabled": true}),
    );
    assert_eq!(enabled.status, 200, "{}", enabled.text);
    scan(&gw, "extra");

    // A source of the configuration file is changed there, not over the API.
    let mut from_file = body("authoritative");
    from_file["source_id"] = json!("from-file");
    gw.put("/api/discovery/sources/from-file", &from_file)
        .assert_error(409, "ConflictError");
    gw.delete("/api/discovery/sources/from-file")
        .assert_error(409, "ConflictError");
    gw.put("/api/discovery/sources/nowhere", &body("additive"))
        .assert_error(404, "DiscoverySourceNotFoundError");

    let deleted = gw.delete("/api/discovery/sources/extra");
    assert_eq!(deleted.status, 200, "{}", deleted.text);
    assert_eq!(
        deleted.json(),
        json!({"source_id": "extra", "deleted": true})
    );
    expect_event(&mut events, "the removed source", |event| {
        is(event, "DiscoverySourceRemoved", "source_id", "extra")
    });
    assert!(source(&gw, "extra").is_none());
    gw.post_empty("/api/discovery/sources/extra/scan")
        .assert_error(404, "DiscoverySourceNotFoundError");
    gw.delete("/api/discovery/sources/extra")
        .assert_error(404, "DiscoverySourceNotFoundError");

    // A source added over the API outlives a restart; the file's source stays as declared.
    let gw = restart(gw);
    assert!(source(&gw, &made_id).is_some(), "kept across a restart");
    assert!(
        source(&gw, "extra").is_none(),
        "a deleted source stays deleted"
    );
    assert_eq!(source(&gw, "from-file").unwrap()["mode"], "additive");
}

#[test]
fn an_unreachable_engine_is_reported_by_its_source_and_disturbs_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let name = unique("fs-beside");
    let missing_socket = format!("/tmp/mcpgw-no-engine-{}.sock", std::process::id());
    let yaml = discovery_yaml(
        3600,
        &[
            format!(
                "    - {{id: gone, type: docker, mode: authoritative, config: {{socket_path: \"{missing_socket}\"}}}}\n"
            ),
            files_source("files", "additive", dir.path()),
        ],
    );
    let gw = start(&yaml);
    let mut events = connect(&gw, &["DiscoveryScanFailed"]);

    let message = gw
        .post_empty("/api/discovery/sources/gone/scan")
        .assert_error(503, "DiscoverySourceUnavailableError");
    assert!(message.contains(&missing_socket), "{message}");
    expect_event(&mut events, "the failed scan", |event| {
        is(event, "DiscoveryScanFailed", "source_id", "gone")
    });
    let listed = source(&gw, "gone").unwrap();
    assert!(
        listed["error"]
            .as_str()
            .is_some_and(|error| error.contains(&missing_socket)),
        "the source lists its error: {listed}"
    );

    assert_eq!(gw.get("/api/discovery/pending").status, 200);
    assert_eq!(gw.get("/api/discovery/quarantined").status, 200);
    write_definition(
        dir.path(),
        &format!("{name}.yaml"),
        &fixture_definition(&[]),
    );
    scan(&gw, "files");
    wait_pending(&gw, &name);
    assert!(
        source(&gw, "files").unwrap()["error"].is_null(),
        "the other source is fine"
    );
    assert_eq!(gw.get("/health/ready").status, 200);
}

/// The `last_scan_at` of a source, `None` before its first scan.
fn last_scan_at(gw: &RunningGateway, id: &str) -> Option<String> {
    source(gw, id).unwrap_or_else(|| panic!("no source {id}"))["last_scan_at"]
        .as_str()
        .map(str::to_owned)
}

/// Waits until `id` has been scanned `times` more times, as its `last_scan_at` shows.
#[track_caller]
fn wait_for_scans(gw: &RunningGateway, id: &str, times: usize) {
    for _ in 0..times {
        let before = last_scan_at(gw, id);
        wait_until(SOON, &format!("{id} is scanned again"), || {
            let now = last_scan_at(gw, id);
            now.is_some() && now != before
        });
    }
}

#[test]
fn a_disabled_source_is_not_scanned_until_enabled_and_one_disabled_in_the_file_never_is() {
    let paused_dir = tempfile::tempdir().unwrap();
    let off_dir = tempfile::tempdir().unwrap();
    let witness_dir = tempfile::tempdir().unwrap();
    let paused_name = unique("fs-paused");
    let off_name = unique("fs-off");
    let witness_name = unique("fs-witness");
    let gw = start(&discovery_yaml(
        1,
        &[
            files_source("paused", "additive", paused_dir.path()),
            format!(
                "    - {{id: off, type: filesystem, mode: additive, enabled: false, config: {{path: \"{}\", watch_interval_ms: 200}}}}\n",
                off_dir.path().display()
            ),
            files_source("witness", "additive", witness_dir.path()),
        ],
    ));
    wait_for_scans(&gw, "paused", 1);
    let disabled = gw.put(
        "/api/discovery/sources/paused/enable",
        &json!({"enabled": false}),
    );
    assert_eq!(disabled.status, 200, "{}", disabled.text);
    assert_eq!(disabled.json()["enabled"], false);
    let paused_at = last_scan_at(&gw, "paused");

    // New definitions in all three directories; only the enabled source may see its own.
    for (dir, name) in [
        (&paused_dir, &paused_name),
        (&off_dir, &off_name),
        (&witness_dir, &witness_name),
    ] {
        write_definition(
            dir.path(),
            &format!("{name}.yaml"),
            &fixture_definition(&[]),
        );
    }
    wait_pending(&gw, &witness_name);
    // Two more periodic scans of the witness: the refresh and the watch intervals have passed
    // since the files were written, for every source.
    wait_for_scans(&gw, "witness", 2);
    let pending = entries(&gw, "pending");
    let quarantined = entries(&gw, "quarantined");
    for name in [&paused_name, &off_name] {
        assert!(
            find(&pending, name).is_none() && find(&quarantined, name).is_none(),
            "a disabled source found {name}: pending {pending:?}, quarantined {quarantined:?}"
        );
    }
    assert_eq!(
        last_scan_at(&gw, "paused"),
        paused_at,
        "no scan of the disabled source"
    );
    assert_eq!(
        last_scan_at(&gw, "off"),
        None,
        "a source disabled in the file is never scanned"
    );
    // Asked to scan, a disabled source refuses rather than scanning behind the operator's back.
    let refused = gw
        .post_empty("/api/discovery/sources/paused/scan")
        .assert_error(409, "ConflictError");
    assert!(refused.contains("disabled"), "{refused}");
    gw.post_empty("/api/discovery/sources/off/scan")
        .assert_error(409, "ConflictError");
    assert_eq!(last_scan_at(&gw, "off"), None);

    // Enabled again, each source scans at once and finds what was written meanwhile.
    for id in ["paused", "off"] {
        let enabled = gw.put(
            &format!("/api/discovery/sources/{id}/enable"),
            &json!({"enabled": true}),
        );
        assert_eq!(enabled.status, 200, "{}", enabled.text);
    }
    assert_eq!(wait_pending(&gw, &paused_name)["source_id"], "paused");
    assert_eq!(wait_pending(&gw, &off_name)["source_id"], "off");
    // And keeps scanning on its schedule.
    wait_for_scans(&gw, "paused", 2);
}

#[test]
fn a_disabled_docker_source_does_not_see_containers_started_after_it_was_disabled() {
    let witness_dir = tempfile::tempdir().unwrap();
    let early = unique("dk-early");
    let late = unique("dk-late");
    let witness_name = unique("dk-witness");
    let _guard = ContainerGuard::new()
        .name(&format!("{early}-box"))
        .name(&format!("{late}-box"));
    let gw = start(&discovery_yaml(
        1,
        &[
            docker_source("engine", "additive"),
            files_source("witness", "additive", witness_dir.path()),
        ],
    ));
    // While enabled, the source sees a labelled container.
    run_discoverable(&early, &[]);
    wait_pending(&gw, &early);

    let disabled = gw.put(
        "/api/discovery/sources/engine/enable",
        &json!({"enabled": false}),
    );
    assert_eq!(disabled.status, 200, "{}", disabled.text);
    let disabled_at = last_scan_at(&gw, "engine");
    run_discoverable(&late, &[]);
    write_definition(
        witness_dir.path(),
        &format!("{witness_name}.yaml"),
        &fixture_definition(&[]),
    );
    wait_pending(&gw, &witness_name);
    wait_for_scans(&gw, "witness", 2);
    assert!(
        find(&entries(&gw, "pending"), &late).is_none(),
        "the disabled source found a container started after it was disabled"
    );
    assert_eq!(
        last_scan_at(&gw, "engine"),
        disabled_at,
        "no scan while disabled"
    );
    // What it found before stays as it was.
    assert!(find(&entries(&gw, "pending"), &early).is_some());

    let enabled = gw.put(
        "/api/discovery/sources/engine/enable",
        &json!({"enabled": true}),
    );
    assert_eq!(enabled.status, 200, "{}", enabled.text);
    wait_pending(&gw, &late);
}
