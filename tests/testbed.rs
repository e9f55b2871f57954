//! The test bed itself: brokers reachable only through Toxiproxy, proxies that really cut
//! traffic, a three-broker cluster, a transactions-v1 cluster, the client-metrics
//! subscription (KIP-714), and KRaft's StandardAuthorizer with its super users and the limited
//! SASL users whose rights come from ACLs alone. Every check here goes through independent
//! tools (kcat, Kafka's own command-line tools), not through our code.

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use support::{Cluster, Isolation, kcat_brokers, kcat_produce, unique_topic};

#[test]
fn testbed_broker_reachable_through_proxy() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let brokers = kcat_brokers(&cluster.bootstrap);
    assert_eq!(
        brokers.len(),
        1,
        "one broker expected, metadata says {brokers:?}"
    );
    // Every advertised address must be a proxy port, so that connections made after metadata
    // discovery still cross Toxiproxy.
    let proxy_listen = cluster.proxy(0).state()["listen"]
        .as_str()
        .map(str::to_owned);
    for (id, addr) in &brokers {
        assert_eq!(
            Some(addr.clone()),
            proxy_listen,
            "broker {id} advertises {addr}, not its proxy"
        );
    }
    // And a produce/consume round trip through the proxy works.
    let topic = unique_topic("reach");
    cluster.create_topic(&topic, 1, 1, &[]);
    assert!(kcat_produce(
        &cluster.bootstrap,
        &topic,
        &["one", "two"],
        Duration::from_secs(20)
    ));
    let read = cluster.read_topic(&topic, Isolation::ReadUncommitted);
    let values: Vec<_> = read
        .iter()
        .map(|r| r.value.as_deref().unwrap_or(""))
        .collect();
    assert_eq!(values, ["one", "two"]);
}

#[test]
fn testbed_proxy_cut_blocks_traffic() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _exclusive = cluster.exclusive();
    let topic = unique_topic("cut");
    cluster.create_topic(&topic, 1, 1, &[]);
    let proxy = cluster.proxy(0);

    proxy.set_enabled(false);
    let delivered_while_cut = kcat_produce(
        &cluster.bootstrap,
        &topic,
        &["lost"],
        Duration::from_secs(3),
    );
    proxy.set_enabled(true);
    assert!(
        !delivered_while_cut,
        "a produce succeeded while the broker's proxy was disabled"
    );

    assert!(
        kcat_produce(
            &cluster.bootstrap,
            &topic,
            &["after"],
            Duration::from_secs(20)
        ),
        "produce failed after the proxy was re-enabled"
    );
    let read = cluster.read_topic(&topic, Isolation::ReadUncommitted);
    let values: Vec<_> = read
        .iter()
        .map(|r| r.value.as_deref().unwrap_or(""))
        .collect();
    assert_eq!(
        values,
        ["after"],
        "only the record sent after re-enabling is in the log"
    );
}

#[test]
fn testbed_three_brokers() {
    let Some(cluster) = Cluster::three() else {
        return;
    };
    let _shared = cluster.shared();
    let brokers = kcat_brokers(&cluster.bootstrap);
    assert_eq!(
        brokers.len(),
        3,
        "three brokers expected, metadata says {brokers:?}"
    );
    for i in 0..3 {
        let listen = cluster.proxy(i).state()["listen"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            brokers.iter().any(|(_, addr)| *addr == listen),
            "proxy {listen} is not advertised by any broker: {brokers:?}"
        );
    }
    let topic = unique_topic("rf3");
    cluster.create_topic(&topic, 3, 3, &[("min.insync.replicas", "2")]);
    assert!(kcat_produce(
        &cluster.bootstrap,
        &topic,
        &["a", "b", "c"],
        Duration::from_secs(30)
    ));
    assert_eq!(
        cluster.read_topic(&topic, Isolation::ReadUncommitted).len(),
        3
    );
}

#[test]
fn testbed_transactions_v1_cluster() {
    let Some(cluster) = Cluster::tv1() else {
        return;
    };
    let _shared = cluster.shared();
    let features = cluster.describe_features();
    let line = features
        .lines()
        .find(|l| l.contains("Feature: transaction.version"))
        .unwrap_or_else(|| panic!("no transaction.version feature in {features}"));
    assert!(
        line.contains("FinalizedVersionLevel: 1"),
        "TV1 cluster reports {line}"
    );
}

/// The client-metrics subscription `up` creates (KIP-714), as Kafka's own tool describes it:
/// every metric, each second, from clients whose software name is ours only.
#[test]
fn testbed_client_metrics_subscription() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let out = support::run_ok(&mut support::java_tool(&[
        "org.apache.kafka.tools.ClientMetricsCommand".into(),
        "--bootstrap-server".into(),
        cluster.bootstrap.clone(),
        "--describe".into(),
        "--name".into(),
        "exactly-testbed".into(),
    ]));
    let described = String::from_utf8_lossy(&out.stdout);
    for line in [
        "interval.ms=1000",
        "match=client_software_name=exactly",
        "metrics=*",
    ] {
        assert!(
            described.lines().any(|l| l.trim() == line),
            "{line} missing from {described}"
        );
    }
}

/// The SASL_PLAINTEXT listener of the cluster and a SASL user of it, from what `up` exports.
struct SaslLogin {
    bootstrap: String,
    user: String,
    password: String,
}

