//! The producer-side messages this crate writes by hand against `kafka-protocol`: Produce, and
//! the responses of ApiVersions, Metadata, InitProducerId, FindCoordinator, AddPartitionsToTxn,
//! AddOffsetsToTxn, TxnOffsetCommit and EndTxn (their requests are kafka-protocol's own).
//!
//! For every version we implement, random values holding only the fields that version has are
//! mapped field by field onto kafka-protocol's types ([`Oracle::to_theirs`]); then our encoding
//! must decode with theirs to that mapped value, their encoding of it must decode with ours to
//! the original, and both encodings must be the same bytes.

use std::fmt::Debug;

use bytes::Bytes;
use kafka_protocol::messages::{BrokerId, ProducerId, TransactionalId};
use kafka_protocol::messages::{
    add_offsets_to_txn_response as kp_aots, add_partitions_to_txn_response as kp_apts,
    api_versions_response as kp_avs, end_txn_response as kp_ets,
    find_coordinator_response as kp_fcs, init_producer_id_response as kp_ips,
    metadata_response as kp_ms, produce_request as kp_pr, produce_response as kp_ps,
    txn_offset_commit_response as kp_tocs,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use exactly::__private::protocol::Message;
use exactly::__private::protocol::messages::add_offsets_to_txn::AddOffsetsToTxnResponse;
use exactly::__private::protocol::messages::add_partitions_to_txn::{
    AddPartitionsToTxnResponse, AddPartitionsToTxnResult, PartitionError, TopicPartitionErrors,
};
use exactly::__private::protocol::messages::api_versions::{
    ApiVersion, ApiVersionsResponse, FinalizedFeatureKey, SupportedFeatureKey,
};
use exactly::__private::protocol::messages::end_txn::EndTxnResponse;
use exactly::__private::protocol::messages::find_coordinator::{
    Coordinator, FindCoordinatorResponse,
};
use exactly::__private::protocol::messages::init_producer_id::InitProducerIdResponse;
use exactly::__private::protocol::messages::metadata::{
    AUTHORIZED_OPERATIONS_OMITTED, BrokerEndpoint, MetadataResponse, MetadataResponsePartition,
    MetadataResponseTopic,
};
use exactly::__private::protocol::messages::produce::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, PartitionProduceData, PartitionProduceResponse,
    ProduceRequest, ProduceResponse, TopicProduceData, TopicProduceResponse,
};
use exactly::__private::protocol::messages::txn_offset_commit::TxnOffsetCommitResponse;

use crate::harness::{all, assert_agree, nullable_sb, sb, topic_name, uuid};

/// Random values checked per message and version.
const VALUES_PER_VERSION: usize = 100;

/// One of our messages, paired with kafka-protocol's type for it.
trait Oracle: Message + PartialEq + Debug {
    /// kafka-protocol's type for the same message.
    type T: Encodable + Decodable + PartialEq + Debug;
    /// A random value holding only the fields `version` has (the others at their defaults).
    fn random(g: &mut Gen, version: i16) -> Self;
    /// The same value, field by field, as kafka-protocol's type at `version`.
    fn to_theirs(&self, version: i16) -> Self::T;
}

/// Runs the differential check for every version of `M`.
fn check<M: Oracle>(seed: u64) {
    for version in M::MIN_VERSION..=M::MAX_VERSION {
        let mut g = Gen(SmallRng::seed_from_u64(seed ^ ((version as u64) << 32)));
        for _ in 0..VALUES_PER_VERSION {
            let ours = M::random(&mut g, version);
            assert_agree(&ours, &ours.to_theirs(version), version);
        }
    }
}

/// kafka-protocol's transactional id.
fn transactional_id(s: &str) -> TransactionalId {
    TransactionalId(sb(s))
}

/// Random field values: small numbers of elements, short ASCII strings.
struct Gen(SmallRng);

