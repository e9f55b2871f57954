use super::*;
use crate::protocol::generated::lowest_version;
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

/// The settings of a member of group `g` (session 6 s, rebalance 30 s, heartbeat interval
/// 500 ms).
fn config(instance_id: Option<String>, strategy: AssignmentStrategy) -> ClassicMemberConfig {
    ClassicMemberConfig {
        group_id: "g".into(),
        instance_id,
        session_timeout_ms: 6000,
        rebalance_timeout_ms: 30_000,
        heartbeat_interval_ms: 500,
        strategy,
    }
}

/// A member is built from its `ClassicMemberConfig` alone, and its JoinGroup carries it: the
/// group, the instance id, both timeouts and the strategy's protocol; the heartbeat follows
/// the interval.
#[test]
fn a_member_is_built_from_its_config_alone() {
    let mut m = ClassicMember::new(ClassicMemberConfig {
        group_id: "payments".into(),
        instance_id: Some("host-1".into()),
        session_timeout_ms: 45_000,
        rebalance_timeout_ms: 120_000,
        heartbeat_interval_ms: 3_000,
        strategy: AssignmentStrategy::CooperativeSticky,
    });
    m.subscribe(vec!["t".into()]);
    let Some(MembershipRequest::Join(join)) = m.poll_request(0, &View) else {
        panic!("a join first");
    };
    assert_eq!(&*join.group_id, "payments");
    assert_eq!(join.group_instance_id.as_deref(), Some("host-1"));
    assert_eq!(
        (join.session_timeout_ms, join.rebalance_timeout_ms),
        (45_000, 120_000)
    );
    assert_eq!(
        join.protocols.iter().map(|p| &*p.name).collect::<Vec<_>>(),
        vec!["cooperative-sticky"]
    );
    m.on_response(
        MembershipResponse::Join(join_response("m1", "m1", &["m1"])),
        0,
    )
    .unwrap();
    let Some(MembershipRequest::Sync(sync)) = m.poll_request(0, &View) else {
        panic!("a sync");
    };
    m.on_response(
        MembershipResponse::Sync(SyncGroupResponse {
            assignment: sync.assignments[0].assignment.clone(),
            ..Default::default()
        }),
        0,
    )
    .unwrap();
    assert!(
        m.poll_request(2_999, &View).is_none(),
        "no heartbeat before heartbeat.interval.ms"
    );
    assert!(matches!(
        m.poll_request(3_000, &View),
        Some(MembershipRequest::Heartbeat(_))
    ));
}

/// A member subscribed to nothing does not join: there is nothing to be assigned.
#[test]
fn a_member_without_a_subscription_sends_nothing() {
    let mut m = ClassicMember::new(config(None, AssignmentStrategy::Range));
    assert!(m.poll_request(0, &View).is_none());
    m.subscribe(Vec::new());
    assert!(m.poll_request(1_000, &View).is_none());
}

/// An eager `range` member of group `g` subscribed to `t` (session 6 s, rebalance 30 s,
/// heartbeat interval 500 ms).
fn subscribed_member() -> ClassicMember {
    let mut m = ClassicMember::new(config(None, AssignmentStrategy::Range));
    m.subscribe(vec!["t".into()]);
    m
}

/// A follower's JoinGroup answered at `at` (as `m2`, led by `m1`), and its SyncGroup sent.
fn join_answered(m: &mut ClassicMember, at: Millis) {
    m.on_response(MembershipResponse::Join(join_response("m2", "m1", &[])), at)
        .unwrap();
    m.poll_request(at, &View).unwrap();
}

