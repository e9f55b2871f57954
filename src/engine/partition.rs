//! Per-partition delivery state: batches waiting for their first dispatch, and batches
//! stamped under the current producer identity that the broker has not confirmed.

use std::collections::VecDeque;
use std::sync::Arc;

use super::RequestId;
use super::completion::BatchCompletion;
use super::spans::BatchSpans;
use crate::protocol::record_batch::{SealedBatch, increment_sequence};
use crate::types::{BrokerId, Millis};

/// Where a stamped batch stands with the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireState {
    /// In a request that has not been answered yet.
    InFlight(RequestId),
    /// Known not to be in the log: the broker rejected it retriably, or the request carrying
    /// it was never written.
    NotWritten,
    /// Sent, and its answer lost (timeout, disconnect): it may or may not be in the log
    /// (rule P5: "unresolved").
    Unresolved,
}

/// A batch the engine owns, from the accumulator until its completion.
#[derive(Debug)]
pub(crate) struct ProducerBatch {
    pub batch: SealedBatch,
    pub completion: Arc<BatchCompletion>,
    pub created_ms: Millis,
    /// Times it was put on the wire.
    pub attempts: u32,
    /// Set once stamped: where it stands.
    pub wire: Option<WireState>,
    /// When it first went on the wire (for the queue-time metric).
    pub first_sent_ms: Option<Millis>,
    /// The batch's spans (`kafka.batch` and its records' `create` spans), from its first
    /// record to its outcome.
    pub spans: BatchSpans,
    /// Some attempt may have reached the log (a request carrying it was written and its
    /// answer lost, or the broker said it appended without replicating). Once set, a later
    /// attempt that is rejected or never written does not make the batch "not written": the
    /// earlier attempt may still be there (P5).
    pub maybe_written: bool,
    /// An earlier batch of the same identity and partition failed for good, so the broker
    /// rejects this one as out of order whatever happens: it can only go out re-stamped,
    /// after an epoch bump.
    pub behind_gap: bool,
}

impl ProducerBatch {
    pub fn new(
        batch: SealedBatch,
        completion: Arc<BatchCompletion>,
        created_ms: Millis,
        spans: BatchSpans,
    ) -> Self {
        Self {
            batch,
            completion,
            created_ms,
            attempts: 0,
            wire: None,
            first_sent_ms: None,
            spans,
            maybe_written: false,
            behind_gap: false,
        }
    }

    /// Records that an attempt ended without the batch being confirmed; `written` says
    /// whether this attempt may have reached the log.
    pub fn attempt_failed(&mut self, written: bool) {
        self.maybe_written |= written;
        self.wire = Some(if self.maybe_written {
            WireState::Unresolved
        } else {
            WireState::NotWritten
        });
    }

    /// Whether a rejection as too large can be answered by splitting it: it holds more than
    /// one record, and no attempt of it may be in the log (one that may be must not be
    /// re-sent in other batches: its records could then be written twice, KAFKA-14034, P5).
    pub fn splittable(&self) -> bool {
        self.batch.record_count() > 1 && !self.maybe_written
    }

    /// Whether it waits to be sent again under the identity it carries.
    pub fn awaits_retry(&self) -> bool {
        matches!(
            self.wire,
            Some(WireState::NotWritten | WireState::Unresolved)
        ) && !self.behind_gap
    }
}

/// The delivery state of one partition.
#[derive(Debug)]
pub(crate) struct PartitionState {
    pub leader: Option<BrokerId>,
    /// The sequence the next stamped batch gets under the current identity (P1, P3).
    pub next_sequence: i32,
    /// Batches not stamped yet, in send order. Batches re-stamped after an epoch bump come
    /// back here, ahead of newer ones.
    pub queued: VecDeque<ProducerBatch>,
    /// Batches stamped under the current identity and not resolved, in sequence order.
    pub unacked: VecDeque<ProducerBatch>,
    /// The broker's view of our sequences disagrees with ours (OUT_OF_ORDER_SEQUENCE_NUMBER
    /// on the next expected batch, UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH): nothing more
    /// goes out for this partition under the current identity.
    pub diverged: bool,
    /// No retry before this time (backoff).
    pub retry_at: Millis,
    /// The last offset the broker confirmed (for UNKNOWN_PRODUCER_ID, P7), -1 if none.
    pub last_acked_offset: i64,
    /// The broker acknowledged a batch of the current identity, so it holds state for it;
    /// until then only one batch is in flight (P4, KAFKA-15591: see `Engine::dispatch`).
    pub confirmed: bool,
    /// When the broker last acknowledged a batch of this partition.
    pub last_ack_ms: Millis,
}

