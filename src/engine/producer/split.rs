//! A batch the broker rejected as too large (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE) is split
//! in two and re-sent, as Java's `Sender` does with `splitAndReenqueue`. It happens when a
//! compressed batch is larger than the topic's `max.message.bytes` (the producer sizes batches
//! by `batch.size` and an estimated compression ratio; the topic's limit is not known to it).
//!
//! The broker did not append the rejected batch and did not take its sequences: it still
//! expects the batch's base sequence next. So the two parts take the rejected batch's place in
//! the partition's sequence order, the first with its base sequence and the second right after
//! it, as batches "not written" waiting for a retry. Nothing needs an epoch bump, and a
//! transaction goes on. Batches after it that were in flight are answered
//! OUT_OF_ORDER_SEQUENCE_NUMBER, which for a batch that is not the next expected one means
//! "retry" (P4). When nothing of the partition is in flight, the parts (and anything after
//! them that was never written) are un-stamped and take their sequences again at dispatch
//! (P1, `PartitionState::unstamp_unwritten_tail`).
//!
//! Only a batch no attempt of which may be in the log is split (`ProducerBatch::splittable`):
//! one that may be there fails as indeterminate instead (KAFKA-14034, P5). A part that is
//! still too large is split again, until single records, which fail with the broker's error.

use tracing::warn;

use super::Engine;
use crate::engine::accumulator::Accumulator;
use crate::engine::partition::{ProducerBatch, WireState};
use crate::error::Error;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::record_batch::increment_sequence;
use crate::types::TopicPartition;

impl Engine {
    /// Replaces the batch at `position` of `tp`, rejected with `code`, by its two halves.
    pub(super) fn split_rejected_batch(
        &mut self,
        tp: &TopicPartition,
        position: usize,
        code: ErrorCode,
        acc: &Accumulator,
    ) {
        let Some(state) = self.partitions.get_mut(tp) else {
            return;
        };
        let Some(rejected) = state.unacked.remove(position) else {
            return;
        };
        let halves = rejected.batch.split_in_two();
        let parts = halves.and_then(|(first, second)| {
            let completions = rejected.completion.split(first.record_count())?;
            Some(((first, second), completions))
        });
        let Some(((mut first, mut second), (first_done, second_done))) = parts else {
            // Our own batch always decodes and splits; if it ever did not, it fails as a
            // rejection does (not in the log; later batches are behind a gap).
            if self.config.idempotent {
                state.mark_gap_from(position);
            }
            self.sequence_broken("a sent batch failed for good");
            Self::resolve(&mut self.tally, acc, rejected, Err(Error::broker(code)));
            return;
        };
        warn!(partition = ?tp, %code, records = rejected.batch.record_count(), bytes = rejected.batch.size_in_bytes(), "batch too large for the broker: split in two");
        let (producer_id, epoch) = (
            rejected.batch.producer_id(),
            rejected.batch.producer_epoch(),
        );
        let base_sequence = rejected.batch.base_sequence();
        // Without idempotence there are no sequences: both parts carry -1.
        let second_sequence = if producer_id < 0 {
            -1
        } else {
            increment_sequence(base_sequence, first.record_count())
        };
        first.stamp(producer_id, epoch, base_sequence);
        second.stamp(producer_id, epoch, second_sequence);
        acc.reaccount(
            rejected.batch.uncompressed_size_in_bytes(),
            first.uncompressed_size_in_bytes() + second.uncompressed_size_in_bytes(),
        );
        let (first_spans, second_spans) = rejected.spans.split(first.record_count());
        let parts = [
            (first, first_done, first_spans),
            (second, second_done, second_spans),
        ];
        for (offset, (batch, completion, spans)) in parts.into_iter().enumerate() {
            let mut part = ProducerBatch::new(batch, completion, rejected.created_ms, spans);
            part.attempts = rejected.attempts;
            part.first_sent_ms = rejected.first_sent_ms;
            part.wire = Some(WireState::NotWritten);
            state.unacked.insert(position + offset, part);
        }
        self.tally.counters.batch_splits += 1;
    }
}
