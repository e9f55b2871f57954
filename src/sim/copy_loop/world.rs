//! The copy loop's world: the copiers' slots (each a transactional id with its own coordinator
//! state, and the incarnation running in it), the model cluster and group coordinator they
//! share, the network between them, and the loop that drives every copier until the source is
//! copied and checks the destination at the end.
//!
//! What differs from the producer run on purpose stays here: the consumer's traffic (each
//! copier's heartbeats, on their own latency and loss, and the committed offsets it looks up)
//! and crash handling (a copier crash drops the client, and what it sent may still land, while
//! the producer run crashes brokers). The copy loop keeps one connection per copier and broker
//! for the whole run (the engine's `Disconnect` fails what is outstanding on it) and lets
//! answers pass one another: the simplifications its seeds were found under.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::copier::{self, Copier, CopierState, record_id, transform_fails};
use super::{
    CALL_TIMEOUT_MS, CopyLoopConfig, CopyLoopReport, DEAD_LETTERS, DESTINATION, GROUP,
    HEARTBEAT_TIMEOUT_MS, SOURCE, SOURCE_ID, TICK_MS,
};
use crate::consumer::membership::kip848::{ConsumerMember, ConsumerMemberConfig};
use crate::engine::accumulator::Accumulator;
use crate::engine::{Engine, Event, TransactionConfig};
use crate::eos::{CommittedTransaction, TransformErrorPolicy};
use crate::protocol::error_code::ErrorCode;
use crate::protocol::messages::consumer_group_heartbeat::ConsumerGroupHeartbeatResponse;
use crate::sim::cluster::{Cluster, ClusterConfig};
use crate::sim::coordinator::{Coordinator, CoordinatorConfig};
use crate::sim::entropy::Entropy;
use crate::sim::group::GroupCoordinator;
use crate::sim::interpreter::{self, request_failed};
use crate::sim::invariants::Violation;
use crate::sim::network::{Address, Latency, Network, Timeline, Trace};
use crate::sim::{Failure, SimConfig};
use crate::types::CoordinatorKey;
use crate::types::{Millis, TopicPartition};
use kafka_protocol::messages::ConsumerGroupHeartbeatRequest;

/// Something due at a virtual time.
#[derive(Debug)]
pub(super) enum Pending {
    /// A request reaches its broker.
    Arrive(Address),
    /// An answer reaches its copier.
    Deliver(Address),
    /// A request fails without answer: its connection closed.
    Failed(Address),
    /// A metadata answer reaches a copier.
    Metadata { copier: usize, incarnation: u32 },
    /// A copier's heartbeat reaches the group coordinator.
    HeartbeatArrive {
        copier: usize,
        incarnation: u32,
        seq: u64,
        request: ConsumerGroupHeartbeatRequest,
    },
    /// The group coordinator's answer reaches the copier.
    HeartbeatAnswer {
        copier: usize,
        incarnation: u32,
        seq: u64,
        response: ConsumerGroupHeartbeatResponse,
    },
    /// The copier stops waiting for heartbeat `seq`.
    HeartbeatTimeout {
        copier: usize,
        incarnation: u32,
        seq: u64,
    },
    /// A copier crashes.
    Crash(super::Crash),
    /// A copier (re)starts as a new incarnation.
    Restart(usize),
    /// Every copier is polled (its timers are seen at this resolution).
    Tick,
}

/// A copier slot: its transactional id's coordinator state and its current incarnation.
pub(super) struct Slot {
    pub(super) coordinator: Option<Coordinator>,
    incarnation: u32,
    copier: Option<Copier>,
}

/// Everything a copy-loop run is made of.
pub(super) struct World {
    pub(super) config: CopyLoopConfig,
    pub(super) entropy: Entropy,
    pub(super) cluster: Cluster,
    sim: SimConfig,
    pub(super) group: GroupCoordinator,
    pub(super) slots: Vec<Slot>,
    source: Rc<Vec<Vec<i64>>>,
    pub(super) committed: BTreeMap<i32, i64>,
    pub(super) network: Network,
    /// The latency of producer and coordinator traffic.
    pub(super) latency: Latency,
    /// The latency of heartbeats and their answers.
    heartbeat_latency: Latency,
    timeline: Timeline<Pending>,
    next_heartbeat_seq: u64,
    pub(super) now: Millis,
    trace: Trace,
    pub(super) report: CopyLoopReport,
    /// What the copiers' committed transactions reported.
    reported: Vec<CommittedTransaction>,
    /// Coordinator requests applied during an outage, whose answers are lost.
    pub(super) outage_lost: BTreeSet<Address>,
}

