//! What a committed transaction of the copy loop did: for every source record it consumed,
//! the exact destination records it produced (rule O1: the offsets come from the
//! producer's delivery futures, which resolve only once the transaction is committed).

use crate::TopicPartition;

/// A record's place in the log: a partition and an offset.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartitionOffset {
    /// The partition.
    pub partition: TopicPartition,
    /// The record's exact offset in it.
    pub offset: i64,
}

impl PartitionOffset {
    /// The record at `offset` of `partition`.
    pub fn new(partition: TopicPartition, offset: i64) -> Self {
        Self { partition, offset }
    }
}

/// One source record and the destination records the transform made of it: none when the
/// transform filtered it out, several when it fanned out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordCopy {
    /// The consumed record.
    pub source: PartitionOffset,
    /// The records produced from it, in the order they were sent. An offset of -1 means the
    /// broker confirmed the record without reporting where it went (a batch answered
    /// DUPLICATE_SEQUENCE_NUMBER, see `RecordMetadata::offset`); the translator then treats the
    /// source record as unknown.
    pub destinations: Vec<PartitionOffset>,
}

/// The stretch `[from, next)` of a source partition a transaction consumed: every record a
/// read_committed consumer delivers from that stretch is in the transaction's
/// [`CommittedTransaction::copies`]. Offsets in it without a copy are transaction markers,
/// aborted records, or (with compaction) records no longer in the log: none of them has a
/// destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumedRange {
    /// The source partition.
    pub partition: TopicPartition,
    /// Where the transaction began reading the partition: the offset committed before it, or
    /// the first record it saw when it did not know that offset (a fresh assignment).
    pub from: i64,
    /// The offset the transaction committed for the group: the next one to consume.
    pub next: i64,
}

/// What one committed transaction of the copy loop did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommittedTransaction {
    /// Every consumed record, in consumption order (offset order per source partition), with
    /// the destination records made of it.
    pub copies: Vec<RecordCopy>,
    /// Per source partition, the stretch consumed and the offset committed to the group.
    pub consumed: Vec<ConsumedRange>,
    /// The records the transform failed on that went to the dead-letter topic
    /// ([`TransformErrorPolicy::DeadLetter`](super::TransformErrorPolicy::DeadLetter)), in
    /// consumption order, each with its dead letter's place. They are in
    /// [`CommittedTransaction::copies`] too, with no destination.
    pub dead_letters: Vec<RecordCopy>,
}

impl CommittedTransaction {
    /// The number of source records the transaction consumed.
    pub fn records_in(&self) -> usize {
        self.copies.len()
    }

    /// The number of destination records the transaction produced.
    pub fn records_out(&self) -> usize {
        self.copies.iter().map(|c| c.destinations.len()).sum()
    }
}
