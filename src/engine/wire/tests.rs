//! The wire adapter against the protocol structs: what each engine request becomes on the
//! wire (encoded and decoded back at the versions it goes at), and what each answer, error
//! answers included, becomes for the engine.

use super::*;
use crate::protocol::ApiKey;
use crate::protocol::messages::add_partitions_to_txn::{AddPartitionsToTxnResult, PartitionError};
use crate::protocol::messages::api_versions::{
    ApiVersion, ApiVersionsResponse, FinalizedFeatureKey,
};
use crate::protocol::messages::produce::{PartitionProduceResponse, TopicProduceResponse};
use crate::protocol::messages::test_support::{decode, encode, through_kafka_protocol};
use crate::protocol::record_batch::{BatchBuilder, Compression};
use crate::protocol::versions::TRANSACTION_VERSION_FEATURE;
use crate::types::{ConsumerGroupMetadata, OffsetToCommit};

const IDENTITY: ProducerIdentity = ProducerIdentity {
    producer_id: 42,
    epoch: 3,
};

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

fn batch(compression: Compression) -> SealedBatch {
    // Compressible, so a codec other than none is kept.
    let mut builder = BatchBuilder::new(1_000, 2_048);
    builder.append(1_000, Some(b"key"), Some(&[b'x'; 2_000]), &[]);
    builder.seal_compressed(false, compression)
}

/// Encodes `message` at `version` and decodes it back: what the broker reads.
fn over_the_wire<M: Message + Clone + PartialEq + std::fmt::Debug>(message: &M, version: i16) -> M {
    decode::<M>(&encode(message, version), version).expect("the encoding decodes")
}

fn s(value: &'static str) -> StrBytes {
    StrBytes::from_static_str(value)
}

/// A broker advertising `apis` as (key, max version), with `transaction.version` finalized at
/// `transaction_version`.
fn broker(apis: &[(ApiKey, i16)], transaction_version: i16) -> BrokerApiVersions {
    BrokerApiVersions::from_response(&ApiVersionsResponse {
        api_keys: apis
            .iter()
            .map(|&(key, max)| ApiVersion {
                api_key: key as i16,
                min_version: 0,
                max_version: max,
            })
            .collect(),
        finalized_features_epoch: 1,
        finalized_features: vec![FinalizedFeatureKey {
            name: TRANSACTION_VERSION_FEATURE.into(),
            max_version_level: transaction_version,
            min_version_level: transaction_version,
        }],
        ..ApiVersionsResponse::default()
    })
}

#[test]
fn produce_groups_batches_by_topic_in_their_order_and_round_trips() {
    let batches = vec![
        (tp("a", 1), batch(Compression::None)),
        (tp("b", 0), batch(Compression::None)),
        (tp("a", 0), batch(Compression::None)),
    ];
    let request = produce_request(&batches, Some("txn".into()), -1, u64::MAX);
    assert_eq!(request.timeout_ms, i32::MAX, "a larger timeout saturates");
    assert_eq!(request.acks, -1);
    let layout: Vec<(&str, Vec<i32>)> = request
        .topic_data
        .iter()
        .map(|t| {
            (
                t.name.as_str(),
                t.partition_data.iter().map(|p| p.index).collect(),
            )
        })
        .collect();
    assert_eq!(layout, vec![("a", vec![1, 0]), ("b", vec![0])]);
    for version in [3, 8, 9, PRODUCE_VERSION_CAP] {
        let read = over_the_wire(&request, version);
        assert_eq!(read, request, "v{version}");
        let records = read.topic_data[0].partition_data[0]
            .records
            .as_ref()
            .unwrap();
        let sent = &batches[0].1;
        assert_eq!(records.len(), sent.header().len() + sent.body().len());
    }
}

