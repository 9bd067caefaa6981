//! Hashing and checking local users' passwords with argon2id.
//!
//! A hash is expensive on purpose (tens of milliseconds of CPU and 19 MiB of memory with the
//! recommended cost), so every hash runs on tokio's blocking thread pool, never on an async
//! executor thread, and at most one per CPU runs at a time: the memory a burst of sign-ins can
//! take is bounded, and the extra ones wait in line without holding a thread. Only sign-ins and
//! password changes hash; no request of the API or of MCP ever does.

use std::sync::Arc;

use argon2::password_hash::phc;
use argon2::{Algorithm, Argon2, Params, PasswordHasher as _, PasswordVerifier as _, Version};
use mcpgw_authz::{AuthError, PasswordHash};
use tokio::sync::{OnceCell, Semaphore};

/// Bytes of salt per hash (128 bits, from the gateway's secret source).
pub(crate) const SALT_BYTES: usize = 16;

/// The most memory a hash may ask for, in KiB (1 GiB): a stored hash asking for more is not
/// checked, so a tampered record cannot make the gateway allocate without bound.
pub const PASSWORD_HASH_MAX_MEMORY_KIB: u32 = 1024 * 1024;
/// The most passes a hash may ask for.
pub const PASSWORD_HASH_MAX_ITERATIONS: u32 = 64;
/// The most lanes a hash may ask for.
pub const PASSWORD_HASH_MAX_PARALLELISM: u32 = 16;

/// What an unknown user's password is checked against, so that an unknown name takes as long
/// as a wrong password; no user can have it, since unknown users never reach a real hash.
const DUMMY_PASSWORD: &[u8] = b"the password of nobody at all";
const DUMMY_SALT: [u8; SALT_BYTES] = *b"mcpgw-no-such-us";

/// The cost of argon2id: memory in KiB, passes over it, lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PasswordHashing {
    memory_kib: u32,
    iterations: u32,
    parallelism: u32,
}

impl PasswordHashing {
    /// m = 19 MiB (19456 KiB), t = 2, p = 1: the smallest cost that current password-storage
    /// guidance sets for argon2id. The memory is what makes guessing dear on GPUs and custom
    /// chips, which have plenty of cores but little fast memory per core; two passes over it
    /// take some 30-60 ms of one core in an optimized build.
    pub const RECOMMENDED: PasswordHashing = PasswordHashing {
        memory_kib: 19 * 1024,
        iterations: 2,
        parallelism: 1,
    };

    /// A cost of one's own: a higher one for a deployment that can afford it, or, in tests, the
    /// cheapest one argon2id allows (8 KiB, 1 pass, 1 lane). Refused outside what argon2id
    /// accepts and beyond [`PASSWORD_HASH_MAX_MEMORY_KIB`], [`PASSWORD_HASH_MAX_ITERATIONS`]
    /// and [`PASSWORD_HASH_MAX_PARALLELISM`], the bounds past which a stored hash is not checked.
    pub fn new(memory_kib: u32, iterations: u32, parallelism: u32) -> Result<Self, AuthError> {
        let hashing = Self {
            memory_kib,
            iterations,
            parallelism,
        };
        hashing
            .params()
            .map_err(|problem| AuthError::InvalidField {
                field: "password hashing",
                problem,
            })?;
        Ok(hashing)
    }

    pub fn memory_kib(&self) -> u32 {
        self.memory_kib
    }

    pub fn iterations(&self) -> u32 {
        self.iterations
    }

    pub fn parallelism(&self) -> u32 {
        self.parallelism
    }

    fn params(&self) -> Result<Params, String> {
        check_bounds(self.memory_kib, self.iterations, self.parallelism)?;
        Params::new(self.memory_kib, self.iterations, self.parallelism, None).map_err(|error| {
            format!(
                "m={},t={},p={} is not an argon2id cost: {error}",
                self.memory_kib, self.iterations, self.parallelism
            )
        })
    }
}

impl Default for PasswordHashing {
    fn default() -> Self {
        Self::RECOMMENDED
    }
}

fn check_bounds(memory_kib: u32, iterations: u32, parallelism: u32) -> Result<(), String> {
    if memory_kib > PASSWORD_HASH_MAX_MEMORY_KIB {
        return Err(format!(
            "{memory_kib} KiB of memory is more than the {PASSWORD_HASH_MAX_MEMORY_KIB} allowed"
        ));
    }
    if iterations > PASSWORD_HASH_MAX_ITERATIONS {
        return Err(format!(
            "{iterations} passes are more than the {PASSWORD_HASH_MAX_ITERATIONS} allowed"
        ));
    }
    if parallelism > PASSWORD_HASH_MAX_PARALLELISM {
        return Err(format!(
            "{parallelism} lanes are more than the {PASSWORD_HASH_MAX_PARALLELISM} allowed"
        ));
    }
    Ok(())
}

/// What checking a password against a stored hash found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Matches,
    DoesNotMatch,
    /// The stored hash is not an argon2id PHC string the gateway checks (damaged, another
    /// algorithm, a cost beyond the bounds).
    Unusable,
}

