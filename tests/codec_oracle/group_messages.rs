//! The consumer-, group- and SASL-side messages (ListOffsets, Fetch, OffsetFetch, JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup, SaslHandshake, SaslAuthenticate) against `kafka-protocol`.
//!
//! For every version both implementations know, 100 seeded random values holding only the
//! fields that version has: ours encoded must decode with theirs to the same value field by
//! field, theirs encoded must decode with ours to the value we started from, and both
//! encodings must be the same bytes. Versions `kafka-protocol` 0.18 lacks (ListOffsets v0,
//! Fetch v0–3, OffsetFetch v0, OffsetFetchRequest v10) are covered by the golden vectors in
//! the modules' unit tests.

use std::fmt::Debug;
use std::str::FromStr;

use bytes::{Bytes, BytesMut};
use exactly::protocol::messages::fetch::{
    AbortedTransaction, EpochEndOffset, FetchPartition, FetchPartitionResponse, FetchRequest,
    FetchResponse, FetchTopic, FetchTopicResponse, ForgottenTopic, LeaderIdAndEpoch, NodeEndpoint,
    ReplicaState, SnapshotId,
};
use exactly::protocol::messages::heartbeat::{HeartbeatRequest, HeartbeatResponse};
use exactly::protocol::messages::join_group::{
    JoinGroupMember, JoinGroupProtocol, JoinGroupRequest, JoinGroupResponse,
};
use exactly::protocol::messages::leave_group::{
    LeaveGroupRequest, LeaveGroupResponse, LeavingMember, LeavingMemberResponse,
};
use exactly::protocol::messages::list_offsets::{
    ListOffsetsPartition, ListOffsetsPartitionResponse, ListOffsetsRequest, ListOffsetsResponse,
    ListOffsetsTopic, ListOffsetsTopicResponse,
};
use exactly::protocol::messages::offset_fetch::{
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchResponse,
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use exactly::protocol::messages::sasl_authenticate::{
    SaslAuthenticateRequest, SaslAuthenticateResponse,
};
use exactly::protocol::messages::sasl_handshake::{SaslHandshakeRequest, SaslHandshakeResponse};
use exactly::protocol::messages::sync_group::{
    SyncGroupAssignment, SyncGroupRequest, SyncGroupResponse,
};
use exactly::protocol::{Decoder, Message};
use kafka_protocol::messages as kp;
use kafka_protocol::protocol::{Decodable, Encodable, Message as KpMessage, StrBytes};
use rand::distr::{Distribution, StandardUniform};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

// ---------------------------------------------------------------------------------------------
// The harness.

/// Builds a random value of one of our types holding only the fields `version` has; the
/// others keep their defaults, which are the schema's, as kafka-protocol's are.
trait Random {
    fn random(rng: &mut SmallRng, version: i16) -> Self;
}

/// The same value as kafka-protocol's type, field by field.
trait Theirs {
    type T: PartialEq + Debug;
    fn theirs(&self) -> Self::T;
}

/// Runs the differential test of `M` for every version both sides implement.
fn check<M>()
where
    M: Message + Random + Theirs + PartialEq + Debug,
    M::T: Encodable + Decodable + KpMessage,
{
    let name = std::any::type_name::<M>();
    let theirs = <M::T as KpMessage>::VERSIONS;
    let versions = M::MIN_VERSION.max(theirs.min)..=M::MAX_VERSION.min(theirs.max);
    assert!(!versions.is_empty(), "{name}: no common version");
    let type_seed = name
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b.into()));
    for version in versions {
        let mut rng = SmallRng::seed_from_u64(type_seed ^ version as u64);
        for case in 0..100 {
            let what = format!("{name} v{version} case {case}");
            let ours = M::random(&mut rng, version);
            let expected = ours.theirs();

            let mut ours_bytes = Vec::new();
            ours.encode(version, &mut ours_bytes);
            let mut rest = &ours_bytes[..];
            let decoded = M::T::decode(&mut rest, version)
                .unwrap_or_else(|e| panic!("{what}: theirs cannot decode ours: {e}"));
            assert!(rest.is_empty(), "{what}: theirs left {} bytes", rest.len());
            assert_eq!(decoded, expected, "{what}: ours decoded by theirs");

            let mut theirs_bytes = BytesMut::new();
            expected
                .encode(&mut theirs_bytes, version)
                .unwrap_or_else(|e| panic!("{what}: theirs cannot encode: {e}"));
            let mut d = Decoder::new(&theirs_bytes);
            let back = M::decode(&mut d, version)
                .unwrap_or_else(|e| panic!("{what}: ours cannot decode theirs: {e}"));
            d.finish("oracle").unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(back, ours, "{what}: theirs decoded by ours");
            assert_eq!(theirs_bytes[..], ours_bytes[..], "{what}: encodings differ");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Random values and conversions of the primitives.

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

fn all<X: Theirs>(items: &[X]) -> Vec<X::T> {
    items.iter().map(Theirs::theirs).collect()
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn nullable_sb(s: &Option<String>) -> Option<StrBytes> {
    s.as_deref().map(sb)
}

fn topic_name(s: &str) -> kp::TopicName {
    kp::TopicName(sb(s))
}

fn group_id(s: &str) -> kp::GroupId {
    kp::GroupId(sb(s))
}

/// kafka-protocol's UUID type (from the `uuid` crate, which is not our dependency), built from
/// its hyphen-less hex form.
fn uuid<U: FromStr<Err: Debug>>(id: &[u8; 16]) -> U {
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    hex.parse().expect("32 hex digits are a UUID")
}

// ---------------------------------------------------------------------------------------------
// ListOffsets.

impl Random for ListOffsetsPartition {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut p = Self {
            partition_index: r(rng),
            timestamp: r(rng),
            ..Self::default()
        };
        if version >= 4 {
            p.current_leader_epoch = r(rng);
        }
        if version == 0 {
            p.max_num_offsets = r(rng);
        }
        p
    }
}

impl Theirs for ListOffsetsPartition {
    type T = kp::list_offsets_request::ListOffsetsPartition;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_partition_index(self.partition_index)
            .with_current_leader_epoch(self.current_leader_epoch)
            .with_timestamp(self.timestamp)
    }
}

impl Random for ListOffsetsTopic {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        Self {
            name: string(rng),
            partitions: list_of(rng, version, 3),
        }
    }
}

