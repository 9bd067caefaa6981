//! End-to-end tests of the web console (`/ui/`) against the real binary.
//!
//! In a real browser (Debian's chromium, headless, driven by Selenium through
//! `tests/python/console_flows.py`): signing in each of the three ways (an API key, a local
//! user's password, single sign-on with a real OpenID provider), creating a server through the
//! form, starting it and watching its state and stderr change on the open page, calling a tool
//! from its form, approving a pending discovery, making and revoking a key, making, changing,
//! assigning, revoking and deleting a custom role, setting and clearing a tool access policy and
//! asking "why is this denied" before and after it, a viewer who sees no control (on the access
//! page neither) and whose forged posts are refused, and a post without the CSRF token. Every page
//! is checked with axe-core and at a phone's width, and saved as a screenshot under
//! `target/console-screenshots/`.
//!
//! On the wire: no console page or action is reachable without a session when authentication
//! is on; the session cookie's attributes and the pages' security headers; a session ends when
//! its key is revoked and when it signs out; the sign-in forms refuse posts that did not come
//! from the sign-in page; repeated wrong passwords lock the address out; the console can be
//! turned off; "why is this denied" finds the server behind a bare name (`tool_names: bare`) and
//! says that an external policy engine decides at call time, without asking it.
//!
//! Bad input tried: a wrong API key, a wrong password (repeatedly), a server id with a blank and
//! a `!`, forms without the CSRF token or the sign-in token, a forged session cookie, a revoked
//! key's session, `next` pointing at another site.

mod support;

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use support::browser::run_browser_scenario;
use support::{
    RunningGateway, cli_key, cookie_value, fixture_binary, fixture_server_yaml, gateway,
    raw_exchange,
};

const VIEWER: &str = "vera";
const VIEWER_PASSWORD: &str = "a long enough passphrase";

