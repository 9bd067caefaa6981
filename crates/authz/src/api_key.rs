//! API keys: how they are made, what is kept of them, and how a presented key is judged.
//!
//! A key is `mcp_` followed by the unpadded base64url of 32 secret bytes (43 characters). The
//! gateway shows it once and keeps only its SHA-256 (hex) and its first 12 characters, which
//! listings show so that people can tell their keys apart. Secret bytes come from the
//! [`SecretSource`] port: this crate never draws randomness.

use std::fmt;
use std::time::Duration;

use mcpgw_core::{Timestamp, bounded_for_message};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

use crate::error::AuthError;
use crate::ports::SecretSource;
use crate::principal::Principal;
use crate::role::{RoleBook, RoleName};

/// What every key starts with.
pub const API_KEY_PREFIX: &str = "mcp_";
/// The secret bytes in a key the gateway makes; presented keys must carry at least as many.
pub const API_KEY_SECRET_BYTES: usize = 32;
/// How many leading characters of a key listings show (`mcp_` and 8 of the secret: 48 bits,
/// enough to tell keys apart, far too few to guess the rest).
pub const API_KEY_LISTED_PREFIX_LEN: usize = 12;
/// A presented key longer than this is refused before it is hashed.
pub const API_KEY_MAX_LEN: usize = 512;
/// The longest lifetime a key may be given, in days (ten years).
pub const API_KEY_MAX_EXPIRY_DAYS: i64 = 3650;
/// The longest key name, in characters.
pub const API_KEY_NAME_MAX_CHARS: usize = 128;

/// Base64url characters needed for [`API_KEY_SECRET_BYTES`] bytes without padding.
const SECRET_CHARS: usize = (API_KEY_SECRET_BYTES * 4).div_ceil(3);

/// Why a key that looks like a key (it has the `mcp_` prefix) was refused. Clients always see
/// `Invalid API key`; this goes to logs and events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyRejection {
    /// Not base64url after the prefix, or too short or too long to be a key.
    Malformed,
    /// Well formed, but no stored key has its hash.
    Unknown,
    Revoked {
        revoked_at: Timestamp,
    },
    Expired {
        expired_at: Timestamp,
    },
}

impl fmt::Display for KeyRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyRejection::Malformed => f.write_str("the key is malformed"),
            KeyRejection::Unknown => f.write_str("no such key"),
            KeyRejection::Revoked { revoked_at } => {
                write!(f, "the key was revoked at {revoked_at}")
            }
            KeyRejection::Expired { expired_at } => write!(f, "the key expired at {expired_at}"),
        }
    }
}

/// The SHA-256 of a raw key (the whole string, `mcp_` included): what the store keeps and
/// looks keys up by.
///
/// Equality runs in constant time, so comparing a presented hash with a stored one reveals
/// nothing about where they differ.
#[derive(Clone, Copy)]
pub struct KeyHash([u8; 32]);

impl KeyHash {
    pub fn of(raw_key: &str) -> Self {
        Self(Sha256::digest(raw_key.as_bytes()).into())
    }

    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Parses 64 hexadecimal digits (either case), as stores keep the hash.
    pub fn from_hex(hex: &str) -> Option<Self> {
        if hex.len() != 64 {
            return None;
        }
        let mut bytes = [0_u8; 32];
        for (byte, pair) in bytes.iter_mut().zip(hex.as_bytes().chunks_exact(2)) {
            let high = (pair[0] as char).to_digit(16)?;
            let low = (pair[1] as char).to_digit(16)?;
            *byte = u8::try_from(high * 16 + low).ok()?;
        }
        Some(Self(bytes))
    }

    /// 64 lowercase hexadecimal digits.
    pub fn to_hex(&self) -> String {
        self.to_string()
    }

    /// Compares every byte whatever the earlier ones were.
    pub fn constant_time_eq(&self, other: &KeyHash) -> bool {
        let difference = self
            .0
            .iter()
            .zip(other.0.iter())
            .fold(0_u8, |difference, (a, b)| difference | (a ^ b));
        std::hint::black_box(difference) == 0
    }
}

impl PartialEq for KeyHash {
    fn eq(&self, other: &Self) -> bool {
        self.constant_time_eq(other)
    }
}

impl Eq for KeyHash {}

