//! Scripted scenarios for the engine: each drives it event by event and checks what it
//! stamps, sends and resolves. (The randomised simulation lives in `sim`.)

use std::sync::Arc;

use super::accumulator::{Accumulator, AccumulatorConfig};
use super::completion::BatchCompletion;
use super::*;

const T0: &str = "t";

struct Harness {
    engine: Engine,
    acc: Accumulator,
    now: Millis,
}

impl Harness {
    fn new() -> Self {
        let config = EngineConfig {
            delivery_timeout_ms: 1_000,
            request_timeout_ms: 300,
            retry_backoff_ms: 10,
            retry_backoff_max_ms: 10,
            ..EngineConfig::default()
        };
        let acc = Accumulator::new(AccumulatorConfig {
            batch_size: 16 * 1024,
            linger_ms: 0,
            buffer_memory: 1 << 20,
            max_request_size: 1 << 20,
            transactional: false,
            compression: crate::protocol::record_batch::Compression::None,
        });
        let mut h = Self {
            engine: Engine::new(config, 7),
            acc,
            now: 0,
        };
        let leaders = (0..3)
            .map(|p| (TopicPartition::new(T0, p), Some(1)))
            .collect();
        h.engine.handle(Event::Leaders(leaders), 0, &h.acc);
        h
    }

    /// [`Harness::new`], with batches that linger `linger_ms` before they close.
    fn lingering(linger_ms: Millis) -> Self {
        let mut h = Self::new();
        h.acc = Accumulator::new(AccumulatorConfig {
            linger_ms,
            ..h.acc.config().clone()
        });
        h
    }

    /// [`Harness::new`] with its engine's settings changed by `change` (partitions 0–2 led
    /// by broker 1 again).
    fn configured(change: impl FnOnce(&mut EngineConfig)) -> Self {
        let mut h = Self::new();
        let mut config = h.engine.config().clone();
        change(&mut config);
        h.engine = Engine::new(config, 7);
        let leaders = (0..3)
            .map(|p| (TopicPartition::new(T0, p), Some(1)))
            .collect();
        h.engine.handle(Event::Leaders(leaders), 0, &h.acc);
        h
    }

    /// Appends a record of 9,000 bytes to `partition`: two of them do not fit in one 16 KiB
    /// batch, so the second closes the first as full.
    fn send_large(&mut self, partition: i32) {
        self.acc
            .append(
                &TopicPartition::new(T0, partition),
                0,
                None,
                Some(&[0u8; 9_000]),
                &[],
                self.now,
            )
            .expect("append");
    }

    fn send(&mut self, partition: i32) -> Arc<BatchCompletion> {
        let tp = TopicPartition::new(T0, partition);
        self.acc
            .append(&tp, 0, None, Some(b"value"), &[], self.now)
            .expect("append")
            .completion
    }

    fn poll(&mut self) -> Vec<Action> {
        self.engine.poll(self.now, &self.acc)
    }

    fn advance(&mut self, ms: Millis) -> Vec<Action> {
        self.now += ms;
        self.poll()
    }

    fn give_identity(&mut self, producer_id: i64, epoch: i16) {
        let actions = self.poll();
        self.answer_identity(&actions, producer_id, epoch);
    }

    /// Answers the InitProducerId request among `actions` with the identity given.
    fn answer_identity(&mut self, actions: &[Action], producer_id: i64, epoch: i16) {
        let request = actions
            .iter()
            .find_map(|a| match a {
                Action::InitProducerId { request } => Some(*request),
                _ => None,
            })
            .expect("asks for a producer id");
        self.engine.handle(
            Event::ProducerId {
                request,
                result: Ok(ProducerIdentity { producer_id, epoch }),
            },
            self.now,
            &self.acc,
        );
    }

    fn answer(&mut self, request: RequestId, answers: &[(i32, ErrorCode, i64)]) {
        self.answer_throttled(request, answers, 0);
    }

    /// [`Harness::answer`], the answer asking for `throttle_ms` of silence (KIP-219).
    fn answer_throttled(
        &mut self,
        request: RequestId,
        answers: &[(i32, ErrorCode, i64)],
        throttle_ms: Millis,
    ) {
        let partitions = answers
            .iter()
            .map(|&(p, error, base_offset)| PartitionResponse {
                partition: TopicPartition::new(T0, p),
                error,
                base_offset,
                log_append_time: -1,
                log_start_offset: 0,
                message: None,
            })
            .collect();
        self.engine.handle(
            Event::ProduceResponse {
                request,
                partitions,
                throttle_ms,
            },
            self.now,
            &self.acc,
        );
    }

    fn fail(&mut self, request: RequestId, written: bool) {
        let error = Error::io(
            "b",
            std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset"),
        );
        self.engine.handle(
            Event::RequestFailed {
                request,
                written,
                error,
            },
            self.now,
            &self.acc,
        );
    }
}

/// (partition, producer id, epoch, base sequence) of one batch on the wire.
type Stamp = (i32, i64, i16, i32);

/// (request, stamps) of each Produce action.
fn produces(actions: &[Action]) -> Vec<(RequestId, Vec<Stamp>)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Produce {
                request, batches, ..
            } => Some((
                *request,
                batches
                    .iter()
                    .map(|(tp, b)| {
                        (
                            tp.partition,
                            b.producer_id(),
                            b.producer_epoch(),
                            b.base_sequence(),
                        )
                    })
                    .collect(),
            )),
            _ => None,
        })
        .collect()
}

fn offset_of(c: &BatchCompletion) -> Option<i64> {
    c.outcome().and_then(|o| o.ok()).map(|a| a.base_offset)
}

