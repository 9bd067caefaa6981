//! Behaviour of configuration management: changes, the sanitized view, export, the text diff.

use super::*;

const SECRET: &str = "s3cr3t-value-123";

fn environment(name: &str) -> Option<String> {
    match name {
        "API_TOKEN" => Some(SECRET.to_owned()),
        "HOST" => Some("api.example.com".to_owned()),
        "TTL" => Some("120".to_owned()),
        _ => None,
    }
}

fn parse_ok(text: &str) -> GatewayConfig {
    parse("gateway.yaml", text, &environment).unwrap_or_else(|errors| panic!("{errors}\n{text}"))
}

fn exported_and_parsed(config: &GatewayConfig) -> (String, GatewayConfig) {
    let exported = export_yaml(config);
    let again = parse("exported.yaml", &exported, &environment)
        .unwrap_or_else(|errors| panic!("{errors}\n{exported}"));
    (exported, again)
}

// --- changes ---

const BEFORE: &str = r#"
mcp_servers:
  kept: {mode: subprocess, command: [kept]}
  edited: {mode: subprocess, command: [old]}
  dropped: {mode: remote, endpoint: "https://a/mcp"}
  flips: {mode: subprocess, command: [flips]}
  pool: {mode: group, members: [{id: kept}]}
  old_pool: {mode: group, members: [{id: kept}]}
  steady_pool: {mode: group, members: [{id: edited}]}
"#;

const AFTER: &str = r#"
mcp_servers:
  kept: {mode: subprocess, command: [kept]}
  edited: {mode: subprocess, command: [new]}
  fresh: {mode: docker, image: "img:1"}
  flips: {mode: group, members: [{id: kept}]}
  pool: {mode: group, strategy: random, members: [{id: kept}]}
  new_pool: {mode: group, members: [{id: kept}]}
  steady_pool: {mode: group, members: [{id: edited}]}
"#;

fn names(names: &[&str]) -> Vec<String> {
    names.iter().map(|name| (*name).to_owned()).collect()
}

#[test]
fn changes_classify_servers_and_groups_by_id() {
    let changes = changes(&parse_ok(BEFORE), &parse_ok(AFTER));
    assert_eq!(
        changes.servers,
        SectionChanges {
            added: names(&["fresh"]),
            removed: names(&["dropped", "flips"]),
            updated: names(&["edited"]),
            unchanged: names(&["kept"]),
        }
    );
    assert_eq!(
        changes.groups,
        SectionChanges {
            added: names(&["flips", "new_pool"]),
            removed: names(&["old_pool"]),
            updated: names(&["pool"]),
            unchanged: names(&["steady_pool"]),
        }
    );
    assert!(changes.restart_required.is_empty(), "{changes:?}");
    assert!(!changes.is_empty());
}

#[test]
fn equal_configurations_change_nothing() {
    let changes = changes(&parse_ok(BEFORE), &parse_ok(BEFORE));
    assert!(changes.is_empty(), "{changes:?}");
    assert_eq!(
        changes.servers.unchanged,
        names(&["dropped", "edited", "flips", "kept"])
    );
    assert_eq!(
        changes.groups.unchanged,
        names(&["old_pool", "pool", "steady_pool"])
    );
    // Said without comparing: the same answer.
    assert_eq!(super::no_changes(&parse_ok(BEFORE)), changes);
    assert_eq!(
        super::no_changes(&GatewayConfig::default()),
        super::changes(&GatewayConfig::default(), &GatewayConfig::default())
    );
}

#[test]
fn other_sections_that_differ_need_a_restart() {
    let old = parse_ok("rate_limit: {rps: 10, burst: 20}\n");
    let new = parse_ok(
        "rate_limit: {rps: 5, burst: 20}\nauth: {enabled: true}\ndiscovery: {}\n\
         tool_timeout_s: 30\nprobe_tools: false\nprobe_concurrency: 8\n\
         mcp_endpoint: {allowed_hosts: [gw.example.com]}\n\
         tool_names: bare\nconfig_reload: {watch: true}\nevent_log: {max_events: 5}\n\
         allowed_hosts: [gw.example.com]\n",
    );
    let changes = changes(&old, &new);
    assert_eq!(
        changes.restart_required,
        names(&[
            "allowed_hosts",
            "auth",
            "config_reload",
            "discovery",
            "event_log",
            "mcp_endpoint",
            "probe_concurrency",
            "probe_tools",
            "rate_limit",
            "tool_names",
            "tool_timeout_s",
        ])
    );
    assert!(changes.servers.is_empty() && changes.groups.is_empty());
    // Writing a section out with its defaults is the same as leaving it out.
    let spelled_out = parse_ok("rate_limit: {rps: 10, burst: 20}\ntool_timeout_s: 60\n");
    assert!(super::changes(&GatewayConfig::default(), &spelled_out).is_empty());
}

