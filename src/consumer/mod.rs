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
//! - `state`: what the consumer knows and decides (links, metadata, membership, positions),
//!   synchronous, under one lock.
//! - `driver`: the tokio side: the background task that sends the requests and applies their
//!   answers, and the handle the application's calls go through.
//!
//! Membership is independent of delivery: heartbeats (and JoinGroup / SyncGroup) go out from a
//! background task on their interval, whatever the record buffer holds and whether or not the
//! application is inside [`Consumer::poll`] (as the Java consumer since KIP-62, librdkafka and
//! franz-go do). The application's processing budget is `max.poll.interval.ms`; a member that
//! exceeds it leaves the group and learns `Lost` at its next `poll`. A commit keeps the
//! generation still while it is under way ([`Consumer::hold_generation`]), so the member epoch
//! it carries is the one the coordinator holds (KIP-447; the race of KAFKA-19779 / KIP-1251).

pub(crate) mod assignor;
mod calls;
pub mod config;
mod driver;
pub(crate) mod fetcher;
pub(crate) mod membership;
pub(crate) mod offsets;
pub(crate) mod records;
mod state;
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
use driver::Driver;
pub use driver::GenerationHold;
use membership::MembershipEvent;
use state::MembershipOrRecords;

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
/// Not `Clone`: one task owns it and takes its records with [`Consumer::poll`]. A background
/// task (spawned on the runtime that built it) heartbeats and fetches meanwhile. Dropping the
/// consumer without [`Consumer::close`] stops both at once; the member then expires after the
/// session timeout and its partitions move.
pub struct Consumer {
    driver: Driver,
    request_timeout: Duration,
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
        let request_timeout = config.request_timeout();
        Ok(Consumer {
            driver: Driver::connect(config).await?,
            request_timeout,
        })
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
    /// then does the consumer tell the coordinator it gave them up. Rebalance events always
    /// come before records, and records of a partition that is revoked or lost are dropped,
    /// never delivered after the event.
    ///
    /// Heartbeats do not depend on it: they go out from the background task. What does is
    /// `max.poll.interval.ms` (default 5 minutes), the time the application may spend between
    /// two polls (processing included): past it the member leaves the group, and its next
    /// `poll` returns [`ConsumerEvent::Lost`] and rejoins. On a `current_thread` runtime the
    /// background task runs only while the application's task awaits something, so do not
    /// block the thread for longer than the session timeout.
    ///
    /// Cancel safety: dropping the future loses nothing (records and events are taken in the
    /// step that returns them).
    pub async fn poll(&mut self) -> Result<ConsumerEvent> {
        loop {
            if let Some(event) = self.driver.poll(None).await? {
                return Ok(event.into());
            }
        }
    }

    /// Same as [`Consumer::poll`], returning `Ok(None)` when nothing arrived within `timeout`.
    ///
    /// Cancel safety: as [`Consumer::poll`].
    pub async fn poll_timeout(&mut self, timeout: Duration) -> Result<Option<ConsumerEvent>> {
        let deadline = std::time::Instant::now() + timeout;
        Ok(self.driver.poll(Some(deadline)).await?.map(Into::into))
    }

    /// KIP-447 metadata for `Producer::send_offsets_to_transaction` (generation = member epoch
    /// under KIP-848, generation id under the classic protocol), as it is now. Heartbeats in
    /// the background may move the member epoch at any time; to commit with an epoch the
    /// coordinator still holds, take it from [`Consumer::hold_generation`] instead.
    pub fn group_metadata(&self) -> ConsumerGroupMetadata {
        self.driver.group_metadata()
    }

    /// Holds the generation still for a transactional offset commit and gives the metadata to
    /// commit with (see [`GenerationHold`]). Waits, at most `request.timeout.ms`, for a
    /// heartbeat or rebalance round in flight to be answered first, so the metadata is the
    /// coordinator's:
    ///
    /// ```no_run
    /// # async fn run(consumer: &exactly::Consumer, producer: &exactly::Producer,
    /// #     offsets: Vec<exactly::OffsetToCommit>) -> exactly::Result<()> {
    /// let hold = consumer.hold_generation().await;
    /// let sent = producer.send_offsets_to_transaction(offsets, hold.metadata()).await;
    /// if let Err(e) = &sent {
    ///     hold.refused(e); // fenced: the next poll reports the partitions lost
    /// }
    /// drop(hold);
    /// sent?;
    /// producer.commit_transaction().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// Cancel safety: dropping the future takes no hold.
    pub async fn hold_generation(&self) -> GenerationHold {
        let deadline = std::time::Instant::now() + self.request_timeout;
        self.driver.hold_generation(deadline).await
    }

    /// The partitions this member owns (a revoked one until the next `poll`).
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.driver.assignment()
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
    /// with this member's generation / member epoch so a stale member is refused. A refusal
    /// that says the member lost its partitions (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
    /// ILLEGAL_GENERATION) drops their buffered records, and the next `poll` returns `Lost`.
    ///
    /// Cancel safety: dropping the future may leave the commit applied or not.
    pub async fn commit(&mut self, offsets: &[OffsetToCommit]) -> Result<()> {
        self.driver.commit(offsets).await
    }

    /// The committed offsets of `partitions` (OffsetFetch with require_stable: waits out
    /// pending transactional commits); `None` for a partition without one.
    ///
    /// Cancel safety: dropping the future loses nothing.
    pub async fn committed(
        &mut self,
        partitions: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, Option<i64>)>> {
        self.driver.committed(partitions).await
    }

    /// Leaves the group (so partitions move at once) and closes the connections, within
    /// `request.timeout.ms` whatever the membership is doing (mid-rebalance included: the
    /// LeaveGroup goes on a connection of its own, not behind a JoinGroup the coordinator
    /// holds).
    pub async fn close(self) -> Result<()> {
        self.driver.close().await
    }
}

impl From<MembershipOrRecords> for ConsumerEvent {
    fn from(found: MembershipOrRecords) -> Self {
        match found {
            MembershipOrRecords::Records(records) => ConsumerEvent::Records(records),
            MembershipOrRecords::Membership(event) => event.into(),
        }
    }
}

impl From<MembershipEvent> for ConsumerEvent {
    fn from(event: MembershipEvent) -> Self {
        match event {
            MembershipEvent::Assigned(p) => ConsumerEvent::Assigned(p),
            MembershipEvent::Revoked(p) => ConsumerEvent::Revoked(p),
            MembershipEvent::Lost(p) => ConsumerEvent::Lost(p),
        }
    }
}
