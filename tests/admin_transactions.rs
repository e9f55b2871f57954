//! The admin client's transaction doctor (KIP-664) against real Kafka: a truly hanging
//! transaction (a transactional batch the coordinator never heard of, KAFKA-12671's shape)
//! found and aborted; producers SIGKILLed mid-transaction (ours and Java's) whose open
//! transactions are listed but not hanging, and aborted on the partition; a live transaction
//! never reported; the safe abort refusing a live transaction (ours and librdkafka's), which
//! then commits whole, and what a forced abort does; a stuck last stable offset explained
//! and moved on by fencing; DescribeProducers agreeing with our producer. What the log shows is
//! checked with kcat reading `read_committed` and with Kafka's own `kafka-transactions.sh`;
//! the `admin` example's `hanging` table is read too.
//!
//! Tests hold their cluster's lock across awaits on purpose (see `broker_failure.rs`).
#![allow(clippy::await_holding_lock)]

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use exactly::{
    AbortTransactionOptions, AbortTransactionSpec, ActiveProducer, Admin, FindHangingOptions,
    IsolationLevel, ListTransactionsFilter, OffsetSpec, Producer, Record, SuggestedAction,
    TopicPartition, TransactionDescription, TransactionState, TransactionVerdict,
};
use support::raw_txn::RawTransactionalProducer;
use support::{Cluster, Isolation, eventually, java_tool, unique_topic};

/// The longest a test waits for one expected thing.
const WAIT: Duration = Duration::from_secs(60);

/// Set in the environment of this binary re-run as a child producer (see
/// [`our_killed_producer`]): `bootstrap topic transactional-id`.
const CHILD_ENV: &str = "EXACTLY_ADMIN_TXN_CHILD";

async fn transactional(bootstrap: &str, id: &str, timeout: Duration) -> Producer {
    let producer = Producer::from_properties([
        ("bootstrap.servers", bootstrap),
        ("transactional.id", id),
        ("transaction.timeout.ms", &timeout.as_millis().to_string()),
        ("linger.ms", "5"),
        ("request.timeout.ms", "5000"),
        ("max.block.ms", "30000"),
    ])
    .await
    .expect("producer builds");
    producer.init_transactions().await.expect("init");
    producer
}

/// Sends `values` to `topic`-0 and waits for each acknowledgement.
async fn send_acked(producer: &Producer, topic: &str, values: &[&str]) {
    let mut futures = Vec::new();
    for value in values {
        let record = Record::to(topic).partition(0).value(value.to_string());
        futures.push(producer.send(record).await.expect("send"));
    }
    for future in futures {
        future.await.expect("acknowledged");
    }
}

/// The last stable offset and the high watermark of `topic`-0, through the admin client.
async fn lso_and_hw(admin: &Admin, topic: &str) -> (i64, i64) {
    lso_and_hw_of(admin, &TopicPartition::new(topic, 0)).await
}

/// The last stable offset and the high watermark of `tp`, through the admin client.
async fn lso_and_hw_of(admin: &Admin, tp: &TopicPartition) -> (i64, i64) {
    let mut offsets = Vec::new();
    for isolation in [
        IsolationLevel::ReadCommitted,
        IsolationLevel::ReadUncommitted,
    ] {
        let listed = admin
            .list_offsets([(tp.clone(), OffsetSpec::Latest)], isolation)
            .await
            .expect("list offsets");
        offsets.push(listed[tp].as_ref().expect("offset").offset);
    }
    (offsets[0], offsets[1])
}

/// The producers the leader of `topic`-0 describes.
async fn producers_of(admin: &Admin, topic: &str) -> Vec<ActiveProducer> {
    let tp = TopicPartition::new(topic, 0);
    let mut described = admin.describe_producers([tp.clone()]).await.expect("call");
    described.remove(&tp).expect("answered").expect("described")
}

/// `id`'s transaction as its coordinator describes it.
async fn described(admin: &Admin, id: &str) -> TransactionDescription {
    let mut described = admin.describe_transactions([id]).await.expect("call");
    described.remove(id).expect("answered").expect("described")
}

/// No transaction on `topic` is hanging, whatever the bound: for us and for Kafka's own
/// `kafka-transactions.sh find-hanging`.
async fn assert_not_hanging(admin: &Admin, cluster: &Cluster, topic: &str) {
    let options = FindHangingOptions::default()
        .topics([topic])
        .older_than(Duration::ZERO);
    assert!(
        admin
            .find_hanging_transactions(&options)
            .await
            .expect("find hanging")
            .is_empty()
    );
    assert!(java_find_hanging(cluster, topic).is_empty());
}

/// Kafka's own `kafka-transactions.sh` with `args`, its standard output.
fn transactions_tool(cluster: &Cluster, args: &[&str]) -> String {
    cluster.kafka_tool("org.apache.kafka.tools.TransactionsCommand", args)
}

