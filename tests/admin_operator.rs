//! The admin calls an operator runs a cluster with, against real Kafka with its
//! StandardAuthorizer (`scripts/testbed`): ACLs that refuse and then let a limited SASL user
//! in (checked with `kafka-acls --list` and kcat logged in as that user), DescribeCluster's
//! authorized operations, a client quota that throttles a producer (and `kafka-configs`
//! showing it), a SCRAM user made through `Admin` logging in (our client and Kafka's own
//! tools), preferred leader elections and a reassignment on three brokers (kcat's metadata
//! and `kafka-topics --describe`), log dirs against `kafka-log-dirs`, features against
//! `kafka-features`, and delegation tokens a Java client logs in with.
//!
//! Tests hold their cluster's lock across awaits on purpose (see `broker_failure.rs`).
#![allow(clippy::await_holding_lock)]

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use exactly::{
    AccessControlEntry, AclBinding, AclBindingFilter, AclOperation, AclPermission, Admin,
    ClientQuotaAlteration, ClientQuotaEntity, ClientQuotaFilter, ElectionType, ErrorCode,
    FeatureUpgrade, NewDelegationToken, PatternType, Producer, QuotaFilterComponent, Record,
    ResourcePattern, ResourceType, ScramCredentialAlteration, ScramMechanism, Secret,
    TopicPartition,
};
use support::{Cluster, Isolation, eventually, java_tool, kcat_partition_leader, unique_topic};

/// The longest a test waits for one expected thing.
const WAIT: Duration = Duration::from_secs(60);

/// The SASL_PLAINTEXT listener (no TLS) of the single-broker cluster and its users, from what
/// `scripts/testbed up` exports: the super user and the limited one.
struct SaslBed {
    bootstrap: String,
    super_user: (String, String),
    limited: (String, String),
}

impl SaslBed {
    /// `None` (a skip) when not exported, except under `CI=true`, where that is a failure.
    fn get() -> Option<SaslBed> {
        let var = |name: &str| std::env::var(name).ok();
        let bed = (|| {
            Some(SaslBed {
                bootstrap: var("KAFKA_SASL_PLAINTEXT_BOOTSTRAP")?,
                super_user: (var("KAFKA_SASL_USERNAME")?, var("KAFKA_SASL_PASSWORD")?),
                limited: (
                    var("KAFKA_SASL_LIMITED_USER")?,
                    var("KAFKA_SASL_LIMITED_PASSWORD")?,
                ),
            })
        })();
        if bed.is_none() {
            assert!(
                !support::in_ci(),
                "CI=true but the SASL_PLAINTEXT listener or its users are not exported"
            );
            eprintln!("SKIPPED: no SASL_PLAINTEXT listener; eval \"$(scripts/testbed up)\" first");
        }
        bed
    }