#[test]
fn sequences_are_taken_at_dispatch_and_contiguous() {
    let mut h = Harness::new();
    let first = h.send(0);
    // No identity yet: nothing is stamped, nothing is sent (P1).
    let actions = h.poll();
    assert!(produces(&actions).is_empty());
    let init = actions.iter().find_map(|a| match a {
        Action::InitProducerId { request } => Some(*request),
        _ => None,
    });
    h.engine.handle(
        Event::ProducerId {
            request: init.unwrap(),
            result: Ok(ProducerIdentity {
                producer_id: 9,
                epoch: 0,
            }),
        },
        0,
        &h.acc,
    );
    let sent = produces(&h.poll());
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].1, vec![(0, 9, 0, 0)]);
    // The first batch of a new producer id goes alone until acknowledged (KAFKA-15591).
    h.send(0);
    assert!(produces(&h.poll()).is_empty());
    h.answer(sent[0].0, &[(0, ErrorCode::NONE, 100)]);
    assert_eq!(offset_of(&first), Some(100));
    h.send(0);
    let second = produces(&h.poll());
    assert_eq!(
        second[0].1,
        vec![(0, 9, 0, 1)],
        "one batch per partition per request; next sequence is 1"
    );
    assert_eq!(h.engine.counters().records_acked, 1);
}

/// A one-record batch the broker refuses as too large cannot be split: it fails as any
/// rejection does, with the broker's own words.
#[test]
fn a_single_record_too_large_fails_with_the_brokers_message() {
    let mut h = Harness::new();
    h.give_identity(1, 0);
    let record = h.send(0);
    let sent = produces(&h.poll());
    let refusal = PartitionResponse {
        partition: TopicPartition::new(T0, 0),
        error: ErrorCode::MESSAGE_TOO_LARGE,
        base_offset: -1,
        log_append_time: -1,
        log_start_offset: 0,
        message: Some("the record is too large".into()),
    };
    h.engine.handle(
        Event::ProduceResponse {
            request: sent[0].0,
            partitions: vec![refusal],
            throttle_ms: 0,
        },
        h.now,
        &h.acc,
    );
    let outcome = record.outcome().expect("resolved");
    let Err(Error::Broker { code, message }) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(code, ErrorCode::MESSAGE_TOO_LARGE);
    assert_eq!(message.as_deref(), Some("the record is too large"));
}

/// A Produce request that failed on its connection asks for metadata (the leader may have
/// moved with the broker).
#[test]
fn a_failed_request_asks_for_metadata() {
    let mut h = Harness::new();
    h.give_identity(1, 0);
    h.send(0);
    let sent = produces(&h.poll());
    h.fail(sent[0].0, false);
    assert!(
        h.poll()
            .iter()
            .any(|a| matches!(a, Action::RefreshMetadata))
    );
}

/// A fatal InitProducerId answer (here: not authorized on the cluster) fails the producer
/// and its records at once; it is not asked again.
#[test]
fn a_fatal_producer_id_answer_fails_the_producer() {
    let mut h = Harness::new();
    let pending = h.send(0);
    let actions = h.poll();
    let Some(request) = actions.iter().find_map(|a| match a {
        Action::InitProducerId { request } => Some(*request),
        _ => None,
    }) else {
        panic!("{actions:?}")
    };
    h.engine.handle(
        Event::ProducerId {
            request,
            result: Err(Error::broker(ErrorCode::CLUSTER_AUTHORIZATION_FAILED)),
        },
        h.now,
        &h.acc,
    );
    let later = h.advance(1_000);
    assert!(
        !later
            .iter()
            .any(|a| matches!(a, Action::InitProducerId { .. })),
        "{later:?}"
    );
    assert!(matches!(pending.outcome(), Some(Err(e)) if e.is_fatal()));
}

/// A partition without a leader asks for metadata at once, and again only once
/// `metadata_refresh_backoff_ms` has passed, however often it is wanted in between.
#[test]
fn metadata_is_asked_for_again_only_after_its_backoff() {
    let mut h = Harness::new();
    h.give_identity(1, 0);
    h.now = 1_000;
    let leaderless = vec![(TopicPartition::new(T0, 0), None)];
    h.engine.handle(Event::Leaders(leaderless), h.now, &h.acc);
    h.send(0);
    let refreshes = |actions: Vec<Action>| {
        actions
            .iter()
            .filter(|a| matches!(a, Action::RefreshMetadata))
            .count()
    };
    assert_eq!(refreshes(h.poll()), 1);
    let backoff = h.engine.config().metadata_refresh_backoff_ms;
    assert_eq!(refreshes(h.advance(backoff - 1)), 0);
    assert_eq!(refreshes(h.advance(1)), 1);
}

/// `retries` bounds the attempts: a batch refused retriably on its first attempt and on each
/// retry fails once its retries are spent, long before its delivery timeout, whether the
/// refusals say it is not in the log (re-stamped for each retry) or that it may be (retried
/// under its sequence, P5).
#[test]
fn a_batch_fails_once_its_retries_are_spent() {
    for refusal in [
        ErrorCode::NOT_ENOUGH_REPLICAS,
        ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ] {
        let mut h = Harness::configured(|config| {
            config.retries = 2;
            config.delivery_timeout_ms = 60_000;
        });
        h.give_identity(1, 0);
        h.now = 100;
        let record = h.send(0);
        for attempt in 1..=3 {
            let sent = produces(&h.advance(10));
            assert_eq!(sent.len(), 1, "{refusal}: attempt {attempt}");
            assert!(record.outcome().is_none(), "{refusal}: attempt {attempt}");
            h.answer(sent[0].0, &[(0, refusal, -1)]);
        }
        assert!(
            produces(&h.advance(10)).is_empty(),
            "{refusal}: no fourth attempt"
        );
        let outcome = record.outcome().expect("failed after its retries");
        assert!(
            // The broker may have appended before it failed (P5): that refusal leaves the
            // record indeterminate.
            matches!(outcome, Err(Error::DeliveryTimeout { elapsed_ms, indeterminate })
                if elapsed_ms == h.now - 100
                    && indeterminate == (refusal == ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND)),
            "{refusal}: {outcome:?}"
        );
        assert!(h.now < 1_000, "{refusal}: well before the delivery timeout");
    }
}

