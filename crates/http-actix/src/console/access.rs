//! The access page: API keys (a new key is shown once, right after it is made; revoking ends
//! every console session opened with it), the roles with what they grant, who holds which
//! role, the tool access policies, and "why is this denied": what the gateway decides when a
//! principal calls a tool, and the reason when it refuses.
//!
//! Every change made here is the REST API's own: each form becomes the JSON body of the route
//! it stands for and goes to that route's handler, so the page refuses what the API refuses,
//! with the API's message and status. A form whose change succeeds leads back to the page with
//! a notice; one the API refuses is shown again, filled in, with the message.

use std::collections::BTreeSet;

use actix_web::http::StatusCode;
use actix_web::web::Bytes;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use mcpgw_gateway::{CreateKeyRequest, Gateway, ResolvedTool, ToolNaming};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::page::encode_component;
use super::{Chrome, Problem, Visitor, render, see_other, visitor};
use crate::dto::{ApiKeyView, PermissionView, PolicyView, RoleView};
use crate::error::ApiError;
use crate::state::ApiState;

pub(crate) struct KeyRow {
    pub key: ApiKeyView,
    pub revoke: String,
}

/// A key just made: shown on this page and never again.
pub(crate) struct NewKey {
    pub raw: String,
    pub name: String,
    pub principal: String,
}

/// One role a principal holds, with whether the configuration file gave it (such an
/// assignment is not revoked here, as the API does not revoke it).
pub(crate) struct HeldRow {
    pub role: String,
    pub scope: String,
    pub from_config: bool,
}

/// A principal with the roles it holds and its keys.
pub(crate) struct PrincipalRow {
    pub principal: String,
    pub held: Vec<HeldRow>,
    pub active_keys: usize,
    pub total_keys: usize,
}

/// One checkbox of a role's permissions.
pub(crate) struct Choice {
    pub id: String,
    pub value: String,
    pub hint: String,
    pub checked: bool,
}

/// A custom role as its form to change it shows it.
pub(crate) struct RoleEdit {
    pub name: String,
    pub description: String,
    pub update: String,
    pub choices: Vec<Choice>,
}

/// A role in the table, with where its delete button posts (custom roles only).
pub(crate) struct RoleRow {
    pub role: RoleView,
    pub delete: String,
}

/// What a form the API refused held, to show it again.
#[derive(Default)]
pub(crate) struct Typed {
    pub principal: String,
    pub role: String,
    pub scope: String,
    pub role_name: String,
    pub role_description: String,
    pub role_permissions: BTreeSet<String>,
    pub policy_scope: String,
    pub policy_target: String,
    pub policy_allow: String,
    pub policy_deny: String,
}

/// What the visitor's roles let it change on this page: a control is shown only when the
/// REST route it stands for is open to the visitor.
pub(crate) struct Controls {
    pub keys: bool,
    pub assign: bool,
    pub unassign: bool,
    pub create_role: bool,
    pub edit_role: bool,
    pub delete_role: bool,
    pub set_policy: bool,
    pub delete_policy: bool,
}

impl Controls {
    fn of(visitor: &Visitor) -> Self {
        Self {
            keys: visitor.may("POST", "/api/auth/keys"),
            assign: visitor.may("POST", ASSIGN_ROUTE),
            unassign: visitor.may("DELETE", REVOKE_ROUTE),
            create_role: visitor.may("POST", ROLES_ROUTE),
            edit_role: visitor.may("PATCH", ROLE_ROUTE),
            delete_role: visitor.may("DELETE", ROLE_ROUTE),
            set_policy: visitor.may("POST", POLICY_ROUTE),
            delete_policy: visitor.may("DELETE", POLICY_ROUTE),
        }
    }
}

/// The REST routes the page's actions stand for.
const ASSIGN_ROUTE: &str = "/api/auth/roles/assign";
const REVOKE_ROUTE: &str = "/api/auth/roles/revoke";
const ROLES_ROUTE: &str = "/api/auth/roles";
const ROLE_ROUTE: &str = "/api/auth/roles/{role_name}";
const POLICY_ROUTE: &str = "/api/auth/policies/{scope}/{target_id}";

