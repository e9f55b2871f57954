//! Group membership that holds while the application works, against real Kafka, with both
//! group protocols (KIP-848 and classic) and default fetch sizes (a Fetch answer may buffer
//! thousands of records per partition):
//!
//! - heartbeats (and the classic JoinGroup / SyncGroup) do not wait for the record buffer to
//!   drain or for the application to be inside `poll` (Java's KIP-62 heartbeat thread);
//! - `max.poll.interval.ms` is the processing budget: a member that does not call `poll`
//!   within it leaves the group and learns it as `Lost`;
//! - a member whose commit is refused as fenced delivers nothing more of the lost partitions,
//!   and `CopyLoop` aborts once instead of opening transactions on records it no longer owns;
//! - a member of ours and Kafka's own Java consumer share a group;
//! - `close()` is bounded while the member is rejoining.
//!
//! Every record delivered is checked against kcat's read of the topic; every copy is read back
//! read_committed with kcat.
//!
//! Tests hold their cluster's lock across awaits on purpose (see `broker_failure.rs`).
#![allow(clippy::await_holding_lock)]

#[macro_use]
mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use exactly::eos::CopyLoop;
use exactly::{
    ConsumerEvent, ConsumerRecord, GroupProtocol, IsolationLevel, OffsetReset, Record,
    TopicPartition,
};
use support::Cluster;
use support::Isolation::ReadCommitted;
use support::java_group::{JavaConsumer, describe_members};
use support::members::{
    BusyMember, Departure, HEARTBEAT, Member, MemberLog, SESSION, assert_delivered_once,
    assert_delivered_while_owned, assert_no_overlapping_ownership, consumer_with, fill_partitions,
    wait_until,
};
use tracing::instrument::WithSubscriber;

/// Small records, so one Fetch answer buffers thousands of them per partition.
const RECORD_BYTES: usize = 100;
/// How long a service's loop sleeps after each `poll` and commit (its "processing").
const PACE: Duration = Duration::from_millis(100);
/// The longest a test waits for one expected thing that has no tighter bound of its own.
const WAIT: Duration = Duration::from_secs(60);

/// A member of `group` reading `topic` from the earliest offset, read_committed, with the test
/// bed's timeouts and `extra` (never `max.partition.fetch.bytes`: default fetch sizes).
async fn member(
    cluster: &Cluster,
    name: &str,
    group: &str,
    protocol: GroupProtocol,
    topic: &str,
    extra: &[(&str, &str)],
) -> Member {
    let consumer = consumer_with(
        cluster,
        group,
        protocol,
        OffsetReset::Earliest,
        IsolationLevel::ReadCommitted,
        topic,
        extra,
    )
    .await;
    assert_eq!(
        consumer.uses_consumer_protocol(),
        protocol == GroupProtocol::Consumer
    );
    Member::new(name, consumer)
}

/// A member handed at most 200 records per `poll`, as in the measurements.
async fn busy_member(
    cluster: &Cluster,
    name: &str,
    group: &str,
    protocol: GroupProtocol,
    topic: &str,
) -> BusyMember {
    let m = member(
        cluster,
        name,
        group,
        protocol,
        topic,
        &[("max.poll.records", "200")],
    )
    .await;
    BusyMember::spawn(m, PACE)
}

/// One member alone on 3 partitions × 10,000 records of 100 B, `poll` (200 records) → commit →
/// sleep 100 ms: it polls every ~0.11 s, far more often than its 6 s session needs, so no
/// commit may be refused, it never loses its partitions, and each record arrives once.
async fn buffered_records_do_not_starve_heartbeats(cluster: Cluster, protocol: GroupProtocol) {
    let _g = cluster.shared();
    let topic = support::unique_topic("membership-starve");
    cluster.create_topic(&topic, 3, 1, &[]);
    fill_partitions(&cluster, &topic, 3, 10_000, RECORD_BYTES).await;
    let group = support::unique_topic("starve");
    let alone = busy_member(&cluster, "alone", &group, protocol, &topic).await;
    // 150 polls of 200 records at ~0.11 s each: ~17 s; the bound leaves room for a slow box.
    wait_until(
        "30,000 records delivered",
        Duration::from_secs(120),
        || alone.log().deliveries.len() >= 30_000,
        || alone.log().summary(),
    )
    .await;
    let log = alone.depart(Departure::Close).await;
    eprintln!("alone: {}", log.summary());
    assert!(
        log.failed_commits.is_empty(),
        "a commit failed: {}",
        log.summary()
    );
    assert!(log.lost().is_empty(), "partitions lost: {}", log.summary());
    assert!(log.poll_errors.is_empty(), "{}", log.summary());
    assert!(
        log.changes.iter().all(|c| c.kind == "assigned"),
        "a member alone was rebalanced: {}",
        log.summary()
    );
    assert_delivered_while_owned("alone", &log);
    let expected = cluster.read_topic(&topic, ReadCommitted);
    assert_eq!(expected.len(), 30_000);
    assert_eq!(assert_delivered_once(&[("alone", &log)], &expected), 30_000);
    assert_eq!(log.close.as_ref().map(|c| c.1.clone()), Some(Ok(())));
}
on_both_protocols!(buffered_records_do_not_starve_heartbeats, single);

