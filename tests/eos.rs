//! The exactly-once copy loop (`exactly::eos`) against a real broker. Every output is read back
//! with kcat in read_committed: each destination record's value names the source partition and
//! offset it was made from, so "every input exactly once, in per-partition order" is checked
//! record by record.
//!
//! `EXACTLY_EOS_RECORDS` makes the big copies smaller locally; under `CI=true` they copy
//! 200,000 records.
// The cluster guards are std locks held for a whole test, by design (see tests/support).
#![allow(clippy::await_holding_lock)]

mod support;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use exactly::eos::{CommittedTransaction, CopyLoop, OffsetTranslator, TransformErrorPolicy};
use exactly::{Consumer, ConsumerRecord, OffsetReset, Producer, Record, TopicPartition};
use support::{Cluster, Isolation};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

const PARTITIONS: i32 = 4;

fn big_copy_records() -> usize {
    if support::in_ci() {
        return 200_000;
    }
    std::env::var("EXACTLY_EOS_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000)
}

/// Fresh `{prefix}-in` and `{prefix}-out` topics of `partitions` partitions each, and a fresh
/// `{prefix}-group` name: (source, destination, group).
fn copy_topics(cluster: &Cluster, prefix: &str, partitions: i32) -> (String, String, String) {
    let source = support::unique_topic(&format!("{prefix}-in"));
    let destination = support::unique_topic(&format!("{prefix}-out"));
    let group = support::unique_topic(&format!("{prefix}-group"));
    cluster.create_topic(&source, partitions as u32, 1, &[]);
    cluster.create_topic(&destination, partitions as u32, 1, &[]);
    (source, destination, group)
}

/// Fills `topic` with `n` records spread round-robin over its partitions (idempotent producer).
async fn fill(cluster: &Cluster, topic: &str, n: usize) {
    let producer = support::producer_with(cluster, &[("linger.ms", "5")], &[]).await;
    let mut acks = Vec::with_capacity(n);
    for i in 0..n {
        let record = Record::to(topic)
            .partition(i as i32 % PARTITIONS)
            .value(format!("v{i}"));
        acks.push(producer.send(record).await.expect("send"));
    }
    for ack in acks {
        ack.await.expect("source record written");
    }
    producer.close().await.expect("close");
}

/// The value a copier writes for a source record: who copied it, and from where.
fn copy_value(tag: &str, r: &ConsumerRecord) -> String {
    format!("{tag}|{}:{}", r.partition, r.offset)
}

/// Parses `copy_value` back: (tag, source partition, source offset).
fn parse_copy(value: &str) -> (String, i32, i64) {
    let (tag, at) = value.split_once('|').expect("tag|partition:offset");
    let (p, o) = at.split_once(':').expect("partition:offset");
    let o = o.split('#').next().unwrap_or(o);
    (
        tag.to_owned(),
        p.parse().expect("partition"),
        o.parse().expect("offset"),
    )
}

async fn consumer(cluster: &Cluster, group: &str, topic: &str) -> Consumer {
    consumer_with(cluster, group, topic, &[]).await
}

/// [`consumer`] with `extra` properties set last.
async fn consumer_with(
    cluster: &Cluster,
    group: &str,
    topic: &str,
    extra: &[(&str, &str)],
) -> Consumer {
    let mut builder = Consumer::builder()
        .bootstrap(&cluster.bootstrap)
        .group_id(group)
        .auto_offset_reset(OffsetReset::Earliest)
        // A dead member is noticed in seconds (the test bed's KIP-848 groups take 6 s from
        // the broker; classic groups from here).
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500")
        .set("fetch.max.wait.ms", "200");
    for (key, value) in extra {
        builder = builder.set(*key, *value);
    }
    let mut consumer = builder.build().await.expect("consumer builds");
    consumer.subscribe([topic]).expect("subscribe");
    consumer
}

async fn transactional(cluster: &Cluster, id: &str, extra: &[(&str, &str)]) -> Producer {
    let defaults = [
        ("transactional.id", id),
        ("linger.ms", "5"),
        ("request.timeout.ms", "5000"),
        ("delivery.timeout.ms", "60000"),
    ];
    support::transactional_producer_with(cluster, &defaults, extra).await
}

/// A copier that writes each record to the same partition of `destination`, tagged `tag`.
type Transform = Box<dyn FnMut(ConsumerRecord) -> std::future::Ready<Vec<Record>> + Send>;

fn mirror(destination: &str, tag: &str) -> Transform {
    let destination = destination.to_owned();
    let tag = tag.to_owned();
    Box::new(move |r: ConsumerRecord| {
        std::future::ready(vec![
            Record::to(&destination)
                .partition(r.partition)
                .value(copy_value(&tag, &r)),
        ])
    })
}

async fn copy_loop(
    cluster: &Cluster,
    group: &str,
    source: &str,
    destination: &str,
    transactional_id: &str,
) -> CopyLoop<Transform> {
    let consumer = consumer(cluster, group, source).await;
    let producer = transactional(cluster, transactional_id, &[]).await;
    CopyLoop::new(consumer, producer, mirror(destination, transactional_id))
        .commit_every(500, Duration::from_millis(100))
}

/// What a running copier reports after each commit.
struct Commit {
    transaction: CommittedTransaction,
    /// The group's committed offsets of the transaction's partitions, read right after it.
    group_offsets: Vec<(TopicPartition, Option<i64>)>,
}

/// A copier running on its own task until `stop` (then it closes: commits and leaves the
/// group), or until its task is aborted (killed: no close, mid-transaction).
struct Copier {
    task: JoinHandle<()>,
    stop: Arc<AtomicBool>,
    /// Its producer's aborted transactions (`transactions_aborted`), as of its last step.
    aborted: Arc<AtomicU64>,
}

impl Copier {
    fn spawn(
        cluster: &Cluster,
        group: &str,
        source: &str,
        destination: &str,
        transactional_id: &str,
        commits: mpsc::UnboundedSender<Commit>,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (cluster, group, source, destination, id) = (
            cluster.clone(),
            group.to_owned(),
            source.to_owned(),
            destination.to_owned(),
            transactional_id.to_owned(),
        );
        let stopped = Arc::clone(&stop);
        let aborted = Arc::new(AtomicU64::new(0));
        let aborts = Arc::clone(&aborted);
        let span = tracing::info_span!("copier", id = transactional_id);
        let task = tokio::spawn(tracing::Instrument::instrument(
            async move {
                let mut copier = copy_loop(&cluster, &group, &source, &destination, &id).await;
                while !stopped.load(Ordering::Relaxed) {
                    let stepped = copier.step().await;
                    aborts.store(
                        copier.producer().metrics().transactions_aborted,
                        Ordering::Relaxed,
                    );
                    match stepped {
                        Ok(Some(transaction)) => {
                            let partitions: Vec<TopicPartition> = transaction
                                .consumed
                                .iter()
                                .map(|c| c.partition.clone())
                                .collect();
                            let group_offsets = copier
                                .consumer()
                                .committed(&partitions)
                                .await
                                .expect("OffsetFetch after a commit");
                            let _ = commits.send(Commit {
                                transaction,
                                group_offsets,
                            });
                        }
                        Ok(None) => {}
                        Err(e) => {
                            assert!(!e.is_fatal(), "copier {id}: fatal error {e}");
                            eprintln!("copier {id}: transaction aborted: {e}");
                        }
                    }
                }
                if let Some(transaction) = copier.close().await.expect("close commits") {
                    let _ = commits.send(Commit {
                        transaction,
                        group_offsets: Vec::new(),
                    });
                }
            },
            span,
        ));
        Self {
            task,
            stop,
            aborted,
        }
    }

    /// Graceful: commits the open transaction, leaves the group, closes. Returns how many
    /// transactions it aborted.
    async fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        tokio::time::timeout(Duration::from_secs(60), self.task)
            .await
            .expect("copier stops within 60 s")
            .expect("copier task ends cleanly");
        self.aborted.load(Ordering::Relaxed)
    }

    /// Killed: the task is dropped where it is, without close. Returns how many transactions
    /// it had aborted (the one left open is aborted later, by its successor's
    /// init_transactions).
    async fn kill(self) -> u64 {
        self.task.abort();
        let _ = self.task.await;
        self.aborted.load(Ordering::Relaxed)
    }
}

