//! `/api/auth/*`: every route of the auth management table, both spellings of each body, the
//! documented answers, and the envelope for each kind of bad request.

use std::time::Duration;

use actix_web::dev::{Service, ServiceResponse};
use actix_web::http::Method;
use actix_web::test::{self, TestRequest};
use mcpgw_core::DomainEvent;
use mcpgw_http_actix::app;
use serde_json::{Value, json};

use crate::support::{assert_envelope, harness, harness_with_auth, send};

fn request(method: Method, uri: &str, body: Option<Value>) -> actix_http::Request {
    let builder = TestRequest::default().method(method).uri(uri);
    match body {
        Some(body) => builder.set_json(body).to_request(),
        None => builder.to_request(),
    }
}

fn raw(method: Method, uri: &str, body: &str) -> actix_http::Request {
    TestRequest::default()
        .method(method)
        .uri(uri)
        .insert_header(("content-type", "application/json"))
        .set_payload(body.to_owned())
        .to_request()
}

fn post(uri: &str, body: Value) -> actix_http::Request {
    request(Method::POST, uri, Some(body))
}

fn get(uri: &str) -> actix_http::Request {
    request(Method::GET, uri, None)
}

fn delete(uri: &str) -> actix_http::Request {
    request(Method::DELETE, uri, None)
}

fn patch(uri: &str, body: Value) -> actix_http::Request {
    request(Method::PATCH, uri, Some(body))
}

/// Sends `request` and asserts the error envelope; answers the message.
async fn expect_error<S, B>(
    app: &S,
    request: actix_http::Request,
    status: u16,
    name: &str,
) -> String
where
    S: Service<actix_http::Request, Response = ServiceResponse<B>, Error = actix_web::Error>,
    B: actix_web::body::MessageBody,
{
    let response = test::call_service(app, request).await;
    assert_envelope(response, status, name).await
}

fn names_of<'a>(list: &'a Value, field: &str) -> Vec<&'a str> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .map(|item| item[field].as_str().unwrap())
        .collect()
}

// ----- keys -----------------------------------------------------------------------------------

