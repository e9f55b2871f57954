//! Delivery figures the engine measures: latencies, sizes, throttling and a recent ack rate.
//! Like [`Counters`](super::Counters), they move only on answers the broker gave or decisions
//! the engine took (rule P8): a record counts as sent when it is acknowledged, not when
//! it is handed to the socket (KAFKA-21062's lag metric moved before the write succeeded).
//! Times are the engine's milliseconds, so the simulation measures the same way.
//!
//! Each figure is observed twice: under the Java producer's names, and under the OpenTelemetry
//! messaging conventions (`crate::observe::semconv`): `messaging.client.sent.messages` per
//! partition, acknowledged or failed with its `error.type`, and
//! `messaging.client.operation.duration` (`send`) per broker with its `server.address`.

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use crate::observe::semconv::{self, Operation};
use crate::observe::{self, Counter, Histogram, Labels, Summary};
use crate::types::{BrokerId, Millis, TopicPartition};

/// Seconds the recent rate is measured over (Kafka's default `metrics.sample.window.ms` is
/// 30 s, two samples).
const RATE_WINDOW_SECONDS: usize = 30;

/// Records acknowledged per second over the last [`RATE_WINDOW_SECONDS`].
#[derive(Debug, Clone, Default)]
struct AckRate {
    /// Acked records per second, indexed by second modulo the window.
    buckets: [u64; RATE_WINDOW_SECONDS],
    /// The second the newest bucket stands for.
    newest: u64,
}

impl AckRate {
    fn advance(&mut self, now: Millis) {
        let second = now / 1000;
        let stale = second
            .saturating_sub(self.newest)
            .min(RATE_WINDOW_SECONDS as u64);
        for s in 1..=stale {
            self.buckets[((self.newest + s) % RATE_WINDOW_SECONDS as u64) as usize] = 0;
        }
        self.newest = self.newest.max(second);
    }

    fn add(&mut self, now: Millis, records: u64) {
        self.advance(now);
        self.buckets[(self.newest % RATE_WINDOW_SECONDS as u64) as usize] += records;
    }

    /// Records per second over the window (or over the time since the start, if shorter).
    fn per_second(&self, now: Millis) -> f64 {
        let mut window = self.clone();
        window.advance(now);
        let seconds = (now / 1000 + 1).min(RATE_WINDOW_SECONDS as u64);
        window.buckets.iter().sum::<u64>() as f64 / seconds as f64
    }
}

/// What the engine measured about deliveries.
#[derive(Debug, Clone, Default)]
pub struct DeliveryMetrics {
    /// Produce round trips that the broker answered, in milliseconds.
    pub request_latency_ms: Summary,
    /// Records per answered Produce request.
    pub records_per_request: Summary,
    /// Bytes of acknowledged batches.
    pub batch_size_bytes: Summary,
    /// From `send` to the first time the record's batch went on the wire, for acknowledged
    /// records' batches, in milliseconds.
    pub record_queue_time_ms: Summary,
    /// The throttle time brokers reported in Produce answers (KIP-219), in milliseconds.
    pub produce_throttle_time_ms: Summary,
    /// Records sent again after a failed or unanswered attempt.
    pub records_retried: u64,
    /// Transactions committed.
    pub transactions_committed: u64,
    /// Transactions aborted.
    pub transactions_aborted: u64,
    ack_rate: AckRate,
    observer: DeliveryObserver,
}

impl DeliveryMetrics {
    /// Publishes observations labelled with `client_id` from now on.
    pub(crate) fn observe_as(&mut self, client_id: &str) {
        self.observer = DeliveryObserver::new(client_id);
    }

    /// The address (`host:port`) of `broker`, from metadata, for the `server.address` and
    /// `server.port` of its series. A broker that moved gets its series anew.
    pub(crate) fn broker_address(&mut self, broker: BrokerId, address: &str) {
        self.observer.broker_address(broker, address);
    }

    /// The address metadata gave `broker`, if it is known.
    pub(crate) fn address_of(&self, broker: BrokerId) -> Option<&str> {
        self.observer.addresses.get(&broker).map(String::as_str)
    }

    /// A Produce answer from `broker` (P8: only answers count).
    pub(crate) fn answered(
        &mut self,
        broker: BrokerId,
        latency_ms: u64,
        records: u64,
        throttle_ms: u64,
    ) {
        self.request_latency_ms.record(latency_ms);
        self.records_per_request.record(records);
        if throttle_ms > 0 {
            self.produce_throttle_time_ms.record(throttle_ms);
        }
        let handles = self.observer.broker(broker);
        handles.request_latency.record(latency_ms as f64);
        handles.send_duration.record(semconv::seconds(latency_ms));
        handles.records_per_request.record(records as f64);
        if throttle_ms > 0 {
            handles.throttle_time.record(throttle_ms as f64);
        }
    }

