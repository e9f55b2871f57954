//! The tokio side of the consumer: broker links, metadata, the group coordinator, and the
//! requests the membership state machine and the fetch positions ask for.
//!
//! There is no background task. Every request runs in a [`JoinSet`] the consumer owns, and
//! `poll` drives the set until it has an event to hand over: a request outlives a `poll` that
//! timed out (its answer waits in the set for the next one), so a ConsumerGroupHeartbeat
//! answer that bumped the member epoch is never lost to a cancelled `poll`. Dropping the
//! consumer drops the set, which aborts every request: that is "killed" (no LeaveGroup).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use tracing::{debug, warn};

use super::ConsumerRecord;
use super::config::{ConsumerConfig, GroupProtocol, OffsetReset};
use super::membership::classic::ClassicMember;
use super::membership::kip848::ConsumerMember;
use super::membership::{
    Membership, MembershipEvent, MembershipRequest, MembershipResponse, TopicView,
};
use super::records::partition_records;
use crate::client::connection::{BrokerLink, LinkConfig, LinkSecurity};
use crate::client::metadata::{ClusterMetadata, TopicMetadata};
use crate::engine::transaction::OffsetToCommit;
use crate::engine::{BrokerId, TopicPartition};
use crate::error::{Error, Result};
use crate::protocol::ApiKey;
use crate::protocol::Request;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::messages::fetch::{FetchPartition, FetchRequest, FetchResponse, FetchTopic};
use crate::protocol::messages::find_coordinator::FindCoordinatorRequest;
use crate::protocol::messages::list_offsets::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopic,
};
use crate::protocol::messages::metadata::{
    MetadataRequest, MetadataRequestTopic, MetadataResponse,
};
use crate::protocol::messages::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use crate::protocol::messages::offset_fetch::{
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchResponse,
};

/// Fetch v12 is the last version that names topics (v13+ use topic ids, KIP-516).
const FETCH_VERSION_CAP: i16 = 12;
/// OffsetFetch v10 names topics by id (Kafka 4.2).
const OFFSET_FETCH_VERSION_CAP: i16 = 9;
/// ListOffsets timestamps: the log start, and the end (the LSO under read_committed).
const EARLIEST_TIMESTAMP: i64 = -2;
const LATEST_TIMESTAMP: i64 = -1;
/// How long `committed` waits out pending transactional commits (Java's
/// `default.api.timeout.ms`).
const COMMITTED_TIMEOUT: Duration = Duration::from_secs(60);

/// Where a partition's next fetch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Offset {
    /// Look up the committed offset.
    Committed,
    /// No usable committed offset: apply `auto.offset.reset`.
    Reset,
    /// `auto.offset.reset=none` and nothing committed: wait for a `seek`.
    Missing,
    /// Fetch from here.
    Ready(i64),
}

#[derive(Debug)]
struct PartitionState {
    offset: Offset,
    /// Fetched, not yet delivered; the front is the position.
    buffered: VecDeque<ConsumerRecord>,
    /// Bumped whenever the offset is set from outside a fetch, so an older fetch's answer is
    /// not applied.
    token: u64,
}

impl PartitionState {
    fn new() -> Self {
        Self {
            offset: Offset::Committed,
            buffered: VecDeque::new(),
            token: 0,
        }
    }

    fn position(&self) -> Option<i64> {
        match (self.buffered.front(), self.offset) {
            (Some(r), _) => Some(r.offset),
            (None, Offset::Ready(o)) => Some(o),
            _ => None,
        }
    }

    /// Drops what is buffered; the next fetch starts at the position again.
    fn rewind(&mut self) {
        if let Some(first) = self.buffered.front() {
            self.offset = Offset::Ready(first.offset);
        }
        self.buffered.clear();
        self.token += 1;
    }

    fn set(&mut self, offset: Offset) {
        self.buffered.clear();
        self.offset = offset;
        self.token += 1;
    }
}

