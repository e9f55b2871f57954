//! The consumer's tokio side: a background task that keeps the group membership alive and the
//! fetches going, and the handle [`super::Consumer`] calls into.
//!
//! Liveness does not depend on delivery. A member must heartbeat on its interval (and, under
//! the classic protocol, rejoin when a rebalance starts) whatever its record buffer holds and
//! whatever the application does between two polls; the Java consumer (KIP-62), librdkafka
//! and franz-go all heartbeat from a thread or goroutine of their own for that reason. So the
//! requests run in a task of their own ([`run`]): heartbeats, JoinGroup / SyncGroup, the
//! metadata and coordinator look-ups, committed-offset look-ups, resets and fetches. The
//! application's budget is `max.poll.interval.ms` instead of the session timeout: a member
//! that does not call `poll` within it leaves the group, as the Java consumer does.
//!
//! Everything the consumer knows is one [`ConsumerState`] behind a mutex that is held only for
//! synchronous steps, never across an `.await`. `poll` takes what is ready under the lock and
//! returns it in the same step, so dropping a `poll` future loses nothing. Two [`Notify`]s
//! connect the sides: `changed` wakes a waiting `poll` when the background task applied an
//! answer, `wake` makes the background task look again when the application changed something
//! (a poll that acknowledged a revocation, a seek, a subscription, a released hold).
//!
//! KIP-447 and the member epoch. A transactional offset commit carries the generation (the
//! member epoch under KIP-848), and Kafka 4.1 accepts a TxnOffsetCommit only with the exact
//! epoch it holds; it moves the epoch when it processes a heartbeat, so a commit racing a
//! heartbeat is refused although the member owns its partitions (KAFKA-19779; KIP-1251
//! relaxes the broker's check from 4.3). With heartbeats in the background, a commit takes a
//! [`GenerationHold`] first: it waits until no request that may move the generation is in
//! flight (a KIP-848 heartbeat, a classic JoinGroup / SyncGroup round), and while it is held
//! none is started, for at most one heartbeat interval (at least a second) so liveness always
//! wins over a slow commit. The metadata the hold gives is then the coordinator's. Dropping the
//! consumer aborts the task and every request: that is "killed" (no LeaveGroup).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::{JoinHandle, JoinSet};
use tracing::{Instrument, warn};

use super::ConsumerRecord;
use super::hooks::{HooksHandle, Observer};

use super::calls::{call, call_built, find_coordinator, membership_call, timed_out};
use super::config::ConsumerConfig;
use super::membership::MembershipOrRecords;
use super::metrics::{ConsumerMetrics, elapsed_ms};
use super::offsets::{
    PartitionCommitted, committed_offsets, offset_commit_request, offset_fetch_request,
};
use super::state::{Completion, ConsumerState};
use crate::error::{Error, Result};
use crate::net::connection::BrokerLink;
use crate::net::metadata::metadata_request;
use crate::net::ready::{Probe, first_metadata};
use crate::observe::semconv;
use crate::protocol::error_code::ErrorCode;
use crate::telemetry::{InstanceIdCell, Telemetry, TelemetryConfig, link_samples};
use crate::types::{ConsumerGroupMetadata, OffsetToCommit};
use crate::types::{Millis, MonotonicClock, TopicPartition};

/// How long `committed` waits out pending transactional commits (Java's
/// `default.api.timeout.ms`).
const COMMITTED_TIMEOUT: Duration = Duration::from_secs(60);
/// Attempts of one `commit` (coordinator moves, a stale epoch) within `request.timeout.ms`.
const COMMIT_ATTEMPTS: usize = 10;
/// Rounds of one `offsets_for_times` (metadata look-ups, moved leaders) within
/// `request.timeout.ms`.
const LOOKUP_ATTEMPTS: usize = 20;

