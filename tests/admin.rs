//! `exactly::Admin` against real Kafka, each result checked with Kafka's own tools: topics
//! created, described, altered and deleted on three brokers (configs read back with
//! `kafka-configs`), typed errors for an existing topic and an impossible replication factor;
//! a group's committed offsets, description and lag as `kafka-consumer-groups` prints them,
//! offsets moved for the next member, deleted, and the group deleted (both group protocols);
//! a killed group coordinator followed to its successor; the client over SASL_SSL; a call
//! that ends at its deadline; the `admin` example run against the test bed.
//!
//! Tests hold their cluster's lock across awaits on purpose (see `broker_failure.rs`).
#![allow(clippy::await_holding_lock)]

#[macro_use]
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use exactly::{
    Admin, AlterConfig, ConfigResource, ConfigSource, ConsumerEvent, ErrorCode, GroupProtocol,
    GroupType, IsolationLevel, NewTopic, OffsetReset, OffsetSpec, OffsetToCommit, Record,
    TopicPartition,
};
use support::members::consumer_with;
use support::{Cluster, admin_create_topic, unique_topic};

/// The longest a test waits for one expected thing.
const WAIT: Duration = Duration::from_secs(60);

/// `topic` as `describe_topics` sees it once `done` holds: each broker learns a change from
/// the metadata log, so the one asked right after a change may not know it yet (Kafka's
/// metadata is eventually consistent across brokers).
async fn described_once(
    admin: &Admin,
    topic: &str,
    done: impl Fn(&exactly::TopicDescription) -> bool,
) -> exactly::TopicDescription {
    let started = Instant::now();
    loop {
        let described = admin.describe_topics([topic]).await.unwrap();
        match &described[topic] {
            Ok(description) if done(description) => return description.clone(),
            other => assert!(started.elapsed() < WAIT, "{topic}: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The broker error code and message of a failed item.
fn broker_error<T: std::fmt::Debug>(result: &exactly::Result<T>) -> (ErrorCode, String) {
    match result {
        Err(exactly::Error::Broker { code, message }) => {
            (*code, message.clone().unwrap_or_default())
        }
        other => panic!("expected a broker error, got {other:?}"),
    }
}

/// A topic's dynamic configs as Kafka's own `kafka-configs --describe` prints them.
fn kafka_configs(cluster: &Cluster, topic: &str) -> String {
    cluster.kafka_tool(
        "kafka.admin.ConfigCommand",
        &[
            "--describe",
            "--entity-type",
            "topics",
            "--entity-name",
            topic,
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_topics_roundtrip() {
    let Some(cluster) = Cluster::three() else {
        return;
    };
    let _g = cluster.shared();
    let admin = cluster.admin().await;
    let topic = unique_topic("admin-topics");

    // Only validated: nothing is created.
    let validated = admin
        .create_topics(
            [NewTopic::new(&topic).partitions(3).replication_factor(3)],
            true,
        )
        .await
        .unwrap();
    assert!(validated[&topic].is_ok(), "{validated:?}");
    assert!(!admin.list_topics().await.unwrap().contains(&topic));

    let created = admin
        .create_topics(
            [NewTopic::new(&topic)
                .partitions(3)
                .replication_factor(3)
                .config("retention.ms", "3600000")
                .config("cleanup.policy", "compact")],
            false,
        )
        .await
        .unwrap();
    let created = created[&topic].as_ref().expect("created");
    assert_eq!((created.partitions, created.replication_factor), (3, 3));
    assert_ne!(created.topic_id, [0; 16]);
    assert!(
        created
            .configs
            .contains(&("retention.ms".to_owned(), Some("3600000".to_owned()))),
        "{:?}",
        created.configs
    );

    // Described: three partitions, each on all three brokers (in sync once replication
    // caught up), with a leader.
    let description = described_once(&admin, &topic, |d| {
        d.partitions
            .iter()
            .all(|p| p.isr.len() == 3 && p.leader.is_some())
    })
    .await;
    assert_eq!(description.partitions.len(), 3);
    assert_eq!(description.replication_factor(), 3);
    let brokers: Vec<i32> = admin
        .describe_cluster()
        .await
        .unwrap()
        .brokers
        .into_keys()
        .collect();
    assert_eq!(brokers.len(), 3);
    for p in &description.partitions {
        let mut replicas = p.replicas.clone();
        replicas.sort_unstable();
        assert_eq!(replicas, brokers, "{p:?}");
        assert_eq!(p.isr.len(), 3, "{p:?}");
        assert!(p.leader.is_some_and(|l| p.replicas.contains(&l)), "{p:?}");
    }
    // Each broker learns the topic from the metadata log, so one asked next may not have it
    // yet (Kafka's metadata is eventually consistent across brokers).
    let started = Instant::now();
    while !admin.list_topics().await.unwrap().contains(&topic) {
        assert!(started.elapsed() < WAIT, "{topic} never listed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let described = admin
        .describe_configs([ConfigResource::Topic(topic.clone())])
        .await
        .unwrap();
    let entries = described[&ConfigResource::Topic(topic.clone())]
        .as_ref()
        .expect("configs");
    let retention = entries.iter().find(|e| e.name == "retention.ms").unwrap();
    assert_eq!(retention.value.as_deref(), Some("3600000"));
    assert_eq!(retention.source, ConfigSource::DynamicTopic);

    // Altered, and read back by Kafka's own tool.
    let altered = admin
        .incremental_alter_configs(
            [(
                ConfigResource::Topic(topic.clone()),
                vec![
                    AlterConfig::Set("retention.ms".into(), "7200000".into()),
                    AlterConfig::Delete("cleanup.policy".into()),
                ],
            )],
            false,
        )
        .await
        .unwrap();
    assert!(altered.values().all(Result::is_ok), "{altered:?}");
    // (The broker the tool asks may apply the change a moment later: bounded retries.)
    let started = Instant::now();
    let printed = loop {
        let printed = kafka_configs(&cluster, &topic);
        if printed.contains("retention.ms=7200000") || started.elapsed() > WAIT {
            break printed;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(printed.contains("retention.ms=7200000"), "{printed}");
    assert!(!printed.contains("cleanup.policy="), "{printed}");
    // A bad value is the broker's typed refusal, with its message.
    let refused = admin
        .incremental_alter_configs(
            [(
                ConfigResource::Topic(topic.clone()),
                vec![AlterConfig::Set("retention.ms".into(), "soon".into())],
            )],
            false,
        )
        .await
        .unwrap();
    let (code, message) = broker_error(&refused[&ConfigResource::Topic(topic.clone())]);
    assert_eq!(code, ErrorCode::INVALID_CONFIG, "{message}");
    assert!(message.contains("retention.ms"), "{message}");

    // A broker's own configs come from that broker.
    let broker = ConfigResource::Broker(brokers[1]);
    let configs = admin.describe_configs([broker.clone()]).await.unwrap();
    let entries = configs[&broker].as_ref().expect("broker configs");
    let node_id = entries
        .iter()
        .find(|e| e.name == "node.id")
        .expect("node.id");
    assert_eq!(
        node_id.value.as_deref(),
        Some(brokers[1].to_string().as_str())
    );

    // A replica assignment of our own, the preferred leader first.
    let placed = unique_topic("admin-placed");
    let assignment = [vec![brokers[2], brokers[0]], vec![brokers[1], brokers[2]]];
    let created = admin
        .create_topics(
            [NewTopic::new(&placed)
                .assign(0, assignment[0].clone())
                .assign(1, assignment[1].clone())],
            false,
        )
        .await
        .unwrap();
    assert!(created[&placed].is_ok(), "{created:?}");
    let replicas: Vec<Vec<i32>> = described_once(&admin, &placed, |_| true)
        .await
        .partitions
        .iter()
        .map(|p| p.replicas.clone())
        .collect();
    assert_eq!(replicas, assignment);
    assert!(admin.delete_topics([&placed]).await.unwrap()[&placed].is_ok());

    // Coordinators are brokers of the cluster.
    let coordinator = admin.transaction_coordinator("admin-txn-id").await.unwrap();
    assert!(brokers.contains(&coordinator), "{coordinator}");

    // Errors for an existing topic and an impossible replication factor: typed and clear.
    let again = admin
        .create_topics([NewTopic::new(&topic).partitions(1)], false)
        .await
        .unwrap();
    let (code, message) = broker_error(&again[&topic]);
    assert_eq!(code, ErrorCode::TOPIC_ALREADY_EXISTS);
    assert!(
        message.contains(&topic) && message.contains("already exists"),
        "{message}"
    );
    let wide = unique_topic("admin-too-wide");
    let too_wide = admin
        .create_topics(
            [NewTopic::new(&wide).partitions(1).replication_factor(5)],
            false,
        )
        .await
        .unwrap();
    let (code, message) = broker_error(&too_wide[&wide]);
    assert_eq!(code, ErrorCode::INVALID_REPLICATION_FACTOR);
    assert!(message.contains('5') && message.contains('3'), "{message}");
    let display = too_wide[&wide].as_ref().unwrap_err().to_string();
    assert!(
        display.contains("INVALID_REPLICATION_FACTOR") && display.contains(&message),
        "{display}"
    );

    // More partitions; fewer is refused.
    let grown = admin.create_partitions([(&topic, 5)], false).await.unwrap();
    assert!(grown[&topic].is_ok(), "{grown:?}");
    described_once(&admin, &topic, |d| d.partitions.len() == 5).await;
    let shrunk = admin.create_partitions([(&topic, 2)], false).await.unwrap();
    assert_eq!(
        broker_error(&shrunk[&topic]).0,
        ErrorCode::INVALID_PARTITIONS
    );

    // Deleted: gone from the listing and from the metadata.
    let deleted = admin.delete_topics([&topic]).await.unwrap();
    assert!(deleted[&topic].is_ok(), "{deleted:?}");
    let started = Instant::now();
    loop {
        let described = admin.describe_topics([&topic]).await.unwrap();
        match &described[&topic] {
            Err(exactly::Error::Broker { code, .. })
                if *code == ErrorCode::UNKNOWN_TOPIC_OR_PARTITION =>
            {
                break;
            }
            other => assert!(started.elapsed() < WAIT, "still there: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let missing = admin.delete_topics([&topic]).await.unwrap();
    assert_eq!(
        broker_error(&missing[&topic]).0,
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
    );
}

/// One partition row of `kafka-consumer-groups --describe`: committed, end, lag.
#[derive(Debug, PartialEq, Eq)]
struct JavaLag {
    committed: i64,
    end: i64,
    lag: i64,
}

/// `kafka-consumer-groups --describe` for `group`'s partitions of `topic`.
fn java_group_lag(cluster: &Cluster, group: &str, topic: &str) -> BTreeMap<i32, JavaLag> {
    cluster
        .group_rows(group, topic)
        .iter()
        .filter_map(|columns| {
            if columns.len() < 6 {
                return None;
            }
            Some((
                columns[2].parse().ok()?,
                JavaLag {
                    committed: columns[3].parse().ok()?,
                    end: columns[4].parse().ok()?,
                    lag: columns[5].parse().ok()?,
                },
            ))
        })
        .collect()
}

/// Polls `consumer` until it has read `count` records, each (partition, offset) recorded.
async fn read(consumer: &mut exactly::Consumer, count: usize) -> Vec<(i32, i64)> {
    let mut got = Vec::new();
    let started = Instant::now();
    while got.len() < count {
        assert!(
            started.elapsed() < WAIT,
            "read {} of {count}: {got:?}",
            got.len()
        );
        if let Some(ConsumerEvent::Records(records)) = consumer
            .poll_timeout(Duration::from_millis(500))
            .await
            .unwrap()
        {
            got.extend(records.iter().map(|r| (r.partition, r.offset)));
        }
    }
    got
}

async fn group_offsets_and_lag(cluster: Cluster, protocol: GroupProtocol) {
    let _g = cluster.shared();
    let admin = cluster.admin().await;
    let topic = unique_topic("admin-lag");
    let group = unique_topic("admin-group");
    admin_create_topic(&admin, &topic, 2, 1).await;
    let producer = support::producer_with(&cluster, &[], &[]).await;
    for (partition, count) in [(0, 10), (1, 6)] {
        for i in 0..count {
            let record = Record::to(topic.as_str())
                .partition(partition)
                .value(format!("v{i}"));
            producer.send(record).await.unwrap().await.unwrap();
        }
    }
    producer.close().await.unwrap();

    // Our consumer reads everything and commits known offsets: 7 of 10 and 4 of 6.
    let mut consumer = consumer_with(
        &cluster,
        &group,
        protocol,
        OffsetReset::Earliest,
        IsolationLevel::ReadCommitted,
        &topic,
        &[],
    )
    .await;
    read(&mut consumer, 16).await;
    let tp = |p| TopicPartition::new(topic.as_str(), p);
    consumer
        .commit(&[OffsetToCommit::new(tp(0), 7), OffsetToCommit::new(tp(1), 4)])
        .await
        .unwrap();

    // Listed with its type, described with its member and assignment.
    let expected_type = match protocol {
        GroupProtocol::Consumer => GroupType::Consumer,
        _ => GroupType::Classic,
    };
    let listed = admin.list_groups().await.unwrap();
    let listing = listed.iter().find(|g| g.group_id == group).expect("listed");
    assert_eq!(listing.group_type, expected_type);
    let described = admin.describe_groups([&group]).await.unwrap();
    let description = described[&group].as_ref().expect("described");
    assert_eq!(description.group_type, expected_type);
    assert_eq!(description.state, "Stable");
    assert_eq!(description.members.len(), 1, "{description:?}");
    let mut assigned = description.members[0].assignment.clone();
    assigned.sort();
    assert_eq!(assigned, vec![tp(0), tp(1)]);
    assert_eq!(
        description.coordinator,
        admin.group_coordinator(&group).await.unwrap()
    );

    // Committed offsets and lag, as Kafka's own tool prints them.
    let committed = admin.list_group_offsets(&group).await.unwrap();
    let committed: BTreeMap<i32, i64> = committed
        .iter()
        .map(|(tp, c)| (tp.partition, c.offset))
        .collect();
    assert_eq!(committed, BTreeMap::from([(0, 7), (1, 4)]));
    let ends = admin
        .list_offsets(
            [(tp(0), OffsetSpec::Latest), (tp(1), OffsetSpec::Latest)],
            IsolationLevel::ReadUncommitted,
        )
        .await
        .unwrap();
    let java = java_group_lag(&cluster, &group, &topic);
    for (partition, committed) in &committed {
        let end = ends[&tp(*partition)].as_ref().unwrap().offset;
        let ours = JavaLag {
            committed: *committed,
            end,
            lag: end - committed,
        };
        assert_eq!(java.get(partition), Some(&ours), "{java:?}");
    }
    let earliest = admin
        .list_offsets(
            [(tp(0), OffsetSpec::Earliest)],
            IsolationLevel::ReadUncommitted,
        )
        .await
        .unwrap();
    assert_eq!(earliest[&tp(0)].as_ref().unwrap().offset, 0);

    // Moving a live group's offsets is refused, typed.
    let refused = admin
        .alter_group_offsets(&group, [(tp(0), 2)])
        .await
        .unwrap();
    let (code, message) = broker_error(&refused[&tp(0)]);
    assert_eq!(code, ErrorCode::UNKNOWN_MEMBER_ID, "{message}");
    assert!(message.contains("empty"), "{message}");
    consumer.close().await.unwrap();

    // Once empty: moved, seen by Kafka's tool, and a new member starts there.
    let started = Instant::now();
    let moved = loop {
        let moved = admin
            .alter_group_offsets(&group, [(tp(0), 2), (tp(1), 1)])
            .await
            .unwrap();
        if moved.values().all(Result::is_ok) || started.elapsed() > WAIT {
            break moved;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(moved.values().all(Result::is_ok), "{moved:?}");
    assert_eq!(
        cluster.group_offsets(&group, &topic),
        BTreeMap::from([(0, 2), (1, 1)])
    );
    let mut next = consumer_with(
        &cluster,
        &group,
        protocol,
        OffsetReset::Earliest,
        IsolationLevel::ReadCommitted,
        &topic,
        &[],
    )
    .await;
    let mut first: BTreeMap<i32, i64> = BTreeMap::new();
    for (partition, offset) in read(&mut next, 13).await {
        first.entry(partition).or_insert(offset);
    }
    assert_eq!(first, BTreeMap::from([(0, 2), (1, 1)]));
    next.close().await.unwrap();

    // Offsets deleted for one partition, then the whole group.
    let deleted = admin.delete_group_offsets(&group, [tp(1)]).await.unwrap();
    assert!(deleted[&tp(1)].is_ok(), "{deleted:?}");
    let left: Vec<i32> = admin
        .list_group_offsets(&group)
        .await
        .unwrap()
        .keys()
        .map(|tp| tp.partition)
        .collect();
    assert_eq!(left, vec![0]);
    let deleted = admin.delete_groups([&group]).await.unwrap();
    assert!(deleted[&group].is_ok(), "{deleted:?}");
    assert!(
        !admin
            .list_groups()
            .await
            .unwrap()
            .iter()
            .any(|g| g.group_id == group)
    );
    let again = admin.delete_groups([&group]).await.unwrap();
    assert_eq!(
        broker_error(&again[&group]).0,
        ErrorCode::GROUP_ID_NOT_FOUND
    );
    let gone = admin.describe_groups([&group]).await.unwrap();
    let (code, message) = broker_error(&gone[&group]);
    assert_eq!(code, ErrorCode::GROUP_ID_NOT_FOUND);
    assert!(
        message.contains(&group) && message.contains("not found"),
        "{message}"
    );
    admin.delete_topics([&topic]).await.unwrap();
}

on_both_protocols!(group_offsets_and_lag, single);

/// Kafka's own `GetOffsetShell` answer for `topic`'s partition 0 at `time` (-2: earliest,
/// -1: latest, else a timestamp).
fn java_offset(cluster: &Cluster, topic: &str, time: i64) -> Option<i64> {
    let time = time.to_string();
    let out = cluster.kafka_tool(
        "org.apache.kafka.tools.GetOffsetShell",
        &["--topic", topic, "--time", &time],
    );
    // topic:partition:offset, one line per partition (none when no record is that late).
    out.lines().find_map(|line| {
        line.strip_prefix(&format!("{topic}:0:"))?
            .trim()
            .parse()
            .ok()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_offsets_by_time_and_delete_records() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _g = cluster.shared();
    let admin = cluster.admin().await;
    let topic = unique_topic("admin-offsets");
    admin_create_topic(&admin, &topic, 1, 1).await;
    let base = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        - 60_000;
    let producer = support::producer_with(&cluster, &[], &[]).await;
    for i in 0..6 {
        let record = Record::to(topic.as_str())
            .partition(0)
            .timestamp(base + i * 1000)
            .value(format!("v{i}"));
        producer.send(record).await.unwrap().await.unwrap();
    }
    producer.close().await.unwrap();
    let tp = TopicPartition::new(topic.as_str(), 0);

    // By timestamp: the first record at or after it, as GetOffsetShell finds it.
    let found = admin
        .list_offsets(
            [(tp.clone(), OffsetSpec::Timestamp(base + 2500))],
            IsolationLevel::ReadUncommitted,
        )
        .await
        .unwrap();
    let found = found[&tp].as_ref().unwrap();
    assert_eq!((found.offset, found.timestamp), (3, base + 3000));
    assert_eq!(java_offset(&cluster, &topic, base + 2500), Some(3));
    let too_late = admin
        .list_offsets(
            [(tp.clone(), OffsetSpec::Timestamp(base + 60_000))],
            IsolationLevel::ReadUncommitted,
        )
        .await
        .unwrap();
    assert_eq!(too_late[&tp].as_ref().unwrap().offset, -1);

    // A clone on another task shares the connections (the calls are Send).
    let latest = tokio::spawn({
        let admin = admin.clone();
        let tp = tp.clone();
        async move {
            admin
                .list_offsets([(tp, OffsetSpec::Latest)], IsolationLevel::ReadCommitted)
                .await
        }
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(latest[&tp].as_ref().unwrap().offset, 6);

    // Records before offset 3 deleted: the log starts there for Kafka's tools and kcat.
    let deleted = admin.delete_records([(tp.clone(), 3)]).await.unwrap();
    assert_eq!(deleted[&tp].as_ref().ok(), Some(&3), "{deleted:?}");
    let earliest = admin
        .list_offsets(
            [(tp.clone(), OffsetSpec::Earliest)],
            IsolationLevel::ReadUncommitted,
        )
        .await
        .unwrap();
    assert_eq!(earliest[&tp].as_ref().unwrap().offset, 3);
    assert_eq!(java_offset(&cluster, &topic, -2), Some(3));
    let offsets: Vec<i64> = cluster
        .read_topic(&topic, support::Isolation::ReadUncommitted)
        .iter()
        .map(|r| r.offset)
        .collect();
    assert_eq!(offsets, [3, 4, 5]);

    // A partition that does not exist: its own typed result.
    let missing = TopicPartition::new(topic.as_str(), 7);
    let refused = admin.delete_records([(missing.clone(), 1)]).await.unwrap();
    assert_eq!(
        broker_error(&refused[&missing]).0,
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
    );
    admin.delete_topics([&topic]).await.unwrap();
}

/// The admin client over the SASL_SSL listener, configured from Kafka properties as the
/// clients are: a topic it creates is in kcat's metadata over plaintext; a wrong password is
/// a prompt, fatal authentication error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_over_sasl_ssl_from_properties() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let var = |name: &str| std::env::var(name).ok();
    let (Some(listener), Some(ca), Some(user), Some(password)) = (
        var("KAFKA_SASL_SSL_BOOTSTRAP"),
        var("KAFKA_TLS_CA"),
        var("KAFKA_SASL_USERNAME"),
        var("KAFKA_SASL_PASSWORD"),
    ) else {
        assert!(
            !support::in_ci(),
            "CI=true but the SASL_SSL listener is not up"
        );
        eprintln!("SKIPPED: no SASL_SSL listener; eval \"$(scripts/testbed up)\" first");
        return;
    };
    let _g = cluster.shared();
    let properties = |password: &str| {
        vec![
            ("bootstrap.servers".to_owned(), listener.clone()),
            ("security.protocol".to_owned(), "SASL_SSL".to_owned()),
            ("ssl.truststore.type".to_owned(), "PEM".to_owned()),
            ("ssl.truststore.location".to_owned(), ca.clone()),
            ("sasl.mechanism".to_owned(), "SCRAM-SHA-512".to_owned()),
            ("sasl.username".to_owned(), user.clone()),
            ("sasl.password".to_owned(), password.to_owned()),
            ("default.api.timeout.ms".to_owned(), "20000".to_owned()),
        ]
    };
    let admin = Admin::from_properties(properties(&password))
        .await
        .expect("admin over SASL_SSL");
    let topic = unique_topic("admin-sasl");
    admin_create_topic(&admin, &topic, 1, 1).await;
    assert!(support::kcat_partition_leader(&cluster.bootstrap, &topic, 0) >= 0);
    admin.delete_topics([&topic]).await.unwrap();

    let started = Instant::now();
    let refused = Admin::from_properties(properties("not-the-password")).await;
    assert!(started.elapsed() < Duration::from_secs(5), "prompt");
    let error = refused.expect_err("a wrong password is refused");
    assert!(error.is_fatal(), "{error:?}");
    assert!(
        !format!("{error:?}{error}").contains("not-the-password"),
        "no password in errors"
    );
}

/// The group's coordinator killed: the next call finds the new one (NOT_COORDINATOR or
/// COORDINATOR_NOT_AVAILABLE while the offsets partition moves, then COORDINATOR_LOAD_IN_PROGRESS)
/// and answers within its deadline, with the offsets committed before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_follows_a_group_coordinator_that_moved() {
    let Some(cluster) = Cluster::three() else {
        return;
    };
    let _exclusive = cluster.exclusive();
    let admin = cluster.admin().await;
    let topic = unique_topic("admin-moved");
    let group = unique_topic("admin-moved-group");
    admin_create_topic(&admin, &topic, 1, 3).await;
    let tp = TopicPartition::new(topic.as_str(), 0);
    described_once(&admin, &topic, |d| d.partitions[0].leader.is_some()).await;
    // Every broker in sync on the offsets topic first (a broker restarted by an earlier test
    // may still be catching up), so the commit is on the replica that takes over. On a fresh
    // cluster the offsets topic does not exist until a group coordinator is first looked up
    // (the broker creates it then), so the lookup comes first.
    admin.group_coordinator(&group).await.unwrap();
    let in_sync = |d: &exactly::TopicDescription| d.partitions.iter().all(|p| p.isr.len() == 3);
    described_once(&admin, "__consumer_offsets", in_sync).await;
    let moved = admin
        .alter_group_offsets(&group, [(tp.clone(), 0)])
        .await
        .unwrap();
    assert!(moved[&tp].is_ok(), "{moved:?}");
    let before = admin.group_coordinator(&group).await.unwrap();
    // Node ids are 1-based; broker indexes 0-based.
    let victim = usize::try_from(before - 1).unwrap();
    cluster.stop_broker(victim, true);
    let patient = admin.with_timeout(Duration::from_secs(90));
    // The first call after the kill follows the coordinator and answers. Right after the
    // failover its answer sometimes lacks the commit (seen on Kafka 4.1 in about one run in
    // five; likely because the new coordinator serves what its partition's high watermark
    // covers, which catches up once the remaining follower fetches), so the offset is asked
    // for again, bounded, each call answered.
    let started = Instant::now();
    let mut offsets = patient.list_group_offsets(&group).await;
    while matches!(&offsets, Ok(o) if o.get(&tp).is_none()) && started.elapsed() < WAIT {
        tokio::time::sleep(Duration::from_millis(200)).await;
        offsets = patient.list_group_offsets(&group).await;
    }
    let after = patient.group_coordinator(&group).await;
    cluster.start_broker(victim);
    let offsets = offsets.expect("offsets from the new coordinator");
    assert_eq!(offsets.get(&tp).map(|c| c.offset), Some(0));
    let after = after.unwrap();
    assert_ne!(after, before, "a new coordinator");
    admin.delete_groups([&group]).await.unwrap();
    admin.delete_topics([&topic]).await.unwrap();
}

/// A call that cannot finish within its deadline ends at the deadline, as Error::Timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_calls_end_at_their_deadline() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _g = cluster.exclusive();
    let admin = cluster.admin().await;
    let proxy = cluster.proxy(0);
    proxy.add_toxic("admin-stall", "timeout", "downstream", r#"{"timeout": 0}"#);
    let short = admin.with_timeout(Duration::from_secs(2));
    let started = Instant::now();
    let result = short.list_topics().await;
    let waited = started.elapsed();
    proxy.remove_toxic("admin-stall");
    assert!(
        matches!(
            result,
            Err(exactly::Error::Timeout(_)) | Err(exactly::Error::NoBrokerAnswered { .. })
        ),
        "{result:?}"
    );
    assert!(waited < Duration::from_secs(4), "took {waited:?}");
    assert!(
        admin.list_topics().await.is_ok(),
        "the full deadline still works"
    );
}

/// The `admin` example, built and run against the test bed: `topics` lists a topic we
/// created, `lag` prints a group's committed, end and lag columns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_example_runs() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _g = cluster.shared();
    let admin = cluster.admin().await;
    let topic = unique_topic("admin-example");
    let group = unique_topic("admin-example-group");
    admin_create_topic(&admin, &topic, 1, 1).await;
    let producer = support::producer_with(&cluster, &[], &[]).await;
    for i in 0..5 {
        let record = Record::to(topic.as_str())
            .partition(0)
            .value(format!("v{i}"));
        producer.send(record).await.unwrap().await.unwrap();
    }
    producer.close().await.unwrap();
    let tp = TopicPartition::new(topic.as_str(), 0);
    let moved = admin.alter_group_offsets(&group, [(tp, 3)]).await.unwrap();
    assert!(moved.values().all(Result::is_ok), "{moved:?}");

    let run = |args: &[&str]| cluster.run_admin_example(args);
    let topics = run(&["topics"]);
    assert!(topics.starts_with("TOPIC"), "{topics}");
    let row = topics
        .lines()
        .find(|l| l.split_whitespace().next() == Some(topic.as_str()))
        .unwrap_or_else(|| panic!("{topic} not listed:\n{topics}"));
    assert_eq!(row.split_whitespace().collect::<Vec<_>>()[1..], ["1", "1"]);
    assert!(!topics.contains("__consumer_offsets"), "{topics}");

    let lag = run(&["--bootstrap", &cluster.bootstrap, "lag", &group]);
    let mut lines = lag.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["TOPIC", "PARTITION", "COMMITTED", "END", "LAG"]);
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(row, [topic.as_str(), "0", "3", "5", "2"], "{lag}");
    assert!(lag.contains("total lag: 2"), "{lag}");
    admin.delete_groups([&group]).await.unwrap();
    admin.delete_topics([&topic]).await.unwrap();
}
