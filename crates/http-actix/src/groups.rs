//! `/api/groups`: load-balanced groups of MCP servers over REST.
//!
//! Bodies are judged by the configuration crate's rules for `mode: group` entries, so that a
//! group built over REST and one declared in the file obey the same checks (strategy names,
//! weights, members listed once, never the group itself). Whether members exist, id clashes with
//! servers, and rotation are the group service's business; this module only turns its answers
//! and errors into the API's shapes.

use std::sync::Arc;

use actix_web::HttpResponse;
use actix_web::web::{self, Bytes};
use mcpgw_config::{ConfigErrors, GroupDefinition};
use mcpgw_core::{ServerId, ServerOrigin};
use mcpgw_gateway::groups_domain::{GroupError, GroupSpec, GroupStrategy, MemberSpec};
use mcpgw_gateway::{GroupService, GroupServiceError, GroupUpdate};
use serde_json::{Map, Value, json};

use crate::definition::{body_bytes, json_object_with, json_type_name, refuse_tool_name_conflicts};
use crate::dto::{
    AddGroupMemberRequest, CreateGroupRequest, GroupCreated, GroupDeleted, GroupDetails, GroupList,
    UpdateGroupRequest,
};
use crate::error::{ApiError, ErrorEnvelope, bounded_for_message, names};
use crate::state::ApiState;

const GROUP_ID_FIELD: &str = "group_id";
const GROUP_FIELDS: &str = "the group's fields";
const MEMBER_FIELDS: &str = "`member_id`, and optionally `weight` and `priority`";

/// The group service, or the 404 of a gateway composed without one.
fn service(state: &ApiState) -> Result<&Arc<GroupService>, ApiError> {
    state
        .gateway()
        .groups()
        .ok_or_else(ApiError::groups_not_enabled)
}

/// A group id from the path. A string that is not a valid id cannot name a group.
fn path_group_id(raw: &str) -> Result<ServerId, ApiError> {
    ServerId::parse(raw).map_err(|_| ApiError::group_not_found(raw))
}

/// The configuration crate's errors as one 422 message; `rename` rewrites each key path
/// (the member-add body calls `members[0].id` simply `member_id`).
fn validation_error(errors: &ConfigErrors, rename: impl Fn(&str) -> String) -> ApiError {
    let messages: Vec<String> = errors
        .errors()
        .iter()
        .map(|error| {
            let path = rename(&error.path);
            if path.is_empty() {
                error.message.clone()
            } else {
                format!("{path}: {}", error.message)
            }
        })
        .collect();
    ApiError::validation(messages.join("; "))
}

/// Takes `group_id` out of a body: `Ok(None)` when absent, an error when it is not a valid id.
fn take_group_id(object: &mut Map<String, Value>) -> Result<Option<ServerId>, ApiError> {
    match object.remove(GROUP_ID_FIELD) {
        None => Ok(None),
        Some(Value::String(raw)) => ServerId::parse(&raw).map(Some).map_err(|error| {
            ApiError::validation(format!(
                "{GROUP_ID_FIELD}: {error}; ids match ^[A-Za-z0-9_-]{{1,64}}$ without `__`"
            ))
        }),
        Some(other) => Err(ApiError::validation(format!(
            "{GROUP_ID_FIELD}: must be a string, not {}",
            json_type_name(&other)
        ))),
    }
}

/// A group's mode is implied; any other mode is a server definition sent to the wrong place.
fn refuse_other_modes(fields: &Map<String, Value>) -> Result<(), ApiError> {
    match fields.get("mode") {
        None => Ok(()),
        Some(Value::String(mode)) if mode == "group" => Ok(()),
        Some(Value::String(mode)) => Err(ApiError::validation(format!(
            "mode: `{}` defines a server, not a group; leave `mode` out here, or create servers \
             with POST /api/mcp_servers",
            bounded_for_message(mode)
        ))),
        Some(other) => Err(ApiError::validation(format!(
            "mode: must be the string `group` or left out, not {}",
            json_type_name(other)
        ))),
    }
}

