//! End-to-end tests of `/metrics` against the real binary: the text parses with the reference
//! Prometheus parser (`prometheus_client`, run from `tests/python/parse_metrics.py`), counters
//! and histograms move by exactly the calls made, per-server gauges follow starts, stops and
//! removals, health checks and WebSocket clients are counted, and nothing a caller sends (an
//! unknown tool name, a raw path) ever becomes a label value. Calls in flight, relays, client
//! sessions and listen streams are counted as they happen, and a scraper that asks for
//! OpenMetrics gets text the reference OpenMetrics parser reads, with the trace of a sampled
//! call as the exemplar of its latency bucket. Every metric the gateway exposes is listed in
//! `docs/operations.md`.

mod support;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::peers::{python, python_script, repository_root};
use support::{RunningGateway, fixture_binary, fixture_server_yaml, gateway};

/// A name that only ever comes from a caller: it must appear nowhere in the metrics.
const CALLER_INPUT: &str = "zz_caller_input_xyz";

/// One parsed scrape of `/metrics`.
struct Scrape {
    text: String,
    /// Family name to its type (`counter`, `gauge`, `histogram`) as the parser read it.
    families: BTreeMap<String, String>,
    /// Family name to its help text.
    help: BTreeMap<String, String>,
    samples: Vec<Sample>,
}

struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
    /// `{labels, value, timestamp}`, or null.
    exemplar: Value,
}

impl Sample {
    fn has(&self, labels: &[(&str, &str)]) -> bool {
        labels
            .iter()
            .all(|(key, value)| self.labels.get(*key).map(String::as_str) == Some(*value))
    }
}

impl Scrape {
    /// The value of the one sample `name` whose labels include `labels`; 0 when there is none
    /// (a series that was never recorded reads as zero, as Prometheus's `absent` would).
    #[track_caller]
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let matching: Vec<&Sample> = self
            .samples
            .iter()
            .filter(|sample| sample.name == name && sample.has(labels))
            .collect();
        assert!(
            matching.len() <= 1,
            "{name} {labels:?} matches {} series:\n{}",
            matching.len(),
            self.text
        );
        matching.first().map_or(0.0, |sample| sample.value)
    }

    /// Like [`Scrape::value`], but the series must exist.
    #[track_caller]
    fn present(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        assert!(
            self.samples
                .iter()
                .any(|sample| sample.name == name && sample.has(labels)),
            "no series {name} {labels:?} in:\n{}",
            self.text
        );
        self.value(name, labels)
    }

    fn label_values(&self, name: &str, label: &str) -> Vec<String> {
        self.samples
            .iter()
            .filter(|sample| sample.name == name)
            .filter_map(|sample| sample.labels.get(label).cloned())
            .collect()
    }
}

/// Scrapes `/metrics` and parses it with the reference parser; fails when it does not parse.
#[track_caller]
fn scrape(gw: &RunningGateway) -> Scrape {
    let answer = gw.get("/metrics");
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(
        answer.content_type.starts_with("text/plain"),
        "{}",
        answer.content_type
    );
    parse(answer.text, false)
}

/// Scrapes `/metrics` as Prometheus does by default (preferring OpenMetrics), checks the
/// answer's type, and parses it with the reference OpenMetrics parser.
#[track_caller]
fn scrape_openmetrics(gw: &RunningGateway) -> Scrape {
    let mut answer = ureq::get(&gw.url("/metrics"))
        .header(
            "accept",
            "application/openmetrics-text;version=1.0.0;q=0.5,             application/openmetrics-text;version=0.0.1;q=0.4,             text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
        )
        .call()
        .expect("the gateway answers /metrics");
    assert_eq!(answer.status().as_u16(), 200);
    let content_type = answer
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        content_type,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let text = answer.body_mut().read_to_string().unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    parse(text, true)
}

