//! The producer's metrics snapshot: what a service owner puts on a dashboard, under the
//! Java producer's metric names where one exists, so existing dashboards and alerts carry
//! over. Delivery figures move only on broker-confirmed outcomes (rule P8).

use std::collections::BTreeMap;

use crate::engine::Counters;
use crate::engine::metrics::DeliveryMetrics;
use crate::net::connection::ConnectionState;
use crate::observe::{self, Counter, Gauge, Labels};
use crate::types::BrokerId;

/// One broker's figures.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BrokerMetrics {
    /// Produce requests sent to it and not answered yet.
    pub in_flight_requests: usize,
    /// Its connection.
    pub connection: ConnectionState,
}

/// A snapshot of the producer's metrics ([`crate::Producer::metrics`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ProducerMetrics {
    /// `record-send-total`: records the broker acknowledged.
    pub record_send_total: u64,
    /// `record-send-rate`: records acknowledged per second over the last 30 s.
    pub record_send_rate: f64,
    /// `record-error-total`: records that failed (not written, or indeterminate).
    pub record_error_total: u64,
    /// Of those, records that failed but may be in the log (P6).
    pub record_indeterminate_total: u64,
    /// `record-retry-total`: records sent again after a failed or unanswered attempt.
    pub record_retry_total: u64,
    /// `request-latency-avg`, in ms: Produce round trips the broker answered.
    pub request_latency_avg_ms: f64,
    /// `request-latency-max`, in ms.
    pub request_latency_max_ms: u64,
    /// `batch-size-avg`, in bytes, of acknowledged batches.
    pub batch_size_avg: f64,
    /// `batch-size-max`, in bytes.
    pub batch_size_max: u64,
    /// `records-per-request-avg`.
    pub records_per_request_avg: f64,
    /// `record-queue-time-avg`, in ms: from `send` to the batch's first time on the wire.
    pub record_queue_time_avg_ms: f64,
    /// `record-queue-time-max`, in ms.
    pub record_queue_time_max_ms: u64,
    /// `buffer-total-bytes`: `buffer.memory`.
    pub buffer_total_bytes: u64,
    /// `buffer-available-bytes`.
    pub buffer_available_bytes: u64,
    /// `buffer-exhausted-total`: times `send` found the buffer full and waited.
    pub buffer_exhausted_total: u64,
    /// `bufferpool-wait-time-ns-total`: time `send` spent waiting for buffer space.
    pub bufferpool_wait_time_ns_total: u64,
    /// `produce-throttle-time-avg`, in ms: quota throttling brokers reported (KIP-219).
    pub produce_throttle_time_avg_ms: f64,
    /// `produce-throttle-time-max`, in ms.
    pub produce_throttle_time_max_ms: u64,
    /// Epoch bumps, including moves to a new producer id.
    pub epoch_bumps: u64,
    /// The current producer id (-1 before the first).
    pub producer_id: i64,
    /// The current epoch (-1 before the first).
    pub epoch: i16,
    /// Transactions committed.
    pub transactions_committed: u64,
    /// Transactions aborted.
    pub transactions_aborted: u64,
    /// Per broker (by node id): in-flight requests and connection state.
    pub brokers: BTreeMap<BrokerId, BrokerMetrics>,
}

/// What goes into a snapshot besides the engine's own figures.
pub(crate) struct SnapshotParts<'a> {
    pub counters: &'a Counters,
    pub delivery: &'a DeliveryMetrics,
    pub now_ms: u64,
    pub buffer_total_bytes: u64,
    pub buffer_used_bytes: u64,
    pub buffer_exhausted_total: u64,
    pub bufferpool_wait_time_ns_total: u64,
    pub brokers: BTreeMap<BrokerId, BrokerMetrics>,
}

impl ProducerMetrics {
    pub(crate) fn from_parts(parts: SnapshotParts<'_>) -> Self {
        let SnapshotParts {
            counters, delivery, ..
        } = parts;
        Self {
            record_send_total: counters.records_acked,
            record_send_rate: delivery.record_send_rate(parts.now_ms),
            record_error_total: counters.records_failed + counters.records_indeterminate,
            record_indeterminate_total: counters.records_indeterminate,
            record_retry_total: delivery.records_retried,
            request_latency_avg_ms: delivery.request_latency_ms.avg(),
            request_latency_max_ms: delivery.request_latency_ms.max,
            batch_size_avg: delivery.batch_size_bytes.avg(),
            batch_size_max: delivery.batch_size_bytes.max,
            records_per_request_avg: delivery.records_per_request.avg(),
            record_queue_time_avg_ms: delivery.record_queue_time_ms.avg(),
            record_queue_time_max_ms: delivery.record_queue_time_ms.max,
            buffer_total_bytes: parts.buffer_total_bytes,
            buffer_available_bytes: parts
                .buffer_total_bytes
                .saturating_sub(parts.buffer_used_bytes),
            buffer_exhausted_total: parts.buffer_exhausted_total,
            bufferpool_wait_time_ns_total: parts.bufferpool_wait_time_ns_total,
            produce_throttle_time_avg_ms: delivery.produce_throttle_time_ms.avg(),
            produce_throttle_time_max_ms: delivery.produce_throttle_time_ms.max,
            epoch_bumps: counters.epoch_bumps,
            producer_id: counters.producer_id,
            epoch: counters.epoch,
            transactions_committed: delivery.transactions_committed,
            transactions_aborted: delivery.transactions_aborted,
            brokers: parts.brokers,
        }
    }

