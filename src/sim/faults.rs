//! What can go wrong, and how often: per-decision chances (per request, per response, per
//! partition of a request) and the mean intervals of spontaneous faults (connection resets,
//! leader moves, broker crashes, producer-state expiry, retention, clock jumps), plus faults a
//! named scenario schedules itself.

use super::entropy::Entropy;
use crate::protocol::error_code::ErrorCode;
use crate::types::{BrokerId, Millis, TopicPartition};

/// Chances are per mille; intervals are mean virtual milliseconds between two occurrences
/// (0: never).
#[derive(Debug, Clone, Default)]
pub struct FaultRates {
    /// A request is never written (connection refused, write failed): `written: false`.
    pub drop_request: u32,
    /// The broker applies a request and its answer is lost (the producer times out, or the
    /// connection resets soon after).
    pub drop_response: u32,
    /// A request or a response takes extra time, up to [`FaultRates::max_delay_ms`].
    pub delay: u32,
    /// The longest extra delay (beyond the request timeout, so delays also cause timeouts).
    pub max_delay_ms: Millis,
    /// One partition of a Produce request is answered with an injected error code.
    pub inject_error: u32,
    /// Injected errors may include a fatal one (CLUSTER_AUTHORIZATION_FAILED).
    pub fatal_errors: bool,
    /// An InitProducerId is answered with a retriable coordinator error.
    pub identity_error: u32,
    /// A metadata answer reports a partition without leader or with a wrong one.
    pub stale_metadata: u32,
    /// Mean interval of connection resets.
    pub reset_every_ms: Millis,
    /// Mean interval of leadership moves.
    pub move_leader_every_ms: Millis,
    /// Mean interval of broker crashes.
    pub crash_every_ms: Millis,
    /// Longest time a crashed broker stays down.
    pub crash_max_ms: Millis,
    /// Mean interval of producer-state expiry sweeps.
    pub expire_every_ms: Millis,
    /// Mean interval of retention moving a log start offset.
    pub retention_every_ms: Millis,
    /// Mean interval of clock jumps (the process paused: timers all fire at once).
    pub jump_every_ms: Millis,
    /// Longest clock jump.
    pub jump_max_ms: Millis,
}

impl FaultRates {
    /// Random rates: each kind of fault is off in about 40% of runs, so faults also show up
    /// alone; `timeouts` is the request plus delivery timeout, which sizes delays and jumps.
    pub fn generate(entropy: &mut Entropy, request_timeout_ms: Millis, timeouts: Millis) -> Self {
        let mut chance = |max: u64| -> u32 {
            if entropy.chance(400) {
                0
            } else {
                u32::try_from(entropy.range(1, max)).unwrap_or(0)
            }
        };
        let drop_request = chance(150);
        let drop_response = chance(100);
        let delay = chance(200);
        let inject_error = chance(120);
        let identity_error = chance(300);
        let stale_metadata = chance(200);
        let mut every = |low: Millis, high: Millis| -> Millis {
            if entropy.chance(400) {
                0
            } else {
                entropy.range(low, high)
            }
        };
        let reset_every_ms = every(200, 5_000);
        let move_leader_every_ms = every(200, 5_000);
        let crash_every_ms = every(1_000, 20_000);
        let expire_every_ms = every(500, 10_000);
        let retention_every_ms = every(500, 10_000);
        let jump_every_ms = every(5_000, 60_000);
        Self {
            drop_request,
            drop_response,
            delay,
            max_delay_ms: entropy.range(1, 2 * request_timeout_ms),
            inject_error,
            fatal_errors: entropy.chance(30),
            identity_error,
            stale_metadata,
            reset_every_ms,
            move_leader_every_ms,
            crash_every_ms,
            crash_max_ms: entropy.range(100, 2 * timeouts),
            expire_every_ms,
            retention_every_ms,
            jump_every_ms,
            jump_max_ms: entropy.range(100, 2 * timeouts),
        }
    }
}

