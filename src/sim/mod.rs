//! Deterministic simulation (crate feature `sim`) of the producer engine, its transactions, and
//! the copy loop over the KIP-848 member, for the crate's own simulation tests and fuzz
//! targets. **Not a stable API**, as `exactly::__private` is not.
//!
//! A run drives the real [`Engine`](crate::engine::Engine) and
//! [`Accumulator`](crate::engine::accumulator::Accumulator) on virtual time against a model
//! cluster that keeps Kafka's producer-state rules ([`cluster`]), over a model network that
//! loses, delays and resets ([`faults`]), with a workload of uniquely identified records
//! ([`workload`]). Invariant checkers ([`invariants`]) run after every step and at the end:
//! no duplicate, no acknowledged record missing, send order kept, definite failures absent,
//! every future resolved once and in time, one identity per request, contiguous sequences,
//! fresh sequences after every epoch bump, counters that match the futures (rules
//! P1–P9, O1 of ARCHITECTURE.md).
//!
//! About 30% of the generated runs are transactional ([`SimConfig::make_transactional`]): the
//! cluster gets a model transaction coordinator and group coordinator ([`coordinator`],
//! transactions v1 or v2), the records are sent in planned transactions, each committed or
//! aborted (some with offsets, some fenced by another instance initialising the same
//! transactional id), and the end of the run checks what a read_committed consumer sees: no
//! aborted record, every record of a committed transaction exactly once, no transaction
//! partially visible, offsets only of committed transactions; every call resolves in time
//! (T1–T5, P9).
//!
//! The copy loop of exactly-once pipelines ([`copy_loop`]) runs apart from the
//! producer runs, for a quarter of the sweep's seeds: 2–3 copiers, each the real
//! [`crate::eos::CopyLoop`] over the real KIP-848 member state machine against a model group
//! coordinator ([`group`]: member epochs, revocation before reassignment, session expiry,
//! TxnOffsetCommit fencing) and its own transactional engine, copy a source topic;
//! read_committed, the destination must hold every source record exactly once, in order.
//!
//! Everything a run does is drawn from one [`Entropy`]: [`run_seed`] replays a seed exactly
//! (no HashMap iteration order, no wall clock, no global RNG), [`run_fuzz`] takes its choices
//! from fuzzer bytes, and [`run`] takes a hand-written [`SimConfig`] for named scenarios.

pub mod cluster;
pub mod coordinator;
pub mod copy_loop;
pub mod entropy;
pub mod faults;
pub mod group;
mod interpreter;
pub mod invariants;
mod network;
mod runner;
pub mod workload;

use std::collections::BTreeMap;
use std::fmt;

pub use cluster::{ClusterConfig, LogRecord, Marker};
pub use coordinator::CoordinatorConfig;
pub use entropy::Entropy;
pub use faults::{Fault, FaultRates, InjectedError, TimedFault};
pub use invariants::{Fate, Outcome, WireBatch};
pub use runner::{TxnEnd, TxnFate};
pub use workload::{PlannedRecord, PlannedTransaction, Workload};

use crate::engine::accumulator::AccumulatorConfig;
use crate::engine::{Counters, EngineConfig, TransactionConfig};
use crate::protocol::error_code::ErrorCode;
use crate::types::{Millis, TopicPartition};

/// Everything a run is made of.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The engine's settings.
    pub engine: EngineConfig,
    /// Seed of the engine's own RNG (retry jitter).
    pub engine_seed: u64,
    /// The accumulator's settings.
    pub accumulator: AccumulatorConfig,
    /// The model cluster.
    pub cluster: ClusterConfig,
    /// What is sent when.
    pub workload: Workload,
    /// Random faults.
    pub rates: FaultRates,
    /// Faults at fixed times.
    pub scripted: Vec<TimedFault>,
    /// Errors on chosen batches.
    pub injected: Vec<InjectedError>,
    /// Partitions whose sequences start here instead of 0 under the first identity (the
    /// broker gets matching state), e.g. near `i32::MAX` to cross the wrap.
    pub start_sequences: Vec<(TopicPartition, i32)>,
    /// A run taking more steps than this fails (P9).
    pub max_steps: u64,
    /// Trace lines a failure report keeps (the last ones).
    pub trace_lines: usize,
}

