//! One copier of the copy loop: the real [`CopyLoop`] over a model consumer and a model
//! producer, on the simulation's virtual time.
//!
//! - [`SimConsumer`] is a consumer as [`crate::Consumer`] behaves: the real KIP-848 member
//!   state machine ([`ConsumerMember`]) with membership in the background (the world sends its
//!   heartbeats on their interval whatever the loop does, [`CopierState::maintain`]),
//!   generation holds for offset commits, refusals acted on at once, and positions over the
//!   source log (a fresh partition starts at the group's stable committed offset, KIP-447
//!   `require_stable`).
//! - [`SimProducer`] is a transactional producer as [`crate::Producer`] behaves: the real
//!   [`Engine`] and [`Accumulator`], the accumulator's send gate published after every engine
//!   step, each transactional call a future that resolves when the engine finishes it.
//!
//! Their futures are `Pending` until the simulated world has the answer; the world polls the
//! copier's application ([`application`]: `init_transactions`, then `CopyLoop::step` again and
//! again) with a no-op waker after every event, so nothing runs on a runtime or a real clock.
//! A crash drops the application future and this state without leaving the group.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use super::{TransformFaults, View};
use crate::consumer::membership::MembershipEvent;
use crate::consumer::membership::kip848::ConsumerMember;
use crate::engine::accumulator::{Accumulator, AppendError};
use crate::engine::transaction::{TxnCall, TxnLedger, TxnState};
use crate::engine::{CallId, Engine};
use crate::eos::endpoints::{CommitHold, CopySink, CopySource};
use crate::eos::{CommittedTransaction, CopyLoop, CopyLoopCounters, TransformErrorPolicy};
use crate::error::{Error, Result};
use crate::sim::entropy::Entropy;
use crate::sim::faults::StepCancellation;
use crate::types::{ConsumerGroupMetadata, OffsetToCommit};
use crate::types::{Millis, TopicPartition};
use crate::{ConsumerEvent, ConsumerRecord, DeliveryFuture, Record};
use kafka_protocol::messages::ConsumerGroupHeartbeatRequest;

/// The shortest a generation hold lasts before liveness wins (as the real consumer's).
const MIN_HOLD_MS: Millis = 1_000;
/// How often the application calls `init_transactions` again after a retriable error.
const INIT_ATTEMPTS: u32 = 1_000;

/// Everything one copier incarnation holds, shared by its consumer, its producer, its
/// application and the world (single-threaded: borrowed only inside a poll or a world step,
/// never across an await).
pub(super) struct CopierState {
    /// Virtual time: the membership's clock and the copy loop's ([`CopySource::now`]).
    now: Millis,
    member: ConsumerMember,
    /// The sequence number of the heartbeat in flight.
    heartbeat: Option<u64>,
    /// Nothing is sent to the group before the first poll (as the real consumer).
    polled_once: bool,
    /// Generation holds taken, and until when they keep heartbeats back.
    holds: usize,
    hold_until: Option<Millis>,
    /// Owned partitions and the next source offset to deliver (`None`: look up the committed
    /// one).
    positions: BTreeMap<i32, Option<i64>>,
    /// Records one poll hands over at most (`max.poll.records`).
    per_poll: usize,
    source_topic: String,
    /// The source log: per partition, the offsets of its records, ascending.
    log: Rc<Vec<Vec<i64>>>,
    pub(super) engine: Engine,
    pub(super) acc: Accumulator,
    /// Transactional calls the engine finished, until their futures take them.
    finished: BTreeMap<CallId, Result<()>>,
    /// Something changed since the world last looked (it polls again before time moves).
    acted: bool,
    /// Lines for the trace.
    notes: Vec<String>,
    /// What the loop's committed transactions reported (checked against the destination at
    /// the end).
    pub(super) transactions: Vec<CommittedTransaction>,
    /// Transactions committed and aborted.
    pub(super) commits: u64,
    pub(super) aborts: u64,
    /// Steps that failed with `Error::PartitionsLost`.
    pub(super) lost_before_commit: u64,
    /// Aborts during which records of the transaction failed for good (a batch expired while
    /// the abort drained).
    pub(super) aborts_draining_failures: u64,
    /// Source records the committed transactions reported dead-lettered, and skipped.
    pub(super) dead_lettered: u64,
    pub(super) skipped: u64,
    /// Steps that failed with `Error::Transform`.
    pub(super) transform_failures: u64,
    /// Steps dropped at an await point, and steps that failed with a timeout.
    pub(super) cancelled_steps: u64,
    pub(super) timed_out_steps: u64,
    /// The loop's counters disagreed with what it reported (the world fails the run).
    pub(super) counter_mismatch: Option<String>,
}

