//! Single sign-on of the web console's operators at an OpenID provider: the
//! [`SignInProvider`] port as a relying party of the authorization code flow with PKCE (S256).
//!
//! [`OidcSignIn`] learns the provider's endpoints and signing keys from its discovery document
//! (`{issuer}/.well-known/openid-configuration`, which must be served as `application/json` and
//! name exactly the configured issuer) on the first sign-in, keeps them for an hour, and tries
//! again on the next sign-in when the provider could not be reached, so a provider that was down
//! when the gateway started needs no restart. An ID token signed with a key it does not hold
//! makes it fetch them again once, for providers that rotate their keys.
//!
//! A sign-in's ID token is checked (signature against the provider's keys, `iss`, `aud`,
//! `nonce`, `exp`) before any claim is read. The subject, groups and tenant come from the
//! configured claims, read as bearer tokens read them (a top-level claim, else a dotted path
//! into nested objects; groups as an array of strings or one string, absent meaning none). A
//! claim the ID token lacks is read from the provider's userinfo endpoint, when it has one:
//! many providers put only the subject in the ID token of this flow.
//!
//! Clients are public (no secret: PKCE alone binds the code to this gateway) or confidential,
//! authenticating with `client_secret_basic`, or `client_secret_post` when the provider lists
//! only that one.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mcpgw_authz::{
    PendingSignIn, Principal, PrincipalKind, SignInError, SignInProvider, SignInStart, TenantId,
    VerifiedClaims,
};
use mcpgw_core::Timestamp;
use openidconnect::core::{
    CoreAuthDisplay, CoreAuthPrompt, CoreAuthenticationFlow, CoreClientAuthMethod,
    CoreErrorResponseType, CoreGenderClaim, CoreJsonWebKey, CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm, CoreProviderMetadata, CoreRevocableToken, CoreRevocationErrorResponse,
    CoreTokenIntrospectionResponse, CoreTokenType,
};
use openidconnect::{
    AccessToken, AdditionalClaims, AuthType, AuthorizationCode, ClaimsVerificationError, Client,
    ClientId, ClientSecret, CsrfToken, DiscoveryError, EmptyExtraTokenFields, EndpointMaybeSet,
    EndpointNotSet, EndpointSet, HttpRequest, HttpResponse, IdTokenFields, IssuerUrl,
    JwsSigningAlgorithm as _, Nonce, OAuth2TokenResponse as _, PkceCodeChallenge, PkceCodeVerifier,
    RedirectUrl, RequestTokenError, Scope, SignatureVerificationError, StandardErrorResponse,
    StandardTokenResponse, SubjectIdentifier, UserInfoClaims, UserInfoError,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{DISCOVERY_PATH, claim, groups_of};

/// The time limit of one request to the provider (connect included).
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest answer read from the provider.
const MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// How long the discovered endpoints and keys are used before they are fetched again.
const METADATA_MAX_AGE: Duration = Duration::from_secs(3600);
/// The longest authorization code passed on to the provider; longer ones are not codes.
const MAX_CODE_BYTES: usize = 4096;
/// The longest text of the provider's (an error description) kept in a message.
const PROVIDER_TEXT_MAX_CHARS: usize = 200;

/// How single sign-on is set up (`console.sso` in the configuration).
#[derive(Clone, PartialEq, Eq)]
pub struct SignInSettings {
    /// The provider's issuer identifier, compared exactly with the one its metadata and ID
    /// tokens name; also the base of discovery.
    pub issuer: String,
    /// The gateway's client id at the provider; the ID token's audience.
    pub client_id: String,
    /// The client secret of a confidential client; `None` for a public one.
    pub client_secret: Option<String>,
    /// The scopes asked for besides `openid` (which is always asked for), e.g. `profile`,
    /// `email`, or the scope under which the provider releases group membership.
    pub scopes: Vec<String>,
    /// The claim that names the operator (`sub`); the principal is `user:<subject>`.
    pub subject_claim: String,
    /// The claim that lists the operator's groups (`groups`): an array of strings or one
    /// string; absent means no groups.
    pub groups_claim: String,
    /// The claim that names the operator's tenant (`tenant_id`); absent means no tenant.
    pub tenant_claim: String,
}

impl SignInSettings {
    /// Settings with the defaults: no scope besides `openid`, claims `sub`, `groups`,
    /// `tenant_id`, a public client.
    pub fn new(issuer: impl Into<String>, client_id: impl Into<String>) -> Self {
        Self {
            issuer: issuer.into(),
            client_id: client_id.into(),
            client_secret: None,
            scopes: Vec::new(),
            subject_claim: "sub".to_owned(),
            groups_claim: "groups".to_owned(),
            tenant_claim: "tenant_id".to_owned(),
        }
    }

    /// Checks every field; the error names the first one that cannot work.
    fn validate(&self) -> Result<IssuerUrl, SignInError> {
        let invalid = |message: String| SignInError::InvalidSettings(message);
        let issuer = IssuerUrl::new(self.issuer.clone())
            .map_err(|error| invalid(format!("issuer `{}`: {error}", printable(&self.issuer))))?;
        let url = issuer.url();
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid(format!(
                "issuer `{}`: must be an http(s) URL",
                printable(&self.issuer)
            )));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(invalid(format!(
                "issuer `{}`: must have no query and no fragment",
                printable(&self.issuer)
            )));
        }
        if self.client_id.trim().is_empty() {
            return Err(invalid(
                "client_id: must not be empty; use the client id the provider gave the gateway"
                    .to_owned(),
            ));
        }
        if self.client_id.chars().any(char::is_control) || self.client_id.trim() != self.client_id {
            return Err(invalid(format!(
                "client_id `{}`: must not contain control characters or surrounding whitespace",
                printable(&self.client_id)
            )));
        }
        if let Some(secret) = &self.client_secret
            && secret.is_empty()
        {
            return Err(invalid(
                "client_secret: must not be empty; leave it out for a public client".to_owned(),
            ));
        }
        for scope in &self.scopes {
            // A scope token is printable ASCII other than space, `"` and `\`.
            let usable = !scope.is_empty()
                && scope
                    .bytes()
                    .all(|byte| (0x21..=0x7e).contains(&byte) && byte != b'"' && byte != b'\\');
            if !usable {
                return Err(invalid(format!(
                    "scopes: `{}` is not a scope (one word of printable ASCII, no quotes or \
                     backslashes; list several scopes as several entries)",
                    printable(scope)
                )));
            }
        }
        for (field, name) in [
            ("subject_claim", &self.subject_claim),
            ("groups_claim", &self.groups_claim),
            ("tenant_claim", &self.tenant_claim),
        ] {
            if name.trim().is_empty() {
                return Err(invalid(format!("{field}: must not be empty")));
            }
        }
        Ok(issuer)
    }
}