/// How long a member joining a busy group may take to own a partition. The hand-over takes,
/// under KIP-848: the joiner's first heartbeat, the owner's next heartbeat (which carries the
/// revocation), the owner's next `poll` (which hands the partition back, ≤ ~0.2 s here), its
/// heartbeat saying so, the joiner's next heartbeat: about 4 heartbeat intervals (2 s). Under
/// the classic protocol with cooperative-sticky (KIP-429) it is two rebalances: the owner
/// learns of the first from a heartbeat, rejoins, is told to revoke, hands the partition back
/// at its next `poll` and rejoins; the joiner learns of the second from a heartbeat: about the
/// same. 10 intervals leave room for a loaded 2-core machine and are still far below what a
/// buffer-bound member takes (13-32 s measured).
const JOIN_BOUND: Duration = Duration::from_secs(5);

/// Which member of [`second_member_gets_partitions_promptly`] leaves once the two share the
/// partitions, and how.
#[derive(Debug, Clone, Copy)]
struct Leaving {
    /// The member that was in the group first (true) or the one that joined (false).
    incumbent: bool,
    how: Departure,
}

/// A member joins a busy group (the first member polls 200 records every ~0.11 s from a full
/// buffer): it owns a partition within [`JOIN_BOUND`] of its first `poll`. Then one of the two
/// leaves (`leaving`): the other owns its partitions within the session timeout (closed: the
/// LeaveGroup moves them at once; dropped: the coordinator expires it after at most one
/// session timeout from its last heartbeat, then the survivor's next heartbeat and rejoin
/// take them, within 2 s more). Throughout, every record is delivered while its member owns
/// the partition, no partition is owned by both at once, and no record is delivered twice.
async fn second_member_gets_partitions_promptly(
    cluster: Cluster,
    protocol: GroupProtocol,
    leaving: Leaving,
) {
    let _g = cluster.shared();
    let topic = support::unique_topic("membership-join");
    cluster.create_topic(&topic, 3, 1, &[]);
    // Enough for both members to stay busy to the end (each takes at most ~1,800 a second).
    fill_partitions(&cluster, &topic, 3, 20_000, RECORD_BYTES).await;
    let group = support::unique_topic("join");
    let first = busy_member(&cluster, "first", &group, protocol, &topic).await;
    // Its buffer is full once it has been handed records for a while.
    wait_until(
        "the first member reads",
        WAIT,
        || first.log().owned().len() == 3 && first.log().deliveries.len() >= 2_000,
        || first.log().summary(),
    )
    .await;
    let second = busy_member(&cluster, "second", &group, protocol, &topic).await;
    let context = || {
        format!(
            "first: {}; second: {}",
            first.log().summary(),
            second.log().summary()
        )
    };
    wait_until(
        "the second member owns a partition",
        WAIT,
        || !second.log().owned().is_empty(),
        &context,
    )
    .await;
    let joined_in = {
        let log = second.log();
        let (Some(polled), Some(assigned)) = (log.first_poll, log.first_assigned()) else {
            unreachable!("it owns a partition")
        };
        assigned - polled
    };
    eprintln!("the second member owned a partition {joined_in:?} after its first poll");
    assert!(
        joined_in <= JOIN_BOUND,
        "the second member owned a partition only {joined_in:?} after its first poll (bound {JOIN_BOUND:?}): {}",
        context()
    );
    // Both read their share for a while.
    let shared_from = second.log().deliveries.len();
    wait_until(
        "both members own and read partitions",
        WAIT,
        || {
            let (a, b) = (first.log(), second.log());
            a.owned().len() + b.owned().len() == 3
                && !a.owned().is_empty()
                && b.deliveries.len() >= shared_from + 1_000
        },
        &context,
    )
    .await;
    let (leaver, survivor) = if leaving.incumbent {
        (first, second)
    } else {
        (second, first)
    };
    let left = leaver.depart(leaving.how).await;
    let departed_at = left.departed.expect("departed");
    let moved = left.owned_at_departure();
    assert!(
        !moved.is_empty(),
        "the leaving member owned nothing when it left: {}",
        left.summary()
    );
    wait_until(
        "the survivor owns every partition",
        WAIT,
        || survivor.log().owned().len() == 3,
        || {
            format!(
                "left: {}; survivor: {}",
                left.summary(),
                survivor.log().summary()
            )
        },
    )
    .await;
    let taken_over_in = moved
        .iter()
        .filter_map(|tp| survivor.log().owned_since(tp, departed_at))
        .max()
        .expect("the survivor owns them")
        - departed_at;
    let bound = match leaving.how {
        Departure::Close => SESSION,
        Departure::Drop => SESSION + Duration::from_secs(2),
    };
    eprintln!(
        "the survivor owned the departed member's partitions {taken_over_in:?} after it left ({:?})",
        leaving.how
    );
    assert!(
        taken_over_in <= bound,
        "the departed member's partitions were taken over only after {taken_over_in:?} (bound {bound:?}); survivor: {}",
        survivor.log().summary()
    );
    // The survivor reads on from where the departed member committed.
    let read_before = survivor.log().deliveries.len();
    wait_until(
        "the survivor reads on",
        WAIT,
        || survivor.log().deliveries.len() >= read_before + 1_000,
        || survivor.log().summary(),
    )
    .await;
    let stayed = survivor.depart(Departure::Close).await;
    let logs = [(leaver_name(leaving), &left), ("survivor", &stayed)];
    for (name, log) in &logs {
        assert!(
            log.lost().is_empty(),
            "{name} lost partitions: {}",
            log.summary()
        );
        assert!(
            log.refused_commits().is_empty(),
            "{name}'s commits were refused: {}",
            log.summary()
        );
        assert!(log.poll_errors.is_empty(), "{name}: {}", log.summary());
        assert_delivered_while_owned(name, log);
    }
    assert_no_overlapping_ownership(&logs);
    let expected = cluster.read_topic(&topic, ReadCommitted);
    let delivered = assert_delivered_once(&logs, &expected);
    eprintln!("{delivered} records delivered, each once, by the two members");
}

