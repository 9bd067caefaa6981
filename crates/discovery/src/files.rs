//! A YAML file of server definitions, read as discovery candidates.
//!
//! A definitions file has one of two shapes:
//! - a mapping with the single key `mcp_servers` that holds `id: definition` entries, exactly
//!   like the configuration file's section of that name;
//! - one definition (a mapping with a `mode` key), whose server id is the file's name without
//!   its extension.
//!
//! What cannot be read still becomes a candidate, whose `definition` is the reason, so that a
//! broken file shows up in quarantine instead of vanishing: a file that is not YAML, or has
//! neither shape, is one candidate named after the file; an entry whose definition is not a
//! mapping is a candidate of its own.
//!
//! `${VAR}` references are left as written. A discovered file is data that anyone with write
//! access to a watched directory can drop in, not configuration the operator wrote: expanding
//! it would let such a file read the gateway's environment (its secrets) into a server's
//! arguments or headers. Validation, with the configuration file's rules, is the registry's.

use serde_json::{Map, Number, Value};
use serde_yaml::Value as YamlValue;

use crate::DiscoveredCandidate;

/// The key of the "many definitions" shape, as in the configuration file.
const SERVERS_KEY: &str = "mcp_servers";

/// The candidates that the text of one definitions file describes, in the file's order.
///
/// `location` names the file in candidates and reasons (`file /etc/mcp/a.yaml`); `file_stem`
/// is the file's name without its extension, the server id of a single-definition file and
/// the name of the candidate that carries a whole-file problem.
pub fn candidates_from_yaml(
    location: &str,
    file_stem: &str,
    text: &str,
) -> Vec<DiscoveredCandidate> {
    let candidate =
        |name: &str, definition: Result<Map<String, Value>, String>| DiscoveredCandidate {
            name: name.to_owned(),
            location: location.to_owned(),
            definition,
        };
    let whole_file_problem = |reason: String| vec![candidate(file_stem, Err(reason))];

    let document: YamlValue = match serde_yaml::from_str(text) {
        Ok(document) => document,
        Err(error) => return whole_file_problem(yaml_error_reason(location, &error)),
    };
    let top = match document {
        YamlValue::Mapping(top) => top,
        YamlValue::Null => {
            return whole_file_problem(format!(
                "{location} is empty; write one server definition (a mapping with a `mode` key) \
                 or an `{SERVERS_KEY}` mapping of them"
            ));
        }
        other => {
            return whole_file_problem(format!(
                "{location} holds {}, not a mapping; write one server definition (a mapping with \
                 a `mode` key) or an `{SERVERS_KEY}` mapping of them",
                describe(&other)
            ));
        }
    };

    if let Some(servers) = top.get(SERVERS_KEY) {
        let others: Vec<String> = top
            .keys()
            .filter(|key| key.as_str() != Some(SERVERS_KEY))
            .map(key_text)
            .collect();
        if !others.is_empty() {
            return whole_file_problem(format!(
                "{location} has `{}` beside `{SERVERS_KEY}`; a definitions file holds only \
                 `{SERVERS_KEY}` (or is one definition): move the other keys into the \
                 definitions or remove them",
                others.join("`, `")
            ));
        }
        return match servers {
            // An emptied list defines nothing; that is not an error.
            YamlValue::Null => Vec::new(),
            YamlValue::Mapping(servers) => servers
                .iter()
                .map(|(key, definition)| {
                    let name = match key {
                        YamlValue::String(name) => name.clone(),
                        other => key_text(other),
                    };
                    let definition = if key.is_string() {
                        definition_object(location, &name, definition)
                    } else {
                        Err(format!(
                            "{location} has {} as a server id under `{SERVERS_KEY}`; a server id \
                             is a string of letters, digits, `_` or `-`",
                            describe(key)
                        ))
                    };
                    candidate(&name, definition)
                })
                .collect(),
            other => whole_file_problem(format!(
                "`{SERVERS_KEY}` in {location} holds {}; write it as a mapping of server ids \
                 to definitions",
                describe(other)
            )),
        };
    }

    if top.contains_key("mode") {
        let definition = definition_object(location, file_stem, &YamlValue::Mapping(top));
        return vec![candidate(file_stem, definition)];
    }

    whole_file_problem(format!(
        "{location} is neither a server definition nor a list of them; add a `mode` key to make \
         it one definition named `{file_stem}`, or put the definitions under `{SERVERS_KEY}`"
    ))
}

