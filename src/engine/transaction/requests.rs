//! What goes to the coordinators, step by step: the running call's next request (looking the
//! coordinator up first while it is unknown), partition registration under transactions v1
//! (T2), and how a transaction ends (EndTxn, or nothing when the coordinator cannot hold it
//! open; a KIP-360 epoch bump after a v1 abort).

use super::calls::Step;
use super::{EngineParts, ForEngine, TransactionManager, TxnCall, TxnRequest, TxnState};
use crate::engine::{Action, ProducerIdentity, RequestId};
use crate::error::Error;
use crate::protocol::error_code::ErrorCode;
use crate::types::CoordinatorKey;
use crate::types::{BrokerId, Millis, TopicPartition};

/// What the running call needs from the engine to go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Advance {
    /// Nothing: it waits for an answer or a retry time, or sent its next request.
    Nothing,
    /// A commit waits for every batch of the transaction to be resolved; then the engine
    /// calls [`TransactionManager::commit_flushed`].
    Flush,
    /// An abort waits for the Produce requests in flight; then the engine fails what was not
    /// sent and calls [`TransactionManager::abort_drained`].
    DrainForAbort,
}

impl TransactionManager {
    /// Advances the running call: times it out at its deadline, or sends its next request
    /// once its retry time came.
    pub fn advance(&mut self, now: Millis, parts: &mut EngineParts<'_>) -> Advance {
        if !self.check_deadline(now) {
            return Advance::Nothing;
        }
        let Some(call) = &self.call else {
            return Advance::Nothing;
        };
        if call.outstanding.is_some() || now < call.retry_at {
            return Advance::Nothing;
        }
        let step = call.step.clone();
        let offsets_call = match &call.call {
            TxnCall::SendOffsets { group, offsets } => Some((group.clone(), offsets.clone())),
            _ => None,
        };
        let identity = parts.identity;
        match step {
            Step::InitProducerId { bump } => {
                let current = if bump { identity } else { None };
                self.coordinator_request(TxnRequest::InitProducerId { current }, now, parts);
            }
            Step::Flush => return Advance::Flush,
            // An AddPartitionsToTxn in flight is waited for too: its answer decides whether
            // the EndTxn is needed, and an answer arriving after the abort would mark its
            // partitions added in the next transaction.
            Step::DrainForAbort if self.adding.is_some() => {}
            Step::DrainForAbort => return Advance::DrainForAbort,
            Step::AddOffsets => {
                let (Some(identity), Some((group, _))) = (identity, offsets_call) else {
                    return Advance::Nothing;
                };
                let body = TxnRequest::AddOffsets {
                    identity,
                    group_id: group.group_id,
                };
                self.coordinator_request(body, now, parts);
            }
            Step::FindGroupCoordinator | Step::CommitOffsets => {
                let Some((group, offsets)) = offsets_call else {
                    return Advance::Nothing;
                };
                let request = match (self.group_coordinator.clone(), identity) {
                    (Some((known, broker)), Some(identity)) if known == group.group_id => {
                        self.set_step(Step::CommitOffsets);
                        let body = TxnRequest::TxnOffsetCommit {
                            identity,
                            group,
                            offsets,
                        };
                        self.send_to_coordinator(broker, body, now, parts)
                    }
                    _ => {
                        self.set_step(Step::FindGroupCoordinator);
                        let key = CoordinatorKey::Group(group.group_id);
                        self.find_coordinator(key, now, parts)
                    }
                };
                self.set_outstanding(request);
            }
            Step::EndTxn { commit } => self.send_end_txn(commit, now, parts),
        }
        Advance::Nothing
    }

    /// Commit, once every batch of the transaction is resolved: any failure makes the
    /// transaction abortable instead (T4). `failures` is the producer's count of failed
    /// records now.
    pub fn commit_flushed(
        &mut self,
        failures: u64,
        now: Millis,
        parts: &mut EngineParts<'_>,
    ) -> ForEngine {
        if failures > self.failures_at_begin || self.state == TxnState::AbortableError {
            let cause = self.abort_cause.clone().unwrap_or_else(|| Error::Broker {
                code: ErrorCode::TRANSACTION_ABORTABLE,
                message: Some("a record of the transaction failed; abort it".into()),
            });
            self.state = TxnState::AbortableError;
            self.abort_cause = Some(cause.clone());
            self.bump_after_abort = true;
            self.finish_call(Err(cause));
            return ForEngine::Nothing;
        }
        self.end_or_finish(true, now, parts)
    }