// --- sanitized ---

#[test]
fn sanitized_shows_no_secret_and_keeps_everything_else() {
    let config = parse_ok(&format!(
        r#"
mcp_servers:
  math:
    mode: subprocess
    command: [python3, -m, math_server, --api-token, {SECRET}, "--password={SECRET}"]
    env: {{DB_URL: "{SECRET}", PLAIN: harmless}}
  api:
    mode: remote
    endpoint: "https://user:{SECRET}@${{HOST}}/mcp"
    headers: {{Authorization: "Bearer ${{API_TOKEN}}", X-Other: "{SECRET}"}}
  box: {{mode: docker, image: "repo/img:tag", args: [serve], network: none}}
  extra: {{mode: subprocess, command: [tool], description: "${{API_TOKEN}}"}}
discovery:
  sources:
    - type: docker
      config:
        socket_path: /var/run/docker.sock
        auth_header: "{SECRET}"
        nested: {{registry_password: "{SECRET}", registry: r.example.com}}
auth:
  enabled: true
  oidc: {{enabled: true, issuer: "https://issuer.example.com", audience: mcpgw}}
"#
    ));
    let view = sanitized(&config);
    let text = view.to_string();
    assert!(!text.contains(SECRET), "{text}");
    for kept in [
        "python3",
        "math_server",
        "--api-token",
        "--password=***",
        "repo/img:tag",
        "serve",
        "/var/run/docker.sock",
        "r.example.com",
        "https://issuer.example.com",
        "https://user:***@api.example.com/mcp",
    ] {
        assert!(text.contains(kept), "`{kept}` is missing from {text}");
    }
    assert_eq!(view["mcp_servers"]["math"]["env"]["PLAIN"], SECRET_MASK);
    assert_eq!(
        view["mcp_servers"]["api"]["headers"]["Authorization"],
        SECRET_MASK
    );
    assert_eq!(view["mcp_servers"]["extra"]["description"], SECRET_MASK);
    assert_eq!(view["auth"]["api_key"]["header_name"], "X-API-Key");
    assert_eq!(view["auth"]["enabled"], true);
    assert_eq!(view["mcp_servers"]["api"]["mode"], "remote");
    assert!(view.get("variable_references").is_none() && view.get("warnings").is_none());
}

// --- export ---

const RICH: &str = r#"
mcp_servers:
  math:
    mode: subprocess
    command: [python3, -m, math_server, "$${LITERAL}"]
    env: {REGION: "${REGION:-eu-west-1}", LEVEL: "${LOG_LEVEL:-info}"}
    cwd: /srv/math
    idle_ttl_s: ${IDLE:-600}
    health_check_interval_s: 30
    max_consecutive_failures: 5
    description: "adds ${WHAT:-numbers} and costs $$5"
    tools:
      - name: add
        description: Adds two numbers
        inputSchema: {type: object, properties: {a: {type: number}}, required: [a]}
  api:
    mode: remote
    endpoint: "https://${HOST}/mcp"
    headers: {Authorization: "Bearer ${DEV_TOKEN:-dev-token}"}
    idle_ttl_s: ${TTL}
  box:
    mode: docker
    image: "repo/img:tag"
    args: [serve, --stdio]
    network: none
    memory: 512m
    cpus: "1.5"
    read_only: false
    volumes: ["/data:/data:ro"]
    runtime: podman
  pool:
    mode: group
    strategy: weighted_round_robin
    min_healthy: 1
    members: [{id: math, weight: 2}, {id: box, priority: 1}]
discovery:
  refresh_interval_s: 15
  sources:
    - {id: local, type: docker, mode: authoritative, enabled: false, config: {socket_path: /var/run/docker.sock}}
    - {type: filesystem, config: {path: /etc/mcpgw/servers}}
