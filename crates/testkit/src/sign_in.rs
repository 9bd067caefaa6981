//! What every [`SignInProvider`] promises, as tests that every implementation must pass, and an
//! in-memory provider for tests of the code that uses the port.
//!
//! A sign-in needs an OpenID provider and a browser that signs in at its login page, which the
//! suite cannot know: it works through a [`SignInHarness`] that the adapter's tests write once.
//! The harness makes the provider under test, names the accounts its OpenID provider knows, and
//! plays the browser: given an authorization address and an account, it signs in and answers
//! the query parameters the browser was sent back to the redirect address with. The adapter
//! crate then runs the whole suite with one line in its tests:
//!
//! ```text
//! mcpgw_testkit::sign_in_provider_contract_suite!(MyHarness::start().await);
//! ```
//!
//! Each case is also a public `async fn` taking `&dyn SignInHarness`. The cases check what the
//! port's documentation promises:
//! - a sign-in answers the account's subject, groups and tenant, no scopes, and an expiry
//!   ahead of the moment it began;
//! - the authorization address asks for a code with a PKCE challenge (S256 of the pending
//!   verifier, which never travels in it), the pending state and nonce, and the redirect
//!   address;
//! - each `begin` answers a state, a nonce and a PKCE verifier of its own, long enough not to
//!   be guessed, the verifier in the form PKCE demands;
//! - a returned state other than the pending one is [`SignInError::StateMismatch`] and leaves
//!   the code unspent;
//! - a code is good for one sign-in: used again, made up or altered it is
//!   [`SignInError::CodeRejected`], and so is a code brought back with another sign-in's PKCE
//!   verifier or another redirect address; an ID token for another sign-in's nonce is
//!   [`SignInError::InvalidIdToken`];
//! - every refusal is of kind `Unauthenticated` and its message repeats none of the sign-in's
//!   secrets (state, nonce, verifier, code).
//!
//! [`FakeSignInProvider`] passes the suite; it is also a harness of its own, so it serves as
//! both the provider and its login page in tests of the console.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use mcpgw_authz::{PendingSignIn, SignInError, SignInProvider, SignInStart, VerifiedClaims};
use mcpgw_core::{ErrorKind, Timestamp};
use sha2::{Digest, Sha256};

/// The longest a call of the provider or of the harness's browser may take in the suite.
pub const CALL_BOUND: Duration = Duration::from_secs(30);

/// The fewest characters a state or a nonce may have: a shorter one can be guessed.
pub const SECRET_MIN_CHARS: usize = 16;

/// How many sign-ins the freshness case begins.
const FRESH_BEGINS: usize = 4;

/// Secrets shorter than this are not looked for in messages: they could appear by chance.
const SECRET_SEARCH_MIN_CHARS: usize = 8;

/// An account the harness's browser can sign in as, and the claims the provider must answer
/// for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignInAccount {
    /// What the browser signs in with at the OpenID provider.
    pub login: String,
    /// The subject the provider must answer.
    pub subject: String,
    /// The groups the provider must answer, in this order; empty for an account without any.
    pub groups: Vec<String>,
    /// The tenant the provider must answer.
    pub tenant: Option<String>,
}

impl SignInAccount {
    /// An account without groups or tenant whose login is also its subject.
    pub fn new(name: impl Into<String>) -> Self {
        let name = name.into();
        Self {
            login: name.clone(),
            subject: name,
            groups: Vec::new(),
            tenant: None,
        }
    }

    /// The same account in `groups`.
    pub fn in_groups<I, S>(mut self, groups: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.groups = groups.into_iter().map(Into::into).collect();
        self
    }

    /// The same account of `tenant`.
    pub fn of_tenant(mut self, tenant: impl Into<String>) -> Self {
        self.tenant = Some(tenant.into());
        self
    }
}

/// The OpenID provider the suite signs in at and the browser that does it, under the adapter's
/// tests' control.
#[async_trait]
pub trait SignInHarness: Send + Sync {
    /// The provider under test, set up to sign in at the harness's OpenID provider. Each case
    /// asks for it once.
    fn provider(&self) -> Arc<dyn SignInProvider>;

    /// A redirect address the OpenID provider accepts for the provider's client (the console's
    /// callback address). Nothing needs to listen there: the browser stops at the redirect.
    fn redirect_uri(&self) -> String;

    /// The accounts [`authorize`](Self::authorize) can sign in as, with the claims the provider
    /// must answer for each. At least one; one with groups and one without show that groups
    /// are mapped and that no groups are none.
    fn accounts(&self) -> Vec<SignInAccount>;

    /// Plays an operator's browser with a fresh session: opens `authorize_url`, signs in as
    /// `account`, and answers the query parameters of the address the OpenID provider sends the
    /// browser back to (`state` and `code`, or `state`, `error` and `error_description`). An
    /// `Err` says why the browser never came back.
    async fn authorize(
        &self,
        authorize_url: &str,
        account: &SignInAccount,
    ) -> Result<BTreeMap<String, String>, String>;
}

