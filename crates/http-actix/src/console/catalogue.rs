//! The tools page: the aggregated catalogue exactly as the signed-in caller sees it at `/mcp`
//! (the same front end, so the same roles, tool policies and token scopes), searchable and a
//! page at a time; and a page per tool whose form is built from the tool's `inputSchema`, that
//! calls the tool through that front end and shows the result.

use std::collections::HashMap;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use mcpgw_core::{CallContext, Caller, FrontendErrorKind, Tool};
use mcpgw_gateway::caller_of;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::page::encode_component;
use super::{Chrome, Problem, Visitor, check_csrf, render, visitor};
use crate::error::names;
use crate::state::ApiState;

const PAGE_SIZE: usize = 50;

pub(crate) struct ToolRow {
    pub name: String,
    pub href: String,
    pub description: String,
}

#[derive(Template)]
#[template(path = "tools.html")]
struct ListPage {
    chrome: Chrome,
    q: String,
    tools: Vec<ToolRow>,
    total: usize,
    matching: usize,
    page: usize,
    pages: usize,
    prev: Option<String>,
    next: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ListQuery {
    q: Option<String>,
    page: Option<String>,
}

/// Who the visitor is to the catalogue: the caller the MCP endpoint would see.
pub(crate) fn caller(visitor: &Visitor) -> Caller {
    if visitor.session.method == mcpgw_gateway::SignInMethod::AuthenticationOff {
        return Caller::default();
    }
    caller_of(visitor.identity())
}

fn tools_of(state: &ApiState, visitor: &Visitor) -> Result<std::sync::Arc<Vec<Tool>>, Problem> {
    let frontend = state.gateway().frontend().ok_or_else(|| {
        Problem::not_found("the MCP endpoint is not enabled, so there is no tool catalogue")
    })?;
    Ok(frontend.tools(&caller(visitor)))
}

pub(crate) fn tool_href(name: &str) -> String {
    format!("/ui/tools/{}", encode_component(name))
}

/// `GET /ui/tools`.
pub(crate) async fn list(
    request: HttpRequest,
    state: web::Data<ApiState>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, Problem> {
    let visitor = visitor(&request, &state).await?;
    let tools = tools_of(&state, &visitor)?;
    let needle = query.q.as_deref().unwrap_or_default().trim().to_lowercase();
    let page = super::page::page_number(query.page.as_deref())?;
    let matching: Vec<&Tool> = tools
        .iter()
        .filter(|tool| {
            needle.is_empty()
                || tool.name.to_lowercase().contains(&needle)
                || tool
                    .description
                    .as_deref()
                    .is_some_and(|text| text.to_lowercase().contains(&needle))
        })
        .collect();
    let pages = matching.len().div_ceil(PAGE_SIZE).max(1);
    let page = page.min(pages);
    let q = query.q.clone().unwrap_or_default();
    let link = |page: usize| format!("/ui/tools?q={}&page={page}", encode_component(&q));
    let list = ListPage {
        chrome: Chrome::new(&visitor, "Tools", "tools", None),
        tools: matching
            .iter()
            .skip((page - 1) * PAGE_SIZE)
            .take(PAGE_SIZE)
            .map(|tool| ToolRow {
                href: tool_href(&tool.name),
                name: tool.name.clone(),
                description: tool.description.clone().unwrap_or_default(),
            })
            .collect(),
        total: tools.len(),
        matching: matching.len(),
        prev: (page > 1).then(|| link(page - 1)),
        next: (page < pages).then(|| link(page + 1)),
        q,
        page,
        pages,
    };
    render(StatusCode::OK, &list)
}

/// One field of a tool's form.
pub(crate) struct Field {
    pub name: String,
    pub id: String,
    pub label: String,
    pub description: String,
    /// `text`, `number`, `boolean`, `choice` or `json`.
    pub kind: &'static str,
    pub required: bool,
    pub choices: Vec<String>,
    pub value: String,
}

#[derive(Template)]
#[template(path = "tool.html")]
struct ToolPage {
    chrome: Chrome,
    name: String,
    href: String,
    description: String,
    schema: String,
    fields: Vec<Field>,
    free_form: bool,
    arguments: String,
    error: Option<String>,
    result: Option<String>,
    result_is_error: bool,
    /// Whether the visitor's roles let it call tools: without, the form is not shown.
    can_call: bool,
}

fn fields_of(tool: &Tool, values: &HashMap<String, String>) -> (Vec<Field>, bool) {
    let schema = &tool.input_schema;
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return (Vec::new(), true);
    };
    let fields = properties
        .iter()
        .enumerate()
        .map(|(index, (name, property))| {
            let choices: Vec<String> = property
                .get("enum")
                .and_then(Value::as_array)
                .map(|items| {
                    items
                        .iter()
                        .map(|item| {
                            item.as_str()
                                .map_or_else(|| item.to_string(), str::to_owned)
                        })
                        .collect()
                })
                .unwrap_or_default();
            let kind = match property.get("type").and_then(Value::as_str) {
                _ if !choices.is_empty() => "choice",
                Some("string") => "text",
                Some("number" | "integer") => "number",
                Some("boolean") => "boolean",
                _ => "json",
            };
            Field {
                id: format!("arg-{index}"),
                label: property
                    .get("title")
                    .and_then(Value::as_str)
                    .unwrap_or(name)
                    .to_owned(),
                description: property
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                kind,
                required: required.contains(&name.as_str()),
                choices,
                value: values
                    .get(&format!("arg.{name}"))
                    .cloned()
                    .unwrap_or_default(),
                name: name.clone(),
            }
        })
        .collect();
    (fields, false)
}

/// The arguments the form describes, typed as the schema says; a value that does not fit its
/// type is refused naming the field.
fn arguments_of(
    tool: &Tool,
    form: &HashMap<String, String>,
) -> Result<Option<Map<String, Value>>, Problem> {
    let (fields, free_form) = fields_of(tool, form);
    if free_form {
        let raw = form
            .get("arguments")
            .map(String::as_str)
            .unwrap_or_default()
            .trim();
        if raw.is_empty() {
            return Ok(None);
        }
        return match serde_json::from_str::<Value>(raw) {
            Ok(Value::Object(object)) => Ok(Some(object)),
            Ok(_) => Err(Problem::bad_form("arguments: must be a JSON object")),
            Err(error) => Err(Problem::bad_form(&format!("arguments: not JSON: {error}"))),
        };
    }
    let mut arguments = Map::new();
    for field in fields {
        let raw = field.value.trim();
        if raw.is_empty() {
            continue;
        }
        let value = match field.kind {
            "number" => raw
                .parse::<i64>()
                .map(Value::from)
                .or_else(|_| raw.parse::<f64>().map(Value::from))
                .map_err(|_| {
                    Problem::bad_form(&format!("{}: must be a number; got `{raw}`", field.name))
                })?,
            "boolean" => match raw {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => {
                    return Err(Problem::bad_form(&format!(
                        "{}: must be true or false",
                        field.name
                    )));
                }
            },
            "json" => serde_json::from_str(raw).map_err(|error| {
                Problem::bad_form(&format!("{}: not JSON: {error}", field.name))
            })?,
            _ => Value::String(raw.to_owned()),
        };
        arguments.insert(field.name, value);
    }
    Ok(Some(arguments))
}

fn find_tool(tools: &[Tool], name: &str) -> Result<Tool, Problem> {
    tools
        .iter()
        .find(|tool| tool.name == name)
        .cloned()
        .ok_or_else(|| Problem::not_found(&format!("no tool `{name}` that you may use")))
}

fn tool_page(visitor: &Visitor, tool: &Tool, form: &HashMap<String, String>) -> ToolPage {
    let (fields, free_form) = fields_of(tool, form);
    ToolPage {
        chrome: Chrome::new(visitor, tool.name.clone(), "tools", None),
        href: tool_href(&tool.name),
        name: tool.name.clone(),
        description: tool.description.clone().unwrap_or_default(),
        schema: serde_json::to_string_pretty(&tool.input_schema).unwrap_or_default(),
        fields,
        free_form,
        arguments: form.get("arguments").cloned().unwrap_or_default(),
        error: None,
        result: None,
        result_is_error: false,
        can_call: visitor.may_call_tools(),
    }
}

/// `GET /ui/tools/{name}`.
pub(crate) async fn tool(
    request: HttpRequest,
    state: web::Data<ApiState>,
    name: web::Path<String>,
) -> Result<HttpResponse, Problem> {
    let visitor = visitor(&request, &state).await?;
    let tools = tools_of(&state, &visitor)?;
    let tool = find_tool(&tools, &name)?;
    render(StatusCode::OK, &tool_page(&visitor, &tool, &HashMap::new()))
}

/// `POST /ui/tools/{name}`: calls the tool as the signed-in caller.
pub(crate) async fn call(
    request: HttpRequest,
    state: web::Data<ApiState>,
    name: web::Path<String>,
    form: web::Form<HashMap<String, String>>,
) -> Result<HttpResponse, Problem> {
    let visitor = visitor(&request, &state).await?;
    check_csrf(&visitor, form.get(super::CSRF_FIELD).map(String::as_str))?;
    let tools = tools_of(&state, &visitor)?;
    let tool = find_tool(&tools, &name)?;
    let mut page = tool_page(&visitor, &tool, &form);
    let arguments = match arguments_of(&tool, &form) {
        Ok(arguments) => arguments,
        Err(problem) => {
            page.error = Some(problem.message().to_owned());
            return render(problem.status(), &page);
        }
    };
    let frontend = state.gateway().frontend().ok_or_else(|| {
        Problem::not_found("the MCP endpoint is not enabled, so there is no tool catalogue")
    })?;
    let mut caller = caller(&visitor);
    caller.address = state.client_address(&request);
    let ctx = CallContext {
        principal: caller.principal.clone(),
        ..CallContext::default()
    };
    match frontend
        .call_tool(&caller, &tool.name, arguments, ctx)
        .await
    {
        Ok(outcome) => {
            page.result = Some(serde_json::to_string_pretty(&outcome.result).unwrap_or_default());
            page.result_is_error = outcome.is_error;
            render(StatusCode::OK, &page)
        }
        Err(error) => {
            let (status, name) = match error.kind {
                FrontendErrorKind::UnknownName => (StatusCode::NOT_FOUND, names::NOT_FOUND),
                FrontendErrorKind::InvalidArguments => {
                    (StatusCode::UNPROCESSABLE_ENTITY, names::VALIDATION)
                }
                FrontendErrorKind::Timeout => {
                    (StatusCode::GATEWAY_TIMEOUT, names::UPSTREAM_TIMEOUT)
                }
                FrontendErrorKind::RateLimited { .. } => {
                    (StatusCode::TOO_MANY_REQUESTS, names::RATE_LIMIT_EXCEEDED)
                }
                _ => (StatusCode::BAD_GATEWAY, names::MCP_SERVER_UNAVAILABLE),
            };
            tracing::debug!(%error, error_name = name, "a tool call from the console failed");
            page.error = Some(error.message);
            render(status, &page)
        }
    }
}
