//! The copy-loop workload: 2–3 copiers in one KIP-848 group copy a source topic
//! into a destination topic exactly once. Each runs the real [`crate::eos::CopyLoop`] over
//! the real member state machine (`consumer::membership::kip848`, private to the crate,
//! heartbeating in the background) against the model group coordinator ([`super::group`])
//! and its own real transactional [`Engine`](crate::engine::Engine) against the model cluster and transaction
//! coordinator
//! (`copier`), over a network that delays and loses answers, with copiers that crash (their
//! state dropped without leaving) and restart as new members (`world`, and `requests` for
//! what the copiers' engines send).
//!
//! Invariants: a TxnOffsetCommit the group accepts comes from a member that owns the
//! partition (no zombie gets a commit through); the group's committed offsets never move
//! backwards; at the end, read_committed, the destination holds every source record exactly
//! once, in its partition's source order, every committed offset is the log end, and every
//! copy a committed transaction of the loop reported is where it said (offsets are exact).
//!
//! The transform fails on some records ([`TransformFaults`], chosen by each record's value so
//! a re-copy fails the same way) under each [`TransformErrorPolicy`], with several transforms
//! in flight on some seeds. Then, at the end: under the dead-letter policy every source
//! record is exactly once in the destination or exactly once in the dead-letter topic, never
//! both, never neither, each partition's records in source order in both; under the skip
//! policy every record the transform did not fail on is exactly once in the destination, and
//! a record reported without output is one it failed on; a failure that fails the loop aborts
//! the transaction and the record is copied again (rule T4: the aborted dead letters and output
//! are never visible). The loop's counters equal what its committed transactions reported.
//!
//! The coordinators go out of reach for longer than the copiers' `max.block.ms`
//! ([`CoordinatorOutage`]), so commits, aborts and offset commits time out with their outcome
//! unknown, and the copiers' applications drop steps at random await points
//! ([`StepCancellation`]); the invariants are the same (rule C1: the loop resolves what a
//! timed-out call or a dropped step left, and loses nothing).
//!
//! The model transaction coordinator keeps one transactional id; a copier's requests are
//! handled by lending the cluster that copier's own coordinator state (one per transactional
//! id, as Kafka keeps one per id), so producer ids and logs are shared and nothing else is.

mod copier;
mod requests;
mod world;

use std::sync::Arc;

pub use copier::record_id;
pub use copier::transform_fails;

use super::Failure;
use super::entropy::Entropy;
use super::faults::{CoordinatorOutage, StepCancellation};
use crate::consumer::membership::TopicView;
use crate::eos::TransformErrorPolicy;
use crate::types::Millis;
use world::World;

const SOURCE: &str = "src";
const DESTINATION: &str = "dst";
/// The dead-letter topic (one partition; listed after the destination so the destination's
/// leaders are those of runs without it).
const DEAD_LETTERS: &str = "dst-dlq";
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
    /// The transform's failures, the loop's policy and its concurrency.
    pub transform: TransformFaults,
    /// Coordinator outages longer than the copiers' `max.block.ms` ([`CALL_TIMEOUT_MS`]).
    pub outages: Vec<CoordinatorOutage>,
    /// Steps dropped at an await point.
    pub cancel: StepCancellation,
}

/// Which records the copy loop's transform fails on, what the loop does with them, and how
/// the transforms run.
#[derive(Debug, Clone)]
pub struct TransformFaults {
    /// Per mille of source records the transform fails on, chosen by the record's value (so
    /// a re-copy, by any copier, fails the same way). Under [`TransformErrorPolicy::Fail`] a
    /// record fails only on its first attempt in each copier incarnation, or the loop could
    /// never pass it.
    pub per_mille: u32,
    /// Mixed into the choice, so seeds fail on different records.
    pub salt: u64,
    /// `CopyLoop::on_transform_error`.
    pub policy: TransformErrorPolicy,
    /// `CopyLoop::transform_concurrency`.
    pub concurrency: usize,
    /// The longest a transform takes, in virtual milliseconds (chosen by the record's value):
    /// with several in flight they finish out of order.
    pub max_delay_ms: Millis,
}

