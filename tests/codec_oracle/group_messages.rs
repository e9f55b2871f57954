//! The consumer-, group- and SASL-side messages against `kafka-protocol`: the responses of
//! ListOffsets, OffsetForLeaderEpoch, OffsetFetch, OffsetCommit, JoinGroup, SyncGroup, Heartbeat, LeaveGroup and
//! ConsumerGroupHeartbeat, SaslHandshake, SaslAuthenticate, GetTelemetrySubscriptions and
//! PushTelemetry (their requests are
//! `kafka-protocol`'s own, see `src/protocol/generated.rs`), and both directions of Fetch.
//!
//! For every version both implementations know, 100 seeded random values holding only the
//! fields that version has: ours encoded must decode with theirs to the same value field by
//! field, theirs encoded must decode with ours to the value we started from, and both
//! encodings must be the same bytes. Versions `kafka-protocol` 0.18 lacks (ListOffsets v0,
//! Fetch v0–3, OffsetFetch v0 and v10) are covered by the golden vectors in the modules' unit
//! tests.

use std::fmt::Debug;

use bytes::Bytes;
use exactly::__private::protocol::Message;
use exactly::__private::protocol::messages::consumer_group_heartbeat::{
    ConsumerGroupHeartbeatResponse, HeartbeatTopicPartitions,
};
use exactly::__private::protocol::messages::fetch::{
    AbortedTransaction, EpochEndOffset, FetchPartition, FetchPartitionResponse, FetchRequest,
    FetchResponse, FetchTopic, FetchTopicResponse, ForgottenTopic, ReplicaState, SnapshotId,
};
use exactly::__private::protocol::messages::heartbeat::HeartbeatResponse;
use exactly::__private::protocol::messages::join_group::{JoinGroupMember, JoinGroupResponse};
use exactly::__private::protocol::messages::leave_group::{
    LeaveGroupResponse, LeavingMemberResponse,
};
use exactly::__private::protocol::messages::list_offsets::{
    ListOffsetsPartitionResponse, ListOffsetsResponse, ListOffsetsTopicResponse,
};
use exactly::__private::protocol::messages::metadata::BrokerEndpoint;
use exactly::__private::protocol::messages::offset_commit::{
    OffsetCommitResponse, PartitionError, TopicPartitionErrors,
};
use exactly::__private::protocol::messages::offset_fetch::{
    OffsetFetchResponse, OffsetFetchResponseGroup, OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
};
use exactly::__private::protocol::messages::offset_for_leader_epoch::{
    EpochEndOffset as LeaderEpochEndOffset, OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
};
use exactly::__private::protocol::messages::produce::LeaderIdAndEpoch;
use exactly::__private::protocol::messages::sasl_authenticate::SaslAuthenticateResponse;
use exactly::__private::protocol::messages::sasl_handshake::SaslHandshakeResponse;
use exactly::__private::protocol::messages::sync_group::SyncGroupResponse;
use exactly::__private::protocol::messages::telemetry::{
    GetTelemetrySubscriptionsResponse, PushTelemetryResponse,
};
use kafka_protocol::messages as kp;
use kafka_protocol::protocol::{Decodable, Encodable, Message as KpMessage};
use rand::distr::{Distribution, StandardUniform};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::harness::{Theirs, all, assert_agree, group_id, nullable_sb, sb, topic_name, uuid};

// ---------------------------------------------------------------------------------------------
// The harness.

/// Builds a random value of one of our types holding only the fields `version` has; the
/// others keep their defaults, which are the schema's, as kafka-protocol's are.
trait Random {
    fn random(rng: &mut SmallRng, version: i16) -> Self;
}

