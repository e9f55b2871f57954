//! A producer benchmark with the flags and summary of Kafka's `kafka-producer-perf-test`
//! (`org.apache.kafka.tools.ProducerPerformance`), so the two can be compared side by side.
//!
//! ```sh
//! cargo run --release --example perf -- --topic perf --num-records 5000000 --record-size 100 \
//!     --throughput -1 --producer-props bootstrap.servers=127.0.0.1:19090 linger.ms=5 acks=all
//! ```
//!
//! `--payload-file F` sends the lines of F as the record values, in turn (ProducerPerformance
//! picks them at random), instead of `--record-size` bytes of 'x': a realistic payload for
//! comparing compression (`scripts/bench-peers --compression`).
//!
//! `--mode` picks how the application calls `send`:
//! - `channel` (default): one task sends and hands each delivery future to a collector task
//!   that awaits them in order (send-to-ack latency per record);
//! - `loop`: the loop a user writes first, one task doing `futs.push(producer.send(r).await?)`,
//!   taking in the futures already resolved after each send and awaiting the oldest once
//!   buffer.memory / record size are outstanding (the same bound as the peers' loops in
//!   `scripts/bench-peers.d/rust-common`); latency is when the loop saw a record resolved, so
//!   at full speed it is an upper bound;
//! - `spawned`: `--tasks N` tasks (default 4) each send a share, awaiting their futures as
//!   they go (as a server handling requests would).
//!
//! `--unique-values` makes record i's value a copy whose first 12 bytes are i in zero-padded
//! decimal, so that a reader of the topic can count distinct records and duplicates
//! (`scripts/bench-peers` does, for every client).
//!
//! `--outcomes FILE` writes one line per record as its outcome is known: `INDEX ok`,
//! `INDEX failed REASON`, or `INDEX indeterminate REASON` when the error says the record may
//! have been written ([`exactly::Error::is_indeterminate`]); each line is written through at
//! once, so a run killed as hung keeps what it had reported (`scripts/chaos-peers` reads it).
//!
//! `--runtime current` runs everything on a `current_thread` runtime instead of the default
//! multi-thread one.
//!
//! `--print-metrics` prints the producer's metrics after the run, one `name value` line each
//! (Java's names, as ProducerPerformance's flag of that name does): among them the request
//! shape, `records-per-request-avg` and `batch-size-avg` (`scripts/bench-peers.d/shape.sh`
//! reads the same shape from the broker).

use std::collections::VecDeque;
use std::fs::File;
use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use exactly::{DeliveryFuture, Producer, Record};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Channel,
    Loop,
    Spawned,
}

struct Args {
    mode: Mode,
    tasks: u64,
    current_thread: bool,
    topic: String,
    num_records: u64,
    record_size: usize,
    throughput: f64,
    payload_file: Option<String>,
    unique_values: bool,
    outcomes: Option<String>,
    print_metrics: bool,
    props: Vec<(String, String)>,
}

