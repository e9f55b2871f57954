//! The producer client: the user-facing [`Producer`], [`Record`] and the delivery future each
//! `send` returns, over its configuration, partitioner, the tokio task that drives the
//! sans-I/O engine (`driver`), the state the handle and the task share, and its metrics.

pub mod config;
pub(crate) mod driver;
pub mod hooks;
pub mod metrics;
pub mod partitioner;
pub(crate) mod seal_pool;
pub(crate) mod shared;
mod telemetry_samples;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use crate::engine::accumulator::{Accumulator, AccumulatorConfig, AppendError};
pub(crate) use crate::engine::completion::BatchCompletion;
use crate::engine::transaction::TxnCall;
// The copy loop reads where a producer's transaction stands through these (rule C1 of
// ARCHITECTURE.md), and its test double resolves delivery futures as the engine does.
#[cfg(test)]
pub(crate) use crate::engine::completion::BatchAck;
pub(crate) use crate::engine::transaction::{TxnLedger, TxnState};
use crate::engine::{Counters, Engine, EngineConfig, TransactionConfig};
use crate::error::{Error, Result};
use crate::net::connection::LinkSecurity;
use crate::net::metadata::{ClusterMetadata, TopicMetadata};
use crate::observe::{self, ClientKind};
use crate::producer::config::{ProducerBuilder, ProducerConfig};
use crate::producer::driver::{Command, Driver};
use crate::producer::hooks::{HooksObserver, ProducerHooks};
use crate::producer::metrics::ProducerMetrics;
use crate::producer::partitioner::partition_for_key;
use crate::producer::seal_pool::SealPool;
use crate::producer::shared::{Shared, TopicRoute};
use crate::protocol::error_code::ErrorCode;
use crate::protocol::record_batch::Header;
use crate::telemetry::{ClientInstanceId, InstanceIdCell};
use crate::types::TopicPartition;
use crate::types::{ConsumerGroupMetadata, OffsetToCommit};

/// A record to send: a topic, an optional key and value, headers, and optionally an explicit
/// partition and timestamp.
#[derive(Debug, Clone)]
pub struct Record {
    pub(crate) topic: Arc<str>,
    pub(crate) key: Option<Bytes>,
    pub(crate) value: Option<Bytes>,
    pub(crate) headers: Vec<Header>,
    pub(crate) partition: Option<i32>,
    pub(crate) timestamp: Option<i64>,
}

impl Record {
    /// A record for `topic`, with no key, no value and no headers yet.
    ///
    /// A loop sending to one topic does not allocate its name per record: the name of the
    /// last record made on this thread is shared when the next one names the same topic.
    pub fn to(topic: impl AsRef<str>) -> Self {
        Self {
            topic: shared_topic_name(topic.as_ref()),
            key: None,
            value: None,
            headers: Vec::new(),
            partition: None,
            timestamp: None,
        }
    }

    /// Sets the key. Keyed records go to the partition Java's producer would pick (murmur2).
    pub fn key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets the value.
    pub fn value(mut self, value: impl Into<Bytes>) -> Self {
        self.value = Some(value.into());
        self
    }

    /// Adds a header (duplicate keys are allowed, as in Kafka).
    pub fn header(mut self, key: impl Into<String>, value: impl Into<Bytes>) -> Self {
        self.headers.push(Header {
            key: key.into(),
            value: Some(value.into()),
        });
        self
    }