#[test]
fn produce_versions_are_capped_for_transactions_v1_and_topic_ids() {
    assert_eq!(produce_version_cap(false), 12);
    assert_eq!(produce_version_cap(true), 11);
    let new_broker = broker(&[(ApiKey::Produce, 13)], 2);
    assert_eq!(
        produce_version(&new_broker, produce_version_cap(false), false).unwrap(),
        12
    );
    assert_eq!(
        produce_version(&new_broker, produce_version_cap(true), true).unwrap(),
        11
    );
    let no_produce = broker(&[(ApiKey::Metadata, 12)], 0);
    let error = produce_version(&no_produce, 12, false).unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::UNSUPPORTED_VERSION));
}

#[test]
fn zstd_for_a_broker_without_produce_v7_is_unsupported_and_names_the_setting() {
    let zstd = vec![(tp("a", 0), batch(Compression::Zstd { level: 3 }))];
    let plain = vec![(tp("a", 0), batch(Compression::None))];
    assert!(uses_zstd(&zstd));
    assert!(!uses_zstd(&plain));
    let old_broker = broker(&[(ApiKey::Produce, 6)], 0);
    assert_eq!(
        produce_version(&old_broker, 12, uses_zstd(&plain)).unwrap(),
        6
    );
    let error = produce_version(&old_broker, 12, uses_zstd(&zstd)).unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::UNSUPPORTED_VERSION));
    assert!(
        error.to_string().contains("compression.type=zstd"),
        "{error}"
    );
    let zstd_broker = broker(&[(ApiKey::Produce, 7)], 0);
    assert_eq!(produce_version(&zstd_broker, 12, true).unwrap(), 7);
}

#[test]
fn produce_answers_map_onto_the_request_partitions() {
    let batches = vec![
        (tp("a", 0), batch(Compression::None)),
        (tp("a", 1), batch(Compression::None)),
    ];
    let response = ProduceResponse {
        responses: vec![
            TopicProduceResponse {
                name: "a".into(),
                partition_responses: vec![
                    PartitionProduceResponse {
                        index: 1,
                        error_code: ErrorCode::NOT_LEADER_OR_FOLLOWER.0,
                        base_offset: -1,
                        log_start_offset: -1,
                        error_message: Some("moved".into()),
                        ..PartitionProduceResponse::default()
                    },
                    PartitionProduceResponse {
                        index: 0,
                        base_offset: 17,
                        log_append_time_ms: 5,
                        log_start_offset: 2,
                        ..PartitionProduceResponse::default()
                    },
                ],
                ..TopicProduceResponse::default()
            },
            // Not in the request: left out.
            TopicProduceResponse {
                name: "other".into(),
                partition_responses: vec![PartitionProduceResponse::default()],
                ..TopicProduceResponse::default()
            },
        ],
        throttle_time_ms: 250,
        ..ProduceResponse::default()
    };
    // From v5 (log_start_offset) and v8 (error_message), so every field goes over the wire.
    for version in [8, 9, 12] {
        let body = encode(&response, version);
        let (partitions, throttle) = decode_produce(&body, version, &batches, true).unwrap();
        assert_eq!(throttle, 250);
        let got: Vec<_> = partitions
            .iter()
            .map(|p| {
                (
                    p.partition.clone(),
                    p.error,
                    p.base_offset,
                    p.log_start_offset,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (tp("a", 1), ErrorCode::NOT_LEADER_OR_FOLLOWER, -1, -1),
                (tp("a", 0), ErrorCode::NONE, 17, 2),
            ],
            "v{version}"
        );
        assert_eq!(partitions[0].message.as_deref(), Some("moved"));
        assert_eq!(partitions[1].log_append_time, 5);
        // Trailing bytes are a broken answer, not a partial one.
        let mut longer = body.clone();
        longer.push(0);
        assert!(decode_produce(&longer, version, &batches, true).is_err());
        assert!(decode_produce(&body[..body.len() - 1], version, &batches, true).is_err());
    }
}

#[test]
fn acks_0_counts_every_batch_written_with_an_unknown_offset() {
    let batches = vec![
        (tp("a", 0), batch(Compression::None)),
        (tp("b", 3), batch(Compression::None)),
    ];
    let (partitions, throttle) = decode_produce(&[], 9, &batches, false).unwrap();
    assert_eq!(throttle, 0);
    // Offsets, append time and log start all unknown (-1, the schema's "none"), as no
    // answer came.
    let got: Vec<_> = partitions
        .iter()
        .map(|p| {
            let unknown = (p.base_offset, p.log_append_time, p.log_start_offset);
            (p.partition.clone(), p.error, unknown, p.message.clone())
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (tp("a", 0), ErrorCode::NONE, (-1, -1, -1), None),
            (tp("b", 3), ErrorCode::NONE, (-1, -1, -1), None)
        ]
    );
}

#[test]
fn idempotent_init_producer_id_asks_for_a_fresh_identity() {
    let request = idempotent_init_producer_id(60_000);
    assert_eq!(request.transactional_id, None);
    assert_eq!(
        (request.producer_id, request.producer_epoch),
        (ProducerId(-1), -1)
    );
    assert_eq!(request.transaction_timeout_ms, 60_000);
    for version in 0..=5 {
        assert_eq!(
            through_kafka_protocol(&request, version),
            request,
            "v{version}"
        );
    }
    let answer = |error_code: i16| InitProducerIdResponse {
        throttle_time_ms: 0,
        error_code,
        producer_id: 9,
        producer_epoch: 1,
    };
    assert_eq!(
        producer_id_answer(answer(0)).unwrap(),
        ProducerIdentity {
            producer_id: 9,
            epoch: 1
        }
    );
    let error = producer_id_answer(answer(ErrorCode::CLUSTER_AUTHORIZATION_FAILED.0)).unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::CLUSTER_AUTHORIZATION_FAILED));
}