auth:
  enabled: true
  allow_anonymous: true
  api_key: {enabled: true, header_name: X-Key}
  oidc: {enabled: true, issuer: "https://issuer.example.com", audience: mcpgw, subject_claim: email}
  opa: {enabled: true, url: "http://opa:8181", policy_path: mcpgw/allow}
  role_assignments: [{principal: "user:alice", role: admin}, {principal: "group:ops", role: operator, scope: "tenant:t1"}]
  trusted_proxies: [10.0.0.0/8]
rate_limit: {rps: 2.5, burst: 7}
event_log: {max_age_days: 3, max_events: 1000, compaction_interval_s: 10}
tool_names: bare
tool_timeout_s: 45
config_reload: {watch: true}
mcp_endpoint: {allowed_hosts: [gw.example.com], allowed_origins: ["https://app.example.com"], sse_keep_alive_s: 5}
probe_tools: false
"#;

#[test]
fn export_loads_back_to_an_equal_configuration() {
    let config = parse_ok(RICH);
    let (exported, again) = exported_and_parsed(&config);
    assert_eq!(again, config, "{exported}");
    // Equality leaves these two out; the export must not.
    assert_eq!(again.mcp_endpoint, config.mcp_endpoint, "{exported}");
    assert_eq!(again.probe_tools, config.probe_tools, "{exported}");
    assert!(
        exported.starts_with("mcp_servers:"),
        "mcp_servers comes first:\n{exported}"
    );
    assert_eq!(
        again.mcp_servers["math"].command.as_deref().unwrap()[3],
        "${LITERAL}"
    );
    // Exporting the export changes nothing more.
    let (exported_again, _) = exported_and_parsed(&again);
    assert_eq!(exported_again, exported);
}

#[test]
fn export_writes_references_that_fell_back_to_their_defaults() {
    let config = parse_ok(RICH);
    let exported = export_yaml(&config);
    for reference in [
        "\"${REGION:-eu-west-1}\"",
        "\"${LOG_LEVEL:-info}\"",
        "idle_ttl_s: ${IDLE:-600}",
        "\"adds ${WHAT:-numbers} and costs \\x24\\x245\"",
        "\"Bearer ${DEV_TOKEN:-dev-token}\"",
    ] {
        assert!(
            exported.contains(reference),
            "no `{reference}` in\n{exported}"
        );
    }
    // Loaded where the variables are set, the references take the new values.
    let elsewhere = parse("exported.yaml", &exported, &|name| match name {
        "REGION" => Some("us-east-2".to_owned()),
        "DEV_TOKEN" => Some("prod-token".to_owned()),
        other => environment(other),
    })
    .unwrap_or_else(|errors| panic!("{errors}\n{exported}"));
    let math = &elsewhere.mcp_servers["math"];
    assert_eq!(math.env.as_ref().unwrap()["REGION"], "us-east-2");
    assert_eq!(
        elsewhere.mcp_servers["api"].headers.as_ref().unwrap()["Authorization"],
        "Bearer prod-token"
    );
}

#[test]
fn export_masks_secrets_it_cannot_write_as_a_reference() {
    let text = format!(
        r#"
mcp_servers:
  api:
    mode: remote
    endpoint: "https://${{HOST}}/mcp"
    headers: {{Authorization: "Bearer ${{API_TOKEN}}", X-Literal: "{SECRET}"}}
  math:
    mode: subprocess
    command: [math, --token, "{SECRET}"]
    env: {{KEY: "{SECRET}"}}
"#
    );
    let config = parse_ok(&text);
    let (exported, again) = exported_and_parsed(&config);
    assert!(!exported.contains(SECRET), "{exported}");
    // Values that came from a variable are written back as their references, the literal
    // text around them kept, so the same environment loads the same values.
    assert!(exported.contains("\"https://${HOST}/mcp\""), "{exported}");
    assert!(exported.contains("\"Bearer ${API_TOKEN}\""), "{exported}");
    assert_eq!(
        again.mcp_servers["api"].endpoint.as_deref(),
        Some("https://api.example.com/mcp")
    );
    let headers = again.mcp_servers["api"].headers.clone().unwrap();
    assert_eq!(headers["Authorization"], format!("Bearer {SECRET}"));
    assert_eq!(headers["X-Literal"], SECRET_MASK);
    assert_eq!(
        again.mcp_servers["math"].env.as_ref().unwrap()["KEY"],
        SECRET_MASK
    );
    assert_eq!(
        again.mcp_servers["math"].command.as_deref(),
        Some(&names(&["math", "--token", SECRET_MASK])[..])
    );
    // Everything else is as it was.
    let mut expected = config.clone();
    for (id, definition) in &mut expected.mcp_servers {
        for values in [&mut definition.env, &mut definition.headers]
            .into_iter()
            .flatten()
        {
            values
                .iter_mut()
                .filter(|(key, _)| key.as_str() != "Authorization")
                .for_each(|(_, value)| *value = SECRET_MASK.to_owned());
        }
        if id == "math" {
            definition.command = Some(names(&["math", "--token", SECRET_MASK]));
        }
    }
    assert_eq!(again, expected, "{exported}");
}