impl SimConfig {
    /// A fault-free configuration over `topics` (name, partition count) and brokers
    /// `1..=brokers`, with short timeouts; scenarios start from it and add their faults.
    pub fn calm(topics: &[(&str, i32)], brokers: i32) -> Self {
        let engine = EngineConfig {
            max_in_flight: 5,
            retries: u32::MAX,
            retry_backoff_ms: 20,
            retry_backoff_max_ms: 200,
            delivery_timeout_ms: 3_000,
            request_timeout_ms: 500,
            produce_request_max_bytes: 4 << 20,
            metadata_refresh_backoff_ms: 50,
            ..EngineConfig::default()
        };
        let accumulator = AccumulatorConfig {
            batch_size: 16 * 1024,
            linger_ms: 0,
            buffer_memory: 1 << 24,
            max_request_size: 1 << 20,
            transactional: false,
            compression: crate::protocol::record_batch::Compression::None,
        };
        Self {
            engine,
            engine_seed: 1,
            accumulator,
            cluster: ClusterConfig {
                brokers: (1..=brokers.max(1)).collect(),
                topics: topics.iter().map(|(t, n)| ((*t).to_string(), *n)).collect(),
                legacy_producer_state: false,
                producer_expiration_ms: 3_600_000,
                retention_ms: 3_600_000,
                first_producer_id: 1000,
                first_epoch: 0,
                transactions: None,
            },
            workload: Workload::default(),
            rates: FaultRates::default(),
            scripted: Vec::new(),
            injected: Vec::new(),
            start_sequences: Vec::new(),
            max_steps: 500_000,
            trace_lines: 60,
        }
    }

    /// Makes the run transactional: a transactional producer (`transactional.id` "txn",
    /// calls bounded by `call_timeout_ms`), a model coordinator speaking transactions v2 or
    /// v1, and the workload's records split into `transactions`.
    pub fn make_transactional(
        &mut self,
        transactions_v2: bool,
        call_timeout_ms: Millis,
        transactions: Vec<PlannedTransaction>,
    ) {
        self.engine.transaction = Some(TransactionConfig {
            transactional_id: "txn".into(),
            timeout_ms: 60_000,
            call_timeout_ms,
        });
        self.accumulator.transactional = true;
        self.cluster.legacy_producer_state = false;
        self.cluster.transactions = Some(CoordinatorConfig {
            transactions_v2,
            ending_window_ms: 15,
            generation_id: 2,
            member_id: "member".into(),
        });
        self.start_sequences.clear();
        self.workload.flush_at_end = false;
        self.workload.transactions = Some(transactions);
    }

    /// Every partition of the cluster, in order.
    pub fn partitions(&self) -> Vec<TopicPartition> {
        self.cluster
            .topics
            .iter()
            .flat_map(|(topic, count)| (0..*count).map(|p| TopicPartition::new(topic.as_str(), p)))
            .collect()
    }

