//! The catalogue under `tool_names` settings of every kind: custom prefixes, no prefixes, a
//! separator of its own, shortened names, and names two owners would share.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use mcpgw_config::{ToolNames, ToolPrefix};
use mcpgw_core::{
    CallContext, Caller, DomainEvent, EventSink, ExitStatusInfo, FrontendErrorKind, LaunchError,
    LaunchedServer, LogBuffer, ManagerSettings, McpFrontend, McpSession, ServerId, ServerLauncher,
    ServerManager, ServerSpec, SessionError, Tool, ToolCall, ToolCallOutcome,
};
use mcpgw_gateway::{EventBus, ToolCatalog};
use mcpgw_testkit::clock::FakeClock;
use mcpgw_testkit::fakes::{FakeSession, RecordingEventSink, TokioSpawner};
use serde_json::{Map, Value, json};

/// A session that lists tools as a fake one does, and prompts and resources named as given.
struct Listing {
    tools: FakeSession,
    prompts: Vec<String>,
    resources: Vec<String>,
}

#[async_trait]
impl McpSession for Listing {
    async fn list_tools(&self) -> Result<Vec<Tool>, SessionError> {
        self.tools.list_tools().await
    }

    async fn call_tool(
        &self,
        call: ToolCall,
        ctx: CallContext,
    ) -> Result<ToolCallOutcome, SessionError> {
        self.tools.call_tool(call, ctx).await
    }

    async fn ping(&self) -> Result<(), SessionError> {
        self.tools.ping().await
    }

    async fn close(&self) {
        self.tools.close().await;
    }

    fn has_ended(&self) -> bool {
        self.tools.has_ended()
    }

    async fn closed(&self) -> ExitStatusInfo {
        self.tools.closed().await
    }

    async fn list_prompts(&self) -> Result<Vec<Value>, SessionError> {
        Ok(self
            .prompts
            .iter()
            .map(|name| json!({"name": name, "description": "a prompt"}))
            .collect())
    }

    async fn get_prompt(
        &self,
        name: &str,
        _arguments: Option<Map<String, Value>>,
        _ctx: CallContext,
    ) -> Result<Value, SessionError> {
        // Answers which prompt, by its own name, was asked for.
        Ok(json!({"messages": [], "description": name}))
    }

    async fn list_resources(&self) -> Result<Vec<Value>, SessionError> {
        Ok(self
            .resources
            .iter()
            .map(|name| json!({"uri": format!("file:///{name}"), "name": name}))
            .collect())
    }
}

/// What a [`Listing`] session lists: (tools, prompts, resources).
type Lists = (Vec<String>, Vec<String>, Vec<String>);

/// Launches [`Listing`] sessions, with the lists set for each server id.
#[derive(Default)]
struct ListingLauncher {
    lists: std::sync::Mutex<BTreeMap<String, Lists>>,
    sessions: std::sync::Mutex<BTreeMap<String, Arc<Listing>>>,
}

impl ListingLauncher {
    fn set(&self, id: &str, tools: &[&str], prompts: &[&str], resources: &[&str]) {
        let owned = |names: &[&str]| names.iter().map(|name| (*name).to_owned()).collect();
        self.lists.lock().unwrap().insert(
            id.to_owned(),
            (owned(tools), owned(prompts), owned(resources)),
        );
    }

    fn launches_of(&self, id: &str) -> bool {
        self.sessions.lock().unwrap().contains_key(id)
    }

