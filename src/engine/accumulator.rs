//! The accumulator: per-partition open batches that `send` appends into on the caller's task,
//! encoding each record straight into the batch buffer (ARCHITECTURE.md, performance shape).
//!
//! It is shared by every `send` and the engine without an outer lock: each
//! partition has its own short lock ([`PartitionSlot`]), the memory account is atomic, and the
//! engine's "may `send` append now" answer is published to a [`SendGate`] that appends check
//! under their partition's lock. The engine keeps its own lock for its rules and takes a
//! partition's lock only to move closed batches out, so a caller appending in a tight loop
//! never waits for a poll of the engine, nor the engine for more than one append. The
//! simulation drives the same accumulator single-threaded. Batches here hold no producer id,
//! epoch or sequence: those are stamped when a batch is drained into a request (rule
//! P1).
//!
//! With compression, a batch is compressed when it is closed, and `batch.size` is a target for
//! the compressed size: records are appended while their size times the topic's estimated
//! compression ratio stays within it (the idea of Java's `CompressionRatioEstimator`). The
//! uncompressed records never exceed `max.request.size`, and a sealed batch is never larger
//! than its records (see `BatchBuilder::seal_compressed`), so no batch can exceed it either.
//!
//! Compressing takes microseconds per record, too long to hold a partition's lock: a batch that `send` fills ([`Accumulator::append_deferring_seal`]) is handed out to be
//! sealed outside the lock ([`ToSeal`]), by the sending task or a compression worker
//! (`producer::seal_pool`), and put back in its place ([`Accumulator::put_sealed`]); until
//! then no later batch of its partition is handed to the engine, so batches keep their order.

use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use super::completion::{BatchCompletion, BatchOutcome};
use super::spans::BatchSpans;
use crate::error::Error;
use crate::protocol::record_batch::{
    BatchBuilder, Compression, Header, RECORD_BATCH_HEADER_LEN, SealedBatch,
};
use crate::types::{Millis, TopicPartition};

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

/// One record as an append takes it, with its sizes computed once.
#[derive(Clone, Copy)]
struct RecordParts<'a> {
    timestamp: i64,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: &'a [Header],
    /// [`BatchBuilder::record_fixed_len`].
    fixed_len: usize,
    /// Bytes in a batch of its own, header included.
    alone: usize,
    /// The record's `create` span.
    span: &'a tracing::Span,
}

/// Why a record was not appended.
#[derive(Debug, Clone)]
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
    /// The engine does not take records now (outside a transaction, or failed): the error
    /// `send` returns, as published to the [`SendGate`].
    Refused(Error),
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

/// A closed batch still to be compressed and sealed outside the partition's lock, by the task
/// that closed it or a compression worker. It must be handed back ([`ToSeal::seal`], then
/// [`Accumulator::put_sealed`]) without waiting on anything: its partition's later batches
/// wait for it.
#[derive(Debug)]
pub struct ToSeal {
    slot: u64,
    queue: Arc<PartitionSlot>,
    builder: BatchBuilder,
    transactional: bool,
    compression: Compression,
}

