//! The copy-loop workload: 2–3 copiers in one KIP-848 group copy a source topic
//! into a destination topic exactly once. Each runs the real [`crate::eos::CopyLoop`] over
//! the real member state machine (`consumer::membership::kip848`, private to the crate,
//! heartbeating in the background) against the model group coordinator ([`super::group`])
//! and its own real transactional [`Engine`] against the model cluster and transaction
//! coordinator
//! (`copier`), over a network that delays and loses answers, with copiers that crash (their
//! state dropped without leaving) and restart as new members.
//!
//! Invariants: a TxnOffsetCommit the group accepts comes from a member that owns the
//! partition (no zombie gets a commit through); the group's committed offsets never move
//! backwards; at the end, read_committed, the destination holds every source record exactly
//! once, in its partition's source order, every committed offset is the log end, and every
//! copy a committed transaction of the loop reported is where it said (offsets are exact).
//!
//! The model transaction coordinator keeps one transactional id; a copier's requests are
//! handled by lending the cluster that copier's own coordinator state (one per transactional
//! id, as Kafka keeps one per id), so producer ids and logs are shared and nothing else is.

mod copier;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

pub use copier::record_id;
use copier::{Copier, CopierState};

use super::cluster::{Cluster, ClusterConfig};
use super::coordinator::{Coordinator, CoordinatorConfig};
use super::entropy::Entropy;
use super::group::GroupCoordinator;
use super::invariants::{FNV_OFFSET, Violation, fnv1a};
use super::{Failure, SimConfig};
use crate::consumer::membership::TopicView;
use crate::consumer::membership::kip848::ConsumerMember;
use crate::engine::accumulator::Accumulator;
use crate::engine::transaction::{CoordinatorKey, TxnRequest, TxnResponse};
use crate::engine::{Action, Engine, Event, PartitionResponse, RequestId, TransactionConfig};
use crate::error::Error;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::messages::consumer_group_heartbeat::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
};
use crate::protocol::record_batch::SealedBatch;
use crate::types::{BrokerId, Millis, TopicPartition};

const SOURCE: &str = "src";
const DESTINATION: &str = "dst";
const SOURCE_ID: [u8; 16] = [7; 16];
const GROUP: &str = "copy";
/// How often the world polls every copier when nothing else happens: the loop's poll timeouts
/// and commit interval, and the consumer's heartbeat timer, are seen at this resolution.
const TICK_MS: Millis = 5;

/// A copier crash: at `at`, copier `copier` loses its state; it restarts `down_ms` later.
#[derive(Debug, Clone, Copy)]
pub struct Crash {
    /// When.
    pub at: Millis,
    /// Which copier.
    pub copier: usize,
    /// How long it stays down.
    pub down_ms: Millis,
}

/// A copy-loop run.
#[derive(Debug, Clone)]
pub struct CopyLoopConfig {
    /// Source (and destination) partitions.
    pub partitions: i32,
    /// Records per source partition.
    pub records_per_partition: usize,
    /// Per mille of source offsets skipped (gaps, as markers leave).
    pub gaps: u32,
    /// When each copier starts (one entry per copier).
    pub starts: Vec<Millis>,
    /// Records per transaction (`CopyLoop::commit_every`).
    pub commit_every: usize,
    /// The longest a transaction stays open (`CopyLoop::commit_every`).
    pub commit_interval_ms: Millis,
    /// Records a copier copies per poll at most.
    pub records_per_poll: usize,
    /// Transactions v2 (else v1).
    pub transactions_v2: bool,
    /// The group's session timeout.
    pub session_timeout_ms: Millis,
    /// The heartbeat interval the coordinator answers.
    pub heartbeat_interval_ms: i32,
    /// Per mille of heartbeats lost before the coordinator reads them.
    pub heartbeat_request_loss: u32,
    /// Per mille of heartbeats whose answer is lost after the coordinator processed them.
    pub heartbeat_answer_loss: u32,
    /// The longest extra delay of a heartbeat or its answer (one longer than the request
    /// timeout makes the member give up on it: a lost answer too).
    pub heartbeat_max_delay_ms: Millis,
    /// Per mille of producer and transaction coordinator answers lost.
    pub answer_loss: u32,
    /// Per mille of messages delayed by up to `max_delay_ms`.
    pub delay: u32,
    /// The longest extra delay.
    pub max_delay_ms: Millis,
    /// Copier crashes.
    pub crashes: Vec<Crash>,
    /// The run fails if it has not finished by then (P9).
    pub deadline_ms: Millis,
    /// Trace lines a failure keeps.
    pub trace_lines: usize,
}

