//! `endpoints`: parsing, the checks of names, entries, overrides and principal patterns, the
//! warning for servers the file does not declare, conversion to the domain's specs and back,
//! request bodies, and how reloads see them.

use mcpgw_core::{EndpointName, EndpointSpec, ServerId, ServerOrigin, ToolSelector};
use serde_json::json;

use super::*;

fn no_variables(_: &str) -> Option<String> {
    None
}

fn parse_ok(text: &str) -> GatewayConfig {
    parse("gateway.yaml", text, &no_variables).unwrap_or_else(|errors| panic!("{errors}"))
}

fn errors_of(text: &str) -> Vec<ConfigError> {
    match parse("gateway.yaml", text, &no_variables) {
        Ok(config) => panic!("expected errors, parsed {config:?}"),
        Err(errors) => errors.into_errors(),
    }
}

fn only_error(text: &str) -> ConfigError {
    let errors = errors_of(text);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    errors.into_iter().next().unwrap()
}

/// Two servers, `tickets` and `math`, followed by `endpoints` as given.
fn with_servers(endpoints: &str) -> String {
    format!(
        "mcp_servers:\n  tickets:\n    mode: subprocess\n    command: [tickets]\n  math:\n    \
         mode: subprocess\n    command: [math]\nendpoints:\n{endpoints}"
    )
}

const SUPPORT: &str = concat!(
    "  support:\n",
    "    description: Tools for the support agents\n",
    "    tools:\n",
    "      - server: tickets\n",
    "      - server: math\n",
    "        tool: add\n",
    "        name: sum\n",
    "        title: Sum\n",
    "        description: Adds two numbers.\n",
    "        annotations: {readOnlyHint: true}\n",
    "    allow: [\"group:support\", \"user:alice\"]\n",
    "    deny: [\"user:mallory\"]\n",
    "    tool_search: true\n",
);

fn selector(server: &str) -> ToolSelector {
    ToolSelector {
        server: ServerId::parse(server).unwrap(),
        tool: None,
        name: None,
        title: None,
        description: None,
        annotations: None,
    }
}

fn support_spec(origin: ServerOrigin) -> EndpointSpec {
    EndpointSpec {
        name: EndpointName::parse("support").unwrap(),
        description: Some("Tools for the support agents".into()),
        tools: vec![
            selector("tickets"),
            ToolSelector {
                tool: Some("add".into()),
                name: Some("sum".into()),
                title: Some("Sum".into()),
                description: Some("Adds two numbers.".into()),
                annotations: Some(json!({"readOnlyHint": true})),
                ..selector("math")
            },
        ],
        allow: vec!["group:support".into(), "user:alice".into()],
        deny: vec!["user:mallory".into()],
        tool_search: true,
        origin,
    }
}

#[test]
fn a_full_endpoint_parses_into_its_spec() {
    let config = parse_ok(&with_servers(SUPPORT));
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
    assert_eq!(
        config.to_endpoint_specs(),
        [support_spec(ServerOrigin::Config)]
    );
}

#[test]
fn a_minimal_endpoint_takes_its_defaults() {
    let config = parse_ok(&with_servers("  ops:\n    tools: [{server: math}]\n"));
    let [spec] = config.to_endpoint_specs().try_into().unwrap();
    assert_eq!(spec.name.as_str(), "ops");
    assert_eq!(spec.description, None);
    assert_eq!(spec.tools, [selector("math")]);
    assert!(spec.allow.is_empty() && spec.deny.is_empty() && !spec.tool_search);
    // No `endpoints` at all, or an empty one: none.
    assert!(parse_ok("mcp_servers: {}\n").endpoints.is_empty());
    assert!(parse_ok("endpoints:\n").endpoints.is_empty());
    assert!(GatewayConfig::default().endpoints.is_empty());
}

#[test]
fn a_server_id_written_as_a_number_is_its_text() {
    // `server: 2024` is a YAML number; ids are text, as `mcp_servers` keys are.
    let config = parse_ok(
        "mcp_servers:\n  \"2024\":\n    mode: subprocess\n    command: [x]\nendpoints:\n  \
         y:\n    tools: [{server: 2024}]\n",
    );
    assert_eq!(config.to_endpoint_specs()[0].tools, [selector("2024")]);
}

#[test]
fn unknown_keys_are_refused_with_the_nearest_one() {
    // Bad input: a misspelt key of the endpoint, then of an entry.
    let error = only_error(&with_servers(
        "  support:\n    tools: [{server: math}]\n    tool_serach: true\n",
    ));
    assert_eq!(error.kind, ConfigErrorKind::UnknownKey);
    assert_eq!(error.path, "endpoints.support.tool_serach");
    assert_eq!(error.line, Some(11));
    assert!(
        error.message.contains("did you mean `tool_search`?"),
        "{error}"
    );
    let error = only_error(&with_servers(
        "  support:\n    tools:\n      - server: math\n        tool: add\n        titel: Sum\n",
    ));
    assert_eq!(error.kind, ConfigErrorKind::UnknownKey);
    assert_eq!(error.path, "endpoints.support.tools[0].titel");
    assert!(error.message.contains("did you mean `title`?"), "{error}");
}

