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
//!
//! The web console's routes have a document of their own, `/ui/openapi.json` (HTML pages,
//! redirects, urlencoded forms, a session cookie), checked the same way in the same three
//! modes, with its response headers too (where a redirect leads, the cookies a sign-in sets):
//! auth off; auth on with a session that an admin key signed in over raw HTTP (its cookie on
//! every request, its CSRF token in the forms); auth on without a session, where every page
//! must answer the documented 303 to the sign-in page and every form the documented 401, whatever
//! its query string or form holds (the session is looked at before either is read).

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::peers::repository_root;
use support::{RunningGateway, cli_key, fixture_server_yaml, gateway, raw_exchange};

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
    // check; schemathesis cannot speak the protocol. The curated endpoints speak the same
    // (tests/endpoints.rs checks them).
    "/mcp",
    "/mcp/v/{name}",
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

/// What differs between the runs of the two documents.
struct Suite {
    config: &'static str,
    checks: &'static str,
    budget_seconds: &'static str,
    excluded_paths: &'static [&'static str],
}

/// The REST API's runs.
const API: Suite = Suite {
    config: SCHEMATHESIS_CONFIG,
    checks: CHECKS,
    budget_seconds: RUN_BUDGET_SECONDS,
    excluded_paths: EXCLUDED_PATHS,
};

/// Runs schemathesis on `location` (the document's URL, or a file with `--url`) and fails with
/// its report unless every check passed.
fn run_schemathesis(gw: &RunningGateway, location: &str, extra: &[&str]) {
    run_suite(&API, gw, location, extra);
}

