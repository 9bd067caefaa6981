//! A container's `mcp.gateway.*` labels, read as a discovery candidate.
//!
//! A container engine adapter lists containers and hands each one's facts to
//! [`candidate_from_labels`]; the rules of the labels live here, once, so that every engine
//! reads them alike. The candidate's definition is in the configuration file's shape and is not
//! validated here: the registry does that with the configuration file's rules. A label that
//! cannot be read gives a candidate whose definition is the reason, so the operator sees it in
//! quarantine instead of the container silently missing.
//!
//! | label | meaning |
//! |---|---|
//! | `mcp.gateway.enabled` | `true`, `1` or `yes` (any case): the container is a candidate |
//! | `mcp.gateway.name` | the proposed server id; the container's name when absent |
//! | `mcp.gateway.mode` | `stdio` (default): run the image anew with MCP over stdin/stdout; `http`: reach this container over Streamable HTTP |
//! | `mcp.gateway.command` | `stdio`: the arguments after the image, a JSON array of strings or a whitespace-separated string |
//! | `mcp.gateway.port` | `http`: the port the server listens on (required) |
//! | `mcp.gateway.path` | `http`: the endpoint's path, `/mcp` when absent |
//! | `mcp.gateway.description` | the server's description |

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::DiscoveredCandidate;

/// Whether the container is offered to the gateway at all.
pub const ENABLED_LABEL: &str = "mcp.gateway.enabled";
/// The proposed server id.
pub const NAME_LABEL: &str = "mcp.gateway.name";
/// `stdio` or `http`.
pub const MODE_LABEL: &str = "mcp.gateway.mode";
/// The arguments after the image, for `stdio`.
pub const COMMAND_LABEL: &str = "mcp.gateway.command";
/// The port the server listens on inside the container, for `http`.
pub const PORT_LABEL: &str = "mcp.gateway.port";
/// The endpoint's path, for `http`.
pub const PATH_LABEL: &str = "mcp.gateway.path";
/// The server's description.
pub const DESCRIPTION_LABEL: &str = "mcp.gateway.description";

/// The path of an `http` candidate's endpoint when [`PATH_LABEL`] is absent.
pub const DEFAULT_HTTP_PATH: &str = "/mcp";

/// What an engine tells about one container, as far as discovery needs it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerFacts {
    /// The container's id as the engine gives it (64 hex digits for Docker and podman).
    pub id: String,
    /// The container's name; the engine's leading `/` may be left on.
    pub name: String,
    /// The image the container runs, as the engine names it (`localhost/tool:1`).
    pub image: String,
    /// Every label of the container; only the `mcp.gateway.*` ones are read.
    pub labels: BTreeMap<String, String>,
}

/// The candidate `container` stands for, or `None` when it does not carry
/// `mcp.gateway.enabled` with `true`, `1` or `yes`.
///
/// `engine_host` is the engine the container was found on, as `unix:///path`: a `stdio`
/// candidate runs there (its definition's `docker_host`), where its image is known to be.
pub fn candidate_from_labels(
    container: &ContainerFacts,
    engine_host: &str,
) -> Option<DiscoveredCandidate> {
    if !container
        .labels
        .get(ENABLED_LABEL)
        .is_some_and(|value| is_yes(value))
    {
        return None;
    }
    let container_name = container.name.strip_prefix('/').unwrap_or(&container.name);
    let name = label(container, NAME_LABEL)
        .unwrap_or(container_name)
        .to_owned();
    let short_id: String = container.id.chars().take(12).collect();
    let location = format!("container {short_id} ({container_name})");
    Some(DiscoveredCandidate {
        name,
        location,
        definition: definition(container, container_name, engine_host),
    })
}

fn is_yes(value: &str) -> bool {
    let value = value.trim();
    ["true", "1", "yes"]
        .iter()
        .any(|yes| value.eq_ignore_ascii_case(yes))
}

/// The label's value with surrounding blanks removed, `None` when absent or blank: a blank
/// label is read as no label, as `docker run --label key=` is easily left behind by scripts.
fn label<'a>(container: &'a ContainerFacts, key: &str) -> Option<&'a str> {
    container
        .labels
        .get(key)
        .map(|value| value.trim())
        .filter(|value| !value.is_empty())
}

