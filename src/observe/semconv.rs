//! The OpenTelemetry messaging semantic conventions' metrics (semantic conventions v1.37,
//! "Semantic conventions for messaging metrics" and the Kafka page beside it): the names, the
//! units, the attributes and the bucket boundaries a dashboard built for the Java agent's,
//! `kotel`'s or Confluent.Kafka's instrumentation queries. They are published beside the
//! Java-named series (`kafka.producer.*`, `kafka.consumer.*`), which stay for dashboards that
//! mirror JMX.
//!
//! Every attribute here has few values: the client id, the group, topic and partition names,
//! broker addresses, and an `error.type` from [`crate::Error::type_name`]'s closed set. No
//! free text ever becomes a label, since every distinct label set is a series a backend stores.

use super::Labels;
use crate::types::TopicPartition;

/// Counter (`{message}`): messages the producer attempted to send, counted when each is
/// resolved: acknowledged (no `error.type`) or failed (with one).
pub(crate) const SENT_MESSAGES: &str = "messaging.client.sent.messages";
/// Counter (`{message}`): messages `poll` handed to the application.
pub(crate) const CONSUMED_MESSAGES: &str = "messaging.client.consumed.messages";
/// Histogram (seconds): one client operation: a Produce round trip (`send`), a Fetch round
/// trip (`poll`), an offset commit (`commit`).
pub(crate) const OPERATION_DURATION: &str = "messaging.client.operation.duration";
/// Histogram (seconds): the copy loop's processing of one poll's records (transforms and
/// sends into the transaction), and the application's processing of one record through
/// `Consumer::process`.
pub(crate) const PROCESS_DURATION: &str = "messaging.process.duration";

/// The explicit bucket boundaries the conventions give the duration histograms, in seconds:
/// hand them to the exporter for `messaging.client.operation.duration` and
/// `messaging.process.duration` (the `metrics` facade carries no boundaries itself).
pub const DURATION_BUCKETS_SECONDS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

/// `messaging.operation.name` and the `messaging.operation.type` it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    /// A Produce request: `send`, type `send`.
    Send,
    /// A Fetch for `poll`: `poll`, type `receive`.
    Poll,
    /// An offset commit: `commit`, type `settle`.
    Commit,
    /// Processing: the copy loop's transform and send of one poll, or one record in
    /// `Consumer::process`: `process`, type `process`.
    Process,
}

impl Operation {
    fn name(self) -> &'static str {
        match self {
            Operation::Send => "send",
            Operation::Poll => "poll",
            Operation::Commit => "commit",
            Operation::Process => "process",
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Operation::Send => "send",
            Operation::Poll => "receive",
            Operation::Commit => "settle",
            Operation::Process => "process",
        }
    }
}

/// The attributes every series of `operation` carries: `messaging.system`,
/// `messaging.client.id`, the operation's name and type, and a consumer's group.
pub(crate) fn operation_labels(
    client_id: &str,
    operation: Operation,
    group: Option<&str>,
) -> Labels {
    let mut labels = vec![
        ("messaging.system", "kafka".to_owned()),
        ("messaging.client.id", client_id.to_owned()),
        ("messaging.operation.name", operation.name().to_owned()),
        ("messaging.operation.type", operation.kind().to_owned()),
    ];
    if let Some(group) = group {
        labels.push(("messaging.consumer.group.name", group.to_owned()));
    }
    labels
}

/// `base` plus `messaging.destination.name` and `messaging.destination.partition.id`.
pub(crate) fn destination_labels(base: &Labels, tp: &TopicPartition) -> Labels {
    let mut labels = base.clone();
    labels.push(("messaging.destination.name", tp.topic.to_string()));
    labels.push((
        "messaging.destination.partition.id",
        tp.partition.to_string(),
    ));
    labels
}

/// `base` plus `server.address` and `server.port` of a broker's `host:port` (a bracketed
/// IPv6 host loses its brackets, as the conventions write addresses). An address without a
/// port adds `server.address` alone.
pub(crate) fn server_labels(base: &Labels, address: &str) -> Labels {
    let mut labels = base.clone();
    let (host, port) = server_address(address);
    labels.push(("server.address", host.to_owned()));
    if let Some(port) = port {
        labels.push(("server.port", port.to_string()));
    }
    labels
}

