//! State shared by every `Producer` handle and the driver task.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Instant;

use tokio::sync::{Notify, oneshot};

use super::config::ProducerConfig;
use super::metadata::ClusterMetadata;
use super::partitioner::StickyPartitioner;
use crate::engine::accumulator::Accumulator;
use crate::engine::{CallId, Engine, Millis};
use crate::error::Error;

/// The engine and the accumulator it drains, under one short lock: `send` appends and checks
/// the transaction state, transactional calls start here, and the driver polls here.
pub(crate) struct Core {
    pub engine: Engine,
    pub acc: Accumulator,
}

pub(crate) struct Shared {
    pub config: ProducerConfig,
    start: Instant,
    core: Mutex<Core>,
    pub sticky: Mutex<StickyPartitioner>,
    pub metadata: RwLock<ClusterMetadata>,
    /// Topics `send` has asked about; metadata refreshes cover them.
    wanted_topics: Mutex<BTreeSet<Arc<str>>>,
    /// Woken when metadata changes (or a refresh failed), for `send`s waiting on a topic.
    pub metadata_changed: Notify,
    /// Woken when buffer memory was released, for `send`s waiting for space.
    pub space: Notify,
    /// Wakes the driver: a batch opened or filled up, or a call started.
    pub wake: Notify,
    /// Transactional calls waiting for their result.
    calls: Mutex<HashMap<CallId, oneshot::Sender<Result<(), Error>>>>,
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
            start: Instant::now(),
            core: Mutex::new(Core { engine, acc }),
            sticky: Mutex::new(sticky),
            metadata: RwLock::new(ClusterMetadata::default()),
            wanted_topics: Mutex::new(BTreeSet::new()),
            metadata_changed: Notify::new(),
            space: Notify::new(),
            wake: Notify::new(),
            calls: Mutex::new(HashMap::new()),
        }
    }

    /// Milliseconds since the producer started, on the monotonic clock the engine runs on.
    pub fn now_ms(&self) -> Millis {
        self.start.elapsed().as_millis() as Millis
    }

    pub fn lock_core(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(|e| e.into_inner())
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

    /// Registers the waiter of a call the engine just accepted (under the core lock, so the
    /// driver cannot finish the call before the waiter is there).
    pub fn await_call(&self, id: CallId) -> oneshot::Receiver<Result<(), Error>> {
        let (tx, rx) = oneshot::channel();
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, tx);
        rx
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