/// Member ids must be valid server ids. (The file's member references are checked against the
/// file's servers; here they are checked for their form, and the group service checks that
/// they are registered.)
fn check_member_ids(fields: &Map<String, Value>) -> Result<(), ApiError> {
    let Some(Value::Array(members)) = fields.get("members") else {
        return Ok(());
    };
    for (index, member) in members.iter().enumerate() {
        for key in ["id", "member_id"] {
            if let Some(Value::String(raw)) = member.get(key)
                && let Err(error) = ServerId::parse(raw)
            {
                return Err(ApiError::validation(format!(
                    "members[{index}].{key}: {error}; ids match ^[A-Za-z0-9_-]{{1,64}}$ without `__`"
                )));
            }
        }
    }
    Ok(())
}

/// The file's rules applied to a group's fields.
fn definition_from_fields(
    id: &ServerId,
    fields: Map<String, Value>,
) -> Result<GroupDefinition, ApiError> {
    refuse_other_modes(&fields)?;
    check_member_ids(&fields)?;
    mcpgw_config::group_definition_from_json(id.as_str(), Value::Object(fields))
        .map_err(|errors| validation_error(&errors, str::to_owned))
}

fn strategy_of(definition: &GroupDefinition) -> Result<GroupStrategy, ApiError> {
    // The configuration crate and the groups domain name the strategies alike.
    GroupStrategy::parse(definition.strategy.as_str())
        .map_err(|error| ApiError::from(GroupServiceError::Domain(error)))
}

fn members_of(definition: &GroupDefinition) -> Vec<MemberSpec> {
    definition
        .members
        .iter()
        .map(|member| {
            MemberSpec::new(member.id.clone())
                .with_weight(member.weight)
                .with_priority(member.priority)
        })
        .collect()
}

/// `min_healthy` is at least 1, and a group listed with its members must be able to reach it
/// with them. A group created (or emptied) without members may name the count it will need once
/// they are added. (The configuration file only warns about such a group; a request is refused.)
fn check_min_healthy(id: &ServerId, min_healthy: u32, members: usize) -> Result<(), ApiError> {
    if min_healthy == 0 {
        return Err(GroupServiceError::Domain(GroupError::MinHealthyZero(id.clone())).into());
    }
    if members > 0 && usize::try_from(min_healthy).is_ok_and(|needed| needed > members) {
        return Err(
            GroupServiceError::Domain(GroupError::MinHealthyAboveMembers {
                group: id.clone(),
                min_healthy,
                members,
            })
            .into(),
        );
    }
    Ok(())
}

/// The body of a create: `group_id` plus the group's fields.
pub(crate) fn spec_for_create(bytes: &[u8]) -> Result<GroupSpec, ApiError> {
    let mut object = json_object_with(bytes, GROUP_FIELDS)?;
    let id = take_group_id(&mut object)?.ok_or_else(|| {
        ApiError::validation(format!("{GROUP_ID_FIELD}: is required; name the new group"))
    })?;
    let definition = definition_from_fields(&id, object)?;
    let members = members_of(&definition);
    check_min_healthy(&id, definition.min_healthy, members.len())?;
    Ok(GroupSpec {
        strategy: strategy_of(&definition)?,
        min_healthy: definition.min_healthy,
        description: definition.description,
        members,
        id,
    })
}

