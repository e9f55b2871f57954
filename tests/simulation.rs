//! The deterministic simulation suite (`exactly::sim`): a seed sweep over random
//! configurations and fault schedules, a replay of one seed, and named regression scenarios
//! for the retry-path bugs other producers shipped and for those the simulation found here.
//!
//! `EXACTLY_SIM_SEEDS=N` sets how many seeds each sweep runs, `seed_sweep` and
//! `copy_loop_sweep` alike (`EXACTLY_SIM_FIRST_SEED` where they start); `EXACTLY_SIM_SEED=S`
//! makes `replay_one_seed` (or `replay_one_copy_loop_seed`) run seed `S` and print its trace
//! (`EXACTLY_SIM_TRACE` lines of it) if it fails. `scripts/test` runs this binary a second
//! time in release with `EXACTLY_SIM_SEEDS=10000`.
#![cfg(feature = "sim")]

use std::ops::Range;

use exactly::__private::protocol::error_code::ErrorCode;
use exactly::__private::{BrokerId, Millis};
use exactly::TopicPartition;
use exactly::eos::TransformErrorPolicy;
use exactly::sim::copy_loop;
use exactly::sim::faults::StepCancellation;
use exactly::sim::{
    self, Entropy, Fault, InjectedError, Outcome, PlannedTransaction, Report, SimConfig,
    TimedFault, TxnEnd, WireBatch,
};

/// Seeds the sweep runs by default: a debug build runs about a hundred per second on one
/// core, so this keeps the suite well under two minutes on two.
const DEFAULT_SEEDS: u64 = 1000;

/// The seed `replay_one_seed` runs when `EXACTLY_SIM_SEED` is not set.
const FIXED_SEED: u64 = 20_240_611;

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    match value.trim().parse() {
        Ok(n) => Some(n),
        Err(_) => panic!("{name}={value:?} is not a number"),
    }
}

#[test]
fn seed_sweep() {
    let seeds = env_u64("EXACTLY_SIM_SEEDS").unwrap_or(DEFAULT_SEEDS);
    let first = env_u64("EXACTLY_SIM_FIRST_SEED").unwrap_or(0);
    let mut failed = Vec::new();
    let mut totals = sim::Stats::default();
    let (mut records, mut acked, mut bumps, mut indeterminate, mut lost) = (0, 0, 0, 0, 0);
    let mut copy = copy_loop::CopyLoopReport::default();
    let mut copy_runs = 0;
    for seed in first..first + seeds {
        if copy_loop::copy_loop_selected(seed) {
            copy_runs += 1;
            match copy_loop::run_copy_loop_seed(seed) {
                Ok(report) => add_copy_report(&mut copy, &report),
                Err(failure) => {
                    println!(
                        "seed {seed} copy loop FAILED: {failure} -- replay: {}",
                        copy_loop::replay_command(seed)
                    );
                    failed.push(seed);
                }
            }
        }
        match sim::run_seed(seed) {
            Ok(report) => {
                totals.merge(&report.stats);
                records += report.fates.len();
                acked += report.acked();
                bumps += report.counters.epoch_bumps;
                indeterminate += report.counters.records_indeterminate;
                lost += report.counters.records_failed;
            }
            Err(failure) => {
                // One line per failing seed, ending with the command that replays it.
                println!(
                    "seed {seed} FAILED: {failure} -- replay: {}",
                    sim::replay_command(seed)
                );
                failed.push(seed);
            }
        }
    }
    println!(
        "{seeds} seeds from {first}: {} failed; {records} records: {acked} acked, \
         {indeterminate} indeterminate, {lost} failed; {bumps} epoch bumps; {totals:?}",
        failed.len()
    );
    println!("copy loop: {copy_runs} of the seeds; totals {copy:?}");
    assert!(
        failed.is_empty(),
        "{} of {seeds} seeds failed: {failed:?}",
        failed.len()
    );
}

/// The copy loop alone over `EXACTLY_SIM_SEEDS` seeds (50 by default; `seed_sweep` runs the
/// copy loop of every fourth of its seeds as well).
#[test]
fn copy_loop_sweep() {
    let seeds = env_u64("EXACTLY_SIM_SEEDS").unwrap_or(50);
    let first = env_u64("EXACTLY_SIM_FIRST_SEED").unwrap_or(0);
    let mut total = copy_loop::CopyLoopReport::default();
    let mut failed = Vec::new();
    for seed in first..first + seeds {
        match copy_loop::run_copy_loop_seed(seed) {
            Ok(report) => add_copy_report(&mut total, &report),
            Err(failure) => {
                println!(
                    "seed {seed} copy loop FAILED: {failure} -- replay: {}",
                    copy_loop::replay_command(seed)
                );
                failed.push(seed);
            }
        }
    }
    println!(
        "copy loop: {seeds} seeds from {first}: {} failed; {total:?}",
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "{} of {seeds} copy-loop seeds failed: {failed:?}",
        failed.len()
    );
}

fn add_copy_report(total: &mut copy_loop::CopyLoopReport, report: &copy_loop::CopyLoopReport) {
    total.records += report.records;
    total.commits += report.commits;
    total.aborts += report.aborts;
    total.fenced_commits += report.fenced_commits;
    total.lost_before_commit += report.lost_before_commit;
    total.aborts_draining_failures += report.aborts_draining_failures;
    total.fenced_heartbeats += report.fenced_heartbeats;
    total.expired_members += report.expired_members;
    total.crashes += report.crashes;
    total.dead_lettered += report.dead_lettered;
    total.skipped += report.skipped;
    total.transform_failures += report.transform_failures;
    total.cancelled_steps += report.cancelled_steps;
    total.timed_out_steps += report.timed_out_steps;
}

#[test]
fn replay_one_copy_loop_seed() {
    let seed = env_u64("EXACTLY_SIM_SEED").unwrap_or(1);
    let (mut config, entropy) = copy_loop::seed_run(seed);
    config.trace_lines =
        usize::try_from(env_u64("EXACTLY_SIM_TRACE").unwrap_or(200)).unwrap_or(200);
    println!("{config:?}");
    match copy_loop::run_copy_loop(config, entropy) {
        Ok(report) => println!("copy loop seed {seed}: {report:?}"),
        Err(failure) => panic!("copy loop seed {seed} failed: {}", failure.with_trace()),
    }
}