impl ToSeal {
    /// Compresses and seals the batch; needs no lock.
    pub fn seal(self) -> Sealed {
        Sealed {
            slot: self.slot,
            queue: self.queue,
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
    queue: Arc<PartitionSlot>,
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
    /// Its spans (`kafka.batch` and its records' `create`), opened with the batch.
    pub spans: BatchSpans,
}

/// A closed batch of a partition, in the order its batches were closed: sealed, or being
/// sealed outside the lock.
#[derive(Debug)]
enum Closed {
    Ready(ClosedBatch),
    Sealing {
        slot: u64,
        completion: Arc<BatchCompletion>,
        created_ms: Millis,
        spans: BatchSpans,
        /// What failing it needs while it is away (see [`Accumulator::take_all`]).
        record_count: i32,
        uncompressed_bytes: usize,
    },
}

/// Everything [`Accumulator::take_all`] removed.
#[derive(Debug, Default)]
pub struct TakenBatches {
    /// The open batches (closed for it) and the closed ones, sealed.
    pub closed: Vec<ClosedBatch>,
    /// The batches that were being sealed outside the lock.
    pub sealing: Vec<UnsealedBatch>,
}

/// A batch removed while it was being sealed outside the lock: never stamped, so never on the
/// wire; its sealed form finds no place when it is put back and is dropped there.
#[derive(Debug)]
pub struct UnsealedBatch {
    /// Shared by the records' delivery futures.
    pub completion: Arc<BatchCompletion>,
    /// Its records.
    pub record_count: i32,
    /// What it accounts for in `buffer.memory` (header + uncompressed records).
    pub uncompressed_bytes: usize,
    /// Its spans.
    pub spans: BatchSpans,
}

#[derive(Debug)]
struct OpenBatch {
    builder: BatchBuilder,
    completion: Arc<BatchCompletion>,
    /// The batch's spans: its own, linked to each record's `create` span, and those.
    spans: BatchSpans,
    created_ms: Millis,
    /// Expected compressed bytes per record byte: the topic's ratio estimate (with margin) when
    /// the batch opened; `None` without compression, where the size is exact.
    size_factor: Option<f64>,
}

impl OpenBatch {
    /// The batch's expected size on the wire once `more` record bytes are appended (in
    /// integers without compression: the float multiplication and `ceil` were a visible
    /// part of every append).
    fn expected_size(&self, more: usize) -> usize {
        let records = self.builder.records_len() + more;
        match self.size_factor {
            None => RECORD_BATCH_HEADER_LEN + records,
            Some(factor) => RECORD_BATCH_HEADER_LEN + (records as f64 * factor).ceil() as usize,
        }
    }
}

/// One partition's batches: the open one `send` appends to and the closed ones waiting for the
/// engine, behind the partition's own lock (ARCHITECTURE.md, performance shape: one short
/// per-partition lock at most). Callers appending to different partitions never meet, and
/// the engine takes each lock only to move closed batches out.
#[derive(Debug)]
pub struct PartitionSlot {
    partition: TopicPartition,
    queue: Mutex<PartitionQueue>,
}

#[derive(Debug, Default)]
struct PartitionQueue {
    open: Option<OpenBatch>,
    closed: VecDeque<Closed>,
}

impl PartitionSlot {
    fn lock(&self) -> MutexGuard<'_, PartitionQueue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The slot's partition.
    pub fn partition(&self) -> &TopicPartition {
        &self.partition
    }

    /// Whether the partition has a batch open for more records. A batch closes once another
    /// record of its last one's size would not fit, so `false` means the next record starts a
    /// batch: the sticky partitioner's cue that a switch costs no half-full batch (KIP-480).
    pub fn has_open_batch(&self) -> bool {
        self.lock().open.is_some()
    }
}

/// The partitions the accumulator has seen: looked up by every `send`, added to rarely.
#[derive(Debug, Default)]
struct PartitionTable {
    by_partition: FxHashMap<TopicPartition, Arc<PartitionSlot>>,
    /// The same slots in partition order, so the engine drains them in an order a simulation
    /// seed replays exactly (a hash map's order is random).
    ordered: Vec<Arc<PartitionSlot>>,
}

/// Whether `send` may append: the engine publishes its answer here after every change of
/// state it makes under its own lock (an idempotent producer is always open; a transactional
/// one only inside a transaction, T1), and each append checks it under its partition's lock.
/// So a commit that closes the gate and then flushes every partition sees every record whose
/// append passed the gate: the append held the partition lock the flush takes after it.
#[derive(Debug)]
pub struct SendGate {
    open: AtomicBool,
    /// Why the gate is closed (the error `send` returns).
    reason: Mutex<Option<Error>>,
}

impl Default for SendGate {
    fn default() -> Self {
        Self {
            open: AtomicBool::new(true),
            reason: Mutex::new(None),
        }
    }
}

impl SendGate {
    /// Opens the gate (`Ok`) or closes it with the error `send` then returns.
    pub fn publish(&self, allowed: Result<(), Error>) {
        match allowed {
            Ok(()) => self.open.store(true, Ordering::SeqCst),
            Err(reason) => {
                *self.reason.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason);
                self.open.store(false, Ordering::SeqCst);
            }
        }
    }

    fn check(&self) -> Result<(), Error> {
        if self.open.load(Ordering::SeqCst) {
            return Ok(());
        }
        Err(self
            .reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_else(|| Error::InvalidState("send is not allowed now".into())))
    }
}

/// Open and closed batches per partition, and the memory account. Shared by every `send`
/// and the engine without an outer lock: appends lock only their partition, the memory
/// account is atomic.
#[derive(Debug)]
pub struct Accumulator {
    config: AccumulatorConfig,
    partitions: RwLock<PartitionTable>,
    gate: SendGate,
    /// Identifies the next batch handed out to be sealed.
    next_slot: AtomicU64,
    buffered_bytes: AtomicUsize,
    /// Bytes returned to the buffer so far, so the driver can tell whether a step released
    /// memory (and wake the `send`s waiting for it) while other tasks append.
    released_bytes: AtomicU64,
    /// Per topic, with compression on; read when a batch opens, updated when one is sealed.
    ratios: Mutex<FxHashMap<Arc<str>, RatioEstimate>>,
    /// Told of every batch resolved; `None` (checked once per batch) when nobody listens.
    observer: Option<Arc<dyn BatchObserver>>,
}

/// Told the outcome of every batch the engine resolves, once per batch (the producer's
/// hooks, [`crate::producer::hooks::ProducerHooks`], stand behind it). Called while the
/// engine is locked, on whichever task resolves the batch: it must not block.
pub trait BatchObserver: Send + Sync + std::fmt::Debug {
    /// The batch of `records` records of `partition` resolved with `outcome`.
    fn resolved(&self, partition: &TopicPartition, records: i32, outcome: &BatchOutcome);
}

impl Accumulator {
    /// An empty accumulator.
    pub fn new(config: AccumulatorConfig) -> Self {
        Self {
            config,
            partitions: RwLock::new(PartitionTable::default()),
            gate: SendGate::default(),
            next_slot: AtomicU64::new(0),
            buffered_bytes: AtomicUsize::new(0),
            released_bytes: AtomicU64::new(0),
            ratios: Mutex::new(FxHashMap::default()),
            observer: None,
        }
    }