fn usage(problem: &str) -> ! {
    eprintln!("perf: {problem}");
    eprintln!(
        "usage: perf --topic T --num-records N --record-size BYTES --throughput RECORDS_PER_SEC|-1 \
         [--payload-file F] [--unique-values] [--outcomes FILE] [--print-metrics] [--mode channel|loop|spawned] [--tasks N] [--runtime multi|current] \
         --producer-props k=v [k=v ...]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut args = Args {
        mode: Mode::Channel,
        tasks: 4,
        current_thread: false,
        topic: String::new(),
        num_records: 0,
        record_size: 100,
        throughput: -1.0,
        payload_file: None,
        unique_values: false,
        outcomes: None,
        print_metrics: false,
        props: Vec::new(),
    };
    let mut it = std::env::args().skip(1).peekable();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--topic" => args.topic = value(),
            "--num-records" => {
                args.num_records = value().parse().unwrap_or_else(|_| usage("--num-records"))
            }
            "--record-size" => {
                args.record_size = value().parse().unwrap_or_else(|_| usage("--record-size"))
            }
            "--throughput" => {
                args.throughput = value().parse().unwrap_or_else(|_| usage("--throughput"))
            }
            "--payload-file" => args.payload_file = Some(value()),
            "--unique-values" => args.unique_values = true,
            "--outcomes" => args.outcomes = Some(value()),
            "--print-metrics" => args.print_metrics = true,
            "--mode" => {
                args.mode = match value().as_str() {
                    "channel" => Mode::Channel,
                    "loop" => Mode::Loop,
                    "spawned" => Mode::Spawned,
                    other => usage(&format!("--mode {other}: channel, loop or spawned")),
                }
            }
            "--tasks" => args.tasks = value().parse().unwrap_or_else(|_| usage("--tasks")),
            "--runtime" => {
                args.current_thread = match value().as_str() {
                    "multi" => false,
                    "current" => true,
                    other => usage(&format!("--runtime {other}: multi or current")),
                }
            }
            "--producer-props" => {
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

/// Per-record latencies and the run's totals, in the shape ProducerPerformance prints.
#[derive(Default)]
struct Stats {
    latencies_ms: Vec<u32>,
    bytes: u64,
    errors: u64,
    /// `--outcomes`, shared by the spawned tasks' stats (each line is one `write`).
    outcomes: Option<Arc<File>>,
}

/// A record whose outcome is not yet taken in: its index, send time, size and future.
type Outstanding = (u64, Instant, u64, DeliveryFuture);

impl Stats {
    fn new(outcomes: &Option<Arc<File>>) -> Stats {
        Stats {
            outcomes: outcomes.clone(),
            ..Stats::default()
        }
    }

    fn record(
        &mut self,
        index: u64,
        sent_at: Instant,
        size: u64,
        outcome: exactly::Result<exactly::RecordMetadata>,
    ) {
        if let Some(file) = &self.outcomes {
            let line = match &outcome {
                Ok(_) => format!("{index} ok\n"),
                Err(e) => format!(
                    "{index} {} {}\n",
                    if e.is_indeterminate() {
                        "indeterminate"
                    } else {
                        "failed"
                    },
                    e.to_string().replace('\n', " ")
                ),
            };
            if let Err(e) = (&**file).write_all(line.as_bytes()) {
                usage(&format!("--outcomes: {e}"));
            }
        }
        match outcome {
            Ok(_) => {
                self.latencies_ms.push(sent_at.elapsed().as_millis() as u32);
                self.bytes += size;
            }
            Err(_) => self.errors += 1,
        }
    }

    fn merge(&mut self, other: Stats) {
        self.latencies_ms.extend(other.latencies_ms);
        self.bytes += other.bytes;
        self.errors += other.errors;
    }

    fn print(&mut self, elapsed: Duration) {
        let n = self.latencies_ms.len() as f64;
        let secs = elapsed.as_secs_f64();
        self.latencies_ms.sort_unstable();
        let pct = |p: f64| {
            self.latencies_ms
                .get(((self.latencies_ms.len() as f64 - 1.0) * p).max(0.0) as usize)
                .copied()
                .unwrap_or(0)
        };
        let avg = self.latencies_ms.iter().map(|&l| f64::from(l)).sum::<f64>() / n.max(1.0);
        println!(
            "{} records sent, {:.1} records/sec ({:.2} MB/sec), {:.2} ms avg latency, {:.2} ms max latency, \
             {} ms 50th, {} ms 95th, {} ms 99th, {} ms 99.9th.",
            self.latencies_ms.len(),
            n / secs,
            self.bytes as f64 / secs / (1024.0 * 1024.0),
            avg,
            f64::from(self.latencies_ms.last().copied().unwrap_or(0)),
            pct(0.5),
            pct(0.95),
            pct(0.99),
            pct(0.999),
        );
        if self.errors > 0 {
            println!("{} records failed", self.errors);
        }
    }
}

fn main() -> exactly::Result<()> {
    let args = parse_args();
    let runtime = if args.current_thread {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    }
    .expect("a tokio runtime");
    runtime.block_on(run(args))
}

/// Record `i`'s value: the shared payload, or with `--unique-values` a copy starting with `i`
/// (zero-padded decimal over its first 12 bytes).
fn payload(args: &Args, payloads: &[bytes::Bytes], i: u64) -> bytes::Bytes {
    let shared = &payloads[i as usize % payloads.len()];
    if !args.unique_values {
        return shared.clone();
    }
    let mut value = shared.to_vec();
    let mut rest = i;
    for byte in value.iter_mut().take(12).rev() {
        *byte = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    bytes::Bytes::from(value)
}

/// Sleeps until record `i` is due at `--throughput`.
async fn pace(args: &Args, start: Instant, i: u64) {
    if args.throughput > 0.0 {
        let due = start + Duration::from_secs_f64(i as f64 / args.throughput);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            tokio::time::sleep(wait).await;
        }
    }
}

/// Awaits `futures` in order, adding each outcome to `stats`.
/// Takes in the futures at the front that are already resolved, without waiting (the loop's
/// "check what is done" step; acknowledgements arrive roughly in send order).
fn take_finished(stats: &mut Stats, outstanding: &mut VecDeque<Outstanding>) {
    let mut cx = Context::from_waker(Waker::noop());
    while let Some((_, _, _, future)) = outstanding.front_mut() {
        let Poll::Ready(outcome) = Pin::new(future).poll(&mut cx) else {
            break;
        };
        if let Some((index, sent_at, size, _)) = outstanding.pop_front() {
            stats.record(index, sent_at, size, outcome);
        }
    }
}

async fn collect(stats: &mut Stats, futures: Vec<Outstanding>) {
    for (index, sent_at, size, future) in futures {
        stats.record(index, sent_at, size, future.await);
    }
}

async fn run(args: Args) -> exactly::Result<()> {
    let print_metrics = args.print_metrics;
    let producer =
        Producer::from_properties(args.props.iter().map(|(k, v)| (k.as_str(), v.as_str()))).await?;
    let payloads: Vec<bytes::Bytes> = match &args.payload_file {
        Some(path) => std::fs::read(path)
            .unwrap_or_else(|e| usage(&format!("--payload-file {path}: {e}")))
            .split(|&b| b == b'\n')
            .filter(|line| !line.is_empty())
            .map(bytes::Bytes::copy_from_slice)
            .collect(),
        None => vec![bytes::Bytes::from(vec![b'x'; args.record_size])],
    };
    if payloads.is_empty() {
        usage("--payload-file has no lines");
    }
    let outcomes = args.outcomes.as_ref().map(|path| {
        Arc::new(File::create(path).unwrap_or_else(|e| usage(&format!("--outcomes {path}: {e}"))))
    });
    let start = Instant::now();
    let mut stats = Stats::new(&outcomes);
    match args.mode {
        Mode::Loop => {
            // At most buffer.memory / record size futures outstanding, as the peers' loops
            // (scripts/bench-peers.d/rust-common): the oldest is awaited when there are more.
            let buffer_memory = args
                .props
                .iter()
                .find(|(k, _)| k == "buffer.memory")
                .and_then(|(_, v)| v.parse::<usize>().ok())
                .unwrap_or(32 << 20);
            let window = (buffer_memory / args.record_size.max(1)).max(1);
            let mut outstanding = VecDeque::with_capacity(window);
            for i in 0..args.num_records {
                pace(&args, start, i).await;
                let payload = payload(&args, &payloads, i);
                let record = Record::to(&args.topic).value(payload.clone());
                outstanding.push_back((
                    i,
                    Instant::now(),
                    payload.len() as u64,
                    producer.send(record).await?,
                ));
                take_finished(&mut stats, &mut outstanding);
                while outstanding.len() >= window {
                    if let Some((index, sent_at, size, future)) = outstanding.pop_front() {
                        stats.record(index, sent_at, size, future.await);
                    }
                }
            }
            collect(&mut stats, outstanding.into()).await;
        }
        Mode::Channel => {
            let (tx, mut rx) = tokio::sync::mpsc::channel::<Outstanding>(1 << 16);
            let collector_stats = Stats::new(&outcomes);
            let collector = tokio::spawn(async move {
                let mut stats = collector_stats;
                while let Some((index, sent_at, size, future)) = rx.recv().await {
                    stats.record(index, sent_at, size, future.await);
                }
                stats
            });
            for i in 0..args.num_records {
                pace(&args, start, i).await;
                let payload = payload(&args, &payloads, i);
                let sent_at = Instant::now();
                let record = Record::to(&args.topic).value(payload.clone());
                let future = producer.send(record).await?;
                if tx
                    .send((i, sent_at, payload.len() as u64, future))
                    .await
                    .is_err()
                {
                    break;
                }
            }
            drop(tx);
            stats = collector.await.expect("collector task");
        }
        Mode::Spawned => {
            let args = std::sync::Arc::new(args);
            let payloads = std::sync::Arc::new(payloads);
            let tasks: Vec<_> = (0..args.tasks)
                .map(|task| {
                    let (args, payloads, producer) =
                        (args.clone(), payloads.clone(), producer.clone());
                    let mut stats = Stats::new(&outcomes);
                    tokio::spawn(async move {
                        let mut window = Vec::new();
                        for i in (task..args.num_records).step_by(args.tasks as usize) {
                            pace(&args, start, i).await;
                            let payload = payload(&args, &payloads, i);
                            let record = Record::to(&args.topic).value(payload.clone());
                            let future = producer.send(record).await?;
                            window.push((i, Instant::now(), payload.len() as u64, future));
                            // Await in windows, as a request handler would.
                            if window.len() == 10_000 {
                                collect(&mut stats, std::mem::take(&mut window)).await;
                            }
                        }
                        collect(&mut stats, window).await;
                        Ok::<_, exactly::Error>(stats)
                    })
                })
                .collect();
            for task in tasks {
                stats.merge(task.await.expect("sender task")?);
            }
        }
    }
    let elapsed = start.elapsed();
    producer.close().await?;
    stats.print(elapsed);
    if print_metrics {
        for (name, value) in producer.metrics().named() {
            println!("{name} {value}");
        }
    }
    Ok(())
}
