//! The permission catalogue: every operation of the gateway, as `resource:action`.
//!
//! Each permission lists the endpoints it opens, so the catalogue is at once what
//! `GET /api/auth/permissions` shows and the table that maps a route to the permission it needs
//! ([`Permission::for_rest_route`], [`Permission::for_mcp_method`]). A role grants permissions
//! through [`PermissionGrant`]s: one permission, every action on a resource (`mcp_server:*`), or
//! everything (`*`).

use std::fmt;

use mcpgw_core::bounded_for_message;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::AuthError;

/// What a permission acts on: the part before the `:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Resource {
    McpServer,
    Tool,
    Audit,
    Group,
    Endpoint,
    Discovery,
    Config,
    Metrics,
    Events,
    Auth,
}

impl Resource {
    pub const ALL: [Resource; 10] = [
        Resource::McpServer,
        Resource::Tool,
        Resource::Audit,
        Resource::Group,
        Resource::Endpoint,
        Resource::Discovery,
        Resource::Config,
        Resource::Metrics,
        Resource::Events,
        Resource::Auth,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Resource::McpServer => "mcp_server",
            Resource::Tool => "tool",
            Resource::Audit => "audit",
            Resource::Group => "group",
            Resource::Endpoint => "endpoint",
            Resource::Discovery => "discovery",
            Resource::Config => "config",
            Resource::Metrics => "metrics",
            Resource::Events => "events",
            Resource::Auth => "auth",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|resource| resource.as_str() == raw)
    }

    /// The permissions on this resource, in catalogue order.
    pub fn permissions(self) -> impl Iterator<Item = Permission> {
        Permission::ALL
            .into_iter()
            .filter(move |permission| permission.resource() == self)
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An operation that a permission opens: a REST route (method and path template) or a method
/// of the MCP endpoint `/mcp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    Rest {
        method: &'static str,
        path: &'static str,
    },
    Mcp {
        method: &'static str,
    },
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Rest { method, path } => write!(f, "{method} {path}"),
            Endpoint::Mcp { method } => write!(f, "MCP {method}"),
        }
    }
}

const fn rest(method: &'static str, path: &'static str) -> Endpoint {
    Endpoint::Rest { method, path }
}

const fn mcp(method: &'static str) -> Endpoint {
    Endpoint::Mcp { method }
}

/// One permission of the catalogue. Requests need exactly one of these; roles grant them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Permission {
    McpServerList,
    McpServerRead,
    McpServerCreate,
    McpServerUpdate,
    McpServerDelete,
    McpServerStart,
    McpServerStop,
    McpServerLogs,
    ToolList,
    ToolInvoke,
    AuditRead,
    GroupList,
    GroupRead,
    GroupCreate,
    GroupUpdate,
    GroupDelete,
    GroupRebalance,
    EndpointList,
    EndpointRead,
    EndpointCreate,
    EndpointUpdate,
    EndpointDelete,
    DiscoveryRead,
    DiscoveryManage,
    DiscoveryScan,
    DiscoveryApprove,
    ConfigRead,
    ConfigReload,
    ConfigExport,
    ConfigBackup,
    MetricsRead,
    EventsRead,
    AuthRead,
    AuthManage,
}

/// A permission with what `GET /api/auth/permissions` shows about it.
#[derive(Debug, PartialEq, Eq)]
pub struct PermissionInfo {
    pub permission: Permission,
    /// `resource:action`.
    pub name: &'static str,
    pub description: &'static str,
    /// What the permission opens. Every REST route of the gateway under `/api/` appears under
    /// exactly one permission.
    pub endpoints: &'static [Endpoint],
}

const fn info(
    permission: Permission,
    name: &'static str,
    description: &'static str,
    endpoints: &'static [Endpoint],
) -> PermissionInfo {
    PermissionInfo {
        permission,
        name,
        description,
        endpoints,
    }
}

