//! Bearer token verification against an OpenID Connect issuer: the [`TokenVerifier`] port of
//! `mcpgw-authz`, for `Authorization: Bearer <jwt>` credentials; and single sign-on of the web
//! console's operators at an OpenID provider: its [`SignInProvider`](mcpgw_authz::SignInProvider)
//! port, as [`OidcSignIn`] (the authorization code flow with PKCE).
//!
//! [`OidcVerifier`] checks a token's signature with the issuer's key set (JWKS), accepting only
//! RS256 and ES256, then its `iss`, `aud`, `exp` and `nbf` claims (with a small leeway), and
//! reads the subject, groups and tenant from the configured claims. The key set comes from
//! `jwks_uri`, or from the issuer's discovery document
//! (`{issuer}/.well-known/openid-configuration`) when `jwks_uri` is not configured. It is
//! fetched on first use, kept in memory, fetched again when it is older than
//! [`OidcSettings::jwks_max_age`], and refreshed at once when a token names a key id it does not
//! hold, but never more often than [`OidcSettings::jwks_refresh_interval`], so a flood of tokens
//! with made-up key ids cannot turn the gateway against its issuer.
//!
//! What it must never do: accept `alg: none`, a symmetric (HS*) algorithm or any algorithm
//! other than RS256/ES256 (a public key must never be usable as an HMAC secret); judge the
//! claims of a token whose signature did not verify; blame a token when the issuer could not
//! be reached (that is [`TokenError::Unavailable`], a 503, not a 401); put a token or a key in
//! a log line or an error message; wait on the issuer without a time limit.
//!
//! # Example
//!
//! Making a verifier contacts nobody, and an unsigned token is refused before any key is
//! fetched, so this runs without an issuer:
//!
//! ```rust
//! use mcpgw_authz::{TokenError, TokenRejection, TokenVerifier as _};
//! use mcpgw_core::Timestamp;
//! use mcpgw_oidc::{OidcSettings, OidcVerifier};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), mcpgw_oidc::OidcSetupError> {
//! let verifier = OidcVerifier::new(OidcSettings::new("https://issuer.example.com", "mcpgw"))?;
//!
//! // {"alg":"none"} . {"sub":"alice"} . no signature
//! let unsigned = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.";
//! let now = Timestamp::from_unix_micros(1_700_000_000_000_000);
//! match verifier.verify(unsigned, "https://mcp.example.com/mcp", now).await {
//!     Err(TokenError::Rejected(TokenRejection::UnsupportedAlgorithm(alg))) => assert_eq!(alg, "none"),
//!     other => panic!("an unsigned token must be refused, not {other:?}"),
//! }
//! # Ok(())
//! # }
//! ```

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use mcpgw_authz::{ScopeMap, TokenError, TokenRejection, TokenVerifier, VerifiedClaims};
use mcpgw_core::Timestamp;
use serde::Deserialize;
use serde_json::{Map, Value};

mod sign_in;

pub use sign_in::{OidcSignIn, SignInSettings};

/// The path of the discovery document under the issuer (OpenID Connect Discovery 1.0, §4).
pub const DISCOVERY_PATH: &str = "/.well-known/openid-configuration";

/// The largest discovery document or key set read from the issuer.
const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// How the verifier is set up (`auth.jwt` / `auth.oidc` in the configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcSettings {
    /// The expected `iss`, compared exactly; also the base of discovery.
    pub issuer: String,
    /// The expected `aud`: a token whose audience does not include it is refused. `None`: the
    /// resource the token is presented to (RFC 8707 audience binding).
    pub audience: Option<String>,
    /// Where the key set lives; `None` discovers it from the issuer's metadata.
    pub jwks_uri: Option<String>,
    /// The claim that names the subject (`sub`); the principal is `user:<subject>`.
    pub subject_claim: String,
    /// The claim that lists the groups (`groups`): an array of strings or one string; absent
    /// means no groups.
    pub groups_claim: String,
    /// The claim that names the tenant (`tenant_id`); absent means no tenant.
    pub tenant_claim: String,
    /// How the token's scopes read, when this issuer's tokens are held to their scopes; `None`
    /// judges them by the holder's roles alone.
    pub scopes: Option<ScopeMap>,
    /// The claim that lists the granted scopes: a space-separated string (`scope`) or an array
    /// of strings (`scp`). Read only when `scopes` is set; absent means no scope.
    pub scope_claim: String,
    /// Allowed clock skew for `exp` and `nbf`.
    pub leeway: Duration,
    /// The shortest time between two fetches of the key set caused by unknown key ids (or by
    /// a failed fetch): the rate limit that protects the issuer.
    pub jwks_refresh_interval: Duration,
    /// A key set older than this is fetched again on the next token (if the fetch fails, the
    /// old keys stay in use).
    pub jwks_max_age: Duration,
    /// The time limit of one request to the issuer (connect included).
    pub fetch_timeout: Duration,
}