#[test]
fn replay_one_seed() {
    let seed = env_u64("EXACTLY_SIM_SEED").unwrap_or(FIXED_SEED);
    let trace_lines = env_u64("EXACTLY_SIM_TRACE").unwrap_or(200);
    match sim::run_seed_traced(seed, usize::try_from(trace_lines).unwrap_or(usize::MAX)) {
        Ok(report) => {
            println!(
                "seed {seed}: {} records, {} acked, {} steps, {} ms; {:?}",
                report.fates.len(),
                report.acked(),
                report.stats.steps,
                report.end_ms,
                report.counters
            );
            assert!(!report.fates.is_empty(), "seed {seed} sent nothing");
        }
        Err(failure) => panic!(
            "seed {seed} failed: {}\nreplay: {}",
            failure.with_trace(),
            sim::replay_command(seed)
        ),
    }
}

#[test]
fn a_seed_replays_exactly() {
    for seed in [3, 17, 101] {
        let first = sim::run_seed(seed).map(|r| r.digest);
        let second = sim::run_seed(seed).map(|r| r.digest);
        assert_eq!(
            first.as_ref().ok(),
            second.as_ref().ok(),
            "seed {seed} ran differently twice"
        );
        assert!(first.is_ok(), "seed {seed} failed");
    }
}

#[test]
fn fuzzer_bytes_drive_a_run() {
    // Exhausted bytes are the quiet choice: an empty input is a calm run.
    for data in [
        &[][..],
        &[0xff; 64][..],
        b"retry paths, retry paths, retry paths",
    ] {
        if let Err(failure) = sim::run_fuzz(data) {
            panic!("fuzz input {data:?} failed: {}", failure.with_trace());
        }
    }
}

// ---- scenario helpers ----

fn partitions(topic: &str, count: i32) -> Vec<TopicPartition> {
    (0..count).map(|p| TopicPartition::new(topic, p)).collect()
}

fn at(at: Millis, fault: Fault) -> TimedFault {
    TimedFault { at, fault }
}

/// Answers `times` batches of `partition` at `base_sequence` (under `epoch`) with `code`.
fn inject(
    partition: &TopicPartition,
    base_sequence: i32,
    epoch: i16,
    code: ErrorCode,
    times: u32,
) -> InjectedError {
    InjectedError {
        partition: partition.clone(),
        base_sequence: Some(base_sequence),
        epoch: Some(epoch),
        code,
        times,
    }
}

/// Runs a scenario; `EXACTLY_SIM_TRACE=N` prints the last N lines of its trace.
/// One record per batch, so that a batch's sequence is its record's id: each batch is full
/// with its first record (a lingered batch otherwise keeps taking records while its pipeline
/// is busy, ARCHITECTURE.md, performance shape).
fn one_record_per_batch(config: &mut SimConfig) {
    config.accumulator.batch_size = 64;
}

fn run(name: &str, mut config: SimConfig, seed: u64) -> Report {
    let print = env_u64("EXACTLY_SIM_TRACE");
    if let Some(lines) = print {
        config.trace_lines = usize::try_from(lines).unwrap_or(usize::MAX);
    }
    match sim::run(config, Entropy::from_seed(seed)) {
        Ok(report) => {
            if print.is_some() {
                println!("{name}:\n{}", report.trace.join("\n"));
            }
            report
        }
        Err(failure) => panic!("{name}: {}", failure.with_trace()),
    }
}

fn outcome(report: &Report, id: usize) -> &Outcome {
    match report.fates.get(id).and_then(|f| f.outcome.as_ref()) {
        Some(outcome) => outcome,
        None => panic!("record {id} has no outcome"),
    }
}

fn assert_acked(report: &Report, ids: Range<usize>) {
    for id in ids {
        assert!(
            matches!(outcome(report, id), Outcome::Acked(offset) if *offset >= 0),
            "record {id}: {:?}",
            outcome(report, id)
        );
    }
}

fn in_log(report: &Report, id: usize) -> bool {
    let id = u64::try_from(id).unwrap_or(u64::MAX);
    report
        .logs
        .values()
        .flatten()
        .any(|record| record.record_id == id)
}

fn written_batches<'a>(
    report: &'a Report,
    partition: &'a TopicPartition,
) -> impl Iterator<Item = &'a WireBatch> {
    report
        .wire
        .iter()
        .filter(move |b| b.written && b.partition == *partition)
}

// ---- named regression scenarios ----

/// Sarama #1430: sends fail while the broker is unreachable; when it comes back, the
/// producer's next batches must not be out of order. A send that never reached the broker
/// consumes no sequence (P1), so no epoch bump is needed and no OUT_OF_ORDER reaches anyone.
#[test]
fn sarama_1430() {
    let mut config = SimConfig::calm(&[("t", 3)], 1);
    let tps = partitions("t", 3);
    config
        .workload
        .burst(0, &tps, 30, 2) // 0..30: before the outage
        .burst(1_000, &tps, 15, 10) // 30..45: while the broker is down
        .burst(6_000, &tps, 30, 2); // 45..75: after it is back
    config.scripted = vec![
        at(900, Fault::BrokerDown { broker: 1 }),
        // Past the delivery timeout (3 s) of every record sent during the outage.
        at(4_500, Fault::BrokerUp { broker: 1 }),
    ];
    let report = run("sarama_1430", config, 1);
    assert_acked(&report, 0..30);
    for id in 30..45 {
        match outcome(&report, id) {
            Outcome::Failed(e) => assert!(!e.is_indeterminate()),
            other => panic!("record {id} sent to a dead broker: {other:?}"),
        }
        assert!(!in_log(&report, id));
    }
    assert_acked(&report, 45..75);
    assert_eq!(report.counters.epoch_bumps, 0, "nothing was lost: no bump");
    assert!(
        !report
            .stats
            .answers
            .contains_key("OUT_OF_ORDER_SEQUENCE_NUMBER"),
        "{:?}",
        report.stats.answers
    );
    // What reached the broker is contiguous per partition: the failed sends left no hole.
    for tp in &tps {
        let mut next = 0;
        for batch in written_batches(&report, tp) {
            assert!(
                batch.base_sequence <= next,
                "{tp:?}: {batch:?} after sequence {next}"
            );
            next = next.max(batch.last_sequence + 1);
        }
    }
}