/// The producer ids `kafka-transactions.sh find-hanging --topic` reports (its bound is in
/// whole minutes; 0 reports every open transaction it judges hanging).
fn java_find_hanging(cluster: &Cluster, topic: &str) -> Vec<i64> {
    let out = transactions_tool(
        cluster,
        &[
            "find-hanging",
            "--topic",
            topic,
            "--max-transaction-timeout",
            "0",
        ],
    );
    // Topic Partition ProducerId ProducerEpoch CoordinatorEpoch StartOffset ...
    out.lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(2)?.parse().ok())
        .collect()
}

/// The `admin` example run with `args` against `cluster`: what it printed.
fn example(cluster: &Cluster, args: &[&str]) -> String {
    let mut all = vec!["--bootstrap", cluster.bootstrap.as_str()];
    all.extend_from_slice(args);
    cluster.run_admin_example(&all)
}

/// Sets `transaction.partition.verification.enable` as every broker's default with Kafka's
/// `kafka-configs` (a dynamic, cluster-wide config), and removes it again when dropped.
struct VerificationOff<'a>(&'a Cluster);

impl<'a> VerificationOff<'a> {
    fn set(cluster: &'a Cluster) -> Self {
        cluster.alter_broker_default(
            "--add-config",
            "transaction.partition.verification.enable=false",
        );
        VerificationOff(cluster)
    }
}

impl Drop for VerificationOff<'_> {
    fn drop(&mut self) {
        self.0.alter_broker_default(
            "--delete-config",
            "transaction.partition.verification.enable",
        );
    }
}