impl fmt::Debug for SignInSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignInSettings")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("scopes", &self.scopes)
            .field("subject_claim", &self.subject_claim)
            .field("groups_claim", &self.groups_claim)
            .field("tenant_claim", &self.tenant_claim)
            .finish()
    }
}

/// Every claim of an ID token or a userinfo answer that has no field of its own, by name, so
/// that any configured claim name can be read.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
struct OtherClaims {
    #[serde(flatten)]
    claims: Map<String, Value>,
}

impl AdditionalClaims for OtherClaims {}

type SignInTokenResponse = StandardTokenResponse<
    IdTokenFields<
        OtherClaims,
        EmptyExtraTokenFields,
        CoreGenderClaim,
        CoreJweContentEncryptionAlgorithm,
        CoreJwsSigningAlgorithm,
    >,
    CoreTokenType,
>;

/// The client of the discovered provider: authorization endpoint known, token and userinfo
/// endpoints as the metadata lists them.
type SignInClient = Client<
    OtherClaims,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    SignInTokenResponse,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// What discovery learned, as one unit: replaced whole when fetched again.
struct Discovered {
    client: SignInClient,
    /// The signing algorithms accepted for ID tokens: the asymmetric ones the provider lists,
    /// RS256 when it lists none.
    id_token_algorithms: Vec<CoreJwsSigningAlgorithm>,
    fetched_at: Instant,
}

/// Signs operators in at one OpenID provider with the authorization code flow and PKCE (S256).
/// Cheap to share behind an `Arc`.
///
/// The provider is discovered on the first sign-in, not when this is made: its metadata and
/// keys are kept for an hour, fetched again on the next sign-in after a failure, and once more
/// when an ID token is signed with a key they lack. An ID token is checked (signature, issuer,
/// audience, nonce, expiry) before any claim is read; the mapped claims the ID token lacks are
/// read from the provider's userinfo endpoint.
///
/// # Example
///
/// ```rust
/// use mcpgw_authz::{PendingSignIn, SignInError, SignInProvider as _};
/// use mcpgw_oidc::{OidcSignIn, SignInSettings};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), SignInError> {
/// let mut settings = SignInSettings::new("https://idp.example.com", "mcpgw-console");
/// settings.client_secret = Some("issued-by-the-provider".to_owned());
/// settings.scopes = vec!["profile".to_owned(), "groups".to_owned()];
/// let sign_in = OidcSignIn::new(settings)?; // contacts nobody yet
///
/// // The console calls `begin(redirect_uri)`, keeps the answer's `pending` on its side and
/// // sends the browser to `authorize_url`; on the browser's return it calls `finish`. A return
/// // with another state is refused before the provider is asked anything:
/// let pending = PendingSignIn {
///     state: "state-1".to_owned(),
///     nonce: "nonce-1".to_owned(),
///     pkce_verifier: "v".repeat(43),
///     redirect_uri: "https://gw.example.com/ui/login/sso/callback".to_owned(),
/// };
/// let answer = sign_in.finish(&pending, "state-2", "a-code").await;
/// assert_eq!(answer, Err(SignInError::StateMismatch));
/// # Ok(())
/// # }
/// ```
pub struct OidcSignIn {
    settings: SignInSettings,
    issuer: IssuerUrl,
    http: reqwest::Client,
    /// The latest discovery; the lock also makes concurrent sign-ins wait for one fetch
    /// instead of starting their own.
    discovered: tokio::sync::Mutex<Option<Arc<Discovered>>>,
}

impl fmt::Debug for OidcSignIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OidcSignIn")
            .field("issuer", &self.settings.issuer)
            .field("client_id", &self.settings.client_id)
            .finish_non_exhaustive()
    }
}

/// A request to the provider failed before it answered; the message names the address.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct HttpError(String);

