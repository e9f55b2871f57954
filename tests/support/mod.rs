//! Support for the integration tests: reaching the test bed started by `scripts/testbed`,
//! cutting and degrading broker traffic through Toxiproxy, creating topics with Kafka's own
//! tools, and reading topics back with an independent reader (kcat, librdkafka-based).
//!
//! A test calls [`Cluster::single`] (or `three`, `tv1`) first. When the cluster is not up,
//! the test is skipped with a message, except under `CI=true`, where a missing broker fails
//! the test: CI must never count a skipped check as a pass.
#![allow(dead_code)] // each test binary uses a different part of this module

pub mod captured;
pub mod delivery;
// A foreign group member speaking the raw protocol, through the crate's codec.
#[cfg(feature = "internals")]
pub mod group;
pub mod java_group;
pub mod members;
// One blocking connection for the tests that speak the protocol by hand.
#[cfg(feature = "internals")]
pub mod raw;
#[cfg(feature = "internals")]
pub mod raw_txn;

/// One test: `$body(cluster, protocol)` on the test bed's `$cluster` cluster (skipped when it
/// is not up). `$body` is a function of the module that invokes the macro.
#[allow(unused_macros)] // each test binary uses a different part of this module
macro_rules! group_protocol_test {
    ($test:ident, $body:ident, $cluster:ident, $protocol:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            if let Some(cluster) = crate::support::Cluster::$cluster() {
                super::$body(cluster, exactly::GroupProtocol::$protocol).await;
            }
        }
    };
}

/// Runs `$body(cluster, protocol)` on the `$cluster` cluster once per group protocol.
#[allow(unused_macros)]
macro_rules! on_both_protocols {
    ($body:ident, $cluster:ident) => {
        mod $body {
            group_protocol_test!(kip848, $body, $cluster, Consumer);
            group_protocol_test!(classic, $body, $cluster, Classic);
        }
    };
}
pub mod logs;

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

/// One cluster of the test bed (see `scripts/testbed`).
#[derive(Debug, Clone)]
pub struct Cluster {
    /// Comma-separated proxy addresses (what clients bootstrap from).
    pub bootstrap: String,
    /// Number of brokers.
    pub brokers: usize,
    /// `transaction.version` the cluster was formatted with.
    pub txn_version: u8,
    /// The first port of the cluster's range: broker i's proxy listens on `base + i`.
    pub base_port: u16,
    /// The cluster's state directory (`broker<i>/data` holds broker i's logs).
    pub dir: String,
    /// Broker i's JMX port (loopback), for its own metrics.
    pub jmx_ports: Vec<u16>,
    lock: &'static RwLock<()>,
}

static SINGLE_LOCK: RwLock<()> = RwLock::new(());
static THREE_LOCK: RwLock<()> = RwLock::new(());
static TV1_LOCK: RwLock<()> = RwLock::new(());
/// Toxiproxy's `/reset` and topic names are global; serialise the few global operations.
static GLOBAL: Mutex<()> = Mutex::new(());

/// Sends the crate's tracing events to the test output, filtered by `RUST_LOG` (quiet when
/// unset). Safe to call from every test.
pub fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// An error followed by each of its causes (walked through `source()`), separated by `: `:
/// what `anyhow`'s `{:#}` prints. An error's own `Display` leaves its causes out.
pub fn report(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![error.to_string()];
    let mut next = error.source();
    while let Some(cause) = next {
        parts.push(cause.to_string());
        next = cause.source();
    }
    parts.join(": ")
}

/// Whether this run is CI's (`CI=true`), where a missing broker is a failure.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

impl Cluster {
    /// The default cluster: one broker, transactions v2 (`scripts/testbed up`).
    pub fn single() -> Option<Self> {
        Self::find("", 1, 2, 19090, &SINGLE_LOCK)
    }

    /// Three brokers, transactions v2 (`scripts/testbed up --brokers 3`).
    pub fn three() -> Option<Self> {
        Self::find("_3", 3, 2, 19290, &THREE_LOCK)
    }

