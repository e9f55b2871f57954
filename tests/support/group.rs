//! A real consumer group member for the transaction tests: joins a group with the classic
//! JoinGroup/SyncGroup protocol and reads committed offsets with OffsetFetch, over a plain
//! blocking socket with the crate's codec, so a test knows the generation and member id the
//! group coordinator really assigned (KIP-447 fencing is checked against them).

use std::time::Duration;

use bytes::Bytes;
use exactly::__private::protocol::generated::{group_id as group, str_bytes, topic_name};
use exactly::ConsumerGroupMetadata;

use super::raw::RawConnection;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    FindCoordinatorRequest, JoinGroupRequest, OffsetFetchRequest, SyncGroupRequest,
};

/// MEMBER_ID_REQUIRED: the first JoinGroup (v4+) only hands out a member id (KIP-394).
const MEMBER_ID_REQUIRED: i16 = 79;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;

/// Versions every Kafka 3.x/4.x broker serves.
const FIND_COORDINATOR_VERSION: i16 = 4;
const JOIN_GROUP_VERSION: i16 = 5;
const SYNC_GROUP_VERSION: i16 = 3;
const OFFSET_FETCH_VERSION: i16 = 7;

/// A member of a consumer group, as the group coordinator knows it.
pub struct GroupMember {
    /// What the producer sends offsets with.
    pub metadata: ConsumerGroupMetadata,
    coordinator: RawConnection,
}

/// The consumer protocol's subscription (version 0): the topics, no user data.
fn subscription(topic: &str) -> Bytes {
    let mut out = Vec::new();
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    out.extend_from_slice(topic.as_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes());
    Bytes::from(out)
}

impl GroupMember {
    /// Joins `group_id` (subscribed to `topic`) through the broker at `bootstrap` and
    /// completes the rebalance as its only member.
    pub fn join(bootstrap: &str, group_id: &str, topic: &str) -> Self {
        let first = bootstrap.split(',').next().expect("a bootstrap address");
        let mut lookup = RawConnection::connect(first);
        // The first lookup of a fresh cluster creates __consumer_offsets and answers
        // COORDINATOR_NOT_AVAILABLE meanwhile: retry, bounded.
        let mut c = None;
        for _ in 0..60 {
            let response = lookup.call(
                // v4: the batched keys (KIP-699); key type 0 is a group.
                &FindCoordinatorRequest::default()
                    .with_key_type(0)
                    .with_coordinator_keys(vec![str_bytes(group_id)]),
                FIND_COORDINATOR_VERSION,
            );
            let found = response
                .coordinators
                .into_iter()
                .next()
                .expect("a coordinator entry");
            if found.error_code == 0 {
                c = Some(found);
                break;
            }
            assert!(
                found.error_code == COORDINATOR_NOT_AVAILABLE
                    || found.error_code == COORDINATOR_LOAD_IN_PROGRESS,
                "FindCoordinator for {group_id}: {found:?}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        let c = c.unwrap_or_else(|| panic!("no coordinator for {group_id} within 30 s"));
        let mut coordinator = RawConnection::connect(&format!("{}:{}", c.host, c.port));
        let mut join = JoinGroupRequest::default()
            .with_group_id(group(group_id))
            .with_session_timeout_ms(45_000)
            .with_rebalance_timeout_ms(30_000)
            .with_protocol_type(str_bytes("consumer"))
            .with_protocols(vec![
                JoinGroupRequestProtocol::default()
                    .with_name(str_bytes("range"))
                    .with_metadata(subscription(topic)),
            ]);
        let mut joined = coordinator.call(&join, JOIN_GROUP_VERSION);
        if joined.error_code == MEMBER_ID_REQUIRED {
            join.member_id = str_bytes(&joined.member_id);
            joined = coordinator.call(&join, JOIN_GROUP_VERSION);
        }
        assert_eq!(joined.error_code, 0, "JoinGroup: {joined:?}");
        let synced = coordinator.call(
            &SyncGroupRequest::default()
                .with_group_id(group(group_id))
                .with_generation_id(joined.generation_id)
                .with_member_id(str_bytes(&joined.member_id))
                .with_protocol_type(Some(str_bytes("consumer")))
                .with_protocol_name(joined.protocol_name.as_deref().map(str_bytes))
                // The only member leads and keeps everything; the assignment bytes are opaque
                // to the coordinator.
                .with_assignments(vec![
                    SyncGroupRequestAssignment::default()
                        .with_member_id(str_bytes(&joined.member_id))
                        .with_assignment(Bytes::new()),
                ]),
            SYNC_GROUP_VERSION,
        );
        assert_eq!(synced.error_code, 0, "SyncGroup: {synced:?}");
        Self {
            metadata: ConsumerGroupMetadata::new(
                group_id,
                joined.generation_id,
                joined.member_id,
                None,
            ),
            coordinator,
        }
    }

    /// The group's committed offset for `topic`-`partition` (-1 if none).
    pub fn committed(&mut self, topic: &str, partition: i32) -> i64 {
        // Built in the v8+ shape, as the consumer builds it: written at v7, the encoder moves
        // the one group to the top level, which the broker must read as it did.
        let response = self.coordinator.call(
            &OffsetFetchRequest::default().with_groups(vec![
                OffsetFetchRequestGroup::default()
                    .with_group_id(group(&self.metadata.group_id))
                    .with_topics(Some(vec![
                        OffsetFetchRequestTopics::default()
                            .with_name(topic_name(topic))
                            .with_partition_indexes(vec![partition]),
                    ])),
            ]),
            OFFSET_FETCH_VERSION,
        );
        assert_eq!(response.error_code, 0, "OffsetFetch: {response:?}");
        response
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .find(|p| p.partition_index == partition)
            .map_or(-1, |p| p.committed_offset)
    }
}
