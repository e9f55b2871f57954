//! The wire adapter: the pure mapping between the engine's actions and events and the Kafka
//! messages that carry them (Produce, InitProducerId, FindCoordinator and the transactional
//! coordinator requests). No I/O and no tokio: the driver negotiates a version, sends what
//! this module builds and hands back what this module decodes, so every mapping is
//! unit-tested on the protocol structs and the driver only moves bytes.

use std::sync::Arc;

use bytes::Bytes;

use super::transaction::{TxnRequest, TxnResponse};
use super::{PartitionResponse, ProducerIdentity};
use crate::error::Error;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::messages::add_offsets_to_txn::AddOffsetsToTxnResponse;
use crate::protocol::messages::add_partitions_to_txn::{
    AddPartitionsToTxnResponse, TopicPartitionErrors,
};
use crate::protocol::messages::end_txn::EndTxnResponse;
use crate::protocol::messages::init_producer_id::InitProducerIdResponse;
use crate::protocol::messages::produce::{
    PartitionProduceData, ProduceRecords, ProduceRequest, ProduceResponse, TopicProduceData,
    ZSTD_MIN_VERSION,
};
use crate::protocol::messages::txn_offset_commit::TxnOffsetCommitResponse;
use crate::protocol::record_batch::{Codec, SealedBatch};
use crate::protocol::versions::BrokerApiVersions;
use crate::protocol::{Decoder, Message};
use crate::types::TopicPartition;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, GroupId,
    InitProducerIdRequest, ProducerId, TopicName, TransactionalId, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;

/// Produce v13 names topics by id; this producer names them, so it stays at v12.
const PRODUCE_VERSION_CAP: i16 = 12;

/// Transactional data under transactions v1 must not use Produce v12, which would add the
/// partition to the transaction implicitly (KIP-890).
const PRODUCE_VERSION_CAP_TRANSACTIONS_V1: i16 = 11;

/// Transactions v1 caps EndTxn and TxnOffsetCommit at v4 (v5 means v2: KIP-890).
const TXN_VERSION_CAP_TRANSACTIONS_V1: i16 = 4;

/// AddPartitionsToTxn v4+ is the brokers' batched form; clients use at most v3 (KIP-890).
const ADD_PARTITIONS_CLIENT_VERSION_CAP: i16 = 3;

/// InitProducerId v3 carries the producer's current id and epoch (KIP-360).
const INIT_PRODUCER_ID_CURRENT_FROM: i16 = 3;

/// TxnOffsetCommit v3 carries the group member's generation and ids (KIP-447).
const TXN_OFFSET_COMMIT_MEMBER_FROM: i16 = 3;

/// A string field of a generated message.
fn wire_str(value: impl Into<String>) -> StrBytes {
    StrBytes::from_string(value.into())
}

/// An UNSUPPORTED_VERSION error (fatal, T5) naming what the broker's versions cannot carry.
fn unsupported(message: String) -> Error {
    Error::Broker {
        code: ErrorCode::UNSUPPORTED_VERSION,
        message: Some(message),
    }
}

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
    InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(wire_timeout_ms(transaction_timeout_ms))
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
}

