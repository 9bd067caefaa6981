//! What upstream servers send their client during a call, through the gateway: sampling,
//! elicitation and roots requests, and log messages. The upstream is the official Python SDK's
//! server (`tests/python/sdk_server.py`), over stdio and over Streamable HTTP; the clients are
//! the official Python SDK's, over the gateway's `/mcp`, in both eras: `initialize`-era
//! clients are sent the requests on their call's stream, 2026-07-28 clients get
//! input-required results and call again with the answers.

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

/// A client of the `initialize` era that skips listing tools.
fn session_client(url: &str) -> Vec<String> {
    vec![
        url.to_owned(),
        "--protocol".to_owned(),
        "2025-11-25".to_owned(),
        "--no-list".to_owned(),
    ]
}

fn call(name: &str, arguments: Value) -> Vec<String> {
    vec!["--call".to_owned(), name.to_owned(), arguments.to_string()]
}

/// The client options of one person: answers that name them, so that an answer that reaches
/// the wrong client shows.
fn person(url: &str, who: &str) -> Vec<String> {
    person_in(url, who, "2025-11-25")
}

fn person_in(url: &str, who: &str, protocol: &str) -> Vec<String> {
    vec![
        url.to_owned(),
        "--protocol".to_owned(),
        protocol.to_owned(),
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
///
/// A 2026-07-28 client is not on the line while its call runs, so it does not take turns; over
/// stdio, where nothing says which call a request belongs to, its clients are run one after
/// the other (`stateless_at_once` false), as concurrent ones would be refused, not misrouted.
fn two_clients_at_once(
    gateway: &support::RunningGateway,
    server: &str,
    with_roots: bool,
    stateless_at_once: bool,
) {
    two_clients_in(gateway, server, with_roots, "2025-11-25", true);
    two_clients_in(gateway, server, with_roots, "2026-07-28", stateless_at_once);
}

fn two_clients_in(
    gateway: &support::RunningGateway,
    server: &str,
    with_roots: bool,
    protocol: &str,
    at_once: bool,
) {
    let url = format!("{}/mcp", gateway.base_url);
    let mut runs = Vec::new();
    let mut finished = Vec::new();
    for who in ["alice", "bob"] {
        let mut args = person_in(&url, who, protocol);
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
        if !at_once {
            let (who, client) = runs.pop().expect("the client just started");
            finished.push((who, client.wait()));
        }
    }
    finished.extend(runs.into_iter().map(|(who, client)| (who, client.wait())));
    for (who, run) in finished {
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
            "{who} ({protocol}) was asked once per question, prompt and roots: {asked:?}"
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
    two_clients_at_once(&gateway, "stdio", true, false);
    // Over Streamable HTTP a request comes on its call's stream.
    two_clients_at_once(&gateway, "remote", false, true);
    // Through a group, to the client whose call the group routed to the member.
    two_clients_at_once(&gateway, "pool", true, false);

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
    let mut args = session_client(&url);
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
    // 2026-07-28 clients name the level in each request's `_meta` and hear the messages on
    // the call's stream; a client that can be asked something takes the parked path.
    let stateless = |extra: &[&str]| {
        let mut args = vec![
            url.clone(),
            "--protocol".to_owned(),
            "2026-07-28".to_owned(),
            "--no-list".to_owned(),
        ];
        args.extend(extra.iter().map(|arg| (*arg).to_owned()));
        args
    };
    for (server, mut args) in [
        ("stdio", session_client(&url)),
        ("remote", session_client(&url)),
        ("stdio", stateless(&[])),
        ("remote", stateless(&["--elicitation-reply", "yes"])),
    ] {
        args.extend(["--log-level".to_owned(), "info".to_owned()]);
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
        let mut args = session_client(&url);
        args.extend([
            "--elicitation-hang".to_owned(),
            asked_file.display().to_string(),
        ]);
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
        let mut args = session_client(&url);
        args.extend(["--root".to_owned(), "file:///tmp".to_owned()]);
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

/// One stateless (2026-07-28) `tools/call` on `/mcp` with `params`, with the API key `key`
/// when given.
fn stateless_call(gateway: &support::RunningGateway, key: Option<&str>, params: Value) -> Value {
    stateless_request(gateway, key, "tools/call", params)
}

/// One stateless (2026-07-28) request of a client that declares it can answer elicitations
/// only.
fn stateless_request(
    gateway: &support::RunningGateway,
    key: Option<&str>,
    method: &str,
    params: Value,
) -> Value {
    stateless_request_with(gateway, key, json!({"elicitation": {}}), method, params)
}

/// One stateless (2026-07-28) request of a client that declares `capabilities`.
fn stateless_request_with(
    gateway: &support::RunningGateway,
    key: Option<&str>,
    capabilities: Value,
    method: &str,
    params: Value,
) -> Value {
    const PROTOCOL: &str = "2026-07-28";
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "mcpgw-relays", "version": "0"},
    });
    // `Mcp-Name` names the tool or prompt, the resource, or the task of a task request.
    let tool = params["name"]
        .as_str()
        .or_else(|| params["uri"].as_str())
        .or_else(|| params["taskId"].as_str())
        .unwrap_or_default()
        .to_owned();
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .new_agent();
    let mut request = agent
        .post(&format!("{}/mcp", gateway.base_url))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", PROTOCOL)
        .header("mcp-method", method)
        .header("mcp-name", &tool);
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    let mut response = request.send_json(&body).expect("the gateway answers");
    let text = response.body_mut().read_to_string().unwrap();
    support::jsonrpc_answer(&text)
}

fn input_required(answer: &Value) -> (String, String) {
    let result = &answer["result"];
    assert_eq!(result["resultType"], "input_required", "{answer}");
    let requests = result["inputRequests"].as_object().expect("input requests");
    assert_eq!(requests.len(), 1, "{answer}");
    let (key, request) = requests.iter().next().unwrap();
    assert_eq!(request["method"], "elicitation/create", "{answer}");
    let state = result["requestState"].as_str().expect("a request state");
    (key.clone(), state.to_owned())
}

fn refused_state(answer: &Value, wanted: &str) {
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(wanted),
        "{message:?} does not say {wanted:?}"
    );
}

#[test]
fn request_states_are_the_gateways_own_and_answer_once() {
    let remote = start_sdk_server_http();
    let gateway = relay_gateway(&remote);
    let ask = json!({"name": "stdio__ask_user", "arguments": {"question": "colour?"}});
    let (key, state) = input_required(&stateless_call(&gateway, None, ask.clone()));
    let answer = json!({key.clone(): {"action": "accept", "content": {"answer": "blue"}}});

    // Bad input: a state with a changed byte, one with a suffix, one made up.
    let mut changed = state.clone().into_bytes();
    let last = changed.len() - 1;
    changed[last] = if changed[last] == b'0' { b'1' } else { b'0' };
    for bad in [
        String::from_utf8(changed).unwrap(),
        format!("{state}-TAMPERED"),
        "mcpgw1.0123.1.00".to_owned(),
    ] {
        let mut retry = ask.clone();
        retry["requestState"] = json!(bad);
        retry["inputResponses"] = answer.clone();
        refused_state(
            &stateless_call(&gateway, None, retry),
            "not issued by this gateway",
        );
    }

    // A retry without the answer asked for is asked again, under a new state; the old state
    // is then spent.
    let mut unanswered = ask.clone();
    unanswered["requestState"] = json!(state);
    unanswered["inputResponses"] = json!({"something-else": {"action": "decline"}});
    let (again_key, again_state) = input_required(&stateless_call(&gateway, None, unanswered));
    assert_eq!(again_key, key, "the same question keeps its key");
    assert_ne!(again_state, state);
    let mut replayed = ask.clone();
    replayed["requestState"] = json!(state);
    replayed["inputResponses"] = answer.clone();
    refused_state(
        &stateless_call(&gateway, None, replayed.clone()),
        "answered already",
    );

    // The latest state with the answer completes the call, once.
    let mut retry = ask.clone();
    retry["requestState"] = json!(again_state);
    retry["inputResponses"] = answer;
    let done = stateless_call(&gateway, None, retry.clone());
    assert_eq!(
        done["result"]["content"][0]["text"], "the user said: blue",
        "{done}"
    );
    refused_state(&stateless_call(&gateway, None, retry), "over or expired");
}

#[test]
fn a_parked_call_is_resumed_only_by_whoever_made_it() {
    let command = json!([
        python().display().to_string(),
        python_script("sdk_server.py").display().to_string(),
        "stdio"
    ]);
    let data_dir = tempfile::tempdir().unwrap();
    let alice = support::cli_key(data_dir.path(), "user:alice", Some("admin"));
    let bob = support::cli_key(data_dir.path(), "user:bob", Some("admin"));
    let gateway = support::gateway()
        .data_dir(data_dir)
        .config(&format!(
            "auth:\n  enabled: true\nmcp_servers:\n  stdio: {{mode: subprocess, command: {command}}}\n"
        ))
        .env("MCP_RATE_LIMIT_RPS", "0")
        .start();
    let ask = json!({"name": "stdio__ask_user", "arguments": {"question": "pin?"}});
    let (key, state) = input_required(&stateless_call(&gateway, Some(&alice), ask.clone()));
    let mut retry = ask;
    retry["requestState"] = json!(state);
    retry["inputResponses"] = json!({key: {"action": "accept", "content": {"answer": "1234"}}});
    // Bad input: Bob holds Alice's state, signature and all.
    refused_state(
        &stateless_call(&gateway, Some(&bob), retry.clone()),
        "over or expired",
    );
    let done = stateless_call(&gateway, Some(&alice), retry);
    assert_eq!(
        done["result"]["content"][0]["text"], "the user said: 1234",
        "{done}"
    );
}

#[test]
fn prompt_and_resource_list_changes_reach_the_clients() {
    let remote = start_sdk_server_http();
    let gateway = relay_gateway(&remote);
    let url = format!("{}/mcp", gateway.base_url);
    for server in ["stdio", "remote"] {
        let mut args = session_client(&url);
        args.extend(["--linger".to_owned(), "2".to_owned()]);
        args.extend(call(&format!("{server}__announce_lists"), json!({})));
        let run = spawn_python_client("http_client.py", &args).wait();
        assert_eq!(call_texts(&run), ["announced"]);
        let notifications = run["notifications"].as_array().expect("notifications");
        for wanted in [
            "notifications/prompts/list_changed",
            "notifications/resources/list_changed",
        ] {
            assert!(
                notifications.iter().any(|method| method == wanted),
                "{server}: no {wanted} in {notifications:?}"
            );
        }

        // A 2026-07-28 client hears of them on its `subscriptions/listen` stream.
        let listening = support::peers::run_python_client(
            "http_client.py",
            &[
                url.clone(),
                "--protocol".to_owned(),
                "2026-07-28".to_owned(),
                "--no-list".to_owned(),
                "--listen-lists".to_owned(),
                "--list-changed-trigger".to_owned(),
                format!("{server}__announce_lists"),
                "{}".to_owned(),
                "--list-changed-wait".to_owned(),
                "10".to_owned(),
                "--list-changed-count".to_owned(),
                "2".to_owned(),
            ],
        );
        let listener = &listening["list_changed_listener"];
        assert_eq!(
            listener["events"],
            json!(["PromptsListChanged", "ResourcesListChanged"]),
            "{server}: {listening}"
        );
    }
}

/// A gateway in front of servers that answer 2026-07-28 requests with input-required results
/// of their own (the conformance server): `conf` alone, and the group `pair` of two more,
/// taken in turns.
fn passing_through_gateway(extra: &str) -> support::RunningGateway {
    let binary = mcpgw_fixtures::conformance::conformance_server_binary();
    let command = json!([binary.display().to_string()]);
    support::gateway()
        .config(&format!(
            "{extra}mcp_servers:\n\
             \x20 conf: {{mode: subprocess, command: {command}}}\n\
             \x20 one: {{mode: subprocess, command: {command}}}\n\
             \x20 two: {{mode: subprocess, command: {command}}}\n\
             \x20 pair: {{mode: group, strategy: round_robin, members: [{{id: one}}, {{id: two}}]}}\n"
        ))
        .env("MCP_RATE_LIMIT_RPS", "0")
        .start()
}

/// The one question of an input-required result, under the server's own key, and the state
/// the gateway sealed around the server's.
fn server_question(answer: &Value, wanted_key: &str) -> String {
    let result = &answer["result"];
    assert_eq!(result["resultType"], "input_required", "{answer}");
    let requests = result["inputRequests"].as_object().expect("input requests");
    assert_eq!(
        requests.keys().collect::<Vec<_>>(),
        [wanted_key],
        "the server's own keys reach the client: {answer}"
    );
    let state = result["requestState"].as_str().expect("a request state");
    assert!(
        state.starts_with("mcpgw2."),
        "the client holds the gateway's envelope, not the server's state: {state}"
    );
    state.to_owned()
}

fn accepted(field: &str, value: &str) -> Value {
    json!({"action": "accept", "content": {field: value}})
}

/// Walks the conformance server's three-round tool through `tool`, checking each round.
fn three_rounds(gateway: &support::RunningGateway, tool: &str) {
    let ask = json!({"name": tool, "arguments": {}});
    let first = server_question(&stateless_call(gateway, None, ask.clone()), "step1");
    let mut retry = ask.clone();
    retry["inputResponses"] = json!({"step1": accepted("name", "Alice")});
    retry["requestState"] = json!(first);
    let second = server_question(&stateless_call(gateway, None, retry), "step2");
    assert_ne!(second, first);
    let mut last = ask;
    last["inputResponses"] = json!({"step2": accepted("color", "blue")});
    last["requestState"] = json!(second);
    let done = stateless_call(gateway, None, last);
    assert_eq!(
        done["result"]["content"][0]["text"], "Alice's favorite color is blue",
        "the state of round 2 reached the server that wrote it: {done}"
    );
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
}

#[test]
fn input_required_results_of_servers_pass_through_sealed() {
    let gateway = passing_through_gateway("");
    three_rounds(&gateway, "conf__test_input_required_result_multi_round");

    let ask = json!({"name": "conf__test_input_required_result_request_state", "arguments": {}});
    let state = server_question(&stateless_call(&gateway, None, ask.clone()), "confirm");
    let answer = json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    // Bad input: the state with a suffix, the state sent with another tool, a made-up envelope.
    for (tool, bad, why) in [
        (
            "conf__test_input_required_result_request_state",
            format!("{state}-TAMPERED"),
            "not issued by this gateway",
        ),
        (
            "conf__test_input_required_result_tampered_state",
            state.clone(),
            "belongs to another request",
        ),
        (
            "conf__test_input_required_result_request_state",
            "mcpgw2.e30.00".to_owned(),
            "not issued by this gateway",
        ),
    ] {
        let retry = json!({"name": tool, "arguments": {}, "inputResponses": answer,
                           "requestState": bad});
        refused_state(&stateless_call(&gateway, None, retry), why);
    }
    let mut retry = ask;
    retry["inputResponses"] = answer;
    retry["requestState"] = json!(state);
    let done = stateless_call(&gateway, None, retry.clone());
    assert_eq!(
        done["result"]["content"][0]["text"], "Confirmed: true",
        "{done}"
    );
    // Bad input: the same state again.
    refused_state(&stateless_call(&gateway, None, retry), "answered already");

    // The server is asked with the caller's capabilities: this caller can only elicit.
    let capabilities = stateless_call(
        &gateway,
        None,
        json!({"name": "conf__test_input_required_result_capabilities", "arguments": {}}),
    );
    server_question(&capabilities, "user_name");

    // prompts/get passes input-required results through as well.
    let prompt = json!({"name": "conf__test_input_required_result_prompt"});
    let state = server_question(
        &stateless_request(&gateway, None, "prompts/get", prompt.clone()),
        "user_context",
    );
    let mut retry = prompt;
    retry["inputResponses"] = json!({"user_context": accepted("context", "tests")});
    retry["requestState"] = json!(state);
    let done = stateless_request(&gateway, None, "prompts/get", retry);
    assert_eq!(
        done["result"]["messages"][0]["content"]["text"], "Use this context: tests",
        "{done}"
    );

    // And resources/read; its state is bound to the URI.
    let read = json!({"uri": "test://input-required-resource"});
    let state = server_question(
        &stateless_request(&gateway, None, "resources/read", read.clone()),
        "reader",
    );
    let mut retry = read;
    retry["inputResponses"] = json!({"reader": accepted("name", "Alice")});
    retry["requestState"] = json!(state);
    // Bad input: the state sent with another URI.
    let mut moved = retry.clone();
    moved["uri"] = json!("test://static-text");
    let refused = stateless_request(&gateway, None, "resources/read", moved);
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let done = stateless_request(&gateway, None, "resources/read", retry);
    assert_eq!(
        done["result"]["contents"][0]["text"], "Hello, Alice, here is the resource.",
        "{done}"
    );
}

/// Each member of the group signs its state with keys of its own, so a retry that the
/// strategy sent to the other member would be refused there.
#[test]
fn a_groups_retry_goes_to_the_member_that_asked() {
    let gateway = passing_through_gateway("");
    for _ in 0..2 {
        three_rounds(&gateway, "pair__test_input_required_result_multi_round");
    }
}

/// Replicas given one `MCP_REQUEST_STATE_SECRET` resume each other's exchanges; a gateway with
/// another secret refuses them.
#[test]
fn replicas_with_one_secret_resume_each_others_requests() {
    let start = |secret: &str| {
        let binary = mcpgw_fixtures::conformance::conformance_server_binary();
        let command = json!([binary.display().to_string()]);
        support::gateway()
            .config(&format!(
                "mcp_servers:\n  conf: {{mode: subprocess, command: {command}}}\n"
            ))
            .env("MCP_RATE_LIMIT_RPS", "0")
            .env("MCP_REQUEST_STATE_SECRET", secret)
            .start()
    };
    let first = start("one secret for the whole fleet of gateways");
    let second = start("one secret for the whole fleet of gateways");
    let other = start("another secret, long enough to be accepted");
    let ask = json!({"name": "conf__test_input_required_result_elicitation", "arguments": {}});
    let state = server_question(&stateless_call(&first, None, ask.clone()), "user_name");
    let mut retry = ask;
    retry["inputResponses"] = json!({"user_name": accepted("name", "Alice")});
    retry["requestState"] = json!(state);
    refused_state(
        &stateless_call(&other, None, retry.clone()),
        "not issued by this gateway",
    );
    let done = stateless_call(&second, None, retry);
    assert_eq!(
        done["result"]["content"][0]["text"], "Hello, Alice!",
        "{done}"
    );
}

/// The official SDK's 2026-07-28 client answers a server's input-required results through the
/// gateway by itself and gets the completed call.
#[test]
fn the_sdk_client_completes_passed_through_rounds() {
    let gateway = passing_through_gateway("");
    let url = format!("{}/mcp", gateway.base_url);
    let mut args = person_in(&url, "carol", "2026-07-28");
    args.extend(call("conf__test_input_required_result_sampling", json!({})));
    args.extend(call(
        "conf__test_input_required_result_list_roots",
        json!({}),
    ));
    args.extend(call(
        "pair__test_input_required_result_list_roots",
        json!({}),
    ));
    let run = support::peers::run_python_client("http_client.py", &args);
    assert_eq!(
        call_texts(&run),
        [
            "carol's model",
            "Roots: file:///home/carol",
            "Roots: file:///home/carol"
        ],
        "{run}"
    );
}

/// A client that takes tasks (and can answer elicitations).
fn task_request(
    gateway: &support::RunningGateway,
    key: Option<&str>,
    method: &str,
    params: Value,
) -> Value {
    stateless_request_with(
        gateway,
        key,
        json!({"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}),
        method,
        params,
    )
}

/// The task a call created: its id as the gateway issued it.
fn created_task(answer: &Value) -> String {
    let result = &answer["result"];
    assert_eq!(result["resultType"], "task", "{answer}");
    let id = result["taskId"].as_str().expect("a task id");
    assert!(
        id.starts_with("mcpgw-task."),
        "the gateway's own task id: {id}"
    );
    id.to_owned()
}

/// Polls `tasks/get` until the task leaves `working`; its last state.
fn task_settled(gateway: &support::RunningGateway, key: Option<&str>, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = task_request(gateway, key, "tasks/get", json!({"taskId": id}));
        assert_eq!(
            got["result"]["taskId"], id,
            "tasks/get names the task as the client knows it: {got}"
        );
        if got["result"]["status"] != "working" {
            return got["result"].clone();
        }
        assert!(
            Instant::now() < deadline,
            "the task is still working: {got}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn tasks_of_servers_are_followed_through_the_gateway() {
    let gateway = passing_through_gateway("");
    // A task, polled to its result.
    let id = created_task(&task_request(
        &gateway,
        None,
        "tools/call",
        json!({"name": "conf__slow_compute", "arguments": {"seconds": 0.2, "label": "sum"}}),
    ));
    let done = task_settled(&gateway, None, &id);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "computed sum",
        "{done}"
    );

    // Bad input: a changed id, a made-up one, one of another shape.
    for bad in [
        format!("{id}0"),
        "mcpgw-task.e30.00".to_owned(),
        "gate-test".to_owned(),
    ] {
        let refused = task_request(&gateway, None, "tasks/get", json!({"taskId": bad}));
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
    }

    // A task through a group asks its question, is answered with tasks/update, and settles;
    // its requests reach the member that runs it.
    for _ in 0..2 {
        let id = created_task(&task_request(
            &gateway,
            None,
            "tools/call",
            json!({"name": "pair__confirm_delete", "arguments": {"filename": "notes.txt"}}),
        ));
        let asking = task_settled(&gateway, None, &id);
        assert_eq!(asking["status"], "input_required", "{asking}");
        assert_eq!(
            asking["inputRequests"]["confirm"]["method"],
            "elicitation/create"
        );
        let ack = task_request(
            &gateway,
            None,
            "tasks/update",
            json!({"taskId": id, "inputResponses": {
                "confirm": {"action": "accept", "content": {"confirm": true}}}}),
        );
        assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
        let done = task_settled(&gateway, None, &id);
        assert_eq!(
            done["result"]["content"][0]["text"], "delete notes.txt: true",
            "{done}"
        );
    }

    // Cancelled while it runs.
    let id = created_task(&task_request(
        &gateway,
        None,
        "tools/call",
        json!({"name": "conf__slow_compute", "arguments": {"seconds": 60}}),
    ));
    let ack = task_request(&gateway, None, "tasks/cancel", json!({"taskId": id}));
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    assert_eq!(task_settled(&gateway, None, &id)["status"], "cancelled");

    // A client that does not take tasks gets the result at once, or the server's refusal
    // where the tool needs a task.
    let plain = stateless_call(
        &gateway,
        None,
        json!({"name": "conf__slow_compute", "arguments": {"seconds": 0, "label": "now"}}),
    );
    assert_eq!(
        plain["result"]["content"][0]["text"], "computed now",
        "{plain}"
    );
    let refused = stateless_call(
        &gateway,
        None,
        json!({"name": "conf__failing_job", "arguments": {}}),
    );
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
}

/// A task id is bound to the principal whose call created it.
#[test]
fn a_task_is_followed_only_by_whoever_created_it() {
    let binary = mcpgw_fixtures::conformance::conformance_server_binary();
    let command = json!([binary.display().to_string()]);
    let data_dir = tempfile::tempdir().unwrap();
    let alice = support::cli_key(data_dir.path(), "user:alice", Some("admin"));
    let bob = support::cli_key(data_dir.path(), "user:bob", Some("admin"));
    let gateway = support::gateway()
        .data_dir(data_dir)
        .config(&format!(
            "auth:\n  enabled: true\nmcp_servers:\n  conf: {{mode: subprocess, command: {command}}}\n"
        ))
        .env("MCP_RATE_LIMIT_RPS", "0")
        .start();
    let id = created_task(&task_request(
        &gateway,
        Some(&alice),
        "tools/call",
        json!({"name": "conf__slow_compute", "arguments": {"seconds": 30}}),
    ));
    // Bad input: Bob holds Alice's task id.
    for method in ["tasks/get", "tasks/cancel"] {
        let refused = task_request(&gateway, Some(&bob), method, json!({"taskId": id}));
        assert_eq!(refused["error"]["code"], -32602, "{method}: {refused}");
    }
    let got = task_request(&gateway, Some(&alice), "tasks/get", json!({"taskId": id}));
    assert_eq!(got["result"]["status"], "working", "{got}");
    let ack = task_request(
        &gateway,
        Some(&alice),
        "tasks/cancel",
        json!({"taskId": id}),
    );
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    assert_eq!(
        task_settled(&gateway, Some(&alice), &id)["status"],
        "cancelled"
    );
}

/// What `server/discover` declares under `capabilities.extensions`, once `server` runs.
fn extensions_once_running(gateway: &support::RunningGateway, server: &str) -> Value {
    let started = gateway.post_empty(&format!("/api/mcp_servers/{server}/start"));
    assert_eq!(started.status, 200, "{}", started.text);
    let run = support::peers::run_python_client(
        "http_client.py",
        &[
            format!("{}/mcp", gateway.base_url),
            "--protocol".to_owned(),
            "2026-07-28".to_owned(),
            "--no-list".to_owned(),
        ],
    );
    run["discover"]["capabilities"]["extensions"].clone()
}

/// The tasks extension is declared when a server behind the gateway offers tasks, and only
/// then.
#[test]
fn the_tasks_extension_is_declared_when_a_server_offers_tasks() {
    let with_tasks = passing_through_gateway("");
    let extensions = extensions_once_running(&with_tasks, "conf");
    assert!(
        extensions.get("io.modelcontextprotocol/tasks").is_some(),
        "{extensions}"
    );

    let fixture = mcpgw_fixtures::fixture::fixture_server_binary();
    let without_tasks = support::gateway()
        .config(&format!(
            "mcp_servers:\n  plain: {{mode: subprocess, command: {}}}\n",
            json!([fixture.display().to_string()])
        ))
        .start();
    let extensions = extensions_once_running(&without_tasks, "plain");
    assert!(
        extensions.get("io.modelcontextprotocol/tasks").is_none(),
        "{extensions}"
    );
}

/// A server may ask its client something while a prompt is got, as during a call: the
/// question reaches the client on that request's stream, and a client that cannot be asked
/// gets the server's error, never a hang.
#[test]
fn servers_ask_the_client_while_it_gets_a_prompt() {
    let remote = start_sdk_server_http();
    let gateway = relay_gateway(&remote);
    let url = format!("{}/mcp", gateway.base_url);
    for server in ["stdio", "remote"] {
        let prompt = format!("{server}__ask_topic");
        let mut args = person(&url, "dana");
        args.extend(["--get-prompt".to_owned(), prompt.clone()]);
        let run = support::peers::run_python_client("http_client.py", &args);
        assert_eq!(
            run["prompts"][0]["texts"],
            json!(["Write about dana's answer."]),
            "{server}: {run}"
        );
        assert_eq!(
            run["asked"][0]["method"], "elicitation/create",
            "{server}: {run}"
        );
        assert_eq!(run["asked"][0]["text"], "Which topic?", "{server}: {run}");

        let mut unaskable = session_client(&url);
        unaskable.extend(["--get-prompt".to_owned(), prompt]);
        let run = support::peers::run_python_client("http_client.py", &unaskable);
        assert!(
            run["prompts"][0]["error"]["code"].is_i64(),
            "{server}: the server's question had nobody to go to: {run}"
        );
    }
}