/// Runs the differential test of `M` against kafka-protocol's `T` for every version both
/// implement, on 100 seeded random values per version.
fn check<M, T>()
where
    M: Message + Random + Theirs<T> + PartialEq + Debug,
    T: Encodable + Decodable + KpMessage + PartialEq + Debug,
{
    let name = std::any::type_name::<M>();
    let theirs = T::VERSIONS;
    let versions = M::MIN_VERSION.max(theirs.min)..=M::MAX_VERSION.min(theirs.max);
    assert!(!versions.is_empty(), "{name}: no common version");
    let type_seed = name
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b.into()));
    for version in versions {
        let mut rng = SmallRng::seed_from_u64(type_seed ^ version as u64);
        for _ in 0..100 {
            let ours = M::random(&mut rng, version);
            assert_agree(&ours, &ours.theirs(), version);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Random values of the primitives.

fn r<T>(rng: &mut SmallRng) -> T
where
    StandardUniform: Distribution<T>,
{
    rng.random()
}

/// A short ASCII string (possibly empty).
fn string(rng: &mut SmallRng) -> String {
    let len = rng.random_range(0..6);
    (0..len)
        .map(|_| char::from(rng.random_range(b'a'..=b'z')))
        .collect()
}

/// A short string or, one time in four, null.
fn nullable_string(rng: &mut SmallRng) -> Option<String> {
    rng.random_bool(0.75).then(|| string(rng))
}

fn bytes(rng: &mut SmallRng) -> Bytes {
    let len = rng.random_range(0..8);
    (0..len).map(|_| r::<u8>(rng)).collect()
}

/// Up to `max` elements.
fn list<T>(rng: &mut SmallRng, max: usize, mut element: impl FnMut(&mut SmallRng) -> T) -> Vec<T> {
    let len = rng.random_range(0..=max);
    (0..len).map(|_| element(rng)).collect()
}

/// A list or, one time in four, null.
fn nullable_list<T>(
    rng: &mut SmallRng,
    max: usize,
    element: impl FnMut(&mut SmallRng) -> T,
) -> Option<Vec<T>> {
    rng.random_bool(0.75).then(|| list(rng, max, element))
}

/// The default (so a tagged field is left out) or, half the time, a random value.
fn default_or<T: Default>(rng: &mut SmallRng, random: impl FnOnce(&mut SmallRng) -> T) -> T {
    if rng.random_bool(0.5) {
        random(rng)
    } else {
        T::default()
    }
}

fn list_of<X: Random>(rng: &mut SmallRng, version: i16, max: usize) -> Vec<X> {
    list(rng, max, |rng| X::random(rng, version))
}

// ---------------------------------------------------------------------------------------------
// ListOffsets.

impl Random for ListOffsetsPartitionResponse {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut p = Self {
            partition_index: r(rng),
            error_code: r(rng),
            ..Self::default()
        };
        if version == 0 {
            p.old_style_offsets = list(rng, 3, r);
        } else {
            p.timestamp = r(rng);
            p.offset = r(rng);
        }
        if version >= 4 {
            p.leader_epoch = r(rng);
        }
        p
    }
}

theirs!(
    ListOffsetsPartitionResponse => kp::list_offsets_response::ListOffsetsPartitionResponse,
    |p| {
        with_partition_index(p.partition_index),
        with_error_code(p.error_code),
        with_timestamp(p.timestamp),
        with_offset(p.offset),
        with_leader_epoch(p.leader_epoch),
    }
);

impl Random for ListOffsetsTopicResponse {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        Self {
            name: string(rng),
            partitions: list_of(rng, version, 3),
        }
    }
}

theirs!(ListOffsetsTopicResponse => kp::list_offsets_response::ListOffsetsTopicResponse, |t| {
    with_name(topic_name(&t.name)),
    with_partitions(all(&t.partitions)),
});

impl Random for ListOffsetsResponse {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut response = Self {
            topics: list_of(rng, version, 3),
            ..Self::default()
        };
        if version >= 2 {
            response.throttle_time_ms = r(rng);
        }
        response
    }
}

theirs!(ListOffsetsResponse => kp::ListOffsetsResponse, |v| {
    with_throttle_time_ms(v.throttle_time_ms),
    with_topics(all(&v.topics)),
});

#[test]
fn list_offsets_matches_kafka_protocol() {
    check::<ListOffsetsResponse, kp::ListOffsetsResponse>();
}

