//! External policy decisions from Open Policy Agent: the [`PolicyDecider`] port of
//! `mcpgw-authz`, over OPA's data API.
//!
//! [`OpaDecider`] POSTs the question to `{url}/{policy_path}`, where `url` is OPA's base address
//! (`http://localhost:8181`, possibly with a path prefix when OPA sits behind a proxy) and
//! `policy_path` is the data API path of the rule, `v1/data/` included
//! (`v1/data/mcpgw/allow`). They are joined with exactly one `/`: trailing slashes of `url`
//! and leading slashes of `policy_path` are dropped, so `http://opa:8181/` and
//! `/v1/data/mcpgw/allow` give `http://opa:8181/v1/data/mcpgw/allow`. The body is
//!
//! ```json
//! {"input": {"principal": "user:alice", "groups": ["group:ops"], "tenant": "acme",
//!            "action": "tool:invoke", "resource": "tool/math__add",
//!            "context": {"method": "POST", "path": "/mcp"}}}
//! ```
//!
//! (`tenant` and `resource` are `null` when absent). OPA answers `{"result": <value>}`; only a
//! `result` that is JSON `true` allows (`Ok(true)`). Any other well-formed answer (`false`, a
//! missing `result` because the rule is undefined, a string, an object) is `Ok(false)`. When
//! no decision arrives (OPA unreachable, an HTTP error status, a body that is not JSON, no
//! answer within the timeout, 2 s by default) the answer is `Err`, which the domain treats as
//! deny.
//!
//! What it must never do: allow on anything but an explicit `true`; wait on OPA beyond its
//! timeout; follow redirects (a redirect is not a decision).
//!
//! # Example
//!
//! Making a decider contacts nobody; each decision is one POST of the body below. Only the
//! construction and the body run here, since a decision needs a running OPA.
//!
//! ```rust
//! use mcpgw_authz::{Identity, Permission, PolicyDecider as _, PolicyInput, Principal};
//! use mcpgw_policy_opa::{OpaDecider, OpaSettings, request_body};
//! use serde_json::json;
//!
//! let decider = OpaDecider::new(&OpaSettings::new("http://opa:8181/", "/v1/data/mcpgw/allow"))?;
//! assert_eq!(decider.endpoint(), "http://opa:8181/v1/data/mcpgw/allow");
//!
//! let alice = Identity::new(Principal::parse("user:alice").expect("a principal"));
//! let input = PolicyInput::new(&alice, Permission::ToolInvoke, Some("tool/math__add".into()));
//! assert_eq!(request_body(&input)["input"]["action"], json!("tool:invoke"));
//!
//! /// What the gateway does with the answer: only an explicit `true` allows.
//! async fn allowed(decider: &OpaDecider, input: &PolicyInput) -> bool {
//!     decider.decide(input).await.unwrap_or(false)
//! }
//! # Ok::<(), mcpgw_policy_opa::OpaSetupError>(())
//! ```

use std::time::Duration;

use async_trait::async_trait;
use mcpgw_authz::{DeciderError, PolicyDecider, PolicyInput};
use serde_json::{Value, json};

/// The default time limit of one decision: 2 s, after which the request is denied.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// The largest answer read from OPA; a decision is a few bytes.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// How the decider reaches OPA (`auth.opa` in the configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpaSettings {
    /// OPA's base address, such as `http://localhost:8181`.
    pub url: String,
    /// The data API path of the rule, such as `v1/data/mcpgw/allow`.
    pub policy_path: String,
    /// The time limit of one decision, connecting included.
    pub timeout: Duration,
}

