//! `/api/groups`: every route's shape, the documented error for each kind of bad request, and the
//! one namespace that groups share with servers.

use actix_web::dev::{Service, ServiceResponse};
use actix_web::http::Method;
use actix_web::test::{self, TestRequest};
use mcpgw_core::{ServerId, ServerOrigin};
use mcpgw_gateway::groups_domain::{GroupSpec, GroupStrategy, MemberSpec};
use serde_json::{Value, json};

use crate::support::{assert_envelope, harness, harness_with_groups, send};

fn server_body(id: &str) -> Value {
    json!({"mcp_server_id": id, "mode": "subprocess", "command": ["python3", "-m", id]})
}

async fn create_servers<S, B>(app: &S, ids: &[&str])
where
    S: Service<actix_http::Request, Response = ServiceResponse<B>, Error = actix_web::Error>,
    B: actix_web::body::MessageBody,
{
    for id in ids {
        let request = TestRequest::post()
            .uri("/api/mcp_servers")
            .set_json(server_body(id))
            .to_request();
        let (status, body) = send(app, request).await;
        assert_eq!(status, 201, "{body}");
    }
}

fn post(uri: &str, body: Value) -> actix_http::Request {
    TestRequest::post().uri(uri).set_json(body).to_request()
}

fn post_raw(uri: &str, body: &str) -> actix_http::Request {
    TestRequest::post()
        .uri(uri)
        .insert_header(("content-type", "application/json"))
        .set_payload(body.to_owned())
        .to_request()
}

