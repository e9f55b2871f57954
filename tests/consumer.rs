//! `exactly::Consumer` against real Kafka: read_committed against kcat, group membership with
//! both protocols (KIP-848 and classic) on the transactions-v2 and -v1 clusters, committed
//! offsets and `auto.offset.reset`, and failures (a cut proxy, a killed leader) with offsets
//! committed at every step: no record is skipped or delivered twice. Beside `poll`: the
//! `Stream` forms, pause/resume, manual assignment, seeks to the log edges and to a time,
//! auto-commit (interval, revocation, crash, close) and pattern subscription.
//!
//! Tests hold their cluster's lock across awaits on purpose (see `broker_failure.rs`).
#![allow(clippy::await_holding_lock)]

#[macro_use]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::pin::{Pin, pin};
use std::time::{Duration, Instant};

use exactly::{
    Consumer, ConsumerEvent, ConsumerRecord, GroupProtocol, IsolationLevel, OffsetReset,
    OffsetToCommit, Producer, Record, TimestampType, TopicPartition,
};
use futures_core::Stream;
use support::members::{consumer_with, test_builder};
use support::{Cluster, Isolation};

/// The longest a test waits for one expected thing (a rebalance includes a 6 s session
/// timeout on the test bed).
const WAIT: Duration = Duration::from_secs(60);

fn unique_group(prefix: &str) -> String {
    support::unique_topic(prefix)
}

/// A member of `group` with the test bed's short timeouts, subscribed to `topic`.
async fn consumer(
    cluster: &Cluster,
    group: &str,
    protocol: GroupProtocol,
    reset: OffsetReset,
    isolation: IsolationLevel,
    topic: &str,
) -> Consumer {
    consumer_with(cluster, group, protocol, reset, isolation, topic, &[]).await
}

/// A [`consumer`] from the earliest offset, read_committed: what most tests here read with.
async fn member_from_earliest(
    cluster: &Cluster,
    group: &str,
    protocol: GroupProtocol,
    topic: &str,
) -> Consumer {
    consumer(
        cluster,
        group,
        protocol,
        OffsetReset::Earliest,
        IsolationLevel::ReadCommitted,
        topic,
    )
    .await
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

/// Sends `count` values labelled `{label}-{partition}` to each of `partitions` partitions.
async fn send_to_each_partition(
    producer: &Producer,
    topic: &str,
    partitions: i32,
    label: &str,
    count: usize,
) {
    for partition in 0..partitions {
        send(
            producer,
            topic,
            partition,
            &values(&format!("{label}-{partition}"), count),
        )
        .await;
    }
}

/// What one member saw.
#[derive(Debug, Default)]
struct Seen {
    records: Vec<(i32, i64, String)>,
    events: Vec<ConsumerEvent>,
}

impl Seen {
    /// The offsets of the records seen, in delivery order.
    fn offsets(&self) -> Vec<i64> {
        self.records.iter().map(|r| r.1).collect()
    }
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

/// Polls for `period`, failing with `why` if any record arrives.
async fn assert_no_records_for(c: &mut Consumer, period: Duration, why: &str) {
    let end = Instant::now() + period;
    while Instant::now() < end {
        if let Some(ConsumerEvent::Records(r)) =
            c.poll_timeout(Duration::from_millis(200)).await.unwrap()
        {
            panic!("{why}: {r:?}");
        }
    }
}

/// Commits the position of every owned partition; retried (bounded) while a fault test cuts
/// the coordinator's traffic, so a delivered record is always covered by a commit.
async fn commit_positions(c: &mut Consumer) {
    let offsets: Vec<OffsetToCommit> = c
        .assignment()
        .into_iter()
        .filter_map(|tp| c.position(&tp).map(|o| OffsetToCommit::new(tp, o)))
        .collect();
    let mut last = None;
    for _ in 0..20 {
        match c.commit(&offsets).await {
            Ok(()) => return,
            Err(e) if e.is_retriable() || matches!(e, exactly::Error::Timeout(_)) => {
                last = Some(e);
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("commit {offsets:?}: {e}"),
        }
    }
    panic!("commit did not succeed: {last:?}");
}

fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumes_compressed_batches_from_earliest_kip848() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _g = cluster.shared();
    let topic = support::unique_topic("consumer-smoke");
    cluster.create_topic(&topic, 2, 1, &[]);
    // Compressed batches go through the crate's decoder (bounded decompression).
    let p = producer(&cluster, &[("compression.type", "zstd")]).await;
    send(&p, &topic, 0, &values("a", 5)).await;
    send(&p, &topic, 1, &values("b", 3)).await;
    let mut c = member_from_earliest(
        &cluster,
        &unique_group("g"),
        GroupProtocol::Consumer,
        &topic,
    )
    .await;
    assert!(c.uses_consumer_protocol());
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
}

/// Reads `topic` with our consumer (its own group, from the earliest offset) until `expected`
/// records arrived and nothing more came for a second.
async fn read_all(
    cluster: &Cluster,
    topic: &str,
    isolation: IsolationLevel,
    expected: usize,
) -> Vec<(i32, i64, String)> {
    let mut c = consumer(
        cluster,
        &unique_group("reader"),
        GroupProtocol::Consumer,
        OffsetReset::Earliest,
        isolation,
        topic,
    )
    .await;
    let mut seen = Seen::default();
    consume_until(&mut c, &mut seen, WAIT, |s, _| s.records.len() >= expected).await;
    // Anything more would be a record that must not be delivered.
    assert_no_records_for(
        &mut c,
        Duration::from_secs(1),
        "more records than kcat read",
    )
    .await;
    c.close().await.unwrap();
    let mut out = seen.records;
    out.sort();
    out
}

fn kcat_view(cluster: &Cluster, topic: &str, isolation: Isolation) -> Vec<(i32, i64, String)> {
    let mut out: Vec<_> = cluster
        .read_topic(topic, isolation)
        .into_iter()
        .map(|r| (r.partition, r.offset, r.value.unwrap_or_default()))
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_committed_hides_aborted_and_open() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _g = cluster.shared();
    let topic = support::unique_topic("consumer-rc");
    cluster.create_topic(&topic, 1, 1, &[]);
    let txn_id = support::unique_topic("rc-txn");
    let open_id = support::unique_topic("rc-open");
    let committer = producer(&cluster, &[("transactional.id", txn_id.as_str())]).await;
    committer.init_transactions().await.unwrap();
    committer.begin_transaction().unwrap();
    send(&committer, &topic, 0, &values("committed", 5)).await;
    committer.commit_transaction().await.unwrap();
    committer.begin_transaction().unwrap();
    send(&committer, &topic, 0, &values("aborted", 4)).await;
    committer.abort_transaction().await.unwrap();
    committer.begin_transaction().unwrap();
    send(&committer, &topic, 0, &values("second", 3)).await;
    committer.commit_transaction().await.unwrap();
    // A transaction left open, and plain records after it: both past the last stable offset.
    let open = producer(&cluster, &[("transactional.id", open_id.as_str())]).await;
    open.init_transactions().await.unwrap();
    open.begin_transaction().unwrap();
    send(&open, &topic, 0, &values("open", 2)).await;
    let plain = producer(&cluster, &[]).await;
    send(&plain, &topic, 0, &values("after-open", 2)).await;

    let kcat_committed = kcat_view(&cluster, &topic, Isolation::ReadCommitted);
    let expected: Vec<String> = values("committed", 5)
        .into_iter()
        .chain(values("second", 3))
        .collect();
    assert_eq!(
        kcat_committed
            .iter()
            .map(|r| r.2.clone())
            .collect::<Vec<_>>(),
        expected,
        "kcat's read_committed view"
    );
    let ours = read_all(&cluster, &topic, IsolationLevel::ReadCommitted, 8).await;
    assert_eq!(ours, kcat_committed, "read_committed: ours vs kcat");

    let kcat_all = kcat_view(&cluster, &topic, Isolation::ReadUncommitted);
    assert_eq!(kcat_all.len(), 5 + 4 + 3 + 2 + 2);
    let ours_all = read_all(
        &cluster,
        &topic,
        IsolationLevel::ReadUncommitted,
        kcat_all.len(),
    )
    .await;
    assert_eq!(ours_all, kcat_all, "read_uncommitted: ours vs kcat");

    // Once the open transaction commits, read_committed gets it and what followed.
    open.commit_transaction().await.unwrap();
    let kcat_after = kcat_view(&cluster, &topic, Isolation::ReadCommitted);
    assert_eq!(kcat_after.len(), 8 + 2 + 2);
    let ours_after = read_all(&cluster, &topic, IsolationLevel::ReadCommitted, 12).await;
    assert_eq!(ours_after, kcat_after);
}

/// Runs `$body(cluster, protocol)` once per cluster (TV2, TV1) and group protocol.
macro_rules! on_both_protocols_and_versions {
    ($body:ident) => {
        mod $body {
            group_protocol_test!(kip848_tv2, $body, single, Consumer);
            group_protocol_test!(classic_tv2, $body, single, Classic);
            group_protocol_test!(kip848_tv1, $body, tv1, Consumer);
            group_protocol_test!(classic_tv1, $body, tv1, Classic);
        }
    };
}

/// When each partition event happened, per member.
#[derive(Debug, Default)]
struct Timeline {
    assigned: BTreeMap<(usize, TopicPartition), Instant>,
    revoked: BTreeMap<(usize, TopicPartition), Instant>,
}

/// Polls every member in turn (heartbeats only go out from `poll`) until `done`.
async fn drive(
    members: &mut [Option<Consumer>],
    seen: &mut [Seen],
    timeline: &mut Timeline,
    done: impl Fn(&[Seen], &[Option<Consumer>]) -> bool,
) {
    let end = Instant::now() + WAIT;
    while !done(seen, members) {
        assert!(
            Instant::now() < end,
            "not done within {WAIT:?}: {:?}",
            seen.iter()
                .map(|s| (s.records.len(), &s.events))
                .collect::<Vec<_>>()
        );
        for (i, member) in members.iter_mut().enumerate() {
            let Some(c) = member else { continue };
            let Some(event) = c
                .poll_timeout(Duration::from_millis(100))
                .await
                .expect("poll")
            else {
                continue;
            };
            let now = Instant::now();
            match &event {
                ConsumerEvent::Records(records) => {
                    for r in records {
                        let value = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default());
                        seen[i]
                            .records
                            .push((r.partition, r.offset, value.into_owned()));
                    }
                    commit_positions(c).await;
                }
                ConsumerEvent::Revoked(tps) => {
                    commit_positions(c).await;
                    for tp in tps {
                        timeline.revoked.insert((i, tp.clone()), now);
                    }
                }
                ConsumerEvent::Assigned(tps) => {
                    for tp in tps {
                        timeline.assigned.insert((i, tp.clone()), now);
                    }
                }
                ConsumerEvent::Lost(tps) => panic!("member {i} lost {tps:?}"),
                _ => {}
            }
            seen[i].events.push(event);
        }
    }
}

fn all_records(seen: &[Seen]) -> Vec<(i32, i64, String)> {
    let mut all: Vec<_> = seen.iter().flat_map(|s| s.records.clone()).collect();
    all.sort();
    all
}

/// How the first member of [`two_members`] goes away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Departure {
    /// `close`: it leaves the group, its partitions move at once.
    Close,
    /// Dropped without `close` (a crash): its partitions move when its session expires.
    Kill,
}

async fn group_splits_and_takes_over(cluster: Cluster, protocol: GroupProtocol) {
    two_members(cluster, protocol, Departure::Close).await;
}
on_both_protocols_and_versions!(group_splits_and_takes_over);

async fn group_member_killed(cluster: Cluster, protocol: GroupProtocol) {
    two_members(cluster, protocol, Departure::Kill).await;
}
on_both_protocols_and_versions!(group_member_killed);