/// The definition as the JSON object the registry validates, or why it is not one.
fn definition_object(
    location: &str,
    name: &str,
    definition: &YamlValue,
) -> Result<Map<String, Value>, String> {
    let YamlValue::Mapping(entries) = definition else {
        return Err(format!(
            "the definition of `{name}` in {location} is {}, not a mapping; write it as a \
             mapping with a `mode` key",
            describe(definition)
        ));
    };
    mapping_to_object(entries, &mut String::new())
        .map_err(|problem| format!("the definition of `{name}` in {location} {problem}"))
}

/// Converts a YAML value to JSON. `path` is where `value` sits in the definition (`env.HOME`,
/// `args[2]`), for the reason; the error reads after "the definition of `x` in FILE".
fn to_json(value: &YamlValue, path: &mut String) -> Result<Value, String> {
    Ok(match value {
        YamlValue::Null => Value::Null,
        YamlValue::Bool(flag) => Value::Bool(*flag),
        YamlValue::Number(number) => Value::Number(json_number(number).ok_or_else(|| {
            format!(
                "has the number {number} {}, which JSON cannot hold; write a finite number",
                at(path)
            )
        })?),
        YamlValue::String(text) => Value::String(text.clone()),
        YamlValue::Sequence(items) => {
            let mut converted = Vec::with_capacity(items.len());
            for (index, item) in items.iter().enumerate() {
                let length = path.len();
                path.push_str(&format!("[{index}]"));
                converted.push(to_json(item, path)?);
                path.truncate(length);
            }
            Value::Array(converted)
        }
        YamlValue::Mapping(entries) => Value::Object(mapping_to_object(entries, path)?),
        YamlValue::Tagged(tagged) => {
            return Err(format!(
                "uses the YAML tag `{}` {}; tags are not supported, write the plain value",
                tagged.tag,
                at(path)
            ));
        }
    })
}

fn mapping_to_object(
    entries: &serde_yaml::Mapping,
    path: &mut String,
) -> Result<Map<String, Value>, String> {
    let mut object = Map::new();
    for (key, item) in entries {
        let key = match key {
            YamlValue::String(key) => key.clone(),
            // `PORT: 8080` style keys mean their text, as they would in JSON.
            YamlValue::Number(_) | YamlValue::Bool(_) => key_text(key),
            other => {
                return Err(format!(
                    "has {} as a key {}; keys are strings",
                    describe(other),
                    at(path)
                ));
            }
        };
        let length = path.len();
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(&key);
        let converted = to_json(item, path)?;
        path.truncate(length);
        object.insert(key, converted);
    }
    Ok(object)
}

fn at(path: &str) -> String {
    if path.is_empty() {
        "at its top level".to_owned()
    } else {
        format!("at `{path}`")
    }
}

fn json_number(number: &serde_yaml::Number) -> Option<Number> {
    if let Some(unsigned) = number.as_u64() {
        Some(Number::from(unsigned))
    } else if let Some(signed) = number.as_i64() {
        Some(Number::from(signed))
    } else {
        number.as_f64().and_then(Number::from_f64)
    }
}

/// A scalar key as written; anything else in its YAML form, for messages.
fn key_text(key: &YamlValue) -> String {
    match key {
        YamlValue::String(text) => text.clone(),
        YamlValue::Bool(flag) => flag.to_string(),
        YamlValue::Number(number) => number.to_string(),
        YamlValue::Null => "null".to_owned(),
        // JSON's one-line form reads better in a list of names than YAML's block form.
        other => serde_json::to_string(other).unwrap_or_else(|_| describe(other).to_owned()),
    }
}

fn describe(value: &YamlValue) -> &'static str {
    match value {
        YamlValue::Null => "nothing (null)",
        YamlValue::Bool(_) => "a boolean",
        YamlValue::Number(_) => "a number",
        YamlValue::String(_) => "a string",
        YamlValue::Sequence(_) => "a sequence",
        YamlValue::Mapping(_) => "a mapping",
        YamlValue::Tagged(_) => "a tagged value",
    }
}