fn leaver_name(leaving: Leaving) -> &'static str {
    if leaving.incumbent { "first" } else { "second" }
}

/// [`second_member_gets_partitions_promptly`] in each join order (the member that leaves is
/// the one that was there first, or the one that joined) and each way of leaving.
mod second_member_gets_partitions_promptly {
    use super::{Cluster, Departure, GroupProtocol, Leaving};

    /// One variant: who leaves (`incumbent`: the member that was there first) and how.
    macro_rules! leaving_variant {
        ($name:ident, $incumbent:expr, $how:ident) => {
            async fn $name(cluster: Cluster, protocol: GroupProtocol) {
                let leaving = Leaving {
                    incumbent: $incumbent,
                    how: Departure::$how,
                };
                super::second_member_gets_partitions_promptly(cluster, protocol, leaving).await;
            }
            on_both_protocols!($name, single);
        };
    }

    leaving_variant!(incumbent_closes, true, Close);
    leaving_variant!(incumbent_dropped, true, Drop);
    leaving_variant!(joiner_closes, false, Close);
    leaving_variant!(joiner_dropped, false, Drop);
}

/// The value a copier writes for a source record: where it came from.
fn copy_value(r: &ConsumerRecord) -> String {
    format!("{}:{}", r.partition, r.offset)
}

/// Every record of `source` is in `destination` exactly once, in the same partition
/// (read_committed, kcat). Returns the number of records.
fn assert_copied_exactly_once(cluster: &Cluster, source: &str, destination: &str) -> usize {
    let mut expected: Vec<(i32, i64)> = cluster
        .read_topic(source, ReadCommitted)
        .iter()
        .map(|r| (r.partition, r.offset))
        .collect();
    expected.sort();
    let mut copied: Vec<(i32, i64)> = cluster
        .read_topic(destination, ReadCommitted)
        .iter()
        .map(|r| {
            let value = r.value.as_deref().expect("a copy has a value");
            let (p, o) = value.split_once(':').expect("partition:offset");
            let source = (p.parse().expect("partition"), o.parse().expect("offset"));
            assert_eq!(source.0, r.partition, "copied into another partition");
            source
        })
        .collect();
    copied.sort();
    let unique: BTreeSet<_> = copied.iter().collect();
    assert_eq!(
        unique.len(),
        copied.len(),
        "a source record was copied twice"
    );
    assert_eq!(
        copied, expected,
        "the destination does not hold every source record"
    );
    expected.len()
}

/// A transactional producer with the test bed's timeouts.
async fn copy_producer(cluster: &Cluster, id: &str) -> exactly::Producer {
    let defaults = [
        ("transactional.id", id),
        ("linger.ms", "5"),
        ("request.timeout.ms", "5000"),
        ("delivery.timeout.ms", "60000"),
    ];
    support::transactional_producer_with(cluster, &defaults, &[]).await
}

/// How often `CopyLoop::step` was handed `Lost` and `Assigned` (its debug event "polled").
fn copy_loop_events(captured: &support::captured::Captured) -> (usize, usize) {
    let polled: Vec<String> = captured
        .events()
        .into_iter()
        .filter(|e| e.target.starts_with("exactly::eos") && e.message == "polled")
        .filter_map(|e| e.field("event").map(str::to_owned))
        .collect();
    let count = |kind: &str| polled.iter().filter(|e| e.contains(kind)).count();
    (count("Lost("), count("Assigned("))
}

