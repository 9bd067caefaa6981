//! Single sign-on for the web console: the port through which an operator signs in at an
//! OpenID provider (the authorization code flow with PKCE), and what the console keeps between
//! sending the browser away and its return.
//!
//! The flow, as the console drives it:
//! 1. [`SignInProvider::begin`] answers the provider's authorization address and a
//!    [`PendingSignIn`]. The console keeps the pending sign-in on the server side (never in the
//!    browser: it holds the PKCE verifier and the nonce) and redirects the browser.
//! 2. The provider sends the browser back to the redirect address with `state` and `code`, or
//!    with `error` and `error_description` when it refused ([`SignInError::refused`] makes the
//!    error of that case).
//! 3. [`SignInProvider::finish`] checks the returned state against the pending one (in constant
//!    time), exchanges the code, verifies the ID token and answers the operator's
//!    [`VerifiedClaims`]. A pending sign-in is good for one return: the console forgets it as it
//!    calls `finish`, whatever the outcome.

use std::fmt;

use async_trait::async_trait;
use mcpgw_core::ErrorKind;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ports::VerifiedClaims;

/// The longest text from the provider (an error code or description) kept in a message.
const PROVIDER_TEXT_MAX_CHARS: usize = 200;

/// What the console keeps (on the server side, never in the browser) between sending a browser
/// to the provider and the browser's return. Its `Debug` output shows the redirect address
/// only: the state, the nonce and the PKCE verifier are secrets of this one sign-in.
#[derive(Clone, Serialize, Deserialize)]
pub struct PendingSignIn {
    /// The `state` sent to the provider; the browser must bring the same one back.
    pub state: String,
    /// The `nonce` sent to the provider; the ID token must carry the same one.
    pub nonce: String,
    /// The PKCE code verifier whose S256 challenge went to the provider.
    pub pkce_verifier: String,
    /// Where the provider sends the browser back; the code exchange names it again.
    pub redirect_uri: String,
}

impl PendingSignIn {
    /// Checks that `returned_state` (the `state` query parameter the browser came back with) is
    /// this sign-in's. Both are hashed before they are compared byte by byte without an early
    /// exit, so neither the time taken nor the lengths tell how much of a guess was right.
    pub fn check_state(&self, returned_state: &str) -> Result<(), SignInError> {
        let expected = Sha256::digest(self.state.as_bytes());
        let returned = Sha256::digest(returned_state.as_bytes());
        let difference = expected
            .iter()
            .zip(returned.iter())
            .fold(0_u8, |difference, (a, b)| difference | (a ^ b));
        if std::hint::black_box(difference) == 0 && !self.state.is_empty() {
            Ok(())
        } else {
            Err(SignInError::StateMismatch)
        }
    }
}

impl fmt::Debug for PendingSignIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingSignIn")
            .field("state", &"<redacted>")
            .field("nonce", &"<redacted>")
            .field("pkce_verifier", &"<redacted>")
            .field("redirect_uri", &self.redirect_uri)
            .finish()
    }
}

/// A sign-in that has begun: send the browser to `authorize_url`, keep `pending`.
#[derive(Clone, Debug)]
pub struct SignInStart {
    /// The provider's authorization address with this sign-in's parameters (client id, redirect
    /// address, scopes, state, nonce, PKCE challenge).
    pub authorize_url: String,
    pub pending: PendingSignIn,
}

