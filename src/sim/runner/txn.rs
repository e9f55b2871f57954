//! The transactional application of a run: `init_transactions`, then each planned
//! transaction (begin, its sends, maybe `send_offsets_to_transaction`, commit or abort; an
//! abortable failure aborts; a timed-out call is called again), and the checks on what a
//! read_committed consumer sees at the end (rules T1–T5, P9).

use std::collections::BTreeMap;

use super::Run;
use crate::engine::CallId;
use crate::engine::transaction::{TxnCall, TxnState};
use crate::error::Error;
use crate::sim::invariants::Violation;
use crate::sim::workload::PlannedTransaction;
use crate::types::{ConsumerGroupMetadata, OffsetToCommit};
use crate::types::{Millis, TopicPartition};

/// How a planned transaction ended, as its calls reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnEnd {
    /// Not ended (the run is still going).
    Open,
    /// `commit_transaction` returned Ok.
    Committed,
    /// `commit_transaction` returned this error (the transaction was then aborted, or the
    /// producer failed).
    CommitFailed(String),
    /// `abort_transaction` returned Ok (no commit was attempted).
    Aborted,
    /// The producer failed fatally before the transaction ended.
    Abandoned,
}

/// What happened to one planned transaction.
#[derive(Debug, Clone)]
pub struct TxnFate {
    /// The records `send` accepted in it.
    pub records: Vec<u64>,
    /// How it ended.
    pub end: TxnEnd,
    /// Whether `commit_transaction` was called for it.
    pub commit_called: bool,
    /// Offsets `send_offsets_to_transaction` accepted for it.
    pub offsets: Vec<(TopicPartition, i64)>,
    /// Whether the transaction was open when another instance fenced the producer.
    pub open_at_fence: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Init,
    Offsets,
    Commit,
    Abort,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Init,
    Sending,
    Done,
}

#[derive(Debug)]
struct Running {
    id: CallId,
    kind: Kind,
    started: Millis,
}

/// The application's progress through the planned transactions.
#[derive(Debug)]
pub(super) struct TxnDriver {
    plan: Vec<PlannedTransaction>,
    pub(super) fates: Vec<TxnFate>,
    current: usize,
    stage: Stage,
    running: Option<Running>,
    offsets_done: bool,
    /// Times the current call was called again (a timeout, or a retriable failure).
    again: u32,
    /// A call resolves within this of its start, plus clock jumps (P9).
    call_bound_ms: Millis,
    /// A commit or abort timed out: only the same call is valid until it returns the
    /// transaction's real outcome (T1, T4).
    recall: Option<Kind>,
    pub(super) fenced_at: Option<Millis>,
}

/// How many times a call is called again before the application gives up on it.
const CALL_AGAIN: u32 = 8;

impl TxnDriver {
    pub(super) fn new(plan: Vec<PlannedTransaction>, call_bound_ms: Millis) -> Self {
        let fates = plan
            .iter()
            .map(|_| TxnFate {
                records: Vec::new(),
                end: TxnEnd::Open,
                commit_called: false,
                offsets: Vec::new(),
                open_at_fence: false,
            })
            .collect();
        Self {
            plan,
            fates,
            current: 0,
            stage: Stage::Init,
            running: None,
            offsets_done: false,
            again: 0,
            call_bound_ms,
            recall: None,
            fenced_at: None,
        }
    }

    /// Whether the application is done (every transaction ended, or the producer failed).
    pub(super) fn done(&self) -> bool {
        self.stage == Stage::Done
    }

    /// May record `id` be sent now: `Some(true)` yes, `Some(false)` it is refused for good
    /// (the application gave up), `None` not yet.
    pub(super) fn may_send(&self, id: usize) -> Option<bool> {
        match self.stage {
            Stage::Done => Some(false),
            Stage::Sending
                if self
                    .plan
                    .get(self.current)
                    .is_some_and(|t| t.records.contains(&id)) =>
            {
                Some(true)
            }
            _ => None,
        }
    }