#[test]
fn a_request_never_written_consumes_no_sequence() {
    let mut h = Harness::new();
    h.give_identity(1, 0);
    let c = h.send(0);
    let sent = produces(&h.poll());
    h.fail(sent[0].0, false);
    // The batch expires without ever reaching the broker: a plain failure, no bump (P1).
    for _ in 0..200 {
        for (request, _) in produces(&h.advance(10)) {
            h.fail(request, false);
        }
    }
    let err = c.outcome().expect("resolved").unwrap_err();
    assert!(!err.is_indeterminate(), "{err}");
    assert_eq!(h.engine.counters().epoch_bumps, 0);
    h.send(0);
    let next = produces(&h.poll());
    assert_eq!(
        next[0].1,
        vec![(0, 1, 0, 0)],
        "sequence 0 again: the failed send consumed none"
    );
}

#[test]
fn lost_ack_is_retried_with_the_same_identity_and_resolved_once() {
    let mut h = Harness::new();
    h.give_identity(1, 0);
    let c = h.send(0);
    let sent = produces(&h.poll());
    h.fail(sent[0].0, true);
    let retry = produces(&h.advance(20));
    assert_eq!(
        retry[0].1, sent[0].1,
        "same producer id, epoch and sequence (P2)"
    );
    // The broker recognises the batch and answers with its original offset.
    h.answer(retry[0].0, &[(0, ErrorCode::NONE, 42)]);
    assert_eq!(offset_of(&c), Some(42));
    assert_eq!(h.engine.counters().records_acked, 1);
    assert_eq!(h.engine.counters().batch_retries, 1);
    assert_eq!(h.engine.metrics().records_retried, 1);
}

#[test]
fn expired_unresolved_batch_bumps_epoch_and_resets_every_partition() {
    let mut h = Harness::new();
    h.give_identity(1, 0);
    h.send(1);
    let p1 = produces(&h.poll());
    h.answer(p1[0].0, &[(1, ErrorCode::NONE, 0)]);
    let lost = h.send(0);
    let sent = produces(&h.poll());
    h.fail(sent[0].0, true);
    // Every retry goes unanswered until the delivery timeout.
    for _ in 0..150 {
        for (request, _) in produces(&h.advance(10)) {
            h.fail(request, true);
        }
    }
    let err = lost.outcome().expect("resolved").unwrap_err();
    assert!(
        err.is_indeterminate(),
        "a written batch whose answer was lost is indeterminate: {err}"
    );
    assert_eq!(h.engine.counters().epoch_bumps, 1);
    assert_eq!(
        h.engine.identity(),
        Some(ProducerIdentity {
            producer_id: 1,
            epoch: 1
        })
    );
    // Partition 1 was idle: its sequence restarts at 0 too (KAFKA-12152).
    h.send(1);
    let next = produces(&h.poll());
    assert_eq!(next[0].1, vec![(1, 1, 1, 0)]);
}

/// Partition 0 of a producer with identity (1, 0): a first batch acknowledged (the broker
/// holds state for it, so later batches may be pipelined, KAFKA-15591), then two batches in
/// flight in requests of their own (sequences 1 and 2). Returns each one's completion and
/// request.
fn pipelined_after_an_opener(
    h: &mut Harness,
) -> (
    Arc<BatchCompletion>,
    RequestId,
    Arc<BatchCompletion>,
    RequestId,
) {
    h.send(0);
    let opener = produces(&h.poll());
    h.answer(opener[0].0, &[(0, ErrorCode::NONE, 0)]);
    let first = h.send(0);
    let a = produces(&h.poll());
    assert_eq!(a[0].1, vec![(0, 1, 0, 1)]);
    let second = h.send(0);
    let b = produces(&h.poll());
    assert_eq!(b[0].1, vec![(0, 1, 0, 2)]);
    (first, a[0].0, second, b[0].0)
}

#[test]
fn a_batch_rejected_for_good_makes_later_batches_restamp_after_a_bump() {
    let mut h = Harness::new();
    h.engine = Engine::new(
        EngineConfig {
            max_in_flight: 5,
            ..h.engine.config().clone()
        },
        1,
    );
    let leaders = vec![(TopicPartition::new(T0, 0), Some(1))];
    h.engine.handle(Event::Leaders(leaders), 0, &h.acc);
    h.give_identity(1, 0);
    // The broker acknowledged a first batch, so it holds state for this producer and later
    // batches may be pipelined (KAFKA-15591).
    let (rejected, a, later, b) = pipelined_after_an_opener(&mut h);
    h.answer(a, &[(0, ErrorCode::MESSAGE_TOO_LARGE, -1)]);
    h.answer(b, &[(0, ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER, -1)]);
    let err = rejected.outcome().expect("resolved").unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::MESSAGE_TOO_LARGE));
    assert!(!err.is_indeterminate());
    let again = produces(&h.advance(20));
    assert_eq!(
        again[0].1,
        vec![(0, 1, 1, 0)],
        "re-stamped: new epoch, sequence 0 (P2)"
    );
    h.answer(again[0].0, &[(0, ErrorCode::NONE, 5)]);
    assert_eq!(offset_of(&later), Some(5));
}

/// The simulation's end-of-run check (P6) counts a batch wherever the engine holds it:
/// queued before it is stamped, and unacknowledged after.
#[cfg(feature = "sim")]
#[test]
fn unresolved_batches_are_counted_queued_and_in_flight() {
    let mut h = Harness::new();
    h.send(0);
    let actions = h.poll();
    assert!(produces(&actions).is_empty(), "no identity yet");
    assert_eq!(h.engine.unresolved_batches(), 1, "queued");
    h.answer_identity(&actions, 1, 0);
    let sent = produces(&h.poll());
    assert_eq!(h.engine.unresolved_batches(), 1, "in flight");
    h.answer(sent[0].0, &[(0, ErrorCode::NONE, 0)]);
    assert_eq!(h.engine.unresolved_batches(), 0);
}