    /// Kafka client properties logging in as `user` with SCRAM-SHA-512 over this listener.
    fn properties(&self, (user, password): &(String, String)) -> Vec<(String, String)> {
        [
            ("bootstrap.servers", self.bootstrap.as_str()),
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", user),
            ("sasl.password", password),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    /// kcat's arguments logged in as `user` (PLAIN: Debian's librdkafka 2.0.2 cannot log in
    /// with SCRAM to Kafka 4.x, see tests/security.rs).
    fn kcat_args(&self, (user, password): &(String, String)) -> Vec<String> {
        [
            "security.protocol=SASL_PLAINTEXT".to_owned(),
            "sasl.mechanisms=PLAIN".into(),
            format!("sasl.username={user}"),
            format!("sasl.password={password}"),
        ]
        .into_iter()
        .flat_map(|setting| ["-X".to_owned(), setting])
        .collect()
    }
}

/// A Java client config file logging in with SCRAM-SHA-512 as `user`, with `extra` JAAS
/// options (`tokenauth=true` for a delegation token); removed when dropped.
struct JavaLogin(std::path::PathBuf);

impl JavaLogin {
    fn new(user: &str, password: &str, extra: &str) -> Self {
        let path = std::env::temp_dir().join(format!("{}.properties", unique_topic("login")));
        std::fs::write(
            &path,
            format!(
                "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n\
                 sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule \
                 required username=\"{user}\" password=\"{password}\"{extra};\n"
            ),
        )
        .expect("write the client config");
        JavaLogin(path)
    }

    /// Kafka's tool `class` run over `bootstrap` with this login: its exit and output.
    fn run(&self, bootstrap: &str, class: &str, args: &[&str]) -> std::process::Output {
        let mut all = vec![
            class.to_owned(),
            "--bootstrap-server".into(),
            bootstrap.to_owned(),
            "--command-config".into(),
            self.0.display().to_string(),
        ];
        all.extend(args.iter().map(|a| a.to_string()));
        java_tool(&all)
            .stdin(Stdio::null())
            .output()
            .expect("java runs")
    }
}

impl Drop for JavaLogin {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Fails the test unless `result` is the broker's refusal with `code`.
fn assert_refused<T: std::fmt::Debug>(result: &exactly::Result<T>, code: ErrorCode) {
    assert!(
        matches!(result, Err(exactly::Error::Broker { code: c, .. }) if *c == code),
        "expected {code}, got {result:?}"
    );
}

/// `kafka-acls --list` for the topic `topic`.
fn java_acls(cluster: &Cluster, topic: &str) -> String {
    cluster.kafka_tool(
        "org.apache.kafka.tools.AclCommand",
        &["--list", "--topic", topic],
    )
}

/// How `kafka-acls --list` prints one entry.
fn java_acl_line(principal: &str, operation: &str, permission: &str) -> String {
    format!("(principal={principal}, host=*, operation={operation}, permissionType={permission})")
}

/// ACLs created through `Admin` are the ones `kafka-acls --list` shows, described back by
/// filters, an invalid one refused alone with the broker's reason, and deleted by a filter
/// (only what it matches).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_create_describe_delete() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let admin = cluster.admin().await;
    let topic = unique_topic("acls");
    let group = unique_topic("acls-group");
    let on_topic = ResourcePattern::literal(ResourceType::Topic, topic.as_str());
    let bindings = vec![
        AclBinding::new(
            on_topic.clone(),
            AccessControlEntry::allow("User:bob", AclOperation::Write),
        ),
        AclBinding::new(
            on_topic.clone(),
            AccessControlEntry::allow("User:bob", AclOperation::Describe),
        ),
        AclBinding::new(
            on_topic.clone(),
            AccessControlEntry::deny("User:carol", AclOperation::Read),
        ),
        AclBinding::new(
            ResourcePattern::prefixed(ResourceType::Group, group.as_str()),
            AccessControlEntry::allow("User:bob", AclOperation::Read),
        ),
    ];
    let created = admin
        .create_acls(bindings.clone())
        .await
        .expect("CreateAcls");
    assert_eq!(created.len(), 4);
    for (binding, result) in &created {
        assert!(result.is_ok(), "{binding:?}: {result:?}");
    }

    // Kafka's own tool lists the same three on the topic.
    let listed = java_acls(&cluster, &topic);
    for line in [
        java_acl_line("User:bob", "WRITE", "ALLOW"),
        java_acl_line("User:bob", "DESCRIBE", "ALLOW"),
        java_acl_line("User:carol", "READ", "DENY"),
    ] {
        assert!(listed.contains(&line), "{line} missing from {listed}");
    }
    let on_topic_filter = AclBindingFilter::default().resource(ResourceType::Topic, topic.as_str());
    let described = admin
        .describe_acls(&on_topic_filter)
        .await
        .expect("DescribeAcls");
    let mut expected = bindings[..3].to_vec();
    expected.sort();
    assert_eq!(described, expected);
    let denies = admin
        .describe_acls(&on_topic_filter.clone().permission(AclPermission::Deny))
        .await
        .expect("DescribeAcls");
    assert_eq!(denies, [bindings[2].clone()]);
    // The prefixed group ACL applies to a group named with the prefix (PatternType::Match).
    let matching = AclBindingFilter::default()
        .resource(ResourceType::Group, format!("{group}-member"))
        .pattern_type(PatternType::Match);
    assert_eq!(
        admin.describe_acls(&matching).await.expect("DescribeAcls"),
        [bindings[3].clone()]
    );

    // An ACL with an "any" operation cannot be created: refused (Kafka 4.1's controller
    // answers UNKNOWN_SERVER_ERROR, and for every other ACL of the same request too).
    let invalid = AclBinding::new(
        on_topic.clone(),
        AccessControlEntry::allow("User:bob", AclOperation::Any),
    );
    let refused = admin.create_acls([invalid]).await.expect("CreateAcls");
    assert!(
        matches!(&refused[0].1, Err(exactly::Error::Broker { .. })),
        "{refused:?}"
    );

    // Bob's two go; carol's stays.
    let deleted = admin
        .delete_acls([on_topic_filter.clone().principal("User:bob")])
        .await
        .expect("DeleteAcls");
    let gone: Vec<AclBinding> = deleted[0]
        .1
        .as_ref()
        .expect("deleted")
        .iter()
        .map(|(binding, result)| {
            assert!(result.is_ok(), "{binding:?}: {result:?}");
            binding.clone()
        })
        .collect();
    let mut bobs = bindings[..2].to_vec();
    bobs.sort();
    let mut gone_sorted = gone;
    gone_sorted.sort();
    assert_eq!(gone_sorted, bobs);
    let listed = java_acls(&cluster, &topic);
    assert!(!listed.contains("User:bob"), "{listed}");
    assert!(
        listed.contains(&java_acl_line("User:carol", "READ", "DENY")),
        "{listed}"
    );
    admin
        .delete_acls([on_topic_filter, bindings[3].to_filter()])
        .await
        .expect("DeleteAcls");
    assert!(
        admin
            .describe_acls(&AclBindingFilter::default().principal("User:carol"))
            .await
            .unwrap()
            .iter()
            .all(|b| b.pattern.name != topic)
    );
}

/// kcat as the limited user `user` reading `topic` to its end: what it read, or what it
/// printed when refused.
fn kcat_read_as(bed: &SaslBed, topic: &str) -> Result<Vec<String>, String> {
    let mut child = Command::new("kcat")
        .args([
            "-C",
            "-b",
            &bed.bootstrap,
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-q",
        ])
        .args(bed.kcat_args(&bed.limited))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat runs");
    let deadline = Instant::now() + WAIT;
    while child.try_wait().expect("kcat").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().expect("kcat exits");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() && stderr.is_empty() {
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect())
    } else {
        Err(stderr)
    }
}

/// A principal without ACLs (the limited SASL user) is refused TOPIC_AUTHORIZATION_FAILED on
/// produce (our producer) and consume (kcat logged in as the same user); ACLs added through
/// `Admin` let the same producer send and the same user read what it sent. DescribeCluster's
/// authorized operations follow the ACLs too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_denies_then_allows() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let Some(bed) = SaslBed::get() else {
        return;
    };
    let _shared = cluster.shared();
    let admin = cluster.admin().await;
    let topic = unique_topic("acl-refused");
    support::admin_create_topic(&admin, &topic, 1, 1).await;
    let principal = format!("User:{}", bed.limited.0);

    let mut properties = bed.properties(&bed.limited);
    properties.push(("max.block.ms".into(), "5000".into()));
    properties.push(("request.timeout.ms".into(), "3000".into()));
    // The producer keeps a topic's TOPIC_AUTHORIZATION_FAILED from its metadata until the
    // next refresh, so it learns of the new ACLs at the next one: soon.
    properties.push(("metadata.max.age.ms".into(), "1000".into()));
    properties.push(("delivery.timeout.ms".into(), "10000".into()));
    let producer = Producer::from_properties(properties)
        .await
        .expect("the limited user logs in");
    let refused = match producer.send(Record::to(&topic).value("refused")).await {
        Ok(delivery) => delivery.await.map(|_| ()),
        Err(e) => Err(e),
    };
    let refusal = format!("{:?}", refused.expect_err("no ACL: refused"));
    assert!(refusal.contains("TOPIC_AUTHORIZATION_FAILED"), "{refusal}");
    let stderr = kcat_read_as(&bed, &topic).expect_err("no ACL: kcat is refused");
    assert!(stderr.contains("Topic authorization failed"), "{stderr}");
    let limited = Admin::from_properties(bed.properties(&bed.limited))
        .await
        .expect("admin as the limited user");
    // No right on the cluster (a cluster ACL an interrupted earlier run left is removed).
    let cluster_describe = AclBinding::new(
        ResourcePattern::cluster(),
        AccessControlEntry::allow(principal.as_str(), AclOperation::Describe),
    );
    admin
        .delete_acls([cluster_describe.to_filter()])
        .await
        .expect("DeleteAcls");
    eventually("the limited user has no cluster right", WAIT, || async {
        let view = limited.describe_cluster().await.expect("DescribeCluster");
        view.authorized_operations == Some(vec![])
    })
    .await;
    let cluster_view = limited.describe_cluster().await.expect("DescribeCluster");
    assert!(
        !cluster_view.topics.contains_key(&topic),
        "the topic is not even described"
    );

    let on_topic = ResourcePattern::literal(ResourceType::Topic, topic.as_str());
    let grants = [
        AclOperation::Write,
        AclOperation::Read,
        AclOperation::Describe,
    ]
    .map(|op| {
        AclBinding::new(
            on_topic.clone(),
            AccessControlEntry::allow(principal.as_str(), op),
        )
    });
    let mut all = grants.to_vec();
    all.push(cluster_describe.clone());
    for (binding, result) in admin.create_acls(all).await.expect("CreateAcls") {
        assert!(result.is_ok(), "{binding:?}: {result:?}");
    }
    let listed = java_acls(&cluster, &topic);
    for operation in ["WRITE", "READ", "DESCRIBE"] {
        assert!(
            listed.contains(&java_acl_line(&principal, operation, "ALLOW")),
            "{listed}"
        );
    }

    // The same producer, the same user: now it may (ACLs reach the authorizer through the
    // metadata log, so the first sends may still be refused).
    eventually("the producer is let in", WAIT, || async {
        match producer.send(Record::to(&topic).value("allowed")).await {
            Ok(delivery) => delivery.await.is_ok(),
            Err(_) => false,
        }
    })
    .await;
    producer.close().await.expect("close");
    let read = kcat_read_as(&bed, &topic).expect("kcat reads as the limited user");
    assert!(
        !read.is_empty() && read.iter().all(|v| v == "allowed"),
        "{read:?}"
    );
    assert!(
        !cluster
            .read_values(&topic, Isolation::ReadUncommitted)
            .contains(&"refused".to_owned())
    );
    eventually(
        "the limited user may describe the cluster",
        WAIT,
        || async {
            let view = limited.describe_cluster().await.expect("DescribeCluster");
            view.authorized_operations == Some(vec![AclOperation::Describe])
        },
    )
    .await;
    let view = limited.describe_cluster().await.expect("DescribeCluster");
    assert!(view.topics.contains_key(&topic));
    let every = admin.describe_cluster().await.expect("DescribeCluster");
    let ops = every.authorized_operations.clone().expect("asked");
    for op in [
        AclOperation::Alter,
        AclOperation::ClusterAction,
        AclOperation::Describe,
    ] {
        assert!(ops.contains(&op), "the super user lacks {op:?}: {ops:?}");
    }
    assert!(
        every
            .controller
            .is_some_and(|c| every.brokers.contains_key(&c)),
        "{every:?}"
    );
    admin
        .delete_acls([cluster_describe.to_filter()])
        .await
        .expect("DeleteAcls");
}

