//! The 2026-07-28 era's input-required results, for servers that ask their client mid-call.
//!
//! A 2026-07-28 client is stateless: a server cannot send it a request in the middle of a
//! call. Instead the call answers an `InputRequiredResult` (`resultType: "input_required"`)
//! listing what it needs (`inputRequests`, keyed), with an opaque `requestState`, and the
//! client calls again with its answers (`inputResponses`, same keys) and that state.
//!
//! The gateway's upstream sessions are of the `initialize` era, whose servers ask with real
//! requests (`elicitation/create`, `sampling/createMessage`, `roots/list`) and wait for the
//! answer. For a 2026-07-28 caller the gateway translates: when the server asks, the call is
//! *parked* (the upstream request stays open, waiting) and the caller gets an
//! `InputRequiredResult` with the server's requests; the retry hands the answers to the
//! waiting server and goes on waiting for the call's result, or for the server's next
//! question (another round).
//!
//! The `requestState` names the parked call and its round, signed with HMAC-SHA256: a state
//! that was changed, or made up, is refused; a state of a round already answered is refused; a
//! parked call is resumed only by the principal that made it. A parked call nobody resumes is
//! cancelled upstream after [`PARK_TIMEOUT`]. Parked calls live in this gateway process: a
//! retry that reaches another replica, or comes after a restart, is told to call again.
//!
//! A server that takes 2026-07-28 requests answers input-required results itself; the
//! gateway passes them through (see [`ParkedCalls::seal`]): the questions go to the client
//! unchanged, under the server's own keys, and the server's `requestState` travels inside a
//! signed envelope of the gateway's that also names the tool or prompt, the principal and an
//! expiry. Nothing is kept in the gateway between the rounds, so any replica that holds the
//! same key resumes the exchange; a state is taken once per replica.
//!
//! The key is drawn at start, or derived from a secret every replica is given
//! ([`ParkedCalls::with_secret`]).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use mcpgw_core::{FrontendError, RelayError, Relayed, ToolCallOutcome};
use rmcp::model::ErrorData;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long a parked call waits for its caller to come back with the answers.
pub(crate) const PARK_TIMEOUT: Duration = Duration::from_secs(600);

/// At most this many calls wait for their callers at once; more are refused.
const MAX_PARKED: usize = 1024;

const STATE_VERSION: &str = "mcpgw1";
/// The version prefix of a passed-through server's state in the gateway's envelope.
const SEALED_VERSION: &str = "mcpgw2";
/// The prefix of a task id as the gateway hands it to its client.
const TASK_VERSION: &str = "mcpgw-task";

/// At most this many sealed states are remembered as answered, per gateway process.
const MAX_ANSWERED: usize = 65_536;

type CallTask = JoinHandle<Result<ToolCallOutcome, FrontendError>>;

/// A question of the server that the caller has not answered yet.
struct Question {
    key: String,
    method: String,
    params: Value,
    answer: oneshot::Sender<Result<Value, RelayError>>,
}

/// A call whose server asked something, waiting for its caller to answer.
struct Parked {
    principal: Option<String>,
    round: u64,
    call: CallTask,
    relayed: mpsc::UnboundedReceiver<Relayed>,
    questions: Vec<Question>,
    asked: u64,
    cancel: CancellationToken,
    expires_at: Instant,
}

impl Parked {
    /// Records a question of the server under a key of its own; anything else (a log message
    /// nobody asked for) is dropped.
    fn ask(&mut self, item: Relayed) {
        if let Relayed::Request {
            method,
            params,
            answer,
        } = item
        {
            self.asked += 1;
            let key = format!("{}-{}", short_name(&method), self.asked);
            self.questions.push(Question {
                key,
                method,
                params,
                answer,
            });
        }
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        // Nobody will answer: the server's questions fail (the senders drop) and the call is
        // cancelled upstream.
        self.cancel.cancel();
    }
}

/// What one round of a call ends with.
pub(crate) enum Round {
    /// The call answered.
    Done(Result<ToolCallOutcome, FrontendError>),
    /// The server asks: the `InputRequiredResult` as JSON.
    InputRequired(Value),
}