impl Theirs for ListOffsetsTopic {
    type T = kp::list_offsets_request::ListOffsetsTopic;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_name(topic_name(&self.name))
            .with_partitions(all(&self.partitions))
    }
}

impl Random for ListOffsetsRequest {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut request = Self {
            replica_id: r(rng),
            topics: list_of(rng, version, 3),
            ..Self::default()
        };
        if version >= 2 {
            request.isolation_level = r(rng);
        }
        if version >= 10 {
            request.timeout_ms = r(rng);
        }
        request
    }
}

impl Theirs for ListOffsetsRequest {
    type T = kp::ListOffsetsRequest;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_replica_id(kp::BrokerId(self.replica_id))
            .with_isolation_level(self.isolation_level)
            .with_topics(all(&self.topics))
            .with_timeout_ms(self.timeout_ms)
    }
}

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

impl Theirs for ListOffsetsPartitionResponse {
    type T = kp::list_offsets_response::ListOffsetsPartitionResponse;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_partition_index(self.partition_index)
            .with_error_code(self.error_code)
            .with_timestamp(self.timestamp)
            .with_offset(self.offset)
            .with_leader_epoch(self.leader_epoch)
    }
}

impl Random for ListOffsetsTopicResponse {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        Self {
            name: string(rng),
            partitions: list_of(rng, version, 3),
        }
    }
}

impl Theirs for ListOffsetsTopicResponse {
    type T = kp::list_offsets_response::ListOffsetsTopicResponse;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_name(topic_name(&self.name))
            .with_partitions(all(&self.partitions))
    }
}

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

