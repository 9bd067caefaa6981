//! The Grafana dashboard (`deploy/grafana/mcpgw.json`) cannot drift from the code: every metric
//! its queries name is one that the real binary exports on `/metrics` once it has been used
//! (a server started, probed, health-checked and called, a group, an MCP session, a denied
//! request, a rate-limited call), and the panels the operations guide promises are there.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::peers::repository_root;
use support::{RunningGateway, cli_key, fixture_server_yaml, gateway};

fn dashboard() -> Value {
    let path = repository_root().join("deploy/grafana/mcpgw.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{} cannot be read: {error}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|error| panic!("{} is not JSON: {error}", path.display()))
}

/// Every panel, those inside collapsed rows included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut all = Vec::new();
    for panel in dashboard["panels"]
        .as_array()
        .expect("the dashboard has panels")
    {
        all.push(panel);
        if let Some(nested) = panel["panels"].as_array() {
            all.extend(nested);
        }
    }
    all
}

/// The names of the gateway's metrics a PromQL expression uses (all begin with `mcpgw_`).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = expr.as_bytes();
    let mut start = 0;
    while let Some(found) = expr[start..].find("mcpgw_") {
        let begin = start + found;
        let preceded_by_name =
            begin > 0 && (bytes[begin - 1].is_ascii_alphanumeric() || bytes[begin - 1] == b'_');
        let end = expr[begin..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .map_or(expr.len(), |length| begin + length);
        if !preceded_by_name {
            names.insert(expr[begin..end].to_owned());
        }
        start = end;
    }
    names
}

/// Every PromQL expression of the dashboard, with where it is: panel targets and template
/// variable queries.
fn expressions(dashboard: &Value) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for panel in panels(dashboard) {
        let title = panel["title"].as_str().unwrap_or("(untitled)");
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("a target of `{title}` has no expr: {target}"));
            found.push((format!("panel `{title}`"), expr.to_owned()));
        }
    }
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let query = variable["query"]["query"]
            .as_str()
            .or_else(|| variable["query"].as_str())
            .unwrap_or_default();
        if variable["type"] == "query" {
            found.push((format!("variable `{}`", variable["name"]), query.to_owned()));
        }
    }
    found
}

#[test]
fn metric_names_are_read_from_promql() {
    // Bad input tried: a name inside a longer identifier, names next to operators and
    // selectors, a name at the very end.
    assert_eq!(
        metric_names(
            "sum(rate(mcpgw_a_total{x=\"y\"}[5m]))/not_mcpgw_b + mcpgw_c_bucket\
             + label_values(mcpgw_d, id) - mcpgw_e"
        ),
        ["mcpgw_a_total", "mcpgw_c_bucket", "mcpgw_d", "mcpgw_e"]
            .map(str::to_owned)
            .into()
    );
    assert!(metric_names("up == 1").is_empty());
}

/// The names of the samples of a Prometheus text scrape.
fn sample_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter_map(|line| line.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

struct Client<'a> {
    gw: &'a RunningGateway,
    key: String,
    agent: ureq::Agent,
}

impl Client<'_> {
    /// A POST (with a JSON body, or none) or a GET carrying the API key and `headers`.
    fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> (u16, String) {
        let url = self.gw.url(path);
        let answer = if method == "POST" {
            let mut request = self.agent.post(&url).header("x-api-key", &self.key);
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            match body {
                Some(body) => request.send_json(body),
                None => request.send_empty(),
            }
        } else {
            assert_eq!(method, "GET", "only POST and GET are sent");
            let mut request = self.agent.get(&url).header("x-api-key", &self.key);
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            request.call()
        };
        let mut answer = answer.expect("the gateway answers");
        let status = answer.status().as_u16();
        (
            status,
            answer.body_mut().read_to_string().unwrap_or_default(),
        )
    }

    /// A stateless `tools/call`; the status and the body.
    fn call_tool(&self, name: &str) -> (u16, String) {
        let body = json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": name, "arguments": {"text": "x", "a": 1, "b": 2}, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "mcpgw-e2e", "version": "0"},
            }},
        });
        self.send(
            "POST",
            "/mcp",
            Some(&body),
            &[
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-name", name),
            ],
        )
    }
}

