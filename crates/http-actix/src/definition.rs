//! Request bodies that define a server: read, parsed as JSON and handed to the configuration
//! crate, so that a server created over REST obeys exactly the rules of the configuration file.

use actix_web::http::StatusCode;
use actix_web::web::Bytes;
use mcpgw_config::ParseOptions;
use mcpgw_core::{ServerId, ServerOrigin, ServerSpec};
use serde_json::{Map, Value};

use crate::error::{ApiError, bounded_for_message, names};

const ID_FIELD: &str = "mcp_server_id";

/// Turns the outcome of actix's body extractor into bytes or an envelope error. The body is
/// read whatever its `Content-Type` says, so `curl -d` works.
pub(crate) fn body_bytes(
    body: Result<Bytes, actix_web::Error>,
    limit_bytes: usize,
) -> Result<Bytes, ApiError> {
    body.map_err(|error| {
        if error.as_response_error().status_code() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::payload_too_large(limit_bytes)
        } else if let Some(timeout) = error
            .as_error::<actix_web::error::PayloadError>()
            .filter(|payload| crate::limits::is_body_timeout(payload))
        {
            ApiError::body_timeout(timeout)
        } else {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                names::BAD_REQUEST,
                format!("the request body could not be read ({error}); send it again"),
            )
        }
    })
}

/// Parses a body that must be a JSON object with a server's fields.
pub(crate) fn json_object(bytes: &[u8]) -> Result<Map<String, Value>, ApiError> {
    json_object_with(bytes, "the server's fields")
}

/// Parses a body that must be a JSON object; `fields` says what it should hold, for messages
/// ("the group's fields").
pub(crate) fn json_object_with(bytes: &[u8], fields: &str) -> Result<Map<String, Value>, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::validation(format!(
            "the request body is empty; send a JSON object with {fields}"
        )));
    }
    let mut value: Value = serde_json::from_slice(bytes).map_err(|error| {
        ApiError::validation(format!(
            "the request body is not valid JSON: {error}; send a JSON object with {fields}"
        ))
    })?;
    whole_numbers_as_integers(&mut value);
    match value {
        Value::Object(object) => Ok(object),
        other => Err(ApiError::validation(format!(
            "the request body must be a JSON object with {fields}, not {}",
            json_type_name(&other)
        ))),
    }
}

/// JSON has one number type, so `300.0` is the whole number 300, as JSON Schema counts it: a
/// field that takes an integer takes it. (The parser keeps `300.0` as a float, which integer
/// fields would refuse.) A number with a fraction, or beyond 64 bits, stays as it is.
fn whole_numbers_as_integers(value: &mut Value) {
    match value {
        Value::Number(number) if number.is_f64() => {
            if let Some(whole) = number.as_f64().and_then(whole_number) {
                *value = whole;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers_as_integers),
        Value::Object(fields) => fields.values_mut().for_each(whole_numbers_as_integers),
        _ => {}
    }
}

/// `float` as an integer, when it is one that fits in 64 bits.
fn whole_number(float: f64) -> Option<Value> {
    // 2^64 and -2^63, exactly representable as floats.
    const U64_END: f64 = 18_446_744_073_709_551_616.0;
    const I64_START: f64 = -9_223_372_036_854_775_808.0;
    if float.fract() != 0.0 || !float.is_finite() {
        return None;
    }
    if (0.0..U64_END).contains(&float) {
        // Whole and in range, so the conversion is exact.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        return Some(Value::from(float as u64));
    }
    if (I64_START..0.0).contains(&float) {
        #[allow(clippy::cast_possible_truncation)]
        return Some(Value::from(float as i64));
    }
    None
}

pub(crate) fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Takes `mcp_server_id` out of a body: `Ok(None)` when absent, an error when it is not a
/// valid server id.
fn take_id(object: &mut Map<String, Value>) -> Result<Option<ServerId>, ApiError> {
    match object.remove(ID_FIELD) {
        None => Ok(None),
        Some(Value::String(raw)) => ServerId::parse(&raw)
            .map(Some)
            .map_err(|error| ApiError::validation(format!("{ID_FIELD}: {error}"))),
        Some(other) => Err(ApiError::validation(format!(
            "{ID_FIELD}: must be a string, not {}",
            json_type_name(&other)
        ))),
    }
}

/// Groups share the server namespace in the configuration file but have their own API.
fn refuse_groups(object: &Map<String, Value>) -> Result<(), ApiError> {
    if object.get("mode").and_then(Value::as_str) == Some("group") {
        return Err(ApiError::validation(
            "mode: `group` defines a group, not a server; create groups with POST /api/groups",
        ));
    }
    Ok(())
}

/// The rules of the configuration file, applied to the remaining fields; `options` name the
/// registered launch modes.
fn spec_from_fields(
    id: &ServerId,
    fields: Map<String, Value>,
    options: &ParseOptions,
) -> Result<ServerSpec, ApiError> {
    mcpgw_config::server_spec_from_body(
        id.as_str(),
        Value::Object(fields),
        ServerOrigin::Api,
        options,
    )
    .map_err(|errors| {
        let messages: Vec<String> = errors.errors().iter().map(ToString::to_string).collect();
        ApiError::validation(messages.join("; "))
    })
}

/// What a server definition may name beyond the schema (the registered launch modes): the
/// running configuration's rules, or the built-in ones when the gateway has no configuration
/// service.
pub(crate) fn definition_rules(
    gateway: &mcpgw_gateway::Gateway,
) -> std::borrow::Cow<'_, ParseOptions> {
    match gateway.config() {
        Some(config) => std::borrow::Cow::Borrowed(config.parse_options()),
        None => std::borrow::Cow::Owned(ParseOptions::default()),
    }
}

