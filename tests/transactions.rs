//! The transactional producer against real Kafka: every scenario runs on a transactions-v2
//! cluster (`_tv2`, the 4.x default) and on one formatted with `transaction.version=1`
//! (`_tv1`). What is visible is checked with kcat at both isolation levels, and committed
//! offsets with a real group member's OffsetFetch.
//!
//! Tests hold their cluster's lock across awaits on purpose (see `broker_failure.rs`).
#![allow(clippy::await_holding_lock)]

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use exactly::ErrorCode;
use exactly::{ConsumerGroupMetadata, Error, OffsetToCommit, Producer, Record, TxnState};
use support::group::GroupMember;
use support::logs::Captured;
use support::{Cluster, Isolation};
use tracing::Level;

const RESOLVE_LIMIT: Duration = Duration::from_secs(90);

/// Runs `$body` (an async fn taking a `Cluster`) as one test per transaction version.
macro_rules! on_both_versions {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn tv2() {
                if let Some(cluster) = super::support::Cluster::single() {
                    super::$name(cluster).await;
                }
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn tv1() {
                if let Some(cluster) = super::support::Cluster::tv1() {
                    super::$name(cluster).await;
                }
            }
        }
    };
}

async fn transactional(cluster: &Cluster, id: &str, extra: &[(&str, &str)]) -> Producer {
    let defaults = [
        ("transactional.id", id),
        ("linger.ms", "5"),
        ("request.timeout.ms", "3000"),
        ("delivery.timeout.ms", "30000"),
        ("max.block.ms", "60000"),
    ];
    support::transactional_producer_with(cluster, &defaults, extra).await
}

async fn send_all(
    producer: &Producer,
    topic: &str,
    prefix: &str,
    n: usize,
) -> Vec<exactly::DeliveryFuture> {
    let mut futures = Vec::new();
    for i in 0..n {
        let record = Record::to(topic)
            .key(format!("k{i}"))
            .value(format!("{prefix}-{i}"));
        futures.push(
            producer
                .send(record)
                .await
                .expect("send inside a transaction"),
        );
    }
    futures
}

async fn await_all(
    futures: Vec<exactly::DeliveryFuture>,
) -> Vec<exactly::Result<exactly::RecordMetadata>> {
    let mut out = Vec::new();
    for f in futures {
        out.push(
            tokio::time::timeout(RESOLVE_LIMIT, f)
                .await
                .expect("delivery resolves"),
        );
    }
    out
}

fn count_prefix(values: &[String], prefix: &str) -> usize {
    values
        .iter()
        .filter(|v| v.starts_with(&format!("{prefix}-")))
        .count()
}

async fn commit_visible_abort_invisible(cluster: Cluster) {
    let _shared = cluster.shared();
    let topic = support::unique_topic("txn-vis");
    cluster.create_topic(&topic, 3, 1, &[]);
    let producer = transactional(&cluster, &support::unique_topic("vis"), &[]).await;

    producer.begin_transaction().unwrap();
    let committed = send_all(&producer, &topic, "committed", 10).await;
    producer.commit_transaction().await.expect("commit");
    for r in await_all(committed).await {
        r.expect("committed records are acknowledged");
    }

    producer.begin_transaction().unwrap();
    let aborted = send_all(&producer, &topic, "aborted", 10).await;
    producer.flush().await.unwrap();
    producer.abort_transaction().await.expect("abort");
    await_all(aborted).await;

    producer.begin_transaction().unwrap();
    let again = send_all(&producer, &topic, "again", 5).await;
    producer
        .commit_transaction()
        .await
        .expect("commit after abort");
    await_all(again).await;
    producer.close().await.unwrap();

    let committed_view = cluster.read_values(&topic, Isolation::ReadCommitted);
    assert_eq!(
        count_prefix(&committed_view, "committed"),
        10,
        "{committed_view:?}"
    );
    assert_eq!(
        count_prefix(&committed_view, "again"),
        5,
        "{committed_view:?}"
    );
    assert_eq!(
        count_prefix(&committed_view, "aborted"),
        0,
        "aborted records are invisible: {committed_view:?}"
    );
    let everything = cluster.read_values(&topic, Isolation::ReadUncommitted);
    assert_eq!(
        count_prefix(&everything, "aborted"),
        10,
        "read_uncommitted sees the aborted records"
    );
    assert_eq!(count_prefix(&everything, "committed"), 10);
}
on_both_versions!(commit_visible_abort_invisible);