#[test]
fn transactional_init_producer_id_carries_the_identity_to_bump() {
    let first = CoordinatorMessage::new(
        TxnRequest::InitProducerId { current: None },
        "t-1".into(),
        30_000,
    );
    let CoordinatorMessage::InitProducerId(first) = first else {
        panic!("{first:?}")
    };
    assert_eq!(first.transactional_id, Some(TransactionalId(s("t-1"))));
    assert_eq!(
        (first.producer_id, first.producer_epoch),
        (ProducerId(-1), -1)
    );
    assert_eq!(first.transaction_timeout_ms, 30_000);
    let bump = CoordinatorMessage::new(
        TxnRequest::InitProducerId {
            current: Some(IDENTITY),
        },
        "t-1".into(),
        30_000,
    );
    assert_eq!(bump.version_cap(false), None);
    let CoordinatorMessage::InitProducerId(bump) = bump else {
        panic!("{bump:?}")
    };
    assert_eq!((bump.producer_id, bump.producer_epoch), (ProducerId(42), 3));
    // KIP-360: the current identity goes out from v3.
    for version in 3..=5 {
        let sent = init_producer_id_at(bump.clone(), version);
        assert_eq!(sent, bump, "v{version}");
        assert_eq!(through_kafka_protocol(&sent, version), bump, "v{version}");
    }
    // Below v3 it has no field (the generated encoder refuses it): the bump goes as a plain
    // InitProducerId of the transactional id, which bumps its epoch there.
    for version in 0..=2 {
        let sent = init_producer_id_at(bump.clone(), version);
        assert_eq!(sent, first, "v{version}");
        assert_eq!(through_kafka_protocol(&sent, version), first, "v{version}");
    }
    let answer = InitProducerIdResponse {
        throttle_time_ms: 0,
        error_code: ErrorCode::CONCURRENT_TRANSACTIONS.0,
        producer_id: 42,
        producer_epoch: 4,
    };
    let v2_broker = broker(
        &[
            (ApiKey::Produce, 12),
            (ApiKey::EndTxn, 5),
            (ApiKey::TxnOffsetCommit, 5),
        ],
        2,
    );
    let v1_broker = broker(
        &[
            (ApiKey::Produce, 12),
            (ApiKey::EndTxn, 5),
            (ApiKey::TxnOffsetCommit, 5),
        ],
        1,
    );
    for (versions, v2) in [(v2_broker, true), (v1_broker, false)] {
        let TxnResponse::InitProducerId {
            error,
            identity,
            transactions_v2,
        } = init_producer_id_answer(answer.clone(), &versions)
        else {
            panic!("not an InitProducerId answer")
        };
        assert_eq!(error, ErrorCode::CONCURRENT_TRANSACTIONS);
        assert_eq!(
            identity,
            ProducerIdentity {
                producer_id: 42,
                epoch: 4
            }
        );
        assert_eq!(transactions_v2, v2);
    }
}

