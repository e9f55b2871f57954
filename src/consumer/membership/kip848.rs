//! The KIP-848 consumer group protocol, member side.
//!
//! The coordinator owns the assignment: every ConsumerGroupHeartbeat answer may carry the
//! member's target assignment and bumps the member epoch when it changes. The member
//! reconciles: it first gives up the partitions it owns that are not in the target (handing the
//! user `Revoked`, and reporting the smaller owned set on the heartbeat after the user's next
//! `poll`), then takes the new ones (`Assigned`) and reports them. The coordinator only
//! assigns a partition once its previous owner reported it gone, so a partition is never owned
//! by two members at once (KIP-848 "Reconciliation").
//!
//! Fencing: FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID mean the coordinator already gave this
//! member's partitions away: they are `Lost` (no commit), and the member rejoins with epoch 0,
//! keeping its member id (KIP-1082: the id is the client's for its whole life).
//!
//! Offsets and the member epoch (KIP-447 generation): a commit carries the member epoch. On
//! Kafka 4.1 the new group coordinator (`ConsumerGroup.validateOffsetCommit`) accepts it only
//! when it equals the member's current epoch on the broker, answering STALE_MEMBER_EPOCH to an
//! OffsetCommit and ILLEGAL_GENERATION to a TxnOffsetCommit otherwise, and UNKNOWN_MEMBER_ID
//! for a member it does not know; non-transactional commits of a KIP-848 member must use
//! OffsetCommit v9+. The broker moves the epoch when it processes a heartbeat, so a commit
//! racing a heartbeat in flight is falsely fenced (KAFKA-19779). The driver therefore starts
//! no heartbeat while an offset commit holds the generation (`GenerationHold`), and a hold is
//! taken only once the heartbeat in flight is answered: under a hold,
//! [`ConsumerMember::group_metadata`] is exactly the broker's epoch.
//! KIP-1251 (Kafka 4.3, KAFKA-20066) relaxes the broker's rule to
//! `assignment epoch <= client epoch <= broker epoch` per partition, which removes that race.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::{MembershipEvent, TopicView};
use crate::error::Error;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::generated::{group_id, str_bytes, topic_id, topic_name};
use crate::protocol::messages::consumer_group_heartbeat::ConsumerGroupHeartbeatResponse;
use crate::types::ConsumerGroupMetadata;
use crate::types::{Millis, TopicPartition};
use kafka_protocol::messages::ConsumerGroupHeartbeatRequest;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;

/// A topic id (KIP-516).
pub type TopicId = [u8; 16];

/// A set of owned partitions, by topic id.
type OwnedSet = BTreeSet<(TopicId, i32)>;

/// What the heartbeat in flight carries, applied when it succeeds.
#[derive(Debug)]
struct InFlight {
    /// The owned set it reports, if it reports one.
    owned: Option<OwnedSet>,
    /// The version of the subscription it carries, if it carries it.
    subscription: Option<u64>,
    /// The membership it was sent in (see `ConsumerMember::membership`).
    membership: u64,
}

/// The member epoch that leaves the group.
const LEAVE_EPOCH: i32 = -1;
/// The member epoch a static member leaves with, keeping its partitions until its session
/// expires (KIP-848, as KIP-345 for the classic protocol).
const STATIC_LEAVE_EPOCH: i32 = -2;
/// The heartbeat interval until the coordinator tells its own.
const DEFAULT_HEARTBEAT_INTERVAL_MS: Millis = 3_000;
/// How soon a heartbeat goes again after the coordinator moved or is loading.
const COORDINATOR_RETRY_MS: Millis = 100;

