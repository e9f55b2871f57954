//! The transactional producer's flow on top of the idempotent engine (T1–T5, ARCHITECTURE.md):
//! coordinator discovery, InitProducerId with a transactional id, partition registration
//! (transactions v1), offsets, commit and abort, and how batch outcomes feed the state.

use std::collections::BTreeSet;
use std::sync::Arc;

use tracing::{info, warn};

use super::{Engine, Outstanding};
use crate::engine::accumulator::Accumulator;
use crate::engine::partition::{ProducerBatch, WireState};
use crate::engine::transaction::{
    CoordinatorKey, TxnCall, TxnRequest, TxnResponse, TxnState, call_error, is_fatal_txn_error,
    is_retriable_txn_error, needs_new_coordinator,
};
use crate::engine::{Action, ProducerIdentity, RequestId};
use crate::error::{Error, ErrorChain};
use crate::protocol::error_code::ErrorCode;
use crate::reachability::Reachability;
use crate::types::{BrokerId, Millis, TopicPartition};

/// Identifies one transactional call, to match its result.
pub type CallId = u64;

/// The transactional part of the engine's configuration.
#[derive(Debug, Clone)]
pub struct TransactionConfig {
    /// `transactional.id`.
    pub transactional_id: String,
    /// `transaction.timeout.ms`, sent with InitProducerId.
    pub timeout_ms: i32,
    /// How long one call (init, commit, abort, send offsets) may take: `max.block.ms`.
    pub call_timeout_ms: Millis,
}

/// Where a call is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// InitProducerId (first init, or an epoch bump after an abort: KIP-360).
    InitProducerId { bump: bool },
    /// Commit: waiting for every batch of the transaction to be resolved.
    Flush,
    /// Abort: waiting for in-flight batches, then failing what was not sent.
    DrainForAbort,
    /// AddOffsetsToTxn (transactions v1).
    AddOffsets,
    /// Waiting for the group coordinator to be known.
    FindGroupCoordinator,
    /// TxnOffsetCommit to the group coordinator.
    CommitOffsets,
    /// EndTxn.
    EndTxn { commit: bool },
}

#[derive(Debug)]
struct CallProgress {
    id: CallId,
    call: TxnCall,
    step: Step,
    outstanding: Option<RequestId>,
    deadline: Millis,
    retry_at: Millis,
    attempts: u32,
    /// An EndTxn of this call was sent and its answer lost: a retry that finds the
    /// transaction completed the same way is our own write (T4, KAFKA-21062's lesson).
    end_txn_maybe_landed: bool,
    /// A commit or abort whose caller got a timeout: it goes on resolving against the
    /// coordinator, and only the same call is valid until it returns the real outcome (T1,
    /// T4, as the Java client requires: an abort instead could race a commit that landed).
    timed_out: bool,
    /// How a timed-out call ended, kept for the caller who calls it again.
    outcome: Option<Result<(), Error>>,
    /// What last kept the call from going on (a request unanswered, a coordinator not
    /// available), for the error of a call that times out.
    last_error: Option<Error>,
}

impl CallProgress {
    /// Whether a timeout hands the call over to a later call of the same kind instead of
    /// abandoning it: commit and abort, whose outcome the coordinator decides.
    fn outlives_its_caller(&self) -> bool {
        matches!(self.call, TxnCall::Commit | TxnCall::Abort)
    }

    /// What a caller is told while this call waits to be called again.
    fn call_again_error(&self) -> Error {
        Error::InvalidState(format!(
            "{0} timed out; call {0} again to learn how the transaction ended (no other \
             transactional call is valid until then)",
            self.call.name()
        ))
    }
}

/// The transactional state the engine keeps.
#[derive(Debug)]
pub(super) struct Transactions {
    config: TransactionConfig,
    pub state: TxnState,
    pub v2: bool,
    coordinator: Option<BrokerId>,
    group_coordinator: Option<(String, BrokerId)>,
    /// Transactions v1: partitions AddPartitionsToTxn confirmed for this transaction.
    added: BTreeSet<TopicPartition>,
    adding: Option<RequestId>,
    add_retry_at: Millis,
    /// The transaction has something for EndTxn to end (a partition, offsets, or a sent batch).
    pub has_content: bool,
    /// Requests of this transaction that may have added to it on the coordinator and whose
    /// outcome is unknown: transactions v1's AddPartitionsToTxn and AddOffsetsToTxn, and
    /// TxnOffsetCommit, which under transactions v2 adds the offsets partition itself
    /// (KIP-890). A request stays here from its send until an answer says whether it added:
    /// in flight, answer lost or timed out, connection closed after the write, or abandoned by
    /// a call that timed out or was cancelled. Any of them means the coordinator may hold the
    /// transaction open, so it is ended with EndTxn even when nothing was confirmed.
    unresolved_adds: BTreeSet<RequestId>,
    /// Failed records counted when the transaction began, to see whether any of its own failed.
    failures_at_begin: u64,
    /// Why the transaction became abortable.
    abort_cause: Option<Error>,
    /// Transactions v1: the epoch must be bumped after the abort (sequences are broken).
    bump_after_abort: bool,
    /// When `begin_transaction` opened the current transaction: the coordinator's
    /// `transaction.timeout.ms` runs from its first partition, never earlier.
    began_ms: Millis,
    /// The coordinator aborted the current transaction on its timeout and bumped the epoch
    /// (KIP-588): the abort skips EndTxn, which it would answer PRODUCER_FENCED, and
    /// re-initialises with the current id and epoch, which it accepts as ours.
    coordinator_aborted: bool,
    /// Whether the coordinators answer, to log a streak of failed requests once, not per retry.
    coordinator_streak: Reachability,
    call: Option<CallProgress>,
    next_call: CallId,
    finished: Vec<(CallId, Result<(), Error>)>,
}