/// A `producer_byte_rate` quota set through `Admin` is the one `kafka-configs --describe`
/// shows and `describe_client_quotas` reads back, and it throttles a producer with that client
/// id measurably (the broker's throttle time and the run's length); removed, it is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_quotas_roundtrip() {
    // Kafka measures the rate over about ten one-second samples, so a run must exceed ten
    // seconds' worth of the quota to be throttled: 1 MiB at 64 KiB/s (as tests/metrics.rs).
    const RATE: f64 = 65536.0;
    const RECORDS: usize = 1024;
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let admin = cluster.admin().await;
    let topic = unique_topic("quota");
    support::admin_create_topic(&admin, &topic, 1, 1).await;
    let client_id = unique_topic("quoted");
    let entity = ClientQuotaEntity::client_id(client_id.as_str());

    let checked = admin
        .alter_client_quotas(
            [ClientQuotaAlteration::new(entity.clone()).set("producer_byte_rate", RATE)],
            true,
        )
        .await
        .expect("AlterClientQuotas");
    assert!(checked[&entity].is_ok(), "{checked:?}");
    let filter = ClientQuotaFilter::all().containing(QuotaFilterComponent::Exact(
        "client-id".into(),
        client_id.clone(),
    ));
    assert!(
        admin
            .describe_client_quotas(&filter)
            .await
            .unwrap()
            .is_empty(),
        "validate only"
    );
    let set = admin
        .alter_client_quotas(
            [ClientQuotaAlteration::new(entity.clone()).set("producer_byte_rate", RATE)],
            false,
        )
        .await
        .expect("AlterClientQuotas");
    assert!(set[&entity].is_ok(), "{set:?}");
    let bad = admin
        .alter_client_quotas(
            [ClientQuotaAlteration::new(entity.clone()).set("no_such_quota", 1.0)],
            false,
        )
        .await
        .expect("AlterClientQuotas");
    assert_refused(&bad[&entity], ErrorCode::INVALID_REQUEST);
    // Quotas reach the brokers through the metadata log.
    eventually("the quota is described", WAIT, || async {
        let described = admin
            .describe_client_quotas(&filter)
            .await
            .expect("describe");
        described
            .get(&entity)
            .and_then(|q| q.get("producer_byte_rate"))
            == Some(&RATE)
    })
    .await;
    let java = cluster.kafka_tool(
        "kafka.admin.ConfigCommand",
        &[
            "--describe",
            "--entity-type",
            "clients",
            "--entity-name",
            &client_id,
        ],
    );
    assert!(java.contains("producer_byte_rate=65536.0"), "{java}");

    tokio::time::sleep(Duration::from_secs(1)).await;
    let producer = Producer::from_properties([
        ("bootstrap.servers", cluster.bootstrap.as_str()),
        ("client.id", client_id.as_str()),
        ("batch.size", "65536"),
        ("linger.ms", "5"),
        ("request.timeout.ms", "30000"),
        ("delivery.timeout.ms", "120000"),
    ])
    .await
    .expect("producer");
    let padding = "x".repeat(1000);
    let started = Instant::now();
    let mut deliveries = Vec::new();
    for n in 0..RECORDS {
        deliveries.push(
            producer
                .send(Record::to(&topic).value(format!("{n}{padding}")))
                .await
                .expect("send"),
        );
    }
    for delivery in deliveries {
        delivery.await.expect("delivered");
    }
    let took = started.elapsed();
    let metrics = producer.metrics();
    producer.close().await.expect("close");
    assert!(
        metrics.produce_throttle_time_max_ms > 0,
        "not throttled: {metrics:?}"
    );
    assert!(
        took >= Duration::from_secs(3),
        "1 MiB in {took:?}: the quota did not apply"
    );
    println!(
        "1 MiB under a 64 KiB/s quota in {took:?}, throttled up to {} ms",
        metrics.produce_throttle_time_max_ms
    );

    let removed = admin
        .alter_client_quotas(
            [ClientQuotaAlteration::new(entity.clone()).remove("producer_byte_rate")],
            false,
        )
        .await
        .expect("AlterClientQuotas");
    assert!(removed[&entity].is_ok(), "{removed:?}");
    eventually("the quota is gone", WAIT, || async {
        admin
            .describe_client_quotas(&filter)
            .await
            .is_ok_and(|q| q.is_empty())
    })
    .await;
}