/// Two members split 6 partitions; then the first goes away (`departure`) and the second
/// takes every partition. Offsets are committed after every batch and at every Revoked, so
/// no record may reach both members, and none may be missing.
async fn two_members(cluster: Cluster, protocol: GroupProtocol, departure: Departure) {
    let _g = cluster.shared();
    let topic = support::unique_topic("consumer-group");
    cluster.create_topic(&topic, 6, 1, &[]);
    let group = unique_group("split");
    let p = producer(&cluster, &[]).await;
    send_to_each_partition(&p, &topic, 6, "one", 10).await;
    let mut members = vec![None, None];
    let mut seen = vec![Seen::default(), Seen::default()];
    let mut timeline = Timeline::default();
    let new_member = || async {
        let c = member_from_earliest(&cluster, &group, protocol, &topic).await;
        assert_eq!(
            c.uses_consumer_protocol(),
            protocol == GroupProtocol::Consumer
        );
        Some(c)
    };
    // Member 0 alone takes every partition and reads half of what is there.
    members[0] = new_member().await;
    drive(&mut members, &mut seen, &mut timeline, |s, m| {
        all_records(s).len() >= 30 && m[0].as_ref().is_some_and(|c| c.assignment().len() == 6)
    })
    .await;
    // Member 1 joins: member 0 must give up three partitions (KIP-848 and classic
    // cooperative-sticky: exactly those three), handing them over only after Revoked.
    members[1] = new_member().await;
    drive(&mut members, &mut seen, &mut timeline, |s, m| {
        all_records(s).len() >= 60
            && m.iter()
                .all(|c| c.as_ref().is_some_and(|c| c.assignment().len() == 3))
    })
    .await;
    assert!(
        seen[0]
            .events
            .iter()
            .any(|e| matches!(e, ConsumerEvent::Revoked(p) if p.len() >= 3)),
        "member 0 was told before its partitions moved: {:?}",
        seen[0].events
    );
    // Member 0 goes away: member 1 takes its partitions and reads what comes next.
    let leaving = members[0].take().unwrap();
    let departed_at = Instant::now();
    match departure {
        Departure::Close => leaving.close().await.expect("close"),
        Departure::Kill => drop(leaving),
    }
    send_to_each_partition(&p, &topic, 6, "two", 10).await;
    drive(&mut members, &mut seen, &mut timeline, |s, m| {
        all_records(s).len() >= 120 && m[1].as_ref().is_some_and(|c| c.assignment().len() == 6)
    })
    .await;

    // Exactly once: no record twice (offsets were committed at every Revoked), none missing.
    let all = all_records(&seen);
    let expected = kcat_view(&cluster, &topic, Isolation::ReadCommitted);
    assert_eq!(expected.len(), 120);
    assert_exactly_once(&all, &expected);
    // Per member and partition, offsets only go up.
    for s in &seen {
        let mut last: BTreeMap<i32, i64> = BTreeMap::new();
        for (partition, offset, _) in &s.records {
            let prev = last.insert(*partition, *offset);
            assert!(
                prev.is_none_or(|p| p < *offset),
                "offsets went back on {partition}"
            );
        }
    }
    // A partition that moved from member 0 to member 1 while member 0 lived was revoked (and
    // its offsets committed) before member 1 got it. (After a close or a crash they move
    // without one.)
    for ((member, tp), assigned_at) in &timeline.assigned {
        if *member != 1 || *assigned_at > departed_at {
            continue;
        }
        let revoked_at = timeline.revoked.get(&(0, tp.clone()));
        assert!(
            revoked_at.is_some_and(|r| r < assigned_at),
            "{tp:?} reached member 1 before member 0 was told it was revoked"
        );
    }
    // Member 1 ended with every partition and a generation / epoch the coordinator gave it.
    let last = members[1].take().unwrap();
    let meta = last.group_metadata();
    assert!(
        meta.generation_id > 0 && !meta.member_id.is_empty(),
        "{meta:?}"
    );
    last.close().await.unwrap();
}

/// Classic, cooperative-sticky (KIP-429, the classic default): when a second member joins,
/// the first is told Revoked only for the three partitions that move, keeps reading the other
/// three without a Revoked or a new Assigned, and with offsets committed at Revoked no record
/// reaches both members.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_cooperative_sticky_moves_only_what_balance_needs() {
    if let Some(cluster) = Cluster::single() {
        second_classic_member_joins(cluster, None).await;
    }
}

/// `partition.assignment.strategy=range` keeps the eager protocol: the first member revokes
/// all six, then gets three back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_range_is_eager() {
    if let Some(cluster) = Cluster::single() {
        second_classic_member_joins(cluster, Some("range")).await;
    }
}

/// Two classic members; `strategy` None is the default (cooperative-sticky).
async fn second_classic_member_joins(cluster: Cluster, strategy: Option<&str>) {
    let extra: Vec<(&str, &str)> = strategy
        .map(|s| ("partition.assignment.strategy", s))
        .into_iter()
        .collect();
    let _g = cluster.shared();
    let topic = support::unique_topic("consumer-coop");
    cluster.create_topic(&topic, 6, 1, &[]);
    let group = unique_group("coop");
    let p = producer(&cluster, &[]).await;
    for partition in 0..6 {
        send(
            &p,
            &topic,
            partition,
            &values(&format!("one-{partition}"), 10),
        )
        .await;
    }
    let mut members = vec![None, None];
    let mut seen = vec![Seen::default(), Seen::default()];
    let mut timeline = Timeline::default();
    for i in 0..2 {
        if i == 1 {
            // Member 0 alone owns all six and has read half of what is there.
            drive(&mut members, &mut seen, &mut timeline, |s, m| {
                all_records(s).len() >= 30
                    && m[0].as_ref().is_some_and(|c| c.assignment().len() == 6)
            })
            .await;
        }
        let c = consumer_with(
            &cluster,
            &group,
            GroupProtocol::Classic,
            OffsetReset::Earliest,
            IsolationLevel::ReadCommitted,
            &topic,
            &extra,
        )
        .await;
        assert!(!c.uses_consumer_protocol());
        members[i] = Some(c);
    }
    drive(&mut members, &mut seen, &mut timeline, |s, m| {
        all_records(s).len() >= 60
            && m.iter()
                .all(|c| c.as_ref().is_some_and(|c| c.assignment().len() == 3))
    })
    .await;
    for partition in 0..6 {
        send(
            &p,
            &topic,
            partition,
            &values(&format!("two-{partition}"), 10),
        )
        .await;
    }
    drive(&mut members, &mut seen, &mut timeline, |s, _| {
        all_records(s).len() >= 120
    })
    .await;

    let partitions = |events: &[ConsumerEvent], revoked: bool| -> Vec<Vec<TopicPartition>> {
        events
            .iter()
            .filter_map(|e| match e {
                ConsumerEvent::Revoked(tps) if revoked => Some(tps.clone()),
                ConsumerEvent::Assigned(tps) if !revoked => Some(tps.clone()),
                _ => None,
            })
            .collect()
    };
    let all_six: Vec<TopicPartition> = (0..6)
        .map(|i| TopicPartition::new(topic.as_str(), i))
        .collect();
    let kept: BTreeSet<TopicPartition> = members[0]
        .as_ref()
        .unwrap()
        .assignment()
        .into_iter()
        .collect();
    let moved: BTreeSet<TopicPartition> = members[1]
        .as_ref()
        .unwrap()
        .assignment()
        .into_iter()
        .collect();
    assert_eq!(kept.len(), 3);
    assert!(kept.is_disjoint(&moved));
    if strategy == Some("range") {
        // Eager: everything revoked, then three given back; member 1 gets its three only
        // after member 0 was told.
        assert_eq!(
            partitions(&seen[0].events, true)[0],
            all_six,
            "{:?}",
            seen[0].events
        );
        assert_eq!(
            partitions(&seen[0].events, false),
            vec![all_six.clone(), kept.iter().cloned().collect::<Vec<_>>()]
        );
        for tp in &moved {
            assert!(timeline.revoked[&(0, tp.clone())] < timeline.assigned[&(1, tp.clone())]);
        }
        let all = all_records(&seen);
        let unique: BTreeSet<_> = all.iter().map(|r| (r.0, r.1)).collect();
        assert_eq!(unique.len(), all.len(), "a record was delivered twice");
        assert_eq!(all, kcat_view(&cluster, &topic, Isolation::ReadCommitted));
        for c in members.into_iter().flatten() {
            c.close().await.unwrap();
        }
        return;
    }
    // Member 0: one Assigned (all six), one Revoked (exactly the three that moved).
    assert_eq!(
        partitions(&seen[0].events, false),
        vec![all_six],
        "{:?}",
        seen[0].events
    );
    assert_eq!(
        partitions(&seen[0].events, true),
        vec![moved.iter().cloned().collect::<Vec<_>>()],
        "member 0 revoked more than what moved: {:?}",
        seen[0].events
    );
    // Member 1: the three, once, only after member 0 was told (the two-phase hand-over).
    assert_eq!(
        partitions(&seen[1].events, false),
        vec![moved.iter().cloned().collect::<Vec<_>>()]
    );
    assert!(partitions(&seen[1].events, true).is_empty());
    for tp in &moved {
        let revoked_at = timeline.revoked[&(0, tp.clone())];
        assert!(revoked_at < timeline.assigned[&(1, tp.clone())]);
    }
    // The kept partitions were read by member 0 alone, every offset once, in order.
    for tp in &kept {
        let offsets: Vec<i64> = seen[0]
            .records
            .iter()
            .filter(|r| r.0 == tp.partition)
            .map(|r| r.1)
            .collect();
        assert_eq!(offsets, (0..20).collect::<Vec<_>>(), "{tp:?}");
        assert!(seen[1].records.iter().all(|r| r.0 != tp.partition));
    }
    // Exactly once across the hand-over, and what we read is what kcat reads.
    let all = all_records(&seen);
    let unique: BTreeSet<_> = all.iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(unique.len(), all.len(), "a record was delivered twice");
    assert_eq!(all, kcat_view(&cluster, &topic, Isolation::ReadCommitted));
    for c in members.into_iter().flatten() {
        c.close().await.unwrap();
    }
}

async fn starts_from_committed_else_reset(cluster: Cluster, protocol: GroupProtocol) {
    let _g = cluster.shared();
    let topic = support::unique_topic("consumer-reset");
    cluster.create_topic(&topic, 1, 1, &[]);
    let p = producer(&cluster, &[]).await;
    send(&p, &topic, 0, &values("before", 5)).await;
    let tp = TopicPartition::new(topic.as_str(), 0);

    // latest: starts at the end, sees only what is written after the assignment.
    let group = unique_group("latest");
    let mut c = consumer(
        &cluster,
        &group,
        protocol,
        OffsetReset::Latest,
        IsolationLevel::ReadCommitted,
        &topic,
    )
    .await;
    let mut seen = Seen::default();
    consume_until(&mut c, &mut seen, WAIT, |_, c| c.position(&tp) == Some(5)).await;
    send(&p, &topic, 0, &values("after", 3)).await;
    consume_until(&mut c, &mut seen, WAIT, |s, _| s.records.len() >= 3).await;
    assert_eq!(seen.offsets(), vec![5, 6, 7]);
    // Commit 6, close; the next member of the group starts there.
    c.commit(&[OffsetToCommit::new(tp.clone(), 6)])
        .await
        .unwrap();
    c.close().await.unwrap();
    let mut c = member_from_earliest(&cluster, &group, protocol, &topic).await;
    let mut seen = Seen::default();
    consume_until(&mut c, &mut seen, WAIT, |s, _| s.records.len() >= 2).await;
    assert_eq!(seen.offsets(), vec![6, 7]);
    assert_eq!(
        c.committed(std::slice::from_ref(&tp)).await.unwrap(),
        vec![(tp.clone(), Some(8))]
    );
    // seek: back to 1.
    c.seek(&tp, 1).unwrap();
    let mut seen = Seen::default();
    consume_until(&mut c, &mut seen, WAIT, |s, _| s.records.len() >= 7).await;
    assert_eq!(seen.records.first().map(|r| r.1), Some(1));
    c.close().await.unwrap();

    // earliest, new group: everything.
    let mut c = member_from_earliest(&cluster, &unique_group("earliest"), protocol, &topic).await;
    let mut seen = Seen::default();
    consume_until(&mut c, &mut seen, WAIT, |s, _| s.records.len() >= 8).await;
    assert_eq!(seen.records.len(), 8);
    c.close().await.unwrap();
}
on_both_protocols_and_versions!(starts_from_committed_else_reset);