/// Collects commits until `total` source records were reported committed, checking that the
/// group's committed offsets never go backwards (confluent-kafka-go #209) and that a commit's
/// own offsets are never above what the group holds right after it.
struct Progress {
    commits: mpsc::UnboundedReceiver<Commit>,
    copied: usize,
    transactions: Vec<CommittedTransaction>,
    highest: BTreeMap<TopicPartition, i64>,
}

impl Progress {
    fn new(commits: mpsc::UnboundedReceiver<Commit>) -> Self {
        Self {
            commits,
            copied: 0,
            transactions: Vec::new(),
            highest: BTreeMap::new(),
        }
    }

    fn take(&mut self, commit: Commit) {
        for range in &commit.transaction.consumed {
            let highest = self.highest.entry(range.partition.clone()).or_insert(-1);
            assert!(
                range.next >= *highest,
                "rewind (confluent-kafka-go #209): {}-{} committed {} after {} had been committed",
                range.partition.topic,
                range.partition.partition,
                range.next,
                highest
            );
            *highest = range.next;
        }
        for (partition, offset) in &commit.group_offsets {
            let mine = commit
                .transaction
                .consumed
                .iter()
                .find(|c| &c.partition == partition)
                .map(|c| c.next);
            assert!(
                offset.is_some() && *offset >= mine,
                "rewind (confluent-kafka-go #209): the group holds {offset:?} for {partition:?} right after we committed {mine:?}"
            );
        }
        self.copied += commit.transaction.records_in();
        self.transactions.push(commit.transaction);
    }

    /// Waits until at least `records` were copied (bounded).
    async fn until(&mut self, records: usize, within: Duration) {
        let deadline = Instant::now() + within;
        while self.copied < records {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.commits.recv()).await {
                Ok(Some(commit)) => self.take(commit),
                Ok(None) => panic!(
                    "every copier ended with {} of {records} copied",
                    self.copied
                ),
                Err(_) => panic!("only {} of {records} copied within {within:?}", self.copied),
            }
        }
    }

    /// Takes what is left in the channel (after every copier stopped).
    fn drain(&mut self) {
        while let Ok(commit) = self.commits.try_recv() {
            self.take(commit);
        }
    }
}

/// Source offsets per partition as a read_committed reader sees them.
fn source_offsets(cluster: &Cluster, topic: &str) -> BTreeMap<i32, Vec<i64>> {
    let mut out: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for r in cluster.read_topic(topic, Isolation::ReadCommitted) {
        out.entry(r.partition).or_default().push(r.offset);
    }
    out
}

/// Waits until the group's committed offsets reach the end of every source partition. A
/// killed copier may have committed a transaction it never reported, so completion is read
/// from the group, not counted from the reports.
async fn wait_until_committed(cluster: &Cluster, group: &str, source: &str, within: Duration) {
    let ends: BTreeMap<i32, i64> = source_offsets(cluster, source)
        .into_iter()
        .map(|(p, offsets)| (p, offsets.last().map_or(0, |o| o + 1)))
        .collect();
    let partitions: Vec<TopicPartition> = ends
        .keys()
        .map(|p| TopicPartition::new(source, *p))
        .collect();
    let mut reader = Consumer::builder()
        .bootstrap(&cluster.bootstrap)
        .group_id(group)
        .build()
        .await
        .expect("reader builds");
    let deadline = Instant::now() + within;
    loop {
        let committed = reader.committed(&partitions).await.expect("OffsetFetch");
        let behind: Vec<_> = committed
            .iter()
            .filter(|(p, o)| o.unwrap_or(-1) < ends[&p.partition])
            .collect();
        if behind.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not everything committed within {within:?}: {behind:?} (ends {ends:?})"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Every committed source record is in the destination exactly once, in its source
/// partition's order, in the same partition (read_committed, kcat).
fn assert_exactly_once(cluster: &Cluster, source: &str, destination: &str) {
    assert_copied_once(cluster, destination, &source_offsets(cluster, source));
}

/// The destination holds a copy of each of the `expected` source offsets exactly once, per
/// source partition in its order and in the same partition, and nothing else (read_committed,
/// kcat).
fn assert_copied_once(cluster: &Cluster, destination: &str, expected: &BTreeMap<i32, Vec<i64>>) {
    let mut copied: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for r in cluster.read_topic(destination, Isolation::ReadCommitted) {
        let (_, p, o) = parse_copy(r.value.as_deref().expect("a value"));
        assert_eq!(p, r.partition, "copied into the wrong partition");
        copied.entry(p).or_default().push(o);
    }
    for (p, offsets) in expected {
        let got = copied.remove(p).unwrap_or_default();
        if &got != offsets {
            let mut seen = std::collections::BTreeSet::new();
            let duplicates: Vec<_> = got.iter().filter(|o| !seen.insert(**o)).take(5).collect();
            let missing: Vec<_> = offsets
                .iter()
                .filter(|o| !seen.contains(o))
                .take(5)
                .collect();
            panic!(
                "partition {p}: {} copies of {} records; duplicates {duplicates:?}, missing {missing:?}, in order: {}",
                got.len(),
                offsets.len(),
                got.windows(2).all(|w| w[0] < w[1])
            );
        }
    }
    assert!(
        copied.is_empty(),
        "copies of records that are not in the source: {copied:?}"
    );
}

async fn copy_with_kill(cluster: Cluster) {
    let _shared = cluster.shared();
    let records = big_copy_records();
    let (source, destination, group) = copy_topics(&cluster, "eos", PARTITIONS);
    fill(&cluster, &source, records).await;

    let (tx, rx) = mpsc::unbounded_channel();
    let mut progress = Progress::new(rx);
    let a = Copier::spawn(&cluster, &group, &source, &destination, "eos-a", tx.clone());
    let b = Copier::spawn(&cluster, &group, &source, &destination, "eos-b", tx.clone());
    progress.until(records / 3, Duration::from_secs(300)).await;
    // Killed mid-transaction: no commit, no close; the member expires, its transaction stays
    // open until the restarted copier's init_transactions aborts it.
    let killed_aborts = a.kill().await;
    let a = Copier::spawn(&cluster, &group, &source, &destination, "eos-a", tx.clone());
    drop(tx);
    wait_until_committed(&cluster, &group, &source, Duration::from_secs(600)).await;
    let aborts = [killed_aborts, a.stop().await, b.stop().await];
    progress.drain();
    // With default fetch sizes a copier's buffer may outlive a rebalance; how many
    // transactions that cost is worth seeing in every run.
    eprintln!(
        "copy_with_kill: {} transactions committed, {} aborted (killed copier {}, its successor {}, the other {})",
        progress.transactions.len(),
        aborts.iter().sum::<u64>(),
        aborts[0],
        aborts[1],
        aborts[2]
    );
    // The killed copier may have committed a transaction it did not live to report.
    assert!(
        progress.copied <= records,
        "{} records reported copied",
        progress.copied
    );
    assert_exactly_once(&cluster, &source, &destination);
}

/// Two copiers in one group copy `EXACTLY_EOS_RECORDS` (200,000 in CI); one is killed
/// mid-transaction and restarted. The destination holds every record exactly once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_exactly_once_with_kill() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    copy_with_kill(cluster).await;
}

/// The same on a cluster with transactions v1 (AddPartitionsToTxn, AddOffsetsToTxn).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_exactly_once_with_kill_tv1() {
    let Some(cluster) = Cluster::tv1() else {
        return;
    };
    copy_with_kill(cluster).await;
}

