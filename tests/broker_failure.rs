//! The idempotent producer against real Kafka under real faults (Toxiproxy, SIGKILL). Every
//! test reads the topic back with kcat and checks the delivery guarantees
//! (`support::delivery::Run::verify_log`).
//!
//! Tests that inject faults hold their cluster's lock for their whole run, across awaits: each
//! test has a runtime of its own, and the lock exists precisely to keep other tests (on other
//! threads) off the cluster meanwhile.
#![allow(clippy::await_holding_lock)]

mod support;

use std::time::{Duration, Instant};

use exactly::{Error, Producer, Record};
use support::Cluster;
use support::delivery::{Outcome, Run, value_of};

/// Generous bound for any one delivery future: delivery timeout plus request timeout plus
/// slack. A future that takes longer is a stall (P9) and fails the test.
const RESOLVE_LIMIT: Duration = Duration::from_secs(90);

async fn producer(cluster: &Cluster, extra: &[(&str, &str)]) -> Producer {
    support::producer_with(
        cluster,
        &[
            ("linger.ms", "5"),
            ("request.timeout.ms", "3000"),
            ("delivery.timeout.ms", "30000"),
            ("retry.backoff.ms", "50"),
        ],
        extra,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sarama_1430_broker_down_then_back() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _exclusive = cluster.exclusive();
    let topic = support::unique_topic("sarama1430");
    cluster.create_topic(&topic, 3, 1, &[]);
    let producer = producer(
        &cluster,
        &[
            ("delivery.timeout.ms", "4000"),
            ("request.timeout.ms", "1500"),
        ],
    )
    .await;
    // Cut the broker while records are in flight, and keep sending while it is cut, until
    // those sends fail for good (delivery timeout). First the broker's answers are lost, so
    // batches are written but unresolved when the connection is cut.
    let proxy = cluster.proxy(0);
    let (mut run, later) =
        support::delivery::sarama_1430_schedule(&producer, &topic, &proxy, RESOLVE_LIMIT).await;
    producer.close().await.unwrap();

    for e in run.errors().into_iter().chain(later.errors()) {
        assert_ne!(
            e.code(),
            Some(exactly::ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER),
            "OUT_OF_ORDER_SEQUENCE_NUMBER reached the user"
        );
    }
    let (_, failed, indeterminate) = run.tally();
    assert!(failed > 0, "sends made while the broker was cut fail");
    assert!(
        indeterminate > 0,
        "sends whose answers were lost before the cut are indeterminate"
    );
    assert_eq!(
        later.tally().0,
        300,
        "every send after the broker came back succeeds: {:?}",
        later.errors()
    );
    let counters = producer.counters();
    assert!(
        counters.epoch_bumps >= 1,
        "unresolved batches failed, so the epoch was bumped (P5)"
    );
    run.outcomes.extend(later.outcomes);
    run.verify_log(&cluster, &topic);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_ack_is_not_duplicated() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _exclusive = cluster.exclusive();
    let topic = support::unique_topic("lostack");
    cluster.create_topic(&topic, 1, 1, &[]);
    let producer = producer(&cluster, &[("request.timeout.ms", "2000")]).await;
    let mut run = Run::default();
    let warm = Run::send_range(&producer, &topic, 0, 10, false).await;
    run.collect(warm, RESOLVE_LIMIT).await;

    // Requests still reach the broker; its answers are dropped.
    let proxy = cluster.proxy(0);
    proxy.add_toxic("drop_answers", "timeout", "downstream", r#"{"timeout":0}"#);
    let lost = Run::send_range(&producer, &topic, 10, 11, false).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    proxy.remove_toxic("drop_answers");
    run.collect(lost, RESOLVE_LIMIT).await;
    let counters = producer.counters();
    producer.close().await.unwrap();

    assert_eq!(
        run.tally(),
        (11, 0, 0),
        "the send resolves Ok: {:?}",
        run.errors()
    );
    assert!(
        counters.batch_retries >= 1,
        "the batch was re-sent after its answer was lost"
    );
    run.verify_log(&cluster, &topic);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_killed_and_restarted() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _exclusive = cluster.exclusive();
    let topic = support::unique_topic("killed");
    cluster.create_topic(&topic, 3, 1, &[]);
    let producer = producer(&cluster, &[("delivery.timeout.ms", "60000")]).await;
    let mut run = Run::default();
    let before = Run::send_range(&producer, &topic, 0, 500, true).await;
    cluster.stop_broker(0, true);
    let during = Run::send_range(&producer, &topic, 500, 1000, true).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    cluster.start_broker(0);
    run.collect(before, RESOLVE_LIMIT).await;
    run.collect(during, RESOLVE_LIMIT).await;
    let after = Run::send_range(&producer, &topic, 1000, 1200, true).await;
    run.collect(after, RESOLVE_LIMIT).await;
    producer.close().await.unwrap();

    let (acked, _, _) = run.tally();
    assert!(
        acked >= 200,
        "sends after the restart succeed (acked {acked}): {:?}",
        run.errors().first()
    );
    run.verify_log(&cluster, &topic);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_sliced_network_keeps_order() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _exclusive = cluster.exclusive();
    let topic = support::unique_topic("sliced");
    cluster.create_topic(&topic, 3, 1, &[]);
    let proxy = cluster.proxy(0);
    let producer = producer(
        &cluster,
        &[
            ("max.in.flight.requests.per.connection", "5"),
            ("batch.size", "2000"),
        ],
    )
    .await;
    // Warm up (metadata, producer id) before the network degrades.
    let mut run = Run::default();
    let warm = Run::send_range(&producer, &topic, 0, 10, true).await;
    run.collect(warm, RESOLVE_LIMIT).await;
    proxy.add_toxic(
        "lat_up",
        "latency",
        "upstream",
        r#"{"latency":40,"jitter":30}"#,
    );
    proxy.add_toxic(
        "lat_down",
        "latency",
        "downstream",
        r#"{"latency":40,"jitter":30}"#,
    );
    proxy.add_toxic(
        "slices",
        "slicer",
        "upstream",
        r#"{"average_size":64,"size_variation":32,"delay":200}"#,
    );
    let sent = Run::send_range(&producer, &topic, 10, 3000, true).await;
    run.collect(sent, RESOLVE_LIMIT).await;
    producer.close().await.unwrap();
    proxy.remove_all_toxics();
    assert_eq!(
        run.tally().0,
        3000,
        "every record is acked: {:?}",
        run.errors().first()
    );
    run.verify_log(&cluster, &topic);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_failover_three_brokers() {
    let Some(cluster) = Cluster::three() else {
        return;
    };
    let _exclusive = cluster.exclusive();
    let topic = support::unique_topic("failover");
    cluster.create_topic(&topic, 3, 3, &[("min.insync.replicas", "2")]);
    let leader = support::kcat_partition_leader(&cluster.bootstrap, &topic, 0);
    let producer = producer(&cluster, &[("delivery.timeout.ms", "60000")]).await;
    let mut run = Run::default();
    let before = Run::send_range(&producer, &topic, 0, 1000, true).await;
    // Node ids are 1-based; broker indexes 0-based.
    let victim = (leader - 1) as usize;
    cluster.stop_broker(victim, true);
    let during = Run::send_range(&producer, &topic, 1000, 2000, true).await;
    run.collect(before, RESOLVE_LIMIT).await;
    run.collect(during, RESOLVE_LIMIT).await;
    cluster.start_broker(victim);
    producer.close().await.unwrap();
    assert_eq!(
        run.tally().0,
        2000,
        "every record is acked by the new leaders: {:?}",
        run.errors().first()
    );
    run.verify_log(&cluster, &topic);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_fails_clearly_and_consumes_nothing() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let topic = support::unique_topic("badinput");
    cluster.create_topic(&topic, 1, 1, &[]);
    let producer = producer(
        &cluster,
        &[("max.request.size", "1000"), ("max.block.ms", "2000")],
    )
    .await;

    // Too large: refused at send, before anything is stamped.
    let err = producer
        .send(Record::to(&topic).value(vec![b'x'; 2000]))
        .await
        .expect_err("a 2000-byte record is over max.request.size");
    assert!(
        matches!(
            err,
            Error::RecordTooLarge {
                setting: "max.request.size",
                ..
            }
        ),
        "{err}"
    );

    // The next record goes out with sequence 0 of epoch 0: nothing was consumed (P1).
    let ok = producer
        .send(Record::to(&topic).value(value_of(1)))
        .await
        .unwrap()
        .await
        .unwrap();
    assert_eq!(ok.offset, 0);
    let counters = producer.counters();
    assert_eq!((counters.epoch_bumps, counters.records_acked), (0, 1));

    let err = producer
        .send(Record::to("bad topic!").value("v"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidTopic { .. }), "{err}");

    let missing = support::unique_topic("missing");
    let err = producer
        .send(Record::to(&missing).value("v"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnknownTopic { .. }), "{err}");
    assert!(
        err.to_string().contains(&missing),
        "the error names the topic: {err}"
    );

    producer.close().await.unwrap();
    let err = producer
        .send(Record::to(&topic).value("late"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Closed), "{err}");

    let log = cluster.read_topic(&topic, support::Isolation::ReadUncommitted);
    assert_eq!(log.len(), 1, "only the valid record is in the log: {log:?}");
}

/// Partitions added while a producer sends are used once a metadata refresh shows them:
/// `send` keeps each topic's route (its partition count and slots) per thread, and a
/// metadata update makes the next record look again. Checked with kcat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn added_partitions_are_used_after_a_metadata_refresh() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let topic = support::unique_topic("grown");
    cluster.create_topic(&topic, 2, 1, &[]);
    let producer = producer(&cluster, &[("metadata.max.age.ms", "500")]).await;
    // The route now says two partitions: partition 3 is refused, and nothing is written.
    producer
        .send(Record::to(&topic).value(value_of(0)))
        .await
        .unwrap()
        .await
        .unwrap();
    let err = producer
        .send(Record::to(&topic).partition(3).value(value_of(1)))
        .await
        .expect_err("the topic has two partitions");
    assert!(matches!(err, Error::Config { .. }), "{err}");

    let created = cluster
        .admin()
        .await
        .create_partitions([(topic.as_str(), 4)], false)
        .await
        .expect("create_partitions answered");
    assert!(created[&topic].is_ok(), "{created:?}");
    // Within a few refreshes (500 ms each) the same loop on the same thread reaches the new
    // partition: the cached route was dropped when the metadata changed.
    let mut landed = None;
    let started = std::time::Instant::now();
    while landed.is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "partition 3 never became usable"
        );
        match producer
            .send(Record::to(&topic).partition(3).value(value_of(2)))
            .await
        {
            Ok(delivery) => landed = Some(delivery.await.unwrap()),
            Err(Error::Config { .. }) => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(other) => panic!("unexpected error {other}"),
        }
    }
    assert_eq!(landed.map(|m| m.partition), Some(3));
    producer.close().await.unwrap();

    let in_log = cluster.read_topic(&topic, support::Isolation::ReadUncommitted);
    let where_: Vec<(i32, Option<String>)> =
        in_log.into_iter().map(|r| (r.partition, r.value)).collect();
    assert_eq!(where_.len(), 2, "{where_:?}");
    assert!(where_.contains(&(3, Some(value_of(2)))), "{where_:?}");
}