/// What the application's calls and the background task share.
struct Shared {
    state: Mutex<ConsumerState>,
    clock: MonotonicClock,
    /// The background task applied something a waiting `poll` may want.
    changed: Notify,
    /// The application changed something the background task must act on.
    wake: Notify,
    /// The spans and hooks of what `poll` hands out.
    observer: Observer,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, ConsumerState> {
        // Nothing under the lock panics on network data; if a bug did, the state is still
        // the best there is (and the next call reports what it finds).
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The handle the [`super::Consumer`] owns; the background task runs until it is dropped.
/// Its calls are [`Handle`]'s (through `Deref`).
pub(crate) struct Driver {
    handle: Handle,
    background: JoinHandle<()>,
    uses_kip848: bool,
    /// The KIP-714 metrics pusher (its own task); its terminating push goes out on close.
    telemetry: Telemetry,
}

/// The application's side of the shared state: every call of the consumer. Cloned into the
/// futures of the consumer's streams (which must own what they use); the background task
/// lives as long as the [`Driver`].
#[derive(Clone)]
pub(crate) struct Handle {
    shared: Arc<Shared>,
}

impl std::ops::Deref for Driver {
    type Target = Handle;

    fn deref(&self) -> &Handle {
        &self.handle
    }
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.shared.lock().fmt(f)
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.background.abort();
    }
}

impl Driver {
    /// Milliseconds on the consumer's monotonic clock, the one its state machines and poll
    /// timeouts run on.
    pub(crate) fn now(&self) -> Millis {
        self.shared.clock.now()
    }

    /// Connects to the bootstrap servers, picks the group protocol and starts the background
    /// task (which sends nothing to the group before the first `poll`).
    pub async fn connect(config: ConsumerConfig, hooks: Option<HooksHandle>) -> Result<Self> {
        let observer = observer_of(&config, hooks);
        let clock = MonotonicClock::start();
        let state = ConsumerState::connect(config, || clock.now()).await?;
        let uses_kip848 = state.uses_kip848();
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            clock,
            changed: Notify::new(),
            wake: Notify::new(),
            observer,
        });
        let background = tokio::spawn(run(Arc::clone(&shared)));
        let telemetry = start_telemetry(&shared);
        Ok(Self {
            handle: Handle { shared },
            background,
            uses_kip848,
            telemetry,
        })
    }

    /// Where the consumer reads the client instance id the broker assigned (KIP-714).
    pub fn client_instance_id(&self) -> InstanceIdCell {
        self.telemetry.instance_id()
    }

    /// Whether the group uses KIP-848.
    pub fn uses_kip848(&self) -> bool {
        self.uses_kip848
    }

    /// A handle for a future that must own what it uses (a stream's).
    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// Leaves the group, in whatever state the membership is, with everything it does
    /// (waiting for an auto-commit in flight, the closing auto-commit, the leave) bounded by
    /// one `request.timeout.ms` together, as Java's `close` shares one timer between them.
    pub async fn close(mut self) -> Result<()> {
        let (timeout, client_id) = {
            let state = self.shared.lock();
            (state.config().request_timeout(), state.client_id())
        };
        let deadline = Instant::now() + timeout;
        self.auto_commit_now(true, Some(deadline)).await;
        self.telemetry.close();
        // A KIP-848 heartbeat in flight may be the one that joins: its answer says whether
        // (and with which epoch) there is a membership to leave. A classic JoinGroup is not
        // waited for (the coordinator may hold it for a whole rebalance): the member leaves
        // with the member id it has.
        if self.uses_kip848 {
            self.wait_for(deadline, |s| !s.membership_in_flight()).await;
        }
        self.background.abort();
        let Some((request, link)) = self.shared.lock().leave_for_close() else {
            return Ok(());
        };
        let left = deadline.saturating_duration_since(Instant::now());
        membership_call(&link, request, client_id, left, left)
            .await
            .map(|_| ())
    }
}