impl CopyLoopConfig {
    /// A calm run: `copiers` copiers starting `stagger_ms` apart, no faults.
    pub fn calm(copiers: usize, partitions: i32, records_per_partition: usize) -> Self {
        Self {
            partitions,
            records_per_partition,
            gaps: 100,
            starts: (0..copiers).map(|i| 200 * i as Millis).collect(),
            commit_every: 7,
            commit_interval_ms: 100,
            records_per_poll: 3,
            transactions_v2: true,
            session_timeout_ms: 1_000,
            heartbeat_interval_ms: 100,
            heartbeat_request_loss: 0,
            heartbeat_answer_loss: 0,
            heartbeat_max_delay_ms: 0,
            answer_loss: 0,
            delay: 0,
            max_delay_ms: 0,
            crashes: Vec::new(),
            deadline_ms: 300_000,
            trace_lines: 80,
        }
    }

    /// A random run.
    pub fn generate(entropy: &mut Entropy) -> Self {
        let copiers = usize::try_from(entropy.range(2, 3)).unwrap_or(2);
        let partitions = i32::try_from(entropy.range(1, 6)).unwrap_or(1);
        let mut config = Self::calm(
            copiers,
            partitions,
            usize::try_from(entropy.range(5, 60)).unwrap_or(5),
        );
        config.starts = (0..copiers).map(|_| entropy.range(0, 1_500)).collect();
        config.gaps = u32::try_from(entropy.range(0, 300)).unwrap_or(0);
        config.commit_every = usize::try_from(entropy.range(1, 20)).unwrap_or(1);
        config.records_per_poll =
            usize::try_from(entropy.range(1, config.commit_every as u64)).unwrap_or(1);
        config.transactions_v2 = entropy.chance(500);
        config.session_timeout_ms = entropy.range(400, 3_000);
        config.heartbeat_interval_ms =
            i32::try_from(entropy.range(20, config.session_timeout_ms / 3)).unwrap_or(100);
        config.heartbeat_request_loss = u32::try_from(entropy.range(0, 150)).unwrap_or(0);
        let answer_loss = u32::try_from(entropy.range(0, 150)).unwrap_or(0);
        config.answer_loss = u32::try_from(entropy.range(0, 30)).unwrap_or(0);
        config.delay = u32::try_from(entropy.range(0, 100)).unwrap_or(0);
        config.max_delay_ms = entropy.range(1, config.session_timeout_ms);
        config.heartbeat_max_delay_ms = config.max_delay_ms;
        config.heartbeat_answer_loss = answer_loss;
        for _ in 0..entropy.range(0, 3) {
            config.crashes.push(Crash {
                at: entropy.range(0, 4_000),
                copier: usize::try_from(entropy.below(copiers as u64)).unwrap_or(0),
                down_ms: entropy.range(0, 2 * config.session_timeout_ms),
            });
        }
        config.commit_interval_ms = entropy.range(20, 500);
        config
    }
}

/// How long a copier waits for a heartbeat answer before giving up on it.
pub const HEARTBEAT_TIMEOUT_MS: Millis = 500;

/// What a copy-loop run that kept every invariant did.
#[derive(Debug, Clone, Default)]
pub struct CopyLoopReport {
    /// Virtual time at the end.
    pub end_ms: Millis,
    /// Source records copied (each exactly once).
    pub records: usize,
    /// Transactions committed / aborted by the copiers.
    pub commits: u64,
    /// Aborted.
    pub aborts: u64,
    /// TxnOffsetCommits the group refused (zombies fenced).
    pub fenced_commits: u64,
    /// Transactions the loop aborted itself because partitions they read were lost before
    /// their offsets went out (`Error::PartitionsLost`).
    pub lost_before_commit: u64,
    /// Aborts during which records of the aborted transaction failed for good (a batch
    /// expired while the abort drained: the path where a v1 abort must still bump the epoch).
    pub aborts_draining_failures: u64,
    /// Heartbeats answered FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID.
    pub fenced_heartbeats: u64,
    /// Members whose session expired.
    pub expired_members: u64,
    /// Revocations acknowledged by a poll.
    pub crashes: u64,
    /// A digest of the trace: equal digests, equal runs.
    pub digest: u64,
}