    /// The same accumulator, telling `observer` of every batch resolved.
    pub fn with_observer(mut self, observer: Arc<dyn BatchObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Who is told of resolved batches, if anyone.
    pub fn observer(&self) -> Option<&dyn BatchObserver> {
        self.observer.as_deref()
    }

    /// The settings it was made with.
    #[cfg(feature = "internals")]
    pub fn config(&self) -> &AccumulatorConfig {
        &self.config
    }

    /// Whether `send` may append, as the engine last published it.
    pub fn gate(&self) -> &SendGate {
        &self.gate
    }

    /// Bytes of records held (appended and not yet resolved).
    pub fn buffered_bytes(&self) -> usize {
        self.buffered_bytes.load(Ordering::SeqCst)
    }

    /// Bytes returned to the buffer since the accumulator was made.
    pub fn released_bytes(&self) -> u64 {
        self.released_bytes.load(Ordering::SeqCst)
    }

    /// Appends one record to `partition`'s open batch, opening a new batch if there is none or
    /// the record does not fit; `now` is the clock, for a new batch's linger start. A batch
    /// this closes is sealed here (the simulation's single-threaded path).
    #[cfg(any(test, feature = "internals"))]
    #[allow(clippy::too_many_arguments)] // the record's parts, as `send` takes them
    pub fn append(
        &self,
        partition: &TopicPartition,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
        now: Millis,
    ) -> Result<Appended, AppendError> {
        self.with_slot(partition, |slot| {
            let no_span = tracing::Span::none();
            self.append_to(
                slot,
                timestamp,
                key,
                value,
                headers,
                &no_span,
                || now,
                false,
            )
        })
    }

    /// Like [`Accumulator::append`], to the slot of [`Accumulator::topic_slots`], and a batch
    /// this closes is returned in [`Appended::to_seal`] for the caller to compress and seal
    /// outside the partition's lock; `now` is called only when a batch opens (the clock is
    /// read once per batch). `record_span` is the record's `create` span: the batch keeps it,
    /// if a subscriber enabled it, until the record's outcome is known.
    #[allow(clippy::too_many_arguments)] // the record's parts, as `send` takes them
    pub fn append_deferring_seal(
        &self,
        slot: &Arc<PartitionSlot>,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
        record_span: &tracing::Span,
        now: impl FnOnce() -> Millis,
    ) -> Result<Appended, AppendError> {
        self.append_to(slot, timestamp, key, value, headers, record_span, now, true)
    }

    /// The slots of `topic`'s partitions `0..partitions`, made where missing. `send` keeps
    /// them per topic, so a record reaches its partition's batch without a lookup by name
    /// (hashing and comparing the topic name per record was 6% of the send path).
    /// Slots are never removed, so a slot handed out stays the one the engine drains.
    pub fn topic_slots(&self, topic: &Arc<str>, partitions: i32) -> Vec<Arc<PartitionSlot>> {
        (0..partitions.max(0))
            .map(|partition| {
                self.with_slot(
                    &TopicPartition::new(Arc::clone(topic), partition),
                    Arc::clone,
                )
            })
            .collect()
    }

    /// Runs `f` on the slot of `partition` (made on its first record) under the table's read
    /// lock: the per-record path borrows the slot instead of cloning its `Arc` (two atomic
    /// operations per record fewer; the table lookup was 4% of the send path's profile).
    fn with_slot<R>(
        &self,
        partition: &TopicPartition,
        f: impl FnOnce(&Arc<PartitionSlot>) -> R,
    ) -> R {
        {
            let table = self.partitions.read().unwrap_or_else(|e| e.into_inner());
            if let Some(slot) = table.by_partition.get(partition) {
                return f(slot);
            }
        }
        let slot = {
            let mut table = self.partitions.write().unwrap_or_else(|e| e.into_inner());
            match table.by_partition.get(partition) {
                Some(slot) => Arc::clone(slot),
                None => {
                    let slot = Arc::new(PartitionSlot {
                        partition: partition.clone(),
                        queue: Mutex::new(PartitionQueue::default()),
                    });
                    table
                        .by_partition
                        .insert(partition.clone(), Arc::clone(&slot));
                    let at = table.ordered.partition_point(|s| s.partition < *partition);
                    table.ordered.insert(at, Arc::clone(&slot));
                    slot
                }
            }
        };
        f(&slot)
    }

    /// Every partition's slot, in partition order.
    fn slots(&self) -> Vec<Arc<PartitionSlot>> {
        self.partitions
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .ordered
            .clone()
    }

    /// Takes `bytes` of the buffer if they fit in `buffer.memory`.
    fn reserve(&self, bytes: usize) -> bool {
        self.buffered_bytes
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
                (held + bytes <= self.config.buffer_memory).then_some(held + bytes)
            })
            .is_ok()
    }