    /// Adds a header to a record already made (for [`ProducerHooks::on_send`]).
    pub fn add_header(&mut self, key: impl Into<String>, value: impl Into<Bytes>) {
        self.headers.push(Header {
            key: key.into(),
            value: Some(value.into()),
        });
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The headers, in order.
    pub fn headers(&self) -> &[Header] {
        &self.headers
    }

    /// Sends to this partition instead of choosing one.
    pub fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Sets the record's CreateTime in milliseconds since the epoch (default: now).
    pub fn timestamp(mut self, timestamp_ms: i64) -> Self {
        self.timestamp = Some(timestamp_ms);
        self
    }
}

/// A record's `create {topic}` span, per the OpenTelemetry messaging semantic conventions
/// v1.37.0 for Kafka with batching: a producer span (`otel.kind`), operation type and name
/// `create`, the topic and partition (`messaging.destination.partition.id` is a string),
/// the client id, and `messaging.kafka.message.tombstone` for a record without a value. The
/// key is left out: the conventions want it only when it has a canonical string form, which
/// bytes lack. The Produce request's `send` span links to it; its batch keeps it open until
/// the delivery resolves and it records `messaging.kafka.offset` or `error.type`
/// (`crate::engine::spans`).
///
/// Per record, so TRACE: free unless a subscriber asks for it. Entered only around the
/// append (an entered span must not be held across an await).
fn create_span(tp: &TopicPartition, record: &Record, client_id: &str) -> tracing::Span {
    let span = tracing::trace_span!(
        "create",
        otel.name = tracing::field::Empty,
        otel.kind = "producer",
        messaging.system = "kafka",
        messaging.operation.type = "create",
        messaging.operation.name = "create",
        messaging.destination.name = %tp.topic,
        messaging.destination.partition.id = %tp.partition,
        messaging.client.id = client_id,
        messaging.kafka.message.tombstone = tracing::field::Empty,
        messaging.kafka.offset = tracing::field::Empty,
        error.type = tracing::field::Empty,
    );
    if !span.is_disabled() {
        // `create {topic}`: a tracing span's own name is fixed at its call site.
        span.record("otel.name", format!("create {}", tp.topic));
        if record.value.is_none() {
            span.record("messaging.kafka.message.tombstone", true);
        }
    }
    span
}

/// Where a record landed (rule O1: the offset is exact).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordMetadata {
    /// The topic.
    pub topic: Arc<str>,
    /// The partition.
    pub partition: i32,
    /// The record's offset: its batch's base offset plus its index. -1 only when the broker
    /// reported the batch as a duplicate without offsets (DUPLICATE_SEQUENCE_NUMBER).
    pub offset: i64,
    /// The record's timestamp: CreateTime, or the broker's LogAppendTime for such topics.
    pub timestamp: i64,
}

/// Resolves once the broker confirmed the record, or with an error saying whether it may
/// still have been written ([`Error::is_indeterminate`]). Every send resolves exactly once
/// (rule P6).
#[derive(Debug)]
#[must_use = "a delivery future tells whether the record was written"]
pub struct DeliveryFuture {
    /// The record's batch, which also knows the partition.
    completion: Arc<BatchCompletion>,
    index: i32,
    timestamp: i64,
}

impl DeliveryFuture {
    /// The future of the record at `index` of the batch `completion` resolves, sent with
    /// `timestamp` (its CreateTime).
    pub(crate) fn new(completion: Arc<BatchCompletion>, index: i32, timestamp: i64) -> Self {
        Self {
            completion,
            index,
            timestamp,
        }
    }
}

impl Future for DeliveryFuture {
    type Output = Result<RecordMetadata>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        // The batch holding the record may be a part of the one it was appended to (a batch
        // split after the broker found it too large), where it has another index.
        this.completion
            .poll_record(this.index, cx)
            .map(|(outcome, index)| {
                outcome.map(|ack| RecordMetadata {
                    topic: Arc::clone(&this.completion.partition().topic),
                    partition: this.completion.partition().partition,
                    offset: if ack.base_offset < 0 {
                        -1
                    } else {
                        ack.base_offset + i64::from(index)
                    },
                    timestamp: if ack.log_append_time >= 0 {
                        ack.log_append_time
                    } else {
                        this.timestamp
                    },
                })
            })
    }
}

struct ProducerInner {
    shared: Arc<Shared>,
    commands: mpsc::UnboundedSender<Command>,
    closed: AtomicBool,
    /// The application's hooks, if it set any (checked once per record).
    hooks: Option<Arc<dyn ProducerHooks>>,
    client_instance_id: InstanceIdCell,
    /// Seals the batches `send` fills, off the sending task when compression is on.
    seal_pool: SealPool,
}

/// An idempotent Kafka producer. Cheap to clone; all clones share one connection pool,
/// accumulator and producer id.
///
/// ```no_run
/// # async fn demo() -> exactly::Result<()> {
/// use std::time::Duration;
/// use exactly::{Producer, Record};
///
/// let producer = Producer::builder()
///     .bootstrap("127.0.0.1:9092")
///     .linger(Duration::from_millis(5))
///     .build()
///     .await?;
/// let ack = producer.send(Record::to("events").key("k").value("v")).await?;
/// let meta = ack.await?; // RecordMetadata { topic, partition, offset, timestamp }
/// println!("written at {}-{}@{}", meta.topic, meta.partition, meta.offset);
/// producer.close().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Producer {
    inner: Arc<ProducerInner>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("bootstrap", &self.inner.shared.config.bootstrap_servers)
            .finish_non_exhaustive()
    }
}

