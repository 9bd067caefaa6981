//! Roles: the six built-in ones and the custom ones operators create.

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use mcpgw_core::bounded_for_message;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::AuthError;
use crate::permission::{Permission, PermissionGrant, Resource};

/// The longest role name accepted.
pub const ROLE_NAME_MAX_LEN: usize = 64;
/// The longest role description accepted, in bytes.
pub const ROLE_DESCRIPTION_MAX_BYTES: usize = 1024;
/// The most grants one role may hold (the catalogue has fewer permissions than this).
pub const ROLE_MAX_GRANTS: usize = 256;

/// Names that are literal path segments under `/api/auth/roles/`: a role so named could not be
/// addressed by `/api/auth/roles/{role_name}`.
const RESERVED_ROLE_NAMES: [&str; 3] = ["all", "assign", "revoke"];

/// A role's name: `^[a-z][a-z0-9_-]{0,63}$`, and not `all`, `assign` or `revoke`.
///
/// Lowercase only, so that `Admin` can never pass for `admin` in a listing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RoleName(String);

impl RoleName {
    pub fn parse(raw: &str) -> Result<Self, AuthError> {
        let problem = if raw.is_empty() {
            "it is empty"
        } else if raw.len() > ROLE_NAME_MAX_LEN {
            "it is longer than 64 characters"
        } else if !raw.starts_with(|c: char| c.is_ascii_lowercase()) {
            "it must start with a lowercase letter"
        } else if !raw
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        {
            "use only lowercase letters, digits, `_` and `-`"
        } else if RESERVED_ROLE_NAMES.contains(&raw) {
            "`all`, `assign` and `revoke` are reserved by the roles api"
        } else {
            return Ok(Self(raw.to_owned()));
        };
        Err(AuthError::InvalidRoleName {
            name: bounded_for_message(raw),
            problem,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The built-in role of this name, if it is one.
    pub fn built_in(&self) -> Option<BuiltInRole> {
        BuiltInRole::from_name(&self.0)
    }
}

impl fmt::Display for RoleName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

// Hash, Eq and Ord of `RoleName` are those of its string, so maps keyed by it can be searched
// with a `&str`.
impl std::borrow::Borrow<str> for RoleName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for RoleName {
    type Err = AuthError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        Self::parse(raw)
    }
}

impl Serialize for RoleName {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for RoleName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

/// The six built-in roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BuiltInRole {
    Admin,
    McpServerAdmin,
    Developer,
    Viewer,
    Auditor,
    Operator,
}

use PermissionGrant::{AllOf, Exactly};

impl BuiltInRole {
    /// In their fixed order: the order of listings and of the search for a granting role.
    pub const ALL: [BuiltInRole; 6] = [
        BuiltInRole::Admin,
        BuiltInRole::McpServerAdmin,
        BuiltInRole::Developer,
        BuiltInRole::Viewer,
        BuiltInRole::Auditor,
        BuiltInRole::Operator,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BuiltInRole::Admin => "admin",
            BuiltInRole::McpServerAdmin => "mcp_server_admin",
            BuiltInRole::Developer => "developer",
            BuiltInRole::Viewer => "viewer",
            BuiltInRole::Auditor => "auditor",
            BuiltInRole::Operator => "operator",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|role| role.name() == name)
    }

    pub fn description(self) -> &'static str {
        match self {
            BuiltInRole::Admin => "everything, auth management included",
            BuiltInRole::McpServerAdmin => "every action on mcp servers; list and invoke tools",
            BuiltInRole::Developer => "read, list and start mcp servers; list and invoke tools",
            BuiltInRole::Viewer => {
                "read and list mcp servers and curated endpoints; list tools; read metrics"
            }
            BuiltInRole::Auditor => {
                "read the audit trail (the tool invocation history and the event stream) and \
                 metrics"
            }
            BuiltInRole::Operator => {
                "start and stop mcp servers, reload the configuration, manage groups and curated \
                 endpoints"
            }
        }
    }