/// The metrics pusher over the consumer's bootstrap links, or nothing with
/// `enable.metrics.push=false`.
fn start_telemetry(shared: &Arc<Shared>) -> Telemetry {
    let state = shared.lock();
    let config = state.config();
    if !config.enable_metrics_push {
        return Telemetry::disabled();
    }
    let links = state.link_counters();
    let telemetry = TelemetryConfig {
        links: state.bootstrap_links(),
        client_id: state.client_id(),
        request_timeout: config.request_timeout(),
        prefix: "org.apache.kafka.consumer.",
    };
    drop(state);
    let snapshot = Arc::clone(shared);
    Telemetry::start(
        telemetry,
        Box::new(move || {
            let state = snapshot.lock();
            let mut samples = super::telemetry_samples::samples(
                &state.metrics(),
                state.membership().owned().len(),
            );
            samples.extend(link_samples(&links.read(), state.cluster_metadata()));
            samples
        }),
    )
}

/// What a foreground call needs of the settings, read under the lock once.
struct CallSettings {
    timeout: Duration,
    backoff: Duration,
    client_id: Arc<str>,
}

impl Handle {
    fn call_settings(&self) -> CallSettings {
        let state = self.shared.lock();
        CallSettings {
            timeout: state.config().request_timeout(),
            backoff: state.config().retry_backoff(),
            client_id: state.client_id(),
        }
    }

    fn changed_here(&self) {
        self.shared.wake.notify_one();
    }

    /// Applies a synchronous change and tells the background task.
    fn change<T>(&self, apply: impl FnOnce(&mut ConsumerState) -> T) -> T {
        let result = apply(&mut self.shared.lock());
        self.changed_here();
        result
    }

    pub fn subscribe(&self, topics: Vec<String>) -> Result<()> {
        self.change(|s| s.subscribe(topics))
    }

    #[cfg(feature = "pattern-subscription")]
    pub fn subscribe_pattern(&self, pattern: super::state::TopicPattern) -> Result<()> {
        self.change(|s| s.subscribe_pattern(pattern))
    }

    pub fn assign(&self, partitions: &[TopicPartition]) -> Result<()> {
        self.change(|s| s.assign(partitions))
    }

    pub fn unassign(&self) -> Result<()> {
        self.change(ConsumerState::unassign)
    }

    pub fn set_paused(&self, partitions: &[TopicPartition], paused: bool) -> Result<()> {
        self.change(|s| s.set_paused(partitions, paused))
    }

    pub fn paused(&self) -> Vec<TopicPartition> {
        self.shared.lock().paused()
    }

    pub fn seek_to(&self, partitions: &[TopicPartition], timestamp: i64) -> Result<()> {
        self.change(|s| s.seek_to(partitions, timestamp))
    }

