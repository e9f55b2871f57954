//! The accumulator: per-partition open batches that `send` appends into on the caller's task,
//! encoding each record straight into the batch buffer (DESIGN, performance shape).
//!
//! It is plain data. The tokio driver keeps it behind one short lock shared by `send` and the
//! engine; the simulation drives it single-threaded. Batches here hold no producer id, epoch
//! or sequence: those are stamped when a batch is drained into a request (DESIGN rule P1).
//!
//! With compression, a batch is compressed when it is closed, and `batch.size` is a target for
//! the compressed size: records are appended while their size times the topic's estimated
//! compression ratio stays within it (the idea of Java's `CompressionRatioEstimator`). The
//! uncompressed records never exceed `max.request.size`, and a sealed batch is never larger
//! than its records (see `BatchBuilder::seal_compressed`), so no batch can exceed it either.
//!
//! Compressing takes microseconds per record, too long to hold the lock `send` shares with the
//! engine: a batch that `send` fills ([`Accumulator::append_deferring_seal`]) is handed to the
//! sending task to seal outside the lock ([`ToSeal`]) and put back in its place
//! ([`Accumulator::put_sealed`]); until then no later batch of its partition is handed to the
//! engine, so batches keep their order.

use rustc_hash::FxHashMap;
use std::sync::Arc;

use super::completion::BatchCompletion;
use super::{Millis, TopicPartition};
use crate::protocol::record_batch::{
    BatchBuilder, Compression, Header, RECORD_BATCH_HEADER_LEN, SealedBatch,
};

/// Sizes and times the accumulator works with.
#[derive(Debug, Clone)]
pub struct AccumulatorConfig {
    /// `batch.size`: a batch is closed once the next record would take it past this.
    pub batch_size: usize,
    /// `linger.ms`: how long a batch stays open waiting for more records.
    pub linger_ms: Millis,
    /// `buffer.memory`: bytes of records held before `send` has to wait.
    pub buffer_memory: usize,
    /// `max.request.size`: the largest record batch (one record included) accepted.
    pub max_request_size: usize,
    /// Whether batches are sealed as transactional (attributes bit 4).
    pub transactional: bool,
    /// `compression.type` and its level: applied to each batch when it is closed.
    pub compression: Compression,
}

/// A topic's estimated compression ratio (compressed / uncompressed records), learned from the
/// batches closed so far, as Java's `CompressionRatioEstimator` does: it starts at 1 (no
/// gain assumed), follows a worse observed ratio at once (at least +0.05 per batch) and a
/// better one slowly (at most -0.005 per batch), so batches err towards staying small.
#[derive(Debug, Clone, Copy)]
struct RatioEstimate(f64);

impl RatioEstimate {
    const START: RatioEstimate = RatioEstimate(1.0);
    const WORSE_STEP: f64 = 0.05;
    const BETTER_STEP: f64 = 0.005;
    /// Margin on the estimate when deciding whether a record fits (Java's
    /// `COMPRESSION_RATE_ESTIMATION_FACTOR`).
    const MARGIN: f64 = 1.05;

    fn observe(&mut self, observed: f64) {
        self.0 = if observed > self.0 {
            observed.max(self.0 + Self::WORSE_STEP)
        } else {
            observed.max(self.0 - Self::BETTER_STEP)
        }
        .min(1.0);
    }
}

/// Why a record was not appended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppendError {
    /// The record alone is larger than a limit; it can never be sent.
    TooLarge {
        /// Bytes the record needs in a batch of its own.
        size: usize,
        /// The limit.
        max: usize,
        /// The setting behind the limit.
        setting: &'static str,
    },
    /// `buffer.memory` is full: wait for deliveries to complete, then try again.
    BufferFull,
}

/// Where an appended record went.
#[derive(Debug)]
pub struct Appended {
    /// The completion of the record's batch.
    pub completion: Arc<BatchCompletion>,
    /// The record's index (offset delta) in its batch.
    pub index: i32,
    /// Whether this append opened a new batch or closed a full one: the engine should look at
    /// the accumulator again (it is not woken per record).
    pub wake_engine: bool,
    /// Batches this append closed, for the caller to seal outside the lock and hand back with
    /// [`Accumulator::put_sealed`] (only from [`Accumulator::append_deferring_seal`]).
    pub to_seal: Vec<ToSeal>,
}

