//! A consumer benchmark, and the transactional writer of its input (`scripts/bench-peers
//! --consume`).
//!
//! ```sh
//! # N committed records of BYTES bytes in T transactions, plus A aborted transactions of the
//! # same size whose records read_committed must skip (every partition gets some of each):
//! cargo run --release --example consume_perf -- fill --topic T --num-records N --record-size BYTES \
//!     --transactions 20 --aborted 4 --producer-props bootstrap.servers=127.0.0.1:19090
//! # read the topic from the beginning with a fresh group until N records arrived:
//! cargo run --release --example consume_perf -- consume --topic T --num-records N \
//!     --consumer-props bootstrap.servers=127.0.0.1:19090 group.id=fresh-group
//! ```
//!
//! Record values: the first 12 bytes of a committed record's value are its index i (0..N) in
//! zero-padded decimal, the rest 'x' (the producer benchmark's `--unique-values`); an aborted
//! record's index is N or more. `consume` keeps a bit per index, so it can say how many
//! distinct committed records it got and how many others ("foreign": aborted, or not ours)
//! without slowing the loop down, and prints one line that scripts/bench-peers parses:
//!
//! ```text
//! consumed R records: distinct D, foreign F, first record after J s, last after L s
//! ```
//!
//! Properties take Kafka's names; `consume` defaults to `auto.offset.reset=earliest` and
//! `isolation.level=read_committed` (set them to override).

use std::time::{Duration, Instant};

use exactly::{Consumer, ConsumerEvent, Producer, Record};

/// Digits of the record index at the front of each value.
const SEQUENCE_DIGITS: usize = 12;

struct Args {
    fill: bool,
    topic: String,
    num_records: u64,
    record_size: usize,
    transactions: u64,
    aborted: u64,
    partitions: i32,
    timeout: Duration,
    props: Vec<(String, String)>,
}

fn usage(problem: &str) -> ! {
    eprintln!("consume_perf: {problem}");
    eprintln!(
        "usage: consume_perf fill --topic T --num-records N [--record-size BYTES] [--transactions T] \
         [--aborted A] [--partitions P] --producer-props k=v [k=v ...]\n       \
         consume_perf consume --topic T --num-records N [--timeout-seconds S] --consumer-props k=v [k=v ...]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut it = std::env::args().skip(1).peekable();
    let fill = match it.next().as_deref() {
        Some("fill") => true,
        Some("consume") => false,
        _ => usage("fill or consume first"),
    };
    let mut args = Args {
        fill,
        topic: String::new(),
        num_records: 0,
        record_size: 100,
        transactions: 20,
        aborted: 4,
        partitions: 6,
        timeout: Duration::from_secs(120),
        props: Vec::new(),
    };
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
        };
        let number = |v: String| -> u64 { v.parse().unwrap_or_else(|_| usage(&flag)) };
        match flag.as_str() {
            "--topic" => args.topic = value(),
            "--num-records" => args.num_records = number(value()),
            "--record-size" => args.record_size = number(value()) as usize,
            "--transactions" => args.transactions = number(value()).max(1),
            "--aborted" => args.aborted = number(value()),
            "--partitions" => args.partitions = number(value()).clamp(1, 1 << 20) as i32,
            "--timeout-seconds" => args.timeout = Duration::from_secs(number(value())),
            "--producer-props" | "--consumer-props" => {
                while let Some(kv) = it.next_if(|a| !a.starts_with("--")) {
                    let (k, v) = kv
                        .split_once('=')
                        .unwrap_or_else(|| usage(&format!("{kv} is not k=v")));
                    args.props.push((k.to_owned(), v.to_owned()));
                }
            }
            other => usage(&format!("unknown flag {other}")),
        }
    }
    if args.topic.is_empty() || args.num_records == 0 {
        usage("--topic and --num-records are required");
    }
    args
}