impl OpaSettings {
    pub fn new(url: impl Into<String>, policy_path: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            policy_path: policy_path.into(),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// The address decisions are POSTed to: `url` and `policy_path` joined by one `/`.
    pub fn decision_url(&self) -> String {
        format!(
            "{}/{}",
            self.url.trim_end_matches('/'),
            self.policy_path.trim_start_matches('/')
        )
    }
}

/// The settings cannot work; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid opa settings: {0}")]
pub struct OpaSetupError(String);

/// Asks OPA whether a request the gateway already allowed may go ahead.
#[derive(Debug, Clone)]
pub struct OpaDecider {
    endpoint: reqwest::Url,
    timeout: Duration,
    http: reqwest::Client,
}

impl OpaDecider {
    /// Checks the settings and prepares the HTTP client; contacts nobody.
    pub fn new(settings: &OpaSettings) -> Result<Self, OpaSetupError> {
        if settings
            .policy_path
            .trim()
            .trim_matches('/')
            .trim()
            .is_empty()
        {
            return Err(OpaSetupError("policy_path: must not be empty".to_owned()));
        }
        if settings.timeout.is_zero() {
            return Err(OpaSetupError("timeout: must be positive".to_owned()));
        }
        let url = settings.decision_url();
        let endpoint = reqwest::Url::parse(&url)
            .map_err(|error| OpaSetupError(format!("url `{}`: {error}", settings.url)))?;
        if !matches!(endpoint.scheme(), "http" | "https") {
            return Err(OpaSetupError(format!(
                "url `{}`: must be an http(s) URL",
                settings.url
            )));
        }
        let http = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| OpaSetupError(format!("http client: {error}")))?;
        Ok(Self {
            endpoint,
            timeout: settings.timeout,
            http,
        })
    }

    /// Where decisions are asked.
    pub fn endpoint(&self) -> &str {
        self.endpoint.as_str()
    }

    fn failure(&self, error: &reqwest::Error) -> DeciderError {
        if error.is_timeout() {
            DeciderError(format!(
                "POST {} gave no answer within {} ms",
                self.endpoint,
                self.timeout.as_millis()
            ))
        } else {
            DeciderError(format!("POST {} failed: {error}", self.endpoint))
        }
    }

    async fn ask(&self, body: &Value) -> Result<bool, DeciderError> {
        let endpoint = &self.endpoint;
        let response = self
            .http
            .post(endpoint.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "application/json")
            .body(body.to_string())
            .send()
            .await
            .map_err(|error| self.failure(&error))?;
        let status = response.status();
        if !status.is_success() {
            return Err(DeciderError(format!("POST {endpoint} answered {status}")));
        }
        let bytes = response
            .bytes()
            .await
            .map_err(|error| self.failure(&error))?;
        if bytes.len() > MAX_ANSWER_BYTES {
            return Err(DeciderError(format!(
                "POST {endpoint}: the answer is larger than {MAX_ANSWER_BYTES} bytes"
            )));
        }
        let answer: Value = serde_json::from_slice(&bytes).map_err(|error| {
            DeciderError(format!("POST {endpoint}: the answer is not json: {error}"))
        })?;
        match answer.get("result") {
            Some(Value::Bool(allowed)) => Ok(*allowed),
            Some(other) => {
                tracing::warn!(endpoint = %endpoint, result_type = json_type(other),
                    "opa's result is not a boolean; denying");
                Ok(false)
            }
            None => {
                tracing::warn!(endpoint = %endpoint,
                    "opa's answer has no result (is the rule defined?); denying");
                Ok(false)
            }
        }
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The body OPA's data API is asked with.
pub fn request_body(input: &PolicyInput) -> Value {
    let groups: Vec<String> = input.groups.iter().map(ToString::to_string).collect();
    json!({
        "input": {
            "principal": input.principal.to_string(),
            "groups": groups,
            "tenant": input.tenant.as_ref().map(ToString::to_string),
            "action": input.action.to_string(),
            "resource": input.resource,
            "context": input.context,
        }
    })
}

#[async_trait]
impl PolicyDecider for OpaDecider {
    async fn decide(&self, input: &PolicyInput) -> Result<bool, DeciderError> {
        // The client's timeout bounds the whole exchange, from connecting to the body's end.
        self.ask(&request_body(input)).await
    }
}
