//! What the consumer knows and decides, shared between the application's calls and the
//! background task ([`super::driver`]): broker links, metadata, the group coordinator, the
//! membership state machine, the fetch positions and their buffers, and the requests they ask
//! for. Every method is synchronous and runs under the consumer's lock; the requests it
//! starts run in the background task's [`JoinSet`], and their answers come back through
//! [`ConsumerState::complete`]. Its time is [`Millis`] on the driver's monotonic clock, as the
//! membership's and the producer engine's: the driver reads the clock, this decides.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tracing::{debug, warn};

use super::ConsumerRecord;
use super::calls::{call, find_coordinator, membership_call};
use super::config::{ConsumerConfig, GroupProtocol};
use super::fetcher::{Fetched, Fetcher, Followup};
use super::membership::classic::ClassicMember;
use super::membership::kip848::ConsumerMember;
use super::membership::manual::ManualAssignment;
use super::membership::{
    Membership, MembershipEvent, MembershipRequest, MembershipResponse, TopicView,
};
use super::offsets::{committed_offsets, offset_commit_request, offset_fetch_request};
use crate::client::connection::{BrokerLink, LinkConfig, LinkSecurity};
use crate::client::metadata::{ClusterMetadata, TopicMetadata};
use crate::client::ready::{Probe, first_metadata};
use crate::error::{Error, ErrorChain, Result};
use crate::protocol::ApiKey;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::messages::fetch::FetchResponse;
use crate::protocol::messages::list_offsets::{ListOffsetsRequest, ListOffsetsResponse};
use crate::protocol::messages::metadata::{
    MetadataRequest, MetadataRequestTopic, MetadataResponse,
};
use crate::protocol::messages::offset_commit::OffsetCommitResponse;
use crate::protocol::messages::offset_fetch::OffsetFetchResponse;
use crate::types::{BrokerId, Millis, TopicPartition};
use crate::types::{ConsumerGroupMetadata, OffsetToCommit};

/// Fetch v12 is the last version that names topics (v13+ use topic ids, KIP-516).
const FETCH_VERSION_CAP: i16 = 12;
/// OffsetFetch v10 names topics by id (Kafka 4.2).
pub(crate) const OFFSET_FETCH_VERSION_CAP: i16 = 9;
/// The shortest a generation hold lasts before liveness wins (see `ConsumerState::hold`).
const MIN_HOLD_MS: Millis = 1_000;

/// A finished request.
pub(crate) enum Completion {
    Metadata(Result<MetadataResponse>),
    Coordinator(Result<(String, i32)>),
    Membership(Result<MembershipResponse>),
    Fetch {
        broker: BrokerId,
        fetched: Vec<Fetched>,
        result: Result<FetchResponse>,
    },
    Committed {
        partitions: Vec<TopicPartition>,
        result: Result<OffsetFetchResponse>,
    },
    Listed {
        partitions: Vec<TopicPartition>,
        result: Result<ListOffsetsResponse>,
    },
    /// The LeaveGroup (or leaving heartbeat) after `max.poll.interval.ms` was answered or
    /// failed; nothing to apply.
    Left,
    /// An auto-commit (`enable.auto.commit`) of `offsets`, made with `metadata`, ended.
    AutoCommitted {
        offsets: Vec<OffsetToCommit>,
        metadata: ConsumerGroupMetadata,
        result: Result<OffsetCommitResponse>,
    },
}

/// A pattern subscription ([`crate::Consumer::subscribe_pattern`]): the regex as the user
/// wrote it (what KIP-848 sends) and its anchored compiled form (what the classic protocol
/// matches with).
#[cfg(feature = "pattern-subscription")]
pub(crate) struct TopicPattern {
    pub regex: String,
    pub matcher: regex::Regex,
}
/// A pattern subscription; uninhabited without the `pattern-subscription` feature.
#[cfg(not(feature = "pattern-subscription"))]
pub(crate) enum TopicPattern {}

impl TopicPattern {
    fn is_match(&self, topic: &str) -> bool {
        #[cfg(feature = "pattern-subscription")]
        return self.matcher.is_match(topic);
        #[cfg(not(feature = "pattern-subscription"))]
        {
            let _ = topic;
            match *self {}
        }
    }
}

/// The back-off timers an answer can set.
#[derive(Debug, Clone, Copy)]
enum RetryTimer {
    Fetch,
    List,
    Committed,
}

/// The metadata as the membership sees it.
struct View<'a> {
    metadata: &'a ClusterMetadata,
    ids: &'a HashMap<[u8; 16], Arc<str>>,
}

impl TopicView for View<'_> {
    fn partition_count(&self, topic: &str) -> Option<i32> {
        match self.metadata.topics.get(topic)? {
            TopicMetadata::Known { leaders } => i32::try_from(leaders.len()).ok(),
            // The broker said it does not exist (or is not ours to see): nothing to assign.
            TopicMetadata::Failed(_) => Some(0),
        }
    }

    fn topic_name(&self, topic_id: &[u8; 16]) -> Option<Arc<str>> {
        self.ids.get(topic_id).cloned()
    }
}

