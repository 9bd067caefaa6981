//! Table-driven tests of the decision: the built-in role table against the whole catalogue,
//! tenant scoping, groups, key roles, custom roles, tool access policies along a call's path,
//! identities from token claims and the external policy engine.

use mcpgw_core::{ErrorKind, ServerId, Timestamp};

use crate::*;

fn principal(raw: &str) -> Principal {
    Principal::parse(raw).unwrap()
}

fn tenant(raw: &str) -> TenantId {
    TenantId::parse(raw).unwrap()
}

fn role(raw: &str) -> RoleName {
    RoleName::parse(raw).unwrap()
}

fn assign(who: &str, role: &str, scope: &str) -> RoleAssignment {
    RoleAssignment::parse(who, role, Some(scope)).unwrap()
}

fn permission(raw: &str) -> Permission {
    Permission::parse(raw).unwrap()
}

fn server(raw: &str) -> ServerId {
    ServerId::parse(raw).unwrap()
}

fn strings(raw: &[&str]) -> Vec<String> {
    raw.iter().map(|s| (*s).to_owned()).collect()
}

/// The built-in role table (docs/auth.md), written out permission by permission. `"*"` stands
/// for the whole catalogue ("Everything").
const BUILT_IN_ROLE_TABLE: &[(&str, &[&str])] = &[
    ("admin", &["*"]),
    (
        // "All actions on MCP servers, tool invoke, tool list"
        "mcp_server_admin",
        &[
            "mcp_server:list",
            "mcp_server:read",
            "mcp_server:create",
            "mcp_server:update",
            "mcp_server:delete",
            "mcp_server:start",
            "mcp_server:stop",
            "mcp_server:logs",
            "tool:invoke",
            "tool:list",
        ],
    ),
    (
        // "MCP server read, list and start; tool invoke and list"
        "developer",
        &[
            "mcp_server:read",
            "mcp_server:list",
            "mcp_server:start",
            "tool:invoke",
            "tool:list",
        ],
    ),
    (
        // "MCP server read and list; tool list; metrics read; curated endpoint list and read"
        "viewer",
        &[
            "mcp_server:read",
            "mcp_server:list",
            "tool:list",
            "metrics:read",
            "endpoint:list",
            "endpoint:read",
        ],
    ),
    (
        // "Audit read, metrics read"
        "auditor",
        &["audit:read", "events:read", "metrics:read"],
    ),
    (
        // "Start, stop, reload, manage groups and curated endpoints"
        "operator",
        &[
            "mcp_server:start",
            "mcp_server:stop",
            "config:reload",
            "group:list",
            "group:read",
            "group:create",
            "group:update",
            "group:delete",
            "group:rebalance",
            "endpoint:list",
            "endpoint:read",
            "endpoint:create",
            "endpoint:update",
            "endpoint:delete",
        ],
    ),
];

#[test]
fn every_built_in_role_grants_exactly_its_table_row_and_nothing_else() {
    assert_eq!(BUILT_IN_ROLE_TABLE.len(), BuiltInRole::ALL.len());
    let alice = principal("user:alice");
    for (role_name, granted) in BUILT_IN_ROLE_TABLE {
        let authorizer = Authorizer::new(
            RoleBook::default(),
            [assign("user:alice", role_name, "global")],
            [],
        );
        let identity = Identity::new(alice.clone());
        for permission in Permission::ALL {
            let expected = granted.contains(&"*") || granted.contains(&permission.as_str());
            let decision = authorizer.decide(&identity, permission, None);
            if expected {
                assert_eq!(
                    decision,
                    Decision::Allow {
                        granted_by_role: role(role_name)
                    },
                    "{role_name} must grant {permission}"
                );
            } else {
                let Decision::Deny {
                    reason:
                        DenyReason::NotGranted {
                            permission: denied,
                            held_roles,
                            ..
                        },
                } = &decision
                else {
                    panic!("{role_name} must not grant {permission}: {decision:?}");
                };
                assert_eq!(*denied, permission);
                assert_eq!(held_roles, &[role(role_name)]);
            }
            // The same answer through check-permission.
            let check = authorizer.check_permission(&alice, permission);
            assert_eq!(check.allowed, expected, "{role_name} / {permission}");
            assert_eq!(
                check.granted_by_role,
                expected.then(|| role(role_name)),
                "{role_name} / {permission}"
            );
        }
        // And the role's own listing agrees.
        let listed: Vec<Permission> = RoleBook::default()
            .require(role_name)
            .unwrap()
            .effective_permissions()
            .collect();
        let expected: Vec<Permission> = Permission::ALL
            .into_iter()
            .filter(|p| granted.contains(&"*") || granted.contains(&p.as_str()))
            .collect();
        assert_eq!(listed, expected, "{role_name}");
    }
}