/// A copy loop whose transform takes 8 s per 250 records (32 ms a record, longer than the
/// 6 s session per `poll`, well within `max.poll.interval.ms`) copies 2,000 records exactly
/// once, without losing its partitions, well within 5 minutes (8 transactions of 8 s: ~64 s).
async fn slow_transform_copies_exactly_once(cluster: Cluster, protocol: GroupProtocol) {
    let _g = cluster.shared();
    let source = support::unique_topic("membership-slow-in");
    let destination = support::unique_topic("membership-slow-out");
    cluster.create_topic(&source, 4, 1, &[]);
    cluster.create_topic(&destination, 4, 1, &[]);
    fill_partitions(&cluster, &source, 4, 500, RECORD_BYTES).await;
    let group = support::unique_topic("slow");
    let consumer = consumer_with(
        &cluster,
        &group,
        protocol,
        OffsetReset::Earliest,
        IsolationLevel::ReadCommitted,
        &source,
        &[("max.poll.records", "250")],
    )
    .await;
    let producer = copy_producer(&cluster, &support::unique_topic("slow-copier")).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let to = destination.clone();
    let transform = move |r: ConsumerRecord| {
        counted.fetch_add(1, Ordering::Relaxed);
        let copy = Record::to(to.as_str())
            .partition(r.partition)
            .value(copy_value(&r));
        async move {
            tokio::time::sleep(Duration::from_millis(32)).await;
            vec![copy]
        }
    };
    let mut copier =
        CopyLoop::new(consumer, producer, transform).commit_every(250, Duration::from_millis(100));
    let (subscriber, captured) = support::captured::capture();
    let bound = Duration::from_secs(150);
    let began = Instant::now();
    let (copied, errors) = async {
        let (mut copied, mut errors) = (0, Vec::new());
        while copied < 2_000 && began.elapsed() < bound {
            match copier.step().await {
                Ok(Some(t)) => copied += t.records_in(),
                Ok(None) => {}
                Err(e) => errors.push(e.to_string()),
            }
        }
        (copied, errors)
    }
    .with_subscriber(subscriber)
    .await;
    let took = began.elapsed();
    let aborted = copier.producer().metrics().transactions_aborted;
    let (lost, assigned) = copy_loop_events(&captured);
    eprintln!(
        "copied {copied} in {took:?}: {} transform calls, {aborted} aborted, {lost} Lost, errors {errors:?}",
        calls.load(Ordering::Relaxed)
    );
    assert!(
        copied >= 2_000,
        "copied {copied} of 2,000 in {took:?}: {aborted} transactions aborted, {lost} Lost, errors {errors:?}"
    );
    assert!(errors.is_empty(), "failed steps: {errors:?}");
    assert_eq!(aborted, 0, "transactions aborted");
    assert!(
        assigned >= 1,
        "the capture saw no Assigned: it cannot count Lost"
    );
    assert_eq!(lost, 0, "the copy loop lost its partitions");
    assert_eq!(
        calls.load(Ordering::Relaxed),
        2_000,
        "records transformed again"
    );
    copier.close().await.expect("close");
    assert_eq!(
        assert_copied_exactly_once(&cluster, &source, &destination),
        2_000
    );
}
on_both_protocols!(slow_transform_copies_exactly_once, single);

/// The poll budget of [`member_that_stops_polling_leaves`]: below the 6 s session timeout, so
/// partitions that move sooner than a session can only have moved because the member left on
/// its own (its heartbeats would have kept the session alive).
const POLL_BUDGET: Duration = Duration::from_secs(3);

/// A member that stops calling `poll` for longer than `max.poll.interval.ms` leaves the group:
/// its partitions move to the other member within the budget (plus a rebalance), and its next
/// `poll` reports them `Lost` before handing over any record.
async fn member_that_stops_polling_leaves(cluster: Cluster, protocol: GroupProtocol) {
    let _g = cluster.shared();
    let topic = support::unique_topic("membership-stall");
    cluster.create_topic(&topic, 2, 1, &[]);
    fill_partitions(&cluster, &topic, 2, 5_000, RECORD_BYTES).await;
    let group = support::unique_topic("stall");
    let budget = POLL_BUDGET.as_millis().to_string();
    let mut stalling = member(
        &cluster,
        "stalling",
        &group,
        protocol,
        &topic,
        &[
            ("max.poll.records", "200"),
            ("max.poll.interval.ms", budget.as_str()),
        ],
    )
    .await;
    let end = Instant::now() + WAIT;
    while stalling.log().owned().len() < 2 || stalling.log().deliveries.len() < 400 {
        assert!(Instant::now() < end, "{}", stalling.log().summary());
        stalling.poll_once(Duration::from_millis(500)).await;
        tokio::time::sleep(PACE).await;
    }
    let other = busy_member(&cluster, "other", &group, protocol, &topic).await;
    // Split first, both polling.
    let end = Instant::now() + WAIT;
    while stalling.log().owned().len() != 1 || other.log().owned().len() != 1 {
        assert!(
            Instant::now() < end,
            "no split: stalling: {}; other: {}",
            stalling.log().summary(),
            other.log().summary()
        );
        stalling.poll_once(Duration::from_millis(500)).await;
        tokio::time::sleep(PACE).await;
    }
    let kept = stalling.log().owned();
    let delivered_before = stalling.log().deliveries.len();
    // The stall: no poll from here on until the other member owns both partitions.
    let stalled_at = Instant::now();
    wait_until(
        "the stalled member's partition moves",
        WAIT,
        || other.log().owned().len() == 2,
        || other.log().summary(),
    )
    .await;
    let moved_in = kept
        .iter()
        .filter_map(|tp| other.log().owned_since(tp, stalled_at))
        .max()
        .expect("moved")
        - stalled_at;
    eprintln!("the stalled member's partition moved {moved_in:?} after its last poll");
    // Its budget, then one rebalance (a few heartbeat intervals).
    let bound = POLL_BUDGET + 4 * HEARTBEAT;
    assert!(
        moved_in <= bound,
        "the partition moved only {moved_in:?} after the member stopped polling (budget {POLL_BUDGET:?}, bound {bound:?}, session {SESSION:?})"
    );
    // Its next poll says Lost before anything else.
    let end = Instant::now() + WAIT;
    let first = loop {
        assert!(Instant::now() < end, "{}", stalling.log().summary());
        if let Some(event) = stalling.poll_once(Duration::from_millis(500)).await {
            break event;
        }
    };
    match &first {
        ConsumerEvent::Lost(tps) => assert_eq!(
            tps.iter().cloned().collect::<BTreeSet<TopicPartition>>(),
            kept,
            "lost what it owned"
        ),
        other => panic!(
            "after the stall the first event was not Lost but {}",
            describe_event(other)
        ),
    }
    assert_eq!(stalling.log().deliveries.len(), delivered_before);
    let stalled = stalling.depart(Departure::Close).await;
    let other = other.depart(Departure::Close).await;
    let logs = [("stalling", &stalled), ("other", &other)];
    for (name, log) in &logs {
        assert_delivered_while_owned(name, log);
        assert!(
            log.refused_commits().is_empty(),
            "{name}: {}",
            log.summary()
        );
    }
    assert_no_overlapping_ownership(&logs);
    assert_delivered_once(&logs, &cluster.read_topic(&topic, ReadCommitted));
}
on_both_protocols!(member_that_stops_polling_leaves, single);