/// Everything the consumer holds.
pub(crate) struct ConsumerState {
    config: ConsumerConfig,
    client_id: Arc<str>,
    link_config: LinkConfig,
    bootstrap: Vec<BrokerLink>,
    next_bootstrap: usize,
    links: HashMap<BrokerId, BrokerLink>,
    metadata: ClusterMetadata,
    topic_ids: HashMap<[u8; 16], Arc<str>>,
    metadata_stale: bool,
    metadata_in_flight: bool,
    metadata_retry_at: Option<Millis>,
    coordinator: Option<BrokerLink>,
    coordinator_in_flight: bool,
    coordinator_retry_at: Option<Millis>,
    membership: Membership,
    membership_in_flight: bool,
    /// Whether the group (when there is one) speaks KIP-848: a consumer that goes back from
    /// manual assignment to a subscription gets that membership again.
    group_kip848: bool,
    subscription: Vec<String>,
    /// A pattern subscription: KIP-848 sends it to the coordinator; the classic protocol
    /// matches it here against every topic of the metadata (refreshed at
    /// `metadata.max.age.ms`), and `subscription` holds the topics it matched.
    pattern: Option<TopicPattern>,
    metadata_refresh_at: Option<Millis>,
    /// Auto-commit: the positions at the start of the latest `poll` (what earlier polls
    /// handed out), the offsets last committed, when the next commit is due, whether one is
    /// in flight.
    consumed: HashMap<TopicPartition, i64>,
    auto_committed: HashMap<TopicPartition, i64>,
    auto_commit_at: Millis,
    auto_commit_in_flight: bool,
    fetcher: Fetcher,
    committed_in_flight: bool,
    committed_retry_at: Option<Millis>,
    listing: HashSet<TopicPartition>,
    list_retry_at: Option<Millis>,
    fetching: HashSet<BrokerId>,
    fetch_retry_at: Option<Millis>,
    /// An error for the next `poll` (not fatal: e.g. no offset under `auto.offset.reset=none`).
    pending_error: Option<Error>,
    /// The coordinator's address (for the link `close` leaves on).
    coordinator_address: Option<String>,
    /// Nothing is sent to the group before the first `poll` (as the Java consumer joins in
    /// its first `poll`).
    polled_once: bool,
    /// Calls to `poll` under way (their futures not yet finished or dropped).
    polls_in_progress: usize,
    /// When a `poll` last began or ended: the start of the `max.poll.interval.ms` budget.
    last_poll: Millis,
    /// The member left the group for exceeding `max.poll.interval.ms`; the next `poll` rejoins.
    left_for_poll_timeout: bool,
    /// Generation holds taken by offset commits, and until when they keep
    /// generation-moving requests back.
    holds: usize,
    hold_until: Option<Millis>,
    /// A fatal error: every later call returns it.
    fatal: Option<Error>,
}

impl std::fmt::Debug for ConsumerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumerState")
            .field("group_id", &self.config.group_id)
            .field("subscription", &self.subscription)
            .field("membership", &self.membership)
            .finish_non_exhaustive()
    }
}

/// A random member id for ConsumerGroupHeartbeat v1 (KIP-1082: the client makes it up).
fn new_member_id() -> String {
    let state = std::hash::RandomState::new();
    let a = state.hash_one(1u8);
    let b = state.hash_one(std::time::SystemTime::now());
    format!("{a:016x}{b:016x}")
}

impl ConsumerState {
    /// Connects to the bootstrap servers, reads the cluster's API versions and picks the
    /// group protocol; `now` reads the driver's clock once that is done.
    pub async fn connect(config: ConsumerConfig, now: impl FnOnce() -> Millis) -> Result<Self> {
        let link_config = LinkConfig::new(
            config.client_id.clone(),
            Duration::from_millis(config.request_timeout_ms),
            Duration::from_millis(config.reconnect_backoff_ms),
            Duration::from_millis(config.reconnect_backoff_max_ms),
            LinkSecurity::from_config(&config.security)?,
        );
        let client_id: Arc<str> = Arc::from(config.client_id.as_str());
        let bootstrap: Vec<BrokerLink> = config
            .bootstrap_servers
            .iter()
            .map(|a| BrokerLink::spawn(a.clone(), link_config.clone()))
            .collect();
        // One Metadata call tells the brokers and, through the connection's ApiVersions,
        // whether the cluster speaks KIP-848. One round over the bootstrap servers: when none
        // answers, the error names each with its last failure.
        let probe = Probe {
            request_timeout: config.request_timeout(),
            retry_backoff: config.retry_backoff(),
            deadline: None,
        };
        let (response, versions) = first_metadata(&bootstrap, &client_id, probe).await?;
        let mut metadata = ClusterMetadata::default();
        metadata.update(&response);
        let kip848 = config.group_protocol == GroupProtocol::Consumer
            && versions
                .range(ApiKey::ConsumerGroupHeartbeat as i16)
                .is_some();
        if !kip848 && config.group_protocol == GroupProtocol::Consumer && config.has_group() {
            debug!("the broker has no ConsumerGroupHeartbeat: using the classic protocol");
        }
        let membership = if config.has_group() {
            group_membership(&config, kip848)
        } else {
            Membership::Manual(ManualAssignment::new(String::new(), &[]))
        };
        let now = now();
        let auto_commit_at = now.saturating_add(config.auto_commit_interval_millis());
        Ok(Self {
            client_id,
            link_config,
            bootstrap,
            next_bootstrap: 0,
            links: HashMap::new(),
            metadata,
            topic_ids: HashMap::new(),
            metadata_stale: true,
            metadata_in_flight: false,
            metadata_retry_at: None,
            coordinator: None,
            coordinator_in_flight: false,
            coordinator_retry_at: None,
            membership,
            membership_in_flight: false,
            group_kip848: kip848,
            subscription: Vec::new(),
            pattern: None,
            metadata_refresh_at: None,
            consumed: HashMap::new(),
            auto_committed: HashMap::new(),
            auto_commit_at,
            auto_commit_in_flight: false,
            fetcher: Fetcher::new(&config),
            committed_in_flight: false,
            committed_retry_at: None,
            listing: HashSet::new(),
            list_retry_at: None,
            fetching: HashSet::new(),
            fetch_retry_at: None,
            pending_error: None,
            coordinator_address: None,
            polled_once: false,
            polls_in_progress: 0,
            last_poll: now,
            left_for_poll_timeout: false,
            holds: 0,
            hold_until: None,
            fatal: None,
            config,
        })
    }

    /// Whether the group uses KIP-848.
    pub fn uses_kip848(&self) -> bool {
        matches!(self.membership, Membership::Consumer(_))
    }

    /// Subscribes to `topics` (replacing a subscription or pattern).
    pub fn subscribe(&mut self, topics: Vec<String>) -> Result<()> {
        self.enter_group()?;
        self.pattern = None;
        self.subscription = topics.clone();
        self.metadata_stale = true;
        self.membership.subscribe(topics);
        Ok(())
    }

