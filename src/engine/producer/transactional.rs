//! The engine's side of a transactional producer: the transactional calls forwarded to the
//! [`TransactionManager`], which owns every transactional field, and what only the engine can
//! do for it because it touches the partitions: flush before a commit, drain and fail the
//! unsent before an abort, find the partitions to register under transactions v1 (T2), and
//! adopt a new identity.

use super::{Counters, Engine, Outstanding};
use crate::engine::accumulator::Accumulator;
use crate::engine::partition::{ProducerBatch, WireState};
use crate::engine::transaction::{
    Advance, CallId, EngineParts, ForEngine, TransactionManager, TxnCall, TxnLedger, TxnResponse,
    TxnState,
};
use crate::engine::{ProducerIdentity, RequestId};
use crate::error::Error;
use crate::types::{Millis, TopicPartition};

/// Records of the producer that failed, as determined or indeterminate: a transaction whose
/// count grew since it began cannot commit (T4).
fn failures(counters: &Counters) -> u64 {
    counters.records_failed + counters.records_indeterminate
}

impl Engine {
    /// The transaction state, for a transactional producer.
    pub fn transaction_state(&self) -> Option<&TxnState> {
        self.txn.as_ref().map(TransactionManager::state)
    }

    /// Which transaction the producer is in and how the last one ended, for a transactional
    /// producer.
    pub fn transaction_ledger(&self) -> Option<TxnLedger> {
        self.txn.as_ref().map(TransactionManager::ledger)
    }

    /// Whether the coordinator speaks transactions v2 (KIP-890), once initialised.
    pub fn transactions_v2(&self) -> bool {
        self.txn
            .as_ref()
            .is_some_and(TransactionManager::transactions_v2)
    }

    /// Whether `send` is allowed now: always for an idempotent producer; inside a transaction
    /// for a transactional one (T1). The error says why not.
    pub fn check_send(&self) -> Result<(), Error> {
        if let Some(fatal) = &self.fatal {
            return Err(fatal.clone());
        }
        self.txn
            .as_ref()
            .map_or(Ok(()), TransactionManager::check_send)
    }

    /// `begin_transaction`: Ready → InTransaction, locally (T1).
    pub fn begin_transaction(&mut self, now: Millis) -> Result<(), Error> {
        let failed_so_far = failures(&self.tally.counters);
        let txn = self.txn.as_mut().ok_or_else(|| {
            Error::InvalidState("begin_transaction needs a transactional.id".into())
        })?;
        txn.begin(now, failed_so_far)
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
        let started = txn.start_call(call, now)?;
        if started.flush {
            self.flushing = true;
        }
        Ok(started.id)
    }

    /// The caller of call `id` stopped waiting (its future was dropped). A commit or abort
    /// goes on as if it had timed out: only the same call is valid next, and it returns the
    /// outcome (T1, T4). Any other call is abandoned, as at its deadline.
    pub fn call_cancelled(&mut self, id: CallId) {
        if let Some(txn) = &mut self.txn {
            txn.call_cancelled(id);
        }
    }

    /// Results of calls that finished since the last look.
    pub fn take_finished_calls(&mut self) -> Vec<(CallId, Result<(), Error>)> {
        self.txn
            .as_mut()
            .map(TransactionManager::take_finished_calls)
            .unwrap_or_default()
    }

    /// Whether `request` is a coordinator request awaiting an answer; forgets it.
    pub(super) fn take_txn_request(&mut self, request: RequestId) -> bool {
        self.txn
            .as_mut()
            .is_some_and(|txn| txn.take_in_flight(request))
    }

    /// The answer to a coordinator request, handled by the manager.
    pub(super) fn on_txn_response(
        &mut self,
        request: RequestId,
        result: Result<TxnResponse, Error>,
        now: Millis,
        acc: &Accumulator,
    ) {
        let Some((txn, mut parts)) = self.txn_parts() else {
            return;
        };
        let next = txn.on_response(request, result, now, &mut parts);
        self.carry_out(next, acc);
    }

