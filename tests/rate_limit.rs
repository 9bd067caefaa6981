//! Rate limits end to end: REST requests per caller and tool calls per caller and tool, on the
//! real binary with `MCP_RATE_LIMIT_RPS=1` and `MCP_RATE_LIMIT_BURST=3`.
//!
//! Bad input tried: a non-numeric and a negative `MCP_RATE_LIMIT_RPS`, a zero
//! `MCP_RATE_LIMIT_BURST` (the gateway refuses to start and says why).

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{RunningGateway, cli_key, fixture_server_yaml, gateway, start_fails};

struct Reply {
    status: u16,
    headers: ureq::http::HeaderMap,
    body: Value,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    #[track_caller]
    fn assert_limited_headers(&self, limit: u32, remaining: u32) {
        assert_eq!(
            self.header("x-ratelimit-limit"),
            Some(limit.to_string().as_str()),
            "status {}, body {}",
            self.status,
            self.body
        );
        assert_eq!(
            self.header("x-ratelimit-remaining"),
            Some(remaining.to_string().as_str()),
            "status {}, body {}",
            self.status,
            self.body
        );
    }
}

/// `GET path` as the client at `client` (an `X-Forwarded-For` the gateway believes, since the
/// tests' configurations trust 127.0.0.1 as a proxy), with an optional API key.
fn get(gw: &RunningGateway, path: &str, client: &str, key: Option<&str>) -> Reply {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .new_agent();
    let mut request = agent.get(&gw.url(path)).header("x-forwarded-for", client);
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    let mut response = request.call().expect("the gateway answers");
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

fn limited_gateway(config: &str) -> RunningGateway {
    gateway()
        .config(config)
        .env("MCP_RATE_LIMIT_RPS", "1")
        .env("MCP_RATE_LIMIT_BURST", "3")
        .start()
}

fn proxied_config() -> String {
    format!(
        "auth:\n  trusted_proxies: [\"127.0.0.1\"]\nmcp_servers:\n{}",
        fixture_server_yaml("fx", &[])
    )
}

#[track_caller]
fn assert_refused(reply: &Reply) -> u64 {
    assert_eq!(reply.status, 429, "body: {}", reply.body);
    assert_eq!(reply.body["error"], "RateLimitExceeded", "{}", reply.body);
    assert_eq!(reply.body["status_code"], 429, "{}", reply.body);
    assert!(
        reply.body["message"]
            .as_str()
            .is_some_and(|message| message.contains("retry after")),
        "{}",
        reply.body
    );
    reply.assert_limited_headers(3, 0);
    reply
        .header("retry-after")
        .expect("a 429 carries Retry-After")
        .parse()
        .expect("Retry-After is whole seconds")
}

#[test]
fn rest_requests_are_refused_exactly_when_the_bucket_is_empty_and_retry_after_is_honest() {
    let gw = limited_gateway(&proxied_config());
    let client = "198.51.100.1";
    for remaining in [2, 1, 0] {
        let reply = get(&gw, "/api/mcp_servers", client, None);
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.assert_limited_headers(3, remaining);
    }
    let refused = get(&gw, "/api/mcp_servers", client, None);
    let retry_after = assert_refused(&refused);
    assert_eq!(retry_after, 1, "one token per second comes back within 1 s");

    // Probes and metrics are never limited, and carry no rate-limit headers.
    for path in [
        "/health/live",
        "/health/ready",
        "/health/startup",
        "/metrics",
    ] {
        for _ in 0..10 {
            let reply = get(&gw, path, client, None);
            assert_eq!(reply.status, 200, "{path}: {}", reply.body);
            assert_eq!(reply.header("x-ratelimit-limit"), None, "{path}");
        }
    }
    // An unknown route under /api/ still counts against the caller: still refused.
    assert_refused(&get(&gw, "/api/no_such_route", client, None));

    // Waiting exactly Retry-After lets one request through, and only one.
    std::thread::sleep(Duration::from_secs(retry_after));
    let after_wait = get(&gw, "/api/mcp_servers", client, None);
    assert_eq!(after_wait.status, 200, "{}", after_wait.body);
    after_wait.assert_limited_headers(3, 0);
    assert_refused(&get(&gw, "/api/mcp_servers/fx", client, None));
}

#[test]
fn one_noisy_address_does_not_limit_another() {
    let gw = limited_gateway(&proxied_config());
    let noisy = "203.0.113.5";
    let quiet = "203.0.113.6";
    for _ in 0..3 {
        assert_eq!(get(&gw, "/api/mcp_servers", noisy, None).status, 200);
    }
    for _ in 0..5 {
        assert_refused(&get(&gw, "/api/mcp_servers", noisy, None));
    }
    let other = get(&gw, "/api/mcp_servers", quiet, None);
    assert_eq!(other.status, 200, "{}", other.body);
    other.assert_limited_headers(3, 2);
}

#[test]
fn authenticated_callers_are_limited_by_principal_not_by_address() {
    let data_dir = tempfile::tempdir().unwrap();
    let noisy_key = cli_key(data_dir.path(), "service:noisy", Some("admin"));
    let quiet_key = cli_key(data_dir.path(), "service:quiet", Some("admin"));
    let gw = gateway()
        .config(&format!(
            "auth:\n  enabled: true\n  trusted_proxies: [\"127.0.0.1\"]\nmcp_servers:\n{}",
            fixture_server_yaml("fx", &[])
        ))
        .data_dir(data_dir)
        .env("MCP_RATE_LIMIT_RPS", "1")
        .env("MCP_RATE_LIMIT_BURST", "3")
        .start();
    // The noisy principal changes address on every request: the bucket follows it anyway.
    for (index, remaining) in [2, 1, 0].into_iter().enumerate() {
        let reply = get(
            &gw,
            "/api/mcp_servers",
            &format!("192.0.2.{index}"),
            Some(&noisy_key),
        );
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.assert_limited_headers(3, remaining);
    }
    assert_refused(&get(
        &gw,
        "/api/mcp_servers",
        "192.0.2.99",
        Some(&noisy_key),
    ));
    // Another principal from the noisy one's address is untouched.
    let quiet = get(&gw, "/api/mcp_servers", "192.0.2.0", Some(&quiet_key));
    assert_eq!(quiet.status, 200, "{}", quiet.body);
    quiet.assert_limited_headers(3, 2);
    // A request that fails authentication is answered 401 and takes no token from anyone.
    let unauthenticated = get(&gw, "/api/mcp_servers", "192.0.2.50", None);
    assert_eq!(unauthenticated.status, 401, "{}", unauthenticated.body);
    assert_eq!(unauthenticated.header("x-ratelimit-limit"), None);
}

#[test]
fn tool_calls_are_limited_per_tool_and_never_by_the_rest_bucket() {
    let gw = limited_gateway(&proxied_config());
    // Listing over /mcp is not a tool call and never limited.
    for _ in 0..8 {
        assert!(gw.mcp_tool_names().contains(&"fx__echo".to_owned()));
    }
    for index in 0..3 {
        let answer = gw.mcp_call_tool("fx__echo", json!({"text": format!("call {index}")}));
        assert!(answer.get("result").is_some(), "{answer}");
    }
    let refused = gw.mcp_call_tool("fx__echo", json!({"text": "one too many"}));
    let error = &refused["error"];
    assert_eq!(error["code"], -32029, "{refused}");
    let retry_after_ms = error["data"]["retryAfterMs"]
        .as_u64()
        .unwrap_or_else(|| panic!("the error says when to retry: {refused}"));
    assert!(
        (1..=1000).contains(&retry_after_ms),
        "one token per second: {refused}"
    );
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|message| message.contains("retry after 1 s")),
        "{refused}"
    );
    // Another tool has its own bucket.
    let other = gw.mcp_call_tool("fx__add", json!({"a": 2, "b": 3}));
    assert!(other.get("result").is_some(), "{other}");
    // Made-up tool names are unknown, not limited, however many are sent.
    for index in 0..5 {
        let unknown = gw.mcp_call_tool(&format!("fx__made_up_{index}"), json!({}));
        assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    }
    // Eleven requests to /mcp later, the REST bucket of the same client is still full.
    let rest = get(&gw, "/api/mcp_servers", "127.0.0.1", None);
    assert_eq!(rest.status, 200, "{}", rest.body);
    rest.assert_limited_headers(3, 2);

    // After the announced wait, the tool can be called again.
    std::thread::sleep(Duration::from_millis(retry_after_ms));
    let again = gw.mcp_call_tool("fx__echo", json!({"text": "after the wait"}));
    assert!(again.get("result").is_some(), "{again}");
}

