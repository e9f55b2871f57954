//! The group and consumer requests written with the generated messages: the golden bytes the
//! hand-written encoders were checked against, byte for byte, and the fields a version cannot
//! carry.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    BrokerId, ConsumerGroupHeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
    ListOffsetsRequest, OffsetCommitRequest, OffsetFetchRequest, OffsetForLeaderEpochRequest,
    SyncGroupRequest,
};

use super::tests::{assert_flexible_from, encoded};
use super::{group_id, str_bytes, topic_id, topic_name};
use crate::protocol::{ApiKey, Encode, EncodeError};

fn refused<R: Encode>(request: &R, version: i16) -> EncodeError {
    request
        .write_body(version, &mut BytesMut::new())
        .expect_err("a field the version cannot carry")
}

#[test]
fn flexible_versions_match_the_schemas() {
    assert_flexible_from::<JoinGroupRequest>();
    assert_flexible_from::<SyncGroupRequest>();
    assert_flexible_from::<LeaveGroupRequest>();
    assert_flexible_from::<ConsumerGroupHeartbeatRequest>();
    assert_flexible_from::<OffsetFetchRequest>();
    assert_flexible_from::<OffsetCommitRequest>();
    assert_flexible_from::<ListOffsetsRequest>();
    assert_flexible_from::<OffsetForLeaderEpochRequest>();
}

fn join() -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(group_id("g"))
        .with_session_timeout_ms(45_000)
        .with_rebalance_timeout_ms(300_000)
        .with_group_instance_id(Some(str_bytes("i")))
        .with_protocol_type(str_bytes("consumer"))
        .with_protocols(vec![
            JoinGroupRequestProtocol::default()
                .with_name(str_bytes("range"))
                .with_metadata(Bytes::from_static(&[0, 3])),
        ])
        .with_reason(Some(str_bytes("r")))
}

#[test]
fn join_group_golden_bytes() {
    #[rustfmt::skip]
    let v5 = [
        0x00, 0x01, b'g',                       // group_id
        0x00, 0x00, 0xaf, 0xc8,                 // session_timeout_ms 45000
        0x00, 0x04, 0x93, 0xe0,                 // rebalance_timeout_ms 300000 (v1+)
        0x00, 0x00,                             // member_id: empty
        0x00, 0x01, b'i',                       // group_instance_id (v5+)
        0x00, 0x08, b'c', b'o', b'n', b's', b'u', b'm', b'e', b'r', // protocol_type
        0x00, 0x00, 0x00, 0x01,                 // protocols: count 1
        0x00, 0x05, b'r', b'a', b'n', b'g', b'e', //   name
        0x00, 0x00, 0x00, 0x02, 0, 3,           //   metadata
    ];
    // The reason (v8+) is left out before v8, as it was.
    assert_eq!(encoded(&join(), 5), v5);
    #[rustfmt::skip]
    let v8 = [
        0x02, b'g',                             // group_id
        0x00, 0x00, 0xaf, 0xc8,                 // session_timeout_ms
        0x00, 0x04, 0x93, 0xe0,                 // rebalance_timeout_ms
        0x01,                                   // member_id: empty (compact 0 + 1)
        0x02, b'i',                             // group_instance_id
        0x09, b'c', b'o', b'n', b's', b'u', b'm', b'e', b'r', // protocol_type
        0x02,                                   // protocols: compact count 1 + 1
        0x06, b'r', b'a', b'n', b'g', b'e',     //   name
        0x03, 0, 3,                             //   metadata
        0x00,                                   //   protocol tagged fields
        0x02, b'r',                             // reason (v8+)
        0x00,                                   // tagged fields
    ];
    assert_eq!(encoded(&join(), 8), v8);
}