// ---------------------------------------------------------------------------------------------
// OffsetForLeaderEpoch.

impl Random for LeaderEpochEndOffset {
    fn random(rng: &mut SmallRng, _version: i16) -> Self {
        Self {
            error_code: r(rng),
            partition: r(rng),
            leader_epoch: r(rng),
            end_offset: r(rng),
        }
    }
}

theirs!(LeaderEpochEndOffset => kp::offset_for_leader_epoch_response::EpochEndOffset, |p| {
    with_error_code(p.error_code),
    with_partition(p.partition),
    with_leader_epoch(p.leader_epoch),
    with_end_offset(p.end_offset),
});

impl Random for OffsetForLeaderTopicResult {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        Self {
            topic: string(rng),
            partitions: list_of(rng, version, 3),
        }
    }
}

theirs!(
    OffsetForLeaderTopicResult => kp::offset_for_leader_epoch_response::OffsetForLeaderTopicResult,
    |t| {
        with_topic(topic_name(&t.topic)),
        with_partitions(all(&t.partitions)),
    }
);

impl Random for OffsetForLeaderEpochResponse {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        Self {
            throttle_time_ms: r(rng),
            topics: list_of(rng, version, 3),
        }
    }
}

theirs!(OffsetForLeaderEpochResponse => kp::OffsetForLeaderEpochResponse, |v| {
    with_throttle_time_ms(v.throttle_time_ms),
    with_topics(all(&v.topics)),
});

#[test]
fn offset_for_leader_epoch_matches_kafka_protocol() {
    check::<OffsetForLeaderEpochResponse, kp::OffsetForLeaderEpochResponse>();
}

// ---------------------------------------------------------------------------------------------
// Fetch.

/// Fetch names topics by id from v13 (KIP-516).
fn fetch_topic_ref(rng: &mut SmallRng, version: i16) -> (String, [u8; 16]) {
    if version >= 13 {
        (String::new(), r(rng))
    } else {
        (string(rng), [0; 16])
    }
}

impl Random for FetchPartition {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut p = Self {
            partition: r(rng),
            fetch_offset: r(rng),
            partition_max_bytes: r(rng),
            ..Self::default()
        };
        if version >= 9 {
            p.current_leader_epoch = r(rng);
        }
        if version >= 12 {
            p.last_fetched_epoch = r(rng);
        }
        if version >= 5 {
            p.log_start_offset = r(rng);
        }
        if version >= 17 {
            p.replica_directory_id = default_or(rng, r);
        }
        if version >= 18 && rng.random_bool(0.5) {
            p.high_watermark = r(rng);
        }
        p
    }
}

theirs!(FetchPartition => kp::fetch_request::FetchPartition, |p| {
    with_partition(p.partition),
    with_current_leader_epoch(p.current_leader_epoch),
    with_fetch_offset(p.fetch_offset),
    with_last_fetched_epoch(p.last_fetched_epoch),
    with_log_start_offset(p.log_start_offset),
    with_partition_max_bytes(p.partition_max_bytes),
    with_replica_directory_id(uuid(&p.replica_directory_id)),
    with_high_watermark(p.high_watermark),
});

impl Random for FetchTopic {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let (topic, topic_id) = fetch_topic_ref(rng, version);
        Self {
            topic,
            topic_id,
            partitions: list_of(rng, version, 3),
        }
    }
}

theirs!(FetchTopic => kp::fetch_request::FetchTopic, |t| {
    with_topic(topic_name(&t.topic)),
    with_topic_id(uuid(&t.topic_id)),
    with_partitions(all(&t.partitions)),
});

impl Random for ForgottenTopic {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let (topic, topic_id) = fetch_topic_ref(rng, version);
        Self {
            topic,
            topic_id,
            partitions: list(rng, 3, r),
        }
    }
}

theirs!(ForgottenTopic => kp::fetch_request::ForgottenTopic, |t| {
    with_topic(topic_name(&t.topic)),
    with_topic_id(uuid(&t.topic_id)),
    with_partitions(t.partitions.clone()),
});