/// A transactional batch written to a partition without AddPartitionsToTxn, on a
/// transactions-v1 cluster with partition verification (KIP-890 part 1) switched off: the
/// leader opens a transaction the coordinator never heard of (KAFKA-12671's shape). With
/// verification on (Kafka's default since 3.6) the leader refuses the batch, which the test
/// checks first. The transaction is found hanging (by us, by Kafka's own tool and by the
/// `admin` example), aborted on the partition, and the last stable offset moves on; a second
/// one, on the other partition, is aborted by the example's `--abort`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_transaction_is_found_and_aborted() {
    let Some(cluster) = Cluster::tv1() else {
        return;
    };
    let _guard = cluster.exclusive();
    let admin = cluster.admin().await;
    let topic = unique_topic("hanging");
    cluster.create_topic(&topic, 2, 1, &[]);
    let tp = TopicPartition::new(topic.as_str(), 0);
    let tp1 = TopicPartition::new(topic.as_str(), 1);

    let before = transactional(&cluster.bootstrap, &format!("{topic}-before"), WAIT).await;
    before.begin_transaction().expect("begin");
    send_acked(&before, &topic, &["before-1", "before-2"]).await;
    before.commit_transaction().await.expect("commit");

    let mut raw = RawTransactionalProducer::init(
        &cluster.bootstrap,
        &format!("{topic}-zombie"),
        Duration::from_secs(60),
    );
    // A second one on partition 1, left for the example to abort.
    let mut raw1 = RawTransactionalProducer::init(
        &cluster.bootstrap,
        &format!("{topic}-zombie-1"),
        Duration::from_secs(60),
    );
    // INVALID_TXN_STATE: the leader asked the coordinator, which knows no such transaction.
    assert_eq!(raw.produce_unregistered(&topic, 0, 0, &["x"]), (48, -1));
    let start_offset = {
        let _off = VerificationOff::set(&cluster);
        let mut answer = (-1, -1);
        // The config reaches the broker's dynamic config asynchronously.
        eventually("the leader accepts the unverified batch", WAIT, || {
            answer = raw.produce_unregistered(&topic, 0, 0, &["hanging-1", "hanging-2"]);
            std::future::ready(answer.0 == 0)
        })
        .await;
        assert_eq!(
            raw1.produce_unregistered(&topic, 1, 0, &["hanging-p1"]),
            (0, 0)
        );
        answer.1
    };
    assert_eq!(start_offset, 3, "after two records and their commit marker");

    let after = transactional(&cluster.bootstrap, &format!("{topic}-after"), WAIT).await;
    after.begin_transaction().expect("begin");
    send_acked(&after, &topic, &["after-1"]).await;
    after.commit_transaction().await.expect("commit");

    // Stuck: the committed record behind the open transaction is invisible.
    let (lso, hw) = lso_and_hw(&admin, &topic).await;
    assert_eq!((lso, hw), (start_offset, 7), "LSO at the hanging start");
    assert_eq!(
        cluster.read_values(&topic, Isolation::ReadCommitted),
        ["before-1", "before-2"]
    );

    // The coordinator knows the id, but no open transaction on this partition.
    let described = admin
        .describe_transactions([raw.transactional_id.as_str()])
        .await
        .expect("call");
    let description = described[&raw.transactional_id]
        .as_ref()
        .expect("described");
    assert_eq!(description.state, TransactionState::Empty);
    assert_eq!(description.producer_id, raw.producer_id);
    assert!(description.partitions.is_empty());

    let open = producers_of(&admin, &topic).await;
    let zombie = open
        .iter()
        .find(|p| p.producer_id == raw.producer_id)
        .expect("the leader describes the zombie");
    assert_eq!(zombie.current_txn_start_offset, Some(start_offset));
    assert_eq!(zombie.producer_epoch, raw.producer_epoch);
    assert_eq!(zombie.last_sequence, 1);
    assert_eq!(
        zombie.coordinator_epoch, None,
        "no marker ever written for it"
    );

    let options = FindHangingOptions::default()
        .topics([topic.as_str()])
        .older_than(Duration::from_secs(1));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let hanging = admin
        .find_hanging_transactions(&options)
        .await
        .expect("find hanging");
    assert_eq!(hanging.len(), 2, "{hanging:?}");
    let found = &hanging[0];
    assert_eq!(found.partition, tp);
    assert_eq!(
        (hanging[1].partition.clone(), hanging[1].producer_id),
        (tp1.clone(), raw1.producer_id)
    );
    assert_eq!(found.producer_id, raw.producer_id);
    assert_eq!(found.producer_epoch, raw.producer_epoch);
    assert_eq!(found.start_offset, start_offset);
    assert_eq!(
        found.transactional_id.as_deref(),
        Some(raw.transactional_id.as_str())
    );
    assert!(found.age >= Duration::from_secs(1), "{:?}", found.age);
    assert!(found.age < WAIT * 2, "{:?}", found.age);
    // Kafka's own tool agrees, and the example prints it.
    let mut java = java_find_hanging(&cluster, &topic);
    java.sort();
    assert_eq!(java, [raw.producer_id, raw1.producer_id]);
    let table = example(&cluster, &["hanging", "--older-than", "1"]);
    assert!(table.starts_with("TOPIC"), "{table}");
    let row: Vec<&str> = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(topic.as_str()))
        .unwrap_or_else(|| panic!("{topic} not listed:\n{table}"))
        .split_whitespace()
        .collect();
    let (id, epoch) = (raw.producer_id.to_string(), raw.producer_epoch.to_string());
    assert_eq!(
        row[1..5],
        ["0", id.as_str(), epoch.as_str(), "3"],
        "{table}"
    );
    // The default bound is the brokers' transaction.max.timeout.ms (15 minutes): too young.
    let by_default = FindHangingOptions::default().topics([topic.as_str()]);
    assert!(
        admin
            .find_hanging_transactions(&by_default)
            .await
            .expect("find hanging")
            .is_empty()
    );

    admin
        .abort_transaction(&found.abort_spec())
        .await
        .expect("abort the hanging transaction");
    let (lso, hw) = lso_and_hw(&admin, &topic).await;
    assert_eq!(
        (lso, hw),
        (8, 8),
        "the abort marker took offset 7; LSO at the end"
    );
    assert_eq!(
        lso_and_hw_of(&admin, &tp1).await,
        (0, 1),
        "partition 1 still hangs"
    );

    // The example aborts the other one (and any other hanging transaction of the cluster).
    let aborted = example(&cluster, &["hanging", "--older-than", "1", "--abort"]);
    let line = format!(
        "aborted producer {}'s transaction on {topic}-1",
        raw1.producer_id
    );
    assert!(aborted.lines().any(|l| l == line), "{aborted}");
    assert!(!aborted.contains(&format!("on {topic}-0")), "{aborted}");
    assert_eq!(lso_and_hw_of(&admin, &tp1).await, (2, 2));
    assert_eq!(
        cluster.read_values(&topic, Isolation::ReadCommitted),
        ["before-1", "before-2", "after-1"]
    );
    assert!(
        admin
            .find_hanging_transactions(&options)
            .await
            .expect("find hanging")
            .is_empty()
    );
    assert!(java_find_hanging(&cluster, &topic).is_empty());

    let missing = FindHangingOptions::default().topics([format!("{topic}-missing")]);
    let refused = admin.find_hanging_transactions(&missing).await;
    assert!(
        matches!(&refused, Err(exactly::Error::Broker { code, .. }) if *code == exactly::ErrorCode::UNKNOWN_TOPIC_OR_PARTITION),
        "{refused:?}"
    );
}

/// Which producer a killed-producer scenario runs.
enum Killed {
    /// This binary re-run as a child with [`CHILD_ENV`]: our transactional producer.
    Ours,
    /// Kafka's ProducerPerformance with a transactional id.
    Java,
}

