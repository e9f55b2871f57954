//! Copies one topic into another exactly once: a consumer group member reads the source
//! (read_committed), a transactional producer writes every record to the same partition of
//! the destination, and each transaction commits the consumed offsets with the records
//! (`exactly::eos::CopyLoop`). Run several with the same group and different transactional
//! ids to share the partitions; kill one and the others take over without a duplicate.
//!
//! ```sh
//! scripts/testbed up
//! eval "$(scripts/testbed env)"
//! # the destination needs at least as many partitions as the source
//! cargo run --example copy -- "$KAFKA_BOOTSTRAP" source-topic destination-topic copy-group copy-1
//! ```
//!
//! Prints one line per committed transaction: the time since the start, the records, how
//! long the transaction took (from the poll that brought its first record to the end of its
//! commit) and the records it copied of each source partition, e.g.
//!
//! ```text
//!      2.4s committed 1000 in / 1000 out (total 9000) in 61.2 ms; partitions 0:167 1:167 2:166 3:167 4:167 5:166
//! ```
//!
//! (`scripts/bench-peers --consume` reads these lines.) Stops after `--idle-seconds` without
//! records (default: never); killing it is safe too: its open transaction is aborted when a
//! copier with the same transactional id starts, or when the coordinator times it out.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use exactly::eos::CopyLoop;
use exactly::{Consumer, ConsumerRecord, OffsetReset, Producer, Record};

struct Args {
    bootstrap: String,
    source: String,
    destination: String,
    group: String,
    transactional_id: String,
    commit_records: usize,
    commit_ms: u64,
    /// Stop after this long without a record (0: never).
    idle_seconds: u64,
    /// The producer's `batch.size` (`None`: its default).
    batch_size: Option<usize>,
}

fn parse_args() -> Args {
    let mut positional = Vec::new();
    let mut args = Args {
        bootstrap: String::new(),
        source: String::new(),
        destination: String::new(),
        group: String::new(),
        transactional_id: String::new(),
        commit_records: 1_000,
        commit_ms: 100,
        idle_seconds: 0,
        batch_size: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut number = |flag: &str| -> u64 {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| usage(&format!("{flag} takes a number")))
        };
        match arg.as_str() {
            "--commit-records" => args.commit_records = number(&arg) as usize,
            "--commit-ms" => args.commit_ms = number(&arg),
            "--idle-seconds" => args.idle_seconds = number(&arg),
            "--batch-size" => args.batch_size = Some(number(&arg) as usize),
            flag if flag.starts_with("--") => usage(&format!("unknown flag {flag}")),
            _ => positional.push(arg),
        }
    }
    let [bootstrap, source, destination, group, transactional_id] =
        <[String; 5]>::try_from(positional).unwrap_or_else(|_| usage("five arguments needed"));
    Args {
        bootstrap,
        source,
        destination,
        group,
        transactional_id,
        ..args
    }
}

fn usage(problem: &str) -> ! {
    eprintln!("copy: {problem}");
    eprintln!(
        "usage: copy BOOTSTRAP SOURCE DESTINATION GROUP TRANSACTIONAL_ID \
         [--commit-records N] [--commit-ms MS] [--idle-seconds S] [--batch-size BYTES]"
    );
    std::process::exit(2)
}

#[tokio::main]
async fn main() -> exactly::Result<()> {
    let args = parse_args();
    let mut consumer = Consumer::builder()
        .bootstrap(&args.bootstrap)
        .group_id(&args.group)
        .auto_offset_reset(OffsetReset::Earliest)
        .build()
        .await?;
    consumer.subscribe([args.source.as_str()])?;
    let mut producer = Producer::builder()
        .bootstrap(&args.bootstrap)
        .transactional_id(&args.transactional_id);
    if let Some(bytes) = args.batch_size {
        producer = producer.batch_size(bytes);
    }
    let producer = producer.build().await?;
    producer.init_transactions().await?;

    let destination = args.destination.clone();
    let mut copier = CopyLoop::new(consumer, producer, move |r: ConsumerRecord| {
        let mut out = Record::to(&destination).partition(r.partition);
        if let Some(key) = r.key {
            out = out.key(key);
        }
        if let Some(value) = r.value {
            out = out.value(value);
        }
        for h in r.headers {
            out = out.header(h.key, h.value.unwrap_or_default());
        }
        async move { vec![out] }
    })
    .commit_every(args.commit_records, Duration::from_millis(args.commit_ms));

    let started = Instant::now();
    let mut last_record = Instant::now();
    let mut total = 0usize;
    loop {
        // A step polls until its transaction is due, then commits it: its time is the
        // transaction's, from the poll that brought the first record.
        let step_began = Instant::now();
        match copier.step().await {
            Ok(Some(txn)) => {
                let took = step_began.elapsed();
                total += txn.records_in();
                last_record = Instant::now();
                let mut per_partition: BTreeMap<i32, usize> = BTreeMap::new();
                for copy in &txn.copies {
                    *per_partition
                        .entry(copy.source.partition.partition)
                        .or_default() += 1;
                }
                let partitions: Vec<String> = per_partition
                    .iter()
                    .map(|(partition, records)| format!("{partition}:{records}"))
                    .collect();
                println!(
                    "{:>8.1}s committed {} in / {} out (total {total}) in {:.1} ms; partitions {}",
                    started.elapsed().as_secs_f64(),
                    txn.records_in(),
                    txn.records_out(),
                    took.as_secs_f64() * 1e3,
                    partitions.join(" ")
                );
            }
            Ok(None) => {
                if args.idle_seconds > 0
                    && last_record.elapsed() >= Duration::from_secs(args.idle_seconds)
                {
                    break;
                }
            }
            Err(e) if e.is_fatal() => return Err(e),
            Err(e) => eprintln!("transaction aborted and its input rewound: {e}"),
        }
    }
    copier.close().await?;
    println!("copied {total} records");
    Ok(())
}