/// The catalogue, in the order of [`Permission`]'s variants (a test holds it to that).
static CATALOGUE: [PermissionInfo; Permission::ALL.len()] = [
    info(
        Permission::McpServerList,
        "mcp_server:list",
        "list the registered mcp servers and their states, and the tool pin ledger",
        &[
            rest("GET", "/api/mcp_servers"),
            rest("GET", "/api/tool_pins"),
        ],
    ),
    info(
        Permission::McpServerRead,
        "mcp_server:read",
        "read an mcp server's details, health and tool pins",
        &[
            rest("GET", "/api/mcp_servers/{id}"),
            rest("GET", "/api/mcp_servers/{id}/health"),
            rest("GET", "/api/tool_pins/{id}"),
        ],
    ),
    info(
        Permission::McpServerCreate,
        "mcp_server:create",
        "register a new mcp server",
        &[rest("POST", "/api/mcp_servers")],
    ),
    info(
        Permission::McpServerUpdate,
        "mcp_server:update",
        "change an mcp server's configuration, and approve, reject or reset its tool pins",
        &[
            rest("PUT", "/api/mcp_servers/{id}"),
            rest("POST", "/api/tool_pins/{id}/approve"),
            rest("POST", "/api/tool_pins/{id}/reject"),
            rest("DELETE", "/api/tool_pins/{id}"),
        ],
    ),
    info(
        Permission::McpServerDelete,
        "mcp_server:delete",
        "stop and remove an mcp server",
        &[rest("DELETE", "/api/mcp_servers/{id}")],
    ),
    info(
        Permission::McpServerStart,
        "mcp_server:start",
        "start an mcp server",
        &[rest("POST", "/api/mcp_servers/{id}/start")],
    ),
    info(
        Permission::McpServerStop,
        "mcp_server:stop",
        "stop an mcp server",
        &[rest("POST", "/api/mcp_servers/{id}/stop")],
    ),
    info(
        Permission::McpServerLogs,
        "mcp_server:logs",
        "read an mcp server's captured stderr, which may hold data its tools handled",
        &[rest("GET", "/api/mcp_servers/{id}/logs")],
    ),
    info(
        Permission::ToolList,
        "tool:list",
        "see tools (and prompts and resources): over REST per server, and in the lists of the \
         mcp endpoint, filtered by tool access policies",
        &[
            rest("GET", "/api/mcp_servers/{id}/tools"),
            mcp("tools/list"),
            mcp("prompts/list"),
            mcp("resources/list"),
            mcp("resources/templates/list"),
        ],
    ),
    info(
        Permission::ToolInvoke,
        "tool:invoke",
        "call tools (and get prompts, read resources) through the mcp endpoint, subject to tool \
         access policies; a call may start a cold server",
        &[mcp("tools/call"), mcp("prompts/get"), mcp("resources/read")],
    ),
    info(
        Permission::AuditRead,
        "audit:read",
        "read the tool invocation history: who called which tool, when, with what outcome",
        &[rest("GET", "/api/mcp_servers/{id}/tools/history")],
    ),
    info(
        Permission::GroupList,
        "group:list",
        "list the groups",
        &[rest("GET", "/api/groups")],
    ),
    info(
        Permission::GroupRead,
        "group:read",
        "read a group's details, members and state",
        &[rest("GET", "/api/groups/{id}")],
    ),
    info(
        Permission::GroupCreate,
        "group:create",
        "create a group",
        &[rest("POST", "/api/groups")],
    ),
    info(
        Permission::GroupUpdate,
        "group:update",
        "change a group's configuration and add or remove its members",
        &[
            rest("PUT", "/api/groups/{id}"),
            rest("POST", "/api/groups/{id}/members"),
            rest("DELETE", "/api/groups/{id}/members/{member_id}"),
        ],
    ),
    info(
        Permission::GroupDelete,
        "group:delete",
        "delete a group",
        &[rest("DELETE", "/api/groups/{id}")],
    ),
    info(
        Permission::GroupRebalance,
        "group:rebalance",
        "re-read member health and reset a group's rotation",
        &[rest("POST", "/api/groups/{id}/rebalance")],
    ),
    info(
        Permission::EndpointList,
        "endpoint:list",
        "list the curated endpoints",
        &[rest("GET", "/api/endpoints")],
    ),
    info(
        Permission::EndpointRead,
        "endpoint:read",
        "read a curated endpoint's definition and the tools it serves",
        &[rest("GET", "/api/endpoints/{name}")],
    ),
    info(
        Permission::EndpointCreate,
        "endpoint:create",
        "create a curated endpoint",
        &[rest("POST", "/api/endpoints")],
    ),
    info(
        Permission::EndpointUpdate,
        "endpoint:update",
        "change a curated endpoint's selection, overrides and access rules",
        &[rest("PUT", "/api/endpoints/{name}")],
    ),
    info(
        Permission::EndpointDelete,
        "endpoint:delete",
        "delete a curated endpoint",
        &[rest("DELETE", "/api/endpoints/{name}")],
    ),
    info(
        Permission::DiscoveryRead,
        "discovery:read",
        "list discovery sources and the pending and quarantined mcp servers",
        &[
            rest("GET", "/api/discovery/sources"),
            rest("GET", "/api/discovery/pending"),
            rest("GET", "/api/discovery/quarantined"),
        ],
    ),
    info(
        Permission::DiscoveryManage,
        "discovery:manage",
        "register, change, remove, enable and disable discovery sources",
        &[
            rest("POST", "/api/discovery/sources"),
            rest("PUT", "/api/discovery/sources/{id}"),
            rest("DELETE", "/api/discovery/sources/{id}"),
            rest("PUT", "/api/discovery/sources/{id}/enable"),
        ],
    ),
    info(
        Permission::DiscoveryScan,
        "discovery:scan",
        "trigger an immediate scan of a discovery source",
        &[rest("POST", "/api/discovery/sources/{id}/scan")],
    ),
    info(
        Permission::DiscoveryApprove,
        "discovery:approve",
        "approve or reject a pending mcp server (an approved one is registered and may run)",
        &[
            rest("POST", "/api/discovery/approve/{name}"),
            rest("POST", "/api/discovery/reject/{name}"),
        ],
    ),
    info(
        Permission::ConfigRead,
        "config:read",
        "read the running configuration (secrets masked) and its diff against the file",
        &[rest("GET", "/api/config"), rest("GET", "/api/config/diff")],
    ),
    info(
        Permission::ConfigReload,
        "config:reload",
        "apply the configuration file's changes without a restart",
        &[rest("POST", "/api/config/reload")],
    ),
    info(
        Permission::ConfigExport,
        "config:export",
        "export the current state as yaml",
        &[rest("POST", "/api/config/export")],
    ),
    info(
        Permission::ConfigBackup,
        "config:backup",
        "write a rotating backup of the configuration file next to it",
        &[rest("POST", "/api/config/backup")],
    ),
    info(
        Permission::MetricsRead,
        "metrics:read",
        "read uptime, version, the metrics summary and the fleet's replicas (the prometheus \
         endpoint /metrics needs no permission)",
        &[
            rest("GET", "/api/system"),
            rest("GET", "/api/system/replicas"),
        ],
    ),
    info(
        Permission::EventsRead,
        "events:read",
        "stream domain events over the websocket: state changes, tool calls, group, discovery, \
         configuration and auth events",
        &[rest("GET", "/api/ws/events")],
    ),
    info(
        Permission::AuthRead,
        "auth:read",
        "read api keys (never their values), roles, principals, permissions and tool access \
         policies, and check a principal's permission",
        &[
            rest("GET", "/api/auth/keys"),
            rest("GET", "/api/auth/roles"),
            rest("GET", "/api/auth/roles/all"),
            rest("GET", "/api/auth/roles/{role_name}"),
            rest("GET", "/api/auth/principals"),
            rest("GET", "/api/auth/principals/roles"),
            rest("GET", "/api/auth/permissions"),
            rest("POST", "/api/auth/check-permission"),
            rest("GET", "/api/auth/policies/{scope}/{target_id}"),
        ],
    ),
    info(
        Permission::AuthManage,
        "auth:manage",
        "create and revoke api keys, manage custom roles, assign and revoke roles, set and \
         clear tool access policies; whoever holds it can grant itself anything",
        &[
            rest("POST", "/api/auth/keys"),
            rest("DELETE", "/api/auth/keys/{key_id}"),
            rest("POST", "/api/auth/roles"),
            rest("POST", "/api/auth/roles/assign"),
            rest("DELETE", "/api/auth/roles/revoke"),
            rest("DELETE", "/api/auth/roles/{role_name}"),
            rest("PATCH", "/api/auth/roles/{role_name}"),
            rest("POST", "/api/auth/policies/{scope}/{target_id}"),
            rest("DELETE", "/api/auth/policies/{scope}/{target_id}"),
        ],
    ),
];

