//! What an OAuth access token's scopes let it do: a ceiling on the permissions its holder's
//! roles grant, never a grant of its own.
//!
//! A client that follows the MCP authorization flow asks the authorization server for scopes
//! (`mcp:tools`), and the token it gets back says which were granted. The gateway reads them
//! through a [`ScopeMap`] (one per trusted issuer) into a [`ScopeLimit`]: a request made with
//! that token is allowed only when the principal's roles allow it *and* one of the granted
//! scopes covers it. The scopes the gateway knows without configuration:
//!
//! | scope | covers |
//! |---|---|
//! | `mcp:tools` | listing and calling tools (`tool:list`, `tool:invoke`), on every server and group |
//! | `mcp:tools:<id>` | the same, on the server or group `<id>` only |
//! | `mcp:admin` | every permission |
//!
//! An issuer's configuration can name more: a scope that stands for a role covers the
//! permissions that role grants (`mcp:ops` → `operator`). A scope the map does not know covers
//! nothing (OpenID's `openid`, `profile`, `email` among them).

use std::collections::BTreeMap;
use std::fmt;

use crate::permission::Permission;
use crate::policy::{AccessPath, PolicyScope, TOOL_NAME_SEPARATOR};
use crate::role::{RoleBook, RoleName};

/// The scope that covers listing and calling every tool.
pub const TOOLS_SCOPE: &str = "mcp:tools";
/// The prefix of the scopes that cover one server's or group's tools (`mcp:tools:math`).
pub const TOOLS_SCOPE_PREFIX: &str = "mcp:tools:";
/// The scope that covers every permission.
pub const ADMIN_SCOPE: &str = "mcp:admin";

/// What one scope covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScopeGrant {
    /// Every permission (`mcp:admin`).
    Everything,
    /// Listing and calling tools; of one server or group when `target` names it.
    Tools { target: Option<String> },
    /// What the named role grants (a configured scope).
    Role(RoleName),
}

impl ScopeGrant {
    fn covers(&self, permission: Permission, path: Option<&AccessPath>, roles: &RoleBook) -> bool {
        match self {
            ScopeGrant::Everything => true,
            ScopeGrant::Tools { target } => {
                is_tool_permission(permission)
                    && match (target, path) {
                        (None, _) => true,
                        (Some(target), Some(path)) => owner_of(path) == Some(target.as_str()),
                        // A tool permission asked without a path (the listing as a whole) is
                        // covered: what is listed is then filtered tool by tool.
                        (Some(_), None) => true,
                    }
            }
            ScopeGrant::Role(role) => roles
                .get(role.as_str())
                .is_some_and(|role| role.grants(permission)),
        }
    }
}

fn is_tool_permission(permission: Permission) -> bool {
    matches!(permission, Permission::ToolList | Permission::ToolInvoke)
}

/// The server or group whose tool a path leads to: the target of its first address.
fn owner_of(path: &AccessPath) -> Option<&str> {
    let first = path.addresses().first()?;
    match first.scope() {
        PolicyScope::Tool => first
            .target_id()
            .split_once(TOOL_NAME_SEPARATOR)
            .map(|(owner, _)| owner),
        PolicyScope::Provider | PolicyScope::Group => Some(first.target_id()),
    }
}

/// How one issuer's scopes read: the built-in scopes plus the issuer's own (scope → role).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScopeMap {
    roles: BTreeMap<String, RoleName>,
}

impl ScopeMap {
    /// The built-in scopes alone.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a scope that covers what `role` grants. A configured scope wins over a built-in
    /// one of the same name.
    #[must_use]
    pub fn with_role(mut self, scope: impl Into<String>, role: RoleName) -> Self {
        self.roles.insert(scope.into(), role);
        self
    }

    /// The configured scopes and their roles, by scope.
    pub fn configured(&self) -> impl Iterator<Item = (&str, &RoleName)> {
        self.roles
            .iter()
            .map(|(scope, role)| (scope.as_str(), role))
    }

    /// What one scope covers; `None` for a scope this map does not know.
    pub fn grant_of(&self, scope: &str) -> Option<ScopeGrant> {
        if let Some(role) = self.roles.get(scope) {
            return Some(ScopeGrant::Role(role.clone()));
        }
        match scope {
            TOOLS_SCOPE => Some(ScopeGrant::Tools { target: None }),
            ADMIN_SCOPE => Some(ScopeGrant::Everything),
            _ => scope
                .strip_prefix(TOOLS_SCOPE_PREFIX)
                .filter(|id| mcpgw_core::ServerId::parse(id).is_ok())
                .map(|id| ScopeGrant::Tools {
                    target: Some(id.to_owned()),
                }),
        }
    }