/// KAFKA-12152: after an epoch bump, a partition that was idle during it must start at
/// sequence 0 of the new epoch, not continue its old sequence (P5).
#[test]
fn kafka_12152() {
    let mut config = SimConfig::calm(&[("t", 3)], 3);
    let tps = partitions("t", 3); // t-0 on broker 1, t-1 on 2, t-2 on 3
    config
        .workload
        .burst(0, &tps, 30, 2) // 0..30: every partition gets sequences
        .burst(1_000, &tps[..1], 5, 10) // 30..35: only t-0, whose answers are lost
        .burst(6_000, &tps, 30, 2); // 35..65: t-1 and t-2 were idle through the bump
    config.scripted = vec![
        at(950, Fault::BlackholeResponses { broker: 1 }),
        at(5_000, Fault::HealResponses { broker: 1 }),
    ];
    let report = run("kafka_12152", config, 1);
    assert_acked(&report, 0..30);
    // Written with their answers lost: in the log once, and reported as maybe written.
    for id in 30..35 {
        assert!(
            matches!(outcome(&report, id), Outcome::Indeterminate(_)),
            "record {id}: {:?}",
            outcome(&report, id)
        );
        assert!(in_log(&report, id));
    }
    assert_acked(&report, 35..65);
    assert!(report.counters.epoch_bumps >= 1);
    let epoch = report.counters.epoch;
    for tp in &tps[1..] {
        let old = written_batches(&report, tp).filter(|b| b.epoch < epoch);
        assert!(
            old.map(|b| b.last_sequence).max() > Some(0),
            "{tp:?} had sequences before"
        );
        let first_new = written_batches(&report, tp).find(|b| b.epoch == epoch);
        assert_eq!(first_new.map(|b| b.base_sequence), Some(0), "{tp:?}");
    }
}

/// KAFKA-14034: a non-retriable error on one batch while an earlier batch is being retried.
/// The earlier batch is retried under the old identity first (P4); the failed one leaves a
/// gap, so the batches after it are re-stamped under a new epoch (P2, P5), nothing is lost,
/// duplicated or reordered.
#[test]
fn kafka_14034() {
    let mut config = SimConfig::calm(&[("t", 1)], 1);
    let tp = TopicPartition::new("t", 0);
    one_record_per_batch(&mut config);
    config.workload.burst(0, std::slice::from_ref(&tp), 30, 1);
    config.injected = vec![
        inject(&tp, 12, 0, ErrorCode::NOT_ENOUGH_REPLICAS, 1),
        inject(&tp, 13, 0, ErrorCode::MESSAGE_TOO_LARGE, 1),
    ];
    let report = run("kafka_14034", config, 1);
    // The shape: 13 went out while 12 waited for its retry.
    let sent: Vec<i32> = written_batches(&report, &tp)
        .filter(|b| b.epoch == 0)
        .map(|b| b.base_sequence)
        .collect();
    let first_13 = sent.iter().position(|&s| s == 13);
    let retry_12 = sent.iter().rposition(|&s| s == 12);
    assert!(
        first_13 < retry_12,
        "13 must be in flight before 12 is retried: {sent:?}"
    );
    assert_acked(&report, 0..13);
    match outcome(&report, 13) {
        Outcome::Failed(e) => assert_eq!(e.code(), Some(ErrorCode::MESSAGE_TOO_LARGE)),
        other => panic!("record 13: {other:?}"),
    }
    assert_acked(&report, 14..30);
    assert_eq!(report.counters.epoch_bumps, 1);
    assert!(
        written_batches(&report, &tp).any(|b| b.epoch == 1 && b.base_sequence == 0),
        "the batches behind the gap were re-stamped"
    );
}

/// franz-go #216: sequences wrap from `i32::MAX` to 0, as the broker does (P3), including
/// for a batch that spans the wrap and for duplicates of it answered from the broker's cache.
#[test]
fn franz_go_216_sequence_wrap() {
    let mut config = SimConfig::calm(&[("t", 2)], 1);
    let tps = partitions("t", 2);
    config.accumulator.linger_ms = 3;
    config.start_sequences = vec![(tps[0].clone(), i32::MAX - 5), (tps[1].clone(), i32::MAX)];
    config.workload.burst(0, &tps, 80, 1);
    // Lost answers around the wrap: the retries are answered as duplicates.
    config.scripted = vec![
        at(15, Fault::BlackholeResponses { broker: 1 }),
        at(700, Fault::HealResponses { broker: 1 }),
    ];
    let report = run("franz_go_216_sequence_wrap", config, 1);
    assert_acked(&report, 0..80);
    assert_eq!(report.counters.epoch_bumps, 0, "the wrap is not an error");
    assert!(report.stats.answers.contains_key("NONE (duplicate)"));
    for tp in &tps {
        let sequences: Vec<i32> = report.logs[tp].iter().map(|r| r.sequence).collect();
        assert!(
            sequences.contains(&i32::MAX) && sequences.contains(&0),
            "{tp:?}: {sequences:?}"
        );
    }
    // t-1 starts at i32::MAX: its first batch spans the wrap, and it is the one re-sent.
    let spanning: Vec<&WireBatch> = written_batches(&report, &tps[1])
        .filter(|b| b.last_sequence < b.base_sequence)
        .collect();
    assert!(spanning.len() >= 2, "sent and re-sent: {spanning:?}");
}

