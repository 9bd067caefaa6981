//! Curated endpoints in the application, on fake ports: what an endpoint resolves to, who it
//! admits, what its front end lists and routes, and the definitions it refuses.

use std::sync::Arc;

use mcpgw_config::ToolNames;
use mcpgw_core::{
    CallContext, Caller, EndpointName, EndpointSpec, EventSink, FrontendErrorKind, ManagerSettings,
    McpFrontend, ServerId, ServerManager, ServerOrigin, ServerSpec, Tool, ToolSelector,
};
use mcpgw_gateway::{EndpointError, EndpointFrontend, EndpointService, EventBus, ToolCatalog};
use mcpgw_testkit::clock::FakeClock;
use mcpgw_testkit::fakes::{FakeBehaviour, FakeLauncher, RecordingEventSink, TokioSpawner};

fn id(raw: &str) -> ServerId {
    ServerId::parse(raw).unwrap()
}

fn select(server: &str, tool: Option<&str>) -> ToolSelector {
    ToolSelector {
        server: id(server),
        tool: tool.map(str::to_owned),
        name: None,
        title: None,
        description: None,
        annotations: None,
    }
}

fn endpoint(name: &str, tools: Vec<ToolSelector>) -> EndpointSpec {
    EndpointSpec {
        name: EndpointName::parse(name).unwrap(),
        description: None,
        tools,
        allow: Vec::new(),
        deny: Vec::new(),
        tool_search: false,
        origin: ServerOrigin::Api,
    }
}

struct Setup {
    catalog: Arc<ToolCatalog>,
    endpoints: Arc<EndpointService>,
    events: Arc<RecordingEventSink>,
}

/// Two running servers: `math` with `echo` and `add`, `text` with `echo` and `upper`.
async fn setup() -> Setup {
    let launcher = Arc::new(FakeLauncher::new());
    let bus = Arc::new(EventBus::new(256));
    let clock = Arc::new(FakeClock::new());
    let manager = ServerManager::new(
        launcher.clone(),
        clock.clone(),
        bus.clone() as Arc<dyn EventSink>,
        Arc::new(TokioSpawner),
        None,
        ManagerSettings::default(),
    );
    let catalog = ToolCatalog::new(manager.clone(), ToolNames::prefixed());
    bus.add_observer(catalog.observer());
    for (server, tools) in [
        ("math", [("echo", "echoes"), ("add", "Adds two numbers")]),
        (
            "text",
            [("echo", "echoes text"), ("upper", "Upper-cases text")],
        ),
    ] {
        launcher.set_behaviour(
            server,
            FakeBehaviour {
                tools: tools
                    .iter()
                    .map(|(name, description)| Tool::new(*name).with_description(*description))
                    .collect(),
                ..FakeBehaviour::default()
            },
        );
        manager
            .register(ServerSpec::subprocess(id(server), vec!["fixture".into()]))
            .await
            .unwrap();
        manager.start(&id(server)).await.unwrap();
    }
    let events = Arc::new(RecordingEventSink::default());
    let endpoints = Arc::new(EndpointService::new(
        events.clone() as Arc<dyn EventSink>,
        clock,
    ));
    endpoints.set_catalog(catalog.clone());
    Setup {
        catalog,
        endpoints,
        events,
    }
}

fn names(tools: &[Tool]) -> Vec<&str> {
    tools.iter().map(|tool| tool.name.as_str()).collect()
}

fn caller(principal: &str, groups: &[&str]) -> Caller {
    Caller {
        principal: Some(principal.to_owned()),
        groups: groups.iter().map(|group| (*group).to_owned()).collect(),
        ..Caller::default()
    }
}

