//! The container engine of the docker-mode and discovery suites: podman, serving the Docker
//! Engine API on the socket `MCPGW_TEST_DOCKER_HOST` names (default
//! `unix:///tmp/podman.sock`), and its CLI for what the tests themselves do to containers.
//!
//! The suites never skip: when the engine or the test image is missing, [`require_engine`]
//! fails the test with what is wrong and how to set it up (`scripts/install-test-deps.sh`).
//! Every container a test creates, itself or through the gateway, is removed by a
//! [`ContainerGuard`] when the test ends, also when an assertion failed.

use std::io::{Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The image `scripts/build-test-image.sh` builds: the fixture MCP server at
/// `/mcpgw-fixture-server`, its entry point.
pub const TEST_IMAGE: &str = "localhost/mcpgw-fixture:test";

/// The label every container the gateway runs carries, with its instance id.
pub const OWNER_LABEL: &str = "mcp.gateway.owner";

/// The label naming the server a gateway-run container belongs to.
pub const SERVER_LABEL: &str = "mcp.gateway.server";

const SETUP_HINT: &str = "run scripts/install-test-deps.sh (it sets up podman's Docker API \
                          socket and builds the test image), or point MCPGW_TEST_DOCKER_HOST \
                          at a running engine";

/// The engine's address as the gateway's `DOCKER_HOST` takes it.
pub fn docker_host() -> String {
    std::env::var("MCPGW_TEST_DOCKER_HOST")
        .ok()
        .filter(|host| !host.is_empty())
        .unwrap_or_else(|| "unix:///tmp/podman.sock".to_owned())
}

/// The engine's socket path, as a discovery source's `socket_path` takes it.
pub fn socket_path() -> String {
    let host = docker_host();
    host.strip_prefix("unix://").unwrap_or(&host).to_owned()
}

/// Fails the test, saying why and what to do, unless the engine answers on its socket, the
/// podman CLI works and the test image is there. Checked once per test binary.
#[track_caller]
pub fn require_engine() {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    if let Err(problem) = READY.get_or_init(check_engine) {
        panic!("the container engine is not usable: {problem}; {SETUP_HINT}");
    }
}

fn check_engine() -> Result<(), String> {
    let socket = socket_path();
    let ping = engine_get(&socket, "/_ping")
        .map_err(|error| format!("nothing answers on {} ({error})", docker_host()))?;
    if !ping.ends_with("OK") {
        return Err(format!(
            "{} answered /_ping with {ping:?}, not OK",
            docker_host()
        ));
    }
    let output = podman_output(&["image", "exists", TEST_IMAGE])
        .map_err(|error| format!("the podman CLI does not run ({error})"))?;
    if !output.status.success() {
        return Err(format!(
            "the image {TEST_IMAGE} is missing ({})",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(())
}

/// A bare HTTP/1.0 GET on the engine's unix socket: the status line and body as text.
fn engine_get(socket: &str, path: &str) -> std::io::Result<String> {
    let mut stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: engine\r\n\r\n")?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer.trim_end().to_owned())
}

fn podman_output(args: &[&str]) -> std::io::Result<Output> {
    let mut command = Command::new("podman");
    // The CLI talks to the same engine as the gateway: through its socket when the test run
    // names one, else to the local store the default socket serves.
    if let Ok(host) = std::env::var("MCPGW_TEST_DOCKER_HOST")
        && !host.is_empty()
    {
        command.arg("--url").arg(host);
    }
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
}

/// Runs `podman args`; fails the test when it does not succeed. Answers stdout.
#[track_caller]
pub fn podman(args: &[&str]) -> String {
    let output = podman_output(args).unwrap_or_else(|error| panic!("podman {args:?}: {error}"));
    assert!(
        output.status.success(),
        "podman {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A container as `podman ps -a` lists it.
#[derive(Debug, Clone)]
pub struct Container {
    pub id: String,
    pub name: String,
    /// `running`, `exited`, `created`, ...
    pub state: String,
    pub labels: serde_json::Map<String, Value>,
}

/// Every container, running or not, that carries `label` (`key=value`, or `key`).
pub fn containers_with_label(label: &str) -> Vec<Container> {
    let filter = format!("label={label}");
    let listed = podman(&["ps", "-a", "--filter", &filter, "--format", "json"]);
    let listed: Value = if listed.trim().is_empty() {
        Value::Array(Vec::new())
    } else {
        serde_json::from_str(&listed).unwrap_or_else(|error| panic!("podman ps: {error}: {listed}"))
    };
    listed
        .as_array()
        .unwrap()
        .iter()
        .map(|container| Container {
            id: container["Id"].as_str().unwrap_or_default().to_owned(),
            name: container["Names"][0]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            state: container["State"].as_str().unwrap_or_default().to_owned(),
            labels: container["Labels"].as_object().cloned().unwrap_or_default(),
        })
        .collect()
}

/// The containers the gateway runs for the server `server_id`.
pub fn containers_of_server(server_id: &str) -> Vec<Container> {
    containers_with_label(&format!("{SERVER_LABEL}={server_id}"))
}

/// `podman inspect` of one container.
pub fn inspect(id: &str) -> Value {
    let text = podman(&["inspect", id]);
    let parsed: Value =
        serde_json::from_str(&text).unwrap_or_else(|error| panic!("podman inspect: {error}"));
    parsed[0].clone()
}

/// Starts a container from the test image with these labels and arguments, detached, named
/// `name`; answers its id. Register it with a [`ContainerGuard`] first.
#[track_caller]
pub fn run_labelled(name: &str, labels: &[(&str, &str)], args: &[&str]) -> String {
    let mut command: Vec<String> = ["run", "-d", "--name", name]
        .iter()
        .map(|arg| (*arg).to_owned())
        .collect();
    for (key, value) in labels {
        command.push("--label".to_owned());
        command.push(format!("{key}={value}"));
    }
    command.push(TEST_IMAGE.to_owned());
    command.extend(args.iter().map(|arg| (*arg).to_owned()));
    let command: Vec<&str> = command.iter().map(String::as_str).collect();
    podman(&command).trim().to_owned()
}

/// Stops a container at once (the fixture, as PID 1, ignores SIGTERM).
pub fn stop_now(name: &str) {
    podman(&["stop", "--time", "0", name]);
}

/// Removes containers when dropped, also when the test failed: by name, and every container
/// that carries one of the given labels (the ones the gateway ran for the test's servers).
#[derive(Default)]
pub struct ContainerGuard {
    names: Vec<String>,
    labels: Vec<String>,
}

impl ContainerGuard {
    pub fn new() -> Self {
        Self::default()
    }

    /// A container this test creates itself.
    pub fn name(mut self, name: &str) -> Self {
        self.names.push(name.to_owned());
        self
    }

    /// Containers the gateway runs for `server_id`.
    pub fn server(mut self, server_id: &str) -> Self {
        self.labels.push(format!("{SERVER_LABEL}={server_id}"));
        self
    }

    /// Every container labelled `label` (`key=value`).
    pub fn label(mut self, label: &str) -> Self {
        self.labels.push(label.to_owned());
        self
    }

    pub fn add_label(&mut self, label: &str) {
        self.labels.push(label.to_owned());
    }
}

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        let mut doomed: Vec<String> = self.names.clone();
        for label in &self.labels {
            let filter = format!("label={label}");
            if let Ok(output) = podman_output(&["ps", "-aq", "--filter", &filter]) {
                doomed.extend(
                    String::from_utf8_lossy(&output.stdout)
                        .split_whitespace()
                        .map(str::to_owned),
                );
            }
        }
        if doomed.is_empty() {
            return;
        }
        let mut args = vec!["rm", "--force", "--ignore", "--time", "0"];
        args.extend(doomed.iter().map(String::as_str));
        let _ = podman_output(&args);
    }
}

/// The gateway's instance id, which it keeps in `<data dir>/instance_id`.
#[track_caller]
pub fn instance_id(data_dir: &Path) -> String {
    let path = data_dir.join("instance_id");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("the gateway keeps no {}: {error}", path.display()));
    let id = text.trim().to_owned();
    assert!(!id.is_empty(), "{} is empty", path.display());
    id
}

/// A name unique to this test and this process, valid as a server id and a container name:
/// suites run in parallel, and share one engine with other suites.
pub fn unique(test: &str) -> String {
    format!("{test}-{}", std::process::id())
}

/// Polls `condition` until it holds, or fails with `what` after `within`.
#[track_caller]
pub fn wait_until(within: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !condition() {
        assert!(Instant::now() < deadline, "not within {within:?}: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Reads a field of `/proc/{pid}/status` (`CapEff`, `NoNewPrivs`), trimmed.
pub fn proc_status_field(pid: i64, field: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| {
        line.strip_prefix(field)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(|value| value.trim().to_owned())
    })
}