theirs!(ReplicaState => kp::fetch_request::ReplicaState, |v| {
    with_replica_id(kp::BrokerId(v.replica_id)),
    with_replica_epoch(v.replica_epoch),
});

impl Random for FetchRequest {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut request = Self {
            max_wait_ms: r(rng),
            min_bytes: r(rng),
            topics: list_of(rng, version, 2),
            ..Self::default()
        };
        if version <= 14 {
            request.replica_id = r(rng);
        }
        if version >= 3 {
            request.max_bytes = r(rng);
        }
        if version >= 4 {
            request.isolation_level = r(rng);
        }
        if version >= 7 {
            request.session_id = r(rng);
            request.session_epoch = r(rng);
            request.forgotten_topics_data = list_of(rng, version, 2);
        }
        if version >= 11 {
            request.rack_id = string(rng);
        }
        if version >= 12 {
            request.cluster_id = nullable_string(rng);
        }
        if version >= 15 {
            request.replica_state = default_or(rng, |rng| ReplicaState {
                replica_id: r(rng),
                replica_epoch: r(rng),
            });
        }
        request
    }
}

theirs!(FetchRequest => kp::FetchRequest, |v| {
    with_cluster_id(nullable_sb(&v.cluster_id)),
    with_replica_id(kp::BrokerId(v.replica_id)),
    with_replica_state(v.replica_state.theirs()),
    with_max_wait_ms(v.max_wait_ms),
    with_min_bytes(v.min_bytes),
    with_max_bytes(v.max_bytes),
    with_isolation_level(v.isolation_level),
    with_session_id(v.session_id),
    with_session_epoch(v.session_epoch),
    with_topics(all(&v.topics)),
    with_forgotten_topics_data(all(&v.forgotten_topics_data)),
    with_rack_id(sb(&v.rack_id)),
});

theirs!(EpochEndOffset => kp::fetch_response::EpochEndOffset, |v| {
    with_epoch(v.epoch),
    with_end_offset(v.end_offset),
});

theirs!(SnapshotId => kp::fetch_response::SnapshotId, |v| {
    with_end_offset(v.end_offset),
    with_epoch(v.epoch),
});

theirs!(AbortedTransaction => kp::fetch_response::AbortedTransaction, |v| {
    with_producer_id(kp::ProducerId(v.producer_id)),
    with_first_offset(v.first_offset),
});

impl Random for FetchPartitionResponse {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut p = Self {
            partition_index: r(rng),
            error_code: r(rng),
            high_watermark: r(rng),
            records: rng.random_bool(0.75).then(|| bytes(rng)),
            ..Self::default()
        };
        if version >= 4 {
            p.last_stable_offset = r(rng);
            p.aborted_transactions = nullable_list(rng, 2, |rng| AbortedTransaction {
                producer_id: r(rng),
                first_offset: r(rng),
            });
        }
        if version >= 5 {
            p.log_start_offset = r(rng);
        }
        if version >= 11 {
            p.preferred_read_replica = r(rng);
        }
        if version >= 12 {
            p.diverging_epoch = default_or(rng, |rng| EpochEndOffset {
                epoch: r(rng),
                end_offset: r(rng),
            });
            p.current_leader = default_or(rng, |rng| LeaderIdAndEpoch {
                leader_id: r(rng),
                leader_epoch: r(rng),
            });
            p.snapshot_id = default_or(rng, |rng| SnapshotId {
                end_offset: r(rng),
                epoch: r(rng),
            });
        }
        p
    }
}

theirs!(FetchPartitionResponse => kp::fetch_response::PartitionData, |p| {
    with_partition_index(p.partition_index),
    with_error_code(p.error_code),
    with_high_watermark(p.high_watermark),
    with_last_stable_offset(p.last_stable_offset),
    with_log_start_offset(p.log_start_offset),
    with_diverging_epoch(p.diverging_epoch.theirs()),
    with_current_leader(p.current_leader.theirs()),
    with_snapshot_id(p.snapshot_id.theirs()),
    with_aborted_transactions(p.aborted_transactions.as_deref().map(all)),
    with_preferred_read_replica(kp::BrokerId(p.preferred_read_replica)),
    with_records(p.records.clone()),
});