/// The calls parked by one MCP endpoint, and the key of its request states.
pub(crate) struct ParkedCalls {
    key: [u8; 32],
    calls: Mutex<HashMap<String, Parked>>,
    /// Sealed states answered already (their MACs), until they expire.
    answered: Mutex<HashMap<String, u64>>,
}

/// What a retry of a request asks for, checked against its sealed state.
pub(crate) struct Retry<'a> {
    /// `tool` or `prompt`.
    pub kind: &'static str,
    /// The name the client called.
    pub name: &'a str,
    pub principal: Option<&'a str>,
}

/// What the gateway keeps in a sealed state.
#[derive(serde::Serialize, serde::Deserialize)]
struct Sealed {
    /// `tool` or `prompt`.
    k: String,
    /// The name the client called.
    n: String,
    /// The principal that made the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    p: Option<String>,
    /// Expiry, in seconds since the Unix epoch.
    e: u64,
    /// 64 random bits, so that two seals of the same request differ.
    r: String,
    /// The server's own state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    s: Option<String>,
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

impl std::fmt::Debug for ParkedCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParkedCalls")
            .field("parked", &self.lock().len())
            .finish_non_exhaustive()
    }
}

fn invalid_state(message: &str) -> ErrorData {
    ErrorData::invalid_params(message.to_owned(), None)
}

impl ParkedCalls {
    pub(crate) fn new() -> Self {
        let mut key = [0_u8; 32];
        fill_random(&mut key);
        Self::with_key(key)
    }

    /// Request states signed with a key derived from `secret`, which every replica that should
    /// resume the others' exchanges is given.
    pub(crate) fn with_secret(secret: &str) -> Self {
        Self::with_key(Sha256::digest(secret.as_bytes()).into())
    }

    fn with_key(key: [u8; 32]) -> Self {
        Self {
            key,
            calls: Mutex::new(HashMap::new()),
            answered: Mutex::new(HashMap::new()),
        }
    }

    /// A server's input-required result as its caller gets it: the server's `requestState`
    /// sealed into the gateway's envelope for `retry` (a result without one gets one, so that
    /// the retry is bound to the caller and the name too). Other results pass unchanged.
    pub(crate) fn seal(&self, mut result: Value, retry: &Retry<'_>) -> Value {
        if !mcpgw_core::is_input_required(&result) {
            return result;
        }
        let Some(object) = result.as_object_mut() else {
            return result;
        };
        let mut nonce = [0_u8; 8];
        fill_random(&mut nonce);
        let sealed = Sealed {
            k: retry.kind.to_owned(),
            n: retry.name.to_owned(),
            p: retry.principal.map(str::to_owned),
            e: unix_now() + PARK_TIMEOUT.as_secs(),
            r: hex(&nonce),
            s: object
                .remove("requestState")
                .and_then(|state| state.as_str().map(str::to_owned)),
        };
        object.insert(
            "requestState".to_owned(),
            Value::String(self.sealed(SEALED_VERSION, &sealed)),
        );
        result
    }

    /// The id a client holds for the task `task_id` (its owners in front, see
    /// [`mcpgw_core::task`]): the id and the principal that created the task, signed, so that a
    /// task is followed only by whoever created it, through any replica with the same key.
    pub(crate) fn seal_task(&self, task_id: &str, principal: Option<&str>) -> String {
        self.sealed(
            TASK_VERSION,
            &serde_json::json!({"i": task_id, "p": principal}),
        )
    }

    /// The task a client's task id names, when the gateway issued that id to `principal`.
    pub(crate) fn unseal_task(
        &self,
        sealed: &str,
        principal: Option<&str>,
    ) -> Result<String, ErrorData> {
        let unknown = || {
            ErrorData::invalid_params(
                format!(
                    "unknown task {}: this gateway issued no such task id to this caller",
                    mcpgw_core::bounded_for_message(sealed)
                ),
                None,
            )
        };
        let (decoded, _): (Value, _) = self.opened(TASK_VERSION, sealed).ok_or_else(unknown)?;
        if decoded["p"].as_str() != principal {
            return Err(unknown());
        }
        decoded["i"].as_str().map(str::to_owned).ok_or_else(unknown)
    }

    /// Whether `state` is a sealed one (as opposed to a parked call's).
    pub(crate) fn is_sealed(state: &str) -> bool {
        state.starts_with(SEALED_VERSION) && state[SEALED_VERSION.len()..].starts_with('.')
    }

