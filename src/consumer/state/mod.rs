//! What the consumer knows and decides, shared between the application's calls and the
//! background task ([`super::driver`]): broker links, metadata, the group coordinator, the
//! membership state machine, the fetch positions and their buffers, and the requests they ask
//! for. Every method is synchronous and runs under the consumer's lock; the requests it
//! starts run in the background task's [`JoinSet`](tokio::task::JoinSet), and their answers
//! come back through [`ConsumerState::complete`]. Its time is [`Millis`] on the driver's
//! monotonic clock, as the membership's and the producer engine's: the driver reads the
//! clock, this decides.
//!
//! This module holds the state, its construction, the subscription and assignment calls and
//! the broker links; the rest of [`ConsumerState`]'s methods live by role:
//! - [`poll`]: the application's side: what `poll` hands over, and the
//!   `max.poll.interval.ms` budget between two polls (KIP-62);
//! - [`background`]: the background task's side: which requests are due, and what their
//!   answers change;
//! - [`commit`]: offset commits: generation holds (KIP-447), refused commits, auto-commit.

mod background;
mod commit;
mod errors;
mod poll;

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::Duration;

use tracing::debug;

use super::config::ConsumerConfig;
use super::fetch_session::Fetched;
use super::fetcher::{Asked, FetchConfig, Fetcher};
use super::membership::classic::{ClassicMember, ClassicMemberConfig};
use super::membership::kip848::{ConsumerMember, ConsumerMemberConfig};
use super::membership::manual::ManualAssignment;
use super::membership::{Membership, MembershipRequest, MembershipResponse, TopicView};
use super::metrics::{ConsumerFigures, ConsumerMetrics};
use super::vocabulary::GroupProtocol;
use crate::error::{Error, Result};
use crate::net::connection::{BrokerLink, LinkConfig, LinkCounters};
use crate::net::metadata::{ClusterMetadata, TopicMetadata};
use crate::net::ready::{BootstrapLinks, Probe, bootstrap_links, first_metadata};
use crate::observe::{self, ClientKind};
use crate::protocol::ApiKey;
use crate::protocol::messages::fetch::FetchResponse;
use crate::protocol::messages::list_offsets::ListOffsetsResponse;
use crate::protocol::messages::metadata::MetadataResponse;
use crate::protocol::messages::offset_commit::OffsetCommitResponse;
use crate::protocol::messages::offset_fetch::OffsetFetchResponse;
use crate::protocol::messages::offset_for_leader_epoch::OffsetForLeaderEpochResponse;
use crate::types::{BrokerId, Millis, TopicPartition};
use crate::types::{ConsumerGroupMetadata, OffsetToCommit};
use errors::PendingErrors;
use kafka_protocol::messages::ListOffsetsRequest;