impl std::hash::Hash for KeyHash {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl fmt::Display for KeyHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for KeyHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyHash({self})")
    }
}

impl Serialize for KeyHash {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for KeyHash {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Self::from_hex(&raw)
            .ok_or_else(|| serde::de::Error::custom("a key hash is 64 hexadecimal digits"))
    }
}

/// A freshly made key: shown to its owner once, never stored, never logged. `Debug` shows only
/// the listed prefix.
#[derive(Clone, PartialEq, Eq)]
pub struct RawApiKey(String);

impl RawApiKey {
    /// `mcp_` + base64url(`secret`). The secret must hold at least 32 bytes from a
    /// cryptographically secure source.
    pub fn from_secret(secret: &[u8]) -> Result<Self, AuthError> {
        if secret.len() < API_KEY_SECRET_BYTES {
            return Err(AuthError::RandomnessUnavailable {
                message: format!(
                    "{} secret bytes are fewer than the {API_KEY_SECRET_BYTES} a key needs",
                    secret.len()
                ),
            });
        }
        Ok(Self(format!("{API_KEY_PREFIX}{}", base64url(secret))))
    }

    /// The key itself, to hand to its owner once.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn hash(&self) -> KeyHash {
        KeyHash::of(&self.0)
    }

    pub fn listed_prefix(&self) -> String {
        listed_prefix(&self.0)
    }
}

impl fmt::Debug for RawApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RawApiKey({}...)", self.listed_prefix())
    }
}

fn listed_prefix(key: &str) -> String {
    key.chars().take(API_KEY_LISTED_PREFIX_LEN).collect()
}

/// A key as a client presented it, checked for shape only (whether it exists is the store's
/// to say).
#[derive(Clone, Copy)]
pub struct PresentedApiKey<'a>(&'a str);

impl<'a> PresentedApiKey<'a> {
    /// Judges the shape of the value of the key header. No value, an empty one, or one without
    /// the `mcp_` prefix is `No valid credentials provided` (a wrong prefix is no credential at
    /// all); a value with the prefix that cannot be a key is `Invalid API key` (malformed).
    /// Surrounding whitespace is ignored.
    pub fn parse(header_value: Option<&'a str>) -> Result<Self, AuthError> {
        let Some(value) = header_value.map(str::trim) else {
            return Err(AuthError::NoCredentials);
        };
        let Some(secret) = value.strip_prefix(API_KEY_PREFIX) else {
            return Err(AuthError::NoCredentials);
        };
        let well_formed = value.len() <= API_KEY_MAX_LEN
            && secret.len() >= SECRET_CHARS
            // A base64 text of n bytes never has a length of 1 modulo 4.
            && secret.len() % 4 != 1
            && secret
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !well_formed {
            return Err(AuthError::InvalidApiKey {
                reason: KeyRejection::Malformed,
            });
        }
        Ok(Self(value))
    }

    pub fn hash(&self) -> KeyHash {
        KeyHash::of(self.0)
    }

    /// The leading characters that listings show, to tell which key a client used.
    pub fn listed_prefix(&self) -> String {
        listed_prefix(self.0)
    }
}

impl fmt::Debug for PresentedApiKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PresentedApiKey({}...)", self.listed_prefix())
    }
}

/// A key's id: `key_` and 16 hexadecimal digits, made from secret-source bytes. It is public
/// (listings and `DELETE /api/auth/keys/{key_id}` use it) and says nothing about the key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyId(String);

impl KeyId {
    const PREFIX: &'static str = "key_";

    pub fn generate(secrets: &dyn SecretSource) -> Result<Self, AuthError> {
        let mut bytes = [0_u8; 8];
        secrets
            .fill(&mut bytes)
            .map_err(|error| AuthError::RandomnessUnavailable {
                message: error.to_string(),
            })?;
        let mut id = String::from(Self::PREFIX);
        for byte in bytes {
            id.push_str(&format!("{byte:02x}"));
        }
        Ok(Self(id))
    }