/// Starts a producer that opens a transaction on `topic`-0 under `id` with a transaction
/// timeout of `timeout` and keeps it open; returns once the leader shows the open
/// transaction.
async fn start_killable(
    which: &Killed,
    cluster: &Cluster,
    admin: &Admin,
    topic: &str,
    id: &str,
    timeout: Duration,
) -> Child {
    let mut child = match which {
        Killed::Ours => Command::new(std::env::current_exe().expect("test binary"))
            .args(["our_killed_producer", "--exact", "--nocapture"])
            .env(
                CHILD_ENV,
                format!("{} {topic} {id} {}", cluster.bootstrap, timeout.as_millis()),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the child producer"),
        Killed::Java => {
            let props = [
                format!("bootstrap.servers={}", cluster.bootstrap),
                format!("transaction.timeout.ms={}", timeout.as_millis()),
                "linger.ms=0".to_owned(),
            ];
            let mut args = vec![
                "org.apache.kafka.tools.ProducerPerformance".to_owned(),
                "--topic".into(),
                topic.into(),
                "--num-records".into(),
                "1000000".into(),
                "--record-size".into(),
                "16".into(),
                "--throughput".into(),
                "20".into(),
                "--transactional-id".into(),
                id.into(),
                "--transaction-duration-ms".into(),
                timeout.as_millis().to_string(),
                "--producer-props".into(),
            ];
            args.extend(props);
            java_tool(&args)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn ProducerPerformance")
        }
    };
    if matches!(which, Killed::Ours) {
        let stdout = child.stdout.take().expect("piped");
        let ready = tokio::task::spawn_blocking(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(|l| l.ok())
                .any(|l| l == "OPEN")
        });
        let ready = tokio::time::timeout(WAIT, ready).await;
        assert!(
            matches!(ready, Ok(Ok(true))),
            "the child opened a transaction"
        );
    }
    eventually("the leader shows the open transaction", WAIT, || async {
        producers_of(admin, topic)
            .await
            .iter()
            .any(|p| p.current_txn_start_offset.is_some())
    })
    .await;
    child
}

/// The producer is SIGKILLed mid-transaction. Its coordinator still tracks the transaction
/// (it aborts it only when its timeout, here a minute, passes), so it is listed with its
/// age and blocks `read_committed`, but it is not hanging, and the safe abort refuses it. An
/// abort forced on the partition with the epochs its leader reports moves the last stable
/// offset; the coordinator still
/// believes the transaction open there until it times it out, and its own abort then
/// completes without a conflict.
async fn killed_producer_is_tracked_not_hanging(cluster: Cluster, which: Killed) {
    let _guard = cluster.shared();
    let admin = cluster.admin().await;
    let topic = unique_topic("killed-txn");
    cluster.create_topic(&topic, 1, 1, &[]);
    let tp = TopicPartition::new(topic.as_str(), 0);
    let id = format!("{topic}-producer");
    let timeout = Duration::from_secs(60);

    let mut child = start_killable(&which, &cluster, &admin, &topic, &id, timeout).await;
    child.kill().expect("SIGKILL the producer");
    child.wait().expect("reaped");

    let open = producers_of(&admin, &topic).await;
    assert_eq!(open.len(), 1, "{open:?}");
    let producer = &open[0];
    let start_offset = producer
        .current_txn_start_offset
        .expect("its transaction is open");

    let listed = admin
        .list_transactions(
            &ListTransactionsFilter::default()
                .states([TransactionState::Ongoing])
                .producer_ids([producer.producer_id]),
        )
        .await
        .expect("list transactions");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].transactional_id, id);
    let description = described(&admin, &id).await;
    assert_eq!(description.state, TransactionState::Ongoing);
    assert!(description.partitions.contains(&tp));
    assert_eq!(description.timeout, timeout);
    let started = description.start_time_ms.expect("open");
    let age_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
        - started;
    assert!(
        (0..WAIT.as_millis() as i64 * 3).contains(&age_ms),
        "{age_ms}"
    );
    // KIP-994's duration filter: open for longer than a second it is, for longer than an
    // hour it is not.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let running = ListTransactionsFilter::default()
        .producer_ids([producer.producer_id])
        .running_longer_than(Duration::from_secs(1));
    let listed = admin.list_transactions(&running).await.expect("list");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].transactional_id, id);
    let long_running = ListTransactionsFilter::default()
        .producer_ids([producer.producer_id])
        .running_longer_than(Duration::from_secs(3600));
    assert!(
        admin
            .list_transactions(&long_running)
            .await
            .expect("list")
            .is_empty()
    );

    // read_committed stops at the open transaction.
    let (lso, hw) = lso_and_hw(&admin, &topic).await;
    assert_eq!(lso, start_offset);
    assert!(hw > lso);
    let committed = cluster.read_topic(&topic, Isolation::ReadCommitted);
    assert!(committed.iter().all(|r| r.offset < start_offset));

    // Tracked by its coordinator: not hanging, whatever the bound.
    assert_not_hanging(&admin, &cluster, &topic).await;

    // Live to its coordinator, so the safe abort refuses; forced, the leader takes it.
    let spec = AbortTransactionSpec::for_producer(tp.clone(), producer);
    let refused = admin.abort_transaction(&spec).await;
    assert!(
        matches!(&refused, Err(exactly::Error::InvalidState(why)) if why.contains(&id)),
        "{refused:?}"
    );
    admin
        .abort_transaction_with(&spec, &AbortTransactionOptions::default().force_live())
        .await
        .expect("the leader takes the abort marker");
    let (lso, hw) = lso_and_hw(&admin, &topic).await;
    assert_eq!(lso, hw, "the abort marker moved the LSO to the end");
    let committed = cluster.read_topic(&topic, Isolation::ReadCommitted);
    assert!(
        committed.iter().all(|r| r.offset < start_offset),
        "the aborted records stay invisible: {committed:?}"
    );
    let after = producers_of(&admin, &topic).await;
    assert_eq!(after[0].current_txn_start_offset, None, "{after:?}");
    // The coordinator does not know: it still holds the transaction open there.
    let description = described(&admin, &id).await;
    assert_eq!(description.state, TransactionState::Ongoing);
    assert!(description.partitions.contains(&tp));

    // On the transaction's timeout the coordinator aborts it with a bumped epoch; its marker
    // lands on a partition with nothing open, which the leader accepts: one more marker,
    // nothing more visible, and the coordinator completes the abort.
    eventually(
        "the coordinator aborts the timed-out transaction",
        timeout + WAIT,
        || async { described(&admin, &id).await.state == TransactionState::CompleteAbort },
    )
    .await;
    let description = described(&admin, &id).await;
    assert!(
        description.producer_epoch > producer.producer_epoch,
        "{description:?}"
    );
    let (lso_after, hw_after) = lso_and_hw(&admin, &topic).await;
    assert_eq!((lso_after, hw_after), (hw + 1, hw + 1));
    let committed = cluster.read_topic(&topic, Isolation::ReadCommitted);
    assert!(committed.iter().all(|r| r.offset < start_offset));
    let after = producers_of(&admin, &topic).await;
    assert_eq!(
        after[0].producer_epoch, description.producer_epoch,
        "{after:?}"
    );
    assert!(after[0].coordinator_epoch.is_some(), "{after:?}");
}