/// Expands to one `#[tokio::test]` per case of the [`SignInProvider`] contract, each running
/// against a fresh harness made by evaluating `$make_harness` inside the test.
///
/// `$make_harness` is any expression of a type that implements [`SignInHarness`]; it is
/// evaluated in an `async fn`, so it may `.await`. The invoking crate needs `tokio` with the
/// `macros` and `rt` features among its dev-dependencies. The test functions are named after
/// the cases and defined in the invoking module: to run the suite against two providers in one
/// crate, invoke it in two modules.
#[macro_export]
macro_rules! sign_in_provider_contract_suite {
    ($make_harness:expr $(,)?) => {
        $crate::__sign_in_provider_contract_case!(
            $make_harness,
            each_account_signs_in_with_its_claims
        );
        $crate::__sign_in_provider_contract_case!(
            $make_harness,
            the_authorize_url_carries_the_sign_ins_parameters
        );
        $crate::__sign_in_provider_contract_case!($make_harness, each_begin_is_fresh);
        $crate::__sign_in_provider_contract_case!(
            $make_harness,
            a_tampered_state_is_refused_without_spending_the_code
        );
        $crate::__sign_in_provider_contract_case!($make_harness, a_code_is_good_for_one_sign_in);
        $crate::__sign_in_provider_contract_case!($make_harness, a_forged_code_is_refused);
        $crate::__sign_in_provider_contract_case!(
            $make_harness,
            a_code_is_bound_to_its_sign_ins_verifier
        );
        $crate::__sign_in_provider_contract_case!(
            $make_harness,
            an_id_token_is_bound_to_its_sign_ins_nonce
        );
        $crate::__sign_in_provider_contract_case!(
            $make_harness,
            a_code_is_bound_to_its_redirect_address
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __sign_in_provider_contract_case {
    ($make_harness:expr, $case:ident) => {
        #[tokio::test]
        async fn $case() {
            let harness = $make_harness;
            $crate::sign_in::$case(&harness).await;
        }
    };
}

// ----- helpers ------------------------------------------------------------------------------

/// The wall clock as a [`Timestamp`].
fn wall_clock() -> Timestamp {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    Timestamp::from_unix_micros(i64::try_from(since_epoch.as_micros()).unwrap_or(i64::MAX))
}

/// The PKCE S256 challenge of `verifier`: its SHA-256 in base64url without padding.
fn s256_challenge(verifier: &str) -> String {
    base64url(&Sha256::digest(verifier.as_bytes()))
}

/// Base64url without padding.
fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut text = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let byte = |index: usize| u32::from(chunk.get(index).copied().unwrap_or(0));
        let group = (byte(0) << 16) | (byte(1) << 8) | byte(2);
        for position in 0..=chunk.len() {
            let sextet = (group >> (18 - 6 * position)) & 0x3f;
            text.push(char::from(ALPHABET[sextet as usize]));
        }
    }
    text
}

/// Whether `byte` may appear unescaped in a query value (and in a PKCE verifier).
fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

fn percent_encode(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if is_unreserved(byte) {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// One name or value of a query string: `+` is a space, `%XX` a byte, and the bytes UTF-8.
fn percent_decode(raw: &str) -> Result<String, String> {
    let bytes = raw.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'+' => decoded.push(b' '),
            b'%' => {
                let hex = bytes
                    .get(index + 1..index + 3)
                    .filter(|hex| hex.iter().all(u8::is_ascii_hexdigit))
                    .ok_or_else(|| {
                        format!("`{raw}` holds a `%` that two hexadecimal digits do not follow")
                    })?;
                let digit = |at: usize| match hex[at] {
                    digit @ b'0'..=b'9' => digit - b'0',
                    letter => (letter | 0x20) - b'a' + 10,
                };
                decoded.push(digit(0) * 16 + digit(1));
                index += 2;
            }
            byte => decoded.push(byte),
        }
        index += 1;
    }
    String::from_utf8(decoded).map_err(|_| format!("`{raw}` does not decode to UTF-8 text"))
}

/// The query parameters of `url`; a parameter named twice is an error.
fn query_parameters(url: &str) -> Result<BTreeMap<String, String>, String> {
    let without_fragment = url.split('#').next().unwrap_or(url);
    let Some((_, query)) = without_fragment.split_once('?') else {
        return Err(format!("`{url}` has no query"));
    };
    let mut parameters = BTreeMap::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let name = percent_decode(name)?;
        if parameters
            .insert(name.clone(), percent_decode(value)?)
            .is_some()
        {
            return Err(format!("`{url}` names the parameter `{name}` twice"));
        }
    }
    Ok(parameters)
}

/// `future`, or a failed case when it takes longer than [`CALL_BOUND`].
async fn bounded<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(CALL_BOUND, future)
        .await
        .unwrap_or_else(|_| panic!("{what} took longer than {CALL_BOUND:?}"))
}

async fn begin(provider: &dyn SignInProvider, redirect_uri: &str) -> SignInStart {
    bounded("begin", provider.begin(redirect_uri))
        .await
        .unwrap_or_else(|error| {
            panic!("a sign-in returning to {redirect_uri} cannot begin: {error}")
        })
}

async fn finish(
    provider: &dyn SignInProvider,
    pending: &PendingSignIn,
    returned_state: &str,
    code: &str,
) -> Result<VerifiedClaims, SignInError> {
    bounded("finish", provider.finish(pending, returned_state, code)).await
}

/// The first account of the harness.
fn first_account(harness: &dyn SignInHarness) -> SignInAccount {
    harness
        .accounts()
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("the harness names no account to sign in as"))
}

/// What the browser came back with from a sign-in that the provider granted.
struct Returned {
    state: String,
    code: String,
}

/// Sends the harness's browser to `start`'s authorization address as `account`, and answers
/// the state and code it comes back with.
async fn come_back(
    harness: &dyn SignInHarness,
    start: &SignInStart,
    account: &SignInAccount,
) -> Returned {
    let login = &account.login;
    let mut query = bounded(
        "the browser",
        harness.authorize(&start.authorize_url, account),
    )
    .await
    .unwrap_or_else(|problem| panic!("the browser signing in as {login} failed: {problem}"));
    let Some(code) = query.remove("code") else {
        panic!("the provider sent {login}'s browser back without a code: {query:?}");
    };
    let state = query
        .remove("state")
        .unwrap_or_else(|| panic!("the provider sent {login}'s browser back without a state"));
    Returned { state, code }
}