    /// Exactly what each role may do (the crate documentation has the table and says how each
    /// grant maps to the catalogue).
    pub fn grants(self) -> &'static [PermissionGrant] {
        match self {
            BuiltInRole::Admin => &[PermissionGrant::All],
            BuiltInRole::McpServerAdmin => &[
                AllOf(Resource::McpServer),
                Exactly(Permission::ToolInvoke),
                Exactly(Permission::ToolList),
            ],
            BuiltInRole::Developer => &[
                Exactly(Permission::McpServerRead),
                Exactly(Permission::McpServerList),
                Exactly(Permission::McpServerStart),
                Exactly(Permission::ToolInvoke),
                Exactly(Permission::ToolList),
            ],
            BuiltInRole::Viewer => &[
                Exactly(Permission::McpServerRead),
                Exactly(Permission::McpServerList),
                Exactly(Permission::ToolList),
                Exactly(Permission::MetricsRead),
                Exactly(Permission::EndpointList),
                Exactly(Permission::EndpointRead),
            ],
            BuiltInRole::Auditor => &[
                Exactly(Permission::AuditRead),
                Exactly(Permission::EventsRead),
                Exactly(Permission::MetricsRead),
            ],
            BuiltInRole::Operator => &[
                Exactly(Permission::McpServerStart),
                Exactly(Permission::McpServerStop),
                Exactly(Permission::ConfigReload),
                AllOf(Resource::Group),
                AllOf(Resource::Endpoint),
            ],
        }
    }

    pub fn role_name(self) -> RoleName {
        RoleName(self.name().to_owned())
    }
}

impl fmt::Display for BuiltInRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A role: a name, a description and the permissions it grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    name: RoleName,
    description: String,
    permissions: Vec<PermissionGrant>,
    built_in: bool,
}

impl Role {
    pub fn built_in(role: BuiltInRole) -> Self {
        Self {
            name: role.role_name(),
            description: role.description().to_owned(),
            permissions: role.grants().to_vec(),
            built_in: true,
        }
    }

    /// A custom role from parts already parsed (as a store loads it). Refuses a built-in name
    /// (Conflict) and out-of-bounds descriptions or grant lists (Invalid); repeated grants are
    /// kept once, in their first position.
    pub fn custom(
        name: RoleName,
        description: &str,
        permissions: Vec<PermissionGrant>,
    ) -> Result<Self, AuthError> {
        if name.built_in().is_some() {
            return Err(AuthError::BuiltInRole { role: name });
        }
        validate_description(description)?;
        if permissions.len() > ROLE_MAX_GRANTS {
            return Err(AuthError::InvalidField {
                field: "permissions",
                problem: format!(
                    "{} entries is more than the {ROLE_MAX_GRANTS} a role may hold; use \
                     wildcards such as mcp_server:*",
                    permissions.len()
                ),
            });
        }
        let mut seen = HashSet::new();
        let permissions = permissions
            .into_iter()
            .filter(|grant| seen.insert(*grant))
            .collect();
        Ok(Self {
            name,
            description: description.to_owned(),
            permissions,
            built_in: false,
        })
    }

    /// A custom role from a create request's raw fields: the name, an optional description
    /// and permission strings (`*`, `resource:*`, `resource:action`). An unknown permission is
    /// refused, naming it.
    pub fn parse_custom(
        name: &str,
        description: Option<&str>,
        permissions: &[String],
    ) -> Result<Self, AuthError> {
        let name = RoleName::parse(name)?;
        let grants = parse_grants(permissions)?;
        Self::custom(name, description.unwrap_or_default(), grants)
    }

    /// This role with a PATCH applied (`None` keeps a field). Built-in roles refuse every
    /// change (Conflict).
    pub fn updated(
        &self,
        description: Option<&str>,
        permissions: Option<&[String]>,
    ) -> Result<Self, AuthError> {
        if self.built_in {
            return Err(AuthError::BuiltInRole {
                role: self.name.clone(),
            });
        }
        let grants = match permissions {
            Some(raw) => parse_grants(raw)?,
            None => self.permissions.clone(),
        };
        Self::custom(
            self.name.clone(),
            description.unwrap_or(&self.description),
            grants,
        )
    }

    pub fn name(&self) -> &RoleName {
        &self.name
    }