/// Our transactional producer, SIGKILLed mid-transaction (this binary re-run as the child).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_killed_producer() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        return child_holds_a_transaction_open(&spec).await;
    }
    if let Some(cluster) = Cluster::single() {
        killed_producer_is_tracked_not_hanging(cluster, Killed::Ours).await;
    }
}

/// [`our_killed_producer`] on a transactions-v1 cluster (the child is the same).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_killed_producer_tv1() {
    if let Some(cluster) = Cluster::tv1() {
        killed_producer_is_tracked_not_hanging(cluster, Killed::Ours).await;
    }
}

/// The child's side of [`our_killed_producer`]: opens a transaction, says `OPEN`, and
/// waits to be killed (bounded: it gives up after a few minutes).
async fn child_holds_a_transaction_open(spec: &str) {
    let parts: Vec<&str> = spec.split(' ').collect();
    let [bootstrap, topic, id, timeout_ms] = parts[..] else {
        panic!("{CHILD_ENV}={spec:?}");
    };
    let timeout = Duration::from_millis(timeout_ms.parse().expect("timeout"));
    let producer = transactional(bootstrap, id, timeout).await;
    producer.begin_transaction().expect("begin");
    send_acked(&producer, topic, &["open-1", "open-2", "open-3"]).await;
    println!("OPEN");
    tokio::time::sleep(Duration::from_secs(300)).await;
    panic!("the child producer was not killed");
}

/// Kafka's Java producer (ProducerPerformance in transactions), SIGKILLed mid-transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_killed_producer() {
    if let Some(cluster) = Cluster::single() {
        killed_producer_is_tracked_not_hanging(cluster, Killed::Java).await;
    }
}

