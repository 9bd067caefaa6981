//! End-to-end tests of authentication and authorization against the real binary: API keys made
//! with the command line and over REST, the fixed failure messages, the built-in roles, the
//! lockout of an address, tool access policies seen through the official Python SDK, and what
//! survives a restart.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::peers::run_python_client;
use support::{RunningGateway, cli_key, fixture_server_yaml, gateway};

fn config(extra: &str) -> String {
    format!(
        "auth:\n  enabled: true\n  trusted_proxies: [\"127.0.0.1\"]\n{extra}mcp_servers:\n{}",
        fixture_server_yaml("demo", &[])
    )
}

struct Reply {
    status: u16,
    headers: ureq::http::HeaderMap,
    body: Value,
}

/// One request with optional key and client address (`X-Forwarded-For`, believed because the
/// tests' gateways trust 127.0.0.1 as a proxy).
fn call(
    gw: &RunningGateway,
    method: &str,
    path: &str,
    key: Option<&str>,
    client: &str,
    body: Option<&Value>,
) -> Reply {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .new_agent();
    let uri = gw.url(path);
    let mut request = ureq::http::Request::builder()
        .method(method)
        .uri(&uri)
        .header("x-forwarded-for", client)
        .header("content-type", "application/json");
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    let payload = body.map(Value::to_string).unwrap_or_default();
    let request = request.body(payload).unwrap();
    let mut response = agent.run(request).expect("the gateway answers");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Reply {
        status,
        headers,
        body,
    }
}

#[track_caller]
fn assert_refused(reply: &Reply, status: u16, error: &str, message: &str) {
    assert_eq!(reply.status, status, "{}", reply.body);
    assert_eq!(reply.body["error"], error, "{}", reply.body);
    assert_eq!(reply.body["message"], message, "{}", reply.body);
    assert_eq!(reply.body["status_code"], status, "{}", reply.body);
}

/// Every route of the API description with its placeholders filled in.
fn every_route(gw: &RunningGateway, admin: &str) -> Vec<(String, String)> {
    let document = call(
        gw,
        "GET",
        "/api/openapi.json",
        Some(admin),
        "10.9.0.1",
        None,
    );
    assert_eq!(document.status, 200, "{}", document.body);
    let mut routes = Vec::new();
    for (path, operations) in document.body["paths"].as_object().unwrap() {
        for method in operations.as_object().unwrap().keys() {
            let concrete: String = path
                .split('/')
                .map(|segment| {
                    if segment.starts_with('{') {
                        "x"
                    } else {
                        segment
                    }
                })
                .collect::<Vec<_>>()
                .join("/");
            routes.push((method.to_uppercase(), concrete));
        }
    }
    assert!(routes.len() > 30, "{routes:?}");
    routes
}

#[test]
fn no_route_answers_without_credentials_and_probes_stay_open() {
    let data = tempfile::tempdir().unwrap();
    let admin = cli_key(data.path(), "user:root", Some("admin"));
    let viewer = cli_key(data.path(), "user:looker", Some("viewer"));
    let gw = gateway().config(&config("")).data_dir(data).start();

    for (method, path) in every_route(&gw, &admin) {
        let reply = call(&gw, &method, &path, None, "10.9.0.2", Some(&json!({})));
        if path.starts_with("/api/") || path == "/mcp" {
            assert_refused(
                &reply,
                401,
                "AuthenticationError",
                "No valid credentials provided",
            );
            let challenge = reply.headers.get("www-authenticate").unwrap();
            assert!(
                challenge.to_str().unwrap().contains("X-API-Key"),
                "{method} {path}: {challenge:?}"
            );
        } else {
            assert!(reply.status < 500, "{method} {path}: {}", reply.body);
        }
    }
    // A path no route knows is not a way around it either.
    let reply = call(&gw, "GET", "/api/nothing/here", None, "10.9.0.2", None);
    assert_eq!(reply.status, 401);
    // With a valid key, whatever its roles, a route that does not exist answers 404 and a
    // route called with a method it does not take answers 405: the API description, which every
    // authenticated caller may read, lists the routes anyway.
    for key in [&admin, &viewer] {
        for path in ["/api/nothing/here", "/api/auth/principals/user:admin/roles"] {
            let reply = call(&gw, "GET", path, Some(key), "10.9.0.2", None);
            assert_eq!(reply.status, 404, "{path}: {}", reply.body);
            assert_eq!(reply.body["error"], "NotFoundError", "{}", reply.body);
            assert_eq!(reply.body["status_code"], 404, "{}", reply.body);
        }
        let reply = call(
            &gw,
            "PATCH",
            "/api/mcp_servers/demo",
            Some(key),
            "10.9.0.2",
            Some(&json!({})),
        );
        assert_eq!(reply.status, 405, "{}", reply.body);
        assert_eq!(
            reply.body["error"], "MethodNotAllowedError",
            "{}",
            reply.body
        );
        assert_eq!(
            reply.headers.get("allow").unwrap().to_str().unwrap(),
            "GET, PUT, DELETE"
        );
    }

    for open in [
        "/health/live",
        "/health/ready",
        "/health/startup",
        "/metrics",
    ] {
        assert_eq!(
            call(&gw, "GET", open, None, "10.9.0.2", None).status,
            200,
            "{open}"
        );
    }
}

#[test]
fn every_key_failure_answers_401_and_repeated_failures_lock_out_one_address_only() {
    let data = tempfile::tempdir().unwrap();
    let admin = cli_key(data.path(), "user:root", Some("admin"));
    let gw = gateway().config(&config("")).data_dir(data).start();
    let client = "203.0.113.10";

    // Bad input: no header, a wrong prefix, a well-formed unknown key, a malformed key.
    let no_header = call(&gw, "GET", "/api/mcp_servers", None, client, None);
    assert_refused(
        &no_header,
        401,
        "AuthenticationError",
        "No valid credentials provided",
    );
    let wrong_prefix = call(
        &gw,
        "GET",
        "/api/mcp_servers",
        Some("sk_live_abc"),
        client,
        None,
    );
    assert_refused(
        &wrong_prefix,
        401,
        "AuthenticationError",
        "No valid credentials provided",
    );
    let unknown = format!("mcp_{}", "A".repeat(43));
    let reply = call(&gw, "GET", "/api/mcp_servers", Some(&unknown), client, None);
    assert_refused(&reply, 401, "AuthenticationError", "Invalid API key");

    // A key made over REST works until it is revoked, then it is refused at once.
    let made = call(
        &gw,
        "POST",
        "/api/auth/keys",
        Some(&admin),
        "10.9.1.1",
        Some(&json!({"principal": "user:carol", "name": "laptop", "role": "viewer"})),
    );
    assert_eq!(made.status, 201, "{}", made.body);
    let carol = made.body["key"].as_str().unwrap().to_owned();
    assert_eq!(made.body["raw_key"], made.body["key"]);
    let key_id = made.body["key_id"].as_str().unwrap().to_owned();
    assert_eq!(
        call(
            &gw,
            "GET",
            "/api/mcp_servers",
            Some(&carol),
            "10.9.1.2",
            None
        )
        .status,
        200
    );
    let revoked = call(
        &gw,
        "DELETE",
        &format!("/api/auth/keys/{key_id}"),
        Some(&admin),
        "10.9.1.1",
        None,
    );
    assert!(revoked.status < 300, "{}", revoked.body);
    let reply = call(&gw, "GET", "/api/mcp_servers", Some(&carol), client, None);
    assert_refused(&reply, 401, "AuthenticationError", "Invalid API key");

    // Three refused credentials so far from `client` (the missing header does not count: it
    // guesses nothing); seven more reach the limit of ten.
    for _ in 0..7 {
        let reply = call(&gw, "GET", "/api/mcp_servers", Some(&unknown), client, None);
        assert_eq!(reply.status, 401, "{}", reply.body);
    }
    let locked = call(&gw, "GET", "/api/mcp_servers", Some(&admin), client, None);
    assert_eq!(locked.status, 429, "{}", locked.body);
    assert_eq!(locked.body["error"], "RateLimitExceeded");
    let retry_after: u64 = locked.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    // Another address is not affected, even with the same key.
    assert_eq!(
        call(
            &gw,
            "GET",
            "/api/mcp_servers",
            Some(&admin),
            "203.0.113.11",
            None
        )
        .status,
        200
    );
}