/// `flush` closes a lingering batch at once, and the flag ends once everything is resolved:
/// the next batch lingers again.
#[test]
fn a_flush_sends_a_lingering_batch_at_once_until_idle() {
    let mut h = Harness::lingering(10_000);
    h.give_identity(1, 0);
    let first = h.send(0);
    assert!(produces(&h.poll()).is_empty(), "lingering");
    h.engine.begin_flush();
    let flushed = produces(&h.advance(1));
    assert_eq!(
        flushed.len(),
        1,
        "closed by the flush, 9,999 ms before its linger"
    );
    h.answer(flushed[0].0, &[(0, ErrorCode::NONE, 0)]);
    assert_eq!(offset_of(&first), Some(0));
    assert!(h.engine.is_idle(&h.acc));
    h.poll();
    h.send(0);
    assert!(
        produces(&h.advance(1)).is_empty(),
        "the flush is over: lingering again"
    );
}

/// A batch behind a gap whose own answer was then lost is still certainly not in the log (the
/// broker refuses every sequence after the missing one), so the bump re-stamps it rather than
/// failing it as indeterminate.
#[test]
fn a_batch_behind_a_gap_is_restamped_even_when_its_answer_was_lost() {
    let mut h = Harness::configured(|c| c.max_in_flight = 5);
    h.give_identity(1, 0);
    let (rejected, a, later, b) = pipelined_after_an_opener(&mut h);
    h.answer(a, &[(0, ErrorCode::MESSAGE_TOO_LARGE, -1)]);
    assert!(rejected.outcome().is_some());
    h.fail(b, true);
    let again = produces(&h.advance(20));
    assert_eq!(
        again[0].1,
        vec![(0, 1, 1, 0)],
        "re-stamped under the new epoch"
    );
    assert!(later.outcome().is_none(), "not failed as indeterminate");
    h.answer(again[0].0, &[(0, ErrorCode::NONE, 5)]);
    assert_eq!(offset_of(&later), Some(5));
}

/// A batch behind a gap whose answer was lost and whose delivery timeout passed fails as
/// certainly not written, not as indeterminate: the broker refuses every sequence after the
/// missing one, so it cannot be in the log.
#[test]
fn an_expired_batch_behind_a_gap_is_not_indeterminate() {
    let mut h = Harness::configured(|c| c.max_in_flight = 5);
    h.give_identity(1, 0);
    let (_, a, later, b) = pipelined_after_an_opener(&mut h);
    // Both answers come as the delivery timeout (1 s) passes.
    h.now = 1_000;
    h.answer(a, &[(0, ErrorCode::MESSAGE_TOO_LARGE, -1)]);
    h.fail(b, true);
    h.poll();
    let outcome = later.outcome().expect("expired");
    assert!(
        matches!(
            outcome,
            Err(Error::DeliveryTimeout {
                elapsed_ms: 1_000,
                indeterminate: false
            })
        ),
        "{outcome:?}"
    );
}

/// OUT_OF_ORDER_SEQUENCE_NUMBER on the next batch the broker should expect, with nothing
/// unresolved before it: the broker's sequence and ours diverged, so the producer takes a new
/// epoch and the batch goes again from sequence 0 (KIP-360).
#[test]
fn out_of_order_on_the_next_expected_batch_bumps_the_epoch() {
    let mut h = Harness::new();
    h.give_identity(1, 0);
    h.send(0);
    let opener = produces(&h.poll());
    h.answer(opener[0].0, &[(0, ErrorCode::NONE, 0)]);
    let record = h.send(0);
    let sent = produces(&h.poll());
    h.answer(
        sent[0].0,
        &[(0, ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER, -1)],
    );
    let again = produces(&h.advance(20));
    assert_eq!(h.engine.counters().epoch_bumps, 1);
    assert_eq!(again[0].1, vec![(0, 1, 1, 0)], "epoch 1, sequence 0");
    h.answer(again[0].0, &[(0, ErrorCode::NONE, 1)]);
    assert_eq!(offset_of(&record), Some(1));
}

/// A batch to retry waits until its partition has nothing in flight: sent beside a later
/// batch still unanswered, the two could land out of order.
#[test]
fn a_retry_waits_for_its_partitions_batches_in_flight() {
    let mut h = Harness::new();
    h.give_identity(1, 0);
    h.send(0);
    let opener = produces(&h.poll());
    h.answer(opener[0].0, &[(0, ErrorCode::NONE, 0)]);
    h.send(0);
    let a = produces(&h.poll());
    h.send(0);
    let b = produces(&h.poll());
    h.answer(a[0].0, &[(0, ErrorCode::NOT_LEADER_OR_FOLLOWER, -1)]);
    h.engine.handle(
        Event::Leaders(vec![(TopicPartition::new(T0, 0), Some(1))]),
        h.now,
        &h.acc,
    );
    assert!(
        produces(&h.advance(20)).is_empty(),
        "the second is in flight"
    );
    h.answer(b[0].0, &[(0, ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER, -1)]);
    assert_eq!(produces(&h.advance(20)).len(), 2, "both again, in order");
}

