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
            self.owned.remove(&partition);
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

    fn owned_set(&self) -> OwnedSet {
        self.owned
            .iter()
            .map(|(tp, id)| (*id, tp.partition))
            .collect()
    }

    /// The heartbeat to send now, if one is due.
    pub fn poll_request(&mut self, now: Millis) -> Option<ConsumerGroupHeartbeatRequest> {
        if self.in_flight.is_some() || self.leaving || self.paused_until_poll {
            return None;
        }
        if self.subscription.is_empty() && self.regex.is_none() && self.epoch == 0 {
            return None;
        }
        let owned = self.owned_set();
        let owned_changed = self.owned_sent.as_ref() != Some(&owned);
        let due = self.next_heartbeat.is_none_or(|at| at <= now)
            || self.epoch == 0
            || owned_changed
            || !self.subscription_sent;
        if !due {
            return None;
        }
        let joining = self.epoch == 0;
        let send_owned = (joining || owned_changed).then_some(owned);
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
        let owned = self.owned_set();
        let mut added = Vec::new();
        for (id, partition) in target {
            if owned.contains(&(*id, *partition)) {
                continue;
            }
            // A topic id the metadata does not know yet is taken on a later call.
            if let Some(name) = view.topic_name(id) {
                let tp = TopicPartition::new(name, *partition);
                self.owned.insert(tp.clone(), *id);
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

    /// The partitions owned and not being revoked (none while a refused commit left it
    /// unknown whether they are still owned).
    pub fn fetchable(&self) -> Vec<TopicPartition> {
        if self.unverified {
            return Vec::new();
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
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::protocol::generated::lowest_version;
    use crate::protocol::messages::consumer_group_heartbeat::HeartbeatTopicPartitions;

    struct View;
    impl TopicView for View {
        fn partition_count(&self, _topic: &str) -> Option<i32> {
            Some(6)
        }
        fn topic_name(&self, topic_id: &[u8; 16]) -> Option<Arc<str>> {
            (topic_id[0] == 1).then(|| Arc::from("t"))
        }
    }

    const T: TopicId = [1; 16];

    /// A member is built from its `ConsumerMemberConfig` alone, and its first heartbeat (the
    /// join) carries it: group, member id, instance id, rebalance timeout, server assignor.
    #[test]
    fn a_member_is_built_from_its_config_alone() {
        let mut m = ConsumerMember::new(ConsumerMemberConfig {
            group_id: "payments".into(),
            member_id: "m-7".into(),
            instance_id: Some("host-1".into()),
            rebalance_timeout_ms: 120_000,
            server_assignor: Some("range".into()),
        });
        m.subscribe(vec!["t".into()]);
        let join = m.poll_request(0).unwrap();
        assert_eq!(&*join.group_id, "payments");
        assert_eq!(&*join.member_id, "m-7");
        assert_eq!(join.instance_id.as_deref(), Some("host-1"));
        assert_eq!(join.rebalance_timeout_ms, 120_000);
        assert_eq!(join.server_assignor.as_deref(), Some("range"));
    }

    fn member() -> ConsumerMember {
        let mut m = ConsumerMember::new(ConsumerMemberConfig {
            group_id: "g".into(),
            member_id: "m-1".into(),
            instance_id: None,
            rebalance_timeout_ms: 30_000,
            server_assignor: None,
        });
        m.subscribe(vec!["t".into()]);
        m
    }

    fn answer(epoch: i32, assignment: Option<Vec<i32>>) -> ConsumerGroupHeartbeatResponse {
        ConsumerGroupHeartbeatResponse {
            member_id: Some("m-1".into()),
            member_epoch: epoch,
            heartbeat_interval_ms: 500,
            assignment: assignment.map(|p| {
                vec![HeartbeatTopicPartitions {
                    topic_id: T,
                    partitions: p,
                }]
            }),
            ..Default::default()
        }
    }

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    fn wire_owned(r: &ConsumerGroupHeartbeatRequest) -> Option<Vec<i32>> {
        r.topic_partitions
            .as_ref()
            .map(|t| t.iter().flat_map(|e| e.partitions.clone()).collect())
    }

    #[test]
    fn join_assign_and_acknowledge() {
        let now: Millis = 0;
        let mut m = member();
        let join = m.poll_request(now).unwrap();
        assert_eq!(
            lowest_version(&join),
            0,
            "no field of v1 (KIP-1082's regex)"
        );
        assert_eq!(join.member_epoch, 0);
        assert_eq!(join.subscribed_topic_names, Some(vec![topic_name("t")]));
        assert_eq!(join.rebalance_timeout_ms, 30_000);
        assert_eq!(wire_owned(&join), Some(vec![]));
        assert!(m.poll_request(now).is_none(), "one request in flight");
        m.on_response(answer(1, Some(vec![0, 1])), now, &View)
            .unwrap();
        assert_eq!(m.epoch(), 1);
        assert_eq!(
            m.next_event(&View),
            Some(MembershipEvent::Assigned(vec![tp(0), tp(1)]))
        );
        assert_eq!(m.next_event(&View), None);
        assert_eq!(m.group_metadata().generation_id, 1);
        // The new owned set is acknowledged at once, without the subscription.
        let ack = m.poll_request(now).unwrap();
        assert_eq!(ack.member_epoch, 1);
        assert_eq!(wire_owned(&ack), Some(vec![0, 1]));
        assert_eq!(ack.subscribed_topic_names, None);
        m.on_response(answer(1, None), now, &View).unwrap();
        // Nothing is due until the interval passes; then a heartbeat without changes.
        assert!(m.poll_request(now).is_none());
        let hb = m.poll_request(now + 500).unwrap();
        assert_eq!(wire_owned(&hb), None);
        assert_eq!(hb.subscribed_topic_names, None);
        assert_eq!(lowest_version(&ack), 0);
        assert_eq!(lowest_version(&hb), 0);
        m.on_response(answer(1, None), now + 500, &View).unwrap();
        let leave = m.leave().expect("a member in the group leaves");
        assert_eq!(lowest_version(&leave), 0);
    }

    /// A heartbeat that lists the owned partitions is in flight when the member could take
    /// newly assigned ones: it waits for the answer, which may have given them to another
    /// member already (the coordinator read the list as their revocation).
    #[test]
    fn nothing_is_taken_while_a_heartbeat_listing_the_owned_partitions_is_in_flight() {
        let now: Millis = 0;
        let mut m = member();
        m.poll_request(now).unwrap();
        m.on_response(answer(1, Some(vec![0])), now, &View).unwrap();
        assert_eq!(
            m.next_event(&View),
            Some(MembershipEvent::Assigned(vec![tp(0)]))
        );
        m.poll_request(now).unwrap();
        m.on_response(answer(2, Some(vec![0, 1, 2])), now, &View)
            .unwrap();
        // A full heartbeat (after a failed one) goes out before the user polls again.
        m.on_request_failed(now, 0);
        let full = m.poll_request(now).unwrap();
        assert_eq!(wire_owned(&full), Some(vec![0]));
        assert_eq!(m.next_event(&View), None, "partitions 1 and 2 wait");
        // The answer moved partition 2 to another member: only 1 is taken.
        m.on_response(answer(3, Some(vec![0, 1])), now, &View)
            .unwrap();
        assert_eq!(
            m.next_event(&View),
            Some(MembershipEvent::Assigned(vec![tp(1)]))
        );
        assert_eq!(m.owned(), vec![tp(0), tp(1)]);
    }

    #[test]
    #[cfg(feature = "pattern-subscription")]
    fn a_regex_subscription_is_sent_and_dropped_when_topics_replace_it() {
        let now: Millis = 0;
        let mut m = member();
        m.subscribe_regex("t.*".into());
        let join = m.poll_request(now).unwrap();
        assert_eq!(join.subscribed_topic_regex.as_deref(), Some("t.*"));
        assert_eq!(lowest_version(&join), 1, "a regex needs v1: refused at v0");
        assert_eq!(
            join.subscribed_topic_names,
            Some(vec![]),
            "no topic list beside it"
        );
        m.on_response(answer(1, Some(vec![0])), now, &View).unwrap();
        m.next_event(&View);
        let ack = m.poll_request(now).unwrap();
        assert_eq!(ack.subscribed_topic_regex, None, "unchanged: absent");
        m.on_response(answer(1, None), now, &View).unwrap();
        m.subscribe(vec!["t".into()]);
        let change = m.poll_request(now).unwrap();
        assert_eq!(change.subscribed_topic_names, Some(vec![topic_name("t")]));
        assert_eq!(
            change.subscribed_topic_regex.as_deref(),
            Some(""),
            "drops the regex"
        );
        m.on_response(answer(1, None), now, &View).unwrap();
        m.subscribe(vec!["u".into()]);
        let again = m.poll_request(now).unwrap();
        assert_eq!(again.subscribed_topic_regex, None, "dropped already");
        assert_eq!(lowest_version(&again), 0);
    }

    #[test]
    fn revocation_is_acknowledged_only_after_the_next_poll() {
        let now: Millis = 0;
        let mut m = member();
        m.poll_request(now).unwrap();
        m.on_response(answer(1, Some(vec![0, 1, 2])), now, &View)
            .unwrap();
        m.next_event(&View).unwrap();
        m.poll_request(now).unwrap();
        m.on_response(answer(1, None), now, &View).unwrap();
        // The coordinator takes partition 2 (and 1) away.
        let later = now + 500;
        m.poll_request(later).unwrap();
        m.on_response(answer(2, Some(vec![0])), later, &View)
            .unwrap();
        assert_eq!(
            m.next_event(&View),
            Some(MembershipEvent::Revoked(vec![tp(1), tp(2)]))
        );
        // Still owned (offsets may be committed), no longer fetched, coordinator not told.
        assert_eq!(m.owned(), vec![tp(0), tp(1), tp(2)]);
        assert_eq!(m.fetchable(), vec![tp(0)]);
        assert!(m.poll_request(later).is_none());
        assert_eq!(m.next_event(&View), None);
        // The next poll gives them up and the heartbeat reports it at once.
        m.on_poll(later);
        assert_eq!(m.owned(), vec![tp(0)]);
        let ack = m.poll_request(later).unwrap();
        assert_eq!(ack.member_epoch, 2);
        assert_eq!(wire_owned(&ack), Some(vec![0]));
    }

    #[test]
    fn fenced_member_loses_everything_and_rejoins_with_epoch_zero() {
        let now: Millis = 0;
        let mut m = member();
        m.poll_request(now).unwrap();
        m.on_response(answer(4, Some(vec![3])), now, &View).unwrap();
        m.next_event(&View).unwrap();
        m.poll_request(now).unwrap();
        m.on_response(
            ConsumerGroupHeartbeatResponse {
                error_code: ErrorCode::FENCED_MEMBER_EPOCH.0,
                ..Default::default()
            },
            now,
            &View,
        )
        .unwrap();
        assert_eq!(
            m.next_event(&View),
            Some(MembershipEvent::Lost(vec![tp(3)]))
        );
        assert!(m.owned().is_empty());
        let rejoin = m.poll_request(now).unwrap();
        assert_eq!(rejoin.member_epoch, 0);
        assert_eq!(
            rejoin.member_id.as_str(),
            "m-1",
            "the member keeps its id (KIP-1082)"
        );
        assert!(rejoin.subscribed_topic_names.is_some());
    }

    #[test]
    fn unknown_topic_ids_wait_for_metadata_and_fatal_errors_surface() {
        let now: Millis = 0;
        let mut m = member();
        m.poll_request(now).unwrap();
        let mut r = answer(1, None);
        r.assignment = Some(vec![HeartbeatTopicPartitions {
            topic_id: [9; 16],
            partitions: vec![0],
        }]);
        m.on_response(r, now, &View).unwrap();
        assert!(m.unknown_topic_ids(&View));
        assert_eq!(m.next_event(&View), None);

        m.poll_request(now + 1_000).unwrap();
        let err = m
            .on_response(
                ConsumerGroupHeartbeatResponse {
                    error_code: ErrorCode::GROUP_MAX_SIZE_REACHED.0,
                    ..Default::default()
                },
                now,
                &View,
            )
            .unwrap_err();
        assert!(matches!(
            err,
            Error::Broker {
                code: ErrorCode::GROUP_MAX_SIZE_REACHED,
                ..
            }
        ));
    }

    #[test]
    fn a_failed_request_is_retried_with_the_same_changes() {
        let now: Millis = 0;
        let mut m = member();
        m.poll_request(now).unwrap();
        m.on_request_failed(now, 100);
        assert!(m.poll_request(now).is_some(), "a join is always due");
        m.on_response(answer(1, Some(vec![0])), now, &View).unwrap();
        m.next_event(&View).unwrap();
        let ack = m.poll_request(now).unwrap();
        assert_eq!(wire_owned(&ack), Some(vec![0]));
        m.on_request_failed(now, 100);
        let again = m.poll_request(now).unwrap();
        assert_eq!(wire_owned(&again), Some(vec![0]), "the ack is sent again");
        // Leaving: epoch -1.
        m.on_response(answer(1, None), now, &View).unwrap();
        assert_eq!(m.leave().unwrap().member_epoch, LEAVE_EPOCH);
        assert!(m.leave().is_none());
    }

    /// A member that owns `partitions` at epoch 1, its assignment acknowledged.
    fn member_owning(now: Millis, partitions: Vec<i32>) -> ConsumerMember {
        let mut m = member();
        m.poll_request(now).unwrap();
        m.on_response(answer(1, Some(partitions)), now, &View)
            .unwrap();
        m.next_event(&View).unwrap();
        m.poll_request(now).unwrap();
        m.on_response(answer(1, None), now, &View).unwrap();
        m
    }

    #[test]
    fn a_member_past_its_poll_budget_leaves_and_rejoins_at_the_next_poll() {
        let now: Millis = 0;
        let mut m = member_owning(now, vec![0, 1]);
        let leave = m.leave_until_next_poll().expect("a leaving heartbeat");
        assert_eq!(leave.member_epoch, LEAVE_EPOCH);
        assert_eq!(
            m.next_event(&View),
            Some(MembershipEvent::Lost(vec![tp(0), tp(1)]))
        );
        let later = now + 10_000;
        assert!(
            m.poll_request(later).is_none(),
            "nothing before the next poll"
        );
        m.on_poll(later);
        let rejoin = m.poll_request(later).unwrap();
        assert_eq!(rejoin.member_epoch, 0);
        assert_eq!(rejoin.member_id.as_str(), "m-1");
    }

    #[test]
    fn a_stale_epoch_commit_holds_delivery_until_a_heartbeat_answers() {
        let now: Millis = 0;
        let mut m = member_owning(now, vec![0]);
        assert!(m.commit_refused(ErrorCode::ILLEGAL_GENERATION, now));
        assert!(
            m.fetchable().is_empty(),
            "nothing delivered while unverified"
        );
        let check = m.poll_request(now).expect("a full heartbeat at once");
        assert_eq!(wire_owned(&check), Some(vec![0]));
        m.on_response(answer(2, None), now, &View).unwrap();
        assert_eq!(m.fetchable(), vec![tp(0)], "still owned: delivery goes on");

        assert!(m.commit_refused(ErrorCode::UNKNOWN_MEMBER_ID, now));
        assert_eq!(
            m.next_event(&View),
            Some(MembershipEvent::Lost(vec![tp(0)]))
        );
        assert!(!m.commit_refused(ErrorCode::OFFSET_METADATA_TOO_LARGE, now));
    }

    #[test]
    fn a_subscription_changed_while_the_heartbeat_carrying_the_old_one_flies_is_sent_again() {
        let now: Millis = 0;
        let mut m = member_owning(now, vec![0]);
        m.subscribe(vec!["t".into(), "u".into()]);
        let carrying = m.poll_request(now).expect("the new subscription goes out");
        assert!(carrying.subscribed_topic_names.is_some());
        m.subscribe(vec!["t".into(), "v".into()]);
        m.on_response(answer(1, None), now, &View).unwrap();
        let again = m
            .poll_request(now)
            .expect("the newer one is not taken as sent");
        assert_eq!(
            again.subscribed_topic_names,
            Some(vec![topic_name("t"), topic_name("v")])
        );
    }

    /// A heartbeat is in flight when the member leaves for exceeding `max.poll.interval.ms`,
    /// and the application polls (ending the pause) before its answer arrives: the answer,
    /// of the membership the member left, restores neither the epoch nor the assignment, and
    /// no `Assigned` follows the `Lost` until the rejoin's own answer.
    #[test]
    fn an_answer_sent_before_a_leave_is_not_applied_after_it() {
        let now: Millis = 0;
        let mut m = member_owning(now, vec![0, 1]);
        let flying = m.poll_request(now + 500).expect("a heartbeat");
        assert_eq!(flying.member_epoch, 1);
        let leave = m.leave_until_next_poll().expect("a leaving heartbeat");
        assert_eq!(leave.member_epoch, LEAVE_EPOCH);
        assert_eq!(
            m.next_event(&View),
            Some(MembershipEvent::Lost(vec![tp(0), tp(1)]))
        );
        m.on_poll(now + 600);
        // The late answer: the epoch it names and the partitions it assigns are gone.
        m.on_response(answer(2, Some(vec![0, 1, 2])), now + 700, &View)
            .unwrap();
        assert_eq!(m.epoch(), 0, "the leave stands");
        assert_eq!(
            m.next_event(&View),
            None,
            "no Assigned from the old membership"
        );
        assert!(m.owned().is_empty() && m.fetchable().is_empty());
        assert_eq!(m.group_metadata().generation_id, 0);
        // The rejoin goes out at once, and its answer is applied.
        let rejoin = m.poll_request(now + 700).expect("the rejoin");
        assert_eq!(rejoin.member_epoch, 0);
        assert!(rejoin.subscribed_topic_names.is_some());
        m.on_response(answer(4, Some(vec![2])), now + 800, &View)
            .unwrap();
        assert_eq!(m.epoch(), 4);
        assert_eq!(
            m.next_event(&View),
            Some(MembershipEvent::Assigned(vec![tp(2)]))
        );
    }

    /// The same guard when the membership ended by a refused commit (the coordinator said the
    /// member is unknown): a heartbeat answer from before does not undo the `Lost`.
    #[test]
    fn an_answer_sent_before_a_loss_is_not_applied_after_it() {
        let now: Millis = 0;
        let mut m = member_owning(now, vec![0]);
        m.poll_request(now + 500).expect("a heartbeat");
        assert!(m.commit_refused(ErrorCode::UNKNOWN_MEMBER_ID, now + 550));
        assert_eq!(
            m.next_event(&View),
            Some(MembershipEvent::Lost(vec![tp(0)]))
        );
        m.on_response(answer(1, Some(vec![0])), now + 600, &View)
            .unwrap();
        assert_eq!(m.epoch(), 0);
        assert_eq!(m.next_event(&View), None);
        assert_eq!(m.poll_request(now + 600).expect("rejoin").member_epoch, 0);
    }

    /// A request that failed after the leave frees the way for the rejoin as well; and an
    /// answer to a heartbeat of the current membership is applied as ever.
    #[test]
    fn a_failed_request_of_the_old_membership_does_not_block_the_rejoin() {
        let now: Millis = 0;
        let mut m = member_owning(now, vec![0]);
        m.poll_request(now + 500).expect("a heartbeat");
        m.leave_until_next_poll();
        assert_eq!(
            m.next_event(&View),
            Some(MembershipEvent::Lost(vec![tp(0)]))
        );
        m.on_poll(now + 600);
        assert!(m.poll_request(now + 600).is_none(), "one request at a time");
        m.on_request_failed(now + 700, 100);
        let rejoin = m.poll_request(now + 800).expect("the rejoin");
        assert_eq!(rejoin.member_epoch, 0);
        m.on_response(answer(3, Some(vec![0])), now + 900, &View)
            .unwrap();
        assert_eq!(m.epoch(), 3);
        assert_eq!(
            m.next_event(&View),
            Some(MembershipEvent::Assigned(vec![tp(0)]))
        );
    }
}