#[test]
fn built_in_roles_reach_exactly_their_routes() {
    use mcpgw_authz::{BuiltInRole, Permission, Role};
    let data = tempfile::tempdir().unwrap();
    let keys: Vec<(BuiltInRole, String)> = BuiltInRole::ALL
        .into_iter()
        .map(|role| {
            let name = role.role_name().to_string();
            (
                role,
                cli_key(data.path(), &format!("user:{name}"), Some(&name)),
            )
        })
        .collect();
    let gw = gateway().config(&config("")).data_dir(data).start();
    let admin = &keys
        .iter()
        .find(|(role, _)| *role == BuiltInRole::Admin)
        .unwrap()
        .1;

    // Every route of the API description, for every built-in role: a role whose grants
    // cover the route's permission gets past authorization (whatever the handler then says
    // about the placeholder ids), every other role gets 403. The key-management route that
    // revokes is left for last, so that no key is revoked while the table runs.
    let mut routes = every_route(&gw, admin);
    routes.retain(|(method, path)| !(method == "DELETE" && path.starts_with("/api/auth/keys/")));
    let mut checked = 0;
    for (method, path) in &routes {
        if !path.starts_with("/api/") || path == "/api/openapi.json" {
            continue;
        }
        let Some(permission) = Permission::for_rest_route(method, path) else {
            panic!("{method} {path} is mounted but no permission opens it");
        };
        for (role, key) in &keys {
            let reply = call(&gw, method, path, Some(key), "10.9.2.1", Some(&json!({})));
            if Role::built_in(*role).grants(permission) {
                assert!(
                    reply.status != 401 && reply.status != 403,
                    "{} may {method} {path} ({permission}): {} {}",
                    role.role_name(),
                    reply.status,
                    reply.body
                );
            } else {
                assert_eq!(
                    reply.status,
                    403,
                    "{} may not {method} {path} ({permission}): {}",
                    role.role_name(),
                    reply.body
                );
                assert_eq!(reply.body["error"], "AccessDeniedError");
            }
            checked += 1;
        }
    }
    assert!(checked > 150, "{checked}");
}

#[test]
fn an_expired_key_is_refused() {
    use mcpgw_authz::{AuthStore as _, NewApiKey, RoleBook};
    use mcpgw_core::Clock as _;
    // A one-day key made two days ago, written into the store the gateway will open.
    let data = tempfile::tempdir().unwrap();
    let store = mcpgw_store_sqlite::SqliteStore::open(&data.path().join("mcpgw.db")).unwrap();
    let now = mcpgw_gateway::TokioClock::default().wall();
    let two_days_ago =
        mcpgw_core::Timestamp::from_unix_micros(now.unix_micros() - 2 * 86_400_000_000);
    let issued = NewApiKey::parse(
        "user:old",
        "old",
        Some("admin"),
        Some(1),
        &RoleBook::new([]),
    )
    .unwrap()
    .issue(&mcpgw_gateway::OsSecrets, two_days_ago)
    .unwrap();
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(store.insert_key(&issued.record))
        .unwrap();
    drop(store);
    let gw = gateway().config(&config("")).data_dir(data).start();
    let reply = call(
        &gw,
        "GET",
        "/api/mcp_servers",
        Some(issued.raw_key.expose()),
        "10.9.6.1",
        None,
    );
    assert_refused(&reply, 401, "AuthenticationError", "Invalid API key");
}

#[test]
fn a_tool_policy_hides_a_tool_from_one_principal_and_survives_a_restart() {
    let data = tempfile::tempdir().unwrap();
    let admin = cli_key(data.path(), "user:root", Some("admin"));
    let alice = cli_key(data.path(), "user:alice", Some("developer"));
    let bob = cli_key(data.path(), "user:bob", Some("developer"));
    let gw = gateway().config(&config("")).data_dir(data).start();

    let set = call(
        &gw,
        "POST",
        "/api/auth/policies/tool/demo__add",
        Some(&admin),
        "10.9.3.1",
        Some(&json!({"allow_list": [], "deny_list": ["user:bob"]})),
    );
    assert!(set.status < 300, "{}", set.body);

    let listed_by = |key: &str, gw: &RunningGateway| -> Vec<String> {
        let run = run_python_client(
            "http_client.py",
            &[
                gw.url("/mcp"),
                "--protocol".to_owned(),
                "2025-11-25".to_owned(),
                "--header".to_owned(),
                format!("X-API-Key: {key}"),
            ],
        );
        run["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool.as_str().unwrap().to_owned())
            .collect()
    };
    let for_alice = listed_by(&alice, &gw);
    let for_bob = listed_by(&bob, &gw);
    assert!(for_alice.contains(&"demo__add".to_owned()), "{for_alice:?}");
    assert!(!for_bob.contains(&"demo__add".to_owned()), "{for_bob:?}");
    assert!(for_bob.contains(&"demo__echo".to_owned()), "{for_bob:?}");

    // Calling it anyway answers like an unknown tool.
    let run = run_python_client(
        "http_client.py",
        &[
            gw.url("/mcp"),
            "--protocol".to_owned(),
            "2025-11-25".to_owned(),
            "--header".to_owned(),
            format!("X-API-Key: {bob}"),
            "--no-list".to_owned(),
            "--call".to_owned(),
            "demo__add".to_owned(),
            r#"{"a": 1, "b": 2}"#.to_owned(),
        ],
    );
    let answer = run["calls"][0].to_string();
    assert!(
        answer.contains("-32602") || answer.contains("unknown tool"),
        "{run}"
    );

    // Keys and policies are in the store: a new gateway on the same data directory keeps them.
    let mut gw = gw;
    let data = std::mem::replace(&mut gw.data_dir, tempfile::tempdir().unwrap());
    drop(gw);
    let reopened = gateway().config(&config("")).data_dir(data).start();
    let for_bob = listed_by(&bob, &reopened);
    assert!(!for_bob.contains(&"demo__add".to_owned()), "{for_bob:?}");
    assert!(listed_by(&alice, &reopened).contains(&"demo__add".to_owned()));
}

/// A stand-in for OPA's data API: answers every POST as `mode` says, and records the inputs.
struct PolicyServer {
    url: String,
    mode: std::sync::Arc<std::sync::Mutex<&'static str>>,
    inputs: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
}

impl PolicyServer {
    fn start() -> Self {
        use std::io::{BufRead as _, BufReader, Read as _, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let mode = std::sync::Arc::new(std::sync::Mutex::new("allow"));
        let inputs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (thread_mode, thread_inputs) = (mode.clone(), inputs.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (mode, inputs) = (thread_mode.clone(), thread_inputs.clone());
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut length = 0;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let line = line.trim_end();
                        if line.is_empty() {
                            break;
                        }
                        if let Some((name, value)) = line.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    if let Ok(input) = serde_json::from_slice::<Value>(&body) {
                        inputs.lock().unwrap().push(input);
                    }
                    let mode = *mode.lock().unwrap();
                    let answer = match mode {
                        "allow" => r#"{"result": true}"#,
                        "deny" => r#"{"result": false}"#,
                        "garbage" => "<html>not a decision</html>",
                        _ => {
                            // "hang": never answer within the gateway's limit.
                            std::thread::sleep(Duration::from_secs(10));
                            return;
                        }
                    };
                    let mut stream = stream;
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                        answer.len()
                    );
                });
            }
        });
        Self { url, mode, inputs }
    }

    fn set(&self, mode: &'static str) {
        *self.mode.lock().unwrap() = mode;
    }
}

#[test]
fn an_external_policy_engine_can_only_take_permissions_away() {
    let opa = PolicyServer::start();
    let data = tempfile::tempdir().unwrap();
    let admin = cli_key(data.path(), "user:root", Some("admin"));
    let viewer = cli_key(data.path(), "user:val", Some("viewer"));
    let section = format!(
        "  opa:\n    enabled: true\n    url: \"{}\"\n    policy_path: v1/data/mcpgw/allow\n",
        opa.url
    );
    let gw = gateway().config(&config(&section)).data_dir(data).start();

    opa.set("allow");
    assert_eq!(
        call(
            &gw,
            "GET",
            "/api/mcp_servers",
            Some(&admin),
            "10.9.4.1",
            None
        )
        .status,
        200
    );
    let input = opa.inputs.lock().unwrap().last().cloned().unwrap();
    assert_eq!(input["input"]["principal"], "user:root", "{input}");
    assert_eq!(input["input"]["action"], "mcp_server:list", "{input}");

    // What the gateway itself denies is never asked, and an engine's "yes" does not grant it.
    let asked = opa.inputs.lock().unwrap().len();
    let reply = call(
        &gw,
        "DELETE",
        "/api/mcp_servers/demo",
        Some(&viewer),
        "10.9.4.1",
        None,
    );
    assert_refused(&reply, 403, "AccessDeniedError", "Access denied");
    assert_eq!(opa.inputs.lock().unwrap().len(), asked);

    // A "no", an answer that is not a decision, and no answer in time all deny.
    for mode in ["deny", "garbage", "hang"] {
        opa.set(mode);
        let started = std::time::Instant::now();
        let reply = call(
            &gw,
            "GET",
            "/api/mcp_servers",
            Some(&admin),
            "10.9.4.1",
            None,
        );
        assert_refused(&reply, 403, "AccessDeniedError", "Access denied");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{mode}: {:?}",
            started.elapsed()
        );
    }
    opa.set("allow");
    assert_eq!(
        call(
            &gw,
            "GET",
            "/api/mcp_servers",
            Some(&admin),
            "10.9.4.1",
            None
        )
        .status,
        200
    );
}

/// A stand-in OIDC issuer: discovery metadata and a key set with the RSA test key.
struct Issuer {
    url: String,
}