/// Consumes `topic` (one member of a fresh group, from the earliest offset, committing after
/// every batch) until `total` distinct records arrived; `fault` runs once `after` records
/// were seen, while the member keeps polling. Returns what was delivered, in delivery order.
async fn consume_through_fault(
    cluster: &Cluster,
    protocol: GroupProtocol,
    topic: &str,
    after: usize,
    total: usize,
    fault: impl std::future::Future<Output = ()>,
) -> Vec<(i32, i64, String)> {
    let mut c = member_from_earliest(cluster, &unique_group("fault"), protocol, topic).await;
    let mut seen = Seen::default();
    consume_until(&mut c, &mut seen, WAIT, |s, _| s.records.len() >= after).await;
    // The fault runs beside the polling member (heartbeats and fetches keep going out).
    let mut fault = std::pin::pin!(fault);
    let mut fault_done = false;
    let end = Instant::now() + Duration::from_secs(120);
    loop {
        let distinct: BTreeSet<(i32, i64)> = seen.records.iter().map(|r| (r.0, r.1)).collect();
        if fault_done && distinct.len() >= total {
            break;
        }
        assert!(
            Instant::now() < end,
            "{} of {total} records after the fault; events {:?}",
            distinct.len(),
            seen.events
        );
        tokio::select! {
            () = &mut fault, if !fault_done => fault_done = true,
            () = consume_until(&mut c, &mut seen, WAIT, |_, _| false) => {}
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
    c.close().await.ok();
    seen.records
}

fn assert_exactly_once(delivered: &[(i32, i64, String)], expected: &[(i32, i64, String)]) {
    let mut sorted = delivered.to_vec();
    sorted.sort();
    let unique: BTreeSet<_> = sorted.iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(unique.len(), sorted.len(), "a record was delivered twice");
    assert_eq!(sorted, expected, "delivered vs kcat: a record was skipped");
}

async fn proxy_cut_mid_consume(cluster: Cluster, protocol: GroupProtocol) {
    let _exclusive = cluster.exclusive();
    let topic = support::unique_topic("consumer-cut");
    cluster.create_topic(&topic, 3, 1, &[]);
    let p = producer(&cluster, &[]).await;
    send_to_each_partition(&p, &topic, 3, "before", 50).await;
    let proxy = cluster.proxy(0);
    let fault = async {
        // Shorter than the session timeout: the member survives and must resume where it was.
        proxy.set_enabled(false);
        tokio::time::sleep(Duration::from_secs(3)).await;
        proxy.set_enabled(true);
        send_to_each_partition(&p, &topic, 3, "after", 50).await;
    };
    let delivered = consume_through_fault(&cluster, protocol, &topic, 40, 300, fault).await;
    let expected = kcat_view(&cluster, &topic, Isolation::ReadCommitted);
    assert_eq!(expected.len(), 300);
    assert_exactly_once(&delivered, &expected);
}
on_both_protocols!(proxy_cut_mid_consume, single);

async fn leader_killed_mid_consume(cluster: Cluster, protocol: GroupProtocol) {
    let _exclusive = cluster.exclusive();
    let topic = support::unique_topic("consumer-failover");
    cluster.create_topic(&topic, 3, 3, &[("min.insync.replicas", "2")]);
    let leader = support::kcat_partition_leader(&cluster.bootstrap, &topic, 0);
    let p = producer(&cluster, &[]).await;
    send_to_each_partition(&p, &topic, 3, "before", 100).await;
    // Node ids are 1-based; broker indexes 0-based.
    let victim = (leader - 1) as usize;
    let fault = async {
        cluster.stop_broker(victim, true);
        send_to_each_partition(&p, &topic, 3, "during", 100).await;
    };
    let delivered = consume_through_fault(&cluster, protocol, &topic, 100, 600, fault).await;
    cluster.start_broker(victim);
    let expected = kcat_view(&cluster, &topic, Isolation::ReadCommitted);
    assert_eq!(expected.len(), 600);
    assert_exactly_once(&delivered, &expected);
}
on_both_protocols!(leader_killed_mid_consume, three);

/// A member that stops polling for longer than `max.poll.interval.ms` leaves the group (its
/// heartbeats alone do not keep it in, KIP-62); at its next poll it learns its partitions are
/// Lost (not Revoked: it must not commit them), then rejoins and gets them back, starting from
/// the committed offsets.
async fn poll_interval_expiry_is_lost(cluster: Cluster, protocol: GroupProtocol) {
    let _g = cluster.shared();
    let topic = support::unique_topic("consumer-lost");
    cluster.create_topic(&topic, 2, 1, &[]);
    let p = producer(&cluster, &[]).await;
    send(&p, &topic, 0, &values("x", 4)).await;
    let mut c = consumer_with(
        &cluster,
        &unique_group("lost"),
        protocol,
        OffsetReset::Earliest,
        IsolationLevel::ReadCommitted,
        &topic,
        &[("max.poll.interval.ms", "4000")],
    )
    .await;
    let mut seen = Seen::default();
    consume_until(&mut c, &mut seen, WAIT, |s, _| s.records.len() >= 4).await;
    let before = c.group_metadata();
    // Past the 4 s budget (the sessions, 6 s, are kept alive by the background heartbeats).
    tokio::time::sleep(Duration::from_secs(7)).await;
    let mut after = Seen::default();
    consume_until(&mut c, &mut after, WAIT, |s, c| {
        s.events.iter().any(|e| matches!(e, ConsumerEvent::Lost(_))) && c.assignment().len() == 2
    })
    .await;
    let lost = after
        .events
        .iter()
        .position(|e| matches!(e, ConsumerEvent::Lost(p) if p.len() == 2))
        .expect("both partitions lost");
    assert!(
        after.events[..lost]
            .iter()
            .all(|e| !matches!(e, ConsumerEvent::Revoked(_))),
        "lost partitions are not revoked: {:?}",
        after.events
    );
    assert!(
        after.records.is_empty(),
        "committed records are not delivered again"
    );
    let rejoined = c.group_metadata();
    assert_ne!(
        (before.generation_id, &before.member_id),
        (rejoined.generation_id, &rejoined.member_id)
    );
    c.close().await.unwrap();
}
on_both_protocols!(poll_interval_expiry_is_lost, single);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_committed_offset_and_reset_none_is_an_error_until_seek() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _g = cluster.shared();
    let topic = support::unique_topic("consumer-none");
    cluster.create_topic(&topic, 1, 1, &[]);
    let p = producer(&cluster, &[]).await;
    send(&p, &topic, 0, &values("n", 3)).await;
    let mut c = consumer(
        &cluster,
        &unique_group("none"),
        GroupProtocol::Consumer,
        OffsetReset::None,
        IsolationLevel::ReadCommitted,
        &topic,
    )
    .await;
    let end = Instant::now() + WAIT;
    let error = loop {
        assert!(Instant::now() < end, "no error for the missing offset");
        match c.poll_timeout(Duration::from_millis(300)).await {
            Err(e) => break e,
            Ok(Some(ConsumerEvent::Records(r))) => panic!("records without an offset: {r:?}"),
            Ok(_) => {}
        }
    };
    assert!(error.to_string().contains("auto.offset.reset"), "{error}");
    let tp = TopicPartition::new(topic.as_str(), 0);
    c.seek(&tp, 1).unwrap();
    let mut seen = Seen::default();
    consume_until(&mut c, &mut seen, WAIT, |s, _| s.records.len() >= 2).await;
    assert_eq!(seen.offsets(), vec![1, 2]);
    c.close().await.unwrap();
}

/// The loop this consumer exists for, in its smallest form: records consumed, copied in a
/// transaction whose offsets carry `group_metadata()` (KIP-447; the member epoch under
/// KIP-848), committed; the group's committed offsets and the copy agree.
async fn transactional_offsets_with_group_metadata(cluster: Cluster, protocol: GroupProtocol) {
    let _g = cluster.shared();
    let input = support::unique_topic("consumer-in");
    let output = support::unique_topic("consumer-out");
    cluster.create_topic(&input, 2, 1, &[]);
    cluster.create_topic(&output, 1, 1, &[]);
    let p = producer(&cluster, &[]).await;
    send(&p, &input, 0, &values("in0", 5)).await;
    send(&p, &input, 1, &values("in1", 5)).await;
    let txn_id = support::unique_topic("copy");
    let copier = producer(&cluster, &[("transactional.id", txn_id.as_str())]).await;
    copier.init_transactions().await.unwrap();
    let group = unique_group("copy");
    let mut c = member_from_earliest(&cluster, &group, protocol, &input).await;
    let mut copied = 0;
    let end = Instant::now() + WAIT;
    while copied < 10 {
        assert!(Instant::now() < end, "copied {copied} of 10");
        let Some(ConsumerEvent::Records(records)) =
            c.poll_timeout(Duration::from_millis(300)).await.unwrap()
        else {
            continue;
        };
        copier.begin_transaction().unwrap();
        let mut next: BTreeMap<TopicPartition, i64> = BTreeMap::new();
        for r in &records {
            // Its outcome is the commit's: committed means written.
            let _ack = copier
                .send(Record::to(output.as_str()).value(r.value.clone().unwrap_or_default()))
                .await
                .unwrap();
            next.insert(r.topic_partition(), r.offset + 1);
        }
        let offsets: Vec<OffsetToCommit> = next
            .into_iter()
            .map(|(tp, o)| OffsetToCommit::new(tp, o))
            .collect();
        copier
            .send_offsets_to_transaction(offsets, &c.group_metadata())
            .await
            .expect("offsets accepted with this member's generation / epoch");
        copier.commit_transaction().await.expect("commit");
        copied += records.len();
    }
    let tps = [
        TopicPartition::new(input.as_str(), 0),
        TopicPartition::new(input.as_str(), 1),
    ];
    let committed = c.committed(&tps).await.unwrap();
    assert_eq!(
        committed.iter().map(|(_, o)| *o).collect::<Vec<_>>(),
        vec![Some(5), Some(5)]
    );
    c.close().await.unwrap();
    copier.close().await.unwrap();
    let out = kcat_view(&cluster, &output, Isolation::ReadCommitted);
    assert_eq!(out.len(), 10);
}
on_both_protocols_and_versions!(transactional_offsets_with_group_metadata);

/// The consumer over the test bed's SASL_SSL listener (SCRAM-SHA-512, the test CA), configured
/// with Kafka's property names as a Java user writes them: the same `security.*` handling as
/// the producer's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumes_over_sasl_ssl_from_properties() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let env = |k: &str| std::env::var(k).ok();
    let (Some(sasl_ssl), Some(ca), Some(user), Some(password)) = (
        env("KAFKA_SASL_SSL_BOOTSTRAP"),
        env("KAFKA_TLS_CA"),
        env("KAFKA_SASL_USERNAME"),
        env("KAFKA_SASL_PASSWORD"),
    ) else {
        assert!(
            !support::in_ci(),
            "CI=true but the SASL_SSL listener's variables are unset"
        );
        eprintln!("SKIPPED: eval \"$(scripts/testbed env)\" for the SASL_SSL listener");
        return;
    };
    let _g = cluster.shared();
    let topic = support::unique_topic("consumer-sasl");
    cluster.create_topic(&topic, 1, 1, &[]);
    let group = unique_group("sasl");
    let jaas = format!(
        r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" password="{password}";"#
    );
    // One MSK / Confluent shaped client.properties for both clients: each ignores what is
    // the other's (acks; group.id, session.timeout.ms, auto.offset.reset), the JVM's and
    // Schema Registry's.
    let shared = [
        ("bootstrap.servers", sasl_ssl.as_str()),
        ("security.protocol", "SASL_SSL"),
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.location", ca.as_str()),
        ("sasl.mechanism", "SCRAM-SHA-512"),
        ("sasl.jaas.config", jaas.as_str()),
        ("client.dns.lookup", "use_all_dns_ips"),
        ("session.timeout.ms", "45000"),
        ("acks", "all"),
        ("schema.registry.url", "https://schema-registry.invalid"),
        ("basic.auth.credentials.source", "USER_INFO"),
        ("basic.auth.user.info", "key:secret"),
        ("group.id", group.as_str()),
        ("auto.offset.reset", "earliest"),
    ];
    let p = Producer::from_properties(shared)
        .await
        .expect("producer over SASL_SSL from the shared properties");
    let first = match p.send(Record::to(&topic).partition(0).value("s-0")).await {
        Ok(ack) => ack.await.map(drop),
        Err(e) => Err(e),
    };
    if let Err(e) = first {
        panic!(
            "the first send over SASL_SSL: {e:?}\n{}",
            cluster.sasl_diagnosis()
        );
    }
    send(&p, &topic, 0, &values("s", 5)[1..]).await;
    let mut c = Consumer::from_properties(shared.into_iter().chain([("fetch.max.wait.ms", "200")]))
        .await
        .expect("consumer over SASL_SSL from the shared properties");
    c.subscribe([topic.clone()]).unwrap();
    let mut seen = Seen::default();
    consume_until(&mut c, &mut seen, WAIT, |s, _| s.records.len() >= 5).await;
    assert_eq!(
        seen.records.iter().map(|r| r.2.clone()).collect::<Vec<_>>(),
        values("s", 5)
    );
    c.close().await.unwrap();
    assert_eq!(
        kcat_view(&cluster, &topic, Isolation::ReadCommitted),
        seen.records,
        "what the producer wrote, as kcat reads it"
    );
}