#[tokio::test]
async fn an_endpoint_serves_its_selection_with_overrides_and_routes_calls_by_its_names() {
    let setup = setup().await;
    let renamed = ToolSelector {
        name: Some("say".into()),
        title: Some("Say".into()),
        description: Some("Repeats.".into()),
        annotations: Some(serde_json::json!({"readOnlyHint": true})),
        ..select("text", Some("echo"))
    };
    setup
        .endpoints
        .create(endpoint(
            "team",
            // `math`'s `echo` selected twice: served once, as its first entry says.
            vec![renamed, select("math", None), select("math", Some("echo"))],
        ))
        .await
        .unwrap();
    assert_eq!(setup.events.event_types(), ["EndpointCreated"]);
    let frontend = EndpointFrontend::new("team", setup.endpoints.clone(), setup.catalog.clone());
    let listed = frontend.tools(&Caller::default());
    assert_eq!(names(&listed), ["say", "math__echo", "math__add"]);
    assert_eq!(listed[0].title.as_deref(), Some("Say"));
    assert_eq!(listed[0].description.as_deref(), Some("Repeats."));
    // The same list, the same `Arc`: adapters derive from it once.
    assert!(Arc::ptr_eq(&listed, &frontend.tools(&Caller::default())));

    let answer = frontend
        .call_tool(
            &Caller::default(),
            "say",
            serde_json::json!({"text": "hi"}).as_object().cloned(),
            CallContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(answer.result["content"][0]["text"], "hi");
    // Bad input: the catalogue's name of a tool the endpoint renamed, and one it does not
    // select, are unknown here.
    for name in ["text__echo", "text__upper"] {
        let error = frontend
            .call_tool(&Caller::default(), name, None, CallContext::default())
            .await
            .unwrap_err();
        assert_eq!(error.kind, FrontendErrorKind::UnknownName, "{name}");
        assert!(error.message.contains(name), "{error:?}");
    }
    assert!(frontend.prompts(&Caller::default()).await.is_empty());
}

#[tokio::test]
async fn deny_wins_and_an_allow_list_admits_only_its_principals_and_groups() {
    let setup = setup().await;
    let mut spec = endpoint("team", vec![select("math", None)]);
    spec.allow = vec!["user:alice".into(), "group:support".into()];
    spec.deny = vec!["user:mallory".into()];
    setup.endpoints.create(spec).await.unwrap();
    let admits = |who: &Caller| setup.endpoints.admits("team", who);
    assert_eq!(admits(&caller("user:alice", &[])), Some(true));
    assert_eq!(admits(&caller("user:bob", &["group:support"])), Some(true));
    assert_eq!(admits(&caller("user:bob", &[])), Some(false));
    assert_eq!(
        admits(&caller("user:mallory", &["group:support"])),
        Some(false)
    );
    // Authentication off: nobody in particular, as at `/mcp`.
    assert_eq!(admits(&Caller::default()), Some(true));
    assert_eq!(setup.endpoints.admits("nowhere", &Caller::default()), None);
}

#[tokio::test]
async fn tool_search_lists_find_tools_alone_and_answers_matches() {
    let setup = setup().await;
    let mut spec = endpoint("all", vec![select("math", None), select("text", None)]);
    spec.tool_search = true;
    setup.endpoints.create(spec).await.unwrap();
    let frontend = EndpointFrontend::new("all", setup.endpoints.clone(), setup.catalog.clone());
    assert_eq!(names(&frontend.tools(&Caller::default())), ["find_tools"]);
    let found = frontend
        .call_tool(
            &Caller::default(),
            "find_tools",
            serde_json::json!({"query": "upper case"})
                .as_object()
                .cloned(),
            CallContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        found.result["structuredContent"]["tools"][0]["name"],
        "text__upper"
    );
    // Bad input: no query, a limit out of range.
    for arguments in [
        serde_json::json!({}),
        serde_json::json!({"query": "add", "limit": 0}),
        serde_json::json!({"query": "add", "limit": "many"}),
    ] {
        let error = frontend
            .call_tool(
                &Caller::default(),
                "find_tools",
                arguments.as_object().cloned(),
                CallContext::default(),
            )
            .await
            .unwrap_err();
        assert_eq!(
            error.kind,
            FrontendErrorKind::InvalidArguments,
            "{arguments}"
        );
    }
    // A selected tool stays callable although it is not listed.
    let echoed = frontend
        .call_tool(
            &Caller::default(),
            "math__echo",
            serde_json::json!({"text": "still"}).as_object().cloned(),
            CallContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(echoed.result["content"][0]["text"], "still");
}

#[tokio::test]
async fn the_file_owns_its_endpoints_and_bad_definitions_are_refused() {
    let setup = setup().await;
    setup
        .endpoints
        .apply_config(vec![endpoint("filed", vec![select("math", None)])])
        .unwrap();
    assert_eq!(
        setup.endpoints.get("filed").unwrap().origin,
        ServerOrigin::Config
    );
    // Bad input: changing or deleting the file's endpoint over the API, taking its name,
    // an invalid principal pattern, and text with the NUL character.
    let replaced = setup
        .endpoints
        .replace(endpoint("filed", vec![]))
        .await
        .unwrap_err();
    assert!(
        matches!(replaced, EndpointError::DeclaredInConfig(_)),
        "{replaced}"
    );
    let deleted = setup.endpoints.delete("filed").await.unwrap_err();
    assert!(
        matches!(deleted, EndpointError::DeclaredInConfig(_)),
        "{deleted}"
    );
    let taken = setup
        .endpoints
        .create(endpoint("filed", vec![]))
        .await
        .unwrap_err();
    assert!(matches!(taken, EndpointError::AlreadyExists(_)), "{taken}");
    let mut bad_pattern = endpoint("bad", vec![]);
    bad_pattern.allow = vec!["nobody".into()];
    let error = setup.endpoints.create(bad_pattern).await.unwrap_err();
    assert_eq!(error.kind(), mcpgw_core::ErrorKind::Invalid, "{error}");
    let mut nul = endpoint("nul", vec![]);
    nul.description = Some("a\0b".into());
    let error = setup.endpoints.create(nul).await.unwrap_err();
    assert!(error.to_string().contains("NUL"), "{error}");
    assert!(!setup.endpoints.contains("nul") && !setup.endpoints.contains("bad"));

    // The next file without it removes it; the API's endpoints stay.
    setup
        .endpoints
        .create(endpoint("api", vec![select("text", None)]))
        .await
        .unwrap();
    setup.endpoints.apply_config(Vec::new()).unwrap();
    let left: Vec<String> = setup
        .endpoints
        .list()
        .iter()
        .map(|spec| spec.name.to_string())
        .collect();
    assert_eq!(left, ["api"]);
}