impl Random for FetchTopicResponse {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let (topic, topic_id) = fetch_topic_ref(rng, version);
        Self {
            topic,
            topic_id,
            partitions: list_of(rng, version, 2),
        }
    }
}

theirs!(FetchTopicResponse => kp::fetch_response::FetchableTopicResponse, |t| {
    with_topic(topic_name(&t.topic)),
    with_topic_id(uuid(&t.topic_id)),
    with_partitions(all(&t.partitions)),
});

impl Random for FetchResponse {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut response = Self {
            responses: list_of(rng, version, 2),
            ..Self::default()
        };
        if version >= 1 {
            response.throttle_time_ms = r(rng);
        }
        if version >= 7 {
            response.error_code = r(rng);
            response.session_id = r(rng);
        }
        if version >= 16 {
            response.node_endpoints = list(rng, 2, |rng| BrokerEndpoint {
                node_id: r(rng),
                host: string(rng),
                port: r(rng),
                rack: nullable_string(rng),
            });
        }
        response
    }
}

theirs!(FetchResponse => kp::FetchResponse, |v| {
    with_throttle_time_ms(v.throttle_time_ms),
    with_error_code(v.error_code),
    with_session_id(v.session_id),
    with_responses(all(&v.responses)),
    with_node_endpoints(all(&v.node_endpoints)),
});

#[test]
fn fetch_matches_kafka_protocol() {
    check::<FetchRequest, kp::FetchRequest>();
    check::<FetchResponse, kp::FetchResponse>();
}

// ---------------------------------------------------------------------------------------------
// OffsetFetch.

impl Random for OffsetFetchResponsePartition {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut p = Self {
            partition_index: r(rng),
            committed_offset: r(rng),
            metadata: nullable_string(rng),
            error_code: r(rng),
            ..Self::default()
        };
        if version >= 5 {
            p.committed_leader_epoch = r(rng);
        }
        p
    }
}

// kafka-protocol has one partition type for v0–7 and another for the v8+ groups.
theirs!(
    OffsetFetchResponsePartition => kp::offset_fetch_response::OffsetFetchResponsePartition,
    |p| {
        with_partition_index(p.partition_index),
        with_committed_offset(p.committed_offset),
        with_committed_leader_epoch(p.committed_leader_epoch),
        with_metadata(nullable_sb(&p.metadata)),
        with_error_code(p.error_code),
    }
);

theirs!(
    OffsetFetchResponsePartition => kp::offset_fetch_response::OffsetFetchResponsePartitions,
    |p| {
        with_partition_index(p.partition_index),
        with_committed_offset(p.committed_offset),
        with_committed_leader_epoch(p.committed_leader_epoch),
        with_metadata(nullable_sb(&p.metadata)),
        with_error_code(p.error_code),
    }
);

impl Random for OffsetFetchResponseTopic {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut topic = Self {
            partitions: list_of(rng, version, 2),
            ..Self::default()
        };
        if version >= 10 {
            topic.topic_id = r(rng);
        } else {
            topic.name = string(rng);
        }
        topic
    }
}

theirs!(OffsetFetchResponseTopic => kp::offset_fetch_response::OffsetFetchResponseTopic, |t| {
    with_name(topic_name(&t.name)),
    with_partitions(all(&t.partitions)),
});

theirs!(OffsetFetchResponseTopic => kp::offset_fetch_response::OffsetFetchResponseTopics, |t| {
    with_name(topic_name(&t.name)),
    with_topic_id(uuid(&t.topic_id)),
    with_partitions(all(&t.partitions)),
});

impl Random for OffsetFetchResponseGroup {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        Self {
            group_id: string(rng),
            topics: list_of(rng, version, 2),
            error_code: r(rng),
        }
    }
}