impl Theirs for ListOffsetsResponse {
    type T = kp::ListOffsetsResponse;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_throttle_time_ms(self.throttle_time_ms)
            .with_topics(all(&self.topics))
    }
}

#[test]
fn list_offsets_matches_kafka_protocol() {
    check::<ListOffsetsRequest>();
    check::<ListOffsetsResponse>();
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

impl Theirs for FetchPartition {
    type T = kp::fetch_request::FetchPartition;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_partition(self.partition)
            .with_current_leader_epoch(self.current_leader_epoch)
            .with_fetch_offset(self.fetch_offset)
            .with_last_fetched_epoch(self.last_fetched_epoch)
            .with_log_start_offset(self.log_start_offset)
            .with_partition_max_bytes(self.partition_max_bytes)
            .with_replica_directory_id(uuid(&self.replica_directory_id))
            .with_high_watermark(self.high_watermark)
    }
}

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

impl Theirs for FetchTopic {
    type T = kp::fetch_request::FetchTopic;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_topic(topic_name(&self.topic))
            .with_topic_id(uuid(&self.topic_id))
            .with_partitions(all(&self.partitions))
    }
}

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

impl Theirs for ForgottenTopic {
    type T = kp::fetch_request::ForgottenTopic;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_topic(topic_name(&self.topic))
            .with_topic_id(uuid(&self.topic_id))
            .with_partitions(self.partitions.clone())
    }
}

impl Theirs for ReplicaState {
    type T = kp::fetch_request::ReplicaState;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_replica_id(kp::BrokerId(self.replica_id))
            .with_replica_epoch(self.replica_epoch)
    }
}

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

impl Theirs for FetchRequest {
    type T = kp::FetchRequest;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_cluster_id(nullable_sb(&self.cluster_id))
            .with_replica_id(kp::BrokerId(self.replica_id))
            .with_replica_state(self.replica_state.theirs())
            .with_max_wait_ms(self.max_wait_ms)
            .with_min_bytes(self.min_bytes)
            .with_max_bytes(self.max_bytes)
            .with_isolation_level(self.isolation_level)
            .with_session_id(self.session_id)
            .with_session_epoch(self.session_epoch)
            .with_topics(all(&self.topics))
            .with_forgotten_topics_data(all(&self.forgotten_topics_data))
            .with_rack_id(sb(&self.rack_id))
    }
}

impl Theirs for EpochEndOffset {
    type T = kp::fetch_response::EpochEndOffset;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_epoch(self.epoch)
            .with_end_offset(self.end_offset)
    }
}

impl Theirs for LeaderIdAndEpoch {
    type T = kp::fetch_response::LeaderIdAndEpoch;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_leader_id(kp::BrokerId(self.leader_id))
            .with_leader_epoch(self.leader_epoch)
    }
}

impl Theirs for SnapshotId {
    type T = kp::fetch_response::SnapshotId;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_end_offset(self.end_offset)
            .with_epoch(self.epoch)
    }
}

impl Theirs for AbortedTransaction {
    type T = kp::fetch_response::AbortedTransaction;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_producer_id(kp::ProducerId(self.producer_id))
            .with_first_offset(self.first_offset)
    }
}

impl Theirs for NodeEndpoint {
    type T = kp::fetch_response::NodeEndpoint;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_node_id(kp::BrokerId(self.node_id))
            .with_host(sb(&self.host))
            .with_port(self.port)
            .with_rack(nullable_sb(&self.rack))
    }
}

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

impl Theirs for FetchPartitionResponse {
    type T = kp::fetch_response::PartitionData;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_partition_index(self.partition_index)
            .with_error_code(self.error_code)
            .with_high_watermark(self.high_watermark)
            .with_last_stable_offset(self.last_stable_offset)
            .with_log_start_offset(self.log_start_offset)
            .with_diverging_epoch(self.diverging_epoch.theirs())
            .with_current_leader(self.current_leader.theirs())
            .with_snapshot_id(self.snapshot_id.theirs())
            .with_aborted_transactions(self.aborted_transactions.as_deref().map(all))
            .with_preferred_read_replica(kp::BrokerId(self.preferred_read_replica))
            .with_records(self.records.clone())
    }
}

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

