//! The groups page: each load-balanced group with its strategy, state and members (weight,
//! priority, state, whether in rotation), and the rebalance action. It reads and acts through
//! the API's own group handlers.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use serde::{Deserialize, Serialize};

use super::page::encode_component;
use super::{Chrome, Problem, render, see_other, visitor};
use crate::state::ApiState;

/// The name a serialized enumeration goes by (`round_robin`, `healthy`).
fn name_of(value: &impl Serialize) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .unwrap_or_default()
}

pub(crate) struct MemberRow {
    pub id: String,
    pub href: String,
    pub weight: u32,
    pub priority: u32,
    pub state: String,
    pub in_rotation: bool,
    pub in_flight: u32,
}

pub(crate) struct GroupView {
    pub id: String,
    pub description: String,
    pub strategy: String,
    pub state: String,
    pub min_healthy: u32,
    pub in_rotation: usize,
    pub members: Vec<MemberRow>,
    pub rebalance: String,
    pub can_rebalance: bool,
}

#[derive(Template)]
#[template(path = "groups.html")]
struct GroupsPage {
    chrome: Chrome,
    enabled: bool,
    groups: Vec<GroupView>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Query {
    done: Option<String>,
}

/// `GET /ui/groups`.
pub(crate) async fn page(
    request: HttpRequest,
    state: web::Data<ApiState>,
    query: web::Query<Query>,
) -> Result<HttpResponse, Problem> {
    let visitor = visitor(&request, &state).await?;
    visitor.require("GET", "/api/groups").await?;
    let enabled = state.gateway().groups().is_some();
    let groups = if enabled {
        crate::groups::list_groups(state.clone())
            .await?
            .into_inner()
            .groups
    } else {
        Vec::new()
    };
    let page = GroupsPage {
        chrome: Chrome::new(&visitor, "Groups", "groups", query.done.as_deref()),
        enabled,
        groups: groups
            .iter()
            .map(|group| GroupView {
                rebalance: format!("/ui/groups/{}/rebalance", encode_component(&group.group_id)),
                can_rebalance: visitor
                    .may("POST", &format!("/api/groups/{}/rebalance", group.group_id)),
                id: group.group_id.clone(),
                description: group.description.clone().unwrap_or_default(),
                strategy: name_of(&group.strategy),
                state: name_of(&group.state),
                min_healthy: group.min_healthy,
                in_rotation: group.members_in_rotation,
                members: group
                    .members
                    .iter()
                    .map(|member| MemberRow {
                        href: format!("/ui/servers/{}", encode_component(&member.id)),
                        id: member.id.clone(),
                        weight: member.weight,
                        priority: member.priority,
                        state: member
                            .state
                            .as_ref()
                            .map_or_else(|| "gone".to_owned(), name_of),
                        in_rotation: member.in_rotation,
                        in_flight: member.in_flight,
                    })
                    .collect(),
            })
            .collect(),
    };
    render(StatusCode::OK, &page)
}

/// `POST /ui/groups/{id}/rebalance`.
pub(crate) async fn rebalance(
    request: HttpRequest,
    state: web::Data<ApiState>,
    id: web::Path<String>,
    form: web::Form<super::ButtonForm>,
) -> Result<HttpResponse, Problem> {
    let visitor = super::poster(&request, &state, form.csrf_token.as_deref()).await?;
    let id = id.into_inner();
    visitor
        .require("POST", &format!("/api/groups/{id}/rebalance"))
        .await?;
    crate::groups::rebalance_group(state.clone(), web::Path::from(id)).await?;
    Ok(see_other("/ui/groups?done=rebalanced"))
}