impl OidcSignIn {
    /// Checks the settings and prepares the HTTP client; contacts nobody (the provider is
    /// discovered on the first sign-in). Logs a warning when the issuer is not HTTPS.
    pub fn new(settings: SignInSettings) -> Result<Self, SignInError> {
        let issuer = settings.validate()?;
        if issuer.url().scheme() != "https" {
            tracing::warn!(
                issuer = %settings.issuer,
                "the single sign-on provider is not reached over https: its keys and the \
                 operators' tokens can be read or replaced in transit; use https outside of \
                 local testing"
            );
        }
        // No redirects: the token and userinfo endpoints answer where they are, and a redirect
        // would carry the code or the access token elsewhere.
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .connect_timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| SignInError::InvalidSettings(format!("http client: {error}")))?;
        Ok(Self {
            settings,
            issuer,
            http,
            discovered: tokio::sync::Mutex::new(None),
        })
    }

    pub fn settings(&self) -> &SignInSettings {
        &self.settings
    }

    /// The provider's endpoints and keys: the cached ones while they are fresh, else fetched.
    /// When a fetch fails and older ones are at hand, those stay in use.
    async fn provider(&self) -> Result<Arc<Discovered>, SignInError> {
        let mut cached = self.discovered.lock().await;
        if let Some(current) = cached.as_ref()
            && current.fetched_at.elapsed() < METADATA_MAX_AGE
        {
            return Ok(Arc::clone(current));
        }
        match self.discover().await {
            Ok(fresh) => {
                let fresh = Arc::new(fresh);
                *cached = Some(Arc::clone(&fresh));
                Ok(fresh)
            }
            Err(error) => match cached.as_ref() {
                Some(stale) => {
                    tracing::warn!(issuer = %self.settings.issuer, error = %error,
                        "fetching the single sign-on provider's metadata again failed; the \
                         last fetched endpoints and keys stay in use");
                    Ok(Arc::clone(stale))
                }
                None => Err(error),
            },
        }
    }

    /// Fetches the provider's metadata and keys again after an ID token named a key that `seen`
    /// does not hold; `None` when the fetch failed. Only an ID token fresh from the token
    /// endpoint leads here, so outsiders cannot make the gateway fetch at will: each such
    /// sign-in costs the provider one fetch at most.
    async fn refreshed_keys(&self, seen: &Arc<Discovered>) -> Option<Arc<Discovered>> {
        let mut cached = self.discovered.lock().await;
        if let Some(current) = cached.as_ref()
            && !Arc::ptr_eq(current, seen)
        {
            // Another sign-in fetched them meanwhile.
            return Some(Arc::clone(current));
        }
        match self.discover().await {
            Ok(fresh) => {
                let fresh = Arc::new(fresh);
                *cached = Some(Arc::clone(&fresh));
                Some(fresh)
            }
            Err(error) => {
                tracing::warn!(issuer = %self.settings.issuer, error = %error,
                    "fetching the single sign-on provider's keys again failed");
                None
            }
        }
    }

    async fn discover(&self) -> Result<Discovered, SignInError> {
        let started = Instant::now();
        let address = format!(
            "{}{DISCOVERY_PATH}",
            self.settings.issuer.trim_end_matches('/')
        );
        let pool = self.http.clone();
        let http = move |request| send(pool.clone(), request);
        let metadata = CoreProviderMetadata::discover_async(self.issuer.clone(), &http)
            .await
            .map_err(|error| match error {
                // The only check of discovery: the metadata names another issuer.
                DiscoveryError::Validation(problem) => SignInError::InvalidSettings(format!(
                    "issuer: the provider's metadata at `{address}` does not name it ({}); set \
                     issuer to exactly the issuer identifier the provider names",
                    printable(&problem)
                )),
                other => SignInError::Unavailable(discovery_problem(&address, &other)),
            })?;
        let auth_type = match metadata.token_endpoint_auth_methods_supported() {
            _ if self.settings.client_secret.is_none() => AuthType::RequestBody,
            // Without a list, the provider accepts client_secret_basic.
            None => AuthType::BasicAuth,
            Some(methods) if methods.contains(&CoreClientAuthMethod::ClientSecretBasic) => {
                AuthType::BasicAuth
            }
            Some(methods) if methods.contains(&CoreClientAuthMethod::ClientSecretPost) => {
                AuthType::RequestBody
            }
            Some(methods) => {
                let listed: Vec<String> = methods
                    .iter()
                    .map(|method| printable(method.as_ref()))
                    .collect();
                return Err(SignInError::InvalidSettings(format!(
                    "client_secret: the provider accepts client secrets neither as \
                     client_secret_basic nor as client_secret_post (it lists: {}); register the \
                     gateway as a public client and leave client_secret out",
                    listed.join(", ")
                )));
            }
        };
        if metadata.token_endpoint().is_none() {
            return Err(SignInError::Unavailable(format!(
                "the metadata at `{address}` names no token_endpoint, which the authorization \
                 code flow needs"
            )));
        }
        // Signed ID tokens only, and by the provider's private key: never `none`, and never a
        // MAC keyed with the client secret (which the gateway's configuration holds too).
        let mut id_token_algorithms: Vec<CoreJwsSigningAlgorithm> = metadata
            .id_token_signing_alg_values_supported()
            .iter()
            .filter(|algorithm| {
                **algorithm != CoreJwsSigningAlgorithm::None && !algorithm.uses_shared_secret()
            })
            .cloned()
            .collect();
        if id_token_algorithms.is_empty() {
            id_token_algorithms.push(CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256);
        }
        let keys = metadata.jwks().keys().len();
        let client = SignInClient::from_provider_metadata(
            metadata,
            ClientId::new(self.settings.client_id.clone()),
            self.settings.client_secret.clone().map(ClientSecret::new),
        )
        .set_auth_type(auth_type);
        tracing::debug!(issuer = %self.settings.issuer, keys,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "discovered the single sign-on provider");
        Ok(Discovered {
            client,
            id_token_algorithms,
            fetched_at: Instant::now(),
        })
    }

    /// The ID token's verified claims as one JSON object, the standard ones included.
    fn verified_id_token(
        &self,
        provider: &Discovered,
        response: &SignInTokenResponse,
        nonce: &Nonce,
    ) -> Result<(Map<String, Value>, SubjectIdentifier, Timestamp), ClaimsVerificationError> {
        let Some(id_token) = response.extra_fields().id_token() else {
            return Err(ClaimsVerificationError::Other(
                "the token response carries none (does the provider let this client ask for the \
                 `openid` scope?)"
                    .to_owned(),
            ));
        };
        let verifier = provider
            .client
            .id_token_verifier()
            .set_allowed_algs(provider.id_token_algorithms.clone());
        let claims = id_token.claims(&verifier, nonce)?;
        let expires_at = Timestamp::from_unix_micros(claims.expiration().timestamp_micros());
        let subject = claims.subject().clone();
        let object = match serde_json::to_value(claims) {
            Ok(Value::Object(object)) => object,
            _ => {
                return Err(ClaimsVerificationError::Other(
                    "its claims cannot be read as one JSON object".to_owned(),
                ));
            }
        };
        Ok((object, subject, expires_at))
    }

    /// The userinfo endpoint's claims for the holder of `access_token`, who must be `subject`;
    /// `None` when the provider has no userinfo endpoint.
    async fn userinfo(
        &self,
        provider: &Discovered,
        access_token: AccessToken,
        subject: SubjectIdentifier,
    ) -> Result<Option<Map<String, Value>>, SignInError> {
        let Ok(request) = provider.client.user_info(access_token, Some(subject)) else {
            return Ok(None);
        };
        let pool = self.http.clone();
        let http = move |request| send(pool.clone(), request);
        let claims: UserInfoClaims<OtherClaims, CoreGenderClaim> = request
            .request_async(&http)
            .await
            .map_err(|error| userinfo_error(&error))?;
        match serde_json::to_value(&claims) {
            Ok(Value::Object(object)) => Ok(Some(object)),
            _ => Err(SignInError::Unavailable(
                "the userinfo answer cannot be read as one JSON object".to_owned(),
            )),
        }
    }
}