impl Default for PartitionState {
    fn default() -> Self {
        Self {
            leader: None,
            next_sequence: 0,
            queued: VecDeque::new(),
            unacked: VecDeque::new(),
            diverged: false,
            retry_at: 0,
            last_acked_offset: -1,
            confirmed: false,
            last_ack_ms: 0,
        }
    }
}

impl PartitionState {
    pub fn in_flight(&self) -> usize {
        self.unacked
            .iter()
            .filter(|b| matches!(b.wire, Some(WireState::InFlight(_))))
            .count()
    }

    /// The batch of `request` in this partition, by position.
    pub fn position_of(&self, request: RequestId) -> Option<usize> {
        self.unacked
            .iter()
            .position(|b| b.wire == Some(WireState::InFlight(request)))
    }

    /// Whether a batch waits to be re-sent under the current identity.
    pub fn has_retry(&self) -> bool {
        !self.diverged && self.unacked.iter().any(ProducerBatch::awaits_retry)
    }

    /// Whether every batch is resolved or waits in the accumulator's order.
    pub fn is_idle(&self) -> bool {
        self.queued.is_empty() && self.unacked.is_empty()
    }

    /// Stamps the next queued batch with `(producer_id, epoch, next_sequence)` and moves it to
    /// `unacked`, in flight in `request` (rule P1: a sequence is taken only here).
    pub fn stamp_next(
        &mut self,
        producer_id: i64,
        epoch: i16,
        request: RequestId,
        now: Millis,
    ) -> Option<&mut ProducerBatch> {
        let mut batch = self.queued.pop_front()?;
        batch.first_sent_ms.get_or_insert(now);
        if producer_id < 0 {
            // A non-idempotent producer: no producer id, so no sequence either.
            batch.batch.stamp(producer_id, epoch, -1);
        } else {
            batch.batch.stamp(producer_id, epoch, self.next_sequence);
            self.next_sequence = increment_sequence(self.next_sequence, batch.batch.record_count());
        }
        batch.wire = Some(WireState::InFlight(request));
        batch.attempts += 1;
        self.unacked.push_back(batch);
        self.unacked.back_mut()
    }

    /// Un-stamps the batches at the end of `unacked` that are certainly not in the log, so
    /// that they take their sequences again when next dispatched: a send that never reached
    /// the broker consumes no sequence (rule P1, Sarama #1430). Only valid while
    /// nothing of this partition is in flight, which the caller checks.
    pub fn unstamp_unwritten_tail(&mut self) {
        while let Some(last) = self.unacked.back() {
            // Only the most recently stamped batch gives its sequences back. If a later one
            // was already resolved (acknowledged: a broker without state for us accepted it
            // out of order, KAFKA-15591), rewinding would stamp new records with sequences the
            // broker has, and it would drop them as duplicates (P2, P3). Found by the
            // simulation (see `Engine::dispatch` on KAFKA-15591).
            let last_stamped =
                increment_sequence(last.batch.last_sequence(), 1) == self.next_sequence;
            if last.wire != Some(WireState::NotWritten) || last.behind_gap || !last_stamped {
                break;
            }
            let mut batch = self.unacked.pop_back().expect("back exists");
            self.next_sequence = batch.batch.base_sequence();
            batch.wire = None;
            self.queued.push_front(batch);
        }
    }

    /// Marks every batch after `position` as behind a gap (the batch at `position` is gone
    /// for good, so the broker will never accept these under this identity).
    pub fn mark_gap_from(&mut self, position: usize) {
        for batch in self.unacked.iter_mut().skip(position) {
            batch.behind_gap = true;
        }
    }

    /// Starts a new identity: sequences from 0, and the batches that are known not to be in
    /// the log go back to the queue, ahead of newer batches, to be re-stamped (P2). Returns
    /// the batches that cannot be carried over because their outcome is unknown.
    pub fn reset_for_new_identity(&mut self) -> Vec<ProducerBatch> {
        let mut unresolved = Vec::new();
        let mut carried = VecDeque::new();
        for mut batch in self.unacked.drain(..) {
            let certainly_not_written =
                batch.behind_gap || batch.wire == Some(WireState::NotWritten);
            if certainly_not_written {
                batch.wire = None;
                batch.behind_gap = false;
                carried.push_back(batch);
            } else {
                unresolved.push(batch);
            }
        }
        carried.append(&mut self.queued);
        self.queued = carried;
        self.next_sequence = 0;
        self.diverged = false;
        self.confirmed = false;
        unresolved
    }
}