    /// Abort, once nothing of the transaction is in flight and the engine failed what was
    /// not sent; `broke_sequences` says whether a stamped batch was among it (v1 then bumps
    /// the epoch after the abort).
    pub fn abort_drained(
        &mut self,
        broke_sequences: bool,
        now: Millis,
        parts: &mut EngineParts<'_>,
    ) -> ForEngine {
        if broke_sequences {
            self.bump_after_abort = true;
        }
        self.end_or_finish(false, now, parts)
    }

    /// Ends the transaction with EndTxn when the coordinator may hold it open; otherwise
    /// finishes at once (transactions v2: "EndTxn skipped when nothing was sent").
    fn end_or_finish(
        &mut self,
        commit: bool,
        now: Millis,
        parts: &mut EngineParts<'_>,
    ) -> ForEngine {
        if !commit && self.coordinator_aborted {
            self.reinitialise_after_coordinator_abort(now, parts);
            return ForEngine::Nothing;
        }
        if self.may_be_open() {
            self.set_step(Step::EndTxn { commit });
            self.send_end_txn(commit, now, parts);
            ForEngine::Nothing
        } else {
            self.transaction_ended(None, parts)
        }
    }

    fn send_end_txn(&mut self, commit: bool, now: Millis, parts: &mut EngineParts<'_>) {
        if let Some(identity) = parts.identity {
            self.coordinator_request(TxnRequest::EndTxn { identity, commit }, now, parts);
        }
    }

    /// KIP-588: the coordinator aborted the transaction on its timeout and bumped the epoch,
    /// so the abort sends no EndTxn (it would be answered PRODUCER_FENCED) and re-initialises
    /// with the current id and epoch instead.
    pub(super) fn reinitialise_after_coordinator_abort(
        &mut self,
        now: Millis,
        parts: &mut EngineParts<'_>,
    ) {
        self.set_step(Step::InitProducerId { bump: true });
        let current = parts.identity;
        self.coordinator_request(TxnRequest::InitProducerId { current }, now, parts);
    }

    /// The transaction is over: back to Ready, with a new identity when the coordinator gave
    /// one (v2) or after a v1 epoch bump; sequences restart at 0 with any new identity (T2).
    pub(super) fn transaction_ended(
        &mut self,
        new_identity: Option<ProducerIdentity>,
        parts: &mut EngineParts<'_>,
    ) -> ForEngine {
        // The running call says whether an abort ended, not the state: a batch that fails for
        // good while the abort drains (its request timed out, its delivery timeout passed)
        // sets AbortableError again through `make_abortable`, and that abort must still bump
        // (the Java client keeps the aborting state then, `transitionToAbortableError`). Found
        // by the simulation's copy loop under transactions v1: the state check skipped the
        // bump, and a timed-out Produce of the aborted transaction that reached the broker
        // late was appended to the next one (same epoch, the next sequence, the partition
        // added again), which copied the same input again: duplicates under read_committed.
        let aborting = self.call.as_ref().is_some_and(|c| c.call == TxnCall::Abort);
        let bump_v1 = aborting && self.bump_after_abort && !self.v2;
        if aborting {
            parts.metrics.transactions_aborted += 1;
        } else {
            parts.metrics.transactions_committed += 1;
        }
        self.clear_content();
        self.abort_cause = None;
        if bump_v1 {
            // KIP-360: re-initialise with the current id/epoch to get epoch + 1 before any
            // further transaction, so nothing of the aborted one can land later.
            if let Some(call) = &mut self.call {
                call.step = Step::InitProducerId { bump: true };
                call.outstanding = None;
            }
            return ForEngine::Nothing;
        }
        self.bump_after_abort = false;
        self.state = TxnState::Ready;
        self.last_ended = Some((self.begun, !aborting));
        self.finish_call(Ok(()));
        new_identity.map_or(ForEngine::Nothing, ForEngine::AdoptIdentity)
    }