/// A SCRAM-SHA-512 user made through `Admin` (salted here, the password never sent) is what
/// `kafka-configs --describe --entity-type users` shows; it logs in with our client and with
/// Kafka's own tools over the SASL_PLAINTEXT listener; once its credential is deleted, the
/// login is refused promptly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_user_create_then_login() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let Some(bed) = SaslBed::get() else {
        return;
    };
    let _shared = cluster.shared();
    let admin = cluster.admin().await;
    let user = unique_topic("scram-user");
    let password = "a-password-of-theirs";
    let upsert = ScramCredentialAlteration::upsert(
        user.as_str(),
        ScramMechanism::Sha512,
        8192,
        &Secret::from(password),
    )
    .expect("salted");
    assert!(!format!("{upsert:?}").contains(password));
    let altered = admin
        .alter_user_scram_credentials([upsert])
        .await
        .expect("AlterUserScramCredentials");
    assert!(altered[&user].is_ok(), "{altered:?}");
    let described = admin
        .describe_user_scram_credentials(Some(vec![user.clone()]))
        .await
        .expect("describe");
    let credentials = described[&user].as_ref().expect("described");
    assert_eq!(credentials.len(), 1);
    assert_eq!(
        (credentials[0].mechanism, credentials[0].iterations),
        (ScramMechanism::Sha512, 8192)
    );
    let java = cluster.kafka_tool(
        "kafka.admin.ConfigCommand",
        &[
            "--describe",
            "--entity-type",
            "users",
            "--entity-name",
            &user,
        ],
    );
    assert!(java.contains("SCRAM-SHA-512=iterations=8192"), "{java}");
    // Too few iterations: Kafka's own limit.
    let weak = ScramCredentialAlteration::upsert(
        user.as_str(),
        ScramMechanism::Sha256,
        1000,
        &Secret::from(password),
    )
    .unwrap();
    let refused = admin
        .alter_user_scram_credentials([weak])
        .await
        .expect("answered");
    assert_refused(&refused[&user], ErrorCode::UNACCEPTABLE_CREDENTIAL);

    let login = (user.clone(), password.to_owned());
    let ours = Admin::from_properties(bed.properties(&login))
        .await
        .expect("our client logs in as the new user");
    assert_eq!(
        ours.describe_cluster()
            .await
            .expect("described")
            .authorized_operations,
        Some(vec![])
    );
    let java_login = JavaLogin::new(&user, password, "");
    let out = java_login.run(
        &bed.bootstrap,
        "org.apache.kafka.tools.TopicCommand",
        &["--list"],
    );
    assert!(
        out.status.success(),
        "Kafka's tool could not log in: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let deleted = admin
        .alter_user_scram_credentials([ScramCredentialAlteration::delete(
            user.as_str(),
            ScramMechanism::Sha512,
        )])
        .await
        .expect("answered");
    assert!(deleted[&user].is_ok(), "{deleted:?}");
    let gone = admin
        .describe_user_scram_credentials(Some(vec![user.clone()]))
        .await
        .expect("describe");
    assert_refused(&gone[&user], ErrorCode::RESOURCE_NOT_FOUND);
    let started = Instant::now();
    let mut refused = None;
    // The deletion reaches the broker through the metadata log.
    while started.elapsed() < WAIT {
        match Admin::from_properties(bed.properties(&login)).await {
            Ok(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let refused = refused.expect("the deleted credential stops logging in");
    assert!(refused.is_fatal(), "{refused:?}");
}

/// A partition whose preferred leader does not lead (its replicas reordered by a
/// reassignment, which keeps the leader) gets it back through a preferred election, as kcat's
/// metadata shows; a second election is not needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elect_preferred_leaders() {
    let Some(cluster) = Cluster::three() else {
        return;
    };
    let _shared = cluster.shared();
    let admin = cluster.admin().await;
    let topic = unique_topic("elect");
    cluster.kafka_tool(
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--create",
            "--topic",
            &topic,
            "--replica-assignment",
            "1:2:3",
        ],
    );
    let tp = TopicPartition::new(topic.as_str(), 0);
    eventually("broker 1 leads", WAIT, || async {
        kcat_partition_leader(&cluster.bootstrap, &topic, 0) == 1
    })
    .await;
    let reordered = admin
        .alter_partition_reassignments([(tp.clone(), Some(vec![2, 1, 3]))])
        .await
        .expect("AlterPartitionReassignments");
    assert!(reordered[&tp].is_ok(), "{reordered:?}");
    eventually("the reassignment completes", WAIT, || async {
        admin
            .list_partition_reassignments(Some(vec![tp.clone()]))
            .await
            .is_ok_and(|r| r.is_empty())
    })
    .await;
    assert_eq!(
        kcat_partition_leader(&cluster.bootstrap, &topic, 0),
        1,
        "a reorder keeps the leader"
    );

    let elected = admin
        .elect_leaders(ElectionType::Preferred, Some(vec![tp.clone()]))
        .await
        .expect("ElectLeaders");
    assert!(elected[&tp].is_ok(), "{elected:?}");
    eventually("the preferred replica leads", WAIT, || async {
        kcat_partition_leader(&cluster.bootstrap, &topic, 0) == 2
    })
    .await;
    let again = admin
        .elect_leaders(ElectionType::Preferred, Some(vec![tp.clone()]))
        .await
        .expect("ElectLeaders");
    assert_refused(&again[&tp], ErrorCode::ELECTION_NOT_NEEDED);
    let missing = TopicPartition::new(topic.as_str(), 5);
    let unknown = admin
        .elect_leaders(ElectionType::Preferred, Some(vec![missing.clone()]))
        .await
        .expect("answered");
    assert!(unknown[&missing].is_err(), "{unknown:?}");
    admin.delete_topics([&topic]).await.expect("delete");
}

/// A partition on brokers 1 and 2 moved to 2 and 3: the reassignment is listed while it runs
/// (or already done), `kafka-topics --describe` then shows the new replicas, and every
/// record is still there (kcat). Cancelling when nothing moves is NO_REASSIGNMENT_IN_PROGRESS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reassign_partition_moves_replicas() {
    let Some(cluster) = Cluster::three() else {
        return;
    };
    let _shared = cluster.shared();
    let admin = cluster.admin().await;
    let topic = unique_topic("reassign");
    cluster.kafka_tool(
        "org.apache.kafka.tools.TopicCommand",
        &["--create", "--topic", &topic, "--replica-assignment", "1:2"],
    );
    let tp = TopicPartition::new(topic.as_str(), 0);
    let values: Vec<String> = (0..20).map(|i| format!("moved-{i}")).collect();
    assert!(support::kcat_produce(
        &cluster.bootstrap,
        &topic,
        &values.iter().map(String::as_str).collect::<Vec<_>>(),
        Duration::from_secs(30)
    ));
    let moved = admin
        .alter_partition_reassignments([(tp.clone(), Some(vec![2, 3]))])
        .await
        .expect("AlterPartitionReassignments");
    assert!(moved[&tp].is_ok(), "{moved:?}");
    if let Some(running) = admin
        .list_partition_reassignments(None)
        .await
        .expect("list")
        .get(&tp)
    {
        assert!(
            running.adding.contains(&3) || running.removing.contains(&1),
            "{running:?}"
        );
    }
    eventually("the reassignment completes", WAIT, || async {
        admin
            .list_partition_reassignments(Some(vec![tp.clone()]))
            .await
            .is_ok_and(|r| r.is_empty())
    })
    .await;
    eventually("kafka-topics shows replicas 2,3", WAIT, || async {
        let out = cluster.kafka_tool(
            "org.apache.kafka.tools.TopicCommand",
            &["--describe", "--topic", &topic],
        );
        out.lines()
            .any(|l| l.contains("Partition: 0") && l.contains("Replicas: 2,3\t"))
    })
    .await;
    assert_eq!(
        cluster.read_values(&topic, Isolation::ReadUncommitted),
        values
    );
    let cancelled = admin
        .alter_partition_reassignments([(tp.clone(), None)])
        .await
        .expect("answered");
    assert_refused(&cancelled[&tp], ErrorCode::NO_REASSIGNMENT_IN_PROGRESS);
    admin.delete_topics([&topic]).await.expect("delete");
}