/// A fault that happens at a moment rather than to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Another producer instance with the same transactional id initialises: the coordinator
    /// bumps the epoch (fencing the running producer) and aborts its open transaction.
    ZombieInit,
    /// The transaction coordinator (or the group coordinator) moves to another broker.
    MoveCoordinator {
        /// The group coordinator (true) or the transaction coordinator.
        group: bool,
        /// The new coordinator.
        to: BrokerId,
    },
    /// The broker crashes: its connections reset, what was on the way to it is lost, and
    /// connecting to it is refused until [`Fault::BrokerUp`].
    BrokerDown {
        /// The broker.
        broker: BrokerId,
    },
    /// The broker is back.
    BrokerUp {
        /// The broker.
        broker: BrokerId,
    },
    /// The controller moves every partition led by a down broker to a live one.
    ElectLeaders,
    /// A partition's leadership moves (with its log and producer state).
    MoveLeader {
        /// The partition.
        partition: TopicPartition,
        /// The new leader.
        to: BrokerId,
    },
    /// The producer's connection to the broker resets: everything outstanding on it fails
    /// with `written: true`.
    ResetConnection {
        /// The broker.
        broker: BrokerId,
    },
    /// Producer state idle for `producer.id.expiration.ms` is removed everywhere.
    ExpireProducerState,
    /// Retention moves a partition's log start offset forward.
    AdvanceLogStart {
        /// The partition.
        partition: TopicPartition,
    },
    /// Virtual time jumps forward (the process was paused).
    ClockJump {
        /// By how much.
        ms: Millis,
    },
    /// From now on the broker applies what it receives but its answers are lost (a one-way
    /// network partition), until [`Fault::HealResponses`].
    BlackholeResponses {
        /// The broker.
        broker: BrokerId,
    },
    /// Ends [`Fault::BlackholeResponses`].
    HealResponses {
        /// The broker.
        broker: BrokerId,
    },
    /// From now on requests written to the broker take `extra_ms` longer to arrive (0 ends
    /// it); requests behind them on the same connection wait for them.
    SlowNetwork {
        /// The broker.
        broker: BrokerId,
        /// The extra latency.
        extra_ms: Millis,
    },
}

/// A fault at a given time, scheduled by a scenario.
#[derive(Debug, Clone)]
pub struct TimedFault {
    /// When.
    pub at: Millis,
    /// What.
    pub fault: Fault,
}

/// An error a scenario injects on chosen batches: the next `times` batches of `partition`
/// matching the sequence and epoch (when given) are answered with `code`.
#[derive(Debug, Clone)]
pub struct InjectedError {
    /// The partition.
    pub partition: TopicPartition,
    /// Only batches with this base sequence.
    pub base_sequence: Option<i32>,
    /// Only batches with this producer epoch.
    pub epoch: Option<i16>,
    /// The answer.
    pub code: ErrorCode,
    /// How many more batches it applies to.
    pub times: u32,
}

/// When a broker's error code is decided relative to the append, which decides whether the
/// batch is in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorTiming {
    /// Rejected before the log is touched (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS,
    /// MESSAGE_TOO_LARGE, ...).
    BeforeAppend,
    /// Appended to the leader's log, then the error (REQUEST_TIMED_OUT waiting for acks=all,
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND): the KAFKA-13574 shape.
    AfterAppend,
    /// Either (KAFKA_STORAGE_ERROR): the simulation chooses.
    Either,
}

/// How an injected code relates to the append (see [`ErrorTiming`]).
pub fn timing(code: ErrorCode) -> ErrorTiming {
    match code {
        ErrorCode::REQUEST_TIMED_OUT | ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND => {
            ErrorTiming::AfterAppend
        }
        ErrorCode::KAFKA_STORAGE_ERROR => ErrorTiming::Either,
        _ => ErrorTiming::BeforeAppend,
    }
}

/// Codes the random schedule injects on Produce partitions: retriable ones rejected up front,
/// retriable ones after the append, and non-retriable ones (the batch fails for good).
const PRODUCE_ERRORS: [ErrorCode; 12] = [
    ErrorCode::NOT_ENOUGH_REPLICAS,
    ErrorCode::NOT_LEADER_OR_FOLLOWER,
    ErrorCode::LEADER_NOT_AVAILABLE,
    ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode::CORRUPT_MESSAGE,
    ErrorCode::REQUEST_TIMED_OUT,
    ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode::KAFKA_STORAGE_ERROR,
    ErrorCode::MESSAGE_TOO_LARGE,
    ErrorCode::RECORD_LIST_TOO_LARGE,
    ErrorCode::INVALID_RECORD,
    ErrorCode::TOPIC_AUTHORIZATION_FAILED,
];

/// Retriable coordinator errors for InitProducerId.
const IDENTITY_ERRORS: [ErrorCode; 3] = [
    ErrorCode::COORDINATOR_NOT_AVAILABLE,
    ErrorCode::NOT_COORDINATOR,
    ErrorCode::COORDINATOR_LOAD_IN_PROGRESS,
];

