//! The docker runner against a real container engine: the Engine API at
//! `MCPGW_TEST_DOCKER_HOST` (default `unix:///tmp/podman.sock`) and the `podman` command-line
//! client, running the project's test image `localhost/mcpgw-fixture:test`.
//!
//! Every test uses its own gateway instance id, so tests running in parallel never see each
//! other's containers, and a guard removes whatever a test left, even when an assertion fails.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{
    CreateContainerOptions, ListContainersOptions, RemoveContainerOptions,
};
use mcpgw_core::{
    Clock, ContainerCli, ContainerEngine, LaunchError, LaunchSpec, LogBuffer, MonoTime,
    ProcessSpawner, ServerId, ServerOutput, SpawnedProcess, Timestamp,
};
use mcpgw_runner_docker::{
    DefaultEngine, DockerRunner, DockerRunnerSettings, EngineAddress, OWNER_LABEL, SERVER_LABEL,
    connect_engine, remove_leftover_containers,
};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const FIXTURE_IMAGE: &str = "localhost/mcpgw-fixture:test";
const PATIENCE: Duration = Duration::from_secs(30);

fn engine_address() -> EngineAddress {
    let text = std::env::var("MCPGW_TEST_DOCKER_HOST")
        .unwrap_or_else(|_| "unix:///tmp/podman.sock".to_owned());
    EngineAddress::parse(&text).unwrap_or_else(|error| panic!("MCPGW_TEST_DOCKER_HOST: {error}"))
}

/// The engine the tests inspect through; the tests fail here, saying why, when it is down.
async fn engine() -> Docker {
    let address = engine_address();
    let client = connect_engine(&address).await.unwrap_or_else(|error| {
        panic!(
            "these tests need a container engine at {address} (set MCPGW_TEST_DOCKER_HOST, or \
             start `podman system service --time=0 unix:///tmp/podman.sock`): {error}"
        )
    });
    client.inspect_image(FIXTURE_IMAGE).await.unwrap_or_else(|error| {
        panic!("the test image {FIXTURE_IMAGE} is missing (run scripts/build-test-image.sh): {error}")
    });
    client
}

/// A gateway instance id no other test (or test run) uses.
fn unique_instance_id(test: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| since.subsec_nanos())
        .unwrap_or_default();
    format!(
        "test-{test}-{}-{}-{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Removes every container labelled with the test's owner id when the test ends, however it
/// ends.
struct RemoveOwnedContainers(String);

impl Drop for RemoveOwnedContainers {
    fn drop(&mut self) {
        let owner = self.0.clone();
        // A fresh runtime on its own thread: the test's runtime may be the one unwinding.
        let cleaned = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|error| error.to_string())?
                .block_on(remove_leftover_containers(
                    &DefaultEngine::EngineApi(engine_address()),
                    &owner,
                ))
        })
        .join();
        if let Ok(Err(error)) = cleaned {
            eprintln!("cleanup of the test's containers failed: {error}");
        }
    }
}

struct StillClock;

#[async_trait::async_trait]
impl Clock for StillClock {
    fn now(&self) -> MonoTime {
        MonoTime::from_duration(Duration::ZERO)
    }
    fn wall(&self) -> Timestamp {
        Timestamp::from_unix_micros(0)
    }
    async fn sleep(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }
}

fn log_buffer(server: &ServerId) -> Arc<LogBuffer> {
    Arc::new(LogBuffer::new(server.clone(), Arc::new(StillClock)))
}

fn runner(instance_id: &str) -> DockerRunner {
    DockerRunner::new(DockerRunnerSettings {
        instance_id: instance_id.to_owned(),
        default_engine: Some(DefaultEngine::EngineApi(engine_address())),
        stop_grace: Duration::from_secs(1),
    })
}

fn launch(image: &str, args: &[&str], engine: ContainerEngine) -> LaunchSpec {
    LaunchSpec::Docker {
        image: image.to_owned(),
        args: args.iter().map(|arg| (*arg).to_owned()).collect(),
        env: BTreeMap::from([("MCPGW_TEST_VALUE".to_owned(), "42".to_owned())]),
        network: String::new(),
        memory: None,
        cpus: None,
        read_only: true,
        volumes: Vec::new(),
        engine,
    }
}

