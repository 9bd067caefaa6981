//! End-to-end tests of `mode: docker`: the real binary runs the fixture MCP server in containers
//! of the test image on a real engine (podman, through its Docker Engine API socket or its CLI),
//! and the tests look at those containers with the podman CLI.
//!
//! Every test fails, saying why, when the engine or the image is missing: it never skips. Each
//! uses server ids unique to its name and process, so the suites can share one engine, and a
//! guard removes every container it caused, also when an assertion fails.
//!
//! Bad input tried: an image that exists nowhere (the call fails naming the image, no container
//! is left), a gateway killed with SIGKILL (its container is left, and the next start with the
//! same data directory removes it, but not a container of another gateway instance).

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::engine::{
    self, ContainerGuard, OWNER_LABEL, TEST_IMAGE, containers_of_server, containers_with_label,
    inspect, instance_id, proc_status_field, require_engine, run_labelled, unique, wait_until,
};
use support::{RunningGateway, gateway};

const SOON: Duration = Duration::from_secs(20);

/// A docker-mode entry of `mcp_servers` for the test image, with extra YAML lines (indented by
/// four spaces).
fn docker_yaml(id: &str, extra: &str) -> String {
    format!("  {id}:\n    mode: docker\n    image: {TEST_IMAGE}\n{extra}")
}

/// A gateway on the test engine. With the background tool probe off, only the tests start
/// servers (and a server's tools are known once it has run).
fn start_gateway(probe_tools: bool, servers: &[String]) -> RunningGateway {
    require_engine();
    gateway()
        .config(&format!(
            "probe_tools: {probe_tools}\nmcp_servers:\n{}",
            servers.join("")
        ))
        .env("DOCKER_HOST", &engine::docker_host())
        .start()
}

/// The text of a successful `tools/call` answer; fails on an error.
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

fn server_row(gw: &RunningGateway, id: &str) -> Value {
    let listed = gw.get("/api/mcp_servers").json();
    listed["mcp_servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|server| server["mcp_server_id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("{id} is not listed: {listed}"))
}