/// confluent-kafka-go #209 (librdkafka rewound committed offsets during rolling deploys): three
/// copiers are restarted one after another while copying. The group's committed offsets, read
/// after every commit, never move backwards; nothing is lost or duplicated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_kafka_go_209_rolling_restart_never_rewinds() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let records = big_copy_records() / 2;
    let (source, destination, group) = copy_topics(&cluster, "eos-roll", PARTITIONS);
    fill(&cluster, &source, records).await;

    // An observer outside the group reads its committed offsets all along.
    let observer_stop = Arc::new(AtomicBool::new(false));
    let observer = {
        let stop = Arc::clone(&observer_stop);
        let mut reader = Consumer::builder()
            .bootstrap(&cluster.bootstrap)
            .group_id(&group)
            .build()
            .await
            .expect("observer builds");
        let partitions: Vec<TopicPartition> = (0..PARTITIONS)
            .map(|p| TopicPartition::new(source.as_str(), p))
            .collect();
        tokio::spawn(async move {
            let mut last: BTreeMap<TopicPartition, i64> = BTreeMap::new();
            let mut reads = 0u32;
            while !stop.load(Ordering::Relaxed) {
                for (p, offset) in reader.committed(&partitions).await.expect("OffsetFetch") {
                    let offset = offset.unwrap_or(-1);
                    let before = last.insert(p.clone(), offset).unwrap_or(-1);
                    assert!(
                        offset >= before,
                        "rewind (confluent-kafka-go #209): {p:?} went from {before} back to {offset}"
                    );
                }
                reads += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            reads
        })
    };

    let (tx, rx) = mpsc::unbounded_channel();
    let mut progress = Progress::new(rx);
    let ids = ["eos-roll-0", "eos-roll-1", "eos-roll-2"];
    let mut copiers: Vec<Option<Copier>> = ids
        .iter()
        .map(|id| {
            Some(Copier::spawn(
                &cluster,
                &group,
                &source,
                &destination,
                id,
                tx.clone(),
            ))
        })
        .collect();
    for (i, id) in ids.iter().enumerate() {
        progress
            .until(records * (i + 1) / 5, Duration::from_secs(300))
            .await;
        if let Some(copier) = copiers[i].take() {
            copier.stop().await;
        }
        copiers[i] = Some(Copier::spawn(
            &cluster,
            &group,
            &source,
            &destination,
            id,
            tx.clone(),
        ));
    }
    drop(tx);
    wait_until_committed(&cluster, &group, &source, Duration::from_secs(600)).await;
    for copier in copiers.into_iter().flatten() {
        copier.stop().await;
    }
    progress.drain();
    observer_stop.store(true, Ordering::Relaxed);
    let reads = observer.await.expect("the observer saw no rewind");
    assert!(
        reads > 10,
        "the observer read the group's offsets only {reads} times"
    );
    assert_eq!(progress.copied, records);
    assert_exactly_once(&cluster, &source, &destination);
}

/// A copier whose partitions were reassigned while it was paused past `max.poll.interval.ms`
/// cannot commit its offsets or its records afterwards: its commit fails (the consumer knows
/// it lost them, or the coordinator fences the offsets) and nothing of its transaction is
/// visible.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zombie_copier_is_fenced() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let records = 2_000;
    let (source, destination, group) = copy_topics(&cluster, "eos-zombie", PARTITIONS);
    fill(&cluster, &source, records).await;

    // The zombie reads and produces, but is never let to commit on its own.
    let consumer = consumer_with(
        &cluster,
        &group,
        &source,
        &[("max.poll.interval.ms", "5000")],
    )
    .await;
    let producer = transactional(
        &cluster,
        "eos-zombie",
        &[("transaction.timeout.ms", "300000")],
    )
    .await;
    let mut zombie = CopyLoop::new(consumer, producer, mirror(&destination, "zombie"))
        .commit_every(usize::MAX, Duration::from_secs(3600));
    let deadline = Instant::now() + Duration::from_secs(60);
    while zombie.consumer().assignment().is_empty()
        || zombie.producer().transaction_state() != Some(exactly::TxnState::InTransaction)
    {
        assert!(
            Instant::now() < deadline,
            "the zombie got no partitions or records in 60 s"
        );
        // Dropping a step that waits for records loses nothing (cancel safety).
        let _ = tokio::time::timeout(Duration::from_millis(500), zombie.step()).await;
    }

    // Paused past max.poll.interval.ms: it leaves, and the group gives its partitions to the
    // next member.
    let (tx, rx) = mpsc::unbounded_channel();
    let mut progress = Progress::new(rx);
    let heir = Copier::spawn(&cluster, &group, &source, &destination, "eos-heir", tx);
    progress.until(records, Duration::from_secs(180)).await;

    let err = zombie
        .commit()
        .await
        .expect_err("the zombie's offsets are fenced");
    eprintln!("zombie commit: {err}");
    // The group refused it (see `FENCING_CODES`), or the consumer's own word that the
    // partitions are gone.
    assert!(
        matches!(err, exactly::Error::PartitionsLost { .. })
            || err
                .code()
                .is_some_and(|c| support::members::FENCING_CODES.contains(&c.0)),
        "a fencing error, not: {err}"
    );
    heir.stop().await;
    progress.drain();
    drop(zombie);
    let visible = cluster.read_topic(&destination, Isolation::ReadCommitted);
    assert!(
        visible
            .iter()
            .all(|r| !r.value.as_deref().unwrap_or("").starts_with("zombie|")),
        "a record of the zombie's transaction is visible"
    );
    assert_exactly_once(&cluster, &source, &destination);
    let mut reader = Consumer::builder()
        .bootstrap(&cluster.bootstrap)
        .group_id(&group)
        .build()
        .await
        .expect("reader builds");
    let partitions: Vec<TopicPartition> = (0..PARTITIONS)
        .map(|p| TopicPartition::new(source.as_str(), p))
        .collect();
    let expected = source_offsets(&cluster, &source);
    for (p, offset) in reader.committed(&partitions).await.expect("OffsetFetch") {
        let end = expected
            .get(&p.partition)
            .and_then(|o| o.last())
            .map(|o| o + 1);
        assert_eq!(offset, end, "{p:?}: the heir's offsets stand");
    }
}

/// The end offset of `topic`-`partition` (kcat's ListOffsets).
fn end_offset(cluster: &Cluster, topic: &str, partition: i32) -> i64 {
    let out = support::run_ok(Command::new("kcat").args([
        "-Q",
        "-b",
        &cluster.bootstrap,
        "-t",
        &format!("{topic}:{partition}:-1"),
    ]));
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .last()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("kcat -Q printed {text:?}"))
}

/// KAFKA-12468 (MirrorMaker 2's offset translation): the source has committed and aborted
/// transactions (markers and aborted records take offsets) and the transform drops some records
/// and doubles others. For every source offset, the translated destination offset is at most
/// the destination offset of the first copy of a record at or after it, and the lag computed
/// from it is never negative. MM2's extrapolation is shown to fail on the same data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_12468_translation_is_conservative() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let (source, destination, group) = copy_topics(&cluster, "eos-tr", 2);

    // Source: 60 transactions of 1..=7 records; every third aborted.
    let writer = transactional(&cluster, &support::unique_topic("eos-tr-writer"), &[]).await;
    for t in 0..60u32 {
        writer.begin_transaction().expect("begin");
        for r in 0..(t % 7 + 1) {
            let ack = writer
                .send(
                    Record::to(&source)
                        .partition((t % 2) as i32)
                        .value(format!("t{t}r{r}")),
                )
                .await
                .expect("send");
            // The commit or abort below settles it.
            drop(ack);
        }
        if t % 3 == 2 {
            writer.abort_transaction().await.expect("abort");
        } else {
            writer.commit_transaction().await.expect("commit");
        }
    }
    writer.close().await.expect("close");

    // Drops records whose offset ends in 3, copies those ending in 7 twice.
    let consumer = consumer(&cluster, &group, &source).await;
    let producer = transactional(&cluster, &support::unique_topic("eos-tr-copier"), &[]).await;
    let to = destination.clone();
    let mut copier = CopyLoop::new(consumer, producer, move |r: ConsumerRecord| {
        let copies = match r.offset % 10 {
            3 => 0,
            7 => 2,
            _ => 1,
        };
        let out: Vec<Record> = (0..copies)
            .map(|i| {
                Record::to(&to)
                    .partition(r.partition)
                    .value(format!("{}#{i}", copy_value("tr", &r)))
            })
            .collect();
        std::future::ready(out)
    })
    .commit_every(5, Duration::from_millis(50));
    let expected = source_offsets(&cluster, &source);
    let total: usize = expected.values().map(Vec::len).sum();
    let mut translator = OffsetTranslator::new();
    let mut copied = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while copied < total {
        assert!(
            Instant::now() < deadline,
            "copied {copied} of {total} in 120 s"
        );
        if let Some(txn) = copier.step().await.expect("step") {
            copied += txn.records_in();
            translator.record(&txn);
        }
    }
    copier.close().await.expect("close");

    let copies = cluster.read_topic(&destination, Isolation::ReadCommitted);
    let mut naive_wrong = 0;
    for p in 0..2 {
        let source_partition = TopicPartition::new(source.as_str(), p);
        let destination_partition = TopicPartition::new(destination.as_str(), p);
        let source_end = end_offset(&cluster, &source, p);
        let destination_end = end_offset(&cluster, &destination, p);
        // (source offset, destination offset) of every visible copy, in destination order.
        let pairs: Vec<(i64, i64)> = copies
            .iter()
            .filter(|r| r.partition == p)
            .map(|r| (parse_copy(r.value.as_deref().expect("value")).2, r.offset))
            .collect();
        assert!(!pairs.is_empty());
        for upstream in 0..=source_end {
            let first_copy = pairs
                .iter()
                .filter(|(s, _)| *s >= upstream)
                .map(|(_, d)| *d)
                .min()
                .unwrap_or(destination_end);
            let translated =
                translator.translate(&source_partition, upstream, &destination_partition);
            if let Some(t) = translated {
                assert!(
                    t <= first_copy,
                    "partition {p}: upstream {upstream} → {t} skips the copy at {first_copy}"
                );
                assert!(
                    destination_end - t >= 0,
                    "negative lag at upstream {upstream}"
                );
            } else {
                assert!(
                    pairs.iter().all(|(s, _)| *s >= upstream),
                    "partition {p}: no translation for {upstream} although copies precede it"
                );
            }
            // MM2 before KAFKA-12468: the first pair's distance extrapolated.
            let (s0, d0) = pairs[0];
            if upstream >= s0 && d0 + (upstream - s0) > first_copy {
                naive_wrong += 1;
            }
        }
    }
    assert!(naive_wrong > 0, "the data did not exercise MM2's failure");
}