impl World {
    pub(super) fn new(config: CopyLoopConfig, mut entropy: Entropy) -> Self {
        let mut sim = SimConfig::calm(&[(DESTINATION, config.partitions), (DEAD_LETTERS, 1)], 2);
        sim.make_transactional(config.transactions_v2, 2_000, Vec::new());
        let coordinator_config = CoordinatorConfig {
            transactions_v2: config.transactions_v2,
            ending_window_ms: 15,
            generation_id: -1,
            member_id: String::new(),
        };
        sim.cluster.transactions = Some(coordinator_config.clone());
        let cluster = Cluster::new(ClusterConfig {
            first_producer_id: 5000,
            ..sim.cluster.clone()
        });
        let broker = cluster
            .find_coordinator(&CoordinatorKey::Group(GROUP.into()))
            .unwrap_or(1);
        let source: Vec<Vec<i64>> = (0..config.partitions)
            .map(|_| {
                let mut offsets = Vec::with_capacity(config.records_per_partition);
                let mut next = 0;
                while offsets.len() < config.records_per_partition {
                    if !entropy.chance(config.gaps) {
                        offsets.push(next);
                    }
                    next += 1;
                }
                offsets
            })
            .collect();
        let slots = config
            .starts
            .iter()
            .map(|_| Slot {
                coordinator: Some(Coordinator::new(coordinator_config.clone(), broker, 0)),
                incarnation: 0,
                copier: None,
            })
            .collect();
        let group = GroupCoordinator::new(
            SOURCE_ID,
            config.partitions,
            config.session_timeout_ms,
            config.heartbeat_interval_ms,
        );
        let latency = Latency {
            base_ms: (1, 8),
            delay: config.delay,
            max_delay_ms: config.max_delay_ms,
        };
        let heartbeat_latency = Latency {
            max_delay_ms: config.heartbeat_max_delay_ms,
            ..latency
        };
        let mut world = Self {
            trace: Trace::new(config.trace_lines),
            config,
            entropy,
            cluster,
            sim,
            group,
            slots,
            source: Rc::new(source),
            committed: BTreeMap::new(),
            network: Network::new(false),
            latency,
            heartbeat_latency,
            timeline: Timeline::new(),
            next_heartbeat_seq: 0,
            now: 0,
            report: CopyLoopReport::default(),
            reported: Vec::new(),
            outage_lost: BTreeSet::new(),
        };
        for (i, &at) in world.config.starts.clone().iter().enumerate() {
            world.schedule(at, Pending::Restart(i));
        }
        for crash in world.config.crashes.clone() {
            world.schedule(crash.at, Pending::Crash(crash));
        }
        world.schedule(0, Pending::Tick);
        world
    }

    pub(super) fn schedule(&mut self, at: Millis, pending: Pending) {
        self.timeline.schedule(at, pending);
    }

    pub(super) fn note(&mut self, line: String) {
        self.trace.note(self.now, line);
    }

    fn fail(&self, violation: Violation) -> Failure {
        Failure {
            step: self.timeline.scheduled(),
            now_ms: self.now,
            violation,
            trace: self.trace.lines(),
        }
    }

    /// When the coordinator outage on at `now` ends, if one is.
    pub(super) fn outage_end(&self, now: Millis) -> Option<Millis> {
        self.config
            .outages
            .iter()
            .filter(|o| o.covers(now))
            .map(|o| o.end())
            .max()
    }

    fn heartbeat_latency(&mut self) -> Millis {
        self.heartbeat_latency.draw(&mut self.entropy).0
    }