impl Permission {
    /// Every permission, in catalogue order.
    pub const ALL: [Permission; 34] = [
        Permission::McpServerList,
        Permission::McpServerRead,
        Permission::McpServerCreate,
        Permission::McpServerUpdate,
        Permission::McpServerDelete,
        Permission::McpServerStart,
        Permission::McpServerStop,
        Permission::McpServerLogs,
        Permission::ToolList,
        Permission::ToolInvoke,
        Permission::AuditRead,
        Permission::GroupList,
        Permission::GroupRead,
        Permission::GroupCreate,
        Permission::GroupUpdate,
        Permission::GroupDelete,
        Permission::GroupRebalance,
        Permission::EndpointList,
        Permission::EndpointRead,
        Permission::EndpointCreate,
        Permission::EndpointUpdate,
        Permission::EndpointDelete,
        Permission::DiscoveryRead,
        Permission::DiscoveryManage,
        Permission::DiscoveryScan,
        Permission::DiscoveryApprove,
        Permission::ConfigRead,
        Permission::ConfigReload,
        Permission::ConfigExport,
        Permission::ConfigBackup,
        Permission::MetricsRead,
        Permission::EventsRead,
        Permission::AuthRead,
        Permission::AuthManage,
    ];

    pub fn info(self) -> &'static PermissionInfo {
        &CATALOGUE[self as usize]
    }

    /// `resource:action`.
    pub fn as_str(self) -> &'static str {
        self.info().name
    }

    pub fn description(self) -> &'static str {
        self.info().description
    }

    pub fn endpoints(self) -> &'static [Endpoint] {
        self.info().endpoints
    }

    pub fn resource(self) -> Resource {
        use Permission::*;
        match self {
            McpServerList | McpServerRead | McpServerCreate | McpServerUpdate | McpServerDelete
            | McpServerStart | McpServerStop | McpServerLogs => Resource::McpServer,
            ToolList | ToolInvoke => Resource::Tool,
            AuditRead => Resource::Audit,
            GroupList | GroupRead | GroupCreate | GroupUpdate | GroupDelete | GroupRebalance => {
                Resource::Group
            }
            EndpointList | EndpointRead | EndpointCreate | EndpointUpdate | EndpointDelete => {
                Resource::Endpoint
            }
            DiscoveryRead | DiscoveryManage | DiscoveryScan | DiscoveryApprove => {
                Resource::Discovery
            }
            ConfigRead | ConfigReload | ConfigExport | ConfigBackup => Resource::Config,
            MetricsRead => Resource::Metrics,
            EventsRead => Resource::Events,
            AuthRead | AuthManage => Resource::Auth,
        }
    }

    /// The part after the `:`.
    pub fn action(self) -> &'static str {
        let name = self.as_str();
        &name[self.resource().as_str().len() + 1..]
    }

    /// Parses one permission of the catalogue. Wildcards are refused here: they grant, a
    /// request or a check needs one permission.
    pub fn parse(raw: &str) -> Result<Self, AuthError> {
        match PermissionGrant::parse(raw)? {
            PermissionGrant::Exactly(permission) => Ok(permission),
            PermissionGrant::All | PermissionGrant::AllOf(_) => Err(AuthError::InvalidPermission {
                permission: bounded_for_message(raw),
                problem: "a wildcard grants permissions but names no single one; check one \
                          permission, such as mcp_server:read"
                    .to_owned(),
            }),
        }
    }

    /// The permission a REST request needs, from its method and its route: the template
    /// (`/api/mcp_servers/{id}`) or the concrete path (`/api/mcp_servers/math`). A trailing
    /// slash and a query string are ignored; where a literal segment and a template segment
    /// both match (`/api/auth/roles/all`), the literal wins. `None`: the route has no
    /// permission, and such a route is denied to everyone.
    pub fn for_rest_route(method: &str, route: &str) -> Option<Permission> {
        let route = route.split(['?', '#']).next().unwrap_or_default();
        let route = route.strip_suffix('/').unwrap_or(route);
        let wanted: Vec<&str> = route.split('/').collect();
        let mut best: Option<(usize, Permission)> = None;
        for permission in Permission::ALL {
            for endpoint in permission.endpoints() {
                let Endpoint::Rest {
                    method: endpoint_method,
                    path,
                } = endpoint
                else {
                    continue;
                };
                if *endpoint_method != method {
                    continue;
                }
                if let Some(literal_segments) = match_route(path, &wanted)
                    && best.is_none_or(|(most, _)| literal_segments > most)
                {
                    best = Some((literal_segments, permission));
                }
            }
        }
        best.map(|(_, permission)| permission)
    }

    /// The permission an MCP request of `method` needs. `None` for the methods that need only
    /// an authenticated caller (`initialize`, `ping`, notifications, ...).
    pub fn for_mcp_method(method: &str) -> Option<Permission> {
        Permission::ALL.into_iter().find(|permission| {
            permission.endpoints().iter().any(
                |endpoint| matches!(endpoint, Endpoint::Mcp { method: known } if *known == method),
            )
        })
    }
}

