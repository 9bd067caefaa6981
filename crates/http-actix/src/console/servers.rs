//! The MCP servers pages: a list that updates itself, a page per server (definition, tools,
//! health, a live tail of its stderr, its tool history), the actions on a server, and the form
//! that creates or edits one.
//!
//! Every action runs the API's own handler, after the permission of the API route it stands
//! for: what the API refuses is refused here with the same message.

use actix_web::http::StatusCode;
use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use askama::Template;
use mcpgw_config::ServerDefinition;
use mcpgw_core::{ServerId, ServerSnapshot, ServerState, Tool};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::page::encode_component;
use super::{Chrome, Problem, Visitor, render, see_other, visitor};
use crate::definition::definition_rules;
use crate::dto::{InvocationEntry, ServerDetails};
use crate::state::ApiState;

/// Servers per page of the list.
pub(crate) const PAGE_SIZE: usize = 50;
/// Stderr lines in the live tail.
const TAIL_LINES: usize = 100;
/// Invocations shown on a server's page.
const HISTORY_LINES: usize = 20;

/// One row of the list.
pub(crate) struct Row {
    pub id: String,
    pub href: String,
    pub state: &'static str,
    pub mode: String,
    pub description: String,
    pub tools: usize,
    pub failures: u32,
    pub last_used: String,
    pub can_start: bool,
    pub can_stop: bool,
    /// A stop then a start, as on the server's page: needs both permissions.
    pub can_restart: bool,
}

/// The table body of the list, rendered alone when it refreshes itself.
pub(crate) struct Rows {
    pub items: Vec<Row>,
    /// The query string that produced it (for the refresh).
    pub query: String,
    pub csrf_field: &'static str,
    pub csrf: String,
}