impl Gen {
    fn i16(&mut self) -> i16 {
        self.0.random()
    }
    fn i32(&mut self) -> i32 {
        self.0.random()
    }
    fn i64(&mut self) -> i64 {
        self.0.random()
    }
    fn bool(&mut self) -> bool {
        self.0.random()
    }
    fn uuid(&mut self) -> [u8; 16] {
        self.0.random()
    }
    /// `value` when `present` (the version has the field), else the field's default.
    fn when<T>(&mut self, present: bool, default: T, value: impl FnOnce(&mut Self) -> T) -> T {
        if present { value(self) } else { default }
    }
    fn string(&mut self) -> String {
        const ALPHABET: &[u8] =
            b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_";
        let len = self.0.random_range(0..8);
        (0..len)
            .map(|_| char::from(ALPHABET[self.0.random_range(0..ALPHABET.len())]))
            .collect()
    }
    /// A string, or sometimes null when the version allows null.
    fn opt_string(&mut self, nullable: bool) -> Option<String> {
        if nullable && self.0.random_ratio(1, 4) {
            None
        } else {
            Some(self.string())
        }
    }
    fn opt_bytes(&mut self) -> Option<Bytes> {
        if self.0.random_ratio(1, 4) {
            return None;
        }
        let len = self.0.random_range(0..24);
        Some((0..len).map(|_| self.0.random::<u8>()).collect())
    }
    fn vec<T>(&mut self, max: usize, mut element: impl FnMut(&mut Self) -> T) -> Vec<T> {
        let len = self.0.random_range(0..=max);
        (0..len).map(|_| element(self)).collect()
    }
    fn i32s(&mut self) -> Vec<i32> {
        self.vec(4, Self::i32)
    }
}

// ---------------------------------------------------------------------------------------------
// ApiVersions

impl Oracle for ApiVersionsResponse {
    type T = kp_avs::ApiVersionsResponse;
    fn random(g: &mut Gen, v: i16) -> Self {
        let flexible = v >= 3;
        let epoch_known = g.bool();
        Self {
            error_code: g.i16(),
            api_keys: g.vec(4, |g| ApiVersion {
                api_key: g.i16(),
                min_version: g.i16(),
                max_version: g.i16(),
            }),
            throttle_time_ms: g.when(v >= 1, 0, Gen::i32),
            supported_features: g.when(flexible, vec![], |g| {
                g.vec(3, |g| SupportedFeatureKey {
                    name: g.string(),
                    min_version: g.i16(),
                    max_version: g.i16(),
                })
            }),
            finalized_features_epoch: g.when(flexible && epoch_known, -1, Gen::i64),
            finalized_features: g.when(flexible, vec![], |g| {
                g.vec(3, |g| FinalizedFeatureKey {
                    name: g.string(),
                    max_version_level: g.i16(),
                    min_version_level: g.i16(),
                })
            }),
            zk_migration_ready: g.when(flexible, false, Gen::bool),
        }
    }
    fn to_theirs(&self, _: i16) -> Self::T {
        Self::T::default()
            .with_error_code(self.error_code)
            .with_api_keys(all(&self.api_keys))
            .with_throttle_time_ms(self.throttle_time_ms)
            .with_supported_features(all(&self.supported_features))
            .with_finalized_features_epoch(self.finalized_features_epoch)
            .with_finalized_features(all(&self.finalized_features))
            .with_zk_migration_ready(self.zk_migration_ready)
    }
}

theirs!(ApiVersion => kp_avs::ApiVersion, |a| {
    with_api_key(a.api_key),
    with_min_version(a.min_version),
    with_max_version(a.max_version),
});

theirs!(SupportedFeatureKey => kp_avs::SupportedFeatureKey, |f| {
    with_name(sb(&f.name)),
    with_min_version(f.min_version),
    with_max_version(f.max_version),
});

theirs!(FinalizedFeatureKey => kp_avs::FinalizedFeatureKey, |f| {
    with_name(sb(&f.name)),
    with_max_version_level(f.max_version_level),
    with_min_version_level(f.min_version_level),
});

// ---------------------------------------------------------------------------------------------
// Metadata

