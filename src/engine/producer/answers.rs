//! What each answer to a Produce request means for its batches: acknowledged (or a
//! duplicate of one acknowledged, P5), retried under the same identity, split when too large,
//! rejected for good (a gap: epoch bump, KAFKA-14034), or the producer fenced (T5, KIP-588).

use tracing::{debug, warn};

use super::Engine;
use crate::engine::accumulator::Accumulator;
use crate::engine::completion::BatchAck;
use crate::engine::partition::WireState;
use crate::engine::{PartitionResponse, RequestId};
use crate::error::Error;
use crate::protocol::error_code::ErrorCode;
use crate::types::{Millis, TopicPartition};

impl Engine {
    pub(super) fn on_partition_response(
        &mut self,
        request: RequestId,
        response: PartitionResponse,
        now: Millis,
        acc: &Accumulator,
    ) {
        let Some(state) = self.partitions.get_mut(&response.partition) else {
            return;
        };
        let Some(position) = state.position_of(request) else {
            return;
        };
        let code = response.error;
        let tp = &response.partition;
        match code {
            ErrorCode::NONE | ErrorCode::DUPLICATE_SEQUENCE_NUMBER => {
                // NONE with the original offsets is how the broker answers a retry of a batch it
                // already has; DUPLICATE_SEQUENCE_NUMBER says the same without offsets (P5).
                let base_offset = if code == ErrorCode::NONE {
                    response.base_offset
                } else {
                    -1
                };
                let batch = state
                    .unacked
                    .remove(position)
                    .expect("position is in range");
                if base_offset >= 0 {
                    let last = base_offset + i64::from(batch.batch.record_count()) - 1;
                    state.last_acked_offset = state.last_acked_offset.max(last);
                }
                state.confirmed = true;
                state.last_ack_ms = now;
                // Saturating: `send` stamps created_ms from its own clock read, which can come
                // after the driver read the `now` it stamps and sends with (found by CI: an
                // underflow panic in a debug build).
                let queued_ms = batch
                    .first_sent_ms
                    .unwrap_or(now)
                    .saturating_sub(batch.created_ms);
                self.tally.delivery.acked(
                    now,
                    tp,
                    u64::try_from(batch.batch.record_count()).unwrap_or(0),
                    batch.batch.size_in_bytes() as u64,
                    queued_ms,
                );
                debug!(partition = ?tp, base_offset, base_sequence = batch.batch.base_sequence(), "batch acknowledged");
                let ack = BatchAck {
                    base_offset,
                    log_append_time: response.log_append_time,
                };
                Self::resolve(&mut self.tally, acc, batch, Ok(ack));
            }
            ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER => {
                let batch = &mut state.unacked[position];
                batch.attempt_failed(false);
                // An earlier batch still unresolved explains the gap: it is being retried (P4).
                // Otherwise the broker expects a sequence we did not send next: re-stamp under a
                // new epoch (KIP-360; what the Java client does for an idempotent producer).
                state.retry_at = now;
                if position == 0 && !batch.behind_gap {
                    warn!(partition = ?tp, base_sequence = batch.batch.base_sequence(), "out of order sequence on the next expected batch");
                    state.diverged = true;
                    self.sequence_broken("OUT_OF_ORDER_SEQUENCE_NUMBER on the next expected batch");
                }
            }
            ErrorCode::INVALID_PRODUCER_EPOCH | ErrorCode::PRODUCER_FENCED
                if self.txn.is_some() =>
            {
                // Another producer with our transactional id bumped the epoch (we are a zombie
                // and must stop, T5), or the coordinator aborted our transaction on its
                // timeout and bumped the epoch (KIP-588: abortable, recovered by the abort).
                let fenced = self
                    .txn
                    .as_mut()
                    .map_or(Ok(()), |txn| txn.fenced(code, "Produce", now));
                match fenced {
                    Ok(()) => {
                        let error = Error::Broker {
                            code,
                            message: response.message,
                        };
                        self.reject_batch(&response.partition, position, error, acc);
                    }
                    Err(fatal) => self.fail_fatally(fatal, acc),
                }
            }
            ErrorCode::UNKNOWN_PRODUCER_ID | ErrorCode::INVALID_PRODUCER_EPOCH => {
                // The broker lost (or never had) our producer state, e.g. after producer id
                // expiration or retention removed our last batch: continuing the old sequence
                // cannot work, so bump and re-send (P7; KIP-360). The batch was not appended.
                warn!(partition = ?tp, %code, log_start_offset = response.log_start_offset, last_acked = state.last_acked_offset, "broker does not know our producer state");
                state.unacked[position].attempt_failed(false);
                state.diverged = true;
                self.sequence_broken("broker lost the producer state");
            }
            ErrorCode::MESSAGE_TOO_LARGE | ErrorCode::RECORD_LIST_TOO_LARGE
                if state.unacked[position].splittable() =>
            {
                self.split_rejected_batch(&response.partition, position, code, acc);
            }
            code if code.is_retriable() => {
                // Appended to the leader but not yet replicated, or timed out while replicating:
                // the batch may be in the log. Everything else retriable was rejected up front.
                let maybe_written = matches!(
                    code,
                    ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND
                        | ErrorCode::REQUEST_TIMED_OUT
                        | ErrorCode::KAFKA_STORAGE_ERROR
                );
                let batch = &mut state.unacked[position];
                batch.attempt_failed(maybe_written);
                let attempts = batch.attempts;
                debug!(partition = ?tp, %code, attempts, "retriable produce error");
                let delay = self.retry_backoff.delay(attempts);
                let state = self.partitions.get_mut(tp).expect("partition exists");
                state.retry_at = now + delay;
                if code.invalidates_metadata() {
                    state.leader = None;
                    self.want_metadata();
                }
            }
            code => {
                let error = Error::Broker {
                    code,
                    message: response.message,
                };
                if error.is_fatal() {
                    self.fail_fatally(error, acc);
                    return;
                }
                warn!(partition = ?tp, %code, "batch rejected");
                self.reject_batch(&response.partition, position, error, acc);
            }
        }
    }

