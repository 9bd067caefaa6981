//! `tool_names`: its two words and its mapping, their export, and the checks of what it asks of
//! the servers and groups.

use std::collections::BTreeMap;

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

/// A subprocess server with predefined tools named `tools`.
fn server(id: &str, tools: &[&str]) -> String {
    let tools: Vec<String> = tools
        .iter()
        .map(|name| format!("{{name: {name}, inputSchema: {{type: object}}}}"))
        .collect();
    format!(
        "  {id}:\n    mode: subprocess\n    command: [x]\n    tools: [{}]\n",
        tools.join(", ")
    )
}

#[test]
fn the_two_words_keep_their_meaning() {
    let prefixed = parse_ok("tool_names: prefixed\n").tool_names;
    assert_eq!(prefixed, ToolNames::default());
    assert_eq!(prefixed.separator, "__");
    assert_eq!(prefixed.prefix, ToolPrefix::Id);
    assert!(!prefixed.unique_bare);
    assert_eq!(prefixed.max_length, 64);
    assert_eq!(
        parse_ok("tool_names: bare\n").tool_names,
        ToolNames {
            unique_bare: true,
            ..ToolNames::prefixed()
        }
    );
    // Absent and empty are the default.
    assert_eq!(parse_ok("{}\n").tool_names, ToolNames::prefixed());
    assert_eq!(parse_ok("tool_names:\n").tool_names, ToolNames::prefixed());
    // The words are the mappings they stand for.
    assert_eq!(
        parse_ok("tool_names: {prefix: id}\n").tool_names,
        ToolNames::prefixed()
    );
    assert_eq!(
        parse_ok("tool_names: {prefix: id, unique_bare: true}\n").tool_names,
        ToolNames::bare()
    );
}

#[test]
fn every_key_of_the_mapping_is_read() {
    let names = parse_ok(
        "tool_names:\n  separator: \".\"\n  prefix: custom\n  prefixes: {github: gh}\n  \
         unique_bare: true\n  max_length: 100\n",
    )
    .tool_names;
    assert_eq!(
        names,
        ToolNames {
            separator: ".".to_owned(),
            prefix: ToolPrefix::Custom,
            prefixes: BTreeMap::from([("github".to_owned(), "gh".to_owned())]),
            unique_bare: true,
            max_length: 100,
        }
    );
    assert_eq!(names.prefix_of("github"), Some("gh"));
    assert_eq!(names.prefix_of("math"), Some("math"));
    assert_eq!(names.prefixed_name("github", "search"), "gh.search");
    let none = parse_ok("tool_names: {prefix: none}\n").tool_names;
    assert_eq!(none.prefix_of("math"), None);
    assert_eq!(none.prefixed_name("math", "add"), "add");
}

#[test]
fn unknown_words_keys_and_values_are_refused_with_the_nearest() {
    // Bad input: a word that is neither shorthand.
    let error = only_error("tool_names: short\n");
    assert_eq!(
        error.message,
        "unknown value `short`; expected `prefixed` or `bare`"
    );
    // Bad input: a misspelt key of the mapping.
    let error = only_error("tool_names:\n  seperator: \"-\"\n");
    assert_eq!(error.path, "tool_names.seperator");
    assert_eq!(
        error.message,
        "unknown key `seperator`; did you mean `separator`?"
    );
    assert_eq!(error.line, Some(2));
    // Bad input: a misspelt prefix kind.
    let error = only_error("tool_names: {prefix: custon}\n");
    assert_eq!(error.path, "tool_names.prefix");
    assert_eq!(
        error.message,
        "unknown value `custon`; did you mean `custom`?"
    );
    // Bad input: a number where a word or a mapping belongs.
    let error = only_error("tool_names: 5\n");
    assert_eq!(error.kind, ConfigErrorKind::WrongType);
    assert!(
        error
            .message
            .contains("expected `prefixed`, `bare` or a mapping of tool naming settings"),
        "{}",
        error.message
    );
}

#[test]
fn the_configuration_exports_and_loads_back_to_the_same_names() {
    for text in [
        "tool_names: prefixed\n",
        "tool_names: bare\n",
        "tool_names: {separator: \"-.\", prefix: custom, prefixes: {github: gh}, max_length: 40}\n",
        "tool_names: {prefix: none, max_length: 128}\n",
        "tool_names: {prefix: id, unique_bare: true, separator: \"_\"}\n",
    ] {
        let config = parse_ok(text);
        let exported = export_yaml(&config);
        let again = parse("exported.yaml", &exported, &no_variables)
            .unwrap_or_else(|errors| panic!("{errors}\n{exported}"));
        assert_eq!(again.tool_names, config.tool_names, "{text}{exported}");
        assert_eq!(again, config, "{text}");
    }
    // The words are written as words; anything else as the mapping.
    assert!(export_yaml(&parse_ok("tool_names: bare\n")).contains("tool_names: bare"));
    let shown = sanitized(&parse_ok(
        "tool_names: {prefix: custom, prefixes: {github: gh}}\n",
    ));
    assert_eq!(
        shown["tool_names"],
        serde_json::json!({
            "separator": "__",
            "prefix": "custom",
            "prefixes": {"github": "gh"},
            "unique_bare": false,
            "max_length": 64,
        })
    );
    assert_eq!(
        sanitized(&GatewayConfig::default())["tool_names"],
        serde_json::json!("prefixed")
    );
}