impl Theirs for FetchTopicResponse {
    type T = kp::fetch_response::FetchableTopicResponse;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_topic(topic_name(&self.topic))
            .with_topic_id(uuid(&self.topic_id))
            .with_partitions(all(&self.partitions))
    }
}

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
            response.node_endpoints = list(rng, 2, |rng| NodeEndpoint {
                node_id: r(rng),
                host: string(rng),
                port: r(rng),
                rack: nullable_string(rng),
            });
        }
        response
    }
}

impl Theirs for FetchResponse {
    type T = kp::FetchResponse;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_throttle_time_ms(self.throttle_time_ms)
            .with_error_code(self.error_code)
            .with_session_id(self.session_id)
            .with_responses(all(&self.responses))
            .with_node_endpoints(all(&self.node_endpoints))
    }
}

#[test]
fn fetch_matches_kafka_protocol() {
    check::<FetchRequest>();
    check::<FetchResponse>();
}

// ---------------------------------------------------------------------------------------------
// OffsetFetch.

impl Random for OffsetFetchRequestTopic {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut topic = Self {
            partition_indexes: list(rng, 3, r),
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

/// kafka-protocol has one topic type for v0–7 and another for the v8+ groups.
impl Theirs for OffsetFetchRequestTopic {
    type T = kp::offset_fetch_request::OffsetFetchRequestTopic;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_name(topic_name(&self.name))
            .with_partition_indexes(self.partition_indexes.clone())
    }
}

fn offset_fetch_group_topic(
    topic: &OffsetFetchRequestTopic,
) -> kp::offset_fetch_request::OffsetFetchRequestTopics {
    kp::offset_fetch_request::OffsetFetchRequestTopics::default()
        .with_name(topic_name(&topic.name))
        .with_topic_id(uuid(&topic.topic_id))
        .with_partition_indexes(topic.partition_indexes.clone())
}

impl Random for OffsetFetchRequestGroup {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut group = Self {
            group_id: string(rng),
            topics: nullable_list(rng, 2, |rng| OffsetFetchRequestTopic::random(rng, version)),
            ..Self::default()
        };
        if version >= 9 {
            group.member_id = nullable_string(rng);
            group.member_epoch = r(rng);
        }
        group
    }
}

impl Theirs for OffsetFetchRequestGroup {
    type T = kp::offset_fetch_request::OffsetFetchRequestGroup;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_group_id(group_id(&self.group_id))
            .with_member_id(nullable_sb(&self.member_id))
            .with_member_epoch(self.member_epoch)
            .with_topics(
                self.topics
                    .as_ref()
                    .map(|topics| topics.iter().map(offset_fetch_group_topic).collect()),
            )
    }
}

impl Random for OffsetFetchRequest {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut request = Self::default();
        if version <= 7 {
            request.group_id = string(rng);
            let topic = |rng: &mut SmallRng| OffsetFetchRequestTopic::random(rng, version);
            request.topics = if version >= 2 {
                nullable_list(rng, 2, topic)
            } else {
                Some(list(rng, 2, topic))
            };
        } else {
            request.groups = list_of(rng, version, 2);
        }
        if version >= 7 {
            request.require_stable = r(rng);
        }
        request
    }
}

impl Theirs for OffsetFetchRequest {
    type T = kp::OffsetFetchRequest;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_group_id(group_id(&self.group_id))
            .with_topics(self.topics.as_deref().map(all))
            .with_groups(all(&self.groups))
            .with_require_stable(self.require_stable)
    }
}

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

