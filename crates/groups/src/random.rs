//! The randomness port of the `random` strategy.

/// A source of uniformly distributed 64-bit numbers. The domain never draws randomness itself:
/// an adapter wraps a real generator, tests script the numbers and assert exact picks.
pub trait RandomSource {
    fn next_u64(&mut self) -> u64;

    /// A uniform number in `0..bound` (0 when `bound` is 0), without modulo bias: the few
    /// largest draws that would favour small results are rejected and drawn again, so a
    /// scripted source with small numbers gets exactly `value % bound`.
    fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            return 0;
        }
        // 2^64 mod bound: the number of draws at the top of the range that would be uneven.
        let uneven_tail = bound.wrapping_neg() % bound;
        loop {
            let draw = self.next_u64();
            if draw <= u64::MAX - uneven_tail {
                return draw % bound;
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::VecDeque;

    use super::*;

    /// Hands out scripted numbers in order and fails the test loudly when they run out, so a
    /// test never passes on draws it did not plan.
    #[derive(Debug)]
    pub(crate) struct ScriptedRandom {
        draws: VecDeque<u64>,
    }

    impl ScriptedRandom {
        pub(crate) fn new(draws: impl IntoIterator<Item = u64>) -> Self {
            Self {
                draws: draws.into_iter().collect(),
            }
        }

        pub(crate) fn remaining(&self) -> usize {
            self.draws.len()
        }
    }

    impl RandomSource for ScriptedRandom {
        fn next_u64(&mut self) -> u64 {
            self.draws
                .pop_front()
                .expect("the test drew more random numbers than it scripted")
        }
    }

    #[test]
    fn below_reduces_small_draws_exactly() {
        let mut random = ScriptedRandom::new([0, 1, 2, 3, 4, 7, 12]);
        let drawn: Vec<u64> = (0..7).map(|_| random.below(3)).collect();
        assert_eq!(drawn, [0, 1, 2, 0, 1, 1, 0]);
    }

    #[test]
    fn below_rejects_the_uneven_top_of_the_range() {
        // 2^64 mod 3 = 1, so only u64::MAX is rejected; 2^64 mod 4 = 0, so nothing is.
        let mut random = ScriptedRandom::new([u64::MAX, u64::MAX - 1, u64::MAX]);
        assert_eq!(random.below(3), (u64::MAX - 1) % 3);
        assert_eq!(random.remaining(), 1);
        assert_eq!(random.below(4), 3);
        assert_eq!(random.remaining(), 0);
    }

    #[test]
    fn below_zero_draws_nothing() {
        let mut random = ScriptedRandom::new([]);
        assert_eq!(random.below(0), 0);
    }
}
