//! The consumer's metrics under the Java consumer's names, which KIP-714 turns into
//! `org.apache.kafka.consumer.<group>.<name with dots>` (`consumer-coordinator-metrics`'s
//! `assigned-partitions` is `org.apache.kafka.consumer.coordinator.assigned.partitions`).

use super::Sample;
use super::otlp::Kind;

/// The samples of the consumer's figures now: the partitions it owns.
pub(crate) fn samples(assigned_partitions: usize) -> Vec<Sample> {
    vec![Sample {
        java_name: "coordinator-assigned-partitions",
        kind: Kind::Gauge,
        value: assigned_partitions as f64,
    }]
}