impl CopierState {
    /// A copier's state at `now`, with a member that subscribed already.
    #[allow(clippy::too_many_arguments)] // the parts of a copier, as the world makes them
    pub(super) fn new(
        now: Millis,
        member: ConsumerMember,
        per_poll: usize,
        source_topic: &str,
        log: Rc<Vec<Vec<i64>>>,
        engine: Engine,
        acc: Accumulator,
    ) -> Self {
        Self {
            now,
            member,
            heartbeat: None,
            polled_once: false,
            holds: 0,
            hold_until: None,
            positions: BTreeMap::new(),
            per_poll: per_poll.max(1),
            source_topic: source_topic.to_string(),
            log,
            engine,
            acc,
            finished: BTreeMap::new(),
            acted: false,
            notes: Vec::new(),
            transactions: Vec::new(),
            commits: 0,
            aborts: 0,
            lost_before_commit: 0,
            aborts_draining_failures: 0,
            dead_lettered: 0,
            skipped: 0,
            transform_failures: 0,
            cancelled_steps: 0,
            timed_out_steps: 0,
            counter_mismatch: None,
        }
    }

    /// Checks the loop's counters against what this incarnation saw: its commits and aborts,
    /// and the dead letters and skips its committed transactions reported.
    fn check_counters(&mut self, counters: CopyLoopCounters) {
        let seen = (self.commits, self.aborts, self.dead_lettered, self.skipped);
        let counted = (
            counters.transactions_committed,
            counters.transactions_aborted,
            counters.records_dead_lettered,
            counters.records_skipped,
        );
        if seen != counted && self.counter_mismatch.is_none() {
            self.counter_mismatch = Some(format!(
                "the copy loop's counters (committed, aborted, dead-lettered, skipped) are \
                 {counted:?}, its calls and reports say {seen:?}"
            ));
        }
    }

    fn note(&mut self, line: String) {
        self.acted = true;
        self.notes.push(line);
    }

    /// The trace lines since the last call, and whether anything changed.
    pub(super) fn take_progress(&mut self) -> (bool, Vec<String>) {
        (
            std::mem::take(&mut self.acted),
            std::mem::take(&mut self.notes),
        )
    }

    /// Whether no transaction is open and no call runs (initialised).
    pub(super) fn quiet(&self) -> bool {
        self.engine.transaction_state() == Some(&TxnState::Ready)
    }

    /// Where the copier is, for a failure report.
    pub(super) fn describe(&self) -> String {
        format!(
            "state {:?} positions {:?} heartbeat {:?} holds {} until {:?} owned {:?} fetchable {:?} commits {} aborts {}",
            self.engine.transaction_state(),
            self.positions,
            self.heartbeat,
            self.holds,
            self.hold_until,
            self.member.owned(),
            self.member.fetchable(),
            self.commits,
            self.aborts
        )
    }

    // ---- the consumer's background side ----

