//! The `docker` discovery source against a real engine: which containers become candidates,
//! what their definitions say, how an unreachable engine reads, how the factory checks its
//! settings, and that `changed` follows the engine's events.
//!
//! The engine is the one at `MCPGW_TEST_DOCKER_HOST` (default `unix:///tmp/podman.sock`), with
//! the image `localhost/mcpgw-fixture:test` present; the tests fail, saying so, when it does
//! not answer. Containers are started with the `podman` command-line client on that engine and
//! removed by a guard, also when an assertion fails.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcpgw_discovery::{
    DiscoveredCandidate, DiscoveryMode, DiscoverySource, DiscoverySourceFactory, SourceDefinition,
    SourceOrigin,
};
use mcpgw_runner_docker::{DockerSourceFactory, EngineAddress, connect_engine};
use serde_json::{Map, Value, json};

const IMAGE: &str = "localhost/mcpgw-fixture:test";

/// Serialises the tests that start labelled containers: `changed` of one test would otherwise
/// see the containers of another.
static ENGINE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn engine_host() -> String {
    std::env::var("MCPGW_TEST_DOCKER_HOST").unwrap_or_else(|_| "unix:///tmp/podman.sock".into())
}

fn engine_address() -> EngineAddress {
    EngineAddress::parse(&engine_host()).expect("MCPGW_TEST_DOCKER_HOST is a unix socket")
}

/// Fails the test, saying why, when the engine does not answer.
async fn require_engine() -> EngineAddress {
    let address = engine_address();
    if let Err(error) = connect_engine(&address).await {
        panic!(
            "these tests need the container engine at {address} (set MCPGW_TEST_DOCKER_HOST, or \
             start `podman system service --time=0 unix:///tmp/podman.sock`): {error}"
        );
    }
    address
}

