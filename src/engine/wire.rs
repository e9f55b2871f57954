//! The wire adapter: the pure mapping between the engine's actions and events and the Kafka
//! messages that carry them (Produce, InitProducerId, FindCoordinator and the transactional
//! coordinator requests). No I/O and no tokio: the driver negotiates a version, sends what
//! this module builds and hands back what this module decodes, so every mapping is
//! unit-tested on the protocol structs and the driver only moves bytes.

use std::sync::Arc;

use bytes::Bytes;

use super::transaction::{CoordinatorKey, TxnRequest, TxnResponse};
use super::{PartitionResponse, ProducerIdentity};
use crate::error::Error;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::messages::add_offsets_to_txn::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse,
};
use crate::protocol::messages::add_partitions_to_txn::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction, TopicPartitionErrors,
};
use crate::protocol::messages::end_txn::{EndTxnRequest, EndTxnResponse};
use crate::protocol::messages::find_coordinator::{
    FindCoordinatorRequest, FindCoordinatorResponse,
};
use crate::protocol::messages::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use crate::protocol::messages::produce::{
    PartitionProduceData, ProduceRecords, ProduceRequest, ProduceResponse, TopicProduceData,
    ZSTD_MIN_VERSION,
};
use crate::protocol::messages::txn_offset_commit::{
    TxnOffsetCommitRequest, TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
};
use crate::protocol::record_batch::{Codec, SealedBatch};
use crate::protocol::versions::BrokerApiVersions;
use crate::protocol::{Decoder, Message};
use crate::types::{BrokerId, TopicPartition};

/// Produce v13 names topics by id; this producer names them, so it stays at v12.
const PRODUCE_VERSION_CAP: i16 = 12;

/// Transactional data under transactions v1 must not use Produce v12, which would add the
/// partition to the transaction implicitly (KIP-890).
const PRODUCE_VERSION_CAP_TRANSACTIONS_V1: i16 = 11;

/// Transactions v1 caps EndTxn and TxnOffsetCommit at v4 (v5 means v2: KIP-890).
const TXN_VERSION_CAP_TRANSACTIONS_V1: i16 = 4;

/// AddPartitionsToTxn v4+ is the brokers' batched form; clients use at most v3 (KIP-890).
const ADD_PARTITIONS_CLIENT_VERSION_CAP: i16 = 3;

/// `transaction.timeout.ms` as the wire's int32 (a larger setting saturates).
fn wire_timeout_ms(timeout_ms: u64) -> i32 {
    i32::try_from(timeout_ms).unwrap_or(i32::MAX)
}

/// The Produce request carrying `batches`, one per partition, grouped by topic in their order.
pub(crate) fn produce_request(
    batches: &[(TopicPartition, SealedBatch)],
    transactional_id: Option<String>,
    acks: i16,
    request_timeout_ms: u64,
) -> ProduceRequest {
    ProduceRequest {
        transactional_id,
        acks,
        timeout_ms: wire_timeout_ms(request_timeout_ms),
        topic_data: group_by_topic(batches),
    }
}

/// The highest Produce version this producer may use: v12 at most, v11 for transactional
/// data under transactions v1.
pub(crate) fn produce_version_cap(transactional_v1: bool) -> i16 {
    if transactional_v1 {
        PRODUCE_VERSION_CAP_TRANSACTIONS_V1
    } else {
        PRODUCE_VERSION_CAP
    }
}

/// Whether any of `batches` is zstd-compressed (it then needs Produce v7, KIP-110).
pub(crate) fn uses_zstd(batches: &[(TopicPartition, SealedBatch)]) -> bool {
    batches.iter().any(|(_, b)| b.codec() == Codec::Zstd)
}

