//! The verifier against a local issuer: a small HTTP server started by each test that serves
//! OpenID Connect discovery metadata and a JWKS built from the fixed test keys in `tests/keys/`
//! (DER: PKCS#1 RSA keys `rsa-a` and `rsa-b`, a PKCS#8 P-256 key; generated for these tests
//! only), while the tests sign tokens with the private halves. The same issuer runs the test
//! kit's `TokenVerifier` contract suite against the verifier (`mod contract` at the end).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use mcpgw_authz::{Identity, TokenError, TokenRejection, TokenVerifier};
use mcpgw_core::Timestamp;
use mcpgw_oidc::{IssuerSet, OidcSettings, OidcVerifier};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const RSA_A: &[u8] = include_bytes!("keys/rsa-a.der");
const RSA_B: &[u8] = include_bytes!("keys/rsa-b.der");
const EC_P256: &[u8] = include_bytes!("keys/ec-p256.der");
const AUDIENCE: &str = "mcp-gateway";
/// The resource the tests present tokens to; the verifiers here expect `AUDIENCE` instead,
/// unless a test says otherwise.
const RESOURCE: &str = "http://gateway.test/mcp";
/// The tests' clock: 2026-11-21T00:00:00Z.
const NOW_SECONDS: i64 = 1_795_219_200;

fn now() -> Timestamp {
    Timestamp::from_unix_micros(NOW_SECONDS * 1_000_000)
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_unix_micros(seconds * 1_000_000)
}

fn rsa_a() -> EncodingKey {
    EncodingKey::from_rsa_der(RSA_A)
}
fn rsa_b() -> EncodingKey {
    EncodingKey::from_rsa_der(RSA_B)
}
fn ec() -> EncodingKey {
    EncodingKey::from_ec_der(EC_P256)
}

fn public_jwk(key: &EncodingKey, algorithm: Algorithm, kid: &str) -> Jwk {
    let mut jwk = Jwk::from_encoding_key(key, algorithm).expect("public jwk");
    jwk.common.key_id = Some(kid.to_owned());
    jwk
}

/// What the issuer serves, and what it was asked.
struct IssuerState {
    jwks: Value,
    /// When set, the key set answers 500.
    failing: bool,
    /// Requests per path.
    hits: HashMap<String, usize>,
}

struct Issuer {
    base: String,
    state: Arc<Mutex<IssuerState>>,
}

impl Issuer {
    /// Serves `.../.well-known/openid-configuration` under any prefix (naming `{base}/keys` as `jwks_uri`) and
    /// `/keys` with the given keys; any other path answers 404.
    async fn start(keys: Vec<Jwk>) -> Issuer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let state = Arc::new(Mutex::new(IssuerState {
            jwks: serde_json::to_value(JwkSet { keys }).expect("jwks json"),
            failing: false,
            hits: HashMap::new(),
        }));
        let served = Arc::clone(&state);
        let issuer = base.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let state = Arc::clone(&served);
                let issuer = issuer.clone();
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buffer = [0_u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buffer[..n]),
                        }
                    }
                    let request = String::from_utf8_lossy(&request);
                    let path = request.split(' ').nth(1).unwrap_or("/").to_owned();
                    let body = {
                        let mut state = state.lock().expect("issuer state");
                        *state.hits.entry(path.clone()).or_default() += 1;
                        match path.as_str() {
                            p if p.ends_with("/.well-known/openid-configuration") => Some(json!({
                                "issuer": issuer,
                                "jwks_uri": format!("{issuer}/keys"),
                                "authorization_endpoint": format!("{issuer}/authorize"),
                                "response_types_supported": ["code"],
                                "subject_types_supported": ["public"],
                                "id_token_signing_alg_values_supported": ["RS256", "ES256"],
                            })),
                            "/keys" if !state.failing => Some(state.jwks.clone()),
                            _ => None,
                        }
                    };
                    let response = match body {
                        Some(body) => {
                            let body = body.to_string();
                            format!(
                                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                                 content-length: {}\r\nconnection: close\r\n\r\n{body}",
                                body.len()
                            )
                        }
                        None => "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\
                                 connection: close\r\n\r\n"
                            .to_owned(),
                    };
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Issuer { base, state }
    }

    /// The issuer's usual keys: `rsa-a` (RS256) and `ec-1` (ES256).
    async fn start_default() -> Issuer {
        Issuer::start(vec![
            public_jwk(&rsa_a(), Algorithm::RS256, "rsa-a"),
            public_jwk(&ec(), Algorithm::ES256, "ec-1"),
        ])
        .await
    }

    fn set_keys(&self, keys: Vec<Jwk>) {
        self.state.lock().expect("issuer state").jwks =
            serde_json::to_value(JwkSet { keys }).expect("jwks json");
    }

    fn set_failing(&self, failing: bool) {
        self.state.lock().expect("issuer state").failing = failing;
    }

    fn hits(&self, path: &str) -> usize {
        self.state
            .lock()
            .expect("issuer state")
            .hits
            .get(path)
            .copied()
            .unwrap_or(0)
    }

    fn settings(&self) -> OidcSettings {
        let mut settings = OidcSettings::new(self.base.clone(), AUDIENCE);
        settings.jwks_uri = Some(format!("{}/keys", self.base));
        settings
    }

    fn verifier(&self) -> OidcVerifier {
        OidcVerifier::new(self.settings()).expect("settings")
    }

    /// Claims that verify: this issuer, the gateway's audience, valid for the next hour.
    fn claims(&self) -> Value {
        json!({
            "iss": self.base,
            "aud": AUDIENCE,
            "sub": "alice",
            "groups": ["ops", "dev"],
            "tenant_id": "acme",
            "iat": NOW_SECONDS,
            "nbf": NOW_SECONDS - 5,
            "exp": NOW_SECONDS + 3600,
        })
    }
}