/// A follower (`m2`, led by `m1`) that joined at `now` and was given `partitions` of `t`,
/// its Assigned event taken.
fn assigned_follower(now: Millis, partitions: &[i32]) -> ClassicMember {
    let mut m = subscribed_member();
    m.poll_request(now, &View).unwrap();
    join_answered(&mut m, now);
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
fn heartbeat_answered(m: &mut ClassicMember, at: Millis, error: ErrorCode) {
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

/// The requests are built without the version the connection negotiates: a dynamic
/// member's are writable at every version spoken; a static member's (KIP-345) carry its
/// instance id, so they are refused below the versions that can carry it (JoinGroup v5,
/// SyncGroup and Heartbeat v3) instead of joining as a dynamic member; it never sends
/// LeaveGroup.
#[test]
fn requests_are_writable_from_the_first_version_that_carries_them() {
    for (instance, join_from, sync_from, heartbeat_from) in [(None, 0, 0, 0), (Some("i"), 5, 3, 3)]
    {
        let now: Millis = 0;
        let mut m = ClassicMember::new(config(
            instance.map(str::to_owned),
            AssignmentStrategy::CooperativeSticky,
        ));
        m.subscribe(vec!["t".into()]);
        let Some(MembershipRequest::Join(join)) = m.poll_request(now, &View) else {
            panic!("a join first");
        };
        assert_eq!(lowest_version(&join), join_from, "{instance:?}");
        m.on_response(
            MembershipResponse::Join(join_response("m1", "m1", &["m1"])),
            now,
        )
        .unwrap();
        let Some(MembershipRequest::Sync(sync)) = m.poll_request(now, &View) else {
            panic!("a sync");
        };
        assert_eq!(lowest_version(&sync), sync_from, "{instance:?}");
        m.on_response(
            MembershipResponse::Sync(SyncGroupResponse {
                assignment: sync.assignments[0].assignment.clone(),
                ..Default::default()
            }),
            now,
        )
        .unwrap();
        let Some(MembershipRequest::Heartbeat(heartbeat)) = m.poll_request(now + 500, &View) else {
            panic!("a heartbeat");
        };
        assert_eq!(lowest_version(&heartbeat), heartbeat_from, "{instance:?}");
        match m.leave() {
            Some(leave) => assert_eq!(lowest_version(&leave), 0),
            None => assert!(instance.is_some(), "a dynamic member leaves"),
        }
    }
}

#[test]
fn leader_joins_assigns_and_heartbeats() {
    let now: Millis = 0;
    let mut m = subscribed_member();
    let Some(MembershipRequest::Join(join)) = m.poll_request(now, &View) else {
        panic!("a join first");
    };
    assert_eq!(join.member_id.as_str(), "");
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
    assert_eq!(join.member_id.as_str(), "m1");
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
        .find(|a| a.member_id.as_str() == "m1")
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
        m.poll_request(now + 500, &View),
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
    let now: Millis = 0;
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
    let now: Millis = 0;
    let mut m = assigned_follower(now, &[2, 3]);
    let later = now + 1_000;
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
    let now: Millis = 0;
    let mut m = assigned_follower(now, &[1]);
    let later = now + 1_000;
    heartbeat_answered(&mut m, later, ErrorCode::UNKNOWN_MEMBER_ID);
    assert_eq!(m.next_event(), Some(MembershipEvent::Lost(vec![tp(1)])));
    let Some(MembershipRequest::Join(join)) = m.poll_request(later, &View) else {
        panic!("rejoin");
    };
    assert_eq!(
        join.member_id.as_str(),
        "",
        "an unknown member joins afresh"
    );
    assert_eq!(m.group_metadata().generation_id, -1);
}

fn sync_with(parts: &[i32]) -> MembershipResponse {
    let assignment: BTreeMap<String, Vec<i32>> = [("t".to_owned(), parts.to_vec())].into();
    MembershipResponse::Sync(SyncGroupResponse {
        assignment: assignor::encode_assignment(&assignment),
        ..Default::default()
    })
}

/// A cooperative follower that owns `parts` at generation 7.
fn cooperative_member_owning(parts: &[i32], now: Millis) -> ClassicMember {
    let mut m = ClassicMember::new(config(None, AssignmentStrategy::CooperativeSticky));
    m.subscribe(vec!["t".into()]);
    let Some(MembershipRequest::Join(join)) = m.poll_request(now, &View) else {
        panic!("a join first");
    };
    assert_eq!(join.protocols[0].name.as_str(), COOPERATIVE_STICKY);
    m.on_response(
        MembershipResponse::Join(join_response("m2", "m1", &[])),
        now,
    )
    .unwrap();
    m.poll_request(now, &View).unwrap();
    m.on_response(sync_with(parts), now).unwrap();
    assert_eq!(
        m.next_event(),
        Some(MembershipEvent::Assigned(
            parts.iter().map(|p| tp(*p)).collect()
        ))
    );
    m
}

/// A follower's JoinGroup answered (led by `m1`), then its SyncGroup with `partitions`.
fn join_and_sync(m: &mut ClassicMember, at: Millis, partitions: &[i32]) {
    join_answered(m, at);
    m.on_response(sync_with(partitions), at).unwrap();
}

#[test]
fn cooperative_rebalance_keeps_partitions_and_revokes_only_the_moved_ones() {
    let now: Millis = 0;
    let mut m = cooperative_member_owning(&[0, 1, 2, 3], now);
    let later = now + 1_000;
    heartbeat_answered(&mut m, later, ErrorCode::REBALANCE_IN_PROGRESS);
    // No revocation before the join, and fetching goes on (KIP-429).
    assert_eq!(m.next_event(), None);
    assert_eq!(m.fetchable().len(), 4);
    let Some(MembershipRequest::Join(join)) = m.poll_request(later, &View) else {
        panic!("rejoin at once");
    };
    let subscription = assignor::decode_subscription(&join.protocols[0].metadata).unwrap();
    assert_eq!(subscription.owned["t"], vec![0, 1, 2, 3]);
    assert_eq!(subscription.generation, 7);
    assert!(m.joining());
    m.on_response(
        MembershipResponse::Join(join_response("m2", "m1", &[])),
        later,
    )
    .unwrap();
    m.poll_request(later, &View).unwrap();
    // The leader moved 2 and 3 away: only they are revoked; no Assigned for 0 and 1.
    m.on_response(sync_with(&[0, 1]), later).unwrap();
    assert!(!m.joining());
    assert_eq!(
        m.next_event(),
        Some(MembershipEvent::Revoked(vec![tp(2), tp(3)]))
    );
    assert_eq!(m.next_event(), None);
    assert_eq!(m.owned().len(), 4, "still owned until the next poll");
    assert_eq!(m.fetchable(), vec![tp(0), tp(1)]);
    assert!(
        !matches!(
            m.poll_request(later + 1_000, &View),
            Some(MembershipRequest::Join(_))
        ),
        "no rejoin before the next poll"
    );
    m.in_flight = false;
    m.on_poll(later);
    assert_eq!(m.owned(), vec![tp(0), tp(1)]);
    let Some(MembershipRequest::Join(join)) = m.poll_request(later, &View) else {
        panic!("rejoin so that the next rebalance hands 2 and 3 over");
    };
    let subscription = assignor::decode_subscription(&join.protocols[0].metadata).unwrap();
    assert_eq!(subscription.owned["t"], vec![0, 1]);
    join_and_sync(&mut m, later, &[0, 1]);
    assert_eq!(m.next_event(), None, "nothing changed for this member");
}

#[test]
fn cooperative_sync_adds_only_the_new_partitions() {
    let now: Millis = 0;
    let mut m = cooperative_member_owning(&[0], now);
    let later = now + 1_000;
    heartbeat_answered(&mut m, later, ErrorCode::REBALANCE_IN_PROGRESS);
    m.poll_request(later, &View).unwrap();
    join_and_sync(&mut m, later, &[0, 2]);
    assert_eq!(m.next_event(), Some(MembershipEvent::Assigned(vec![tp(2)])));
    assert_eq!(m.next_event(), None);
    assert_eq!(m.fetchable(), vec![tp(0), tp(2)]);
}

#[test]
fn a_member_past_its_poll_budget_leaves_loses_everything_and_rejoins_at_the_next_poll() {
    let now: Millis = 0;
    let mut m = assigned_follower(now, &[0, 1]);
    let leave = m.leave_until_next_poll().expect("a LeaveGroup");
    assert_eq!(leave.members[0].member_id.as_str(), "m2");
    assert_eq!(
        m.next_event(),
        Some(MembershipEvent::Lost(vec![tp(0), tp(1)]))
    );
    assert!(m.owned().is_empty());
    let later = now + 1_000;
    assert!(
        m.poll_request(later, &View).is_none(),
        "nothing before the next poll"
    );
    m.on_poll(later);
    let Some(MembershipRequest::Join(join)) = m.poll_request(later, &View) else {
        panic!("the next poll rejoins");
    };
    assert_eq!(
        join.member_id.as_str(),
        "",
        "a new member id (the old one left)"
    );
}

#[test]
fn a_refused_commit_acts_on_the_membership_at_once() {
    let now: Millis = 0;
    let mut m = assigned_follower(now, &[0]);
    assert!(m.commit_refused(ErrorCode::ILLEGAL_GENERATION));
    assert_eq!(m.next_event(), Some(MembershipEvent::Lost(vec![tp(0)])));
    assert!(m.fetchable().is_empty());
    assert!(!m.commit_refused(ErrorCode::OFFSET_METADATA_TOO_LARGE));

    let mut c = cooperative_member_owning(&[0, 1], now);
    assert!(
        !c.next_request_moves_generation(),
        "a stable member heartbeats"
    );
    assert!(c.commit_refused(ErrorCode::REBALANCE_IN_PROGRESS));
    assert!(c.next_request_moves_generation(), "it rejoins");
    assert_eq!(c.fetchable().len(), 2, "keeping its partitions (KIP-429)");
}

#[test]
fn a_refused_commit_after_a_fenced_heartbeat_keeps_the_lost_event_first() {
    let now: Millis = 0;
    let mut m = assigned_follower(now, &[0, 1, 2]);
    heartbeat_answered(&mut m, now + 1_000, ErrorCode::UNKNOWN_MEMBER_ID);
    // The commit made with what the member had then (not in a group any more) changes
    // nothing, and a second loss keeps the first one's event.
    assert!(!m.commit_refused(ErrorCode::UNKNOWN_MEMBER_ID));
    m.lose_everything(true);
    assert_eq!(
        m.next_event(),
        Some(MembershipEvent::Lost(vec![tp(0), tp(1), tp(2)]))
    );
    assert_eq!(m.next_event(), None);
}

fn member_with(strategy: AssignmentStrategy) -> ClassicMember {
    let mut m = ClassicMember::new(config(None, strategy));
    m.subscribe(vec!["t".into()]);
    m
}

fn subscription_of(join: &JoinGroupRequest) -> Vec<String> {
    assignor::decode_subscription(&join.protocols[0].metadata)
        .unwrap()
        .topics
}

/// `subscribe` while the JoinGroup carrying the old subscription is in flight: the round
/// ends with an assignment for the old one, and the member rejoins at once with the new
/// one (cooperative: keeping what it still subscribes to; eager: taking nothing, as it
/// would revoke it again at once).
#[test]
fn a_subscription_changed_mid_join_is_joined_with_once_the_round_ends() {
    for strategy in [
        AssignmentStrategy::CooperativeSticky,
        AssignmentStrategy::Range,
    ] {
        let now: Millis = 0;
        let mut m = member_with(strategy);
        let Some(MembershipRequest::Join(join)) = m.poll_request(now, &View) else {
            panic!("a join first");
        };
        assert_eq!(subscription_of(&join), vec!["t".to_owned()]);
        m.subscribe(vec!["t".into(), "u".into()]);
        assert!(m.joining(), "the round goes on");
        join_and_sync(&mut m, now, &[0, 1]);
        if strategy == AssignmentStrategy::Range {
            assert_eq!(m.next_event(), None, "{strategy:?}: nothing taken");
            assert!(m.owned().is_empty());
        } else {
            assert_eq!(
                m.next_event(),
                Some(MembershipEvent::Assigned(vec![tp(0), tp(1)])),
                "{strategy:?}"
            );
        }
        let Some(MembershipRequest::Join(rejoin)) = m.poll_request(now, &View) else {
            panic!("{strategy:?}: the member rejoins at once");
        };
        assert_eq!(
            subscription_of(&rejoin),
            vec!["t".to_owned(), "u".to_owned()]
        );
        // The round with the current subscription ends stable.
        join_and_sync(&mut m, now, &[0, 1]);
        if strategy == AssignmentStrategy::Range {
            assert_eq!(
                m.next_event(),
                Some(MembershipEvent::Assigned(vec![tp(0), tp(1)]))
            );
        }
        assert!(matches!(
            m.poll_request(now + 500, &View),
            Some(MembershipRequest::Heartbeat(_))
        ));
    }
}

/// A topic dropped from the subscription mid-join: its partitions in the round's
/// assignment are not taken, and a cooperative member hands back those it owned.
#[test]
fn a_topic_unsubscribed_mid_join_is_not_taken() {
    let now: Millis = 0;
    let mut m = cooperative_member_owning(&[0, 1], now);
    heartbeat_answered(&mut m, now + 1_000, ErrorCode::REBALANCE_IN_PROGRESS);
    let Some(MembershipRequest::Join(_)) = m.poll_request(now + 1_000, &View) else {
        panic!("a cooperative member rejoins at once");
    };
    m.subscribe(vec!["u".into()]);
    join_and_sync(&mut m, now + 1_000, &[0, 1, 2]);
    assert_eq!(
        m.next_event(),
        Some(MembershipEvent::Revoked(vec![tp(0), tp(1)]))
    );
    assert_eq!(m.next_event(), None, "partition 2 of t is not taken");
    assert!(m.fetchable().is_empty());
    m.on_poll(now + 1_000);
    assert!(m.owned().is_empty());
    let Some(MembershipRequest::Join(rejoin)) = m.poll_request(now + 1_000, &View) else {
        panic!("the member rejoins after handing them back");
    };
    assert_eq!(subscription_of(&rejoin), vec!["u".to_owned()]);
}

/// Partition counts a test can change.
struct Counts(std::cell::RefCell<BTreeMap<String, i32>>);
impl Counts {
    fn of(t: i32) -> Self {
        Self(std::cell::RefCell::new([("t".to_owned(), t)].into()))
    }
    fn set(&self, topic: &str, n: i32) {
        self.0.borrow_mut().insert(topic.to_owned(), n);
    }
}
impl TopicView for Counts {
    fn partition_count(&self, topic: &str) -> Option<i32> {
        self.0.borrow().get(topic).copied()
    }
    fn topic_name(&self, _topic_id: &[u8; 16]) -> Option<Arc<str>> {
        None
    }
}

/// The only member, so the leader: joined, assigned `t`'s partitions, its event taken.
fn sole_leader(strategy: AssignmentStrategy, counts: &Counts) -> ClassicMember {
    let now: Millis = 0;
    let mut m = member_with(strategy);
    m.poll_request(now, counts).unwrap();
    join_alone(&mut m, counts, now);
    assert!(matches!(m.next_event(), Some(MembershipEvent::Assigned(_))));
    m
}

/// Answers the JoinGroup `m` sent as the group's only member (so its leader), then the
/// SyncGroup it sends with the assignment it made.
fn join_alone(m: &mut ClassicMember, counts: &Counts, now: Millis) {
    m.on_response(
        MembershipResponse::Join(join_response("m1", "m1", &["m1"])),
        now,
    )
    .unwrap();
    let Some(MembershipRequest::Sync(sync)) = m.poll_request(now, counts) else {
        panic!("a sync");
    };
    m.on_response(
        MembershipResponse::Sync(SyncGroupResponse {
            assignment: sync.assignments[0].assignment.clone(),
            ..Default::default()
        }),
        now,
    )
    .unwrap();
}

/// Java's `MetadataSnapshot`: the leader watches the partition counts its assignment
/// used, and rejoins when one moves, so added partitions are assigned without waiting
/// for an unrelated rebalance.
#[test]
fn the_leader_rejoins_when_a_topic_it_assigned_gains_partitions() {
    for strategy in [
        AssignmentStrategy::CooperativeSticky,
        AssignmentStrategy::Range,
    ] {
        let counts = Counts::of(1);
        let mut m = sole_leader(strategy, &counts);
        assert_eq!(m.owned(), vec![tp(0)]);
        assert_eq!(m.wanted_topics(), vec!["t".to_owned()], "watched");
        assert!(matches!(
            m.poll_request(500, &counts),
            Some(MembershipRequest::Heartbeat(_))
        ));
        m.on_response(MembershipResponse::Heartbeat(Default::default()), 500)
            .unwrap();
        counts.set("t", 2);
        let later: Millis = 1_000;
        if strategy == AssignmentStrategy::Range {
            // Eager: everything is revoked first, heartbeats go on until the next poll.
            assert!(matches!(
                m.poll_request(later, &counts),
                Some(MembershipRequest::Heartbeat(_))
            ));
            assert_eq!(m.next_event(), Some(MembershipEvent::Revoked(vec![tp(0)])));
            m.on_response(MembershipResponse::Heartbeat(Default::default()), later)
                .unwrap();
            m.on_poll(later);
        }
        let Some(MembershipRequest::Join(_)) = m.poll_request(later, &counts) else {
            panic!("{strategy:?}: the leader rejoins");
        };
        join_alone(&mut m, &counts, later);
        let added = match strategy {
            AssignmentStrategy::Range => vec![tp(0), tp(1)],
            _ => vec![tp(1)],
        };
        assert_eq!(m.next_event(), Some(MembershipEvent::Assigned(added)));
        assert!(
            matches!(
                m.poll_request(later + 500, &counts),
                Some(MembershipRequest::Heartbeat(_))
            ),
            "{strategy:?}: the new snapshot matches: stable"
        );
    }
}

/// A follower leaves the watching to the leader (which assigned for the whole group).
#[test]
fn a_follower_does_not_watch_partition_counts() {
    let mut m = assigned_follower(0, &[0]);
    assert!(m.wanted_topics().is_empty());
    let counts = Counts::of(9);
    assert!(matches!(
        m.poll_request(500, &counts),
        Some(MembershipRequest::Heartbeat(_))
    ));
}

/// Rule M1 for eager members: between REBALANCE_IN_PROGRESS and the poll that hands the
/// revoked partitions back, the member heartbeats with its generation on its interval
/// (the coordinator counts those heartbeats as liveness), a commit may take a hold
/// (nothing it sends moves the generation), and the join waits for that poll.
#[test]
fn an_eager_member_heartbeats_until_it_hands_revoked_partitions_back() {
    let mut m = assigned_follower(0, &[0, 1]);
    heartbeat_answered(&mut m, 500, ErrorCode::REBALANCE_IN_PROGRESS);
    assert_eq!(
        m.next_event(),
        Some(MembershipEvent::Revoked(vec![tp(0), tp(1)]))
    );
    assert!(!m.joining());
    assert!(!m.next_request_moves_generation());
    // Fifteen seconds of processing: a heartbeat every interval, none answered otherwise.
    let mut at: Millis = 500;
    for _ in 0..30 {
        assert!(m.poll_request(at + 499, &View).is_none(), "not due yet");
        at += 500;
        let Some(MembershipRequest::Heartbeat(hb)) = m.poll_request(at, &View) else {
            panic!("a heartbeat at {at}");
        };
        assert_eq!(hb.generation_id, 7);
        m.on_response(
            MembershipResponse::Heartbeat(HeartbeatResponse {
                error_code: ErrorCode::REBALANCE_IN_PROGRESS.0,
                ..Default::default()
            }),
            at,
        )
        .unwrap();
        assert_eq!(m.owned().len(), 2, "owned until the next poll");
    }
    // A heartbeat in flight when the poll hands the partitions back: its answer does
    // not hold the join back.
    at += 500;
    m.poll_request(at, &View).unwrap();
    m.on_poll(at);
    assert!(m.owned().is_empty());
    m.on_response(
        MembershipResponse::Heartbeat(HeartbeatResponse {
            error_code: ErrorCode::REBALANCE_IN_PROGRESS.0,
            ..Default::default()
        }),
        at,
    )
    .unwrap();
    assert!(matches!(
        m.poll_request(at, &View),
        Some(MembershipRequest::Join(_))
    ));
}

/// The consumer's driver speaks to a member through `Membership`: each call reaches the
/// classic member behind it (the poll that rejoins, the next deadline, the interval).
#[test]
fn the_membership_hands_each_call_to_its_classic_member() {
    use crate::consumer::membership::Membership;
    let now: Millis = 0;
    let mut m = Membership::Classic(assigned_follower(now, &[0, 1]));
    assert!(m.in_group());
    assert_eq!(m.heartbeat_interval_ms(), 500);
    assert_eq!(m.next_deadline(), Some(now + 500), "the first heartbeat");
    assert!(m.leave_until_next_poll().is_some());
    let later = now + 1_000;
    assert!(m.poll_request(later, &View).is_none());
    m.on_poll(later);
    assert!(
        matches!(
            m.poll_request(later, &View),
            Some(MembershipRequest::Join(_))
        ),
        "the next poll rejoins"
    );
}

/// A failed request reaches the member through the `Membership` enum: it is sent again after
/// the backoff. Only a code that says the member or its generation is gone is acted on as a
/// refused commit; a manual assignment has no membership to act on.
#[test]
fn the_membership_hands_failures_and_refusals_to_its_member() {
    use crate::consumer::membership::{Membership, manual::ManualAssignment};
    let mut m = Membership::Classic(assigned_follower(0, &[0]));
    assert!(matches!(
        m.poll_request(500, &View),
        Some(MembershipRequest::Heartbeat(_))
    ));
    m.on_request_failed(600, 100);
    assert!(m.poll_request(650, &View).is_none(), "the backoff first");
    assert!(matches!(
        m.poll_request(700, &View),
        Some(MembershipRequest::Heartbeat(_))
    ));
    assert!(!m.commit_refused(ErrorCode::NOT_COORDINATOR, 700));
    assert!(m.commit_refused(ErrorCode::UNKNOWN_MEMBER_ID, 700));
    let mut manual = Membership::Manual(ManualAssignment::new("g".into(), &[tp(0)]));
    assert!(!manual.commit_refused(ErrorCode::UNKNOWN_MEMBER_ID, 700));
}

/// A member owns all of a set of partitions only if each is among its owned ones: the
/// fetcher asks this before handing records out (ARCHITECTURE.md M3: nothing of a partition
/// the member no longer owns is delivered); it leaves with its member's LeaveGroup.
#[test]
fn the_membership_owns_what_was_assigned_and_leaves_through_its_member() {
    use crate::consumer::membership::Membership;
    let mut m = Membership::Classic(assigned_follower(0, &[0, 2]));
    assert!(m.owns_all([tp(0), tp(2)].iter()));
    assert!(m.owns_all([tp(2)].iter()));
    assert!(!m.owns_all([tp(0), tp(1)].iter()));
    assert!(!m.owns_all([tp(3)].iter()));
    assert!(matches!(m.leave(), Some(MembershipRequest::Leave(_))));
}

/// One request at a time: while one is in flight no other is sent, whatever is due.
#[test]
fn no_request_is_sent_while_one_is_in_flight() {
    let mut m = assigned_follower(0, &[0]);
    assert!(m.poll_request(500, &View).is_some(), "the heartbeat due");
    assert!(m.poll_request(500, &View).is_none());
    assert!(m.poll_request(10_000, &View).is_none());
}

/// A SyncGroup refused because the group is rebalancing (or its coordinator moved) rejoins
/// after a short wait; any other error is the application's to see.
#[test]
fn a_refused_sync_rejoins_after_a_wait_and_a_fatal_one_surfaces() {
    let now: Millis = 0;
    let refused = |code: ErrorCode| {
        MembershipResponse::Sync(SyncGroupResponse {
            error_code: code.0,
            ..Default::default()
        })
    };
    let mut m = subscribed_member();
    m.poll_request(now, &View).unwrap();
    join_answered(&mut m, now);
    m.on_response(refused(ErrorCode::REBALANCE_IN_PROGRESS), now)
        .unwrap();
    assert!(
        m.poll_request(now + REBALANCE_RETRY_MS - 1, &View)
            .is_none()
    );
    assert!(matches!(
        m.poll_request(now + REBALANCE_RETRY_MS, &View),
        Some(MembershipRequest::Join(_))
    ));
    join_answered(&mut m, now);
    assert!(
        m.on_response(refused(ErrorCode::GROUP_AUTHORIZATION_FAILED), now)
            .is_err()
    );
}

/// A JoinGroup refused because the group is rebalancing or its coordinator moved is sent
/// again after a short wait; any other error (not authorized, say) is the application's to
/// see, not retried forever.
#[test]
fn a_refused_join_is_retried_after_a_wait_and_a_fatal_one_surfaces() {
    let refused = |code: ErrorCode| {
        MembershipResponse::Join(JoinGroupResponse {
            error_code: code.0,
            ..Default::default()
        })
    };
    let mut m = subscribed_member();
    m.poll_request(0, &View).unwrap();
    m.on_response(refused(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS), 0)
        .unwrap();
    assert!(m.poll_request(REBALANCE_RETRY_MS - 1, &View).is_none());
    assert!(matches!(
        m.poll_request(REBALANCE_RETRY_MS, &View),
        Some(MembershipRequest::Join(_))
    ));
    assert!(
        m.on_response(
            refused(ErrorCode::GROUP_AUTHORIZATION_FAILED),
            REBALANCE_RETRY_MS
        )
        .is_err()
    );
}

/// Generation 0 is a generation like any other (the "no generation" of a member outside the
/// group is -1, as in Java's `Generation.NO_GENERATION`): a commit refused for an unknown
/// member while the member holds it loses its partitions.
#[test]
fn a_refused_commit_acts_on_a_member_of_generation_zero() {
    let mut m = subscribed_member();
    m.poll_request(0, &View).unwrap();
    m.on_response(
        MembershipResponse::Join(JoinGroupResponse {
            generation_id: 0,
            ..join_response("m2", "m1", &[])
        }),
        0,
    )
    .unwrap();
    assert!(m.commit_refused(ErrorCode::UNKNOWN_MEMBER_ID));
}

/// LeaveGroup goes once, and only from a member the coordinator knows (one with a member id);
/// a member that left sends nothing more, its heartbeats due or not.
#[test]
fn a_member_leaves_once_and_only_once_joined() {
    let mut unjoined = subscribed_member();
    assert!(unjoined.leave().is_none(), "no member id yet");
    let mut m = assigned_follower(0, &[0]);
    assert!(m.leave().is_some());
    assert!(m.leave().is_none(), "left already");
    assert!(m.poll_request(10_000, &View).is_none());
}

/// A heartbeat refused because the coordinator moved or is loading is sent again after a
/// short wait, not at once (and not only at the next interval).
#[test]
fn a_heartbeat_to_a_moved_coordinator_goes_again_after_a_short_wait() {
    let mut m = assigned_follower(0, &[0]);
    heartbeat_answered(&mut m, 3_000, ErrorCode::NOT_COORDINATOR);
    assert!(m.poll_request(3_000, &View).is_none(), "not at once");
    assert!(matches!(
        m.poll_request(3_000 + REBALANCE_RETRY_MS, &View),
        Some(MembershipRequest::Heartbeat(_))
    ));
}

/// Each strategy joins under its own protocol name (KIP-429's "cooperative-sticky", the
/// eager "range"), which the coordinator matches against the other members'.
#[test]
fn each_strategy_joins_under_its_protocol_name() {
    for (strategy, name) in [
        (AssignmentStrategy::Range, "range"),
        (AssignmentStrategy::CooperativeSticky, "cooperative-sticky"),
    ] {
        let Some(MembershipRequest::Join(join)) = member_with(strategy).poll_request(0, &View)
        else {
            panic!("a join first");
        };
        let names: Vec<&str> = join.protocols.iter().map(|p| &*p.name).collect();
        assert_eq!(names, vec![name]);
    }
}