theirs!(OffsetFetchResponseGroup => kp::offset_fetch_response::OffsetFetchResponseGroup, |g| {
    with_group_id(group_id(&g.group_id)),
    with_topics(all(&g.topics)),
    with_error_code(g.error_code),
});

impl Random for OffsetFetchResponse {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut response = Self::default();
        if version >= 3 {
            response.throttle_time_ms = r(rng);
        }
        if version <= 7 {
            response.topics = list_of(rng, version, 2);
            if version >= 2 {
                response.error_code = r(rng);
            }
        } else {
            response.groups = list_of(rng, version, 2);
        }
        response
    }
}

theirs!(OffsetFetchResponse => kp::OffsetFetchResponse, |v| {
    with_throttle_time_ms(v.throttle_time_ms),
    with_topics(all(&v.topics)),
    with_error_code(v.error_code),
    with_groups(all(&v.groups)),
});

#[test]
fn offset_fetch_matches_kafka_protocol() {
    check::<OffsetFetchResponse, kp::OffsetFetchResponse>();
}

// ---------------------------------------------------------------------------------------------
// JoinGroup.

impl Random for JoinGroupMember {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut member = Self {
            member_id: string(rng),
            metadata: bytes(rng),
            ..Self::default()
        };
        if version >= 5 {
            member.group_instance_id = nullable_string(rng);
        }
        member
    }
}

theirs!(JoinGroupMember => kp::join_group_response::JoinGroupResponseMember, |v| {
    with_member_id(sb(&v.member_id)),
    with_group_instance_id(nullable_sb(&v.group_instance_id)),
    with_metadata(v.metadata.clone()),
});

impl Random for JoinGroupResponse {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut response = Self {
            error_code: r(rng),
            generation_id: r(rng),
            leader: string(rng),
            member_id: string(rng),
            members: list_of(rng, version, 2),
            ..Self::default()
        };
        if version >= 2 {
            response.throttle_time_ms = r(rng);
        }
        if version >= 7 {
            response.protocol_type = nullable_string(rng);
            response.protocol_name = nullable_string(rng);
        } else {
            response.protocol_name = Some(string(rng));
        }
        if version >= 9 {
            response.skip_assignment = r(rng);
        }
        response
    }
}

theirs!(JoinGroupResponse => kp::JoinGroupResponse, |v| {
    with_throttle_time_ms(v.throttle_time_ms),
    with_error_code(v.error_code),
    with_generation_id(v.generation_id),
    with_protocol_type(nullable_sb(&v.protocol_type)),
    with_protocol_name(nullable_sb(&v.protocol_name)),
    with_leader(sb(&v.leader)),
    with_skip_assignment(v.skip_assignment),
    with_member_id(sb(&v.member_id)),
    with_members(all(&v.members)),
});

#[test]
fn join_group_matches_kafka_protocol() {
    check::<JoinGroupResponse, kp::JoinGroupResponse>();
}

// ---------------------------------------------------------------------------------------------
// SyncGroup.

impl Random for SyncGroupResponse {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut response = Self {
            error_code: r(rng),
            assignment: bytes(rng),
            ..Self::default()
        };
        if version >= 1 {
            response.throttle_time_ms = r(rng);
        }
        if version >= 5 {
            response.protocol_type = nullable_string(rng);
            response.protocol_name = nullable_string(rng);
        }
        response
    }
}

theirs!(SyncGroupResponse => kp::SyncGroupResponse, |v| {
    with_throttle_time_ms(v.throttle_time_ms),
    with_error_code(v.error_code),
    with_protocol_type(nullable_sb(&v.protocol_type)),
    with_protocol_name(nullable_sb(&v.protocol_name)),
    with_assignment(v.assignment.clone()),
});

#[test]
fn sync_group_matches_kafka_protocol() {
    check::<SyncGroupResponse, kp::SyncGroupResponse>();
}

// ---------------------------------------------------------------------------------------------
// Heartbeat.