impl Issuer {
    fn start(jwks: Value) -> Self {
        use std::io::{BufRead as _, BufReader, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let issuer = url.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request_line = String::new();
                let _ = reader.read_line(&mut request_line);
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                        break;
                    }
                }
                let path = request_line.split_whitespace().nth(1).unwrap_or("/");
                let body = match path {
                    "/.well-known/openid-configuration" => {
                        json!({"issuer": issuer, "jwks_uri": format!("{issuer}/keys")}).to_string()
                    }
                    "/keys" => jwks.to_string(),
                    _ => String::new(),
                };
                let status = if body.is_empty() {
                    "404 Not Found"
                } else {
                    "200 OK"
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Self { url }
    }
}

const RSA_A: &[u8] = include_bytes!("../crates/oidc/tests/keys/rsa-a.der");

impl Issuer {
    /// An issuer whose key set holds the public half of `RSA_A`, key id `a`.
    fn with_key_a() -> Self {
        let mut jwk = jsonwebtoken::jwk::Jwk::from_encoding_key(
            &jsonwebtoken::EncodingKey::from_rsa_der(RSA_A),
            jsonwebtoken::Algorithm::RS256,
        )
        .unwrap();
        jwk.common.key_id = Some("a".to_owned());
        Self::start(json!({"keys": [jwk]}))
    }
}

/// Seconds since the epoch, for token claims.
fn unix_now() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap()
}
const RSA_B: &[u8] = include_bytes!("../crates/oidc/tests/keys/rsa-b.der");

fn token(key: &[u8], kid: &str, claims: &Value) -> String {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(
        &header,
        claims,
        &jsonwebtoken::EncodingKey::from_rsa_der(key),
    )
    .unwrap()
}

fn bearer(gw: &RunningGateway, method: &str, path: &str, token: &str) -> Reply {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    let request = ureq::http::Request::builder()
        .method(method)
        .uri(gw.url(path))
        .header("authorization", format!("Bearer {token}"))
        .header("x-forwarded-for", "10.9.5.1")
        .body(String::new())
        .unwrap();
    let mut response = agent.run(request).unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    Reply {
        status,
        headers,
        body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
    }
}

#[test]
fn bearer_tokens_from_the_issuer_authenticate_and_every_bad_token_is_refused() {
    let issuer = Issuer::with_key_a();
    let section = format!(
        "  oidc:\n    enabled: true\n    issuer: \"{}\"\n    audience: mcpgw\n  role_assignments:\n    - {{principal: \"user:alice\", role: viewer}}\n    - {{principal: \"group:ops\", role: operator}}\n    - {{principal: \"user:tim\", role: viewer, scope: \"tenant:acme\"}}\n",
        issuer.url
    );
    let gw = gateway().config(&config(&section)).start();
    let now = unix_now();
    let claims = |subject: &str, extra: Value| {
        let mut claims = json!({"iss": issuer.url, "aud": "mcpgw", "sub": subject,
                                "iat": now, "exp": now + 600});
        for (key, value) in extra.as_object().unwrap() {
            claims[key] = value.clone();
        }
        claims
    };

    // A valid token is the principal its subject names, with its assigned role.
    let alice = token(RSA_A, "a", &claims("alice", json!({})));
    assert_eq!(bearer(&gw, "GET", "/api/mcp_servers", &alice).status, 200);
    let reply = bearer(&gw, "POST", "/api/mcp_servers/demo/stop", &alice);
    assert_refused(&reply, 403, "AccessDeniedError", "Access denied");
    // Roles come through the groups claim too.
    let ops = token(RSA_A, "a", &claims("olga", json!({"groups": ["ops"]})));
    assert_eq!(
        bearer(&gw, "POST", "/api/mcp_servers/demo/stop", &ops).status,
        200
    );
    // A tenant assignment applies within that tenant only.
    let in_acme = token(RSA_A, "a", &claims("tim", json!({"tenant_id": "acme"})));
    assert_eq!(bearer(&gw, "GET", "/api/mcp_servers", &in_acme).status, 200);
    let elsewhere = token(RSA_A, "a", &claims("tim", json!({"tenant_id": "globex"})));
    let reply = bearer(&gw, "GET", "/api/mcp_servers", &elsewhere);
    assert_refused(&reply, 403, "AccessDeniedError", "Access denied");

    // Bad input: a forged signature, the wrong issuer or audience, an expired token, `alg:
    // none`, and a token that is not a JWT at all.
    let forged = token(RSA_B, "a", &claims("alice", json!({})));
    let wrong_issuer = token(
        RSA_A,
        "a",
        &claims("alice", json!({"iss": "https://evil.example"})),
    );
    let wrong_audience = token(RSA_A, "a", &claims("alice", json!({"aud": "someone-else"})));
    let expired = token(
        RSA_A,
        "a",
        &claims("alice", json!({"iat": now - 7200, "exp": now - 3600})),
    );
    let unsigned = {
        use base64::Engine as _;
        let encode = |value: &Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
        };
        format!(
            "{}.{}.",
            encode(&json!({"alg": "none", "typ": "JWT"})),
            encode(&claims("alice", json!({})))
        )
    };
    for (what, bad) in [
        ("forged", forged),
        ("wrong issuer", wrong_issuer),
        ("wrong audience", wrong_audience),
        ("expired", expired),
        ("alg none", unsigned),
        ("not a jwt", "not.a.jwt".to_owned()),
    ] {
        let reply = bearer(&gw, "GET", "/api/mcp_servers", &bad);
        assert_eq!(reply.status, 401, "{what}: {}", reply.body);
        assert_eq!(
            reply.body["message"], "No valid credentials provided",
            "{what}"
        );
        let challenge = reply.headers["www-authenticate"].to_str().unwrap();
        assert!(challenge.contains("Bearer"), "{what}: {challenge}");
    }
}