/// Matches a route template against the segments of a request path; `Some(number of literal
/// segments)` on a match. A `{placeholder}` matches any non-empty segment.
fn match_route(template: &str, wanted: &[&str]) -> Option<usize> {
    let template: Vec<&str> = template.split('/').collect();
    if template.len() != wanted.len() {
        return None;
    }
    let mut literal_segments = 0;
    for (expected, actual) in template.iter().zip(wanted) {
        if expected.starts_with('{') && expected.ends_with('}') {
            if actual.is_empty() {
                return None;
            }
        } else if expected == actual {
            literal_segments += 1;
        } else {
            return None;
        }
    }
    Some(literal_segments)
}

/// The whole catalogue, in order: what `GET /api/auth/permissions` lists.
pub fn catalogue() -> &'static [PermissionInfo] {
    &CATALOGUE
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Permission {
    type Err = AuthError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        Self::parse(raw)
    }
}

impl Serialize for Permission {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Permission {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

/// What a role grants: everything (`*`), every action on a resource (`mcp_server:*`), or one
/// permission. A wildcard covers permissions added to the catalogue later, too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PermissionGrant {
    All,
    AllOf(Resource),
    Exactly(Permission),
}

impl PermissionGrant {
    /// Parses `*`, `resource:*` or `resource:action`; anything outside the catalogue is refused
    /// with the nearest valid name when there is one.
    pub fn parse(raw: &str) -> Result<Self, AuthError> {
        if raw == "*" {
            return Ok(PermissionGrant::All);
        }
        let Some((resource, action)) = raw.split_once(':') else {
            return Err(AuthError::InvalidPermission {
                permission: bounded_for_message(raw),
                problem: "permissions are written `resource:action` (mcp_server:read), \
                          `resource:*` or `*`"
                    .to_owned(),
            });
        };
        if let Some(known) = Resource::parse(resource) {
            if action == "*" {
                return Ok(PermissionGrant::AllOf(known));
            }
            if let Some(permission) = known
                .permissions()
                .find(|permission| permission.action() == action)
            {
                return Ok(PermissionGrant::Exactly(permission));
            }
        }
        Err(AuthError::UnknownPermission {
            permission: bounded_for_message(raw),
            suggestion: nearest_name(raw),
        })
    }