    /// A batch of `tp` acknowledged.
    pub(crate) fn acked(
        &mut self,
        now: Millis,
        tp: &TopicPartition,
        records: u64,
        bytes: u64,
        queued_ms: u64,
    ) {
        self.ack_rate.add(now, records);
        self.batch_size_bytes.record(bytes);
        self.record_queue_time_ms.record(queued_ms);
        let handles = self.observer.partition(tp);
        handles.record_send.increment(records);
        handles.sent_messages.increment(records);
        handles.batch_size.record(bytes as f64);
        handles.record_queue_time.record(queued_ms as f64);
    }

    /// `records` of `tp` failed with an error of type `error_type` (not written, or
    /// indeterminate): `messaging.client.sent.messages` with its `error.type`.
    pub(crate) fn failed(&mut self, tp: &TopicPartition, records: u64, error_type: &'static str) {
        self.observer.failed(tp, error_type).increment(records);
    }

    /// Acknowledged records per second over the last 30 seconds (Kafka's
    /// `record-send-rate`, counted on acknowledgement).
    pub fn record_send_rate(&self, now: Millis) -> f64 {
        self.ack_rate.per_second(now)
    }
}

/// The per-broker series of a producer.
#[derive(Debug, Clone)]
struct BrokerHandles {
    request_latency: Histogram,
    /// `messaging.client.operation.duration` of `send`, in seconds.
    send_duration: Histogram,
    records_per_request: Histogram,
    throttle_time: Histogram,
}

/// The per-partition series of a producer.
#[derive(Debug, Clone)]
struct PartitionHandles {
    record_send: Counter,
    /// `messaging.client.sent.messages` without `error.type`.
    sent_messages: Counter,
    batch_size: Histogram,
    record_queue_time: Histogram,
}

/// The engine's observations through the `metrics` facade, with the handles resolved once per
/// broker and per partition (the first answer or acknowledgement resolves them).
#[derive(Debug, Clone, Default)]
struct DeliveryObserver {
    labels: Labels,
    /// The conventions' attributes of a `send`.
    send_labels: Labels,
    addresses: HashMap<BrokerId, String>,
    brokers: HashMap<BrokerId, BrokerHandles>,
    partitions: FxHashMap<TopicPartition, PartitionHandles>,
    /// `messaging.client.sent.messages` of failures, by partition and `error.type` (a closed
    /// set, so the map stays small).
    failures: FxHashMap<(TopicPartition, &'static str), Counter>,
}

impl DeliveryObserver {
    fn new(client_id: &str) -> Self {
        semconv::describe();
        Self {
            labels: observe::client_labels(client_id, None),
            send_labels: semconv::operation_labels(client_id, Operation::Send, None),
            ..Self::default()
        }
    }

    fn broker_address(&mut self, broker: BrokerId, address: &str) {
        if self.addresses.get(&broker).map(String::as_str) != Some(address) {
            self.addresses.insert(broker, address.to_owned());
            self.brokers.remove(&broker);
        }
    }

    fn failed(&mut self, tp: &TopicPartition, error_type: &'static str) -> &Counter {
        let send_labels = &self.send_labels;
        self.failures
            .entry((tp.clone(), error_type))
            .or_insert_with(|| {
                let labels = semconv::destination_labels(send_labels, tp);
                observe::counter(
                    semconv::SENT_MESSAGES,
                    &semconv::error_labels(&labels, error_type),
                )
            })
    }

    fn broker(&mut self, broker: BrokerId) -> &BrokerHandles {
        let (labels, send_labels, addresses) = (&self.labels, &self.send_labels, &self.addresses);
        self.brokers.entry(broker).or_insert_with(|| {
            let send_labels = match addresses.get(&broker) {
                Some(address) => semconv::server_labels(send_labels, address),
                None => send_labels.clone(),
            };
            let labels = observe::broker_labels(labels, broker);
            BrokerHandles {
                request_latency: observe::histogram("kafka.producer.request-latency", &labels),
                send_duration: observe::histogram(semconv::OPERATION_DURATION, &send_labels),
                records_per_request: observe::histogram(
                    "kafka.producer.records-per-request",
                    &labels,
                ),
                throttle_time: observe::histogram("kafka.producer.produce-throttle-time", &labels),
            }
        })
    }

