//! Behaviour of the public API: parsing, validation, locations, JSON definitions, export.

use std::collections::BTreeMap;
use std::time::Duration;

use mcpgw_core::{
    ContainerCli, ContainerEngine, LaunchSpec, ServerId, ServerOrigin, ServerSpec, Tool,
};
use serde_json::json;

use super::*;

const FULL_EXAMPLE: &str = include_str!("../testdata/full-example.yaml");

fn environment(name: &str) -> Option<String> {
    match name {
        "TOKEN" => Some("t0k3n".to_owned()),
        "TTL" => Some("120".to_owned()),
        _ => None,
    }
}

/// Removes the common indentation and the first line break, so that tests can indent YAML like
/// code and still count lines from 1 at the first line of text.
fn yaml(text: &str) -> String {
    let text = text.strip_prefix('\n').unwrap_or(text);
    let indent = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.len() - line.trim_start().len())
        .min()
        .unwrap_or(0);
    text.lines()
        .map(|line| line.get(indent..).unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn parse_ok(text: &str) -> GatewayConfig {
    parse("gateway.yaml", text, &environment).unwrap_or_else(|errors| panic!("{errors}"))
}

fn parse_errors(text: &str) -> Vec<ConfigError> {
    match parse("gateway.yaml", text, &environment) {
        Ok(config) => panic!("expected errors, parsed {config:?}"),
        Err(errors) => errors.into_errors(),
    }
}

fn only_error(text: &str) -> ConfigError {
    let errors = parse_errors(text);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    errors.into_iter().next().unwrap()
}

/// `(line, column, path)` of each error, which is what the location tests pin down.
fn places(errors: &[ConfigError]) -> Vec<(Option<usize>, Option<usize>, &str)> {
    errors
        .iter()
        .map(|error| (error.line, error.column, error.path.as_str()))
        .collect()
}

fn server_id(id: &str) -> ServerId {
    ServerId::parse(id).unwrap()
}

fn spec(config: &GatewayConfig, id: &str) -> ServerSpec {
    config
        .server_specs()
        .into_iter()
        .find(|spec| spec.id.as_str() == id)
        .unwrap()
}

// --- the full example and the defaults ---

#[test]
fn the_full_example_parses_into_servers_groups_and_sections() {
    let config = parse_ok(FULL_EXAMPLE);

    let specs = config.server_specs();
    let ids: Vec<&str> = specs.iter().map(|spec| spec.id.as_str()).collect();
    assert_eq!(ids, ["api", "box", "math"]);

    let math = spec(&config, "math");
    assert_eq!(math.origin, ServerOrigin::Config);
    assert_eq!(math.description.as_deref(), Some("free text"));
    assert_eq!(
        math.launch,
        LaunchSpec::Subprocess {
            command: vec!["python3".into(), "-m".into(), "math_server".into()],
            env: BTreeMap::from([("KEY".to_owned(), "value".to_owned())]),
            cwd: None,
        }
    );
    assert_eq!(math.idle_ttl, Duration::from_secs(300));
    assert_eq!(math.health_check_interval, Duration::from_secs(60));
    assert_eq!(math.max_consecutive_failures, 3);
    assert_eq!(
        math.predefined_tools,
        [Tool::new("add")
            .with_description("Adds two numbers")
            .with_input_schema(json!({
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            }))]
    );

    assert_eq!(
        spec(&config, "api").launch,
        LaunchSpec::Remote {
            endpoint: "https://host/mcp".into(),
            headers: BTreeMap::from([("Authorization".to_owned(), "Bearer t0k3n".to_owned())]),
            token_exchange: None,
        }
    );
    assert_eq!(
        spec(&config, "box").launch,
        LaunchSpec::Docker {
            image: "repo/img:tag".into(),
            args: vec!["serve".into(), "--stdio".into()],
            env: BTreeMap::new(),
            network: "none".into(),
            memory: Some("512m".into()),
            cpus: Some("1.0".into()),
            read_only: true,
            volumes: vec![],
            engine: ContainerEngine::Default,
        }
    );

    assert_eq!(
        config.groups(),
        [GroupDefinition {
            id: server_id("pool"),
            description: None,
            strategy: GroupStrategy::RoundRobin,
            min_healthy: 1,
            members: vec![GroupMember {
                id: server_id("math"),
                weight: 1,
                priority: 0
            }],
        }]
    );

    let discovery = config.discovery.as_ref().expect("discovery is configured");
    assert_eq!(discovery.refresh_interval_s, 30);
    let sources: Vec<(String, &str, DiscoveryMode, bool)> = discovery
        .sources_with_ids()
        .map(|(id, source)| (id, source.source_type.as_str(), source.mode, source.enabled))
        .collect();
    assert_eq!(
        sources,
        [(
            "docker-0".to_owned(),
            "docker",
            DiscoveryMode::Additive,
            true
        )]
    );
    assert_eq!(
        discovery.sources[0].config["socket_path"],
        json!("/var/run/docker.sock")
    );

    let auth = &config.auth;
    assert!(auth.enabled && !auth.allow_anonymous && auth.api_key.enabled);
    assert_eq!(auth.api_key.header_name, "X-API-Key");
    assert!(auth.oidc.enabled);
    assert_eq!(
        auth.oidc.issuer.as_deref(),
        Some("https://issuer.example.com")
    );
    assert_eq!(auth.oidc.audience.as_deref(), Some("mcpgw"));
    assert_eq!(auth.opa.policy_path.as_deref(), Some("v1/data/mcpgw/allow"));
    assert_eq!(
        auth.role_assignments,
        [
            RoleAssignmentConfig {
                principal: "user:alice".into(),
                role: "admin".into(),
                scope: "global".into()
            },
            RoleAssignmentConfig {
                principal: "group:ops".into(),
                role: "operator".into(),
                scope: "tenant:acme".into()
            },
        ]
    );
    assert_eq!(auth.trusted_proxies, ["10.0.0.0/8", "::1"]);
    assert_eq!(
        config.rate_limit,
        RateLimitConfig {
            rps: 10.0,
            burst: 20,
            ..RateLimitConfig::default()
        }
    );
    assert_eq!(config.tool_names, ToolNames::prefixed());
    assert_eq!(config.tool_timeout_s, 60);
    assert_eq!(config.probe_concurrency, 4);
    assert!(!config.config_reload.watch);
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
}

#[test]
fn defaults_are_the_documented_ones() {
    let config = parse_ok(&yaml(
        "
        mcp_servers:
          math: {mode: subprocess, command: [python3, server.py]}
          box: {mode: docker, image: img}
          pool: {mode: group, members: [{id: math}, {id: box}]}
        ",
    ));
    let math = spec(&config, "math");
    assert_eq!(math.idle_ttl, Duration::from_secs(300));
    assert_eq!(math.health_check_interval, Duration::from_secs(60));
    assert_eq!(math.max_consecutive_failures, 3);
    assert_eq!(math.description, None);
    assert!(math.predefined_tools.is_empty());
    match spec(&config, "box").launch {
        LaunchSpec::Docker {
            network,
            read_only,
            args,
            memory,
            cpus,
            ..
        } => {
            assert_eq!(network, "none");
            assert!(read_only);
            assert!(args.is_empty());
            assert_eq!((memory, cpus), (None, None));
        }
        other => panic!("{other:?}"),
    }
    let pool = &config.groups()[0];
    assert_eq!(pool.strategy, GroupStrategy::RoundRobin);
    assert_eq!(pool.min_healthy, 1);
    assert!(
        pool.members
            .iter()
            .all(|member| member.weight == 1 && member.priority == 0)
    );

    assert_eq!(config.discovery, None);
    assert_eq!(config.auth, AuthConfig::default());
    assert!(!config.auth.enabled);
    assert!(!config.auth.allow_anonymous);
    assert!(config.auth.api_key.enabled);
    assert_eq!(config.auth.api_key.header_name, "X-API-Key");
    assert!(!config.auth.oidc.enabled && !config.auth.opa.enabled);
    assert_eq!(
        (
            config.auth.oidc.subject_claim.as_str(),
            config.auth.oidc.groups_claim.as_str(),
            config.auth.oidc.tenant_claim.as_str()
        ),
        ("sub", "groups", "tenant_id")
    );
    assert_eq!(
        config.rate_limit,
        RateLimitConfig {
            rps: 10.0,
            burst: 20,
            ..RateLimitConfig::default()
        }
    );
    assert_eq!(config.tool_names, ToolNames::prefixed());
    assert_eq!(config.tool_timeout_s, 60);
    assert_eq!(config.probe_concurrency, 4);
    assert!(!config.config_reload.watch);
}

#[test]
fn empty_sections_take_their_defaults_and_an_empty_discovery_turns_it_on() {
    let config = parse_ok("mcp_servers:\nauth:\nrate_limit:\ndiscovery:\nconfig_reload:\n");
    assert!(config.mcp_servers.is_empty());
    assert_eq!(config.auth, AuthConfig::default());
    assert_eq!(config.rate_limit, RateLimitConfig::default());
    assert_eq!(
        config.discovery,
        Some(DiscoveryConfig {
            refresh_interval_s: 30,
            sources: vec![]
        })
    );
    let config = parse_ok("auth: {enabled: true, oidc: {issuer: https://i}}\n");
    assert!(config.auth.enabled);
    assert_eq!(config.auth.oidc.subject_claim, "sub");
}

#[test]
fn an_empty_file_or_document_is_an_empty_configuration() {
    for text in [
        "",
        "\n\n",
        "# only a comment\n",
        "---\n",
        "---\n# nothing\n...\n",
        "~\n",
        "null",
    ] {
        let config = parse("empty.yaml", text, &environment)
            .unwrap_or_else(|errors| panic!("{text:?}: {errors}"));
        assert_eq!(config, GatewayConfig::default(), "{text:?}");
        assert!(config.server_specs().is_empty());
    }
}

#[test]
fn bare_tool_names_and_other_top_level_keys_parse() {
    let config = parse_ok(
        "tool_names: bare\ntool_timeout_s: 5\nconfig_reload: {watch: true}\nrate_limit: {rps: 0.5}\n\
         probe_concurrency: 16\n",
    );
    assert_eq!(config.tool_names, ToolNames::bare());
    assert_eq!(config.tool_timeout_s, 5);
    assert_eq!(config.probe_concurrency, 16);
    assert!(config.config_reload.watch);
    assert_eq!(
        config.rate_limit,
        RateLimitConfig {
            rps: 0.5,
            burst: 20,
            ..RateLimitConfig::default()
        }
    );
}

// --- ranges ---

#[test]
fn every_range_bound_is_inclusive_and_the_next_value_is_refused() {
    let server = |key: &str, value: i64| {
        format!(
            "mcp_servers:\n  math:\n    mode: subprocess\n    command: [x]\n    {key}: {value}\n"
        )
    };
    let cases: Vec<(String, &str, i64, i64)> = vec![
        (String::new(), "idle_ttl_s", 1, 86_400),
        (String::new(), "health_check_interval_s", 5, 3_600),
        (String::new(), "max_consecutive_failures", 1, 100),
    ];
    for (_, key, minimum, maximum) in cases {
        for inside in [minimum, maximum] {
            parse_ok(&server(key, inside));
        }
        for outside in [minimum - 1, maximum + 1] {
            let error = only_error(&server(key, outside));
            assert_eq!(error.kind, ConfigErrorKind::OutOfRange, "{key} {outside}");
            assert_eq!(error.path, format!("mcp_servers.math.{key}"));
            assert_eq!((error.line, error.column), (Some(5), Some(5)), "{key}");
            assert_eq!(
                error.message,
                format!("must be between {minimum} and {maximum}, got {outside}")
            );
        }
    }

    let top = |text: &str| text.to_owned();
    for (good, bad, path, message) in [
        (
            "tool_timeout_s: 1\n",
            "tool_timeout_s: 0\n",
            "tool_timeout_s",
            "must be between 1 and 86400, got 0",
        ),
        (
            "tool_timeout_s: 86400\n",
            "tool_timeout_s: 86401\n",
            "tool_timeout_s",
            "must be between 1 and 86400, got 86401",
        ),
        (
            "probe_concurrency: 1\n",
            "probe_concurrency: 0\n",
            "probe_concurrency",
            "must be between 1 and 64, got 0",
        ),
        (
            "probe_concurrency: 64\n",
            "probe_concurrency: 65\n",
            "probe_concurrency",
            "must be between 1 and 64, got 65",
        ),
        (
            "discovery: {refresh_interval_s: 1}\n",
            "discovery: {refresh_interval_s: 0}\n",
            "discovery.refresh_interval_s",
            "must be between 1 and 86400, got 0",
        ),
        (
            "rate_limit: {burst: 1}\n",
            "rate_limit: {burst: 0}\n",
            "rate_limit.burst",
            "must be at least 1, got 0",
        ),
        (
            "rate_limit: {rps: 0}\n",
            "rate_limit: {rps: -0.5}\n",
            "rate_limit.rps",
            "must be 0 or more (0 turns rate limiting off), got -0.5",
        ),
        (
            "mcp_servers: {a: {mode: subprocess, command: [x]}, g: {mode: group, min_healthy: 1, members: [{id: a}]}}\n",
            "mcp_servers: {a: {mode: subprocess, command: [x]}, g: {mode: group, min_healthy: 0, members: [{id: a}]}}\n",
            "mcp_servers.g.min_healthy",
            "must be at least 1, got 0; it is the number of members in rotation the group needs to be healthy",
        ),
        (
            "mcp_servers: {a: {mode: subprocess, command: [x]}, g: {mode: group, min_healthy: 1, members: [{id: a, weight: 1}]}}\n",
            "mcp_servers: {a: {mode: subprocess, command: [x]}, g: {mode: group, members: [{id: a, weight: 0}]}}\n",
            "mcp_servers.g.members[0].weight",
            "must be at least 1, got 0; remove the member to take it out of rotation",
        ),
    ] {
        parse_ok(&top(good));
        let error = only_error(&top(bad));
        assert_eq!(
            (error.path.as_str(), error.message.as_str()),
            (path, message),
            "{bad}"
        );
        assert_eq!(error.line, Some(1), "{bad}");
    }
}

#[test]
fn a_negative_number_for_a_count_is_a_type_error_with_its_place() {
    let error = only_error(
        "mcp_servers:\n  math:\n    mode: subprocess\n    command: [x]\n    idle_ttl_s: -1\n",
    );
    assert_eq!(error.kind, ConfigErrorKind::WrongType);
    assert_eq!(
        (error.line, error.column, error.path.as_str()),
        (Some(5), Some(17), "mcp_servers.math.idle_ttl_s")
    );
    assert_eq!(
        error.message,
        "invalid type: integer `-1`, expected a whole number of 0 or more"
    );
}

// --- ids ---

#[test]
fn bad_server_ids_are_reported_at_their_keys() {
    let long = "x".repeat(65);
    let text = format!(
        "mcp_servers:\n  a__b: {{mode: subprocess, command: [x]}}\n  \"a b\": {{mode: subprocess, command: [x]}}\n  {long}:\n    mode: subprocess\n    command: [x]\n  {}: {{mode: subprocess, command: [x]}}\n",
        "y".repeat(64)
    );
    let errors = parse_errors(&text);
    let long_path = format!("mcp_servers.{long}");
    assert_eq!(
        places(&errors),
        [
            (Some(2), Some(3), "mcp_servers.a__b"),
            (Some(3), Some(3), "mcp_servers.a b"),
            (Some(4), Some(3), long_path.as_str())
        ]
    );
    assert!(
        errors[0].message.contains("must not contain `__`"),
        "{}",
        errors[0].message
    );
    assert!(
        errors[1]
            .message
            .contains("may contain only letters, digits"),
        "{}",
        errors[1].message
    );
    assert!(
        errors[2].message.contains("longer than 64 characters"),
        "{}",
        errors[2].message
    );
    assert!(
        errors
            .iter()
            .all(|error| error.kind == ConfigErrorKind::InvalidValue)
    );
}

// --- unknown keys ---

#[test]
fn unknown_keys_name_the_key_and_suggest_the_nearest() {
    for (text, place, message) in [
        (
            "mcp_server:\n  math: {}\n",
            (1, 1, "mcp_server"),
            "unknown key `mcp_server`; did you mean `mcp_servers`?",
        ),
        (
            "mcp_servers:\n  math:\n    mode: subprocess\n    comand: [python3]\n",
            (4, 5, "mcp_servers.math.comand"),
            "unknown key `comand`; did you mean `command`?",
        ),
        (
            "auth:\n  enabeld: true\n",
            (2, 3, "auth.enabeld"),
            "unknown key `enabeld`; did you mean `enabled`?",
        ),
        (
            "auth:\n  oidc:\n    isuer: x\n",
            (3, 5, "auth.oidc.isuer"),
            "unknown key `isuer`; did you mean `issuer`?",
        ),
        (
            "mcp_servers:\n  m:\n    mode: subprocess\n    command: [x]\n    tools: [{name: t, input_schema: {}}]\n",
            (5, 23, "mcp_servers.m.tools[0].input_schema"),
            "unknown key `input_schema`; did you mean `inputSchema`?",
        ),
        (
            "config_reload: {wach: true}\n",
            (1, 17, "config_reload.wach"),
            "unknown key `wach`; did you mean `watch`?",
        ),
        (
            "rate_limit: {zzz: 1}\n",
            (1, 14, "rate_limit.zzz"),
            "unknown key `zzz`; valid keys are `rps`, `burst`, `backend` or `redis`",
        ),
    ] {
        let error = only_error(text);
        assert_eq!(error.kind, ConfigErrorKind::UnknownKey, "{text}");
        assert_eq!(
            (
                error.line.unwrap(),
                error.column.unwrap(),
                error.path.as_str()
            ),
            place,
            "{text}"
        );
        assert_eq!(error.message, message);
    }
}

#[test]
fn unknown_values_of_enumerations_suggest_the_nearest() {
    let error = only_error("mcp_servers:\n  m:\n    mode: subproces\n");
    assert_eq!(
        (error.line, error.path.as_str()),
        (Some(3), "mcp_servers.m.mode")
    );
    assert_eq!(
        error.message,
        "unknown value `subproces`; did you mean `subprocess`?"
    );
    let error = only_error("mcp_servers:\n  g:\n    mode: group\n    strategy: round-robin\n");
    assert_eq!(
        error.message,
        "unknown value `round-robin`; did you mean `round_robin`?"
    );
    let error = only_error("tool_names: short\n");
    assert_eq!(
        error.message,
        "unknown value `short`; expected `prefixed` or `bare`"
    );
}

// --- modes ---

#[test]
fn a_key_of_another_mode_names_the_key_and_the_mode() {
    let text = yaml(
        "
        mcp_servers:
          math:
            mode: subprocess
            command: [python3]
            endpoint: https://host/mcp
          pool:
            mode: group
            members: []
            idle_ttl_s: 5
        ",
    );
    let errors = parse_errors(&text);
    assert_eq!(
        places(&errors),
        [
            (Some(5), Some(5), "mcp_servers.math.endpoint"),
            (Some(9), Some(5), "mcp_servers.pool.idle_ttl_s")
        ]
    );
    assert!(
        errors
            .iter()
            .all(|error| error.kind == ConfigErrorKind::WrongMode)
    );
    assert_eq!(
        errors[0].message,
        "`endpoint` does not belong to mode `subprocess`; it is used with mode `remote`: remove it or change `mode`"
    );
    assert_eq!(
        errors[1].message,
        "`idle_ttl_s` does not belong to mode `group`; it is used with mode `subprocess`, `docker` or `remote`: remove it or change `mode`"
    );
}

#[test]
fn required_keys_of_each_mode_are_reported_at_the_server() {
    let text = yaml(
        "
        mcp_servers:
          a:
            mode: subprocess
          b:
            mode: docker
          c:
            mode: remote
          d:
            description: no mode
          e:
            mode: subprocess
            command: []
        ",
    );
    let errors = parse_errors(&text);
    assert_eq!(
        places(&errors),
        [
            (Some(2), Some(3), "mcp_servers.a"),
            (Some(4), Some(3), "mcp_servers.b"),
            (Some(6), Some(3), "mcp_servers.c"),
            (Some(8), Some(3), "mcp_servers.d"),
            (Some(12), Some(5), "mcp_servers.e.command"),
        ]
    );
    let messages: Vec<&str> = errors.iter().map(|error| error.message.as_str()).collect();
    assert!(
        messages[0].starts_with("missing key `command`: mode `subprocess` needs"),
        "{}",
        messages[0]
    );
    assert!(
        messages[1].starts_with("missing key `image`: mode `docker` needs"),
        "{}",
        messages[1]
    );
    assert!(
        messages[2].starts_with("missing key `endpoint`: mode `remote` needs"),
        "{}",
        messages[2]
    );
    assert!(
        messages[3].starts_with("missing key `mode`"),
        "{}",
        messages[3]
    );
    assert!(
        messages[4].starts_with("must not be empty"),
        "{}",
        messages[4]
    );
    assert_eq!(errors[4].kind, ConfigErrorKind::InvalidValue);
    assert!(
        errors[..4]
            .iter()
            .all(|error| error.kind == ConfigErrorKind::MissingKey)
    );
}

#[test]
fn remote_endpoints_must_be_http_urls() {
    let error = only_error("mcp_servers:\n  api: {mode: remote, endpoint: \"ftp://host/mcp\"}\n");
    assert_eq!(
        (error.line, error.column, error.path.as_str()),
        (Some(2), Some(23), "mcp_servers.api.endpoint")
    );
    assert_eq!(
        error.message,
        "`ftp://host/mcp` is not an http:// or https:// URL"
    );
    parse_ok("mcp_servers:\n  api: {mode: remote, endpoint: \"http://127.0.0.1:9/mcp\"}\n");
}

#[test]
fn docker_takes_command_as_a_synonym_of_args_and_numbers_for_cpus() {
    let config = parse_ok(&yaml(
        "
        mcp_servers:
          a: {mode: docker, image: img, command: [serve], cpus: 2, memory: 1g, read_only: false, network: bridge, volumes: [/d:/d:ro], env: {PORT: 8080}}
          b: {mode: docker, image: img, cpus: 1.5, runtime: podman}
        ",
    ));
    assert_eq!(
        spec(&config, "a").launch,
        LaunchSpec::Docker {
            image: "img".into(),
            args: vec!["serve".into()],
            env: BTreeMap::from([("PORT".to_owned(), "8080".to_owned())]),
            network: "bridge".into(),
            memory: Some("1g".into()),
            cpus: Some("2".into()),
            read_only: false,
            volumes: vec!["/d:/d:ro".into()],
            engine: ContainerEngine::Default,
        }
    );
    assert!(
        matches!(spec(&config, "b").launch, LaunchSpec::Docker { cpus: Some(cpus), .. } if cpus == "1.5")
    );
    assert_eq!(
        config.mcp_servers["b"].runtime,
        Some(ContainerRuntime::Podman)
    );

    let errors = parse_errors(
        "mcp_servers:\n  a: {mode: docker, image: img, args: [x], command: [y], cpus: 0, memory: lots}\n",
    );
    let paths: Vec<&str> = errors.iter().map(|error| error.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "mcp_servers.a.command",
            "mcp_servers.a.cpus",
            "mcp_servers.a.memory"
        ]
    );
}