impl TransformFaults {
    /// A transform that never fails and takes no time, one at a time.
    pub fn none() -> Self {
        Self {
            per_mille: 0,
            salt: 0,
            policy: TransformErrorPolicy::Fail,
            concurrency: 1,
            max_delay_ms: 0,
        }
    }

    /// Random faults: none on a quarter of the seeds; otherwise failures under one of the
    /// policies (dead letters and skips most often), with transforms that take time and
    /// several in flight on some.
    pub fn generate(entropy: &mut Entropy) -> Self {
        if entropy.chance(250) {
            return Self::none();
        }
        let policy = match entropy.below(10) {
            0..=4 => TransformErrorPolicy::dead_letter(DEAD_LETTERS),
            5..=8 => TransformErrorPolicy::Skip,
            _ => TransformErrorPolicy::Fail,
        };
        Self {
            per_mille: u32::try_from(entropy.range(10, 250)).unwrap_or(10),
            salt: entropy.below(u64::MAX),
            policy,
            concurrency: if entropy.chance(400) {
                usize::try_from(entropy.range(2, 5)).unwrap_or(2)
            } else {
                1
            },
            max_delay_ms: entropy.range(0, 30),
        }
    }
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
            transform: TransformFaults::none(),
            outages: Vec::new(),
            cancel: StepCancellation::none(),
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
/// The copiers' `max.block.ms`: how long one transactional call waits for its outcome.
pub const CALL_TIMEOUT_MS: Millis = 2_000;

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
    /// Source records sent to the dead-letter topic by committed transactions (as reported).
    pub dead_lettered: u64,
    /// Source records skipped by committed transactions (as reported).
    pub skipped: u64,
    /// Steps that failed with the transform's error (`Error::Transform`).
    pub transform_failures: u64,
    /// Steps dropped at an await point ([`StepCancellation`]).
    pub cancelled_steps: u64,
    /// Steps that failed with a timeout (a coordinator out of reach, [`CoordinatorOutage`]).
    pub timed_out_steps: u64,
    /// A digest of the trace: equal digests, equal runs.
    pub digest: u64,
}

/// Runs the copy loop of `seed` (its own configuration, independent of [`SimConfig`](super::SimConfig)'s).
pub fn run_copy_loop_seed(seed: u64) -> Result<CopyLoopReport, Failure> {
    let (config, entropy) = seed_run(seed);
    run_copy_loop(config, entropy)
}

/// The configuration of `seed`'s copy loop and the entropy its run draws from. The
/// transform's faults, and the coordinator outages and dropped steps, come from entropies of
/// their own, so the rest of a seed's configuration is the one it had before they existed.
pub fn seed_run(seed: u64) -> (CopyLoopConfig, Entropy) {
    let mut entropy = Entropy::from_seed(seed ^ SEED_SALT);
    let mut config = CopyLoopConfig::generate(&mut entropy);
    config.transform = TransformFaults::generate(&mut Entropy::from_seed(seed ^ TRANSFORM_SALT));
    let mut stalls = Entropy::from_seed(seed ^ STALL_SALT);
    config.outages = CoordinatorOutage::generate(&mut stalls, 4_000, CALL_TIMEOUT_MS);
    config.cancel = StepCancellation::generate(&mut stalls);
    (config, entropy)
}

/// What a sweep seed is mixed with for its copy loop (so it differs from the seed's
/// producer run).
pub const SEED_SALT: u64 = 0xC0B1_1005;
/// What a sweep seed is mixed with for its copy loop's transform faults.
const TRANSFORM_SALT: u64 = 0x7F0A_D1E7;
/// What a sweep seed is mixed with for its coordinator outages and dropped steps.
const STALL_SALT: u64 = 0x57A1_1ED5;

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

struct View;

impl TopicView for View {
    fn partition_count(&self, topic: &str) -> Option<i32> {
        (topic == SOURCE).then_some(0)
    }
    fn topic_name(&self, topic_id: &[u8; 16]) -> Option<Arc<str>> {
        (*topic_id == SOURCE_ID).then(|| Arc::from(SOURCE))
    }
}