    /// `send` accepted record `id` in the current transaction.
    pub(super) fn sent(&mut self, id: u64) {
        if let Some(fate) = self.fates.get_mut(self.current) {
            fate.records.push(id);
        }
    }

    /// Another instance initialised: the open transaction is marked. Before our own
    /// `init_transactions` completed, the other instance is the older one and ours fences it.
    pub(super) fn on_fence(&mut self, now: Millis) {
        if self.stage == Stage::Init {
            return;
        }
        self.fenced_at.get_or_insert(now);
        if self.stage == Stage::Sending
            && let Some(fate) = self.fates.get_mut(self.current)
        {
            fate.open_at_fence = true;
        }
    }
}

impl Run {
    /// Advances the application: collects finished calls and starts the next one. Returns
    /// whether it called the producer (then the engine should run before time moves on).
    pub(super) fn drive_transactions(&mut self) -> Result<bool, Violation> {
        let Some(driver) = &self.txn else {
            return Ok(false);
        };
        if driver.done() {
            return Ok(false);
        }
        let finished = self.engine.take_finished_calls();
        let collected = !finished.is_empty();
        for (id, result) in finished {
            self.on_call_finished(id, result)?;
        }
        let started = self.next_call()?;
        Ok(collected || started)
    }

    /// Starts the application's next call, if it is time; returns whether it did.
    fn next_call(&mut self) -> Result<bool, Violation> {
        let Some(driver) = &self.txn else {
            return Ok(false);
        };
        if let Some(running) = &driver.running {
            let bound = driver.call_bound_ms + self.checker.allowance(running.started);
            if self.now > running.started + bound {
                return Err(format!(
                    "{:?} started at {} ms still unresolved at {} ms (P9: every call resolves within max.block.ms)",
                    running.kind, running.started, self.now
                ));
            }
            return Ok(false);
        }
        match driver.stage {
            Stage::Done => Ok(false),
            Stage::Init => self.start(Kind::Init, TxnCall::Init),
            Stage::Sending => {
                let Some(planned) = driver.plan.get(driver.current) else {
                    return Ok(false);
                };
                if self.next_send < planned.records.end {
                    return Ok(false);
                }
                let in_transaction =
                    self.engine.transaction_state() == Some(&TxnState::InTransaction);
                match (&planned.offsets, driver.offsets_done) {
                    (Some((offsets, stale)), false) if in_transaction => {
                        let call = TxnCall::SendOffsets {
                            offsets: offsets
                                .iter()
                                .map(|(partition, offset)| OffsetToCommit {
                                    partition: partition.clone(),
                                    offset: *offset,
                                    metadata: None,
                                    leader_epoch: None,
                                })
                                .collect(),
                            group: ConsumerGroupMetadata {
                                group_id: "group".into(),
                                generation_id: if *stale { 1 } else { 2 },
                                member_id: "member".into(),
                                group_instance_id: None,
                            },
                        };
                        self.start(Kind::Offsets, call)
                    }
                    _ => {
                        let commit = planned.commit;
                        self.end_transaction(commit)
                    }
                }
            }
        }
    }

    /// Commit or abort the current transaction. A commit is called even when the
    /// transaction must be aborted (it must then fail with the cause: librdkafka #3575), once;
    /// then abort.
    fn end_transaction(&mut self, commit: bool) -> Result<bool, Violation> {
        if let Some(kind) = self.txn.as_mut().and_then(|d| d.recall.take()) {
            return self.call_again_after_timeout(kind);
        }
        let tried_commit = self
            .txn
            .as_ref()
            .and_then(|d| d.fates.get(d.current))
            .is_some_and(|f| f.commit_called);
        match self.engine.transaction_state() {
            Some(TxnState::AbortableError) if commit && !tried_commit => {
                self.start(Kind::Commit, TxnCall::Commit)
            }
            Some(TxnState::AbortableError) => self.start(Kind::Abort, TxnCall::Abort),
            Some(TxnState::InTransaction) if commit => self.start(Kind::Commit, TxnCall::Commit),
            Some(TxnState::InTransaction) => self.start(Kind::Abort, TxnCall::Abort),
            _ => {
                self.give_up();
                Ok(true)
            }
        }
    }