#[test]
fn join_group_v0_has_no_rebalance_timeout_and_no_static_member() {
    #[rustfmt::skip]
    let v0 = [
        0x00, 0x01, b'g',
        0x00, 0x00, 0xaf, 0xc8,
        0x00, 0x00,
        0x00, 0x08, b'c', b'o', b'n', b's', b'u', b'm', b'e', b'r',
        0x00, 0x00, 0x00, 0x00,                 // protocols: count 0
    ];
    let dynamic = join()
        .with_group_instance_id(None)
        .with_protocols(Vec::new());
    // The rebalance timeout (v1+) is left out at v0, not refused: the coordinator then uses
    // the session timeout, which is what v0 means.
    assert_eq!(encoded(&dynamic, 0), v0);
    assert_eq!(
        encoded(&dynamic.clone().with_rebalance_timeout_ms(-1), 0),
        v0
    );
    // A static member (KIP-345) cannot join below v5: refused, not joined as a dynamic one.
    let error = refused(&join(), 4);
    assert_eq!(
        (error.api_key, error.version),
        (ApiKey::JoinGroup as i16, 4)
    );
}

fn sync() -> SyncGroupRequest {
    SyncGroupRequest::default()
        .with_group_id(group_id("g"))
        .with_generation_id(2)
        .with_member_id(str_bytes("m"))
        .with_protocol_type(Some(str_bytes("consumer")))
        .with_protocol_name(Some(str_bytes("range")))
        .with_assignments(vec![
            SyncGroupRequestAssignment::default()
                .with_member_id(str_bytes("m"))
                .with_assignment(Bytes::from_static(&[0, 3])),
        ])
}

#[test]
fn sync_group_golden_bytes() {
    #[rustfmt::skip]
    let v3 = [
        0x00, 0x01, b'g',               // group_id
        0x00, 0x00, 0x00, 0x02,         // generation_id 2
        0x00, 0x01, b'm',               // member_id
        0xff, 0xff,                     // group_instance_id: null (v3+)
        0x00, 0x00, 0x00, 0x01,         // assignments: count 1
        0x00, 0x01, b'm',               //   member_id
        0x00, 0x00, 0x00, 0x02, 0, 3,   //   assignment: int32 length 2
    ];
    // The protocol type and name (v5+, KIP-559) are left out before v5, as they were.
    assert_eq!(encoded(&sync(), 3), v3);
    #[rustfmt::skip]
    let v5 = [
        0x02, b'g',                     // group_id
        0x00, 0x00, 0x00, 0x02,         // generation_id 2
        0x02, b'm',                     // member_id
        0x00,                           // group_instance_id: null
        0x09, b'c', b'o', b'n', b's', b'u', b'm', b'e', b'r', // protocol_type (v5+)
        0x06, b'r', b'a', b'n', b'g', b'e',                   // protocol_name (v5+)
        0x02,                           // assignments: compact count 1 + 1
        0x02, b'm',                     //   member_id
        0x03, 0, 3,                     //   assignment: compact length 2 + 1
        0x00,                           //   assignment tagged fields
        0x00,                           // tagged fields
    ];
    assert_eq!(encoded(&sync(), 5), v5);
    // A static member cannot sync below v3.
    let static_member = sync().with_group_instance_id(Some(str_bytes("i")));
    assert_eq!(refused(&static_member, 2).version, 2);
}

fn leave() -> LeaveGroupRequest {
    LeaveGroupRequest::default()
        .with_group_id(group_id("g"))
        .with_members(vec![
            MemberIdentity::default()
                .with_member_id(str_bytes("m"))
                .with_reason(Some(str_bytes("bye"))),
        ])
}

#[test]
fn leave_group_golden_bytes_in_every_shape() {
    // v0–2: the one member in `MemberId`, moved there from `Members`.
    assert_eq!(encoded(&leave(), 2), [0, 1, b'g', 0, 1, b'm']);
    assert_eq!(encoded(&leave(), 0), [0, 1, b'g', 0, 1, b'm']);
    #[rustfmt::skip]
    let v3 = [
        0x00, 0x01, b'g',           // group_id
        0x00, 0x00, 0x00, 0x01,     // members: int32 count 1
        0x00, 0x01, b'm',           //   member_id
        0xff, 0xff,                 //   group_instance_id: null
    ];
    // The reason (v5+, KIP-800) is left out before v5, as it was.
    assert_eq!(encoded(&leave(), 3), v3);
    #[rustfmt::skip]
    let v5 = [
        0x02, b'g',                 // group_id: compact string
        0x02,                       // members: compact count 1 + 1
        0x02, b'm',                 //   member_id
        0x00,                       //   group_instance_id: null (compact 0)
        0x04, b'b', b'y', b'e',     //   reason (v5+)
        0x00,                       //   member tagged fields
        0x00,                       // tagged fields
    ];
    assert_eq!(encoded(&leave(), 5), v5);
}