impl OidcSettings {
    /// Settings with the defaults: claims `sub`, `groups`, `tenant_id`; 30 s leeway; a refresh
    /// at most every 10 s; keys kept up to one hour; 5 s per request to the issuer. Tokens are
    /// judged by their holder's roles alone (no scopes read).
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>) -> Self {
        Self {
            audience: Some(audience.into()),
            scopes: None,
            ..Self::for_resource(issuer)
        }
    }

    /// Settings for an authorization server of MCP clients: tokens must be minted for the
    /// resource they are presented to, and are held to their scopes (`scope` claim, the
    /// built-in scopes); the other defaults as [`OidcSettings::new`].
    pub fn for_resource(issuer: impl Into<String>) -> Self {
        Self {
            issuer: issuer.into(),
            audience: None,
            jwks_uri: None,
            subject_claim: "sub".to_owned(),
            groups_claim: "groups".to_owned(),
            tenant_claim: "tenant_id".to_owned(),
            scopes: Some(ScopeMap::new()),
            scope_claim: "scope".to_owned(),
            leeway: Duration::from_secs(30),
            jwks_refresh_interval: Duration::from_secs(10),
            jwks_max_age: Duration::from_secs(3600),
            fetch_timeout: Duration::from_secs(5),
        }
    }
}

/// The settings cannot work; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid jwt settings: {0}")]
pub struct OidcSetupError(String);

/// One usable key of the issuer's key set.
struct IssuerKey {
    kid: Option<String>,
    /// RS256 or ES256: the one algorithm this key verifies.
    algorithm: Algorithm,
    key: DecodingKey,
}

/// The issuer's keys as last fetched.
struct KeySet {
    keys: Vec<Arc<IssuerKey>>,
    fetched_at: Timestamp,
}

enum Lookup {
    Found(Arc<IssuerKey>),
    Missing,
}

impl KeySet {
    /// The key for a token's `kid` and algorithm. A token without `kid` is accepted only when
    /// exactly one key of its algorithm is in the set.
    fn find(&self, kid: Option<&str>, algorithm: Algorithm) -> Lookup {
        let mut candidates = self
            .keys
            .iter()
            .filter(|key| key.algorithm == algorithm)
            .filter(|key| kid.is_none() || key.kid.as_deref() == kid);
        match (candidates.next(), candidates.next()) {
            (Some(key), None) => Lookup::Found(Arc::clone(key)),
            _ => Lookup::Missing,
        }
    }

    fn is_older_than(&self, age: Duration, now: Timestamp) -> bool {
        elapsed_since(self.fetched_at, now).is_none_or(|elapsed| elapsed >= age)
    }
}

/// How long ago `then` was; `None` when the clock went backwards (treated as "long ago").
fn elapsed_since(then: Timestamp, now: Timestamp) -> Option<Duration> {
    let micros = now.unix_micros().checked_sub(then.unix_micros())?;
    u64::try_from(micros).ok().map(Duration::from_micros)
}

/// What the fetching side remembers; guarded by an async mutex so that one fetch runs at a time
/// and concurrent verifications wait for it instead of starting their own.
#[derive(Default)]
struct FetchState {
    /// The discovered (or configured) key set address.
    jwks_uri: Option<String>,
    /// When the key set was last requested, successfully or not.
    last_attempt: Option<Timestamp>,
}