/// Runs the copy loop of `seed` (its own configuration, independent of [`SimConfig`]'s).
pub fn run_copy_loop_seed(seed: u64) -> Result<CopyLoopReport, Failure> {
    let mut entropy = Entropy::from_seed(seed ^ SEED_SALT);
    let config = CopyLoopConfig::generate(&mut entropy);
    run_copy_loop(config, entropy)
}

/// What a sweep seed is mixed with for its copy loop (so it differs from the seed's
/// producer run).
pub const SEED_SALT: u64 = 0xC0B1_1005;

/// The command that replays the copy loop of `seed`.
pub fn replay_command(seed: u64) -> String {
    format!(
        "EXACTLY_SIM_SEED={seed} cargo test --all-features --test simulation replay_one_copy_loop_seed"
    )
}

/// Whether the seed sweep runs the copy loop for `seed` as well (a quarter of the seeds).
pub fn copy_loop_selected(seed: u64) -> bool {
    seed % 4 == 1
}

/// Runs `config`, taking fault decisions from `entropy`.
pub fn run_copy_loop(config: CopyLoopConfig, entropy: Entropy) -> Result<CopyLoopReport, Failure> {
    World::new(config, entropy).run()
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
    Identity(crate::engine::ProducerIdentity),
    Txn(TxnResponse),
}

/// Something due at a virtual time.
#[derive(Debug)]
enum Pending {
    Arrive {
        copier: usize,
        incarnation: u32,
        request: RequestId,
    },
    Deliver {
        copier: usize,
        incarnation: u32,
        request: RequestId,
        answer: Answer,
    },
    Failed {
        copier: usize,
        incarnation: u32,
        request: RequestId,
    },
    Metadata {
        copier: usize,
        incarnation: u32,
    },
    HeartbeatArrive {
        copier: usize,
        incarnation: u32,
        seq: u64,
        request: ConsumerGroupHeartbeatRequest,
    },
    HeartbeatAnswer {
        copier: usize,
        incarnation: u32,
        seq: u64,
        response: ConsumerGroupHeartbeatResponse,
    },
    HeartbeatTimeout {
        copier: usize,
        incarnation: u32,
        seq: u64,
    },
    Crash(Crash),
    Restart(usize),
    Tick,
}

/// A request on its way or waiting for its answer.
#[derive(Debug)]
struct Travelling {
    broker: BrokerId,
    body: Option<Body>,
    /// The copier still waits for the answer (cleared when its connection closed).
    wanted: bool,
}

/// The last lines of what happened, and a digest of all of it.
struct Trace {
    lines: std::collections::VecDeque<String>,
    keep: usize,
    digest: u64,
}

impl Trace {
    fn new(keep: usize) -> Self {
        Self {
            lines: std::collections::VecDeque::new(),
            keep,
            digest: FNV_OFFSET,
        }
    }

    fn note(&mut self, now: Millis, line: String) {
        let line = format!("{now:>8} ms  {line}");
        self.digest = fnv1a(self.digest, line.as_bytes());
        self.lines.push_back(line);
        if self.lines.len() > self.keep {
            self.lines.pop_front();
        }
    }

    fn lines(&self) -> Vec<String> {
        self.lines.iter().cloned().collect()
    }

    fn digest(&self) -> u64 {
        self.digest
    }
}

struct View;

impl TopicView for View {
    fn partition_count(&self, topic: &str) -> Option<i32> {
        (topic == SOURCE).then_some(0)
    }
    fn topic_name(&self, topic_id: &[u8; 16]) -> Option<Arc<str>> {
        (*topic_id == SOURCE_ID).then(|| Arc::from(SOURCE))
    }
}

/// A copier slot: its transactional id's coordinator state and its current incarnation.
struct Slot {
    coordinator: Option<Coordinator>,
    incarnation: u32,
    copier: Option<Copier>,
    last_arrival: BTreeMap<BrokerId, Millis>,
}