/// The broker's log directory and a topic's replica in it, with its size as Kafka's own
/// `kafka-log-dirs --describe` reports it; a move to a directory the broker does not have is
/// LOG_DIR_NOT_FOUND for that replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_log_dirs() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let admin = cluster.admin().await;
    let topic = unique_topic("log-dirs");
    support::admin_create_topic(&admin, &topic, 1, 1).await;
    assert!(support::kcat_produce(
        &cluster.bootstrap,
        &topic,
        &["a", "b", "c"],
        Duration::from_secs(30)
    ));
    let tp = TopicPartition::new(topic.as_str(), 0);
    let broker = *admin
        .describe_cluster()
        .await
        .unwrap()
        .brokers
        .keys()
        .next()
        .expect("a broker");
    let described = admin
        .describe_log_dirs([broker])
        .await
        .expect("DescribeLogDirs");
    let dirs = described[&broker].as_ref().expect("described");
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let (path, dir) = dirs.iter().next().unwrap();
    assert_eq!(path, &format!("{}/broker0/data", cluster.dir));
    assert!(dir.error.is_none(), "{dir:?}");
    assert!(
        dir.total_bytes.is_some_and(|t| t > 0) && dir.usable_bytes.is_some_and(|u| u > 0),
        "{dir:?}"
    );
    let replica = dir.replicas[&tp];
    assert!(replica.size_bytes > 0 && !replica.is_future, "{replica:?}");

    let out = cluster.kafka_tool(
        "org.apache.kafka.tools.LogDirsCommand",
        &[
            "--describe",
            "--broker-list",
            &broker.to_string(),
            "--topic-list",
            &topic,
        ],
    );
    let json = out
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON in {out}"));
    let parsed: serde_json::Value = serde_json::from_str(json).expect("JSON");
    let java = &parsed["brokers"][0]["logDirs"][0];
    assert_eq!(java["logDir"].as_str(), Some(path.as_str()));
    let partition = java["partitions"]
        .as_array()
        .and_then(|ps| {
            ps.iter()
                .find(|p| p["partition"].as_str() == Some(&format!("{topic}-0")))
        })
        .unwrap_or_else(|| panic!("{topic}-0 missing from {json}"));
    assert_eq!(partition["size"].as_i64(), Some(replica.size_bytes));

    let moved = admin
        .alter_replica_log_dirs([((tp.clone(), broker), "/nonexistent/exactly".to_owned())])
        .await
        .expect("AlterReplicaLogDirs");
    assert_refused(&moved[&(tp, broker)], ErrorCode::LOG_DIR_NOT_FOUND);
    admin.delete_topics([&topic]).await.expect("delete");
}

