//! Arbitrary bytes as the JSON body of a REST create or update request.
//!
//! The first byte picks the request; the rest is its body. The HTTP adapter reads a body as a
//! JSON object, takes out the id fields, and hands the rest to the domain: a server or group
//! definition to the configuration crate (the rules of the file), a member to the groups
//! domain, keys, roles, assignments, permissions and policies to the authorization domain,
//! discovery settings to the configuration crate's masking. This target runs those public
//! domain entry points with the adapter's field handling reproduced in small (the adapter's
//! own body functions are private to it). Any body may be refused, never with a panic; what is
//! accepted must satisfy the request's own rules.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpgw_authz::{
    NewApiKey, Permission, PermissionGrant, PolicyAddress, Principal, PrincipalPattern,
    RandomnessError, Role, RoleAssignment, RoleBook, SecretSource, ToolAccessPolicy,
};
use mcpgw_core::{ServerId, ServerOrigin, Timestamp};
use mcpgw_groups::{Group, GroupStrategy, MemberSpec, RandomSource};
use serde_json::{Map, Value};

/// Requests with a JSON body, in the order of the selector byte.
#[derive(Debug, Clone, Copy)]
enum Request {
    CreateServer,
    UpdateServer,
    CreateGroup,
    UpdateGroup,
    AddMember,
    CreateKey,
    CreateRole,
    UpdateRole,
    AssignRole,
    CheckPermission,
    SetPolicy,
    CreateDiscoverySource,
    EnableDiscoverySource,
}

const REQUESTS: [Request; 13] = [
    Request::CreateServer,
    Request::UpdateServer,
    Request::CreateGroup,
    Request::UpdateGroup,
    Request::AddMember,
    Request::CreateKey,
    Request::CreateRole,
    Request::UpdateRole,
    Request::AssignRole,
    Request::CheckPermission,
    Request::SetPolicy,
    Request::CreateDiscoverySource,
    Request::EnableDiscoverySource,
];

/// The policy addresses a `PUT /api/auth/policies/{scope}/{target_id}` may name.
const POLICY_ADDRESSES: [(&str, &str); 5] = [
    ("provider", "math"),
    ("mcp_server", "math"),
    ("group", "pool"),
    ("tool", "math__add"),
    ("tool", "bad"),
];

/// The body as the adapter reads it: a JSON object, else a validation error.
fn json_object(bytes: &[u8]) -> Option<Map<String, Value>> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    match serde_json::from_slice::<Value>(bytes).ok()? {
        Value::Object(object) => Some(object),
        _ => None,
    }
}

/// A string field where `null` is absent; `Err` for another type.
fn optional_string(object: &Map<String, Value>, key: &str) -> Result<Option<String>, ()> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(value)) => Ok(Some(value.clone())),
        Some(_) => Err(()),
    }
}

/// A field the API accepts under two names.
fn either_string(object: &Map<String, Value>, first: &str, second: &str) -> Option<String> {
    match (
        optional_string(object, first).ok()?,
        optional_string(object, second).ok()?,
    ) {
        (Some(one), Some(other)) if one != other => None,
        (Some(value), _) | (None, Some(value)) => Some(value),
        (None, None) => None,
    }
}

fn optional_string_list(object: &Map<String, Value>, key: &str) -> Result<Option<Vec<String>>, ()> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned).ok_or(()))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(()),
    }
}

fn take_id(object: &mut Map<String, Value>, key: &str) -> Result<Option<ServerId>, ()> {
    match object.remove(key) {
        None => Ok(None),
        Some(Value::String(raw)) => ServerId::parse(&raw).map(Some).map_err(|_| ()),
        Some(_) => Err(()),
    }
}

/// Deterministic randomness: fuzzing must replay.
struct Counter(u64);

impl RandomSource for Counter {
    fn next_u64(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        self.0
    }
}

impl SecretSource for Counter {
    fn fill(&self, destination: &mut [u8]) -> Result<(), RandomnessError> {
        for (index, byte) in destination.iter_mut().enumerate() {
            *byte = (self.0 as u8).wrapping_add(index as u8);
        }
        Ok(())
    }
}