/// One Produce request to a broker carries a ready batch of each partition it leads
/// (`produce.request.max.bytes` caps the request, `max.request.size` a batch), so the broker
/// handles fewer requests than batches: counted by the broker itself (its request metrics,
/// over JMX) against the batches in its log (DumpLogSegments). Every record once and in order
/// (kcat); a record above `max.request.size` is still refused at `send`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_carry_every_ready_partition() {
    const PARTITIONS: u64 = 12;
    const RECORDS: u64 = 240;
    let Some(cluster) = Cluster::single() else {
        return;
    };
    // The broker's request count is broker-wide: no other test may produce meanwhile.
    let _exclusive = cluster.exclusive();
    let topic = support::unique_topic("shape");
    cluster.create_topic(&topic, PARTITIONS as u32, 1, &[]);
    // Records of 60 KB (a padded key) in batches of at most 100 KB hold one record each: a
    // request capped at max.request.size, as Java's is, could carry one batch only.
    let producer = producer(
        &cluster,
        &[
            ("batch.size", "100000"),
            ("linger.ms", "20"),
            ("max.request.size", "100000"),
        ],
    )
    .await;
    let err = producer
        .send(Record::to(&topic).value(vec![b'x'; 100_001]))
        .await
        .expect_err("a record over max.request.size");
    assert!(matches!(err, Error::RecordTooLarge { .. }), "{err}");

    let padding = vec![b'k'; 60_000];
    let requests_before = cluster.requests_handled(0, "Produce");
    let mut run = Run::default();
    let mut sent = Vec::new();
    for n in 0..RECORDS {
        let partition = (n % PARTITIONS) as i32;
        let record = Record::to(&topic)
            .key(padding.clone())
            .value(value_of(n))
            .partition(partition);
        sent.push((n, producer.send(record).await));
    }
    run.collect(sent, RESOLVE_LIMIT).await;
    producer.close().await.unwrap();
    let requests = cluster.requests_handled(0, "Produce") - requests_before;
    assert_eq!(run.tally().0 as u64, RECORDS, "{:?}", run.errors().first());
    run.verify_log(&cluster, &topic);

    let batches: usize = (0..PARTITIONS as i32)
        .map(|p| cluster.log_batches(&topic, p).len())
        .sum();
    println!("{RECORDS} records in {batches} batches, {requests} Produce requests");
    assert_eq!(batches as u64, RECORDS, "one 60 KB record per batch");
    // KAFKA-15591's rule sends each partition's first batch alone; after those, a request
    // takes the ready batch of every partition: at least twice as many batches as requests,
    // where a request capped at max.request.size took one batch each.
    assert!(
        batches as u64 >= 2 * requests,
        "{batches} batches in {requests} requests: requests do not carry every ready partition"
    );
}