/// The scopes a tool access policy takes, as the form offers them.
const POLICY_SCOPES: [&str; 3] = ["provider", "group", "tool"];

#[derive(Template)]
#[template(path = "access.html")]
struct AccessPage {
    chrome: Chrome,
    enabled: bool,
    keys: Vec<KeyRow>,
    roles: Vec<RoleRow>,
    role_names: Vec<String>,
    custom_roles: Vec<RoleEdit>,
    permissions: Vec<Choice>,
    can: Controls,
    can_manage: bool,
    new_key: Option<NewKey>,
    error: Option<String>,
    error_name: String,
    form_principal: String,
    form_name: String,
    typed: Typed,
    principals: Vec<PrincipalRow>,
    policies: Vec<PolicyView>,
    policy_scopes: [&'static str; 3],
    why: Option<Why>,
}

impl AccessPage {
    fn refused(&mut self, error: &ApiError) {
        self.error = Some(error.message().to_owned());
        self.error_name = error.name().to_owned();
    }
}

/// The answer to "why is this denied".
pub(crate) struct Why {
    pub principal: String,
    pub groups: String,
    pub tool: String,
    pub allowed: bool,
    pub reason: String,
    /// Whose tool the name is, and the path it is decided on.
    pub owner: String,
    /// What the external policy engine (OPA) adds, when one decides too.
    pub external: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Query {
    done: Option<String>,
    /// "Why is this denied": the principal, its groups (comma-separated) and the tool.
    principal: Option<String>,
    groups: Option<String>,
    tool: Option<String>,
}

/// The notices this page's own actions leave (never text from the request).
fn notice_of(done: &str) -> Option<&'static str> {
    Some(match done {
        "assigned" => "The role was assigned.",
        "unassigned" => "The role was revoked from the principal.",
        "role-created" => "The role was created.",
        "role-updated" => "The role was changed.",
        "role-deleted" => "The role was deleted.",
        "policy-set" => "The tool access policy was set.",
        "policy-deleted" => "The tool access policy was deleted.",
        _ => return None,
    })
}

// ----- whose tool a name is ---------------------------------------------------------------------

/// Resolves `name` as a call of it is routed and authorized: the catalogue's own answer (the
/// listed names under the `tool_names` setting and pinning, then a prefixed name of a server
/// that is not a group member, or of a group). `Err` says why no client can call it, naming
/// the group through which a member server's tool is reached.
fn resolve_tool(gateway: &Gateway, name: &str) -> Result<ResolvedTool, String> {
    let catalog = gateway.tool_catalog().ok_or_else(|| {
        "tool: the MCP endpoint is not enabled, so no client calls any tool".to_owned()
    })?;
    if let Some(resolved) = catalog.resolve(name) {
        return Ok(resolved);
    }
    let naming = ToolNaming::new(gateway.tool_names().clone());
    let member_of = gateway.groups().and_then(|groups| {
        naming
            .split(name)
            .into_iter()
            .filter(|(_, tool)| !tool.is_empty())
            .find(|(id, _)| groups.is_member(id))
            .map(|(id, tool)| (id.clone(), tool, groups.groups_of(&id)))
    });
    let name = crate::error::bounded_for_message(name);
    Err(match member_of {
        Some((server, tool, groups)) => {
            let through: Vec<String> = groups
                .iter()
                .map(|group| format!("`{}`", naming.exposed(group.as_str(), tool)))
                .collect();
            format!(
                "tool: no client sees `{name}`: `{server}` is a member of a group, and clients \
                 reach its tools through the group, as {}",
                through.join(" or ")
            )
        }
        None => format!(
            "tool: no client sees a tool `{name}`: the catalogue does not list it, and no server \
             or group is named by its prefix (the Tools page lists what a client may call)"
        ),
    })
}

/// Whether the external policy engine (OPA) decides too, as the running configuration says.
fn external_engine_on(state: &ApiState) -> bool {
    state
        .gateway()
        .config()
        .is_some_and(|config| config.running().auth.opa.enabled)
}

/// What the gateway decides when `principal` (in `groups`) calls `tool`, a name as clients see
/// it at `/mcp`: its roles, then the tool access policies on the path of the tool's owner
/// (the tool and its server, or the tool and its group).
fn why(state: &ApiState, principal: &str, groups: &str, tool: &str) -> Result<Why, Problem> {
    use mcpgw_gateway::authz::{Decision, Identity, Permission, Principal};
    let auth = state
        .auth()
        .ok_or_else(|| Problem::not_found("auth is not enabled in this gateway"))?;
    if principal.trim().is_empty() {
        return Err(Problem::bad_form(
            "principal: is required; name who calls, such as `user:alice` or `service:ci`",
        ));
    }
    let parsed = Principal::parse(principal.trim())
        .map_err(|error| Problem::bad_form(&format!("principal: {error}")))?;
    let mut identity = Identity::new(parsed);
    for group in groups
        .split(',')
        .map(str::trim)
        .filter(|group| !group.is_empty())
    {
        identity.groups.push(
            Principal::group(group)
                .map_err(|error| Problem::bad_form(&format!("groups: {error}")))?,
        );
    }
    let name = tool.trim();
    let named = resolve_tool(state.gateway(), name).map_err(|message| {
        Problem::new(
            StatusCode::NOT_FOUND,
            crate::error::names::NOT_FOUND,
            message,
        )
    })?;
    let whose = if named.is_group {
        format!(
            "the tool `{}` of the group `{}`, decided on the group's path, as a call is before \
             any member is picked",
            named.tool, named.owner
        )
    } else {
        format!("the tool `{}` of the server `{}`", named.tool, named.owner)
    };
    let path = &named.path;
    let addresses: Vec<String> = path
        .addresses()
        .iter()
        .map(|address| format!("`{address}`"))
        .collect();
    let owner = format!(
        "`{name}` is {whose}{}; the tool access policies at {} apply.",
        if named.listed {
            ""
        } else {
            " (not listed yet: a call starts its owner to learn whether the tool exists, once \
             this decision allows it)"
        },
        addresses.join(" and ")
    );
    let (allowed, reason) = if auth.is_enabled() {
        match auth
            .authorizer()
            .decide(&identity, Permission::ToolInvoke, Some(path))
        {
            Decision::Allow { granted_by_role } => (
                true,
                format!("allowed: the role `{granted_by_role}` grants it"),
            ),
            Decision::Deny { reason } => (false, reason.to_string()),
        }
    } else {
        (
            true,
            "allowed: authentication is off, so every call is allowed".to_owned(),
        )
    };
    let external = (auth.is_enabled() && external_engine_on(state)).then(|| {
        if allowed {
            "The external policy engine (OPA, auth.opa) decides too: it is asked at call time, \
             with the request's own facts, and can still deny this call; this page does not ask \
             it."
            .to_owned()
        } else {
            "The external policy engine (OPA, auth.opa) is not asked: the roles and tool access \
             policies deny first."
                .to_owned()
        }
    });
    Ok(Why {
        principal: principal.trim().to_owned(),
        groups: groups.trim().to_owned(),
        tool: name.to_owned(),
        allowed,
        reason,
        owner,
        external,
    })
}

// ----- the page ---------------------------------------------------------------------------------

/// The checkboxes of the permission catalogue, those in `checked` ticked, then any grant in
/// `checked` the catalogue does not list (a wildcard such as `mcp_server:*`), so that saving a
/// role keeps it.
fn choices(catalogue: &[PermissionView], checked: &BTreeSet<String>, prefix: &str) -> Vec<Choice> {
    let listed: BTreeSet<&str> = catalogue
        .iter()
        .map(|permission| permission.name.as_str())
        .collect();
    catalogue
        .iter()
        .map(|permission| (permission.name.clone(), permission.description.clone()))
        .chain(
            checked
                .iter()
                .filter(|grant| !listed.contains(grant.as_str()))
                .map(|grant| (grant.clone(), "a wildcard grant".to_owned())),
        )
        .enumerate()
        .map(|(index, (value, hint))| Choice {
            id: format!("{prefix}-{index}"),
            checked: checked.contains(&value),
            value,
            hint,
        })
        .collect()
}

async fn access_page(
    visitor: &Visitor,
    state: &web::Data<ApiState>,
    done: Option<&str>,
) -> Result<AccessPage, Problem> {
    let enabled = state.auth().is_some();
    let can = Controls::of(visitor);
    let mut page = AccessPage {
        chrome: Chrome::new(visitor, "Access", "access", done),
        enabled,
        keys: Vec::new(),
        roles: Vec::new(),
        role_names: Vec::new(),
        custom_roles: Vec::new(),
        permissions: Vec::new(),
        can_manage: can.keys,
        can,
        new_key: None,
        error: None,
        error_name: String::new(),
        form_principal: String::new(),
        form_name: String::new(),
        typed: Typed {
            scope: "global".to_owned(),
            ..Typed::default()
        },
        principals: Vec::new(),
        policies: Vec::new(),
        policy_scopes: POLICY_SCOPES,
        why: None,
    };
    if let Some(notice) = done.and_then(notice_of) {
        page.chrome.notice = Some(notice);
    }
    let Some(auth) = state.auth() else {
        return Ok(page);
    };
    let keys = crate::auth_api::list_keys(state.clone())
        .await?
        .into_inner()
        .keys;
    let roles = crate::auth_api::list_all_roles(state.clone())
        .await?
        .into_inner()
        .roles;
    let principals = crate::auth_api::list_principals(state.clone())
        .await?
        .into_inner()
        .principals;
    let catalogue = crate::auth_api::list_permissions(state.clone())
        .await?
        .into_inner()
        .permissions;
    page.policies = auth
        .list_policies()
        .await
        .map_err(ApiError::from)?
        .iter()
        .map(PolicyView::from)
        .collect();
    page.keys = keys
        .into_iter()
        .rev()
        .map(|key| KeyRow {
            revoke: format!("/ui/access/keys/{}/revoke", encode_component(&key.key_id)),
            key,
        })
        .collect();
    let from_config = &auth.settings().static_assignments;
    page.principals = principals
        .into_iter()
        .map(|principal| PrincipalRow {
            held: principal
                .roles
                .into_iter()
                .map(|held| HeldRow {
                    from_config: from_config.iter().any(|assignment| {
                        assignment.principal.to_string() == principal.principal
                            && assignment.role.as_str() == held.role
                            && assignment.scope.to_string() == held.scope
                    }),
                    role: held.role,
                    scope: held.scope,
                })
                .collect(),
            principal: principal.principal,
            active_keys: principal.active_keys,
            total_keys: principal.total_keys,
        })
        .collect();
    page.role_names = roles.iter().map(|role| role.name.clone()).collect();
    page.custom_roles = roles
        .iter()
        .filter(|role| !role.built_in)
        .map(|role| {
            let held: BTreeSet<String> = role.permissions.iter().cloned().collect();
            RoleEdit {
                update: format!("/ui/access/roles/{}", encode_component(&role.name)),
                choices: choices(&catalogue, &held, &format!("role-{}-permission", role.name)),
                name: role.name.clone(),
                description: role.description.clone(),
            }
        })
        .collect();
    page.roles = roles
        .into_iter()
        .map(|role| RoleRow {
            delete: format!("/ui/access/roles/{}/delete", encode_component(&role.name)),
            role,
        })
        .collect();
    page.permissions = choices(&catalogue, &BTreeSet::new(), "new-role-permission");
    Ok(page)
}

/// The page again with `error` (a refusal of the API behind a form), at its status, with what
/// the form held put back by `fill`.
async fn refused(
    visitor: &Visitor,
    state: &web::Data<ApiState>,
    error: &ApiError,
    fill: impl FnOnce(&mut AccessPage),
) -> Result<HttpResponse, Problem> {
    let mut page = access_page(visitor, state, None).await?;
    page.refused(error);
    fill(&mut page);
    render(error.status(), &page)
}

/// `GET /ui/access`.
pub(crate) async fn page(
    request: HttpRequest,
    state: web::Data<ApiState>,
    query: web::Query<Query>,
) -> Result<HttpResponse, Problem> {
    let visitor = visitor(&request, &state).await?;
    visitor.require("GET", "/api/auth/keys").await?;
    let mut page = access_page(&visitor, &state, query.done.as_deref()).await?;
    // A tool asks the question; the principal is needed then.
    if let Some(tool) = query.tool.as_deref().filter(|text| !text.trim().is_empty()) {
        match why(
            &state,
            query.principal.as_deref().unwrap_or_default(),
            query.groups.as_deref().unwrap_or_default(),
            tool,
        ) {
            Ok(answer) => page.why = Some(answer),
            Err(problem) => {
                page.error = Some(problem.message().to_owned());
                return render(problem.status(), &page);
            }
        }
    }
    render(StatusCode::OK, &page)
}

// ----- keys -------------------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
pub(crate) struct KeyForm {
    csrf_token: Option<String>,
    principal: Option<String>,
    name: Option<String>,
    role: Option<String>,
    expires_in_days: Option<String>,
}

/// `POST /ui/access/keys`: makes a key as `POST /api/auth/keys` does.
pub(crate) async fn create_key(
    request: HttpRequest,
    state: web::Data<ApiState>,
    form: web::Form<KeyForm>,
) -> Result<HttpResponse, Problem> {
    let visitor = super::poster(&request, &state, form.csrf_token.as_deref()).await?;
    visitor.require("POST", "/api/auth/keys").await?;
    let Some(auth) = state.auth() else {
        return Err(Problem::not_found("auth is not enabled in this gateway"));
    };
    let text = super::page::filled;
    let expires_in_days = match text(&form.expires_in_days) {
        None => None,
        Some(raw) => match raw.parse::<i64>() {
            Ok(days) => Some(days),
            Err(_) => {
                let mut page = access_page(&visitor, &state, None).await?;
                page.error = Some(format!(
                    "expires_in_days: must be a whole number of days; got `{raw}`"
                ));
                return render(StatusCode::UNPROCESSABLE_ENTITY, &page);
            }
        },
    };
    let request = CreateKeyRequest {
        principal: text(&form.principal).unwrap_or_default(),
        name: text(&form.name).unwrap_or_default(),
        role: text(&form.role),
        expires_in_days,
    };
    let outcome = auth.create_key(request).await;
    let mut page = access_page(&visitor, &state, None).await?;
    match outcome {
        Ok(issued) => {
            page.new_key = Some(NewKey {
                raw: issued.raw_key.expose().to_owned(),
                name: issued.record.name.clone(),
                principal: issued.record.principal.to_string(),
            });
            render(StatusCode::CREATED, &page)
        }
        Err(error) => {
            let error = ApiError::from(error);
            page.refused(&error);
            page.form_principal = form.principal.clone().unwrap_or_default();
            page.form_name = form.name.clone().unwrap_or_default();
            render(error.status(), &page)
        }
    }
}

/// `POST /ui/access/keys/{id}/revoke`: revokes as `DELETE /api/auth/keys/{id}` does.
pub(crate) async fn revoke_key(
    request: HttpRequest,
    state: web::Data<ApiState>,
    key_id: web::Path<String>,
    form: web::Form<super::ButtonForm>,
) -> Result<HttpResponse, Problem> {
    let visitor = super::poster(&request, &state, form.csrf_token.as_deref()).await?;
    let key_id = key_id.into_inner();
    visitor
        .require("DELETE", &format!("/api/auth/keys/{key_id}"))
        .await?;
    crate::auth_api::revoke_key(state.clone(), web::Path::from(key_id)).await?;
    Ok(see_other("/ui/access?done=revoked"))
}

// ----- forms as the API's bodies ----------------------------------------------------------------

/// `object` as the JSON body a handler reads.
fn body(object: Map<String, Value>) -> Result<Bytes, actix_web::Error> {
    Ok(Bytes::from(Value::Object(object).to_string()))
}

/// Puts `field` into `object` when the form gave it a value that is not blank (trimmed); a
/// blank one is left out, so that the API names what is missing.
fn put_filled(object: &mut Map<String, Value>, field: &str, value: Option<&str>) {
    if let Some(value) = value.map(str::trim).filter(|value| !value.is_empty()) {
        object.insert(field.to_owned(), Value::String(value.to_owned()));
    }
}

/// The lines of a text area, trimmed, blank ones dropped; `None` when none is left.
fn lines(text: Option<&str>) -> Option<Vec<Value>> {
    let lines: Vec<Value> = text
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(|line| Value::String(line.to_owned()))
        .collect();
    (!lines.is_empty()).then_some(lines)
}

/// A form that may repeat `permissions` (one field per ticked checkbox), read as pairs.
struct RepeatedForm(Vec<(String, String)>);

impl RepeatedForm {
    /// The one value of `field`; a field given twice is refused as the API refuses a query
    /// parameter given twice.
    fn one(&self, field: &str) -> Result<Option<&str>, Problem> {
        let mut values = self
            .0
            .iter()
            .filter(|(key, _)| key == field)
            .map(|(_, value)| value.as_str());
        let first = values.next();
        if values.next().is_some() {
            return Err(Problem::bad_form(&format!(
                "{field}: the field is given more than once; give it once"
            )));
        }
        Ok(first)
    }