fn server_body(id: &ServerId, mut fields: Map<String, Value>) {
    if fields.get("mode").and_then(Value::as_str) == Some("group") {
        return;
    }
    let _ = mcpgw_config::sanitized_definition(&fields);
    fields.remove("mcp_server_id");
    // A registered mode too, whose check refuses settings with a `bad` key, so that bodies in
    // a mode of one's own go through the same rules.
    let mode = mcpgw_core::LaunchMode::new("fuzz_mode", |settings| {
        if settings.contains_key("bad") {
            Err(mcpgw_core::SettingsError::at("bad", "is refused"))
        } else {
            Ok(())
        }
    })
    .expect("the name follows the naming rule");
    let options = mcpgw_config::ParseOptions::default().with_launch_modes([mode]);
    match mcpgw_config::server_spec_from_json(
        id.as_str(),
        Value::Object(fields),
        ServerOrigin::Api,
        &options,
    ) {
        Ok(spec) => {
            assert_eq!(&spec.id, id, "the spec is for the server the request names");
            assert!(
                (1..=100).contains(&spec.max_consecutive_failures),
                "max_consecutive_failures out of range: {}",
                spec.max_consecutive_failures
            );
            assert!(
                (1..=86_400).contains(&spec.idle_ttl.as_secs()),
                "idle_ttl out of range: {:?}",
                spec.idle_ttl
            );
            assert!(
                (5..=3_600).contains(&spec.health_check_interval.as_secs()),
                "health_check_interval out of range: {:?}",
                spec.health_check_interval
            );
        }
        Err(errors) => {
            assert!(!errors.errors().is_empty(), "a refusal names an error");
            let _ = errors.to_string();
        }
    }
}

fn group_body(id: &ServerId, fields: Map<String, Value>, random_seed: u64) {
    match fields.get("mode") {
        None => {}
        Some(Value::String(mode)) if mode == "group" => {}
        Some(_) => return,
    }
    let definition =
        match mcpgw_config::group_definition_from_json(id.as_str(), Value::Object(fields)) {
            Ok(definition) => definition,
            Err(errors) => {
                let _ = errors.to_string();
                return;
            }
        };
    assert_eq!(&definition.id, id);
    let strategy = GroupStrategy::parse(definition.strategy.as_str())
        .expect("the configuration crate and the groups domain name the strategies alike");
    let members: Vec<MemberSpec> = definition
        .members
        .iter()
        .map(|member| {
            MemberSpec::new(member.id.clone())
                .with_weight(member.weight)
                .with_priority(member.priority)
        })
        .collect();
    let Ok(mut group) = Group::with_members(id.clone(), strategy, definition.min_healthy, members)
    else {
        return;
    };
    // A group that exists must be able to route: selection never panics, whatever the weights.
    let mut random = Counter(random_seed);
    for _ in 0..8 {
        if let Some(chosen) = group.select(&[], &mut random) {
            assert!(
                group.member(&chosen).is_some(),
                "the chosen member is a member"
            );
        }
    }
}

fn member_body(group: &ServerId, mut object: Map<String, Value>) {
    if let Some(id) = object.remove("member_id") {
        if object.contains_key("id") {
            return;
        }
        object.insert("id".to_owned(), id);
    }
    let body = serde_json::json!({ "members": [Value::Object(object)] });
    if let Ok(definition) = mcpgw_config::group_definition_from_json(group.as_str(), body) {
        assert!(
            definition.members.len() <= 1,
            "one member body is one member"
        );
    }
}

