//! Group membership, sans-I/O: state machines that take responses and time and give requests
//! and rebalance events, so the simulation can drive them as the tokio side does. Time is
//! [`Millis`], as for the producer engine: the consumer driver's monotonic milliseconds, or
//! the simulation's virtual time, which it passes as it is.
//!
//! - [`kip848`]: the KIP-848 consumer protocol (ConsumerGroupHeartbeat; the coordinator
//!   assigns, the member reconciles incrementally).
//! - [`classic`]: the classic protocol (JoinGroup / SyncGroup / Heartbeat / LeaveGroup) with
//!   the cooperative (KIP-429, [`super::sticky_assignor`]) or eager ([`super::assignor`],
//!   `range`) rebalance protocol.
//! - [`manual`]: no membership: partitions assigned by the application.
//!
//! Both keep the rule the copy loop relies on (M3 of ARCHITECTURE.md): a partition leaves
//! this member only after the user was handed a
//! [`MembershipEvent::Revoked`] for it *and* called `poll` again ([`Membership::on_poll`]);
//! until then it stays owned, its offsets may be committed, and the coordinator is not told.

pub mod classic;
pub mod kip848;
pub mod manual;

use super::records::ConsumerRecord;
use crate::error::Error;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::messages::consumer_group_heartbeat::ConsumerGroupHeartbeatResponse;
use crate::protocol::messages::heartbeat::HeartbeatResponse;
use crate::protocol::messages::join_group::JoinGroupResponse;
use crate::protocol::messages::sync_group::SyncGroupResponse;
use crate::types::ConsumerGroupMetadata;
use crate::types::{Millis, TopicPartition};
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
    SyncGroupRequest,
};

/// A request a membership wants sent to the group coordinator.
#[derive(Debug, Clone)]
pub enum MembershipRequest {
    /// KIP-848.
    ConsumerHeartbeat(ConsumerGroupHeartbeatRequest),
    /// Classic.
    Join(JoinGroupRequest),
    /// Classic.
    Sync(SyncGroupRequest),
    /// Classic.
    Heartbeat(HeartbeatRequest),
    /// Classic.
    Leave(LeaveGroupRequest),
}

/// The answer to a [`MembershipRequest`].
#[derive(Debug, Clone)]
pub enum MembershipResponse {
    /// KIP-848.
    ConsumerHeartbeat(ConsumerGroupHeartbeatResponse),
    /// Classic.
    Join(JoinGroupResponse),
    /// Classic.
    Sync(SyncGroupResponse),
    /// Classic.
    Heartbeat(HeartbeatResponse),
}

/// A change of the partitions this member owns, for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MembershipEvent {
    /// Newly owned partitions.
    Assigned(Vec<TopicPartition>),
    /// Partitions to give up: still owned until the next `on_poll`.
    Revoked(Vec<TopicPartition>),
    /// Partitions already gone (fenced, session expired).
    Lost(Vec<TopicPartition>),
}

/// What `poll` found: a change of the partitions owned, which comes before any record, or
/// records.
pub(crate) enum MembershipOrRecords {
    /// Partitions assigned, revoked or lost.
    Membership(MembershipEvent),
    /// Records of owned partitions.
    Records(Vec<ConsumerRecord>),
}

/// What the membership needs to know about topics: the partition count (classic leader's
/// assignor) and the name of a topic id (KIP-848 assignments name topics by id).
/// Whether every item of `sub` is in `sup`, both in ascending order: one walk of each.
fn is_sorted_subset<'a, 'b>(
    sub: impl Iterator<Item = &'a TopicPartition>,
    sup: impl Iterator<Item = &'b TopicPartition>,
) -> bool {
    let mut sup = sup.peekable();
    sub.into_iter().all(|tp| {
        while sup.next_if(|s| *s < tp).is_some() {}
        sup.next_if(|s| *s == tp).is_some()
    })
}

pub trait TopicView {
    /// The number of partitions of `topic` (0 for a topic the broker says does not exist);
    /// `None` while its metadata has not arrived.
    fn partition_count(&self, topic: &str) -> Option<i32>;
    /// The name of the topic with id `topic_id`, if known.
    fn topic_name(&self, topic_id: &[u8; 16]) -> Option<std::sync::Arc<str>>;
}

/// Either protocol's membership, or none (manual assignment).
#[derive(Debug)]
pub enum Membership {
    /// KIP-848.
    Consumer(kip848::ConsumerMember),
    /// Classic.
    Classic(classic::ClassicMember),
    /// No group membership: partitions assigned by the application. It sends nothing and
    /// produces no event.
    Manual(manual::ManualAssignment),
}