fn sign(algorithm: Algorithm, kid: &str, key: &EncodingKey, claims: &Value) -> String {
    let mut header = Header::new(algorithm);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, claims, key).expect("sign")
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn rejection(result: Result<mcpgw_authz::VerifiedClaims, TokenError>) -> TokenRejection {
    match result {
        Err(TokenError::Rejected(reason)) => reason,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

#[tokio::test]
async fn an_rs256_token_verifies_with_subject_groups_and_tenant() {
    let issuer = Issuer::start_default().await;
    let verifier = issuer.verifier();
    let token = sign(Algorithm::RS256, "rsa-a", &rsa_a(), &issuer.claims());

    let claims = verifier
        .verify(&token, RESOURCE, now())
        .await
        .expect("verifies");
    assert_eq!(claims.subject, "alice");
    assert_eq!(claims.groups, vec!["ops".to_owned(), "dev".to_owned()]);
    assert_eq!(claims.tenant.as_deref(), Some("acme"));
    assert_eq!(claims.expires_at, at(NOW_SECONDS + 3600));
    let identity = Identity::from_claims(&claims).expect("an identity");
    assert_eq!(identity.principal.to_string(), "user:alice");
    assert_eq!(identity.groups.len(), 2);
    assert_eq!(identity.groups[0].to_string(), "group:ops");
}

#[tokio::test]
async fn an_es256_token_verifies() {
    let issuer = Issuer::start_default().await;
    let verifier = issuer.verifier();
    let token = sign(Algorithm::ES256, "ec-1", &ec(), &issuer.claims());

    let claims = verifier
        .verify(&token, RESOURCE, now())
        .await
        .expect("verifies");
    assert_eq!(claims.subject, "alice");
}

#[tokio::test]
async fn custom_claim_names_are_read() {
    let issuer = Issuer::start_default().await;
    let mut settings = issuer.settings();
    settings.subject_claim = "email".to_owned();
    settings.groups_claim = "realm_access.roles".to_owned();
    settings.tenant_claim = "org".to_owned();
    let verifier = OidcVerifier::new(settings).expect("settings");
    let mut claims = issuer.claims();
    claims["email"] = json!("bob@example.com");
    claims["realm_access"] = json!({"roles": ["auditors"]});
    claims["org"] = json!("globex");
    let token = sign(Algorithm::ES256, "ec-1", &ec(), &claims);

    let verified = verifier
        .verify(&token, RESOURCE, now())
        .await
        .expect("verifies");
    assert_eq!(verified.subject, "bob@example.com");
    assert_eq!(verified.groups, vec!["auditors".to_owned()]);
    assert_eq!(verified.tenant.as_deref(), Some("globex"));
}

#[tokio::test]
async fn absent_groups_and_tenant_are_empty_but_a_missing_subject_is_refused() {
    let issuer = Issuer::start_default().await;
    let verifier = issuer.verifier();
    let mut claims = issuer.claims();
    let object = claims.as_object_mut().expect("object");
    object.remove("groups");
    object.remove("tenant_id");
    let token = sign(Algorithm::RS256, "rsa-a", &rsa_a(), &claims);
    let verified = verifier
        .verify(&token, RESOURCE, now())
        .await
        .expect("verifies");
    assert!(verified.groups.is_empty());
    assert_eq!(verified.tenant, None);

    // Bad input: no `sub`; then groups that are not strings.
    claims.as_object_mut().expect("object").remove("sub");
    let token = sign(Algorithm::RS256, "rsa-a", &rsa_a(), &claims);
    assert_eq!(
        rejection(verifier.verify(&token, RESOURCE, now()).await),
        TokenRejection::MissingClaim("sub".to_owned())
    );
    let mut claims = issuer.claims();
    claims["groups"] = json!([1, 2]);
    let token = sign(Algorithm::RS256, "rsa-a", &rsa_a(), &claims);
    assert_eq!(
        rejection(verifier.verify(&token, RESOURCE, now()).await),
        TokenRejection::MissingClaim("groups".to_owned())
    );
}

#[tokio::test]
async fn a_token_signed_by_another_key_has_a_bad_signature() {
    let issuer = Issuer::start_default().await;
    let verifier = issuer.verifier();
    // Bad input: names the issuer's key `rsa-a` but is signed with the unrelated `rsa-b`.
    let token = sign(Algorithm::RS256, "rsa-a", &rsa_b(), &issuer.claims());
    assert_eq!(
        rejection(verifier.verify(&token, RESOURCE, now()).await),
        TokenRejection::BadSignature
    );

    // Bad input: a valid token whose payload was edited after signing.
    let token = sign(Algorithm::RS256, "rsa-a", &rsa_a(), &issuer.claims());
    let parts: Vec<&str> = token.split('.').collect();
    let mut claims = issuer.claims();
    claims["sub"] = json!("mallory");
    let forged = format!(
        "{}.{}.{}",
        parts[0],
        b64(claims.to_string().as_bytes()),
        parts[2]
    );
    assert_eq!(
        rejection(verifier.verify(&forged, RESOURCE, now()).await),
        TokenRejection::BadSignature
    );
}

#[tokio::test]
async fn wrong_issuer_and_wrong_audience_are_refused() {
    let issuer = Issuer::start_default().await;
    let verifier = issuer.verifier();
    let mut claims = issuer.claims();
    claims["iss"] = json!("https://evil.example");
    let token = sign(Algorithm::RS256, "rsa-a", &rsa_a(), &claims);
    assert_eq!(
        rejection(verifier.verify(&token, RESOURCE, now()).await),
        TokenRejection::WrongIssuer
    );

    let mut claims = issuer.claims();
    claims["aud"] = json!(["another-service"]);
    let token = sign(Algorithm::ES256, "ec-1", &ec(), &claims);
    assert_eq!(
        rejection(verifier.verify(&token, RESOURCE, now()).await),
        TokenRejection::WrongAudience
    );

    // Bad input: no `aud` at all is not "any audience".
    claims.as_object_mut().expect("object").remove("aud");
    let token = sign(Algorithm::ES256, "ec-1", &ec(), &claims);
    assert_eq!(
        rejection(verifier.verify(&token, RESOURCE, now()).await),
        TokenRejection::MissingClaim("aud".to_owned())
    );
}

#[tokio::test]
async fn expiry_and_not_before_are_checked_with_the_leeway() {
    let issuer = Issuer::start_default().await;
    let verifier = issuer.verifier();
    let mut claims = issuer.claims();
    claims["exp"] = json!(NOW_SECONDS - 60);
    let token = sign(Algorithm::RS256, "rsa-a", &rsa_a(), &claims);
    assert_eq!(
        rejection(verifier.verify(&token, RESOURCE, now()).await),
        TokenRejection::Expired
    );
    // Within the 30 s leeway it still passes.
    claims["exp"] = json!(NOW_SECONDS - 10);
    let token = sign(Algorithm::RS256, "rsa-a", &rsa_a(), &claims);
    verifier
        .verify(&token, RESOURCE, now())
        .await
        .expect("inside the leeway");

    let mut claims = issuer.claims();
    claims["nbf"] = json!(NOW_SECONDS + 120);
    let token = sign(Algorithm::RS256, "rsa-a", &rsa_a(), &claims);
    assert_eq!(
        rejection(verifier.verify(&token, RESOURCE, now()).await),
        TokenRejection::NotYetValid
    );
    claims["nbf"] = json!(NOW_SECONDS + 10);
    let token = sign(Algorithm::RS256, "rsa-a", &rsa_a(), &claims);
    verifier
        .verify(&token, RESOURCE, now())
        .await
        .expect("inside the leeway");

    // Bad input: no `exp` at all.
    claims.as_object_mut().expect("object").remove("exp");
    let token = sign(Algorithm::RS256, "rsa-a", &rsa_a(), &claims);
    assert_eq!(
        rejection(verifier.verify(&token, RESOURCE, now()).await),
        TokenRejection::MissingClaim("exp".to_owned())
    );
}

#[tokio::test]
async fn alg_none_and_hmac_are_refused_without_asking_the_issuer() {
    let issuer = Issuer::start_default().await;
    let verifier = issuer.verifier();
    let payload = b64(issuer.claims().to_string().as_bytes());

    // Bad input: an unsigned token.
    let none = format!("{}.{payload}.", b64(br#"{"alg":"none","typ":"JWT"}"#));
    assert_eq!(
        rejection(verifier.verify(&none, RESOURCE, now()).await),
        TokenRejection::UnsupportedAlgorithm("none".to_owned())
    );

    // Bad input: HS256 "signed" with the issuer's public key as the secret (key confusion).
    let jwks = issuer.state.lock().expect("state").jwks.to_string();
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("rsa-a".to_owned());
    let hs = jsonwebtoken::encode(
        &header,
        &issuer.claims(),
        &EncodingKey::from_secret(jwks.as_bytes()),
    )
    .expect("sign hs256");
    assert_eq!(
        rejection(verifier.verify(&hs, RESOURCE, now()).await),
        TokenRejection::UnsupportedAlgorithm("HS256".to_owned())
    );
    assert_eq!(issuer.hits("/keys"), 0);

    // Bad input: not a JWT at all.
    for garbage in ["", "abc", "a.b", "a.b.c.d", "!!!.e30.sig"] {
        assert_eq!(
            rejection(verifier.verify(garbage, RESOURCE, now()).await),
            TokenRejection::Malformed,
            "{garbage:?}"
        );
    }
}

#[tokio::test]
async fn an_unknown_kid_refreshes_once_and_then_is_refused_without_hammering_the_issuer() {
    let issuer = Issuer::start_default().await;
    let verifier = issuer.verifier();
    let good = sign(Algorithm::RS256, "rsa-a", &rsa_a(), &issuer.claims());
    verifier
        .verify(&good, RESOURCE, now())
        .await
        .expect("verifies");
    assert_eq!(issuer.hits("/keys"), 1);

    // Bad input: a kid the issuer never published, signed by some other key.
    let unknown = sign(Algorithm::RS256, "made-up", &rsa_b(), &issuer.claims());
    let later = at(NOW_SECONDS + 20);
    assert_eq!(
        rejection(verifier.verify(&unknown, RESOURCE, later).await),
        TokenRejection::UnknownKey
    );
    assert_eq!(
        issuer.hits("/keys"),
        2,
        "the unknown kid caused one refresh"
    );

    // A flood of unknown kids within the refresh interval asks the issuer nothing more.
    for i in 0..20 {
        let token = sign(
            Algorithm::RS256,
            &format!("made-up-{i}"),
            &rsa_b(),
            &issuer.claims(),
        );
        assert_eq!(
            rejection(
                verifier
                    .verify(&token, RESOURCE, at(NOW_SECONDS + 21))
                    .await
            ),
            TokenRejection::UnknownKey
        );
    }
    assert_eq!(issuer.hits("/keys"), 2);
    // Known keys keep verifying from the cache meanwhile.
    verifier
        .verify(&good, RESOURCE, at(NOW_SECONDS + 22))
        .await
        .expect("cached");
    assert_eq!(issuer.hits("/keys"), 2);
}

#[tokio::test]
async fn a_rotated_key_is_fetched_on_demand() {
    let issuer = Issuer::start_default().await;
    let verifier = issuer.verifier();
    let old = sign(Algorithm::RS256, "rsa-a", &rsa_a(), &issuer.claims());
    verifier
        .verify(&old, RESOURCE, now())
        .await
        .expect("verifies");

    // The issuer rotates: `rsa-b` replaces `rsa-a`.
    issuer.set_keys(vec![public_jwk(&rsa_b(), Algorithm::RS256, "rsa-b")]);
    let new = sign(Algorithm::RS256, "rsa-b", &rsa_b(), &issuer.claims());
    let claims = verifier
        .verify(&new, RESOURCE, at(NOW_SECONDS + 60))
        .await
        .expect("the new key is fetched");
    assert_eq!(claims.subject, "alice");
    assert_eq!(issuer.hits("/keys"), 2);
    // The retired key is gone from the cache too.
    assert_eq!(
        rejection(verifier.verify(&old, RESOURCE, at(NOW_SECONDS + 61)).await),
        TokenRejection::UnknownKey
    );
}

#[tokio::test]
async fn the_jwks_uri_is_discovered_from_the_issuer_when_unset() {
    let issuer = Issuer::start_default().await;
    let mut settings = issuer.settings();
    settings.jwks_uri = None;
    let verifier = OidcVerifier::new(settings).expect("settings");
    assert_eq!(issuer.hits("/.well-known/openid-configuration"), 0);

    let token = sign(Algorithm::ES256, "ec-1", &ec(), &issuer.claims());
    verifier
        .verify(&token, RESOURCE, now())
        .await
        .expect("verifies");
    assert_eq!(issuer.hits("/.well-known/openid-configuration"), 1);
    assert_eq!(issuer.hits("/keys"), 1);

    // The discovered address is remembered: a refresh asks only for the keys.
    let unknown = sign(Algorithm::ES256, "ec-2", &ec(), &issuer.claims());
    let _ = verifier
        .verify(&unknown, RESOURCE, at(NOW_SECONDS + 60))
        .await;
    assert_eq!(issuer.hits("/.well-known/openid-configuration"), 1);
    assert_eq!(issuer.hits("/keys"), 2);
}

#[tokio::test]
async fn an_unreachable_issuer_is_unavailable_not_a_rejection() {
    // A port that was just free: nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    drop(listener);
    let mut settings = OidcSettings::new(format!("http://{address}"), AUDIENCE);
    settings.fetch_timeout = Duration::from_secs(2);
    let verifier = OidcVerifier::new(settings).expect("settings");
    let claims = json!({"iss": format!("http://{address}"), "aud": AUDIENCE, "sub": "a",
        "exp": NOW_SECONDS + 60});
    let token = sign(Algorithm::RS256, "rsa-a", &rsa_a(), &claims);

    let started = std::time::Instant::now();
    match verifier.verify(&token, RESOURCE, now()).await {
        Err(TokenError::Unavailable(message)) => {
            assert!(
                message.contains(&address.to_string()),
                "names the address: {message}"
            );
            assert!(!message.contains(&token), "never echoes the token");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_discovery_document_naming_another_issuer_is_not_trusted() {
    let issuer = Issuer::start_default().await;
    // Configured with a trailing path the metadata does not name.
    let mut settings = OidcSettings::new(format!("{}/realms/other", issuer.base), AUDIENCE);
    settings.jwks_uri = None;
    let verifier = OidcVerifier::new(settings).expect("settings");
    let token = sign(Algorithm::RS256, "rsa-a", &rsa_a(), &issuer.claims());
    assert!(matches!(
        verifier.verify(&token, RESOURCE, now()).await,
        Err(TokenError::Unavailable(_))
    ));
}

#[test]
fn settings_that_cannot_work_are_refused() {
    assert!(OidcVerifier::new(OidcSettings::new("not a url", AUDIENCE)).is_err());
    assert!(OidcVerifier::new(OidcSettings::new("ftp://issuer", AUDIENCE)).is_err());
    assert!(OidcVerifier::new(OidcSettings::new("https://issuer", " ")).is_err());
    let mut settings = OidcSettings::new("https://issuer", AUDIENCE);
    settings.jwks_uri = Some("nope".to_owned());
    assert!(OidcVerifier::new(settings).is_err());
    assert!(OidcVerifier::new(OidcSettings::new("https://issuer", AUDIENCE)).is_ok());
}

#[tokio::test]
async fn an_old_key_set_is_fetched_again_and_kept_while_the_issuer_fails() {
    let issuer = Issuer::start_default().await;
    let verifier = issuer.verifier();
    let max_age = i64::try_from(verifier.settings().jwks_max_age.as_secs()).expect("secs");
    let mut claims = issuer.claims();
    claims["exp"] = json!(NOW_SECONDS + 10 * max_age);
    let token = sign(Algorithm::RS256, "rsa-a", &rsa_a(), &claims);

    verifier
        .verify(&token, RESOURCE, now())
        .await
        .expect("verifies");
    verifier
        .verify(&token, RESOURCE, at(NOW_SECONDS + max_age - 1))
        .await
        .expect("cached");
    assert_eq!(issuer.hits("/keys"), 1);
    verifier
        .verify(&token, RESOURCE, at(NOW_SECONDS + max_age))
        .await
        .expect("fetched again");
    assert_eq!(issuer.hits("/keys"), 2, "an old key set is fetched again");

    // The issuer fails: the known key keeps verifying from the old set.
    issuer.set_failing(true);
    verifier
        .verify(&token, RESOURCE, at(NOW_SECONDS + 2 * max_age))
        .await
        .expect("the old key still verifies");
    assert_eq!(issuer.hits("/keys"), 3);

    // Without any key set, a failing issuer is unavailable, and is not asked again at once.
    let fresh = issuer.verifier();
    for _ in 0..5 {
        assert!(matches!(
            fresh.verify(&token, RESOURCE, now()).await,
            Err(TokenError::Unavailable(_))
        ));
    }
    assert_eq!(issuer.hits("/keys"), 4, "one attempt per refresh interval");
    issuer.set_failing(false);
    fresh
        .verify(&token, RESOURCE, at(NOW_SECONDS + 60))
        .await
        .expect("recovers after the interval");
}

/// The local issuer as the suite's [`TokenIssuer`]: `rsa-a` and `ec-1` are trusted,
/// `rsa-b` signs the impostor, the unpublished and the rotated tokens.
mod contract {
    use std::time::Duration;

    use async_trait::async_trait;
    use jsonwebtoken::Algorithm;
    use mcpgw_testkit::token_verifier_suite::{SigningKey, TokenIssuer};
    use serde_json::Value;

    use super::{Issuer, ec, public_jwk, rsa_a, rsa_b, sign};

    const ROTATED_KID: &str = "rsa-rotated";

    #[async_trait]
    impl TokenIssuer for Issuer {
        fn issuer(&self) -> String {
            self.base.clone()
        }

        fn audience(&self) -> String {
            super::AUDIENCE.to_owned()
        }

        fn leeway(&self) -> Duration {
            self.settings().leeway
        }

        fn sign(&self, claims: &Value, key: SigningKey) -> String {
            match key {
                SigningKey::Rs256 => sign(Algorithm::RS256, "rsa-a", &rsa_a(), claims),
                SigningKey::Es256 => sign(Algorithm::ES256, "ec-1", &ec(), claims),
                SigningKey::Impostor => sign(Algorithm::RS256, "rsa-a", &rsa_b(), claims),
                SigningKey::Unpublished => sign(Algorithm::RS256, "made-up", &rsa_b(), claims),
                SigningKey::Rotated => sign(Algorithm::RS256, ROTATED_KID, &rsa_b(), claims),
            }
        }

        async fn publish_new_key(&self) {
            self.set_keys(vec![
                public_jwk(&rsa_a(), Algorithm::RS256, "rsa-a"),
                public_jwk(&ec(), Algorithm::ES256, "ec-1"),
                public_jwk(&rsa_b(), Algorithm::RS256, ROTATED_KID),
            ]);
        }

        async fn take_key_set_away(&self) {
            self.set_failing(true);
        }
    }

    mcpgw_testkit::token_verifier_contract_suite!({
        let issuer = Issuer::start_default().await;
        (issuer.verifier(), issuer)
    });
}

/// A verifier for an authorization server of MCP clients: the audience is the resource the
/// token is presented to, and the scopes are read.
fn resource_verifier(issuer: &Issuer) -> OidcVerifier {
    let mut settings = OidcSettings::for_resource(issuer.base.clone());
    settings.jwks_uri = Some(format!("{}/keys", issuer.base));
    OidcVerifier::new(settings).expect("settings")
}

#[tokio::test]
async fn without_a_configured_audience_the_token_must_name_the_resource_it_is_presented_to() {
    let issuer = Issuer::start_default().await;
    let verifier = resource_verifier(&issuer);
    let mut claims = issuer.claims();
    claims["aud"] = json!(RESOURCE);
    claims["scope"] = json!("openid mcp:tools");
    let token = sign(Algorithm::RS256, "rsa-a", &rsa_a(), &claims);
    let verified = verifier
        .verify(&token, RESOURCE, now())
        .await
        .expect("a token minted for this resource verifies");
    let scopes = verified.scopes.expect("the issuer narrows by scope");
    assert_eq!(scopes.scopes(), ["openid", "mcp:tools"]);

    // The same token presented to another resource is for another audience (RFC 8707): a
    // token minted for one MCP server cannot be replayed at another that trusts the issuer.
    assert_eq!(
        rejection(
            verifier
                .verify(&token, "http://other.test/mcp", now())
                .await
        ),
        TokenRejection::WrongAudience
    );
    // Bad input: a token whose audience is the issuer's generic one.
    let generic = sign(Algorithm::RS256, "rsa-a", &rsa_a(), &issuer.claims());
    assert_eq!(
        rejection(verifier.verify(&generic, RESOURCE, now()).await),
        TokenRejection::WrongAudience
    );
}

#[tokio::test]
async fn scopes_are_read_from_a_string_or_an_array_and_a_wrong_type_is_refused() {
    let issuer = Issuer::start_default().await;
    let mut settings = OidcSettings::for_resource(issuer.base.clone());
    settings.jwks_uri = Some(format!("{}/keys", issuer.base));
    settings.scope_claim = "scp".to_owned();
    let verifier = OidcVerifier::new(settings).expect("settings");
    let with_scopes = |scopes: Value| {
        let mut claims = issuer.claims();
        claims["aud"] = json!(RESOURCE);
        claims["scp"] = scopes;
        sign(Algorithm::ES256, "ec-1", &ec(), &claims)
    };
    let from_array = verifier
        .verify(
            &with_scopes(json!(["mcp:tools:math", "mcp:admin"])),
            RESOURCE,
            now(),
        )
        .await
        .expect("verifies");
    assert_eq!(
        from_array.scopes.expect("scopes").scopes(),
        ["mcp:tools:math", "mcp:admin"]
    );
    // No scope claim at all: held to no scope, not free of scopes.
    let mut claims = issuer.claims();
    claims["aud"] = json!(RESOURCE);
    let none = verifier
        .verify(
            &sign(Algorithm::ES256, "ec-1", &ec(), &claims),
            RESOURCE,
            now(),
        )
        .await
        .expect("verifies");
    assert!(none.scopes.expect("held to scopes").scopes().is_empty());
    // Bad input: a number, and an array holding a number.
    for bad in [json!(7), json!(["mcp:tools", 7])] {
        assert_eq!(
            rejection(
                verifier
                    .verify(&with_scopes(bad.clone()), RESOURCE, now())
                    .await
            ),
            TokenRejection::MissingClaim("scp".to_owned()),
            "{bad}"
        );
    }
    // The legacy settings never read scopes.
    let legacy = issuer.verifier();
    let mut claims = issuer.claims();
    claims["scope"] = json!("openid");
    let verified = legacy
        .verify(
            &sign(Algorithm::RS256, "rsa-a", &rsa_a(), &claims),
            RESOURCE,
            now(),
        )
        .await
        .expect("verifies");
    assert_eq!(verified.scopes, None);
    assert!(legacy.scopes_supported().is_empty());
    assert_eq!(verifier.scopes_supported(), ["mcp:tools", "mcp:admin"]);
}

#[tokio::test]
async fn several_issuers_each_verify_their_own_tokens_and_a_stranger_is_refused_unasked() {
    let first = Issuer::start_default().await;
    let second = Issuer::start(vec![public_jwk(&rsa_b(), Algorithm::RS256, "rsa-b")]).await;
    let mut second_settings = OidcSettings::for_resource(second.base.clone());
    second_settings.jwks_uri = Some(format!("{}/keys", second.base));
    second_settings.audience = Some("api://mcpgw".to_owned());
    second_settings.subject_claim = "oid".to_owned();
    let set = IssuerSet::new(vec![
        resource_verifier(&first),
        OidcVerifier::new(second_settings).expect("settings"),
    ])
    .expect("two issuers");
    assert_eq!(
        set.authorization_servers(),
        [first.base.clone(), second.base.clone()]
    );

    let mut claims = first.claims();
    claims["aud"] = json!(RESOURCE);
    claims["scope"] = json!("mcp:tools");
    let from_first = sign(Algorithm::RS256, "rsa-a", &rsa_a(), &claims);
    assert_eq!(
        set.verify(&from_first, RESOURCE, now())
            .await
            .expect("the first issuer's token")
            .subject,
        "alice"
    );
    let mut claims = second.claims();
    claims["aud"] = json!("api://mcpgw");
    claims["oid"] = json!("3f2a-77");
    let from_second = sign(Algorithm::RS256, "rsa-b", &rsa_b(), &claims);
    assert_eq!(
        set.verify(&from_second, RESOURCE, now())
            .await
            .expect("the second issuer's token, with its own audience and subject claim")
            .subject,
        "3f2a-77"
    );
    assert_eq!(first.hits("/keys"), 1);
    assert_eq!(second.hits("/keys"), 1);

    // A token naming the first issuer but signed with the second one's key: refused by the
    // first issuer's keys.
    let mut claims = first.claims();
    claims["aud"] = json!(RESOURCE);
    let crossed = sign(Algorithm::RS256, "rsa-b", &rsa_b(), &claims);
    assert_eq!(
        rejection(set.verify(&crossed, RESOURCE, now()).await),
        TokenRejection::UnknownKey
    );
    // Bad input: an issuer nobody trusts, and no `iss` at all. Neither issuer is asked.
    let before = (first.hits("/keys"), second.hits("/keys"));
    let mut claims = first.claims();
    claims["iss"] = json!("https://stranger.example");
    let stranger = sign(Algorithm::RS256, "rsa-a", &rsa_a(), &claims);
    assert_eq!(
        rejection(set.verify(&stranger, RESOURCE, now()).await),
        TokenRejection::WrongIssuer
    );
    claims.as_object_mut().expect("object").remove("iss");
    let anonymous = sign(Algorithm::RS256, "rsa-a", &rsa_a(), &claims);
    assert_eq!(
        rejection(set.verify(&anonymous, RESOURCE, now()).await),
        TokenRejection::WrongIssuer
    );
    // An unsigned token is refused as such, whoever it names.
    let unsigned = format!(
        "{}.{}.",
        b64(br#"{"alg":"none"}"#),
        b64(br#"{"iss":"https://stranger.example","sub":"x"}"#)
    );
    assert_eq!(
        rejection(set.verify(&unsigned, RESOURCE, now()).await),
        TokenRejection::UnsupportedAlgorithm("none".to_owned())
    );
    assert_eq!((first.hits("/keys"), second.hits("/keys")), before);
    // The same issuer twice is a setup error.
    let twice = IssuerSet::new(vec![resource_verifier(&first), resource_verifier(&first)]);
    assert!(twice.unwrap_err().to_string().contains("listed twice"));
}