#[test]
fn the_event_stream_takes_its_key_from_the_query_and_needs_events_read() {
    let data = tempfile::tempdir().unwrap();
    let auditor = cli_key(data.path(), "user:audrey", Some("auditor"));
    let viewer = cli_key(data.path(), "user:val", Some("viewer"));
    let admin = cli_key(data.path(), "user:root", Some("admin"));
    let gw = gateway().config(&config("")).data_dir(data).start();
    let address = gw.base_url.trim_start_matches("http://").to_owned();
    // The open stream, or the HTTP status that refused the handshake.
    type Socket = tungstenite::WebSocket<std::net::TcpStream>;
    let handshake = |query: &str| -> Result<Socket, u16> {
        let stream = std::net::TcpStream::connect(&address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        match tungstenite::client(
            format!("ws://{address}/api/ws/events?{query}").as_str(),
            stream,
        ) {
            Ok((socket, response)) => {
                assert_eq!(response.status().as_u16(), 101);
                Ok(socket)
            }
            Err(tungstenite::handshake::HandshakeError::Failure(tungstenite::Error::Http(
                response,
            ))) => Err(response.status().as_u16()),
            Err(other) => panic!("{query}: {other}"),
        }
    };
    // Bad input: no key, an unknown key, and a key whose role may not read events.
    for (query, status) in [
        ("event_types=McpServerStarted", 401),
        (&*format!("api_key=mcp_{}", "B".repeat(43)), 401),
        (&*format!("api_key={viewer}"), 403),
    ] {
        match handshake(query) {
            Err(refused) => assert_eq!(refused, status, "{query}"),
            Ok(_) => panic!("{query}: the stream opened"),
        }
    }
    let mut client = handshake(&format!("api_key={auditor}&event_types=McpServerStarted"))
        .unwrap_or_else(|status| panic!("the auditor's handshake was refused with {status}"));
    let started = call(
        &gw,
        "POST",
        "/api/mcp_servers/demo/start",
        Some(&admin),
        "10.9.7.1",
        None,
    );
    assert!(started.status < 300, "{}", started.body);
    loop {
        match client.read().expect("an event arrives") {
            tungstenite::Message::Text(text) => {
                let event: Value = serde_json::from_str(text.as_str()).unwrap();
                assert_eq!(event["event_type"], "McpServerStarted", "{event}");
                assert_eq!(event["mcp_server_id"], "demo", "{event}");
                break;
            }
            tungstenite::Message::Ping(_) | tungstenite::Message::Pong(_) => {}
            other => panic!("unexpected frame {other:?}"),
        }
    }
}

#[test]
fn a_key_made_by_the_command_line_while_the_gateway_runs_is_accepted_soon() {
    let gw = gateway().config(&config("")).start();
    let late = cli_key(gw.data_dir.path(), "user:late", Some("viewer"));
    // Keys are read again every 5 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(9);
    loop {
        let reply = call(
            &gw,
            "GET",
            "/api/mcp_servers",
            Some(&late),
            "10.9.8.1",
            None,
        );
        if reply.status == 200 {
            break;
        }
        assert_eq!(reply.status, 401, "{}", reply.body);
        assert!(
            std::time::Instant::now() < deadline,
            "the key was not picked up within 9 s"
        );
        // Slowly: each refused try counts toward the address's lockout (ten a minute).
        std::thread::sleep(Duration::from_millis(1000));
    }
}

/// Planted secrets (two API keys, a refused key, a server's env value) never reach the log,
/// the event log, an error answer, a server's details or the metrics.
#[test]
fn no_key_or_secret_appears_in_logs_events_errors_or_metrics() {
    const PLANTED_ENV: &str = "s3cr3t-planted-ENV-value";
    // Bad input: a well-formed key that is not in the store.
    const REFUSED_KEY: &str = "mcp_plantedRefusedKey0123456789abcdefghijklmnopq";
    let data = tempfile::tempdir().unwrap();
    let data_path = data.path().to_owned();
    let admin = cli_key(data.path(), "user:root", Some("admin"));
    let fixture = support::fixture_binary().display().to_string();
    // An issuer whose tokens count, for a planted accepted token and a planted refused one.
    let issuer = Issuer::with_key_a();
    let gw = gateway()
        .config(&format!(
            "auth:\n  enabled: true\n  trusted_proxies: [\"127.0.0.1\"]\n  oauth:\n    \
             resource: \"http://planted.test/mcp\"\n    issuers:\n      - issuer: \"{}\"\n  \
             role_assignments:\n    - {{principal: \"user:tokenholder\", role: admin}}\n\
             mcp_servers:\n  \
             vault:\n    mode: subprocess\n    command: [\"{fixture}\"]\n    env: {{PLANTED: \
             \"{PLANTED_ENV}\"}}\n",
            issuer.url
        ))
        // The gateway's own debug logs; rmcp at debug logs whole MCP messages (tool data).
        .env("MCP_LOG", "debug,rmcp=info")
        .data_dir(data)
        .start();

    let made = call(
        &gw,
        "POST",
        "/api/auth/keys",
        Some(&admin),
        "10.9.7.1",
        Some(&json!({"principal": "user:dana", "name": "ci", "role": "operator"})),
    );
    assert_eq!(made.status, 201, "{}", made.body);
    let made_key = made.body["key"].as_str().unwrap().to_owned();

    let mut answers = Vec::new();
    for (method, path, key) in [
        (
            "POST",
            "/api/mcp_servers/vault/start",
            Some(made_key.as_str()),
        ),
        ("GET", "/api/mcp_servers/vault", Some(made_key.as_str())),
        ("GET", "/api/mcp_servers/vault/logs", Some(admin.as_str())),
        ("GET", "/api/mcp_servers", Some(REFUSED_KEY)),
        ("GET", "/api/auth/keys", Some(admin.as_str())),
        ("GET", "/api/system", Some(admin.as_str())),
        ("GET", "/api/config", Some(admin.as_str())),
        ("POST", "/api/config/export", Some(admin.as_str())),
    ] {
        let reply = call(&gw, method, path, key, "10.9.7.2", None);
        answers.push(format!(
            "{method} {path} -> {} {}",
            reply.status, reply.body
        ));
    }
    assert!(
        answers[3].contains("401"),
        "the planted refused key is refused: {}",
        answers[3]
    );
    let now = unix_now();
    let planted_token = |audience: &str| {
        token(
            RSA_A,
            "a",
            &json!({"iss": issuer.url, "aud": audience, "sub": "tokenholder",
                    "scope": "mcp:admin", "iat": now, "exp": now + 600}),
        )
    };
    let accepted_token = planted_token("http://planted.test/mcp");
    // Bad input: the same holder's token minted for another resource.
    let refused_token = planted_token("http://elsewhere.test/mcp");
    for (what, bearer_token, status) in [
        ("accepted", &accepted_token, 200),
        ("refused", &refused_token, 401),
    ] {
        let reply = bearer(&gw, "GET", "/api/mcp_servers/vault", bearer_token);
        assert_eq!(reply.status, status, "{what}: {}", reply.body);
        answers.push(format!(
            "GET /api/mcp_servers/vault with a {what} token -> {} {}",
            reply.status, reply.body
        ));
        let reply = mcp_with_token(&gw, Some(bearer_token), "tools/list", json!({}), &[]);
        answers.push(format!(
            "tools/list with a {what} token -> {} {:?} {}",
            reply.status, reply.headers, reply.body
        ));
    }
    let metrics = call(&gw, "GET", "/metrics", None, "10.9.7.3", None);
    answers.push(format!("GET /metrics -> {}", metrics.body));

    // The event log is written within a few tens of milliseconds; its file and write-ahead
    // log are read as bytes, whatever their layout.
    std::thread::sleep(Duration::from_millis(300));
    let mut event_log = Vec::new();
    for name in ["events.db", "events.db-wal"] {
        if let Ok(bytes) = std::fs::read(data_path.join(name)) {
            event_log.extend(bytes);
        }
    }
    assert!(!event_log.is_empty(), "the event log exists");
    let event_log = String::from_utf8_lossy(&event_log).into_owned();
    let log = gw.stderr();

    for secret in [
        admin.as_str(),
        made_key.as_str(),
        REFUSED_KEY,
        PLANTED_ENV,
        accepted_token.as_str(),
        refused_token.as_str(),
        // A token's signature alone is as good as a token to a log reader who has the rest.
        accepted_token.rsplit('.').next().unwrap(),
    ] {
        for (place, text) in [("the log", &log), ("the event log", &event_log)] {
            assert!(!text.contains(secret), "{place} holds a planted secret");
        }
        for answer in &answers {
            assert!(
                !answer.contains(secret),
                "an answer holds a planted secret: {answer}"
            );
        }
    }
    // What the log does say about the refused key: that a key was refused, not which.
    assert!(
        log.contains("AuthenticationFailed"),
        "the refusal is an event"
    );
}

/// One stateless (2026-07-28) JSON-RPC request to `/mcp`, with a bearer token when given and
/// extra headers; the reply's body is the JSON-RPC answer (read out of an event stream if it
/// came as one).
fn mcp_with_token(
    gw: &RunningGateway,
    token: Option<&str>,
    method: &str,
    mut params: Value,
    headers: &[(&str, &str)],
) -> Reply {
    const PROTOCOL: &str = "2026-07-28";
    // The era's members join whatever `_meta` the test put in.
    let mut meta = params["_meta"].as_object().cloned().unwrap_or_default();
    for (key, value) in [
        ("io.modelcontextprotocol/protocolVersion", json!(PROTOCOL)),
        ("io.modelcontextprotocol/clientCapabilities", json!({})),
        (
            "io.modelcontextprotocol/clientInfo",
            json!({"name": "mcpgw-e2e", "version": "0"}),
        ),
    ] {
        meta.insert(key.to_owned(), value);
    }
    params["_meta"] = Value::Object(meta);
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .new_agent();
    let mut request = ureq::http::Request::builder()
        .method("POST")
        .uri(gw.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", PROTOCOL)
        .header("mcp-method", method)
        .header("x-forwarded-for", "10.9.8.1");
    if let Some(name) = params["name"].as_str() {
        request = request.header("mcp-name", name.to_owned());
    }
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut response = agent
        .run(request.body(body.to_string()).unwrap())
        .expect("the gateway answers");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or_else(|_| {
        text.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
            .find(|message| message.get("id").is_some())
            .unwrap_or(Value::String(text.clone()))
    });
    Reply {
        status,
        headers,
        body,
    }
}

fn tool_names_of(reply: &Reply) -> Vec<String> {
    reply.body["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("tools/list answered {}", reply.body))
        .iter()
        .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn an_oauth_client_finds_the_metadata_and_only_tokens_minted_for_this_gateway_pass() {
    let issuer = Issuer::with_key_a();
    let section = format!(
        "  oauth:\n    issuers:\n      - issuer: \"{}\"\n  role_assignments:\n    - {{principal: \"user:alice\", role: admin}}\n",
        issuer.url
    );
    let fixture = support::fixture_binary().display().to_string();
    let gw = gateway()
        .config(&format!(
            "{}  other:\n    mode: subprocess\n    command: [\"{fixture}\"]\n",
            config(&section)
        ))
        .env("MCP_LOG", "debug,rmcp=info")
        .start();
    let resource = gw.url("/mcp");
    let metadata_url = gw.url("/.well-known/oauth-protected-resource/mcp");

    // 1. The metadata names this gateway's endpoint and its issuer, readable from any page.
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let reply = call(&gw, "GET", path, None, "10.9.8.2", None);
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
        assert_eq!(reply.body["resource"], resource.as_str(), "{path}");
        assert_eq!(reply.body["authorization_servers"], json!([issuer.url]));
        assert_eq!(
            reply.body["scopes_supported"],
            json!(["mcp:tools", "mcp:admin"])
        );
        assert_eq!(reply.body["bearer_methods_supported"], json!(["header"]));
        assert_eq!(reply.headers["access-control-allow-origin"], "*", "{path}");
    }

    // 2. `/mcp` without a token points at the metadata and the scope to ask for.
    let reply = mcp_with_token(&gw, None, "tools/list", json!({}), &[]);
    assert_eq!(reply.status, 401, "{}", reply.body);
    let challenge = reply.headers["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains(&format!(
            "Bearer realm=\"mcpgw\", resource_metadata=\"{metadata_url}\""
        )),
        "{challenge}"
    );
    assert!(challenge.contains("scope=\"mcp:tools\""), "{challenge}");

    let now = unix_now();
    let minted = |audience: &str, scope: &str| {
        token(
            RSA_A,
            "a",
            &json!({"iss": issuer.url, "aud": audience, "sub": "alice", "scope": scope,
                    "iat": now, "exp": now + 600}),
        )
    };

    // 3. A token for this resource with `mcp:tools` lists and calls every tool...
    let tools = minted(&resource, "openid mcp:tools");
    let reply = mcp_with_token(&gw, Some(&tools), "tools/list", json!({}), &[]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let names = tool_names_of(&reply);
    assert!(
        names.iter().any(|name| name.starts_with("demo__")),
        "{names:?}"
    );
    assert!(
        names.iter().any(|name| name.starts_with("other__")),
        "{names:?}"
    );
    let called = mcp_with_token(
        &gw,
        Some(&tools),
        "tools/call",
        json!({"name": "demo__echo", "arguments": {"text": "hi"}}),
        &[],
    );
    assert_eq!(called.status, 200, "{}", called.body);
    assert!(
        called.body["result"]["content"].is_array(),
        "{}",
        called.body
    );
    // ...but an admin's token held to `mcp:tools` cannot manage the gateway: 403 naming the
    // scope that would.
    let reply = bearer(&gw, "GET", "/api/mcp_servers", &tools);
    assert_refused(&reply, 403, "AccessDeniedError", "Access denied");
    let challenge = reply.headers["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains("error=\"insufficient_scope\"")
            && challenge.contains("scope=\"mcp:admin\""),
        "{challenge}"
    );
    assert_eq!(
        bearer(
            &gw,
            "GET",
            "/api/mcp_servers",
            &minted(&resource, "mcp:admin")
        )
        .status,
        200
    );

    // 4. `mcp:tools:demo` shows and calls demo's tools only.
    let demo_only = minted(&resource, "mcp:tools:demo");
    let names = tool_names_of(&mcp_with_token(
        &gw,
        Some(&demo_only),
        "tools/list",
        json!({}),
        &[],
    ));
    assert!(
        !names.is_empty() && names.iter().all(|name| name.starts_with("demo__")),
        "{names:?}"
    );
    let refused = mcp_with_token(
        &gw,
        Some(&demo_only),
        "tools/call",
        json!({"name": "other__echo", "arguments": {"text": "hi"}}),
        &[],
    );
    assert_eq!(refused.body["error"]["code"], -32602, "{}", refused.body);

    // 5. Bad input: a token whose scopes cover no tool use gets 403 insufficient_scope at /mcp.
    let reply = mcp_with_token(
        &gw,
        Some(&minted(&resource, "openid profile")),
        "tools/list",
        json!({}),
        &[],
    );
    assert_eq!(reply.status, 403, "{}", reply.body);
    let challenge = reply.headers["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains("error=\"insufficient_scope\"")
            && challenge.contains("scope=\"mcp:tools\"")
            && challenge.contains(&metadata_url),
        "{challenge}"
    );

    // 6. Bad input: a token from the same issuer minted for another resource, and one for
    // another host that a forged X-Forwarded-Host names: both 401, refused as for another
    // audience.
    let elsewhere = minted("https://other-mcp.example.com/mcp", "mcp:tools");
    let reply = mcp_with_token(&gw, Some(&elsewhere), "tools/list", json!({}), &[]);
    assert_eq!(reply.status, 401, "{}", reply.body);
    assert!(
        reply.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("resource_metadata="),
        "every 401 of /mcp carries the challenge"
    );
    let reply = mcp_with_token(
        &gw,
        Some(&elsewhere),
        "tools/list",
        json!({}),
        &[
            ("x-forwarded-host", "other-mcp.example.com"),
            ("x-forwarded-proto", "https"),
        ],
    );
    assert_eq!(reply.status, 401, "{}", reply.body);
    let log = gw.stderr();
    assert!(
        log.contains("AuthenticationFailed") && log.contains("the token is for another audience"),
        "the refusal is an event that says why"
    );
    for secret in [&tools, &demo_only, &elsewhere] {
        assert!(!log.contains(secret.as_str()), "the log holds a token");
    }
}