/// Why a sign-in failed. Each message says what to do about it and never holds a token, a
/// code, a client secret, a nonce or a PKCE verifier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignInError {
    /// The sign-in settings cannot work (the issuer is no URL or not the one the provider
    /// names, the client id is empty, the redirect address is no URL, the provider takes the
    /// client secret in no way the gateway can send it); the message names the field.
    #[error("single sign-on is not set up correctly: {0}")]
    InvalidSettings(String),
    /// The provider could not be reached, or answered something that is not what the protocol
    /// says (its metadata, its keys, its token or userinfo endpoint). Nothing is known about the
    /// operator: try again later.
    #[error("the identity provider cannot be used right now: {0}; try again shortly")]
    Unavailable(String),
    /// The provider sent the browser back with an error instead of a code (the operator
    /// cancelled, or the provider does not let this account use the gateway).
    #[error(
        "the identity provider refused the sign-in: {error}{}",
        description.as_deref().map(|text| format!(" ({text})")).unwrap_or_default()
    )]
    Refused {
        error: String,
        description: Option<String>,
    },
    /// The browser came back with another state than the one its sign-in was sent with: a
    /// forged or replayed callback, or a sign-in started in another tab.
    #[error(
        "the sign-in response does not belong to the sign-in this browser started (the state \
         does not match); start the sign-in again"
    )]
    StateMismatch,
    /// The provider did not accept the code: it expired, was used before, was never issued, or
    /// was issued for another redirect address or PKCE challenge.
    #[error("the identity provider did not accept the sign-in code: {0}; start the sign-in again")]
    CodeRejected(String),
    /// The provider refused the gateway's own client credentials at its token endpoint.
    #[error(
        "the identity provider does not accept the gateway's client credentials: {0}; check the \
         client id and client secret of single sign-on against the client registered there"
    )]
    ClientRejected(String),
    /// The ID token failed a check: its signature, issuer, audience, nonce or expiry.
    #[error("the identity provider's ID token is not valid: {0}")]
    InvalidIdToken(String),
    /// A mapped claim is missing or names no principal or tenant.
    #[error("the identity provider's `{claim}` claim {problem}")]
    InvalidClaim { claim: String, problem: String },
}

impl SignInError {
    /// The error of a callback that carries `error` (and maybe `error_description`) instead of
    /// a code. Both come from the browser's query string, so they are cut to 200 characters
    /// and control characters are escaped.
    pub fn refused(error: &str, description: Option<&str>) -> Self {
        SignInError::Refused {
            error: provider_text(error),
            description: description
                .filter(|text| !text.trim().is_empty())
                .map(provider_text),
        }
    }

    pub fn kind(&self) -> ErrorKind {
        match self {
            SignInError::InvalidSettings(_) => ErrorKind::Invalid,
            SignInError::Unavailable(_) => ErrorKind::Unavailable,
            SignInError::Refused { .. }
            | SignInError::StateMismatch
            | SignInError::CodeRejected(_)
            | SignInError::InvalidIdToken(_)
            | SignInError::InvalidClaim { .. } => ErrorKind::Unauthenticated,
            // Not the operator's doing: the gateway is set up with credentials the provider
            // does not know.
            SignInError::ClientRejected(_) => ErrorKind::Internal,
        }
    }
}