    pub fn group_metadata(&self) -> ConsumerGroupMetadata {
        self.shared.lock().membership().group_metadata()
    }

    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.shared.lock().membership().owned()
    }

    pub fn position(&self, partition: &TopicPartition) -> Option<i64> {
        self.shared.lock().position(partition)
    }

    pub fn seek(&self, partition: &TopicPartition, offset: i64) -> Result<()> {
        self.change(|s| s.seek(partition, offset))
    }

    /// Waits until `done` holds for the state or `deadline` passes; whether it holds.
    async fn wait_for(&self, deadline: Instant, done: impl Fn(&ConsumerState) -> bool) -> bool {
        self.wait_then(deadline, |s| done(s).then_some(true), |_| false)
            .await
    }

    /// Waits until `attempt` succeeds on the state, or `deadline` passes (then `fallback`
    /// runs). Each attempt, and the fallback after the last one, runs in one lock acquisition,
    /// so nothing the background task does comes between a check and what is done on it.
    async fn wait_then<T>(
        &self,
        deadline: Instant,
        mut attempt: impl FnMut(&mut ConsumerState) -> Option<T>,
        fallback: impl FnOnce(&mut ConsumerState) -> T,
    ) -> T {
        loop {
            if let Some(done) = attempt(&mut self.shared.lock()) {
                return done;
            }
            tokio::select! {
                () = self.shared.changed.notified() => {}
                () = tokio::time::sleep_until(deadline.into()) => {
                    let mut state = self.shared.lock();
                    return attempt(&mut state).unwrap_or_else(|| fallback(&mut state));
                }
            }
        }
    }

    /// Waits for the next event (at most `limit` records) until `deadline`; `Ok(None)` when
    /// it passed. With auto-commit, a poll that gives revoked partitions up commits first.
    /// Within the poll's receive span; the hooks see what it found before it returns.
    pub async fn poll(
        &self,
        deadline: Option<Instant>,
        limit: usize,
    ) -> Result<Option<MembershipOrRecords>> {
        let span = self.shared.observer.receive_span();
        let found = self
            .poll_unobserved(deadline, limit)
            .instrument(span.clone())
            .await;
        self.shared.observer.polled(&span, &found);
        found
    }

    /// The `process` span of `record`: see [`crate::Consumer::process_span`].
    pub fn process_span(&self, record: &ConsumerRecord) -> tracing::Span {
        self.shared.observer.process_span(record)
    }

    /// The application processed a record in `elapsed`: see [`crate::Consumer::process`].
    pub fn processed(&self, elapsed: Duration) {
        self.shared.observer.processed(elapsed);
    }

    async fn poll_unobserved(
        &self,
        deadline: Option<Instant>,
        limit: usize,
    ) -> Result<Option<MembershipOrRecords>> {
        self.auto_commit_now(false, None).await;
        self.shared.lock().begin_poll(self.shared.clock.now())?;
        let _polling = PollInProgress(&self.shared);
        // The poll may have given revoked partitions up: the coordinator hears of it now.
        self.changed_here();
        loop {
            if let Some(found) = self.shared.lock().next_for_user(limit)? {
                return Ok(Some(found));
            }
            match deadline {
                Some(deadline) => tokio::select! {
                    () = self.shared.changed.notified() => {}
                    () = tokio::time::sleep_until(deadline.into()) => {
                        return self.shared.lock().next_for_user(limit);
                    }
                },
                None => self.shared.changed.notified().await,
            }
        }
    }

    /// Takes a [`GenerationHold`] for an offset commit, waiting (until `deadline`) for a
    /// generation-moving request in flight to be answered; past the deadline it holds what
    /// there is (a commit with it may then be refused, which is safe).
    pub async fn hold_generation(&self, deadline: Instant) -> GenerationHold {
        let clock = &self.shared.clock;
        let metadata = self
            .wait_then(
                deadline,
                |s| s.try_hold(clock.now()),
                |s| s.hold(clock.now()),
            )
            .await;
        GenerationHold {
            shared: Arc::clone(&self.shared),
            metadata,
        }
    }

    /// Connects, authenticates and fetches metadata through the bootstrap servers, round
    /// after round until one answers or `timeout` passes.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<()> {
        self.fatal()?;
        let (bootstrap, probe, client_id) = {
            let state = self.shared.lock();
            let probe = Probe {
                request_timeout: state.config().request_timeout(),
                retry_backoff: state.config().retry_backoff(),
                deadline: Some(Instant::now() + timeout),
            };
            (state.bootstrap_links(), probe, state.client_id())
        };
        first_metadata(&bootstrap, &client_id, probe)
            .await
            .map(|_| ())
    }

    fn fatal(&self) -> Result<()> {
        match self.shared.lock().fatal() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Auto-commit before revoked partitions are given up (or, `closing`, at `close`):
    /// the current positions, after an auto-commit in flight, both by `deadline` (default:
    /// one `request.timeout.ms` from now). A failure is logged: the partitions move on
    /// regardless (the next owner re-reads from the last commit: at-least-once).
    async fn auto_commit_now(&self, closing: bool, deadline: Option<Instant>) {
        let timeout = {
            let state = self.shared.lock();
            if state.auto_commit_now(closing).is_none() {
                return;
            }
            state.config().request_timeout()
        };
        // One deadline for the wait and the commit (and, at close, the leave after them).
        let deadline = deadline.unwrap_or_else(|| Instant::now() + timeout);
        self.wait_for(deadline, |s| !s.auto_commit_in_flight())
            .await;
        let Some(offsets) = self.shared.lock().auto_commit_now(closing) else {
            return;
        };
        match self.commit_until(&offsets, deadline).await {
            Ok(()) => self.shared.lock().auto_committed(&offsets),
            Err(e) => warn!("auto-commit of {} partitions failed: {e}", offsets.len()),
        }
    }

    /// The error of an offsets call without a `group.id`.
    fn group_required(&self, what: &str) -> Result<()> {
        if self.shared.lock().config().has_group() {
            Ok(())
        } else {
            Err(ConsumerConfig::group_required(what))
        }
    }

    /// The `client_id` and (with a group) `group` labels of the consumer's metrics.
    pub fn metric_labels(&self) -> (String, Option<String>) {
        let state = self.shared.lock();
        let config = state.config();
        (
            config.client_id.clone(),
            config.has_group().then(|| config.group_id.clone()),
        )
    }

    pub fn metrics(&self) -> ConsumerMetrics {
        self.shared.lock().metrics()
    }

    /// Whether every partition read is at its log's end, nothing held (see
    /// [`Fetcher::caught_up`](crate::consumer::fetcher::Fetcher::caught_up)).
    pub fn caught_up(&self) -> bool {
        self.shared.lock().caught_up()
    }

    /// OffsetCommit of `offsets` with this member's identity, under a generation hold
    /// (generation -1 and no member id for a manual assignment), within
    /// `request.timeout.ms`.
    pub async fn commit(&self, offsets: &[OffsetToCommit]) -> Result<()> {
        let deadline = Instant::now() + self.call_settings().timeout;
        self.commit_until(offsets, deadline).await
    }

    /// [`Handle::commit`], every attempt (and the waits between) within `deadline`, under
    /// the conventions' `commit` (settle) span.
    async fn commit_until(&self, offsets: &[OffsetToCommit], deadline: Instant) -> Result<()> {
        let span = self.shared.observer.settle_span(offsets);
        let result = self
            .commit_attempts(offsets, deadline, &span)
            .instrument(span.clone())
            .await;
        if let Err(error) = &result {
            span.record("error.type", error.type_name());
        }
        result
    }

    /// The attempts of one commit; `span` is its settle span, which learns the coordinator.
    async fn commit_attempts(
        &self,
        offsets: &[OffsetToCommit],
        deadline: Instant,
        span: &tracing::Span,
    ) -> Result<()> {
        self.fatal()?;
        self.group_required("commit offsets")?;
        if offsets.is_empty() {
            return Ok(());
        }
        let CallSettings {
            backoff, client_id, ..
        } = self.call_settings();
        let mut last = timed_out("OffsetCommit");
        for _ in 0..COMMIT_ATTEMPTS {
            if Instant::now() >= deadline {
                break;
            }
            let hold = self.hold_generation(deadline).await;
            let request = offset_commit_request(hold.metadata(), offsets);
            let link = self.coordinator_link(deadline).await?;
            semconv::record_server(span, link.address());
            let left = deadline.saturating_duration_since(Instant::now());
            let started = Instant::now();
            match call(&link, request, None, Arc::clone(&client_id), left).await {
                Ok(response) => {
                    let refused = response
                        .topics
                        .iter()
                        .flat_map(|t| &t.partitions)
                        .map(|p| ErrorCode(p.error_code))
                        .find(|code| !code.is_ok());
                    match refused {
                        None => {
                            self.shared.lock().commit_observed(elapsed_ms(started));
                            return Ok(());
                        }
                        Some(
                            code @ (ErrorCode::NOT_COORDINATOR
                            | ErrorCode::COORDINATOR_NOT_AVAILABLE
                            | ErrorCode::COORDINATOR_LOAD_IN_PROGRESS),
                        ) => {
                            self.shared.lock().forget_coordinator();
                            last = Error::broker(code);
                        }
                        // The epoch moved under a heartbeat after a hold that ran out: commit
                        // again with the epoch its answer brought.
                        Some(code @ ErrorCode::STALE_MEMBER_EPOCH) => last = Error::broker(code),
                        Some(code) => {
                            let error = Error::broker(code);
                            hold.refused(&error);
                            return Err(error);
                        }
                    }
                }
                Err(e) if e.is_fatal() => return Err(e),
                Err(e) => {
                    self.shared.lock().forget_coordinator();
                    last = e;
                }
            }
            drop(hold);
            tokio::time::sleep(backoff.min(deadline.saturating_duration_since(Instant::now())))
                .await;
        }
        Err(last)
    }

    /// OffsetFetch with require_stable for `partitions`, waiting out pending transactional
    /// commits (UNSTABLE_OFFSET_COMMIT), bounded.
    pub async fn committed(
        &self,
        partitions: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, Option<i64>)>> {
        self.group_required("look up committed offsets")?;
        let request = offset_fetch_request(&self.shared.lock().config().group_id, partitions);
        let CallSettings {
            timeout,
            backoff,
            client_id,
        } = self.call_settings();
        let deadline = Instant::now() + COMMITTED_TIMEOUT;
        let mut last = timed_out("OffsetFetch");
        while Instant::now() < deadline {
            let link = self.coordinator_link(deadline).await?;
            let left = deadline
                .saturating_duration_since(Instant::now())
                .min(timeout);
            match call(&link, request.clone(), None, Arc::clone(&client_id), left).await {
                Ok(response) => match committed_offsets(&response, partitions) {
                    Ok(found) => match committed_or_error(found) {
                        Ok(offsets) => return Ok(offsets),
                        Err(e) if e.is_retriable() => last = e,
                        Err(e) => return Err(e),
                    },
                    Err(code) => {
                        if matches!(
                            code,
                            ErrorCode::NOT_COORDINATOR | ErrorCode::COORDINATOR_NOT_AVAILABLE
                        ) {
                            self.shared.lock().forget_coordinator();
                        } else if !code.is_retriable() {
                            return Err(Error::GroupRefused {
                                group: self.shared.lock().config().group_id.clone(),
                                api: "OffsetFetch",
                                code,
                            });
                        }
                        last = Error::broker(code);
                    }
                },
                Err(e) if e.is_fatal() => return Err(e),
                Err(e) => {
                    self.shared.lock().forget_coordinator();
                    last = e;
                }
            }
            tokio::time::sleep(backoff).await;
        }
        Err(last)
    }

    /// For each `(partition, timestamp)`, the first offset whose timestamp is at or after it
    /// and that timestamp (`None`: no such record), from each partition's leader (ListOffsets
    /// v1+, KIP-79), bounded by `request.timeout.ms`. Partitions whose leader is unknown get
    /// their metadata looked up first; a leader that moved is looked up again.
    pub async fn offsets_for_times(
        &self,
        queries: &[(TopicPartition, i64)],
    ) -> Result<Vec<(TopicPartition, Option<(i64, i64)>)>> {
        let CallSettings {
            timeout,
            backoff,
            client_id,
        } = self.call_settings();
        let deadline = Instant::now() + timeout;
        let mut found: HashMap<TopicPartition, Option<(i64, i64)>> = HashMap::new();
        let mut last = timed_out("ListOffsets");
        let mut refresh = false;
        for _ in 0..LOOKUP_ATTEMPTS {
            let pending: Vec<(TopicPartition, i64)> = queries
                .iter()
                .filter(|(tp, _)| !found.contains_key(tp))
                .cloned()
                .collect();
            if pending.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                return Err(last);
            }
            let (requests, mut unknown) = self.shared.lock().timestamp_requests(&pending);
            if refresh {
                unknown.extend(pending.iter().map(|(tp, _)| tp.topic.to_string()));
                unknown.sort();
                unknown.dedup();
                refresh = false;
            }
            if !unknown.is_empty() {
                let link = self.shared.lock().any_broker();
                let request = move |version| Ok(metadata_request(Some(unknown), version));
                let left = deadline.saturating_duration_since(Instant::now());
                match call_built(&link, request, None, Arc::clone(&client_id), left).await {
                    Ok(response) => {
                        let missing = response
                            .topics
                            .iter()
                            .map(|t| ErrorCode(t.error_code))
                            .find(|code| !code.is_ok() && !code.is_retriable());
                        if let Some(code) = missing {
                            return Err(Error::broker(code));
                        }
                        self.shared.lock().apply_metadata(&response);
                    }
                    Err(e) if e.is_fatal() => return Err(e),
                    Err(e) => last = e,
                }
            }
            // Partitions whose leaders were unknown are asked next round (after the back-off
            // when a leader is still being elected).
            for (link, request) in requests {
                let left = deadline.saturating_duration_since(Instant::now());
                match call(&link, request, None, Arc::clone(&client_id), left).await {
                    Ok(response) => {
                        for topic in response.topics {
                            for p in topic.partitions {
                                let tp =
                                    TopicPartition::new(topic.name.as_str(), p.partition_index);
                                let code = ErrorCode(p.error_code);
                                if code.is_ok() {
                                    let hit = (p.offset >= 0).then_some((p.offset, p.timestamp));
                                    found.insert(tp, hit);
                                } else if code.is_retriable() || code.invalidates_metadata() {
                                    refresh |= code.invalidates_metadata();
                                    last = Error::broker(code);
                                } else {
                                    return Err(Error::broker(code));
                                }
                            }
                        }
                    }
                    Err(e) if e.is_fatal() => return Err(e),
                    Err(e) => {
                        refresh = true;
                        last = e;
                    }
                }
            }
            if queries.iter().any(|(tp, _)| !found.contains_key(tp)) {
                tokio::time::sleep(backoff).await;
            }
        }
        queries
            .iter()
            .map(|(tp, _)| match found.get(tp) {
                Some(hit) => Ok((tp.clone(), *hit)),
                None => Err(last.clone()),
            })
            .collect()
    }

    /// The coordinator's link, looked up inline if unknown.
    async fn coordinator_link(&self, deadline: Instant) -> Result<BrokerLink> {
        let mut last = timed_out("FindCoordinator");
        while Instant::now() < deadline {
            let (found, group, client_id, backoff) = {
                let mut state = self.shared.lock();
                (
                    state.coordinator_or_bootstrap(),
                    state.config().group_id.clone(),
                    state.client_id(),
                    state.config().retry_backoff(),
                )
            };
            let bootstrap = match found {
                Ok(link) => return Ok(link),
                Err(bootstrap) => bootstrap,
            };
            let left = deadline.saturating_duration_since(Instant::now());
            match find_coordinator(&bootstrap, group, client_id, left).await {
                Ok((address, _)) => self.shared.lock().set_coordinator(address),
                Err(e) if e.is_fatal() => return Err(e),
                Err(e) => {
                    last = e;
                    tokio::time::sleep(backoff).await;
                }
            }
        }
        Err(last)
    }
}

