//! Client telemetry (KIP-714) against real Kafka: the test bed's brokers carry a client-metrics
//! subscription (every metric, pushed each second, clients named `exactly`) and a receiver
//! plugin that writes every push it gets, decoded by the OTLP reader Kafka ships, to
//! `broker<i>/telemetry.jsonl` (`scripts/testbed.d/telemetry/TelemetryRecorder.java`). What the
//! producer and the consumer pushed is read there, never from our own encoder.
//!
//! Tests hold their cluster's lock across awaits on purpose (see `broker_failure.rs`).
#![allow(clippy::await_holding_lock)]

mod support;

use std::time::{Duration, Instant};

use exactly::{Consumer, ConsumerEvent, Producer, Record};
use serde_json::Value;
use support::Cluster;

const PUSH_WAIT: Duration = Duration::from_secs(30);

/// Every push the cluster's receivers recorded from clients with `client_id`.
fn pushes(cluster: &Cluster, client_id: &str) -> Vec<Value> {
    (0..cluster.brokers)
        .filter_map(|i| {
            std::fs::read_to_string(format!("{}/broker{i}/telemetry.jsonl", cluster.dir)).ok()
        })
        .flat_map(|text| {
            text.lines()
                .map(|line| {
                    serde_json::from_str::<Value>(line).expect("the receiver writes JSON lines")
                })
                .collect::<Vec<_>>()
        })
        .filter(|push| push["client_id"] == client_id)
        .collect()
}

/// The value of `name` in one recorded push.
fn metric(push: &Value, name: &str) -> Option<f64> {
    push["metrics"]
        .as_array()?
        .iter()
        .find(|m| m["name"] == name)
        .and_then(|m| m["value"].as_f64())
}

/// A counter as the pushes report it: the cumulative value in the latest push, or the sum of
/// every push's delta (the subscription decides; Kafka's brokers ask for deltas).
fn counter_total(pushes: &[Value], name: &str) -> Option<f64> {
    let points: Vec<&Value> = pushes
        .iter()
        .filter_map(|p| p["metrics"].as_array()?.iter().find(|m| m["name"] == name))
        .collect();
    let last = points.last()?;
    assert_eq!(last["kind"], "counter", "a monotonic sum: {last}");
    if last["temporality"] == "AGGREGATION_TEMPORALITY_DELTA" {
        Some(points.iter().filter_map(|m| m["value"].as_f64()).sum())
    } else {
        assert_eq!(last["temporality"], "AGGREGATION_TEMPORALITY_CUMULATIVE");
        last["value"].as_f64()
    }
}

/// The points of `name` in one push, one per broker: each point's `node_id` attribute and
/// value.
fn per_node(push: &Value, name: &str) -> Vec<(String, f64)> {
    push["metrics"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["name"] == name)
        .filter_map(|m| {
            let node = m["attributes"]["node_id"].as_str()?.to_owned();
            Some((node, m["value"].as_f64()?))
        })
        .collect()
}

/// The Java clients' per-node request metrics and connection metrics (KIP-714's names for
/// the groups `<client>-node-metrics` and `<client>-metrics`), as the pushes of `client_id`
/// carry them: a round trip per broker the client talked to, tagged `node_id` with the Java
/// client's value (`node-<id>` of a broker of the cluster), and the connections it opened.
async fn assert_node_and_connection_metrics(cluster: &Cluster, client_id: &str, client: &str) {
    let name = |metric: &str| format!("org.apache.kafka.{client}.{metric}");
    let latency_avg = name("node.request.latency.avg");
    let push = wait_for_push(cluster, client_id, |p| {
        !per_node(p, &latency_avg).is_empty()
    })
    .await;
    // The test bed's broker i has node.id i + 1.
    let brokers: Vec<String> = (1..=cluster.brokers)
        .map(|id| format!("node-{id}"))
        .collect();
    let averages = per_node(&push, &latency_avg);
    let maxima = per_node(&push, &name("node.request.latency.max"));
    for (node, avg) in &averages {
        assert!(
            brokers.contains(node),
            "node_id {node} names a broker of the cluster {brokers:?}: {push}"
        );
        let max = maxima
            .iter()
            .find(|(n, _)| n == node)
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("no latency max for {node}: {push}"));
        assert!(
            *avg > 0.0 && *avg <= max && max < 60_000.0,
            "{node}: round trips avg {avg} ms, max {max} ms"
        );
    }
    let all = pushes(cluster, client_id);
    let answered: f64 = all
        .iter()
        .flat_map(|p| per_node(p, &name("node.response.total")))
        .map(|(_, v)| v)
        .sum();
    assert!(answered >= 1.0, "answers counted per node: {all:?}");
    let created = counter_total(&all, &name("connection.creation.total"));
    assert!(
        created.is_some_and(|c| c >= 1.0),
        "connections created: {created:?}"
    );
    assert!(
        all.iter()
            .filter_map(|p| metric(p, &name("connection.count")))
            .any(|open| open >= 1.0),
        "an open connection counted: {all:?}"
    );
}

