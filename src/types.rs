//! The vocabulary every layer shares: partitions, broker ids, time, the isolation level, and
//! the consumer group metadata and offsets a transaction commits. It sits at the bottom of the
//! crate's layers (ARCHITECTURE.md, "Layers"): nothing here imports the engine, the clients or
//! tokio, so the producer, the consumer and the copy loop name a partition without depending on
//! each other.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Milliseconds on the driver's monotonic clock (virtual time in the simulation).
pub type Millis = u64;

/// A duration in whole milliseconds, saturating.
pub(crate) fn millis(duration: Duration) -> Millis {
    Millis::try_from(duration.as_millis()).unwrap_or(Millis::MAX)
}

/// The monotonic clock a client's sans-I/O core runs on: [`Millis`] since the client started,
/// read at the edge by its tokio driver (the simulation gives the same cores virtual time
/// instead), and back to an [`Instant`] for the driver's timers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MonotonicClock {
    start: Instant,
}

impl MonotonicClock {
    /// A clock at 0 now.
    pub(crate) fn start() -> Self {
        Self {
            start: Instant::now(),
        }
    }

    /// Milliseconds since the start.
    pub(crate) fn now(&self) -> Millis {
        millis(self.start.elapsed())
    }

    /// The instant `at` milliseconds after the start.
    pub(crate) fn instant(&self, at: Millis) -> Instant {
        self.start + Duration::from_millis(at)
    }
}

/// A broker's node id.
pub type BrokerId = i32;

/// A topic and partition.
///
/// Ordered by topic name, then partition. Comparing two that share their name's allocation
/// (the partitions a consumer or producer made from one metadata answer do) skips comparing
/// the names: with a thousand partitions of one topic, every map lookup of a partition was
/// otherwise a string comparison per tree level, and those comparisons were a fifth of the
/// consumer's CPU.
#[derive(Clone)]
pub struct TopicPartition {
    /// The topic name.
    pub topic: Arc<str>,
    /// The partition index.
    pub partition: i32,
}

impl TopicPartition {
    /// A topic-partition.
    pub fn new(topic: impl Into<Arc<str>>, partition: i32) -> Self {
        Self {
            topic: topic.into(),
            partition,
        }
    }
}

impl TopicPartition {
    /// Whether both name the same topic, by allocation first.
    fn same_topic(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.topic, &other.topic) || self.topic == other.topic
    }
}

impl PartialEq for TopicPartition {
    fn eq(&self, other: &Self) -> bool {
        self.partition == other.partition && self.same_topic(other)
    }
}

impl Eq for TopicPartition {}

impl std::hash::Hash for TopicPartition {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.topic.hash(state);
        self.partition.hash(state);
    }
}

impl PartialOrd for TopicPartition {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for TopicPartition {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if Arc::ptr_eq(&self.topic, &other.topic) {
            return self.partition.cmp(&other.partition);
        }
        self.topic
            .cmp(&other.topic)
            .then(self.partition.cmp(&other.partition))
    }
}

impl fmt::Debug for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// A consumer group member's identity, sent with transactional offset commits so the group
/// coordinator fences a member that no longer owns the partitions (KIP-447; the librdkafka
/// rewind incident in the project's seeds).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerGroupMetadata {
    /// The group id.
    pub group_id: String,
    /// The generation the member joined in (-1 if unknown: then no fencing by generation).
    pub generation_id: i32,
    /// The member id the coordinator assigned ("" if unknown).
    pub member_id: String,
    /// The static membership id, if the consumer uses one (KIP-345).
    pub group_instance_id: Option<String>,
}

impl ConsumerGroupMetadata {
    /// A member's metadata as its consumer reports it (KIP-447): the group, the generation
    /// it joined in (under KIP-848 the member epoch), its member id and its static instance
    /// id if any.
    pub fn new(
        group_id: impl Into<String>,
        generation_id: i32,
        member_id: impl Into<String>,
        group_instance_id: Option<String>,
    ) -> Self {
        Self {
            group_id: group_id.into(),
            generation_id,
            member_id: member_id.into(),
            group_instance_id,
        }
    }