/// The Produce version to send at on a broker with `versions`, never above `cap`. No common
/// version, or zstd batches for a broker without Produce v7, is an unsupported-version error
/// (fatal, T5), as in the Java client; the zstd one names the setting.
pub(crate) fn produce_version(
    versions: &BrokerApiVersions,
    cap: i16,
    zstd: bool,
) -> Result<i16, Error> {
    let version = versions
        .negotiate::<ProduceRequest>(Some(cap))
        .ok_or_else(|| Error::broker(ErrorCode::UNSUPPORTED_VERSION))?;
    if zstd && version < ZSTD_MIN_VERSION {
        return Err(Error::Broker {
            code: ErrorCode::UNSUPPORTED_VERSION,
            message: Some(format!(
                "compression.type=zstd needs Produce v{ZSTD_MIN_VERSION} (Kafka 2.1+); \
                 this broker takes at most v{version}"
            )),
        });
    }
    Ok(version)
}

/// Groups `(partition, batch)` pairs into Produce topic data, keeping their order.
fn group_by_topic(batches: &[(TopicPartition, SealedBatch)]) -> Vec<TopicProduceData> {
    let mut topics: Vec<TopicProduceData> = Vec::new();
    for (tp, batch) in batches {
        let partition = PartitionProduceData {
            index: tp.partition,
            // The stamped header (61 bytes, copied) and the body (shared, not copied).
            records: Some(ProduceRecords::from_parts(vec![
                Bytes::copy_from_slice(batch.header()),
                batch.body().clone(),
            ])),
        };
        match topics.iter_mut().find(|t| *t.name == *tp.topic) {
            Some(topic) => topic.partition_data.push(partition),
            None => topics.push(TopicProduceData {
                name: tp.topic.to_string(),
                partition_data: vec![partition],
                ..TopicProduceData::default()
            }),
        }
    }
    topics
}

/// Maps a Produce response onto the request's partitions, with the broker's throttle time
/// (KIP-219). A partition the request did not carry is left out. With acks=0 there is no
/// response: every batch counts as written with an unknown offset, as in the Java client.
pub(crate) fn decode_produce(
    body: &[u8],
    version: i16,
    batches: &[(TopicPartition, SealedBatch)],
    expects_response: bool,
) -> Result<(Vec<PartitionResponse>, u64), Error> {
    if !expects_response {
        let partitions = batches
            .iter()
            .map(|(tp, _)| PartitionResponse {
                partition: tp.clone(),
                error: ErrorCode::NONE,
                base_offset: -1,
                log_append_time: -1,
                log_start_offset: -1,
                message: None,
            })
            .collect();
        return Ok((partitions, 0));
    }
    let mut d = Decoder::new(body);
    let response = ProduceResponse::decode(&mut d, version)?;
    d.finish("ProduceResponse")?;
    let mut out = Vec::new();
    for topic in response.responses {
        for p in topic.partition_responses {
            let Some((tp, _)) = batches
                .iter()
                .find(|(tp, _)| *tp.topic == *topic.name && tp.partition == p.index)
            else {
                continue;
            };
            out.push(PartitionResponse {
                partition: tp.clone(),
                error: ErrorCode(p.error_code),
                base_offset: p.base_offset,
                log_append_time: p.log_append_time_ms,
                log_start_offset: p.log_start_offset,
                message: p.error_message,
            });
        }
    }
    Ok((out, u64::try_from(response.throttle_time_ms).unwrap_or(0)))
}

/// InitProducerId for an idempotent producer: no transactional id, a fresh id and epoch.
pub(crate) fn idempotent_init_producer_id(transaction_timeout_ms: u64) -> InitProducerIdRequest {
    InitProducerIdRequest {
        transactional_id: None,
        transaction_timeout_ms: wire_timeout_ms(transaction_timeout_ms),
        producer_id: -1,
        producer_epoch: -1,
    }
}

/// The identity an idempotent InitProducerId answer carries, or its error.
pub(crate) fn producer_id_answer(
    response: InitProducerIdResponse,
) -> Result<ProducerIdentity, Error> {
    match ErrorCode(response.error_code) {
        ErrorCode::NONE => Ok(ProducerIdentity {
            producer_id: response.producer_id,
            epoch: response.producer_epoch,
        }),
        code => Err(Error::broker(code)),
    }
}

