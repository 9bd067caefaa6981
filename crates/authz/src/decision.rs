//! The decision: may this identity do this, here?
//!
//! Roles answer whether the identity holds the permission at all (through an assignment to
//! itself or to one of its groups, global or in the request's tenant, or through the role its
//! API key carries); tool access policies then answer whether it may do so on the tool, server
//! and group at hand. Every refusal carries a [`DenyReason`].

use std::collections::HashMap;
use std::fmt;

use crate::api_key::ApiKeyRecord;
use crate::assignment::RoleAssignment;
use crate::error::AuthError;
use crate::permission::Permission;
use crate::policy::{AccessPath, PolicyAddress, ToolAccessPolicy};
use crate::ports::{DeciderError, TokenRejection, VerifiedClaims};
use crate::principal::{Principal, PrincipalKind, PrincipalPattern};
use crate::role::{BuiltInRole, Role, RoleBook, RoleName};
use crate::scope::{Scope, TenantId};
use crate::token_scope::ScopeLimit;

/// Who is asking, as authentication established it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub principal: Principal,
    /// The groups it belongs to, as `group:<name>` principals (from a token's groups claim).
    pub groups: Vec<Principal>,
    /// The tenant the request is made in (from a token's tenant claim); `None`: only global
    /// assignments apply.
    pub tenant: Option<TenantId>,
    /// The role the API key used carries, held globally for this request only.
    pub key_role: Option<RoleName>,
    /// The scopes of the OAuth access token used, when its issuer narrows by scope: a ceiling
    /// on what the roles grant. `None`: the roles alone decide (API keys, anonymous callers,
    /// tokens of an issuer that does not narrow).
    pub scope_limit: Option<ScopeLimit>,
}

impl Identity {
    /// A principal with no groups, no tenant and no key role.
    pub fn new(principal: Principal) -> Self {
        Self {
            principal,
            groups: Vec::new(),
            tenant: None,
            key_role: None,
            scope_limit: None,
        }
    }

    /// `user:anonymous`: a request without credentials where anonymous access is allowed.
    pub fn anonymous() -> Self {
        Self::new(Principal::anonymous())
    }

    /// The holder of a key that passed [`ApiKeyRecord::check`].
    pub fn for_api_key(record: &ApiKeyRecord) -> Self {
        Self {
            key_role: record.role.clone(),
            ..Self::new(record.principal.clone())
        }
    }

    /// The holder of a verified token: `user:<subject>`, `group:<g>` for each group, and the
    /// tenant. A claim that names no principal or tenant (empty, a control character, `*`)
    /// refuses the token, rather than quietly dropping a group that a deny list may name.
    pub fn from_claims(claims: &VerifiedClaims) -> Result<Self, AuthError> {
        let invalid = |claim: &str| AuthError::InvalidToken {
            reason: TokenRejection::InvalidClaim(claim.to_owned()),
        };
        let principal =
            Principal::new(PrincipalKind::User, &claims.subject).map_err(|_| invalid("subject"))?;
        let mut groups = Vec::with_capacity(claims.groups.len());
        for group in &claims.groups {
            let group = Principal::group(group).map_err(|_| invalid("groups"))?;
            if !groups.contains(&group) {
                groups.push(group);
            }
        }
        let tenant = claims
            .tenant
            .as_deref()
            .map(TenantId::parse)
            .transpose()
            .map_err(|_| invalid("tenant"))?;
        Ok(Self {
            principal,
            groups,
            tenant,
            key_role: None,
            scope_limit: claims.scopes.clone(),
        })
    }

    #[must_use]
    pub fn with_groups(mut self, groups: Vec<Principal>) -> Self {
        self.groups = groups;
        self
    }

    #[must_use]
    pub fn in_tenant(mut self, tenant: TenantId) -> Self {
        self.tenant = Some(tenant);
        self
    }

    #[must_use]
    pub fn with_key_role(mut self, role: RoleName) -> Self {
        self.key_role = Some(role);
        self
    }
}

/// Why a request was refused. Clients see `Access denied`; logs and events see this.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DenyReason {
    /// No role the identity holds here grants the permission.
    NotGranted {
        principal: Principal,
        permission: Permission,
        /// The roles it holds in the request's scope (its own, its groups', its key's).
        held_roles: Vec<RoleName>,
        /// Roles it holds only in other tenants: the usual cause of a surprising denial.
        roles_in_other_tenants: Vec<(RoleName, TenantId)>,
    },
    /// A deny list names the principal or one of its groups.
    DeniedByPolicy {
        principal: Principal,
        policy: PolicyAddress,
        pattern: PrincipalPattern,
    },
    /// A non-empty allow list names neither the principal nor its groups.
    NotInAllowList {
        principal: Principal,
        policy: PolicyAddress,
    },
    /// The roles grant it, but none of the access token's scopes covers it.
    OutsideTokenScope {
        principal: Principal,
        permission: Permission,
        /// The scopes the token carried (space-separated; `(no scope)` when none).
        scopes: String,
        /// The scope that would cover it.
        needed: &'static str,
    },
    /// The external policy engine denied, or gave no answer (which denies).
    ExternalPolicy {
        principal: Principal,
        permission: Permission,
        detail: String,
    },
}