impl Transactions {
    pub fn new(config: TransactionConfig) -> Self {
        Self {
            config,
            state: TxnState::Uninitialized,
            v2: false,
            coordinator: None,
            group_coordinator: None,
            added: BTreeSet::new(),
            adding: None,
            add_retry_at: 0,
            has_content: false,
            unresolved_adds: BTreeSet::new(),
            failures_at_begin: 0,
            abort_cause: None,
            bump_after_abort: false,
            began_ms: 0,
            coordinator_aborted: false,
            coordinator_streak: Reachability::default(),
            call: None,
            next_call: 1,
            finished: Vec::new(),
        }
    }

    /// How long the open transaction has been open and its timeout, when it has been open
    /// for at least `transaction.timeout.ms` (so the coordinator may have aborted it).
    fn open_beyond_timeout(&self, now: Millis) -> Option<(Millis, Millis)> {
        let open = matches!(
            self.state,
            TxnState::InTransaction
                | TxnState::Committing
                | TxnState::Aborting
                | TxnState::AbortableError
        );
        let open_ms = now.saturating_sub(self.began_ms);
        let timeout_ms = Millis::try_from(self.config.timeout_ms).unwrap_or(0);
        (open && open_ms >= timeout_ms).then_some((open_ms, timeout_ms))
    }

    /// Whether the coordinator may hold this transaction open: something was confirmed in it,
    /// or a request that may have added to it has an unknown outcome.
    ///
    /// The Java client decides the same question with `transactionStarted`, set only when an
    /// AddPartitionsToTxn or AddOffsetsToTxn succeeded (`TransactionManager.nextRequest` skips
    /// the EndTxn otherwise) — but it never has to guess: an add whose connection dropped is
    /// re-enqueued (`TxnRequestHandler.onComplete`), a timed-out `sendOffsetsToTransaction`
    /// only stops the caller's wait, and the add's priority (`ADD_PARTITIONS_OR_OFFSETS`)
    /// keeps it ahead of the EndTxn (`END_TXN`), so the add is resolved before EndTxn is
    /// decided. Here a call that times out abandons its add, so its unknown outcome must count
    /// as "maybe open": finishing locally left the coordinator's transaction open, and the
    /// next transaction silently continued it (found by the simulation's copy loop under
    /// transactions v1: an AddOffsetsToTxn answer lost, then the abort sent no EndTxn).
    fn may_be_open(&self) -> bool {
        self.has_content || !self.unresolved_adds.is_empty()
    }

    /// Nothing of the transaction is left to end: no content, no unresolved add.
    fn clear_content(&mut self) {
        self.added.clear();
        self.has_content = false;
        self.unresolved_adds.clear();
    }

    /// Whether a new batch of `partition` may be stamped and sent now.
    pub fn allows_dispatch(&self, partition: &TopicPartition) -> bool {
        matches!(self.state, TxnState::InTransaction | TxnState::Committing)
            && (self.v2 || self.added.contains(partition))
    }
}

fn failures(counters: &crate::engine::Counters) -> u64 {
    counters.records_failed + counters.records_indeterminate
}

impl Engine {
    /// The transaction state, for a transactional producer.
    pub fn transaction_state(&self) -> Option<&TxnState> {
        self.txn.as_ref().map(|t| &t.state)
    }

    /// Whether the coordinator speaks transactions v2 (KIP-890), once initialised.
    pub fn transactions_v2(&self) -> bool {
        self.txn.as_ref().is_some_and(|t| t.v2)
    }

    /// Whether `send` is allowed now: always for an idempotent producer; inside a transaction
    /// for a transactional one (T1). The error says why not.
    pub fn check_send(&self) -> Result<(), Error> {
        if let Some(fatal) = &self.fatal {
            return Err(fatal.clone());
        }
        let Some(txn) = &self.txn else { return Ok(()) };
        match &txn.state {
            TxnState::InTransaction => Ok(()),
            TxnState::AbortableError => Err(txn
                .abort_cause
                .clone()
                .unwrap_or_else(|| Error::InvalidState("the transaction must be aborted".into()))),
            state => Err(Error::InvalidState(format!(
                "send is only allowed inside a transaction (state {state:?})"
            ))),
        }
    }

    /// `begin_transaction`: Ready → InTransaction, locally (T1).
    pub fn begin_transaction(&mut self, now: Millis) -> Result<(), Error> {
        let failed_so_far = failures(&self.counters);
        let txn = self.txn.as_mut().ok_or_else(|| {
            Error::InvalidState("begin_transaction needs a transactional.id".into())
        })?;
        if let Some(call) = txn.call.as_ref().filter(|c| c.timed_out) {
            return Err(call.call_again_error());
        }
        if txn.state != TxnState::Ready {
            return Err(Error::InvalidState(format!(
                "begin_transaction in state {:?}",
                txn.state
            )));
        }
        txn.state = TxnState::InTransaction;
        txn.began_ms = now;
        txn.coordinator_aborted = false;
        txn.failures_at_begin = failed_so_far;
        txn.clear_content();
        Ok(())
    }