impl Random for HeartbeatResponse {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut response = Self {
            error_code: r(rng),
            ..Self::default()
        };
        if version >= 1 {
            response.throttle_time_ms = r(rng);
        }
        response
    }
}

theirs!(HeartbeatResponse => kp::HeartbeatResponse, |v| {
    with_throttle_time_ms(v.throttle_time_ms),
    with_error_code(v.error_code),
});

#[test]
fn heartbeat_matches_kafka_protocol() {
    check::<HeartbeatResponse, kp::HeartbeatResponse>();
}

// ---------------------------------------------------------------------------------------------
// LeaveGroup.

theirs!(LeavingMemberResponse => kp::leave_group_response::MemberResponse, |v| {
    with_member_id(sb(&v.member_id)),
    with_group_instance_id(nullable_sb(&v.group_instance_id)),
    with_error_code(v.error_code),
});

impl Random for LeaveGroupResponse {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut response = Self {
            error_code: r(rng),
            ..Self::default()
        };
        if version >= 1 {
            response.throttle_time_ms = r(rng);
        }
        if version >= 3 {
            response.members = list(rng, 2, |rng| LeavingMemberResponse {
                member_id: string(rng),
                group_instance_id: nullable_string(rng),
                error_code: r(rng),
            });
        }
        response
    }
}

theirs!(LeaveGroupResponse => kp::LeaveGroupResponse, |v| {
    with_throttle_time_ms(v.throttle_time_ms),
    with_error_code(v.error_code),
    with_members(all(&v.members)),
});

#[test]
fn leave_group_matches_kafka_protocol() {
    check::<LeaveGroupResponse, kp::LeaveGroupResponse>();
}

// ---------------------------------------------------------------------------------------------
// SaslHandshake and SaslAuthenticate.

impl Random for SaslHandshakeResponse {
    fn random(rng: &mut SmallRng, _version: i16) -> Self {
        Self {
            error_code: r(rng),
            mechanisms: list(rng, 3, string),
        }
    }
}

theirs!(SaslHandshakeResponse => kp::SaslHandshakeResponse, |v| {
    with_error_code(v.error_code),
    with_mechanisms(v.mechanisms.iter().map(|m| sb(m)).collect()),
});

impl Random for SaslAuthenticateResponse {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut response = Self {
            error_code: r(rng),
            error_message: nullable_string(rng),
            auth_bytes: bytes(rng),
            ..Self::default()
        };
        if version >= 1 {
            response.session_lifetime_ms = r(rng);
        }
        response
    }
}

theirs!(SaslAuthenticateResponse => kp::SaslAuthenticateResponse, |v| {
    with_error_code(v.error_code),
    with_error_message(nullable_sb(&v.error_message)),
    with_auth_bytes(v.auth_bytes.clone()),
    with_session_lifetime_ms(v.session_lifetime_ms),
});

#[test]
fn sasl_matches_kafka_protocol() {
    check::<SaslHandshakeResponse, kp::SaslHandshakeResponse>();
    check::<SaslAuthenticateResponse, kp::SaslAuthenticateResponse>();
}

// ---------------------------------------------------------------------------------------------
// OffsetCommit.

impl Random for TopicPartitionErrors {
    fn random(rng: &mut SmallRng, _version: i16) -> Self {
        Self {
            name: string(rng),
            partitions: list(rng, 3, |rng| PartitionError {
                partition_index: r(rng),
                error_code: r(rng),
            }),
        }
    }
}

theirs!(TopicPartitionErrors => kp::offset_commit_response::OffsetCommitResponseTopic, |t| {
    with_name(topic_name(&t.name)),
    with_partitions(
        t.partitions
            .iter()
            .map(|p| {
                kp::offset_commit_response::OffsetCommitResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(p.error_code)
            })
            .collect()
    ),
});

impl Random for OffsetCommitResponse {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut response = Self {
            topics: list_of(rng, version, 2),
            ..Self::default()
        };
        if version >= 3 {
            response.throttle_time_ms = r(rng);
        }
        response
    }
}