/// Begins a sign-in at the harness's redirect address and brings the browser back as
/// `account`.
async fn signed_in_at_the_provider(
    harness: &dyn SignInHarness,
    provider: &dyn SignInProvider,
    account: &SignInAccount,
) -> (SignInStart, Returned) {
    let start = begin(provider, &harness.redirect_uri()).await;
    let returned = come_back(harness, &start, account).await;
    (start, returned)
}

/// Checks that `outcome` is a refusal that `is_expected` accepts, of kind `Unauthenticated`,
/// whose message and debug output repeat none of `secrets`; answers the error.
fn refusal(
    outcome: Result<VerifiedClaims, SignInError>,
    expected: &str,
    is_expected: impl Fn(&SignInError) -> bool,
    secrets: &[&str],
    bad_input: &str,
) -> SignInError {
    let error = match outcome {
        Ok(claims) => panic!("{bad_input} was accepted as `{}`", claims.subject),
        Err(error) => error,
    };
    assert!(
        is_expected(&error),
        "{bad_input} must be {expected}, not: {error:?}"
    );
    assert_eq!(
        error.kind(),
        ErrorKind::Unauthenticated,
        "{bad_input}: {error}"
    );
    let message = error.to_string();
    let debug = format!("{error:?}");
    for secret in secrets
        .iter()
        .filter(|secret| secret.chars().count() >= SECRET_SEARCH_MIN_CHARS)
    {
        assert!(
            !message.contains(secret) && !debug.contains(secret),
            "the refusal of {bad_input} repeats a secret of the sign-in: {message}"
        );
    }
    error
}

/// `text` with its last character replaced by another.
fn altered(text: &str) -> String {
    let mut altered = text.to_owned();
    let last = altered.pop().unwrap_or('A');
    altered.push(if last == 'A' { 'B' } else { 'A' });
    altered
}

// ----- the contract cases -------------------------------------------------------------------

/// Every account signs in with its subject, groups and tenant, no scopes, and an expiry ahead
/// of the moment its sign-in began.
pub async fn each_account_signs_in_with_its_claims(harness: &dyn SignInHarness) {
    let provider = harness.provider();
    let accounts = harness.accounts();
    assert!(
        !accounts.is_empty(),
        "the harness names no account to sign in as"
    );
    for account in &accounts {
        let login = &account.login;
        let began = wall_clock();
        let (start, returned) = signed_in_at_the_provider(harness, &*provider, account).await;
        let claims = finish(&*provider, &start.pending, &returned.state, &returned.code)
            .await
            .unwrap_or_else(|error| panic!("{login}'s sign-in failed: {error}"));
        assert_eq!(claims.subject, account.subject, "{login}'s subject");
        assert_eq!(claims.groups, account.groups, "{login}'s groups");
        assert_eq!(claims.tenant, account.tenant, "{login}'s tenant");
        assert!(
            claims.scopes.is_none(),
            "{login}'s sign-in carries scopes; an operator is judged by roles alone"
        );
        assert!(
            claims.expires_at > began,
            "{login}'s sign-in expired at {:?}, before it began at {began:?}",
            claims.expires_at
        );
    }
}

/// The authorization address asks for a code, with the S256 challenge of the pending verifier
/// (which it does not carry), the pending state and nonce, the redirect address, the `openid`
/// scope and a client id.
pub async fn the_authorize_url_carries_the_sign_ins_parameters(harness: &dyn SignInHarness) {
    let provider = harness.provider();
    let redirect_uri = harness.redirect_uri();
    let start = begin(&*provider, &redirect_uri).await;
    let url = &start.authorize_url;
    let pending = &start.pending;
    assert!(
        url.starts_with("https://") || url.starts_with("http://"),
        "the authorization address is no web address: {url}"
    );
    let query = query_parameters(url)
        .unwrap_or_else(|problem| panic!("the authorization address cannot be read: {problem}"));
    let parameter = |name: &str| {
        query
            .get(name)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("the authorization address has no `{name}`: {url}"))
    };
    assert_eq!(parameter("response_type"), "code");
    assert_eq!(parameter("code_challenge_method"), "S256");
    assert_eq!(
        parameter("code_challenge"),
        s256_challenge(&pending.pkce_verifier),
        "the challenge is not the S256 of the pending verifier"
    );
    assert_eq!(parameter("state"), pending.state, "the state");
    assert_eq!(parameter("nonce"), pending.nonce, "the nonce");
    assert_eq!(parameter("redirect_uri"), redirect_uri);
    assert_eq!(pending.redirect_uri, redirect_uri);
    assert!(
        parameter("scope").split(' ').any(|scope| scope == "openid"),
        "the scopes lack `openid`: {url}"
    );
    assert!(!parameter("client_id").is_empty(), "an empty client id");
    assert!(
        !url.contains(&pending.pkce_verifier),
        "the PKCE verifier travels in the authorization address"
    );
}

/// Each `begin` answers a state, a nonce and a PKCE verifier no other sign-in has, none of
/// them serving twice in one sign-in; states and nonces are at least [`SECRET_MIN_CHARS`]
/// long, verifiers 43 to 128 letters, digits and `-._~`.
pub async fn each_begin_is_fresh(harness: &dyn SignInHarness) {
    let provider = harness.provider();
    let redirect_uri = harness.redirect_uri();
    let mut seen = HashSet::new();
    for round in 0..FRESH_BEGINS {
        let pending = begin(&*provider, &redirect_uri).await.pending;
        for (what, value) in [("state", &pending.state), ("nonce", &pending.nonce)] {
            assert!(
                value.chars().count() >= SECRET_MIN_CHARS,
                "sign-in {round}: a {what} of {} characters can be guessed",
                value.chars().count()
            );
        }
        let verifier = &pending.pkce_verifier;
        assert!(
            (43..=128).contains(&verifier.len()) && verifier.bytes().all(is_unreserved),
            "sign-in {round}: a PKCE verifier must be 43 to 128 letters, digits and `-._~` \
             ({} bytes)",
            verifier.len()
        );
        for (what, value) in [
            ("state", &pending.state),
            ("nonce", &pending.nonce),
            ("PKCE verifier", verifier),
        ] {
            assert!(
                seen.insert(value.clone()),
                "sign-in {round}: its {what} served before"
            );
        }
    }
}