    fn start(&mut self, kind: Kind, call: TxnCall) -> Result<bool, Violation> {
        self.note(format!("application: {}", call.name()));
        match self.engine.start_call(call, self.now) {
            Ok(id) => {
                let now = self.now;
                if let Some(driver) = &mut self.txn {
                    driver.running = Some(Running {
                        id,
                        kind,
                        started: now,
                    });
                    if kind == Kind::Commit
                        && let Some(fate) = driver.fates.get_mut(driver.current)
                    {
                        fate.commit_called = true;
                    }
                }
                Ok(true)
            }
            Err(error) if error.is_fatal() => {
                self.note(format!("application: call refused: {error}"));
                self.give_up();
                Ok(true)
            }
            Err(error)
                if kind == Kind::Commit
                    && self.engine.transaction_state() == Some(&TxnState::AbortableError) =>
            {
                // Commit of a transaction that must be aborted fails at once with the cause
                // and sends nothing (T1); the next drive aborts.
                self.note(format!("application: commit refused: {error}"));
                if let Some(driver) = &mut self.txn
                    && let Some(fate) = driver.fates.get_mut(driver.current)
                {
                    fate.commit_called = true;
                    fate.end = TxnEnd::CommitFailed(error.to_string());
                }
                Ok(true)
            }
            Err(error) => Err(format!(
                "{kind:?} refused in state {:?}: {error} (the application only calls it where T1 allows)",
                self.engine.transaction_state()
            )),
        }
    }

    /// After a commit or abort timed out: every other call is refused and sends nothing, and
    /// the same call is accepted: the state the timeout left has a way out (T1, T4; an
    /// abort after a timed-out commit once wedged the producer).
    fn call_again_after_timeout(&mut self, kind: Kind) -> Result<bool, Violation> {
        let (same, other) = match kind {
            Kind::Commit => (TxnCall::Commit, TxnCall::Abort),
            _ => (TxnCall::Abort, TxnCall::Commit),
        };
        *self
            .stats
            .transactions
            .entry("timed-out end called again")
            .or_default() += 1;
        let before = self.engine.transaction_state().cloned();
        if let Ok(id) = self.engine.start_call(other.clone(), self.now) {
            return Err(format!(
                "{} accepted while a timed-out {kind:?} must be called again (call {id}): T1",
                other.name()
            ));
        }
        if self.engine.begin_transaction(self.now).is_ok() {
            return Err(format!(
                "begin_transaction accepted while a timed-out {kind:?} must be called again: T1"
            ));
        }
        if self.engine.transaction_state() != before.as_ref() {
            return Err(format!(
                "a refused call changed the state from {before:?} to {:?}: T1",
                self.engine.transaction_state()
            ));
        }
        self.start(kind, same)
    }

    /// The producer failed fatally: what is left is abandoned and no more records are sent.
    fn give_up(&mut self) {
        if let Some(driver) = &mut self.txn {
            driver.stage = Stage::Done;
            for fate in driver.fates.iter_mut().skip(driver.current) {
                if fate.end == TxnEnd::Open {
                    fate.end = TxnEnd::Abandoned;
                }
            }
        }
        self.note("application: the producer failed; giving up".into());
        self.schedule(self.now, super::Pending::Send);
    }