    /// The limit a token with these scopes is held to.
    pub fn limit<S: AsRef<str>>(&self, scopes: &[S]) -> ScopeLimit {
        let mut granted = Vec::new();
        let mut names = Vec::new();
        for scope in scopes {
            let scope = scope.as_ref();
            if scope.is_empty() || names.iter().any(|name: &String| name == scope) {
                continue;
            }
            names.push(scope.to_owned());
            if let Some(grant) = self.grant_of(scope) {
                granted.push(grant);
            }
        }
        ScopeLimit {
            scopes: names,
            granted,
        }
    }

    /// The scopes this map knows by name, for `scopes_supported`: the built-in ones and the
    /// configured ones (`mcp:tools:<id>` is a family, not listed).
    pub fn names(&self) -> Vec<String> {
        let mut names = vec![TOOLS_SCOPE.to_owned(), ADMIN_SCOPE.to_owned()];
        for scope in self.roles.keys() {
            if !names.contains(scope) {
                names.push(scope.clone());
            }
        }
        names
    }
}

/// The scopes a token was granted and what they cover together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeLimit {
    /// Every scope the token carried, in its order, without repeats.
    scopes: Vec<String>,
    granted: Vec<ScopeGrant>,
}

impl ScopeLimit {
    /// The scopes the token carried.
    pub fn scopes(&self) -> &[String] {
        &self.scopes
    }

    /// Whether some scope covers `permission` (on what `path` leads to).
    pub fn covers(
        &self,
        permission: Permission,
        path: Option<&AccessPath>,
        roles: &RoleBook,
    ) -> bool {
        self.granted
            .iter()
            .any(|grant| grant.covers(permission, path, roles))
    }

    /// Whether the token may use tools at all: what the MCP endpoint asks before anything else.
    pub fn covers_any_tool_use(&self, roles: &RoleBook) -> bool {
        self.granted.iter().any(|grant| match grant {
            ScopeGrant::Everything | ScopeGrant::Tools { .. } => true,
            ScopeGrant::Role(_) => {
                grant.covers(Permission::ToolList, None, roles)
                    || grant.covers(Permission::ToolInvoke, None, roles)
            }
        })
    }

    /// The scope to ask for, to be allowed `permission`: what an `insufficient_scope`
    /// challenge names.
    pub fn needed_for(permission: Permission) -> &'static str {
        if is_tool_permission(permission) {
            TOOLS_SCOPE
        } else {
            ADMIN_SCOPE
        }
    }
}

/// The prefix of a carried grant that stands for a role (see [`ScopeLimit::covers_names`]).
const ROLE_GRANT_PREFIX: &str = "role:";

impl ScopeGrant {
    /// The grant in words that [`ScopeGrant::from_name`] reads back.
    fn name(&self) -> String {
        match self {
            ScopeGrant::Everything => ADMIN_SCOPE.to_owned(),
            ScopeGrant::Tools { target: None } => TOOLS_SCOPE.to_owned(),
            ScopeGrant::Tools {
                target: Some(target),
            } => format!("{TOOLS_SCOPE_PREFIX}{target}"),
            ScopeGrant::Role(role) => format!("{ROLE_GRANT_PREFIX}{role}"),
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        match name.strip_prefix(ROLE_GRANT_PREFIX) {
            Some(role) => RoleName::parse(role).ok().map(ScopeGrant::Role),
            None => ScopeMap::new().grant_of(name),
        }
    }
}

impl ScopeLimit {
    /// What the scopes cover, in words that travel with a caller
    /// ([`mcpgw_core::CallerScopes::covers`]) and that [`ScopeLimit::from_carried`] reads
    /// back: `mcp:admin`, `mcp:tools`, `mcp:tools:<id>`, `role:<name>`.
    pub fn covers_names(&self) -> Vec<String> {
        self.granted.iter().map(ScopeGrant::name).collect()
    }

