//! The decider against a local policy server that speaks OPA's data API: each test starts one
//! that records what it was asked and answers with a set status and body, hangs up, or never
//! answers. The same server runs the test kit's `PolicyDecider` contract suite against the
//! decider (`mod contract` at the end), which changes the answer between questions.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpgw_authz::{Identity, Permission, PolicyDecider, PolicyInput, VerifiedClaims};
use mcpgw_core::Timestamp;
use mcpgw_policy_opa::{DEFAULT_TIMEOUT, OpaDecider, OpaSettings};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[derive(Clone)]
enum Behaviour {
    Answer {
        status: u16,
        body: String,
    },
    /// Reads the request and then closes the connection without a word.
    HangUp,
    /// Reads the request and then keeps the connection open without a word.
    Silent,
}

/// A request the server received: its request line and JSON body.
#[derive(Debug, Clone)]
struct Asked {
    request_line: String,
    body: Value,
}

struct PolicyServer {
    base: String,
    asked: Arc<Mutex<Vec<Asked>>>,
    /// What every request is answered with, read when the request has arrived.
    behaviour: Arc<Mutex<Behaviour>>,
}

impl PolicyServer {
    async fn start(behaviour: Behaviour) -> PolicyServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let asked = Arc::new(Mutex::new(Vec::new()));
        let behaviour = Arc::new(Mutex::new(behaviour));
        let record = Arc::clone(&asked);
        let scripted = Arc::clone(&behaviour);
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let record = Arc::clone(&record);
                let scripted = Arc::clone(&scripted);
                tokio::spawn(async move {
                    let Some(asked) = read_request(&mut stream).await else {
                        return;
                    };
                    record.lock().expect("record").push(asked);
                    let behaviour = scripted.lock().expect("behaviour").clone();
                    match behaviour {
                        Behaviour::Answer { status, body } => {
                            let response = format!(
                                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n\
                                 content-length: {}\r\nconnection: close\r\n\r\n{body}",
                                body.len()
                            );
                            let _ = stream.write_all(response.as_bytes()).await;
                            let _ = stream.shutdown().await;
                        }
                        Behaviour::HangUp => drop(stream),
                        Behaviour::Silent => {
                            // Hold the connection until the client gives up.
                            let mut rest = [0_u8; 64];
                            while matches!(stream.read(&mut rest).await, Ok(n) if n > 0) {}
                        }
                    }
                });
            }
        });
        PolicyServer {
            base,
            asked,
            behaviour,
        }
    }

    async fn answering(status: u16, body: &str) -> PolicyServer {
        PolicyServer::start(Behaviour::Answer {
            status,
            body: body.to_owned(),
        })
        .await
    }

    fn decider(&self) -> OpaDecider {
        OpaDecider::new(&OpaSettings::new(&self.base, "v1/data/mcpgw/allow")).expect("settings")
    }

    fn asked(&self) -> Vec<Asked> {
        self.asked.lock().expect("record").clone()
    }
}

async fn read_request(stream: &mut tokio::net::TcpStream) -> Option<Asked> {
    let mut data = Vec::new();
    let mut buffer = [0_u8; 4096];
    loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_string();
            let length: usize = head
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                let body = serde_json::from_slice(&data[end + 4..end + 4 + length]).ok()?;
                let request_line = head.lines().next().unwrap_or_default().to_owned();
                return Some(Asked { request_line, body });
            }
        }
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => data.extend_from_slice(&buffer[..n]),
        }
    }
}

fn input() -> PolicyInput {
    let claims = VerifiedClaims {
        subject: "alice".to_owned(),
        groups: vec!["ops".to_owned()],
        tenant: Some("acme".to_owned()),
        expires_at: Timestamp::from_unix_micros(0),
        scopes: None,
    };
    let identity = Identity::from_claims(&claims).expect("identity");
    let mut input = PolicyInput::new(
        &identity,
        Permission::parse("tool:invoke").expect("permission"),
        Some("tool/math__add".to_owned()),
    );
    input.context.insert("method".to_owned(), "POST".to_owned());
    input
}

#[tokio::test]
async fn a_true_result_allows_and_the_input_reaches_the_data_api() {
    let server = PolicyServer::answering(200, r#"{"result": true}"#).await;
    assert_eq!(server.decider().decide(&input()).await, Ok(true));

    let asked = server.asked();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].request_line, "POST /v1/data/mcpgw/allow HTTP/1.1");
    assert_eq!(
        asked[0].body,
        json!({"input": {
            "principal": "user:alice",
            "groups": ["group:ops"],
            "tenant": "acme",
            "action": "tool:invoke",
            "resource": "tool/math__add",
            "context": {"method": "POST"},
        }})
    );
}

