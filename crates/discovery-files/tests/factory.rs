//! Building `filesystem` sources from their definitions: which settings are accepted, and
//! what an operator is told about the others.

use std::time::Duration;

use mcpgw_discovery::{DiscoveryMode, DiscoverySourceFactory, SourceDefinition, SourceOrigin};
use mcpgw_discovery_files::{DEFAULT_WATCH_INTERVAL, FilesystemSourceFactory};
use serde_json::{Value, json};

fn definition(config: Value) -> SourceDefinition {
    let Value::Object(config) = config else {
        panic!("config must be an object");
    };
    SourceDefinition {
        source_id: "files-0".to_owned(),
        source_type: "filesystem".to_owned(),
        mode: DiscoveryMode::Authoritative,
        enabled: true,
        config,
        origin: SourceOrigin::Config,
    }
}

fn build_error(config: Value) -> String {
    match FilesystemSourceFactory::new().build(&definition(config)) {
        Ok(_) => panic!("the definition was expected to be refused"),
        Err(error) => error,
    }
}

#[test]
fn it_builds_the_filesystem_type() {
    assert_eq!(
        FilesystemSourceFactory::new().source_types(),
        ["filesystem"]
    );
}

#[test]
fn path_and_interval_are_taken_from_the_config() {
    let source = FilesystemSourceFactory::new()
        .source_from(&definition(json!({
            "path": "/etc/mcp/servers",
            "watch_interval_ms": 250,
            "removal_grace_s": 30,
        })))
        .expect("a valid config");
    assert_eq!(source.directory(), std::path::Path::new("/etc/mcp/servers"));
    assert_eq!(source.watch_interval(), Duration::from_millis(250));

    let source = FilesystemSourceFactory::new()
        .source_from(&definition(json!({"path": "/etc/mcp/servers"})))
        .expect("a valid config");
    assert_eq!(source.watch_interval(), DEFAULT_WATCH_INTERVAL);
    assert_eq!(DEFAULT_WATCH_INTERVAL, Duration::from_millis(1000));
}

#[tokio::test]
async fn a_directory_that_does_not_exist_yet_builds_and_its_scans_say_why_they_fail() {
    let parent = tempfile::tempdir().expect("a temp directory");
    let missing = parent.path().join("not-yet");
    let source = FilesystemSourceFactory::new()
        .build(&definition(
            json!({"path": missing.to_str().expect("a UTF-8 path")}),
        ))
        .expect("building reads nothing");

    let error = source.scan().await.expect_err("the directory is missing");

    assert!(
        error
            .0
            .starts_with(&format!("directory {} does not exist", missing.display())),
        "{}",
        error.0
    );
}

#[test]
fn an_unknown_key_is_named_with_the_valid_ones() {
    assert_eq!(
        build_error(json!({"path": "/srv/mcp", "socket_path": "/var/run/docker.sock"})),
        "config.socket_path is not a setting of a filesystem source; valid keys are path, \
         removal_grace_s, watch_interval_ms"
    );
    assert_eq!(
        build_error(json!({"path": "/srv/mcp", "recursive": true, "glob": "*.yaml"})),
        "config.glob, config.recursive are not settings of a filesystem source; valid keys are \
         path, removal_grace_s, watch_interval_ms"
    );
}

#[test]
fn a_missing_path_is_refused() {
    let error = build_error(json!({}));
    assert!(error.starts_with("config.path is required"), "{error}");
    let error = build_error(json!({"path": null}));
    assert!(error.starts_with("config.path is required"), "{error}");
}

#[test]
fn a_relative_path_is_refused() {
    let error = build_error(json!({"path": "servers/mcp"}));
    assert!(
        error.starts_with(
            "config.path `servers/mcp` is relative; give the directory's absolute path"
        ),
        "{error}"
    );
}

#[test]
fn a_path_that_is_not_a_string_is_refused() {
    for path in [json!(42), json!(["/a"]), json!(""), json!("  ")] {
        let error = build_error(json!({ "path": path }));
        assert!(
            error.starts_with("config.path must be the absolute path of a directory as a string"),
            "{error}"
        );
    }
}

#[test]
fn a_watch_interval_out_of_range_is_refused() {
    for interval in [
        json!(99),
        json!(3_600_001),
        json!(-5),
        json!(1.5),
        json!("1s"),
    ] {
        let error = build_error(json!({"path": "/srv/mcp", "watch_interval_ms": interval}));
        assert_eq!(
            error,
            format!(
                "config.watch_interval_ms must be a whole number of milliseconds from 100 to \
                 3600000, not {interval}"
            )
        );
    }
    let edges = [json!(100), json!(3_600_000)];
    for interval in edges {
        FilesystemSourceFactory::new()
            .build(&definition(
                json!({"path": "/srv/mcp", "watch_interval_ms": interval}),
            ))
            .expect("the bounds are accepted");
    }
}

#[test]
fn the_common_settings_are_checked() {
    let error = build_error(json!({"path": "/srv/mcp", "removal_grace_s": "soon"}));
    assert!(
        error.starts_with("config.removal_grace_s must be"),
        "{error}"
    );

    let mut bad_id = definition(json!({"path": "/srv/mcp"}));
    bad_id.source_id = "has space".to_owned();
    let error = match FilesystemSourceFactory::new().build(&bad_id) {
        Ok(_) => panic!("an invalid source id was accepted"),
        Err(error) => error,
    };
    assert!(
        error.starts_with("source id `has space` is not valid"),
        "{error}"
    );
}

#[test]
fn another_source_type_is_refused() {
    let mut docker = definition(json!({"socket_path": "/var/run/docker.sock"}));
    docker.source_type = "docker".to_owned();
    let error = match FilesystemSourceFactory::new().build(&docker) {
        Ok(_) => panic!("a docker source was built"),
        Err(error) => error,
    };
    assert_eq!(
        error,
        "source `files-0` has type `docker`; this factory builds `filesystem` sources only"
    );
}