/// FindCoordinator for one key (v4+ carries a list of keys, KIP-699; older versions one).
pub(crate) fn find_coordinator_request(key: CoordinatorKey) -> FindCoordinatorRequest {
    let (key_type, key) = match key {
        CoordinatorKey::Transaction(id) => (FindCoordinatorRequest::KEY_TYPE_TRANSACTION, id),
        CoordinatorKey::Group(id) => (FindCoordinatorRequest::KEY_TYPE_GROUP, id),
    };
    FindCoordinatorRequest::single(key_type, key)
}

/// A coordinator FindCoordinator named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FoundCoordinator {
    /// Its node id.
    pub node_id: BrokerId,
    /// `host:port`: it may not be in the producer's metadata yet.
    pub address: String,
}

/// The coordinator a FindCoordinator answer names, or its error.
pub(crate) fn coordinator_answer(
    response: FindCoordinatorResponse,
) -> Result<FoundCoordinator, Error> {
    match response.coordinators.into_iter().next() {
        Some(c) if c.error_code == 0 => Ok(FoundCoordinator {
            node_id: c.node_id,
            address: format!("{}:{}", c.host, c.port),
        }),
        Some(c) => Err(Error::Broker {
            code: ErrorCode(c.error_code),
            message: c.error_message,
        }),
        None => Err(Error::Timeout(
            "FindCoordinator answered without a coordinator".into(),
        )),
    }
}

/// A coordinator request as its wire message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CoordinatorMessage {
    /// InitProducerId with the transactional id.
    InitProducerId(InitProducerIdRequest),
    /// AddPartitionsToTxn, with the partitions asked for (a top-level error applies to all).
    AddPartitions {
        /// The message.
        message: AddPartitionsToTxnRequest,
        /// The partitions it adds, in the engine's order.
        partitions: Vec<TopicPartition>,
    },
    /// AddOffsetsToTxn.
    AddOffsets(AddOffsetsToTxnRequest),
    /// TxnOffsetCommit, to the group coordinator.
    TxnOffsetCommit(TxnOffsetCommitRequest),
    /// EndTxn.
    EndTxn(EndTxnRequest),
}

impl CoordinatorMessage {
    /// The message for `body` of the producer with `transactional_id`.
    pub fn new(body: TxnRequest, transactional_id: String, transaction_timeout_ms: u64) -> Self {
        match body {
            TxnRequest::InitProducerId { current } => Self::InitProducerId(InitProducerIdRequest {
                transactional_id: Some(transactional_id),
                transaction_timeout_ms: wire_timeout_ms(transaction_timeout_ms),
                producer_id: current.map_or(-1, |c| c.producer_id),
                producer_epoch: current.map_or(-1, |c| c.epoch),
            }),
            TxnRequest::AddPartitions {
                identity,
                partitions,
            } => {
                let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
                for tp in &partitions {
                    match topics.iter_mut().find(|t| *t.name == *tp.topic) {
                        Some(t) => t.partitions.push(tp.partition),
                        None => topics.push(AddPartitionsToTxnTopic {
                            name: tp.topic.to_string(),
                            partitions: vec![tp.partition],
                        }),
                    }
                }
                let message = AddPartitionsToTxnRequest {
                    transactions: vec![AddPartitionsToTxnTransaction {
                        transactional_id,
                        producer_id: identity.producer_id,
                        producer_epoch: identity.epoch,
                        verify_only: false,
                        topics,
                    }],
                };
                Self::AddPartitions {
                    message,
                    partitions,
                }
            }
            TxnRequest::AddOffsets { identity, group_id } => {
                Self::AddOffsets(AddOffsetsToTxnRequest {
                    transactional_id,
                    producer_id: identity.producer_id,
                    producer_epoch: identity.epoch,
                    group_id,
                })
            }
            TxnRequest::TxnOffsetCommit {
                identity,
                group,
                offsets,
            } => {
                let mut topics: Vec<TxnOffsetCommitRequestTopic> = Vec::new();
                for o in offsets {
                    let partition = TxnOffsetCommitRequestPartition {
                        partition_index: o.partition.partition,
                        committed_offset: o.offset,
                        committed_leader_epoch: -1,
                        committed_metadata: o.metadata,
                    };
                    match topics.iter_mut().find(|t| *t.name == *o.partition.topic) {
                        Some(t) => t.partitions.push(partition),
                        None => topics.push(TxnOffsetCommitRequestTopic {
                            name: o.partition.topic.to_string(),
                            partitions: vec![partition],
                        }),
                    }
                }
                Self::TxnOffsetCommit(TxnOffsetCommitRequest {
                    transactional_id,
                    group_id: group.group_id,
                    producer_id: identity.producer_id,
                    producer_epoch: identity.epoch,
                    generation_id: group.generation_id,
                    member_id: group.member_id,
                    group_instance_id: group.group_instance_id,
                    topics,
                })
            }
            TxnRequest::EndTxn { identity, commit } => Self::EndTxn(EndTxnRequest {
                transactional_id,
                producer_id: identity.producer_id,
                producer_epoch: identity.epoch,
                committed: commit,
            }),
        }
    }