    /// Subscribes to every topic whose name matches `pattern` (replacing a subscription).
    #[cfg(feature = "pattern-subscription")]
    pub fn subscribe_pattern(&mut self, pattern: TopicPattern) -> Result<()> {
        self.enter_group()?;
        match &mut self.membership {
            Membership::Consumer(m) => {
                m.subscribe_regex(pattern.regex.clone());
                self.subscription.clear();
            }
            // The topics it matches once the metadata of every topic is in.
            _ => {
                self.subscription.clear();
                self.membership.subscribe(Vec::new());
            }
        }
        self.pattern = Some(pattern);
        self.metadata_stale = true;
        Ok(())
    }

    /// A subscription needs a group: a `group.id`, and no manual assignment in force (a
    /// consumer without partitions assigned by hand gets its group membership back).
    fn enter_group(&mut self) -> Result<()> {
        if !self.config.has_group() {
            return Err(ConsumerConfig::group_required("subscribe"));
        }
        if let Membership::Manual(manual) = &self.membership {
            if !manual.partitions().is_empty() {
                return Err(Error::InvalidState(
                    "subscribe: partitions are assigned by hand; unassign first".into(),
                ));
            }
            self.membership = group_membership(&self.config, self.group_kip848);
        }
        Ok(())
    }

    /// Assigns `partitions` by hand (replacing an earlier manual assignment): no group
    /// membership. Partitions kept from the earlier assignment keep their positions (and
    /// pauses); new ones start from the committed offset (with a `group.id`) or
    /// `auto.offset.reset`.
    pub fn assign(&mut self, partitions: &[TopicPartition]) -> Result<()> {
        if self.membership.in_group()
            && (!self.subscription.is_empty()
                || self.pattern.is_some()
                || !self.membership.owned().is_empty())
        {
            return Err(Error::InvalidState(
                "assign: the consumer is subscribed to a group; assign and subscribe do not mix"
                    .into(),
            ));
        }
        let manual = ManualAssignment::new(self.config.group_id.clone(), partitions);
        let kept: HashSet<TopicPartition> = manual.partitions().iter().cloned().collect();
        self.fetcher.retain(&kept);
        let followup = self
            .fetcher
            .assigned(manual.partitions(), self.config.has_group());
        if let Some(e) = followup.error {
            self.pending_error = Some(e);
        }
        self.membership = Membership::Manual(manual);
        self.consumed.retain(|tp, _| kept.contains(tp));
        self.metadata_stale = true;
        Ok(())
    }

    /// Ends a manual assignment: nothing more is fetched or delivered.
    pub fn unassign(&mut self) -> Result<()> {
        if self.membership.in_group() {
            return Err(Error::InvalidState(
                "unassign: the consumer is subscribed to a group, not assigned by hand".into(),
            ));
        }
        self.assign(&[])
    }

    /// Pauses (`true`) or resumes owned partitions (see [`Fetcher::set_paused`]).
    pub fn set_paused(&mut self, partitions: &[TopicPartition], paused: bool) -> Result<()> {
        self.fetcher.set_paused(partitions, paused)
    }

    /// The paused partitions.
    pub fn paused(&self) -> Vec<TopicPartition> {
        self.fetcher.paused()
    }

    /// Moves owned partitions to the log start or end (see [`Fetcher::seek_to`]).
    pub fn seek_to(&mut self, partitions: &[TopicPartition], timestamp: i64) -> Result<()> {
        self.fetcher.seek_to(partitions, timestamp)
    }

    /// The ListOffsets requests for `(partition, timestamp)` pairs, one per leader, and the
    /// topics whose leaders are unknown (their metadata is to be looked up first).
    pub fn timestamp_requests(
        &mut self,
        queries: &[(TopicPartition, i64)],
    ) -> (Vec<(BrokerLink, ListOffsetsRequest)>, Vec<String>) {
        let mut by_leader: HashMap<BrokerId, Vec<(&TopicPartition, i64)>> = HashMap::new();
        let mut unknown: Vec<String> = Vec::new();
        for (tp, timestamp) in queries {
            match self.leader_of(tp) {
                Some(leader) => by_leader.entry(leader).or_default().push((tp, *timestamp)),
                None => unknown.push(tp.topic.to_string()),
            }
        }
        unknown.sort();
        unknown.dedup();
        let mut requests = Vec::new();
        for (leader, queries) in by_leader {
            match self.link_for(leader) {
                Some(link) => requests.push((link, self.fetcher.list_request(queries))),
                None => unknown.extend(queries.iter().map(|(tp, _)| tp.topic.to_string())),
            }
        }
        (requests, unknown)
    }

    /// A broker to ask for metadata.
    pub fn any_broker(&mut self) -> BrokerLink {
        self.next_bootstrap()
    }

    /// Metadata looked up by an application call: kept as the background task's is.
    pub fn apply_metadata(&mut self, response: &MetadataResponse) {
        self.metadata.update(response);
        for topic in &response.topics {
            if let Some(name) = &topic.name
                && topic.topic_id != [0; 16]
            {
                self.topic_ids
                    .insert(topic.topic_id, Arc::from(name.as_str()));
            }
        }
    }

    pub fn membership(&self) -> &Membership {
        &self.membership
    }

    pub fn position(&self, partition: &TopicPartition) -> Option<i64> {
        self.fetcher.position(partition)
    }

    pub fn seek(&mut self, partition: &TopicPartition, offset: i64) -> Result<()> {
        self.fetcher.seek(partition, offset)
    }

    fn next_bootstrap(&mut self) -> BrokerLink {
        // Any known broker will do; start with the ones from the metadata.
        let known: Vec<BrokerId> = self.metadata.brokers.keys().copied().collect();
        self.next_bootstrap = self.next_bootstrap.wrapping_add(1);
        if !known.is_empty() && self.next_bootstrap.is_multiple_of(2) {
            let id = known[(self.next_bootstrap / 2) % known.len()];
            if let Some(link) = self.link_for(id) {
                return link;
            }
        }
        self.bootstrap[self.next_bootstrap % self.bootstrap.len()].clone()
    }

    fn link_for(&mut self, broker: BrokerId) -> Option<BrokerLink> {
        if let Some(link) = self.links.get(&broker) {
            return Some(link.clone());
        }
        let address = self.metadata.brokers.get(&broker)?.clone();
        let link = BrokerLink::spawn(address, self.link_config.clone());
        self.links.insert(broker, link.clone());
        Some(link)
    }