/// A transaction that commits offsets for the group is still open when a member starts: the
/// member's OffsetFetch (require_stable) is answered UNSTABLE_OFFSET_COMMIT and retried, so it
/// starts at the offset the transaction commits, not from `auto.offset.reset` (KIP-447).
async fn waits_out_a_pending_transactional_commit(cluster: Cluster, protocol: GroupProtocol) {
    let _g = cluster.shared();
    let topic = support::unique_topic("consumer-unstable");
    cluster.create_topic(&topic, 1, 1, &[]);
    let p = producer(&cluster, &[]).await;
    send(&p, &topic, 0, &values("u", 6)).await;
    let group = unique_group("unstable");
    let txn_id = support::unique_topic("unstable-txn");
    let committer = producer(&cluster, &[("transactional.id", txn_id.as_str())]).await;
    committer.init_transactions().await.unwrap();
    committer.begin_transaction().unwrap();
    let tp = TopicPartition::new(topic.as_str(), 0);
    committer
        .send_offsets_to_transaction(
            vec![OffsetToCommit::new(tp.clone(), 4)],
            &exactly::ConsumerGroupMetadata::group_only(group.as_str()),
        )
        .await
        .unwrap();
    let mut c = member_from_earliest(&cluster, &group, protocol, &topic).await;
    // Assigned, but no position while the offset commit is pending.
    let mut seen = Seen::default();
    consume_until(&mut c, &mut seen, WAIT, |s, _| {
        s.events
            .iter()
            .any(|e| matches!(e, ConsumerEvent::Assigned(_)))
    })
    .await;
    assert_no_records_for(
        &mut c,
        Duration::from_secs(2),
        "records before the pending offset commit resolved",
    )
    .await;
    assert_eq!(c.position(&tp), None);
    committer.commit_transaction().await.unwrap();
    consume_until(&mut c, &mut seen, WAIT, |s, _| s.records.len() >= 2).await;
    assert_eq!(seen.offsets(), vec![4, 5]);
    c.close().await.unwrap();
}
on_both_protocols!(waits_out_a_pending_transactional_commit, single);

/// Polls until at least `n` records arrived (rebalance events pass by), failing after `WAIT`.
async fn poll_records(c: &mut Consumer, n: usize) -> Vec<ConsumerRecord> {
    let end = Instant::now() + WAIT;
    let mut out = Vec::new();
    while out.len() < n {
        assert!(
            Instant::now() < end,
            "{} of {n} records within {WAIT:?}",
            out.len()
        );
        if let Some(ConsumerEvent::Records(records)) = c
            .poll_timeout(Duration::from_millis(300))
            .await
            .expect("poll")
        {
            out.extend(records);
        }
    }
    out
}

/// The next item of `stream`, failing after `WAIT`.
async fn next_item<S: Stream + Unpin>(stream: &mut S) -> S::Item {
    let next = std::future::poll_fn(|cx| Pin::new(&mut *stream).poll_next(cx));
    tokio::time::timeout(WAIT, next)
        .await
        .expect("an item within WAIT")
        .expect("the stream does not end")
}

/// `(partition, offset, value)` of each record.
fn coordinates(records: &[ConsumerRecord]) -> Vec<(i32, i64, String)> {
    records
        .iter()
        .map(|r| {
            let value = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default());
            (r.partition, r.offset, value.into_owned())
        })
        .collect()
}

/// Waits (bounded) until `partition`'s position is `offset` (a lazy seek was looked up).
async fn wait_for_position(c: &mut Consumer, partition: &TopicPartition, offset: i64) {
    let end = Instant::now() + WAIT;
    while c.position(partition) != Some(offset) {
        assert!(Instant::now() < end, "position {:?}", c.position(partition));
        // Nothing to deliver: the poll only lets the background task work.
        assert!(
            c.poll_timeout(Duration::from_millis(100))
                .await
                .unwrap()
                .is_none()
        );
    }
}

/// The consumer API beside `poll`: the `Stream` yields what `poll` does; manual assignment
/// without a group reads from the offsets given; a paused partition delivers nothing until
/// resumed, and keeps its position; seek_to_end / seek_to_beginning; offsets_for_times
/// against records with known timestamps; a manual assignment with a group commits with
/// generation -1 (read back by Kafka's own tool) and starts from it; LogAppendTime topics
/// give the broker's timestamp and say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_pause_resume_assign() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _g = cluster.shared();
    let topic = support::unique_topic("consumer-api");
    cluster.create_topic(&topic, 2, 1, &[]);
    let p = producer(&cluster, &[]).await;
    // Record i of each partition carries base_ts + 1000 * i: an hour ago, well inside the
    // retention (a segment whose records are older than `retention.ms` by their timestamps
    // is deleted while the test runs).
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    let base_ts = now_ms() - 3_600_000;
    for partition in 0..2 {
        let mut acks = Vec::new();
        for i in 0..5 {
            let record = Record::to(&topic)
                .partition(partition)
                .value(format!("v{partition}-{i}"))
                .timestamp(base_ts + 1000 * i);
            acks.push(p.send(record).await.expect("send"));
        }
        for ack in acks {
            ack.await.expect("acknowledged");
        }
    }
    let p0 = TopicPartition::new(topic.as_str(), 0);
    let p1 = TopicPartition::new(topic.as_str(), 1);

    // The Stream yields the records poll does, equal field by field, and kcat's.
    let mut by_poll = member_from_earliest(
        &cluster,
        &unique_group("poll"),
        GroupProtocol::Consumer,
        &topic,
    )
    .await;
    let mut polled = poll_records(&mut by_poll, 10).await;
    by_poll.close().await.unwrap();
    let mut by_stream = member_from_earliest(
        &cluster,
        &unique_group("stream"),
        GroupProtocol::Consumer,
        &topic,
    )
    .await;
    let mut streamed = Vec::new();
    {
        let mut records = pin!(by_stream.records());
        while streamed.len() < 10 {
            streamed.push(next_item(&mut records).await.expect("a record"));
        }
    }
    // The stream is gone; nothing more was taken from the consumer.
    assert_no_records_for(&mut by_stream, Duration::from_secs(1), "all 10 streamed").await;
    by_stream.close().await.unwrap();
    let order = |r: &ConsumerRecord| (r.partition, r.offset);
    polled.sort_by_key(order);
    streamed.sort_by_key(order);
    assert_eq!(streamed, polled);
    assert_eq!(
        coordinates(&streamed),
        kcat_view(&cluster, &topic, Isolation::ReadCommitted)
    );
    for r in &streamed {
        assert_eq!(r.timestamp, base_ts + 1000 * r.offset, "{r:?}");
        assert_eq!(r.timestamp_type, TimestampType::CreateTime);
    }

    // Manual assignment, no group: no subscription, no commit; reads from the offsets given.
    let mut manual = test_builder(&cluster)
        .auto_offset_reset(OffsetReset::Earliest)
        .build()
        .await
        .expect("a consumer without group.id");
    assert!(matches!(
        manual.subscribe([topic.clone()]),
        Err(exactly::Error::Config { .. })
    ));
    manual.assign(&[p0.clone(), p1.clone()]).unwrap();
    manual.seek(&p1, 3).unwrap();
    manual.pause(std::slice::from_ref(&p0)).unwrap();
    assert_eq!(manual.paused(), vec![p0.clone()]);
    let got = poll_records(&mut manual, 2).await;
    assert_eq!(
        coordinates(&got),
        vec![(1, 3, "v1-3".into()), (1, 4, "v1-4".into())]
    );
    assert_no_records_for(&mut manual, Duration::from_secs(1), "partition 0 is paused").await;
    assert_eq!(
        manual.position(&p0),
        Some(0),
        "a paused partition stays put"
    );
    manual.resume(std::slice::from_ref(&p0)).unwrap();
    assert!(manual.paused().is_empty());
    let got = poll_records(&mut manual, 5).await;
    assert_eq!(
        coordinates(&got),
        kcat_view(&cluster, &topic, Isolation::ReadCommitted)[..5]
    );
    // seek_to_end: only what comes after; seek_to_beginning: everything again.
    manual.seek_to_end(std::slice::from_ref(&p0)).unwrap();
    wait_for_position(&mut manual, &p0, 5).await;
    send(&p, &topic, 0, &["late".to_owned()]).await;
    let got = poll_records(&mut manual, 1).await;
    assert_eq!(coordinates(&got), vec![(0, 5, "late".into())]);
    manual.seek_to_beginning(std::slice::from_ref(&p1)).unwrap();
    let got = poll_records(&mut manual, 5).await;
    assert_eq!(
        got.iter()
            .map(|r| (r.partition, r.offset))
            .collect::<Vec<_>>(),
        (0..5).map(|o| (1, o)).collect::<Vec<_>>()
    );
    assert!(matches!(
        manual.commit(&[OffsetToCommit::new(p0.clone(), 1)]).await,
        Err(exactly::Error::Config { .. })
    ));
    // offsets_for_times: the first record at or after the timestamp, with its timestamp.
    let found = manual
        .offsets_for_times(&[(p0.clone(), base_ts + 2500), (p1.clone(), base_ts)])
        .await
        .unwrap();
    assert_eq!(
        found,
        vec![
            (p0.clone(), Some((3, base_ts + 3000))),
            (p1.clone(), Some((0, base_ts)))
        ]
    );
    let future = i64::MAX / 2;
    let found = manual
        .offsets_for_times(&[(p1.clone(), future)])
        .await
        .unwrap();
    assert_eq!(found, vec![(p1.clone(), None)], "no record that late");
    manual.unassign().unwrap();
    assert!(
        manual
            .poll_timeout(Duration::from_millis(100))
            .await
            .is_err(),
        "nothing assigned"
    );
    manual.close().await.unwrap();

    // Manual assignment with a group: commits with generation -1, which Kafka's own tool
    // reads back, and a later assignment starts there.
    let group = unique_group("manual");
    let mut committer = test_builder(&cluster)
        .group_id(&group)
        .build()
        .await
        .unwrap();
    committer.assign(std::slice::from_ref(&p0)).unwrap();
    committer
        .commit(&[OffsetToCommit::new(p0.clone(), 2)])
        .await
        .expect("a simple-consumer commit");
    committer.close().await.unwrap();
    assert_eq!(
        cluster.group_offsets(&group, &topic),
        BTreeMap::from([(0, 2)])
    );
    let mut resumed = test_builder(&cluster)
        .group_id(&group)
        .build()
        .await
        .unwrap();
    resumed.assign(std::slice::from_ref(&p0)).unwrap();
    let got = poll_records(&mut resumed, 4).await;
    assert_eq!(
        got.iter().map(|r| r.offset).collect::<Vec<_>>(),
        vec![2, 3, 4, 5]
    );
    assert_eq!(
        resumed.committed(std::slice::from_ref(&p0)).await.unwrap(),
        vec![(p0.clone(), Some(2))]
    );
    resumed.close().await.unwrap();

    // A LogAppendTime topic: the broker's timestamp, typed as such.
    let appended = support::unique_topic("consumer-api-lat");
    cluster.create_topic(
        &appended,
        1,
        1,
        &[("message.timestamp.type", "LogAppendTime")],
    );
    let before = now_ms();
    p.send(
        Record::to(&appended)
            .partition(0)
            .value("x")
            .timestamp(base_ts),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    let mut reader = test_builder(&cluster)
        .auto_offset_reset(OffsetReset::Earliest)
        .build()
        .await
        .unwrap();
    reader
        .assign(&[TopicPartition::new(appended.as_str(), 0)])
        .unwrap();
    let got = poll_records(&mut reader, 1).await;
    assert_eq!(got[0].timestamp_type, TimestampType::LogAppendTime);
    assert!(
        got[0].timestamp >= before - 1000,
        "the broker's time: {got:?}"
    );
    reader.close().await.unwrap();
}

