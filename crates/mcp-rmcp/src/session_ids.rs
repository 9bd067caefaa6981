//! Session ids that carry their session, so that every replica of a fleet can resume it.
//!
//! An `initialize`-era session begins with the client's `initialize`; what the gateway needs
//! of it afterwards is small: the negotiated protocol version, the capabilities the client
//! declared (they decide what a server may ask it mid-call) and its `clientInfo`. When the
//! replicas share a secret, the session id is that, signed:
//!
//! ```text
//! base64url( 0x01 | issued at: u64 ms since the Unix epoch, big-endian | 16 random bytes
//!            | {"v": version, "c": capabilities, "i": clientInfo} as JSON
//!            | HMAC-SHA256 of everything before it )
//! ```
//!
//! under a key derived from the secret apart from the `requestState` key
//! (`HMAC-SHA256(secret, "mcpgw session v1")`, where the request states use the secret's
//! SHA-256). A replica that gets a request naming a session it does not hold re-creates the
//! session from its id ([`SessionIds::resumable`]), as if the client had initialized it there.
//!
//! The id is readable by the client and by anything that sees its headers, and it holds nothing
//! else: no principal, no credential. It is no authority either: every request is still
//! authenticated on its own credential. The random bytes keep two sessions of identical clients,
//! begun in the same millisecond, apart.
//!
//! An id is at most [`MAX_ID_CHARS`] long. A client whose capabilities or information would
//! make it longer gets an id with only what the gateway reads of them: the capabilities that
//! let servers ask it something (sampling, elicitation and its modes, roots), and its name and
//! version cut to [`KEPT_TEXT_BYTES`]. A replica that resumes such a session answers as if the
//! client had declared just that.
//!
//! An id is resumable for the resume window after its issue time (the time of `initialize`),
//! however active the session is meanwhile: the id cannot be renewed (a client keeps the one
//! `initialize` gave it), and a replica that does not hold a session cannot know when it was
//! last used. An id issued more than [`CLOCK_SKEW`] in the future (a replica's clock is off)
//! is not resumable either.
//!
//! A session ended with `DELETE` is remembered as ended by the replica that received the
//! `DELETE` ([`SessionIds::end`]) until its window closes, so that this replica does not
//! resume it; the other replicas know nothing of it. A replica that holds a copy of the session
//! serves it until that copy idles out, and one that does not hold it resumes it within the
//! window.
//!
//! The id is fixed at `initialize`, so what a session gathers afterwards stays with the replica
//! that holds it, and a re-created copy begins without it:
//!
//! - the level of `logging/setLevel`: until the client sets it again, its calls on the copy
//!   get no log messages (or all of them, unfiltered, when it declared capabilities for
//!   servers' requests, whose calls take rmcp's path);
//! - the resources it subscribed to: their updates go on reaching the other copy only;
//! - its streams and the calls running on them: a GET stream resumed with `Last-Event-ID` on
//!   another replica starts empty, and a call runs to its end where it started.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use mcpgw_core::RelayCapabilities;
use rmcp::model::{ClientCapabilities, Implementation, InitializeRequestParams, ProtocolVersion};
use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore, SessionStoreError,
};

use crate::input_required::{
    base64url, constant_time_eq, fill_random, from_base64url, hmac_sha256,
};

/// The longest session id the gateway issues or reads.
pub(crate) const MAX_ID_CHARS: usize = 2048;
/// How much of the client's name and version an id keeps when the whole would not fit.
pub(crate) const KEPT_TEXT_BYTES: usize = 64;
/// How far in the future an issue time may be (the replicas' clocks differ).
pub(crate) const CLOCK_SKEW: Duration = Duration::from_secs(5 * 60);

/// The first byte of every id of this layout.
const FORMAT: u8 = 1;
const NONCE_BYTES: usize = 16;
const MAC_BYTES: usize = 32;
/// The format byte, the issue time and the random bytes.
const PREFIX_BYTES: usize = 1 + 8 + NONCE_BYTES;
/// What the session key is derived with, so that it differs from every other key of the secret.
const KEY_LABEL: &[u8] = b"mcpgw session v1";
/// At most this many ended sessions are remembered.
const MAX_ENDED: usize = 65_536;

/// What an id carries of the client's `initialize`, under short names.
#[derive(serde::Serialize, serde::Deserialize)]
struct Carried {
    #[serde(rename = "v")]
    protocol_version: ProtocolVersion,
    #[serde(rename = "c")]
    capabilities: ClientCapabilities,
    #[serde(rename = "i")]
    client_info: Implementation,
}

