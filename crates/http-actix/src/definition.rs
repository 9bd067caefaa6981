//! Request bodies that define a server: read, parsed as JSON and handed to the configuration
//! crate, so that a server created over REST obeys exactly the rules of the configuration file.

use actix_web::http::StatusCode;
use actix_web::web::Bytes;
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
    let value: Value = serde_json::from_slice(bytes).map_err(|error| {
        ApiError::validation(format!(
            "the request body is not valid JSON: {error}; send a JSON object with {fields}"
        ))
    })?;
    match value {
        Value::Object(object) => Ok(object),
        other => Err(ApiError::validation(format!(
            "the request body must be a JSON object with {fields}, not {}",
            json_type_name(&other)
        ))),
    }
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

/// The rules of the configuration file, applied to the remaining fields.
fn spec_from_fields(id: &ServerId, fields: Map<String, Value>) -> Result<ServerSpec, ApiError> {
    mcpgw_config::server_spec_from_json(id.as_str(), Value::Object(fields), ServerOrigin::Api)
        .map_err(|errors| {
            let messages: Vec<String> = errors.errors().iter().map(ToString::to_string).collect();
            ApiError::validation(messages.join("; "))
        })
}

/// The body of a create: `mcp_server_id` plus the server's fields.
pub(crate) fn spec_for_create(bytes: &[u8]) -> Result<ServerSpec, ApiError> {
    let mut object = json_object(bytes)?;
    let id = take_id(&mut object)?.ok_or_else(|| {
        ApiError::validation(format!("{ID_FIELD}: is required; name the new server"))
    })?;
    refuse_groups(&object)?;
    spec_from_fields(&id, object)
}

/// The body of an update of server `path_id`: `mcp_server_id` may be left out, and when
/// present must name the same server.
pub(crate) fn spec_for_update(path_id: &ServerId, bytes: &[u8]) -> Result<ServerSpec, ApiError> {
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
    spec_from_fields(path_id, object)
}