#[test]
fn auth_management_needs_admin_among_the_built_in_roles() {
    for built_in in BuiltInRole::ALL {
        let authorizer = Authorizer::new(
            RoleBook::default(),
            [assign("user:alice", built_in.name(), "global")],
            [],
        );
        let identity = Identity::new(principal("user:alice"));
        for auth_permission in [Permission::AuthRead, Permission::AuthManage] {
            assert_eq!(
                authorizer
                    .decide(&identity, auth_permission, None)
                    .is_allowed(),
                built_in == BuiltInRole::Admin,
                "{built_in} / {auth_permission}"
            );
        }
    }
}

#[test]
fn nobody_holds_anything_without_an_assignment() {
    let authorizer = Authorizer::new(
        RoleBook::default(),
        [assign("user:bob", "admin", "global")],
        [],
    );
    for identity in [
        Identity::new(principal("user:alice")),
        Identity::anonymous(),
        Identity::new(principal("service:bob")),
        // Same name, other kind, other case: not bob.
        Identity::new(principal("user:Bob")),
        Identity::new(principal("group:bob")),
    ] {
        for permission in Permission::ALL {
            let decision = authorizer.decide(&identity, permission, None);
            let Decision::Deny {
                reason: DenyReason::NotGranted { held_roles, .. },
            } = &decision
            else {
                panic!("{} got {permission}: {decision:?}", identity.principal);
            };
            assert!(held_roles.is_empty());
        }
    }
}

#[test]
fn tenant_assignments_apply_only_within_their_tenant() {
    let authorizer = Authorizer::new(
        RoleBook::default(),
        [
            assign("user:alice", "developer", "tenant:acme"),
            assign("user:alice", "viewer", "global"),
            assign("user:carol", "admin", "tenant:beta"),
            assign("group:ops", "operator", "tenant:acme"),
        ],
        [],
    );
    let alice = |tenant_id: Option<&str>| {
        let identity = Identity::new(principal("user:alice"));
        match tenant_id {
            Some(id) => identity.in_tenant(tenant(id)),
            None => identity,
        }
    };
    let carol = |tenant_id: Option<&str>| {
        let identity = Identity::new(principal("user:carol"));
        match tenant_id {
            Some(id) => identity.in_tenant(tenant(id)),
            None => identity,
        }
    };
    let dave_in_ops = |tenant_id: &str| {
        Identity::new(principal("user:dave"))
            .with_groups(vec![principal("group:ops")])
            .in_tenant(tenant(tenant_id))
    };
    // (identity, permission, Some(granting role) or None for a denial)
    let table: Vec<(Identity, &str, Option<&str>)> = vec![
        // Alice's developer role counts in acme only; viewer everywhere.
        (alice(Some("acme")), "tool:invoke", Some("developer")),
        (alice(Some("acme")), "mcp_server:start", Some("developer")),
        (alice(Some("beta")), "tool:invoke", None),
        (alice(None), "tool:invoke", None),
        (alice(Some("beta")), "mcp_server:list", Some("viewer")),
        (alice(None), "mcp_server:list", Some("viewer")),
        // Both roles grant mcp_server:read in acme: the first in listing order reports it.
        (alice(Some("acme")), "mcp_server:read", Some("developer")),
        // Carol is admin of beta only.
        (carol(Some("beta")), "auth:manage", Some("admin")),
        (carol(Some("acme")), "auth:manage", None),
        (carol(None), "mcp_server:list", None),
        // Group assignments are tenant-scoped the same way.
        (dave_in_ops("acme"), "mcp_server:stop", Some("operator")),
        (dave_in_ops("beta"), "mcp_server:stop", None),
        // Tenant ids compare exactly.
        (carol(Some("Beta")), "auth:manage", None),
    ];
    for (identity, requested, expected) in table {
        let decision = authorizer.decide(&identity, permission(requested), None);
        let case = format!(
            "{} in {:?} asking {requested}",
            identity.principal, identity.tenant
        );
        match expected {
            Some(granting) => assert_eq!(
                decision,
                Decision::Allow {
                    granted_by_role: role(granting)
                },
                "{case}"
            ),
            None => assert!(!decision.is_allowed(), "{case}: {decision:?}"),
        }
    }

    // A denial names the roles held elsewhere, the usual surprise.
    let Decision::Deny { reason } =
        authorizer.decide(&carol(Some("acme")), Permission::AuthManage, None)
    else {
        panic!("carol is no admin in acme");
    };
    assert_eq!(
        reason.to_string(),
        "user:carol holds no role that grants auth:manage (it holds no role here); outside \
         this request's tenant it holds admin in tenant:beta"
    );

    // check-permission without a tenant sees global assignments only; with one, that tenant's.
    let alice_principal = principal("user:alice");
    assert!(
        !authorizer
            .check_permission(&alice_principal, Permission::ToolInvoke)
            .allowed
    );
    assert_eq!(
        authorizer
            .check_permission_in(
                &alice_principal,
                Permission::ToolInvoke,
                Some(&tenant("acme"))
            )
            .granted_by_role,
        Some(role("developer"))
    );
}