    /// A random configuration, workload and fault rates.
    pub fn generate(entropy: &mut Entropy) -> Self {
        let request_timeout_ms = entropy.range(200, 2_000);
        let linger_ms = entropy.range(0, 30);
        let delivery_timeout_ms = request_timeout_ms + linger_ms + entropy.range(500, 8_000);
        let retry_backoff_ms = entropy.range(5, 100);
        let max_request_size = if entropy.chance(300) {
            usize::try_from(entropy.range(300, 3_000)).unwrap_or(300)
        } else {
            1 << 20
        };
        // Some runs put one batch in a request, most several: the request cap is drawn from
        // the largest batch up (a request always takes at least one).
        let produce_request_max_bytes =
            max_request_size * usize::try_from(entropy.range(1, 8)).unwrap_or(1);
        let engine = EngineConfig {
            max_in_flight: usize::try_from(entropy.range(1, 5)).unwrap_or(5),
            retries: if entropy.chance(150) {
                u32::try_from(entropy.range(0, 5)).unwrap_or(0)
            } else {
                u32::MAX
            },
            retry_backoff_ms,
            retry_backoff_max_ms: retry_backoff_ms * entropy.range(1, 10),
            delivery_timeout_ms,
            request_timeout_ms,
            produce_request_max_bytes,
            metadata_refresh_backoff_ms: entropy.range(10, 200),
            ..EngineConfig::default()
        };
        let engine_seed = entropy.below(u64::MAX);
        let accumulator = AccumulatorConfig {
            batch_size: usize::try_from(entropy.range(80, 2_000)).unwrap_or(80),
            linger_ms,
            buffer_memory: if entropy.chance(200) {
                usize::try_from(entropy.range(2_000, 8_000)).unwrap_or(2_000)
            } else {
                1 << 24
            },
            max_request_size,
            transactional: false,
            compression: crate::protocol::record_batch::Compression::None,
        };
        let timeouts = delivery_timeout_ms + request_timeout_ms;
        let rates = FaultRates::generate(entropy, request_timeout_ms, timeouts);
        // State may expire, and retention delete, only what no retry can still reach: older
        // than every resend (delivery timeout) plus its request timeout plus the longest
        // network delay (as producer.id.expiration.ms and retention.ms dwarf those in Kafka).
        let safe_age = timeouts + 10 + rates.max_delay_ms + 1;
        let brokers = i32::try_from(entropy.range(1, 3)).unwrap_or(1);
        let topics: Vec<(String, i32)> = (0..entropy.range(1, 2))
            .map(|t| {
                (
                    format!("t{t}"),
                    i32::try_from(entropy.range(1, 4)).unwrap_or(1),
                )
            })
            .collect();
        let first_epoch = if entropy.chance(50) {
            i16::MAX - i16::try_from(entropy.range(0, 1)).unwrap_or(0)
        } else if entropy.chance(100) {
            i16::try_from(entropy.range(1, 30_000)).unwrap_or(1)
        } else {
            0
        };
        let cluster = ClusterConfig {
            brokers: (1..=brokers).collect(),
            topics,
            legacy_producer_state: entropy.chance(300),
            producer_expiration_ms: safe_age + entropy.range(0, delivery_timeout_ms),
            retention_ms: safe_age + entropy.range(0, delivery_timeout_ms),
            first_producer_id: i64::try_from(entropy.range(0, 1 << 40)).unwrap_or(0),
            first_epoch,
            transactions: None,
        };
        let mut config = Self {
            engine,
            engine_seed,
            accumulator,
            cluster,
            workload: Workload::default(),
            rates,
            scripted: Vec::new(),
            injected: Vec::new(),
            start_sequences: Vec::new(),
            max_steps: 500_000,
            trace_lines: 60,
        };
        let partitions = config.partitions();
        if entropy.chance(100) {
            for tp in &partitions {
                if entropy.chance(500) {
                    let below_max = i32::try_from(entropy.range(0, 60)).unwrap_or(0);
                    config
                        .start_sequences
                        .push((tp.clone(), i32::MAX - below_max));
                }
            }
        }
        let long_pause = config
            .cluster
            .producer_expiration_ms
            .max(config.cluster.retention_ms);
        config.workload = Workload::generate(entropy, &partitions, long_pause);
        if entropy.chance(300) {
            let v2 = entropy.chance(500);
            let call_timeout_ms = entropy.range(request_timeout_ms, 3 * delivery_timeout_ms);
            let records = config.workload.records.len();
            let transactions = PlannedTransaction::generate(entropy, records);
            if entropy.chance(200) {
                let at = entropy.range(0, config.workload.end_ms() + 1);
                config.scripted.push(TimedFault {
                    at,
                    fault: Fault::ZombieInit,
                });
            }
            config.make_transactional(v2, call_timeout_ms, transactions);
        }
        config
    }
}

/// Tallies of what happened in a run (or in many: see [`Stats::merge`]).
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Steps taken.
    pub steps: u64,
    /// Produce requests the engine asked for.
    pub produce_requests: u64,
    /// Batches in Produce requests that were written.
    pub batches_written: u64,
    /// InitProducerId requests the engine asked for.
    pub init_producer_id_requests: u64,
    /// Times `send` found the buffer full.
    pub buffer_full: u64,
    /// Faults by kind.
    pub faults: BTreeMap<&'static str, u64>,
    /// Transactional runs.
    pub transactional_runs: u64,
    /// Transactions by how they ended.
    pub transactions: BTreeMap<&'static str, u64>,
    /// Broker answers per partition by error code name (a NONE that appended nothing is a
    /// duplicate).
    pub answers: BTreeMap<String, u64>,
}