fn member_ids(group: &Value) -> Vec<&str> {
    group["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|member| member["id"].as_str().unwrap())
        .collect()
}

/// Every group route with a sample body, as (method, uri, body).
fn every_group_route() -> Vec<(Method, &'static str, Option<Value>)> {
    vec![
        (Method::GET, "/api/groups", None),
        (Method::GET, "/api/groups/", None),
        (
            Method::POST,
            "/api/groups",
            Some(json!({"group_id": "g", "strategy": "round_robin", "min_healthy": 1})),
        ),
        (Method::GET, "/api/groups/g", None),
        (
            Method::PUT,
            "/api/groups/g",
            Some(json!({"min_healthy": 1})),
        ),
        (Method::POST, "/api/groups/g/rebalance", None),
        (
            Method::POST,
            "/api/groups/g/members",
            Some(json!({"member_id": "a", "weight": 1, "priority": 0})),
        ),
        (Method::DELETE, "/api/groups/g/members/a", None),
        (Method::DELETE, "/api/groups/g", None),
    ]
}

fn request_of(method: &Method, uri: &str, body: Option<&Value>) -> actix_http::Request {
    let request = TestRequest::default().method(method.clone()).uri(uri);
    match body {
        Some(body) => request.set_json(body).to_request(),
        None => request.to_request(),
    }
}

#[actix_web::test]
async fn every_group_route_answers_404_when_the_gateway_has_no_groups() {
    // An embedder that composed the gateway without a group service.
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    for (method, uri, body) in every_group_route() {
        let response = test::call_service(&app, request_of(&method, uri, body.as_ref())).await;
        let message = assert_envelope(response, 404, "NotFoundError").await;
        assert!(
            message.starts_with("groups are not enabled in this gateway"),
            "{method} {uri}: {message}"
        );
    }
    // Servers keep working, and may be deleted, with nothing to check against.
    create_servers(&app, &["solo"]).await;
    let delete = TestRequest::delete()
        .uri("/api/mcp_servers/solo")
        .to_request();
    assert_eq!(test::call_service(&app, delete).await.status(), 200);
}

#[actix_web::test]
async fn every_group_route_answers_with_groups_enabled() {
    let harness = harness_with_groups();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    create_servers(&app, &["a"]).await;
    let expected = [200, 200, 201, 200, 200, 200, 201, 200, 200];
    for ((method, uri, body), status) in every_group_route().into_iter().zip(expected) {
        let (actual, answer) = send(&app, request_of(&method, uri, body.as_ref())).await;
        assert_eq!(actual.as_u16(), status, "{method} {uri}: {answer}");
    }
}

#[actix_web::test]
async fn a_group_is_created_listed_read_changed_and_deleted() {
    let harness = harness_with_groups();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    create_servers(&app, &["a", "b", "c"]).await;

    // Create, with both spellings of a member's id.
    let (status, created) = send(
        &app,
        post(
            "/api/groups",
            json!({
                "group_id": "pool",
                "strategy": "round_robin",
                "min_healthy": 1,
                "description": "three maths",
                "members": [{"id": "a", "weight": 2}, {"member_id": "b", "priority": 5}],
            }),
        ),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["created"], true);
    assert_eq!(created["group_id"], "pool");
    assert_eq!(created["strategy"], "round_robin");
    assert_eq!(created["min_healthy"], 1);
    assert_eq!(created["description"], "three maths");
    assert_eq!(created["origin"], "api");
    // Registered servers that have not run are in rotation: a call starts them lazily.
    assert_eq!(created["state"], "healthy");
    assert_eq!(created["members_in_rotation"], 2);
    assert_eq!(
        created["members"],
        json!([
            {"id": "a", "weight": 2, "priority": 0, "state": "cold", "in_rotation": true, "in_flight": 0},
            {"id": "b", "weight": 1, "priority": 5, "state": "cold", "in_rotation": true, "in_flight": 0},
        ])
    );

    // A group without members: a create body may leave them out.
    let (status, empty) = send(
        &app,
        post(
            "/api/groups/",
            json!({"group_id": "later", "strategy": "priority", "min_healthy": 2}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{empty}");
    assert_eq!(empty["members"], json!([]));
    assert_eq!(empty["state"], "unavailable");

    // List, with and without the slash.
    for uri in ["/api/groups", "/api/groups/"] {
        let (status, list) = send(&app, TestRequest::get().uri(uri).to_request()).await;
        assert_eq!(status, 200, "{uri}");
        let ids: Vec<&str> = list["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|group| group["group_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["later", "pool"], "{uri}");
        assert_eq!(list["groups"][1]["members"], created["members"], "{uri}");
    }

    // Details equal what the create answered, without `created`.
    let (status, details) = send(
        &app,
        TestRequest::get().uri("/api/groups/pool").to_request(),
    )
    .await;
    assert_eq!(status, 200);
    let mut expected = created.clone();
    expected.as_object_mut().unwrap().remove("created");
    assert_eq!(details, expected);

    // A member's state is its server's.
    let start = TestRequest::post()
        .uri("/api/mcp_servers/a/start")
        .to_request();
    assert_eq!(test::call_service(&app, start).await.status(), 200);
    let (_, details) = send(
        &app,
        TestRequest::get().uri("/api/groups/pool").to_request(),
    )
    .await;
    assert_eq!(details["members"][0]["state"], "ready");

    // Update: only what the body names changes.
    let update = TestRequest::put()
        .uri("/api/groups/pool")
        .set_json(json!({"strategy": "weighted_round_robin", "min_healthy": 2}))
        .to_request();
    let (status, updated) = send(&app, update).await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["strategy"], "weighted_round_robin");
    assert_eq!(updated["min_healthy"], 2);
    assert_eq!(updated["description"], "three maths");
    assert_eq!(member_ids(&updated), ["a", "b"]);
    let clear = TestRequest::put()
        .uri("/api/groups/pool")
        .set_json(json!({"group_id": "pool", "description": null}))
        .to_request();
    let (status, cleared) = send(&app, clear).await;
    assert_eq!(status, 200, "{cleared}");
    assert_eq!(cleared["description"], Value::Null);

    // Add a member (both collection spellings), then remove one.
    let (status, added) = send(
        &app,
        post(
            "/api/groups/pool/members",
            json!({"member_id": "c", "weight": 3, "priority": 1}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{added}");
    assert_eq!(member_ids(&added), ["a", "b", "c"]);
    assert_eq!(
        added["members"][2],
        json!({"id": "c", "weight": 3, "priority": 1, "state": "cold", "in_rotation": true, "in_flight": 0})
    );
    let (status, added) = send(
        &app,
        post("/api/groups/later/members/", json!({"member_id": "a"})),
    )
    .await;
    assert_eq!(status, 201, "{added}");
    assert_eq!(added["members"][0]["weight"], 1);
    assert_eq!(added["members"][0]["priority"], 0);
    let remove = TestRequest::delete()
        .uri("/api/groups/pool/members/b")
        .to_request();
    let (status, removed) = send(&app, remove).await;
    assert_eq!(status, 200, "{removed}");
    assert_eq!(member_ids(&removed), ["a", "c"]);

    // Rebalance answers the group.
    let (status, rebalanced) = send(
        &app,
        TestRequest::post()
            .uri("/api/groups/pool/rebalance")
            .to_request(),
    )
    .await;
    assert_eq!(status, 200, "{rebalanced}");
    assert_eq!(rebalanced["group_id"], "pool");
    assert_eq!(rebalanced["members_in_rotation"], 2);

    // Replace the whole member list.
    let replace = TestRequest::put()
        .uri("/api/groups/pool")
        .set_json(json!({"members": [{"id": "b"}, {"id": "c", "weight": 4}]}))
        .to_request();
    let (status, replaced) = send(&app, replace).await;
    assert_eq!(status, 200, "{replaced}");
    // A member that stays keeps its place (and its rotation); new ones follow in body order.
    assert_eq!(member_ids(&replaced), ["c", "b"]);
    assert_eq!(replaced["members"][0]["weight"], 4);

    // Delete: the group goes, its servers stay.
    let (status, deleted) = send(
        &app,
        TestRequest::delete().uri("/api/groups/pool").to_request(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(deleted, json!({"group_id": "pool", "deleted": true}));
    let response = test::call_service(
        &app,
        TestRequest::get().uri("/api/groups/pool").to_request(),
    )
    .await;
    assert_envelope(response, 404, "GroupNotFoundError").await;
    let (_, servers) = send(
        &app,
        TestRequest::get().uri("/api/mcp_servers").to_request(),
    )
    .await;
    assert_eq!(servers["mcp_servers"].as_array().unwrap().len(), 3);
}

#[actix_web::test]
async fn unknown_groups_and_members_answer_404_with_their_names() {
    let harness = harness_with_groups();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    create_servers(&app, &["a"]).await;

    // Unknown group on every group route that names one; also ids that cannot exist.
    for id in ["ghost", "a__b", "has%20space"] {
        for (method, uri, body) in [
            (Method::GET, format!("/api/groups/{id}"), None),
            (
                Method::PUT,
                format!("/api/groups/{id}"),
                Some(json!({"min_healthy": 1})),
            ),
            (Method::DELETE, format!("/api/groups/{id}"), None),
            (Method::POST, format!("/api/groups/{id}/rebalance"), None),
            (
                Method::POST,
                format!("/api/groups/{id}/members"),
                Some(json!({"member_id": "a"})),
            ),
            (Method::DELETE, format!("/api/groups/{id}/members/a"), None),
        ] {
            let response = test::call_service(&app, request_of(&method, &uri, body.as_ref())).await;
            let message = assert_envelope(response, 404, "GroupNotFoundError").await;
            assert!(
                message.contains("GET /api/groups"),
                "{method} {uri}: {message}"
            );
        }
    }
    // An unknown group is reported before a bad body is judged.
    let response = test::call_service(&app, post_raw("/api/groups/ghost/members", "{oops")).await;
    assert_envelope(response, 404, "GroupNotFoundError").await;

    // A member server that does not exist, at create and at add.
    let response = test::call_service(
        &app,
        post(
            "/api/groups",
            json!({"group_id": "pool", "members": [{"id": "a"}, {"id": "nobody"}]}),
        ),
    )
    .await;
    let message = assert_envelope(response, 404, "McpServerNotFoundError").await;
    assert!(message.contains("`nobody`"), "{message}");
    let (status, _) = send(
        &app,
        post(
            "/api/groups",
            json!({"group_id": "pool", "members": [{"id": "a"}]}),
        ),
    )
    .await;
    assert_eq!(status, 201);
    let response = test::call_service(
        &app,
        post("/api/groups/pool/members", json!({"member_id": "nobody"})),
    )
    .await;
    let message = assert_envelope(response, 404, "McpServerNotFoundError").await;
    assert!(message.contains("`nobody`"), "{message}");

    // Removing a server that is not a member, or an id that cannot be one.
    for member in ["ghost", "x__y"] {
        let response = test::call_service(
            &app,
            TestRequest::delete()
                .uri(&format!("/api/groups/pool/members/{member}"))
                .to_request(),
        )
        .await;
        let message = assert_envelope(response, 404, "GroupMemberNotFoundError").await;
        assert!(message.contains("group `pool`"), "{member}: {message}");
    }

    // Adding a member twice.
    let response = test::call_service(
        &app,
        post("/api/groups/pool/members", json!({"member_id": "a"})),
    )
    .await;
    let message = assert_envelope(response, 409, "GroupMemberAlreadyExistsError").await;
    assert!(message.contains("`a` is already a member"), "{message}");
}

#[actix_web::test]
async fn bad_bodies_answer_422_and_change_nothing() {
    let harness = harness_with_groups();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    create_servers(&app, &["a", "b"]).await;

    let bad_creates = [
        ("{not json", "not valid JSON"),
        ("", "the request body is empty"),
        ("[]", "must be a JSON object"),
        (r#"{"strategy": "round_robin"}"#, "group_id: is required"),
        (r#"{"group_id": 12}"#, "group_id: must be a string"),
        (
            r#"{"group_id": "g", "strategy": "fastest"}"#,
            "strategy: unknown value `fastest`",
        ),
        (
            r#"{"group_id": "g", "min_healthy": "1"}"#,
            "min_healthy: invalid type",
        ),
        (
            r#"{"group_id": "g", "min_healthy": 0}"#,
            "must be at least 1, got 0",
        ),
        (
            r#"{"group_id": "g", "min_healthy": 3, "members": [{"id": "a"}, {"id": "b"}]}"#,
            "min_healthy 3 is larger than the 2 member(s)",
        ),
        (
            r#"{"group_id": "g", "members": {"id": "a"}}"#,
            "members: invalid type",
        ),
        (
            r#"{"group_id": "g", "members": [{"id": "a", "weight": 0}]}"#,
            "members[0].weight",
        ),
        (
            r#"{"group_id": "g", "members": [{"id": "a"}, {"id": "a"}]}"#,
            "listed twice",
        ),
        (
            r#"{"group_id": "g", "members": [{"id": "g"}]}"#,
            "member of itself",
        ),
        (
            r#"{"group_id": "g", "stratgey": "random"}"#,
            "did you mean `strategy`",
        ),
    ];
    for (body, expected) in bad_creates {
        let response = test::call_service(&app, post_raw("/api/groups", body)).await;
        let message = assert_envelope(response, 422, "ValidationError").await;
        assert!(message.contains(expected), "{body}: {message}");
    }
    let (_, list) = send(&app, TestRequest::get().uri("/api/groups").to_request()).await;
    assert_eq!(list["groups"], json!([]), "no bad create made a group");

    let (status, _) = send(
        &app,
        post(
            "/api/groups",
            json!({"group_id": "pool", "members": [{"id": "a"}, {"id": "b"}]}),
        ),
    )
    .await;
    assert_eq!(status, 201);
    let bad_updates = [
        ("{not json", "not valid JSON"),
        (
            r#"{"group_id": "other"}"#,
            "differs from the id in the path",
        ),
        (r#"{"strategy": "fastest"}"#, "strategy: unknown value"),
        (r#"{"min_healthy": [2]}"#, "min_healthy: invalid type"),
        // Raising min_healthy above the two members the group has.
        (
            r#"{"min_healthy": 3}"#,
            "min_healthy 3 is larger than the 2 member(s)",
        ),
        (
            r#"{"min_healthy": 2, "members": [{"id": "a"}]}"#,
            "min_healthy 2 is larger than the 1 member(s)",
        ),
        (r#"{"command": ["x"]}"#, "does not belong to mode `group`"),
    ];
    for (body, expected) in bad_updates {
        let request = TestRequest::put()
            .uri("/api/groups/pool")
            .insert_header(("content-type", "application/json"))
            .set_payload(body.to_owned())
            .to_request();
        let response = test::call_service(&app, request).await;
        let message = assert_envelope(response, 422, "ValidationError").await;
        assert!(message.contains(expected), "{body}: {message}");
    }
    let bad_members = [
        ("{}", "member_id: is required"),
        (r#"{"member_id": ["b"]}"#, "member_id: invalid type"),
        (
            r#"{"member_id": "b", "weight": -1}"#,
            "weight: invalid value",
        ),
        (
            r#"{"member_id": "b", "weight": 0}"#,
            "weight: must be at least 1",
        ),
        (
            r#"{"member_id": "b", "priority": "high"}"#,
            "priority: invalid type",
        ),
        (r#"{"member_id": "pool"}"#, "member of itself"),
        ("oops", "not valid JSON"),
    ];
    for (body, expected) in bad_members {
        let response = test::call_service(&app, post_raw("/api/groups/pool/members", body)).await;
        let message = assert_envelope(response, 422, "ValidationError").await;
        assert!(message.contains(expected), "{body}: {message}");
    }
    let (_, details) = send(
        &app,
        TestRequest::get().uri("/api/groups/pool").to_request(),
    )
    .await;
    assert_eq!(details["min_healthy"], 1, "no bad update changed the group");
    assert_eq!(details["strategy"], "round_robin");
    assert_eq!(member_ids(&details), ["a", "b"]);
}

#[actix_web::test]
async fn groups_and_servers_share_one_namespace() {
    let harness = harness_with_groups();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    create_servers(&app, &["a", "b"]).await;
    let (status, _) = send(
        &app,
        post(
            "/api/groups",
            json!({"group_id": "pool", "members": [{"id": "a"}]}),
        ),
    )
    .await;
    assert_eq!(status, 201);

    // A second group with the same id, and a group with a server's id.
    for id in ["pool", "b"] {
        let response = test::call_service(&app, post("/api/groups", json!({"group_id": id}))).await;
        let message = assert_envelope(response, 409, "GroupAlreadyExistsError").await;
        assert!(message.contains(&format!("`{id}`")), "{message}");
    }
    // A server with a group's id.
    let response = test::call_service(&app, post("/api/mcp_servers", server_body("pool"))).await;
    let message = assert_envelope(response, 409, "McpServerAlreadyExistsError").await;
    assert!(
        message.contains("`pool`") && message.contains("group"),
        "{message}"
    );
    assert!(
        !harness
            .gateway
            .servers()
            .contains(&ServerId::parse("pool").unwrap())
    );

    // A member server cannot be deleted while it is a member; the answer names the group.
    let response = test::call_service(
        &app,
        TestRequest::delete().uri("/api/mcp_servers/a").to_request(),
    )
    .await;
    let message = assert_envelope(response, 409, "ConflictError").await;
    assert!(message.contains("group `pool`"), "{message}");
    assert!(message.contains("remove it from the group"), "{message}");
    let (_, other) = send(
        &app,
        post(
            "/api/groups",
            json!({"group_id": "second", "members": [{"id": "a"}]}),
        ),
    )
    .await;
    assert_eq!(other["created"], true, "{other}");
    let response = test::call_service(
        &app,
        TestRequest::delete().uri("/api/mcp_servers/a").to_request(),
    )
    .await;
    let message = assert_envelope(response, 409, "ConflictError").await;
    assert!(
        message.contains("`pool`") && message.contains("`second`"),
        "{message}"
    );

    // Out of both groups, it can go.
    for group in ["pool", "second"] {
        let remove = TestRequest::delete()
            .uri(&format!("/api/groups/{group}/members/a"))
            .to_request();
        assert_eq!(test::call_service(&app, remove).await.status(), 200);
    }
    let delete = TestRequest::delete().uri("/api/mcp_servers/a").to_request();
    assert_eq!(test::call_service(&app, delete).await.status(), 200);
}

#[actix_web::test]
async fn groups_of_the_configuration_file_change_only_with_the_file() {
    let harness = harness_with_groups();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    create_servers(&app, &["a", "b"]).await;
    let groups = harness.groups.clone().unwrap();
    groups
        .create(
            GroupSpec {
                id: ServerId::parse("filed").unwrap(),
                description: None,
                strategy: GroupStrategy::RoundRobin,
                min_healthy: 1,
                members: vec![MemberSpec::new(ServerId::parse("a").unwrap())],
            },
            ServerOrigin::Config,
        )
        .await
        .unwrap();
    let (_, details) = send(
        &app,
        TestRequest::get().uri("/api/groups/filed").to_request(),
    )
    .await;
    assert_eq!(details["origin"], "config");

    for (method, uri, body) in [
        (
            Method::PUT,
            "/api/groups/filed",
            Some(json!({"min_healthy": 1})),
        ),
        (Method::DELETE, "/api/groups/filed", None),
        (
            Method::POST,
            "/api/groups/filed/members",
            Some(json!({"member_id": "b"})),
        ),
        (Method::DELETE, "/api/groups/filed/members/a", None),
    ] {
        let response = test::call_service(&app, request_of(&method, uri, body.as_ref())).await;
        let message = assert_envelope(response, 409, "ConflictError").await;
        assert!(
            message.contains("configuration file"),
            "{method} {uri}: {message}"
        );
    }
    // Rebalancing acts on state, not on the definition: allowed.
    let (status, _) = send(
        &app,
        TestRequest::post()
            .uri("/api/groups/filed/rebalance")
            .to_request(),
    )
    .await;
    assert_eq!(status, 200);
    let (_, after) = send(
        &app,
        TestRequest::get().uri("/api/groups/filed").to_request(),
    )
    .await;
    assert_eq!(member_ids(&after), ["a"]);
}

#[actix_web::test]
async fn wrong_methods_on_group_routes_answer_405_with_allow() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    for (method, uri, allow) in [
        (Method::DELETE, "/api/groups", "GET, POST"),
        (Method::POST, "/api/groups/g", "GET, PUT, DELETE"),
        (Method::GET, "/api/groups/g/rebalance", "POST"),
        (Method::GET, "/api/groups/g/members", "POST"),
        (Method::GET, "/api/groups/g/members/a", "DELETE"),
    ] {
        let response = test::call_service(&app, request_of(&method, uri, None)).await;
        assert_eq!(
            response.headers().get("allow").unwrap(),
            allow,
            "{method} {uri}"
        );
        assert_envelope(response, 405, "MethodNotAllowedError").await;
    }
}