/// The finalized features are those `kafka-features describe` prints; an update to the
/// current level validates, one to a level no broker supports is INVALID_UPDATE_VERSION.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_and_update_features() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let admin = cluster.admin().await;
    let features = admin.describe_features().await.expect("features");
    assert!(features.finalized_epoch.is_some());
    let java = cluster.describe_features();
    // (kafka-features names metadata.version's level, 4.1-IV1, rather than its number.)
    assert!(
        features.finalized.contains_key("metadata.version"),
        "{features:?}"
    );
    for name in ["transaction.version", "group.version"] {
        let line = java
            .lines()
            .find(|l| l.contains(&format!("Feature: {name}\t")))
            .unwrap_or_else(|| panic!("{name} missing from {java}"));
        let level = features.finalized[name].max;
        assert!(
            line.contains(&format!("FinalizedVersionLevel: {level}\t")),
            "{line} vs {level}"
        );
        assert!(features.supported.contains_key(name), "{features:?}");
    }
    let current = features.finalized["transaction.version"].max;
    let same = admin
        .update_features(
            [(
                "transaction.version".to_owned(),
                current,
                FeatureUpgrade::Upgrade,
            )],
            true,
        )
        .await
        .expect("UpdateFeatures");
    assert!(same["transaction.version"].is_ok(), "{same:?}");
    let impossible = admin
        .update_features(
            [(
                "transaction.version".to_owned(),
                99,
                FeatureUpgrade::Upgrade,
            )],
            true,
        )
        .await
        .expect("UpdateFeatures");
    assert_refused(
        &impossible["transaction.version"],
        ErrorCode::INVALID_UPDATE_VERSION,
    );
}