    /// Metadata with only a group id: offsets commit without generation fencing (the
    /// pre-KIP-447 behaviour; prefer the full metadata from your consumer).
    pub fn group_only(group_id: impl Into<String>) -> Self {
        Self {
            group_id: group_id.into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
        }
    }
}

/// One partition's offset to commit with a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OffsetToCommit {
    /// The consumed partition.
    pub partition: TopicPartition,
    /// The next offset to consume (last processed + 1).
    pub offset: i64,
    /// Optional metadata stored with the offset.
    pub metadata: Option<String>,
    /// The leader epoch of the last record processed (`ConsumerRecord::leader_epoch`), sent as
    /// the commit's `committed_leader_epoch` (KIP-320): a consumer that starts from the
    /// offset checks with the partition's leader that the log was not truncated under it.
    /// `None` sends -1, which skips that check.
    pub leader_epoch: Option<i32>,
}

impl OffsetToCommit {
    /// The next offset to consume of `partition` (last processed + 1), without metadata or
    /// leader epoch.
    pub fn new(partition: TopicPartition, offset: i64) -> Self {
        Self {
            partition,
            offset,
            metadata: None,
            leader_epoch: None,
        }
    }

    /// The same, with metadata stored beside the offset.
    pub fn with_metadata(mut self, metadata: impl Into<String>) -> Self {
        self.metadata = Some(metadata.into());
        self
    }

    /// The same, with the leader epoch of the last record processed (see
    /// [`OffsetToCommit::leader_epoch`]).
    pub fn with_leader_epoch(mut self, leader_epoch: Option<i32>) -> Self {
        self.leader_epoch = leader_epoch;
        self
    }

    /// The `committed_leader_epoch` field: the epoch, or -1 when unknown.
    pub(crate) fn wire_leader_epoch(&self) -> i32 {
        self.leader_epoch.unwrap_or(-1)
    }
}

/// The offsets a consume-transform-produce loop has processed and not yet committed, per
/// partition. A revoked partition's entry is dropped, so a rebalance never commits offsets
/// for partitions this member no longer owns (the librdkafka rewind incident).
#[derive(Debug, Clone, Default)]
pub struct PendingOffsets {
    /// Per partition, the next offset to consume and the leader epoch of the record before it.
    next: BTreeMap<TopicPartition, (i64, Option<i32>)>,
}

impl PendingOffsets {
    /// Empty.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that the record at `offset` of `partition` was processed (without its leader
    /// epoch: prefer [`PendingOffsets::processed_in_epoch`] with the record's
    /// `leader_epoch`).
    pub fn processed(&mut self, partition: TopicPartition, offset: i64) {
        self.processed_in_epoch(partition, offset, None);
    }

    /// Records that the record at `offset` of `partition`, appended under `leader_epoch`
    /// (`ConsumerRecord::leader_epoch`), was processed: the commit carries the epoch of the
    /// last record (KIP-320).
    pub fn processed_in_epoch(
        &mut self,
        partition: TopicPartition,
        offset: i64,
        leader_epoch: Option<i32>,
    ) {
        let next = self
            .next
            .entry(partition)
            .or_insert((offset + 1, leader_epoch));
        if offset + 1 >= next.0 {
            *next = (offset + 1, leader_epoch.or(next.1));
        }
    }

    /// Drops the entries of partitions taken away by a rebalance.
    pub fn revoke<'a>(&mut self, partitions: impl IntoIterator<Item = &'a TopicPartition>) {
        for p in partitions {
            self.next.remove(p);
        }
    }

    /// The offsets to send with the transaction, emptying the helper.
    pub fn take(&mut self) -> Vec<OffsetToCommit> {
        std::mem::take(&mut self.next)
            .into_iter()
            .map(|(partition, (offset, leader_epoch))| OffsetToCommit {
                partition,
                offset,
                metadata: None,
                leader_epoch,
            })
            .collect()
    }

    /// Whether there is nothing to commit.
    pub fn is_empty(&self) -> bool {
        self.next.is_empty()
    }
}