/// One member of a KIP-848 consumer group.
#[derive(Debug)]
pub struct ConsumerMember {
    group_id: String,
    member_id: String,
    instance_id: Option<String>,
    rebalance_timeout_ms: i32,
    server_assignor: Option<String>,
    subscription: Vec<String>,
    /// A pattern subscription: the regular expression the coordinator resolves (RE2J,
    /// KIP-848); `subscription` is empty meanwhile.
    regex: Option<String>,
    /// The coordinator may hold a regex this member no longer subscribes with: the next
    /// subscription sent drops it (an empty `SubscribedTopicRegex`; an absent one keeps the
    /// stored pattern).
    regex_to_drop: bool,
    /// Whether the coordinator has the current subscription.
    subscription_sent: bool,
    /// Bumped at every change of the subscription: an answer to a heartbeat that carried an
    /// older one does not count as the current one sent.
    subscription_version: u64,
    /// 0: not in the group (the next heartbeat joins).
    epoch: i32,
    /// The partitions owned, with their topic ids.
    owned: BTreeMap<TopicPartition, TopicId>,
    /// `owned` by topic id, kept beside it: what heartbeats report and what the target is
    /// compared with, at every turn and poll, without being rebuilt from `owned` each time.
    owned_ids: OwnedSet,
    /// The owned set the coordinator last acknowledged; `None`: it must get it in full.
    owned_sent: Option<OwnedSet>,
    /// The heartbeat in flight.
    in_flight: Option<InFlight>,
    /// The coordinator's latest target assignment, not yet fully reconciled.
    target: Option<OwnedSet>,
    /// Handed to the user as `Revoked`; owned until the next `on_poll`.
    revoking: BTreeSet<TopicPartition>,
    events: VecDeque<MembershipEvent>,
    heartbeat_interval_ms: Millis,
    next_heartbeat: Option<Millis>,
    leaving: bool,
    /// Left for exceeding `max.poll.interval.ms`: nothing is sent until the next `on_poll`.
    paused_until_poll: bool,
    /// A commit was refused with ILLEGAL_GENERATION / STALE_MEMBER_EPOCH: whether the member
    /// still owns its partitions is unknown until the next heartbeat answer, and nothing is
    /// delivered meanwhile.
    unverified: bool,
    /// Counts the memberships this member ended: bumped when it leaves or loses everything.
    /// The answer to a heartbeat sent in an earlier one is dropped: its epoch and assignment
    /// are those of a membership the member has given up (the coordinator may have handed the
    /// partitions on), and applying them would undo the leave (rule M3).
    membership: u64,
}

/// What a KIP-848 member takes from the consumer's settings, cut from them once by the
/// consumer state (or the simulation): the member reads no configuration of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerMemberConfig {
    /// `group.id`.
    pub group_id: String,
    /// The client-generated member id (KIP-1082), one per member.
    pub member_id: String,
    /// `group.instance.id`: a static member.
    pub instance_id: Option<String>,
    /// `max.poll.interval.ms`, the heartbeat's rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// `group.remote.assignor`: the coordinator's assignor to use, or its default.
    pub server_assignor: Option<String>,
}

impl ConsumerMember {
    /// A member that has not joined yet.
    pub fn new(config: ConsumerMemberConfig) -> Self {
        let ConsumerMemberConfig {
            group_id,
            member_id,
            instance_id,
            rebalance_timeout_ms,
            server_assignor,
        } = config;
        Self {
            group_id,
            member_id,
            instance_id,
            rebalance_timeout_ms,
            server_assignor,
            subscription: Vec::new(),
            regex: None,
            regex_to_drop: false,
            subscription_sent: false,
            subscription_version: 0,
            epoch: 0,
            owned: BTreeMap::new(),
            owned_ids: OwnedSet::new(),
            owned_sent: None,
            in_flight: None,
            target: None,
            revoking: BTreeSet::new(),
            events: VecDeque::new(),
            heartbeat_interval_ms: DEFAULT_HEARTBEAT_INTERVAL_MS,
            next_heartbeat: None,
            leaving: false,
            paused_until_poll: false,
            unverified: false,
            membership: 0,
        }
    }

    /// The member epoch (0 before joining).
    #[cfg(test)]
    pub fn epoch(&self) -> i32 {
        self.epoch
    }

    /// Replaces the subscription.
    pub fn subscribe(&mut self, mut topics: Vec<String>) {
        topics.sort();
        topics.dedup();
        if topics != self.subscription || self.regex.is_some() {
            self.regex_to_drop |= self.regex.take().is_some();
            self.subscription = topics;
            self.subscription_sent = false;
            self.subscription_version += 1;
        }
    }

    /// Replaces the subscription with every topic whose name matches `regex`, which the
    /// coordinator resolves (and re-resolves as topics come and go).
    #[cfg(feature = "pattern-subscription")]
    pub fn subscribe_regex(&mut self, regex: String) {
        if self.regex.as_ref() != Some(&regex) || !self.subscription.is_empty() {
            self.subscription.clear();
            self.regex = Some(regex);
            self.regex_to_drop = false;
            self.subscription_sent = false;
            self.subscription_version += 1;
        }
    }