#[test]
fn a_configured_resource_is_the_audience_whatever_host_the_request_names() {
    let issuer = Issuer::with_key_a();
    let section = format!(
        "  oauth:\n    resource: https://mcp.example.com/mcp\n    issuers:\n      - issuer: \"{}\"\n        scopes: {{\"mcp:ops\": operator}}\n  role_assignments:\n    - {{principal: \"user:alice\", role: admin}}\n",
        issuer.url
    );
    let gw = gateway().config(&config(&section)).start();
    let reply = call(
        &gw,
        "GET",
        "/.well-known/oauth-protected-resource/mcp",
        None,
        "10.9.9.1",
        None,
    );
    assert_eq!(reply.body["resource"], "https://mcp.example.com/mcp");
    assert_eq!(
        reply.body["scopes_supported"],
        json!(["mcp:tools", "mcp:admin", "mcp:ops"])
    );
    let reply = mcp_with_token(&gw, None, "tools/list", json!({}), &[]);
    let challenge = reply.headers["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains(
            "resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\""
        ),
        "{challenge}"
    );

    let now = unix_now();
    let minted = |audience: &str, scope: &str| {
        token(
            RSA_A,
            "a",
            &json!({"iss": issuer.url, "aud": audience, "sub": "alice", "scope": scope,
                    "iat": now, "exp": now + 600}),
        )
    };
    let configured = minted("https://mcp.example.com/mcp", "mcp:tools");
    assert_eq!(
        mcp_with_token(&gw, Some(&configured), "tools/list", json!({}), &[]).status,
        200
    );
    // Bad input: a token for the address the request was sent to, which is not the resource.
    let local = minted(&gw.url("/mcp"), "mcp:tools");
    assert_eq!(
        mcp_with_token(&gw, Some(&local), "tools/list", json!({}), &[]).status,
        401
    );
    // A configured scope stands for its role: `mcp:ops` may stop a server, not read keys.
    let ops = minted("https://mcp.example.com/mcp", "mcp:ops");
    assert_eq!(
        bearer(&gw, "POST", "/api/mcp_servers/demo/stop", &ops).status,
        200
    );
    let reply = bearer(&gw, "GET", "/api/auth/keys", &ops);
    assert_eq!(reply.status, 403, "{}", reply.body);
}

/// A token of the authorization server's static client (client credentials), for refusal
/// cases that a signed-in user cannot produce: another audience, no scope, a short life.
fn client_credentials_token(issuer: &str, resource: &str, scope: &str) -> String {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    let mut response = agent
        .post(&format!("{issuer}/token"))
        .send_form([
            ("grant_type", "client_credentials"),
            ("client_id", "tester"),
            ("client_secret", "tester-secret"),
            ("resource", resource),
            ("scope", scope),
        ])
        .expect("the authorization server answers");
    let text = response.body_mut().read_to_string().unwrap();
    let answer: Value = serde_json::from_str(&text).unwrap();
    answer["access_token"]
        .as_str()
        .unwrap_or_else(|| panic!("no token for {resource} {scope:?}: {text}"))
        .to_owned()
}

/// What `oauth_client.py --expect-status STATUS --bearer TOKEN` saw at `/mcp`.
fn probe_with_token(gw: &RunningGateway, token: &str, status: u16) -> Value {
    run_python_client(
        "oauth_client.py",
        &[
            "--url".to_owned(),
            gw.url("/mcp"),
            "--expect-status".to_owned(),
            status.to_string(),
            "--bearer".to_owned(),
            token.to_owned(),
        ],
    )
}