    /// The consumer's background turn at `now`: committed offsets for fresh partitions are
    /// looked up (`stable_offset`: the group's committed offset of a source partition, `None`
    /// while a transaction holds offsets for it, KIP-447 `require_stable`), and the heartbeat
    /// that is due (if no hold keeps it back) is returned for the world to send, in flight as
    /// `seq` from now on (a hold taken after this waits for its answer, as the real
    /// consumer's, where starting a request and taking a hold share a lock).
    pub(super) fn maintain(
        &mut self,
        now: Millis,
        stable_offset: impl Fn(i32) -> Option<i64>,
        seq: u64,
    ) -> Option<ConsumerGroupHeartbeatRequest> {
        self.now = now;
        for tp in self.member.fetchable() {
            if let Some(position @ None) = self.positions.get_mut(&tp.partition)
                && let Some(committed) = stable_offset(tp.partition)
            {
                *position = Some(committed);
                self.note(format!("fetch {tp:?} from {committed}"));
            }
        }
        let held = self.hold_until.is_some_and(|until| until > now);
        if !self.polled_once || self.heartbeat.is_some() || held {
            return None;
        }
        let request = self.member.poll_request(now)?;
        self.heartbeat = Some(seq);
        self.acted = true;
        Some(request)
    }

    /// Drops the positions of partitions the member no longer owns.
    fn drop_unowned(&mut self) {
        let owned: Vec<i32> = self.member.owned().iter().map(|tp| tp.partition).collect();
        self.positions.retain(|p, _| owned.contains(p));
    }

    /// The answer to the heartbeat in flight, `seq`; `Err` when the member failed fatally.
    pub(super) fn heartbeat_answered(
        &mut self,
        seq: u64,
        response: crate::protocol::messages::consumer_group_heartbeat::ConsumerGroupHeartbeatResponse,
        now: Millis,
    ) -> Result<(), String> {
        if self.heartbeat != Some(seq) {
            return Ok(());
        }
        self.now = now;
        self.heartbeat = None;
        self.acted = true;
        self.member
            .on_response(response, now, &View)
            .map_err(|e| format!("the member failed fatally: {e}"))?;
        // A fenced member's positions go at once, not when `Lost` is handed over.
        self.drop_unowned();
        Ok(())
    }

    /// The heartbeat `seq` got no answer in time; whether it was the one in flight.
    pub(super) fn heartbeat_timed_out(&mut self, seq: u64, now: Millis) -> bool {
        if self.heartbeat != Some(seq) {
            return false;
        }
        self.now = now;
        self.heartbeat = None;
        self.acted = true;
        self.member.on_request_failed(now, 50);
        true
    }

    // ---- the consumer's application side ----

    fn begin_poll(&mut self) {
        self.member.on_poll(self.now);
        self.drop_unowned();
        self.polled_once = true;
        self.acted = true;
    }

    /// What `poll` hands over now: a rebalance event first, else records.
    fn next_for_user(&mut self) -> Option<ConsumerEvent> {
        if let Some(event) = self.member.next_event(&View) {
            match &event {
                MembershipEvent::Assigned(tps) => {
                    for tp in tps {
                        self.positions.entry(tp.partition).or_insert(None);
                    }
                }
                MembershipEvent::Revoked(_) => {}
                MembershipEvent::Lost(tps) => {
                    for tp in tps {
                        self.positions.remove(&tp.partition);
                    }
                }
            }
            self.note(format!("poll: {event:?}"));
            return Some(event.into());
        }
        self.take_records().map(ConsumerEvent::Records)
    }

    /// Whether every fetchable partition's position is past the last record of its log (the
    /// model's [`Consumer::caught_up`](crate::Consumer::caught_up)).
    fn caught_up(&self) -> bool {
        let fetchable = self.member.fetchable();
        !fetchable.is_empty()
            && fetchable.iter().all(|tp| {
                let last = usize::try_from(tp.partition)
                    .ok()
                    .and_then(|p| self.log.get(p))
                    .and_then(|offsets| offsets.last().copied());
                match (self.positions.get(&tp.partition).copied().flatten(), last) {
                    (Some(position), Some(last)) => position > last,
                    (Some(_), None) => true,
                    (None, _) => false,
                }
            })
    }

