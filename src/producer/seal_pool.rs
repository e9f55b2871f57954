//! Compression off the sending task: a few worker threads seal (compress, then CRC) the
//! batches `send` fills, so the task that appends goes on appending while a full batch is
//! compressed on another core (ARCHITECTURE.md, compression). Batches the engine closes
//! (linger, flush) are sealed in its poll, as before.
//!
//! Bounded in work and memory: a batch goes to a worker only when one is idle and already
//! waiting for it (a rendezvous channel per worker, no queue). When every worker is busy the
//! task that closed the batch seals it itself, as it did before there were workers. So at most
//! one batch per worker is compressed away from its task, no batch waits in a queue, nobody
//! waits for a worker, and a sender that outruns the workers is slowed by doing the work
//! itself. Waiting for a worker instead would leave the sender's core idle, and on a
//! `current_thread` runtime it would block the thread the driver runs on. The records of a
//! batch being sealed stay counted in `buffer.memory` (they were when appended), so the only
//! memory added is one compressed output per worker.
//!
//! Order and P1: the accumulator keeps a sealing batch's place in its partition and holds back
//! that partition's later batches (and only those) until it is put back
//! (`Accumulator::put_sealed`); sequences are still stamped at drain, after compression.
//!
//! Threads of its own rather than tokio's blocking pool: the number of threads (and of the
//! thread-local zstd contexts they keep between batches) stays fixed, the work does not queue
//! behind the application's own blocking tasks, and it runs whatever runtime flavour the
//! application picked. Without compression there are no workers and no hop: sealing is a
//! CRC, done where the batch was closed.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

use crate::engine::accumulator::{Sealed, ToSeal};
use crate::protocol::record_batch::Compression;

/// What is done with a batch once sealed: put back in its place, and the driver woken.
type Finish = Arc<dyn Fn(Sealed) + Send + Sync>;

/// Workers sealing batches (see the module documentation). Dropping it ends the workers once
/// they have finished the batch they hold, which they still hand to `finish`.
pub(crate) struct SealPool {
    /// One rendezvous channel per worker: `try_send` succeeds only while that worker waits.
    workers: Vec<SyncSender<ToSeal>>,
    finish: Finish,
}

impl std::fmt::Debug for SealPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealPool")
            .field("workers", &self.workers.len())
            .finish_non_exhaustive()
    }
}

impl SealPool {
    /// How many workers a producer compressing with `compression` gets: none without
    /// compression; else one per core beyond the sender's, between one and four (the
    /// sender and the driver need a core, and more workers than cores only interleave).
    pub fn workers_for(compression: Compression) -> usize {
        match compression {
            Compression::None => 0,
            _ => std::thread::available_parallelism()
                .map_or(1, |n| n.get().saturating_sub(1))
                .clamp(1, 4),
        }
    }

    /// Starts `workers` threads, each handing what it sealed to `finish`.
    pub fn start(workers: usize, finish: impl Fn(Sealed) + Send + Sync + 'static) -> Self {
        let finish: Finish = Arc::new(finish);
        let workers = (0..workers)
            .filter_map(|i| {
                let (jobs, receiver) = sync_channel(0);
                let finish = Arc::clone(&finish);
                std::thread::Builder::new()
                    .name(format!("exactly-compress-{i}"))
                    .spawn(move || work(&receiver, &*finish))
                    // A thread the system refuses is a worker fewer: its batches are sealed
                    // inline, as without workers.
                    .ok()
                    .map(|_| jobs)
            })
            .collect();
        Self { workers, finish }
    }

    /// Seals `batch` on an idle worker, or here when none is idle; either way it is handed
    /// to `finish` once sealed. Never waits.
    pub fn seal(&self, batch: ToSeal) {
        let mut batch = batch;
        for worker in &self.workers {
            match worker.try_send(batch) {
                Ok(()) => return,
                Err(TrySendError::Full(back) | TrySendError::Disconnected(back)) => batch = back,
            }
        }
        (self.finish)(batch.seal());
    }
}

/// A worker's life: seal what it is handed until the pool is dropped (bounded by the
/// producer's life; each job is one batch).
fn work(jobs: &Receiver<ToSeal>, finish: &(dyn Fn(Sealed) + Send + Sync)) {
    while let Ok(batch) = jobs.recv() {
        finish(batch.seal());
    }
}

#[cfg(test)]
mod tests;