    /// The user called `poll`: the revoked partitions are given up now, and the next
    /// heartbeat (sent at once) tells the coordinator.
    pub fn on_poll(&mut self, _now: Millis) {
        for partition in std::mem::take(&mut self.revoking) {
            if let Some(id) = self.owned.remove(&partition) {
                self.owned_ids.remove(&(id, partition.partition));
            }
        }
        if self.paused_until_poll {
            self.paused_until_poll = false;
            self.leaving = false;
        }
    }

    /// Leaves (epoch -1, or -2 for a static member) because the application stopped
    /// polling: every partition is `Lost`, and the member rejoins with epoch 0 at the next
    /// `on_poll`. Answers to a heartbeat still in flight are ignored meanwhile.
    pub fn leave_until_next_poll(&mut self) -> Option<ConsumerGroupHeartbeatRequest> {
        let request = self.leave();
        self.leaving = true;
        self.paused_until_poll = true;
        self.lose_everything();
        request
    }

    /// See [`super::Membership::commit_refused`].
    pub fn commit_refused(&mut self, code: ErrorCode, now: Millis) -> bool {
        if self.epoch <= 0 {
            // Not in the group (already lost, or joining): nothing to act on.
            return false;
        }
        match code {
            ErrorCode::UNKNOWN_MEMBER_ID | ErrorCode::FENCED_MEMBER_EPOCH => {
                self.lose_everything();
                true
            }
            ErrorCode::ILLEGAL_GENERATION | ErrorCode::STALE_MEMBER_EPOCH => {
                // A full heartbeat now: its answer says whether the partitions are still ours
                // (NONE) or gone (FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID).
                self.unverified = true;
                self.owned_sent = None;
                self.next_heartbeat = Some(now);
                true
            }
            _ => false,
        }
    }

    /// The heartbeat interval in force (the coordinator's, once it answered).
    pub fn heartbeat_interval_ms(&self) -> Millis {
        self.heartbeat_interval_ms
    }

    /// The heartbeat to send now, if one is due.
    pub fn poll_request(&mut self, now: Millis) -> Option<ConsumerGroupHeartbeatRequest> {
        if self.in_flight.is_some() || self.leaving || self.paused_until_poll {
            return None;
        }
        if self.subscription.is_empty() && self.regex.is_none() && self.epoch == 0 {
            return None;
        }
        let owned_changed = self.owned_sent.as_ref() != Some(&self.owned_ids);
        let due = self.next_heartbeat.is_none_or(|at| at <= now)
            || self.epoch == 0
            || owned_changed
            || !self.subscription_sent;
        if !due {
            return None;
        }
        let joining = self.epoch == 0;
        let send_owned = (joining || owned_changed).then(|| self.owned_ids.clone());
        let send_subscription = joining || !self.subscription_sent;
        // Fields left null are unchanged since the last heartbeat the coordinator took; a
        // join and the heartbeat after a change send them in full, as the Java consumer does.
        let request = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(group_id(&self.group_id))
            .with_member_id(str_bytes(&self.member_id))
            .with_member_epoch(self.epoch)
            .with_instance_id(if joining {
                self.instance_id.as_deref().map(str_bytes)
            } else {
                None
            })
            .with_rebalance_timeout_ms(if joining {
                self.rebalance_timeout_ms
            } else {
                -1
            })
            .with_subscribed_topic_names(
                send_subscription
                    .then(|| self.subscription.iter().map(|t| topic_name(t)).collect()),
            )
            // A topic list replaces the stored one; with a regex, the list is empty.
            .with_subscribed_topic_regex(if send_subscription {
                self.regex
                    .as_deref()
                    .or(self.regex_to_drop.then_some(""))
                    .map(str_bytes)
            } else {
                None
            })
            .with_server_assignor(if joining {
                self.server_assignor.as_deref().map(str_bytes)
            } else {
                None
            })
            .with_topic_partitions(send_owned.as_ref().map(to_wire));
        self.in_flight = Some(InFlight {
            owned: send_owned,
            subscription: send_subscription.then_some(self.subscription_version),
            membership: self.membership,
        });
        Some(request)
    }

