//! End-to-end tests of the command line: configuration checks and start-up errors.

mod support;

use std::process::{Command, Output, Stdio};

use support::{fixture_server_yaml, gateway, gateway_binary};

fn run(args: &[&str], dir: &std::path::Path) -> Output {
    Command::new(gateway_binary())
        .args(args)
        .current_dir(dir)
        .env_remove("MCP_CONFIG")
        .env_remove("MCP_HTTP_PORT")
        .stdin(Stdio::null())
        .output()
        .expect("the gateway binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn config_check_accepts_a_valid_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ok.yaml");
    std::fs::write(
        &path,
        format!("mcp_servers:\n{}", fixture_server_yaml("demo", &[])),
    )
    .unwrap();
    let output = run(
        &["config", "check", "--config", path.to_str().unwrap()],
        dir.path(),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("ok (1 mcp servers)"),
        "{}",
        text(&output.stdout)
    );
}

#[test]
fn config_check_accepts_global_options_before_the_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ok.yaml");
    std::fs::write(&path, "mcp_servers: {}\n").unwrap();
    let output = run(
        &["--config", path.to_str().unwrap(), "config", "check"],
        dir.path(),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
}

#[test]
fn config_check_names_the_file_the_line_and_the_key_with_a_suggestion() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(
        &path,
        "mcp_servers:\n  math:\n    mode: subprocess\n    comand: [python3]\n",
    )
    .unwrap();
    let output = run(
        &["config", "check", "--config", path.to_str().unwrap()],
        dir.path(),
    );
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("bad.yaml:4"),
        "names the file and line 4: {stderr}"
    );
    assert!(stderr.contains("comand"), "names the key: {stderr}");
    assert!(
        stderr.contains("did you mean `command`"),
        "suggests the nearest key: {stderr}"
    );
}

#[test]
fn config_check_reports_every_invalid_value() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(
        &path,
        "mcp_servers:\n  a:\n    mode: subprocess\n    command: [x]\n    idle_ttl_s: 0\n  b:\n    mode: subprocess\n    command: [x]\n    max_consecutive_failures: 1000\n",
    )
    .unwrap();
    let output = run(
        &["config", "check", "--config", path.to_str().unwrap()],
        dir.path(),
    );
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("bad.yaml:5") && stderr.contains("idle_ttl_s"),
        "{stderr}"
    );
    assert!(
        stderr.contains("bad.yaml:9") && stderr.contains("max_consecutive_failures"),
        "{stderr}"
    );
}

#[test]
fn config_check_reports_tool_names_that_collide() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("names.yaml");
    // Bad input: no prefixes and two servers that both predefine `add`; and an id holding the
    // separator.
    let tools = "    tools: [{name: add, inputSchema: {type: object}}]\n";
    std::fs::write(
        &path,
        format!(
            "tool_names: {{prefix: none, separator: \"-\"}}\nmcp_servers:\n  a:\n    mode: \
             subprocess\n    command: [x]\n{tools}  b:\n    mode: subprocess\n    command: \
             [x]\n{tools}  my-c:\n    mode: subprocess\n    command: [x]\n"
        ),
    )
    .unwrap();
    let output = run(
        &["config", "check", "--config", path.to_str().unwrap()],
        dir.path(),
    );
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(
            "mcp_servers.a.tools[0] \"add\" and mcp_servers.b.tools[0] \"add\" would both be \
             listed as \"add\""
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("names.yaml:11") && stderr.contains("id `my-c` contains `-`"),
        "{stderr}"
    );
}

#[test]
fn config_check_reports_the_errors_of_curated_endpoints() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    // Bad input: an override on an entry without `tool`, a principal pattern without a kind,
    // and two entries served under one name.
    std::fs::write(
        &path,
        "mcp_servers:\n  math:\n    mode: subprocess\n    command: [x]\nendpoints:\n  support:\n    \
         tools:\n      - server: math\n        title: Maths\n      - {server: math, tool: add, \
         name: sum}\n      - {server: math, tool: plus, name: sum}\n    allow: [alice]\n",
    )
    .unwrap();
    let output = run(
        &["config", "check", "--config", path.to_str().unwrap()],
        dir.path(),
    );
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    for expected in [
        "bad.yaml:9:9: endpoints.support.tools[0].title: name/title/description/annotations need \
         `tool`: they override one tool",
        "bad.yaml:11:",
        "endpoints.support.tools[1] and endpoints.support.tools[2] would both be served as \"sum\"",
        "bad.yaml:12:",
        "endpoints.support.allow[0]: principal `alice` has no kind",
    ] {
        assert!(stderr.contains(expected), "{expected}: {stderr}");
    }

    // A server the file does not declare is no error: one may be created over the API.
    let path = dir.path().join("ok.yaml");
    std::fs::write(
        &path,
        "endpoints:\n  support:\n    tools: [{server: crm}]\n    deny: [\"user:mallory\"]\n",
    )
    .unwrap();
    let output = run(
        &["config", "check", "--config", path.to_str().unwrap()],
        dir.path(),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
}

