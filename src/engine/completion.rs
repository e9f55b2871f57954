//! One completion per batch, shared by the delivery futures of its records (as the Java
//! client's `ProduceRequestResult`): a record's future is an index into its batch's outcome,
//! not a channel of its own (DESIGN, performance shape).

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use crate::error::Error;

/// What the broker said about a whole batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchAck {
    /// Offset of the batch's first record (-1 when the broker only said "duplicate" without
    /// offsets: DUPLICATE_SEQUENCE_NUMBER, which the Java client reports the same way).
    pub base_offset: i64,
    /// The broker's append time for LogAppendTime topics, or -1 (records keep CreateTime).
    pub log_append_time: i64,
}

/// The outcome of a batch: every record of it resolves from this (DESIGN rule P6).
pub type BatchOutcome = Result<BatchAck, Error>;

#[derive(Debug)]
enum State {
    Pending(Vec<Waker>),
    Done(BatchOutcome),
}

/// The completion cell of one batch. Completed exactly once; later completions are ignored
/// and reported, so a bug that would resolve a send twice is visible in tests.
#[derive(Debug)]
pub struct BatchCompletion {
    state: Mutex<State>,
}

impl Default for BatchCompletion {
    fn default() -> Self {
        Self {
            state: Mutex::new(State::Pending(Vec::new())),
        }
    }
}

impl BatchCompletion {
    /// A new, pending completion.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Resolves the batch. Returns `false` (and changes nothing) if it was already resolved.
    pub fn complete(&self, outcome: BatchOutcome) -> bool {
        let wakers = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            match &mut *state {
                State::Done(_) => return false,
                State::Pending(wakers) => {
                    let wakers = std::mem::take(wakers);
                    *state = State::Done(outcome);
                    wakers
                }
            }
        };
        wakers.into_iter().for_each(Waker::wake);
        true
    }

    /// The outcome, if the batch is resolved.
    pub fn outcome(&self) -> Option<BatchOutcome> {
        match &*self.state.lock().unwrap_or_else(|e| e.into_inner()) {
            State::Done(outcome) => Some(outcome.clone()),
            State::Pending(_) => None,
        }
    }

    /// Polls for the outcome, registering the task's waker while pending.
    pub fn poll(&self, cx: &mut Context<'_>) -> Poll<BatchOutcome> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match &mut *state {
            State::Done(outcome) => Poll::Ready(outcome.clone()),
            State::Pending(wakers) => {
                if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
                    wakers.push(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completes_exactly_once() {
        let c = BatchCompletion::new();
        assert!(c.outcome().is_none());
        let ack = BatchAck {
            base_offset: 7,
            log_append_time: -1,
        };
        assert!(c.complete(Ok(ack)));
        assert!(!c.complete(Err(Error::Closed)));
        assert_eq!(c.outcome().map(|o| o.ok()), Some(Some(ack)));
    }
}