    /// Up to `per_poll` records of the fetchable partitions, from their positions.
    fn take_records(&mut self) -> Option<Vec<ConsumerRecord>> {
        let topic: std::sync::Arc<str> = std::sync::Arc::from(self.source_topic.as_str());
        let mut out = Vec::new();
        for tp in self.member.fetchable() {
            let Some(Some(position)) = self.positions.get(&tp.partition).copied() else {
                continue;
            };
            let offsets = usize::try_from(tp.partition)
                .ok()
                .and_then(|p| self.log.get(p))
                .map_or(&[][..], Vec::as_slice);
            let start = offsets.partition_point(|&o| o < position);
            let mut next = position;
            for &offset in offsets.iter().skip(start) {
                if out.len() >= self.per_poll {
                    break;
                }
                out.push(ConsumerRecord {
                    topic: std::sync::Arc::clone(&topic),
                    partition: tp.partition,
                    offset,
                    timestamp: 0,
                    timestamp_type: crate::TimestampType::CreateTime,
                    key: None,
                    value: Some(bytes::Bytes::copy_from_slice(
                        &record_id(tp.partition, offset).to_be_bytes(),
                    )),
                    headers: Vec::new(),
                    leader_epoch: None,
                });
                next = offset + 1;
            }
            self.positions.insert(tp.partition, Some(next));
            if out.len() >= self.per_poll {
                break;
            }
        }
        if out.is_empty() {
            return None;
        }
        self.note(format!(
            "poll: {} records {:?}",
            out.len(),
            out.iter()
                .map(|r| (r.partition, r.offset))
                .collect::<Vec<_>>()
        ));
        Some(out)
    }

    // ---- the producer ----

    /// The engine took a step: the accumulator's send gate gets its answer (as the real
    /// producer publishes it whenever it releases the engine's lock).
    pub(super) fn engine_stepped(&mut self) {
        self.acc.gate().publish(self.engine.check_send());
        for (id, result) in self.engine.take_finished_calls() {
            self.acted = true;
            self.finished.insert(id, result);
        }
    }
}

/// The consumer side of a copier (see the module docs).
pub(super) struct SimConsumer {
    state: Rc<RefCell<CopierState>>,
}

impl CopySource for SimConsumer {
    type Hold = SimHold;

    fn now(&self) -> Millis {
        self.state.borrow().now
    }

    async fn poll_timeout(&mut self, timeout: Duration) -> Result<Option<ConsumerEvent>> {
        let deadline = {
            let mut state = self.state.borrow_mut();
            state.begin_poll();
            state.now + Millis::try_from(timeout.as_millis()).unwrap_or(Millis::MAX)
        };
        poll_fn(|_| {
            let mut state = self.state.borrow_mut();
            if let Some(event) = state.next_for_user() {
                return Poll::Ready(Ok(Some(event)));
            }
            if state.now >= deadline {
                state.acted = true;
                return Poll::Ready(Ok(None));
            }
            Poll::Pending
        })
        .await
    }

    fn assignment(&self) -> Vec<TopicPartition> {
        self.state.borrow().member.owned()
    }

    fn seek(&mut self, partition: &TopicPartition, offset: i64) -> Result<()> {
        let mut state = self.state.borrow_mut();
        let Some(position) = state.positions.get_mut(&partition.partition) else {
            return Err(Error::InvalidState(format!(
                "seek: {partition:?} is not assigned to this consumer"
            )));
        };
        *position = Some(offset);
        state.note(format!("seek {partition:?} to {offset}"));
        Ok(())
    }

