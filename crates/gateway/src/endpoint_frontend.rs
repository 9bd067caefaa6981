//! One curated endpoint as an MCP server: its tools, under its names and overrides, routed to
//! the front end that serves `/mcp` (so that the caller's permissions, the tool access
//! policies, rate limits and pins apply exactly as there), and, with `tool_search`, the
//! `find_tools` meta-tool in their place.
//!
//! An endpoint serves tools only: it lists no prompts and no resources.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use mcpgw_core::{
    CallContext, Caller, FrontendError, FrontendErrorKind, McpFrontend, Tool, ToolCallOutcome,
};
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use crate::endpoints::EndpointService;

/// The name of the tool search meta-tool.
pub const FIND_TOOLS: &str = "find_tools";

/// How many tools `find_tools` answers unless asked for another number, and at most.
const DEFAULT_FOUND: usize = 10;
const MAX_FOUND: usize = 50;

/// The [`McpFrontend`] of the curated endpoint `name`.
pub struct EndpointFrontend {
    name: String,
    endpoints: Arc<EndpointService>,
    inner: Arc<dyn McpFrontend>,
    changes: watch::Sender<u64>,
    /// The last list answered, with the inner list and the resolution it was made from: a
    /// caller who sees what the last one saw gets the same `Arc`, so that what protocol
    /// adapters derive from a list (and cache by its identity) is derived once.
    last_visible: std::sync::Mutex<Option<VisibleFrom>>,
    search_only: Arc<Vec<Tool>>,
}

/// A visible list, and the inner list and resolution it was made from.
type VisibleFrom = (
    Arc<Vec<Tool>>,
    Arc<crate::endpoints::Resolved>,
    Arc<Vec<Tool>>,
);

impl std::fmt::Debug for EndpointFrontend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointFrontend")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl EndpointFrontend {
    /// The endpoint `name` of `endpoints`, in front of `inner` (the front end of `/mcp` for
    /// HTTP; the bare catalogue for stdio). Call it within a tokio runtime: a task follows
    /// the changes of both, for [`McpFrontend::changes`], while the front end lives.
    pub fn new(
        name: impl Into<String>,
        endpoints: Arc<EndpointService>,
        inner: Arc<dyn McpFrontend>,
    ) -> Arc<Self> {
        let frontend = Arc::new(Self {
            name: name.into(),
            endpoints,
            inner,
            changes: watch::channel(0).0,
            last_visible: std::sync::Mutex::new(None),
            search_only: Arc::new(vec![find_tools_definition()]),
        });
        let weak = Arc::downgrade(&frontend);
        let mut catalog = frontend.inner.changes();
        let mut definitions = frontend.endpoints.changes();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                loop {
                    tokio::select! {
                        changed = catalog.changed() => if changed.is_err() { return },
                        changed = definitions.changed() => if changed.is_err() { return },
                    }
                    let Some(frontend) = weak.upgrade() else {
                        return;
                    };
                    frontend.changes.send_modify(|version| *version += 1);
                }
            });
        }
        frontend
    }

    /// The endpoint's tools that `caller` may use.
    fn visible(&self, caller: &Caller) -> Arc<Vec<Tool>> {
        let Some(resolved) = self.endpoints.resolve(&self.name) else {
            return Arc::default();
        };
        let inner = self.inner.tools(caller);
        let mut last = self
            .last_visible
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((from_inner, from_resolved, visible)) = last.as_ref()
            && Arc::ptr_eq(from_inner, &inner)
            && Arc::ptr_eq(from_resolved, &resolved)
        {
            return Arc::clone(visible);
        }
        let allowed: HashSet<&str> = inner.iter().map(|tool| tool.name.as_str()).collect();
        let visible: Arc<Vec<Tool>> = Arc::new(
            resolved
                .tools
                .iter()
                .filter(|tool| allowed.contains(tool.catalog_name.as_str()))
                .map(|tool| tool.tool.clone())
                .collect(),
        );
        *last = Some((Arc::clone(&inner), resolved, Arc::clone(&visible)));
        visible
    }

    fn searches(&self) -> bool {
        self.endpoints
            .get(&self.name)
            .is_some_and(|spec| spec.tool_search)
    }

    fn find_tools(
        &self,
        caller: &Caller,
        arguments: Option<&Map<String, Value>>,
    ) -> Result<ToolCallOutcome, FrontendError> {
        let invalid = |message: &str| {
            FrontendError::new(
                FrontendErrorKind::InvalidArguments,
                format!("{FIND_TOOLS}: {message}"),
            )
        };
        let query = arguments
            .and_then(|arguments| arguments.get("query"))
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|query| !query.is_empty())
            .ok_or_else(|| invalid("`query` must be a non-empty string of words to look for"))?;
        let limit = match arguments.and_then(|arguments| arguments.get("limit")) {
            None | Some(Value::Null) => DEFAULT_FOUND,
            Some(value) => value
                .as_u64()
                .filter(|limit| (1..=MAX_FOUND as u64).contains(limit))
                .map(|limit| usize::try_from(limit).unwrap_or(MAX_FOUND))
                .ok_or_else(|| {
                    invalid(&format!("`limit` must be an integer from 1 to {MAX_FOUND}"))
                })?,
        };
        let found = search(&self.visible(caller), query, limit);
        let text = serde_json::to_string(&found).unwrap_or_default();
        Ok(ToolCallOutcome {
            result: json!({
                "content": [{"type": "text", "text": text}],
                "structuredContent": {"tools": found},
            }),
            is_error: false,
        })
    }
}