    pub(super) fn run(mut self) -> Result<CopyLoopReport, Failure> {
        loop {
            if self.now > self.config.deadline_ms {
                let copiers: Vec<String> = self
                    .slots
                    .iter()
                    .map(|s| {
                        s.copier
                            .as_ref()
                            .map_or("down".into(), |c| c.state.borrow().describe())
                    })
                    .collect();
                return Err(self.fail(format!(
                    "the copy loop did not finish by {} ms (P9); committed {:?}; copiers {copiers:#?}",
                    self.config.deadline_ms, self.committed
                )));
            }
            if let Err(v) = self.drive() {
                return Err(self.fail(v));
            }
            if self.finished() {
                break;
            }
            let Some((at, pending)) = self.timeline.pop() else {
                return Err(self.fail("nothing scheduled (P9: silent stall)".into()));
            };
            self.now = self.now.max(at);
            if let Err(v) = self.process(pending) {
                return Err(self.fail(v));
            }
        }
        // Requests still on their way (a crashed copier's EndTxn...) land before the check.
        while let Some((at, pending)) = self.timeline.pop() {
            self.now = self.now.max(at);
            if let Pending::Arrive(_) = pending
                && let Err(v) = self.process(pending)
            {
                return Err(self.fail(v));
            }
        }
        if let Err(v) = self.check_end() {
            return Err(self.fail(v));
        }
        self.report.end_ms = self.now;
        self.report.fenced_heartbeats = self.group.fenced;
        self.report.expired_members = self.group.expired;
        self.report.digest = self.trace.digest();
        Ok(self.report)
    }

    fn finished(&self) -> bool {
        let done = self.source.iter().enumerate().all(|(p, offsets)| {
            let end = offsets.last().map_or(0, |o| o + 1);
            let p = i32::try_from(p).unwrap_or(0);
            offsets.is_empty() || self.committed.get(&p).copied().unwrap_or(0) >= end
        });
        done && self
            .slots
            .iter()
            .all(|s| s.copier.as_ref().is_none_or(|c| c.state.borrow().quiet()))
    }

    /// Runs every live copier's application and engine until none acts.
    fn drive(&mut self) -> Result<(), Violation> {
        for _round in 0..1_000 {
            let mut acted = false;
            for i in 0..self.slots.len() {
                acted |= self.drive_copier(i)?;
            }
            if !acted {
                return Ok(());
            }
        }
        Err("the copiers kept acting without time moving (P9)".into())
    }

    fn pending_offsets(&self) -> BTreeSet<i32> {
        self.slots
            .iter()
            .filter_map(|s| s.coordinator.as_ref())
            .flat_map(Coordinator::pending_offsets)
            .map(|tp| tp.partition)
            .collect()
    }

    fn drive_copier(&mut self, i: usize) -> Result<bool, Violation> {
        let pending = self.pending_offsets();
        let now = self.now;
        let Some(slot) = self.slots.get_mut(i) else {
            return Ok(false);
        };
        let incarnation = slot.incarnation;
        let Some(copier) = slot.copier.as_mut() else {
            return Ok(false);
        };
        // The consumer's background: committed offsets and heartbeats.
        let committed = &self.committed;
        let seq = self.next_heartbeat_seq + 1;
        let heartbeat = copier.state.borrow_mut().maintain(
            now,
            |p| (!pending.contains(&p)).then(|| committed.get(&p).copied().unwrap_or(0)),
            seq,
        );
        // The application, up to its next wait.
        let ended = match copier
            .application
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        {
            Poll::Ready(error) => Some(error),
            Poll::Pending => None,
        };
        // The producer's driver.
        let (actions, wake, acted, notes) = {
            let state = &mut *copier.state.borrow_mut();
            let actions = state.engine.poll(now, &state.acc);
            state.engine_stepped();
            let wake = state.engine.next_wakeup(now, &state.acc);
            let (acted, notes) = state.take_progress();
            (actions, wake, acted, notes)
        };
        if let Some(mismatch) = copier.state.borrow_mut().counter_mismatch.take() {
            return Err(format!("copier {i}.{incarnation}: {mismatch}"));
        }
        let mut acted = acted || !actions.is_empty() || heartbeat.is_some() || ended.is_some();
        for line in notes {
            self.note(format!("copier {i}.{incarnation}: {line}"));
        }
        if let Some(request) = heartbeat {
            self.next_heartbeat_seq = seq;
            self.note(format!(
                "copier {i}.{incarnation}: heartbeat {seq} epoch {} owned {:?}",
                request.member_epoch, request.topic_partitions
            ));
            let arrive = now + self.heartbeat_latency();
            if self.entropy.chance(self.config.heartbeat_request_loss) {
                self.note(format!("heartbeat {seq} lost"));
            } else {
                self.schedule(
                    arrive,
                    Pending::HeartbeatArrive {
                        copier: i,
                        incarnation,
                        seq,
                        request,
                    },
                );
            }
            let timeout = now + HEARTBEAT_TIMEOUT_MS;
            self.schedule(
                timeout,
                Pending::HeartbeatTimeout {
                    copier: i,
                    incarnation,
                    seq,
                },
            );
        }
        if let Some(error) = ended {
            self.note(format!(
                "copier {i}.{incarnation}: producer failed ({error}), restarting"
            ));
            self.crash(i);
            self.schedule(now + 1, Pending::Restart(i));
            return Ok(true);
        }
        interpreter::carry_out(self, i, incarnation, actions)?;
        if wake.is_some_and(|wake| wake <= now) {
            acted = true;
        }
        Ok(acted)
    }

