//! The classic group protocol, member side, with the eager rebalance protocol: JoinGroup, the
//! leader assigns with [`crate::consumer::assignor`] (`range`), SyncGroup hands each member its
//! partitions, Heartbeat keeps the member alive and learns of the next rebalance
//! (REBALANCE_IN_PROGRESS), LeaveGroup leaves.
//!
//! Eager: when a rebalance starts the member revokes everything it owns. The user gets
//! `Revoked` first; the member rejoins (which is what lets the coordinator move the
//! partitions) only at the user's next `poll`. Cooperative-sticky (KIP-429) would keep the
//! partitions that do not move; it is not implemented.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{MembershipEvent, MembershipRequest, MembershipResponse, TopicView};
use crate::consumer::assignor::{self, CONSUMER_PROTOCOL_TYPE, RANGE};
use crate::engine::TopicPartition;
use crate::engine::transaction::ConsumerGroupMetadata;
use crate::error::Error;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::messages::heartbeat::HeartbeatRequest;
use crate::protocol::messages::join_group::{JoinGroupProtocol, JoinGroupRequest};
use crate::protocol::messages::leave_group::{LeaveGroupRequest, LeavingMember};
use crate::protocol::messages::sync_group::{SyncGroupAssignment, SyncGroupRequest};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// Not in the group; the next request joins (after `retry_at`).
    Unjoined,
    /// JoinGroup in flight.
    Joining,
    /// Joined; SyncGroup to send. The leader carries the members' subscriptions.
    Syncing {
        leader_members: Option<BTreeMap<String, Vec<String>>>,
    },
    /// SyncGroup in flight.
    SyncSent,
    /// Owns its assignment; heartbeats.
    Stable,
    /// A rebalance began: `Revoked` was handed over; rejoin at the next `on_poll`.
    Revoking,
}

/// One member of a classic consumer group.
#[derive(Debug)]
pub struct ClassicMember {
    group_id: String,
    member_id: String,
    instance_id: Option<String>,
    session_timeout_ms: i32,
    rebalance_timeout_ms: i32,
    heartbeat_interval: Duration,
    subscription: Vec<String>,
    generation: i32,
    phase: Phase,
    owned: BTreeSet<TopicPartition>,
    events: VecDeque<MembershipEvent>,
    in_flight: bool,
    next_at: Option<Instant>,
    leaving: bool,
}

impl ClassicMember {
    /// A member that has not joined yet.
    pub fn new(
        group_id: String,
        instance_id: Option<String>,
        session_timeout_ms: i32,
        rebalance_timeout_ms: i32,
        heartbeat_interval: Duration,
    ) -> Self {
        Self {
            group_id,
            member_id: String::new(),
            instance_id,
            session_timeout_ms,
            rebalance_timeout_ms,
            heartbeat_interval,
            subscription: Vec::new(),
            generation: -1,
            phase: Phase::Unjoined,
            owned: BTreeSet::new(),
            events: VecDeque::new(),
            in_flight: false,
            next_at: None,
            leaving: false,
        }
    }

    /// Replaces the subscription; a member in the group rejoins to have it count.
    pub fn subscribe(&mut self, mut topics: Vec<String>) {
        topics.sort();
        topics.dedup();
        if topics == self.subscription {
            return;
        }
        self.subscription = topics;
        if self.phase == Phase::Stable {
            self.start_revoking();
        }
    }

    fn start_revoking(&mut self) {
        if self.owned.is_empty() {
            self.phase = Phase::Unjoined;
        } else {
            self.events.push_back(MembershipEvent::Revoked(
                self.owned.iter().cloned().collect(),
            ));
            self.phase = Phase::Revoking;
        }
    }

    /// The user called `poll`: a pending revocation is complete; rejoin.
    pub fn on_poll(&mut self, _now: Instant) {
        if self.phase == Phase::Revoking && self.events.is_empty() {
            self.owned.clear();
            self.phase = Phase::Unjoined;
            self.next_at = None;
        }
    }

    /// Topics the leader needs partition counts of (every member's subscription).
    pub fn wanted_topics(&self) -> Vec<String> {
        match &self.phase {
            Phase::Syncing {
                leader_members: Some(members),
            } => {
                let set: BTreeSet<&String> = members.values().flatten().collect();
                set.into_iter().cloned().collect()
            }
            _ => Vec::new(),
        }
    }