#[test]
fn endpoint_names_are_path_segments() {
    // Bad input: a name with a space, one with a dot, one of 65 characters.
    let long = "x".repeat(65);
    for bad in ["has space", "a.b", long.as_str()] {
        let error = only_error(&with_servers(&format!(
            "  \"{bad}\":\n    tools: [{{server: math}}]\n"
        )));
        assert_eq!(error.path, format!("endpoints.{bad}"));
        assert!(error.message.contains("1 to 64"), "{error}");
        assert_eq!(error.line, Some(9), "{error}");
    }
    parse_ok(&with_servers(&format!(
        "  \"{}\":\n    tools: [{{server: math}}]\n",
        "x".repeat(64)
    )));
}

#[test]
fn an_endpoint_serves_at_least_one_entry() {
    // Bad input: `tools` left out, then given as an empty list.
    for endpoint in [
        "  empty:\n    description: nothing\n",
        "  empty:\n    tools: []\n",
    ] {
        let error = only_error(&with_servers(endpoint));
        assert_eq!(error.kind, ConfigErrorKind::MissingKey);
        assert_eq!(error.path, "endpoints.empty.tools");
        assert!(error.message.contains("at least one entry"), "{error}");
    }
}

#[test]
fn servers_must_be_valid_ids() {
    // Bad input: an id with the separator, one with a space, an empty one.
    for bad in ["a__b", "has space", ""] {
        let error = only_error(&with_servers(&format!(
            "  e:\n    tools:\n      - server: \"{bad}\"\n"
        )));
        assert_eq!(error.path, "endpoints.e.tools[0].server", "{error}");
        assert!(error.message.contains("ids match"), "{error}");
        assert_eq!(error.line, Some(11), "{error}");
    }
}

#[test]
fn overrides_need_a_tool() {
    // Bad input: each override key on an entry that selects a whole server.
    for (key, value) in [
        ("name", "sum"),
        ("title", "Sum"),
        ("description", "Adds."),
        ("annotations", "{readOnlyHint: true}"),
    ] {
        let error = only_error(&with_servers(&format!(
            "  e:\n    tools:\n      - server: math\n        {key}: {value}\n"
        )));
        assert_eq!(error.path, format!("endpoints.e.tools[0].{key}"));
        assert_eq!(
            error.message,
            "name/title/description/annotations need `tool`: they override one tool"
        );
        assert_eq!(error.line, Some(12), "{error}");
    }
}

#[test]
fn a_tool_name_must_not_be_empty() {
    // Bad input: `tool: ""`, which selects no tool at all.
    let error = only_error(&with_servers(
        "  e:\n    tools:\n      - server: math\n        tool: \"\"\n",
    ));
    assert_eq!(error.path, "endpoints.e.tools[0].tool");
    assert!(error.message.contains("leave `tool` out"), "{error}");
}

#[test]
fn override_names_are_tool_names() {
    // Bad input: a space, a slash, an empty name, 129 characters.
    let long = "n".repeat(129);
    for bad in ["sum total", "a/b", "", long.as_str()] {
        let error = only_error(&with_servers(&format!(
            "  e:\n    tools:\n      - server: math\n        tool: add\n        name: \"{bad}\"\n"
        )));
        assert_eq!(error.path, "endpoints.e.tools[0].name");
        assert!(error.message.contains("1 to 128"), "{error}");
    }
    let longest = "n".repeat(128);
    for good in ["sum", "math.add-2_x", longest.as_str()] {
        parse_ok(&with_servers(&format!(
            "  e:\n    tools:\n      - server: math\n        tool: add\n        name: \"{good}\"\n"
        )));
    }
}

#[test]
fn annotations_must_be_an_object() {
    // Bad input: a list, then a string, where the annotations object belongs.
    for bad in ["[readOnlyHint]", "readOnly"] {
        let error = only_error(&with_servers(&format!(
            "  e:\n    tools:\n      - server: math\n        tool: add\n        annotations: {bad}\n"
        )));
        assert_eq!(error.path, "endpoints.e.tools[0].annotations");
        assert!(error.message.contains("must be an object"), "{error}");
    }
}

