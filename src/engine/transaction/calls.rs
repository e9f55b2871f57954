//! A user's transactional call from start to finish: `begin_transaction` (local), the calls
//! that talk to the coordinator (init, commit, abort, send offsets), a caller that stops
//! waiting or runs out of `max.block.ms`, and the transitions to AbortableError and
//! FatalError that end or change a call (T1, T4, T5).

use std::sync::Arc;

use tracing::warn;

use super::{TransactionManager, TxnCall, TxnState, call_error};
use crate::engine::RequestId;
use crate::error::{Error, ErrorChain};
use crate::protocol::error_code::ErrorCode;
use crate::types::Millis;

/// Where a call is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
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

/// The call running, and how far it got.
#[derive(Debug)]
pub(super) struct CallProgress {
    pub id: super::CallId,
    pub call: TxnCall,
    pub step: Step,
    pub outstanding: Option<RequestId>,
    pub deadline: Millis,
    pub retry_at: Millis,
    pub attempts: u32,
    /// An EndTxn of this call was sent and its answer lost: a retry that finds the
    /// transaction completed the same way is our own write (T4, KAFKA-21062's lesson).
    pub end_txn_maybe_landed: bool,
    /// A commit or abort whose caller got a timeout: it goes on resolving against the
    /// coordinator, and only the same call is valid until it returns the real outcome (T1,
    /// T4, as the Java client requires: an abort instead could race a commit that landed).
    pub timed_out: bool,
    /// How a timed-out call ended, kept for the caller who calls it again.
    pub outcome: Option<Result<(), Error>>,
    /// What last kept the call from going on (a request unanswered, a coordinator not
    /// available), for the error of a call that times out.
    pub last_error: Option<Error>,
}

impl CallProgress {
    /// Whether a timeout hands the call over to a later call of the same kind instead of
    /// abandoning it: commit and abort, whose outcome the coordinator decides.
    pub fn outlives_its_caller(&self) -> bool {
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

/// A call that started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallStart {
    /// Its id, to match its result.
    pub id: super::CallId,
    /// A commit began: the engine closes every open batch regardless of linger.
    pub flush: bool,
}

impl TransactionManager {
    /// Whether `send` is allowed now: inside a transaction (T1). The error says why not.
    pub fn check_send(&self) -> Result<(), Error> {
        match &self.state {
            TxnState::InTransaction => Ok(()),
            TxnState::AbortableError => Err(self
                .abort_cause
                .clone()
                .unwrap_or_else(|| Error::InvalidState("the transaction must be aborted".into()))),
            state => Err(Error::InvalidState(format!(
                "send is only allowed inside a transaction (state {state:?})"
            ))),
        }
    }

    /// `begin_transaction`: Ready → InTransaction, locally (T1). `failures` is the producer's
    /// count of failed records so far.
    pub fn begin(&mut self, now: Millis, failures: u64) -> Result<(), Error> {
        if let Some(call) = self.call.as_ref().filter(|c| c.timed_out) {
            return Err(call.call_again_error());
        }
        if self.state != TxnState::Ready {
            return Err(Error::InvalidState(format!(
                "begin_transaction in state {:?}",
                self.state
            )));
        }
        self.state = TxnState::InTransaction;
        self.begun += 1;
        self.began_ms = now;
        self.coordinator_aborted = false;
        self.failures_at_begin = failures;
        self.clear_content();
        Ok(())
    }

    /// Starts a coordinator call. Fails at once, sending nothing, when the call is not valid
    /// in the current state or another call is running (T1).
    pub fn start_call(&mut self, call: TxnCall, now: Millis) -> Result<CallStart, Error> {
        if let Some(running) = &mut self.call {
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
            let id = self.next_call;
            self.next_call += 1;
            running.id = id;
            running.timed_out = false;
            running.deadline = now + self.config.call_timeout_ms;
            if let Some(outcome) = running.outcome.take() {
                self.call = None;
                self.finished.push((id, outcome));
            }
            return Ok(CallStart { id, flush: false });
        }
        if !call.allowed_in(&self.state) {
            if call == TxnCall::Commit && self.state == TxnState::AbortableError {
                return Err(self
                    .abort_cause
                    .clone()
                    .unwrap_or_else(|| Error::InvalidState("abort needed".into())));
            }
            return Err(Error::InvalidState(format!(
                "{} in state {:?}",
                call.name(),
                self.state
            )));
        }
        let step = match &call {
            TxnCall::Init => Step::InitProducerId { bump: false },
            TxnCall::Commit => {
                self.state = TxnState::Committing;
                Step::Flush
            }
            TxnCall::Abort => {
                self.state = TxnState::Aborting;
                Step::DrainForAbort
            }
            TxnCall::SendOffsets { .. } if self.v2 => Step::FindGroupCoordinator,
            TxnCall::SendOffsets { .. } => Step::AddOffsets,
        };
        let flush = step == Step::Flush;
        let id = self.next_call;
        self.next_call += 1;
        self.call = Some(CallProgress {
            id,
            call,
            step,
            outstanding: None,
            deadline: now + self.config.call_timeout_ms,
            retry_at: now,
            attempts: 0,
            end_txn_maybe_landed: false,
            timed_out: false,
            outcome: None,
            last_error: None,
        });
        Ok(CallStart { id, flush })
    }