impl SaslLogin {
    /// `user_var` / `password_var` of the SASL_PLAINTEXT listener; `None` (a skip) when the
    /// test bed predates them, except under `CI=true`, where that is a failure.
    fn of(user_var: &str, password_var: &str) -> Option<SaslLogin> {
        let var = |name: &str| std::env::var(name).ok();
        let login = (|| {
            Some(SaslLogin {
                bootstrap: var("KAFKA_SASL_PLAINTEXT_BOOTSTRAP")?,
                user: var(user_var)?,
                password: var(password_var)?,
            })
        })();
        if login.is_none() {
            assert!(
                !support::in_ci(),
                "CI=true but {user_var} or the SASL_PLAINTEXT listener is not exported"
            );
            eprintln!("SKIPPED: no SASL_PLAINTEXT listener; eval \"$(scripts/testbed up)\" first");
        }
        login
    }

    /// Produces `value` to `topic` with kcat logged in as this user with SASL/PLAIN (Debian's
    /// librdkafka 2.0.2 cannot log in with SCRAM to Kafka 4.x, see tests/security.rs): whether
    /// it was delivered, and what kcat printed on standard error.
    fn kcat_produce(&self, topic: &str, value: &str) -> (bool, String) {
        let mut child = Command::new("kcat")
            .args(["-P", "-b", &self.bootstrap, "-t", topic])
            .args(["-X", "security.protocol=SASL_PLAINTEXT"])
            .args(["-X", "sasl.mechanisms=PLAIN"])
            .args(["-X", &format!("sasl.username={}", self.user)])
            .args(["-X", &format!("sasl.password={}", self.password)])
            .args(["-X", "message.timeout.ms=10000"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kcat runs");
        {
            use std::io::Write as _;
            let mut stdin = child.stdin.take().expect("piped stdin");
            writeln!(stdin, "{value}").expect("write to kcat");
        }
        // kcat gives up after message.timeout.ms; `wait_with_output` is bounded by it.
        let out = child.wait_with_output().expect("kcat exits");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// The topics Kafka's own `kafka-topics --list` shows this user, logged in with
    /// SCRAM-SHA-512 (so the user's SCRAM credentials are checked too).
    fn java_list_topics(&self) -> Vec<String> {
        let config = std::env::temp_dir().join(format!("{}.properties", unique_topic("scram")));
        std::fs::write(
            &config,
            format!(
                "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n\
                 sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule \
                 required username=\"{}\" password=\"{}\";\n",
                self.user, self.password
            ),
        )
        .expect("write the client config");
        let out = support::run_ok(&mut support::java_tool(&[
            "org.apache.kafka.tools.TopicCommand".into(),
            "--bootstrap-server".into(),
            self.bootstrap.clone(),
            "--command-config".into(),
            config.display().to_string(),
            "--list".into(),
        ]));
        let _ = std::fs::remove_file(&config);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// KRaft's StandardAuthorizer with `allow.everyone.if.no.acl.found=false`: a limited user is
/// refused on a topic that has no ACL at all (so "no ACL found" does not allow), an ACL made
/// with Kafka's `kafka-acls` lets that user alone in (the second limited user stays refused),
/// and a super user (alice on the same listener) needs no ACL. The limited user's SCRAM
/// credentials work too: Kafka's `kafka-topics --list` over SCRAM-SHA-512 shows the topic
/// only once the ACL lets the user describe it.
#[test]
fn testbed_authorizer_refuses_then_acl_allows() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let (Some(limited), Some(other), Some(super_user)) = (
        SaslLogin::of("KAFKA_SASL_LIMITED_USER", "KAFKA_SASL_LIMITED_PASSWORD"),
        SaslLogin::of("KAFKA_SASL_LIMITED_USER_2", "KAFKA_SASL_LIMITED_PASSWORD_2"),
        SaslLogin::of("KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD"),
    ) else {
        return;
    };
    let _shared = cluster.shared();
    let topic = unique_topic("authz");
    cluster.create_topic(&topic, 1, 1, &[]);

    let (delivered, stderr) = limited.kcat_produce(&topic, "refused");
    assert!(
        !delivered && stderr.contains("Topic authorization failed"),
        "{} wrote to a topic without ACLs: {stderr}",
        limited.user
    );
    assert!(
        !limited.java_list_topics().contains(&topic),
        "{} can describe {topic} without an ACL",
        limited.user
    );

    let principal = format!("User:{}", limited.user);
    let acls = cluster.kafka_tool(
        "org.apache.kafka.tools.AclCommand",
        &[
            "--add",
            "--allow-principal",
            &principal,
            "--operation",
            "Write",
            "--operation",
            "Describe",
            "--topic",
            &topic,
        ],
    );
    assert!(acls.contains(&principal), "{acls}");

    let (delivered, stderr) = limited.kcat_produce(&topic, "allowed");
    assert!(
        delivered,
        "{} refused after the ACL: {stderr}",
        limited.user
    );
    assert!(limited.java_list_topics().contains(&topic));
    let (delivered, stderr) = other.kcat_produce(&topic, "refused");
    assert!(
        !delivered && stderr.contains("Topic authorization failed"),
        "{} wrote with {}'s ACL: {stderr}",
        other.user,
        limited.user
    );
    let (delivered, stderr) = super_user.kcat_produce(&topic, "super");
    assert!(
        delivered,
        "the super user {} refused: {stderr}",
        super_user.user
    );

    assert_eq!(
        cluster.read_values(&topic, Isolation::ReadUncommitted),
        ["allowed", "super"]
    );
    let listed = cluster.kafka_tool(
        "org.apache.kafka.tools.AclCommand",
        &["--list", "--topic", &topic],
    );
    for operation in ["operation=WRITE", "operation=DESCRIBE"] {
        assert!(
            listed.contains(&format!("principal={principal}, host=*, {operation}")),
            "{operation} for {principal} missing from {listed}"
        );
    }
}
