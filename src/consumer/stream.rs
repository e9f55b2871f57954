//! The consumer as a [`Stream`]: [`crate::Consumer::records`] and [`crate::Consumer::events`].
//!
//! Each item is one `poll` of its own, so a stream keeps every rule of `poll`: an item is taken
//! from the consumer in the step that returns it (nothing is held in the stream, so dropping
//! it, or a `next()` future, loses nothing), revoked partitions are given up when the next
//! item is asked for, and the `max.poll.interval.ms` budget restarts with each item.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;

use super::driver::{Driver, Handle};
use super::membership::MembershipOrRecords;
use crate::error::Result;

/// How many items a stream passes over (the records stream's rebalance events) in one call
/// of `poll_next` before it yields to the runtime.
const SKIPS_PER_CALL: usize = 64;

type PollFuture = Pin<Box<dyn Future<Output = Result<Option<MembershipOrRecords>>> + Send>>;

/// A stream of `poll`s of one consumer, whose driver it borrows mutably for the stream's life
/// (as `poll` borrows the consumer), each keeping what `pick` makes of it.
pub(crate) struct PollStream<'a, T> {
    handle: Handle,
    /// The most records one poll takes.
    limit: usize,
    /// What an answer of `poll` yields (`None`: nothing, ask again).
    pick: fn(MembershipOrRecords) -> Option<T>,
    pending: Option<PollFuture>,
    _driver: PhantomData<&'a mut Driver>,
}

impl<'a, T> PollStream<'a, T> {
    pub(crate) fn new(
        driver: &'a mut Driver,
        limit: usize,
        pick: fn(MembershipOrRecords) -> Option<T>,
    ) -> Self {
        Self {
            handle: driver.handle(),
            limit,
            pick,
            pending: None,
            _driver: PhantomData,
        }
    }
}

impl<T> Stream for PollStream<'_, T> {
    type Item = Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        for _ in 0..SKIPS_PER_CALL {
            let future = this.pending.get_or_insert_with(|| {
                let handle = this.handle.clone();
                let limit = this.limit;
                Box::pin(async move { handle.poll(None, limit).await })
            });
            let answer = match future.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(answer) => answer,
            };
            this.pending = None;
            match answer {
                Err(e) => return Poll::Ready(Some(Err(e))),
                Ok(Some(found)) => {
                    if let Some(item) = (this.pick)(found) {
                        return Poll::Ready(Some(Ok(item)));
                    }
                }
                // Without a deadline a poll always finds something; ask again regardless.
                Ok(None) => {}
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