impl Membership {
    /// Whether this is a group membership (not a manual assignment).
    pub fn in_group(&self) -> bool {
        !matches!(self, Membership::Manual(_))
    }

    /// Replaces the subscription; takes effect with the next request. A manual assignment
    /// has no subscription (the consumer replaces it with a group membership first).
    pub fn subscribe(&mut self, topics: Vec<String>) {
        match self {
            Membership::Consumer(m) => m.subscribe(topics),
            Membership::Classic(m) => m.subscribe(topics),
            Membership::Manual(_) => {}
        }
    }

    /// The user called `poll`: partitions revoked at the previous `poll` are now given up.
    pub fn on_poll(&mut self, now: Millis) {
        match self {
            Membership::Consumer(m) => m.on_poll(now),
            Membership::Classic(m) => m.on_poll(now),
            Membership::Manual(_) => {}
        }
    }

    /// The next request to send, if one is due and none is in flight.
    pub fn poll_request(&mut self, now: Millis, view: &dyn TopicView) -> Option<MembershipRequest> {
        match self {
            Membership::Consumer(m) => m
                .poll_request(now)
                .map(MembershipRequest::ConsumerHeartbeat),
            Membership::Classic(m) => m.poll_request(now, view),
            Membership::Manual(_) => None,
        }
    }

    /// The answer to the request in flight. An `Err` is fatal for the consumer.
    pub fn on_response(
        &mut self,
        response: MembershipResponse,
        now: Millis,
        view: &dyn TopicView,
    ) -> Result<(), Error> {
        match (self, response) {
            (Membership::Consumer(m), MembershipResponse::ConsumerHeartbeat(r)) => {
                m.on_response(r, now, view)
            }
            (Membership::Classic(m), r) => m.on_response(r, now),
            (Membership::Consumer(_) | Membership::Manual(_), _) => Ok(()),
        }
    }

    /// The request in flight failed without an answer (network, timeout, coordinator moved).
    pub fn on_request_failed(&mut self, now: Millis, backoff_ms: Millis) {
        match self {
            Membership::Consumer(m) => m.on_request_failed(now, backoff_ms),
            Membership::Classic(m) => m.on_request_failed(now, backoff_ms),
            Membership::Manual(_) => {}
        }
    }

    /// The next rebalance event for the user, if any.
    pub fn next_event(&mut self, view: &dyn TopicView) -> Option<MembershipEvent> {
        match self {
            Membership::Consumer(m) => m.next_event(view),
            Membership::Classic(m) => m.next_event(),
            Membership::Manual(_) => None,
        }
    }

    /// The partitions owned now (revoked ones included until the next `on_poll`).
    pub fn owned(&self) -> Vec<TopicPartition> {
        match self {
            Membership::Consumer(m) => m.owned(),
            Membership::Classic(m) => m.owned(),
            Membership::Manual(m) => m.partitions().to_vec(),
        }
    }