    /// The own names of the tools server `id` was called with.
    fn calls_of(&self, id: &str) -> Vec<String> {
        self.sessions
            .lock()
            .unwrap()
            .get(id)
            .map(|session| {
                session
                    .tools
                    .calls()
                    .into_iter()
                    .map(|call| call.name)
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[async_trait]
impl ServerLauncher for ListingLauncher {
    async fn launch(
        &self,
        spec: &ServerSpec,
        _logs: Arc<LogBuffer>,
    ) -> Result<LaunchedServer, LaunchError> {
        let (tools, prompts, resources) = self
            .lists
            .lock()
            .unwrap()
            .get(spec.id.as_str())
            .cloned()
            .unwrap_or_default();
        let session = Arc::new(Listing {
            tools: FakeSession::new(
                spec.id.clone(),
                tools.iter().map(|name| Tool::new(name.as_str())).collect(),
            ),
            prompts,
            resources,
        });
        self.sessions
            .lock()
            .unwrap()
            .insert(spec.id.as_str().to_owned(), Arc::clone(&session));
        Ok(LaunchedServer { session })
    }
}

struct Harness {
    manager: ServerManager,
    launcher: Arc<ListingLauncher>,
    catalog: Arc<ToolCatalog>,
    published: Arc<RecordingEventSink>,
}

fn harness(naming: ToolNames) -> Harness {
    let launcher = Arc::new(ListingLauncher::default());
    let bus = Arc::new(EventBus::new(64));
    let manager = ServerManager::new(
        launcher.clone(),
        Arc::new(FakeClock::new()),
        bus.clone() as Arc<dyn EventSink>,
        Arc::new(TokioSpawner),
        None,
        ManagerSettings::default(),
    );
    let catalog = ToolCatalog::new(manager.clone(), naming);
    catalog.set_probing(false);
    let published = Arc::new(RecordingEventSink::default());
    catalog.set_events(published.clone());
    bus.add_observer(catalog.observer());
    Harness {
        manager,
        launcher,
        catalog,
        published,
    }
}

fn id(raw: &str) -> ServerId {
    ServerId::parse(raw).unwrap()
}

fn with_tools(raw: &str, tools: &[&str]) -> ServerSpec {
    ServerSpec {
        predefined_tools: tools.iter().map(|name| Tool::new(*name)).collect(),
        ..ServerSpec::subprocess(id(raw), vec!["x".into()])
    }
}

fn names(catalog: &ToolCatalog) -> Vec<String> {
    catalog
        .tools(&Caller::default())
        .iter()
        .map(|tool| tool.name.clone())
        .collect()
}

fn custom(prefixes: &[(&str, &str)]) -> ToolNames {
    ToolNames {
        prefix: ToolPrefix::Custom,
        prefixes: prefixes
            .iter()
            .map(|(owner, prefix)| ((*owner).to_owned(), (*prefix).to_owned()))
            .collect(),
        ..ToolNames::default()
    }
}

fn unprefixed() -> ToolNames {
    ToolNames {
        prefix: ToolPrefix::None,
        ..ToolNames::default()
    }
}

async fn call(
    catalog: &ToolCatalog,
    name: &str,
) -> Result<ToolCallOutcome, mcpgw_core::FrontendError> {
    catalog
        .call_tool(
            &Caller::default(),
            name,
            json!({"text": "hi"}).as_object().cloned(),
            CallContext::default(),
        )
        .await
}

/// The collisions published so far: (server not listed, its tool, the name, listed from).
fn collisions(h: &Harness) -> Vec<(String, String, String, String)> {
    h.published
        .events()
        .into_iter()
        .filter_map(|event| match event {
            DomainEvent::ToolNameCollision {
                mcp_server_id,
                tool,
                name,
                listed_from,
            } => Some((mcp_server_id.to_string(), tool, name, listed_from)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn custom_prefixes_name_the_tools_and_lead_back_to_their_owner() {
    let h = harness(custom(&[("github", "gh")]));
    h.launcher.set("github", &["search", "echo"], &[], &[]);
    h.manager
        .register(with_tools("github", &["search", "echo"]))
        .await
        .unwrap();
    h.manager
        .register(with_tools("math", &["add"]))
        .await
        .unwrap();
    assert_eq!(names(&h.catalog), ["gh__search", "gh__echo", "math__add"]);
    let outcome = call(&h.catalog, "gh__echo").await.unwrap();
    assert_eq!(outcome.result["content"][0]["text"], "hi");
    assert_eq!(h.launcher.calls_of("github"), ["echo"]);
    // Bad input: the id of an owner that has a custom prefix is not a prefix.
    let error = call(&h.catalog, "github__echo").await.unwrap_err();
    assert_eq!(error.kind, FrontendErrorKind::UnknownName, "{error}");
    assert_eq!(h.launcher.calls_of("github"), ["echo"]);
}

#[tokio::test]
async fn a_custom_prefix_reaches_a_server_whose_tools_are_not_known_yet() {
    let h = harness(custom(&[("quiet", "q")]));
    h.launcher.set("quiet", &["echo"], &[], &[]);
    h.manager.register(with_tools("quiet", &[])).await.unwrap();
    assert!(names(&h.catalog).is_empty());
    let outcome = call(&h.catalog, "q__echo").await.unwrap();
    assert_eq!(outcome.result["content"][0]["text"], "hi");
    assert_eq!(names(&h.catalog), ["q__echo"]);
}

#[tokio::test]
async fn without_prefixes_the_first_in_id_order_keeps_a_name_and_the_collision_is_told_once() {
    let h = harness(unprefixed());
    h.launcher.set("a", &["echo"], &[], &[]);
    h.launcher.set("b", &["echo", "other"], &[], &[]);
    h.manager
        .register(with_tools("b", &["echo", "other"]))
        .await
        .unwrap();
    h.manager
        .register(with_tools("a", &["echo"]))
        .await
        .unwrap();
    assert_eq!(names(&h.catalog), ["echo", "other"]);
    let expected = (
        "b".to_owned(),
        "echo".to_owned(),
        "echo".to_owned(),
        "a".to_owned(),
    );
    assert_eq!(collisions(&h), std::slice::from_ref(&expected));
    call(&h.catalog, "echo").await.unwrap();
    assert_eq!(h.launcher.calls_of("a"), ["echo"]);
    assert!(!h.launcher.launches_of("b"), "b's echo is not listed");
    // Later rebuilds find the same collision and do not tell it again.
    h.manager
        .register(with_tools("c", &["third"]))
        .await
        .unwrap();
    assert_eq!(names(&h.catalog), ["echo", "other", "third"]);
    assert_eq!(collisions(&h), std::slice::from_ref(&expected));
    // Gone, the collision is forgotten; back, it is told again.
    h.manager.delete(&id("a")).await.unwrap();
    assert_eq!(names(&h.catalog), ["echo", "other", "third"]);
    h.manager
        .register(with_tools("a", &["echo"]))
        .await
        .unwrap();
    assert_eq!(names(&h.catalog), ["echo", "other", "third"]);
    assert_eq!(collisions(&h), [expected.clone(), expected]);
}

#[tokio::test]
async fn without_prefixes_a_name_that_is_not_listed_starts_nothing() {
    let h = harness(unprefixed());
    h.launcher.set("quiet", &["echo"], &[], &[]);
    h.manager.register(with_tools("quiet", &[])).await.unwrap();
    // Bad input: names that would need a prefix to find their owner.
    for name in ["echo", "quiet__echo"] {
        let error = call(&h.catalog, name).await.unwrap_err();
        assert_eq!(error.kind, FrontendErrorKind::UnknownName, "{name}");
    }
    assert!(!h.launcher.launches_of("quiet"));
    // Once its tools are known, they are listed and reached by their own names.
    h.manager.start(&id("quiet")).await.unwrap();
    assert_eq!(names(&h.catalog), ["echo"]);
    call(&h.catalog, "echo").await.unwrap();
    assert_eq!(h.launcher.calls_of("quiet"), ["echo"]);
}

#[tokio::test]
async fn a_separator_of_its_own_joins_and_splits_names() {
    let h = harness(ToolNames {
        separator: ".".to_owned(),
        ..ToolNames::default()
    });
    h.launcher.set("math", &["echo"], &[], &[]);
    h.manager
        .register(with_tools("math", &["echo"]))
        .await
        .unwrap();
    assert_eq!(names(&h.catalog), ["math.echo"]);
    call(&h.catalog, "math.echo").await.unwrap();
    assert_eq!(h.launcher.calls_of("math"), ["echo"]);
    // Bad input: the default separator, which these names do not use.
    let error = call(&h.catalog, "math__echo").await.unwrap_err();
    assert_eq!(error.kind, FrontendErrorKind::UnknownName);
}

#[tokio::test]
async fn long_names_are_listed_shortened_and_reached_both_ways() {
    let long = format!("search_{}", "x".repeat(40));
    let h = harness(ToolNames {
        max_length: 32,
        ..ToolNames::default()
    });
    h.launcher.set("github", &[long.as_str()], &[], &[]);
    h.manager
        .register(with_tools("github", &[long.as_str()]))
        .await
        .unwrap();
    let listed = names(&h.catalog);
    assert_eq!(listed.len(), 1);
    let whole = format!("github__{long}");
    assert_eq!(listed[0].chars().count(), 32);
    assert_eq!(listed[0], mcpgw_gateway::naming::shorten(&whole, 32));
    assert!(listed[0].starts_with("github__search_"));
    assert!(h.catalog.access_path(&listed[0]).is_some());
    // The fake answers an unknown tool as an upstream error; the call reached it either way.
    let _ = call(&h.catalog, &listed[0]).await;
    let _ = call(&h.catalog, &whole).await;
    assert_eq!(h.launcher.calls_of("github"), [long.clone(), long]);
}

#[tokio::test]
async fn prompts_and_resources_follow_the_names_too() {
    let h = harness(custom(&[("fx", "f")]));
    h.launcher.set("fx", &[], &["greeting"], &["readme"]);
    h.manager.register(with_tools("fx", &[])).await.unwrap();
    h.manager.start(&id("fx")).await.unwrap();
    let prompts = h.catalog.prompts(&Caller::default()).await;
    let listed: Vec<&str> = prompts
        .iter()
        .filter_map(|prompt| prompt["name"].as_str())
        .collect();
    assert_eq!(listed, ["f__greeting"]);
    let answer = h
        .catalog
        .get_prompt(
            &Caller::default(),
            "f__greeting",
            None,
            CallContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        answer["description"], "greeting",
        "the server sees its own name"
    );
    let resources = h.catalog.resources(&Caller::default()).await;
    assert_eq!(resources[0]["name"], "f__readme");
    assert_eq!(resources[0]["uri"], "file:///readme");
}

#[tokio::test]
async fn without_prefixes_prompts_of_one_name_are_listed_once() {
    let h = harness(unprefixed());
    h.launcher.set("a", &[], &["greeting"], &[]);
    h.launcher.set("b", &[], &["greeting", "farewell"], &[]);
    for server in ["a", "b"] {
        h.manager.register(with_tools(server, &[])).await.unwrap();
        h.manager.start(&id(server)).await.unwrap();
    }
    let prompts = h.catalog.prompts(&Caller::default()).await;
    let listed: Vec<&str> = prompts
        .iter()
        .filter_map(|prompt| prompt["name"].as_str())
        .collect();
    assert_eq!(listed, ["greeting", "farewell"]);
    let answer = h
        .catalog
        .get_prompt(&Caller::default(), "farewell", None, CallContext::default())
        .await
        .unwrap();
    assert_eq!(answer["description"], "farewell");
    // Bad input: a prefixed form, which names nothing without prefixes.
    let error = h
        .catalog
        .get_prompt(
            &Caller::default(),
            "b__greeting",
            None,
            CallContext::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(error.kind, FrontendErrorKind::UnknownName);
}

#[tokio::test]
async fn a_name_resolves_to_its_owner_and_the_path_a_call_is_authorized_on() {
    let h = harness(custom(&[("github", "gh")]));
    h.manager
        .register(with_tools("github", &["search"]))
        .await
        .unwrap();
    h.manager.register(with_tools("math", &[])).await.unwrap();
    // A listed name under a custom prefix: the owner's own tool name and the listed path.
    let listed = h
        .catalog
        .resolve("gh__search")
        .expect("a listed name resolves");
    assert_eq!(
        (listed.owner.as_str(), listed.is_group, listed.tool.as_str()),
        ("github", false, "search")
    );
    assert!(listed.listed);
    assert_eq!(Some(listed.path), h.catalog.access_path("gh__search"));
    // A server whose tools are not known yet: resolved on the path its tool would have.
    let unlisted = h
        .catalog
        .resolve("math__add")
        .expect("a server's prefix resolves");
    assert_eq!(
        (unlisted.owner.as_str(), unlisted.tool.as_str()),
        ("math", "add")
    );
    assert!(!unlisted.listed);
    assert_eq!(
        Some(unlisted.path),
        h.catalog.unlisted_access_path("math__add")
    );
    // Bad input: no owner by that prefix, an empty tool, no separator at all, nothing.
    for name in ["nobody__add", "math__", "plain", ""] {
        assert_eq!(h.catalog.resolve(name), None, "{name}");
    }
}
