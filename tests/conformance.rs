//! The official MCP conformance suite (`@modelcontextprotocol/conformance`) against the gateway's
//! `/mcp` endpoint, once per requirement set (`2025-11-25` with sessions, `2026-07-28`
//! stateless). The gateway fronts one server, the testkit's `mcpgw-conformance-server`, which
//! implements the tools, prompts and resources the scenarios ask for, with `tool_names: bare`
//! so that the names are the suite's own.
//!
//! The verdict comes from the checks the suite wrote, not from its exit code: every failed
//! check must be listed in `tests/conformance/baseline.json` with the reason the gateway cannot
//! pass it yet, and a listed check that passes is a stale entry, which fails the test too.
//! Because a tool scenario can report success on an "unknown tool" error, the gateway's tool
//! list is checked with the official Python SDK before the suite runs.

mod support;

use std::collections::BTreeMap;

use serde_json::Value;
use support::peers::{
    conformance_problems, conformance_tool_names, run_conformance, run_python_client,
};

/// The baseline: requirement set -> `scenario` or `scenario:check-id` -> why it fails.
const BASELINE: &str = include_str!("conformance/baseline.json");

fn baseline(requirements: &str) -> BTreeMap<String, String> {
    let all: BTreeMap<String, BTreeMap<String, String>> = serde_json::from_str(BASELINE)
        .unwrap_or_else(|error| {
            panic!("tests/conformance/baseline.json is not {{set: {{entry: reason}}}}: {error}")
        });
    let entries = all.get(requirements).cloned().unwrap_or_default();
    for (entry, reason) in &entries {
        assert!(
            reason.split_whitespace().count() >= 5,
            "the baseline entry {requirements} {entry} needs a real reason (what the gateway \
             lacks and what would fix it), not {reason:?}"
        );
    }
    entries
}

fn conformance_gateway() -> support::RunningGateway {
    let binary = mcpgw_fixtures::conformance::conformance_server_binary();
    let yaml = format!(
        "tool_names: bare\nmcp_servers:\n  conformance:\n    mode: subprocess\n    command: \
         [\"{}\"]\n",
        binary.display()
    );
    // The suite makes dozens of calls in a few seconds from one address; rate limiting is
    // tested elsewhere and would only make this run depend on the machine's speed.
    let gateway = support::gateway()
        .config(&yaml)
        .env("MCP_RATE_LIMIT_RPS", "0")
        .start();
    // Prompts and resources are listed from running servers only, so start it first.
    let started = gateway.post_empty("/api/mcp_servers/conformance/start");
    assert_eq!(
        started.status,
        200,
        "the conformance server did not start: {}\ngateway stderr:\n{}",
        started.text,
        gateway.stderr()
    );
    gateway
}

/// The suite trusts tool results too easily, so the tools it calls must really be there.
fn assert_suite_tools_are_listed(url: &str, requirements: &str) {
    let listed = run_python_client(
        "http_client.py",
        &[
            url.to_owned(),
            "--protocol".to_owned(),
            requirements.to_owned(),
        ],
    );
    let tools: Vec<&str> = listed["tools"]
        .as_array()
        .expect("the client lists tools")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let missing: Vec<&str> = conformance_tool_names(requirements)
        .into_iter()
        .filter(|name| !tools.contains(name))
        .collect();
    assert!(
        missing.is_empty(),
        "the gateway does not list the conformance tools {missing:?} over {requirements}; it \
         lists {tools:?}"
    );
}

/// Checks the suite counted as passed although the gateway answered that the tool or prompt
/// does not exist: some scenarios accept any JSON-RPC error.
fn passes_on_unknown_names(run: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let scenarios = run["scenarios"].as_object().expect("a conformance run");
    for (scenario, checks) in scenarios {
        for check in checks.as_array().into_iter().flatten() {
            let details = check["details"].to_string();
            if check["status"] == "SUCCESS"
                && (details.contains("unknown tool: ") || details.contains("unknown prompt: "))
            {
                problems.push(format!(
                    "{scenario}:{} passed on an unknown tool or prompt: {details}",
                    check["id"].as_str().unwrap_or_default()
                ));
            }
        }
    }
    problems
}

fn check_requirement_set(requirements: &str) {
    let gateway = conformance_gateway();
    let url = format!("{}/mcp", gateway.base_url);
    assert_suite_tools_are_listed(&url, requirements);

    let output = tempfile::tempdir().unwrap();
    let run = run_conformance(&url, requirements, output.path());
    let baseline = baseline(requirements);
    let expected: Vec<&str> = baseline.keys().map(String::as_str).collect();
    let mut problems = conformance_problems(&run, &expected);
    problems.extend(passes_on_unknown_names(&run));
    assert!(
        problems.is_empty(),
        "the conformance suite ({requirements}) is not as tests/conformance/baseline.json \
         expects:\n  {}\n\nsuite output:\n{}\ngateway stderr:\n{}",
        problems.join("\n  "),
        run["output"].as_str().unwrap_or_default(),
        gateway.stderr()
    );
    // The gateway survives the suite: nothing it did wedged the endpoint.
    let health = gateway.get("/api/mcp_servers/conformance");
    assert_eq!(health.status, 200, "{}", health.text);
}

#[test]
fn the_2025_11_25_requirements_pass_through_the_gateway() {
    check_requirement_set("2025-11-25");
}

#[test]
fn the_2026_07_28_requirements_pass_through_the_gateway() {
    check_requirement_set("2026-07-28");
}