/// Verifies bearer JWTs against an OpenID Connect issuer. Cheap to share behind an `Arc`.
pub struct OidcVerifier {
    settings: OidcSettings,
    http: reqwest::Client,
    keys: RwLock<Option<Arc<KeySet>>>,
    fetch: tokio::sync::Mutex<FetchState>,
}

impl std::fmt::Debug for OidcVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcVerifier")
            .field("issuer", &self.settings.issuer)
            .field("audience", &self.settings.audience)
            .finish_non_exhaustive()
    }
}

impl OidcVerifier {
    /// Checks the settings and prepares the HTTP client; contacts nobody (the key set is
    /// fetched on the first token). Logs a warning when the issuer or the key set address is
    /// not HTTPS: keys fetched over plain HTTP can be replaced on the way.
    pub fn new(settings: OidcSettings) -> Result<Self, OidcSetupError> {
        let issuer = reqwest::Url::parse(&settings.issuer)
            .map_err(|error| OidcSetupError(format!("issuer `{}`: {error}", settings.issuer)))?;
        if !matches!(issuer.scheme(), "http" | "https") {
            return Err(OidcSetupError(format!(
                "issuer `{}`: must be an http(s) URL",
                settings.issuer
            )));
        }
        if settings
            .audience
            .as_deref()
            .is_some_and(|audience| audience.trim().is_empty())
        {
            return Err(OidcSetupError("audience: must not be empty".to_owned()));
        }
        for (field, claim) in [
            ("subject_claim", &settings.subject_claim),
            ("groups_claim", &settings.groups_claim),
            ("tenant_claim", &settings.tenant_claim),
            ("scope_claim", &settings.scope_claim),
        ] {
            if claim.trim().is_empty() {
                return Err(OidcSetupError(format!("{field}: must not be empty")));
            }
        }
        let mut jwks_scheme_https = true;
        if let Some(uri) = &settings.jwks_uri {
            let url = reqwest::Url::parse(uri)
                .map_err(|error| OidcSetupError(format!("jwks_uri `{uri}`: {error}")))?;
            if !matches!(url.scheme(), "http" | "https") {
                return Err(OidcSetupError(format!(
                    "jwks_uri `{uri}`: must be an http(s) URL"
                )));
            }
            jwks_scheme_https = url.scheme() == "https";
        }
        if issuer.scheme() != "https" || !jwks_scheme_https {
            tracing::warn!(
                issuer = %settings.issuer,
                jwks_uri = settings.jwks_uri.as_deref().unwrap_or("(discovered)"),
                "the jwt issuer is not reached over https: its signing keys can be replaced in \
                 transit; use https outside of local testing"
            );
        }
        let http = reqwest::Client::builder()
            .timeout(settings.fetch_timeout)
            .connect_timeout(settings.fetch_timeout)
            .redirect(reqwest::redirect::Policy::limited(3))
            .build()
            .map_err(|error| OidcSetupError(format!("http client: {error}")))?;
        let fetch = FetchState {
            jwks_uri: settings.jwks_uri.clone(),
            last_attempt: None,
        };
        Ok(Self {
            settings,
            http,
            keys: RwLock::new(None),
            fetch: tokio::sync::Mutex::new(fetch),
        })
    }

    pub fn settings(&self) -> &OidcSettings {
        &self.settings
    }

