//! The classic group protocol, member side: JoinGroup, the leader assigns, SyncGroup hands
//! each member its partitions, Heartbeat keeps the member alive and learns of the next
//! rebalance (REBALANCE_IN_PROGRESS), LeaveGroup leaves. Two rebalance protocols, chosen by
//! `partition.assignment.strategy`:
//!
//! - `cooperative-sticky` (KIP-429, the default): the member rejoins keeping (and fetching)
//!   what it owns and tells the leader so in its subscription; the leader
//!   ([`crate::consumer::sticky_assignor`]) keeps partitions where they are and withholds the
//!   ones that move. After SyncGroup, assigned − owned is `Assigned`, owned − assigned is
//!   `Revoked`, and when something was revoked the member rejoins (after the user's next
//!   `poll`) so the next rebalance hands those partitions to their new owner. This follows
//!   Java's `ConsumerCoordinator.onJoinComplete`.
//! - `range` (eager): when a rebalance starts the member revokes everything it owns.
//!
//! Both keep the rule of [`super`]: revoked partitions stay owned until the next `poll`, and
//! the member rejoins (which is what lets the coordinator move them) only then. Until that
//! poll it goes on heartbeating with the generation it has (rule M1): the coordinator counts a
//! heartbeat answered REBALANCE_IN_PROGRESS as liveness, so a member still processing what it
//! was handed is not expired, and the commit it makes at `Revoked` is accepted (the Java
//! consumer's heartbeat thread does the same, KIP-62).
//!
//! A rebalance is also the member's to start (rule M5, as Java's
//! `ConsumerCoordinator.rejoinNeededOrPending`): when its subscription changed since the
//! JoinGroup of the round (a `subscribe`, or a pattern's matches, made mid-join: the
//! assignment is then for the old subscription), and, on the leader, when the partition count
//! of a topic it assigned changed since (Java's `MetadataSnapshot`: the leader assigns for the
//! whole group, so it watches every member's topics; the driver refreshes their metadata at
//! least every `metadata.max.age.ms`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use super::{MembershipEvent, MembershipRequest, MembershipResponse, TopicView};
use crate::consumer::assignor::{
    self, CONSUMER_PROTOCOL_TYPE, COOPERATIVE_STICKY, RANGE, Subscription,
};
use crate::consumer::sticky_assignor;
use crate::consumer::vocabulary::AssignmentStrategy;
use crate::error::Error;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::generated::{group_id, str_bytes};
use crate::types::ConsumerGroupMetadata;
use crate::types::{Millis, TopicPartition};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest,
};

/// How soon a request goes again after a retriable error in a rebalance.
const REBALANCE_RETRY_MS: Millis = 100;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// Not in the group; the next request joins (after `retry_at`).
    Unjoined,
    /// JoinGroup in flight.
    Joining,
    /// Joined; SyncGroup to send. The leader carries the members' subscriptions.
    Syncing {
        leader_members: Option<BTreeMap<String, Subscription>>,
    },
    /// SyncGroup in flight.
    SyncSent,
    /// Owns its assignment; heartbeats.
    Stable,
    /// A rebalance is to be joined, but revoked partitions are not handed back yet (the
    /// user's next `poll` does): the member heartbeats with its generation meanwhile, so
    /// the coordinator keeps it alive, and joins after that poll.
    RevokingBeforeJoin,
}

/// One member of a classic consumer group.
#[derive(Debug)]
pub struct ClassicMember {
    group_id: String,
    member_id: String,
    instance_id: Option<String>,
    session_timeout_ms: i32,
    rebalance_timeout_ms: i32,
    heartbeat_interval_ms: Millis,
    subscription: Vec<String>,
    /// The subscription the JoinGroup of the round under way carried: an assignment made for
    /// another one is not the member's to keep, and it rejoins.
    joined_subscription: Vec<String>,
    /// The leader's: the partition count of every topic its assignment covered, as the
    /// assignor saw them. A count that moves since means partitions nobody was assigned (or
    /// that are gone), so the leader rejoins. `None` on a follower.
    assignment_snapshot: Option<BTreeMap<String, i32>>,
    generation: i32,
    phase: Phase,
    strategy: AssignmentStrategy,
    owned: BTreeSet<TopicPartition>,
    /// Owned partitions handed over in a `Revoked` event: not fetched, given up (and the
    /// member rejoins) at the first `on_poll` after the event was taken.
    revoking: BTreeSet<TopicPartition>,
    events: VecDeque<MembershipEvent>,
    in_flight: bool,
    next_at: Option<Millis>,
    leaving: bool,
    /// Left for exceeding `max.poll.interval.ms`: nothing is sent until the next `on_poll`.
    paused_until_poll: bool,
}