/// Refuses a new server or group `id` that the tool names in effect cannot take: 422 when it
/// contains their separator (the body's `field` is named), 409 with the error name `conflict`
/// when its tools' prefix is another server's or group's. Both name the other party.
pub(crate) fn refuse_tool_name_conflicts(
    gateway: &mcpgw_gateway::Gateway,
    id: &ServerId,
    field: &str,
    conflict: &'static str,
) -> Result<(), ApiError> {
    gateway
        .check_new_owner(id)
        .map_err(|refusal| match refusal {
            mcpgw_config::ToolNameConflict::SeparatorInId { .. } => {
                ApiError::validation(format!("{field}: {refusal}"))
            }
            mcpgw_config::ToolNameConflict::PrefixTaken { .. } => {
                ApiError::new(StatusCode::CONFLICT, conflict, refusal.to_string())
            }
        })
}

/// The body of a create: `mcp_server_id` plus the server's fields.
pub(crate) fn spec_for_create(
    bytes: &[u8],
    options: &ParseOptions,
) -> Result<ServerSpec, ApiError> {
    let mut object = json_object(bytes)?;
    let id = take_id(&mut object)?.ok_or_else(|| {
        ApiError::validation(format!("{ID_FIELD}: is required; name the new server"))
    })?;
    refuse_groups(&object)?;
    spec_from_fields(&id, object, options)
}

/// The body of an update of server `path_id`: `mcp_server_id` may be left out, and when
/// present must name the same server.
pub(crate) fn spec_for_update(
    path_id: &ServerId,
    bytes: &[u8],
    options: &ParseOptions,
) -> Result<ServerSpec, ApiError> {
    let mut object = json_object(bytes)?;
    if let Some(body_id) = take_id(&mut object)?
        && &body_id != path_id
    {
        return Err(ApiError::validation(format!(
            "{ID_FIELD}: `{}` differs from the id in the path `{path_id}`; a server cannot be \
             renamed, create a new one instead",
            bounded_for_message(body_id.as_str())
        )));
    }
    refuse_groups(&object)?;
    spec_from_fields(path_id, object, options)
}

#[cfg(test)]
mod tests {
    use mcpgw_core::LaunchSpec;
    use serde_json::json;

    use super::*;