#[derive(Template)]
#[template(path = "servers.html")]
struct ListPage {
    chrome: Chrome,
    rows: Rows,
    q: String,
    state: String,
    states: [&'static str; 5],
    total: usize,
    matching: usize,
    page: usize,
    pages: usize,
    prev: Option<String>,
    next: Option<String>,
    can_create: bool,
}

#[derive(Template)]
#[template(path = "servers_rows.html")]
struct RowsFragment {
    rows: Rows,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct ListQuery {
    q: Option<String>,
    state: Option<String>,
    page: Option<String>,
    done: Option<String>,
}

fn time_text(at: Option<mcpgw_core::Timestamp>) -> String {
    at.map(|at| {
        let text = at.to_string();
        text.split('.').next().unwrap_or(&text).replace('T', " ")
    })
    .unwrap_or_else(|| "never".to_owned())
}

pub(crate) fn state_name(state: ServerState) -> &'static str {
    state.as_str()
}

fn row_of(visitor: &Visitor, snapshot: &ServerSnapshot) -> Row {
    let id = snapshot.id().to_string();
    let api = format!("/api/mcp_servers/{id}");
    let running = matches!(
        snapshot.state,
        ServerState::Ready | ServerState::Degraded | ServerState::Initializing
    );
    let may_start = visitor.may("POST", &format!("{api}/start"));
    let may_stop = visitor.may("POST", &format!("{api}/stop"));
    Row {
        href: format!("/ui/servers/{}", encode_component(&id)),
        state: state_name(snapshot.state),
        mode: snapshot.spec.launch.mode().to_owned(),
        description: snapshot.spec.description.clone().unwrap_or_default(),
        tools: snapshot.tool_count,
        failures: snapshot.consecutive_failures,
        last_used: time_text(snapshot.last_used_at),
        can_start: !running && may_start,
        can_stop: running && may_stop,
        can_restart: running && may_start && may_stop,
        id,
    }
}

struct Listing {
    rows: Rows,
    total: usize,
    matching: usize,
    page: usize,
    pages: usize,
    q: String,
    state: String,
}

/// The servers matching the query, one page of them.
fn listing(visitor: &Visitor, state: &ApiState, query: &ListQuery) -> Result<Listing, Problem> {
    let wanted_state = match query.state.as_deref().filter(|raw| !raw.is_empty()) {
        None => None,
        Some(raw) => Some(ServerState::parse(raw).ok_or_else(|| {
            Problem::bad_form(&format!(
                "state: must be one of cold, initializing, ready, degraded, dead; got `{raw}`"
            ))
        })?),
    };
    let page = super::page::page_number(query.page.as_deref())?;
    let needle = query.q.as_deref().unwrap_or_default().trim().to_lowercase();
    let manager = state.gateway().servers();
    let all = manager.list(wanted_state);
    let total = manager.len();
    let matching: Vec<&ServerSnapshot> = all
        .iter()
        .filter(|snapshot| {
            needle.is_empty()
                || snapshot.id().as_str().to_lowercase().contains(&needle)
                || snapshot
                    .spec
                    .description
                    .as_deref()
                    .is_some_and(|text| text.to_lowercase().contains(&needle))
        })
        .collect();
    let pages = matching.len().div_ceil(PAGE_SIZE).max(1);
    let page = page.min(pages);
    let items = matching
        .iter()
        .skip((page - 1) * PAGE_SIZE)
        .take(PAGE_SIZE)
        .map(|snapshot| row_of(visitor, snapshot))
        .collect();
    let q = query.q.clone().unwrap_or_default();
    let state_text = query.state.clone().unwrap_or_default();
    let query_string = list_query(&q, &state_text, page);
    Ok(Listing {
        rows: Rows {
            items,
            query: query_string,
            csrf_field: super::CSRF_FIELD,
            csrf: visitor.session.csrf_token.to_string(),
        },
        total,
        matching: matching.len(),
        page,
        pages,
        q,
        state: state_text,
    })
}

fn list_query(q: &str, state: &str, page: usize) -> String {
    format!(
        "q={}&state={}&page={page}",
        encode_component(q),
        encode_component(state)
    )
}

/// `GET /ui/servers`.
pub(crate) async fn list(
    request: HttpRequest,
    state: web::Data<ApiState>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, Problem> {
    let visitor = visitor(&request, &state).await?;
    visitor.require("GET", "/api/mcp_servers").await?;
    let listing = listing(&visitor, &state, &query)?;
    let page = ListPage {
        chrome: Chrome::new(&visitor, "MCP servers", "servers", query.done.as_deref()),
        prev: (listing.page > 1).then(|| {
            format!(
                "/ui/servers?{}",
                list_query(&listing.q, &listing.state, listing.page - 1)
            )
        }),
        next: (listing.page < listing.pages).then(|| {
            format!(
                "/ui/servers?{}",
                list_query(&listing.q, &listing.state, listing.page + 1)
            )
        }),
        can_create: visitor.may("POST", "/api/mcp_servers"),
        rows: listing.rows,
        q: listing.q,
        state: listing.state,
        states: ["cold", "initializing", "ready", "degraded", "dead"],
        total: listing.total,
        matching: listing.matching,
        page: listing.page,
        pages: listing.pages,
    };
    render(StatusCode::OK, &page)
}

/// `GET /ui/servers-rows`: the list's table body alone, for its live refresh.
pub(crate) async fn rows(
    request: HttpRequest,
    state: web::Data<ApiState>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, Problem> {
    let visitor = visitor(&request, &state).await?;
    visitor.require("GET", "/api/mcp_servers").await?;
    let listing = listing(&visitor, &state, &query)?;
    render(StatusCode::OK, &RowsFragment { rows: listing.rows })
}

/// What a server's page shows that changes by itself: state, health and the stderr tail.
pub(crate) struct Live {
    pub id: String,
    pub state: &'static str,
    pub failures: u32,
    pub last_error: String,
    pub started_at: String,
    pub last_used: String,
    pub last_health_check: String,
    pub in_flight: usize,
    pub starts: u64,
    pub logs: Vec<String>,
    pub can_read_logs: bool,
}

#[derive(Template)]
#[template(path = "server_live.html")]
struct LiveFragment {
    live: Live,
}

fn live_of(visitor: &Visitor, state: &ApiState, id: &ServerId) -> Result<Live, Problem> {
    let manager = state.gateway().servers();
    let snapshot = manager.snapshot(id).map_err(crate::error::ApiError::from)?;
    let can_read_logs = visitor.may("GET", &format!("/api/mcp_servers/{id}/logs"));
    let logs = if can_read_logs {
        manager
            .logs(id, TAIL_LINES)
            .map_err(crate::error::ApiError::from)?
            .into_iter()
            .map(|line| format!("{} {}", time_text(Some(line.timestamp)), line.line))
            .collect()
    } else {
        Vec::new()
    };
    Ok(Live {
        id: id.to_string(),
        state: state_name(snapshot.state),
        failures: snapshot.consecutive_failures,
        last_error: snapshot.last_error.clone().unwrap_or_default(),
        started_at: time_text(snapshot.started_at),
        last_used: time_text(snapshot.last_used_at),
        last_health_check: match snapshot.last_health_check_ok {
            None => "none yet".to_owned(),
            Some(ok) => format!(
                "{} at {}",
                if ok { "passed" } else { "failed" },
                time_text(snapshot.last_health_check_at)
            ),
        },
        in_flight: snapshot.in_flight_calls,
        starts: snapshot.total_starts,
        logs,
        can_read_logs,
    })
}

/// A server id from the path: an id that is not valid names no server.
fn server_id(raw: &str) -> Result<ServerId, Problem> {
    ServerId::parse(raw).map_err(|_| Problem::from(crate::error::ApiError::server_not_found(raw)))
}

/// `GET /ui/servers/{id}/live`.
pub(crate) async fn live(
    request: HttpRequest,
    state: web::Data<ApiState>,
    id: web::Path<String>,
) -> Result<HttpResponse, Problem> {
    let visitor = visitor(&request, &state).await?;
    let id = server_id(&id)?;
    visitor
        .require("GET", &format!("/api/mcp_servers/{id}"))
        .await?;
    render(
        StatusCode::OK,
        &LiveFragment {
            live: live_of(&visitor, &state, &id)?,
        },
    )
}

/// A tool as the server page shows it.
pub(crate) struct ToolView {
    pub name: String,
    pub description: String,
    pub schema: String,
    /// The name the catalogue the visitor sees lists it under, with the link to its page:
    /// the Try link. `None` when the visitor cannot reach it by a name of this server's.
    pub listed: Option<Listed>,
    /// The groups this server is a member of, through which clients reach its tools instead.
    pub via: Vec<Via>,
    /// Why there is no Try link, when there is none.
    pub note: &'static str,
}

/// A name the catalogue lists, and the page of the tool it names.
pub(crate) struct Listed {
    pub name: String,
    pub href: String,
}

/// A group of the server, and the name the catalogue lists the group's tool under, if it lists
/// one of that name.
pub(crate) struct Via {
    pub group: String,
    pub listed: Option<Listed>,
}

/// The names the visitor's catalogue lists (as the Tools page asks it), each under its owner
/// and the owner's own name for the tool, as the catalogue routes them: what the server page's
/// Try links are made from.
struct Reach(std::collections::HashMap<(String, String), String>);

impl Reach {
    /// `listed`, the tools the visitor sees, with `owners`, who serves each of them
    /// ([`mcpgw_gateway::ToolCatalog::owners_of`]); names no owner serves any more are left out.
    fn new(listed: &[Tool], owners: Vec<Option<(ServerId, String)>>) -> Self {
        Self(
            listed
                .iter()
                .zip(owners)
                .filter_map(|(tool, owner)| {
                    owner.map(|(id, own)| ((id.to_string(), own), tool.name.clone()))
                })
                .collect(),
        )
    }

    /// The name `owner`'s tool `tool` is listed under, if the visitor's catalogue lists it.
    fn name_of(&self, owner: &str, tool: &str) -> Option<Listed> {
        self.0
            .get(&(owner.to_owned(), tool.to_owned()))
            .map(|name| Listed {
                href: super::catalogue::tool_href(name),
                name: name.clone(),
            })
    }
}

/// Why a tool of a group's member has no Try link of its own.
const NOTE_MEMBER: &str = "Clients do not reach this server's tools by its own names: it is a \
                           member of a group, and they call the group's tool.";
/// Why a tool of a server that is no group's member has no Try link.
const NOTE_UNLISTED: &str = "Not in the tool catalogue you see: your roles or the tool \
                             policies do not let you use it, tool pinning withholds it, or \
                             another server's tool took its name.";
/// Why no tool has a Try link without the MCP endpoint.
const NOTE_NO_ENDPOINT: &str = "The MCP endpoint is not enabled, so no tool can be called.";

/// The server's tools as its page shows them, each with the name clients reach it by.
fn tool_views(
    visitor: &Visitor,
    state: &ApiState,
    server: &ServerId,
    tools: &[Tool],
) -> Vec<ToolView> {
    let gateway = state.gateway();
    let groups = gateway
        .groups()
        .map(|groups| groups.groups_of(server))
        .unwrap_or_default();
    // The same catalogue the Tools page lists, as the same caller, and who serves each name.
    let reach = gateway
        .frontend()
        .zip(gateway.tool_catalog())
        .map(|(frontend, catalog)| {
            let listed = frontend.tools(&super::catalogue::caller(visitor));
            Reach::new(&listed, catalog.owners_of(&listed))
        });
    // Each group's own tools (a group exposes those of its first member whose tools are known).
    let group_tools: Vec<(String, Vec<Tool>)> = groups
        .iter()
        .map(|group| {
            let tools = gateway
                .groups()
                .and_then(|service| service.tools(group))
                .unwrap_or_default();
            (group.to_string(), tools)
        })
        .collect();
    tools
        .iter()
        .map(|tool| {
            let (listed, via, note) = match &reach {
                None => (None, Vec::new(), NOTE_NO_ENDPOINT),
                Some(reach) if !group_tools.is_empty() => {
                    let via = group_tools
                        .iter()
                        .map(|(group, tools)| Via {
                            listed: tools
                                .iter()
                                .find(|own| own.name == tool.name)
                                .and_then(|own| reach.name_of(group, &own.name)),
                            group: group.clone(),
                        })
                        .collect();
                    (None, via, NOTE_MEMBER)
                }
                Some(reach) => {
                    let listed = reach.name_of(server.as_str(), &tool.name);
                    (listed, Vec::new(), NOTE_UNLISTED)
                }
            };
            ToolView {
                name: tool.name.clone(),
                description: tool.description.clone().unwrap_or_default(),
                schema: serde_json::to_string_pretty(&tool.input_schema).unwrap_or_default(),
                listed,
                via,
                note,
            }
        })
        .collect()
}

#[derive(Template)]
#[template(path = "server.html")]
struct DetailPage {
    chrome: Chrome,
    id: String,
    href: String,
    mode: String,
    origin: String,
    description: String,
    definition: String,
    tools: Vec<ToolView>,
    tool_source: String,
    history: Vec<InvocationEntry>,
    can_read_history: bool,
    live: Live,
    can_start: bool,
    can_stop: bool,
    can_edit: bool,
    can_delete: bool,
}

/// `GET /ui/servers/{id}`.
pub(crate) async fn detail(
    request: HttpRequest,
    state: web::Data<ApiState>,
    id: web::Path<String>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, Problem> {
    let visitor = visitor(&request, &state).await?;
    let id = server_id(&id)?;
    let api = format!("/api/mcp_servers/{id}");
    visitor.require("GET", &api).await?;
    let details = crate::servers::get_server(state.clone(), web::Path::from(id.to_string()))
        .await?
        .into_inner();
    let can_read_history = visitor.may("GET", &format!("{api}/tools/history"));
    let history = if can_read_history {
        crate::servers::tool_history(
            state.clone(),
            web::Path::from(id.to_string()),
            web::Query(crate::servers::HistoryQuery::first(HISTORY_LINES)),
        )
        .await?
        .into_inner()
        .history
    } else {
        Vec::new()
    };
    let tools = tool_views(&visitor, &state, &id, &details.tools);
    let definition = definition_text(&details);
    let live = live_of(&visitor, &state, &id)?;
    let page = DetailPage {
        chrome: Chrome::new(&visitor, id.as_str(), "servers", query.done.as_deref()),
        href: format!("/ui/servers/{}", encode_component(id.as_str())),
        mode: details.mode.0.clone(),
        origin: serde_json::to_value(details.origin)
            .ok()
            .and_then(|value| value.as_str().map(str::to_owned))
            .unwrap_or_default(),
        description: details.description.clone().unwrap_or_default(),
        definition,
        tools,
        tool_source: serde_json::to_value(details.tool_source)
            .ok()
            .and_then(|value| value.as_str().map(str::to_owned))
            .unwrap_or_default(),
        history,
        can_read_history,
        can_start: visitor.may("POST", &format!("{api}/start")),
        can_stop: visitor.may("POST", &format!("{api}/stop")),
        can_edit: visitor.may("PUT", &api),
        can_delete: visitor.may("DELETE", &api),
        live,
        id: id.to_string(),
    };
    render(StatusCode::OK, &page)
}

/// The definition as the API shows it (secrets masked), without what is not configuration.
fn definition_text(details: &ServerDetails) -> String {
    let mut value = serde_json::to_value(details).unwrap_or(Value::Null);
    if let Some(object) = value.as_object_mut() {
        for runtime in ["tools", "tool_source", "health", "state", "mcp_server_id"] {
            object.remove(runtime);
        }
    }
    serde_yaml::to_string(&value).unwrap_or_default()
}

/// `POST /ui/servers/{id}/{action}`: start, stop, restart or delete.
pub(crate) async fn act(
    request: HttpRequest,
    state: web::Data<ApiState>,
    path: web::Path<(String, String)>,
    form: web::Form<super::ButtonForm>,
) -> Result<HttpResponse, Problem> {
    let visitor = super::poster(&request, &state, form.csrf_token.as_deref()).await?;
    let (raw_id, action) = path.into_inner();
    let id = server_id(&raw_id)?;
    let api = format!("/api/mcp_servers/{id}");
    let back = format!("/ui/servers/{}", encode_component(id.as_str()));
    let path_of = || web::Path::from(id.to_string());
    match action.as_str() {
        "start" => {
            visitor.require("POST", &format!("{api}/start")).await?;
            crate::servers::start_server(state.clone(), path_of()).await?;
            Ok(see_other(&format!("{back}?done=started")))
        }
        "stop" => {
            visitor.require("POST", &format!("{api}/stop")).await?;
            crate::servers::stop_server(state.clone(), path_of()).await?;
            Ok(see_other(&format!("{back}?done=stopped")))
        }
        "restart" => {
            visitor.require("POST", &format!("{api}/stop")).await?;
            visitor.require("POST", &format!("{api}/start")).await?;
            crate::servers::stop_server(state.clone(), path_of()).await?;
            crate::servers::start_server(state.clone(), path_of()).await?;
            Ok(see_other(&format!("{back}?done=restarted")))
        }
        "delete" => {
            visitor.require("DELETE", &api).await?;
            crate::servers::delete_server(state.clone(), path_of()).await?;
            Ok(see_other("/ui/servers?done=deleted"))
        }
        _ => Err(Problem::not_found(
            "no such action: use start, stop, restart or delete",
        )),
    }
}

// ----- the form ---------------------------------------------------------------------------------

/// The fields of the create and edit form. Lists are one entry per line; `env` is one
/// `NAME=value` per line; `more` is YAML for every other setting of a server definition.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ServerForm {
    csrf_token: Option<String>,
    mcp_server_id: Option<String>,
    mode: Option<String>,
    description: Option<String>,
    command: Option<String>,
    url: Option<String>,
    image: Option<String>,
    args: Option<String>,
    env: Option<String>,
    more: Option<String>,
}

#[derive(Template)]
#[template(path = "server_form.html")]
struct FormPage {
    chrome: Chrome,
    creating: bool,
    action: String,
    modes: Vec<String>,
    error: Option<String>,
    id: String,
    mode: String,
    description: String,
    command: String,
    url: String,
    image: String,
    args: String,
    env: String,
    more: String,
}

/// The modes a server can be created in: the three built in, then the registered ones (a group
/// is made on the groups API, not here).
fn modes(state: &ApiState) -> Vec<String> {
    ["subprocess", "docker", "remote"]
        .into_iter()
        .map(str::to_owned)
        .chain(
            definition_rules(state.gateway())
                .launch_modes
                .iter()
                .map(|mode| mode.name().to_owned()),
        )
        .collect()
}

fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The JSON body the API would have been sent for this form.
fn body_of(form: &ServerForm, id: Option<&str>) -> Result<Map<String, Value>, Problem> {
    let mut object = match form
        .more
        .as_deref()
        .map(str::trim)
        .filter(|text| !text.is_empty())
    {
        None => Map::new(),
        Some(text) => match serde_yaml::from_str::<Value>(text) {
            Ok(Value::Object(object)) => object,
            Ok(Value::Null) => Map::new(),
            Ok(_) => {
                return Err(Problem::bad_form(
                    "more settings: must be a YAML mapping of definition fields, such as \
                     `idle_ttl_s: 300`",
                ));
            }
            Err(error) => {
                return Err(Problem::bad_form(&format!(
                    "more settings: not YAML: {error}"
                )));
            }
        },
    };
    let mut set = |name: &str, value: Value| {
        object.insert(name.to_owned(), value);
    };
    if let Some(id) = id {
        set("mcp_server_id", Value::String(id.to_owned()));
    }
    let text = super::page::filled;
    if let Some(mode) = text(&form.mode) {
        set("mode", Value::String(mode));
    }
    if let Some(description) = text(&form.description) {
        set("description", Value::String(description));
    }
    // A remote server's address is its definition's `endpoint`.
    if let Some(url) = text(&form.url) {
        set("endpoint", Value::String(url));
    }
    if let Some(image) = text(&form.image) {
        set("image", Value::String(image));
    }
    for (name, field) in [("command", &form.command), ("args", &form.args)] {
        let entries = lines(field.as_deref().unwrap_or_default());
        if !entries.is_empty() {
            set(name, Value::from(entries));
        }
    }
    let env = lines(form.env.as_deref().unwrap_or_default());
    if !env.is_empty() {
        let mut variables = Map::new();
        for line in env {
            let Some((name, value)) = line.split_once('=') else {
                return Err(Problem::bad_form(&format!(
                    "env: write each variable as NAME=value; `{line}` has no `=`"
                )));
            };
            variables.insert(name.trim().to_owned(), Value::String(value.to_owned()));
        }
        set("env", Value::Object(variables));
    }
    Ok(object)
}

/// Puts the current value back wherever the form sent a value exactly as it was shown masked
/// (`shown`: the current definition through the configuration's masking rules), so the browser
/// never sees a secret and saving the form keeps it. A value the form changed is the form's.
fn unmask(submitted: &mut Value, current: &Value, shown: &Value) {
    match (submitted, current, shown) {
        (Value::String(text), Value::String(real), Value::String(masked))
            if text == masked && real != masked =>
        {
            text.clone_from(real);
        }
        (Value::Object(object), Value::Object(current), Value::Object(shown)) => {
            for (key, value) in object.iter_mut() {
                if let (Some(current), Some(shown)) = (current.get(key), shown.get(key)) {
                    unmask(value, current, shown);
                }
            }
        }
        (Value::Array(items), Value::Array(current), Value::Array(shown)) => {
            for ((item, current), shown) in items.iter_mut().zip(current).zip(shown) {
                unmask(item, current, shown);
            }
        }
        _ => {}
    }
}

fn form_page(
    visitor: &Visitor,
    state: &ApiState,
    creating: bool,
    id: &str,
    form: &ServerForm,
    error: Option<String>,
) -> FormPage {
    let field = |value: &Option<String>| value.clone().unwrap_or_default();
    FormPage {
        chrome: Chrome::new(
            visitor,
            if creating {
                "New MCP server".to_owned()
            } else {
                format!("Edit {id}")
            },
            "servers",
            None,
        ),
        creating,
        action: if creating {
            "/ui/servers".to_owned()
        } else {
            format!("/ui/servers/{}", encode_component(id))
        },
        modes: modes(state),
        error,
        id: id.to_owned(),
        mode: form.mode.clone().unwrap_or_else(|| "subprocess".to_owned()),
        description: field(&form.description),
        command: field(&form.command),
        url: field(&form.url),
        image: field(&form.image),
        args: field(&form.args),
        env: field(&form.env),
        more: field(&form.more),
    }
}

/// `GET /ui/new-server`.
pub(crate) async fn new_form(
    request: HttpRequest,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, Problem> {
    let visitor = visitor(&request, &state).await?;
    visitor.require("POST", "/api/mcp_servers").await?;
    let page = form_page(&visitor, &state, true, "", &ServerForm::default(), None);
    render(StatusCode::OK, &page)
}

/// `POST /ui/servers`: creates through the API's handler; a refusal shows the form again
/// with the API's message and what was typed.
pub(crate) async fn create(
    request: HttpRequest,
    state: web::Data<ApiState>,
    form: web::Form<ServerForm>,
) -> Result<HttpResponse, Problem> {
    let visitor = super::poster(&request, &state, form.csrf_token.as_deref()).await?;
    visitor.require("POST", "/api/mcp_servers").await?;
    let id = form
        .mcp_server_id
        .clone()
        .unwrap_or_default()
        .trim()
        .to_owned();
    let outcome = match body_of(&form, Some(&id)) {
        Ok(body) => {
            let bytes = Bytes::from(serde_json::to_vec(&Value::Object(body)).unwrap_or_default());
            crate::servers::create_server(state.clone(), Ok(bytes))
                .await
                .map_err(Problem::from)
        }
        Err(problem) => Err(problem),
    };
    match outcome {
        Ok(_) => Ok(see_other(&format!(
            "/ui/servers/{}?done=created",
            encode_component(&id)
        ))),
        Err(problem) => {
            let page = form_page(
                &visitor,
                &state,
                true,
                &id,
                &form,
                Some(problem.message().to_owned()),
            );
            render(problem.status(), &page)
        }
    }
}

/// `GET /ui/servers/{id}/edit`: the form filled with the definition, secrets masked.
pub(crate) async fn edit_form(
    request: HttpRequest,
    state: web::Data<ApiState>,
    id: web::Path<String>,
) -> Result<HttpResponse, Problem> {
    let visitor = visitor(&request, &state).await?;
    let id = server_id(&id)?;
    visitor
        .require("PUT", &format!("/api/mcp_servers/{id}"))
        .await?;
    let snapshot = state
        .gateway()
        .servers()
        .snapshot(&id)
        .map_err(crate::error::ApiError::from)?;
    let form = form_of_definition(&snapshot)?;
    render(
        StatusCode::OK,
        &form_page(&visitor, &state, false, id.as_str(), &form, None),
    )
}

fn current_definition(snapshot: &ServerSnapshot) -> Result<Map<String, Value>, Problem> {
    let definition = ServerDefinition::from_server_spec(&snapshot.spec).ok_or_else(|| {
        Problem::new(
            StatusCode::CONFLICT,
            crate::error::names::CONFLICT,
            "this server's definition cannot be edited here",
        )
    })?;
    match serde_json::to_value(definition) {
        Ok(Value::Object(object)) => Ok(object),
        _ => Ok(Map::new()),
    }
}

fn form_of_definition(snapshot: &ServerSnapshot) -> Result<ServerForm, Problem> {
    let mut definition = mcpgw_config::sanitized_definition(&current_definition(snapshot)?);
    let mut take_text = |name: &str| match definition.remove(name) {
        Some(Value::String(text)) => Some(text),
        Some(other) => {
            definition.insert(name.to_owned(), other);
            None
        }
        None => None,
    };
    let mode = take_text("mode");
    let description = take_text("description");
    let url = take_text("endpoint");
    let image = take_text("image");
    let mut take_list = |name: &str| match definition.remove(name) {
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => Some(
            items
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        Some(other) => {
            definition.insert(name.to_owned(), other);
            None
        }
        None => None,
    };
    let command = take_list("command");
    let args = take_list("args");
    let env = match definition.remove("env") {
        Some(Value::Object(variables)) => Some(
            variables
                .iter()
                .map(|(name, value)| format!("{name}={}", value.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        Some(other) => {
            definition.insert("env".to_owned(), other);
            None
        }
        None => None,
    };
    let more = if definition.is_empty() {
        None
    } else {
        serde_yaml::to_string(&Value::Object(definition)).ok()
    };
    Ok(ServerForm {
        csrf_token: None,
        mcp_server_id: None,
        mode,
        description,
        command,
        url,
        image,
        args,
        env,
        more,
    })
}

/// `POST /ui/servers/{id}`: replaces the definition through the API's handler.
pub(crate) async fn update(
    request: HttpRequest,
    state: web::Data<ApiState>,
    id: web::Path<String>,
    form: web::Form<ServerForm>,
) -> Result<HttpResponse, Problem> {
    let visitor = super::poster(&request, &state, form.csrf_token.as_deref()).await?;
    let id = server_id(&id)?;
    visitor
        .require("PUT", &format!("/api/mcp_servers/{id}"))
        .await?;
    let snapshot = state
        .gateway()
        .servers()
        .snapshot(&id)
        .map_err(crate::error::ApiError::from)?;
    let current = current_definition(&snapshot).unwrap_or_default();
    let shown = Value::Object(mcpgw_config::sanitized_definition(&current));
    let current = Value::Object(current);
    let outcome = match body_of(&form, None) {
        Ok(body) => {
            let mut body = Value::Object(body);
            unmask(&mut body, &current, &shown);
            let bytes = Bytes::from(serde_json::to_vec(&body).unwrap_or_default());
            crate::servers::update_server(state.clone(), web::Path::from(id.to_string()), Ok(bytes))
                .await
                .map(|_| ())
                .map_err(Problem::from)
        }
        Err(problem) => Err(problem),
    };
    match outcome {
        Ok(()) => Ok(see_other(&format!(
            "/ui/servers/{}?done=updated",
            encode_component(id.as_str())
        ))),
        Err(problem) => {
            let page = form_page(
                &visitor,
                &state,
                false,
                id.as_str(),
                &form,
                Some(problem.message().to_owned()),
            );
            render(problem.status(), &page)
        }
    }
}

#[cfg(test)]
mod tests {
    use mcpgw_config::SECRET_MASK;
    use serde_json::json;

    use super::*;

    fn form(fields: &[(&str, &str)]) -> ServerForm {
        let mut form = ServerForm::default();
        for (name, value) in fields {
            let value = Some((*value).to_owned());
            match *name {
                "mode" => form.mode = value,
                "url" => form.url = value,
                "command" => form.command = value,
                "env" => form.env = value,
                "more" => form.more = value,
                other => panic!("no field {other}"),
            }
        }
        form
    }

    #[test]
    fn the_form_becomes_the_body_the_api_takes() {
        let body = body_of(
            &form(&[
                ("mode", "remote"),
                ("url", " http://upstream.test/mcp "),
                ("env", "A=1\n\n B = two=parts\n"),
                ("more", "idle_ttl_s: 300\n"),
            ]),
            Some("made"),
        )
        .unwrap();
        assert_eq!(
            Value::Object(body),
            json!({"mcp_server_id": "made", "mode": "remote",
                   "endpoint": "http://upstream.test/mcp",
                   "env": {"A": "1", "B": " two=parts"}, "idle_ttl_s": 300})
        );
        let body = body_of(&form(&[("command", "server\n--flag\n\n")]), None).unwrap();
        assert_eq!(body["command"], json!(["server", "--flag"]));
    }

    fn reach(listed: &[&str], owners: &[Option<(&str, &str)>]) -> Reach {
        let listed: Vec<Tool> = listed.iter().map(|name| Tool::new(*name)).collect();
        let owners = owners
            .iter()
            .map(|owner| owner.map(|(id, own)| (ServerId::parse(id).unwrap(), own.to_owned())))
            .collect();
        Reach::new(&listed, owners)
    }

    #[test]
    fn a_try_link_names_the_tool_as_the_catalogue_lists_it() {
        // Prefixed, bare and another separator: whatever the name, it leads back to its owner.
        let reach = reach(
            &["demo__echo", "add", "gh.search"],
            &[
                Some(("demo", "echo")),
                Some(("math", "add")),
                Some(("github", "search")),
            ],
        );
        let link = |owner: &str, tool: &str| {
            reach
                .name_of(owner, tool)
                .map(|listed| (listed.name, listed.href))
        };
        assert_eq!(
            link("demo", "echo"),
            Some(("demo__echo".to_owned(), "/ui/tools/demo__echo".to_owned()))
        );
        assert_eq!(
            link("math", "add"),
            Some(("add".to_owned(), "/ui/tools/add".to_owned()))
        );
        assert_eq!(
            link("github", "search"),
            Some(("gh.search".to_owned(), "/ui/tools/gh.search".to_owned()))
        );
    }

    #[test]
    fn a_tool_the_catalogue_does_not_list_as_this_servers_gets_no_try_link() {
        // Bad input: a catalogue that lists nothing of the server, a name another owner's tool
        // took, and a listed name that is no longer routed.
        assert!(reach(&[], &[]).name_of("demo", "echo").is_none());
        let reach = reach(&["echo", "stale"], &[Some(("other", "echo")), None]);
        assert!(reach.name_of("demo", "echo").is_none());
        assert!(reach.name_of("demo", "stale").is_none());
    }

    #[test]
    fn a_form_that_cannot_be_a_definition_says_which_field() {
        // Bad input: an environment line without `=`, more settings that are not YAML, and
        // more settings that are YAML but not a mapping.
        let error = body_of(&form(&[("env", "JUSTANAME")]), None).unwrap_err();
        assert!(error.message().contains("NAME=value"), "{error}");
        let error = body_of(&form(&[("more", "a: [unclosed")]), None).unwrap_err();
        assert!(
            error.message().starts_with("more settings: not YAML"),
            "{error}"
        );
        let error = body_of(&form(&[("more", "- a list")]), None).unwrap_err();
        assert!(error.message().contains("mapping"), "{error}");
    }

    #[test]
    fn values_left_as_shown_keep_the_secret_they_stand_for() {
        let current = json!({"command": ["server", "--token", "t0p-secret"],
                             "env": {"KEPT": "s3cret", "CHANGED": "old"},
                             "headers": {"Authorization": "Bearer t0ken"},
                             "description": "plain"})
        .as_object()
        .unwrap()
        .clone();
        let shown = mcpgw_config::sanitized_definition(&current);
        // The form shows no secret, secret-looking arguments included.
        let shown_text = Value::Object(shown.clone()).to_string();
        for secret in ["t0p-secret", "s3cret", "t0ken"] {
            assert!(!shown_text.contains(secret), "{shown_text}");
        }
        // Sent back as shown, each keeps its value; what the form changed is the form's; a
        // value that happens to read `***` where nothing was masked stays as sent.
        let mut submitted = Value::Object(shown.clone());
        submitted["env"]["CHANGED"] = json!("new");
        submitted["description"] = json!(SECRET_MASK);
        unmask(
            &mut submitted,
            &Value::Object(current),
            &Value::Object(shown),
        );
        assert_eq!(
            submitted,
            json!({"command": ["server", "--token", "t0p-secret"],
                   "env": {"KEPT": "s3cret", "CHANGED": "new"},
                   "headers": {"Authorization": "Bearer t0ken"},
                   "description": SECRET_MASK})
        );
    }
}