#[test]
fn a_missing_config_file_stops_the_start_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let output = run(
        &[
            "--http",
            "--port",
            "0",
            "--config",
            "does-not-exist.yaml",
            "--data-dir",
            "data",
        ],
        dir.path(),
    );
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(stderr.contains("does-not-exist.yaml"), "{stderr}");
    assert!(stderr.contains("cannot read"), "{stderr}");
}

#[test]
fn an_invalid_config_file_stops_the_start_with_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("broken.yaml"),
        "mcp_servers:\n  x:\n    mode: subprocess\n    command: [a]\n    idle_ttl_s: \"soon\"\n",
    )
    .unwrap();
    let output = run(
        &[
            "--http",
            "--port",
            "0",
            "--config",
            "broken.yaml",
            "--data-dir",
            "data",
        ],
        dir.path(),
    );
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(stderr.contains("broken.yaml:5"), "{stderr}");
    assert!(stderr.contains("idle_ttl_s"), "{stderr}");
    // The databases are opened while the file is read; the refused start removes the data
    // directory it created...
    assert!(
        !dir.path().join("data").exists(),
        "the refused start left its data directory"
    );

    // ...and leaves alone one that was there, with what it held.
    std::fs::create_dir(dir.path().join("kept")).unwrap();
    std::fs::write(dir.path().join("kept/instance_id"), "earlier\n").unwrap();
    let output = run(
        &[
            "--http",
            "--port",
            "0",
            "--config",
            "broken.yaml",
            "--data-dir",
            "kept",
        ],
        dir.path(),
    );
    assert!(!output.status.success());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("kept/instance_id")).unwrap(),
        "earlier\n"
    );
}

#[test]
fn an_unset_variable_in_the_config_is_an_error_and_a_set_one_is_expanded() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = "mcp_servers:\n  x:\n    mode: subprocess\n    command: [\"${MCPGW_TEST_CMD}\"]\n    description: \"${MCPGW_TEST_DESC:-fallback}\"\n";
    std::fs::write(dir.path().join("vars.yaml"), yaml).unwrap();
    let output = run(&["config", "check", "--config", "vars.yaml"], dir.path());
    assert!(!output.status.success());
    assert!(
        text(&output.stderr).contains("MCPGW_TEST_CMD"),
        "{}",
        text(&output.stderr)
    );

    let gw = gateway()
        .env("MCPGW_TEST_CMD", "/bin/true")
        .config(yaml)
        .start();
    let details = gw.get("/api/mcp_servers/x").json();
    assert_eq!(details["command"][0], "/bin/true");
    assert_eq!(details["description"], "fallback");
}

#[test]
fn without_a_config_the_gateway_starts_empty() {
    let gw = gateway().start();
    assert_eq!(
        gw.get("/api/mcp_servers").json()["mcp_servers"],
        serde_json::json!([])
    );
}

#[test]
fn the_gateway_reads_gateway_yaml_from_the_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("gateway.yaml"),
        format!("mcp_servers:\n{}", fixture_server_yaml("found", &[])),
    )
    .unwrap();
    let output = run(&["config", "check", "--config", "gateway.yaml"], dir.path());
    assert!(output.status.success(), "{}", text(&output.stderr));
    let mut child = Command::new(gateway_binary())
        .args(["--http", "--port", "0", "--data-dir", "data"])
        .current_dir(dir.path())
        .env_remove("MCP_CONFIG")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let address = std::io::BufRead::lines(std::io::BufReader::new(stderr))
        .map_while(Result::ok)
        .find_map(|line| line.strip_prefix("listening on ").map(str::to_owned))
        .expect("the gateway prints its address");
    let answer = ureq::get(&format!("{address}/api/mcp_servers")).call();
    let body = match answer {
        Ok(mut response) => response.body_mut().read_to_string().unwrap(),
        Err(error) => panic!("{error} at {address}; the gateway: {:?}", child.try_wait()),
    };
    support::send_signal(i32::try_from(child.id()).unwrap(), libc::SIGTERM);
    let _ = child.wait();
    assert!(body.contains("\"found\""), "{body}");
}

