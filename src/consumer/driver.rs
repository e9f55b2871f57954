//! The tokio side of the consumer: broker links, metadata, the group coordinator, and the
//! requests the membership state machine and the fetch positions ask for.
//!
//! There is no background task. Every request runs in a [`JoinSet`] the consumer owns, and
//! `poll` drives the set until it has an event to hand over: a request outlives a `poll` that
//! timed out (its answer waits in the set for the next one), so a ConsumerGroupHeartbeat
//! answer that bumped the member epoch is never lost to a cancelled `poll`. Dropping the
//! consumer drops the set, which aborts every request: that is "killed" (no LeaveGroup).

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use tracing::{debug, warn};

use super::ConsumerRecord;
use super::calls::{call, find_coordinator, membership_call, timed_out};
use super::config::{ConsumerConfig, GroupProtocol};
use super::fetcher::{Fetched, Fetcher, Followup};
use super::membership::classic::ClassicMember;
use super::membership::kip848::ConsumerMember;
use super::membership::{Membership, MembershipEvent, MembershipResponse, TopicView};
use super::offsets::{committed_offsets, offset_commit_request, offset_fetch_request};
use crate::client::connection::{BrokerLink, LinkConfig, LinkSecurity};
use crate::client::metadata::{ClusterMetadata, TopicMetadata};
use crate::client::ready::{Probe, first_metadata};
use crate::engine::transaction::OffsetToCommit;
use crate::engine::{BrokerId, TopicPartition};
use crate::error::{Error, Result};
use crate::protocol::ApiKey;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::messages::fetch::FetchResponse;
use crate::protocol::messages::list_offsets::ListOffsetsResponse;
use crate::protocol::messages::metadata::{
    MetadataRequest, MetadataRequestTopic, MetadataResponse,
};
use crate::protocol::messages::offset_fetch::OffsetFetchResponse;

/// Fetch v12 is the last version that names topics (v13+ use topic ids, KIP-516).
const FETCH_VERSION_CAP: i16 = 12;
/// OffsetFetch v10 names topics by id (Kafka 4.2).
const OFFSET_FETCH_VERSION_CAP: i16 = 9;
/// How long `committed` waits out pending transactional commits (Java's
/// `default.api.timeout.ms`).
const COMMITTED_TIMEOUT: Duration = Duration::from_secs(60);

/// A finished request.
enum Completion {
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
pub(crate) struct Driver {
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
    metadata_retry_at: Option<Instant>,
    coordinator: Option<BrokerLink>,
    coordinator_in_flight: bool,
    coordinator_retry_at: Option<Instant>,
    membership: Membership,
    membership_in_flight: bool,
    subscription: Vec<String>,
    fetcher: Fetcher,
    committed_in_flight: bool,
    committed_retry_at: Option<Instant>,
    listing: HashSet<TopicPartition>,
    list_retry_at: Option<Instant>,
    fetching: HashSet<BrokerId>,
    fetch_retry_at: Option<Instant>,
    tasks: JoinSet<Completion>,
    /// An error for the next `poll` (not fatal: e.g. no offset under `auto.offset.reset=none`).
    pending_error: Option<Error>,
    /// A fatal error: every later call returns it.
    fatal: Option<Error>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
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

impl Driver {
    /// Connects to the bootstrap servers, reads the cluster's API versions and picks the
    /// group protocol.
    pub async fn connect(config: ConsumerConfig) -> Result<Self> {
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
        let rebalance_timeout_ms = i32::try_from(config.max_poll_interval_ms).unwrap_or(i32::MAX);
        let membership = if kip848 {
            Membership::Consumer(ConsumerMember::new(
                config.group_id.clone(),
                new_member_id(),
                config.group_instance_id.clone(),
                rebalance_timeout_ms,
                config.group_remote_assignor.clone(),
            ))
        } else {
            if config.group_protocol == GroupProtocol::Consumer {
                debug!("the broker has no ConsumerGroupHeartbeat: using the classic protocol");
            }
            Membership::Classic(ClassicMember::new(
                config.group_id.clone(),
                config.group_instance_id.clone(),
                i32::try_from(config.session_timeout_ms).unwrap_or(i32::MAX),
                rebalance_timeout_ms,
                Duration::from_millis(config.heartbeat_interval_ms),
                config.partition_assignment_strategy,
            ))
        };
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
            subscription: Vec::new(),
            fetcher: Fetcher::new(&config),
            committed_in_flight: false,
            committed_retry_at: None,
            listing: HashSet::new(),
            list_retry_at: None,
            fetching: HashSet::new(),
            fetch_retry_at: None,
            tasks: JoinSet::new(),
            pending_error: None,
            fatal: None,
            config,
        })
    }