/// The committed offsets of an OffsetFetch answer's partitions, or the first partition's
/// error: retriable as a broker error (UNSTABLE_OFFSET_COMMIT: asked again), else naming the
/// partition.
fn committed_or_error(
    found: Vec<(TopicPartition, PartitionCommitted)>,
) -> Result<Vec<(TopicPartition, Option<i64>)>> {
    found
        .into_iter()
        .map(|(tp, answer)| match answer {
            Ok(committed) => Ok((tp, committed.map(|c| c.offset))),
            Err(code) if code.is_retriable() => Err(Error::broker(code)),
            Err(code) => Err(Error::TopicRefused {
                topic: tp.topic.to_string(),
                partition: Some(tp.partition),
                api: "OffsetFetch",
                code,
            }),
        })
        .collect()
}

/// Marks a `poll` as under way for as long as its future lives (the `max.poll.interval.ms`
/// budget does not run out while the application waits inside `poll`).
struct PollInProgress<'a>(&'a Shared);

impl Drop for PollInProgress<'_> {
    fn drop(&mut self) {
        self.0.lock().end_poll(self.0.clock.now());
        // The budget starts now: the background task arms its timer (M2). Without this it
        // slept on whatever it had waited for, so with every answer held back (a slow
        // coordinator) a member that stopped polling did not leave on time.
        self.0.wake.notify_one();
    }
}