    #[allow(clippy::too_many_arguments)] // the record's parts, as `append` takes them
    fn append_to(
        &self,
        slot: &Arc<PartitionSlot>,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
        record_span: &tracing::Span,
        now: impl FnOnce() -> Millis,
        defer_seal: bool,
    ) -> Result<Appended, AppendError> {
        // Computed once: the size alone, the size in the open batch and the append follow.
        let fixed_len = BatchBuilder::record_fixed_len(key, value, headers);
        let alone = RECORD_BATCH_HEADER_LEN + BatchBuilder::record_size_alone(fixed_len);
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
        let record = RecordParts {
            timestamp,
            key,
            value,
            headers,
            fixed_len,
            alone,
            span: record_span,
        };
        self.append_to_slot(slot, &record, now, defer_seal)
    }

    /// The part of an append done under the partition's lock.
    fn append_to_slot(
        &self,
        slot: &Arc<PartitionSlot>,
        record: &RecordParts<'_>,
        now: impl FnOnce() -> Millis,
        defer_seal: bool,
    ) -> Result<Appended, AppendError> {
        let RecordParts {
            timestamp,
            key,
            value,
            headers,
            fixed_len,
            alone,
            span: record_span,
        } = *record;
        let mut queue = slot.lock();
        // Checked under the partition lock: see `SendGate`.
        self.gate.check().map_err(AppendError::Refused)?;
        let mut wake_engine = false;
        let mut to_seal = Vec::new();
        let fits_open = queue.open.as_ref().map(|open| {
            let added = open.builder.record_size_with(timestamp, fixed_len);
            (self.has_room(open, added), added)
        });
        let added = match fits_open {
            Some((true, added)) => added,
            _ => alone,
        };
        if !self.reserve(added) {
            return Err(AppendError::BufferFull);
        }
        if let Some((false, _)) = fits_open {
            to_seal.extend(self.close(slot, &mut queue, defer_seal));
            wake_engine = true;
        }
        let open = match &mut queue.open {
            Some(open) => open,
            empty => {
                wake_engine = true;
                empty.insert(OpenBatch {
                    builder: BatchBuilder::new(timestamp, self.config.batch_size.min(64 * 1024)),
                    completion: BatchCompletion::new(slot.partition.clone()),
                    spans: BatchSpans::open(&slot.partition),
                    created_ms: now(),
                    size_factor: self.size_factor(&slot.partition.topic),
                })
            }
        };
        let records_before = open.builder.records_len();
        let index = open
            .builder
            .append_with(timestamp, fixed_len, key, value, headers);
        open.spans.appended(index, record_span);
        let completion = Arc::clone(&open.completion);
        // Closed as soon as another record of this one's size would not fit, not at the next
        // record: a full batch is ready at once, and a partition without an open batch tells
        // the sticky partitioner that it is at a batch boundary (`PartitionSlot::has_open_batch`).
        let record_len = open.builder.records_len() - records_before;
        if !self.has_room(open, record_len) {
            to_seal.extend(self.close(slot, &mut queue, defer_seal));
            wake_engine = true;
        }
        Ok(Appended {
            completion,
            index,
            wake_engine,
            to_seal,
        })
    }