impl ProducerBuilder {
    /// Validates the configuration and starts the producer's driver task on the current
    /// tokio runtime. Connections are made on demand; the producer id is fetched before the
    /// first batch goes out.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] naming the setting that is unknown, malformed or contradicts
    /// another, or that names unreadable key material; also when called outside a tokio
    /// runtime.
    pub async fn build(self) -> Result<Producer> {
        let hooks = self.hooks.clone();
        Producer::from_config(self.config()?, hooks)
    }
}

impl Producer {
    /// A builder with typed setters (and `property(k, v)` for Kafka property names).
    pub fn builder() -> ProducerBuilder {
        ProducerBuilder::new()
    }

    /// A producer from Kafka-style properties (`bootstrap.servers`, `linger.ms`, ...).
    ///
    /// # Errors
    ///
    /// As [`ProducerBuilder::build`].
    pub async fn from_properties<I, K, V>(properties: I) -> Result<Producer>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let config = ProducerConfig::from_properties(properties)?;
        config.validate()?;
        Producer::from_config(config, None)
    }

    fn from_config(mut config: ProducerConfig, hooks: Option<HooksObserver>) -> Result<Producer> {
        if config.client_id.is_empty() {
            config.client_id = observe::default_client_id(ClientKind::Producer).to_string();
        }
        let accumulator = Accumulator::new(AccumulatorConfig {
            batch_size: config.batch_size,
            linger_ms: config.linger_ms,
            buffer_memory: config.buffer_memory,
            max_request_size: config.max_request_size,
            transactional: config.transactional_id.is_some(),
            compression: config.compression.compression(),
        });
        let accumulator = match &hooks {
            Some(hooks) => accumulator.with_observer(Arc::new(hooks.clone())),
            None => accumulator,
        };
        let mut engine = Engine::new(
            EngineConfig {
                max_in_flight: config.max_in_flight_requests_per_connection,
                retries: config.retries,
                retry_backoff_ms: config.retry_backoff_ms,
                retry_backoff_max_ms: config.retry_backoff_max_ms,
                delivery_timeout_ms: config.delivery_timeout_ms,
                request_timeout_ms: config.request_timeout_ms,
                produce_request_max_bytes: config.produce_request_max_bytes,
                metadata_refresh_backoff_ms: config.retry_backoff_ms,
                idempotent: config.enable_idempotence,
                transaction: config.transactional_id.clone().map(|transactional_id| {
                    TransactionConfig {
                        transactional_id,
                        timeout_ms: i32::try_from(config.transaction_timeout_ms)
                            .unwrap_or(i32::MAX),
                        call_timeout_ms: config.max_block_ms,
                    }
                }),
            },
            random_seed(),
        );
        engine.observe_as(&config.client_id);
        let shared = Arc::new(Shared::new(config, engine, accumulator, random_seed()));
        let (commands_tx, commands_rx) = mpsc::unbounded_channel();
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| Error::Config {
            setting: "runtime".into(),
            reason: "Producer::build must be called inside a tokio runtime".into(),
        })?;
        let security = LinkSecurity::from_config(&shared.config.security)?;
        let seal_pool = {
            let shared = Arc::clone(&shared);
            let workers = SealPool::workers_for(shared.config.compression.compression());
            SealPool::start(workers, move |sealed| shared.put_sealed(sealed))
        };
        let driver = Driver::new(Arc::clone(&shared), commands_rx, security);
        let client_instance_id = driver.client_instance_id();
        runtime.spawn(driver.run());
        Ok(Producer {
            inner: Arc::new(ProducerInner {
                shared,
                client_instance_id,
                commands: commands_tx,
                closed: AtomicBool::new(false),
                hooks: hooks.map(|h| h.0),
                seal_pool,
            }),
        })
    }

    /// Hands a record over. Waits only for metadata of a topic seen for the first time and
    /// for buffer space (backpressure), each at most `max.block.ms`; then returns the future
    /// of the record's delivery. Bad input fails here, before anything is sent, consuming
    /// no sequence number.
    ///
    /// `send` does not wait for the broker, so a loop can call it back to back:
    /// `futs.push(producer.send(r).await?)`. It takes no lock the driver task needs for
    /// long (only the record's partition's), and it yields to the runtime once the calling
    /// task has used up its tokio budget (every 128 or so calls), so the driver task keeps
    /// the pipeline full even on a `current_thread` runtime where the loop never awaits
    /// anything else.
    ///
    /// # Errors
    ///
    /// Nothing was written when `send` fails: [`Error::InvalidTopic`],
    /// [`Error::RecordTooLarge`], an out-of-range partition ([`Error::Config`]),
    /// [`Error::UnknownTopic`] (brokers answered, none knows the topic),
    /// [`Error::NoBrokerAnswered`] (no broker answered at all) or a full buffer
    /// ([`Error::Timeout`]) after `max.block.ms`,
    /// [`Error::InvalidState`] outside a transaction of a transactional producer,
    /// [`Error::Closed`] after `close`, or the fatal error that ended the producer.
    ///
    /// Cancel safety: dropping the future before it returns hands nothing over.
    pub async fn send(&self, mut record: Record) -> Result<DeliveryFuture> {
        // A caller that never yields otherwise (the loop users write first, with buffer
        // space to spare) yields here once its task's tokio budget is spent, so the driver
        // runs even on a `current_thread` runtime and the pipeline stays full.
        // Before anything is handed over, so dropping the future here loses nothing.
        tokio::task::coop::consume_budget().await;
        // A fatal error is checked with the transaction state by the append below (the
        // engine publishes both to the accumulator's send gate).
        self.check_open()?;
        if let Some(hooks) = &self.inner.hooks {
            hooks.on_send(&mut record);
        }
        let shared = &self.inner.shared;
        // `max.block.ms` bounds the slow paths (unknown topic, full buffer); the clock is read
        // only when one is taken (the per-record path reads it as little as it can).
        let max_block = Duration::from_millis(shared.config.max_block_ms);
        let mut deadline_at = None;
        let mut deadline =
            || *deadline_at.get_or_insert_with(|| tokio::time::Instant::now() + max_block);
        let route = self.topic_route(&record.topic, &mut deadline).await?;
        let partitions = route.partitions();
        let partition = match (record.partition, &record.key) {
            (Some(p), _) if (0..partitions).contains(&p) => p,
            (Some(p), _) => {
                return Err(Error::Config {
                    setting: "partition".into(),
                    reason: format!(
                        "topic {} has {partitions} partitions, {p} requested",
                        record.topic
                    ),
                });
            }
            (None, Some(key)) => partition_for_key(key, partitions),
            (None, None) => route
                .sticky
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .partition_record(
                    partitions,
                    record.value.as_ref().map_or(0, Bytes::len),
                    // Below the count: chosen by the partitioner.
                    |partition| route.slots[partition as usize].has_open_batch(),
                ),
        };
        let timestamp = record.timestamp.unwrap_or_else(now_epoch_ms);
        // In range: checked above, or chosen below the count.
        let slot = &route.slots[partition as usize];
        let span = create_span(slot.partition(), &record, &shared.config.client_id);
        #[cfg(feature = "opentelemetry")]
        if shared.config.propagate_trace_context {
            // The send span's context, or the caller's when TRACE is off for this crate
            // (the consumer's process span then hangs under the caller's span).
            let context = if span.is_disabled() {
                tracing::Span::current()
            } else {
                span.clone()
            };
            crate::trace_context::inject(&context, &mut record.headers);
        }
        // Registered only once the buffer was found full, and before the append is tried
        // again, so a release between the two is not missed (`notify_waiters` wakes only the
        // waiters already registered); the per-record path makes none.
        let mut space = None;
        // Bounded by the deadline: every wait for space ends at it.
        loop {
            let appended = {
                let _in_send = span.enter();
                // Only the partition's lock: the engine's is never taken here. A
                // transactional producer accepts records only inside a transaction (T1): the
                // append checks the engine's published answer under that lock.
                shared.acc.append_deferring_seal(
                    slot,
                    timestamp,
                    record.key.as_deref(),
                    record.value.as_deref(),
                    &record.headers,
                    &span,
                    || shared.now_ms(),
                )
            };
            match appended {
                Ok(appended) => {
                    // A batch this record filled is compressed and sealed outside the
                    // partition's lock, on an idle worker or here (no await between), then put
                    // back in its place.
                    for to_seal in appended.to_seal {
                        self.inner.seal_pool.seal(to_seal);
                    }
                    if appended.wake_engine {
                        shared.wake.notify_one();
                    }
                    return Ok(DeliveryFuture::new(
                        appended.completion,
                        appended.index,
                        timestamp,
                    ));
                }
                Err(AppendError::TooLarge { size, max, setting }) => {
                    return Err(Error::RecordTooLarge { size, max, setting });
                }
                Err(AppendError::Refused(error)) => return Err(error),
                Err(AppendError::BufferFull) => {
                    let Some(space) = space.take() else {
                        space = Some(shared.space.notified());
                        continue;
                    };
                    shared.wake.notify_one();
                    shared.buffer_exhausted.fetch_add(1, Ordering::Relaxed);
                    let waiting = tokio::time::Instant::now();
                    let waited = tokio::time::timeout_at(deadline(), space).await;
                    let ns = u64::try_from(waiting.elapsed().as_nanos()).unwrap_or(u64::MAX);
                    shared.buffer_wait_ns.fetch_add(ns, Ordering::Relaxed);
                    if waited.is_err() {
                        return Err(Error::Timeout(format!(
                            "buffer.memory ({} bytes) stayed full for max.block.ms ({} ms)",
                            shared.config.buffer_memory, shared.config.max_block_ms
                        )));
                    }
                    self.check_open()?;
                }
            }
        }
    }

    /// Where `topic`'s records go, fetching metadata when the topic is new.
    async fn topic_route(
        &self,
        topic: &Arc<str>,
        deadline: &mut impl FnMut() -> tokio::time::Instant,
    ) -> Result<Arc<TopicRoute>> {
        let shared = &self.inner.shared;
        // Bounded by the deadline: each round waits for metadata that knows the topic, and
        // fails at the deadline (a second round only if the topic went away meanwhile).
        loop {
            // The per-record path: the topic is known, no waiting machinery needed.
            if let Some(route) = shared.route(topic) {
                return Ok(route);
            }
            self.await_topic(topic, deadline).await?;
        }
    }

    /// Waits until the metadata knows `topic` with at least one partition.
    async fn await_topic(
        &self,
        topic: &Arc<str>,
        deadline: &mut impl FnMut() -> tokio::time::Instant,
    ) -> Result<()> {
        let shared = &self.inner.shared;
        // A topic the broker described is valid; a name is checked only before asking.
        validate_topic(topic)?;
        let started = tokio::time::Instant::now();
        let mut last_error = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION;
        let refused_before = matches!(
            shared
                .metadata
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .topics
                .get(topic),
            Some(TopicMetadata::Failed(_))
        );
        let ask_first = shared.want_topic(topic) || refused_before;
        let found = self
            .await_metadata(deadline(), ask_first, |metadata, answered| {
                match metadata.topics.get(topic) {
                    Some(TopicMetadata::Known { leaders }) if !leaders.is_empty() => {
                        return Some(Ok(()));
                    }
                    Some(TopicMetadata::Failed(code)) => last_error = *code,
                    _ => {}
                }
                // A refusal counts only from an answer given since this send began waiting:
                // an ACL granted after an earlier send was refused is seen by the next send,
                // not after `metadata.max.age.ms` (Java's producer likewise asks again for a
                // topic whose metadata carried an error).
                (answered
                    && (last_error == ErrorCode::INVALID_TOPIC_EXCEPTION
                        || last_error == ErrorCode::TOPIC_AUTHORIZATION_FAILED))
                    .then(|| {
                        Err(Error::Broker {
                            code: last_error,
                            message: Some(format!("topic {topic}")),
                        })
                    })
            })
            .await?;
        found.ok_or_else(|| Error::UnknownTopic {
            topic: topic.to_string(),
            waited_ms: started.elapsed().as_millis() as u64,
            last_error,
        })
    }

    /// Waits for metadata until `found` has the answer or `deadline` passes, asking the driver
    /// for a refresh every round (from the first when `ask_first`; a `send` of a topic seen for
    /// the first time has asked already). `found` also learns whether any broker answered a
    /// metadata request since the wait began.
    ///
    /// `Ok(None)` at the deadline when brokers answered (and `found` found nothing);
    /// [`Error::NoBrokerAnswered`] when none did, with each address's last failure; at once,
    /// the fatal error that ended the producer (an authentication, certificate or
    /// `security.protocol` failure is reported now, not at the deadline).
    async fn await_metadata<T>(
        &self,
        deadline: tokio::time::Instant,
        ask_first: bool,
        mut found: impl FnMut(&ClusterMetadata, bool) -> Option<Result<T>>,
    ) -> Result<Option<T>> {
        let shared = &self.inner.shared;
        let started = tokio::time::Instant::now();
        let answers_before = shared.metadata_answers().answers();
        let mut ask = ask_first;
        // Bounded by the deadline.
        loop {
            let changed = shared.metadata_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            self.check_usable()?;
            let answered = shared.metadata_answers().answers() > answers_before;
            let result = {
                let metadata = shared.metadata.read().unwrap_or_else(|e| e.into_inner());
                found(&metadata, answered)
            };
            if let Some(result) = result {
                return result.map(Some);
            }
            if ask {
                let _ = self.inner.commands.send(Command::RefreshMetadata);
            }
            ask = true;
            let retry = tokio::time::Instant::now()
                + Duration::from_millis(shared.config.retry_backoff_ms.max(50));
            if tokio::time::Instant::now() >= deadline {
                if answered {
                    return Ok(None);
                }
                return Err(shared
                    .metadata_answers()
                    .no_broker_answered(started.elapsed()));
            }
            let _ = tokio::time::timeout_at(retry.min(deadline), changed).await;
        }
    }

    /// Checks that the cluster can be used: connects, authenticates and fetches metadata
    /// once, waiting at most `timeout`. For a service's start-up or readiness probe: `build`
    /// connects to nothing, and the first `send` would otherwise be the first to find that
    /// no broker answers or that the credentials are wrong.
    ///
    /// # Errors
    ///
    /// [`Error::NoBrokerAnswered`] when no broker answered within `timeout`, naming each
    /// address asked with its last failure (refused, reset, a TLS failure, a timeout); at
    /// once, the fatal error when authentication or TLS fails or `security.protocol` does
    /// not match the listener; [`Error::Closed`] after `close`.
    ///
    /// Cancel safety: dropping the future stops the waiting only.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        // Brokers that answered at the deadline's edge answered: ready all the same.
        self.await_metadata(deadline, true, |_, answered| answered.then_some(Ok(())))
            .await
            .map(|_| ())
    }

    /// Waits until every record handed to `send` so far is resolved.
    ///
    /// Cancel safety: dropping the future stops the waiting, not the delivery; records go on
    /// as if `flush` had not been called.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] when the producer was closed. Records that failed report it through
    /// their own futures, not here.
    pub async fn flush(&self) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        self.inner
            .commands
            .send(Command::Flush(tx))
            .map_err(|_| Error::Closed)?;
        self.inner.shared.wake.notify_one();
        rx.await.map_err(|_| Error::Closed)
    }

    /// [`Producer::flush`] bounded by `timeout`: an [`Error::Timeout`] if records are still
    /// unresolved then. They go on (use [`Producer::purge`] or
    /// [`Producer::close_with_timeout`] to cut them off).
    ///
    /// # Errors
    ///
    /// As [`Producer::flush`], and [`Error::Timeout`] at the bound.
    pub async fn flush_with_timeout(&self, timeout: Duration) -> Result<()> {
        tokio::time::timeout(timeout, self.flush())
            .await
            .map_err(|_| {
                Error::Timeout(format!("flush: records still unresolved after {timeout:?}"))
            })?
    }

    /// Fails every record that has not been put on the wire yet with [`Error::Purged`]
    /// (certainly not written); records already sent go on to their outcome. Returns how
    /// many records were purged. In a transaction the purged records make it abortable.
    pub fn purge(&self) -> u64 {
        let shared = &self.inner.shared;
        let purged = { shared.lock_engine().purge(&shared.acc) };
        // Their memory went back to the buffer.
        shared.space.notify_waiters();
        purged
    }

    /// Stops accepting records, delivers (or fails) every record already handed over, and
    /// stops the driver. Every delivery future resolves before this returns; that takes at
    /// most `delivery.timeout.ms` (plus a request timeout). Use
    /// [`Producer::close_with_timeout`] to fit a shutdown into a shorter grace period.
    ///
    /// Cancel safety: dropping the future leaves the producer closed and the driver
    /// delivering what was handed over.
    ///
    /// # Errors
    ///
    /// None today; the `Result` leaves room for a close that reports what it could not
    /// deliver.
    pub async fn close(&self) -> Result<()> {
        self.inner.closed.store(true, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        if self.inner.commands.send(Command::Close(tx)).is_err() {
            return Ok(());
        }
        self.inner.shared.wake.notify_one();
        let _ = rx.await;
        Ok(())
    }

    /// [`Producer::close`] within `timeout`: what is not resolved by then is cut off and
    /// resolved at once, as not written ([`Error::Closed`]) if it never went out, or as
    /// indeterminate if it went out unconfirmed (P6), and an [`Error::Timeout`] says so.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] when records had to be cut off.
    ///
    /// Cancel safety: as [`Producer::close`].
    pub async fn close_with_timeout(&self, timeout: Duration) -> Result<()> {
        if tokio::time::timeout(timeout, self.close()).await.is_ok() {
            return Ok(());
        }
        let shared = &self.inner.shared;
        let cut_off = {
            let mut engine = shared.lock_engine();
            let failed = |c: &Counters| c.records_failed + c.records_indeterminate;
            let before = failed(engine.counters());
            engine.abandon(Error::Closed, &shared.acc);
            failed(engine.counters()) - before
        };
        shared.space.notify_waiters();
        shared.wake.notify_one();
        Err(Error::Timeout(format!(
            "close cut off after {timeout:?}: {cut_off} records were failed (not written, or \
             indeterminate if they were sent)"
        )))
    }

    /// A snapshot of the producer's metrics under Kafka's names (record-send-total,
    /// request-latency-avg, buffer-available-bytes, ...), with per-broker in-flight requests
    /// and connection state. Delivery figures move only on broker-confirmed outcomes (P8).
    /// With the `metrics` feature the producer also publishes its figures through the
    /// `metrics` facade: see the README's "Operating it" for the names, labels and types.
    pub fn metrics(&self) -> ProducerMetrics {
        self.inner.shared.metrics()
    }

    /// The id the cluster assigned this producer for its telemetry (KIP-714, Java's
    /// `clientInstanceId`), once a broker answered the first GetTelemetrySubscriptions; `None`
    /// before that, with `enable.metrics.push=false`, or against a broker without KIP-714.
    pub fn client_instance_id(&self) -> Option<ClientInstanceId> {
        self.inner.client_instance_id.get()
    }

    /// Counters that move only on broker-confirmed outcomes, and the current producer id and
    /// epoch (rule P8).
    pub fn counters(&self) -> Counters {
        self.inner.shared.lock_engine().counters().clone()
    }

    /// Fetches the producer id and epoch for the `transactional.id`, fencing any earlier
    /// producer with the same id, and completes or aborts what that producer left open.
    /// Call once, before the first transaction.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] after `max.block.ms` (call it again), a fatal error (fenced,
    /// unauthorized, a coordinator that does not support transactions), or
    /// [`Error::InvalidState`] when already initialised.
    ///
    /// Cancel safety: dropping the future abandons the call; call it again.
    pub async fn init_transactions(&self) -> Result<()> {
        self.transactional_call(TxnCall::Init).await
    }

    /// Starts a transaction: records sent from now on commit or abort together. Local: sends
    /// nothing.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidState`] outside the Ready state (including while a timed-out commit or
    /// abort waits to be called again), or the fatal error that ended the producer.
    pub fn begin_transaction(&self) -> Result<()> {
        self.check_usable()?;
        let shared = &self.inner.shared;
        let now = shared.now_ms();
        shared.lock_engine().begin_transaction(now)
    }

    /// Adds consumed offsets to the transaction, committed to `group` only if the transaction
    /// commits. The group metadata carries the member's generation, so a member that lost its
    /// partitions in a rebalance is fenced (KIP-447).
    ///
    /// # Errors
    ///
    /// An abortable error when the group coordinator fences the member (stale generation or
    /// member id), [`Error::Timeout`] after `max.block.ms`, [`Error::InvalidState`] outside a
    /// transaction, or a fatal error.
    ///
    /// Cancel safety: dropping the future abandons the call; the offsets may or may not be
    /// part of the transaction, so abort it or send them again.
    pub async fn send_offsets_to_transaction(
        &self,
        offsets: Vec<OffsetToCommit>,
        group: &ConsumerGroupMetadata,
    ) -> Result<()> {
        self.transactional_call(TxnCall::SendOffsets {
            offsets,
            group: group.clone(),
        })
        .await
    }

    /// Flushes every record of the transaction and commits it. If any record failed, the
    /// transaction cannot commit: the error says so ([`Error::is_abortable`]) and
    /// [`Producer::abort_transaction`] is the way on.
    ///
    /// # Errors
    ///
    /// An abortable error ([`Error::is_abortable`]) when a record of the transaction failed
    /// or the coordinator timed it out; [`Error::Timeout`] after `max.block.ms`, after which
    /// the commit goes on and only `commit_transaction` is valid: call it again for the real
    /// outcome (T1, T4); a fatal error when fenced.
    ///
    /// Cancel safety: dropping the future lets the commit go on, as after a timeout.
    pub async fn commit_transaction(&self) -> Result<()> {
        self.transactional_call(TxnCall::Commit).await
    }

    /// Aborts the transaction: records not yet sent fail with [`Error::TransactionAborted`],
    /// and nothing of the transaction becomes visible to read_committed readers.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] after `max.block.ms` (the abort goes on; call it again),
    /// [`Error::InvalidState`] when no transaction is open or a timed-out commit must be
    /// called again, or a fatal error (fenced, or a transaction the coordinator timed out and
    /// would not take back).
    ///
    /// Cancel safety: dropping the future lets the abort go on, as after a timeout.
    pub async fn abort_transaction(&self) -> Result<()> {
        self.transactional_call(TxnCall::Abort).await
    }

    /// The transaction state, for a transactional producer.
    pub fn transaction_state(&self) -> Option<TxnState> {
        self.inner.shared.lock_engine().transaction_state().cloned()
    }

    /// Which transaction the producer is in and how the last one ended, for a transactional
    /// producer: how the copy loop tells its own transaction's fate (rule C1).
    pub(crate) fn transaction_ledger(&self) -> Option<TxnLedger> {
        self.inner.shared.lock_engine().transaction_ledger()
    }

    async fn transactional_call(&self, call: TxnCall) -> Result<()> {
        self.check_usable()?;
        let shared = &self.inner.shared;
        let (id, waiter) = {
            let mut engine = shared.lock_engine();
            let now = shared.now_ms();
            let id = engine.start_call(call, now)?;
            (id, shared.await_call(id))
        };
        shared.wake.notify_one();
        let mut cancelled = CancelledCall {
            shared,
            id: Some(id),
        };
        let result = waiter.await.map_err(|_| Error::Closed)?;
        cancelled.id = None;
        result
    }

    fn check_usable(&self) -> Result<()> {
        if let Some(fatal) = self.inner.shared.lock_engine().fatal_error() {
            return Err(fatal.clone());
        }
        self.check_open()
    }

    fn check_open(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        Ok(())
    }
}

