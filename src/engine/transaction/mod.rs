//! The transactional producer (rules T1–T5): one owner, `TransactionManager`, holds every
//! transactional field and answers each coordinator response, the way Java's
//! `TransactionManager` does beside its `Sender`. The idempotent core ([`crate::engine::Engine`])
//! keeps the partitions, the batches and the identity they are stamped with; it holds a
//! manager when the producer has a `transactional.id`, lends it what it needs to send
//! (`EngineParts`), and carries out what only the core can do (`ForEngine`).
//!
//! - [`vocabulary`]: the states, the user's calls, the coordinator requests and answers, the
//!   error classes (re-exported here, so `crate::engine::transaction::TxnState` names them);
//! - `calls`: a user's call from start to finish (begin, start, cancel, timeout, abortable);
//! - `requests`: what goes to the coordinators, step by step, and how a transaction ends;
//! - `responses`: one handler per coordinator answer.

use std::collections::{BTreeMap, BTreeSet};

use super::backoff::RetryBackoff;
use super::metrics::DeliveryMetrics;
use super::{Action, ProducerIdentity, RequestId, RequestIds};
use crate::error::Error;
use crate::reachability::Reachability;
use crate::types::{BrokerId, Millis, TopicPartition};

mod calls;
mod requests;
mod responses;
pub mod vocabulary;

pub use vocabulary::*;

use calls::CallProgress;
pub(crate) use requests::Advance;

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

/// What the engine lends the manager while it handles an answer or drives a call: the current
/// identity, request ids and the action queue (so a coordinator request takes its place among
/// the engine's own actions), the seeded retry backoff (so a seed replays exactly) and the
/// metrics the end of a transaction counts in.
pub(crate) struct EngineParts<'a> {
    /// The identity batches are stamped with now.
    pub identity: Option<ProducerIdentity>,
    /// Where request ids come from.
    pub requests: &'a mut RequestIds,
    /// The engine's actions for the driver.
    pub actions: &'a mut Vec<Action>,
    /// The engine's retry backoff.
    pub backoff: &'a mut RetryBackoff,
    /// The engine's delivery metrics.
    pub metrics: &'a mut DeliveryMetrics,
}

/// What the engine must do after the manager handled something, because it touches the
/// partitions or the producer as a whole.
#[derive(Debug)]
#[must_use]
pub(crate) enum ForEngine {
    /// Nothing.
    Nothing,
    /// Fail the producer fatally with this error (T5).
    FailFatally(Error),
    /// Stamp with this identity from now on, restarting every partition's sequence at 0 (T2).
    AdoptIdentity(ProducerIdentity),
}

/// Which transaction a producer is in and how the last one ended: lets a caller that lost
/// track of its own transaction (a copy loop whose step was dropped, or whose producer was
/// used behind its back) tell that transaction's fate without guessing from the state alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnLedger {
    /// Where the producer stands (T1).
    pub state: TxnState,
    /// How many transactions `begin_transaction` opened: the open one's number, if one is.
    pub begun: u64,
    /// The last transaction that ended: its number, and whether it committed.
    pub last_ended: Option<(u64, bool)>,
}

/// The transactional state of a producer, and the only code that changes it.
#[derive(Debug)]
pub(crate) struct TransactionManager {
    config: TransactionConfig,
    state: TxnState,
    v2: bool,
    coordinator: Option<BrokerId>,
    group_coordinator: Option<(String, BrokerId)>,
    /// Coordinator lookups and requests awaiting an answer, with when each was sent.
    in_flight: BTreeMap<RequestId, Millis>,
    /// Transactions v1: partitions AddPartitionsToTxn confirmed for this transaction.
    added: BTreeSet<TopicPartition>,
    adding: Option<RequestId>,
    add_retry_at: Millis,
    /// The transaction has something for EndTxn to end (a partition, offsets, or a sent batch).
    has_content: bool,
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
    /// Transactions begun, and the last one that ended with whether it committed
    /// ([`TxnLedger`]).
    begun: u64,
    last_ended: Option<(u64, bool)>,
}

impl TransactionManager {
    /// A manager for a producer not initialised yet.
    pub fn new(config: TransactionConfig) -> Self {
        Self {
            config,
            state: TxnState::Uninitialized,
            v2: false,
            coordinator: None,
            group_coordinator: None,
            in_flight: BTreeMap::new(),
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
            begun: 0,
            last_ended: None,
        }
    }

    /// Which transaction the producer is in and how the last one ended.
    pub fn ledger(&self) -> TxnLedger {
        TxnLedger {
            state: self.state.clone(),
            begun: self.begun,
            last_ended: self.last_ended,
        }
    }

    /// Where the producer stands (T1).
    pub fn state(&self) -> &TxnState {
        &self.state
    }

    /// Whether the coordinator speaks transactions v2 (KIP-890), once initialised.
    pub fn transactions_v2(&self) -> bool {
        self.v2
    }

    /// Whether a new batch of `partition` may be stamped and sent now: only inside a
    /// transaction, and under transactions v1 only to partitions the coordinator added (T2).
    pub fn allows_dispatch(&self, partition: &TopicPartition) -> bool {
        matches!(self.state, TxnState::InTransaction | TxnState::Committing)
            && (self.v2 || self.added.contains(partition))
    }

    /// A batch of the transaction was stamped: EndTxn has something to end.
    pub fn batch_stamped(&mut self) {
        self.has_content = true;
    }

    /// The producer failed fatally; a call still running was ended by [`Self::finish_call`].
    pub fn enter_fatal(&mut self) {
        self.state = TxnState::FatalError;
    }

    /// Forgets coordinator request `request`; whether it was awaiting an answer (a late
    /// answer to a request given up on is ignored).
    pub fn take_in_flight(&mut self, request: RequestId) -> bool {
        self.in_flight.remove(&request).is_some()
    }

    /// Coordinator requests sent `timeout` or longer before `now`.
    pub fn expired_requests(&self, now: Millis, timeout: Millis) -> Vec<RequestId> {
        self.in_flight
            .iter()
            .filter(|&(_, &sent_ms)| sent_ms + timeout <= now)
            .map(|(&request, _)| request)
            .collect()
    }

    /// When each coordinator request awaiting an answer was sent.
    pub fn in_flight_sent_times(&self) -> impl Iterator<Item = Millis> + '_ {
        self.in_flight.values().copied()
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
}