/// kafka-protocol has one partition type for v0–7 and another for the v8+ groups.
impl Theirs for OffsetFetchResponsePartition {
    type T = kp::offset_fetch_response::OffsetFetchResponsePartition;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_partition_index(self.partition_index)
            .with_committed_offset(self.committed_offset)
            .with_committed_leader_epoch(self.committed_leader_epoch)
            .with_metadata(nullable_sb(&self.metadata))
            .with_error_code(self.error_code)
    }
}

fn offset_fetch_group_partition(
    p: &OffsetFetchResponsePartition,
) -> kp::offset_fetch_response::OffsetFetchResponsePartitions {
    kp::offset_fetch_response::OffsetFetchResponsePartitions::default()
        .with_partition_index(p.partition_index)
        .with_committed_offset(p.committed_offset)
        .with_committed_leader_epoch(p.committed_leader_epoch)
        .with_metadata(nullable_sb(&p.metadata))
        .with_error_code(p.error_code)
}

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

impl Theirs for OffsetFetchResponseTopic {
    type T = kp::offset_fetch_response::OffsetFetchResponseTopic;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_name(topic_name(&self.name))
            .with_partitions(all(&self.partitions))
    }
}

fn offset_fetch_group_topic_response(
    topic: &OffsetFetchResponseTopic,
) -> kp::offset_fetch_response::OffsetFetchResponseTopics {
    kp::offset_fetch_response::OffsetFetchResponseTopics::default()
        .with_name(topic_name(&topic.name))
        .with_topic_id(uuid(&topic.topic_id))
        .with_partitions(
            topic
                .partitions
                .iter()
                .map(offset_fetch_group_partition)
                .collect(),
        )
}

impl Random for OffsetFetchResponseGroup {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        Self {
            group_id: string(rng),
            topics: list_of(rng, version, 2),
            error_code: r(rng),
        }
    }
}

impl Theirs for OffsetFetchResponseGroup {
    type T = kp::offset_fetch_response::OffsetFetchResponseGroup;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_group_id(group_id(&self.group_id))
            .with_topics(
                self.topics
                    .iter()
                    .map(offset_fetch_group_topic_response)
                    .collect(),
            )
            .with_error_code(self.error_code)
    }
}

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

impl Theirs for OffsetFetchResponse {
    type T = kp::OffsetFetchResponse;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_throttle_time_ms(self.throttle_time_ms)
            .with_topics(all(&self.topics))
            .with_error_code(self.error_code)
            .with_groups(all(&self.groups))
    }
}

#[test]
fn offset_fetch_matches_kafka_protocol() {
    check::<OffsetFetchRequest>();
    check::<OffsetFetchResponse>();
}

// ---------------------------------------------------------------------------------------------
// JoinGroup.

impl Theirs for JoinGroupProtocol {
    type T = kp::join_group_request::JoinGroupRequestProtocol;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_name(sb(&self.name))
            .with_metadata(self.metadata.clone())
    }
}

impl Random for JoinGroupRequest {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut request = Self {
            group_id: string(rng),
            session_timeout_ms: r(rng),
            member_id: string(rng),
            protocol_type: string(rng),
            protocols: list(rng, 2, |rng| JoinGroupProtocol {
                name: string(rng),
                metadata: bytes(rng),
            }),
            ..Self::default()
        };
        if version >= 1 {
            request.rebalance_timeout_ms = r(rng);
        }
        if version >= 5 {
            request.group_instance_id = nullable_string(rng);
        }
        if version >= 8 {
            request.reason = nullable_string(rng);
        }
        request
    }
}

impl Theirs for JoinGroupRequest {
    type T = kp::JoinGroupRequest;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_group_id(group_id(&self.group_id))
            .with_session_timeout_ms(self.session_timeout_ms)
            .with_rebalance_timeout_ms(self.rebalance_timeout_ms)
            .with_member_id(sb(&self.member_id))
            .with_group_instance_id(nullable_sb(&self.group_instance_id))
            .with_protocol_type(sb(&self.protocol_type))
            .with_protocols(all(&self.protocols))
            .with_reason(nullable_sb(&self.reason))
    }
}

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