/// What a classic member takes from the consumer's settings, cut from them once by the
/// consumer state: the member reads no configuration of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicMemberConfig {
    /// `group.id`.
    pub group_id: String,
    /// `group.instance.id`: a static member (KIP-345).
    pub instance_id: Option<String>,
    /// `session.timeout.ms`, sent in JoinGroup.
    pub session_timeout_ms: i32,
    /// `max.poll.interval.ms`, JoinGroup's rebalance timeout (KIP-62).
    pub rebalance_timeout_ms: i32,
    /// `heartbeat.interval.ms`.
    pub heartbeat_interval_ms: Millis,
    /// `partition.assignment.strategy`.
    pub strategy: AssignmentStrategy,
}

impl ClassicMember {
    /// A member that has not joined yet.
    pub fn new(config: ClassicMemberConfig) -> Self {
        let ClassicMemberConfig {
            group_id,
            instance_id,
            session_timeout_ms,
            rebalance_timeout_ms,
            heartbeat_interval_ms,
            strategy,
        } = config;
        Self {
            group_id,
            member_id: String::new(),
            instance_id,
            session_timeout_ms,
            rebalance_timeout_ms,
            heartbeat_interval_ms,
            subscription: Vec::new(),
            joined_subscription: Vec::new(),
            assignment_snapshot: None,
            generation: -1,
            phase: Phase::Unjoined,
            strategy,
            owned: BTreeSet::new(),
            revoking: BTreeSet::new(),
            events: VecDeque::new(),
            in_flight: false,
            next_at: None,
            leaving: false,
            paused_until_poll: false,
        }
    }

    /// Replaces the subscription; a member in the group rejoins to have it count. In the
    /// middle of a join the round under way carries the old one: its SyncGroup answer sees the
    /// change and the member rejoins then.
    pub fn subscribe(&mut self, mut topics: Vec<String>) {
        topics.sort();
        topics.dedup();
        if topics == self.subscription {
            return;
        }
        self.subscription = topics;
        if matches!(self.phase, Phase::Stable | Phase::RevokingBeforeJoin) {
            self.rebalance_started();
        }
    }

    fn cooperative(&self) -> bool {
        self.strategy == AssignmentStrategy::CooperativeSticky
    }

    fn subscribes_to(&self, topic: &str) -> bool {
        self.subscription.iter().any(|t| t == topic)
    }

    /// Rejoin: eager gives up everything first; cooperative keeps what it owns except the
    /// topics it no longer subscribes to (Java's `onJoinPrepare` does the same). With
    /// partitions to hand back first, the member heartbeats until the user's next `poll`
    /// (keeping the heartbeat schedule it has); otherwise it joins at once.
    fn rebalance_started(&mut self) {
        let revoke: Vec<TopicPartition> = self
            .owned
            .iter()
            .filter(|tp| !self.cooperative() || !self.subscribes_to(&tp.topic))
            .cloned()
            .collect();
        self.revoke(revoke);
        if self.revoking.is_empty() {
            self.phase = Phase::Unjoined;
            self.next_at = None;
        } else {
            self.phase = Phase::RevokingBeforeJoin;
        }
    }

    /// Whether the member heartbeats now (owning a generation it has not left for a join).
    fn heartbeating(&self) -> bool {
        matches!(self.phase, Phase::Stable | Phase::RevokingBeforeJoin)
    }

    /// Leader: whether a topic its assignment covered has another partition count now.
    fn metadata_changed(&self, view: &dyn TopicView) -> bool {
        self.assignment_snapshot.as_ref().is_some_and(|snapshot| {
            snapshot
                .iter()
                .any(|(topic, count)| view.partition_count(topic).is_some_and(|n| n != *count))
        })
    }

