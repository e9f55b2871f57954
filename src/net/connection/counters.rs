//! What a client's links count for the per-node and connection metrics the Java clients push
//! (KIP-714): connections opened and closed, and per broker the requests answered and their
//! round trips. Every link of one client shares one [`LinkCounters`]; each broker address has
//! one [`NodeRequests`], shared by every link that dials it (its bootstrap address and its node
//! id are one broker, as for reachability).
//!
//! Counting is a few relaxed atomic adds per request; the lock is taken when a link starts and
//! when the counters are read (once a push interval).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Connections and per-broker requests of one client's links.
#[derive(Debug, Default)]
pub(crate) struct LinkCounters {
    connections_created: AtomicU64,
    connections_closed: AtomicU64,
    /// By broker address (`host:port`).
    nodes: Mutex<BTreeMap<Arc<str>, Arc<NodeRequests>>>,
}

/// The requests one broker answered: a running total, and the round trips since the counters
/// were last read (Java's `request-latency-avg` / `-max` are windowed likewise).
#[derive(Debug, Default)]
pub(crate) struct NodeRequests {
    answered_total: AtomicU64,
    window_answered: AtomicU64,
    window_micros: AtomicU64,
    window_max_micros: AtomicU64,
}

impl NodeRequests {
    /// A request was answered `round_trip` after it was handed to the connection.
    pub fn answered(&self, round_trip: Duration) {
        let micros = u64::try_from(round_trip.as_micros()).unwrap_or(u64::MAX);
        self.answered_total.fetch_add(1, Ordering::Relaxed);
        self.window_answered.fetch_add(1, Ordering::Relaxed);
        self.window_micros.fetch_add(micros, Ordering::Relaxed);
        self.window_max_micros.fetch_max(micros, Ordering::Relaxed);
    }

    /// The figures now, starting a new window.
    fn read(&self) -> NodeReading {
        let answered = self.window_answered.swap(0, Ordering::Relaxed);
        let micros = self.window_micros.swap(0, Ordering::Relaxed);
        let max_micros = self.window_max_micros.swap(0, Ordering::Relaxed);
        NodeReading {
            answered_total: self.answered_total.load(Ordering::Relaxed),
            // No request answered in the window: no latency to report (Java's is NaN then).
            latency_ms: (answered > 0).then(|| NodeLatency {
                avg: micros as f64 / answered as f64 / 1_000.0,
                max: max_micros as f64 / 1_000.0,
            }),
        }
    }
}

/// One broker's figures at one reading.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NodeReading {
    /// Requests it answered since the client started.
    pub answered_total: u64,
    /// Its round trips since the last reading, when it answered any.
    pub latency_ms: Option<NodeLatency>,
}

/// Round trips in milliseconds over one window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct NodeLatency {
    pub avg: f64,
    pub max: f64,
}

/// The client's link figures at one reading.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LinkReading {
    pub connections_created: u64,
    pub connections_closed: u64,
    /// By broker address, in address order.
    pub nodes: Vec<(Arc<str>, NodeReading)>,
}

impl LinkCounters {
    /// The counters of the broker at `address`, made on first use.
    pub fn node(&self, address: &str) -> Arc<NodeRequests> {
        let mut nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(node) = nodes.get(address) {
            return Arc::clone(node);
        }
        let node = Arc::<NodeRequests>::default();
        nodes.insert(Arc::from(address), Arc::clone(&node));
        node
    }

    /// A connection was opened (connected, negotiated and authenticated).
    pub fn connection_created(&self) {
        self.connections_created.fetch_add(1, Ordering::Relaxed);
    }

    /// An open connection was closed.
    pub fn connection_closed(&self) {
        self.connections_closed.fetch_add(1, Ordering::Relaxed);
    }

    /// The figures now; each broker's latency window starts again. Read by one reader (the
    /// client's telemetry pusher).
    pub fn read(&self) -> LinkReading {
        let nodes = self
            .nodes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(address, node)| (Arc::clone(address), node.read()))
            .collect();
        LinkReading {
            connections_created: self.connections_created.load(Ordering::Relaxed),
            connections_closed: self.connections_closed.load(Ordering::Relaxed),
            nodes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_broker_address_is_one_node_and_latency_is_per_window() {
        let counters = LinkCounters::default();
        let bootstrap = counters.node("127.0.0.1:9092");
        let by_id = counters.node("127.0.0.1:9092");
        bootstrap.answered(Duration::from_millis(2));
        by_id.answered(Duration::from_millis(4));
        counters.connection_created();
        counters.connection_created();
        counters.connection_closed();

        let first = counters.read();
        assert_eq!(
            (first.connections_created, first.connections_closed),
            (2, 1)
        );
        assert_eq!(first.nodes.len(), 1);
        let (address, node) = &first.nodes[0];
        assert_eq!(&**address, "127.0.0.1:9092");
        assert_eq!(node.answered_total, 2);
        assert_eq!(node.latency_ms, Some(NodeLatency { avg: 3.0, max: 4.0 }));

        // Nothing answered since: the total stays, the window is empty.
        let second = counters.read();
        assert_eq!(second.nodes[0].1.answered_total, 2);
        assert_eq!(second.nodes[0].1.latency_ms, None);
    }
}