    /// The producer-wide figures under Kafka's metric names (Java's `producer-metrics` group;
    /// `exactly-` for the ones Kafka has no name for), for exporters and logs.
    pub fn named(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("record-send-total", self.record_send_total as f64),
            ("record-send-rate", self.record_send_rate),
            ("record-error-total", self.record_error_total as f64),
            (
                "exactly-record-indeterminate-total",
                self.record_indeterminate_total as f64,
            ),
            ("record-retry-total", self.record_retry_total as f64),
            ("request-latency-avg", self.request_latency_avg_ms),
            ("request-latency-max", self.request_latency_max_ms as f64),
            ("batch-size-avg", self.batch_size_avg),
            ("batch-size-max", self.batch_size_max as f64),
            ("records-per-request-avg", self.records_per_request_avg),
            ("record-queue-time-avg", self.record_queue_time_avg_ms),
            (
                "record-queue-time-max",
                self.record_queue_time_max_ms as f64,
            ),
            ("buffer-total-bytes", self.buffer_total_bytes as f64),
            ("buffer-available-bytes", self.buffer_available_bytes as f64),
            ("buffer-exhausted-total", self.buffer_exhausted_total as f64),
            (
                "bufferpool-wait-time-ns-total",
                self.bufferpool_wait_time_ns_total as f64,
            ),
            (
                "produce-throttle-time-avg",
                self.produce_throttle_time_avg_ms,
            ),
            (
                "produce-throttle-time-max",
                self.produce_throttle_time_max_ms as f64,
            ),
            ("exactly-epoch-bumps-total", self.epoch_bumps as f64),
            (
                "exactly-transactions-committed-total",
                self.transactions_committed as f64,
            ),
            (
                "exactly-transactions-aborted-total",
                self.transactions_aborted as f64,
            ),
            (
                "requests-in-flight",
                self.brokers
                    .values()
                    .map(|b| b.in_flight_requests)
                    .sum::<usize>() as f64,
            ),
        ]
    }
}

/// Reads one total out of a snapshot.
type Total = fn(&ProducerMetrics) -> u64;

/// What the driver publishes once a second from the snapshot: the producer-wide totals as
/// counters (set to the confirmed count, P8) and the levels as gauges. Latencies and sizes are
/// not here: the engine observes them one answer or batch at a time. Handles are resolved once
/// (per broker when the broker first shows up).
pub(crate) struct Publisher {
    labels: Labels,
    /// Each total's counter, how it is read, and what was published so far.
    totals: Vec<(Counter, Total, u64)>,
    buffer_total_bytes: Gauge,
    buffer_available_bytes: Gauge,
    brokers: BTreeMap<BrokerId, (Gauge, Gauge)>,
}

/// The producer-wide totals the driver publishes, under Kafka's names (`exactly-` where Kafka
/// has none).
const TOTALS: [(&str, Total); 8] = [
    ("kafka.producer.record-error-total", |m| {
        m.record_error_total
    }),
    ("exactly.producer.records.indeterminate", |m| {
        m.record_indeterminate_total
    }),
    ("kafka.producer.record-retry-total", |m| {
        m.record_retry_total
    }),
    ("kafka.producer.buffer-exhausted-total", |m| {
        m.buffer_exhausted_total
    }),
    ("kafka.producer.bufferpool-wait-time-ns-total", |m| {
        m.bufferpool_wait_time_ns_total
    }),
    ("exactly.producer.epoch_bumps", |m| m.epoch_bumps),
    ("exactly.producer.transactions.committed", |m| {
        m.transactions_committed
    }),
    ("exactly.producer.transactions.aborted", |m| {
        m.transactions_aborted
    }),
];

impl Publisher {
    pub(crate) fn new(client_id: &str) -> Self {
        let labels = observe::client_labels(client_id, None);
        Self {
            totals: TOTALS
                .iter()
                .map(|&(name, value)| (observe::counter(name, &labels), value, 0))
                .collect(),
            buffer_total_bytes: observe::gauge("kafka.producer.buffer-total-bytes", &labels),
            buffer_available_bytes: observe::gauge(
                "kafka.producer.buffer-available-bytes",
                &labels,
            ),
            brokers: BTreeMap::new(),
            labels,
        }
    }

    pub(crate) fn publish(&mut self, metrics: &ProducerMetrics) {
        // Increments, not `absolute`: a counter moves one way, and recorders that window
        // counters (rates) see the increase of each second.
        for (counter, value, published) in &mut self.totals {
            let now = value(metrics);
            counter.increment(now.saturating_sub(*published));
            *published = now.max(*published);
        }
        self.buffer_total_bytes
            .set(metrics.buffer_total_bytes as f64);
        self.buffer_available_bytes
            .set(metrics.buffer_available_bytes as f64);
        for (&node, broker) in &metrics.brokers {
            let (in_flight, connection) = self.brokers.entry(node).or_insert_with(|| {
                let labels = observe::broker_labels(&self.labels, node);
                (
                    observe::gauge("kafka.producer.requests-in-flight", &labels),
                    observe::gauge("exactly.producer.connection.state", &labels),
                )
            });
            in_flight.set(broker.in_flight_requests as f64);
            connection.set(f64::from(broker.connection.to_u8()));
        }
    }
}