#[test]
fn command_arguments_may_be_written_as_numbers() {
    let config = parse_ok(
        "mcp_servers:\n  m: {mode: subprocess, command: [server, --port, 8080, --verbose, true]}\n",
    );
    assert!(matches!(
        spec(&config, "m").launch,
        LaunchSpec::Subprocess { command, .. } if command == ["server", "--port", "8080", "--verbose", "true"]
    ));
}

// --- groups ---

#[test]
fn group_members_must_be_other_servers_of_the_file() {
    let text = yaml(
        "
        mcp_servers:
          math: {mode: subprocess, command: [x]}
          other: {mode: group, members: [{id: math}]}
          pool:
            mode: group
            members:
              - id: maths
              - id: pool
              - id: other
                weight: 2
              - {id: math, priority: 1}
              - id: math
        ",
    );
    let errors = parse_errors(&text);
    assert_eq!(
        places(&errors),
        [
            (Some(7), Some(9), "mcp_servers.pool.members[0].id"),
            (Some(8), Some(9), "mcp_servers.pool.members[1].id"),
            (Some(9), Some(9), "mcp_servers.pool.members[2].id"),
            (Some(12), Some(9), "mcp_servers.pool.members[4].id"),
        ]
    );
    assert_eq!(
        errors[0].message,
        "`maths` is not a server in this configuration; did you mean `math`?"
    );
    assert_eq!(
        errors[1].message,
        "group `pool` cannot be a member of itself"
    );
    assert_eq!(
        errors[2].message,
        "`other` is a group; members must be servers, groups do not nest"
    );
    assert!(
        errors[3].message.starts_with("`math` is listed twice"),
        "{}",
        errors[3].message
    );
    assert_eq!(
        errors.iter().map(|error| error.kind).collect::<Vec<_>>(),
        [
            ConfigErrorKind::Reference,
            ConfigErrorKind::Reference,
            ConfigErrorKind::Reference,
            ConfigErrorKind::DuplicateKey
        ]
    );
}

