//! End-to-end tests of `GET /api/system` and of CORS against the real binary: the summary's
//! counts move as tool calls go through `/mcp` (a tool-level error and a call that fails
//! included); preflights from an allowed and a refused origin with `MCP_CORS_ORIGINS` set; no
//! CORS header at all when it is unset; an allowed origin may change things and read the
//! refusals, another may not; `MCP_CORS_ORIGINS=*` is refused at start with authentication off
//! on a non-loopback address; and with authentication on, a preflight still answers without
//! credentials while the summary needs a key with `metrics:read`.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{RunningGateway, cli_key, fixture_server_yaml, gateway, start_fails_with};

const ALLOWED: &str = "https://console.example.com";
const EXPOSED: &str =
    "Mcp-Session-Id, Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining, WWW-Authenticate";

struct Reply {
    status: u16,
    headers: ureq::http::HeaderMap,
    body: Value,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .map(|value| value.to_str().expect("a text header"))
    }

    fn cors_headers(&self) -> Vec<String> {
        self.headers
            .keys()
            .map(|name| name.as_str().to_owned())
            .filter(|name| name.starts_with("access-control-"))
            .collect()
    }
}

/// One request with any method and headers.
fn call(gw: &RunningGateway, method: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
    send(gw, method, path, headers, None)
}

/// One request with any method, headers and body.
fn send(
    gw: &RunningGateway,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Reply {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .new_agent();
    let mut request = ureq::http::Request::builder()
        .method(method)
        .uri(gw.url(path));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut response = match body {
        Some(body) => agent.run(request.body(body.to_owned()).unwrap()),
        None => agent.run(request.body(()).unwrap()),
    }
    .expect("the gateway answers");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Reply {
        status,
        headers,
        body,
    }
}

fn preflight(gw: &RunningGateway, origin: &str) -> Reply {
    call(
        gw,
        "OPTIONS",
        "/api/system",
        &[
            ("origin", origin),
            ("access-control-request-method", "GET"),
            ("access-control-request-headers", "x-api-key"),
        ],
    )
}

fn servers_config() -> String {
    format!("mcp_servers:\n{}", fixture_server_yaml("demo", &[]))
}

#[test]
fn the_summary_counts_tool_calls_failures_and_latencies() {
    let gw = gateway().config(&servers_config()).start();
    let before = gw.get("/api/system");
    assert_eq!(before.status, 200, "{}", before.text);
    let before = before.json();
    assert_eq!(before["version"], env!("CARGO_PKG_VERSION"));
    assert!(before["uptime_seconds"].as_f64().unwrap() >= 0.0);
    let metrics = &before["metrics"];
    assert_eq!(metrics["servers_total"], 1);
    assert_eq!(metrics["groups_total"], 0);
    assert_eq!(metrics["tool_calls"], 0);
    assert_eq!(metrics["success_rate"], Value::Null);
    assert_eq!(metrics["p50_ms"], Value::Null);

    // Two answers, one tool-level error (`isError`, still an answer), one call whose server
    // dies without answering (a failure).
    for text in ["one", "two"] {
        let answer = gw.mcp_call_tool("demo__echo", json!({"text": text}));
        assert!(answer.get("result").is_some(), "{answer}");
    }
    let failed_tool = gw.mcp_call_tool("demo__fail", json!({"message": "no"}));
    assert_eq!(failed_tool["result"]["isError"], true, "{failed_tool}");
    let listed = gw.mcp_tool_names();
    let crashed = gw.mcp_call_tool("demo__crash", json!({}));
    assert!(
        crashed.get("error").is_some() || crashed["result"]["isError"] == true,
        "{crashed}"
    );

    let after = gw.wait_for("/api/system", Duration::from_secs(10), |body| {
        body["metrics"]["tool_calls"] == 4
    });
    let metrics = &after["metrics"];
    assert_eq!(metrics["tool_failures"], 1, "{after}");
    assert_eq!(metrics["tool_errors"], 1, "{after}");
    assert_eq!(metrics["success_rate"], 0.75, "{after}");
    let p50 = metrics["p50_ms"].as_f64().expect("a median after calls");
    let p99 = metrics["p99_ms"].as_f64().expect("a p99 after calls");
    assert!(p50 >= 0.0 && p99 >= p50, "{after}");
    assert_eq!(
        metrics["tools_total"].as_u64().unwrap(),
        u64::try_from(listed.len()).unwrap(),
        "{after}; listed {listed:?}"
    );
    let by_state = metrics["servers_by_state"].as_object().unwrap();
    let counted: u64 = by_state.values().map(|count| count.as_u64().unwrap()).sum();
    assert_eq!(counted, 1, "{after}");
    assert!(
        after["uptime_seconds"].as_f64().unwrap() >= before["uptime_seconds"].as_f64().unwrap()
    );
}

#[test]
fn preflights_from_allowed_and_refused_origins() {
    let gw = gateway()
        .env(
            "MCP_CORS_ORIGINS",
            &format!("http://localhost:3000, {ALLOWED}"),
        )
        .start();
    let allowed = preflight(&gw, ALLOWED);
    assert_eq!(allowed.status, 204, "{}", allowed.body);
    assert_eq!(allowed.header("access-control-allow-origin"), Some(ALLOWED));
    assert_eq!(allowed.header("vary"), Some("Origin"));
    assert_eq!(
        allowed.header("access-control-allow-methods"),
        Some("GET, POST, PUT, PATCH, DELETE, OPTIONS")
    );
    assert_eq!(
        allowed.header("access-control-allow-headers"),
        Some("x-api-key")
    );
    assert_eq!(allowed.header("access-control-max-age"), Some("600"));

    // Bad input: an origin that is not listed.
    let refused = preflight(&gw, "https://elsewhere.example.net");
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(refused.body["error"], "AccessDeniedError");
    assert_eq!(refused.body["status_code"], 403);
    assert!(refused.cors_headers().is_empty(), "{:?}", refused.headers);

    let actual = call(&gw, "GET", "/api/system", &[("origin", ALLOWED)]);
    assert_eq!(actual.status, 200);
    assert_eq!(actual.header("access-control-allow-origin"), Some(ALLOWED));
    assert_eq!(
        actual.header("access-control-expose-headers"),
        Some(EXPOSED)
    );
}

#[test]
fn an_allowed_origin_may_change_things_and_read_the_refusals_another_may_not() {
    let gw = gateway().env("MCP_CORS_ORIGINS", ALLOWED).start();
    let create = r#"{"mcp_server_id": "console", "mode": "subprocess", "command": ["true"]}"#;
    let json = ("content-type", "application/json");
    let created = send(
        &gw,
        "POST",
        "/api/mcp_servers",
        &[("origin", ALLOWED), json],
        Some(create),
    );
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.header("access-control-allow-origin"), Some(ALLOWED));

    // Bad input from the allowed origin: a text/plain body. The page can read why.
    let refused = send(
        &gw,
        "POST",
        "/api/mcp_servers",
        &[("origin", ALLOWED), ("content-type", "text/plain")],
        Some(create),
    );
    assert_eq!(refused.status, 415, "{}", refused.body);
    assert_eq!(refused.body["error"], "UnsupportedMediaTypeError");
    assert_eq!(refused.header("access-control-allow-origin"), Some(ALLOWED));

    // Bad input: another origin, even with a JSON body; it cannot read the refusal.
    let foreign = send(
        &gw,
        "DELETE",
        "/api/mcp_servers/console",
        &[("origin", "https://elsewhere.example.net"), json],
        None,
    );
    assert_eq!(foreign.status, 403, "{}", foreign.body);
    assert_eq!(foreign.body["error"], "ForbiddenOriginError");
    assert!(foreign.cors_headers().is_empty(), "{:?}", foreign.headers);
    assert_eq!(gw.get("/api/mcp_servers/console").status, 200);
}

