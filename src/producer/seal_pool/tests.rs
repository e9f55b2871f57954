use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::*;
use crate::engine::accumulator::{Accumulator, AccumulatorConfig};
use crate::engine::completion::BatchCompletion;
use crate::types::TopicPartition;

/// How long a test waits for the workers before failing (they take microseconds per batch).
const PATIENCE: Duration = Duration::from_secs(10);

fn accumulator(compression: Compression) -> Arc<Accumulator> {
    Arc::new(Accumulator::new(AccumulatorConfig {
        batch_size: 4096,
        linger_ms: 5,
        buffer_memory: 1 << 30,
        max_request_size: 4096,
        transactional: false,
        compression,
    }))
}

/// A compressible record of 500 bytes: eight fill a batch.
fn value(i: usize) -> Vec<u8> {
    format!(
        "{{\"id\":{i},\"note\":\"{}\"}}",
        "the order was shipped ".repeat(22)
    )
    .into_bytes()[..500]
        .to_vec()
}

/// Appends records to `partition` until `acc` hands out a batch to seal, and returns it with
/// the completion of its records.
fn fill(acc: &Accumulator, partition: &TopicPartition) -> (ToSeal, Arc<BatchCompletion>) {
    let slot = acc
        .topic_slots(&partition.topic, partition.partition + 1)
        .pop()
        .unwrap();
    let mut first = None;
    for i in 0..100 {
        let appended = acc
            .append_deferring_seal(
                &slot,
                1,
                None,
                Some(&value(i)),
                &[],
                &tracing::Span::none(),
                || 0,
            )
            .unwrap();
        let completion = first.get_or_insert_with(|| Arc::clone(&appended.completion));
        if let Some(batch) = appended.to_seal.into_iter().next() {
            return (batch, Arc::clone(completion));
        }
    }
    unreachable!("100 records of 500 bytes fill a 4 KiB batch");
}

fn wait_until(what: &str, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < PATIENCE, "{what}: still not done");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[cfg(feature = "lz4")]
#[test]
fn batches_sealed_on_workers_leave_in_the_order_they_were_closed() {
    let acc = accumulator(Compression::Lz4);
    let sealed = Arc::new(AtomicUsize::new(0));
    let pool = {
        let (acc, sealed) = (Arc::clone(&acc), Arc::clone(&sealed));
        SealPool::start(2, move |batch| {
            acc.put_sealed(batch);
            sealed.fetch_add(1, Ordering::SeqCst);
        })
    };
    let partitions = [TopicPartition::new("t", 0), TopicPartition::new("t", 1)];
    let mut closed: Vec<Vec<Arc<BatchCompletion>>> = vec![Vec::new(), Vec::new()];
    let mut taken: Vec<Vec<Arc<BatchCompletion>>> = vec![Vec::new(), Vec::new()];
    let take = |taken: &mut Vec<Vec<Arc<BatchCompletion>>>| {
        for batch in acc.take_ready(false, |_| false) {
            assert_eq!(
                batch.batch.codec(),
                crate::protocol::record_batch::Codec::Lz4
            );
            let p = usize::try_from(batch.partition.partition).unwrap();
            taken[p].push(batch.completion);
        }
    };
    for round in 0..200 {
        let p = round % 2;
        let (batch, completion) = fill(&acc, &partitions[p]);
        closed[p].push(completion);
        pool.seal(batch);
        // The engine takes what is ready while others are still being sealed.
        take(&mut taken);
    }
    wait_until("every batch sealed", || {
        sealed.load(Ordering::SeqCst) == 200
    });
    take(&mut taken);
    for (closed, taken) in closed.iter().zip(&taken) {
        assert_eq!(closed.len(), taken.len());
        for (a, b) in closed.iter().zip(taken) {
            assert!(Arc::ptr_eq(a, b), "a partition's batches left out of order");
        }
    }
}

/// A gate the test opens: `finish` on a worker thread waits at it, so the worker stays busy.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        let started = Instant::now();
        while !*open && started.elapsed() < PATIENCE {
            open = self.opened.wait_timeout(open, PATIENCE).unwrap().0;
        }
    }

    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

