//! One completion per batch, shared by the delivery futures of its records (as the Java
//! client's `ProduceRequestResult`): a record's future is an index into its batch's outcome,
//! not a channel of its own (ARCHITECTURE.md, performance shape).
//!
//! A batch the broker rejects as too large is split in two (Java's `splitAndReenqueue`); its
//! completion then forwards each record to the part that holds it, so every record keeps its
//! one future.

use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};

use crate::error::Error;
use crate::types::TopicPartition;

/// What the broker said about a whole batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchAck {
    /// Offset of the batch's first record (-1 when the broker only said "duplicate" without
    /// offsets: DUPLICATE_SEQUENCE_NUMBER, which the Java client reports the same way).
    pub base_offset: i64,
    /// The broker's append time for LogAppendTime topics, or -1 (records keep CreateTime).
    pub log_append_time: i64,
}

/// The outcome of a batch: every record of it resolves from this (rule P6).
pub type BatchOutcome = Result<BatchAck, Error>;

/// How a batch left the pending state; set once.
#[derive(Debug)]
enum Settled {
    /// Resolved: every record resolves from this.
    Done(BatchOutcome),
    /// The batch was split: records before `at` resolve from `first`, the others from
    /// `second` at their index minus `at`.
    Split {
        at: i32,
        first: Arc<BatchCompletion>,
        second: Arc<BatchCompletion>,
    },
}

/// The completion cell of one batch. Completed exactly once; later completions are ignored
/// and reported, so a bug that would resolve a send twice is visible in tests.
///
/// Once settled it is read without a lock: every record of a batch (thousands of small ones)
/// polls it, and a mutex per poll was 5% of the send path's profile. The lock guards only
/// the wakers of pending polls; settling happens under it, so a poll that found it pending
/// and registers its waker under the lock cannot miss the wake-up.
#[derive(Debug)]
pub struct BatchCompletion {
    /// The batch's partition, kept here once per batch rather than in every record's
    /// future (a loop holding a million futures holds a million of them).
    partition: TopicPartition,
    settled: OnceLock<Settled>,
    wakers: Mutex<Vec<Waker>>,
}

impl BatchCompletion {
    /// A new, pending completion of a batch of `partition`.
    pub fn new(partition: TopicPartition) -> Arc<Self> {
        Arc::new(Self {
            partition,
            settled: OnceLock::new(),
            wakers: Mutex::new(Vec::new()),
        })
    }

    /// The batch's partition.
    pub fn partition(&self) -> &TopicPartition {
        &self.partition
    }

    /// Leaves the pending state for `next`, waking the tasks that waited; `false` (and no
    /// change) if the batch was already resolved or split.
    fn settle(&self, next: Settled) -> bool {
        let wakers = {
            let mut wakers = self.wakers.lock().unwrap_or_else(|e| e.into_inner());
            if self.settled.set(next).is_err() {
                return false;
            }
            std::mem::take(&mut *wakers)
        };
        wakers.into_iter().for_each(Waker::wake);
        true
    }

    /// Resolves the batch. Returns `false` (and changes nothing) if it was already resolved
    /// or split.
    pub fn complete(&self, outcome: BatchOutcome) -> bool {
        self.settle(Settled::Done(outcome))
    }

    /// Hands the batch's records over to two parts, the records before `at` and the rest,
    /// and returns the parts' completions; `None` if the batch was already resolved or split.
    /// Tasks waiting on a record are woken to wait on its part instead.
    pub fn split(&self, at: i32) -> Option<(Arc<Self>, Arc<Self>)> {
        let (first, second) = (
            Self::new(self.partition.clone()),
            Self::new(self.partition.clone()),
        );
        let split = Settled::Split {
            at,
            first: Arc::clone(&first),
            second: Arc::clone(&second),
        };
        self.settle(split).then_some((first, second))
    }

    /// The outcome of the whole batch, if it is resolved (`None` while pending, and for a
    /// split batch, whose records have their parts' outcomes: see
    /// [`BatchCompletion::record_outcome`]).
    #[cfg(any(test, feature = "internals"))]
    pub fn outcome(&self) -> Option<BatchOutcome> {
        match self.settled.get()? {
            Settled::Done(outcome) => Some(outcome.clone()),
            Settled::Split { .. } => None,
        }
    }

    /// The outcome of the batch that holds the record at `index` (this one, or a part of it
    /// if it was split) with the record's index in that batch, once resolved.
    #[cfg(any(test, feature = "internals"))]
    pub fn record_outcome(&self, index: i32) -> Option<(BatchOutcome, i32)> {
        match self.settled.get()? {
            Settled::Done(outcome) => Some((outcome.clone(), index)),
            Settled::Split { at, first, .. } if index < *at => first.record_outcome(index),
            Settled::Split { at, second, .. } => second.record_outcome(index - at),
        }
    }

