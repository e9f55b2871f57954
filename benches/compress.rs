//! Codec micro-benchmark: how fast each codec seals a batch, and how small it gets.
//!
//! The batches are what `scripts/bench-peers --compression` sends: 1 KiB JSON-like records
//! from `scripts/bench-peers.d/payload.py` (the same seeded generator every client reads), a
//! value only, appended until the next one would pass 1 MiB. Each codec seals the same batch
//! (compression and the body's CRC-32C, as the producer does before stamping, rule P1), and
//! the report gives input MB/s, the compressed size per input byte, and the time to decompress
//! it again (what a consumer pays).
//!
//! Run with `cargo bench --bench compress [-- PAYLOAD_FILE]`; without a file it runs
//! payload.py itself (python3). Single-threaded; the figure is per core. On a shared machine,
//! count instructions instead: `-- PAYLOAD_FILE CODEC N` seals N batches with one codec (its
//! name as printed, say `lz4` or `zstd3`) and times nothing, for `perf stat` or callgrind.

use std::hint::black_box;
use std::time::{Duration, Instant};

use exactly::__private::protocol::record_batch::{BatchBuilder, Compression, decode_batch};

/// The batch size bench-peers sets (`batch.size`), which with compression bounds the records
/// through `max.request.size` (1 MiB by default).
const BATCH_LIMIT: usize = 1 << 20;
const RECORD_SIZE: usize = 1024;
/// How long each measured run lasts; the best of [`RUNS`] is reported (the machine is shared).
const RUN_TIME: Duration = Duration::from_millis(500);
const RUNS: usize = 5;

fn payload_lines() -> Vec<Vec<u8>> {
    let text = match std::env::args().nth(1).filter(|a| !a.starts_with("--")) {
        Some(path) => std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}")),
        None => {
            let script = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/scripts/bench-peers.d/payload.py"
            );
            let out = std::process::Command::new("python3")
                .args([script, &RECORD_SIZE.to_string(), "2000"])
                .output()
                .expect("python3 runs payload.py");
            assert!(out.status.success(), "payload.py failed");
            out.stdout
        }
    };
    let lines: Vec<Vec<u8>> = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    assert!(!lines.is_empty(), "the payload has no lines");
    lines
}

/// One full batch of the payload's records, open (not yet sealed).
fn fill(lines: &[Vec<u8>]) -> BatchBuilder {
    let mut builder = BatchBuilder::new(1_796_000_000_000, BATCH_LIMIT);
    for line in lines.iter().cycle() {
        let size = builder.record_size(1_796_000_000_000, None, Some(line), &[]);
        if builder.size_in_bytes() + size > BATCH_LIMIT {
            break;
        }
        builder.append(1_796_000_000_000, None, Some(line), &[]);
    }
    builder
}

/// The best time of `f` over [`RUNS`] runs of [`RUN_TIME`] (run 0 warms up).
fn best_time(mut f: impl FnMut()) -> Duration {
    let mut best = Duration::MAX;
    for run in 0..=RUNS {
        let start = Instant::now();
        let mut n = 0u32;
        while start.elapsed() < RUN_TIME {
            f();
            n += 1;
        }
        if run > 0 {
            best = best.min(start.elapsed() / n);
        }
    }
    best
}

fn main() {
    let lines = payload_lines();
    let open = fill(&lines);
    let input = open.records_len();
    println!(
        "{} records of {RECORD_SIZE} B ({input} bytes of records) per batch, best of {RUNS} runs of {RUN_TIME:?}",
        open.record_count()
    );
    let codecs = [
        ("gzip6", Compression::Gzip { level: 6 }),
        ("gzip1", Compression::Gzip { level: 1 }),
        ("snappy", Compression::Snappy),
        ("lz4", Compression::Lz4),
        ("zstd3", Compression::Zstd { level: 3 }),
    ];
    let args: Vec<String> = std::env::args().skip(2).collect();
    if let [codec, batches] = &args[..] {
        let (_, compression) = codecs
            .iter()
            .find(|(name, _)| name == codec)
            .unwrap_or_else(|| panic!("unknown codec {codec}"));
        let batches: usize = batches.parse().expect("a number of batches");
        let mut bytes = 0;
        for _ in 0..batches {
            bytes += black_box(open.clone())
                .seal_compressed(false, *compression)
                .size_in_bytes();
        }
        println!("{codec}: {batches} batches sealed, {bytes} bytes");
        return;
    }
    for (name, compression) in codecs {
        if !compression.codec().is_available() {
            continue;
        }
        let sealed = open.clone().seal_compressed(false, compression);
        assert_eq!(
            sealed.codec(),
            compression.codec(),
            "{name} did not compress"
        );
        let body = sealed.size_in_bytes() - (sealed.uncompressed_size_in_bytes() - input);
        let seal = best_time(|| {
            black_box(black_box(open.clone()).seal_compressed(false, compression));
        });
        // The clone is part of each run; time it alone to take it out.
        let clone = best_time(|| {
            black_box(black_box(&open).clone());
        });
        let seal = seal.saturating_sub(clone);
        let bytes = sealed.to_bytes();
        let decode = best_time(|| {
            let decoded = decode_batch(black_box(&bytes)).expect("our batch decodes");
            black_box(decoded.map(|(batch, _)| batch.records.len()));
        });
        let mb_s = |d: Duration| input as f64 / d.as_secs_f64() / 1e6;
        println!(
            "{name:>7}: seal {:>7.1} MB/s ({:>6.2} ms/batch)  ratio {:.4}  decode {:>7.1} MB/s",
            mb_s(seal),
            seal.as_secs_f64() * 1e3,
            body as f64 / input as f64,
            mb_s(decode),
        );
    }
}