/// Bad input: the returned state with its last character changed, cut short, lengthened,
/// empty, and the state of another sign-in. Each is [`SignInError::StateMismatch`], and the
/// code still signs in afterwards: the state is checked before the code is spent.
pub async fn a_tampered_state_is_refused_without_spending_the_code(harness: &dyn SignInHarness) {
    let provider = harness.provider();
    let account = first_account(harness);
    let (start, returned) = signed_in_at_the_provider(harness, &*provider, &account).await;
    assert_eq!(
        returned.state, start.pending.state,
        "the provider sent the browser back with another state than the sign-in's"
    );
    let other = begin(&*provider, &harness.redirect_uri()).await;
    let state = &returned.state;
    let mut shorter = state.clone();
    shorter.pop();
    let tampered = [
        ("a state with its last character changed", altered(state)),
        ("a state cut short", shorter),
        ("a lengthened state", format!("{state}A")),
        ("an empty state", String::new()),
        ("another sign-in's state", other.pending.state.clone()),
    ];
    let secrets = [
        state.as_str(),
        &start.pending.nonce,
        &start.pending.pkce_verifier,
        &returned.code,
    ];
    for (bad_input, tampered) in &tampered {
        refusal(
            finish(&*provider, &start.pending, tampered, &returned.code).await,
            "StateMismatch",
            |error| *error == SignInError::StateMismatch,
            &secrets,
            bad_input,
        );
    }
    let claims = finish(&*provider, &start.pending, state, &returned.code)
        .await
        .unwrap_or_else(|error| {
            panic!("the code no longer signs in after the tampered states: {error}")
        });
    assert_eq!(claims.subject, account.subject);
}

/// Bad input: a code that already signed in, brought back a second time. It is
/// [`SignInError::CodeRejected`].
pub async fn a_code_is_good_for_one_sign_in(harness: &dyn SignInHarness) {
    let provider = harness.provider();
    let account = first_account(harness);
    let (start, returned) = signed_in_at_the_provider(harness, &*provider, &account).await;
    let claims = finish(&*provider, &start.pending, &returned.state, &returned.code)
        .await
        .unwrap_or_else(|error| panic!("the first use of the code failed: {error}"));
    assert_eq!(claims.subject, account.subject);
    refusal(
        finish(&*provider, &start.pending, &returned.state, &returned.code).await,
        "CodeRejected",
        |error| matches!(error, SignInError::CodeRejected(_)),
        &[
            &returned.code,
            &start.pending.nonce,
            &start.pending.pkce_verifier,
        ],
        "a code used a second time",
    );
}

/// Bad input: with the genuine state, a code the provider never issued and the issued code with
/// its last character changed. Both are [`SignInError::CodeRejected`].
pub async fn a_forged_code_is_refused(harness: &dyn SignInHarness) {
    let provider = harness.provider();
    let account = first_account(harness);
    let (start, returned) = signed_in_at_the_provider(harness, &*provider, &account).await;
    let forged = [
        ("a made-up code", "forged-code-0f3a9c27d1e84b66".to_owned()),
        ("an altered code", altered(&returned.code)),
    ];
    for (bad_input, code) in &forged {
        refusal(
            finish(&*provider, &start.pending, &returned.state, code).await,
            "CodeRejected",
            |error| matches!(error, SignInError::CodeRejected(_)),
            &[code, &returned.code, &start.pending.pkce_verifier],
            bad_input,
        );
    }
}

/// Bad input: a code brought back with the PKCE verifier of a sign-in the thief began, and a
/// code brought into the thief's own sign-in. Both are [`SignInError::CodeRejected`]: the code
/// belongs to the sign-in whose challenge it was issued for.
pub async fn a_code_is_bound_to_its_sign_ins_verifier(harness: &dyn SignInHarness) {
    let provider = harness.provider();
    let account = first_account(harness);
    let thief = begin(&*provider, &harness.redirect_uri()).await.pending;

    let (victim, returned) = signed_in_at_the_provider(harness, &*provider, &account).await;
    let with_thiefs_verifier = PendingSignIn {
        pkce_verifier: thief.pkce_verifier.clone(),
        ..victim.pending.clone()
    };
    refusal(
        finish(
            &*provider,
            &with_thiefs_verifier,
            &returned.state,
            &returned.code,
        )
        .await,
        "CodeRejected",
        |error| matches!(error, SignInError::CodeRejected(_)),
        &[
            &thief.pkce_verifier,
            &victim.pending.pkce_verifier,
            &returned.code,
        ],
        "a code with another sign-in's verifier",
    );

    let (victim, returned) = signed_in_at_the_provider(harness, &*provider, &account).await;
    refusal(
        finish(&*provider, &thief, &thief.state, &returned.code).await,
        "CodeRejected",
        |error| matches!(error, SignInError::CodeRejected(_)),
        &[
            &thief.pkce_verifier,
            &victim.pending.pkce_verifier,
            &returned.code,
        ],
        "a code brought into another sign-in",
    );
}