    /// The 422 message of a create body.
    fn refused(body: &Value) -> String {
        let error =
            spec_for_create(body.to_string().as_bytes(), &ParseOptions::default()).unwrap_err();
        assert_eq!(error.status().as_u16(), 422, "{body}: {error}");
        assert_eq!(error.name(), "ValidationError", "{body}");
        error.message().to_owned()
    }

    fn subprocess(extra: Value) -> Value {
        let mut body = json!({"mcp_server_id": "m", "mode": "subprocess", "command": ["a"]});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    }

    fn docker(extra: Value) -> Value {
        let mut body = json!({"mcp_server_id": "d", "mode": "docker", "image": "repo/img:1"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    }

    #[test]
    fn a_number_in_the_command_is_refused_naming_its_index_not_read_as_text() {
        let message = refused(&json!({
            "mcp_server_id": "m", "mode": "subprocess", "command": ["python3", 7]
        }));
        assert!(
            message.starts_with("command[1]: ") && message.contains("expected a string"),
            "{message}"
        );
        assert!(message.contains("integer `7`"), "{message}");
    }

    #[test]
    fn every_string_field_takes_only_a_string() {
        // Numbers, booleans, nulls, arrays and objects where a string belongs, in every field
        // the configuration file reads as text: (body, the field the message must name).
        let cases = [
            (subprocess(json!({"command": ["a", 1.5]})), "command[1]"),
            (subprocess(json!({"command": [true]})), "command[0]"),
            (subprocess(json!({"command": ["a", null]})), "command[1]"),
            (subprocess(json!({"command": [["a"]]})), "command[0]"),
            (subprocess(json!({"env": {"PORT": 8080}})), "env.PORT"),
            (subprocess(json!({"env": {"DEBUG": false}})), "env.DEBUG"),
            (subprocess(json!({"env": {"X": {"y": "z"}}})), "env.X"),
            (subprocess(json!({"cwd": 5})), "cwd"),
            (subprocess(json!({"description": 5})), "description"),
            (docker(json!({"args": ["serve", 8080]})), "args[1]"),
            (docker(json!({"memory": 512})), "memory"),
            (docker(json!({"cpus": 1.5})), "cpus"),
            (docker(json!({"cpus": true})), "cpus"),
            (docker(json!({"volumes": [3]})), "volumes[0]"),
            (docker(json!({"network": 1})), "network"),
            (docker(json!({"image": 1})), "image"),
            (
                json!({"mcp_server_id": "r", "mode": "remote", "endpoint": "https://h/mcp",
                       "headers": {"X-Count": 3}}),
                "headers.X-Count",
            ),
            (
                json!({"mcp_server_id": "r", "mode": "remote", "endpoint": 443}),
                "endpoint",
            ),
        ];
        for (body, field) in cases {
            let message = refused(&body);
            assert!(
                message.starts_with(&format!("{field}: ")) && message.contains("expected a string"),
                "{body}: {message}"
            );
        }
    }

    #[test]
    fn numbers_booleans_lists_and_objects_take_only_their_own_type() {
        // (body, the field the message must name, what the message says was expected)
        let cases = [
            // A string where a whole number belongs.
            (
                subprocess(json!({"idle_ttl_s": "300"})),
                "idle_ttl_s",
                "whole number",
            ),
            (
                subprocess(json!({"health_check_interval_s": "60"})),
                "health_check_interval_s",
                "whole number",
            ),
            (
                subprocess(json!({"max_consecutive_failures": "3"})),
                "max_consecutive_failures",
                "whole number",
            ),
            // A fraction or a boolean where a whole number belongs.
            (
                subprocess(json!({"idle_ttl_s": 30.5})),
                "idle_ttl_s",
                "whole number",
            ),
            (
                subprocess(json!({"idle_ttl_s": true})),
                "idle_ttl_s",
                "whole number",
            ),
            // A string where a boolean belongs.
            (
                docker(json!({"read_only": "false"})),
                "read_only",
                "a boolean",
            ),
            (docker(json!({"read_only": 0})), "read_only", "a boolean"),
            // An object or a string where a list belongs.
            (
                subprocess(json!({"command": {"0": "a"}})),
                "command",
                "a list",
            ),
            (docker(json!({"args": "serve --port 1"})), "args", "a list"),
            (docker(json!({"volumes": {"a": "b"}})), "volumes", "a list"),
            (
                subprocess(json!({"tools": {"name": "t"}})),
                "tools",
                "a list",
            ),
            // A list or a string where a mapping belongs.
            (subprocess(json!({"env": ["A=1"]})), "env", "a mapping"),
            (
                json!({"mcp_server_id": "r", "mode": "remote", "endpoint": "https://h/mcp",
                       "headers": "Authorization: x"}),
                "headers",
                "a mapping",
            ),
            // A number where the mode's name belongs.
            (
                json!({"mcp_server_id": "m", "mode": 1, "command": ["a"]}),
                "mode",
                "expected",
            ),
        ];
        for (body, field, expected) in cases {
            let message = refused(&body);
            assert!(
                message.starts_with(&format!("{field}: ")) && message.contains(expected),
                "{body}: {message}"
            );
        }
    }

    #[test]
    fn a_whole_number_written_with_a_fraction_is_that_integer() {
        // `300.0` is the number 300 in JSON; `300.5` is not a whole number.
        let spec = spec_for_create(
            subprocess(json!({"idle_ttl_s": 300.0, "max_consecutive_failures": 5e0}))
                .to_string()
                .as_bytes(),
            &ParseOptions::default(),
        )
        .unwrap();
        assert_eq!(spec.idle_ttl.as_secs(), 300);
        assert_eq!(spec.max_consecutive_failures, 5);
        let message = refused(&subprocess(json!({"idle_ttl_s": 300.5})));
        assert!(message.starts_with("idle_ttl_s: "), "{message}");
        // Negative and huge whole numbers stay out of range, and a whole number is still not a
        // string.
        let message = refused(&subprocess(json!({"idle_ttl_s": -1.0})));
        assert!(message.starts_with("idle_ttl_s: "), "{message}");
        let message = refused(&subprocess(json!({"idle_ttl_s": 1e30})));
        assert!(message.starts_with("idle_ttl_s: "), "{message}");
        let message = refused(&subprocess(json!({"command": ["a", 7.0]})));
        assert!(message.starts_with("command[1]: "), "{message}");
    }

    #[test]
    fn an_update_body_is_typed_as_strictly_as_a_create_body() {
        let id = ServerId::parse("m").unwrap();
        let body = json!({"mode": "subprocess", "command": ["a"], "env": {"PORT": 8080}});
        let error = spec_for_update(&id, body.to_string().as_bytes(), &ParseOptions::default())
            .unwrap_err();
        assert_eq!(error.status().as_u16(), 422);
        assert!(error.message().starts_with("env.PORT: "), "{error}");
    }

    #[test]
    fn strings_and_nulls_for_optional_fields_are_accepted() {
        // Well-typed values pass as they are; `null` for an optional field means "absent".
        let spec = spec_for_create(
            subprocess(json!({"command": ["python3", "7"], "env": {"PORT": "8080"},
                              "description": null, "idle_ttl_s": null}))
            .to_string()
            .as_bytes(),
            &ParseOptions::default(),
        )
        .unwrap();
        let LaunchSpec::Subprocess { command, env, .. } = &spec.launch else {
            panic!("not a subprocess launch: {:?}", spec.launch);
        };
        assert_eq!(command, &["python3", "7"]);
        assert_eq!(env["PORT"], "8080");
        assert_eq!(spec.description, None);
        let spec = spec_for_create(
            docker(json!({"cpus": "1.5", "memory": "512m"}))
                .to_string()
                .as_bytes(),
            &ParseOptions::default(),
        )
        .unwrap();
        let LaunchSpec::Docker { cpus, memory, .. } = &spec.launch else {
            panic!("not a docker launch: {:?}", spec.launch);
        };
        assert_eq!(
            (cpus.as_deref(), memory.as_deref()),
            (Some("1.5"), Some("512m"))
        );
    }
}