#[test]
fn the_official_sdk_signs_in_through_a_real_authorization_server_and_bad_tokens_are_refused() {
    let work = tempfile::tempdir().unwrap();
    let provider_port = support::peers::free_port();
    let issuer_url = format!("http://127.0.0.1:{provider_port}");
    // A second issuer that nobody serves: its tokens cannot be checked (503, not 401).
    let unreachable = format!("http://127.0.0.1:{}", support::peers::free_port());
    let section = format!(
        "  oauth:\n    issuers:\n      - issuer: \"{issuer_url}\"\n        clock_skew_s: 0\n      - issuer: \"{unreachable}\"\n  role_assignments:\n    - {{principal: \"group:ops\", role: developer}}\n    - {{principal: \"user:tester\", role: admin}}\n"
    );
    let gw = gateway()
        .config(&config(&section))
        .env("MCP_LOG", "debug,rmcp=info")
        .start();
    let resource = gw.url("/mcp");
    // The same gateway under its other loopback name: a resource whose tokens live 1 s.
    let short_lived = resource.replace("127.0.0.1", "localhost");
    let provider = support::peers::start_authorization_server(
        &json!({
            "port": provider_port,
            "accounts": {"alice": {"groups": ["ops"]}, "bob": {"groups": []}},
            "resources": [
                {"uri": resource, "scopes": "mcp:tools mcp:admin"},
                {"uri": short_lived, "scopes": "mcp:tools", "access_token_ttl_s": 3},
                {"uri": "http://other-mcp.test/mcp", "scopes": "mcp:tools"}
            ],
            "clients": [{
                "client_id": "tester", "client_secret": "tester-secret",
                "grant_types": ["client_credentials"], "redirect_uris": [],
                "response_types": [], "token_endpoint_auth_method": "client_secret_post"
            }]
        }),
        work.path(),
    );
    assert_eq!(provider.url, issuer_url);

    // The whole flow, driven by the official SDK's OAuth client: 401 -> metadata ->
    // authorization server metadata -> registration -> authorization code + PKCE -> token ->
    // the same request again, then a tool call.
    let run = run_python_client(
        "oauth_client.py",
        &[
            "--url".to_owned(),
            resource.clone(),
            "--login".to_owned(),
            "alice".to_owned(),
            "--call".to_owned(),
            "demo__echo".to_owned(),
            "--arguments".to_owned(),
            r#"{"text": "signed in"}"#.to_owned(),
        ],
    );
    let tools: Vec<&str> = run["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(tools.contains(&"demo__echo"), "{run}");
    assert!(
        run["call"].to_string().contains("signed in"),
        "the call went through: {}",
        run["call"]
    );
    let claims = &run["token"]["claims"];
    assert_eq!(claims["aud"], resource.as_str(), "{claims}");
    assert_eq!(claims["iss"], issuer_url.as_str(), "{claims}");
    assert_eq!(claims["sub"], "alice", "{claims}");
    assert!(
        claims["scope"]
            .as_str()
            .unwrap()
            .split(' ')
            .any(|scope| scope == "mcp:tools"),
        "{claims}"
    );
    let flow: Vec<(String, String, u64)> = run["flow"]
        .as_array()
        .unwrap()
        .iter()
        .map(|step| {
            (
                step[0].as_str().unwrap().to_owned(),
                step[1].as_str().unwrap().to_owned(),
                step[2].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let position = |what: &str, predicate: &dyn Fn(&(String, String, u64)) -> bool| {
        flow.iter()
            .position(predicate)
            .unwrap_or_else(|| panic!("the flow lacks {what}: {flow:#?}"))
    };
    let refused = position("a 401 from /mcp", &|(method, url, status)| {
        method == "POST" && url == &resource && *status == 401
    });
    let metadata = position("the protected resource metadata", &|(_, url, status)| {
        url.ends_with("/.well-known/oauth-protected-resource/mcp") && *status == 200
    });
    let registered = position("a registration", &|(method, url, status)| {
        method == "POST" && url.starts_with(&issuer_url) && url.ends_with("/reg") && *status == 201
    });
    let token = position("a token", &|(method, url, status)| {
        method == "POST" && url == &format!("{issuer_url}/token") && *status == 200
    });
    let admitted = position("/mcp admitting the token", &|(method, url, status)| {
        method == "POST" && url == &resource && *status == 200
    });
    assert!(
        refused < metadata && metadata < registered && registered < token && token < admitted,
        "{flow:#?}"
    );

    // Bad input, each refused with its reason:
    // a token of the same authorization server for another MCP server;
    let elsewhere = client_credentials_token(&issuer_url, "http://other-mcp.test/mcp", "mcp:tools");
    let answer = probe_with_token(&gw, &elsewhere, 401);
    assert!(
        answer["www_authenticate"]
            .as_str()
            .unwrap()
            .contains("resource_metadata="),
        "{answer}"
    );
    // a token for this gateway whose scopes cover no tool use (step-up needed);
    let unscoped = client_credentials_token(&issuer_url, &resource, "");
    let answer = probe_with_token(&gw, &unscoped, 403);
    let challenge = answer["www_authenticate"].as_str().unwrap();
    assert!(
        challenge.contains("error=\"insufficient_scope\"")
            && challenge.contains("scope=\"mcp:tools\""),
        "{answer}"
    );
    // the same client with the right scope passes (it is an admin by assignment);
    let scoped = client_credentials_token(&issuer_url, &resource, "mcp:tools");
    probe_with_token(&gw, &scoped, 200);
    // an expired token (the issuer allows no clock skew here), first accepted while valid (and
    // so kept in the cache of verified tokens, which must not answer for it once it expired);
    let brief = client_credentials_token(&issuer_url, &short_lived, "mcp:tools");
    let brief_url = short_lived.clone();
    let probe_brief = |status: u16| {
        run_python_client(
            "oauth_client.py",
            &[
                "--url".to_owned(),
                brief_url.clone(),
                "--expect-status".to_owned(),
                status.to_string(),
                "--bearer".to_owned(),
                brief.clone(),
            ],
        )
    };
    probe_brief(200);
    let expires = {
        use base64::Engine as _;
        let payload = brief.split('.').nth(1).unwrap();
        let claims: Value = serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(payload)
                .unwrap(),
        )
        .unwrap();
        std::time::UNIX_EPOCH + Duration::from_secs(claims["exp"].as_u64().unwrap())
    };
    if let Ok(left) = expires.duration_since(std::time::SystemTime::now()) {
        std::thread::sleep(left + Duration::from_millis(1100));
    }
    probe_brief(401);
    // a token naming an issuer that cannot be reached: 503, the token is not blamed.
    let stranded = {
        use base64::Engine as _;
        let encode = |value: &Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
        };
        format!(
            "{}.{}.c2lnbmF0dXJl",
            encode(&json!({"alg": "RS256", "kid": "k", "typ": "JWT"})),
            encode(
                &json!({"iss": unreachable, "aud": resource, "sub": "x", "exp": 4_102_444_800_u64})
            )
        )
    };
    let answer = probe_with_token(&gw, &stranded, 503);
    assert_eq!(
        answer["body"]["error"], "ServiceUnavailableError",
        "{answer}"
    );

    // The reasons are events; no token appears in the gateway's log.
    std::thread::sleep(Duration::from_millis(200));
    let log = gw.stderr();
    assert!(
        log.contains("the token is for another audience"),
        "wrong audience"
    );
    assert!(log.contains("the token has expired"), "expired");
    assert!(log.contains("do not cover it"), "insufficient scope");
    for secret in [&elsewhere, &unscoped, &scoped, &brief] {
        assert!(
            !log.contains(secret.as_str()),
            "the gateway's log holds a token"
        );
    }
    drop(provider);
}

#[test]
fn a_remote_server_receives_a_token_exchanged_for_the_callers_and_never_the_callers_own() {
    const CLIENT_SECRET: &str = "gateway-client-s3cret-planted";
    let work = tempfile::tempdir().unwrap();
    let provider_port = support::peers::free_port();
    let upstream_port = support::peers::free_port();
    let issuer_url = format!("http://127.0.0.1:{provider_port}");
    let upstream = format!("http://127.0.0.1:{upstream_port}/mcp");
    let data = tempfile::tempdir().unwrap();
    let api_key = cli_key(data.path(), "user:keyholder", Some("admin"));
    let tools = "[{name: whoami, description: \"who called\", inputSchema: {type: object}}, {name: echo, description: \"echo\", inputSchema: {type: object}}]";
    let section = format!(
        "  oauth:\n    issuers:\n      - issuer: \"{issuer_url}\"\n  role_assignments:\n    - {{principal: \"group:ops\", role: developer}}\n"
    );
    let remote = |id: &str, scope: &str| {
        format!(
            "  {id}:\n    mode: remote\n    endpoint: \"{upstream}\"\n    tools: {tools}\n    token_exchange:\n      token_endpoint: \"{issuer_url}/token\"\n      client_id: mcpgw\n      client_secret: \"${{UPSTREAM_CLIENT_SECRET}}\"\n      scope: \"{scope}\"\n"
        )
    };
    let gw = gateway()
        .config(&format!(
            "probe_tools: false\n{}{}{}",
            config(&section),
            remote("up", "upstream:read"),
            // Asks for a scope the upstream does not have: every exchange is refused.
            remote("denied", "upstream:write"),
        ))
        .env("UPSTREAM_CLIENT_SECRET", CLIENT_SECRET)
        .env("MCP_LOG", "debug,rmcp=info")
        .data_dir(data)
        .start();
    let resource = gw.url("/mcp");
    let provider = support::peers::start_authorization_server(
        &json!({
            "port": provider_port,
            "accounts": {"alice": {"groups": ["ops"]}},
            "resources": [
                {"uri": resource, "scopes": "mcp:tools mcp:admin"},
                {"uri": upstream, "scopes": "upstream:read"}
            ],
            "clients": [{
                "client_id": "mcpgw", "client_secret": CLIENT_SECRET,
                "grant_types": ["client_credentials", "urn:ietf:params:oauth:grant-type:token-exchange"],
                "redirect_uris": [], "response_types": [],
                "token_endpoint_auth_method": "client_secret_basic"
            }]
        }),
        work.path(),
    );
    let record = work.path().join("upstream-requests.jsonl");
    let _upstream = support::peers::start_protected_server(&provider.url, upstream_port, &record);

    // Alice signs in with the official SDK and calls the remote server's `whoami`.
    let run = run_python_client(
        "oauth_client.py",
        &[
            "--url".to_owned(),
            resource.clone(),
            "--login".to_owned(),
            "alice".to_owned(),
            "--call".to_owned(),
            "up__whoami".to_owned(),
        ],
    );
    let text = run["call"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("whoami answered: {run}"));
    let seen: Value = serde_json::from_str(text).unwrap();
    assert_eq!(seen["sub"], "alice", "{seen}");
    assert_eq!(
        seen["aud"],
        upstream.as_str(),
        "the upstream got a token for itself: {seen}"
    );
    assert_eq!(
        seen["act"]["sub"], "mcpgw",
        "the token says the gateway acts: {seen}"
    );
    assert_eq!(seen["scope"], "upstream:read", "{seen}");

    // Bad input: an API key cannot be exchanged, so its holder cannot act at this server.
    let answer = {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .new_agent();
        let request = ureq::http::Request::builder()
            .method("POST")
            .uri(gw.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "up__whoami")
            .header("x-api-key", &api_key)
            .body(
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "up__whoami", "arguments": {},
                                  "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                            "io.modelcontextprotocol/clientCapabilities": {},
                                            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"}}}})
                .to_string(),
            )
            .unwrap();
        agent
            .run(request)
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap()
    };
    assert!(
        answer.contains("sign in with OAuth") && answer.contains("-32600"),
        "an API-key call is refused, not made with the gateway's identity: {answer}"
    );

    // Bad input: the authorization server refuses the exchange; the caller learns why, and no
    // token shows.
    let refused = run_python_client(
        "oauth_client.py",
        &[
            "--url".to_owned(),
            resource.clone(),
            "--login".to_owned(),
            "alice".to_owned(),
            "--call".to_owned(),
            "denied__whoami".to_owned(),
        ],
    );
    let refusal = refused["call"].to_string();
    assert!(
        refusal.contains("invalid_scope") && refusal.contains("denied"),
        "the refusal names the authorization server's answer: {refused}"
    );

    // Every request the upstream received carried a token minted for it; the tool call ran on
    // alice's own session, all of whose requests carried alice's (exchanged) token, and the
    // gateway's own session carried the gateway client's; alice's own token, whose audience is
    // the gateway, never arrived.
    std::thread::sleep(Duration::from_millis(200));
    let lines: Vec<Value> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(!lines.is_empty(), "the upstream was called");
    for line in &lines {
        assert_eq!(line["valid"], true, "{line}");
        assert_eq!(line["aud"], upstream.as_str(), "{line}");
        assert_ne!(line["aud"], resource.as_str(), "{line}");
    }
    let calls: Vec<&Value> = lines
        .iter()
        .filter(|line| line["rpc"] == json!(["tools/call"]))
        .collect();
    assert_eq!(calls.len(), 1, "{lines:#?}");
    assert_eq!(calls[0]["sub"], "alice");
    for line in &lines {
        match line["sub"].as_str() {
            Some("mcpgw") => assert!(line["act"].is_null(), "{line}"),
            Some("alice") => assert_eq!(line["act"]["sub"], "mcpgw", "{line}"),
            _ => panic!("a request carried a token of neither alice nor the gateway: {line}"),
        }
    }
    let sessions = subjects_by_session(&lines);
    assert!(
        sessions.values().all(|subjects| subjects.len() == 1),
        "a session saw more than one subject: {sessions:?}"
    );
    let alice_session = calls[0]["session"]
        .as_str()
        .expect("the call named its session");
    assert_eq!(
        sessions[alice_session],
        BTreeSet::from(["alice".to_owned()]),
        "{lines:#?}"
    );
    assert!(
        sessions.values().any(|subjects| subjects.contains("mcpgw")),
        "the gateway keeps a session of its own: {lines:#?}"
    );

    // The client secret is masked in the API, and no secret or token is in the log.
    let definition = call(
        &gw,
        "GET",
        "/api/mcp_servers/up",
        Some(&api_key),
        "10.9.10.2",
        None,
    );
    assert_eq!(
        definition.body["token_exchange"]["client_secret"], "***",
        "{}",
        definition.body
    );
    let config = call(&gw, "GET", "/api/config", Some(&api_key), "10.9.10.2", None);
    assert!(
        !config.body.to_string().contains(CLIENT_SECRET),
        "{}",
        config.body
    );
    let log = gw.stderr();
    assert!(
        !log.contains(CLIENT_SECRET),
        "the log holds the client secret"
    );
    assert!(!log.contains("eyJ"), "the log holds a token");
}

#[test]
fn servers_that_name_a_meta_key_learn_the_calling_principal_and_no_caller_can_forge_it() {
    let data = tempfile::tempdir().unwrap();
    let alice = cli_key(data.path(), "user:alice", Some("developer"));
    let remote = support::peers::start_fixture_http(&["--extra-tools", "1"]);
    let fixture = support::fixture_binary().display().to_string();
    let gw = gateway()
        .config(&format!(
            "auth:\n  enabled: true\n  trusted_proxies: [\"127.0.0.1\"]\nmcp_servers:\n\
             \x20 local:\n    mode: subprocess\n    command: [\"{fixture}\", \"--extra-tools\", \"1\"]\n\
             \x20   caller_meta: com.example/caller\n\
             \x20 far:\n    mode: remote\n    endpoint: \"{}\"\n    caller_meta: com.example/caller\n\
             \x20 plain:\n    mode: subprocess\n    command: [\"{fixture}\", \"--extra-tools\", \"1\"]\n",
            remote.url
        ))
        .data_dir(data)
        .start();
    let meta_seen_by = |server: &str, meta: Value| -> Value {
        let reply = mcp_with_token(
            &gw,
            None,
            "tools/call",
            json!({"name": format!("{server}__tool_0"), "arguments": {"n": 1}, "_meta": meta}),
            &[("x-api-key", alice.as_str())],
        );
        assert_eq!(reply.status, 200, "{}", reply.body);
        let text = reply.body["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{server}: {}", reply.body));
        let echoed: Value = serde_json::from_str(text).unwrap();
        assert_eq!(echoed["n"], 1, "{echoed}");
        echoed["_meta"].clone()
    };
    // Over stdio (the direct path) and over HTTP (through rmcp).
    for server in ["local", "far"] {
        let meta = meta_seen_by(server, json!({}));
        assert_eq!(meta["com.example/caller"], "user:alice", "{server}: {meta}");
        // Bad input: a caller who names itself someone else in its own `_meta`.
        let meta = meta_seen_by(server, json!({"com.example/caller": "user:root"}));
        assert_eq!(meta["com.example/caller"], "user:alice", "{server}: {meta}");
    }
    // A server that names no key learns nothing of the caller.
    let meta = meta_seen_by("plain", json!({}));
    assert!(meta.get("com.example/caller").is_none(), "{meta}");

    // Bad input at config check: a key MCP reserves, and one with a blank.
    for (key, words) in [
        ("io.modelcontextprotocol/caller", "reserved"),
        ("my caller", "not a `_meta` key"),
    ] {
        let stderr = support::start_fails(
            Some(&format!(
                "mcp_servers:\n  x:\n    mode: subprocess\n    command: [\"{fixture}\"]\n    caller_meta: \"{key}\"\n"
            )),
            &[],
        );
        assert!(
            stderr.contains("caller_meta") && stderr.contains(words),
            "{key}: {stderr}"
        );
    }
}

/// The subjects whose tokens each upstream session saw, from the lines `protected_server.py`
/// recorded (requests of no session left out).
fn subjects_by_session(lines: &[Value]) -> BTreeMap<String, BTreeSet<String>> {
    let mut sessions: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in lines {
        if let Some(session) = line["session"].as_str() {
            sessions
                .entry(session.to_owned())
                .or_default()
                .insert(line["sub"].as_str().unwrap_or("(none)").to_owned());
        }
    }
    sessions
}

fn recorded_lines(record: &Path) -> Vec<Value> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// `tests/python/protected_server.py --bind-sessions`: a session serves only the subject whose
/// token opened it. Killed on drop.
struct BindingUpstream {
    child: std::process::Child,
}

impl BindingUpstream {
    fn start(issuer: &str, port: u16, record: &Path) -> Self {
        use std::io::BufRead as _;
        let mut child = std::process::Command::new(support::peers::python())
            .arg(support::peers::python_script("protected_server.py"))
            .args([
                "--issuer",
                issuer,
                "--resource",
                &format!("http://127.0.0.1:{port}/mcp"),
                "--port",
                &port.to_string(),
                "--record",
                record.to_str().unwrap(),
                "--bind-sessions",
            ])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("protected_server.py starts");
        let stderr = child.stderr.take().unwrap();
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if line.starts_with("listening on ") {
                    let _ = sender.send(Ok(()));
                } else {
                    seen.push(line);
                }
            }
            let _ = sender.send(Err(seen.join("\n")));
        });
        match receiver.recv_timeout(Duration::from_secs(60)) {
            Ok(Ok(())) => Self { child },
            Ok(Err(stderr)) => panic!("protected_server.py exited before it listened: {stderr}"),
            Err(_) => panic!("protected_server.py did not listen within 60 s"),
        }
    }
}