fn random_broker(g: &mut Gen, with_rack: bool) -> BrokerEndpoint {
    BrokerEndpoint {
        node_id: g.i32(),
        host: g.string(),
        port: g.i32(),
        rack: g.when(with_rack, None, |g| g.opt_string(true)),
    }
}

impl Oracle for MetadataResponse {
    type T = kp_ms::MetadataResponse;
    fn random(g: &mut Gen, v: i16) -> Self {
        let partition = |g: &mut Gen| MetadataResponsePartition {
            error_code: g.i16(),
            partition_index: g.i32(),
            leader_id: g.i32(),
            leader_epoch: g.when(v >= 7, -1, Gen::i32),
            replica_nodes: g.i32s(),
            isr_nodes: g.i32s(),
            offline_replicas: g.when(v >= 5, vec![], Gen::i32s),
        };
        let topic = |g: &mut Gen| MetadataResponseTopic {
            error_code: g.i16(),
            name: g.opt_string(v >= 12),
            topic_id: g.when(v >= 10, [0; 16], Gen::uuid),
            is_internal: g.when(v >= 1, false, Gen::bool),
            partitions: g.vec(3, partition),
            topic_authorized_operations: g.when(v >= 8, AUTHORIZED_OPERATIONS_OMITTED, Gen::i32),
        };
        Self {
            throttle_time_ms: g.when(v >= 3, 0, Gen::i32),
            brokers: g.vec(3, |g| random_broker(g, v >= 1)),
            cluster_id: g.when(v >= 2, None, |g| g.opt_string(true)),
            controller_id: g.when(v >= 1, -1, Gen::i32),
            topics: g.vec(3, topic),
            cluster_authorized_operations: g.when(
                (8..=10).contains(&v),
                AUTHORIZED_OPERATIONS_OMITTED,
                Gen::i32,
            ),
            error_code: g.when(v >= 13, 0, Gen::i16),
        }
    }
    fn to_theirs(&self, _: i16) -> Self::T {
        Self::T::default()
            .with_throttle_time_ms(self.throttle_time_ms)
            .with_brokers(all(&self.brokers))
            .with_cluster_id(nullable_sb(&self.cluster_id))
            .with_controller_id(BrokerId(self.controller_id))
            .with_topics(all(&self.topics))
            .with_cluster_authorized_operations(self.cluster_authorized_operations)
            .with_error_code(self.error_code)
    }
}

theirs!(MetadataResponseTopic => kp_ms::MetadataResponseTopic, |t| {
    with_error_code(t.error_code),
    with_name(t.name.as_deref().map(topic_name)),
    with_topic_id(uuid(&t.topic_id)),
    with_is_internal(t.is_internal),
    with_partitions(all(&t.partitions)),
    with_topic_authorized_operations(t.topic_authorized_operations),
});

theirs!(MetadataResponsePartition => kp_ms::MetadataResponsePartition, |p| {
    with_error_code(p.error_code),
    with_partition_index(p.partition_index),
    with_leader_id(BrokerId(p.leader_id)),
    with_leader_epoch(p.leader_epoch),
    with_replica_nodes(broker_ids(&p.replica_nodes)),
    with_isr_nodes(broker_ids(&p.isr_nodes)),
    with_offline_replicas(broker_ids(&p.offline_replicas)),
});

fn broker_ids(ids: &[i32]) -> Vec<BrokerId> {
    ids.iter().copied().map(BrokerId).collect()
}

// ---------------------------------------------------------------------------------------------
// InitProducerId

impl Oracle for InitProducerIdResponse {
    type T = kp_ips::InitProducerIdResponse;
    fn random(g: &mut Gen, _: i16) -> Self {
        Self {
            throttle_time_ms: g.i32(),
            error_code: g.i16(),
            producer_id: g.i64(),
            producer_epoch: g.i16(),
        }
    }
    fn to_theirs(&self, _: i16) -> Self::T {
        Self::T::default()
            .with_throttle_time_ms(self.throttle_time_ms)
            .with_error_code(self.error_code)
            .with_producer_id(ProducerId(self.producer_id))
            .with_producer_epoch(self.producer_epoch)
    }
}