/// The two backends every behaviour is checked on.
fn backends() -> [(&'static str, ContainerEngine); 2] {
    [
        ("engine api", ContainerEngine::Default),
        ("podman cli", ContainerEngine::Cli(ContainerCli::Podman)),
    ]
}

async fn containers_of(client: &Docker, owner: &str) -> Vec<String> {
    let options = ListContainersOptions {
        all: true,
        filters: Some(HashMap::from([(
            "label".to_owned(),
            vec![format!("{OWNER_LABEL}={owner}")],
        )])),
        ..Default::default()
    };
    // Podman shows a container being stopped in a state bollard cannot read; that passes.
    let mut attempts = 0;
    let listed = loop {
        attempts += 1;
        match client.list_containers(Some(options.clone())).await {
            Err(bollard::errors::Error::JsonDataError { .. }) if attempts < 50 => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => break other.expect("listing containers"),
        }
    };
    listed
        .into_iter()
        .filter_map(|container| container.id)
        .collect()
}

/// The one container `owner` has, waiting for the CLI client to have created it.
async fn the_container_of(client: &Docker, owner: &str) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let mut found = containers_of(client, owner).await;
        if found.len() == 1 {
            return found.remove(0);
        }
        assert!(
            found.len() < 2,
            "more than one container for {owner}: {found:?}"
        );
        assert!(
            Instant::now() < deadline,
            "no container appeared for {owner}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_until_gone(client: &Docker, owner: &str) {
    let deadline = Instant::now() + PATIENCE;
    while !containers_of(client, owner).await.is_empty() {
        assert!(
            Instant::now() < deadline,
            "the containers of {owner} were not removed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_for_lines(logs: &LogBuffer, count: usize) -> Vec<String> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let lines: Vec<String> = logs.tail(100).into_iter().map(|line| line.line).collect();
        if lines.len() >= count || Instant::now() >= deadline {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends `initialize` and answers the first line the server writes back.
async fn initialize(spawned: &mut SpawnedProcess) -> String {
    let request = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"runner-test","version":"1"}}}"#;
    spawned
        .streams
        .to_server
        .write_all(format!("{request}\n").as_bytes())
        .await
        .expect("writing to the container's stdin");
    spawned
        .streams
        .to_server
        .flush()
        .await
        .expect("flushing stdin");
    let output = std::mem::replace(
        &mut spawned.streams.from_server,
        ServerOutput::stream(tokio::io::empty()),
    );
    let mut reader = BufReader::new(readable(output));
    let mut line = String::new();
    tokio::time::timeout(PATIENCE, reader.read_line(&mut line))
        .await
        .expect("no answer to initialize in time")
        .expect("reading the container's stdout");
    line
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_speaks_mcp_logs_its_stderr_runs_hardened_and_is_removed_on_terminate() {
    let client = engine().await;
    for (backend, engine) in backends() {
        let owner = unique_instance_id("serve");
        let _cleanup = RemoveOwnedContainers(owner.clone());
        let server = ServerId::parse("fixture").unwrap();
        let logs = log_buffer(&server);
        let mut spec = launch(FIXTURE_IMAGE, &["--stderr-at-start", "3"], engine);
        if let LaunchSpec::Docker { memory, cpus, .. } = &mut spec {
            *memory = Some("64m".to_owned());
            *cpus = Some("0.5".to_owned());
        }
        let mut spawned = runner(&owner)
            .spawn(&server, &spec, Arc::clone(&logs))
            .await
            .unwrap_or_else(|error| panic!("{backend}: spawn failed: {error}"));
        assert_eq!(spawned.control.pid(), None, "{backend}");

        let answer = initialize(&mut spawned).await;
        let answer: serde_json::Value = serde_json::from_str(&answer)
            .unwrap_or_else(|error| panic!("{backend}: not JSON ({error}): {answer}"));
        assert_eq!(answer["id"], 1, "{backend}: {answer}");
        assert!(
            answer["result"]["serverInfo"]["name"].is_string(),
            "{backend}: {answer}"
        );

        let lines = wait_for_lines(&logs, 3).await;
        assert_eq!(
            lines.get(..3).unwrap_or(&lines),
            [
                "fixture start line 0",
                "fixture start line 1",
                "fixture start line 2"
            ],
            "{backend}"
        );

        let id = the_container_of(&client, &owner).await;
        let inspected = client
            .inspect_container(&id, None)
            .await
            .expect("inspecting the server's container");
        let name = inspected.name.clone().unwrap_or_default();
        assert!(
            name.trim_start_matches('/').starts_with("mcpgw-fixture-"),
            "{backend}: {name}"
        );
        let labels = inspected
            .config
            .as_ref()
            .and_then(|config| config.labels.clone())
            .unwrap_or_default();
        assert_eq!(labels.get(OWNER_LABEL), Some(&owner), "{backend}");
        assert_eq!(
            labels.get(SERVER_LABEL).map(String::as_str),
            Some("fixture"),
            "{backend}"
        );
        let host = inspected.host_config.expect("the container's host config");
        let cap_drop = host.cap_drop.unwrap_or_default();
        // Docker echoes `ALL`; podman lists every capability it dropped.
        let every_default_capability = [
            "CHOWN",
            "DAC_OVERRIDE",
            "FOWNER",
            "FSETID",
            "KILL",
            "NET_BIND_SERVICE",
            "SETFCAP",
            "SETGID",
            "SETPCAP",
            "SETUID",
            "SYS_CHROOT",
        ];
        assert!(
            cap_drop.iter().any(|cap| cap == "ALL")
                || every_default_capability
                    .iter()
                    .all(|cap| cap_drop.iter().any(|dropped| dropped == cap)),
            "{backend}: capabilities dropped: {cap_drop:?}"
        );
        // What the server process really has: no capability, and no way to gain privileges.
        let pid = inspected
            .state
            .as_ref()
            .and_then(|state| state.pid)
            .filter(|pid| *pid > 0)
            .unwrap_or_else(|| panic!("{backend}: the container has no process"));
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_else(|error| panic!("{backend}: reading the server's status: {error}"));
        for (field, expected) in [
            ("CapEff:", "0000000000000000"),
            ("CapPrm:", "0000000000000000"),
            ("CapBnd:", "0000000000000000"),
            ("NoNewPrivs:", "1"),
        ] {
            let value = status
                .lines()
                .find_map(|line| line.strip_prefix(field))
                .map(str::trim);
            assert_eq!(value, Some(expected), "{backend}: {field}");
        }
        assert_eq!(host.readonly_rootfs, Some(true), "{backend}");
        assert_eq!(host.network_mode.as_deref(), Some("none"), "{backend}");
        let security = host.security_opt.unwrap_or_default();
        assert!(
            security
                .iter()
                .any(|opt| opt.starts_with("no-new-privileges")),
            "{backend}: security options: {security:?}"
        );
        assert_eq!(host.memory, Some(64 * 1024 * 1024), "{backend}");
        assert_eq!(host.nano_cpus, Some(500_000_000), "{backend}");

        tokio::time::timeout(PATIENCE, spawned.control.terminate(Duration::from_secs(1)))
            .await
            .unwrap_or_else(|_| panic!("{backend}: terminate did not return"));
        assert!(
            containers_of(&client, &owner).await.is_empty(),
            "{backend}: the container is still there after terminate"
        );
        let exit = tokio::time::timeout(PATIENCE, spawned.control.exited())
            .await
            .unwrap_or_else(|_| panic!("{backend}: no exit status after terminate"));
        assert!(!exit.description.is_empty(), "{backend}");
        // Terminating again is harmless and immediate.
        tokio::time::timeout(
            Duration::from_secs(5),
            spawned.control.terminate(Duration::from_secs(1)),
        )
        .await
        .unwrap_or_else(|_| panic!("{backend}: a second terminate hung"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_that_exits_by_itself_reports_its_exit_code() {
    let client = engine().await;
    for (backend, engine) in backends() {
        let owner = unique_instance_id("exit");
        let _cleanup = RemoveOwnedContainers(owner.clone());
        let server = ServerId::parse("quitter").unwrap();
        let logs = log_buffer(&server);
        let spawned = runner(&owner)
            .spawn(
                &server,
                &launch(FIXTURE_IMAGE, &["--exit-at-start", "3"], engine),
                Arc::clone(&logs),
            )
            .await
            .unwrap_or_else(|error| panic!("{backend}: spawn failed: {error}"));
        let exit = tokio::time::timeout(PATIENCE, spawned.control.exited())
            .await
            .unwrap_or_else(|_| panic!("{backend}: the exit was not reported"));
        assert_eq!(exit.code, Some(3), "{backend}: {exit:?}");
        assert_eq!(
            exit.description, "container exited with code 3",
            "{backend}"
        );
        let lines = wait_for_lines(&logs, 1).await;
        assert!(
            lines.iter().any(|line| line == "fixture exiting at start"),
            "{backend}: {lines:?}"
        );
        spawned.control.terminate(Duration::from_secs(1)).await;
        assert!(containers_of(&client, &owner).await.is_empty(), "{backend}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_every_handle_removes_a_running_container() {
    let client = engine().await;
    for (backend, engine) in backends() {
        let owner = unique_instance_id("drop");
        let _cleanup = RemoveOwnedContainers(owner.clone());
        let server = ServerId::parse("dropped").unwrap();
        let mut spawned = runner(&owner)
            .spawn(
                &server,
                &launch(FIXTURE_IMAGE, &[], engine),
                log_buffer(&server),
            )
            .await
            .unwrap_or_else(|error| panic!("{backend}: spawn failed: {error}"));
        // Running and answering, so the removal below is of a live container.
        assert!(
            initialize(&mut spawned).await.contains("\"id\":1"),
            "{backend}"
        );
        the_container_of(&client, &owner).await;
        drop(spawned);
        wait_until_gone(&client, &owner).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_terminates_both_return_once_the_container_is_gone() {
    let client = engine().await;
    for (backend, engine) in backends() {
        let owner = unique_instance_id("twice");
        let _cleanup = RemoveOwnedContainers(owner.clone());
        let server = ServerId::parse("twice").unwrap();
        let spawned = runner(&owner)
            .spawn(
                &server,
                &launch(FIXTURE_IMAGE, &[], engine),
                log_buffer(&server),
            )
            .await
            .unwrap_or_else(|error| panic!("{backend}: spawn failed: {error}"));
        the_container_of(&client, &owner).await;
        let grace = Duration::from_secs(1);
        tokio::time::timeout(
            PATIENCE,
            futures::future::join(
                spawned.control.terminate(grace),
                spawned.control.terminate(grace),
            ),
        )
        .await
        .unwrap_or_else(|_| panic!("{backend}: concurrent terminates hung"));
        assert!(containers_of(&client, &owner).await.is_empty(), "{backend}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_image_that_cannot_be_pulled_fails_clearly_and_leaves_no_container() {
    let client = engine().await;
    for (backend, engine) in backends() {
        let owner = unique_instance_id("noimage");
        let _cleanup = RemoveOwnedContainers(owner.clone());
        let server = ServerId::parse("ghost").unwrap();
        let image = "localhost/mcpgw-no-such-image:missing";
        let error = runner(&owner)
            .spawn(&server, &launch(image, &[], engine), log_buffer(&server))
            .await
            .expect_err("a missing image must fail the launch");
        assert!(
            matches!(error, LaunchError::SpawnFailed { .. }),
            "{backend}: {error:?}"
        );
        let text = error.to_string();
        assert!(
            text.contains(image) && text.contains("pull or build"),
            "{backend}: {text}"
        );
        assert!(containers_of(&client, &owner).await.is_empty(), "{backend}");
    }
}

#[tokio::test]
async fn an_unreachable_engine_fails_naming_its_socket() {
    let owner = unique_instance_id("nosocket");
    let socket = format!("/tmp/mcpgw-no-engine-{owner}.sock");
    let server = ServerId::parse("lonely").unwrap();
    let error = runner(&owner)
        .spawn(
            &server,
            &launch(
                FIXTURE_IMAGE,
                &[],
                ContainerEngine::Host(format!("unix://{socket}")),
            ),
            log_buffer(&server),
        )
        .await
        .expect_err("no engine listens there");
    assert!(
        matches!(error, LaunchError::SpawnFailed { .. }),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.contains(&socket) && text.contains("start the engine"),
        "{text}"
    );
}

/// Creates (without starting) a container labelled with `owner`, as a dead gateway leaves.
async fn leave_container(client: &Docker, owner: &str) -> String {
    let body = ContainerCreateBody {
        image: Some(FIXTURE_IMAGE.to_owned()),
        labels: Some(HashMap::from([(OWNER_LABEL.to_owned(), owner.to_owned())])),
        ..Default::default()
    };
    client
        .create_container(None::<CreateContainerOptions>, body)
        .await
        .expect("creating a leftover container")
        .id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftover_containers_of_this_owner_are_removed_and_others_are_not() {
    let client = engine().await;
    for default_engine in [
        DefaultEngine::EngineApi(engine_address()),
        DefaultEngine::Cli(ContainerCli::Podman),
    ] {
        let owner = unique_instance_id("leftover");
        let other_owner = unique_instance_id("neighbour");
        let _cleanup = RemoveOwnedContainers(owner.clone());
        let _other_cleanup = RemoveOwnedContainers(other_owner.clone());
        leave_container(&client, &owner).await;
        leave_container(&client, &owner).await;
        let neighbour = leave_container(&client, &other_owner).await;

        let removed = remove_leftover_containers(&default_engine, &owner)
            .await
            .unwrap_or_else(|error| panic!("{default_engine}: {error}"));
        assert_eq!(removed, 2, "{default_engine}");
        assert!(
            containers_of(&client, &owner).await.is_empty(),
            "{default_engine}"
        );
        assert_eq!(
            containers_of(&client, &other_owner).await,
            std::slice::from_ref(&neighbour),
            "{default_engine}: another owner's container must survive"
        );
        assert_eq!(
            remove_leftover_containers(&default_engine, &owner).await,
            Ok(0),
            "{default_engine}"
        );
        client
            .remove_container(
                &neighbour,
                Some(RemoveContainerOptions {
                    force: true,
                    ..Default::default()
                }),
            )
            .await
            .expect("removing the neighbour's container");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_is_swept_before_the_first_container_and_never_after() {
    let client = engine().await;
    for (backend, engine) in backends() {
        let owner = unique_instance_id("first-launch");
        let _cleanup = RemoveOwnedContainers(owner.clone());
        let leftover = leave_container(&client, &owner).await;
        let runner = runner(&owner);
        let server = ServerId::parse("first").unwrap();
        let spawned = runner
            .spawn(
                &server,
                &launch(FIXTURE_IMAGE, &[], engine.clone()),
                log_buffer(&server),
            )
            .await
            .unwrap_or_else(|error| panic!("{backend}: {error}"));
        let running = the_container_of(&client, &owner).await;
        assert_ne!(running, leftover, "{backend}: the leftover is gone");

        // A docker-mode server registered now must not cost the running one its container.
        assert_eq!(runner.remove_leftovers(&engine).await, Ok(0), "{backend}");
        assert_eq!(containers_of(&client, &owner).await, [running], "{backend}");
        spawned.control.terminate(Duration::from_secs(1)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_leftovers_sweeps_an_engine_once_it_answers() {
    let client = engine().await;
    let owner = unique_instance_id("sweep-once");
    let _cleanup = RemoveOwnedContainers(owner.clone());
    let runner = runner(&owner);
    let missing = format!("unix:///tmp/mcpgw-no-engine-{owner}.sock");
    let error = runner
        .remove_leftovers(&ContainerEngine::Host(missing.clone()))
        .await
        .expect_err("no engine listens there");
    assert!(
        error.contains(missing.trim_start_matches("unix://")),
        "{error}"
    );

    leave_container(&client, &owner).await;
    leave_container(&client, &owner).await;
    assert_eq!(
        runner.remove_leftovers(&ContainerEngine::Default).await,
        Ok(2)
    );
    assert!(containers_of(&client, &owner).await.is_empty());
    // Once is enough: a container left now is this run's, as far as the runner knows.
    let later = leave_container(&client, &owner).await;
    assert_eq!(
        runner.remove_leftovers(&ContainerEngine::Default).await,
        Ok(0)
    );
    assert_eq!(containers_of(&client, &owner).await, [later]);
}

#[tokio::test]
async fn an_empty_owner_id_is_refused_instead_of_matching_unlabelled_containers() {
    let error = remove_leftover_containers(&DefaultEngine::EngineApi(engine_address()), " ")
        .await
        .expect_err("an empty owner must be refused");
    assert!(error.contains("instance id is empty"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_the_engine_cannot_run_fails_the_launch_and_is_removed() {
    let client = engine().await;
    let owner = unique_instance_id("unrunnable");
    let _cleanup = RemoveOwnedContainers(owner.clone());
    let server = ServerId::parse("unrunnable").unwrap();
    let mut spec = launch(FIXTURE_IMAGE, &[], ContainerEngine::Default);
    if let LaunchSpec::Docker { volumes, .. } = &mut spec {
        // A file cannot be mounted over a directory: the engine creates the container, then
        // fails to attach to it (podman prepares the container there) or to start it.
        volumes.push("/etc/hostname:/tmp:ro".to_owned());
    }
    let error = runner(&owner)
        .spawn(&server, &spec, log_buffer(&server))
        .await
        .expect_err("a file mounted over a directory cannot run");
    let text = error.to_string();
    assert!(
        text.contains(FIXTURE_IMAGE) && text.contains("not a directory"),
        "{text}"
    );
    assert!(containers_of(&client, &owner).await.is_empty());
}

/// The container's output as a byte stream: the CLI runner hands over its client's stdout pipe,
/// the API runner a stream.
fn readable(output: ServerOutput) -> std::pin::Pin<Box<dyn tokio::io::AsyncRead + Send>> {
    match output {
        ServerOutput::Stream(stream) => stream,
        ServerOutput::Pipe(fd) => Box::pin(
            tokio::net::unix::pipe::Receiver::from_owned_fd(fd)
                .expect("the descriptor is the read end of a pipe"),
        ),
    }
}
