//! One handler per coordinator answer: FindCoordinator, InitProducerId, AddPartitionsToTxn,
//! AddOffsetsToTxn, TxnOffsetCommit and EndTxn, and what a broker error on any of them means
//! for the call (rediscover and retry, abortable, fatal: T4, T5).

use tracing::{info, warn};

use super::calls::Step;
use super::{
    EngineParts, ForEngine, TransactionManager, TxnCall, TxnResponse, TxnState, call_error,
    is_fatal_txn_error, is_retriable_txn_error, needs_new_coordinator,
};
use crate::engine::RequestId;
use crate::error::Error;
use crate::protocol::error_code::ErrorCode;
use crate::types::Millis;

impl TransactionManager {
    /// The answer to coordinator request `request` (already taken out of the requests in
    /// flight with [`TransactionManager::take_in_flight`]).
    pub fn on_response(
        &mut self,
        request: RequestId,
        result: Result<TxnResponse, Error>,
        now: Millis,
        parts: &mut EngineParts<'_>,
    ) -> ForEngine {
        if self.adding == Some(request) {
            self.adding = None;
            return self.on_add_partitions(request, result, now, parts);
        }
        let Some(call) = &mut self.call else {
            return ForEngine::Nothing;
        };
        if call.outstanding != Some(request) {
            return ForEngine::Nothing;
        }
        call.outstanding = None;
        let step = call.step.clone();
        let response = match result {
            Ok(response) => {
                self.coordinator_streak
                    .log_success("transactional requests to the coordinators");
                response
            }
            Err(error) => {
                // Unanswered: retry the same step after a backoff; an EndTxn may have landed.
                self.coordinator_streak
                    .log_failure(format_args!("transactional request ({step:?})"), &error);
                call.last_error = Some(error.clone());
                if matches!(step, Step::EndTxn { .. }) {
                    call.end_txn_maybe_landed = true;
                }
                if matches!(
                    step,
                    Step::EndTxn { .. } | Step::InitProducerId { .. } | Step::AddOffsets
                ) {
                    self.coordinator = None;
                }
                // The group coordinator may be the broker that is gone: look it up again,
                // or the retries all go to a dead broker until max.block.ms.
                if step == Step::CommitOffsets {
                    self.group_coordinator = None;
                }
                let delay = parts.backoff.delay(self.call_attempts());
                self.retry_call_after(now + delay);
                return ForEngine::Nothing;
            }
        };
        match (step, response) {
            (Step::FindGroupCoordinator, TxnResponse::Coordinator(broker)) => {
                if let TxnCall::SendOffsets { group, .. } = &call.call {
                    self.group_coordinator = Some((group.group_id.clone(), broker));
                }
                call.step = Step::CommitOffsets;
                ForEngine::Nothing
            }
            (_, TxnResponse::Coordinator(broker)) => {
                // The transaction coordinator a step was waiting for; the step goes on.
                self.coordinator = Some(broker);
                ForEngine::Nothing
            }
            (
                Step::InitProducerId { .. },
                TxnResponse::InitProducerId {
                    error,
                    identity,
                    transactions_v2,
                },
            ) => {
                if !error.is_ok() {
                    return self.on_call_error(error, "InitProducerId", now, parts);
                }
                if std::mem::take(&mut self.coordinator_aborted) {
                    parts.metrics.transactions_aborted += 1;
                }
                self.v2 = transactions_v2;
                // An abort's epoch bump (KIP-360, KIP-588) ends its transaction here.
                if call.call == TxnCall::Abort {
                    self.last_ended = Some((self.begun, false));
                }
                self.state = TxnState::Ready;
                self.bump_after_abort = false;
                info!(transactions_v2, "transactions initialised");
                self.finish_call(Ok(()));
                ForEngine::AdoptIdentity(identity)
            }
            (Step::AddOffsets, TxnResponse::AddOffsets(error)) => {
                // Answered: added (content from now on) or not added.
                self.unresolved_adds.remove(&request);
                if !error.is_ok() {
                    return self.on_call_error(error, "AddOffsetsToTxn", now, parts);
                }
                self.has_content = true;
                call.step = Step::FindGroupCoordinator;
                ForEngine::Nothing
            }
            (Step::CommitOffsets, TxnResponse::TxnOffsetCommit(results)) => {
                let worst = results.iter().map(|(_, e)| *e).find(|e| !e.is_ok());
                match worst {
                    None => {
                        // An error answer stays unresolved: under transactions v2 the group
                        // coordinator adds the offsets partition before it validates the
                        // commit, so a refused commit may still have opened the transaction.
                        self.unresolved_adds.remove(&request);
                        self.has_content = true;
                        self.finish_call(Ok(()));
                        ForEngine::Nothing
                    }
                    Some(code) if needs_new_coordinator(code) => {
                        self.group_coordinator = None;
                        call.step = Step::FindGroupCoordinator;
                        let delay = parts.backoff.delay(self.call_attempts());
                        self.retry_call_after(now + delay);
                        ForEngine::Nothing
                    }
                    Some(code) => self.on_call_error(code, "TxnOffsetCommit", now, parts),
                }
            }
            (Step::EndTxn { commit }, TxnResponse::EndTxn { error, identity }) => {
                let landed_before = call.end_txn_maybe_landed;
                let only_unresolved = !self.has_content;
                if error.is_ok() {
                    info!(commit, "transaction ended");
                    self.transaction_ended(identity, parts)
                } else if error == ErrorCode::INVALID_TXN_STATE && only_unresolved {
                    // Sent only because an add's outcome was unknown, and no transaction is
                    // open: the coordinator answers INVALID_TXN_STATE then (the table in
                    // Kafka's TransactionCoordinator: under v1 Empty takes no EndTxn and
                    // CompleteCommit / CompleteAbort only the outcome they ended with; under v2
                    // nothing that is not open can be committed). Had an earlier EndTxn of ours
                    // landed, its retry would be answered NONE. So no add landed, and the
                    // transaction, empty for the caller, is over either way.
                    info!(commit, "no transaction was open on the coordinator");
                    self.transaction_ended(None, parts)
                } else if landed_before && error == ErrorCode::INVALID_TXN_STATE {
                    // The retry found the transaction no longer open. Our own earlier EndTxn may
                    // have completed it — but the coordinator does not say which way, so we
                    // cannot claim the outcome we asked for (T4): report it as indeterminate.
                    let message = format!(
                        "EndTxn({}) was retried after a lost answer and the coordinator says the transaction is no longer open",
                        if commit { "commit" } else { "abort" }
                    );
                    ForEngine::FailFatally(call_error(error, &message))
                } else {
                    self.on_call_error(error, "EndTxn", now, parts)
                }
            }
            (step, response) => {
                warn!(?step, ?response, "unexpected coordinator answer");
                let delay = parts.backoff.delay(self.call_attempts());
                self.retry_call_after(now + delay);
                ForEngine::Nothing
            }
        }
    }