/// `server.address` and `server.port` of a broker's `host:port`, for metrics and spans alike.
pub(crate) fn server_address(address: &str) -> (&str, Option<u16>) {
    match address.rsplit_once(':') {
        Some((host, port)) => match port.parse() {
            Ok(port) => (
                host.trim_start_matches('[').trim_end_matches(']'),
                Some(port),
            ),
            Err(_) => (address, None),
        },
        None => (address, None),
    }
}

/// Records the broker at `address` (`host:port`) as `server.address` / `server.port` on
/// `span`, which declared both fields.
pub(crate) fn record_server(span: &tracing::Span, address: &str) {
    if span.is_disabled() {
        return;
    }
    let (host, port) = server_address(address);
    span.record("server.address", host);
    if let Some(port) = port {
        span.record("server.port", port);
    }
}

/// `base` plus `error.type`, a name from a closed set ([`crate::Error::type_name`]).
pub(crate) fn error_labels(base: &Labels, error_type: &'static str) -> Labels {
    let mut labels = base.clone();
    labels.push(("error.type", error_type.to_owned()));
    labels
}

/// Tells the installed recorder the units of the conventions' series (`{message}` counts,
/// seconds), once per recorder a client is built under (the facade forgets nothing, and a
/// second description of the same series changes nothing).
pub(crate) fn describe() {
    #[cfg(feature = "metrics")]
    {
        use metrics::Unit;
        metrics::describe_counter!(
            SENT_MESSAGES,
            Unit::Count,
            "Messages the producer attempted to send, counted when each is acknowledged or fails"
        );
        metrics::describe_counter!(
            CONSUMED_MESSAGES,
            Unit::Count,
            "Messages poll handed to the application"
        );
        metrics::describe_histogram!(
            OPERATION_DURATION,
            Unit::Seconds,
            "Duration of a Produce round trip (send), a Fetch round trip (poll) or an offset commit"
        );
        metrics::describe_histogram!(
            PROCESS_DURATION,
            Unit::Seconds,
            "Duration of processing: one poll's records in the copy loop, one record in Consumer::process"
        );
    }
}

/// Milliseconds as the conventions' seconds.
pub(crate) fn seconds(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value<'a>(labels: &'a Labels, key: &str) -> Option<&'a str> {
        labels
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn operations_carry_their_name_type_and_group() {
        let poll = operation_labels("c-1", Operation::Poll, Some("g"));
        assert_eq!(value(&poll, "messaging.system"), Some("kafka"));
        assert_eq!(value(&poll, "messaging.client.id"), Some("c-1"));
        assert_eq!(value(&poll, "messaging.operation.name"), Some("poll"));
        assert_eq!(value(&poll, "messaging.operation.type"), Some("receive"));
        assert_eq!(value(&poll, "messaging.consumer.group.name"), Some("g"));
        let commit = operation_labels("c-1", Operation::Commit, None);
        assert_eq!(value(&commit, "messaging.operation.type"), Some("settle"));
        assert_eq!(value(&commit, "messaging.consumer.group.name"), None);
    }

    #[test]
    fn server_addresses_split_into_host_and_port() {
        let base = operation_labels("p", Operation::Send, None);
        let v4 = server_labels(&base, "127.0.0.1:19092");
        assert_eq!(value(&v4, "server.address"), Some("127.0.0.1"));
        assert_eq!(value(&v4, "server.port"), Some("19092"));
        let v6 = server_labels(&base, "[::1]:9092");
        assert_eq!(value(&v6, "server.address"), Some("::1"));
        assert_eq!(value(&v6, "server.port"), Some("9092"));
        let bare = server_labels(&base, "broker-0");
        assert_eq!(value(&bare, "server.address"), Some("broker-0"));
        assert_eq!(value(&bare, "server.port"), None);
    }

    #[test]
    fn destinations_and_errors_are_attributes() {
        let base = operation_labels("p", Operation::Send, None);
        let tp = TopicPartition::new("orders", 3);
        let labels = error_labels(&destination_labels(&base, &tp), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(value(&labels, "messaging.destination.name"), Some("orders"));
        assert_eq!(
            value(&labels, "messaging.destination.partition.id"),
            Some("3")
        );
        assert_eq!(value(&labels, "error.type"), Some("NOT_LEADER_OR_FOLLOWER"));
        assert!(DURATION_BUCKETS_SECONDS.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(seconds(1_500), 1.5);
    }
}
