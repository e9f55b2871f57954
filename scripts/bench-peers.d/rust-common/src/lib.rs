//! The half of every Rust peer's bench program that is not the client: examples/perf.rs's flags,
//! record values, pacing, latency measurement and summary line, and one send loop, so that
//! scripts/bench-peers compares the clients and not the benchmark programs.
//!
//! ```text
//! PEER-perf --topic T --num-records N --record-size BYTES --throughput RECORDS_PER_SEC|-1 \
//!     [--payload-file F] [--unique-values] [--outcomes FILE] --producer-props k=v [k=v ...]
//! ```
//!
//! - values: BYTES 'x' bytes, or with --payload-file the file's lines in turn; with
//!   --unique-values the first 12 bytes of record i's value are i in zero-padded decimal, so a
//!   reader of the topic can count distinct records (duplicates) and their order;
//! - --throughput R paces record i to start + i/R; -1 means as fast as the producer accepts;
//! - the loop is the one a user writes: one task sends each record (waiting while the client
//!   has no room), keeps its delivery future, and takes in the futures as they complete, so
//!   memory stays bounded; at most buffer.memory / record size futures are outstanding, which
//!   is what a 32 MiB buffer holds (a client whose send never waits is held to that too);
//! - latency = the time from just before the send to the future's completion, truncated to
//!   whole milliseconds; percentiles are the sorted latency at index floor((n-1)*p);
//! - --outcomes FILE writes one line per record as its future completes, "INDEX ok" or
//!   "INDEX failed REASON", each written through at once so that a run killed as hung keeps
//!   what it had reported (scripts/chaos-peers reads it). None of the peers' futures says
//!   whether a failed record may have been written, so there is no "indeterminate".

use std::fs::File;
use std::future::Future;
use std::io::Write;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;

/// Digits of the record index at the front of each value under --unique-values.
pub const SEQUENCE_DIGITS: usize = 12;

/// The command line: perf's flags, and the producer properties under their Java names.
pub struct Args {
    /// Topic to produce to.
    pub topic: String,
    /// Records to send.
    pub num_records: u64,
    /// Value size without --payload-file.
    pub record_size: usize,
    /// Offered records per second, or -1 for as fast as possible.
    pub throughput: f64,
    /// Values from the file's lines instead of 'x' bytes.
    pub payload_file: Option<String>,
    /// Record i's value starts with i (see [`SEQUENCE_DIGITS`]).
    pub unique_values: bool,
    /// `--outcomes`: where each record's outcome line goes.
    pub outcomes: Option<String>,
    /// `--producer-props`, in order.
    pub props: Vec<(String, String)>,
}

/// Prints the problem and the usage line, and exits with status 2.
pub fn usage(program: &str, problem: &str) -> ! {
    eprintln!("{program}: {problem}");
    eprintln!(
        "usage: {program} --topic T --num-records N --record-size BYTES --throughput RECORDS_PER_SEC|-1 \
         [--payload-file F] [--unique-values] [--outcomes FILE] --producer-props k=v [k=v ...]"
    );
    std::process::exit(2)
}

impl Args {
    /// Parses the process's arguments; exits with the usage line on a bad one.
    pub fn parse(program: &str) -> Args {
        let mut args = Args {
            topic: String::new(),
            num_records: 0,
            record_size: 100,
            throughput: -1.0,
            payload_file: None,
            unique_values: false,
            outcomes: None,
            props: Vec::new(),
        };
        let mut it = std::env::args().skip(1).peekable();
        while let Some(flag) = it.next() {
            let mut value = || {
                it.next()
                    .unwrap_or_else(|| usage(program, &format!("{flag} needs a value")))
            };
            match flag.as_str() {
                "--topic" => args.topic = value(),
                "--num-records" => {
                    args.num_records = value()
                        .parse()
                        .unwrap_or_else(|_| usage(program, "--num-records"))
                }
                "--record-size" => {
                    args.record_size = value()
                        .parse()
                        .unwrap_or_else(|_| usage(program, "--record-size"))
                }
                "--throughput" => {
                    args.throughput = value()
                        .parse()
                        .unwrap_or_else(|_| usage(program, "--throughput"))
                }
                "--payload-file" => args.payload_file = Some(value()),
                "--unique-values" => args.unique_values = true,
                "--outcomes" => args.outcomes = Some(value()),
                "--producer-props" => {
                    while let Some(kv) = it.next_if(|a| !a.starts_with("--")) {
                        let (k, v) = kv
                            .split_once('=')
                            .unwrap_or_else(|| usage(program, &format!("{kv} is not k=v")));
                        args.props.push((k.to_owned(), v.to_owned()));
                    }
                }
                other => usage(program, &format!("unknown flag {other}")),
            }
        }
        if args.topic.is_empty() || args.num_records == 0 {
            usage(program, "--topic and --num-records are required");
        }
        args
    }