    /// The request to send now, if one is due.
    pub fn poll_request(
        &mut self,
        now: Instant,
        view: &dyn TopicView,
    ) -> Option<MembershipRequest> {
        if self.in_flight || self.leaving || self.next_at.is_some_and(|at| at > now) {
            return None;
        }
        let request = match &self.phase {
            Phase::Unjoined if !self.subscription.is_empty() => {
                self.phase = Phase::Joining;
                MembershipRequest::Join(JoinGroupRequest {
                    group_id: self.group_id.clone(),
                    session_timeout_ms: self.session_timeout_ms,
                    rebalance_timeout_ms: self.rebalance_timeout_ms,
                    member_id: self.member_id.clone(),
                    group_instance_id: self.instance_id.clone(),
                    protocol_type: CONSUMER_PROTOCOL_TYPE.to_owned(),
                    protocols: vec![JoinGroupProtocol {
                        name: RANGE.to_owned(),
                        metadata: assignor::encode_subscription(&self.subscription),
                    }],
                    reason: None,
                })
            }
            Phase::Syncing { leader_members } => {
                // The leader assigns only once it knows every subscribed topic's partition
                // count (the driver fetches the metadata of `wanted_topics`); a topic left out
                // would stay unassigned until the next rebalance.
                if let Some(members) = leader_members
                    && members
                        .values()
                        .flatten()
                        .any(|t| view.partition_count(t).is_none())
                {
                    return None;
                }
                let assignments = match leader_members {
                    Some(members) => assignor::assign_range(members, |t| view.partition_count(t))
                        .into_iter()
                        .map(|(member_id, parts)| SyncGroupAssignment {
                            member_id,
                            assignment: assignor::encode_assignment(&parts),
                        })
                        .collect(),
                    None => Vec::new(),
                };
                self.phase = Phase::SyncSent;
                MembershipRequest::Sync(SyncGroupRequest {
                    group_id: self.group_id.clone(),
                    generation_id: self.generation,
                    member_id: self.member_id.clone(),
                    group_instance_id: self.instance_id.clone(),
                    protocol_type: Some(CONSUMER_PROTOCOL_TYPE.to_owned()),
                    protocol_name: Some(RANGE.to_owned()),
                    assignments,
                })
            }
            Phase::Stable if self.next_at.is_none_or(|at| at <= now) => {
                MembershipRequest::Heartbeat(HeartbeatRequest {
                    group_id: self.group_id.clone(),
                    generation_id: self.generation,
                    member_id: self.member_id.clone(),
                    group_instance_id: self.instance_id.clone(),
                })
            }
            _ => return None,
        };
        self.in_flight = true;
        Some(request)
    }

    fn retry(&mut self, now: Instant, phase: Phase) {
        self.phase = phase;
        self.next_at = Some(now + Duration::from_millis(100));
    }

    /// Fenced: what was owned is lost; rejoin.
    fn lose_everything(&mut self, forget_member_id: bool) {
        if forget_member_id {
            self.member_id.clear();
        }
        self.generation = -1;
        self.events.clear();
        if !self.owned.is_empty() {
            let lost = std::mem::take(&mut self.owned).into_iter().collect();
            self.events.push_back(MembershipEvent::Lost(lost));
        }
        self.phase = Phase::Unjoined;
        self.next_at = None;
    }

