//! End-to-end tests of what the web console's overview and server pages show, against the real
//! binary: the overview's charts hold the calls made while nobody had the console open; a server
//! page's Try links use the names clients see (bare names under `tool_names: bare`, the group's
//! tool for a group's member); the servers list restarts a running server.
//!
//! Bad input tried: a restart posted without the CSRF token, and one posted by a viewer, whose
//! list shows no Restart button.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{RunningGateway, cli_key, fixture_server_yaml, gateway, raw_exchange};

/// The points of the chart labelled `label` in an overview page or fragment.
fn chart_points(page: &str, label: &str) -> Vec<(f64, f64)> {
    let chart = page
        .split(&format!("aria-label=\"{label} over the last hour\""))
        .nth(1)
        .unwrap_or_else(|| panic!("no chart {label}: {page}"));
    let points = chart
        .split("points=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no polyline in {label}: {chart}"));
    points
        .split_whitespace()
        .map(|point| {
            let (x, y) = point.split_once(',').expect("x,y");
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect()
}

/// Calls the fixture's `echo` as `name`, `times` times; each call must answer.
fn call_echo(gw: &RunningGateway, name: &str, times: usize) {
    for _ in 0..times {
        let answer = gw.mcp_call_tool(name, json!({"text": "hi"}));
        assert_eq!(answer["result"]["isError"], false, "{answer}");
    }
}

/// Waits (bounded) until `/mcp` lists the tool `name`.
fn wait_for_tool(gw: &RunningGateway, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let names = gw.mcp_tool_names();
        if names.iter().any(|listed| listed == name) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "`{name}` never listed: {names:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_overview_charts_hold_the_calls_made_while_nobody_watched() {
    // Authentication off: the console opens without signing in, and nobody asks for `/ui/`
    // before the end.
    let gw = gateway()
        .config(&format!(
            "mcp_servers:\n{}",
            fixture_server_yaml("demo", &[])
        ))
        .start();
    call_echo(&gw, "demo__echo", 1);
    // Longer than the time between two samples: one is taken after these calls, and one after
    // the next.
    std::thread::sleep(Duration::from_secs(6));
    call_echo(&gw, "demo__echo", 4);
    std::thread::sleep(Duration::from_secs(6));

    let live = gw.get("/ui/overview/live");
    assert_eq!(live.status, 200, "{}", live.text);
    // Samples were taken while nobody watched: the latency chart has a point per sample (the
    // page's own request adds none), and the calls per second rise above the baseline (at
    // y = 46) between two of them.
    let latency = chart_points(&live.text, "Median latency");
    assert!(latency.len() >= 2, "{latency:?}");
    let rate = chart_points(&live.text, "Calls per second");
    assert!(!rate.is_empty(), "no calls per second drawn: {}", live.text);
    assert!(
        rate.iter().any(|(_, y)| *y < 46.0),
        "the calls show in the chart: {rate:?}"
    );
}

#[test]
fn under_bare_names_a_server_page_links_to_the_name_clients_call() {
    let gw = gateway()
        .config(&format!(
            "tool_names: bare\nmcp_servers:\n{}",
            fixture_server_yaml("demo", &[])
        ))
        .start();
    wait_for_tool(&gw, "echo");
    let page = gw.get("/ui/servers/demo");
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(
        page.text
            .contains("<a href=\"/ui/tools/echo\">Try echo</a>"),
        "{}",
        page.text
    );
    assert!(!page.text.contains("/ui/tools/demo__"), "{}", page.text);
    let tool = gw.get("/ui/tools/echo");
    assert_eq!(tool.status, 200, "{}", tool.text);
}

#[test]
fn a_group_members_page_names_the_groups_tool_instead_of_its_own() {
    let gw = gateway()
        .config(&format!(
            "mcp_servers:\n{}  pool:\n    mode: group\n    strategy: round_robin\n    \
             members: [{{id: demo}}]\n",
            fixture_server_yaml("demo", &[])
        ))
        .start();
    wait_for_tool(&gw, "pool__echo");
    let page = gw.get("/ui/servers/demo");
    assert_eq!(page.status, 200, "{}", page.text);
    // Clients reach the member's tool only through the group: no Try link of its own.
    assert!(!page.text.contains(">Try "), "{}", page.text);
    assert!(!page.text.contains("/ui/tools/demo__echo"), "{}", page.text);
    assert!(page.text.contains("Through the group"), "{}", page.text);
    assert!(
        page.text
            .contains("href=\"/ui/tools/pool__echo\" class=\"mono\">pool__echo</a>"),
        "{}",
        page.text
    );
    assert_eq!(gw.get("/ui/tools/pool__echo").status, 200);
    // The member's own prefixed name is no tool clients are offered.
    assert_eq!(gw.get("/ui/tools/demo__echo").status, 404);
}

/// Sends a console request with `cookies` and, for a post, the form `form`.
fn ui(
    gw: &RunningGateway,
    method: &str,
    path: &str,
    cookies: &str,
    form: Option<&str>,
) -> support::RawAnswer {
    support::console_request(gw, method, path, cookies, form)
}

/// A REST request with the API key `key`; answers the status and the JSON body.
fn api(gw: &RunningGateway, key: &str, method: &str, path: &str) -> (u16, Value) {
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nX-API-Key: {key}\r\nContent-Length: 0\r\n\
         Connection: close\r\n\r\n",
        gw.address()
    );
    let answer = raw_exchange(gw.address(), request.as_bytes());
    (
        answer.status,
        serde_json::from_str(&answer.body).unwrap_or(Value::Null),
    )
}