async fn zombie_is_fenced(cluster: Cluster) {
    let _shared = cluster.shared();
    let topic = support::unique_topic("txn-zombie");
    cluster.create_topic(&topic, 1, 1, &[]);
    let id = support::unique_topic("zombie");
    let zombie = transactional(&cluster, &id, &[]).await;
    zombie.begin_transaction().unwrap();
    let pending = send_all(&zombie, &topic, "zombie", 5).await;
    zombie.flush().await.unwrap();

    // A new instance with the same transactional id takes over and fences the old one.
    let successor = transactional(&cluster, &id, &[]).await;
    let err = zombie
        .commit_transaction()
        .await
        .expect_err("the zombie cannot commit");
    assert!(err.is_fatal(), "fenced is fatal: {err}");
    assert_eq!(err.code(), Some(ErrorCode::PRODUCER_FENCED), "{err}");
    let err = zombie
        .send(Record::to(&topic).value("late"))
        .await
        .unwrap_err();
    assert!(err.is_fatal(), "the zombie is unusable: {err}");
    await_all(pending).await;

    successor.begin_transaction().unwrap();
    let fresh = send_all(&successor, &topic, "successor", 3).await;
    successor
        .commit_transaction()
        .await
        .expect("the successor commits");
    await_all(fresh).await;
    successor.close().await.unwrap();
    zombie.close().await.unwrap();

    let committed = cluster.read_values(&topic, Isolation::ReadCommitted);
    assert_eq!(
        count_prefix(&committed, "zombie"),
        0,
        "nothing of the zombie's transaction is visible"
    );
    assert_eq!(count_prefix(&committed, "successor"), 3);
}
on_both_versions!(zombie_is_fenced);

/// A transaction on a fresh topic with `records` records sent and flushed, whose commit has
/// started while the broker's answers are dropped: the EndTxn reaches the coordinator, its
/// answer does not come back (until the test removes the "drop_answers" toxic).
struct BlindCommit {
    topic: String,
    producer: Producer,
    sent: Vec<exactly::DeliveryFuture>,
    commit: tokio::task::JoinHandle<exactly::Result<()>>,
}

