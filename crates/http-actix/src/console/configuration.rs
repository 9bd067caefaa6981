//! The configuration page: how the configuration file differs from what runs (secrets masked on
//! both sides), a reload that applies the file, and a backup of it. Each goes through the API's
//! own configuration handlers.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;

use super::{Chrome, Problem, Visitor, render, visitor};
use crate::state::ApiState;

#[derive(Template)]
#[template(path = "configuration.html")]
struct ConfigPage {
    chrome: Chrome,
    enabled: bool,
    diff: String,
    error: Option<String>,
    reloaded: Option<Vec<(&'static str, String)>>,
    backup: Option<String>,
    can_reload: bool,
    can_backup: bool,
}

async fn config_page(
    visitor: &Visitor,
    state: &web::Data<ApiState>,
) -> Result<ConfigPage, Problem> {
    let enabled = state.gateway().config().is_some();
    let diff = if enabled {
        crate::config_api::diff_config(state.clone())
            .await?
            .into_inner()
            .diff
    } else {
        String::new()
    };
    Ok(ConfigPage {
        chrome: Chrome::new(visitor, "Configuration", "config", None),
        enabled,
        diff,
        error: None,
        reloaded: None,
        backup: None,
        can_reload: visitor.may("POST", "/api/config/reload"),
        can_backup: visitor.may("POST", "/api/config/backup"),
    })
}

/// `GET /ui/config`.
pub(crate) async fn page(
    request: HttpRequest,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, Problem> {
    let visitor = visitor(&request, &state).await?;
    visitor.require("GET", "/api/config/diff").await?;
    render(StatusCode::OK, &config_page(&visitor, &state).await?)
}

/// `POST /ui/config/{reload|backup}`: the page again, with what the action did or why it
/// was refused (an invalid file changes nothing and says why).
pub(crate) async fn act(
    request: HttpRequest,
    state: web::Data<ApiState>,
    action: web::Path<String>,
    form: web::Form<super::ButtonForm>,
) -> Result<HttpResponse, Problem> {
    let visitor = super::poster(&request, &state, form.csrf_token.as_deref()).await?;
    let mut status = StatusCode::OK;
    let outcome = match action.as_str() {
        "reload" => {
            visitor.require("POST", "/api/config/reload").await?;
            crate::config_api::reload_config(state.clone())
                .await
                .map(|result| {
                    let result = result.into_inner();
                    let join = |ids: &[String]| {
                        if ids.is_empty() {
                            "none".to_owned()
                        } else {
                            ids.join(", ")
                        }
                    };
                    (
                        Some(vec![
                            ("Added", join(&result.added)),
                            ("Removed", join(&result.removed)),
                            ("Updated", join(&result.updated)),
                            ("Unchanged", join(&result.unchanged)),
                            ("Needs a restart", join(&result.restart_required)),
                        ]),
                        None,
                    )
                })
        }
        "backup" => {
            visitor.require("POST", "/api/config/backup").await?;
            crate::config_api::backup_config(state.clone())
                .await
                .map(|backup| (None, Some(backup.into_inner().path)))
        }
        _ => return Err(Problem::not_found("no such action: use reload or backup")),
    };
    let mut page = config_page(&visitor, &state).await?;
    match outcome {
        Ok((reloaded, backup)) => {
            page.reloaded = reloaded;
            page.backup = backup;
        }
        Err(error) => {
            status = error.status();
            page.error = Some(error.message().to_owned());
        }
    }
    render(status, &page)
}