/// Why no verdict was reached: the blocking task or argon2 itself failed. For the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HashingFailed(pub String);

/// Hashes and checks passwords off the executors, a bounded number at a time.
pub(crate) struct PasswordHasher {
    hashing: PasswordHashing,
    running: Arc<Semaphore>,
    /// The hash of [`DUMMY_PASSWORD`] at the current cost, made by the first unknown user.
    dummy: OnceCell<PasswordHash>,
}

impl PasswordHasher {
    pub(crate) fn new(hashing: PasswordHashing) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        Self {
            hashing,
            running: Arc::new(Semaphore::new(cores)),
            dummy: OnceCell::new(),
        }
    }

    pub(crate) fn hashing(&self) -> PasswordHashing {
        self.hashing
    }

    /// The slots hashes wait for, for tests that hold them all.
    #[cfg(test)]
    pub(crate) fn slots(&self) -> Arc<Semaphore> {
        Arc::clone(&self.running)
    }

    /// Whether an unknown user's check has made the dummy hash yet.
    #[cfg(test)]
    pub(crate) fn has_dummy(&self) -> bool {
        self.dummy.get().is_some()
    }

    /// The argon2id hash of `password` with `salt`, as a PHC string.
    pub(crate) async fn hash(
        &self,
        password: &str,
        salt: [u8; SALT_BYTES],
    ) -> Result<PasswordHash, HashingFailed> {
        let params = self.hashing.params().map_err(HashingFailed)?;
        let password = password.as_bytes().to_vec();
        self.off_the_executor(move || hash_with(&params, &password, &salt))
            .await?
    }

    /// Whether `password` is the one `stored` was made from.
    pub(crate) async fn verify(
        &self,
        password: &str,
        stored: &PasswordHash,
    ) -> Result<Verdict, HashingFailed> {
        let stored = stored.as_str().to_owned();
        let password = password.as_bytes().to_vec();
        self.off_the_executor(move || verify_with(&password, &stored))
            .await
    }

    /// Does the work of checking a password whose user does not exist: a check against the
    /// dummy hash, or, the first time, the hash that makes the dummy (the same work).
    pub(crate) async fn check_against_dummy(&self, password: &str) -> Result<(), HashingFailed> {
        if let Some(dummy) = self.dummy.get() {
            self.verify(password, dummy).await?;
            return Ok(());
        }
        let dummy = self.hash_dummy().await?;
        // Another caller may have made it meanwhile; both are the same hash.
        let _ = self.dummy.set(dummy);
        Ok(())
    }

    async fn hash_dummy(&self) -> Result<PasswordHash, HashingFailed> {
        let params = self.hashing.params().map_err(HashingFailed)?;
        self.off_the_executor(move || hash_with(&params, DUMMY_PASSWORD, &DUMMY_SALT))
            .await?
    }

    /// Runs `work` on the blocking pool once a slot is free, and waits for it without
    /// blocking the executor.
    async fn off_the_executor<T, W>(&self, work: W) -> Result<T, HashingFailed>
    where
        T: Send + 'static,
        W: FnOnce() -> T + Send + 'static,
    {
        let permit = Arc::clone(&self.running)
            .acquire_owned()
            .await
            .map_err(|_| HashingFailed("the password hasher was shut down".to_owned()))?;
        tokio::task::spawn_blocking(move || {
            let answer = work();
            drop(permit);
            answer
        })
        .await
        .map_err(|error| HashingFailed(format!("the hashing task did not finish: {error}")))
    }
}

fn argon2id(params: Params) -> Argon2<'static> {
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

fn hash_with(
    params: &Params,
    password: &[u8],
    salt: &[u8; SALT_BYTES],
) -> Result<PasswordHash, HashingFailed> {
    let hashed = argon2id(params.clone())
        .hash_password_with_salt(password, salt)
        .map_err(|error| HashingFailed(format!("argon2id failed: {error}")))?;
    PasswordHash::parse(&hashed.to_string())
        .map_err(|error| HashingFailed(format!("argon2id made an unusable hash: {error}")))
}