/// Keeps the group's generation (member epoch) where it is while offsets are committed with
/// it (KIP-447), from [`crate::Consumer::hold_generation`].
///
/// While a hold lives, the consumer starts no request that may move the generation (a KIP-848
/// heartbeat, a classic JoinGroup or SyncGroup), for at most one heartbeat interval (at least
/// a second): after that liveness wins, and a commit still under way may be refused
/// (ILLEGAL_GENERATION), which aborts the transaction and is safe. Drop it as soon as the
/// offset commit (`send_offsets_to_transaction` or [`crate::Consumer::commit`]) returned: the
/// commit was validated on arrival, and the transaction's end does not need the hold.
pub struct GenerationHold {
    shared: Arc<Shared>,
    metadata: ConsumerGroupMetadata,
}

impl std::fmt::Debug for GenerationHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GenerationHold")
            .field("metadata", &self.metadata)
            .finish()
    }
}

impl GenerationHold {
    /// The group metadata to commit with: the generation the coordinator holds.
    pub fn metadata(&self) -> &ConsumerGroupMetadata {
        &self.metadata
    }

    /// Tells the consumer that a commit made with this hold's metadata failed with `error`.
    /// When the coordinator's answer says the member or its generation is gone
    /// (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, ILLEGAL_GENERATION, or REBALANCE_IN_PROGRESS
    /// under the classic protocol), the consumer acts on it at once instead of at its next
    /// heartbeat: the buffered records of the partitions it lost are dropped and the next
    /// `poll` returns [`crate::ConsumerEvent::Lost`] (under KIP-848 an ILLEGAL_GENERATION
    /// first holds delivery back until a heartbeat says whether the partitions are still
    /// owned). Returns whether the error was of that kind.
    pub fn refused(&self, error: &Error) -> bool {
        let Some(code) = error.code() else {
            return false;
        };
        let applied =
            self.shared
                .lock()
                .commit_refused(code, &self.metadata, self.shared.clock.now());
        if applied {
            self.shared.wake.notify_one();
            self.shared.changed.notify_one();
        }
        applied
    }
}