    /// The caller of call `id` stopped waiting (its future was dropped). A commit or abort
    /// goes on as if it had timed out: only the same call is valid next, and it returns the
    /// outcome (T1, T4). Any other call is abandoned, as at its deadline.
    pub fn call_cancelled(&mut self, id: super::CallId) {
        let Some(call) = self.call.as_mut().filter(|c| c.id == id && !c.timed_out) else {
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
    pub fn take_finished_calls(&mut self) -> Vec<(super::CallId, Result<(), Error>)> {
        std::mem::take(&mut self.finished)
    }

    /// Ends the running call with `result`; its request in flight, if any, is given up.
    pub fn finish_call(&mut self, result: Result<(), Error>) {
        let Some(call) = &mut self.call else { return };
        if let Some(request) = call.outstanding.take() {
            self.in_flight.remove(&request);
        }
        if call.timed_out {
            // Nobody waits for it now: kept for the caller who calls it again.
            call.outcome = Some(result);
            return;
        }
        let id = call.id;
        self.call = None;
        self.finished.push((id, result));
    }

    /// Ends the running call with a timeout once its `max.block.ms` passed, or, for a commit
    /// or abort, tells its caller and lets it go on (T1, T4). Returns whether a call is still
    /// running and not finished.
    pub(super) fn check_deadline(&mut self, now: Millis) -> bool {
        let Some(call) = &mut self.call else {
            return false;
        };
        if call.outcome.is_some() {
            return false;
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
                return false;
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
            self.finished.push((call.id, Err(error)));
        }
        true
    }

    /// A sent batch of the transaction failed or its sequence state broke: the transaction
    /// can only be aborted (P5, P7 for transactional producers), and under v1 the epoch must
    /// be bumped after the abort. Returns the error calls get while the state is
    /// AbortableError: it says `is_abortable()`, so an error and the state it leaves agree
    /// (T4; INVALID_TXN_STATE was once returned while the state was AbortableError).
    pub fn make_abortable(&mut self, cause: Error) -> Option<Error> {
        self.bump_after_abort = true;
        // From Aborting too: an abort whose EndTxn failed for good must stay retriable by the
        // user (T1), not stuck in Aborting with no call running.
        if matches!(
            self.state,
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
            self.state = TxnState::AbortableError;
            self.abort_cause = Some(cause);
        }
        (self.state == TxnState::AbortableError)
            .then(|| self.abort_cause.clone())
            .flatten()
    }

    /// PRODUCER_FENCED or INVALID_PRODUCER_EPOCH for our identity inside a transaction. Either
    /// another producer initialised our transactional id (we are a zombie: fatal, T5), or the
    /// coordinator aborted our transaction because it outlived `transaction.timeout.ms`, and
    /// bumped the epoch itself (KIP-588). The second is only possible once the transaction
    /// has been open that long; then it becomes abortable, and the abort re-initialises with
    /// our id and epoch, which the coordinator refuses if another producer initialised since
    /// (it resets the last epoch then). `Err` is the error the producer fails fatally with.
    pub fn fenced(&mut self, code: ErrorCode, what: &str, now: Millis) -> Result<(), Error> {
        let Some((open_ms, timeout_ms)) = self.open_beyond_timeout(now) else {
            warn!(%code, what, "fenced by a newer producer with the same transactional.id");
            return Err(call_error(ErrorCode::PRODUCER_FENCED, what));
        };
        self.coordinator_aborted = true;
        let message = format!(
            "{what}: {code} after the transaction was open {open_ms} ms, longer than \
             transaction.timeout.ms ({timeout_ms} ms): the coordinator aborted it; \
             abort_transaction re-initialises if the coordinator takes this producer back \
             (KIP-588)"
        );
        self.make_abortable(call_error(code, &message));
        Ok(())
    }

    /// How many attempts the running call made (at least 1), for its backoff.
    pub(super) fn call_attempts(&self) -> u32 {
        self.call.as_ref().map_or(1, |c| c.attempts.max(1))
    }

    /// The running call retries its step at `at`.
    pub(super) fn retry_call_after(&mut self, at: Millis) {
        if let Some(call) = &mut self.call {
            call.retry_at = at;
        }
    }

    pub(super) fn set_step(&mut self, step: Step) {
        if let Some(call) = &mut self.call {
            call.step = step;
        }
    }
}