// ---------------------------------------------------------------------------------------------
// Produce

/// A topic's identity in Produce: a name up to v12, an id from v13.
fn random_topic_ref(g: &mut Gen, v: i16) -> (String, [u8; 16]) {
    if v >= 13 {
        (String::new(), g.uuid())
    } else {
        (g.string(), [0; 16])
    }
}

impl Oracle for ProduceRequest {
    type T = kp_pr::ProduceRequest;
    fn random(g: &mut Gen, v: i16) -> Self {
        Self {
            transactional_id: g.opt_string(true),
            acks: g.i16(),
            timeout_ms: g.i32(),
            topic_data: g.vec(3, |g| {
                let (name, topic_id) = random_topic_ref(g, v);
                TopicProduceData {
                    name,
                    topic_id,
                    partition_data: g.vec(3, |g| PartitionProduceData {
                        index: g.i32(),
                        records: g.opt_bytes().map(Into::into),
                    }),
                }
            }),
        }
    }
    fn to_theirs(&self, _: i16) -> Self::T {
        Self::T::default()
            .with_transactional_id(self.transactional_id.as_deref().map(transactional_id))
            .with_acks(self.acks)
            .with_timeout_ms(self.timeout_ms)
            .with_topic_data(all(&self.topic_data))
    }
}

theirs!(TopicProduceData => kp_pr::TopicProduceData, |t| {
    with_name(topic_name(&t.name)),
    with_topic_id(uuid(&t.topic_id)),
    with_partition_data(all(&t.partition_data)),
});

theirs!(PartitionProduceData => kp_pr::PartitionProduceData, |p| {
    with_index(p.index),
    with_records(p.records.as_ref().map(|r| r.to_bytes())),
});

impl Oracle for ProduceResponse {
    type T = kp_ps::ProduceResponse;
    fn random(g: &mut Gen, v: i16) -> Self {
        let partition = |g: &mut Gen| PartitionProduceResponse {
            index: g.i32(),
            error_code: g.i16(),
            base_offset: g.i64(),
            log_append_time_ms: g.i64(),
            log_start_offset: g.when(v >= 5, -1, Gen::i64),
            record_errors: g.when(v >= 8, vec![], |g| {
                g.vec(2, |g| BatchIndexAndErrorMessage {
                    batch_index: g.i32(),
                    batch_index_error_message: g.opt_string(true),
                })
            }),
            error_message: g.when(v >= 8, None, |g| g.opt_string(true)),
            current_leader: if v >= 10 && g.bool() {
                LeaderIdAndEpoch {
                    leader_id: g.i32(),
                    leader_epoch: g.i32(),
                }
            } else {
                LeaderIdAndEpoch::default()
            },
        };
        Self {
            responses: g.vec(3, |g| {
                let (name, topic_id) = random_topic_ref(g, v);
                TopicProduceResponse {
                    name,
                    topic_id,
                    partition_responses: g.vec(3, partition),
                }
            }),
            throttle_time_ms: g.i32(),
            node_endpoints: g.when(v >= 10, vec![], |g| g.vec(2, |g| random_broker(g, true))),
        }
    }
    fn to_theirs(&self, _: i16) -> Self::T {
        Self::T::default()
            .with_responses(all(&self.responses))
            .with_throttle_time_ms(self.throttle_time_ms)
            .with_node_endpoints(all(&self.node_endpoints))
    }
}

theirs!(TopicProduceResponse => kp_ps::TopicProduceResponse, |t| {
    with_name(topic_name(&t.name)),
    with_topic_id(uuid(&t.topic_id)),
    with_partition_responses(all(&t.partition_responses)),
});

theirs!(PartitionProduceResponse => kp_ps::PartitionProduceResponse, |p| {
    with_index(p.index),
    with_error_code(p.error_code),
    with_base_offset(p.base_offset),
    with_log_append_time_ms(p.log_append_time_ms),
    with_log_start_offset(p.log_start_offset),
    with_record_errors(all(&p.record_errors)),
    with_error_message(nullable_sb(&p.error_message)),
    with_current_leader(p.current_leader.theirs()),
});

