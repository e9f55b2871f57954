//! The background task's side of [`ConsumerState`]: on each turn it starts every request
//! that is due and not in flight (metadata, FindCoordinator, the membership's heartbeat or
//! rebalance round, committed-offset look-ups, resets, position validations, fetches,
//! auto-commits) and computes when to look again; each answer comes back through
//! [`ConsumerState::complete`], which applies it, sets the back-off timers of what failed, and
//! queues for `poll` the errors no retry can fix (naming the topic, partition or group).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use tracing::{debug, warn};

use super::{Completion, ConsumerState, View, leader_in};
use crate::consumer::calls::{call, call_built, find_coordinator, membership_call};
use crate::consumer::fetcher::{Asked, Followup};
use crate::consumer::membership::{Membership, MembershipRequest, MembershipResponse, TopicView};
use crate::consumer::metrics::elapsed_ms;
use crate::consumer::offsets::{PartitionCommitted, committed_offsets, offset_fetch_request};
use crate::error::{Error, ErrorChain, Result};
use crate::net::connection::BrokerLink;
use crate::net::metadata::{TopicMetadata, metadata_request};
use crate::protocol::Request;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::messages::fetch::FetchResponse;
use crate::protocol::messages::metadata::MetadataResponse;
use crate::protocol::messages::offset_fetch::OffsetFetchResponse;
use crate::types::{BrokerId, Millis, TopicPartition};

/// Fetch v12 is the last version that names topics (v13+ use topic ids, KIP-516).
const FETCH_VERSION_CAP: i16 = 12;

/// The back-off timers an answer can set.
#[derive(Debug, Clone, Copy)]
enum RetryTimer {
    Fetch,
    List,
    Validate,
    Committed,
}

impl ConsumerState {
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
            self.validate_retry_at,
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