    /// The server's own state inside a sealed `state`, when the gateway sealed it for this
    /// very retry, it has not expired, and this replica has not seen it answered before.
    pub(crate) fn unseal(
        &self,
        state: &str,
        retry: &Retry<'_>,
    ) -> Result<Option<String>, ErrorData> {
        let not_ours = || {
            invalid_state(
                "the requestState was not issued by this gateway, or was changed: send the \
                 request again without it",
            )
        };
        let (sealed, mac): (Sealed, _) = self.opened(SEALED_VERSION, state).ok_or_else(not_ours)?;
        if sealed.k != retry.kind || sealed.n != retry.name {
            return Err(invalid_state(&format!(
                "this requestState belongs to another request (the {} `{}`): send it with that \
                 one",
                sealed.k, sealed.n
            )));
        }
        if sealed.p.as_deref() != retry.principal {
            return Err(invalid_state(
                "this requestState was issued to another caller: send the request again \
                 without it",
            ));
        }
        let now = unix_now();
        if sealed.e <= now {
            return Err(invalid_state(
                "this requestState has expired: send the request again without it",
            ));
        }
        let mut answered = self.answered.lock().unwrap_or_else(PoisonError::into_inner);
        answered.retain(|_, expires| *expires > now);
        if answered.contains_key(mac) {
            return Err(invalid_state(
                "this requestState was answered already: use the one of the latest \
                 input-required result",
            ));
        }
        if answered.len() >= MAX_ANSWERED {
            return Err(ErrorData::internal_error(
                "the gateway is tracking too many multi-round requests; try again later",
                None,
            ));
        }
        answered.insert(mac.to_owned(), sealed.e);
        Ok(sealed.s)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Parked>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs a new call (already started as `call`, cancelled by `cancel`) until it answers or
    /// its server asks something.
    pub(crate) async fn start(
        &self,
        principal: Option<String>,
        call: CallTask,
        relayed: mpsc::UnboundedReceiver<Relayed>,
        cancel: CancellationToken,
        caller_gone: &CancellationToken,
        notes: Option<&mpsc::UnboundedSender<Relayed>>,
    ) -> Result<Round, ErrorData> {
        let parked = Parked {
            principal,
            round: 0,
            call,
            relayed,
            questions: Vec::new(),
            asked: 0,
            cancel,
            expires_at: Instant::now() + PARK_TIMEOUT,
        };
        self.run(random_id(), parked, caller_gone, notes).await
    }

    /// Resumes the parked call `request_state` names with the caller's answers.
    pub(crate) async fn resume(
        &self,
        request_state: &str,
        answers: Option<&std::collections::BTreeMap<String, Value>>,
        principal: Option<&str>,
        caller_gone: &CancellationToken,
        notes: Option<&mpsc::UnboundedSender<Relayed>>,
    ) -> Result<Round, ErrorData> {
        let (id, round) = self.verify(request_state).ok_or_else(|| {
            invalid_state(
                "the requestState was not issued by this gateway, or was changed: call the tool \
                 again without it",
            )
        })?;
        let mut parked = {
            let mut calls = self.lock();
            self.expire(&mut calls);
            match calls.get(&id) {
                Some(parked) if parked.principal.as_deref() == principal => {}
                _ => {
                    return Err(invalid_state(
                        "the call this requestState belongs to is over or expired (or was \
                         parked by another gateway replica): call the tool again",
                    ));
                }
            }
            if calls.get(&id).is_some_and(|parked| parked.round != round) {
                return Err(invalid_state(
                    "this requestState was answered already: use the one of the latest \
                     input-required result",
                ));
            }
            calls
                .remove(&id)
                .ok_or_else(|| invalid_state("the call is over"))?
        };
        // Answers go to the questions they name; keys the server did not ask are ignored, and
        // questions left unanswered are asked again.
        let mut unanswered = Vec::new();
        for question in std::mem::take(&mut parked.questions) {
            match answers.and_then(|answers| answers.get(&question.key)) {
                Some(answer) => {
                    let _ = question.answer.send(Ok(answer.clone()));
                }
                None => unanswered.push(question),
            }
        }
        parked.questions = unanswered;
        parked.expires_at = Instant::now() + PARK_TIMEOUT;
        self.run(id, parked, caller_gone, notes).await
    }

    /// Waits for the call to answer or its server to ask; parks it in the second case. The
    /// server's notifications meanwhile (log messages) go to `notes`, the stream of the
    /// caller's request of this round, when it asked for them.
    async fn run(
        &self,
        id: String,
        mut parked: Parked,
        caller_gone: &CancellationToken,
        notes: Option<&mpsc::UnboundedSender<Relayed>>,
    ) -> Result<Round, ErrorData> {
        if parked.questions.is_empty() {
            // Once every sender of the relay is gone, only the call's end is waited for.
            let mut relay_open = true;
            loop {
                tokio::select! {
                    biased;
                    outcome = &mut parked.call => {
                        let outcome = outcome.unwrap_or_else(|error| {
                            tracing::error!(%error, "a parked tool call ended without an answer");
                            Err(FrontendError::new(
                                mcpgw_core::FrontendErrorKind::Unavailable,
                                "the gateway failed while running the call; see its log",
                            ))
                        });
                        return Ok(Round::Done(outcome));
                    }
                    item = parked.relayed.recv(), if relay_open => match item {
                        Some(item @ Relayed::Request { .. }) => {
                            parked.ask(item);
                            break;
                        }
                        Some(item @ Relayed::Notification { .. }) => {
                            if let Some(notes) = notes {
                                let _ = notes.send(item);
                            }
                        }
                        None => relay_open = false,
                    },
                    () = caller_gone.cancelled() => return Err(ErrorData::new(
                        rmcp::model::ErrorCode(crate::CANCELLED_ERROR_CODE),
                        "the request was cancelled",
                        None,
                    )),
                }
            }
            // Questions asked together are answered together.
            while let Ok(item) = parked.relayed.try_recv() {
                match (&item, notes) {
                    (Relayed::Notification { .. }, Some(notes)) => {
                        let _ = notes.send(item);
                    }
                    _ => parked.ask(item),
                }
            }
        }
        parked.round += 1;
        let input_requests: Map<String, Value> = parked
            .questions
            .iter()
            .map(|question| {
                let request =
                    serde_json::json!({"method": question.method, "params": question.params});
                (question.key.clone(), request)
            })
            .collect();
        let request_state = self.sign(&id, parked.round);
        let mut calls = self.lock();
        self.expire(&mut calls);
        if calls.len() >= MAX_PARKED {
            return Err(ErrorData::internal_error(
                "the gateway has too many calls waiting for their callers' answers; try again \
                 later",
                None,
            ));
        }
        calls.insert(id, parked);
        Ok(Round::InputRequired(serde_json::json!({
            "resultType": "input_required",
            "inputRequests": input_requests,
            "requestState": request_state,
        })))
    }

    fn expire(&self, calls: &mut HashMap<String, Parked>) {
        let now = Instant::now();
        calls.retain(|_, parked| parked.expires_at > now);
    }

    fn sign(&self, id: &str, round: u64) -> String {
        self.signed(format!("{STATE_VERSION}.{id}.{round}"))
    }

    /// The parked call and round a state names, when this gateway signed it.
    fn verify(&self, state: &str) -> Option<(String, u64)> {
        let (payload, _) = self.verified(state)?;
        let mut parts = payload.split('.');
        let (Some(STATE_VERSION), Some(id), Some(round), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        Some((id.to_owned(), round.parse().ok()?))
    }
}

impl ParkedCalls {
    /// `payload` with the gateway's MAC: `{payload}.{HMAC-SHA256, hex}`.
    fn signed(&self, payload: String) -> String {
        let mac = hex(&hmac_sha256(&self.key, payload.as_bytes()));
        format!("{payload}.{mac}")
    }

    /// The payload and the MAC of `text`, when this gateway signed it.
    fn verified<'a>(&self, text: &'a str) -> Option<(&'a str, &'a str)> {
        let (payload, mac) = text.rsplit_once('.')?;
        let expected = hex(&hmac_sha256(&self.key, payload.as_bytes()));
        constant_time_eq(mac.as_bytes(), expected.as_bytes()).then_some((payload, mac))
    }

    /// `value` as JSON in a signed envelope: `{version}.{base64url JSON}.{MAC}`.
    fn sealed(&self, version: &str, value: &impl serde::Serialize) -> String {
        let json = serde_json::to_vec(value).unwrap_or_default();
        self.signed(format!("{version}.{}", base64url(&json)))
    }

    /// The value inside an envelope of [`ParkedCalls::sealed`] with `version`, and its MAC,
    /// when this gateway sealed it.
    fn opened<'a, T: serde::de::DeserializeOwned>(
        &self,
        version: &str,
        text: &'a str,
    ) -> Option<(T, &'a str)> {
        let (payload, mac) = self.verified(text)?;
        let encoded = payload.strip_prefix(version)?.strip_prefix('.')?;
        let value = serde_json::from_slice(&from_base64url(encoded)?).ok()?;
        Some((value, mac))
    }
}