fn definition(
    container: &ContainerFacts,
    container_name: &str,
    engine_host: &str,
) -> Result<Map<String, Value>, String> {
    let mode = label(container, MODE_LABEL).unwrap_or("stdio");
    let mut definition = if mode.eq_ignore_ascii_case("stdio") {
        stdio_definition(container, engine_host)?
    } else if mode.eq_ignore_ascii_case("http") {
        http_definition(container, container_name)?
    } else {
        return Err(format!(
            "label {MODE_LABEL} is `{mode}`; write `stdio` (the default: the gateway runs the \
             image with MCP over stdin and stdout) or `http` (the gateway connects to this \
             container's port)"
        ));
    };
    if let Some(description) = label(container, DESCRIPTION_LABEL) {
        definition.insert("description".to_owned(), Value::from(description));
    }
    Ok(definition)
}

fn stdio_definition(
    container: &ContainerFacts,
    engine_host: &str,
) -> Result<Map<String, Value>, String> {
    let mut definition = Map::new();
    definition.insert("mode".to_owned(), Value::from("docker"));
    definition.insert("image".to_owned(), Value::from(container.image.as_str()));
    definition.insert("docker_host".to_owned(), Value::from(engine_host));
    if let Some(raw) = container.labels.get(COMMAND_LABEL) {
        let args = command_args(raw)?;
        definition.insert("args".to_owned(), Value::from(args));
    }
    Ok(definition)
}

/// The arguments `mcp.gateway.command` gives: a JSON array of strings when it starts with `[`,
/// else the words of the text.
fn command_args(raw: &str) -> Result<Vec<String>, String> {
    let text = raw.trim();
    let args = if text.starts_with('[') {
        serde_json::from_str::<Vec<String>>(text).map_err(|_| {
            format!(
                "label {COMMAND_LABEL} is `{raw}`, which is not a JSON array of strings; write \
                 one such as [\"--flag\", \"value\"], or the arguments separated by spaces"
            )
        })?
    } else {
        text.split_whitespace().map(str::to_owned).collect()
    };
    if args.is_empty() {
        return Err(format!(
            "label {COMMAND_LABEL} is empty; write the arguments that follow the image, as a \
             JSON array of strings or separated by spaces, or remove the label to run the \
             image's own command"
        ));
    }
    Ok(args)
}