/// Parses exposition text with the reference parser of its format.
#[track_caller]
fn parse(text: String, openmetrics: bool) -> Scrape {
    let mut command = Command::new(python());
    command.arg(python_script("parse_metrics.py"));
    if openmetrics {
        command.arg("--openmetrics");
    }
    let mut parser = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the metrics parser starts");
    parser
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = parser.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "the reference parser rejects /metrics: {}\n{}",
        String::from_utf8_lossy(&output.stderr),
        text
    );
    let parsed: Value = serde_json::from_slice(&output.stdout).unwrap();
    let field = |family: &Value, key: &str| family[key].as_str().unwrap().to_owned();
    let families = parsed["families"].as_array().unwrap();
    let help = families
        .iter()
        .map(|family| (field(family, "name"), field(family, "help")))
        .collect();
    let families = families
        .iter()
        .map(|family| (field(family, "name"), field(family, "type")))
        .collect();
    let samples = parsed["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|sample| Sample {
            name: sample["name"].as_str().unwrap().to_owned(),
            labels: serde_json::from_value(sample["labels"].clone()).unwrap(),
            value: sample["value"]
                .as_f64()
                .unwrap_or_else(|| panic!("a non-finite sample {sample}")),
            exemplar: sample["exemplar"].clone(),
        })
        .collect();
    Scrape {
        text,
        families,
        help,
        samples,
    }
}