/// The parser's message, with where it happened in front, when it knows.
fn yaml_error_reason(location: &str, error: &serde_yaml::Error) -> String {
    let mut message = error.to_string();
    let position = error.location().map(|position| {
        let suffix = format!(" at line {} column {}", position.line(), position.column());
        if let Some(start) = message.find(&suffix) {
            message.replace_range(start..start + suffix.len(), "");
        }
        format!(" at line {} column {}", position.line(), position.column())
    });
    format!(
        "{location} is not valid YAML{}: {message}; fix the file",
        position.unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const LOCATION: &str = "file /defs/tools.yaml";

    fn candidates(text: &str) -> Vec<DiscoveredCandidate> {
        candidates_from_yaml(LOCATION, "tools", text)
    }

    fn only(text: &str) -> DiscoveredCandidate {
        let mut found = candidates(text);
        assert_eq!(found.len(), 1, "expected one candidate, got {found:?}");
        found.remove(0)
    }

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(object) => object,
            other => panic!("not an object: {other}"),
        }
    }

    fn reason(candidate: &DiscoveredCandidate) -> &str {
        match &candidate.definition {
            Err(reason) => reason,
            Ok(definition) => panic!("expected a reason, got the definition {definition:?}"),
        }
    }

    #[test]
    fn a_servers_mapping_gives_one_candidate_per_entry_in_file_order() {
        let found = candidates(
            "mcp_servers:\n  \
               zeta: {mode: subprocess, command: [python3, -m, zeta]}\n  \
               alpha:\n    mode: remote\n    endpoint: https://host/mcp\n",
        );
        let names: Vec<&str> = found.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["zeta", "alpha"]);
        assert!(found.iter().all(|c| c.location == LOCATION));
        assert_eq!(
            found[0].definition,
            Ok(object(
                json!({"mode": "subprocess", "command": ["python3", "-m", "zeta"]})
            ))
        );
        assert_eq!(
            found[1].definition,
            Ok(object(
                json!({"mode": "remote", "endpoint": "https://host/mcp"})
            ))
        );
    }

    #[test]
    fn a_single_definition_is_named_after_the_file() {
        let found = only("mode: docker\nimage: repo/img:tag\nargs: [--stdio]\n");
        assert_eq!(found.name, "tools");
        assert_eq!(found.location, LOCATION);
        assert_eq!(
            found.definition,
            Ok(object(
                json!({"mode": "docker", "image": "repo/img:tag", "args": ["--stdio"]})
            ))
        );
    }

    #[test]
    fn values_keep_their_json_types() {
        let found = only(
            "mode: subprocess\ncommand: [srv]\nidle_ttl_s: 300\nread_only: false\n\
             cpus: 1.5\ndescription: ~\nenv: {PORT: 8080, 1: one, true: yes}\noffset: -3\n",
        );
        assert_eq!(
            found.definition,
            Ok(object(json!({
                "mode": "subprocess",
                "command": ["srv"],
                "idle_ttl_s": 300,
                "read_only": false,
                "cpus": 1.5,
                "description": null,
                "env": {"PORT": 8080, "1": "one", "true": "yes"},
                "offset": -3,
            })))
        );
    }

    #[test]
    fn anchors_and_aliases_are_resolved() {
        let found = candidates(
            "mcp_servers:\n  \
               a: &base {mode: subprocess, command: [srv]}\n  \
               b: *base\n",
        );
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].definition, found[1].definition);
    }

    #[test]
    fn variable_references_are_left_as_written() {
        let found = only(
            "mode: remote\nendpoint: https://host/mcp\nheaders: {Authorization: \"Bearer ${TOKEN}\"}\n",
        );
        let definition = found.definition.expect("a definition");
        assert_eq!(
            definition["headers"]["Authorization"],
            json!("Bearer ${TOKEN}")
        );
    }

    #[test]
    fn an_empty_or_null_servers_section_defines_nothing() {
        assert_eq!(candidates("mcp_servers:\n"), Vec::new());
        assert_eq!(candidates("mcp_servers: {}\n"), Vec::new());
    }

    #[test]
    fn invalid_yaml_is_one_candidate_named_after_the_file_with_the_position() {
        let found = only("mcp_servers:\n  a: {mode: subprocess\n  b: [\n");
        assert_eq!(found.name, "tools");
        assert_eq!(found.location, LOCATION);
        let reason = reason(&found);
        assert!(
            reason.starts_with("file /defs/tools.yaml is not valid YAML at line "),
            "{reason}"
        );
        assert!(reason.contains(" column "), "{reason}");
        assert!(reason.ends_with("; fix the file"), "{reason}");
    }

    #[test]
    fn a_repeated_id_is_invalid_yaml() {
        let found = only("mcp_servers:\n  a: {mode: subprocess}\n  a: {mode: remote}\n");
        let reason = reason(&found);
        assert!(reason.contains("not valid YAML at line "), "{reason}");
        assert!(reason.contains("duplicate"), "{reason}");
    }

    #[test]
    fn several_documents_in_one_file_are_refused() {
        let found = only("mode: subprocess\n---\nmode: remote\n");
        assert_eq!(found.name, "tools");
        assert!(
            reason(&found).contains("not valid YAML"),
            "{}",
            reason(&found)
        );
    }

    #[test]
    fn an_empty_file_is_one_candidate_with_a_reason() {
        for text in ["", "# only a comment\n", "~\n"] {
            let found = only(text);
            assert_eq!(found.name, "tools");
            assert!(reason(&found).contains("is empty"), "{}", reason(&found));
        }
    }

    #[test]
    fn a_top_level_that_is_not_a_mapping_is_one_candidate_with_a_reason() {
        for (text, kind) in [
            ("- mode: subprocess\n", "a sequence"),
            ("just words\n", "a string"),
            ("42\n", "a number"),
        ] {
            let found = only(text);
            assert_eq!(found.name, "tools");
            let reason = reason(&found);
            assert!(
                reason.contains(&format!("holds {kind}, not a mapping")),
                "{reason}"
            );
        }
    }

    #[test]
    fn a_mapping_of_neither_shape_is_one_candidate_with_a_reason() {
        let found = only("command: [srv]\nenv: {A: b}\n");
        assert_eq!(found.name, "tools");
        let reason = reason(&found);
        assert!(
            reason.contains("neither a server definition nor a list of them"),
            "{reason}"
        );
        assert!(reason.contains("add a `mode` key"), "{reason}");
    }

    #[test]
    fn keys_beside_the_servers_section_are_refused_by_name() {
        let found = only("mcp_servers:\n  a: {mode: subprocess}\nauth: {enabled: true}\n");
        assert_eq!(found.name, "tools");
        let auth_reason = reason(&found);
        assert!(
            auth_reason.contains("has `auth` beside `mcp_servers`"),
            "{auth_reason}"
        );

        let found = only("mode: subprocess\nmcp_servers: {}\n");
        let mode_reason = reason(&found);
        assert!(mode_reason.contains("has `mode` beside"), "{mode_reason}");
    }

    #[test]
    fn a_servers_section_that_is_not_a_mapping_is_refused() {
        let found = only("mcp_servers: [a, b]\n");
        assert_eq!(found.name, "tools");
        let reason = reason(&found);
        assert!(
            reason.contains("`mcp_servers` in file /defs/tools.yaml holds a sequence"),
            "{reason}"
        );
    }

    #[test]
    fn a_definition_that_is_not_a_mapping_is_a_candidate_with_a_reason() {
        let found = candidates(
            "mcp_servers:\n  good: {mode: subprocess, command: [srv]}\n  \
               listed: [mode, subprocess]\n  word: subprocess\n  blank:\n",
        );
        let names: Vec<&str> = found.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["good", "listed", "word", "blank"]);
        assert!(found[0].definition.is_ok());
        for (candidate, kind) in found[1..]
            .iter()
            .zip(["a sequence", "a string", "nothing (null)"])
        {
            let reason = reason(candidate);
            assert!(
                reason.starts_with(&format!(
                    "the definition of `{}` in file /defs/tools.yaml is {kind}, not a mapping",
                    candidate.name
                )),
                "{reason}"
            );
        }
    }

    #[test]
    fn a_server_id_that_is_not_a_string_is_a_candidate_with_a_reason() {
        let found = candidates("mcp_servers:\n  [a, b]: {mode: subprocess}\n  7: {mode: remote}\n");
        assert_eq!(found.len(), 2);
        assert!(
            reason(&found[0]).contains("has a sequence as a server id"),
            "{}",
            reason(&found[0])
        );
        assert_eq!(found[1].name, "7");
        assert!(
            reason(&found[1]).contains("has a number as a server id"),
            "{}",
            reason(&found[1])
        );
    }

    #[test]
    fn a_tag_inside_a_definition_is_refused_with_its_path() {
        let found = only("mode: subprocess\ncommand: [srv, !secret token]\n");
        let reason = reason(&found);
        assert!(
            reason.starts_with(
                "the definition of `tools` in file /defs/tools.yaml uses the YAML tag `!secret` \
                 at `command[1]`"
            ),
            "{reason}"
        );
    }

    #[test]
    fn a_number_json_cannot_hold_is_refused_with_its_path() {
        let found = only("mode: subprocess\nenv: {RATIO: .nan}\n");
        let reason = reason(&found);
        assert!(reason.contains("at `env.RATIO`"), "{reason}");
        assert!(reason.contains("write a finite number"), "{reason}");
    }

    #[test]
    fn a_key_that_is_not_a_scalar_is_refused_with_its_path() {
        let found = only("mode: subprocess\nenv: {[a]: b}\n");
        let reason = reason(&found);
        assert!(
            reason.contains("has a sequence as a key at `env`; keys are strings"),
            "{reason}"
        );
    }

    #[test]
    fn one_broken_entry_does_not_hide_the_others() {
        let found = candidates(
            "mcp_servers:\n  a: {mode: subprocess, env: {X: !t y}}\n  b: {mode: remote}\n",
        );
        assert_eq!(found.len(), 2);
        assert!(found[0].definition.is_err());
        assert_eq!(found[1].definition, Ok(object(json!({"mode": "remote"}))));
    }
}