/// A live transaction, open and tracked by its coordinator, is never hanging, however young
/// the bound; the admin client lists it, describes it and its producer on the partition.
async fn live_transaction_is_not_hanging(cluster: Cluster) {
    let _guard = cluster.shared();
    let admin = cluster.admin().await;
    let topic = unique_topic("live-txn");
    cluster.create_topic(&topic, 1, 1, &[]);
    let tp = TopicPartition::new(topic.as_str(), 0);
    let id = format!("{topic}-producer");
    let producer = transactional(&cluster.bootstrap, &id, WAIT).await;
    producer.begin_transaction().expect("begin");
    send_acked(&producer, &topic, &["live-1", "live-2"]).await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    let metrics = producer.metrics();
    let open = producers_of(&admin, &topic).await;
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0].producer_id, metrics.producer_id);
    assert_eq!(open[0].producer_epoch, metrics.epoch);
    assert_eq!(open[0].current_txn_start_offset, Some(0));
    let listed = admin
        .list_transactions(&ListTransactionsFilter::default().states([TransactionState::Ongoing]))
        .await
        .expect("list");
    let ours = listed
        .iter()
        .find(|l| l.transactional_id == id)
        .expect("listed");
    assert_eq!(ours.producer_id, metrics.producer_id);
    assert_eq!(ours.state, TransactionState::Ongoing);

    let description = described(&admin, &id).await;
    assert_eq!(description.state, TransactionState::Ongoing);
    assert_eq!(description.partitions, [tp].into_iter().collect());
    assert_eq!(description.producer_epoch, metrics.epoch);

    assert_not_hanging(&admin, &cluster, &topic).await;

    producer.commit_transaction().await.expect("commit");
    let description = described(&admin, &id).await;
    assert!(
        matches!(
            description.state,
            TransactionState::CompleteCommit | TransactionState::PrepareCommit
        ),
        "{description:?}"
    );
    assert_eq!(
        cluster.read_values(&topic, Isolation::ReadCommitted),
        ["live-1", "live-2"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_transaction_is_not_hanging_tv2() {
    if let Some(cluster) = Cluster::single() {
        live_transaction_is_not_hanging(cluster).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_transaction_is_not_hanging_tv1() {
    if let Some(cluster) = Cluster::tv1() {
        live_transaction_is_not_hanging(cluster).await;
    }
}

/// DescribeProducers reports our idempotent producer as it is: its producer id and epoch
/// (from `Producer::metrics`), and per partition the last sequence of its contiguous
/// sequences from 0 (rule P3): the records acknowledged there, minus one. Kafka's own
/// `kafka-transactions.sh describe-producers` agrees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_producers_matches_our_producer() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _guard = cluster.shared();
    let admin = cluster.admin().await;
    let topic = unique_topic("producers");
    cluster.create_topic(&topic, 2, 1, &[]);
    let producer = Producer::from_properties([
        ("bootstrap.servers", cluster.bootstrap.as_str()),
        ("linger.ms", "5"),
    ])
    .await
    .expect("producer");
    let counts = [7, 3];
    let mut futures = Vec::new();
    for (partition, count) in counts.iter().enumerate() {
        for i in 0..*count {
            let record = Record::to(&topic)
                .partition(partition as i32)
                .value(format!("p{partition}-{i}"));
            futures.push(producer.send(record).await.expect("send"));
        }
    }
    for future in futures {
        future.await.expect("acknowledged");
    }
    let metrics = producer.metrics();
    let partitions: Vec<TopicPartition> = (0..2)
        .map(|p| TopicPartition::new(topic.as_str(), p))
        .collect();
    let described = admin
        .describe_producers(partitions.clone())
        .await
        .expect("describe producers");
    for (tp, count) in partitions.iter().zip(counts) {
        let producers = described[tp].as_ref().expect("described");
        assert_eq!(producers.len(), 1, "{producers:?}");
        let state = &producers[0];
        assert_eq!(state.producer_id, metrics.producer_id);
        assert_eq!(state.producer_epoch, metrics.epoch);
        assert_eq!(state.last_sequence, count - 1, "{tp:?}");
        assert_eq!(state.current_txn_start_offset, None);
        assert_eq!(state.coordinator_epoch, None);

        let java = transactions_tool(
            &cluster,
            &[
                "describe-producers",
                "--topic",
                &topic,
                "--partition",
                &tp.partition.to_string(),
            ],
        );
        // ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence LastTimestamp ...
        let row: Vec<&str> = java
            .lines()
            .nth(1)
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        assert_eq!(
            row[..4],
            [
                metrics.producer_id.to_string().as_str(),
                metrics.epoch.to_string().as_str(),
                "-1",
                (count - 1).to_string().as_str()
            ],
            "{java}"
        );
        assert_eq!(row[4], state.last_timestamp_ms.to_string(), "{java}");
    }
    // A partition that does not exist is that partition's error, not the call's.
    let missing = TopicPartition::new(topic.as_str(), 9);
    let described = admin
        .describe_producers([missing.clone()])
        .await
        .expect("call");
    assert!(described[&missing].is_err(), "{described:?}");
}

/// What the safe abort says when it refuses: the error names the transaction as live.
fn assert_refused_as_live(refused: exactly::Result<()>, id: &str) {
    let Err(exactly::Error::InvalidState(why)) = &refused else {
        panic!("the abort of a live transaction went through: {refused:?}");
    };
    for part in [id, "live", "timeout", "last write", "atomicity"] {
        assert!(why.contains(part), "{part:?} missing from {why}");
    }
}

/// The open transaction of the only producer with one on `tp`, as its leader describes it.
async fn open_spec(admin: &Admin, tp: &TopicPartition) -> AbortTransactionSpec {
    let open = producers_of(admin, &tp.topic).await;
    let producer = open
        .iter()
        .find(|p| p.current_txn_start_offset.is_some())
        .unwrap_or_else(|| panic!("no open transaction on {tp:?}: {open:?}"));
    AbortTransactionSpec::for_producer(tp.clone(), producer)
}

/// The librdkafka transactional producer of `tests/support/rdkafka_txn_producer.c`, built
/// with the system C compiler against the librdkafka.so.1 kcat brings.
fn rdkafka_producer() -> std::path::PathBuf {
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rdkafka_txn_producer");
    support::run_ok(Command::new("cc").args([
        "-O1",
        "-o",
        out.to_str().expect("UTF-8 path"),
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/support/rdkafka_txn_producer.c"
        ),
        "-l:librdkafka.so.1",
    ]));
    out
}

/// The refusal the issue asks for: a live transaction (10 records written and acknowledged,
/// the producer still running) is not aborted by `abort_transaction`: the error says it is
/// live, and the last stable offset stays. The producer writes 2 more and commits, and
/// `read_committed` (kcat) shows all 12. With our producer and librdkafka's. Forced, the
/// documented effect follows: the 10 are aborted at once, the producer is not told, and its
/// commit shows only what it wrote after the abort.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_of_a_live_transaction_is_refused() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _guard = cluster.shared();
    let admin = cluster.admin().await;
    let values = |prefix: &str, n: usize| -> Vec<String> {
        (0..n).map(|i| format!("{prefix}-{i}")).collect()
    };

    // Ours.
    let topic = unique_topic("live-abort");
    cluster.create_topic(&topic, 1, 1, &[]);
    let tp = TopicPartition::new(topic.as_str(), 0);
    let id = format!("{topic}-producer");
    let producer = transactional(&cluster.bootstrap, &id, WAIT).await;
    producer.begin_transaction().expect("begin");
    let before = values("before", 10);
    send_acked(
        &producer,
        &topic,
        &before.iter().map(String::as_str).collect::<Vec<_>>(),
    )
    .await;
    let spec = open_spec(&admin, &tp).await;
    assert_refused_as_live(admin.abort_transaction(&spec).await, &id);
    assert_eq!(lso_and_hw(&admin, &topic).await, (0, 10), "the LSO stayed");
    send_acked(&producer, &topic, &["after-0", "after-1"]).await;
    producer.commit_transaction().await.expect("commit");
    let mut expected = before.clone();
    expected.extend(values("after", 2));
    assert_eq!(
        cluster.read_values(&topic, Isolation::ReadCommitted),
        expected
    );

    // librdkafka's.
    let binary = rdkafka_producer();
    let rd_topic = unique_topic("live-abort-rdkafka");
    cluster.create_topic(&rd_topic, 1, 1, &[]);
    let rd_tp = TopicPartition::new(rd_topic.as_str(), 0);
    let rd_id = format!("{rd_topic}-producer");
    let mut child = Command::new(&binary)
        .args([&cluster.bootstrap, &rd_topic, &rd_id, "10", "2"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the librdkafka producer runs");
    // Its lines, read on a thread (a blocking read; each wait below is bounded).
    let (lines, from_child) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().expect("piped");
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(l).is_err() {
                break;
            }
        }
    });
    let next_line = || from_child.recv_timeout(WAIT).unwrap_or_default();
    assert_eq!(
        next_line(),
        "OPEN",
        "the librdkafka producer opened its transaction"
    );
    let spec = open_spec(&admin, &rd_tp).await;
    assert_refused_as_live(admin.abort_transaction(&spec).await, &rd_id);
    assert_eq!(
        lso_and_hw(&admin, &rd_topic).await,
        (0, 10),
        "the LSO stayed"
    );
    {
        use std::io::Write as _;
        writeln!(child.stdin.as_mut().expect("piped"), "go").expect("go ahead");
    }
    assert_eq!(next_line(), "COMMITTED");
    assert!(child.wait().expect("exits").success());
    assert_eq!(
        cluster.read_values(&rd_topic, Isolation::ReadCommitted),
        expected
    );

    // Forced on our producer's next transaction: what the option's documentation says.
    producer.begin_transaction().expect("begin");
    let second = values("second", 10);
    send_acked(
        &producer,
        &topic,
        &second.iter().map(String::as_str).collect::<Vec<_>>(),
    )
    .await;
    let spec = open_spec(&admin, &tp).await;
    admin
        .abort_transaction_with(&spec, &AbortTransactionOptions::default().force_live())
        .await
        .expect("forced");
    let (lso, hw) = lso_and_hw(&admin, &topic).await;
    assert_eq!(lso, hw, "the abort marker moved the LSO at once");
    send_acked(&producer, &topic, &["late-0", "late-1"]).await;
    producer
        .commit_transaction()
        .await
        .expect("the producer was not told");
    let mut forced = expected.clone();
    forced.extend(values("late", 2));
    assert_eq!(
        cluster.read_values(&topic, Isolation::ReadCommitted),
        forced,
        "the 10 written before the forced abort are gone, the 2 after committed"
    );
}