/// Waits (bounded) until a push from `client_id` satisfies `wanted`, and returns it.
async fn wait_for_push(
    cluster: &Cluster,
    client_id: &str,
    wanted: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + PUSH_WAIT;
    loop {
        if let Some(push) = pushes(cluster, client_id).into_iter().find(|p| wanted(p)) {
            return push;
        }
        assert!(
            Instant::now() < deadline,
            "no matching push from {client_id} within {PUSH_WAIT:?}; pushes: {:?}",
            pushes(cluster, client_id)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn producer(cluster: &Cluster, client_id: &str, push: bool) -> Producer {
    support::producer_with(
        cluster,
        &[("linger.ms", "5"), ("request.timeout.ms", "5000")],
        &[
            ("client.id", client_id),
            ("enable.metrics.push", if push { "true" } else { "false" }),
        ],
    )
    .await
}

async fn send(producer: &Producer, topic: &str, count: usize) {
    let mut futures = Vec::new();
    for i in 0..count {
        let record = Record::to(topic).value(format!("v{i}"));
        futures.push(producer.send(record).await.expect("send"));
    }
    for future in futures {
        future.await.expect("delivered");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_pushes_what_it_sent_under_its_instance_id_and_a_terminating_push_on_close() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let topic = support::unique_topic("telemetry");
    cluster.create_topic(&topic, 1, 1, &[]);
    let client_id = support::unique_topic("telemetry-producer");
    let producer = producer(&cluster, &client_id, true).await;
    send(&producer, &topic, 25).await;

    let deadline = Instant::now() + PUSH_WAIT;
    let instance_id = loop {
        if let Some(id) = producer.client_instance_id() {
            break id.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "the broker assigned no client instance id"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(instance_id.len(), 32);
    assert_ne!(instance_id, "0".repeat(32));

    let sent_total =
        |pushes: &[Value]| counter_total(pushes, "org.apache.kafka.producer.record.send.total");
    let push = wait_for_push(&cluster, &client_id, |_| {
        sent_total(&pushes(&cluster, &client_id)) == Some(25.0)
    })
    .await;
    let all = pushes(&cluster, &client_id);
    assert!(
        all.iter()
            .all(|p| p["client_instance_id"] == instance_id.as_str()),
        "every push carries the id the broker assigned ({instance_id}): {all:?}"
    );
    assert_eq!(push["terminating"], false);
    assert_eq!(
        push["content_type"], "OTLP",
        "the broker names the payload OTLP"
    );
    let batch_size_max = all
        .iter()
        .filter_map(|p| metric(p, "org.apache.kafka.producer.batch.size.max"))
        .fold(0.0, f64::max);
    assert!(batch_size_max > 0.0, "a batch was acknowledged: {all:?}");
    assert_node_and_connection_metrics(&cluster, &client_id, "producer").await;
    let point = &push["metrics"][0];
    assert!(
        point["time_unix_nano"].as_u64().unwrap_or(0) > 1_600_000_000_000_000_000,
        "points carry the wall-clock time: {point}"
    );

    producer.close().await.expect("close");
    let last = wait_for_push(&cluster, &client_id, |p| p["terminating"] == true).await;
    assert_eq!(last["client_instance_id"], instance_id.as_str());
    let all = pushes(&cluster, &client_id);
    assert_eq!(
        all.iter().filter(|p| p["terminating"] == true).count(),
        1,
        "one terminating push, the last: {all:?}"
    );
    assert_eq!(all.last(), Some(&last));
    assert_eq!(
        sent_total(&all),
        Some(25.0),
        "the figures still add up to what was sent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_pushed_with_enable_metrics_push_false() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let topic = support::unique_topic("telemetry-off");
    cluster.create_topic(&topic, 1, 1, &[]);
    let silent_id = support::unique_topic("telemetry-silent");
    let pushing_id = support::unique_topic("telemetry-control");
    let silent = producer(&cluster, &silent_id, false).await;
    // The control, beside it: while it pushes twice (the subscription's interval is a second),
    // the producer with push off must push nothing.
    let pushing = producer(&cluster, &pushing_id, true).await;
    send(&silent, &topic, 5).await;
    send(&pushing, &topic, 5).await;
    wait_for_push(&cluster, &pushing_id, |_| true).await;
    let first = pushes(&cluster, &pushing_id).len();
    wait_for_push(&cluster, &pushing_id, |_| {
        pushes(&cluster, &pushing_id).len() > first + 1
    })
    .await;
    assert_eq!(silent.client_instance_id(), None);
    assert!(
        pushes(&cluster, &silent_id).is_empty(),
        "a producer with enable.metrics.push=false pushed"
    );
    silent.close().await.expect("close");
    pushing.close().await.expect("close");
    assert!(pushes(&cluster, &silent_id).is_empty(), "pushed on close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_pushes_its_assignment_and_records_under_its_instance_id_and_a_terminating_push_on_close()
 {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let topic = support::unique_topic("telemetry-consumer");
    cluster.create_topic(&topic, 2, 1, &[]);
    let client_id = support::unique_topic("telemetry-consumer");
    let group = support::unique_topic("telemetry-group");
    let mut consumer = Consumer::from_properties([
        ("bootstrap.servers", cluster.bootstrap.as_str()),
        ("group.id", group.as_str()),
        ("client.id", client_id.as_str()),
        ("auto.offset.reset", "earliest"),
        ("request.timeout.ms", "5000"),
    ])
    .await
    .expect("consumer builds");
    let producer = producer(&cluster, &support::unique_topic("telemetry-feed"), false).await;
    send(&producer, &topic, 30).await;
    producer.close().await.expect("close");
    consumer.subscribe([topic.as_str()]).expect("subscribe");
    let deadline = Instant::now() + PUSH_WAIT;
    let (mut owned, mut consumed) = (0, 0);
    while owned < 2 || consumed < 30 {
        assert!(
            Instant::now() < deadline,
            "no assignment of both partitions and their 30 records ({owned}, {consumed})"
        );
        match consumer
            .poll_timeout(Duration::from_millis(500))
            .await
            .expect("poll")
        {
            Some(ConsumerEvent::Assigned(partitions)) => owned += partitions.len(),
            Some(ConsumerEvent::Records(records)) => consumed += records.len(),
            _ => {}
        }
    }
    let name = "org.apache.kafka.consumer.coordinator.assigned.partitions";
    let push = wait_for_push(&cluster, &client_id, |p| metric(p, name) == Some(2.0)).await;
    // The records consumed, as the fetch manager's counter the pushes carry.
    let consumed_total = "org.apache.kafka.consumer.fetch.manager.records.consumed.total";
    wait_for_push(&cluster, &client_id, |_| {
        counter_total(&pushes(&cluster, &client_id), consumed_total) == Some(30.0)
    })
    .await;
    let instance_id = consumer
        .client_instance_id()
        .expect("the broker assigned an instance id")
        .to_string();
    assert_eq!(push["client_instance_id"], instance_id.as_str());
    assert_eq!(push["metrics"][0]["kind"], "gauge");
    assert_node_and_connection_metrics(&cluster, &client_id, "consumer").await;
    consumer.close().await.expect("close");
    let last = wait_for_push(&cluster, &client_id, |p| p["terminating"] == true).await;
    assert_eq!(last["client_instance_id"], instance_id.as_str());
}