/// The definition of the tool search meta-tool.
pub fn find_tools_definition() -> Tool {
    Tool {
        name: FIND_TOOLS.to_owned(),
        title: Some("Find tools".to_owned()),
        description: Some(
            "Searches this endpoint's tools by name and description and answers the best \
             matches' definitions, each callable by its name. Use it before calling a tool \
             you have not seen."
                .to_owned(),
        ),
        input_schema: json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words that describe what the tool should do"},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_FOUND, "default": DEFAULT_FOUND,
                          "description": "How many tools to answer at most"},
            },
            "required": ["query"],
        }),
        output_schema: Some(json!({
            "type": "object",
            "properties": {"tools": {"type": "array", "items": {"type": "object"}}},
            "required": ["tools"],
        })),
        annotations: Some(json!({"readOnlyHint": true, "openWorldHint": false})),
    }
}

/// The words of `text`, lowercased: runs of letters and digits (`get_weather` is `get`,
/// `weather`).
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The tools that match `query`, best first, at most `limit`: each word of the query found in
/// a tool's name counts 3, in its title 2, in its description 1 (a word of the query that is
/// the start of a word of the tool counts too: `weath` finds `weather`); the whole query equal
/// to the name adds 5. Ties go by name. Tools that match no word are left out.
pub fn search(tools: &[Tool], query: &str, limit: usize) -> Vec<Tool> {
    let wanted = words(query);
    let whole = query.trim().to_lowercase();
    let mut scored: Vec<(u32, &Tool)> = tools
        .iter()
        .filter_map(|tool| {
            let name = words(&tool.name);
            let title = words(tool.title.as_deref().unwrap_or_default());
            let description = words(tool.description.as_deref().unwrap_or_default());
            let has = |field: &[String], word: &str| field.iter().any(|w| w.starts_with(word));
            let mut score: u32 = wanted
                .iter()
                .map(|word| {
                    3 * u32::from(has(&name, word))
                        + 2 * u32::from(has(&title, word))
                        + u32::from(has(&description, word))
                })
                .sum();
            if score > 0 && tool.name.to_lowercase() == whole {
                score += 5;
            }
            (score > 0).then_some((score, tool))
        })
        .collect();
    scored.sort_by(|(a_score, a), (b_score, b)| b_score.cmp(a_score).then(a.name.cmp(&b.name)));
    scored
        .into_iter()
        .take(limit)
        .map(|(_, tool)| tool.clone())
        .collect()
}

#[async_trait]
impl McpFrontend for EndpointFrontend {
    fn tools(&self, caller: &Caller) -> Arc<Vec<Tool>> {
        if self.searches() {
            return Arc::clone(&self.search_only);
        }
        self.visible(caller)
    }

