//! Consumer group members as a service runs them, for the group membership tests: each member
//! records what it was handed and when (records, Assigned / Revoked / Lost, refused commits,
//! its close), so a test can check afterwards that every record was delivered while its member
//! owned the partition and that no two members owned one partition at once.
//!
//! Ownership of a partition, as the application sees it, begins when `poll` returns
//! `Assigned`; after `Revoked` it lasts until the next call to `poll` (the call that hands the
//! partitions back); after `Lost` it ended before the member heard of it, so it is counted up
//! to the last `poll` that returned before the `Lost` (the last moment the member could have
//! delivered a record of it); at `close` or drop it ends when the member departs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use exactly::{
    Consumer, ConsumerBuilder, ConsumerEvent, GroupProtocol, IsolationLevel, OffsetReset,
    OffsetToCommit, Record, TopicPartition,
};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{Cluster, ConsumedRecord};

/// Broker error codes that say a member's generation or epoch is no longer the group's:
/// ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID (classic); FENCED_MEMBER_EPOCH,
/// STALE_MEMBER_EPOCH (KIP-848).
pub const FENCING_CODES: [i16; 5] = [22, 25, 82, 110, 113];

/// REBALANCE_IN_PROGRESS: a classic commit between JoinGroup and SyncGroup; it succeeds once
/// the member has synced, so it is tried again, not counted as refused.
const REBALANCE_IN_PROGRESS: i16 = 27;

/// The session timeout of the test bed's groups (KIP-848: the broker's
/// `group.consumer.session.timeout.ms`; classic: what [`consumer_with`] asks for).
pub const SESSION: Duration = Duration::from_secs(6);

/// The heartbeat interval of the test bed's groups (as [`SESSION`]).
pub const HEARTBEAT: Duration = Duration::from_millis(500);

/// The longest a member task runs: a test that forgot to stop one does not hang.
const MEMBER_LIFETIME: Duration = Duration::from_secs(600);

/// A consumer of `cluster` with the test bed's short timeouts (no group, nothing
/// subscribed): manual assignment starts from it, and [`consumer_with`] adds the group.
pub fn test_builder(cluster: &Cluster) -> ConsumerBuilder {
    Consumer::builder()
        .bootstrap(cluster.bootstrap.as_str())
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500")
        .set("max.poll.interval.ms", "20000")
        .set("fetch.max.wait.ms", "200")
        .set("request.timeout.ms", "5000")
}

/// A member of `group` with the test bed's short timeouts, subscribed to `topic`; `extra`
/// properties are set last.
pub async fn consumer_with(
    cluster: &Cluster,
    group: &str,
    protocol: GroupProtocol,
    reset: OffsetReset,
    isolation: IsolationLevel,
    topic: &str,
    extra: &[(&str, &str)],
) -> Consumer {
    let mut builder = test_builder(cluster)
        .group_id(group)
        .group_protocol(protocol)
        .auto_offset_reset(reset)
        .isolation_level(isolation);
    for (key, value) in extra {
        builder = builder.set(*key, *value);
    }
    let mut c = builder.build().await.expect("consumer builds");
    c.subscribe([topic.to_owned()]).unwrap();
    c
}

/// The value of record `index` of `partition`: it names both, padded to `size` bytes.
pub fn padded_value(partition: i32, index: usize, size: usize) -> String {
    let mut value = format!("p{partition}-{index:07}-");
    while value.len() < size {
        value.push('x');
    }
    value
}

/// Writes `per_partition` records of [`padded_value`] (`size` bytes) to each of `partitions`
/// partitions of `topic`, waiting for every acknowledgement (idempotent producer).
pub async fn fill_partitions(
    cluster: &Cluster,
    topic: &str,
    partitions: i32,
    per_partition: usize,
    size: usize,
) {
    let producer = super::producer_with(cluster, &[("linger.ms", "5")], &[]).await;
    let mut acks = Vec::with_capacity(per_partition * partitions as usize);
    for index in 0..per_partition {
        for partition in 0..partitions {
            let record = Record::to(topic)
                .partition(partition)
                .value(padded_value(partition, index, size));
            acks.push(producer.send(record).await.expect("send"));
        }
    }
    for ack in acks {
        ack.await.expect("record written");
    }
    producer.close().await.expect("close");
}