    /// One broker formatted with `transaction.version=1` (`scripts/testbed up --txn-version 1`).
    pub fn tv1() -> Option<Self> {
        Self::find("_TV1", 1, 1, 19190, &TV1_LOCK)
    }

    fn find(
        suffix: &str,
        brokers: usize,
        txn_version: u8,
        base_port: u16,
        lock: &'static RwLock<()>,
    ) -> Option<Self> {
        init_logging();
        let default: Vec<String> = (0..brokers)
            .map(|i| format!("127.0.0.1:{}", base_port + i as u16))
            .collect();
        let bootstrap =
            std::env::var(format!("KAFKA_BOOTSTRAP{suffix}")).unwrap_or_else(|_| default.join(","));
        let first = bootstrap.split(',').next().unwrap_or_default().to_owned();
        // Probed under the cluster's shared lock: a test holding it exclusively may have cut
        // the very proxy this connects to, and a broker cut on purpose is not a missing one
        // (a test starting mid-cut once failed CI with "no broker answers").
        let reachable = {
            let _no_cut = lock.read().unwrap_or_else(|e| e.into_inner());
            first
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.next())
                .is_some_and(|addr| {
                    TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok()
                })
        };
        if !reachable {
            let how = match (brokers, txn_version) {
                (3, _) => "scripts/testbed up --brokers 3",
                (_, 1) => "scripts/testbed up --txn-version 1",
                _ => "scripts/testbed up",
            };
            assert!(
                !in_ci(),
                "CI=true but no broker answers at {bootstrap}; `{how}` should have started it"
            );
            eprintln!("SKIPPED: no broker at {bootstrap}; start one with `{how}`");
            return None;
        }
        let dir = std::env::var(format!("KAFKA_CLUSTER_DIR{suffix}")).unwrap_or_else(|_| {
            format!(
                "{}/target/testbed/b{brokers}-tv{txn_version}",
                env!("CARGO_MANIFEST_DIR")
            )
        });
        let jmx_ports = std::env::var(format!("KAFKA_JMX_PORTS{suffix}"))
            .ok()
            .map(|ports| ports.split(',').filter_map(|p| p.parse().ok()).collect())
            .unwrap_or_else(|| (0..brokers).map(|i| base_port + 80 + i as u16).collect());
        Some(Self {
            bootstrap,
            brokers,
            txn_version,
            base_port,
            dir,
            jmx_ports,
            lock,
        })
    }

    /// Shared access: the test injects no faults, but must not run while another test cuts
    /// this cluster's traffic.
    pub fn shared(&self) -> RwLockReadGuard<'static, ()> {
        self.lock.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Exclusive access, for a test that injects faults into this cluster's proxies.
    /// The proxies are reset (enabled, no toxics) when access is granted.
    pub fn exclusive(&self) -> RwLockWriteGuard<'static, ()> {
        let guard = self.lock.write().unwrap_or_else(|e| e.into_inner());
        for i in 0..self.brokers {
            let proxy = self.proxy(i);
            proxy.remove_all_toxics();
            proxy.set_enabled(true);
        }
        guard
    }

    /// The Toxiproxy proxy in front of broker `i` (0-based).
    pub fn proxy(&self, i: usize) -> Proxy {
        Proxy {
            name: format!("b{}-tv{}-broker{i}", self.brokers, self.txn_version),
        }
    }

    /// Cluster options for `scripts/testbed`.
    fn testbed_args(&self) -> Vec<String> {
        vec![
            "--brokers".into(),
            self.brokers.to_string(),
            "--txn-version".into(),
            self.txn_version.to_string(),
        ]
    }

    /// SIGKILLs broker `i` (or SIGTERMs it when `kill` is false) through `scripts/testbed`.
    pub fn stop_broker(&self, i: usize, kill: bool) {
        let mut args = vec!["stop-broker".to_owned(), i.to_string()];
        if kill {
            args.push("--kill".into());
        }
        args.extend(self.testbed_args());
        run_ok(Command::new(testbed_script()).args(&args));
    }

    /// Starts broker `i` again (same data) and waits for its listener.
    pub fn start_broker(&self, i: usize) {
        let mut args = vec!["start-broker".to_owned(), i.to_string()];
        args.extend(self.testbed_args());
        run_ok(Command::new(testbed_script()).args(&args));
    }

    /// Creates `topic` with Kafka's own TopicCommand (through the proxy).
    pub fn create_topic(
        &self,
        topic: &str,
        partitions: u32,
        replication: u32,
        configs: &[(&str, &str)],
    ) {
        let (partitions, replication) = (partitions.to_string(), replication.to_string());
        let configs: Vec<String> = configs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut args = vec![
            "--create",
            "--topic",
            topic,
            "--partitions",
            &partitions,
            "--replication-factor",
            &replication,
        ];
        for config in &configs {
            args.extend(["--config", config]);
        }
        self.kafka_tool("org.apache.kafka.tools.TopicCommand", &args);
    }

    /// The offsets `group` committed for `topic`, by partition, as Kafka's own
    /// `kafka-consumer-groups --describe` reads them (a partition without a commit is left
    /// out).
    pub fn group_offsets(&self, group: &str, topic: &str) -> std::collections::BTreeMap<i32, i64> {
        // "-": no commit.
        self.group_rows(group, topic)
            .iter()
            .filter_map(|columns| Some((columns[2].parse().ok()?, columns[3].parse().ok()?)))
            .collect()
    }

    /// `kafka-consumer-groups --describe` for `group`: the rows of `topic`'s partitions,
    /// split into columns (GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...).
    pub fn group_rows(&self, group: &str, topic: &str) -> Vec<Vec<String>> {
        let out = self.kafka_tool(
            "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
            &["--describe", "--group", group],
        );
        out.lines()
            .map(|line| line.split_whitespace().map(str::to_owned).collect())
            .filter(|columns: &Vec<String>| columns.len() >= 4 && columns[1] == topic)
            .collect()
    }

    /// Kafka's own tool `class` (its `main`) run against this cluster with `args` after
    /// `--bootstrap-server`: its standard output (a failed run fails the test).
    pub fn kafka_tool(&self, class: &str, args: &[&str]) -> String {
        let mut all = vec![
            class.to_owned(),
            "--bootstrap-server".into(),
            self.bootstrap.clone(),
        ];
        all.extend(args.iter().map(|a| a.to_string()));
        String::from_utf8_lossy(&run_ok(&mut java_tool(&all)).stdout).into_owned()
    }

    /// The `request` requests (`Produce`, `FetchConsumer`, ...) broker `i` has handled since
    /// it started, every version summed, as the broker counts them
    /// (`kafka.network:type=RequestMetrics,name=RequestsPerSec,request=...`, read over JMX
    /// with Kafka's JmxTool).
    pub fn requests_handled(&self, i: usize, request: &str) -> u64 {
        let object =
            format!("kafka.network:type=RequestMetrics,name=RequestsPerSec,request={request},*");
        let url = format!(
            "service:jmx:rmi:///jndi/rmi://127.0.0.1:{}/jmxrmi",
            self.jmx_ports[i]
        );
        let args: Vec<String> = [
            "org.apache.kafka.tools.JmxTool",
            "--jmx-url",
            &url,
            "--one-time",
            "true",
            "--report-format",
            "properties",
            "--object-name",
            &object,
            "--attributes",
            "Count",
        ]
        .map(str::to_owned)
        .to_vec();
        let out = java_tool(&args)
            .stdin(Stdio::null())
            .output()
            .expect("JmxTool runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        // The meters exist once the broker has handled a request of that version.
        if !out.status.success() && stderr.contains("No matched attributes") {
            return 0;
        }
        assert!(out.status.success(), "JmxTool failed: {stderr}");
        // One `...,version=N:Count=C` line per version the broker has seen.
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|line| line.contains("name=RequestsPerSec"))
            .filter_map(|line| line.rsplit_once("Count=")?.1.trim().parse::<u64>().ok())
            .sum()
    }

    /// The values kcat reads from `topic` at `isolation` (records without a value left out).
    pub fn read_values(&self, topic: &str, isolation: Isolation) -> Vec<String> {
        self.read_topic(topic, isolation)
            .into_iter()
            .filter_map(|r| r.value)
            .collect()
    }

    /// An admin client bootstrapping from this cluster, each request given 20 seconds.
    pub async fn admin(&self) -> exactly::Admin {
        exactly::Admin::builder()
            .bootstrap(self.bootstrap.as_str())
            .request_timeout(Duration::from_secs(20))
            .build()
            .await
            .expect("admin connects")
    }

    /// Kafka's own `kafka-configs --alter` of every broker's default (a dynamic,
    /// cluster-wide config): `action` (`--add-config`, `--delete-config`) with `config`.
    pub fn alter_broker_default(&self, action: &str, config: &str) {
        self.kafka_tool(
            "kafka.admin.ConfigCommand",
            &[
                "--entity-type",
                "brokers",
                "--entity-default",
                "--alter",
                action,
                config,
            ],
        );
    }

    /// The `admin` example run with `args` against this cluster (`KAFKA_BOOTSTRAP` set to
    /// it): what it printed; a failed run fails the test.
    pub fn run_admin_example(&self, args: &[&str]) -> String {
        let out = Command::new(env!("CARGO"))
            .args(["run", "--quiet", "--example", "admin", "--"])
            .args(args)
            .env("KAFKA_BOOTSTRAP", &self.bootstrap)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("cargo runs");
        assert!(
            out.status.success(),
            "admin {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// What a refused SASL login is checked against: the SCRAM users as Kafka's
    /// `kafka-configs --describe --entity-type users` lists them, and each broker's latest
    /// authentication and SCRAM log lines. A test that expects a login to succeed puts this in
    /// its failure message, so a refusal says whether the broker lost the credential or the
    /// exchange went wrong.
    pub fn sasl_diagnosis(&self) -> String {
        let users = self.kafka_tool(
            "kafka.admin.ConfigCommand",
            &["--describe", "--entity-type", "users"],
        );
        let mut out = format!("SCRAM users:\n{users}");
        for i in 0..self.brokers {
            let log = format!("{}/broker{i}/logs/server.log", self.dir);
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = text
                .lines()
                .filter(|l| l.contains("Failed authentication") || l.contains("Scram"))
                .collect();
            out.push_str(&format!("\n{log}, last lines on authentication:\n"));
            for line in &lines[lines.len().saturating_sub(12)..] {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }

    /// Kafka's `FeatureCommand describe` output.
    pub fn describe_features(&self) -> String {
        self.kafka_tool("org.apache.kafka.tools.FeatureCommand", &["describe"])
    }

    /// The transaction coordinator's view of `transactional_id`, from Kafka's own
    /// `TransactionsCommand describe`: its state (`Ongoing`, `CompleteAbort`, ...) and the
    /// partitions of the open transaction (empty when none is open).
    pub fn describe_transaction(&self, transactional_id: &str) -> (String, Vec<String>) {
        let out = self.kafka_tool(
            "org.apache.kafka.tools.TransactionsCommand",
            &["describe", "--transactional-id", transactional_id],
        );
        let mut lines = out.lines().filter(|l| !l.trim().is_empty());
        let header: Vec<&str> = lines
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        let row: Vec<&str> = lines
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        let column = |name: &str| {
            header
                .iter()
                .position(|h| *h == name)
                .and_then(|i| row.get(i).copied())
        };
        let state = column("TransactionState")
            .unwrap_or_else(|| panic!("no TransactionState in {out:?}"))
            .to_owned();
        let partitions = column("TopicPartitions")
            .map(|p| {
                p.split(',')
                    .filter(|tp| !tp.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        (state, partitions)
    }

    /// The record batches in broker 0's log of `topic`-`partition`, in offset order, read with
    /// Kafka's own DumpLogSegments (so batch boundaries and producer ids are the broker's, not
    /// our decoder's).
    pub fn log_batches(&self, topic: &str, partition: i32) -> Vec<LogBatch> {
        let dir = format!("{}/broker0/data/{topic}-{partition}", self.dir);
        let mut segments: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot list {dir}: {e}"))
            .filter_map(|e| e.ok())
            .map(|e| e.path().display().to_string())
            .filter(|p| p.ends_with(".log"))
            .collect();
        segments.sort();
        let args = [
            "kafka.tools.DumpLogSegments".to_owned(),
            "--files".into(),
            segments.join(","),
        ];
        let out = run_ok(&mut java_tool(&args));
        let field = |line: &str, name: &str| -> Option<i64> {
            let rest = line.split(&format!("{name}: ")).nth(1)?;
            rest.split_whitespace().next()?.parse().ok()
        };
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                Some(LogBatch {
                    base_offset: field(l, "baseOffset")?,
                    count: field(l, "count")?,
                    producer_id: field(l, "producerId")?,
                })
            })
            .collect()
    }

    /// Reads `topic` from the beginning to its current end with kcat.
    pub fn read_topic(&self, topic: &str, isolation: Isolation) -> Vec<ConsumedRecord> {
        kcat_read(&self.bootstrap, topic, isolation)
    }
}

/// One record batch as the broker's DumpLogSegments prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogBatch {
    /// Offset of its first record.
    pub base_offset: i64,
    /// Records in it.
    pub count: i64,
    /// The producer id it carries (-1: a non-idempotent producer).
    pub producer_id: i64,
}

/// A producer on `cluster` from Kafka properties: `defaults` (a test file's usual settings),
/// overridden by `extra`.
pub async fn producer_with(
    cluster: &Cluster,
    defaults: &[(&str, &str)],
    extra: &[(&str, &str)],
) -> exactly::Producer {
    let mut props = vec![("bootstrap.servers", cluster.bootstrap.as_str())];
    for (k, v) in defaults.iter().chain(extra) {
        props.retain(|(key, _)| key != k);
        props.push((k, v));
    }
    exactly::Producer::from_properties(props)
        .await
        .expect("producer builds")
}

/// A transactional producer on `cluster` (properties as [`producer_with`]; `defaults` names
/// the `transactional.id`), its transactions initialised.
pub async fn transactional_producer_with(
    cluster: &Cluster,
    defaults: &[(&str, &str)],
    extra: &[(&str, &str)],
) -> exactly::Producer {
    let producer = producer_with(cluster, defaults, extra).await;
    producer
        .init_transactions()
        .await
        .expect("init_transactions");
    producer
}

/// Creates `topic` with `partitions` and `replication` through `admin`; fails the test
/// unless the broker created it.
pub async fn admin_create_topic(
    admin: &exactly::Admin,
    topic: &str,
    partitions: i32,
    replication: i16,
) {
    let created = admin
        .create_topics(
            [exactly::NewTopic::new(topic)
                .partitions(partitions)
                .replication_factor(replication)],
            false,
        )
        .await
        .expect("create_topics answered");
    assert!(created[topic].is_ok(), "{created:?}");
}

/// Waits until `check` holds, polling every 250 ms, or fails with `what` after `limit`.
pub async fn eventually<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !check().await {
        assert!(start.elapsed() < limit, "{what} within {limit:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A topic name unique to this test run, so reruns against the same cluster never collide.
pub fn unique_topic(prefix: &str) -> String {
    let _g: MutexGuard<'_, ()> = GLOBAL.lock().unwrap_or_else(|e| e.into_inner());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

fn testbed_script() -> String {
    std::env::var("EXACTLY_TESTBED")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/testbed").to_owned())
}

fn kafka_libs() -> String {
    std::env::var("KAFKA_LIBS").unwrap_or_else(|_| {
        let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
        format!("{home}/.cache/exactly/kafka-4.1.1/libs")
    })
}

/// A Kafka tool (`org.apache.kafka.tools.*`) run from the test bed's jars, with quiet logging.
pub fn java_tool(args: &[String]) -> Command {
    let mut cmd = Command::new("java");
    cmd.arg("-cp")
        .arg(format!("{}/*", kafka_libs()))
        .arg(concat!(
            "-Dlog4j2.configurationFile=",
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/testbed.d/tools-log4j2.yaml"
        ))
        .args(args);
    cmd
}

/// Runs a command to completion and panics with its output if it failed.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The isolation level an independent read uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Sees records of open and aborted transactions too.
    ReadUncommitted,
    /// Sees only committed records (and non-transactional ones).
    ReadCommitted,
}

/// One record as kcat read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumedRecord {
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// Key, if any (as UTF-8, lossy).
    pub key: Option<String>,
    /// Value, if any (as UTF-8, lossy).
    pub value: Option<String>,
}

fn kcat_read(bootstrap: &str, topic: &str, isolation: Isolation) -> Vec<ConsumedRecord> {
    kcat_read_with(bootstrap, topic, isolation, &[])
}

/// Reads `topic` with kcat, passing `extra` arguments (e.g. `-X security.protocol=SSL`), so a
/// test can read over the same (secured) listener it produced to.
pub fn kcat_read_with(
    bootstrap: &str,
    topic: &str,
    isolation: Isolation,
    extra: &[String],
) -> Vec<ConsumedRecord> {
    let level = match isolation {
        Isolation::ReadUncommitted => "read_uncommitted",
        Isolation::ReadCommitted => "read_committed",
    };
    let out = run_ok(
        Command::new("kcat")
            .args([
                "-C",
                "-b",
                bootstrap,
                "-t",
                topic,
                "-o",
                "beginning",
                "-e",
                "-J",
                "-q",
            ])
            .args(["-X", &format!("isolation.level={level}")])
            .args(extra)
            .args(["-m", "60"]),
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("kcat printed non-JSON {line:?}: {e}"));
            let text = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_owned);
            ConsumedRecord {
                partition: v["partition"].as_i64().expect("kcat JSON has partition") as i32,
                offset: v["offset"].as_i64().expect("kcat JSON has offset"),
                key: text("key"),
                value: text("payload"),
            }
        })
        .collect()
}

/// The headers of every record of partition `partition` of `topic`, by offset, as kcat reads
/// them from the beginning to the end (`-J` prints them as a flat key, value, key, ... list).
pub fn kcat_headers(
    bootstrap: &str,
    topic: &str,
    partition: i32,
) -> Vec<(i64, Vec<(String, String)>)> {
    let out = run_ok(Command::new("kcat").args([
        "-C",
        "-b",
        bootstrap,
        "-t",
        topic,
        "-p",
        &partition.to_string(),
        "-o",
        "beginning",
        "-e",
        "-J",
        "-q",
        "-m",
        "60",
    ]));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("kcat printed non-JSON {line:?}: {e}"));
            let flat: Vec<String> = v
                .get("headers")
                .and_then(|h| h.as_array())
                .map(|h| {
                    h.iter()
                        .map(|x| x.as_str().unwrap_or_default().to_owned())
                        .collect()
                })
                .unwrap_or_default();
            let pairs = flat
                .chunks(2)
                .map(|kv| (kv[0].clone(), kv.get(1).cloned().unwrap_or_default()))
                .collect();
            (v["offset"].as_i64().expect("kcat JSON has offset"), pairs)
        })
        .collect()
}