    /// Whether `open` takes `added` more bytes of records within `batch.size` (as compressed,
    /// by the estimate) and `max.request.size` (uncompressed).
    fn has_room(&self, open: &OpenBatch, added: usize) -> bool {
        open.expected_size(added) <= self.config.batch_size
            && open.builder.size_in_bytes() + added <= self.config.max_request_size
    }

    /// Expected compressed bytes per record byte for a new batch of `topic` (`None`: exactly
    /// one, without compression).
    fn size_factor(&self, topic: &Arc<str>) -> Option<f64> {
        match self.config.compression {
            Compression::None => None,
            _ => {
                let ratios = self.ratios.lock().unwrap_or_else(|e| e.into_inner());
                let ratio = ratios.get(topic).unwrap_or(&RatioEstimate::START);
                Some(ratio.0 * RatioEstimate::MARGIN)
            }
        }
    }

    /// Closes the partition's open batch: sealed here, or (`defer`) handed back to be sealed
    /// outside the lock while a placeholder keeps its place.
    fn close(
        &self,
        slot: &Arc<PartitionSlot>,
        queue: &mut PartitionQueue,
        defer: bool,
    ) -> Option<ToSeal> {
        let open = queue.open.take()?;
        if defer {
            let slot_id = self.next_slot.fetch_add(1, Ordering::Relaxed);
            queue.closed.push_back(Closed::Sealing {
                slot: slot_id,
                completion: open.completion,
                created_ms: open.created_ms,
                spans: open.spans,
                record_count: open.builder.record_count(),
                uncompressed_bytes: open.builder.size_in_bytes(),
            });
            return Some(ToSeal {
                slot: slot_id,
                queue: Arc::clone(slot),
                builder: open.builder,
                transactional: self.config.transactional,
                compression: self.config.compression,
            });
        }
        let batch = open
            .builder
            .seal_compressed(self.config.transactional, self.config.compression);
        self.observe_ratio(&slot.partition.topic, &batch);
        queue.closed.push_back(Closed::Ready(ClosedBatch {
            partition: slot.partition.clone(),
            batch,
            completion: open.completion,
            created_ms: open.created_ms,
            spans: open.spans,
        }));
        None
    }

    /// Puts a batch sealed outside the lock back in its place.
    pub fn put_sealed(&self, sealed: Sealed) {
        let mut queue = sealed.queue.lock();
        let Some(place) = queue
            .closed
            .iter_mut()
            .find(|c| matches!(c, Closed::Sealing { slot, .. } if *slot == sealed.slot))
        else {
            // Taken away meanwhile (the producer failed or was purged): nothing to put back.
            return;
        };
        let Closed::Sealing {
            completion,
            created_ms,
            spans,
            ..
        } = place
        else {
            return;
        };
        let ready = ClosedBatch {
            partition: sealed.queue.partition.clone(),
            batch: sealed.batch,
            completion: Arc::clone(completion),
            created_ms: *created_ms,
            // The place becomes the ready batch below: its spans move there.
            spans: std::mem::take(spans),
        };
        self.observe_ratio(&ready.partition.topic, &ready.batch);
        *place = Closed::Ready(ready);
    }

    fn observe_ratio(&self, topic: &Arc<str>, batch: &SealedBatch) {
        if self.config.compression == Compression::None {
            return;
        }
        // Body bytes per record byte (the header is never compressed). A batch holds a
        // record, so the records are never empty.
        let body = batch.size_in_bytes() - RECORD_BATCH_HEADER_LEN;
        let records = batch.uncompressed_size_in_bytes() - RECORD_BATCH_HEADER_LEN;
        let observed = body as f64 / records.max(1) as f64;
        self.ratios
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(Arc::clone(topic))
            .or_insert(RatioEstimate::START)
            .observe(observed);
    }