/// Bad input: a code brought back with the nonce of another sign-in. The ID token carries the
/// nonce its sign-in sent, so it is [`SignInError::InvalidIdToken`].
pub async fn an_id_token_is_bound_to_its_sign_ins_nonce(harness: &dyn SignInHarness) {
    let provider = harness.provider();
    let account = first_account(harness);
    let other = begin(&*provider, &harness.redirect_uri()).await.pending;
    let (start, returned) = signed_in_at_the_provider(harness, &*provider, &account).await;
    let with_other_nonce = PendingSignIn {
        nonce: other.nonce.clone(),
        ..start.pending.clone()
    };
    refusal(
        finish(
            &*provider,
            &with_other_nonce,
            &returned.state,
            &returned.code,
        )
        .await,
        "InvalidIdToken",
        |error| matches!(error, SignInError::InvalidIdToken(_)),
        &[&other.nonce, &start.pending.nonce, &returned.code],
        "a code with another sign-in's nonce",
    );
}

/// Bad input: a code brought back naming another redirect address than the one it was issued
/// for. It is [`SignInError::CodeRejected`].
pub async fn a_code_is_bound_to_its_redirect_address(harness: &dyn SignInHarness) {
    let provider = harness.provider();
    let account = first_account(harness);
    let (start, returned) = signed_in_at_the_provider(harness, &*provider, &account).await;
    let elsewhere = PendingSignIn {
        redirect_uri: format!("{}/elsewhere", start.pending.redirect_uri),
        ..start.pending.clone()
    };
    refusal(
        finish(&*provider, &elsewhere, &returned.state, &returned.code).await,
        "CodeRejected",
        |error| matches!(error, SignInError::CodeRejected(_)),
        &[&returned.code, &start.pending.pkce_verifier],
        "a code with another redirect address",
    );
}

// ----- the in-memory provider ---------------------------------------------------------------

/// The issuer of [`FakeSignInProvider::new`].
pub const FAKE_ISSUER: &str = "https://idp.example.test";

/// The client id the fake's authorization addresses name, and the only one its login page
/// accepts.
pub const FAKE_CLIENT_ID: &str = "mcpgw-console";

/// The redirect address the fake, as its own harness, sends browsers back to.
pub const FAKE_REDIRECT_URI: &str = "https://gateway.example.test/ui/login/sso/callback";

/// How long after its sign-in finished a fake sign-in expires.
pub const FAKE_SIGN_IN_LIFETIME: Duration = Duration::from_secs(3600);

/// What the fake's login page issued a code for.
struct IssuedCode {
    account: SignInAccount,
    redirect_uri: String,
    challenge: String,
    nonce: String,
}

#[derive(Default)]
struct FakeState {
    accounts: Vec<SignInAccount>,
    issued: u64,
    codes: HashMap<String, IssuedCode>,
    unavailable: Option<String>,
}

/// A [`SignInProvider`] and its OpenID provider in memory, for tests of the code that uses the
/// port. [`authorize_as`](Self::authorize_as) plays the login page and the browser: it reads an
/// authorization address of this fake, signs in as one of the accounts given with
/// [`with_account`](Self::with_account), and answers the query the browser comes back with.
/// Codes are good once, bound to their PKCE challenge, nonce and redirect address, and the
/// values it draws are numbered, so runs repeat. Clones share their state.
/// [`set_unavailable`](Self::set_unavailable) makes it answer as a provider that cannot be
/// reached.
#[derive(Clone)]
pub struct FakeSignInProvider {
    issuer: String,
    state: Arc<Mutex<FakeState>>,
}

impl Default for FakeSignInProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for FakeSignInProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeSignInProvider")
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

impl FakeSignInProvider {
    /// A provider of [`FAKE_ISSUER`] that knows no account yet.
    pub fn new() -> Self {
        Self::with_issuer(FAKE_ISSUER)
    }

    /// A provider whose issuer is `issuer`.
    pub fn with_issuer(issuer: impl Into<String>) -> Self {
        Self {
            issuer: issuer.into(),
            state: Arc::default(),
        }
    }

    /// The same provider, whose login page also knows `account`.
    pub fn with_account(self, account: SignInAccount) -> Self {
        self.lock().accounts.push(account);
        self
    }

    /// Makes `begin` and `finish` answer [`SignInError::Unavailable`] with `problem` (`None`:
    /// answer again).
    pub fn set_unavailable(&self, problem: Option<&str>) {
        self.lock().unavailable = problem.map(str::to_owned);
    }

    /// Plays the login page and the browser: reads `authorize_url` (one of this fake's), signs
    /// in as the account whose login is `login`, and answers the query the browser is sent back
    /// with: `state` and `code`, or `state`, `error` (`access_denied`) and `error_description`
    /// for an account the fake does not know. An address that is not one of this fake's, or
    /// that asks for what it does not do, is an `Err` saying what is wrong with it.
    pub fn authorize_as(
        &self,
        authorize_url: &str,
        login: &str,
    ) -> Result<BTreeMap<String, String>, String> {
        let endpoint = format!("{}/authorize?", self.issuer);
        if !authorize_url.starts_with(&endpoint) {
            return Err(format!(
                "the address is not this provider's authorization endpoint {}/authorize",
                self.issuer
            ));
        }
        let query = query_parameters(authorize_url)?;
        let parameter = |name: &str| {
            query
                .get(name)
                .map(String::as_str)
                .filter(|value| !value.is_empty())
                .ok_or_else(|| format!("the authorization request has no `{name}`"))
        };
        let expect = |name: &str, expected: &str| match parameter(name)? {
            value if value == expected => Ok(()),
            value => Err(format!(
                "`{name}` is `{value}`; this provider takes `{expected}`"
            )),
        };
        expect("response_type", "code")?;
        expect("client_id", FAKE_CLIENT_ID)?;
        expect("code_challenge_method", "S256")?;
        if !parameter("scope")?
            .split(' ')
            .any(|scope| scope == "openid")
        {
            return Err("the scopes lack `openid`".to_owned());
        }
        let redirect_uri = parameter("redirect_uri")?.to_owned();
        let state = parameter("state")?.to_owned();
        let challenge = parameter("code_challenge")?.to_owned();
        let nonce = parameter("nonce")?.to_owned();

        let mut fake = self.lock();
        let Some(account) = fake
            .accounts
            .iter()
            .find(|account| account.login == login)
            .cloned()
        else {
            return Ok(BTreeMap::from([
                ("state".to_owned(), state),
                ("error".to_owned(), "access_denied".to_owned()),
                (
                    "error_description".to_owned(),
                    format!("no account named {login}"),
                ),
            ]));
        };
        let code = format!("fake-code-{:016x}", fake.next_number());
        fake.codes.insert(
            code.clone(),
            IssuedCode {
                account,
                redirect_uri,
                challenge,
                nonce,
            },
        );
        Ok(BTreeMap::from([
            ("state".to_owned(), state),
            ("code".to_owned(), code),
        ]))
    }