    fn current_keys(&self) -> Option<Arc<KeySet>> {
        self.keys
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The key that verifies a token with this `kid` and algorithm, fetching the key set when
    /// there is none, when it is too old, or (rate-limited) when it lacks the key.
    async fn key_for(
        &self,
        kid: Option<&str>,
        algorithm: Algorithm,
        now: Timestamp,
    ) -> Result<Arc<IssuerKey>, TokenError> {
        let seen = self.current_keys();
        if let Some(set) = &seen
            && !set.is_older_than(self.settings.jwks_max_age, now)
            && let Lookup::Found(key) = set.find(kid, algorithm)
        {
            return Ok(key);
        }

        let mut state = self.fetch.lock().await;
        let latest = self.current_keys();
        let fetched_meanwhile = match (&seen, &latest) {
            (Some(seen), Some(latest)) => !Arc::ptr_eq(seen, latest),
            (None, Some(_)) => true,
            _ => false,
        };
        if fetched_meanwhile
            && let Some(set) = &latest
            && !set.is_older_than(self.settings.jwks_max_age, now)
        {
            // Another verification refreshed the set while this one waited: that was the
            // refresh this token gets.
            return match set.find(kid, algorithm) {
                Lookup::Found(key) => Ok(key),
                Lookup::Missing => Err(TokenError::Rejected(TokenRejection::UnknownKey)),
            };
        }

        let recently_tried = state.last_attempt.is_some_and(|at| {
            elapsed_since(at, now).is_some_and(|e| e < self.settings.jwks_refresh_interval)
        });
        if recently_tried {
            return match &latest {
                Some(set) => match set.find(kid, algorithm) {
                    Lookup::Found(key) => Ok(key),
                    Lookup::Missing => Err(TokenError::Rejected(TokenRejection::UnknownKey)),
                },
                None => Err(TokenError::Unavailable(format!(
                    "the key set of issuer `{}` could not be fetched recently; next attempt \
                     after {} s",
                    self.settings.issuer,
                    self.settings.jwks_refresh_interval.as_secs()
                ))),
            };
        }

        state.last_attempt = Some(now);
        match self.fetch_key_set(&mut state, now).await {
            Ok(set) => {
                let set = Arc::new(set);
                *self.keys.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&set));
                match set.find(kid, algorithm) {
                    Lookup::Found(key) => Ok(key),
                    Lookup::Missing => Err(TokenError::Rejected(TokenRejection::UnknownKey)),
                }
            }
            Err(message) => {
                tracing::warn!(issuer = %self.settings.issuer, error = %message,
                    "fetching the jwt issuer's key set failed");
                // Old keys still verify the tokens they know while the issuer is away.
                if let Some(set) = &latest
                    && let Lookup::Found(key) = set.find(kid, algorithm)
                {
                    return Ok(key);
                }
                Err(TokenError::Unavailable(message))
            }
        }
    }

    async fn fetch_key_set(
        &self,
        state: &mut FetchState,
        now: Timestamp,
    ) -> Result<KeySet, String> {
        let jwks_uri = match &state.jwks_uri {
            Some(uri) => uri.clone(),
            None => {
                let uri = self.discover_jwks_uri().await?;
                state.jwks_uri = Some(uri.clone());
                uri
            }
        };
        let body = self.get_json(&jwks_uri).await?;
        let set: JwkSet = serde_json::from_value(body)
            .map_err(|error| format!("the key set at `{jwks_uri}` is not a jwk set: {error}"))?;
        let keys: Vec<Arc<IssuerKey>> = set
            .keys
            .iter()
            .filter_map(usable_key)
            .map(Arc::new)
            .collect();
        tracing::debug!(jwks_uri = %jwks_uri, usable = keys.len(), listed = set.keys.len(),
            "fetched the jwt issuer's key set");
        Ok(KeySet {
            keys,
            fetched_at: now,
        })
    }

    async fn discover_jwks_uri(&self) -> Result<String, String> {
        #[derive(Deserialize)]
        struct Metadata {
            issuer: String,
            jwks_uri: String,
        }
        let url = format!(
            "{}{DISCOVERY_PATH}",
            self.settings.issuer.trim_end_matches('/')
        );
        let body = self.get_json(&url).await?;
        let metadata: Metadata = serde_json::from_value(body).map_err(|error| {
            format!("the discovery document at `{url}` lacks issuer or jwks_uri: {error}")
        })?;
        if metadata.issuer.trim_end_matches('/') != self.settings.issuer.trim_end_matches('/') {
            return Err(format!(
                "the discovery document at `{url}` names issuer `{}`, not the configured `{}`",
                metadata.issuer, self.settings.issuer
            ));
        }
        Ok(metadata.jwks_uri)
    }

    async fn get_json(&self, url: &str) -> Result<Value, String> {
        let response = self
            .http
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|error| format!("GET `{url}` failed: {error}"))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("GET `{url}` answered {status}"));
        }
        if response
            .content_length()
            .is_some_and(|length| length > MAX_DOCUMENT_BYTES as u64)
        {
            return Err(format!("GET `{url}`: the document is too large"));
        }
        let body = response
            .bytes()
            .await
            .map_err(|error| format!("GET `{url}`: reading the body failed: {error}"))?;
        if body.len() > MAX_DOCUMENT_BYTES {
            return Err(format!("GET `{url}`: the document is too large"));
        }
        serde_json::from_slice(&body).map_err(|error| format!("GET `{url}`: not json: {error}"))
    }

    fn check_claims(
        &self,
        claims: &Map<String, Value>,
        now: Timestamp,
    ) -> Result<VerifiedClaims, TokenRejection> {
        let leeway = i64::try_from(self.settings.leeway.as_secs()).unwrap_or(i64::MAX);
        let now_seconds = now.unix_micros().div_euclid(1_000_000);
        let exp = numeric_date(claims, "exp")?
            .ok_or_else(|| TokenRejection::MissingClaim("exp".to_owned()))?;
        if exp.saturating_add(leeway) <= now_seconds {
            return Err(TokenRejection::Expired);
        }
        if let Some(nbf) = numeric_date(claims, "nbf")?
            && nbf > now_seconds.saturating_add(leeway)
        {
            return Err(TokenRejection::NotYetValid);
        }

        let subject_claim = &self.settings.subject_claim;
        let subject = match claim(claims, subject_claim) {
            Some(Value::String(subject)) => subject.clone(),
            _ => return Err(TokenRejection::MissingClaim(subject_claim.clone())),
        };
        let groups_claim = &self.settings.groups_claim;
        let groups = groups_of(claim(claims, groups_claim))
            .ok_or_else(|| TokenRejection::MissingClaim(groups_claim.clone()))?;
        let tenant_claim = &self.settings.tenant_claim;
        let tenant = match claim(claims, tenant_claim) {
            None | Some(Value::Null) => None,
            Some(Value::String(tenant)) => Some(tenant.clone()),
            Some(_) => return Err(TokenRejection::MissingClaim(tenant_claim.clone())),
        };
        let scopes = match &self.settings.scopes {
            None => None,
            Some(map) => Some(map.limit(&scopes_of(claims, &self.settings.scope_claim)?)),
        };
        Ok(VerifiedClaims {
            subject,
            groups,
            tenant,
            expires_at: Timestamp::from_unix_micros(exp.saturating_mul(1_000_000)),
            scopes,
        })
    }
}