    pub fn grants(self, permission: Permission) -> bool {
        match self {
            PermissionGrant::All => true,
            PermissionGrant::AllOf(resource) => permission.resource() == resource,
            PermissionGrant::Exactly(granted) => granted == permission,
        }
    }
}

impl fmt::Display for PermissionGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PermissionGrant::All => f.write_str("*"),
            PermissionGrant::AllOf(resource) => write!(f, "{resource}:*"),
            PermissionGrant::Exactly(permission) => permission.fmt(f),
        }
    }
}

impl std::str::FromStr for PermissionGrant {
    type Err = AuthError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        Self::parse(raw)
    }
}

impl Serialize for PermissionGrant {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PermissionGrant {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

/// The catalogue name (or `resource:*`) closest to a mistyped one, when it is close enough to
/// be what was meant (at most a third of its length in edits).
fn nearest_name(raw: &str) -> Option<&'static str> {
    static WILDCARDS: [&str; Resource::ALL.len()] = [
        "mcp_server:*",
        "tool:*",
        "audit:*",
        "group:*",
        "endpoint:*",
        "discovery:*",
        "config:*",
        "metrics:*",
        "events:*",
        "auth:*",
    ];
    if raw.len() > 64 {
        return None;
    }
    Permission::ALL
        .iter()
        .map(|permission| permission.as_str())
        .chain(WILDCARDS)
        .map(|candidate| {
            (
                mcpgw_core::suggest::edit_distance(raw, candidate),
                candidate,
            )
        })
        .filter(|(distance, candidate)| *distance <= candidate.len() / 3)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use mcpgw_core::ErrorKind;

    use super::*;

    #[test]
    fn the_catalogue_is_in_variant_order_and_names_are_resource_colon_action() {
        assert_eq!(catalogue().len(), Permission::ALL.len());
        let mut names = HashSet::new();
        for (index, info) in catalogue().iter().enumerate() {
            assert_eq!(info.permission, Permission::ALL[index], "{}", info.name);
            assert_eq!(info.permission as usize, index, "{}", info.name);
            let permission = info.permission;
            assert_eq!(
                info.name,
                format!("{}:{}", permission.resource(), permission.action())
            );
            assert!(
                permission
                    .action()
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{}",
                info.name
            );
            assert!(names.insert(info.name), "{} appears twice", info.name);
            assert!(!info.description.is_empty(), "{}", info.name);
            assert!(!info.description.ends_with('.'), "{}", info.name);
            assert!(!info.endpoints.is_empty(), "{} opens nothing", info.name);
        }
        // Every resource has at least one permission.
        for resource in Resource::ALL {
            assert!(resource.permissions().next().is_some(), "{resource}");
        }
    }

