//! State shared by every `Producer` handle and the driver task.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Instant;

use tokio::sync::Notify;

use super::config::ProducerConfig;
use super::metadata::ClusterMetadata;
use super::partitioner::StickyPartitioner;
use crate::engine::accumulator::Accumulator;
use crate::engine::{Counters, Millis};
use crate::error::Error;

pub(crate) struct Shared {
    pub config: ProducerConfig,
    start: Instant,
    /// The accumulator `send` appends into and the engine drains: one short lock.
    accumulator: Mutex<Accumulator>,
    pub sticky: Mutex<StickyPartitioner>,
    pub metadata: RwLock<ClusterMetadata>,
    /// Topics `send` has asked about; metadata refreshes cover them.
    wanted_topics: Mutex<BTreeSet<Arc<str>>>,
    /// Woken when metadata changes (or a refresh failed), for `send`s waiting on a topic.
    pub metadata_changed: Notify,
    /// Woken when buffer memory was released, for `send`s waiting for space.
    pub space: Notify,
    /// Wakes the driver: a batch opened or filled up.
    pub wake: Notify,
    counters: Mutex<(Counters, Option<Error>)>,
}

impl Shared {
    pub fn new(
        config: ProducerConfig,
        accumulator: Accumulator,
        sticky: StickyPartitioner,
    ) -> Self {
        Self {
            config,
            start: Instant::now(),
            accumulator: Mutex::new(accumulator),
            sticky: Mutex::new(sticky),
            metadata: RwLock::new(ClusterMetadata::default()),
            wanted_topics: Mutex::new(BTreeSet::new()),
            metadata_changed: Notify::new(),
            space: Notify::new(),
            wake: Notify::new(),
            counters: Mutex::new((Counters::default(), None)),
        }
    }

    /// Milliseconds since the producer started, on the monotonic clock the engine runs on.
    pub fn now_ms(&self) -> Millis {
        self.start.elapsed().as_millis() as Millis
    }

    pub fn lock_accumulator(&self) -> MutexGuard<'_, Accumulator> {
        self.accumulator.lock().unwrap_or_else(|e| e.into_inner())
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

    pub fn publish_counters(&self, counters: &Counters, fatal: Option<&Error>) {
        let mut slot = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        if slot.0 != *counters {
            slot.0 = counters.clone();
        }
        if slot.1.is_none() {
            slot.1 = fatal.cloned();
        }
    }

    pub fn counters(&self) -> Counters {
        self.counters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .clone()
    }

    pub fn fatal_error(&self) -> Option<Error> {
        self.counters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .clone()
    }
}