impl Theirs for JoinGroupMember {
    type T = kp::join_group_response::JoinGroupResponseMember;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_member_id(sb(&self.member_id))
            .with_group_instance_id(nullable_sb(&self.group_instance_id))
            .with_metadata(self.metadata.clone())
    }
}

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

impl Theirs for JoinGroupResponse {
    type T = kp::JoinGroupResponse;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_throttle_time_ms(self.throttle_time_ms)
            .with_error_code(self.error_code)
            .with_generation_id(self.generation_id)
            .with_protocol_type(nullable_sb(&self.protocol_type))
            .with_protocol_name(nullable_sb(&self.protocol_name))
            .with_leader(sb(&self.leader))
            .with_skip_assignment(self.skip_assignment)
            .with_member_id(sb(&self.member_id))
            .with_members(all(&self.members))
    }
}

#[test]
fn join_group_matches_kafka_protocol() {
    check::<JoinGroupRequest>();
    check::<JoinGroupResponse>();
}

// ---------------------------------------------------------------------------------------------
// SyncGroup.

impl Theirs for SyncGroupAssignment {
    type T = kp::sync_group_request::SyncGroupRequestAssignment;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_member_id(sb(&self.member_id))
            .with_assignment(self.assignment.clone())
    }
}

impl Random for SyncGroupRequest {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut request = Self {
            group_id: string(rng),
            generation_id: r(rng),
            member_id: string(rng),
            assignments: list(rng, 2, |rng| SyncGroupAssignment {
                member_id: string(rng),
                assignment: bytes(rng),
            }),
            ..Self::default()
        };
        if version >= 3 {
            request.group_instance_id = nullable_string(rng);
        }
        if version >= 5 {
            request.protocol_type = nullable_string(rng);
            request.protocol_name = nullable_string(rng);
        }
        request
    }
}

impl Theirs for SyncGroupRequest {
    type T = kp::SyncGroupRequest;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_group_id(group_id(&self.group_id))
            .with_generation_id(self.generation_id)
            .with_member_id(sb(&self.member_id))
            .with_group_instance_id(nullable_sb(&self.group_instance_id))
            .with_protocol_type(nullable_sb(&self.protocol_type))
            .with_protocol_name(nullable_sb(&self.protocol_name))
            .with_assignments(all(&self.assignments))
    }
}

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

impl Theirs for SyncGroupResponse {
    type T = kp::SyncGroupResponse;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_throttle_time_ms(self.throttle_time_ms)
            .with_error_code(self.error_code)
            .with_protocol_type(nullable_sb(&self.protocol_type))
            .with_protocol_name(nullable_sb(&self.protocol_name))
            .with_assignment(self.assignment.clone())
    }
}

#[test]
fn sync_group_matches_kafka_protocol() {
    check::<SyncGroupRequest>();
    check::<SyncGroupResponse>();
}

// ---------------------------------------------------------------------------------------------
// Heartbeat.

impl Random for HeartbeatRequest {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut request = Self {
            group_id: string(rng),
            generation_id: r(rng),
            member_id: string(rng),
            ..Self::default()
        };
        if version >= 3 {
            request.group_instance_id = nullable_string(rng);
        }
        request
    }
}

impl Theirs for HeartbeatRequest {
    type T = kp::HeartbeatRequest;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_group_id(group_id(&self.group_id))
            .with_generation_id(self.generation_id)
            .with_member_id(sb(&self.member_id))
            .with_group_instance_id(nullable_sb(&self.group_instance_id))
    }
}

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

impl Theirs for HeartbeatResponse {
    type T = kp::HeartbeatResponse;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_throttle_time_ms(self.throttle_time_ms)
            .with_error_code(self.error_code)
    }
}

#[test]
fn heartbeat_matches_kafka_protocol() {
    check::<HeartbeatRequest>();
    check::<HeartbeatResponse>();
}