/// The keys in the store under `data_dir`, read through the store adapter.
fn stored_keys(data_dir: &std::path::Path) -> Vec<mcpgw_authz::ApiKeyRecord> {
    use mcpgw_authz::AuthStore as _;
    let store = mcpgw_store_sqlite::SqliteStore::open(&data_dir.join("mcpgw.db")).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(store.keys())
        .unwrap()
}

#[test]
fn auth_create_key_prints_the_key_once_and_stores_only_its_hash() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_arg = data.to_str().unwrap();
    let output = run(
        &[
            "auth",
            "create-key",
            "--principal",
            "user:alice",
            "--name",
            "first admin",
            "--role",
            "admin",
            "--data-dir",
            data_arg,
        ],
        dir.path(),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "the raw key alone on stdout: {stdout}");
    let key = lines[0];
    // `mcp_` and base64url of at least 32 bytes.
    assert!(key.starts_with("mcp_") && key.len() >= 4 + 43, "{key}");
    assert!(
        key[4..]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        "{key}"
    );
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("user:alice") && stderr.contains("admin"),
        "{stderr}"
    );
    assert!(!stderr.contains(key), "the key is shown once, on stdout");

    // Global options also work before the subcommand; a second key is a different key.
    let output = run(
        &[
            "--data-dir",
            data_arg,
            "auth",
            "create-key",
            "--principal",
            "service:ci",
            "--name",
            "ci",
            "--expires-in-days",
            "30",
        ],
        dir.path(),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let second = text(&output.stdout).trim().to_owned();
    assert_ne!(second, key);

    let keys = stored_keys(&data);
    assert_eq!(keys.len(), 2);
    let hash = mcpgw_authz::PresentedApiKey::parse(Some(key))
        .unwrap()
        .hash();
    let first = keys
        .iter()
        .find(|record| record.hash == hash)
        .expect("stored by its hash");
    assert_eq!(first.principal.to_string(), "user:alice");
    assert_eq!(first.name, "first admin");
    assert_eq!(
        first.role.as_ref().map(ToString::to_string).as_deref(),
        Some("admin")
    );
    assert_eq!(first.expires_at, None);
    let ci = keys.iter().find(|record| record.hash != hash).unwrap();
    let expires = ci.expires_at.expect("an expiry was asked for");
    let days = (expires.unix_micros() - ci.created_at.unix_micros()) / 86_400_000_000;
    assert_eq!(days, 30);

    // Only the hash is kept: the raw keys appear nowhere in the database files.
    for entry in std::fs::read_dir(&data).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        let contents = String::from_utf8_lossy(&bytes);
        assert!(!contents.contains(&key[4..]) && !contents.contains(&second[4..]));
    }
}

#[test]
fn auth_create_key_refuses_bad_options_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_arg = data.to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (&["--principal", "alice", "--name", "k"], "alice"),
        (
            &[
                "--principal",
                "user:alice",
                "--name",
                "k",
                "--role",
                "no_such_role",
            ],
            "no_such_role",
        ),
        (
            &[
                "--principal",
                "user:alice",
                "--name",
                "k",
                "--expires-in-days",
                "0",
            ],
            "expires_in_days",
        ),
        (
            &[
                "--principal",
                "user:alice",
                "--name",
                "k",
                "--expires-in-days",
                "-3",
            ],
            "expires_in_days",
        ),
        (&["--principal", "user:alice", "--name", "   "], "name"),
    ];
    for (options, named) in cases {
        let mut args = vec!["auth", "create-key", "--data-dir", data_arg];
        args.extend_from_slice(options);
        let output = run(&args, dir.path());
        assert_eq!(
            output.status.code(),
            Some(2),
            "{options:?}: {}",
            text(&output.stderr)
        );
        assert!(
            text(&output.stdout).is_empty(),
            "{options:?}: no key is printed"
        );
        let stderr = text(&output.stderr);
        assert!(stderr.contains(named), "{options:?}: {stderr}");
    }
    assert!(
        stored_keys(&data).is_empty(),
        "no refused request made a key"
    );
}

/// Runs the binary with `stdin` as its standard input.
fn run_with_stdin(args: &[&str], dir: &std::path::Path, stdin: &[u8]) -> Output {
    use std::io::Write as _;
    let mut child = Command::new(gateway_binary())
        .args(args)
        .current_dir(dir)
        .env_remove("MCP_CONFIG")
        .env_remove("MCP_HTTP_PORT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the gateway binary runs");
    child
        .stdin
        .take()
        .expect("a piped stdin")
        .write_all(stdin)
        .expect("the password is written");
    child.wait_with_output().expect("the gateway binary ends")
}