#[tokio::test]
async fn a_false_result_denies() {
    let server = PolicyServer::answering(200, r#"{"result": false}"#).await;
    assert_eq!(server.decider().decide(&input()).await, Ok(false));
}

#[tokio::test]
async fn a_missing_or_non_boolean_result_denies() {
    // Bad answers: an undefined rule (no result), and results that are truthy but not `true`.
    for body in [
        r#"{}"#,
        r#"{"decision_id": "x"}"#,
        r#"{"result": "true"}"#,
        r#"{"result": 1}"#,
        r#"{"result": {"allow": true}}"#,
        r#"{"result": [true]}"#,
        r#"{"result": null}"#,
        r#"[true]"#,
        r#"true"#,
    ] {
        let server = PolicyServer::answering(200, body).await;
        assert_eq!(
            server.decider().decide(&input()).await,
            Ok(false),
            "answer {body}"
        );
    }
}

#[tokio::test]
async fn a_garbage_answer_is_no_decision() {
    // Bad answer: not JSON at all.
    let server = PolicyServer::answering(200, "<html>allow</html>").await;
    let error = server
        .decider()
        .decide(&input())
        .await
        .expect_err("no decision");
    assert!(error.0.contains("not json"), "{error}");
}

#[tokio::test]
async fn an_http_error_is_no_decision_even_with_a_true_body() {
    for status in [500, 404, 403, 302] {
        let server = PolicyServer::answering(status, r#"{"result": true}"#).await;
        let error = server
            .decider()
            .decide(&input())
            .await
            .expect_err("no decision");
        assert!(error.0.contains(&status.to_string()), "{error}");
    }
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let server = PolicyServer::start(Behaviour::Silent).await;
    let mut settings = OpaSettings::new(&server.base, "v1/data/mcpgw/allow");
    settings.timeout = Duration::from_millis(300);
    let decider = OpaDecider::new(&settings).expect("settings");

    let started = Instant::now();
    let error = decider.decide(&input()).await.expect_err("no decision");
    let elapsed = started.elapsed();
    assert!(error.0.contains("within 300 ms"), "{error}");
    assert!(elapsed >= Duration::from_millis(250), "waited {elapsed:?}");
    assert!(elapsed < Duration::from_secs(2), "waited {elapsed:?}");
    assert_eq!(server.asked().len(), 1, "the question did arrive");
}

#[tokio::test]
async fn an_unreachable_server_is_no_decision() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    drop(listener);
    let decider = OpaDecider::new(&OpaSettings::new(
        format!("http://{address}"),
        "v1/data/mcpgw/allow",
    ))
    .expect("settings");
    assert!(decider.decide(&input()).await.is_err());
}

#[test]
fn url_and_policy_path_join_with_one_slash() {
    for (url, path) in [
        ("http://opa:8181", "v1/data/mcpgw/allow"),
        ("http://opa:8181/", "v1/data/mcpgw/allow"),
        ("http://opa:8181", "/v1/data/mcpgw/allow"),
        ("http://opa:8181//", "//v1/data/mcpgw/allow"),
    ] {
        let settings = OpaSettings::new(url, path);
        assert_eq!(
            settings.decision_url(),
            "http://opa:8181/v1/data/mcpgw/allow"
        );
        assert_eq!(
            OpaDecider::new(&settings).expect("settings").endpoint(),
            "http://opa:8181/v1/data/mcpgw/allow"
        );
    }
    // A path prefix of a proxied OPA is kept.
    assert_eq!(
        OpaSettings::new("https://gw.example/opa", "v1/data/p").decision_url(),
        "https://gw.example/opa/v1/data/p"
    );
    assert_eq!(OpaSettings::new("http://opa", "p").timeout, DEFAULT_TIMEOUT);
    assert_eq!(DEFAULT_TIMEOUT, Duration::from_secs(2));
}

#[test]
fn settings_that_cannot_work_are_refused() {
    // Bad settings: no URL scheme, a non-HTTP scheme, an empty path, a zero timeout.
    assert!(OpaDecider::new(&OpaSettings::new("opa:8181:x", "v1/data/p")).is_err());
    assert!(OpaDecider::new(&OpaSettings::new("ftp://opa", "v1/data/p")).is_err());
    assert!(OpaDecider::new(&OpaSettings::new("http://opa", " / ")).is_err());
    let mut settings = OpaSettings::new("http://opa", "v1/data/p");
    settings.timeout = Duration::ZERO;
    assert!(OpaDecider::new(&settings).is_err());
}

/// The local policy server as the suite's [`ScriptedEngine`], and a decider with a
/// short deadline that asks it.
mod contract {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use async_trait::async_trait;
    use mcpgw_authz::{Permission, PolicyInput, Principal, TenantId};
    use mcpgw_policy_opa::{OpaDecider, OpaSettings};
    use mcpgw_testkit::policy_decider_suite::{EngineAnswer, ScriptedEngine};
    use serde_json::Value;

    use super::{Behaviour, PolicyServer};

    const DEADLINE: Duration = Duration::from_millis(300);

    fn behaviour(answer: EngineAnswer) -> Behaviour {
        let reply = |status: u16, body: &str| Behaviour::Answer {
            status,
            body: body.to_owned(),
        };
        match answer {
            EngineAnswer::Allow => reply(200, r#"{"result": true}"#),
            EngineAnswer::Deny => reply(200, r#"{"result": false}"#),
            EngineAnswer::Undefined => reply(200, r#"{"decision_id": "d-1"}"#),
            EngineAnswer::Unclear => reply(200, r#"{"result": {"allow": true}}"#),
            EngineAnswer::Failure => reply(500, r#"{"result": true}"#),
            EngineAnswer::Garbled => reply(200, "<html>allow</html>"),
            EngineAnswer::HangUp => Behaviour::HangUp,
            EngineAnswer::Silent => Behaviour::Silent,
        }
    }

    fn text<'a>(value: &'a Value, what: &str) -> &'a str {
        value
            .as_str()
            .unwrap_or_else(|| panic!("{what} is not a string: {value}"))
    }

    /// The question as OPA received it, read back from `{"input": {...}}`; every member must
    /// be there, `null` standing for an absent tenant or resource.
    fn question(body: &Value) -> PolicyInput {
        let input = body
            .get("input")
            .and_then(Value::as_object)
            .unwrap_or_else(|| panic!("no input object in {body}"));
        let member = |name: &str| {
            input
                .get(name)
                .unwrap_or_else(|| panic!("no `{name}` in {body}"))
        };
        let principal = |value: &Value| {
            Principal::parse(text(value, "a principal")).expect("a valid principal")
        };
        let groups = member("groups")
            .as_array()
            .unwrap_or_else(|| panic!("groups are not an array in {body}"))
            .iter()
            .map(principal)
            .collect();
        let tenant = match member("tenant") {
            Value::Null => None,
            value => Some(TenantId::parse(text(value, "the tenant")).expect("a valid tenant")),
        };
        let resource = match member("resource") {
            Value::Null => None,
            value => Some(text(value, "the resource").to_owned()),
        };
        let context: BTreeMap<String, String> = member("context")
            .as_object()
            .unwrap_or_else(|| panic!("the context is not an object in {body}"))
            .iter()
            .map(|(key, value)| (key.clone(), text(value, key).to_owned()))
            .collect();
        PolicyInput {
            principal: principal(member("principal")),
            groups,
            tenant,
            action: Permission::parse(text(member("action"), "the action"))
                .expect("a valid action"),
            resource,
            context,
        }
    }

    #[async_trait]
    impl ScriptedEngine for PolicyServer {
        async fn answer_with(&self, answer: EngineAnswer) {
            *self.behaviour.lock().expect("behaviour") = behaviour(answer);
        }

        async fn questions(&self) -> Vec<PolicyInput> {
            self.asked()
                .iter()
                .map(|asked| {
                    assert_eq!(asked.request_line, "POST /v1/data/mcpgw/allow HTTP/1.1");
                    question(&asked.body)
                })
                .collect()
        }

        fn deadline(&self) -> Duration {
            DEADLINE
        }
    }

    async fn decider_and_engine() -> (OpaDecider, PolicyServer) {
        // Undefined until a case says otherwise.
        let engine = PolicyServer::start(behaviour(EngineAnswer::Undefined)).await;
        let mut settings = OpaSettings::new(&engine.base, "v1/data/mcpgw/allow");
        settings.timeout = DEADLINE;
        (OpaDecider::new(&settings).expect("settings"), engine)
    }

    mcpgw_testkit::policy_decider_contract_suite!(decider_and_engine().await);
}