    fn leader_of(&self, tp: &TopicPartition) -> Option<BrokerId> {
        match self.metadata.topics.get(&tp.topic)? {
            TopicMetadata::Known { leaders } => {
                *leaders.get(usize::try_from(tp.partition).ok()?)?
            }
            TopicMetadata::Failed(_) => None,
        }
    }

    /// When a request that failed at `now` may go again (`retry.backoff.ms` later).
    fn after_backoff(&self, now: Millis) -> Millis {
        now.saturating_add(self.config.retry_backoff_millis())
    }

    /// A `poll` begins: revocations handed over at the previous one are given up now (the
    /// user had that whole time to commit them), the processing timer restarts
    /// (`max.poll.interval.ms`), and a member that left for exceeding it rejoins.
    pub fn begin_poll(&mut self, now: Millis) -> Result<()> {
        if let Some(e) = &self.fatal {
            return Err(e.clone());
        }
        if self.subscription.is_empty()
            && self.pattern.is_none()
            && self.membership.owned().is_empty()
        {
            return Err(Error::InvalidState(
                "poll before subscribe or assign: the consumer has no topics".into(),
            ));
        }
        self.membership.on_poll(now);
        self.drop_unowned();
        if self.config.enable_auto_commit {
            // What the polls before this one handed out, the application has processed.
            self.consumed = self
                .fetcher
                .positions()
                .map(|(tp, offset)| (tp.clone(), offset))
                .collect();
        }
        self.left_for_poll_timeout = false;
        self.polled_once = true;
        self.polls_in_progress += 1;
        self.last_poll = now;
        Ok(())
    }

    /// A `poll` ended (returned, or its future was dropped).
    pub fn end_poll(&mut self, now: Millis) {
        self.polls_in_progress = self.polls_in_progress.saturating_sub(1);
        self.last_poll = now;
    }

    /// What `poll` hands over now, if anything: an error, a rebalance event (always before
    /// records, so records of a partition that is revoked or lost are dropped first), or
    /// up to `limit` records of the partitions this member may deliver.
    pub fn next_for_user(&mut self, limit: usize) -> Result<Option<MembershipOrRecords>> {
        if let Some(e) = self.pending_error.take() {
            return Err(e);
        }
        if let Some(e) = &self.fatal {
            return Err(e.clone());
        }
        let view = View {
            metadata: &self.metadata,
            ids: &self.topic_ids,
        };
        if let Some(event) = self.membership.next_event(&view) {
            self.apply_event(&event);
            return Ok(Some(MembershipOrRecords::Membership(event)));
        }
        let records = self
            .fetcher
            .take_records(&self.membership.fetchable(), limit);
        // A batch that failed to decode is reported after the records before it.
        if let Some(e) = self.fetcher.take_decode_error() {
            match records {
                Some(_) => self.pending_error = Some(e),
                None => return Err(e),
            }
        }
        Ok(records.map(MembershipOrRecords::Records))
    }

    /// The background task's turn: leaves the group if the application stopped polling, then
    /// starts every request that is due.
    pub fn maintain(&mut self, now: Millis, tasks: &mut JoinSet<Completion>) {
        if self.fatal.is_some() {
            return;
        }
        if self.membership.in_group() {
            self.check_poll_interval(now, tasks);
        }
        self.start_work(now, tasks);
    }

    /// `max.poll.interval.ms` is the application's processing budget (KIP-62): a member that
    /// has not called `poll` within it leaves the group, so its partitions move to a member
    /// that makes progress, and it learns `Lost` at its next `poll`, which rejoins. The Java
    /// consumer's heartbeat thread does the same ("consumer poll timeout has expired").
    fn check_poll_interval(&mut self, now: Millis, tasks: &mut JoinSet<Completion>) {
        if self.polls_in_progress > 0 || !self.polled_once || self.left_for_poll_timeout {
            return;
        }
        if now.saturating_sub(self.last_poll) < self.config.max_poll_interval_ms {
            return;
        }
        warn!(
            group = %self.config.group_id,
            "no poll within max.poll.interval.ms ({} ms): leaving the group; the next poll \
             reports the partitions lost and rejoins",
            self.config.max_poll_interval_ms
        );
        self.left_for_poll_timeout = true;
        let leave = self.membership.leave_until_next_poll();
        self.drop_unowned();
        if let (Some(request), Some(link)) = (leave, self.coordinator.clone()) {
            // On the coordinator link, behind any heartbeat in flight, so the coordinator
            // sees the leave before the rejoin of the next poll.
            let timeout = self.config.request_timeout();
            let client_id = Arc::clone(&self.client_id);
            tasks.spawn(async move {
                if let Err(e) = membership_call(&link, request, client_id, timeout, timeout).await {
                    debug!(
                        "leaving the group after max.poll.interval.ms failed: {}",
                        ErrorChain(&e)
                    );
                }
                Completion::Left
            });
        }
    }

    /// When the background task must look again, at the latest.
    pub fn next_wake(&self, now: Millis) -> Millis {
        let budget_running =
            self.polled_once && self.polls_in_progress == 0 && !self.left_for_poll_timeout;
        let poll_budget_ends = budget_running.then(|| {
            self.last_poll
                .saturating_add(self.config.max_poll_interval_ms)
        });
        [
            self.membership.next_deadline(),
            self.metadata_retry_at,
            self.coordinator_retry_at,
            self.committed_retry_at,
            self.list_retry_at,
            self.fetch_retry_at,
            self.hold_until,
            poll_budget_ends,
            self.metadata_refresh_at,
            self.config
                .enable_auto_commit
                .then_some(self.auto_commit_at),
        ]
        .into_iter()
        .flatten()
        // A timer already past was acted on by `maintain` or waits for an answer in flight
        // (which wakes the task); counting it would spin.
        .filter(|t| *t > now)
        .min()
        .unwrap_or(now + 1_000)
        .max(now + 1)
    }

    /// Drops what is buffered for partitions this member no longer owns, at once: a fenced
    /// member delivers nothing more of them (the partitions may be another member's already).
    fn drop_unowned(&mut self) {
        let owned: HashSet<TopicPartition> = self.membership.owned().into_iter().collect();
        self.fetcher.retain(&owned);
        self.consumed.retain(|tp, _| owned.contains(tp));
    }

