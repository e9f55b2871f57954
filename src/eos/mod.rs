//! Exactly-once copying between topics: consume, transform, produce and commit the consumed
//! offsets in one transaction (KIP-98, KIP-447), reporting exactly where every record went
//! (rule O1) and translating a consumer group's source offsets into destination offsets
//! without ever skipping a record (rule O2; MirrorMaker 2's offset translation bug, KAFKA-12468).

mod copies;
mod copy_loop;
pub(crate) mod endpoints;
mod metrics;
mod stage;
mod transform;
mod translate;

pub use copies::{CommittedTransaction, ConsumedRange, PartitionOffset, RecordCopy};
pub use copy_loop::CopyLoop;
pub use transform::{CopyLoopCounters, TransformErrorPolicy, TransformOutput};
pub use translate::OffsetTranslator;
