//! The credentials of a remote server configured for token exchange
//! ([`TokenExchange`](mcpgw_core::TokenExchange)).
//!
//! A tool call made for a caller who authenticated with an access token runs on an upstream
//! session of that caller's own (see the `caller_sessions` module), and every request of that
//! session carries a token of the server's own, which the gateway obtained by exchanging the
//! caller's token at the authorization server (OAuth 2.0 Token Exchange, RFC 8693): `sub` is
//! still the caller, the audience is the server, and the token says the gateway acts for the
//! caller. What the gateway's own session sends (`initialize`, tool lists, health checks, the
//! event stream, the end of the session) is the gateway's own doing and carries a token of the
//! gateway's client (the client credentials grant). The caller's token itself is never sent to
//! the server.
//!
//! How a token reaches its HTTP request: rmcp sends every message of a session through one
//! [`StreamableHttpClient`](rmcp::transport::streamable_http_client::StreamableHttpClient),
//! which asks the session's credential for the token of each request: the gateway's own
//! ([`UpstreamCredentials::own_token`]) or the caller's ([`CallerCredential::token`]).
//!
//! Tokens are kept in memory until shortly before they expire: per caller token (by its SHA-256
//! digest) for exchanged ones, and one for the gateway's client. They appear in no log line and
//! no error message; errors carry the authorization server's `error` code and description.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mcpgw_core::{ClientAuth, SubjectToken, TokenExchange};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::remote::error_causes;

const TOKEN_EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// A token is used until this long before it expires.
const EXPIRY_MARGIN: Duration = Duration::from_secs(30);
/// How long a token whose answer gave no `expires_in` is kept.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(60);
/// How long one request to the token endpoint may take.
const TOKEN_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The most exchanged tokens kept for one server; when full, expired ones go, then all.
const MAX_EXCHANGED: usize = 10_000;
/// The largest token endpoint answer read.
const MAX_ANSWER_BYTES: usize = 256 * 1024;

struct Cached {
    token: String,
    refresh_at: Instant,
}

impl Cached {
    fn fresh(&self, now: Instant) -> bool {
        now < self.refresh_at
    }
}

/// Why a token could not be had; the message names the server and the authorization server's
/// answer, never a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CredentialError(pub(crate) String);

/// The tokens of one remote server: the gateway's own, and those exchanged for its callers.
pub(crate) struct UpstreamCredentials {
    exchange: TokenExchange,
    /// What tokens are asked for: the configured resource, else the server's endpoint.
    resource: String,
    /// The server, for messages.
    server: String,
    http: reqwest::Client,
    exchanged: Mutex<HashMap<[u8; 32], Cached>>,
    /// The gateway's own token; the async lock makes concurrent requests share one fetch.
    own: tokio::sync::Mutex<Option<Cached>>,
}

impl std::fmt::Debug for UpstreamCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamCredentials")
            .field("server", &self.server)
            .field("exchange", &self.exchange)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

#[derive(Deserialize)]
struct ErrorAnswer {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

impl UpstreamCredentials {
    pub(crate) fn new(
        exchange: TokenExchange,
        endpoint: &str,
        server: String,
    ) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .timeout(TOKEN_REQUEST_TIMEOUT)
            .connect_timeout(TOKEN_REQUEST_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| {
                format!("cannot set up the http client for token requests: {error}")
            })?;
        reqwest::Url::parse(&exchange.token_endpoint).map_err(|error| {
            format!(
                "the token endpoint `{}` is not a URL: {error}",
                exchange.token_endpoint
            )
        })?;
        let resource = exchange
            .resource
            .clone()
            .unwrap_or_else(|| endpoint.to_owned());
        Ok(Self {
            exchange,
            resource,
            server,
            http,
            exchanged: Mutex::new(HashMap::new()),
            own: tokio::sync::Mutex::new(None),
        })
    }

    /// The gateway's own token, for what the session sends on its own behalf.
    pub(crate) async fn own_token(&self) -> Result<String, CredentialError> {
        let mut own = self.own.lock().await;
        if let Some(cached) = own.as_ref()
            && cached.fresh(Instant::now())
        {
            return Ok(cached.token.clone());
        }
        let mut form = vec![
            ("grant_type", "client_credentials"),
            ("resource", self.resource.as_str()),
        ];
        if let Some(audience) = &self.exchange.audience {
            form.push(("audience", audience));
        }
        if let Some(scope) = &self.exchange.scope {
            form.push(("scope", scope));
        }
        let cached = self.request_token(&form, "the gateway's own token").await?;
        let token = cached.token.clone();
        *own = Some(cached);
        Ok(token)
    }

