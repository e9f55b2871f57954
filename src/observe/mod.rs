//! Observations published through the `metrics` facade (feature `metrics`): counters for
//! totals, histograms for latencies and sizes, gauges for levels. Handles are resolved once,
//! per client, per broker or per partition, and cached by their owners, so recording one is an
//! atomic operation on an existing handle: no label string is built on the per-record path.
//! Without the feature the handles are empty and every call compiles to nothing.
//!
//! A handle is bound to the recorder installed when it is resolved (the facade's rule), so an
//! application installs its recorder before it builds a client.
//!
//! The names and labels are listed in the README ("Metrics"). Two schemes are published side
//! by side: the OpenTelemetry messaging conventions' ([`semconv`]) and the Java clients' JMX
//! names with the crate's own extras under `exactly.*`.

pub(crate) mod semconv;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::types::{BrokerId, TopicPartition};

#[cfg(feature = "metrics")]
pub(crate) use metrics::{Counter, Gauge, Histogram};

#[cfg(not(feature = "metrics"))]
mod disabled {
    /// No recorder: nothing is counted.
    #[derive(Debug, Clone, Default)]
    pub(crate) struct Counter;
    impl Counter {
        pub(crate) fn increment(&self, _: u64) {}
    }
    /// No recorder: nothing is set.
    #[derive(Debug, Clone, Default)]
    pub(crate) struct Gauge;
    impl Gauge {
        pub(crate) fn set(&self, _: f64) {}
    }
    /// No recorder: nothing is observed.
    #[derive(Debug, Clone, Default)]
    pub(crate) struct Histogram;
    impl Histogram {
        pub(crate) fn record(&self, _: f64) {}
    }
}
#[cfg(not(feature = "metrics"))]
pub(crate) use disabled::{Counter, Gauge, Histogram};

/// The labels of one series: `client_id` first, then what the figure is about.
pub(crate) type Labels = Vec<(&'static str, String)>;

/// Resolves a counter handle.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn counter(name: &'static str, labels: &Labels) -> Counter {
    #[cfg(feature = "metrics")]
    return metrics::counter!(name, labels);
    #[cfg(not(feature = "metrics"))]
    Counter
}

/// Resolves a gauge handle.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn gauge(name: &'static str, labels: &Labels) -> Gauge {
    #[cfg(feature = "metrics")]
    return metrics::gauge!(name, labels);
    #[cfg(not(feature = "metrics"))]
    Gauge
}

/// Resolves a histogram handle.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn histogram(name: &'static str, labels: &Labels) -> Histogram {
    #[cfg(feature = "metrics")]
    return metrics::histogram!(name, labels);
    #[cfg(not(feature = "metrics"))]
    Histogram
}

/// The labels of a client-wide series.
pub(crate) fn client_labels(client_id: &str, group: Option<&str>) -> Labels {
    let mut labels = vec![("client_id", client_id.to_owned())];
    if let Some(group) = group {
        labels.push(("group", group.to_owned()));
    }
    labels
}

/// `base` plus the `broker` label.
pub(crate) fn broker_labels(base: &Labels, broker: BrokerId) -> Labels {
    let mut labels = base.clone();
    labels.push(("broker", broker.to_string()));
    labels
}

/// `base` plus the `topic` and `partition` labels.
pub(crate) fn partition_labels(base: &Labels, tp: &TopicPartition) -> Labels {
    let mut labels = base.clone();
    labels.push(("topic", tp.topic.to_string()));
    labels.push(("partition", tp.partition.to_string()));
    labels
}

/// Which kind of client a default `client.id` names.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ClientKind {
    Producer,
    Consumer,
}

/// A `client.id` unique in the process for a client configured without one:
/// `exactly-producer-1`, `exactly-consumer-1`, ... numbered per kind as the Java clients
/// number theirs (`producer-1`), so two clients in one process publish distinct series.
pub(crate) fn default_client_id(kind: ClientKind) -> Arc<str> {
    static PRODUCERS: AtomicU64 = AtomicU64::new(1);
    static CONSUMERS: AtomicU64 = AtomicU64::new(1);
    let (prefix, sequence) = match kind {
        ClientKind::Producer => ("producer", &PRODUCERS),
        ClientKind::Consumer => ("consumer", &CONSUMERS),
    };
    Arc::from(format!(
        "exactly-{prefix}-{}",
        sequence.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Count, sum and maximum of one measured quantity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Summary {
    /// How many values were recorded.
    pub count: u64,
    /// Their sum.
    pub sum: u64,
    /// The largest.
    pub max: u64,
}

impl Summary {
    /// Adds a value.
    pub fn record(&mut self, value: u64) {
        self.count += 1;
        self.sum = self.sum.saturating_add(value);
        self.max = self.max.max(value);
    }

    /// The mean, or 0 when nothing was recorded.
    pub fn avg(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_client_ids_are_numbered_per_kind() {
        let a = default_client_id(ClientKind::Producer);
        let b = default_client_id(ClientKind::Producer);
        let c = default_client_id(ClientKind::Consumer);
        assert_ne!(a, b);
        assert!(a.starts_with("exactly-producer-") && b.starts_with("exactly-producer-"));
        assert!(c.starts_with("exactly-consumer-"));
        let n = |s: &str| s.rsplit('-').next().unwrap().parse::<u64>().unwrap();
        assert!(n(&b) > n(&a));
    }
}