/// One send of [`many_partitions_are_served_evenly`]: its record number, when it was sent, and
/// the task that awaits its future and says when it resolved.
type TimedSend = (u64, Instant, tokio::task::JoinHandle<(Instant, Outcome)>);

/// Sends record `n` to `partition` and starts awaiting its future, noting the time of each.
async fn timed_send(producer: &Producer, topic: &str, n: u64, partition: i32) -> TimedSend {
    let sent_at = Instant::now();
    let future = producer
        .send(Record::to(topic).value(value_of(n)).partition(partition))
        .await
        .expect("send");
    let resolved = tokio::spawn(async move {
        let outcome = support::delivery::resolve(n, future, RESOLVE_LIMIT).await;
        (Instant::now(), outcome)
    });
    (n, sent_at, resolved)
}

/// A thousand partitions on one broker, with Java's batching (16 KiB, `linger.ms` 5): no
/// partition waits behind the others. A record to every partition at once is acknowledged
/// for all of them within a bound of the first acknowledgement, and under a paced load the
/// broker sustains, no record waits more than a few linger intervals and request times
/// (requests carry the ready batch of every partition of the broker; one capped at one
/// batch, or a linger timer per partition, let records wait tens of seconds at this count).
/// Every record once, in order (kcat).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_partitions_are_served_evenly() {
    const PARTITIONS: u64 = 1_000;
    /// Records per partition in the paced phase, and the rate they are offered at.
    const PACED_ROUNDS: u64 = 10;
    const PACED_PER_SECOND: f64 = 10_000.0;
    /// At most this many rounds warm the broker up.
    const WARM_UP_ROUNDS: usize = 5;
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let topic = support::unique_topic("many-partitions");
    cluster.create_topic(&topic, PARTITIONS as u32, 1, &[]);
    let producer = producer(&cluster, &[("batch.size", "16384")]).await;

    // The broker's first writes to a thousand new partitions take it seconds, whoever writes
    // (franz-go's first run on a new topic waits as long): rounds a record to every
    // partition, not measured, until one is acknowledged within a second.
    let mut n = 0;
    let mut warm = Vec::new();
    for _ in 0..WARM_UP_ROUNDS {
        let sent_at = Instant::now();
        let mut round = Vec::new();
        for p in 0..PARTITIONS {
            round.push(timed_send(&producer, &topic, n, p as i32).await);
            n += 1;
        }
        let mut took = Duration::ZERO;
        for (n, _, resolved) in round {
            let (at, outcome) = resolved.await.expect("the awaiting task");
            took = took.max(at - sent_at);
            warm.push((n, outcome));
        }
        if took < Duration::from_secs(1) {
            break;
        }
    }

    let first_measured = n;
    let mut sends = Vec::new();
    for p in 0..PARTITIONS {
        sends.push(timed_send(&producer, &topic, n, p as i32).await);
        n += 1;
    }
    let paced_from = Instant::now();
    for i in 0..PARTITIONS * PACED_ROUNDS {
        let due = Duration::from_secs_f64(i as f64 / PACED_PER_SECOND);
        tokio::time::sleep_until((paced_from + due).into()).await;
        sends.push(timed_send(&producer, &topic, n, (i % PARTITIONS) as i32).await);
        n += 1;
    }
    let mut run = Run { outcomes: warm };
    let mut burst_acks = Vec::new();
    let mut paced_waits = Vec::new();
    for (n, sent_at, resolved) in sends {
        let (at, outcome) = resolved.await.expect("the awaiting task");
        if n < first_measured + PARTITIONS {
            burst_acks.push(at);
        } else {
            paced_waits.push(at - sent_at);
        }
        run.outcomes.push((n, outcome));
    }
    producer.close().await.unwrap();
    assert_eq!(run.tally().0 as u64, n, "{:?}", run.errors().first());

    let first = *burst_acks.iter().min().unwrap();
    let last = *burst_acks.iter().max().unwrap();
    paced_waits.sort();
    let median = paced_waits[paced_waits.len() / 2];
    let p99 = paced_waits[paced_waits.len() * 99 / 100];
    let longest = *paced_waits.last().unwrap();
    println!(
        "{PARTITIONS} partitions: first acknowledgements within {:?} of each other; paced \
         waits: median {median:?}, p99 {p99:?}, max {longest:?}",
        last - first
    );
    assert!(
        last - first <= Duration::from_secs(1),
        "the last partition's first acknowledgement came {:?} after the first one's",
        last - first
    );
    // A few linger intervals (5 ms) and request times (the median wait stands for one),
    // with slack for a shared machine.
    let bound = Duration::from_millis(20 * 5) + 4 * median + Duration::from_secs(1);
    assert!(
        longest <= bound,
        "a record waited {longest:?} (median {median:?}, bound {bound:?})"
    );
    run.verify_log(&cluster, &topic);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_buffer_waits_then_resumes() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let topic = support::unique_topic("backpressure");
    cluster.create_topic(&topic, 2, 1, &[]);
    // A buffer of a few batches: sends must wait for deliveries to free it, and be woken when
    // they do (a missed wake-up here once stalled sends for max.block.ms).
    let producer = producer(
        &cluster,
        &[
            ("buffer.memory", "65536"),
            ("batch.size", "16384"),
            ("max.block.ms", "5000"),
        ],
    )
    .await;
    let mut run = Run::default();
    let sent = Run::send_range(&producer, &topic, 0, 5000, true).await;
    run.collect(sent, RESOLVE_LIMIT).await;
    producer.close().await.unwrap();
    assert_eq!(
        run.tally().0,
        5000,
        "every record is acked: {:?}",
        run.errors().first()
    );
    run.verify_log(&cluster, &topic);
}

