//! What every [`TokenVerifier`] promises, as tests that every verifier must pass.
//!
//! A verifier trusts the keys of one issuer, so the suite cannot make tokens on its own: it
//! works through a [`TokenIssuer`] that the adapter's tests write once. The issuer signs the
//! claims the suite hands it with a key the verifier trusts or with one it must not trust,
//! publishes a new key when asked, and can take its key set away. The adapter crate then runs
//! the whole suite with one line in its tests:
//!
//! ```text
//! mcpgw_testkit::token_verifier_contract_suite!(MyIssuer::start().await.with_verifier());
//! ```
//!
//! where the expression answers a `(verifier, issuer)` pair, fresh for every case. Each case is
//! also a public `async fn` taking `(&dyn TokenVerifier, &dyn TokenIssuer)`, for callers that
//! need to run one case by hand. There is no in-memory verifier here: what the port promises is
//! about signatures and key sets, which only a real verifier shows.
//!
//! The verifier must read the claims by their usual names (`sub`, `groups`, `tenant_id`). Every
//! case verifies at [`NOW`], a fixed instant in the past, so a verifier that judges `exp` and
//! `nbf` against its own clock instead of the `now` it is given refuses every token. The cases
//! check what the port's documentation promises:
//! - a token signed by a trusted RS256 or ES256 key yields its subject, its groups (none when
//!   the claim is absent), its tenant and its `exp`;
//! - a token that is not a JWT is [`TokenRejection::Malformed`], and `alg: none`, a symmetric
//!   algorithm or any algorithm but RS256 and ES256 is [`TokenRejection::UnsupportedAlgorithm`]
//!   naming it;
//! - a signature by another key than the one the token names, or over an edited payload, is
//!   [`TokenRejection::BadSignature`];
//! - a key id the issuer never published is [`TokenRejection::UnknownKey`], and a key the
//!   issuer published after the verifier last fetched its key set is fetched on demand;
//! - `iss` and `aud` must name the issuer and the verifier's audience, `exp` must lie ahead of
//!   `now` and `nbf` not beyond it, each with the verifier's leeway; a required claim that is
//!   missing or of the wrong type is [`TokenRejection::MissingClaim`] naming it;
//! - a verifier that cannot reach its key set answers [`TokenError::Unavailable`], never a
//!   rejection, and its message does not echo the token;
//! - every answer comes within [`VERIFY_BOUND`], also when many tokens are verified at once.

use std::time::Duration;

use async_trait::async_trait;
use mcpgw_authz::{TokenError, TokenRejection, TokenVerifier, VerifiedClaims};
use mcpgw_core::Timestamp;
use serde_json::{Value, json};

/// The instant every case verifies at (in seconds since the epoch): 2020-09-13T12:26:40Z.
pub const NOW: i64 = 1_600_000_000;

/// The longest one verification may take in the suite, key set fetches included.
pub const VERIFY_BOUND: Duration = Duration::from_secs(10);

/// Which key signs a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SigningKey {
    /// An RS256 key of the issuer's key set, named by its key id.
    Rs256,
    /// An ES256 (P-256) key of the issuer's key set, named by its key id.
    Es256,
    /// Another RSA key, in a token that names the key id of [`SigningKey::Rs256`].
    Impostor,
    /// An RSA key under a key id the issuer never publishes.
    Unpublished,
    /// An RSA key under a key id of its own that the issuer publishes only from
    /// [`TokenIssuer::publish_new_key`] on.
    Rotated,
}

/// The issuer whose tokens the verifier under test checks, under the test's control.
#[async_trait]
pub trait TokenIssuer: Send + Sync {
    /// The `iss` the verifier expects.
    fn issuer(&self) -> String;

    /// The `aud` the verifier expects.
    fn audience(&self) -> String;

    /// The clock skew the verifier allows for `exp` and `nbf`; the suite's tokens lie a minute
    /// or more beyond it.
    fn leeway(&self) -> Duration;

    /// A signed JWT with these claims (a JSON object), its header naming the algorithm and the
    /// key id of `key`.
    fn sign(&self, claims: &Value, key: SigningKey) -> String;