/// A closed batch still to be compressed and sealed, by the task that closed it, outside the
/// accumulator's lock. It must be handed back ([`ToSeal::seal`], then
/// [`Accumulator::put_sealed`]) without waiting on anything: its partition's later batches
/// wait for it.
#[derive(Debug)]
pub struct ToSeal {
    slot: u64,
    builder: BatchBuilder,
    transactional: bool,
    compression: Compression,
}

impl ToSeal {
    /// Compresses and seals the batch; needs no lock.
    pub fn seal(self) -> Sealed {
        Sealed {
            slot: self.slot,
            batch: self
                .builder
                .seal_compressed(self.transactional, self.compression),
        }
    }
}

/// A batch sealed outside the lock, for [`Accumulator::put_sealed`].
#[derive(Debug)]
pub struct Sealed {
    slot: u64,
    batch: SealedBatch,
}

/// A closed batch waiting in the accumulator for the engine to take it.
#[derive(Debug)]
pub struct ClosedBatch {
    /// Its partition.
    pub partition: TopicPartition,
    /// The encoded records.
    pub batch: SealedBatch,
    /// Shared by the records' delivery futures.
    pub completion: Arc<BatchCompletion>,
    /// When its first record was appended (the start of its delivery timeout).
    pub created_ms: Millis,
}

/// A closed batch in the order batches were closed: sealed, or being sealed outside the lock.
#[derive(Debug)]
enum Closed {
    Ready(ClosedBatch),
    Sealing {
        slot: u64,
        partition: TopicPartition,
        completion: Arc<BatchCompletion>,
        created_ms: Millis,
    },
}

#[derive(Debug)]
struct OpenBatch {
    builder: BatchBuilder,
    completion: Arc<BatchCompletion>,
    created_ms: Millis,
    /// Expected compressed bytes per record byte: the topic's ratio estimate (with margin) when
    /// the batch opened; exactly 1 without compression.
    size_factor: f64,
}

impl OpenBatch {
    /// The batch's expected size on the wire once `more` record bytes are appended.
    fn expected_size(&self, more: usize) -> usize {
        let records = (self.builder.records_len() + more) as f64;
        RECORD_BATCH_HEADER_LEN + (records * self.size_factor).ceil() as usize
    }
}

/// Open batches per partition, closed batches awaiting the engine, and the memory account.
#[derive(Debug)]
pub struct Accumulator {
    config: AccumulatorConfig,
    open: FxHashMap<TopicPartition, OpenBatch>,
    closed: Vec<Closed>,
    /// Identifies the next batch handed out to be sealed.
    next_slot: u64,
    buffered_bytes: usize,
    /// Per topic, with compression on.
    ratios: FxHashMap<Arc<str>, RatioEstimate>,
}