#[test]
fn leave_group_before_v3_refuses_what_it_cannot_name() {
    let static_member = LeaveGroupRequest::default()
        .with_group_id(group_id("g"))
        .with_members(vec![
            MemberIdentity::default().with_group_instance_id(Some(str_bytes("i"))),
        ]);
    assert_eq!(
        refused(&static_member, 2).api_key,
        ApiKey::LeaveGroup as i16
    );
    let mut two = leave();
    two.members
        .push(MemberIdentity::default().with_member_id(str_bytes("n")));
    assert_eq!(refused(&two, 1).version, 1);
    assert_eq!(encoded(&two, 3).len(), 3 + 4 + 2 * 5);
}

fn consumer_heartbeat() -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(group_id("g"))
        .with_member_id(str_bytes("m"))
        .with_rebalance_timeout_ms(300)
        .with_subscribed_topic_names(Some(vec![topic_name("t")]))
        .with_topic_partitions(Some(vec![
            TopicPartitions::default()
                .with_topic_id(topic_id(&[7; 16]))
                .with_partitions(vec![1]),
        ]))
}

#[test]
fn consumer_group_heartbeat_golden_bytes() {
    #[rustfmt::skip]
    let mut v0 = vec![
        0x02, b'g',                   // group_id "g"
        0x02, b'm',                   // member_id "m"
        0x00, 0x00, 0x00, 0x00,       // member_epoch 0 (join)
        0x00,                         // instance_id null
        0x00,                         // rack_id null
        0x00, 0x00, 0x01, 0x2c,       // rebalance_timeout_ms 300
        0x02, 0x02, b't',             // subscribed_topic_names ["t"]
        0x00,                         // server_assignor null
        0x02,                         // topic_partitions: compact 1+1
    ];
    v0.extend_from_slice(&[7; 16]); //   topic_id
    v0.extend_from_slice(&[0x02, 0, 0, 0, 1, 0x00]); // partitions [1], tagged fields
    v0.push(0x00); // tagged fields
    assert_eq!(encoded(&consumer_heartbeat(), 0), v0);
    // v1 adds subscribed_topic_regex (null here) after the topic names.
    let mut v1 = v0[..17].to_vec();
    v1.push(0x00);
    v1.extend_from_slice(&v0[17..]);
    assert_eq!(encoded(&consumer_heartbeat(), 1), v1);
    // A regex subscription (KIP-848's v1) cannot be sent at v0.
    let regex = consumer_heartbeat().with_subscribed_topic_regex(Some(str_bytes("t.*")));
    assert_eq!(refused(&regex, 0).version, 0);
}

fn fetch_group(topics: Option<Vec<OffsetFetchRequestTopics>>) -> OffsetFetchRequestGroup {
    OffsetFetchRequestGroup::default()
        .with_group_id(group_id("g"))
        .with_topics(topics)
}

fn fetch_topic() -> OffsetFetchRequestTopics {
    OffsetFetchRequestTopics::default()
        .with_name(topic_name("t"))
        .with_partition_indexes(vec![0, 1])
}