    /// A request task ended without its completion (it cannot panic on network data; this is
    /// a bug): which request it carried is unknown, so the consumer stops rather than wait
    /// for an answer that will never come (DESIGN P9).
    pub fn task_failed(&mut self, e: &tokio::task::JoinError) {
        warn!("a consumer request task failed: {e}");
        self.fatal = Some(Error::InvalidState(format!(
            "a consumer request task failed: {e}"
        )));
    }

    /// Whether a request that may move the generation (member epoch) is in flight or under
    /// way: a KIP-848 heartbeat (the coordinator bumps the epoch when it processes one), or a
    /// classic JoinGroup / SyncGroup round.
    pub fn generation_moving(&self) -> bool {
        (self.membership_in_flight && self.uses_kip848()) || self.membership.joining()
    }

    /// Holds the generation for an offset commit (see [`super::driver::GenerationHold`]):
    /// until `release_hold`, or for at most one heartbeat interval (at least a second), no
    /// request that may move the generation is started. Returns the metadata to commit with.
    pub fn hold(&mut self, now: Millis) -> ConsumerGroupMetadata {
        let limit = self.membership.heartbeat_interval_ms().max(MIN_HOLD_MS);
        let until = now.saturating_add(limit);
        self.hold_until = Some(self.hold_until.map_or(until, |t| t.max(until)));
        self.holds += 1;
        self.membership.group_metadata()
    }

    /// One hold ended.
    pub fn release_hold(&mut self) {
        self.holds = self.holds.saturating_sub(1);
        if self.holds == 0 {
            self.hold_until = None;
        }
    }

    /// Whether a hold keeps generation-moving requests back now.
    fn generation_held(&self, now: Millis) -> bool {
        self.hold_until.is_some_and(|until| until > now)
            && self.membership.next_request_moves_generation()
    }

    /// An offset commit made with `metadata` was refused with `code`. When the refusal says
    /// the member is gone or its generation is (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
    /// ILLEGAL_GENERATION, classic REBALANCE_IN_PROGRESS), the membership acts on it now
    /// instead of at the next heartbeat, and what is buffered for partitions it no longer
    /// owns is dropped: nothing of them is delivered after a fenced commit. A refusal of a
    /// generation the member has already left is ignored. Returns whether it applied.
    pub fn commit_refused(
        &mut self,
        code: ErrorCode,
        metadata: &ConsumerGroupMetadata,
        now: Millis,
    ) -> bool {
        if self.membership.group_metadata() != *metadata {
            return false;
        }
        let applied = self.membership.commit_refused(code, now);
        if applied {
            debug!(%code, group = %metadata.group_id, "offset commit refused: membership acts on it");
            self.drop_unowned();
        }
        applied
    }

    fn apply_event(&mut self, event: &MembershipEvent) {
        match event {
            MembershipEvent::Assigned(tps) => {
                self.fetcher.assigned(tps, true);
                self.metadata_stale = true;
            }
            MembershipEvent::Revoked(tps) => self.fetcher.revoked(tps),
            MembershipEvent::Lost(tps) => {
                let lost: HashSet<&TopicPartition> = tps.iter().collect();
                let kept: HashSet<TopicPartition> = self
                    .fetcher
                    .partitions()
                    .filter(|tp| !lost.contains(tp))
                    .cloned()
                    .collect();
                self.fetcher.retain(&kept);
                // A lost partition's offsets must not be committed.
                self.consumed.retain(|tp, _| kept.contains(tp));
            }
        }
    }

    fn due(at: Option<Millis>, now: Millis) -> bool {
        at.is_none_or(|t| t <= now)
    }

    /// Starts every request that is due and not already in flight.
    fn start_work(&mut self, now: Millis, tasks: &mut JoinSet<Completion>) {
        let view = View {
            metadata: &self.metadata,
            ids: &self.topic_ids,
        };
        let mut wanted: Vec<String> = self.subscription.clone();
        match &self.membership {
            Membership::Consumer(m) => {
                if m.unknown_topic_ids(&view) {
                    self.metadata_stale = true;
                }
            }
            Membership::Classic(m) => {
                let extra = m.wanted_topics();
                if extra.iter().any(|t| view.partition_count(t).is_none()) {
                    self.metadata_stale = true;
                }
                wanted.extend(extra);
            }
            Membership::Manual(_) => {}
        }
        for tp in self.fetcher.partitions() {
            if self.leader_of(tp).is_none() {
                self.metadata_stale = true;
            }
            wanted.push(tp.topic.to_string());
        }
        wanted.sort();
        wanted.dedup();
        if self.pattern.is_some() && Self::due(self.metadata_refresh_at, now) {
            self.metadata_stale = true;
        }
        if self.metadata_stale && !self.metadata_in_flight && Self::due(self.metadata_retry_at, now)
        {
            self.metadata_in_flight = true;
            let link = self.next_bootstrap();
            // A pattern matches among every topic (and KIP-848 assigns topics by id whose
            // names only the full metadata tells).
            let topics = self.pattern.is_none().then(|| {
                wanted
                    .iter()
                    .map(|t| MetadataRequestTopic {
                        topic_id: [0; 16],
                        name: Some(t.clone()),
                    })
                    .collect()
            });
            let request = MetadataRequest {
                topics,
                allow_auto_topic_creation: false,
                ..MetadataRequest::default()
            };
            let timeout = self.config.request_timeout();
            let client_id = Arc::clone(&self.client_id);
            tasks.spawn(async move {
                Completion::Metadata(call(&link, request, None, client_id, timeout).await)
            });
        }

        if self.config.has_group()
            && self.coordinator.is_none()
            && !self.coordinator_in_flight
            && Self::due(self.coordinator_retry_at, now)
        {
            self.coordinator_in_flight = true;
            let link = self.next_bootstrap();
            let group = self.config.group_id.clone();
            let timeout = self.config.request_timeout();
            let client_id = Arc::clone(&self.client_id);
            tasks.spawn(async move {
                Completion::Coordinator(find_coordinator(&link, group, client_id, timeout).await)
            });
        }

        if let Some(coordinator) = self.coordinator.clone() {
            if !self.membership_in_flight && self.polled_once && !self.generation_held(now) {
                let view = View {
                    metadata: &self.metadata,
                    ids: &self.topic_ids,
                };
                if let Some(request) = self.membership.poll_request(now, &view) {
                    self.membership_in_flight = true;
                    let timeout = self.config.request_timeout();
                    // A JoinGroup waits for the whole rebalance.
                    let join_timeout =
                        timeout + Duration::from_millis(self.config.max_poll_interval_ms);
                    let client_id = Arc::clone(&self.client_id);
                    let link = coordinator.clone();
                    tasks.spawn(async move {
                        Completion::Membership(
                            membership_call(&link, request, client_id, timeout, join_timeout).await,
                        )
                    });
                }
            }
            self.start_committed_lookup(&coordinator, now, tasks);
            self.start_auto_commit(&coordinator, now, tasks);
        }
        self.start_resets(now, tasks);
        self.start_fetches(now, tasks);
    }