/// The granted scopes: a space-separated string or an array of strings; none when absent.
fn scopes_of<'a>(
    claims: &'a Map<String, Value>,
    scope_claim: &str,
) -> Result<Vec<&'a str>, TokenRejection> {
    match claim(claims, scope_claim) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(scopes)) => Ok(scopes.split_ascii_whitespace().collect()),
        Some(Value::Array(items)) => items
            .iter()
            .map(Value::as_str)
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| TokenRejection::MissingClaim(scope_claim.to_owned())),
        Some(_) => Err(TokenRejection::MissingClaim(scope_claim.to_owned())),
    }
}

/// The groups a groups claim lists: an array of strings or one string; absent or `null` is no
/// groups. `None` when it holds anything else.
pub(crate) fn groups_of(value: Option<&Value>) -> Option<Vec<String>> {
    match value {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::String(group)) => Some(vec![group.clone()]),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect(),
        Some(_) => None,
    }
}

/// A claim by name: the top-level member of that name, else a dotted path into nested objects
/// (`realm_access.roles`).
pub(crate) fn claim<'a>(claims: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    if let Some(value) = claims.get(name) {
        return Some(value);
    }
    let mut parts = name.split('.');
    let mut value = claims.get(parts.next()?)?;
    for part in parts {
        value = value.as_object()?.get(part)?;
    }
    Some(value)
}