#[test]
fn an_empty_configuration_exports_to_an_empty_configuration() {
    let (exported, again) = exported_and_parsed(&GatewayConfig::default());
    assert_eq!(again, GatewayConfig::default(), "{exported}");
    assert!(!exported.contains("discovery"), "{exported}");
}

// --- unified_diff ---

#[test]
fn equal_texts_have_an_empty_diff() {
    assert_eq!(unified_diff("a", "x\ny\n", "b", "x\ny\n", 3), "");
    assert_eq!(unified_diff("a", "", "b", "", 3), "");
}

#[test]
fn a_changed_line_is_shown_with_its_context() {
    let old = "a\nb\nc\nd\ne\nf\ng\n";
    let new = "a\nb\nc\nD\ne\nf\ng\n";
    assert_eq!(
        unified_diff("gateway.yaml", old, "running", new, 2),
        "--- gateway.yaml\n+++ running\n@@ -2,5 +2,5 @@\n b\n c\n-d\n+D\n e\n f\n"
    );
    assert_eq!(
        unified_diff("a", old, "b", new, 0),
        "--- a\n+++ b\n@@ -4 +4 @@\n-d\n+D\n"
    );
}

#[test]
fn close_changes_share_a_hunk_and_distant_ones_do_not() {
    let old: String = (1..=20).map(|n| format!("{n}\n")).collect();
    let new: String = (1..=20)
        .map(|n| match n {
            3 => "three\n".to_owned(),
            7 => "seven\n".to_owned(),
            18 => "eighteen\n".to_owned(),
            n => format!("{n}\n"),
        })
        .collect();
    assert_eq!(
        unified_diff("a", &old, "b", &new, 2),
        "--- a\n+++ b\n\
         @@ -1,9 +1,9 @@\n 1\n 2\n-3\n+three\n 4\n 5\n 6\n-7\n+seven\n 8\n 9\n\
         @@ -16,5 +16,5 @@\n 16\n 17\n-18\n+eighteen\n 19\n 20\n"
    );
}

#[test]
fn insertions_at_the_start_and_the_end() {
    assert_eq!(
        unified_diff("a", "x\ny\n", "b", "new\nx\ny\n", 1),
        "--- a\n+++ b\n@@ -1 +1,2 @@\n+new\n x\n"
    );
    assert_eq!(
        unified_diff("a", "x\ny\n", "b", "x\ny\nnew\n", 1),
        "--- a\n+++ b\n@@ -2 +2,2 @@\n y\n+new\n"
    );
    assert_eq!(
        unified_diff("a", "", "b", "x\n", 3),
        "--- a\n+++ b\n@@ -0,0 +1 @@\n+x\n"
    );
    assert_eq!(
        unified_diff("a", "x\ny\n", "b", "", 3),
        "--- a\n+++ b\n@@ -1,2 +0,0 @@\n-x\n-y\n"
    );
    assert_eq!(
        unified_diff("a", "x\ny\n", "b", "x\nnew\ny\n", 0),
        "--- a\n+++ b\n@@ -1,0 +2 @@\n+new\n"
    );
}

#[test]
fn a_missing_newline_at_the_end_is_marked() {
    assert_eq!(
        unified_diff("a", "x\ny", "b", "x\ny\n", 3),
        "--- a\n+++ b\n@@ -1,2 +1,2 @@\n x\n-y\n\\ No newline at end of file\n+y\n"
    );
    assert_eq!(
        unified_diff("a", "x\n", "b", "x\nz", 3),
        "--- a\n+++ b\n@@ -1 +1,2 @@\n x\n+z\n\\ No newline at end of file\n"
    );
}