#[test]
fn allow_and_deny_take_principal_patterns() {
    // Bad input: no kind, an unknown kind, a partial wildcard, an empty pattern.
    for (key, bad) in [
        ("allow", "alice"),
        ("allow", "team:support"),
        ("deny", "user:mal*"),
        ("deny", ""),
    ] {
        let error = only_error(&with_servers(&format!(
            "  e:\n    tools: [{{server: math}}]\n    {key}: [\"user:bob\", \"{bad}\"]\n"
        )));
        assert_eq!(error.path, format!("endpoints.e.{key}[1]"), "{error}");
        assert!(error.message.contains("write a principal"), "{error}");
    }
    for good in ["*", "user:*", "group:support", "service:ci"] {
        parse_ok(&with_servers(&format!(
            "  e:\n    tools: [{{server: math}}]\n    allow: [\"{good}\"]\n    deny: [\"{good}\"]\n"
        )));
    }
}

#[test]
fn two_entries_served_under_one_name_are_refused_naming_both() {
    // Bad input: entries 1 and 3 both rename their tool to `sum`.
    let error = only_error(&with_servers(
        "  support:\n    tools:\n      - server: tickets\n      - {server: math, tool: add, \
         name: sum}\n      - {server: math, tool: mul}\n      - {server: tickets, tool: add, \
         name: sum}\n",
    ));
    assert_eq!(error.kind, ConfigErrorKind::DuplicateKey);
    assert_eq!(error.path, "endpoints.support.tools[3].name");
    assert!(
        error.message.starts_with(
            "endpoints.support.tools[1] and endpoints.support.tools[3] would both be served as \
             \"sum\""
        ),
        "{error}"
    );
    // The same name on two endpoints is fine: each endpoint is its own namespace.
    parse_ok(&with_servers(
        "  a:\n    tools: [{server: math, tool: add, name: sum}]\n  b:\n    tools: [{server: \
         math, tool: add, name: sum}]\n",
    ));
}

#[test]
fn every_problem_of_an_endpoint_is_reported_at_once() {
    // Bad input: a bad server id, an override without `tool` and a bad pattern together.
    let errors = errors_of(&with_servers(
        "  e:\n    tools:\n      - server: \"a b\"\n      - {server: math, title: T}\n    \
         deny: [nobody]\n",
    ));
    let paths: Vec<&str> = errors.iter().map(|error| error.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "endpoints.e.tools[0].server",
            "endpoints.e.tools[1].title",
            "endpoints.e.deny[0]"
        ]
    );
}

#[test]
fn a_server_the_file_does_not_declare_is_a_warning() {
    // Not an error: `crm` may be created over the API; until then the entry selects nothing.
    let config = parse_ok(&with_servers(
        "  e:\n    tools:\n      - server: math\n      - server: crm\n",
    ));
    let [warning] = config.warnings() else {
        panic!("one warning: {:?}", config.warnings());
    };
    assert_eq!(warning.path, "endpoints.e.tools[1].server");
    assert_eq!(warning.line, Some(12));
    assert!(warning.message.contains("`crm`"), "{warning}");
    assert!(warning.message.contains("over the API"), "{warning}");
    // A group of the file is declared as much as a server.
    let config = parse_ok(
        "mcp_servers:\n  a:\n    mode: subprocess\n    command: [a]\n  pool:\n    mode: group\n    \
         members: [{id: a}]\nendpoints:\n  e:\n    tools: [{server: pool}]\n",
    );
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
}

#[test]
fn endpoints_count_in_equality() {
    let with = parse_ok(&with_servers(SUPPORT));
    let without = parse_ok(&with_servers(""));
    assert_ne!(with, without);
    assert_eq!(with, parse_ok(&with_servers(SUPPORT)));
}

#[test]
fn a_reload_applies_endpoints_and_needs_no_restart_for_them() {
    let old = parse_ok(&with_servers(
        "  support:\n    tools: [{server: math}]\n  gone:\n    tools: [{server: math}]\n  same:\n    \
         tools: [{server: tickets}]\n",
    ));
    let new = parse_ok(&with_servers(
        "  support:\n    tools: [{server: tickets}]\n  new:\n    tools: [{server: math}]\n  same:\n    \
         tools: [{server: tickets}]\n",
    ));
    let diff = changes(&old, &new);
    assert_eq!(
        diff.endpoints,
        SectionChanges {
            added: vec!["new".into()],
            removed: vec!["gone".into()],
            updated: vec!["support".into()],
            unchanged: vec!["same".into()],
        }
    );
    assert!(diff.restart_required.is_empty(), "{diff:?}");
    assert!(diff.servers.is_empty() && diff.groups.is_empty());
    assert!(!diff.is_empty());
    // From none to some and back: still nothing to restart for.
    let none = parse_ok(&with_servers(""));
    assert!(changes(&none, &new).restart_required.is_empty());
    assert!(changes(&new, &none).restart_required.is_empty());
    assert!(changes(&new, &new).is_empty());
    assert_eq!(
        no_changes(&new).endpoints.unchanged,
        ["new", "same", "support"]
    );
}