/// Produces `values` to `topic` with kcat (librdkafka, idempotent); returns whether every
/// message was delivered within `timeout`.
pub fn kcat_produce(bootstrap: &str, topic: &str, values: &[&str], timeout: Duration) -> bool {
    let mut child = Command::new("kcat")
        .args(["-P", "-b", bootstrap, "-t", topic])
        .args(["-X", &format!("message.timeout.ms={}", timeout.as_millis())])
        .args(["-X", "enable.idempotence=true"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat runs");
    {
        let mut stdin = child.stdin.take().expect("piped stdin");
        for v in values {
            writeln!(stdin, "{v}").expect("write to kcat");
        }
    }
    // Bounded: kcat gives up after message.timeout.ms; allow it generous slack to exit.
    let deadline = Instant::now() + timeout + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().expect("wait for kcat") {
            return status.success();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Lists the brokers the cluster advertises, as kcat's metadata request sees them.
pub fn kcat_brokers(bootstrap: &str) -> Vec<(i64, String)> {
    let out = run_ok(Command::new("kcat").args(["-L", "-J", "-b", bootstrap, "-m", "10"]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("kcat -L -J prints JSON");
    v["brokers"]
        .as_array()
        .expect("brokers array")
        .iter()
        .map(|b| {
            (
                b["id"].as_i64().unwrap_or(-1),
                b["name"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The node id of `topic`'s partition `partition` leader, from kcat's metadata.
pub fn kcat_partition_leader(bootstrap: &str, topic: &str, partition: i64) -> i64 {
    let out =
        run_ok(Command::new("kcat").args(["-L", "-J", "-b", bootstrap, "-t", topic, "-m", "10"]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("kcat -L -J prints JSON");
    v["topics"][0]["partitions"]
        .as_array()
        .and_then(|ps| {
            ps.iter()
                .find(|p| p["partition"].as_i64() == Some(partition))
        })
        .and_then(|p| p["leader"].as_i64())
        .unwrap_or_else(|| panic!("no leader for {topic}-{partition} in {v}"))
}

/// A Toxiproxy proxy, driven through its HTTP API on 127.0.0.1.
#[derive(Debug, Clone)]
pub struct Proxy {
    /// The proxy's name (`b1-tv2-broker0`, ...).
    pub name: String,
}

impl Proxy {
    /// Enables (`true`) or disables (`false`: every connection is cut and refused) the proxy.
    pub fn set_enabled(&self, enabled: bool) {
        toxiproxy(
            "POST",
            &format!("/proxies/{}", self.name),
            Some(&format!("{{\"enabled\":{enabled}}}")),
        );
    }

    /// Adds a toxic, e.g. `("latency", "downstream", r#"{"latency":100,"jitter":50}"#)`.
    pub fn add_toxic(&self, name: &str, kind: &str, stream: &str, attributes: &str) {
        let body = format!(
            "{{\"name\":\"{name}\",\"type\":\"{kind}\",\"stream\":\"{stream}\",\"toxicity\":1.0,\"attributes\":{attributes}}}"
        );
        toxiproxy(
            "POST",
            &format!("/proxies/{}/toxics", self.name),
            Some(&body),
        );
    }

    /// Removes one toxic by name.
    pub fn remove_toxic(&self, name: &str) {
        toxiproxy(
            "DELETE",
            &format!("/proxies/{}/toxics/{name}", self.name),
            None,
        );
    }

    /// Removes every toxic of this proxy.
    pub fn remove_all_toxics(&self) {
        let list = toxiproxy("GET", &format!("/proxies/{}/toxics", self.name), None);
        let toxics: serde_json::Value = serde_json::from_str(&list).expect("toxic list is JSON");
        for t in toxics.as_array().into_iter().flatten() {
            if let Some(name) = t["name"].as_str() {
                self.remove_toxic(name);
            }
        }
    }

    /// The proxy's state as Toxiproxy reports it.
    pub fn state(&self) -> serde_json::Value {
        serde_json::from_str(&toxiproxy("GET", &format!("/proxies/{}", self.name), None))
            .expect("proxy JSON")
    }
}

fn toxiproxy_addr() -> String {
    let url = std::env::var("TOXIPROXY_URL").unwrap_or_else(|_| "http://127.0.0.1:8474".into());
    url.trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned()
}

/// One HTTP/1.1 request to Toxiproxy; panics on a non-2xx status. Returns the body.
fn toxiproxy(method: &str, path: &str, body: Option<&str>) -> String {
    let addr = toxiproxy_addr();
    let mut stream =
        TcpStream::connect(&addr).unwrap_or_else(|e| panic!("Toxiproxy at {addr}: {e}"));
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let body = body.unwrap_or("");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .expect("write to Toxiproxy");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .expect("read from Toxiproxy");
    let status: u16 = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    assert!(
        (200..300).contains(&status),
        "Toxiproxy {method} {path} answered {status}: {response}"
    );
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or("");
    if response
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}
