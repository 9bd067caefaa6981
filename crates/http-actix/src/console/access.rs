//! The access page: API keys (a new key is shown once, right after it is made; revoking ends
//! every console session opened with it), the roles with what they grant, who holds which
//! role, the tool access policies, and "why is this denied": what the gateway decides when a
//! principal calls a tool, and the reason when it refuses.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use mcpgw_gateway::CreateKeyRequest;
use serde::Deserialize;

use super::page::encode_component;
use super::{Chrome, Problem, Visitor, render, see_other, visitor};
use crate::dto::{ApiKeyView, PolicyView, PrincipalView, RoleView};
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

#[derive(Template)]
#[template(path = "access.html")]
struct AccessPage {
    chrome: Chrome,
    enabled: bool,
    keys: Vec<KeyRow>,
    roles: Vec<RoleView>,
    role_names: Vec<String>,
    can_manage: bool,
    new_key: Option<NewKey>,
    error: Option<String>,
    form_principal: String,
    form_name: String,
    principals: Vec<PrincipalView>,
    policies: Vec<PolicyView>,
    why: Option<Why>,
}

/// The answer to "why is this denied".
pub(crate) struct Why {
    pub principal: String,
    pub groups: String,
    pub tool: String,
    pub allowed: bool,
    pub reason: String,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Query {
    done: Option<String>,
    /// "Why is this denied": the principal, its groups (comma-separated) and the tool.
    principal: Option<String>,
    groups: Option<String>,
    tool: Option<String>,
}

/// What the gateway decides when `principal` (in `groups`) calls `tool` (`server__tool`):
/// its roles, then the tool access policies of the tool and of its server.
fn why(state: &ApiState, principal: &str, groups: &str, tool: &str) -> Result<Why, Problem> {
    use mcpgw_gateway::authz::{AccessPath, Identity, Permission, Principal};
    let auth = state
        .auth()
        .ok_or_else(|| Problem::not_found("auth is not enabled in this gateway"))?;
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
    let (server, name) = tool
        .trim()
        .split_once(mcpgw_gateway::NAME_SEPARATOR)
        .ok_or_else(|| {
            Problem::bad_form(&format!(
                "tool: write it as server{}tool, as clients see it",
                mcpgw_gateway::NAME_SEPARATOR
            ))
        })?;
    let server = mcpgw_core::ServerId::parse(server)
        .map_err(|error| Problem::bad_form(&format!("tool: {error}")))?;
    let path = AccessPath::server_tool(&server, name)
        .map_err(|error| Problem::bad_form(&format!("tool: {error}")))?;
    let decision = auth
        .authorizer()
        .decide(&identity, Permission::ToolInvoke, Some(&path));
    let (allowed, reason) = match decision {
        mcpgw_gateway::authz::Decision::Allow { granted_by_role } => (
            true,
            format!("allowed: the role `{granted_by_role}` grants it"),
        ),
        mcpgw_gateway::authz::Decision::Deny { reason } => (false, reason.to_string()),
    };
    Ok(Why {
        principal: principal.trim().to_owned(),
        groups: groups.trim().to_owned(),
        tool: tool.trim().to_owned(),
        allowed,
        reason,
    })
}

async fn access_page(
    visitor: &Visitor,
    state: &web::Data<ApiState>,
    done: Option<&str>,
) -> Result<AccessPage, Problem> {
    let enabled = state.auth().is_some();
    let (keys, roles, principals, policies) = if enabled {
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
        let policies = match state.auth() {
            Some(auth) => auth
                .list_policies()
                .await
                .map_err(crate::error::ApiError::from)?
                .iter()
                .map(PolicyView::from)
                .collect(),
            None => Vec::new(),
        };
        (keys, roles, principals, policies)
    } else {
        (Vec::new(), Vec::new(), Vec::new(), Vec::new())
    };
    Ok(AccessPage {
        chrome: Chrome::new(visitor, "Access", "access", done),
        enabled,
        keys: keys
            .into_iter()
            .rev()
            .map(|key| KeyRow {
                revoke: format!("/ui/access/keys/{}/revoke", encode_component(&key.key_id)),
                key,
            })
            .collect(),
        role_names: roles.iter().map(|role| role.name.clone()).collect(),
        roles,
        can_manage: visitor.may("POST", "/api/auth/keys"),
        new_key: None,
        error: None,
        form_principal: String::new(),
        form_name: String::new(),
        principals,
        policies,
        why: None,
    })
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
    if let Some(principal) = query
        .principal
        .as_deref()
        .filter(|text| !text.trim().is_empty())
    {
        match why(
            &state,
            principal,
            query.groups.as_deref().unwrap_or_default(),
            query.tool.as_deref().unwrap_or_default(),
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
            let error = crate::error::ApiError::from(error);
            page.error = Some(error.message().to_owned());
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
