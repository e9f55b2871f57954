//! The consumer: the read side of an exactly-once pipeline (DESIGN "Consuming for exactly-once
//! pipelines").
//!
//! - [`config`]: the settings, under Kafka's property names, and [`ConsumerBuilder`].
//! - `membership`: the sans-I/O group membership state machines (KIP-848 and classic).
//! - `assignor`: the classic protocol's client-side assignor and its wire format.
//! - `fetcher`: positions, ListOffsets and Fetch requests and what their answers change
//!   (sans-I/O).
//! - `records`: turning fetched batches into records (the read_committed filter).
//! - `offsets`: OffsetFetch / OffsetCommit requests and answers (sans-I/O).
//! - `calls`: each request sent with a deadline.
//! - `driver`: the tokio side: broker links, metadata, coordinator, the requests in flight.
//!
//! The consumer has no background task: everything happens inside [`Consumer::poll`] (and the
//! other async calls), on the caller's task. This is deliberate: the member epoch (the
//! generation a transactional offset commit is fenced with, KIP-447) only moves when the
//! coordinator processes a heartbeat, heartbeats only go out from `poll`, and `poll` returns
//! only once the heartbeat in flight is answered; so the [`ConsumerGroupMetadata`] a copy loop
//! takes between two polls is the one the coordinator holds when it commits (the race of
//! KAFKA-19779 / KIP-1251 cannot happen, unless a `poll_timeout` deadline cut that wait short).
//! The price: call `poll` about every heartbeat interval; a member that does not poll for a
//! whole session timeout is removed by the coordinator and learns it as `Lost`.

pub(crate) mod assignor;
mod calls;
pub mod config;
mod driver;
pub(crate) mod fetcher;
pub(crate) mod membership;
pub(crate) mod offsets;
pub(crate) mod records;
pub(crate) mod sticky_assignor;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

pub use config::{
    AssignmentStrategy, ConsumerBuilder, ConsumerConfig, GroupProtocol, IsolationLevel, OffsetReset,
};

use crate::engine::TopicPartition;
use crate::engine::transaction::{ConsumerGroupMetadata, OffsetToCommit};
use crate::error::{Error, Result};
use crate::protocol::record_batch::Header;
use driver::{Driver, MembershipOrRecords};
use membership::MembershipEvent;

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
    driver: Driver,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("driver", &self.driver)
            .finish()
    }
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

    /// A consumer with a validated configuration: connects to the bootstrap servers and picks
    /// the group protocol from the broker's API versions.
    pub(crate) async fn with_config(config: ConsumerConfig) -> Result<Consumer> {
        Ok(Consumer {
            driver: Driver::connect(config).await?,
        })
    }

    /// Checks that the cluster can be used: connects to the bootstrap servers, authenticates
    /// and fetches metadata once, trying them in turn until one answers or `timeout` passes.
    /// For a service's start-up or readiness probe.
    ///
    /// # Errors
    ///
    /// [`Error::NoBrokerAnswered`] naming each bootstrap address with its last failure
    /// (refused, reset, a TLS failure, a timeout); at once, a fatal error when authentication
    /// or TLS fails or `security.protocol` does not match the listener.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<()> {
        self.driver.wait_ready(timeout).await
    }

    /// Whether the group uses the KIP-848 protocol (else the classic one).
    pub fn uses_consumer_protocol(&self) -> bool {
        self.driver.uses_kip848()
    }

    /// Subscribes to `topics` (replacing any earlier subscription); the group assigns their
    /// partitions from the next `poll`.
    pub fn subscribe<I, S>(&mut self, topics: I) -> Result<()>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let topics: Vec<String> = topics.into_iter().map(Into::into).collect();
        if topics.iter().any(|t| t.is_empty()) {
            return Err(Error::InvalidTopic {
                topic: String::new(),
                reason: "empty topic name",
            });
        }
        self.driver.subscribe(topics);
        Ok(())
    }

    /// Waits for the next event: records, or a rebalance event. A Revoked event's partitions
    /// stay owned (offsets may still be committed for them) until the NEXT call to poll; only
    /// then does the consumer tell the coordinator it gave them up.
    ///
    /// Heartbeats are sent from inside `poll`: call it about once per heartbeat interval
    /// (the broker's `group.consumer.heartbeat.interval.ms` under KIP-848,
    /// `heartbeat.interval.ms` under the classic protocol). Under KIP-848 an event is handed
    /// over only once the heartbeat in flight is answered, so [`Consumer::group_metadata`]
    /// read before the next poll holds the member epoch the coordinator has.
    pub async fn poll(&mut self) -> Result<ConsumerEvent> {
        loop {
            if let Some(event) = self.driver.poll(None).await? {
                return Ok(event.into());
            }
        }
    }

    /// Same as [`Consumer::poll`], returning `Ok(None)` when nothing arrived within `timeout`.
    pub async fn poll_timeout(&mut self, timeout: Duration) -> Result<Option<ConsumerEvent>> {
        let deadline = std::time::Instant::now() + timeout;
        Ok(self.driver.poll(Some(deadline)).await?.map(Into::into))
    }

    /// KIP-447 metadata for `Producer::send_offsets_to_transaction` (generation = member epoch
    /// under KIP-848, generation id under the classic protocol).
    pub fn group_metadata(&self) -> ConsumerGroupMetadata {
        self.driver.membership().group_metadata()
    }

    /// The partitions this member owns (a revoked one until the next `poll`).
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.driver.membership().owned()
    }

    /// The next offset `poll` will deliver for an owned partition (`None` while its starting
    /// offset is still being looked up).
    pub fn position(&self, partition: &TopicPartition) -> Option<i64> {
        self.driver.position(partition)
    }

    /// Moves an owned partition's position: `poll` delivers from `offset` on.
    pub fn seek(&mut self, partition: &TopicPartition, offset: i64) -> Result<()> {
        self.driver.seek(partition, offset)
    }

    /// Commits offsets outside transactions (OffsetCommit; each offset is the next to consume),
    /// with this member's generation / member epoch so a stale member is refused.
    pub async fn commit(&mut self, offsets: &[OffsetToCommit]) -> Result<()> {
        self.driver.commit(offsets).await
    }

    /// The committed offsets of `partitions` (OffsetFetch with require_stable: waits out
    /// pending transactional commits); `None` for a partition without one.
    pub async fn committed(
        &mut self,
        partitions: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, Option<i64>)>> {
        self.driver.committed(partitions).await
    }

    /// Leaves the group (so partitions move at once) and closes the connections.
    pub async fn close(self) -> Result<()> {
        self.driver.close().await
    }
}

impl From<MembershipOrRecords> for ConsumerEvent {
    fn from(found: MembershipOrRecords) -> Self {
        match found {
            MembershipOrRecords::Records(records) => ConsumerEvent::Records(records),
            MembershipOrRecords::Membership(MembershipEvent::Assigned(p)) => {
                ConsumerEvent::Assigned(p)
            }
            MembershipOrRecords::Membership(MembershipEvent::Revoked(p)) => {
                ConsumerEvent::Revoked(p)
            }
            MembershipOrRecords::Membership(MembershipEvent::Lost(p)) => ConsumerEvent::Lost(p),
        }
    }
}