#[test]
fn out_of_order_behind_an_earlier_retry_is_not_data_loss() {
    let mut h = Harness::new();
    h.give_identity(1, 0);
    // The broker acknowledged a first batch, so it holds state for this producer and later
    // batches may be pipelined (KAFKA-15591).
    h.send(0);
    let opener = produces(&h.poll());
    h.answer(opener[0].0, &[(0, ErrorCode::NONE, 0)]);
    let first = h.send(0);
    let a = produces(&h.poll());
    let second = h.send(0);
    let b = produces(&h.poll());
    h.answer(a[0].0, &[(0, ErrorCode::NOT_LEADER_OR_FOLLOWER, -1)]);
    h.answer(b[0].0, &[(0, ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER, -1)]);
    h.engine.handle(
        Event::Leaders(vec![(TopicPartition::new(T0, 0), Some(1))]),
        h.now,
        &h.acc,
    );
    // Neither batch reached the log, so both take their sequences again and go out in
    // order, pipelined, under the same identity (P1, P4): no bump.
    let again = produces(&h.advance(20));
    let stamps: Vec<_> = again.iter().map(|(_, s)| s[0]).collect();
    assert_eq!(stamps, vec![(0, 1, 0, 1), (0, 1, 0, 2)]);
    h.answer(again[0].0, &[(0, ErrorCode::NONE, 10)]);
    h.answer(again[1].0, &[(0, ErrorCode::NONE, 11)]);
    assert_eq!(
        (offset_of(&first), offset_of(&second)),
        (Some(10), Some(11))
    );
    assert_eq!(h.engine.counters().epoch_bumps, 0);
}

#[test]
fn epoch_exhaustion_takes_a_new_producer_id() {
    let mut h = Harness::new();
    h.give_identity(1, i16::MAX);
    h.send(0);
    let sent = produces(&h.poll());
    h.answer(sent[0].0, &[(0, ErrorCode::UNKNOWN_PRODUCER_ID, -1)]);
    let actions = h.advance(1);
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::InitProducerId { .. })),
        "at epoch i16::MAX a bump needs a new producer id: {actions:?}"
    );
    assert_eq!(h.engine.identity(), None);
}

#[test]
fn request_timeout_makes_batches_unresolved_and_closes_the_connection() {
    let mut h = Harness::new();
    h.give_identity(1, 0);
    h.send(0);
    let sent = produces(&h.poll());
    let actions = h.advance(300);
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::Disconnect { broker: 1 }))
    );
    let retry = produces(&h.advance(20));
    assert_eq!(retry[0].1, sent[0].1);
    // The answer to the timed-out request arrives late: it is ignored.
    h.answer(sent[0].0, &[(0, ErrorCode::NONE, 1)]);
    assert_eq!(h.engine.counters().records_acked, 0);
}

#[test]
fn a_retry_that_never_left_does_not_erase_an_earlier_lost_ack() {
    let mut h = Harness::new();
    h.give_identity(1, 0);
    let c = h.send(0);
    let sent = produces(&h.poll());
    // Written, answer lost: maybe in the log.
    h.fail(sent[0].0, true);
    // Every retry fails before it is written (broker unreachable) until the batch expires.
    for _ in 0..150 {
        for (request, _) in produces(&h.advance(10)) {
            h.fail(request, false);
        }
    }
    let err = c.outcome().expect("resolved").unwrap_err();
    assert!(
        err.is_indeterminate(),
        "the first attempt may have landed: {err}"
    );
    assert_eq!(h.engine.counters().epoch_bumps, 1);
}

/// Queues `batches` full batches on each of `partitions` behind an acknowledged opener, so
/// the next poll may pipeline (KAFKA-15591 sends the first batch of an identity alone). Each
/// batch here is closed by its one large record (another would not fit); one more small
/// record's batch stays open behind them.
fn backlog_behind_acknowledged_opener(h: &mut Harness, partitions: &[i32], batches: usize) {
    h.give_identity(1, 0);
    for &p in partitions {
        h.send(p);
    }
    let openers = produces(&h.poll());
    // Two of these do not fit in one 16 KiB batch.
    for _ in 0..batches {
        for &p in partitions {
            h.send_large(p);
        }
        assert!(produces(&h.poll()).is_empty(), "openers go alone");
    }
    for &p in partitions {
        h.send(p);
    }
    assert!(h.acc.has_pending(), "the last batch is still open");
    for (request, stamps) in openers {
        let answers: Vec<_> = stamps.iter().map(|s| (s.0, ErrorCode::NONE, 0)).collect();
        h.answer(request, &answers);
    }
}

#[test]
fn one_poll_fills_every_free_in_flight_slot() {
    let mut h = Harness::new();
    backlog_behind_acknowledged_opener(&mut h, &[0], 7);
    let sent = produces(&h.poll());
    assert_eq!(
        sent.len(),
        5,
        "max.in.flight requests in one poll: {sent:?}"
    );
    let sequences: Vec<i32> = sent.iter().map(|(_, s)| s[0].3).collect();
    assert_eq!(sequences, vec![1, 2, 3, 4, 5], "contiguous, in order (P3)");
    // Two answers arriving together free two slots; one poll refills both.
    h.answer(sent[0].0, &[(0, ErrorCode::NONE, 1)]);
    h.answer(sent[1].0, &[(0, ErrorCode::NONE, 2)]);
    let refill = produces(&h.poll());
    let sequences: Vec<i32> = refill.iter().map(|(_, s)| s[0].3).collect();
    assert_eq!(sequences, vec![6, 7]);
}

#[test]
fn in_flight_slots_are_per_broker_with_one_batch_per_partition_per_request() {
    let mut h = Harness::new();
    backlog_behind_acknowledged_opener(&mut h, &[0, 1, 2], 6);
    assert!(h.engine.in_flight_per_broker().is_empty());
    let sent = produces(&h.poll());
    assert_eq!(sent.len(), 5, "at most max.in.flight requests to broker 1");
    assert_eq!(
        h.engine.in_flight_per_broker(),
        std::collections::BTreeMap::from([(1, 5)])
    );
    for (_, stamps) in &sent {
        let partitions: Vec<i32> = stamps.iter().map(|s| s.0).collect();
        assert_eq!(
            partitions,
            vec![0, 1, 2],
            "one batch per partition per request"
        );
    }
    assert!(produces(&h.poll()).is_empty(), "no slot is free");
}