    fn on_call_finished(&mut self, id: CallId, result: Result<(), Error>) -> Result<(), Violation> {
        let now = self.now;
        let state = self.engine.transaction_state().cloned();
        let Some(driver) = &mut self.txn else {
            return Ok(());
        };
        let Some(running) = driver.running.take_if(|r| r.id == id) else {
            return Err(format!("a result for call {id}, which is not running"));
        };
        self.trace.note(
            now,
            format!(
                "application: {:?} -> {result:?} (state {state:?})",
                running.kind
            ),
        );
        let after_fence = driver.fenced_at.is_some_and(|at| at <= running.started);
        let current = driver.current;
        let fate_has_records = driver
            .fates
            .get(current)
            .is_some_and(|f| !f.records.is_empty());
        if result.is_ok()
            && after_fence
            && (running.kind == Kind::Offsets || running.kind == Kind::Commit && fate_has_records)
        {
            return Err(format!(
                "{:?} started after another instance fenced the producer succeeded (T5)",
                running.kind
            ));
        }
        if state == Some(TxnState::FatalError) {
            if let Err(error) = &result
                && running.kind == Kind::Commit
                && let Some(fate) = driver.fates.get_mut(current)
            {
                fate.end = TxnEnd::CommitFailed(error.to_string());
            }
            self.give_up();
            return Ok(());
        }
        match (running.kind, result) {
            (Kind::Init, Ok(())) => {
                driver.again = 0;
                self.begin_next(false)
            }
            (Kind::Init, Err(_)) => self.call_again(),
            (Kind::Offsets, Ok(())) => {
                driver.offsets_done = true;
                if let Some((offsets, _)) = driver.plan.get(current).and_then(|p| p.offsets.clone())
                    && let Some(fate) = driver.fates.get_mut(current)
                {
                    fate.offsets = offsets;
                }
                Ok(())
            }
            (Kind::Offsets, Err(_)) => {
                // Abortable (a stale generation): the end aborts. Timed out: go on without.
                driver.offsets_done = true;
                Ok(())
            }
            (Kind::Commit, Ok(())) => {
                if let Some(fate) = driver.fates.get_mut(current) {
                    fate.end = TxnEnd::Committed;
                }
                self.begin_next(true)
            }
            (kind @ (Kind::Commit | Kind::Abort), Err(Error::Timeout(_))) => {
                // The call goes on in the producer; only the same call is valid now.
                driver.recall = Some(kind);
                self.call_again()
            }
            (Kind::Commit, Err(error)) => {
                if state == Some(TxnState::AbortableError)
                    && let Some(fate) = driver.fates.get_mut(current)
                {
                    fate.end = TxnEnd::CommitFailed(error.to_string());
                }
                // Abortable: the next drive aborts; timed out: commit is called again.
                self.call_again()
            }
            (Kind::Abort, Ok(())) => {
                if let Some(fate) = driver.fates.get_mut(current)
                    && fate.end == TxnEnd::Open
                {
                    fate.end = TxnEnd::Aborted;
                }
                self.begin_next(true)
            }
            (Kind::Abort, Err(_)) => self.call_again(),
        }
    }

    /// A call failed without ending the producer: the application calls again (the end
    /// decides between commit and abort from the state), a bounded number of times.
    fn call_again(&mut self) -> Result<(), Violation> {
        let Some(driver) = &mut self.txn else {
            return Ok(());
        };
        driver.again += 1;
        if driver.again > CALL_AGAIN {
            self.give_up();
        }
        Ok(())
    }

    /// Begins the next planned transaction (after the current one, when `advance`).
    fn begin_next(&mut self, advance: bool) -> Result<(), Violation> {
        let Some(driver) = &mut self.txn else {
            return Ok(());
        };
        if advance {
            driver.current += 1;
        }
        driver.again = 0;
        driver.offsets_done = false;
        let Some(planned) = driver.plan.get(driver.current).cloned() else {
            driver.stage = Stage::Done;
            return Ok(());
        };
        driver.stage = Stage::Sending;
        if planned.misuse {
            // Calls invalid outside a transaction fail at once (T1).
            if let Ok(id) = self.engine.start_call(TxnCall::Commit, self.now) {
                return Err(format!(
                    "commit_transaction outside a transaction was accepted (call {id}): T1"
                ));
            }
        }
        if let Err(error) = self.engine.begin_transaction(self.now) {
            if error.is_fatal() {
                self.give_up();
                return Ok(());
            }
            return Err(format!("begin_transaction in Ready failed: {error}"));
        }
        self.note(format!("application: begin transaction {}", {
            self.txn.as_ref().map_or(0, |d| d.current)
        }));
        if planned.misuse {
            if self.engine.begin_transaction(self.now).is_ok() {
                return Err("begin_transaction inside a transaction was accepted (T1)".into());
            }
            if let Ok(id) = self.engine.start_call(TxnCall::Init, self.now) {
                return Err(format!(
                    "init_transactions inside a transaction was accepted (call {id}): T1"
                ));
            }
        }
        self.schedule(self.now, super::Pending::Send);
        Ok(())
    }