    fn partition(&mut self, tp: &TopicPartition) -> &PartitionHandles {
        if !self.partitions.contains_key(tp) {
            let labels = observe::partition_labels(&self.labels, tp);
            let handles = PartitionHandles {
                record_send: observe::counter("kafka.producer.record-send-total", &labels),
                sent_messages: observe::counter(
                    semconv::SENT_MESSAGES,
                    &semconv::destination_labels(&self.send_labels, tp),
                ),
                batch_size: observe::histogram("kafka.producer.batch-size", &labels),
                record_queue_time: observe::histogram("kafka.producer.record-queue-time", &labels),
            };
            self.partitions.insert(tp.clone(), handles);
        }
        &self.partitions[tp]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_keeps_count_sum_and_max() {
        let mut s = Summary::default();
        assert_eq!(s.avg(), 0.0);
        for v in [4, 10, 1] {
            s.record(v);
        }
        assert_eq!((s.count, s.sum, s.max), (3, 15, 10));
        assert_eq!(s.avg(), 5.0);
    }

    #[test]
    fn only_a_throttle_is_observed_and_only_known_addresses_are_given() {
        let mut m = DeliveryMetrics::default();
        assert_eq!(m.address_of(1), None);
        m.broker_address(1, "127.0.0.1:9092");
        assert_eq!(m.address_of(1), Some("127.0.0.1:9092"));
        assert_eq!(m.address_of(2), None);
        m.answered(1, 5, 10, 0);
        assert_eq!(
            m.produce_throttle_time_ms.count, 0,
            "no throttle: nothing observed"
        );
        m.answered(1, 5, 10, 30);
        let throttle = &m.produce_throttle_time_ms;
        assert_eq!((throttle.count, throttle.max), (1, 30));
    }

    /// The broker's throttle series (KIP-219) holds the throttles the broker imposed, no zeros.
    #[cfg(feature = "metrics")]
    #[test]
    fn only_an_imposed_throttle_is_published() {
        use metrics_util::debugging::{DebugValue, DebuggingRecorder};
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::with_local_recorder(&recorder, || {
            let mut m = DeliveryMetrics::default();
            m.observe_as("c");
            m.answered(1, 5, 10, 0);
            m.answered(1, 5, 10, 30);
        });
        let throttles: Vec<f64> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter(|(key, ..)| key.key().name() == "kafka.producer.produce-throttle-time")
            .flat_map(|(.., value)| match value {
                DebugValue::Histogram(values) => {
                    values.into_iter().map(|v| v.into_inner()).collect()
                }
                _ => Vec::new(),
            })
            .collect();
        assert_eq!(throttles, vec![30.0]);
    }

    /// Failed records are counted in `messaging.client.sent.messages` under their error type
    /// (the OpenTelemetry messaging conventions' `error.type`).
    #[cfg(feature = "metrics")]
    #[test]
    fn failed_records_are_counted_with_their_error_type() {
        use metrics_util::debugging::{DebugValue, DebuggingRecorder};
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::with_local_recorder(&recorder, || {
            let mut m = DeliveryMetrics::default();
            m.observe_as("c");
            m.failed(&TopicPartition::new("t", 0), 3, "timeout");
        });
        let failed: Vec<u64> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter(|(key, ..)| {
                key.key().name() == "messaging.client.sent.messages"
                    && key
                        .key()
                        .labels()
                        .any(|l| l.key() == "error.type" && l.value() == "timeout")
            })
            .filter_map(|(.., value)| match value {
                DebugValue::Counter(n) => Some(n),
                _ => None,
            })
            .collect();
        assert_eq!(failed, vec![3]);
    }

    #[test]
    fn ack_rate_covers_the_last_thirty_seconds() {
        let mut m = DeliveryMetrics::default();
        let tp = TopicPartition::new("t", 0);
        for second in 0..10u64 {
            m.acked(second * 1000, &tp, 100, 1, 0);
        }
        assert_eq!(m.record_send_rate(9_999), 100.0);
        // Forty seconds later the window holds none of them.
        assert_eq!(m.record_send_rate(50_000), 0.0);
        m.acked(50_000, &tp, 60, 1, 0);
        assert_eq!(m.record_send_rate(50_500), 2.0);
        // Each second has its own bucket, the window sliding over them: 15 s later both the
        // 50th second's and the 65th's count; 20 s after that only the 65th's.
        m.acked(65_000, &tp, 30, 1, 0);
        assert_eq!(m.record_send_rate(65_500), 3.0);
        assert_eq!(m.record_send_rate(85_500), 1.0);
        // Hours on, the window still slides.
        m.acked(7_200_000, &tp, 90, 1, 0);
        assert_eq!(m.record_send_rate(7_200_500), 3.0);
    }
}
