//! Traces end to end: the real gateway exports spans over OTLP to a real receiver (decoded with
//! the `opentelemetry-proto` package), continues a caller's `traceparent`, and passes the trace
//! context on to a real remote MCP server (the official Python SDK's), which reports what it
//! received.
//!
//! One tool call through the gateway, a lazy start and a group's retry each produce their
//! spans with the right parents: HTTP request → MCP method → authentication, authorization,
//! start, group choice → upstream request. The same receiver takes the `otlp` audit sink's log
//! records.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::peers::{RunningPeer, otlp_ports, start_otlp_receiver, start_sdk_server_http};
use support::{RunningGateway, cli_key, fixture_binary, gateway};

const SPAN_WAIT: Duration = Duration::from_secs(30);
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// OTLP span kinds.
const SERVER: i64 = 2;
const CLIENT: i64 = 3;
/// The OTLP status code of a failed span.
const STATUS_ERROR: i64 = 2;

/// A tool call on `/mcp` in the stateless 2026-07-28 era (one request, no session), with
/// `meta` added to its `_meta`, `extra_headers`, and the API key `key`.
fn call_tool(
    gw: &RunningGateway,
    key: Option<&str>,
    name: &str,
    arguments: Value,
    meta: Value,
    extra_headers: &[(&str, &str)],
) -> Value {
    let mut full_meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "mcpgw-tracing-e2e", "version": "0"},
    });
    for (key, value) in meta.as_object().into_iter().flatten() {
        full_meta[key] = value.clone();
    }
    let body = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": full_meta},
    });
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    let mut request = agent
        .post(&gw.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", name);
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    for (header, value) in extra_headers {
        request = request.header(*header, *value);
    }
    let mut response = request.send_json(&body).expect("the gateway answers");
    let text = response
        .body_mut()
        .read_to_string()
        .expect("a readable answer");
    let answer: Value = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .chain(std::iter::once(text.as_str()))
        .find_map(|data| {
            serde_json::from_str::<Value>(data.trim())
                .ok()
                .filter(|message| message.get("id").is_some())
        })
        .unwrap_or_else(|| panic!("{name}: no JSON-RPC answer in {text}"));
    assert!(
        answer.get("result").is_some(),
        "{name} answered an error: {answer}"
    );
    answer
}

/// The spans the receiver holds.
fn spans(receiver: &RunningPeer) -> Vec<Value> {
    let (http, _) = otlp_ports(receiver);
    let mut response = ureq::get(&format!("http://127.0.0.1:{http}/spans"))
        .call()
        .expect("the receiver answers");
    let text = response.body_mut().read_to_string().expect("JSON");
    serde_json::from_str::<Vec<Value>>(&text).expect("a JSON list of spans")
}

/// Waits until the receiver holds spans that `found` accepts, and answers them.
fn wait_for_spans(
    receiver: &RunningPeer,
    what: &str,
    found: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + SPAN_WAIT;
    loop {
        let spans = spans(receiver);
        if found(&spans) {
            return spans;
        }
        assert!(
            Instant::now() < deadline,
            "no {what} within {SPAN_WAIT:?}; the receiver holds {}\nreceiver stderr:\n{}",
            serde_json::to_string_pretty(&spans).unwrap(),
            receiver.stderr_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn named<'a>(spans: &'a [Value], trace: &str, name: &str) -> Vec<&'a Value> {
    spans
        .iter()
        .filter(|span| span["trace_id"] == trace && span["name"] == name)
        .collect()
}

fn one<'a>(spans: &'a [Value], trace: &str, name: &str) -> &'a Value {
    let found = named(spans, trace, name);
    assert_eq!(
        found.len(),
        1,
        "expected one span `{name}` in trace {trace}, found {}: {}",
        found.len(),
        serde_json::to_string_pretty(&spans).unwrap()
    );
    found[0]
}

fn trace_with(spans: &[Value], name: &str) -> Option<String> {
    spans
        .iter()
        .find(|span| span["name"] == name)
        .and_then(|span| span["trace_id"].as_str().map(str::to_owned))
}