impl Drop for BindingUpstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A gateway whose remote server `up` (at a session-binding `protected_server.py`) is called
/// with a token exchanged for each caller's; alice and bob can sign in at the provider.
struct ExchangeRig {
    gw: RunningGateway,
    /// The gateway's MCP endpoint, the audience of the callers' own tokens.
    resource: String,
    /// The upstream's endpoint, the audience of the exchanged tokens.
    upstream: String,
    record: PathBuf,
    _upstream: BindingUpstream,
    _provider: support::peers::RunningPeer,
    _work: tempfile::TempDir,
}

impl ExchangeRig {
    fn start(server_extra: &str) -> Self {
        const CLIENT_SECRET: &str = "gateway-client-s3cret-planted";
        let work = tempfile::tempdir().unwrap();
        let provider_port = support::peers::free_port();
        let upstream_port = support::peers::free_port();
        let issuer_url = format!("http://127.0.0.1:{provider_port}");
        let upstream = format!("http://127.0.0.1:{upstream_port}/mcp");
        let tools = "[{name: whoami, description: \"who called\", inputSchema: {type: object}}, {name: sleep, description: \"waits\", inputSchema: {type: object}}]";
        let section = format!(
            "  oauth:\n    issuers:\n      - issuer: \"{issuer_url}\"\n  role_assignments:\n    - {{principal: \"group:ops\", role: developer}}\n"
        );
        let gw = gateway()
            .config(&format!(
                "probe_tools: false\n{}  up:\n    mode: remote\n    endpoint: \"{upstream}\"\n    tools: {tools}\n{server_extra}    token_exchange:\n      token_endpoint: \"{issuer_url}/token\"\n      client_id: mcpgw\n      client_secret: \"${{UPSTREAM_CLIENT_SECRET}}\"\n      scope: \"upstream:read\"\n",
                config(&section),
            ))
            .env("UPSTREAM_CLIENT_SECRET", CLIENT_SECRET)
            .env("MCP_LOG", "debug,rmcp=info")
            .start();
        let resource = gw.url("/mcp");
        let provider = support::peers::start_authorization_server(
            &json!({
                "port": provider_port,
                "accounts": {"alice": {"groups": ["ops"]}, "bob": {"groups": ["ops"]}},
                "resources": [
                    {"uri": resource, "scopes": "mcp:tools mcp:admin"},
                    {"uri": upstream, "scopes": "upstream:read"}
                ],
                "clients": [{
                    "client_id": "mcpgw", "client_secret": CLIENT_SECRET,
                    "grant_types": ["client_credentials", "urn:ietf:params:oauth:grant-type:token-exchange"],
                    "redirect_uris": [], "response_types": [],
                    "token_endpoint_auth_method": "client_secret_basic"
                }]
            }),
            work.path(),
        );
        let record = work.path().join("upstream-requests.jsonl");
        let upstream_server = BindingUpstream::start(&provider.url, upstream_port, &record);
        Self {
            gw,
            resource,
            upstream,
            record,
            _upstream: upstream_server,
            _provider: provider,
            _work: work,
        }
    }