#[actix_web::test]
async fn a_key_is_created_in_either_shape_and_answers_the_union() {
    let h = harness_with_auth().await;
    let app = test::init_service(app(h.harness.state.clone())).await;

    // Variant A: principal, name, role, expires_in_days.
    let (status, a) = send(
        &app,
        post(
            "/api/auth/keys",
            json!({"principal": "user:alice", "name": "laptop", "role": "developer", "expires_in_days": 30}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{a}");
    let key = a["key"].as_str().unwrap();
    assert!(key.starts_with("mcp_") && key.len() >= 4 + 43, "{a}");
    assert_eq!(a["raw_key"], a["key"], "{a}");
    assert_eq!(a["principal"], "user:alice");
    assert_eq!(a["principal_id"], "user:alice");
    assert_eq!(a["name"], "laptop");
    assert_eq!(a["role"], "developer");
    assert!(a["key_id"].as_str().is_some_and(|id| !id.is_empty()), "{a}");
    assert!(a["expires_at"].is_string(), "{a}");
    assert!(key.starts_with(a["prefix"].as_str().unwrap()), "{a}");

    // Variant B: principal_id, name.
    let (status, b) = send(
        &app,
        post(
            "/api/auth/keys",
            json!({"principal_id": "service:ci", "name": "pipeline"}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{b}");
    assert_eq!(b["principal"], "service:ci");
    assert_eq!(b["principal_id"], "service:ci");
    assert_eq!(b["key"], b["raw_key"]);
    assert!(b["role"].is_null() && b["expires_at"].is_null(), "{b}");
    assert_ne!(a["key"], b["key"]);
    assert_ne!(a["key_id"], b["key_id"]);

    // Both names given with the same value are one field.
    let (status, c) = send(
        &app,
        post(
            "/api/auth/keys",
            json!({"principal": "user:bob", "principal_id": "user:bob", "name": "desk"}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{c}");

    // The raw keys appear in no listing.
    let (status, list) = send(&app, get("/api/auth/keys")).await;
    assert_eq!(status, 200);
    let text = list.to_string();
    for created in [&a, &b, &c] {
        assert!(!text.contains(created["key"].as_str().unwrap()), "{text}");
    }
    let keys = list["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 3, "{list}");
    for entry in keys {
        assert!(
            entry.get("key").is_none() && entry.get("raw_key").is_none(),
            "{entry}"
        );
        assert!(entry.get("hash").is_none(), "{entry}");
        assert_eq!(entry["status"], "active", "{entry}");
        assert_eq!(entry["principal"], entry["principal_id"]);
    }
    let alice = keys.iter().find(|k| k["key_id"] == a["key_id"]).unwrap();
    assert_eq!(alice["name"], "laptop");
    assert_eq!(alice["role"], "developer");
    assert_eq!(alice["prefix"], a["prefix"]);

    // The trailing-slash spelling is the same collection.
    let (status, again) = send(&app, get("/api/auth/keys/")).await;
    assert_eq!(
        (status.as_u16(), again["keys"].as_array().unwrap().len()),
        (200, 3)
    );
}

#[actix_web::test]
async fn a_revoked_key_is_listed_as_revoked_and_an_expired_one_as_expired() {
    let h = harness_with_auth().await;
    let app = test::init_service(app(h.harness.state.clone())).await;
    let (_, revoked) = send(
        &app,
        post(
            "/api/auth/keys",
            json!({"principal": "user:alice", "name": "old"}),
        ),
    )
    .await;
    let (_, short) = send(
        &app,
        post(
            "/api/auth/keys",
            json!({"principal": "user:alice", "name": "short", "expires_in_days": 1}),
        ),
    )
    .await;
    let id = revoked["key_id"].as_str().unwrap();

    let (status, answer) = send(&app, delete(&format!("/api/auth/keys/{id}"))).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["key_id"], id);
    assert_eq!(answer["status"], "revoked");
    assert!(answer["revoked_at"].is_string(), "{answer}");
    assert!(answer.get("key").is_none(), "{answer}");
    assert!(
        h.events
            .events()
            .iter()
            .any(|event| matches!(event, DomainEvent::ApiKeyRevoked { key_id } if key_id == id)),
        "a revocation is an event"
    );

    h.clock.advance(Duration::from_secs(2 * 86_400));
    let (_, list) = send(&app, get("/api/auth/keys")).await;
    let status_of = |key_id: &Value| {
        list["keys"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| &k["key_id"] == key_id)
            .map(|k| k["status"].clone())
            .unwrap()
    };
    assert_eq!(status_of(&revoked["key_id"]), "revoked", "{list}");
    assert_eq!(status_of(&short["key_id"]), "expired", "{list}");

    // Revoking again keeps the first revocation time.
    let (status, twice) = send(&app, delete(&format!("/api/auth/keys/{id}"))).await;
    assert_eq!(status, 200, "{twice}");
    assert_eq!(twice["revoked_at"], answer["revoked_at"]);
}

#[actix_web::test]
async fn an_unknown_key_id_is_not_found() {
    let h = harness_with_auth().await;
    let app = test::init_service(app(h.harness.state.clone())).await;
    let (_, created) = send(
        &app,
        post(
            "/api/auth/keys",
            json!({"principal": "user:alice", "name": "k"}),
        ),
    )
    .await;
    // A well-formed id of no key: the real id with its last character changed.
    let mut id = created["key_id"].as_str().unwrap().to_owned();
    let last = id.pop().unwrap();
    id.push(if last == 'a' { 'b' } else { 'a' });
    let message = expect_error(
        &app,
        delete(&format!("/api/auth/keys/{id}")),
        404,
        "ApiKeyNotFoundError",
    )
    .await;
    assert!(message.contains("GET /api/auth/keys"), "{message}");
    // A string that cannot be a key id names no key either.
    for bad in ["k1", "has%20space", "x"] {
        expect_error(
            &app,
            delete(&format!("/api/auth/keys/{bad}")),
            404,
            "ApiKeyNotFoundError",
        )
        .await;
    }
    let (_, list) = send(&app, get("/api/auth/keys")).await;
    assert_eq!(list["keys"][0]["status"], "active", "nothing was revoked");
}

#[actix_web::test]
async fn bad_key_requests_answer_422() {
    let h = harness_with_auth().await;
    let app = test::init_service(app(h.harness.state.clone())).await;
    let cases: Vec<(&str, &str, &str)> = vec![
        // (what is wrong, body, a part of the message)
        (
            "no principal at all",
            r#"{"name": "k"}"#,
            "principal: is required",
        ),
        (
            "a principal without a kind",
            r#"{"principal": "alice", "name": "k"}"#,
            "alice",
        ),
        (
            "a principal of an unknown kind",
            r#"{"principal": "robot:r2", "name": "k"}"#,
            "robot",
        ),
        (
            "no name",
            r#"{"principal": "user:alice"}"#,
            "name: is required",
        ),
        (
            "a misspelt field",
            r#"{"principle": "user:alice", "name": "k"}"#,
            "did you mean `principal`?",
        ),
        (
            "an unrelated field",
            r#"{"principal": "user:alice", "name": "k", "colour": "red"}"#,
            "valid fields are",
        ),
        (
            "the name as a number",
            r#"{"principal": "user:alice", "name": 7}"#,
            "name: must be a string, not a number",
        ),
        (
            "days as a string",
            r#"{"principal": "user:alice", "name": "k", "expires_in_days": "30"}"#,
            "expires_in_days: must be a whole number, not a string",
        ),
        (
            "fractional days",
            r#"{"principal": "user:alice", "name": "k", "expires_in_days": 1.5}"#,
            "expires_in_days",
        ),
        (
            "zero days",
            r#"{"principal": "user:alice", "name": "k", "expires_in_days": 0}"#,
            "expires_in_days",
        ),
        (
            "two different principals",
            r#"{"principal": "user:a", "principal_id": "user:b", "name": "k"}"#,
            "differs",
        ),
        (
            "malformed JSON",
            r#"{"principal": "user:alice", "name": "#,
            "not valid JSON",
        ),
        ("an array", r#"["user:alice"]"#, "must be a JSON object"),
        ("an empty body", "", "empty"),
    ];
    for (what, body, expected) in cases {
        let message = expect_error(
            &app,
            raw(Method::POST, "/api/auth/keys", body),
            422,
            "ValidationError",
        )
        .await;
        assert!(message.contains(expected), "{what}: {message}");
    }
    let (_, list) = send(&app, get("/api/auth/keys")).await;
    assert_eq!(list["keys"], json!([]), "no bad request made a key");

    // A role that does not exist is not found, and makes no key either.
    let message = expect_error(
        &app,
        post(
            "/api/auth/keys",
            json!({"principal": "user:alice", "name": "k", "role": "wizard"}),
        ),
        404,
        "RoleNotFoundError",
    )
    .await;
    assert!(message.contains("wizard"), "{message}");
}

// ----- roles ----------------------------------------------------------------------------------

#[actix_web::test]
async fn roles_are_listed_custom_only_and_all() {
    let h = harness_with_auth().await;
    let app = test::init_service(app(h.harness.state.clone())).await;
    let (status, custom) = send(&app, get("/api/auth/roles")).await;
    assert_eq!((status.as_u16(), &custom), (200, &json!({"roles": []})));

    let (status, all) = send(&app, get("/api/auth/roles/all")).await;
    assert_eq!(status, 200);
    let names = names_of(&all["roles"], "name");
    for built_in in [
        "admin",
        "mcp_server_admin",
        "developer",
        "viewer",
        "auditor",
        "operator",
    ] {
        assert!(names.contains(&built_in), "{built_in} in {names:?}");
    }
    let roles = all["roles"].as_array().unwrap();
    assert!(roles.iter().all(|role| role["built_in"] == true), "{all}");
    let viewer = roles.iter().find(|role| role["name"] == "viewer").unwrap();
    let effective = viewer["effective_permissions"].as_array().unwrap();
    assert!(effective.contains(&json!("mcp_server:list")), "{viewer}");
    assert!(!effective.contains(&json!("mcp_server:delete")), "{viewer}");
}

#[actix_web::test]
async fn a_custom_role_is_created_read_updated_and_deleted() {
    let h = harness_with_auth().await;
    let app = test::init_service(app(h.harness.state.clone())).await;

    let (status, created) = send(
        &app,
        post(
            "/api/auth/roles",
            json!({"name": "deployer", "description": "ships servers", "permissions": ["mcp_server:start", "mcp_server:stop"]}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        created,
        json!({
            "name": "deployer",
            "description": "ships servers",
            "permissions": ["mcp_server:start", "mcp_server:stop"],
            "effective_permissions": ["mcp_server:start", "mcp_server:stop"],
            "built_in": false,
        })
    );
    // `role_name` is accepted for `name`.
    let (status, other) = send(
        &app,
        post(
            "/api/auth/roles",
            json!({"role_name": "reader", "permissions": ["group:*"]}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{other}");
    assert_eq!(other["name"], "reader");
    assert_eq!(other["description"], "");

    let (_, custom) = send(&app, get("/api/auth/roles")).await;
    assert_eq!(names_of(&custom["roles"], "name"), ["deployer", "reader"]);
    let (_, all) = send(&app, get("/api/auth/roles/all")).await;
    assert!(names_of(&all["roles"], "name").contains(&"deployer"));

    let (status, fetched) = send(&app, get("/api/auth/roles/deployer")).await;
    assert_eq!((status.as_u16(), &fetched), (200, &created));

    // PATCH changes only what it names.
    let (status, patched) = send(
        &app,
        patch(
            "/api/auth/roles/deployer",
            json!({"permissions": ["mcp_server:*"]}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["description"], "ships servers");
    assert_eq!(patched["permissions"], json!(["mcp_server:*"]));
    assert!(
        patched["effective_permissions"]
            .as_array()
            .unwrap()
            .contains(&json!("mcp_server:delete")),
        "{patched}"
    );
    let (status, patched) = send(
        &app,
        patch(
            "/api/auth/roles/deployer",
            json!({"description": "runs servers"}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["description"], "runs servers");
    assert_eq!(patched["permissions"], json!(["mcp_server:*"]));
    let (_, fetched) = send(&app, get("/api/auth/roles/deployer")).await;
    assert_eq!(fetched, patched, "the change was kept");
    // `description: null` clears it.
    let (status, cleared) = send(
        &app,
        patch("/api/auth/roles/deployer", json!({"description": null})),
    )
    .await;
    assert_eq!(
        (status.as_u16(), &cleared["description"]),
        (200, &json!(""))
    );

    let (status, deleted) = send(&app, delete("/api/auth/roles/deployer")).await;
    assert_eq!(status, 200, "{deleted}");
    assert_eq!(deleted, json!({"name": "deployer", "deleted": true}));
    expect_error(
        &app,
        get("/api/auth/roles/deployer"),
        404,
        "RoleNotFoundError",
    )
    .await;
    let (_, custom) = send(&app, get("/api/auth/roles")).await;
    assert_eq!(names_of(&custom["roles"], "name"), ["reader"]);
}

#[actix_web::test]
async fn built_in_roles_cannot_be_changed_or_deleted() {
    let h = harness_with_auth().await;
    let app = test::init_service(app(h.harness.state.clone())).await;
    let (_, before) = send(&app, get("/api/auth/roles/admin")).await;
    assert_eq!(before["built_in"], true, "{before}");
    let message = expect_error(
        &app,
        patch("/api/auth/roles/admin", json!({"description": "mine now"})),
        409,
        "ConflictError",
    )
    .await;
    assert!(message.contains("built in"), "{message}");
    expect_error(&app, delete("/api/auth/roles/viewer"), 409, "ConflictError").await;
    // Creating a role with a built-in name is the same conflict.
    expect_error(
        &app,
        post(
            "/api/auth/roles",
            json!({"name": "operator", "permissions": ["tool:list"]}),
        ),
        409,
        "ConflictError",
    )
    .await;
    let (_, after) = send(&app, get("/api/auth/roles/admin")).await;
    assert_eq!(before, after, "nothing changed");
}

#[actix_web::test]
async fn role_conflicts_unknown_roles_and_bad_role_bodies() {
    let h = harness_with_auth().await;
    let app = test::init_service(app(h.harness.state.clone())).await;
    let body = json!({"name": "deployer", "permissions": ["mcp_server:start"]});
    let (status, _) = send(&app, post("/api/auth/roles", body.clone())).await;
    assert_eq!(status, 201);
    expect_error(
        &app,
        post("/api/auth/roles", body),
        409,
        "RoleAlreadyExistsError",
    )
    .await;

    // Unknown roles.
    expect_error(&app, get("/api/auth/roles/ghost"), 404, "RoleNotFoundError").await;
    expect_error(
        &app,
        patch("/api/auth/roles/ghost", json!({"description": "x"})),
        404,
        "RoleNotFoundError",
    )
    .await;
    expect_error(
        &app,
        delete("/api/auth/roles/ghost"),
        404,
        "RoleNotFoundError",
    )
    .await;

    // Bad bodies: (what is wrong, method, uri, body, a part of the message).
    let cases: Vec<(&str, Method, &str, &str, &str)> = vec![
        (
            "an unknown permission",
            Method::POST,
            "/api/auth/roles",
            r#"{"name": "r1", "permissions": ["mcp_server:reed"]}"#,
            "did you mean `mcp_server:read`?",
        ),
        (
            "permissions as a string",
            Method::POST,
            "/api/auth/roles",
            r#"{"name": "r1", "permissions": "tool:list"}"#,
            "permissions: must be an array of strings, not a string",
        ),
        (
            "a number in permissions",
            Method::POST,
            "/api/auth/roles",
            r#"{"name": "r1", "permissions": ["tool:list", 3]}"#,
            "permissions[1]: must be a string",
        ),
        (
            "no permissions",
            Method::POST,
            "/api/auth/roles",
            r#"{"name": "r1"}"#,
            "permissions: is required",
        ),
        (
            "no name",
            Method::POST,
            "/api/auth/roles",
            r#"{"permissions": []}"#,
            "name: is required",
        ),
        (
            "an invalid role name",
            Method::POST,
            "/api/auth/roles",
            r#"{"name": "has space", "permissions": []}"#,
            "has space",
        ),
        (
            "a misspelt field",
            Method::POST,
            "/api/auth/roles",
            r#"{"name": "r1", "permisions": []}"#,
            "did you mean `permissions`?",
        ),
        (
            "malformed JSON",
            Method::POST,
            "/api/auth/roles",
            "{",
            "not valid JSON",
        ),
        (
            "a rename in a PATCH",
            Method::PATCH,
            "/api/auth/roles/deployer",
            r#"{"name": "other"}"#,
            "unknown field `name`",
        ),
        (
            "a wrong type in a PATCH",
            Method::PATCH,
            "/api/auth/roles/deployer",
            r#"{"description": 5}"#,
            "description: must be a string",
        ),
        (
            "an unknown permission in a PATCH",
            Method::PATCH,
            "/api/auth/roles/deployer",
            r#"{"permissions": ["fly:away"]}"#,
            "fly:away",
        ),
        (
            "malformed JSON in a PATCH",
            Method::PATCH,
            "/api/auth/roles/deployer",
            "{]",
            "not valid JSON",
        ),
    ];
    for (what, method, uri, body, expected) in cases {
        let message = expect_error(&app, raw(method, uri, body), 422, "ValidationError").await;
        assert!(message.contains(expected), "{what}: {message}");
    }
    let (_, role) = send(&app, get("/api/auth/roles/deployer")).await;
    assert_eq!(
        role["permissions"],
        json!(["mcp_server:start"]),
        "unchanged"
    );
    let (_, custom) = send(&app, get("/api/auth/roles")).await;
    assert_eq!(names_of(&custom["roles"], "name"), ["deployer"]);
}

#[actix_web::test]
async fn a_role_still_assigned_cannot_be_deleted() {
    let h = harness_with_auth().await;
    let app = test::init_service(app(h.harness.state.clone())).await;
    send(
        &app,
        post(
            "/api/auth/roles",
            json!({"name": "deployer", "permissions": ["tool:list"]}),
        ),
    )
    .await;
    let (status, _) = send(
        &app,
        post(
            "/api/auth/roles/assign",
            json!({"principal": "user:alice", "role": "deployer"}),
        ),
    )
    .await;
    assert_eq!(status, 201);
    let message = expect_error(
        &app,
        delete("/api/auth/roles/deployer"),
        409,
        "ConflictError",
    )
    .await;
    assert!(message.contains("still assigned"), "{message}");
}

// ----- assignments and principals -------------------------------------------------------------

#[actix_web::test]
async fn roles_are_assigned_in_either_shape_and_listed() {
    let h = harness_with_auth().await;
    let app = test::init_service(app(h.harness.state.clone())).await;

    // Variant A: principal, role, scope.
    let (status, a) = send(
        &app,
        post(
            "/api/auth/roles/assign",
            json!({"principal": "user:alice", "role": "viewer", "scope": "tenant:acme"}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{a}");
    assert_eq!(
        a,
        json!({"principal": "user:alice", "principal_id": "user:alice", "role": "viewer",
               "role_name": "viewer", "scope": "tenant:acme", "created": true})
    );
    // Variant B: principal_id, role_name; the scope defaults to global.
    let (status, b) = send(
        &app,
        post(
            "/api/auth/roles/assign",
            json!({"principal_id": "user:alice", "role_name": "developer"}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{b}");
    assert_eq!(b["scope"], "global");
    // Assigning again changes nothing.
    let (status, again) = send(
        &app,
        post(
            "/api/auth/roles/assign",
            json!({"principal_id": "user:alice", "role_name": "developer", "scope": "global"}),
        ),
    )
    .await;
    assert_eq!((status.as_u16(), &again["created"]), (200, &json!(false)));

    let expected = json!({
        "principal": "user:alice",
        "principal_id": "user:alice",
        "roles": [
            {"role": "developer", "scope": "global", "from_config": false},
            {"role": "viewer", "scope": "tenant:acme", "from_config": false},
        ],
    });
    let (status, roles) = send(&app, get("/api/auth/principals/roles?principal=user:alice")).await;
    assert_eq!((status.as_u16(), &roles), (200, &expected));
    let (status, roles) = send(
        &app,
        get("/api/auth/principals/roles?principal_id=user%3Aalice"),
    )
    .await;
    assert_eq!((status.as_u16(), &roles), (200, &expected));
    // A principal without roles has an empty list.
    let (status, none) = send(&app, get("/api/auth/principals/roles?principal=user:bob")).await;
    assert_eq!((status.as_u16(), &none["roles"]), (200, &json!([])));

    // The principals list shows assignments and keys.
    send(
        &app,
        post(
            "/api/auth/keys",
            json!({"principal": "service:ci", "name": "k"}),
        ),
    )
    .await;
    let (status, principals) = send(&app, get("/api/auth/principals")).await;
    assert_eq!(status, 200, "{principals}");
    let list = principals["principals"].as_array().unwrap();
    let alice = list
        .iter()
        .find(|p| p["principal"] == "user:alice")
        .unwrap();
    assert_eq!(alice["principal_id"], "user:alice");
    assert_eq!(
        alice["roles"],
        json!([{"role": "developer", "scope": "global"}, {"role": "viewer", "scope": "tenant:acme"}])
    );
    assert_eq!(
        (alice["active_keys"].as_u64(), alice["total_keys"].as_u64()),
        (Some(0), Some(0))
    );
    let ci = list
        .iter()
        .find(|p| p["principal"] == "service:ci")
        .unwrap();
    assert_eq!(
        (ci["active_keys"].as_u64(), ci["total_keys"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(ci["roles"], json!([]));
}

#[actix_web::test]
async fn bad_assignments_answer_422_or_404() {
    let h = harness_with_auth().await;
    let app = test::init_service(app(h.harness.state.clone())).await;
    let cases: Vec<(&str, &str, &str)> = vec![
        (
            "no principal",
            r#"{"role": "viewer"}"#,
            "principal: is required",
        ),
        (
            "no role",
            r#"{"principal": "user:alice"}"#,
            "role: is required",
        ),
        (
            "a principal without a kind",
            r#"{"principal": "alice", "role": "viewer"}"#,
            "alice",
        ),
        (
            "an unknown scope",
            r#"{"principal": "user:alice", "role": "viewer", "scope": "everywhere"}"#,
            "everywhere",
        ),
        (
            "a scope as a number",
            r#"{"principal": "user:alice", "role": "viewer", "scope": 1}"#,
            "scope: must be a string",
        ),
        (
            "a misspelt field",
            r#"{"principal": "user:alice", "rol": "viewer"}"#,
            "did you mean `role`?",
        ),
        (
            "two different roles",
            r#"{"principal": "user:alice", "role": "viewer", "role_name": "admin"}"#,
            "differs",
        ),
        ("malformed JSON", r#"{"principal": "#, "not valid JSON"),
    ];
    for (what, body, expected) in cases {
        let message = expect_error(
            &app,
            raw(Method::POST, "/api/auth/roles/assign", body),
            422,
            "ValidationError",
        )
        .await;
        assert!(message.contains(expected), "{what}: {message}");
    }
    expect_error(
        &app,
        post(
            "/api/auth/roles/assign",
            json!({"principal": "user:alice", "role": "wizard"}),
        ),
        404,
        "RoleNotFoundError",
    )
    .await;
    let (_, principals) = send(&app, get("/api/auth/principals")).await;
    assert_eq!(principals["principals"], json!([]), "nothing was assigned");

    // The principal-roles query needs a valid principal and nothing else.
    for (what, uri, expected) in [
        (
            "no principal",
            "/api/auth/principals/roles",
            "principal: is required",
        ),
        (
            "an invalid principal",
            "/api/auth/principals/roles?principal=alice",
            "alice",
        ),
        (
            "a misspelt parameter",
            "/api/auth/principals/roles?principle=user:alice",
            "unknown query parameter `principle`; did you mean `principal`?",
        ),
        (
            "a repeated parameter",
            "/api/auth/principals/roles?principal=user:a&principal=user:b",
            "more than once",
        ),
    ] {
        let message = expect_error(&app, get(uri), 422, "ValidationError").await;
        assert!(message.contains(expected), "{what}: {message}");
    }
}

#[actix_web::test]
async fn a_role_is_revoked_by_body_or_by_query() {
    let h = harness_with_auth().await;
    let app = test::init_service(app(h.harness.state.clone())).await;
    for body in [
        json!({"principal": "user:alice", "role": "viewer", "scope": "tenant:acme"}),
        json!({"principal": "user:alice", "role": "developer"}),
    ] {
        let (status, _) = send(&app, post("/api/auth/roles/assign", body)).await;
        assert_eq!(status, 201);
    }

    // By body, in variant B's names.
    let (status, revoked) = send(
        &app,
        request(
            Method::DELETE,
            "/api/auth/roles/revoke",
            Some(json!({"principal_id": "user:alice", "role_name": "developer"})),
        ),
    )
    .await;
    assert_eq!(status, 200, "{revoked}");
    assert_eq!(
        revoked,
        json!({"principal": "user:alice", "principal_id": "user:alice", "role": "developer",
               "role_name": "developer", "scope": "global", "revoked": true})
    );
    let (_, roles) = send(&app, get("/api/auth/principals/roles?principal=user:alice")).await;
    assert_eq!(names_of(&roles["roles"], "role"), ["viewer"]);

    // By query parameters.
    let (status, revoked) = send(
        &app,
        delete("/api/auth/roles/revoke?principal=user:alice&role=viewer&scope=tenant:acme"),
    )
    .await;
    assert_eq!(status, 200, "{revoked}");
    assert_eq!(revoked["scope"], "tenant:acme");
    let (_, roles) = send(&app, get("/api/auth/principals/roles?principal=user:alice")).await;
    assert_eq!(roles["roles"], json!([]));
    assert!(
        h.auth.roles_of("user:alice").unwrap().is_empty(),
        "the service's snapshot agrees"
    );

    // Revoking what is not held is not found.
    let message = expect_error(
        &app,
        delete("/api/auth/roles/revoke?principal=user:alice&role=viewer"),
        404,
        "RoleAssignmentNotFoundError",
    )
    .await;
    assert!(message.contains("user:alice"), "{message}");

    // Bad revokes.
    for (what, req, expected) in [
        (
            "fields in both body and query",
            TestRequest::delete()
                .uri("/api/auth/roles/revoke?principal=user:alice")
                .set_json(json!({"principal": "user:alice", "role": "viewer"}))
                .to_request(),
            "not both",
        ),
        (
            "nothing at all",
            delete("/api/auth/roles/revoke"),
            "principal: is required",
        ),
        (
            "a misspelt query parameter",
            delete("/api/auth/roles/revoke?principal=user:alice&rolename=viewer"),
            "unknown query parameter `rolename`; did you mean `role_name`?",
        ),
        (
            "a bad scope",
            delete("/api/auth/roles/revoke?principal=user:alice&role=viewer&scope=planet"),
            "planet",
        ),
        (
            "malformed JSON",
            raw(Method::DELETE, "/api/auth/roles/revoke", "{\"principal\""),
            "not valid JSON",
        ),
    ] {
        let message = expect_error(&app, req, 422, "ValidationError").await;
        assert!(message.contains(expected), "{what}: {message}");
    }
}

// ----- permissions ----------------------------------------------------------------------------

#[actix_web::test]
async fn the_permission_catalogue_is_listed() {
    let h = harness_with_auth().await;
    let app = test::init_service(app(h.harness.state.clone())).await;
    let (status, body) = send(&app, get("/api/auth/permissions")).await;
    assert_eq!(status, 200);
    let permissions = body["permissions"].as_array().unwrap();
    let names = names_of(&body["permissions"], "name");
    for expected in ["mcp_server:list", "tool:invoke", "tool:list", "auth:manage"] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    for permission in permissions {
        let name = permission["name"].as_str().unwrap();
        let resource = permission["resource"].as_str().unwrap();
        let action = permission["action"].as_str().unwrap();
        assert_eq!(format!("{resource}:{action}"), name);
        assert!(
            permission["description"]
                .as_str()
                .is_some_and(|d| !d.is_empty())
        );
        assert!(permission["endpoints"].is_array(), "{permission}");
    }
    let list = permissions
        .iter()
        .find(|p| p["name"] == "mcp_server:list")
        .unwrap();
    assert!(
        list["endpoints"]
            .as_array()
            .unwrap()
            .contains(&json!("GET /api/mcp_servers")),
        "{list}"
    );
}

#[actix_web::test]
async fn check_permission_answers_allowed_and_denied_with_the_granting_role() {
    let h = harness_with_auth().await;
    let app = test::init_service(app(h.harness.state.clone())).await;
    send(
        &app,
        post(
            "/api/auth/roles/assign",
            json!({"principal": "user:dev", "role": "developer"}),
        ),
    )
    .await;

    let (status, allowed) = send(
        &app,
        post(
            "/api/auth/check-permission",
            json!({"principal": "user:dev", "permission": "tool:invoke"}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{allowed}");
    assert_eq!(
        allowed,
        json!({"principal": "user:dev", "permission": "tool:invoke", "allowed": true, "granted_by_role": "developer"})
    );
    let (status, denied) = send(
        &app,
        post(
            "/api/auth/check-permission",
            json!({"principal_id": "user:dev", "permission": "auth:manage"}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{denied}");
    assert_eq!(
        denied,
        json!({"principal": "user:dev", "permission": "auth:manage", "allowed": false, "granted_by_role": null})
    );
    // A principal nobody has heard of holds nothing.
    let (_, stranger) = send(
        &app,
        post(
            "/api/auth/check-permission",
            json!({"principal": "user:stranger", "permission": "tool:list"}),
        ),
    )
    .await;
    assert_eq!(stranger["allowed"], false);

    for (what, body, expected) in [
        (
            "an unknown permission",
            r#"{"principal": "user:dev", "permission": "tool:invok"}"#,
            "did you mean `tool:invoke`?",
        ),
        (
            "a wildcard",
            r#"{"principal": "user:dev", "permission": "*"}"#,
            "*",
        ),
        (
            "a principal without a kind",
            r#"{"principal": "dev", "permission": "tool:list"}"#,
            "dev",
        ),
        (
            "no permission",
            r#"{"principal": "user:dev"}"#,
            "permission: is required",
        ),
        (
            "a permission as a list",
            r#"{"principal": "user:dev", "permission": ["tool:list"]}"#,
            "permission: must be a string, not an array",
        ),
        (
            "a misspelt field",
            r#"{"principal": "user:dev", "permision": "tool:list"}"#,
            "did you mean `permission`?",
        ),
        ("malformed JSON", "{principal: user:dev}", "not valid JSON"),
    ] {
        let message = expect_error(
            &app,
            raw(Method::POST, "/api/auth/check-permission", body),
            422,
            "ValidationError",
        )
        .await;
        assert!(message.contains(expected), "{what}: {message}");
    }
}

// ----- tool access policies -------------------------------------------------------------------

#[actix_web::test]
async fn a_policy_is_set_read_replaced_and_cleared_under_either_scope_name() {
    let h = harness_with_auth().await;
    let app = test::init_service(app(h.harness.state.clone())).await;
    let (status, set) = send(
        &app,
        post(
            "/api/auth/policies/provider/math",
            json!({"allow_list": ["user:alice", "group:ops"], "deny_list": ["service:*"]}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{set}");
    let expected = json!({
        "scope": "provider",
        "target_id": "math",
        "allow_list": ["user:alice", "group:ops"],
        "deny_list": ["service:*"],
    });
    assert_eq!(set, expected);
    // `mcp_server` is an alias of `provider`.
    for uri in [
        "/api/auth/policies/provider/math",
        "/api/auth/policies/mcp_server/math",
    ] {
        let (status, got) = send(&app, get(uri)).await;
        assert_eq!((status.as_u16(), &got), (200, &expected), "{uri}");
    }
    // Setting again replaces it; an absent list is empty.
    let (status, replaced) = send(
        &app,
        post(
            "/api/auth/policies/mcp_server/math",
            json!({"deny_list": ["user:mallory"]}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{replaced}");
    assert_eq!(replaced["allow_list"], json!([]));
    assert_eq!(replaced["deny_list"], json!(["user:mallory"]));
    let (_, got) = send(&app, get("/api/auth/policies/provider/math")).await;
    assert_eq!(got, replaced);

    // Group and tool scopes.
    let (status, tool) = send(
        &app,
        post(
            "/api/auth/policies/tool/math__add",
            json!({"allow_list": ["*"]}),
        ),
    )
    .await;
    assert_eq!(
        (status.as_u16(), &tool["scope"]),
        (201, &json!("tool")),
        "{tool}"
    );
    let (status, group) = send(
        &app,
        post(
            "/api/auth/policies/group/pool",
            json!({"deny_list": ["group:contractors"]}),
        ),
    )
    .await;
    assert_eq!(
        (status.as_u16(), &group["target_id"]),
        (201, &json!("pool")),
        "{group}"
    );

    let (status, cleared) = send(&app, delete("/api/auth/policies/mcp_server/math")).await;
    assert_eq!(status, 200, "{cleared}");
    assert_eq!(
        cleared,
        json!({"scope": "provider", "target_id": "math", "deleted": true})
    );
    expect_error(
        &app,
        get("/api/auth/policies/provider/math"),
        404,
        "ToolAccessPolicyNotFoundError",
    )
    .await;
    expect_error(
        &app,
        delete("/api/auth/policies/provider/math"),
        404,
        "ToolAccessPolicyNotFoundError",
    )
    .await;
    // The others are untouched.
    let (status, _) = send(&app, get("/api/auth/policies/tool/math__add")).await;
    assert_eq!(status, 200);
}

#[actix_web::test]
async fn bad_policies_answer_422() {
    let h = harness_with_auth().await;
    let app = test::init_service(app(h.harness.state.clone())).await;
    let cases: Vec<(&str, &str, &str, &str)> = vec![
        // (what is wrong, uri, body, a part of the message)
        (
            "an unknown scope",
            "/api/auth/policies/planet/math",
            r#"{"allow_list": ["*"]}"#,
            "planet",
        ),
        (
            "a tool target without a tool",
            "/api/auth/policies/tool/math",
            r#"{"allow_list": ["*"]}"#,
            "math",
        ),
        (
            "a pattern without a kind",
            "/api/auth/policies/provider/math",
            r#"{"allow_list": ["alice"]}"#,
            "alice",
        ),
        (
            "a list as a string",
            "/api/auth/policies/provider/math",
            r#"{"allow_list": "user:alice"}"#,
            "allow_list: must be an array of strings, not a string",
        ),
        (
            "a number in a list",
            "/api/auth/policies/provider/math",
            r#"{"deny_list": ["user:a", 1]}"#,
            "deny_list[1]: must be a string, not a number",
        ),
        (
            "neither list",
            "/api/auth/policies/provider/math",
            "{}",
            "give `allow_list`, `deny_list` or both",
        ),
        (
            "a misspelt field",
            "/api/auth/policies/provider/math",
            r#"{"allowlist": ["*"]}"#,
            "did you mean `allow_list`?",
        ),
        (
            "malformed JSON",
            "/api/auth/policies/provider/math",
            "{\"allow_list\": [",
            "not valid JSON",
        ),
    ];
    for (what, uri, body, expected) in cases {
        let message =
            expect_error(&app, raw(Method::POST, uri, body), 422, "ValidationError").await;
        assert!(message.contains(expected), "{what}: {message}");
    }
    let message = expect_error(
        &app,
        get("/api/auth/policies/planet/math"),
        422,
        "ValidationError",
    )
    .await;
    assert!(message.contains("planet"), "{message}");
    expect_error(
        &app,
        get("/api/auth/policies/provider/math"),
        404,
        "ToolAccessPolicyNotFoundError",
    )
    .await;
}

// ----- the surface as a whole -----------------------------------------------------------------

/// Every route of the auth management table (docs/api.md), with a body where it takes one.
fn every_auth_route() -> Vec<(Method, &'static str, Option<Value>)> {
    let assignment = json!({"principal": "user:alice", "role": "viewer"});
    vec![
        (
            Method::POST,
            "/api/auth/keys",
            Some(json!({"principal": "user:alice", "name": "k"})),
        ),
        (Method::GET, "/api/auth/keys", None),
        (Method::DELETE, "/api/auth/keys/k1", None),
        (Method::GET, "/api/auth/roles", None),
        (
            Method::POST,
            "/api/auth/roles",
            Some(json!({"name": "r", "permissions": []})),
        ),
        (Method::GET, "/api/auth/roles/all", None),
        (
            Method::POST,
            "/api/auth/roles/assign",
            Some(assignment.clone()),
        ),
        (Method::DELETE, "/api/auth/roles/revoke", Some(assignment)),
        (Method::GET, "/api/auth/roles/viewer", None),
        (Method::DELETE, "/api/auth/roles/r", None),
        (
            Method::PATCH,
            "/api/auth/roles/r",
            Some(json!({"description": "d"})),
        ),
        (Method::GET, "/api/auth/principals", None),
        (
            Method::GET,
            "/api/auth/principals/roles?principal=user:alice",
            None,
        ),
        (Method::GET, "/api/auth/permissions", None),
        (
            Method::POST,
            "/api/auth/check-permission",
            Some(json!({"principal": "user:alice", "permission": "tool:list"})),
        ),
        (Method::GET, "/api/auth/policies/provider/math", None),
        (
            Method::POST,
            "/api/auth/policies/provider/math",
            Some(json!({"allow_list": ["*"]})),
        ),
        (Method::DELETE, "/api/auth/policies/provider/math", None),
    ]
}

#[actix_web::test]
async fn without_an_auth_service_every_auth_route_is_not_found() {
    let app = test::init_service(app(harness().state)).await;
    for (method, uri, body) in every_auth_route() {
        let message = expect_error(
            &app,
            request(method.clone(), uri, body),
            404,
            "NotFoundError",
        )
        .await;
        assert!(
            message.contains("auth is not enabled in this gateway"),
            "{method} {uri}: {message}"
        );
    }
}

#[actix_web::test]
async fn every_auth_route_answers_something_other_than_a_missing_route() {
    let h = harness_with_auth().await;
    let app = test::init_service(app(h.harness.state.clone())).await;
    for (method, uri, body) in every_auth_route() {
        let response = test::call_service(&app, request(method.clone(), uri, body)).await;
        let status = response.status().as_u16();
        let body: Value = serde_json::from_slice(&test::read_body(response).await).unwrap();
        assert!(
            status < 500 && status != 405,
            "{method} {uri}: {status} {body}"
        );
        if status == 404 {
            let name = body["error"].as_str().unwrap();
            assert_ne!(name, "NotFoundError", "{method} {uri} is routed: {body}");
        }
    }
}

#[actix_web::test]
async fn other_methods_on_auth_routes_answer_405_with_allow() {
    let h = harness_with_auth().await;
    let app = test::init_service(app(h.harness.state.clone())).await;
    for (method, uri, allow) in [
        (Method::GET, "/api/auth/roles/assign", "POST"),
        (Method::GET, "/api/auth/roles/revoke", "DELETE"),
        (Method::PUT, "/api/auth/roles/viewer", "GET, PATCH, DELETE"),
        (Method::GET, "/api/auth/check-permission", "POST"),
        (
            Method::PUT,
            "/api/auth/policies/provider/math",
            "GET, POST, DELETE",
        ),
        (Method::DELETE, "/api/auth/keys", "GET, POST"),
    ] {
        let response = test::call_service(&app, request(method.clone(), uri, None)).await;
        assert_eq!(
            response
                .headers()
                .get("allow")
                .and_then(|v| v.to_str().ok()),
            Some(allow),
            "{method} {uri}"
        );
        assert_envelope(response, 405, "MethodNotAllowedError").await;
    }
}

#[actix_web::test]
async fn the_openapi_document_describes_every_auth_route() {
    let app = test::init_service(app(harness().state)).await;
    let (_, document) = send(&app, get("/api/openapi.json")).await;
    for (method, uri, _) in every_auth_route() {
        let path = uri.split('?').next().unwrap();
        let template = match path {
            "/api/auth/keys/k1" => "/api/auth/keys/{key_id}",
            "/api/auth/roles/viewer" | "/api/auth/roles/r" => "/api/auth/roles/{role_name}",
            "/api/auth/policies/provider/math" => "/api/auth/policies/provider/{target_id}",
            other => other,
        };
        let operation = &document["paths"][template][method.as_str().to_lowercase()];
        assert!(operation.is_object(), "{method} {template} is documented");
        assert_eq!(operation["tags"], json!(["auth"]), "{method} {template}");
    }
}