/// How a member leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Departure {
    /// `close()`: it leaves the group, its partitions move at once.
    Close,
    /// Dropped without `close` (a crash): its partitions move when its session expires.
    Drop,
}

/// One record as a member's `poll` handed it over.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// When `poll` returned it.
    pub at: Instant,
    /// Its partition.
    pub partition: TopicPartition,
    /// Its offset.
    pub offset: i64,
    /// Its value (UTF-8, lossy).
    pub value: String,
}

/// One stretch of ownership of a partition by a member.
#[derive(Debug, Clone)]
pub struct Ownership {
    /// When `poll` returned `Assigned`.
    pub from: Instant,
    /// When it ended (see the module documentation); `None` while it lasts.
    pub until: Option<Instant>,
    /// What ended it: "revoked", "lost" or "departed".
    pub ended_by: &'static str,
}

/// A rebalance event as a member saw it.
#[derive(Debug, Clone)]
pub struct MembershipChange {
    /// When `poll` returned it.
    pub at: Instant,
    /// "assigned", "revoked" or "lost".
    pub kind: &'static str,
    /// Its partitions.
    pub partitions: Vec<TopicPartition>,
}

/// A commit that failed.
#[derive(Debug, Clone)]
pub struct FailedCommit {
    /// When it failed.
    pub at: Instant,
    /// The broker's error code, if the error carries one.
    pub code: Option<i16>,
    /// The error as text.
    pub error: String,
}

impl FailedCommit {
    /// Whether the group refused it because the member's generation / epoch is not the
    /// group's any more.
    pub fn is_fencing(&self) -> bool {
        self.code.is_some_and(|c| FENCING_CODES.contains(&c))
    }
}

/// Everything one member did.
#[derive(Debug, Default)]
pub struct MemberLog {
    /// When its first `poll` began.
    pub first_poll: Option<Instant>,
    /// Every record handed over, in order.
    pub deliveries: Vec<Delivery>,
    /// Every rebalance event, in order.
    pub changes: Vec<MembershipChange>,
    /// Per partition, its stretches of ownership in order.
    pub ownership: BTreeMap<TopicPartition, Vec<Ownership>>,
    /// Every failed commit (retried ones included).
    pub failed_commits: Vec<FailedCommit>,
    /// Every error `poll` returned.
    pub poll_errors: Vec<String>,
    /// The starts of the polls that handed revoked partitions back.
    pub revocations_handed_back: Vec<Instant>,
    /// When it departed.
    pub departed: Option<Instant>,
    /// How long `close()` took and what it returned (`None`: not closed, or dropped).
    pub close: Option<(Duration, Result<(), String>)>,
    revoking: Vec<TopicPartition>,
    last_poll_returned: Option<Instant>,
}