/// A finished request.
enum Completion {
    Metadata(Result<MetadataResponse>),
    Coordinator(Result<(String, i32)>),
    Membership(Result<MembershipResponse>),
    Fetch {
        broker: BrokerId,
        fetched: Vec<(TopicPartition, u64, i64)>,
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

/// The metadata as the membership sees it.
struct View<'a> {
    metadata: &'a ClusterMetadata,
    ids: &'a HashMap<[u8; 16], Arc<str>>,
}

impl TopicView for View<'_> {
    fn partition_count(&self, topic: &str) -> Option<i32> {
        match self.metadata.topics.get(topic)? {
            TopicMetadata::Known { leaders } => i32::try_from(leaders.len()).ok(),
            TopicMetadata::Failed(_) => None,
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
    partitions: BTreeMap<TopicPartition, PartitionState>,
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

fn timed_out(what: &str) -> Error {
    Error::Timeout(format!("no answer to {what} within request.timeout.ms"))
}

impl Driver {
    /// Connects to the bootstrap servers, reads the cluster's API versions and picks the
    /// group protocol.
    pub async fn connect(config: ConsumerConfig) -> Result<Self> {
        let link_config = LinkConfig {
            client_id: config.client_id.clone(),
            connect_timeout: Duration::from_millis(config.request_timeout_ms.min(10_000)),
            reconnect_backoff: Duration::from_millis(config.reconnect_backoff_ms),
            reconnect_backoff_max: Duration::from_millis(config.reconnect_backoff_max_ms),
            security: LinkSecurity::from_config(&config.security)?,
        };
        let client_id: Arc<str> = Arc::from(config.client_id.as_str());
        let bootstrap: Vec<BrokerLink> = config
            .bootstrap_servers
            .iter()
            .map(|a| BrokerLink::spawn(a.clone(), link_config.clone()))
            .collect();
        // One Metadata call tells the brokers and, through the connection's ApiVersions,
        // whether the cluster speaks KIP-848.
        let mut last_error = None;
        let mut found = None;
        for link in &bootstrap {
            let call =
                link.call_with_versions(MetadataRequest::default(), None, Arc::clone(&client_id));
            match tokio::time::timeout(config.request_timeout(), call).await {
                Ok(Ok(answer)) => {
                    found = Some(answer);
                    break;
                }
                Ok(Err(e)) if e.is_fatal() => return Err(e),
                Ok(Err(e)) => last_error = Some(e),
                Err(_) => last_error = Some(timed_out("Metadata")),
            }
        }
        let Some((response, versions)) = found else {
            return Err(last_error.unwrap_or_else(|| timed_out("Metadata")));
        };
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
            partitions: BTreeMap::new(),
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

    pub fn subscribe(&mut self, topics: Vec<String>) {
        self.subscription = topics.clone();
        self.metadata_stale = true;
        self.membership.subscribe(topics);
    }

    pub fn membership(&self) -> &Membership {
        &self.membership
    }

    pub fn position(&self, partition: &TopicPartition) -> Option<i64> {
        self.partitions.get(partition)?.position()
    }

    pub fn seek(&mut self, partition: &TopicPartition, offset: i64) -> Result<()> {
        let state = self.partitions.get_mut(partition).ok_or_else(|| {
            Error::InvalidState(format!(
                "seek: {partition:?} is not assigned to this consumer"
            ))
        })?;
        if offset < 0 {
            return Err(Error::InvalidState(format!(
                "seek: negative offset {offset}"
            )));
        }
        state.set(Offset::Ready(offset));
        Ok(())
    }

    fn next_bootstrap(&mut self) -> BrokerLink {
        // Any known broker will do; start with the ones from the metadata.
        let known: Vec<BrokerId> = self.metadata.brokers.keys().copied().collect();
        self.next_bootstrap = self.next_bootstrap.wrapping_add(1);
        if !known.is_empty() && self.next_bootstrap % 2 == 0 {
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
        self.partitions.retain(|tp, _| owned.contains(tp));
        // Bounded by the deadline; `poll()` without one waits as long as it takes.
        loop {
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
            if let Some(records) = self.take_records() {
                return Ok(Some(MembershipOrRecords::Records(records)));
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| d <= now) {
                return Ok(None);
            }
            self.start_work(now);
            let wake = [
                deadline,
                self.membership.next_deadline(),
                self.metadata_retry_at,
                self.coordinator_retry_at,
                self.committed_retry_at,
                self.list_retry_at,
                self.fetch_retry_at,
            ]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now + Duration::from_secs(1))
            .max(now + Duration::from_millis(1));
            tokio::select! {
                Some(done) = self.tasks.join_next(), if !self.tasks.is_empty() => {
                    match done {
                        Ok(completion) => self.complete(completion, Instant::now()),
                        Err(e) => warn!("a consumer request task failed: {e}"),
                    }
                }
                _ = tokio::time::sleep_until(wake.into()) => {}
            }
        }
    }

    fn apply_event(&mut self, event: &MembershipEvent) {
        match event {
            MembershipEvent::Assigned(tps) => {
                for tp in tps {
                    self.partitions
                        .entry(tp.clone())
                        .or_insert_with(PartitionState::new);
                }
                self.metadata_stale = true;
            }
            MembershipEvent::Revoked(tps) => {
                // Still owned until the next poll, but nothing more is delivered: the
                // position is what the user has seen.
                for tp in tps {
                    if let Some(state) = self.partitions.get_mut(tp) {
                        state.rewind();
                    }
                }
            }
            MembershipEvent::Lost(tps) => {
                for tp in tps {
                    self.partitions.remove(tp);
                }
            }
        }
    }

    fn take_records(&mut self) -> Option<Vec<ConsumerRecord>> {
        let fetchable = self.membership.fetchable();
        let mut out = Vec::new();
        for tp in fetchable {
            let Some(state) = self.partitions.get_mut(&tp) else {
                continue;
            };
            while out.len() < self.config.max_poll_records {
                match state.buffered.pop_front() {
                    Some(r) => out.push(r),
                    None => break,
                }
            }
            if out.len() >= self.config.max_poll_records {
                break;
            }
        }
        (!out.is_empty()).then_some(out)
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
        for tp in self.partitions.keys() {
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
        let fetchable: HashSet<TopicPartition> = self.membership.fetchable().into_iter().collect();
        let partitions: Vec<TopicPartition> = self
            .partitions
            .iter()
            .filter(|(tp, s)| s.offset == Offset::Committed && fetchable.contains(*tp))
            .map(|(tp, _)| tp.clone())
            .collect();
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
        let timestamp = match self.config.auto_offset_reset {
            OffsetReset::Earliest => EARLIEST_TIMESTAMP,
            _ => LATEST_TIMESTAMP,
        };
        let mut by_leader: HashMap<BrokerId, Vec<TopicPartition>> = HashMap::new();
        for (tp, state) in &self.partitions {
            if state.offset != Offset::Reset || self.listing.contains(tp) {
                continue;
            }
            if let Some(leader) = self.leader_of(tp) {
                by_leader.entry(leader).or_default().push(tp.clone());
            }
        }
        for (leader, partitions) in by_leader {
            let Some(link) = self.link_for(leader) else {
                self.metadata_stale = true;
                continue;
            };
            self.listing.extend(partitions.iter().cloned());
            let mut topics: BTreeMap<String, Vec<ListOffsetsPartition>> = BTreeMap::new();
            for tp in &partitions {
                topics
                    .entry(tp.topic.to_string())
                    .or_default()
                    .push(ListOffsetsPartition {
                        partition_index: tp.partition,
                        timestamp,
                        ..ListOffsetsPartition::default()
                    });
            }
            let request = ListOffsetsRequest {
                replica_id: -1,
                isolation_level: self.config.isolation_level.wire(),
                topics: topics
                    .into_iter()
                    .map(|(name, partitions)| ListOffsetsTopic { name, partitions })
                    .collect(),
                timeout_ms: i32::try_from(self.config.request_timeout_ms).unwrap_or(i32::MAX),
            };
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
        let mut by_leader: HashMap<BrokerId, Vec<(TopicPartition, u64, i64)>> = HashMap::new();
        for tp in self.membership.fetchable() {
            let Some(state) = self.partitions.get(&tp) else {
                continue;
            };
            let Offset::Ready(offset) = state.offset else {
                continue;
            };
            // Bounded memory: a partition with undelivered records is not fetched again.
            if !state.buffered.is_empty() {
                continue;
            }
            match self.leader_of(&tp) {
                Some(leader) if !self.fetching.contains(&leader) => {
                    by_leader
                        .entry(leader)
                        .or_default()
                        .push((tp, state.token, offset));
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
            let mut topics: BTreeMap<String, Vec<FetchPartition>> = BTreeMap::new();
            for (tp, _, offset) in &fetched {
                topics
                    .entry(tp.topic.to_string())
                    .or_default()
                    .push(FetchPartition {
                        partition: tp.partition,
                        current_leader_epoch: -1,
                        fetch_offset: *offset,
                        last_fetched_epoch: -1,
                        log_start_offset: -1,
                        partition_max_bytes: self.config.max_partition_fetch_bytes,
                        ..FetchPartition::default()
                    });
            }
            let request = FetchRequest {
                max_wait_ms: i32::try_from(self.config.fetch_max_wait_ms).unwrap_or(i32::MAX),
                min_bytes: self.config.fetch_min_bytes,
                max_bytes: self.config.fetch_max_bytes,
                isolation_level: self.config.isolation_level.wire(),
                // No fetch session (KIP-227): every fetch is a full one.
                session_id: 0,
                session_epoch: -1,
                topics: topics
                    .into_iter()
                    .map(|(topic, partitions)| FetchTopic {
                        topic,
                        topic_id: [0; 16],
                        partitions,
                    })
                    .collect(),
                ..FetchRequest::default()
            };
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
                    Ok(response) => self.apply_fetch(response, fetched, now),
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
                        for topic in response.topics {
                            for p in topic.partitions {
                                let tp =
                                    TopicPartition::new(topic.name.as_str(), p.partition_index);
                                let Some(state) = self.partitions.get_mut(&tp) else {
                                    continue;
                                };
                                if state.offset != Offset::Reset {
                                    continue;
                                }
                                let code = ErrorCode(p.error_code);
                                if code.is_ok() && p.offset >= 0 {
                                    state.set(Offset::Ready(p.offset));
                                } else {
                                    if code.invalidates_metadata() {
                                        self.metadata_stale = true;
                                    }
                                    self.list_retry_at = Some(now + self.backoff());
                                }
                            }
                        }
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
        for (tp, offset) in offsets {
            let Some(state) = self.partitions.get_mut(&tp) else {
                continue;
            };
            if state.offset != Offset::Committed {
                continue;
            }
            match offset {
                Some(o) => state.set(Offset::Ready(o)),
                None if self.config.auto_offset_reset == OffsetReset::None => {
                    state.set(Offset::Missing);
                    self.pending_error = Some(Error::InvalidState(format!(
                        "no committed offset for {tp:?} and auto.offset.reset=none: seek first"
                    )));
                }
                None => state.set(Offset::Reset),
            }
        }
    }

    fn apply_fetch(
        &mut self,
        response: FetchResponse,
        fetched: Vec<(TopicPartition, u64, i64)>,
        now: Instant,
    ) {
        let top = ErrorCode(response.error_code);
        if !top.is_ok() {
            debug!("fetch answered {top}");
            self.metadata_stale = true;
            self.fetch_retry_at = Some(now + self.backoff());
            return;
        }
        let asked: HashMap<TopicPartition, (u64, i64)> = fetched
            .into_iter()
            .map(|(tp, token, offset)| (tp, (token, offset)))
            .collect();
        for topic in response.responses {
            let name: Arc<str> = Arc::from(topic.topic.as_str());
            for p in topic.partitions {
                let tp = TopicPartition::new(Arc::clone(&name), p.partition_index);
                let Some(&(token, offset)) = asked.get(&tp) else {
                    continue;
                };
                let Some(state) = self.partitions.get_mut(&tp) else {
                    continue;
                };
                // A seek, a revocation or a reset since the request: its answer is stale.
                if state.token != token || state.offset != Offset::Ready(offset) {
                    continue;
                }
                let code = ErrorCode(p.error_code);
                match code {
                    ErrorCode::NONE => {}
                    ErrorCode::OFFSET_OUT_OF_RANGE => {
                        if self.config.auto_offset_reset == OffsetReset::None {
                            state.set(Offset::Missing);
                            self.pending_error = Some(Error::broker(code));
                        } else {
                            state.set(Offset::Reset);
                        }
                        continue;
                    }
                    code => {
                        // NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION,
                        // ...: find the new leader and fetch again from the same offset, so
                        // nothing is skipped or repeated.
                        debug!("fetch of {tp:?} answered {code}");
                        self.metadata_stale = true;
                        self.fetch_retry_at = Some(now + self.backoff());
                        continue;
                    }
                }
                let Some(bytes) = p.records.as_ref() else {
                    continue;
                };
                match partition_records(
                    &name,
                    tp.partition,
                    bytes,
                    offset,
                    self.config.isolation_level,
                    p.last_stable_offset,
                    p.aborted_transactions.as_deref(),
                ) {
                    Ok(records) => {
                        state.buffered.extend(records.records);
                        state.offset = Offset::Ready(records.next_offset);
                    }
                    Err(e) => {
                        // A corrupt answer is not skipped over: report it and fetch again.
                        self.pending_error = Some(Error::Decode(e));
                        self.fetch_retry_at = Some(now + self.backoff());
                    }
                }
            }
        }
    }

    /// OffsetCommit of `offsets` with this member's identity.
    pub async fn commit(&mut self, offsets: &[OffsetToCommit]) -> Result<()> {
        if let Some(e) = &self.fatal {
            return Err(e.clone());
        }
        if offsets.is_empty() {
            return Ok(());
        }
        let meta = self.membership.group_metadata();
        let mut topics: BTreeMap<String, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
        for o in offsets {
            topics
                .entry(o.partition.topic.to_string())
                .or_default()
                .push(OffsetCommitRequestPartition {
                    partition_index: o.partition.partition,
                    committed_offset: o.offset,
                    committed_leader_epoch: -1,
                    committed_metadata: o.metadata.clone(),
                });
        }
        let request = OffsetCommitRequest {
            group_id: meta.group_id.clone(),
            generation_id_or_member_epoch: meta.generation_id,
            member_id: meta.member_id.clone(),
            group_instance_id: meta.group_instance_id.clone(),
            retention_time_ms: -1,
            topics: topics
                .into_iter()
                .map(|(name, partitions)| OffsetCommitRequestTopic { name, partitions })
                .collect(),
        };
        let deadline = Instant::now() + self.config.request_timeout();
        let mut last = timed_out("OffsetCommit");
        // Bounded: a few coordinator moves within request.timeout.ms.
        for _ in 0..10 {
            if Instant::now() >= deadline {
                break;
            }
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
                                last = Error::broker(code);
                            } else {
                                return Err(Error::broker(code));
                            }
                        }
                    }
                    if !retry {
                        return Ok(());
                    }
                    self.coordinator = None;
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

fn offset_fetch_request(group_id: &str, partitions: &[TopicPartition]) -> OffsetFetchRequest {
    let mut topics: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        topics
            .entry(tp.topic.to_string())
            .or_default()
            .push(tp.partition);
    }
    let topics: Vec<OffsetFetchRequestTopic> = topics
        .into_iter()
        .map(|(name, partition_indexes)| OffsetFetchRequestTopic {
            name,
            topic_id: [0; 16],
            partition_indexes,
        })
        .collect();
    // Both shapes filled: v0–7 read `group_id`/`topics`, v8+ `groups`.
    OffsetFetchRequest {
        group_id: group_id.to_owned(),
        topics: Some(topics.clone()),
        groups: vec![OffsetFetchRequestGroup {
            group_id: group_id.to_owned(),
            topics: Some(topics),
            ..OffsetFetchRequestGroup::default()
        }],
        require_stable: true,
    }
}

/// The committed offset of each of `partitions` (`None`: nothing committed), or the first
/// error the answer holds.
fn committed_offsets(
    response: &OffsetFetchResponse,
    partitions: &[TopicPartition],
) -> std::result::Result<Vec<(TopicPartition, Option<i64>)>, ErrorCode> {
    let (group_error, topics) = match response.groups.first() {
        Some(group) => (group.error_code, &group.topics),
        None => (response.error_code, &response.topics),
    };
    if group_error != 0 {
        return Err(ErrorCode(group_error));
    }
    let mut found: HashMap<TopicPartition, Option<i64>> = HashMap::new();
    for topic in topics {
        for p in &topic.partitions {
            if p.error_code != 0 {
                return Err(ErrorCode(p.error_code));
            }
            found.insert(
                TopicPartition::new(topic.name.as_str(), p.partition_index),
                (p.committed_offset >= 0).then_some(p.committed_offset),
            );
        }
    }
    Ok(partitions
        .iter()
        .map(|tp| (tp.clone(), found.get(tp).copied().flatten()))
        .collect())
}

/// One request with a deadline.
async fn call<R>(
    link: &BrokerLink,
    request: R,
    cap: Option<i16>,
    client_id: Arc<str>,
    timeout: Duration,
) -> Result<R::Response>
where
    R: Request + Send + 'static,
    R::Response: Send + 'static,
{
    match tokio::time::timeout(timeout, link.call(request, cap, client_id)).await {
        Ok(result) => result,
        Err(_) => Err(timed_out("a consumer request")),
    }
}

/// FindCoordinator for the group: the coordinator's address and node id.
async fn find_coordinator(
    link: &BrokerLink,
    group: String,
    client_id: Arc<str>,
    timeout: Duration,
) -> Result<(String, i32)> {
    let request = FindCoordinatorRequest::single(FindCoordinatorRequest::KEY_TYPE_GROUP, group);
    let response = call(link, request, None, client_id, timeout).await?;
    let c = response
        .coordinators
        .into_iter()
        .next()
        .ok_or_else(|| Error::broker(ErrorCode::COORDINATOR_NOT_AVAILABLE))?;
    if c.error_code != 0 {
        return Err(Error::Broker {
            code: ErrorCode(c.error_code),
            message: c.error_message,
        });
    }
    Ok((format!("{}:{}", c.host, c.port), c.node_id))
}

async fn membership_call(
    link: &BrokerLink,
    request: MembershipRequest,
    client_id: Arc<str>,
    timeout: Duration,
    join_timeout: Duration,
) -> Result<MembershipResponse> {
    Ok(match request {
        MembershipRequest::ConsumerHeartbeat(r) => {
            MembershipResponse::ConsumerHeartbeat(call(link, r, None, client_id, timeout).await?)
        }
        MembershipRequest::Join(r) => {
            MembershipResponse::Join(call(link, r, None, client_id, join_timeout).await?)
        }
        MembershipRequest::Sync(r) => {
            MembershipResponse::Sync(call(link, r, None, client_id, join_timeout).await?)
        }
        MembershipRequest::Heartbeat(r) => {
            MembershipResponse::Heartbeat(call(link, r, None, client_id, timeout).await?)
        }
        MembershipRequest::Leave(r) => {
            call(link, r, None, client_id, timeout).await?;
            // Nothing to hand the state machine: the member is gone.
            MembershipResponse::Heartbeat(Default::default())
        }
    })
}