    /// Every route of the REST API that needs a permission (docs/api.md documents each), with
    /// the permission it needs. Written out by hand (not derived from the catalogue) so that a
    /// route moved to another permission, or lost, fails here.
    const DOCUMENTED_ROUTES: &[(&str, &str, Permission)] = &[
        ("GET", "/api/mcp_servers", Permission::McpServerList),
        ("POST", "/api/mcp_servers", Permission::McpServerCreate),
        ("GET", "/api/mcp_servers/{id}", Permission::McpServerRead),
        ("PUT", "/api/mcp_servers/{id}", Permission::McpServerUpdate),
        (
            "DELETE",
            "/api/mcp_servers/{id}",
            Permission::McpServerDelete,
        ),
        (
            "POST",
            "/api/mcp_servers/{id}/start",
            Permission::McpServerStart,
        ),
        (
            "POST",
            "/api/mcp_servers/{id}/stop",
            Permission::McpServerStop,
        ),
        ("GET", "/api/mcp_servers/{id}/tools", Permission::ToolList),
        (
            "GET",
            "/api/mcp_servers/{id}/health",
            Permission::McpServerRead,
        ),
        (
            "GET",
            "/api/mcp_servers/{id}/logs",
            Permission::McpServerLogs,
        ),
        ("GET", "/api/tool_pins", Permission::McpServerList),
        ("GET", "/api/tool_pins/{id}", Permission::McpServerRead),
        (
            "POST",
            "/api/tool_pins/{id}/approve",
            Permission::McpServerUpdate,
        ),
        (
            "POST",
            "/api/tool_pins/{id}/reject",
            Permission::McpServerUpdate,
        ),
        ("DELETE", "/api/tool_pins/{id}", Permission::McpServerUpdate),
        (
            "GET",
            "/api/mcp_servers/{id}/tools/history",
            Permission::AuditRead,
        ),
        ("GET", "/api/groups", Permission::GroupList),
        ("POST", "/api/groups", Permission::GroupCreate),
        ("GET", "/api/groups/{id}", Permission::GroupRead),
        ("PUT", "/api/groups/{id}", Permission::GroupUpdate),
        ("DELETE", "/api/groups/{id}", Permission::GroupDelete),
        (
            "POST",
            "/api/groups/{id}/rebalance",
            Permission::GroupRebalance,
        ),
        ("GET", "/api/endpoints", Permission::EndpointList),
        ("POST", "/api/endpoints", Permission::EndpointCreate),
        ("GET", "/api/endpoints/{name}", Permission::EndpointRead),
        ("PUT", "/api/endpoints/{name}", Permission::EndpointUpdate),
        (
            "DELETE",
            "/api/endpoints/{name}",
            Permission::EndpointDelete,
        ),
        ("POST", "/api/groups/{id}/members", Permission::GroupUpdate),
        (
            "DELETE",
            "/api/groups/{id}/members/{member_id}",
            Permission::GroupUpdate,
        ),
        ("GET", "/api/discovery/sources", Permission::DiscoveryRead),
        (
            "POST",
            "/api/discovery/sources",
            Permission::DiscoveryManage,
        ),
        (
            "PUT",
            "/api/discovery/sources/{id}",
            Permission::DiscoveryManage,
        ),
        (
            "DELETE",
            "/api/discovery/sources/{id}",
            Permission::DiscoveryManage,
        ),
        (
            "POST",
            "/api/discovery/sources/{id}/scan",
            Permission::DiscoveryScan,
        ),
        (
            "PUT",
            "/api/discovery/sources/{id}/enable",
            Permission::DiscoveryManage,
        ),
        ("GET", "/api/discovery/pending", Permission::DiscoveryRead),
        (
            "GET",
            "/api/discovery/quarantined",
            Permission::DiscoveryRead,
        ),
        (
            "POST",
            "/api/discovery/approve/{name}",
            Permission::DiscoveryApprove,
        ),
        (
            "POST",
            "/api/discovery/reject/{name}",
            Permission::DiscoveryApprove,
        ),
        ("GET", "/api/config", Permission::ConfigRead),
        ("POST", "/api/config/reload", Permission::ConfigReload),
        ("POST", "/api/config/export", Permission::ConfigExport),
        ("POST", "/api/config/backup", Permission::ConfigBackup),
        ("GET", "/api/config/diff", Permission::ConfigRead),
        ("GET", "/api/system", Permission::MetricsRead),
        ("GET", "/api/system/replicas", Permission::MetricsRead),
        ("POST", "/api/auth/keys", Permission::AuthManage),
        ("GET", "/api/auth/keys", Permission::AuthRead),
        ("DELETE", "/api/auth/keys/{key_id}", Permission::AuthManage),
        ("GET", "/api/auth/roles", Permission::AuthRead),
        ("POST", "/api/auth/roles", Permission::AuthManage),
        ("GET", "/api/auth/roles/all", Permission::AuthRead),
        ("POST", "/api/auth/roles/assign", Permission::AuthManage),
        ("DELETE", "/api/auth/roles/revoke", Permission::AuthManage),
        ("GET", "/api/auth/roles/{role_name}", Permission::AuthRead),
        (
            "DELETE",
            "/api/auth/roles/{role_name}",
            Permission::AuthManage,
        ),
        (
            "PATCH",
            "/api/auth/roles/{role_name}",
            Permission::AuthManage,
        ),
        ("GET", "/api/auth/principals", Permission::AuthRead),
        ("GET", "/api/auth/principals/roles", Permission::AuthRead),
        ("GET", "/api/auth/permissions", Permission::AuthRead),
        ("POST", "/api/auth/check-permission", Permission::AuthRead),
        (
            "GET",
            "/api/auth/policies/{scope}/{target_id}",
            Permission::AuthRead,
        ),
        (
            "POST",
            "/api/auth/policies/{scope}/{target_id}",
            Permission::AuthManage,
        ),
        (
            "DELETE",
            "/api/auth/policies/{scope}/{target_id}",
            Permission::AuthManage,
        ),
        ("GET", "/api/ws/events", Permission::EventsRead),
    ];

