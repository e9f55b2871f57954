//! The requests this crate writes with `kafka-protocol`'s messages, generated from Kafka's own
//! JSON message schemas (as Java's and franz-go's are), instead of by hand.
//!
//! Each request states the API it belongs to, the versions spoken (a generated message may
//! know newer ones; a version is used only once it is tested here) and the response it is
//! answered with.
//!
//! The responses the producer and the consumer read stay hand-written (`super::messages`):
//! `kafka-protocol` 0.18 sizes a `Vec` from an array length read off the wire before it
//! decodes one element (kafka-protocol-rs pull requests 152, 161 and 200, open), so a hostile
//! or misrouted peer could make a long-running client ask for gigabytes, which this crate's
//! decoders refuse (see [`super::DecodeError`]). The admin client, short-lived calls to a
//! cluster an operator points it at, reads generated responses.

use bytes::BytesMut;
use kafka_protocol::messages::{GroupId, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::{ApiKey, DecodeError, DecodeErrorKind, Decoder, EncodeError};

#[cfg(test)]
mod group_tests;
mod shapes;

/// Writes a generated body, naming the API and version when the generated encoder refuses
/// (a field set that the version cannot carry).
pub(crate) fn write_generated<M: Encodable>(
    body: &M,
    api_key: ApiKey,
    version: i16,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    body.encode(out, version).map_err(|e| EncodeError {
        api_key: api_key as i16,
        version,
        reason: e.to_string(),
    })
}

/// The lowest version `request` can be written at, checked writable at every version above
/// it as well: a request built without knowing the version the connection negotiates must be
/// writable at any it may pick, or be refused for a reason the caller accepts.
#[cfg(test)]
pub(crate) fn lowest_version<R: super::Encode>(request: &R) -> i16 {
    let writes = |version| request.write_body(version, &mut BytesMut::new()).is_ok();
    let lowest = (R::MIN_VERSION..=R::MAX_VERSION)
        .find(|&version| writes(version))
        .unwrap_or_else(|| panic!("{:?} writable at no version", R::API_KEY));
    assert!(
        (lowest..=R::MAX_VERSION).all(writes),
        "{:?} writable at v{lowest} but not at every version above",
        R::API_KEY
    );
    lowest
}

/// A string field of a generated message.
pub fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// A group id field of a generated message.
pub fn group_id(s: &str) -> GroupId {
    GroupId(str_bytes(s))
}

/// A topic name field of a generated message.
pub fn topic_name(s: &str) -> TopicName {
    TopicName(str_bytes(s))
}

/// A topic id field (KIP-516) of a generated message.
pub fn topic_id(id: &[u8; 16]) -> uuid::Uuid {
    uuid::Uuid::from_bytes(*id)
}

/// Reads a generated body from the rest of `d`, which it consumes.
pub(crate) fn read_generated<M: Decodable>(
    d: &mut Decoder<'_>,
    context: &'static str,
    version: i16,
) -> Result<M, DecodeError> {
    let mut rest = d.rest();
    let before = rest.len();
    let body = M::decode(&mut rest, version)
        .map_err(|e| d.error(context, DecodeErrorKind::Generated(e.to_string())))?;
    d.take(before - rest.len(), context)?;
    Ok(body)
}

/// Makes a generated response one of this crate's [`Decode`](super::Decode)s (for the admin
/// client; see the module's comment on why the clients' responses are hand-written).
macro_rules! generated_response {
    ($response:ty, $key:ident, versions $min:literal..=$max:literal, flexible from $flexible:literal) => {
        impl $crate::protocol::Versioned for $response {
            const API_KEY: $crate::protocol::ApiKey = $crate::protocol::ApiKey::$key;
            const MIN_VERSION: i16 = $min;
            const MAX_VERSION: i16 = $max;
            const FLEXIBLE_FROM: i16 = $flexible;
        }

        impl $crate::protocol::Decode for $response {
            fn read_body(
                d: &mut $crate::protocol::Decoder<'_>,
                version: i16,
            ) -> Result<Self, $crate::protocol::DecodeError> {
                $crate::protocol::generated::read_generated(d, stringify!($response), version)
            }
        }
    };
    ($response:ty, $key:ident, versions $min:literal..=$max:literal, never flexible) => {
        generated_response!($response, $key, versions $min..=$max, flexible from 32767);
    };
}

/// Makes a generated request one of this crate's [`Request`]s. With `shaped by`, the request
/// is first passed through a function that rewrites it into the shape of the version it is
/// written at, or refuses it (see [`shapes`]).
macro_rules! generated_request {
    ($request:ty => $response:ty, $key:ident, versions $min:literal..=$max:literal, flexible from $flexible:literal) => {
        generated_request!(
            $request => $response, $key, versions $min..=$max, flexible from $flexible,
            shaped by $crate::protocol::generated::shapes::as_is
        );
    };
    ($request:ty => $response:ty, $key:ident, versions $min:literal..=$max:literal, flexible from $flexible:literal, shaped by $shape:path) => {
        impl $crate::protocol::Versioned for $request {
            const API_KEY: $crate::protocol::ApiKey = $crate::protocol::ApiKey::$key;
            const MIN_VERSION: i16 = $min;
            const MAX_VERSION: i16 = $max;
            const FLEXIBLE_FROM: i16 = $flexible;
        }

        impl $crate::protocol::Encode for $request {
            fn write_body(
                &self,
                version: i16,
                out: &mut bytes::BytesMut,
            ) -> Result<(), $crate::protocol::EncodeError> {
                let shaped =
                    $shape(self, version).map_err(|reason| $crate::protocol::EncodeError {
                        api_key: $crate::protocol::ApiKey::$key as i16,
                        version,
                        reason,
                    })?;
                $crate::protocol::generated::write_generated(
                    &*shaped,
                    $crate::protocol::ApiKey::$key,
                    version,
                    out,
                )
            }
        }

        impl $crate::protocol::Request for $request {
            type Response = $response;
        }
    };
    // No flexible version (SaslHandshake: KAFKA-9577).
    ($request:ty => $response:ty, $key:ident, versions $min:literal..=$max:literal, never flexible) => {
        generated_request!($request => $response, $key, versions $min..=$max, flexible from 32767);
    };
}

// ---- Every API spoken with a generated request, with the versions spoken. ----

// The connection, metadata and the producer's transactions.

generated_request!(
    kafka_protocol::messages::ApiVersionsRequest => super::messages::api_versions::ApiVersionsResponse,
    ApiVersions, versions 0..=4, flexible from 3
);
generated_request!(
    kafka_protocol::messages::SaslHandshakeRequest => super::messages::sasl_handshake::SaslHandshakeResponse,
    SaslHandshake, versions 0..=1, never flexible
);
generated_request!(
    kafka_protocol::messages::SaslAuthenticateRequest => super::messages::sasl_authenticate::SaslAuthenticateResponse,
    SaslAuthenticate, versions 0..=2, flexible from 2
);
generated_request!(
    kafka_protocol::messages::MetadataRequest => super::messages::metadata::MetadataResponse,
    Metadata, versions 0..=13, flexible from 9
);
generated_request!(
    kafka_protocol::messages::FindCoordinatorRequest => super::messages::find_coordinator::FindCoordinatorResponse,
    FindCoordinator, versions 0..=6, flexible from 3
);
generated_request!(
    kafka_protocol::messages::InitProducerIdRequest => super::messages::init_producer_id::InitProducerIdResponse,
    InitProducerId, versions 0..=5, flexible from 2
);
generated_request!(
    kafka_protocol::messages::AddPartitionsToTxnRequest => super::messages::add_partitions_to_txn::AddPartitionsToTxnResponse,
    AddPartitionsToTxn, versions 0..=5, flexible from 3
);
generated_request!(
    kafka_protocol::messages::AddOffsetsToTxnRequest => super::messages::add_offsets_to_txn::AddOffsetsToTxnResponse,
    AddOffsetsToTxn, versions 0..=4, flexible from 3
);
generated_request!(
    kafka_protocol::messages::TxnOffsetCommitRequest => super::messages::txn_offset_commit::TxnOffsetCommitResponse,
    TxnOffsetCommit, versions 0..=5, flexible from 3
);
generated_request!(
    kafka_protocol::messages::EndTxnRequest => super::messages::end_txn::EndTxnResponse,
    EndTxn, versions 0..=5, flexible from 3
);

// Groups and the consumer.

generated_request!(
    kafka_protocol::messages::HeartbeatRequest => super::messages::heartbeat::HeartbeatResponse,
    Heartbeat, versions 0..=4, flexible from 4
);
generated_request!(
    kafka_protocol::messages::JoinGroupRequest => super::messages::join_group::JoinGroupResponse,
    JoinGroup, versions 0..=9, flexible from 6
);
generated_request!(
    kafka_protocol::messages::SyncGroupRequest => super::messages::sync_group::SyncGroupResponse,
    SyncGroup, versions 0..=5, flexible from 4
);
generated_request!(
    kafka_protocol::messages::LeaveGroupRequest => super::messages::leave_group::LeaveGroupResponse,
    LeaveGroup, versions 0..=5, flexible from 4, shaped by shapes::leave_group
);
generated_request!(
    kafka_protocol::messages::ConsumerGroupHeartbeatRequest
        => super::messages::consumer_group_heartbeat::ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeat, versions 0..=1, flexible from 0
);
// From v1: kafka-protocol 0.18 has no v0 (ZooKeeper offsets; Kafka 4.0 removed it, KIP-896)
// and no v10 (topic ids, Kafka 4.2).
generated_request!(
    kafka_protocol::messages::OffsetFetchRequest => super::messages::offset_fetch::OffsetFetchResponse,
    OffsetFetch, versions 1..=9, flexible from 6, shaped by shapes::offset_fetch
);
generated_request!(
    kafka_protocol::messages::OffsetCommitRequest => super::messages::offset_commit::OffsetCommitResponse,
    OffsetCommit, versions 2..=9, flexible from 8
);
// From v1: kafka-protocol 0.18 has no v0 (`MaxNumOffsets`; Kafka 4.0 removed it, KIP-896).
generated_request!(
    kafka_protocol::messages::ListOffsetsRequest => super::messages::list_offsets::ListOffsetsResponse,
    ListOffsets, versions 1..=10, flexible from 6
);
// From v3, the first with the replica id a consumer sets to -1 (KIP-320); v0–2 are for
// followers only.
generated_request!(
    kafka_protocol::messages::OffsetForLeaderEpochRequest
        => super::messages::offset_for_leader_epoch::OffsetForLeaderEpochResponse,
    OffsetForLeaderEpoch, versions 3..=4, flexible from 4
);

// Client telemetry (KIP-714): both clients ask for a subscription and push what it names.

generated_request!(
    kafka_protocol::messages::GetTelemetrySubscriptionsRequest
        => super::messages::telemetry::GetTelemetrySubscriptionsResponse,
    GetTelemetrySubscriptions, versions 0..=0, flexible from 0
);
generated_request!(
    kafka_protocol::messages::PushTelemetryRequest => super::messages::telemetry::PushTelemetryResponse,
    PushTelemetry, versions 0..=0, flexible from 0
);

// The admin client. CreateTopics from v2: Kafka 4.0 dropped the older versions (KIP-896).
// DeleteTopics v6 only (topics by name or id, KIP-516, since Kafka 2.8): below it the names
// go in another field, and every 3.x and 4.x broker serves v6. ListGroups v5 carries the
// groups' types (KIP-848), which picks DescribeGroups or ConsumerGroupDescribe.

generated_request!(
    kafka_protocol::messages::CreateTopicsRequest => kafka_protocol::messages::CreateTopicsResponse,
    CreateTopics, versions 2..=7, flexible from 5
);
generated_response!(
    kafka_protocol::messages::CreateTopicsResponse,
    CreateTopics, versions 2..=7, flexible from 5
);
generated_request!(
    kafka_protocol::messages::DeleteTopicsRequest => kafka_protocol::messages::DeleteTopicsResponse,
    DeleteTopics, versions 6..=6, flexible from 4
);
generated_response!(
    kafka_protocol::messages::DeleteTopicsResponse,
    DeleteTopics, versions 6..=6, flexible from 4
);
generated_request!(
    kafka_protocol::messages::CreatePartitionsRequest => kafka_protocol::messages::CreatePartitionsResponse,
    CreatePartitions, versions 0..=3, flexible from 2
);
generated_response!(
    kafka_protocol::messages::CreatePartitionsResponse,
    CreatePartitions, versions 0..=3, flexible from 2
);
generated_request!(
    kafka_protocol::messages::DescribeConfigsRequest => kafka_protocol::messages::DescribeConfigsResponse,
    DescribeConfigs, versions 1..=4, flexible from 4
);
generated_response!(
    kafka_protocol::messages::DescribeConfigsResponse,
    DescribeConfigs, versions 1..=4, flexible from 4
);
generated_request!(
    kafka_protocol::messages::IncrementalAlterConfigsRequest => kafka_protocol::messages::IncrementalAlterConfigsResponse,
    IncrementalAlterConfigs, versions 0..=1, flexible from 1
);
generated_response!(
    kafka_protocol::messages::IncrementalAlterConfigsResponse,
    IncrementalAlterConfigs, versions 0..=1, flexible from 1
);
generated_request!(
    kafka_protocol::messages::DeleteRecordsRequest => kafka_protocol::messages::DeleteRecordsResponse,
    DeleteRecords, versions 0..=2, flexible from 2
);
generated_response!(
    kafka_protocol::messages::DeleteRecordsResponse,
    DeleteRecords, versions 0..=2, flexible from 2
);
generated_request!(
    kafka_protocol::messages::ListGroupsRequest => kafka_protocol::messages::ListGroupsResponse,
    ListGroups, versions 0..=5, flexible from 3
);
generated_response!(
    kafka_protocol::messages::ListGroupsResponse,
    ListGroups, versions 0..=5, flexible from 3
);
generated_request!(
    kafka_protocol::messages::DescribeGroupsRequest => kafka_protocol::messages::DescribeGroupsResponse,
    DescribeGroups, versions 0..=6, flexible from 5
);
generated_response!(
    kafka_protocol::messages::DescribeGroupsResponse,
    DescribeGroups, versions 0..=6, flexible from 5
);
generated_request!(
    kafka_protocol::messages::ConsumerGroupDescribeRequest => kafka_protocol::messages::ConsumerGroupDescribeResponse,
    ConsumerGroupDescribe, versions 0..=1, flexible from 0
);
generated_response!(
    kafka_protocol::messages::ConsumerGroupDescribeResponse,
    ConsumerGroupDescribe, versions 0..=1, flexible from 0
);
generated_request!(
    kafka_protocol::messages::OffsetDeleteRequest => kafka_protocol::messages::OffsetDeleteResponse,
    OffsetDelete, versions 0..=0, never flexible
);
generated_response!(
    kafka_protocol::messages::OffsetDeleteResponse,
    OffsetDelete, versions 0..=0, never flexible
);
generated_request!(
    kafka_protocol::messages::DeleteGroupsRequest => kafka_protocol::messages::DeleteGroupsResponse,
    DeleteGroups, versions 0..=2, flexible from 2
);
generated_response!(
    kafka_protocol::messages::DeleteGroupsResponse,
    DeleteGroups, versions 0..=2, flexible from 2
);

// The admin client's transaction tools (KIP-664). ListTransactions v1 adds the duration
// filter (KIP-994), v2 the transactional id pattern (KIP-1152). WriteTxnMarkers v1 only:
// Kafka 4.0 dropped v0 (KIP-896) and 4.1 serves no later one.

generated_request!(
    kafka_protocol::messages::ListTransactionsRequest => kafka_protocol::messages::ListTransactionsResponse,
    ListTransactions, versions 0..=2, flexible from 0
);
generated_response!(
    kafka_protocol::messages::ListTransactionsResponse,
    ListTransactions, versions 0..=2, flexible from 0
);
generated_request!(
    kafka_protocol::messages::DescribeTransactionsRequest => kafka_protocol::messages::DescribeTransactionsResponse,
    DescribeTransactions, versions 0..=0, flexible from 0
);
generated_response!(
    kafka_protocol::messages::DescribeTransactionsResponse,
    DescribeTransactions, versions 0..=0, flexible from 0
);
generated_request!(
    kafka_protocol::messages::DescribeProducersRequest => kafka_protocol::messages::DescribeProducersResponse,
    DescribeProducers, versions 0..=0, flexible from 0
);
generated_response!(
    kafka_protocol::messages::DescribeProducersResponse,
    DescribeProducers, versions 0..=0, flexible from 0
);
generated_request!(
    kafka_protocol::messages::WriteTxnMarkersRequest => kafka_protocol::messages::WriteTxnMarkersResponse,
    WriteTxnMarkers, versions 1..=1, flexible from 1
);
generated_response!(
    kafka_protocol::messages::WriteTxnMarkersResponse,
    WriteTxnMarkers, versions 1..=1, flexible from 1
);

// The operator's calls: ACLs (KIP-140), log dirs (KIP-113), delegation tokens (KIP-48), leader
// elections (KIP-460), reassignments (KIP-455), client quotas (KIP-546), SCRAM credentials
// (KIP-554), features (KIP-584) and DescribeCluster (KIP-700). ACLs, log dirs and tokens from v1:
// Kafka 4.0 dropped v0 (KIP-896). AlterPartitionReassignments v0 only (v1, KIP-860, adds a flag
// Kafka 4.1 defaults the same way); DescribeCluster to v1 (v2 lists fenced brokers too);
// UpdateFeatures to v1 (v2 answers without per-feature results).

generated_request!(
    kafka_protocol::messages::DescribeAclsRequest => kafka_protocol::messages::DescribeAclsResponse,
    DescribeAcls, versions 1..=3, flexible from 2
);
generated_response!(
    kafka_protocol::messages::DescribeAclsResponse,
    DescribeAcls, versions 1..=3, flexible from 2
);
generated_request!(
    kafka_protocol::messages::CreateAclsRequest => kafka_protocol::messages::CreateAclsResponse,
    CreateAcls, versions 1..=3, flexible from 2
);
generated_response!(
    kafka_protocol::messages::CreateAclsResponse,
    CreateAcls, versions 1..=3, flexible from 2
);
generated_request!(
    kafka_protocol::messages::DeleteAclsRequest => kafka_protocol::messages::DeleteAclsResponse,
    DeleteAcls, versions 1..=3, flexible from 2
);
generated_response!(
    kafka_protocol::messages::DeleteAclsResponse,
    DeleteAcls, versions 1..=3, flexible from 2
);
generated_request!(
    kafka_protocol::messages::DescribeLogDirsRequest => kafka_protocol::messages::DescribeLogDirsResponse,
    DescribeLogDirs, versions 1..=4, flexible from 2
);
generated_response!(
    kafka_protocol::messages::DescribeLogDirsResponse,
    DescribeLogDirs, versions 1..=4, flexible from 2
);
generated_request!(
    kafka_protocol::messages::AlterReplicaLogDirsRequest => kafka_protocol::messages::AlterReplicaLogDirsResponse,
    AlterReplicaLogDirs, versions 1..=2, flexible from 2
);
generated_response!(
    kafka_protocol::messages::AlterReplicaLogDirsResponse,
    AlterReplicaLogDirs, versions 1..=2, flexible from 2
);
generated_request!(
    kafka_protocol::messages::CreateDelegationTokenRequest => kafka_protocol::messages::CreateDelegationTokenResponse,
    CreateDelegationToken, versions 1..=3, flexible from 2
);
generated_response!(
    kafka_protocol::messages::CreateDelegationTokenResponse,
    CreateDelegationToken, versions 1..=3, flexible from 2
);
generated_request!(
    kafka_protocol::messages::RenewDelegationTokenRequest => kafka_protocol::messages::RenewDelegationTokenResponse,
    RenewDelegationToken, versions 1..=2, flexible from 2
);
generated_response!(
    kafka_protocol::messages::RenewDelegationTokenResponse,
    RenewDelegationToken, versions 1..=2, flexible from 2
);
generated_request!(
    kafka_protocol::messages::ExpireDelegationTokenRequest => kafka_protocol::messages::ExpireDelegationTokenResponse,
    ExpireDelegationToken, versions 1..=2, flexible from 2
);
generated_response!(
    kafka_protocol::messages::ExpireDelegationTokenResponse,
    ExpireDelegationToken, versions 1..=2, flexible from 2
);
generated_request!(
    kafka_protocol::messages::DescribeDelegationTokenRequest => kafka_protocol::messages::DescribeDelegationTokenResponse,
    DescribeDelegationToken, versions 1..=3, flexible from 2
);
generated_response!(
    kafka_protocol::messages::DescribeDelegationTokenResponse,
    DescribeDelegationToken, versions 1..=3, flexible from 2
);
generated_request!(
    kafka_protocol::messages::ElectLeadersRequest => kafka_protocol::messages::ElectLeadersResponse,
    ElectLeaders, versions 0..=2, flexible from 2
);
generated_response!(
    kafka_protocol::messages::ElectLeadersResponse,
    ElectLeaders, versions 0..=2, flexible from 2
);
generated_request!(
    kafka_protocol::messages::AlterPartitionReassignmentsRequest => kafka_protocol::messages::AlterPartitionReassignmentsResponse,
    AlterPartitionReassignments, versions 0..=0, flexible from 0
);
generated_response!(
    kafka_protocol::messages::AlterPartitionReassignmentsResponse,
    AlterPartitionReassignments, versions 0..=0, flexible from 0
);
generated_request!(
    kafka_protocol::messages::ListPartitionReassignmentsRequest => kafka_protocol::messages::ListPartitionReassignmentsResponse,
    ListPartitionReassignments, versions 0..=0, flexible from 0
);
generated_response!(
    kafka_protocol::messages::ListPartitionReassignmentsResponse,
    ListPartitionReassignments, versions 0..=0, flexible from 0
);
generated_request!(
    kafka_protocol::messages::DescribeClientQuotasRequest => kafka_protocol::messages::DescribeClientQuotasResponse,
    DescribeClientQuotas, versions 0..=1, flexible from 1
);
generated_response!(
    kafka_protocol::messages::DescribeClientQuotasResponse,
    DescribeClientQuotas, versions 0..=1, flexible from 1
);
generated_request!(
    kafka_protocol::messages::AlterClientQuotasRequest => kafka_protocol::messages::AlterClientQuotasResponse,
    AlterClientQuotas, versions 0..=1, flexible from 1
);
generated_response!(
    kafka_protocol::messages::AlterClientQuotasResponse,
    AlterClientQuotas, versions 0..=1, flexible from 1
);
generated_request!(
    kafka_protocol::messages::DescribeUserScramCredentialsRequest => kafka_protocol::messages::DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentials, versions 0..=0, flexible from 0
);
generated_response!(
    kafka_protocol::messages::DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentials, versions 0..=0, flexible from 0
);
generated_request!(
    kafka_protocol::messages::AlterUserScramCredentialsRequest => kafka_protocol::messages::AlterUserScramCredentialsResponse,
    AlterUserScramCredentials, versions 0..=0, flexible from 0
);
generated_response!(
    kafka_protocol::messages::AlterUserScramCredentialsResponse,
    AlterUserScramCredentials, versions 0..=0, flexible from 0
);
generated_request!(
    kafka_protocol::messages::UpdateFeaturesRequest => kafka_protocol::messages::UpdateFeaturesResponse,
    UpdateFeatures, versions 0..=1, flexible from 0
);
generated_response!(
    kafka_protocol::messages::UpdateFeaturesResponse,
    UpdateFeatures, versions 0..=1, flexible from 0
);
generated_request!(
    kafka_protocol::messages::DescribeClusterRequest => kafka_protocol::messages::DescribeClusterResponse,
    DescribeCluster, versions 0..=1, flexible from 0
);
generated_response!(
    kafka_protocol::messages::DescribeClusterResponse,
    DescribeCluster, versions 0..=1, flexible from 0
);

#[cfg(test)]
mod operator_tests;

#[cfg(test)]
mod connection_and_transactions_tests;

#[cfg(test)]
mod telemetry_tests;

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::{GroupId, HeartbeatRequest};
    use kafka_protocol::protocol::{HeaderVersion, StrBytes};

    use super::*;
    use crate::protocol::{Encode, Versioned};

    /// Our flexible-version table agrees with the schema's: a flexible request uses request
    /// header v2.
    pub(super) fn assert_flexible_from<R: Versioned + HeaderVersion>() {
        for version in R::MIN_VERSION..=R::MAX_VERSION {
            assert_eq!(
                R::is_flexible(version),
                R::header_version(version) == 2,
                "{:?} v{version}",
                R::API_KEY
            );
        }
    }

    pub(super) fn encoded<R: Encode>(request: &R, version: i16) -> Vec<u8> {
        let mut out = BytesMut::new();
        request.write_body(version, &mut out).expect("encodes");
        out.to_vec()
    }

    #[test]
    fn flexible_versions_match_the_schemas() {
        use kafka_protocol::messages as kp;
        assert_flexible_from::<HeartbeatRequest>();
        assert_flexible_from::<kp::CreateTopicsRequest>();
        assert_flexible_from::<kp::DeleteTopicsRequest>();
        assert_flexible_from::<kp::CreatePartitionsRequest>();
        assert_flexible_from::<kp::DescribeConfigsRequest>();
        assert_flexible_from::<kp::IncrementalAlterConfigsRequest>();
        assert_flexible_from::<kp::DeleteRecordsRequest>();
        assert_flexible_from::<kp::ListGroupsRequest>();
        assert_flexible_from::<kp::DescribeGroupsRequest>();
        assert_flexible_from::<kp::ConsumerGroupDescribeRequest>();
        assert_flexible_from::<kp::OffsetDeleteRequest>();
        assert_flexible_from::<kp::DeleteGroupsRequest>();
        assert_flexible_from::<kp::ListTransactionsRequest>();
        assert_flexible_from::<kp::DescribeTransactionsRequest>();
        assert_flexible_from::<kp::DescribeProducersRequest>();
        assert_flexible_from::<kp::WriteTxnMarkersRequest>();
    }

    #[test]
    fn heartbeat_golden_bytes() {
        let request = HeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_generation_id(7)
            .with_member_id(StrBytes::from_static_str("m-1"))
            .with_group_instance_id(Some(StrBytes::from_static_str("i")));
        // v4 (flexible): compact strings, then an empty tagged-field section.
        assert_eq!(
            encoded(&request, 4),
            [2, b'g', 0, 0, 0, 7, 4, b'm', b'-', b'1', 2, b'i', 0]
        );
        // v3: classic int16-length strings.
        assert_eq!(
            encoded(&request, 3),
            [0, 1, b'g', 0, 0, 0, 7, 0, 3, b'm', b'-', b'1', 0, 1, b'i']
        );
    }

    #[test]
    fn a_field_the_version_cannot_carry_is_an_error_not_dropped() {
        let request = HeartbeatRequest::default()
            .with_group_instance_id(Some(StrBytes::from_static_str("i")));
        let mut out = BytesMut::new();
        let error = request.write_body(2, &mut out).unwrap_err();
        assert_eq!((error.api_key, error.version), (12, 2));
    }

    #[test]
    fn list_transactions_golden_bytes() {
        use kafka_protocol::messages::{ListTransactionsRequest, ProducerId};
        let request = ListTransactionsRequest::default()
            .with_state_filters(vec![StrBytes::from_static_str("Ongoing")])
            .with_producer_id_filters(vec![ProducerId(7)])
            .with_duration_filter(1000);
        let mut expected = vec![2, 8];
        expected.extend_from_slice(b"Ongoing");
        expected.push(2);
        expected.extend_from_slice(&7i64.to_be_bytes());
        expected.extend_from_slice(&1000i64.to_be_bytes());
        expected.push(0);
        assert_eq!(encoded(&request, 1), expected);
        // v0 has no duration filter (KIP-994): refused, not silently dropped.
        let mut out = BytesMut::new();
        let error = request.write_body(0, &mut out).unwrap_err();
        assert_eq!((error.api_key, error.version), (66, 0));
    }

    #[test]
    fn write_txn_markers_golden_bytes() {
        use kafka_protocol::messages::write_txn_markers_request::{
            WritableTxnMarker, WritableTxnMarkerTopic,
        };
        use kafka_protocol::messages::{ProducerId, TopicName, WriteTxnMarkersRequest};
        let request = WriteTxnMarkersRequest::default().with_markers(vec![
            WritableTxnMarker::default()
                .with_producer_id(ProducerId(5))
                .with_producer_epoch(2)
                .with_transaction_result(false)
                .with_topics(vec![
                    WritableTxnMarkerTopic::default()
                        .with_name(TopicName(StrBytes::from_static_str("t")))
                        .with_partition_indexes(vec![0]),
                ])
                .with_coordinator_epoch(3),
        ]);
        let mut expected = vec![2];
        expected.extend_from_slice(&5i64.to_be_bytes());
        // Epoch 2, abort (false), one topic "t" with partition 0, its tagged fields.
        expected.extend_from_slice(&[0, 2, 0, 2, 2, b't', 2, 0, 0, 0, 0, 0]);
        // Coordinator epoch 3, the marker's and the request's tagged fields.
        expected.extend_from_slice(&[0, 0, 0, 3, 0, 0]);
        assert_eq!(encoded(&request, 1), expected);
    }
}