    /// The state of copier `i` if `incarnation` is the one running.
    fn copier(&self, i: usize, incarnation: u32) -> Option<Rc<RefCell<CopierState>>> {
        self.slots
            .get(i)
            .filter(|s| s.incarnation == incarnation)
            .and_then(|s| s.copier.as_ref())
            .map(|c| Rc::clone(&c.state))
    }

    /// Hands `event` to copier `i`'s engine (if `incarnation` is the one running).
    pub(super) fn engine_event(&self, i: usize, incarnation: u32, event: Event) {
        if let Some(state) = self.copier(i, incarnation) {
            let state = &mut *state.borrow_mut();
            state.engine.handle(event, self.now, &state.acc);
            state.engine_stepped();
        }
    }

    fn process(&mut self, pending: Pending) -> Result<(), Violation> {
        let now = self.now;
        match pending {
            Pending::Tick => {
                let at = now + TICK_MS;
                self.schedule(at, Pending::Tick);
            }
            Pending::Arrive(address) => interpreter::arrive(self, address)?,
            Pending::Deliver(address) => interpreter::deliver(self, address),
            Pending::Failed(address) => {
                let event = request_failed(address.request, true);
                self.engine_event(address.client, address.incarnation, event);
            }
            Pending::Metadata {
                copier,
                incarnation,
            } => {
                let leaders = self
                    .cluster
                    .leaders()
                    .into_iter()
                    .map(|(tp, b)| (tp, Some(b)))
                    .collect();
                self.engine_event(copier, incarnation, Event::Leaders(leaders));
            }
            Pending::HeartbeatArrive {
                copier,
                incarnation,
                seq,
                request,
            } => {
                let response = self.group.heartbeat(&request, now);
                self.note(format!(
                    "group: heartbeat {seq} of {} epoch {} -> {} epoch {} assignment {:?}",
                    request.member_id,
                    request.member_epoch,
                    ErrorCode(response.error_code),
                    response.member_epoch,
                    response.assignment.as_ref().map(|a| a
                        .iter()
                        .flat_map(|t| t.partitions.clone())
                        .collect::<Vec<_>>())
                ));
                if self.entropy.chance(self.config.heartbeat_answer_loss) {
                    self.note(format!("heartbeat answer {seq} lost"));
                    return Ok(());
                }
                let at = now + self.heartbeat_latency();
                self.schedule(
                    at,
                    Pending::HeartbeatAnswer {
                        copier,
                        incarnation,
                        seq,
                        response,
                    },
                );
            }
            Pending::HeartbeatAnswer {
                copier,
                incarnation,
                seq,
                response,
            } => {
                if let Some(state) = self.copier(copier, incarnation) {
                    state.borrow_mut().heartbeat_answered(seq, response, now)?;
                }
            }
            Pending::HeartbeatTimeout {
                copier,
                incarnation,
                seq,
            } => {
                if let Some(state) = self.copier(copier, incarnation)
                    && state.borrow_mut().heartbeat_timed_out(seq, now)
                {
                    self.note(format!(
                        "copier {copier}.{incarnation}: heartbeat {seq} timed out"
                    ));
                }
            }
            Pending::Crash(crash) => {
                if self
                    .slots
                    .get(crash.copier)
                    .is_some_and(|s| s.copier.is_some())
                {
                    self.note(format!("fault: copier {} crashes", crash.copier));
                    self.report.crashes += 1;
                    self.crash(crash.copier);
                    self.schedule(now + crash.down_ms, Pending::Restart(crash.copier));
                }
            }
            Pending::Restart(i) => self.restart(i),
        }
        Ok(())
    }

