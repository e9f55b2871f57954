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
//! - `close()` is bounded while the member is rejoining, and by one `request.timeout.ms` with
//!   auto-commit on and a coordinator that answers nothing;
//! - an eager classic member processing longer than its session through a rebalance is kept
//!   alive by its heartbeats, and its `Revoked` commit is accepted;
//! - a late KIP-848 heartbeat answer never undoes a leave;
//! - a classic member rejoins for a subscription changed mid-join, and for partitions added
//!   to a topic it reads (rule M5).
//!
//! Every record delivered is checked against kcat's read of the topic; every copy is read back
//! read_committed with kcat.
//!
//! Tests hold their cluster's lock across awaits on purpose (see `broker_failure.rs`).
#![allow(clippy::await_holding_lock)]

#[macro_use]
mod support;

use std::collections::{BTreeMap, BTreeSet};
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

/// Every record of `topic` (kcat, read_committed) delivered exactly once in `delivered`
/// (`(topic, partition, offset, value)`, across members), and nothing kcat does not hold.
fn assert_topic_delivered_once(
    cluster: &Cluster,
    topic: &str,
    delivered: &[(String, i32, i64, String)],
) -> usize {
    let mut ours: Vec<(i32, i64, String)> = delivered
        .iter()
        .filter(|d| d.0 == topic)
        .map(|d| (d.1, d.2, d.3.clone()))
        .collect();
    ours.sort();
    let unique: BTreeSet<(i32, i64)> = ours.iter().map(|d| (d.0, d.1)).collect();
    assert_eq!(
        unique.len(),
        ours.len(),
        "{topic}: a record delivered twice"
    );
    let mut expected: Vec<(i32, i64, String)> = cluster
        .read_topic(topic, ReadCommitted)
        .into_iter()
        .map(|r| (r.partition, r.offset, r.value.unwrap_or_default()))
        .collect();
    expected.sort();
    assert_eq!(
        ours, expected,
        "{topic}: what was delivered is not what kcat reads"
    );
    ours.len()
}

/// What `log`'s member delivered, as `(topic, partition, offset, value)`.
fn deliveries_of(log: &MemberLog) -> Vec<(String, i32, i64, String)> {
    log.deliveries
        .iter()
        .map(|d| {
            (
                d.partition.topic.to_string(),
                d.partition.partition,
                d.offset,
                d.value.clone(),
            )
        })
        .collect()
}

/// Polls `m` (committing after records, as [`Member::poll_once`] does) until `done` holds
/// for its log, within [`WAIT`].
async fn poll_until(m: &mut Member, what: &str, done: impl Fn(&MemberLog) -> bool) {
    let end = Instant::now() + WAIT;
    while !done(&m.log()) {
        assert!(Instant::now() < end, "{what}: {}", m.log().summary());
        m.poll_once(Duration::from_millis(200)).await;
    }
}

/// Latency on the coordinator while a classic member joins, so that a change of its
/// subscription lands while the JoinGroup carrying the old one is in flight.
const JOIN_LATENCY_MS: u64 = 3_000;

/// How long a classic member may take, after its subscription changed, to own every
/// partition of the new one: the round under way ends, then one more rebalance (eager: with a
/// poll in between that hands the partitions back). Far below "never" (issue: 40 s and no
/// rejoin).
const RESUBSCRIBE_BOUND: Duration = Duration::from_secs(20);