impl Carried {
    fn of(params: &InitializeRequestParams) -> Self {
        Self {
            protocol_version: params.protocol_version.clone(),
            capabilities: params.capabilities.clone(),
            client_info: params.client_info.clone(),
        }
    }

    /// Only what the gateway reads: the capabilities for servers' requests, the name and the
    /// version, cut.
    fn reduced(&self) -> Self {
        Self {
            protocol_version: self.protocol_version.clone(),
            capabilities: serde_json::from_value(
                relay_capabilities(&self.capabilities).to_client_capabilities(),
            )
            .unwrap_or_default(),
            client_info: Implementation::new(
                clipped(&self.client_info.name),
                clipped(&self.client_info.version),
            ),
        }
    }

    fn into_params(self) -> InitializeRequestParams {
        InitializeRequestParams::new(self.capabilities, self.client_info)
            .with_protocol_version(self.protocol_version)
    }
}

/// What the gateway reads of a client's capabilities: whether servers may ask it something.
fn relay_capabilities(capabilities: &ClientCapabilities) -> RelayCapabilities {
    serde_json::to_value(capabilities)
        .map(|declared| RelayCapabilities::from_client_capabilities(&declared))
        .unwrap_or_default()
}

/// `text` cut to [`KEPT_TEXT_BYTES`], on a character boundary.
fn clipped(text: &str) -> &str {
    let mut end = text.len().min(KEPT_TEXT_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// What a verified id says.
struct Opened {
    issued_at_ms: u64,
    carried: Carried,
    mac: [u8; MAC_BYTES],
}

/// Issues and reads the session ids of one endpoint. Shared by its session manager (which
/// issues ids), rmcp's restore (which reads them, through [`SessionStore`]) and the direct path.
pub(crate) struct SessionIds {
    key: [u8; 32],
    /// How long after its issue time an id is resumable; `None`: always.
    resume_window_ms: Option<u64>,
    /// Sessions ended here with `DELETE`, by their MAC, until their window closes (ms).
    ended: Mutex<HashMap<[u8; MAC_BYTES], u64>>,
}

impl std::fmt::Debug for SessionIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionIds")
            .field("resume_window_ms", &self.resume_window_ms)
            .finish_non_exhaustive()
    }
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
        })
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl SessionIds {
    /// Ids signed under a key derived from `secret`, which every replica is given, resumable
    /// for `resume_window` after they were issued (`None`: for ever).
    pub(crate) fn new(secret: &str, resume_window: Option<Duration>) -> Self {
        Self {
            key: hmac_sha256(secret.as_bytes(), KEY_LABEL),
            resume_window_ms: resume_window.map(millis),
            ended: Mutex::new(HashMap::new()),
        }
    }

    /// A new session's id, carrying `params` (with the negotiated protocol version). `None`
    /// only when even the reduced parameters do not fit (a protocol version of kilobytes,
    /// which negotiation never yields): the session then gets an id that does not resume.
    pub(crate) fn mint(&self, params: &InitializeRequestParams) -> Option<String> {
        self.mint_at(params, unix_ms())
    }

    fn mint_at(&self, params: &InitializeRequestParams, issued_at_ms: u64) -> Option<String> {
        let carried = Carried::of(params);
        self.sealed(&carried, issued_at_ms)
            .or_else(|| self.sealed(&carried.reduced(), issued_at_ms))
    }

    /// `carried` in an id issued at `issued_at_ms`, when it fits.
    fn sealed(&self, carried: &Carried, issued_at_ms: u64) -> Option<String> {
        let json = serde_json::to_vec(carried).ok()?;
        let mut bytes = Vec::with_capacity(PREFIX_BYTES + json.len() + MAC_BYTES);
        bytes.push(FORMAT);
        bytes.extend_from_slice(&issued_at_ms.to_be_bytes());
        let mut nonce = [0_u8; NONCE_BYTES];
        fill_random(&mut nonce);
        bytes.extend_from_slice(&nonce);
        bytes.extend_from_slice(&json);
        let id = self.signed(bytes);
        (id.len() <= MAX_ID_CHARS).then_some(id)
    }

    /// `bytes` with their MAC appended, in base64url.
    fn signed(&self, mut bytes: Vec<u8>) -> String {
        let mac = hmac_sha256(&self.key, &bytes);
        bytes.extend_from_slice(&mac);
        base64url(&bytes)
    }

    /// What `id` carries, when this key signed it; anything else (another key, a changed byte,
    /// a cut, an id too long, not base64url, a payload that is not ours) is `None`.
    fn open(&self, id: &str) -> Option<Opened> {
        if id.len() > MAX_ID_CHARS {
            return None;
        }
        let bytes = from_base64url(id)?;
        let signed_len = bytes.len().checked_sub(MAC_BYTES)?;
        if signed_len < PREFIX_BYTES {
            return None;
        }
        let (signed, mac) = bytes.split_at(signed_len);
        let expected = hmac_sha256(&self.key, signed);
        if !constant_time_eq(mac, &expected) || signed[0] != FORMAT {
            return None;
        }
        let mut issued_at = [0_u8; 8];
        issued_at.copy_from_slice(&signed[1..9]);
        let carried = serde_json::from_slice(&signed[PREFIX_BYTES..]).ok()?;
        Some(Opened {
            issued_at_ms: u64::from_be_bytes(issued_at),
            carried,
            mac: expected,
        })
    }

    /// The `initialize` parameters to re-create the session `id` names with, when this key
    /// signed it, its window is open and it was not ended here.
    pub(crate) fn resumable(&self, id: &str) -> Option<InitializeRequestParams> {
        self.resumable_at(id, unix_ms())
    }

    fn resumable_at(&self, id: &str, now_ms: u64) -> Option<InitializeRequestParams> {
        let opened = self.open(id)?;
        if !self.in_window(opened.issued_at_ms, now_ms) || self.ended().contains_key(&opened.mac) {
            return None;
        }
        Some(opened.carried.into_params())
    }

    fn in_window(&self, issued_at_ms: u64, now_ms: u64) -> bool {
        if issued_at_ms > now_ms.saturating_add(millis(CLOCK_SKEW)) {
            return false;
        }
        self.resume_window_ms
            .is_none_or(|window| now_ms.saturating_sub(issued_at_ms) < window)
    }

    /// Whether the client of session `id` declared that servers may ask it something, when
    /// this key signed the id (its window and end do not matter: the session is held here).
    pub(crate) fn answers_requests(&self, id: &str) -> bool {
        self.open(id).is_some_and(|opened| {
            relay_capabilities(&opened.carried.capabilities).answers_requests()
        })
    }

    /// Remembers that session `id` was ended here, so that this replica does not resume it
    /// again while its window is open. Ids this key did not sign are not remembered.
    pub(crate) fn end(&self, id: &str) {
        self.end_at(id, unix_ms());
    }

    fn end_at(&self, id: &str, now_ms: u64) {
        let Some(opened) = self.open(id) else { return };
        let until = self.resume_window_ms.map_or(u64::MAX, |window| {
            opened.issued_at_ms.saturating_add(window)
        });
        if until <= now_ms {
            return;
        }
        let mut ended = self.ended();
        if ended.len() >= MAX_ENDED {
            ended.retain(|_, until| *until > now_ms);
        }
        if ended.len() >= MAX_ENDED {
            // Forget the one whose window closes first.
            let first = ended
                .iter()
                .min_by_key(|(_, until)| **until)
                .map(|(mac, _)| *mac);
            if let Some(first) = first {
                ended.remove(&first);
            }
        }
        ended.insert(opened.mac, until);
    }

    fn ended(&self) -> MutexGuard<'_, HashMap<[u8; MAC_BYTES], u64>> {
        self.ended.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// rmcp's restore asks here for the state of a session it does not hold: the id is the state.
#[async_trait::async_trait]
impl SessionStore for SessionIds {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let params = self.resumable(session_id);
        if params.is_some() {
            tracing::debug!(
                session = %session_id,
                "resuming an mcp session this replica does not hold"
            );
        }
        Ok(params.map(SessionState::new))
    }

    async fn store(
        &self,
        _session_id: &str,
        _state: &SessionState,
    ) -> Result<(), SessionStoreError> {
        // The id carries the state already.
        Ok(())
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        self.end(session_id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR_MS: u64 = 3_600_000;
    const NOW: u64 = 1_800_000_000_000;

    fn ids(secret: &str) -> SessionIds {
        SessionIds::new(secret, Some(Duration::from_secs(3600)))
    }

    fn params(capabilities: serde_json::Value, info: serde_json::Value) -> InitializeRequestParams {
        serde_json::from_value(serde_json::json!({
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities,
            "clientInfo": info,
        }))
        .unwrap()
    }

    fn plain() -> InitializeRequestParams {
        params(
            serde_json::json!({"sampling": {}, "roots": {"listChanged": true}}),
            serde_json::json!({"name": "claude-ai", "version": "0.1.0", "title": "Claude"}),
        )
    }

    #[test]
    fn an_id_carries_the_initialize_parameters_to_any_holder_of_the_secret() {
        let issuer = ids("fleet secret");
        let id = issuer.mint_at(&plain(), NOW).unwrap();
        assert!(id.len() < 400, "{} chars: {id}", id.len());
        assert!(
            id.bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || b"-_".contains(&byte)),
            "visible ASCII only: {id}"
        );
        let other_replica = ids("fleet secret");
        let resumed = other_replica.resumable_at(&id, NOW + 1000).unwrap();
        assert_eq!(resumed, plain());
        assert!(other_replica.answers_requests(&id));
        // Two sessions of the same client, begun in the same millisecond, differ.
        assert_ne!(issuer.mint_at(&plain(), NOW).unwrap(), id);
    }

    #[test]
    fn ids_that_were_not_issued_under_the_key_are_refused() {
        let issuer = ids("fleet secret");
        let id = issuer.mint_at(&plain(), NOW).unwrap();
        let at = NOW + 1000;
        // Bad input: another secret, every byte flipped in turn, a cut, a suffix, 100 KiB,
        // characters outside base64url, padding, nothing at all.
        assert!(ids("another secret").resumable_at(&id, at).is_none());
        let bytes = from_base64url(&id).unwrap();
        for index in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[index] ^= 0x01;
            assert!(
                issuer.resumable_at(&base64url(&flipped), at).is_none(),
                "byte {index} flipped"
            );
        }
        // Every character of the id replaced by another base64url character in turn (the
        // last one included, whose low bits the layout does not use).
        for (index, original) in id.char_indices() {
            let replacement = if original == 'A' { 'B' } else { 'A' };
            let mut changed = id.clone();
            changed.replace_range(index..=index, &replacement.to_string());
            assert!(
                issuer.resumable_at(&changed, at).is_none(),
                "character {index} changed"
            );
        }
        assert!(issuer.resumable_at(&id[..id.len() - 1], at).is_none());
        assert!(issuer.resumable_at(&id[..id.len() / 2], at).is_none());
        assert!(issuer.resumable_at(&format!("{id}AA"), at).is_none());
        assert!(issuer.resumable_at(&"A".repeat(100 * 1024), at).is_none());
        assert!(issuer.resumable_at(&format!("+{}", &id[1..]), at).is_none());
        assert!(issuer.resumable_at("not base64 at all!", at).is_none());
        assert!(issuer.resumable_at(&format!("{id}="), at).is_none());
        assert!(issuer.resumable_at("", at).is_none());
        assert!(!issuer.answers_requests("garbage"));
    }

    #[test]
    fn a_signed_payload_that_is_not_a_session_is_refused() {
        let issuer = ids("fleet secret");
        let mut prefix = vec![FORMAT];
        prefix.extend_from_slice(&NOW.to_be_bytes());
        prefix.extend_from_slice(&[7; NONCE_BYTES]);
        // Bad input, each correctly signed: JSON that is not the carried shape, bytes that are
        // not JSON, no payload at all, a shorter prefix, another format byte.
        for payload in [&b"{\"v\": 3}"[..], b"[1,2,3]", b"\xff\xfe garbage", b""] {
            let mut bytes = prefix.clone();
            bytes.extend_from_slice(payload);
            let id = issuer.signed(bytes);
            assert!(issuer.resumable_at(&id, NOW).is_none(), "{payload:?}");
        }
        assert!(
            issuer
                .resumable_at(&issuer.signed(vec![FORMAT; 5]), NOW)
                .is_none()
        );
        let good = issuer.mint_at(&plain(), NOW).unwrap();
        let mut other_format = from_base64url(&good).unwrap();
        other_format.truncate(other_format.len() - MAC_BYTES);
        other_format[0] = 2;
        assert!(
            issuer
                .resumable_at(&issuer.signed(other_format), NOW)
                .is_none()
        );
    }

    #[test]
    fn ids_resume_only_within_their_window_from_the_issue_time() {
        let issuer = ids("fleet secret");
        let id = issuer.mint_at(&plain(), NOW).unwrap();
        assert!(issuer.resumable_at(&id, NOW + HOUR_MS - 1).is_some());
        // Bad input: an id whose window closed, and one issued too far in the future.
        assert!(issuer.resumable_at(&id, NOW + HOUR_MS).is_none());
        assert!(
            issuer
                .resumable_at(&id, NOW - millis(CLOCK_SKEW) - 1)
                .is_none()
        );
        assert!(
            issuer.resumable_at(&id, NOW - 1000).is_some(),
            "a little skew"
        );
        let forever = SessionIds::new("fleet secret", None);
        assert!(forever.resumable_at(&id, NOW + 1000 * HOUR_MS).is_some());
    }

    #[test]
    fn an_ended_session_is_not_resumed_by_the_replica_that_ended_it() {
        let here = ids("fleet secret");
        let elsewhere = ids("fleet secret");
        let id = here.mint_at(&plain(), NOW).unwrap();
        let other = here.mint_at(&plain(), NOW).unwrap();
        here.end_at(&id, NOW + 10);
        assert!(here.resumable_at(&id, NOW + 20).is_none());
        assert!(here.resumable_at(&other, NOW + 20).is_some());
        assert!(elsewhere.resumable_at(&id, NOW + 20).is_some());
        // Bad input: ending ids that are not ours remembers nothing.
        here.end_at("garbage", NOW);
        here.end_at(&ids("another").mint_at(&plain(), NOW).unwrap(), NOW);
        assert_eq!(here.ended().len(), 1);
    }

    #[test]
    fn the_ended_list_is_bounded_and_forgets_closed_windows_first() {
        let here = ids("fleet secret");
        let early = here.mint_at(&plain(), NOW).unwrap();
        here.end_at(&early, NOW);
        for index in 1..MAX_ENDED {
            let mac = {
                let mut mac = [0_u8; MAC_BYTES];
                mac[..8].copy_from_slice(&u64::try_from(index).unwrap().to_be_bytes());
                mac
            };
            here.ended().insert(mac, NOW + 2 * HOUR_MS);
        }
        let late = here.mint_at(&plain(), NOW + HOUR_MS / 2).unwrap();
        here.end_at(&late, NOW + HOUR_MS / 2);
        assert_eq!(here.ended().len(), MAX_ENDED);
        assert!(here.resumable_at(&late, NOW + HOUR_MS / 2).is_none());
        // The entry whose window closes first made room.
        assert!(here.resumable_at(&early, NOW + HOUR_MS / 2).is_some());
    }

    #[test]
    fn oversized_parameters_keep_what_the_gateway_reads_within_the_limit() {
        let issuer = ids("fleet secret");
        let big = "x".repeat(10_000);
        // Bad input: kilobytes of experimental capabilities, a long title, a name of control
        // characters (six bytes each once escaped), a version of multi-byte characters.
        let huge = params(
            serde_json::json!({
                "experimental": {"blob": {"data": big}},
                "elicitation": {"url": {}},
            }),
            serde_json::json!({
                "name": "\u{1}".repeat(500),
                "version": "é".repeat(500),
                "title": big,
            }),
        );
        let id = issuer.mint_at(&huge, NOW).unwrap();
        assert!(id.len() <= MAX_ID_CHARS, "{}", id.len());
        let resumed = issuer.resumable_at(&id, NOW).unwrap();
        assert_eq!(resumed.protocol_version, ProtocolVersion::V_2025_11_25);
        assert_eq!(resumed.client_info.name, "\u{1}".repeat(KEPT_TEXT_BYTES));
        assert_eq!(resumed.client_info.version, "é".repeat(KEPT_TEXT_BYTES / 2));
        assert_eq!(resumed.client_info.title, None);
        assert_eq!(resumed.capabilities.experimental, None);
        let relay = relay_capabilities(&resumed.capabilities);
        assert!(relay.elicitation_url && !relay.elicitation_form && !relay.sampling);
        // Bad input: a protocol version longer than any id.
        let mut absurd = plain();
        absurd.protocol_version = serde_json::from_value(serde_json::json!(big)).unwrap();
        assert_eq!(issuer.mint_at(&absurd, NOW), None);
    }

    #[test]
    fn the_session_key_is_not_the_request_state_key() {
        use sha2::Digest as _;
        let request_state_key: [u8; 32] = sha2::Sha256::digest(b"fleet secret").into();
        assert_ne!(ids("fleet secret").key, request_state_key);
        assert_ne!(ids("fleet secret").key, ids("fleet secret ").key);
    }

    #[tokio::test]
    async fn the_store_answers_rmcp_from_the_id_and_remembers_deletes() {
        let store = SessionIds::new("fleet secret", Some(Duration::from_secs(3600)));
        let id = store.mint(&plain()).unwrap();
        let state = store.load(&id).await.unwrap().expect("resumable");
        assert_eq!(state.initialize_params, plain());
        // Bad input: an id that is not ours.
        assert!(store.load("nonsense").await.unwrap().is_none());
        store.store(&id, &state).await.unwrap();
        store.delete(&id).await.unwrap();
        assert!(store.load(&id).await.unwrap().is_none());
    }
}