#[test]
fn zero_turns_rate_limiting_off() {
    let gw = gateway()
        .config(&proxied_config())
        .env("MCP_RATE_LIMIT_RPS", "0")
        .env("MCP_RATE_LIMIT_BURST", "1")
        .start();
    for _ in 0..50 {
        let reply = get(&gw, "/api/mcp_servers", "198.51.100.9", None);
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert_eq!(reply.header("x-ratelimit-limit"), None);
    }
}

#[test]
fn the_config_section_applies_when_the_environment_is_silent() {
    let config = format!("rate_limit: {{rps: 1, burst: 2}}\n{}", proxied_config());
    let gw = gateway()
        .config(&config)
        .env("MCP_RATE_LIMIT_RPS", "")
        .start();
    for remaining in [1, 0] {
        let reply = get(&gw, "/api/mcp_servers", "198.51.100.10", None);
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.assert_limited_headers(2, remaining);
    }
    let refused = get(&gw, "/api/mcp_servers", "198.51.100.10", None);
    assert_eq!(refused.status, 429, "{}", refused.body);
    refused.assert_limited_headers(2, 0);
}

#[test]
fn bad_rate_limit_variables_stop_the_start_with_the_reason() {
    for (variable, value, expected) in [
        (
            "MCP_RATE_LIMIT_RPS",
            "fast",
            "MCP_RATE_LIMIT_RPS must be a number",
        ),
        (
            "MCP_RATE_LIMIT_RPS",
            "-1",
            "MCP_RATE_LIMIT_RPS must be a number",
        ),
        (
            "MCP_RATE_LIMIT_BURST",
            "0",
            "MCP_RATE_LIMIT_BURST must be a whole number",
        ),
    ] {
        let stderr = start_fails(None, &[(variable, value)]);
        assert!(
            stderr.contains(expected) && stderr.contains(value),
            "{variable}={value}: {stderr}"
        );
    }
}