    fn lock(&self) -> MutexGuard<'_, FakeState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl FakeState {
    fn next_number(&mut self) -> u64 {
        self.issued += 1;
        self.issued
    }

    fn check_available(&self) -> Result<(), SignInError> {
        match &self.unavailable {
            Some(problem) => Err(SignInError::Unavailable(problem.clone())),
            None => Ok(()),
        }
    }
}

/// Whether `raw` looks like an absolute http or https address a browser can be sent to.
fn is_web_address(raw: &str) -> bool {
    let rest = raw
        .strip_prefix("https://")
        .or_else(|| raw.strip_prefix("http://"));
    rest.is_some_and(|rest| {
        !rest.is_empty()
            && !rest.starts_with('/')
            && !raw.contains('#')
            && !raw.chars().any(|c| c.is_whitespace() || c.is_control())
    })
}

#[async_trait]
impl SignInProvider for FakeSignInProvider {
    fn issuer(&self) -> &str {
        &self.issuer
    }

    async fn begin(&self, redirect_uri: &str) -> Result<SignInStart, SignInError> {
        let mut fake = self.lock();
        fake.check_available()?;
        if !is_web_address(redirect_uri) {
            return Err(SignInError::InvalidSettings(format!(
                "the redirect address {redirect_uri:?} is not an absolute http or https address \
                 without a fragment"
            )));
        }
        let number = fake.next_number();
        let pending = PendingSignIn {
            state: format!("fake-state-{number:016x}"),
            nonce: format!("fake-nonce-{number:016x}"),
            pkce_verifier: format!("fake-pkce-verifier-{number:032x}"),
            redirect_uri: redirect_uri.to_owned(),
        };
        let authorize_url = format!(
            "{}/authorize?response_type=code&client_id={}&redirect_uri={}&scope=openid&state={}\
             &nonce={}&code_challenge={}&code_challenge_method=S256",
            self.issuer,
            FAKE_CLIENT_ID,
            percent_encode(redirect_uri),
            percent_encode(&pending.state),
            percent_encode(&pending.nonce),
            s256_challenge(&pending.pkce_verifier),
        );
        Ok(SignInStart {
            authorize_url,
            pending,
        })
    }

    async fn finish(
        &self,
        pending: &PendingSignIn,
        returned_state: &str,
        code: &str,
    ) -> Result<VerifiedClaims, SignInError> {
        pending.check_state(returned_state)?;
        let mut fake = self.lock();
        fake.check_available()?;
        if code.is_empty() {
            return Err(SignInError::CodeRejected(
                "the provider's answer carries no code".to_owned(),
            ));
        }
        // A code is spent by its first exchange, whatever comes of it.
        let Some(issued) = fake.codes.remove(code) else {
            return Err(SignInError::CodeRejected(
                "invalid_grant (the code was never issued or was used before)".to_owned(),
            ));
        };
        if issued.redirect_uri != pending.redirect_uri {
            return Err(SignInError::CodeRejected(
                "invalid_grant (the code was issued for another redirect address)".to_owned(),
            ));
        }
        if issued.challenge != s256_challenge(&pending.pkce_verifier) {
            return Err(SignInError::CodeRejected(
                "invalid_grant (the PKCE verifier does not match the code's challenge)".to_owned(),
            ));
        }
        if issued.nonce != pending.nonce {
            return Err(SignInError::InvalidIdToken(
                "its nonce is not the one this sign-in sent".to_owned(),
            ));
        }
        Ok(VerifiedClaims {
            subject: issued.account.subject,
            groups: issued.account.groups,
            tenant: issued.account.tenant,
            expires_at: wall_clock().plus(FAKE_SIGN_IN_LIFETIME),
            scopes: None,
        })
    }
}

/// The fake is its own harness: it is the provider, its accounts are the harness's, and its
/// login page is the browser.
#[async_trait]
impl SignInHarness for FakeSignInProvider {
    fn provider(&self) -> Arc<dyn SignInProvider> {
        Arc::new(self.clone())
    }

    fn redirect_uri(&self) -> String {
        FAKE_REDIRECT_URI.to_owned()
    }

    fn accounts(&self) -> Vec<SignInAccount> {
        self.lock().accounts.clone()
    }