theirs!(BatchIndexAndErrorMessage => kp_ps::BatchIndexAndErrorMessage, |e| {
    with_batch_index(e.batch_index),
    with_batch_index_error_message(nullable_sb(&e.batch_index_error_message)),
});

// ---------------------------------------------------------------------------------------------
// FindCoordinator: one struct for both shapes; below v4 exactly one result.

impl Oracle for FindCoordinatorResponse {
    type T = kp_fcs::FindCoordinatorResponse;
    fn random(g: &mut Gen, v: i16) -> Self {
        let coordinator = |g: &mut Gen| Coordinator {
            key: g.when(v >= 4, String::new(), Gen::string),
            node_id: g.i32(),
            host: g.string(),
            port: g.i32(),
            error_code: g.i16(),
            error_message: g.when(v >= 1, None, |g| g.opt_string(true)),
        };
        Self {
            throttle_time_ms: g.when(v >= 1, 0, Gen::i32),
            coordinators: if v >= 4 {
                g.vec(3, coordinator)
            } else {
                vec![coordinator(g)]
            },
        }
    }
    fn to_theirs(&self, v: i16) -> Self::T {
        let theirs = Self::T::default().with_throttle_time_ms(self.throttle_time_ms);
        if v >= 4 {
            theirs.with_coordinators(all(&self.coordinators))
        } else {
            let c = &self.coordinators[0];
            // v0 has no ErrorMessage: we leave it None, kafka-protocol at the schema's
            // non-null default, the empty string.
            let error_message = if v >= 1 {
                nullable_sb(&c.error_message)
            } else {
                Some(StrBytes::default())
            };
            theirs
                .with_error_code(c.error_code)
                .with_error_message(error_message)
                .with_node_id(BrokerId(c.node_id))
                .with_host(sb(&c.host))
                .with_port(c.port)
        }
    }
}

theirs!(Coordinator => kp_fcs::Coordinator, |c| {
    with_key(sb(&c.key)),
    with_node_id(BrokerId(c.node_id)),
    with_host(sb(&c.host)),
    with_port(c.port),
    with_error_code(c.error_code),
    with_error_message(nullable_sb(&c.error_message)),
});

// ---------------------------------------------------------------------------------------------
// AddPartitionsToTxn: one struct for both shapes; below v4 exactly one transaction's results.

fn random_topic_partition_errors(g: &mut Gen) -> TopicPartitionErrors {
    TopicPartitionErrors {
        name: g.string(),
        partitions: g.vec(3, |g| PartitionError {
            partition_index: g.i32(),
            error_code: g.i16(),
        }),
    }
}

theirs!(TopicPartitionErrors => kp_apts::AddPartitionsToTxnTopicResult, |t| {
    with_name(topic_name(&t.name)),
    with_results_by_partition(all(&t.partitions)),
});

theirs!(PartitionError => kp_apts::AddPartitionsToTxnPartitionResult, |p| {
    with_partition_index(p.partition_index),
    with_partition_error_code(p.error_code),
});

theirs!(AddPartitionsToTxnResult => kp_apts::AddPartitionsToTxnResult, |r| {
    with_transactional_id(transactional_id(&r.transactional_id)),
    with_topic_results(all(&r.topic_results)),
});