    /// Drops copier `i`'s state without leaving the group; what it sent may still land.
    fn crash(&mut self, i: usize) {
        if let Some(slot) = self.slots.get_mut(i)
            && let Some(copier) = slot.copier.take()
        {
            self.tally(&copier.state.borrow());
            self.network.abandon(i);
        }
    }

    fn restart(&mut self, i: usize) {
        let Some(slot) = self.slots.get_mut(i) else {
            return;
        };
        if slot.copier.is_some() {
            return;
        }
        slot.incarnation += 1;
        let incarnation = slot.incarnation;
        let mut engine_config = self.sim.engine.clone();
        engine_config.transaction = Some(TransactionConfig {
            transactional_id: format!("copier-{i}"),
            timeout_ms: 60_000,
            call_timeout_ms: CALL_TIMEOUT_MS,
        });
        let seed = self.entropy.below(u64::MAX);
        let engine = Engine::new(engine_config, seed);
        let acc = Accumulator::new(self.sim.accumulator.clone());
        let mut member = ConsumerMember::new(ConsumerMemberConfig {
            group_id: GROUP.into(),
            member_id: format!("m{i}-{incarnation}"),
            instance_id: None,
            rebalance_timeout_ms: 10_000,
            server_assignor: None,
        });
        member.subscribe(vec![SOURCE.into()]);
        let state = Rc::new(RefCell::new(CopierState::new(
            self.now,
            member,
            self.config.records_per_poll,
            SOURCE,
            Rc::clone(&self.source),
            engine,
            acc,
        )));
        let application = copier::application(
            &state,
            DESTINATION,
            self.config.commit_every,
            Duration::from_millis(self.config.commit_interval_ms),
            &self.config.transform,
            copier::Cancellation {
                plan: self.config.cancel,
                seed: self.config.cancel.salt ^ ((i as u64) << 32 | u64::from(incarnation)),
            },
        );
        if let Some(slot) = self.slots.get_mut(i) {
            slot.copier = Some(Copier { state, application });
        }
        self.note(format!("copier {i}.{incarnation} starts"));
    }

    /// Counts what a copier incarnation did, and keeps what its loop reported.
    fn tally(&mut self, state: &CopierState) {
        self.report.commits += state.commits;
        self.report.aborts += state.aborts;
        self.report.lost_before_commit += state.lost_before_commit;
        self.report.aborts_draining_failures += state.aborts_draining_failures;
        self.report.dead_lettered += state.dead_lettered;
        self.report.skipped += state.skipped;
        self.report.transform_failures += state.transform_failures;
        self.report.cancelled_steps += state.cancelled_steps;
        self.report.timed_out_steps += state.timed_out_steps;
        self.reported.extend(state.transactions.iter().cloned());
    }

    /// Whether the loop's policy keeps the records the transform fails on out of the
    /// destination (under `Fail` they fail once and are copied again).
    fn failures_stay_out(&self) -> bool {
        self.config.transform.policy != TransformErrorPolicy::Fail
    }

