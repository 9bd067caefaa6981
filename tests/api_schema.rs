//! End-to-end check of the OpenAPI document against the running gateway: schemathesis (installed
//! by `scripts/install-test-deps.sh` into `.venv-schemathesis/`) reads `/api/openapi.json`,
//! generates valid and invalid requests for every operation, sends them to the real binary, and
//! fails on any 5xx, any status code the document does not list for the operation, any response
//! body that breaks its documented schema, any undocumented content type, and any operation that
//! refused every request the document calls valid (a document looser than the handlers).
//!
//! The gateway runs with a fixture server, a group and a filesystem discovery source holding a
//! pending and a quarantined candidate, so every route family answers with real data. Three
//! runs: auth off; auth on with an admin key; auth on without a credential, where every answer
//! must be the documented 401. Each run is bounded (examples per operation, derandomized
//! generation, a time budget, one worker) and killed if it outlives its deadline.

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::peers::repository_root;
use support::{RunningGateway, cli_key, fixture_server_yaml, gateway};

/// Test cases per operation in the fuzzing phase.
const MAX_EXAMPLES: &str = "5";
/// schemathesis's own budget for one run; the coverage phase alone takes about 20 s here.
const RUN_BUDGET_SECONDS: &str = "45";
/// The backstop for a run that hangs: it is killed and the test fails.
const RUN_DEADLINE: Duration = Duration::from_secs(120);

const CHECKS: &str = "not_a_server_error,status_code_conformance,response_schema_conformance,\
                      content_type_conformance";

/// Operations left out of every run, each because it cannot be exercised by generated requests:
const EXCLUDED_PATHS: &[&str] = &[
    // The MCP Streamable HTTP endpoint: its answers follow the MCP specification (JSON-RPC
    // bodies, SSE streams, sessions), which the conformance suite and tests/mcp_endpoint.rs
    // check; schemathesis cannot speak the protocol.
    "/mcp",
    // The WebSocket upgrade of the event stream: a generated plain GET cannot complete a
    // handshake, and an accepted one would hold the connection open; tests/events_ws.rs checks it.
    "/api/ws/events",
];

/// schemathesis's configuration. Its `validation_mismatch` warning says that an operation refused
/// every request generated as valid by the document, with 400s or 422s: the handler's rules are
/// stricter than the document says, so a client generated from it would send requests that fail.
/// That warning fails the run; schemathesis's other warnings (operations that answered only 404
/// for generated ids, ...) are about the generated data, not the document, and are not shown.
///
/// Then the per-operation exceptions to `not_a_server_error`. Each 5xx allowed here is an answer
/// docs/api.md prescribes about a dependency the generated requests can make unreachable,
/// documented on its operation; every other 5xx fails the run.
const SCHEMATHESIS_CONFIG: &str = r#"
[warnings]
display = ["validation_mismatch"]
fail-on = ["validation_mismatch"]

# A generated docker source points at an engine socket that does not exist here; the gateway
# answers its scan with 503 DiscoverySourceUnavailableError naming the reason.
[[operations]]
include-name = "POST /api/discovery/sources/{id}/scan"
checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", "503"]

# A server created from generated fields runs a command that does not exist; the gateway
# answers its start with 503 McpServerUnavailableError saying why.
[[operations]]
include-name = "POST /api/mcp_servers/{id}/start"
checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", "503"]
"#;

fn schemathesis() -> PathBuf {
    let path = repository_root().join(".venv-schemathesis/bin/schemathesis");
    assert!(
        path.exists(),
        "schemathesis is missing ({} does not exist): run scripts/install-test-deps.sh \
         (scripts/test.sh runs it first)",
        path.display()
    );
    path
}

/// A gateway with every route family live, and auth as `auth_yaml` says.
fn start(data_dir: tempfile::TempDir, auth_yaml: &str) -> (RunningGateway, tempfile::TempDir) {
    let catalog = tempfile::tempdir().unwrap();
    let fixture = serde_json::to_string(&support::fixture_binary().display().to_string()).unwrap();
    std::fs::write(
        catalog.path().join("candidate.yaml"),
        format!("mode: subprocess\ncommand: [{fixture}]\n"),
    )
    .unwrap();
    std::fs::write(catalog.path().join("broken.yaml"), "mode: nonsense\n").unwrap();
    let yaml = format!(
        "mcp_servers:\n{}  pool:\n    mode: group\n    strategy: round_robin\n    min_healthy: 1\n    \
         members: [{{id: fixture, weight: 1}}]\n\
         discovery:\n  refresh_interval_s: 3600\n  sources:\n    - {{id: catalog, type: filesystem, \
         mode: additive, config: {{path: \"{}\"}}}}\n{auth_yaml}",
        fixture_server_yaml("fixture", &[]),
        catalog.path().display(),
    );
    let gw = gateway().data_dir(data_dir).config(&yaml).start();
    (gw, catalog)
}

