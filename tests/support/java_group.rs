//! Kafka's own consumer in a group with ours: the Java console consumer
//! (`org.apache.kafka.tools.consumer.ConsoleConsumer`, Kafka 4.1.1) run from the test bed's
//! jars, and the group's assignment as the broker reports it
//! (`org.apache.kafka.tools.consumer.group.ConsumerGroupCommand --describe --members
//! --verbose`).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use exactly::GroupProtocol;

use super::{Cluster, java_tool, run_ok};

/// A Java console consumer in a group. Dropping it kills the JVM (SIGKILL) and reaps it, so no
/// Java process outlives its test, whether the test passed or not.
pub struct JavaConsumer {
    child: Child,
    records: Arc<Mutex<Vec<(i32, i64, String)>>>,
    /// Its `client.id` (how [`describe_members`] names it).
    pub client_id: String,
}

impl JavaConsumer {
    /// Starts a console consumer of `topic` in `group` with `client_id`, from the earliest
    /// offset, speaking `protocol` (classic: cooperative-sticky; KIP-848:
    /// `group.protocol=consumer`), committing every 500 ms; it prints the partition and offset
    /// of every record, which a thread collects.
    pub fn start(
        cluster: &Cluster,
        group: &str,
        topic: &str,
        protocol: GroupProtocol,
        client_id: &str,
    ) -> Self {
        let mut args: Vec<String> = [
            "org.apache.kafka.tools.consumer.ConsoleConsumer",
            "--bootstrap-server",
            &cluster.bootstrap,
            "--topic",
            topic,
            "--group",
            group,
            "--from-beginning",
            "--property",
            "print.partition=true",
            "--property",
            "print.offset=true",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut properties = vec![
            format!("client.id={client_id}"),
            "auto.commit.interval.ms=500".to_owned(),
        ];
        match protocol {
            GroupProtocol::Consumer => properties.push("group.protocol=consumer".into()),
            _ => properties.extend([
                "group.protocol=classic".into(),
                "partition.assignment.strategy=org.apache.kafka.clients.consumer.CooperativeStickyAssignor".into(),
                "session.timeout.ms=6000".into(),
                "heartbeat.interval.ms=500".into(),
            ]),
        }
        for p in properties {
            args.push("--consumer-property".into());
            args.push(p);
        }
        let mut child = java_tool(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("java runs");
        let stdout = child.stdout.take().expect("piped stdout");
        let records = Arc::new(Mutex::new(Vec::new()));
        let collected = Arc::clone(&records);
        // Ends when the JVM's stdout closes (the process exited or was killed).
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(record) = parse_console_line(&line) {
                    collected
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(record);
                }
            }
        });
        Self {
            child,
            records,
            client_id: client_id.to_owned(),
        }
    }

    /// The records it printed so far: (partition, offset, value).
    pub fn records(&self) -> Vec<(i32, i64, String)> {
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Stops it gracefully (SIGTERM: the console consumer's shutdown hook commits and leaves
    /// the group) and waits for the JVM to exit (bounded by `within`).
    pub fn leave(&mut self, within: Duration) {
        run_ok(Command::new("kill").args(["-TERM", &self.child.id().to_string()]));
        let end = Instant::now() + within;
        loop {
            if self.child.try_wait().expect("wait for java").is_some() {
                return;
            }
            assert!(
                Instant::now() < end,
                "the Java consumer did not exit within {within:?} of SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for JavaConsumer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `Partition:3\tOffset:17\tvalue` (the console consumer's default formatter).
pub fn parse_console_line(line: &str) -> Option<(i32, i64, String)> {
    let mut fields = line.splitn(3, '\t');
    let partition = fields.next()?.strip_prefix("Partition:")?.parse().ok()?;
    let offset = fields.next()?.strip_prefix("Offset:")?.parse().ok()?;
    Some((
        partition,
        offset,
        fields.next().unwrap_or_default().to_owned(),
    ))
}

/// The group's members as the broker describes them: client id → the partitions of `topic`
/// currently assigned (KIP-848: CURRENT-ASSIGNMENT; classic: ASSIGNMENT).
pub fn describe_members(
    cluster: &Cluster,
    group: &str,
    topic: &str,
) -> BTreeMap<String, BTreeSet<i32>> {
    let args: Vec<String> = [
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        "--bootstrap-server",
        &cluster.bootstrap,
        "--describe",
        "--group",
        group,
        "--members",
        "--verbose",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let out = run_ok(&mut java_tool(&args));
    parse_members(&String::from_utf8_lossy(&out.stdout), group, topic)
}

/// Parses [`describe_members`]' table: a header `GROUP CONSUMER-ID HOST CLIENT-ID ...`, then a
/// row per member whose CURRENT-ASSIGNMENT (KIP-848 group: `topic:0,1`) or ASSIGNMENT (classic
/// group: `topic(0,1)`) column holds its partitions, `-` for none.
pub fn parse_members(table: &str, group: &str, topic: &str) -> BTreeMap<String, BTreeSet<i32>> {
    let mut members = BTreeMap::new();
    let mut assignment_column = None;
    for line in table.lines() {
        let columns: Vec<&str> = line.split_whitespace().collect();
        if columns.first() == Some(&"GROUP") {
            assignment_column = columns
                .iter()
                .position(|c| *c == "CURRENT-ASSIGNMENT" || *c == "ASSIGNMENT");
            continue;
        }
        let Some(column) = assignment_column else {
            continue;
        };
        if columns.len() <= column || columns[0] != group {
            continue;
        }
        let partitions: BTreeSet<i32> = columns[column]
            .strip_prefix(topic)
            .map(|list| {
                list.split(|ch: char| !ch.is_ascii_digit())
                    .filter_map(|n| n.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        members.insert(columns[3].to_owned(), partitions);
    }
    members
}