#[test]
fn offset_fetch_golden_bytes_of_one_group() {
    let request =
        OffsetFetchRequest::default().with_groups(vec![fetch_group(Some(vec![fetch_topic()]))]);
    #[rustfmt::skip]
    let v3 = [
        0x00, 0x01, b'g',               // group_id
        0x00, 0x00, 0x00, 0x01,         // topics: count 1
        0x00, 0x01, b't',               //   name
        0x00, 0x00, 0x00, 0x02,         //   partition_indexes: count 2
        0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x01,
    ];
    assert_eq!(encoded(&request, 3), v3);
    // v1 shares the layout (v0, ZooKeeper offsets, is not spoken: see generated.rs).
    assert_eq!(encoded(&request, 1), v3);
    // A null topic list (every topic) is -1 from v2 on; v1 cannot say it.
    let all = OffsetFetchRequest::default().with_groups(vec![fetch_group(None)]);
    assert_eq!(encoded(&all, 2), [0, 1, b'g', 0xff, 0xff, 0xff, 0xff]);
    assert_eq!(refused(&all, 1).version, 1);
    #[rustfmt::skip]
    let v7 = [
        0x02, b'g',                     // group_id
        0x00,                           // topics: null (compact 0)
        0x01,                           // require_stable (v7+)
        0x00,                           // tagged fields
    ];
    assert_eq!(encoded(&all.clone().with_require_stable(true), 7), v7);
    // KIP-447's require_stable cannot be asked for below v7: refused, not dropped.
    assert_eq!(refused(&all.with_require_stable(true), 6).version, 6);
}

#[test]
fn offset_fetch_v9_batched_golden_bytes() {
    let request = OffsetFetchRequest::default().with_groups(vec![
        fetch_group(Some(vec![fetch_topic()]))
            .with_member_id(Some(str_bytes("m")))
            .with_member_epoch(4),
    ]);
    #[rustfmt::skip]
    let v9 = [
        0x02,                           // groups: compact count 1 + 1
        0x02, b'g',                     //   group_id
        0x02, b'm',                     //   member_id (v9+)
        0x00, 0x00, 0x00, 0x04,         //   member_epoch (v9+)
        0x02,                           //   topics: compact count 1 + 1
        0x02, b't',                     //     name
        0x03,                           //     partition_indexes: compact count 2 + 1
        0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x01,
        0x00,                           //     topic tagged fields
        0x00,                           //   group tagged fields
        0x00,                           // require_stable
        0x00,                           // tagged fields
    ];
    assert_eq!(encoded(&request, 9), v9);
    // Two groups need v8 (KIP-709).
    let mut two = request;
    two.groups.push(fetch_group(None));
    assert_eq!(refused(&two, 7).version, 7);
}

fn commit() -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(group_id("g"))
        .with_generation_id_or_member_epoch(5)
        .with_member_id(str_bytes("m"))
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name(topic_name("t"))
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(1)
                        .with_committed_offset(10)
                        .with_committed_metadata(None),
                ]),
        ])
}

#[test]
fn offset_commit_golden_bytes() {
    #[rustfmt::skip]
    let v2 = [
        0x00, 0x01, b'g',             // group_id
        0x00, 0x00, 0x00, 0x05,       // generation 5
        0x00, 0x01, b'm',             // member_id
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // retention -1
        0x00, 0x00, 0x00, 0x01,       // topics: 1
        0x00, 0x01, b't',             //   name
        0x00, 0x00, 0x00, 0x01,       //   partitions: 1
        0x00, 0x00, 0x00, 0x01,       //     partition 1
        0, 0, 0, 0, 0, 0, 0, 10,      //     offset 10
        0xff, 0xff,                   //     metadata null
    ];
    assert_eq!(encoded(&commit(), 2), v2);
    #[rustfmt::skip]
    let v9 = [
        0x02, b'g',                   // group_id
        0x00, 0x00, 0x00, 0x05,       // member epoch 5
        0x02, b'm',                   // member_id
        0x00,                         // group_instance_id null
        0x02,                         // topics: compact 1+1
        0x02, b't',                   //   name
        0x02,                         //   partitions: compact 1+1
        0x00, 0x00, 0x00, 0x01,       //     partition 1
        0, 0, 0, 0, 0, 0, 0, 10,      //     offset 10
        0xff, 0xff, 0xff, 0xff,       //     leader epoch -1
        0x00,                         //     metadata null
        0x00, 0x00, 0x00,             //   tagged fields: partition, topic, request
    ];
    assert_eq!(encoded(&commit(), 9), v9);
    // A static member's commit needs v7 (KIP-345).
    let static_member = commit().with_group_instance_id(Some(str_bytes("i")));
    assert_eq!(refused(&static_member, 6).version, 6);
}