#[test]
fn any_origin_is_refused_at_start_with_auth_off_on_an_open_address() {
    // Bad input: `*` with authentication off on every interface, even when told
    // --unsafe-no-auth.
    for args in [
        &["--host", "0.0.0.0", "--unsafe-no-auth"][..],
        &["--host", "::", "--unsafe-no-auth"],
        &["--host", "0.0.0.0"],
    ] {
        let stderr = start_fails_with(args, None, &[("MCP_CORS_ORIGINS", "*")]);
        assert!(
            stderr.contains("MCP_CORS_ORIGINS") && stderr.contains("auth.enabled"),
            "{args:?}: {stderr}"
        );
    }
    // `*` on loopback, or on an open address with authentication on, starts.
    let local = gateway().env("MCP_CORS_ORIGINS", "*").start();
    assert_eq!(local.get("/health/live").status, 200);
    let open = gateway()
        .host("0.0.0.0")
        .config("auth:\n  enabled: true\n")
        .env("MCP_CORS_ORIGINS", "*")
        .start();
    assert_eq!(open.get("/health/live").status, 200);
}

#[test]
fn without_cors_origins_no_answer_has_cors_headers() {
    let gw = gateway().start();
    let answer = preflight(&gw, ALLOWED);
    assert_ne!(answer.status, 204, "{}", answer.body);
    assert!(answer.cors_headers().is_empty(), "{:?}", answer.headers);
    let actual = call(&gw, "GET", "/api/system", &[("origin", ALLOWED)]);
    assert_eq!(actual.status, 200);
    assert!(actual.cors_headers().is_empty(), "{:?}", actual.headers);
}

#[test]
fn with_auth_on_preflights_need_no_key_and_the_summary_needs_metrics_read() {
    let data = tempfile::tempdir().unwrap();
    let viewer = cli_key(data.path(), "user:watcher", Some("viewer"));
    let operator = cli_key(data.path(), "user:hands", Some("operator"));
    let gw = gateway()
        .config("auth:\n  enabled: true\n")
        .data_dir(data)
        .env("MCP_CORS_ORIGINS", ALLOWED)
        .start();

    let allowed = preflight(&gw, ALLOWED);
    assert_eq!(allowed.status, 204, "{}", allowed.body);
    assert_eq!(allowed.header("access-control-allow-origin"), Some(ALLOWED));

    // No key: 401, and the browser may read it (CORS wraps authentication).
    let anonymous = call(&gw, "GET", "/api/system", &[("origin", ALLOWED)]);
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    assert_eq!(anonymous.body["error"], "AuthenticationError");
    assert_eq!(
        anonymous.header("access-control-allow-origin"),
        Some(ALLOWED)
    );
    assert!(anonymous.header("www-authenticate").is_some());

    let denied = call(&gw, "GET", "/api/system", &[("x-api-key", &operator)]);
    assert_eq!(denied.status, 403, "{}", denied.body);
    assert_eq!(denied.body["error"], "AccessDeniedError");

    let seen = call(&gw, "GET", "/api/system", &[("x-api-key", &viewer)]);
    assert_eq!(seen.status, 200, "{}", seen.body);
    assert!(seen.body["metrics"]["servers_by_state"].is_object());
}
