//! Arbitrary bytes as the YAML configuration file, through `mcpgw_config::parse`: the entry
//! point that `mcpgw config check`, startup and `reload` use.
//!
//! Any input may be refused, never with a panic. A file that loads must also render every way
//! the gateway shows it (its errors' text, the sanitized JSON of `GET /api/config`, the export
//! and the diff), and its export must load again to a configuration without changes, as
//! `export_yaml` promises.

#![no_main]

use libfuzzer_sys::fuzz_target;

/// A fixed environment, so that `${VAR}` references both expand and fall back to defaults.
fn environment(name: &str) -> Option<String> {
    match name {
        "HOME" => Some("/home/gateway".to_owned()),
        "TOKEN" | "API_TOKEN" => Some("s3cr3t-token-value".to_owned()),
        "PORT" => Some("8080".to_owned()),
        "EMPTY" => Some(String::new()),
        "DOLLAR" => Some("${NESTED}".to_owned()),
        _ => None,
    }
}

fuzz_target!(|data: &[u8]| {
    // The file is read with `read_to_string`: bytes that are not UTF-8 never reach the parser.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let config = match mcpgw_config::parse("gateway.yaml", text, &environment) {
        Ok(config) => config,
        Err(errors) => {
            assert!(
                !errors.errors().is_empty(),
                "a refused file must name at least one error"
            );
            let _ = errors.to_string();
            return;
        }
    };
    for warning in config.warnings() {
        let _ = warning.to_string();
    }

    let shown = mcpgw_config::sanitized(&config);
    assert!(
        shown.is_object(),
        "the sanitized configuration is a JSON object"
    );
    let secrets = mcpgw_config::secret_values(&config);
    let exported = mcpgw_config::export_yaml(&config);
    let _ = mcpgw_config::redact_secrets(&exported, &secrets);
    let _ = mcpgw_config::unified_diff("gateway.yaml", text, "exported.yaml", &exported, 3);

    let reloaded = match mcpgw_config::parse("exported.yaml", &exported, &environment) {
        Ok(reloaded) => reloaded,
        Err(errors) => panic!(
            "the export of a valid configuration does not load again:\n{errors}\n--- export:\n{exported}"
        ),
    };
    // Secrets come back as `***`, so only a configuration without any compares whole.
    if secrets.is_empty() {
        let changes = mcpgw_config::changes(&config, &reloaded);
        assert!(
            changes.is_empty(),
            "the export loads to another configuration: {changes:?}\n--- export:\n{exported}"
        );
    }
});