    /// Accepts any id a store could hold (1 to 64 of `[A-Za-z0-9_-]`); anything else cannot
    /// name a key, so it is NotFound rather than a validation error.
    pub fn parse(raw: &str) -> Result<Self, AuthError> {
        let plausible = !raw.is_empty()
            && raw.len() <= 64
            && raw
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if plausible {
            Ok(Self(raw.to_owned()))
        } else {
            Err(AuthError::KeyNotFound {
                key_id: bounded_for_message(raw),
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for KeyId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for KeyId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

/// Whether a key can be used at a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyStatus {
    Active,
    Expired,
    Revoked,
}

impl KeyStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            KeyStatus::Active => "active",
            KeyStatus::Expired => "expired",
            KeyStatus::Revoked => "revoked",
        }
    }
}

/// What the store keeps of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyRecord {
    pub id: KeyId,
    pub name: String,
    /// Who the key authenticates.
    pub principal: Principal,
    /// A role the key itself carries: a request made with the key holds it globally, on top
    /// of the roles assigned to the principal. Revoking the key takes it away.
    pub role: Option<RoleName>,
    /// The first [`API_KEY_LISTED_PREFIX_LEN`] characters of the key.
    pub prefix: String,
    pub hash: KeyHash,
    pub created_at: Timestamp,
    pub expires_at: Option<Timestamp>,
    pub revoked_at: Option<Timestamp>,
}

impl ApiKeyRecord {
    /// Revoked wins over expired: it was a deliberate act.
    pub fn status(&self, now: Timestamp) -> KeyStatus {
        if self.revoked_at.is_some_and(|revoked_at| revoked_at <= now) {
            KeyStatus::Revoked
        } else if self.expires_at.is_some_and(|expires_at| expires_at <= now) {
            KeyStatus::Expired
        } else {
            KeyStatus::Active
        }
    }

    /// Whether the presented key (by its hash) is this one and usable at `now`. The hashes
    /// are compared in constant time even though the store found the record by hash, so a
    /// store that looks up by a prefix of the hash cannot let a different key in.
    pub fn check(&self, presented: &KeyHash, now: Timestamp) -> Result<(), AuthError> {
        let reason = if !self.hash.constant_time_eq(presented) {
            KeyRejection::Unknown
        } else {
            match (self.status(now), self.revoked_at, self.expires_at) {
                (KeyStatus::Active, ..) => return Ok(()),
                (KeyStatus::Revoked, Some(revoked_at), _) => KeyRejection::Revoked { revoked_at },
                (KeyStatus::Expired, _, Some(expired_at)) => KeyRejection::Expired { expired_at },
                // `status` answers Revoked or Expired only when the matching field is set.
                _ => KeyRejection::Unknown,
            }
        };
        Err(AuthError::InvalidApiKey { reason })
    }

    /// This record revoked at `at`; a key revoked before keeps its first revocation time.
    #[must_use]
    pub fn revoked(&self, at: Timestamp) -> Self {
        Self {
            revoked_at: Some(self.revoked_at.unwrap_or(at)),
            ..self.clone()
        }
    }
}

/// A validated request for a key (either of the API's two spellings of a key request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewApiKey {
    pub principal: Principal,
    pub name: String,
    pub role: Option<RoleName>,
    pub expires_in_days: Option<u32>,
}

/// A key just made: the record to store and the raw key to show once.
#[derive(Debug, Clone)]
pub struct IssuedApiKey {
    pub record: ApiKeyRecord,
    pub raw_key: RawApiKey,
}

impl NewApiKey {
    /// Validates a create request. `role`, when given, must exist in `roles` (NotFound
    /// otherwise); `expires_in_days` must be 1 to 3650 when given (omitted: the key never
    /// expires); the name must be 1 to 128 characters without control characters (surrounding
    /// whitespace is dropped).
    pub fn parse(
        principal: &str,
        name: &str,
        role: Option<&str>,
        expires_in_days: Option<i64>,
        roles: &RoleBook,
    ) -> Result<Self, AuthError> {
        let principal = Principal::parse(principal)?;
        let name = name.trim();
        if name.is_empty() {
            return Err(AuthError::InvalidField {
                field: "name",
                problem: "a key needs a name, such as the client that will use it".to_owned(),
            });
        }
        if name.chars().count() > API_KEY_NAME_MAX_CHARS {
            return Err(AuthError::InvalidField {
                field: "name",
                problem: format!("it is longer than {API_KEY_NAME_MAX_CHARS} characters"),
            });
        }
        if name.chars().any(char::is_control) {
            return Err(AuthError::InvalidField {
                field: "name",
                problem: "it contains a control character".to_owned(),
            });
        }
        let role = match role {
            Some(role) => Some(roles.require(role)?.name().clone()),
            None => None,
        };
        let expires_in_days = match expires_in_days {
            None => None,
            Some(days) if (1..=API_KEY_MAX_EXPIRY_DAYS).contains(&days) => {
                Some(u32::try_from(days).unwrap_or(u32::MAX))
            }
            Some(days) => {
                return Err(AuthError::InvalidField {
                    field: "expires_in_days",
                    problem: format!(
                        "{days} is outside 1..={API_KEY_MAX_EXPIRY_DAYS}; omit it for a key \
                         that does not expire"
                    ),
                });
            }
        };
        Ok(Self {
            principal,
            name: name.to_owned(),
            role,
            expires_in_days,
        })
    }