/// A copier whose source has nothing more commits what it copied without waiting out its
/// commit interval (`commit_when_caught_up`, on by default): with an interval of 120 s and a
/// record bound it never reaches, 600 records are committed within seconds of their copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caught_up_copier_commits_before_its_interval() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let records = 600;
    let (source, destination, group) = copy_topics(&cluster, "eos-caught-up-commit", PARTITIONS);
    fill(&cluster, &source, records).await;
    let consumer = consumer(&cluster, &group, &source).await;
    let id = support::unique_topic("eos-caught-up-copier");
    let producer = transactional(&cluster, &id, &[]).await;
    let mut copier = CopyLoop::new(consumer, producer, mirror(&destination, &id))
        .commit_every(1_000_000, Duration::from_secs(120));
    let mut copied = 0;
    let began = Instant::now();
    let deadline = began + Duration::from_secs(240);
    while copied < records {
        assert!(Instant::now() < deadline, "{copied} of {records} committed");
        if let Some(txn) = copier.step().await.expect("step") {
            copied += txn.records_in();
        }
    }
    // The group join and the copy take a few seconds, the linger once caught up a tenth of the
    // interval (12 s); waiting out the interval would take 120.
    let took = began.elapsed();
    assert!(
        took < Duration::from_secs(60),
        "committed after {took:?}: the loop waited for its interval"
    );
    copier.close().await.expect("close");
    assert_eq!(copied, records);
    assert_exactly_once(&cluster, &source, &destination);
}

/// A copier whose source never runs dry within its commit interval still commits at the
/// interval: with a record bound it never reaches and a transform taking a millisecond a
/// record, 4,000 records take seconds to copy, and the first transaction ends after about a
/// second with part of them, not after the backlog (the interval is measured on the
/// consumer's clock, and only a poll that brings nothing would end it otherwise).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_copier_commits_at_its_interval() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let records = 4_000;
    let (source, destination, group) = copy_topics(&cluster, "eos-busy-interval", PARTITIONS);
    fill(&cluster, &source, records).await;
    let consumer = consumer(&cluster, &group, &source).await;
    let id = support::unique_topic("eos-busy-copier");
    let producer = transactional(&cluster, &id, &[]).await;
    let mut copy = mirror(&destination, &id);
    let slow: Transform = Box::new(move |r: ConsumerRecord| {
        std::thread::sleep(Duration::from_millis(1));
        copy(r)
    });
    let mut copier =
        CopyLoop::new(consumer, producer, slow).commit_every(1_000_000, Duration::from_secs(1));
    let mut transactions = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(240);
    while transactions.iter().sum::<usize>() < records {
        assert!(Instant::now() < deadline, "{transactions:?} of {records}");
        if let Some(txn) = copier.step().await.expect("step") {
            transactions.push(txn.records_in());
        }
    }
    copier.close().await.expect("close");
    assert!(
        transactions.len() >= 2 && transactions[0] < records,
        "one transaction per interval expected, got {transactions:?}"
    );
    assert_exactly_once(&cluster, &source, &destination);
}

/// A copier of a fresh topic of `records` records that never commits on its own (no record
/// bound, an hour's interval, no early commit when caught up); the count of its transform
/// calls; its source, destination and group.
async fn holding_copier(
    cluster: &Cluster,
    prefix: &str,
    records: usize,
) -> (
    CopyLoop<Transform>,
    Arc<AtomicUsize>,
    (String, String, String),
) {
    let (source, destination, group) = copy_topics(cluster, prefix, PARTITIONS);
    fill(cluster, &source, records).await;
    let consumer = consumer(cluster, &group, &source).await;
    let id = support::unique_topic(prefix);
    let producer = transactional(cluster, &id, &[]).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let mut copy = mirror(&destination, &id);
    let transform: Transform = Box::new(move |r: ConsumerRecord| {
        counted.fetch_add(1, Ordering::Relaxed);
        copy(r)
    });
    let copier = CopyLoop::new(consumer, producer, transform)
        .commit_every(usize::MAX, Duration::from_secs(3600))
        .commit_when_caught_up(false);
    (copier, calls, (source, destination, group))
}

/// Steps `copier` (each step dropped after 500 ms: dropping a step that waits for records
/// loses nothing) until its transform ran `want` times, then once more, so that a step
/// dropped while it sent (its transaction aborted and rewound) has copied everything again.
async fn step_until_transformed(
    copier: &mut CopyLoop<Transform>,
    calls: &AtomicUsize,
    want: usize,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while calls.load(Ordering::Relaxed) < want {
        assert!(
            Instant::now() < deadline,
            "{want} transforms not reached in 60 s"
        );
        let _ = tokio::time::timeout(Duration::from_millis(500), copier.step()).await;
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), copier.step()).await;
}

/// `close` commits the transaction still open, with its offsets, and returns it: a copier
/// that never commits on its own copies 300 records into one open transaction, and after
/// `close` every one is in the destination once and the group's offsets are at the source's
/// end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_commits_the_open_transaction() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let records = 300;
    let (mut copier, calls, (source, destination, group)) =
        holding_copier(&cluster, "eos-close", records).await;
    step_until_transformed(&mut copier, &calls, records).await;
    assert_eq!(copier.counters().transactions_committed, 0);
    let last = copier
        .close()
        .await
        .expect("close commits")
        .expect("the open transaction, committed");
    assert_eq!(last.records_in(), records);
    assert_exactly_once(&cluster, &source, &destination);
    wait_until_committed(&cluster, &group, &source, Duration::from_secs(5)).await;
}

/// The copy loop's transaction aborted on its producer behind its back is noticed by the next
/// step from the producer's transaction ledger: the step says so, the loop rewinds, and the
/// input is copied again, every record once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_aborted_behind_the_loops_back_is_noticed() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let records = 300;
    let (mut copier, calls, (source, destination, _)) =
        holding_copier(&cluster, "eos-behind", records).await;
    step_until_transformed(&mut copier, &calls, records).await;
    copier
        .producer()
        .abort_transaction()
        .await
        .expect("aborted behind the loop's back");
    let noticed = tokio::time::timeout(Duration::from_secs(30), copier.step())
        .await
        .expect("the step returns")
        .expect_err("noticed");
    assert!(noticed.to_string().contains("behind its back"), "{noticed}");
    let copied_before = calls.load(Ordering::Relaxed);
    step_until_transformed(&mut copier, &calls, copied_before + records).await;
    let last = copier.close().await.expect("close commits");
    assert_eq!(last.map(|t| t.records_in()), Some(records));
    assert_exactly_once(&cluster, &source, &destination);
}