fn fixture_server(id: &str, extra: &str) -> String {
    format!(
        "  {id}:\n    mode: subprocess\n    command: {}\n    tools: [{{name: echo, description: echo, inputSchema: {{type: object}}}}]\n{extra}",
        serde_json::to_string(&[fixture_binary().display().to_string()]).unwrap()
    )
}

#[test]
fn a_call_a_lazy_start_and_a_group_retry_are_traced_with_their_parents() {
    let receiver = start_otlp_receiver();
    let (http_port, _) = otlp_ports(&receiver);
    let upstream = start_sdk_server_http();
    let data_dir = tempfile::tempdir().unwrap();
    let key = cli_key(data_dir.path(), "user:alice", Some("admin"));
    let yaml = format!(
        "auth:\n  enabled: true\nprobe_tools: false\ntelemetry:\n  traces:\n    enabled: true\n    endpoint: \"http://127.0.0.1:{http_port}\"\n    sampler: always_on\n    service_name: mcpgw-e2e\nmcp_servers:\n  remote:\n    mode: remote\n    endpoint: \"{}\"\n{}{}{}  pool:\n    mode: group\n    strategy: priority\n    members:\n      - {{id: broken, priority: 1}}\n      - {{id: spare, priority: 2}}\n",
        upstream.url,
        fixture_server("lazy", ""),
        fixture_server("spare", ""),
        "  broken:\n    mode: subprocess\n    command: [/bin/sh, -c, \"exit 3\"]\n    tools: [{name: echo, description: echo, inputSchema: {type: object}}]\n",
    );
    let gw = gateway()
        .config(&yaml)
        .data_dir(data_dir)
        // Batches leave every 100 ms instead of every 5 s.
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .start();

    // 1. A caller's trace, in its `traceparent` header and its `_meta`, reaches the remote
    //    server through the gateway's spans.
    let caller = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    let answer = call_tool(
        &gw,
        Some(&key),
        "remote__trace_context",
        json!({}),
        json!({"traceparent": caller, "tracestate": "vendor=x1"}),
        &[("traceparent", &caller), ("tracestate", "vendor=x1")],
    );
    let seen = &answer["result"]["structuredContent"];
    let meta_parent = seen["meta_traceparent"].as_str().unwrap_or_default();
    assert!(
        meta_parent.starts_with(&format!("00-{CALLER_TRACE}-")) && meta_parent.ends_with("-01"),
        "the upstream continues the caller's trace: {answer}"
    );
    assert_eq!(
        seen["header_traceparent"], seen["meta_traceparent"],
        "a remote server gets the context as HTTP headers too: {answer}"
    );
    assert_eq!(seen["meta_tracestate"], "vendor=x1", "{answer}");
    let upstream_parent = meta_parent.split('-').nth(2).unwrap().to_owned();

    let spans = wait_for_spans(&receiver, "the remote call's upstream span", |spans| {
        !named(spans, CALLER_TRACE, "tools/call trace_context").is_empty()
    });
    let request = one(&spans, CALLER_TRACE, "POST /mcp");
    assert_eq!(request["kind"], SERVER);
    assert_eq!(request["parent_span_id"], CALLER_SPAN, "{request}");
    assert_eq!(request["service_name"], "mcpgw-e2e");
    assert_eq!(request["attributes"]["http.route"], "/mcp");
    assert_eq!(request["attributes"]["http.response.status_code"], 200);
    let authn = one(&spans, CALLER_TRACE, "authenticate");
    assert_eq!(authn["parent_span_id"], request["span_id"], "{authn}");
    assert_eq!(authn["attributes"]["mcpgw.principal"], "user:alice");
    let method = one(&spans, CALLER_TRACE, "tools/call remote__trace_context");
    assert_eq!(method["kind"], SERVER);
    assert_eq!(method["parent_span_id"], request["span_id"], "{method}");
    assert_eq!(method["attributes"]["mcp.method.name"], "tools/call");
    assert_eq!(
        method["attributes"]["gen_ai.tool.name"],
        "remote__trace_context"
    );
    assert_eq!(method["attributes"]["mcpgw.mcp_server_id"], "remote");
    let authz = one(&spans, CALLER_TRACE, "authorize");
    assert_eq!(authz["parent_span_id"], method["span_id"], "{authz}");
    assert_eq!(authz["attributes"]["mcpgw.authz.decision"], "allow");
    let outbound = one(&spans, CALLER_TRACE, "tools/call trace_context");
    assert_eq!(outbound["kind"], CLIENT);
    assert_eq!(outbound["parent_span_id"], method["span_id"], "{outbound}");
    assert_eq!(outbound["attributes"]["mcpgw.mcp_server_id"], "remote");
    assert_eq!(
        outbound["span_id"], upstream_parent,
        "the upstream's parent is the gateway's upstream request span"
    );

    // 2. A lazy start: its span, with its duration, under the call's.
    call_tool(
        &gw,
        Some(&key),
        "lazy__echo",
        json!({"text": "hi"}),
        json!({}),
        &[],
    );
    let spans = wait_for_spans(&receiver, "the lazy call's spans", |spans| {
        spans
            .iter()
            .any(|span| span["name"] == "tools/call lazy__echo")
            && spans.iter().any(|span| {
                span["name"] == "mcp_server.start"
                    && span["attributes"]["mcpgw.mcp_server_id"] == "lazy"
            })
    });
    let trace = trace_with(&spans, "tools/call lazy__echo").unwrap();
    assert_ne!(
        trace, CALLER_TRACE,
        "a call without a traceparent starts its own trace"
    );
    let request = one(&spans, &trace, "POST /mcp");
    assert_eq!(
        request["parent_span_id"], "",
        "a new trace's root: {request}"
    );
    let method = one(&spans, &trace, "tools/call lazy__echo");
    let start = one(&spans, &trace, "mcp_server.start");
    assert_eq!(start["parent_span_id"], method["span_id"], "{start}");
    assert_eq!(start["attributes"]["mcpgw.mcp_server.mode"], "subprocess");
    let took = start["end_ns"].as_u64().unwrap() - start["start_ns"].as_u64().unwrap();
    assert!(took > 0, "a start takes time: {start}");
    let outbound = one(&spans, &trace, "tools/call echo");
    assert_eq!(outbound["parent_span_id"], method["span_id"]);
    assert!(
        outbound["start_ns"].as_u64() >= start["end_ns"].as_u64(),
        "the upstream request follows the start"
    );

    // 3. A group's retry: the first member cannot start, the second answers.
    call_tool(
        &gw,
        Some(&key),
        "pool__echo",
        json!({"text": "hi"}),
        json!({}),
        &[],
    );
    let spans = wait_for_spans(&receiver, "the group call's spans", |spans| {
        spans.iter().any(|span| span["name"] == "group.call")
            && spans
                .iter()
                .any(|span| span["name"] == "tools/call pool__echo")
    });
    let trace = trace_with(&spans, "tools/call pool__echo").unwrap();
    let method = one(&spans, &trace, "tools/call pool__echo");
    assert_eq!(method["attributes"]["mcpgw.group.id"], "pool", "{method}");
    let group = one(&spans, &trace, "group.call");
    assert_eq!(group["parent_span_id"], method["span_id"], "{group}");
    assert_eq!(group["attributes"]["mcpgw.group.id"], "pool");
    assert_eq!(group["attributes"]["mcpgw.group.strategy"], "priority");
    assert_eq!(group["attributes"]["mcpgw.group.member"], "spare");
    assert_eq!(group["attributes"]["mcpgw.group.attempt"], 2);
    let events: Vec<&str> = group["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|event| event["name"].as_str())
        .collect();
    assert_eq!(
        events,
        [
            "group.member_selected",
            "group.retry",
            "group.member_selected"
        ],
        "{group}"
    );
    assert_eq!(
        group["events"][1]["attributes"]["mcpgw.group.member"],
        "broken"
    );
    let starts = named(&spans, &trace, "mcp_server.start");
    let failed = starts
        .iter()
        .find(|span| span["attributes"]["mcpgw.mcp_server_id"] == "broken")
        .unwrap_or_else(|| panic!("no start span of the broken member: {starts:?}"));
    assert_eq!(failed["parent_span_id"], group["span_id"]);
    assert_eq!(failed["status"]["code"], STATUS_ERROR, "{failed}");
    let outbound = one(&spans, &trace, "tools/call echo");
    assert_eq!(outbound["parent_span_id"], group["span_id"]);
    assert_eq!(outbound["attributes"]["mcpgw.mcp_server_id"], "spare");

    // 4. A REST request is a trace of its own, with its authorization and its store write.
    let created = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent()
        .post(&gw.url("/api/mcp_servers"))
        .header("x-api-key", &key)
        .send_json(json!({"mcp_server_id": "later", "mode": "remote", "endpoint": upstream.url}))
        .expect("the gateway answers");
    assert_eq!(created.status().as_u16(), 201);
    let spans = wait_for_spans(&receiver, "the REST request's spans", |spans| {
        spans
            .iter()
            .any(|span| span["name"] == "POST /api/mcp_servers")
    });
    let trace = trace_with(&spans, "POST /api/mcp_servers").unwrap();
    let request = one(&spans, &trace, "POST /api/mcp_servers");
    let authz = one(&spans, &trace, "authorize");
    assert_eq!(authz["parent_span_id"], request["span_id"]);
    assert_eq!(
        authz["attributes"]["mcpgw.authz.permission"],
        "mcp_server:create"
    );
    let writes: Vec<&Value> = spans
        .iter()
        .filter(|span| {
            span["trace_id"] == trace && span["attributes"]["db.system.name"] == "sqlite"
        })
        .collect();
    assert!(
        !writes.is_empty(),
        "the server's definition is written under the request: {}",
        serde_json::to_string_pretty(&spans).unwrap()
    );
    assert!(writes.iter().all(|write| write["kind"] == CLIENT));
}

#[test]
fn the_standard_variables_alone_export_over_grpc() {
    let receiver = start_otlp_receiver();
    let (_, grpc_port) = otlp_ports(&receiver);
    let gw = gateway()
        .config(&format!(
            "probe_tools: false\nmcp_servers:\n{}",
            fixture_server("demo", "")
        ))
        .env("OTEL_TRACES_EXPORTER", "otlp")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            &format!("http://127.0.0.1:{grpc_port}"),
        )
        .env("OTEL_SERVICE_NAME", "mcpgw-grpc")
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .start();
    call_tool(
        &gw,
        None,
        "demo__echo",
        json!({"text": "hi"}),
        json!({}),
        &[],
    );
    let spans = wait_for_spans(&receiver, "spans over gRPC", |spans| {
        spans
            .iter()
            .any(|span| span["name"] == "tools/call demo__echo")
    });
    let method = spans
        .iter()
        .find(|span| span["name"] == "tools/call demo__echo")
        .unwrap();
    assert_eq!(method["transport"], "grpc");
    assert_eq!(method["service_name"], "mcpgw-grpc");
}