    /// Under transactions v1 registers new partitions, then advances the running call.
    pub(super) fn drive_transaction(&mut self, now: Millis, acc: &Accumulator) {
        if self.fatal.is_some() {
            return;
        }
        self.register_partitions(now);
        let Some((txn, mut parts)) = self.txn_parts() else {
            return;
        };
        let next = match txn.advance(now, &mut parts) {
            Advance::Nothing => ForEngine::Nothing,
            Advance::Flush => {
                let abortable = txn.state() == &TxnState::AbortableError;
                // Once abortable, nothing more of the transaction goes out, so waiting would
                // never end.
                if !abortable && !self.is_idle(acc) {
                    self.flushing = true;
                    return;
                }
                let failed_now = failures(&self.tally.counters);
                let Some((txn, mut parts)) = self.txn_parts() else {
                    return;
                };
                txn.commit_flushed(failed_now, now, &mut parts)
            }
            Advance::DrainForAbort => {
                if self
                    .outstanding
                    .values()
                    .any(|o| matches!(o, Outstanding::Produce { .. }))
                {
                    return;
                }
                let broke_sequences = self.fail_unsent_for_abort(acc);
                let Some((txn, mut parts)) = self.txn_parts() else {
                    return;
                };
                txn.abort_drained(broke_sequences, now, &mut parts)
            }
        };
        self.carry_out(next, acc);
    }

    /// Transactions v1: hands the manager the partitions with batches waiting that the
    /// transaction does not have yet (T2).
    fn register_partitions(&mut self, now: Millis) {
        let Some(txn) = &self.txn else { return };
        let Some(identity) = self.identity.filter(|_| txn.registration_due(now)) else {
            return;
        };
        let missing: Vec<TopicPartition> = self
            .partitions
            .iter()
            .filter(|(tp, p)| !p.queued.is_empty() && !txn.is_added(tp))
            .map(|(tp, _)| tp.clone())
            .collect();
        if missing.is_empty() {
            return;
        }
        if let Some((txn, mut parts)) = self.txn_parts() {
            txn.register_partitions(missing, identity, now, &mut parts);
        }
    }

    /// The manager and what it borrows of the engine.
    fn txn_parts(&mut self) -> Option<(&mut TransactionManager, EngineParts<'_>)> {
        let txn = self.txn.as_mut()?;
        let parts = EngineParts {
            identity: self.identity,
            requests: &mut self.requests,
            actions: &mut self.actions,
            backoff: &mut self.retry_backoff,
            metrics: &mut self.tally.delivery,
        };
        Some((txn, parts))
    }

    /// Does what the manager left to the engine.
    fn carry_out(&mut self, next: ForEngine, acc: &Accumulator) {
        match next {
            ForEngine::Nothing => {}
            ForEngine::FailFatally(error) => self.fail_fatally(error, acc),
            ForEngine::AdoptIdentity(identity) => self.adopt_identity(identity, acc),
        }
    }

    /// Abort: records that never went out fail as aborted; stamped ones that are certainly not
    /// in the log too (their sequences are then broken, so v1 bumps the epoch after the abort).
    /// A batch whose outcome is unknown is failed as indeterminate: if it landed, the abort
    /// marker hides it from read_committed readers. Returns whether sequences were broken.
    fn fail_unsent_for_abort(&mut self, acc: &Accumulator) -> bool {
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
            Self::resolve(&mut self.tally, acc, batch, Err(error));
        }
        self.fail_accumulated(acc, &Error::TransactionAborted);
        broke_sequences
    }

    /// Installs an identity the coordinator handed out and restarts every partition's
    /// sequence at 0.
    fn adopt_identity(&mut self, identity: ProducerIdentity, acc: &Accumulator) {
        if self.identity == Some(identity) {
            return;
        }
        if self.identity.is_some() {
            self.tally.counters.epoch_bumps += 1;
        }
        tracing::info!(
            producer_id = identity.producer_id,
            epoch = identity.epoch,
            "transactional identity"
        );
        for state in self.partitions.values_mut() {
            for batch in state.reset_for_new_identity() {
                // Nothing is in flight between transactions; a batch here was already decided.
                Self::resolve(&mut self.tally, acc, batch, Err(Error::TransactionAborted));
            }
        }
        self.install_identity(identity);
    }
}