/// An `AuthService` over the SQLite store under `data_dir` with its local users, as a gateway
/// on that directory has, and a runtime to drive it.
fn auth_over(data_dir: &std::path::Path) -> (mcpgw_gateway::AuthService, tokio::runtime::Runtime) {
    let store = std::sync::Arc::new(
        mcpgw_store_sqlite::SqliteStore::open(&data_dir.join("mcpgw.db")).unwrap(),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let auth = mcpgw_gateway::AuthService::new(
        mcpgw_gateway::AuthSettings {
            enabled: true,
            ..mcpgw_gateway::AuthSettings::default()
        },
        store.clone(),
        std::sync::Arc::new(mcpgw_core::NullEventSink),
        std::sync::Arc::new(mcpgw_gateway::TokioClock::default()),
        std::sync::Arc::new(mcpgw_gateway::OsSecrets),
    )
    .with_user_store(store);
    runtime.block_on(auth.load()).unwrap();
    (auth, runtime)
}

#[test]
fn auth_create_user_stores_a_user_whose_password_signs_in_with_its_roles() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_arg = data.to_str().unwrap();
    let password = "correct horse battery staple";
    let output = run_with_stdin(
        &[
            "auth",
            "create-user",
            "--name",
            "alice",
            "--role",
            "admin",
            "--role",
            "viewer",
            "--data-dir",
            data_arg,
        ],
        dir.path(),
        format!("{password}\n").as_bytes(),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).is_empty(), "nothing on stdout");
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("created user alice") && stderr.contains("user:alice"),
        "{stderr}"
    );
    assert!(stderr.contains("admin, viewer"), "{stderr}");
    assert!(!stderr.contains(password), "{stderr}");

    // The password (without its line break) signs in as user:alice, who holds both roles.
    let (auth, runtime) = auth_over(&data);
    let identity = runtime
        .block_on(auth.authenticate_password("alice", password, None))
        .expect("the password from stdin signs in");
    assert_eq!(identity.principal.to_string(), "user:alice");
    let roles: Vec<String> = auth
        .roles_of("user:alice")
        .unwrap()
        .iter()
        .map(|held| format!("{} {}", held.role, held.scope))
        .collect();
    assert_eq!(roles, ["admin global", "viewer global"]);
    // Bad input: the password with its line break is another password.
    let error = runtime
        .block_on(auth.authenticate_password("alice", &format!("{password}\n"), None))
        .unwrap_err();
    assert_eq!(error.to_string(), "Invalid user name or password");
    // Only the hash is kept: the password appears nowhere in the database files.
    for entry in std::fs::read_dir(&data).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains(password));
    }

    // A new password from stdin replaces the old one.
    let output = run_with_stdin(
        &[
            "auth",
            "set-password",
            "--name",
            "alice",
            "--data-dir",
            data_arg,
        ],
        dir.path(),
        b"a brand new passphrase\r\n",
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    runtime
        .block_on(auth.authenticate_password("alice", "a brand new passphrase", None))
        .expect("the new password signs in");
    assert!(
        runtime
            .block_on(auth.authenticate_password("alice", password, None))
            .is_err()
    );
}

#[test]
fn auth_create_user_refuses_bad_requests_with_exit_2_and_writes_nothing_more() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_arg = data.to_str().unwrap();
    let good = b"correct horse battery staple\n".as_slice();
    let first = run_with_stdin(
        &[
            "auth",
            "create-user",
            "--name",
            "alice",
            "--data-dir",
            data_arg,
        ],
        dir.path(),
        good,
    );
    assert!(first.status.success(), "{}", text(&first.stderr));

    // Bad input: a taken name, a short password, an empty stdin, an unknown role (named with
    // the roles that exist), a name that is not a user name, a new password for nobody.
    let cases: [(&[&str], &[u8], &[&str]); 6] = [
        (
            &["create-user", "--name", "alice"],
            good,
            &["user `alice` already exists"],
        ),
        (
            &["create-user", "--name", "bob"],
            b"too short\n",
            &["password: is 9 bytes long and must be at least 12"],
        ),
        (
            &["create-user", "--name", "bob"],
            b"",
            &["password: is 0 bytes long and must be at least 12"],
        ),
        (
            &[
                "create-user",
                "--name",
                "bob",
                "--role",
                "viewer",
                "--role",
                "superuser",
            ],
            good,
            &[
                "role `superuser` does not exist",
                "admin",
                "auditor",
                "operator",
            ],
        ),
        (&["create-user", "--name", ".bob"], good, &["user name: "]),
        (
            &["set-password", "--name", "ghost"],
            good,
            &["user `ghost` does not exist"],
        ),
    ];
    for (options, stdin, named) in cases {
        let mut args = vec!["auth"];
        args.extend_from_slice(options);
        args.extend_from_slice(&["--data-dir", data_arg]);
        let output = run_with_stdin(&args, dir.path(), stdin);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{options:?}: {stderr}");
        for word in named {
            assert!(stderr.contains(word), "{options:?}: {stderr}");
        }
    }

    // Only alice was made, with her first password and no role.
    let (auth, runtime) = auth_over(&data);
    let users = runtime.block_on(auth.list_users()).unwrap();
    let names: Vec<&str> = users.iter().map(|user| user.name.as_str()).collect();
    assert_eq!(names, ["alice"]);
    assert!(auth.roles_of("user:bob").unwrap().is_empty());
    runtime
        .block_on(auth.authenticate_password("alice", "correct horse battery staple", None))
        .expect("the first password still signs in");
}