    /// Makes the key: 32 secret bytes and 8 id bytes from `secrets`, created `now`.
    pub fn issue(
        self,
        secrets: &dyn SecretSource,
        now: Timestamp,
    ) -> Result<IssuedApiKey, AuthError> {
        let mut secret = [0_u8; API_KEY_SECRET_BYTES];
        secrets
            .fill(&mut secret)
            .map_err(|error| AuthError::RandomnessUnavailable {
                message: error.to_string(),
            })?;
        let raw_key = RawApiKey::from_secret(&secret)?;
        let id = KeyId::generate(secrets)?;
        let expires_at = self
            .expires_in_days
            .map(|days| now.plus(Duration::from_secs(u64::from(days) * 86_400)));
        Ok(IssuedApiKey {
            record: ApiKeyRecord {
                id,
                name: self.name,
                principal: self.principal,
                role: self.role,
                prefix: raw_key.listed_prefix(),
                hash: raw_key.hash(),
                created_at: now,
                expires_at,
                revoked_at: None,
            },
            raw_key,
        })
    }
}

/// Unpadded base64url (RFC 4648 §5).
fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut text = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let group = (u32::from(chunk[0]) << 16)
            | (u32::from(chunk.get(1).copied().unwrap_or(0)) << 8)
            | u32::from(chunk.get(2).copied().unwrap_or(0));
        // One byte gives two characters, two give three, three give four.
        for position in 0..=chunk.len() {
            let index = (group >> (18 - 6 * position)) & 0x3f;
            text.push(char::from(ALPHABET[index as usize]));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use mcpgw_core::ErrorKind;

    use super::*;
    use crate::ports::RandomnessError;

    /// Hands out a counting byte sequence, so every key and id of a test is known in advance.
    struct CountingSecrets(Mutex<u8>);

    impl CountingSecrets {
        fn new() -> Self {
            Self(Mutex::new(0))
        }
    }

    impl SecretSource for CountingSecrets {
        fn fill(&self, destination: &mut [u8]) -> Result<(), RandomnessError> {
            let mut next = self.0.lock().unwrap();
            for byte in destination {
                *byte = *next;
                *next = next.wrapping_add(1);
            }
            Ok(())
        }
    }

    struct BrokenSecrets;

    impl SecretSource for BrokenSecrets {
        fn fill(&self, _: &mut [u8]) -> Result<(), RandomnessError> {
            Err(RandomnessError("getrandom failed".to_owned()))
        }
    }

    const NOW: Timestamp = Timestamp::from_unix_micros(1_800_000_000_000_000);
    const DAY: Duration = Duration::from_secs(86_400);

    fn well_formed_key(fill: u8) -> String {
        RawApiKey::from_secret(&[fill; 32])
            .unwrap()
            .expose()
            .to_owned()
    }

    #[test]
    fn base64url_matches_rfc_4648_vectors() {
        // RFC 4648 §10 vectors, unpadded, and the two url-safe characters.
        let table: [(&[u8], &str); 8] = [
            (b"", ""),
            (b"f", "Zg"),
            (b"fo", "Zm8"),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg"),
            (b"fooba", "Zm9vYmE"),
            (b"foobar", "Zm9vYmFy"),
            (&[0xfb, 0xff, 0xbf], "-_-_"),
        ];
        for (bytes, text) in table {
            assert_eq!(base64url(bytes), text, "{bytes:?}");
        }
    }

    #[test]
    fn made_keys_have_the_documented_shape_and_their_hash_is_sha256_hex() {
        let key = RawApiKey::from_secret(&[0_u8; 32]).unwrap();
        assert_eq!(
            key.expose(),
            "mcp_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
        );
        assert_eq!(key.expose().len(), 4 + 43);
        assert_eq!(key.listed_prefix(), "mcp_AAAAAAAA");
        // `printf %s mcp_AAA...A | sha256sum`
        assert_eq!(
            key.hash().to_hex(),
            "9ce5115fd69f3e96e88542f8cf783153021c0252cda33013abb706fbfc40f160"
        );
        // A known SHA-256 vector, so the hash is not just self-consistent.
        assert_eq!(
            KeyHash::of("abc").to_hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        // The raw key never shows in Debug output.
        let debug = format!("{key:?}");
        assert!(!debug.contains(key.expose()), "{debug}");
        assert!(debug.contains("mcp_AAAAAAAA"), "{debug}");
        // Fewer than 32 secret bytes make no key.
        assert_eq!(
            RawApiKey::from_secret(&[0_u8; 31]).unwrap_err().kind(),
            ErrorKind::Internal
        );
        // More are fine and make a longer key.
        assert_eq!(
            RawApiKey::from_secret(&[7_u8; 48]).unwrap().expose().len(),
            4 + 64
        );
    }

    #[test]
    fn key_hashes_round_trip_through_hex_and_compare_by_value() {
        let hash = KeyHash::of("mcp_x");
        assert_eq!(KeyHash::from_hex(&hash.to_hex()), Some(hash));
        assert_eq!(KeyHash::from_hex(&hash.to_hex().to_uppercase()), Some(hash));
        // Wrong lengths, non-hex digits, a multi-byte character.
        for bad in [
            "",
            "00",
            &"g".repeat(64),
            &"0".repeat(63),
            &"0".repeat(65),
            &"é".repeat(32),
        ] {
            assert_eq!(KeyHash::from_hex(bad), None, "{bad}");
        }
        let mut bytes = *hash.as_bytes();
        assert!(hash.constant_time_eq(&KeyHash::from_bytes(bytes)));
        // A difference in the first or in the last byte is found alike.
        bytes[0] ^= 1;
        assert_ne!(hash, KeyHash::from_bytes(bytes));
        bytes[0] ^= 1;
        bytes[31] ^= 0x80;
        assert_ne!(hash, KeyHash::from_bytes(bytes));
        let json = serde_json::to_string(&hash).unwrap();
        assert_eq!(serde_json::from_str::<KeyHash>(&json).unwrap(), hash);
    }

    #[test]
    fn presented_keys_are_judged_by_shape_with_the_fixed_messages() {
        let good = well_formed_key(9);
        assert!(PresentedApiKey::parse(Some(&good)).is_ok());
        assert!(PresentedApiKey::parse(Some(&format!("  {good}\t"))).is_ok());
        let long_but_fine = format!("mcp_{}", "A".repeat(API_KEY_MAX_LEN - 4));
        assert!(PresentedApiKey::parse(Some(&long_but_fine)).is_ok());

        // No credential or a wrong prefix: "No valid credentials provided".
        for no_credentials in [
            None,
            Some(""),
            Some("   "),
            Some("sk_live_abcdef"),
            Some("MCP_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
            Some("Bearer mcp_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
            Some("mcp-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
        ] {
            let error = PresentedApiKey::parse(no_credentials).unwrap_err();
            assert_eq!(error, AuthError::NoCredentials, "{no_credentials:?}");
            assert_eq!(error.to_string(), "No valid credentials provided");
            assert_eq!(error.kind(), ErrorKind::Unauthenticated);
        }

        // The prefix but not a key: "Invalid API key", malformed.
        let too_long = format!("mcp_{}", "A".repeat(API_KEY_MAX_LEN - 3));
        for malformed in [
            "mcp_".to_owned(),
            "mcp_short".to_owned(),
            format!("mcp_{}", "A".repeat(42)),
            format!("mcp_{}=", "A".repeat(43)),
            format!("mcp_{}+/", "A".repeat(43)),
            format!("mcp_{} {}", "A".repeat(22), "A".repeat(22)),
            format!("mcp_{}", "A".repeat(45)),
            format!("mcp_{}é", "A".repeat(43)),
            too_long,
        ] {
            let error = PresentedApiKey::parse(Some(&malformed)).unwrap_err();
            assert_eq!(
                error,
                AuthError::InvalidApiKey {
                    reason: KeyRejection::Malformed
                },
                "{malformed}"
            );
            assert_eq!(error.to_string(), "Invalid API key");
        }
        // A presented key hashes as the stored one did.
        assert_eq!(
            PresentedApiKey::parse(Some(&good)).unwrap().hash(),
            KeyHash::of(&good)
        );
    }

    fn record(expires_at: Option<Timestamp>, revoked_at: Option<Timestamp>) -> ApiKeyRecord {
        let raw = well_formed_key(1);
        ApiKeyRecord {
            id: KeyId::parse("key_0001").unwrap(),
            name: "ci".to_owned(),
            principal: Principal::parse("service:ci").unwrap(),
            role: None,
            prefix: listed_prefix(&raw),
            hash: KeyHash::of(&raw),
            created_at: NOW,
            expires_at,
            revoked_at,
        }
    }

    #[test]
    fn a_record_checks_the_hash_then_revocation_then_expiry() {
        let right = KeyHash::of(&well_formed_key(1));
        let wrong = KeyHash::of(&well_formed_key(2));
        let later = NOW.plus(DAY);
        let much_later = NOW.plus(DAY * 10);
        let rejected = |reason| Err(AuthError::InvalidApiKey { reason });
        // (expires_at, revoked_at, presented, at, expected)
        let table = [
            (None, None, right, NOW, Ok(())),
            (None, None, right, much_later, Ok(())),
            (None, None, wrong, NOW, rejected(KeyRejection::Unknown)),
            (Some(later), None, right, NOW, Ok(())),
            // Expiry is exclusive: at the expiry instant the key is already expired.
            (
                Some(later),
                None,
                right,
                later,
                rejected(KeyRejection::Expired { expired_at: later }),
            ),
            (
                Some(later),
                None,
                right,
                much_later,
                rejected(KeyRejection::Expired { expired_at: later }),
            ),
            (None, Some(later), right, NOW, Ok(())),
            (
                None,
                Some(later),
                right,
                later,
                rejected(KeyRejection::Revoked { revoked_at: later }),
            ),
            (
                None,
                Some(NOW),
                right,
                much_later,
                rejected(KeyRejection::Revoked { revoked_at: NOW }),
            ),
            // Revoked and expired: revoked is the reason given.
            (
                Some(later),
                Some(NOW),
                right,
                much_later,
                rejected(KeyRejection::Revoked { revoked_at: NOW }),
            ),
            // A wrong key learns nothing about the stored key's state.
            (
                Some(later),
                Some(NOW),
                wrong,
                much_later,
                rejected(KeyRejection::Unknown),
            ),
        ];
        for (expires_at, revoked_at, presented, at, expected) in table {
            let key = record(expires_at, revoked_at);
            assert_eq!(
                key.check(&presented, at),
                expected,
                "expires {expires_at:?} revoked {revoked_at:?} at {at}"
            );
        }
        for (expires_at, revoked_at, status) in [
            (None, None, KeyStatus::Active),
            (Some(NOW), None, KeyStatus::Expired),
            (None, Some(NOW), KeyStatus::Revoked),
            (Some(NOW), Some(NOW), KeyStatus::Revoked),
        ] {
            assert_eq!(record(expires_at, revoked_at).status(NOW), status);
        }
        assert_eq!(KeyStatus::Expired.as_str(), "expired");
    }

    #[test]
    fn revoking_keeps_the_first_revocation_time() {
        let key = record(None, None);
        let revoked = key.revoked(NOW);
        assert_eq!(revoked.revoked_at, Some(NOW));
        assert_eq!(revoked.revoked(NOW.plus(DAY)).revoked_at, Some(NOW));
        assert_eq!(revoked.hash, key.hash);
    }

    #[test]
    fn issuing_makes_a_key_whose_record_recognises_it() {
        let roles = RoleBook::default();
        let request = NewApiKey::parse(
            "user:alice",
            "  laptop ",
            Some("developer"),
            Some(30),
            &roles,
        )
        .unwrap();
        assert_eq!(request.name, "laptop");
        let issued = request.issue(&CountingSecrets::new(), NOW).unwrap();
        let record = &issued.record;
        // Secret bytes 0..32 make the key, bytes 32..40 the id.
        assert_eq!(
            issued.raw_key.expose(),
            "mcp_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"
        );
        assert_eq!(record.id.as_str(), "key_2021222324252627");
        assert_eq!(record.prefix, "mcp_AAECAwQF");
        assert_eq!(record.principal.to_string(), "user:alice");
        assert_eq!(
            record.role.as_ref().map(RoleName::as_str),
            Some("developer")
        );
        assert_eq!(record.created_at, NOW);
        assert_eq!(record.expires_at, Some(NOW.plus(DAY * 30)));
        assert_eq!(record.revoked_at, None);
        // The presented key passes its record's check; the record holds no raw key.
        let presented = PresentedApiKey::parse(Some(issued.raw_key.expose())).unwrap();
        assert_eq!(record.check(&presented.hash(), NOW), Ok(()));
        assert!(!format!("{record:?}").contains(issued.raw_key.expose()));

        let without_expiry = NewApiKey::parse("service:ci", "ci", None, None, &roles)
            .unwrap()
            .issue(&CountingSecrets::new(), NOW)
            .unwrap();
        assert_eq!(without_expiry.record.expires_at, None);
        assert_eq!(without_expiry.record.role, None);

        let error = NewApiKey::parse("service:ci", "ci", None, None, &roles)
            .unwrap()
            .issue(&BrokenSecrets, NOW)
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Internal);
        assert!(error.to_string().contains("getrandom failed"), "{error}");
    }

    #[test]
    fn key_requests_refuse_bad_fields() {
        let roles = RoleBook::default();
        let parse = |principal: &str, name: &str, role: Option<&str>, days: Option<i64>| {
            NewApiKey::parse(principal, name, role, days, &roles).map(|_| ())
        };
        // (principal, name, role, expires_in_days, expected kind)
        let long_name = "n".repeat(API_KEY_NAME_MAX_CHARS + 1);
        let table = [
            ("alice", "n", None, None, ErrorKind::Invalid),
            ("user:alice", "", None, None, ErrorKind::Invalid),
            ("user:alice", "   ", None, None, ErrorKind::Invalid),
            ("user:alice", &long_name, None, None, ErrorKind::Invalid),
            ("user:alice", "a\u{1b}[31m", None, None, ErrorKind::Invalid),
            ("user:alice", "n", Some("ghost"), None, ErrorKind::NotFound),
            ("user:alice", "n", Some("Admin"), None, ErrorKind::NotFound),
            ("user:alice", "n", None, Some(0), ErrorKind::Invalid),
            ("user:alice", "n", None, Some(-1), ErrorKind::Invalid),
            (
                "user:alice",
                "n",
                None,
                Some(API_KEY_MAX_EXPIRY_DAYS + 1),
                ErrorKind::Invalid,
            ),
            ("user:alice", "n", None, Some(i64::MAX), ErrorKind::Invalid),
        ];
        for (principal, name, role, days, kind) in table {
            let error = parse(principal, name, role, days).unwrap_err();
            assert_eq!(error.kind(), kind, "{principal} {name:?} {role:?} {days:?}");
        }
        assert_eq!(
            parse("user:alice", "n", None, Some(0))
                .unwrap_err()
                .to_string(),
            "expires_in_days: 0 is outside 1..=3650; omit it for a key that does not expire"
        );
        assert!(parse("user:alice", "n", None, Some(API_KEY_MAX_EXPIRY_DAYS)).is_ok());
        assert!(
            parse(
                "user:alice",
                &"n".repeat(API_KEY_NAME_MAX_CHARS),
                None,
                Some(1)
            )
            .is_ok()
        );
    }

    #[test]
    fn key_ids_accept_what_a_store_could_hold_and_anything_else_is_not_found() {
        assert!(KeyId::parse("key_00ff").is_ok());
        for bad in ["", "../etc", "key 1", &"k".repeat(65), "key_é"] {
            assert_eq!(
                KeyId::parse(bad).unwrap_err().kind(),
                ErrorKind::NotFound,
                "{bad}"
            );
        }
    }
}