/// Scrapes until every name of `wanted` has samples, or fails after `within` naming those
/// still missing.
fn scrape_until_present(gw: &RunningGateway, wanted: &BTreeSet<String>, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let scraped = gw.get("/metrics");
        assert_eq!(scraped.status, 200, "{scraped:?}");
        let exported = sample_names(&scraped.text);
        let missing: Vec<&String> = wanted.difference(&exported).collect();
        if missing.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the dashboard uses metrics the gateway does not export: {missing:?}\n{}",
            scraped.text
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn every_metric_the_dashboard_queries_is_exported_by_a_running_gateway() {
    let board = dashboard();
    let expressions = expressions(&board);
    assert!(expressions.len() >= 20, "{expressions:?}");
    let mut wanted = BTreeSet::new();
    for (place, expr) in &expressions {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{place} queries no mcpgw metric: {expr}");
        wanted.extend(names);
    }
    // The panels the operations guide promises, by the metrics they show.
    for promised in [
        "mcpgw_http_requests_total",
        "mcpgw_http_request_duration_seconds_bucket",
        "mcpgw_tool_calls_total",
        "mcpgw_tool_call_duration_seconds_bucket",
        "mcpgw_tool_calls_in_flight",
        "mcpgw_group_tool_calls_in_flight",
        "mcpgw_mcp_servers",
        "mcpgw_mcp_server_starts_total",
        "mcpgw_mcp_server_start_duration_seconds_bucket",
        "mcpgw_health_checks_total",
        "mcpgw_health_check_duration_seconds_bucket",
        "mcpgw_tool_probe_duration_seconds_bucket",
        "mcpgw_rate_limit_hits_total",
        "mcpgw_auth_decisions_total",
        "mcpgw_event_log_events",
        "mcpgw_mcp_client_sessions",
        "mcpgw_mcp_listen_streams",
        "mcpgw_relays_total",
    ] {
        assert!(wanted.contains(promised), "no panel shows {promised}");
    }
    // The tool latency panel asks for exemplars on every query.
    let latency = panels(&board)
        .into_iter()
        .find(|panel| {
            panel["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|target| {
                    target["expr"].as_str().is_some_and(|expr| {
                        expr.contains("mcpgw_tool_call_duration_seconds_bucket")
                    })
                })
        })
        .expect("a tool latency panel");
    for target in latency["targets"].as_array().unwrap() {
        assert_eq!(target["exemplar"], true, "{target}");
    }

    // A gateway with authentication on (auth decisions), tight rate limits (a refused call),
    // probing (a probe), health checks every 5 s and a group. The started server is stopped
    // only after its health checks were timed (see the end).
    let data_dir = tempfile::tempdir().unwrap();
    let key = cli_key(data_dir.path(), "user:admin", Some("admin"));
    let gw = gateway()
        .data_dir(data_dir)
        .env("MCP_RATE_LIMIT_RPS", "0.01")
        .env("MCP_RATE_LIMIT_BURST", "3")
        .config(&format!(
            "auth: {{enabled: true}}\nmcp_servers:\n{}    health_check_interval_s: 5\n\
             \x20 pool: {{mode: group, strategy: round_robin, members: [{{id: fx}}]}}\n",
            fixture_server_yaml("fx", &[])
        ))
        .start();
    let client = Client {
        gw: &gw,
        key,
        agent: ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .new_agent(),
    };
    let (status, body) = client.send("POST", "/api/mcp_servers/fx/start", None, &[]);
    assert_eq!(status, 200, "{body}");
    let (status, body) = client.call_tool("pool__echo");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"result\""), "{body}");
    // The fourth call of one tool within the burst of 3 is refused.
    let refused = (0..4)
        .map(|_| client.call_tool("pool__add"))
        .filter(|(_, body)| body.contains("-32029"))
        .count();
    assert!(refused >= 1, "no call was rate limited");
    // A session of the `initialize` era.
    let (status, body) = client.send(
        "POST",
        "/mcp",
        Some(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "mcpgw-e2e", "version": "0"}},
        })),
        &[("accept", "application/json, text/event-stream")],
    );
    assert_eq!(status, 200, "{body}");
    // A request without credentials is denied.
    assert_eq!(gw.get("/api/mcp_servers").status, 401);

    // A health check comes within its interval; then a stop (the REST budget of 3 allows it).
    let timed = BTreeSet::from(["mcpgw_health_check_duration_seconds_bucket".to_owned()]);
    scrape_until_present(&gw, &timed, Duration::from_secs(30));
    let (status, body) = client.send("POST", "/api/mcp_servers/fx/stop", None, &[]);
    assert_eq!(status, 200, "{body}");

    // The probe and the event log's size come with time.
    scrape_until_present(&gw, &wanted, Duration::from_secs(30));
}