    /// `enable.auto.commit`: every `auto.commit.interval.ms`, the positions at the start of
    /// the latest poll (what earlier polls handed out) that changed since the last commit,
    /// committed with a generation hold (no heartbeat moves the epoch under it).
    fn start_auto_commit(
        &mut self,
        coordinator: &BrokerLink,
        now: Millis,
        tasks: &mut JoinSet<Completion>,
    ) {
        if !self.config.enable_auto_commit
            || self.auto_commit_in_flight
            || now < self.auto_commit_at
            || self.generation_moving()
        {
            return;
        }
        self.auto_commit_at = now.saturating_add(self.config.auto_commit_interval_millis());
        let offsets = self.offsets_to_auto_commit(&self.consumed);
        if offsets.is_empty() {
            return;
        }
        self.auto_commit_in_flight = true;
        let metadata = self.hold(now);
        let request = offset_commit_request(&metadata, &offsets);
        let link = coordinator.clone();
        let timeout = self.config.request_timeout();
        let client_id = Arc::clone(&self.client_id);
        tasks.spawn(async move {
            let result = call(&link, request, None, client_id, timeout).await;
            Completion::AutoCommitted {
                offsets,
                metadata,
                result,
            }
        });
    }

    /// Of `positions`, those of owned partitions that differ from the last auto-commit.
    fn offsets_to_auto_commit(
        &self,
        positions: &HashMap<TopicPartition, i64>,
    ) -> Vec<OffsetToCommit> {
        let owned: HashSet<TopicPartition> = self.membership.owned().into_iter().collect();
        let mut offsets: Vec<OffsetToCommit> = positions
            .iter()
            .filter(|(tp, offset)| {
                owned.contains(*tp) && self.auto_committed.get(*tp) != Some(*offset)
            })
            .map(|(tp, offset)| OffsetToCommit::new(tp.clone(), *offset))
            .collect();
        offsets.sort_by(|a, b| a.partition.cmp(&b.partition));
        offsets
    }

    /// Auto-commit before partitions are given up (a poll that follows a `Revoked`) and at
    /// `close`: the current positions (every record handed out so far was processed), if
    /// auto-commit is on and, unless `closing`, a revocation is pending.
    pub fn auto_commit_now(&self, closing: bool) -> Option<Vec<OffsetToCommit>> {
        if !self.config.enable_auto_commit {
            return None;
        }
        let revoking = self.membership.in_group()
            && self.membership.owned().len() > self.membership.fetchable().len();
        if !closing && !revoking {
            return None;
        }
        let positions: HashMap<TopicPartition, i64> = self
            .fetcher
            .positions()
            .map(|(tp, offset)| (tp.clone(), offset))
            .collect();
        let offsets = self.offsets_to_auto_commit(&positions);
        (!offsets.is_empty()).then_some(offsets)
    }

    /// Whether an auto-commit is in flight (an application-side one waits for it, so an
    /// older commit never lands after a newer one).
    pub fn auto_commit_in_flight(&self) -> bool {
        self.auto_commit_in_flight
    }

    /// `offsets` were committed.
    pub fn auto_committed(&mut self, offsets: &[OffsetToCommit]) {
        for o in offsets {
            self.auto_committed.insert(o.partition.clone(), o.offset);
        }
    }