    /// The server's token for the holder of `subject`, exchanged for it (or taken from the cache
    /// while it is fresh).
    pub(crate) async fn exchanged_for(
        &self,
        subject: &SubjectToken,
    ) -> Result<String, CredentialError> {
        let digest: [u8; 32] = Sha256::digest(subject.expose().as_bytes()).into();
        let now = Instant::now();
        if let Some(cached) = self
            .exchanged
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&digest)
            .filter(|cached| cached.fresh(now))
        {
            return Ok(cached.token.clone());
        }
        let mut form = vec![
            ("grant_type", TOKEN_EXCHANGE_GRANT),
            ("subject_token", subject.expose()),
            ("subject_token_type", ACCESS_TOKEN_TYPE),
            ("requested_token_type", ACCESS_TOKEN_TYPE),
            ("resource", self.resource.as_str()),
        ];
        if let Some(audience) = &self.exchange.audience {
            form.push(("audience", audience));
        }
        if let Some(scope) = &self.exchange.scope {
            form.push(("scope", scope));
        }
        let cached = self.request_token(&form, "a token for the caller").await?;
        let token = cached.token.clone();
        let mut exchanged = self
            .exchanged
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if exchanged.len() >= MAX_EXCHANGED {
            let now = Instant::now();
            exchanged.retain(|_, cached| cached.fresh(now));
            if exchanged.len() >= MAX_EXCHANGED {
                exchanged.clear();
            }
        }
        exchanged.insert(digest, cached);
        Ok(token)
    }

    async fn request_token(
        &self,
        form: &[(&str, &str)],
        what: &str,
    ) -> Result<Cached, CredentialError> {
        let failed = |detail: String| {
            CredentialError(format!(
                "could not get {what} for mcp server `{}` from {}: {detail}",
                self.server, self.exchange.token_endpoint
            ))
        };
        let mut request = self
            .http
            .post(&self.exchange.token_endpoint)
            .header(reqwest::header::ACCEPT, "application/json");
        let mut fields: Vec<(&str, &str)> = form.to_vec();
        match self.exchange.client_auth {
            ClientAuth::ClientSecretBasic => {
                request = request
                    .basic_auth(&self.exchange.client_id, Some(&self.exchange.client_secret));
            }
            ClientAuth::ClientSecretPost => {
                fields.push(("client_id", &self.exchange.client_id));
                fields.push(("client_secret", &self.exchange.client_secret));
            }
        }
        let response = request
            .form(&fields)
            .send()
            .await
            .map_err(|error| failed(format!("the request failed: {}", error_causes(&error))))?;
        let status = response.status();
        let body = response.bytes().await.map_err(|error| {
            failed(format!(
                "reading the answer failed: {}",
                error_causes(&error)
            ))
        })?;
        if body.len() > MAX_ANSWER_BYTES {
            return Err(failed(format!(
                "the answer is larger than {MAX_ANSWER_BYTES} bytes"
            )));
        }
        if !status.is_success() {
            let detail = match serde_json::from_slice::<ErrorAnswer>(&body) {
                Ok(answer) => match answer.error_description {
                    Some(description) => format!(
                        "HTTP {status}, {} ({})",
                        printable(&answer.error),
                        printable(&description)
                    ),
                    None => format!("HTTP {status}, {}", printable(&answer.error)),
                },
                Err(_) => format!("HTTP {status}"),
            };
            return Err(failed(detail));
        }
        let answer: TokenAnswer = serde_json::from_slice(&body)
            .map_err(|_| failed("the answer has no access_token".to_owned()))?;
        if answer.access_token.is_empty()
            || answer
                .access_token
                .chars()
                .any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(failed(
                "the answer's access_token is not a token".to_owned(),
            ));
        }
        let lifetime = answer
            .expires_in
            .map_or(DEFAULT_LIFETIME, Duration::from_secs);
        // A token living less than the margin is used once, not cached.
        let refresh_at = Instant::now() + lifetime.saturating_sub(EXPIRY_MARGIN);
        Ok(Cached {
            token: answer.access_token,
            refresh_at,
        })
    }
}

/// What every request of one caller's session carries: a token exchanged for that caller's
/// latest access token. The caller's next call brings a fresh access token (after a refresh,
/// say), which replaces the one kept here; requests the session sends on its own between calls
/// (the event stream, the end of the session) use the latest one.
pub(crate) struct CallerCredential {
    credentials: Arc<UpstreamCredentials>,
    subject: Mutex<SubjectToken>,
}

impl std::fmt::Debug for CallerCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallerCredential")
            .field("server", &self.credentials.server)
            .finish_non_exhaustive()
    }
}

impl CallerCredential {
    pub(crate) fn new(credentials: Arc<UpstreamCredentials>, subject: SubjectToken) -> Self {
        Self {
            credentials,
            subject: Mutex::new(subject),
        }
    }

    /// Makes `subject` the access token later requests are exchanged for.
    pub(crate) fn update(&self, subject: &SubjectToken) {
        *self.subject.lock().unwrap_or_else(PoisonError::into_inner) = subject.clone();
    }

    /// The token of the session's next request.
    pub(crate) async fn token(&self) -> Result<String, CredentialError> {
        let subject = self
            .subject
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        self.credentials.exchanged_for(&subject).await
    }
}

/// An answer's text made safe for a log line and short.
fn printable(raw: &str) -> String {
    raw.chars().filter(|c| !c.is_control()).take(200).collect()
}