    /// The broker rejected the batch at `position` of `tp` for good (e.g. MESSAGE_TOO_LARGE):
    /// this attempt is not in the log. Its sequence was used on the wire, so every later batch
    /// of this identity is out of order from now on: they go out again re-stamped after an
    /// epoch bump (KAFKA-14034).
    fn reject_batch(
        &mut self,
        tp: &TopicPartition,
        position: usize,
        error: Error,
        acc: &Accumulator,
    ) {
        let Some(state) = self.partitions.get_mut(tp) else {
            return;
        };
        let Some(batch) = state.unacked.remove(position) else {
            return;
        };
        if batch.maybe_written {
            // An earlier attempt may be in the log (its answer was lost, or the broker
            // appended before failing): this answer does not make it "not written", so the
            // record is indeterminate (P6, KAFKA-13574), and its sequence may be taken, so
            // later batches are not behind a gap: if it is a gap, the broker answers them
            // OUT_OF_ORDER_SEQUENCE_NUMBER and the bump handles them (P5). Found by the
            // simulation (regression test `kafka_13574_non_retriable_error_on_a_retry` in
            // tests/simulation.rs).
            self.sequence_broken("a sent batch failed for good");
            let error = Error::Indeterminate {
                cause: std::sync::Arc::new(error),
            };
            Self::resolve(&mut self.tally, acc, batch, Err(error));
            return;
        }
        if self.config.idempotent {
            state.mark_gap_from(position);
        }
        self.sequence_broken("a sent batch failed for good");
        Self::resolve(&mut self.tally, acc, batch, Err(error));
    }

    /// Marks the batches of an unanswered request: certainly not in the log when the request
    /// was never written, otherwise unresolved (P5).
    pub(super) fn fail_request_batches(&mut self, request: RequestId, written: bool, now: Millis) {
        let backoff = self.config.retry_backoff_ms;
        for state in self.partitions.values_mut() {
            for batch in state.unacked.iter_mut() {
                if batch.wire == Some(WireState::InFlight(request)) {
                    batch.attempt_failed(written);
                    state.retry_at = state.retry_at.max(now + backoff);
                }
            }
        }
    }
}