    /// Closes the open batches `close` picks (every open batch when `flush`) and returns the
    /// closed batches ready for the engine, partition by partition in partition order, each
    /// partition's in the order they were closed. The engine picks from
    /// [`Accumulator::lingered_partitions`] and its pipelines (see `Engine::batches_to_close`):
    /// a lingered batch that could not go out stays open, an unlingered one that can join a
    /// request leaving now closes. A batch still being sealed holds back the later batches of
    /// its partition.
    pub fn take_ready(
        &self,
        flush: bool,
        close: impl Fn(&TopicPartition) -> bool,
    ) -> Vec<ClosedBatch> {
        let mut ready = Vec::new();
        for slot in self.slots() {
            let mut queue = slot.lock();
            if queue.open.is_some() && (flush || close(&slot.partition)) {
                self.close(&slot, &mut queue, false);
            }
            while let Some(Closed::Ready(_)) = queue.closed.front() {
                if let Some(Closed::Ready(batch)) = queue.closed.pop_front() {
                    ready.push(batch);
                }
            }
        }
        ready
    }

    /// The partitions whose open batch lingered its time at `now`.
    pub fn lingered_partitions(&self, now: Millis) -> Vec<TopicPartition> {
        self.slots()
            .iter()
            .filter(|slot| {
                let queue = slot.lock();
                queue
                    .open
                    .as_ref()
                    .is_some_and(|open| self.lingered(open, now))
            })
            .map(|slot| slot.partition.clone())
            .collect()
    }

    fn lingered(&self, open: &OpenBatch, now: Millis) -> bool {
        open.created_ms.saturating_add(self.config.linger_ms) <= now
    }

    /// When the next open batch's linger time runs out, among the partitions `counts` keeps
    /// (the engine leaves out those whose lingered batch it would keep open).
    pub fn next_linger_deadline(&self, counts: impl Fn(&TopicPartition) -> bool) -> Option<Millis> {
        self.slots()
            .iter()
            .filter(|slot| counts(&slot.partition))
            .filter_map(|slot| {
                let queue = slot.lock();
                let open = queue.open.as_ref()?;
                Some(open.created_ms.saturating_add(self.config.linger_ms))
            })
            .min()
    }

    /// Whether any record is waiting in an open or closed batch.
    pub fn has_pending(&self) -> bool {
        self.slots().iter().any(|slot| {
            let queue = slot.lock();
            queue.open.is_some() || !queue.closed.is_empty()
        })
    }

    /// Returns the memory of a resolved batch to the buffer (its uncompressed size: what it
    /// took when its records were appended).
    pub fn release(&self, bytes: usize) {
        let _ = self
            .buffered_bytes
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
                Some(held.saturating_sub(bytes))
            });
        self.released_bytes
            .fetch_add(bytes as u64, Ordering::SeqCst);
    }

    /// Accounts for a batch replaced by others of a different total size (a split batch: each
    /// part has its own header). May go past `buffer.memory` by those few bytes: the records
    /// are already held.
    pub fn reaccount(&self, released: usize, held: usize) {
        self.release(released);
        self.buffered_bytes.fetch_add(held, Ordering::SeqCst);
    }

    /// Removes every open and closed batch, those being sealed outside the lock included
    /// (when the producer fails fatally, purges, or aborts a transaction). A batch being
    /// sealed must go too: left in place it would be put back and sent after an abort, in
    /// the next transaction, or after a purge that reported its records failed.
    pub fn take_all(&self) -> TakenBatches {
        let mut taken = TakenBatches::default();
        for slot in self.slots() {
            let mut queue = slot.lock();
            self.close(&slot, &mut queue, false);
            for closed in queue.closed.drain(..) {
                match closed {
                    Closed::Ready(batch) => taken.closed.push(batch),
                    Closed::Sealing {
                        completion,
                        record_count,
                        uncompressed_bytes,
                        spans,
                        ..
                    } => taken.sealing.push(UnsealedBatch {
                        completion,
                        record_count,
                        uncompressed_bytes,
                        spans,
                    }),
                }
            }
        }
        taken
    }
}

#[cfg(test)]
mod tests;