/// Scrapes until `check` accepts, or fails after `within` with the last scrape.
#[track_caller]
fn scrape_until(gw: &RunningGateway, within: Duration, check: impl Fn(&Scrape) -> bool) -> Scrape {
    let deadline = Instant::now() + within;
    loop {
        let scraped = scrape(gw);
        if check(&scraped) {
            return scraped;
        }
        assert!(
            Instant::now() < deadline,
            "the metrics did not get there within {within:?}:\n{}",
            scraped.text
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A tool call that reached the tool: its result, tool-level errors included.
#[track_caller]
fn call_tool(gw: &RunningGateway, name: &str, arguments: Value) -> Value {
    let answer = gw.mcp_call_tool(name, arguments);
    assert!(answer.get("result").is_some(), "{name}: {answer}");
    answer["result"].clone()
}

const TOOL_CALLS: &str = "mcpgw_tool_calls_total";
const TOOL_CALL_COUNT: &str = "mcpgw_tool_call_duration_seconds_count";
const STARTS: &str = "mcpgw_mcp_server_starts_total";
const STOPS: &str = "mcpgw_mcp_server_stops_total";
const UP: &str = "mcpgw_mcp_server_up";
const STATE: &str = "mcpgw_mcp_server_state";

fn calls(scraped: &Scrape, server: &str, tool: &str, status: &str) -> f64 {
    scraped.value(
        TOOL_CALLS,
        &[
            ("mcp_server_id", server),
            ("tool", tool),
            ("status", status),
        ],
    )
}

/// The states a server's `mcpgw_mcp_server_state` series say it is in (those at 1).
fn states_of(scraped: &Scrape, server: &str) -> Vec<String> {
    scraped
        .samples
        .iter()
        .filter(|sample| sample.name == STATE && sample.has(&[("mcp_server_id", server)]))
        .filter(|sample| sample.value == 1.0)
        .map(|sample| sample.labels["state"].clone())
        .collect()
}

#[test]
fn tool_calls_starts_and_stops_move_their_metrics_by_exactly_what_happened() {
    let gw = gateway()
        .config(&format!(
            "probe_tools: false\nmcp_servers:\n{}",
            fixture_server_yaml("fx", &[])
        ))
        .start();

    let before = scrape(&gw);
    assert_eq!(
        before.present(
            "mcpgw_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        1.0
    );
    assert_eq!(before.present(UP, &[("mcp_server_id", "fx")]), 0.0);
    assert_eq!(states_of(&before, "fx"), ["cold"]);
    assert_eq!(
        before.label_values(STATE, "state").len(),
        5,
        "every state has a series: {}",
        before.text
    );

    // The catalogue learns a server's tools when it first runs (probing is off here).
    assert_eq!(gw.post_empty("/api/mcp_servers/fx/start").status, 200);
    let started = scrape(&gw);
    assert_eq!(
        started.present(STARTS, &[("mcp_server_id", "fx"), ("result", "success")]),
        1.0
    );
    assert_eq!(started.present(UP, &[("mcp_server_id", "fx")]), 1.0);
    assert_eq!(states_of(&started, "fx"), ["ready"]);

    for n in 0..3 {
        let result = call_tool(&gw, "fx__echo", json!({"text": format!("call {n}")}));
        assert_eq!(result["isError"], json!(false), "{result}");
    }
    let after_calls = scrape(&gw);
    let echo = [("mcp_server_id", "fx"), ("tool", "echo")];
    assert_eq!(calls(&after_calls, "fx", "echo", "success"), 3.0);
    assert_eq!(after_calls.present(TOOL_CALL_COUNT, &echo), 3.0);
    let mut infinite = echo.to_vec();
    infinite.push(("le", "+Inf"));
    assert_eq!(
        after_calls.present("mcpgw_tool_call_duration_seconds_bucket", &infinite),
        3.0
    );
    assert!(after_calls.present("mcpgw_tool_call_duration_seconds_sum", &echo) > 0.0);
    assert_eq!(
        after_calls.present(STARTS, &[("mcp_server_id", "fx"), ("result", "success")]),
        1.0
    );
    assert_eq!(
        after_calls.present(
            "mcpgw_mcp_server_start_duration_seconds_count",
            &[("mcp_server_id", "fx")]
        ),
        1.0
    );
    assert_eq!(after_calls.present(UP, &[("mcp_server_id", "fx")]), 1.0);
    assert_eq!(states_of(&after_calls, "fx"), ["ready"]);

    // The explicit buckets: half a millisecond to a minute for calls, 10 ms to 2 min for starts.
    let buckets = |name: &str| after_calls.label_values(name, "le");
    assert_eq!(
        buckets("mcpgw_tool_call_duration_seconds_bucket"),
        [
            "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5",
            "1", "2.5", "5", "10", "30", "60", "+Inf",
        ]
    );
    assert_eq!(
        buckets("mcpgw_mcp_server_start_duration_seconds_bucket"),
        [
            "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "30", "60",
            "120", "+Inf",
        ]
    );
    for (family, kind) in [
        ("mcpgw_tool_calls", "counter"),
        ("mcpgw_tool_call_duration_seconds", "histogram"),
        ("mcpgw_mcp_server_start_duration_seconds", "histogram"),
        ("mcpgw_mcp_server_up", "gauge"),
        ("mcpgw_http_request_duration_seconds", "histogram"),
    ] {
        assert_eq!(
            after_calls.families.get(family).map(String::as_str),
            Some(kind),
            "{family}"
        );
    }

    // A tool-level error and a call the upstream refuses, each under its own status.
    let failed = call_tool(&gw, "fx__fail", json!({"message": "as asked"}));
    assert_eq!(failed["isError"], json!(true), "{failed}");
    let refused = gw.mcp_call_tool("fx__add", json!({"a": "not a number"}));
    assert!(refused.get("error").is_some(), "{refused}");
    let after_failures = scrape(&gw);
    assert_eq!(calls(&after_failures, "fx", "fail", "tool_error"), 1.0);
    assert_eq!(calls(&after_failures, "fx", "add", "protocol"), 1.0);
    assert_eq!(calls(&after_failures, "fx", "add", "success"), 0.0);
    assert_eq!(calls(&after_failures, "fx", "echo", "success"), 3.0);
    assert_eq!(
        after_failures.present(TOOL_CALL_COUNT, &[("mcp_server_id", "fx"), ("tool", "add")]),
        1.0
    );
    assert!(
        after_failures.present(
            "mcpgw_events_published_total",
            &[("event_type", "ToolInvocationCompleted")]
        ) >= 4.0
    );

    // Names only a caller chose: unknown tools, an unknown server id, a path with no route.
    for name in [format!("fx__{CALLER_INPUT}"), CALLER_INPUT.to_owned()] {
        let answer = gw.mcp_call_tool(&name, json!({}));
        assert!(answer.get("error").is_some(), "{name}: {answer}");
    }
    assert_eq!(
        gw.get(&format!("/api/mcp_servers/{CALLER_INPUT}")).status,
        404
    );
    assert_eq!(gw.get(&format!("/{CALLER_INPUT}")).status, 404);
    assert_eq!(gw.get("/api/mcp_servers/fx").status, 200);
    let after_probing = scrape(&gw);
    assert!(
        !after_probing.text.contains(CALLER_INPUT),
        "caller input became a label:\n{}",
        after_probing.text
    );
    // Requests are counted by route template, never by the raw path.
    let by_id = [("route", "/api/mcp_servers/{id}"), ("method", "GET")];
    assert_eq!(
        after_probing.present(
            "mcpgw_http_requests_total",
            &[by_id[0], by_id[1], ("status", "200")]
        ),
        1.0
    );
    assert_eq!(
        after_probing.present(
            "mcpgw_http_requests_total",
            &[by_id[0], by_id[1], ("status", "404")]
        ),
        1.0
    );
    assert!(
        after_probing.present(
            "mcpgw_http_request_duration_seconds_count",
            &[by_id[0], by_id[1]]
        ) >= 2.0
    );
    let routes = after_probing.label_values("mcpgw_http_requests_total", "route");
    assert!(
        routes.iter().all(|route| !route.contains("/fx")),
        "{routes:?}"
    );
    assert!(routes.contains(&"unmatched".to_owned()), "{routes:?}");

    // A stop takes the server down, and a start counts again.
    assert_eq!(gw.post_empty("/api/mcp_servers/fx/stop").status, 200);
    let stopped = scrape(&gw);
    assert_eq!(stopped.present(UP, &[("mcp_server_id", "fx")]), 0.0);
    assert_eq!(states_of(&stopped, "fx"), ["cold"]);
    assert_eq!(
        stopped.present(STOPS, &[("mcp_server_id", "fx"), ("reason", "requested")]),
        1.0
    );
    assert_eq!(gw.post_empty("/api/mcp_servers/fx/start").status, 200);
    let restarted = scrape(&gw);
    assert_eq!(
        restarted.present(STARTS, &[("mcp_server_id", "fx"), ("result", "success")]),
        2.0
    );
    assert_eq!(restarted.present(UP, &[("mcp_server_id", "fx")]), 1.0);

    // A crash is a stop with reason `crashed`, and the call it broke fails as `transport`.
    let crashed = gw.mcp_call_tool("fx__crash", json!({"code": 3}));
    assert!(crashed.get("error").is_some(), "{crashed}");
    let after_crash = scrape_until(&gw, Duration::from_secs(10), |scraped| {
        scraped.value(STOPS, &[("mcp_server_id", "fx"), ("reason", "crashed")]) == 1.0
    });
    // The upstream's exit breaks the call (`transport`), or closes the session under it
    // (`closed`), depending on which the gateway notices first: either way, one failed call.
    let crash_calls: Vec<(String, f64)> = after_crash
        .samples
        .iter()
        .filter(|sample| sample.name == TOOL_CALLS && sample.has(&[("tool", "crash")]))
        .map(|sample| (sample.labels["status"].clone(), sample.value))
        .collect();
    assert_eq!(crash_calls.len(), 1, "{crash_calls:?}");
    assert!(
        ["transport", "closed"].contains(&crash_calls[0].0.as_str()) && crash_calls[0].1 == 1.0,
        "{crash_calls:?}"
    );
    assert_eq!(after_crash.value(UP, &[("mcp_server_id", "fx")]), 0.0);
}

#[test]
fn health_checks_websocket_clients_and_removed_servers_are_reported() {
    let gw = gateway()
        .config(&format!(
            "probe_tools: false\nmcp_servers:\n{}    health_check_interval_s: 5\n",
            fixture_server_yaml("fx", &[])
        ))
        .start();
    // Created over REST, because servers of the configuration file cannot be deleted.
    let spare = json!({
        "mcp_server_id": "spare",
        "mode": "subprocess",
        "command": [fixture_binary().display().to_string()],
    });
    assert_eq!(gw.post("/api/mcp_servers", &spare).status, 201);

    assert_eq!(gw.post_empty("/api/mcp_servers/fx/start").status, 200);
    let checked = scrape_until(&gw, Duration::from_secs(20), |scraped| {
        scraped.value(
            "mcpgw_health_checks_total",
            &[("mcp_server_id", "fx"), ("result", "passed")],
        ) >= 1.0
    });
    assert_eq!(
        checked.present(
            "mcpgw_health_checks_total",
            &[("mcp_server_id", "fx"), ("result", "failed")]
        ),
        0.0
    );
    assert_eq!(checked.present(UP, &[("mcp_server_id", "fx")]), 1.0);

    // A removed server keeps no state: every one of its gauges reads 0.
    assert_eq!(states_of(&checked, "spare"), ["cold"]);
    assert_eq!(gw.delete("/api/mcp_servers/spare").status, 200);
    let removed = scrape(&gw);
    assert_eq!(removed.value(UP, &[("mcp_server_id", "spare")]), 0.0);
    assert!(states_of(&removed, "spare").is_empty(), "{}", removed.text);
    assert_eq!(
        removed.present("mcpgw_mcp_servers", &[("state", "cold")]),
        0.0
    );
    assert_eq!(
        removed.present("mcpgw_mcp_servers", &[("state", "ready")]),
        1.0
    );

    // WebSocket clients are counted while they are connected.
    assert_eq!(removed.present("mcpgw_websocket_clients", &[]), 0.0);
    let address = gw.base_url.trim_start_matches("http://").to_owned();
    let stream = TcpStream::connect(&address).unwrap();
    let (mut client, response) =
        tungstenite::client(format!("ws://{address}/api/ws/events").as_str(), stream)
            .expect("the event stream accepts the handshake");
    assert_eq!(response.status().as_u16(), 101);
    scrape_until(&gw, Duration::from_secs(5), |scraped| {
        scraped.value("mcpgw_websocket_clients", &[]) == 1.0
    });
    client.close(None).unwrap();
    while client.read().is_ok() {}
    scrape_until(&gw, Duration::from_secs(5), |scraped| {
        scraped.value("mcpgw_websocket_clients", &[]) == 0.0
    });
}

#[test]
fn discovery_scans_and_candidates_are_counted() {
    // One valid definition, one with an unknown mode (quarantined), and a source whose
    // directory does not exist (its scans fail).
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("good.yaml"),
        format!(
            "mode: subprocess\ncommand: [\"{}\"]\n",
            fixture_binary().display()
        ),
    )
    .unwrap();
    std::fs::write(dir.path().join("bad.yaml"), "mode: teleport\n").unwrap();
    let gw = gateway()
        .config(&format!(
            "discovery:\n  sources:\n\
             \x20   - {{id: files, type: filesystem, config: {{path: \"{0}\"}}}}\n\
             \x20   - {{id: gone, type: filesystem, config: {{path: \"{0}/missing\"}}}}\n",
            dir.path().display()
        ))
        .start();
    const CANDIDATES: &str = "mcpgw_discovery_candidates";
    const SCANS: &str = "mcpgw_discovery_scans_total";
    let scraped = scrape_until(&gw, Duration::from_secs(10), |scraped| {
        scraped.value(CANDIDATES, &[("state", "pending")]) == 1.0
            && scraped.value(CANDIDATES, &[("state", "quarantined")]) == 1.0
            && scraped.value(SCANS, &[("source_id", "gone"), ("result", "failure")]) >= 1.0
            // A scan is counted when it has finished, which is after the candidates it found
            // were recorded: wait for that too.
            && scraped.value(SCANS, &[("source_id", "files"), ("result", "success")]) >= 1.0
    });
    assert_eq!(
        scraped.value(SCANS, &[("source_id", "gone"), ("result", "success")]),
        0.0
    );

    assert_eq!(gw.post_empty("/api/discovery/approve/good").status, 200);
    let approved = scrape(&gw);
    assert_eq!(approved.present(CANDIDATES, &[("state", "pending")]), 0.0);
    assert_eq!(
        approved.present(CANDIDATES, &[("state", "quarantined")]),
        1.0
    );
}

/// Every metric the gateway exposes is documented, under its exact name.
#[test]
fn every_exposed_metric_is_listed_in_the_operations_guide() {
    // A discovery source whose directory does not exist: its failed scans still expose the
    // discovery metrics.
    let gw = gateway()
        .config(&format!(
            "probe_tools: false\nmcp_servers:\n{}discovery:\n  sources: [{{id: files, type: \
             filesystem, config: {{path: /nonexistent/mcpgw-servers}}}}]\n",
            fixture_server_yaml("fx", &[])
        ))
        .start();
    assert_eq!(gw.post_empty("/api/mcp_servers/fx/start").status, 200);
    call_tool(&gw, "fx__echo", json!({"text": "one"}));
    let scraped = scrape_until(&gw, Duration::from_secs(10), |scraped| {
        scraped.value(
            "mcpgw_discovery_scans_total",
            &[("source_id", "files"), ("result", "failure")],
        ) >= 1.0
    });
    let guide = std::fs::read_to_string(repository_root().join("docs/operations.md"))
        .expect("docs/operations.md exists");
    let mut undocumented: Vec<&str> = scraped
        .samples
        .iter()
        .map(|sample| {
            let name = sample.name.as_str();
            ["_bucket", "_count", "_sum"]
                .iter()
                .find_map(|suffix| {
                    name.strip_suffix(suffix).filter(|base| {
                        scraped.families.get(*base).map(String::as_str) == Some("histogram")
                    })
                })
                .unwrap_or(name)
        })
        .filter(|name| !guide.contains(&format!("`{name}`")))
        .collect();
    undocumented.sort_unstable();
    undocumented.dedup();
    assert!(
        undocumented.is_empty(),
        "not in docs/operations.md: {undocumented:?}"
    );
    // And each one carries a help text.
    let without_help: Vec<&String> = scraped
        .help
        .iter()
        .filter(|(_, help)| help.trim().is_empty())
        .map(|(name, _)| name)
        .collect();
    assert!(without_help.is_empty(), "no help text: {without_help:?}");
}

/// A POST to `/mcp` with `headers` and the JSON-RPC `body`: the status, the session id the
/// answer names (if any) and the body.
fn post_mcp(
    gw: &RunningGateway,
    headers: &[(&str, &str)],
    body: &Value,
) -> (u16, Option<String>, String) {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    let mut request = agent
        .post(&gw.url("/mcp"))
        .header("accept", "application/json, text/event-stream");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut answer = request.send_json(body).expect("the gateway answers");
    let session = answer
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let status = answer.status().as_u16();
    (
        status,
        session,
        answer.body_mut().read_to_string().unwrap_or_default(),
    )
}

/// A stateless (2026-07-28) `tools/call` whose `_meta` also carries `traceparent`.
fn call_traced(gw: &RunningGateway, name: &str, arguments: Value, traceparent: &str) -> Value {
    const PROTOCOL: &str = "2026-07-28";
    let body = json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {
            "name": name,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": PROTOCOL,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "mcpgw-e2e", "version": "0"},
                "traceparent": traceparent,
            },
        },
    });
    let (status, _, text) = post_mcp(
        gw,
        &[
            ("mcp-protocol-version", PROTOCOL),
            ("mcp-method", "tools/call"),
            ("mcp-name", name),
        ],
        &body,
    );
    assert_eq!(status, 200, "{text}");
    support::jsonrpc_answer(&text)
}