#[test]
fn groups_keys_and_anonymous_hold_roles_like_any_principal() {
    let custom = Role::parse_custom("deployer", None, &strings(&["mcp_server:create"])).unwrap();
    let authorizer = Authorizer::new(
        RoleBook::new([custom]),
        [
            assign("group:ops", "operator", "global"),
            assign("group:sre", "deployer", "global"),
            assign("user:anonymous", "viewer", "global"),
            assign("user:alice", "ghost", "global"),
        ],
        [],
    );
    let in_groups = |groups: &[&str]| {
        Identity::new(principal("user:alice"))
            .with_groups(groups.iter().map(|g| principal(g)).collect())
    };
    // (identity, permission, granting role or None)
    let table: Vec<(Identity, &str, Option<&str>)> = vec![
        (
            in_groups(&["group:ops"]),
            "group:rebalance",
            Some("operator"),
        ),
        (
            in_groups(&["group:ops", "group:sre"]),
            "mcp_server:create",
            Some("deployer"),
        ),
        (
            in_groups(&["group:ops", "group:sre"]),
            "mcp_server:stop",
            Some("operator"),
        ),
        (in_groups(&["group:sre"]), "mcp_server:stop", None),
        (in_groups(&[]), "group:rebalance", None),
        // An assignment of a role nobody created grants nothing.
        (in_groups(&[]), "mcp_server:list", None),
        // Anonymous holds exactly what is assigned to user:anonymous.
        (Identity::anonymous(), "mcp_server:list", Some("viewer")),
        (Identity::anonymous(), "tool:invoke", None),
        // A key's role holds for its requests, in every tenant, on top of assignments.
        (
            Identity::new(principal("service:ci")).with_key_role(role("developer")),
            "tool:invoke",
            Some("developer"),
        ),
        (
            Identity::new(principal("service:ci"))
                .with_key_role(role("developer"))
                .in_tenant(tenant("acme")),
            "mcp_server:start",
            Some("developer"),
        ),
        (
            Identity::new(principal("service:ci")).with_key_role(role("developer")),
            "mcp_server:stop",
            None,
        ),
        (
            in_groups(&["group:ops"]).with_key_role(role("viewer")),
            "metrics:read",
            Some("viewer"),
        ),
    ];
    for (identity, requested, expected) in table {
        let decision = authorizer.decide(&identity, permission(requested), None);
        let case = format!("{identity:?} asking {requested}");
        assert_eq!(
            decision.clone().into_result().ok(),
            expected.map(role),
            "{case}: {decision:?}"
        );
    }
}

