//! The one source of every choice a simulated run makes: the configuration, the workload, the
//! fault schedule and each fault decision are all drawn from it, in a fixed order, so one seed
//! (or one fuzzer input) replays one run exactly. No global RNG, no wall clock.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Where the choices come from.
#[derive(Debug, Clone)]
enum Source {
    /// A seeded PRNG: the seed sweep.
    Seeded(SmallRng),
    /// Bytes from a fuzzer, consumed front to back. Once they run out every draw is 0, which
    /// every caller maps to the quiet choice (no fault, shortest delay), so a short input is a
    /// calm run rather than an error.
    Bytes { data: Vec<u8>, at: usize },
}

/// A deterministic stream of choices.
#[derive(Debug, Clone)]
pub struct Entropy {
    source: Source,
}

impl Entropy {
    /// Choices from a seeded PRNG.
    pub fn from_seed(seed: u64) -> Self {
        Self {
            source: Source::Seeded(SmallRng::seed_from_u64(seed)),
        }
    }

    /// Choices read from fuzzer bytes (see `Source` for what happens when they run out).
    pub fn from_bytes(data: &[u8]) -> Self {
        Self {
            source: Source::Bytes {
                data: data.to_vec(),
                at: 0,
            },
        }
    }

    /// A number in `0..n` (0 when `n` is 0 or 1).
    pub fn below(&mut self, n: u64) -> u64 {
        if n <= 1 {
            return 0;
        }
        match &mut self.source {
            Source::Seeded(rng) => rng.random_range(0..n),
            Source::Bytes { data, at } => {
                // As few bytes as the range needs, so a fuzzer's mutations stay local.
                let width = match n {
                    0..=0x100 => 1,
                    0x101..=0x1_0000 => 2,
                    0x1_0001..=0x1_0000_0000 => 4,
                    _ => 8,
                };
                let mut value: u64 = 0;
                for _ in 0..width {
                    let byte = data.get(*at).copied().unwrap_or(0);
                    *at = at.saturating_add(1);
                    value = (value << 8) | u64::from(byte);
                }
                value % n
            }
        }
    }

    /// A number in `low..=high` (`low` when the range is empty).
    pub fn range(&mut self, low: u64, high: u64) -> u64 {
        if high <= low {
            return low;
        }
        low + self.below(high - low + 1)
    }

    /// True with probability `per_mille`/1000. A draw of 0 means false, so exhausted fuzzer
    /// bytes inject nothing.
    pub fn chance(&mut self, per_mille: u32) -> bool {
        if per_mille == 0 {
            return false;
        }
        self.below(1000) >= 1000 - u64::from(per_mille.min(1000))
    }

    /// One of `items` (`None` when there are none).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        let len = u64::try_from(items.len()).unwrap_or(u64::MAX);
        let index = usize::try_from(self.below(len)).unwrap_or(0);
        items.get(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_replays_and_exhausted_bytes_are_quiet() {
        let draws = |mut e: Entropy| (0..20).map(|_| e.below(1000)).collect::<Vec<_>>();
        assert_eq!(draws(Entropy::from_seed(5)), draws(Entropy::from_seed(5)));
        // 0x03e7 = 999: the top draw, the only one `chance(1)` takes.
        let mut bytes = Entropy::from_bytes(&[0x03, 0xe7, 0x03, 0xe6]);
        assert!(bytes.chance(1));
        assert!(!bytes.chance(1));
        let mut empty = Entropy::from_bytes(&[]);
        assert!((0..100).all(|_| !empty.chance(999)));
        assert_eq!(empty.range(3, 9), 3);
    }
}