#[async_trait]
impl SignInProvider for OidcSignIn {
    fn issuer(&self) -> &str {
        &self.settings.issuer
    }

    async fn begin(&self, redirect_uri: &str) -> Result<SignInStart, SignInError> {
        let redirect = redirect_url(redirect_uri)?;
        let provider = self.provider().await?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = provider
            .client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .set_pkce_challenge(challenge)
            .set_redirect_uri(Cow::Owned(redirect));
        for scope in &self.settings.scopes {
            if scope != "openid" {
                request = request.add_scope(Scope::new(scope.clone()));
            }
        }
        let (url, state, nonce) = request.url();
        Ok(SignInStart {
            authorize_url: url.to_string(),
            pending: PendingSignIn {
                state: state.secret().clone(),
                nonce: nonce.secret().clone(),
                pkce_verifier: verifier.secret().clone(),
                redirect_uri: redirect_uri.to_owned(),
            },
        })
    }

    async fn finish(
        &self,
        pending: &PendingSignIn,
        returned_state: &str,
        code: &str,
    ) -> Result<VerifiedClaims, SignInError> {
        pending.check_state(returned_state)?;
        if code.is_empty() {
            return Err(SignInError::CodeRejected(
                "the provider's answer carries no code".to_owned(),
            ));
        }
        if code.len() > MAX_CODE_BYTES || code.chars().any(|c| c.is_control() || c == ' ') {
            return Err(SignInError::CodeRejected(
                "the code is not one the provider could have issued (too long, or with spaces \
                 or control characters)"
                    .to_owned(),
            ));
        }
        let redirect = redirect_url(&pending.redirect_uri)?;
        let provider = self.provider().await?;
        let pool = self.http.clone();
        let http = move |request| send(pool.clone(), request);
        let response = provider
            .client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .map_err(|error| SignInError::Unavailable(format!("the token endpoint: {error}")))?
            .set_pkce_verifier(PkceCodeVerifier::new(pending.pkce_verifier.clone()))
            .set_redirect_uri(Cow::Owned(redirect))
            .request_async(&http)
            .await
            .map_err(|error| token_error(&error))?;

        let nonce = Nonce::new(pending.nonce.clone());
        let (id_claims, subject, expires_at) =
            match self.verified_id_token(&provider, &response, &nonce) {
                Ok(verified) => verified,
                Err(ClaimsVerificationError::SignatureVerification(
                    SignatureVerificationError::NoMatchingKey,
                )) => {
                    // Signed with a key fetched after ours: the provider may have rotated.
                    let refreshed = self.refreshed_keys(&provider).await.ok_or_else(|| {
                        id_token_error(&ClaimsVerificationError::SignatureVerification(
                            SignatureVerificationError::NoMatchingKey,
                        ))
                    })?;
                    self.verified_id_token(&refreshed, &response, &nonce)
                        .map_err(|error| id_token_error(&error))?
                }
                Err(error) => return Err(id_token_error(&error)),
            };

        let mapped = [
            &self.settings.subject_claim,
            &self.settings.groups_claim,
            &self.settings.tenant_claim,
        ];
        let lacking = mapped
            .iter()
            .any(|name| matches!(claim(&id_claims, name), None | Some(Value::Null)));
        let userinfo = if lacking {
            self.userinfo(&provider, response.access_token().clone(), subject)
                .await?
        } else {
            None
        };
        let mut sources = vec![&id_claims];
        sources.extend(userinfo.as_ref());
        read_identity(&self.settings, &sources, expires_at)
    }
}