#[test]
fn add_partitions_groups_by_topic_and_a_top_level_error_applies_to_all() {
    let partitions = vec![tp("a", 0), tp("b", 1), tp("a", 2)];
    let message = CoordinatorMessage::new(
        TxnRequest::AddPartitions {
            identity: IDENTITY,
            partitions: partitions.clone(),
        },
        "t-1".into(),
        0,
    );
    assert_eq!(message.version_cap(true), Some(3));
    assert_eq!(message.version_cap(false), Some(3));
    let CoordinatorMessage::AddPartitions {
        message,
        partitions: asked,
    } = message
    else {
        panic!("{message:?}")
    };
    assert_eq!(asked, partitions);
    // The client's form (v0–3): one transaction's fields at the top level.
    assert!(message.transactions.is_empty());
    assert_eq!(
        message.v3_and_below_transactional_id,
        TransactionalId(s("t-1"))
    );
    assert_eq!(
        (
            message.v3_and_below_producer_id,
            message.v3_and_below_producer_epoch
        ),
        (ProducerId(42), 3)
    );
    let topics: Vec<_> = message
        .v3_and_below_topics
        .iter()
        .map(|t| (&**t.name, t.partitions.clone()))
        .collect();
    assert_eq!(topics, vec![("a", vec![0, 2]), ("b", vec![1])]);
    for version in 0..=ADD_PARTITIONS_CLIENT_VERSION_CAP {
        assert_eq!(
            through_kafka_protocol(&message, version),
            message,
            "v{version}"
        );
    }

    let per_partition = AddPartitionsToTxnResponse {
        throttle_time_ms: 0,
        error_code: 0,
        results_by_transaction: vec![AddPartitionsToTxnResult {
            transactional_id: "t-1".into(),
            topic_results: vec![TopicPartitionErrors {
                name: "a".into(),
                partitions: vec![
                    PartitionError {
                        partition_index: 0,
                        error_code: 0,
                    },
                    PartitionError {
                        partition_index: 2,
                        error_code: ErrorCode::CONCURRENT_TRANSACTIONS.0,
                    },
                ],
            }],
        }],
    };
    let TxnResponse::AddPartitions(results) =
        add_partitions_answer(per_partition, partitions.clone())
    else {
        panic!("not an AddPartitions answer")
    };
    assert_eq!(
        results,
        vec![
            (tp("a", 0), ErrorCode::NONE),
            (tp("a", 2), ErrorCode::CONCURRENT_TRANSACTIONS)
        ]
    );
    let top_level = AddPartitionsToTxnResponse {
        error_code: ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.0,
        ..AddPartitionsToTxnResponse::default()
    };
    let TxnResponse::AddPartitions(results) = add_partitions_answer(top_level, partitions.clone())
    else {
        panic!("not an AddPartitions answer")
    };
    assert_eq!(results.len(), 3);
    assert!(
        results
            .iter()
            .all(|(_, code)| *code == ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    );
    // An answer with neither an error nor results says nothing about the partitions: none
    // of them counts as added.
    let TxnResponse::AddPartitions(results) =
        add_partitions_answer(AddPartitionsToTxnResponse::default(), partitions)
    else {
        panic!("not an AddPartitions answer")
    };
    assert!(
        results
            .iter()
            .all(|(_, code)| *code == ErrorCode::UNKNOWN_SERVER_ERROR)
    );
}

#[test]
fn add_offsets_names_the_group_and_maps_its_error() {
    let message = CoordinatorMessage::new(
        TxnRequest::AddOffsets {
            identity: IDENTITY,
            group_id: "g".into(),
        },
        "t-1".into(),
        0,
    );
    assert_eq!(message.version_cap(false), None);
    let CoordinatorMessage::AddOffsets(message) = message else {
        panic!("{message:?}")
    };
    assert_eq!(
        message,
        AddOffsetsToTxnRequest::default()
            .with_transactional_id(TransactionalId(s("t-1")))
            .with_producer_id(ProducerId(42))
            .with_producer_epoch(3)
            .with_group_id(GroupId(s("g")))
    );
    for version in 0..=4 {
        assert_eq!(
            through_kafka_protocol(&message, version),
            message,
            "v{version}"
        );
    }
    let answer = AddOffsetsToTxnResponse {
        throttle_time_ms: 0,
        error_code: ErrorCode::GROUP_AUTHORIZATION_FAILED.0,
    };
    assert!(matches!(
        add_offsets_answer(answer),
        TxnResponse::AddOffsets(ErrorCode::GROUP_AUTHORIZATION_FAILED)
    ));
}

#[test]
fn txn_offset_commit_carries_the_group_member_and_is_capped_under_v1() {
    let group = ConsumerGroupMetadata {
        group_id: "g".into(),
        generation_id: 5,
        member_id: "m-1".into(),
        group_instance_id: Some("i-1".into()),
    };
    let offsets = vec![
        OffsetToCommit {
            partition: tp("a", 0),
            offset: 10,
            metadata: None,
            leader_epoch: None,
        },
        OffsetToCommit {
            partition: tp("b", 0),
            offset: 20,
            metadata: Some("m".into()),
            leader_epoch: Some(4),
        },
        OffsetToCommit {
            partition: tp("a", 1),
            offset: 30,
            metadata: None,
            leader_epoch: None,
        },
    ];
    let message = CoordinatorMessage::new(
        TxnRequest::TxnOffsetCommit {
            identity: IDENTITY,
            group,
            offsets,
        },
        "t-1".into(),
        0,
    );
    assert_eq!(message.version_cap(false), Some(4));
    assert_eq!(message.version_cap(true), None);
    let CoordinatorMessage::TxnOffsetCommit(message) = message else {
        panic!("{message:?}")
    };
    assert_eq!(message.group_id, GroupId(s("g")));
    assert_eq!(message.generation_id, 5);
    assert_eq!(message.member_id, s("m-1"));
    assert_eq!(message.group_instance_id, Some(s("i-1")));
    let topics: Vec<_> = message
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| (p.partition_index, p.committed_offset));
            (&**t.name, partitions.collect::<Vec<_>>())
        })
        .collect();
    assert_eq!(
        topics,
        vec![("a", vec![(0, 10), (1, 30)]), ("b", vec![(0, 20)])]
    );
    // KIP-320: the epoch of the last record processed, -1 where unknown.
    let epochs: Vec<i32> = message
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.committed_leader_epoch)
        .collect();
    assert_eq!(epochs, vec![-1, -1, 4]);
    assert_eq!(
        message.topics[1].partitions[0].committed_metadata,
        Some(s("m"))
    );
    assert_eq!(message.topics[0].partitions[0].committed_metadata, None);
    // KIP-447: the member's generation and id go out from v3.
    for version in 3..=5 {
        let sent = txn_offset_commit_at(message.clone(), version).unwrap();
        assert_eq!(
            through_kafka_protocol(&sent, version),
            message,
            "v{version}"
        );
    }
    // Below v3 a member's commit could not be fenced: refused as unsupported (fatal, T5), not
    // sent without the member.
    for version in 0..=2 {
        let error = txn_offset_commit_at(message.clone(), version).unwrap_err();
        assert_eq!(
            error.code(),
            Some(ErrorCode::UNSUPPORTED_VERSION),
            "v{version}"
        );
        assert!(error.is_fatal());
    }
    // Offsets of no member (manual assignment) go at any version.
    let no_member = CoordinatorMessage::new(
        TxnRequest::TxnOffsetCommit {
            identity: IDENTITY,
            group: ConsumerGroupMetadata {
                group_id: "g".into(),
                generation_id: -1,
                member_id: String::new(),
                group_instance_id: None,
            },
            offsets: vec![OffsetToCommit {
                partition: tp("a", 0),
                offset: 10,
                metadata: None,
                leader_epoch: None,
            }],
        },
        "t-1".into(),
        0,
    );
    let CoordinatorMessage::TxnOffsetCommit(no_member) = no_member else {
        panic!("{no_member:?}")
    };
    for version in 0..=5 {
        let sent = txn_offset_commit_at(no_member.clone(), version).unwrap();
        assert_eq!(
            through_kafka_protocol(&sent, version),
            no_member,
            "v{version}"
        );
    }
    // Any one of the member's fields makes it a member's commit.
    let mut generation = no_member.clone();
    generation.generation_id = 3;
    let mut member_id = no_member.clone();
    member_id.member_id = s("m-1");
    let mut instance = no_member.clone();
    instance.group_instance_id = Some(s("i-1"));
    for member in [generation, member_id, instance] {
        assert!(
            txn_offset_commit_at(member.clone(), 2).is_err(),
            "{member:?}"
        );
    }
    let answer = TxnOffsetCommitResponse {
        throttle_time_ms: 0,
        topics: vec![TopicPartitionErrors {
            name: "a".into(),
            partitions: vec![PartitionError {
                partition_index: 1,
                error_code: ErrorCode::ILLEGAL_GENERATION.0,
            }],
        }],
    };
    let TxnResponse::TxnOffsetCommit(results) = txn_offset_commit_answer(answer) else {
        panic!("not a TxnOffsetCommit answer")
    };
    assert_eq!(results, vec![(tp("a", 1), ErrorCode::ILLEGAL_GENERATION)]);
}