    fn apply_auto_commit(
        &mut self,
        offsets: Vec<OffsetToCommit>,
        metadata: &ConsumerGroupMetadata,
        result: Result<OffsetCommitResponse>,
        now: Millis,
    ) {
        self.auto_commit_in_flight = false;
        self.release_hold();
        let refused = match result {
            Ok(response) => response
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| ErrorCode(p.error_code))
                .find(|code| !code.is_ok()),
            Err(e) => {
                debug!("auto-commit failed: {e}");
                self.coordinator = None;
                self.auto_commit_at = self.after_backoff(now);
                return;
            }
        };
        match refused {
            None => self.auto_committed(&offsets),
            Some(
                code @ (ErrorCode::NOT_COORDINATOR
                | ErrorCode::COORDINATOR_NOT_AVAILABLE
                | ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
                | ErrorCode::STALE_MEMBER_EPOCH),
            ) => {
                debug!(%code, "auto-commit refused: again after the back-off");
                if code != ErrorCode::STALE_MEMBER_EPOCH {
                    self.coordinator = None;
                }
                self.auto_commit_at = self.after_backoff(now);
            }
            Some(code) => {
                warn!(%code, "auto-commit refused");
                self.commit_refused(code, metadata, now);
            }
        }
    }

    fn start_committed_lookup(
        &mut self,
        coordinator: &BrokerLink,
        now: Millis,
        tasks: &mut JoinSet<Completion>,
    ) {
        if self.committed_in_flight || !Self::due(self.committed_retry_at, now) {
            return;
        }
        let partitions = self
            .fetcher
            .awaiting_committed(&self.membership.fetchable());
        if partitions.is_empty() {
            return;
        }
        self.committed_in_flight = true;
        let request = offset_fetch_request(&self.config.group_id, &partitions);
        let link = coordinator.clone();
        let timeout = self.config.request_timeout();
        let client_id = Arc::clone(&self.client_id);
        tasks.spawn(async move {
            let result = call(
                &link,
                request,
                Some(OFFSET_FETCH_VERSION_CAP),
                client_id,
                timeout,
            )
            .await;
            Completion::Committed { partitions, result }
        });
    }

    fn start_resets(&mut self, now: Millis, tasks: &mut JoinSet<Completion>) {
        if !Self::due(self.list_retry_at, now) {
            return;
        }
        let mut by_leader: HashMap<BrokerId, Vec<TopicPartition>> = HashMap::new();
        for tp in self.fetcher.awaiting_reset(&self.listing) {
            match self.leader_of(&tp) {
                Some(leader) => by_leader.entry(leader).or_default().push(tp),
                None => self.metadata_stale = true,
            }
        }
        for (leader, partitions) in by_leader {
            let Some(link) = self.link_for(leader) else {
                self.metadata_stale = true;
                continue;
            };
            self.listing.extend(partitions.iter().cloned());
            let request = self.fetcher.reset_request(&partitions);
            let timeout = self.config.request_timeout();
            let client_id = Arc::clone(&self.client_id);
            tasks.spawn(async move {
                let result = call(&link, request, None, client_id, timeout).await;
                Completion::Listed { partitions, result }
            });
        }
    }

    fn start_fetches(&mut self, now: Millis, tasks: &mut JoinSet<Completion>) {
        if !Self::due(self.fetch_retry_at, now) {
            return;
        }
        let mut by_leader: HashMap<BrokerId, Vec<Fetched>> = HashMap::new();
        for fetched in self.fetcher.to_fetch(&self.membership.fetchable()) {
            match self.leader_of(&fetched.0) {
                Some(leader) if !self.fetching.contains(&leader) => {
                    by_leader.entry(leader).or_default().push(fetched);
                }
                Some(_) => {}
                None => self.metadata_stale = true,
            }
        }
        for (leader, fetched) in by_leader {
            let Some(link) = self.link_for(leader) else {
                self.metadata_stale = true;
                continue;
            };
            self.fetching.insert(leader);
            let request = self.fetcher.fetch_request(&fetched);
            let timeout = self.config.request_timeout()
                + Duration::from_millis(self.config.fetch_max_wait_ms);
            let client_id = Arc::clone(&self.client_id);
            tasks.spawn(async move {
                let result =
                    call(&link, request, Some(FETCH_VERSION_CAP), client_id, timeout).await;
                Completion::Fetch {
                    broker: leader,
                    fetched,
                    result,
                }
            });
        }
    }

    /// Acts on what an answer asks for.
    fn follow_up(&mut self, followup: Followup, retry_at: RetryTimer, now: Millis) {
        self.metadata_stale |= followup.refresh_metadata;
        if followup.retry {
            let at = Some(self.after_backoff(now));
            match retry_at {
                RetryTimer::Fetch => self.fetch_retry_at = at,
                RetryTimer::List => self.list_retry_at = at,
                RetryTimer::Committed => self.committed_retry_at = at,
            }
        }
        if let Some(e) = followup.error {
            self.pending_error = Some(e);
        }
    }

    /// Applies a finished request.
    pub fn complete(&mut self, completion: Completion, now: Millis) {
        match completion {
            Completion::Metadata(result) => {
                self.metadata_in_flight = false;
                match result {
                    Ok(response) => {
                        self.apply_metadata(&response);
                        if self.pattern.is_some() {
                            self.match_pattern(&response);
                            self.metadata_refresh_at =
                                Some(now.saturating_add(self.config.metadata_max_age_ms));
                        }
                        self.metadata_stale = false;
                        // Unknown leaders are asked again, not in a tight loop.
                        self.metadata_retry_at = Some(self.after_backoff(now));
                    }
                    Err(e) => {
                        debug!("consumer metadata request failed: {}", ErrorChain(&e));
                        self.metadata_retry_at = Some(self.after_backoff(now));
                    }
                }
            }
            Completion::Coordinator(result) => {
                self.coordinator_in_flight = false;
                match result {
                    // Its own link: a fetch waiting fetch.max.wait.ms must not delay
                    // heartbeats.
                    Ok((address, _node)) => self.set_coordinator(address),
                    Err(e) => {
                        debug!("FindCoordinator failed: {}", ErrorChain(&e));
                        self.coordinator_retry_at = Some(self.after_backoff(now));
                    }
                }
            }
            Completion::Membership(result) => {
                self.membership_in_flight = false;
                match result {
                    Ok(response) => {
                        if coordinator_moved(&response) {
                            self.coordinator = None;
                        }
                        let view = View {
                            metadata: &self.metadata,
                            ids: &self.topic_ids,
                        };
                        if let Err(e) = self.membership.on_response(response, now, &view) {
                            warn!("group membership failed: {}", ErrorChain(&e));
                            self.fatal = Some(e);
                        }
                        // A fenced member's buffered records go at once, not when `Lost` is
                        // handed over.
                        self.drop_unowned();
                    }
                    Err(e) => {
                        debug!("group request failed: {}", ErrorChain(&e));
                        if e.is_fatal() {
                            self.fatal = Some(e);
                            return;
                        }
                        self.coordinator = None;
                        self.membership
                            .on_request_failed(now, self.config.retry_backoff_millis());
                    }
                }
            }
            Completion::Fetch {
                broker,
                fetched,
                result,
            } => {
                self.fetching.remove(&broker);
                match result {
                    Ok(response) => {
                        let followup = self.fetcher.apply_fetch(response, fetched);
                        self.follow_up(followup, RetryTimer::Fetch, now);
                    }
                    Err(e) => {
                        debug!("fetch from broker {broker} failed: {}", ErrorChain(&e));
                        if e.is_fatal() {
                            self.fatal = Some(e);
                            return;
                        }
                        self.metadata_stale = true;
                        self.fetch_retry_at = Some(self.after_backoff(now));
                    }
                }
            }
            Completion::Left => {}
            Completion::AutoCommitted {
                offsets,
                metadata,
                result,
            } => self.apply_auto_commit(offsets, &metadata, result, now),
            Completion::Committed { partitions, result } => {
                self.committed_in_flight = false;
                self.apply_committed(partitions, result, now);
            }
            Completion::Listed { partitions, result } => {
                for tp in &partitions {
                    self.listing.remove(tp);
                }
                match result {
                    Ok(response) => {
                        let followup = self.fetcher.apply_listed(response);
                        self.follow_up(followup, RetryTimer::List, now);
                    }
                    Err(e) => {
                        debug!("ListOffsets failed: {}", ErrorChain(&e));
                        self.metadata_stale = true;
                        self.list_retry_at = Some(self.after_backoff(now));
                    }
                }
            }
        }
    }

    /// Classic pattern subscription: the topics of a full metadata answer that match
    /// (internal topics never do, as Java's `exclude.internal.topics`) become the
    /// subscription, and the member rejoins when they changed.
    fn match_pattern(&mut self, response: &MetadataResponse) {
        let Some(pattern) = &self.pattern else {
            return;
        };
        if !matches!(self.membership, Membership::Classic(_)) {
            return;
        }
        let mut matched: Vec<String> = response
            .topics
            .iter()
            .filter(|t| !t.is_internal && ErrorCode(t.error_code).is_ok())
            .filter_map(|t| t.name.clone())
            .filter(|name| pattern.is_match(name))
            .collect();
        matched.sort();
        if matched != self.subscription {
            debug!(
                ?matched,
                "pattern subscription: the matching topics changed"
            );
            self.subscription = matched.clone();
            self.membership.subscribe(matched);
        }
    }

    fn apply_committed(
        &mut self,
        partitions: Vec<TopicPartition>,
        result: Result<OffsetFetchResponse>,
        now: Millis,
    ) {
        let response = match result {
            Ok(r) => r,
            Err(e) => {
                debug!("OffsetFetch failed: {}", ErrorChain(&e));
                self.coordinator = None;
                self.committed_retry_at = Some(self.after_backoff(now));
                return;
            }
        };
        let offsets = match committed_offsets(&response, &partitions) {
            Ok(offsets) => offsets,
            Err(code) => {
                if matches!(
                    code,
                    ErrorCode::NOT_COORDINATOR | ErrorCode::COORDINATOR_NOT_AVAILABLE
                ) {
                    self.coordinator = None;
                }
                // UNSTABLE_OFFSET_COMMIT: a transaction that commits offsets is pending; the
                // answer comes once it completes (KIP-447).
                self.committed_retry_at = Some(self.after_backoff(now));
                return;
            }
        };
        let followup = self.fetcher.apply_committed(offsets);
        self.follow_up(followup, RetryTimer::Committed, now);
    }

    /// The settings.
    pub fn config(&self) -> &ConsumerConfig {
        &self.config
    }

    /// The bootstrap servers' links (for `wait_ready`).
    pub fn bootstrap_links(&self) -> Vec<BrokerLink> {
        self.bootstrap.clone()
    }

    /// The client id requests carry.
    pub fn client_id(&self) -> Arc<str> {
        Arc::clone(&self.client_id)
    }

    /// A fatal error, if the consumer has one.
    pub fn fatal(&self) -> Option<Error> {
        self.fatal.clone()
    }

    /// The group coordinator's link, if known; else a broker to ask where it is.
    pub fn coordinator_or_bootstrap(&mut self) -> std::result::Result<BrokerLink, BrokerLink> {
        match &self.coordinator {
            Some(link) => Ok(link.clone()),
            None => Err(self.next_bootstrap()),
        }
    }

    /// The coordinator is at `address`.
    pub fn set_coordinator(&mut self, address: String) {
        self.coordinator = Some(BrokerLink::spawn(address.clone(), self.link_config.clone()));
        self.coordinator_address = Some(address);
        self.coordinator_retry_at = None;
    }

    /// The coordinator moved or its link failed: look it up again.
    pub fn forget_coordinator(&mut self) {
        self.coordinator = None;
    }

    /// Whether a membership request is in flight.
    pub fn membership_in_flight(&self) -> bool {
        self.membership_in_flight
    }

    /// For `close`: the request that leaves the group (if the member is in one) and a new
    /// link to the coordinator to send it on. A new link, not the coordinator link: a
    /// JoinGroup the coordinator holds for a whole rebalance would queue the LeaveGroup
    /// behind it (a broker answers one connection's requests in order), and the rebalance
    /// may be waiting for this very member to leave.
    pub fn leave_for_close(&mut self) -> Option<(MembershipRequest, BrokerLink)> {
        let request = self.membership.leave()?;
        let address = self.coordinator_address.clone()?;
        Some((
            request,
            BrokerLink::spawn(address, self.link_config.clone()),
        ))
    }
}