/// A fatal code (rule T5) for runs that allow one.
const FATAL_ERROR: ErrorCode = ErrorCode::CLUSTER_AUTHORIZATION_FAILED;

/// An injected Produce error, or `None` for a normal answer.
pub fn draw_produce_error(entropy: &mut Entropy, rates: &FaultRates) -> Option<ErrorCode> {
    if !entropy.chance(rates.inject_error) {
        return None;
    }
    if rates.fatal_errors && entropy.chance(20) {
        return Some(FATAL_ERROR);
    }
    entropy.pick(&PRODUCE_ERRORS).copied()
}

/// An injected InitProducerId error, or `None` for a normal answer.
pub fn draw_identity_error(entropy: &mut Entropy, rates: &FaultRates) -> Option<ErrorCode> {
    if !entropy.chance(rates.identity_error) {
        return None;
    }
    if rates.fatal_errors && entropy.chance(50) {
        return Some(FATAL_ERROR);
    }
    entropy.pick(&IDENTITY_ERRORS).copied()
}

/// The copy loop's transaction and group coordinators out of reach for a while (a cut link,
/// a stalled broker): requests written to them from `at` arrive only once it ends, and what
/// they answer meanwhile is lost. Longer than the producer's `max.block.ms`, so the loop's
/// commits, aborts and offset commits time out and their outcome is unknown until the
/// coordinator answers again (rule T4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoordinatorOutage {
    /// When it begins.
    pub at: Millis,
    /// How long it lasts.
    pub ms: Millis,
}

impl CoordinatorOutage {
    /// Whether it is on at `now`.
    pub fn covers(&self, now: Millis) -> bool {
        (self.at..self.at.saturating_add(self.ms)).contains(&now)
    }

    /// When it ends.
    pub fn end(&self) -> Millis {
        self.at.saturating_add(self.ms)
    }

    /// Up to two outages within the first `within_ms`, each longer than `call_timeout_ms`
    /// (`max.block.ms`) and at most eight times it (so a caller that calls a timed-out
    /// commit or abort again a fixed number of times runs out of calls); none on about 40% of
    /// the runs.
    pub fn generate(
        entropy: &mut Entropy,
        within_ms: Millis,
        call_timeout_ms: Millis,
    ) -> Vec<Self> {
        if entropy.chance(400) {
            return Vec::new();
        }
        (0..entropy.range(1, 2))
            .map(|_| Self {
                at: entropy.range(0, within_ms),
                ms: entropy.range(call_timeout_ms + call_timeout_ms / 4, 8 * call_timeout_ms),
            })
            .collect()
    }
}

/// Steps of the copy loop dropped at an await point: a step is dropped, with a chance of
/// `per_mille`, once it has returned `Pending` a number of times drawn from `1..=max_polls`
/// (so the drop lands at whichever await point that step reached: the poll, the transform,
/// the send, the generation hold, the offset commit, the end of the transaction, the
/// delivery futures), as a `tokio::time::timeout` around `step` would drop it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StepCancellation {
    /// Per mille of steps dropped (0: none).
    pub per_mille: u32,
    /// The most times a dropped step returned `Pending` before it is dropped (at least 1).
    pub max_polls: u32,
    /// Mixed into each copier incarnation's draws, so seeds drop different steps.
    pub salt: u64,
}

impl StepCancellation {
    /// No step dropped.
    pub fn none() -> Self {
        Self::default()
    }

    /// Random cancellation: none on about half the runs; otherwise up to 30% of the steps,
    /// dropped within their first 40 waits.
    pub fn generate(entropy: &mut Entropy) -> Self {
        if entropy.chance(500) {
            return Self::none();
        }
        Self {
            per_mille: u32::try_from(entropy.range(20, 300)).unwrap_or(20),
            max_polls: u32::try_from(entropy.range(1, 40)).unwrap_or(1),
            salt: entropy.below(u64::MAX),
        }
    }

    /// How many times the next step may return `Pending` before it is dropped (`None`: it
    /// is not dropped).
    pub fn draw(&self, entropy: &mut Entropy) -> Option<u32> {
        (self.per_mille > 0 && entropy.chance(self.per_mille))
            .then(|| u32::try_from(entropy.range(1, u64::from(self.max_polls.max(1)))).unwrap_or(1))
    }
}