/// The operator the claims name: each mapped claim is taken from the first source that has it
/// (the ID token, then the userinfo answer) and checked as a principal or tenant.
fn read_identity(
    settings: &SignInSettings,
    sources: &[&Map<String, Value>],
    expires_at: Timestamp,
) -> Result<VerifiedClaims, SignInError> {
    let find = |name: &str| {
        sources
            .iter()
            .find_map(|claims| claim(claims, name).filter(|value| !value.is_null()))
    };
    let invalid = |claim: &str, problem: String| SignInError::InvalidClaim {
        claim: printable(claim),
        problem,
    };

    let subject_claim = settings.subject_claim.as_str();
    let subject = match find(subject_claim) {
        Some(Value::String(subject)) => subject.clone(),
        Some(_) => {
            return Err(invalid(
                subject_claim,
                "is not a string; map the subject to a claim that holds the operator's name"
                    .to_owned(),
            ));
        }
        None => {
            return Err(invalid(
                subject_claim,
                "is missing from the ID token and the userinfo answer; map the subject to a \
                 claim the provider sends, or ask for the scope that releases it"
                    .to_owned(),
            ));
        }
    };
    Principal::new(PrincipalKind::User, &subject)
        .map_err(|error| invalid(subject_claim, format!("names no user: {error}")))?;

    let groups_claim = settings.groups_claim.as_str();
    let groups = groups_of(find(groups_claim)).ok_or_else(|| {
        invalid(
            groups_claim,
            "must be an array of strings or one string".to_owned(),
        )
    })?;
    for group in &groups {
        Principal::group(group)
            .map_err(|error| invalid(groups_claim, format!("names no group: {error}")))?;
    }

    let tenant_claim = settings.tenant_claim.as_str();
    let tenant = match find(tenant_claim) {
        None => None,
        Some(Value::String(tenant)) => {
            TenantId::parse(tenant)
                .map_err(|error| invalid(tenant_claim, format!("names no tenant: {error}")))?;
            Some(tenant.clone())
        }
        Some(_) => return Err(invalid(tenant_claim, "must be a string".to_owned())),
    };

    Ok(VerifiedClaims {
        subject,
        groups,
        tenant,
        expires_at,
        scopes: None,
    })
}

/// The redirect address of a sign-in: an absolute http(s) URL without a fragment.
fn redirect_url(raw: &str) -> Result<RedirectUrl, SignInError> {
    let invalid = |problem: String| {
        SignInError::InvalidSettings(format!("redirect address `{}`: {problem}", printable(raw)))
    };
    let redirect = RedirectUrl::new(raw.to_owned()).map_err(|error| invalid(error.to_string()))?;
    let url = redirect.url();
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("must be an http(s) URL".to_owned()));
    }
    if url.fragment().is_some() {
        return Err(invalid("must have no fragment".to_owned()));
    }
    Ok(redirect)
}

/// Sends one request of the protocol with the gateway's HTTP client and reads at most
/// [`MAX_RESPONSE_BYTES`] of the answer. The client comes by value (a handle on the shared
/// connection pool), so the future borrows nothing and can move between threads.
async fn send(http: reqwest::Client, request: HttpRequest) -> Result<HttpResponse, HttpError> {
    let method = request.method().clone();
    let address = request.uri().to_string();
    let failed = |what: String| HttpError(format!("{method} `{address}` {what}"));
    let request = reqwest::Request::try_from(request)
        .map_err(|error| failed(format!("cannot be sent: {}", causes(&error))))?;
    let mut response = http
        .execute(request)
        .await
        .map_err(|error| failed(format!("failed: {}", causes(&error.without_url()))))?;
    if response
        .content_length()
        .is_some_and(|length| length > MAX_RESPONSE_BYTES as u64)
    {
        return Err(failed("answered more than 1 MiB".to_owned()));
    }
    let mut answer = openidconnect::http::Response::builder().status(response.status());
    for (name, value) in response.headers() {
        answer = answer.header(name, value);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| failed(format!("broke off: {}", causes(&error.without_url()))))?
    {
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(failed("answered more than 1 MiB".to_owned()));
        }
        body.extend_from_slice(&chunk);
    }
    answer
        .body(body)
        .map_err(|error| failed(format!("answered unusable headers: {error}")))
}

/// An error and its causes on one line (reqwest names the failing step only in the causes).
fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// What went wrong in discovery; a failed request names its own address.
fn discovery_problem(address: &str, error: &DiscoveryError<HttpError>) -> String {
    let problem = match error {
        DiscoveryError::Request(error) => return format!("discovery: {error}"),
        DiscoveryError::Response(_, _, problem)
        | DiscoveryError::Validation(problem)
        | DiscoveryError::Other(problem) => printable(problem),
        DiscoveryError::Parse(error) => format!(
            "the answer is not provider metadata or a key set (at `{}`)",
            printable(&error.path().to_string())
        ),
        DiscoveryError::UrlParse(error) => format!("an address is not a URL: {error}"),
        other => printable(&other.to_string()),
    };
    format!("discovery at `{address}`: {problem}")
}