#[test]
fn without_tracing_a_callers_context_reaches_the_upstream_unchanged() {
    let upstream = start_sdk_server_http();
    let gw = gateway()
        .config(&format!(
            "mcp_servers:\n  remote:\n    mode: remote\n    endpoint: \"{}\"\n",
            upstream.url
        ))
        .start();
    let caller = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    // In `_meta` only, and in the HTTP header only: both reach the upstream as they came.
    for (meta, headers) in [
        (json!({"traceparent": caller}), vec![]),
        (json!({}), vec![("traceparent", caller.as_str())]),
    ] {
        let answer = call_tool(
            &gw,
            None,
            "remote__trace_context",
            json!({}),
            meta,
            &headers,
        );
        let seen = &answer["result"]["structuredContent"];
        assert_eq!(seen["meta_traceparent"], caller, "{answer}");
        assert_eq!(seen["header_traceparent"], caller, "{answer}");
    }
    // Bad input tried: a malformed traceparent is not passed on (the upstream gets none).
    let answer = call_tool(
        &gw,
        None,
        "remote__trace_context",
        json!({}),
        json!({"traceparent": "00-not-a-trace-01"}),
        &[],
    );
    let seen = &answer["result"]["structuredContent"];
    assert_eq!(seen["meta_traceparent"], "", "{answer}");
}