    /// Starts a coordinator call. Fails at once, sending nothing, when the call is not valid
    /// in the current state or another call is running (T1).
    pub fn start_call(&mut self, call: TxnCall, now: Millis) -> Result<CallId, Error> {
        if let Some(fatal) = &self.fatal {
            return Err(fatal.clone());
        }
        let txn = self.txn.as_mut().ok_or_else(|| {
            Error::InvalidState(format!("{} needs a transactional.id", call.name()))
        })?;
        if let Some(running) = &mut txn.call {
            if !running.timed_out {
                return Err(Error::InvalidState(format!(
                    "{} while another transactional call is running",
                    call.name()
                )));
            }
            if running.call != call {
                return Err(running.call_again_error());
            }
            // The same call again: it takes over the one still resolving, with a deadline of
            // its own, or returns how that one ended.
            let id = txn.next_call;
            txn.next_call += 1;
            running.id = id;
            running.timed_out = false;
            running.deadline = now + txn.config.call_timeout_ms;
            if let Some(outcome) = running.outcome.take() {
                txn.call = None;
                txn.finished.push((id, outcome));
            }
            return Ok(id);
        }
        if !call.allowed_in(&txn.state) {
            if call == TxnCall::Commit && txn.state == TxnState::AbortableError {
                return Err(txn
                    .abort_cause
                    .clone()
                    .unwrap_or_else(|| Error::InvalidState("abort needed".into())));
            }
            return Err(Error::InvalidState(format!(
                "{} in state {:?}",
                call.name(),
                txn.state
            )));
        }
        let step = match &call {
            TxnCall::Init => Step::InitProducerId { bump: false },
            TxnCall::Commit => {
                txn.state = TxnState::Committing;
                self.flushing = true;
                Step::Flush
            }
            TxnCall::Abort => {
                txn.state = TxnState::Aborting;
                Step::DrainForAbort
            }
            TxnCall::SendOffsets { .. } if txn.v2 => Step::FindGroupCoordinator,
            TxnCall::SendOffsets { .. } => Step::AddOffsets,
        };
        let id = txn.next_call;
        txn.next_call += 1;
        txn.call = Some(CallProgress {
            id,
            call,
            step,
            outstanding: None,
            deadline: now + txn.config.call_timeout_ms,
            retry_at: now,
            attempts: 0,
            end_txn_maybe_landed: false,
            timed_out: false,
            outcome: None,
            last_error: None,
        });
        Ok(id)
    }

    /// The caller of call `id` stopped waiting (its future was dropped). A commit or abort
    /// goes on as if it had timed out: only the same call is valid next, and it returns the
    /// outcome (T1, T4). Any other call is abandoned, as at its deadline.
    pub fn call_cancelled(&mut self, id: CallId) {
        let Some(txn) = &mut self.txn else { return };
        let Some(call) = txn.call.as_mut().filter(|c| c.id == id && !c.timed_out) else {
            return;
        };
        if call.outlives_its_caller() {
            call.timed_out = true;
        } else {
            self.finish_call(Err(Error::InvalidState(
                "the call was cancelled by its caller".into(),
            )));
        }
    }

    /// Results of calls that finished since the last look.
    pub fn take_finished_calls(&mut self) -> Vec<(CallId, Result<(), Error>)> {
        self.txn
            .as_mut()
            .map(|t| std::mem::take(&mut t.finished))
            .unwrap_or_default()
    }

    /// A sent batch of the transaction failed or its sequence state broke: the transaction
    /// can only be aborted (P5, P7 for transactional producers), and under v1 the epoch must
    /// be bumped after the abort. Returns the error calls get while the state is
    /// AbortableError: it says `is_abortable()`, so an error and the state it leaves agree
    /// (T4; INVALID_TXN_STATE was once returned while the state was
    /// AbortableError).
    pub(super) fn make_abortable(&mut self, cause: Error) -> Option<Error> {
        let txn = self.txn.as_mut()?;
        txn.bump_after_abort = true;
        // From Aborting too: an abort whose EndTxn failed for good must stay retriable by the
        // user (T1), not stuck in Aborting with no call running.
        if matches!(
            txn.state,
            TxnState::InTransaction | TxnState::Committing | TxnState::Aborting
        ) {
            let cause = if cause.is_abortable() {
                cause
            } else {
                Error::Abortable {
                    cause: Arc::new(cause),
                }
            };
            warn!(cause = %ErrorChain(&cause), "transaction is now abortable");
            txn.state = TxnState::AbortableError;
            txn.abort_cause = Some(cause);
        }
        (txn.state == TxnState::AbortableError)
            .then(|| txn.abort_cause.clone())
            .flatten()
    }