/// A finished request.
pub(crate) enum Completion {
    Metadata(Result<MetadataResponse>),
    Coordinator(Result<(String, i32)>),
    Membership(Result<MembershipResponse>),
    Fetch {
        broker: BrokerId,
        fetched: Vec<Fetched>,
        result: Result<FetchResponse>,
        /// The round trip, in ms.
        latency_ms: u64,
    },
    Committed {
        asked: Vec<Asked>,
        result: Result<OffsetFetchResponse>,
    },
    Listed {
        asked: Vec<Asked>,
        result: Result<ListOffsetsResponse>,
    },
    /// Positions validated with their leader after it changed (KIP-320).
    Validated {
        asked: Vec<Asked>,
        result: Result<OffsetForLeaderEpochResponse>,
    },
    /// The LeaveGroup (or leaving heartbeat) after `max.poll.interval.ms` was answered or
    /// failed; nothing to apply.
    Left,
    /// An auto-commit (`enable.auto.commit`) of `offsets`, made with `metadata`, ended.
    AutoCommitted {
        offsets: Vec<OffsetToCommit>,
        metadata: ConsumerGroupMetadata,
        result: Result<OffsetCommitResponse>,
        /// The round trip, in ms.
        latency_ms: u64,
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
    /// Auto-commit: the offsets last committed, when the next commit is due, whether one is
    /// in flight (what it commits, the positions at the start of the latest `poll`, the
    /// fetcher keeps: [`Fetcher::processed`]).
    auto_committed: HashMap<TopicPartition, i64>,
    auto_commit_at: Millis,
    auto_commit_in_flight: bool,
    fetcher: Fetcher,
    committed_in_flight: bool,
    committed_retry_at: Option<Millis>,
    /// The tokens of the positions a ListOffsets is in flight for.
    listing: HashSet<u64>,
    list_retry_at: Option<Millis>,
    /// The tokens of the positions an OffsetForLeaderEpoch is in flight for.
    validating: HashSet<u64>,
    validate_retry_at: Option<Millis>,
    fetching: HashSet<BrokerId>,
    fetch_retry_at: Option<Millis>,
    /// Errors for the next polls (not fatal: a refused topic or group, no offset under
    /// `auto.offset.reset=none`, a truncated log), one per cause.
    errors: PendingErrors,
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
    /// The metrics' running figures and their facade handles.
    figures: ConsumerFigures,
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
    pub async fn connect(mut config: ConsumerConfig, now: impl FnOnce() -> Millis) -> Result<Self> {
        if config.client_id.is_empty() {
            config.client_id = observe::default_client_id(ClientKind::Consumer).to_string();
        }
        let links = bootstrap_links(
            &config.client_id,
            Duration::from_millis(config.request_timeout_ms),
            (
                Duration::from_millis(config.reconnect_backoff_ms),
                Duration::from_millis(config.reconnect_backoff_max_ms),
            ),
            &config.security,
            &config.bootstrap_servers,
        )?;
        // One Metadata call tells the brokers and, through the connection's ApiVersions,
        // whether the cluster speaks KIP-848. One round over the bootstrap servers: when none
        // answers, the error names each with its last failure.
        let probe = Probe {
            request_timeout: config.request_timeout(),
            retry_backoff: config.retry_backoff(),
            deadline: None,
        };
        let (response, versions) = first_metadata(&links.links, &links.client_id, probe).await?;
        let mut metadata = ClusterMetadata::default();
        metadata.update(&response);
        let kip848 = config.group_protocol == GroupProtocol::Consumer
            && versions
                .range(ApiKey::ConsumerGroupHeartbeat as i16)
                .is_some();
        if !kip848 && config.group_protocol == GroupProtocol::Consumer && config.has_group() {
            debug!("the broker has no ConsumerGroupHeartbeat: using the classic protocol");
        }
        Ok(Self::new(config, links, metadata, kip848, now()))
    }

    /// The state of a consumer connected through `links`, knowing `metadata`, whose group
    /// (if it has one) speaks KIP-848 when `kip848`; `now` on the driver's clock.
    pub(crate) fn new(
        config: ConsumerConfig,
        links: BootstrapLinks,
        metadata: ClusterMetadata,
        kip848: bool,
        now: Millis,
    ) -> Self {
        let BootstrapLinks {
            link_config,
            client_id,
            links: bootstrap,
        } = links;
        let membership = if config.has_group() {
            group_membership(&config, kip848)
        } else {
            Membership::Manual(ManualAssignment::new(String::new(), &[]))
        };
        let auto_commit_at = now.saturating_add(config.auto_commit_interval_millis());
        Self {
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
            auto_committed: HashMap::new(),
            auto_commit_at,
            auto_commit_in_flight: false,
            fetcher: Fetcher::new(fetch_config(&config)),
            committed_in_flight: false,
            committed_retry_at: None,
            listing: HashSet::new(),
            list_retry_at: None,
            validating: HashSet::new(),
            validate_retry_at: None,
            fetching: HashSet::new(),
            fetch_retry_at: None,
            errors: PendingErrors::default(),
            coordinator_address: None,
            polled_once: false,
            polls_in_progress: 0,
            last_poll: now,
            left_for_poll_timeout: false,
            holds: 0,
            hold_until: None,
            fatal: None,
            figures: ConsumerFigures::new(
                &config.client_id,
                config.has_group().then_some(config.group_id.as_str()),
            ),
            config,
        }
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
        for e in followup.errors {
            self.errors.push(e);
        }
        self.membership = Membership::Manual(manual);
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
        self.fetcher.metadata_refreshed();
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
        leader_in(self.metadata.topics.get(&*tp.topic), tp.partition)
    }

    /// When a request that failed at `now` may go again (`retry.backoff.ms` later).
    fn after_backoff(&self, now: Millis) -> Millis {
        now.saturating_add(self.config.retry_backoff_millis())
    }

    /// The settings.
    pub fn config(&self) -> &ConsumerConfig {
        &self.config
    }

    /// The bootstrap servers' links (for `wait_ready`).
    pub fn bootstrap_links(&self) -> Vec<BrokerLink> {
        self.bootstrap.clone()
    }

    /// What the consumer's links count: connections and per-broker requests (KIP-714).
    pub fn link_counters(&self) -> Arc<LinkCounters> {
        self.link_config.counters()
    }

    /// The cluster as the last Metadata answer described it.
    pub fn cluster_metadata(&self) -> &ClusterMetadata {
        &self.metadata
    }

    /// The client id requests carry.
    pub fn metrics(&self) -> ConsumerMetrics {
        self.figures
            .snapshot(self.fetcher.lags(), self.fetcher.session_counts())
    }

    /// [`Fetcher::caught_up`](crate::consumer::fetcher::Fetcher::caught_up).
    pub fn caught_up(&self) -> bool {
        self.fetcher.caught_up()
    }

    /// An explicit offset commit the coordinator accepted after `latency_ms`.
    pub fn commit_observed(&mut self, latency_ms: u64) {
        self.figures.committed(latency_ms);
    }

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
        Membership::Consumer(ConsumerMember::new(ConsumerMemberConfig {
            group_id: config.group_id.clone(),
            member_id: new_member_id(),
            instance_id: config.group_instance_id.clone(),
            rebalance_timeout_ms,
            server_assignor: config.group_remote_assignor.clone(),
        }))
    } else {
        Membership::Classic(ClassicMember::new(ClassicMemberConfig {
            group_id: config.group_id.clone(),
            instance_id: config.group_instance_id.clone(),
            session_timeout_ms: i32::try_from(config.session_timeout_ms).unwrap_or(i32::MAX),
            rebalance_timeout_ms,
            heartbeat_interval_ms: config.heartbeat_interval_ms,
            strategy: config.partition_assignment_strategy,
        }))
    }
}

/// The part of the consumer's settings its fetcher reads.
fn fetch_config(config: &ConsumerConfig) -> FetchConfig {
    FetchConfig {
        isolation: config.isolation_level,
        reset: config.auto_offset_reset,
        max_poll_records: config.max_poll_records,
        max_wait_ms: i32::try_from(config.fetch_max_wait_ms).unwrap_or(i32::MAX),
        min_bytes: config.fetch_min_bytes,
        max_bytes: config.fetch_max_bytes,
        partition_max_bytes: config.max_partition_fetch_bytes,
        list_timeout_ms: i32::try_from(config.request_timeout_ms).unwrap_or(i32::MAX),
        rack: config.client_rack.clone(),
    }
}

/// The leader of `partition` by its topic's metadata, if the metadata knows one.
fn leader_in(topic: Option<&TopicMetadata>, partition: i32) -> Option<BrokerId> {
    match topic? {
        TopicMetadata::Known { leaders } => *leaders.get(usize::try_from(partition).ok()?)?,
        TopicMetadata::Failed(_) => None,
    }
}
