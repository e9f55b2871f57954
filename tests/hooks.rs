//! Producer and consumer hooks against real Kafka: `on_send` tags every record with a header
//! kcat (the independent reader) sees; the acknowledgements counted through
//! `on_acknowledgement` equal the records acknowledged; a record the broker refuses reaches
//! `on_failure`; the consumer's `on_records` counts what `poll` handed out and `on_rebalance`
//! sees the assignment the member holds.

// Tests hold their cluster's lock across awaits on purpose (see `broker_failure.rs`).
#![allow(clippy::await_holding_lock)]

mod support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use exactly::{
    ConsumerEvent, ConsumerHooks, ConsumerRecord, Error, OffsetReset, ProducerHooks, Rebalance,
    Record, TopicPartition,
};
use support::Cluster;

const WAIT: Duration = Duration::from_secs(60);

/// Tags and counts.
#[derive(Default)]
struct Counting {
    sent: AtomicU64,
    acknowledged: AtomicU64,
    failed: Mutex<Vec<(TopicPartition, String, i32)>>,
}

impl ProducerHooks for Counting {
    fn on_send(&self, record: &mut Record) {
        let n = self.sent.fetch_add(1, Ordering::Relaxed);
        record.add_header("hooked", format!("send-{n}"));
    }

    fn on_acknowledgement(&self, _: &TopicPartition, base_offset: i64, records: i32) {
        assert!(base_offset >= 0, "a fresh batch has offsets");
        self.acknowledged
            .fetch_add(u64::try_from(records).expect("positive"), Ordering::Relaxed);
    }

    fn on_failure(&self, partition: &TopicPartition, error: &Error, records: i32) {
        self.failed
            .lock()
            .unwrap()
            .push((partition.clone(), error.to_string(), records));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_hooks_tag_and_count() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let topic = support::unique_topic("hooks");
    // Small enough that one record below is refused by the broker (MESSAGE_TOO_LARGE).
    cluster.create_topic(&topic, 2, 1, &[("max.message.bytes", "2000")]);
    let hooks = Arc::new(Counting::default());
    let producer = exactly::Producer::builder()
        .bootstrap(&cluster.bootstrap)
        .linger(Duration::from_millis(20))
        .request_timeout(Duration::from_secs(5))
        .delivery_timeout(Duration::from_secs(20))
        .hooks(hooks.clone())
        .build()
        .await
        .expect("producer builds");
    let mut futures = Vec::new();
    for i in 0..40 {
        let record = Record::to(&topic).partition(i % 2).value(format!("v{i}"));
        futures.push(producer.send(record).await.expect("send"));
    }
    let mut acknowledged = 0;
    for future in futures {
        future.await.expect("delivered");
        acknowledged += 1;
    }
    assert_eq!(hooks.sent.load(Ordering::Relaxed), 40);
    assert_eq!(hooks.acknowledged.load(Ordering::Relaxed), acknowledged);
    assert!(hooks.failed.lock().unwrap().is_empty());

    // Every record carries the hook's header, each once, all 40 distinct.
    let mut tags = BTreeSet::new();
    for partition in 0..2 {
        for (offset, headers) in support::kcat_headers(&cluster.bootstrap, &topic, partition) {
            let hooked: Vec<_> = headers.iter().filter(|(k, _)| k == "hooked").collect();
            assert_eq!(
                hooked.len(),
                1,
                "partition {partition} offset {offset}: {headers:?}"
            );
            tags.insert(hooked[0].1.clone());
        }
    }
    assert_eq!(tags.len(), 40, "{tags:?}");

    // A record the broker refuses fails through on_failure, once, and is not acknowledged.
    let refused = producer
        .send(Record::to(&topic).partition(0).value("x".repeat(5_000)))
        .await
        .expect("handed over")
        .await;
    assert!(refused.is_err(), "{refused:?}");
    let failed = hooks.failed.lock().unwrap().clone();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].0, TopicPartition::new(topic.as_str(), 0));
    assert_eq!(failed[0].2, 1);
    assert_eq!(hooks.acknowledged.load(Ordering::Relaxed), 40);
    producer.close().await.expect("close");
}

/// Counts records and keeps the assignment it was told of.
#[derive(Default)]
struct Watching {
    records: AtomicU64,
    owned: Mutex<BTreeSet<TopicPartition>>,
    rebalances: AtomicU64,
}

impl ConsumerHooks for Watching {
    fn on_records(&self, records: &[ConsumerRecord]) {
        self.records
            .fetch_add(records.len() as u64, Ordering::Relaxed);
    }

    fn on_rebalance(&self, change: Rebalance<'_>) {
        self.rebalances.fetch_add(1, Ordering::Relaxed);
        let mut owned = self.owned.lock().unwrap();
        match change {
            Rebalance::Assigned(p) => owned.extend(p.iter().cloned()),
            Rebalance::Revoked(p) | Rebalance::Lost(p) => p.iter().for_each(|tp| {
                owned.remove(tp);
            }),
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_hooks_see_records_and_the_assignment() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let topic = support::unique_topic("consumer-hooks");
    cluster.create_topic(&topic, 2, 1, &[]);
    let producer = exactly::Producer::builder()
        .bootstrap(&cluster.bootstrap)
        .build()
        .await
        .expect("producer builds");
    let mut futures = Vec::new();
    for i in 0..30 {
        let record = Record::to(&topic).partition(i % 2).value(format!("v{i}"));
        futures.push(producer.send(record).await.expect("send"));
    }
    for future in futures {
        future.await.expect("delivered");
    }
    producer.close().await.expect("close");

    let hooks = Arc::new(Watching::default());
    let mut consumer = support::members::test_builder(&cluster)
        .group_id(support::unique_topic("hooks-group"))
        .auto_offset_reset(OffsetReset::Earliest)
        .hooks(hooks.clone())
        .build()
        .await
        .expect("consumer builds");
    consumer.subscribe([topic.clone()]).expect("subscribe");
    let (mut handed_out, mut assigned_events) = (0u64, BTreeSet::new());
    let deadline = Instant::now() + WAIT;
    while handed_out < 30 {
        assert!(Instant::now() < deadline, "only {handed_out} records of 30");
        match consumer
            .poll_timeout(Duration::from_millis(500))
            .await
            .expect("poll")
        {
            Some(ConsumerEvent::Records(r)) => handed_out += r.len() as u64,
            Some(ConsumerEvent::Assigned(p)) => assigned_events.extend(p),
            _ => {}
        }
    }
    assert_eq!(hooks.records.load(Ordering::Relaxed), handed_out);
    let all: BTreeSet<_> = (0..2)
        .map(|p| TopicPartition::new(topic.as_str(), p))
        .collect();
    assert_eq!(*hooks.owned.lock().unwrap(), all);
    assert_eq!(assigned_events, all);
    assert_eq!(
        consumer.assignment().into_iter().collect::<BTreeSet<_>>(),
        all
    );
    assert!(hooks.rebalances.load(Ordering::Relaxed) >= 1);
    consumer.close().await.expect("close");
}