fn describe_event(event: &ConsumerEvent) -> String {
    match event {
        ConsumerEvent::Records(r) => format!("{} records", r.len()),
        other => format!("{other:?}"),
    }
}

/// A member's session expires while it still has buffered records (its traffic is cut for
/// longer than the session timeout, then restored): its commit is refused, and from then on no
/// record of the lost partitions is delivered: the next `poll` says `Lost`. A copy loop in the
/// same situation (cut off in the middle of a transaction, its buffer full) aborts that
/// transaction once, and opens no other on records it no longer owns. Afterwards both read on
/// from the committed offsets: every record once, every copy once.
async fn fenced_commit_stops_delivery(cluster: Cluster, protocol: GroupProtocol) {
    let _x = cluster.exclusive();
    let topic = support::unique_topic("membership-fenced");
    let destination = support::unique_topic("membership-fenced-out");
    cluster.create_topic(&topic, 3, 1, &[]);
    cluster.create_topic(&destination, 3, 1, &[]);
    // ~0.5 MB per partition: one Fetch answer buffers most of a partition.
    fill_partitions(&cluster, &topic, 3, 3_000, RECORD_BYTES).await;
    let total = 9_000;
    let extra = [("max.poll.records", "200")];
    let proxy = cluster.proxy(0);
    // Past the session timeout, so the coordinator expires the members it cuts off.
    let cut = SESSION + Duration::from_secs(3);

    let mut fenced = member(
        &cluster,
        "fenced",
        &support::unique_topic("fenced"),
        protocol,
        &topic,
        &extra,
    )
    .await;
    let end = Instant::now() + WAIT;
    while fenced.log().owned().len() < 3 || fenced.log().deliveries.len() < 400 {
        assert!(Instant::now() < end, "{}", fenced.log().summary());
        fenced.poll_once(Duration::from_millis(500)).await;
    }
    // It does not poll while cut off.
    proxy.set_enabled(false);
    tokio::time::sleep(cut).await;
    proxy.set_enabled(true);
    let delivered_before = fenced.log().deliveries.len();
    // The background heartbeat, retried once the proxy is back, may hear of the expiry before
    // this commit goes out: then the member owns nothing and has nothing to commit. Either
    // way it must not go on as the owner.
    let refused = fenced.commit_positions().await;
    eprintln!("the commit after the cut: {refused:?}");
    match refused {
        Some(refused) => assert!(
            refused.is_fencing() || refused.code.is_none(),
            "refused as fenced (or locally, as not a member), not: {}",
            refused.error
        ),
        None => assert!(
            fenced.consumer().assignment().is_empty(),
            "the commit of an expired member that still owns its partitions is refused"
        ),
    }
    let end = Instant::now() + WAIT;
    let first = loop {
        assert!(Instant::now() < end, "{}", fenced.log().summary());
        if let Some(event) = fenced.poll_once(Duration::from_millis(500)).await {
            break event;
        }
    };
    assert!(
        matches!(&first, ConsumerEvent::Lost(tps) if tps.len() == 3),
        "after the refused commit the first event was not Lost of all 3 but {}",
        describe_event(&first)
    );
    assert_eq!(fenced.log().deliveries.len(), delivered_before);
    // It rejoins and reads the rest from its committed offsets.
    let end = Instant::now() + WAIT;
    while fenced.log().deliveries.len() < total {
        assert!(Instant::now() < end, "{}", fenced.log().summary());
        fenced.poll_once(Duration::from_millis(500)).await;
    }
    let log = fenced.depart(Departure::Close).await;
    assert_delivered_while_owned("fenced", &log);
    assert_eq!(
        assert_delivered_once(
            &[("fenced", &log)],
            &cluster.read_topic(&topic, ReadCommitted)
        ),
        total
    );

    // The copy loop is cut off by its own transform, half-way through the second poll's
    // records: its transaction is open, its buffer full, when its session expires.
    let copy_consumer = consumer_with(
        &cluster,
        &support::unique_topic("fenced-copy"),
        protocol,
        OffsetReset::Earliest,
        IsolationLevel::ReadCommitted,
        &topic,
        &extra,
    )
    .await;
    let producer = copy_producer(&cluster, &support::unique_topic("fenced-copier")).await;
    let to = destination.clone();
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let transform = move |r: ConsumerRecord| {
        let call = counted.fetch_add(1, Ordering::Relaxed) + 1;
        let proxy = proxy.clone();
        let copy = Record::to(to.as_str())
            .partition(r.partition)
            .value(copy_value(&r));
        async move {
            if call == 300 {
                proxy.set_enabled(false);
                tokio::time::sleep(cut).await;
                proxy.set_enabled(true);
            }
            vec![copy]
        }
    };
    // One poll (200 records) per transaction, or what came within 2 s.
    let mut copier =
        CopyLoop::new(copy_consumer, producer, transform).commit_every(200, Duration::from_secs(2));
    let (subscriber, captured) = support::captured::capture();
    let (mut copied, mut failed) = (0, Vec::new());
    let end = Instant::now() + Duration::from_secs(120);
    async {
        while copied < total {
            assert!(
                Instant::now() < end,
                "copied {copied} of {total}; failed steps {failed:?}"
            );
            match copier.step().await {
                Ok(Some(t)) => copied += t.records_in(),
                Ok(None) => {}
                Err(e) => failed.push(e.to_string()),
            }
        }
    }
    .with_subscriber(subscriber)
    .await;
    let aborted = copier.producer().metrics().transactions_aborted;
    let (lost, assigned) = copy_loop_events(&captured);
    eprintln!(
        "the copy loop: {aborted} aborted, {lost} Lost, {} transform calls, failed steps {failed:?}",
        calls.load(Ordering::Relaxed)
    );
    assert!(
        assigned >= 1,
        "the capture saw no Assigned: it cannot count Lost"
    );
    assert!(
        lost >= 1,
        "the copy loop never heard its partitions were lost"
    );
    assert_eq!(
        aborted, 1,
        "the transaction open at the cut is aborted, and no other: {failed:?}"
    );
    copier.close().await.expect("close");
    assert_eq!(
        assert_copied_exactly_once(&cluster, &topic, &destination),
        total
    );
}
on_both_protocols!(fenced_commit_stops_delivery, single);