impl fmt::Display for DenyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DenyReason::NotGranted {
                principal,
                permission,
                held_roles,
                roles_in_other_tenants,
            } => {
                write!(f, "{principal} holds no role that grants {permission}")?;
                if held_roles.is_empty() {
                    f.write_str(" (it holds no role here)")?;
                } else {
                    let names: Vec<&str> = held_roles.iter().map(RoleName::as_str).collect();
                    write!(f, " (it holds {})", names.join(", "))?;
                }
                if !roles_in_other_tenants.is_empty() {
                    let elsewhere: Vec<String> = roles_in_other_tenants
                        .iter()
                        .map(|(role, tenant)| format!("{role} in tenant:{tenant}"))
                        .collect();
                    write!(
                        f,
                        "; outside this request's tenant it holds {}",
                        elsewhere.join(", ")
                    )?;
                }
                Ok(())
            }
            DenyReason::DeniedByPolicy {
                principal,
                policy,
                pattern,
            } => write!(
                f,
                "tool access policy {policy} denies {principal} (deny_list entry `{pattern}`)"
            ),
            DenyReason::NotInAllowList { principal, policy } => write!(
                f,
                "the allow_list of tool access policy {policy} names neither {principal} nor \
                 its groups"
            ),
            DenyReason::OutsideTokenScope {
                principal,
                permission,
                scopes,
                needed,
            } => write!(
                f,
                "{principal} holds {permission}, but its access token's scopes ({scopes}) do \
                 not cover it; `{needed}` would"
            ),
            DenyReason::ExternalPolicy {
                principal,
                permission,
                detail,
            } => write!(
                f,
                "the external policy engine did not allow {principal} {permission}: {detail}"
            ),
        }
    }
}

/// The answer to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow { granted_by_role: RoleName },
    Deny { reason: DenyReason },
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allow { .. })
    }

    /// The granting role, or `Access denied` with the reason.
    pub fn into_result(self) -> Result<RoleName, AuthError> {
        match self {
            Decision::Allow { granted_by_role } => Ok(granted_by_role),
            Decision::Deny { reason } => Err(AuthError::AccessDenied { reason }),
        }
    }

    /// Folds in the answer of the external policy engine, asked after this decision allowed:
    /// only an explicit `true` keeps it; `false` and no answer deny. A denial stays as it was
    /// (the engine need not be asked then).
    #[must_use]
    pub fn and_external(
        self,
        identity: &Identity,
        permission: Permission,
        answer: Result<bool, DeciderError>,
    ) -> Decision {
        if !self.is_allowed() {
            return self;
        }
        let detail = match answer {
            Ok(true) => return self,
            Ok(false) => "it answered deny".to_owned(),
            Err(error) => format!("it gave no answer ({error}), which denies"),
        };
        Decision::Deny {
            reason: DenyReason::ExternalPolicy {
                principal: identity.principal.clone(),
                permission,
                detail,
            },
        }
    }
}

/// The answer of `POST /api/auth/check-permission`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionCheck {
    pub allowed: bool,
    pub granted_by_role: Option<RoleName>,
}

/// Roles, assignments and policies, indexed for deciding. Build one whenever they change (it
/// is cheap) and share it: deciding reads only the assignments of the identity's own
/// principals and the policies on the path, so its cost does not grow with the number of
/// principals, keys or policies.
#[derive(Debug, Clone, Default)]
pub struct Authorizer {
    roles: RoleBook,
    assignments: HashMap<Principal, Vec<(RoleName, Scope)>>,
    policies: HashMap<PolicyAddress, ToolAccessPolicy>,
}

impl Authorizer {
    /// Assignments that name a role `roles` does not know (a static assignment of a custom
    /// role never created) are kept and grant nothing.
    pub fn new(
        roles: RoleBook,
        assignments: impl IntoIterator<Item = RoleAssignment>,
        policies: impl IntoIterator<Item = ToolAccessPolicy>,
    ) -> Self {
        let mut by_principal: HashMap<Principal, Vec<(RoleName, Scope)>> = HashMap::new();
        for assignment in assignments {
            let held = by_principal.entry(assignment.principal).or_default();
            let entry = (assignment.role, assignment.scope);
            if !held.contains(&entry) {
                held.push(entry);
            }
        }
        for held in by_principal.values_mut() {
            held.sort();
        }
        Self {
            roles,
            assignments: by_principal,
            policies: policies
                .into_iter()
                .map(|policy| (policy.address().clone(), policy))
                .collect(),
        }
    }

    pub fn roles(&self) -> &RoleBook {
        &self.roles
    }

    /// The assignments made to `principal` itself (not through its groups), sorted by role
    /// then scope: `GET /api/auth/principals/roles`.
    pub fn assignments_of(&self, principal: &Principal) -> &[(RoleName, Scope)] {
        self.assignments.get(principal).map_or(&[], Vec::as_slice)
    }