    /// Whether the group uses KIP-848.
    pub fn uses_kip848(&self) -> bool {
        matches!(self.membership, Membership::Consumer(_))
    }

    /// Connects, authenticates and fetches metadata through the bootstrap servers, round
    /// after round until one answers or `timeout` passes.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<()> {
        if let Some(e) = &self.fatal {
            return Err(e.clone());
        }
        let probe = Probe {
            request_timeout: self.config.request_timeout(),
            retry_backoff: self.backoff(),
            deadline: Some(Instant::now() + timeout),
        };
        first_metadata(&self.bootstrap, &self.client_id, probe)
            .await
            .map(|_| ())
    }

    pub fn subscribe(&mut self, topics: Vec<String>) {
        self.subscription = topics.clone();
        self.metadata_stale = true;
        self.membership.subscribe(topics);
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

    fn backoff(&self) -> Duration {
        self.config.retry_backoff()
    }

    /// Waits for the next event until `deadline`; `Ok(None)` when it passed.
    pub async fn poll(&mut self, deadline: Option<Instant>) -> Result<Option<MembershipOrRecords>> {
        if let Some(e) = &self.fatal {
            return Err(e.clone());
        }
        if self.subscription.is_empty() && self.membership.owned().is_empty() {
            return Err(Error::InvalidState(
                "poll before subscribe: the consumer has no topics".into(),
            ));
        }
        // Partitions revoked at the previous poll are given up now (DESIGN: the user had
        // that whole time to commit them).
        self.membership.on_poll(Instant::now());
        let owned: HashSet<TopicPartition> = self.membership.owned().into_iter().collect();
        self.fetcher.retain(&owned);
        // Bounded by the deadline; `poll()` without one waits as long as it takes.
        loop {
            if let Some(e) = self.pending_error.take() {
                return Err(e);
            }
            if let Some(e) = &self.fatal {
                return Err(e.clone());
            }
            let now = Instant::now();
            let expired = deadline.is_some_and(|d| d <= now);
            // KIP-848: the coordinator bumps the member epoch when it processes a heartbeat,
            // before its answer arrives. Handing the user something while a heartbeat is in
            // flight would let them commit with an epoch the broker has already left
            // (STALE_MEMBER_EPOCH, or ILLEGAL_GENERATION for TxnOffsetCommit: the race
            // KIP-1251 addresses). So `poll` hands over events only once the heartbeat in
            // flight is answered (unless the deadline passes first): between two polls the
            // epoch `group_metadata` gives is the broker's.
            // Classic: likewise nothing between JoinGroup and the SyncGroup answer, when the
            // coordinator refuses commits of the generation being left (a cooperative member
            // keeps fetching then, KIP-429, so only the hand-over waits).
            let settled = !(self.heartbeat_in_flight() || self.membership.joining()) || expired;
            if settled {
                let view = View {
                    metadata: &self.metadata,
                    ids: &self.topic_ids,
                };
                if let Some(event) = self.membership.next_event(&view) {
                    self.apply_event(&event);
                    return Ok(Some(MembershipOrRecords::Membership(event)));
                }
                if let Some(records) = self.take_records() {
                    return Ok(Some(MembershipOrRecords::Records(records)));
                }
            }
            if expired {
                return Ok(None);
            }
            self.start_work(now);
            // Wake for the next timer still ahead. One already past was acted on by
            // `start_work` or waits for an answer in flight (which wakes us); counting it
            // would spin.
            let wake = [
                self.membership.next_deadline(),
                self.metadata_retry_at,
                self.coordinator_retry_at,
                self.committed_retry_at,
                self.list_retry_at,
                self.fetch_retry_at,
            ]
            .into_iter()
            .flatten()
            .filter(|t| *t > now)
            .chain(deadline)
            .min()
            .unwrap_or(now + Duration::from_secs(1))
            .max(now + Duration::from_millis(1));
            tokio::select! {
                Some(done) = self.tasks.join_next(), if !self.tasks.is_empty() => {
                    match done {
                        Ok(completion) => self.complete(completion, Instant::now()),
                        Err(e) => self.task_failed(&e),
                    }
                }
                _ = tokio::time::sleep_until(wake.into()) => {}
            }
        }
    }

    /// A request task ended without its completion (it cannot panic on network data; this is
    /// a bug): which request it carried is unknown, so the consumer stops rather than wait
    /// for an answer that will never come (DESIGN P9).
    fn task_failed(&mut self, e: &tokio::task::JoinError) {
        warn!("a consumer request task failed: {e}");
        self.fatal = Some(Error::InvalidState(format!(
            "a consumer request task failed: {e}"
        )));
    }

    /// Whether a KIP-848 heartbeat is in flight (the member epoch may be moving).
    fn heartbeat_in_flight(&self) -> bool {
        self.membership_in_flight && self.uses_kip848()
    }

    /// Waits (bounded by `deadline`) until no KIP-848 heartbeat is in flight, applying its
    /// answer and whatever else completes meanwhile.
    async fn settle_membership(&mut self, deadline: Instant) {
        while self.heartbeat_in_flight() {
            match tokio::time::timeout_at(deadline.into(), self.tasks.join_next()).await {
                Ok(Some(Ok(done))) => self.complete(done, Instant::now()),
                Ok(Some(Err(e))) => self.task_failed(&e),
                // Nothing in flight after all, or the deadline passed.
                Ok(None) | Err(_) => return,
            }
        }
    }

    fn apply_event(&mut self, event: &MembershipEvent) {
        match event {
            MembershipEvent::Assigned(tps) => {
                self.fetcher.assigned(tps);
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
            }
        }
    }

    fn take_records(&mut self) -> Option<Vec<ConsumerRecord>> {
        self.fetcher.take_records(&self.membership.fetchable())
    }

    fn due(at: Option<Instant>, now: Instant) -> bool {
        at.is_none_or(|t| t <= now)
    }

    /// Starts every request that is due and not already in flight.
    fn start_work(&mut self, now: Instant) {
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
        }
        for tp in self.fetcher.partitions() {
            if self.leader_of(tp).is_none() {
                self.metadata_stale = true;
            }
            wanted.push(tp.topic.to_string());
        }
        wanted.sort();
        wanted.dedup();
        if self.metadata_stale && !self.metadata_in_flight && Self::due(self.metadata_retry_at, now)
        {
            self.metadata_in_flight = true;
            let link = self.next_bootstrap();
            let request = MetadataRequest {
                topics: Some(
                    wanted
                        .iter()
                        .map(|t| MetadataRequestTopic {
                            topic_id: [0; 16],
                            name: Some(t.clone()),
                        })
                        .collect(),
                ),
                allow_auto_topic_creation: false,
                ..MetadataRequest::default()
            };
            let timeout = self.config.request_timeout();
            let client_id = Arc::clone(&self.client_id);
            self.tasks.spawn(async move {
                Completion::Metadata(call(&link, request, None, client_id, timeout).await)
            });
        }

        if self.coordinator.is_none()
            && !self.coordinator_in_flight
            && Self::due(self.coordinator_retry_at, now)
        {
            self.coordinator_in_flight = true;
            let link = self.next_bootstrap();
            let group = self.config.group_id.clone();
            let timeout = self.config.request_timeout();
            let client_id = Arc::clone(&self.client_id);
            self.tasks.spawn(async move {
                Completion::Coordinator(find_coordinator(&link, group, client_id, timeout).await)
            });
        }

        if let Some(coordinator) = self.coordinator.clone() {
            if !self.membership_in_flight {
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
                    self.tasks.spawn(async move {
                        Completion::Membership(
                            membership_call(&link, request, client_id, timeout, join_timeout).await,
                        )
                    });
                }
            }
            self.start_committed_lookup(&coordinator, now);
        }
        self.start_resets(now);
        self.start_fetches(now);
    }

    fn start_committed_lookup(&mut self, coordinator: &BrokerLink, now: Instant) {
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
        self.tasks.spawn(async move {
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

    fn start_resets(&mut self, now: Instant) {
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
            self.tasks.spawn(async move {
                let result = call(&link, request, None, client_id, timeout).await;
                Completion::Listed { partitions, result }
            });
        }
    }

    fn start_fetches(&mut self, now: Instant) {
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
            self.tasks.spawn(async move {
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
    fn follow_up(&mut self, followup: Followup, retry_at: RetryTimer, now: Instant) {
        self.metadata_stale |= followup.refresh_metadata;
        if followup.retry {
            let at = Some(now + self.backoff());
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

    fn complete(&mut self, completion: Completion, now: Instant) {
        match completion {
            Completion::Metadata(result) => {
                self.metadata_in_flight = false;
                match result {
                    Ok(response) => {
                        self.metadata.update(&response);
                        for topic in &response.topics {
                            if let Some(name) = &topic.name
                                && topic.topic_id != [0; 16]
                            {
                                self.topic_ids
                                    .insert(topic.topic_id, Arc::from(name.as_str()));
                            }
                        }
                        self.metadata_stale = false;
                        // Unknown leaders are asked again, not in a tight loop.
                        self.metadata_retry_at = Some(now + self.backoff());
                    }
                    Err(e) => {
                        debug!("consumer metadata request failed: {e}");
                        self.metadata_retry_at = Some(now + self.backoff());
                    }
                }
            }
            Completion::Coordinator(result) => {
                self.coordinator_in_flight = false;
                match result {
                    Ok((address, _node)) => {
                        // Its own link: a JoinGroup held for a whole rebalance, or a fetch
                        // waiting fetch.max.wait.ms, must not delay heartbeats.
                        self.coordinator =
                            Some(BrokerLink::spawn(address, self.link_config.clone()));
                        self.coordinator_retry_at = None;
                    }
                    Err(e) => {
                        debug!("FindCoordinator failed: {e}");
                        self.coordinator_retry_at = Some(now + self.backoff());
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
                            warn!("group membership failed: {e}");
                            self.fatal = Some(e);
                        }
                    }
                    Err(e) => {
                        debug!("group request failed: {e}");
                        if e.is_fatal() {
                            self.fatal = Some(e);
                            return;
                        }
                        self.coordinator = None;
                        self.membership.on_request_failed(now, self.backoff());
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
                        debug!("fetch from broker {broker} failed: {e}");
                        if e.is_fatal() {
                            self.fatal = Some(e);
                            return;
                        }
                        self.metadata_stale = true;
                        self.fetch_retry_at = Some(now + self.backoff());
                    }
                }
            }
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
                        debug!("ListOffsets failed: {e}");
                        self.metadata_stale = true;
                        self.list_retry_at = Some(now + self.backoff());
                    }
                }
            }
        }
    }

    fn apply_committed(
        &mut self,
        partitions: Vec<TopicPartition>,
        result: Result<OffsetFetchResponse>,
        now: Instant,
    ) {
        let response = match result {
            Ok(r) => r,
            Err(e) => {
                debug!("OffsetFetch failed: {e}");
                self.coordinator = None;
                self.committed_retry_at = Some(now + self.backoff());
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
                self.committed_retry_at = Some(now + self.backoff());
                return;
            }
        };
        let followup = self.fetcher.apply_committed(offsets);
        self.follow_up(followup, RetryTimer::Committed, now);
    }

    /// OffsetCommit of `offsets` with this member's identity.
    pub async fn commit(&mut self, offsets: &[OffsetToCommit]) -> Result<()> {
        if let Some(e) = &self.fatal {
            return Err(e.clone());
        }
        if offsets.is_empty() {
            return Ok(());
        }
        let deadline = Instant::now() + self.config.request_timeout();
        self.settle_membership(deadline).await;
        let mut last = timed_out("OffsetCommit");
        // Bounded: a few coordinator moves within request.timeout.ms.
        for _ in 0..10 {
            if Instant::now() >= deadline {
                break;
            }
            // Read at each attempt: a retry after STALE_MEMBER_EPOCH takes the epoch the
            // heartbeat answer brought.
            let request = offset_commit_request(&self.membership.group_metadata(), offsets);
            let link = self.coordinator_link(deadline).await?;
            let left = deadline.saturating_duration_since(Instant::now());
            match call(
                &link,
                request.clone(),
                None,
                Arc::clone(&self.client_id),
                left,
            )
            .await
            {
                Ok(response) => {
                    let mut retry = false;
                    for topic in &response.topics {
                        for p in &topic.partitions {
                            let code = ErrorCode(p.error_code);
                            if code.is_ok() {
                                continue;
                            }
                            if matches!(
                                code,
                                ErrorCode::NOT_COORDINATOR
                                    | ErrorCode::COORDINATOR_NOT_AVAILABLE
                                    | ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
                            ) {
                                retry = true;
                                self.coordinator = None;
                                last = Error::broker(code);
                            } else if code == ErrorCode::STALE_MEMBER_EPOCH
                                && self.heartbeat_in_flight()
                            {
                                // The epoch moved under a heartbeat sent meanwhile: take its
                                // answer and commit with the new epoch.
                                retry = true;
                                last = Error::broker(code);
                                self.settle_membership(deadline).await;
                            } else {
                                return Err(Error::broker(code));
                            }
                        }
                    }
                    if !retry {
                        return Ok(());
                    }
                }
                Err(e) if e.is_fatal() => return Err(e),
                Err(e) => {
                    self.coordinator = None;
                    last = e;
                }
            }
            tokio::time::sleep(self.backoff()).await;
        }
        Err(last)
    }

    /// OffsetFetch with require_stable for `partitions`, waiting out pending transactional
    /// commits (UNSTABLE_OFFSET_COMMIT), bounded.
    pub async fn committed(
        &mut self,
        partitions: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, Option<i64>)>> {
        let deadline = Instant::now() + COMMITTED_TIMEOUT;
        let request = offset_fetch_request(&self.config.group_id, partitions);
        let mut last = timed_out("OffsetFetch");
        while Instant::now() < deadline {
            let link = self.coordinator_link(deadline).await?;
            let left = deadline
                .saturating_duration_since(Instant::now())
                .min(self.config.request_timeout());
            match call(
                &link,
                request.clone(),
                Some(OFFSET_FETCH_VERSION_CAP),
                Arc::clone(&self.client_id),
                left,
            )
            .await
            {
                Ok(response) => match committed_offsets(&response, partitions) {
                    Ok(offsets) => return Ok(offsets),
                    Err(code) => {
                        if matches!(
                            code,
                            ErrorCode::NOT_COORDINATOR | ErrorCode::COORDINATOR_NOT_AVAILABLE
                        ) {
                            self.coordinator = None;
                        } else if !code.is_retriable() {
                            return Err(Error::broker(code));
                        }
                        last = Error::broker(code);
                    }
                },
                Err(e) if e.is_fatal() => return Err(e),
                Err(e) => {
                    self.coordinator = None;
                    last = e;
                }
            }
            tokio::time::sleep(self.backoff()).await;
        }
        Err(last)
    }

    /// The coordinator's link, looked up inline if unknown.
    async fn coordinator_link(&mut self, deadline: Instant) -> Result<BrokerLink> {
        let mut last = timed_out("FindCoordinator");
        while Instant::now() < deadline {
            if let Some(link) = &self.coordinator {
                return Ok(link.clone());
            }
            let link = self.next_bootstrap();
            let left = deadline.saturating_duration_since(Instant::now());
            match find_coordinator(
                &link,
                self.config.group_id.clone(),
                Arc::clone(&self.client_id),
                left,
            )
            .await
            {
                Ok((address, _)) => {
                    self.coordinator = Some(BrokerLink::spawn(address, self.link_config.clone()));
                }
                Err(e) if e.is_fatal() => return Err(e),
                Err(e) => {
                    last = e;
                    tokio::time::sleep(self.backoff()).await;
                }
            }
        }
        Err(last)
    }

    /// Leaves the group, bounded by `request.timeout.ms`.
    pub async fn close(mut self) -> Result<()> {
        // Answers of requests in flight are moot now.
        self.tasks.abort_all();
        let Some(request) = self.membership.leave() else {
            return Ok(());
        };
        let deadline = Instant::now() + self.config.request_timeout();
        let link = self.coordinator_link(deadline).await?;
        let timeout = deadline.saturating_duration_since(Instant::now());
        membership_call(
            &link,
            request,
            Arc::clone(&self.client_id),
            timeout,
            timeout,
        )
        .await
        .map(|_| ())
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