    /// The coordinator's answer. An `Err` is fatal.
    pub fn on_response(
        &mut self,
        response: ConsumerGroupHeartbeatResponse,
        now: Millis,
        _view: &dyn TopicView,
    ) -> Result<(), Error> {
        let sent = self.in_flight.take();
        // Sent before a leave or a loss (a poll may have ended the pause since): stale.
        let stale = sent
            .as_ref()
            .is_some_and(|s| s.membership != self.membership);
        if self.leaving || stale {
            return Ok(());
        }
        let code = ErrorCode(response.error_code);
        match code {
            ErrorCode::NONE => {
                if let Some(id) = response.member_id.filter(|id| !id.is_empty()) {
                    self.member_id = id;
                }
                self.epoch = response.member_epoch;
                self.unverified = false;
                if let Ok(ms) = u64::try_from(response.heartbeat_interval_ms)
                    && ms > 0
                {
                    self.heartbeat_interval_ms = ms;
                }
                self.next_heartbeat = Some(now + self.heartbeat_interval_ms);
                if let Some(sent) = sent {
                    if sent.owned.is_some() {
                        self.owned_sent = sent.owned;
                    }
                    if sent.subscription == Some(self.subscription_version) {
                        self.subscription_sent = true;
                        self.regex_to_drop = false;
                    }
                }
                if let Some(assignment) = response.assignment {
                    self.target = Some(
                        assignment
                            .into_iter()
                            .flat_map(|t| t.partitions.into_iter().map(move |p| (t.topic_id, p)))
                            .collect(),
                    );
                }
                Ok(())
            }
            ErrorCode::FENCED_MEMBER_EPOCH | ErrorCode::UNKNOWN_MEMBER_ID => {
                self.lose_everything();
                Ok(())
            }
            ErrorCode::NOT_COORDINATOR
            | ErrorCode::COORDINATOR_NOT_AVAILABLE
            | ErrorCode::COORDINATOR_LOAD_IN_PROGRESS => {
                self.next_heartbeat = Some(now + COORDINATOR_RETRY_MS);
                Ok(())
            }
            _ => Err(Error::Broker {
                code,
                message: response.error_message,
            }),
        }
    }

    /// Fenced or expired: every partition is lost, and the member rejoins with epoch 0.
    fn lose_everything(&mut self) {
        self.membership += 1;
        let lost: Vec<_> = self.owned.keys().cloned().collect();
        self.owned.clear();
        self.owned_ids.clear();
        self.revoking.clear();
        self.target = None;
        self.epoch = 0;
        self.owned_sent = None;
        self.subscription_sent = false;
        self.next_heartbeat = None;
        self.unverified = false;
        // Events not yet handed over about partitions now lost are moot, but a `Lost` still
        // queued from an earlier loss must reach the user (a refused commit right after a
        // fenced heartbeat would otherwise swallow it, and the next event would be the
        // rejoin's `Assigned`).
        self.events
            .retain(|e| matches!(e, MembershipEvent::Lost(_)));
        if !lost.is_empty() {
            self.events.push_back(MembershipEvent::Lost(lost));
        }
    }

    /// The request in flight got no answer.
    pub fn on_request_failed(&mut self, now: Millis, backoff_ms: Millis) {
        self.in_flight = None;
        // The lost answer may have carried an assignment the coordinator will not repeat
        // unless this member lists what it owns again: the next heartbeat is a full one
        // (the Java consumer resets its sent-fields state after a failed heartbeat the same
        // way). Found by the simulation's copy loop: a lost answer granting a partition at an
        // unchanged epoch left the partition unowned for good (seed 48).
        self.owned_sent = None;
        self.next_heartbeat = Some(now.saturating_add(backoff_ms));
    }