async fn start_blind_commit(
    cluster: &Cluster,
    name: &str,
    partitions: u32,
    records: usize,
    extra: &[(&str, &str)],
) -> BlindCommit {
    let topic = support::unique_topic(&format!("txn-{name}"));
    cluster.create_topic(&topic, partitions, 1, &[]);
    let producer = transactional(cluster, &support::unique_topic(name), extra).await;
    producer.begin_transaction().unwrap();
    let sent = send_all(&producer, &topic, name, records).await;
    producer.flush().await.unwrap();
    cluster
        .proxy(0)
        .add_toxic("drop_answers", "timeout", "downstream", r#"{"timeout":0}"#);
    let commit = tokio::spawn({
        let producer = producer.clone();
        async move { producer.commit_transaction().await }
    });
    BlindCommit {
        topic,
        producer,
        sent,
        commit,
    }
}

async fn end_txn_lost_ack_commit_is_success(cluster: Cluster) {
    let _exclusive = cluster.exclusive();
    let BlindCommit {
        topic,
        producer,
        sent,
        commit,
    } = start_blind_commit(&cluster, "once", 1, 10, &[]).await;
    let proxy = cluster.proxy(0);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    proxy.remove_toxic("drop_answers");
    let result = tokio::time::timeout(RESOLVE_LIMIT, commit)
        .await
        .expect("commit returns")
        .unwrap();
    result.expect("the retried EndTxn finds our own commit: success");
    assert_eq!(producer.transaction_state(), Some(TxnState::Ready));
    await_all(sent).await;
    producer.close().await.unwrap();

    let committed = cluster.read_values(&topic, Isolation::ReadCommitted);
    assert_eq!(
        count_prefix(&committed, "once"),
        10,
        "visible exactly once: {committed:?}"
    );
}
on_both_versions!(end_txn_lost_ack_commit_is_success);

async fn stale_generation_offsets_are_fenced(cluster: Cluster) {
    let _shared = cluster.shared();
    let input = support::unique_topic("txn-in");
    let output = support::unique_topic("txn-out");
    cluster.create_topic(&input, 1, 1, &[]);
    cluster.create_topic(&output, 1, 1, &[]);
    let group = support::unique_topic("group");
    let mut member = GroupMember::join(&cluster.bootstrap, &group, &input);
    let current = member.metadata.clone();
    let offsets = vec![OffsetToCommit::new(
        exactly::TopicPartition::new(input.as_str(), 0),
        42,
    )];
    let producer = transactional(&cluster, &support::unique_topic("offsets"), &[]).await;

    let stale = [
        ConsumerGroupMetadata::new(
            current.group_id.clone(),
            current.generation_id - 1,
            current.member_id.clone(),
            None,
        ),
        ConsumerGroupMetadata::new(
            current.group_id.clone(),
            current.generation_id,
            "someone-else",
            None,
        ),
    ];
    for metadata in &stale {
        producer.begin_transaction().unwrap();
        let sent = send_all(&producer, &output, "stale", 1).await;
        let err = producer
            .send_offsets_to_transaction(offsets.clone(), metadata)
            .await
            .expect_err("a stale member's offsets are rejected");
        assert!(
            matches!(
                err.code(),
                Some(
                    ErrorCode::ILLEGAL_GENERATION
                        | ErrorCode::UNKNOWN_MEMBER_ID
                        | ErrorCode::FENCED_INSTANCE_ID
                )
            ),
            "{err}"
        );
        producer
            .abort_transaction()
            .await
            .expect("abort after the fenced commit");
        await_all(sent).await;
        assert_eq!(
            member.committed(&input, 0),
            -1,
            "the group's offsets did not move"
        );
    }

    producer.begin_transaction().unwrap();
    let sent = send_all(&producer, &output, "fresh", 1).await;
    producer
        .send_offsets_to_transaction(offsets, &current)
        .await
        .expect("the current member's offsets join the transaction");
    assert_ne!(
        member.committed(&input, 0),
        42,
        "not visible before the commit"
    );
    producer.commit_transaction().await.expect("commit");
    await_all(sent).await;
    // EndTxn returns once the commit is decided; the markers (here: into __consumer_offsets)
    // are written right after, so the offset shows up shortly.
    let mut committed_offset = -1;
    for _ in 0..100 {
        committed_offset = member.committed(&input, 0);
        if committed_offset == 42 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(committed_offset, 42, "committed with the transaction");
    producer.close().await.unwrap();
    let committed = cluster.read_values(&output, Isolation::ReadCommitted);
    assert_eq!(committed, ["fresh-0"], "{committed:?}");
}
on_both_versions!(stale_generation_offsets_are_fenced);

async fn abortable_error_then_abort_then_continue(cluster: Cluster) {
    let _shared = cluster.shared();
    let small = support::unique_topic("txn-small");
    let normal = support::unique_topic("txn-normal");
    cluster.create_topic(&small, 1, 1, &[("max.message.bytes", "200")]);
    cluster.create_topic(&normal, 1, 1, &[]);
    let producer = transactional(&cluster, &support::unique_topic("abortable"), &[]).await;
    let epoch_before = producer.counters().epoch;

    producer.begin_transaction().unwrap();
    let fine = send_all(&producer, &normal, "lost", 2).await;
    let too_big = producer
        .send(Record::to(&small).value(vec![b'x'; 1000]))
        .await
        .expect("the client accepts it: the topic's limit is the broker's");
    let err = producer
        .commit_transaction()
        .await
        .expect_err("commit cannot succeed");
    assert!(err.is_abortable(), "{err}");
    assert_eq!(producer.transaction_state(), Some(TxnState::AbortableError));
    let rejected = tokio::time::timeout(RESOLVE_LIMIT, too_big)
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(
        rejected.code(),
        Some(ErrorCode::MESSAGE_TOO_LARGE),
        "{rejected}"
    );
    assert!(
        producer.begin_transaction().is_err(),
        "no new transaction before the abort"
    );
    producer.abort_transaction().await.expect("abort");
    await_all(fine).await;
    assert!(
        producer.counters().epoch > epoch_before,
        "the epoch advanced"
    );

    producer.begin_transaction().unwrap();
    let next = send_all(&producer, &normal, "next", 3).await;
    producer
        .commit_transaction()
        .await
        .expect("the next transaction commits");
    await_all(next).await;
    producer.close().await.unwrap();
    let committed = cluster.read_values(&normal, Isolation::ReadCommitted);
    assert_eq!(count_prefix(&committed, "lost"), 0, "{committed:?}");
    assert_eq!(count_prefix(&committed, "next"), 3, "{committed:?}");
}
on_both_versions!(abortable_error_then_abort_then_continue);

async fn coordinator_killed_mid_commit(cluster: Cluster) {
    let _exclusive = cluster.exclusive();
    // The EndTxn is decided (or not) but unanswered when the broker dies.
    let BlindCommit {
        topic,
        producer,
        sent,
        commit,
    } = start_blind_commit(&cluster, "maybe", 2, 20, &[]).await;
    let proxy = cluster.proxy(0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    cluster.stop_broker(0, true);
    proxy.remove_toxic("drop_answers");
    tokio::time::sleep(Duration::from_secs(1)).await;
    cluster.start_broker(0);
    let result = tokio::time::timeout(RESOLVE_LIMIT, commit)
        .await
        .expect("commit returns")
        .unwrap();
    await_all(sent).await;
    producer.close().await.unwrap();

    // After a restart the coordinator finishes writing the markers of a decided transaction
    // from its log; until then read_committed readers stop at the open transaction. Wait for
    // the markers (bounded), then judge the final state.
    let mut visible = 0;
    for _ in 0..60 {
        visible = count_prefix(
            &cluster.read_values(&topic, Isolation::ReadCommitted),
            "maybe",
        );
        if visible == 20 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    match result {
        Ok(()) => assert_eq!(visible, 20, "a successful commit is visible in full"),
        Err(e) => assert!(
            visible == 0 || visible == 20,
            "never partial ({visible} visible after {e})"
        ),
    }
}
on_both_versions!(coordinator_killed_mid_commit);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_in_the_wrong_state_fail_and_send_nothing() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let topic = support::unique_topic("txn-state");
    cluster.create_topic(&topic, 1, 1, &[]);
    let producer = Producer::builder()
        .bootstrap(&cluster.bootstrap)
        .transactional_id(support::unique_topic("state"))
        .build()
        .await
        .unwrap();
    let invalid = |r: exactly::Result<()>| matches!(r, Err(Error::InvalidState(_)));
    assert!(invalid(producer.begin_transaction()), "begin before init");
    assert!(matches!(
        producer.send(Record::to(&topic).value("x")).await,
        Err(Error::InvalidState(_))
    ));
    producer.init_transactions().await.unwrap();
    assert!(invalid(producer.init_transactions().await), "init twice");
    assert!(
        invalid(producer.commit_transaction().await),
        "commit outside a transaction"
    );
    assert!(
        matches!(
            producer.send(Record::to(&topic).value("x")).await,
            Err(Error::InvalidState(_))
        ),
        "send outside a transaction"
    );
    producer.begin_transaction().unwrap();
    assert!(invalid(producer.begin_transaction()), "begin twice");
    producer
        .commit_transaction()
        .await
        .expect("an empty transaction commits");
    assert!(invalid(producer.commit_transaction().await), "commit twice");
    producer.close().await.unwrap();
    assert_eq!(producer.counters().records_acked, 0);
    assert!(
        cluster
            .read_topic(&topic, Isolation::ReadUncommitted)
            .is_empty(),
        "nothing was sent"
    );
}

/// A timed-out commit: the coordinator's answers are dropped for longer than
/// `max.block.ms` while a commit runs. The commit times out and leaves the transaction
/// Committing: only commit is valid, and calling it again returns the real outcome.
async fn timed_out_commit(cluster: &Cluster, name: &str) -> BlindCommit {
    let blind = start_blind_commit(cluster, name, 1, 1000, &[("max.block.ms", "4000")]).await;
    let commit = tokio::time::timeout(RESOLVE_LIMIT, blind.commit)
        .await
        .expect("the commit returns at max.block.ms")
        .unwrap();
    let err = commit.expect_err("no answer: the commit times out");
    assert!(
        err.is_retriable() && !err.is_abortable() && !err.is_fatal(),
        "{err}"
    );
    assert_eq!(
        blind.producer.transaction_state(),
        Some(TxnState::Committing),
        "a timed-out commit does not go back to InTransaction"
    );
    BlindCommit {
        commit: tokio::spawn(async { Ok(()) }),
        ..blind
    }
}

/// Restores the answers, calls commit again and checks the transaction's 1,000 records are
/// visible once, and that the producer goes on.
async fn commit_again_and_go_on(cluster: &Cluster, blind: BlindCommit, name: &str) {
    cluster.proxy(0).remove_toxic("drop_answers");
    blind
        .producer
        .commit_transaction()
        .await
        .expect("called again, the commit reports the outcome: committed");
    assert_eq!(blind.producer.transaction_state(), Some(TxnState::Ready));
    for r in await_all(blind.sent).await {
        r.expect("committed records are acknowledged");
    }
    blind.producer.begin_transaction().unwrap();
    let next = send_all(&blind.producer, &blind.topic, "next", 5).await;
    blind
        .producer
        .commit_transaction()
        .await
        .expect("next commit");
    await_all(next).await;
    blind.producer.close().await.unwrap();
    let committed = cluster.read_values(&blind.topic, Isolation::ReadCommitted);
    assert_eq!(count_prefix(&committed, name), 1000, "visible exactly once");
    assert_eq!(count_prefix(&committed, "next"), 5);
}

async fn commit_timeout_then_commit_again_reports_the_outcome(cluster: Cluster) {
    let _exclusive = cluster.exclusive();
    let blind = timed_out_commit(&cluster, "again").await;
    commit_again_and_go_on(&cluster, blind, "again").await;
}
on_both_versions!(commit_timeout_then_commit_again_reports_the_outcome);

async fn commit_timeout_then_abort_is_refused(cluster: Cluster) {
    let _exclusive = cluster.exclusive();
    let blind = timed_out_commit(&cluster, "refused").await;
    let err = blind
        .producer
        .abort_transaction()
        .await
        .expect_err("abort after a timed-out commit is refused (T1)");
    assert!(
        matches!(err, Error::InvalidState(_)) && !err.is_fatal(),
        "{err}"
    );
    assert!(blind.producer.begin_transaction().is_err());
    assert_eq!(
        blind.producer.transaction_state(),
        Some(TxnState::Committing)
    );
    commit_again_and_go_on(&cluster, blind, "refused").await;
}
on_both_versions!(commit_timeout_then_abort_is_refused);

/// A transaction that outlives `transaction.timeout.ms` is aborted by
/// the coordinator, which bumps the epoch. Committing it fails with an error that says the
/// transaction must be aborted, and why, in agreement with the state. On transactions v2 the
/// abort recovers (the coordinator takes the retried EndTxn(abort) and hands out the next
/// epoch). A transactions-v1 coordinator (4.1.1, measured) refuses the KIP-588
/// re-initialisation with our id and epoch: the abort then fails fatally saying the
/// transaction timed out (not merely "fenced"), and a new producer with the same
/// transactional id goes on. Nothing of the timed-out transaction is ever visible.
async fn coordinator_timed_out_transaction_is_abortable_and_recovers(cluster: Cluster) {
    let _shared = cluster.shared();
    let topic = support::unique_topic("txn-expired");
    cluster.create_topic(&topic, 1, 1, &[]);
    let id = support::unique_topic("expired");
    let producer = transactional(&cluster, &id, &[("transaction.timeout.ms", "3000")]).await;
    producer.begin_transaction().unwrap();
    let expired = send_all(&producer, &topic, "expired", 10).await;
    producer.flush().await.unwrap();
    // The coordinator looks for timed-out transactions every 5 s on the test bed
    // (transaction.abort.timed.out.transaction.cleanup.interval.ms).
    tokio::time::sleep(Duration::from_secs(9)).await;
    let err = producer
        .commit_transaction()
        .await
        .expect_err("the coordinator aborted it");
    assert!(err.is_abortable() && !err.is_fatal(), "{err}");
    assert_eq!(producer.transaction_state(), Some(TxnState::AbortableError));
    let report = support::report(&err);
    assert!(
        report.contains("transaction.timeout.ms"),
        "the error says the transaction timed out: {report}"
    );
    let aborted = producer.abort_transaction().await;
    await_all(expired).await;
    let producer = if cluster.txn_version == 2 {
        aborted.expect("the abort recovers");
        producer
    } else {
        let err = aborted.expect_err("a v1 coordinator does not take our epoch back");
        assert!(err.is_fatal(), "{err}");
        let report = support::report(&err);
        assert!(
            report.contains("transaction.timeout.ms"),
            "the error says the transaction timed out, not only fenced: {report}"
        );
        producer.close().await.ok();
        transactional(&cluster, &id, &[("transaction.timeout.ms", "3000")]).await
    };

    producer.begin_transaction().unwrap();
    let next = send_all(&producer, &topic, "next", 5).await;
    producer
        .commit_transaction()
        .await
        .expect("the next transaction commits");
    await_all(next).await;
    producer.close().await.unwrap();
    let committed = cluster.read_values(&topic, Isolation::ReadCommitted);
    assert_eq!(count_prefix(&committed, "expired"), 0, "{committed:?}");
    assert_eq!(count_prefix(&committed, "next"), 5, "{committed:?}");
}
on_both_versions!(coordinator_timed_out_transaction_is_abortable_and_recovers);

/// Transactions v1: the coordinator's answers are dropped while `send_offsets_to_transaction`
/// runs in an otherwise empty transaction, so its AddOffsetsToTxn is processed but never
/// answered, and the call times out. The coordinator now holds the transaction open, so the
/// abort must end it with EndTxn(ABORT) rather than finish locally: before the fix the next
/// transaction silently continued the coordinator's one (found by the simulation's copy
/// loop). Checked with Kafka's own TransactionsCommand (the coordinator's state), the group's
/// committed offsets (the aborted transaction's never show) and kcat (the transactions
/// around it are visible exactly once). The aborted transaction sends no records: an
/// AddPartitionsToTxn in flight beside the AddOffsetsToTxn makes the coordinator answer the
/// latter CONCURRENT_TRANSACTIONS, and it would not land.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_offsets_with_lost_answers_then_abort_ends_the_transaction_tv1() {
    let Some(cluster) = Cluster::tv1() else {
        return;
    };
    let _exclusive = cluster.exclusive();
    let input = support::unique_topic("txn-lost-in");
    let output = support::unique_topic("txn-lost-out");
    cluster.create_topic(&input, 1, 1, &[]);
    cluster.create_topic(&output, 1, 1, &[]);
    let group = support::unique_topic("group");
    let consumed = |offset| {
        vec![OffsetToCommit::new(
            exactly::TopicPartition::new(input.as_str(), 0),
            offset,
        )]
    };
    let id = support::unique_topic("lost-offsets");
    let producer = transactional(&cluster, &id, &[("max.block.ms", "4000")]).await;

    // A first transaction, so the producer knows the topic's metadata and its coordinators.
    producer.begin_transaction().unwrap();
    let first = send_all(&producer, &output, "first", 1).await;
    producer.commit_transaction().await.expect("first commit");
    await_all(first).await;
    // Until its markers are written the coordinator answers CONCURRENT_TRANSACTIONS, and the
    // AddOffsetsToTxn below would not land.
    let mut state = String::new();
    for _ in 0..50 {
        state = cluster.describe_transaction(&id).0;
        if state == "CompleteCommit" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(state, "CompleteCommit");

    let proxy = cluster.proxy(0);
    proxy.add_toxic("drop_answers", "timeout", "downstream", r#"{"timeout":0}"#);
    producer.begin_transaction().unwrap();
    // The member joins after the cut (the cut would break its connection); the lost
    // AddOffsetsToTxn only names the group.
    let err = producer
        .send_offsets_to_transaction(consumed(5), &ConsumerGroupMetadata::group_only(&group))
        .await
        .expect_err("no answer: send_offsets_to_transaction times out");
    assert!(matches!(err, Error::Timeout(_)), "{err}");
    assert_eq!(producer.transaction_state(), Some(TxnState::InTransaction));
    proxy.remove_toxic("drop_answers");
    let (state, partitions) = cluster.describe_transaction(&id);
    assert_eq!(
        state, "Ongoing",
        "the unanswered adds were processed: the coordinator holds the transaction open"
    );
    assert!(
        partitions
            .iter()
            .any(|p| p.starts_with("__consumer_offsets-")),
        "{partitions:?}"
    );

    producer
        .abort_transaction()
        .await
        .expect("the abort ends the coordinator's transaction");
    assert_eq!(producer.transaction_state(), Some(TxnState::Ready));
    let (state, partitions) = cluster.describe_transaction(&id);
    assert_eq!(
        (state.as_str(), partitions.len()),
        ("CompleteAbort", 0),
        "EndTxn(ABORT) ended it: {partitions:?}"
    );

    let mut member = GroupMember::join(&cluster.bootstrap, &group, &input);
    let metadata = member.metadata.clone();
    producer.begin_transaction().unwrap();
    let next = send_all(&producer, &output, "next", 3).await;
    producer
        .send_offsets_to_transaction(consumed(7), &metadata)
        .await
        .expect("the next transaction's offsets");
    producer
        .commit_transaction()
        .await
        .expect("the next transaction commits");
    for r in await_all(next).await {
        r.expect("committed records are acknowledged");
    }
    producer.close().await.unwrap();
    let (state, _) = cluster.describe_transaction(&id);
    assert_eq!(state, "CompleteCommit");
    // The markers into __consumer_offsets follow the EndTxn answer: wait for the offset.
    let mut committed_offset = -1;
    for _ in 0..100 {
        committed_offset = member.committed(&input, 0);
        if committed_offset == 7 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(committed_offset, 7, "the next transaction's offset, not 5");
    let committed = cluster.read_values(&output, Isolation::ReadCommitted);
    assert_eq!(committed, ["first-0", "next-0", "next-1", "next-2"]);
}

/// The cuts of [`coordinator_outage_logs_once`].
const CUT: Duration = Duration::from_secs(12);

/// Cuts the test bed's one broker off; [`end_cut`] brings it back.
fn start_cut(cluster: &Cluster) -> Instant {
    cluster.proxy(0).set_enabled(false);
    Instant::now()
}

/// Brings the broker back [`CUT`] after the cut began, then waits for `call` (started during
/// the cut): it must succeed once the broker is back.
async fn end_cut(
    cluster: &Cluster,
    began: Instant,
    call: tokio::task::JoinHandle<exactly::Result<()>>,
) {
    tokio::time::sleep(CUT.saturating_sub(began.elapsed())).await;
    cluster.proxy(0).set_enabled(true);
    tokio::time::timeout(RESOLVE_LIMIT, call)
        .await
        .expect("the call returns")
        .unwrap()
        .expect("the call succeeds once the broker is back");
    eprintln!("done {:?} after the cut began", began.elapsed());
}

/// One loop's outage in the log: `warn` (a message fragment) once at WARN, its retries at
/// DEBUG, and `info` once at INFO counting every failed attempt.
fn logged_once(logged: &Captured, warn: &str, info: &str) {
    let warnings: Vec<_> = logged
        .at(Level::WARN)
        .into_iter()
        .filter(|e| e.message.contains(warn))
        .collect();
    assert_eq!(warnings.len(), 1, "one WARN with {warn:?}: {warnings:?}");
    let retried = logged
        .at(Level::DEBUG)
        .into_iter()
        .filter(|e| e.message.contains(warn) && e.message.contains("failed again"))
        .count();
    assert!(
        retried >= 1,
        "the retries of {warn:?} during the cut are at DEBUG"
    );
    let back: Vec<_> = logged
        .at(Level::INFO)
        .into_iter()
        .filter(|e| e.message.contains(info))
        .collect();
    assert_eq!(back.len(), 1, "one INFO with {info:?}: {back:?}");
    let failed: usize = back[0]
        .field("failed_attempts")
        .parse()
        .expect("the INFO counts the failed attempts");
    assert_eq!(failed, retried + 1, "{back:?}");
}

/// No WARN twice for one outage: one per loop (and address), numbers (request ids, counts)
/// aside; and nothing at ERROR.
fn no_warning_repeated(logged: &Captured) {
    let mut per_kind: BTreeMap<(String, String), usize> = BTreeMap::new();
    for event in logged.at(Level::WARN) {
        eprintln!("WARN {} {} {:?}", event.target, event.message, event.fields);
        let kind: String = event
            .message
            .chars()
            .filter(|c| !c.is_ascii_digit())
            .collect();
        *per_kind
            .entry((kind, event.field("address").to_owned()))
            .or_default() += 1;
    }
    assert!(
        per_kind.values().all(|&n| n == 1),
        "a WARN repeated during one outage: {per_kind:?}"
    );
    let errors = logged.at(Level::ERROR);
    assert!(errors.is_empty(), "{errors:?}");
}

/// Two 12 s cuts of the transaction coordinator (the test bed's one broker), and the log
/// of each: one WARN when a retry loop starts failing, DEBUG for its retries, one INFO when
/// it works again; no WARN per retry. The first cut comes during a commit, so the EndTxn is
/// retried; in the second the records are sent during the cut, so under transactions v1
/// AddPartitionsToTxn is retried, under v2 the produce requests. Both transactions commit.
fn coordinator_outage_logs_once(cluster: Option<Cluster>) {
    let Some(cluster) = cluster else { return };
    // A current-thread runtime, so the capture (set for this thread) sees every event of the
    // producer's tasks.
    let (logged, _capture) = Captured::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let _exclusive = cluster.exclusive();
        let topic = support::unique_topic("txn-outage");
        cluster.create_topic(&topic, 2, 1, &[]);
        let producer = transactional(&cluster, &support::unique_topic("outage"), &[]).await;
        let commit = || {
            let producer = producer.clone();
            tokio::spawn(async move { producer.commit_transaction().await })
        };

        // A commit while the coordinator is cut off: its records are in the log already.
        producer.begin_transaction().unwrap();
        let first = send_all(&producer, &topic, "first", 5).await;
        producer.flush().await.unwrap();
        logged.clear();
        let began = start_cut(&cluster);
        end_cut(&cluster, began, commit()).await;
        logged_once(
            &logged,
            "transactional request",
            "transactional requests to the coordinators",
        );
        no_warning_repeated(&logged);

        // Records sent while the broker is cut off, then the commit.
        logged.clear();
        let began = start_cut(&cluster);
        producer.begin_transaction().unwrap();
        let second = send_all(&producer, &topic, "second", 5).await;
        end_cut(&cluster, began, commit()).await;
        if cluster.txn_version == 1 {
            logged_once(
                &logged,
                "transactional request (AddPartitionsToTxn)",
                "transactional requests to the coordinators",
            );
        } else {
            logged_once(&logged, "produce request", "produce requests to broker");
        }
        no_warning_repeated(&logged);

        for outcome in await_all(first)
            .await
            .into_iter()
            .chain(await_all(second).await)
        {
            outcome.expect("delivered in a committed transaction");
        }
        producer.close().await.unwrap();
        let committed = cluster.read_values(&topic, Isolation::ReadCommitted);
        assert_eq!(count_prefix(&committed, "first"), 5, "{committed:?}");
        assert_eq!(count_prefix(&committed, "second"), 5, "{committed:?}");
    });
}

mod coordinator_outage_logs_once {
    #[test]
    fn tv2() {
        super::coordinator_outage_logs_once(super::support::Cluster::single());
    }

    #[test]
    fn tv1() {
        super::coordinator_outage_logs_once(super::support::Cluster::tv1());
    }
}