#[test]
fn the_granting_role_does_not_depend_on_assignment_order() {
    let custom = Role::parse_custom("aaa", None, &strings(&["*"])).unwrap();
    let assignments = [
        assign("user:alice", "aaa", "global"),
        assign("user:alice", "viewer", "global"),
        assign("user:alice", "admin", "global"),
        assign("user:alice", "admin", "global"),
    ];
    let mut reversed = assignments.clone();
    reversed.reverse();
    for order in [assignments.to_vec(), reversed.to_vec()] {
        let authorizer = Authorizer::new(RoleBook::new([custom.clone()]), order, []);
        let identity = Identity::new(principal("user:alice"));
        // Built-in roles come first, in their fixed order: admin before viewer before custom.
        assert_eq!(
            authorizer.decide(&identity, Permission::McpServerList, None),
            Decision::Allow {
                granted_by_role: role("admin")
            }
        );
        assert_eq!(
            authorizer.assignments_of(&identity.principal),
            [
                (role("aaa"), Scope::Global),
                (role("admin"), Scope::Global),
                (role("viewer"), Scope::Global)
            ]
        );
    }
}

#[test]
fn custom_roles_grant_what_they_list_and_changes_take_effect_in_a_new_authorizer() {
    let created = Role::parse_custom(
        "deployer",
        Some("ships servers"),
        &strings(&["mcp_server:create", "mcp_server:update", "discovery:*"]),
    )
    .unwrap();
    let assignments = [assign("user:alice", "deployer", "global")];
    let identity = Identity::new(principal("user:alice"));
    let authorizer = Authorizer::new(RoleBook::new([created.clone()]), assignments.clone(), []);
    for permission in Permission::ALL {
        let expected = matches!(
            permission,
            Permission::McpServerCreate
                | Permission::McpServerUpdate
                | Permission::DiscoveryRead
                | Permission::DiscoveryManage
                | Permission::DiscoveryScan
                | Permission::DiscoveryApprove
        );
        assert_eq!(
            authorizer.decide(&identity, permission, None).is_allowed(),
            expected,
            "{permission}"
        );
    }

    let book = RoleBook::new([created]);
    let updated = book
        .check_update("deployer", None, Some(&strings(&["config:read"])))
        .unwrap();
    let authorizer = Authorizer::new(RoleBook::new([updated]), assignments.clone(), []);
    assert!(
        !authorizer
            .decide(&identity, Permission::McpServerCreate, None)
            .is_allowed()
    );
    assert_eq!(
        authorizer.decide(&identity, Permission::ConfigRead, None),
        Decision::Allow {
            granted_by_role: role("deployer")
        }
    );

    // Once deleted, the role grants nothing even to assignments left behind.
    let authorizer = Authorizer::new(RoleBook::default(), assignments, []);
    assert!(
        !authorizer
            .decide(&identity, Permission::ConfigRead, None)
            .is_allowed()
    );
}

fn policy(scope: &str, target: &str, allow: &[&str], deny: &[&str]) -> ToolAccessPolicy {
    ToolAccessPolicy::parse(
        PolicyAddress::parse(scope, target).unwrap(),
        &strings(allow),
        &strings(deny),
    )
    .unwrap()
}