    /// A request task ended without its completion (it cannot panic on network data; this is
    /// a bug): which request it carried is unknown, so the consumer stops rather than wait
    /// for an answer that will never come (P9).
    pub fn task_failed(&mut self, e: &tokio::task::JoinError) {
        warn!("a consumer request task failed: {e}");
        self.fatal = Some(Error::InvalidState(format!(
            "a consumer request task failed: {e}"
        )));
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
        // Partitions come in topic order: each topic is named once and its metadata looked up
        // once, however many of its partitions are owned.
        let mut topic: Option<(&str, Option<&TopicMetadata>)> = None;
        for tp in self.fetcher.partitions() {
            let known = match topic {
                Some((name, known)) if name == &*tp.topic => known,
                _ => {
                    let known = self.metadata.topics.get(&*tp.topic);
                    wanted.push(tp.topic.to_string());
                    topic = Some((&tp.topic, known));
                    known
                }
            };
            if leader_in(known, tp.partition).is_none() {
                self.metadata_stale = true;
            }
        }
        wanted.sort();
        wanted.dedup();
        // At least every `metadata.max.age.ms` (as Java's `Metadata` does): a subscribed
        // topic that gained partitions, a classic pattern's new matches and moved leaders are
        // only learnt from a fresh answer (the classic leader rejoins on what it shows).
        if Self::due(self.metadata_refresh_at, now) {
            self.metadata_stale = true;
        }
        if self.metadata_stale && !self.metadata_in_flight && Self::due(self.metadata_retry_at, now)
        {
            self.metadata_in_flight = true;
            let link = self.next_bootstrap();
            // A pattern matches among every topic (and KIP-848 assigns topics by id whose
            // names only the full metadata tells).
            let topics = self.pattern.is_none().then(|| wanted.clone());
            let request = move |version| Ok(metadata_request(topics, version));
            let timeout = self.config.request_timeout();
            let client_id = Arc::clone(&self.client_id);
            tasks.spawn(async move {
                Completion::Metadata(call_built(&link, request, None, client_id, timeout).await)
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
            if let Some(request) = self.start_membership_request(now) {
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
            self.start_committed_lookup(&coordinator, now, tasks);
            self.start_auto_commit(&coordinator, now, tasks);
        }
        // KIP-320: a leader that moved validates the positions it leads before they are
        // fetched from (and answers to requests of the old one are stale).
        let metadata = &self.metadata;
        self.fetcher.leader_epochs(|tp| metadata.leader_epoch(tp));
        self.start_resets(now, tasks);
        self.start_validations(now, tasks);
        self.start_fetches(now, tasks);
    }

    /// The membership's request to send now, marked in flight: none while one is in flight,
    /// before the first `poll`, or while a generation hold keeps a request that may move the
    /// generation back. The one place a membership request starts, so a hold taken under the
    /// same lock (`ConsumerState::try_hold`) is never overtaken by one.
    pub(crate) fn start_membership_request(&mut self, now: Millis) -> Option<MembershipRequest> {
        if self.membership_in_flight || !self.polled_once || self.generation_held(now) {
            return None;
        }
        let view = View {
            metadata: &self.metadata,
            ids: &self.topic_ids,
        };
        let request = self.membership.poll_request(now, &view)?;
        self.membership_in_flight = true;
        Some(request)
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
        let asked = self
            .fetcher
            .awaiting_committed(&self.membership.fetchable());
        if asked.is_empty() {
            return;
        }
        self.committed_in_flight = true;
        let partitions: Vec<TopicPartition> = asked.iter().map(|a| a.partition.clone()).collect();
        let request = offset_fetch_request(&self.config.group_id, &partitions);
        self.spawn_call(tasks, coordinator.clone(), request, |result| {
            Completion::Committed { asked, result }
        });
    }

    /// `asked` grouped by the broker that leads them, with a link to it; a partition whose
    /// leader is unknown (or has no address) is left out and the metadata refreshed.
    fn by_leader(&mut self, asked: Vec<Asked>) -> Vec<(BrokerLink, Vec<Asked>)> {
        let mut by_leader: HashMap<BrokerId, Vec<Asked>> = HashMap::new();
        for a in asked {
            match self.leader_of(&a.partition) {
                Some(leader) => by_leader.entry(leader).or_default().push(a),
                None => self.metadata_stale = true,
            }
        }
        let mut out = Vec::new();
        for (leader, asked) in by_leader {
            match self.link_for(leader) {
                Some(link) => out.push((link, asked)),
                None => self.metadata_stale = true,
            }
        }
        out
    }

    fn start_resets(&mut self, now: Millis, tasks: &mut JoinSet<Completion>) {
        if !Self::due(self.list_retry_at, now) {
            return;
        }
        let awaiting = self.fetcher.awaiting_reset(&self.listing);
        for (link, asked) in self.by_leader(awaiting) {
            self.listing.extend(asked.iter().map(|a| a.token));
            let request = self.fetcher.reset_request(&asked);
            self.spawn_call(tasks, link, request, |result| Completion::Listed {
                asked,
                result,
            });
        }
    }

    /// Sends `request` on `link` (bounded by `request.timeout.ms`) in a task whose completion
    /// `done` makes of the answer.
    fn spawn_call<R>(
        &self,
        tasks: &mut JoinSet<Completion>,
        link: BrokerLink,
        request: R,
        done: impl FnOnce(Result<R::Response>) -> Completion + Send + 'static,
    ) where
        R: Request + Send + 'static,
        R::Response: Send + 'static,
    {
        let timeout = self.config.request_timeout();
        let client_id = Arc::clone(&self.client_id);
        tasks.spawn(async move { done(call(&link, request, None, client_id, timeout).await) });
    }

    /// OffsetForLeaderEpoch for the positions to validate after a leader change (KIP-320),
    /// to each partition's leader.
    fn start_validations(&mut self, now: Millis, tasks: &mut JoinSet<Completion>) {
        if !Self::due(self.validate_retry_at, now) {
            return;
        }
        let awaiting = self.fetcher.awaiting_validation(&self.validating);
        for (link, asked) in self.by_leader(awaiting) {
            self.validating.extend(asked.iter().map(|a| a.token));
            let request = self.fetcher.validation_request(&asked);
            self.spawn_call(tasks, link, request, |result| Completion::Validated {
                asked,
                result,
            });
        }
    }

    fn start_fetches(&mut self, now: Millis, tasks: &mut JoinSet<Completion>) {
        if !Self::due(self.fetch_retry_at, now) {
            return;
        }
        // Every broker has its fetch in flight (the usual state of a busy consumer): no round
        // could send anything, so none is computed; each turn would otherwise look at every
        // owned partition. A partition without a leader is noticed by `start_work` meanwhile.
        let brokers = &self.metadata.brokers;
        if !brokers.is_empty() && brokers.keys().all(|b| self.fetching.contains(b)) {
            return;
        }
        // A fetch of caught-up partitions only is held back while the same broker's records
        // are being read (see `Fetcher::fetch_round`); one fetch per broker is in flight.
        let round = self
            .fetcher
            .fetch_round(&self.membership.fetchable(), |tp| self.leader_of(tp));
        self.metadata_stale |= round.leaderless;
        for (leader, fetched) in round.fetches {
            if self.fetching.contains(&leader) {
                continue;
            }
            let Some(link) = self.link_for(leader) else {
                self.metadata_stale = true;
                continue;
            };
            self.fetching.insert(leader);
            let request = self.fetcher.fetch_request(leader, &fetched);
            let timeout = self.config.request_timeout()
                + Duration::from_millis(self.config.fetch_max_wait_ms);
            let client_id = Arc::clone(&self.client_id);
            tasks.spawn(async move {
                let started = Instant::now();
                let result =
                    call(&link, request, Some(FETCH_VERSION_CAP), client_id, timeout).await;
                Completion::Fetch {
                    broker: leader,
                    fetched,
                    result,
                    latency_ms: elapsed_ms(started),
                }
            });
        }
    }

    /// A fetch answer's latency and bytes, for the metrics.
    fn observe_fetch(&mut self, broker: BrokerId, latency_ms: u64, response: &FetchResponse) {
        let bytes: Vec<(TopicPartition, u64)> = response
            .responses
            .iter()
            .flat_map(|topic| {
                let name: Arc<str> = Arc::from(topic.topic.as_str());
                topic.partitions.iter().filter_map(move |p| {
                    let n = p.records.as_ref().map_or(0, |r| r.len() as u64);
                    (n > 0).then(|| (TopicPartition::new(Arc::clone(&name), p.partition_index), n))
                })
            })
            .collect();
        let address = self.metadata.brokers.get(&broker).map(String::as_str);
        self.figures.fetched(
            broker,
            address,
            latency_ms,
            bytes.iter().map(|(tp, n)| (tp, *n)),
        );
    }

    /// The lags of `answered` (partitions a fetch answer covered, or a poll handed records
    /// of), and `records-lag-max` over every owned partition.
    pub(super) fn observe_lags(&mut self, answered: &[TopicPartition]) {
        // No map of every partition per answer or poll: one pass for the maximum.
        let max = self.fetcher.max_lag();
        let fetcher = &self.fetcher;
        self.figures.lags(
            answered
                .iter()
                .filter_map(|tp| Some((tp, fetcher.lag(tp)?))),
            max,
        );
    }

    /// Acts on what an answer asks for.
    fn follow_up(&mut self, followup: Followup, retry_at: RetryTimer, now: Millis) {
        self.metadata_stale |= followup.refresh_metadata;
        if followup.retry {
            let at = Some(self.after_backoff(now));
            match retry_at {
                RetryTimer::Fetch => self.fetch_retry_at = at,
                RetryTimer::List => self.list_retry_at = at,
                RetryTimer::Validate => self.validate_retry_at = at,
                RetryTimer::Committed => self.committed_retry_at = at,
            }
        }
        for e in followup.errors {
            self.errors.push(e);
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
                        self.report_topic_errors(&response);
                        self.match_pattern(&response);
                        self.metadata_refresh_at =
                            Some(now.saturating_add(self.config.metadata_max_age_ms));
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
                        if e.is_fatal() {
                            self.fatal = Some(e);
                            return;
                        }
                        // GROUP_AUTHORIZATION_FAILED (no DESCRIBE on the group) and the like
                        // reach `poll`; the look-up goes on after the back-off.
                        if let Some(code) = e.code().filter(|c| !c.is_retriable()) {
                            self.errors.push(Error::GroupRefused {
                                group: self.config.group_id.clone(),
                                api: "FindCoordinator",
                                code,
                            });
                        }
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
                        let api = membership_api(&response);
                        let view = View {
                            metadata: &self.metadata,
                            ids: &self.topic_ids,
                        };
                        if let Err(e) = self.membership.on_response(response, now, &view) {
                            warn!("group membership failed: {}", ErrorChain(&e));
                            self.fatal = Some(self.naming_the_group(e, api));
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
                latency_ms,
            } => {
                self.fetching.remove(&broker);
                match result {
                    Ok(response) => {
                        self.observe_fetch(broker, latency_ms, &response);
                        let answered: Vec<TopicPartition> =
                            fetched.iter().map(|(tp, _, _)| tp.clone()).collect();
                        let followup = self.fetcher.apply_fetch(broker, response, fetched);
                        self.observe_lags(&answered);
                        self.follow_up(followup, RetryTimer::Fetch, now);
                    }
                    Err(e) => {
                        debug!("fetch from broker {broker} failed: {}", ErrorChain(&e));
                        self.fetcher.fetch_failed(broker);
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
                latency_ms,
            } => self.apply_auto_commit(offsets, &metadata, result, latency_ms, now),
            Completion::Committed { asked, result } => {
                self.committed_in_flight = false;
                self.apply_committed(asked, result, now);
            }
            Completion::Listed { asked, result } => {
                for a in &asked {
                    self.listing.remove(&a.token);
                }
                match result {
                    Ok(response) => {
                        let followup = self.fetcher.apply_listed(response, &asked);
                        self.follow_up(followup, RetryTimer::List, now);
                    }
                    Err(e) => self.request_failed("ListOffsets", &e, RetryTimer::List, now),
                }
            }
            Completion::Validated { asked, result } => {
                for a in &asked {
                    self.validating.remove(&a.token);
                }
                match result {
                    Ok(response) => {
                        let followup = self.fetcher.apply_validated(response, &asked);
                        self.follow_up(followup, RetryTimer::Validate, now);
                    }
                    // A leader without OffsetForLeaderEpoch v3 (before Kafka 2.1): the
                    // positions stand as they are, as the Java consumer leaves them.
                    Err(e) if e.code() == Some(ErrorCode::UNSUPPORTED_VERSION) => {
                        debug!("the leader cannot validate positions (KIP-320): skipped");
                        self.fetcher.validation_unsupported(&asked);
                    }
                    Err(e) => {
                        self.request_failed("OffsetForLeaderEpoch", &e, RetryTimer::Validate, now);
                    }
                }
            }
        }
    }

    /// Classic pattern subscription: the topics of a full metadata answer that match
    /// (internal topics never do, as Java's `exclude.internal.topics`) become the
    /// subscription, and the member rejoins when they changed (matches found in the middle
    /// of a join are joined with once that round ends: `ClassicMember::subscribe`).
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

    /// A ListOffsets or OffsetForLeaderEpoch to a leader got no answer: the leader may have
    /// moved; asked again after the back-off. One that cannot succeed (an authentication
    /// failure, say) ends the consumer.
    fn request_failed(&mut self, api: &str, e: &Error, retry_at: RetryTimer, now: Millis) {
        debug!("{api} failed: {}", ErrorChain(e));
        if e.is_fatal() {
            self.fatal = Some(e.clone());
            return;
        }
        self.follow_up(
            Followup {
                refresh_metadata: true,
                retry: true,
                errors: Vec::new(),
            },
            retry_at,
            now,
        );
    }

    /// The topics this consumer reads (subscribed, or of partitions it owns) that the
    /// metadata answered with an error no retry can fix (TOPIC_AUTHORIZATION_FAILED: no
    /// DESCRIBE on the topic) are reported to `poll`; the metadata is asked again after the
    /// back-off meanwhile, so granting the access lets the consumer go on.
    fn report_topic_errors(&mut self, response: &MetadataResponse) {
        for topic in &response.topics {
            let code = ErrorCode(topic.error_code);
            let Some(name) = topic.name.as_deref() else {
                continue;
            };
            if code.is_ok() || code.is_retriable() {
                continue;
            }
            let read_here = self.subscription.iter().any(|t| t == name)
                || self.fetcher.partitions().any(|tp| &*tp.topic == name);
            if read_here {
                self.errors.push(Error::TopicRefused {
                    topic: name.to_owned(),
                    partition: None,
                    api: "Metadata",
                    code,
                });
            }
        }
    }

    /// A membership error, naming the group when it is the group's (GROUP_AUTHORIZATION_FAILED
    /// and the like, answered to `api`).
    fn naming_the_group(&self, e: Error, api: &'static str) -> Error {
        match e {
            Error::Broker { code, .. } if code == ErrorCode::GROUP_AUTHORIZATION_FAILED => {
                Error::GroupRefused {
                    group: self.config.group_id.clone(),
                    api,
                    code,
                }
            }
            other => other,
        }
    }

    /// The answer to an OffsetFetch for `asked`. The group's error covers every partition:
    /// the coordinator moved (looked up again), is loading, or a transaction that commits
    /// offsets is pending (UNSTABLE_OFFSET_COMMIT, KIP-447: the answer comes once it
    /// completes) are asked again after the back-off; one no retry can fix
    /// (GROUP_AUTHORIZATION_FAILED: no READ on the group) is also reported, naming the group.
    /// A partition's own error is that partition's (see [`Followup`]).
    fn apply_committed(
        &mut self,
        asked: Vec<Asked>,
        result: Result<OffsetFetchResponse>,
        now: Millis,
    ) {
        let response = match result {
            Ok(r) => r,
            Err(e) => {
                debug!("OffsetFetch failed: {}", ErrorChain(&e));
                if e.is_fatal() {
                    self.fatal = Some(e);
                    return;
                }
                self.coordinator = None;
                self.committed_retry_at = Some(self.after_backoff(now));
                return;
            }
        };
        let partitions: Vec<TopicPartition> = asked.iter().map(|a| a.partition.clone()).collect();
        let answers: Vec<(Asked, PartitionCommitted)> =
            match committed_offsets(&response, &partitions) {
                Ok(found) => asked
                    .into_iter()
                    .zip(found)
                    .map(|(a, (_, answer))| (a, answer))
                    .collect(),
                Err(code) => {
                    if matches!(
                        code,
                        ErrorCode::NOT_COORDINATOR | ErrorCode::COORDINATOR_NOT_AVAILABLE
                    ) {
                        self.coordinator = None;
                    }
                    if !code.is_retriable() {
                        self.errors.push(Error::GroupRefused {
                            group: self.config.group_id.clone(),
                            api: "OffsetFetch",
                            code,
                        });
                    }
                    self.committed_retry_at = Some(self.after_backoff(now));
                    return;
                }
            };
        let followup = self.fetcher.apply_committed(answers);
        self.follow_up(followup, RetryTimer::Committed, now);
    }
}

/// The API a membership answer is to, for the errors that name it.
fn membership_api(response: &MembershipResponse) -> &'static str {
    match response {
        MembershipResponse::ConsumerHeartbeat(_) => "ConsumerGroupHeartbeat",
        MembershipResponse::Join(_) => "JoinGroup",
        MembershipResponse::Sync(_) => "SyncGroup",
        MembershipResponse::Heartbeat(_) => "Heartbeat",
    }
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