#[test]
fn config_check_checks_each_discovery_source_against_its_type() {
    // Bad input: a misspelt docker key, a relative filesystem path, a filesystem source without
    // its path; a valid source beside them must not be reported.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("discovery.yaml");
    std::fs::write(
        &path,
        "discovery:\n  sources:\n\
         \x20   - {id: engine, type: docker, config: {sockett_path: /run/docker.sock}}\n\
         \x20   - {id: relative, type: filesystem, config: {path: servers.d}}\n\
         \x20   - {id: nopath, type: filesystem}\n\
         \x20   - {id: fine, type: docker, config: {socket_path: /run/docker.sock, removal_grace_s: 5}}\n",
    )
    .unwrap();
    let output = run(
        &["config", "check", "--config", path.to_str().unwrap()],
        dir.path(),
    );
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(stderr.contains("discovery.yaml"), "{stderr}");
    assert!(
        stderr.contains("discovery.sources[0] (`engine`)") && stderr.contains("sockett_path"),
        "{stderr}"
    );
    assert!(
        stderr.contains("discovery.sources[1] (`relative`)") && stderr.contains("servers.d"),
        "{stderr}"
    );
    assert!(
        stderr.contains("discovery.sources[2] (`nopath`)"),
        "{stderr}"
    );
    assert!(!stderr.contains("`fine`"), "{stderr}");

    // The same file stops the gateway's start, with the same reasons.
    let start = run(
        &["--config", path.to_str().unwrap(), "--data-dir", "data"],
        dir.path(),
    );
    assert!(!start.status.success());
    assert!(
        text(&start.stderr).contains("sockett_path"),
        "{}",
        text(&start.stderr)
    );
}

#[test]
fn an_open_address_with_auth_off_is_refused_unless_told_unsafe_no_auth() {
    let dir = tempfile::tempdir().unwrap();
    // Bad input: every IPv4 and every IPv6 interface, with authentication off.
    for host in ["0.0.0.0", "::"] {
        let output = run(
            &[
                "--http",
                "--host",
                host,
                "--port",
                "0",
                "--data-dir",
                "data",
            ],
            dir.path(),
        );
        assert!(!output.status.success(), "{host}: {}", text(&output.stderr));
        let stderr = text(&output.stderr);
        assert!(
            stderr.contains(&format!(
                "refusing to listen on {host} with authentication off"
            )) && stderr.contains("--unsafe-no-auth"),
            "{host}: {stderr}"
        );
    }

    // Loopback names and addresses are fine, and so is an open address once told so, or with
    // authentication on: each of these starts listening.
    let auth_on = dir.path().join("auth.yaml");
    std::fs::write(&auth_on, "auth: {enabled: true}\n").unwrap();
    let auth_on = auth_on.to_str().unwrap().to_owned();
    for (host, extra) in [
        ("localhost", vec![]),
        ("0.0.0.0", vec!["--unsafe-no-auth"]),
        ("0.0.0.0", vec!["--config", auth_on.as_str()]),
    ] {
        let mut child = Command::new(gateway_binary())
            .args([
                "--http",
                "--host",
                host,
                "--port",
                "0",
                "--data-dir",
                "data",
            ])
            .args(&extra)
            .current_dir(dir.path())
            .env_remove("MCP_CONFIG")
            .env("MCP_RATE_LIMIT_RPS", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let mut said = Vec::new();
        let mut listening = false;
        for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)) {
            let line = line.unwrap();
            if line.contains("listening on http://") {
                listening = true;
                break;
            }
            said.push(line);
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            listening,
            "{host} {extra:?} did not listen: {}",
            said.join("\n")
        );
        if extra.contains(&"--unsafe-no-auth") {
            assert!(
                said.iter().any(|line| line.contains("--unsafe-no-auth")),
                "the unsafe start is logged as such: {said:?}"
            );
        }
    }
}