/// `enable.auto.commit`: the positions of what earlier polls handed out are committed on the
/// interval (never the latest poll's records, which may still be in processing), as
/// `committed()` and Kafka's own tool read them; a member that crashes (dropped without
/// close) is followed by one that re-reads at most one interval's records; `close` commits
/// the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_commit_at_least_once() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _g = cluster.shared();
    let topic = support::unique_topic("consumer-auto");
    cluster.create_topic(&topic, 1, 1, &[]);
    let p = producer(&cluster, &[]).await;
    const TOTAL: i64 = 60;
    send(&p, &topic, 0, &values("a", TOTAL as usize)).await;
    let tp = TopicPartition::new(topic.as_str(), 0);
    let group = unique_group("auto");
    const INTERVAL: Duration = Duration::from_millis(1000);
    // Commit latency and the background task's turn.
    const SLACK: Duration = Duration::from_millis(1500);
    let auto = [
        ("enable.auto.commit", "true"),
        ("auto.commit.interval.ms", "1000"),
        ("max.poll.records", "4"),
    ];
    let member = || {
        consumer_with(
            &cluster,
            &group,
            GroupProtocol::Consumer,
            OffsetReset::Earliest,
            IsolationLevel::ReadCommitted,
            &topic,
            &auto,
        )
    };
    let mut c = member().await;
    // When each poll began, and the position then: what the polls before it handed out.
    let mut starts: Vec<(Instant, i64)> = Vec::new();
    let mut handed_out = 0;
    let begin = Instant::now();
    while handed_out < 40 {
        assert!(begin.elapsed() < WAIT, "{handed_out} records handed out");
        starts.push((Instant::now(), handed_out));
        if let Some(ConsumerEvent::Records(records)) =
            c.poll_timeout(Duration::from_millis(300)).await.unwrap()
        {
            assert_eq!(records[0].offset, handed_out, "in order, none skipped");
            handed_out = records.last().unwrap().offset + 1;
        }
        // Processing.
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    // Crash right after a poll: no close, no final commit.
    let latest_start = starts.last().unwrap().1;
    let old_enough = Instant::now() - INTERVAL - SLACK;
    let floor = starts
        .iter()
        .filter(|(at, _)| *at <= old_enough)
        .map(|(_, position)| *position)
        .max()
        .unwrap_or(0);
    assert!(floor > 0, "the test ran long enough: {starts:?}");
    drop(c);
    // A commit request already on the wire may still land.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let by_tool = cluster.group_offsets(&group, &topic)[&0];
    let mut next = member().await;
    let restart = next.committed(std::slice::from_ref(&tp)).await.unwrap()[0]
        .1
        .expect("a commit");
    assert_eq!(restart, by_tool, "committed() and Kafka's own tool agree");
    assert!(
        restart <= latest_start,
        "{restart}: the latest poll's records (from {latest_start}) were not committed"
    );
    assert!(
        restart >= floor,
        "{restart}: commits lag at most one interval behind what was handed out ({floor})"
    );
    let rest = poll_records(&mut next, (TOTAL - restart) as usize).await;
    assert_eq!(
        rest.iter().map(|r| r.offset).collect::<Vec<_>>(),
        (restart..TOTAL).collect::<Vec<_>>(),
        "from the last commit on, each once"
    );
    next.close().await.unwrap();
    assert_eq!(
        cluster.group_offsets(&group, &topic).get(&0),
        Some(&TOTAL),
        "close commits what was handed out"
    );
}

/// `subscribe_pattern`: every topic whose whole name matches, and one created later (KIP-848:
/// the coordinator resolves the regex; classic: the consumer matches the cluster's topics,
/// looked up again every `metadata.max.age.ms`); a topic that merely contains the pattern
/// does not match.
async fn pattern_subscription(cluster: Cluster, protocol: GroupProtocol) {
    let _g = cluster.shared();
    let prefix = support::unique_topic("consumer-pattern");
    let (a, b, late) = (
        format!("{prefix}-a"),
        format!("{prefix}-b"),
        format!("{prefix}-late"),
    );
    let unmatched = format!("x-{prefix}-a");
    for topic in [&a, &b, &unmatched] {
        cluster.create_topic(topic, 1, 1, &[]);
    }
    let p = producer(&cluster, &[]).await;
    for topic in [&a, &b, &unmatched] {
        send(&p, topic, 0, &[format!("in {topic}")]).await;
    }
    let mut c = test_builder(&cluster)
        .group_id(unique_group("pattern"))
        .group_protocol(protocol)
        .auto_offset_reset(OffsetReset::Earliest)
        .set("metadata.max.age.ms", "1000")
        .build()
        .await
        .unwrap();
    assert!(matches!(
        c.subscribe_pattern("("),
        Err(exactly::Error::Config { .. })
    ));
    c.subscribe_pattern(&format!("{prefix}-.*")).unwrap();
    let topics_of = |records: &[ConsumerRecord]| -> BTreeSet<String> {
        records.iter().map(|r| r.topic.to_string()).collect()
    };
    let got = poll_records(&mut c, 2).await;
    assert_eq!(topics_of(&got), BTreeSet::from([a.clone(), b.clone()]));
    cluster.create_topic(&late, 1, 1, &[]);
    send(&p, &late, 0, &["late".to_owned()]).await;
    let got = poll_records(&mut c, 1).await;
    assert_eq!(coordinates(&got), vec![(0, 0, "late".into())]);
    assert_eq!(topics_of(&got), BTreeSet::from([late.clone()]));
    assert_no_records_for(&mut c, Duration::from_secs(1), "the unmatched topic").await;
    c.close().await.unwrap();
}

on_both_protocols!(pattern_subscription, single);

/// Auto-commit before revoked partitions are given up: a member that has handed out every
/// record and is asked to give a partition up commits it first (its interval is far off), so
/// the member that takes the partition over reads nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_commit_before_revocation() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _g = cluster.shared();
    let topic = support::unique_topic("consumer-auto-revoke");
    cluster.create_topic(&topic, 2, 1, &[]);
    let p = producer(&cluster, &[]).await;
    send_to_each_partition(&p, &topic, 2, "r", 10).await;
    let group = unique_group("auto-revoke");
    let auto = [
        ("enable.auto.commit", "true"),
        ("auto.commit.interval.ms", "600000"),
    ];
    let member = || {
        consumer_with(
            &cluster,
            &group,
            GroupProtocol::Consumer,
            OffsetReset::Earliest,
            IsolationLevel::ReadCommitted,
            &topic,
            &auto,
        )
    };
    let mut first = member().await;
    assert_eq!(poll_records(&mut first, 20).await.len(), 20);
    let mut second = member().await;
    let (mut revoked, mut assigned) = (Vec::new(), Vec::new());
    let end = Instant::now() + WAIT;
    while assigned.is_empty() {
        assert!(Instant::now() < end, "no hand-over: revoked {revoked:?}");
        for (c, is_second) in [(&mut first, false), (&mut second, true)] {
            match c.poll_timeout(Duration::from_millis(100)).await.unwrap() {
                Some(ConsumerEvent::Revoked(tps)) if !is_second => revoked.extend(tps),
                Some(ConsumerEvent::Assigned(tps)) if is_second => assigned.extend(tps),
                Some(ConsumerEvent::Records(r)) => panic!("nothing is left to read: {r:?}"),
                _ => {}
            }
        }
    }
    assert_eq!(revoked, assigned, "what the first gave up, the second took");
    assert_no_records_for(
        &mut second,
        Duration::from_secs(2),
        "the revoked partition was committed before it moved",
    )
    .await;
    let offsets = cluster.group_offsets(&group, &topic);
    for tp in &assigned {
        assert_eq!(offsets.get(&tp.partition), Some(&10), "{offsets:?}");
    }
    first.close().await.unwrap();
    second.close().await.unwrap();
}

/// Polls `c` until it has made `want` incremental fetches (KIP-227) in all.
async fn poll_until_incremental_fetches(c: &mut Consumer, want: u64) {
    let end = Instant::now() + WAIT;
    while c.metrics().incremental_fetch_total < want {
        assert!(
            Instant::now() < end,
            "{want} incremental fetches expected: {:?}",
            c.metrics()
        );
        c.poll_timeout(Duration::from_millis(200))
            .await
            .expect("poll");
    }
}

/// Polls `c` (no group: nothing committed) until `want` distinct records of `seen` arrived.
async fn poll_until_distinct(c: &mut Consumer, seen: &mut Vec<(i32, i64, String)>, want: usize) {
    let end = Instant::now() + WAIT;
    loop {
        let distinct: BTreeSet<(i32, i64)> = seen.iter().map(|r| (r.0, r.1)).collect();
        if distinct.len() >= want {
            return;
        }
        assert!(
            Instant::now() < end,
            "{} of {want} records; metrics {:?}",
            distinct.len(),
            c.metrics()
        );
        if let Some(ConsumerEvent::Records(records)) = c
            .poll_timeout(Duration::from_millis(300))
            .await
            .expect("poll")
        {
            seen.extend(records.iter().map(|r| {
                let value = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default());
                (r.partition, r.offset, value.into_owned())
            }));
        }
    }
}