#[test]
fn end_txn_is_capped_under_v1_and_takes_the_next_identity_from_v5() {
    for commit in [true, false] {
        let message = CoordinatorMessage::new(
            TxnRequest::EndTxn {
                identity: IDENTITY,
                commit,
            },
            "t-1".into(),
            0,
        );
        assert_eq!(message.version_cap(false), Some(4));
        assert_eq!(message.version_cap(true), None);
        let CoordinatorMessage::EndTxn(message) = message else {
            panic!("{message:?}")
        };
        assert_eq!(
            message,
            EndTxnRequest::default()
                .with_transactional_id(TransactionalId(s("t-1")))
                .with_producer_id(ProducerId(42))
                .with_producer_epoch(3)
                .with_committed(commit)
        );
        for version in 0..=5 {
            assert_eq!(
                through_kafka_protocol(&message, version),
                message,
                "v{version}"
            );
        }
    }
    let v5 = EndTxnResponse {
        throttle_time_ms: 0,
        error_code: 0,
        producer_id: 42,
        producer_epoch: 4,
    };
    assert!(matches!(
        end_txn_answer(v5),
        TxnResponse::EndTxn {
            error: ErrorCode::NONE,
            identity: Some(ProducerIdentity {
                producer_id: 42,
                epoch: 4
            })
        }
    ));
    // Before v5 the answer carries no identity (the decoder leaves -1).
    let v4 = EndTxnResponse {
        error_code: ErrorCode::INVALID_TXN_STATE.0,
        ..EndTxnResponse::default()
    };
    assert!(matches!(
        end_txn_answer(decode(&encode(&v4, 4), 4).unwrap()),
        TxnResponse::EndTxn {
            error: ErrorCode::INVALID_TXN_STATE,
            identity: None
        }
    ));
}
