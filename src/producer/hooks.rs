//! Hooks: code of the application's that the producer calls at fixed points of a record's
//! life (the shape of the Java client's `ProducerInterceptor` and franz-go's produce hooks,
//! with per-batch acknowledgements as franz-go's). Set with
//! [`crate::ProducerBuilder::hooks`]; a producer without hooks checks one `Option` per record
//! and per batch.

use std::fmt;
use std::sync::Arc;

use super::Record;
use crate::engine::accumulator::BatchObserver;
use crate::engine::completion::BatchOutcome;
use crate::error::Error;
use crate::types::TopicPartition;

/// Called by the producer at fixed points. Every method has an empty default, so an
/// implementation names only what it needs.
///
/// A hook must not block nor wait on the producer: [`ProducerHooks::on_send`] runs inside
/// `send` on the caller's task, the other two while the producer's engine is locked (usually
/// on its background task, which meanwhile sends nothing). A panic in a hook is the
/// application's panic on that task.
pub trait ProducerHooks: Send + Sync + 'static {
    /// `send` was called with `record`, before a partition is chosen: the hook may add
    /// headers ([`Record::add_header`]) or read the record. On the caller's task, once per
    /// record, before the record is checked (a record refused afterwards is never
    /// acknowledged nor failed through these hooks).
    fn on_send(&self, record: &mut Record) {
        let _ = record;
    }

    /// The broker acknowledged a batch of `records` records of `partition`, the first at
    /// `base_offset` (-1 when the broker answered "duplicate" without offsets). Once per
    /// batch; the records' delivery futures resolve right after.
    fn on_acknowledgement(&self, partition: &TopicPartition, base_offset: i64, records: i32) {
        let _ = (partition, base_offset, records);
    }

    /// A batch of `records` records of `partition` failed with `error`
    /// ([`Error::is_indeterminate`] says whether it may have been written). Once per batch.
    fn on_failure(&self, partition: &TopicPartition, error: &Error, records: i32) {
        let _ = (partition, error, records);
    }
}

/// The producer's hooks as the engine's observer of resolved batches.
#[derive(Clone)]
pub(crate) struct HooksObserver(pub(crate) Arc<dyn ProducerHooks>);

impl fmt::Debug for HooksObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ProducerHooks")
    }
}

impl BatchObserver for HooksObserver {
    fn resolved(&self, partition: &TopicPartition, records: i32, outcome: &BatchOutcome) {
        match outcome {
            Ok(ack) => self
                .0
                .on_acknowledgement(partition, ack.base_offset, records),
            Err(error) => self.0.on_failure(partition, error, records),
        }
    }
}