/// Which member of [`mixed_group_with_java_consumer`] is there first (and leaves first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum First {
    Ours,
    Java,
}

const MIXED_PARTITIONS: i32 = 4;

/// Waits until the broker describes the group as `ours` and `java` each owning half of the
/// partitions, disjoint, and our member's own view agrees.
async fn wait_for_split(
    cluster: &Cluster,
    group: &str,
    topic: &str,
    ours: &BusyMember,
    ours_id: &str,
    java: &JavaConsumer,
) {
    let all: BTreeSet<i32> = (0..MIXED_PARTITIONS).collect();
    let mut last = Default::default();
    // Each describe starts a JVM (~2-3 s): bounded in count as well as time.
    let end = Instant::now() + WAIT;
    for _ in 0..20 {
        let owned: BTreeSet<i32> = ours.log().owned().iter().map(|tp| tp.partition).collect();
        let members = describe_members(cluster, group, topic);
        let (Some(o), Some(j)) = (members.get(ours_id), members.get(&java.client_id)) else {
            last = members;
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        let half = (MIXED_PARTITIONS / 2) as usize;
        if o.len() == half && j.len() == half && o.is_disjoint(j) && *o == owned {
            assert_eq!(o | j, all);
            eprintln!("split: ours {o:?}, Java {j:?}");
            return;
        }
        last = members;
        if Instant::now() > end {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!(
        "no even, disjoint split: the broker says {last:?}; ours: {}",
        ours.log().summary()
    );
}

/// Waits until `java` owns every partition, as the broker describes the group.
async fn wait_for_java_alone(cluster: &Cluster, group: &str, topic: &str, java: &JavaConsumer) {
    let mut last = Default::default();
    let end = Instant::now() + WAIT;
    for _ in 0..20 {
        let members = describe_members(cluster, group, topic);
        if members.len() == 1
            && members
                .get(&java.client_id)
                .is_some_and(|p| p.len() == MIXED_PARTITIONS as usize)
        {
            return;
        }
        last = members;
        if Instant::now() > end {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("the Java consumer does not own every partition: {last:?}");
}

/// One of ours and one Java console consumer in one group (classic with cooperative-sticky,
/// or KIP-848): the one there first reads alone, the other joins and they split the
/// partitions evenly and disjointly (as the broker describes the group and as our member sees
/// it), then the first leaves and the other takes everything. Every record is read at least
/// once (Java commits every 500 ms, so a hand-over may repeat a few), ours only while it owns
/// the partition.
async fn mixed_group_with_java_consumer(cluster: Cluster, protocol: GroupProtocol, first: First) {
    let _g = cluster.shared();
    let topic = support::unique_topic("membership-mixed");
    cluster.create_topic(&topic, MIXED_PARTITIONS as u32, 1, &[]);
    let group = support::unique_topic("mixed");
    let ours_id = support::unique_topic("exactly-mixed");
    let java_id = support::unique_topic("java-mixed");
    let batch = |label: usize| {
        let (cluster, topic) = (&cluster, topic.as_str());
        async move {
            let producer = support::producer_with(cluster, &[("linger.ms", "5")], &[]).await;
            let mut acks = Vec::new();
            for i in 0..200 {
                for p in 0..MIXED_PARTITIONS {
                    let value = format!("{label}-{p}-{i}");
                    let record = Record::to(topic).partition(p).value(value);
                    acks.push(producer.send(record).await.expect("send"));
                }
            }
            for ack in acks {
                ack.await.expect("written");
            }
            producer.close().await.expect("close");
        }
    };
    let start_ours = || {
        let (cluster, group, topic, id) =
            (&cluster, group.as_str(), topic.as_str(), ours_id.as_str());
        async move {
            let m = member(
                cluster,
                "ours",
                group,
                protocol,
                topic,
                &[("client.id", id)],
            )
            .await;
            BusyMember::spawn(m, PACE)
        }
    };
    let start_java = || JavaConsumer::start(&cluster, &group, &topic, protocol, &java_id);
    let read_by_both = |ours: &MemberLog, java: &JavaConsumer| -> BTreeSet<(i32, i64)> {
        let mut read: BTreeSet<(i32, i64)> = java.records().iter().map(|r| (r.0, r.1)).collect();
        read.extend(
            ours.deliveries
                .iter()
                .map(|d| (d.partition.partition, d.offset)),
        );
        read
    };

    batch(1).await;
    let (ours_log, java) = match first {
        First::Ours => {
            let ours = start_ours().await;
            wait_until(
                "ours reads alone",
                WAIT,
                || {
                    ours.log().owned().len() == MIXED_PARTITIONS as usize
                        && !ours.log().deliveries.is_empty()
                },
                || ours.log().summary(),
            )
            .await;
            let mut java = start_java();
            wait_for_split(&cluster, &group, &topic, &ours, &ours_id, &java).await;
            batch(2).await;
            wait_until(
                "both read the second batch",
                WAIT,
                || read_by_both(&ours.log(), &java).len() >= 1_600,
                || ours.log().summary(),
            )
            .await;
            java.leave(Duration::from_secs(30));
            wait_until(
                "ours takes every partition",
                WAIT,
                || ours.log().owned().len() == MIXED_PARTITIONS as usize,
                || ours.log().summary(),
            )
            .await;
            batch(3).await;
            wait_until(
                "ours reads the third batch",
                WAIT,
                || read_by_both(&ours.log(), &java).len() >= 2_400,
                || ours.log().summary(),
            )
            .await;
            (ours.depart(Departure::Close).await, java)
        }
        First::Java => {
            let java = start_java();
            wait_until(
                "Java reads alone",
                WAIT,
                || java.records().len() >= 800,
                || format!("{} records", java.records().len()),
            )
            .await;
            let ours = start_ours().await;
            wait_for_split(&cluster, &group, &topic, &ours, &ours_id, &java).await;
            batch(2).await;
            wait_until(
                "both read the second batch",
                WAIT,
                || read_by_both(&ours.log(), &java).len() >= 1_600,
                || ours.log().summary(),
            )
            .await;
            let ours_log = ours.depart(Departure::Close).await;
            wait_for_java_alone(&cluster, &group, &topic, &java).await;
            batch(3).await;
            wait_until(
                "Java reads the third batch",
                WAIT,
                || read_by_both(&ours_log, &java).len() >= 2_400,
                || format!("{} records", java.records().len()),
            )
            .await;
            (ours_log, java)
        }
    };
    assert!(ours_log.lost().is_empty(), "{}", ours_log.summary());
    assert!(
        ours_log.refused_commits().is_empty(),
        "{}",
        ours_log.summary()
    );
    assert_eq!(ours_log.close.as_ref().map(|c| c.1.clone()), Some(Ok(())));
    assert_delivered_while_owned("ours", &ours_log);
    let expected = cluster.read_topic(&topic, ReadCommitted);
    assert_eq!(expected.len(), 2_400);
    let java_records = java.records();
    let read = read_by_both(&ours_log, &java);
    let all: BTreeSet<(i32, i64)> = expected.iter().map(|r| (r.partition, r.offset)).collect();
    assert_eq!(
        read, all,
        "a record nobody read (or one kcat does not hold)"
    );
    for (p, o, v) in &java_records {
        let r = expected
            .iter()
            .find(|r| r.partition == *p && r.offset == *o)
            .expect("kcat holds it");
        assert_eq!(r.value.as_deref(), Some(v.as_str()), "Java read {p}:{o}");
    }
    let ours_read: BTreeSet<(i32, i64)> = ours_log
        .deliveries
        .iter()
        .map(|d| (d.partition.partition, d.offset))
        .collect();
    let java_read: BTreeSet<(i32, i64)> = java_records.iter().map(|r| (r.0, r.1)).collect();
    eprintln!(
        "ours read {}, Java {}, both {}",
        ours_read.len(),
        java_read.len(),
        ours_read.intersection(&java_read).count()
    );
    assert!(!ours_read.is_empty() && !java_read.is_empty());
    // `java` is dropped here: its JVM is killed, as on any panic above.
}

/// [`mixed_group_with_java_consumer`] in both orders.
mod mixed_group_with_java_consumer {
    use super::{Cluster, First, GroupProtocol};

    async fn ours_first(cluster: Cluster, protocol: GroupProtocol) {
        super::mixed_group_with_java_consumer(cluster, protocol, First::Ours).await;
    }
    on_both_protocols!(ours_first, single);

    async fn java_first(cluster: Cluster, protocol: GroupProtocol) {
        super::mixed_group_with_java_consumer(cluster, protocol, First::Java).await;
    }
    on_both_protocols!(java_first, single);
}

/// How long `close()` may take: a LeaveGroup answered, or the rejoin in flight given up.
const CLOSE_BOUND: Duration = Duration::from_secs(10);

/// Classic: a member is told to revoke partitions (a second member joined), hands them back at
/// its next `poll` and rejoins; the other member then leaves, and about 1 s after the hand-back
/// the first is closed, while its rejoin is under way: `close()` returns Ok within
/// [`CLOSE_BOUND`]. Tried at 0.5, 1 and 1.5 s after the hand-back, so the close meets the
/// rejoin in more than one state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_during_rejoin_is_bounded() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _g = cluster.shared();
    let topic = support::unique_topic("membership-close");
    cluster.create_topic(&topic, 4, 1, &[]);
    fill_partitions(&cluster, &topic, 4, 5_000, RECORD_BYTES).await;
    for close_after in [500, 1_000, 1_500].map(Duration::from_millis) {
        let group = support::unique_topic("close");
        let protocol = GroupProtocol::Classic;
        let rejoining = busy_member(&cluster, "rejoining", &group, protocol, &topic).await;
        wait_until(
            "the first member reads",
            WAIT,
            || rejoining.log().owned().len() == 4 && rejoining.log().deliveries.len() >= 400,
            || rejoining.log().summary(),
        )
        .await;
        let leaving = busy_member(&cluster, "leaving", &group, protocol, &topic).await;
        wait_until(
            "the first member hands revoked partitions back",
            WAIT,
            || !rejoining.log().revocations_handed_back.is_empty(),
            || rejoining.log().summary(),
        )
        .await;
        let handed_back = rejoining.log().revocations_handed_back[0];
        tokio::time::sleep_until((handed_back + close_after / 2).into()).await;
        leaving.depart_now(Departure::Close);
        tokio::time::sleep_until((handed_back + close_after).into()).await;
        let closed = rejoining.depart(Departure::Close).await;
        let left = leaving.finish().await;
        let (took, outcome) = closed.close.clone().expect("closed");
        eprintln!(
            "close {close_after:?} after the hand-back: {outcome:?} in {took:?}; the other left with {:?}",
            left.close
        );
        assert_eq!(
            outcome,
            Ok(()),
            "close {close_after:?} after the hand-back: {}",
            closed.summary()
        );
        assert!(
            took <= CLOSE_BOUND,
            "close {close_after:?} after the hand-back took {took:?}: {}",
            closed.summary()
        );
        assert_eq!(left.close.as_ref().map(|c| c.1.clone()), Some(Ok(())));
        let logs = [("rejoining", &closed), ("leaving", &left)];
        for (name, log) in &logs {
            assert_delivered_while_owned(name, log);
        }
        assert_no_overlapping_ownership(&logs);
    }
}

#[test]
fn parses_both_protocols_describe_tables() {
    use support::java_group::{parse_console_line, parse_members};
    let kip848 = "\nGROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS CURRENT-EPOCH CURRENT-ASSIGNMENT TARGET-EPOCH TARGET-ASSIGNMENT\n\
                  g1 DX5h /127.0.0.1 javac 2 1 t-1:0,1 1 t-1:0,1\n\
                  g1 AB /127.0.0.1 ours 0 1 - 2 t-1:2\n";
    let m = parse_members(kip848, "g1", "t-1");
    assert_eq!(m["javac"], BTreeSet::from([0, 1]));
    assert!(
        m["ours"].is_empty(),
        "the target is not the current assignment"
    );
    let classic = "GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS ASSIGNMENT\n\
                   g1 java-1 /127.0.0.1 java 2 t-1(1,3)\n";
    assert_eq!(
        parse_members(classic, "g1", "t-1")["java"],
        BTreeSet::from([1, 3])
    );
    assert_eq!(
        parse_console_line("Partition:2\tOffset:17\tp2-x"),
        Some((2, 17, "p2-x".into()))
    );
}