    #[test]
    fn every_documented_route_maps_to_its_permission_and_the_catalogue_lists_no_other_route() {
        for (method, path, expected) in DOCUMENTED_ROUTES {
            assert_eq!(
                Permission::for_rest_route(method, path),
                Some(*expected),
                "{method} {path}"
            );
        }
        let documented: HashSet<(&str, &str)> = DOCUMENTED_ROUTES
            .iter()
            .map(|(method, path, _)| (*method, *path))
            .collect();
        let mut listed = HashSet::new();
        for permission in Permission::ALL {
            for endpoint in permission.endpoints() {
                if let Endpoint::Rest { method, path } = endpoint {
                    assert!(
                        documented.contains(&(*method, *path)),
                        "{permission} lists {method} {path}, which the API does not document"
                    );
                    assert!(
                        listed.insert((*method, *path)),
                        "{method} {path} is listed under two permissions"
                    );
                }
            }
        }
        assert_eq!(listed.len(), documented.len());
    }

    #[test]
    fn concrete_paths_match_templates_and_literal_segments_win() {
        let table = [
            (
                "GET",
                "/api/mcp_servers/math",
                Some(Permission::McpServerRead),
            ),
            ("GET", "/api/mcp_servers/", Some(Permission::McpServerList)),
            (
                "GET",
                "/api/mcp_servers?state=ready",
                Some(Permission::McpServerList),
            ),
            (
                "GET",
                "/api/mcp_servers/math/tools/history",
                Some(Permission::AuditRead),
            ),
            ("GET", "/api/auth/roles/all", Some(Permission::AuthRead)),
            ("GET", "/api/auth/roles/dev", Some(Permission::AuthRead)),
            (
                "DELETE",
                "/api/auth/roles/revoke",
                Some(Permission::AuthManage),
            ),
            (
                "DELETE",
                "/api/auth/roles/dev",
                Some(Permission::AuthManage),
            ),
            (
                "POST",
                "/api/auth/policies/provider/math",
                Some(Permission::AuthManage),
            ),
            (
                "POST",
                "/api/groups/pool/members/",
                Some(Permission::GroupUpdate),
            ),
            (
                "DELETE",
                "/api/groups/pool/members/math",
                Some(Permission::GroupUpdate),
            ),
            ("GET", "/api/endpoints/", Some(Permission::EndpointList)),
            (
                "GET",
                "/api/endpoints/support",
                Some(Permission::EndpointRead),
            ),
            (
                "PUT",
                "/api/endpoints/support",
                Some(Permission::EndpointUpdate),
            ),
            // Curated MCP endpoints are not REST routes: they need authentication only.
            ("POST", "/mcp/v/support", None),
            ("POST", "/api/endpoints/support", None),
            ("GET", "/api/endpoints/support/tools", None),
            // Unknown routes, wrong methods, empty segments and lowercase methods map to nothing.
            ("GET", "/api/unknown", None),
            ("PATCH", "/api/mcp_servers/math", None),
            ("GET", "/api/mcp_servers//health", None),
            ("get", "/api/mcp_servers", None),
            ("GET", "/api", None),
            ("GET", "", None),
            ("GET", "/health/live", None),
            ("GET", "/api/mcp_servers/math/logs/extra", None),
        ];
        for (method, path, expected) in table {
            assert_eq!(
                Permission::for_rest_route(method, path),
                expected,
                "{method} {path}"
            );
        }
    }