/// Classic (`strategy`): `subscribe([a, b])` while the member's JoinGroup carrying `[a]` is
/// in flight (3 s of latency on the coordinator). The round ends with an assignment for `[a]`
/// (cooperative: taken; eager: not taken, as it would be revoked at once), the member rejoins
/// with `[a, b]` and reads the records written to `b` after the change: every record of both
/// topics once, as kcat reads them.
async fn subscription_change_mid_join(cluster: Cluster, strategy: &str) {
    let _g = cluster.exclusive();
    let a = support::unique_topic("membership-resub-a");
    let b = support::unique_topic("membership-resub-b");
    cluster.create_topic(&a, 2, 1, &[]);
    cluster.create_topic(&b, 2, 1, &[]);
    fill_partitions(&cluster, &a, 2, 50, RECORD_BYTES).await;
    let group = support::unique_topic("resub");
    let mut m = member(
        &cluster,
        "resubscribing",
        &group,
        GroupProtocol::Classic,
        &a,
        &[("partition.assignment.strategy", strategy)],
    )
    .await;
    let proxy = cluster.proxy(0);
    proxy.add_toxic(
        "slow-join",
        "latency",
        "downstream",
        &format!("{{\"latency\":{JOIN_LATENCY_MS}}}"),
    );
    // The first JoinGroup only hands out the member id (KIP-394); the second, sent at once,
    // carries the subscription and is answered 3 s later.
    let end = Instant::now() + WAIT;
    while m.consumer().group_metadata().member_id.is_empty() {
        assert!(Instant::now() < end, "no member id: {}", m.log().summary());
        m.poll_once(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = m.consumer().group_metadata().generation_id;
    m.consumer().subscribe([a.clone(), b.clone()]).unwrap();
    let after = m.consumer().group_metadata().generation_id;
    assert_eq!(
        (before, after),
        (-1, -1),
        "the JoinGroup was answered before the subscription changed: not mid-join"
    );
    let changed_at = Instant::now();
    proxy.remove_toxic("slow-join");
    fill_partitions(&cluster, &b, 2, 50, RECORD_BYTES).await;
    let all: BTreeSet<TopicPartition> = [&a, &b]
        .iter()
        .flat_map(|t| (0..2).map(|p| TopicPartition::new(t.as_str(), p)))
        .collect();
    poll_until(&mut m, "every record of a and b delivered", |log| {
        log.owned() == all && log.deliveries.len() >= 200
    })
    .await;
    let log = m.depart(Departure::Close).await;
    let owned_all_in = all
        .iter()
        .filter_map(|tp| log.owned_since(tp, log.first_poll.expect("polled")))
        .max()
        .expect("owned")
        .saturating_duration_since(changed_at);
    eprintln!(
        "{strategy}: every partition of [a, b] owned {owned_all_in:?} after the change; {}",
        log.summary()
    );
    if strategy == "cooperative-sticky" {
        // The round under way was for [a] (what proves the change came mid-join) ...
        let first = &log.changes[0];
        assert_eq!(first.kind, "assigned", "{}", log.summary());
        assert!(
            first.partitions.iter().all(|tp| *tp.topic == *a),
            "the first assignment was already for [a, b]: {}",
            log.summary()
        );
    }
    // ... and the member rejoined for [a, b] without waiting for anything else.
    assert!(
        owned_all_in <= RESUBSCRIBE_BOUND,
        "b's partitions owned only {owned_all_in:?} after the change: {}",
        log.summary()
    );
    assert!(log.lost().is_empty(), "{}", log.summary());
    assert!(log.refused_commits().is_empty(), "{}", log.summary());
    assert!(log.poll_errors.is_empty(), "{}", log.summary());
    assert_delivered_while_owned("resubscribing", &log);
    let delivered = deliveries_of(&log);
    assert_eq!(assert_topic_delivered_once(&cluster, &a, &delivered), 100);
    assert_eq!(assert_topic_delivered_once(&cluster, &b, &delivered), 100);
    assert_eq!(log.close.as_ref().map(|c| c.1.clone()), Some(Ok(())));
}

/// [`subscription_change_mid_join`] with both rebalance protocols.
mod classic_subscription_change_mid_join_is_applied {
    use super::Cluster;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cooperative() {
        if let Some(cluster) = Cluster::single() {
            super::subscription_change_mid_join(cluster, "cooperative-sticky").await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn eager() {
        if let Some(cluster) = Cluster::single() {
            super::subscription_change_mid_join(cluster, "range").await;
        }
    }
}

/// The `metadata.max.age.ms` of [`new_partitions_are_assigned`]'s member.
const METADATA_MAX_AGE: Duration = Duration::from_secs(3);

/// One classic rebalance on the test bed (a leader rejoining alone, eager with the poll that
/// hands its partitions back), with room for a loaded machine.
const REBALANCE_BOUND: Duration = Duration::from_secs(10);

/// Classic (`strategy`): a member reads a one-partition topic; the topic gets a second
/// partition (`exactly::Admin::create_partitions`) and records are written to both. The
/// member (the group's leader) sees the partition count move in a metadata refresh (at most
/// `metadata.max.age.ms` later), rejoins and owns the new partition within that age and a
/// rebalance, and reads every record of both partitions once, as kcat reads them.
async fn new_partitions_are_assigned(cluster: Cluster, strategy: &str) {
    let _g = cluster.shared();
    let topic = support::unique_topic("membership-grow");
    cluster.create_topic(&topic, 1, 1, &[]);
    fill_partitions(&cluster, &topic, 1, 50, RECORD_BYTES).await;
    let group = support::unique_topic("grow");
    let max_age = METADATA_MAX_AGE.as_millis().to_string();
    let mut m = member(
        &cluster,
        "growing",
        &group,
        GroupProtocol::Classic,
        &topic,
        &[
            ("partition.assignment.strategy", strategy),
            ("metadata.max.age.ms", max_age.as_str()),
        ],
    )
    .await;
    poll_until(&mut m, "the first partition read", |log| {
        log.owned().len() == 1 && log.deliveries.len() >= 50
    })
    .await;
    let admin = cluster.admin().await;
    let grown = admin
        .create_partitions([(topic.as_str(), 2)], false)
        .await
        .expect("CreatePartitions answered");
    assert!(grown[&topic].is_ok(), "{grown:?}");
    let grown_at = Instant::now();
    // The producer that writes to it must find the new partition led.
    support::eventually("the new partition has a leader", WAIT, || async {
        let described = admin.describe_topics([&topic]).await.expect("described");
        described[&topic].as_ref().is_ok_and(|t| {
            t.partitions.len() == 2 && t.partitions.iter().all(|p| p.leader.is_some())
        })
    })
    .await;
    fill_partitions(&cluster, &topic, 2, 50, RECORD_BYTES).await;
    let new = TopicPartition::new(topic.as_str(), 1);
    poll_until(&mut m, "the new partition owned and read", |log| {
        log.owned().contains(&new) && log.deliveries.len() >= 150
    })
    .await;
    let log = m.depart(Departure::Close).await;
    let assigned_in = log
        .owned_since(&new, grown_at)
        .expect("owned")
        .saturating_duration_since(grown_at);
    eprintln!("{strategy}: the new partition owned {assigned_in:?} after it was created");
    let bound = METADATA_MAX_AGE + REBALANCE_BOUND;
    assert!(
        assigned_in <= bound,
        "the new partition was owned only {assigned_in:?} after it was created (bound {bound:?}): {}",
        log.summary()
    );
    assert!(log.lost().is_empty(), "{}", log.summary());
    assert!(log.refused_commits().is_empty(), "{}", log.summary());
    assert!(log.poll_errors.is_empty(), "{}", log.summary());
    assert_delivered_while_owned("growing", &log);
    let expected = cluster.read_topic(&topic, ReadCommitted);
    assert_eq!(expected.iter().filter(|r| r.partition == 1).count(), 50);
    assert_eq!(assert_delivered_once(&[("growing", &log)], &expected), 150);
}

/// [`new_partitions_are_assigned`] with both rebalance protocols.
mod classic_new_partitions_are_assigned {
    use super::Cluster;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cooperative() {
        if let Some(cluster) = Cluster::single() {
            super::new_partitions_are_assigned(cluster, "cooperative-sticky").await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn eager() {
        if let Some(cluster) = Cluster::single() {
            super::new_partitions_are_assigned(cluster, "range").await;
        }
    }
}

/// How long the eager member of [`classic_eager_member_survives_a_rebalance_while_processing`]
/// processes its first records: well past its 6 s session, within `max.poll.interval.ms`.
const PROCESSING: Duration = Duration::from_secs(15);

/// Classic eager (`range`): a member is handed records and processes them for 15 s (its
/// session is 6 s, `max.poll.interval.ms` 30 s) while a second member joins. Its heartbeats
/// go on while it processes (answered REBALANCE_IN_PROGRESS, which the coordinator counts as
/// liveness), so it is not expired: the `Revoked` its next poll returns is committed (what it
/// processed, and nothing before: no commit after delivery), the group rebalances once both
/// joined, and no record is delivered twice (a refused commit would have had the second member
/// read again from the start). Checked against kcat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_eager_member_survives_a_rebalance_while_processing() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _g = cluster.shared();
    let topic = support::unique_topic("membership-eager");
    cluster.create_topic(&topic, 2, 1, &[]);
    fill_partitions(&cluster, &topic, 2, 500, RECORD_BYTES).await;
    let group = support::unique_topic("eager");
    let eager = [
        ("partition.assignment.strategy", "range"),
        ("max.poll.interval.ms", "30000"),
        ("max.poll.records", "100"),
    ];
    let mut slow = member(
        &cluster,
        "slow",
        &group,
        GroupProtocol::Classic,
        &topic,
        &eager,
    )
    .await;
    // What it processed, committed when it is told to give partitions up (not on delivery).
    let mut processed = exactly::PendingOffsets::new();
    let mut revoke_commits: Vec<(Instant, Result<(), String>)> = Vec::new();
    let took = |event: &ConsumerEvent, processed: &mut exactly::PendingOffsets| {
        if let ConsumerEvent::Records(records) = event {
            for r in records {
                processed.processed(r.topic_partition(), r.offset);
            }
        }
    };
    // Alone, it owns both partitions and is handed its first records.
    let end = Instant::now() + WAIT;
    loop {
        assert!(Instant::now() < end, "no records: {}", slow.log().summary());
        if let Some(event) = slow.poll_uncommitted(Duration::from_secs(1)).await {
            took(&event, &mut processed);
            if matches!(event, ConsumerEvent::Records(_)) {
                break;
            }
        }
    }
    assert_eq!(slow.log().owned().len(), 2);
    // A second member joins while the first processes.
    let second = member(
        &cluster,
        "second",
        &group,
        GroupProtocol::Classic,
        &topic,
        &eager[..2],
    )
    .await;
    let second = BusyMember::spawn(second, PACE);
    let joined_at = Instant::now();
    tokio::time::sleep(PROCESSING).await;
    // Back from processing: the rebalance is handled as a service does (commit at Revoked),
    // with short processing from here on.
    let end = Instant::now() + Duration::from_secs(120);
    while slow.log().deliveries.len() + second.log().deliveries.len() < 1_000 {
        assert!(
            Instant::now() < end,
            "not all delivered: slow: {}; second: {}",
            slow.log().summary(),
            second.log().summary()
        );
        let Some(event) = slow.poll_uncommitted(Duration::from_millis(500)).await else {
            continue;
        };
        took(&event, &mut processed);
        match &event {
            ConsumerEvent::Records(_) => tokio::time::sleep(PACE).await,
            ConsumerEvent::Revoked(tps) => {
                let committed = slow.consumer().commit(&processed.take()).await;
                revoke_commits.push((Instant::now(), committed.map_err(|e| e.to_string())));
                processed.revoke(tps);
            }
            ConsumerEvent::Lost(tps) => processed.revoke(tps),
            _ => {}
        }
    }
    let second = second.depart(Departure::Close).await;
    let slow = slow.depart(Departure::Close).await;
    eprintln!(
        "slow: {}; second: {}; revoke commits {revoke_commits:?}",
        slow.summary(),
        second.summary()
    );
    let (revoked_at, committed) = revoke_commits
        .first()
        .cloned()
        .unwrap_or_else(|| panic!("no Revoked (expired instead?): {}", slow.summary()));
    assert_eq!(
        committed,
        Ok(()),
        "the Revoked commit was refused: {}",
        slow.summary()
    );
    let revoked_after = revoked_at - joined_at;
    assert!(
        revoked_after >= PROCESSING - Duration::from_secs(1) && revoked_after > SESSION,
        "the Revoked came {revoked_after:?} after the second member joined: the processing did not outlast a session"
    );
    assert!(
        revoke_commits.iter().all(|(_, r)| r.is_ok()),
        "{revoke_commits:?}"
    );
    let logs = [("slow", &slow), ("second", &second)];
    for (name, log) in &logs {
        assert!(
            log.lost().is_empty(),
            "{name} lost partitions: {}",
            log.summary()
        );
        assert!(
            log.refused_commits().is_empty(),
            "{name}: {}",
            log.summary()
        );
        assert!(log.poll_errors.is_empty(), "{name}: {}", log.summary());
        assert!(!log.deliveries.is_empty(), "{name} never read");
        assert_delivered_while_owned(name, log);
    }
    assert_no_overlapping_ownership(&logs);
    assert_eq!(
        assert_delivered_once(&logs, &cluster.read_topic(&topic, ReadCommitted)),
        1_000
    );
}

/// How long [`kip848_leave_is_not_undone_by_a_late_answer`] watches the group after the
/// rejoin: ten heartbeat intervals.
const SETTLE: Duration = Duration::from_secs(5);

/// The latency that holds the KIP-848 member's heartbeat answers across its leave (released
/// by removing the toxic, long before it would pass).
const HELD_ANSWERS_MS: u64 = 30_000;

/// KIP-848: two members share a 4-partition topic, two each. One of them ("leaving") stops
/// polling; with its heartbeats kept back by a generation hold, the topic grows to 6
/// partitions and a latency toxic on the coordinator starts holding every answer back. The
/// hold ends, and the heartbeat that goes then is answered with a new epoch and an assignment
/// with a new partition: held. Past `max.poll.interval.ms` (3 s) the member leaves (the
/// leave queued behind that heartbeat) and the application polls right after (`Lost`). Only
/// then does the held answer arrive, naming the epoch and partitions of the membership the
/// member left, while requests take 3 s to reach the coordinator (so whatever the answer
/// leaves behind stays visible). It must not undo the leave: the member's epoch stays 0 (a
/// commit would otherwise carry the dead epoch) and nothing is assigned from it; then no
/// partition is owned by both members at once, no record is delivered twice, there is a
/// single `Lost`, and the member rejoins and gets its share again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip848_leave_is_not_undone_by_a_late_answer() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _g = cluster.exclusive();
    let topic = support::unique_topic("membership-late");
    cluster.create_topic(&topic, 4, 1, &[]);
    fill_partitions(&cluster, &topic, 4, 2_000, RECORD_BYTES).await;
    let group = support::unique_topic("late");
    let budget = POLL_BUDGET.as_millis().to_string();
    let mut leaving = member(
        &cluster,
        "leaving",
        &group,
        GroupProtocol::Consumer,
        &topic,
        &[
            ("max.poll.records", "100"),
            ("max.poll.interval.ms", budget.as_str()),
            // The held answer must come back, not time out.
            ("request.timeout.ms", "40000"),
        ],
    )
    .await;
    poll_until(&mut leaving, "the first member reads", |log| {
        log.owned().len() == 4 && !log.deliveries.is_empty()
    })
    .await;
    let other = busy_member(&cluster, "other", &group, GroupProtocol::Consumer, &topic).await;
    let split = |leaving: &MemberLog, other: &BusyMember, each: usize| {
        leaving.owned().len() == each && other.log().owned().len() == each
    };
    let end = Instant::now() + WAIT;
    while !split(&leaving.log(), &other, 2) {
        assert!(
            Instant::now() < end,
            "no split: leaving: {}; other: {}",
            leaving.log().summary(),
            other.log().summary()
        );
        leaving.poll_once(Duration::from_millis(200)).await;
        tokio::time::sleep(PACE).await;
    }
    let kept = leaving.log().owned();
    // The stall: no poll from here until the leave. The budget runs from the end of the last
    // poll, before this instant.
    let stalled_at = Instant::now();
    // No heartbeat of this member starts while the hold lasts (at most a second): the group
    // changes meanwhile, and its next heartbeat, answered with that change, is held.
    let hold = leaving.consumer().hold_generation().await;
    let admin = cluster.admin().await;
    let grown = admin
        .create_partitions([(topic.as_str(), 6)], false)
        .await
        .expect("CreatePartitions answered");
    assert!(grown[&topic].is_ok(), "{grown:?}");
    support::eventually("the new partitions have leaders", WAIT, || async {
        let described = admin.describe_topics([&topic]).await.expect("described");
        described[&topic].as_ref().is_ok_and(|t| {
            t.partitions.len() == 6 && t.partitions.iter().all(|p| p.leader.is_some())
        })
    })
    .await;
    // Time for the group coordinator to take the new partitions into its target assignment
    // (the next heartbeat is then answered with them).
    tokio::time::sleep(Duration::from_millis(400)).await;
    let proxy = cluster.proxy(0);
    proxy.add_toxic(
        "held-answers",
        "latency",
        "downstream",
        &format!("{{\"latency\":{HELD_ANSWERS_MS}}}"),
    );
    eprintln!(
        "toxic added {:?} into the stall; the hold's epoch {}, now {}",
        stalled_at.elapsed(),
        hold.metadata().generation_id,
        leaving.consumer().group_metadata().generation_id
    );
    drop(hold);
    tokio::time::sleep_until((stalled_at + POLL_BUDGET + Duration::from_millis(500)).into()).await;
    // The poll right after the leave: Lost, first.
    let first = leaving
        .poll_uncommitted(Duration::from_millis(500))
        .await
        .unwrap_or_else(|| panic!("no event after the stall: {}", leaving.log().summary()));
    match &first {
        ConsumerEvent::Lost(tps) => assert_eq!(
            tps.iter().cloned().collect::<BTreeSet<TopicPartition>>(),
            kept,
            "lost what it owned"
        ),
        other => panic!(
            "the poll after the stall did not return Lost but {}: the leave had not happened",
            describe_event(other)
        ),
    }
    // The answer held since before the leave arrives now, after the poll. Requests take 3 s
    // to reach the coordinator from here, so what that answer leaves behind stays in place
    // until the next one is answered: the member is in no group (epoch 0, its rejoin on the
    // way), it never takes the old membership's epoch back (a commit would carry it), and
    // nothing is assigned from it.
    proxy.add_toxic(
        "slow-requests",
        "latency",
        "upstream",
        r#"{"latency":3000}"#,
    );
    proxy.remove_toxic("held-answers");
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(1) {
        let epoch = leaving.consumer().group_metadata().generation_id;
        assert_eq!(
            epoch,
            0,
            "the answer from before the leave restored its epoch: {}",
            leaving.log().summary()
        );
        if let Some(event) = leaving.poll_uncommitted(Duration::from_millis(20)).await {
            panic!(
                "{} after the leave, before the rejoin was answered: {}",
                describe_event(&event),
                leaving.log().summary()
            );
        }
    }
    proxy.remove_toxic("slow-requests");
    let released_at = Instant::now();
    let end = Instant::now() + WAIT;
    let settled = loop {
        assert!(
            Instant::now() < end,
            "no split again: leaving: {}; other: {}",
            leaving.log().summary(),
            other.log().summary()
        );
        leaving.poll_once(Duration::from_millis(200)).await;
        tokio::time::sleep(PACE).await;
        if split(&leaving.log(), &other, 3) {
            break Instant::now();
        }
    };
    // And it stays so: a member that took the old answer's assignment would be fenced at its
    // next heartbeat (Lost again), or own what the other member was given. Records written
    // meanwhile are read by their owners, once.
    fill_partitions(&cluster, &topic, 6, 500, RECORD_BYTES).await;
    let total = 4 * 2_000 + 6 * 500;
    while settled.elapsed() < SETTLE
        || leaving.log().deliveries.len() + other.log().deliveries.len() < total
    {
        assert!(
            Instant::now() < end,
            "not all read: leaving: {}; other: {}",
            leaving.log().summary(),
            other.log().summary()
        );
        leaving.poll_once(Duration::from_millis(200)).await;
        tokio::time::sleep(PACE).await;
    }
    let rejoined_in = leaving
        .log()
        .changes
        .iter()
        .find(|c| c.kind == "assigned" && c.at >= released_at)
        .map(|c| c.at - released_at);
    let left = leaving.depart(Departure::Close).await;
    let other = other.depart(Departure::Close).await;
    eprintln!(
        "leaving: {}; other: {}; the rejoined member owned partitions again {rejoined_in:?} after the answers were released",
        left.summary(),
        other.summary()
    );
    assert_eq!(left.lost().len(), 1, "lost again: {}", left.summary());
    let logs = [("leaving", &left), ("other", &other)];
    for (name, log) in &logs {
        assert_delivered_while_owned(name, log);
        assert!(
            log.refused_commits().is_empty(),
            "{name}: {}",
            log.summary()
        );
        assert!(log.poll_errors.is_empty(), "{name}: {}", log.summary());
    }
    assert_no_overlapping_ownership(&logs);
    assert_eq!(
        assert_delivered_once(&logs, &cluster.read_topic(&topic, ReadCommitted)),
        total
    );
}

/// One short poll; the last offset delivered per partition goes into `last`.
async fn poll_recording(c: &mut exactly::Consumer, last: &mut BTreeMap<i32, i64>) {
    if let Some(ConsumerEvent::Records(records)) = c
        .poll_timeout(Duration::from_millis(100))
        .await
        .expect("poll")
    {
        for r in records {
            last.insert(r.partition, r.offset);
        }
    }
}

/// `request.timeout.ms` of [`close_is_bounded_by_one_request_timeout`]'s consumer.
const CLOSE_REQUEST_TIMEOUT: Duration = Duration::from_secs(8);

/// With auto-commit on, the coordinator stops answering (a Toxiproxy `timeout` toxic: data
/// is dropped, connections stay open) while an auto-commit is in flight and positions have
/// moved since: `close()` waits for that auto-commit, commits, and leaves, all within one
/// `request.timeout.ms` (8 s, plus a little for the machine), not one timeout each. The
/// offsets the group holds afterwards (Kafka's `kafka-consumer-groups`) never pass what was
/// delivered.
async fn close_is_bounded_by_one_request_timeout(cluster: Cluster, protocol: GroupProtocol) {
    let _g = cluster.exclusive();
    let topic = support::unique_topic("membership-close-bound");
    cluster.create_topic(&topic, 2, 1, &[]);
    fill_partitions(&cluster, &topic, 2, 2_000, RECORD_BYTES).await;
    let group = support::unique_topic("close-bound");
    let timeout = CLOSE_REQUEST_TIMEOUT.as_millis().to_string();
    let mut c = consumer_with(
        &cluster,
        &group,
        protocol,
        OffsetReset::Earliest,
        IsolationLevel::ReadCommitted,
        &topic,
        &[
            ("enable.auto.commit", "true"),
            ("auto.commit.interval.ms", "300"),
            ("max.poll.records", "20"),
            ("request.timeout.ms", timeout.as_str()),
        ],
    )
    .await;
    let mut last: BTreeMap<i32, i64> = BTreeMap::new();
    let end = Instant::now() + WAIT;
    while c.assignment().len() < 2 || last.values().count() < 2 {
        assert!(Instant::now() < end, "nothing read");
        poll_recording(&mut c, &mut last).await;
    }
    let proxy = cluster.proxy(0);
    proxy.add_toxic("black-hole", "timeout", "upstream", r#"{"timeout":0}"#);
    // Buffered records move the positions on; auto-commits of them start and hang.
    for _ in 0..10 {
        poll_recording(&mut c, &mut last).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let began = Instant::now();
    let closed = tokio::time::timeout(Duration::from_secs(60), c.close())
        .await
        .expect("close returns");
    let took = began.elapsed();
    proxy.remove_toxic("black-hole");
    eprintln!("{protocol:?}: close took {took:?}: {closed:?}");
    let bound = CLOSE_REQUEST_TIMEOUT + Duration::from_secs(2);
    assert!(
        took <= bound,
        "close took {took:?} (request.timeout.ms {CLOSE_REQUEST_TIMEOUT:?}, bound {bound:?})"
    );
    for (partition, committed) in cluster.group_offsets(&group, &topic) {
        let delivered = last.get(&partition).map_or(0, |o| o + 1);
        assert!(
            committed <= delivered,
            "partition {partition}: {committed} committed, {delivered} delivered"
        );
    }
}
on_both_protocols!(close_is_bounded_by_one_request_timeout, single);