/// The body of an update of group `path_id`: only the fields present change; `group_id` may be
/// left out and must name the same group when present. `description: null` clears the
/// description; a `null` anywhere else keeps the current value.
pub(crate) fn update_from_body(path_id: &ServerId, bytes: &[u8]) -> Result<GroupUpdate, ApiError> {
    let mut object = json_object_with(bytes, GROUP_FIELDS)?;
    if let Some(body_id) = take_group_id(&mut object)?
        && &body_id != path_id
    {
        return Err(ApiError::validation(format!(
            "{GROUP_ID_FIELD}: `{}` differs from the id in the path `{path_id}`; a group cannot \
             be renamed, create a new one instead",
            bounded_for_message(body_id.as_str())
        )));
    }
    let given = |key: &str| object.get(key).is_some_and(|value| !value.is_null());
    let strategy_given = given("strategy");
    let min_healthy_given = given("min_healthy");
    let members_given = given("members");
    let description_given = object.contains_key("description");
    let definition = definition_from_fields(path_id, object)?;
    let members = members_given.then(|| members_of(&definition));
    if min_healthy_given {
        // Without a new member list, the group service judges the value against the
        // current members.
        let members = members.as_ref().map_or(0, Vec::len);
        check_min_healthy(path_id, definition.min_healthy, members)?;
    }
    Ok(GroupUpdate {
        strategy: if strategy_given {
            Some(strategy_of(&definition)?)
        } else {
            None
        },
        min_healthy: min_healthy_given.then_some(definition.min_healthy),
        description: description_given.then_some(definition.description),
        members,
    })
}

/// The body of a member add: `member_id` (or `id`), `weight`, `priority`, judged as a member
/// entry of a group in the file.
pub(crate) fn member_from_body(group: &ServerId, bytes: &[u8]) -> Result<MemberSpec, ApiError> {
    let mut object = json_object_with(bytes, MEMBER_FIELDS)?;
    if !object.contains_key("member_id") && !object.contains_key("id") {
        return Err(ApiError::validation(
            "member_id: is required; name a registered mcp server",
        ));
    }
    // `member_id` is the REST body's name for it; the file's member entries call it `id`.
    if let Some(id) = object.remove("member_id") {
        if object.contains_key("id") {
            return Err(ApiError::validation(
                "member_id: give either `member_id` or `id`, not both",
            ));
        }
        object.insert("id".to_owned(), id);
    }
    if let Some(Value::String(raw)) = object.get("id")
        && let Err(error) = ServerId::parse(raw)
    {
        return Err(ApiError::validation(format!(
            "member_id: {error}; ids match ^[A-Za-z0-9_-]{{1,64}}$ without `__`"
        )));
    }
    let definition = mcpgw_config::group_definition_from_json(
        group.as_str(),
        json!({ "members": [Value::Object(object)] }),
    )
    .map_err(|errors| {
        validation_error(&errors, |path| {
            let inside = path
                .strip_prefix("members[0]")
                .map_or(path, |rest| rest.trim_start_matches('.'));
            if inside == "id" {
                "member_id".to_owned()
            } else {
                inside.to_owned()
            }
        })
    })?;
    members_of(&definition)
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::validation("member_id: is required; name a registered mcp server"))
}