    /// PRODUCER_FENCED or INVALID_PRODUCER_EPOCH for our identity inside a transaction. Either
    /// another producer initialised our transactional id (we are a zombie: fatal, T5), or the
    /// coordinator aborted our transaction because it outlived `transaction.timeout.ms`, and
    /// bumped the epoch itself (KIP-588). The second is only possible once the transaction
    /// has been open that long; then it becomes abortable, and the abort re-initialises with
    /// our id and epoch, which the coordinator refuses if another producer initialised since
    /// (it resets the last epoch then). Returns whether the producer goes on.
    pub(super) fn fenced_in_transaction(
        &mut self,
        code: ErrorCode,
        what: &str,
        now: Millis,
        acc: &Accumulator,
    ) -> bool {
        let outlived = self.txn.as_ref().and_then(|t| t.open_beyond_timeout(now));
        let Some((open_ms, timeout_ms)) = outlived else {
            warn!(%code, what, "fenced by a newer producer with the same transactional.id");
            self.fail_fatally(call_error(ErrorCode::PRODUCER_FENCED, what), acc);
            return false;
        };
        if let Some(txn) = &mut self.txn {
            txn.coordinator_aborted = true;
        }
        let message = format!(
            "{what}: {code} after the transaction was open {open_ms} ms, longer than \
             transaction.timeout.ms ({timeout_ms} ms): the coordinator aborted it; \
             abort_transaction re-initialises if the coordinator takes this producer back \
             (KIP-588)"
        );
        self.make_abortable(call_error(code, &message));
        true
    }

    pub(super) fn finish_call(&mut self, result: Result<(), Error>) {
        let Some(txn) = &mut self.txn else { return };
        let Some(call) = &mut txn.call else { return };
        if let Some(request) = call.outstanding.take() {
            self.outstanding.remove(&request);
        }
        if call.timed_out {
            // Nobody waits for it now: kept for the caller who calls it again.
            call.outcome = Some(result);
            return;
        }
        let id = call.id;
        txn.call = None;
        txn.finished.push((id, result));
    }

    fn send_to_coordinator(
        &mut self,
        broker: BrokerId,
        body: TxnRequest,
        now: Millis,
    ) -> RequestId {
        let request = self.next_request_id();
        self.outstanding
            .insert(request, Outstanding::Txn { sent_ms: now });
        let adds = matches!(
            body,
            TxnRequest::AddPartitions { .. }
                | TxnRequest::AddOffsets { .. }
                | TxnRequest::TxnOffsetCommit { .. }
        );
        if adds && let Some(txn) = &mut self.txn {
            txn.unresolved_adds.insert(request);
        }
        self.actions.push(Action::Coordinator {
            request,
            broker,
            body,
        });
        request
    }

    fn find_coordinator(&mut self, key: CoordinatorKey, now: Millis) -> RequestId {
        let request = self.next_request_id();
        self.outstanding
            .insert(request, Outstanding::Txn { sent_ms: now });
        self.actions.push(Action::FindCoordinator { request, key });
        request
    }

    /// Advances the running call and, under transactions v1, registers new partitions.
    pub(super) fn drive_transaction(&mut self, now: Millis, acc: &Accumulator) {
        if self.txn.is_none() || self.fatal.is_some() {
            return;
        }
        self.register_partitions(now);
        let Some(txn) = &mut self.txn else { return };
        let Some(call) = &mut txn.call else { return };
        if call.outcome.is_some() {
            return;
        }
        let detach = call.outlives_its_caller();
        if !call.timed_out && now >= call.deadline && (detach || call.outstanding.is_none()) {
            let mut message = format!(
                "{} did not complete within max.block.ms (at {:?})",
                call.call.name(),
                call.step
            );
            if let Some(last) = &call.last_error {
                message.push_str(&format!("; last error: {}", ErrorChain(last)));
            }
            if !detach {
                self.finish_call(Err(Error::Timeout(message)));
                return;
            }
            // The coordinator decides how the transaction ends, not our deadline: the call goes
            // on in the background and only the same call is valid, which returns the real
            // outcome (T1, T4). Going back to InTransaction let an abort race a commit that
            // had landed, leaving a state no call could leave.
            call.timed_out = true;
            let error = Error::Timeout(format!(
                "{message}; it goes on: call {} again for the outcome",
                call.call.name()
            ));
            txn.finished.push((call.id, Err(error)));
        }
        if call.outstanding.is_some() || now < call.retry_at {
            return;
        }
        let step = call.step.clone();
        let offsets_call = match &call.call {
            TxnCall::SendOffsets { group, offsets } => Some((group.clone(), offsets.clone())),
            _ => None,
        };
        let group_coordinator = txn.group_coordinator.clone();
        let identity = self.identity;
        match step {
            Step::InitProducerId { bump } => {
                let current = if bump { identity } else { None };
                self.coordinator_request(TxnRequest::InitProducerId { current }, now);
            }
            Step::Flush => self.commit_after_flush(now, acc),
            Step::DrainForAbort => {
                // An AddPartitionsToTxn in flight is waited for too: its answer decides whether
                // the EndTxn is needed, and an answer arriving after the abort would mark its
                // partitions added in the next transaction.
                let adding = txn.adding.is_some();
                if adding
                    || self
                        .outstanding
                        .values()
                        .any(|o| matches!(o, Outstanding::Produce { .. }))
                {
                    return;
                }
                self.fail_unsent_for_abort(acc);
                self.end_or_finish(false, now, acc);
            }
            Step::AddOffsets => {
                let (Some(identity), Some((group, _))) = (identity, offsets_call) else {
                    return;
                };
                let body = TxnRequest::AddOffsets {
                    identity,
                    group_id: group.group_id,
                };
                self.coordinator_request(body, now);
            }
            Step::FindGroupCoordinator | Step::CommitOffsets => {
                let Some((group, offsets)) = offsets_call else {
                    return;
                };
                let request = match (group_coordinator, identity) {
                    (Some((known, broker)), Some(identity)) if known == group.group_id => {
                        self.set_step(Step::CommitOffsets);
                        let body = TxnRequest::TxnOffsetCommit {
                            identity,
                            group,
                            offsets,
                        };
                        self.send_to_coordinator(broker, body, now)
                    }
                    _ => {
                        self.set_step(Step::FindGroupCoordinator);
                        self.find_coordinator(CoordinatorKey::Group(group.group_id), now)
                    }
                };
                self.set_outstanding(request);
            }
            Step::EndTxn { commit } => self.send_end_txn(commit, now),
        }
    }

