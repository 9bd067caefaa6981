//! What the small runtime ports promise, as tests that every implementation must pass:
//! [`Clock`] (monotonic and wall time, sleeping), [`TaskSpawner`] (background work),
//! [`SecretSource`] (secure random bytes) and [`RandomSource`] (the `random` group strategy's
//! numbers).
//!
//! ```text
//! mcpgw_testkit::clock_contract_suite!(RealTime::new(MyClock::new()));
//! mcpgw_testkit::task_spawner_contract_suite!(MySpawner::new());
//! mcpgw_testkit::secret_source_contract_suite!(MySecrets);
//! mcpgw_testkit::random_source_contract_suite!(MyRandom::new());
//! ```

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_authz::SecretSource;
use mcpgw_core::{Clock, TaskSpawner};
use mcpgw_groups::RandomSource;

use crate::clock::FakeClock;

/// How long a spawned task may take to run before the case fails.
const TASK_DEADLINE: Duration = Duration::from_secs(10);

/// Expands to one `#[tokio::test]` per case of the [`TaskSpawner`] contract: a spawned task
/// runs to its end without anyone awaiting it, every one of many runs, and a task may spawn
/// another through the same spawner. `$make_spawner` is evaluated inside the test's (multi
/// threaded) runtime.
#[macro_export]
macro_rules! task_spawner_contract_suite {
    ($make_spawner:expr $(,)?) => {
        $crate::__task_spawner_contract_case!($make_spawner, a_spawned_task_runs_unawaited);
        $crate::__task_spawner_contract_case!($make_spawner, every_one_of_many_tasks_runs);
        $crate::__task_spawner_contract_case!($make_spawner, a_task_may_spawn_another);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __task_spawner_contract_case {
    ($make_spawner:expr, $case:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            let spawner = ::std::sync::Arc::new($make_spawner);
            $crate::runtime_suites::$case(spawner).await;
        }
    };
}

/// Expands to one `#[test]` per case of the [`SecretSource`] contract: the whole buffer is
/// filled, fills never repeat, an empty buffer is fine, large buffers are filled to the end,
/// and threads may fill at once.
#[macro_export]
macro_rules! secret_source_contract_suite {
    ($make_source:expr $(,)?) => {
        $crate::__secret_source_contract_case!($make_source, every_byte_of_the_buffer_is_filled);
        $crate::__secret_source_contract_case!($make_source, no_two_fills_are_alike);
        $crate::__secret_source_contract_case!($make_source, an_empty_buffer_is_no_error);
        $crate::__secret_source_contract_case!($make_source, a_large_buffer_is_filled_to_the_end);
        $crate::__secret_source_contract_case!($make_source, threads_may_fill_at_once);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __secret_source_contract_case {
    ($make_source:expr, $case:ident) => {
        #[test]
        fn $case() {
            let source = ::std::sync::Arc::new($make_source);
            $crate::runtime_suites::$case(source);
        }
    };
}

/// Expands to one `#[test]` per case of the [`RandomSource`] contract: `below` stays under its
/// bound, `below(0)` and `below(1)` are 0, draws vary, and `below` spreads evenly.
#[macro_export]
macro_rules! random_source_contract_suite {
    ($make_source:expr $(,)?) => {
        $crate::__random_source_contract_case!($make_source, below_stays_under_its_bound);
        $crate::__random_source_contract_case!($make_source, below_zero_and_below_one_are_zero);
        $crate::__random_source_contract_case!($make_source, draws_vary);
        $crate::__random_source_contract_case!($make_source, below_spreads_evenly);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __random_source_contract_case {
    ($make_source:expr, $case:ident) => {
        #[test]
        fn $case() {
            let mut source = $make_source;
            $crate::runtime_suites::$case(&mut source);
        }
    };
}

/// Expands to one `#[tokio::test]` per case of the [`Clock`] contract: `now` never goes back,
/// `wall` moves with it, a `sleep` ends once its time has passed on this clock and not before,
/// and a zero sleep ends at once. `$make_driver` is a [`ClockDriver`]: [`RealTime`] for a clock
/// that follows real time, [`FakeTime`] for one that a test moves.
#[macro_export]
macro_rules! clock_contract_suite {
    ($make_driver:expr $(,)?) => {
        $crate::__clock_contract_case!($make_driver, now_never_goes_back);
        $crate::__clock_contract_case!($make_driver, wall_time_moves_with_the_clock);
        $crate::__clock_contract_case!($make_driver, a_sleep_ends_once_its_time_has_passed);
        $crate::__clock_contract_case!($make_driver, a_zero_sleep_ends_at_once);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __clock_contract_case {
    ($make_driver:expr, $case:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            let driver = $make_driver;
            $crate::runtime_suites::$case(&driver).await;
        }
    };
}

/// What the clock suite needs besides the clock: a way to let time pass on it.
#[async_trait]
pub trait ClockDriver: Send + Sync {
    fn clock(&self) -> Arc<dyn Clock>;
    /// Lets `duration` pass on the clock: a real clock is waited for, a fake one moved.
    async fn pass(&self, duration: Duration);
}

/// A clock that follows real time: time passes by waiting.
pub struct RealTime(Arc<dyn Clock>);

impl RealTime {
    pub fn new(clock: impl Clock) -> Self {
        Self(Arc::new(clock))
    }
}

#[async_trait]
impl ClockDriver for RealTime {
    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.0)
    }

    async fn pass(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }
}

/// A [`FakeClock`], moved by the suite.
#[derive(Default)]
pub struct FakeTime(Arc<FakeClock>);

#[async_trait]
impl ClockDriver for FakeTime {
    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.0) as Arc<dyn Clock>
    }

    async fn pass(&self, duration: Duration) {
        // Sleepers spawned just before get to register first.
        tokio::task::yield_now().await;
        self.0.advance(duration);
    }
}

// ----- clock ----------------------------------------------------------------------------------

pub async fn now_never_goes_back(driver: &dyn ClockDriver) {
    let clock = driver.clock();
    let start = clock.now();
    let mut last = start;
    for _ in 0..1_000 {
        let now = clock.now();
        assert!(now >= last, "now went back from {last:?} to {now:?}");
        last = now;
    }
    driver.pass(Duration::from_millis(20)).await;
    let moved = clock.now().saturating_since(start);
    assert!(
        moved >= Duration::from_millis(20),
        "20 ms passed, now moved {moved:?}"
    );
}

pub async fn wall_time_moves_with_the_clock(driver: &dyn ClockDriver) {
    let clock = driver.clock();
    let before = clock.wall();
    driver.pass(Duration::from_millis(50)).await;
    let after = clock.wall();
    let moved = after.unix_micros() - before.unix_micros();
    // A real wall clock may be stepped a little by time synchronization.
    assert!(
        (45_000..5_000_000).contains(&moved),
        "50 ms passed, wall time moved {moved} µs"
    );
}

pub async fn a_sleep_ends_once_its_time_has_passed(driver: &dyn ClockDriver) {
    let clock = driver.clock();
    let mut sleep = clock.sleep(Duration::from_millis(200));
    // The first poll starts the sleep.
    assert!(
        futures::poll!(&mut sleep).is_pending(),
        "a 200 ms sleep ended at once"
    );
    driver.pass(Duration::from_millis(20)).await;
    assert!(
        futures::poll!(&mut sleep).is_pending(),
        "a 200 ms sleep ended after 20 ms"
    );
    driver.pass(Duration::from_millis(400)).await;
    tokio::time::timeout(TASK_DEADLINE, sleep)
        .await
        .expect("a 200 ms sleep had not ended after 420 ms");
}

pub async fn a_zero_sleep_ends_at_once(driver: &dyn ClockDriver) {
    tokio::time::timeout(Duration::from_secs(1), driver.clock().sleep(Duration::ZERO))
        .await
        .expect("a zero sleep waited for time to pass");
}

// ----- task spawner ---------------------------------------------------------------------------

/// Waits until `count` reaches `expected`, failing after [`TASK_DEADLINE`].
async fn wait_for(count: &AtomicUsize, expected: usize, what: &str) {
    let deadline = tokio::time::Instant::now() + TASK_DEADLINE;
    while count.load(Ordering::SeqCst) < expected {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: {} of {expected} ran within {TASK_DEADLINE:?}",
            count.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

pub async fn a_spawned_task_runs_unawaited(spawner: Arc<dyn TaskSpawner>) {
    let (done, finished) = tokio::sync::oneshot::channel();
    spawner.spawn(Box::pin(async move {
        // A task that waits before finishing: the spawner must keep polling it.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let _ = done.send(());
    }));
    tokio::time::timeout(TASK_DEADLINE, finished)
        .await
        .expect("the spawned task did not run to its end")
        .expect("the spawned task was dropped before its end");
}

pub async fn every_one_of_many_tasks_runs(spawner: Arc<dyn TaskSpawner>) {
    let ran = Arc::new(AtomicUsize::new(0));
    for _ in 0..200 {
        let ran = Arc::clone(&ran);
        spawner.spawn(Box::pin(async move {
            tokio::task::yield_now().await;
            ran.fetch_add(1, Ordering::SeqCst);
        }));
    }
    wait_for(&ran, 200, "tasks").await;
}

pub async fn a_task_may_spawn_another(spawner: Arc<dyn TaskSpawner>) {
    let ran = Arc::new(AtomicUsize::new(0));
    let inner_spawner = Arc::clone(&spawner);
    let inner_ran = Arc::clone(&ran);
    spawner.spawn(Box::pin(async move {
        inner_ran.fetch_add(1, Ordering::SeqCst);
        let nested_ran = Arc::clone(&inner_ran);
        inner_spawner.spawn(Box::pin(async move {
            nested_ran.fetch_add(1, Ordering::SeqCst);
        }));
    }));
    wait_for(&ran, 2, "the task and the one it spawned").await;
}

// ----- secret source --------------------------------------------------------------------------

fn filled(source: &dyn SecretSource, length: usize) -> Vec<u8> {
    let mut buffer = vec![0_u8; length];
    source
        .fill(&mut buffer)
        .unwrap_or_else(|error| panic!("filling {length} bytes failed: {error}"));
    buffer
}

pub fn every_byte_of_the_buffer_is_filled(source: Arc<dyn SecretSource>) {
    // Over 64 fills of 32 bytes, every position must take some non-zero value: a source that
    // leaves a tail untouched, or fills only a prefix, fails (a fair source misses with a
    // chance of 2^-512 per position).
    let mut seen = [0_u8; 32];
    for _ in 0..64 {
        for (position, byte) in filled(source.as_ref(), 32).into_iter().enumerate() {
            seen[position] |= byte;
        }
    }
    assert!(
        seen.iter().all(|bits| *bits != 0),
        "some positions were never written: {seen:?}"
    );
}

pub fn no_two_fills_are_alike(source: Arc<dyn SecretSource>) {
    let mut fills = HashSet::new();
    for _ in 0..1_000 {
        assert!(
            fills.insert(filled(source.as_ref(), 16)),
            "a 16-byte fill repeated: the bytes are predictable"
        );
    }
}

pub fn an_empty_buffer_is_no_error(source: Arc<dyn SecretSource>) {
    assert!(filled(source.as_ref(), 0).is_empty());
}

pub fn a_large_buffer_is_filled_to_the_end(source: Arc<dyn SecretSource>) {
    let buffer = filled(source.as_ref(), 1 << 20);
    for (name, part) in [
        ("start", &buffer[..256]),
        ("end", &buffer[buffer.len() - 256..]),
    ] {
        let zeros = part.iter().filter(|byte| **byte == 0).count();
        // 256 fair bytes hold about one zero; 32 zeros would be a fill that stopped early.
        assert!(
            zeros < 32,
            "the {name} of a 1 MiB fill has {zeros} zero bytes of 256"
        );
    }
}

pub fn threads_may_fill_at_once(source: Arc<dyn SecretSource>) {
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let source = Arc::clone(&source);
            std::thread::spawn(move || {
                (0..100)
                    .map(|_| filled(source.as_ref(), 16))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut fills = HashSet::new();
    for thread in threads {
        for fill in thread.join().expect("a filling thread panicked") {
            assert!(fills.insert(fill), "two threads got the same bytes");
        }
    }
    assert_eq!(fills.len(), 800);
}

// ----- random source --------------------------------------------------------------------------

pub fn below_stays_under_its_bound(source: &mut dyn RandomSource) {
    for bound in 1..=50_u64 {
        for _ in 0..200 {
            let draw = source.below(bound);
            assert!(draw < bound, "below({bound}) answered {draw}");
        }
    }
    let huge = u64::MAX - 1;
    for _ in 0..1_000 {
        assert!(source.below(huge) < huge);
    }
}

pub fn below_zero_and_below_one_are_zero(source: &mut dyn RandomSource) {
    for _ in 0..100 {
        assert_eq!(source.below(0), 0);
        assert_eq!(source.below(1), 0);
    }
}

pub fn draws_vary(source: &mut dyn RandomSource) {
    let draws: HashSet<u64> = (0..1_000).map(|_| source.next_u64()).collect();
    // A fair 64-bit source repeats a value among 1,000 draws with a chance near 2^-45.
    assert_eq!(draws.len(), 1_000, "draws repeat");
}

pub fn below_spreads_evenly(source: &mut dyn RandomSource) {
    let mut counts = [0_u32; 4];
    for _ in 0..40_000 {
        counts[usize::try_from(source.below(4)).expect("below(4) fits")] += 1;
    }
    // Each value is expected 10,000 times with a standard deviation of about 87: a count
    // outside 9,000..11,000 is more than eleven deviations off.
    assert!(
        counts.iter().all(|count| (9_000..11_000).contains(count)),
        "below(4) is uneven: {counts:?}"
    );
}

#[cfg(test)]
mod fake_clock {
    crate::clock_contract_suite!(super::FakeTime::default());
}

#[cfg(test)]
mod scripted_randomness_fails {
    use super::*;

    /// A source that always answers the same number breaks its promises, and the suite says so.
    struct Stuck;

    impl RandomSource for Stuck {
        fn next_u64(&mut self) -> u64 {
            4
        }
    }

    #[test]
    #[should_panic(expected = "draws repeat")]
    fn a_stuck_source_is_caught() {
        draws_vary(&mut Stuck);
    }

    /// A secret source that fills only the first half.
    struct HalfFilled;

    impl SecretSource for HalfFilled {
        fn fill(&self, destination: &mut [u8]) -> Result<(), mcpgw_authz::RandomnessError> {
            let half = destination.len() / 2;
            for (index, byte) in destination[..half].iter_mut().enumerate() {
                *byte = u8::try_from(index % 251 + 1).unwrap_or(1);
            }
            Ok(())
        }
    }

    #[test]
    #[should_panic(expected = "never written")]
    fn a_half_filling_source_is_caught() {
        every_byte_of_the_buffer_is_filled(Arc::new(HalfFilled));
    }
}