/// List groups with their members.
#[utoipa::path(
    get,
    path = "/api/groups",
    tag = "groups",
    operation_id = "list_groups",
    responses(
        (status = 200, description = "Every group, sorted by id", body = GroupList),
        (status = 404, description = "Groups are not enabled in this gateway (NotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn list_groups(
    state: web::Data<ApiState>,
) -> Result<web::Json<GroupList>, ApiError> {
    let groups = service(&state)?.list();
    Ok(web::Json(GroupList {
        groups: groups.iter().map(GroupDetails::from).collect(),
    }))
}

/// Create a group.
#[utoipa::path(
    post,
    path = "/api/groups",
    tag = "groups",
    operation_id = "create_group",
    request_body(content = CreateGroupRequest, content_type = "application/json",
        description = "`group_id` plus the fields of a `mode: group` entry of the configuration \
                       file. The body is parsed as JSON whatever its Content-Type says."),
    responses(
        (status = 201, description = "Created; the new group's details", body = GroupCreated),
        (status = 404, description = "A member is not a registered server (McpServerNotFoundError), \
            or groups are not enabled (NotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "A group or a server with this id exists, or the id's tool name prefix is another server's or group's (GroupAlreadyExistsError)", body = ErrorEnvelope),
        (status = 413, description = "The body is larger than the configured limit", body = ErrorEnvelope),
        (status = 422, description = "Malformed JSON, a missing or invalid id (one with the tool name \
            separator too), an unknown strategy, a \
            wrong field type, a weight of 0, a member listed twice or the group itself as a member, \
            `min_healthy` of 0 or above the number of members given (ValidationError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn create_group(
    state: web::Data<ApiState>,
    body: Result<Bytes, actix_web::Error>,
) -> Result<HttpResponse, ApiError> {
    let groups = service(&state)?;
    let bytes = body_bytes(body, state.settings().max_body_bytes)?;
    let spec = spec_for_create(&bytes)?;
    refuse_tool_name_conflicts(
        state.gateway(),
        &spec.id,
        GROUP_ID_FIELD,
        names::GROUP_ALREADY_EXISTS,
    )?;
    let view = groups.create(spec, ServerOrigin::Api).await?;
    Ok(HttpResponse::Created().json(GroupCreated {
        group: GroupDetails::from(&view),
        created: true,
    }))
}

/// Details of one group: strategy, state and every member with its server state and rotation.
#[utoipa::path(
    get,
    path = "/api/groups/{id}",
    tag = "groups",
    operation_id = "get_group",
    params(("id" = crate::dto::McpServerId, Path, description = "The group's id")),
    responses(
        (status = 200, description = "The group", body = GroupDetails),
        (status = 404, description = "No such group (GroupNotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn get_group(
    state: web::Data<ApiState>,
    id: web::Path<String>,
) -> Result<web::Json<GroupDetails>, ApiError> {
    let groups = service(&state)?;
    let id = path_group_id(&id)?;
    Ok(web::Json(GroupDetails::from(&groups.get(&id)?)))
}

/// Change a group created over the API: only the fields in the body change.
#[utoipa::path(
    put,
    path = "/api/groups/{id}",
    tag = "groups",
    operation_id = "update_group",
    params(("id" = crate::dto::McpServerId, Path, description = "The group's id")),
    request_body(content = UpdateGroupRequest, content_type = "application/json",
        description = "Any of `strategy`, `min_healthy`, `description`, `members` (which replaces \
                       the member list); absent fields keep their value."),
    responses(
        (status = 200, description = "The updated group", body = GroupDetails),
        (status = 404, description = "No such group (GroupNotFoundError), or a member is not a \
            registered server (McpServerNotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "The group is declared in the configuration file (ConflictError)", body = ErrorEnvelope),
        (status = 413, description = "The body is larger than the configured limit", body = ErrorEnvelope),
        (status = 422, description = "Malformed JSON, a wrong field, a body id that differs from the \
            path, or `min_healthy` above the number of members (ValidationError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn update_group(
    state: web::Data<ApiState>,
    id: web::Path<String>,
    body: Result<Bytes, actix_web::Error>,
) -> Result<web::Json<GroupDetails>, ApiError> {
    let groups = service(&state)?;
    let id = path_group_id(&id)?;
    // An unknown group is reported as such before its body is judged.
    groups.get(&id)?;
    let bytes = body_bytes(body, state.settings().max_body_bytes)?;
    let update = update_from_body(&id, &bytes)?;
    Ok(web::Json(GroupDetails::from(
        &groups.update(&id, update).await?,
    )))
}

/// Delete a group created over the API. Its member servers stay registered.
#[utoipa::path(
    delete,
    path = "/api/groups/{id}",
    tag = "groups",
    operation_id = "delete_group",
    params(("id" = crate::dto::McpServerId, Path, description = "The group's id")),
    responses(
        (status = 200, description = "Deleted", body = GroupDeleted),
        (status = 404, description = "No such group (GroupNotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "The group is declared in the configuration file (ConflictError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn delete_group(
    state: web::Data<ApiState>,
    id: web::Path<String>,
) -> Result<web::Json<GroupDeleted>, ApiError> {
    let groups = service(&state)?;
    let id = path_group_id(&id)?;
    groups.delete(&id).await?;
    Ok(web::Json(GroupDeleted {
        group_id: id.to_string(),
        deleted: true,
    }))
}

/// Re-read every member's health, put the healthy ones back in rotation and restart the
/// strategy from its beginning. Allowed on groups of the configuration file too.
#[utoipa::path(
    post,
    path = "/api/groups/{id}/rebalance",
    tag = "groups",
    operation_id = "rebalance_group",
    params(("id" = crate::dto::McpServerId, Path, description = "The group's id")),
    responses(
        (status = 200, description = "The group after the rebalance", body = GroupDetails),
        (status = 404, description = "No such group (GroupNotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn rebalance_group(
    state: web::Data<ApiState>,
    id: web::Path<String>,
) -> Result<web::Json<GroupDetails>, ApiError> {
    let groups = service(&state)?;
    let id = path_group_id(&id)?;
    Ok(web::Json(GroupDetails::from(&groups.rebalance(&id)?)))
}

/// Add a registered server to a group created over the API.
#[utoipa::path(
    post,
    path = "/api/groups/{id}/members",
    tag = "groups",
    operation_id = "add_group_member",
    params(("id" = crate::dto::McpServerId, Path, description = "The group's id")),
    request_body(content = AddGroupMemberRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "Added; the group with its new member", body = GroupDetails),
        (status = 404, description = "No such group (GroupNotFoundError), or the member is not a \
            registered server (McpServerNotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "The server is already a member (GroupMemberAlreadyExistsError), \
            or the group is declared in the configuration file (ConflictError)", body = ErrorEnvelope),
        (status = 413, description = "The body is larger than the configured limit", body = ErrorEnvelope),
        (status = 422, description = "Malformed JSON, a missing `member_id`, a wrong field type, a \
            weight of 0, or the group itself as its member (ValidationError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn add_member(
    state: web::Data<ApiState>,
    id: web::Path<String>,
    body: Result<Bytes, actix_web::Error>,
) -> Result<HttpResponse, ApiError> {
    let groups = service(&state)?;
    let id = path_group_id(&id)?;
    // An unknown group is reported as such before its body is judged.
    groups.get(&id)?;
    let bytes = body_bytes(body, state.settings().max_body_bytes)?;
    let member = member_from_body(&id, &bytes)?;
    let view = groups.add_member(&id, member).await?;
    Ok(HttpResponse::Created().json(GroupDetails::from(&view)))
}

/// Remove a member from a group created over the API. The server stays registered.
#[utoipa::path(
    delete,
    path = "/api/groups/{id}/members/{member_id}",
    tag = "groups",
    operation_id = "remove_group_member",
    params(
        ("id" = crate::dto::McpServerId, Path, description = "The group's id"),
        ("member_id" = crate::dto::McpServerId, Path, description = "The member server's id"),
    ),
    responses(
        (status = 200, description = "Removed; the group without the member", body = GroupDetails),
        (status = 404, description = "No such group (GroupNotFoundError) or no such member \
            (GroupMemberNotFoundError)", body = ErrorEnvelope),
        (status = 409, description = "The group is declared in the configuration file (ConflictError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn remove_member(
    state: web::Data<ApiState>,
    path: web::Path<(String, String)>,
) -> Result<web::Json<GroupDetails>, ApiError> {
    let groups = service(&state)?;
    let (raw_group, raw_member) = path.into_inner();
    let id = path_group_id(&raw_group)?;
    // An unknown group is reported as such, whatever the member id says.
    groups.get(&id)?;
    let member = ServerId::parse(&raw_member)
        .map_err(|_| ApiError::group_member_not_found(id.as_str(), &raw_member))?;
    Ok(web::Json(GroupDetails::from(
        &groups.remove_member(&id, &member).await?,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(raw: &str) -> ServerId {
        ServerId::parse(raw).unwrap()
    }

    fn refused(result: Result<impl std::fmt::Debug, ApiError>) -> String {
        let error = result.unwrap_err();
        assert_eq!(error.status().as_u16(), 422, "{error}");
        assert_eq!(error.name(), "ValidationError");
        error.message().to_owned()
    }

    #[test]
    fn a_create_body_becomes_a_spec_with_the_file_defaults() {
        let spec = spec_for_create(br#"{"group_id": "pool"}"#).unwrap();
        assert_eq!(
            spec,
            GroupSpec {
                id: id("pool"),
                description: None,
                strategy: GroupStrategy::RoundRobin,
                min_healthy: 1,
                members: vec![],
            }
        );
        let spec = spec_for_create(
            br#"{"group_id": "pool", "strategy": "weighted_round_robin", "min_healthy": 2,
                 "description": "two maths", "mode": "group",
                 "members": [{"id": "a", "weight": 3}, {"member_id": "b", "priority": 4}]}"#,
        )
        .unwrap();
        assert_eq!(spec.strategy, GroupStrategy::WeightedRoundRobin);
        assert_eq!(spec.min_healthy, 2);
        assert_eq!(spec.description.as_deref(), Some("two maths"));
        assert_eq!(
            spec.members,
            [
                MemberSpec::new(id("a")).with_weight(3),
                MemberSpec::new(id("b")).with_priority(4)
            ]
        );
    }

    #[test]
    fn every_strategy_name_is_accepted() {
        for strategy in GroupStrategy::ALL {
            let body = json!({"group_id": "g", "strategy": strategy.as_str()}).to_string();
            assert_eq!(spec_for_create(body.as_bytes()).unwrap().strategy, strategy);
        }
    }

    #[test]
    fn bad_create_bodies_are_validation_errors_that_name_the_field() {
        let cases: &[(&str, &str)] = &[
            ("", "the request body is empty"),
            ("{\"group_id\": ", "not valid JSON"),
            ("[1, 2]", "must be a JSON object"),
            (r#"{"strategy": "round_robin"}"#, "group_id: is required"),
            (r#"{"group_id": 7}"#, "group_id: must be a string"),
            (r#"{"group_id": "a__b"}"#, "group_id: "),
            (r#"{"group_id": "has space"}"#, "group_id: "),
            (r#"{"group_id": "g", "strategy": "fastest"}"#, "strategy"),
            (r#"{"group_id": "g", "strategy": 3}"#, "strategy"),
            (r#"{"group_id": "g", "min_healthy": "two"}"#, "min_healthy"),
            (r#"{"group_id": "g", "min_healthy": -1}"#, "min_healthy"),
            (r#"{"group_id": "g", "min_healthy": 0}"#, "min_healthy"),
            (r#"{"group_id": "g", "members": "a"}"#, "members"),
            (
                r#"{"group_id": "g", "members": [{"id": "a", "weight": 0}]}"#,
                "members[0].weight",
            ),
            (
                r#"{"group_id": "g", "members": [{"id": "a", "weight": "3"}]}"#,
                "members[0].weight",
            ),
            (
                r#"{"group_id": "g", "members": [{"id": "a"}, {"id": "a"}]}"#,
                "listed twice",
            ),
            (
                r#"{"group_id": "g", "members": [{"id": "g"}]}"#,
                "cannot be a member of itself",
            ),
            (r#"{"group_id": "g", "stratgy": "random"}"#, "strategy"),
            (r#"{"group_id": "g", "command": ["x"]}"#, "command"),
            (
                r#"{"group_id": "g", "mode": "subprocess"}"#,
                "mode: `subprocess` defines a server",
            ),
            (
                r#"{"group_id": "g", "mode": 1}"#,
                "mode: must be the string",
            ),
            (
                r#"{"group_id": "g", "members": [{"id": "a__b"}]}"#,
                "members[0].id: id `a__b` must not contain `__`",
            ),
            (
                r#"{"group_id": "g", "members": [{"member_id": "x y"}]}"#,
                "members[0].member_id: id `x y`",
            ),
            (
                r#"{"group_id": "g", "min_healthy": 3, "members": [{"id": "a"}, {"id": "b"}]}"#,
                "min_healthy 3 is larger than the 2 member(s)",
            ),
        ];
        for (body, expected) in cases {
            let message = refused(spec_for_create(body.as_bytes()));
            assert!(message.contains(expected), "{body}: {message}");
        }
    }

    #[test]
    fn a_group_created_without_members_may_ask_for_more_than_one() {
        let spec = spec_for_create(br#"{"group_id": "g", "min_healthy": 2}"#).unwrap();
        assert_eq!(spec.min_healthy, 2);
        assert!(spec.members.is_empty());
    }

    #[test]
    fn an_update_changes_only_what_the_body_names() {
        let pool = id("pool");
        assert_eq!(
            update_from_body(&pool, b"{}").unwrap(),
            GroupUpdate::default()
        );
        assert_eq!(
            update_from_body(&pool, br#"{"group_id": "pool", "min_healthy": 2}"#).unwrap(),
            GroupUpdate {
                min_healthy: Some(2),
                ..GroupUpdate::default()
            }
        );
        assert_eq!(
            update_from_body(&pool, br#"{"strategy": "priority", "description": null}"#).unwrap(),
            GroupUpdate {
                strategy: Some(GroupStrategy::Priority),
                description: Some(None),
                ..GroupUpdate::default()
            }
        );
        assert_eq!(
            update_from_body(
                &pool,
                br#"{"description": "new", "members": [{"member_id": "a", "weight": 2}]}"#
            )
            .unwrap(),
            GroupUpdate {
                description: Some(Some("new".to_owned())),
                members: Some(vec![MemberSpec::new(id("a")).with_weight(2)]),
                ..GroupUpdate::default()
            }
        );
        // `members: []` empties the group.
        assert_eq!(
            update_from_body(&pool, br#"{"members": []}"#)
                .unwrap()
                .members,
            Some(vec![])
        );
    }

    #[test]
    fn bad_update_bodies_are_validation_errors() {
        let pool = id("pool");
        for (body, expected) in [
            (
                r#"{"group_id": "other"}"#,
                "differs from the id in the path",
            ),
            (r#"{"strategy": "nope"}"#, "strategy"),
            (r#"{"min_healthy": true}"#, "min_healthy"),
            (r#"{"min_healthy": 0}"#, "min_healthy"),
            (
                r#"{"min_healthy": 2, "members": [{"id": "a"}]}"#,
                "min_healthy 2 is larger than the 1 member(s)",
            ),
            (r#"{"idle_ttl_s": 5}"#, "idle_ttl_s"),
            ("null", "must be a JSON object"),
        ] {
            let message = refused(update_from_body(&pool, body.as_bytes()));
            assert!(message.contains(expected), "{body}: {message}");
        }
    }

    #[test]
    fn a_member_body_takes_member_id_or_id_with_defaults() {
        let pool = id("pool");
        assert_eq!(
            member_from_body(&pool, br#"{"member_id": "a", "weight": 3, "priority": 1}"#).unwrap(),
            MemberSpec::new(id("a")).with_weight(3).with_priority(1)
        );
        assert_eq!(
            member_from_body(&pool, br#"{"id": "b"}"#).unwrap(),
            MemberSpec::new(id("b"))
        );
    }

    #[test]
    fn bad_member_bodies_name_the_field_as_the_request_calls_it() {
        let pool = id("pool");
        for (body, expected) in [
            ("{}", "member_id: is required"),
            (r#"{"weight": 2}"#, "member_id: is required"),
            (r#"{"member_id": "a", "id": "a"}"#, "not both"),
            (r#"{"member_id": 5}"#, "member_id"),
            (
                r#"{"member_id": "a__b"}"#,
                "member_id: id `a__b` must not contain `__`",
            ),
            (r#"{"id": "x/y"}"#, "member_id: id `x/y`"),
            (
                r#"{"member_id": "a", "weight": 0}"#,
                "weight: must be at least 1",
            ),
            (r#"{"member_id": "a", "weight": "heavy"}"#, "weight"),
            (r#"{"member_id": "a", "priority": -2}"#, "priority"),
            (r#"{"member_id": "a", "wieght": 2}"#, "wieght"),
            (r#"{"member_id": "pool"}"#, "cannot be a member of itself"),
            ("not json", "not valid JSON"),
            ("\"a\"", "must be a JSON object"),
        ] {
            let message = refused(member_from_body(&pool, body.as_bytes()));
            assert!(message.contains(expected), "{body}: {message}");
            assert!(!message.contains("members[0]"), "{body}: {message}");
        }
    }
}