    /// Adds the key of [`SigningKey::Rotated`] to the key set, next to the others.
    async fn publish_new_key(&self);

    /// Makes the key set unreachable (its address answers an error or nothing at all).
    async fn take_key_set_away(&self);
}

/// Expands to one `#[tokio::test]` per case of the [`TokenVerifier`] contract, each running
/// against a fresh pair made by evaluating `$make_pair` (an expression, which may `.await`, of a
/// tuple `(verifier, issuer)` whose types implement [`TokenVerifier`] and [`TokenIssuer`]).
///
/// The invoking crate needs `tokio` with the `macros` and `rt` features among its
/// dev-dependencies. The test functions are named after the cases and defined in the invoking
/// module: to run the suite against two verifiers in one crate, invoke it in two modules.
#[macro_export]
macro_rules! token_verifier_contract_suite {
    ($make_pair:expr $(,)?) => {
        $crate::__token_verifier_contract_case!(
            $make_pair,
            a_token_from_a_trusted_key_yields_its_claims
        );
        $crate::__token_verifier_contract_case!($make_pair, absent_groups_and_tenant_are_none);
        $crate::__token_verifier_contract_case!($make_pair, what_is_not_a_jwt_is_malformed);
        $crate::__token_verifier_contract_case!($make_pair, only_rs256_and_es256_are_accepted);
        $crate::__token_verifier_contract_case!(
            $make_pair,
            another_key_or_an_edited_payload_is_a_bad_signature
        );
        $crate::__token_verifier_contract_case!(
            $make_pair,
            a_key_id_never_published_is_an_unknown_key
        );
        $crate::__token_verifier_contract_case!(
            $make_pair,
            a_key_published_later_is_fetched_on_demand
        );
        $crate::__token_verifier_contract_case!($make_pair, the_issuer_must_be_the_expected_one);
        $crate::__token_verifier_contract_case!(
            $make_pair,
            the_audience_must_include_the_verifiers
        );
        $crate::__token_verifier_contract_case!(
            $make_pair,
            expiry_is_judged_against_now_with_the_leeway
        );
        $crate::__token_verifier_contract_case!(
            $make_pair,
            not_before_is_judged_against_now_with_the_leeway
        );
        $crate::__token_verifier_contract_case!(
            $make_pair,
            claims_of_the_wrong_type_are_missing_claims
        );
        $crate::__token_verifier_contract_case!(
            $make_pair,
            an_unreachable_key_set_is_unavailable_not_a_rejection
        );
        $crate::__token_verifier_contract_case!(
            $make_pair,
            concurrent_verifications_each_get_their_own_answer
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __token_verifier_contract_case {
    ($make_pair:expr, $case:ident) => {
        #[tokio::test]
        async fn $case() {
            let (verifier, issuer) = $make_pair;
            $crate::token_verifier_suite::$case(&verifier, &issuer).await;
        }
    };
}

// ----- helpers ------------------------------------------------------------------------------

/// The resource tokens are presented to; the verifiers under test expect their issuer's own
/// audience instead.
const RESOURCE: &str = "http://gateway.test/mcp";

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_unix_micros(seconds * 1_000_000)
}

fn now() -> Timestamp {
    at(NOW)
}

fn leeway_seconds(issuer: &dyn TokenIssuer) -> i64 {
    i64::try_from(issuer.leeway().as_secs()).unwrap_or(i64::MAX / 4)
}

/// Claims that verify at [`NOW`]: the issuer, its audience, valid for the next hour.
fn claims(issuer: &dyn TokenIssuer) -> Value {
    json!({
        "iss": issuer.issuer(),
        "aud": issuer.audience(),
        "sub": "alice",
        "groups": ["ops", "dev"],
        "tenant_id": "acme",
        "iat": NOW,
        "nbf": NOW - 5,
        "exp": NOW + 3600,
    })
}

fn without(mut claims: Value, name: &str) -> Value {
    claims
        .as_object_mut()
        .expect("the claims are an object")
        .remove(name);
    claims
}

/// Verifies within [`VERIFY_BOUND`] or fails the case.
async fn verify(
    verifier: &dyn TokenVerifier,
    token: &str,
    now: Timestamp,
) -> Result<VerifiedClaims, TokenError> {
    match tokio::time::timeout(VERIFY_BOUND, verifier.verify(token, RESOURCE, now)).await {
        Ok(result) => result,
        Err(_) => panic!("no answer within {VERIFY_BOUND:?}"),
    }
}

async fn accepted(verifier: &dyn TokenVerifier, token: &str, context: &str) -> VerifiedClaims {
    match verify(verifier, token, now()).await {
        Ok(claims) => claims,
        Err(error) => panic!("{context}: expected the token to verify, got {error:?}"),
    }
}

async fn refused(verifier: &dyn TokenVerifier, token: &str, now: Timestamp) -> TokenRejection {
    match verify(verifier, token, now).await {
        Err(TokenError::Rejected(reason)) => reason,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

async fn assert_refused(
    verifier: &dyn TokenVerifier,
    token: &str,
    expected: TokenRejection,
    context: &str,
) {
    assert_eq!(refused(verifier, token, now()).await, expected, "{context}");
}

const BASE64_URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Base64url without padding, as JWT segments are written.
fn b64(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let group = chunk
            .iter()
            .enumerate()
            .fold(0_u32, |group, (index, byte)| {
                group | (u32::from(*byte) << (16 - 8 * index))
            });
        for index in 0..=chunk.len() {
            let sextet = (group >> (18 - 6 * index)) & 0x3f;
            out.push(char::from(BASE64_URL[sextet as usize]));
        }
    }
    out
}

/// A token with this header and claims and a signature of made-up bytes.
fn forged(header: &Value, claims: &Value) -> String {
    format!(
        "{}.{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes()),
        b64(b"not a signature of anything")
    )
}

// ----- the cases ----------------------------------------------------------------------------

pub async fn a_token_from_a_trusted_key_yields_its_claims(
    verifier: &dyn TokenVerifier,
    issuer: &dyn TokenIssuer,
) {
    for key in [SigningKey::Rs256, SigningKey::Es256] {
        let token = issuer.sign(&claims(issuer), key);
        let verified = accepted(verifier, &token, &format!("{key:?}")).await;
        assert_eq!(
            verified,
            VerifiedClaims {
                subject: "alice".to_owned(),
                groups: vec!["ops".to_owned(), "dev".to_owned()],
                tenant: Some("acme".to_owned()),
                expires_at: at(NOW + 3600),
                scopes: None,
            },
            "{key:?}"
        );
        // Asking again answers the same.
        assert_eq!(accepted(verifier, &token, "again").await, verified);
    }
    // One group may be written as a string.
    let mut one_group = claims(issuer);
    one_group["groups"] = json!("ops");
    let verified = accepted(verifier, &issuer.sign(&one_group, SigningKey::Rs256), "").await;
    assert_eq!(verified.groups, ["ops"]);
}

pub async fn absent_groups_and_tenant_are_none(
    verifier: &dyn TokenVerifier,
    issuer: &dyn TokenIssuer,
) {
    let bare = without(without(claims(issuer), "groups"), "tenant_id");
    let verified = accepted(verifier, &issuer.sign(&bare, SigningKey::Es256), "bare").await;
    assert_eq!(verified.subject, "alice");
    assert!(verified.groups.is_empty(), "{verified:?}");
    assert_eq!(verified.tenant, None);
}

pub async fn what_is_not_a_jwt_is_malformed(
    verifier: &dyn TokenVerifier,
    issuer: &dyn TokenIssuer,
) {
    let good = issuer.sign(&claims(issuer), SigningKey::Rs256);
    let segments: Vec<&str> = good.split('.').collect();
    assert_eq!(segments.len(), 3, "a JWT has three segments: {good}");
    let garbage = [
        String::new(),
        "abc".to_owned(),
        format!("{}.{}", segments[0], segments[1]),
        format!("{good}.{}", segments[2]),
        format!("!!!.{}.{}", segments[1], segments[2]),
        format!("{}.{}.{}", b64(b"not json"), segments[1], segments[2]),
    ];
    for token in &garbage {
        assert_refused(verifier, token, TokenRejection::Malformed, token).await;
    }
}

pub async fn only_rs256_and_es256_are_accepted(
    verifier: &dyn TokenVerifier,
    issuer: &dyn TokenIssuer,
) {
    let claims = claims(issuer);
    // An unsigned token.
    let unsigned = format!(
        "{}.{}.",
        b64(br#"{"alg":"none","typ":"JWT"}"#),
        b64(claims.to_string().as_bytes())
    );
    assert_refused(
        verifier,
        &unsigned,
        TokenRejection::UnsupportedAlgorithm("none".to_owned()),
        "alg none",
    )
    .await;
    // Symmetric and other algorithms, whatever they are signed with.
    for alg in ["HS256", "HS512", "RS384", "PS256", "ES384", "EdDSA"] {
        let token = forged(&json!({"alg": alg, "typ": "JWT"}), &claims);
        assert_refused(
            verifier,
            &token,
            TokenRejection::UnsupportedAlgorithm(alg.to_owned()),
            alg,
        )
        .await;
    }
}

pub async fn another_key_or_an_edited_payload_is_a_bad_signature(
    verifier: &dyn TokenVerifier,
    issuer: &dyn TokenIssuer,
) {
    let impostor = issuer.sign(&claims(issuer), SigningKey::Impostor);
    assert_refused(
        verifier,
        &impostor,
        TokenRejection::BadSignature,
        "signed by another key than the one named",
    )
    .await;

    for key in [SigningKey::Rs256, SigningKey::Es256] {
        let good = issuer.sign(&claims(issuer), key);
        accepted(verifier, &good, "the untouched token").await;
        let segments: Vec<&str> = good.split('.').collect();
        let mut edited = claims(issuer);
        edited["sub"] = json!("mallory");
        let edited = format!(
            "{}.{}.{}",
            segments[0],
            b64(edited.to_string().as_bytes()),
            segments[2]
        );
        assert_refused(
            verifier,
            &edited,
            TokenRejection::BadSignature,
            &format!("{key:?}, payload edited after signing"),
        )
        .await;
    }
}

pub async fn a_key_id_never_published_is_an_unknown_key(
    verifier: &dyn TokenVerifier,
    issuer: &dyn TokenIssuer,
) {
    let unknown = issuer.sign(&claims(issuer), SigningKey::Unpublished);
    assert_refused(
        verifier,
        &unknown,
        TokenRejection::UnknownKey,
        "before any key set was fetched",
    )
    .await;
    accepted(
        verifier,
        &issuer.sign(&claims(issuer), SigningKey::Rs256),
        "a known key after an unknown one",
    )
    .await;
    assert_refused(
        verifier,
        &unknown,
        TokenRejection::UnknownKey,
        "with the key set fetched",
    )
    .await;
}

pub async fn a_key_published_later_is_fetched_on_demand(
    verifier: &dyn TokenVerifier,
    issuer: &dyn TokenIssuer,
) {
    let old = issuer.sign(&claims(issuer), SigningKey::Rs256);
    accepted(verifier, &old, "a known key").await;
    let rotated = issuer.sign(&claims(issuer), SigningKey::Rotated);
    assert_refused(
        verifier,
        &rotated,
        TokenRejection::UnknownKey,
        "a key not published yet",
    )
    .await;

    issuer.publish_new_key().await;
    // A minute later, so that a verifier may limit how often it fetches the key set.
    let later = at(NOW + 60);
    let verified = verify(verifier, &rotated, later)
        .await
        .unwrap_or_else(|error| panic!("the new key must be fetched, got {error:?}"));
    assert_eq!(verified.subject, "alice");
    verify(verifier, &old, later)
        .await
        .expect("the keys published before still verify");
}

pub async fn the_issuer_must_be_the_expected_one(
    verifier: &dyn TokenVerifier,
    issuer: &dyn TokenIssuer,
) {
    let mut other = claims(issuer);
    other["iss"] = json!(format!("{}/another", issuer.issuer()));
    assert_refused(
        verifier,
        &issuer.sign(&other, SigningKey::Rs256),
        TokenRejection::WrongIssuer,
        "another issuer, signed by a trusted key",
    )
    .await;
    other["iss"] = json!("https://evil.example");
    assert_refused(
        verifier,
        &issuer.sign(&other, SigningKey::Es256),
        TokenRejection::WrongIssuer,
        "another issuer",
    )
    .await;
    assert_refused(
        verifier,
        &issuer.sign(&without(claims(issuer), "iss"), SigningKey::Rs256),
        TokenRejection::MissingClaim("iss".to_owned()),
        "no issuer",
    )
    .await;
}

pub async fn the_audience_must_include_the_verifiers(
    verifier: &dyn TokenVerifier,
    issuer: &dyn TokenIssuer,
) {
    let mut listed = claims(issuer);
    listed["aud"] = json!(["another-service", issuer.audience()]);
    accepted(
        verifier,
        &issuer.sign(&listed, SigningKey::Rs256),
        "the audience among others",
    )
    .await;

    for other in [json!("another-service"), json!(["another-service"])] {
        let mut claims = claims(issuer);
        claims["aud"] = other.clone();
        assert_refused(
            verifier,
            &issuer.sign(&claims, SigningKey::Rs256),
            TokenRejection::WrongAudience,
            &format!("aud {other}"),
        )
        .await;
    }
    // No audience is not "any audience".
    assert_refused(
        verifier,
        &issuer.sign(&without(claims(issuer), "aud"), SigningKey::Es256),
        TokenRejection::MissingClaim("aud".to_owned()),
        "no audience",
    )
    .await;
}

pub async fn expiry_is_judged_against_now_with_the_leeway(
    verifier: &dyn TokenVerifier,
    issuer: &dyn TokenIssuer,
) {
    let leeway = leeway_seconds(issuer);
    let mut expired = claims(issuer);
    expired["exp"] = json!(NOW - leeway - 60);
    assert_refused(
        verifier,
        &issuer.sign(&expired, SigningKey::Rs256),
        TokenRejection::Expired,
        "expired a minute beyond the leeway",
    )
    .await;
    if leeway >= 2 {
        let mut lately = claims(issuer);
        lately["exp"] = json!(NOW - leeway / 2);
        let verified = accepted(
            verifier,
            &issuer.sign(&lately, SigningKey::Rs256),
            "expired within the leeway",
        )
        .await;
        assert_eq!(verified.expires_at, at(NOW - leeway / 2));
    }

    // The same token, valid now, has expired an hour and a minute beyond the leeway later.
    let token = issuer.sign(&claims(issuer), SigningKey::Rs256);
    accepted(verifier, &token, "valid now").await;
    assert_eq!(
        refused(verifier, &token, at(NOW + 3660 + leeway)).await,
        TokenRejection::Expired,
        "the token judged later"
    );

    assert_refused(
        verifier,
        &issuer.sign(&without(claims(issuer), "exp"), SigningKey::Rs256),
        TokenRejection::MissingClaim("exp".to_owned()),
        "a token that never expires",
    )
    .await;
}

pub async fn not_before_is_judged_against_now_with_the_leeway(
    verifier: &dyn TokenVerifier,
    issuer: &dyn TokenIssuer,
) {
    let leeway = leeway_seconds(issuer);
    let mut early = claims(issuer);
    early["nbf"] = json!(NOW + leeway + 60);
    let token = issuer.sign(&early, SigningKey::Es256);
    assert_refused(
        verifier,
        &token,
        TokenRejection::NotYetValid,
        "valid from a minute beyond the leeway",
    )
    .await;
    // Once its time has come, the same token verifies.
    verify(verifier, &token, at(NOW + leeway + 60))
        .await
        .expect("valid from now on");
    if leeway >= 2 {
        let mut soon = claims(issuer);
        soon["nbf"] = json!(NOW + leeway / 2);
        accepted(
            verifier,
            &issuer.sign(&soon, SigningKey::Es256),
            "valid from within the leeway",
        )
        .await;
    }
    // `nbf` is optional.
    accepted(
        verifier,
        &issuer.sign(&without(claims(issuer), "nbf"), SigningKey::Rs256),
        "no nbf",
    )
    .await;
}

pub async fn claims_of_the_wrong_type_are_missing_claims(
    verifier: &dyn TokenVerifier,
    issuer: &dyn TokenIssuer,
) {
    assert_refused(
        verifier,
        &issuer.sign(&without(claims(issuer), "sub"), SigningKey::Rs256),
        TokenRejection::MissingClaim("sub".to_owned()),
        "no subject",
    )
    .await;
    let wrong: [(&str, Value); 5] = [
        ("sub", json!(42)),
        ("groups", json!([1, 2])),
        ("groups", json!({"ops": true})),
        ("tenant_id", json!(["acme"])),
        ("exp", json!("tomorrow")),
    ];
    for (name, value) in wrong {
        let mut claims = claims(issuer);
        claims[name] = value.clone();
        assert_refused(
            verifier,
            &issuer.sign(&claims, SigningKey::Rs256),
            TokenRejection::MissingClaim(name.to_owned()),
            &format!("{name}: {value}"),
        )
        .await;
    }
}

pub async fn an_unreachable_key_set_is_unavailable_not_a_rejection(
    verifier: &dyn TokenVerifier,
    issuer: &dyn TokenIssuer,
) {
    issuer.take_key_set_away().await;
    let token = issuer.sign(&claims(issuer), SigningKey::Rs256);
    for attempt in 0..3 {
        match verify(verifier, &token, now()).await {
            Err(TokenError::Unavailable(message)) => {
                assert!(
                    !message.contains(&token),
                    "the message never echoes the token: {message}"
                );
            }
            other => panic!("attempt {attempt}: expected Unavailable, got {other:?}"),
        }
    }
    // A token refused for what it is stays refused without a key set.
    assert_refused(
        verifier,
        "not a token",
        TokenRejection::Malformed,
        "malformed while the key set is away",
    )
    .await;
}

pub async fn concurrent_verifications_each_get_their_own_answer(
    verifier: &dyn TokenVerifier,
    issuer: &dyn TokenIssuer,
) {
    let tokens: Vec<(String, Option<TokenRejection>)> = (0..24)
        .map(|index| {
            let mut claims = claims(issuer);
            claims["sub"] = json!(format!("user-{index}"));
            match index % 4 {
                0 => (issuer.sign(&claims, SigningKey::Rs256), None),
                1 => (issuer.sign(&claims, SigningKey::Es256), None),
                2 => (
                    issuer.sign(&claims, SigningKey::Unpublished),
                    Some(TokenRejection::UnknownKey),
                ),
                _ => (
                    issuer.sign(&claims, SigningKey::Impostor),
                    Some(TokenRejection::BadSignature),
                ),
            }
        })
        .collect();
    let answers = futures::future::join_all(
        tokens
            .iter()
            .map(|(token, _)| verify(verifier, token, now())),
    )
    .await;
    for (index, ((_, expected), answer)) in tokens.iter().zip(answers).enumerate() {
        match (expected, answer) {
            (None, Ok(claims)) => assert_eq!(claims.subject, format!("user-{index}")),
            (Some(expected), Err(TokenError::Rejected(reason))) => {
                assert_eq!(&reason, expected, "token {index}");
            }
            (expected, answer) => panic!("token {index}: expected {expected:?}, got {answer:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::b64;

    #[test]
    fn segments_are_base64url_without_padding() {
        assert_eq!(b64(b""), "");
        assert_eq!(b64(b"f"), "Zg");
        assert_eq!(b64(b"fo"), "Zm8");
        assert_eq!(b64(b"foo"), "Zm9v");
        assert_eq!(b64(b"foob"), "Zm9vYg");
        assert_eq!(b64(&[0xfb, 0xff, 0xfe]), "-__-");
        assert_eq!(b64(br#"{"alg":"none"}"#), "eyJhbGciOiJub25lIn0");
    }
}
