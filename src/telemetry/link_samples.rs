//! The link figures both clients push under the Java clients' names (KIP-714): the connection
//! metrics of the client's group (`connection-creation-total`, `connection-close-total`,
//! `connection-count`, which become `org.apache.kafka.producer.connection.creation.total` and
//! so on) and, per broker, the node group's request metrics (`producer-node-metrics` /
//! `consumer-node-metrics`: `org.apache.kafka.producer.node.request.latency.avg`, ...), tagged
//! `node_id` with the Java client's value, `node-<id>` (Kafka's telemetry naming turns the tag
//! `node-id` into `node_id`).

use super::Sample;
use crate::net::connection::LinkReading;
use crate::net::metadata::ClusterMetadata;

/// The samples of one reading of a client's links; `metadata` names each broker address's
/// node id (an address it does not name, a bootstrap address that is no advertised listener,
/// is tagged with the address itself).
pub(crate) fn link_samples(reading: &LinkReading, metadata: &ClusterMetadata) -> Vec<Sample> {
    let (counter, gauge) = (Sample::counter, Sample::gauge);
    let open = reading
        .connections_created
        .saturating_sub(reading.connections_closed);
    let mut samples = vec![
        counter("connection-creation-total", reading.connections_created),
        counter("connection-close-total", reading.connections_closed),
        gauge("connection-count", open as f64),
    ];
    for (address, node) in &reading.nodes {
        let node_id = metadata
            .broker_at(address)
            .map_or_else(|| address.to_string(), |id| format!("node-{id}"));
        samples.push(
            counter("node-response-total", node.answered_total).with("node_id", node_id.clone()),
        );
        if let Some(latency) = node.latency_ms {
            samples.push(
                gauge("node-request-latency-avg", latency.avg).with("node_id", node_id.clone()),
            );
            samples.push(gauge("node-request-latency-max", latency.max).with("node_id", node_id));
        }
    }
    samples
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::net::connection::counters::{NodeLatency, NodeReading};

    #[test]
    fn nodes_are_tagged_with_their_java_node_id() {
        let mut metadata = ClusterMetadata::default();
        metadata.brokers.insert(1, "127.0.0.1:9092".into());
        let reading = LinkReading {
            connections_created: 3,
            connections_closed: 1,
            nodes: vec![
                (
                    Arc::from("127.0.0.1:9092"),
                    NodeReading {
                        answered_total: 7,
                        latency_ms: Some(NodeLatency { avg: 1.5, max: 4.0 }),
                    },
                ),
                (
                    Arc::from("seed.example:9092"),
                    NodeReading {
                        answered_total: 1,
                        latency_ms: None,
                    },
                ),
            ],
        };
        let samples = link_samples(&reading, &metadata);
        let find = |name: &str, node: Option<&str>| {
            samples
                .iter()
                .find(|s| {
                    s.java_name == name
                        && s.attributes
                            .iter()
                            .find(|(k, _)| *k == "node_id")
                            .map(|(_, v)| v.as_str())
                            == node
                })
                .map(|s| s.value)
        };
        assert_eq!(find("connection-creation-total", None), Some(3.0));
        assert_eq!(find("connection-count", None), Some(2.0));
        assert_eq!(find("node-response-total", Some("node-1")), Some(7.0));
        assert_eq!(find("node-request-latency-avg", Some("node-1")), Some(1.5));
        assert_eq!(find("node-request-latency-max", Some("node-1")), Some(4.0));
        assert_eq!(
            find("node-response-total", Some("seed.example:9092")),
            Some(1.0)
        );
        // No answer in the window: no latency (Java's would be NaN).
        assert_eq!(
            find("node-request-latency-avg", Some("seed.example:9092")),
            None
        );
    }
}
