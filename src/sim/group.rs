//! The model KIP-848 group coordinator, for one consumer group subscribed to one topic: it
//! answers ConsumerGroupHeartbeat and validates the member of a TxnOffsetCommit.
//!
//! As Kafka's new group coordinator (`GroupMetadataManager.consumerGroupHeartbeat`, Kafka 4.1):
//! a member joins with epoch 0 and its own member id (KIP-1082); every change of membership
//! bumps the group epoch and computes a new target assignment (here: the topic's partitions
//! round robin over the members sorted by id); a member moves to the group epoch only once it
//! has given up (no longer lists in its heartbeat) every partition it must revoke, and it gets
//! a partition only once no other member still holds it (`CurrentAssignmentBuilder`:
//! UNREVOKED_PARTITIONS / UNRELEASED_PARTITIONS). A heartbeat with an epoch newer than the
//! member's, or older unless it is the previous epoch with an owned set inside the assignment
//! (the answer that bumped it may have been lost), is FENCED_MEMBER_EPOCH
//! (`throwIfConsumerGroupMemberEpochIsInvalid`); an unknown member is UNKNOWN_MEMBER_ID; a
//! member silent for the session timeout is removed and its partitions freed. The answer
//! carries the assignment when the member joined, sent its owned set, or its assignment
//! changed, as Kafka does.
//!
//! TxnOffsetCommit (`ConsumerGroup.validateOffsetCommit`, transactional): the member must exist
//! (UNKNOWN_MEMBER_ID) and the generation must equal its current epoch; a stale epoch is
//! STALE_MEMBER_EPOCH inside the coordinator, which `OffsetMetadataManager` turns into
//! ILLEGAL_GENERATION for TxnOffsetCommit (whose clients know no STALE_MEMBER_EPOCH; see the
//! member side in `consumer::membership::kip848`).

use std::collections::{BTreeMap, BTreeSet};

use crate::protocol::error_code::ErrorCode;
use crate::protocol::messages::consumer_group_heartbeat::{
    ConsumerGroupHeartbeatResponse, HeartbeatTopicPartitions,
};
use crate::types::Millis;
use kafka_protocol::messages::ConsumerGroupHeartbeatRequest;

/// The member epoch that leaves the group.
const LEAVE_EPOCH: i32 = -1;

/// One member as the coordinator sees it.
#[derive(Debug, Clone)]
struct Member {
    epoch: i32,
    previous_epoch: i32,
    /// Partitions the member may own: what it was given, including those it must revoke and
    /// has not given up yet.
    assigned: BTreeSet<i32>,
    /// What its last heartbeat's reconciliation left it to use (Kafka's `assignedPartitions`,
    /// which change only while the member's own heartbeat is processed).
    reconciled: BTreeSet<i32>,
    last_heartbeat: Millis,
}

/// The model group coordinator.
#[derive(Debug, Clone)]
pub struct GroupCoordinator {
    topic_id: [u8; 16],
    partitions: i32,
    session_timeout_ms: Millis,
    heartbeat_interval_ms: i32,
    group_epoch: i32,
    /// By member id (sorted: the assignment and every iteration are deterministic).
    members: BTreeMap<String, Member>,
    /// The target assignment of the group epoch.
    target: BTreeMap<String, BTreeSet<i32>>,
    /// Members removed because their session expired (for the report).
    pub expired: u64,
    /// Heartbeats answered FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID.
    pub fenced: u64,
}

impl GroupCoordinator {
    /// A group over a topic (`topic_id`) of `partitions` partitions.
    pub fn new(
        topic_id: [u8; 16],
        partitions: i32,
        session_timeout_ms: Millis,
        heartbeat_interval_ms: i32,
    ) -> Self {
        Self {
            topic_id,
            partitions,
            session_timeout_ms,
            heartbeat_interval_ms,
            group_epoch: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            expired: 0,
            fenced: 0,
        }
    }

    /// Whether `member_id` is a member now and, per the coordinator, may own `partition`
    /// (given and not yet given up).
    pub fn owns(&self, member_id: &str, partition: i32) -> bool {
        self.members
            .get(member_id)
            .is_some_and(|m| m.assigned.contains(&partition))
    }