/// Record `i`'s value: `i` in zero-padded decimal over the first bytes, then 'x'.
fn value(i: u64, size: usize) -> Vec<u8> {
    let mut value = vec![b'x'; size];
    let mut rest = i;
    for byte in value[..size.min(SEQUENCE_DIGITS)].iter_mut().rev() {
        *byte = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    value
}

/// The index at the front of a value, if it has one.
fn sequence(value: &[u8]) -> Option<u64> {
    let digits = value.get(..SEQUENCE_DIGITS)?;
    digits.iter().try_fold(0u64, |n, &b| {
        b.is_ascii_digit().then(|| n * 10 + u64::from(b - b'0'))
    })
}

/// Writes `num_records` committed records in `transactions` transactions and `aborted` aborted
/// transactions of the same size between them, round-robin over the partitions so that every
/// partition has committed data, aborted data and both kinds of control record.
async fn fill(args: &Args) -> exactly::Result<()> {
    let producer =
        Producer::from_properties(args.props.iter().map(|(k, v)| (k.as_str(), v.as_str()))).await?;
    producer.init_transactions().await?;
    let per_txn = args.num_records.div_ceil(args.transactions);
    // Aborted transaction j goes after committed transaction (j + 1) * T / (A + 1).
    let abort_after: Vec<u64> = (0..args.aborted)
        .map(|j| (j + 1) * args.transactions / (args.aborted + 1))
        .collect();
    let started = Instant::now();
    let (mut next, mut next_aborted) = (0u64, args.num_records);
    for t in 0..args.transactions {
        let end = (next + per_txn).min(args.num_records);
        write_transaction(&producer, args, next..end, true).await?;
        next = end;
        for _ in abort_after.iter().filter(|&&a| a == t + 1) {
            write_transaction(&producer, args, next_aborted..next_aborted + per_txn, false).await?;
            next_aborted += per_txn;
        }
    }
    producer.close().await?;
    println!(
        "filled {}: {} committed records, {} aborted, in {:.1} s",
        args.topic,
        args.num_records,
        next_aborted - args.num_records,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

async fn write_transaction(
    producer: &Producer,
    args: &Args,
    indices: std::ops::Range<u64>,
    commit: bool,
) -> exactly::Result<()> {
    producer.begin_transaction()?;
    let mut acks = Vec::with_capacity((indices.end - indices.start) as usize);
    for i in indices {
        let record = Record::to(&args.topic)
            .partition((i % args.partitions as u64) as i32)
            .value(value(i, args.record_size));
        acks.push(producer.send(record).await?);
    }
    // Every record in the log before the transaction ends: an abort would otherwise drop the
    // records not yet sent (as Java's abortTransaction does), leaving little aborted data in
    // the log for read_committed to skip.
    producer.flush().await?;
    for ack in acks {
        ack.await?;
    }
    if commit {
        producer.commit_transaction().await
    } else {
        producer.abort_transaction().await
    }
}

/// Reads until `num_records` records arrived (or the timeout), counting distinct committed
/// indices and foreign records.
async fn consume(args: &Args) -> exactly::Result<bool> {
    let started = Instant::now();
    let mut props = vec![
        ("auto.offset.reset".to_owned(), "earliest".to_owned()),
        ("isolation.level".to_owned(), "read_committed".to_owned()),
    ];
    props.extend(args.props.iter().cloned());
    let mut consumer =
        Consumer::from_properties(props.iter().map(|(k, v)| (k.as_str(), v.as_str()))).await?;
    consumer.subscribe([args.topic.as_str()])?;
    let n = args.num_records;
    let mut seen = vec![0u64; n.div_ceil(64) as usize];
    let (mut received, mut distinct, mut foreign) = (0u64, 0u64, 0u64);
    let mut first: Option<Duration> = None;
    let deadline = started + args.timeout;
    while received < n {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            eprintln!("consume_perf: timed out with {received} of {n} records");
            break;
        };
        let Some(event) = consumer.poll_timeout(left).await? else {
            continue;
        };
        let ConsumerEvent::Records(records) = event else {
            continue;
        };
        first.get_or_insert_with(|| started.elapsed());
        received += records.len() as u64;
        for r in &records {
            match r.value.as_deref().and_then(sequence) {
                Some(i) if i < n => {
                    let (word, bit) = ((i / 64) as usize, 1u64 << (i % 64));
                    if seen[word] & bit == 0 {
                        seen[word] |= bit;
                        distinct += 1;
                    }
                }
                _ => foreign += 1,
            }
        }
    }
    let last = started.elapsed();
    println!(
        "consumed {received} records: distinct {distinct}, foreign {foreign}, first record after {:.3} s, last after {:.3} s",
        first.unwrap_or(last).as_secs_f64(),
        last.as_secs_f64()
    );
    consumer.close().await?;
    Ok(distinct == n && foreign == 0)
}

#[tokio::main]
async fn main() -> exactly::Result<()> {
    let args = parse_args();
    if args.fill {
        fill(&args).await
    } else {
        let complete = consume(&args).await?;
        std::process::exit(if complete { 0 } else { 1 })
    }
}