    /// The value of producer property `key`, if given.
    pub fn prop(&self, key: &str) -> Option<&str> {
        self.props
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The values records take in turn, and the unique-value rule.
pub struct Values {
    templates: Vec<Bytes>,
    unique: bool,
}

impl Values {
    /// Reads --payload-file or makes the 'x' value; exits with the usage line on a bad file.
    pub fn new(program: &str, args: &Args) -> Values {
        let templates: Vec<Bytes> = match &args.payload_file {
            Some(path) => std::fs::read(path)
                .unwrap_or_else(|e| usage(program, &format!("--payload-file {path}: {e}")))
                .split(|&b| b == b'\n')
                .filter(|line| !line.is_empty())
                .map(Bytes::copy_from_slice)
                .collect(),
            None => vec![Bytes::from(vec![b'x'; args.record_size])],
        };
        if templates.is_empty() {
            usage(program, "--payload-file has no lines");
        }
        Values {
            templates,
            unique: args.unique_values,
        }
    }

    /// Record `i`'s value: a shared template, or under --unique-values a copy starting with `i`.
    pub fn get(&self, i: u64) -> Bytes {
        let template = &self.templates[i as usize % self.templates.len()];
        if !self.unique {
            return template.clone();
        }
        let mut value = template.to_vec();
        write_sequence(&mut value, i);
        Bytes::from(value)
    }

    /// The longest value, for sizing the window of outstanding futures.
    pub fn max_len(&self) -> usize {
        self.templates
            .iter()
            .map(Bytes::len)
            .max()
            .unwrap_or(1)
            .max(1)
    }
}

/// Writes `i` in zero-padded decimal over the first [`SEQUENCE_DIGITS`] bytes of `value`
/// (fewer when the value is shorter), least significant digit last.
pub fn write_sequence(value: &mut [u8], mut i: u64) {
    let n = value.len().min(SEQUENCE_DIGITS);
    for byte in value[..n].iter_mut().rev() {
        *byte = b'0' + (i % 10) as u8;
        i /= 10;
    }
}

/// What a client's send did with a record.
pub enum Sent<A> {
    /// Queued; the future resolves with the broker's answer.
    Queued(A),
    /// The client has no room now (librdkafka's QUEUE_FULL): the loop takes in a completed
    /// future, or waits a millisecond, and offers the record again.
    Full,
}

/// Per-record latencies and the run's totals, in the shape ProducerPerformance prints.
#[derive(Default)]
pub struct Stats {
    latencies_ms: Vec<u32>,
    bytes: u64,
    errors: u64,
    first_error: Option<String>,
    outcomes: Option<File>,
}

impl Stats {
    fn record(&mut self, (index, sent_at, size, outcome): (u64, Instant, usize, Result<(), String>)) {
        if let Some(file) = &mut self.outcomes {
            let line = match &outcome {
                Ok(()) => format!("{index} ok\n"),
                Err(e) => format!("{index} failed {}\n", e.replace('\n', " ")),
            };
            if let Err(e) = file.write_all(line.as_bytes()) {
                eprintln!("--outcomes: {e}");
                std::process::exit(1);
            }
        }
        match outcome {
            Ok(()) => {
                self.latencies_ms.push(sent_at.elapsed().as_millis() as u32);
                self.bytes += size as u64;
            }
            Err(e) => {
                self.errors += 1;
                self.first_error.get_or_insert(e);
            }
        }
    }

    /// Prints perf's summary line (and the failures, if any); returns whether all succeeded.
    pub fn print(&mut self, elapsed: Duration) -> bool {
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
            println!(
                "{} records failed, the first with: {}",
                self.errors,
                self.first_error.as_deref().unwrap_or("?")
            );
        }
        self.errors == 0
    }
}

/// Sends `args.num_records` records through `send` (which returns the record's delivery
/// future, or [`Sent::Full`]), taking in the futures as they complete; returns the stats and the
/// time from the first send to the last acknowledgement. A send error ends the loop early (the
/// records after it are not sent, and so are missing from the summary).
pub async fn send_loop<S, SF, A>(args: &Args, values: &Values, mut send: S) -> (Stats, Duration)
where
    S: FnMut(Bytes) -> SF,
    SF: Future<Output = Result<Sent<A>, String>>,
    A: Future<Output = Result<(), String>>,
{
    let buffer_memory: usize = args
        .prop("buffer.memory")
        .and_then(|v| v.parse().ok())
        .unwrap_or(32 << 20);
    let window = (buffer_memory / values.max_len()).max(1);
    let mut stats = Stats {
        outcomes: args.outcomes.as_ref().map(|path| {
            File::create(path).unwrap_or_else(|e| usage("peer-perf", &format!("--outcomes {path}: {e}")))
        }),
        ..Stats::default()
    };
    let mut pending = FuturesUnordered::new();
    let start = Instant::now();
    'records: for i in 0..args.num_records {
        if args.throughput > 0.0 {
            // Sleep until record i is due, taking in acknowledgements meanwhile so that their
            // latency is not stretched by the pacing.
            let due = tokio::time::Instant::from_std(
                start + Duration::from_secs_f64(i as f64 / args.throughput),
            );
            loop {
                tokio::select! {
                    () = tokio::time::sleep_until(due) => break,
                    Some(done) = pending.next(), if !pending.is_empty() => stats.record(done),
                }
            }
        }
        let value = values.get(i);
        let size = value.len();
        let sent_at = Instant::now();
        let ack = loop {
            match send(value.clone()).await {
                Ok(Sent::Queued(ack)) => break ack,
                Ok(Sent::Full) => match pending.next().await {
                    Some(done) => stats.record(done),
                    None => tokio::time::sleep(Duration::from_millis(1)).await,
                },
                Err(e) => {
                    eprintln!("send: {e}");
                    stats.errors += 1;
                    stats.first_error.get_or_insert(e);
                    break 'records;
                }
            }
        };
        pending.push(ack.map(move |outcome| (i, sent_at, size, outcome)));
        while let Some(Some(done)) = pending.next().now_or_never() {
            stats.record(done);
        }
        while pending.len() >= window {
            if let Some(done) = pending.next().await {
                stats.record(done);
            }
        }
    }
    while let Some(done) = pending.next().await {
        stats.record(done);
    }
    (stats, start.elapsed())
}