#[test]
fn the_diff_is_minimal_and_applies() {
    let old = "a\nb\nc\na\nb\nb\na\n";
    let new = "c\nb\na\nb\na\nc\n";
    let diff = unified_diff("a", old, "b", new, 0);
    let changed = diff
        .lines()
        .skip(2)
        .filter(|line| line.starts_with(['+', '-']))
        .count();
    // Myers' classic example: the shortest edit script has five steps.
    assert_eq!(changed, 5, "{diff}");
    assert_eq!(apply(old, &diff), new, "{diff}");
}

/// Applies a unified diff made with any context, to check that the hunks say what they mean.
fn apply(old: &str, diff: &str) -> String {
    let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
    let mut result = String::new();
    let mut next_old = 0;
    for line in diff.lines().skip(2) {
        if let Some(header) = line.strip_prefix("@@ -") {
            let range = header.split(' ').next().unwrap();
            let mut parts = range.split(',');
            let start: usize = parts.next().unwrap().parse().unwrap();
            let count: usize = parts.next().map_or(1, |count| count.parse().unwrap());
            let first = if count == 0 { start } else { start - 1 };
            while next_old < first {
                result.push_str(old_lines[next_old]);
                next_old += 1;
            }
        } else if let Some(kept) = line.strip_prefix(' ') {
            assert_eq!(old_lines[next_old].trim_end_matches('\n'), kept);
            result.push_str(old_lines[next_old]);
            next_old += 1;
        } else if let Some(removed) = line.strip_prefix('-') {
            assert_eq!(old_lines[next_old].trim_end_matches('\n'), removed);
            next_old += 1;
        } else if let Some(added) = line.strip_prefix('+') {
            result.push_str(added);
            result.push('\n');
        }
    }
    old_lines[next_old..]
        .iter()
        .for_each(|line| result.push_str(line));
    result
}

fn longest_common_subsequence(old: &[&str], new: &[&str]) -> usize {
    let mut table = vec![vec![0usize; new.len() + 1]; old.len() + 1];
    for (i, a) in old.iter().enumerate() {
        for (j, b) in new.iter().enumerate() {
            table[i + 1][j + 1] = if a == b {
                table[i][j] + 1
            } else {
                table[i][j + 1].max(table[i + 1][j])
            };
        }
    }
    table[old.len()][new.len()]
}

#[test]
fn diffs_of_many_texts_are_minimal_and_apply() {
    // A fixed linear congruential sequence: the same texts on every run.
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |bound: u64| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % bound
    };
    for round in 0..300 {
        let mut text = |length: u64| -> String {
            (0..next(length))
                .map(|_| format!("{}\n", ["a", "b", "c", "d"][next(4) as usize]))
                .collect()
        };
        let old = text(12);
        let new = text(12);
        let context = (round % 4) as usize;
        let diff = unified_diff("a", &old, "b", &new, context);
        assert_eq!(diff.is_empty(), old == new);
        assert_eq!(apply(&old, &diff), new, "{old:?} -> {new:?}\n{diff}");
        let old_lines: Vec<&str> = old.lines().collect();
        let new_lines: Vec<&str> = new.lines().collect();
        let changed = diff
            .lines()
            .skip(2)
            .filter(|line| line.starts_with(['+', '-']))
            .count();
        let common = longest_common_subsequence(&old_lines, &new_lines);
        assert_eq!(
            changed,
            old_lines.len() + new_lines.len() - 2 * common,
            "{diff}"
        );
    }
}

#[test]
fn texts_that_differ_everywhere_still_diff_correctly() {
    let old: String = (0..5000).map(|n| format!("old {n}\n")).collect();
    let new: String = (0..5000).map(|n| format!("new {n}\n")).collect();
    let diff = unified_diff("a", &old, "b", &new, 3);
    assert!(diff.starts_with("--- a\n+++ b\n@@ -1,5000 +1,5000 @@\n-old 0\n"));
    assert_eq!(apply(&old, &diff), new);
}

#[test]
fn the_full_example_exports_to_a_loadable_file() {
    let text = include_str!("../testdata/full-example.yaml");
    let environment = |name: &str| (name == "TOKEN").then(|| SECRET.to_owned());
    let config =
        parse("gateway.yaml", text, &environment).unwrap_or_else(|errors| panic!("{errors}"));
    let exported = export_yaml(&config);
    assert!(!exported.contains(SECRET), "{exported}");
    let again = parse("exported.yaml", &exported, &environment)
        .unwrap_or_else(|errors| panic!("{errors}\n{exported}"));
    // The header that came from `${TOKEN}` is written back as the reference.
    assert!(exported.contains("${TOKEN}"), "{exported}");
    let mut expected = config.clone();
    if let Some(env) = expected
        .mcp_servers
        .get_mut("math")
        .and_then(|math| math.env.as_mut())
    {
        env.values_mut()
            .for_each(|value| *value = SECRET_MASK.to_owned());
    }
    assert_eq!(again, expected, "{exported}");
    assert!(!sanitized(&config).to_string().contains(SECRET));
}