// ---------------------------------------------------------------------------------------------
// LeaveGroup.

impl Random for LeavingMember {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut member = Self {
            member_id: string(rng),
            group_instance_id: nullable_string(rng),
            ..Self::default()
        };
        if version >= 5 {
            member.reason = nullable_string(rng);
        }
        member
    }
}

impl Theirs for LeavingMember {
    type T = kp::leave_group_request::MemberIdentity;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_member_id(sb(&self.member_id))
            .with_group_instance_id(nullable_sb(&self.group_instance_id))
            .with_reason(nullable_sb(&self.reason))
    }
}

impl Random for LeaveGroupRequest {
    fn random(rng: &mut SmallRng, version: i16) -> Self {
        let mut request = Self {
            group_id: string(rng),
            ..Self::default()
        };
        if version <= 2 {
            request.member_id = string(rng);
        } else {
            request.members = list_of(rng, version, 2);
        }
        request
    }
}

impl Theirs for LeaveGroupRequest {
    type T = kp::LeaveGroupRequest;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_group_id(group_id(&self.group_id))
            .with_member_id(sb(&self.member_id))
            .with_members(all(&self.members))
    }
}

impl Theirs for LeavingMemberResponse {
    type T = kp::leave_group_response::MemberResponse;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_member_id(sb(&self.member_id))
            .with_group_instance_id(nullable_sb(&self.group_instance_id))
            .with_error_code(self.error_code)
    }
}

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

impl Theirs for LeaveGroupResponse {
    type T = kp::LeaveGroupResponse;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_throttle_time_ms(self.throttle_time_ms)
            .with_error_code(self.error_code)
            .with_members(all(&self.members))
    }
}

#[test]
fn leave_group_matches_kafka_protocol() {
    check::<LeaveGroupRequest>();
    check::<LeaveGroupResponse>();
}

// ---------------------------------------------------------------------------------------------
// SaslHandshake and SaslAuthenticate.

impl Random for SaslHandshakeRequest {
    fn random(rng: &mut SmallRng, _version: i16) -> Self {
        Self {
            mechanism: string(rng),
        }
    }
}

impl Theirs for SaslHandshakeRequest {
    type T = kp::SaslHandshakeRequest;
    fn theirs(&self) -> Self::T {
        Self::T::default().with_mechanism(sb(&self.mechanism))
    }
}

impl Random for SaslHandshakeResponse {
    fn random(rng: &mut SmallRng, _version: i16) -> Self {
        Self {
            error_code: r(rng),
            mechanisms: list(rng, 3, string),
        }
    }
}

impl Theirs for SaslHandshakeResponse {
    type T = kp::SaslHandshakeResponse;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_error_code(self.error_code)
            .with_mechanisms(self.mechanisms.iter().map(|m| sb(m)).collect())
    }
}

impl Random for SaslAuthenticateRequest {
    fn random(rng: &mut SmallRng, _version: i16) -> Self {
        Self {
            auth_bytes: bytes(rng),
        }
    }
}

impl Theirs for SaslAuthenticateRequest {
    type T = kp::SaslAuthenticateRequest;
    fn theirs(&self) -> Self::T {
        Self::T::default().with_auth_bytes(self.auth_bytes.clone())
    }
}

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

impl Theirs for SaslAuthenticateResponse {
    type T = kp::SaslAuthenticateResponse;
    fn theirs(&self) -> Self::T {
        Self::T::default()
            .with_error_code(self.error_code)
            .with_error_message(nullable_sb(&self.error_message))
            .with_auth_bytes(self.auth_bytes.clone())
            .with_session_lifetime_ms(self.session_lifetime_ms)
    }
}

#[test]
fn sasl_matches_kafka_protocol() {
    check::<SaslHandshakeRequest>();
    check::<SaslHandshakeResponse>();
    check::<SaslAuthenticateRequest>();
    check::<SaslAuthenticateResponse>();
}