    /// Commit, once every batch of the transaction is resolved: any failure makes the
    /// transaction abortable instead (T4).
    fn commit_after_flush(&mut self, now: Millis, acc: &Accumulator) {
        let abortable = self
            .txn
            .as_ref()
            .is_some_and(|t| t.state == TxnState::AbortableError);
        // Once abortable, nothing more of the transaction goes out, so waiting would never end.
        if !abortable && !self.is_idle(acc) {
            self.flushing = true;
            return;
        }
        let failed_now = failures(&self.counters);
        let Some(txn) = &mut self.txn else { return };
        if failed_now > txn.failures_at_begin || txn.state == TxnState::AbortableError {
            let cause = txn.abort_cause.clone().unwrap_or_else(|| Error::Broker {
                code: ErrorCode::TRANSACTION_ABORTABLE,
                message: Some("a record of the transaction failed; abort it".into()),
            });
            txn.state = TxnState::AbortableError;
            txn.abort_cause = Some(cause.clone());
            txn.bump_after_abort = true;
            self.finish_call(Err(cause));
            return;
        }
        self.end_or_finish(true, now, acc);
    }

    fn set_step(&mut self, step: Step) {
        if let Some(call) = self.txn.as_mut().and_then(|t| t.call.as_mut()) {
            call.step = step;
        }
    }

    fn set_outstanding(&mut self, request: RequestId) {
        if let Some(call) = self.txn.as_mut().and_then(|t| t.call.as_mut()) {
            call.outstanding = Some(request);
            call.attempts += 1;
        }
    }

    /// Ends the transaction with EndTxn when the coordinator may hold it open; otherwise
    /// finishes at once (transactions v2: "EndTxn skipped when nothing was sent").
    fn end_or_finish(&mut self, commit: bool, now: Millis, acc: &Accumulator) {
        let Some(txn) = &mut self.txn else { return };
        if !commit && txn.coordinator_aborted {
            return self.reinitialise_after_coordinator_abort(now);
        }
        if txn.may_be_open() {
            if let Some(call) = &mut txn.call {
                call.step = Step::EndTxn { commit };
            }
            self.send_end_txn(commit, now);
        } else {
            self.transaction_ended(None, acc);
        }
    }

    fn send_end_txn(&mut self, commit: bool, now: Millis) {
        if let Some(identity) = self.identity {
            self.coordinator_request(TxnRequest::EndTxn { identity, commit }, now);
        }
    }

    /// Sends `body` to the transaction coordinator, or, while it is unknown, looks it up first
    /// (the call stays at its step and sends `body` once the coordinator is known).
    fn coordinator_request(&mut self, body: TxnRequest, now: Millis) {
        let Some(txn) = &self.txn else { return };
        let request = match txn.coordinator {
            Some(coordinator) => self.send_to_coordinator(coordinator, body, now),
            None => {
                let key = CoordinatorKey::Transaction(txn.config.transactional_id.clone());
                self.find_coordinator(key, now)
            }
        };
        self.set_outstanding(request);
    }

    /// Abort: records that never went out fail as aborted; stamped ones that are certainly not
    /// in the log too (their sequences are then broken, so v1 bumps the epoch after the abort).
    /// A batch whose outcome is unknown is failed as indeterminate: if it landed, the abort
    /// marker hides it from read_committed readers.
    fn fail_unsent_for_abort(&mut self, acc: &Accumulator) {
        let mut broke_sequences = false;
        let mut doomed: Vec<(ProducerBatch, Error)> = Vec::new();
        for state in self.partitions.values_mut() {
            for batch in state.queued.drain(..) {
                doomed.push((batch, Error::TransactionAborted));
            }
            for batch in state.unacked.drain(..) {
                broke_sequences = true;
                let error = if batch.wire == Some(WireState::Unresolved) {
                    // In the log or not, the abort marker hides it from read_committed readers.
                    Error::Indeterminate {
                        cause: std::sync::Arc::new(Error::TransactionAborted),
                    }
                } else {
                    Error::TransactionAborted
                };
                doomed.push((batch, error));
            }
        }
        for (batch, error) in doomed {
            Self::resolve(&mut self.counters, acc, batch, Err(error));
        }
        self.fail_accumulated(acc, &Error::TransactionAborted);
        if broke_sequences && let Some(txn) = &mut self.txn {
            txn.bump_after_abort = true;
        }
    }