    /// The highest version the message may go at (`None`: the highest both sides support).
    pub fn version_cap(&self, transactions_v2: bool) -> Option<i16> {
        match self {
            Self::InitProducerId(_) | Self::AddOffsets(_) => None,
            Self::AddPartitions { .. } => Some(ADD_PARTITIONS_CLIENT_VERSION_CAP),
            Self::TxnOffsetCommit(_) | Self::EndTxn(_) => {
                (!transactions_v2).then_some(TXN_VERSION_CAP_TRANSACTIONS_V1)
            }
        }
    }
}

/// A transactional InitProducerId answer, and whether the broker that gave it speaks
/// transactions v2 (KIP-890).
pub(crate) fn init_producer_id_answer(
    response: InitProducerIdResponse,
    versions: &BrokerApiVersions,
) -> TxnResponse {
    TxnResponse::InitProducerId {
        error: ErrorCode(response.error_code),
        identity: ProducerIdentity {
            producer_id: response.producer_id,
            epoch: response.producer_epoch,
        },
        transactions_v2: versions.transactions_v2(),
    }
}

/// An AddPartitionsToTxn answer per partition: a top-level error, or an answer without
/// results, applies to every partition asked for.
pub(crate) fn add_partitions_answer(
    response: AddPartitionsToTxnResponse,
    partitions: Vec<TopicPartition>,
) -> TxnResponse {
    let top = ErrorCode(response.error_code);
    let mut results = partition_codes(
        response
            .results_by_transaction
            .into_iter()
            .flat_map(|t| t.topic_results)
            .collect(),
    );
    if !top.is_ok() || results.is_empty() {
        let code = if top.is_ok() {
            ErrorCode::UNKNOWN_SERVER_ERROR
        } else {
            top
        };
        results = partitions.into_iter().map(|tp| (tp, code)).collect();
    }
    TxnResponse::AddPartitions(results)
}

/// An AddOffsetsToTxn answer.
pub(crate) fn add_offsets_answer(response: AddOffsetsToTxnResponse) -> TxnResponse {
    TxnResponse::AddOffsets(ErrorCode(response.error_code))
}

/// A TxnOffsetCommit answer per partition.
pub(crate) fn txn_offset_commit_answer(response: TxnOffsetCommitResponse) -> TxnResponse {
    TxnResponse::TxnOffsetCommit(partition_codes(response.topics))
}

/// An EndTxn answer; v5 (transactions v2) carries the identity for the next transaction.
pub(crate) fn end_txn_answer(response: EndTxnResponse) -> TxnResponse {
    let identity = (response.producer_id >= 0).then_some(ProducerIdentity {
        producer_id: response.producer_id,
        epoch: response.producer_epoch,
    });
    TxnResponse::EndTxn {
        error: ErrorCode(response.error_code),
        identity,
    }
}

fn partition_codes(topics: Vec<TopicPartitionErrors>) -> Vec<(TopicPartition, ErrorCode)> {
    topics
        .into_iter()
        .flat_map(|t| {
            let topic: Arc<str> = Arc::from(t.name.as_str());
            t.partitions.into_iter().map(move |p| {
                (
                    TopicPartition::new(Arc::clone(&topic), p.partition_index),
                    ErrorCode(p.error_code),
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