/// Text that the provider (or a browser) chose, made safe for a message: control characters
/// escaped, at most 200 characters.
fn provider_text(raw: &str) -> String {
    let mut text = String::new();
    let mut characters = raw.trim().chars();
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

/// Signs operators in at an OpenID provider for the web console.
///
/// Contract: `begin` contacts the provider only to learn its endpoints (and may answer
/// [`SignInError::Unavailable`]); every call answers a fresh state, nonce and PKCE verifier.
/// `finish` refuses a state other than the pending one before it contacts anyone, exchanges the
/// code with the pending PKCE verifier and redirect address, and answers claims only from an
/// ID token whose signature, issuer, audience, nonce and expiry it checked. The answered claims
/// carry no scopes (`scopes: None`): the console's operators are judged by their roles.
#[async_trait]
pub trait SignInProvider: Send + Sync {
    /// The issuer identifier (for the login page and logs).
    fn issuer(&self) -> &str;

    /// Starts a sign-in that returns to `redirect_uri`.
    async fn begin(&self, redirect_uri: &str) -> Result<SignInStart, SignInError>;

    /// Finishes it: `returned_state` and `code` are the query parameters the browser came back
    /// with.
    async fn finish(
        &self,
        pending: &PendingSignIn,
        returned_state: &str,
        code: &str,
    ) -> Result<VerifiedClaims, SignInError>;
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn pending() -> PendingSignIn {
        PendingSignIn {
            state: "state-6f1c".to_owned(),
            nonce: "nonce-91aa".to_owned(),
            pkce_verifier: "verifier-0b7e".to_owned(),
            redirect_uri: "https://gw.example.com/ui/login/sso/callback".to_owned(),
        }
    }

    // The console holds the provider as `Arc<dyn SignInProvider>`: it must stay object safe.
    #[allow(dead_code)]
    fn the_port_is_object_safe(_: Arc<dyn SignInProvider>) {}

    #[test]
    fn only_the_pending_state_passes() {
        let pending = pending();
        assert_eq!(pending.check_state("state-6f1c"), Ok(()));
        // Bad input: another state, a prefix of it, a longer one, an empty one, case changed.
        for returned in ["state-6f1d", "state-6f1", "state-6f1c0", "", "STATE-6F1C"] {
            assert_eq!(
                pending.check_state(returned),
                Err(SignInError::StateMismatch),
                "{returned:?}"
            );
        }
    }

    #[test]
    fn an_empty_pending_state_matches_nothing() {
        // Bad input: a pending sign-in that was never given a state, and a callback without one.
        let empty = PendingSignIn {
            state: String::new(),
            ..pending()
        };
        assert_eq!(empty.check_state(""), Err(SignInError::StateMismatch));
    }

    #[test]
    fn debug_output_keeps_the_secrets_of_the_sign_in() {
        let start = SignInStart {
            authorize_url: "https://idp.example.com/auth".to_owned(),
            pending: pending(),
        };
        let printed = format!("{start:?}");
        for secret in ["state-6f1c", "nonce-91aa", "verifier-0b7e"] {
            assert!(!printed.contains(secret), "{printed}");
        }
        assert!(printed.contains("https://gw.example.com/ui/login/sso/callback"));
    }

    #[test]
    fn each_error_has_its_kind() {
        let table = [
            (SignInError::InvalidSettings("x".into()), ErrorKind::Invalid),
            (SignInError::Unavailable("x".into()), ErrorKind::Unavailable),
            (
                SignInError::refused("access_denied", None),
                ErrorKind::Unauthenticated,
            ),
            (SignInError::StateMismatch, ErrorKind::Unauthenticated),
            (
                SignInError::CodeRejected("x".into()),
                ErrorKind::Unauthenticated,
            ),
            (
                SignInError::InvalidIdToken("x".into()),
                ErrorKind::Unauthenticated,
            ),
            (
                SignInError::InvalidClaim {
                    claim: "sub".into(),
                    problem: "x".into(),
                },
                ErrorKind::Unauthenticated,
            ),
            (SignInError::ClientRejected("x".into()), ErrorKind::Internal),
        ];
        for (error, kind) in table {
            assert_eq!(error.kind(), kind, "{error}");
        }
    }

    #[test]
    fn a_refusal_from_the_browser_is_made_safe_for_a_message() {
        // Bad input: a line break meant to forge a log line, and a description of 10,000
        // characters.
        let error = SignInError::refused("access_denied\r\nadmin: yes", Some(&"x".repeat(10_000)));
        let message = error.to_string();
        assert!(
            !message.contains('\n') && !message.contains('\r'),
            "{message}"
        );
        assert!(
            message.contains(r"access_denied\r\nadmin: yes"),
            "{message}"
        );
        assert!(message.len() < 500, "{} bytes", message.len());
        assert!(message.ends_with("...)"), "{message}");

        let plain = SignInError::refused("access_denied", Some("no account named bob"));
        assert_eq!(
            plain.to_string(),
            "the identity provider refused the sign-in: access_denied (no account named bob)"
        );
        let blank = SignInError::refused("login_required", Some("  "));
        assert_eq!(
            blank.to_string(),
            "the identity provider refused the sign-in: login_required"
        );
    }
}