/// The group membership for `config`'s `group.id`: KIP-848 when the broker speaks it (and
/// `group.protocol` asks for it), else classic.
fn group_membership(config: &ConsumerConfig, kip848: bool) -> Membership {
    let rebalance_timeout_ms = i32::try_from(config.max_poll_interval_ms).unwrap_or(i32::MAX);
    if kip848 {
        Membership::Consumer(ConsumerMember::new(
            config.group_id.clone(),
            new_member_id(),
            config.group_instance_id.clone(),
            rebalance_timeout_ms,
            config.group_remote_assignor.clone(),
        ))
    } else {
        Membership::Classic(ClassicMember::new(
            config.group_id.clone(),
            config.group_instance_id.clone(),
            i32::try_from(config.session_timeout_ms).unwrap_or(i32::MAX),
            rebalance_timeout_ms,
            config.heartbeat_interval_ms,
            config.partition_assignment_strategy,
        ))
    }
}

/// What `poll` found.
pub(crate) enum MembershipOrRecords {
    Membership(MembershipEvent),
    Records(Vec<ConsumerRecord>),
}

fn coordinator_moved(response: &MembershipResponse) -> bool {
    let code = match response {
        MembershipResponse::ConsumerHeartbeat(r) => r.error_code,
        MembershipResponse::Join(r) => r.error_code,
        MembershipResponse::Sync(r) => r.error_code,
        MembershipResponse::Heartbeat(r) => r.error_code,
    };
    matches!(
        ErrorCode(code),
        ErrorCode::NOT_COORDINATOR | ErrorCode::COORDINATOR_NOT_AVAILABLE
    )
}