fn unique_prefix(test: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "mcpgw-disc-{test}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

fn podman(args: &[&str]) -> String {
    let output = Command::new("podman")
        .arg("--url")
        .arg(engine_host())
        .args(args)
        .output()
        .expect("the podman command-line client runs");
    assert!(
        output.status.success(),
        "podman {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// The containers a test started; dropping it removes them.
#[derive(Default)]
struct Containers {
    names: Vec<String>,
}

impl Containers {
    /// Starts a fixture server container named `name` with `labels`; answers its id.
    fn run(&mut self, name: &str, labels: &[(&str, &str)]) -> String {
        self.names.push(name.to_owned());
        let mut args = vec![
            "run".to_owned(),
            "-d".to_owned(),
            "--name".to_owned(),
            name.into(),
        ];
        for (key, value) in labels {
            args.push("--label".to_owned());
            args.push(format!("{key}={value}"));
        }
        args.extend([IMAGE.to_owned(), "--http".to_owned(), "8080".to_owned()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        podman(&args)
    }
}

impl Drop for Containers {
    fn drop(&mut self) {
        if self.names.is_empty() {
            return;
        }
        let _ = Command::new("podman")
            .arg("--url")
            .arg(engine_host())
            .args(["rm", "-f", "-t", "0"])
            .args(&self.names)
            .output();
    }
}

fn short(id: &str) -> &str {
    &id[..12]
}

fn definition(source_id: &str, config: Value) -> SourceDefinition {
    let Value::Object(config) = config else {
        panic!("config must be an object");
    };
    SourceDefinition {
        source_id: source_id.to_owned(),
        source_type: "docker".to_owned(),
        mode: DiscoveryMode::Additive,
        enabled: true,
        config,
        origin: SourceOrigin::Config,
    }
}

fn source_at(socket: &str) -> Arc<dyn DiscoverySource> {
    DockerSourceFactory
        .build(&definition("docker-0", json!({"socket_path": socket})))
        .expect("a valid docker source")
}

/// The candidates of `source` that belong to the test whose containers start with `prefix`
/// (other tests may run labelled containers on the same engine).
async fn scan_own(source: &dyn DiscoverySource, prefix: &str) -> Vec<DiscoveredCandidate> {
    source
        .scan()
        .await
        .expect("the engine answers")
        .into_iter()
        .filter(|candidate| candidate.location.contains(prefix))
        .collect()
}

/// Why the factory refuses `definition` (a built source has no `Debug` to show).
fn build_error(definition: SourceDefinition, expectation: &str) -> String {
    match DockerSourceFactory.build(&definition) {
        Ok(_) => panic!("the factory built {definition:?}; expected {expectation}"),
        Err(error) => error,
    }
}

fn object(value: Value) -> Map<String, Value> {
    let Value::Object(map) = value else {
        panic!("expected an object");
    };
    map
}

#[tokio::test]
async fn scan_answers_the_running_enabled_containers_with_their_definitions() {
    let address = require_engine().await;
    let _engine = ENGINE.lock().await;
    let prefix = unique_prefix("scan");
    let mut containers = Containers::default();

    let stdio_name = format!("{prefix}-stdio");
    let stdio_id = containers.run(
        &stdio_name,
        &[
            ("mcp.gateway.enabled", "true"),
            ("mcp.gateway.name", "disc-stdio"),
            ("mcp.gateway.command", r#"["--tool-delay-ms", "5"]"#),
            ("mcp.gateway.description", "Fixture over stdio"),
        ],
    );
    let http_name = format!("{prefix}-http");
    let http_id = containers.run(
        &http_name,
        &[
            ("mcp.gateway.enabled", "YES"),
            ("mcp.gateway.mode", "http"),
            ("mcp.gateway.port", "8080"),
        ],
    );
    let broken_name = format!("{prefix}-broken");
    let broken_id = containers.run(
        &broken_name,
        &[
            ("mcp.gateway.enabled", "1"),
            ("mcp.gateway.name", "disc-broken"),
            ("mcp.gateway.mode", "http"),
            ("mcp.gateway.port", "eighty"),
        ],
    );
    containers.run(
        &format!("{prefix}-disabled"),
        &[("mcp.gateway.enabled", "false")],
    );
    containers.run(&format!("{prefix}-unlabelled"), &[]);
    let stopped_name = format!("{prefix}-stopped");
    containers.run(&stopped_name, &[("mcp.gateway.enabled", "true")]);
    podman(&["stop", "-t", "0", &stopped_name]);

    let source = source_at(&address.to_string());
    let candidates = scan_own(source.as_ref(), &prefix).await;

    let summary: Vec<(&str, &str)> = candidates
        .iter()
        .map(|candidate| (candidate.name.as_str(), candidate.location.as_str()))
        .collect();
    let broken_location = format!("container {} ({broken_name})", short(&broken_id));
    let stdio_location = format!("container {} ({stdio_name})", short(&stdio_id));
    let http_location = format!("container {} ({http_name})", short(&http_id));
    assert_eq!(
        summary,
        vec![
            ("disc-broken", broken_location.as_str()),
            ("disc-stdio", stdio_location.as_str()),
            (http_name.as_str(), http_location.as_str()),
        ],
        "exactly the running enabled containers, sorted by name"
    );

    let reason = candidates[0]
        .definition
        .clone()
        .expect_err("a broken label");
    assert!(
        reason.contains("mcp.gateway.port") && reason.contains("`eighty`"),
        "the reason names the label and its value: {reason}"
    );
    assert_eq!(
        candidates[1].definition,
        Ok(object(json!({
            "mode": "docker",
            "image": IMAGE,
            "docker_host": address.to_string(),
            "args": ["--tool-delay-ms", "5"],
            "description": "Fixture over stdio",
        })))
    );
    assert_eq!(
        candidates[2].definition,
        Ok(object(json!({
            "mode": "remote",
            "endpoint": format!("http://{http_name}:8080/mcp"),
        })))
    );
}

#[tokio::test]
async fn scan_reports_an_unreachable_engine_naming_its_socket_and_recovers_when_it_answers() {
    let address = require_engine().await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let socket = dir.path().join("engine.sock");
    let source = source_at(&format!("unix://{}", socket.display()));

    let started = Instant::now();
    let missing = source.scan().await.expect_err("no socket, no scan");
    assert!(
        missing.0.contains(&socket.display().to_string()),
        "the error names the socket: {missing}"
    );

    // A socket file nobody listens on: the engine died without removing it.
    drop(std::os::unix::net::UnixListener::bind(&socket).expect("bind a socket"));
    let refused = source.scan().await.expect_err("nobody listens");
    assert!(
        refused.0.contains(&socket.display().to_string()),
        "the error names the socket: {refused}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "failed scans answer within their bound"
    );

    // The engine comes back at that path: the next scan connects afresh.
    std::fs::remove_file(&socket).expect("remove the dead socket");
    std::os::unix::fs::symlink(address.socket(), &socket).expect("link the live socket");
    source
        .scan()
        .await
        .expect("the source reconnects once the engine answers");
}

/// Whether `source` stays unchanged for two seconds after `action`, in one of three tries.
/// Other tests may start labelled containers on the same engine at any moment, so one try can
/// be disturbed; a source that wrongly reacts to `action` (or ignores its scans) fails all three.
async fn stays_unchanged_after(
    source: &dyn DiscoverySource,
    mut action: impl FnMut(usize),
) -> bool {
    for attempt in 0..3 {
        source.scan().await.expect("the engine answers");
        let quiet = tokio::time::timeout(Duration::from_secs(1), source.changed())
            .await
            .is_err();
        if !quiet {
            continue;
        }
        action(attempt);
        if tokio::time::timeout(Duration::from_secs(2), source.changed())
            .await
            .is_err()
        {
            return true;
        }
    }
    false
}

#[tokio::test]
async fn changed_completes_after_a_labelled_container_starts_and_not_before() {
    let address = require_engine().await;
    let _engine = ENGINE.lock().await;
    let prefix = unique_prefix("changed");
    let mut containers = Containers::default();
    let source = source_at(&address.to_string());

    assert!(
        stays_unchanged_after(source.as_ref(), |attempt| {
            containers.run(&format!("{prefix}-unlabelled-{attempt}"), &[]);
        })
        .await,
        "an unlabelled container is no change for discovery"
    );

    let mut changed = Box::pin(source.changed());
    let labelled = format!("{prefix}-labelled");
    containers.run(&labelled, &[("mcp.gateway.enabled", "true")]);
    tokio::time::timeout(Duration::from_secs(15), &mut changed)
        .await
        .expect("changed completes after a labelled container started");
    tokio::time::timeout(Duration::from_secs(1), source.changed())
        .await
        .expect("the source stays changed until the next scan");

    let seen = scan_own(source.as_ref(), &prefix).await;
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert!(
        stays_unchanged_after(source.as_ref(), |_| {}).await,
        "a scan takes in what changed"
    );

    podman(&["rm", "-f", "-t", "0", &labelled]);
    tokio::time::timeout(Duration::from_secs(15), source.changed())
        .await
        .expect("changed completes after a labelled container went away");
    assert!(scan_own(source.as_ref(), &prefix).await.is_empty());
}

#[test]
fn factory_builds_docker_sources_without_contacting_the_engine() {
    let factory = DockerSourceFactory;
    assert_eq!(factory.source_types(), vec!["docker"]);
    for config in [
        json!({}),
        json!({"socket_path": "/nonexistent/docker.sock"}),
        json!({"socket_path": "unix:///nonexistent/docker.sock", "removal_grace_s": 0}),
    ] {
        factory
            .build(&definition("docker-0", config.clone()))
            .unwrap_or_else(|error| panic!("{config} builds: {error}"));
    }
}

#[test]
fn factory_rejects_unknown_keys_naming_the_valid_ones() {
    let error = build_error(
        definition("docker-0", json!({"socket": "/var/run/docker.sock"})),
        "an unknown key",
    );
    assert!(error.contains("config.socket "), "{error}");
    assert!(
        error.contains("socket_path") && error.contains("removal_grace_s"),
        "{error}"
    );
}

#[test]
fn factory_rejects_a_socket_path_that_is_not_an_absolute_unix_socket() {
    for bad in [
        json!("docker.sock"),
        json!("unix://relative.sock"),
        json!("tcp://host:2375"),
    ] {
        let error = build_error(
            definition("docker-0", json!({"socket_path": bad})),
            "a relative socket path",
        );
        assert!(error.contains("socket_path"), "{error}");
        assert!(error.contains("unix:///"), "{error}");
    }
    let error = build_error(
        definition("docker-0", json!({"socket_path": 42})),
        "a number is no path",
    );
    assert!(
        error.contains("socket_path") && error.contains("string"),
        "{error}"
    );
}

#[test]
fn factory_applies_the_common_checks() {
    let error = build_error(
        definition("docker-0", json!({"removal_grace_s": "soon"})),
        "a grace that is not a number",
    );
    assert!(error.contains("removal_grace_s"), "{error}");
    let error = build_error(definition("not valid!", json!({})), "a bad source id");
    assert!(error.contains("not valid!"), "{error}");
}