/// Aborted input is copied again, never skipped: every 700th transform call produces a record
/// the producer refuses (an invalid topic name), so the loop aborts the transaction and seeks
/// back to where it began; the destination still holds every record exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_input_is_copied_again() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let records = 20_000;
    let (source, destination, group) = copy_topics(&cluster, "eos-abort", PARTITIONS);
    fill(&cluster, &source, records).await;

    let consumer = consumer(&cluster, &group, &source).await;
    let producer = transactional(&cluster, &support::unique_topic("eos-abort-copier"), &[]).await;
    let to = destination.clone();
    let mut calls = 0u64;
    let mut copier = CopyLoop::new(consumer, producer, move |r: ConsumerRecord| {
        calls += 1;
        let topic = if calls.is_multiple_of(700) {
            "not a topic!"
        } else {
            to.as_str()
        };
        std::future::ready(vec![
            Record::to(topic)
                .partition(r.partition)
                .value(copy_value("abort", &r)),
        ])
    })
    .commit_every(500, Duration::from_millis(100));
    let (mut copied, mut aborts) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(180);
    while copied < records {
        assert!(
            Instant::now() < deadline,
            "copied {copied} of {records} in 180 s ({aborts} aborts)"
        );
        match copier.step().await {
            Ok(Some(txn)) => copied += txn.records_in(),
            Ok(None) => {}
            Err(e) => {
                assert!(!e.is_fatal(), "{e}");
                aborts += 1;
            }
        }
    }
    copier.close().await.expect("close");
    assert!(aborts >= 20, "only {aborts} transactions aborted");
    assert_eq!(copied, records);
    assert_exactly_once(&cluster, &source, &destination);
}

/// One dead letter as kcat read it (read_committed): its key, value and headers in order.
struct DeadLetter {
    key: Option<String>,
    value: Option<String>,
    headers: Vec<(String, String)>,
}

impl DeadLetter {
    /// The first header named `name`.
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads `topic` with kcat (read_committed), headers included (kcat's JSON envelope lists
/// them as a flat `[key, value, key, value, ...]` array).
fn read_dead_letters(cluster: &Cluster, topic: &str) -> Vec<DeadLetter> {
    let out = support::run_ok(
        Command::new("kcat")
            .args(["-C", "-b", &cluster.bootstrap, "-t", topic])
            .args(["-o", "beginning", "-e", "-J", "-q"])
            .args(["-X", "isolation.level=read_committed", "-m", "60"]),
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("kcat printed non-JSON {line:?}: {e}"));
            let text = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_owned);
            let flat: Vec<String> = v
                .get("headers")
                .and_then(|h| h.as_array())
                .map(|h| {
                    h.iter()
                        .map(|x| x.as_str().unwrap_or_default().to_owned())
                        .collect()
                })
                .unwrap_or_default();
            DeadLetter {
                key: text("key"),
                value: text("payload"),
                headers: flat
                    .chunks(2)
                    .map(|kv| (kv[0].clone(), kv.get(1).cloned().unwrap_or_default()))
                    .collect(),
            }
        })
        .collect()
}

/// The dead-letter policy sends what the transform fails on to a dead-letter topic in the same
/// transaction as the good output (KIP-298's headers; rule T4 for both). Every 13th source
/// record does not parse; four transforms run at once and finish out of order; and once, late
/// in a transaction that already holds dead letters and good output, the transform makes a
/// record the producer refuses, so that transaction aborts. kcat (read_committed) then finds
/// every bad record in the dead-letter topic exactly once, in its partition's order, with its
/// key, value and headers and Connect's error headers; every good record in the destination
/// exactly once, in order; and nothing of the aborted transaction (read_uncommitted shows its
/// dead letters and output were written).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letter_in_the_transaction() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let records = 2_000;
    let (source, destination, group) = copy_topics(&cluster, "eos-dlq", PARTITIONS);
    let dead_letters = support::unique_topic("eos-dlq-dead");
    cluster.create_topic(&dead_letters, 1, 1, &[]);
    let producer = support::producer_with(&cluster, &[("linger.ms", "5")], &[]).await;
    let mut acks = Vec::with_capacity(records);
    for i in 0..records {
        let record = Record::to(&source)
            .partition(i as i32 % PARTITIONS)
            .key(format!("k{i}"))
            .value(format!("{i}"))
            .header("origin", format!("o{i}"));
        acks.push(producer.send(record).await.expect("send"));
    }
    for ack in acks {
        ack.await.expect("source record written");
    }
    producer.close().await.expect("close");
    let bad = |value: &str| value.parse::<usize>().is_ok_and(|i| i % 13 == 0);

    let consumer = consumer(&cluster, &group, &source).await;
    let producer = transactional(&cluster, &support::unique_topic("eos-dlq-copier"), &[]).await;
    let to = destination.clone();
    // Transforms begun since the last commit: the closure sees no transaction, the test's
    // loop resets this when a step returns a commit (a step begins no transform after its
    // commit).
    let since_commit = Arc::new(AtomicUsize::new(0));
    let (mut poisoned, mut after_bad) = (false, false);
    let begun = Arc::clone(&since_commit);
    let mut copier = CopyLoop::new(consumer, producer, move |r: ConsumerRecord| {
        let value = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
        let i: usize = value.parse().unwrap_or_default();
        // Once, past record 1,000 (past the first poll, amid other records), an output the
        // producer refuses: after a pause, so the transaction's earlier records have reached
        // the log. It is the record transformed right after a bad one, at least 30 records
        // into its transaction, so the aborted transaction holds both output and a dead
        // letter whatever the polls' sizes and order (poisoning record 1,000 itself left the
        // aborted transaction empty when 1,000 came first in it).
        let in_transaction = begun.fetch_add(1, Ordering::Relaxed);
        let poison = i >= 1_000 && after_bad && in_transaction >= 30 && !poisoned;
        poisoned |= poison;
        after_bad = bad(&value);
        let topic = if poison {
            "not a topic!".to_owned()
        } else {
            to.clone()
        };
        async move {
            tokio::time::sleep(Duration::from_millis(if poison {
                1_000
            } else {
                (i % 3) as u64
            }))
            .await;
            if bad(&value) {
                return Err(format!("record {value} does not parse"));
            }
            Ok(vec![
                Record::to(topic)
                    .partition(r.partition)
                    .value(copy_value("dlq", &r)),
            ])
        }
    })
    .on_transform_error(TransformErrorPolicy::dead_letter(&dead_letters))
    .transform_concurrency(4)
    .commit_every(300, Duration::from_millis(500));
    let (mut copied, mut failed_steps) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(120);
    while copied < records {
        assert!(
            Instant::now() < deadline,
            "copied {copied} of {records} in 120 s"
        );
        match copier.step().await {
            Ok(Some(txn)) => {
                since_commit.store(0, Ordering::Relaxed);
                copied += txn.records_in();
            }
            Ok(None) => {}
            Err(e) => {
                assert!(matches!(e, exactly::Error::InvalidTopic { .. }), "{e}");
                failed_steps += 1;
            }
        }
    }
    let counters = copier.counters();
    copier.close().await.expect("close");
    assert_eq!(
        failed_steps, 1,
        "the poisoned record aborts one transaction"
    );
    assert_eq!(copied, records);

    // The source as an independent reader sees it: which offsets are bad.
    let mut good: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    let mut expected_dead: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for r in cluster.read_topic(&source, Isolation::ReadCommitted) {
        let list = if bad(r.value.as_deref().unwrap_or_default()) {
            &mut expected_dead
        } else {
            &mut good
        };
        list.entry(r.partition).or_default().push(r.offset);
    }
    let bad_records: usize = expected_dead.values().map(Vec::len).sum();
    assert_eq!(bad_records, records.div_ceil(13));
    assert_eq!(
        counters.records_dead_lettered, bad_records as u64,
        "{counters:?}"
    );
    assert_eq!(counters.records_skipped, 0, "{counters:?}");
    assert_eq!(counters.transactions_aborted, 1, "{counters:?}");
    assert!(counters.transactions_committed >= 2, "{counters:?}");
    assert_copied_once(&cluster, &destination, &good);

    let letters = read_dead_letters(&cluster, &dead_letters);
    let mut dead: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for letter in &letters {
        let header = |name: &str| {
            letter
                .header(name)
                .unwrap_or_else(|| panic!("a dead letter without {name}: {:?}", letter.headers))
        };
        assert_eq!(header("__connect.errors.topic"), source);
        assert_eq!(header("__connect.errors.stage"), "TRANSFORMATION");
        let partition: i32 = header("__connect.errors.partition")
            .parse()
            .expect("partition");
        let offset: i64 = header("__connect.errors.offset").parse().expect("offset");
        let value = letter.value.as_deref().expect("the source value is kept");
        assert!(bad(value), "a good record {value} was dead-lettered");
        assert_eq!(
            header("__connect.errors.exception.message"),
            format!("record {value} does not parse")
        );
        assert_eq!(letter.key.as_deref(), Some(format!("k{value}").as_str()));
        assert_eq!(letter.header("origin"), Some(format!("o{value}").as_str()));
        dead.entry(partition).or_default().push(offset);
    }
    assert_eq!(
        dead, expected_dead,
        "each bad record once in the dead-letter topic, in its partition's order"
    );
    // The aborted transaction's dead letters and output reached the log and stay invisible.
    let written = cluster
        .read_topic(&dead_letters, Isolation::ReadUncommitted)
        .len();
    assert!(
        written > letters.len(),
        "the aborted transaction wrote no dead letter ({written} read_uncommitted)"
    );
    let output = cluster
        .read_topic(&destination, Isolation::ReadUncommitted)
        .len();
    let good_records: usize = good.values().map(Vec::len).sum();
    assert!(
        output > good_records,
        "the aborted transaction wrote no output ({output} read_uncommitted)"
    );
}

