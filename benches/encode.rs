//! Encoder micro-benchmark: the producer's per-record path.
//!
//! For 100-byte and 1 KiB records (a value only, no key or headers, like Kafka's
//! `producer-perf-test --record-size`), appends records into a [`BatchBuilder`] until the next
//! one would pass ~1 MiB (and, for comparison, Kafka's default `batch.size` of 16 KiB), seals
//! and stamps the batch, and reports records/s and bytes/s. Next
//! to it, the floor for the same bytes: copying the payload bytes into a buffer plus one CRC-32C
//! over a batch of the same size, and the ratio of our time to the floor's.
//!
//! Targets: at least 20 M records/s per core at 100 B; within 2x of the floor at 1 KiB.
//!
//! Run with `cargo bench --bench encode`. Single-threaded; the figure is per core.

use std::hint::black_box;
use std::time::{Duration, Instant};

use exactly::__private::protocol::record_batch::{BatchBuilder, SealedBatch};

/// The batch sizes the benchmark fills: about what a high-throughput producer sets
/// `batch.size` to, and Kafka's default.
const BATCH_LIMITS: [usize; 2] = [1 << 20, 16 << 10];
/// How long each measured run lasts; the best of [`RUNS`] is reported (the machine is shared).
const RUN_TIME: Duration = Duration::from_millis(400);
const RUNS: usize = 7;

/// One batch as the producer builds it: check the record fits, append, seal, stamp.
fn encode_batch(limit: usize, value: &[u8], timestamp: i64, sequence: i32) -> SealedBatch {
    let mut builder = BatchBuilder::new(timestamp, limit);
    loop {
        let ts = timestamp + i64::from(builder.record_count() & 7);
        let size = builder.record_size(ts, None, Some(value), &[]);
        if builder.size_in_bytes() + size > limit {
            break;
        }
        builder.append(ts, None, Some(value), &[]);
    }
    let mut sealed = builder.seal(false);
    sealed.stamp(1000, 0, sequence);
    sealed
}

/// The floor for one batch of `records` payloads making `batch_bytes` on the wire: copy every
/// payload into a buffer, then one CRC-32C over the batch's bytes.
fn floor_batch(value: &[u8], records: usize, batch_bytes: usize, buffer: &mut [u8]) -> u32 {
    let mut at = 0;
    for _ in 0..records {
        buffer[at..at + value.len()].copy_from_slice(black_box(value));
        at += value.len();
    }
    crc32c::crc32c(&buffer[..batch_bytes])
}

/// Runs `batch` repeatedly for [`RUN_TIME`], [`RUNS`] times, and returns the best time per batch.
fn best_time_per_batch(mut batch: impl FnMut(i32)) -> Duration {
    let mut best = Duration::MAX;
    for run in 0..=RUNS {
        let start = Instant::now();
        let mut batches = 0u32;
        while start.elapsed() < RUN_TIME {
            batch(batches as i32);
            batches += 1;
        }
        // Run 0 warms up caches and the allocator.
        if run > 0 {
            best = best.min(start.elapsed() / batches);
        }
    }
    best
}

fn main() {
    println!("RecordBatch v2 encode, best of {RUNS} runs of {RUN_TIME:?}");
    for limit in BATCH_LIMITS {
        for record_size in [100usize, 1024] {
            report(limit, record_size);
        }
    }
}

fn report(limit: usize, record_size: usize) {
    let value: Vec<u8> = (0..record_size).map(|i| i as u8).collect();
    let sample = encode_batch(limit, &value, 1_700_000_000_000, 0);
    let records = sample.record_count() as usize;
    let batch_bytes = sample.size_in_bytes();

    let ours = best_time_per_batch(|seq| {
        black_box(encode_batch(
            limit,
            black_box(&value),
            1_700_000_000_000,
            seq,
        ));
    });
    let mut buffer = vec![0u8; limit];
    let floor = best_time_per_batch(|_| {
        black_box(floor_batch(&value, records, batch_bytes, &mut buffer));
    });

    let per_sec = |d: Duration, n: usize| n as f64 / d.as_secs_f64();
    println!(
        "{record_size:>5} B records, {} KiB batches ({records} records, {batch_bytes} bytes)\n\
         \x20 encode: {:>7.2} M records/s  {:>6.2} GB/s  ({:.1} ns/record)\n\
         \x20 floor:  {:>7.2} M records/s  {:>6.2} GB/s  (memcpy of payloads + one CRC-32C)\n\
         \x20 encode time / floor time: {:.2}x",
        limit >> 10,
        per_sec(ours, records) / 1e6,
        per_sec(ours, batch_bytes) / 1e9,
        ours.as_nanos() as f64 / records as f64,
        per_sec(floor, records) / 1e6,
        per_sec(floor, batch_bytes) / 1e9,
        ours.as_secs_f64() / floor.as_secs_f64(),
    );
}