    /// Every copy a committed transaction reported (offsets are exact) is one destination
    /// record, visible read_committed at the offset reported, carrying the source record's id;
    /// a record the transform failed on (dead-letter and skip policies) has no destination,
    /// and every dead letter reported is a record the transform fails on, visible in the
    /// dead-letter topic at the offset reported.
    fn check_reported(&self) -> Result<(), Violation> {
        let visible: BTreeMap<&TopicPartition, BTreeMap<i64, u64>> = self
            .cluster
            .partitions()
            .iter()
            .map(|(tp, p)| (tp, p.read_committed_at().into_iter().collect()))
            .collect();
        let faults = &self.config.transform;
        for letter in self.reported.iter().flat_map(|t| &t.dead_letters) {
            let source = &letter.source;
            let id = record_id(source.partition.partition, source.offset);
            let found = match letter.destinations.as_slice() {
                [only] if &*only.partition.topic == DEAD_LETTERS => visible
                    .get(&only.partition)
                    .and_then(|records| records.get(&only.offset))
                    .copied(),
                _ => None,
            };
            if !transform_fails(faults, id) || found != Some(id) {
                return Err(format!(
                    "the loop reported {source:?} dead-lettered to {:?}, where read_committed has \
                     {found:?} (the transform fails on it: {})",
                    letter.destinations,
                    transform_fails(faults, id)
                ));
            }
        }
        for copy in self.reported.iter().flat_map(|t| &t.copies) {
            let source = &copy.source;
            let id = record_id(source.partition.partition, source.offset);
            if self.failures_stay_out() && transform_fails(faults, id) {
                if !copy.destinations.is_empty() {
                    return Err(format!(
                        "the transform failed on {source:?}, and the loop reported it copied to {:?}",
                        copy.destinations
                    ));
                }
                continue;
            }
            let found = match copy.destinations.as_slice() {
                [only] => visible
                    .get(&only.partition)
                    .and_then(|records| records.get(&only.offset))
                    .copied(),
                _ => None,
            };
            if found != Some(id) {
                return Err(format!(
                    "the loop reported {source:?} copied to {:?}, where read_committed has {found:?}",
                    copy.destinations
                ));
            }
        }
        Ok(())
    }

    fn check_end(&mut self) -> Result<(), Violation> {
        let running: Vec<Rc<RefCell<CopierState>>> = self
            .slots
            .iter()
            .filter_map(|s| s.copier.as_ref())
            .map(|c| Rc::clone(&c.state))
            .collect();
        for state in running {
            self.tally(&state.borrow());
        }
        self.check_reported()?;
        let faults = &self.config.transform;
        let dead_letters = self
            .cluster
            .partitions()
            .get(&TopicPartition::new(DEAD_LETTERS, 0))
            .map(|p| p.read_committed())
            .unwrap_or_default();
        let dead_letter_policy = matches!(faults.policy, TransformErrorPolicy::DeadLetter { .. });
        let mut expected_dead = 0;
        for (p, offsets) in self.source.iter().enumerate() {
            let partition = i32::try_from(p).unwrap_or(0);
            let ids = offsets.iter().map(|&o| record_id(partition, o));
            let (failed, expected): (Vec<u64>, Vec<u64>) = if self.failures_stay_out() {
                ids.partition(|&id| transform_fails(faults, id))
            } else {
                (Vec::new(), ids.collect())
            };
            // Under the dead-letter policy the records the transform failed on are in the
            // dead-letter topic exactly once, in their partition's source order.
            let dead: Vec<u64> = dead_letters
                .iter()
                .copied()
                .filter(|id| id >> 32 == u64::from(partition.unsigned_abs()))
                .collect();
            let expected_here = if dead_letter_policy {
                failed
            } else {
                Vec::new()
            };
            if dead != expected_here {
                return Err(format!(
                    "dead letters of source partition {partition} read_committed are {dead:x?}, \
                     expected {expected_here:x?}"
                ));
            }
            expected_dead += expected_here.len();
            let tp = TopicPartition::new(DESTINATION, partition);
            let seen = self
                .cluster
                .partitions()
                .get(&tp)
                .map(|p| p.read_committed())
                .unwrap_or_default();
            if seen != expected {
                let dupes = seen
                    .len()
                    .saturating_sub(seen.iter().collect::<BTreeSet<_>>().len());
                return Err(format!(
                    "{tp:?} read_committed is not the source exactly once in order: {} records \
                     ({dupes} duplicates), expected {}; first difference at {:?}",
                    seen.len(),
                    expected.len(),
                    seen.iter().zip(&expected).position(|(a, b)| a != b)
                ));
            }
            self.report.records += expected.len();
        }
        if dead_letters.len() != expected_dead {
            return Err(format!(
                "the dead-letter topic holds {} records, expected {expected_dead}",
                dead_letters.len()
            ));
        }
        Ok(())
    }
}