fn log_lines(gw: &RunningGateway, id: &str) -> Vec<String> {
    let logs = gw.get(&format!("/api/mcp_servers/{id}/logs?lines=1000"));
    assert_eq!(logs.status, 200, "{}", logs.text);
    logs.json()["logs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|entry| entry["line"].as_str().map(str::to_owned))
        .collect()
}

/// The one container the gateway runs for `id`; fails when there is none or several.
#[track_caller]
fn the_container_of(id: &str) -> engine::Container {
    let containers = containers_of_server(id);
    assert_eq!(
        containers.len(),
        1,
        "one container for {id}: {containers:?}"
    );
    containers.into_iter().next().unwrap()
}

#[track_caller]
fn start_server(gw: &RunningGateway, id: &str) {
    let started = gw.post_empty(&format!("/api/mcp_servers/{id}/start"));
    assert_eq!(
        started.status,
        200,
        "start {id}: {}\ngateway stderr:\n{}",
        started.text,
        gw.stderr()
    );
}

#[track_caller]
fn wait_until_no_container_of(id: &str) {
    wait_until(SOON, &format!("no container of {id} exists"), || {
        containers_of_server(id).is_empty()
    });
}

/// Asserts the hardening the gateway applies by default, on the running container: no
/// capability left (the kernel's view of the process, not only the engine's record), no new
/// privileges, a read-only root filesystem, no network.
#[track_caller]
fn assert_hardened(container: &engine::Container) {
    let details = inspect(&container.id);
    let host = &details["HostConfig"];
    assert_eq!(host["ReadonlyRootfs"], true, "read-only root: {host}");
    assert_eq!(host["NetworkMode"], "none", "no network: {host}");
    let options = host["SecurityOpt"].as_array().cloned().unwrap_or_default();
    assert!(
        options.iter().any(|option| option
            .as_str()
            .is_some_and(|o| o.starts_with("no-new-privileges"))),
        "no-new-privileges among {options:?}"
    );
    let pid = details["State"]["Pid"].as_i64().unwrap_or_default();
    assert!(pid > 0, "the container runs: {}", details["State"]);
    assert_eq!(
        proc_status_field(pid, "CapEff").as_deref(),
        Some("0000000000000000"),
        "every capability dropped (CapDrop ALL) in the container's process {pid}"
    );
    assert_eq!(
        proc_status_field(pid, "NoNewPrivs").as_deref(),
        Some("1"),
        "no new privileges in the container's process {pid}"
    );
}

#[test]
fn a_docker_server_is_listed_called_logged_hardened_and_its_container_removed_on_stop() {
    let id = unique("dm-cfg");
    let _guard = ContainerGuard::new().server(&id);
    let gw = start_gateway(
        false,
        &[docker_yaml(
            &id,
            &format!(
                "    args: [\"--stderr-at-start\", \"3\"]\n    env: {{MCPGW_TEST_MARK: {id}}}\n    memory: 256m\n    cpus: \"0.5\"\n"
            ),
        )],
    );

    let row = server_row(&gw, &id);
    assert_eq!(row["mode"], "docker", "{row}");
    assert!(
        containers_of_server(&id).is_empty(),
        "nothing runs before the start"
    );
    start_server(&gw, &id);
    assert_eq!(server_row(&gw, &id)["state"], "ready");

    let tool = format!("{id}__echo");
    assert_eq!(
        call_text(&gw, &tool, json!({"text": "hello from a container"})),
        "hello from a container"
    );
    assert_eq!(
        call_text(
            &gw,
            &format!("{id}__env"),
            json!({"name": "MCPGW_TEST_MARK"})
        ),
        id,
        "the configured env reaches the container"
    );

    // The container's stderr goes into the server's log buffer like a subprocess's.
    wait_until(SOON, "the start lines are in the logs", || {
        let lines = log_lines(&gw, &id);
        (0..3).all(|index| lines.contains(&format!("fixture start line {index}")))
    });

    let container = the_container_of(&id);
    assert_eq!(container.state, "running");
    assert_eq!(
        container.labels.get(OWNER_LABEL).and_then(Value::as_str),
        Some(instance_id(gw.data_dir.path()).as_str()),
        "labelled with the gateway's instance id: {container:?}"
    );
    assert!(
        container.name.starts_with(&format!("mcpgw-{id}-")),
        "named after the server: {}",
        container.name
    );
    assert_hardened(&container);
    let host = &inspect(&container.id)["HostConfig"];
    assert_eq!(host["Memory"], 256 * 1024 * 1024, "memory limit: {host}");
    assert_eq!(host["NanoCpus"], 500_000_000, "cpus limit: {host}");

    let stopped = gw.post_empty(&format!("/api/mcp_servers/{id}/stop"));
    assert_eq!(stopped.status, 200, "{}", stopped.text);
    // Removed, not only stopped: `podman ps -a` no longer lists it.
    wait_until_no_container_of(&id);
    assert_eq!(server_row(&gw, &id)["state"], "cold");

    // The tools it listed are kept: the next call starts a fresh container.
    assert_eq!(call_text(&gw, &tool, json!({"text": "again"})), "again");
    assert_ne!(the_container_of(&id).id, container.id);
}

#[test]
fn a_docker_server_created_over_rest_works_the_same_and_delete_removes_its_container() {
    let id = unique("dm-rest");
    let _guard = ContainerGuard::new().server(&id);
    // The tool probe runs the new server once to learn its tools.
    let gw = start_gateway(true, &[]);

    let created = gw.post(
        "/api/mcp_servers",
        &json!({
            "mcp_server_id": id,
            "mode": "docker",
            "image": TEST_IMAGE,
            "args": ["--stderr-at-start", "2"],
        }),
    );
    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(server_row(&gw, &id)["mode"], "docker");
    let tool = format!("{id}__echo");
    wait_until(SOON, "the probe lists the server's tools", || {
        gw.mcp_tool_names().contains(&tool)
    });

    assert_eq!(
        call_text(&gw, &tool, json!({"text": "over rest"})),
        "over rest"
    );
    wait_until(SOON, "the start lines are in the logs", || {
        log_lines(&gw, &id).contains(&"fixture start line 1".to_owned())
    });
    // No hardening option was given: the defaults apply.
    wait_until(SOON, "one container runs for the server", || {
        containers_of_server(&id).len() == 1
    });
    assert_hardened(&the_container_of(&id));

    let deleted = gw.delete(&format!("/api/mcp_servers/{id}"));
    assert!(deleted.status < 300, "{deleted:?}");
    wait_until_no_container_of(&id);
}

#[test]
fn runtime_podman_runs_the_container_through_the_cli() {
    let id = unique("dm-cli");
    let _guard = ContainerGuard::new().server(&id);
    require_engine();
    // The Engine API is out of reach: only the podman CLI can run this server.
    let mut builder = gateway()
        .config(&format!(
            "probe_tools: false\nmcp_servers:\n{}",
            docker_yaml(
                &id,
                "    runtime: podman\n    args: [\"--stderr-at-start\", \"2\"]\n"
            )
        ))
        .env("DOCKER_HOST", "unix:///nonexistent/mcpgw-test.sock");
    if let Ok(host) = std::env::var("MCPGW_TEST_DOCKER_HOST") {
        builder = builder.env("CONTAINER_HOST", &host);
    }
    let gw = builder.start();
    start_server(&gw, &id);

    assert_eq!(
        call_text(
            &gw,
            &format!("{id}__echo"),
            json!({"text": "through the cli"})
        ),
        "through the cli"
    );
    wait_until(SOON, "the start lines are in the logs", || {
        log_lines(&gw, &id).contains(&"fixture start line 1".to_owned())
    });
    let container = the_container_of(&id);
    assert_eq!(
        container.labels.get(OWNER_LABEL).and_then(Value::as_str),
        Some(instance_id(gw.data_dir.path()).as_str())
    );
    assert_hardened(&container);

    assert_eq!(
        gw.post_empty(&format!("/api/mcp_servers/{id}/stop")).status,
        200
    );
    wait_until_no_container_of(&id);
}

#[test]
fn a_killed_gateway_leaves_its_container_and_the_next_start_removes_only_its_own() {
    let id = unique("dm-kill");
    let planted = unique("dm-kill-planted");
    let foreign = unique("dm-kill-foreign");
    let foreign_owner = unique("another-gateway");
    let _guard = ContainerGuard::new()
        .server(&id)
        .name(&planted)
        .name(&foreign);
    let config = format!("probe_tools: false\nmcp_servers:\n{}", docker_yaml(&id, ""));
    require_engine();
    let mut gw = gateway()
        .config(&config)
        .env("DOCKER_HOST", &engine::docker_host())
        .start();
    start_server(&gw, &id);
    assert_eq!(
        call_text(&gw, &format!("{id}__echo"), json!({"text": "before"})),
        "before"
    );
    let owner = instance_id(gw.data_dir.path());
    let left = the_container_of(&id);

    // One more container of this instance, as if from a server the gateway ran earlier, and
    // one of another gateway on the same engine, which must survive.
    run_labelled(
        &planted,
        &[(OWNER_LABEL, &owner), ("mcp.gateway.server", &planted)],
        &["--http", "8080"],
    );
    run_labelled(
        &foreign,
        &[(OWNER_LABEL, &foreign_owner)],
        &["--http", "8080"],
    );

    gw.signal_and_wait(libc::SIGKILL, SOON);
    let data_dir = std::mem::replace(&mut gw.data_dir, tempfile::tempdir().unwrap());
    drop(gw);
    let after_kill: Vec<String> = containers_with_label(&format!("{OWNER_LABEL}={owner}"))
        .into_iter()
        .map(|container| container.id)
        .collect();
    assert!(
        after_kill.contains(&left.id),
        "a killed gateway cannot remove its container: {after_kill:?}"
    );

    let gw = gateway()
        .config(&config)
        .env("DOCKER_HOST", &engine::docker_host())
        .data_dir(data_dir)
        .start();
    assert_eq!(
        instance_id(gw.data_dir.path()),
        owner,
        "the instance id survives a restart"
    );
    wait_until(SOON, "the leftovers of this instance are removed", || {
        containers_with_label(&format!("{OWNER_LABEL}={owner}")).is_empty()
    });
    assert_eq!(
        containers_with_label(&format!("{OWNER_LABEL}={foreign_owner}")).len(),
        1,
        "a container of another gateway instance is left alone"
    );
    // The new process has not run the server yet (and does not probe): start it.
    start_server(&gw, &id);
    assert_eq!(
        call_text(&gw, &format!("{id}__echo"), json!({"text": "after"})),
        "after"
    );
}

#[test]
fn a_missing_image_fails_the_call_with_a_clear_message_and_leaves_no_container() {
    let id = unique("dm-noimage");
    let image = format!("localhost/mcpgw-no-such-image-{}:none", std::process::id());
    let _guard = ContainerGuard::new().server(&id);
    // Declared tools let a call reach the server before it ever ran.
    let gw = start_gateway(
        false,
        &[format!(
            "  {id}:\n    mode: docker\n    image: \"{image}\"\n    max_consecutive_failures: 1\n    tools: [{{name: echo, description: echoes, inputSchema: {{type: object}}}}]\n"
        )],
    );

    let answer = gw.mcp_call_tool(&format!("{id}__echo"), json!({"text": "x"}));
    let message = if let Some(error) = answer.get("error") {
        error["message"].as_str().unwrap_or_default().to_owned()
    } else {
        assert_eq!(
            answer["result"]["isError"], true,
            "the call fails: {answer}"
        );
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        message.contains(&image),
        "the failure names the image: {message:?}"
    );

    let started = gw.post_empty(&format!("/api/mcp_servers/{id}/start"));
    assert!(started.status >= 400, "{started:?}");
    assert!(
        started.text.contains(&image),
        "the start failure names the image: {}",
        started.text
    );
    assert!(
        containers_of_server(&id).is_empty(),
        "no container is left: {:?}",
        containers_of_server(&id)
    );
    assert_ne!(server_row(&gw, &id)["state"], "ready");
}

#[test]
fn sigterm_shutdown_removes_every_container() {
    let first = unique("dm-term-a");
    let second = unique("dm-term-b");
    let _guard = ContainerGuard::new().server(&first).server(&second);
    let mut gw = start_gateway(false, &[docker_yaml(&first, ""), docker_yaml(&second, "")]);
    for id in [&first, &second] {
        start_server(&gw, id);
        assert_eq!(
            call_text(&gw, &format!("{id}__echo"), json!({"text": id})),
            *id
        );
    }
    let owner = instance_id(gw.data_dir.path());
    assert_eq!(
        containers_with_label(&format!("{OWNER_LABEL}={owner}")).len(),
        2
    );

    let status = gw.signal_and_wait(libc::SIGTERM, SOON);
    assert!(status.success(), "{status:?}");
    // Gone by the time the gateway has exited, not merely stopped.
    let left = containers_with_label(&format!("{OWNER_LABEL}={owner}"));
    assert!(left.is_empty(), "containers left after shutdown: {left:?}");
}

/// A socket path where no engine listens, unique to this test process.
fn missing_socket(test: &str) -> String {
    format!("/tmp/mcpgw-no-engine-{}.sock", unique(test))
}

#[test]
fn a_gateway_without_docker_servers_never_looks_for_an_engine() {
    let socket = missing_socket("dm-none");
    let gw = gateway()
        .config(&format!(
            "mcp_servers:\n{}",
            support::fixture_server_yaml("plain", &[])
        ))
        .env("DOCKER_HOST", &format!("unix://{socket}"))
        .start();
    // The server works, so the start-up is over and the gateway has done real work.
    assert_eq!(
        call_text(&gw, "plain__echo", json!({"text": "no engine needed"})),
        "no engine needed"
    );
    let stderr = gw.stderr();
    assert!(!stderr.contains("WARN"), "no warning:\n{stderr}");
    for word in ["engine", "docker", "podman", "container", socket.as_str()] {
        assert!(
            !stderr.to_lowercase().contains(word),
            "nothing about `{word}`:\n{stderr}"
        );
    }
}

#[test]
fn a_docker_server_added_over_rest_later_has_the_leftovers_swept_then_and_starts() {
    let id = unique("dm-late");
    let planted = unique("dm-late-planted");
    let owner = unique("dm-late-owner");
    let _guard = ContainerGuard::new().server(&id).name(&planted);
    require_engine();
    // A data directory whose instance left a container behind, as a killed gateway would.
    let data_dir = tempfile::tempdir().unwrap();
    std::fs::write(data_dir.path().join("instance_id"), format!("{owner}\n")).unwrap();
    run_labelled(
        &planted,
        &[(OWNER_LABEL, &owner), ("mcp.gateway.server", &planted)],
        &["--http", "8080"],
    );
    let gw = gateway()
        .config(&format!(
            "probe_tools: false\nmcp_servers:\n{}",
            support::fixture_server_yaml("plain", &[])
        ))
        .env("DOCKER_HOST", &engine::docker_host())
        .data_dir(data_dir)
        .start();
    assert_eq!(
        containers_with_label(&format!("{OWNER_LABEL}={owner}")).len(),
        1,
        "no docker-mode server yet, so the engine is left alone"
    );

    let created = gw.post(
        "/api/mcp_servers",
        &json!({"mcp_server_id": id, "mode": "docker", "image": TEST_IMAGE}),
    );
    assert_eq!(created.status, 201, "{}", created.text);
    wait_until(
        SOON,
        "the leftover is removed once a docker server exists",
        || containers_with_label(&format!("{OWNER_LABEL}={owner}")).is_empty(),
    );
    assert_eq!(
        server_row(&gw, &id)["state"],
        "cold",
        "removed when the server was added, not at its start"
    );

    start_server(&gw, &id);
    assert_eq!(
        call_text(&gw, &format!("{id}__echo"), json!({"text": "late"})),
        "late"
    );
    assert_eq!(
        the_container_of(&id)
            .labels
            .get(OWNER_LABEL)
            .and_then(Value::as_str),
        Some(owner.as_str())
    );
}

#[test]
fn without_an_engine_a_docker_server_added_later_fails_to_start_naming_the_engine() {
    let id = unique("dm-nowhere");
    let socket = missing_socket("dm-nowhere");
    // No engine at DOCKER_HOST, and no docker or podman command to fall back on.
    let empty_path = tempfile::tempdir().unwrap();
    let gw = gateway()
        .config(&format!(
            "probe_tools: false\nmcp_servers:\n{}",
            support::fixture_server_yaml("plain", &[])
        ))
        .env("DOCKER_HOST", &format!("unix://{socket}"))
        .env("PATH", &empty_path.path().display().to_string())
        .start();
    let created = gw.post(
        "/api/mcp_servers",
        &json!({"mcp_server_id": id, "mode": "docker", "image": TEST_IMAGE}),
    );
    assert_eq!(created.status, 201, "{}", created.text);

    let started = gw.post_empty(&format!("/api/mcp_servers/{id}/start"));
    assert!(started.status >= 400, "{started:?}");
    let body = started.json();
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|message| message.contains(&socket)),
        "the failure names the engine's socket: {body}"
    );
    let row = gw.get(&format!("/api/mcp_servers/{id}")).json();
    assert_ne!(row["state"], "ready", "{row}");
    assert!(
        row["health"]["last_error"]
            .as_str()
            .is_some_and(|error| error.contains(&socket)),
        "{row}"
    );
    // The gateway itself is fine.
    start_server(&gw, "plain");
    assert_eq!(
        call_text(&gw, "plain__echo", json!({"text": "still here"})),
        "still here"
    );
}