/// The code exchange's failure. The provider's error codes decide whose fault it is: the
/// gateway's credentials (`invalid_client`, `unauthorized_client`), or the code.
fn token_error(
    error: &RequestTokenError<HttpError, StandardErrorResponse<CoreErrorResponseType>>,
) -> SignInError {
    match error {
        RequestTokenError::ServerResponse(response) => {
            let code = printable(response.error().as_ref());
            let text = match response.error_description() {
                Some(description) => format!("{code} ({})", printable(description)),
                None => code,
            };
            match response.error() {
                CoreErrorResponseType::InvalidClient
                | CoreErrorResponseType::UnauthorizedClient => SignInError::ClientRejected(text),
                _ => SignInError::CodeRejected(text),
            }
        }
        RequestTokenError::Request(error) => {
            SignInError::Unavailable(format!("the token endpoint: {error}"))
        }
        // The body may hold tokens: only where it went wrong is told.
        RequestTokenError::Parse(error, _) => SignInError::Unavailable(format!(
            "the token endpoint answered something that is not a token response (at `{}`)",
            printable(&error.path().to_string())
        )),
        RequestTokenError::Other(problem) => {
            SignInError::Unavailable(format!("the token endpoint: {}", printable(problem)))
        }
    }
}

fn userinfo_error(error: &UserInfoError<HttpError>) -> SignInError {
    match error {
        UserInfoError::ClaimsVerification(ClaimsVerificationError::InvalidSubject(_)) => {
            SignInError::InvalidIdToken(
                "the userinfo endpoint names another subject than the ID token".to_owned(),
            )
        }
        UserInfoError::ClaimsVerification(error) => {
            SignInError::InvalidIdToken(format!("the userinfo answer: {}", claims_problem(error)))
        }
        UserInfoError::Request(error) => {
            SignInError::Unavailable(format!("the userinfo endpoint: {error}"))
        }
        UserInfoError::Response(status, _, problem) => SignInError::Unavailable(format!(
            "the userinfo endpoint answered {status}: {}",
            printable(problem)
        )),
        UserInfoError::Parse(error) => SignInError::Unavailable(format!(
            "the userinfo endpoint answered something that is not a set of claims (at `{}`)",
            printable(&error.path().to_string())
        )),
        UserInfoError::Other(problem) => {
            SignInError::Unavailable(format!("the userinfo endpoint: {}", printable(problem)))
        }
        other => SignInError::Unavailable(format!(
            "the userinfo endpoint: {}",
            printable(&other.to_string())
        )),
    }
}

fn id_token_error(error: &ClaimsVerificationError) -> SignInError {
    SignInError::InvalidIdToken(claims_problem(error))
}

/// What failed in a check of signed claims, in words that name no nonce or token.
fn claims_problem(error: &ClaimsVerificationError) -> String {
    match error {
        ClaimsVerificationError::Expired(problem) => {
            format!(
                "it has expired or was issued at an unusable time ({})",
                printable(problem)
            )
        }
        ClaimsVerificationError::InvalidAudience(problem) => format!(
            "it is meant for another client ({}); check client_id",
            printable(problem)
        ),
        ClaimsVerificationError::InvalidIssuer(problem) => format!(
            "it comes from another issuer ({}); set issuer to the provider's issuer identifier \
             exactly",
            printable(problem)
        ),
        ClaimsVerificationError::InvalidNonce(_) => {
            "its nonce is not the one this sign-in sent (a replayed or injected token)".to_owned()
        }
        ClaimsVerificationError::InvalidSubject(_) => "its subject is not usable".to_owned(),
        ClaimsVerificationError::SignatureVerification(error) => match error {
            SignatureVerificationError::NoMatchingKey => {
                "it is signed with a key that is not among the provider's published keys".to_owned()
            }
            SignatureVerificationError::DisallowedAlg(problem)
            | SignatureVerificationError::UnsupportedAlg(problem) => {
                format!(
                    "its signing algorithm is not accepted ({})",
                    printable(problem)
                )
            }
            SignatureVerificationError::NoSignature => "it is not signed".to_owned(),
            _ => "its signature does not verify".to_owned(),
        },
        ClaimsVerificationError::Unsupported(problem) | ClaimsVerificationError::Other(problem) => {
            printable(problem)
        }
        other => printable(&other.to_string()),
    }
}

/// Text the provider or the configuration chose, made safe for a message: control characters
/// escaped, at most 200 characters.
fn printable(raw: &str) -> String {
    let mut text = String::new();
    let mut characters = raw.chars();
    for character in characters.by_ref().take(PROVIDER_TEXT_MAX_CHARS) {
        if character.is_control() {
            text.extend(character.escape_default());
        } else {
            text.push(character);
        }
    }
    if characters.next().is_some() {
        text.push_str("...");
    }
    text
}

#[cfg(test)]
mod tests {
    use mcpgw_core::ErrorKind;
    use serde_json::json;

    use super::*;

    const EXPIRES: Timestamp = Timestamp::from_unix_micros(1_700_000_000_000_000);