pub(crate) fn base64url(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

pub(crate) fn from_base64url(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .ok()
}

/// `elicitation`, `sampling`, `roots`: the key stem of a question.
fn short_name(method: &str) -> &str {
    match method {
        "elicitation/create" => "elicitation",
        "sampling/createMessage" => "sampling",
        "roots/list" => "roots",
        other => other.split('/').next().unwrap_or("request"),
    }
}

/// HMAC-SHA256 of `message` under `key`; a key longer than the hash's block is hashed first,
/// as HMAC prescribes. Session ids ([`crate::session_ids`]) are signed with it too.
pub(crate) fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let hashed;
    let key = if key.len() > BLOCK {
        hashed = Sha256::digest(key);
        hashed.as_slice()
    } else {
        key
    };
    let mut inner_pad = [0x36_u8; BLOCK];
    let mut outer_pad = [0x5c_u8; BLOCK];
    for (index, byte) in key.iter().enumerate() {
        inner_pad[index] ^= byte;
        outer_pad[index] ^= byte;
    }
    let inner = Sha256::new()
        .chain_update(inner_pad)
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(outer_pad)
        .chain_update(inner)
        .finalize()
        .into()
}

pub(crate) fn constant_time_eq(left: &[u8], right: &[u8]) -> bool {
    left.len() == right.len()
        && left
            .iter()
            .zip(right)
            .fold(0_u8, |difference, (a, b)| difference | (a ^ b))
            == 0
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut text, byte| {
        let _ = write!(text, "{byte:02x}");
        text
    })
}