fn run(request: Request, selector: u8, body: &[u8]) {
    let Some(mut object) = json_object(body) else {
        return;
    };
    let path_server = ServerId::parse("math").expect("a valid id");
    let path_group = ServerId::parse("pool").expect("a valid id");
    match request {
        Request::CreateServer => {
            if let Ok(Some(id)) = take_id(&mut object, "mcp_server_id") {
                server_body(&id, object);
            }
        }
        Request::UpdateServer => match take_id(&mut object, "mcp_server_id") {
            Ok(None) => server_body(&path_server, object),
            Ok(Some(id)) if id == path_server => server_body(&path_server, object),
            _ => {}
        },
        Request::CreateGroup => {
            if let Ok(Some(id)) = take_id(&mut object, "group_id") {
                group_body(&id, object, u64::from(selector));
            }
        }
        Request::UpdateGroup => match take_id(&mut object, "group_id") {
            Ok(None) => group_body(&path_group, object, u64::from(selector)),
            Ok(Some(id)) if id == path_group => {
                group_body(&path_group, object, u64::from(selector))
            }
            _ => {}
        },
        Request::AddMember => member_body(&path_group, object),
        Request::CreateKey => {
            let Some(principal) = either_string(&object, "principal", "principal_id") else {
                return;
            };
            let Ok(Some(name)) = optional_string(&object, "name") else {
                return;
            };
            let Ok(role) = optional_string(&object, "role") else {
                return;
            };
            let expires_in_days = match object.get("expires_in_days") {
                None | Some(Value::Null) => None,
                Some(Value::Number(number)) => match number.as_i64() {
                    Some(days) => Some(days),
                    None => return,
                },
                Some(_) => return,
            };
            let roles = RoleBook::new([]);
            if let Ok(new) =
                NewApiKey::parse(&principal, &name, role.as_deref(), expires_in_days, &roles)
            {
                let issued = new
                    .issue(
                        &Counter(u64::from(selector)),
                        Timestamp::from_unix_micros(0),
                    )
                    .expect("a key issues with working randomness");
                if let Some(expires_at) = issued.record.expires_at {
                    assert!(
                        expires_at.unix_micros() > 0,
                        "a key expires after it was made"
                    );
                }
            }
        }
        Request::CreateRole => {
            let Some(name) = either_string(&object, "name", "role_name") else {
                return;
            };
            let Ok(description) = optional_string(&object, "description") else {
                return;
            };
            let Ok(Some(permissions)) = optional_string_list(&object, "permissions") else {
                return;
            };
            if let Ok(role) = Role::parse_custom(&name, description.as_deref(), &permissions) {
                let _ = RoleBook::new([]).check_create(&role);
                let _ = RoleBook::new([role.clone()])
                    .check_create(&role)
                    .expect_err("a role whose name exists cannot be created again");
            }
        }
        Request::UpdateRole => {
            let description = match object.get("description") {
                Some(Value::Null) => Some(String::new()),
                _ => match optional_string(&object, "description") {
                    Ok(description) => description,
                    Err(()) => return,
                },
            };
            let Ok(permissions) = optional_string_list(&object, "permissions") else {
                return;
            };
            let existing =
                Role::parse_custom("analyst", Some("reads"), &["mcp_server:read".to_owned()])
                    .expect("a valid custom role");
            let book = RoleBook::new([existing]);
            for name in ["analyst", "admin", "viewer"] {
                let _ = book.check_update(name, description.as_deref(), permissions.as_deref());
            }
        }
        Request::AssignRole => {
            let Some(principal) = either_string(&object, "principal", "principal_id") else {
                return;
            };
            let Some(role) = either_string(&object, "role", "role_name") else {
                return;
            };
            let Ok(scope) = optional_string(&object, "scope") else {
                return;
            };
            if let Ok(assignment) = RoleAssignment::parse(&principal, &role, scope.as_deref()) {
                let _ = RoleBook::new([]).check_assign(&assignment);
                let again = RoleAssignment::parse(
                    &assignment.principal.to_string(),
                    assignment.role.as_str(),
                    Some(&assignment.scope.to_string()),
                )
                .expect("an assignment's own rendering parses again");
                assert_eq!(again, assignment, "an assignment renders and parses back");
            }
        }
        Request::CheckPermission => {
            if let Some(principal) = either_string(&object, "principal", "principal_id")
                && let Ok(parsed) = Principal::parse(&principal)
            {
                let rendered = parsed.to_string();
                assert_eq!(
                    Principal::parse(&rendered).ok().as_ref(),
                    Some(&parsed),
                    "a principal renders and parses back"
                );
            }
            if let Ok(Some(permission)) = optional_string(&object, "permission") {
                let _ = Permission::parse(&permission);
                let _ = PermissionGrant::parse(&permission);
            }
        }
        Request::SetPolicy => {
            let (scope, target) = POLICY_ADDRESSES[usize::from(selector) % POLICY_ADDRESSES.len()];
            let Ok(allow_list) = optional_string_list(&object, "allow_list") else {
                return;
            };
            let Ok(deny_list) = optional_string_list(&object, "deny_list") else {
                return;
            };
            for pattern in allow_list.iter().chain(&deny_list).flatten() {
                let _ = PrincipalPattern::parse(pattern);
            }
            if let Ok(address) = PolicyAddress::parse(scope, target) {
                let _ = ToolAccessPolicy::parse(
                    address,
                    &allow_list.unwrap_or_default(),
                    &deny_list.unwrap_or_default(),
                );
            }
        }
        Request::CreateDiscoverySource => {
            if let Some(Value::Object(settings)) = object.get("config") {
                let masked = mcpgw_config::sanitized_source_settings(settings);
                assert_eq!(
                    masked.len(),
                    settings.len(),
                    "masking keeps every setting, only hides values"
                );
            }
        }
        Request::EnableDiscoverySource => {
            let _ = object.remove("enabled").map(|value| value.as_bool());
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let request = REQUESTS[usize::from(selector) % REQUESTS.len()];
    run(request, selector / REQUESTS.len() as u8, body);
});