    /// Polls for the outcome of the record at `index`: the outcome of the batch (or part of
    /// it) that holds the record, with the record's index there. Registers the task's waker
    /// while pending.
    pub fn poll_record(&self, index: i32, cx: &mut Context<'_>) -> Poll<(BatchOutcome, i32)> {
        match self.settled.get() {
            Some(Settled::Done(outcome)) => return Poll::Ready((outcome.clone(), index)),
            Some(Settled::Split { at, first, .. }) if index < *at => {
                return first.poll_record(index, cx);
            }
            Some(Settled::Split { at, second, .. }) => return second.poll_record(index - at, cx),
            None => {}
        }
        let mut wakers = self.wakers.lock().unwrap_or_else(|e| e.into_inner());
        if self.settled.get().is_some() {
            // Settled between the first look and the lock.
            drop(wakers);
            return self.poll_record(index, cx);
        }
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completes_exactly_once() {
        let c = BatchCompletion::new(TopicPartition::new("t", 0));
        assert!(c.outcome().is_none());
        let ack = BatchAck {
            base_offset: 7,
            log_append_time: -1,
        };
        assert!(c.complete(Ok(ack)));
        assert!(!c.complete(Err(Error::Closed)));
        assert_eq!(c.outcome().map(|o| o.ok()), Some(Some(ack)));
    }

    #[test]
    fn a_split_batch_resolves_each_record_from_its_part() {
        let c = BatchCompletion::new(TopicPartition::new("t", 0));
        let (first, second) = c.split(3).expect("pending");
        assert!(c.split(1).is_none(), "split once");
        assert!(
            !c.complete(Err(Error::Closed)),
            "a split batch is not completed itself"
        );
        // The second part splits again: records 3..5 and 5.. of the original.
        let (second_a, second_b) = second.split(2).expect("pending");
        let ack = |base_offset| BatchAck {
            base_offset,
            log_append_time: -1,
        };
        first.complete(Ok(ack(100)));
        second_a.complete(Ok(ack(200)));
        assert!(c.record_outcome(6).is_none(), "its part is pending");
        second_b.complete(Err(Error::Closed));
        let resolved = |index| {
            let (outcome, local) = c.record_outcome(index).expect("resolved");
            (outcome.ok().map(|a| a.base_offset), local)
        };
        assert_eq!(resolved(0), (Some(100), 0));
        assert_eq!(resolved(2), (Some(100), 2));
        assert_eq!(resolved(3), (Some(200), 0));
        assert_eq!(resolved(4), (Some(200), 1));
        assert_eq!(resolved(6), (None, 1));
        assert!(c.outcome().is_none());
    }

    /// A record's future polled while its batch is pending is woken when the batch settles,
    /// once per task however often it polled (one waker kept per task: a future polled by
    /// each `select!` turn does not grow the list), and every task waiting is woken.
    #[test]
    fn a_pending_poll_is_woken_once_per_task_when_its_batch_settles() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::task::Wake;
        struct CountingWaker(AtomicUsize);
        impl Wake for CountingWaker {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let c = BatchCompletion::new(TopicPartition::new("t", 0));
        let (one, other) = (
            Arc::new(CountingWaker(AtomicUsize::new(0))),
            Arc::new(CountingWaker(AtomicUsize::new(0))),
        );
        let (one_waker, other_waker) = (
            Waker::from(Arc::clone(&one)),
            Waker::from(Arc::clone(&other)),
        );
        for _ in 0..3 {
            assert!(
                c.poll_record(0, &mut Context::from_waker(&one_waker))
                    .is_pending()
            );
        }
        assert!(
            c.poll_record(1, &mut Context::from_waker(&other_waker))
                .is_pending()
        );
        assert_eq!(c.wakers.lock().unwrap().len(), 2, "one waker per task");
        c.complete(Err(Error::Closed));
        assert_eq!(one.0.load(Ordering::SeqCst), 1);
        assert_eq!(other.0.load(Ordering::SeqCst), 1);
    }

    /// `poll_record` (what a record's future polls) follows the same split as
    /// `record_outcome`: each record is answered by the part that holds it.
    #[test]
    fn a_polled_record_of_a_split_batch_is_answered_by_its_part() {
        let c = BatchCompletion::new(TopicPartition::new("t", 0));
        let (first, second) = c.split(2).expect("pending");
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(c.poll_record(0, &mut cx).is_pending());
        first.complete(Ok(BatchAck {
            base_offset: 10,
            log_append_time: -1,
        }));
        second.complete(Err(Error::Closed));
        let mut polled = |index| match c.poll_record(index, &mut cx) {
            Poll::Ready((outcome, local)) => (outcome.ok().map(|a| a.base_offset), local),
            Poll::Pending => panic!("record {index} pending"),
        };
        assert_eq!(polled(0), (Some(10), 0));
        assert_eq!(polled(1), (Some(10), 1));
        assert_eq!(polled(2), (None, 0));
        assert_eq!(polled(3), (None, 1));
    }
}