impl Stats {
    fn fault(&mut self, kind: &'static str) {
        *self.faults.entry(kind).or_default() += 1;
    }

    fn answer(&mut self, code: ErrorCode, appended: bool) {
        let name = match (code, appended) {
            (ErrorCode::NONE, false) => "NONE (duplicate)".to_string(),
            (code, _) => code.name().map_or_else(|| code.to_string(), str::to_string),
        };
        *self.answers.entry(name).or_default() += 1;
    }

    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &Stats) {
        self.steps += other.steps;
        self.produce_requests += other.produce_requests;
        self.batches_written += other.batches_written;
        self.init_producer_id_requests += other.init_producer_id_requests;
        self.buffer_full += other.buffer_full;
        self.transactional_runs += other.transactional_runs;
        for (k, v) in &other.transactions {
            *self.transactions.entry(k).or_default() += v;
        }
        for (k, v) in &other.faults {
            *self.faults.entry(k).or_default() += v;
        }
        for (k, v) in &other.answers {
            *self.answers.entry(k.clone()).or_default() += v;
        }
    }
}

/// What a run that kept every invariant did.
#[derive(Debug, Clone)]
pub struct Report {
    /// Virtual time at the end.
    pub end_ms: Millis,
    /// Every record's fate, by record id.
    pub fates: Vec<Fate>,
    /// The engine's counters at the end.
    pub counters: Counters,
    /// Every batch the engine put in a Produce request, in order.
    pub wire: Vec<WireBatch>,
    /// Every partition's log (including records retention deleted).
    pub logs: BTreeMap<TopicPartition, Vec<LogRecord>>,
    /// What a read_committed consumer sees in each partition (record ids in offset order).
    pub read_committed: BTreeMap<TopicPartition, Vec<u64>>,
    /// Each planned transaction's fate (empty for an idempotent run).
    pub transactions: Vec<TxnFate>,
    /// Tallies.
    pub stats: Stats,
    /// A digest of the whole trace: equal digests, equal runs.
    pub digest: u64,
    /// The last [`SimConfig::trace_lines`] lines of the trace.
    pub trace: Vec<String>,
}

impl Report {
    /// Records acknowledged.
    pub fn acked(&self) -> usize {
        self.fates
            .iter()
            .filter(|f| matches!(f.outcome, Some(Outcome::Acked(_))))
            .count()
    }
}

/// A broken invariant, where it broke, and the last steps before it.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The step.
    pub step: u64,
    /// Virtual time.
    pub now_ms: Millis,
    /// What broke.
    pub violation: String,
    /// The last lines of the run's trace.
    pub trace: Vec<String>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "step {} at {} ms: {}",
            self.step, self.now_ms, self.violation
        )
    }
}

impl Failure {
    /// The failure followed by the trace lines before it.
    pub fn with_trace(&self) -> String {
        let mut out = format!("{self}\nlast {} trace lines:\n", self.trace.len());
        for line in &self.trace {
            out.push_str(line);
            out.push('\n');
        }
        out
    }
}

/// Runs `config`, taking fault decisions from `entropy`.
pub fn run(config: SimConfig, entropy: Entropy) -> Result<Report, Failure> {
    runner::Run::new(config, entropy).run()
}

/// Runs the random configuration of `seed`.
pub fn run_seed(seed: u64) -> Result<Report, Failure> {
    run_seed_traced(seed, 60)
}

/// Runs the random configuration of `seed`, keeping the last `trace_lines` lines of trace
/// for a failure report (the configuration does not depend on it: the run is the same).
pub fn run_seed_traced(seed: u64, trace_lines: usize) -> Result<Report, Failure> {
    let mut entropy = Entropy::from_seed(seed);
    let config = SimConfig {
        trace_lines,
        ..SimConfig::generate(&mut entropy)
    };
    run(config, entropy)
}

/// Runs the configuration and schedule that fuzzer bytes `data` choose.
pub fn run_fuzz(data: &[u8]) -> Result<Report, Failure> {
    let mut entropy = Entropy::from_bytes(data);
    let config = SimConfig::generate(&mut entropy);
    run(config, entropy)
}

/// The command that replays `seed`.
pub fn replay_command(seed: u64) -> String {
    format!("EXACTLY_SIM_SEED={seed} cargo test --all-features --test simulation replay_one_seed")
}
