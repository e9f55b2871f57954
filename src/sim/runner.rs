//! The simulation driver: it plays the role of the tokio driver (carrying out the engine's
//! actions, feeding it events) over a model network and the model cluster, on virtual time.
//!
//! One step is one event (a record sent, a request reaching a broker, an answer or a failure
//! reaching the engine, a metadata answer, a fault) or one engine timer, followed by an engine
//! poll; the checkers run after each step. Events at the same virtual millisecond run in the
//! order they were scheduled, and every random choice comes from the run's [`Entropy`], so a
//! seed replays exactly.
//!
//! Network model: one connection per broker at a time, as the driver keeps. Requests reach the
//! broker in the order they were written and answers come back in order (TCP, and Kafka
//! answers a connection's requests in order); a delay holds back what follows it on the same
//! connection. When a connection closes (the engine's `Disconnect`, a reset, a crash) every
//! request outstanding on it fails with `written: true`; a request still on its way may yet
//! reach the broker (bytes already sent) unless the broker crashed, and then its answer is
//! thrown away.

mod txn;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use txn::TxnDriver;
pub use txn::{TxnEnd, TxnFate};

use super::cluster::{Cluster, reject};
use super::entropy::Entropy;
use super::faults::{
    ErrorTiming, Fault, FaultRates, InjectedError, draw_identity_error, draw_produce_error, timing,
};
use super::invariants::{Checker, FNV_OFFSET, Violation, fnv1a};
use super::workload::Workload;
use super::{Failure, Report, SimConfig, Stats};
use crate::engine::accumulator::{Accumulator, AppendError};
use crate::engine::completion::BatchCompletion;
use crate::engine::transaction::{CoordinatorKey, TxnRequest, TxnResponse};
use crate::engine::{Action, Engine, Event, PartitionResponse, ProducerIdentity, RequestId};
use crate::error::Error;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::record_batch::{SealedBatch, increment_sequence};
use crate::types::{BrokerId, Millis, TopicPartition};

/// Spontaneous faults, each recurring at its own mean interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Recurring {
    Reset,
    MoveLeader,
    Crash,
    Expire,
    Retention,
    Jump,
}

impl Recurring {
    const ALL: [Recurring; 6] = [
        Recurring::Reset,
        Recurring::MoveLeader,
        Recurring::Crash,
        Recurring::Expire,
        Recurring::Retention,
        Recurring::Jump,
    ];

    fn interval(self, rates: &FaultRates) -> Millis {
        match self {
            Recurring::Reset => rates.reset_every_ms,
            Recurring::MoveLeader => rates.move_leader_every_ms,
            Recurring::Crash => rates.crash_every_ms,
            Recurring::Expire => rates.expire_every_ms,
            Recurring::Retention => rates.retention_every_ms,
            Recurring::Jump => rates.jump_every_ms,
        }
    }
}

/// Something due at a virtual time.
#[derive(Debug)]
enum Pending {
    /// The workload's next record(s) are due (or the buffer may have room again).
    Send,
    /// A request reaches its broker.
    Arrive(RequestId),
    /// An answer reaches the engine.
    Deliver(RequestId),
    /// A request fails without answer.
    Failed { request: RequestId, written: bool },
    /// A metadata answer reaches the engine.
    Metadata(Vec<(TopicPartition, Option<BrokerId>)>),
    /// A connection resets.
    Close(usize),
    /// A fault, scheduled or drawn.
    Fault(Fault),
    /// Time to draw the next fault of a recurring kind.
    Recur(Recurring),
}

#[derive(Debug)]
enum Body {
    Produce(Vec<(TopicPartition, SealedBatch)>),
    InitProducerId,
    FindCoordinator(CoordinatorKey),
    Coordinator(TxnRequest),
}

#[derive(Debug)]
enum Answer {
    Produce(Vec<PartitionResponse>),
    Identity(Result<ProducerIdentity, Error>),
    Txn(TxnResponse),
}

/// A request the driver wrote and that has not been answered or failed yet.
#[derive(Debug)]
struct Travelling {
    connection: usize,
    /// Taken when the request reaches the broker.
    body: Option<Body>,
    /// Its connection closed after it was written: it may still reach the broker, but nobody
    /// reads its answer.
    orphan: bool,
    answer: Option<Answer>,
}

#[derive(Debug)]
struct Connection {
    broker: BrokerId,
    open: bool,
    /// The latest arrival of a request written on it (requests arrive in order).
    last_arrival: Millis,
    /// The latest arrival of an answer on it (answers come back in order).
    last_answer: Millis,
}

/// The records of one batch, sharing its completion.
#[derive(Debug)]
struct Group {
    completion: Arc<BatchCompletion>,
    /// (record id, index in the batch).
    records: Vec<(u64, i32)>,
}

/// The last lines of what happened, and a digest of all of it.
#[derive(Debug)]
struct Trace {
    lines: VecDeque<String>,
    keep: usize,
    digest: u64,
}

