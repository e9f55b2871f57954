//! The consumer: the read side of an exactly-once pipeline (ARCHITECTURE.md, rules
//! M1–M5).
//!
//! - [`config`]: the settings, under Kafka's property names, and [`ConsumerBuilder`].
//! - `membership`: the sans-I/O group membership state machines (KIP-848 and classic).
//! - `assignor`: the classic protocol's client-side assignor and its wire format.
//! - `fetcher`: positions, ListOffsets and Fetch requests and what their answers change
//!   (sans-I/O).
//! - `records`: turning fetched batches into records (the read_committed filter).
//! - `offsets`: OffsetFetch / OffsetCommit requests and answers (sans-I/O).
//! - `calls`: each request sent with a deadline.
//! - `stream`: the consumer as a `Stream` of records or of events.
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
pub(crate) mod fetch_session;
pub(crate) mod fetcher;
pub mod hooks;
pub(crate) mod membership;
pub mod metrics;
pub(crate) mod offsets;
pub(crate) mod records;
mod state;
pub(crate) mod sticky_assignor;
mod stream;
mod telemetry_samples;
mod vocabulary;

use std::time::Duration;

use futures_core::Stream;

pub use crate::types::IsolationLevel;
pub use config::{ConsumerBuilder, ConsumerConfig};
pub use vocabulary::{AssignmentStrategy, GroupProtocol, OffsetReset};

use crate::error::{Error, Result};
use crate::types::TopicPartition;
use crate::types::{ConsumerGroupMetadata, OffsetToCommit};
use driver::Driver;
pub use driver::GenerationHold;
use fetcher::{EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};
use membership::MembershipEvent;
use membership::MembershipOrRecords;
pub use records::ConsumerRecord;
use stream::PollStream;