    /// Every `permissions` value, blank ones dropped; `None` when the form has no such field at
    /// all. (The page's forms always send one blank `permissions`, so that ticking no box
    /// means "none" rather than "unchanged".)
    fn permissions(&self) -> Option<Vec<String>> {
        let mut given = false;
        let mut permissions = Vec::new();
        for (key, value) in &self.0 {
            if key == "permissions" {
                given = true;
                let value = value.trim();
                if !value.is_empty() {
                    permissions.push(value.to_owned());
                }
            }
        }
        given.then_some(permissions)
    }
}

// ----- role assignments -------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
pub(crate) struct AssignmentForm {
    csrf_token: Option<String>,
    principal: Option<String>,
    role: Option<String>,
    scope: Option<String>,
}

impl AssignmentForm {
    fn body(&self) -> Result<Bytes, actix_web::Error> {
        let mut object = Map::new();
        put_filled(&mut object, "principal", self.principal.as_deref());
        put_filled(&mut object, "role", self.role.as_deref());
        put_filled(&mut object, "scope", self.scope.as_deref());
        body(object)
    }

    fn fill(&self, page: &mut AccessPage) {
        page.typed.principal = self.principal.clone().unwrap_or_default();
        page.typed.role = self.role.clone().unwrap_or_default();
        page.typed.scope = self.scope.clone().unwrap_or_default();
    }
}

/// `POST /ui/access/assignments`: assigns a role as `POST /api/auth/roles/assign` does.
pub(crate) async fn assign(
    request: HttpRequest,
    state: web::Data<ApiState>,
    form: web::Form<AssignmentForm>,
) -> Result<HttpResponse, Problem> {
    let visitor = super::poster(&request, &state, form.csrf_token.as_deref()).await?;
    visitor.require("POST", ASSIGN_ROUTE).await?;
    match crate::auth_api::assign_role(state.clone(), form.body()).await {
        Ok(_) => Ok(see_other("/ui/access?done=assigned")),
        Err(error) => refused(&visitor, &state, &error, |page| form.fill(page)).await,
    }
}

/// `POST /ui/access/assignments/revoke`: takes a role away as `DELETE /api/auth/roles/revoke`
/// does.
pub(crate) async fn unassign(
    request: HttpRequest,
    state: web::Data<ApiState>,
    form: web::Form<AssignmentForm>,
) -> Result<HttpResponse, Problem> {
    let visitor = super::poster(&request, &state, form.csrf_token.as_deref()).await?;
    visitor.require("DELETE", REVOKE_ROUTE).await?;
    match crate::auth_api::revoke_role(state.clone(), web::Query(Vec::new()), form.body()).await {
        Ok(_) => Ok(see_other("/ui/access?done=unassigned")),
        Err(error) => refused(&visitor, &state, &error, |_| {}).await,
    }
}

// ----- custom roles -----------------------------------------------------------------------------

/// The CSRF token of a form read as pairs, checked, and the visitor who posted it.
async fn repeated_poster(
    request: &HttpRequest,
    state: &ApiState,
    form: &RepeatedForm,
) -> Result<Visitor, Problem> {
    let token = form.one(super::CSRF_FIELD).unwrap_or(None);
    super::poster(request, state, token).await
}

/// `POST /ui/access/roles`: makes a custom role as `POST /api/auth/roles` does.
pub(crate) async fn create_role(
    request: HttpRequest,
    state: web::Data<ApiState>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, Problem> {
    let form = RepeatedForm(form.into_inner());
    let visitor = repeated_poster(&request, &state, &form).await?;
    visitor.require("POST", ROLES_ROUTE).await?;
    let name = form.one("name")?;
    let description = form.one("description")?;
    let permissions = form.permissions();
    let mut object = Map::new();
    put_filled(&mut object, "name", name);
    put_filled(&mut object, "description", description);
    if let Some(permissions) = &permissions {
        object.insert(
            "permissions".to_owned(),
            Value::Array(permissions.iter().cloned().map(Value::String).collect()),
        );
    }
    match crate::auth_api::create_role(state.clone(), body(object)).await {
        Ok(_) => Ok(see_other("/ui/access?done=role-created")),
        Err(error) => {
            refused(&visitor, &state, &error, |page| {
                page.typed.role_name = name.unwrap_or_default().to_owned();
                page.typed.role_description = description.unwrap_or_default().to_owned();
                let ticked: BTreeSet<String> =
                    permissions.unwrap_or_default().into_iter().collect();
                for choice in &mut page.permissions {
                    choice.checked = ticked.contains(&choice.value);
                }
                page.typed.role_permissions = ticked;
            })
            .await
        }
    }
}

/// `POST /ui/access/roles/{name}`: changes a custom role as `PATCH /api/auth/roles/{name}`
/// does. Only what the form gives changes: `description` when the field is there (blank clears
/// it), the permissions when any `permissions` field is there.
pub(crate) async fn update_role(
    request: HttpRequest,
    state: web::Data<ApiState>,
    name: web::Path<String>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, Problem> {
    let form = RepeatedForm(form.into_inner());
    let visitor = repeated_poster(&request, &state, &form).await?;
    visitor.require("PATCH", ROLE_ROUTE).await?;
    let mut object = Map::new();
    if let Some(description) = form.one("description")? {
        object.insert(
            "description".to_owned(),
            Value::String(description.trim().to_owned()),
        );
    }
    if let Some(permissions) = form.permissions() {
        object.insert(
            "permissions".to_owned(),
            Value::Array(permissions.into_iter().map(Value::String).collect()),
        );
    }
    match crate::auth_api::update_role(state.clone(), name, body(object)).await {
        Ok(_) => Ok(see_other("/ui/access?done=role-updated")),
        Err(error) => refused(&visitor, &state, &error, |_| {}).await,
    }
}

/// `POST /ui/access/roles/{name}/delete`: deletes a custom role as
/// `DELETE /api/auth/roles/{name}` does (a built-in role, or one still assigned, is refused
/// with the API's 409).
pub(crate) async fn delete_role(
    request: HttpRequest,
    state: web::Data<ApiState>,
    name: web::Path<String>,
    form: web::Form<super::ButtonForm>,
) -> Result<HttpResponse, Problem> {
    let visitor = super::poster(&request, &state, form.csrf_token.as_deref()).await?;
    visitor.require("DELETE", ROLE_ROUTE).await?;
    match crate::auth_api::delete_role(state.clone(), name).await {
        Ok(_) => Ok(see_other("/ui/access?done=role-deleted")),
        Err(error) => refused(&visitor, &state, &error, |_| {}).await,
    }
}

// ----- tool access policies ---------------------------------------------------------------------

#[derive(Debug, Deserialize)]
pub(crate) struct PolicyForm {
    csrf_token: Option<String>,
    scope: Option<String>,
    target_id: Option<String>,
    allow_list: Option<String>,
    deny_list: Option<String>,
}

impl PolicyForm {
    /// The path of the policy's REST route: its scope and target, trimmed.
    fn address(&self) -> web::Path<(String, String)> {
        let text = |field: &Option<String>| field.as_deref().unwrap_or_default().trim().to_owned();
        web::Path::from((text(&self.scope), text(&self.target_id)))
    }
}

/// `POST /ui/access/policies`: sets (or replaces) a tool access policy as
/// `POST /api/auth/policies/{scope}/{target_id}` does. Each list is one principal pattern per
/// line; a list left blank is not given (both blank: the API's message asks for one).
pub(crate) async fn set_policy(
    request: HttpRequest,
    state: web::Data<ApiState>,
    form: web::Form<PolicyForm>,
) -> Result<HttpResponse, Problem> {
    let visitor = super::poster(&request, &state, form.csrf_token.as_deref()).await?;
    visitor.require("POST", POLICY_ROUTE).await?;
    let mut object = Map::new();
    if let Some(allow) = lines(form.allow_list.as_deref()) {
        object.insert("allow_list".to_owned(), Value::Array(allow));
    }
    if let Some(deny) = lines(form.deny_list.as_deref()) {
        object.insert("deny_list".to_owned(), Value::Array(deny));
    }
    match crate::auth_api::set_policy(state.clone(), form.address(), body(object)).await {
        Ok(_) => Ok(see_other("/ui/access?done=policy-set")),
        Err(error) => {
            refused(&visitor, &state, &error, |page| {
                page.typed.policy_scope = form.scope.clone().unwrap_or_default();
                page.typed.policy_target = form.target_id.clone().unwrap_or_default();
                page.typed.policy_allow = form.allow_list.clone().unwrap_or_default();
                page.typed.policy_deny = form.deny_list.clone().unwrap_or_default();
            })
            .await
        }
    }
}

/// `POST /ui/access/policies/delete`: clears a tool access policy as
/// `DELETE /api/auth/policies/{scope}/{target_id}` does.
pub(crate) async fn delete_policy(
    request: HttpRequest,
    state: web::Data<ApiState>,
    form: web::Form<PolicyForm>,
) -> Result<HttpResponse, Problem> {
    let visitor = super::poster(&request, &state, form.csrf_token.as_deref()).await?;
    visitor.require("DELETE", POLICY_ROUTE).await?;
    match crate::auth_api::delete_policy(state.clone(), form.address()).await {
        Ok(_) => Ok(see_other("/ui/access?done=policy-deleted")),
        Err(error) => refused(&visitor, &state, &error, |_| {}).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_single_field_is_refused_and_permissions_may_repeat() {
        // Bad input: `name` given twice.
        let form = RepeatedForm(vec![
            ("name".into(), "a".into()),
            ("name".into(), "b".into()),
            ("permissions".into(), String::new()),
            ("permissions".into(), " tool:invoke ".into()),
            ("permissions".into(), "tool:list".into()),
        ]);
        let refused = form.one("name").expect_err("given twice");
        assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert!(refused.message().contains("more than once"), "{refused}");
        assert_eq!(
            form.permissions(),
            Some(vec!["tool:invoke".to_owned(), "tool:list".to_owned()])
        );
        // A form without any `permissions` field leaves them unchanged; one blank clears them.
        assert_eq!(RepeatedForm(Vec::new()).permissions(), None);
        assert_eq!(
            RepeatedForm(vec![("permissions".into(), " ".into())]).permissions(),
            Some(Vec::new())
        );
    }

    #[test]
    fn a_text_area_is_one_entry_per_line() {
        // Bad input: blank lines, spaces around entries, Windows line ends, nothing at all.
        assert_eq!(
            lines(Some(" user:alice \r\n\r\n group:ops\n")),
            Some(vec![Value::from("user:alice"), Value::from("group:ops")])
        );
        assert_eq!(lines(Some(" \n\n")), None);
        assert_eq!(lines(None), None);
    }

    #[test]
    fn only_this_pages_own_notices_are_shown() {
        assert_eq!(notice_of("assigned"), Some("The role was assigned."));
        // Bad input: text from the request is never shown.
        assert_eq!(notice_of("<script>"), None);
    }
}