    /// The transaction is over: back to Ready, with a new identity when the coordinator gave
    /// one (v2) or after a v1 epoch bump; sequences restart at 0 with any new identity (T2).
    fn transaction_ended(&mut self, new_identity: Option<ProducerIdentity>, acc: &Accumulator) {
        let Some(txn) = &mut self.txn else { return };
        // The running call says whether an abort ended, not the state: a batch that fails for
        // good while the abort drains (its request timed out, its delivery timeout passed)
        // sets AbortableError again through `make_abortable`, and that abort must still bump
        // (the Java client keeps the aborting state then, `transitionToAbortableError`). Found
        // by the simulation's copy loop under transactions v1: the state check skipped the
        // bump, and a timed-out Produce of the aborted transaction that reached the broker
        // late was appended to the next one (same epoch, the next sequence, the partition
        // added again), which copied the same input again: duplicates under read_committed.
        let aborting = txn.call.as_ref().is_some_and(|c| c.call == TxnCall::Abort);
        let bump_v1 = aborting && txn.bump_after_abort && !txn.v2;
        if aborting {
            self.metrics.transactions_aborted += 1;
        } else {
            self.metrics.transactions_committed += 1;
        }
        txn.clear_content();
        txn.abort_cause = None;
        if bump_v1 {
            // KIP-360: re-initialise with the current id/epoch to get epoch + 1 before any
            // further transaction, so nothing of the aborted one can land later.
            if let Some(call) = &mut txn.call {
                call.step = Step::InitProducerId { bump: true };
                call.outstanding = None;
            }
            return;
        }
        txn.bump_after_abort = false;
        txn.state = TxnState::Ready;
        if let Some(identity) = new_identity {
            self.adopt_identity(identity, acc);
        }
        self.finish_call(Ok(()));
    }

    /// Installs an identity the coordinator handed out and restarts every partition's
    /// sequence at 0.
    fn adopt_identity(&mut self, identity: ProducerIdentity, acc: &Accumulator) {
        if self.identity == Some(identity) {
            return;
        }
        if self.identity.is_some() {
            self.counters.epoch_bumps += 1;
        }
        info!(
            producer_id = identity.producer_id,
            epoch = identity.epoch,
            "transactional identity"
        );
        for state in self.partitions.values_mut() {
            for batch in state.reset_for_new_identity() {
                // Nothing is in flight between transactions; a batch here was already decided.
                Self::resolve(
                    &mut self.counters,
                    acc,
                    batch,
                    Err(Error::TransactionAborted),
                );
            }
        }
        self.install_identity(identity);
    }

    /// Transactions v1: sends AddPartitionsToTxn for partitions with batches waiting that the
    /// transaction does not have yet (T2), one request at a time.
    fn register_partitions(&mut self, now: Millis) {
        let Some(txn) = &self.txn else { return };
        if txn.v2 || txn.state != TxnState::InTransaction && txn.state != TxnState::Committing {
            return;
        }
        if txn.adding.is_some() || now < txn.add_retry_at {
            return;
        }
        let Some(identity) = self.identity else {
            return;
        };
        let missing: Vec<TopicPartition> = self
            .partitions
            .iter()
            .filter(|(tp, p)| !p.queued.is_empty() && !txn.added.contains(*tp))
            .map(|(tp, _)| tp.clone())
            .collect();
        if missing.is_empty() {
            return;
        }
        // While the coordinator is unknown (it moved), look it up first; the partitions are
        // added on a later poll.
        let Some(coordinator) = txn.coordinator else {
            let key = CoordinatorKey::Transaction(txn.config.transactional_id.clone());
            let request = self.find_coordinator(key, now);
            if let Some(txn) = &mut self.txn {
                txn.adding = Some(request);
            }
            return;
        };
        let request = self.send_to_coordinator(
            coordinator,
            TxnRequest::AddPartitions {
                identity,
                partitions: missing,
            },
            now,
        );
        if let Some(txn) = &mut self.txn {
            txn.adding = Some(request);
        }
    }