    pub fn description(&self) -> &str {
        &self.description
    }

    pub fn permissions(&self) -> &[PermissionGrant] {
        &self.permissions
    }

    pub fn is_built_in(&self) -> bool {
        self.built_in
    }

    pub fn grants(&self, permission: Permission) -> bool {
        self.permissions
            .iter()
            .any(|grant| grant.grants(permission))
    }

    /// Every catalogue permission this role grants, in catalogue order (wildcards expanded).
    pub fn effective_permissions(&self) -> impl Iterator<Item = Permission> + '_ {
        Permission::ALL
            .into_iter()
            .filter(|permission| self.grants(*permission))
    }
}

fn parse_grants(raw: &[String]) -> Result<Vec<PermissionGrant>, AuthError> {
    raw.iter()
        .map(|permission| PermissionGrant::parse(permission))
        .collect()
}

fn validate_description(description: &str) -> Result<(), AuthError> {
    if description.len() > ROLE_DESCRIPTION_MAX_BYTES {
        return Err(AuthError::InvalidField {
            field: "description",
            problem: format!("it is longer than {ROLE_DESCRIPTION_MAX_BYTES} bytes"),
        });
    }
    if description.chars().any(|c| c.is_control() && c != '\n') {
        return Err(AuthError::InvalidField {
            field: "description",
            problem: "it contains a control character".to_owned(),
        });
    }
    Ok(())
}

/// Every role the gateway knows: the built-in ones and the custom ones of the store.
#[derive(Debug, Clone)]
pub struct RoleBook {
    built_in: Vec<Role>,
    custom: BTreeMap<RoleName, Role>,
}

impl Default for RoleBook {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl RoleBook {
    /// The built-in roles plus `custom`. A custom role can never shadow a built-in one: one
    /// that carries a built-in name (a store written by hand) is left out.
    pub fn new(custom: impl IntoIterator<Item = Role>) -> Self {
        Self {
            built_in: BuiltInRole::ALL.into_iter().map(Role::built_in).collect(),
            custom: custom
                .into_iter()
                .filter(|role| !role.is_built_in() && role.name().built_in().is_none())
                .map(|role| (role.name().clone(), role))
                .collect(),
        }
    }

    pub fn get(&self, name: &str) -> Option<&Role> {
        match BuiltInRole::from_name(name) {
            Some(built_in) => self.built_in.get(built_in as usize),
            None => self.custom.get(name),
        }
    }

    /// The role named `name`, or NotFound.
    pub fn require(&self, name: &str) -> Result<&Role, AuthError> {
        self.get(name).ok_or_else(|| AuthError::RoleNotFound {
            role: bounded_for_message(name),
        })
    }

    /// Built-in roles in their fixed order ([`BuiltInRole::ALL`]), then custom roles by name
    /// (`GET /api/auth/roles/all`).
    pub fn all(&self) -> impl Iterator<Item = &Role> {
        self.built_in.iter().chain(self.custom.values())
    }

    /// The custom roles by name (`GET /api/auth/roles`).
    pub fn custom(&self) -> impl Iterator<Item = &Role> {
        self.custom.values()
    }

    /// Checks a create request against the existing roles: a built-in name or an existing
    /// custom name is a Conflict.
    pub fn check_create(&self, role: &Role) -> Result<(), AuthError> {
        if role.is_built_in() || role.name().built_in().is_some() {
            return Err(AuthError::BuiltInRole {
                role: role.name().clone(),
            });
        }
        if self.custom.contains_key(role.name()) {
            return Err(AuthError::RoleAlreadyExists {
                role: role.name().clone(),
            });
        }
        Ok(())
    }

    /// The role `name` with a PATCH applied: NotFound for an unknown role, Conflict for a
    /// built-in one, Invalid for bad fields.
    pub fn check_update(
        &self,
        name: &str,
        description: Option<&str>,
        permissions: Option<&[String]>,
    ) -> Result<Role, AuthError> {
        self.require(name)?.updated(description, permissions)
    }