#[test]
fn unusable_trace_settings_stop_the_start_with_the_variable_named() {
    // Bad input tried: an exporter the gateway does not have, and a sampler ratio above 1.
    let output = support::start_fails(None, &[("OTEL_TRACES_EXPORTER", "zipkin")]);
    assert!(output.contains("OTEL_TRACES_EXPORTER"), "{output}");
    let output = support::start_fails(
        None,
        &[
            ("OTEL_TRACES_EXPORTER", "otlp"),
            ("OTEL_TRACES_SAMPLER_ARG", "1.5"),
        ],
    );
    assert!(output.contains("OTEL_TRACES_SAMPLER_ARG"), "{output}");
}

/// The log records the receiver holds.
fn logs(receiver: &RunningPeer) -> Vec<Value> {
    let (http, _) = otlp_ports(receiver);
    let mut response = ureq::get(&format!("http://127.0.0.1:{http}/logs"))
        .call()
        .expect("the receiver answers");
    let text = response.body_mut().read_to_string().expect("JSON");
    serde_json::from_str::<Vec<Value>>(&text).expect("a JSON list of log records")
}

#[test]
fn security_events_reach_an_otlp_audit_sink_as_log_records_in_order() {
    let receiver = start_otlp_receiver();
    let (http_port, _) = otlp_ports(&receiver);
    let data_dir = tempfile::tempdir().unwrap();
    let admin = cli_key(data_dir.path(), "user:root", Some("admin"));
    let gw = gateway()
        .config(&format!(
            "auth:\n  enabled: true\naudit:\n  sinks:\n    - {{type: otlp, endpoint: \"http://127.0.0.1:{http_port}\", headers: {{x-tenant: audit}}}}\n"
        ))
        .data_dir(data_dir)
        .env("OTEL_SERVICE_NAME", "mcpgw-audit")
        .start();
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    // A refused key, a key made and revoked.
    let wrong = format!("mcp_{}", "B".repeat(43));
    let refused = agent
        .get(&gw.url("/api/mcp_servers"))
        .header("x-api-key", &wrong)
        .call()
        .expect("the gateway answers");
    assert_eq!(refused.status().as_u16(), 401);
    let mut made = agent
        .post(&gw.url("/api/auth/keys"))
        .header("x-api-key", &admin)
        .send_json(json!({"principal": "user:carol", "name": "laptop", "role": "viewer"}))
        .expect("the gateway answers");
    assert_eq!(made.status().as_u16(), 201);
    let made: Value = serde_json::from_str(&made.body_mut().read_to_string().unwrap()).unwrap();
    let key_id = made["key_id"].as_str().unwrap();
    let raw_key = made["key"].as_str().unwrap();
    let revoked = agent
        .delete(&gw.url(&format!("/api/auth/keys/{key_id}")))
        .header("x-api-key", &admin)
        .call()
        .expect("the gateway answers");
    assert!(revoked.status().as_u16() < 300);

    let deadline = Instant::now() + SPAN_WAIT;
    let records = loop {
        let records = logs(&receiver);
        if records
            .iter()
            .any(|record| record["attributes"]["event.name"] == "ApiKeyRevoked")
        {
            break records;
        }
        assert!(
            Instant::now() < deadline,
            "no ApiKeyRevoked record within {SPAN_WAIT:?}: {records:?}\n{}",
            receiver.stderr_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let types: Vec<&str> = records
        .iter()
        .filter_map(|record| record["attributes"]["event.name"].as_str())
        .collect();
    assert_eq!(
        types,
        ["AuthenticationFailed", "ApiKeyCreated", "ApiKeyRevoked"],
        "{records:?}"
    );
    let failed = &records[0];
    assert_eq!(failed["severity_text"], "WARN");
    assert_eq!(failed["service_name"], "mcpgw-audit");
    let body: Value = serde_json::from_str(failed["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["event_type"], "AuthenticationFailed");
    assert_eq!(records[1]["attributes"]["mcpgw.event.key_id"], key_id);
    // No credential leaves the gateway in an audit record.
    let everything = serde_json::to_string(&records).unwrap();
    for secret in [admin.as_str(), raw_key, wrong.as_str()] {
        assert!(
            !everything.contains(secret),
            "a credential in the audit records"
        );
    }
}