    /// The answer to a coordinator request.
    pub(super) fn on_txn_response(
        &mut self,
        request: RequestId,
        result: Result<TxnResponse, Error>,
        now: Millis,
        acc: &Accumulator,
    ) {
        let Some(txn) = &mut self.txn else { return };
        if txn.adding == Some(request) {
            txn.adding = None;
            return self.on_add_partitions(request, result, now, acc);
        }
        let Some(call) = &mut txn.call else { return };
        if call.outstanding != Some(request) {
            return;
        }
        call.outstanding = None;
        let step = call.step.clone();
        let response = match result {
            Ok(response) => {
                txn.coordinator_streak
                    .log_success("transactional requests to the coordinators");
                response
            }
            Err(error) => {
                // Unanswered: retry the same step after a backoff; an EndTxn may have landed.
                txn.coordinator_streak
                    .log_failure(format_args!("transactional request ({step:?})"), &error);
                call.last_error = Some(error.clone());
                if matches!(step, Step::EndTxn { .. }) {
                    call.end_txn_maybe_landed = true;
                }
                if matches!(
                    step,
                    Step::EndTxn { .. } | Step::InitProducerId { .. } | Step::AddOffsets
                ) {
                    txn.coordinator = None;
                }
                let delay = self.backoff(call_attempts(&self.txn));
                self.retry_call_after(now + delay);
                return;
            }
        };
        match (step, response) {
            (Step::FindGroupCoordinator, TxnResponse::Coordinator(broker)) => {
                if let TxnCall::SendOffsets { group, .. } = &call.call {
                    txn.group_coordinator = Some((group.group_id.clone(), broker));
                }
                call.step = Step::CommitOffsets;
            }
            (_, TxnResponse::Coordinator(broker)) => {
                // The transaction coordinator a step was waiting for; the step goes on.
                txn.coordinator = Some(broker);
            }
            (
                Step::InitProducerId { .. },
                TxnResponse::InitProducerId {
                    error,
                    identity,
                    transactions_v2,
                },
            ) => {
                if error.is_ok() {
                    if std::mem::take(&mut txn.coordinator_aborted) {
                        self.metrics.transactions_aborted += 1;
                    }
                    txn.v2 = transactions_v2;
                    txn.state = TxnState::Ready;
                    txn.bump_after_abort = false;
                    info!(transactions_v2, "transactions initialised");
                    self.adopt_identity(identity, acc);
                    self.finish_call(Ok(()));
                } else {
                    self.on_call_error(error, "InitProducerId", now, acc);
                }
            }
            (Step::AddOffsets, TxnResponse::AddOffsets(error)) => {
                // Answered: added (content from now on) or not added.
                txn.unresolved_adds.remove(&request);
                if error.is_ok() {
                    txn.has_content = true;
                    call.step = Step::FindGroupCoordinator;
                } else {
                    self.on_call_error(error, "AddOffsetsToTxn", now, acc);
                }
            }
            (Step::CommitOffsets, TxnResponse::TxnOffsetCommit(results)) => {
                let worst = results.iter().map(|(_, e)| *e).find(|e| !e.is_ok());
                match worst {
                    None => {
                        // An error answer stays unresolved: under transactions v2 the group
                        // coordinator adds the offsets partition before it validates the
                        // commit, so a refused commit may still have opened the transaction.
                        txn.unresolved_adds.remove(&request);
                        txn.has_content = true;
                        self.finish_call(Ok(()));
                    }
                    Some(code) if needs_new_coordinator(code) => {
                        txn.group_coordinator = None;
                        call.step = Step::FindGroupCoordinator;
                        let delay = self.backoff(call_attempts(&self.txn));
                        self.retry_call_after(now + delay);
                    }
                    Some(code) => self.on_call_error(code, "TxnOffsetCommit", now, acc),
                }
            }
            (Step::EndTxn { commit }, TxnResponse::EndTxn { error, identity }) => {
                let landed_before = call.end_txn_maybe_landed;
                let only_unresolved = !txn.has_content;
                if error.is_ok() {
                    info!(commit, "transaction ended");
                    self.transaction_ended(identity, acc);
                } else if error == ErrorCode::INVALID_TXN_STATE && only_unresolved {
                    // Sent only because an add's outcome was unknown, and no transaction is
                    // open: the coordinator answers INVALID_TXN_STATE then (the table in
                    // Kafka's TransactionCoordinator: under v1 Empty takes no EndTxn and
                    // CompleteCommit / CompleteAbort only the outcome they ended with; under v2
                    // nothing that is not open can be committed). Had an earlier EndTxn of ours
                    // landed, its retry would be answered NONE. So no add landed, and the
                    // transaction, empty for the caller, is over either way.
                    info!(commit, "no transaction was open on the coordinator");
                    self.transaction_ended(None, acc);
                } else if landed_before && error == ErrorCode::INVALID_TXN_STATE {
                    // The retry found the transaction no longer open. Our own earlier EndTxn may
                    // have completed it — but the coordinator does not say which way, so we
                    // cannot claim the outcome we asked for (T4): report it as indeterminate.
                    let message = format!(
                        "EndTxn({}) was retried after a lost answer and the coordinator says the transaction is no longer open",
                        if commit { "commit" } else { "abort" }
                    );
                    self.fail_fatally(call_error(error, &message), acc);
                } else {
                    self.on_call_error(error, "EndTxn", now, acc);
                }
            }
            (step, response) => {
                warn!(?step, ?response, "unexpected coordinator answer");
                let delay = self.backoff(call_attempts(&self.txn));
                self.retry_call_after(now + delay);
            }
        }
    }

    fn retry_call_after(&mut self, at: Millis) {
        if let Some(call) = self.txn.as_mut().and_then(|t| t.call.as_mut()) {
            call.retry_at = at;
        }
    }