/// What one step of a copier returned, and when.
#[derive(Debug)]
struct Stepped {
    at: Instant,
    /// Records of the transaction it committed (0: none), or its error's text.
    outcome: std::result::Result<usize, String>,
}

/// A copier stepping on its own task until `stop`, then closing; every step's outcome logged.
struct LoggedCopier {
    task: JoinHandle<usize>,
    stop: Arc<AtomicBool>,
    log: Arc<std::sync::Mutex<Vec<Stepped>>>,
}

impl LoggedCopier {
    fn spawn(mut copier: CopyLoop<Transform>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (stopped, logged) = (Arc::clone(&stop), Arc::clone(&log));
        let task = tokio::spawn(async move {
            let mut copied = 0;
            while !stopped.load(Ordering::Relaxed) {
                let outcome = match copier.step().await {
                    Ok(transaction) => Ok(transaction.map_or(0, |t| t.records_in())),
                    Err(e) => {
                        assert!(!e.is_fatal(), "fatal: {}", support::report(&e));
                        Err(support::report(&e))
                    }
                };
                copied += outcome.as_ref().copied().unwrap_or(0);
                logged.lock().unwrap().push(Stepped {
                    at: Instant::now(),
                    outcome,
                });
            }
            let last = copier.close().await.expect("close commits");
            copied + last.map_or(0, |t| t.records_in())
        });
        Self { task, stop, log }
    }

    /// Transactions committed so far.
    fn commits(&self) -> usize {
        let log = self.log.lock().unwrap();
        log.iter()
            .filter(|s| matches!(s.outcome, Ok(n) if n > 0))
            .count()
    }

    /// Waits (bounded) until `more` transactions committed beyond those committed now.
    async fn until_commits(&self, more: usize, within: Duration) {
        let target = self.commits() + more;
        let deadline = Instant::now() + within;
        while self.commits() < target {
            assert!(
                Instant::now() < deadline,
                "only {} of {target} commits within {within:?}; last steps {:?}",
                self.commits(),
                self.log
                    .lock()
                    .unwrap()
                    .iter()
                    .rev()
                    .take(5)
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The errors of steps that ended after `since`.
    fn errors_since(&self, since: Instant) -> Vec<(Duration, String)> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.at > since)
            .filter_map(|s| s.outcome.clone().err().map(|e| (s.at - since, e)))
            .collect()
    }

    /// When the first step after `since` returned a committed transaction.
    fn first_commit_after(&self, since: Instant) -> Option<Instant> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .find(|s| s.at > since && matches!(s.outcome, Ok(n) if n > 0))
            .map(|s| s.at)
    }

    /// Stops stepping, closes the loop, and returns how many records it reported copied.
    async fn stop(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        tokio::time::timeout(Duration::from_secs(60), self.task)
            .await
            .expect("the copier stops within 60 s")
            .expect("the copier task ends cleanly")
    }
}