/// A bump at epoch `i16::MAX` takes a new producer id (epoch 0, sequences from 0) rather
/// than overflowing the epoch (P5, KIP-360).
#[test]
fn epoch_exhaustion() {
    let mut config = SimConfig::calm(&[("t", 1)], 1);
    let tp = TopicPartition::new("t", 0);
    one_record_per_batch(&mut config);
    config.cluster.first_epoch = i16::MAX;
    config.workload.burst(0, std::slice::from_ref(&tp), 30, 1);
    config.injected = vec![inject(&tp, 8, i16::MAX, ErrorCode::MESSAGE_TOO_LARGE, 1)];
    let report = run("epoch_exhaustion", config, 1);
    assert_acked(&report, 0..8);
    assert!(matches!(outcome(&report, 8), Outcome::Failed(_)));
    assert_acked(&report, 9..30);
    assert_eq!(report.counters.epoch_bumps, 1);
    assert_eq!(
        (report.counters.producer_id, report.counters.epoch),
        (1001, 0)
    );
    let first_new = written_batches(&report, &tp).find(|b| b.producer_id == 1001);
    assert_eq!(first_new.map(|b| (b.epoch, b.base_sequence)), Some((0, 0)));
}

/// KAFKA-13574: an error after the write landed (REQUEST_TIMED_OUT waiting for replicas),
/// then retries rejected up front until the delivery timeout: the record is in the log, so
/// its failure must say "may have been written", never "not written" (P6).
#[test]
fn kafka_13574() {
    let mut config = SimConfig::calm(&[("t", 1)], 1);
    let tp = TopicPartition::new("t", 0);
    one_record_per_batch(&mut config);
    config.workload.burst(0, std::slice::from_ref(&tp), 10, 5);
    config.injected = vec![
        inject(&tp, 4, 0, ErrorCode::REQUEST_TIMED_OUT, 1),
        inject(&tp, 4, 0, ErrorCode::NOT_ENOUGH_REPLICAS, 10_000),
    ];
    let report = run("kafka_13574", config, 1);
    assert_acked(&report, 0..4);
    assert!(
        matches!(outcome(&report, 4), Outcome::Indeterminate(_)),
        "record 4: {:?}",
        outcome(&report, 4)
    );
    assert!(in_log(&report, 4));
}

/// Found by the simulation: as `kafka_13574`, but the retry is answered with a non-retriable
/// error (a limit or an ACL changed between attempts; the broker validates before it
/// de-duplicates). The engine reported the record as not written although the first attempt
/// was in the log.
#[test]
fn kafka_13574_non_retriable_error_on_a_retry() {
    let mut config = SimConfig::calm(&[("t", 1)], 1);
    let tp = TopicPartition::new("t", 0);
    one_record_per_batch(&mut config);
    config.workload.burst(0, std::slice::from_ref(&tp), 10, 5);
    config.injected = vec![
        inject(&tp, 4, 0, ErrorCode::REQUEST_TIMED_OUT, 1),
        inject(&tp, 4, 0, ErrorCode::MESSAGE_TOO_LARGE, 1),
    ];
    let report = run("kafka_13574_non_retriable_error_on_a_retry", config, 1);
    assert_acked(&report, 0..4);
    assert!(
        matches!(outcome(&report, 4), Outcome::Indeterminate(_)),
        "record 4: {:?}",
        outcome(&report, 4)
    );
    assert!(in_log(&report, 4));
    assert_acked(&report, 5..10);
}

/// Found by the simulation: when an unresolved batch expired, the engine marked every later
/// batch of the partition as behind a gap, i.e. certainly not in the log. A later batch whose
/// own answer was lost may well be in the log; it was then reported "not written", or
/// re-stamped after the bump and written twice.
#[test]
fn expired_unresolved_batch_does_not_orphan_later_ones() {
    let mut config = SimConfig::calm(&[("t", 1)], 1);
    let tp = TopicPartition::new("t", 0);
    config.engine.request_timeout_ms = 200;
    config.engine.delivery_timeout_ms = 800;
    config.workload.burst(0, std::slice::from_ref(&tp), 150, 2);
    // Answers are lost while several batches are in flight on a busy pipeline.
    config.scripted = vec![
        at(150, Fault::BlackholeResponses { broker: 1 }),
        at(1_600, Fault::HealResponses { broker: 1 }),
    ];
    let report = run(
        "expired_unresolved_batch_does_not_orphan_later_ones",
        config,
        1,
    );
    let indeterminate: Vec<usize> = (0..150)
        .filter(|&id| matches!(outcome(&report, id), Outcome::Indeterminate(_)))
        .collect();
    assert!(
        indeterminate.len() >= 2,
        "more than the first lost batch: {indeterminate:?}"
    );
    assert!(indeterminate.iter().all(|&id| in_log(&report, id)));
}

/// Found by the simulation (KAFKA-15591, KAFKA-14312, KAFKA-19880): a broker before Kafka 4.5
/// that has no state for a producer accepts any first sequence. With the first batch of a new
/// producer id rejected retriably and the next already in flight, the next one was appended
/// first: send order broken. The batch that opens an empty pipeline now goes alone.
#[test]
fn kafka_15591_first_batch_rejected_while_the_next_is_in_flight() {
    let mut config = SimConfig::calm(&[("t", 1)], 1);
    let tp = TopicPartition::new("t", 0);
    config.workload.burst(0, std::slice::from_ref(&tp), 5, 1);
    config.injected = vec![inject(&tp, 0, 0, ErrorCode::NOT_ENOUGH_REPLICAS, 1)];
    let report = run(
        "kafka_15591_first_batch_rejected_while_the_next_is_in_flight",
        config,
        1,
    );
    assert_acked(&report, 0..5);
    assert_eq!(report.counters.epoch_bumps, 0);
}

