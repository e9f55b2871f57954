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

use std::time::{Duration, Instant};

use exactly::{DeliveryFuture, Producer, Record};

struct Args {
    topic: String,
    num_records: u64,
    record_size: usize,
    throughput: f64,
    payload_file: Option<String>,
    props: Vec<(String, String)>,
}

fn usage(problem: &str) -> ! {
    eprintln!("perf: {problem}");
    eprintln!(
        "usage: perf --topic T --num-records N --record-size BYTES --throughput RECORDS_PER_SEC|-1 \
         [--payload-file F] --producer-props k=v [k=v ...]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut args = Args {
        topic: String::new(),
        num_records: 0,
        record_size: 100,
        throughput: -1.0,
        payload_file: None,
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
struct Stats {
    latencies_ms: Vec<u32>,
    bytes: u64,
    errors: u64,
}

impl Stats {
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

#[tokio::main]
async fn main() -> exactly::Result<()> {
    let args = parse_args();
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
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(Instant, u64, DeliveryFuture)>(1 << 16);
    let collector = tokio::spawn(async move {
        let mut stats = Stats {
            latencies_ms: Vec::new(),
            bytes: 0,
            errors: 0,
        };
        while let Some((sent_at, size, future)) = rx.recv().await {
            match future.await {
                Ok(_) => {
                    stats
                        .latencies_ms
                        .push(sent_at.elapsed().as_millis() as u32);
                    stats.bytes += size;
                }
                Err(_) => stats.errors += 1,
            }
        }
        stats
    });
    let start = Instant::now();
    for i in 0..args.num_records {
        if args.throughput > 0.0 {
            let due = start + Duration::from_secs_f64(i as f64 / args.throughput);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                tokio::time::sleep(wait).await;
            }
        }
        let payload = &payloads[i as usize % payloads.len()];
        let sent_at = Instant::now();
        let future = producer
            .send(Record::to(&args.topic).value(payload.clone()))
            .await?;
        if tx
            .send((sent_at, payload.len() as u64, future))
            .await
            .is_err()
        {
            break;
        }
    }
    drop(tx);
    let mut stats = collector.await.expect("collector task");
    let elapsed = start.elapsed();
    producer.close().await?;
    stats.print(elapsed);
    Ok(())
}