/// A broker with every in-flight slot taken (by another partition's backlog) holds a new
/// partition's lingered batch open too: it keeps taking records instead of closing into a
/// queue of small batches.
#[test]
fn a_full_broker_holds_every_partitions_lingered_batch_open() {
    let mut h = Harness::new();
    backlog_behind_acknowledged_opener(&mut h, &[0], 7);
    assert_eq!(produces(&h.poll()).len(), 5, "broker 1 is full");
    let a = h.send(1);
    assert!(produces(&h.advance(1)).is_empty());
    let b = h.send(1);
    assert!(produces(&h.advance(1)).is_empty());
    assert!(Arc::ptr_eq(&a, &b), "one batch took both records");
}

/// `max.in.flight` holds per partition too: a partition whose leader moved with its
/// pipeline full sends nothing to the new leader until its requests to the old one end,
/// though the new leader has every slot free.
#[test]
fn a_partitions_full_pipeline_holds_it_after_its_leader_moved() {
    let mut h = Harness::new();
    backlog_behind_acknowledged_opener(&mut h, &[0], 7);
    let sent = produces(&h.poll());
    assert_eq!(sent.len(), 5);
    h.engine.handle(
        Event::Leaders(vec![(TopicPartition::new(T0, 0), Some(2))]),
        h.now,
        &h.acc,
    );
    assert!(produces(&h.poll()).is_empty(), "five still in flight");
}

/// `max.in.flight` holds per broker as well as per partition: a full batch of a partition
/// with nothing in flight waits while its broker has five requests out for another one.
#[test]
fn a_brokers_full_pipeline_holds_every_partition_it_leads() {
    let mut h = Harness::new();
    h.give_identity(1, 0);
    h.send(0);
    h.send(1);
    let openers = produces(&h.poll());
    assert_eq!(openers.len(), 1);
    h.answer(
        openers[0].0,
        &[(0, ErrorCode::NONE, 0), (1, ErrorCode::NONE, 0)],
    );
    let mut five = Vec::new();
    for _ in 0..5 {
        h.send(0);
        let sent = produces(&h.poll());
        assert_eq!(sent.len(), 1);
        five.push(sent[0].0);
    }
    // Two of these do not fit in one 16 KiB batch: partition 1's first batch is full.
    for _ in 0..2 {
        h.send_large(1);
    }
    assert!(produces(&h.poll()).is_empty(), "broker 1 is full");
    h.answer(five[0], &[(0, ErrorCode::NONE, 1)]);
    assert_eq!(
        batch_records(&h.poll()),
        vec![vec![(1, 1)]],
        "partition 1's full batch takes the freed slot"
    );
}

/// A partition whose full pipeline holds it after its leader moved sends nothing to the new
/// leader, so it does not make the new leader's other partitions close their batches early
/// to go along: those still linger.
#[test]
fn a_held_partition_does_not_close_its_new_leaders_batches_early() {
    let mut h = Harness::lingering(5);
    h.give_identity(1, 0);
    h.send(0);
    let opener = produces(&h.advance(5));
    h.answer(opener[0].0, &[(0, ErrorCode::NONE, 0)]);
    // Two of these do not fit in one 16 KiB batch: six full batches, a seventh open.
    for _ in 0..7 {
        h.send_large(0);
    }
    assert_eq!(
        produces(&h.poll()).len(),
        5,
        "partition 0's pipeline is full"
    );
    let moved = vec![
        (TopicPartition::new(T0, 0), Some(2)),
        (TopicPartition::new(T0, 1), Some(2)),
    ];
    h.engine.handle(Event::Leaders(moved), h.now, &h.acc);
    h.send(1);
    assert!(produces(&h.advance(1)).is_empty(), "partition 1 lingers");
}

/// `produce.request.max.bytes` bounds what a request adds to its first batch: a batch larger
/// than the bound still goes, alone.
#[test]
fn a_batch_larger_than_the_request_bound_goes_alone() {
    let mut h = Harness::configured(|c| c.produce_request_max_bytes = 1_000);
    h.give_identity(1, 0);
    h.send_large(0);
    assert_eq!(produces(&h.poll()).len(), 1);
}

/// When a slot frees for a partition's queued batch, the request leaving for that broker
/// takes the open batches of its other partitions with room, lingered or not.
#[test]
fn a_queued_batch_leaving_takes_the_brokers_open_batches_along() {
    let mut h = Harness::lingering(5);
    h.give_identity(1, 0);
    h.send(0);
    h.send(1);
    let openers = produces(&h.advance(5));
    assert_eq!(openers.len(), 1);
    h.answer(
        openers[0].0,
        &[(0, ErrorCode::NONE, 0), (1, ErrorCode::NONE, 0)],
    );
    // Two of these do not fit in one 16 KiB batch: six full batches, a seventh open.
    for _ in 0..7 {
        h.send_large(0);
    }
    let sent = produces(&h.poll());
    assert_eq!(sent.len(), 5, "broker 1 is full, a sixth batch queued");
    h.send(1);
    h.answer(sent[0].0, &[(0, ErrorCode::NONE, 1)]);
    assert_eq!(
        batch_records(&h.poll()),
        vec![vec![(0, 1), (1, 1)]],
        "partition 1's open batch joins the queued one"
    );
}