#[test]
fn separators_and_lengths_out_of_bounds_are_refused() {
    for separator in ["", "_____", "/", "a", "_:", "é"] {
        // Bad input: an empty, too long, or foreign-character separator.
        let error = only_error(&format!("tool_names: {{separator: {separator:?}}}\n"));
        assert_eq!(error.path, "tool_names.separator", "{separator:?}");
        assert!(
            error.message.contains("is not a separator"),
            "{separator:?}: {}",
            error.message
        );
    }
    for separator in ["_", "-", ".", "__", "-.-.", "_._"] {
        parse_ok(&format!("tool_names: {{separator: {separator:?}}}\n"));
    }
    for length in [31, 129, 0] {
        // Bad input: a maximum length outside 32..=128.
        let error = only_error(&format!("tool_names: {{max_length: {length}}}\n"));
        assert_eq!(error.path, "tool_names.max_length");
        assert_eq!(error.kind, ConfigErrorKind::OutOfRange);
        assert_eq!(
            error.message,
            format!("must be between 32 and 128, got {length}")
        );
    }
    parse_ok("tool_names: {max_length: 32}\n");
    parse_ok("tool_names: {max_length: 128}\n");
}

#[test]
fn prefixes_are_only_for_custom_and_must_be_words_without_the_separator() {
    // Bad input: `prefixes` without `prefix: custom`.
    let error = only_error("tool_names: {prefixes: {github: gh}}\n");
    assert_eq!(error.path, "tool_names.prefixes");
    assert!(
        error.message.contains("only with `prefix: custom`"),
        "{}",
        error.message
    );
    // Bad input: a prefix with a character ids never have.
    let error = only_error("tool_names: {prefix: custom, prefixes: {github: \"g h\"}}\n");
    assert_eq!(error.path, "tool_names.prefixes.github");
    assert!(
        error.message.contains("is not a prefix"),
        "{}",
        error.message
    );
    // Bad input: an empty prefix.
    let error = only_error("tool_names: {prefix: custom, prefixes: {github: \"\"}}\n");
    assert_eq!(error.path, "tool_names.prefixes.github");
    // Bad input: a prefix that contains the separator.
    let error =
        only_error("tool_names: {prefix: custom, separator: \"-\", prefixes: {github: git-hub}}\n");
    assert_eq!(error.path, "tool_names.prefixes.github");
    assert!(
        error.message.contains("prefix `git-hub` contains `-`"),
        "{}",
        error.message
    );
    // Bad input: one prefix written for two ids.
    let error = only_error("tool_names: {prefix: custom, prefixes: {github: gh, gitlab: gh}}\n");
    assert_eq!(error.path, "tool_names.prefixes.gitlab");
    assert!(
        error
            .message
            .contains("`github` and `gitlab` both have the prefix `gh`"),
        "{}",
        error.message
    );
    // A prefix for an id the file does not declare is fine: the API may create it.
    let config = parse_ok(&format!(
        "tool_names: {{prefix: custom, prefixes: {{github: gh}}}}\nmcp_servers:\n{}",
        server("math", &["add"])
    ));
    assert_eq!(config.tool_names.prefixes["github"], "gh");
}

#[test]
fn ids_must_not_contain_the_separator() {
    // Bad input: ids that contain a one-character separator.
    let errors = errors_of(&format!(
        "tool_names: {{separator: \"-\"}}\nmcp_servers:\n{}{}",
        server("my-server", &["a"]),
        server("plain", &["b"]),
    ));
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(errors[0].path, "mcp_servers.my-server");
    assert_eq!(
        errors[0].message,
        "id `my-server` contains `-`, which separates prefixes from tool names \
         (tool_names.separator); rename it or choose another separator"
    );
    // Bad input: the default separator in an id, reported once, as an invalid id.
    let errors = errors_of(&format!("mcp_servers:\n{}", server("a__b", &["x"])));
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(errors[0].message.contains("must not contain `__`"));
    // Bad input: a group id with the separator; groups share the rule.
    let error = only_error(&format!(
        "tool_names: {{separator: \"_\"}}\nmcp_servers:\n{}  pool_a:\n    mode: group\n    \
         members: [{{id: m}}]\n",
        server("m", &["x"])
    ));
    assert_eq!(error.path, "mcp_servers.pool_a");
    assert!(error.message.contains("id `pool_a` contains `_`"));
}