impl Trace {
    fn note(&mut self, now: Millis, line: String) {
        let line = format!("{now:>8} ms  {line}");
        self.digest = fnv1a(self.digest, line.as_bytes());
        self.lines.push_back(line);
        if self.lines.len() > self.keep {
            self.lines.pop_front();
        }
    }
}

/// One simulated run.
pub(super) struct Run {
    engine: Engine,
    acc: Accumulator,
    cluster: Cluster,
    entropy: Entropy,
    rates: FaultRates,
    injected: Vec<InjectedError>,
    workload: Workload,
    next_send: usize,
    start_sequences: Vec<(TopicPartition, i32)>,
    first_identity_seen: bool,
    now: Millis,
    step: u64,
    max_steps: u64,
    /// No run lasts past this virtual time (P9).
    deadline: Millis,
    queue: BTreeMap<(Millis, u64), Pending>,
    queued: u64,
    connections: Vec<Connection>,
    current: BTreeMap<BrokerId, usize>,
    network: BTreeMap<RequestId, Travelling>,
    blackholed: BTreeSet<BrokerId>,
    /// Extra latency of requests written to a broker (a scenario's latency spike).
    slow: BTreeMap<BrokerId, Millis>,
    groups: Vec<Group>,
    checker: Checker,
    /// The transactional application, for a transactional producer.
    txn: Option<TxnDriver>,
    trace: Trace,
    stats: Stats,
}

impl Run {
    pub(super) fn new(config: SimConfig, entropy: Entropy) -> Self {
        let SimConfig {
            engine,
            engine_seed,
            accumulator,
            cluster,
            workload,
            rates,
            scripted,
            injected,
            start_sequences,
            max_steps,
            trace_lines,
        } = config;
        let timeouts = engine.delivery_timeout_ms + engine.request_timeout_ms;
        let jumps: Millis = scripted
            .iter()
            .map(|f| match f.fault {
                Fault::ClockJump { ms } => ms,
                _ => 0,
            })
            .sum();
        // Generous: every record gets its own bound checked; this only stops a run that
        // keeps going for another reason (a fault loop, a sender blocked forever).
        let deadline = workload
            .end_ms()
            .saturating_add(timeouts.saturating_mul(40))
            .saturating_add(jumps)
            .saturating_add(rates.jump_max_ms.saturating_mul(20));
        let txn = engine.transaction.as_ref().and_then(|t| {
            let plan = workload.transactions.clone()?;
            let bound = t.call_timeout_ms
                + engine.request_timeout_ms
                + engine.retry_backoff_max_ms
                + rates.max_delay_ms
                + 50;
            Some(TxnDriver::new(plan, bound))
        });
        let deadline = deadline.saturating_add(txn.as_ref().map_or(0, |d| {
            let calls = Millis::try_from(d.fates.len()).unwrap_or(0) + 1;
            let call = engine.transaction.as_ref().map_or(0, |t| t.call_timeout_ms);
            calls.saturating_mul(call.saturating_mul(12))
        }));
        let checker = Checker::new(
            workload
                .records
                .iter()
                .map(|r| r.partition.clone())
                .collect(),
            timeouts,
        );
        let mut run = Self {
            engine: Engine::new(engine, engine_seed),
            acc: Accumulator::new(accumulator),
            cluster: Cluster::new(cluster),
            entropy,
            rates,
            injected,
            workload,
            next_send: 0,
            start_sequences,
            first_identity_seen: false,
            now: 0,
            step: 0,
            max_steps,
            deadline,
            queue: BTreeMap::new(),
            queued: 0,
            connections: Vec::new(),
            current: BTreeMap::new(),
            network: BTreeMap::new(),
            blackholed: BTreeSet::new(),
            slow: BTreeMap::new(),
            groups: Vec::new(),
            checker,
            txn,
            trace: Trace {
                lines: VecDeque::new(),
                keep: trace_lines,
                digest: FNV_OFFSET,
            },
            stats: Stats::default(),
        };
        for (partition, sequence) in run.start_sequences.clone() {
            run.engine.set_next_sequence(partition, sequence);
        }
        if let Some(first) = run.workload.records.first() {
            run.schedule(first.at, Pending::Send);
        }
        for timed in scripted {
            if timed.at == 0 {
                // In place from the start: the engine's first poll already sends requests.
                run.apply(timed.fault);
            } else {
                run.schedule(timed.at, Pending::Fault(timed.fault));
            }
        }
        for kind in Recurring::ALL {
            run.schedule_recurring(kind);
        }
        run
    }

    fn schedule(&mut self, at: Millis, pending: Pending) {
        self.queued += 1;
        self.queue.insert((at, self.queued), pending);
    }

    fn schedule_recurring(&mut self, kind: Recurring) {
        let interval = kind.interval(&self.rates);
        if interval > 0 {
            let at = self.now + self.entropy.range(1, 2 * interval);
            self.schedule(at, Pending::Recur(kind));
        }
    }