/// A NumericDate claim (seconds since the epoch; fractions are cut). `Ok(None)` when absent.
fn numeric_date(claims: &Map<String, Value>, name: &str) -> Result<Option<i64>, TokenRejection> {
    match claims.get(name) {
        None => Ok(None),
        Some(Value::Number(number)) => number
            .as_i64()
            .or_else(|| {
                number
                    .as_f64()
                    .filter(|seconds| seconds.is_finite() && seconds.abs() < 1e15)
                    .map(|seconds| seconds.trunc() as i64)
            })
            .map(Some)
            .ok_or_else(|| TokenRejection::MissingClaim(name.to_owned())),
        Some(_) => Err(TokenRejection::MissingClaim(name.to_owned())),
    }
}

/// An RS256 or ES256 (P-256) signing key of the set; others are skipped. A key whose `use` is
/// not `sig` or whose `alg` names another algorithm is skipped too.
fn usable_key(jwk: &Jwk) -> Option<IssuerKey> {
    use jsonwebtoken::jwk::{KeyAlgorithm, PublicKeyUse};
    if jwk
        .common
        .public_key_use
        .as_ref()
        .is_some_and(|key_use| *key_use != PublicKeyUse::Signature)
    {
        return None;
    }
    let algorithm = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(params) if params.curve == EllipticCurve::P256 => {
            Algorithm::ES256
        }
        _ => return None,
    };
    let declared_matches = match jwk.common.key_algorithm {
        None => true,
        Some(KeyAlgorithm::RS256) => algorithm == Algorithm::RS256,
        Some(KeyAlgorithm::ES256) => algorithm == Algorithm::ES256,
        Some(_) => false,
    };
    if !declared_matches {
        return None;
    }
    let key = DecodingKey::from_jwk(jwk).ok()?;
    Some(IssuerKey {
        kid: jwk.common.key_id.clone(),
        algorithm,
        key,
    })
}

/// The parts of the JOSE header that choose the key, read before anything is trusted.
#[derive(Deserialize)]
struct RawHeader {
    alg: Value,
    #[serde(default)]
    kid: Option<String>,
}

fn read_header(token: &str) -> Result<(Algorithm, Option<String>), TokenRejection> {
    let mut parts = token.split('.');
    let (Some(header), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenRejection::Malformed);
    };
    let bytes = URL_SAFE_NO_PAD
        .decode(header)
        .map_err(|_| TokenRejection::Malformed)?;
    let header: RawHeader =
        serde_json::from_slice(&bytes).map_err(|_| TokenRejection::Malformed)?;
    let algorithm = match header.alg {
        Value::String(alg) => match alg.as_str() {
            "RS256" => Algorithm::RS256,
            "ES256" => Algorithm::ES256,
            _ => return Err(TokenRejection::UnsupportedAlgorithm(printable(&alg))),
        },
        _ => return Err(TokenRejection::Malformed),
    };
    Ok((algorithm, header.kid))
}

/// An attacker-chosen string made safe for a log line.
fn printable(raw: &str) -> String {
    raw.chars().filter(|c| !c.is_control()).take(32).collect()
}

fn rejection_of(error: &jsonwebtoken::errors::Error) -> TokenRejection {
    match error.kind() {
        ErrorKind::InvalidSignature => TokenRejection::BadSignature,
        // The key found for the kid is of another family than the header's algorithm.
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidEcdsaKey | ErrorKind::InvalidRsaKey(_) => {
            TokenRejection::BadSignature
        }
        ErrorKind::InvalidIssuer => TokenRejection::WrongIssuer,
        ErrorKind::InvalidAudience => TokenRejection::WrongAudience,
        ErrorKind::ExpiredSignature => TokenRejection::Expired,
        ErrorKind::ImmatureSignature => TokenRejection::NotYetValid,
        ErrorKind::MissingRequiredClaim(claim) | ErrorKind::InvalidClaimFormat(claim) => {
            TokenRejection::MissingClaim(claim.clone())
        }
        ErrorKind::UnsupportedAlgorithm | ErrorKind::InvalidAlgorithmName => {
            TokenRejection::UnsupportedAlgorithm("unknown".to_owned())
        }
        _ => TokenRejection::Malformed,
    }
}