#[test]
fn an_id_that_is_another_entrys_custom_prefix_is_refused_naming_both() {
    // Bad input: server `gh` next to `github`, whose custom prefix is `gh`.
    let error = only_error(&format!(
        "tool_names: {{prefix: custom, prefixes: {{github: gh}}}}\nmcp_servers:\n{}{}",
        server("github", &["search"]),
        server("gh", &["issues"]),
    ));
    assert_eq!(error.path, "mcp_servers.gh");
    assert!(
        error.message.contains("`gh` and `github`") && error.message.contains("prefix `gh`"),
        "{}",
        error.message
    );
    // The same two under `prefix: id` are fine: each is listed under its id.
    parse_ok(&format!(
        "mcp_servers:\n{}{}",
        server("github", &["search"]),
        server("gh", &["issues"]),
    ));
}

#[test]
fn predefined_tools_listed_under_one_name_are_refused_naming_both() {
    // Bad input: two servers both predefine `add`, and names are not prefixed.
    let error = only_error(&format!(
        "tool_names: {{prefix: none}}\nmcp_servers:\n{}{}",
        server("a", &["add", "sub"]),
        server("b", &["mul", "div", "add"]),
    ));
    assert_eq!(error.path, "mcp_servers.b.tools[2]");
    assert!(
        error.message.starts_with(
            "mcp_servers.a.tools[0] \"add\" and mcp_servers.b.tools[2] \"add\" would both be \
             listed as \"add\""
        ),
        "{}",
        error.message
    );
    assert_eq!(error.line, Some(10), "the line of b's tools");
    // Bad input: a tool listed bare (it is the only `x__add`) that spells another's prefixed
    // name under `bare`.
    let error = only_error(&format!(
        "tool_names: bare\nmcp_servers:\n{}{}{}",
        server("a", &["x__add"]),
        server("x", &["add"]),
        server("y", &["add"]),
    ));
    assert_eq!(error.path, "mcp_servers.x.tools[0]");
    assert!(
        error.message.contains("would both be listed as \"x__add\""),
        "{}",
        error.message
    );
    // Different names, or the same name under prefixes, are fine.
    parse_ok(&format!(
        "tool_names: {{prefix: none}}\nmcp_servers:\n{}{}",
        server("a", &["add"]),
        server("b", &["sub"]),
    ));
    parse_ok(&format!(
        "mcp_servers:\n{}{}",
        server("a", &["add"]),
        server("b", &["add"]),
    ));
}

#[test]
fn group_members_tools_do_not_count_because_members_are_not_listed() {
    // Both members predefine `add`: only their group is listed, so nothing collides.
    parse_ok(&format!(
        "tool_names: {{prefix: none}}\nmcp_servers:\n{}{}  pool:\n    mode: group\n    \
         members: [{{id: a}}, {{id: b}}]\n",
        server("a", &["add"]),
        server("b", &["add"]),
    ));
}

#[test]
fn long_colliding_names_say_they_are_shortened() {
    let long = "t".repeat(70);
    // Bad input: two servers with one 70-character tool name and no prefixes.
    let error = only_error(&format!(
        "tool_names: {{prefix: none}}\nmcp_servers:\n{}{}",
        server("a", &[long.as_str()]),
        server("b", &[long.as_str()]),
    ));
    assert!(
        error
            .message
            .contains("(before shortening to 64 characters)"),
        "{}",
        error.message
    );
}

#[test]
fn new_owners_are_checked_against_the_separator_and_the_prefixes() {
    let names = ToolNames {
        prefix: ToolPrefix::Custom,
        prefixes: BTreeMap::from([("github".to_owned(), "gh".to_owned())]),
        separator: "-".to_owned(),
        ..ToolNames::default()
    };
    // Bad input: an id with the separator.
    assert_eq!(
        names.check_new_owner("my-server", []),
        Err(ToolNameConflict::SeparatorInId {
            id: "my-server".to_owned(),
            separator: "-".to_owned(),
        })
    );
    // Bad input: an id that is another id's custom prefix, even before that id exists.
    assert_eq!(
        names.check_new_owner("gh", []),
        Err(ToolNameConflict::PrefixTaken {
            id: "gh".to_owned(),
            other: "github".to_owned(),
            prefix: "gh".to_owned(),
        })
    );
    // Bad input: an id whose custom prefix is an existing owner's id.
    let refused = names.check_new_owner("github", ["gh", "math"]).unwrap_err();
    assert_eq!(
        refused,
        ToolNameConflict::PrefixTaken {
            id: "github".to_owned(),
            other: "gh".to_owned(),
            prefix: "gh".to_owned(),
        }
    );
    assert!(refused.to_string().contains("`github`") && refused.to_string().contains("`gh`"));
    assert_eq!(names.check_new_owner("github", ["math"]), Ok(()));
    assert_eq!(names.check_new_owner("math", ["github"]), Ok(()));
    // Under `prefix: none` only the separator matters.
    let none = ToolNames {
        prefix: ToolPrefix::None,
        ..ToolNames::default()
    };
    assert_eq!(none.check_new_owner("gh", ["gh2"]), Ok(()));
}