    /// Whether every partition of `sorted` (in partition order, as a map's keys are) is owned
    /// now: one walk beside the owned ones, no look-up (a poll asks this of every partition
    /// the fetcher holds). Partitions out of order make it `false`, never wrongly `true`.
    pub fn owns_all<'a>(&self, sorted: impl Iterator<Item = &'a TopicPartition>) -> bool {
        match self {
            Membership::Consumer(m) => is_sorted_subset(sorted, m.owned_in_order()),
            Membership::Classic(m) => is_sorted_subset(sorted, m.owned_in_order()),
            Membership::Manual(m) => is_sorted_subset(sorted, m.owned_in_order()),
        }
    }

    /// Partitions that may be fetched: owned and not being revoked.
    pub fn fetchable(&self) -> Vec<TopicPartition> {
        match self {
            Membership::Consumer(m) => m.fetchable(),
            Membership::Classic(m) => m.fetchable(),
            Membership::Manual(m) => m.partitions().to_vec(),
        }
    }

    /// Classic: a JoinGroup / SyncGroup round is under way (see `ClassicMember::joining`).
    pub fn joining(&self) -> bool {
        match self {
            Membership::Consumer(_) | Membership::Manual(_) => false,
            Membership::Classic(m) => m.joining(),
        }
    }

    /// The KIP-447 metadata of this member now.
    pub fn group_metadata(&self) -> ConsumerGroupMetadata {
        match self {
            Membership::Consumer(m) => m.group_metadata(),
            Membership::Classic(m) => m.group_metadata(),
            Membership::Manual(m) => m.group_metadata(),
        }
    }

    /// When the membership next wants to send something (for the driver's timer).
    pub fn next_deadline(&self) -> Option<Millis> {
        match self {
            Membership::Consumer(m) => m.next_deadline(),
            Membership::Classic(m) => m.next_deadline(),
            Membership::Manual(_) => None,
        }
    }

    /// The application stopped polling past `max.poll.interval.ms`: the request that leaves
    /// the group (if the member is in one). Every owned partition is `Lost`, and nothing more
    /// is sent until the next [`Membership::on_poll`], which rejoins.
    pub fn leave_until_next_poll(&mut self) -> Option<MembershipRequest> {
        match self {
            Membership::Consumer(m) => m
                .leave_until_next_poll()
                .map(MembershipRequest::ConsumerHeartbeat),
            Membership::Classic(m) => m.leave_until_next_poll().map(MembershipRequest::Leave),
            Membership::Manual(_) => None,
        }
    }

    /// An offset commit with this member's current metadata was refused with `code`. Codes
    /// that say the member or its generation is gone are acted on now: UNKNOWN_MEMBER_ID and
    /// FENCED_MEMBER_EPOCH lose every partition; ILLEGAL_GENERATION loses them under the
    /// classic protocol and, under KIP-848 (where Kafka 4.1 answers it to a TxnOffsetCommit
    /// whose epoch is merely stale), holds delivery back until a full heartbeat says which;
    /// classic REBALANCE_IN_PROGRESS rejoins. Returns whether the code was one of those.
    pub fn commit_refused(&mut self, code: ErrorCode, now: Millis) -> bool {
        match self {
            Membership::Consumer(m) => m.commit_refused(code, now),
            Membership::Classic(m) => m.commit_refused(code),
            Membership::Manual(_) => false,
        }
    }

    /// Whether the next request may move the generation: every KIP-848 heartbeat may (the
    /// coordinator bumps the epoch when it processes one); of the classic requests, JoinGroup
    /// and SyncGroup do, Heartbeat does not.
    pub fn next_request_moves_generation(&self) -> bool {
        match self {
            Membership::Consumer(_) => true,
            Membership::Classic(m) => m.next_request_moves_generation(),
            Membership::Manual(_) => false,
        }
    }

    /// The heartbeat interval in force (KIP-848: the coordinator's).
    pub fn heartbeat_interval_ms(&self) -> Millis {
        match self {
            Membership::Consumer(m) => m.heartbeat_interval_ms(),
            Membership::Classic(m) => m.heartbeat_interval_ms(),
            Membership::Manual(_) => 0,
        }
    }

    /// The request that leaves the group, if the member is in one.
    pub fn leave(&mut self) -> Option<MembershipRequest> {
        match self {
            Membership::Consumer(m) => m.leave().map(MembershipRequest::ConsumerHeartbeat),
            Membership::Classic(m) => m.leave().map(MembershipRequest::Leave),
            Membership::Manual(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owns_all_walks_in_order_and_never_says_yes_wrongly() {
        let tp = |p| TopicPartition::new("t", p);
        let member = Membership::Manual(manual::ManualAssignment::new(
            String::new(),
            &[tp(4), tp(1), tp(2), tp(7)],
        ));
        assert!(member.owns_all([tp(1), tp(2), tp(7)].iter()));
        assert!(member.owns_all([].iter()));
        assert!(!member.owns_all([tp(1), tp(3)].iter()), "3 is not owned");
        assert!(
            !member.owns_all([tp(7), tp(8)].iter()),
            "8 is past every owned one"
        );
        // Out of order: not proven owned (the caller then checks the slow way).
        assert!(!member.owns_all([tp(2), tp(1)].iter()));
    }

    /// A manual assignment is all owned and all fetchable, in the order given, and never
    /// joins, heartbeats or leaves a group.
    #[test]
    fn a_manual_assignment_owns_and_fetches_what_it_was_given() {
        let tp = |p| TopicPartition::new("t", p);
        let mut member = Membership::Manual(manual::ManualAssignment::new(
            String::new(),
            &[tp(4), tp(1)],
        ));
        assert_eq!(member.owned(), vec![tp(4), tp(1)]);
        assert_eq!(member.fetchable(), vec![tp(4), tp(1)]);
        assert!(!member.in_group() && !member.joining());
        assert_eq!(member.next_deadline(), None);
        assert!(member.leave().is_none());
    }
}
