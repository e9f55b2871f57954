//! Scripted scenarios for the transactional flow: the engine and its transaction manager
//! against a scripted coordinator.

use super::*;
use crate::engine::transaction::{TxnCall, TxnRequest, TxnResponse, TxnState};
use crate::types::{ConsumerGroupMetadata, CoordinatorKey, OffsetToCommit};

fn transactional_harness() -> Harness {
    transactional_harness_with(|_| {})
}

/// [`transactional_harness`] with its engine's settings changed by `change`.
fn transactional_harness_with(change: impl FnOnce(&mut EngineConfig)) -> Harness {
    Harness::configured(|config| {
        config.transaction = Some(TransactionConfig {
            transactional_id: "t-1".into(),
            timeout_ms: 60_000,
            call_timeout_ms: 10_000,
        });
        change(config);
    })
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

/// A transactional producer initialised against a transactions-v1 coordinator, inside a
/// transaction.
fn v1_in_transaction() -> Harness {
    let mut h = transactional_harness();
    init(&mut h, false);
    h.engine.begin_transaction(h.now).unwrap();
    h
}

#[test]
fn calls_in_the_wrong_state_send_nothing() {
    let mut h = transactional_harness();
    assert!(h.engine.begin_transaction(h.now).is_err());
    // Named as what it is: a call in the wrong state (not "abort needed").
    let commit = h.engine.start_call(TxnCall::Commit, 0);
    assert!(
        matches!(&commit, Err(Error::InvalidState(why)) if why.starts_with("commit_transaction in state")),
        "{commit:?}"
    );
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
    let mut h = v1_in_transaction();
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
    assert!(
        !h.engine.transactions_v2(),
        "the coordinator did not finalize v2"
    );
}

/// A coordinator request answered is no longer awaited (no wake-up for its timeout), and an
/// answer or a failure for a request the engine does not await (never sent, or already given
/// up) changes nothing: no call ends, no state moves.
#[test]
fn answers_to_requests_not_awaited_are_ignored() {
    let mut h = transactional_harness();
    init(&mut h, true);
    assert!(h.engine.transactions_v2());
    assert_eq!(h.engine.next_wakeup(h.now, &h.acc), None);
    h.engine.begin_transaction(h.now).unwrap();
    let commit = h.engine.start_call(TxnCall::Commit, h.now).unwrap();
    let stranger = RequestId::MAX;
    let ended = TxnResponse::EndTxn {
        error: ErrorCode::NONE,
        identity: None,
    };
    answer_txn(&mut h, stranger, ended);
    h.fail(stranger, true);
    assert!(
        h.engine.take_finished_calls().is_empty(),
        "{commit:?} goes on"
    );
    assert_ne!(h.engine.transaction_state(), Some(&TxnState::Ready));
}

/// A coordinator request awaiting its answer wakes the engine at its `request.timeout.ms`
/// (300 ms here), before the batch waiting for it expires (1 s), so an answer that never
/// comes is given up on and the request sent again in time.
#[test]
fn a_coordinator_request_in_flight_wakes_the_engine_at_its_request_timeout() {
    let mut h = v1_in_transaction();
    h.now = 100;
    h.send(0);
    let Some((_, TxnRequest::AddPartitions { .. })) = coordinator_request_now(&mut h) else {
        panic!("AddPartitionsToTxn expected")
    };
    assert_eq!(h.engine.next_wakeup(h.now, &h.acc), Some(100 + 300));
}

/// A coordinator call refused again and again waits longer each time: `retry.backoff.ms`
/// doubling per attempt up to `retry.backoff.max.ms`, within the ±20% jitter (KIP-580).
#[test]
fn a_call_refused_again_backs_off_exponentially() {
    let mut h = transactional_harness_with(|c| {
        c.retry_backoff_ms = 100;
        c.retry_backoff_max_ms = 1_000;
    });
    init(&mut h, true);
    h.engine.begin_transaction(h.now).unwrap();
    h.send(0);
    let sent = produces(&h.poll());
    h.answer(sent[0].0, &[(0, ErrorCode::NONE, 0)]);
    h.engine.start_call(TxnCall::Commit, h.now).unwrap();
    for base in [100, 200, 400, 800, 1_000] {
        end_txn_answered_loading(&mut h);
        let wake = h.engine.next_wakeup(h.now, &h.acc).expect("a retry");
        let delay = wake - h.now;
        assert!(
            (base - base / 5..=base + base / 5).contains(&delay),
            "{delay} ms after attempt of base {base}"
        );
        h.now = wake;
    }
}

/// The engine wakes for a commit's retry though another of the manager's times (here the
/// last AddPartitionsToTxn retry time, reached in this very millisecond) is not in the future.
#[test]
fn a_commit_retry_is_woken_for_beside_a_time_already_reached() {
    let mut h = v1_in_transaction();
    h.send(0);
    let Some((add, TxnRequest::AddPartitions { .. })) = coordinator_request_now(&mut h) else {
        panic!("AddPartitionsToTxn expected")
    };
    h.fail(add, true);
    // Sent again once retry.backoff.ms (10) passed, and answered in the same millisecond.
    h.now += 10;
    let Some((add, TxnRequest::AddPartitions { partitions, .. })) = coordinator_request_now(&mut h)
    else {
        panic!("AddPartitionsToTxn sent again")
    };
    let added = partitions
        .into_iter()
        .map(|tp| (tp, ErrorCode::NONE))
        .collect();
    answer_txn(&mut h, add, TxnResponse::AddPartitions(added));
    let sent = produces(&h.poll());
    h.answer(sent[0].0, &[(0, ErrorCode::NONE, 0)]);
    h.engine.start_call(TxnCall::Commit, h.now).unwrap();
    end_txn_answered_loading(&mut h);
    let wake = h.engine.next_wakeup(h.now, &h.acc);
    assert!(
        wake.is_some_and(|t| (h.now + 8..=h.now + 12).contains(&t)),
        "woken at {wake:?} for the retry after {} ms",
        h.now
    );
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
    let metrics = h.engine.metrics();
    assert_eq!(
        (metrics.transactions_committed, metrics.transactions_aborted),
        (1, 0)
    );
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
    let ledger = h.engine.transaction_ledger().unwrap();
    assert_eq!(
        (ledger.state, ledger.begun, ledger.last_ended),
        (TxnState::Committing, 1, None)
    );
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
    // The ledger says so before the outcome is collected (what a caller that lost track of
    // the call reads).
    assert_eq!(
        h.engine.transaction_ledger().unwrap().last_ended,
        Some((1, true))
    );
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

/// The ledger numbers the transactions begun and says how the last one ended: an abort too.
#[test]
fn the_ledger_numbers_transactions_and_keeps_how_the_last_ended() {
    let mut h = transactional_harness();
    init(&mut h, true);
    assert_eq!(h.engine.transaction_ledger().unwrap().begun, 0);
    h.engine.begin_transaction(h.now).unwrap();
    // Nothing sent in it: the abort ends it locally.
    let abort = h.engine.start_call(TxnCall::Abort, h.now).unwrap();
    h.poll();
    assert_finished_ok(&mut h, abort);
    let ledger = h.engine.transaction_ledger().unwrap();
    assert_eq!(
        (ledger.state, ledger.begun, ledger.last_ended),
        (TxnState::Ready, 1, Some((1, false)))
    );
    let metrics = h.engine.metrics();
    assert_eq!(
        (metrics.transactions_committed, metrics.transactions_aborted),
        (0, 1)
    );
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
    // Committing again is refused with what made the transaction abortable; any other call
    // but an abort is refused as a call in the wrong state.
    let again = h.engine.start_call(TxnCall::Commit, h.now);
    assert!(
        matches!(&again, Err(e) if e.code() == Some(ErrorCode::INVALID_TXN_STATE)),
        "{again:?}"
    );
    let init = h.engine.start_call(TxnCall::Init, h.now);
    assert!(
        matches!(&init, Err(Error::InvalidState(why)) if why.contains("in state")),
        "{init:?}"
    );
}

/// An answer of the wrong kind for the step (a coordinator bug, or a confused connection)
/// is not taken as progress: the step is sent again after the retry backoff.
#[test]
fn an_unexpected_coordinator_answer_retries_the_step_after_the_backoff() {
    let mut h = transactional_harness();
    h.engine.start_call(TxnCall::Init, h.now).unwrap();
    let find = h.poll();
    let Some(Action::FindCoordinator { request, .. }) = find.first() else {
        panic!("{find:?}")
    };
    answer_txn(
        &mut h,
        *request,
        TxnResponse::EndTxn {
            error: ErrorCode::NONE,
            identity: None,
        },
    );
    assert!(h.poll().is_empty(), "not at once");
    // The backoff: 10 ms, give or take a fifth.
    assert!(h.advance(7).is_empty(), "not before the backoff");
    let again = h.advance(5);
    assert!(
        matches!(again.first(), Some(Action::FindCoordinator { .. })),
        "{again:?}"
    );
}

/// Transactions v1: a batch whose request is still out when the abort starts, and which
/// expires once that request times out, makes the transaction abortable again while the
/// abort drains; the abort must still bump the epoch (KIP-360) before the next
/// transaction, or the timed-out request, if it reaches the broker late, lands in the next
/// transaction (same epoch, the next sequence). Found by the simulation's copy loop.
#[test]
fn v1_abort_bumps_the_epoch_when_a_batch_expires_while_it_drains() {
    let mut h = v1_in_transaction();
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

/// Starts `send_offsets_to_transaction` for offset 5 of `in`-0 in group `group_id` and answers
/// its AddOffsetsToTxn (transactions v1); returns the call.
fn send_offsets_past_add_offsets(h: &mut Harness, group_id: &str) -> CallId {
    let group = ConsumerGroupMetadata::new(group_id, 3, "m-1", None);
    let offsets = vec![OffsetToCommit::new(TopicPartition::new("in", 0), 5)];
    let call = h
        .engine
        .start_call(TxnCall::SendOffsets { offsets, group }, h.now)
        .unwrap();
    let Some((request, TxnRequest::AddOffsets { .. })) = coordinator_request_now(h) else {
        panic!("AddOffsetsToTxn first");
    };
    answer_txn(h, request, TxnResponse::AddOffsets(ErrorCode::NONE));
    call
}

/// Offsets refused because the member's generation is gone end the call with that error
/// at once: the zombie's offsets are not retried (T3), and the transaction is left to abort.
#[test]
fn offsets_refused_for_a_stale_generation_end_the_call() {
    let mut h = v1_in_transaction();
    let call = send_offsets_past_add_offsets(&mut h, "g");
    let Some((request, TxnRequest::TxnOffsetCommit { .. })) = coordinator_request_now(&mut h)
    else {
        panic!("TxnOffsetCommit next");
    };
    let stale = vec![(TopicPartition::new("in", 0), ErrorCode::ILLEGAL_GENERATION)];
    answer_txn(&mut h, request, TxnResponse::TxnOffsetCommit(stale));
    let finished = h.engine.take_finished_calls();
    let [(id, Err(error))] = finished.as_slice() else {
        panic!("{finished:?}")
    };
    assert_eq!(*id, call);
    assert_eq!(error.code(), Some(ErrorCode::ILLEGAL_GENERATION));
}

/// A TxnOffsetCommit whose answer is lost (its group coordinator died) is sent again to the
/// group coordinator looked up anew, not to the same broker until max.block.ms. Found against
/// a real cluster: the copy loop's offsets went to a killed broker for three minutes while
/// its group had moved to another.
#[test]
fn a_lost_txn_offset_commit_looks_the_group_coordinator_up_again() {
    let mut h = v1_in_transaction();
    send_offsets_past_add_offsets(&mut h, "g");
    let brokers_asked = |actions: Vec<Action>, h: &mut Harness, answer: BrokerId| {
        let mut commits = Vec::new();
        for action in actions {
            match action {
                Action::FindCoordinator { request, .. } => {
                    answer_txn(h, request, TxnResponse::Coordinator(answer))
                }
                Action::Coordinator {
                    request,
                    broker,
                    body: TxnRequest::TxnOffsetCommit { .. },
                } => commits.push((request, broker)),
                _ => {}
            }
        }
        commits
    };
    let mut commits = Vec::new();
    for _ in 0..3 {
        let actions = h.poll();
        commits.extend(brokers_asked(actions, &mut h, 1));
    }
    let [(request, 1)] = commits[..] else {
        panic!("{commits:?}")
    };
    h.fail(request, true);
    let mut commits = Vec::new();
    for _ in 0..50 {
        let actions = h.advance(100);
        commits.extend(brokers_asked(actions, &mut h, 2));
        if !commits.is_empty() {
            break;
        }
    }
    assert_eq!(
        commits
            .iter()
            .map(|(_, broker)| *broker)
            .collect::<Vec<_>>(),
        vec![2],
        "sent to the coordinator found again"
    );
}

/// A TxnOffsetCommit answered NOT_COORDINATOR looks the group coordinator up again after the
/// retry backoff (KIP-580), not at once.
#[test]
fn offsets_refused_by_a_moved_coordinator_wait_the_backoff() {
    let mut h = v1_in_transaction();
    send_offsets_past_add_offsets(&mut h, "g");
    let Some((request, TxnRequest::TxnOffsetCommit { .. })) = coordinator_request_now(&mut h)
    else {
        panic!("TxnOffsetCommit next");
    };
    let moved = vec![(TopicPartition::new("in", 0), ErrorCode::NOT_COORDINATOR)];
    answer_txn(&mut h, request, TxnResponse::TxnOffsetCommit(moved));
    let refused_at = h.now;
    let mut looked_up_at = None;
    for _ in 0..50 {
        let lookup = h
            .poll()
            .iter()
            .any(|a| matches!(a, Action::FindCoordinator { .. }));
        if lookup {
            looked_up_at = Some(h.now);
            break;
        }
        h.now += 1;
    }
    let waited = looked_up_at.expect("looked up again") - refused_at;
    // retry.backoff.ms 10 with ±20% jitter.
    assert!(
        (8..=12).contains(&waited),
        "looked up again after {waited} ms"
    );
}

/// The group coordinator found for one group is not taken for another: offsets of a second
/// group in the same transaction go to the coordinator looked up for that group.
#[test]
fn offsets_of_another_group_go_to_its_own_coordinator() {
    let mut h = v1_in_transaction();
    let mut looked_up = Vec::new();
    for (group_id, coordinator) in [("g", 1), ("h", 2)] {
        let call = send_offsets_past_add_offsets(&mut h, group_id);
        let mut committed_to = None;
        for _ in 0..3 {
            for action in h.poll() {
                match action {
                    Action::FindCoordinator { request, key } => {
                        looked_up.push(key);
                        answer_txn(&mut h, request, TxnResponse::Coordinator(coordinator));
                    }
                    Action::Coordinator {
                        request,
                        broker,
                        body: TxnRequest::TxnOffsetCommit { .. },
                    } => {
                        committed_to = Some(broker);
                        let done = vec![(TopicPartition::new("in", 0), ErrorCode::NONE)];
                        answer_txn(&mut h, request, TxnResponse::TxnOffsetCommit(done));
                    }
                    _ => {}
                }
            }
        }
        assert_eq!(committed_to, Some(coordinator), "group {group_id}");
        let finished = h.engine.take_finished_calls();
        assert!(
            matches!(finished.as_slice(), [(id, Ok(()))] if *id == call),
            "{finished:?}"
        );
    }
    assert_eq!(
        looked_up,
        [
            CoordinatorKey::Group("g".into()),
            CoordinatorKey::Group("h".into())
        ]
    );
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

/// Takes the EndTxn the running commit sends now and answers it COORDINATOR_LOAD_IN_PROGRESS
/// (retriable: the commit goes again after its backoff).
fn end_txn_answered_loading(h: &mut Harness) {
    let Some((end, TxnRequest::EndTxn { .. })) = coordinator_request_now(h) else {
        panic!("EndTxn expected")
    };
    let loading = TxnResponse::EndTxn {
        error: ErrorCode::COORDINATOR_LOAD_IN_PROGRESS,
        identity: None,
    };
    answer_txn(h, end, loading);
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
    assert_eq!(h.engine.metrics().transactions_aborted, 1);
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
    let mut h = v1_in_transaction();
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

/// Transactions v1: an AddPartitionsToTxn whose connection failed is sent again to the
/// coordinator looked up anew, but only after `retry.backoff.ms` (KIP-580), not in a loop
/// against a coordinator that just dropped the connection.
#[test]
fn v1_a_failed_add_partitions_waits_the_retry_backoff_before_it_is_sent_again() {
    let mut h = v1_in_transaction();
    h.send(0);
    let Some((add, TxnRequest::AddPartitions { .. })) = coordinator_request_now(&mut h) else {
        panic!("AddPartitionsToTxn expected")
    };
    h.fail(add, true);
    let failed_at = h.now;
    let backoff = h.engine.config().retry_backoff_ms;
    let mut sent_again_at = None;
    for _ in 0..2 * backoff {
        if let Some((_, TxnRequest::AddPartitions { .. })) = coordinator_request_now(&mut h) {
            sent_again_at = Some(h.now);
            break;
        }
        h.now += 1;
    }
    assert_eq!(sent_again_at, Some(failed_at + backoff));
}

/// Transactions v1: an AddPartitionsToTxn refused with CONCURRENT_TRANSACTIONS (the previous
/// transaction still completing) is retried 20 ms later: the driver is woken then.
#[test]
fn v1_a_concurrent_transactions_refusal_wakes_the_driver_20_ms_later() {
    let mut h = v1_in_transaction();
    h.send(0);
    let Some((add, TxnRequest::AddPartitions { .. })) = coordinator_request_now(&mut h) else {
        panic!("AddPartitionsToTxn expected")
    };
    h.now = 1_000;
    let refused = vec![(
        TopicPartition::new(T0, 0),
        ErrorCode::CONCURRENT_TRANSACTIONS,
    )];
    answer_txn(&mut h, add, TxnResponse::AddPartitions(refused));
    assert_eq!(h.engine.next_wakeup(h.now, &h.acc), Some(1_020));
}

#[test]
fn kip_588_a_transaction_the_coordinator_timed_out_is_abortable_and_recovers() {
    let mut h = v1_in_transaction();
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
    // The coordinator's abort is counted once, when the producer learns it is over.
    assert_eq!(h.engine.metrics().transactions_aborted, 1);
}

/// A transactional producer (transactions v2) inside a transaction whose batches linger a
/// minute, with one record of partition 0 waiting in its open batch.
fn lingering_record_in_transaction() -> Harness {
    let mut h = transactional_harness();
    h.acc = Accumulator::new(AccumulatorConfig {
        linger_ms: 60_000,
        ..h.acc.config().clone()
    });
    init(&mut h, true);
    h.engine.begin_transaction(h.now).unwrap();
    h.send(0);
    assert!(produces(&h.poll()).is_empty(), "the batch lingers");
    h
}

/// `commit_transaction` sends what lingers at once instead of waiting out `linger.ms`, as
/// `flush` does; adding offsets to the transaction is no reason to close a batch early.
#[test]
fn a_commit_sends_lingering_batches_at_once_and_adding_offsets_does_not() {
    let mut h = lingering_record_in_transaction();
    h.engine.start_call(TxnCall::Commit, h.now).unwrap();
    assert_eq!(produces(&h.poll()).len(), 1, "the commit flushes");

    let mut h = lingering_record_in_transaction();
    let group = ConsumerGroupMetadata::new("g", 3, "m-1", None);
    let offsets = vec![OffsetToCommit::new(TopicPartition::new("in", 0), 5)];
    h.engine
        .start_call(TxnCall::SendOffsets { offsets, group }, h.now)
        .unwrap();
    assert!(produces(&h.poll()).is_empty(), "the batch still lingers");
}

/// A call whose deadline (`max.block.ms`) comes before its request's `request.timeout.ms`
/// wakes the driver at the deadline and ends there, not when the request times out (P9).
#[test]
fn a_call_ends_at_its_deadline_before_its_requests_timeout() {
    let mut h = transactional_harness_with(|config| config.request_timeout_ms = 30_000);
    let commit = commit_one_record(&mut h, true);
    let deadline = h.now + 10_000;
    let Some((_, TxnRequest::EndTxn { .. })) = coordinator_request_now(&mut h) else {
        panic!("EndTxn expected")
    };
    assert_eq!(h.engine.next_wakeup(h.now, &h.acc), Some(deadline));
    h.now = deadline;
    h.poll();
    let finished = h.engine.take_finished_calls();
    assert!(
        matches!(finished.as_slice(), [(id, Err(Error::Timeout(_)))] if *id == commit),
        "{finished:?}"
    );
    // Called again (T1), the commit has a deadline and an id of its own.
    let again = h.engine.start_call(TxnCall::Commit, h.now).unwrap();
    assert_eq!(h.engine.next_wakeup(h.now, &h.acc), Some(deadline + 10_000));
    h.now = deadline + 10_000;
    h.poll();
    h.engine.take_finished_calls();
    let third = h.engine.start_call(TxnCall::Commit, h.now).unwrap();
    assert!(
        commit != again && again != third && commit != third,
        "{commit:?} {again:?} {third:?}"
    );
}

/// KIP-588, seen by a commit: an EndTxn refused for its epoch after the transaction outlived
/// `transaction.timeout.ms` means the coordinator aborted it. The commit fails abortable,
/// not fatal, and the abort re-initialises with the producer's current identity.
#[test]
fn kip_588_a_commit_refused_for_its_epoch_after_the_timeout_is_abortable() {
    let mut h = transactional_harness();
    init(&mut h, true);
    h.engine.begin_transaction(h.now).unwrap();
    h.send(0);
    let sent = produces(&h.poll());
    h.answer(sent[0].0, &[(0, ErrorCode::NONE, 0)]);
    h.now += 61_000;
    let commit = h.engine.start_call(TxnCall::Commit, h.now).unwrap();
    let Some((end, TxnRequest::EndTxn { .. })) = coordinator_request_now(&mut h) else {
        panic!("EndTxn expected")
    };
    let refused = TxnResponse::EndTxn {
        error: ErrorCode::INVALID_PRODUCER_EPOCH,
        identity: None,
    };
    answer_txn(&mut h, end, refused);
    let finished = h.engine.take_finished_calls();
    let [(id, Err(error))] = finished.as_slice() else {
        panic!("{finished:?}")
    };
    assert_eq!(*id, commit);
    assert!(error.is_abortable() && !error.is_fatal(), "{error}");
    let abort = h.engine.start_call(TxnCall::Abort, h.now).unwrap();
    let Some((init, TxnRequest::InitProducerId { current: Some(_) })) =
        coordinator_request_now(&mut h)
    else {
        panic!("InitProducerId with the current identity expected")
    };
    answer_init_producer_id(&mut h, init, 2, true);
    assert_finished_ok(&mut h, abort);
}

/// An EndTxn retried after a lost answer and refused with a retriable error is retried
/// again, as any EndTxn: only INVALID_TXN_STATE after a lost answer leaves the outcome unknown.
/// Then INVALID_TXN_STATE: the transaction is no longer open, and which way it ended is not
/// said, so the commit fails fatally instead of claiming it committed (T4).
#[test]
fn an_end_txn_retried_after_a_lost_answer_takes_retriable_errors_as_any_other() {
    let mut h = transactional_harness();
    let commit = commit_one_record(&mut h, true);
    let end = next_end_txn(&mut h);
    h.fail(end, true);
    let end = next_end_txn(&mut h);
    let loading = TxnResponse::EndTxn {
        error: ErrorCode::COORDINATOR_LOAD_IN_PROGRESS,
        identity: None,
    };
    answer_txn(&mut h, end, loading);
    assert!(h.engine.take_finished_calls().is_empty(), "retried");
    let end = next_end_txn(&mut h);
    let closed = TxnResponse::EndTxn {
        error: ErrorCode::INVALID_TXN_STATE,
        identity: None,
    };
    answer_txn(&mut h, end, closed);
    let finished = h.engine.take_finished_calls();
    let [(id, Err(error))] = finished.as_slice() else {
        panic!("{finished:?}")
    };
    assert_eq!(*id, commit);
    let report = crate::error::ErrorChain(error).to_string();
    assert!(
        error.is_fatal() && report.contains("lost answer"),
        "{report}"
    );
}

/// Under transactions v2 the offsets need no AddOffsetsToTxn (KIP-890: the TxnOffsetCommit
/// adds the group's offsets partition to the transaction itself).
#[test]
fn v2_offsets_go_without_add_offsets() {
    let mut h = transactional_harness();
    init(&mut h, true);
    h.engine.begin_transaction(h.now).unwrap();
    let group = ConsumerGroupMetadata::new("g", 3, "m-1", None);
    let offsets = vec![OffsetToCommit::new(TopicPartition::new("in", 0), 5)];
    h.engine
        .start_call(TxnCall::SendOffsets { offsets, group }, h.now)
        .unwrap();
    let first = coordinator_request_now(&mut h);
    assert!(
        matches!(first, Some((_, TxnRequest::TxnOffsetCommit { .. }))),
        "{first:?}"
    );
}