impl Accumulator {
    /// An empty accumulator.
    pub fn new(config: AccumulatorConfig) -> Self {
        Self {
            config,
            open: FxHashMap::default(),
            closed: Vec::new(),
            next_slot: 0,
            buffered_bytes: 0,
            ratios: FxHashMap::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &AccumulatorConfig {
        &self.config
    }

    /// Bytes of records currently held (open, closed, and in flight until resolved).
    pub fn buffered_bytes(&self) -> usize {
        self.buffered_bytes
    }

    /// Appends one record to `partition`'s open batch, opening a new batch when there is none
    /// or the record does not fit. Fails without side effects when the record is too large or
    /// the buffer is full. A batch it closes is sealed (compressed) on the spot.
    pub fn append(
        &mut self,
        partition: &TopicPartition,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
        now: Millis,
    ) -> Result<Appended, AppendError> {
        self.append_to(partition, timestamp, key, value, headers, || now, false)
    }

    /// [`Accumulator::append`], but a batch it closes is returned in [`Appended::to_seal`] for
    /// the caller to seal outside the lock and hand back with [`Accumulator::put_sealed`].
    /// `now` is read only when the record opens a batch (its delivery timeout starts then):
    /// once per batch, not per record, as the send path's profile asked.
    pub fn append_deferring_seal(
        &mut self,
        partition: &TopicPartition,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
        now: impl FnOnce() -> Millis,
    ) -> Result<Appended, AppendError> {
        self.append_to(partition, timestamp, key, value, headers, now, true)
    }

    #[allow(clippy::too_many_arguments)] // the record's parts, as `append` takes them
    fn append_to(
        &mut self,
        partition: &TopicPartition,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
        now: impl FnOnce() -> Millis,
        defer_seal: bool,
    ) -> Result<Appended, AppendError> {
        let alone = RECORD_BATCH_HEADER_LEN
            + BatchBuilder::new(timestamp, 0).record_size(timestamp, key, value, headers);
        if alone > self.config.max_request_size {
            return Err(AppendError::TooLarge {
                size: alone,
                max: self.config.max_request_size,
                setting: "max.request.size",
            });
        }
        if alone > self.config.buffer_memory {
            return Err(AppendError::TooLarge {
                size: alone,
                max: self.config.buffer_memory,
                setting: "buffer.memory",
            });
        }
        let mut wake_engine = false;
        let mut to_seal = Vec::new();
        let fits_open = self.open.get(partition).map(|open| {
            let added = open.builder.record_size(timestamp, key, value, headers);
            let fits = open.expected_size(added) <= self.config.batch_size
                && open.builder.size_in_bytes() + added <= self.config.max_request_size;
            (fits, added)
        });
        let added = match fits_open {
            Some((true, added)) => added,
            _ => alone,
        };
        if self.buffered_bytes + added > self.config.buffer_memory {
            return Err(AppendError::BufferFull);
        }
        if let Some((false, _)) = fits_open {
            to_seal.extend(self.close(partition, defer_seal));
            wake_engine = true;
        }
        let size_factor = match self.config.compression {
            Compression::None => 1.0,
            _ => {
                let ratio = self
                    .ratios
                    .get(&partition.topic)
                    .unwrap_or(&RatioEstimate::START);
                ratio.0 * RatioEstimate::MARGIN
            }
        };
        let open = self.open.entry(partition.clone()).or_insert_with(|| {
            wake_engine = true;
            OpenBatch {
                builder: BatchBuilder::new(timestamp, self.config.batch_size.min(64 * 1024)),
                completion: BatchCompletion::new(),
                created_ms: now(),
                size_factor,
            }
        });
        let index = open.builder.append(timestamp, key, value, headers);
        self.buffered_bytes += added;
        let completion = Arc::clone(&open.completion);
        if open.expected_size(0) >= self.config.batch_size {
            to_seal.extend(self.close(partition, defer_seal));
            wake_engine = true;
        }
        Ok(Appended {
            completion,
            index,
            wake_engine,
            to_seal,
        })
    }

    /// Closes `partition`'s open batch: sealed now, or (`defer`) handed out to be sealed.
    fn close(&mut self, partition: &TopicPartition, defer: bool) -> Option<ToSeal> {
        let open = self.open.remove(partition)?;
        if defer {
            let slot = self.next_slot;
            self.next_slot += 1;
            self.closed.push(Closed::Sealing {
                slot,
                partition: partition.clone(),
                completion: open.completion,
                created_ms: open.created_ms,
            });
            return Some(ToSeal {
                slot,
                builder: open.builder,
                transactional: self.config.transactional,
                compression: self.config.compression,
            });
        }
        let batch = open
            .builder
            .seal_compressed(self.config.transactional, self.config.compression);
        self.observe_ratio(&partition.topic, &batch);
        self.closed.push(Closed::Ready(ClosedBatch {
            partition: partition.clone(),
            batch,
            completion: open.completion,
            created_ms: open.created_ms,
        }));
        None
    }

    /// Puts a batch sealed outside the lock back in its place. A batch whose place is gone
    /// ([`Accumulator::take_all`] failed its records meanwhile) is dropped.
    pub fn put_sealed(&mut self, sealed: Sealed) {
        let place = self
            .closed
            .iter()
            .position(|c| matches!(c, Closed::Sealing { slot, .. } if *slot == sealed.slot));
        let Some(at) = place else {
            return;
        };
        let Closed::Sealing {
            partition,
            completion,
            created_ms,
            ..
        } = &self.closed[at]
        else {
            return;
        };
        let ready = ClosedBatch {
            partition: partition.clone(),
            batch: sealed.batch,
            completion: Arc::clone(completion),
            created_ms: *created_ms,
        };
        self.observe_ratio(&ready.partition.topic, &ready.batch);
        self.closed[at] = Closed::Ready(ready);
    }

    /// Learns from a sealed batch how well `topic`'s records compress.
    fn observe_ratio(&mut self, topic: &Arc<str>, batch: &SealedBatch) {
        if self.config.compression == Compression::None {
            return;
        }
        // Body bytes per record byte (the header is never compressed). A batch holds a
        // record, so the records are never empty.
        let body = batch.size_in_bytes() - RECORD_BATCH_HEADER_LEN;
        let records = batch.uncompressed_size_in_bytes() - RECORD_BATCH_HEADER_LEN;
        let observed = body as f64 / records.max(1) as f64;
        self.ratios
            .entry(Arc::clone(topic))
            .or_insert(RatioEstimate::START)
            .observe(observed);
    }

    /// Closes every open batch whose linger time has passed (all of them when `flush`), and
    /// hands over every closed batch in the order they were closed.
    pub fn take_ready(&mut self, now: Millis, flush: bool) -> Vec<ClosedBatch> {
        let linger = self.config.linger_ms;
        let mut expired: Vec<TopicPartition> = self
            .open
            .iter()
            .filter(|(_, open)| flush || open.created_ms.saturating_add(linger) <= now)
            .map(|(tp, _)| tp.clone())
            .collect();
        // HashMap order is random; close in a fixed order so a simulation seed replays exactly.
        expired.sort();
        for tp in &expired {
            self.close(tp, false);
        }
        // A batch still being sealed holds back the later batches of its partition.
        let mut ready = Vec::with_capacity(self.closed.len());
        let mut held = Vec::new();
        let mut blocked: Vec<TopicPartition> = Vec::new();
        for closed in std::mem::take(&mut self.closed) {
            match closed {
                Closed::Ready(batch) if !blocked.contains(&batch.partition) => ready.push(batch),
                Closed::Ready(batch) => held.push(Closed::Ready(batch)),
                Closed::Sealing {
                    slot,
                    partition,
                    completion,
                    created_ms,
                } => {
                    blocked.push(partition.clone());
                    held.push(Closed::Sealing {
                        slot,
                        partition,
                        completion,
                        created_ms,
                    });
                }
            }
        }
        self.closed = held;
        ready
    }

    /// When the next open batch's linger time runs out, if any batch is open.
    pub fn next_linger_deadline(&self) -> Option<Millis> {
        self.open
            .values()
            .map(|open| open.created_ms.saturating_add(self.config.linger_ms))
            .min()
    }

    /// Whether any record is waiting in an open or closed batch.
    pub fn has_pending(&self) -> bool {
        !self.open.is_empty() || !self.closed.is_empty()
    }

    /// Returns the memory of a resolved batch to the buffer (its uncompressed size: what it
    /// took when its records were appended).
    pub fn release(&mut self, bytes: usize) {
        self.buffered_bytes = self.buffered_bytes.saturating_sub(bytes);
    }

    /// Accounts for a batch replaced by others of a different total size (a split batch: each
    /// part has its own header). May go past `buffer.memory` by those few bytes: the records
    /// are already held.
    pub fn reaccount(&mut self, released: usize, held: usize) {
        self.release(released);
        self.buffered_bytes += held;
    }

    /// Removes every open and closed batch (when the producer fails fatally or closes); a
    /// batch being sealed outside the lock stays until it is put back.
    pub fn take_all(&mut self) -> Vec<ClosedBatch> {
        self.take_ready(Millis::MAX, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> AccumulatorConfig {
        AccumulatorConfig {
            batch_size: 200,
            linger_ms: 5,
            buffer_memory: 1000,
            max_request_size: 500,
            transactional: false,
            compression: Compression::None,
        }
    }

    fn tp() -> TopicPartition {
        TopicPartition::new("t", 0)
    }

    #[test]
    fn records_share_a_batch_until_it_is_full() {
        let mut acc = Accumulator::new(config());
        let a = acc.append(&tp(), 1, None, Some(&[0; 50]), &[], 0).unwrap();
        let b = acc.append(&tp(), 1, None, Some(&[0; 50]), &[], 0).unwrap();
        assert!(a.wake_engine && !b.wake_engine);
        assert!(Arc::ptr_eq(&a.completion, &b.completion));
        assert_eq!((a.index, b.index), (0, 1));
        let c = acc.append(&tp(), 1, None, Some(&[0; 50]), &[], 0).unwrap();
        assert!(c.wake_engine, "the third record does not fit in 200 bytes");
        assert!(!Arc::ptr_eq(&a.completion, &c.completion));
        assert_eq!(acc.take_ready(0, false).len(), 1);
    }

    #[test]
    fn linger_closes_batches_and_flush_closes_all() {
        let mut acc = Accumulator::new(config());
        acc.append(&tp(), 1, None, Some(b"v"), &[], 10).unwrap();
        assert_eq!(acc.next_linger_deadline(), Some(15));
        assert!(acc.take_ready(14, false).is_empty());
        assert_eq!(acc.take_ready(15, false).len(), 1);
        acc.append(&tp(), 1, None, Some(b"v"), &[], 20).unwrap();
        assert_eq!(acc.take_ready(20, true).len(), 1);
        assert!(!acc.has_pending());
    }

    #[cfg(feature = "lz4")]
    #[test]
    fn compressed_batches_grow_with_the_learned_ratio_within_max_request_size() {
        let mut acc = Accumulator::new(AccumulatorConfig {
            batch_size: 4096,
            buffer_memory: 1 << 30,
            max_request_size: 20_000,
            compression: Compression::Lz4,
            ..config()
        });
        let value = br#"{"user":"someone","action":"click","page":"/home","ok":true}"#;
        let mut batches = Vec::new();
        for _ in 0..20_000 {
            acc.append(&tp(), 1, None, Some(value), &[], 0).unwrap();
            batches.extend(acc.take_ready(0, false));
        }
        batches.extend(acc.take_all());
        // The first batch assumes no gain: 4 KiB of records. Later ones hold more records as
        // the estimate improves, but never more than max.request.size of them.
        let first = &batches[0].batch;
        assert!(first.uncompressed_size_in_bytes() <= 4096);
        let last = &batches[batches.len() - 2].batch;
        assert!(last.record_count() > 2 * first.record_count());
        for closed in &batches {
            assert!(closed.batch.uncompressed_size_in_bytes() <= 20_000);
            assert!(
                closed.batch.size_in_bytes() <= 4096 + 200,
                "{:?}",
                closed.batch
            );
        }
        // Memory is accounted uncompressed, and comes back in full.
        let held: usize = batches
            .iter()
            .map(|c| c.batch.uncompressed_size_in_bytes())
            .sum();
        assert_eq!(acc.buffered_bytes(), held);
        for closed in &batches {
            acc.release(closed.batch.uncompressed_size_in_bytes());
        }
        assert_eq!(acc.buffered_bytes(), 0);
    }

    #[test]
    fn a_batch_sealed_outside_the_lock_keeps_its_place() {
        let mut acc = Accumulator::new(config());
        let other = TopicPartition::new("t", 1);
        let value = [0u8; 150];
        let first = acc
            .append_deferring_seal(&tp(), 1, None, Some(&value), &[], || 0)
            .unwrap();
        assert_eq!(first.to_seal.len(), 1, "150 bytes fill a 200-byte batch");
        let to_seal = first.to_seal.into_iter().next().unwrap();
        // A later batch of the same partition, and one of another partition.
        let second = acc.append(&tp(), 1, None, Some(&value), &[], 0).unwrap();
        acc.append(&other, 1, None, Some(&value), &[], 0).unwrap();
        let ready = acc.take_ready(0, false);
        assert_eq!(ready.len(), 1, "only the other partition's batch");
        assert_eq!(ready[0].partition, other);
        assert!(acc.has_pending());
        acc.put_sealed(to_seal.seal());
        let ready = acc.take_ready(0, false);
        assert_eq!(ready.len(), 2);
        assert!(Arc::ptr_eq(&ready[0].completion, &first.completion));
        assert!(Arc::ptr_eq(&ready[1].completion, &second.completion));
        assert!(!acc.has_pending());
    }

    #[test]
    fn limits_are_enforced_without_side_effects() {
        let mut acc = Accumulator::new(config());
        let err = acc
            .append(&tp(), 1, None, Some(&[0; 600]), &[], 0)
            .unwrap_err();
        assert!(matches!(
            err,
            AppendError::TooLarge {
                setting: "max.request.size",
                ..
            }
        ));
        // Each 150-byte record fills a 200-byte batch of its own (~220 bytes with the header).
        for _ in 0..4 {
            acc.append(&tp(), 1, None, Some(&[0; 150]), &[], 0).unwrap();
        }
        assert_eq!(
            acc.append(&tp(), 1, None, Some(&[0; 150]), &[], 0)
                .unwrap_err(),
            AppendError::BufferFull
        );
        let before = acc.buffered_bytes();
        acc.release(before);
        assert_eq!(acc.buffered_bytes(), 0);
    }
}
