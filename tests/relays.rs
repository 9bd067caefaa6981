//! What upstream servers send their client during a call, through the gateway: sampling,
//! elicitation and roots requests, and log messages. The upstream is the official Python SDK's
//! server (`tests/python/sdk_server.py`), over stdio and over Streamable HTTP; the clients are
//! the official Python SDK's, over the gateway's `/mcp` (the `initialize` era).

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::peers::{
    RunningPeer, python, python_script, spawn_python_client, start_sdk_server_http, wait_for_file,
};

/// `stdio`: the SDK server over stdio; `remote`: the same over Streamable HTTP; `pool`: a group
/// whose one member is another stdio instance.
fn relay_gateway(remote: &RunningPeer) -> support::RunningGateway {
    let command = json!([
        python().display().to_string(),
        python_script("sdk_server.py").display().to_string(),
        "stdio"
    ]);
    let yaml = format!(
        "mcp_servers:\n\
         \x20 stdio: {{mode: subprocess, command: {command}}}\n\
         \x20 member: {{mode: subprocess, command: {command}}}\n\
         \x20 remote: {{mode: remote, endpoint: \"{}\"}}\n\
         \x20 pool: {{mode: group, strategy: round_robin, members: [{{id: member}}]}}\n",
        remote.url
    );
    support::gateway()
        .config(&yaml)
        .env("MCP_RATE_LIMIT_RPS", "0")
        .start()
}

fn call(name: &str, arguments: Value) -> Vec<String> {
    vec!["--call".to_owned(), name.to_owned(), arguments.to_string()]
}

/// The client options of one person: answers that name them, so that an answer that reaches
/// the wrong client shows.
fn person(url: &str, who: &str) -> Vec<String> {
    vec![
        url.to_owned(),
        "--protocol".to_owned(),
        "2025-11-25".to_owned(),
        "--no-list".to_owned(),
        "--sampling-reply".to_owned(),
        format!("{who}'s model"),
        "--elicitation-reply".to_owned(),
        format!("{who}'s answer"),
        "--root".to_owned(),
        format!("file:///home/{who}"),
    ]
}