/// A delegation token made through `Admin` (over SASL as the super user) is listed by
/// Kafka's `kafka-delegation-tokens --describe`, lets Kafka's own client log in with it
/// (SCRAM, `tokenauth=true`), is renewed, and once expired is gone. Over plaintext the
/// broker refuses (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delegation_tokens_create_login_expire() {
    use base64::Engine as _;
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let Some(bed) = SaslBed::get() else {
        return;
    };
    let _shared = cluster.shared();
    let plaintext = cluster.admin().await;
    let refused = plaintext
        .create_delegation_token(&NewDelegationToken::default())
        .await;
    assert_refused(&refused, ErrorCode::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED);
    let admin = Admin::from_properties(bed.properties(&bed.super_user))
        .await
        .expect("admin over SASL");
    let token = admin
        .create_delegation_token(
            &NewDelegationToken::default().max_lifetime(Duration::from_secs(3600)),
        )
        .await
        .expect("CreateDelegationToken");
    assert_eq!(token.owner, format!("User:{}", bed.super_user.0));
    assert!(!format!("{token:?}").contains(&format!("{:?}", token.hmac)));
    // Tokens reach the brokers through the metadata log.
    eventually("the token is described", WAIT, || async {
        let listed = admin
            .describe_delegation_tokens(None)
            .await
            .expect("describe");
        listed
            .iter()
            .any(|t| t.token_id == token.token_id && t.hmac == token.hmac)
    })
    .await;

    let owner_login = JavaLogin::new(&bed.super_user.0, &bed.super_user.1, "");
    let out = owner_login.run(
        &bed.bootstrap,
        "org.apache.kafka.tools.DelegationTokenCommand",
        &["--describe", "--owner-principal", &token.owner],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(&token.token_id));
    let password = base64::engine::general_purpose::STANDARD.encode(&token.hmac);
    let token_login = JavaLogin::new(&token.token_id, &password, " tokenauth=\"true\"");
    let out = token_login.run(
        &bed.bootstrap,
        "org.apache.kafka.tools.TopicCommand",
        &["--list"],
    );
    assert!(
        out.status.success(),
        "login with the token: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let renewed = admin
        .renew_delegation_token(&token.hmac, Some(Duration::from_secs(600)))
        .await
        .expect("renew");
    assert!(
        renewed > token.issue_timestamp_ms && renewed <= token.max_timestamp_ms,
        "{renewed} {token:?}"
    );
    admin
        .expire_delegation_token(&token.hmac, None)
        .await
        .expect("expire");
    eventually("the expired token is gone", WAIT, || async {
        admin
            .describe_delegation_tokens(None)
            .await
            .is_ok_and(|ts| ts.iter().all(|t| t.token_id != token.token_id))
    })
    .await;
}