    #[test]
    fn route_matching_counts_literal_segments_so_the_most_literal_template_wins() {
        let path = |raw: &'static str| -> Vec<&'static str> { raw.split('/').collect() };
        // "", "api", "auth", "roles", "all": five literal segments against four.
        assert_eq!(
            match_route("/api/auth/roles/all", &path("/api/auth/roles/all")),
            Some(5)
        );
        assert_eq!(
            match_route("/api/auth/roles/{role_name}", &path("/api/auth/roles/all")),
            Some(4)
        );
        assert_eq!(
            match_route("/api/auth/roles/{role_name}", &path("/api/auth/roles/")),
            None
        );
        assert_eq!(
            match_route("/api/auth/roles/{role_name}", &path("/api/auth/roles")),
            None
        );
        assert_eq!(
            match_route("/api/groups/{id}", &path("/api/mcp_servers/x")),
            None
        );
    }

    #[test]
    fn mcp_methods_map_to_tool_permissions() {
        let table = [
            ("tools/list", Some(Permission::ToolList)),
            ("prompts/list", Some(Permission::ToolList)),
            ("resources/list", Some(Permission::ToolList)),
            ("resources/templates/list", Some(Permission::ToolList)),
            ("tools/call", Some(Permission::ToolInvoke)),
            ("prompts/get", Some(Permission::ToolInvoke)),
            ("resources/read", Some(Permission::ToolInvoke)),
            ("initialize", None),
            ("ping", None),
            ("notifications/initialized", None),
            ("", None),
            ("tools/call ", None),
        ];
        for (method, expected) in table {
            assert_eq!(Permission::for_mcp_method(method), expected, "{method:?}");
        }
    }

    #[test]
    fn grants_parse_and_cover_what_they_name() {
        assert_eq!(PermissionGrant::parse("*").unwrap(), PermissionGrant::All);
        assert_eq!(
            PermissionGrant::parse("mcp_server:*").unwrap(),
            PermissionGrant::AllOf(Resource::McpServer)
        );
        for permission in Permission::ALL {
            let grant = PermissionGrant::parse(permission.as_str()).unwrap();
            assert_eq!(grant, PermissionGrant::Exactly(permission));
            assert_eq!(grant.to_string(), permission.as_str());
            assert_eq!(Permission::parse(permission.as_str()).unwrap(), permission);
            // Each grant form against every permission.
            for other in Permission::ALL {
                assert!(PermissionGrant::All.grants(other));
                assert_eq!(
                    PermissionGrant::AllOf(permission.resource()).grants(other),
                    other.resource() == permission.resource()
                );
                assert_eq!(grant.grants(other), other == permission);
            }
        }
    }

    #[test]
    fn unknown_and_malformed_permissions_are_invalid_input_with_a_hint() {
        for bad in [
            "",
            "read",
            "mcp_server",
            "mcp_server:",
            "mcp_server:reed",
            "mcp_servers:read",
            "MCP_SERVER:READ",
            "server:*",
            ":read",
            "mcp_server:read ",
            "tool:invoke:x",
        ] {
            let error = PermissionGrant::parse(bad).expect_err(bad);
            assert_eq!(error.kind(), ErrorKind::Invalid, "{bad}");
        }
        assert_eq!(
            PermissionGrant::parse("mcp_server:reed")
                .unwrap_err()
                .to_string(),
            "unknown permission `mcp_server:reed`; did you mean `mcp_server:read`? GET \
             /api/auth/permissions lists every permission"
        );
        assert_eq!(
            PermissionGrant::parse("server:*").unwrap_err(),
            AuthError::UnknownPermission {
                permission: "server:*".to_owned(),
                suggestion: Some("mcp_server:*"),
            }
        );
        assert_eq!(
            PermissionGrant::parse("widget:spin").unwrap_err(),
            AuthError::UnknownPermission {
                permission: "widget:spin".to_owned(),
                suggestion: None,
            }
        );
        assert_eq!(
            PermissionGrant::parse("tools:*").unwrap_err(),
            AuthError::UnknownPermission {
                permission: "tools:*".to_owned(),
                suggestion: Some("tool:*"),
            }
        );
        // A check needs one permission, not a wildcard.
        for wildcard in ["*", "tool:*"] {
            let error = Permission::parse(wildcard).unwrap_err();
            assert!(error.to_string().contains("names no single one"), "{error}");
        }
    }

    #[test]
    fn permissions_and_grants_travel_as_strings() {
        assert_eq!(
            serde_json::to_string(&Permission::ToolInvoke).unwrap(),
            "\"tool:invoke\""
        );
        let grants: Vec<PermissionGrant> =
            serde_json::from_str(r#"["*", "group:*", "tool:list"]"#).unwrap();
        assert_eq!(
            grants,
            [
                PermissionGrant::All,
                PermissionGrant::AllOf(Resource::Group),
                PermissionGrant::Exactly(Permission::ToolList)
            ]
        );
        assert!(serde_json::from_str::<Permission>("\"tool:fly\"").is_err());
    }
}
