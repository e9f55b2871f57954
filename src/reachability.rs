//! Logging a retry loop by its changes of state, not by its attempts: the first failure of a
//! streak is one WARN, the ones after it DEBUG with their count, and the first success after
//! them one INFO with the count. A broker link's reconnections, the metadata refreshes, the
//! produce requests to each broker and the requests to the transaction coordinator all log
//! this way, so an outage of a minute is two lines per loop, not one per retry (a 12 s cut of
//! the transaction coordinator logged a WARN per EndTxn retry, and a 70 s cut of a broker
//! about 2,400 reconnection lines, before). A fatal error is not a streak: its owner logs it
//! once, as fatal.

use std::fmt::Display;

use tracing::{debug, info, warn};

use crate::error::{Error, ErrorChain};

/// What a retry loop should log after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReachabilityChange {
    /// The first failure after a success (or the first attempt): one WARN.
    Lost,
    /// Another failed attempt while unreachable: DEBUG only.
    StillDown {
        /// Failed attempts in this outage so far.
        attempts: u64,
    },
    /// A success after failed attempts: one INFO with the count.
    Restored {
        /// Failed attempts during the outage.
        attempts: u64,
    },
    /// A success, as before (or the first attempt): nothing worth a line.
    Unchanged,
}

/// Tracks whether a broker (or a kind of request) gets through, to log state changes rather
/// than attempts.
#[derive(Debug, Default)]
pub(crate) struct Reachability {
    failed_attempts: u64,
}

impl Reachability {
    /// An attempt failed.
    pub fn failed(&mut self) -> ReachabilityChange {
        self.failed_attempts += 1;
        if self.failed_attempts == 1 {
            ReachabilityChange::Lost
        } else {
            ReachabilityChange::StillDown {
                attempts: self.failed_attempts,
            }
        }
    }

    /// An attempt succeeded.
    pub fn succeeded(&mut self) -> ReachabilityChange {
        let attempts = std::mem::take(&mut self.failed_attempts);
        if attempts == 0 {
            ReachabilityChange::Unchanged
        } else {
            ReachabilityChange::Restored { attempts }
        }
    }

    /// Records a failed attempt of `what` (e.g. "EndTxn") and logs it: WARN for the first of a
    /// streak, DEBUG with the count after that.
    pub fn log_failure(&mut self, what: impl Display, error: &Error) {
        match self.failed() {
            ReachabilityChange::Lost => {
                warn!(error = %ErrorChain(error), "{what} failed; retrying with backoff (further failures are logged at DEBUG)");
            }
            ReachabilityChange::StillDown { attempts } => {
                debug!(error = %ErrorChain(error), attempts, "{what} failed again");
            }
            ReachabilityChange::Restored { .. } | ReachabilityChange::Unchanged => {}
        }
    }

    /// Records a successful attempt of `what` and logs, once, that it works again after a
    /// streak of failures.
    pub fn log_success(&mut self, what: impl Display) {
        if let ReachabilityChange::Restored { attempts } = self.succeeded() {
            info!(
                failed_attempts = attempts,
                "{what} succeeded again after {attempts} failed attempts"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streak_changes_state_twice() {
        let mut reachability = Reachability::default();
        assert_eq!(reachability.succeeded(), ReachabilityChange::Unchanged);
        assert_eq!(reachability.failed(), ReachabilityChange::Lost);
        assert_eq!(
            reachability.failed(),
            ReachabilityChange::StillDown { attempts: 2 }
        );
        assert_eq!(
            reachability.succeeded(),
            ReachabilityChange::Restored { attempts: 2 }
        );
        assert_eq!(reachability.succeeded(), ReachabilityChange::Unchanged);
        assert_eq!(reachability.failed(), ReachabilityChange::Lost);
    }
}