/// What [`Consumer::poll`] hands over: records, or a change of the partitions this member owns.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// A Kafka consumer, reading committed records by default: a member of a consumer group
/// ([`Consumer::subscribe`], [`Consumer::subscribe_pattern`]) or of none, with partitions
/// assigned by hand ([`Consumer::assign`]).
///
/// Not `Clone`: one task owns it and takes its records with [`Consumer::poll`] (or as a
/// `Stream`: [`Consumer::records`], [`Consumer::events`]). A background task (spawned on the
/// runtime that built it) heartbeats and fetches meanwhile. Dropping the consumer without
/// [`Consumer::close`] stops both at once; the member then expires after the session timeout
/// and its partitions move.
///
/// An at-least-once reader that commits what it processed, and drops what it can no longer
/// commit when partitions are revoked or lost:
///
/// ```no_run
/// use exactly::{Consumer, ConsumerEvent, OffsetReset, PendingOffsets};
///
/// # async fn run() -> exactly::Result<()> {
/// let mut consumer = Consumer::builder()
///     .bootstrap("127.0.0.1:9092")
///     .group_id("billing")
///     .auto_offset_reset(OffsetReset::Earliest)
///     .build()
///     .await?;
/// consumer.subscribe(["orders"])?;
/// let mut processed = PendingOffsets::new();
/// for _ in 0..1_000 {
///     match consumer.poll().await? {
///         ConsumerEvent::Records(records) => {
///             for record in records {
///                 println!("{}-{}@{}", record.topic, record.partition, record.offset);
///                 processed.processed(record.topic_partition(), record.offset);
///             }
///             consumer.commit(&processed.take()).await?;
///         }
///         // Commit what is done before the partitions go; nothing of a lost one.
///         ConsumerEvent::Revoked(_) => consumer.commit(&processed.take()).await?,
///         ConsumerEvent::Lost(partitions) => processed.revoke(&partitions),
///         ConsumerEvent::Assigned(_) => {}
///         _ => {}
///     }
/// }
/// consumer.close().await?; // leaves the group, so the partitions move at once
/// # Ok(()) }
/// ```
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
    /// Milliseconds on the consumer's monotonic clock (what the copy loop measures its commit
    /// interval on).
    pub(crate) fn clock_now(&self) -> crate::types::Millis {
        self.driver.now()
    }

    /// The `client_id` and (with a group) `group` labels of the consumer's metrics.
    pub(crate) fn metric_labels(&self) -> (String, Option<String>) {
        self.driver.metric_labels()
    }

    /// A builder with the default configuration.
    pub fn builder() -> ConsumerBuilder {
        ConsumerBuilder::new()
    }

    /// A consumer from `(property, value)` pairs under Kafka's names (`bootstrap.servers`,
    /// `group.id`, `isolation.level`, ...). A shared `client.properties` the producer reads
    /// works as it is: what only the producer, the JVM or Schema Registry use (`acks`,
    /// `client.dns.lookup`, `schema.registry.*`, `basic.auth.*`, ...) is ignored.
    ///
    /// Cancel safety: dropping the future drops the connections made so far.
    pub async fn from_properties<I, K, V>(props: I) -> Result<Consumer>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        Self::with_config(ConsumerConfig::from_properties(props)?, None).await
    }

    /// A consumer with a validated configuration: connects to the bootstrap servers and picks
    /// the group protocol from the broker's API versions.
    pub(crate) async fn with_config(
        config: ConsumerConfig,
        hooks: Option<hooks::HooksHandle>,
    ) -> Result<Consumer> {
        let request_timeout = config.request_timeout();
        Ok(Consumer {
            driver: Driver::connect(config, hooks).await?,
            request_timeout,
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

    /// The id the cluster assigned this consumer for its telemetry (KIP-714, Java's
    /// `clientInstanceId`), once a broker answered the first GetTelemetrySubscriptions; `None`
    /// before that, with `enable.metrics.push=false`, or against a broker without KIP-714.
    pub fn client_instance_id(&self) -> Option<crate::telemetry::ClientInstanceId> {
        self.driver.client_instance_id().get()
    }

    /// Whether the group uses the KIP-848 protocol (else the classic one).
    pub fn uses_consumer_protocol(&self) -> bool {
        self.driver.uses_kip848()
    }

    /// Subscribes to `topics` (replacing any earlier subscription); the group assigns their
    /// partitions from the next `poll`. Needs a `group.id` (an [`Error::Config`] otherwise)
    /// and no manual assignment in force ([`Consumer::unassign`] first).
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
        self.driver.subscribe(topics)
    }

    /// Subscribes to every topic whose name matches `regex` (replacing any earlier
    /// subscription), and to those created later. Under KIP-848 the coordinator resolves it
    /// (`SubscribedTopicRegex`, Java's RE2J syntax); under the classic protocol the consumer
    /// matches it against every topic of the cluster (internal ones excepted), looked up
    /// again every `metadata.max.age.ms`. The regex must match the whole name
    /// (`orders-.*`, not `orders-`): both ends are anchored here as the broker anchors them.
    /// Needs a `group.id`.
    #[cfg(feature = "pattern-subscription")]
    pub fn subscribe_pattern(&mut self, regex: &str) -> Result<()> {
        let anchored = regex::Regex::new(&format!("^(?:{regex})$")).map_err(|e| Error::Config {
            setting: "subscribe_pattern".into(),
            reason: format!("invalid regular expression {regex:?}: {e}"),
        })?;
        self.driver.subscribe_pattern(state::TopicPattern {
            regex: regex.to_owned(),
            matcher: anchored,
        })
    }

    /// Assigns `partitions` by hand, without a group (replacing an earlier manual
    /// assignment): no membership request is ever sent, and no rebalance event comes. Each
    /// new partition starts from its committed offset when there is a `group.id`, else from
    /// `auto.offset.reset`; [`Consumer::seek`] moves it. Offsets may be committed with a
    /// `group.id` ([`Consumer::commit`], generation -1: a group without members). An error if
    /// the consumer is subscribed.
    pub fn assign(&mut self, partitions: &[TopicPartition]) -> Result<()> {
        self.driver.assign(partitions)
    }

    /// Ends a manual assignment: nothing more is fetched or delivered (what was buffered is
    /// dropped). An error if the consumer is subscribed instead.
    pub fn unassign(&mut self) -> Result<()> {
        self.driver.unassign()
    }

    /// Pauses owned partitions: they are not fetched and `poll` delivers nothing of them
    /// (records already fetched are kept, and delivered after [`Consumer::resume`]); their
    /// positions do not move. Heartbeats go on, so pausing is the way to apply backpressure
    /// without leaving the group. A pause lasts while the partition is owned: revoked or lost
    /// and assigned again, it is not paused. An error (and nothing paused) if one of them is
    /// not owned.
    pub fn pause(&mut self, partitions: &[TopicPartition]) -> Result<()> {
        self.driver.set_paused(partitions, true)
    }

    /// Resumes paused partitions (see [`Consumer::pause`]).
    pub fn resume(&mut self, partitions: &[TopicPartition]) -> Result<()> {
        self.driver.set_paused(partitions, false)
    }

    /// The paused partitions.
    pub fn paused(&self) -> Vec<TopicPartition> {
        self.driver.paused()
    }

    /// Moves owned partitions to the start of their logs (looked up with ListOffsets before
    /// the next fetch, as Java's lazy `seekToBeginning`).
    pub fn seek_to_beginning(&mut self, partitions: &[TopicPartition]) -> Result<()> {
        self.driver.seek_to(partitions, EARLIEST_TIMESTAMP)
    }

    /// Moves owned partitions to the end of their logs: the last stable offset under
    /// read_committed, the high watermark under read_uncommitted.
    pub fn seek_to_end(&mut self, partitions: &[TopicPartition]) -> Result<()> {
        self.driver.seek_to(partitions, LATEST_TIMESTAMP)
    }

    /// For each `(partition, timestamp in ms)`, the earliest offset whose record timestamp is
    /// at or after it, with that timestamp (`None`: no such record), asked of each
    /// partition's leader (ListOffsets, KIP-79) within `request.timeout.ms`. Any partition,
    /// owned or not; [`Consumer::seek`] to the offset to read from there.
    ///
    /// Cancel safety: dropping the future loses nothing.
    pub async fn offsets_for_times(
        &self,
        queries: &[(TopicPartition, i64)],
    ) -> Result<Vec<(TopicPartition, Option<(i64, i64)>)>> {
        self.driver.offsets_for_times(queries).await
    }

    /// The records, one by one, as a `Stream` (each item a `poll` of its own, so every rule
    /// of [`Consumer::poll`] holds); rebalance events are applied and not shown, so it suits
    /// auto-commit and manual assignment. A transactional pipeline, which must act on
    /// `Revoked`, uses [`Consumer::events`].
    ///
    /// ```no_run
    /// # async fn run(mut consumer: exactly::Consumer) -> exactly::Result<()> {
    /// use std::future::poll_fn;
    /// use std::pin::pin;
    /// use futures_core::Stream;
    ///
    /// let mut records = pin!(consumer.records());
    /// while let Some(record) = poll_fn(|cx| records.as_mut().poll_next(cx)).await {
    ///     let record = record?;
    ///     println!("{}-{}@{}", record.topic, record.partition, record.offset);
    /// }
    /// # Ok(()) }
    /// ```
    /// (With `futures` or `tokio-stream`: `while let Some(record) = records.next().await`.)
    ///
    /// Cancel safety: dropping the stream, or a future awaiting its next item, loses no
    /// record: an item is taken from the consumer in the step that returns it.
    pub fn records(&mut self) -> impl Stream<Item = Result<ConsumerRecord>> + '_ {
        PollStream::new(&mut self.driver, 1, |found| match found {
            MembershipOrRecords::Records(mut records) => records.pop(),
            MembershipOrRecords::Membership(_) => None,
        })
    }

    /// What [`Consumer::poll`] returns, as a `Stream` (each item one `poll`).
    ///
    /// Cancel safety: as [`Consumer::records`].
    pub fn events(&mut self) -> impl Stream<Item = Result<ConsumerEvent>> + '_ {
        PollStream::new(&mut self.driver, usize::MAX, |found| Some(found.into()))
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
    /// With `enable.auto.commit`, a poll that gives revoked partitions up first commits the
    /// positions (bounded by `request.timeout.ms`).
    ///
    /// Cancel safety: dropping the future loses nothing (records and events are taken in the
    /// step that returns them).
    pub async fn poll(&mut self) -> Result<ConsumerEvent> {
        loop {
            if let Some(event) = self.driver.poll(None, usize::MAX).await? {
                return Ok(event.into());
            }
        }
    }

    /// Same as [`Consumer::poll`], returning `Ok(None)` when nothing arrived within `timeout`.
    ///
    /// Cancel safety: as [`Consumer::poll`].
    pub async fn poll_timeout(&mut self, timeout: Duration) -> Result<Option<ConsumerEvent>> {
        let deadline = std::time::Instant::now() + timeout;
        Ok(self
            .driver
            .poll(Some(deadline), usize::MAX)
            .await?
            .map(Into::into))
    }

    /// The span to enter while processing `record`: `process {topic}`, the consumer span of
    /// the OpenTelemetry messaging semantic conventions (v1.37.0) for Kafka, with the topic,
    /// partition, offset, group and client id. INFO, so a subscriber that wants it gets it
    /// (and one that does not pays nothing). Its parent is the current span, or, with
    /// feature `opentelemetry` and `propagate_trace_context` on, the producer's span whose
    /// W3C context the record's `traceparent` / `tracestate` headers carry.
    ///
    /// ```no_run
    /// # async fn run(consumer: &mut exactly::Consumer) -> exactly::Result<()> {
    /// if let exactly::ConsumerEvent::Records(records) = consumer.poll().await? {
    ///     for record in &records {
    ///         let _processing = consumer.process_span(record).entered();
    ///         // ... the application's work, inside the span ...
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn process_span(&self, record: &ConsumerRecord) -> tracing::Span {
        self.driver.process_span(record)
    }

    /// Runs the application's `work` on `record` inside its
    /// [`process_span`](Self::process_span) and times it as the OpenTelemetry messaging
    /// conventions' `messaging.process.duration` (seconds, labelled with the client id and
    /// the group; see the README's Metrics section). Returns what `work` returned; a `work`
    /// dropped before it finished is not timed.
    ///
    /// ```no_run
    /// # async fn run(consumer: &mut exactly::Consumer) -> exactly::Result<()> {
    /// if let exactly::ConsumerEvent::Records(records) = consumer.poll().await? {
    ///     for record in &records {
    ///         let bytes = consumer
    ///             .process(record, async { record.value.as_ref().map_or(0, |v| v.len()) })
    ///             .await;
    ///         println!("{bytes} bytes");
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn process<T>(
        &self,
        record: &ConsumerRecord,
        work: impl std::future::Future<Output = T>,
    ) -> T {
        use tracing::Instrument;
        let started = std::time::Instant::now();
        let output = work.instrument(self.process_span(record)).await;
        self.driver.processed(started.elapsed());
        output
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

    /// Moves an owned partition's position: `poll` delivers from `offset` on (a paused
    /// partition once it resumes).
    pub fn seek(&mut self, partition: &TopicPartition, offset: i64) -> Result<()> {
        self.driver.seek(partition, offset)
    }

    /// A snapshot of the consumer's metrics under the Java consumer's names
    /// (records-consumed-total, fetch-latency-avg, records-lag-max, ...), with each owned
    /// partition's position and lag as of its latest fetch answer. With the `metrics` feature
    /// the consumer also publishes them through the `metrics` facade as they happen: see the
    /// README's "Operating it".
    pub fn metrics(&self) -> metrics::ConsumerMetrics {
        self.driver.metrics()
    }

    /// Whether the consumer has read all it can for now: every assigned partition it reads
    /// (not paused) is at the end of its log as the latest fetch answer gave it (the last
    /// stable offset under `read_committed`), and no record is waiting to be polled. False
    /// before the first answer of each partition.
    pub fn caught_up(&self) -> bool {
        self.driver.caught_up()
    }

    /// Commits offsets outside transactions (OffsetCommit; each offset is the next to consume),
    /// with this member's generation / member epoch so a stale member is refused (a manual
    /// assignment commits with generation -1). Needs a `group.id` (an [`Error::Config`]
    /// otherwise). A refusal
    /// that says the member lost its partitions (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
    /// ILLEGAL_GENERATION) drops their buffered records, and the next `poll` returns `Lost`.
    ///
    /// Cancel safety: dropping the future may leave the commit applied or not.
    pub async fn commit(&mut self, offsets: &[OffsetToCommit]) -> Result<()> {
        self.driver.commit(offsets).await
    }

    /// The committed offsets of `partitions` (OffsetFetch with require_stable: waits out
    /// pending transactional commits); `None` for a partition without one. Needs a
    /// `group.id`.
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
    /// holds). With `enable.auto.commit`, the positions are committed first.
    ///
    /// Cancel safety: dropping the future stops the consumer as dropping it does (the member
    /// may not have left; it then expires after the session timeout).
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