#[test]
fn an_exported_configuration_loads_back_to_the_same_endpoints() {
    let config = parse_ok(&with_servers(SUPPORT));
    for text in [config.to_yaml(), export_yaml(&config)] {
        assert!(text.contains("endpoints:"), "{text}");
        let again = parse_ok(&text);
        assert_eq!(again, config, "{text}");
        assert_eq!(again.to_endpoint_specs(), config.to_endpoint_specs());
    }
    // Without endpoints, the key is left out.
    assert!(!parse_ok(&with_servers("")).to_yaml().contains("endpoints"));
}

#[test]
fn a_spec_becomes_its_definition_again() {
    let spec = support_spec(ServerOrigin::Api);
    let definition = EndpointDefinition::from_endpoint_spec(&spec);
    assert_eq!(
        definition.to_endpoint_spec(spec.name.clone(), ServerOrigin::Api),
        spec
    );
    let mut config = GatewayConfig::default();
    config.endpoints.insert("support".into(), definition);
    assert_eq!(
        parse_ok(&with_servers(SUPPORT)).endpoints,
        config.endpoints,
        "the definition is the one the file writes"
    );
}

#[test]
fn a_request_body_is_judged_by_the_file_rules() {
    let body = json!({
        "name": "support",
        "description": "Tools for the support agents",
        "tools": [
            {"server": "tickets"},
            {"server": "math", "tool": "add", "name": "sum", "title": "Sum",
             "description": "Adds two numbers.", "annotations": {"readOnlyHint": true}},
        ],
        "allow": ["group:support", "user:alice"],
        "deny": ["user:mallory"],
        "tool_search": true,
    });
    assert_eq!(
        endpoint_spec_from_body("support", body.clone(), ServerOrigin::Api).unwrap(),
        support_spec(ServerOrigin::Api)
    );
    // `name` may be left out of the body.
    let mut without_name = body;
    without_name.as_object_mut().unwrap().remove("name");
    assert_eq!(
        endpoint_spec_from_body("support", without_name, ServerOrigin::Api).unwrap(),
        support_spec(ServerOrigin::Api)
    );
    // A server that nothing declares is no error in a body: it may be created later.
    endpoint_spec_from_body(
        "e",
        json!({"tools": [{"server": "crm"}]}),
        ServerOrigin::Api,
    )
    .unwrap();
}

#[test]
fn bad_request_bodies_name_the_field() {
    let cases: &[(&str, serde_json::Value, &str, &str)] = &[
        // A body name that differs from the path's.
        (
            "support",
            json!({"name": "other", "tools": [{"server": "math"}]}),
            "name",
            "does not match the endpoint's name `support`",
        ),
        // A name that cannot be a path segment.
        (
            "a/b",
            json!({"tools": [{"server": "math"}]}),
            "name",
            "1 to 64",
        ),
        // A number where a string belongs: a body is JSON, so it is not read as its text.
        (
            "e",
            json!({"tools": [{"server": 7}]}),
            "tools[0].server",
            "a string",
        ),
        // A misspelt key.
        (
            "e",
            json!({"tools": [{"server": "math"}], "tool_serach": true}),
            "tool_serach",
            "did you mean `tool_search`?",
        ),
        // No entry.
        ("e", json!({"tools": []}), "tools", "at least one entry"),
        // An override without `tool`.
        (
            "e",
            json!({"tools": [{"server": "math", "name": "sum"}]}),
            "tools[0].name",
            "need `tool`",
        ),
        // Two entries served under one name.
        (
            "e",
            json!({"tools": [
                {"server": "math", "tool": "add", "name": "sum"},
                {"server": "math", "tool": "plus", "name": "sum"}
            ]}),
            "tools[1].name",
            "tools[0] and tools[1] would both be served as \"sum\"",
        ),
        // A bad principal pattern.
        (
            "e",
            json!({"tools": [{"server": "math"}], "allow": ["user:al*"]}),
            "allow[0]",
            "is not supported",
        ),
        // A wrong type for a flag.
        (
            "e",
            json!({"tools": [{"server": "math"}], "tool_search": "yes"}),
            "tool_search",
            "boolean",
        ),
    ];
    for (name, body, path, expected) in cases {
        let errors = endpoint_spec_from_body(name, body.clone(), ServerOrigin::Api)
            .expect_err(&body.to_string())
            .into_errors();
        assert!(
            errors
                .iter()
                .any(|error| error.path == *path && error.message.contains(expected)),
            "{body}: {errors:#?}"
        );
        assert!(
            errors.iter().all(|error| error.line.is_none()),
            "{errors:#?}"
        );
    }
    // Bad input: a body that is not an object.
    assert!(endpoint_spec_from_body("e", json!([1]), ServerOrigin::Api).is_err());
}