#[async_trait]
impl TokenVerifier for OidcVerifier {
    async fn verify(
        &self,
        bearer_token: &str,
        resource: &str,
        now: Timestamp,
    ) -> Result<VerifiedClaims, TokenError> {
        let token = bearer_token.trim();
        let (algorithm, kid) = read_header(token).map_err(TokenError::Rejected)?;
        let key = self.key_for(kid.as_deref(), algorithm, now).await?;

        let audience = self.settings.audience.as_deref().unwrap_or(resource);
        let mut validation = Validation::new(key.algorithm);
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&[audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        // `exp` and `nbf` are judged against the caller's clock in `check_claims`.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.leeway = self.settings.leeway.as_secs();
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation)
            .map_err(|error| TokenError::Rejected(rejection_of(&error)))?;
        self.check_claims(&data.claims, now)
            .map_err(TokenError::Rejected)
    }

    fn authorization_servers(&self) -> Vec<String> {
        vec![self.settings.issuer.clone()]
    }

    fn scopes_supported(&self) -> Vec<String> {
        self.settings
            .scopes
            .as_ref()
            .map(ScopeMap::names)
            .unwrap_or_default()
    }
}

/// Several trusted issuers at once, each with its own settings: a token goes to the verifier of
/// the issuer its (not yet trusted) `iss` claim names, which then checks everything, `iss`
/// included. A token naming none of them is refused as from another issuer, without any
/// request to an issuer.
#[derive(Debug)]
pub struct IssuerSet {
    verifiers: Vec<OidcVerifier>,
}

impl IssuerSet {
    /// The verifiers of the issuers, in the order `authorization_servers` lists them. Two of
    /// the same issuer are refused.
    pub fn new(verifiers: Vec<OidcVerifier>) -> Result<Self, OidcSetupError> {
        for (index, verifier) in verifiers.iter().enumerate() {
            let issuer = verifier.settings.issuer.as_str();
            if verifiers[..index]
                .iter()
                .any(|earlier| earlier.settings.issuer == issuer)
            {
                return Err(OidcSetupError(format!("issuer `{issuer}` is listed twice")));
            }
        }
        Ok(Self { verifiers })
    }

    pub fn verifiers(&self) -> &[OidcVerifier] {
        &self.verifiers
    }

    fn verifier_for(&self, token: &str) -> Option<&OidcVerifier> {
        if let [only] = self.verifiers.as_slice() {
            return Some(only);
        }
        let issuer = unverified_issuer(token)?;
        self.verifiers
            .iter()
            .find(|verifier| verifier.settings.issuer == issuer)
    }
}

/// The `iss` of a token's payload, read without any check: only to choose whose keys check it.
fn unverified_issuer(token: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Issuer {
        iss: String,
    }
    let payload = token.split('.').nth(1)?;
    let bytes = URL_SAFE_NO_PAD.decode(payload).ok()?;
    serde_json::from_slice::<Issuer>(&bytes)
        .ok()
        .map(|claims| claims.iss)
}

#[async_trait]
impl TokenVerifier for IssuerSet {
    async fn verify(
        &self,
        bearer_token: &str,
        resource: &str,
        now: Timestamp,
    ) -> Result<VerifiedClaims, TokenError> {
        let token = bearer_token.trim();
        match self.verifier_for(token) {
            Some(verifier) => verifier.verify(token, resource, now).await,
            None => {
                // The header is judged first, as a single verifier does: an unsigned token is
                // refused as such, whatever it claims to come from.
                read_header(token).map_err(TokenError::Rejected)?;
                Err(TokenError::Rejected(TokenRejection::WrongIssuer))
            }
        }
    }

    fn authorization_servers(&self) -> Vec<String> {
        self.verifiers
            .iter()
            .map(|verifier| verifier.settings.issuer.clone())
            .collect()
    }

    fn scopes_supported(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for verifier in &self.verifiers {
            for name in verifier.scopes_supported() {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        names
    }
}