fn http_definition(
    container: &ContainerFacts,
    container_name: &str,
) -> Result<Map<String, Value>, String> {
    let port = match label(container, PORT_LABEL) {
        None => {
            return Err(format!(
                "label {PORT_LABEL} is missing; mode http needs the port the server listens on \
                 inside the container, such as {PORT_LABEL}=8080"
            ));
        }
        Some(text) => match text.parse::<u16>() {
            Ok(port) if port > 0 => port,
            _ => {
                return Err(format!(
                    "label {PORT_LABEL} is `{text}`; write a port number from 1 to 65535"
                ));
            }
        },
    };
    let path = label(container, PATH_LABEL).unwrap_or(DEFAULT_HTTP_PATH);
    if !path.starts_with('/') {
        return Err(format!(
            "label {PATH_LABEL} is `{path}`; write a path that starts with `/`, such as \
             {DEFAULT_HTTP_PATH}"
        ));
    }
    let mut definition = Map::new();
    definition.insert("mode".to_owned(), Value::from("remote"));
    definition.insert(
        "endpoint".to_owned(),
        Value::from(format!("http://{container_name}:{port}{path}")),
    );
    Ok(definition)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const HOST: &str = "unix:///run/podman/podman.sock";
    const ID: &str = "3f2a9c1b4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8";

    fn container(labels: &[(&str, &str)]) -> ContainerFacts {
        ContainerFacts {
            id: ID.to_owned(),
            name: "/weather".to_owned(),
            image: "localhost/weather:1".to_owned(),
            labels: labels
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect(),
        }
    }

    fn candidate(labels: &[(&str, &str)]) -> DiscoveredCandidate {
        candidate_from_labels(&container(labels), HOST).expect("an enabled container")
    }

    fn definition_of(labels: &[(&str, &str)]) -> Value {
        Value::Object(candidate(labels).definition.expect("a readable definition"))
    }

    fn reason_of(labels: &[(&str, &str)]) -> String {
        candidate(labels)
            .definition
            .expect_err("a broken label gives a reason")
    }

    #[test]
    fn labels_enabled_accepts_true_one_and_yes_in_any_case() {
        for value in ["true", "TRUE", "True", "1", "yes", "YES", " yes "] {
            assert!(
                candidate_from_labels(&container(&[(ENABLED_LABEL, value)]), HOST).is_some(),
                "{value:?} enables"
            );
        }
    }

    #[test]
    fn labels_other_enabled_values_or_none_are_not_candidates() {
        for value in ["false", "0", "no", "", "enabled", "y"] {
            assert_eq!(
                candidate_from_labels(&container(&[(ENABLED_LABEL, value)]), HOST),
                None,
                "{value:?} does not enable"
            );
        }
        assert_eq!(candidate_from_labels(&container(&[]), HOST), None);
        assert_eq!(
            candidate_from_labels(&container(&[(NAME_LABEL, "weather")]), HOST),
            None,
            "other labels without enabled do not make a candidate"
        );
    }

    #[test]
    fn labels_name_defaults_to_the_container_name_without_its_slash() {
        assert_eq!(candidate(&[(ENABLED_LABEL, "true")]).name, "weather");
        let mut unslashed = container(&[(ENABLED_LABEL, "true")]);
        unslashed.name = "plain".to_owned();
        assert_eq!(
            candidate_from_labels(&unslashed, HOST).unwrap().name,
            "plain"
        );
        assert_eq!(
            candidate(&[(ENABLED_LABEL, "true"), (NAME_LABEL, "   ")]).name,
            "weather",
            "a blank name label reads as none"
        );
    }

    #[test]
    fn labels_name_label_wins_and_is_not_validated_here() {
        assert_eq!(
            candidate(&[(ENABLED_LABEL, "true"), (NAME_LABEL, "forecast")]).name,
            "forecast"
        );
        assert_eq!(
            candidate(&[(ENABLED_LABEL, "true"), (NAME_LABEL, "not an id!")]).name,
            "not an id!",
            "the registry checks the id with the configuration's rules"
        );
    }

    #[test]
    fn labels_location_names_the_short_id_and_the_container() {
        assert_eq!(
            candidate(&[(ENABLED_LABEL, "true")]).location,
            "container 3f2a9c1b4d5e (weather)"
        );
    }

    #[test]
    fn labels_stdio_is_the_default_and_runs_the_image_on_the_same_engine() {
        let expected = json!({
            "mode": "docker",
            "image": "localhost/weather:1",
            "docker_host": HOST,
        });
        assert_eq!(definition_of(&[(ENABLED_LABEL, "true")]), expected);
        assert_eq!(
            definition_of(&[(ENABLED_LABEL, "true"), (MODE_LABEL, "STDIO")]),
            expected
        );
    }

    #[test]
    fn labels_stdio_command_as_a_json_array_keeps_each_argument() {
        assert_eq!(
            definition_of(&[
                (ENABLED_LABEL, "true"),
                (COMMAND_LABEL, r#"["--city", "New York", "-v"]"#),
            ]),
            json!({
                "mode": "docker",
                "image": "localhost/weather:1",
                "docker_host": HOST,
                "args": ["--city", "New York", "-v"],
            })
        );
    }

    #[test]
    fn labels_stdio_command_as_text_splits_on_whitespace() {
        assert_eq!(
            definition_of(&[
                (ENABLED_LABEL, "true"),
                (COMMAND_LABEL, "  serve --stdio\t--verbose "),
            ])["args"],
            json!(["serve", "--stdio", "--verbose"])
        );
    }

    #[test]
    fn labels_stdio_ignores_the_http_labels() {
        assert_eq!(
            definition_of(&[
                (ENABLED_LABEL, "true"),
                (PORT_LABEL, "not a port"),
                (PATH_LABEL, "nope"),
            ]),
            json!({"mode": "docker", "image": "localhost/weather:1", "docker_host": HOST})
        );
    }

    #[test]
    fn labels_broken_command_names_the_label_and_the_forms() {
        for broken in [r#"["--a", 1]"#, "[--a", r#"[["nested"]]"#] {
            let reason = reason_of(&[(ENABLED_LABEL, "true"), (COMMAND_LABEL, broken)]);
            assert!(reason.contains(COMMAND_LABEL), "{reason}");
            assert!(reason.contains("JSON array of strings"), "{reason}");
        }
        for empty in ["", "   ", "[]"] {
            let reason = reason_of(&[(ENABLED_LABEL, "true"), (COMMAND_LABEL, empty)]);
            assert!(reason.contains(COMMAND_LABEL), "{reason}");
            assert!(reason.contains("is empty"), "{reason}");
        }
    }

    #[test]
    fn labels_http_points_at_the_container_port_and_default_path() {
        assert_eq!(
            definition_of(&[
                (ENABLED_LABEL, "true"),
                (MODE_LABEL, "http"),
                (PORT_LABEL, "8080"),
                (NAME_LABEL, "forecast"),
                (COMMAND_LABEL, "ignored in http mode"),
            ]),
            json!({"mode": "remote", "endpoint": "http://weather:8080/mcp"})
        );
    }

    #[test]
    fn labels_http_path_label_sets_the_path() {
        assert_eq!(
            definition_of(&[
                (ENABLED_LABEL, "true"),
                (MODE_LABEL, "HTTP"),
                (PORT_LABEL, "65535"),
                (PATH_LABEL, "/api/mcp"),
            ])["endpoint"],
            json!("http://weather:65535/api/mcp")
        );
    }

    #[test]
    fn labels_http_without_a_port_asks_for_one() {
        let reason = reason_of(&[(ENABLED_LABEL, "true"), (MODE_LABEL, "http")]);
        assert!(reason.contains(PORT_LABEL), "{reason}");
        assert!(reason.contains("missing"), "{reason}");
        assert!(reason.contains("mcp.gateway.port=8080"), "{reason}");
    }

    #[test]
    fn labels_http_with_a_bad_port_names_the_range() {
        for bad in ["0", "65536", "-1", "eighty", "80.5"] {
            let reason = reason_of(&[
                (ENABLED_LABEL, "true"),
                (MODE_LABEL, "http"),
                (PORT_LABEL, bad),
            ]);
            assert!(reason.contains(PORT_LABEL), "{reason}");
            assert!(reason.contains(&format!("`{bad}`")), "{reason}");
            assert!(reason.contains("1 to 65535"), "{reason}");
        }
    }

    #[test]
    fn labels_http_path_without_a_slash_asks_for_one() {
        let reason = reason_of(&[
            (ENABLED_LABEL, "true"),
            (MODE_LABEL, "http"),
            (PORT_LABEL, "8080"),
            (PATH_LABEL, "mcp"),
        ]);
        assert!(reason.contains(PATH_LABEL), "{reason}");
        assert!(reason.contains("starts with `/`"), "{reason}");
    }

    #[test]
    fn labels_unknown_mode_lists_the_known_ones() {
        let reason = reason_of(&[(ENABLED_LABEL, "true"), (MODE_LABEL, "sse")]);
        assert!(reason.contains(MODE_LABEL), "{reason}");
        assert!(reason.contains("`sse`"), "{reason}");
        assert!(
            reason.contains("`stdio`") && reason.contains("`http`"),
            "{reason}"
        );
    }

    #[test]
    fn labels_broken_candidates_keep_their_name_and_location() {
        let broken = candidate(&[
            (ENABLED_LABEL, "yes"),
            (NAME_LABEL, "forecast"),
            (MODE_LABEL, "sse"),
        ]);
        assert_eq!(broken.name, "forecast");
        assert_eq!(broken.location, "container 3f2a9c1b4d5e (weather)");
        assert!(broken.definition.is_err());
    }

    #[test]
    fn labels_description_is_carried_in_both_modes() {
        assert_eq!(
            definition_of(&[(ENABLED_LABEL, "true"), (DESCRIPTION_LABEL, "Forecasts")])["description"],
            json!("Forecasts")
        );
        assert_eq!(
            definition_of(&[
                (ENABLED_LABEL, "true"),
                (MODE_LABEL, "http"),
                (PORT_LABEL, "80"),
                (DESCRIPTION_LABEL, "Forecasts"),
            ])["description"],
            json!("Forecasts")
        );
    }

    #[test]
    fn labels_error_messages_are_lowercase_without_a_trailing_period() {
        for reason in [
            reason_of(&[(ENABLED_LABEL, "true"), (MODE_LABEL, "sse")]),
            reason_of(&[(ENABLED_LABEL, "true"), (MODE_LABEL, "http")]),
            reason_of(&[(ENABLED_LABEL, "true"), (COMMAND_LABEL, "[1]")]),
        ] {
            assert!(reason.starts_with("label "), "{reason}");
            assert!(!reason.ends_with('.'), "{reason}");
        }
    }
}