    /// Sends `body` to the transaction coordinator, or, while it is unknown, looks it up first
    /// (the call stays at its step and sends `body` once the coordinator is known).
    pub(super) fn coordinator_request(
        &mut self,
        body: TxnRequest,
        now: Millis,
        parts: &mut EngineParts<'_>,
    ) {
        let request = match self.coordinator {
            Some(coordinator) => self.send_to_coordinator(coordinator, body, now, parts),
            None => {
                let key = CoordinatorKey::Transaction(self.config.transactional_id.clone());
                self.find_coordinator(key, now, parts)
            }
        };
        self.set_outstanding(request);
    }

    fn send_to_coordinator(
        &mut self,
        broker: BrokerId,
        body: TxnRequest,
        now: Millis,
        parts: &mut EngineParts<'_>,
    ) -> RequestId {
        let request = parts.requests.allocate();
        self.in_flight.insert(request, now);
        let adds = matches!(
            body,
            TxnRequest::AddPartitions { .. }
                | TxnRequest::AddOffsets { .. }
                | TxnRequest::TxnOffsetCommit { .. }
        );
        if adds {
            self.unresolved_adds.insert(request);
        }
        parts.actions.push(Action::Coordinator {
            request,
            broker,
            body,
        });
        request
    }

    fn find_coordinator(
        &mut self,
        key: CoordinatorKey,
        now: Millis,
        parts: &mut EngineParts<'_>,
    ) -> RequestId {
        let request = parts.requests.allocate();
        self.in_flight.insert(request, now);
        parts.actions.push(Action::FindCoordinator { request, key });
        request
    }

    fn set_outstanding(&mut self, request: RequestId) {
        if let Some(call) = &mut self.call {
            call.outstanding = Some(request);
            call.attempts += 1;
        }
    }

    /// Transactions v1: whether new partitions may be registered now (inside a transaction,
    /// no AddPartitionsToTxn in flight, its retry time passed).
    pub fn registration_due(&self, now: Millis) -> bool {
        !self.v2
            && matches!(self.state, TxnState::InTransaction | TxnState::Committing)
            && self.adding.is_none()
            && now >= self.add_retry_at
    }

    /// Whether AddPartitionsToTxn confirmed `partition` for this transaction.
    pub fn is_added(&self, partition: &TopicPartition) -> bool {
        self.added.contains(partition)
    }

    /// Transactions v1: sends AddPartitionsToTxn for `missing`, partitions with batches
    /// waiting that the transaction does not have yet (T2), one request at a time.
    pub fn register_partitions(
        &mut self,
        missing: Vec<TopicPartition>,
        identity: ProducerIdentity,
        now: Millis,
        parts: &mut EngineParts<'_>,
    ) {
        // While the coordinator is unknown (it moved), look it up first; the partitions are
        // added on a later poll.
        let request = match self.coordinator {
            Some(coordinator) => {
                let body = TxnRequest::AddPartitions {
                    identity,
                    partitions: missing,
                };
                self.send_to_coordinator(coordinator, body, now, parts)
            }
            None => {
                let key = CoordinatorKey::Transaction(self.config.transactional_id.clone());
                self.find_coordinator(key, now, parts)
            }
        };
        self.adding = Some(request);
    }

    /// Earliest time after `now` the transaction flow wants to run again.
    ///
    /// Each deadline is judged on its own: a past one must not hide a future one (P9). Found
    /// by the simulation, twice: the minimum of a call's retry time and a stale `add_retry_at`
    /// was in the past, so a KIP-360 InitProducerId answered CONCURRENT_TRANSACTIONS was never
    /// retried (regression test `librdkafka_3575_tv1`); and a call whose deadline passed while
    /// its request was outstanding hid its retry time, so the call never timed out (seed
    /// 33056; regression test `call_whose_deadline_passed_in_flight_times_out`, both in
    /// tests/simulation.rs).
    pub fn wakeup(&self, now: Millis) -> Option<Millis> {
        let call = self.call.as_ref().filter(|c| c.outcome.is_none());
        let retry = call.map(|c| c.retry_at);
        let deadline = call.filter(|c| !c.timed_out).map(|c| c.deadline);
        let add = (!self.v2 && self.adding.is_none()).then_some(self.add_retry_at);
        [retry, deadline, add]
            .into_iter()
            .flatten()
            .filter(|&t| t > now)
            .min()
    }
}