#[test]
fn every_policy_on_a_calls_path_must_admit() {
    let authorizer = Authorizer::new(
        RoleBook::default(),
        [
            assign("user:alice", "developer", "global"),
            assign("user:bob", "developer", "global"),
            assign("service:ci", "developer", "global"),
            assign("user:root", "admin", "global"),
            assign("user:eve", "viewer", "global"),
        ],
        [
            // The math server: only ops members and the ci service.
            policy("provider", "math", &["group:ops", "service:ci"], &[]),
            // One dangerous tool of it: never alice.
            policy("tool", "math__wipe", &[], &["user:alice"]),
            // The pool group: no services.
            policy("group", "pool", &[], &["service:*"]),
            // The pool's add tool: everyone (which cannot override other policies).
            policy("tool", "pool__add", &["*"], &[]),
            // An open server with an empty policy.
            policy("mcp_server", "open", &[], &[]),
            // Nobody at all may use this tool, admins included.
            policy("tool", "open__shutdown", &[], &["*"]),
        ],
    );
    let ops = vec![principal("group:ops")];
    let alice = Identity::new(principal("user:alice")).with_groups(ops.clone());
    let bob = Identity::new(principal("user:bob"));
    let ci = Identity::new(principal("service:ci"));
    let root = Identity::new(principal("user:root"));
    let eve = Identity::new(principal("user:eve")).with_groups(ops);

    let math = server("math");
    let open = server("open");
    let pool = server("pool");
    let server_tool = |owner: &ServerId, tool: &str| AccessPath::server_tool(owner, tool).unwrap();
    let group_tool = |tool: &str, member: Option<&ServerId>| {
        AccessPath::group_tool(&pool, tool, member).unwrap()
    };

    enum Expect {
        Allowed(&'static str),
        NotGranted,
        DeniedBy(&'static str, &'static str),
        NotAllowedBy(&'static str),
    }
    use Expect::*;
    // (identity, permission, path, expected)
    let table: Vec<(&Identity, Permission, AccessPath, Expect)> = vec![
        (
            &alice,
            Permission::ToolInvoke,
            server_tool(&math, "add"),
            Allowed("developer"),
        ),
        (
            &alice,
            Permission::ToolInvoke,
            server_tool(&math, "wipe"),
            DeniedBy("tool/math__wipe", "user:alice"),
        ),
        (
            &bob,
            Permission::ToolInvoke,
            server_tool(&math, "add"),
            NotAllowedBy("provider/math"),
        ),
        (
            &ci,
            Permission::ToolInvoke,
            server_tool(&math, "wipe"),
            Allowed("developer"),
        ),
        // The admin role does not lift policies.
        (
            &root,
            Permission::ToolInvoke,
            server_tool(&math, "add"),
            NotAllowedBy("provider/math"),
        ),
        (
            &root,
            Permission::ToolInvoke,
            server_tool(&open, "shutdown"),
            DeniedBy("tool/open__shutdown", "*"),
        ),
        (
            &root,
            Permission::ToolInvoke,
            server_tool(&open, "echo"),
            Allowed("admin"),
        ),
        // Roles are checked first: a viewer cannot invoke, whatever the policies say.
        (
            &eve,
            Permission::ToolInvoke,
            server_tool(&math, "add"),
            NotGranted,
        ),
        (
            &eve,
            Permission::ToolList,
            server_tool(&math, "add"),
            Allowed("viewer"),
        ),
        // Tools of servers without policies are open to whoever holds the permission.
        (
            &bob,
            Permission::ToolInvoke,
            server_tool(&server("other"), "x"),
            Allowed("developer"),
        ),
        // Through the pool: the group policy refuses services even where the tool allows "*".
        (
            &ci,
            Permission::ToolInvoke,
            group_tool("add", None),
            DeniedBy("group/pool", "service:*"),
        ),
        (
            &bob,
            Permission::ToolInvoke,
            group_tool("add", None),
            Allowed("developer"),
        ),
        // With the member known, the member's server and tool policies apply as well.
        (
            &bob,
            Permission::ToolInvoke,
            group_tool("add", Some(&math)),
            NotAllowedBy("provider/math"),
        ),
        (
            &alice,
            Permission::ToolInvoke,
            group_tool("add", Some(&math)),
            Allowed("developer"),
        ),
        (
            &alice,
            Permission::ToolInvoke,
            group_tool("wipe", Some(&math)),
            DeniedBy("tool/math__wipe", "user:alice"),
        ),
        (
            &bob,
            Permission::ToolInvoke,
            group_tool("add", Some(&open)),
            Allowed("developer"),
        ),
    ];
    for (identity, requested, path, expected) in table {
        let decision = authorizer.decide(identity, requested, Some(&path));
        let case = format!(
            "{} {requested} on {:?}",
            identity.principal,
            path.addresses()
        );
        match (expected, &decision) {
            (Allowed(by), Decision::Allow { granted_by_role }) => {
                assert_eq!(granted_by_role.as_str(), by, "{case}");
            }
            (
                NotGranted,
                Decision::Deny {
                    reason: DenyReason::NotGranted { .. },
                },
            ) => {}
            (
                DeniedBy(at, entry),
                Decision::Deny {
                    reason:
                        DenyReason::DeniedByPolicy {
                            policy, pattern, ..
                        },
                },
            ) => {
                assert_eq!(policy.to_string(), at, "{case}");
                assert_eq!(pattern.to_string(), entry, "{case}");
            }
            (
                NotAllowedBy(at),
                Decision::Deny {
                    reason: DenyReason::NotInAllowList { policy, .. },
                },
            ) => {
                assert_eq!(policy.to_string(), at, "{case}");
            }
            _ => panic!("{case}: unexpected {decision:?}"),
        }
        // The policy part alone agrees with the decision for those who hold the permission.
        if !matches!(
            decision,
            Decision::Deny {
                reason: DenyReason::NotGranted { .. }
            }
        ) {
            assert_eq!(
                authorizer.admits(identity, &path).is_ok(),
                decision.is_allowed(),
                "{case}"
            );
        }
    }
    // Without a path, only roles decide.
    assert!(
        authorizer
            .decide(&bob, Permission::ToolInvoke, None)
            .is_allowed()
    );
    assert_eq!(
        authorizer
            .policy(&PolicyAddress::parse("mcp_server", "math").unwrap())
            .map(|policy| policy.allow_list().len()),
        Some(2)
    );
}

#[test]
fn deny_reasons_explain_themselves_for_the_log_and_clients_see_access_denied() {
    let authorizer = Authorizer::new(
        RoleBook::default(),
        [
            assign("user:alice", "viewer", "global"),
            assign("user:alice", "developer", "global"),
        ],
        [
            policy("provider", "math", &["group:ops"], &[]),
            policy("tool", "math__wipe", &[], &["user:alice"]),
        ],
    );
    let alice = Identity::new(principal("user:alice"));
    let math = server("math");
    let messages = [
        (
            authorizer.decide(&alice, Permission::McpServerDelete, None),
            "user:alice holds no role that grants mcp_server:delete (it holds developer, viewer)",
        ),
        (
            authorizer.decide(
                &alice,
                Permission::ToolInvoke,
                Some(&AccessPath::server_tool(&math, "wipe").unwrap()),
            ),
            "tool access policy tool/math__wipe denies user:alice (deny_list entry `user:alice`)",
        ),
        (
            authorizer.decide(
                &alice,
                Permission::ToolInvoke,
                Some(&AccessPath::server_tool(&math, "add").unwrap()),
            ),
            "the allow_list of tool access policy provider/math names neither user:alice nor its \
             groups",
        ),
    ];
    for (decision, message) in messages {
        let Decision::Deny { reason } = decision.clone() else {
            panic!("{decision:?}");
        };
        assert_eq!(reason.to_string(), message);
        let error = decision.into_result().unwrap_err();
        assert_eq!(error.to_string(), "Access denied");
        assert_eq!(error.to_string(), ACCESS_DENIED_MESSAGE);
        assert_eq!(error.kind(), ErrorKind::Forbidden);
    }
}

#[test]
fn the_external_engine_can_only_take_permissions_away() {
    let alice = Identity::new(principal("user:alice"));
    let allowed = Decision::Allow {
        granted_by_role: role("developer"),
    };
    let denied = Authorizer::default().decide(&alice, Permission::ToolInvoke, None);
    assert!(!denied.is_allowed());

    // (decision before, engine answer, allowed after, detail in the reason)
    let table = [
        (allowed.clone(), Ok(true), true, ""),
        (allowed.clone(), Ok(false), false, "it answered deny"),
        (
            allowed.clone(),
            Err(DeciderError("timed out after 2 s".to_owned())),
            false,
            "it gave no answer (timed out after 2 s), which denies",
        ),
        // A denial stays a denial, whatever the engine says.
        (denied.clone(), Ok(true), false, ""),
    ];
    for (before, answer, expected, detail) in table {
        let after = before
            .clone()
            .and_external(&alice, Permission::ToolInvoke, answer.clone());
        assert_eq!(after.is_allowed(), expected, "{before:?} + {answer:?}");
        if expected {
            assert_eq!(after, before);
        } else if before.is_allowed() {
            let Decision::Deny {
                reason:
                    DenyReason::ExternalPolicy {
                        detail: found,
                        principal,
                        permission,
                    },
            } = after
            else {
                panic!("{after:?}");
            };
            assert_eq!(found, detail);
            assert_eq!(principal, alice.principal);
            assert_eq!(permission, Permission::ToolInvoke);
        } else {
            assert_eq!(after, before);
        }
    }

    let input = PolicyInput::new(
        &alice.clone().in_tenant(tenant("acme")),
        Permission::ToolInvoke,
        Some("tool/math__add".to_owned()),
    );
    assert_eq!(input.principal, alice.principal);
    assert_eq!(input.tenant, Some(tenant("acme")));
    assert_eq!(input.action.as_str(), "tool:invoke");
}

#[test]
fn identities_come_from_keys_and_token_claims() {
    let now = Timestamp::from_unix_micros(0);
    let record = NewApiKey::parse(
        "service:ci",
        "ci",
        Some("developer"),
        None,
        &RoleBook::default(),
    )
    .unwrap();
    let key_identity = Identity::for_api_key(&ApiKeyRecord {
        id: KeyId::parse("key_1").unwrap(),
        name: record.name,
        principal: record.principal,
        role: record.role,
        prefix: "mcp_AAAAAAAA".to_owned(),
        hash: KeyHash::of("x"),
        created_at: now,
        expires_at: None,
        revoked_at: None,
    });
    assert_eq!(key_identity.principal, principal("service:ci"));
    assert_eq!(key_identity.key_role, Some(role("developer")));
    assert!(key_identity.groups.is_empty() && key_identity.tenant.is_none());

    let claims = |subject: &str, groups: &[&str], tenant_claim: Option<&str>| VerifiedClaims {
        subject: subject.to_owned(),
        groups: strings(groups),
        tenant: tenant_claim.map(str::to_owned),
        scopes: None,
        expires_at: now,
    };
    let identity = Identity::from_claims(&claims(
        "alice@example.com",
        &["ops", "Domain Users", "ops"],
        Some("acme"),
    ))
    .unwrap();
    assert_eq!(identity.principal, principal("user:alice@example.com"));
    assert_eq!(
        identity.groups,
        [principal("group:ops"), principal("group:Domain Users")]
    );
    assert_eq!(identity.tenant, Some(tenant("acme")));
    assert_eq!(identity.key_role, None);

    // Claims that name no principal or tenant refuse the token, naming the claim.
    let table = [
        (claims("", &[], None), "subject"),
        (claims("*", &[], None), "subject"),
        (claims("a\u{0}b", &[], None), "subject"),
        (claims("alice", &[""], None), "groups"),
        (claims("alice", &["ops", "*"], None), "groups"),
        (claims("alice", &[" padded"], None), "groups"),
        (claims("alice", &[], Some("")), "tenant"),
        (claims("alice", &[], Some("a b")), "tenant"),
    ];
    for (bad, claim) in table {
        let error = Identity::from_claims(&bad).unwrap_err();
        assert_eq!(
            error,
            AuthError::InvalidToken {
                reason: TokenRejection::InvalidClaim(claim.to_owned())
            },
            "{bad:?}"
        );
        assert_eq!(error.to_string(), NO_CREDENTIALS_MESSAGE);
    }
}

#[test]
fn every_error_kind_maps_to_its_documented_kind() {
    let table = [
        (AuthError::NoCredentials, ErrorKind::Unauthenticated),
        (
            AuthError::InvalidApiKey {
                reason: KeyRejection::Unknown,
            },
            ErrorKind::Unauthenticated,
        ),
        (
            AuthError::InvalidToken {
                reason: TokenRejection::BadSignature,
            },
            ErrorKind::Unauthenticated,
        ),
        (
            AuthError::BuiltInRole {
                role: role("admin"),
            },
            ErrorKind::Conflict,
        ),
        (
            AuthError::RoleAlreadyExists { role: role("x") },
            ErrorKind::Conflict,
        ),
        (
            AuthError::KeyNotFound {
                key_id: "key_1".to_owned(),
            },
            ErrorKind::NotFound,
        ),
        (
            AuthError::AssignmentNotFound {
                principal: principal("user:alice"),
                role: role("viewer"),
                scope: Scope::Global,
            },
            ErrorKind::NotFound,
        ),
        (
            AuthError::PolicyNotFound {
                address: PolicyAddress::parse("tool", "math__add").unwrap(),
            },
            ErrorKind::NotFound,
        ),
        (
            AuthError::Store(StoreError("disk full".to_owned())),
            ErrorKind::Internal,
        ),
    ];
    for (error, kind) in table {
        assert_eq!(error.kind(), kind, "{error:?}");
        let message = error.to_string();
        assert!(!message.is_empty() && !message.ends_with('.'), "{message}");
    }
    // The three messages clients see are the fixed ones, byte for byte.
    assert_eq!(
        AuthError::NoCredentials.to_string(),
        "No valid credentials provided"
    );
    assert_eq!(
        AuthError::InvalidApiKey {
            reason: KeyRejection::Revoked {
                revoked_at: Timestamp::from_unix_micros(0)
            }
        }
        .to_string(),
        "Invalid API key"
    );
    assert_eq!(INVALID_API_KEY_MESSAGE, "Invalid API key");
    assert_eq!(
        AuthError::AssignmentNotFound {
            principal: principal("user:alice"),
            role: role("viewer"),
            scope: Scope::Global,
        }
        .to_string(),
        "`user:alice` does not hold role `viewer` in scope `global`; GET \
         /api/auth/principals/roles?principal=user:alice lists its roles"
    );
}

#[test]
fn a_tokens_scopes_narrow_what_its_roles_allow_and_never_widen_it() {
    let authorizer = Authorizer::new(
        RoleBook::default(),
        [
            assign("user:alice", "admin", "global"),
            assign("user:victor", "viewer", "global"),
        ],
        [],
    );
    let map = ScopeMap::new();
    let scoped = |who: &str, scopes: &[&str]| Identity {
        scope_limit: Some(map.limit(scopes)),
        ..Identity::new(principal(who))
    };
    let math_add = AccessPath::server_tool(&server("math"), "add").unwrap();
    let web_fetch = AccessPath::server_tool(&server("web"), "fetch").unwrap();

    // An admin whose token carries `mcp:tools` may call tools and nothing else.
    let alice_tools = scoped("user:alice", &["openid", "mcp:tools"]);
    assert!(
        authorizer
            .decide(&alice_tools, permission("tool:invoke"), Some(&math_add))
            .is_allowed()
    );
    match authorizer.decide(&alice_tools, permission("mcp_server:create"), None) {
        Decision::Deny {
            reason: DenyReason::OutsideTokenScope { scopes, needed, .. },
        } => {
            assert_eq!(scopes, "openid mcp:tools");
            assert_eq!(needed, "mcp:admin");
        }
        other => panic!("a tools-only token must not create servers: {other:?}"),
    }

    // `mcp:tools:math` opens math's tools, in calls and in listings, and no other server's.
    let alice_math = scoped("user:alice", &["mcp:tools:math"]);
    assert!(
        authorizer
            .decide(&alice_math, permission("tool:invoke"), Some(&math_add))
            .is_allowed()
    );
    assert!(
        !authorizer
            .decide(&alice_math, permission("tool:invoke"), Some(&web_fetch))
            .is_allowed()
    );
    assert!(authorizer.admits(&alice_math, &math_add).is_ok());
    assert!(matches!(
        authorizer.admits(&alice_math, &web_fetch),
        Err(DenyReason::OutsideTokenScope { .. })
    ));

    // A viewer's `mcp:admin` token is still a viewer: scopes never grant.
    let victor_admin = scoped("user:victor", &["mcp:admin"]);
    assert!(
        authorizer
            .decide(&victor_admin, permission("tool:list"), None)
            .is_allowed()
    );
    assert!(matches!(
        authorizer.decide(&victor_admin, permission("tool:invoke"), Some(&math_add)),
        Decision::Deny {
            reason: DenyReason::NotGranted { .. }
        }
    ));

    // A token without any scope the gateway reads is held to nothing.
    let alice_none = scoped("user:alice", &["openid", "profile"]);
    assert!(
        !authorizer
            .decide(&alice_none, permission("tool:list"), None)
            .is_allowed()
    );
    // And a token of an issuer that does not narrow is judged by the roles alone.
    let alice_unscoped = Identity::new(principal("user:alice"));
    assert!(
        authorizer
            .decide(&alice_unscoped, permission("auth:manage"), None)
            .is_allowed()
    );
}