/// `request` as it goes at `version`. The current identity of an epoch bump goes from v3
/// (KIP-360); below v3 the request has no such fields, and the coordinator bumps the epoch of
/// the transactional id it holds on every InitProducerId, which is the bump asked for, so the
/// request goes without them.
pub(crate) fn init_producer_id_at(
    request: InitProducerIdRequest,
    version: i16,
) -> InitProducerIdRequest {
    if version >= INIT_PRODUCER_ID_CURRENT_FROM {
        request
    } else {
        request
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
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

/// A coordinator request as its wire message, at the newest version spoken (InitProducerId
/// and TxnOffsetCommit go through [`init_producer_id_at`] / [`txn_offset_commit_at`] for the
/// version negotiated).
#[derive(Debug, Clone, PartialEq)]
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
            TxnRequest::InitProducerId { current } => Self::InitProducerId(
                InitProducerIdRequest::default()
                    .with_transactional_id(Some(TransactionalId(wire_str(transactional_id))))
                    .with_transaction_timeout_ms(wire_timeout_ms(transaction_timeout_ms))
                    .with_producer_id(ProducerId(current.map_or(-1, |c| c.producer_id)))
                    .with_producer_epoch(current.map_or(-1, |c| c.epoch)),
            ),
            TxnRequest::AddPartitions {
                identity,
                partitions,
            } => {
                let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
                for tp in &partitions {
                    match topics.iter_mut().find(|t| **t.name == *tp.topic) {
                        Some(t) => t.partitions.push(tp.partition),
                        None => topics.push(
                            AddPartitionsToTxnTopic::default()
                                .with_name(TopicName(wire_str(&*tp.topic)))
                                .with_partitions(vec![tp.partition]),
                        ),
                    }
                }
                // A client sends v0–3 (ADD_PARTITIONS_CLIENT_VERSION_CAP), which carry one
                // transaction's fields at the top level; v4+ are the brokers' batched form.
                let message = AddPartitionsToTxnRequest::default()
                    .with_v3_and_below_transactional_id(TransactionalId(wire_str(transactional_id)))
                    .with_v3_and_below_producer_id(ProducerId(identity.producer_id))
                    .with_v3_and_below_producer_epoch(identity.epoch)
                    .with_v3_and_below_topics(topics);
                Self::AddPartitions {
                    message,
                    partitions,
                }
            }
            TxnRequest::AddOffsets { identity, group_id } => Self::AddOffsets(
                AddOffsetsToTxnRequest::default()
                    .with_transactional_id(TransactionalId(wire_str(transactional_id)))
                    .with_producer_id(ProducerId(identity.producer_id))
                    .with_producer_epoch(identity.epoch)
                    .with_group_id(GroupId(wire_str(group_id))),
            ),
            TxnRequest::TxnOffsetCommit {
                identity,
                group,
                offsets,
            } => {
                let mut topics: Vec<TxnOffsetCommitRequestTopic> = Vec::new();
                for o in offsets {
                    let partition = TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(o.partition.partition)
                        .with_committed_offset(o.offset)
                        .with_committed_leader_epoch(o.wire_leader_epoch())
                        .with_committed_metadata(o.metadata.map(StrBytes::from_string));
                    match topics.iter_mut().find(|t| **t.name == *o.partition.topic) {
                        Some(t) => t.partitions.push(partition),
                        None => topics.push(
                            TxnOffsetCommitRequestTopic::default()
                                .with_name(TopicName(wire_str(&*o.partition.topic)))
                                .with_partitions(vec![partition]),
                        ),
                    }
                }
                Self::TxnOffsetCommit(
                    TxnOffsetCommitRequest::default()
                        .with_transactional_id(TransactionalId(wire_str(transactional_id)))
                        .with_group_id(GroupId(wire_str(group.group_id)))
                        .with_producer_id(ProducerId(identity.producer_id))
                        .with_producer_epoch(identity.epoch)
                        .with_generation_id(group.generation_id)
                        .with_member_id(wire_str(group.member_id))
                        .with_group_instance_id(group.group_instance_id.map(StrBytes::from_string))
                        .with_topics(topics),
                )
            }
            TxnRequest::EndTxn { identity, commit } => Self::EndTxn(
                EndTxnRequest::default()
                    .with_transactional_id(TransactionalId(wire_str(transactional_id)))
                    .with_producer_id(ProducerId(identity.producer_id))
                    .with_producer_epoch(identity.epoch)
                    .with_committed(commit),
            ),
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

/// `request` as it goes at `version`. The group member's generation, member id and instance
/// id go from v3 (KIP-447); without them the coordinator cannot fence a stale member (T3), so
/// a broker that takes only older versions cannot commit a member's offsets: an
/// UNSUPPORTED_VERSION error, as in the Java client. Offsets of no member (generation -1, no
/// member id, as with manual assignment) go at any version.
pub(crate) fn txn_offset_commit_at(
    request: TxnOffsetCommitRequest,
    version: i16,
) -> Result<TxnOffsetCommitRequest, Error> {
    let member = request.generation_id != -1
        || !request.member_id.is_empty()
        || request.group_instance_id.is_some();
    if member && version < TXN_OFFSET_COMMIT_MEMBER_FROM {
        return Err(unsupported(format!(
            "TxnOffsetCommit v{version} cannot carry the group member's generation (KIP-447 \
             needs v{TXN_OFFSET_COMMIT_MEMBER_FROM}, Kafka 2.5+)"
        )));
    }
    Ok(request)
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