    fn settings() -> SignInSettings {
        SignInSettings::new("https://idp.example.com", "mcpgw-console")
    }

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(object) => object,
            other => panic!("not an object: {other}"),
        }
    }

    fn setup_error(settings: SignInSettings) -> String {
        match OidcSignIn::new(settings) {
            Err(error) => {
                assert_eq!(error.kind(), ErrorKind::Invalid, "{error}");
                error.to_string()
            }
            Ok(sign_in) => panic!("{sign_in:?} should have been refused"),
        }
    }

    #[test]
    fn usable_settings_make_a_sign_in_without_contacting_anyone() {
        let mut confidential = settings();
        confidential.client_secret = Some("s3cret".to_owned());
        confidential.scopes = vec!["profile".to_owned(), "groups".to_owned()];
        let sign_in = OidcSignIn::new(confidential).expect("usable settings");
        assert_eq!(sign_in.issuer(), "https://idp.example.com");
        // A path under the host is an issuer too (many providers serve one per realm).
        OidcSignIn::new(SignInSettings::new(
            "http://127.0.0.1:9/realms/ops",
            "console",
        ))
        .expect("an issuer with a path");
    }

    #[test]
    fn the_issuer_must_be_an_http_url_without_query_or_fragment() {
        // Bad input: no URL at all, a relative address, another scheme, a query, a fragment.
        for issuer in [
            "idp.example.com",
            "/realms/ops",
            "ftp://idp.example.com",
            "https://idp.example.com?tenant=1",
            "https://idp.example.com#x",
        ] {
            let message = setup_error(SignInSettings::new(issuer, "console"));
            assert!(message.contains("issuer"), "{issuer}: {message}");
            assert!(message.contains(issuer), "{issuer}: {message}");
        }
    }

    #[test]
    fn the_client_id_must_name_a_client() {
        // Bad input: empty, blank, padded, and with a control character.
        for client_id in ["", "   ", " console", "con\u{7}sole"] {
            let message = setup_error(SignInSettings::new("https://idp.example.com", client_id));
            assert!(message.contains("client_id"), "{client_id:?}: {message}");
            assert!(!message.contains('\u{7}'), "{message}");
        }
    }

    #[test]
    fn an_empty_secret_scopes_that_are_no_scope_and_empty_claim_names_are_refused() {
        // Bad input: an empty client secret (a public client leaves it out).
        let mut empty_secret = settings();
        empty_secret.client_secret = Some(String::new());
        assert!(setup_error(empty_secret).contains("client_secret"));

        // Bad input: two scopes in one entry, an empty scope, a quote, a non-ASCII letter.
        for scope in ["profile email", "", "gr\"oups", "gruppé"] {
            let mut bad = settings();
            bad.scopes = vec!["profile".to_owned(), scope.to_owned()];
            let message = setup_error(bad);
            assert!(message.contains("scopes"), "{scope:?}: {message}");
        }

        // Bad input: each claim name empty or blank in turn.
        for field in ["subject_claim", "groups_claim", "tenant_claim"] {
            let mut bad = settings();
            match field {
                "subject_claim" => bad.subject_claim = String::new(),
                "groups_claim" => bad.groups_claim = " ".to_owned(),
                _ => bad.tenant_claim = String::new(),
            }
            assert!(setup_error(bad).contains(field), "{field}");
        }
    }

    #[test]
    fn debug_output_hides_the_client_secret() {
        let mut confidential = settings();
        confidential.client_secret = Some("hunter2-very-secret".to_owned());
        let printed = format!("{confidential:?}");
        assert!(!printed.contains("hunter2"), "{printed}");
        assert!(printed.contains("<redacted>"), "{printed}");
    }

    #[test]
    fn claims_map_to_the_operator() {
        let id_token = object(json!({
            "sub": "alice", "groups": ["ops", "Domain Users"], "tenant_id": "acme", "exp": 1
        }));
        let claims = read_identity(&settings(), &[&id_token], EXPIRES).expect("usable claims");
        assert_eq!(
            claims,
            VerifiedClaims {
                subject: "alice".to_owned(),
                groups: vec!["ops".to_owned(), "Domain Users".to_owned()],
                tenant: Some("acme".to_owned()),
                expires_at: EXPIRES,
                scopes: None,
            }
        );
    }

    #[test]
    fn groups_may_be_one_string_and_missing_groups_are_none() {
        let one = object(json!({"sub": "alice", "groups": "ops"}));
        let claims = read_identity(&settings(), &[&one], EXPIRES).unwrap();
        assert_eq!(claims.groups, vec!["ops".to_owned()]);
        assert_eq!(claims.tenant, None);

        for without in [json!({"sub": "bob"}), json!({"sub": "bob", "groups": null})] {
            let claims = read_identity(&settings(), &[&object(without)], EXPIRES).unwrap();
            assert!(claims.groups.is_empty());
        }
    }

    #[test]
    fn configured_claim_names_and_dotted_paths_are_read() {
        let mut custom = settings();
        custom.subject_claim = "preferred_username".to_owned();
        custom.groups_claim = "realm_access.roles".to_owned();
        custom.tenant_claim = "org".to_owned();
        let id_token = object(json!({
            "sub": "f81d4fae-7dec", "preferred_username": "alice@example.com",
            "realm_access": {"roles": ["admins"]}, "org": "acme"
        }));
        let claims = read_identity(&custom, &[&id_token], EXPIRES).unwrap();
        assert_eq!(claims.subject, "alice@example.com");
        assert_eq!(claims.groups, vec!["admins".to_owned()]);
        assert_eq!(claims.tenant.as_deref(), Some("acme"));
    }

    #[test]
    fn a_claim_the_id_token_lacks_is_taken_from_userinfo_and_the_id_token_wins() {
        let id_token = object(json!({"sub": "alice", "tenant_id": "acme"}));
        let userinfo = object(json!({"sub": "alice", "groups": ["ops"], "tenant_id": "other"}));
        let claims = read_identity(&settings(), &[&id_token, &userinfo], EXPIRES).unwrap();
        assert_eq!(claims.groups, vec!["ops".to_owned()]);
        assert_eq!(claims.tenant.as_deref(), Some("acme"));
    }

    fn claim_error(claims: Value) -> (String, String) {
        match read_identity(&settings(), &[&object(claims.clone())], EXPIRES) {
            Err(error @ SignInError::InvalidClaim { .. }) => {
                assert_eq!(error.kind(), ErrorKind::Unauthenticated);
                let SignInError::InvalidClaim { claim, .. } = &error else {
                    unreachable!()
                };
                (claim.clone(), error.to_string())
            }
            other => panic!("{claims} should have been refused, not {other:?}"),
        }
    }

    #[test]
    fn groups_of_a_wrong_type_are_refused() {
        // Bad input: a number, an object, an array holding a number, a group with a newline.
        for groups in [
            json!(7),
            json!({"ops": true}),
            json!(["ops", 7]),
            json!(["ops\nadmin"]),
        ] {
            let (claim, message) = claim_error(json!({"sub": "alice", "groups": groups}));
            assert_eq!(claim, "groups", "{message}");
            assert!(!message.contains('\n'), "{message}");
        }
    }

    #[test]
    fn a_subject_that_names_no_user_is_refused() {
        // Bad input: a control character, an escape sequence, surrounding whitespace, an empty
        // name, a wildcard, a number, and no subject at all.
        for subject in [
            json!("ali\u{0}ce"),
            json!("alice\u{1b}[31m"),
            json!(" alice"),
            json!(""),
            json!("*"),
            json!(42),
        ] {
            let (claim, message) = claim_error(json!({"sub": subject}));
            assert_eq!(claim, "sub", "{message}");
            assert!(!message.chars().any(char::is_control), "{message:?}");
        }
        let (claim, message) = claim_error(json!({"groups": ["ops"]}));
        assert_eq!(claim, "sub");
        assert!(message.contains("missing"), "{message}");
    }

    #[test]
    fn a_tenant_that_names_no_tenant_is_refused() {
        // Bad input: whitespace inside, a number, a control character.
        for tenant in [json!("ac me"), json!(3), json!("acme\u{7f}")] {
            let (claim, _) = claim_error(json!({"sub": "alice", "tenant_id": tenant}));
            assert_eq!(claim, "tenant_id");
        }
    }

    #[test]
    fn a_redirect_address_must_be_an_absolute_http_url() {
        // Bad input: a relative path, another scheme, a fragment, no URL at all.
        for raw in [
            "/ui/login/sso/callback",
            "javascript:alert(1)",
            "https://gw.example.com/cb#x",
            "not a url",
        ] {
            match redirect_url(raw) {
                Err(error @ SignInError::InvalidSettings(_)) => {
                    assert!(error.to_string().contains("redirect address"), "{error}");
                }
                other => panic!("{raw} should have been refused, not {other:?}"),
            }
        }
        assert!(redirect_url("http://127.0.0.1:8080/ui/login/sso/callback").is_ok());
    }

    #[test]
    fn the_token_endpoint_errors_tell_whose_fault_it_is() {
        let response = |error, description: &str| {
            RequestTokenError::ServerResponse(StandardErrorResponse::new(
                error,
                Some(description.to_owned()),
                None,
            ))
        };
        let client = token_error(&response(
            CoreErrorResponseType::InvalidClient,
            "client authentication failed",
        ));
        assert!(matches!(client, SignInError::ClientRejected(_)), "{client}");
        assert_eq!(client.kind(), ErrorKind::Internal);
        assert!(client.to_string().contains("invalid_client"), "{client}");
        assert!(client.to_string().contains("client secret"), "{client}");

        let code = token_error(&response(
            CoreErrorResponseType::InvalidGrant,
            "grant request is invalid",
        ));
        assert!(matches!(code, SignInError::CodeRejected(_)), "{code}");
        assert!(code.to_string().contains("invalid_grant"), "{code}");

        let down = token_error(&RequestTokenError::Request(HttpError(
            "POST `https://idp.example.com/token` failed: connection refused".to_owned(),
        )));
        assert_eq!(down.kind(), ErrorKind::Unavailable);
    }

    #[test]
    fn a_nonce_mismatch_names_no_nonce() {
        let message = claims_problem(&ClaimsVerificationError::InvalidNonce(
            "nonce mismatch: expected n-0c1e, got n-77aa".to_owned(),
        ));
        assert!(
            !message.contains("n-0c1e") && !message.contains("n-77aa"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn a_forged_state_or_a_missing_code_is_refused_before_the_provider_is_asked() {
        // The issuer is a port nobody listens on: an answer other than Unavailable shows that
        // nothing was fetched.
        let sign_in =
            OidcSignIn::new(SignInSettings::new("http://127.0.0.1:9", "console")).unwrap();
        let pending = PendingSignIn {
            state: "state-1".to_owned(),
            nonce: "nonce-1".to_owned(),
            pkce_verifier: "v".repeat(43),
            redirect_uri: "http://127.0.0.1:8080/ui/login/sso/callback".to_owned(),
        };
        // Bad input: another state.
        assert_eq!(
            sign_in.finish(&pending, "state-2", "code").await,
            Err(SignInError::StateMismatch)
        );
        // Bad input: no code, a code with a line break, a code of 5,000 bytes.
        for code in [String::new(), "co\nde".to_owned(), "c".repeat(5000)] {
            match sign_in.finish(&pending, "state-1", &code).await {
                Err(SignInError::CodeRejected(_)) => {}
                other => panic!("{code:?}: {other:?}"),
            }
        }
    }
}