/// Incremental fetch sessions (KIP-227) against the real broker: over many partitions, most
/// of them idle, the consumer fetches in a session (the broker answers incremental fetches)
/// and keeps receiving what is written to any of them. When the broker loses the session (it
/// is restarted while nothing is being fetched: every partition paused), the next incremental
/// fetch is answered FETCH_SESSION_ID_NOT_FOUND and a full fetch opens a new session. Every
/// record arrives exactly once, as kcat reads the topic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_sessions_over_idle_partitions_survive_a_lost_session() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _exclusive = cluster.exclusive();
    let topic = support::unique_topic("consumer-sessions");
    let partitions = 24;
    cluster.create_topic(&topic, partitions, 1, &[]);
    let p = producer(&cluster, &[]).await;
    let all: Vec<TopicPartition> = (0..partitions as i32)
        .map(|i| TopicPartition::new(topic.as_str(), i))
        .collect();
    let mut c = test_builder(&cluster)
        .auto_offset_reset(OffsetReset::Earliest)
        .isolation_level(IsolationLevel::ReadCommitted)
        .build()
        .await
        .expect("consumer builds");
    c.assign(&all).unwrap();
    let mut seen = Vec::new();
    send(&p, &topic, 0, &values("before-0", 20)).await;
    send(&p, &topic, 7, &values("before-7", 20)).await;
    poll_until_distinct(&mut c, &mut seen, 40).await;
    // The idle partitions stay in the session: a few more long polls go out as increments.
    poll_until_incremental_fetches(&mut c, 3).await;
    let before = c.metrics();
    assert!(before.fetch_sessions_opened_total >= 1, "{before:?}");
    assert_eq!(before.fetch_session_errors_total, 0, "{before:?}");
    send(&p, &topic, 13, &values("idle-13", 5)).await;
    poll_until_distinct(&mut c, &mut seen, 45).await;

    // Nothing fetched (every partition paused, the last long poll answered), then the
    // broker restarts: its session cache is empty, ours still names the old session.
    c.pause(&all).unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let paused_fetches = c.metrics().fetch_total;
    assert_no_records_for(&mut c, Duration::from_secs(1), "everything is paused").await;
    assert_eq!(
        c.metrics().fetch_total,
        paused_fetches,
        "a fetch went out while paused"
    );
    cluster.stop_broker(0, false);
    cluster.start_broker(0);
    let p = producer(&cluster, &[]).await;
    send(&p, &topic, 0, &values("after-0", 20)).await;
    send(&p, &topic, 21, &values("after-21", 20)).await;
    c.resume(&all).unwrap();
    poll_until_distinct(&mut c, &mut seen, 85).await;
    let after = c.metrics();
    assert!(
        after.fetch_session_errors_total >= 1,
        "the lost session was never reported: {after:?}"
    );
    assert!(
        after.fetch_sessions_opened_total > before.fetch_sessions_opened_total,
        "no new session: {after:?}"
    );
    // The new session is used: idle partitions are fetched incrementally again.
    poll_until_incremental_fetches(&mut c, after.incremental_fetch_total + 2).await;
    assert_exactly_once(
        &seen,
        &kcat_view(&cluster, &topic, Isolation::ReadCommitted),
    );
    assert_eq!(seen.len(), 85);
    c.close().await.unwrap();
}

/// Two seeks in a row on a manually assigned partition of 1,000 records, the second made while
/// the first's ListOffsets is still in flight (400 ms of latency on the leader's answers, and
/// rounds without any fault, where the lookup waits behind the long-poll fetch): the seek that
/// came last counts. `seek_to_end` then `seek_to_beginning` delivers from offset 0, every
/// record as kcat reads them; `seek_to_beginning` then `seek_to_end` delivers nothing old, and
/// the first record delivered is one written after the seeks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seek_after_seek_is_the_one_that_counts() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _g = cluster.exclusive();
    let topic = support::unique_topic("seek-seek");
    cluster.create_topic(&topic, 1, 1, &[]);
    let p = producer(&cluster, &[]).await;
    send(&p, &topic, 0, &values("r", 1_000)).await;
    let expected = kcat_view(&cluster, &topic, Isolation::ReadCommitted);
    assert_eq!(expected.len(), 1_000);
    let tp = TopicPartition::new(topic.as_str(), 0);
    let mut c = test_builder(&cluster)
        .auto_offset_reset(OffsetReset::Earliest)
        .build()
        .await
        .unwrap();
    c.assign(std::slice::from_ref(&tp)).unwrap();
    for (round, written) in (0..4).zip(1_000usize..) {
        let latency = round % 2 == 0;
        if latency {
            cluster
                .proxy(0)
                .add_toxic("slow", "latency", "downstream", r#"{"latency":400}"#);
        }
        c.seek_to_end(std::slice::from_ref(&tp)).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        c.seek_to_beginning(std::slice::from_ref(&tp)).unwrap();
        let delivered = poll_records(&mut c, written).await;
        assert_eq!(
            delivered.first().map(|r| r.offset),
            Some(0),
            "round {round} (latency {latency}): seek_to_beginning came last"
        );
        assert_eq!(
            coordinates(&delivered[..1_000]),
            expected,
            "round {round}: every record from the beginning, once, as kcat reads them"
        );

        c.seek_to_beginning(std::slice::from_ref(&tp)).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        c.seek_to_end(std::slice::from_ref(&tp)).unwrap();
        wait_for_position(&mut c, &tp, written as i64).await;
        assert_no_records_for(
            &mut c,
            Duration::from_secs(2),
            "seek_to_end came last: nothing old is delivered",
        )
        .await;
        send(&p, &topic, 0, &[format!("new-{round}")]).await;
        let new = poll_records(&mut c, 1).await;
        assert_eq!(
            coordinates(&new),
            vec![(0, written as i64, format!("new-{round}"))],
            "round {round} (latency {latency}): the first record delivered after seek_to_end"
        );
        if latency {
            cluster.proxy(0).remove_all_toxics();
        }
    }
    c.close().await.unwrap();
}

/// The SASL_PLAINTEXT listener and the limited user whose rights come from ACLs alone.
fn limited_login() -> Option<(String, String, String)> {
    let var = |name: &str| std::env::var(name).ok();
    let login = (|| {
        Some((
            var("KAFKA_SASL_PLAINTEXT_BOOTSTRAP")?,
            var("KAFKA_SASL_LIMITED_USER")?,
            var("KAFKA_SASL_LIMITED_PASSWORD")?,
        ))
    })();
    if login.is_none() {
        assert!(
            !support::in_ci(),
            "CI=true but the SASL_PLAINTEXT listener or its limited user is not exported"
        );
        eprintln!("SKIPPED: no SASL_PLAINTEXT listener; eval \"$(scripts/testbed up)\" first");
    }
    login
}

/// How long a consumer of the authorization test waits for an answer.
const AUTHZ_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A consumer logged in as the limited user (SCRAM-SHA-512), with `group` if any.
async fn limited_consumer(
    cluster: &Cluster,
    login: &(String, String, String),
    group: Option<(&str, GroupProtocol)>,
) -> Consumer {
    let (bootstrap, user, password) = login;
    let jaas = format!(
        r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" password="{password}";"#
    );
    let mut builder = Consumer::builder()
        .bootstrap(bootstrap.as_str())
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", "SCRAM-SHA-512")
        .set("sasl.jaas.config", &jaas)
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500")
        .set("fetch.max.wait.ms", "200")
        .set(
            "request.timeout.ms",
            AUTHZ_REQUEST_TIMEOUT.as_millis().to_string(),
        )
        .auto_offset_reset(OffsetReset::Earliest);
    if let Some((group, protocol)) = group {
        builder = builder.group_id(group).group_protocol(protocol);
    }
    match builder.build().await {
        Ok(consumer) => consumer,
        Err(e) => panic!(
            "the limited user's consumer builds: {e:?}\n{}",
            cluster.sasl_diagnosis()
        ),
    }
}

/// Polls until `poll` returns an error (bounded by [`AUTHZ_REQUEST_TIMEOUT`], the brief's one
/// request timeout): the error and how long it took. No record may be delivered meanwhile.
async fn first_error(c: &mut Consumer, what: &str) -> (exactly::Error, Duration) {
    let started = Instant::now();
    while started.elapsed() < AUTHZ_REQUEST_TIMEOUT {
        match c.poll_timeout(Duration::from_millis(200)).await {
            Err(e) => return (e, started.elapsed()),
            Ok(Some(ConsumerEvent::Records(r))) => panic!("{what}: records delivered: {r:?}"),
            Ok(_) => {}
        }
    }
    panic!("{what}: no error from poll within {AUTHZ_REQUEST_TIMEOUT:?}");
}

/// Grants the limited user `operations` on `--topic`/`--group` `name` with Kafka's kafka-acls.
fn grant(cluster: &Cluster, user: &str, resource: &str, name: &str, operations: &[&str]) {
    let principal = format!("User:{user}");
    let mut args = vec!["--add", "--allow-principal", &principal, resource, name];
    for op in operations {
        args.extend(["--operation", op]);
    }
    let out = cluster.kafka_tool("org.apache.kafka.tools.AclCommand", &args);
    assert!(out.contains(&principal), "{out}");
}

