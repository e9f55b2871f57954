//! The retry backoff every retry of the engine waits: exponential from `retry.backoff.ms` up
//! to `retry.backoff.max.ms`, with ±20% jitter (KIP-580) from a seeded RNG, so a simulation
//! seed replays exactly. One RNG serves the idempotent core and the transaction manager, in
//! the order their retries happen.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::types::Millis;

/// Retry delays with seeded jitter.
#[derive(Debug)]
pub(crate) struct RetryBackoff {
    rng: SmallRng,
    first_ms: Millis,
    max_ms: Millis,
}

impl RetryBackoff {
    /// Delays starting at `first_ms`, doubling per attempt up to `max_ms`, jittered from `seed`.
    pub fn new(first_ms: Millis, max_ms: Millis, seed: u64) -> Self {
        Self {
            rng: SmallRng::seed_from_u64(seed),
            first_ms,
            max_ms,
        }
    }

    /// `retry.backoff.ms`: the first retry's delay, without jitter.
    pub fn first_ms(&self) -> Millis {
        self.first_ms
    }

    /// The delay before retry number `attempts` (from 1).
    pub fn delay(&mut self, attempts: u32) -> Millis {
        let exp = self
            .first_ms
            .saturating_mul(1u64 << attempts.saturating_sub(1).min(20));
        let base = exp.min(self.max_ms).max(1);
        let jitter = base / 5;
        base - jitter + self.rng.random_range(0..=2 * jitter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_within_the_jitter() {
        let mut backoff = RetryBackoff::new(100, 1_000, 7);
        for (attempts, base) in [
            (1, 100),
            (2, 200),
            (3, 400),
            (4, 800),
            (5, 1_000),
            (40, 1_000),
        ] {
            let delay = backoff.delay(attempts);
            assert!(
                (base - base / 5..=base + base / 5).contains(&delay),
                "attempt {attempts}: {delay} ms"
            );
        }
    }

    /// The jitter spreads both ways around the doubled delay (KIP-580's ±20%), over the whole
    /// range and not onto one value, so that clients that failed together retry apart.
    #[test]
    fn jitter_spreads_both_ways_around_the_delay() {
        let mut backoff = RetryBackoff::new(1_000, 1_000, 11);
        let delays: Vec<Millis> = (0..200).map(|_| backoff.delay(1)).collect();
        let (low, high) = (delays.iter().min().unwrap(), delays.iter().max().unwrap());
        assert!(
            *low < 900 && *high > 1_100,
            "delays from {low} to {high} ms"
        );
    }

    #[test]
    fn the_same_seed_gives_the_same_delays() {
        let mut a = RetryBackoff::new(10, 10_000, 3);
        let mut b = RetryBackoff::new(10, 10_000, 3);
        let delays = |r: &mut RetryBackoff| (1..10).map(|n| r.delay(n)).collect::<Vec<_>>();
        assert_eq!(delays(&mut a), delays(&mut b));
    }
}