#[test]
fn nothing_goes_to_a_throttled_broker_until_the_throttle_time_passed() {
    let mut h = Harness::new();
    backlog_behind_acknowledged_opener(&mut h, &[0], 3);
    let sent = produces(&h.poll());
    assert_eq!(sent.len(), 3);
    // KIP-219: the broker answers at once and asks for 500 ms of silence.
    h.answer_throttled(sent[0].0, &[(0, ErrorCode::NONE, 1)], 500);
    h.answer(sent[1].0, &[(0, ErrorCode::NONE, 2)]);
    h.answer(sent[2].0, &[(0, ErrorCode::NONE, 3)]);
    h.send(0);
    assert!(produces(&h.poll()).is_empty(), "throttled");
    assert_eq!(h.engine.next_wakeup(h.now, &h.acc), Some(h.now + 500));
    assert!(produces(&h.advance(499)).is_empty(), "still throttled");
    assert_eq!(
        produces(&h.advance(1)).len(),
        1,
        "sent once the throttle passed"
    );
    let throttle = h.engine.metrics().produce_throttle_time_ms;
    assert_eq!((throttle.count, throttle.max), (1, 500));
}

/// A retry is held by a throttle too: a batch refused with a retriable error in an answer
/// that asks for silence goes again once both its backoff and the throttle have passed.
#[test]
fn a_retry_waits_out_the_throttle_of_the_answer_that_refused_it() {
    let mut h = Harness::new();
    h.give_identity(1, 0);
    h.send(0);
    let sent = produces(&h.poll());
    assert_eq!(sent.len(), 1);
    // KIP-219: 500 ms of silence, and the batch refused with a retriable error.
    h.answer_throttled(sent[0].0, &[(0, ErrorCode::NOT_ENOUGH_REPLICAS, -1)], 500);
    assert!(
        produces(&h.advance(100)).is_empty(),
        "backoff passed, throttle not"
    );
    assert_eq!(produces(&h.advance(400)).len(), 1, "the retry");
}

/// A batch held back by a throttle that outlasts its delivery timeout wakes the driver at
/// its delivery deadline, where it fails, not at the throttle's end.
#[test]
fn a_held_batch_wakes_the_driver_at_its_delivery_deadline() {
    let mut h = Harness::new();
    h.give_identity(1, 0);
    h.send(0);
    let opener = produces(&h.poll());
    // KIP-219: the answer asks for 5 s of silence, past delivery.timeout.ms (1 s).
    h.answer_throttled(opener[0].0, &[(0, ErrorCode::NONE, 0)], 5_000);
    h.now += 100;
    let held = h.send(0);
    assert!(produces(&h.poll()).is_empty(), "throttled");
    assert_eq!(h.engine.next_wakeup(h.now, &h.acc), Some(100 + 1_000));
    h.advance(1_000);
    assert!(
        matches!(held.outcome(), Some(Err(_))),
        "failed at its deadline"
    );
}

/// A batch in flight wakes the driver at its delivery deadline when that comes before its
/// request's timeout.
#[test]
fn a_batch_in_flight_wakes_the_driver_at_its_delivery_deadline() {
    let mut h = Harness::configured(|c| c.request_timeout_ms = 5_000);
    h.give_identity(1, 0);
    h.now = 100;
    h.send(0);
    assert_eq!(produces(&h.poll()).len(), 1);
    assert_eq!(h.engine.next_wakeup(h.now, &h.acc), Some(100 + 1_000));
}

/// Once a throttle has passed, the broker is an ordinary one again: a request leaving for it
/// takes every partition with room, as before the throttle.
#[test]
fn a_request_after_a_throttle_takes_every_partition_with_room() {
    let mut h = Harness::lingering(5);
    h.give_identity(1, 0);
    h.send(0);
    h.send(1);
    let openers = produces(&h.advance(5));
    h.answer_throttled(
        openers[0].0,
        &[(0, ErrorCode::NONE, 0), (1, ErrorCode::NONE, 0)],
        100,
    );
    h.now += 100;
    h.send(0);
    h.now += 3;
    h.send(1);
    assert_eq!(
        batch_records(&h.advance(2)),
        vec![vec![(0, 1), (1, 1)]],
        "partition 0 lingered; partition 1 joins its request"
    );
}