struct World {
    config: CopyLoopConfig,
    entropy: Entropy,
    cluster: Cluster,
    sim: SimConfig,
    group: GroupCoordinator,
    slots: Vec<Slot>,
    source: Rc<Vec<Vec<i64>>>,
    committed: BTreeMap<i32, i64>,
    network: BTreeMap<(usize, u32, RequestId), Travelling>,
    queue: BTreeMap<(Millis, u64), Pending>,
    queued: u64,
    next_heartbeat_seq: u64,
    now: Millis,
    base: Instant,
    trace: Trace,
    report: CopyLoopReport,
    /// What the copiers' committed transactions reported.
    reported: Vec<crate::eos::CommittedTransaction>,
}

impl World {
    fn new(config: CopyLoopConfig, mut entropy: Entropy) -> Self {
        let mut sim = SimConfig::calm(&[(DESTINATION, config.partitions)], 2);
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
                last_arrival: BTreeMap::new(),
            })
            .collect();
        let group = GroupCoordinator::new(
            SOURCE_ID,
            config.partitions,
            config.session_timeout_ms,
            config.heartbeat_interval_ms,
        );
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
            network: BTreeMap::new(),
            queue: BTreeMap::new(),
            queued: 0,
            next_heartbeat_seq: 0,
            now: 0,
            base: Instant::now(),
            report: CopyLoopReport::default(),
            reported: Vec::new(),
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

    fn schedule(&mut self, at: Millis, pending: Pending) {
        self.queued += 1;
        self.queue.insert((at, self.queued), pending);
    }

    fn note(&mut self, line: String) {
        self.trace.note(self.now, line);
    }

    fn fail(&self, violation: Violation) -> Failure {
        Failure {
            step: self.queued,
            now_ms: self.now,
            violation,
            trace: self.trace.lines(),
        }
    }

    fn latency(&mut self) -> Millis {
        let mut latency = self.entropy.range(1, 8);
        if self.entropy.chance(self.config.delay) {
            latency += self.entropy.range(0, self.config.max_delay_ms);
        }
        latency
    }

    fn heartbeat_latency(&mut self) -> Millis {
        let mut latency = self.entropy.range(1, 8);
        if self.entropy.chance(self.config.delay) {
            latency += self.entropy.range(0, self.config.heartbeat_max_delay_ms);
        }
        latency
    }

    fn run(mut self) -> Result<CopyLoopReport, Failure> {
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
            let Some(((at, _), pending)) = self.queue.pop_first() else {
                return Err(self.fail("nothing scheduled (P9: silent stall)".into()));
            };
            self.now = self.now.max(at);
            if let Err(v) = self.process(pending) {
                return Err(self.fail(v));
            }
        }
        // Requests still on their way (a crashed copier's EndTxn...) land before the check.
        while let Some(((at, _), pending)) = self.queue.pop_first() {
            self.now = self.now.max(at);
            if let Pending::Arrive { .. } = pending
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
        for action in actions {
            self.execute(i, incarnation, action);
        }
        if wake.is_some_and(|wake| wake <= now) {
            acted = true;
        }
        Ok(acted)
    }

    fn execute(&mut self, i: usize, incarnation: u32, action: Action) {
        let v1 = !self.config.transactions_v2;
        match action {
            Action::Produce {
                request,
                broker,
                batches,
                ..
            } => {
                self.write(i, incarnation, request, broker, Body::Produce(batches));
            }
            Action::InitProducerId { request } => {
                self.write(i, incarnation, request, 1, Body::InitProducerId);
            }
            Action::RefreshMetadata => {
                let at = self.now + self.latency();
                self.schedule(
                    at,
                    Pending::Metadata {
                        copier: i,
                        incarnation,
                    },
                );
            }
            Action::Disconnect { broker } => {
                let keys: Vec<(usize, u32, RequestId)> = self
                    .network
                    .iter()
                    .filter(|(k, t)| {
                        k.0 == i && k.1 == incarnation && t.broker == broker && t.wanted
                    })
                    .map(|(k, _)| *k)
                    .collect();
                for key in keys {
                    // Under transactions v1 a late EndTxn could end the next transaction: the
                    // model drains a closed connection's coordinator requests (as runner.rs).
                    let drop = v1
                        && self
                            .network
                            .get(&key)
                            .is_some_and(|t| matches!(t.body, Some(Body::Coordinator(_))));
                    if drop {
                        self.network.remove(&key);
                    } else if let Some(t) = self.network.get_mut(&key) {
                        t.wanted = false;
                    }
                    self.schedule(
                        self.now,
                        Pending::Failed {
                            copier: i,
                            incarnation,
                            request: key.2,
                        },
                    );
                }
            }
            Action::FindCoordinator { request, key } => {
                self.write(i, incarnation, request, 1, Body::FindCoordinator(key));
            }
            Action::Coordinator {
                request,
                broker,
                body,
            } => {
                self.write(i, incarnation, request, broker, Body::Coordinator(body));
            }
        }
    }

    fn write(
        &mut self,
        i: usize,
        incarnation: u32,
        request: RequestId,
        broker: BrokerId,
        body: Body,
    ) {
        let at = self.now + self.latency();
        let Some(slot) = self.slots.get_mut(i) else {
            return;
        };
        // Requests on one connection arrive in order.
        let last = slot.last_arrival.entry(broker).or_insert(0);
        let at = at.max(*last);
        *last = at;
        self.network.insert(
            (i, incarnation, request),
            Travelling {
                broker,
                body: Some(body),
                wanted: true,
            },
        );
        self.schedule(
            at,
            Pending::Arrive {
                copier: i,
                incarnation,
                request,
            },
        );
    }

    /// Lends the cluster copier `i`'s transaction coordinator state for `f`.
    fn with_coordinator<T>(&mut self, i: usize, f: impl FnOnce(&mut Cluster) -> T) -> T {
        match self.slots.get_mut(i) {
            Some(slot) => self.cluster.with_coordinator(&mut slot.coordinator, f),
            None => f(&mut self.cluster),
        }
    }

    fn arrive(&mut self, i: usize, incarnation: u32, request: RequestId) -> Result<(), Violation> {
        let key = (i, incarnation, request);
        let Some(t) = self.network.get_mut(&key) else {
            return Ok(());
        };
        let Some(body) = t.body.take() else {
            return Ok(());
        };
        let broker = t.broker;
        let now = self.now;
        let answer = match body {
            Body::Produce(batches) => {
                let mut responses = Vec::new();
                for (tp, batch) in &batches {
                    let bytes = batch.to_bytes();
                    let verdict = self.with_coordinator(i, |c| c.produce(broker, tp, &bytes, now));
                    if let Some(v) = verdict.violation {
                        return Err(v);
                    }
                    self.note(format!(
                        "copier {i}.{incarnation}: produce {tp:?} epoch {} -> {} ({} appended)",
                        batch.producer_epoch(),
                        verdict.response.error,
                        verdict.appended.len()
                    ));
                    responses.push(verdict.response);
                }
                Answer::Produce(responses)
            }
            Body::InitProducerId => Answer::Identity(self.cluster.init_producer_id()),
            Body::FindCoordinator(key) => {
                let found = self
                    .with_coordinator(i, |c| c.find_coordinator(&key))
                    .unwrap_or(1);
                Answer::Txn(TxnResponse::Coordinator(found))
            }
            Body::Coordinator(body) => {
                let response = self.coordinator_request(i, broker, &body)?;
                self.note(format!(
                    "copier {i}.{incarnation}: {body:?} -> {response:?}"
                ));
                Answer::Txn(response)
            }
        };
        let wanted = self.network.get(&key).is_some_and(|t| t.wanted);
        if !wanted {
            self.network.remove(&key);
            return Ok(());
        }
        if self.entropy.chance(self.config.answer_loss) {
            // Lost: the engine's request timeout closes the connection.
            self.note(format!(
                "copier {i}.{incarnation}: answer to {request} lost"
            ));
            return Ok(());
        }
        let at = now + self.latency();
        self.schedule(
            at,
            Pending::Deliver {
                copier: i,
                incarnation,
                request,
                answer,
            },
        );
        Ok(())
    }

    /// A transaction coordinator or group coordinator request from copier `i`.
    fn coordinator_request(
        &mut self,
        i: usize,
        broker: BrokerId,
        body: &TxnRequest,
    ) -> Result<TxnResponse, Violation> {
        let now = self.now;
        if let TxnRequest::TxnOffsetCommit { group, offsets, .. } = body {
            self.group.expire(now);
            let code = self
                .group
                .validate_txn_offset_commit(&group.member_id, group.generation_id);
            if code != ErrorCode::NONE {
                self.report.fenced_commits += 1;
                return Ok(TxnResponse::TxnOffsetCommit(
                    offsets
                        .iter()
                        .map(|o| (o.partition.clone(), code))
                        .collect(),
                ));
            }
            for o in offsets {
                if !self.group.owns(&group.member_id, o.partition.partition) {
                    return Err(format!(
                        "member {} (epoch {}) got a TxnOffsetCommit of {:?} through without owning it",
                        group.member_id, group.generation_id, o.partition
                    ));
                }
            }
            if let Some(c) = self.slots.get_mut(i).and_then(|s| s.coordinator.as_mut()) {
                c.admit_member(group.generation_id, &group.member_id);
            }
        }
        let response = self.with_coordinator(i, |c| c.coordinator_request(broker, body, now));
        let applied = self
            .slots
            .get_mut(i)
            .and_then(|s| s.coordinator.as_mut())
            .map(|c| std::mem::take(&mut c.committed_offsets))
            .unwrap_or_default();
        for (tp, offset) in applied {
            let before = self.committed.get(&tp.partition).copied().unwrap_or(0);
            if offset < before {
                return Err(format!(
                    "the committed offset of {tp:?} moved backwards from {before} to {offset}"
                ));
            }
            self.committed.insert(tp.partition, offset);
            self.note(format!("group offset {tp:?} = {offset}"));
        }
        Ok(response)
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
    fn engine_event(&self, i: usize, incarnation: u32, event: Event) {
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
            Pending::Arrive {
                copier,
                incarnation,
                request,
            } => {
                self.arrive(copier, incarnation, request)?;
            }
            Pending::Deliver {
                copier,
                incarnation,
                request,
                answer,
            } => {
                let key = (copier, incarnation, request);
                if !self.network.remove(&key).is_some_and(|t| t.wanted) {
                    return Ok(());
                }
                let event = match answer {
                    Answer::Produce(partitions) => Event::ProduceResponse {
                        request,
                        partitions,
                        throttle_ms: 0,
                    },
                    Answer::Identity(identity) => Event::ProducerId {
                        request,
                        result: Ok(identity),
                    },
                    Answer::Txn(response) => Event::Txn {
                        request,
                        result: Ok(response),
                    },
                };
                self.engine_event(copier, incarnation, event);
            }
            Pending::Failed {
                copier,
                incarnation,
                request,
            } => {
                let error = Error::io(
                    "sim",
                    std::io::Error::new(std::io::ErrorKind::ConnectionReset, "connection closed"),
                );
                let event = Event::RequestFailed {
                    request,
                    written: true,
                    error,
                };
                self.engine_event(copier, incarnation, event);
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
            for t in self
                .network
                .iter_mut()
                .filter(|(k, _)| k.0 == i)
                .map(|(_, t)| t)
            {
                t.wanted = false;
            }
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
            call_timeout_ms: 2_000,
        });
        let seed = self.entropy.below(u64::MAX);
        let engine = Engine::new(engine_config, seed);
        let acc = Accumulator::new(self.sim.accumulator.clone());
        let mut member = ConsumerMember::new(
            GROUP.into(),
            format!("m{i}-{incarnation}"),
            None,
            10_000,
            None,
        );
        member.subscribe(vec![SOURCE.into()]);
        let state = Rc::new(RefCell::new(CopierState::new(
            self.now,
            self.base,
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
        self.reported.extend(state.transactions.iter().cloned());
    }

    /// Every copy a committed transaction reported (offsets are exact) is one destination
    /// record, visible read_committed at the offset reported, carrying the source record's id.
    fn check_reported(&self) -> Result<(), Violation> {
        let visible: BTreeMap<&TopicPartition, BTreeMap<i64, u64>> = self
            .cluster
            .partitions()
            .iter()
            .map(|(tp, p)| (tp, p.read_committed_at().into_iter().collect()))
            .collect();
        for copy in self.reported.iter().flat_map(|t| &t.copies) {
            let source = &copy.source;
            let id = record_id(source.partition.partition, source.offset);
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
        for (p, offsets) in self.source.iter().enumerate() {
            let partition = i32::try_from(p).unwrap_or(0);
            let expected: Vec<u64> = offsets.iter().map(|&o| record_id(partition, o)).collect();
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
        Ok(())
    }
}