/// Runs schemathesis as `suite` says on `location` (the document's URL, or a file with `--url`)
/// and fails with its report unless every check passed.
fn run_suite(suite: &Suite, gw: &RunningGateway, location: &str, extra: &[&str]) {
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("schemathesis.toml");
    std::fs::write(&config, suite.config).unwrap();
    let mut command = Command::new(schemathesis());
    command
        .arg("--config-file")
        .arg(&config)
        .args(["--no-color", "run", location])
        .args(["--checks", suite.checks])
        .args(["--max-examples", MAX_EXAMPLES])
        .arg("--generation-deterministic")
        .args(["--max-time", suite.budget_seconds])
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
    for path in suite.excluded_paths {
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

// ----- the web console ---------------------------------------------------------------------------

/// The console's document.
const CONSOLE_DOCUMENT: &str = "/ui/openapi.json";

/// The console's runs. Its pages answer in milliseconds and the coverage phase of its document
/// takes a few seconds here; the budget bounds the fuzzing that follows, so that the three runs
/// together add well under a minute.
const CONSOLE: Suite = Suite {
    config: CONSOLE_CONFIG,
    checks: "not_a_server_error,status_code_conformance,response_schema_conformance,\
             content_type_conformance,response_headers_conformance",
    budget_seconds: "10",
    excluded_paths: &[],
};

/// As [`SCHEMATHESIS_CONFIG`], for the console: `validation_mismatch` fails the run, and each
/// 5xx allowed is an answer a page shows about a dependency that generated input can make
/// unreachable, documented on its operation.
const CONSOLE_CONFIG: &str = r#"
[warnings]
display = ["validation_mismatch"]
fail-on = ["validation_mismatch"]

# A server created through the form from generated fields runs a command that does not exist;
# starting it shows the 503 McpServerUnavailableError page saying why.
[[operations]]
include-name = "POST /ui/servers/{id}/{action}"
checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", "503"]

# A tool call whose server cannot start (or does not answer in time) shows the tool's page with
# the front end's 502 or 504.
[[operations]]
include-name = "POST /ui/tools/{name}"
checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", "502", "504"]
"#;

/// The console's document as the gateway serves it (to anyone: it needs no session).
fn console_document(gw: &RunningGateway) -> Value {
    let answer = raw_exchange(
        gw.address(),
        format!(
            "GET {CONSOLE_DOCUMENT} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            gw.address()
        )
        .as_bytes(),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(
        answer
            .header("content-type")
            .is_some_and(|value| value.starts_with("application/json")),
        "{:?}",
        answer.headers
    );
    serde_json::from_str(&answer.body).expect("the console's document is JSON")
}

/// Writes `document` where schemathesis reads it; answers the file's path.
fn document_file(work: &tempfile::TempDir, document: &Value) -> String {
    let file = work.path().join("console.json");
    std::fs::write(&file, serde_json::to_vec(document).unwrap()).unwrap();
    file.to_str().unwrap().to_owned()
}

/// The value of cookie `name` among an answer's `Set-Cookie` headers.
fn set_cookie(answer: &support::RawAnswer, name: &str) -> Option<String> {
    answer
        .headers
        .iter()
        .filter(|(header, _)| header == "set-cookie")
        .find_map(|(_, value)| {
            let pair = value.split(';').next()?;
            let (key, value) = pair.split_once('=')?;
            (key == name).then(|| value.to_owned())
        })
}

/// Signs in to the console with `key` as a browser does, over raw HTTP: the sign-in page's token
/// and cookie, then the key form. Answers the session cookie's value.
fn console_session(gw: &RunningGateway, key: &str) -> String {
    let page = raw_exchange(
        gw.address(),
        format!(
            "GET /ui/login HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            gw.address()
        )
        .as_bytes(),
    );
    assert_eq!(page.status, 200, "{}", page.body);
    let token = set_cookie(&page, "mcpgw_login").expect("the sign-in page sets its token");
    let form = format!("login_token={token}&api_key={key}");
    let signed_in = raw_exchange(
        gw.address(),
        format!(
            "POST /ui/login/key HTTP/1.1\r\nHost: {}\r\nCookie: mcpgw_login={token}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{form}",
            gw.address(),
            form.len()
        )
        .as_bytes(),
    );
    assert_eq!(signed_in.status, 303, "{}", signed_in.body);
    set_cookie(&signed_in, "mcpgw_session").expect("signing in sets the session cookie")
}

/// The session's CSRF token, as its pages carry it (`data-csrf` on the body).
fn csrf_token(gw: &RunningGateway, session: &str) -> String {
    let page = raw_exchange(
        gw.address(),
        format!(
            "GET /ui/servers HTTP/1.1\r\nHost: {}\r\nCookie: mcpgw_session={session}\r\n\
             Connection: close\r\n\r\n",
            gw.address()
        )
        .as_bytes(),
    );
    assert_eq!(page.status, 200, "{}", page.body);
    page.body
        .split("data-csrf=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .filter(|token| !token.is_empty())
        .expect("the page carries the session's CSRF token")
        .to_owned()
}

/// Every operation of `document`: (path, method, operation).
fn console_operations(document: &mut Value) -> Vec<(String, String, &mut Value)> {
    document["paths"]
        .as_object_mut()
        .unwrap()
        .iter_mut()
        .flat_map(|(path, item)| {
            item.as_object_mut()
                .unwrap()
                .iter_mut()
                .map(move |(method, operation)| (path.clone(), method.clone(), operation))
        })
        .collect()
}

/// Whether an operation needs a session (it takes the session scheme, and not as an option).
fn needs_session(operation: &Value) -> bool {
    operation["security"]
        .as_array()
        .is_some_and(|requirements| {
            !requirements.is_empty()
                && !requirements
                    .iter()
                    .any(|requirement| requirement == &json!({}))
        })
}

#[test]
fn with_auth_off_every_console_answer_matches_its_document() {
    let (gw, _catalog) = start(tempfile::tempdir().unwrap(), "");
    run_suite(&CONSOLE, &gw, &gw.url(CONSOLE_DOCUMENT), &[]);
}

#[test]
fn with_auth_on_a_signed_in_admin_gets_only_documented_console_answers() {
    let data_dir = tempfile::tempdir().unwrap();
    let key = admin_key(data_dir.path());
    let (gw, _catalog) = start(data_dir, "auth:\n  enabled: true\n");
    let session = console_session(&gw, &key);
    let csrf = csrf_token(&gw, &session);
    // The forms carry the session's token, as the pages hand it to the browser, so that the
    // generated forms reach the actions behind it (a wrong token is a generated negative case,
    // answered with the documented 403).
    let mut document = console_document(&gw);
    let mut forms = 0;
    for schema in document["components"]["schemas"]
        .as_object_mut()
        .unwrap()
        .values_mut()
    {
        // The server forms are `allOf` the fields and what each mode needs.
        let fields = if schema.get("allOf").is_some() {
            &mut schema["allOf"][0]
        } else {
            schema
        };
        if let Some(field) = fields["properties"].get_mut("csrf_token") {
            *field = json!({"type": "string", "enum": [csrf]});
            forms += 1;
        }
    }
    assert!(forms >= 5, "only {forms} forms carry the CSRF token");
    let work = tempfile::tempdir().unwrap();
    let file = document_file(&work, &document);
    run_suite(
        &CONSOLE,
        &gw,
        &file,
        &[
            "--url",
            &gw.base_url,
            "--header",
            &format!("Cookie: mcpgw_session={session}"),
            // With the session's own CSRF token, signing out ends the session this run uses,
            // and every later request would only be sent to sign in; the auth-off run and the
            // run without a session exercise it.
            "--exclude-name",
            "POST /ui/logout",
        ],
    );
    // The run did not lose its session: the pages still open.
    let still = raw_exchange(
        gw.address(),
        format!(
            "GET /ui/servers HTTP/1.1\r\nHost: {}\r\nCookie: mcpgw_session={session}\r\n\
             Connection: close\r\n\r\n",
            gw.address()
        )
        .as_bytes(),
    );
    assert_eq!(still.status, 200, "{}", still.body);
}

#[test]
fn with_auth_on_a_console_request_without_a_session_is_sent_to_sign_in() {
    let data_dir = tempfile::tempdir().unwrap();
    let (gw, _catalog) = start(data_dir, "auth:\n  enabled: true\n");
    let mut document = console_document(&gw);
    // Every operation that needs a session keeps only the answers to a request without one: a
    // page (a GET) redirects to the sign-in page, which comes back to it afterwards; anything
    // else answers 401. htmx's header, which turns a page's redirect into a 401, is left out.
    // The session is looked at before the query string or the form is read, so even one that
    // cannot be read (a repeated field, a body that is not urlencoded) gets the same answer.
    // Anything else (a page served, a 403, a 404, a 415, a 422) is an undocumented status and
    // fails the run.
    let mut public = Vec::new();
    let mut protected = 0;
    for (path, method, operation) in console_operations(&mut document) {
        if !needs_session(operation) {
            public.push(format!("{} {path}", method.to_uppercase()));
            continue;
        }
        protected += 1;
        let responses = operation["responses"].as_object_mut().unwrap();
        let kept = if method == "get" {
            let mut redirect = responses
                .get("303")
                .cloned()
                .unwrap_or_else(|| panic!("GET {path} needs a session but documents no 303"));
            redirect["headers"]["Location"]["schema"]["pattern"] = json!(r"^/ui/login\?next=/ui/");
            ("303", redirect)
        } else {
            let refused = responses
                .get("401")
                .cloned()
                .unwrap_or_else(|| panic!("{method} {path} needs a session but documents no 401"));
            ("401", refused)
        };
        responses.clear();
        responses.insert(kept.0.to_owned(), kept.1);
        if let Some(parameters) = operation["parameters"].as_array_mut() {
            parameters.retain(|parameter| parameter["name"] != "HX-Request");
        }
    }
    assert!(
        protected >= 20,
        "only {protected} operations need a session"
    );
    let work = tempfile::tempdir().unwrap();
    let file = document_file(&work, &document);
    let mut extra = vec!["--url".to_owned(), gw.base_url.clone()];
    // The sign-in pages, the assets and the document answer anyone; the other runs cover them.
    for operation in &public {
        extra.push("--exclude-name".to_owned());
        extra.push(operation.clone());
    }
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    run_suite(&CONSOLE, &gw, &file, &extra);
}
