//! rust-rdkafka's BaseConsumer (librdkafka's poll loop, no async layer) reading a topic the way
//! examples/consume_perf.rs's `consume` reads it with ours, for scripts/bench-peers --consume:
//!
//! ```text
//! rust-rdkafka-consume --topic T --num-records N [--timeout-seconds S] --consumer-props k=v [k=v ...]
//! ```
//!
//! Subscribes with the group in the properties (auto.offset.reset=earliest and
//! isolation.level=read_committed unless set), reads until N records arrived, counts the
//! distinct committed indices (the 12 digits at the front of each value, below N) and the
//! others, and prints consume_perf's summary line.

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::Message;

const PROGRAM: &str = "rust-rdkafka-consume";
const SEQUENCE_DIGITS: usize = 12;

fn usage(problem: &str) -> ! {
    eprintln!("{PROGRAM}: {problem}");
    eprintln!("usage: {PROGRAM} --topic T --num-records N [--timeout-seconds S] --consumer-props k=v [k=v ...]");
    std::process::exit(2)
}

fn sequence(value: &[u8]) -> Option<u64> {
    let digits = value.get(..SEQUENCE_DIGITS)?;
    digits.iter().try_fold(0u64, |n, &b| {
        b.is_ascii_digit().then(|| n * 10 + u64::from(b - b'0'))
    })
}

fn main() {
    let (mut topic, mut n, mut timeout) = (String::new(), 0u64, 120u64);
    let mut config = ClientConfig::new();
    config
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false");
    let mut it = std::env::args().skip(1).peekable();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--topic" => topic = value(),
            "--num-records" => n = value().parse().unwrap_or_else(|_| usage("--num-records")),
            "--timeout-seconds" => {
                timeout = value()
                    .parse()
                    .unwrap_or_else(|_| usage("--timeout-seconds"))
            }
            "--consumer-props" => {
                while let Some(kv) = it.next_if(|a| !a.starts_with("--")) {
                    let (k, v) = kv
                        .split_once('=')
                        .unwrap_or_else(|| usage(&format!("{kv} is not k=v")));
                    config.set(k, v);
                }
            }
            other => usage(&format!("unknown flag {other}")),
        }
    }
    if topic.is_empty() || n == 0 {
        usage("--topic and --num-records are required");
    }
    let started = Instant::now();
    let consumer: BaseConsumer = config.create().unwrap_or_else(|e| {
        eprintln!("{PROGRAM}: {e}");
        std::process::exit(2)
    });
    consumer.subscribe(&[&topic]).unwrap_or_else(|e| {
        eprintln!("{PROGRAM}: subscribe: {e}");
        std::process::exit(2)
    });
    let mut seen = vec![0u64; n.div_ceil(64) as usize];
    let (mut received, mut distinct, mut foreign) = (0u64, 0u64, 0u64);
    let mut first: Option<Duration> = None;
    let deadline = started + Duration::from_secs(timeout);
    while received < n {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            eprintln!("{PROGRAM}: timed out with {received} of {n} records");
            break;
        };
        let message = match consumer.poll(left.min(Duration::from_millis(100))) {
            None => continue,
            Some(Err(e)) => {
                // Partition EOF is off by default; anything else is worth seeing, not fatal.
                eprintln!("{PROGRAM}: {e}");
                continue;
            }
            Some(Ok(m)) => m,
        };
        first.get_or_insert_with(|| started.elapsed());
        received += 1;
        match message.payload().and_then(sequence) {
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
    let last = started.elapsed();
    println!(
        "consumed {received} records: distinct {distinct}, foreign {foreign}, first record after {:.3} s, last after {:.3} s",
        first.unwrap_or(last).as_secs_f64(),
        last.as_secs_f64()
    );
    drop(consumer);
    std::process::exit(if distinct == n && foreign == 0 { 0 } else { 1 })
}
