//! State shared by every `Producer` handle and the driver task.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use tokio::sync::{Notify, oneshot};

use super::config::ProducerConfig;
use super::metrics::{BrokerMetrics, ProducerMetrics, SnapshotParts};
use super::partitioner::StickyPartitioner;
use crate::engine::accumulator::{Accumulator, Sealed, SendGate};
use crate::engine::{CallId, Engine};
use crate::error::Error;
use crate::net::connection::ConnectionState;
use crate::net::metadata::ClusterMetadata;
use crate::net::ready::MetadataAnswers;
use crate::types::{BrokerId, Millis, MonotonicClock};

/// The engine under its lock. Dropping the guard publishes to the accumulator's
/// [`SendGate`] whether `send` may append now, so every change of state the engine makes
/// reaches `send` before the lock is free again (T1: a record is either inside the
/// transaction a commit flushes, or refused).
pub(crate) struct EngineGuard<'a> {
    engine: MutexGuard<'a, Engine>,
    gate: &'a SendGate,
}

impl Deref for EngineGuard<'_> {
    type Target = Engine;
    fn deref(&self) -> &Engine {
        &self.engine
    }
}

impl DerefMut for EngineGuard<'_> {
    fn deref_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }
}

impl Drop for EngineGuard<'_> {
    fn drop(&mut self) {
        self.gate.publish(self.engine.check_send());
    }
}

pub(crate) struct Shared {
    pub config: ProducerConfig,
    clock: MonotonicClock,
    /// The producer's rules: taken by the driver's polls and by the transactional calls,
    /// never by `send` (ARCHITECTURE.md, performance shape).
    engine: Mutex<Engine>,
    /// The batches `send` appends to, each partition behind its own lock.
    pub acc: Accumulator,
    pub sticky: Mutex<StickyPartitioner>,
    pub metadata: RwLock<ClusterMetadata>,
    /// Topics `send` has asked about; metadata refreshes cover them.
    wanted_topics: Mutex<BTreeSet<Arc<str>>>,
    /// Whether metadata requests are answered, and how each address failed: a wait that no
    /// broker answered says so, not "topic not found".
    pub metadata_answers: Mutex<MetadataAnswers>,
    /// Woken when metadata changes (or a refresh failed), for `send`s waiting on a topic.
    pub metadata_changed: Notify,
    /// Woken when buffer memory was released, for `send`s waiting for space.
    pub space: Notify,
    /// Wakes the driver: a batch opened or filled up, or a call started.
    pub wake: Notify,
    /// Transactional calls waiting for their result.
    calls: Mutex<HashMap<CallId, oneshot::Sender<Result<(), Error>>>>,
    /// Times `send` found the buffer full (`buffer-exhausted-total`).
    pub buffer_exhausted: AtomicU64,
    /// Nanoseconds `send` waited for buffer space (`bufferpool-wait-time-ns-total`).
    pub buffer_wait_ns: AtomicU64,
    /// Each broker link's connection state, by node id, for the metrics.
    pub connections: Mutex<BTreeMap<BrokerId, Arc<AtomicU8>>>,
    /// Set when the driver task stops, just before it resolves what is outstanding: a batch a
    /// compression worker puts back after that is resolved by the worker ([`Shared::put_sealed`]).
    pub driver_stopped: AtomicBool,
}

impl Shared {
    pub fn new(
        config: ProducerConfig,
        engine: Engine,
        acc: Accumulator,
        sticky: StickyPartitioner,
    ) -> Self {
        Self {
            config,
            clock: MonotonicClock::start(),
            engine: Mutex::new(engine),
            acc,
            sticky: Mutex::new(sticky),
            metadata: RwLock::new(ClusterMetadata::default()),
            wanted_topics: Mutex::new(BTreeSet::new()),
            metadata_answers: Mutex::new(MetadataAnswers::default()),
            metadata_changed: Notify::new(),
            space: Notify::new(),
            wake: Notify::new(),
            calls: Mutex::new(HashMap::new()),
            buffer_exhausted: AtomicU64::new(0),
            buffer_wait_ns: AtomicU64::new(0),
            connections: Mutex::new(BTreeMap::new()),
            driver_stopped: AtomicBool::new(false),
        }
    }

    /// Puts a batch sealed outside its partition's lock back in its place and wakes the driver
    /// to send it. If the driver has stopped meanwhile (every handle dropped, or its runtime
    /// shut down), nobody else would resolve the batch: the engine, failed by the driver's last
    /// act, fails it here (a poll of a failed engine fails what the accumulator holds, P6).
    pub fn put_sealed(&self, sealed: Sealed) {
        self.acc.put_sealed(sealed);
        self.wake.notify_one();
        if self.driver_stopped.load(Ordering::SeqCst) {
            let now = self.now_ms();
            drop(self.lock_engine().poll(now, &self.acc));
        }
    }

    /// Milliseconds since the producer started, on the monotonic clock the engine runs on.
    pub fn now_ms(&self) -> Millis {
        self.clock.now()
    }

    pub fn lock_engine(&self) -> EngineGuard<'_> {
        EngineGuard {
            engine: self.engine.lock().unwrap_or_else(|e| e.into_inner()),
            gate: self.acc.gate(),
        }
    }

    pub fn metadata_answers(&self) -> MutexGuard<'_, MetadataAnswers> {
        self.metadata_answers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    pub fn want_topic(&self, topic: &Arc<str>) -> bool {
        self.wanted_topics
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(Arc::clone(topic))
    }

    pub fn wanted_topics(&self) -> Vec<Arc<str>> {
        self.wanted_topics
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// Registers the waiter of a call the engine just accepted (under the engine lock, so the
    /// driver cannot finish the call before the waiter is there).
    pub fn await_call(&self, id: CallId) -> oneshot::Receiver<Result<(), Error>> {
        let (tx, rx) = oneshot::channel();
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, tx);
        rx
    }

    /// A snapshot of the metrics (see [`ProducerMetrics`]).
    pub fn metrics(&self) -> ProducerMetrics {
        let connections: Vec<(BrokerId, ConnectionState)> = self
            .connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(&id, state)| (id, ConnectionState::from_u8(state.load(Ordering::Relaxed))))
            .collect();
        let engine = self.lock_engine();
        let in_flight = engine.in_flight_per_broker();
        let brokers = connections
            .into_iter()
            .map(|(id, connection)| {
                let in_flight_requests = in_flight.get(&id).copied().unwrap_or(0);
                (
                    id,
                    BrokerMetrics {
                        in_flight_requests,
                        connection,
                    },
                )
            })
            .collect();
        ProducerMetrics::from_parts(SnapshotParts {
            counters: engine.counters(),
            delivery: engine.metrics(),
            now_ms: self.now_ms(),
            buffer_total_bytes: self.config.buffer_memory as u64,
            buffer_used_bytes: self.acc.buffered_bytes() as u64,
            buffer_exhausted_total: self.buffer_exhausted.load(Ordering::Relaxed),
            bufferpool_wait_time_ns_total: self.buffer_wait_ns.load(Ordering::Relaxed),
            brokers,
        })
    }

    /// Drops the waiter of a call whose caller stopped waiting.
    pub fn forget_call(&self, id: CallId) {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }

    /// Hands finished calls their results.
    pub fn finish_calls(&self, finished: Vec<(CallId, Result<(), Error>)>) {
        if finished.is_empty() {
            return;
        }
        let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        for (id, result) in finished {
            if let Some(waiter) = calls.remove(&id) {
                let _ = waiter.send(result);
            }
        }
    }
}