/// The exemplars on the latency buckets of one tool: `(le, exemplar)`.
fn exemplars_of(scraped: &Scrape, server: &str, tool: &str) -> Vec<(String, Value)> {
    scraped
        .samples
        .iter()
        .filter(|sample| {
            sample.name == "mcpgw_tool_call_duration_seconds_bucket"
                && sample.has(&[("mcp_server_id", server), ("tool", tool)])
                && !sample.exemplar.is_null()
        })
        .map(|sample| (sample.labels["le"].clone(), sample.exemplar.clone()))
        .collect()
}

#[test]
fn openmetrics_scrapes_carry_the_trace_of_a_sampled_call_as_an_exemplar() {
    let gw = gateway()
        .config(&format!(
            "probe_tools: false\nmcp_servers:\n{}",
            fixture_server_yaml("fx", &[])
        ))
        .start();
    assert_eq!(gw.post_empty("/api/mcp_servers/fx/start").status, 200);

    // A call without a trace, and one whose trace is not sampled: no exemplar.
    call_tool(&gw, "fx__echo", json!({"text": "untraced"}));
    const UNSAMPLED: &str = "00-11111111111111111111111111111111-2222222222222222-00";
    let answer = call_traced(&gw, "fx__echo", json!({"text": "unsampled"}), UNSAMPLED);
    assert!(answer.get("result").is_some(), "{answer}");
    let before = scrape_openmetrics(&gw);
    assert_eq!(
        before.present(
            TOOL_CALL_COUNT,
            &[("mcp_server_id", "fx"), ("tool", "echo")]
        ),
        2.0
    );
    assert!(
        exemplars_of(&before, "fx", "echo").is_empty(),
        "{}",
        before.text
    );

    // The families as OpenMetrics names them: a counter without `_total`, its samples with.
    for (family, kind) in [
        ("mcpgw_tool_calls", "counter"),
        ("mcpgw_http_requests", "counter"),
        ("mcpgw_tool_call_duration_seconds", "histogram"),
        ("mcpgw_mcp_server_up", "gauge"),
        ("mcpgw_tool_calls_in_flight", "gauge"),
    ] {
        assert_eq!(
            before.families.get(family).map(String::as_str),
            Some(kind),
            "{family}: {}",
            before.text
        );
    }
    assert_eq!(
        calls(&before, "fx", "echo", "success"),
        2.0,
        "the counter's samples keep their `_total`"
    );

    // A sampled call: the gateway continues the caller's trace, whose id the exemplar carries.
    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = format!("00-{TRACE}-00f067aa0ba902b7-01");
    let answer = call_traced(&gw, "fx__echo", json!({"text": "sampled"}), &parent);
    assert!(answer.get("result").is_some(), "{answer}");
    let after = scrape_openmetrics(&gw);
    let exemplars = exemplars_of(&after, "fx", "echo");
    assert_eq!(exemplars.len(), 1, "{}", after.text);
    let (le, exemplar) = &exemplars[0];
    assert_eq!(exemplar["labels"]["trace_id"], TRACE, "{}", after.text);
    let span = exemplar["labels"]["span_id"].as_str().unwrap();
    assert_eq!(span.len(), 16, "{exemplar}");
    assert!(
        span.bytes().all(|byte| byte.is_ascii_hexdigit()),
        "{exemplar}"
    );
    // The exemplar's value is the call's duration, within its bucket; its time is now-ish.
    let value = exemplar["value"].as_f64().unwrap();
    assert!(
        value > 0.0 && (le == "+Inf" || value <= le.parse::<f64>().unwrap()),
        "{exemplar}"
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let at = exemplar["timestamp"].as_f64().unwrap();
    assert!((now - at).abs() < 120.0, "{exemplar}");

    // The Prometheus text stays as it was: no exemplars, no `# EOF`.
    let plain = scrape(&gw);
    assert!(!plain.text.contains("trace_id"), "{}", plain.text);
    assert!(!plain.text.contains("# EOF"), "{}", plain.text);
    assert_eq!(calls(&plain, "fx", "echo", "success"), 3.0);
}

#[test]
fn calls_in_flight_relays_sessions_and_check_times_are_counted() {
    let gw = gateway()
        .config(&format!(
            "mcp_servers:\n{}    health_check_interval_s: 5\n\
             \x20 pool: {{mode: group, strategy: round_robin, members: [{{id: fx}}]}}\n",
            fixture_server_yaml("fx", &[])
        ))
        .start();
    // Probing is on: the server's tools are learned by a probe, which is timed.
    let probed = scrape_until(&gw, Duration::from_secs(20), |scraped| {
        scraped.value(
            "mcpgw_tool_probe_duration_seconds_count",
            &[("mcp_server_id", "fx"), ("result", "success")],
        ) == 1.0
    });
    assert_eq!(
        probed.present(TOOL_CALLS_IN_FLIGHT, &[("mcp_server_id", "fx")]),
        0.0
    );
    assert_eq!(
        probed.present(GROUP_IN_FLIGHT, &[("group_id", "pool")]),
        0.0
    );

    // A slow call through the group is in flight at the group and at its member.
    let slow = {
        let url = gw.url("/mcp");
        std::thread::spawn(move || {
            let body = json!({
                "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "pool__sleep", "arguments": {"ms": 3000}, "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "mcpgw-e2e", "version": "0"},
                }},
            });
            ureq::post(&url)
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", "pool__sleep")
                .send_json(&body)
                .map(|mut answer| answer.body_mut().read_to_string().unwrap_or_default())
        })
    };
    scrape_until(&gw, Duration::from_secs(10), |scraped| {
        scraped.value(TOOL_CALLS_IN_FLIGHT, &[("mcp_server_id", "fx")]) == 1.0
            && scraped.value(GROUP_IN_FLIGHT, &[("group_id", "pool")]) == 1.0
    });
    let answered = slow.join().unwrap().expect("the slow call is answered");
    assert!(answered.contains("\"result\""), "{answered}");
    let done = scrape(&gw);
    assert_eq!(
        done.value(TOOL_CALLS_IN_FLIGHT, &[("mcp_server_id", "fx")]),
        0.0
    );
    assert_eq!(done.value(GROUP_IN_FLIGHT, &[("group_id", "pool")]), 0.0);

    // An `initialize`-era session counts under its protocol version until it is deleted.
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "mcpgw-e2e", "version": "0"},
        },
    });
    let (status, session, text) = post_mcp(&gw, &[], &initialize);
    assert_eq!(status, 200, "{text}");
    let session = session.expect("the session has an id");
    let open = scrape(&gw);
    assert_eq!(
        open.present(SESSIONS, &[("protocol_version", "2025-06-18")]),
        1.0,
        "{}",
        open.text
    );
    let in_session = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    let (status, _, text) = post_mcp(
        &gw,
        &in_session,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(status, 202, "{text}");

    // Every relay series exists from the start. A server that asks the session's client,
    // which declared no roots, gets "method not found" from the gateway: a refused relay.
    let relays = |scraped: &Scrape, kind, outcome| {
        scraped.present(RELAYS, &[("kind", kind), ("outcome", outcome)])
    };
    assert_eq!(relays(&open, "roots", "refused"), 0.0);
    assert_eq!(relays(&open, "logging", "relayed"), 0.0);
    assert_eq!(relays(&open, "sampling", "answered"), 0.0);
    let (status, _, text) = post_mcp(
        &gw,
        &in_session,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "pool__roots", "arguments": {}}}),
    );
    assert_eq!(status, 200, "{text}");
    let asked = support::jsonrpc_answer(&text);
    assert_eq!(asked["result"]["isError"], json!(true), "{asked}");
    let refused = scrape(&gw);
    assert_eq!(
        relays(&refused, "roots", "refused"),
        1.0,
        "{asked}\n{}",
        refused.text
    );
    assert_eq!(relays(&refused, "roots", "answered"), 0.0);

    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    let deleted = agent
        .delete(&gw.url("/mcp"))
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .call()
        .unwrap();
    assert_eq!(deleted.status().as_u16(), 204);
    scrape_until(&gw, Duration::from_secs(10), |scraped| {
        scraped.value(SESSIONS, &[("protocol_version", "2025-06-18")]) == 0.0
    });

    // A `subscriptions/listen` stream counts while it is open.
    assert_eq!(open.present(LISTEN_STREAMS, &[]), 0.0);
    let listen = json!({
        "jsonrpc": "2.0", "id": 3, "method": "subscriptions/listen",
        "params": {
            "notifications": {"toolsListChanged": true},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "mcpgw-e2e", "version": "0"},
            },
        },
    })
    .to_string();
    let mut stream = TcpStream::connect(gw.address()).unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{listen}",
        gw.address(),
        listen.len()
    )
    .unwrap();
    scrape_until(&gw, Duration::from_secs(10), |scraped| {
        scraped.value(LISTEN_STREAMS, &[]) == 1.0
    });
    stream.shutdown(std::net::Shutdown::Both).unwrap();
    drop(stream);
    scrape_until(&gw, Duration::from_secs(40), |scraped| {
        scraped.value(LISTEN_STREAMS, &[]) == 0.0
    });

    // Health checks are timed like they are counted (a check that finishes during a scrape
    // may be in the count and not yet in the histogram).
    let passed = [("mcp_server_id", "fx"), ("result", "passed")];
    let checked = scrape_until(&gw, Duration::from_secs(20), |scraped| {
        scraped.value("mcpgw_health_check_duration_seconds_count", &passed) >= 1.0
    });
    let counted = checked.present("mcpgw_health_checks_total", &passed);
    let timed = checked.present("mcpgw_health_check_duration_seconds_count", &passed);
    assert!(
        timed == counted || timed + 1.0 == counted,
        "{}",
        checked.text
    );
    assert_eq!(
        checked.families["mcpgw_health_check_duration_seconds"],
        "histogram"
    );
}

const TOOL_CALLS_IN_FLIGHT: &str = "mcpgw_tool_calls_in_flight";
const GROUP_IN_FLIGHT: &str = "mcpgw_group_tool_calls_in_flight";
const RELAYS: &str = "mcpgw_relays_total";
const SESSIONS: &str = "mcpgw_mcp_client_sessions";
const LISTEN_STREAMS: &str = "mcpgw_mcp_listen_streams";