    async fn hold_generation(&self) -> SimHold {
        // The heartbeat in flight is answered first (at most a request timeout), so the
        // metadata is the coordinator's.
        let deadline = self.state.borrow().now + super::HEARTBEAT_TIMEOUT_MS;
        poll_fn(|_| {
            let state = self.state.borrow();
            if state.heartbeat.is_none() || state.now >= deadline {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
        let mut state = self.state.borrow_mut();
        let limit = state.member.heartbeat_interval_ms().max(MIN_HOLD_MS);
        let until = state.now + limit;
        state.hold_until = Some(state.hold_until.map_or(until, |t| t.max(until)));
        state.holds += 1;
        let metadata = state.member.group_metadata();
        state.note(format!(
            "hold generation {} of {}",
            metadata.generation_id, metadata.member_id
        ));
        SimHold {
            state: Rc::clone(&self.state),
            metadata,
        }
    }

    fn metric_labels(&self) -> (String, Option<String>) {
        let group = self.state.borrow().member.group_metadata().group_id;
        ("sim-copier".to_owned(), Some(group))
    }

    /// The model cluster's log ends are not the copier's to read: the simulation checks the
    /// loop's counters, not its lag.
    fn source_lag(&self) -> Option<i64> {
        None
    }

    fn caught_up(&self) -> bool {
        self.state.borrow().caught_up()
    }
}

/// A generation hold of a [`SimConsumer`].
pub(super) struct SimHold {
    state: Rc<RefCell<CopierState>>,
    metadata: ConsumerGroupMetadata,
}

impl CommitHold for SimHold {
    fn metadata(&self) -> &ConsumerGroupMetadata {
        &self.metadata
    }

    fn refused(&self, error: &Error) -> bool {
        let Some(code) = error.code() else {
            return false;
        };
        let mut state = self.state.borrow_mut();
        if state.member.group_metadata() != self.metadata {
            return false;
        }
        let now = state.now;
        let applied = state.member.commit_refused(code, now);
        if applied {
            state.drop_unowned();
            state.note(format!(
                "offset commit refused ({code}): membership acts on it"
            ));
        }
        applied
    }
}

impl Drop for SimHold {
    fn drop(&mut self) {
        let mut state = self.state.borrow_mut();
        state.holds = state.holds.saturating_sub(1);
        if state.holds == 0 {
            state.hold_until = None;
        }
        state.acted = true;
    }
}

/// The producer side of a copier (see the module docs).
pub(super) struct SimProducer {
    state: Rc<RefCell<CopierState>>,
}

impl SimProducer {
    /// Starts `call` and waits until the engine finished it.
    async fn call(&self, call: TxnCall) -> Result<()> {
        let name = call.name();
        let aborting = call == TxnCall::Abort;
        let failures = |state: &CopierState| {
            let counters = state.engine.counters();
            counters.records_failed + counters.records_indeterminate
        };
        let (id, failed_before) = {
            let mut state = self.state.borrow_mut();
            let failed_before = failures(&state);
            let now = state.now;
            let started = state.engine.start_call(call, now);
            state.engine_stepped();
            state.note(format!("call {name}: {started:?}"));
            (started?, failed_before)
        };
        let mut waiting = CallWaiter {
            state: &self.state,
            id: Some(id),
        };
        let result = poll_fn(|_| match self.state.borrow_mut().finished.remove(&id) {
            Some(result) => Poll::Ready(result),
            None => Poll::Pending,
        })
        .await;
        waiting.id = None;
        let mut state = self.state.borrow_mut();
        state.note(format!("{name} -> {result:?}"));
        if result.is_ok() && aborting {
            state.aborts += 1;
            if failures(&state) > failed_before {
                state.aborts_draining_failures += 1;
            }
        }
        result
    }

    /// `Producer::init_transactions`.
    async fn init_transactions(&self) -> Result<()> {
        self.call(TxnCall::Init).await
    }
}

/// Tells the engine when a transactional call's future is dropped before its result, as the
/// real producer does: a commit or abort goes on and must be called again, any other call
/// is abandoned.
struct CallWaiter<'a> {
    state: &'a RefCell<CopierState>,
    /// The call still awaited; `None` once its result arrived.
    id: Option<CallId>,
}

impl Drop for CallWaiter<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            let mut state = self.state.borrow_mut();
            state.engine.call_cancelled(id);
            state.engine_stepped();
            state.finished.remove(&id);
            state.note(format!("call {id} dropped by its caller"));
        }
    }
}

impl CopySink for SimProducer {
    fn begin_transaction(&self) -> Result<()> {
        let mut state = self.state.borrow_mut();
        let now = state.now;
        let begun = state.engine.begin_transaction(now);
        state.engine_stepped();
        state.note(format!("begin transaction: {begun:?}"));
        begun
    }