    /// The limit a caller carries; a word that names nothing covers nothing.
    pub fn from_carried(scopes: Vec<String>, covers: &[String]) -> Self {
        Self {
            scopes,
            granted: covers
                .iter()
                .filter_map(|name| ScopeGrant::from_name(name))
                .collect(),
        }
    }
}

impl fmt::Display for ScopeLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.scopes.is_empty() {
            return f.write_str("(no scope)");
        }
        f.write_str(&self.scopes.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use mcpgw_core::ServerId;

    use super::*;
    use crate::role::BuiltInRole;

    fn id(raw: &str) -> ServerId {
        ServerId::parse(raw).unwrap()
    }

    #[test]
    fn the_built_in_scopes_cover_tools_one_owner_or_everything() {
        let roles = RoleBook::default();
        let map = ScopeMap::new();
        let math_add = AccessPath::server_tool(&id("math"), "add").unwrap();
        let web_fetch = AccessPath::server_tool(&id("web"), "fetch").unwrap();

        let tools = map.limit(&["mcp:tools"]);
        assert!(tools.covers(Permission::ToolInvoke, Some(&math_add), &roles));
        assert!(tools.covers(Permission::ToolList, None, &roles));
        assert!(!tools.covers(Permission::McpServerCreate, None, &roles));
        assert!(tools.covers_any_tool_use(&roles));

        let math_only = map.limit(&["mcp:tools:math"]);
        assert!(math_only.covers(Permission::ToolInvoke, Some(&math_add), &roles));
        assert!(!math_only.covers(Permission::ToolInvoke, Some(&web_fetch), &roles));
        assert!(!math_only.covers(Permission::McpServerList, None, &roles));

        let admin = map.limit(&["mcp:admin"]);
        assert!(admin.covers(Permission::AuthManage, None, &roles));
        assert!(admin.covers(Permission::ToolInvoke, Some(&web_fetch), &roles));
    }

    #[test]
    fn a_group_scope_covers_the_groups_tools_and_not_its_members_by_name() {
        let roles = RoleBook::default();
        let map = ScopeMap::new();
        let listed = AccessPath::group_tool(&id("pool"), "add", None).unwrap();
        let called = AccessPath::group_tool(&id("pool"), "add", Some(&id("math"))).unwrap();
        let pool = map.limit(&["mcp:tools:pool"]);
        assert!(pool.covers(Permission::ToolList, Some(&listed), &roles));
        assert!(pool.covers(Permission::ToolInvoke, Some(&called), &roles));
        // The member's own scope does not open the group: the caller named the group's tool.
        let member = map.limit(&["mcp:tools:math"]);
        assert!(!member.covers(Permission::ToolInvoke, Some(&called), &roles));
    }

    #[test]
    fn unknown_and_malformed_scopes_cover_nothing() {
        let roles = RoleBook::default();
        let map = ScopeMap::new();
        // Bad input: OpenID scopes, an empty owner, an owner that is no valid id, a near miss.
        let limit = map.limit(&[
            "openid",
            "profile",
            "mcp:tools:",
            "mcp:tools:a b",
            "mcp:tool",
            "",
        ]);
        assert!(!limit.covers(Permission::ToolList, None, &roles));
        assert!(!limit.covers_any_tool_use(&roles));
        assert_eq!(
            limit.scopes(),
            [
                "openid",
                "profile",
                "mcp:tools:",
                "mcp:tools:a b",
                "mcp:tool"
            ]
        );
        assert_eq!(ScopeLimit::needed_for(Permission::ToolInvoke), "mcp:tools");
        assert_eq!(
            ScopeLimit::needed_for(Permission::ConfigReload),
            "mcp:admin"
        );
    }

    #[test]
    fn a_configured_scope_covers_what_its_role_grants() {
        let roles = RoleBook::default();
        let map = ScopeMap::new().with_role("mcp:ops", BuiltInRole::Operator.role_name());
        let ops = map.limit(&["mcp:ops"]);
        assert!(ops.covers(Permission::McpServerStart, None, &roles));
        assert!(ops.covers(Permission::ConfigReload, None, &roles));
        assert!(!ops.covers(Permission::AuthManage, None, &roles));
        // A scope naming a role nobody defined covers nothing.
        let ghost = ScopeMap::new()
            .with_role("mcp:ghost", RoleName::parse("ghost").unwrap())
            .limit(&["mcp:ghost"]);
        assert!(!ghost.covers(Permission::ToolList, None, &roles));
        assert_eq!(map.names(), ["mcp:tools", "mcp:admin", "mcp:ops"]);
        assert_eq!(ops.to_string(), "mcp:ops");
    }

    #[test]
    fn a_limit_travels_as_words_and_reads_back_the_same() {
        let map = ScopeMap::new().with_role("mcp:ops", BuiltInRole::Operator.role_name());
        let limit = map.limit(&[
            "openid",
            "mcp:ops",
            "mcp:tools:math",
            "mcp:admin",
            "mcp:tools",
        ]);
        let covers = limit.covers_names();
        assert_eq!(
            covers,
            ["role:operator", "mcp:tools:math", "mcp:admin", "mcp:tools"]
        );
        assert_eq!(
            ScopeLimit::from_carried(limit.scopes().to_vec(), &covers),
            limit
        );
        // Bad input: words that name nothing are dropped, not widened.
        let odd = ScopeLimit::from_carried(
            vec!["x".to_owned()],
            &[
                "role:".to_owned(),
                "everything".to_owned(),
                "mcp:tools:".to_owned(),
            ],
        );
        assert!(!odd.covers_any_tool_use(&RoleBook::default()));
    }
}