/// A producer SIGKILLed inside a transaction with a 900 s timeout holds the last stable
/// offset. `find_hanging_transactions` rightly reports nothing (its coordinator tracks it);
/// `explain_last_stable_offset` names it (producer, transactional id, first offset, how long
/// open and silent, the coordinator's 900 s timeout and the time left), calls it live, and
/// suggests waiting or fencing its id; the `admin` example's `lso` prints the same. The
/// suggested fence aborts it whole: the LSO moves to the end and `read_committed` (kcat)
/// shows none of its records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_stuck_lso() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _guard = cluster.shared();
    let admin = cluster.admin().await;
    let topic = unique_topic("stuck-lso");
    cluster.create_topic(&topic, 1, 1, &[]);
    let tp = TopicPartition::new(topic.as_str(), 0);
    let id = format!("{topic}-producer");
    let timeout = Duration::from_secs(900);
    let before = transactional(&cluster.bootstrap, &format!("{topic}-before"), WAIT).await;
    before.begin_transaction().expect("begin");
    send_acked(&before, &topic, &["committed-1"]).await;
    before.commit_transaction().await.expect("commit");

    let mut child = start_killable(&Killed::Ours, &cluster, &admin, &topic, &id, timeout).await;
    child.kill().expect("SIGKILL the producer");
    child.wait().expect("reaped");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_not_hanging(&admin, &cluster, &topic).await;

    let explained = admin
        .explain_last_stable_offset(&tp)
        .await
        .expect("explain");
    assert_eq!(
        explained.last_stable_offset, 2,
        "after the record and its marker"
    );
    assert_eq!(explained.high_watermark, 5);
    let blocking = explained.blocking().expect("a transaction holds the LSO");
    assert_eq!(blocking.first_offset, 2);
    assert_eq!(blocking.transactional_id.as_deref(), Some(id.as_str()));
    let coordinator = blocking.coordinator.as_ref().expect("described");
    assert_eq!(coordinator.state, TransactionState::Ongoing);
    assert_eq!(coordinator.timeout, timeout);
    assert!(
        blocking.silent_for >= Duration::from_secs(2),
        "{blocking:?}"
    );
    let open_for = blocking.open_for.expect("open");
    assert!(
        open_for >= Duration::from_secs(2) && open_for < WAIT * 3,
        "{open_for:?}"
    );
    let TransactionVerdict::Live { time_left } = blocking.verdict else {
        panic!("not live: {blocking:?}");
    };
    assert!(
        time_left > timeout - WAIT * 3 && time_left < timeout,
        "{time_left:?}"
    );
    let fence = SuggestedAction::Fence {
        transactional_id: id.clone(),
    };
    assert!(
        explained.actions().contains(&fence),
        "{:?}",
        explained.actions()
    );
    let text = explained.to_string();
    for part in [
        id.as_str(),
        "holds the LSO",
        "900.0s timeout",
        "live",
        "fence",
    ] {
        assert!(text.contains(part), "{part:?} missing from {text}");
    }
    let printed = example(&cluster, &["lso", &topic, "0"]);
    assert!(
        printed.contains("holds the LSO") && printed.contains(&id),
        "{printed}"
    );
    assert_refused_as_live(
        admin.abort_transaction(&open_spec(&admin, &tp).await).await,
        &id,
    );

    // The suggested action: fence the id. Its coordinator aborts the transaction whole.
    let fenced = admin.fence_producers([id.as_str()]).await.expect("fence");
    let fenced = fenced[&id].as_ref().expect("fenced");
    assert!(
        fenced.producer_epoch > blocking.producer.producer_epoch,
        "{fenced:?}"
    );
    eventually("the LSO moves to the end", WAIT, || async {
        let (lso, hw) = lso_and_hw(&admin, &topic).await;
        lso == hw
    })
    .await;
    assert_eq!(
        cluster.read_values(&topic, Isolation::ReadCommitted),
        ["committed-1"],
        "none of the killed transaction's records"
    );
    let after = admin
        .explain_last_stable_offset(&tp)
        .await
        .expect("explain");
    assert!(after.open_transactions.is_empty(), "{after}");
    // The coordinator finished the abort before it answered the fencing InitProducerId: the
    // id is idle at the fenced epoch.
    let now = described(&admin, &id).await;
    assert_eq!(
        (now.state, now.producer_epoch),
        (TransactionState::Empty, fenced.producer_epoch)
    );
}