/// Signs in with `key`; answers the `Cookie` header value of the session.
fn key_session(gw: &RunningGateway, key: &str) -> String {
    format!("mcpgw_session={}", support::console_key_session(gw, key))
}

/// The CSRF token a page carries.
fn csrf_of(page: &str) -> String {
    page.split("data-csrf=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the page carries its CSRF token")
        .to_owned()
}

/// The server `demo` as the API shows it, once it is ready.
fn ready_demo(gw: &RunningGateway, key: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, details) = api(gw, key, "GET", "/api/mcp_servers/demo");
        assert_eq!(status, 200, "{details}");
        if details["state"] == "ready" {
            return details;
        }
        assert!(Instant::now() < deadline, "demo never got ready: {details}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

const RESTART_FORM: &str = "action=\"/ui/servers/demo/restart\"";

#[test]
fn the_servers_list_restarts_a_running_server_for_whoever_may_stop_and_start_it() {
    let data = tempfile::tempdir().unwrap();
    let admin = cli_key(data.path(), "user:root", Some("admin"));
    let viewer = cli_key(data.path(), "user:vera", Some("viewer"));
    let gw = gateway()
        .data_dir(data)
        .config(&format!(
            "auth:\n  enabled: true\nmcp_servers:\n{}",
            fixture_server_yaml("demo", &[])
        ))
        .start();
    let (status, started) = api(&gw, &admin, "POST", "/api/mcp_servers/demo/start");
    assert_eq!(status, 200, "{started}");
    let before = ready_demo(&gw, &admin);
    let starts = before["health"]["total_starts"].as_u64().expect("a count");

    let admin_session = key_session(&gw, &admin);
    let list = ui(&gw, "GET", "/ui/servers", &admin_session, None);
    assert_eq!(list.status, 200, "{}", list.body);
    assert!(list.body.contains(RESTART_FORM), "{}", list.body);
    assert!(
        list.body.contains("aria-label=\"Restart demo\""),
        "{}",
        list.body
    );
    // The rows that refresh themselves offer it too.
    let rows = ui(&gw, "GET", "/ui/servers-rows", &admin_session, None);
    assert!(rows.body.contains(RESTART_FORM), "{}", rows.body);
    let csrf = csrf_of(&list.body);

    // A viewer sees no Restart, and its forged post is refused.
    let viewer_session = key_session(&gw, &viewer);
    let list = ui(&gw, "GET", "/ui/servers", &viewer_session, None);
    assert_eq!(list.status, 200, "{}", list.body);
    assert!(!list.body.contains(RESTART_FORM), "{}", list.body);
    let viewer_csrf = csrf_of(&list.body);
    let refused = ui(
        &gw,
        "POST",
        "/ui/servers/demo/restart",
        &viewer_session,
        Some(&format!("csrf_token={viewer_csrf}")),
    );
    assert_eq!(refused.status, 403, "{}", refused.body);
    // Bad input: the admin's post without the CSRF token.
    let refused = ui(
        &gw,
        "POST",
        "/ui/servers/demo/restart",
        &admin_session,
        Some(""),
    );
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(ready_demo(&gw, &admin)["health"]["total_starts"], starts);

    let restarted = ui(
        &gw,
        "POST",
        "/ui/servers/demo/restart",
        &admin_session,
        Some(&format!("csrf_token={csrf}")),
    );
    assert_eq!(restarted.status, 303, "{}", restarted.body);
    assert_eq!(
        restarted.header("location"),
        Some("/ui/servers/demo?done=restarted")
    );
    let after = ready_demo(&gw, &admin);
    assert_eq!(
        after["health"]["total_starts"],
        starts + 1,
        "one more start: {after}"
    );
    assert_ne!(
        after["health"]["started_at"],
        before["health"]["started_at"]
    );

    // A stopped server is started, not restarted.
    let (status, stopped) = api(&gw, &admin, "POST", "/api/mcp_servers/demo/stop");
    assert_eq!(status, 200, "{stopped}");
    let list = ui(&gw, "GET", "/ui/servers", &admin_session, None);
    assert!(!list.body.contains(RESTART_FORM), "{}", list.body);
    assert!(
        list.body.contains("action=\"/ui/servers/demo/start\""),
        "{}",
        list.body
    );
}