    async fn authorize(
        &self,
        authorize_url: &str,
        account: &SignInAccount,
    ) -> Result<BTreeMap<String, String>, String> {
        self.authorize_as(authorize_url, &account.login)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fake with alice (two groups and a tenant) and bob (neither).
    fn fake() -> FakeSignInProvider {
        FakeSignInProvider::new()
            .with_account(
                SignInAccount::new("alice")
                    .in_groups(["ops", "Domain Users"])
                    .of_tenant("acme"),
            )
            .with_account(SignInAccount::new("bob"))
    }

    mod fake_contract {
        crate::sign_in_provider_contract_suite!(super::fake());
    }

    #[test]
    fn base64url_has_no_padding_and_the_url_safe_letters() {
        let cases: [(&[u8], &str); 8] = [
            (b"", ""),
            (b"f", "Zg"),
            (b"fo", "Zm8"),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg"),
            (b"fooba", "Zm9vYmE"),
            (b"foobar", "Zm9vYmFy"),
            (&[0xfb, 0xff, 0xbf], "-_-_"),
        ];
        for (bytes, encoded) in cases {
            assert_eq!(base64url(bytes), encoded, "{bytes:?}");
        }
    }

    #[test]
    fn the_s256_challenge_is_the_base64url_sha256_of_the_verifier() {
        assert_eq!(
            s256_challenge("fake-pkce-verifier-0000000000000000000000000000002a"),
            "SEUK2eOyf4n8maiCkPng9EyHne6tn2_RBArySHJkJqQ"
        );
    }

    #[test]
    fn query_parameters_are_decoded() {
        let query = query_parameters(
            "https://idp.example.test/authorize?redirect_uri=https%3A%2F%2Fgw%2Fcb&scope=openid+groups&empty=&flag#frag",
        )
        .unwrap();
        assert_eq!(query["redirect_uri"], "https://gw/cb");
        assert_eq!(query["scope"], "openid groups");
        assert_eq!(query["empty"], "");
        assert_eq!(query["flag"], "");
        assert_eq!(query.len(), 4);
        let text = "a b/é&=?";
        assert_eq!(
            query_parameters(&format!("x?v={}", percent_encode(text))).unwrap()["v"],
            text
        );
        // Bad input: no query, a parameter named twice, a `%` without two hexadecimal digits,
        // a `%` with a sign instead of a digit, bytes that are not UTF-8.
        for bad in [
            "https://idp.example.test/authorize",
            "x?a=1&a=2",
            "x?a=%4",
            "x?a=%+1",
            "x?a=%zz",
            "x?a=%ff",
        ] {
            assert!(query_parameters(bad).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn an_unknown_account_comes_back_with_an_error() {
        // Bad input: a login the fake does not know.
        let fake = fake();
        let start = fake.begin(FAKE_REDIRECT_URI).await.unwrap();
        let query = fake.authorize_as(&start.authorize_url, "mallory").unwrap();
        assert_eq!(query.get("code"), None);
        assert_eq!(query["state"], start.pending.state);
        assert_eq!(query["error"], "access_denied");
        assert_eq!(query["error_description"], "no account named mallory");
    }

    #[tokio::test]
    async fn addresses_that_are_not_the_fakes_are_refused() {
        let fake = fake();
        let start = fake.begin(FAKE_REDIRECT_URI).await.unwrap();
        let url = &start.authorize_url;
        // Bad input: another provider, another client, a plain challenge, no state, no openid
        // scope, a broken escape.
        for bad in [
            url.replace(FAKE_ISSUER, "https://other.example.test"),
            url.replace("client_id=mcpgw-console", "client_id=intruder"),
            url.replace("code_challenge_method=S256", "code_challenge_method=plain"),
            url.replace("&state=", "&ignored="),
            url.replace("scope=openid", "scope=profile"),
            format!("{url}&x=%G0"),
        ] {
            assert!(fake.authorize_as(&bad, "alice").is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn a_redirect_address_that_is_no_web_address_is_refused() {
        // Bad input: a relative path, another scheme, a fragment, a space, no host.
        for bad in [
            "/ui/login/sso/callback",
            "javascript:alert(1)",
            "https://gw.example.test/cb#x",
            "https://gw.example.test/c b",
            "https:///cb",
        ] {
            match fake().begin(bad).await {
                Err(error @ SignInError::InvalidSettings(_)) => {
                    assert_eq!(error.kind(), ErrorKind::Invalid);
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn the_fake_is_unavailable_when_told() {
        let fake = fake();
        let start = fake.begin(FAKE_REDIRECT_URI).await.unwrap();
        let query = fake.authorize_as(&start.authorize_url, "alice").unwrap();
        fake.set_unavailable(Some("connection refused"));
        assert_eq!(
            fake.begin(FAKE_REDIRECT_URI).await.unwrap_err(),
            SignInError::Unavailable("connection refused".to_owned())
        );
        assert_eq!(
            fake.finish(&start.pending, &query["state"], &query["code"])
                .await
                .unwrap_err(),
            SignInError::Unavailable("connection refused".to_owned())
        );
        fake.set_unavailable(None);
        let claims = fake
            .finish(&start.pending, &query["state"], &query["code"])
            .await
            .expect("the code was not spent while the provider was away");
        assert_eq!(claims.subject, "alice");
    }

    // ----- the suite catches broken providers ---------------------------------------------

    /// Ways a provider can break the rules of the port, each built on the fake.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Flaw {
        /// Keeps every promise: the fake as it is.
        None,
        /// Answers no groups.
        DropsGroups,
        /// Asks for a plain PKCE challenge.
        PlainChallenge,
        /// Answers its first sign-in again on every `begin`.
        ReplaysItsFirstStart,
        /// Compares the pending state with itself instead of the returned one.
        IgnoresTheReturnedState,
        /// Exchanges the code before it checks the state.
        SpendsTheCodeFirst,
        /// Answers the claims of a code it exchanged before when the code comes again.
        RemembersUsedCodes,
        /// Answers made-up claims for any code the provider does not know.
        TrustsAnyCode,
        /// Finishes with its own copy of the sign-in it began under the returned state,
        /// instead of the pending sign-in it is given.
        KeepsItsOwnCopy,
    }

    struct Flawed {
        fake: FakeSignInProvider,
        flaw: Flaw,
        starts: Mutex<Vec<SignInStart>>,
        used: Mutex<HashMap<String, VerifiedClaims>>,
    }

    #[async_trait]
    impl SignInProvider for Flawed {
        fn issuer(&self) -> &str {
            self.fake.issuer()
        }

        async fn begin(&self, redirect_uri: &str) -> Result<SignInStart, SignInError> {
            let first = self.starts.lock().unwrap().first().cloned();
            if let (Flaw::ReplaysItsFirstStart, Some(first)) = (self.flaw, first) {
                return Ok(first);
            }
            let mut start = self.fake.begin(redirect_uri).await?;
            if self.flaw == Flaw::PlainChallenge {
                start.authorize_url = start
                    .authorize_url
                    .replace("code_challenge_method=S256", "code_challenge_method=plain");
            }
            self.starts.lock().unwrap().push(start.clone());
            Ok(start)
        }

        async fn finish(
            &self,
            pending: &PendingSignIn,
            returned_state: &str,
            code: &str,
        ) -> Result<VerifiedClaims, SignInError> {
            let outcome = match self.flaw {
                Flaw::IgnoresTheReturnedState => {
                    self.fake.finish(pending, &pending.state, code).await
                }
                Flaw::SpendsTheCodeFirst => {
                    let outcome = self.fake.finish(pending, &pending.state, code).await;
                    pending.check_state(returned_state)?;
                    outcome
                }
                Flaw::KeepsItsOwnCopy => {
                    let own = self
                        .starts
                        .lock()
                        .unwrap()
                        .iter()
                        .find(|start| start.pending.state == returned_state)
                        .map(|start| start.pending.clone())
                        .unwrap_or_else(|| pending.clone());
                    self.fake.finish(&own, returned_state, code).await
                }
                _ => self.fake.finish(pending, returned_state, code).await,
            };
            match (self.flaw, outcome) {
                (Flaw::DropsGroups, Ok(mut claims)) => {
                    claims.groups.clear();
                    Ok(claims)
                }
                (Flaw::RemembersUsedCodes, Ok(claims)) => {
                    self.used
                        .lock()
                        .unwrap()
                        .insert(code.to_owned(), claims.clone());
                    Ok(claims)
                }
                (Flaw::RemembersUsedCodes, Err(error)) => {
                    match self.used.lock().unwrap().get(code) {
                        Some(claims) => Ok(claims.clone()),
                        None => Err(error),
                    }
                }
                (Flaw::TrustsAnyCode, Err(SignInError::CodeRejected(_))) => Ok(VerifiedClaims {
                    subject: "alice".to_owned(),
                    groups: Vec::new(),
                    tenant: None,
                    expires_at: wall_clock().plus(FAKE_SIGN_IN_LIFETIME),
                    scopes: None,
                }),
                (_, outcome) => outcome,
            }
        }
    }

    /// The fake's accounts and login page in front of a flawed provider.
    struct FlawedHarness {
        fake: FakeSignInProvider,
        flaw: Flaw,
    }

    #[async_trait]
    impl SignInHarness for FlawedHarness {
        fn provider(&self) -> Arc<dyn SignInProvider> {
            Arc::new(Flawed {
                fake: self.fake.clone(),
                flaw: self.flaw,
                starts: Mutex::default(),
                used: Mutex::default(),
            })
        }

        fn redirect_uri(&self) -> String {
            self.fake.redirect_uri()
        }

        fn accounts(&self) -> Vec<SignInAccount> {
            self.fake.accounts()
        }

        async fn authorize(
            &self,
            authorize_url: &str,
            account: &SignInAccount,
        ) -> Result<BTreeMap<String, String>, String> {
            self.fake.authorize(authorize_url, account).await
        }
    }

    /// Whether `case` fails against a provider with `flaw`.
    async fn fails_with<F, Fut>(flaw: Flaw, case: F) -> bool
    where
        F: FnOnce(FlawedHarness) -> Fut,
        Fut: Future<Output = ()>,
    {
        use futures::FutureExt;
        let harness = FlawedHarness { fake: fake(), flaw };
        std::panic::AssertUnwindSafe(case(harness))
            .catch_unwind()
            .await
            .is_err()
    }

    #[tokio::test]
    async fn every_case_fails_against_a_provider_that_breaks_its_promise() {
        macro_rules! caught {
            ($flaw:expr, $case:ident) => {
                assert!(
                    fails_with($flaw, |harness| async move { $case(&harness).await }).await,
                    "`{}` accepted a provider that {:?}",
                    stringify!($case),
                    $flaw
                );
            };
        }
        caught!(Flaw::DropsGroups, each_account_signs_in_with_its_claims);
        caught!(
            Flaw::PlainChallenge,
            the_authorize_url_carries_the_sign_ins_parameters
        );
        caught!(Flaw::ReplaysItsFirstStart, each_begin_is_fresh);
        caught!(
            Flaw::IgnoresTheReturnedState,
            a_tampered_state_is_refused_without_spending_the_code
        );
        caught!(
            Flaw::SpendsTheCodeFirst,
            a_tampered_state_is_refused_without_spending_the_code
        );
        caught!(Flaw::RemembersUsedCodes, a_code_is_good_for_one_sign_in);
        caught!(Flaw::TrustsAnyCode, a_forged_code_is_refused);
        caught!(
            Flaw::KeepsItsOwnCopy,
            a_code_is_bound_to_its_sign_ins_verifier
        );
        caught!(
            Flaw::KeepsItsOwnCopy,
            an_id_token_is_bound_to_its_sign_ins_nonce
        );
        caught!(
            Flaw::KeepsItsOwnCopy,
            a_code_is_bound_to_its_redirect_address
        );
    }

    /// The wrapper without a flaw passes the whole suite: the failures above come from the
    /// flaws alone.
    mod flawless_wrapper_contract {
        crate::sign_in_provider_contract_suite!(super::FlawedHarness {
            fake: super::fake(),
            flaw: super::Flaw::None,
        });
    }
}