    /// A broker error on a call: rediscover and retry, fail fatally, or fail the call with
    /// the transaction abortable.
    fn on_call_error(
        &mut self,
        code: ErrorCode,
        what: &str,
        now: Millis,
        parts: &mut EngineParts<'_>,
    ) -> ForEngine {
        let fenced = matches!(
            code,
            ErrorCode::PRODUCER_FENCED | ErrorCode::INVALID_PRODUCER_EPOCH
        );
        if fenced && self.coordinator_aborted {
            // The re-initialisation after a coordinator-side abort was refused: another
            // producer initialised our transactional id since, or the broker does not take
            // our epoch back. Say that the transaction timed out, not only "fenced".
            let message = format!(
                "{what}: the transaction outlived transaction.timeout.ms and the coordinator \
                 aborted it; it does not accept this producer's epoch back (KIP-588): create \
                 a new producer"
            );
            return ForEngine::FailFatally(call_error(code, &message));
        }
        if fenced && what != "InitProducerId" {
            if let Err(fatal) = self.fenced(code, what, now) {
                return ForEngine::FailFatally(fatal);
            }
            let aborting = self.call.as_ref().is_some_and(|c| c.call == TxnCall::Abort);
            if aborting {
                // The coordinator already aborted it: go straight to the re-initialisation.
                self.reinitialise_after_coordinator_abort(now, parts);
                return ForEngine::Nothing;
            }
            let error = self
                .abort_cause
                .clone()
                .unwrap_or_else(|| call_error(code, what));
            self.finish_call(Err(error));
            return ForEngine::Nothing;
        }
        if is_fatal_txn_error(code) {
            return ForEngine::FailFatally(call_error(code, what));
        }
        if is_retriable_txn_error(code) {
            if needs_new_coordinator(code) {
                self.coordinator = None;
            }
            if let Some(call) = &mut self.call {
                call.last_error = Some(call_error(code, what));
            }
            // CONCURRENT_TRANSACTIONS is common right after an EndTxn: retry soon (Java uses
            // a 20 ms backoff for it).
            let delay = if code == ErrorCode::CONCURRENT_TRANSACTIONS {
                20
            } else {
                parts.backoff.delay(self.call_attempts())
            };
            self.retry_call_after(now + delay);
            return ForEngine::Nothing;
        }
        let mut message = what.to_owned();
        if let Some((open_ms, timeout_ms)) = self.open_beyond_timeout(now) {
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
        ForEngine::Nothing
    }

    /// The answer to the AddPartitionsToTxn in flight (or to the coordinator lookup it waited
    /// for). An unanswered one may have added its partitions: it stays unresolved.
    fn on_add_partitions(
        &mut self,
        request: RequestId,
        result: Result<TxnResponse, Error>,
        now: Millis,
        parts: &mut EngineParts<'_>,
    ) -> ForEngine {
        if result.is_ok() {
            self.coordinator_streak
                .log_success("transactional requests to the coordinators");
        }
        let results = match result {
            Ok(TxnResponse::AddPartitions(results)) => {
                // Answered per partition: each is added or not.
                self.unresolved_adds.remove(&request);
                results
            }
            Ok(TxnResponse::Coordinator(broker)) => {
                self.coordinator = Some(broker);
                return ForEngine::Nothing;
            }
            Ok(other) => {
                warn!(?other, "unexpected answer to AddPartitionsToTxn");
                return ForEngine::Nothing;
            }
            Err(error) => {
                self.coordinator_streak
                    .log_failure("transactional request (AddPartitionsToTxn)", &error);
                self.coordinator = None;
                self.add_retry_at = now + parts.backoff.first_ms();
                return ForEngine::Nothing;
            }
        };
        let mut retry = false;
        for (tp, code) in results {
            if code.is_ok() {
                self.added.insert(tp);
                self.has_content = true;
            } else if is_fatal_txn_error(code) {
                return ForEngine::FailFatally(call_error(code, "AddPartitionsToTxn"));
            } else if is_retriable_txn_error(code) {
                retry = true;
                if needs_new_coordinator(code) {
                    self.coordinator = None;
                }
            } else {
                self.make_abortable(call_error(code, &format!("AddPartitionsToTxn for {tp:?}")));
            }
        }
        if retry {
            self.add_retry_at = now + 20;
        }
        ForEngine::Nothing
    }
}
