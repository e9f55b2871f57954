//! The producer's lifecycle against real Kafka (P6, shutdown included): dropping every
//! handle, a bounded close, purge and a cancelled commit each leave every delivery future
//! resolved, with outcomes the log (read by kcat) agrees with.
//!
//! Tests hold their cluster's lock across awaits on purpose (see `broker_failure.rs`).
#![allow(clippy::await_holding_lock)]

mod support;

use std::time::{Duration, Instant};

use exactly::{Error, Producer, Record, TxnState};
use support::delivery::{Outcome, Run, value_of};
use support::{Cluster, Isolation};

const RESOLVE_LIMIT: Duration = Duration::from_secs(60);

async fn producer(cluster: &Cluster, extra: &[(&str, &str)]) -> Producer {
    support::producer_with(
        cluster,
        &[
            ("linger.ms", "0"),
            ("request.timeout.ms", "20000"),
            ("delivery.timeout.ms", "40000"),
        ],
        extra,
    )
    .await
}

/// Sends records `from..to` to partition 0 (so order and batching are predictable).
async fn send_to_partition_0(
    producer: &Producer,
    topic: &str,
    from: u64,
    to: u64,
) -> Vec<(u64, exactly::Result<exactly::DeliveryFuture>)> {
    let mut futures = Vec::new();
    for n in from..to {
        let record = Record::to(topic).value(value_of(n)).partition(0);
        futures.push((n, producer.send(record).await));
    }
    futures
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_producer_resolves_every_future() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _exclusive = cluster.exclusive();
    let topic = support::unique_topic("dropped");
    cluster.create_topic(&topic, 1, 1, &[]);
    let producer = producer(&cluster, &[]).await;
    let mut run = Run::default();
    let warm = send_to_partition_0(&producer, &topic, 0, 10).await;
    run.collect(warm, RESOLVE_LIMIT).await;

    // Answers are lost: what goes out now stays in flight, unresolved.
    let proxy = cluster.proxy(0);
    proxy.add_toxic("drop_answers", "timeout", "downstream", r#"{"timeout":0}"#);
    let in_flight = send_to_partition_0(&producer, &topic, 10, 20).await;
    producer
        .flush_with_timeout(Duration::from_millis(500))
        .await
        .ok();
    drop(producer);
    let started = Instant::now();
    let mut dropped = Run::default();
    dropped.collect(in_flight, Duration::from_secs(5)).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "resolved at drop"
    );
    proxy.remove_toxic("drop_answers");
    for (n, outcome) in &dropped.outcomes {
        match outcome {
            Outcome::Indeterminate(e) => assert!(
                support::report(e).contains("closed"),
                "record {n}: went out unconfirmed: {}",
                support::report(e)
            ),
            Outcome::Failed(Error::Closed) => {}
            other => panic!("record {n}: {other:?}"),
        }
    }
    assert!(
        dropped
            .outcomes
            .iter()
            .any(|(_, o)| matches!(o, Outcome::Indeterminate(_))),
        "records that went out are indeterminate, not 'not written'"
    );
    run.outcomes.extend(dropped.outcomes);
    run.verify_log(&cluster, &topic);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_with_timeout_bounds_shutdown() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _exclusive = cluster.exclusive();
    let topic = support::unique_topic("closebound");
    cluster.create_topic(&topic, 1, 1, &[]);
    let producer = producer(&cluster, &[]).await;
    let mut run = Run::default();
    let warm = send_to_partition_0(&producer, &topic, 0, 10).await;
    run.collect(warm, RESOLVE_LIMIT).await;

    let proxy = cluster.proxy(0);
    proxy.set_enabled(false);
    let cut = send_to_partition_0(&producer, &topic, 10, 200).await;
    let started = Instant::now();
    let closed = producer.close_with_timeout(Duration::from_secs(2)).await;
    let took = started.elapsed();
    proxy.set_enabled(true);
    let err = closed.expect_err("the broker is cut: close is cut off");
    assert!(matches!(err, Error::Timeout(_)), "{err}");
    assert!(took < Duration::from_secs(3), "close took {took:?}");
    let mut late = Run::default();
    late.collect(cut, Duration::from_millis(100)).await;
    assert_eq!(late.tally().0, 0, "nothing could be acknowledged");
    assert!(
        producer
            .send(Record::to(&topic).value("late"))
            .await
            .is_err(),
        "closed"
    );
    run.outcomes.extend(late.outcomes);
    run.verify_log(&cluster, &topic);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_fails_buffered_records_only() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _exclusive = cluster.exclusive();
    let topic = support::unique_topic("purge");
    cluster.create_topic(&topic, 1, 1, &[]);
    // A long linger keeps records of a batch that is not full in the buffer.
    let producer = producer(
        &cluster,
        &[
            ("linger.ms", "60000"),
            ("batch.size", "400"),
            ("delivery.timeout.ms", "90000"),
        ],
    )
    .await;
    let mut run = Run::default();
    let warm = send_to_partition_0(&producer, &topic, 0, 5).await;
    producer.flush().await.unwrap();
    run.collect(warm, RESOLVE_LIMIT).await;

    // Full batches go out and wait for answers that are held back; the tail stays buffered.
    let proxy = cluster.proxy(0);
    proxy.add_toxic("drop_answers", "timeout", "downstream", r#"{"timeout":0}"#);
    let sent = send_to_partition_0(&producer, &topic, 5, 60).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let purged = producer.purge();
    assert!(purged > 0, "the open batch's records were buffered");
    proxy.remove_toxic("drop_answers");
    let mut after = Run::default();
    after.collect(sent, RESOLVE_LIMIT).await;
    let purged_outcomes = after
        .outcomes
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Failed(Error::Purged)))
        .count() as u64;
    assert_eq!(purged_outcomes, purged, "{:?}", after.outcomes);
    assert!(
        after.tally().0 > 0,
        "records already in flight were not purged: {:?}",
        after.outcomes
    );
    assert_eq!(
        after.tally().2,
        0,
        "the answers were only held back, not lost"
    );
    producer.close().await.unwrap();
    run.outcomes.extend(after.outcomes);
    run.verify_log(&cluster, &topic);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_commit_leaves_a_usable_state() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _exclusive = cluster.exclusive();
    let topic = support::unique_topic("cancelled");
    cluster.create_topic(&topic, 1, 1, &[]);
    let producer = producer(
        &cluster,
        &[
            ("transactional.id", &support::unique_topic("cancelled")),
            ("request.timeout.ms", "3000"),
        ],
    )
    .await;
    producer.init_transactions().await.unwrap();
    producer.begin_transaction().unwrap();
    let sent = send_to_partition_0(&producer, &topic, 0, 20).await;
    producer.flush().await.unwrap();
    let proxy = cluster.proxy(0);
    proxy.add_toxic("drop_answers", "timeout", "downstream", r#"{"timeout":0}"#);
    // The caller gives up on the commit: its future is dropped mid-way.
    let gave_up = tokio::time::timeout(Duration::from_secs(1), producer.commit_transaction()).await;
    assert!(
        gave_up.is_err(),
        "the commit could not finish without answers"
    );
    assert_eq!(producer.transaction_state(), Some(TxnState::Committing));
    let refused = producer
        .abort_transaction()
        .await
        .expect_err("only commit is valid");
    assert!(matches!(refused, Error::InvalidState(_)), "{refused}");
    proxy.remove_toxic("drop_answers");
    producer
        .commit_transaction()
        .await
        .expect("called again, the commit returns its outcome");
    let mut run = Run::default();
    run.collect(sent, RESOLVE_LIMIT).await;
    assert_eq!(run.tally(), (20, 0, 0));
    producer.close().await.unwrap();
    let committed = cluster.read_topic(&topic, Isolation::ReadCommitted);
    assert_eq!(committed.len(), 20, "committed once: {committed:?}");
}
