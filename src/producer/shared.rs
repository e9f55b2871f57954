//! State shared by every `Producer` handle and the driver task.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use rustc_hash::FxHashMap;

use tokio::sync::{Notify, oneshot};

use super::config::ProducerConfig;
use super::metrics::{BrokerMetrics, ProducerMetrics, SnapshotParts};
use super::partitioner::StickyPartitioner;
use crate::engine::accumulator::{Accumulator, PartitionSlot, Sealed, SendGate};
use crate::engine::{CallId, Engine};
use crate::error::Error;
use crate::net::connection::ConnectionState;
use crate::net::metadata::{ClusterMetadata, TopicMetadata};
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

/// Where one topic's records go: a slot per partition, as many as the topic had when the
/// route was made. `send` keeps the route it used last (see [`Shared::route`]), so a loop
/// sending to one topic reaches its partition's batch without looking anything up by name:
/// the metadata, partition-table and partitioner lookups by topic name (hash and compare,
/// each under its lock) were 6% of the send path.
#[derive(Debug)]
pub(crate) struct TopicRoute {
    pub topic: Arc<str>,
    /// Partition `i`'s slot at index `i`.
    pub slots: Vec<Arc<PartitionSlot>>,
    /// Where the topic's keyless records go (carried over to the route that replaces this
    /// one when the partition count changes).
    pub sticky: Mutex<StickyPartitioner>,
}

impl TopicRoute {
    /// The topic's partition count when the route was made.
    pub fn partitions(&self) -> i32 {
        self.slots.len() as i32
    }
}

/// The route a thread's last `send` took, and for which producer and metadata.
struct CachedRoute {
    producer: u64,
    generation: u64,
    route: Arc<TopicRoute>,
}

thread_local! {
    /// One route per thread, of whichever producer sent on it last: a loop sending to one
    /// topic hits it on every record. It keeps that topic's slots alive until the thread
    /// sends elsewhere (a few empty slots once their producer is gone).
    static LAST_ROUTE: RefCell<Option<CachedRoute>> = const { RefCell::new(None) };
}

/// Tells producers apart in [`LAST_ROUTE`].
static NEXT_PRODUCER: AtomicU64 = AtomicU64::new(0);

pub(crate) struct Shared {
    pub config: ProducerConfig,
    /// This producer among those of the process (for the thread's cached route).
    id: u64,
    clock: MonotonicClock,
    /// The producer's rules: taken by the driver's polls and by the transactional calls,
    /// never by `send` (ARCHITECTURE.md, performance shape).
    engine: Mutex<Engine>,
    /// The batches `send` appends to, each partition behind its own lock.
    pub acc: Accumulator,
    /// Seeds each topic's sticky partitioner (the seed plus the count of topics before it).
    sticky_seed: u64,
    pub metadata: RwLock<ClusterMetadata>,
    /// Moves after every change of `metadata` ([`Shared::metadata_updated`]): a cached route
    /// is used only while it has not moved, so a new partition count (or a topic gone) is
    /// seen by the next record.
    metadata_generation: AtomicU64,
    /// Each topic's route, for the threads whose cached route is another or out of date.
    routes: Mutex<FxHashMap<Arc<str>, Arc<TopicRoute>>>,
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
    pub fn new(config: ProducerConfig, engine: Engine, acc: Accumulator, sticky_seed: u64) -> Self {
        Self {
            config,
            id: NEXT_PRODUCER.fetch_add(1, Ordering::Relaxed),
            clock: MonotonicClock::start(),
            engine: Mutex::new(engine),
            acc,
            sticky_seed,
            metadata: RwLock::new(ClusterMetadata::default()),
            metadata_generation: AtomicU64::new(0),
            routes: Mutex::new(FxHashMap::default()),
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

    /// To be called after every change of `metadata`: routes made before are checked again,
    /// and the `send`s waiting for a topic look again.
    pub fn metadata_updated(&self) {
        self.metadata_generation.fetch_add(1, Ordering::Release);
        self.metadata_changed.notify_waiters();
    }

    /// The route of `topic` while the metadata knows the topic with at least one partition;
    /// `None` otherwise (the caller waits for metadata). The per-record path: the thread's
    /// last route, checked against this producer, the topic and one atomic read of the
    /// metadata generation.
    pub fn route(&self, topic: &Arc<str>) -> Option<Arc<TopicRoute>> {
        let generation = self.metadata_generation.load(Ordering::Acquire);
        let cached = LAST_ROUTE.with_borrow(|last| {
            last.as_ref()
                .filter(|last| {
                    last.producer == self.id
                        && last.generation == generation
                        && (Arc::ptr_eq(&last.route.topic, topic) || *last.route.topic == **topic)
                })
                .map(|last| Arc::clone(&last.route))
        });
        if cached.is_some() {
            return cached;
        }
        let route = self.route_from_metadata(topic)?;
        LAST_ROUTE.set(Some(CachedRoute {
            producer: self.id,
            generation,
            route: Arc::clone(&route),
        }));
        Some(route)
    }

    /// The route of `topic` as the metadata has it now: the one made before if the partition
    /// count is the same, else a new one.
    fn route_from_metadata(&self, topic: &Arc<str>) -> Option<Arc<TopicRoute>> {
        let partitions = match self
            .metadata
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .topics
            .get(topic)
        {
            Some(TopicMetadata::Known { leaders }) if !leaders.is_empty() => leaders.len() as i32,
            _ => return None,
        };
        let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        let sticky = match routes.get(topic) {
            Some(route) if route.partitions() == partitions => return Some(Arc::clone(route)),
            Some(route) => route
                .sticky
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            None => StickyPartitioner::new(
                self.config.batch_size,
                self.sticky_seed.wrapping_add(routes.len() as u64),
            ),
        };
        let route = Arc::new(TopicRoute {
            topic: Arc::clone(topic),
            slots: self.acc.topic_slots(topic, partitions),
            sticky: Mutex::new(sticky),
        });
        routes.insert(Arc::clone(topic), Arc::clone(&route));
        Some(route)
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