    async fn call_tool(
        &self,
        caller: &Caller,
        name: &str,
        arguments: Option<Map<String, Value>>,
        ctx: CallContext,
    ) -> Result<ToolCallOutcome, FrontendError> {
        if name == FIND_TOOLS && self.searches() {
            return self.find_tools(caller, arguments.as_ref());
        }
        let catalog_name = self
            .endpoints
            .resolve(&self.name)
            .and_then(|resolved| resolved.get(name).map(|tool| tool.catalog_name.clone()))
            .ok_or_else(|| FrontendError::unknown("tool", name))?;
        self.inner
            .call_tool(caller, &catalog_name, arguments, ctx)
            .await
            .map_err(|mut error| {
                // The caller knows the tool by this endpoint's name only.
                if error.kind == FrontendErrorKind::UnknownName {
                    error.message = format!("unknown tool: {name}");
                }
                error
            })
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    async fn settle(&self) {
        self.inner.settle().await;
    }

    async fn prompts(&self, _caller: &Caller) -> Vec<Value> {
        Vec::new()
    }

    async fn get_prompt(
        &self,
        _caller: &Caller,
        name: &str,
        _arguments: Option<Map<String, Value>>,
        _ctx: CallContext,
    ) -> Result<Value, FrontendError> {
        Err(FrontendError::unknown("prompt", name))
    }

    async fn resources(&self, _caller: &Caller) -> Vec<Value> {
        Vec::new()
    }

    async fn resource_templates(&self, _caller: &Caller) -> Vec<Value> {
        Vec::new()
    }

    async fn read_resource(
        &self,
        _caller: &Caller,
        uri: &str,
        _ctx: CallContext,
    ) -> Result<Value, FrontendError> {
        Err(FrontendError::unknown("resource", uri))
    }

    fn offers_tasks(&self) -> bool {
        self.inner.offers_tasks()
    }

    async fn task_request(
        &self,
        caller: &Caller,
        method: &str,
        task_id: &str,
        params: Value,
    ) -> Result<Value, FrontendError> {
        self.inner
            .task_request(caller, method, task_id, params)
            .await
    }

    async fn set_logging_level(&self, caller: &Caller, level: &str) {
        self.inner.set_logging_level(caller, level).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, title: Option<&str>, description: &str) -> Tool {
        Tool {
            title: title.map(str::to_owned),
            ..Tool::new(name).with_description(description)
        }
    }

    fn names(tools: &[Tool]) -> Vec<&str> {
        tools.iter().map(|tool| tool.name.as_str()).collect()
    }

    #[test]
    fn search_ranks_names_over_titles_over_descriptions() {
        let tools = [
            tool("weather__forecast", None, "Forecast for a city"),
            tool("maps__route", Some("Weather-aware route"), "Plans a route"),
            tool(
                "notes__add",
                None,
                "Adds a note; mentions weather in passing",
            ),
            tool("math__add", None, "Adds two numbers"),
        ];
        assert_eq!(
            names(&search(&tools, "weather", 10)),
            ["weather__forecast", "maps__route", "notes__add"]
        );
        // A prefix finds the whole word; several words add up.
        assert_eq!(names(&search(&tools, "weath route", 10))[0], "maps__route");
        // The limit, and ties by name.
        assert_eq!(names(&search(&tools, "add", 1)), ["math__add"]);
        assert_eq!(
            names(&search(&tools, "adds", 10)),
            ["math__add", "notes__add"]
        );
        // Nothing matches: nothing is answered.
        assert!(search(&tools, "database", 10).is_empty());
        // The exact name wins over everything.
        assert_eq!(names(&search(&tools, "math__add", 10))[0], "math__add");
    }

    #[test]
    fn the_meta_tool_declares_its_arguments() {
        let definition = find_tools_definition();
        assert_eq!(definition.name, FIND_TOOLS);
        assert_eq!(definition.input_schema["required"], json!(["query"]));
        assert_eq!(
            definition.input_schema["properties"]["limit"]["maximum"],
            json!(MAX_FOUND)
        );
    }
}
