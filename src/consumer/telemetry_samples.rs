//! The consumer's metrics under the Java consumer's names, which KIP-714 turns into
//! `org.apache.kafka.consumer.<group>.<name with dots>` (`consumer-coordinator-metrics`'s
//! `assigned-partitions` is `org.apache.kafka.consumer.coordinator.assigned.partitions`).

use super::metrics::ConsumerMetrics;
use crate::telemetry::Sample;

/// The samples of one snapshot and the partitions the consumer owns. Java's groups
/// `consumer-fetch-manager-metrics` and `consumer-coordinator-metrics` become `fetch-manager-`
/// and `coordinator-` (KIP-714 names a metric by its group and name, dotted).
pub(crate) fn samples(m: &ConsumerMetrics, assigned_partitions: usize) -> Vec<Sample> {
    let (counter, gauge) = (Sample::counter, Sample::gauge);
    vec![
        gauge(
            "coordinator-assigned-partitions",
            assigned_partitions as f64,
        ),
        counter(
            "fetch-manager-records-consumed-total",
            m.records_consumed_total,
        ),
        counter("fetch-manager-bytes-consumed-total", m.bytes_consumed_total),
        counter("fetch-manager-fetch-total", m.fetch_total),
        gauge("fetch-manager-fetch-latency-avg", m.fetch_latency_avg_ms),
        gauge(
            "fetch-manager-fetch-latency-max",
            m.fetch_latency_max_ms as f64,
        ),
        gauge("fetch-manager-records-lag-max", m.records_lag_max as f64),
        counter("coordinator-commit-total", m.commit_total),
        gauge("coordinator-commit-latency-avg", m.commit_latency_avg_ms),
        gauge(
            "coordinator-commit-latency-max",
            m.commit_latency_max_ms as f64,
        ),
        counter("coordinator-rebalance-total", m.rebalance_total),
    ]
}
