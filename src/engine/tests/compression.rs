//! Scenarios for batches the broker rejects as too large (see `engine/producer/split.rs`), and
//! for batches no Produce version the broker takes can carry.

use super::*;

/// Appends `n` records to partition 0 (one batch, as the harness lingers 0 ms and nothing
/// polls in between); returns each record's completion and index.
fn send_records(h: &mut Harness, n: usize) -> Vec<(Arc<BatchCompletion>, i32)> {
    let tp = TopicPartition::new(T0, 0);
    (0..n)
        .map(|_| {
            let appended = h
                .acc
                .append(&tp, 0, None, Some(b"value"), &[], h.now)
                .expect("append");
            (appended.completion, appended.index)
        })
        .collect()
}

/// (request, base sequence, record count) of the one batch each Produce action carries.
fn sent_batches(actions: &[Action]) -> Vec<(RequestId, i32, i32)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Produce {
                request, batches, ..
            } => {
                let (_, batch) = batches.first()?;
                Some((*request, batch.base_sequence(), batch.record_count()))
            }
            _ => None,
        })
        .collect()
}

/// The offset each record resolved to (`None`: not resolved or failed).
fn offsets(records: &[(Arc<BatchCompletion>, i32)]) -> Vec<Option<i64>> {
    records
        .iter()
        .map(|(completion, index)| {
            let (outcome, local) = completion.record_outcome(*index)?;
            outcome.ok().map(|ack| ack.base_offset + i64::from(local))
        })
        .collect()
}

#[test]
fn a_batch_rejected_as_too_large_is_split_and_keeps_its_sequences() {
    let mut h = Harness::new();
    // Producer id 0 is an id like any other (only a negative one means "none").
    h.give_identity(0, 0);
    let records = send_records(&mut h, 5);
    let sent = sent_batches(&h.poll());
    assert_eq!(sent, vec![(sent[0].0, 0, 5)]);
    h.answer(sent[0].0, &[(0, ErrorCode::MESSAGE_TOO_LARGE, -1)]);
    assert_eq!(h.engine.counters().batch_splits, 1);
    // The halves go out in order, from the rejected batch's base sequence.
    let first = sent_batches(&h.poll());
    assert_eq!(first, vec![(first[0].0, 0, 2)]);
    h.answer(first[0].0, &[(0, ErrorCode::NONE, 100)]);
    let second = sent_batches(&h.poll());
    assert_eq!(second, vec![(second[0].0, 2, 3)]);
    h.answer(second[0].0, &[(0, ErrorCode::NONE, 200)]);
    assert_eq!(
        offsets(&records),
        vec![Some(100), Some(101), Some(200), Some(201), Some(202)]
    );
    let counters = h.engine.counters();
    assert_eq!((counters.records_acked, counters.epoch_bumps), (5, 0));
    assert_eq!(h.acc.buffered_bytes(), 0, "the parts' memory is released");
}

#[test]
fn halves_still_too_large_are_split_again_down_to_single_records() {
    let mut h = Harness::new();
    h.give_identity(1, 0);
    let records = send_records(&mut h, 3);
    let mut rejected = 0;
    // The broker rejects everything: 3 → 1 + 2 → 1 + 1; each single record fails.
    for _ in 0..10 {
        for (request, _, _) in sent_batches(&h.poll()) {
            h.answer(request, &[(0, ErrorCode::MESSAGE_TOO_LARGE, -1)]);
            rejected += 1;
        }
    }
    assert_eq!(h.engine.counters().batch_splits, 2);
    assert_eq!(
        rejected, 5,
        "3 records, 2 splits, 3 single records rejected"
    );
    for (completion, index) in &records {
        let (outcome, _) = completion.record_outcome(*index).expect("resolved");
        let error = outcome.expect_err("too large alone");
        assert_eq!(error.code(), Some(ErrorCode::MESSAGE_TOO_LARGE));
        assert!(!error.is_indeterminate());
    }
}

#[test]
fn batches_in_flight_behind_a_split_one_follow_its_halves() {
    let mut h = Harness::new();
    h.give_identity(1, 0);
    // One acknowledged batch, so that the partition pipelines (KAFKA-15591).
    send_records(&mut h, 1);
    let opener = sent_batches(&h.poll());
    h.answer(opener[0].0, &[(0, ErrorCode::NONE, 10)]);
    let big = send_records(&mut h, 4);
    let big_sent = sent_batches(&h.poll());
    let later = send_records(&mut h, 1);
    let later_sent = sent_batches(&h.poll());
    assert_eq!(
        (big_sent[0].1, later_sent[0].1),
        (1, 5),
        "both in flight at once"
    );
    h.answer(big_sent[0].0, &[(0, ErrorCode::MESSAGE_TOO_LARGE, -1)]);
    // The broker still expects sequence 1: the later batch is out of order, and waits.
    h.answer(
        later_sent[0].0,
        &[(0, ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER, -1)],
    );
    let mut order = Vec::new();
    let mut offset = 20;
    for _ in 0..6 {
        for (request, sequence, count) in sent_batches(&h.poll()) {
            order.push((sequence, count));
            h.answer(request, &[(0, ErrorCode::NONE, offset)]);
            offset += 10;
        }
    }
    assert_eq!(
        order,
        vec![(1, 2), (3, 2), (5, 1)],
        "halves first, then the later batch"
    );
    assert_eq!(offsets(&big), vec![Some(20), Some(21), Some(30), Some(31)]);
    assert_eq!(offsets(&later), vec![Some(40)]);
    assert_eq!(h.engine.counters().epoch_bumps, 0);
}

#[test]
fn a_batch_that_may_be_in_the_log_is_not_split_but_indeterminate() {
    let mut h = Harness::new();
    h.give_identity(1, 0);
    let records = send_records(&mut h, 4);
    let sent = sent_batches(&h.poll());
    // The first attempt's answer is lost: it may be in the log.
    h.fail(sent[0].0, true);
    h.now += 50; // past the retry backoff
    let retry = sent_batches(&h.poll());
    assert_eq!(retry[0].1, 0, "the same batch, same sequence (P2)");
    h.answer(retry[0].0, &[(0, ErrorCode::MESSAGE_TOO_LARGE, -1)]);
    assert_eq!(h.engine.counters().batch_splits, 0);
    for (completion, index) in &records {
        let (outcome, _) = completion.record_outcome(*index).expect("resolved");
        assert!(outcome.expect_err("not delivered").is_indeterminate());
    }
}

#[test]
fn a_request_no_broker_version_can_carry_fails_the_producer_not_retried() {
    let mut h = Harness::new();
    h.give_identity(1, 0);
    let records = send_records(&mut h, 2);
    let sent = sent_batches(&h.poll());
    // What the driver answers for zstd batches and a broker older than Produce v7.
    let error = Error::Broker {
        code: ErrorCode::UNSUPPORTED_VERSION,
        message: Some("compression.type=zstd needs Produce v7".into()),
    };
    h.engine.handle(
        Event::RequestFailed {
            request: sent[0].0,
            written: false,
            error,
        },
        h.now,
        &h.acc,
    );
    assert!(h.engine.fatal_error().is_some());
    for (completion, index) in &records {
        let (outcome, _) = completion.record_outcome(*index).expect("resolved");
        let error = outcome.expect_err("not sent");
        assert!(error.is_fatal() && !error.is_indeterminate(), "{error:?}");
        assert_eq!(error.code(), Some(ErrorCode::UNSUPPORTED_VERSION));
    }
    h.now += 1_000;
    assert!(sent_batches(&h.poll()).is_empty(), "nothing is retried");
}
