//! The discovery page: definitions that sources found and that wait for approval (secrets
//! masked, as the API shows them), and the ones quarantined with the reason; approve and
//! reject run the API's handlers.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use serde::Deserialize;

use super::page::encode_component;
use super::{Chrome, Problem, render, see_other, visitor};
use crate::state::ApiState;

pub(crate) struct PendingView {
    pub name: String,
    pub source_id: String,
    pub mode: String,
    pub discovered_at: String,
    pub definition: String,
    pub action: String,
}

pub(crate) struct QuarantinedView {
    pub name: String,
    pub source_id: String,
    pub reason: String,
    pub quarantined_at: String,
}

#[derive(Template)]
#[template(path = "discovery.html")]
struct DiscoveryPage {
    chrome: Chrome,
    configured: bool,
    pending: Vec<PendingView>,
    quarantined: Vec<QuarantinedView>,
    can_decide: bool,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Query {
    done: Option<String>,
}

/// `GET /ui/discovery`.
pub(crate) async fn page(
    request: HttpRequest,
    state: web::Data<ApiState>,
    query: web::Query<Query>,
) -> Result<HttpResponse, Problem> {
    let visitor = visitor(&request, &state).await?;
    visitor.require("GET", "/api/discovery/pending").await?;
    let configured = state.gateway().discovery().is_some();
    let (pending, quarantined) = if configured {
        let pending = crate::discovery::list_pending(state.clone())
            .await?
            .into_inner()
            .pending;
        let quarantined = crate::discovery::list_quarantined(state.clone())
            .await?
            .into_inner()
            .quarantined;
        (pending, quarantined)
    } else {
        (Vec::new(), Vec::new())
    };
    let page = DiscoveryPage {
        chrome: Chrome::new(&visitor, "Discovery", "discovery", query.done.as_deref()),
        configured,
        pending: pending
            .into_iter()
            .map(|entry| PendingView {
                action: format!("/ui/discovery/{}", encode_component(&entry.name)),
                definition: serde_yaml::to_string(&entry.definition).unwrap_or_default(),
                name: entry.name,
                source_id: entry.source_id,
                mode: entry.mode,
                discovered_at: entry.discovered_at,
            })
            .collect(),
        quarantined: quarantined
            .into_iter()
            .map(|entry| QuarantinedView {
                name: entry.name,
                source_id: entry.source_id,
                reason: entry.reason,
                quarantined_at: entry.quarantined_at,
            })
            .collect(),
        can_decide: visitor.may("POST", "/api/discovery/approve/x"),
    };
    render(StatusCode::OK, &page)
}

/// `POST /ui/discovery/{name}/{approve|reject}`.
pub(crate) async fn act(
    request: HttpRequest,
    state: web::Data<ApiState>,
    path: web::Path<(String, String)>,
    form: web::Form<super::ButtonForm>,
) -> Result<HttpResponse, Problem> {
    let visitor = super::poster(&request, &state, form.csrf_token.as_deref()).await?;
    let (name, action) = path.into_inner();
    match action.as_str() {
        "approve" => {
            visitor
                .require("POST", &format!("/api/discovery/approve/{name}"))
                .await?;
            crate::discovery::approve(state.clone(), web::Path::from(name)).await?;
            Ok(see_other("/ui/discovery?done=approved"))
        }
        "reject" => {
            visitor
                .require("POST", &format!("/api/discovery/reject/{name}"))
                .await?;
            crate::discovery::reject(state.clone(), web::Path::from(name)).await?;
            Ok(see_other("/ui/discovery?done=rejected"))
        }
        _ => Err(Problem::not_found("no such action: use approve or reject")),
    }
}