/// Tells the engine when the future of a transactional call is dropped before its result:
/// a commit or abort then goes on and must be called again (see each call's cancel safety).
struct CancelledCall<'a> {
    shared: &'a Shared,
    /// The call still awaited; `None` once its result arrived.
    id: Option<crate::engine::CallId>,
}

impl Drop for CancelledCall<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.shared.lock_engine().call_cancelled(id);
            self.shared.forget_call(id);
        }
    }
}

/// A seed for retry jitter and sticky partitioning (the simulation passes its own).
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

/// A record's CreateTime: now, in milliseconds since the epoch, read per record as Java's
/// producer does.
fn now_epoch_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `topic` as a shared name, reusing the last one made on this thread when it is the same:
/// the per-record allocation (and free) of the name was one of the send path's top costs
/// (in a profile of the send path), and most loops send to one topic.
fn shared_topic_name(topic: &str) -> Arc<str> {
    thread_local! {
        static LAST: std::cell::RefCell<Option<Arc<str>>> = const { std::cell::RefCell::new(None) };
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        match &*last {
            Some(name) if **name == *topic => Arc::clone(name),
            _ => {
                let name: Arc<str> = Arc::from(topic);
                *last = Some(Arc::clone(&name));
                name
            }
        }
    })
}

/// Kafka's topic name rules (`org.apache.kafka.common.internals.Topic.validate`).
pub(crate) fn validate_topic(topic: &str) -> Result<()> {
    let reason = if topic.is_empty() {
        Some("the name is empty")
    } else if topic == "." || topic == ".." {
        Some("'.' and '..' are not allowed")
    } else if topic.len() > 249 {
        Some("the name is longer than 249 characters")
    } else if !topic
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        Some("only ASCII letters, digits, '.', '_' and '-' are allowed")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::InvalidTopic {
            topic: topic.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
