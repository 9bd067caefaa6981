//! Bearer tokens verified recently, so that a client presenting the same token on every call
//! pays for its signature once.
//!
//! Checking an RS256 signature costs tens of microseconds and an ES256 one more; an MCP client
//! sends the same access token with every request until it expires. The cache keeps what a
//! successful verification answered, keyed by the SHA-256 digest of the resource and the
//! token (never the token itself: memory holds nothing a reader of a core dump could present),
//! and answers from it while
//!
//! - the token has not expired (its `exp`, compared with the clock at each use, without the
//!   verifier's leeway: an expired token always goes back to the verifier, which decides), and
//! - the entry is younger than [`VerifiedTokens::MAX_AGE`]: a key the issuer withdrew stops
//!   verifying its tokens within that time, as it would once the verifier fetched the new key
//!   set.
//!
//! Refused tokens are never cached: each costs a verification, and failed attempts count
//! towards the address's lockout. The cache holds at most [`VerifiedTokens::CAPACITY`]
//! entries; when full, expired and old entries go first, then everything.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use mcpgw_authz::VerifiedClaims;
use mcpgw_core::Timestamp;
use sha2::{Digest, Sha256};

struct Entry {
    claims: VerifiedClaims,
    verified_at: Timestamp,
}

/// Verified tokens by digest.
pub(crate) struct VerifiedTokens {
    entries: Mutex<HashMap<[u8; 32], Entry>>,
}

impl VerifiedTokens {
    /// The longest an entry answers for its token.
    pub(crate) const MAX_AGE: Duration = Duration::from_secs(60);
    /// The most entries kept.
    pub(crate) const CAPACITY: usize = 10_000;

    pub(crate) fn new() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The digest a token presented to `resource` is kept under.
    pub(crate) fn digest(resource: &str, token: &str) -> [u8; 32] {
        let mut hasher = Sha256::new();
        hasher.update(resource.as_bytes());
        // A separator that neither a URI nor a JWT holds, so no two pairs share a digest.
        hasher.update([0_u8]);
        hasher.update(token.as_bytes());
        hasher.finalize().into()
    }

    /// The claims of a token verified within [`Self::MAX_AGE`] that has not expired at `now`.
    pub(crate) fn get(&self, digest: &[u8; 32], now: Timestamp) -> Option<VerifiedClaims> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = entries.get(digest)?;
        Self::usable(entry, now).then(|| entry.claims.clone())
    }

    pub(crate) fn insert(&self, digest: [u8; 32], claims: VerifiedClaims, now: Timestamp) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= Self::CAPACITY && !entries.contains_key(&digest) {
            entries.retain(|_, entry| Self::usable(entry, now));
            if entries.len() >= Self::CAPACITY {
                entries.clear();
            }
        }
        entries.insert(
            digest,
            Entry {
                claims,
                verified_at: now,
            },
        );
    }

    fn usable(entry: &Entry, now: Timestamp) -> bool {
        let max_age = i64::try_from(Self::MAX_AGE.as_micros()).unwrap_or(i64::MAX);
        let age = now
            .unix_micros()
            .saturating_sub(entry.verified_at.unix_micros());
        now.unix_micros() < entry.claims.expires_at.unix_micros() && (0..max_age).contains(&age)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_unix_micros(seconds * 1_000_000)
    }

    fn claims(subject: &str, expires: i64) -> VerifiedClaims {
        VerifiedClaims {
            subject: subject.to_owned(),
            groups: Vec::new(),
            tenant: None,
            expires_at: at(expires),
            scopes: None,
        }
    }

    #[test]
    fn an_entry_answers_until_the_token_expires_or_it_is_a_minute_old() {
        let cache = VerifiedTokens::new();
        let digest = VerifiedTokens::digest("http://gw/mcp", "token-a");
        cache.insert(digest, claims("alice", 1_000), at(900));
        assert_eq!(cache.get(&digest, at(930)).unwrap().subject, "alice");
        // A minute after it was verified, the verifier is asked again.
        assert!(cache.get(&digest, at(960)).is_none());
        cache.insert(digest, claims("alice", 1_000), at(990));
        assert!(cache.get(&digest, at(999)).is_some());
        // At its `exp`, the token is expired for the cache, whatever the verifier's leeway.
        assert!(cache.get(&digest, at(1_000)).is_none());
        // A clock that went backwards does not make an entry young.
        assert!(cache.get(&digest, at(100)).is_none());
    }

    #[test]
    fn the_same_token_for_another_resource_is_another_entry() {
        let here = VerifiedTokens::digest("http://gw/mcp", "token-a");
        let there = VerifiedTokens::digest("http://other/mcp", "token-a");
        assert_ne!(here, there);
        // The separator keeps a shifted boundary apart.
        assert_ne!(
            VerifiedTokens::digest("ab", "c"),
            VerifiedTokens::digest("a", "bc")
        );
        let cache = VerifiedTokens::new();
        cache.insert(here, claims("alice", 1_000), at(900));
        assert!(cache.get(&there, at(900)).is_none());
    }

    #[test]
    fn a_full_cache_drops_what_is_stale_first_and_then_everything() {
        let cache = VerifiedTokens::new();
        for index in 0..VerifiedTokens::CAPACITY {
            let digest = VerifiedTokens::digest("r", &index.to_string());
            // Half of them expire at 950.
            let expires = if index % 2 == 0 { 950 } else { 2_000 };
            cache.insert(digest, claims("x", expires), at(900));
        }
        assert_eq!(cache.len(), VerifiedTokens::CAPACITY);
        cache.insert(
            VerifiedTokens::digest("r", "new"),
            claims("y", 2_000),
            at(951),
        );
        assert_eq!(cache.len(), VerifiedTokens::CAPACITY / 2 + 1);
        // All still usable and the cache full again: it starts over.
        for index in 0..VerifiedTokens::CAPACITY {
            cache.insert(
                VerifiedTokens::digest("more", &index.to_string()),
                claims("z", 2_000),
                at(952),
            );
        }
        assert!(cache.len() <= VerifiedTokens::CAPACITY);
        assert!(
            cache
                .get(&VerifiedTokens::digest("more", "9999"), at(953))
                .is_some()
        );
    }
}