impl Drop for GenerationHold {
    fn drop(&mut self) {
        self.shared.lock().release_hold();
        self.shared.wake.notify_one();
    }
}

/// The background task: applies answers, starts what is due, and sleeps until the next
/// timer, answer or change. It ends when the consumer is dropped (the handle aborts it), and
/// every request in flight with it.
async fn run(shared: Arc<Shared>) {
    let mut tasks: JoinSet<Completion> = JoinSet::new();
    loop {
        let wake_at = {
            let mut state = shared.lock();
            let now = shared.clock.now();
            state.maintain(now, &mut tasks);
            shared.clock.instant(state.next_wake(now))
        };
        shared.changed.notify_one();
        tokio::select! {
            Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                let mut state = shared.lock();
                match done {
                    Ok(completion) => state.complete(completion, shared.clock.now()),
                    Err(e) => state.task_failed(&e),
                }
            }
            () = tokio::time::sleep_until(wake_at.into()) => {}
            () = shared.wake.notified() => {}
        }
    }
}

/// The observer of a consumer built from `config`, with the application's hooks.
fn observer_of(config: &ConsumerConfig, hooks: Option<HooksHandle>) -> Observer {
    #[cfg(feature = "opentelemetry")]
    let propagate_trace_context = config.propagate_trace_context;
    // Without the feature no context is carried.
    #[cfg(not(feature = "opentelemetry"))]
    let propagate_trace_context = false;
    Observer::new(
        &config.client_id,
        &config.group_id,
        hooks,
        propagate_trace_context,
    )
}

#[cfg(test)]
mod tests;