/// Found by the simulation: an InitProducerId answer arriving after the engine gave up on
/// the request and asked again was installed, and then the second answer: the producer id
/// changed under stamped batches without a sequence reset.
#[test]
fn late_init_producer_id_answer() {
    let mut config = SimConfig::calm(&[("t", 1)], 2);
    let tp = TopicPartition::new("t", 0);
    config.workload.burst(0, std::slice::from_ref(&tp), 100, 20);
    // The first InitProducerId takes longer than the request timeout (500 ms); the engine
    // asks again at ~520 ms, on the other broker (the seed's choice), and that answer comes
    // back first; the late one arrives while batches are in flight.
    let slow = |broker: BrokerId, extra_ms: Millis| Fault::SlowNetwork { broker, extra_ms };
    config.scripted = vec![
        at(0, slow(1, 700)),
        at(0, slow(2, 700)),
        at(510, slow(1, 0)),
        at(510, slow(2, 0)),
    ];
    // Seed 3: request 1 goes to broker 1, request 2 to broker 2 and is answered (producer id
    // 1000) at ~530 ms; request 1's answer (1001) arrives at ~715 ms with batches in flight.
    let report = run("late_init_producer_id_answer", config, 3);
    assert_eq!(report.stats.init_producer_id_requests, 2);
    assert_acked(&report, 0..100);
    assert_eq!(
        report.counters.producer_id, 1000,
        "the late answer is ignored"
    );
    assert!(report.wire.iter().all(|b| b.producer_id == 1000));
}

/// Found by the simulation: KAFKA-15591 again, after the broker expired the producer's state
/// during a long idle period (`producer.id.expiration.ms`). The first batch after the pause
/// is rejected retriably while the next ones are in flight; the broker, holding no state,
/// appends those first. The engine now sends one batch alone after a partition saw no
/// acknowledgement for a delivery timeout.
#[test]
fn kafka_15591_after_producer_state_expired() {
    let mut config = SimConfig::calm(&[("t", 1)], 1);
    let tp = TopicPartition::new("t", 0);
    one_record_per_batch(&mut config);
    config.cluster.producer_expiration_ms = 5_000;
    config
        .workload
        .burst(0, std::slice::from_ref(&tp), 10, 5)
        .burst(20_000, std::slice::from_ref(&tp), 10, 1);
    config.scripted = vec![at(10_000, Fault::ExpireProducerState)];
    config.injected = vec![inject(&tp, 10, 0, ErrorCode::NOT_ENOUGH_REPLICAS, 1)];
    let report = run("kafka_15591_after_producer_state_expired", config, 1);
    assert_eq!(
        report.stats.faults.get("producer state expired"),
        Some(&1),
        "{:?}",
        report.stats.faults
    );
    assert_acked(&report, 0..20);
    assert_eq!(report.counters.epoch_bumps, 0);
}

/// A pipeline that must stay full: a burst behind 300 ms of latency, small batches, no linger.
/// With one Produce request per broker per poll the pipeline shrank toward one request and
/// records timed out; every poll now fills every free in-flight slot, so the backlog drains
/// at `batches / max_in_flight` round trips.
fn backlog_drains_with_a_full_pipeline(partition_count: i32) {
    const LATENCY_MS: Millis = 300;
    let mut config = SimConfig::calm(&[("t", partition_count)], 1);
    config.engine.delivery_timeout_ms = 120_000;
    config.engine.request_timeout_ms = 5_000;
    config.accumulator.batch_size = 200;
    let tps = partitions("t", partition_count);
    config.workload.burst(10, &tps, 500, 0);
    config.scripted = vec![at(
        0,
        Fault::SlowNetwork {
            broker: 1,
            extra_ms: LATENCY_MS,
        },
    )];
    let report = run("backlog_drains_with_a_full_pipeline", config, 3);
    assert_acked(&report, 0..500);
    let batches = report.wire.iter().filter(|b| b.written).count() as u64;
    let per_partition = batches.div_ceil(partition_count as u64);
    // The first batch of each partition goes alone (KAFKA-15591); the rest five at a time.
    // One round trip is the latency plus the model network's 1..10 ms each way.
    let round_trips = 1 + (per_partition - 1).div_ceil(5);
    let bound = round_trips * (LATENCY_MS + 20) * 5 / 4;
    assert!(
        report.end_ms <= bound + 10,
        "{batches} batches over {partition_count} partitions took {} ms, more than 1.25 x \
         {round_trips} round trips ({bound} ms)",
        report.end_ms
    );
}

#[test]
fn backlog_drains_with_a_full_pipeline_one_partition() {
    backlog_drains_with_a_full_pipeline(1);
}

#[test]
fn backlog_drains_with_a_full_pipeline_six_partitions() {
    backlog_drains_with_a_full_pipeline(6);
}

// ---- transactional scenarios ----

/// A transactional run over `topic` (`count` partitions, one broker): `transactions` of
/// records sent every `spacing_ms`, each committed.
fn transactional(v2: bool, sizes: &[usize], spacing_ms: Millis, count: i32) -> SimConfig {
    let mut config = SimConfig::calm(&[("t", count)], 1);
    let total = sizes.iter().sum();
    config
        .workload
        .burst(0, &partitions("t", count), total, spacing_ms);
    let mut start = 0;
    let plan = sizes
        .iter()
        .map(|size| {
            let records = start..start + size;
            start += size;
            PlannedTransaction {
                records,
                commit: true,
                offsets: None,
                misuse: false,
            }
        })
        .collect();
    config.make_transactional(v2, 5_000, plan);
    config
}

fn visible(report: &Report) -> Vec<u64> {
    let mut ids: Vec<u64> = report.read_committed.values().flatten().copied().collect();
    ids.sort_unstable();
    ids
}

/// librdkafka #3575: an epoch bump must never silently open a new transaction and drop the
/// earlier records while commit reports success. A batch of the first transaction is
/// rejected for good: its commit must fail (abortable), the abort bumps the epoch (TV1:
/// InitProducerId with the current id/epoch; TV2: EndTxn), and the next transaction commits
/// exactly its own records.
fn librdkafka_3575(v2: bool) {
    let mut config = transactional(v2, &[10, 10], 5, 2);
    let tp = TopicPartition::new("t", 1);
    config.injected = vec![InjectedError {
        partition: tp,
        base_sequence: None,
        epoch: Some(0),
        code: ErrorCode::INVALID_RECORD,
        times: 1,
    }];
    let report = run(&format!("librdkafka_3575 (v2: {v2})"), config, 1);
    let ends: Vec<&TxnEnd> = report.transactions.iter().map(|t| &t.end).collect();
    assert!(
        matches!(
            ends.as_slice(),
            [TxnEnd::CommitFailed(_), TxnEnd::Committed]
        ),
        "{ends:?}"
    );
    let second: Vec<u64> = (10..20).collect();
    assert_eq!(
        visible(&report),
        second,
        "only the second transaction is visible"
    );
    assert!(
        report.counters.epoch_bumps >= 1,
        "the abort bumped the epoch"
    );
}