/// A principal without READ on a topic, or on a group, gets a typed error from `poll` naming
/// the topic (or the group) within one request timeout, instead of a `poll` that returns
/// nothing forever (the Java consumer throws `TopicAuthorizationException` /
/// `GroupAuthorizationException`): KRaft's StandardAuthorizer on the test bed, the limited
/// user `bob`, ACLs made with Kafka's `kafka-acls`. Without even DESCRIBE the Metadata answer
/// refuses the topic; with DESCRIBE only, the Fetch does; with READ granted afterwards the same
/// consumer goes on and reads what kcat reads. Manual assignment, and both group protocols.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_errors_reach_poll() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let Some(login) = limited_login() else {
        return;
    };
    let user = login.1.clone();
    let _g = cluster.shared();
    let refused_topic = |e: &exactly::Error, topic: &str, api: &str| match e {
        exactly::Error::TopicRefused {
            topic: t,
            api: a,
            code,
            ..
        } => t == topic && *a == api && *code == exactly::ErrorCode::TOPIC_AUTHORIZATION_FAILED,
        _ => false,
    };

    // Manual assignment, no ACL on the topic at all: Metadata refuses it.
    let hidden = support::unique_topic("authz-hidden");
    cluster.create_topic(&hidden, 1, 1, &[]);
    let mut c = limited_consumer(&cluster, &login, None).await;
    c.assign(&[TopicPartition::new(hidden.as_str(), 0)])
        .unwrap();
    let (e, took) = first_error(&mut c, "no ACL").await;
    assert!(refused_topic(&e, &hidden, "Metadata"), "{e:?}");
    assert!(
        e.to_string().contains(&hidden),
        "the error names the topic: {e}"
    );
    assert!(!e.is_retriable() && !e.is_fatal(), "{e:?}");
    eprintln!("no ACL: {e} after {took:?}");
    c.close().await.unwrap();

    // DESCRIBE only: the partition's Fetch is refused, naming the partition; then READ is
    // granted and the same consumer reads on.
    let unreadable = support::unique_topic("authz-describe");
    cluster.create_topic(&unreadable, 1, 1, &[]);
    let p = producer(&cluster, &[]).await;
    send(&p, &unreadable, 0, &values("a", 5)).await;
    grant(&cluster, &user, "--topic", &unreadable, &["Describe"]);
    let tp = TopicPartition::new(unreadable.as_str(), 0);
    let mut c = limited_consumer(&cluster, &login, None).await;
    c.assign(std::slice::from_ref(&tp)).unwrap();
    c.seek(&tp, 0).unwrap();
    let (e, took) = first_error(&mut c, "DESCRIBE only").await;
    assert!(refused_topic(&e, &unreadable, "Fetch"), "{e:?}");
    assert!(
        matches!(
            e,
            exactly::Error::TopicRefused {
                partition: Some(0),
                ..
            }
        ),
        "{e:?}"
    );
    eprintln!("DESCRIBE only: {e} after {took:?}");
    grant(&cluster, &user, "--topic", &unreadable, &["Read"]);
    let mut read = Vec::new();
    let end = Instant::now() + WAIT;
    while read.len() < 5 {
        assert!(
            Instant::now() < end,
            "READ granted, still {} of 5",
            read.len()
        );
        match c.poll_timeout(Duration::from_millis(300)).await {
            Ok(Some(ConsumerEvent::Records(r))) => read.extend(r),
            // Refusals answered before the grant took effect.
            Ok(_) | Err(exactly::Error::TopicRefused { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(
        coordinates(&read),
        kcat_view(&cluster, &unreadable, Isolation::ReadCommitted)
    );
    c.close().await.unwrap();

    // A manual assignment with a group.id but no READ on the group: OffsetFetch is refused,
    // naming the group.
    let group = unique_group("authz-group");
    let mut c = limited_consumer(&cluster, &login, Some((&group, GroupProtocol::Classic))).await;
    c.assign(std::slice::from_ref(&tp)).unwrap();
    let (e, took) = first_error(&mut c, "no group ACL, manual assignment").await;
    // FindCoordinator needs DESCRIBE on the group: the refusal comes from there.
    assert!(
        matches!(&e, exactly::Error::GroupRefused { group: g, code, .. }
            if *g == group && *code == exactly::ErrorCode::GROUP_AUTHORIZATION_FAILED),
        "{e:?}"
    );
    assert!(
        e.to_string().contains(&group),
        "the error names the group: {e}"
    );
    eprintln!("no group ACL (manual): {e} after {took:?}");
    c.close().await.unwrap();

    for protocol in [GroupProtocol::Consumer, GroupProtocol::Classic] {
        // Subscribed, with DESCRIBE but not READ on the group (the coordinator is found):
        // joining is refused, naming the group.
        let group = unique_group("authz-member");
        grant(&cluster, &user, "--group", &group, &["Describe"]);
        let mut c = limited_consumer(&cluster, &login, Some((&group, protocol))).await;
        c.subscribe([unreadable.clone()]).unwrap();
        let (e, took) = first_error(&mut c, "no group READ, subscribed").await;
        let joining = match protocol {
            GroupProtocol::Consumer => "ConsumerGroupHeartbeat",
            _ => "JoinGroup",
        };
        assert!(
            matches!(&e, exactly::Error::GroupRefused { group: g, api, code }
                if *g == group && *api == joining
                    && *code == exactly::ErrorCode::GROUP_AUTHORIZATION_FAILED),
            "{protocol:?}: {e:?}"
        );
        eprintln!("{protocol:?}, no group READ: {e} after {took:?}");
        drop(c);

        // READ on the group, DESCRIBE only on the topic: the member is assigned the partition
        // and its Fetch is refused, naming the topic.
        let topic = support::unique_topic("authz-member-topic");
        cluster.create_topic(&topic, 1, 1, &[]);
        send(&p, &topic, 0, &values("m", 3)).await;
        grant(&cluster, &user, "--topic", &topic, &["Describe"]);
        grant(&cluster, &user, "--group", &group, &["Read"]);
        let mut c = limited_consumer(&cluster, &login, Some((&group, protocol))).await;
        c.subscribe([topic.clone()]).unwrap();
        let started = Instant::now();
        let e = loop {
            assert!(started.elapsed() < WAIT, "{protocol:?}: no error from poll");
            match c.poll_timeout(Duration::from_millis(200)).await {
                Err(e) => break e,
                Ok(Some(ConsumerEvent::Records(r))) => panic!("{protocol:?}: read {r:?}"),
                Ok(_) => {}
            }
        };
        assert!(
            refused_topic(&e, &topic, "Fetch") || refused_topic(&e, &topic, "OffsetFetch"),
            "{protocol:?}: {e:?}"
        );
        eprintln!(
            "{protocol:?}, DESCRIBE only: {e} after {:?}",
            started.elapsed()
        );
        c.close().await.unwrap();
    }
}

/// `(leader, in-sync replicas)` of `topic`-0 as kcat's metadata gives them (-1: no leader).
fn leader_and_isr(cluster: &Cluster, topic: &str) -> (i64, Vec<i64>) {
    let out = support::run_ok(std::process::Command::new("kcat").args([
        "-L",
        "-J",
        "-b",
        &cluster.bootstrap,
        "-t",
        topic,
        "-m",
        "10",
    ]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("kcat -L -J prints JSON");
    let p = &v["topics"][0]["partitions"][0];
    let mut isr: Vec<i64> = p["isrs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["id"].as_i64().or_else(|| r.as_i64()))
        .collect();
    isr.sort();
    (p["leader"].as_i64().unwrap_or(-1), isr)
}

/// Waits (bounded) until `done` holds for `topic`-0's leader and in-sync replicas.
async fn wait_for_partition(
    cluster: &Cluster,
    topic: &str,
    what: &str,
    done: impl Fn(i64, &[i64]) -> bool,
) {
    let end = Instant::now() + Duration::from_secs(180);
    loop {
        let (leader, isr) = leader_and_isr(cluster, topic);
        if done(leader, &isr) {
            return;
        }
        assert!(Instant::now() < end, "{what}: leader {leader}, ISR {isr:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Starts the given brokers again however the test ends, so the cluster is whole for the
/// next test.
struct RestartOnDrop<'a>(&'a Cluster, &'a [usize]);

impl Drop for RestartOnDrop<'_> {
    fn drop(&mut self) {
        for &i in self.1 {
            self.0.start_broker(i);
        }
    }
}

/// What a reader saw, in order: records (offset, value), and errors from `poll`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Read {
    Record(i64, String),
    Error(String),
}

/// Polls `c` until `done` holds for what it saw (bounded by `limit`); errors are kept in
/// order with the records.
async fn read_until(
    c: &mut Consumer,
    seen: &mut Vec<Read>,
    limit: Duration,
    what: &str,
    done: impl Fn(&[Read]) -> bool,
) -> Option<exactly::Error> {
    let end = Instant::now() + limit;
    let mut last_error = None;
    while !done(seen) {
        assert!(Instant::now() < end, "{what}: saw {seen:?}");
        match c.poll_timeout(Duration::from_millis(200)).await {
            Ok(Some(ConsumerEvent::Records(records))) => {
                seen.extend(
                    coordinates(&records)
                        .into_iter()
                        .map(|(_, o, v)| Read::Record(o, v)),
                );
            }
            Ok(_) => {}
            Err(e) => {
                seen.push(Read::Error(e.to_string()));
                last_error = Some(e);
            }
        }
    }
    last_error
}

/// A copy loop of `source`-0 to `destination`-0 on its own task, committing every `records`
/// records or `interval`, with what it reports: each committed transaction's next offset, or
/// the error of a step.
struct TruncationCopier {
    task: tokio::task::JoinHandle<()>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    transformed: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    reports: tokio::sync::mpsc::UnboundedReceiver<Result<i64, String>>,
    log: Vec<Result<i64, String>>,
}

impl TruncationCopier {
    fn spawn(
        cluster: &Cluster,
        source: &str,
        destination: &str,
        records: usize,
        interval: Duration,
    ) -> Self {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        let (sender, reports) = tokio::sync::mpsc::unbounded_channel();
        let stop = Arc::new(AtomicBool::new(false));
        let transformed = Arc::new(AtomicUsize::new(0));
        let (cluster, source, destination) =
            (cluster.clone(), source.to_owned(), destination.to_owned());
        let (stopped, count) = (Arc::clone(&stop), Arc::clone(&transformed));
        let task = tokio::spawn(async move {
            let consumer = consumer_with(
                &cluster,
                &unique_group("truncated-copy"),
                GroupProtocol::Consumer,
                OffsetReset::Earliest,
                IsolationLevel::ReadCommitted,
                &source,
                &[("request.timeout.ms", "5000")],
            )
            .await;
            let id = support::unique_topic("truncated-tx");
            let producer = support::transactional_producer_with(
                &cluster,
                &[
                    ("transactional.id", id.as_str()),
                    ("request.timeout.ms", "5000"),
                    ("delivery.timeout.ms", "120000"),
                    ("transaction.timeout.ms", "600000"),
                ],
                &[],
            )
            .await;
            let transform = move |r: ConsumerRecord| {
                count.fetch_add(1, Ordering::Relaxed);
                std::future::ready(vec![
                    Record::to(&destination)
                        .partition(0)
                        .value(r.value.unwrap_or_default()),
                ])
            };
            // Transactions end by count or interval only: the holding copier's must stay open
            // while it is caught up, across the failover.
            let mut copier = exactly::eos::CopyLoop::new(consumer, producer, transform)
                .commit_every(records, interval)
                .commit_when_caught_up(false);
            while !stopped.load(Ordering::Relaxed) {
                let report = match copier.step().await {
                    Ok(Some(t)) => t.consumed.iter().map(|c| c.next).max().map(Ok),
                    Ok(None) => None,
                    Err(e) => {
                        assert!(!e.is_fatal(), "copy loop: fatal {e}");
                        Some(Err(e.to_string()))
                    }
                };
                if let Some(report) = report {
                    let _ = sender.send(report);
                }
            }
            copier.close().await.expect("the copy loop closes");
        });
        Self {
            task,
            stop,
            transformed,
            reports,
            log: Vec::new(),
        }
    }

    /// Waits (bounded) until a committed transaction's next offset is `next`.
    async fn wait_committed(&mut self, next: i64) {
        let end = Instant::now() + Duration::from_secs(240);
        while !self.log.contains(&Ok(next)) {
            let left = end.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.reports.recv()).await {
                Ok(Some(report)) => self.log.push(report),
                _ => panic!("the copy loop did not commit up to {next}: {:?}", self.log),
            }
        }
    }

    /// Waits (bounded) until the transform was called `n` times.
    async fn wait_transformed(&self, n: usize) {
        let end = Instant::now() + WAIT;
        while self.transformed.load(std::sync::atomic::Ordering::Relaxed) < n {
            assert!(
                Instant::now() < end,
                "the copy loop transformed fewer than {n}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Stops the loop (between two steps it commits what is open and closes; a step idle
    /// for its whole interval is cut short, which loses nothing): everything it reported.
    async fn stop(mut self) -> Vec<Result<i64, String>> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if tokio::time::timeout(Duration::from_secs(10), &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
        }
        while let Ok(report) = self.reports.try_recv() {
            self.log.push(report);
        }
        eprintln!("copy loop: {:?}", self.log);
        self.log
    }
}

/// The records `values` at offsets from `from` on, as [`read_until`] sees them.
fn records_of(values: &[String], from: i64) -> Vec<Read> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| Read::Record(from + i as i64, v.clone()))
        .collect()
}

/// KIP-320 against a real unclean leader election on three brokers: the topic's two replicas
/// on brokers 2 and 3 (`unclean.leader.election.enable=true`, `min.insync.replicas=1`), 50
/// records written to both, the in-sync follower (3) SIGKILLed, 30 more written to the leader
/// (2) alone and read by everyone, the leader SIGKILLed, the old follower started and elected
/// uncleanly (Kafka's `kafka-leader-election --election-type UNCLEAN`): its log ends at 50.
/// After the leader change each reader validates its position (80) with the new leader, which
/// says epoch 0 ends at 50: a reader under `auto.offset.reset=none` gets
/// [`exactly::Error::LogTruncation`] naming the partition, 80 and 50, and reads nothing until
/// it seeks; one under `earliest` gets the same error with `reset` and reads on from 50 (as the
/// Java consumer moves it). Neither skips a record written after the election, nor re-reads
/// one: what each delivers after the error is the new log from 50 on, as kcat reads it. Two
/// copy loops: one that had committed all 80 copies the new records too (its record of what it
/// committed no longer filters them out), so its output, read `read_committed` by kcat, is the
/// 80 it copied before and then every record the source holds from 50 on, each once, in order;
/// one that held all 80 in an open transaction aborts it and copies the log again from where
/// that transaction began, so its output is exactly the source as it is now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncation_is_detected() {
    let Some(cluster) = Cluster::three() else {
        return;
    };
    let _g = cluster.exclusive();
    let topic = support::unique_topic("truncated");
    cluster.kafka_tool(
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--create",
            "--topic",
            &topic,
            "--replica-assignment",
            "2:3",
            "--config",
            "unclean.leader.election.enable=true",
            "--config",
            "min.insync.replicas=1",
        ],
    );
    wait_for_partition(&cluster, &topic, "created", |leader, isr| {
        leader == 2 && isr == [2, 3]
    })
    .await;
    let _restart = RestartOnDrop(&cluster, &[1, 2]);
    let tp = TopicPartition::new(topic.as_str(), 0);
    let p = producer(&cluster, &[]).await;
    let before = values("before", 50);
    send(&p, &topic, 0, &before).await;

    let reader = |reset| {
        test_builder(&cluster)
            .auto_offset_reset(reset)
            .set("request.timeout.ms", "5000")
            .build()
    };
    let mut none = reader(OffsetReset::None).await.unwrap();
    none.assign(std::slice::from_ref(&tp)).unwrap();
    none.seek(&tp, 0).unwrap();
    // No group and `none`: the assignment alone said to seek first.
    assert!(matches!(
        none.poll_timeout(Duration::from_millis(10)).await,
        Err(exactly::Error::InvalidState(_))
    ));
    let mut earliest = reader(OffsetReset::Earliest).await.unwrap();
    earliest.assign(std::slice::from_ref(&tp)).unwrap();

    // Two copy loops of the topic, each on its own task: one commits every 10 records, the
    // other holds one transaction open across the whole failover (it commits at 130 records).
    let eager_copy = support::unique_topic("truncated-eager");
    let holding_copy = support::unique_topic("truncated-holding");
    cluster.create_topic(&eager_copy, 1, 3, &[]);
    cluster.create_topic(&holding_copy, 1, 3, &[]);
    let mut eager = TruncationCopier::spawn(
        &cluster,
        &topic,
        &eager_copy,
        10,
        Duration::from_millis(100),
    );
    // 150 s: longer than the failover below, so its transaction stays open across it.
    let mut holding = TruncationCopier::spawn(
        &cluster,
        &topic,
        &holding_copy,
        130,
        Duration::from_secs(150),
    );

    // The in-sync follower dies; the next records are on the leader alone.
    let mut seen_none = Vec::new();
    let mut seen_earliest = Vec::new();
    read_until(&mut none, &mut seen_none, WAIT, "before", |s| s.len() >= 50).await;
    cluster.stop_broker(2, true);
    wait_for_partition(
        &cluster,
        &topic,
        "follower out of the ISR",
        |leader, isr| leader == 2 && isr == [2],
    )
    .await;
    let lost = values("lost", 30);
    send(&p, &topic, 0, &lost).await;
    let read_80 = |s: &[Read]| s.len() >= 80;
    read_until(&mut none, &mut seen_none, WAIT, "none, 80", read_80).await;
    read_until(
        &mut earliest,
        &mut seen_earliest,
        WAIT,
        "earliest, 80",
        read_80,
    )
    .await;
    let first_80: Vec<Read> = [records_of(&before, 0), records_of(&lost, 50)].concat();
    assert_eq!(seen_none, first_80);
    assert_eq!(seen_earliest, first_80);
    eager.wait_committed(80).await;
    holding.wait_transformed(80).await;
    drop(p);

    // The leader dies; the old follower, whose log ends at 50, is elected uncleanly.
    cluster.stop_broker(1, true);
    cluster.start_broker(2);
    let end = Instant::now() + Duration::from_secs(180);
    loop {
        let (leader, _) = leader_and_isr(&cluster, &topic);
        if leader == 3 {
            break;
        }
        assert!(Instant::now() < end, "no unclean election: leader {leader}");
        let _ = support::java_tool(&[
            "org.apache.kafka.tools.LeaderElectionCommand".into(),
            "--bootstrap-server".into(),
            cluster.bootstrap.clone(),
            "--election-type".into(),
            "UNCLEAN".into(),
            "--topic".into(),
            topic.clone(),
            "--partition".into(),
            "0".into(),
        ])
        .output();
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    eprintln!("unclean election done: leader 3");

    // Each reader learns of the truncation before anything else.
    let error = |s: &[Read]| s.len() > 80;
    let e = read_until(
        &mut none,
        &mut seen_none,
        Duration::from_secs(120),
        "none",
        error,
    )
    .await
    .expect("an error");
    match &e {
        exactly::Error::LogTruncation {
            partition,
            offset: 80,
            divergent_offset: Some(50),
            reset: false,
        } => assert_eq!(*partition, tp),
        other => panic!("auto.offset.reset=none: {other:?}"),
    }
    eprintln!("none: {e}");
    assert_eq!(none.position(&tp), None, "waits for a seek");
    let e = read_until(
        &mut earliest,
        &mut seen_earliest,
        Duration::from_secs(120),
        "earliest",
        error,
    )
    .await
    .expect("an error");
    assert!(
        matches!(
            &e,
            exactly::Error::LogTruncation {
                offset: 80,
                divergent_offset: Some(50),
                reset: true,
                ..
            }
        ),
        "auto.offset.reset=earliest: {e:?}"
    );
    eprintln!("earliest: {e}");
    none.seek(&tp, 50).unwrap();

    // Records written after the election are read by every reader, none skipped or twice.
    let p = producer(&cluster, &[]).await;
    let after = values("after", 80);
    send(&p, &topic, 0, &after).await;
    let all = |s: &[Read]| s.len() >= 161;
    read_until(&mut none, &mut seen_none, WAIT, "none, after", all).await;
    read_until(
        &mut earliest,
        &mut seen_earliest,
        WAIT,
        "earliest, after",
        all,
    )
    .await;
    let source = kcat_view(&cluster, &topic, Isolation::ReadCommitted);
    let expected_source: Vec<(i32, i64, String)> = before
        .iter()
        .chain(&after)
        .enumerate()
        .map(|(i, v)| (0, i as i64, v.clone()))
        .collect();
    assert_eq!(source, expected_source, "kcat: the log was truncated at 50");
    for (name, seen) in [("none", &seen_none), ("earliest", &seen_earliest)] {
        assert_eq!(&seen[..80], &first_80[..], "{name}");
        assert!(matches!(seen[80], Read::Error(_)), "{name}: {:?}", seen[80]);
        assert_eq!(
            &seen[81..],
            &records_of(&after, 50)[..],
            "{name}: the new log from 50 on"
        );
    }

    // The copy loops: the eager one copies the new records too; the holding one aborted its
    // transaction (it held copies of records now gone) and copied the log again from 0.
    eager.wait_committed(130).await;
    holding.wait_committed(130).await;
    let eager_log = eager.stop().await;
    let holding_log = holding.stop().await;
    for (name, log) in [("eager", &eager_log), ("holding", &holding_log)] {
        assert!(
            log.iter()
                .any(|r| r.as_ref().is_err_and(|e| e.contains("truncated"))),
            "the {name} copy loop reported the truncation: {log:?}"
        );
    }
    assert_eq!(
        cluster.read_values(&eager_copy, Isolation::ReadCommitted),
        [&before[..], &lost[..], &after[..]].concat(),
        "the eager copy: what it committed before the truncation, then the new log, each once"
    );
    assert_eq!(
        cluster.read_values(&holding_copy, Isolation::ReadCommitted),
        [&before[..], &after[..]].concat(),
        "the holding copy: exactly the source as it is now"
    );
    none.close().await.unwrap();
    earliest.close().await.unwrap();
}

/// Fairness under a backlog: a consumer of 4 partitions, each with a backlog of many fetch
/// answers, doing a little work per poll (as an application does), gets records of every
/// partition from its first polls on, and the partitions drain together: the spread of the
/// records delivered per partition (their lags' spread, the ends being equal) stays bounded
/// through the whole read, instead of one partition draining after another (the Java
/// consumer's greedy order, KAFKA-3932 / KIP-387). Every record arrives once, as kcat reads
/// the topic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_share_every_poll_under_backlog() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let topic = support::unique_topic("consumer-fair");
    let partitions = 4;
    let per_partition = 100_000;
    cluster.create_topic(&topic, partitions as u32, 1, &[]);
    let p = producer(&cluster, &[("linger.ms", "5")]).await;
    send_to_each_partition(&p, &topic, partitions, "fair", per_partition).await;
    p.close().await.expect("producer closes");

    let mut c = member_from_earliest(
        &cluster,
        &unique_group("consumer-fair"),
        GroupProtocol::Consumer,
        &topic,
    )
    .await;
    let total = per_partition * partitions as usize;
    let mut seen: Vec<(i32, i64, String)> = Vec::with_capacity(total);
    let mut delivered = vec![0usize; partitions as usize];
    // The poll (counting polls with records) at which each partition delivered first.
    let mut first_poll: Vec<Option<usize>> = vec![None; partitions as usize];
    let mut polls = 0;
    let mut widest = 0;
    let end = Instant::now() + 4 * WAIT;
    while seen.len() < total {
        assert!(
            Instant::now() < end,
            "{} of {total} records within {:?}: per partition {delivered:?}",
            seen.len(),
            4 * WAIT
        );
        let Some(ConsumerEvent::Records(records)) = c
            .poll_timeout(Duration::from_millis(300))
            .await
            .expect("poll")
        else {
            continue;
        };
        polls += 1;
        for r in &records {
            let at = r.partition as usize;
            delivered[at] += 1;
            first_poll[at].get_or_insert(polls);
            let value = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default());
            seen.push((r.partition, r.offset, value.into_owned()));
        }
        let (most, least) = (delivered.iter().max(), delivered.iter().min());
        widest = widest.max(most.unwrap_or(&0) - least.unwrap_or(&0));
        // The application's work on the poll's records.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    eprintln!(
        "partitions_share_every_poll_under_backlog: {polls} polls; first records at polls \
         {first_poll:?}; widest spread of records delivered per partition {widest}"
    );
    for (partition, first) in first_poll.iter().enumerate() {
        assert!(
            first.is_some_and(|poll| poll <= 3),
            "partition {partition} first delivered at poll {first:?} (of {polls})"
        );
    }
    // Every partition gets its share of each poll (a quarter of max.poll.records, 500): they
    // drift apart only while one waits for its next fetch answer and the others go on (their
    // answers are fetched together, so on an idle machine they never drift). Draining one
    // after another puts a whole partition (100,000 records) between them.
    assert!(
        widest <= 5_000,
        "the records delivered per partition drifted {widest} apart"
    );
    assert_no_records_for(&mut c, Duration::from_secs(1), "more records than written").await;
    c.close().await.unwrap();
    assert_exactly_once(
        &seen,
        &kcat_view(&cluster, &topic, Isolation::ReadUncommitted),
    );
}

/// KIP-392 on three brokers, each a rack of its own with the rack-aware replica selector: a
/// consumer with `client.rack` naming a follower's rack reads every record exactly once, as
/// kcat reads them, and its fetches go to that follower (the brokers' own FetchConsumer
/// counts over JMX), the leader answering only the first to name it.
#[tokio::test]
async fn client_rack_fetches_from_the_follower_of_its_rack() {
    let Some(cluster) = support::Cluster::three() else {
        return;
    };
    let _exclusive = cluster.exclusive();
    let topic = support::unique_topic("consumer-rack");
    cluster.create_topic(&topic, 1, 3, &[]);
    let p = producer(&cluster, &[("acks", "all")]).await;
    send(&p, &topic, 0, &values("rack", 300)).await;
    let expected = kcat_view(&cluster, &topic, Isolation::ReadCommitted);
    assert_eq!(expected.len(), 300);
    // Node ids are 1-based, broker indexes 0-based; the follower is the next node round.
    let leader = support::kcat_partition_leader(&cluster.bootstrap, &topic, 0);
    let follower = leader % 3 + 1;
    let (leader_index, follower_index) = ((leader - 1) as usize, (follower - 1) as usize);
    let fetches = |i| cluster.requests_handled(i, "FetchConsumer");
    let (leader_before, follower_before) = (fetches(leader_index), fetches(follower_index));
    let rack = format!("rack-{follower}");
    let mut c = consumer_with(
        &cluster,
        &unique_group("rack"),
        GroupProtocol::Consumer,
        OffsetReset::Earliest,
        IsolationLevel::ReadCommitted,
        &topic,
        &[("client.rack", &rack)],
    )
    .await;
    let mut seen = Seen::default();
    consume_until(&mut c, &mut seen, WAIT, |s, _| s.records.len() >= 300).await;
    // Caught up, the consumer goes on long-polling the same replica.
    assert_no_records_for(&mut c, Duration::from_secs(3), "all 300 were read").await;
    let leader_fetches = fetches(leader_index) - leader_before;
    let follower_fetches = fetches(follower_index) - follower_before;
    c.close().await.expect("close");
    assert_exactly_once(&seen.records, &expected);
    assert!(
        follower_fetches >= 3 && leader_fetches < follower_fetches,
        "FetchConsumer requests: {follower_fetches} at the follower of {rack}, \
         {leader_fetches} at the leader"
    );
}