#[test]
fn secret_values_are_what_the_sanitized_view_hides_and_redaction_hides_them_in_any_text() {
    let text = format!(
        r#"
mcp_servers:
  api:
    mode: remote
    endpoint: "https://host/mcp"
    headers: {{Authorization: "Bearer {SECRET}"}}
  math:
    mode: subprocess
    command: [math]
    env: {{KEY: "{SECRET}-2", SHORT: "ab"}}
"#
    );
    let config = parse_ok(&text);
    let secrets = secret_values(&config);
    assert!(secrets.contains(&format!("Bearer {SECRET}")), "{secrets:?}");
    assert!(secrets.contains(&format!("{SECRET}-2")), "{secrets:?}");
    // Not secrets: the command, the endpoint.
    assert!(
        !secrets
            .iter()
            .any(|secret| secret == "math" || secret.contains("host"))
    );

    // The longest first: the `-2` secret is masked whole, not as `***-2`.
    let redacted = redact_secrets(&text, &secrets);
    assert!(!redacted.contains(SECRET), "{redacted}");
    assert!(redacted.contains("KEY: \"***\""), "{redacted}");
    // Values shorter than the minimum are left alone rather than masking every `ab` in a text.
    assert!(redacted.contains("SHORT: \"ab\""), "{redacted}");
    assert_eq!(redact_secrets("nothing here", &secrets), "nothing here");
}

/// A number under a secret-looking key is hidden by the view and the export as well, so it
/// counts as a secret: otherwise a configuration looks secret-free while its export no longer
/// loads to the same configuration (found by the `config_yaml` fuzz target).
#[test]
fn numbers_the_view_hides_are_secret_values_too() {
    let config = parse_ok(
        r#"
discovery:
  sources:
    - type: filesystem
      config: {path: /etc/mcpgw/servers.d, watch_headers_ms: 1000, session_cache: true}
"#,
    );
    let view = sanitized(&config);
    let shown = &view["discovery"]["sources"][0]["config"];
    assert_eq!(shown["watch_headers_ms"], SECRET_MASK, "{view}");
    // Booleans are shown: a yes or no gives nothing away.
    assert_eq!(shown["session_cache"], true, "{view}");
    let secrets = secret_values(&config);
    assert!(secrets.contains(&"1000".to_owned()), "{secrets:?}");
    // The path stays: it is no secret.
    assert!(
        !secrets.iter().any(|secret| secret.contains("/etc")),
        "{secrets:?}"
    );
}

#[test]
fn a_single_definition_or_source_setting_is_masked_as_in_the_whole_view() {
    let definition = match serde_json::json!({
        "mode": "remote",
        "endpoint": format!("https://user:{SECRET}@host/mcp"),
        "headers": {"Authorization": SECRET},
        "command": ["srv", "--token", SECRET],
        "description": "kept",
    }) {
        serde_json::Value::Object(map) => map,
        _ => unreachable!(),
    };
    let masked = sanitized_definition(&definition);
    assert!(
        !serde_json::Value::Object(masked.clone())
            .to_string()
            .contains(SECRET)
    );
    assert_eq!(masked["headers"]["Authorization"], SECRET_MASK);
    assert_eq!(masked["command"][2], SECRET_MASK);
    assert_eq!(masked["description"], "kept");

    let settings = match serde_json::json!({
        "socket_path": "/run/docker.sock",
        "api_token": SECRET,
        "nested": {"password": SECRET, "path": "/x"},
    }) {
        serde_json::Value::Object(map) => map,
        _ => unreachable!(),
    };
    let masked = sanitized_source_settings(&settings);
    assert_eq!(masked["socket_path"], "/run/docker.sock");
    assert_eq!(masked["api_token"], SECRET_MASK);
    assert_eq!(masked["nested"]["password"], SECRET_MASK);
    assert_eq!(masked["nested"]["path"], "/x");
}