    async fn send(&self, record: Record) -> Result<DeliveryFuture> {
        let state = &mut *self.state.borrow_mut();
        let tp = TopicPartition::new(record.topic, record.partition.unwrap_or(0));
        let now = state.now;
        let timestamp = record
            .timestamp
            .unwrap_or_else(|| i64::try_from(now).unwrap_or(0));
        let appended = state.acc.append(
            &tp,
            timestamp,
            record.key.as_deref(),
            record.value.as_deref(),
            &record.headers,
            now,
        );
        state.acted = true;
        match appended {
            Ok(appended) => Ok(DeliveryFuture::new(
                appended.completion,
                appended.index,
                timestamp,
            )),
            Err(AppendError::Refused(error)) => {
                state.note(format!("send refused: {error}"));
                Err(error)
            }
            Err(AppendError::TooLarge { size, max, setting }) => {
                Err(Error::RecordTooLarge { size, max, setting })
            }
            // The model's buffer (16 MiB) holds every run's records.
            Err(AppendError::BufferFull) => Err(Error::Timeout("buffer.memory full".into())),
        }
    }

    async fn send_offsets_to_transaction(
        &self,
        offsets: Vec<OffsetToCommit>,
        group: &ConsumerGroupMetadata,
    ) -> Result<()> {
        self.call(TxnCall::SendOffsets {
            offsets,
            group: group.clone(),
        })
        .await
    }

    async fn commit_transaction(&self) -> Result<()> {
        self.call(TxnCall::Commit).await
    }

    async fn abort_transaction(&self) -> Result<()> {
        self.call(TxnCall::Abort).await
    }

    fn transaction_ledger(&self) -> Option<TxnLedger> {
        self.state.borrow().engine.transaction_ledger()
    }
}

/// A copier's application: `init_transactions`, then the real [`CopyLoop`] step after step,
/// copying source partition `p` into destination partition `p` (each record's value its
/// [`record_id`]) through a transform that fails as `faults` says. It ends only with the
/// producer's fatal error (the world restarts the copier then); otherwise the world's
/// deadline ends the run, and a crash drops it.
pub(super) fn application(
    state: &Rc<RefCell<CopierState>>,
    destination: &str,
    commit_every: usize,
    commit_interval: Duration,
    faults: &TransformFaults,
    cancellation: Cancellation,
) -> Pin<Box<dyn Future<Output = Error>>> {
    let consumer = SimConsumer {
        state: Rc::clone(state),
    };
    let producer = SimProducer {
        state: Rc::clone(state),
    };
    let state = Rc::clone(state);
    let destination = destination.to_string();
    let faults = faults.clone();
    let faults_skip = faults.policy == TransformErrorPolicy::Skip;
    Box::pin(async move {
        let mut initialised = Err(Error::Timeout("init_transactions never ran".into()));
        for _ in 0..INIT_ATTEMPTS {
            initialised = producer.init_transactions().await;
            match &initialised {
                Err(e) if !e.is_fatal() => {}
                _ => break,
            }
        }
        if let Err(e) = initialised {
            return e;
        }
        let clock = Rc::clone(&state);
        let transform_faults = faults.clone();
        let mut failed_once = BTreeSet::new();
        let transform = move |record: ConsumerRecord| {
            let id = record_id(record.partition, record.offset);
            let fails = transform_fails(&transform_faults, id)
                && (transform_faults.policy != TransformErrorPolicy::Fail
                    || failed_once.insert(id));
            let until = clock.borrow().now + transform_delay(&transform_faults, id);
            let clock = Rc::clone(&clock);
            let output = Record::to(destination.as_str())
                .partition(record.partition)
                .value(id.to_be_bytes().to_vec());
            async move {
                poll_fn(|_| {
                    if clock.borrow().now >= until {
                        Poll::Ready(())
                    } else {
                        Poll::Pending
                    }
                })
                .await;
                if fails {
                    Err(format!("record {id:#x} does not transform"))
                } else {
                    Ok(vec![output])
                }
            }
        };
        let mut copy_loop = CopyLoop::new(consumer, producer, transform)
            .commit_every(commit_every, commit_interval)
            .on_transform_error(faults.policy.clone())
            .transform_concurrency(faults.concurrency);
        let mut drops = Entropy::from_seed(cancellation.seed);
        // Bounded by the world: every step waits on virtual time or on an answer, and the
        // world stops polling at its deadline.
        loop {
            let limit = cancellation.plan.draw(&mut drops);
            let Some(stepped) = within_polls(copy_loop.step(), limit).await else {
                let mut state = state.borrow_mut();
                state.cancelled_steps += 1;
                state.note(format!("step dropped after {limit:?} waits"));
                continue;
            };
            match stepped {
                Ok(Some(transaction)) => {
                    let mut state = state.borrow_mut();
                    state.note(format!(
                        "committed {} records, consumed {:?}",
                        transaction.records_in(),
                        transaction
                            .consumed
                            .iter()
                            .map(|c| (c.partition.partition, c.from, c.next))
                            .collect::<Vec<_>>()
                    ));
                    state.commits += 1;
                    state.dead_lettered += transaction.dead_letters.len() as u64;
                    if faults_skip {
                        state.skipped += transaction
                            .copies
                            .iter()
                            .filter(|c| c.destinations.is_empty())
                            .count() as u64;
                    }
                    state.transactions.push(transaction);
                    state.check_counters(copy_loop.counters());
                }
                Ok(None) => {}
                Err(e) if e.is_fatal() => return e,
                Err(e) => {
                    let mut state = state.borrow_mut();
                    match e {
                        Error::PartitionsLost { .. } => state.lost_before_commit += 1,
                        Error::Transform { .. } => state.transform_failures += 1,
                        Error::Timeout(_) => state.timed_out_steps += 1,
                        _ => {}
                    }
                    state.note(format!("step failed: {e}"));
                    state.check_counters(copy_loop.counters());
                }
            }
        }
    })
}

