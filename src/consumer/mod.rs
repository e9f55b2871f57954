//! The consumer: the read side of an exactly-once pipeline (DESIGN "Consuming for exactly-once
//! pipelines").
//!
//! - [`config`]: the settings, under Kafka's property names, and [`ConsumerBuilder`].
//! - `membership`: the sans-I/O group membership state machines (KIP-848 and classic).
//! - `assignor`: the classic protocol's client-side assignor and its wire format.
//! - `fetcher`: positions, Fetch requests and their responses.
//! - `records`: turning fetched batches into records (the read_committed filter).
//! - `cluster`: the tokio side: broker links, metadata, coordinator.
//!
//! The consumer has no background task: everything happens inside [`Consumer::poll`] (and the
//! other async calls), on the caller's task. This is deliberate: the member epoch (the
//! generation a transactional offset commit is fenced with, KIP-447) can only change while
//! `poll` runs, so the [`ConsumerGroupMetadata`] a copy loop takes between two polls is the one
//! the coordinator holds when it commits. The price is Java's: call `poll` at least every
//! heartbeat interval and within `max.poll.interval.ms`.

pub mod config;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

pub use config::{ConsumerBuilder, ConsumerConfig, GroupProtocol, IsolationLevel, OffsetReset};

use crate::engine::TopicPartition;
use crate::engine::transaction::{ConsumerGroupMetadata, OffsetToCommit};
use crate::error::{Error, Result};
use crate::protocol::record_batch::Header;

/// What [`Consumer::poll`] hands over: records, or a change of the partitions this member owns.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ConsumerEvent {
    /// Records, in offset order per partition.
    Records(Vec<ConsumerRecord>),
    /// Partitions newly assigned to this member (incremental: the ones it did not own).
    Assigned(Vec<TopicPartition>),
    /// Partitions about to be given up: commit their offsets (or abort the transaction) now.
    /// They stay owned until the next call to `poll`, which tells the coordinator.
    Revoked(Vec<TopicPartition>),
    /// Partitions already gone (the member was fenced or its session expired): their offsets
    /// must not be committed; another member may own them already.
    Lost(Vec<TopicPartition>),
}

/// One consumed record.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConsumerRecord {
    /// The topic.
    pub topic: Arc<str>,
    /// The partition.
    pub partition: i32,
    /// The record's offset.
    pub offset: i64,
    /// The record's timestamp (create time, or log append time if the topic uses it).
    pub timestamp: i64,
    /// The key.
    pub key: Option<Bytes>,
    /// The value (`None`: a tombstone).
    pub value: Option<Bytes>,
    /// The headers, in order.
    pub headers: Vec<Header>,
}

impl ConsumerRecord {
    /// The record's topic and partition.
    pub fn topic_partition(&self) -> TopicPartition {
        TopicPartition::new(Arc::clone(&self.topic), self.partition)
    }
}

/// A Kafka consumer in a consumer group, reading committed records by default.
///
/// Not `Clone`: one task owns it and drives it by calling [`Consumer::poll`]. Dropping it
/// without [`Consumer::close`] stops heartbeating and fetching at once; the member then
/// expires after the session timeout and its partitions move.
pub struct Consumer {
    config: ConsumerConfig,
    subscription: Vec<String>,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("group_id", &self.config.group_id)
            .field("subscription", &self.subscription)
            .finish_non_exhaustive()
    }
}

fn not_yet() -> Error {
    Error::InvalidState("the consumer is not implemented yet".into())
}

impl Consumer {
    /// A builder with the default configuration.
    pub fn builder() -> ConsumerBuilder {
        ConsumerBuilder::new()
    }

    /// A consumer from `(property, value)` pairs under Kafka's names (`bootstrap.servers`,
    /// `group.id`, `isolation.level`, ...).
    pub async fn from_properties<I, K, V>(props: I) -> Result<Consumer>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        Self::with_config(ConsumerConfig::from_properties(props)?).await
    }

    /// A consumer with a validated configuration.
    pub(crate) async fn with_config(config: ConsumerConfig) -> Result<Consumer> {
        Ok(Consumer {
            config,
            subscription: Vec::new(),
        })
    }

    /// Subscribes to `topics` (replacing any earlier subscription); the group assigns their
    /// partitions from the next `poll`.
    pub fn subscribe<I, S>(&mut self, topics: I) -> Result<()>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.subscription = topics.into_iter().map(Into::into).collect();
        Err(not_yet())
    }

    /// Waits for the next event: records, or a rebalance event. A Revoked event's partitions
    /// stay owned (offsets may still be committed for them) until the NEXT call to poll; only
    /// then does the consumer tell the coordinator it gave them up.
    pub async fn poll(&mut self) -> Result<ConsumerEvent> {
        Err(not_yet())
    }

    /// Same as [`Consumer::poll`], returning `Ok(None)` when nothing arrived within `timeout`.
    pub async fn poll_timeout(&mut self, timeout: Duration) -> Result<Option<ConsumerEvent>> {
        let _ = timeout;
        Err(not_yet())
    }

    /// KIP-447 metadata for `Producer::send_offsets_to_transaction` (generation = member epoch
    /// under KIP-848, generation id under the classic protocol).
    pub fn group_metadata(&self) -> ConsumerGroupMetadata {
        ConsumerGroupMetadata::group_only(self.config.group_id.clone())
    }

    /// The partitions this member owns.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        Vec::new()
    }

    /// The next offset `poll` will deliver for an owned partition.
    pub fn position(&self, partition: &TopicPartition) -> Option<i64> {
        let _ = partition;
        None
    }

    /// Moves an owned partition's position: `poll` delivers from `offset` on.
    pub fn seek(&mut self, partition: &TopicPartition, offset: i64) -> Result<()> {
        let _ = (partition, offset);
        Err(not_yet())
    }

    /// Commits offsets outside transactions (OffsetCommit; each offset is the next to consume).
    pub async fn commit(&mut self, offsets: &[OffsetToCommit]) -> Result<()> {
        let _ = offsets;
        Err(not_yet())
    }

    /// The committed offsets of `partitions` (OffsetFetch with require_stable: waits out
    /// pending transactional commits); `None` for a partition without one.
    pub async fn committed(
        &mut self,
        partitions: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, Option<i64>)>> {
        let _ = partitions;
        Err(not_yet())
    }

    /// Leaves the group (so partitions move at once) and closes the connections.
    pub async fn close(self) -> Result<()> {
        Err(not_yet())
    }
}