/// A pipeline that must stay full: 500 records in 200-byte batches with no linger, behind 300 ms
/// of latency on the broker's answers. Every free in-flight slot must be used (ARCHITECTURE.md,
/// performance shape), so the backlog drains in `batches / max.in.flight` round trips per
/// partition (within 1.25x), and no record times out for want of a slot.
async fn backlog_drains_with_a_full_pipeline(partitions: i32) {
    const RECORDS: u64 = 500;
    const MAX_IN_FLIGHT: u64 = 5;
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _exclusive = cluster.exclusive();
    let topic = support::unique_topic(&format!("backlog{partitions}"));
    cluster.create_topic(&topic, partitions as u32, 1, &[]);
    let producer = producer(
        &cluster,
        &[
            ("batch.size", "200"),
            ("linger.ms", "0"),
            ("request.timeout.ms", "30000"),
            ("delivery.timeout.ms", "120000"),
        ],
    )
    .await;
    let send = |n: u64| {
        let partition = (n % partitions as u64) as i32;
        producer.send(Record::to(&topic).value(value_of(n)).partition(partition))
    };
    // Warm up: metadata, producer id, and every partition's first batch acknowledged, so the
    // burst measures the pipeline (KAFKA-15591 sends an identity's first batch alone).
    let mut run = Run::default();
    let mut warm = Vec::new();
    for n in 0..partitions as u64 {
        warm.push((n, send(n).await));
    }
    run.collect(warm, RESOLVE_LIMIT).await;
    let batches_before: Vec<usize> = (0..partitions)
        .map(|p| cluster.log_batches(&topic, p).len())
        .collect();

    let proxy = cluster.proxy(0);
    proxy.add_toxic("latency", "latency", "downstream", r#"{"latency":300}"#);
    // One record alone measures the round trip through the toxic.
    let started = std::time::Instant::now();
    let probe = vec![(partitions as u64, send(partitions as u64).await)];
    run.collect(probe, RESOLVE_LIMIT).await;
    let round_trip = started.elapsed();

    let first = partitions as u64 + 1;
    let started = std::time::Instant::now();
    let mut burst = Vec::new();
    for n in first..first + RECORDS {
        burst.push((n, send(n).await));
    }
    run.collect(burst, RESOLVE_LIMIT).await;
    let drained = started.elapsed();
    proxy.remove_toxic("latency");
    producer.close().await.unwrap();

    let (acked, failed, indeterminate) = run.tally();
    assert_eq!(
        (failed, indeterminate),
        (0, 0),
        "no record may time out: {:?}",
        run.errors()
    );
    assert_eq!(acked as u64, RECORDS + first);
    run.verify_log(&cluster, &topic);
    // Round trips needed: per partition, its burst batches five at a time (one batch per
    // partition per request, five requests in flight); the probe's batch is counted too. Plus
    // one: with linger.ms=0 each batch goes out as soon as it closes, so the first round trip
    // is spent while the burst is still being handed over, its requests carrying whatever was
    // closed by then (with six partitions that is 1.5 s measured for 4 to 5 round trips' worth
    // of batches; a collapsed pipeline takes twice the full count: 13.3 s for 18 on one).
    let round_trips = 1
        + (0..partitions)
            .map(|p| {
                let batches = cluster.log_batches(&topic, p).len() - batches_before[p as usize];
                (batches as u64).div_ceil(MAX_IN_FLIGHT)
            })
            .max()
            .unwrap_or(0);
    let bound = round_trip.mul_f64(round_trips as f64 * 1.25);
    println!(
        "{partitions} partition(s): {RECORDS} records drained in {drained:?}; {round_trips} \
         round trips of {round_trip:?} (bound {bound:?})"
    );
    assert!(
        drained <= bound,
        "{RECORDS} records took {drained:?}: more than 1.25 x {round_trips} round trips of {round_trip:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backlog_drains_with_a_full_pipeline_one_partition() {
    backlog_drains_with_a_full_pipeline(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backlog_drains_with_a_full_pipeline_six_partitions() {
    backlog_drains_with_a_full_pipeline(6).await;
}

/// `enable.idempotence=false` is an explicit opt-out that makes `acks=1` and `acks=0`
/// available (the Java client's rule). With acks=1 every future gets the record's offset;
/// with acks=0 futures resolve once written, with offset -1 (nothing comes back). Batches
/// carry no producer id (the broker's DumpLogSegments shows -1). Without faults, kcat reads
/// every record once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_zero_and_one_without_idempotence() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    for acks in ["1", "0"] {
        let topic = support::unique_topic(&format!("acks{acks}"));
        cluster.create_topic(&topic, 1, 1, &[]);
        let producer = producer(&cluster, &[("enable.idempotence", "false"), ("acks", acks)]).await;
        let mut run = Run::default();
        let sent = Run::send_range(&producer, &topic, 0, 1000, false).await;
        run.collect(sent, RESOLVE_LIMIT).await;
        producer.close().await.unwrap();
        assert_eq!(run.tally(), (1000, 0, 0), "acks={acks}: {:?}", run.errors());
        let offsets: Vec<i64> = run
            .outcomes
            .iter()
            .map(|(_, o)| match o {
                support::delivery::Outcome::Acked(meta) => meta.offset,
                other => panic!("{other:?}"),
            })
            .collect();
        if acks == "1" {
            assert_eq!(offsets, (0..1000).collect::<Vec<i64>>());
            run.verify_log(&cluster, &topic);
        } else {
            assert!(offsets.iter().all(|&o| o == -1), "acks=0: offsets unknown");
            let values: Vec<String> = cluster
                .read_topic(&topic, support::Isolation::ReadUncommitted)
                .into_iter()
                .filter_map(|r| r.value)
                .collect();
            assert_eq!(values, (0..1000).map(value_of).collect::<Vec<_>>());
        }
        let batches = cluster.log_batches(&topic, 0);
        assert!(!batches.is_empty());
        assert!(
            batches.iter().all(|b| b.producer_id == -1),
            "acks={acks}: {batches:?}"
        );
    }
}