    /// Removes the members whose session expired by `now`; returns their ids.
    pub fn expire(&mut self, now: Millis) -> Vec<String> {
        let gone: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| now > m.last_heartbeat + self.session_timeout_ms)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &gone {
            self.members.remove(id);
            self.expired += 1;
        }
        if !gone.is_empty() {
            self.bump_group_epoch();
        }
        gone
    }

    /// TxnOffsetCommit from a group member: the error Kafka answers, NONE if it may commit.
    pub fn validate_txn_offset_commit(&self, member_id: &str, generation_id: i32) -> ErrorCode {
        match self.members.get(member_id) {
            None => ErrorCode::UNKNOWN_MEMBER_ID,
            Some(m) if m.epoch != generation_id => ErrorCode::ILLEGAL_GENERATION,
            Some(_) => ErrorCode::NONE,
        }
    }

    /// A ConsumerGroupHeartbeat at `now`.
    pub fn heartbeat(
        &mut self,
        request: &ConsumerGroupHeartbeatRequest,
        now: Millis,
    ) -> ConsumerGroupHeartbeatResponse {
        self.expire(now);
        let owned: Option<BTreeSet<i32>> = request.topic_partitions.as_ref().map(|topics| {
            topics
                .iter()
                .filter(|t| t.topic_id.as_bytes() == &self.topic_id)
                .flat_map(|t| t.partitions.iter().copied())
                .collect()
        });
        let id = request.member_id.to_string();
        if request.member_epoch == LEAVE_EPOCH {
            if self.members.remove(&id).is_some() {
                self.bump_group_epoch();
            }
            return self.answer(ErrorCode::NONE, &id, LEAVE_EPOCH, None);
        }
        if request.member_epoch == 0 {
            // A join (or a rejoin after being fenced, with the same id: KIP-1082).
            if self.members.remove(&id).is_some() {
                self.bump_group_epoch();
            }
            self.members.insert(
                id.clone(),
                Member {
                    epoch: 0,
                    previous_epoch: 0,
                    assigned: BTreeSet::new(),
                    reconciled: BTreeSet::new(),
                    last_heartbeat: now,
                },
            );
            self.bump_group_epoch();
        }
        let Some(member) = self.members.get_mut(&id) else {
            self.fenced += 1;
            return self.answer(
                ErrorCode::UNKNOWN_MEMBER_ID,
                &id,
                request.member_epoch,
                None,
            );
        };
        let received = request.member_epoch;
        if received != 0 && received != member.epoch {
            let lost_answer = received == member.previous_epoch
                && owned
                    .as_ref()
                    .is_some_and(|o| o.is_subset(&member.assigned));
            if received > member.epoch || !lost_answer {
                self.fenced += 1;
                return self.answer(ErrorCode::FENCED_MEMBER_EPOCH, &id, received, None);
            }
        }
        member.last_heartbeat = now;
        let before = member.reconciled.clone();
        let epoch = self.reconcile(&id, owned.as_ref());
        let told = self.told(&id);
        if let Some(member) = self.members.get_mut(&id) {
            member.reconciled = told.clone();
        }
        // As `consumerGroupHeartbeat`: the assignment goes out on a join, when the member sent
        // its owned partitions, or when this heartbeat changed what it may use.
        let send = request.member_epoch == 0 || owned.is_some() || told != before;
        self.answer(ErrorCode::NONE, &id, epoch, send.then_some(told))
    }

    /// Moves `id` towards the target: first the partitions to revoke leave its assignment
    /// (once it reported them gone: `owned`, the set this heartbeat carries, lists none of
    /// them), then it takes the target partitions nobody else holds and its epoch becomes the
    /// group epoch. Returns its epoch.
    ///
    /// A heartbeat without an owned set acknowledges no revocation, whatever the member
    /// reported before (Kafka's `CurrentAssignmentBuilder.ownsRevokedPartitions` is true for a
    /// null `ownedTopicPartitions`): the member may have taken partitions since, and may be
    /// copying from them. Found by the copy-loop simulation once membership ran in the
    /// background: a heartbeat sent before the member took newly assigned partitions came back
    /// after, and the model freed those partitions for another member while their first owner
    /// still committed offsets for them.
    fn reconcile(&mut self, id: &str, owned: Option<&BTreeSet<i32>>) -> i32 {
        let target = self.target.get(id).cloned().unwrap_or_default();
        let held_by_others: BTreeSet<i32> = self
            .members
            .iter()
            .filter(|(other, _)| other.as_str() != id)
            .flat_map(|(_, m)| m.assigned.iter().copied())
            .collect();
        let group_epoch = self.group_epoch;
        let Some(member) = self.members.get_mut(id) else {
            return -1;
        };
        let revoke: BTreeSet<i32> = member.assigned.difference(&target).copied().collect();
        if !revoke.is_empty() {
            if owned.is_some_and(|owned| revoke.is_disjoint(owned)) {
                // Acknowledged: the member no longer lists them.
                member.assigned.retain(|p| target.contains(p));
            } else {
                // UNREVOKED_PARTITIONS: the member keeps its epoch and is told to give them up
                // by an assignment without them (the model marks them as still held).
                return member.epoch;
            }
        }
        for p in &target {
            if !held_by_others.contains(p) {
                member.assigned.insert(*p);
            }
        }
        if member.epoch != group_epoch {
            member.previous_epoch = member.epoch;
            member.epoch = group_epoch;
        }
        member.epoch
    }

    /// What the member is told it may use: its assignment without what it must revoke.
    fn told(&self, id: &str) -> BTreeSet<i32> {
        let (Some(member), Some(target)) = (self.members.get(id), self.target.get(id)) else {
            return BTreeSet::new();
        };
        member.assigned.intersection(target).copied().collect()
    }

    fn bump_group_epoch(&mut self) {
        self.group_epoch += 1;
        let ids: Vec<&String> = self.members.keys().collect();
        let mut target: BTreeMap<String, BTreeSet<i32>> = ids
            .iter()
            .map(|id| ((*id).clone(), BTreeSet::new()))
            .collect();
        if !ids.is_empty() {
            for p in 0..self.partitions {
                let index = usize::try_from(p).unwrap_or(0) % ids.len();
                if let Some(set) = ids.get(index).and_then(|id| target.get_mut(*id)) {
                    set.insert(p);
                }
            }
        }
        self.target = target;
    }

    fn answer(
        &self,
        code: ErrorCode,
        id: &str,
        epoch: i32,
        assignment: Option<BTreeSet<i32>>,
    ) -> ConsumerGroupHeartbeatResponse {
        ConsumerGroupHeartbeatResponse {
            throttle_time_ms: 0,
            error_code: code.0,
            error_message: None,
            member_id: Some(id.to_string()),
            member_epoch: epoch,
            heartbeat_interval_ms: self.heartbeat_interval_ms,
            assignment: assignment.map(|a| {
                vec![HeartbeatTopicPartitions {
                    topic_id: self.topic_id,
                    partitions: a.into_iter().collect(),
                }]
            }),
        }
    }
}