#[test]
fn group_members_in_flow_style_are_located_exactly() {
    let error = only_error(
        "mcp_servers:\n  math: {mode: subprocess, command: [x]}\n  pool:  {mode: group, strategy: round_robin, members: [{id: math, weight: 1}, {id: nope}]}\n",
    );
    assert_eq!(
        (error.line, error.column, error.path.as_str()),
        (Some(3), Some(81), "mcp_servers.pool.members[1].id")
    );
    assert_eq!(
        error.message,
        "`nope` is not a server in this configuration; members name servers declared under mcp_servers"
    );
}

#[test]
fn group_strategies_weights_and_priorities_are_kept() {
    let config = parse_ok(&yaml(
        "
        mcp_servers:
          a: {mode: subprocess, command: [x]}
          b: {mode: remote, endpoint: https://b/mcp}
          g:
            mode: group
            description: failover
            strategy: priority
            min_healthy: 2
            members: [{id: a, weight: 3, priority: 1}, {id: b, priority: 0}]
        ",
    ));
    assert_eq!(
        config.groups(),
        [GroupDefinition {
            id: server_id("g"),
            description: Some("failover".into()),
            strategy: GroupStrategy::Priority,
            min_healthy: 2,
            members: vec![
                GroupMember {
                    id: server_id("a"),
                    weight: 3,
                    priority: 1
                },
                GroupMember {
                    id: server_id("b"),
                    weight: 1,
                    priority: 0
                },
            ],
        }]
    );
    assert_eq!(config.server_specs().len(), 2);
}

// --- variables ---

#[test]
fn variables_are_expanded_with_defaults_and_recorded() {
    let text = yaml(
        r#"
        mcp_servers:
          api:
            mode: remote
            endpoint: "https://${HOST:-localhost}/mcp"
            idle_ttl_s: ${TTL}
            headers: {Authorization: "Bearer ${TOKEN}"}
        "#,
    );
    let config = parse_ok(&text);
    let api = spec(&config, "api");
    assert_eq!(api.idle_ttl, Duration::from_secs(120));
    assert_eq!(
        api.launch,
        LaunchSpec::Remote {
            endpoint: "https://localhost/mcp".into(),
            headers: BTreeMap::from([("Authorization".to_owned(), "Bearer t0k3n".to_owned())]),
            token_exchange: None,
        }
    );
    let references: Vec<(&str, Option<&str>, bool, usize, &str)> = config
        .variable_references()
        .iter()
        .map(|reference| {
            (
                reference.name.as_str(),
                reference.default.as_deref(),
                reference.used_default,
                reference.line,
                reference.path.as_str(),
            )
        })
        .collect();
    assert_eq!(
        references,
        [
            (
                "HOST",
                Some("localhost"),
                true,
                4,
                "mcp_servers.api.endpoint"
            ),
            ("TTL", None, false, 5, "mcp_servers.api.idle_ttl_s"),
            (
                "TOKEN",
                None,
                false,
                6,
                "mcp_servers.api.headers.Authorization"
            ),
        ]
    );
}

#[test]
fn unset_variables_are_errors_naming_the_variable_and_the_line() {
    let text = yaml(
        r#"
        # ${IN_A_COMMENT} is not expanded
        mcp_servers:
          api:
            mode: remote
            endpoint: "https://${API_HOST}/mcp"
            headers: {Authorization: "Bearer ${API_TOKEN}"}
        "#,
    );
    let errors = parse_errors(&text);
    assert_eq!(
        places(&errors),
        [
            (Some(5), Some(24), "mcp_servers.api.endpoint"),
            (Some(6), Some(38), "mcp_servers.api.headers.Authorization")
        ]
    );
    assert_eq!(
        errors[0].to_string(),
        "gateway.yaml:5:24: mcp_servers.api.endpoint: environment variable `API_HOST` is not set; set it, or give a default with `${API_HOST:-default}`"
    );
    assert!(errors[1].message.contains("`API_TOKEN`"));
    assert!(
        errors
            .iter()
            .all(|error| error.kind == ConfigErrorKind::Variable)
    );
}

#[test]
fn a_double_dollar_writes_a_literal_reference() {
    let config = parse_ok("mcp_servers:\n  m: {mode: subprocess, command: [echo, \"$${HOME}\"]}\n");
    assert!(
        matches!(spec(&config, "m").launch, LaunchSpec::Subprocess { command, .. } if command[1] == "${HOME}")
    );
}

// --- syntax and types ---

#[test]
fn yaml_syntax_errors_carry_their_line() {
    let error = only_error("mcp_servers:\n  math:\n    mode: subprocess\n   command: [x]\n");
    assert_eq!(error.kind, ConfigErrorKind::Syntax);
    assert_eq!(error.line, Some(4));
    assert!(error.to_string().starts_with("gateway.yaml:4:"), "{error}");

    let error = only_error("mcp_servers: {math: {mode: subprocess\n");
    assert_eq!(error.kind, ConfigErrorKind::Syntax);
    assert_eq!(error.line, Some(2));
}

#[test]
fn wrong_types_carry_line_column_and_path() {
    let error = only_error(
        "mcp_servers:\n  math:\n    mode: subprocess\n    command: [x]\n    idle_ttl_s: \"abc\"\n",
    );
    assert_eq!(error.kind, ConfigErrorKind::WrongType);
    assert_eq!(
        error.to_string(),
        "gateway.yaml:5:17: mcp_servers.math.idle_ttl_s: invalid type: string \"abc\", expected a whole number of 0 or more"
    );
    let error =
        only_error("mcp_servers:\n  math:\n    mode: subprocess\n    command: python3 server.py\n");
    assert_eq!(
        (error.line, error.path.as_str()),
        (Some(4), "mcp_servers.math.command")
    );
    assert!(
        error.message.contains("expected a list"),
        "{}",
        error.message
    );
    let error = only_error("mcp_servers: [math]\n");
    assert_eq!((error.line, error.path.as_str()), (Some(1), "mcp_servers"));
    assert_eq!(error.message, "invalid type: sequence, expected a mapping");
    let error = only_error("just text\n");
    assert!(
        error.message.contains("configuration sections"),
        "{}",
        error.message
    );
}

#[test]
fn a_server_declared_twice_is_reported_where_it_is_repeated() {
    let error = only_error(
        "mcp_servers:\n  math: {mode: subprocess, command: [a]}\n  other: {mode: subprocess, command: [b]}\n  math: {mode: subprocess, command: [c]}\n",
    );
    assert_eq!(error.kind, ConfigErrorKind::DuplicateKey);
    assert_eq!(
        (error.line, error.column, error.path.as_str()),
        (Some(4), Some(3), "mcp_servers.math")
    );
    let error = only_error("auth:\n  enabled: true\n  enabled: false\n");
    assert_eq!(error.kind, ConfigErrorKind::DuplicateKey);
    assert_eq!((error.line, error.path.as_str()), (Some(3), "auth.enabled"));
}

// --- several errors ---

#[test]
fn every_semantic_error_is_reported_in_line_order() {
    let text = yaml(
        "
        mcp_servers:
          math:
            mode: subprocess
            command: [python3]
            idle_ttl_s: 0
            health_check_interval_s: 4
          api:
            mode: remote
            endpoint: not-a-url
          pool: {mode: group, members: [{id: ghost}]}
        auth:
          role_assignments:
            - {principal: alice, role: admin, scope: everywhere}
          trusted_proxies: [10.0.0.0/33]
        rate_limit:
          burst: 0
        ",
    );
    let errors = parse_errors(&text);
    assert_eq!(
        places(&errors),
        [
            (Some(5), Some(5), "mcp_servers.math.idle_ttl_s"),
            (Some(6), Some(5), "mcp_servers.math.health_check_interval_s"),
            (Some(9), Some(5), "mcp_servers.api.endpoint"),
            (Some(10), Some(34), "mcp_servers.pool.members[0].id"),
            (Some(13), Some(8), "auth.role_assignments[0].principal"),
            (Some(13), Some(39), "auth.role_assignments[0].scope"),
            (Some(14), Some(21), "auth.trusted_proxies[0]"),
            (Some(16), Some(3), "rate_limit.burst"),
        ]
    );
    let display = parse("gateway.yaml", &text, &environment)
        .unwrap_err()
        .to_string();
    assert_eq!(display.lines().count(), 8);
    assert_eq!(
        display.lines().next(),
        Some("gateway.yaml:5:5: mcp_servers.math.idle_ttl_s: must be between 1 and 86400, got 0")
    );
}

// --- other sections ---

#[test]
fn auth_settings_are_validated() {
    let errors = parse_errors(&yaml(
        "
        auth:
          api_key: {header_name: \"X API Key\"}
          oidc:
            enabled: true
            jwks_uri: jwks.json
            subject_claim: \"\"
          opa: {enabled: true}
        ",
    ));
    let summary: Vec<(&str, ConfigErrorKind)> = errors
        .iter()
        .map(|error| (error.path.as_str(), error.kind))
        .collect();
    assert_eq!(
        summary,
        [
            ("auth.api_key.header_name", ConfigErrorKind::InvalidValue),
            ("auth.oidc", ConfigErrorKind::MissingKey),
            ("auth.oidc", ConfigErrorKind::MissingKey),
            ("auth.oidc.jwks_uri", ConfigErrorKind::InvalidValue),
            ("auth.oidc.subject_claim", ConfigErrorKind::InvalidValue),
            ("auth.opa", ConfigErrorKind::MissingKey),
            ("auth.opa", ConfigErrorKind::MissingKey),
        ]
    );
    assert!(errors[1].message.contains("`issuer`") && errors[2].message.contains("`audience`"));
}

#[test]
fn suspicious_settings_are_warnings_with_places() {
    let config = parse_ok(&yaml(
        "
        mcp_servers:
          a: {mode: subprocess, command: [x]}
          g: {mode: group, min_healthy: 2, members: [{id: a}]}
        auth:
          oidc: {enabled: true, issuer: http://issuer.local, audience: mcpgw}
        ",
    ));
    let warnings: Vec<(Option<usize>, &str)> = config
        .warnings()
        .iter()
        .map(|warning| (warning.line, warning.path.as_str()))
        .collect();
    assert_eq!(
        warnings,
        [
            (Some(3), "mcp_servers.g.min_healthy"),
            (Some(5), "auth.oidc.issuer")
        ]
    );
    assert!(
        config.warnings()[0]
            .to_string()
            .starts_with("gateway.yaml:3:20: mcp_servers.g.min_healthy: ")
    );
}

#[test]
fn discovery_sources_get_ids_and_known_types() {
    let config = parse_ok(&yaml(
        "
        discovery:
          sources:
            - {type: docker}
            - {id: files, type: filesystem, mode: authoritative, enabled: false, config: {path: /etc/mcp.d}}
            - {source_type: docker}
        ",
    ));
    let discovery = config.discovery.unwrap();
    let ids: Vec<String> = discovery.sources_with_ids().map(|(id, _)| id).collect();
    assert_eq!(ids, ["docker-0", "files", "docker-2"]);
    assert_eq!(discovery.sources[1].mode, DiscoveryMode::Authoritative);
    assert!(!discovery.sources[1].enabled);

    let errors = parse_errors(
        "discovery:\n  sources:\n    - {type: dokcer}\n    - {type: docker}\n    - {id: docker-1, type: docker}\n    - {id: \"a b\", type: docker}\n",
    );
    assert_eq!(
        places(&errors),
        [
            (Some(3), Some(8), "discovery.sources[0].type"),
            (Some(5), Some(5), "discovery.sources[2]"),
            (Some(6), Some(8), "discovery.sources[3].id"),
        ]
    );
    assert_eq!(
        errors[0].message,
        "unknown source type `dokcer`; did you mean `docker`?"
    );
    assert_eq!(
        errors[1].message,
        "source id `docker-1` is used twice; give the sources distinct `id`s"
    );
    assert_eq!(errors[1].kind, ConfigErrorKind::DuplicateKey);
}

// --- export ---

#[test]
fn to_yaml_parses_back_to_an_equal_configuration() {
    let config = parse_ok(FULL_EXAMPLE);
    let exported = config.to_yaml();
    let again = parse("exported.yaml", &exported, &|_| None)
        .unwrap_or_else(|errors| panic!("{errors}\n{exported}"));
    assert_eq!(again, config);
    assert_eq!(again.server_specs(), config.server_specs());
    assert!(
        exported.contains("Bearer t0k3n"),
        "values are exported as they are:\n{exported}"
    );
    let empty = GatewayConfig::default().to_yaml();
    assert_eq!(
        parse("empty.yaml", &empty, &|_| None).unwrap(),
        GatewayConfig::default()
    );
}

#[test]
fn definitions_come_back_from_specs_and_groups() {
    let config = parse_ok(FULL_EXAMPLE);
    for spec in config.server_specs() {
        let definition = ServerDefinition::from_server_spec(&spec).unwrap();
        assert_eq!(
            definition.to_server_spec(spec.id.clone(), ServerOrigin::Config),
            Some(spec)
        );
    }
    let box_definition = ServerDefinition::from_server_spec(&spec(&config, "box")).unwrap();
    assert_eq!(
        (box_definition.network, box_definition.read_only),
        (None, None),
        "defaults are left out"
    );
    for group in config.groups() {
        let definition = ServerDefinition::from_group_definition(&group);
        assert_eq!(
            definition.to_group_definition(group.id.clone()),
            Some(group)
        );
    }
}

// --- JSON definitions ---

#[test]
fn json_definitions_follow_the_file_rules_and_defaults() {
    let definition = server_definition_from_json(
        "math",
        json!({"mcp_server_id": "math", "mode": "subprocess", "command": ["python3", "-m", "m"], "idle_ttl_s": 30}),
        &ParseOptions::default(),
    )
    .unwrap();
    let spec = definition
        .to_server_spec(server_id("math"), ServerOrigin::Api)
        .unwrap();
    assert_eq!(spec.idle_ttl, Duration::from_secs(30));
    assert_eq!(spec.health_check_interval, Duration::from_secs(60));

    let spec = server_spec_from_json(
        "box",
        json!({"mode": "docker", "image": "img", "cpus": 1}),
        ServerOrigin::Api,
        &ParseOptions::default(),
    )
    .unwrap();
    assert!(
        matches!(spec.launch, LaunchSpec::Docker { network, cpus: Some(cpus), .. } if network == "none" && cpus == "1")
    );
    assert_eq!(spec.origin, ServerOrigin::Api);
}

#[test]
fn json_errors_have_no_line_and_name_the_field() {
    let errors = server_definition_from_json(
        "math",
        json!({"mode": "subprocess", "command": ["x"], "idle_ttl_s": 0, "endpoint": "https://h/mcp", "health_check_interval_s": 3601}),
        &ParseOptions::default(),
    )
    .unwrap_err();
    let summary: Vec<(Option<usize>, &str, &str)> = errors
        .errors()
        .iter()
        .map(|error| (error.line, error.path.as_str(), error.message.as_str()))
        .collect();
    assert_eq!(
        summary,
        [
            (
                None,
                "endpoint",
                "`endpoint` does not belong to mode `subprocess`; it is used with mode `remote`: remove it or change `mode`"
            ),
            (None, "idle_ttl_s", "must be between 1 and 86400, got 0"),
            (
                None,
                "health_check_interval_s",
                "must be between 5 and 3600, got 3601"
            ),
        ]
    );
    assert_eq!(
        errors.to_string().lines().next(),
        Some(
            "endpoint: `endpoint` does not belong to mode `subprocess`; it is used with mode `remote`: remove it or change `mode`"
        )
    );

    let error = server_definition_from_json(
        "m",
        json!({"mode": "subprocess", "comand": ["x"]}),
        &ParseOptions::default(),
    )
    .unwrap_err()
    .into_errors()
    .remove(0);
    assert_eq!(
        (error.kind, error.path.as_str()),
        (ConfigErrorKind::UnknownKey, "comand")
    );
    assert_eq!(
        error.message,
        "unknown key `comand`; did you mean `command`?"
    );

    let error = server_definition_from_json(
        "m",
        json!({"mode": "subprocess", "command": ["x"], "idle_ttl_s": "abc"}),
        &ParseOptions::default(),
    )
    .unwrap_err()
    .into_errors()
    .remove(0);
    assert_eq!(
        (error.kind, error.path.as_str(), error.line),
        (ConfigErrorKind::WrongType, "idle_ttl_s", None)
    );

    let error =
        server_definition_from_json("m", json!({"mode": "remote"}), &ParseOptions::default())
            .unwrap_err()
            .into_errors()
            .remove(0);
    assert_eq!(
        (error.kind, error.path.as_str()),
        (ConfigErrorKind::MissingKey, "")
    );

    let errors = server_definition_from_json(
        "a__b",
        json!({"mcp_server_id": "other", "mode": "subprocess", "command": ["x"]}),
        &ParseOptions::default(),
    )
    .unwrap_err();
    let paths: Vec<&str> = errors
        .errors()
        .iter()
        .map(|error| error.path.as_str())
        .collect();
    assert_eq!(paths, ["mcp_server_id", "mcp_server_id"]);

    let error = server_spec_from_json(
        "g",
        json!({"mode": "group"}),
        ServerOrigin::Api,
        &ParseOptions::default(),
    )
    .unwrap_err()
    .into_errors()
    .remove(0);
    assert_eq!(error.path, "mode");
    assert_eq!(errors.kind(), mcpgw_core::ErrorKind::Invalid);
}

#[test]
fn predefined_tools_carry_schemas_and_annotations_as_objects() {
    // MCP clients read `inputSchema`, `outputSchema` and `annotations` as objects; a list or a
    // scalar there is refused, in the file and in a body, naming the key.
    for (tool, path) in [
        (
            "{name: t, inputSchema: [1]}",
            "mcp_servers.m.tools[0].inputSchema",
        ),
        (
            "{name: t, outputSchema: 5}",
            "mcp_servers.m.tools[0].outputSchema",
        ),
        (
            "{name: t, annotations: [null, null]}",
            "mcp_servers.m.tools[0].annotations",
        ),
    ] {
        let text = format!(
            "mcp_servers:\n  m:\n    mode: subprocess\n    command: [x]\n    tools: [{tool}]\n"
        );
        let error = only_error(&text);
        assert_eq!(
            (error.kind, error.path.as_str()),
            (ConfigErrorKind::InvalidValue, path),
            "{text}"
        );
    }
    let errors = server_spec_from_body(
        "m",
        json!({"mode": "subprocess", "command": ["x"],
               "tools": [{"name": "t", "annotations": "read-only"}]}),
        ServerOrigin::Api,
        &ParseOptions::default(),
    )
    .unwrap_err();
    assert_eq!(errors.errors()[0].path, "tools[0].annotations");
    // Objects are kept as they are.
    let spec = server_spec_from_body(
        "m",
        json!({"mode": "subprocess", "command": ["x"],
               "tools": [{"name": "t", "outputSchema": {"type": "object"},
                          "annotations": {"readOnlyHint": true}}]}),
        ServerOrigin::Api,
        &ParseOptions::default(),
    )
    .unwrap();
    let tool = &spec.predefined_tools[0];
    assert_eq!(tool.annotations, Some(json!({"readOnlyHint": true})));
}

#[test]
fn a_request_body_takes_each_value_only_in_its_json_type() {
    // What the file (and JSON that was YAML) reads as text is a type error in a request body.
    let body = json!({"mode": "subprocess", "command": ["python3", 7], "env": {"PORT": 8080}});
    let lenient = server_spec_from_json(
        "m",
        body.clone(),
        ServerOrigin::Api,
        &ParseOptions::default(),
    )
    .unwrap();
    assert!(
        matches!(&lenient.launch, LaunchSpec::Subprocess { command, .. } if *command == ["python3", "7"])
    );
    let errors =
        server_spec_from_body("m", body, ServerOrigin::Api, &ParseOptions::default()).unwrap_err();
    let error = &errors.errors()[0];
    assert_eq!(
        (error.kind, error.path.as_str(), error.line),
        (ConfigErrorKind::WrongType, "command[1]", None)
    );
    assert_eq!(
        error.message,
        "invalid type: integer `7`, expected a string"
    );

    // (body, the path of the refused value, what it was)
    for (body, path, found) in [
        (
            json!({"mode": "subprocess", "command": ["a"], "env": {"PORT": 8080}}),
            "env.PORT",
            "integer `8080`",
        ),
        (
            json!({"mode": "subprocess", "command": ["a", true]}),
            "command[1]",
            "boolean `true`",
        ),
        (
            json!({"mode": "subprocess", "command": ["a", null]}),
            "command[1]",
            "null",
        ),
        (
            json!({"mode": "docker", "image": "i", "cpus": 1.5}),
            "cpus",
            "floating point `1.5`",
        ),
        (
            json!({"mode": "docker", "image": "i", "memory": 512}),
            "memory",
            "integer `512`",
        ),
        (
            json!({"mode": "docker", "image": "i", "args": ["x", 1]}),
            "args[1]",
            "integer `1`",
        ),
        (
            json!({"mode": "docker", "image": "i", "volumes": [false]}),
            "volumes[0]",
            "boolean `false`",
        ),
        (
            json!({"mode": "remote", "endpoint": "https://h/mcp", "headers": {"X-N": 1}}),
            "headers.X-N",
            "integer `1`",
        ),
    ] {
        let errors = server_spec_from_body(
            "m",
            body.clone(),
            ServerOrigin::Api,
            &ParseOptions::default(),
        )
        .unwrap_err();
        let error = &errors.errors()[0];
        assert_eq!(error.path, path, "{body}");
        assert_eq!(
            error.message,
            format!("invalid type: {found}, expected a string"),
            "{body}"
        );
    }

    // Reading a body strictly leaves the file's reading as it was, on the same thread.
    let config = parse_ok("mcp_servers:\n  m: {mode: subprocess, command: [server, 8080]}\n");
    assert!(matches!(
        &config.mcp_servers["m"].command,
        Some(command) if command == &["server", "8080"]
    ));
}

#[test]
fn json_groups_take_the_rest_shapes() {
    let group = group_definition_from_json(
        "pool",
        json!({"group_id": "pool", "strategy": "weighted_round_robin", "min_healthy": 1, "members": [{"member_id": "a", "weight": 3, "priority": 2}, {"id": "b"}]}),
    )
    .unwrap();
    assert_eq!(group.strategy, GroupStrategy::WeightedRoundRobin);
    assert_eq!(
        group.members,
        [
            GroupMember {
                id: server_id("a"),
                weight: 3,
                priority: 2
            },
            GroupMember {
                id: server_id("b"),
                weight: 1,
                priority: 0
            }
        ]
    );
    let errors = group_definition_from_json(
        "pool",
        json!({"members": [{"id": "pool"}, {"id": "x", "weight": 0}]}),
    )
    .unwrap_err();
    let paths: Vec<&str> = errors
        .errors()
        .iter()
        .map(|error| error.path.as_str())
        .collect();
    assert_eq!(paths, ["members[0].id", "members[1].weight"]);
    let errors =
        group_definition_from_json("pool", json!({"mode": "subprocess", "command": ["x"]}))
            .unwrap_err();
    assert_eq!(errors.errors()[0].path, "mode");
}

// --- robustness ---

#[test]
fn damaged_text_gives_located_errors_not_panics() {
    let text = FULL_EXAMPLE;
    let check = |damaged: &str| {
        if let Err(errors) = parse("damaged.yaml", damaged, &environment) {
            assert!(!errors.is_empty());
            for error in &errors {
                assert!(!error.message.is_empty(), "{damaged}");
                assert!(error.line.is_some(), "{error}\n{damaged}");
            }
        }
    };
    let boundaries: Vec<usize> = text.char_indices().map(|(index, _)| index).collect();
    // Every cut is cheap to write but slow to run in a debug build; a stride keeps the test
    // short while still cutting inside every kind of token.
    for &end in boundaries.iter().step_by(3) {
        check(&text[..end]);
    }
    for &at in boundaries.iter().step_by(29) {
        for inserted in ["\"", "'", "{", "[", "\n  ", ":", "#", "${", "- ", "é"] {
            check(&format!("{}{inserted}{}", &text[..at], &text[at..]));
        }
    }
}

#[test]
fn the_mcp_endpoint_section_has_defaults_and_refuses_unknown_keys() {
    let defaults = parse_ok("mcp_servers: {}\n");
    assert!(defaults.mcp_endpoint.allowed_hosts.is_empty());
    assert_eq!(defaults.mcp_endpoint.sse_keep_alive_s, 15);
    let set = parse_ok(
        "mcp_endpoint:\n  allowed_hosts: [gw.example.com]\n  allowed_origins: [\"https://app.example.com\"]\n  sse_keep_alive_s: 30\n",
    );
    assert_eq!(set.mcp_endpoint.allowed_hosts, ["gw.example.com"]);
    assert_eq!(
        set.mcp_endpoint.allowed_origins,
        ["https://app.example.com"]
    );
    assert_eq!(set.mcp_endpoint.sse_keep_alive_s, 30);
    let errors = parse_errors("mcp_endpoint:\n  allowed_host: [x]\n");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].line, Some(2));
    assert!(
        errors[0].message.contains("allowed_hosts"),
        "{}",
        errors[0].message
    );
}

// --- event log ---

#[test]
fn the_event_log_keeps_a_week_and_a_million_events_by_default() {
    for text in ["", "event_log:\n", "event_log: {}\n"] {
        let config = parse_ok(text);
        assert_eq!(
            config.event_log,
            EventLogConfig {
                max_age_days: 7,
                max_events: 1_000_000,
                compaction_interval_s: 60
            },
            "{text:?}"
        );
        assert_eq!(
            config.event_log.retention(),
            mcpgw_core::EventRetention {
                max_age: Some(mcpgw_core::EventRetention::DEFAULT_MAX_AGE),
                max_events: Some(mcpgw_core::EventRetention::DEFAULT_MAX_EVENTS),
            }
        );
        assert_eq!(
            config.event_log.compaction_interval(),
            Duration::from_secs(60)
        );
    }
}

#[test]
fn event_log_bounds_of_zero_are_no_bounds() {
    let config =
        parse_ok("event_log: {max_age_days: 0, max_events: 0, compaction_interval_s: 1}\n");
    assert_eq!(
        config.event_log.retention(),
        mcpgw_core::EventRetention::default()
    );
    assert_eq!(
        config.event_log.compaction_interval(),
        Duration::from_secs(1)
    );
    let config = parse_ok("event_log: {max_age_days: 2, max_events: 500}\n");
    assert_eq!(
        config.event_log.retention(),
        mcpgw_core::EventRetention {
            max_age: Some(Duration::from_secs(2 * 86_400)),
            max_events: Some(500),
        }
    );
    assert_eq!(config.event_log.compaction_interval_s, 60);
    assert_ne!(
        config,
        GatewayConfig::default(),
        "the section counts in equality"
    );
}

#[test]
fn event_log_values_out_of_range_are_reported_at_their_keys() {
    for (good, bad, path, message) in [
        (
            "event_log: {compaction_interval_s: 1}\n",
            "event_log: {compaction_interval_s: 0}\n",
            "event_log.compaction_interval_s",
            "must be between 1 and 86400, got 0",
        ),
        (
            "event_log: {compaction_interval_s: 86400}\n",
            "event_log: {compaction_interval_s: 86401}\n",
            "event_log.compaction_interval_s",
            "must be between 1 and 86400, got 86401",
        ),
        (
            "event_log: {max_age_days: 36500}\n",
            "event_log: {max_age_days: 36501}\n",
            "event_log.max_age_days",
            "must be between 0 and 36500, got 36501",
        ),
    ] {
        parse_ok(good);
        let error = only_error(bad);
        assert_eq!(error.kind, ConfigErrorKind::OutOfRange, "{bad}");
        assert_eq!(
            (error.line, error.path.as_str(), error.message.as_str()),
            (Some(1), path, message),
            "{bad}"
        );
    }
}

#[test]
fn event_log_unknown_keys_and_wrong_types_are_reported_at_their_keys() {
    let error = only_error("event_log:\n  max_age: 3\n");
    assert_eq!(error.kind, ConfigErrorKind::UnknownKey);
    assert_eq!(
        (error.line, error.column, error.path.as_str()),
        (Some(2), Some(3), "event_log.max_age")
    );
    assert!(
        error.message.contains("`max_age_days`"),
        "{}",
        error.message
    );
    let error = only_error("event_log:\n  max_events: -1\n");
    assert_eq!(error.kind, ConfigErrorKind::WrongType);
    assert_eq!(error.path, "event_log.max_events");
}

#[test]
fn docker_engine_comes_from_runtime_or_docker_host_and_survives_export() {
    let config = parse_ok(&yaml(
        "
        mcp_servers:
          cli: {mode: docker, image: img, runtime: podman}
          api: {mode: docker, image: img, docker_host: \"unix:///run/podman/podman.sock\"}
          plain: {mode: docker, image: img}
        ",
    ));
    let engine_of = |id: &str| match spec(&config, id).launch {
        LaunchSpec::Docker { engine, .. } => engine,
        other => panic!("{other:?}"),
    };
    assert_eq!(engine_of("cli"), ContainerEngine::Cli(ContainerCli::Podman));
    assert_eq!(
        engine_of("api"),
        ContainerEngine::Host("unix:///run/podman/podman.sock".into())
    );
    assert_eq!(engine_of("plain"), ContainerEngine::Default);
    for id in ["cli", "api", "plain"] {
        let original = spec(&config, id);
        let definition = ServerDefinition::from_server_spec(&original).unwrap();
        let again = definition
            .to_server_spec(original.id.clone(), ServerOrigin::Config)
            .unwrap();
        assert_eq!(again.launch, original.launch, "{id}");
    }
}

#[test]
fn docker_host_must_be_a_unix_socket_and_excludes_runtime() {
    // Bad input: a TCP address, and both ways of naming the engine at once.
    for (body, expected) in [
        (
            "mcp_servers:\n  a: {mode: docker, image: img, docker_host: \"tcp://10.0.0.1:2375\"}\n",
            "is not a unix socket",
        ),
        (
            "mcp_servers:\n  a: {mode: docker, image: img, runtime: docker, docker_host: /run/d.sock}\n",
            "give only one of them",
        ),
        (
            "mcp_servers:\n  a: {mode: subprocess, command: [x], docker_host: /run/d.sock}\n",
            "docker_host",
        ),
    ] {
        let messages: Vec<String> = parse_errors(body)
            .iter()
            .map(|error| format!("{}: {}", error.path, error.message))
            .collect();
        assert!(
            messages.iter().any(|message| message.contains(expected)),
            "{body}: {messages:?}"
        );
    }
}

#[test]
fn allowed_hosts_is_one_setting_with_its_older_spelling() {
    let defaults = parse_ok("mcp_servers: {}\n");
    assert!(defaults.allowed_hosts.is_empty());
    assert!(defaults.allowed_hosts().is_empty());
    let set = parse_ok(
        "allowed_hosts: [gw.example.com, \"10.0.0.5:8000\", \"[fd00::5]\"]\n\
         mcp_endpoint: {allowed_hosts: [\"old.example.com:8443\", gw.example.com]}\n",
    );
    assert_eq!(
        set.allowed_hosts(),
        [
            "gw.example.com",
            "10.0.0.5:8000",
            "[fd00::5]",
            "old.example.com:8443"
        ]
    );
    assert_eq!(parse_ok("allowed_hosts: [\"*\"]\n").allowed_hosts(), ["*"]);
    // Written as the author wrote it: each spelling stays where it was.
    let exported = crate::export_yaml(&set);
    let again = parse_ok(&exported);
    assert_eq!(again.allowed_hosts, set.allowed_hosts, "{exported}");
    assert_eq!(again.mcp_endpoint, set.mcp_endpoint, "{exported}");
}

#[test]
fn hosts_and_origins_that_are_not_ones_are_named_with_their_line() {
    // Bad input: a URL where a host belongs, a path, a bare IPv6 address, a port out of range,
    // an empty name; an origin without a scheme, one with a path.
    let errors = parse_errors(
        "allowed_hosts:\n  - https://gw.example.com\n  - gw.example.com/mcp\n  - \"fd00::5\"\n\
         \x20 - \"gw.example.com:99999\"\n  - \"\"\n\
         mcp_endpoint:\n  allowed_hosts: [\"a b\"]\n\
         \x20 allowed_origins: [app.example.com, \"https://app.example.com/x\", \"null\", \"*\", \"http://localhost:*\"]\n",
    );
    let paths: Vec<&str> = errors.iter().map(|error| error.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "allowed_hosts[0]",
            "allowed_hosts[1]",
            "allowed_hosts[2]",
            "allowed_hosts[3]",
            "allowed_hosts[4]",
            "mcp_endpoint.allowed_hosts[0]",
            "mcp_endpoint.allowed_origins[0]",
            "mcp_endpoint.allowed_origins[1]",
        ],
        "{errors:#?}"
    );
    assert_eq!(errors[0].line, Some(2));
    assert!(
        errors[0].message.contains("https://gw.example.com")
            && errors[0].message.contains("gw.example.com:8443"),
        "{}",
        errors[0].message
    );
    assert!(
        errors[2].message.contains("[fd00::5]"),
        "{}",
        errors[2].message
    );
    assert!(
        errors[6].message.contains("https://app.example.com"),
        "{}",
        errors[6].message
    );
}

#[test]
fn oauth_issuers_parse_with_their_defaults_and_scopes() {
    let config = parse_ok(&yaml(
        r#"
        auth:
          enabled: true
          oauth:
            resource: https://mcp.example.com/mcp
            issuers:
              - issuer: https://idp.example.com/realms/mcp
                scopes: {"mcp:ops": operator}
              - issuer: https://login.example.net/tenant/v2.0
                audience: api://mcpgw
                scope_claim: scp
                subject_claim: oid
        "#,
    ));
    let oauth = &config.auth.oauth;
    assert_eq!(
        oauth.resource.as_deref(),
        Some("https://mcp.example.com/mcp")
    );
    assert_eq!(oauth.issuers.len(), 2);
    let first = &oauth.issuers[0];
    assert_eq!(first.audience, None);
    assert_eq!(
        (
            first.subject_claim.as_str(),
            first.groups_claim.as_str(),
            first.tenant_claim.as_str(),
            first.scope_claim.as_str()
        ),
        ("sub", "groups", "tenant_id", "scope")
    );
    assert_eq!(first.clock_skew_s, 30);
    assert_eq!(
        first.scopes.get("mcp:ops").map(String::as_str),
        Some("operator")
    );
    let second = &oauth.issuers[1];
    assert_eq!(second.audience.as_deref(), Some("api://mcpgw"));
    assert_eq!(
        (second.scope_claim.as_str(), second.subject_claim.as_str()),
        ("scp", "oid")
    );
    // Absent, the section is empty: no issuer, the resource from each request.
    assert_eq!(
        parse_ok("auth: {enabled: true}\n").auth.oauth,
        OAuthConfig::default()
    );
}

#[test]
fn bad_oauth_settings_are_named_at_their_keys() {
    // Bad input: a resource with a fragment, an issuer that is no URL, the same issuer twice
    // (once with a trailing slash), a jwks_uri without host, an empty claim, a scope with a
    // blank in it and a scope that names no role.
    let errors = parse_errors(&yaml(
        r#"
        auth:
          oauth:
            resource: "https://mcp.example.com/mcp#top"
            issuers:
              - issuer: idp.example.com
              - issuer: https://idp.example.com/
                jwks_uri: "https://"
                scope_claim: ""
              - issuer: https://idp.example.com
                scopes: {"mcp ops": operator, "mcp:x": ""}
                clock_skew_s: 301
        "#,
    ));
    let at: Vec<(&str, &str)> = errors
        .iter()
        .map(|error| (error.path.as_str(), error.message.as_str()))
        .collect();
    let has = |path: &str, words: &str| {
        at.iter()
            .any(|(at_path, message)| *at_path == path && message.contains(words))
    };
    assert!(has("auth.oauth.resource", "fragment"), "{at:#?}");
    assert!(
        has("auth.oauth.issuers[0].issuer", "not an http"),
        "{at:#?}"
    );
    assert!(
        has("auth.oauth.issuers[2].issuer", "listed twice"),
        "{at:#?}"
    );
    assert!(has("auth.oauth.issuers[1].jwks_uri", "no host"), "{at:#?}");
    assert!(
        has("auth.oauth.issuers[1].scope_claim", "must not be empty"),
        "{at:#?}"
    );
    assert!(
        has("auth.oauth.issuers[2].scopes.mcp ops", "not a scope"),
        "{at:#?}"
    );
    assert!(
        has("auth.oauth.issuers[2].scopes.mcp:x", "names no role"),
        "{at:#?}"
    );
    assert!(
        has("auth.oauth.issuers[2].clock_skew_s", "0..=300"),
        "{at:#?}"
    );
    assert_eq!(errors.len(), 8, "{at:#?}");
    // A misspelt key is refused with the nearest one suggested.
    let error = only_error(
        "auth:\n  oauth:\n    issuers:\n      - issuer: https://i\n        scope_clam: scp\n",
    );
    assert!(error.message.contains("scope_claim"), "{error}");
}

#[test]
fn the_console_section_has_its_defaults_and_refuses_what_cannot_work() {
    let config = parse_ok("mcp_servers: {}\n");
    assert!(config.console.enabled);
    assert_eq!(config.console.session_idle_minutes, 30);
    assert_eq!(config.console.session_max_hours, 12);
    assert!(config.console.sso.is_none());
    let config = parse_ok(
        "console:\n  sso: {issuer: \"https://id.example.com\", client_id: mcpgw, client_secret: s3cret-value, scopes: [groups]}\n",
    );
    let sso = config.console.sso.as_ref().unwrap();
    assert_eq!(sso.scopes, ["groups"]);
    assert!(
        !crate::sanitized(&config)
            .to_string()
            .contains("s3cret-value"),
        "the client secret is masked when the configuration is shown"
    );

    // Bad input: lifetimes out of range, an issuer that is not a URL, an empty client id, an
    // empty secret, a redirect URI elsewhere than the callback, a scope with a blank, an
    // unknown key.
    let errors = parse_errors(
        "console:\n  session_idle_minutes: 0\n  session_max_hours: 169\n  sso:\n    issuer: not a url\n    client_id: \" \"\n    client_secret: \"\"\n    redirect_uri: \"https://gw.example.com/elsewhere\"\n    scopes: [\"two words\"]\n",
    );
    let paths: Vec<&str> = errors.iter().map(|error| error.path.as_str()).collect();
    for path in [
        "console.session_idle_minutes",
        "console.session_max_hours",
        "console.sso.issuer",
        "console.sso.client_id",
        "console.sso.client_secret",
        "console.sso.redirect_uri",
        "console.sso.scopes[0]",
    ] {
        assert!(paths.contains(&path), "{path} not in {errors:#?}");
    }
    let error = only_error("console: {sesion_idle_minutes: 5}\n");
    assert!(error.message.contains("session_idle_minutes"), "{error}");
}

#[test]
fn the_store_and_cluster_sections_have_their_defaults_and_refuse_what_cannot_work() {
    let config = parse_ok("mcp_servers: {}\n");
    assert!(config.store.is_none(), "SQLite stays the default");
    assert_eq!(config.cluster, crate::ClusterConfig::default());
    assert_eq!(config.cluster.heartbeat_interval_s, 5);
    assert_eq!(config.cluster.lease_s, 15);
    assert_eq!(config.cluster.resync_interval_s, 30);
    let config = parse_ok("store:\n");
    assert!(config.store.is_none(), "an empty section keeps SQLite");

    let config = parse_ok(
        "store: {url: \"postgres://mcpgw:pg-s3cret-value@db.internal:5432/mcpgw\", password_file: /run/secrets/pg}\ncluster: {replica_id: gw-0, lease_s: 20, secret_file: /run/secrets/fleet}\n",
    );
    let store = config.store.as_ref().unwrap();
    assert_eq!(store.max_connections, 8);
    assert_eq!(store.password_file.as_deref(), Some("/run/secrets/pg"));
    assert_eq!(config.cluster.replica_id.as_deref(), Some("gw-0"));
    assert_eq!(config.cluster.lease_s, 20);
    let shown = crate::sanitized(&config).to_string();
    assert!(
        !shown.contains("pg-s3cret-value"),
        "the URL's password is masked when the configuration is shown: {shown}"
    );
    assert!(shown.contains("db.internal:5432/mcpgw"), "{shown}");

    // Bad input: a URL of another database, an empty password file, a pool of 0 and of 101,
    // intervals out of range, a lease no longer than the heartbeat, a replica name with a
    // blank, an empty secret file, and misspelt keys.
    let errors = parse_errors(
        "store: {url: \"mysql://db/mcpgw\", password_file: \" \", max_connections: 0}\ncluster: {replica_id: \"two words\", heartbeat_interval_s: 61, lease_s: 2, resync_interval_s: 0, secret_file: \"\"}\n",
    );
    let paths: Vec<&str> = errors.iter().map(|error| error.path.as_str()).collect();
    for path in [
        "store.url",
        "store.password_file",
        "store.max_connections",
        "cluster.replica_id",
        "cluster.heartbeat_interval_s",
        "cluster.lease_s",
        "cluster.resync_interval_s",
        "cluster.secret_file",
    ] {
        assert!(paths.contains(&path), "{path} not in {errors:#?}");
    }
    let error = only_error("store: {url: \"postgres://db/mcpgw\", max_connections: 101}\n");
    assert_eq!(error.path, "store.max_connections");
    let error = only_error("cluster: {heartbeat_interval_s: 10, lease_s: 10}\n");
    assert_eq!(error.path, "cluster.lease_s");
    let error = only_error("store: {url: \"postgres://db/mcpgw\", pasword_file: /x}\n");
    assert!(error.message.contains("password_file"), "{error}");
    let error = only_error("store: {password_file: /x}\n");
    assert!(error.message.contains("url"), "{error}");
    let error = only_error("cluster: {leas_s: 5}\n");
    assert!(error.message.contains("lease_s"), "{error}");
}

// --- rate_limit: buckets in Redis ---

fn with_redis_password(name: &str) -> Option<String> {
    (name == "REDIS_PASSWORD").then(|| "r3dis-s3cret".to_owned())
}

#[test]
fn a_redis_backend_is_read_with_its_defaults_and_its_password_from_the_environment() {
    let text = "rate_limit:\n  rps: 5\n  burst: 10\n  backend: redis\n  redis:\n    url: \"redis://:${REDIS_PASSWORD}@redis.internal:6379/0\"\n";
    let config = parse("gateway.yaml", text, &with_redis_password)
        .unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(
        config.rate_limit.backend,
        crate::schema::RateLimitBackend::Redis
    );
    let redis = config
        .rate_limit
        .redis_backend()
        .expect("the Redis settings");
    assert_eq!(redis.url, "redis://:r3dis-s3cret@redis.internal:6379/0");
    assert_eq!(redis.timeout_ms, 50);
    assert_eq!(redis.timeout(), Duration::from_millis(50));
    assert_eq!(
        redis.on_unavailable,
        crate::schema::RateLimitOnUnavailable::Open
    );
    assert!(!redis.fails_closed());

    let config = parse_ok(
        "rate_limit: {backend: redis, redis: {url: \"unix:///run/redis.sock\", timeout_ms: 200, on_unavailable: closed}}\n",
    );
    let redis = config
        .rate_limit
        .redis_backend()
        .expect("the Redis settings");
    assert_eq!(redis.timeout(), Duration::from_millis(200));
    assert!(redis.fails_closed());
    assert_eq!((config.rate_limit.rps, config.rate_limit.burst), (10.0, 20));
}

#[test]
fn buckets_are_local_by_default_and_a_redis_section_alone_changes_nothing() {
    for text in [
        "rate_limit: {rps: 5}\n",
        "rate_limit: {backend: local}\n",
        "rate_limit: {backend: local, redis: {url: \"redis://cache:6379\"}}\n",
    ] {
        let config = parse_ok(text);
        assert_eq!(
            config.rate_limit.backend,
            crate::schema::RateLimitBackend::Local,
            "{text}"
        );
        assert_eq!(config.rate_limit.redis_backend(), None, "{text}");
    }
    assert_eq!(
        RateLimitConfig::default().backend,
        crate::schema::RateLimitBackend::Local
    );
}

#[test]
fn a_redis_backend_without_its_redis_is_a_missing_key() {
    // Bad input: `backend: redis` and nowhere to keep the buckets, also with an empty section.
    for text in [
        "rate_limit: {backend: redis}\n",
        "rate_limit:\n  backend: redis\n  redis:\n",
    ] {
        let error = only_error(text);
        assert_eq!(error.kind, ConfigErrorKind::MissingKey, "{text}");
        assert_eq!(error.path, "rate_limit", "{text}");
        assert_eq!(error.line, Some(1), "{text}");
        assert_eq!(error.message, "missing key `redis`; add it");
    }
    let error = only_error("rate_limit:\n  backend: redis\n  redis: {timeout_ms: 10}\n");
    assert_eq!(error.kind, ConfigErrorKind::MissingKey);
    assert_eq!(error.path, "rate_limit.redis");
    assert_eq!(error.message, "missing key `url`; add it");
}

#[test]
fn bad_redis_settings_are_reported_at_their_keys_without_the_password() {
    // Bad input: misspelt keys, unknown words, timeouts out of range, and URLs that are no
    // Redis URL (one of them TLS), each holding a password that must not be repeated.
    for (text, kind, path, message) in [
        (
            "rate_limit: {backend: redis, redis: {url: \"redis://h\", timout_ms: 5}}\n",
            ConfigErrorKind::UnknownKey,
            "rate_limit.redis.timout_ms",
            "unknown key `timout_ms`; did you mean `timeout_ms`?",
        ),
        (
            "rate_limit: {backnd: redis}\n",
            ConfigErrorKind::UnknownKey,
            "rate_limit.backnd",
            "unknown key `backnd`; did you mean `backend`?",
        ),
        (
            "rate_limit: {backend: memcached}\n",
            ConfigErrorKind::InvalidValue,
            "rate_limit.backend",
            "unknown value `memcached`; expected `local` or `redis`",
        ),
        (
            "rate_limit: {backend: redis, redis: {url: \"redis://h\", on_unavailable: opne}}\n",
            ConfigErrorKind::InvalidValue,
            "rate_limit.redis.on_unavailable",
            "unknown value `opne`; did you mean `open`?",
        ),
        (
            "rate_limit: {backend: redis, redis: {url: \"redis://h\", timeout_ms: 0}}\n",
            ConfigErrorKind::WrongType,
            "rate_limit.redis.timeout_ms",
            "invalid value: integer `0`, expected a number of milliseconds from 1 to 60000",
        ),
        (
            "rate_limit: {backend: redis, redis: {url: \"redis://h\", timeout_ms: 60001}}\n",
            ConfigErrorKind::WrongType,
            "rate_limit.redis.timeout_ms",
            "invalid value: integer `60001`, expected a number of milliseconds from 1 to 60000",
        ),
        (
            "rate_limit: {backend: redis, redis: {url: \"http://:pw-s3cret@h:6379\"}}\n",
            ConfigErrorKind::WrongType,
            "rate_limit.redis.url",
            "invalid value: a text that is no Redis URL, expected \
             redis://[[user]:password@]host[:port][/database], redis+unix:///path or \
             unix:///path",
        ),
        (
            "rate_limit: {backend: redis, redis: {url: \"rediss://:pw-s3cret@h:6379\"}}\n",
            ConfigErrorKind::WrongType,
            "rate_limit.redis.url",
            "invalid value: a TLS URL (rediss://), which is not supported, expected \
             redis://[[user]:password@]host[:port][/database], redis+unix:///path or \
             unix:///path",
        ),
        (
            "rate_limit: {backend: redis, redis: {url: \"redis://\"}}\n",
            ConfigErrorKind::WrongType,
            "rate_limit.redis.url",
            "invalid value: a text that is no Redis URL, expected \
             redis://[[user]:password@]host[:port][/database], redis+unix:///path or \
             unix:///path",
        ),
    ] {
        let error = only_error(text);
        assert_eq!(
            (error.kind, error.path.as_str(), error.message.as_str()),
            (kind, path, message),
            "{text}"
        );
        assert_eq!(error.line, Some(1), "{text}");
        assert!(!error.to_string().contains("s3cret"), "{error}");
    }
}

#[test]
fn the_redis_password_is_masked_when_shown_and_written_back_as_its_variable() {
    let text = "rate_limit:\n  backend: redis\n  redis: {url: \"redis://:${REDIS_PASSWORD}@redis.internal:6379/0\", on_unavailable: closed}\n";
    let config = parse("gateway.yaml", text, &with_redis_password)
        .unwrap_or_else(|errors| panic!("{errors}"));
    let shown = crate::sanitized(&config);
    assert!(!shown.to_string().contains("r3dis-s3cret"), "{shown}");
    assert_eq!(shown["rate_limit"]["backend"], "redis");
    assert_eq!(shown["rate_limit"]["redis"]["on_unavailable"], "closed");
    assert_eq!(shown["rate_limit"]["redis"]["timeout_ms"], 50);
    let exported = crate::export_yaml(&config);
    assert!(!exported.contains("r3dis-s3cret"), "{exported}");
    assert!(exported.contains("${REDIS_PASSWORD}"), "{exported}");
    let again = parse("exported.yaml", &exported, &with_redis_password)
        .unwrap_or_else(|errors| panic!("{errors}\n{exported}"));
    assert_eq!(again.rate_limit, config.rate_limit);

    // A local backend is exported as before: no `backend` key, no `redis` section.
    let exported = parse_ok("rate_limit: {rps: 3}\n").to_yaml();
    assert!(!exported.contains("backend"), "{exported}");
    assert!(!exported.contains("redis"), "{exported}");
}