    pub fn policy(&self, address: &PolicyAddress) -> Option<&ToolAccessPolicy> {
        self.policies.get(address)
    }

    /// May `identity` do `permission`, and, when `path` is given, on what the path leads to?
    /// Roles first (the granting role is reported), then every policy on the path.
    pub fn decide(
        &self,
        identity: &Identity,
        permission: Permission,
        path: Option<&AccessPath>,
    ) -> Decision {
        let granted_by_role = match self.granting_role(identity, permission) {
            Ok(role) => role,
            Err(reason) => return Decision::Deny { reason },
        };
        if let Some(path) = path
            && let Err(reason) = self.admits_by_policy(identity, path)
        {
            return Decision::Deny { reason };
        }
        if let Err(reason) = self.within_token_scope(identity, permission, path) {
            return Decision::Deny { reason };
        }
        Decision::Allow { granted_by_role }
    }

    /// Whether the access token's scopes (if it is held to them) cover `permission` on `path`.
    fn within_token_scope(
        &self,
        identity: &Identity,
        permission: Permission,
        path: Option<&AccessPath>,
    ) -> Result<(), DenyReason> {
        match &identity.scope_limit {
            Some(limit) if !limit.covers(permission, path, &self.roles) => {
                Err(DenyReason::OutsideTokenScope {
                    principal: identity.principal.clone(),
                    permission,
                    scopes: limit.to_string(),
                    needed: ScopeLimit::needed_for(permission),
                })
            }
            _ => Ok(()),
        }
    }

    /// Whether every policy on `path` admits `identity`, roles aside, and the access token's
    /// scopes (if it is held to them) cover listing what the path leads to: what filters a tool
    /// list once the caller is known to hold `tool:list`. Policies apply to every principal,
    /// holders of `admin` included.
    pub fn admits(&self, identity: &Identity, path: &AccessPath) -> Result<(), DenyReason> {
        self.admits_by_policy(identity, path)?;
        self.within_token_scope(identity, Permission::ToolList, Some(path))
    }

    fn admits_by_policy(&self, identity: &Identity, path: &AccessPath) -> Result<(), DenyReason> {
        for address in path.addresses() {
            if let Some(policy) = self.policies.get(address) {
                policy.admits(&identity.principal, &identity.groups)?;
            }
        }
        Ok(())
    }

    /// `POST /api/auth/check-permission`: whether `principal` holds `permission` through its
    /// own global assignments (groups come from tokens and keys' roles from keys, so neither is
    /// known for a bare principal).
    pub fn check_permission(
        &self,
        principal: &Principal,
        permission: Permission,
    ) -> PermissionCheck {
        self.check_permission_in(principal, permission, None)
    }

    /// As [`Authorizer::check_permission`], for a request made in `tenant`.
    pub fn check_permission_in(
        &self,
        principal: &Principal,
        permission: Permission,
        tenant: Option<&TenantId>,
    ) -> PermissionCheck {
        let mut identity = Identity::new(principal.clone());
        identity.tenant = tenant.cloned();
        match self.granting_role(&identity, permission) {
            Ok(role) => PermissionCheck {
                allowed: true,
                granted_by_role: Some(role),
            },
            Err(_) => PermissionCheck {
                allowed: false,
                granted_by_role: None,
            },
        }
    }

    /// The role that grants `permission` to `identity`; where several do, the first in the
    /// order roles are listed (built-in roles in their fixed order, then custom roles by name),
    /// so the answer does not depend on the order assignments were made in.
    fn granting_role(
        &self,
        identity: &Identity,
        permission: Permission,
    ) -> Result<RoleName, DenyReason> {
        let mut held: Vec<&RoleName> = Vec::new();
        let mut elsewhere: Vec<(RoleName, TenantId)> = Vec::new();
        let principals = std::iter::once(&identity.principal).chain(&identity.groups);
        for principal in principals {
            for (role, scope) in self.assignments_of(principal) {
                if scope.applies_within(identity.tenant.as_ref()) {
                    held.push(role);
                } else if let Scope::Tenant(tenant) = scope {
                    elsewhere.push((role.clone(), tenant.clone()));
                }
            }
        }
        held.extend(identity.key_role.as_ref());
        held.sort_by_key(|role| listing_rank(role));
        held.dedup();

        let granting = held
            .iter()
            .filter_map(|name| self.roles.get(name.as_str()))
            .find(|role| role.grants(permission))
            .map(Role::name);
        if let Some(role) = granting {
            return Ok(role.clone());
        }
        elsewhere.sort();
        elsewhere.dedup();
        Err(DenyReason::NotGranted {
            principal: identity.principal.clone(),
            permission,
            held_roles: held.into_iter().cloned().collect(),
            roles_in_other_tenants: elsewhere,
        })
    }
}

/// Built-in roles in their fixed order ([`BuiltInRole::ALL`]), then custom roles by name.
fn listing_rank(role: &RoleName) -> (usize, &str) {
    match role.built_in() {
        Some(built_in) => (built_in as usize, ""),
        None => (BuiltInRole::ALL.len(), role.as_str()),
    }
}