theirs!(OffsetCommitResponse => kp::OffsetCommitResponse, |v| {
    with_throttle_time_ms(v.throttle_time_ms),
    with_topics(all(&v.topics)),
});

#[test]
fn offset_commit_matches_kafka_protocol() {
    check::<OffsetCommitResponse, kp::OffsetCommitResponse>();
}

// ---------------------------------------------------------------------------------------------
// ConsumerGroupHeartbeat.

impl Random for HeartbeatTopicPartitions {
    fn random(rng: &mut SmallRng, _version: i16) -> Self {
        Self {
            topic_id: r(rng),
            partitions: list(rng, 3, r),
        }
    }
}

theirs!(HeartbeatTopicPartitions => kp::consumer_group_heartbeat_response::TopicPartitions, |t| {
    with_topic_id(uuid(&t.topic_id)),
    with_partitions(t.partitions.clone()),
});

impl Random for ConsumerGroupHeartbeatResponse {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        Self {
            throttle_time_ms: r(rng),
            error_code: r(rng),
            error_message: nullable_string(rng),
            member_id: nullable_string(rng),
            member_epoch: r(rng),
            heartbeat_interval_ms: r(rng),
            assignment: nullable_list(rng, 2, |rng| HeartbeatTopicPartitions::random(rng, version)),
        }
    }
}

theirs!(ConsumerGroupHeartbeatResponse => kp::ConsumerGroupHeartbeatResponse, |v| {
    with_throttle_time_ms(v.throttle_time_ms),
    with_error_code(v.error_code),
    with_error_message(nullable_sb(&v.error_message)),
    with_member_id(nullable_sb(&v.member_id)),
    with_member_epoch(v.member_epoch),
    with_heartbeat_interval_ms(v.heartbeat_interval_ms),
    with_assignment(v.assignment.as_deref().map(|topics| {
        kp::consumer_group_heartbeat_response::Assignment::default()
            .with_topic_partitions(all(topics))
    })),
});

#[test]
fn consumer_group_heartbeat_matches_kafka_protocol() {
    check::<ConsumerGroupHeartbeatResponse, kp::ConsumerGroupHeartbeatResponse>();
}

impl Random for GetTelemetrySubscriptionsResponse {
    fn random(rng: &mut SmallRng, _version: i16) -> Self {
        Self {
            throttle_time_ms: r(rng),
            error_code: r(rng),
            client_instance_id: r(rng),
            subscription_id: r(rng),
            accepted_compression_types: list(rng, 4, r),
            push_interval_ms: r(rng),
            telemetry_max_bytes: r(rng),
            delta_temporality: r(rng),
            requested_metrics: list(rng, 3, string),
        }
    }
}

theirs!(GetTelemetrySubscriptionsResponse => kp::GetTelemetrySubscriptionsResponse, |v| {
    with_throttle_time_ms(v.throttle_time_ms),
    with_error_code(v.error_code),
    with_client_instance_id(uuid(&v.client_instance_id)),
    with_subscription_id(v.subscription_id),
    with_accepted_compression_types(v.accepted_compression_types.clone()),
    with_push_interval_ms(v.push_interval_ms),
    with_telemetry_max_bytes(v.telemetry_max_bytes),
    with_delta_temporality(v.delta_temporality),
    with_requested_metrics(v.requested_metrics.iter().map(|m| sb(m)).collect()),
});

impl Random for PushTelemetryResponse {
    fn random(rng: &mut SmallRng, _version: i16) -> Self {
        Self {
            throttle_time_ms: r(rng),
            error_code: r(rng),
        }
    }
}

theirs!(PushTelemetryResponse => kp::PushTelemetryResponse, |v| {
    with_throttle_time_ms(v.throttle_time_ms),
    with_error_code(v.error_code),
});

#[test]
fn telemetry_matches_kafka_protocol() {
    check::<GetTelemetrySubscriptionsResponse, kp::GetTelemetrySubscriptionsResponse>();
    check::<PushTelemetryResponse, kp::PushTelemetryResponse>();
}
