//! Launch modes registered besides the built-in ones: the file, JSON bodies, export and the
//! masking of their settings.

use mcpgw_core::{LaunchMode, LaunchSpec, ServerOrigin, SettingsError};
use serde_json::json;

use super::*;

/// A mode whose settings need a string `greeting` and allow a whole number `repeat` (1..=5).
fn in_process() -> LaunchMode {
    LaunchMode::new("in_process", |settings| {
        match settings.get("greeting") {
            Some(value) if value.is_string() => {}
            Some(_) => return Err(SettingsError::at("greeting", "must be a string")),
            None => return Err(SettingsError::new("missing key `greeting`")),
        }
        match settings.get("repeat") {
            None => Ok(()),
            Some(value) if value.as_u64().is_some_and(|n| (1..=5).contains(&n)) => Ok(()),
            Some(_) => Err(SettingsError::at(
                "repeat",
                "must be a whole number from 1 to 5",
            )),
        }
    })
    .unwrap()
}

fn options() -> ParseOptions {
    ParseOptions::default().with_launch_modes([in_process()])
}

fn environment(name: &str) -> Option<String> {
    (name == "GREETER_TOKEN").then(|| "s3cr3t-value".to_owned())
}

fn parse_with_modes(text: &str) -> Result<GatewayConfig, Vec<ConfigError>> {
    parse_with("gateway.yaml", text, &environment, &options()).map_err(ConfigErrors::into_errors)
}

const IN_PROCESS: &str = "\
mcp_servers:
  greeter:
    mode: in_process
    idle_ttl_s: 60
    settings:
      greeting: hello
      repeat: 2
      api_token: ${GREETER_TOKEN}
";

#[test]
fn a_registered_mode_is_a_custom_launch_with_its_settings() {
    let config = parse_with_modes(IN_PROCESS).unwrap();
    let spec = config.server_specs().pop().unwrap();
    assert_eq!(spec.mode(), "in_process");
    assert_eq!(spec.idle_ttl.as_secs(), 60);
    let LaunchSpec::Custom(custom) = &spec.launch else {
        panic!("{:?}", spec.launch)
    };
    assert_eq!(
        serde_json::Value::Object(custom.settings().clone()),
        json!({"greeting": "hello", "repeat": 2, "api_token": "s3cr3t-value"})
    );
}

#[test]
fn a_mode_nobody_registered_is_refused_with_the_nearest_name() {
    // Bad input: a registered mode's name read without the registration, and a typo of it.
    let errors = parse("gateway.yaml", IN_PROCESS, &environment)
        .unwrap_err()
        .into_errors();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(
        (errors[0].line, errors[0].path.as_str()),
        (Some(3), "mcp_servers.greeter.mode")
    );
    assert!(
        errors[0]
            .message
            .starts_with("unknown value `in_process`; "),
        "{}",
        errors[0].message
    );
    let errors =
        parse_with_modes(&IN_PROCESS.replace("mode: in_process", "mode: in_proces")).unwrap_err();
    assert_eq!(
        errors[0].message,
        "unknown value `in_proces`; did you mean `in_process`?"
    );
    // Nothing else is reported about a definition whose mode is unknown.
    assert_eq!(errors.len(), 1, "{errors:#?}");
}

#[test]
fn the_mode_checks_its_settings_and_the_error_points_at_the_key() {
    // Bad input: a number where the mode wants a string; settings left out; a key of the
    // docker mode; `settings` on a built-in mode.
    let errors =
        parse_with_modes(&IN_PROCESS.replace("greeting: hello", "greeting: 7")).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(
        (
            errors[0].line,
            errors[0].path.as_str(),
            errors[0].message.as_str()
        ),
        (
            Some(6),
            "mcp_servers.greeter.settings.greeting",
            "must be a string"
        )
    );
    let errors =
        parse_with_modes("mcp_servers:\n  greeter: {mode: in_process, image: x}\n").unwrap_err();
    let mut messages: Vec<(&str, &str)> = errors
        .iter()
        .map(|error| (error.path.as_str(), error.message.as_str()))
        .collect();
    messages.sort_unstable();
    assert_eq!(
        messages,
        [
            (
                "mcp_servers.greeter.image",
                "`image` does not belong to mode `in_process`; it is used with mode `docker`: \
                 remove it or change `mode`"
            ),
            ("mcp_servers.greeter.settings", "missing key `greeting`"),
        ]
    );
    assert!(
        errors
            .iter()
            .any(|error| error.kind == ConfigErrorKind::MissingKey
                && error.path == "mcp_servers.greeter.settings")
    );
    let errors = parse_with_modes(
        "mcp_servers:\n  m:\n    mode: subprocess\n    command: [x]\n    settings: {a: 1}\n",
    )
    .unwrap_err();
    assert_eq!(
        (errors[0].line, errors[0].message.as_str()),
        (
            Some(5),
            "`settings` does not belong to mode `subprocess`; it is used with modes registered \
             by the gateway's embedder: remove it or change `mode`"
        )
    );
    // The missing-mode message names the registered modes too.
    let errors = parse_with_modes("mcp_servers:\n  m: {description: x}\n").unwrap_err();
    assert_eq!(
        errors[0].message,
        "missing key `mode`; set it to `subprocess`, `docker`, `remote`, `in_process` or `group`"
    );
}

#[test]
fn json_bodies_take_registered_modes_from_the_options() {
    let body = json!({"mode": "in_process", "settings": {"greeting": "hi"}});
    let spec =
        server_spec_from_body("greeter", body.clone(), ServerOrigin::Api, &options()).unwrap();
    assert_eq!(spec.mode(), "in_process");
    // Bad input: the same body where the mode is not registered, and a setting out of range.
    let errors =
        server_spec_from_body("greeter", body, ServerOrigin::Api, &ParseOptions::default())
            .unwrap_err()
            .into_errors();
    assert_eq!(errors[0].path, "mode");
    let errors = server_spec_from_json(
        "greeter",
        json!({"mode": "in_process", "settings": {"greeting": "hi", "repeat": 9}}),
        ServerOrigin::Api,
        &options(),
    )
    .unwrap_err()
    .into_errors();
    assert_eq!(
        (errors[0].path.as_str(), errors[0].message.as_str()),
        ("settings.repeat", "must be a whole number from 1 to 5")
    );
}

#[test]
fn export_writes_the_mode_and_its_settings_back() {
    let config = parse_with_modes(IN_PROCESS).unwrap();
    let exported = export_yaml(&config);
    // The secret setting is written back as the reference it came from.
    assert!(exported.contains("${GREETER_TOKEN}"), "{exported}");
    let again = parse_with("exported.yaml", &exported, &environment, &options()).unwrap();
    assert_eq!(again.server_specs(), config.server_specs());
    let definition = ServerDefinition::from_server_spec(&config.server_specs()[0]).unwrap();
    assert_eq!(
        definition.mode,
        Some(ServerMode::Registered("in_process".into()))
    );
}

#[test]
fn settings_with_secret_names_are_masked_and_the_rest_shown() {
    let config = parse_with_modes(IN_PROCESS).unwrap();
    let shown = sanitized(&config);
    let settings = &shown["mcp_servers"]["greeter"]["settings"];
    assert_eq!(settings["api_token"], SECRET_MASK);
    assert_eq!(settings["greeting"], "hello");
    assert!(!export_yaml(&config).contains("s3cr3t-value"));
    assert!(secret_values(&config).contains(&"s3cr3t-value".to_owned()));
}