fn list_offsets() -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(1)
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(topic_name("t"))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(2)
                        .with_current_leader_epoch(5)
                        .with_timestamp(-1),
                ]),
        ])
        .with_timeout_ms(1000)
}

#[test]
fn list_offsets_golden_bytes() {
    #[rustfmt::skip]
    let v5 = [
        0xff, 0xff, 0xff, 0xff,                         // replica_id -1
        0x01,                                           // isolation_level (v2+)
        0x00, 0x00, 0x00, 0x01,                         // topics: count 1
        0x00, 0x01, b't',                               //   name
        0x00, 0x00, 0x00, 0x01,                         //   partitions: count 1
        0x00, 0x00, 0x00, 0x02,                         //     partition_index
        0x00, 0x00, 0x00, 0x05,                         //     current_leader_epoch (v4+)
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, //     timestamp -1 (latest)
    ];
    // The timeout (v10+, KIP-1075) is left out before v10, as it was.
    assert_eq!(encoded(&list_offsets(), 5), v5);
    #[rustfmt::skip]
    let v10 = [
        0xff, 0xff, 0xff, 0xff,                         // replica_id -1
        0x01,                                           // isolation_level
        0x02,                                           // topics: compact count 1 + 1
        0x02, b't',                                     //   name
        0x02,                                           //   partitions: compact count
        0x00, 0x00, 0x00, 0x02,                         //     partition_index
        0x00, 0x00, 0x00, 0x05,                         //     current_leader_epoch
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, //     timestamp -1
        0x00,                                           //     partition tagged fields
        0x00,                                           //   topic tagged fields
        0x00, 0x00, 0x03, 0xe8,                         // timeout_ms 1000 (v10+)
        0x00,                                           // tagged fields
    ];
    assert_eq!(encoded(&list_offsets(), 10), v10);
    // read_committed (KIP-98) needs v2: refused at v1, not read uncommitted.
    assert_eq!(refused(&list_offsets(), 1).version, 1);
    let uncommitted = list_offsets().with_isolation_level(0);
    assert_eq!(encoded(&uncommitted, 1).len(), 4 + 4 + 3 + 4 + 4 + 8);
}

#[test]
fn offset_for_leader_epoch_golden_bytes() {
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![
            OffsetForLeaderTopic::default()
                .with_topic(topic_name("t"))
                .with_partitions(vec![
                    OffsetForLeaderPartition::default()
                        .with_partition(2)
                        .with_current_leader_epoch(6)
                        .with_leader_epoch(5),
                ]),
        ]);
    #[rustfmt::skip]
    let v3 = [
        0xff, 0xff, 0xff, 0xff,       // replica_id -1: a consumer (v3+, KIP-320)
        0x00, 0x00, 0x00, 0x01,       // topics: count 1
        0x00, 0x01, b't',             //   topic
        0x00, 0x00, 0x00, 0x01,       //   partitions: count 1
        0x00, 0x00, 0x00, 0x02,       //     partition
        0x00, 0x00, 0x00, 0x06,       //     current_leader_epoch
        0x00, 0x00, 0x00, 0x05,       //     leader_epoch
    ];
    assert_eq!(encoded(&request, 3), v3);
    #[rustfmt::skip]
    let v4 = [
        0xff, 0xff, 0xff, 0xff,       // replica_id -1
        0x02,                         // topics: compact count 1 + 1
        0x02, b't',                   //   topic
        0x02,                         //   partitions
        0x00, 0x00, 0x00, 0x02,       //     partition
        0x00, 0x00, 0x00, 0x06,       //     current_leader_epoch
        0x00, 0x00, 0x00, 0x05,       //     leader_epoch
        0x00, 0x00, 0x00,             //   tagged fields: partition, topic, request
    ];
    assert_eq!(encoded(&request, 4), v4);
}