/// Runs schemathesis on `location` (the document's URL, or a file with `--url`) and fails with
/// its report unless every check passed.
fn run_schemathesis(gw: &RunningGateway, location: &str, extra: &[&str]) {
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("schemathesis.toml");
    std::fs::write(&config, SCHEMATHESIS_CONFIG).unwrap();
    let mut command = Command::new(schemathesis());
    command
        .arg("--config-file")
        .arg(&config)
        .args(["--no-color", "run", location])
        .args(["--checks", CHECKS])
        .args(["--max-examples", MAX_EXAMPLES])
        .arg("--generation-deterministic")
        .args(["--max-time", RUN_BUDGET_SECONDS])
        .args(["--workers", "1"])
        .args(["--phases", "examples,coverage,fuzzing"])
        .args(["--request-timeout", "20"])
        // Generated credentials would be refused and lock the test's address out (429); the
        // runs send the credential they mean to, or none.
        .args(["--generation-with-security-parameters", "false"])
        .args(extra)
        .current_dir(work.path())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for path in EXCLUDED_PATHS {
        command.args(["--exclude-path", path]);
    }
    let mut child = command.spawn().expect("schemathesis starts");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > RUN_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let report = out_reader.join().unwrap();
    let errors = err_reader.join().unwrap();
    let Some(status) = status else {
        panic!(
            "schemathesis did not finish within {RUN_DEADLINE:?}; its output so far:\n{report}\n{errors}"
        );
    };
    let mismatched = validation_mismatches(&report);
    assert!(
        mismatched.is_empty(),
        "the handlers refused every request that the document calls valid for {} operation(s), \
         so the document is looser than the API (bring the handlers' rules into the schemas): \
         {}\nschemathesis's report:\n{report}\n{errors}",
        mismatched.len(),
        mismatched.join(", ")
    );
    assert!(
        status.success(),
        "schemathesis failed ({status}); its report of each failure:\n{report}\n{errors}\n\
         gateway log (last lines):\n{}",
        tail(&gw.stderr(), 40)
    );
    // A run that tested nothing would pass vacuously.
    assert!(
        report.contains("Tested:") && !report.contains("Tested: 0"),
        "schemathesis tested no operation:\n{report}\n{errors}"
    );
}

/// The operations schemathesis lists under its "Schema validation mismatch" warning, such as
/// `POST /api/mcp_servers`.
fn validation_mismatches(report: &str) -> Vec<String> {
    report
        .lines()
        .skip_while(|line| !line.starts_with("Schema validation mismatch"))
        .skip(1)
        .take_while(|line| line.is_empty() || line.starts_with(' '))
        .filter_map(|line| line.strip_prefix("  - "))
        .map(str::to_owned)
        .collect()
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn document_url(gw: &RunningGateway) -> String {
    gw.url("/api/openapi.json")
}

fn admin_key(data_dir: &Path) -> String {
    cli_key(data_dir, "user:schema-admin", Some("admin"))
}

#[test]
fn with_auth_off_every_answer_matches_the_document() {
    let (gw, _catalog) = start(tempfile::tempdir().unwrap(), "");
    run_schemathesis(&gw, &document_url(&gw), &[]);
}

#[test]
fn with_auth_on_an_admin_key_gets_only_documented_answers() {
    let data_dir = tempfile::tempdir().unwrap();
    let key = admin_key(data_dir.path());
    let (gw, _catalog) = start(data_dir, "auth:\n  enabled: true\n");
    run_schemathesis(
        &gw,
        &document_url(&gw),
        &[
            "--header",
            &format!("X-API-Key: {key}"),
            // schemathesis reuses the key ids that `GET /api/auth/keys` lists, so this run would
            // revoke its own credential and every later request would be refused (then locked
            // out); the auth-off run exercises the revocation.
            "--exclude-name",
            "DELETE /api/auth/keys/{key_id}",
        ],
    );
}

#[test]
fn with_auth_on_a_request_without_a_key_gets_the_documented_401() {
    let data_dir = tempfile::tempdir().unwrap();
    let key = admin_key(data_dir.path());
    let (gw, _catalog) = start(data_dir, "auth:\n  enabled: true\n");
    // The document itself needs a credential; it is fetched with the admin key and handed to
    // schemathesis as a file, so that the requests it sends carry none.
    let mut answer = ureq::get(&document_url(&gw))
        .header("X-API-Key", &key)
        .call()
        .expect("the document is served to an admin");
    let mut document: Value = answer.body_mut().read_json().unwrap();
    // Every operation that takes credentials must document the 401; the copy handed to
    // schemathesis keeps only that answer, so that anything else a request without a credential
    // gets (a 404, a 200 that leaked through) is an undocumented status and fails the run.
    let mut protected = 0;
    for (path, item) in document["paths"].as_object_mut().unwrap() {
        for (method, operation) in item.as_object_mut().unwrap() {
            if operation.get("security").is_none() {
                continue;
            }
            let responses = operation["responses"].as_object_mut().unwrap();
            let unauthenticated = responses.get("401").cloned().unwrap_or_else(|| {
                panic!("{method} {path} takes credentials but does not document the 401")
            });
            responses.clear();
            responses.insert("401".to_owned(), unauthenticated);
            protected += 1;
        }
    }
    assert!(
        protected > 40,
        "only {protected} operations take credentials"
    );
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("openapi.json");
    std::fs::write(&file, serde_json::to_vec(&document).unwrap()).unwrap();
    // Only the operations that take credentials: the probes, /metrics and /docs answer anyone.
    run_schemathesis(
        &gw,
        file.to_str().unwrap(),
        &["--url", &gw.base_url, "--include-path-regex", "^/api/"],
    );
}
