//! The simulation driver: it plays the role of the tokio driver (carrying out the engine's
//! actions, feeding it events) over a model network and the model cluster, on virtual time.
//!
//! One step is one event (a record sent, a request reaching a broker, an answer or a failure
//! reaching the engine, a metadata answer, a fault) or one engine timer, followed by an engine
//! poll; the checkers run after each step. Events at the same virtual millisecond run in the
//! order they were scheduled, and every random choice comes from the run's [`Entropy`], so a
//! seed replays exactly.
//!
//! The engine's actions are carried out by the simulation's interpreter
//! ([`super::interpreter`]) over the simulated network ([`super::network`]): one connection
//! per broker at a time, as the driver keeps, answers in order. When a connection closes (the
//! engine's `Disconnect`, a reset, a crash) every request outstanding on it fails with
//! `written: true`; a request still on its way may yet reach the broker (bytes already sent)
//! unless the broker crashed, and then its answer is thrown away ([`requests`]). Faults are
//! drawn and applied in [`faults`], the transactional application runs in [`txn`].

mod faults;
mod requests;
mod txn;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use faults::Recurring;
use txn::TxnDriver;
pub use txn::{TxnEnd, TxnFate};

use super::cluster::Cluster;
use super::entropy::Entropy;
use super::faults::{Fault, FaultRates, InjectedError};
use super::interpreter::{self, request_failed};
use super::invariants::{Checker, Violation};
use super::network::{Address, Latency, Network, Timeline, Trace};
use super::workload::Workload;
use super::{Failure, Report, SimConfig, Stats};
use crate::engine::accumulator::{Accumulator, AppendError};
use crate::engine::completion::BatchCompletion;
use crate::engine::{Engine, Event, RequestId};
use crate::error::Error;
use crate::protocol::record_batch::increment_sequence;
use crate::types::{BrokerId, Millis, TopicPartition};

/// The producer run's one client on the network.
const CLIENT: usize = 0;

/// Something due at a virtual time.
#[derive(Debug)]
enum Pending {
    /// The workload's next record(s) are due (or the buffer may have room again).
    Send,
    /// A request reaches its broker.
    Arrive(Address),
    /// An answer reaches the engine.
    Deliver(Address),
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

/// The records of one batch, sharing its completion.
#[derive(Debug)]
struct Group {
    completion: Arc<BatchCompletion>,
    /// (record id, index in the batch).
    records: Vec<(u64, i32)>,
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
    timeline: Timeline<Pending>,
    network: Network,
    latency: Latency,
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
        let latency = Latency {
            base_ms: (1, 10),
            delay: rates.delay,
            max_delay_ms: rates.max_delay_ms,
        };
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
            timeline: Timeline::new(),
            network: Network::new(true),
            latency,
            blackholed: BTreeSet::new(),
            slow: BTreeMap::new(),
            groups: Vec::new(),
            checker,
            txn,
            trace: Trace::new(trace_lines),
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
        self.timeline.schedule(at, pending);
    }

    fn note(&mut self, line: String) {
        self.trace.note(self.now, line);
    }

    fn fail(&self, violation: Violation) -> Failure {
        Failure {
            step: self.step,
            now_ms: self.now,
            violation,
            trace: self.trace.lines(),
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
            let acted = match interpreter::carry_out(&mut self, CLIENT, 0, actions)
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
            let event_at = self.timeline.next_at();
            let event_first = match (event_at, wake) {
                (Some(at), Some(wake)) => at <= wake,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if event_first {
                if let Some((at, pending)) = self.timeline.pop() {
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
            digest: self.trace.digest(),
            trace: self.trace.lines(),
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

    // ---- events ----

    fn process(&mut self, pending: Pending) -> Result<(), Violation> {
        match pending {
            Pending::Send => self.send_due()?,
            Pending::Arrive(address) => interpreter::arrive(self, address)?,
            Pending::Deliver(address) => interpreter::deliver(self, address),
            Pending::Failed { request, written } => {
                self.note(format!("request {request} failed (written: {written})"));
                self.engine
                    .handle(request_failed(request, written), self.now, &self.acc);
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
}