/// A producer appending to `topic`'s partitions round-robin, 10 records every 10 ms, until
/// told to stop; it returns once every record it sent is acknowledged (its delivery timeout
/// outlasts the cuts, so a cut delays the source and loses none of it).
fn feed(cluster: &Cluster, topic: &str) -> (Arc<AtomicBool>, JoinHandle<usize>) {
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = Arc::clone(&stop);
    let (cluster, topic) = (cluster.clone(), topic.to_owned());
    let task = tokio::spawn(async move {
        let producer = support::producer_with(
            &cluster,
            &[("linger.ms", "5"), ("delivery.timeout.ms", "120000")],
            &[],
        )
        .await;
        let mut acks = Vec::new();
        // Bounded: 100 records a second for at most ten minutes.
        for round in 0..60_000usize {
            if stopped.load(Ordering::Relaxed) {
                break;
            }
            for i in round * 10..round * 10 + 10 {
                let record = Record::to(&topic)
                    .partition(i as i32 % PARTITIONS)
                    .value(format!("fed{i}"));
                acks.push(producer.send(record).await.expect("send"));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let fed = acks.len();
        for ack in acks {
            ack.await.expect("a fed record is written");
        }
        producer.close().await.expect("close");
        fed
    });
    (stop, task)
}

/// Raises `group`'s session timeout (a KIP-848 group config) to 30 s, so a cut of 8 s tests
/// the end of a transaction, not the membership (a member that expires while cut off is
/// tests/membership.rs's subject).
fn outlast_cuts(cluster: &Cluster, group: &str) {
    cluster.kafka_tool(
        "kafka.admin.ConfigCommand",
        &[
            "--entity-type",
            "groups",
            "--entity-name",
            group,
            "--alter",
            "--add-config",
            "consumer.session.timeout.ms=30000",
        ],
    );
}

/// Waits (bounded) until `producer` is in `state`, polling every millisecond.
async fn until_state(producer: &Producer, state: exactly::TxnState, within: Duration) {
    let deadline = Instant::now() + within;
    while producer.transaction_state() != Some(state.clone()) {
        assert!(
            Instant::now() < deadline,
            "the producer was never {state:?} within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Puts a proxy back (enabled, no toxics) when a test that degraded it ends, even by a panic,
/// so the next run finds its broker.
struct Restored(support::Proxy);

impl Drop for Restored {
    fn drop(&mut self) {
        self.0.set_enabled(true);
        self.0.remove_all_toxics();
    }
}

/// How long the coordinator's link stays cut: longer than five commits of `max.block.ms`
/// (1 s), the attempts the loop once made before it gave up and wedged.
const CUT: Duration = Duration::from_secs(8);

/// The outage that once wedged the loop, on both transaction versions: a copier (producer `max.block.ms=1000`,
/// `request.timeout.ms=2000`) copies a source that keeps growing, and the transaction
/// coordinator's link is cut for 8 s twice, each time with 150 ms of latency on the answers so
/// the cut lands before the answers of the call it aims at: once while `commit_transaction`
/// runs (seen as the producer's Committing state), once as the next transaction opens (seen
/// as Committing giving way to InTransaction), so the cut lands before
/// `send_offsets_to_transaction` has its answers. (Without the latency and the fresh
/// transaction, a cut seen at any InTransaction could land after the offsets were in: with a
/// backlog, a transaction fills its 500 records at once and sends its offsets within
/// milliseconds of opening.) Steps fail meanwhile, each with a retriable error naming
/// the call it waits for (and none telling the user to call the producer); once the link is
/// back the loop goes on by itself, and after its first commit no step fails. At the end every
/// source record is in the destination exactly once, read back read_committed by kcat.
async fn recovers_after_commit_timeout(cluster: Cluster) {
    let _exclusive = cluster.exclusive();
    let (source, destination, group) = copy_topics(&cluster, "eos-cut", PARTITIONS);
    fill(&cluster, &source, 2_000).await;
    outlast_cuts(&cluster, &group);
    let (feeding, feeder) = feed(&cluster, &source);
    let consumer = consumer(&cluster, &group, &source).await;
    let producer = transactional(
        &cluster,
        &support::unique_topic("eos-cut-copier"),
        &[("max.block.ms", "1000"), ("request.timeout.ms", "2000")],
    )
    .await;
    let watched = producer.clone();
    let copier = LoggedCopier::spawn(
        CopyLoop::new(consumer, producer, mirror(&destination, "cut"))
            .commit_every(500, Duration::from_millis(100)),
    );
    copier.until_commits(3, Duration::from_secs(60)).await;

    let proxy = cluster.proxy(0);
    let _restore = Restored(proxy.clone());
    for (phase, call) in [
        ("commit", "commit_transaction"),
        ("offsets", "send_offsets_to_transaction"),
    ] {
        // The latency places the cut before the answers of the call aimed at, but on a loaded
        // machine the state seen and the cut can drift apart by more than 150 ms and the cut
        // lands on a neighbouring call: the loop must recover either way (checked on every
        // attempt), and the phase is tried again, up to three times, until it hit its call.
        let mut missed = Vec::new();
        loop {
            let during = cut_the_coordinator(&copier, &watched, &proxy, phase).await;
            if during
                .iter()
                .any(|(_, e)| e.contains(call) && e.contains("no outcome yet"))
            {
                break;
            }
            missed.push(during);
            assert!(
                missed.len() < 3,
                "{phase}: no step waited for {call} during any of three cuts: {missed:?}"
            );
        }
    }

    feeding.store(true, Ordering::Relaxed);
    let fed = feeder.await.expect("the feeder ends");
    assert!(fed > 0, "the source never grew");
    wait_until_committed(&cluster, &group, &source, Duration::from_secs(120)).await;
    let copied = copier.stop().await;
    // Every committed transaction was reported once, the ones resolved after a cut included.
    assert_eq!(copied, 2_000 + fed, "records reported copied");
    assert_exactly_once(&cluster, &source, &destination);
}

/// One cut of [`recovers_after_commit_timeout`]: latency on the coordinator's answers, then,
/// once the producer is seen committing (and, for `phase` "offsets", in the transaction after
/// it), its link cut for [`CUT`]. Checks that no step's error sends the user to the producer
/// and that no step fails after the first commit once the link is back; returns the errors
/// of the steps from the cut on.
async fn cut_the_coordinator(
    copier: &LoggedCopier,
    watched: &exactly::Producer,
    proxy: &support::Proxy,
    phase: &str,
) -> Vec<(Duration, String)> {
    proxy.add_toxic(
        "slow_answers",
        "latency",
        "downstream",
        r#"{"latency":150}"#,
    );
    until_state(
        watched,
        exactly::TxnState::Committing,
        Duration::from_secs(30),
    )
    .await;
    if phase == "offsets" {
        // The next transaction, just opened: its offsets are at least one slowed round trip
        // away.
        until_state(
            watched,
            exactly::TxnState::InTransaction,
            Duration::from_secs(30),
        )
        .await;
    }
    // The (only) broker's link, the transaction coordinator's, cut for `CUT`. (The latency
    // goes while no connection is open: removed from a proxy being disabled, Toxiproxy may not
    // answer.)
    proxy.set_enabled(false);
    let cut = Instant::now();
    tokio::time::sleep(CUT).await;
    proxy.remove_toxic("slow_answers");
    proxy.set_enabled(true);
    let restored = Instant::now();
    copier.until_commits(3, Duration::from_secs(120)).await;
    let during = copier.errors_since(cut);
    for (_, e) in &during {
        assert!(
            !e.contains("call commit_transaction") && !e.contains("call abort_transaction"),
            "{phase}: an error sends the user to the producer: {e}"
        );
    }
    let resolved = copier
        .first_commit_after(restored)
        .expect("a commit after the link is back");
    let after = copier.errors_since(resolved);
    assert!(
        after.is_empty(),
        "{phase}: steps failed after the first commit: {after:?}"
    );
    eprintln!(
        "{phase}: {} steps failed in {:?} from the cut; first commit {:?} after the link was back",
        during.len(),
        resolved - cut,
        resolved - restored
    );
    during
}

/// [`recovers_after_commit_timeout`] on transactions v2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_loop_recovers_after_commit_timeout() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    recovers_after_commit_timeout(cluster).await;
}

/// [`recovers_after_commit_timeout`] on transactions v1 (AddPartitionsToTxn and
/// AddOffsetsToTxn go to the coordinator too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_loop_recovers_after_commit_timeout_tv1() {
    let Some(cluster) = Cluster::tv1() else {
        return;
    };
    recovers_after_commit_timeout(cluster).await;
}

/// One step under a `tokio::time::timeout` of `limit`: `None` when it was dropped, else the
/// records of the transaction it committed or its error's text.
async fn step_within(
    copier: &mut CopyLoop<Transform>,
    limit: Duration,
) -> Option<std::result::Result<usize, String>> {
    match tokio::time::timeout(limit, copier.step()).await {
        Err(_) => None,
        Ok(Ok(transaction)) => Some(Ok(transaction.map_or(0, |t| t.records_in()))),
        Ok(Err(e)) => Some(Err(support::report(&e))),
    }
}

/// Every `step` runs under a short `tokio::time::timeout` while latency sits on the
/// transaction coordinator's answers (the only broker's): 200 ms under 2 s of latency (where
/// the loop was once left in a transaction it no longer knew), then 20 to 260 ms under 80 ms,
/// so steps are dropped wherever they wait: in the poll, the transform and send, the
/// generation hold, `send_offsets_to_transaction`, the commit, the abort. Then the latency goes
/// and the copy finishes under a 200 ms timeout. Every source record is in the destination
/// exactly once (kcat, read_committed), every committed transaction was reported once, and no
/// step failed with the producer left in a transaction the loop no longer knew
/// ("begin_transaction in state InTransaction").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_loop_step_cancelled_anywhere_recovers() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _exclusive = cluster.exclusive();
    let records = 3_000;
    let (source, destination, group) = copy_topics(&cluster, "eos-cancel", PARTITIONS);
    fill(&cluster, &source, records).await;
    // Small polls, so transactions are many and short.
    let consumer = consumer_with(&cluster, &group, &source, &[("max.poll.records", "20")]).await;
    let producer = transactional(&cluster, &support::unique_topic("eos-cancel-copier"), &[]).await;
    let mut copier = CopyLoop::new(consumer, producer, mirror(&destination, "cancel"))
        .commit_every(40, Duration::from_millis(100));
    let proxy = cluster.proxy(0);
    let _restore = Restored(proxy.clone());
    let (mut copied, mut dropped, mut failed) = (0, 0, Vec::new());
    // First 2 s, under which a step never gets past the generation hold (a heartbeat
    // is always in flight) or the offsets; then 80 ms, with each step given 20 to 260 ms
    // (a fixed pseudo-random sequence), so drops land in the copy, the offsets, the commit
    // and the abort alike while the copy moves on. Bounded: 15 s each, 260 ms a step.
    let mut draw: u64 = 0x2545_F491;
    for latency in [2_000, 80] {
        proxy.add_toxic(
            "slow_answers",
            "latency",
            "downstream",
            &format!(r#"{{"latency":{latency}}}"#),
        );
        let (before, dropped_before) = (copied, dropped);
        let slow_until = Instant::now() + Duration::from_secs(15);
        while Instant::now() < slow_until && copied < records {
            draw = draw.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let limit = if latency == 2_000 {
                200
            } else {
                20 + (draw >> 33) % 241
            };
            match step_within(&mut copier, Duration::from_millis(limit)).await {
                None => dropped += 1,
                Some(Ok(n)) => copied += n,
                Some(Err(e)) => failed.push(e),
            }
        }
        proxy.remove_toxic("slow_answers");
        eprintln!(
            "{latency} ms of latency: {} steps dropped, {} records copied",
            dropped - dropped_before,
            copied - before
        );
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while copied < records {
        assert!(
            Instant::now() < deadline,
            "copied {copied} of {records} in 120 s after the latency; errors {failed:?}"
        );
        match step_within(&mut copier, Duration::from_millis(200)).await {
            None => dropped += 1,
            Some(Ok(n)) => copied += n,
            Some(Err(e)) => failed.push(e),
        }
    }
    copier.close().await.expect("close");
    eprintln!("{dropped} steps dropped in all, {} failed", failed.len());
    assert!(dropped >= 20, "only {dropped} steps were dropped");
    for e in &failed {
        assert!(!e.contains("begin_transaction in state"), "{e}");
        assert!(
            !e.contains("call commit_transaction") && !e.contains("call abort_transaction"),
            "{e}"
        );
    }
    assert_eq!(copied, records, "records reported copied");
    assert_exactly_once(&cluster, &source, &destination);
}

/// A step dropped while its poll's records are still being transformed (a `timeout` around
/// `step`) left records neither copied nor rewound in the open transaction; the next step
/// aborts that transaction and rewinds, so nothing half-copied commits and no record is
/// skipped: the destination holds every record exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_step_aborts_its_half_copied_transaction() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let records = 400;
    let (source, destination, group) = copy_topics(&cluster, "eos-drop", PARTITIONS);
    fill(&cluster, &source, records).await;

    let consumer = consumer(&cluster, &group, &source).await;
    let producer = transactional(&cluster, &support::unique_topic("eos-drop-copier"), &[]).await;
    let to = destination.clone();
    let calls = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&calls);
    let mut copier = CopyLoop::new(consumer, producer, move |r: ConsumerRecord| {
        counted.fetch_add(1, Ordering::Relaxed);
        let out = Record::to(&to)
            .partition(r.partition)
            .value(copy_value("drop", &r));
        async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            vec![out]
        }
    })
    .commit_every(100, Duration::from_millis(200));
    // Dropped mid-copy: a poll brings many records, at 5 ms each, and a step that called the
    // transform and did not end within 30 ms was dropped while copying. (Steps dropped while
    // they wait for the group's first assignment do not count.) Bounded: 500 × 30 ms.
    let mut dropped = 0;
    let mut copied = 0;
    for _ in 0..500 {
        let before = calls.load(Ordering::Relaxed);
        match tokio::time::timeout(Duration::from_millis(30), copier.step()).await {
            Err(_) if calls.load(Ordering::Relaxed) > before => dropped += 1,
            Err(_) => {}
            Ok(stepped) => copied += stepped.expect("step").map_or(0, |t| t.records_in()),
        }
        if dropped >= 3 {
            break;
        }
    }
    assert!(dropped >= 1, "no step was dropped mid-copy");
    // Copy on (bounded: a loop that lost records never reports them all).
    let deadline = Instant::now() + Duration::from_secs(60);
    while copied < records && Instant::now() < deadline {
        if let Some(txn) = copier.step().await.expect("step") {
            copied += txn.records_in();
        }
    }
    let counters = copier.counters();
    copier.close().await.expect("close");
    assert_exactly_once(&cluster, &source, &destination);
    assert_eq!(copied, records);
    assert!(
        counters.transactions_aborted >= 1,
        "no half-copied transaction was aborted: {counters:?}"
    );
}

/// Fills the first `with_data` partitions of `topic` with `n` records of `size` bytes,
/// round-robin (idempotent producer); the other partitions get nothing.
async fn fill_some_partitions(
    cluster: &Cluster,
    topic: &str,
    with_data: i32,
    n: usize,
    size: usize,
) {
    let producer = support::producer_with(cluster, &[("linger.ms", "5")], &[]).await;
    let mut acks = Vec::with_capacity(n);
    for i in 0..n {
        let mut value = format!("v{i}-");
        value.extend(std::iter::repeat_n('x', size.saturating_sub(value.len())));
        let record = Record::to(topic)
            .partition(i as i32 % with_data)
            .value(value);
        acks.push(producer.send(record).await.expect("send"));
    }
    for ack in acks {
        ack.await.expect("source record written");
    }
    producer.close().await.expect("close");
}

/// A source of 6 partitions holding `records` records of 1 KiB on the first `with_data` of
/// them, and its destination and group: what [`timed_copy`] copies.
async fn caught_up_source(
    cluster: &Cluster,
    with_data: i32,
    records: usize,
) -> (String, String, String) {
    let topics = copy_topics(cluster, &format!("eos-caught-up-{with_data}"), 6);
    fill_some_partitions(cluster, &topics.0, with_data, records, 1024).await;
    topics
}

/// One copier copies `source` (its `records` records) to `destination` in transactions of
/// 1,000 records or 100 ms, at the consumer's default fetch.max.wait.ms (500 ms) and with
/// answers of 64 KiB per partition (max.partition.fetch.bytes), so the two answers a
/// partition holds last well under fetch.max.wait.ms even in a debug build on a loaded
/// machine: a fetch that waits at the broker meanwhile shows as a stall. Returns the copy rate
/// in records/s from its first commit to its last (the group join left out); the caller reads
/// the destination back once every timed copy is done (the read-back blocks a runtime thread
/// for seconds, which would stall a copy still running beside it).
async fn timed_copy(cluster: Cluster, topics: (String, String, String), records: usize) -> f64 {
    let (source, destination, group) = topics;
    let settings = [
        ("fetch.max.wait.ms", "500"),
        ("max.partition.fetch.bytes", "65536"),
    ];
    let consumer = consumer_with(&cluster, &group, &source, &settings).await;
    let id = support::unique_topic(&format!("{source}-copier"));
    let producer = transactional(&cluster, &id, &[]).await;
    let mut copier = CopyLoop::new(consumer, producer, mirror(&destination, &id))
        .commit_every(1_000, Duration::from_millis(100));
    let mut copied = 0;
    let mut first: Option<(Instant, usize)> = None;
    let deadline = Instant::now() + Duration::from_secs(300);
    while copied < records {
        assert!(
            Instant::now() < deadline,
            "{source}: {copied} of {records} copied within 300 s"
        );
        if let Some(txn) = copier.step().await.expect("step") {
            copied += txn.records_in();
            first.get_or_insert((Instant::now(), copied));
        }
    }
    let (began, before) = first.expect("a commit");
    let rate = (copied - before) as f64 / began.elapsed().as_secs_f64();
    let transactions = copier.counters().transactions_committed;
    copier.close().await.expect("close");
    eprintln!(
        "timed_copy: {source}: {records} records, {rate:.0} records/s after the first commit, \
         {transactions} transactions"
    );
    rate
}

/// Partitions that have reached the end of their input (here: that never get any) do not
/// hold back the ones with data: a fetch naming only caught-up partitions would wait out
/// fetch.max.wait.ms at the broker while the partitions with data need their next fetch from
/// the same broker. The same copy with its records on 3 of 6 partitions runs at least 0.6x
/// the rate of the copy with records on all 6 (0.79-1.01x in ten runs on a quiet machine; the
/// margin is for a loaded one). The two run at the same time, so whatever else loads the
/// machine loads both alike (the copy with 3 caught up ran at 0.32x of the other, one after
/// the other, while such fetches went out); both are read back only once both are done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caught_up_partitions_do_not_stall_the_copy() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let records = 30_000;
    let all = caught_up_source(&cluster, 6, records).await;
    let half = caught_up_source(&cluster, 3, records).await;
    let (on_all, on_half) = tokio::join!(
        tokio::spawn(timed_copy(cluster.clone(), all.clone(), records)),
        tokio::spawn(timed_copy(cluster.clone(), half.clone(), records)),
    );
    let (on_all, on_half) = (on_all.expect("copy on 6"), on_half.expect("copy on 3 of 6"));
    for (source, destination, _) in [&all, &half] {
        assert_exactly_once(&cluster, source, destination);
    }
    eprintln!(
        "caught_up_partitions_do_not_stall_the_copy: {on_half:.0} records/s with 3 of 6 \
         partitions caught up, {on_all:.0} with none ({:.2}x)",
        on_half / on_all
    );
    assert!(
        on_half >= 0.6 * on_all,
        "with 3 of 6 partitions caught up the copy ran at {on_half:.0} records/s, {:.2}x the \
         {on_all:.0} records/s with none",
        on_half / on_all
    );
}