    /// Whether the role `name` may be deleted, given how many assignments still name it:
    /// NotFound for an unknown role, Conflict for a built-in or still assigned one.
    pub fn check_delete(&self, name: &str, assignments_naming_it: usize) -> Result<(), AuthError> {
        let role = self.require(name)?;
        if role.is_built_in() {
            return Err(AuthError::BuiltInRole {
                role: role.name().clone(),
            });
        }
        if assignments_naming_it > 0 {
            return Err(AuthError::RoleInUse {
                role: role.name().clone(),
                assignments: assignments_naming_it,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use mcpgw_core::ErrorKind;

    use super::*;

    fn strings(raw: &[&str]) -> Vec<String> {
        raw.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn role_names_follow_the_documented_syntax() {
        for good in ["admin", "a", "data-science", "team_2", &"r".repeat(64)] {
            assert_eq!(RoleName::parse(good).unwrap().as_str(), good);
        }
        // Bad names: empty, too long, uppercase, leading digit or symbol, spaces, reserved
        // path segments.
        for bad in [
            "",
            &"r".repeat(65),
            "Admin",
            "ADMIN",
            "1role",
            "_role",
            "-role",
            "data science",
            "role/x",
            "role:x",
            "rôle",
            "all",
            "assign",
            "revoke",
        ] {
            let error = RoleName::parse(bad).expect_err(bad);
            assert_eq!(error.kind(), ErrorKind::Invalid, "{bad}");
        }
        assert_eq!(
            RoleName::parse("Admin").unwrap_err().to_string(),
            "role name `Admin` is not valid: it must start with a lowercase letter"
        );
    }

    #[test]
    fn the_book_lists_built_in_roles_in_their_fixed_order_then_custom_by_name() {
        let book = RoleBook::new([
            Role::parse_custom("zeta", None, &strings(&["tool:list"])).unwrap(),
            Role::parse_custom("alpha", Some("a"), &strings(&["*"])).unwrap(),
        ]);
        let names: Vec<&str> = book.all().map(|role| role.name().as_str()).collect();
        assert_eq!(
            names,
            [
                "admin",
                "mcp_server_admin",
                "developer",
                "viewer",
                "auditor",
                "operator",
                "alpha",
                "zeta"
            ]
        );
        let custom: Vec<&str> = book.custom().map(|role| role.name().as_str()).collect();
        assert_eq!(custom, ["alpha", "zeta"]);
        for built_in in BuiltInRole::ALL {
            let role = book.get(built_in.name()).unwrap();
            assert!(role.is_built_in());
            assert_eq!(role.description(), built_in.description());
        }
        assert!(book.get("nobody").is_none());
        assert_eq!(
            book.require("nobody").unwrap_err().kind(),
            ErrorKind::NotFound
        );
    }

    #[test]
    fn custom_roles_validate_their_permissions_and_fields() {
        let role = Role::parse_custom(
            "deployer",
            Some("ships servers"),
            &strings(&[
                "mcp_server:create",
                "mcp_server:update",
                "group:*",
                "mcp_server:create",
            ]),
        )
        .unwrap();
        assert_eq!(role.description(), "ships servers");
        assert!(!role.is_built_in());
        // The repeated grant is kept once.
        assert_eq!(
            role.permissions(),
            [
                Exactly(Permission::McpServerCreate),
                Exactly(Permission::McpServerUpdate),
                AllOf(Resource::Group)
            ]
        );
        assert!(role.grants(Permission::GroupRebalance));
        assert!(!role.grants(Permission::McpServerDelete));

        // An unknown permission is refused, named.
        let error =
            Role::parse_custom("x", None, &strings(&["tool:list", "tool:fly"])).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Invalid);
        assert!(error.to_string().contains("`tool:fly`"), "{error}");
        // A bad name, a long description, a control character, too many grants.
        assert_eq!(
            Role::parse_custom("Bad Name", None, &[])
                .unwrap_err()
                .kind(),
            ErrorKind::Invalid
        );
        let long = "d".repeat(ROLE_DESCRIPTION_MAX_BYTES + 1);
        assert_eq!(
            Role::parse_custom("x", Some(&long), &[])
                .unwrap_err()
                .kind(),
            ErrorKind::Invalid
        );
        assert_eq!(
            Role::parse_custom("x", Some("bell\u{7}"), &[])
                .unwrap_err()
                .kind(),
            ErrorKind::Invalid
        );
        assert!(Role::parse_custom("x", Some("two\nlines"), &[]).is_ok());
        let many = vec!["tool:list".to_owned(); ROLE_MAX_GRANTS + 1];
        assert_eq!(
            Role::parse_custom("x", None, &many).unwrap_err().kind(),
            ErrorKind::Invalid
        );
        // A role with no permission is allowed: it grants nothing.
        let empty = Role::parse_custom("placeholder", None, &[]).unwrap();
        assert_eq!(empty.effective_permissions().count(), 0);
    }

    #[test]
    fn built_in_roles_cannot_be_created_changed_or_deleted() {
        let book = RoleBook::default();
        for built_in in BuiltInRole::ALL {
            let name = built_in.name();
            // Created as a custom role: Conflict.
            let created = Role::parse_custom(name, None, &strings(&["tool:list"])).unwrap_err();
            assert_eq!(created.kind(), ErrorKind::Conflict, "{name}");
            assert!(created.to_string().contains("is built in"), "{created}");
            // Changed: Conflict, whatever the change.
            for (description, permissions) in [
                (Some("new"), None),
                (None, Some(strings(&["*"]))),
                (None, None),
            ] {
                let error = book
                    .check_update(name, description, permissions.as_deref())
                    .unwrap_err();
                assert_eq!(error.kind(), ErrorKind::Conflict, "{name}");
            }
            // Deleted: Conflict, even when nobody holds it.
            assert_eq!(
                book.check_delete(name, 0).unwrap_err().kind(),
                ErrorKind::Conflict
            );
        }
    }

    #[test]
    fn custom_roles_are_created_once_updated_and_deleted_when_unassigned() {
        let existing = Role::parse_custom("deployer", Some("d"), &strings(&["tool:list"])).unwrap();
        let book = RoleBook::new([existing.clone()]);

        let fresh = Role::parse_custom("reader", None, &strings(&["config:read"])).unwrap();
        assert_eq!(book.check_create(&fresh), Ok(()));
        assert_eq!(
            book.check_create(&existing).unwrap_err(),
            AuthError::RoleAlreadyExists {
                role: existing.name().clone()
            }
        );

        // PATCH keeps what it does not name.
        let renamed = book
            .check_update("deployer", Some("new words"), None)
            .unwrap();
        assert_eq!(renamed.description(), "new words");
        assert_eq!(renamed.permissions(), existing.permissions());
        let regranted = book
            .check_update("deployer", None, Some(&strings(&["group:read"])))
            .unwrap();
        assert_eq!(regranted.description(), "d");
        assert_eq!(regranted.permissions(), [Exactly(Permission::GroupRead)]);
        assert_eq!(
            book.check_update("deployer", None, Some(&strings(&["group:reed"])))
                .unwrap_err()
                .kind(),
            ErrorKind::Invalid
        );
        assert_eq!(
            book.check_update("ghost", Some("x"), None)
                .unwrap_err()
                .kind(),
            ErrorKind::NotFound
        );

        assert_eq!(book.check_delete("deployer", 0), Ok(()));
        assert_eq!(
            book.check_delete("deployer", 2).unwrap_err(),
            AuthError::RoleInUse {
                role: existing.name().clone(),
                assignments: 2
            }
        );
        assert_eq!(
            book.check_delete("ghost", 0).unwrap_err().kind(),
            ErrorKind::NotFound
        );
    }

    #[test]
    fn a_stored_custom_role_never_shadows_a_built_in_one() {
        // A custom role object cannot carry a built-in name through `Role::custom`; a
        // hand-made built-in-flagged role handed to the book is ignored too.
        let mut forged = Role::built_in(BuiltInRole::Viewer);
        forged.permissions = vec![PermissionGrant::All];
        let book = RoleBook::new([forged]);
        assert!(!book.get("viewer").unwrap().grants(Permission::AuthManage));
        assert_eq!(book.custom().count(), 0);
    }
}
