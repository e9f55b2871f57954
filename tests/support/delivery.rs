//! Checking what a producer run put in the log against what its delivery futures said, with
//! the log read by the independent reader (kcat).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use exactly::{DeliveryFuture, Error, Producer, Record, RecordMetadata};

use super::{Cluster, ConsumedRecord, Isolation};

/// How one numbered record's send ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The broker confirmed it at this position.
    Acked(RecordMetadata),
    /// It failed and is not in the log.
    Failed(Error),
    /// It failed but may be in the log.
    Indeterminate(Error),
}

/// The numbered records of a run, in send order, with their outcomes.
#[derive(Debug, Default)]
pub struct Run {
    /// `(record number, outcome)` in send order.
    pub outcomes: Vec<(u64, Outcome)>,
}

/// How the delivery future of record `n` resolved; it must within `limit` (P6, P9).
pub async fn resolve(n: u64, future: DeliveryFuture, limit: Duration) -> Outcome {
    match tokio::time::timeout(limit, future).await {
        Err(_) => panic!("the delivery future of record {n} did not resolve within {limit:?}"),
        Ok(Ok(meta)) => Outcome::Acked(meta),
        Ok(Err(e)) if e.is_indeterminate() => Outcome::Indeterminate(e),
        Ok(Err(e)) => Outcome::Failed(e),
    }
}

/// The value of record `n`: its number, padded so every value has the same size.
pub fn value_of(n: u64) -> String {
    format!("rec-{n:010}")
}

fn number_of(value: &str) -> Option<u64> {
    value.strip_prefix("rec-")?.parse().ok()
}

impl Run {
    /// Sends records `from..to` (keyless unless `keyed`) and collects their futures.
    pub async fn send_range(
        producer: &Producer,
        topic: &str,
        from: u64,
        to: u64,
        keyed: bool,
    ) -> Vec<(u64, exactly::Result<DeliveryFuture>)> {
        let mut futures = Vec::new();
        for n in from..to {
            let mut record = Record::to(topic).value(value_of(n));
            if keyed {
                record = record.key(format!("key-{}", n % 7));
            }
            futures.push((n, producer.send(record).await));
        }
        futures
    }

    /// Awaits every future (each must resolve within `limit`: P6, P9) and records outcomes.
    pub async fn collect(
        &mut self,
        futures: Vec<(u64, exactly::Result<DeliveryFuture>)>,
        limit: Duration,
    ) {
        for (n, sent) in futures {
            let outcome = match sent {
                Err(e) => Outcome::Failed(e),
                Ok(future) => resolve(n, future, limit).await,
            };
            self.outcomes.push((n, outcome));
        }
    }

    /// Counts `(acked, failed, indeterminate)`.
    pub fn tally(&self) -> (usize, usize, usize) {
        let mut t = (0, 0, 0);
        for (_, o) in &self.outcomes {
            match o {
                Outcome::Acked(_) => t.0 += 1,
                Outcome::Failed(_) => t.1 += 1,
                Outcome::Indeterminate(_) => t.2 += 1,
            }
        }
        t
    }

    /// Errors that reached the user.
    pub fn errors(&self) -> Vec<&Error> {
        self.outcomes
            .iter()
            .filter_map(|(_, o)| match o {
                Outcome::Failed(e) | Outcome::Indeterminate(e) => Some(e),
                Outcome::Acked(_) => None,
            })
            .collect()
    }

    /// Reads the topic with kcat and checks the delivery guarantees: every acked record is in
    /// the log exactly once, at the offset its future reported; per partition, acked records
    /// are in send order; definitively failed records are absent; indeterminate ones appear
    /// at most once; nothing we did not send is there.
    pub fn verify_log(&self, cluster: &Cluster, topic: &str) {
        let log = cluster.read_topic(topic, Isolation::ReadUncommitted);
        self.verify_records(&log, topic);
    }

    /// [`Run::verify_log`] on records already read (e.g. over a secured listener).
    pub fn verify_records(&self, log: &[ConsumedRecord], topic: &str) {
        let mut seen: HashMap<u64, Vec<(i32, i64)>> = HashMap::new();
        for r in log {
            let value = r.value.as_deref().unwrap_or_default();
            let n = number_of(value)
                .unwrap_or_else(|| panic!("unexpected record {value:?} in {topic}"));
            seen.entry(n).or_default().push((r.partition, r.offset));
        }
        let sent: HashSet<u64> = self.outcomes.iter().map(|(n, _)| *n).collect();
        for n in seen.keys() {
            assert!(
                sent.contains(n),
                "record {n} is in the log but was never sent"
            );
        }
        let mut last_offset: HashMap<i32, (u64, i64)> = HashMap::new();
        for (n, outcome) in &self.outcomes {
            let copies = seen.get(n).map_or(0, Vec::len);
            match outcome {
                Outcome::Acked(meta) => {
                    assert_eq!(
                        copies, 1,
                        "acked record {n} appears {copies} times in the log"
                    );
                    let (partition, offset) = seen[n][0];
                    assert_eq!(
                        (meta.partition, meta.offset),
                        (partition, offset),
                        "record {n}: the future said {}@{}, the log has it at {partition}@{offset}",
                        meta.partition,
                        meta.offset
                    );
                    if let Some((prev_n, prev_offset)) = last_offset.get(&partition) {
                        assert!(
                            offset > *prev_offset,
                            "partition {partition}: record {n} (offset {offset}) was sent after record {prev_n} (offset {prev_offset})"
                        );
                    }
                    last_offset.insert(partition, (*n, offset));
                }
                Outcome::Failed(e) => assert_eq!(
                    copies, 0,
                    "record {n} failed definitively ({e}) but is in the log"
                ),
                Outcome::Indeterminate(_) => assert!(
                    copies <= 1,
                    "indeterminate record {n} appears {copies} times"
                ),
            }
        }
    }
}

/// The Sarama #1430 schedule through `proxy`: 300 records while all is well; then the
/// broker's answers are lost while 100 more go out (written, unresolved), the connection is
/// cut while 200 more are sent (they fail for good at the delivery timeout), the proxy is
/// restored, and 300 more are sent. Returns the outcomes up to and through the cut, and those
/// after it (every send from the first records on must resolve within `limit`).
pub async fn sarama_1430_schedule(
    producer: &Producer,
    topic: &str,
    proxy: &super::Proxy,
    limit: Duration,
) -> (Run, Run) {
    let mut run = Run::default();
    let warm = Run::send_range(producer, topic, 0, 300, false).await;
    run.collect(warm, limit).await;
    proxy.add_toxic("drop_answers", "timeout", "downstream", r#"{"timeout":0}"#);
    let in_flight = Run::send_range(producer, topic, 300, 400, false).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.set_enabled(false);
    proxy.remove_toxic("drop_answers");
    let during = Run::send_range(producer, topic, 400, 600, false).await;
    run.collect(in_flight, limit).await;
    run.collect(during, limit).await;
    proxy.set_enabled(true);
    let after = Run::send_range(producer, topic, 600, 900, false).await;
    let mut later = Run::default();
    later.collect(after, limit).await;
    (run, later)
}
