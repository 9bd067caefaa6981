//! The events page: the gateway's event stream as it happens, with the WebSocket's own filters
//! (event types and server or group ids). The page holds the filter form and an empty table;
//! the console's script opens `/api/ws/events` with the filter and adds a row per event, newest
//! first, keeping the latest 200.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use mcpgw_core::EVENT_TYPES;
use serde::Deserialize;

use super::{Chrome, Problem, render, visitor};
use crate::state::ApiState;

#[derive(Template)]
#[template(path = "events.html")]
struct EventsPage {
    chrome: Chrome,
    event_types: String,
    mcp_server_ids: String,
    known_types: &'static [&'static str],
}

#[derive(Debug, Deserialize)]
pub(crate) struct Query {
    event_types: Option<String>,
    mcp_server_ids: Option<String>,
}

/// A comma-separated filter, each entry checked: event types must be known, ids plain.
fn filter(
    raw: Option<&str>,
    check: impl Fn(&str) -> Result<(), String>,
) -> Result<String, Problem> {
    let entries: Vec<&str> = raw
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .collect();
    for entry in &entries {
        check(entry).map_err(|message| Problem::bad_form(&message))?;
    }
    Ok(entries.join(","))
}

/// `GET /ui/events`.
pub(crate) async fn page(
    request: HttpRequest,
    state: web::Data<ApiState>,
    query: web::Query<Query>,
) -> Result<HttpResponse, Problem> {
    let visitor = visitor(&request, &state).await?;
    visitor.require("GET", crate::EVENTS_WS_PATH).await?;
    let event_types = filter(query.event_types.as_deref(), |entry| {
        if EVENT_TYPES.contains(&entry) {
            Ok(())
        } else {
            Err(format!(
                "event_types: `{entry}` is not an event type; leave it empty for every event"
            ))
        }
    })?;
    let mcp_server_ids = filter(query.mcp_server_ids.as_deref(), |entry| {
        mcpgw_core::ServerId::parse(entry)
            .map(|_| ())
            .map_err(|error| format!("mcp_server_ids: {error}"))
    })?;
    let page = EventsPage {
        chrome: Chrome::new(&visitor, "Events", "events", None),
        event_types,
        mcp_server_ids,
        known_types: &EVENT_TYPES,
    };
    render(StatusCode::OK, &page)
}