impl MemberLog {
    /// The partitions it owns now.
    pub fn owned(&self) -> BTreeSet<TopicPartition> {
        self.ownership
            .iter()
            .filter(|(_, stretches)| stretches.last().is_some_and(|o| o.until.is_none()))
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    /// When it first owned a partition.
    pub fn first_assigned(&self) -> Option<Instant> {
        self.ownership.values().flatten().map(|o| o.from).min()
    }

    /// When it began owning `partition` for the first time at or after `after`.
    pub fn owned_since(&self, partition: &TopicPartition, after: Instant) -> Option<Instant> {
        self.ownership
            .get(partition)?
            .iter()
            .map(|o| o.from)
            .find(|from| *from >= after)
    }

    /// Its `Lost` events.
    pub fn lost(&self) -> Vec<&MembershipChange> {
        self.changes.iter().filter(|c| c.kind == "lost").collect()
    }

    /// The commits the group refused as fenced.
    pub fn refused_commits(&self) -> Vec<&FailedCommit> {
        self.failed_commits
            .iter()
            .filter(|c| c.is_fencing())
            .collect()
    }

    /// The partitions it owned when it departed.
    pub fn owned_at_departure(&self) -> BTreeSet<TopicPartition> {
        self.ownership
            .iter()
            .filter(|(_, stretches)| stretches.last().is_some_and(|o| o.ended_by == "departed"))
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    /// A `poll` call begins: revoked partitions are handed back now.
    fn poll_begins(&mut self, at: Instant) {
        self.first_poll.get_or_insert(at);
        let revoked = std::mem::take(&mut self.revoking);
        if !revoked.is_empty() {
            self.revocations_handed_back.push(at);
        }
        for tp in revoked {
            self.end(&tp, at, "revoked");
        }
    }

    /// `poll` returned `event` at `at`.
    fn take(&mut self, at: Instant, event: &ConsumerEvent) {
        let previous_return = self.last_poll_returned.replace(at);
        let (kind, partitions) = match event {
            ConsumerEvent::Records(records) => {
                self.deliveries.extend(
                    records.iter().map(|r| Delivery {
                        at,
                        partition: r.topic_partition(),
                        offset: r.offset,
                        value: String::from_utf8_lossy(r.value.as_deref().unwrap_or_default())
                            .into_owned(),
                    }),
                );
                return;
            }
            ConsumerEvent::Assigned(tps) => {
                for tp in tps {
                    self.ownership
                        .entry(tp.clone())
                        .or_default()
                        .push(Ownership {
                            from: at,
                            until: None,
                            ended_by: "",
                        });
                }
                ("assigned", tps)
            }
            ConsumerEvent::Revoked(tps) => {
                self.revoking.extend(tps.iter().cloned());
                ("revoked", tps)
            }
            ConsumerEvent::Lost(tps) => {
                let until = previous_return.unwrap_or(at);
                for tp in tps {
                    self.end(tp, until, "lost");
                }
                ("lost", tps)
            }
            other => panic!("an event the membership tests do not know: {other:?}"),
        };
        self.changes.push(MembershipChange {
            at,
            kind,
            partitions: partitions.clone(),
        });
    }

    fn end(&mut self, tp: &TopicPartition, at: Instant, why: &'static str) {
        if let Some(open) = self
            .ownership
            .get_mut(tp)
            .and_then(|s| s.last_mut())
            .filter(|o| o.until.is_none())
        {
            open.until = Some(at.max(open.from));
            open.ended_by = why;
        }
    }

    fn depart(&mut self, at: Instant) {
        self.departed = Some(at);
        let owned: Vec<TopicPartition> = self.owned().into_iter().collect();
        for tp in owned {
            self.end(&tp, at, "departed");
        }
    }

    /// A short account for assertion messages.
    pub fn summary(&self) -> String {
        let t0 = self.first_poll;
        let rel = |t: Instant| t0.map_or(0.0, |t0| t.saturating_duration_since(t0).as_secs_f64());
        let changes: Vec<String> = self
            .changes
            .iter()
            .map(|c| {
                let parts: Vec<i32> = c.partitions.iter().map(|tp| tp.partition).collect();
                format!("{:.2}s {} {parts:?}", rel(c.at), c.kind)
            })
            .collect();
        let failed: Vec<String> = self
            .failed_commits
            .iter()
            .take(5)
            .map(|c| format!("{:.2}s {}", rel(c.at), c.error))
            .collect();
        format!(
            "{} records; changes {changes:?}; {} failed commits (first: {failed:?}); poll errors {:?}",
            self.deliveries.len(),
            self.failed_commits.len(),
            self.poll_errors
        )
    }
}

/// A consumer and the log of what it did.
pub struct Member {
    /// Its name in assertion messages.
    pub name: String,
    consumer: Consumer,
    log: Arc<Mutex<MemberLog>>,
}

impl Member {
    /// Starts a log for `consumer`.
    pub fn new(name: &str, consumer: Consumer) -> Self {
        Self {
            name: name.to_owned(),
            consumer,
            log: Arc::new(Mutex::new(MemberLog::default())),
        }
    }

    /// The log so far.
    pub fn log(&self) -> MutexGuard<'_, MemberLog> {
        lock(&self.log)
    }

    /// The consumer.
    pub fn consumer(&mut self) -> &mut Consumer {
        &mut self.consumer
    }

    /// One `poll_timeout(timeout)`, logged; after records (and after `Revoked`, before the
    /// partitions are handed back) the positions of every owned partition are committed.
    /// Returns the event (`None`: nothing within `timeout`, or an error, which is logged).
    pub async fn poll_once(&mut self, timeout: Duration) -> Option<ConsumerEvent> {
        let event = self.poll_uncommitted(timeout).await?;
        if matches!(event, ConsumerEvent::Records(_) | ConsumerEvent::Revoked(_)) {
            self.commit_positions().await;
        }
        Some(event)
    }

    /// One `poll_timeout(timeout)`, logged, committing nothing (for a test that commits
    /// what it processed itself, or must not wait for a commit).
    pub async fn poll_uncommitted(&mut self, timeout: Duration) -> Option<ConsumerEvent> {
        lock(&self.log).poll_begins(Instant::now());
        let polled = self.consumer.poll_timeout(timeout).await;
        let at = Instant::now();
        let event = match polled {
            Ok(event) => event?,
            Err(e) => {
                lock(&self.log).poll_errors.push(e.to_string());
                return None;
            }
        };
        lock(&self.log).take(at, &event);
        Some(event)
    }

    /// Commits the position of every owned partition (retried, bounded, while the error is
    /// retriable); every failure is logged. Returns the last failure, if the commit did not
    /// succeed.
    pub async fn commit_positions(&mut self) -> Option<FailedCommit> {
        let offsets: Vec<OffsetToCommit> = self
            .consumer
            .assignment()
            .into_iter()
            .filter_map(|tp| {
                let position = self.consumer.position(&tp)?;
                Some(OffsetToCommit::new(tp, position))
            })
            .collect();
        if offsets.is_empty() {
            return None;
        }
        let mut last = None;
        for _ in 0..20 {
            let error = match self.consumer.commit(&offsets).await {
                Ok(()) => return None,
                Err(e) => e,
            };
            let failed = FailedCommit {
                at: Instant::now(),
                code: error.code().map(|c| c.0),
                error: error.to_string(),
            };
            lock(&self.log).failed_commits.push(failed.clone());
            let again = error.is_retriable() || failed.code == Some(REBALANCE_IN_PROGRESS);
            last = Some(failed);
            if !again {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        last
    }

    /// Leaves as `how` says, logging when and (for `close`) how long it took.
    pub async fn depart(self, how: Departure) -> MemberLog {
        lock(&self.log).depart(Instant::now());
        if how == Departure::Close {
            let began = Instant::now();
            let closed =
                match tokio::time::timeout(Duration::from_secs(60), self.consumer.close()).await {
                    Ok(result) => result.map_err(|e| e.to_string()),
                    Err(_) => Err("close did not return within 60 s".into()),
                };
            lock(&self.log).close = Some((began.elapsed(), closed));
        } else {
            drop(self.consumer);
        }
        std::mem::take(&mut *lock(&self.log))
    }
}

fn lock(log: &Mutex<MemberLog>) -> MutexGuard<'_, MemberLog> {
    log.lock().unwrap_or_else(|e| e.into_inner())
}

/// A member on its own task looping the way a service does: `poll` → commit → sleep `pace`,
/// until told to depart.
pub struct BusyMember {
    /// Its name in assertion messages.
    pub name: String,
    log: Arc<Mutex<MemberLog>>,
    depart: watch::Sender<Option<Departure>>,
    task: JoinHandle<MemberLog>,
}

impl BusyMember {
    /// Starts `member`'s loop.
    pub fn spawn(mut member: Member, pace: Duration) -> Self {
        let (depart, mut told) = watch::channel(None);
        let log = Arc::clone(&member.log);
        let name = member.name.clone();
        let task = tokio::spawn(async move {
            let end = Instant::now() + MEMBER_LIFETIME;
            let how = loop {
                // A test that panicked dropped the sender: that is a crash.
                match told.has_changed() {
                    Err(_) => break Departure::Drop,
                    Ok(_) => {
                        if let Some(how) = *told.borrow() {
                            break how;
                        }
                    }
                }
                if Instant::now() > end {
                    break Departure::Close;
                }
                // A departure does not wait for the poll or the sleep (poll is cancel safe).
                tokio::select! {
                    _ = member.poll_once(Duration::from_secs(1)) => {}
                    _ = told.changed() => continue,
                }
                tokio::select! {
                    () = tokio::time::sleep(pace) => {}
                    _ = told.changed() => {}
                }
            };
            member.depart(how).await
        });
        Self {
            name,
            log,
            depart,
            task,
        }
    }

    /// The log so far.
    pub fn log(&self) -> MutexGuard<'_, MemberLog> {
        lock(&self.log)
    }

    /// Tells the member to depart now, without waiting for it.
    pub fn depart_now(&self, how: Departure) {
        self.depart.send_replace(Some(how));
    }

    /// Departs as `how` says and returns the whole log.
    pub async fn depart(self, how: Departure) -> MemberLog {
        self.depart_now(how);
        self.finish().await
    }

    /// Waits for a member told to depart and returns its log.
    pub async fn finish(self) -> MemberLog {
        tokio::time::timeout(Duration::from_secs(90), self.task)
            .await
            .unwrap_or_else(|_| panic!("{} did not depart within 90 s", self.name))
            .unwrap_or_else(|e| panic!("{}'s task failed: {e}", self.name))
    }
}

/// Waits (bounded by `within`, checking every 50 ms) until `done` holds; panics with `what`
/// and `context()` otherwise. Returns when it held.
pub async fn wait_until(
    what: &str,
    within: Duration,
    mut done: impl FnMut() -> bool,
    context: impl Fn() -> String,
) -> Instant {
    let end = Instant::now() + within;
    loop {
        if done() {
            return Instant::now();
        }
        assert!(
            Instant::now() < end,
            "{what}: not within {within:?}; {}",
            context()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every record `log`'s member delivered was of a partition it owned at that moment.
pub fn assert_delivered_while_owned(name: &str, log: &MemberLog) {
    for d in &log.deliveries {
        let owned = log.ownership.get(&d.partition).is_some_and(|stretches| {
            stretches
                .iter()
                .any(|o| o.from <= d.at && o.until.is_none_or(|u| d.at <= u))
        });
        assert!(
            owned,
            "{name} delivered {}-{} offset {} while it did not own the partition: {}",
            d.partition.topic,
            d.partition.partition,
            d.offset,
            log.summary()
        );
    }
}

/// No partition was owned by two members at once.
pub fn assert_no_overlapping_ownership(logs: &[(&str, &MemberLog)]) {
    for (i, (a, log_a)) in logs.iter().enumerate() {
        for (b, log_b) in &logs[i + 1..] {
            for (tp, stretches_a) in &log_a.ownership {
                let Some(stretches_b) = log_b.ownership.get(tp) else {
                    continue;
                };
                for x in stretches_a {
                    for y in stretches_b {
                        let x_end = x.until.unwrap_or_else(Instant::now);
                        let y_end = y.until.unwrap_or_else(Instant::now);
                        let overlap = x.from < y_end && y.from < x_end;
                        assert!(
                            !overlap,
                            "{a} and {b} owned {}-{} at once ({a}'s ended by {:?} {:?} after {b}'s began): {a}: {}; {b}: {}",
                            tp.topic,
                            tp.partition,
                            x.ended_by,
                            x_end.saturating_duration_since(y.from),
                            log_a.summary(),
                            log_b.summary()
                        );
                    }
                }
            }
        }
    }
}

/// Across all members, no record was delivered twice, each partition was delivered from its
/// first offset without a gap, and every record delivered is the one the independent reader
/// (`expected`, kcat) holds at that offset. Returns how many records were delivered.
pub fn assert_delivered_once(logs: &[(&str, &MemberLog)], expected: &[ConsumedRecord]) -> usize {
    let by_offset: BTreeMap<(i32, i64), &ConsumedRecord> = expected
        .iter()
        .map(|r| ((r.partition, r.offset), r))
        .collect();
    let mut delivered: BTreeMap<(i32, i64), &str> = BTreeMap::new();
    for (name, log) in logs {
        for d in &log.deliveries {
            let key = (d.partition.partition, d.offset);
            if let Some(first) = delivered.insert(key, name) {
                panic!(
                    "{}-{} offset {} delivered twice (by {first} and {name}); {name}: {}",
                    d.partition.topic,
                    key.0,
                    key.1,
                    log.summary()
                );
            }
            let record = by_offset
                .get(&key)
                .unwrap_or_else(|| panic!("{name} delivered {key:?}, which kcat does not hold"));
            assert_eq!(
                record.value.as_deref(),
                Some(d.value.as_str()),
                "{name} delivered {key:?} with another value than kcat read"
            );
        }
    }
    let mut per_partition: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for (partition, offset) in delivered.keys() {
        per_partition.entry(*partition).or_default().push(*offset);
    }
    for (partition, offsets) in &per_partition {
        let first = by_offset
            .keys()
            .find(|(p, _)| p == partition)
            .map_or(0, |k| k.1);
        let contiguous: Vec<i64> = (first..first + offsets.len() as i64).collect();
        assert_eq!(
            offsets, &contiguous,
            "partition {partition}: the delivered offsets have a gap"
        );
    }
    delivered.len()
}