impl Oracle for AddPartitionsToTxnResponse {
    type T = kp_apts::AddPartitionsToTxnResponse;
    fn random(g: &mut Gen, v: i16) -> Self {
        let result = |g: &mut Gen| AddPartitionsToTxnResult {
            transactional_id: g.when(v >= 4, String::new(), Gen::string),
            topic_results: g.vec(3, random_topic_partition_errors),
        };
        Self {
            throttle_time_ms: g.i32(),
            error_code: g.when(v >= 4, 0, Gen::i16),
            results_by_transaction: if v >= 4 {
                g.vec(3, result)
            } else {
                vec![result(g)]
            },
        }
    }
    fn to_theirs(&self, v: i16) -> Self::T {
        let theirs = Self::T::default().with_throttle_time_ms(self.throttle_time_ms);
        if v >= 4 {
            theirs
                .with_error_code(self.error_code)
                .with_results_by_transaction(all(&self.results_by_transaction))
        } else {
            theirs.with_results_by_topic_v3_and_below(all(
                &self.results_by_transaction[0].topic_results
            ))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// AddOffsetsToTxn

impl Oracle for AddOffsetsToTxnResponse {
    type T = kp_aots::AddOffsetsToTxnResponse;
    fn random(g: &mut Gen, _: i16) -> Self {
        Self {
            throttle_time_ms: g.i32(),
            error_code: g.i16(),
        }
    }
    fn to_theirs(&self, _: i16) -> Self::T {
        Self::T::default()
            .with_throttle_time_ms(self.throttle_time_ms)
            .with_error_code(self.error_code)
    }
}

// ---------------------------------------------------------------------------------------------
// TxnOffsetCommit

impl Oracle for TxnOffsetCommitResponse {
    type T = kp_tocs::TxnOffsetCommitResponse;
    fn random(g: &mut Gen, _: i16) -> Self {
        Self {
            throttle_time_ms: g.i32(),
            topics: g.vec(3, random_topic_partition_errors),
        }
    }
    fn to_theirs(&self, _: i16) -> Self::T {
        Self::T::default()
            .with_throttle_time_ms(self.throttle_time_ms)
            .with_topics(all(&self.topics))
    }
}

theirs!(TopicPartitionErrors => kp_tocs::TxnOffsetCommitResponseTopic, |t| {
    with_name(topic_name(&t.name)),
    with_partitions(all(&t.partitions)),
});

theirs!(PartitionError => kp_tocs::TxnOffsetCommitResponsePartition, |p| {
    with_partition_index(p.partition_index),
    with_error_code(p.error_code),
});

// ---------------------------------------------------------------------------------------------
// EndTxn

impl Oracle for EndTxnResponse {
    type T = kp_ets::EndTxnResponse;
    fn random(g: &mut Gen, v: i16) -> Self {
        Self {
            throttle_time_ms: g.i32(),
            error_code: g.i16(),
            producer_id: g.when(v >= 5, -1, Gen::i64),
            producer_epoch: g.when(v >= 5, -1, Gen::i16),
        }
    }
    fn to_theirs(&self, _: i16) -> Self::T {
        Self::T::default()
            .with_throttle_time_ms(self.throttle_time_ms)
            .with_error_code(self.error_code)
            .with_producer_id(ProducerId(self.producer_id))
            .with_producer_epoch(self.producer_epoch)
    }
}

// ---------------------------------------------------------------------------------------------

/// One test per API: `name: Message(seed), ...;` checks each message with its seed.
macro_rules! oracle_tests {
    ($($test:ident: $($message:ident($seed:expr)),+;)+) => {
        $(
            #[test]
            fn $test() {
                $(check::<$message>($seed);)+
            }
        )+
    };
}

// Only Produce's request is hand-written; the others are kafka-protocol's own messages.
oracle_tests! {
    producer_api_versions_match_kafka_protocol: ApiVersionsResponse(0xa2);
    producer_metadata_matches_kafka_protocol: MetadataResponse(0x32);
    producer_init_producer_id_matches_kafka_protocol: InitProducerIdResponse(0x222);
    producer_produce_matches_kafka_protocol: ProduceRequest(0x01), ProduceResponse(0x02);
    producer_find_coordinator_matches_kafka_protocol: FindCoordinatorResponse(0x102);
    producer_add_partitions_to_txn_matches_kafka_protocol: AddPartitionsToTxnResponse(0x242);
    producer_add_offsets_to_txn_matches_kafka_protocol: AddOffsetsToTxnResponse(0x252);
    producer_txn_offset_commit_matches_kafka_protocol: TxnOffsetCommitResponse(0x282);
    producer_end_txn_matches_kafka_protocol: EndTxnResponse(0x262);
}