    /// A broker error on a call: rediscover and retry, fail fatally, or fail the call with
    /// the transaction abortable.
    fn on_call_error(&mut self, code: ErrorCode, what: &str, now: Millis, acc: &Accumulator) {
        let fenced = matches!(
            code,
            ErrorCode::PRODUCER_FENCED | ErrorCode::INVALID_PRODUCER_EPOCH
        );
        let recovering = self.txn.as_ref().is_some_and(|t| t.coordinator_aborted);
        if fenced && recovering {
            // The re-initialisation after a coordinator-side abort was refused: another
            // producer initialised our transactional id since, or the broker does not take
            // our epoch back. Say that the transaction timed out, not only "fenced".
            let message = format!(
                "{what}: the transaction outlived transaction.timeout.ms and the coordinator \
                 aborted it; it does not accept this producer's epoch back (KIP-588): create \
                 a new producer"
            );
            return self.fail_fatally(call_error(code, &message), acc);
        }
        if fenced && what != "InitProducerId" {
            if !self.fenced_in_transaction(code, what, now, acc) {
                return;
            }
            let aborting = self
                .txn
                .as_ref()
                .and_then(|t| t.call.as_ref())
                .is_some_and(|c| c.call == TxnCall::Abort);
            if aborting {
                // The coordinator already aborted it: go straight to the re-initialisation.
                return self.reinitialise_after_coordinator_abort(now);
            }
            let error = self
                .txn
                .as_ref()
                .and_then(|t| t.abort_cause.clone())
                .unwrap_or_else(|| call_error(code, what));
            return self.finish_call(Err(error));
        }
        if is_fatal_txn_error(code) {
            return self.fail_fatally(call_error(code, what), acc);
        }
        if is_retriable_txn_error(code) {
            if let Some(txn) = &mut self.txn {
                if needs_new_coordinator(code) {
                    txn.coordinator = None;
                }
                if let Some(call) = &mut txn.call {
                    call.last_error = Some(call_error(code, what));
                }
            }
            // CONCURRENT_TRANSACTIONS is common right after an EndTxn: retry soon (Java uses
            // a 20 ms backoff for it).
            let delay = if code == ErrorCode::CONCURRENT_TRANSACTIONS {
                20
            } else {
                self.backoff(call_attempts(&self.txn))
            };
            self.retry_call_after(now + delay);
            return;
        }
        let mut message = what.to_owned();
        if let Some((open_ms, timeout_ms)) =
            self.txn.as_ref().and_then(|t| t.open_beyond_timeout(now))
        {
            // Transactions v2 answers an EndTxn of a transaction it timed out with
            // INVALID_TXN_STATE: say why.
            message.push_str(&format!(
                " (the transaction was open {open_ms} ms, longer than transaction.timeout.ms \
                 = {timeout_ms} ms: the coordinator may have aborted it)"
            ));
        }
        let error = call_error(code, &message);
        let error = self.make_abortable(error.clone()).unwrap_or(error);
        self.finish_call(Err(error));
    }

    /// KIP-588: the coordinator aborted the transaction on its timeout and bumped the epoch,
    /// so the abort sends no EndTxn (it would be answered PRODUCER_FENCED) and re-initialises
    /// with the current id and epoch instead.
    fn reinitialise_after_coordinator_abort(&mut self, now: Millis) {
        self.set_step(Step::InitProducerId { bump: true });
        let current = self.identity;
        self.coordinator_request(TxnRequest::InitProducerId { current }, now);
    }

    fn on_add_partitions(
        &mut self,
        request: RequestId,
        result: Result<TxnResponse, Error>,
        now: Millis,
        acc: &Accumulator,
    ) {
        if result.is_ok()
            && let Some(txn) = &mut self.txn
        {
            txn.coordinator_streak
                .log_success("transactional requests to the coordinators");
        }
        let results = match result {
            Ok(TxnResponse::AddPartitions(results)) => {
                // Answered per partition: each is added or not.
                if let Some(txn) = &mut self.txn {
                    txn.unresolved_adds.remove(&request);
                }
                results
            }
            Ok(TxnResponse::Coordinator(broker)) => {
                if let Some(txn) = &mut self.txn {
                    txn.coordinator = Some(broker);
                }
                return;
            }
            Ok(other) => {
                warn!(?other, "unexpected answer to AddPartitionsToTxn");
                return;
            }
            Err(error) => {
                // The partitions may have been added: the request stays unresolved.
                if let Some(txn) = &mut self.txn {
                    txn.coordinator_streak
                        .log_failure("transactional request (AddPartitionsToTxn)", &error);
                    txn.coordinator = None;
                    txn.add_retry_at = now + self.config.retry_backoff_ms;
                }
                return;
            }
        };
        let mut retry = false;
        for (tp, code) in results {
            if code.is_ok() {
                if let Some(txn) = &mut self.txn {
                    txn.added.insert(tp);
                    txn.has_content = true;
                }
            } else if is_fatal_txn_error(code) {
                return self.fail_fatally(call_error(code, "AddPartitionsToTxn"), acc);
            } else if is_retriable_txn_error(code) {
                retry = true;
                if needs_new_coordinator(code)
                    && let Some(txn) = &mut self.txn
                {
                    txn.coordinator = None;
                }
            } else {
                self.make_abortable(call_error(code, &format!("AddPartitionsToTxn for {tp:?}")));
            }
        }
        if retry && let Some(txn) = &mut self.txn {
            txn.add_retry_at = now + 20;
        }
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
    pub(super) fn transaction_wakeup(&self, now: Millis) -> Option<Millis> {
        let txn = self.txn.as_ref()?;
        let call = txn.call.as_ref().filter(|c| c.outcome.is_none());
        let retry = call.map(|c| c.retry_at);
        let deadline = call.filter(|c| !c.timed_out).map(|c| c.deadline);
        let add = (!txn.v2 && txn.adding.is_none()).then_some(txn.add_retry_at);
        [retry, deadline, add]
            .into_iter()
            .flatten()
            .filter(|&t| t > now)
            .min()
    }
}

fn call_attempts(txn: &Option<Transactions>) -> u32 {
    txn.as_ref()
        .and_then(|t| t.call.as_ref())
        .map_or(1, |c| c.attempts.max(1))
}