/// A parked call's id: 128 random bits.
fn random_id() -> String {
    let mut id = [0_u8; 16];
    fill_random(&mut id);
    hex(&id)
}

/// Fills `bytes` from the operating system's random source. Without it (no `/dev/urandom`)
/// the time and the address space layout stand in, which still keeps states of one process
/// apart; the signature, not the id, is what makes a state unforgeable, and its key is
/// drawn the same way.
pub(crate) fn fill_random(bytes: &mut [u8]) {
    use std::io::Read as _;
    if let Ok(mut source) = std::fs::File::open("/dev/urandom")
        && source.read_exact(bytes).is_ok()
    {
        return;
    }
    let seed = format!("{:?}{:p}", std::time::SystemTime::now(), &bytes);
    let digest = Sha256::digest(seed.as_bytes());
    for (index, byte) in bytes.iter_mut().enumerate() {
        *byte = digest[index % digest.len()];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_the_rfc_4231_vector() {
        // The key of 0x0b * 20, padded with zeros to the 32 bytes of a request-state key, which
        // HMAC does itself for short keys.
        let mut key = [0_u8; 32];
        key[..20].copy_from_slice(&[0x0b; 20]);
        assert_eq!(
            hex(&hmac_sha256(&key, b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        // A key shorter than 32 bytes (a fleet secret may be short).
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // A key longer than the block, which is hashed first.
        assert_eq!(
            hex(&hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn states_are_refused_when_changed_or_made_up() {
        let parked = ParkedCalls::new();
        let state = parked.sign("abc", 2);
        assert_eq!(parked.verify(&state), Some(("abc".to_owned(), 2)));
        // Bad input: a changed round, a changed id, an appended suffix, another gateway's key,
        // garbage.
        let changed_round = state.replacen(".2.", ".3.", 1);
        assert_eq!(parked.verify(&changed_round), None);
        assert_eq!(parked.verify(&state.replacen("abc", "abd", 1)), None);
        assert_eq!(parked.verify(&format!("{state}-TAMPERED")), None);
        assert_eq!(ParkedCalls::new().verify(&state), None);
        for garbage in ["", ".", "mcpgw1", "mcpgw1.a.b.c.d", "not a state at all"] {
            assert_eq!(parked.verify(garbage), None, "{garbage:?}");
        }
    }

    fn retry<'a>(name: &'a str, principal: Option<&'a str>) -> Retry<'a> {
        Retry {
            kind: "tool",
            name,
            principal,
        }
    }

    #[test]
    fn sealed_states_carry_the_servers_state_once_and_only_for_their_request() {
        let gateway = ParkedCalls::new();
        let result = serde_json::json!({
            "resultType": "input_required",
            "inputRequests": {"confirm": {"method": "roots/list", "params": {}}},
            "requestState": "server-state",
        });
        let sealed = gateway.seal(result, &retry("ask", Some("user:alice")));
        assert_eq!(sealed["inputRequests"]["confirm"]["method"], "roots/list");
        let state = sealed["requestState"].as_str().unwrap().to_owned();
        assert!(ParkedCalls::is_sealed(&state), "{state}");
        assert!(
            !state.contains("server-state"),
            "the server's state is not shown as is"
        );

        // Bad input: another tool, another caller, a tampered state, another gateway's key.
        for (name, principal) in [
            ("other", Some("user:alice")),
            ("ask", Some("user:bob")),
            ("ask", None),
        ] {
            let refused = gateway.unseal(&state, &retry(name, principal)).unwrap_err();
            assert_eq!(refused.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        }
        assert!(
            gateway
                .unseal(
                    &format!("{state}-TAMPERED"),
                    &retry("ask", Some("user:alice"))
                )
                .is_err()
        );
        assert!(
            ParkedCalls::new()
                .unseal(&state, &retry("ask", Some("user:alice")))
                .is_err()
        );

        let inner = gateway
            .unseal(&state, &retry("ask", Some("user:alice")))
            .unwrap();
        assert_eq!(inner.as_deref(), Some("server-state"));
        // Replayed: refused the second time.
        let replayed = gateway
            .unseal(&state, &retry("ask", Some("user:alice")))
            .unwrap_err();
        assert!(
            replayed.message.contains("answered already"),
            "{}",
            replayed.message
        );
    }

    #[test]
    fn replicas_with_one_secret_read_each_others_states() {
        let first = ParkedCalls::with_secret("shared secret");
        let second = ParkedCalls::with_secret("shared secret");
        let other = ParkedCalls::with_secret("another secret");
        let result = serde_json::json!({"resultType": "input_required", "inputRequests": {}});
        let sealed = first.seal(result, &retry("ask", None));
        let state = sealed["requestState"].as_str().unwrap();
        assert!(other.unseal(state, &retry("ask", None)).is_err());
        // A result without a state of the server's gets one, which carries none back.
        assert_eq!(second.unseal(state, &retry("ask", None)).unwrap(), None);
        // A complete result is not touched.
        let complete = serde_json::json!({"content": [], "requestState": "x"});
        assert_eq!(first.seal(complete.clone(), &retry("ask", None)), complete);
    }

    #[test]
    fn task_ids_name_their_task_for_their_creator_only() {
        let gateway = ParkedCalls::new();
        let sealed = gateway.seal_task("server/upstream-id", Some("user:alice"));
        assert_eq!(
            gateway.unseal_task(&sealed, Some("user:alice")).unwrap(),
            "server/upstream-id"
        );
        // Bad input: another caller, no caller, a changed id, another gateway's id, garbage.
        assert!(gateway.unseal_task(&sealed, Some("user:bob")).is_err());
        assert!(gateway.unseal_task(&sealed, None).is_err());
        assert!(
            gateway
                .unseal_task(&format!("{sealed}0"), Some("user:alice"))
                .is_err()
        );
        assert!(
            ParkedCalls::new()
                .unseal_task(&sealed, Some("user:alice"))
                .is_err()
        );
        let unknown = gateway.unseal_task("gate-test", None).unwrap_err();
        assert_eq!(unknown.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    }
}