/// Which of a copier incarnation's steps its application drops ([`StepCancellation`]), and
/// the seed of its draws.
pub(super) struct Cancellation {
    pub(super) plan: StepCancellation,
    pub(super) seed: u64,
}

/// Runs `future` to its end, or drops it once it has returned `Pending` `limit` times
/// (`None`: never): what a timeout around it does, at whichever await point it reached.
async fn within_polls<F: Future>(future: F, limit: Option<u32>) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let mut waits = 0;
    poll_fn(|cx| match future.as_mut().poll(cx) {
        Poll::Ready(output) => Poll::Ready(Some(output)),
        Poll::Pending if limit.is_some_and(|limit| waits >= limit) => Poll::Ready(None),
        Poll::Pending => {
            waits += 1;
            Poll::Pending
        }
    })
    .await
}

/// Whether the transform of `faults` fails on the record with id `id` (by its value alone).
pub fn transform_fails(faults: &TransformFaults, id: u64) -> bool {
    mix(id ^ faults.salt) % 1_000 < u64::from(faults.per_mille)
}

/// How long the transform of `faults` takes on the record with id `id`.
fn transform_delay(faults: &TransformFaults, id: u64) -> Millis {
    (mix(id ^ faults.salt) >> 32) % (faults.max_delay_ms + 1)
}

/// SplitMix64's finaliser: a record id spread over all 64 bits.
fn mix(x: u64) -> u64 {
    let x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The id a copied record carries: its source partition and offset.
pub fn record_id(partition: i32, offset: i64) -> u64 {
    (u64::from(partition.unsigned_abs()) << 32) | (u64::try_from(offset).unwrap_or(0) & 0xFFFF_FFFF)
}

/// One copier incarnation: its state and its application's future.
pub(super) struct Copier {
    pub(super) state: Rc<RefCell<CopierState>>,
    pub(super) application: Pin<Box<dyn Future<Output = Error>>>,
}