#[test]
fn librdkafka_3575_tv1() {
    librdkafka_3575(false);
}

#[test]
fn librdkafka_3575_tv2() {
    librdkafka_3575(true);
}

/// A timed-out commit: the coordinator's answers are lost for longer than
/// `max.block.ms` while the first transaction commits. The commit times out, the transaction
/// stays Committing (an abort would be refused), and calling commit again returns the real
/// outcome: committed, every record visible once, and the next transaction goes on.
fn commit_timed_out_is_called_again(v2: bool) {
    let mut config = transactional(v2, &[10, 10], 5, 1);
    // Records outlive the outage; only the commit's max.block.ms (5 s) is shorter.
    config.engine.delivery_timeout_ms = 20_000;
    config.scripted = vec![
        at(80, Fault::BlackholeResponses { broker: 1 }),
        at(8_000, Fault::HealResponses { broker: 1 }),
    ];
    let report = run(
        &format!("commit_timed_out_is_called_again (v2: {v2})"),
        config,
        1,
    );
    let ends: Vec<&TxnEnd> = report.transactions.iter().map(|t| &t.end).collect();
    assert_eq!(ends, [&TxnEnd::Committed, &TxnEnd::Committed]);
    assert_eq!(visible(&report), (0..20).collect::<Vec<u64>>());
    assert!(
        report
            .stats
            .transactions
            .contains_key("timed-out end called again"),
        "the commit timed out and was called again: {:?}",
        report.stats.transactions
    );
}

#[test]
fn commit_timed_out_is_called_again_tv1() {
    commit_timed_out_is_called_again(false);
}

#[test]
fn commit_timed_out_is_called_again_tv2() {
    commit_timed_out_is_called_again(true);
}

/// A second instance with the same transactional id initialises while the first is inside
/// its second transaction: the first is fenced (its later calls fail fatally) and nothing of
/// its open transaction becomes visible; the first transaction stays committed.
fn zombie_fenced(v2: bool) {
    let mut config = transactional(v2, &[10, 10, 10], 20, 2);
    config.scripted = vec![at(300, Fault::ZombieInit)];
    let report = run(&format!("zombie_fenced (v2: {v2})"), config, 1);
    let ends: Vec<&TxnEnd> = report.transactions.iter().map(|t| &t.end).collect();
    assert_eq!(ends.first(), Some(&&TxnEnd::Committed), "{ends:?}");
    assert!(
        ends.iter()
            .skip(1)
            .all(|e| matches!(e, TxnEnd::Abandoned | TxnEnd::CommitFailed(_))),
        "{ends:?}"
    );
    assert!(
        report.transactions.get(1).is_some_and(|t| t.open_at_fence),
        "the fence came inside the second transaction"
    );
    let first: Vec<u64> = (0..10).collect();
    assert_eq!(visible(&report), first);
}

#[test]
fn zombie_fenced_tv1() {
    zombie_fenced(false);
}

#[test]
fn zombie_fenced_tv2() {
    zombie_fenced(true);
}

/// Found by the simulation (seeds 33056 and 37330 of the 10000..40000 sweep): a call whose
/// deadline (`max.block.ms`) passed while its request was outstanding waited for a retry time
/// that the engine's next wakeup hid behind the past deadline: with nothing else scheduled,
/// nothing woke the engine and the call never ended (P9). In seed 33056 it is an
/// `abort_transaction` whose EndTxn answer was lost and whose connection closed after the
/// deadline. The seeds are replayed as they were found.
#[test]
fn call_whose_deadline_passed_in_flight_times_out() {
    for seed in [33_056, 37_330] {
        if let Err(failure) = sim::run_seed(seed) {
            panic!("seed {seed}: {}", failure.with_trace());
        }
    }
}

// ---- the copy loop ----

fn copy_run(name: &str, config: copy_loop::CopyLoopConfig, seed: u64) -> copy_loop::CopyLoopReport {
    match copy_loop::run_copy_loop(config, Entropy::from_seed(seed)) {
        Ok(report) => report,
        Err(failure) => panic!("{name} failed: {}", failure.with_trace()),
    }
}

/// A copier crashes mid-transaction (no LeaveGroup): its session expires, its partitions move
/// to the others, which resume from the committed offsets once the restarted instance's
/// `init_transactions` aborted the open transaction; the restarted copier joins as a new
/// member. The destination holds each source record once.
#[test]
fn copy_loop_exactly_once_with_member_crash() {
    for v2 in [true, false] {
        let mut config = copy_loop::CopyLoopConfig::calm(3, 4, 40);
        config.transactions_v2 = v2;
        config.commit_every = 5;
        config.crashes = vec![
            copy_loop::Crash {
                at: 700,
                copier: 0,
                down_ms: 1_500,
            },
            copy_loop::Crash {
                at: 1_300,
                copier: 2,
                down_ms: 200,
            },
        ];
        let report = copy_run("copy_loop_exactly_once_with_member_crash", config, 3);
        assert_eq!(report.records, 160);
        assert_eq!(report.crashes, 2);
        assert!(report.expired_members >= 1, "{report:?}");
    }
}

/// Copiers join one after another, so partitions move away from a member that owns them:
/// the member commits what it copied before its next poll gives them up (an accepted
/// TxnOffsetCommit always comes from the owner: checked on every commit), heartbeats get
/// lost and delayed, and the result is exactly once.
#[test]
fn copy_loop_revocation_commits_before_handover() {
    let mut config = copy_loop::CopyLoopConfig::calm(3, 6, 60);
    config.starts = vec![0, 400, 900];
    config.commit_every = 4;
    config.heartbeat_request_loss = 100;
    config.delay = 50;
    config.max_delay_ms = 300;
    config.heartbeat_max_delay_ms = 150;
    let report = copy_run("copy_loop_revocation_commits_before_handover", config, 5);
    assert_eq!(report.records, 360);
    assert!(report.commits > 10, "{report:?}");
}

