//! The test bed itself: brokers reachable only through Toxiproxy, proxies that really cut
//! traffic, a three-broker cluster, a transactions-v1 cluster, and the client-metrics
//! subscription (KIP-714). Every check here goes through independent tools (kcat, Kafka's own
//! command-line tools), not through our code.

mod support;

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