/// A pool of one worker whose `finish` waits at the gate on the worker, with a count of the
/// batches finished and of those finished on the caller's thread.
fn gated_pool(acc: &Arc<Accumulator>, gate: &Arc<Gate>) -> (SealPool, Arc<AtomicUsize>) {
    let finished = Arc::new(AtomicUsize::new(0));
    let pool = {
        let (acc, gate, finished) = (Arc::clone(acc), Arc::clone(gate), Arc::clone(&finished));
        SealPool::start(1, move |batch| {
            let on_worker = std::thread::current()
                .name()
                .is_some_and(|name| name.starts_with("exactly-compress"));
            if on_worker {
                gate.wait();
            }
            acc.put_sealed(batch);
            finished.fetch_add(1, Ordering::SeqCst);
        })
    };
    (pool, finished)
}

/// Hands batches to the pool until one goes to the worker (the call returns before it is
/// finished) and returns how many were handed over.
fn occupy_the_worker(
    acc: &Accumulator,
    pool: &SealPool,
    finished: &AtomicUsize,
    partition: &TopicPartition,
) -> usize {
    let started = Instant::now();
    for handed in 1.. {
        assert!(
            started.elapsed() < PATIENCE,
            "the worker never took a batch"
        );
        let before = finished.load(Ordering::SeqCst);
        pool.seal(fill(acc, partition).0);
        if finished.load(Ordering::SeqCst) == before {
            return handed;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    unreachable!()
}

#[cfg(feature = "lz4")]
#[test]
fn with_every_worker_busy_a_batch_is_sealed_by_its_caller_and_nothing_waits() {
    let acc = accumulator(Compression::Lz4);
    let gate = Arc::new(Gate::default());
    let (pool, finished) = gated_pool(&acc, &gate);
    let held = TopicPartition::new("t", 0);
    let handed = occupy_the_worker(&acc, &pool, &finished, &held);
    // The worker is busy: every further batch is sealed by the caller before `seal` returns,
    // so at most one batch is ever away from its caller.
    let other = TopicPartition::new("t", 1);
    for n in 1..=20 {
        pool.seal(fill(&acc, &other).0);
        assert_eq!(finished.load(Ordering::SeqCst), handed - 1 + n);
    }
    // The other partition's batches go out; the held one's partition waits for it.
    let ready = acc.take_ready(false, |_| false);
    assert!(ready.iter().any(|b| b.partition == other));
    assert!(
        acc.has_pending(),
        "the batch on the worker is still being sealed"
    );
    gate.open();
    wait_until("the held batch finished", || {
        finished.load(Ordering::SeqCst) == handed + 20
    });
}

#[cfg(feature = "lz4")]
#[test]
fn a_dropped_pool_still_finishes_the_batch_a_worker_holds() {
    let acc = accumulator(Compression::Lz4);
    let gate = Arc::new(Gate::default());
    let (pool, finished) = gated_pool(&acc, &gate);
    let partition = TopicPartition::new("t", 0);
    let handed = occupy_the_worker(&acc, &pool, &finished, &partition);
    drop(pool);
    gate.open();
    wait_until("the held batch finished", || {
        finished.load(Ordering::SeqCst) == handed
    });
    // Each batch handed over closed at its last record; one more opens the next.
    acc.append(&partition, 1, None, Some(&value(0)), &[], 0)
        .unwrap();
    let ready = acc.take_ready(true, |_| false);
    assert_eq!(
        ready.iter().filter(|b| b.partition == partition).count(),
        handed + 1,
        "every sealed batch and the open one"
    );
    assert!(!acc.has_pending());
}

#[test]
fn no_compression_means_no_workers() {
    assert_eq!(SealPool::workers_for(Compression::None), 0);
    assert!((1..=4).contains(&SealPool::workers_for(Compression::Snappy)));
    assert!(SealPool::start(0, |_| {}).workers.is_empty());
}