/// Runs `mcpgw auth ARGS --data-dir DATA_DIR` with `password` on stdin; fails on failure.
fn cli_with_password(data_dir: &Path, args: &[&str], password: &str) {
    let mut child = Command::new(support::gateway_binary())
        .arg("auth")
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{password}\n").as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "auth {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Makes a local user with `mcpgw auth create-user`.
fn cli_user(data_dir: &Path, name: &str, password: &str, role: &str) {
    cli_with_password(
        data_dir,
        &["create-user", "--name", name, "--role", role],
        password,
    );
}

/// Writes a discovered definition where the filesystem source looks.
fn write_definition(dir: &Path, name: &str) {
    let yaml = format!(
        "mode: subprocess\ncommand: [{}]\n",
        serde_json::to_string(&fixture_binary().display().to_string()).unwrap()
    );
    std::fs::write(dir.join(format!("{name}.yaml")), yaml).unwrap();
}

struct Console {
    gw: RunningGateway,
    admin_key: String,
    _discovered: tempfile::TempDir,
}

/// A gateway with authentication on, a fixture server `demo` in a group `pool`, a filesystem
/// discovery source
/// holding one pending definition `found`, an admin key, and a viewer user. `extra` is appended
/// to the configuration.
fn console_gateway(extra: &str) -> Console {
    let data = tempfile::tempdir().unwrap();
    let admin_key = cli_key(data.path(), "user:root", Some("admin"));
    cli_user(data.path(), VIEWER, VIEWER_PASSWORD, "viewer");
    let discovered = tempfile::tempdir().unwrap();
    write_definition(discovered.path(), "found");
    let yaml = format!(
        "auth:\n  enabled: true\n  role_assignments:\n    - {{principal: \"group:ops\", role: mcp_server_admin}}\n\
         mcp_servers:\n{}  pool:\n    mode: group\n    strategy: round_robin\n    min_healthy: 1\n    members: [{{id: demo, weight: 3}}]\n\
         discovery:\n  refresh_interval_s: 3600\n  sources:\n    - {{id: files, type: filesystem, mode: additive, config: {{path: \"{}\"}}}}\n\
         {extra}",
        fixture_server_yaml("demo", &[]),
        discovered.path().display()
    );
    let gw = gateway().data_dir(data).config(&yaml).start();
    Console {
        gw,
        admin_key,
        _discovered: discovered,
    }
}

impl Console {
    fn api(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nX-API-Key: {}\r\nConnection: close\r\n",
            self.gw.address(),
            self.admin_key
        );
        let body = body.map(Value::to_string).unwrap_or_default();
        if !body.is_empty() {
            request.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        request.push_str("\r\n");
        request.push_str(&body);
        let answer = raw_exchange(self.gw.address(), request.as_bytes());
        (
            answer.status,
            serde_json::from_str(&answer.body).unwrap_or(Value::Null),
        )
    }

    fn parameters(&self) -> Value {
        let (status, refused) = self.api(
            "POST",
            "/api/mcp_servers",
            Some(&json!({"mcp_server_id": "bad id!", "mode": "subprocess",
                         "command": [fixture_binary().display().to_string()]})),
        );
        assert_eq!(status, 422, "{refused}");
        json!({
            "base_url": self.gw.url(""),
            "admin_key": self.admin_key,
            "fixture": fixture_binary().display().to_string(),
            "pending": "found",
            "bad_id_message": refused["message"],
            "demo": "demo",
            "viewer_user": VIEWER,
            "viewer_password": VIEWER_PASSWORD,
        })
    }

    /// Waits until the gateway knows `server`'s tools (it learns them by starting it once).
    fn wait_tools(&self, server: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let (_, tools) = self.api("GET", &format!("/api/mcp_servers/{server}/tools"), None);
            if tools["tools"]
                .as_array()
                .is_some_and(|tools| !tools.is_empty())
            {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{server}'s tools never became known: {tools}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn wait_pending(&self, name: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let (_, pending) = self.api("GET", "/api/discovery/pending", None);
            if pending["pending"]
                .as_array()
                .is_some_and(|entries| entries.iter().any(|entry| entry["name"] == name))
            {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{name} never became pending: {pending}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn scenario(name: &str, parameters: &Value) -> Value {
    run_browser_scenario(
        "console_flows.py",
        &[name.to_owned(), parameters.to_string()],
        &[],
    )
}

#[test]
fn an_operator_runs_the_fleet_from_the_console_with_an_api_key() {
    let console = console_gateway("");
    console.wait_pending("found");
    let report = scenario("admin", &console.parameters());
    let checks = report["checks"].as_array().unwrap();
    assert!(checks.len() > 30, "{report}");
    // What the browser did is what the gateway did.
    let (_, made) = console.api("GET", "/api/mcp_servers/made", None);
    assert_eq!(made["state"], "ready", "{made}");
    let (_, found) = console.api("GET", "/api/mcp_servers/found", None);
    assert_eq!(found["mcp_server_id"], "found", "{found}");
}

#[test]
fn a_viewer_signed_in_with_a_password_can_change_nothing() {
    let console = console_gateway("");
    console.wait_tools("demo");
    let report = scenario("viewer", &console.parameters());
    assert!(report["ok"] == true, "{report}");
    let (_, demo) = console.api("GET", "/api/mcp_servers/demo", None);
    assert_eq!(
        demo["mcp_server_id"], "demo",
        "the forged delete changed nothing"
    );
}

#[test]
fn single_sign_on_with_a_real_openid_provider_opens_a_session_with_the_groups_roles() {
    let provider_dir = tempfile::tempdir().unwrap();
    let provider = support::peers::start_authorization_server(
        &json!({
            "accounts": {"alice": {"groups": ["ops"]}},
            "resources": [],
            "clients": [{
                "client_id": "mcpgw-console",
                "client_secret": "console-secret",
                "application_type": "native",
                "redirect_uris": ["http://127.0.0.1/ui/login/sso/callback"],
                "grant_types": ["authorization_code"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "client_secret_basic"
            }]
        }),
        provider_dir.path(),
    );
    let console = console_gateway(&format!(
        "console:\n  sso: {{issuer: \"{}\", client_id: mcpgw-console, client_secret: console-secret, scopes: [groups]}}\n",
        provider.url
    ));
    let mut parameters = console.parameters();
    parameters["sso_user"] = json!("alice");
    let report = scenario("sso", &parameters);
    assert!(report["ok"] == true, "{report}");
}

// --- on the wire ---------------------------------------------------------------------------------

/// One request to the console (see `support::console_request`).
fn ui(
    gw: &RunningGateway,
    method: &str,
    path: &str,
    cookies: &str,
    form: Option<&str>,
) -> support::RawAnswer {
    support::console_request(gw, method, path, cookies, form)
}

/// Every `Set-Cookie` of an answer.
fn set_cookies(answer: &support::RawAnswer) -> Vec<&str> {
    answer
        .headers
        .iter()
        .filter(|(name, _)| name == "set-cookie")
        .map(|(_, value)| value.as_str())
        .collect()
}

/// The sign-in token of the sign-in page: its cookie and the form field hold the same value.
fn login_token(gw: &RunningGateway) -> String {
    let page = ui(gw, "GET", "/ui/login", "", None);
    assert_eq!(page.status, 200, "{}", page.body);
    let token = cookie_value(&page, "mcpgw_login").expect("the sign-in page sets its token");
    assert!(
        page.body.contains(&format!("value=\"{token}\"")),
        "the form carries the token"
    );
    token
}

/// Posts the password sign-in form as the sign-in page would, going on to `/ui/servers`.
fn password_sign_in(gw: &RunningGateway, user: &str, password: &str) -> support::RawAnswer {
    let token = login_token(gw);
    ui(
        gw,
        "POST",
        "/ui/login/password",
        &format!("mcpgw_login={token}"),
        Some(&format!(
            "login_token={token}&next=%2Fui%2Fservers&user_name={user}&password={}",
            password.replace(' ', "+")
        )),
    )
}

/// Signs in with `key`; answers the session cookie's value.
fn key_session(gw: &RunningGateway, key: &str) -> String {
    let token = login_token(gw);
    let answer = ui(
        gw,
        "POST",
        "/ui/login/key",
        &format!("mcpgw_login={token}"),
        Some(&format!(
            "login_token={token}&next=%2Fui%2Fservers&api_key={key}"
        )),
    );
    assert_eq!(answer.status, 303, "{}", answer.body);
    assert_eq!(answer.header("location"), Some("/ui/servers"));
    cookie_value(&answer, "mcpgw_session").expect("a session cookie")
}

/// The pages and actions of the console, each with what reaching it without a session answers.
const PAGES: [&str; 10] = [
    "/ui/",
    "/ui/servers",
    "/ui/servers-rows",
    "/ui/new-server",
    "/ui/servers/demo",
    "/ui/servers/demo/live",
    "/ui/servers/demo/edit",
    "/ui/tools",
    "/ui/discovery",
    "/ui/access",
];
const ACTIONS: [&str; 15] = [
    "/ui/servers",
    "/ui/servers/demo",
    "/ui/servers/demo/start",
    "/ui/servers/demo/delete",
    "/ui/tools/demo__echo",
    "/ui/discovery/found/approve",
    "/ui/access/keys",
    "/ui/access/keys/key_0000000000000000/revoke",
    "/ui/access/assignments",
    "/ui/access/assignments/revoke",
    "/ui/access/roles",
    "/ui/access/roles/viewer",
    "/ui/access/roles/viewer/delete",
    "/ui/access/policies",
    "/ui/access/policies/delete",
];

#[test]
fn no_console_page_or_action_is_reachable_without_a_session() {
    let console = console_gateway("");
    let gw = &console.gw;
    // Bad input: no cookie, and a session cookie nobody issued.
    for cookies in [
        "",
        "mcpgw_session=forged-session-token-0123456789abcdefghijklmnop",
    ] {
        for page in PAGES {
            let answer = ui(gw, "GET", page, cookies, None);
            assert_eq!(
                answer.status, 303,
                "GET {page} ({cookies}): {}",
                answer.body
            );
            let location = answer.header("location").unwrap_or_default();
            assert!(
                location.starts_with("/ui/login?next=/ui/"),
                "GET {page} goes to sign in and comes back: {location}"
            );
        }
        for action in ACTIONS {
            let answer = ui(gw, "POST", action, cookies, Some("csrf_token=x"));
            assert_eq!(
                answer.status, 401,
                "POST {action} ({cookies}): {}",
                answer.body
            );
            assert!(
                answer.body.contains("AuthenticationError"),
                "{}",
                answer.body
            );
        }
    }
    // Bad input that cannot even be read gets the same answer: the session is looked at first.
    let repeated = ui(gw, "GET", "/ui/servers?state=a&state=b&page=x", "", None);
    assert_eq!(repeated.status, 303, "{}", repeated.body);
    let request = format!(
        "POST /ui/access/keys HTTP/1.1\r\nHost: {}\r\nContent-Type: text/plain\r\n\
         Content-Length: 3\r\nConnection: close\r\n\r\nabc",
        gw.address()
    );
    let plain = raw_exchange(gw.address(), request.as_bytes());
    assert_eq!(plain.status, 401, "{}", plain.body);
    // The sign-in page and the assets are public.
    assert_eq!(ui(gw, "GET", "/ui/login", "", None).status, 200);
    assert_eq!(
        ui(gw, "GET", "/ui/assets/htmx.min.js", "", None).status,
        200
    );
    // And the API did not change: the demo server is still there, nothing was approved.
    assert_eq!(console.api("GET", "/api/mcp_servers/demo", None).0, 200);
    assert_eq!(console.api("GET", "/api/mcp_servers/found", None).0, 404);
}

#[test]
fn a_session_is_a_strict_http_only_cookie_and_ends_with_its_key_or_on_sign_out() {
    let console = console_gateway("");
    let gw = &console.gw;
    let key = cli_key_through_api(&console);
    let session = key_session(gw, &key.1);
    let page = ui(
        gw,
        "GET",
        "/ui/servers",
        &format!("mcpgw_session={session}"),
        None,
    );
    assert_eq!(page.status, 200, "{}", page.body);
    let login = ui(gw, "GET", "/ui/login", "", None);
    let cookie = set_cookies(&ui(
        gw,
        "POST",
        "/ui/login/key",
        &format!(
            "mcpgw_login={}",
            cookie_value(&login, "mcpgw_login").unwrap()
        ),
        Some(&format!(
            "login_token={}&api_key={}",
            cookie_value(&login, "mcpgw_login").unwrap(),
            key.1
        )),
    ))
    .into_iter()
    .find(|header| header.starts_with("mcpgw_session="))
    .unwrap()
    .to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie} lacks {attribute}");
    }
    assert!(
        !cookie.contains("Secure"),
        "plain HTTP on loopback: {cookie}"
    );
    let policy = page.header("content-security-policy").unwrap_or_default();
    for directive in [
        "script-src 'self'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ] {
        assert!(policy.contains(directive), "{policy} lacks {directive}");
    }
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert_eq!(page.header("cache-control"), Some("no-store"));

    // Revoking the key ends the session at once.
    let (status, revoked) = console.api("DELETE", &format!("/api/auth/keys/{}", key.0), None);
    assert_eq!(status, 200, "{revoked}");
    let after = ui(
        gw,
        "GET",
        "/ui/servers",
        &format!("mcpgw_session={session}"),
        None,
    );
    assert_eq!(after.status, 303, "a revoked key's session is over");

    // Signing out ends the session on the server, not only in the browser.
    let session = key_session(gw, &console.admin_key);
    let cookies = format!("mcpgw_session={session}");
    let page = ui(gw, "GET", "/ui/servers", &cookies, None);
    let csrf = page
        .body
        .split("data-csrf=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    // Bad input: signing out without the CSRF token changes nothing.
    assert_eq!(
        ui(gw, "POST", "/ui/logout", &cookies, Some("csrf_token=wrong")).status,
        403
    );
    assert_eq!(ui(gw, "GET", "/ui/servers", &cookies, None).status, 200);
    let out = ui(
        gw,
        "POST",
        "/ui/logout",
        &cookies,
        Some(&format!("csrf_token={csrf}")),
    );
    assert_eq!(out.status, 303);
    assert_eq!(ui(gw, "GET", "/ui/servers", &cookies, None).status, 303);
}

/// A key for `user:temp` with the developer role, made over the API: (key id, raw key).
fn cli_key_through_api(console: &Console) -> (String, String) {
    let (status, made) = console.api(
        "POST",
        "/api/auth/keys",
        Some(&json!({"principal": "user:temp", "name": "temp", "role": "developer"})),
    );
    assert_eq!(status, 201, "{made}");
    (
        made["key_id"].as_str().unwrap().to_owned(),
        made["key"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn the_sign_in_forms_refuse_what_the_sign_in_page_did_not_send() {
    let console = console_gateway("");
    let gw = &console.gw;
    let token = login_token(gw);
    // Bad input: no token, a token without its cookie, a cookie and a different token.
    for (cookies, form) in [
        (String::new(), format!("api_key={}", console.admin_key)),
        (
            String::new(),
            format!("login_token={token}&api_key={}", console.admin_key),
        ),
        (
            format!("mcpgw_login={token}"),
            format!("login_token=other&api_key={}", console.admin_key),
        ),
    ] {
        let answer = ui(gw, "POST", "/ui/login/key", &cookies, Some(&form));
        assert_eq!(answer.status, 403, "{form}: {}", answer.body);
        assert!(cookie_value(&answer, "mcpgw_session").is_none());
    }
    // `next` may only lead into the console.
    let token = login_token(gw);
    for next in [
        "https%3A%2F%2Fevil.example%2F",
        "%2F%2Fevil.example",
        "%2Fui%2F%5Cevil",
    ] {
        let answer = ui(
            gw,
            "POST",
            "/ui/login/key",
            &format!("mcpgw_login={token}"),
            Some(&format!(
                "login_token={token}&next={next}&api_key={}",
                console.admin_key
            )),
        );
        assert_eq!(answer.status, 303, "{}", answer.body);
        assert_eq!(answer.header("location"), Some("/ui/"), "next={next}");
    }
}

#[test]
fn repeated_wrong_passwords_lock_the_address_out() {
    let console = console_gateway("");
    let gw = &console.gw;
    let mut last = None;
    // Bad input: the viewer's name with wrong passwords, until the lockout answers.
    for attempt in 0..20 {
        let answer = password_sign_in(gw, VIEWER, &format!("wrong-password-{attempt}"));
        assert!(cookie_value(&answer, "mcpgw_session").is_none());
        if answer.status == 429 {
            last = Some(answer);
            break;
        }
        assert_eq!(answer.status, 401, "attempt {attempt}: {}", answer.body);
        assert!(
            answer
                .body
                .to_lowercase()
                .contains("invalid user name or password"),
            "{}",
            answer.body
        );
    }
    let locked = last.expect("the address is locked out after repeated failures");
    assert!(locked.header("retry-after").is_some());
    // Even the right password waits for the lockout to end.
    let answer = password_sign_in(gw, VIEWER, VIEWER_PASSWORD);
    assert_eq!(answer.status, 429, "{}", answer.body);
}

#[test]
fn the_console_can_be_turned_off_and_opens_without_signing_in_when_auth_is_off() {
    let off = gateway()
        .config("console: {enabled: false}\nmcp_servers: {}\n")
        .start();
    for page in ["/ui/", "/ui/servers", "/ui/login", "/ui/assets/console.css"] {
        let answer = ui(&off, "GET", page, "", None);
        assert_eq!(answer.status, 404, "{page}: {}", answer.body);
    }
    let open = gateway()
        .config(&format!(
            "mcp_servers:\n{}",
            fixture_server_yaml("demo", &[])
        ))
        .start();
    let page = ui(&open, "GET", "/ui/servers", "", None);
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("data-server=\"demo\""), "{}", page.body);
    // Bad input: a form without any token is still refused from another site by the Origin
    // check, as the API is.
    let request = format!(
        "POST /ui/servers/demo/stop HTTP/1.1\r\nHost: {}\r\nOrigin: https://evil.example\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        open.address()
    );
    let answer = raw_exchange(open.address(), request.as_bytes());
    assert_eq!(answer.status, 403, "{}", answer.body);
}

#[test]
fn a_password_session_ends_when_the_users_password_changes() {
    let console = console_gateway("");
    let gw = &console.gw;
    let answer = password_sign_in(gw, VIEWER, VIEWER_PASSWORD);
    assert_eq!(answer.status, 303, "{}", answer.body);
    let cookies = format!(
        "mcpgw_session={}",
        cookie_value(&answer, "mcpgw_session").unwrap()
    );
    assert_eq!(ui(gw, "GET", "/ui/servers", &cookies, None).status, 200);
    // The password is changed from the command line, by another process on the same store.
    std::thread::sleep(Duration::from_millis(20));
    cli_with_password(
        gw.data_dir.path(),
        &["set-password", "--name", VIEWER],
        "another long passphrase",
    );
    let after = ui(gw, "GET", "/ui/servers", &cookies, None);
    assert_eq!(after.status, 303, "the old password's session is over");
}

#[test]
fn behind_a_tls_proxy_the_cookies_are_secure() {
    let console = console_gateway("");
    let gw = &console.gw;
    // Without the proxy's word the gateway speaks plain HTTP; a client's own
    // `X-Forwarded-Proto` is not believed unless it comes from a trusted proxy.
    let plain = login_with_headers(gw, "X-Forwarded-Proto: https\r\n");
    assert!(!plain.contains("Secure"), "{plain}");
    let trusting = gateway()
        .data_dir(tempfile::tempdir().unwrap())
        .config(&format!(
            "auth:\n  enabled: true\n  trusted_proxies: [127.0.0.1]\nmcp_servers:\n{}",
            fixture_server_yaml("demo", &[])
        ))
        .start();
    let secure = login_with_headers(&trusting, "X-Forwarded-Proto: https\r\n");
    assert!(secure.contains("Secure"), "{secure}");
    assert!(
        secure.contains("HttpOnly") && secure.contains("SameSite=Strict"),
        "{secure}"
    );
}

/// The sign-in token cookie the sign-in page sets when asked with `headers`.
fn login_with_headers(gw: &RunningGateway, headers: &str) -> String {
    let request = format!(
        "GET /ui/login HTTP/1.1\r\nHost: {}\r\n{headers}Connection: close\r\n\r\n",
        gw.address()
    );
    let answer = raw_exchange(gw.address(), request.as_bytes());
    assert_eq!(answer.status, 200, "{}", answer.body);
    set_cookies(&answer)
        .into_iter()
        .find(|cookie| cookie.starts_with("mcpgw_login="))
        .unwrap()
        .to_owned()
}

#[test]
fn each_role_starts_at_a_page_it_may_read_and_roles_made_from_the_command_line_apply() {
    let console = console_gateway("");
    let gw = &console.gw;
    // An operator may not read the metrics or list servers: the console starts it elsewhere.
    let (status, made) = console.api(
        "POST",
        "/api/auth/keys",
        Some(&json!({"principal": "user:op", "name": "op", "role": "operator"})),
    );
    assert_eq!(status, 201, "{made}");
    let cookies = format!(
        "mcpgw_session={}",
        key_session(gw, made["key"].as_str().unwrap())
    );
    let start = ui(gw, "GET", "/ui/", &cookies, None);
    assert_eq!(start.status, 303, "{}", start.body);
    let first = start.header("location").unwrap().to_owned();
    assert_ne!(first, "/ui/servers", "an operator may not list servers");
    assert_eq!(ui(gw, "GET", &first, &cookies, None).status, 200, "{first}");

    // A user made while the gateway runs, with a role, gets the role within seconds.
    cli_user(
        gw.data_dir.path(),
        "late",
        "another long passphrase",
        "viewer",
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let answer = password_sign_in(gw, "late", "another long passphrase");
        assert_eq!(answer.status, 303, "{}", answer.body);
        let cookies = format!(
            "mcpgw_session={}",
            cookie_value(&answer, "mcpgw_session").unwrap()
        );
        if ui(gw, "GET", "/ui/servers", &cookies, None).status == 200 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the role assigned from the command line never applied"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The CSRF token of the console pages `cookies` opens.
fn page_csrf(gw: &RunningGateway, cookies: &str) -> String {
    let page = ui(gw, "GET", "/ui/access", cookies, None);
    assert_eq!(page.status, 200, "{}", page.body);
    page.body
        .split("data-csrf=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned()
}

#[test]
fn why_is_this_denied_finds_the_server_behind_a_bare_name() {
    // A gateway that lists a tool only one server exposes under its bare name.
    let data = tempfile::tempdir().unwrap();
    let admin_key = cli_key(data.path(), "user:root", Some("admin"));
    let yaml = format!(
        "auth:\n  enabled: true\ntool_names: bare\nmcp_servers:\n{}",
        fixture_server_yaml("solo", &[])
    );
    let console = Console {
        gw: gateway().data_dir(data).config(&yaml).start(),
        admin_key,
        _discovered: tempfile::tempdir().unwrap(),
    };
    let gw = &console.gw;
    console.wait_tools("solo");
    let cookies = format!("mcpgw_session={}", key_session(gw, &console.admin_key));
    let ask = |query: &str| ui(gw, "GET", &format!("/ui/access?{query}"), &cookies, None);

    // The bare name is `solo`'s tool, decided on its path: a viewer holds no tool:invoke.
    let (status, _) = console.api(
        "POST",
        "/api/auth/roles/assign",
        Some(&json!({"principal": "user:vera", "role": "viewer"})),
    );
    assert_eq!(status, 201);
    let answer = ask("principal=user%3Avera&tool=echo");
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(
        answer
            .body
            .contains("is the tool `echo` of the server `solo`"),
        "{}",
        answer.body
    );
    assert!(answer.body.contains("`provider/solo`"), "{}", answer.body);
    assert!(answer.body.contains("tool:invoke"), "{}", answer.body);
    // Without OPA configured, the answer does not speak of it.
    assert!(!answer.body.contains("why-external"), "{}", answer.body);

    // A policy on the server that denies the principal is named for the bare name too.
    let (status, _) = console.api(
        "POST",
        "/api/auth/roles/assign",
        Some(&json!({"principal": "user:vera", "role": "developer"})),
    );
    assert_eq!(status, 201);
    let allowed = ask("principal=user%3Avera&tool=echo");
    assert!(
        allowed
            .body
            .contains("allowed: the role `developer` grants it"),
        "{}",
        allowed.body
    );
    let csrf = page_csrf(gw, &cookies);
    let set = ui(
        gw,
        "POST",
        "/ui/access/policies",
        &cookies,
        Some(&format!(
            "csrf_token={csrf}&scope=provider&target_id=solo&allow_list=&deny_list=user%3Avera"
        )),
    );
    assert_eq!(set.status, 303, "{}", set.body);
    for query in [
        "principal=user%3Avera&tool=echo",
        "principal=user%3Avera&tool=solo__echo",
    ] {
        let denied = ask(query);
        assert_eq!(denied.status, 200, "{}", denied.body);
        assert!(
            denied
                .body
                .contains("tool access policy provider/solo denies user:vera"),
            "{query}: {}",
            denied.body
        );
    }

    // Bad input: a name no client sees, a prefix that names nothing, a tool without a
    // principal, a principal that does not parse. Each gets its message on the page, never a 500.
    for (query, status, message) in [
        (
            "principal=user%3Avera&tool=no_such_tool",
            404,
            "no client sees a tool `no_such_tool`",
        ),
        (
            "principal=user%3Avera&tool=ghost__echo",
            404,
            "no client sees a tool `ghost__echo`",
        ),
        ("groups=ops&tool=echo", 422, "principal: is required"),
        ("principal=alice&tool=echo", 422, "principal:"),
    ] {
        let answer = ask(query);
        assert_eq!(answer.status, status, "{query}: {}", answer.body);
        assert!(answer.body.contains(message), "{query}: {}", answer.body);
    }
}

/// An external policy engine that allows everything and keeps the inputs it was asked about.
fn allowing_policy_engine() -> (String, std::sync::Arc<std::sync::Mutex<Vec<Value>>>) {
    use std::io::{BufRead as _, BufReader, Read as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let inputs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = inputs.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
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
            if reader.read_exact(&mut body).is_ok()
                && let Ok(input) = serde_json::from_slice::<Value>(&body)
            {
                kept.lock().unwrap().push(input);
            }
            let answer = r#"{"result": true}"#;
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    (url, inputs)
}

#[test]
fn why_is_this_denied_says_that_the_external_policy_engine_decides_at_call_time() {
    let (opa, inputs) = allowing_policy_engine();
    let data = tempfile::tempdir().unwrap();
    let admin_key = cli_key(data.path(), "user:root", Some("admin"));
    let yaml = format!(
        "auth:\n  enabled: true\n  opa:\n    enabled: true\n    url: \"{opa}\"\n    \
         policy_path: v1/data/mcpgw/allow\nmcp_servers:\n{}",
        fixture_server_yaml("solo", &[])
    );
    let gw = gateway().data_dir(data).config(&yaml).start();
    let cookies = format!("mcpgw_session={}", key_session(&gw, &admin_key));
    let ask = |principal: &str| {
        ui(
            &gw,
            "GET",
            &format!("/ui/access?principal={principal}&tool=solo__echo"),
            &cookies,
            None,
        )
    };
    // Denied by the roles: the engine is not asked.
    let denied = ask("user%3Adev");
    assert_eq!(denied.status, 200, "{}", denied.body);
    assert!(
        denied
            .body
            .contains("holds no role that grants tool:invoke"),
        "{}",
        denied.body
    );
    assert!(
        denied
            .body
            .contains("is not asked: the roles and tool access policies deny first"),
        "{}",
        denied.body
    );
    // Allowed by the roles: the engine decides too, at call time. Bad input: a scope with
    // blanks around it, which the form drops.
    let csrf = page_csrf(&gw, &cookies);
    let assigned = ui(
        &gw,
        "POST",
        "/ui/access/assignments",
        &cookies,
        Some(&format!(
            "csrf_token={csrf}&principal=user%3Adev&role=developer&scope=+global+"
        )),
    );
    assert_eq!(assigned.status, 303, "{}", assigned.body);
    let allowed = ask("user%3Adev");
    assert_eq!(allowed.status, 200, "{}", allowed.body);
    assert!(
        allowed
            .body
            .contains("allowed: the role `developer` grants it"),
        "{}",
        allowed.body
    );
    assert!(
        allowed.body.contains(
            "The external policy engine (OPA, auth.opa) decides too: it is asked at call time"
        ),
        "{}",
        allowed.body
    );
    // The page asked the engine about the console's own routes, never about the tool call.
    let asked = inputs.lock().unwrap();
    assert!(!asked.is_empty(), "the console's actions ask the engine");
    assert!(
        asked
            .iter()
            .all(|input| input["input"]["action"] != "tool:invoke"),
        "{asked:?}"
    );
}