    /// The end of a transactional run: what a read_committed consumer sees (T4, T5).
    pub(super) fn check_transactions(&self) -> Result<(), Violation> {
        let Some(driver) = &self.txn else {
            return Ok(());
        };
        let mut visible: BTreeMap<u64, usize> = BTreeMap::new();
        for p in self.cluster.partitions().values() {
            for id in p.read_committed() {
                *visible.entry(id).or_default() += 1;
            }
        }
        if let Some((id, n)) = visible.iter().find(|(_, n)| **n > 1) {
            return Err(format!("record {id} visible {n} times to read_committed"));
        }
        for (index, fate) in driver.fates.iter().enumerate() {
            let seen = fate
                .records
                .iter()
                .filter(|id| visible.contains_key(id))
                .count();
            let located = fate
                .records
                .iter()
                .filter(|id| self.checker.is_located(**id))
                .count();
            let what = format!(
                "transaction {index} ({:?}, {} records sent)",
                fate.end,
                fate.records.len()
            );
            match &fate.end {
                TxnEnd::Committed if seen != fate.records.len() => {
                    return Err(format!(
                        "{what}: commit returned Ok but only {seen} of its records are visible to read_committed (T4, librdkafka #3575)"
                    ));
                }
                TxnEnd::Aborted if seen > 0 => {
                    return Err(format!(
                        "{what}: aborted but {seen} of its records are visible to read_committed"
                    ));
                }
                _ if seen != 0 && seen != located => {
                    return Err(format!(
                        "{what}: partially visible: {seen} of its {located} logged records"
                    ));
                }
                _ if !fate.commit_called && seen > 0 => {
                    return Err(format!(
                        "{what}: never committed but {seen} of its records are visible"
                    ));
                }
                _ => {}
            }
        }
        self.check_committed_offsets(driver)
    }

    /// Offsets committed with a transaction are visible only if it committed, and the
    /// latest committed transaction's offsets are the ones visible.
    fn check_committed_offsets(&self, driver: &TxnDriver) -> Result<(), Violation> {
        let Some(coordinator) = self.cluster.coordinator() else {
            return Ok(());
        };
        for (tp, offset) in &coordinator.committed_offsets {
            let index = usize::try_from(offset / 1000).unwrap_or(usize::MAX);
            let Some(fate) = driver.fates.get(index) else {
                return Err(format!(
                    "{tp:?}: committed offset {offset} of no transaction"
                ));
            };
            if matches!(fate.end, TxnEnd::Aborted) || !fate.commit_called {
                return Err(format!(
                    "{tp:?}: offset {offset} of transaction {index} ({:?}) is committed",
                    fate.end
                ));
            }
        }
        for (index, fate) in driver.fates.iter().enumerate() {
            if fate.end != TxnEnd::Committed {
                continue;
            }
            for (tp, _) in &fate.offsets {
                let committed = coordinator.committed_offsets.get(tp).map(|o| o / 1000);
                let index = i64::try_from(index).unwrap_or(i64::MAX);
                if committed.is_none_or(|c| c < index) {
                    return Err(format!(
                        "{tp:?}: transaction {index} committed its offsets but the group sees {committed:?}"
                    ));
                }
            }
        }
        Ok(())
    }
}