fn verify_with(password: &[u8], stored: &str) -> Verdict {
    let Ok(parsed) = phc::PasswordHash::new(stored) else {
        return Verdict::Unusable;
    };
    if parsed.algorithm.as_str() != "argon2id" || parsed.salt.is_none() || parsed.hash.is_none() {
        return Verdict::Unusable;
    }
    let Ok(params) = Params::try_from(&parsed) else {
        return Verdict::Unusable;
    };
    if check_bounds(params.m_cost(), params.t_cost(), params.p_cost()).is_err() {
        return Verdict::Unusable;
    }
    match argon2id(params).verify_password(password, &parsed) {
        Ok(()) => Verdict::Matches,
        Err(argon2::password_hash::Error::PasswordInvalid) => Verdict::DoesNotMatch,
        Err(_) => Verdict::Unusable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cheapest cost argon2id allows, so that these tests stay fast in debug builds.
    fn cheap() -> PasswordHasher {
        PasswordHasher::new(PasswordHashing::new(8, 1, 1).unwrap())
    }

    #[test]
    fn the_recommended_cost_is_19_mib_two_passes_one_lane() {
        let recommended = PasswordHashing::default();
        assert_eq!(recommended, PasswordHashing::RECOMMENDED);
        assert_eq!(
            (
                recommended.memory_kib(),
                recommended.iterations(),
                recommended.parallelism()
            ),
            (19_456, 2, 1)
        );
        assert!(recommended.params().is_ok());
    }

    #[test]
    fn costs_argon2id_refuses_or_beyond_the_bounds_are_refused() {
        // Bad input: no pass, no lane, less memory than the lanes need, and each bound passed.
        for (memory, passes, lanes, expected) in [
            (8, 0, 1, "not an argon2id cost"),
            (8, 1, 0, "not an argon2id cost"),
            (4, 1, 1, "not an argon2id cost"),
            (
                PASSWORD_HASH_MAX_MEMORY_KIB + 1,
                1,
                1,
                "KiB of memory is more",
            ),
            (8, PASSWORD_HASH_MAX_ITERATIONS + 1, 1, "passes are more"),
            (1024, 1, PASSWORD_HASH_MAX_PARALLELISM + 1, "lanes are more"),
        ] {
            let error = PasswordHashing::new(memory, passes, lanes).unwrap_err();
            let message = error.to_string();
            assert!(message.starts_with("password hashing: "), "{message}");
            assert!(
                message.contains(expected),
                "{memory},{passes},{lanes}: {message}"
            );
        }
    }

    #[tokio::test]
    async fn a_hash_is_argon2id_at_the_cost_and_verifies_only_its_password() {
        let hasher = cheap();
        let hash = hasher
            .hash("correct horse battery", [7; SALT_BYTES])
            .await
            .unwrap();
        assert!(
            hash.as_str().starts_with("$argon2id$v=19$m=8,t=1,p=1$"),
            "{}",
            hash.as_str()
        );
        assert_eq!(
            hasher.verify("correct horse battery", &hash).await,
            Ok(Verdict::Matches)
        );
        // Bad input: a wrong password, the right one with a trailing newline, an empty one.
        for wrong in ["correct horse battery!", "correct horse battery\n", ""] {
            assert_eq!(
                hasher.verify(wrong, &hash).await,
                Ok(Verdict::DoesNotMatch),
                "{wrong:?}"
            );
        }
        // Another salt makes another hash of the same password.
        let other = hasher
            .hash("correct horse battery", [8; SALT_BYTES])
            .await
            .unwrap();
        assert_ne!(other, hash);
    }

    #[tokio::test]
    async fn stored_hashes_that_cannot_be_checked_are_unusable_not_a_panic() {
        let hasher = cheap();
        let hash = |raw: &str| PasswordHash::parse(raw).unwrap();
        // Bad input: not a PHC string argon2 reads, another argon2 variant, another
        // algorithm, a cost past the memory bound, no hash part.
        let argon2i = argon2::Argon2::new(
            Algorithm::Argon2i,
            Version::V0x13,
            Params::new(8, 1, 1, None).unwrap(),
        )
        .hash_password_with_salt(b"correct horse battery", &[1; SALT_BYTES])
        .unwrap()
        .to_string();
        for stored in [
            "$argon2id$v=19$m=bad",
            argon2i.as_str(),
            "$2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW",
            "$argon2id$v=19$m=4194304,t=1,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2g",
            "$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHRzYWx0",
        ] {
            assert_eq!(
                hasher.verify("correct horse battery", &hash(stored)).await,
                Ok(Verdict::Unusable),
                "{stored}"
            );
        }
    }

    #[tokio::test]
    async fn the_dummy_is_made_once_and_then_checked_against() {
        let hasher = cheap();
        assert!(hasher.dummy.get().is_none());
        hasher.check_against_dummy("anything at all").await.unwrap();
        let dummy = hasher
            .dummy
            .get()
            .cloned()
            .expect("the first check made it");
        hasher.check_against_dummy("something else").await.unwrap();
        assert_eq!(hasher.dummy.get(), Some(&dummy));
        assert_eq!(
            hasher
                .verify(std::str::from_utf8(DUMMY_PASSWORD).unwrap(), &dummy)
                .await,
            Ok(Verdict::Matches)
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hashes_run_off_the_executor_and_at_most_one_per_core_at_once() {
        let hasher = Arc::new(cheap());
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        assert_eq!(hasher.running.available_permits(), cores);
        let executor_thread = std::thread::current().id();
        let ran_on = hasher
            .off_the_executor(|| std::thread::current().id())
            .await
            .unwrap();
        assert_ne!(ran_on, executor_thread);
        // Hold every slot: a hash waits until one is free.
        let held = Arc::clone(&hasher.running)
            .acquire_many_owned(u32::try_from(cores).unwrap())
            .await
            .unwrap();
        let waiting = {
            let hasher = Arc::clone(&hasher);
            tokio::spawn(async move { hasher.hash("a password here", [1; SALT_BYTES]).await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert!(!waiting.is_finished(), "a hash ran without a free slot");
        drop(held);
        assert!(waiting.await.unwrap().is_ok());
    }
}