/// A heartbeat answer that carried a new assignment is lost: the member's next heartbeat must
/// let the coordinator tell it again (the Java consumer sends a full heartbeat after a failed
/// one). Before `ConsumerMember::on_request_failed` reset `owned_sent`, the next heartbeat
/// carried no owned partitions, Kafka's coordinator (modelled in `sim::group`) did not resend
/// the assignment, and the partition stayed unowned: the run stalled (copy-loop seed 48,
/// found by this simulation).
#[test]
fn copy_loop_lost_heartbeat_answer() {
    let mut failed = Vec::new();
    for seed in 0..40 {
        let mut config = copy_loop::CopyLoopConfig::calm(2, 1, 30);
        // Copier 1 takes the partition first; copier 0 (sorted first) joins, copier 1 gives
        // it up, and copier 0 is given it by an answer that may be lost.
        config.starts = vec![400, 0];
        config.heartbeat_answer_loss = 300;
        config.deadline_ms = 60_000;
        if copy_loop::run_copy_loop(config, Entropy::from_seed(seed)).is_err() {
            failed.push(seed);
        }
    }
    assert!(failed.is_empty(), "stalled: {failed:?}");
}

/// The copy loop of `seed` as its seed ran before the sweep had coordinator outages and
/// dropped steps: the schedule the seeds below were found under.
fn without_stalls(seed: u64) -> Result<copy_loop::CopyLoopReport, sim::Failure> {
    let (mut config, entropy) = copy_loop::seed_run(seed);
    config.outages.clear();
    config.cancel = StepCancellation::none();
    copy_loop::run_copy_loop(config, entropy)
}

/// Found by the simulation (copy-loop seeds 3680 and 4992 of a 10,000-seed sweep, both under
/// transactions v1, when the simulation still drove a copy loop of its own): a commit failed
/// because a sent batch expired, and while the abort waited for the batch's last request, that
/// request timed out and another batch expired, which made the transaction abortable again.
/// The engine took that for "not aborting" and skipped the epoch bump (KIP-360) after the
/// abort; a timed-out Produce of the aborted transaction then reached the broker after the
/// copier had re-added the partition for its next transaction, with the same epoch and the
/// next sequence, and was appended to it; the copier copied the same input again, so the
/// destination held records twice under read_committed. With the bump the late Produce is
/// fenced (INVALID_PRODUCER_EPOCH).
///
/// Since the simulation drives the real `CopyLoop`, those seeds no longer reach that schedule
/// (with the bump removed, neither 100,000 sweep seeds nor 20,000 seeds of a lossier
/// transactions-v1 configuration produced a duplicate); the engine test
/// `v1_abort_bumps_the_epoch_when_a_batch_expires_while_it_drains` pins the bug itself. These
/// seeds are transactions-v1 runs whose aborts see records of the aborted transaction fail
/// for good while they drain (the path of the bug), and must still copy exactly once (chosen
/// again when the loop began resolving its own timed-out commits, which moved every seed's
/// schedule).
#[test]
fn copy_loop_abort_bumps_the_epoch_before_a_late_produce_lands() {
    for seed in [564, 565] {
        match without_stalls(seed) {
            Ok(report) => assert!(
                report.aborts_draining_failures >= 1,
                "seed {seed} never failed records while an abort drained: {report:?}"
            ),
            Err(failure) => panic!("copy-loop seed {seed}: {}", failure.with_trace()),
        }
    }
}

/// Found by this simulation once it drove the real `CopyLoop` with membership in the
/// background (372 of 10,000 copy-loop seeds failed, 87 and 135 among them): the loop checked
/// that it still owned the partitions of a transaction's offsets before it took the generation
/// hold. The hold waits for the heartbeat in flight; its answer fenced the member
/// (UNKNOWN_MEMBER_ID), the member rejoined with a new epoch, and the hold then gave that
/// epoch, so the offsets of partitions the member no longer owned went out under it, which
/// Kafka 4.1 accepts (a TxnOffsetCommit's epoch is all it checks): a zombie commit. Checked
/// under the hold, the loop aborts such a transaction (`Error::PartitionsLost`).
#[test]
fn copy_loop_checks_ownership_under_the_generation_hold() {
    for seed in [87, 135] {
        match without_stalls(seed) {
            Ok(report) => assert!(
                report.lost_before_commit >= 1,
                "seed {seed} never found its partitions lost at commit: {report:?}"
            ),
            Err(failure) => panic!("copy-loop seed {seed}: {}", failure.with_trace()),
        }
    }
}

/// Found by this simulation with membership in the background (copy-loop seeds 37287,
/// 54651, 69900 and 78461 of 100,000): a member took newly assigned partitions while a
/// heartbeat listing its owned partitions without them was in flight; the coordinator read
/// that list as their revocation and moved them to another member, the answer came back with
/// a new epoch, and the loop committed offsets of those partitions under that epoch before
/// the member handed them over: a TxnOffsetCommit from a member that did not own them. The
/// member now takes new partitions only once no such heartbeat is in flight.
#[test]
fn copy_loop_member_takes_no_partition_while_its_owned_list_is_in_flight() {
    for seed in [37_287, 69_900] {
        if let Err(failure) = without_stalls(seed) {
            panic!("copy-loop seed {seed}: {}", failure.with_trace());
        }
    }
}

/// The copy loop of `seed` with only one of the stalls that time out or drop its steps:
/// coordinator outages (`outages`) or dropped steps.
fn stalled_copy_run(seed: u64, outages: bool) -> copy_loop::CopyLoopReport {
    let (mut config, entropy) = copy_loop::seed_run(seed);
    if outages {
        config.cancel = StepCancellation::none();
    } else {
        config.outages.clear();
    }
    assert!(
        !config.outages.is_empty() || config.cancel.per_mille > 0,
        "seed {seed} has no stall of that kind"
    );
    match copy_loop::run_copy_loop(config, entropy) {
        Ok(report) => report,
        Err(failure) => panic!("copy-loop seed {seed}: {}", failure.with_trace()),
    }
}