    /// The arguments of `oauth_client.py` signing in as `login` and calling `tool`.
    fn client_args(&self, login: &str, tool: &str, arguments: &Value) -> Vec<String> {
        vec![
            "--url".to_owned(),
            self.resource.clone(),
            "--login".to_owned(),
            login.to_owned(),
            "--call".to_owned(),
            tool.to_owned(),
            "--arguments".to_owned(),
            arguments.to_string(),
        ]
    }

    /// Signs in as `login` and calls `up__whoami`: the claims the upstream saw.
    fn whoami(&self, login: &str) -> Value {
        let run = run_python_client(
            "oauth_client.py",
            &self.client_args(login, "up__whoami", &json!({})),
        );
        let text = run["call"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("whoami for {login} answered: {run}"));
        serde_json::from_str(text).unwrap()
    }

    fn lines(&self) -> Vec<Value> {
        recorded_lines(&self.record)
    }

    /// The sessions whose requests carried `subject`'s tokens.
    fn sessions_of(&self, subject: &str) -> Vec<String> {
        subjects_by_session(&self.lines())
            .into_iter()
            .filter(|(_, subjects)| subjects.contains(subject))
            .map(|(session, _)| session)
            .collect()
    }
}

#[test]
fn each_caller_gets_an_upstream_session_of_their_own_at_a_server_that_binds_sessions_to_users() {
    let rig = ExchangeRig::start("");

    // Interleaved: alice, bob, alice, bob, each signing in anew (so each call brings a fresh
    // access token of its user). An upstream that binds sessions to users refuses any of them
    // made on a session another subject opened.
    for login in ["alice", "bob", "alice", "bob"] {
        let seen = rig.whoami(login);
        assert_eq!(seen["sub"], login, "{seen}");
        assert_eq!(seen["aud"], rig.upstream.as_str(), "{seen}");
        assert_eq!(seen["act"]["sub"], "mcpgw", "{seen}");
    }

    std::thread::sleep(Duration::from_millis(200));
    let lines = rig.lines();
    for line in &lines {
        assert_eq!(line["valid"], true, "{line}");
        assert!(line["refused"].is_null(), "the upstream refused: {line}");
        assert_eq!(line["aud"], rig.upstream.as_str(), "{line}");
        assert_ne!(line["aud"], rig.resource.as_str(), "{line}");
    }
    let sessions = subjects_by_session(&lines);
    assert!(
        sessions.values().all(|subjects| subjects.len() == 1),
        "a session saw more than one subject: {sessions:?}"
    );
    let alice = rig.sessions_of("alice");
    let bob = rig.sessions_of("bob");
    assert_eq!(
        alice.len(),
        1,
        "alice's refreshed token kept her session: {sessions:?}"
    );
    assert_eq!(
        bob.len(),
        1,
        "bob's refreshed token kept his session: {sessions:?}"
    );
    assert_ne!(alice, bob);
    let calls_on = |session: &str| {
        lines
            .iter()
            .filter(|line| line["rpc"] == json!(["tools/call"]) && line["session"] == session)
            .count()
    };
    assert_eq!(calls_on(&alice[0]), 2, "{lines:#?}");
    assert_eq!(calls_on(&bob[0]), 2, "{lines:#?}");
    // Each caller's session was opened with that caller's token.
    for (session, subject) in [(&alice[0], "alice"), (&bob[0], "bob")] {
        let opening = lines
            .iter()
            .find(|line| line["session"] == session.as_str())
            .unwrap();
        assert_eq!(opening["rpc"], json!(["initialize"]), "{opening}");
        assert_eq!(opening["sub"], subject, "{opening}");
    }
    // The gateway's own session does the housekeeping with the gateway's token.
    let own = rig.sessions_of("mcpgw");
    assert_eq!(own.len(), 1, "{sessions:?}");
    assert!(
        lines.iter().any(|line| line["rpc"] == json!(["tools/list"])
            && line["session"] == own[0].as_str()
            && line["act"].is_null()),
        "the gateway's own session listed the tools: {lines:#?}"
    );
    assert!(
        lines
            .iter()
            .filter(|line| line["rpc"] == json!(["tools/call"]))
            .all(|line| line["session"] != own[0].as_str()),
        "no call ran on the gateway's own session: {lines:#?}"
    );
    let log = rig.gw.stderr();
    assert!(!log.contains("eyJ"), "the log holds a token");
}

#[test]
fn a_callers_idle_upstream_session_is_closed_with_delete_while_the_server_runs_on() {
    // The server's idle time is also how long a caller's session may stay unused.
    let rig = ExchangeRig::start("    idle_ttl_s: 6\n");

    // Alice's long call keeps the server busy, so that it is not stopped for idleness, while
    // bob's session goes unused. Her call is in flight once her session is open.
    let mut alice_args = rig.client_args("alice", "up__sleep", &json!({"seconds": 50}));
    alice_args.extend(["--timeout".to_owned(), "85".to_owned()]);
    let alice = support::peers::spawn_python_client("oauth_client.py", &alice_args);
    let deadline = Instant::now() + Duration::from_secs(45);
    while rig.sessions_of("alice").is_empty() {
        assert!(
            Instant::now() < deadline,
            "alice's call never reached the upstream: {:#?}",
            rig.lines()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(rig.whoami("bob")["sub"], "bob");
    let bob = rig.sessions_of("bob");
    assert_eq!(bob.len(), 1);

    let deadline = Instant::now() + Duration::from_secs(20);
    let (delete, lines) = loop {
        let lines = rig.lines();
        if let Some(delete) = lines
            .iter()
            .find(|line| line["method"] == "DELETE" && line["session"] == bob[0].as_str())
        {
            break (delete.clone(), lines);
        }
        assert!(
            Instant::now() < deadline,
            "bob's idle session was not ended upstream: {lines:#?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        delete["sub"], "bob",
        "the DELETE carries bob's token: {delete}"
    );
    assert!(delete["refused"].is_null(), "{delete}");
    assert!(
        lines
            .iter()
            .filter(|line| line["method"] == "DELETE")
            .all(|line| line["session"] == bob[0].as_str()),
        "only bob's session ended; the server runs on: {lines:#?}"
    );
    assert!(
        !rig.gw.stderr().contains("stopping idle mcp server"),
        "the server was not stopped for idleness"
    );
    // Alice's call is still running; it has shown what it had to.
    alice.kill();

    // Bob's next call opens a new session, with his token.
    assert_eq!(rig.whoami("bob")["sub"], "bob");
    let bob_now = rig.sessions_of("bob");
    assert_eq!(bob_now.len(), 2, "{bob_now:?}");
}
