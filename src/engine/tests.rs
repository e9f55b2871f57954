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
                throttle_ms: 0,
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
    h.send(0);
    let opener = produces(&h.poll());
    h.answer(opener[0].0, &[(0, ErrorCode::NONE, 0)]);
    let rejected = h.send(0);
    let a = produces(&h.poll());
    let later = h.send(0);
    let b = produces(&h.poll());
    assert_eq!(b[0].1, vec![(0, 1, 0, 2)]);
    h.answer(a[0].0, &[(0, ErrorCode::MESSAGE_TOO_LARGE, -1)]);
    h.answer(b[0].0, &[(0, ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER, -1)]);
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

/// Queues `batches` batches on each of `partitions` behind an acknowledged opener, so the
/// next poll may pipeline (KAFKA-15591 sends the first batch of an identity alone).
fn backlog_behind_acknowledged_opener(h: &mut Harness, partitions: &[i32], batches: usize) {
    h.give_identity(1, 0);
    for &p in partitions {
        h.send(p);
    }
    let openers = produces(&h.poll());
    for _ in 0..batches {
        for &p in partitions {
            h.send(p);
        }
        assert!(produces(&h.poll()).is_empty(), "openers go alone");
    }
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
    let sent = produces(&h.poll());
    assert_eq!(sent.len(), 5, "at most max.in.flight requests to broker 1");
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

#[test]
fn nothing_goes_to_a_throttled_broker_until_the_throttle_time_passed() {
    let mut h = Harness::new();
    backlog_behind_acknowledged_opener(&mut h, &[0], 3);
    let sent = produces(&h.poll());
    assert_eq!(sent.len(), 3);
    // KIP-219: the broker answers at once and asks for 500 ms of silence.
    h.engine.handle(
        Event::ProduceResponse {
            request: sent[0].0,
            partitions: vec![PartitionResponse {
                partition: TopicPartition::new(T0, 0),
                error: ErrorCode::NONE,
                base_offset: 1,
                log_append_time: -1,
                log_start_offset: 0,
                message: None,
            }],
            throttle_ms: 500,
        },
        h.now,
        &h.acc,
    );
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

#[test]
fn without_idempotence_batches_carry_no_identity_and_nothing_waits_for_one() {
    let mut h = Harness::new();
    let mut config = h.engine.config().clone();
    config.idempotent = false;
    h.engine = Engine::new(config, 5);
    let leaders = vec![(TopicPartition::new(T0, 0), Some(1))];
    h.engine.handle(Event::Leaders(leaders), 0, &h.acc);
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

mod transactions {
    use super::*;
    use crate::engine::transaction::{TxnCall, TxnRequest, TxnResponse, TxnState};
    use crate::types::{ConsumerGroupMetadata, OffsetToCommit};

    fn transactional_harness() -> Harness {
        let mut h = Harness::new();
        let mut config = h.engine.config().clone();
        config.transaction = Some(TransactionConfig {
            transactional_id: "t-1".into(),
            timeout_ms: 60_000,
            call_timeout_ms: 10_000,
        });
        h.engine = Engine::new(config, 3);
        let leaders = (0..3)
            .map(|p| (TopicPartition::new(T0, p), Some(1)))
            .collect();
        h.engine.handle(Event::Leaders(leaders), 0, &h.acc);
        h
    }

    fn answer_txn(h: &mut Harness, request: RequestId, response: TxnResponse) {
        h.engine.handle(
            Event::Txn {
                request,
                result: Ok(response),
            },
            h.now,
            &h.acc,
        );
    }

    fn answer_init_producer_id(h: &mut Harness, request: RequestId, epoch: i16, v2: bool) {
        let identity = ProducerIdentity {
            producer_id: 7,
            epoch,
        };
        let response = TxnResponse::InitProducerId {
            error: ErrorCode::NONE,
            identity,
            transactions_v2: v2,
        };
        answer_txn(h, request, response);
    }

    /// Asserts that call `id`, and only it, finished successfully and the producer is Ready.
    fn assert_finished_ok(h: &mut Harness, id: CallId) {
        let finished = h.engine.take_finished_calls();
        assert!(
            matches!(finished.as_slice(), [(done, Ok(()))] if *done == id),
            "{finished:?}"
        );
        assert_eq!(h.engine.transaction_state(), Some(&TxnState::Ready));
    }

    /// Runs init_transactions against a scripted coordinator (node 1).
    fn init(h: &mut Harness, v2: bool) {
        let call = h.engine.start_call(TxnCall::Init, h.now).unwrap();
        let find = h.poll();
        let Some(Action::FindCoordinator { request, .. }) = find.first() else {
            panic!("{find:?}")
        };
        answer_txn(h, *request, TxnResponse::Coordinator(1));
        let init = h.poll();
        let Some(Action::Coordinator {
            request,
            body: TxnRequest::InitProducerId { current: None },
            ..
        }) = init.first()
        else {
            panic!("{init:?}")
        };
        answer_init_producer_id(h, *request, 0, v2);
        assert_finished_ok(h, call);
    }

    #[test]
    fn calls_in_the_wrong_state_send_nothing() {
        let mut h = transactional_harness();
        assert!(h.engine.begin_transaction(h.now).is_err());
        assert!(h.engine.start_call(TxnCall::Commit, 0).is_err());
        assert!(h.engine.check_send().is_err());
        assert!(
            h.poll().is_empty(),
            "nothing was sent, not even InitProducerId"
        );
        init(&mut h, true);
        assert!(h.engine.start_call(TxnCall::Init, 0).is_err(), "init twice");
        h.engine.begin_transaction(h.now).unwrap();
        assert!(h.engine.begin_transaction(h.now).is_err(), "begin twice");
    }

    #[test]
    fn v1_adds_a_partition_before_its_first_batch() {
        let mut h = transactional_harness();
        init(&mut h, false);
        h.engine.begin_transaction(h.now).unwrap();
        h.send(0);
        let actions = h.poll();
        assert!(
            produces(&actions).is_empty(),
            "no batch before the partition is added (T2)"
        );
        let Some(Action::Coordinator {
            request,
            body: TxnRequest::AddPartitions { partitions, .. },
            ..
        }) = actions.first()
        else {
            panic!("{actions:?}")
        };
        assert_eq!(partitions, &vec![TopicPartition::new(T0, 0)]);
        answer_txn(
            &mut h,
            *request,
            TxnResponse::AddPartitions(vec![(TopicPartition::new(T0, 0), ErrorCode::NONE)]),
        );
        let sent = produces(&h.poll());
        assert_eq!(sent[0].1, vec![(0, 7, 0, 0)]);
    }

    #[test]
    fn fenced_during_commit_ends_the_call_with_a_fatal_error() {
        let mut h = transactional_harness();
        init(&mut h, true);
        h.engine.begin_transaction(h.now).unwrap();
        let record = h.send(0);
        let sent = produces(&h.poll());
        let commit = h.engine.start_call(TxnCall::Commit, h.now).unwrap();
        h.answer(sent[0].0, &[(0, ErrorCode::INVALID_PRODUCER_EPOCH, -1)]);
        h.poll();
        let finished = h.engine.take_finished_calls();
        assert_eq!(finished.len(), 1, "the commit must not hang (P9)");
        let (id, result) = &finished[0];
        assert_eq!(*id, commit);
        assert!(result.as_ref().unwrap_err().is_fatal());
        assert_eq!(h.engine.transaction_state(), Some(&TxnState::FatalError));
        assert!(record.outcome().expect("resolved").is_err());
    }

    #[test]
    fn v2_takes_the_new_epoch_from_end_txn_and_restarts_sequences() {
        let mut h = transactional_harness();
        init(&mut h, true);
        h.engine.begin_transaction(h.now).unwrap();
        h.send(1);
        let sent = produces(&h.poll());
        assert_eq!(sent[0].1, vec![(1, 7, 0, 0)]);
        h.answer(sent[0].0, &[(1, ErrorCode::NONE, 0)]);
        h.engine.start_call(TxnCall::Commit, h.now).unwrap();
        let end = h.poll();
        let Some(Action::Coordinator {
            request,
            body: TxnRequest::EndTxn { commit: true, .. },
            ..
        }) = end.first()
        else {
            panic!("{end:?}")
        };
        answer_txn(
            &mut h,
            *request,
            TxnResponse::EndTxn {
                error: ErrorCode::NONE,
                identity: Some(ProducerIdentity {
                    producer_id: 7,
                    epoch: 1,
                }),
            },
        );
        assert_eq!(h.engine.take_finished_calls().len(), 1);
        h.engine.begin_transaction(h.now).unwrap();
        h.send(1);
        let next = produces(&h.poll());
        assert_eq!(next[0].1, vec![(1, 7, 1, 0)], "new epoch, sequence 0 (T2)");
    }

    /// Advances time in 100 ms steps for at most `ms`, answering coordinator lookups with node
    /// 1 and leaving every other coordinator request unanswered (lost); returns the EndTxn
    /// and InitProducerId requests seen, in order.
    fn advance_losing_answers(h: &mut Harness, ms: Millis) -> Vec<(RequestId, TxnRequest)> {
        let mut seen = Vec::new();
        for _ in 0..ms / 100 {
            for action in h.advance(100) {
                match action {
                    Action::FindCoordinator { request, .. } => {
                        answer_txn(h, request, TxnResponse::Coordinator(1))
                    }
                    Action::Coordinator { request, body, .. } => seen.push((request, body)),
                    _ => {}
                }
            }
        }
        seen
    }

    /// Advances time until the engine sends an EndTxn (answering lookups); returns it.
    fn next_end_txn(h: &mut Harness) -> RequestId {
        for _ in 0..100 {
            for (request, body) in advance_losing_answers(h, 100) {
                if matches!(body, TxnRequest::EndTxn { .. }) {
                    return request;
                }
            }
        }
        panic!("no EndTxn within 10 s")
    }

    /// Opens a transaction with one acknowledged record and starts its commit.
    fn commit_one_record(h: &mut Harness, v2: bool) -> CallId {
        init(h, v2);
        h.engine.begin_transaction(h.now).unwrap();
        h.send(0);
        let sent = produces(&h.poll());
        h.answer(sent[0].0, &[(0, ErrorCode::NONE, 0)]);
        h.engine.start_call(TxnCall::Commit, h.now).unwrap()
    }

    #[test]
    fn a_timed_out_commit_is_resolved_only_by_calling_commit_again() {
        let mut h = transactional_harness();
        let first = commit_one_record(&mut h, true);
        advance_losing_answers(&mut h, 10_500);
        let finished = h.engine.take_finished_calls();
        assert!(
            matches!(finished.as_slice(), [(id, Err(Error::Timeout(_)))] if *id == first),
            "{finished:?}"
        );
        assert_eq!(h.engine.transaction_state(), Some(&TxnState::Committing));
        let refused = h.engine.start_call(TxnCall::Abort, h.now).unwrap_err();
        assert!(
            matches!(refused, Error::InvalidState(_)) && !refused.is_fatal(),
            "{refused}"
        );
        assert!(h.engine.begin_transaction(h.now).is_err());
        assert_eq!(h.engine.transaction_state(), Some(&TxnState::Committing));
        let again = h.engine.start_call(TxnCall::Commit, h.now).unwrap();
        // The coordinator answers again: our commit landed (T4).
        let request = next_end_txn(&mut h);
        answer_txn(
            &mut h,
            request,
            TxnResponse::EndTxn {
                error: ErrorCode::NONE,
                identity: Some(ProducerIdentity {
                    producer_id: 7,
                    epoch: 1,
                }),
            },
        );
        assert_finished_ok(&mut h, again);
    }

    #[test]
    fn an_outcome_reached_after_the_timeout_is_returned_to_the_next_call() {
        let mut h = transactional_harness();
        commit_one_record(&mut h, true);
        advance_losing_answers(&mut h, 10_500);
        h.engine.take_finished_calls();
        let request = next_end_txn(&mut h);
        answer_txn(
            &mut h,
            request,
            TxnResponse::EndTxn {
                error: ErrorCode::NONE,
                identity: None,
            },
        );
        assert!(h.engine.take_finished_calls().is_empty(), "nobody waits");
        assert!(
            h.engine.begin_transaction(h.now).is_err(),
            "the outcome must be collected first"
        );
        let again = h.engine.start_call(TxnCall::Commit, h.now).unwrap();
        let finished = h.engine.take_finished_calls();
        assert!(
            matches!(finished.as_slice(), [(id, Ok(()))] if *id == again),
            "{finished:?}"
        );
        h.engine.begin_transaction(h.now).unwrap();
    }

    #[test]
    fn an_end_txn_error_that_leaves_the_transaction_abortable_says_so() {
        let mut h = transactional_harness();
        let commit = commit_one_record(&mut h, true);
        let end = h.poll();
        let Some(Action::Coordinator { request, .. }) = end.first() else {
            panic!("{end:?}")
        };
        answer_txn(
            &mut h,
            *request,
            TxnResponse::EndTxn {
                error: ErrorCode::INVALID_TXN_STATE,
                identity: None,
            },
        );
        let finished = h.engine.take_finished_calls();
        let [(id, Err(error))] = finished.as_slice() else {
            panic!("{finished:?}")
        };
        assert_eq!(*id, commit);
        assert_eq!(
            h.engine.transaction_state(),
            Some(&TxnState::AbortableError)
        );
        assert!(error.is_abortable(), "{error}");
        assert_eq!(error.code(), Some(ErrorCode::INVALID_TXN_STATE));
    }

    /// Transactions v1: a batch whose request is still out when the abort starts, and which
    /// expires once that request times out, makes the transaction abortable again while the
    /// abort drains; the abort must still bump the epoch (KIP-360) before the next
    /// transaction, or the timed-out request, if it reaches the broker late, lands in the next
    /// transaction (same epoch, the next sequence). Found by the simulation's copy loop.
    #[test]
    fn v1_abort_bumps_the_epoch_when_a_batch_expires_while_it_drains() {
        let mut h = transactional_harness();
        init(&mut h, false);
        h.engine.begin_transaction(h.now).unwrap();
        let record = h.send(0);
        let actions = h.poll();
        let Some(Action::Coordinator { request, .. }) = actions.first() else {
            panic!("{actions:?}")
        };
        let added = vec![(TopicPartition::new(T0, 0), ErrorCode::NONE)];
        answer_txn(&mut h, *request, TxnResponse::AddPartitions(added));
        // The batch's requests go unanswered: it is sent again after each request timeout
        // (300 ms). The abort starts with the last attempt before the delivery timeout (1 s)
        // in flight.
        let mut last_sent = 0;
        for _ in 0..100 {
            if !produces(&h.advance(10)).is_empty() {
                last_sent = h.now;
                if h.now >= 700 {
                    break;
                }
            }
        }
        assert!((700..1_000).contains(&last_sent), "sent at {last_sent}");
        let abort = h.engine.start_call(TxnCall::Abort, h.now).unwrap();
        assert_eq!(h.engine.transaction_state(), Some(&TxnState::Aborting));
        let mut bumped = None;
        for _ in 0..200 {
            for action in h.advance(10) {
                let Action::Coordinator { request, body, .. } = action else {
                    continue;
                };
                match body {
                    TxnRequest::EndTxn { commit: false, .. } => {
                        assert!(
                            record.outcome().is_some_and(|o| o.is_err()),
                            "the batch expired before the EndTxn"
                        );
                        let ended = TxnResponse::EndTxn {
                            error: ErrorCode::NONE,
                            identity: None,
                        };
                        answer_txn(&mut h, request, ended);
                    }
                    TxnRequest::InitProducerId { current } => {
                        bumped = current;
                        answer_init_producer_id(&mut h, request, 1, false);
                    }
                    other => panic!("{other:?}"),
                }
            }
            if bumped.is_some() {
                break;
            }
        }
        assert_eq!(
            bumped,
            Some(ProducerIdentity {
                producer_id: 7,
                epoch: 0
            }),
            "the abort re-initialises with the current identity (KIP-360)"
        );
        assert_finished_ok(&mut h, abort);
        h.engine.begin_transaction(h.now).unwrap();
        h.send(0);
        let actions = h.poll();
        let Some(Action::Coordinator { request, .. }) = actions.first() else {
            panic!("{actions:?}")
        };
        let added = vec![(TopicPartition::new(T0, 0), ErrorCode::NONE)];
        answer_txn(&mut h, *request, TxnResponse::AddPartitions(added));
        let next = produces(&h.poll());
        assert_eq!(next[0].1, vec![(0, 7, 1, 0)], "new epoch, sequence 0");
    }

    /// Transactions v1: starts `send_offsets_to_transaction` in an empty transaction and loses
    /// every AddOffsetsToTxn answer until the call times out (max.block.ms, 10 s): each one
    /// may have added the group's offsets partition on the coordinator.
    fn send_offsets_losing_add_offsets(h: &mut Harness) {
        init(h, false);
        h.engine.begin_transaction(h.now).unwrap();
        let group = ConsumerGroupMetadata::new("g", 3, "m-1", None);
        let offsets = vec![OffsetToCommit::new(TopicPartition::new("in", 0), 5)];
        let call = h
            .engine
            .start_call(TxnCall::SendOffsets { offsets, group }, h.now)
            .unwrap();
        let actions = h.poll();
        let Some(Action::Coordinator {
            request,
            body: TxnRequest::AddOffsets { .. },
            ..
        }) = actions.first()
        else {
            panic!("{actions:?}")
        };
        // The connection closed after the write: the answer is lost.
        h.fail(*request, true);
        let retried = advance_losing_answers(h, 10_500);
        assert!(
            retried
                .iter()
                .all(|(_, body)| matches!(body, TxnRequest::AddOffsets { .. })),
            "{retried:?}"
        );
        let finished = h.engine.take_finished_calls();
        assert!(
            matches!(finished.as_slice(), [(id, Err(Error::Timeout(_)))] if *id == call),
            "{finished:?}"
        );
        assert_eq!(h.engine.transaction_state(), Some(&TxnState::InTransaction));
    }

    /// The next coordinator request sent without time passing, answering lookups with node 1;
    /// `None` if the engine sends none.
    fn coordinator_request_now(h: &mut Harness) -> Option<(RequestId, TxnRequest)> {
        for _ in 0..3 {
            for action in h.poll() {
                match action {
                    Action::FindCoordinator { request, .. } => {
                        answer_txn(h, request, TxnResponse::Coordinator(1))
                    }
                    Action::Coordinator { request, body, .. } => return Some((request, body)),
                    _ => {}
                }
            }
        }
        None
    }

    /// Starts the abort and returns its EndTxn(ABORT), which must be sent at once.
    fn abort_sends_end_txn(h: &mut Harness) -> (CallId, RequestId) {
        let abort = h.engine.start_call(TxnCall::Abort, h.now).unwrap();
        let sent = coordinator_request_now(h);
        let Some((request, TxnRequest::EndTxn { commit: false, .. })) = sent else {
            panic!(
                "the coordinator may hold the transaction open: EndTxn(ABORT) expected, got {sent:?}"
            )
        };
        assert!(
            h.engine.take_finished_calls().is_empty(),
            "not finished locally"
        );
        (abort, request)
    }

    /// Found by the simulation's copy loop under transactions v1: an AddOffsetsToTxn whose
    /// answer was lost had been processed, so the coordinator held the transaction open; the
    /// abort finished locally without an EndTxn and the next transaction silently continued
    /// the coordinator's one.
    #[test]
    fn v1_abort_after_a_lost_add_offsets_answer_sends_end_txn() {
        let mut h = transactional_harness();
        send_offsets_losing_add_offsets(&mut h);
        let (abort, request) = abort_sends_end_txn(&mut h);
        let ended = TxnResponse::EndTxn {
            error: ErrorCode::NONE,
            identity: None,
        };
        answer_txn(&mut h, request, ended);
        assert_finished_ok(&mut h, abort);
        // The next transaction starts clean: with nothing in it, its commit needs no EndTxn.
        h.engine.begin_transaction(h.now).unwrap();
        let commit = h.engine.start_call(TxnCall::Commit, h.now).unwrap();
        let sent = coordinator_request_now(&mut h);
        assert!(sent.is_none(), "{sent:?}");
        assert_finished_ok(&mut h, commit);
    }

    /// The same abort when none of the lost AddOffsetsToTxn landed: the coordinator answers
    /// INVALID_TXN_STATE (no transaction open), and the abort is over, not failed.
    #[test]
    fn v1_abort_after_a_lost_add_offsets_that_never_landed_is_not_an_error() {
        let mut h = transactional_harness();
        send_offsets_losing_add_offsets(&mut h);
        let (abort, request) = abort_sends_end_txn(&mut h);
        let nothing_open = TxnResponse::EndTxn {
            error: ErrorCode::INVALID_TXN_STATE,
            identity: None,
        };
        answer_txn(&mut h, request, nothing_open);
        assert_finished_ok(&mut h, abort);
        h.engine.begin_transaction(h.now).unwrap();
    }

    /// Transactions v1: the abort waits for an AddPartitionsToTxn in flight, and one whose
    /// answer is then lost counts as "the transaction may be open": EndTxn(ABORT) is sent.
    #[test]
    fn v1_abort_waits_for_add_partitions_and_ends_a_transaction_it_may_have_opened() {
        let mut h = transactional_harness();
        init(&mut h, false);
        h.engine.begin_transaction(h.now).unwrap();
        let record = h.send(0);
        let actions = h.poll();
        let Some(Action::Coordinator {
            request: add,
            body: TxnRequest::AddPartitions { .. },
            ..
        }) = actions.first()
        else {
            panic!("{actions:?}")
        };
        let add = *add;
        let abort = h.engine.start_call(TxnCall::Abort, h.now).unwrap();
        let waiting = h.advance(10);
        assert!(
            waiting.is_empty(),
            "waits for AddPartitionsToTxn: {waiting:?}"
        );
        h.fail(add, true);
        let sent = coordinator_request_now(&mut h);
        let Some((request, TxnRequest::EndTxn { commit: false, .. })) = sent else {
            panic!("EndTxn(ABORT) expected: {sent:?}")
        };
        assert!(record.outcome().is_some_and(|o| o.is_err()));
        let ended = TxnResponse::EndTxn {
            error: ErrorCode::NONE,
            identity: None,
        };
        answer_txn(&mut h, request, ended);
        assert_finished_ok(&mut h, abort);
    }

    #[test]
    fn kip_588_a_transaction_the_coordinator_timed_out_is_abortable_and_recovers() {
        let mut h = transactional_harness();
        init(&mut h, false);
        h.engine.begin_transaction(h.now).unwrap();
        h.send(0);
        let actions = h.poll();
        let Some(Action::Coordinator { request, .. }) = actions.first() else {
            panic!("{actions:?}")
        };
        let added = vec![(TopicPartition::new(T0, 0), ErrorCode::NONE)];
        answer_txn(&mut h, *request, TxnResponse::AddPartitions(added));
        let sent = produces(&h.poll());
        h.answer(sent[0].0, &[(0, ErrorCode::NONE, 0)]);
        // Past transaction.timeout.ms (60 s): the coordinator aborted it and bumped the epoch.
        h.now += 61_000;
        let record = h.send(0);
        let sent = produces(&h.poll());
        h.answer(sent[0].0, &[(0, ErrorCode::INVALID_PRODUCER_EPOCH, -1)]);
        assert_eq!(
            h.engine.transaction_state(),
            Some(&TxnState::AbortableError)
        );
        let error = h.engine.check_send().unwrap_err();
        assert!(error.is_abortable() && !error.is_fatal(), "{error}");
        // The abortable error's cause (its source) says why.
        let report = crate::error::ErrorChain(&error).to_string();
        assert!(report.contains("transaction.timeout.ms"), "{report}");
        assert!(record.outcome().expect("resolved").is_err());
        let abort = h.engine.start_call(TxnCall::Abort, h.now).unwrap();
        let actions = h.poll();
        let Some(Action::Coordinator {
            request,
            body: TxnRequest::InitProducerId { current },
            ..
        }) = actions.first()
        else {
            panic!("no EndTxn, straight to InitProducerId (KIP-588): {actions:?}")
        };
        assert_eq!(
            *current,
            Some(ProducerIdentity {
                producer_id: 7,
                epoch: 0
            })
        );
        answer_init_producer_id(&mut h, *request, 2, false);
        assert_finished_ok(&mut h, abort);
    }
}

/// What compression brings to the engine: batches the broker rejects as too large, split in
/// two; a codec the broker's Produce versions cannot carry.
mod compression;