/// `isolation.level`: which records of transactional producers a consumer sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum IsolationLevel {
    /// `read_committed` (this crate's default, unlike Java's): only records of committed
    /// transactions, never past the last stable offset; aborted records are filtered with the
    /// fetch's aborted-transaction list and transaction markers are never delivered (KIP-98).
    #[default]
    ReadCommitted,
    /// `read_uncommitted`: every record up to the high watermark, aborted ones included.
    ReadUncommitted,
}

impl IsolationLevel {
    /// Its values under `isolation.level`.
    pub(crate) const NAMES: [(&'static str, IsolationLevel); 2] = [
        ("read_committed", IsolationLevel::ReadCommitted),
        ("read_uncommitted", IsolationLevel::ReadUncommitted),
    ];

    /// The wire value of Fetch and ListOffsets (0 uncommitted, 1 committed).
    pub(crate) fn wire(self) -> i8 {
        match self {
            IsolationLevel::ReadUncommitted => 0,
            IsolationLevel::ReadCommitted => 1,
        }
    }
}

/// Which coordinator a lookup is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoordinatorKey {
    /// The transaction coordinator of a transactional id.
    Transaction(String),
    /// The group coordinator of a consumer group.
    Group(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_compare_alike_whether_or_not_they_share_their_name() {
        use std::cmp::Ordering;
        use std::collections::hash_map::DefaultHasher;
        use std::hash::{Hash, Hasher};
        let hash = |tp: &TopicPartition| {
            let mut h = DefaultHasher::new();
            tp.hash(&mut h);
            h.finish()
        };
        let shared: Arc<str> = Arc::from("b");
        let cases = [
            (
                TopicPartition::new(Arc::clone(&shared), 1),
                TopicPartition::new(Arc::clone(&shared), 2),
            ),
            (TopicPartition::new("b", 1), TopicPartition::new("b", 2)),
            (
                TopicPartition::new("a", 9),
                TopicPartition::new(Arc::clone(&shared), 0),
            ),
        ];
        for (low, high) in cases {
            assert_eq!(low.cmp(&high), Ordering::Less, "{low:?} < {high:?}");
            assert_eq!(high.cmp(&low), Ordering::Greater);
            assert_ne!(low, high);
        }
        let (a, b) = (
            TopicPartition::new(Arc::clone(&shared), 3),
            TopicPartition::new("b", 3),
        );
        assert_eq!(a, b);
        assert_eq!(a.cmp(&b), Ordering::Equal);
        assert_eq!(hash(&a), hash(&b));
    }

    #[test]
    fn pending_offsets_drop_revoked_partitions() {
        let mut pending = PendingOffsets::new();
        let a = TopicPartition::new("in", 0);
        let b = TopicPartition::new("in", 1);
        pending.processed(a.clone(), 10);
        pending.processed(a.clone(), 12);
        pending.processed(b.clone(), 3);
        pending.revoke([&b]);
        let offsets = pending.take();
        assert_eq!(offsets.len(), 1);
        assert_eq!((offsets[0].partition.clone(), offsets[0].offset), (a, 13));
        assert!(pending.is_empty());
    }

    #[test]
    fn pending_offsets_keep_the_epoch_of_the_last_record() {
        let mut pending = PendingOffsets::new();
        let a = TopicPartition::new("in", 0);
        pending.processed_in_epoch(a.clone(), 10, Some(3));
        pending.processed_in_epoch(a.clone(), 12, Some(4));
        pending.processed_in_epoch(a.clone(), 11, Some(3));
        let offsets = pending.take();
        assert_eq!((offsets[0].offset, offsets[0].leader_epoch), (13, Some(4)));
        assert_eq!(offsets[0].wire_leader_epoch(), 4);
        assert_eq!(OffsetToCommit::new(a, 1).wire_leader_epoch(), -1);
    }
}
