//! The consumer's metrics: a snapshot ([`crate::Consumer::metrics`]) under the Java consumer's
//! names, and the same figures observed through the `metrics` facade as they happen (see
//! `crate::observe`). Like the producer's, they move only on what the broker answered (rule
//! P8): lag from a fetch answer's high watermark, latencies of answered requests. The
//! OpenTelemetry conventions' series (`crate::observe::semconv`) are observed beside them:
//! `messaging.client.consumed.messages` per partition, and
//! `messaging.client.operation.duration` of `poll` (a Fetch round trip, per broker with its
//! `server.address`) and of `commit`.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use super::fetch_session::FetchSessionCounts;
use super::fetcher::PartitionLag;
use crate::observe::semconv::{self, Operation};
use crate::observe::{self, Counter, Gauge, Histogram, Labels, Summary};
use crate::types::{BrokerId, TopicPartition};

/// Milliseconds since `started`.
pub(crate) fn elapsed_ms(started: std::time::Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// A snapshot of the consumer's metrics ([`crate::Consumer::metrics`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ConsumerMetrics {
    /// `records-consumed-total`: records `poll` handed out.
    pub records_consumed_total: u64,
    /// `bytes-consumed-total`: bytes of record batches fetch answers carried.
    pub bytes_consumed_total: u64,
    /// `fetch-total`: fetch requests answered.
    pub fetch_total: u64,
    /// `fetch-latency-avg`, in ms: fetch round trips the broker answered (a long poll waits
    /// up to `fetch.max.wait.ms` when there is nothing to read).
    pub fetch_latency_avg_ms: f64,
    /// `fetch-latency-max`, in ms.
    pub fetch_latency_max_ms: u64,
    /// `commit-total`: offset commits the coordinator accepted (explicit and automatic).
    pub commit_total: u64,
    /// `commit-latency-avg`, in ms.
    pub commit_latency_avg_ms: f64,
    /// `commit-latency-max`, in ms.
    pub commit_latency_max_ms: u64,
    /// `rebalance-total`: assignments this member received (a group's first one included).
    pub rebalance_total: u64,
    /// Incremental fetch sessions (KIP-227) the brokers opened for this consumer.
    pub fetch_sessions_opened_total: u64,
    /// Incremental fetches (KIP-227) answered: each named only the partitions that moved.
    pub incremental_fetch_total: u64,
    /// Fetch answers that said the session was gone or out of step
    /// (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH); a full fetch followed.
    pub fetch_session_errors_total: u64,
    /// `records-lag-max`: the largest lag of the owned partitions now.
    pub records_lag_max: i64,
    /// Per owned partition that has had a fetch answer: its position and lag.
    pub partitions: BTreeMap<TopicPartition, PartitionLag>,
}

/// The consumer's running figures, kept under its state's lock, and their facade handles.
#[derive(Debug)]
pub(crate) struct ConsumerFigures {
    records_consumed: u64,
    bytes_consumed: u64,
    fetch_latency_ms: Summary,
    commit_latency_ms: Summary,
    rebalances: u64,
    observer: ConsumerObserver,
}

impl ConsumerFigures {
    pub(crate) fn new(client_id: &str, group: Option<&str>) -> Self {
        Self {
            records_consumed: 0,
            bytes_consumed: 0,
            fetch_latency_ms: Summary::default(),
            commit_latency_ms: Summary::default(),
            rebalances: 0,
            observer: ConsumerObserver::new(client_id, group),
        }
    }

    /// A fetch answer from `broker` (at `address`, when metadata knows it) after
    /// `latency_ms`, carrying `bytes` per partition.
    pub(crate) fn fetched<'a>(
        &mut self,
        broker: BrokerId,
        address: Option<&str>,
        latency_ms: u64,
        bytes: impl Iterator<Item = (&'a TopicPartition, u64)>,
    ) {
        self.fetch_latency_ms.record(latency_ms);
        let handles = self.observer.broker(broker, address);
        handles.fetch_latency.record(latency_ms as f64);
        handles.poll_duration.record(semconv::seconds(latency_ms));
        for (tp, n) in bytes {
            self.bytes_consumed += n;
            self.observer.partition(tp).bytes_consumed.increment(n);
        }
    }

    /// Lags as of the latest fetch answers: one gauge per partition of `updated`, and
    /// `records-lag-max` over `all`.
    pub(crate) fn lags<'a>(
        &mut self,
        updated: impl Iterator<Item = (&'a TopicPartition, PartitionLag)>,
        max: i64,
    ) {
        for (tp, lag) in updated {
            self.observer.partition(tp).lag.set(lag.lag as f64);
        }
        self.observer.records_lag_max.set(max as f64);
    }

    /// `records` of `tp` handed out by a `poll`, after which its lag is `lag`.
    pub(crate) fn consumed(
        &mut self,
        tp: &TopicPartition,
        records: u64,
        lag: Option<PartitionLag>,
    ) {
        self.records_consumed += records;
        let handles = self.observer.partition(tp);
        handles.records_consumed.increment(records);
        handles.consumed_messages.increment(records);
        if let Some(lag) = lag {
            handles.lag.set(lag.lag as f64);
        }
    }