fn call_texts(run: &Value) -> Vec<String> {
    run["calls"]
        .as_array()
        .expect("the client made calls")
        .iter()
        .map(|call| {
            assert!(call["error"].is_null(), "the call failed: {call}");
            assert_eq!(call["is_error"], false, "the tool failed: {call}");
            call["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// Two people call the same upstream at once; each gets only their own questions, and each
/// call answers with what its own client said.
fn two_clients_at_once(gateway: &support::RunningGateway, server: &str, with_roots: bool) {
    let url = format!("{}/mcp", gateway.base_url);
    let mut runs = Vec::new();
    for who in ["alice", "bob"] {
        let mut args = person(&url, who);
        for round in 0..3 {
            args.extend(call(
                &format!("{server}__ask_user"),
                json!({"question": format!("{who} question {round}")}),
            ));
            args.extend(call(
                &format!("{server}__ask_model"),
                json!({"prompt": format!("{who} prompt {round}")}),
            ));
        }
        if with_roots {
            args.extend(call(&format!("{server}__roots"), json!({})));
        }
        runs.push((who, spawn_python_client("http_client.py", &args)));
    }
    for (who, client) in runs {
        let run = client.wait();
        let texts = call_texts(&run);
        for round in 0..3 {
            assert_eq!(texts[2 * round], format!("the user said: {who}'s answer"));
            assert_eq!(
                texts[2 * round + 1],
                format!("the model said: {who}'s model")
            );
        }
        if with_roots {
            assert_eq!(texts[6], format!("file:///home/{who}"));
        }
        let asked = run["asked"].as_array().expect("what the client was asked");
        assert_eq!(
            asked.len(),
            6 + usize::from(with_roots),
            "{who} was asked once per question, prompt and roots: {asked:?}"
        );
        for question in asked {
            if let Some(text) = question["text"].as_str() {
                assert!(
                    text.starts_with(who),
                    "{who} was asked someone else's question: {question}"
                );
            }
        }
    }
}

#[test]
fn server_requests_reach_the_client_whose_call_made_them() {
    let remote = start_sdk_server_http();
    let gateway = relay_gateway(&remote);
    // Over stdio nothing says which call a request belongs to: the two clients take turns.
    two_clients_at_once(&gateway, "stdio", true);
    // Over Streamable HTTP a request comes on its call's stream.
    two_clients_at_once(&gateway, "remote", false);
    // Through a group, to the client whose call the group routed to the member.
    two_clients_at_once(&gateway, "pool", true);

    // A request on the upstream's standalone stream (the SDK sends roots/list there) goes to
    // the one client calling.
    let url = format!("{}/mcp", gateway.base_url);
    let mut args = person(&url, "carol");
    args.extend(call("remote__roots", json!({})));
    let run = spawn_python_client("http_client.py", &args).wait();
    assert_eq!(call_texts(&run), ["file:///home/carol"]);
}

#[test]
fn a_client_that_cannot_be_asked_is_never_asked() {
    let remote = start_sdk_server_http();
    let gateway = relay_gateway(&remote);
    let url = format!("{}/mcp", gateway.base_url);
    // Bad input: a client that declared no sampling, elicitation or roots calls tools that
    // need them. The upstream is refused at once ("method not found", as the client itself
    // would answer) and the call ends with the tool's error instead of waiting.
    let mut args = vec![
        url,
        "--protocol".to_owned(),
        "2025-11-25".to_owned(),
        "--no-list".to_owned(),
    ];
    for server in ["stdio", "remote"] {
        args.extend(call(
            &format!("{server}__ask_user"),
            json!({"question": "name?"}),
        ));
        args.extend(call(
            &format!("{server}__ask_model"),
            json!({"prompt": "hi"}),
        ));
    }
    let started = Instant::now();
    let run = spawn_python_client("http_client.py", &args).wait();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the calls waited instead of failing"
    );
    for call in run["calls"].as_array().unwrap() {
        let failed = call["is_error"] == true || !call["error"].is_null();
        assert!(failed, "a call needing a capability succeeded: {call}");
        let text = call.to_string();
        assert!(
            text.contains("capability") || text.contains("Method not found"),
            "the failure does not say why: {call}"
        );
    }
    assert_eq!(run["asked"], json!([]));
}

#[test]
fn log_messages_reach_the_caller_at_its_level() {
    let remote = start_sdk_server_http();
    let gateway = relay_gateway(&remote);
    let url = format!("{}/mcp", gateway.base_url);
    for server in ["stdio", "remote"] {
        let mut args = vec![
            url.clone(),
            "--protocol".to_owned(),
            "2025-11-25".to_owned(),
            "--no-list".to_owned(),
            "--log-level".to_owned(),
            "info".to_owned(),
        ];
        args.extend(call(
            &format!("{server}__log_and_echo"),
            json!({"message": "hello"}),
        ));
        let run = spawn_python_client("http_client.py", &args).wait();
        assert_eq!(call_texts(&run), ["hello"]);
        let logs = run["logs"].as_array().expect("the client's log messages");
        assert!(
            logs.iter()
                .any(|log| log["level"] == "info" && log["data"] == "info: hello"),
            "{server}: the info message did not arrive: {logs:?}"
        );
        assert!(
            !logs.iter().any(|log| log["level"] == "debug"),
            "{server}: a message below the client's level arrived: {logs:?}"
        );
    }
}

/// Waits until the server's stderr (as the gateway keeps it) has a line containing `wanted`.
fn wait_for_log_line(gateway: &support::RunningGateway, server: &str, wanted: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let logs = gateway.get(&format!("/api/mcp_servers/{server}/logs?lines=200"));
        assert_eq!(logs.status, 200, "{}", logs.text);
        let lines: Vec<String> = logs.json()["logs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|entry| entry["line"].as_str())
            .map(str::to_owned)
            .collect();
        if lines.iter().any(|line| line.contains(wanted)) {
            return lines;
        }
        assert!(
            Instant::now() < deadline,
            "no `{wanted}` in the logs of {server}: {lines:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_client_that_hangs_up_mid_question_leaves_nothing_waiting() {
    let remote = start_sdk_server_http();
    let gateway = relay_gateway(&remote);
    let url = format!("{}/mcp", gateway.base_url);
    let asked = tempfile::tempdir().unwrap();
    for server in ["stdio", "remote"] {
        let asked_file = asked.path().join(server);
        let mut args = vec![
            url.clone(),
            "--protocol".to_owned(),
            "2025-11-25".to_owned(),
            "--no-list".to_owned(),
            "--elicitation-hang".to_owned(),
            asked_file.display().to_string(),
        ];
        args.extend(call(
            &format!("{server}__ask_user"),
            json!({"question": "will you answer?"}),
        ));
        let client = spawn_python_client("http_client.py", &args);
        wait_for_file(&asked_file, Duration::from_secs(20));
        // The client is asked, and goes away without a word.
        client.kill();

        // The call is cancelled upstream, which ends the question there...
        let log_server = if server == "stdio" {
            Some(server)
        } else {
            None
        };
        if let Some(log_server) = log_server {
            wait_for_log_line(&gateway, log_server, "sdk_server ask_user");
        }
        // ...and the server is free: another client that can be asked is served at once,
        // instead of waiting for the first one's turn to end.
        let mut args = person(&url, "dave");
        args.extend(call(
            &format!("{server}__ask_user"),
            json!({"question": "dave, will you answer?"}),
        ));
        let started = Instant::now();
        let run = spawn_python_client("http_client.py", &args).wait();
        assert_eq!(call_texts(&run), ["the user said: dave's answer"]);
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{server}: the next client waited {:?}",
            started.elapsed()
        );
    }
    // The remote server saw its question end too.
    let stderr = remote.stderr_text();
    assert!(
        stderr.contains("sdk_server ask_user"),
        "the remote server's question did not end: {stderr}"
    );
}

#[test]
fn a_log_level_reaches_the_servers_running_now_and_those_started_later() {
    // The conformance server logs from `test_logging_tool` only once its client set a level.
    let binary = mcpgw_fixtures::conformance::conformance_server_binary();
    let yaml = format!(
        "mcp_servers:\n  conformance: {{mode: subprocess, command: [\"{}\"]}}\n",
        binary.display()
    );
    let gateway = support::gateway()
        .config(&yaml)
        .env("MCP_RATE_LIMIT_RPS", "0")
        .start();
    assert_eq!(
        gateway
            .post_empty("/api/mcp_servers/conformance/start")
            .status,
        200
    );
    let url = format!("{}/mcp", gateway.base_url);
    // A client that sets no level but can be asked something is served over SSE, and is sent
    // every message; one that can be asked nothing and sets no level gets its answers as plain
    // JSON, with no room for messages.
    let logging_call = |log_level: Option<&str>| {
        let mut args = vec![
            url.clone(),
            "--protocol".to_owned(),
            "2025-11-25".to_owned(),
            "--no-list".to_owned(),
            "--root".to_owned(),
            "file:///tmp".to_owned(),
        ];
        if let Some(level) = log_level {
            args.extend(["--log-level".to_owned(), level.to_owned()]);
        }
        args.extend(call("conformance__test_logging_tool", json!({})));
        let run = spawn_python_client("http_client.py", &args).wait();
        assert_eq!(call_texts(&run), ["Logging tool completed"]);
        run["logs"].as_array().cloned().unwrap_or_default()
    };
    // Before any client asked for a level, the server sends nothing.
    assert_eq!(logging_call(None), Vec::<Value>::new());
    // A client's level reaches the running server, whose message comes back to that client.
    let logs = logging_call(Some("debug"));
    assert!(
        logs.iter()
            .any(|log| log["data"] == "test_logging_tool ran"),
        "{logs:?}"
    );
    // A server started later is told the level when it starts: a client that never set one
    // gets its message.
    assert_eq!(
        gateway
            .post_empty("/api/mcp_servers/conformance/stop")
            .status,
        200
    );
    assert_eq!(
        gateway
            .post_empty("/api/mcp_servers/conformance/start")
            .status,
        200
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let logs = logging_call(None);
        if logs
            .iter()
            .any(|log| log["data"] == "test_logging_tool ran")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the restarted server was not told the level: {logs:?}"
        );
    }
}