/// Records per batch of each Produce action, by partition.
fn batch_records(actions: &[Action]) -> Vec<Vec<(i32, i32)>> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Produce { batches, .. } => Some(
                batches
                    .iter()
                    .map(|(tp, b)| (tp.partition, b.record_count()))
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

#[test]
fn a_lingered_batch_keeps_taking_records_while_its_pipeline_is_busy() {
    let mut h = Harness::new();
    h.give_identity(1, 0);
    h.send(0);
    let opener = produces(&h.poll());
    assert_eq!(opener.len(), 1);
    // The opener goes alone (KAFKA-15591): the batches lingered behind it stay one open batch
    // instead of closing into a queue of one-record batches.
    let a = h.send(0);
    assert!(produces(&h.advance(1)).is_empty());
    let b = h.send(0);
    assert!(produces(&h.advance(1)).is_empty());
    assert!(Arc::ptr_eq(&a, &b), "one batch took both records");
    assert!(
        h.engine
            .next_wakeup(h.now, &h.acc)
            .is_none_or(|t| t > h.now + 1),
        "a batch held for the pipeline sets no linger timer"
    );
    h.answer(opener[0].0, &[(0, ErrorCode::NONE, 0)]);
    assert_eq!(batch_records(&h.poll()), vec![vec![(0, 2)]]);
}

#[test]
fn a_request_leaving_for_a_broker_takes_every_partition_with_room() {
    let mut h = Harness::lingering(5);
    let other = TopicPartition::new("u", 0);
    let mut leaders: Vec<_> = (0..3)
        .map(|p| (TopicPartition::new(T0, p), Some(1)))
        .collect();
    leaders.push((other.clone(), Some(2)));
    h.engine.handle(Event::Leaders(leaders), 0, &h.acc);
    h.give_identity(1, 0);
    for p in 0..3 {
        h.send(p);
    }
    let openers = produces(&h.advance(5));
    assert_eq!(openers.len(), 1);
    h.answer(
        openers[0].0,
        &[
            (0, ErrorCode::NONE, 0),
            (1, ErrorCode::NONE, 0),
            (2, ErrorCode::NONE, 0),
        ],
    );
    h.send(0);
    h.now += 3;
    h.send(1);
    h.send(2);
    h.acc
        .append(&other, 0, None, Some(b"v"), &[], h.now)
        .expect("append");
    // Partition 0 lingered its 5 ms; 1, 2 and broker 2's partition were appended to later.
    let sent = batch_records(&h.advance(2));
    assert_eq!(
        sent,
        vec![vec![(0, 1), (1, 1), (2, 1)]],
        "one request to broker 1 with partitions 0, 1 and 2; broker 2's batch lingers on"
    );
    assert_eq!(
        batch_records(&h.advance(3)),
        vec![vec![(other.partition, 1)]],
        "broker 2's batch goes once it lingered"
    );
}

/// `max.request.size` bounds a batch, not a request: one request to a broker carries a
/// ready batch of each of its partitions up to `produce.request.max.bytes`, as franz-go's
/// requests do, so the broker handles one request where it handled one per batch.
#[test]
fn a_request_carries_batches_up_to_the_request_cap_not_max_request_size() {
    let big = vec![7u8; 400_000];
    let run = |request_cap: usize| {
        let mut h = Harness::configured(|config| config.produce_request_max_bytes = request_cap);
        h.acc = Accumulator::new(AccumulatorConfig {
            batch_size: 500_000,
            linger_ms: 0,
            buffer_memory: 8 << 20,
            max_request_size: 1 << 20,
            transactional: false,
            compression: crate::protocol::record_batch::Compression::None,
        });
        let leaders = (0..3)
            .map(|p| (TopicPartition::new(T0, p), Some(1)))
            .collect();
        h.engine.handle(Event::Leaders(leaders), 0, &h.acc);
        h.give_identity(1, 0);
        // The identity's first batches go alone until acknowledged (KAFKA-15591).
        for p in 0..3 {
            h.send(p);
        }
        let openers = produces(&h.advance(1));
        for (request, stamps) in openers {
            let answers: Vec<_> = stamps.iter().map(|s| (s.0, ErrorCode::NONE, 0)).collect();
            h.answer(request, &answers);
        }
        for p in 0..3 {
            let tp = TopicPartition::new(T0, p);
            h.acc
                .append(&tp, 0, None, Some(&big), &[], h.now)
                .expect("append");
        }
        batch_records(&h.advance(1))
    };
    assert_eq!(
        run(16 << 20),
        vec![vec![(0, 1), (1, 1), (2, 1)]],
        "three batches of ~400 KB, 1.2 MB in all, in one request"
    );
    assert_eq!(
        run(1 << 20),
        vec![vec![(0, 1), (1, 1)], vec![(2, 1)]],
        "a 1 MiB request cap takes two batches, the third goes in a second request"
    );
}

#[test]
fn without_idempotence_batches_carry_no_identity_and_nothing_waits_for_one() {
    let mut h = Harness::configured(|config| config.idempotent = false);
    let mut sent = Vec::new();
    for _ in 0..3 {
        h.send(0);
        let actions = h.poll();
        assert!(
            !actions
                .iter()
                .any(|a| matches!(a, Action::InitProducerId { .. })),
            "no producer id is asked for"
        );
        sent.extend(produces(&actions));
    }
    let stamps: Vec<Stamp> = sent.iter().map(|(_, s)| s[0]).collect();
    assert_eq!(stamps, vec![(0, -1, -1, -1); 3], "pipelined, no identity");
    // A batch rejected for good leaves the others alone: no gap, no bump.
    h.answer(sent[0].0, &[(0, ErrorCode::MESSAGE_TOO_LARGE, -1)]);
    h.answer(sent[1].0, &[(0, ErrorCode::NONE, 7)]);
    h.answer(sent[2].0, &[(0, ErrorCode::NONE, 8)]);
    assert_eq!(h.engine.counters().records_acked, 2);
    assert_eq!(h.engine.counters().records_failed, 1);
    assert_eq!(h.engine.counters().epoch_bumps, 0);
}

/// The transactional flow: calls, coordinator answers, timeouts, epoch bumps.
mod transactions;

/// What compression brings to the engine: batches the broker rejects as too large, split in
/// two; a codec the broker's Produce versions cannot carry.
mod compression;

/// A purge while a batch is being sealed outside the partition's lock (by `send`, or by a
/// compression worker) fails that batch's records too; sealed afterwards, it is never sent.
/// Left in place it would go out after the purge said its records failed.
#[test]
fn a_purge_fails_a_batch_being_sealed_and_it_is_never_sent() {
    let mut h = Harness::new();
    h.give_identity(1, 0);
    let slot = h.acc.topic_slots(&Arc::from(T0), 3).swap_remove(0);
    let value = [7u8; 10_000];
    let append = |h: &Harness| {
        h.acc
            .append_deferring_seal(
                &slot,
                0,
                None,
                Some(&value),
                &[],
                &tracing::Span::none(),
                || h.now,
            )
            .expect("append")
    };
    let first = append(&h);
    let second = append(&h);
    let to_seal = second
        .to_seal
        .into_iter()
        .next()
        .expect("10 kB twice fill 16 KiB");
    assert_eq!(h.engine.purge(&h.acc), 2);
    for completion in [&first.completion, &second.completion] {
        assert!(matches!(completion.outcome(), Some(Err(Error::Purged))));
    }
    h.acc.put_sealed(to_seal.seal());
    assert!(produces(&h.advance(10)).is_empty(), "nothing left to send");
    // Counted per purge: the records failed before are not counted again.
    let third = append(&h);
    assert_eq!(h.engine.purge(&h.acc), 1);
    assert!(matches!(
        third.completion.outcome(),
        Some(Err(Error::Purged))
    ));
    assert_eq!(h.acc.buffered_bytes(), 0, "the memory came back once");
}
