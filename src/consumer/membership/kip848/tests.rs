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
    // A static member leaves with epoch -2, keeping its partitions until its session
    // expires (KIP-848's ConsumerGroupHeartbeat schema).
    m.on_response(answer(1, None), 0, &View).unwrap();
    let leave = m.leave().expect("a member in the group leaves");
    assert_eq!(leave.member_epoch, -2);
    assert_eq!(leave.instance_id.as_deref(), Some("host-1"));
}

/// Member `m-1` of group `g`, subscribed to nothing yet.
fn unsubscribed_member() -> ConsumerMember {
    ConsumerMember::new(ConsumerMemberConfig {
        group_id: "g".into(),
        member_id: "m-1".into(),
        instance_id: None,
        rebalance_timeout_ms: 30_000,
        server_assignor: None,
    })
}

fn member() -> ConsumerMember {
    let mut m = unsubscribed_member();
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
    // Only the join carries the rebalance timeout; -1 is "unchanged" (KIP-848's schema).
    assert_eq!(ack.rebalance_timeout_ms, -1);
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

/// The consumer's driver speaks to a KIP-848 member through `Membership`: it is a group
/// membership (the driver heartbeats it in the background and revokes before committing), its
/// heartbeat goes out and comes back through the enum, and the assignment reaches the user as
/// an event.
#[test]
fn the_membership_hands_requests_answers_and_events_to_its_kip848_member() {
    use crate::consumer::membership::{Membership, MembershipRequest, MembershipResponse};
    let mut m = Membership::Consumer(member());
    assert!(m.in_group());
    let Some(MembershipRequest::ConsumerHeartbeat(join)) = m.poll_request(0, &View) else {
        panic!("the join is a ConsumerGroupHeartbeat");
    };
    assert_eq!(join.member_epoch, 0);
    m.on_response(
        MembershipResponse::ConsumerHeartbeat(answer(1, Some(vec![2]))),
        0,
        &View,
    )
    .unwrap();
    assert_eq!(
        m.next_event(&View),
        Some(MembershipEvent::Assigned(vec![tp(2)]))
    );
    assert_eq!(m.next_event(&View), None);
    assert_eq!(m.owned(), vec![tp(2)]);
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
    assert!(
        !member_owning(now, vec![0]).unknown_topic_ids(&View),
        "every topic id of the assignment known"
    );
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
    // Leaving: epoch -1 (KIP-848's ConsumerGroupHeartbeat schema).
    m.on_response(answer(1, None), now, &View).unwrap();
    assert_eq!(m.leave().unwrap().member_epoch, -1);
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

/// A coordinator that moved or is loading is not an error for the application: the member
/// keeps its partitions and heartbeats again after a short wait (the consumer looks the
/// coordinator up again meanwhile).
#[test]
fn a_coordinator_that_moved_is_heartbeated_again_after_a_wait() {
    for code in [
        ErrorCode::NOT_COORDINATOR,
        ErrorCode::COORDINATOR_NOT_AVAILABLE,
        ErrorCode::COORDINATOR_LOAD_IN_PROGRESS,
    ] {
        let now: Millis = 0;
        let mut m = member_owning(now, vec![0]);
        m.poll_request(now + 500).expect("a heartbeat");
        let moved = ConsumerGroupHeartbeatResponse {
            error_code: code.0,
            ..Default::default()
        };
        assert!(m.on_response(moved, now + 500, &View).is_ok(), "{code}");
        assert_eq!(m.owned(), vec![tp(0)], "{code}");
        assert!(m.poll_request(now + 599).is_none(), "{code}");
        assert!(m.poll_request(now + 600).is_some(), "{code}");
    }
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

/// A member that has subscribed to nothing and is not in the group has nothing to say to the
/// coordinator: it sends no heartbeat (joining with an empty subscription would put a member
/// in the group that can be assigned nothing).
#[test]
fn a_member_subscribed_to_nothing_sends_nothing() {
    let mut m = unsubscribed_member();
    assert!(m.poll_request(0).is_none());
    assert!(m.poll_request(60_000).is_none());
}

/// The coordinator's interval replaces the member's only when it gives one: an answer with
/// `heartbeat_interval_ms` 0 (or negative) keeps the last, instead of heartbeating at once
/// and without end.
#[test]
fn an_answer_without_a_heartbeat_interval_keeps_the_last_one() {
    let now: Millis = 0;
    let mut m = member_owning(now, vec![0]);
    m.poll_request(now + 500)
        .expect("a heartbeat at the interval the answers gave");
    let silent = ConsumerGroupHeartbeatResponse {
        heartbeat_interval_ms: 0,
        ..answer(1, None)
    };
    m.on_response(silent, now + 500, &View).unwrap();
    assert!(m.poll_request(now + 500).is_none());
    assert!(m.poll_request(now + 999).is_none());
    assert!(m.poll_request(now + 1000).is_some());
}

/// As with topic names: a regex changed while the heartbeat carrying the previous one is in
/// flight is not taken as sent by that heartbeat's answer.
#[test]
#[cfg(feature = "pattern-subscription")]
fn a_regex_changed_while_the_heartbeat_carrying_the_old_one_flies_is_sent_again() {
    let now: Millis = 0;
    let mut m = member_owning(now, vec![0]);
    m.subscribe_regex("t.*".into());
    let carrying = m.poll_request(now).expect("the regex goes out");
    assert_eq!(carrying.subscribed_topic_regex.as_deref(), Some("t.*"));
    m.subscribe_regex("u.*".into());
    m.on_response(answer(1, None), now, &View).unwrap();
    let again = m
        .poll_request(now)
        .expect("the newer regex is not taken as sent");
    assert_eq!(again.subscribed_topic_regex.as_deref(), Some("u.*"));
}

/// A member that left the group (`close`) sends no heartbeat after its leave, however long
/// it waits.
#[test]
fn a_member_that_left_sends_nothing_more() {
    let now: Millis = 0;
    let mut m = member_owning(now, vec![0]);
    m.leave().expect("a leaving heartbeat");
    assert!(m.poll_request(now + 60_000).is_none());
}

/// The member id the coordinator answers with is the member's from then on (a coordinator
/// that names members itself, as before KIP-1082); an answer naming none, or an empty one,
/// keeps the id the member had.
#[test]
fn the_coordinators_member_id_is_taken_and_an_empty_one_ignored() {
    let now: Millis = 0;
    let mut m = member();
    m.poll_request(now).unwrap();
    let mut named = answer(1, Some(vec![0]));
    named.member_id = Some("m-2".into());
    m.on_response(named, now, &View).unwrap();
    assert_eq!(m.group_metadata().member_id, "m-2");
    let request = m.poll_request(now + 500).expect("the next heartbeat");
    assert_eq!(request.member_id.as_str(), "m-2");
    let mut unnamed = answer(1, None);
    unnamed.member_id = Some("".into());
    m.on_response(unnamed, now + 500, &View).unwrap();
    assert_eq!(m.group_metadata().member_id, "m-2");
}

/// The driver is woken for the next heartbeat at the interval the coordinator gave, and not
/// while one is in flight (its answer sets the next).
#[test]
fn the_next_heartbeat_is_due_an_interval_after_the_last_answer() {
    let now: Millis = 1_000;
    let mut m = member_owning(now, vec![0]);
    assert_eq!(m.next_deadline(), Some(now + 500));
    m.poll_request(now + 500).expect("the heartbeat");
    assert_eq!(m.next_deadline(), None, "in flight");
}

/// The owned partitions go out grouped by topic: one entry per topic id with its partitions,
/// never one topic's partitions under another's id.
#[test]
fn owned_partitions_go_out_grouped_by_topic() {
    struct TwoTopics;
    impl TopicView for TwoTopics {
        fn partition_count(&self, _topic: &str) -> Option<i32> {
            Some(6)
        }
        fn topic_name(&self, topic_id: &[u8; 16]) -> Option<Arc<str>> {
            match topic_id[0] {
                1 => Some(Arc::from("t")),
                2 => Some(Arc::from("u")),
                _ => None,
            }
        }
    }
    const U: TopicId = [2; 16];
    let mut m = unsubscribed_member();
    m.subscribe(vec!["t".into(), "u".into()]);
    m.poll_request(0).unwrap();
    let mut assigned = answer(1, Some(vec![0, 1]));
    if let Some(topics) = assigned.assignment.as_mut() {
        topics.push(HeartbeatTopicPartitions {
            topic_id: U,
            partitions: vec![3],
        });
    }
    m.on_response(assigned, 0, &TwoTopics).unwrap();
    assert!(matches!(
        m.next_event(&TwoTopics),
        Some(MembershipEvent::Assigned(_))
    ));
    let ack = m.poll_request(0).unwrap();
    let owned: Vec<([u8; 16], Vec<i32>)> = ack
        .topic_partitions
        .expect("the new owned set")
        .iter()
        .map(|t| (*t.topic_id.as_bytes(), t.partitions.clone()))
        .collect();
    assert_eq!(owned, vec![(T, vec![0, 1]), (U, vec![3])]);
}