    /// The coordinator's answer. An `Err` is fatal.
    pub fn on_response(&mut self, response: MembershipResponse, now: Instant) -> Result<(), Error> {
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
                                let topics =
                                    assignor::decode_subscription(&m.metadata).unwrap_or_default();
                                (m.member_id.clone(), topics)
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
                    let assigned = assignor::decode_assignment(&r.assignment)?;
                    let mut added = Vec::new();
                    for (topic, partitions) in assigned {
                        let topic: Arc<str> = Arc::from(topic);
                        for p in partitions {
                            let tp = TopicPartition::new(Arc::clone(&topic), p);
                            if self.owned.insert(tp.clone()) {
                                added.push(tp);
                            }
                        }
                    }
                    if !added.is_empty() {
                        self.events.push_back(MembershipEvent::Assigned(added));
                    }
                    self.phase = Phase::Stable;
                    self.next_at = Some(now + self.heartbeat_interval);
                }
                ErrorCode::UNKNOWN_MEMBER_ID => self.lose_everything(true),
                ErrorCode::ILLEGAL_GENERATION => self.lose_everything(false),
                code if retriable_in_rebalance(code) => self.retry(now, Phase::Unjoined),
                code => return Err(Error::broker(code)),
            },
            MembershipResponse::Heartbeat(r) => match ErrorCode(r.error_code) {
                ErrorCode::NONE => self.next_at = Some(now + self.heartbeat_interval),
                ErrorCode::REBALANCE_IN_PROGRESS => self.start_revoking(),
                ErrorCode::UNKNOWN_MEMBER_ID => self.lose_everything(true),
                ErrorCode::ILLEGAL_GENERATION => self.lose_everything(false),
                code if retriable_in_rebalance(code) => self.retry(now, Phase::Stable),
                code => return Err(Error::broker(code)),
            },
            MembershipResponse::ConsumerHeartbeat(_) => {}
        }
        Ok(())
    }

    /// The request in flight got no answer: send it again after `backoff` (a join or sync
    /// starts over with a join).
    pub fn on_request_failed(&mut self, now: Instant, backoff: Duration) {
        self.in_flight = false;
        self.next_at = Some(now + backoff);
        if matches!(self.phase, Phase::Joining | Phase::SyncSent) {
            self.phase = Phase::Unjoined;
        }
    }

    /// The next event for the user.
    pub fn next_event(&mut self) -> Option<MembershipEvent> {
        self.events.pop_front()
    }

    /// The partitions owned.
    pub fn owned(&self) -> Vec<TopicPartition> {
        self.owned.iter().cloned().collect()
    }

    /// The partitions to fetch: none while revoking.
    pub fn fetchable(&self) -> Vec<TopicPartition> {
        if self.phase == Phase::Stable {
            self.owned()
        } else {
            Vec::new()
        }
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
    pub fn next_deadline(&self) -> Option<Instant> {
        if self.in_flight { None } else { self.next_at }
    }

    /// LeaveGroup, if the member is in the group (a static member does not leave: KIP-345).
    pub fn leave(&mut self) -> Option<LeaveGroupRequest> {
        if self.member_id.is_empty() || self.leaving || self.instance_id.is_some() {
            return None;
        }
        self.leaving = true;
        Some(LeaveGroupRequest {
            group_id: self.group_id.clone(),
            member_id: self.member_id.clone(),
            members: vec![LeavingMember {
                member_id: self.member_id.clone(),
                group_instance_id: None,
                reason: Some("the consumer is closing".to_owned()),
            }],
        })
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
mod tests {

    use super::*;
    use crate::protocol::messages::heartbeat::HeartbeatResponse;
    use crate::protocol::messages::join_group::{JoinGroupMember, JoinGroupResponse};
    use crate::protocol::messages::sync_group::SyncGroupResponse;

    struct View;
    impl TopicView for View {
        fn partition_count(&self, _topic: &str) -> Option<i32> {
            Some(4)
        }
        fn topic_name(&self, _topic_id: &[u8; 16]) -> Option<Arc<str>> {
            None
        }
    }

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    fn join_response(member: &str, leader: &str, members: &[&str]) -> JoinGroupResponse {
        JoinGroupResponse {
            generation_id: 7,
            member_id: member.into(),
            leader: leader.into(),
            members: members
                .iter()
                .map(|m| JoinGroupMember {
                    member_id: (*m).into(),
                    group_instance_id: None,
                    metadata: assignor::encode_subscription(&["t".to_owned()]),
                })
                .collect(),
            ..Default::default()
        }
    }

    /// A member of group `g` subscribed to `t` (session 6 s, rebalance 30 s, backoff 500 ms).
    fn subscribed_member() -> ClassicMember {
        let mut m = ClassicMember::new("g".into(), None, 6000, 30_000, Duration::from_millis(500));
        m.subscribe(vec!["t".into()]);
        m
    }

    /// A follower (`m2`, led by `m1`) that joined at `now` and was given `partitions` of `t`,
    /// its Assigned event taken.
    fn assigned_follower(now: Instant, partitions: &[i32]) -> ClassicMember {
        let mut m = subscribed_member();
        m.poll_request(now, &View).unwrap();
        m.on_response(
            MembershipResponse::Join(join_response("m2", "m1", &[])),
            now,
        )
        .unwrap();
        m.poll_request(now, &View).unwrap();
        let mut parts = BTreeMap::new();
        parts.insert("t".to_owned(), partitions.to_vec());
        m.on_response(
            MembershipResponse::Sync(SyncGroupResponse {
                assignment: assignor::encode_assignment(&parts),
                ..Default::default()
            }),
            now,
        )
        .unwrap();
        m.next_event().unwrap();
        m
    }

    /// Sends the heartbeat due at `at` and answers it with `error`.
    fn heartbeat_answered(m: &mut ClassicMember, at: Instant, error: ErrorCode) {
        m.poll_request(at, &View).unwrap();
        m.on_response(
            MembershipResponse::Heartbeat(HeartbeatResponse {
                error_code: error.0,
                ..Default::default()
            }),
            at,
        )
        .unwrap();
    }

    #[test]
    fn leader_joins_assigns_and_heartbeats() {
        let now = Instant::now();
        let mut m = subscribed_member();
        let Some(MembershipRequest::Join(join)) = m.poll_request(now, &View) else {
            panic!("a join first");
        };
        assert_eq!(join.member_id, "");
        // KIP-394: the first answer only gives the member id.
        m.on_response(
            MembershipResponse::Join(JoinGroupResponse {
                error_code: ErrorCode::MEMBER_ID_REQUIRED.0,
                member_id: "m1".into(),
                ..Default::default()
            }),
            now,
        )
        .unwrap();
        let Some(MembershipRequest::Join(join)) = m.poll_request(now, &View) else {
            panic!("a second join");
        };
        assert_eq!(join.member_id, "m1");
        m.on_response(
            MembershipResponse::Join(join_response("m1", "m1", &["m1", "m2"])),
            now,
        )
        .unwrap();
        let Some(MembershipRequest::Sync(sync)) = m.poll_request(now, &View) else {
            panic!("a sync");
        };
        assert_eq!(sync.generation_id, 7);
        assert_eq!(sync.assignments.len(), 2);
        let mine = &sync
            .assignments
            .iter()
            .find(|a| a.member_id == "m1")
            .unwrap()
            .assignment;
        m.on_response(
            MembershipResponse::Sync(SyncGroupResponse {
                assignment: mine.clone(),
                ..Default::default()
            }),
            now,
        )
        .unwrap();
        assert_eq!(
            m.next_event(),
            Some(MembershipEvent::Assigned(vec![tp(0), tp(1)]))
        );
        assert_eq!(m.group_metadata().generation_id, 7);
        assert!(
            m.poll_request(now, &View).is_none(),
            "heartbeat not due yet"
        );
        assert!(matches!(
            m.poll_request(now + Duration::from_millis(500), &View),
            Some(MembershipRequest::Heartbeat(_))
        ));
    }

    struct NoMetadata;
    impl TopicView for NoMetadata {
        fn partition_count(&self, _topic: &str) -> Option<i32> {
            None
        }
        fn topic_name(&self, _topic_id: &[u8; 16]) -> Option<Arc<str>> {
            None
        }
    }

    #[test]
    fn the_leader_waits_for_partition_counts_before_assigning() {
        let now = Instant::now();
        let mut m = subscribed_member();
        m.poll_request(now, &View).unwrap();
        m.on_response(
            MembershipResponse::Join(join_response("m1", "m1", &["m1"])),
            now,
        )
        .unwrap();
        assert_eq!(m.wanted_topics(), vec!["t".to_owned()]);
        assert!(m.poll_request(now, &NoMetadata).is_none());
        assert!(matches!(
            m.poll_request(now, &View),
            Some(MembershipRequest::Sync(_))
        ));
    }

    #[test]
    fn rebalance_revokes_everything_and_rejoins_after_the_next_poll() {
        let now = Instant::now();
        let mut m = assigned_follower(now, &[2, 3]);
        let later = now + Duration::from_secs(1);
        heartbeat_answered(&mut m, later, ErrorCode::REBALANCE_IN_PROGRESS);
        assert!(
            m.fetchable().is_empty(),
            "nothing is fetched while revoking"
        );
        assert_eq!(
            m.owned(),
            vec![tp(2), tp(3)],
            "still owned until the next poll"
        );
        m.on_poll(later); // the event is not handed over yet: nothing changes
        assert_eq!(m.owned().len(), 2);
        assert_eq!(
            m.next_event(),
            Some(MembershipEvent::Revoked(vec![tp(2), tp(3)]))
        );
        assert!(
            m.poll_request(later, &View).is_none(),
            "no rejoin before the next poll"
        );
        m.on_poll(later);
        assert!(m.owned().is_empty());
        assert!(matches!(
            m.poll_request(later, &View),
            Some(MembershipRequest::Join(_))
        ));
    }

    #[test]
    fn fenced_member_loses_its_partitions() {
        let now = Instant::now();
        let mut m = assigned_follower(now, &[1]);
        let later = now + Duration::from_secs(1);
        heartbeat_answered(&mut m, later, ErrorCode::UNKNOWN_MEMBER_ID);
        assert_eq!(m.next_event(), Some(MembershipEvent::Lost(vec![tp(1)])));
        let Some(MembershipRequest::Join(join)) = m.poll_request(later, &View) else {
            panic!("rejoin");
        };
        assert_eq!(join.member_id, "", "an unknown member joins afresh");
        assert_eq!(m.group_metadata().generation_id, -1);
    }
}