    /// Hands `partitions` to the user as `Revoked`; they are given up at the next `on_poll`.
    fn revoke(&mut self, partitions: Vec<TopicPartition>) {
        let partitions: Vec<TopicPartition> = partitions
            .into_iter()
            .filter(|tp| !self.revoking.contains(tp))
            .collect();
        if !partitions.is_empty() {
            self.revoking.extend(partitions.iter().cloned());
            self.events.push_back(MembershipEvent::Revoked(partitions));
        }
    }

    /// The user called `poll`: once the `Revoked` event was taken, its partitions are given
    /// up and the member rejoins.
    pub fn on_poll(&mut self, _now: Millis) {
        if self.paused_until_poll {
            self.paused_until_poll = false;
            self.leaving = false;
        }
        let handed_over = !self
            .events
            .iter()
            .any(|e| matches!(e, MembershipEvent::Revoked(_)));
        if !self.revoking.is_empty() && handed_over {
            for tp in std::mem::take(&mut self.revoking) {
                self.owned.remove(&tp);
            }
            if matches!(
                self.phase,
                Phase::Stable | Phase::Unjoined | Phase::RevokingBeforeJoin
            ) {
                self.phase = Phase::Unjoined;
                self.next_at = None;
            }
        }
    }

    fn protocol_name(&self) -> &'static str {
        match self.strategy {
            AssignmentStrategy::Range => RANGE,
            _ => COOPERATIVE_STICKY,
        }
    }

    fn metadata(&self) -> bytes::Bytes {
        if !self.cooperative() {
            return assignor::encode_subscription(&self.subscription);
        }
        let mut owned: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for tp in &self.owned {
            owned
                .entry(tp.topic.to_string())
                .or_default()
                .push(tp.partition);
        }
        assignor::encode_cooperative_subscription(&self.subscription, &owned, self.generation)
    }

    fn assign(
        &self,
        members: &BTreeMap<String, Subscription>,
        view: &dyn TopicView,
    ) -> BTreeMap<String, BTreeMap<String, Vec<i32>>> {
        if self.cooperative() {
            sticky_assignor::assign_cooperative_sticky(members, |t| view.partition_count(t))
        } else {
            let topics = members
                .iter()
                .map(|(m, s)| (m.clone(), s.topics.clone()))
                .collect();
            assignor::assign_range(&topics, |t| view.partition_count(t))
        }
    }

    /// Topics the leader needs partition counts of beyond its own subscription: every
    /// member's while it assigns, and afterwards those its assignment covered (watched for a
    /// change of partition count).
    pub fn wanted_topics(&self) -> Vec<String> {
        match (&self.phase, &self.assignment_snapshot) {
            (
                Phase::Syncing {
                    leader_members: Some(members),
                },
                _,
            ) => {
                let set: BTreeSet<&String> = members.values().flat_map(|s| &s.topics).collect();
                set.into_iter().cloned().collect()
            }
            (_, Some(snapshot)) => snapshot.keys().cloned().collect(),
            _ => Vec::new(),
        }
    }

    /// The request to send now, if one is due.
    pub fn poll_request(&mut self, now: Millis, view: &dyn TopicView) -> Option<MembershipRequest> {
        if self.in_flight
            || self.leaving
            || self.paused_until_poll
            || self.next_at.is_some_and(|at| at > now)
        {
            return None;
        }
        if self.phase == Phase::Stable && self.metadata_changed(view) {
            // Partitions were added (or a topic went): rejoin so the next assignment covers
            // what is there now.
            self.assignment_snapshot = None;
            self.rebalance_started();
        }
        let request = match &self.phase {
            // Not before the revoked partitions are given up: the join must not claim them.
            Phase::Unjoined if !self.subscription.is_empty() && self.revoking.is_empty() => {
                self.phase = Phase::Joining;
                self.joined_subscription = self.subscription.clone();
                self.assignment_snapshot = None;
                MembershipRequest::Join(
                    JoinGroupRequest::default()
                        .with_group_id(group_id(&self.group_id))
                        .with_session_timeout_ms(self.session_timeout_ms)
                        .with_rebalance_timeout_ms(self.rebalance_timeout_ms)
                        .with_member_id(str_bytes(&self.member_id))
                        .with_group_instance_id(self.instance_id.as_deref().map(str_bytes))
                        .with_protocol_type(str_bytes(CONSUMER_PROTOCOL_TYPE))
                        .with_protocols(vec![
                            JoinGroupRequestProtocol::default()
                                .with_name(str_bytes(self.protocol_name()))
                                .with_metadata(self.metadata()),
                        ]),
                )
            }
            Phase::Syncing { leader_members } => {
                // The leader assigns only once it knows every subscribed topic's partition
                // count (the driver fetches the metadata of `wanted_topics`); a topic left out
                // would stay unassigned until the next rebalance.
                if let Some(members) = leader_members
                    && members
                        .values()
                        .flat_map(|s| &s.topics)
                        .any(|t| view.partition_count(t).is_none())
                {
                    return None;
                }
                let (assignments, snapshot) = match leader_members {
                    Some(members) => {
                        let assignments = self
                            .assign(members, view)
                            .into_iter()
                            .map(|(member_id, parts)| {
                                SyncGroupRequestAssignment::default()
                                    .with_member_id(str_bytes(&member_id))
                                    .with_assignment(assignor::encode_assignment(&parts))
                            })
                            .collect();
                        // The counts the assignor used: every one is known (checked above).
                        let snapshot: BTreeMap<String, i32> = members
                            .values()
                            .flat_map(|s| &s.topics)
                            .filter_map(|t| Some((t.clone(), view.partition_count(t)?)))
                            .collect();
                        (assignments, Some(snapshot))
                    }
                    None => (Vec::new(), None),
                };
                self.assignment_snapshot = snapshot;
                self.phase = Phase::SyncSent;
                MembershipRequest::Sync(
                    SyncGroupRequest::default()
                        .with_group_id(group_id(&self.group_id))
                        .with_generation_id(self.generation)
                        .with_member_id(str_bytes(&self.member_id))
                        .with_group_instance_id(self.instance_id.as_deref().map(str_bytes))
                        .with_protocol_type(Some(str_bytes(CONSUMER_PROTOCOL_TYPE)))
                        .with_protocol_name(Some(str_bytes(self.protocol_name())))
                        .with_assignments(assignments),
                )
            }
            Phase::Stable | Phase::RevokingBeforeJoin => MembershipRequest::Heartbeat(
                HeartbeatRequest::default()
                    .with_group_id(group_id(&self.group_id))
                    .with_generation_id(self.generation)
                    .with_member_id(str_bytes(&self.member_id))
                    .with_group_instance_id(self.instance_id.as_deref().map(str_bytes)),
            ),
            _ => return None,
        };
        self.in_flight = true;
        Some(request)
    }

    fn retry(&mut self, now: Millis, phase: Phase) {
        self.phase = phase;
        self.next_at = Some(now + REBALANCE_RETRY_MS);
    }

    /// Fenced: what was owned is lost; rejoin.
    fn lose_everything(&mut self, forget_member_id: bool) {
        if forget_member_id {
            self.member_id.clear();
        }
        self.generation = -1;
        // Events not yet handed over about partitions now lost are moot, but a `Lost` still
        // queued from an earlier loss must reach the user (a refused commit right after a
        // fenced heartbeat would otherwise swallow it, and the next event would be the
        // rejoin's `Assigned`).
        self.events
            .retain(|e| matches!(e, MembershipEvent::Lost(_)));
        self.revoking.clear();
        if !self.owned.is_empty() {
            let lost = std::mem::take(&mut self.owned).into_iter().collect();
            self.events.push_back(MembershipEvent::Lost(lost));
        }
        self.assignment_snapshot = None;
        self.phase = Phase::Unjoined;
        self.next_at = None;
    }

    /// The coordinator's answer. An `Err` is fatal.
    pub fn on_response(&mut self, response: MembershipResponse, now: Millis) -> Result<(), Error> {
        self.in_flight = false;
        if self.leaving {
            return Ok(());
        }
        self.next_at = None;
        match response {
            MembershipResponse::Join(r) => match ErrorCode(r.error_code) {
                ErrorCode::NONE => {
                    self.member_id = r.member_id;
                    self.generation = r.generation_id;
                    let leader_members = (r.leader == self.member_id).then(|| {
                        r.members
                            .iter()
                            .map(|m| {
                                // A subscription that does not decode subscribes to nothing.
                                let subscription =
                                    assignor::decode_subscription(&m.metadata).unwrap_or_default();
                                (m.member_id.clone(), subscription)
                            })
                            .collect()
                    });
                    self.phase = Phase::Syncing { leader_members };
                }
                // KIP-394: the first JoinGroup only hands out the member id.
                ErrorCode::MEMBER_ID_REQUIRED => {
                    self.member_id = r.member_id;
                    self.phase = Phase::Unjoined;
                }
                ErrorCode::UNKNOWN_MEMBER_ID => self.lose_everything(true),
                code if retriable_in_rebalance(code) => self.retry(now, Phase::Unjoined),
                code => return Err(Error::broker(code)),
            },
            MembershipResponse::Sync(r) => match ErrorCode(r.error_code) {
                ErrorCode::NONE => {
                    let mut assigned = BTreeSet::new();
                    for (topic, partitions) in assignor::decode_assignment(&r.assignment)? {
                        let topic: Arc<str> = Arc::from(topic);
                        for p in partitions {
                            assigned.insert(TopicPartition::new(Arc::clone(&topic), p));
                        }
                    }
                    // The subscription changed since this round's JoinGroup: the leader
                    // assigned for the old one. Only what the member still subscribes to is
                    // taken (an eager member takes nothing: it would revoke it again at once),
                    // and it rejoins with the current subscription (Java's onJoinComplete and
                    // `joinedSubscription`).
                    let resubscribed = self.joined_subscription != self.subscription;
                    if resubscribed {
                        let eager = !self.cooperative();
                        assigned.retain(|tp| !eager && self.subscribes_to(&tp.topic));
                    }
                    // KIP-429 (Java's onJoinComplete): owned − assigned is revoked first (the
                    // user commits them), assigned − owned is added; a revocation means the
                    // leader withheld those partitions from their new owner, so rejoin (at
                    // the next poll, in `on_poll`) for the rebalance that hands them over.
                    // Eager members own nothing here: everything is "added".
                    let revoked: Vec<TopicPartition> =
                        self.owned.difference(&assigned).cloned().collect();
                    let added: Vec<TopicPartition> =
                        assigned.difference(&self.owned).cloned().collect();
                    self.revoke(revoked);
                    self.owned.extend(added.iter().cloned());
                    if !added.is_empty() {
                        self.events.push_back(MembershipEvent::Assigned(added));
                    }
                    self.phase = Phase::Stable;
                    self.next_at = Some(now + self.heartbeat_interval_ms);
                    if resubscribed {
                        self.rebalance_started();
                    }
                }
                ErrorCode::UNKNOWN_MEMBER_ID => self.lose_everything(true),
                ErrorCode::ILLEGAL_GENERATION => self.lose_everything(false),
                code if retriable_in_rebalance(code) => self.retry(now, Phase::Unjoined),
                code => return Err(Error::broker(code)),
            },
            MembershipResponse::Heartbeat(r) => {
                match ErrorCode(r.error_code) {
                    ErrorCode::NONE => {}
                    // A member that heartbeats while it hands revoked partitions back hears
                    // this until it joins: its session is kept alive all the same.
                    ErrorCode::REBALANCE_IN_PROGRESS => {
                        if self.phase == Phase::Stable {
                            self.rebalance_started();
                        }
                    }
                    ErrorCode::UNKNOWN_MEMBER_ID => {
                        self.lose_everything(true);
                        return Ok(());
                    }
                    ErrorCode::ILLEGAL_GENERATION => {
                        self.lose_everything(false);
                        return Ok(());
                    }
                    code if retriable_in_rebalance(code) => {
                        self.next_at = Some(now + REBALANCE_RETRY_MS);
                        return Ok(());
                    }
                    code => return Err(Error::broker(code)),
                }
                // The next heartbeat, unless the member is to join now (the user's poll
                // handed revoked partitions back while this one was in flight).
                if self.heartbeating() && self.next_at.is_none() {
                    self.next_at = Some(now + self.heartbeat_interval_ms);
                }
            }
            MembershipResponse::ConsumerHeartbeat(_) => {}
        }
        Ok(())
    }

    /// The request in flight got no answer: send it again after `backoff_ms` (a join or sync
    /// starts over with a join).
    pub fn on_request_failed(&mut self, now: Millis, backoff_ms: Millis) {
        self.in_flight = false;
        self.next_at = Some(now.saturating_add(backoff_ms));
        if matches!(self.phase, Phase::Joining | Phase::SyncSent) {
            self.phase = Phase::Unjoined;
        }
    }

    /// Between JoinGroup and the SyncGroup answer. The generation changes then, and the
    /// coordinator refuses commits (REBALANCE_IN_PROGRESS, then ILLEGAL_GENERATION for the old
    /// generation), so the driver hands nothing to the user meanwhile: a commit made after a
    /// `poll` uses a generation the coordinator still accepts.
    pub fn joining(&self) -> bool {
        matches!(
            self.phase,
            Phase::Joining | Phase::Syncing { .. } | Phase::SyncSent
        )
    }

    /// The next event for the user.
    pub fn next_event(&mut self) -> Option<MembershipEvent> {
        self.events.pop_front()
    }

    /// The partitions owned.
    pub fn owned(&self) -> Vec<TopicPartition> {
        self.owned.iter().cloned().collect()
    }

    /// The owned partitions, in order (being revoked or not).
    pub fn owned_in_order(&self) -> impl Iterator<Item = &TopicPartition> {
        self.owned.iter()
    }

    /// The partitions to fetch: the owned ones not being revoked. A cooperative member
    /// keeps fetching them through a rebalance (KIP-429); an eager one owns nothing then.
    pub fn fetchable(&self) -> Vec<TopicPartition> {
        self.owned.difference(&self.revoking).cloned().collect()
    }

    /// KIP-447 metadata: the generation id.
    pub fn group_metadata(&self) -> ConsumerGroupMetadata {
        ConsumerGroupMetadata::new(
            self.group_id.clone(),
            self.generation,
            self.member_id.clone(),
            self.instance_id.clone(),
        )
    }

    /// When the next request is due.
    pub fn next_deadline(&self) -> Option<Millis> {
        if self.in_flight { None } else { self.next_at }
    }

    /// Leaves because the application stopped polling: every partition is `Lost`; the
    /// member rejoins (a dynamic member with a new member id) at the next `on_poll`. A
    /// static member sends nothing and lets its session expire (KIP-345).
    pub fn leave_until_next_poll(&mut self) -> Option<LeaveGroupRequest> {
        let request = self.leave();
        self.leaving = true;
        self.paused_until_poll = true;
        self.lose_everything(self.instance_id.is_none());
        request
    }

    /// See [`super::Membership::commit_refused`].
    pub fn commit_refused(&mut self, code: ErrorCode) -> bool {
        if self.generation < 0 {
            // Not in the group (already lost, or joining): nothing to act on.
            return false;
        }
        match code {
            ErrorCode::UNKNOWN_MEMBER_ID => self.lose_everything(true),
            ErrorCode::ILLEGAL_GENERATION => self.lose_everything(false),
            // The group is rebalancing: rejoin (a cooperative member keeps its partitions).
            ErrorCode::REBALANCE_IN_PROGRESS => {
                if self.phase == Phase::Stable {
                    self.rebalance_started();
                }
            }
            _ => return false,
        }
        true
    }

    /// Whether the next request is a JoinGroup or SyncGroup (which move the generation).
    pub fn next_request_moves_generation(&self) -> bool {
        matches!(self.phase, Phase::Unjoined | Phase::Syncing { .. })
    }

    /// The heartbeat interval (`heartbeat.interval.ms`).
    pub fn heartbeat_interval_ms(&self) -> Millis {
        self.heartbeat_interval_ms
    }

    /// LeaveGroup, if the member is in the group (a static member does not leave: KIP-345).
    pub fn leave(&mut self) -> Option<LeaveGroupRequest> {
        if self.member_id.is_empty() || self.leaving || self.instance_id.is_some() {
            return None;
        }
        self.leaving = true;
        // Built in the v3+ shape; v0–2 carry the member id alone (see `generated::shapes`).
        Some(
            LeaveGroupRequest::default()
                .with_group_id(group_id(&self.group_id))
                .with_members(vec![
                    MemberIdentity::default()
                        .with_member_id(str_bytes(&self.member_id))
                        .with_reason(Some(str_bytes("the consumer is closing"))),
                ]),
        )
    }
}

/// Errors of JoinGroup / SyncGroup / Heartbeat after which the member simply tries again.
fn retriable_in_rebalance(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::REBALANCE_IN_PROGRESS
            | ErrorCode::NOT_COORDINATOR
            | ErrorCode::COORDINATOR_NOT_AVAILABLE
            | ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
    )
}

#[cfg(test)]
mod tests;