    /// `records-lag-max` over every owned partition.
    pub(crate) fn lag_max(&mut self, max: i64) {
        self.observer.records_lag_max.set(max as f64);
    }

    /// An offset commit the coordinator accepted after `latency_ms`.
    pub(crate) fn committed(&mut self, latency_ms: u64) {
        self.commit_latency_ms.record(latency_ms);
        self.observer.commit_latency.record(latency_ms as f64);
        self.observer
            .commit_duration
            .record(semconv::seconds(latency_ms));
    }

    /// An assignment received.
    pub(crate) fn rebalanced(&mut self) {
        self.rebalances += 1;
        self.observer.rebalances.increment(1);
    }

    pub(crate) fn snapshot(
        &self,
        partitions: BTreeMap<TopicPartition, PartitionLag>,
        sessions: FetchSessionCounts,
    ) -> ConsumerMetrics {
        ConsumerMetrics {
            records_consumed_total: self.records_consumed,
            bytes_consumed_total: self.bytes_consumed,
            fetch_total: self.fetch_latency_ms.count,
            fetch_latency_avg_ms: self.fetch_latency_ms.avg(),
            fetch_latency_max_ms: self.fetch_latency_ms.max,
            commit_total: self.commit_latency_ms.count,
            commit_latency_avg_ms: self.commit_latency_ms.avg(),
            commit_latency_max_ms: self.commit_latency_ms.max,
            rebalance_total: self.rebalances,
            fetch_sessions_opened_total: sessions.opened,
            incremental_fetch_total: sessions.incremental,
            fetch_session_errors_total: sessions.errors,
            records_lag_max: partitions.values().map(|p| p.lag).max().unwrap_or(0),
            partitions,
        }
    }
}

/// The per-partition series of a consumer.
#[derive(Debug)]
struct PartitionHandles {
    records_consumed: Counter,
    /// `messaging.client.consumed.messages`.
    consumed_messages: Counter,
    bytes_consumed: Counter,
    lag: Gauge,
}

/// The consumer's handles, resolved once (per broker and partition when first seen).
#[derive(Debug)]
struct ConsumerObserver {
    labels: Labels,
    /// The conventions' attributes of a `poll`.
    poll_labels: Labels,
    commit_latency: Histogram,
    /// `messaging.client.operation.duration` of `commit`, in seconds.
    commit_duration: Histogram,
    rebalances: Counter,
    records_lag_max: Gauge,
    brokers: FxHashMap<BrokerId, BrokerHandles>,
    partitions: FxHashMap<TopicPartition, PartitionHandles>,
}

/// The per-broker series of a consumer, resolved when the broker first answers a fetch.
#[derive(Debug)]
struct BrokerHandles {
    fetch_latency: Histogram,
    /// `messaging.client.operation.duration` of `poll`, in seconds, with the broker's
    /// `server.address` (absent when metadata did not know it at the first answer).
    poll_duration: Histogram,
}

impl ConsumerObserver {
    fn new(client_id: &str, group: Option<&str>) -> Self {
        semconv::describe();
        let labels = observe::client_labels(client_id, group);
        Self {
            poll_labels: semconv::operation_labels(client_id, Operation::Poll, group),
            commit_duration: observe::histogram(
                semconv::OPERATION_DURATION,
                &semconv::operation_labels(client_id, Operation::Commit, group),
            ),
            commit_latency: observe::histogram("kafka.consumer.commit-latency", &labels),
            rebalances: observe::counter("kafka.consumer.rebalance-total", &labels),
            records_lag_max: observe::gauge("kafka.consumer.records-lag-max", &labels),
            labels,
            brokers: FxHashMap::default(),
            partitions: FxHashMap::default(),
        }
    }

    fn broker(&mut self, broker: BrokerId, address: Option<&str>) -> &BrokerHandles {
        let (labels, poll_labels) = (&self.labels, &self.poll_labels);
        self.brokers.entry(broker).or_insert_with(|| BrokerHandles {
            fetch_latency: observe::histogram(
                "kafka.consumer.fetch-latency",
                &observe::broker_labels(labels, broker),
            ),
            poll_duration: observe::histogram(
                semconv::OPERATION_DURATION,
                &match address {
                    Some(address) => semconv::server_labels(poll_labels, address),
                    None => poll_labels.clone(),
                },
            ),
        })
    }

    fn partition(&mut self, tp: &TopicPartition) -> &PartitionHandles {
        if !self.partitions.contains_key(tp) {
            let labels = observe::partition_labels(&self.labels, tp);
            let handles = PartitionHandles {
                records_consumed: observe::counter(
                    "kafka.consumer.records-consumed-total",
                    &labels,
                ),
                consumed_messages: observe::counter(
                    semconv::CONSUMED_MESSAGES,
                    &semconv::destination_labels(&self.poll_labels, tp),
                ),
                bytes_consumed: observe::counter("kafka.consumer.bytes-consumed-total", &labels),
                lag: observe::gauge("kafka.consumer.records-lag", &labels),
            };
            self.partitions.insert(tp.clone(), handles);
        }
        &self.partitions[tp]
    }
}