    /// The next event: a queued one, or the next step of reconciliation (revocations first).
    pub fn next_event(&mut self, view: &dyn TopicView) -> Option<MembershipEvent> {
        if let Some(event) = self.events.pop_front() {
            return Some(event);
        }
        let target = self.target.as_ref()?;
        if !self.revoking.is_empty() {
            // Wait for the user's next poll to finish the revocation.
            return None;
        }
        if *target == self.owned_ids {
            // Reconciled (the state at almost every poll): nothing to revoke or take.
            return None;
        }
        let revoke: Vec<TopicPartition> = self
            .owned
            .iter()
            .filter(|(tp, id)| !target.contains(&(**id, tp.partition)))
            .map(|(tp, _)| tp.clone())
            .collect();
        if !revoke.is_empty() {
            self.revoking = revoke.iter().cloned().collect();
            return Some(MembershipEvent::Revoked(revoke));
        }
        if self.in_flight.as_ref().is_some_and(|f| f.owned.is_some()) {
            // The heartbeat in flight lists what this member owns without the partitions it
            // would take now, and the coordinator reads that list as their revocation
            // (`ownsRevokedPartitions`): an answer moving them to another member would find
            // them already taken here, and offsets committed for them under the answer's
            // epoch would be accepted (Kafka 4.1 checks only the epoch). They are taken once
            // the answer says they are still this member's. Found by the copy-loop
            // simulation with membership in the background.
            return None;
        }
        let mut added = Vec::new();
        for (id, partition) in target {
            if self.owned_ids.contains(&(*id, *partition)) {
                continue;
            }
            // A topic id the metadata does not know yet is taken on a later call.
            if let Some(name) = view.topic_name(id) {
                let tp = TopicPartition::new(name, *partition);
                self.owned.insert(tp.clone(), *id);
                self.owned_ids.insert((*id, *partition));
                added.push(tp);
            }
        }
        (!added.is_empty()).then_some(MembershipEvent::Assigned(added))
    }

    /// Topic ids of the target assignment the view cannot name (metadata to refresh).
    pub fn unknown_topic_ids(&self, view: &dyn TopicView) -> bool {
        self.target
            .as_ref()
            .is_some_and(|t| t.iter().any(|(id, _)| view.topic_name(id).is_none()))
    }

    /// The partitions owned (including those being revoked).
    pub fn owned(&self) -> Vec<TopicPartition> {
        self.owned.keys().cloned().collect()
    }

    /// The owned partitions, in order (being revoked or not).
    pub fn owned_in_order(&self) -> impl Iterator<Item = &TopicPartition> {
        self.owned.keys()
    }

    /// The partitions owned and not being revoked (none while a refused commit left it
    /// unknown whether they are still owned).
    pub fn fetchable(&self) -> Vec<TopicPartition> {
        if self.unverified {
            return Vec::new();
        }
        if self.revoking.is_empty() {
            return self.owned.keys().cloned().collect();
        }
        self.owned
            .keys()
            .filter(|tp| !self.revoking.contains(*tp))
            .cloned()
            .collect()
    }

    /// KIP-447 metadata: the generation is the member epoch.
    pub fn group_metadata(&self) -> ConsumerGroupMetadata {
        ConsumerGroupMetadata::new(
            self.group_id.clone(),
            self.epoch,
            self.member_id.clone(),
            self.instance_id.clone(),
        )
    }

    /// When the next heartbeat is due.
    pub fn next_deadline(&self) -> Option<Millis> {
        if self.in_flight.is_some() {
            return None;
        }
        self.next_heartbeat
    }

    /// The heartbeat that leaves the group (epoch -1; -2 for a static member).
    pub fn leave(&mut self) -> Option<ConsumerGroupHeartbeatRequest> {
        if self.epoch <= 0 || self.leaving {
            return None;
        }
        self.leaving = true;
        self.membership += 1;
        Some(
            ConsumerGroupHeartbeatRequest::default()
                .with_group_id(group_id(&self.group_id))
                .with_member_id(str_bytes(&self.member_id))
                .with_member_epoch(if self.instance_id.is_some() {
                    STATIC_LEAVE_EPOCH
                } else {
                    LEAVE_EPOCH
                })
                .with_instance_id(self.instance_id.as_deref().map(str_bytes)),
        )
    }
}

fn to_wire(set: &OwnedSet) -> Vec<TopicPartitions> {
    let mut out: Vec<TopicPartitions> = Vec::new();
    for (id, partition) in set {
        let id = topic_id(id);
        match out.last_mut() {
            Some(last) if last.topic_id == id => last.partitions.push(*partition),
            _ => out.push(
                TopicPartitions::default()
                    .with_topic_id(id)
                    .with_partitions(vec![*partition]),
            ),
        }
    }
    out
}

#[cfg(test)]
mod tests;
