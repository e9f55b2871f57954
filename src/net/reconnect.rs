//! How a broker link paces and reports its reconnection attempts.
//!
//! Attempts back off exponentially with jitter from `reconnect.backoff.ms` up to
//! `reconnect.backoff.max.ms` (Java's defaults, 50 ms and 1 s; KIP-144), so a broker that is
//! down for a minute sees tens of attempts, not hundreds, and many clients do not reconnect
//! in lockstep. The log says when a broker becomes unreachable and when it is back, with the
//! count of failed attempts in between, instead of one WARN per attempt (about 2,400 lines
//! during one 70 s cut before): see [`crate::reachability`].

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The wait before each reconnection attempt of one link.
#[derive(Debug)]
pub(crate) struct ReconnectBackoff {
    initial: Duration,
    max: Duration,
    failures: u32,
    rng: SmallRng,
}

impl ReconnectBackoff {
    /// Starts at `initial`, doubling per failure up to `max`; `seed` drives the jitter.
    pub fn new(initial: Duration, max: Duration, seed: u64) -> Self {
        Self {
            initial,
            max: max.max(initial),
            failures: 0,
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    /// Records a failed attempt and returns how long to wait before the next one: the
    /// exponential wait, capped, within ±20% (Java's `ExponentialBackoff` jitter).
    pub fn failed(&mut self) -> Duration {
        let exponent = self.failures.min(20);
        self.failures = self.failures.saturating_add(1);
        let base = self
            .initial
            .saturating_mul(1 << exponent)
            .min(self.max)
            .as_secs_f64();
        Duration::from_secs_f64(base * self.rng.random_range(0.8..=1.2))
    }

    /// A connection succeeded: the next failure starts from `initial` again.
    pub fn connected(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reachability::{Reachability, ReachabilityChange};

    #[test]
    fn backoff_grows_and_is_capped() {
        let mut backoff =
            ReconnectBackoff::new(Duration::from_millis(50), Duration::from_secs(1), 7);
        let waits: Vec<Duration> = (0..12).map(|_| backoff.failed()).collect();
        for (i, wait) in waits.iter().enumerate() {
            let base = (50u64 << i.min(20)).min(1000) as f64;
            let ms = wait.as_secs_f64() * 1000.0;
            assert!(
                (base * 0.8 - 1e-6..=base * 1.2 + 1e-6).contains(&ms),
                "attempt {i}: {ms} ms, expected {base} ms ± 20%"
            );
        }
        assert!(waits[11] <= Duration::from_millis(1200), "capped");
        backoff.connected();
        assert!(
            backoff.failed() <= Duration::from_millis(60),
            "reset after a success"
        );
    }

    #[test]
    fn a_max_below_the_initial_wait_keeps_the_initial_wait() {
        let mut backoff =
            ReconnectBackoff::new(Duration::from_millis(200), Duration::from_millis(10), 1);
        assert!(backoff.failed() >= Duration::from_millis(160));
    }

    /// A 10 s outage, attempts paced by the default backoff: two lines worth logging (lost,
    /// restored), however many attempts.
    #[test]
    fn a_ten_second_outage_logs_two_lines() {
        let mut backoff =
            ReconnectBackoff::new(Duration::from_millis(50), Duration::from_secs(1), 3);
        let mut reachability = Reachability::default();
        let mut logged = Vec::new();
        let mut elapsed = Duration::ZERO;
        let mut attempts = 0;
        while elapsed < Duration::from_secs(10) {
            attempts += 1;
            let change = reachability.failed();
            if !matches!(change, ReachabilityChange::StillDown { .. }) {
                logged.push(change);
            }
            elapsed += backoff.failed();
        }
        logged.push(reachability.succeeded());
        assert_eq!(
            logged,
            vec![
                ReachabilityChange::Lost,
                ReachabilityChange::Restored { attempts }
            ]
        );
        assert!(
            (10..=20).contains(&attempts),
            "{attempts} attempts in 10 s (a fixed 100 ms wait made 100)"
        );
    }
}