    fn note(&mut self, line: String) {
        self.trace.note(self.now, line);
    }

    fn fail(&self, violation: Violation) -> Failure {
        Failure {
            step: self.step,
            now_ms: self.now,
            violation,
            trace: self.trace.lines.iter().cloned().collect(),
        }
    }

    /// Runs to the end: every record sent and its future resolved.
    pub(super) fn run(mut self) -> Result<Report, Failure> {
        loop {
            self.step += 1;
            self.stats.steps += 1;
            if self.step > self.max_steps {
                let violation = format!(
                    "the run did not end within {} steps (P9: no silent stall)",
                    self.max_steps
                );
                return Err(self.fail(violation));
            }
            if self.now > self.deadline {
                let violation = format!(
                    "the run did not end by {} ms of virtual time (P9: no silent stall)",
                    self.deadline
                );
                return Err(self.fail(violation));
            }
            let actions = self.engine.poll(self.now, &self.acc);
            // A poll fills every free in-flight slot (ARCHITECTURE.md, performance shape): what
            // one more dispatch round would send is nothing (else the pipeline shrinks to one).
            let unused = self.engine.sendable_round(self.now);
            if !unused.is_empty() {
                return Err(self.fail(format!(
                    "a poll left in-flight slots unused while batches could go out: {unused:?}"
                )));
            }
            let acted = match self
                .execute(actions)
                .and_then(|()| self.observe())
                .and_then(|()| self.drive_transactions())
            {
                Ok(acted) => acted,
                Err(v) => return Err(self.fail(v)),
            };
            if acted {
                // The application called the producer: the engine acts on it at once.
                continue;
            }
            if self.finished() {
                break;
            }
            let wake = self.engine.next_wakeup(self.now, &self.acc);
            let event_at = self.queue.keys().next().map(|&(at, _)| at);
            let event_first = match (event_at, wake) {
                (Some(at), Some(wake)) => at <= wake,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if event_first {
                if let Some(((at, _), pending)) = self.queue.pop_first() {
                    self.now = self.now.max(at);
                    if let Err(v) = self.process(pending) {
                        return Err(self.fail(v));
                    }
                }
            } else if let Some(wake) = wake {
                self.now = wake;
                self.note("engine timer".into());
            } else {
                return Err(self.fail(
                    "records unresolved, nothing scheduled and no engine timer (P9: silent stall)"
                        .into(),
                ));
            }
        }
        if let Err(v) = self.check_end() {
            return Err(self.fail(v));
        }
        let transactions = self
            .txn
            .as_ref()
            .map(|d| d.fates.clone())
            .unwrap_or_default();
        if self.txn.is_some() {
            self.stats.transactional_runs += 1;
        }
        for fate in &transactions {
            let end = match fate.end {
                TxnEnd::Open => "open",
                TxnEnd::Committed => "committed",
                TxnEnd::CommitFailed(_) => "commit failed",
                TxnEnd::Aborted => "aborted",
                TxnEnd::Abandoned => "abandoned",
            };
            *self.stats.transactions.entry(end).or_default() += 1;
        }
        Ok(Report {
            read_committed: self
                .cluster
                .partitions()
                .iter()
                .map(|(tp, p)| (tp.clone(), p.read_committed()))
                .collect(),
            transactions,
            end_ms: self.now,
            fates: self.checker.fates().to_vec(),
            counters: self.engine.counters().clone(),
            wire: self.checker.wire().to_vec(),
            logs: self
                .cluster
                .partitions()
                .iter()
                .map(|(tp, p)| (tp.clone(), p.log.clone()))
                .collect(),
            stats: self.stats,
            digest: self.trace.digest,
            trace: self.trace.lines.into_iter().collect(),
        })
    }

    fn finished(&self) -> bool {
        self.next_send >= self.workload.records.len()
            && self.groups.is_empty()
            && self.txn.as_ref().is_none_or(TxnDriver::done)
    }

    fn check_end(&self) -> Result<(), Violation> {
        self.checker.at_end()?;
        self.check_transactions()?;
        self.checker.check_counters(self.engine.counters())?;
        if !self.engine.is_idle(&self.acc) || self.engine.unresolved_batches() > 0 {
            return Err(format!(
                "every future resolved but the engine still holds {} batches",
                self.engine.unresolved_batches()
            ));
        }
        Ok(())
    }

    /// Collects resolved futures and checks them, the counters and the deadlines.
    fn observe(&mut self) -> Result<(), Violation> {
        let mut position = 0;
        while let Some(group) = self.groups.get_mut(position) {
            // Record by record: a batch split after MESSAGE_TOO_LARGE resolves its records
            // from its parts, each with its index there, and the parts resolve one by one.
            let completion = Arc::clone(&group.completion);
            let mut resolved = Vec::new();
            group
                .records
                .retain(|&(id, index)| match completion.record_outcome(index) {
                    Some((outcome, index)) => {
                        resolved.push((id, index, outcome));
                        false
                    }
                    None => true,
                });
            if group.records.is_empty() {
                self.groups.remove(position);
            } else {
                position += 1;
            }
            let mut last_note = String::new();
            for (id, index, outcome) in resolved {
                self.checker.on_resolved(id, index, &outcome, self.now)?;
                let note = match &outcome {
                    Ok(ack) => format!("resolved: acked at {}", ack.base_offset),
                    Err(e) => format!("resolved: {e}"),
                };
                if note != last_note {
                    self.note(note.clone());
                    last_note = note;
                }
            }
        }
        self.checker.check_counters(self.engine.counters())?;
        self.checker.check_deadlines(self.now)
    }

    // ---- the engine's actions ----

    fn execute(&mut self, actions: Vec<Action>) -> Result<(), Violation> {
        // The engine emits `Disconnect` while expiring requests, before it dispatches new ones
        // in the same poll; close first, in broker order (the engine's own order comes from a
        // HashMap and would make a run irreproducible).
        let disconnects: BTreeSet<BrokerId> = actions
            .iter()
            .filter_map(|a| match a {
                Action::Disconnect { broker } => Some(*broker),
                _ => None,
            })
            .collect();
        for broker in disconnects {
            self.note(format!("engine: disconnect broker {broker}"));
            if let Some(&connection) = self.current.get(&broker) {
                self.close(connection, false);
            }
        }
        for action in actions {
            match action {
                Action::Produce {
                    request,
                    broker,
                    batches,
                    ..
                } => self.send_produce(request, broker, batches)?,
                Action::InitProducerId { request } => self.send_init_producer_id(request),
                Action::RefreshMetadata => self.refresh_metadata(),
                Action::Disconnect { .. } => {}
                Action::FindCoordinator { request, .. } | Action::Coordinator { request, .. }
                    if self.cluster.coordinator().is_none() =>
                {
                    return Err(format!(
                        "transactional request {request} from a producer without transactional.id"
                    ));
                }
                Action::FindCoordinator { request, key } => {
                    // Any live broker answers FindCoordinator.
                    let live = self.cluster.live_brokers();
                    let broker = self.entropy.pick(&live).copied();
                    self.note(format!(
                        "engine: FindCoordinator {request} {key:?} via {broker:?}"
                    ));
                    if !self.unwritable(request, broker)
                        && let Some(broker) = broker
                    {
                        self.write(request, broker, Body::FindCoordinator(key));
                    }
                }
                Action::Coordinator {
                    request,
                    broker,
                    body,
                } => {
                    self.note(format!(
                        "engine: {request} to coordinator {broker}: {body:?}"
                    ));
                    if !self.unwritable(request, Some(broker)) {
                        self.write(request, broker, Body::Coordinator(body));
                    }
                }
            }
        }
        Ok(())
    }

    fn connection(&mut self, broker: BrokerId) -> usize {
        if let Some(&c) = self.current.get(&broker)
            && self.connections.get(c).is_some_and(|c| c.open)
        {
            return c;
        }
        self.connections.push(Connection {
            broker,
            open: true,
            last_arrival: self.now,
            last_answer: self.now,
        });
        let c = self.connections.len() - 1;
        self.current.insert(broker, c);
        c
    }

    /// Network latency, plus a fault delay sometimes.
    fn latency(&mut self) -> Millis {
        let mut latency = self.entropy.range(1, 10);
        if self.entropy.chance(self.rates.delay) {
            latency += self.entropy.range(0, self.rates.max_delay_ms);
            self.stats.fault("delay");
        }
        latency
    }

    /// Writes `body` on the broker's connection, unless it cannot be written.
    fn write(&mut self, request: RequestId, broker: BrokerId, body: Body) {
        let connection = self.connection(broker);
        let extra = self.slow.get(&broker).copied().unwrap_or(0);
        let at = self.now + self.latency() + extra;
        let Some(c) = self.connections.get_mut(connection) else {
            return;
        };
        let at = at.max(c.last_arrival);
        c.last_arrival = at;
        self.network.insert(
            request,
            Travelling {
                connection,
                body: Some(body),
                orphan: false,
                answer: None,
            },
        );
        self.schedule(at, Pending::Arrive(request));
    }

    /// Whether a request to `broker` fails before it is written (broker down, or the fault
    /// schedule drops it); if so its failure is scheduled.
    fn unwritable(&mut self, request: RequestId, broker: Option<BrokerId>) -> bool {
        let refused = broker.is_none_or(|b| !self.cluster.is_up(b));
        if !refused && !self.entropy.chance(self.rates.drop_request) {
            return false;
        }
        self.stats.fault("request not written");
        self.note(format!(
            "request {request} to {broker:?} not written ({})",
            if refused { "refused" } else { "dropped" }
        ));
        let at = self.now + self.entropy.range(0, 5);
        self.schedule(
            at,
            Pending::Failed {
                request,
                written: false,
            },
        );
        true
    }

    fn send_produce(
        &mut self,
        request: RequestId,
        broker: BrokerId,
        batches: Vec<(TopicPartition, SealedBatch)>,
    ) -> Result<(), Violation> {
        self.stats.produce_requests += 1;
        let summary: Vec<String> = batches
            .iter()
            .map(|(tp, b)| {
                format!(
                    "{tp:?}[{}/{} seq {}..={}]",
                    b.producer_id(),
                    b.producer_epoch(),
                    b.base_sequence(),
                    b.last_sequence()
                )
            })
            .collect();
        self.note(format!(
            "engine: produce {request} to broker {broker}: {}",
            summary.join(" ")
        ));
        let unwritable = self.unwritable(request, Some(broker));
        self.checker.on_request(&batches, self.now, !unwritable)?;
        if unwritable {
            return Ok(());
        }
        self.stats.batches_written += u64::try_from(batches.len()).unwrap_or(0);
        self.write(request, broker, Body::Produce(batches));
        Ok(())
    }

    fn send_init_producer_id(&mut self, request: RequestId) {
        self.stats.init_producer_id_requests += 1;
        // Any live broker finds the coordinator for an idempotent producer.
        let live = self.cluster.live_brokers();
        let broker = self.entropy.pick(&live).copied();
        self.note(format!("engine: InitProducerId {request} via {broker:?}"));
        if self.unwritable(request, broker) {
            return;
        }
        if let Some(broker) = broker {
            self.write(request, broker, Body::InitProducerId);
        }
    }

    fn refresh_metadata(&mut self) {
        if self.cluster.live_brokers().is_empty() {
            self.note("engine: metadata refresh, no broker answers".into());
            return;
        }
        let brokers = self.cluster.config().brokers.clone();
        let leaders = self
            .cluster
            .leaders()
            .into_iter()
            .map(|(tp, leader)| {
                if !self.entropy.chance(self.rates.stale_metadata) {
                    return (tp, Some(leader));
                }
                self.stats.fault("stale metadata");
                if self.entropy.chance(500) {
                    (tp, None)
                } else {
                    (tp, self.entropy.pick(&brokers).copied())
                }
            })
            .collect::<Vec<_>>();
        self.note(format!("engine: metadata refresh -> {leaders:?}"));
        let at = self.now + self.entropy.range(1, 10);
        self.schedule(at, Pending::Metadata(leaders));
    }

    /// Closes a connection: everything outstanding on it fails with `written: true`; what
    /// has not reached the broker yet may still (unless the broker crashed).
    fn close(&mut self, connection: usize, crash: bool) {
        let Some(c) = self.connections.get_mut(connection) else {
            return;
        };
        if !c.open {
            return;
        }
        c.open = false;
        let broker = c.broker;
        if self.current.get(&broker) == Some(&connection) {
            self.current.remove(&broker);
        }
        let affected: Vec<RequestId> = self
            .network
            .iter()
            .filter(|(_, t)| t.connection == connection && !t.orphan)
            .map(|(&r, _)| r)
            .collect();
        self.note(format!(
            "connection {connection} to broker {broker} closed ({} outstanding)",
            affected.len()
        ));
        for request in affected {
            self.schedule(
                self.now,
                Pending::Failed {
                    request,
                    written: true,
                },
            );
            let on_its_way = self.network.get(&request).is_some_and(|t| t.body.is_some());
            // Transactions v1 cannot tell a late EndTxn of the previous transaction from one
            // for the current (same epoch): a stale commit arriving after the next transaction
            // began would commit it. That hazard is what KIP-890 part 2 closes with an epoch
            // per transaction; under v1 the model broker drains a closed connection's requests
            // before the client's next call (coordinator requests are not left on the way).
            let v1_coordinator_request = self
                .network
                .get(&request)
                .is_some_and(|t| matches!(t.body, Some(Body::Coordinator(_))))
                && self
                    .cluster
                    .coordinator()
                    .is_some_and(|c| !c.transactions_v2());
            if on_its_way && !crash && !v1_coordinator_request && self.entropy.chance(500) {
                if let Some(t) = self.network.get_mut(&request) {
                    t.orphan = true;
                }
            } else {
                self.network.remove(&request);
            }
        }
    }

    // ---- events ----

    fn process(&mut self, pending: Pending) -> Result<(), Violation> {
        match pending {
            Pending::Send => self.send_due()?,
            Pending::Arrive(request) => self.arrive(request)?,
            Pending::Deliver(request) => self.deliver(request),
            Pending::Failed { request, written } => {
                self.note(format!("request {request} failed (written: {written})"));
                let error = Error::io(
                    "sim",
                    std::io::Error::new(std::io::ErrorKind::ConnectionReset, "connection failed"),
                );
                self.engine.handle(
                    Event::RequestFailed {
                        request,
                        written,
                        error,
                    },
                    self.now,
                    &self.acc,
                );
            }
            Pending::Metadata(leaders) => {
                self.note("metadata answer".into());
                self.engine
                    .handle(Event::Leaders(leaders), self.now, &self.acc);
            }
            Pending::Close(connection) => self.close(connection, false),
            Pending::Fault(fault) => self.apply(fault),
            Pending::Recur(kind) => {
                self.recur(kind);
                self.schedule_recurring(kind);
            }
        }
        Ok(())
    }

    /// Sends every record that is due, until the buffer is full (then retries shortly: a
    /// blocked `send`).
    fn send_due(&mut self) -> Result<(), Violation> {
        while let Some(planned) = self.workload.records.get(self.next_send) {
            if planned.at > self.now {
                let at = planned.at;
                self.schedule(at, Pending::Send);
                return Ok(());
            }
            let id = u64::try_from(self.next_send).unwrap_or(u64::MAX);
            if let Some(driver) = &self.txn {
                let refusal = match driver.may_send(self.next_send) {
                    None => return Ok(()),
                    Some(false) => Some(Error::InvalidState("the application gave up".into())),
                    Some(true) => self.engine.check_send().err(),
                };
                if let Some(error) = refusal {
                    self.note(format!("send of record {id} refused: {error}"));
                    self.checker.on_refused(id, error);
                    self.next_send += 1;
                    continue;
                }
            }
            let value = Workload::value(id, planned.padding);
            let partition = planned.partition.clone();
            let timestamp = i64::try_from(self.now).unwrap_or(i64::MAX);
            match self
                .acc
                .append(&partition, timestamp, None, Some(&value), &[], self.now)
            {
                Ok(appended) => {
                    self.checker.on_sent(id, self.now);
                    if let Some(driver) = &mut self.txn {
                        driver.sent(id);
                    }
                    self.next_send += 1;
                    match self
                        .groups
                        .iter_mut()
                        .rev()
                        .find(|g| Arc::ptr_eq(&g.completion, &appended.completion))
                    {
                        Some(group) => group.records.push((id, appended.index)),
                        None => self.groups.push(Group {
                            completion: appended.completion,
                            records: vec![(id, appended.index)],
                        }),
                    }
                }
                // The simulation asks the engine itself before appending (above), so the
                // accumulator's gate, which only the driver publishes to, stays open.
                Err(AppendError::Refused(error)) => {
                    self.note(format!("send of record {id} refused: {error}"));
                    self.checker.on_refused(id, error);
                    self.next_send += 1;
                    continue;
                }
                Err(AppendError::BufferFull) => {
                    self.stats.buffer_full += 1;
                    let at = self.now + self.entropy.range(1, 10);
                    self.schedule(at, Pending::Send);
                    return Ok(());
                }
                Err(AppendError::TooLarge { size, max, setting }) => {
                    // The generated workloads stay under the limits; a record that does not
                    // is the simulation's own mistake, reported rather than hidden.
                    return Err(format!(
                        "workload record {id} of {size} bytes refused by send: {setting} = {max}"
                    ));
                }
            }
        }
        if self.workload.flush_at_end {
            self.engine.begin_flush();
        }
        Ok(())
    }

    fn arrive(&mut self, request: RequestId) -> Result<(), Violation> {
        let Some(t) = self.network.get_mut(&request) else {
            return Ok(());
        };
        let Some(body) = t.body.take() else {
            return Ok(());
        };
        let (connection, orphan) = (t.connection, t.orphan);
        let Some(broker) = self.connections.get(connection).map(|c| c.broker) else {
            return Ok(());
        };
        let answer = match body {
            Body::Produce(batches) => {
                let mut responses = Vec::with_capacity(batches.len());
                for (tp, batch) in &batches {
                    responses.push(self.broker_produce(broker, tp, batch)?);
                }
                Answer::Produce(responses)
            }
            Body::InitProducerId => match draw_identity_error(&mut self.entropy, &self.rates) {
                Some(code) => {
                    self.stats.fault("InitProducerId error");
                    self.note(format!(
                        "broker {broker}: InitProducerId {request} -> {code}"
                    ));
                    Answer::Identity(Err(Error::broker(code)))
                }
                None => {
                    let identity = self.cluster.init_producer_id();
                    self.note(format!(
                        "broker {broker}: InitProducerId {request} -> {identity:?}"
                    ));
                    Answer::Identity(Ok(identity))
                }
            },
            Body::FindCoordinator(key) => match self.cluster.find_coordinator(&key) {
                Some(coordinator) => Answer::Txn(TxnResponse::Coordinator(coordinator)),
                None => return Err(format!("FindCoordinator {key:?} without a coordinator")),
            },
            Body::Coordinator(body) => {
                let response = self.cluster.coordinator_request(broker, &body, self.now);
                self.note(format!("broker {broker}: {request} -> {response:?}"));
                Answer::Txn(response)
            }
        };
        if orphan {
            self.note(format!(
                "answer to {request} discarded: its connection closed"
            ));
            self.network.remove(&request);
            return Ok(());
        }
        if self.blackholed.contains(&broker) || self.entropy.chance(self.rates.drop_response) {
            // The answer is lost; the request stays outstanding until its connection closes
            // (the engine's request timeout, or a reset that may come soon).
            self.stats.fault("answer lost");
            self.note(format!("answer to {request} lost"));
            if !self.blackholed.contains(&broker) && self.entropy.chance(500) {
                let at = self.now + self.entropy.range(1, self.rates.max_delay_ms.max(2));
                self.schedule(at, Pending::Close(connection));
            }
            return Ok(());
        }
        let at = self.now + self.latency();
        let Some(c) = self.connections.get_mut(connection) else {
            return Ok(());
        };
        let at = at.max(c.last_answer);
        c.last_answer = at;
        if let Some(t) = self.network.get_mut(&request) {
            t.answer = Some(answer);
        }
        self.schedule(at, Pending::Deliver(request));
        Ok(())
    }

    /// The broker's handling of one partition of a Produce request, injected errors included.
    fn broker_produce(
        &mut self,
        broker: BrokerId,
        tp: &TopicPartition,
        batch: &SealedBatch,
    ) -> Result<PartitionResponse, Violation> {
        let bytes = batch.to_bytes();
        let scripted = self.injected.iter_mut().find(|e| {
            e.times > 0
                && e.partition == *tp
                && e.base_sequence.is_none_or(|s| s == batch.base_sequence())
                && e.epoch.is_none_or(|s| s == batch.producer_epoch())
        });
        let injected = match scripted {
            Some(rule) => {
                rule.times -= 1;
                Some(rule.code)
            }
            None => draw_produce_error(&mut self.entropy, &self.rates),
        };
        let verdict = match injected {
            None => self.cluster.produce(broker, tp, &bytes, self.now),
            Some(code) => {
                self.stats.fault("injected error");
                let appends = match timing(code) {
                    ErrorTiming::BeforeAppend => false,
                    ErrorTiming::AfterAppend => true,
                    ErrorTiming::Either => self.entropy.chance(500),
                };
                if appends {
                    let mut verdict = self.cluster.produce(broker, tp, &bytes, self.now);
                    if verdict.response.error == ErrorCode::NONE {
                        verdict.response.error = code;
                        verdict.response.base_offset = -1;
                    }
                    verdict
                } else {
                    let log_start = self
                        .cluster
                        .partitions()
                        .get(tp)
                        .map_or(-1, |p| p.log_start_offset);
                    reject(tp, code, log_start)
                }
            }
        };
        if let Some(violation) = verdict.violation {
            return Err(violation);
        }
        self.checker.on_append(tp, &verdict.appended)?;
        let code = verdict.response.error;
        self.stats.answer(code, !verdict.appended.is_empty());
        self.note(format!(
            "broker {broker}: {tp:?} seq {}..={} epoch {} -> {code} offset {} ({} appended)",
            batch.base_sequence(),
            batch.last_sequence(),
            batch.producer_epoch(),
            verdict.response.base_offset,
            verdict.appended.len()
        ));
        Ok(verdict.response)
    }

    fn deliver(&mut self, request: RequestId) {
        let Some(t) = self.network.remove(&request) else {
            return;
        };
        match t.answer {
            Some(Answer::Produce(partitions)) => {
                self.note(format!("answer to {request} delivered"));
                self.engine.handle(
                    Event::ProduceResponse {
                        request,
                        partitions,
                        throttle_ms: 0,
                    },
                    self.now,
                    &self.acc,
                );
            }
            Some(Answer::Identity(result)) => {
                self.note(format!("InitProducerId answer {request} delivered"));
                self.engine
                    .handle(Event::ProducerId { request, result }, self.now, &self.acc);
                self.after_first_identity();
            }
            Some(Answer::Txn(response)) => {
                self.note(format!("coordinator answer {request} delivered"));
                self.engine.handle(
                    Event::Txn {
                        request,
                        result: Ok(response),
                    },
                    self.now,
                    &self.acc,
                );
            }
            None => {}
        }
    }

    /// A run that starts partitions at given sequences (near the wrap) gives the broker the
    /// matching state for the first identity the engine takes, as if that producer had
    /// written up to there.
    fn after_first_identity(&mut self) {
        if self.first_identity_seen {
            return;
        }
        let Some(identity) = self.engine.identity() else {
            return;
        };
        self.first_identity_seen = true;
        for (tp, sequence) in self.start_sequences.clone() {
            self.cluster.seed_producer_state(
                &tp,
                identity,
                increment_sequence(sequence, -1),
                self.now,
            );
            self.checker
                .expect_start(identity.producer_id, identity.epoch, tp, sequence);
        }
    }

    // ---- faults ----

    fn recur(&mut self, kind: Recurring) {
        let brokers = self.cluster.config().brokers.clone();
        let partitions: Vec<TopicPartition> = self.cluster.partitions().keys().cloned().collect();
        let fault = match kind {
            Recurring::Reset => {
                let open: Vec<BrokerId> = self.current.keys().copied().collect();
                self.entropy
                    .pick(&open)
                    .map(|&broker| Fault::ResetConnection { broker })
            }
            Recurring::MoveLeader
                if self.cluster.coordinator().is_some() && self.entropy.chance(300) =>
            {
                let live = self.cluster.live_brokers();
                let group = self.entropy.chance(500);
                self.entropy
                    .pick(&live)
                    .map(|&to| Fault::MoveCoordinator { group, to })
            }
            Recurring::MoveLeader => {
                let live = self.cluster.live_brokers();
                let partition = self.entropy.pick(&partitions).cloned();
                let to = self.entropy.pick(&live).copied();
                partition
                    .zip(to)
                    .map(|(partition, to)| Fault::MoveLeader { partition, to })
            }
            Recurring::Crash => {
                let broker = self.entropy.pick(&brokers).copied();
                if let Some(broker) = broker {
                    let up_at = self.now + self.entropy.range(1, self.rates.crash_max_ms);
                    self.schedule(up_at, Pending::Fault(Fault::BrokerUp { broker }));
                    if self.entropy.chance(500) {
                        let elect_at = self.now + self.entropy.range(10, 500);
                        self.schedule(elect_at, Pending::Fault(Fault::ElectLeaders));
                    }
                }
                broker.map(|broker| Fault::BrokerDown { broker })
            }
            Recurring::Expire => Some(Fault::ExpireProducerState),
            Recurring::Retention => self
                .entropy
                .pick(&partitions)
                .cloned()
                .map(|partition| Fault::AdvanceLogStart { partition }),
            Recurring::Jump => Some(Fault::ClockJump {
                ms: self.entropy.range(1, self.rates.jump_max_ms),
            }),
        };
        if let Some(fault) = fault {
            self.apply(fault);
        }
    }

    fn apply(&mut self, fault: Fault) {
        self.note(format!("fault: {fault:?}"));
        match fault {
            Fault::BrokerDown { broker } => {
                self.stats.fault("broker crash");
                self.cluster.set_up(broker, false);
                if let Some(&connection) = self.current.get(&broker) {
                    self.close(connection, true);
                }
            }
            Fault::BrokerUp { broker } => self.cluster.set_up(broker, true),
            Fault::ElectLeaders => {
                let live = self.cluster.live_brokers();
                for (tp, leader) in self.cluster.leaders() {
                    if !self.cluster.is_up(leader)
                        && let Some(&to) = self.entropy.pick(&live)
                    {
                        self.stats.fault("leader elected");
                        self.cluster.move_leader(&tp, to);
                    }
                }
            }
            Fault::MoveLeader { partition, to } => {
                self.stats.fault("leader moved");
                self.cluster.move_leader(&partition, to);
            }
            Fault::ResetConnection { broker } => {
                if let Some(&connection) = self.current.get(&broker) {
                    self.stats.fault("connection reset");
                    self.close(connection, false);
                }
            }
            Fault::ExpireProducerState => {
                let expired = self.cluster.expire_producers(self.now);
                if expired > 0 {
                    self.stats.fault("producer state expired");
                    self.note(format!("{expired} producer states expired"));
                }
            }
            Fault::AdvanceLogStart { partition } => {
                let records = usize::try_from(self.entropy.range(1, 100)).unwrap_or(1);
                let start = self
                    .cluster
                    .advance_log_start(&partition, records, self.now);
                self.stats.fault("retention");
                self.note(format!("{partition:?} log start now {start:?}"));
            }
            Fault::ClockJump { ms } => {
                self.stats.fault("clock jump");
                self.checker.on_jump(self.now, ms);
                self.now += ms;
            }
            Fault::BlackholeResponses { broker } => {
                self.blackholed.insert(broker);
            }
            Fault::HealResponses { broker } => {
                self.blackholed.remove(&broker);
            }
            Fault::SlowNetwork { broker, extra_ms } => {
                self.slow.insert(broker, extra_ms);
            }
            Fault::MoveCoordinator { group, to } => {
                self.stats.fault("coordinator moved");
                self.cluster.move_coordinator(group, to);
            }
            Fault::ZombieInit => {
                if let Some(identity) = self.cluster.fence_transactional_id(self.now) {
                    self.stats.fault("fenced by another instance");
                    self.note(format!("another instance initialised: {identity:?}"));
                    if let Some(driver) = &mut self.txn {
                        driver.on_fence(self.now);
                    }
                }
            }
        }
    }
}