/// Found by the copy-loop sweep once it had coordinator outages longer than `max.block.ms`
/// (copy-loop seeds 307 under transactions v2 and 209 under v1, with the outages alone): a
/// commit timed out five times while the coordinator was out of reach, the loop gave up and
/// called `abort_transaction`, which the producer refuses after a timed-out commit (only
/// commit is valid then, rule T4), so the loop never rewound; every later step failed at
/// `begin_transaction` and threw the records it had polled away: the copy never finished. The
/// loop now keeps the commit as its own state and calls `commit_transaction` again at every
/// step until it gives the outcome (rule C1).
#[test]
fn copy_loop_commit_timed_out_is_committed_again() {
    for seed in [307, 209] {
        let report = stalled_copy_run(seed, true);
        assert!(report.timed_out_steps >= 1, "seed {seed}: {report:?}");
    }
}

/// Found by the copy-loop sweep with coordinator outages (copy-loop seeds 52 under
/// transactions v2 and 7 under v1, the outages alone): the offsets of a transaction could not
/// be sent within `max.block.ms`, and its abort then timed out five times; the loop gave up,
/// every later step failed ("abort_transaction timed out; call abort_transaction again") and
/// lost its poll's records. The loop now calls the abort again at every step until it ends,
/// then rewinds (rule C1).
#[test]
fn copy_loop_abort_timed_out_is_aborted_again() {
    for seed in [52, 7] {
        let report = stalled_copy_run(seed, true);
        assert!(report.timed_out_steps >= 1, "seed {seed}: {report:?}");
    }
}

/// Found by the copy-loop sweep once it dropped steps at random await points (copy-loop
/// seeds 3 under transactions v2 and 86 under v1, dropped steps alone): a step dropped in its
/// commit had taken the open transaction out of the loop while the producer stayed in it, so
/// every later step failed with "begin_transaction in state InTransaction" and threw its
/// poll's records away. The loop now keeps the transaction in its own stage until it has
/// ended, and the next step finishes it (rule C1).
#[test]
fn copy_loop_step_dropped_mid_commit_is_resolved() {
    for seed in [3, 86] {
        let report = stalled_copy_run(seed, false);
        assert!(report.cancelled_steps >= 1, "seed {seed}: {report:?}");
    }
}

/// The copy loop replays exactly from its seed (all its choices come from the seed's entropy).
#[test]
fn copy_loop_seed_replays_exactly() {
    for seed in [1, 5, 9] {
        let first = copy_loop::run_copy_loop_seed(seed).expect("the seed passes");
        let again = copy_loop::run_copy_loop_seed(seed).expect("the seed passes");
        assert_eq!(first.digest, again.digest, "seed {seed}");
        assert!(first.records > 0);
    }
}

/// A transform that fails on about a fifth of the records, three at a time in flight and
/// taking up to 20 ms each, under `policy`, over three copiers and four partitions with lost
/// heartbeats and a crash. The world checks the end state (every record exactly once in the
/// destination or, dead-lettered, in the dead-letter topic; skipped ones nowhere; per-partition
/// order in both) and that the loop's counters match its reports.
fn transform_fault_run(name: &str, policy: TransformErrorPolicy) -> copy_loop::CopyLoopReport {
    let mut config = copy_loop::CopyLoopConfig::calm(3, 4, 40);
    config.commit_every = 6;
    config.heartbeat_request_loss = 50;
    config.crashes = vec![copy_loop::Crash {
        at: 900,
        copier: 1,
        down_ms: 400,
    }];
    config.transform = copy_loop::TransformFaults {
        per_mille: 200,
        salt: 11,
        policy,
        concurrency: 3,
        max_delay_ms: 20,
    };
    copy_run(name, config, 17)
}

/// Dead letters go out in the copy transaction: every record the transform fails on is in the
/// dead-letter topic exactly once (and never in the destination), the rest in the destination.
#[test]
fn copy_loop_dead_letters_exactly_once() {
    let report = transform_fault_run(
        "copy_loop_dead_letters_exactly_once",
        TransformErrorPolicy::dead_letter("dst-dlq"),
    );
    assert!(report.dead_lettered > 0, "{report:?}");
    assert_eq!(report.skipped, 0, "{report:?}");
    assert!(report.records > 0 && report.records < 160, "{report:?}");
}

/// Skipped records are consumed and committed with nothing produced; the rest are copied once.
#[test]
fn copy_loop_skips_what_the_transform_fails_on() {
    let report = transform_fault_run(
        "copy_loop_skips_what_the_transform_fails_on",
        TransformErrorPolicy::Skip,
    );
    assert!(report.skipped > 0, "{report:?}");
    assert_eq!(report.dead_lettered, 0, "{report:?}");
    assert!(report.records > 0 && report.records < 160, "{report:?}");
}

/// Under the default policy a failed transform fails the step (`Error::Transform`): the open
/// transaction is aborted, its input rewound, and the record copied again once the transform
/// passes (this transform fails each record once per copier): every record exactly once.
#[test]
fn copy_loop_failing_transform_aborts_and_rewinds() {
    let report = transform_fault_run(
        "copy_loop_failing_transform_aborts_and_rewinds",
        TransformErrorPolicy::Fail,
    );
    assert_eq!(report.records, 160, "{report:?}");
    assert!(report.transform_failures > 0, "{report:?}");
    assert!(report.aborts >= report.transform_failures, "{report:?}");
    assert_eq!(report.dead_lettered + report.skipped, 0, "{report:?}");
}

/// The transform's faults pick about `per_mille` of the records (by their ids), so the named
/// runs' checks bite on a real share of their records.
#[test]
fn copy_loop_transform_faults_choose_a_share_of_the_records() {
    let faults = copy_loop::TransformFaults {
        per_mille: 200,
        salt: 11,
        policy: TransformErrorPolicy::Skip,
        concurrency: 3,
        max_delay_ms: 20,
    };
    let failing = (0..4)
        .flat_map(|p| (0..200).map(move |o| copy_loop::record_id(p, o)))
        .filter(|&id| copy_loop::transform_fails(&faults, id))
        .count();
    assert!((80..240).contains(&failing), "{failing} of 800");
}
